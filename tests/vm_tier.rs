//! The full-kernel tier: boots the stock Debian kernel in a VM (scripts/vm-tier/run.sh) and checks that
//! the production device kinds (VRF, dummy, 802.1Q VLAN, OVS kernel datapath) work there, that FRR's
//! leak-VRF configuration works on them, that a Rust test binary runs inside it, and that a hung
//! payload is killed and reported.
//!
//! Every test here boots a VM (10–25 s each under TCG), so they are `#[ignore]`d in the default
//! `cargo test` and run by `scripts/vm-tier/test.sh`, which CI calls explicitly. Run as root after
//! `scripts/vm-tier/prepare.sh`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `scripts/vm-tier/run.sh [env...] -- command...` from the crate root and returns its output.
fn run_in_vm(env: &[(&str, &str)], command: &[&str]) -> Output {
    let root = crate_root();
    let run = root.join("scripts/vm-tier/run.sh");
    let mut cmd = Command::new(&run);
    cmd.current_dir(&root);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.arg("--").args(command);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", run.display()));
    // Shown on failure (and with --nocapture): the VM's output and run.sh's own report.
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_prepared() {
    let state = Path::new(
        &std::env::var("VM_CACHE").unwrap_or_else(|_| "/var/cache/ovn-bgp-agent-vm".into()),
    )
    .join("prepared.env");
    assert!(
        state.is_file(),
        "the VM tier is not prepared ({} missing): run scripts/vm-tier/prepare.sh as root, \
         or use scripts/vm-tier/test.sh which does",
        state.display()
    );
}

#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~1 min)"]
fn kernel_kinds_payload_passes_in_the_vm() {
    assert_prepared();
    let output = run_in_vm(&[], &["scripts/vm-tier/payloads/kernel-kinds.sh"]);
    let all = text(&output);
    assert!(
        output.status.success(),
        "kernel-kinds payload failed ({})",
        output.status
    );
    for check in [
        "PASS: modprobe vrf",
        "PASS: modprobe dummy",
        "PASS: modprobe 8021q",
        "PASS: modprobe openvswitch",
        "PASS: t-vrf is a vrf on table 10",
        "PASS: t-dummy is a dummy",
        "PASS: t-dummy's connected route is in vrf t-vrf",
        "PASS: t-dummy.100 is vlan 802.1Q id 100",
        "PASS: add bridge t-br-ex (datapath_type=system)",
        "PASS: the kernel datapath ovs-system exists",
        "PASS: t-br-ex is an openvswitch kernel link",
        "PASS: t-dummy.100 is in the kernel datapath",
        "PASS: the kernel datapath has conntrack zones",
    ] {
        assert!(all.contains(check), "missing '{check}' in the VM output");
    }
    assert!(
        all.contains("checks passed (vrf, dummy, vlan, openvswitch kernel datapath)"),
        "kernel-kinds did not report completion"
    );
    assert!(
        all.contains("kernel-kinds: kernel 6.1.0-"),
        "the payload did not run on the Debian 6.1 kernel"
    );
}

#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~1 min)"]
fn frr_leak_vrf_configuration_works_on_real_vrf_and_dummy() {
    assert_prepared();
    let output = run_in_vm(&[], &["scripts/vm-tier/payloads/frr-vrf-leak.sh"]);
    let all = text(&output);
    assert!(
        output.status.success(),
        "frr-vrf-leak payload failed ({})",
        output.status
    );
    for check in [
        "PASS: zebra knows bgp-vrf with table 10",
        "PASS: 203.0.113.5/32 is in the VRF instance's BGP table",
        "PASS: 203.0.113.5/32 is leaked into the default instance (nexthop in the VRF)",
    ] {
        assert!(all.contains(check), "missing '{check}' in the VM output");
    }
}

/// On the host this boots the VM and runs this very test binary there through
/// payloads/cargo-tests.sh, filtered to this test; inside the VM (VM_TIER=1) it does the checks.
#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~1 min)"]
fn rust_test_binary_runs_in_the_vm_with_real_vrf_dummy_vlan() {
    const NAME: &str = "rust_test_binary_runs_in_the_vm_with_real_vrf_dummy_vlan";
    if std::env::var("VM_TIER").as_deref() == Ok("1") {
        inside_vm_create_vrf_dummy_vlan();
        return;
    }
    assert_prepared();
    let me = std::env::current_exe().expect("path of this test binary");
    let me = me.to_str().expect("test binary path is UTF-8");
    let output = run_in_vm(
        &[],
        &[
            "scripts/vm-tier/payloads/cargo-tests.sh",
            me,
            NAME,
            "--exact",
            "--include-ignored",
            "--nocapture",
        ],
    );
    let all = text(&output);
    assert!(
        output.status.success(),
        "the test binary failed in the VM ({})",
        output.status
    );
    assert!(
        all.contains(&format!("test {NAME} ... ok")),
        "the VM did not report this test as passed"
    );
    assert!(
        all.contains("test result: ok. 1 passed"),
        "the VM did not run exactly one test"
    );
    assert!(
        all.contains("inside the VM: vrf, dummy and vlan created in netns vmt-kinds"),
        "the in-VM half did not report its checks"
    );
}

/// The in-VM half: what a `OVN_BGP_AGENT_TEST_KERNEL=full` test must be able to rely on.
fn inside_vm_create_vrf_dummy_vlan() {
    assert_eq!(
        std::env::var("OVN_BGP_AGENT_TEST_KERNEL").as_deref(),
        Ok("full"),
        "payloads/cargo-tests.sh must set OVN_BGP_AGENT_TEST_KERNEL=full"
    );
    let netns = "vmt-kinds";
    let ip = |args: &[&str]| -> String {
        let out = Command::new("ip")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run ip {args:?}: {e}"));
        assert!(
            out.status.success(),
            "ip {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ip(&["netns", "add", netns]);
    // No modprobe first: the agent relies on the kernel loading vrf/dummy/8021q on demand.
    ip(&[
        "-n", netns, "link", "add", "bgp-vrf", "type", "vrf", "table", "10",
    ]);
    ip(&["-n", netns, "link", "add", "bgp-nic", "type", "dummy"]);
    ip(&["-n", netns, "link", "set", "bgp-nic", "master", "bgp-vrf"]);
    ip(&[
        "-n",
        netns,
        "link",
        "add",
        "link",
        "bgp-nic",
        "name",
        "br-ex.100",
        "type",
        "vlan",
        "id",
        "100",
    ]);
    let vrf = ip(&["-n", netns, "-d", "link", "show", "bgp-vrf"]);
    assert!(vrf.contains("vrf table 10"), "bgp-vrf is not a VRF: {vrf}");
    let nic = ip(&["-n", netns, "-d", "link", "show", "bgp-nic"]);
    assert!(
        nic.contains("master bgp-vrf") && nic.contains("\n    dummy"),
        "bgp-nic is not a dummy in bgp-vrf: {nic}"
    );
    let vlan = ip(&["-n", netns, "-d", "link", "show", "br-ex.100"]);
    assert!(
        vlan.contains("vlan protocol 802.1Q id 100"),
        "br-ex.100 is not an 802.1Q VLAN: {vlan}"
    );
    ip(&["netns", "delete", netns]);
    println!("inside the VM: vrf, dummy and vlan created in netns {netns}");
}

#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~1 min)"]
fn payload_exit_code_comes_back_to_the_host() {
    assert_prepared();
    let output = run_in_vm(
        &[],
        &[
            "sh",
            "-c",
            "echo \"in the VM: VM_TIER=$VM_TIER kernel $(uname -r)\"; exit 7",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(7),
        "run.sh must exit with the payload's code"
    );
    let all = text(&output);
    assert!(
        all.contains("in the VM: VM_TIER=1 kernel 6.1.0-"),
        "the payload's output was not shown"
    );
}

#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~1 min)"]
fn hung_payload_is_killed_at_the_timeout_and_reported() {
    assert_prepared();
    let output = run_in_vm(
        &[("VM_TIMEOUT", "20")],
        &["sh", "-c", "echo about to hang; sleep 3600"],
    );
    assert_eq!(
        output.status.code(),
        Some(124),
        "a hung payload must exit 124"
    );
    let all = text(&output);
    assert!(all.contains("payload hung"), "no 'payload hung' report");
    assert!(
        all.contains("last console lines"),
        "the console tail was not shown"
    );
    assert!(
        all.contains("about to hang"),
        "the payload's output so far was not shown"
    );
    let pid: u32 = all
        .lines()
        .find_map(|l| l.strip_prefix("vm-tier: qemu pid "))
        .and_then(|rest| rest.split(',').next())
        .and_then(|p| p.trim().parse().ok())
        .expect("run.sh reports the qemu pid");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "qemu (pid {pid}) was left behind"
    );
}
