//! oslo.log's options set in the configuration file, against the real agent binary: the log
//! file (O_APPEND, moved by logrotate, SIGHUP), JSON lines, syslog on /dev/log and journald's
//! native socket. syslog and journald are test listeners bind-mounted over /dev and /run in a
//! private mount namespace of the agent (`unshare -m`, as root), so the agent uses its real
//! paths, and neither this machine's /dev/log nor its journal is involved.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("oba-logging-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A configuration the agent refuses at start (after logging is set up): one ERROR line, exit.
const REFUSED: &str = "driver = ovn_bgp_driver\nexposing_method = vrf\n";
const REFUSAL: &str = "ovn_bgp_driver does not support exposing_method = vrf";

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<String>) {
    let step = Duration::from_millis(100);
    let mut last = String::new();
    for _ in 0..timeout.as_millis() / step.as_millis() {
        match check() {
            None => return,
            Some(state) => last = state,
        }
        std::thread::sleep(step);
    }
    panic!("{what}: not within {timeout:?}; last seen:\n{last}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The open-file flags (octal, from /proc) of the agent's descriptor on `path`.
fn open_flags(pid: u32, path: &Path) -> u32 {
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let fd = fd.unwrap();
        if std::fs::read_link(fd.path()).ok().as_deref() == Some(path) {
            let info = std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                fd.file_name().to_str().unwrap()
            ))
            .unwrap();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .unwrap()
                .trim();
            return u32::from_str_radix(flags, 8).unwrap();
        }
    }
    panic!("the agent has no descriptor on {}", path.display());
}

fn sigterm(child: &mut Child) {
    // kill(1) on the pid of the child this test started.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// `[DEFAULT] log_dir` + `log_file` from the file: lines land in the file (appended to what is
/// there, O_APPEND), nothing on stderr; after `mv` and SIGHUP the agent keeps running and logs
/// into a new file; SIGHUP applied the file's new `debug` and `use_json` and named the changed
/// option that waits for a restart.
#[test]
fn log_file_from_the_config_file_survives_logrotate_and_sighup_reloads_logging() {
    let tmp = TempDir::new("rotate");
    let conf_text = |extra: &str| {
        format!(
            "[DEFAULT]\nlog_dir = {dir}\nlog_file = agent.log\n\
             ovsdb_connection = unix:{dir}/no-ovs.sock\n{extra}\
             [ovn]\novn_sb_connection = unix:{dir}/no-sb.sock\n",
            dir = tmp.0.display()
        )
    };
    let conf = tmp.write("bgp-agent.conf", &conf_text(""));
    let log = tmp.write("agent.log", "a line written before the agent started\n");
    let stderr_file = std::fs::File::create(tmp.0.join("stderr")).unwrap();
    let mut child = agent()
        .args(["--config-file", conf.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(stderr_file)
        .spawn()
        .unwrap();
    let pid = child.id();

    wait_for(
        "the agent's first lines in log_file",
        Duration::from_secs(20),
        || {
            let text = read(&log);
            (!(text.contains("starting") && text.contains("OVSDB session ended"))).then_some(text)
        },
    );
    let text = read(&log);
    assert!(
        text.starts_with("a line written before the agent started\n"),
        "{text}"
    );
    assert!(!text.contains("DEBUG"), "debug is off: {text}");
    assert_ne!(
        open_flags(pid, &log) & libc::O_APPEND as u32,
        0,
        "log file not opened with O_APPEND"
    );

    // logrotate: move, then SIGHUP, with a configuration changed meanwhile.
    let rotated = tmp.0.join("agent.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    std::fs::write(
        &conf,
        conf_text("debug = true\nuse_json = true\nreconcile_interval = 60\n"),
    )
    .unwrap();
    let status = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());

    wait_for(
        "the reload in the new log file",
        Duration::from_secs(20),
        || {
            let text = read(&log);
            (!text.contains("SIGHUP: debug logging is on")).then_some(text)
        },
    );
    let text = read(&log);
    let reread = text
        .lines()
        .find(|l| l.contains("configuration re-read"))
        .unwrap_or_else(|| panic!("{text}"));
    let reread: serde_json::Value =
        serde_json::from_str(reread).unwrap_or_else(|e| panic!("use_json applied: {e}: {reread}"));
    assert_eq!(reread["fields"]["debug"], true, "{reread}");
    assert!(
        text.contains(
            "SIGHUP: [DEFAULT] reconcile_interval changed to \\\"60\\\"; it takes effect at the next restart"
        ),
        "{text}"
    );
    assert!(
        !read(&rotated).contains("re-read"),
        "the moved file got new lines"
    );
    // Still running, still logging (the next OVSDB retry) into the new file.
    wait_for("a line after the reload", Duration::from_secs(20), || {
        let text = read(&log);
        let after = text
            .split("SIGHUP: debug logging is on")
            .nth(1)
            .unwrap_or("");
        (!after.contains("OVSDB session ended")).then_some(text.clone())
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP stopped the agent"
    );
    assert_eq!(
        open_flags(pid, &log) & libc::O_APPEND as u32,
        libc::O_APPEND as u32
    );
    sigterm(&mut child);
    let stderr = read(&tmp.0.join("stderr"));
    assert!(
        stderr.is_empty(),
        "a log file and no use_stderr: nothing on stderr, got:\n{stderr}"
    );
}

/// `[DEFAULT] use_json` from the file: every line of the log file is one JSON object; the
/// command line's `--log-format text` overrides it, and `--use-json` turns it on.
#[test]
fn use_json_from_the_config_file_and_the_command_line_override() {
    let tmp = TempDir::new("json");
    let log = tmp.0.join("agent.log");
    let conf = tmp.write(
        "bgp-agent.conf",
        &format!(
            "[DEFAULT]\n{REFUSED}use_json = true\nlog_file = {}\n",
            log.display()
        ),
    );
    let out = agent()
        .args(["--config-file", conf.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_json_lines_with_the_refusal(&read(&log));

    std::fs::remove_file(&log).unwrap();
    let out = agent()
        .args([
            "--config-file",
            conf.to_str().unwrap(),
            "--log-format",
            "text",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = read(&log);
    assert!(text.contains(REFUSAL), "{text}");
    assert!(
        text.lines().all(|l| !l.starts_with('{')),
        "--log-format text overrides use_json: {text}"
    );

    // --use-json (and --log-file) with a file that sets neither.
    std::fs::remove_file(&log).unwrap();
    let plain = tmp.write("plain.conf", &format!("[DEFAULT]\n{REFUSED}"));
    let out = agent()
        .args(["--config-file", plain.to_str().unwrap(), "--use-json"])
        .args(["--log-file", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_json_lines_with_the_refusal(&read(&log));
}

/// Every line one JSON object, one of them the ERROR with [`REFUSAL`].
fn assert_json_lines_with_the_refusal(text: &str) {
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["level"] == "ERROR"
            && l["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(REFUSAL)),
        "{text}"
    );
}

/// The agent run in a private mount namespace with `setup` (shell) done first.
fn agent_in_mount_namespace(setup: &str, args: &[&str]) -> Output {
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-ec"])
        .arg(format!("{setup}\nexec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
        .args(args)
        .output()
        .expect("unshare (util-linux) runs the agent in its own mount namespace (needs root)")
}

fn datagrams(socket: &UnixDatagram) -> Vec<Vec<u8>> {
    socket.set_nonblocking(true).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    while let Ok(n) = socket.recv(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// `[DEFAULT] use_syslog` with `syslog_log_facility = local3`: each line is a datagram on
/// /dev/log as syslog(3) writes it, with the facility and the line's severity; without
/// log_file the lines also go to stderr (oslo.log's rule).
#[test]
fn use_syslog_sends_each_line_to_dev_log() {
    let tmp = TempDir::new("syslog");
    let dev = tmp.0.join("dev");
    std::fs::create_dir_all(&dev).unwrap();
    let listener = UnixDatagram::bind(dev.join("log")).unwrap();
    std::fs::write(dev.join("null"), "").unwrap();
    let conf = tmp.write(
        "bgp-agent.conf",
        &format!("[DEFAULT]\n{REFUSED}use_syslog = true\nsyslog_log_facility = local3\n"),
    );
    let setup = format!(
        "mount --bind /dev/null {dev}/null\nmount --rbind {dev} /dev",
        dev = dev.display()
    );
    let out = agent_in_mount_namespace(&setup, &["--config-file", conf.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(REFUSAL),
        "no log file: stderr too: {stderr}"
    );
    let lines: Vec<String> = datagrams(&listener)
        .into_iter()
        .map(|d| String::from_utf8(d).unwrap())
        .collect();
    // local3 (19) * 8 + err (3).
    let error = lines
        .iter()
        .find(|l| l.contains(REFUSAL))
        .unwrap_or_else(|| panic!("no syslog line with the refusal: {lines:?}"));
    assert!(error.starts_with("<155>"), "{error}");
    let after_pri = &error[5..];
    // `Mmm dd hh:mm:ss ovn-bgp-agent[pid]: `
    assert_eq!(&after_pri[15..16], " ", "{error}");
    assert!(
        after_pri[16..].starts_with("ovn-bgp-agent["),
        "syslog(3)'s tag: {error}"
    );
    assert!(error.contains("]: "), "{error}");
    assert!(!error.ends_with('\n'), "{error:?}");
}

/// One journald native-protocol datagram as fields (`NAME=value\n`, or `NAME\n` + 64-bit
/// little-endian length + value + `\n`).
fn journal_fields(mut d: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while !d.is_empty() {
        let end = d.iter().position(|&b| b == b'\n').expect("field ends");
        let line = &d[..end];
        if let Some(eq) = line.iter().position(|&b| b == b'=') {
            out.push((
                String::from_utf8(line[..eq].to_vec()).unwrap(),
                line[eq + 1..].to_vec(),
            ));
            d = &d[end + 1..];
        } else {
            let name = String::from_utf8(line.to_vec()).unwrap();
            let rest = &d[end + 1..];
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            out.push((name, rest[8..8 + len].to_vec()));
            d = &rest[8 + len + 1..];
        }
    }
    out
}

fn field<'a>(fields: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_slice())
}

/// `[DEFAULT] use_journal`: each line is a native-protocol datagram on
/// /run/systemd/journal/socket with MESSAGE, PRIORITY and SYSLOG_IDENTIFIER; with no journald
/// listening, the agent says so and runs on.
#[test]
fn use_journal_speaks_journald_native_protocol() {
    let tmp = TempDir::new("journal");
    let run = tmp.0.join("run");
    std::fs::create_dir_all(run.join("systemd/journal")).unwrap();
    let conf = tmp.write(
        "bgp-agent.conf",
        &format!("[DEFAULT]\n{REFUSED}use_journal = true\n"),
    );
    let setup = format!("mount --bind {} /run", run.display());

    // Nobody listening yet.
    let out = agent_in_mount_namespace(&setup, &["--config-file", conf.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("use_journal: journald is not listening on /run/systemd/journal/socket"),
        "{stderr}"
    );
    assert!(
        stderr.contains(REFUSAL),
        "the agent ran on to its own error: {stderr}"
    );

    let listener = UnixDatagram::bind(run.join("systemd/journal/socket")).unwrap();
    let out = agent_in_mount_namespace(&setup, &["--config-file", conf.to_str().unwrap()]);
    assert!(!out.status.success());
    let entries: Vec<Vec<(String, Vec<u8>)>> = datagrams(&listener)
        .iter()
        .filter(|d| !d.is_empty()) // tracing-journald's connection probe
        .map(|d| journal_fields(d))
        .collect();
    let refusal = entries
        .iter()
        .find(|f| field(f, "MESSAGE").is_some_and(|m| String::from_utf8_lossy(m).contains(REFUSAL)))
        .unwrap_or_else(|| panic!("no journal entry with the refusal: {entries:?}"));
    assert_eq!(field(refusal, "PRIORITY"), Some(&b"3"[..]));
    assert_eq!(
        field(refusal, "SYSLOG_IDENTIFIER"),
        Some(&b"ovn-bgp-agent"[..])
    );
}

/// oslo.log's old names `logfile`/`logdir` still work, with a deprecation warning; a bad
/// `syslog_log_facility` is a configuration error naming the choices.
#[test]
fn deprecated_names_and_a_bad_facility() {
    let tmp = TempDir::new("deprecated");
    let conf = tmp.write(
        "bgp-agent.conf",
        &format!(
            "[DEFAULT]\n{REFUSED}logdir = {}\nlogfile = old.log\n",
            tmp.0.display()
        ),
    );
    let out = agent()
        .args(["--config-file", conf.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = read(&tmp.0.join("old.log"));
    assert!(text.contains(REFUSAL), "{text}");
    assert!(
        text.contains("[DEFAULT] logfile is deprecated; use [DEFAULT] log_file"),
        "{text}"
    );

    let bad = tmp.write(
        "bad.conf",
        "[DEFAULT]\nuse_syslog = true\nsyslog_log_facility = LOG_NOPE\n",
    );
    let out = agent()
        .args(["check-config", "--config-file", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[DEFAULT] syslog_log_facility = \"LOG_NOPE\": expected a syslog facility: LOG_KERN, LOG_USER"),
        "{stderr}"
    );
}
