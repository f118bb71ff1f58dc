//! The command line upstream deployments use (oslo.log flags) and where the logs go.

use std::process::Command;

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("oba-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn oslo_log_flags_are_accepted_and_logs_go_to_the_log_file() {
    let dir = temp_dir("logfile");
    let conf = dir.join("bgp-agent.conf");
    // A pair the driver does not support: the agent must fail at start, and say why in its log.
    std::fs::write(
        &conf,
        "[DEFAULT]\ndriver = ovn_bgp_driver\nexposing_method = vrf\n",
    )
    .unwrap();
    let out = agent()
        .args(["--config-file", conf.to_str().unwrap()])
        .args([
            "--log-dir",
            dir.to_str().unwrap(),
            "--log-file",
            "agent.log",
        ])
        .args(["-d", "--use-syslog"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(dir.join("agent.log")).expect("log file written");
    assert!(
        log.contains("--use-syslog is an oslo.log option this agent accepts and ignores"),
        "{log}"
    );
    assert!(
        log.contains("ovn_bgp_driver does not support exposing_method = vrf"),
        "{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "no terminal colours in a log file: {log:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = temp_dir("json");
    let conf = dir.join("bgp-agent.conf");
    std::fs::write(&conf, "[DEFAULT]\nexposing_method = l2vni\n").unwrap();
    let log = dir.join("agent.log");
    let out = agent()
        .args(["--config-file", conf.to_str().unwrap(), "--use-json"])
        .args(["--log-file", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["level"] == "ERROR"
            && l["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("exposing_method = l2vni")),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unwritable_log_file_is_a_clear_error() {
    let out = agent()
        .args(["--log-file", "/nonexistent-dir/agent.log"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--log-file /nonexistent-dir/agent.log"),
        "{err}"
    );
}
