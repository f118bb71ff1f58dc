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
        .args(["-d", "-v"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(dir.join("agent.log")).expect("log file written");
    assert!(
        log.contains("--verbose is an oslo.log option this agent accepts and ignores"),
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
fn an_unwritable_log_file_is_a_clear_error() {
    let out = agent()
        .args(["--log-file", "/nonexistent-dir/agent.log"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open the log file /nonexistent-dir/agent.log (--log-file): "),
        "{err}"
    );
}

fn replay_fixture(case: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/sb_bgp")
        .join(case)
}

/// `replay` prints every step's conditions and exposures and succeeds on a case whose expected
/// files match this build.
#[test]
fn replay_prints_each_step_of_a_recorded_case() {
    let out = agent()
        .args(["replay", replay_fixture("gateway_moves").to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for wanted in [
        "== step 00 (00-db.json)",
        "== step 01 (01-update.json): cr-lrp-R1 becomes bound on ch-1",
        "== step 02 (02-update.json): cr-lrp-R1 moves to ch-3",
        "logical_port == \"S1\"",
        "10.0.0.1/24              tenant_subnet      lrp-S1  via 172.24.100.5 on public/br-ex",
        "-> as 02-expected.json",
    ] {
        assert!(stdout.contains(wanted), "{wanted:?} not in:\n{stdout}");
    }
}

/// A case whose expected output no longer matches fails naming the first differing step with a
/// diff; `--update` rewrites the expected files, after which it passes.
#[test]
fn replay_names_the_first_differing_step_and_update_rewrites_it() {
    let dir = temp_dir("replay");
    let case = dir.join("case");
    std::fs::create_dir_all(&case).unwrap();
    for entry in std::fs::read_dir(replay_fixture("provider_vm_lifecycle")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, case.join(path.file_name().unwrap())).unwrap();
    }
    // Pretend step 02 was recorded with vm5 still exposed: take step 01's expectation.
    std::fs::copy(case.join("01-expected.json"), case.join("02-expected.json")).unwrap();
    let out = agent()
        .args(["replay", case.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("step 02 (02-update.json): the output differs from 02-expected.json"),
        "{stderr}"
    );
    assert!(
        stderr.contains("- ") && stderr.contains("172.24.100.50"),
        "{stderr}"
    );
    assert!(!stderr.contains("step 03"), "{stderr}");

    let out = agent()
        .args(["replay", case.to_str().unwrap(), "--update"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(case.join("02-expected.json")).unwrap(),
        std::fs::read_to_string(replay_fixture("provider_vm_lifecycle").join("02-expected.json"))
            .unwrap()
    );
    let out = agent()
        .args(["replay", case.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Logs to a pipe (a journal, a redirect) carry no ANSI colour codes; NO_COLOR is honoured.
#[test]
fn logs_on_a_pipe_carry_no_colour_codes() {
    let dir = temp_dir("nocolour");
    let conf = dir.join("bgp-agent.conf");
    std::fs::write(
        &conf,
        "[DEFAULT]\ndriver = ovn_bgp_driver\nexposing_method = vrf\n",
    )
    .unwrap();
    for no_color in [None, Some("1")] {
        let mut cmd = agent();
        cmd.args(["--config-file", conf.to_str().unwrap()]);
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("ERROR") && stderr.contains("does not support exposing_method = vrf"),
            "{stderr}"
        );
        assert!(!stderr.contains('\u{1b}'), "escape codes in {stderr:?}");
    }
}
