//! Running an external tool (`vtysh`, `ovs-vsctl`, `ovs-ofctl`) as an argument vector, never
//! through a shell, with a deadline.
//!
//! The child runs in its own process group so that a timeout kills everything it started (a
//! wrapper script's `sleep`, a pager), not just the direct child: a hung tool must never hold the
//! agent's reconcile loop.
//!
//! The agent holds privileges (root, or `CAP_NET_ADMIN`), so a tool gets nothing from the
//! agent's environment: only a fixed `PATH` and `LANG=C` (stable, parseable output) and what
//! the caller sets (`OVS_RUNDIR`). Tools are named by absolute path, resolved once at start
//! ([`resolve_tool`]). What a tool prints is read up to a cap ([`Invocation::max_output`]); a
//! tool printing more is killed.
//!
//! Nor does a tool get the agent's capabilities: the tools only talk to daemons over unix
//! sockets, which needs file access, not capabilities. At start, before any other thread
//! exists, the agent clears its ambient and inheritable sets, which only ever matter for the
//! programs it runs (a non-root agent's tools then run with none at all), and sets
//! `no_new_privs` (no setuid or file-capability gain); see [`restrict_tool_capabilities`]. A
//! root process regains every capability in its bounding set at exec, so a root agent also
//! shrinks its bounding set to [`ROOT_TOOL_CAPABILITIES`]: `CAP_DAC_OVERRIDE`, which root needs
//! to reach sockets owned by other users (FRR's vty sockets are `frr:frrvty 0770`). None of
//! this touches what the agent itself may do (its effective and permitted sets). It is done
//! once in the agent rather than between fork and exec of each tool: a `pre_exec` hook turns
//! the spawn into a full `fork`, which copies the agent's page tables (11 ms instead of 1.4 ms
//! per tool run with 300 MB resident). Shrinking the bounding set needs `CAP_SETPCAP`; without
//! it (a container that dropped it) root's tools keep root's capabilities, which the start-time
//! privilege check reports.

// Unsafe code allowed in this file only: the capability system calls of
// `restrict_tool_capabilities`, `geteuid`, and `kill` of a tool's process group.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// The `PATH` a tool runs with (and where a bare tool name is looked up when the agent's own
/// environment has no `PATH`).
pub const TOOL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Default cap on what one run may print on stdout: `ovs-ofctl dump-flows` of 10k flows is a
/// few MB.
pub const DEFAULT_MAX_OUTPUT: usize = 64 << 20;
/// Cap on stderr: complaints, not data.
const MAX_STDERR: usize = 1 << 20;

/// The capabilities a tool run by a root agent keeps: `CAP_DAC_OVERRIDE`, to connect to sockets
/// owned by the daemons' own users. A non-root agent's tools keep none.
pub const ROOT_TOOL_CAPABILITIES: u64 = 1 << 1;

/// `capget`/`capset` header and data (`linux/capability.h`, version 3: two 32-bit words).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Makes every program this process runs from now on start without its capabilities (as
/// root: with [`ROOT_TOOL_CAPABILITIES`] only), leaving what the process itself may do alone.
///
/// Capability sets and `no_new_privs` belong to a thread, and a new thread copies them from the
/// thread that creates it: call this before any other thread exists (first thing in `main`),
/// so that every thread, and every program any of them runs, has the restricted sets.
/// Best effort: a kernel without ambient capabilities (before 4.3) or a root without
/// `CAP_SETPCAP` leaves that part as it was, which the start-time privilege check reports.
pub(crate) fn restrict_tool_capabilities() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let keep = if root { ROOT_TOOL_CAPABILITIES } else { 0 };
    // SAFETY: prctl and capget/capset with valid pointers to local, properly laid out structs;
    // they change only the calling thread's credentials, and no other thread exists yet.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) == 0 {
            data[0].inheritable &= keep as u32;
            data[1].inheritable &= (keep >> 32) as u32;
            libc::syscall(libc::SYS_capset, &mut header, data.as_ptr());
        }
        if root {
            for cap in (0..64u32).filter(|c| keep & (1u64 << c) == 0) {
                libc::prctl(
                    libc::PR_CAPBSET_DROP,
                    libc::c_ulong::from(cap),
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                );
            }
        }
        libc::prctl(
            libc::PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// What a finished tool printed and how it exited.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ProcessOutput {
    /// stdout and stderr together, trimmed, for error messages (tools differ in where they
    /// print their complaints: vtysh uses stdout, ovs-ofctl stderr).
    pub fn combined_output(&self) -> String {
        let mut text = String::new();
        for part in [self.stdout.trim(), self.stderr.trim()] {
            if !part.is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(part);
            }
        }
        text
    }
}

/// Why a tool could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not finish within {timeout:?} and was killed")]
    Timeout { program: PathBuf, timeout: Duration },
    #[error("waiting for {program} failed: {source}")]
    Wait {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} printed more than {limit} bytes on {stream} and was killed")]
    OutputTooLarge {
        program: PathBuf,
        stream: &'static str,
        limit: usize,
    },
}

/// A tool that could not be found at start.
#[derive(Debug, thiserror::Error)]
#[error("{option} = {configured:?}: {reason}")]
pub struct ToolNotFound {
    /// The option that names the tool, e.g. `[frr] vtysh_path`.
    pub option: String,
    pub configured: String,
    pub reason: String,
}

/// The absolute path of a tool: `configured` itself when it names a path, else the first
/// executable of that name in `search_path` (the agent's `PATH` at start). `option` names the
/// setting for the error.
pub fn resolve_tool(
    option: &str,
    configured: &str,
    search_path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, ToolNotFound> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |reason: String| ToolNotFound {
        option: option.to_owned(),
        configured: configured.to_owned(),
        reason,
    };
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if configured.contains('/') {
        let path = PathBuf::from(configured);
        let path = if path.is_absolute() {
            path
        } else {
            std::env::current_dir()
                .map_err(|e| fail(format!("cannot resolve a relative path: {e}")))?
                .join(path)
        };
        return if executable(&path) {
            Ok(path)
        } else {
            Err(fail("no executable file there".into()))
        };
    }
    let search = search_path.unwrap_or(std::ffi::OsStr::new(TOOL_PATH));
    std::env::split_paths(search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(configured))
        .find(|p| executable(p))
        .ok_or_else(|| fail(format!("not found in PATH ({})", search.to_string_lossy())))
}

/// [`resolve_tool`] with the agent's `PATH`; a tool that is missing is logged at start, naming
/// the option, and kept as configured (each use then fails with the spawn error): a backend
/// that never runs that tool must not be stopped by its absence.
pub fn resolve_tool_or_warn(option: &str, configured: &str) -> PathBuf {
    match resolve_tool(option, configured, std::env::var_os("PATH").as_deref()) {
        Ok(path) => path,
        Err(e) => {
            tracing::error!("{e}; every use of this tool will fail");
            PathBuf::from(configured)
        }
    }
}

/// Reads `pipe` to its end, or fails once it has produced more than `limit` bytes.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    limit: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let Some(pipe) = pipe else {
        return Ok(Some(Vec::new()));
    };
    let mut out = Vec::new();
    pipe.take(limit as u64 + 1).read_to_end(&mut out).await?;
    Ok((out.len() <= limit).then_some(out))
}

/// One invocation: program, arguments, extra environment, optional stdin, deadline.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Most bytes read from stdout (see [`DEFAULT_MAX_OUTPUT`]).
    pub max_output: usize,
}

impl Invocation {
    pub fn new(program: impl AsRef<Path>, timeout: Duration) -> Self {
        Self {
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            timeout,
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }

    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn stdin(mut self, data: Vec<u8>) -> Self {
        self.stdin = Some(data);
        self
    }

    /// The command line for error messages (arguments are validated values, so printing them is
    /// safe and tells the operator exactly what ran).
    pub fn display(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    /// Runs to completion or kills the whole process group at the deadline, or as soon as it
    /// prints more than the caps.
    pub async fn run(&self) -> Result<ProcessOutput, RunError> {
        let started = tokio::time::Instant::now();
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .env_clear()
            .env("PATH", TOOL_PATH)
            .env("LANG", "C")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(source) => {
                crate::telemetry::global::subprocess_ran(&self.program, "error", started.elapsed());
                return Err(RunError::Spawn {
                    program: self.program.clone(),
                    source,
                });
            }
        };
        let pgid = child.id();
        if let (Some(data), Some(mut pipe)) = (self.stdin.clone(), child.stdin.take()) {
            // Written concurrently with reading the output so a large input cannot deadlock
            // against a full stdout pipe. A write error shows up as the tool's own failure.
            tokio::spawn(async move {
                let _ = pipe.write_all(&data).await;
                let _ = pipe.shutdown().await;
            });
        }
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let wait = async {
            let (out, err) = tokio::join!(
                read_capped(stdout, self.max_output),
                read_capped(stderr, MAX_STDERR)
            );
            let too_large = |stream, limit| RunError::OutputTooLarge {
                program: self.program.clone(),
                stream,
                limit,
            };
            let wait_err = |source| RunError::Wait {
                program: self.program.clone(),
                source,
            };
            let stdout = out
                .map_err(wait_err)?
                .ok_or_else(|| too_large("stdout", self.max_output))?;
            let stderr = err
                .map_err(wait_err)?
                .ok_or_else(|| too_large("stderr", MAX_STDERR))?;
            let status = child.wait().await.map_err(wait_err)?;
            Ok(ProcessOutput {
                status,
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            })
        };
        let result = match tokio::time::timeout(self.timeout, wait).await {
            Ok(result) => result,
            Err(_elapsed) => Err(RunError::Timeout {
                program: self.program.clone(),
                timeout: self.timeout,
            }),
        };
        let outcome = match &result {
            Ok(out) if out.status.success() => "ok",
            Ok(_) => "failed",
            Err(_) => "error",
        };
        crate::telemetry::global::subprocess_ran(&self.program, outcome, started.elapsed());
        if result.is_err()
            && let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok())
        {
            // SAFETY: kill(2) with a negative pid signals the process group we created for
            // this child (process_group(0) made its pid the group id). Also after a normal
            // exit with an output error: what the tool left running goes too.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn captures_output_and_status() {
        let out = Invocation::new("/bin/sh", Duration::from_secs(5))
            .arg("-c")
            .arg("echo out; echo err >&2; exit 3")
            .run()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.combined_output(), "out\nerr");
    }

    #[tokio::test]
    async fn feeds_stdin() {
        let out = Invocation::new("/bin/cat", Duration::from_secs(5))
            .stdin(b"hello".to_vec())
            .run()
            .await
            .unwrap();
        assert_eq!(out.stdout, "hello");
    }

    /// The tool sees nothing of the agent's environment (cargo's `CARGO_*`, `HOME`, ...): only
    /// the fixed PATH and LANG and what the caller passed.
    #[tokio::test]
    async fn the_environment_is_clean() {
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some() || std::env::var_os("HOME").is_some());
        let out = Invocation::new("/usr/bin/env", Duration::from_secs(5))
            .env("OVS_RUNDIR", "/run/ovs-test")
            .run()
            .await
            .unwrap();
        let mut vars: Vec<&str> = out.stdout.lines().collect();
        vars.sort();
        assert_eq!(
            vars,
            [
                "LANG=C",
                "OVS_RUNDIR=/run/ovs-test",
                &format!("PATH={TOOL_PATH}")
            ]
        );
    }

    /// After [`restrict_tool_capabilities`] a tool gets none of the agent's capabilities: as
    /// root it keeps only `ROOT_TOOL_CAPABILITIES` (root regains its bounding set at exec, so
    /// the bounding set is what is shrunk), otherwise nothing; never ambient or inheritable
    /// ones, and it cannot gain any through setuid or file capabilities (`NoNewPrivs`). The
    /// agent's own effective set is untouched. On a thread of its own: capability sets are per
    /// thread, and the test harness's threads must keep theirs.
    #[test]
    fn a_tool_runs_without_the_agent_capabilities() {
        use crate::caps::privilege::{CAP_SETPCAP, Privileges};
        let thread_status = || {
            Privileges::parse(&std::fs::read_to_string("/proc/thread-self/status").unwrap())
                .unwrap()
        };
        let (agent_before, agent_after, out) = std::thread::spawn(move || {
            let before = thread_status();
            restrict_tool_capabilities();
            let after = thread_status();
            let out = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(
                    Invocation::new("/bin/sh", Duration::from_secs(5))
                        .arg("-c")
                        .arg("cat /proc/$$/status")
                        .run(),
                )
                .unwrap();
            (before, after, out.stdout)
        })
        .join()
        .unwrap();
        let tool = Privileges::parse(&out).unwrap();
        let field = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
                .unwrap_or_else(|| panic!("no {name} in\n{out}"))
        };
        let setpcap = 1u64 << CAP_SETPCAP;
        let expected = match (agent_before.uid, agent_before.effective & setpcap != 0) {
            (0, true) => ROOT_TOOL_CAPABILITIES,
            // A root without CAP_SETPCAP cannot shrink the bounding set (the privilege check
            // warns about it): the tool keeps what root gets at exec.
            (0, false) => agent_before.bounding,
            _ => 0,
        };
        assert_eq!(
            (tool.uid, tool.effective, tool.ambient),
            (agent_before.uid, expected, 0),
            "agent: {agent_before:?}\ntool:\n{out}"
        );
        assert_eq!(
            u64::from_str_radix(&field("CapInh:"), 16).unwrap() & !expected,
            0
        );
        if agent_before.uid == 0 && agent_before.effective & setpcap != 0 {
            assert_eq!(tool.bounding, ROOT_TOOL_CAPABILITIES);
        }
        assert_eq!(field("NoNewPrivs:"), "1");
        // The agent itself may still do all it could.
        assert_eq!(agent_after.effective, agent_before.effective);
    }

    /// A tool printing without end is killed once it passes the cap, long before its deadline.
    #[tokio::test]
    async fn endless_output_is_cut_at_the_cap() {
        let start = tokio::time::Instant::now();
        let err = Invocation::new("/usr/bin/yes", Duration::from_secs(30))
            .max_output(1 << 20)
            .run()
            .await
            .unwrap_err();
        assert!(
            matches!(err, RunError::OutputTooLarge { stream: "stdout", limit, .. } if limit == 1 << 20),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("more than 1048576 bytes on stdout"),
            "{err}"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        let err = Invocation::new("/bin/sh", Duration::from_secs(30))
            .arg("-c")
            .arg("yes >&2")
            .run()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                RunError::OutputTooLarge {
                    stream: "stderr",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn tools_resolve_to_absolute_paths_or_name_the_option() {
        let search = std::ffi::OsStr::new("relative/dir:/nonexistent:/bin:/usr/bin");
        assert_eq!(
            resolve_tool("[x] sh_path", "sh", Some(search)).unwrap(),
            PathBuf::from("/bin/sh")
        );
        assert_eq!(
            resolve_tool("[x] sh_path", "/usr/bin/env", None).unwrap(),
            PathBuf::from("/usr/bin/env")
        );
        let missing = resolve_tool("[ovs] ovs_vsctl_path", "no-such-tool-x", Some(search))
            .unwrap_err()
            .to_string();
        assert!(
            missing.starts_with("[ovs] ovs_vsctl_path = \"no-such-tool-x\": not found in PATH"),
            "{missing}"
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("vtysh");
        std::fs::write(&plain, "not executable").unwrap();
        let err = resolve_tool("[frr] vtysh_path", plain.to_str().unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no executable file there"), "{err}");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let start = tokio::time::Instant::now();
        let err = Invocation::new("/bin/sh", Duration::from_millis(500))
            .arg("-c")
            .arg(script)
            .run()
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Timeout { .. }), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        let proc_path = format!("/proc/{}", pid.trim());
        // The grandchild `sleep` must be gone (or a zombie about to be reaped by init).
        for _ in 0..50 {
            let state = std::fs::read_to_string(format!("{proc_path}/stat")).unwrap_or_default();
            if state.is_empty() || state.contains(") Z") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("grandchild {pid} survived the timeout");
    }
}
