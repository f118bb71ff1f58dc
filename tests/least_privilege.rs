//! The agent without root: an unprivileged user holding only `CAP_NET_ADMIN` (as
//! `packaging/systemd/ovn-bgp-agent-nonroot.service` runs it), with FRR's and OVS's sockets
//! reachable through group membership, runs end to end on the lab; the tools it runs get no
//! capability; and the start-time check refuses to start without `CAP_NET_ADMIN` (or without
//! `CAP_SYS_ADMIN` for `[linux] netns`), naming the fix.
#![cfg(all(feature = "sb_bgp", feature = "underlay"))]
// Real daemons run on the wall clock.
#![allow(clippy::disallowed_types)]

mod agent_fixture;
mod lab_fixture;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_fixture::Agent;
use lab_fixture::{CONVERGENCE_TIMEOUT, Lab, has, require_root, run_ok, wait_for};

/// The test's unprivileged user (and its own group), created once per machine.
const USER: &str = "ovnbgp-test";
/// Stands in for the group a deployment gives OVS's sockets (`--ovs-user=USER:GROUP`).
const OVS_GROUP: &str = "ovnbgp-test-ovs";
const CAP_NET_ADMIN_MASK: u64 = 1 << 12;

/// The numeric id of a group (`getent group`).
fn gid(group: &str) -> u32 {
    let line = run_ok(Command::new("getent").args(["group", group]));
    line.split(':')
        .nth(2)
        .and_then(|g| g.trim().parse().ok())
        .unwrap_or_else(|| panic!("getent group {group}: {line}"))
}

/// The test user and the OVS stand-in group, created if absent (idempotent; the tests of this
/// binary take turns, and a creation by another process is tolerated: only the end state is
/// checked).
fn ensure_user() -> u32 {
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = CREATING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !Command::new("getent")
        .args(["group", OVS_GROUP])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        let _ = Command::new("groupadd")
            .args(["--system", OVS_GROUP])
            .status();
    }
    if !Command::new("getent")
        .args(["passwd", USER])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status();
    }
    gid(OVS_GROUP);
    run_ok(Command::new("id").args(["-u", USER]))
        .trim()
        .parse()
        .expect("uid of the test user")
}

fn chown_user(path: &Path) {
    run_ok(
        Command::new("chown")
            .arg(format!("{USER}:{USER}"))
            .arg(path),
    );
}

/// `setpriv` as the unit runs the agent: the test user, its groups, `CAP_NET_ADMIN` (or
/// `caps`) as the only capability in every set, and `no_new_privs`.
fn setpriv(groups: &[u32], caps: &str) -> Vec<String> {
    let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
    let mut v: Vec<String> = [
        "setpriv",
        &format!("--reuid={USER}"),
        &format!("--regid={USER}"),
    ]
    .map(str::to_owned)
    .to_vec();
    v.push(if groups.is_empty() {
        "--clear-groups".to_owned()
    } else {
        format!("--groups={}", groups.join(","))
    });
    for set in ["--inh-caps", "--ambient-caps", "--bounding-set"] {
        v.push(format!("{set}=-all{caps}"));
    }
    v.push("--no-new-privs".to_owned());
    v.push("--".to_owned());
    v
}

/// A field of `/proc/<pid>/status` (or of a copy of one).
fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no {name} in\n{status}"))
}

fn mask(status: &str, name: &str) -> u64 {
    u64::from_str_radix(&status_field(status, name), 16).unwrap()
}

/// The agent as user `ovnbgp-test` with `CAP_NET_ADMIN` only, inside the chassis namespace
/// (as a deployment runs it in the host's: `[linux] netns` unset), with access granted the
/// way a deployment grants it: group frrvty for FRR's vty sockets (FRR creates them
/// `frr:frrvty 0770`), a group for OVS's sockets (`--ovs-user` with a group-writable umask
/// gives `USER:GROUP 0770`; here root's lab sockets are given that group and mode), the
/// rt_tables file writable by the agent's group (the unit's `ExecStartPre`), and its own
/// state and run directories. The lab's OVN databases listen on 127.0.0.1 of the host's
/// namespace, out of reach from the chassis namespace, so the agent reads them over their unix
/// sockets, given the same group (a chassis reaches the central databases over tcp:/ssl:,
/// which needs no privilege). It exposes the lab at the ToR, in the kernel (addresses, rules,
/// routes, neighbours, sysctls), in OVS (flows) and FRR (its configuration applied through
/// vtysh), and the vtysh it runs holds no capability.
#[test]
fn the_agent_runs_end_to_end_as_an_unprivileged_user_with_only_cap_net_admin() {
    require_root();
    let uid = ensure_user();
    let lab = Lab::start();
    let ns = lab.ns_chassis().to_owned();

    let own = lab.dir().join("nonroot");
    std::fs::create_dir_all(&own).unwrap();
    chown_user(&own);
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o750)).unwrap();
    let log = lab.dir().join("agent.log");
    std::fs::write(&log, "").unwrap();
    chown_user(&log);

    // rt_tables: writable by the agent's group, as the non-root unit makes it.
    let rt_tables = lab.env("RT_TABLES");
    run_ok(Command::new("chgrp").args([USER, rt_tables]));
    run_ok(Command::new("chmod").args(["g+w", rt_tables]));
    // FRR's vty sockets are the frrvty group's already.
    let vty = Path::new(lab.env("VTY_CHASSIS"));
    for daemon in ["zebra", "bgpd"] {
        let sock = vty.join(format!("{daemon}.vty"));
        let owner = run_ok(Command::new("stat").args(["-c", "%U:%G %a"]).arg(&sock));
        assert_eq!(owner.trim(), "frr:frrvty 770", "{}", sock.display());
    }
    // OVS's sockets: the group and mode an OVS run with a group gives them; OVN's too.
    let ovs_dir = Path::new(lab.env("OVS_RUNDIR"));
    let mut ovs_sockets = Vec::new();
    for entry in std::fs::read_dir(ovs_dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "db.sock" || name.ends_with(".mgmt") || name == "ovs-vswitchd.ctl" {
            ovs_sockets.push(entry.path());
        }
    }
    assert!(ovs_sockets.len() >= 3, "{ovs_sockets:?}");
    ovs_sockets.push(lab.env("SB_SOCK").into());
    ovs_sockets.push(lab.env("NB_SOCK").into());
    for sock in &ovs_sockets {
        run_ok(Command::new("chgrp").arg(OVS_GROUP).arg(sock));
        run_ok(Command::new("chmod").arg("0770").arg(sock));
    }

    // vtysh through a wrapper that records the capabilities it runs with.
    let vtysh = own.join("vtysh");
    let vtysh_status = own.join("vtysh-status");
    std::fs::write(
        &vtysh,
        format!(
            "#!/bin/sh\ncat /proc/$$/status > {}\nexec /usr/bin/vtysh \"$@\"\n",
            vtysh_status.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&vtysh, std::fs::Permissions::from_mode(0o755)).unwrap();
    // proxy_arp off, so that the agent's write is seen.
    run_ok(Command::new("ip").args([
        "netns",
        "exec",
        &ns,
        "sh",
        "-c",
        "echo 0 > /proc/sys/net/ipv4/conf/br-ex/proxy_arp",
    ]));

    let overrides = format!(
        "[DEFAULT]\nreconcile_interval = 20\nfrr_reconcile_interval = 2\n\
         [ovs]\nflow_check_interval = 2\n[linux]\nnetns =\n\
         [frr]\nvtysh_path = {}\nstate_file = {}/frr-objects.json\n\
         [telemetry]\ncontrol_socket = {}/agent.sock\n",
        vtysh.display(),
        own.display(),
        own.display()
    );
    let mut wrapper: Vec<String> = ["ip", "netns", "exec", &ns].map(str::to_owned).to_vec();
    wrapper.extend(setpriv(&[gid("frrvty"), gid(OVS_GROUP)], ",+net_admin"));
    let mut agent = Agent::start_wrapped(lab.dir(), &overrides, &[], &wrapper);

    let vm4 = format!("{}/32", lab.env("VM_PROVIDER_IP4"));
    let vm6 = format!("{}/128", lab.env("VM_PROVIDER_IP6"));
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let fip = format!("{}/32", lab.env("FIP_IP4"));
    let tenant = format!("{}/32", lab.env("VM_TENANT_IP4"));
    let all = [&vm4, &vm6, &gw4, &fip, &tenant];
    let deadline = Instant::now() + CONVERGENCE_TIMEOUT;
    while !all.iter().all(|x| has(&lab.tor_prefixes(), x)) {
        agent.assert_running();
        assert!(
            Instant::now() < deadline,
            "the ToR has {:?}, not all of {all:?}; the agent's log:\n{}",
            lab.tor_prefixes(),
            agent.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The agent: the test user, CAP_NET_ADMIN and nothing else; the ambient and inheritable
    // sets that brought it there are cleared at start, so nothing it runs inherits it.
    let pid = agent.pid().expect("agent pid");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(status_field(&status, "Name"), "ovn-bgp-agent");
    assert_eq!(
        status_field(&status, "Uid"),
        format!("{uid}\t{uid}\t{uid}\t{uid}")
    );
    for set in ["CapEff", "CapPrm", "CapBnd"] {
        assert_eq!(mask(&status, set), CAP_NET_ADMIN_MASK, "{set}:\n{status}");
    }
    for set in ["CapAmb", "CapInh"] {
        assert_eq!(mask(&status, set), 0, "{set}:\n{status}");
    }
    assert_eq!(status_field(&status, "NoNewPrivs"), "1");

    // The kernel state it made: addresses, rules, routes, neighbours, a sysctl.
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    for a in all {
        assert!(addrs.contains(a.as_str()), "{a} not on bgp-nic:\n{addrs}");
    }
    let table = lab.br_ex_table();
    let rules = lab.ip_chassis(&["rule", "show"]);
    assert!(
        rules.contains(&format!("to {} lookup {table}", lab.env("FIP_IP4"))),
        "{rules}"
    );
    let routes = lab.ip_chassis(&["route", "show", "table", &table]);
    assert!(routes.contains("default dev br-ex"), "{routes}");
    let neigh = lab.ip_chassis(&["neigh", "show", "dev", "br-ex"]);
    assert!(
        neigh.contains(&format!("{} lladdr", lab.env("GW_IP4"))),
        "{neigh}"
    );
    let proxy_arp = run_ok(Command::new("ip").args([
        "netns",
        "exec",
        &ns,
        "cat",
        "/proc/sys/net/ipv4/conf/br-ex/proxy_arp",
    ]));
    assert_eq!(proxy_arp.trim(), "1");
    // OVS: the MAC-tweak flows through ovs-ofctl on br-ex.mgmt.
    let flows = wait_for("cookie flows on br-ex", Duration::from_secs(30), || {
        let f = lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=0x3e7/-1"]);
        if f.lines().filter(|l| l.contains("cookie=0x3e7")).count() == 2 {
            Ok(f)
        } else {
            Err(f)
        }
    });
    assert!(flows.contains("priority=900,ip,in_port="), "{flows}");
    // FRR: the leak VRF configuration, applied with vtysh -f.
    let running = lab.vtysh_chassis("show running-config");
    assert!(
        running.contains("router bgp 64999 vrf bgp-vrf"),
        "{running}"
    );

    // The vtysh it ran: the same user, no capability in any set, no way to gain one.
    let tool = std::fs::read_to_string(&vtysh_status).expect("the vtysh wrapper ran");
    assert_eq!(
        status_field(&tool, "Uid"),
        format!("{uid}\t{uid}\t{uid}\t{uid}")
    );
    for set in ["CapInh", "CapEff", "CapPrm", "CapAmb"] {
        assert_eq!(mask(&tool, set), 0, "{set}:\n{tool}");
    }
    assert_eq!(status_field(&tool, "NoNewPrivs"), "1");

    // The start check found nothing missing, and nothing was refused at run time.
    let text = agent.log();
    assert!(text.contains("privileges"), "{}", agent.log_tail());
    for bad in [
        "missing CAP_",
        "no write access",
        "no connect (write) access",
        "Operation not permitted",
        "Permission denied",
    ] {
        let hit: Vec<&str> = text.lines().filter(|l| l.contains(bad)).take(3).collect();
        assert!(hit.is_empty(), "{bad:?} in the agent's log: {hit:#?}");
    }
    agent.stop();
}

/// The agent binary run as `wrapper` with a configuration of `conf`: (exit code, stderr).
fn run_agent(wrapper: &[String], conf: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(&wrapper[0])
        .args(&wrapper[1..])
        .arg(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
        .args(args)
        .arg("--config-file")
        .arg(conf)
        .output()
        .expect("run the agent");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
    )
}

/// Without `CAP_NET_ADMIN` the agent does not start: as an unprivileged user, and as root in
/// a bounding set without it; the error names the capability, why the mode needs it and the
/// fix. With `[linux] netns` it also needs `CAP_SYS_ADMIN`. `doctor` reports the same, with
/// the file access the user lacks as a warning. No lab: the check comes before any
/// connection.
#[test]
fn without_cap_net_admin_the_agent_refuses_to_start_and_names_the_fix() {
    require_root();
    ensure_user();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rt_tables = dir.path().join("rt_tables");
    std::fs::write(&rt_tables, "255\tlocal\n").unwrap();
    let conf = dir.path().join("bgp-agent.conf");
    let write_conf = |extra: &str| {
        std::fs::write(
            &conf,
            format!(
                "[DEFAULT]\novsdb_connection = unix:{0}/db.sock\n[linux]\nrt_tables_path = {1}\n\
                 {extra}[frr]\nstate_file = {0}/state/frr.json\n[telemetry]\ncontrol_socket = \
                 {0}/run/agent.sock\n",
                dir.path().display(),
                rt_tables.display()
            ),
        )
        .unwrap();
    };
    write_conf("");

    // An unprivileged user without any capability.
    let (code, out) = run_agent(&setpriv(&[], ""), &conf, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "missing CAP_NET_ADMIN: exposing_method = underlay configures the kernel over \
             rtnetlink"
        ),
        "{out}"
    );
    assert!(
        out.contains("AmbientCapabilities=CAP_NET_ADMIN and CapabilityBoundingSet=CAP_NET_ADMIN"),
        "{out}"
    );
    assert!(out.contains("not starting"), "{out}");
    // The file access it lacks is a warning naming the path, its owner and the fix.
    assert!(
        out.contains(&format!(
            "no write access to {} (root:root mode 0644)",
            rt_tables.display()
        )),
        "{out}"
    );

    // Root, with CAP_NET_ADMIN out of its bounding set (a container without it).
    let root_without: Vec<String> = [
        "setpriv",
        "--bounding-set=-net_admin",
        "--inh-caps=-net_admin",
        "--",
    ]
    .map(str::to_owned)
    .to_vec();
    let (code, out) = run_agent(&root_without, &conf, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("missing CAP_NET_ADMIN")
            && out.contains("runs as root but without CAP_NET_ADMIN"),
        "{out}"
    );

    // With CAP_NET_ADMIN but a namespace to enter: CAP_SYS_ADMIN is missing.
    write_conf("netns = some-ns\n");
    let (code, out) = run_agent(&setpriv(&[], ",+net_admin"), &conf, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(
            "missing CAP_SYS_ADMIN: [linux] netns = some-ns: entering another network namespace"
        ),
        "{out}"
    );
    assert!(!out.contains("missing CAP_NET_ADMIN"), "{out}");
    assert!(
        out.contains("NetworkNamespacePath=/run/netns/some-ns"),
        "{out}"
    );

    // doctor, run as the agent would be, reports the same checks.
    write_conf("");
    let (code, out) = run_agent(&setpriv(&[], ""), &conf, &["doctor"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL privileges: missing CAP_NET_ADMIN"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "warn privileges: no write access to {}",
            rt_tables.display()
        )),
        "{out}"
    );
    assert!(out.contains("ok   privileges: running as uid"), "{out}");
}
