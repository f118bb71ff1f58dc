//! The full-kernel tier: boots the stock Debian kernel in a VM (scripts/vm-tier/run.sh) and checks that
//! the production device kinds (VRF, dummy, 802.1Q VLAN, OVS kernel datapath) work there, that FRR's
//! leak-VRF configuration works on them, that a Rust test binary runs inside it, and that a hung
//! payload is killed and reported.
//!
//! Every test here boots a VM (10–25 s each under TCG), so they are `#[ignore]`d in the default
//! `cargo test` and run by `scripts/vm-tier/test.sh`, which CI calls explicitly. Run as root after
//! `scripts/vm-tier/prepare.sh`.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod agent_fixture;
mod lab_fixture;

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

// ---------------------------------------------------------------------------------------------
// The agent end to end on the production path (issue 6).

/// The VLAN id of the lab's provider network in the VM (localnet `tag`).
const PROVIDER_VLAN: &str = "100";

/// The host half of a test whose in-VM half is this same test binary: boots the VM, runs the
/// test `name` there (payloads/cargo-tests.sh) and requires every `PASS: <check>` line of
/// `checks` and exactly that test reported as passed.
fn run_this_test_in_vm(name: &str, what: &str, checks: &[&str]) {
    assert_prepared();
    let me = std::env::current_exe().expect("path of this test binary");
    let me = me.to_str().expect("test binary path is UTF-8");
    let output = run_in_vm(
        &[],
        &[
            "scripts/vm-tier/payloads/cargo-tests.sh",
            me,
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
        ],
    );
    let all = text(&output);
    assert!(
        output.status.success(),
        "the {what} failed in the VM ({})",
        output.status
    );
    for check in checks {
        assert!(
            all.contains(&format!("PASS: {check}")),
            "missing 'PASS: {check}' in the VM output"
        );
    }
    assert!(
        all.contains(&format!("test {name} ... ok")) && all.contains("test result: ok. 1 passed"),
        "the VM did not report exactly this test as passed"
    );
}

/// On the host this boots the VM and runs this test binary there (payloads/cargo-tests.sh); inside
/// the VM it brings up the lab with `LAB_KERNEL=full` (OVS kernel datapath, the agent's default
/// device kinds vrf + dummy, FRR without the stand-in route-map) and a VLAN provider network, runs
/// the agent binary and checks what it did in the kernel, OVS and at the ToR.
#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~3 min)"]
fn agent_end_to_end_on_the_production_path() {
    const NAME: &str = "agent_end_to_end_on_the_production_path";
    if std::env::var("VM_TIER").as_deref() == Ok("1") {
        production_path::run_inside_the_vm();
        return;
    }
    run_this_test_in_vm(NAME, "agent end-to-end test", production_path::CHECKS);
}

/// The in-VM half of [`agent_end_to_end_on_the_production_path`].
mod production_path {
    use super::PROVIDER_VLAN;
    use crate::agent_fixture::Agent;
    use crate::lab_fixture::{Lab, has, run_ok, wait_for};
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// Every check the in-VM half prints as `PASS: <check>`; the host half requires all of them.
    pub(crate) const CHECKS: &[&str] = &[
        "OVS bridges on the kernel datapath ovs-system, br-ex an openvswitch netdev",
        "the chassis FRR has no stand-in route-map before the agent",
        "the ToR learned the provider VM, gateway, FIP and tenant VM (IPv4 and IPv6)",
        "bgp-vrf is a real vrf on table 10",
        "bgp-nic is a dummy enslaved to bgp-vrf",
        "the exposed addresses are connected routes of table 10 (the VRF), not of main",
        "the chassis FRR carries them through the leak (import vrf bgp-vrf, no route-map)",
        "br-ex.100 is an 802.1Q VLAN id 100 on br-ex",
        "provider routes, neighbour and proxy NDP use br-ex.100",
        "unbinding the provider VM withdraws it at the ToR and in the kernel",
        "rebinding exposes it again",
        "an agent restart sends zero UPDATEs to the ToR",
        "ovs-vswitchd restart: the MAC-tweak flows and br-ex.100 are back",
        "FRR restart: the leak configuration and every route are back at the ToR",
    ];

    /// When the in-VM half started: each PASS line says how far in it is.
    static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

    fn pass(check: &str) {
        assert!(CHECKS.contains(&check), "unlisted check {check}");
        let at = STARTED.get_or_init(Instant::now).elapsed().as_secs_f32();
        println!("PASS: {check} (at {at:.1} s)");
    }

    /// How much slower than the host this VM is (run.sh exports it; 1 outside the VM tier).
    pub(crate) fn time_scale() -> u32 {
        std::env::var("VM_TIER_TIME_SCALE")
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&s| s >= 1)
            .unwrap_or(1)
    }

    /// `base` host seconds, scaled to this VM.
    pub(crate) fn scaled(base_secs: u64) -> Duration {
        Duration::from_secs(base_secs * u64::from(time_scale()))
    }

    fn wait_tor(lab: &Lab, what: &str, pred: impl Fn(&[String]) -> bool) -> Duration {
        let started = Instant::now();
        wait_for(what, scaled(8), || {
            let p = lab.tor_prefixes();
            if pred(&p) {
                Ok(())
            } else {
                Err(format!("ToR has {p:?}"))
            }
        });
        started.elapsed()
    }

    /// Polls `ip -n <chassis> ARGS` until `pred` holds; returns the last output.
    pub(crate) fn wait_ip(
        lab: &Lab,
        what: &str,
        args: &[&str],
        pred: impl Fn(&str) -> bool,
    ) -> String {
        wait_for(what, scaled(8), || {
            let out = lab.ip_chassis(args);
            if pred(&out) { Ok(out) } else { Err(out) }
        })
    }

    /// The ToR's UPDATE count from the chassis once it stayed the same for 3 s (the rebind's
    /// UPDATEs may still be on their way).
    pub(crate) fn settled_updates_received_from_chassis(lab: &Lab) -> u64 {
        let mut last = lab.updates_received_from_chassis();
        wait_for("the ToR's UPDATE count to settle", scaled(3), || {
            std::thread::sleep(Duration::from_secs(3));
            let now = lab.updates_received_from_chassis();
            let settled = now == last;
            last = now;
            if settled {
                Ok(())
            } else {
                Err(format!("{now} UPDATEs"))
            }
        });
        last
    }

    /// Waits until the agent says it is ready (`ovn-bgp-agent health`: databases synced, first
    /// reconcile done), then a little longer for what it applies in the background (FRR, OVS),
    /// so that what it sent after a restart has reached the ToR.
    pub(crate) fn wait_agent_ready_and_applied(lab: &Lab) {
        wait_for("the agent ready", scaled(5), || {
            let health = Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
                .args(["health", "--socket", lab.env("AGENT_CONTROL_SOCKET")])
                .output()
                .expect("run ovn-bgp-agent health");
            if health.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&health.stdout).into_owned())
            }
        });
        std::thread::sleep(scaled(1));
    }

    fn ovs(lab: &Lab, tool: &str, args: &[&str]) -> String {
        run_ok(
            Command::new(tool)
                .env("OVS_RUNDIR", lab.env("OVS_RUNDIR"))
                .arg(format!("--db=unix:{}", lab.env("OVS_SOCK")))
                .args(args),
        )
    }

    fn mac_tweak_flows(lab: &Lab) -> usize {
        lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=0x3e7/-1"])
            .lines()
            .filter(|l| l.contains("cookie=0x3e7"))
            .count()
    }

    /// Kills the daemon whose pid file is `pidfile` (SIGTERM, then waits for it to go).
    fn stop_daemon(pidfile: &str) {
        let pid = std::fs::read_to_string(pidfile)
            .unwrap_or_else(|e| panic!("read {pidfile}: {e}"))
            .trim()
            .to_owned();
        run_ok(Command::new("kill").args(["-TERM", &pid]));
        wait_for(&format!("pid {pid} ({pidfile}) to exit"), scaled(5), || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie (the daemons double-fork: init reaps them).
            let state = stat.rsplit(") ").next().and_then(|r| r.split(' ').next());
            if stat.is_empty() || state == Some("Z") {
                Ok(())
            } else {
                Err(stat)
            }
        });
    }

    fn restart_ovs_vswitchd(lab: &Lab) {
        let dir = lab.env("OVS_RUNDIR").to_owned();
        stop_daemon(&format!("{dir}/ovs-vswitchd.pid"));
        // As scripts/lab/up.sh starts it.
        run_ok(
            Command::new("ip")
                .args(["netns", "exec", lab.ns_chassis(), "ovs-vswitchd"])
                .arg(format!("unix:{}", lab.env("OVS_SOCK")))
                .args(["--detach", "--no-chdir"])
                .arg(format!("--pidfile={dir}/ovs-vswitchd.pid"))
                .arg(format!("--log-file={dir}/ovs-vswitchd.log"))
                .arg(format!("--unixctl={dir}/ovs-vswitchd.ctl"))
                .env("OVS_RUNDIR", &dir)
                .env("OVS_LOGDIR", &dir)
                .env("OVS_DBDIR", &dir)
                .env("OVS_SYSCONFDIR", &dir),
        );
    }

    pub(crate) fn restart_chassis_frr(lab: &Lab) {
        let dir = lab.env("FRR_CHASSIS_DIR").to_owned();
        let run = lab.env("VTY_CHASSIS").to_owned();
        for daemon in ["bgpd", "zebra"] {
            stop_daemon(&format!("{run}/{daemon}.pid"));
        }
        // As scripts/lab/up.sh starts them: each daemon reads its operator configuration.
        for daemon in ["zebra", "bgpd"] {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", lab.ns_chassis()])
                .arg(format!("/usr/lib/frr/{daemon}"))
                .args(["-d", "-u", "frr", "-g", "frr", "-P", "0"]);
            if daemon == "zebra" {
                cmd.args(["-s", "8388608"]);
            }
            cmd.args(["--vty_socket", &run])
                .args(["-z", &format!("{run}/zserv.api")])
                .args(["-i", &format!("{run}/{daemon}.pid")])
                .args(["-f", &format!("{dir}/{daemon}.conf")])
                .args(["--log", &format!("file:{dir}/{daemon}.log")]);
            run_ok(&mut cmd);
            wait_for(&format!("chassis {daemon} vty"), scaled(5), || {
                let out = Command::new("vtysh")
                    .args(["--vty_socket", &run, "--config_dir", &dir, "-d", daemon])
                    .args(["-c", "show version"])
                    .output()
                    .map_err(|e| e.to_string())?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(String::from_utf8_lossy(&out.stderr).into_owned())
                }
            });
        }
    }

    pub(crate) fn run_inside_the_vm() {
        assert_eq!(
            std::env::var("OVN_BGP_AGENT_TEST_KERNEL").as_deref(),
            Ok("full"),
            "payloads/cargo-tests.sh must set OVN_BGP_AGENT_TEST_KERNEL=full"
        );
        let scale = time_scale();
        let lab_timeout = (15 * scale).to_string();
        let started = *STARTED.get_or_init(Instant::now);
        let lab = Lab::start_with_env(&[
            ("LAB_KERNEL", "full"),
            ("LAB_PROVIDER_VLAN", PROVIDER_VLAN),
            ("LAB_TIMEOUT", &lab_timeout),
        ]);
        println!(
            "lab up (LAB_KERNEL=full, VLAN {PROVIDER_VLAN}) in {:?}",
            started.elapsed()
        );
        let vlan_dev = format!("br-ex.{PROVIDER_VLAN}");

        // The kernel datapath: bridges and VM ports are netdevs of ovs-system in the chassis netns.
        let dpif = run_ok(
            Command::new("ovs-appctl")
                .arg("-t")
                .arg(format!("{}/ovs-vswitchd.ctl", lab.env("OVS_RUNDIR")))
                .arg("dpif/show"),
        );
        assert!(dpif.contains("system@ovs-system"), "{dpif}");
        let br_ex = lab.ip_chassis(&["-d", "link", "show", "br-ex"]);
        assert!(br_ex.contains("\n    openvswitch"), "{br_ex}");
        pass("OVS bridges on the kernel datapath ovs-system, br-ex an openvswitch netdev");
        let operator = lab.vtysh_chassis("show running-config");
        assert!(
            !operator.contains("route-map") && !operator.contains("redistribute"),
            "LAB_KERNEL=full must not give the chassis FRR the stand-in's route-map:\n{operator}"
        );
        pass("the chassis FRR has no stand-in route-map before the agent");

        // Agent timers scaled down less than the VM is slow: repairs must still be observable.
        let frr_interval = (scale / 2).max(2);
        let overrides = format!(
            "[DEFAULT]\nreconcile_interval = 600\nfrr_reconcile_interval = {frr_interval}\n\
             [ovs]\nflow_check_interval = {frr_interval}\n"
        );
        let mut agent = Agent::start(lab.dir(), &overrides);

        let vm4 = format!("{}/32", lab.env("VM_PROVIDER_IP4"));
        let vm6 = format!("{}/128", lab.env("VM_PROVIDER_IP6"));
        let gw4 = format!("{}/32", lab.env("GW_IP4"));
        let gw6 = format!("{}/128", lab.env("GW_IP6"));
        let fip = format!("{}/32", lab.env("FIP_IP4"));
        let tenant = format!("{}/32", lab.env("VM_TENANT_IP4"));
        let all = [&vm4, &vm6, &gw4, &gw6, &fip, &tenant];
        let took = wait_tor(&lab, "all exposed routes at the ToR", |p| {
            all.iter().all(|x| has(p, x))
        });
        agent.assert_running();
        println!("the ToR learned every route {took:?} after the agent started");
        pass("the ToR learned the provider VM, gateway, FIP and tenant VM (IPv4 and IPv6)");

        // The agent's devices: a real VRF and a dummy in it.
        let vrf = lab.ip_chassis(&["-d", "link", "show", "bgp-vrf"]);
        assert!(
            vrf.contains("\n    vrf table 10 "),
            "bgp-vrf is not a VRF on table 10:\n{vrf}"
        );
        pass("bgp-vrf is a real vrf on table 10");
        let nic = lab.ip_chassis(&["-d", "link", "show", "bgp-nic"]);
        assert!(
            nic.contains("\n    dummy")
                && nic.contains("master bgp-vrf")
                && nic.contains("vrf_slave table 10"),
            "bgp-nic is not a dummy enslaved to bgp-vrf:\n{nic}"
        );
        pass("bgp-nic is a dummy enslaved to bgp-vrf");
        let table10 = lab.ip_chassis(&["route", "show", "table", "10"])
            + &lab.ip_chassis(&["-6", "route", "show", "table", "10"]);
        let main = lab.ip_chassis(&["route", "show", "table", "main"])
            + &lab.ip_chassis(&["-6", "route", "show", "table", "main"]);
        for ip in [
            lab.env("VM_PROVIDER_IP4"),
            lab.env("GW_IP4"),
            lab.env("FIP_IP4"),
            lab.env("VM_TENANT_IP4"),
            lab.env("VM_PROVIDER_IP6"),
        ] {
            assert!(
                table10.contains(&format!("{ip} dev bgp-nic proto kernel")),
                "{ip} is not a connected route of the VRF's table 10:\n{table10}"
            );
            assert!(
                !main
                    .lines()
                    .any(|l| l.starts_with(&format!("{ip} ")) && l.contains("proto kernel")),
                "{ip} is a connected route of main (no VRF?):\n{main}"
            );
        }
        pass("the exposed addresses are connected routes of table 10 (the VRF), not of main");
        let chassis_cfg = lab.vtysh_chassis("show running-config");
        assert!(
            chassis_cfg.contains("router bgp 64999 vrf bgp-vrf")
                && chassis_cfg.matches("import vrf bgp-vrf").count() == 2
                && !chassis_cfg.contains("route-map"),
            "the chassis FRR does not have (only) the leak configuration:\n{chassis_cfg}"
        );
        let vrf_table = lab.vtysh_chassis("show bgp vrf bgp-vrf ipv4 unicast json");
        let vrf_json: serde_json::Value = serde_json::from_str(&vrf_table).expect("JSON");
        for p in [&vm4, &gw4, &fip, &tenant] {
            assert!(
                vrf_json["routes"].get(p.as_str()).is_some(),
                "{p} is not in the VRF instance's BGP table:\n{vrf_table}"
            );
        }
        let leaked = lab.vtysh_chassis(&format!("show bgp ipv4 unicast {vm4} json"));
        assert!(
            leaked.contains("bgp-vrf"),
            "{vm4} in the default instance is not the leaked VRF route:\n{leaked}"
        );
        pass("the chassis FRR carries them through the leak (import vrf bgp-vrf, no route-map)");

        // The VLAN provider network: the agent's <bridge[:10]>.<vid> device and what uses it.
        let vlan = lab.ip_chassis(&["-d", "link", "show", &vlan_dev]);
        assert!(
            vlan.contains(&format!("{vlan_dev}@br-ex:"))
                && vlan.contains(&format!("vlan protocol 802.1Q id {PROVIDER_VLAN} ")),
            "{vlan_dev} is not an 802.1Q VLAN on br-ex:\n{vlan}"
        );
        pass("br-ex.100 is an 802.1Q VLAN id 100 on br-ex");
        let table = lab.br_ex_table();
        let routes = lab.ip_chassis(&["route", "show", "table", &table])
            + &lab.ip_chassis(&["-6", "route", "show", "table", &table]);
        for want in [
            format!("{} dev {vlan_dev} ", lab.env("VM_PROVIDER_IP4")),
            format!("{} dev {vlan_dev} ", lab.env("FIP_IP4")),
            format!("10.0.0.0/24 via {} dev {vlan_dev} ", lab.env("GW_IP4")),
            format!("{} dev {vlan_dev} ", lab.env("VM_PROVIDER_IP6")),
        ] {
            assert!(
                routes.contains(&want),
                "no '{want}' in table {table}:\n{routes}"
            );
        }
        let neigh = lab.ip_chassis(&["neigh", "show", "dev", &vlan_dev]);
        assert!(
            neigh.contains(&format!(
                "{} lladdr fa:16:3e:00:00:01 PERMANENT",
                lab.env("GW_IP4")
            )),
            "the gateway's neighbour is not on {vlan_dev}:\n{neigh}"
        );
        let proxy = lab.ip_chassis(&["-6", "neigh", "show", "proxy"]);
        assert!(
            proxy.contains(&format!("2001:db8:: dev {vlan_dev} proxy")),
            "{proxy}"
        );
        pass("provider routes, neighbour and proxy NDP use br-ex.100");

        // Unbind the provider VM (Nova removes iface-id) and bind it again.
        let tap = format!("tap{}", &lab.env("VM_PROVIDER_PORT_ID")[..11]);
        ovs(
            &lab,
            "ovs-vsctl",
            &["remove", "Interface", &tap, "external_ids", "iface-id"],
        );
        wait_tor(&lab, "provider VM withdrawn", |p| {
            !has(p, &vm4) && !has(p, &vm6) && has(p, &gw4) && has(p, &fip) && has(p, &tenant)
        });
        let vm_ip = lab.env("VM_PROVIDER_IP4").to_owned();
        wait_ip(
            &lab,
            "provider VM address off bgp-nic",
            &["addr", "show", "dev", "bgp-nic"],
            |a| !a.contains(&format!("{vm_ip}/32")),
        );
        wait_ip(
            &lab,
            "provider VM route gone",
            &["route", "show", "table", &table],
            |r| !r.contains(&format!("{vm_ip} dev")),
        );
        pass("unbinding the provider VM withdraws it at the ToR and in the kernel");
        ovs(
            &lab,
            "ovs-vsctl",
            &[
                "set",
                "Interface",
                &tap,
                &format!("external_ids:iface-id={}", lab.env("VM_PROVIDER_PORT_ID")),
            ],
        );
        wait_tor(&lab, "provider VM exposed again", |p| {
            all.iter().all(|x| has(p, x))
        });
        pass("rebinding exposes it again");

        // Agent restart: nothing withdrawn and re-added, so not a single UPDATE at the ToR.
        let before = settled_updates_received_from_chassis(&lab);
        let starts_before = agent.log().matches("reason=\"start\"").count();
        agent.restart();
        wait_for("the restarted agent's first reconcile", scaled(8), || {
            if agent.log().matches("reason=\"start\"").count() > starts_before {
                Ok(())
            } else {
                Err(agent.log_tail())
            }
        });
        std::thread::sleep(Duration::from_secs(2 * u64::from(frr_interval))); // two repair ticks
        agent.assert_running();
        let after = lab.updates_received_from_chassis();
        assert_eq!(
            after,
            before,
            "the ToR received UPDATEs across an agent restart:\n{}",
            agent.log_tail()
        );
        assert!(all.iter().all(|x| has(&lab.tor_prefixes(), x)));
        pass("an agent restart sends zero UPDATEs to the ToR");

        // ovs-vswitchd restart: OpenFlow tables start empty; the agent's flow check repairs.
        assert_eq!(
            mac_tweak_flows(&lab),
            2,
            "MAC-tweak flows before the restart"
        );
        restart_ovs_vswitchd(&lab);
        wait_for(
            "the MAC-tweak flows back on br-ex",
            scaled(8),
            || match mac_tweak_flows(&lab) {
                2 => Ok(()),
                n => Err(format!("{n} flows\n{}", agent.log_tail())),
            },
        );
        let vlan = wait_ip(
            &lab,
            "br-ex.100 after the vswitchd restart",
            &["-d", "link", "show", &vlan_dev],
            |v| v.contains(&format!("vlan protocol 802.1Q id {PROVIDER_VLAN} ")),
        );
        assert!(vlan.contains(&format!("{vlan_dev}@br-ex:")), "{vlan}");
        wait_tor(&lab, "every route after the vswitchd restart", |p| {
            all.iter().all(|x| has(p, x))
        });
        agent.assert_running();
        pass("ovs-vswitchd restart: the MAC-tweak flows and br-ex.100 are back");

        // FRR restart: the daemons come back with the operator configuration only; the agent
        // re-applies its leak configuration and the ToR learns everything again.
        restart_chassis_frr(&lab);
        wait_for(
            "the leak configuration back in the chassis FRR",
            scaled(8),
            || {
                let cfg = lab.vtysh_chassis("show running-config");
                if cfg.contains("router bgp 64999 vrf bgp-vrf")
                    && cfg.matches("import vrf bgp-vrf").count() == 2
                {
                    Ok(())
                } else {
                    Err(format!("{cfg}\n{}", agent.log_tail()))
                }
            },
        );
        wait_tor(&lab, "every route after the FRR restart", |p| {
            all.iter().all(|x| has(p, x))
        });
        agent.assert_running();
        pass("FRR restart: the leak configuration and every route are back at the ToR");
        agent.stop();
        println!(
            "production path: all checks passed in {:?}",
            started.elapsed()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// EVPN (issue 15): the type-5 realisation on the real kernel, by hand, and the lab's EVPN ToR.

#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~2 min)"]
fn frr_evpn_type5_realisation_works_on_the_real_kernel_against_an_evpn_tor() {
    assert_prepared();
    let output = run_in_vm(&[], &["scripts/vm-tier/payloads/frr-evpn-type5.sh"]);
    let all = text(&output);
    assert!(
        output.status.success(),
        "frr-evpn-type5 payload failed ({})",
        output.status
    );
    for check in [
        "PASS: vrf-1001 is a vrf on table 1001",
        "PASS: br-1001 is a bridge in vrf-1001, up",
        "PASS: vxlan-1001: vxlan id 1001 local 100.65.0.1 dstport 4789 nolearning",
        "PASS: vxlan-1001 is a forwarding port of br-1001",
        "PASS: vxlan-1001's bridge port has learning off and neigh_suppress on",
        "PASS: lo-1001 is a dummy in vrf-1001, up",
        "PASS: table 1001: gateway scope link, subnet via the gateway, unreachable default, no local 10.0.0.10",
        "PASS: the ToR's l2vpn evpn session with the chassis is Established",
        "PASS: vtysh -f ADD_VRF_TEMPLATE (vrf-1001, vni 1001, rd 100.65.0.1:1001, rt 64999:1001)",
        "PASS: zebra on the chassis has L3VNI 1001 up (vxlan-1001, br-1001, vrf-1001)",
        "PASS: the ToR learns 10.0.0.10/32 (type 5, RD 100.65.0.1:1001, RT 64999:1001, Rmac ",
        "PASS: the ToR learns 10.0.0.0/24 (the kernel route of table 1001)",
        "PASS: the ToR installs 10.0.0.10 in its vrf-1001 via 100.65.0.1 on br-1001",
        "PASS: the ToR's neighbour 100.65.0.1 on br-1001 is the chassis router MAC",
        "PASS: the ToR's FDB sends the chassis router MAC over vxlan-1001 to 100.65.0.1",
        "PASS: ping from the ToR's vrf-1001 to 10.0.0.10 through VXLAN and veth-vrf-1001",
        "PASS: the ToR loses 10.0.0.0/24",
        "PASS: the ToR loses 10.0.0.10/32",
        "PASS: the chassis running-config has no vrf-1001 stanza and no router bgp 64999 vrf vrf-1001",
        "PASS: the ToR has no type-5 route with RD 100.65.0.1:1001 left",
    ] {
        assert!(all.contains(check), "missing '{check}' in the VM output");
    }
    assert!(
        all.contains("frr-evpn-type5: all ") && all.contains(" checks passed ("),
        "frr-evpn-type5 did not report completion"
    );
}

/// The demos that need a real kernel, as a newcomer runs them (`scripts/demo.sh --driver evpn`,
/// then `--driver stretched`), in one VM boot: each brings up the lab, marks its networks as
/// networking-bgpvpn does (EVPN), starts the agent binary and waits until the ToR has the
/// routes (type-5 in its VRF; the stretched subnet through a real `bgp-vrf`); the demo's own
/// output is checked here. (`--driver nb-vrf` differs from the EVPN demo by the few NB commands
/// that `nb_vrf_agent_end_to_end_on_the_real_kernel` also runs; it is left out to keep CI's VM
/// tier short.)
#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~3 min)"]
fn real_kernel_demos_run_in_the_vm() {
    assert_prepared();
    let agent = env!("CARGO_BIN_EXE_ovn-bgp-agent");
    let output = run_in_vm(
        &[],
        &[
            "sh",
            "-c",
            "scripts/demo.sh --driver evpn --agent \"$0\" --stop \
             && scripts/demo.sh --driver stretched --agent \"$0\" --stop",
            agent,
        ],
    );
    let all = text(&output);
    assert!(
        output.status.success(),
        "an EVPN demo failed in the VM ({})",
        output.status
    );
    for (demo, rd, learned, installed) in [(
        "evpn",
        "100.65.0.1:1001",
        &["[5]:[0]:[32]:[10.0.0.10]"][..],
        ("10.0.0.10", "via 100.65.0.1 dev br-1001"),
    )] {
        let start = all
            .find(&format!("==> starting the agent ({demo} driver)"))
            .unwrap_or_else(|| panic!("the {demo} demo did not start its agent"));
        let part = &all[start..];
        let part = &part[..part.find("==> stopping").unwrap_or(part.len())];
        assert!(
            part.contains(&format!("learned from the chassis (AS 64999), RD {rd}")),
            "the {demo} demo did not report the ToR's routes"
        );
        for prefix in learned {
            assert!(
                part.contains(prefix),
                "the {demo} demo's ToR output has no {prefix}"
            );
        }
        let (ip, via) = installed;
        assert!(
            part.lines()
                .any(|l| l.starts_with(&format!("{ip} ")) && l.contains(via)),
            "the {demo} demo's ToR did not install {ip} {via} in its VRF"
        );
    }
    // The stretched-L2 demo on a real VRF: the ToR learns the tenant subnet, which the agent
    // routes via the gateway in bgp-vrf's table (the stand-in VRF of the fast tier cannot).
    let start = all
        .find("==> starting the agent (stretched driver)")
        .expect("the stretched demo did not start its agent");
    let part = &all[start..];
    let learned = &part[part
        .find("learned from the chassis")
        .expect("the stretched demo did not report the ToR's routes")..];
    let learned = &learned[..learned
        .find("==> the chassis' table 10")
        .unwrap_or(learned.len())];
    for prefix in ["172.24.4.0/24", "10.0.0.0/24"] {
        assert!(
            learned
                .lines()
                .any(|l| l.contains(prefix) && l.contains("100.64.0.1")),
            "the stretched demo's ToR has no {prefix} from the chassis:\n{learned}"
        );
    }
    assert!(
        part.contains("10.0.0.0/24 via 172.24.4.10 dev bgp-nic"),
        "the stretched demo's table 10 has no subnet via the gateway"
    );
}

/// The fast-tier half of the EVPN lab helpers: [`lab_fixture::parse_type5_routes`] on a reply
/// captured from FRR 8.4 in the VM (the chassis' routes and the ToR's own).
#[test]
fn type5_routes_parse_from_frr_json() {
    let reply: serde_json::Value = serde_json::from_str(
        r#"{"100.65.0.1:1001":{"rd":"100.65.0.1:1001",
        "[5]:[0]:[32]:[10.0.0.10]":{"prefix":"[5]:[0]:[32]:[10.0.0.10]","prefixLen":352,"paths":[[
          {"valid":true,"bestpath":true,"routeType":5,"ethTag":0,"ipLen":32,"ip":"10.0.0.10",
           "peerId":"100.64.0.1","extendedCommunity":{"string":"RT:64999:1001 ET:8 Rmac:1e:6a:9b:6f:b9:79"},
           "nexthops":[{"ip":"100.65.0.1","hostname":"evpn-chassis","afi":"ipv4","used":true}]}]]},
        "[5]:[0]:[0]:[::]":{"prefix":"[5]:[0]:[0]:[::]","prefixLen":352,"paths":[[
          {"valid":true,"bestpath":true,"routeType":5,"ethTag":0,"ipLen":0,"ip":"::",
           "peerId":"100.64.0.1","extendedCommunity":{"string":"RT:64999:1001 ET:8 Rmac:1e:6a:9b:6f:b9:79"},
           "nexthops":[{"ip":"100.65.0.1","afi":"ipv4","used":true}]}]]}},
        "100.65.0.2:1001":{"rd":"100.65.0.2:1001",
        "[5]:[0]:[32]:[192.168.200.1]":{"prefix":"[5]:[0]:[32]:[192.168.200.1]","prefixLen":352,"paths":[[
          {"valid":true,"bestpath":true,"routeType":5,"ethTag":0,"ipLen":32,"ip":"192.168.200.1",
           "peerId":"(unspec)","extendedCommunity":{"string":"ET:8 RT:64999:1001 RT:65000:7 Rmac:9e:5d:ab:cd:86:8d"},
           "nexthops":[{"ip":"100.65.0.2","afi":"ipv4","used":true}]}]]}},
        "numPrefix":3,"numPaths":3}"#,
    )
    .expect("sample JSON");
    let route = |rd: &str, prefix: &str, nexthop: &str, rts: &[&str], rmac: &str, peer: &str| {
        lab_fixture::Type5Route {
            rd: rd.into(),
            prefix: prefix.into(),
            nexthop: nexthop.into(),
            route_targets: rts.iter().map(|s| (*s).to_owned()).collect(),
            router_mac: Some(rmac.into()),
            peer: peer.into(),
        }
    };
    assert_eq!(
        lab_fixture::parse_type5_routes(&reply),
        vec![
            route(
                "100.65.0.1:1001",
                "10.0.0.10/32",
                "100.65.0.1",
                &["64999:1001"],
                "1e:6a:9b:6f:b9:79",
                "100.64.0.1"
            ),
            route(
                "100.65.0.1:1001",
                "::/0",
                "100.65.0.1",
                &["64999:1001"],
                "1e:6a:9b:6f:b9:79",
                "100.64.0.1"
            ),
            route(
                "100.65.0.2:1001",
                "192.168.200.1/32",
                "100.65.0.2",
                &["64999:1001", "65000:7"],
                "9e:5d:ab:cd:86:8d",
                "(unspec)"
            ),
        ]
    );
}

/// On the host this boots the VM and runs this test binary there; inside it brings up the lab
/// with `LAB_KERNEL=full LAB_EVPN=1`, gives the ToR a VRF for VNI 1001, marks the lab's router
/// gateway and its tenant subnet with `neutron_bgpvpn:vni=1001`/`:as=64999` as networking-bgpvpn
/// does, and runs the agent with `driver = ovn_evpn_driver` on the real kernel: F1–F3 of the
/// spec, what the ToR learns (type-5 routes with RD and RT), the data path through VXLAN into
/// the VRF, and recovery (agent restart, FRR restart, a device deleted by hand), foreign devices
/// left alone.
#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~3 min)"]
fn sb_evpn_agent_end_to_end_on_the_real_kernel() {
    const NAME: &str = "sb_evpn_agent_end_to_end_on_the_real_kernel";
    if std::env::var("VM_TIER").as_deref() == Ok("1") {
        evpn_agent::run_inside_the_vm();
        return;
    }
    run_this_test_in_vm(NAME, "EVPN agent test", evpn_agent::CHECKS);
}

/// The in-VM half of [`sb_evpn_agent_end_to_end_on_the_real_kernel`].
mod evpn_agent {
    use crate::agent_fixture::Agent;
    use crate::lab_fixture::{Lab, Type5Route, wait_for};
    use crate::production_path::{
        restart_chassis_frr, scaled, settled_updates_received_from_chassis, time_scale,
        wait_agent_ready_and_applied, wait_ip,
    };
    use std::process::Command;
    use std::time::Instant;

    const VNI: u32 = 1001;
    /// An address in the ToR's VRF (the ping's source).
    const TOR_HOST: &str = "192.168.200.1";

    /// Every check the in-VM half prints as `PASS: <check>`; the host half requires all of them.
    pub(crate) const CHECKS: &[&str] = &[
        "the lab's ToR and chassis negotiated l2vpn evpn; VTEPs on lo, routed over the link",
        "the ToR has vrf-1001 with L3VNI 1001 up (tor-evpn.sh)",
        "F1: vrf-1001 (vrf table 1001), br-1001, vxlan-1001 (VTEP from lo, nolearning), lo-1001 (dummy), veth-vrf-1001/veth-ovs-1001 on br-ex",
        "F1/F2: table 1001 has the gateway, the subnet via it and the unreachable defaults; permanent neighbour; cookie-998 flow",
        "F2: the tenant VM on lo-1001 without its local route",
        "the chassis FRR has vrf vrf-1001 / vni 1001 and rd <VTEP>:1001 (U01)",
        "the ToR learns the tenant /32 as type 5: RD <chassis VTEP>:1001, RT 64999:1001, router MAC, VTEP nexthop",
        "the ToR imports it into vrf-1001 and installs it via the chassis VTEP",
        "a ping from the ToR's vrf-1001 reaches veth-vrf-1001 through VXLAN and the chassis VRF",
        "an agent restart sends zero UPDATEs to the ToR",
        "FRR restart: the VRF stanzas and the type-5 route are back",
        "vrf-1001 deleted by hand is back with its routes (U35)",
        "F3: the gateway's EVPN keys removed: type-5 withdrawn, devices, flows and FRR stanzas gone",
        "foreign br-foo, vrf-foo and vxlan-7 are untouched (U34)",
    ];

    static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

    fn pass(check: &str) {
        assert!(CHECKS.contains(&check), "unlisted check {check}");
        let at = STARTED.get_or_init(Instant::now).elapsed().as_secs_f32();
        println!("PASS: {check} (at {at:.1} s)");
    }

    pub(crate) fn wait_type5(
        lab: &Lab,
        what: &str,
        pred: impl Fn(&[Type5Route]) -> bool,
    ) -> Vec<Type5Route> {
        wait_for(what, scaled(8), || {
            let routes = lab.tor_type5_routes();
            if pred(&routes) {
                Ok(routes)
            } else {
                Err(format!("{routes:#?}"))
            }
        })
    }

    pub(crate) fn tx_packets(lab: &Lab, dev: &str) -> u64 {
        let out = lab.ip_chassis(&["-s", "link", "show", dev]);
        // "    TX:  bytes packets ..." then the numbers on the next line.
        let mut lines = out
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("TX:"));
        lines
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no TX packet count in:\n{out}"))
    }

    /// networking-bgpvpn's keys on the switch-side port of a router port (the Port_Binding
    /// the SB EVPN driver reads).
    fn set_bgpvpn(lab: &Lab, port: &str, on: bool) {
        if on {
            lab.nbctl(&[
                "set",
                "Logical_Switch_Port",
                port,
                &format!("external_ids:\"neutron_bgpvpn:vni\"={VNI}"),
                "external_ids:\"neutron_bgpvpn:as\"=64999",
            ]);
        } else {
            lab.nbctl(&[
                "remove",
                "Logical_Switch_Port",
                port,
                "external_ids",
                "\"neutron_bgpvpn:vni\"",
            ]);
        }
    }

    /// The in-VM EVPN lab (`LAB_KERNEL=full LAB_EVPN=1`, timeouts scaled to the VM), for the
    /// EVPN tests of both drivers.
    pub(crate) fn start_evpn_lab(started: Instant) -> Lab {
        assert_eq!(
            std::env::var("OVN_BGP_AGENT_TEST_KERNEL").as_deref(),
            Ok("full"),
            "payloads/cargo-tests.sh must set OVN_BGP_AGENT_TEST_KERNEL=full"
        );
        let lab_timeout = scaled(15).as_secs().to_string();
        let lab = Lab::start_with_env(&[
            ("LAB_KERNEL", "full"),
            ("LAB_EVPN", "1"),
            ("LAB_TIMEOUT", &lab_timeout),
        ]);
        println!(
            "lab up (LAB_KERNEL=full LAB_EVPN=1) in {:?}",
            started.elapsed()
        );
        lab
    }

    pub(crate) fn run_inside_the_vm() {
        let started = *STARTED.get_or_init(Instant::now);
        let lab = start_evpn_lab(started);
        let chassis_ip = lab.env("CHASSIS_IP4").to_owned();
        let vtep = lab.env("CHASSIS_VTEP_IP4").to_owned();
        let tor_vtep = lab.env("TOR_VTEP_IP4").to_owned();
        let neighbors = lab.vtysh_tor(&format!("show bgp neighbors {chassis_ip}"));
        assert!(
            neighbors.contains("BGP state = Established")
                && neighbors.contains("L2VPN EVPN: advertised and received"),
            "{neighbors}"
        );
        let lo = lab.ip_chassis(&["addr", "show", "dev", "lo"]);
        assert!(lo.contains(&format!("inet {vtep}/32 ")), "{lo}");
        pass("the lab's ToR and chassis negotiated l2vpn evpn; VTEPs on lo, routed over the link");

        lab.tor_add_evpn_vrf(VNI, &["--address", &format!("{TOR_HOST}/32")]);
        let tor_rd = format!("{tor_vtep}:{VNI}");
        wait_type5(&lab, "the ToR's own type-5 route", |r| {
            r.iter().any(|x| {
                x.rd == tor_rd && x.prefix == format!("{TOR_HOST}/32") && x.nexthop == tor_vtep
            })
        });
        pass("the ToR has vrf-1001 with L3VNI 1001 up (tor-evpn.sh)");

        // Someone else's devices named like the agent's (U34).
        for args in [
            &["link", "add", "br-foo", "type", "bridge"][..],
            &["link", "add", "vrf-foo", "type", "vrf", "table", "4000"],
            &[
                "link", "add", "vxlan-7", "type", "vxlan", "id", "7", "dstport", "4789",
            ],
        ] {
            lab.ip_chassis(args);
        }

        // networking-bgpvpn marks the router gateway and its tenant subnet.
        let (gw_port, ri_port) = (
            lab.env("GW_PORT_ID").to_owned(),
            lab.env("RI_PORT_ID").to_owned(),
        );
        set_bgpvpn(&lab, &gw_port, true);
        set_bgpvpn(&lab, &ri_port, true);

        // No evpn_local_ip: the agent takes the VTEP from the /32 on lo. Timers scaled down less
        // than the VM is slow, so repairs are observable.
        let interval = (time_scale() / 2).max(2);
        let overrides = format!(
            "[DEFAULT]\ndriver = ovn_evpn_driver\nreconcile_interval = {interval}\n\
             frr_reconcile_interval = {interval}\n[ovs]\nflow_check_interval = {interval}\n"
        );
        let mut agent = Agent::start(lab.dir(), &overrides);

        let gw_ip = lab.env("GW_IP4").to_owned();
        let gw_mac = lab.env("GW_MAC").to_owned();
        let tenant = lab.env("VM_TENANT_IP4").to_owned();
        let tenant32 = format!("{tenant}/32");
        let rd = format!("{vtep}:{VNI}");
        wait_type5(&lab, "the tenant /32 as type 5 at the ToR", |r| {
            r.iter().any(|x| x.rd == rd && x.prefix == tenant32)
        });
        agent.assert_running();

        let show = |dev: &str| lab.ip_chassis(&["-d", "link", "show", "dev", dev]);
        let vrf = show("vrf-1001");
        assert!(vrf.contains("vrf table 1001"), "{vrf}");
        assert!(show("br-1001").contains("master vrf-1001"));
        let vx = show("vxlan-1001");
        assert!(
            vx.contains(&format!("vxlan id 1001 local {vtep} ")) && vx.contains("nolearning"),
            "{vx}"
        );
        assert!(vx.contains("master br-1001"), "{vx}");
        let lo1001 = show("lo-1001");
        assert!(
            lo1001.contains("dummy") && lo1001.contains("master vrf-1001"),
            "{lo1001}"
        );
        assert!(show("veth-vrf-1001").contains("master vrf-1001"));
        assert!(
            lab.vsctl(&["list-ports", "br-ex"])
                .contains("veth-ovs-1001")
        );
        pass(
            "F1: vrf-1001 (vrf table 1001), br-1001, vxlan-1001 (VTEP from lo, nolearning), lo-1001 (dummy), veth-vrf-1001/veth-ovs-1001 on br-ex",
        );

        let table = wait_ip(
            &lab,
            "table 1001",
            &["route", "show", "table", "1001", "proto", "boot"],
            |t| t.contains("10.0.0.0/24 via"),
        );
        for want in [
            format!("{gw_ip} dev veth-vrf-1001 scope link"),
            format!("10.0.0.0/24 via {gw_ip} dev veth-vrf-1001"),
            "unreachable default metric 4278198272".to_owned(),
        ] {
            assert!(table.contains(&want), "{want} not in:\n{table}");
        }
        let table6 = lab.ip_chassis(&["-6", "route", "show", "table", "1001"]);
        assert!(
            table6.contains("unreachable default dev lo metric 4278198272"),
            "{table6}"
        );
        let neigh = lab.ip_chassis(&["neigh", "show", "dev", "veth-vrf-1001"]);
        assert!(
            neigh.contains(&format!("{gw_ip} lladdr {gw_mac} PERMANENT")),
            "{neigh}"
        );
        let flows = lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=998/-1"]);
        assert!(
            flows.contains("priority=1000")
                && flows.contains(&format!("dl_src={gw_mac}"))
                && flows.contains("nw_src=10.0.0.0/24"),
            "{flows}"
        );
        pass(
            "F1/F2: table 1001 has the gateway, the subnet via it and the unreachable defaults; permanent neighbour; cookie-998 flow",
        );
        assert!(
            lab.ip_chassis(&["addr", "show", "dev", "lo-1001"])
                .contains(&tenant32)
        );
        let local = lab.ip_chassis(&["route", "show", "table", "1001", "type", "local"]);
        assert!(!local.contains(&tenant), "local route left:\n{local}");
        pass("F2: the tenant VM on lo-1001 without its local route");

        // FRR is configured after the kernel, and vtysh applies a stanza line by line.
        wait_for("the VRF stanzas in FRR", scaled(10), || {
            let cfg = lab.vtysh_chassis("show running-config");
            if cfg.contains("vrf vrf-1001\n vni 1001")
                && cfg.contains("router bgp 64999 vrf vrf-1001")
                && cfg.contains(&format!("rd {rd}"))
            {
                Ok(())
            } else {
                Err(cfg)
            }
        });
        pass("the chassis FRR has vrf vrf-1001 / vni 1001 and rd <VTEP>:1001 (U01)");

        let routes = lab.tor_type5_routes();
        let learned = routes
            .iter()
            .find(|x| x.rd == rd && x.prefix == tenant32)
            .unwrap_or_else(|| panic!("{routes:#?}"));
        assert_eq!(
            (
                learned.nexthop.as_str(),
                learned.route_targets.as_slice(),
                learned.peer.as_str()
            ),
            (
                vtep.as_str(),
                &["64999:1001".to_owned()][..],
                chassis_ip.as_str()
            ),
            "{routes:#?}"
        );
        assert!(learned.router_mac.is_some(), "{learned:?}");
        pass(
            "the ToR learns the tenant /32 as type 5: RD <chassis VTEP>:1001, RT 64999:1001, router MAC, VTEP nexthop",
        );
        wait_for("the ToR's kernel route to the tenant", scaled(5), || {
            let r = lab.ip_tor(&["route", "show", "vrf", &format!("vrf-{VNI}")]);
            let ok = r.lines().any(|l| {
                l.starts_with(&format!("{tenant} ")) && l.contains(&format!("via {vtep}"))
            });
            if ok { Ok(r) } else { Err(r) }
        });
        pass("the ToR imports it into vrf-1001 and installs it via the chassis VTEP");

        let tx_before = tx_packets(&lab, "veth-vrf-1001");
        let _ = Command::new("ip")
            .args(["netns", "exec", lab.ns_tor(), "busybox", "ping", "-c", "3"])
            .args(["-w", "3", "-I", &format!("vrf-{VNI}"), &tenant])
            .output()
            .expect("run busybox ping");
        let tx_after = tx_packets(&lab, "veth-vrf-1001");
        assert!(
            tx_after >= tx_before + 3,
            "the ToR's pings did not come out of veth-vrf-1001 ({tx_before} -> {tx_after} packets)"
        );
        pass(
            "a ping from the ToR's vrf-1001 reaches veth-vrf-1001 through VXLAN and the chassis VRF",
        );

        let before = settled_updates_received_from_chassis(&lab);
        let evpn_before = lab.vtysh_tor("show bgp l2vpn evpn");
        let log_len = agent.log().len();
        agent.restart();
        wait_agent_ready_and_applied(&lab);
        agent.assert_running();
        let after = settled_updates_received_from_chassis(&lab);
        if before != after {
            println!(
                "ToR before the restart:\n{evpn_before}\nafter:\n{}\nagent log since:\n{}",
                lab.vtysh_tor("show bgp l2vpn evpn"),
                &agent.log()[log_len..]
            );
        }
        assert_eq!(before, after, "the restart sent UPDATEs to the ToR");
        pass("an agent restart sends zero UPDATEs to the ToR");

        restart_chassis_frr(&lab);
        wait_for("the VRF stanzas back in FRR", scaled(10), || {
            let c = lab.vtysh_chassis("show running-config");
            if c.contains("vrf vrf-1001\n vni 1001") {
                Ok(())
            } else {
                Err(c)
            }
        });
        wait_type5(
            &lab,
            "the tenant /32 back at the ToR after the FRR restart",
            |r| r.iter().any(|x| x.rd == rd && x.prefix == tenant32),
        );
        pass("FRR restart: the VRF stanzas and the type-5 route are back");

        lab.ip_chassis(&["link", "del", "vrf-1001"]);
        wait_ip(
            &lab,
            "vrf-1001 and its routes back",
            &["route", "show", "table", "1001", "proto", "boot"],
            |t| t.contains("10.0.0.0/24 via"),
        );
        assert!(show("br-1001").contains("master vrf-1001"));
        wait_type5(&lab, "the tenant /32 back after the repair", |r| {
            r.iter().any(|x| x.rd == rd && x.prefix == tenant32)
        });
        pass("vrf-1001 deleted by hand is back with its routes (U35)");

        set_bgpvpn(&lab, &gw_port, false);
        wait_type5(&lab, "the chassis' type-5 routes withdrawn", |r| {
            !r.iter().any(|x| x.rd == rd) && r.iter().any(|x| x.prefix == format!("{TOR_HOST}/32"))
        });
        let links = wait_ip(&lab, "the VNI's devices gone", &["link", "show"], |l| {
            !l.contains("vrf-1001") && !l.contains("veth-vrf-1001")
        });
        for gone in ["br-1001:", "vxlan-1001", "lo-1001"] {
            assert!(!links.contains(gone), "{gone} left:\n{links}");
        }
        // OVS is reconciled in the background, after the kernel part.
        wait_for(
            "veth-ovs-1001 and the redirect flows gone from br-ex",
            scaled(10),
            || {
                let ports = lab.vsctl(&["list-ports", "br-ex"]);
                let flows = lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=998/-1"]);
                if ports.contains("veth-ovs-1001") || flows.contains("cookie=0x3e6") {
                    Err(format!("{ports}\n{flows}"))
                } else {
                    Ok(())
                }
            },
        );
        wait_for("the VRF stanzas removed from FRR", scaled(10), || {
            let c = lab.vtysh_chassis("show running-config");
            if c.contains("vrf-1001") {
                Err(c)
            } else {
                Ok(())
            }
        });
        assert!(
            lab.ip_chassis(&["route", "show", "table", "1001"])
                .trim()
                .is_empty(),
            "table 1001 not empty"
        );
        pass(
            "F3: the gateway's EVPN keys removed: type-5 withdrawn, devices, flows and FRR stanzas gone",
        );

        for dev in ["br-foo", "vrf-foo", "vxlan-7"] {
            lab.ip_chassis(&["link", "show", "dev", dev]);
        }
        pass("foreign br-foo, vrf-foo and vxlan-7 are untouched (U34)");
        agent.assert_running();
        lab.tor_del_evpn_vrf(VNI);
        println!(
            "EVPN agent end to end: all checks passed in {:?}",
            started.elapsed()
        );
    }
}

/// On the host this boots the VM and runs this test binary there; inside it brings up the lab
/// with `LAB_KERNEL=full LAB_EVPN=1`, gives the ToR a VRF for VNI 100, marks the lab's provider
/// network with `neutron_bgpvpn:type=l3`, `:vni=100` and `:rt=['64999:4242']` as networking-bgpvpn
/// does, and runs the NB driver with `exposing_method = vrf`: E1/E2 on the real kernel, the
/// provider VM as a type-5 route at the ToR with the switch's RD/RT, the data path from the
/// ToR's VRF into the veth, recovery (agent restart without UPDATEs, FRR restart, `vrf-100`
/// deleted by hand: U35), and the settings removed (everything withdrawn).
#[test]
#[ignore = "full-kernel tier: run with scripts/vm-tier/test.sh (boots a VM, ~3 min)"]
fn nb_vrf_agent_end_to_end_on_the_real_kernel() {
    const NAME: &str = "nb_vrf_agent_end_to_end_on_the_real_kernel";
    if std::env::var("VM_TIER").as_deref() == Ok("1") {
        nb_vrf_agent::run_inside_the_vm();
        return;
    }
    run_this_test_in_vm(NAME, "NB vrf agent test", nb_vrf_agent::CHECKS);
}

/// The in-VM half of [`nb_vrf_agent_end_to_end_on_the_real_kernel`].
mod nb_vrf_agent {
    use crate::agent_fixture::Agent;
    use crate::evpn_agent::{start_evpn_lab, tx_packets, wait_type5};
    use crate::lab_fixture::wait_for;
    use crate::production_path::{
        restart_chassis_frr, scaled, settled_updates_received_from_chassis, time_scale,
        wait_agent_ready_and_applied, wait_ip,
    };
    use std::process::Command;
    use std::time::Instant;

    const VNI: u32 = 100;
    /// A route target that is not FRR's default (<AS>:<VNI>, which it leaves out of its running
    /// configuration), so the switch's value is visibly the one used.
    const RT: &str = "64999:4242";
    /// An address in the ToR's VRF (the ping's source).
    const TOR_HOST: &str = "192.168.100.1";
    /// The subnet's gateway for the VRF side, from DHCP_Options as Neutron writes it (not the
    /// lab's own 172.24.4.1, which the ToR side of the lab answers for).
    const SUBNET_GATEWAY: &str = "172.24.4.254";

    pub(crate) const CHECKS: &[&str] = &[
        "E1: vrf-100 (vrf table 100), br-100, vxlan-100 (VTEP from lo, neigh_suppress on, learning off), the localnet's veth pair with the anycast MAC and the subnet gateway, its OVS end on br-ex",
        "E2: the provider VM is a route of table 100 through the veth with a permanent neighbour; nothing on bgp-nic",
        "the chassis FRR has vrf vrf-100 / vni 100, rd <VTEP>:100, the switch's route targets, redistribute kernel",
        "the ToR learns the provider VM as type 5: RD <chassis VTEP>:100, the switch's RT 64999:4242, VTEP nexthop",
        "a ping from the ToR's vrf-100 reaches the localnet's veth through VXLAN and the chassis VRF",
        "an agent restart sends zero UPDATEs to the ToR",
        "FRR restart: the VRF stanzas and the type-5 route are back",
        "vrf-100 deleted by hand is back with its routes (U35)",
        "the switch's EVPN settings removed: type-5 withdrawn, devices, OVS port and FRR stanzas gone",
    ];

    static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

    fn pass(check: &str) {
        assert!(CHECKS.contains(&check), "unlisted check {check}");
        let at = STARTED.get_or_init(Instant::now).elapsed().as_secs_f32();
        println!("PASS: {check} (at {at:.1} s)");
    }

    pub(crate) fn run_inside_the_vm() {
        let started = *STARTED.get_or_init(Instant::now);
        let lab = start_evpn_lab(started);
        let vtep = lab.env("CHASSIS_VTEP_IP4").to_owned();
        lab.tor_add_evpn_vrf(VNI, &["--rt", RT, "--address", &format!("{TOR_HOST}/32")]);

        // networking-bgpvpn's settings on the provider network, and its subnet's DHCP options.
        let public = format!("neutron-{}", lab.env("NET_PUBLIC_ID"));
        lab.nbctl(&[
            "create",
            "DHCP_Options",
            "cidr=\"172.24.4.0/24\"",
            &format!("options:router=\"{SUBNET_GATEWAY}\""),
            &format!(
                "external_ids:\"neutron:network_id\"=\"{}\"",
                lab.env("NET_PUBLIC_ID")
            ),
        ]);
        lab.nbctl(&[
            "set",
            "Logical_Switch",
            &public,
            "external_ids:\"neutron_bgpvpn:type\"=l3",
            &format!("external_ids:\"neutron_bgpvpn:vni\"={VNI}"),
            &format!("external_ids:\"neutron_bgpvpn:rt\"=\"['{RT}']\""),
        ]);
        let localnet_uuid = lab
            .nbctl(&[
                "--bare",
                "--columns=_uuid",
                "find",
                "Logical_Switch_Port",
                "type=localnet",
                "options:network_name=public",
            ])
            .trim()
            .to_owned();
        let id: String = localnet_uuid.chars().take(11).collect();
        let (vrf_side, ovs_side) = (format!("vrf{id}"), format!("ovs{id}"));

        // Timers scaled down less than the VM is slow, so repairs are observable.
        let interval = (time_scale() / 2).max(2);
        let overrides = format!(
            "[DEFAULT]\ndriver = nb_ovn_bgp_driver\nexposing_method = vrf\n\
             reconcile_interval = {interval}\nfrr_reconcile_interval = {interval}\n\
             [ovs]\nflow_check_interval = {interval}\n"
        );
        let mut agent = Agent::start(lab.dir(), &overrides);
        let vm = lab.env("VM_PROVIDER_IP4").to_owned();
        let vm32 = format!("{vm}/32");
        let rd = format!("{vtep}:{VNI}");
        wait_type5(&lab, "the provider VM as type 5 at the ToR", |r| {
            r.iter().any(|x| x.rd == rd && x.prefix == vm32)
        });
        agent.assert_running();

        let show = |dev: &str| lab.ip_chassis(&["-d", "link", "show", "dev", dev]);
        assert!(show("vrf-100").contains("vrf table 100"));
        assert!(show("br-100").contains("master vrf-100"));
        let vx = show("vxlan-100");
        assert!(
            vx.contains(&format!("vxlan id 100 local {vtep} "))
                && vx.contains("neigh_suppress on")
                && vx.contains(" learning off"),
            "{vx}"
        );
        let veth = show(&vrf_side);
        assert!(
            veth.contains("master vrf-100") && veth.contains("link/ether 02:00:00:64:00:00"),
            "{veth}"
        );
        let addrs = lab.ip_chassis(&["addr", "show", "dev", &vrf_side]);
        assert!(addrs.contains(&format!("{SUBNET_GATEWAY}/24")), "{addrs}");
        assert!(lab.vsctl(&["list-ports", "br-ex"]).contains(&ovs_side));
        pass(
            "E1: vrf-100 (vrf table 100), br-100, vxlan-100 (VTEP from lo, neigh_suppress on, learning off), the localnet's veth pair with the anycast MAC and the subnet gateway, its OVS end on br-ex",
        );

        let table = lab.ip_chassis(&["route", "show", "table", "100", "proto", "boot"]);
        assert!(
            table.contains(&format!("{vm} dev {vrf_side} scope link")),
            "{table}"
        );
        let neigh = lab.ip_chassis(&["neigh", "show", "dev", &vrf_side]);
        assert!(
            neigh.contains(&format!(
                "{vm} lladdr {} PERMANENT",
                lab.env("VM_PROVIDER_MAC")
            )),
            "{neigh}"
        );
        let nic = lab.ip_chassis(&["addr", "show"]);
        assert!(!nic.contains(&vm32), "{vm32} on a device:\n{nic}");
        pass(
            "E2: the provider VM is a route of table 100 through the veth with a permanent neighbour; nothing on bgp-nic",
        );

        // FRR is configured after the kernel, and vtysh applies a stanza line by line.
        let rd_line = format!("rd {rd}");
        let rt_import = format!("route-target import {RT}");
        let rt_export = format!("route-target export {RT}");
        let stanza = [
            "vrf vrf-100\n vni 100",
            "router bgp 64999 vrf vrf-100",
            "redistribute kernel",
            &rd_line as &str,
            &rt_import,
            &rt_export,
        ];
        let frr_has_the_stanza = || {
            let cfg = lab.vtysh_chassis("show running-config");
            if stanza.iter().all(|line| cfg.contains(line)) {
                Ok(())
            } else {
                Err(cfg)
            }
        };
        wait_for("the VRF stanzas in FRR", scaled(10), frr_has_the_stanza);
        pass(
            "the chassis FRR has vrf vrf-100 / vni 100, rd <VTEP>:100, the switch's route targets, redistribute kernel",
        );

        let routes = lab.tor_type5_routes();
        let learned = routes
            .iter()
            .find(|x| x.rd == rd && x.prefix == vm32)
            .unwrap_or_else(|| panic!("{routes:#?}"));
        assert_eq!(learned.nexthop, vtep, "{routes:#?}");
        assert!(
            learned.route_targets.contains(&RT.to_owned()),
            "{routes:#?}"
        );
        pass(
            "the ToR learns the provider VM as type 5: RD <chassis VTEP>:100, the switch's RT 64999:4242, VTEP nexthop",
        );

        wait_for("the ToR's kernel route to the VM", scaled(5), || {
            let r = lab.ip_tor(&["route", "show", "vrf", &format!("vrf-{VNI}")]);
            let ok = r
                .lines()
                .any(|l| l.starts_with(&format!("{vm} ")) && l.contains(&format!("via {vtep}")));
            if ok { Ok(r) } else { Err(r) }
        });
        let tx_before = tx_packets(&lab, &vrf_side);
        let _ = Command::new("ip")
            .args(["netns", "exec", lab.ns_tor(), "busybox", "ping", "-c", "3"])
            .args(["-w", "3", "-I", &format!("vrf-{VNI}"), &vm])
            .output()
            .expect("run busybox ping");
        let tx_after = tx_packets(&lab, &vrf_side);
        assert!(
            tx_after >= tx_before + 3,
            "the ToR's pings did not come out of {vrf_side} ({tx_before} -> {tx_after} packets)"
        );
        pass(
            "a ping from the ToR's vrf-100 reaches the localnet's veth through VXLAN and the chassis VRF",
        );

        let before = settled_updates_received_from_chassis(&lab);
        agent.restart();
        wait_agent_ready_and_applied(&lab);
        agent.assert_running();
        let after = settled_updates_received_from_chassis(&lab);
        assert_eq!(before, after, "the restart sent UPDATEs to the ToR");
        pass("an agent restart sends zero UPDATEs to the ToR");

        restart_chassis_frr(&lab);
        wait_for(
            "the VRF stanzas back in FRR",
            scaled(10),
            frr_has_the_stanza,
        );
        wait_type5(&lab, "the VM back at the ToR after the FRR restart", |r| {
            r.iter().any(|x| x.rd == rd && x.prefix == vm32)
        });
        pass("FRR restart: the VRF stanzas and the type-5 route are back");

        lab.ip_chassis(&["link", "del", "vrf-100"]);
        wait_ip(
            &lab,
            "vrf-100 and the VM's route back",
            &["route", "show", "table", "100", "proto", "boot"],
            |t| t.contains(&format!("{vm} dev {vrf_side} scope link")),
        );
        assert!(show("br-100").contains("master vrf-100"));
        assert!(show(&vrf_side).contains("master vrf-100"));
        wait_type5(&lab, "the VM back at the ToR after the repair", |r| {
            r.iter().any(|x| x.rd == rd && x.prefix == vm32)
        });
        pass("vrf-100 deleted by hand is back with its routes (U35)");

        lab.nbctl(&[
            "remove",
            "Logical_Switch",
            &public,
            "external_ids",
            "\"neutron_bgpvpn:type\"",
        ]);
        wait_type5(&lab, "the chassis' type-5 routes withdrawn", |r| {
            !r.iter().any(|x| x.rd == rd) && r.iter().any(|x| x.prefix == format!("{TOR_HOST}/32"))
        });
        wait_ip(&lab, "the VRF devices gone", &["link", "show"], |l| {
            !l.contains("vrf-100") && !l.contains(&vrf_side) && !l.contains("vxlan-100")
        });
        // OVS is reconciled in the background, after the kernel part.
        wait_for("the OVS end gone from br-ex", scaled(10), || {
            let ports = lab.vsctl(&["list-ports", "br-ex"]);
            if ports.lines().any(|p| p == ovs_side) {
                Err(ports)
            } else {
                Ok(())
            }
        });
        wait_for("the VRF stanzas removed from FRR", scaled(10), || {
            let c = lab.vtysh_chassis("show running-config");
            if c.contains("vrf-100") {
                Err(c)
            } else {
                Ok(())
            }
        });
        pass(
            "the switch's EVPN settings removed: type-5 withdrawn, devices, OVS port and FRR stanzas gone",
        );
        agent.assert_running();
        lab.tor_del_evpn_vrf(VNI);
        println!(
            "NB vrf agent end to end: all checks passed in {:?}",
            started.elapsed()
        );
    }
}
