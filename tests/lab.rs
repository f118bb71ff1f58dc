//! The lab scripts against the real thing: `scripts/lab/up.sh` brings up OVN (NB, SB, northd),
//! OVS (userspace datapath) with ovn-controller, and two FRR instances in network namespaces;
//! this test checks what an operator and the agent rely on, then `down.sh` removes it all.
//!
//! Runs as root. Uses its own LAB_DIR, netns prefix and TCP ports (see `lab_fixture`).

// Real daemons run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod lab_fixture;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lab_fixture::{
    CONVERGENCE_TIMEOUT, Lab, OVN_25_03, netns_names, process_alive, require_root, run_ok, wait_for,
};
use serde_json::Value;

/// The agent's leak configuration (upstream `LEAK_VRF_TEMPLATE`) rendered for the lab defaults.
const LEAK_VRF_CONFIG: &str = "\
router bgp 64999
  address-family ipv4 unicast
    import vrf bgp-vrf
  exit-address-family

  address-family ipv6 unicast
    import vrf bgp-vrf
  exit-address-family

router bgp 64999 vrf bgp-vrf
  bgp router-id 100.64.0.1
  address-family ipv4 unicast
    redistribute connected
  exit-address-family

  address-family ipv6 unicast
    redistribute connected
  exit-address-family
";

#[test]
fn lab_up_peers_binds_ports_propagates_bgp_nic_reruns_and_tears_down() {
    require_root();
    let mut lab = Lab::start();
    eprintln!(
        "scripts/lab/up.sh took {:.2} s\n{}",
        lab.up_duration().as_secs_f64(),
        lab.up_output()
    );

    tor_has_established_ebgp_session_with_chassis(&lab);
    sb_has_chassis_and_bound_ports(&lab);
    nb_has_the_keys_neutron_writes(&lab);
    agent_conf_points_at_the_lab(&lab);
    bgp_nic_addresses_reach_the_tor_and_are_withdrawn(&lab);

    let status = lab.status();
    assert!(
        status.contains(lab.env("CHASSIS_IP4")) && status.matches("running (pid").count() == 10,
        "status.sh must show the ToR's session and 10 running daemons:\n{status}"
    );

    // Re-running up.sh replaces the lab: the old daemons end, the new lab works.
    let old_pids = lab.daemon_pids();
    lab.rerun_up();
    eprintln!(
        "scripts/lab/up.sh over a running lab took {:.2} s",
        lab.up_duration().as_secs_f64()
    );
    let marker = format!("{}/", lab.dir().display());
    for (pidfile, pid) in &old_pids {
        assert!(
            !process_alive(*pid, &marker) || lab.daemon_pids().iter().any(|(_, p)| p == pid),
            "{pidfile} (pid {pid}) of the first lab survived up.sh"
        );
    }
    tor_has_established_ebgp_session_with_chassis(&lab);
    sb_has_chassis_and_bound_ports(&lab);

    // Teardown: exactly the lab's processes end, its namespaces and directory disappear.
    let pids = lab.daemon_pids();
    assert_eq!(
        pids.len(),
        10,
        "expected 10 lab daemons (3 ovsdb-server, northd, vswitchd, ovn-controller, 2x zebra+bgpd): {pids:?}"
    );
    let lab_dir = lab.dir().to_owned();
    let namespaces = [lab.ns_chassis().to_owned(), lab.ns_tor().to_owned()];
    let out = lab.down();
    assert!(
        out.status.success(),
        "down.sh failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for (pidfile, pid) in &pids {
        assert!(
            !process_alive(*pid, &marker),
            "{pidfile} (pid {pid}) still runs after down.sh"
        );
    }
    let remaining = netns_names();
    for ns in &namespaces {
        assert!(
            !remaining.contains(ns),
            "netns {ns} still exists after down.sh"
        );
    }
    assert!(!lab_dir.exists(), "{} still exists", lab_dir.display());
    let again = lab.down();
    assert!(
        again.status.success(),
        "down.sh is not safe to run twice: {}\n{}",
        again.status,
        String::from_utf8_lossy(&again.stderr)
    );
}

/// `LAB_OVN=25.03`: OVN central, northd, ovn-controller and OVS run Debian 13's binaries from the
/// cached chroot (FRR stays the host's), the NB has OVN 25.03's schema with
/// `Logical_Router_Port.status`, northd fills `status:hosting-chassis` of the gateway with the
/// chassis' system-id, the lab works as the default one does, and down.sh leaves no process, no
/// mount and no namespace behind.
#[test]
fn lab_on_ovn_25_03_runs_ovn_from_the_chroot_northd_hosts_the_gateway_and_tears_down() {
    require_root();
    let mut lab = Lab::start_with_env(OVN_25_03);
    eprintln!(
        "scripts/lab/up.sh with LAB_OVN=25.03 took {:.2} s\n{}",
        lab.up_duration().as_secs_f64(),
        lab.up_output()
    );
    let root = lab.env("OVN_ROOT").to_owned();
    assert!(root.starts_with('/'), "lab.env OVN_ROOT={root:?}");

    let pids = lab.daemon_pids();
    assert_eq!(
        pids.len(),
        10,
        "the same 10 daemons as the default lab: {pids:?}"
    );
    for (pidfile, pid) in &pids {
        let proc_root = std::fs::read_link(format!("/proc/{pid}/root"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/root of {pidfile}: {e}"));
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/exe of {pidfile}: {e}"));
        if pidfile.starts_with("frr/") {
            assert_eq!(
                proc_root.to_str(),
                Some("/"),
                "{pidfile} must run on the host"
            );
        } else {
            assert_eq!(proc_root.to_str(), Some(root.as_str()), "root of {pidfile}");
            assert!(exe.starts_with(&root), "{pidfile} runs {}", exe.display());
        }
    }
    let appctl = |ctl: String| run_ok(Command::new("ovs-appctl").arg("-t").arg(ctl).arg("version"));
    let dir = lab.dir().display().to_string();
    let controller_pid = pids
        .iter()
        .find(|(f, _)| f == "ovn/ovn-controller.pid")
        .map(|(_, pid)| *pid)
        .expect("ovn-controller pid file");
    for (ctl, expected) in [
        (format!("{dir}/ovn/ovn-northd.ctl"), "ovn-northd 25.03."),
        (
            format!("{dir}/ovn/ovn-controller.{controller_pid}.ctl"),
            "ovn-controller 25.03.",
        ),
        (format!("{dir}/ovs/ovs-vswitchd.ctl"), "(Open vSwitch) 3.5."),
        (
            format!("{dir}/ovn/ovsdb-server-nb.ctl"),
            "(Open vSwitch) 3.5.",
        ),
    ] {
        let version = appctl(ctl.clone());
        assert!(version.contains(expected), "{ctl}: {version}");
    }

    let schema = lab.nb_client(&["get-schema-version", "{NB}", "OVN_Northbound"]);
    assert!(schema.trim().starts_with("7.11."), "NB schema {schema}");
    let columns = lab.nb_columns("Logical_Router_Port");
    assert!(
        columns.iter().any(|c| c == "status"),
        "Logical_Router_Port has no status column: {columns:?}"
    );
    let gateway = format!("lrp-{}", lab.env("GW_PORT_ID"));
    let lrps = lab.nb_client(&[
        "-f",
        "csv",
        "--no-headings",
        "dump",
        "{NB}",
        "OVN_Northbound",
        "Logical_Router_Port",
        "name",
        "status",
    ]);
    let status = lrps
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{gateway},")))
        .unwrap_or_else(|| panic!("no {gateway} in\n{lrps}"));
    // The system-id (SB Chassis.name), not the hostname Neutron compares requested-chassis with.
    assert_eq!(
        status,
        format!("{{hosting-chassis={}}}", lab.env("CHASSIS_NAME")),
        "status of {gateway}"
    );

    tor_has_established_ebgp_session_with_chassis(&lab);
    sb_has_chassis_and_bound_ports(&lab);
    nb_has_the_keys_neutron_writes(&lab);

    let namespaces = [lab.ns_chassis().to_owned(), lab.ns_tor().to_owned()];
    let mount_point = format!("{root}{dir}");
    let out = lab.down();
    assert!(
        out.status.success(),
        "down.sh failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let marker = format!("{dir}/");
    for (pidfile, pid) in &pids {
        assert!(
            !process_alive(*pid, &marker),
            "{pidfile} (pid {pid}) still runs after down.sh"
        );
    }
    assert!(
        processes_with_mount(&mount_point).is_empty(),
        "processes still mount {mount_point}: {:?}",
        processes_with_mount(&mount_point)
    );
    assert!(
        !Path::new(&mount_point).exists(),
        "the mount point {mount_point} is left in the chroot"
    );
    let remaining = netns_names();
    for ns in &namespaces {
        assert!(
            !remaining.contains(ns),
            "netns {ns} still exists after down.sh"
        );
    }
    assert!(!lab.dir().exists(), "{dir} still exists");
}

/// `LAB_CHASSIS2=1`: a second chassis (own OVS database, ovs-vswitchd and ovn-controller in its
/// own netns) registers in SB next to the first with its own system-id, hostname and geneve
/// endpoint, while the first keeps every binding; once both are gateway chassis of the router's
/// port, BFD over the geneve tunnel between them is up on both sides, also after each
/// ovs-vswitchd restarted (restart.sh puts the encap IP back on br-phy); `restart.sh --exit`
/// takes chassis 2 out of SB, plain restart.sh restarts its ovn-controller; down.sh removes it
/// all.
#[test]
fn lab_with_a_second_chassis_registers_both_in_sb_with_a_working_tunnel_and_tears_down() {
    require_root();
    let mut lab = Lab::start_with_env(&[("LAB_CHASSIS2", "1")]);
    eprintln!(
        "scripts/lab/up.sh with LAB_CHASSIS2=1 took {:.2} s",
        lab.up_duration().as_secs_f64()
    );
    let pids = lab.daemon_pids();
    assert_eq!(
        pids.len(),
        13,
        "10 daemons + the second chassis' 3: {pids:?}"
    );
    let ns2 = lab.env("NS_CHASSIS2").to_owned();
    for daemon in ["ovs2/ovs-vswitchd.pid", "ovs2/ovn-controller.pid"] {
        let pid = pids
            .iter()
            .find(|(f, _)| f == daemon)
            .map(|(_, pid)| pid.to_string())
            .unwrap_or_else(|| panic!("no {daemon}: {pids:?}"));
        let ns = run_ok(Command::new("ip").args(["netns", "identify", &pid]));
        assert_eq!(ns.trim(), ns2, "netns of {daemon}");
    }

    let wait_both_registered = |lab: &Lab| {
        wait_for("both chassis in SB", CONVERGENCE_TIMEOUT, || {
            let rows = lab.sb_rows("Chassis", &["name", "hostname"]);
            let mut found: Vec<(String, String)> = rows
                .iter()
                .map(|r| {
                    let text = |c: &str| r[c].as_str().unwrap_or_default().to_owned();
                    (text("name"), text("hostname"))
                })
                .collect();
            found.sort();
            let expected = vec![
                (
                    lab.env("CHASSIS_NAME").to_owned(),
                    lab.env("CHASSIS_HOSTNAME").to_owned(),
                ),
                (
                    lab.env("CHASSIS2_NAME").to_owned(),
                    lab.env("CHASSIS2_HOSTNAME").to_owned(),
                ),
            ];
            if found == expected {
                Ok(())
            } else {
                Err(format!("{found:?}"))
            }
        })
    };
    wait_both_registered(&lab);
    // The first chassis still holds every binding (the second hosts nothing).
    sb_has_chassis_and_bound_ports(&lab);
    let mut encaps: Vec<(String, String, String)> = lab
        .sb_rows("Encap", &["chassis_name", "type", "ip"])
        .iter()
        .map(|r| {
            let text = |c: &str| r[c].as_str().unwrap_or_default().to_owned();
            (text("chassis_name"), text("type"), text("ip"))
        })
        .collect();
    encaps.sort();
    let geneve = |name: &str, ip: &str| {
        (
            lab.env(name).to_owned(),
            "geneve".to_owned(),
            lab.env(ip).to_owned(),
        )
    };
    assert_eq!(
        encaps,
        vec![
            geneve("CHASSIS_NAME", "CHASSIS_ENCAP_IP4"),
            geneve("CHASSIS2_NAME", "CHASSIS2_ENCAP_IP4")
        ]
    );

    // Chassis 2 as a lower-priority gateway chassis: OVN turns BFD on between the two, the
    // gateway stays on chassis 1.
    let lrp = format!("lrp-{}", lab.env("GW_PORT_ID"));
    lab.nbctl(&[
        "lrp-set-gateway-chassis",
        &lrp,
        lab.env("CHASSIS2_NAME"),
        "0",
    ]);
    let started = Instant::now();
    lab.wait_bfd_up_between_the_chassis();
    eprintln!(
        "BFD up {:.2} s after chassis 2 became a gateway chassis",
        started.elapsed().as_secs_f64()
    );
    for vswitchd in ["ovs-vswitchd", "ovs-vswitchd-2"] {
        lab.restart(&[vswitchd]);
        let started = Instant::now();
        lab.wait_bfd_up_between_the_chassis();
        eprintln!(
            "BFD up {:.2} s after restart.sh {vswitchd}",
            started.elapsed().as_secs_f64()
        );
    }
    // (Chassis 1 lets the port go while it has no BFD session up, and takes it back.)
    lab.wait_sb_bound(
        "the gateway on chassis 1 (the higher priority)",
        &format!("cr-{lrp}"),
        lab.env("CHASSIS_NAME"),
    );

    lab.restart(&["--exit", "--down", "ovn-controller-2"]);
    let names: Vec<String> = lab
        .sb_rows("Chassis", &["name"])
        .iter()
        .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        names,
        vec![lab.env("CHASSIS_NAME").to_owned()],
        "chassis 2 left SB on exit"
    );
    lab.restart(&["--up", "ovn-controller-2"]);
    wait_both_registered(&lab);
    lab.restart(&["--kill", "ovn-controller-2"]);
    wait_both_registered(&lab);
    let status = lab.status();
    assert_eq!(
        status.matches("running (pid").count(),
        13,
        "status.sh must show 13 running daemons:\n{status}"
    );

    let out = lab.down();
    assert!(
        out.status.success(),
        "down.sh failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !netns_names().contains(&ns2),
        "netns {ns2} still exists after down.sh"
    );
    let marker = format!("{}/", lab.dir().display());
    let alive: Vec<_> = pids
        .iter()
        .filter(|(_, pid)| process_alive(*pid, &marker))
        .collect();
    assert!(alive.is_empty(), "still running after down.sh: {alive:?}");
}

/// Pids whose mount namespace has a mount at `path`.
fn processes_with_mount(path: &str) -> Vec<u32> {
    let needle = format!(" {path} ");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
                .is_ok_and(|m| m.contains(&needle))
        })
        .collect()
}

/// The topology carries Neutron's keys as Neutron's OVN driver writes them: switches named
/// `neutron-<network id>`, the FIP's `neutron:fip_network_id` the bare network id, the chassis'
/// hostname (what `requested-chassis` names) different from its system-id.
fn nb_has_the_keys_neutron_writes(lab: &Lab) {
    let net = lab.env("NET_PUBLIC_ID");
    let switch = lab.nbctl(&["get", "Logical_Switch", &format!("neutron-{net}"), "name"]);
    assert_eq!(switch.trim().trim_matches('"'), format!("neutron-{net}"));

    let fip_ip = format!("external_ip=\"{}\"", lab.env("FIP_IP4"));
    let nat = lab.nbctl(&["--bare", "--columns=_uuid", "find", "NAT", &fip_ip]);
    let nat = nat.trim();
    assert!(!nat.is_empty(), "no NAT row with {fip_ip}");
    let network = lab.nbctl(&["get", "NAT", nat, "external_ids:\"neutron:fip_network_id\""]);
    assert_eq!(
        network.trim().trim_matches('"'),
        net,
        "neutron:fip_network_id holds the bare network id"
    );

    let ovs_id = |key: &str| {
        lab.vsctl(&["get", "Open_vSwitch", ".", &format!("external_ids:{key}")])
            .trim()
            .trim_matches('"')
            .to_owned()
    };
    let (system_id, hostname) = (ovs_id("system-id"), ovs_id("hostname"));
    assert_eq!(system_id, lab.env("CHASSIS_NAME"));
    assert_eq!(hostname, lab.env("CHASSIS_HOSTNAME"));
    assert_ne!(
        system_id, hostname,
        "a real chassis' hostname is not its system-id"
    );
    for port in [lab.env("VM_TENANT_PORT_ID"), lab.env("VM_PROVIDER_PORT_ID")] {
        let requested = lab.nbctl(&[
            "get",
            "Logical_Switch_Port",
            port,
            "options:requested-chassis",
        ]);
        assert_eq!(
            requested.trim().trim_matches('"'),
            hostname,
            "requested-chassis of {port}"
        );
    }
}

fn tor_has_established_ebgp_session_with_chassis(lab: &Lab) {
    let chassis_ip = lab.env("CHASSIS_IP4");
    let neighbors = lab.tor_json("show bgp neighbors json");
    let peer = &neighbors[chassis_ip];
    assert_eq!(
        peer["bgpState"], "Established",
        "ToR session with {chassis_ip}: {peer:#}"
    );
    assert_eq!(peer["remoteAs"], 64999, "chassis AS: {peer:#}");
    assert_eq!(peer["localAs"], 65000, "ToR AS: {peer:#}");
    assert_eq!(
        peer["nbrExternalLink"], true,
        "session must be eBGP: {peer:#}"
    );

    let summary = lab.tor_json("show bgp summary json");
    for afi in ["ipv4Unicast", "ipv6Unicast"] {
        assert_eq!(
            summary[afi]["peers"][chassis_ip]["state"], "Established",
            "{afi} of the ToR session: {:#}",
            summary[afi]
        );
    }
}

fn sb_has_chassis_and_bound_ports(lab: &Lab) {
    let chassis_rows = lab.sb_rows("Chassis", &["_uuid", "name", "hostname"]);
    let chassis = chassis_rows
        .iter()
        .find(|row| row["name"] == lab.env("CHASSIS_NAME"))
        .unwrap_or_else(|| {
            panic!(
                "no SB Chassis {}: {chassis_rows:?}",
                lab.env("CHASSIS_NAME")
            )
        });
    assert_eq!(chassis["hostname"], lab.env("CHASSIS_HOSTNAME"));
    let chassis_uuid = uuid_of(&chassis["_uuid"]);

    let bindings: HashMap<String, HashMap<String, Value>> = lab
        .sb_rows(
            "Port_Binding",
            &["logical_port", "type", "chassis", "up", "nat_addresses"],
        )
        .into_iter()
        .map(|row| {
            (
                row["logical_port"].as_str().unwrap_or_default().to_owned(),
                row,
            )
        })
        .collect();
    let cr_lrp = format!("cr-lrp-{}", lab.env("GW_PORT_ID"));
    for (port, kind) in [
        (lab.env("VM_TENANT_PORT_ID"), ""),
        (lab.env("VM_PROVIDER_PORT_ID"), ""),
        (cr_lrp.as_str(), "chassisredirect"),
    ] {
        let row = bindings
            .get(port)
            .unwrap_or_else(|| panic!("no Port_Binding {port}; have {:?}", bindings.keys()));
        assert_eq!(row["type"], kind, "type of {port}: {row:?}");
        assert_eq!(
            optional_uuid(&row["chassis"]).as_deref(),
            Some(chassis_uuid.as_str()),
            "Port_Binding {port} must be bound to the lab chassis: {row:?}"
        );
        assert_eq!(row["up"], true, "Port_Binding {port} must be up: {row:?}");
    }

    // The centralized FIP is announced by the gateway's patch port, with the gateway IP.
    let gateway_patch = &bindings
        .get(lab.env("GW_PORT_ID"))
        .unwrap_or_else(|| panic!("no Port_Binding for the router gateway LSP"))["nat_addresses"];
    let nat = gateway_patch.to_string();
    assert!(
        nat.contains(lab.env("FIP_IP4"))
            && nat.contains(lab.env("GW_IP4"))
            && nat.contains(&format!("is_chassis_resident(\\\"{cr_lrp}\\\")")),
        "nat_addresses of the gateway patch port: {nat}"
    );
}

fn agent_conf_points_at_the_lab(lab: &Lab) {
    let conf = std::fs::read_to_string(lab.env("AGENT_CONF")).expect("bgp-agent.conf");
    for expected in [
        format!("ovsdb_connection = unix:{}", lab.env("OVS_SOCK")),
        format!("ovn_sb_connection = unix:{}", lab.env("SB_SOCK")),
        format!("vty_socket_dir = {}", lab.env("VTY_CHASSIS")),
        format!("ovs_rundir = {}", lab.env("OVS_RUNDIR")),
        format!("netns = {}", lab.ns_chassis()),
        format!("rt_tables_path = {}", lab.env("RT_TABLES")),
        "bgp_AS = 64999".to_owned(),
        "vrf_device_kind = bridge".to_owned(),
        "nic_device_kind = ifb".to_owned(),
    ] {
        assert!(
            conf.contains(&expected),
            "bgp-agent.conf lacks `{expected}`:\n{conf}"
        );
    }
    let rt_tables = std::fs::read_to_string(lab.env("RT_TABLES")).expect("rt_tables");
    assert!(rt_tables.contains("254\tmain"), "rt_tables: {rt_tables}");
}

/// What the agent does in stand-in mode (bridge bgp-vrf, ifb bgp-nic enslaved to it, leak
/// config through vtysh -f, addresses on bgp-nic) must make the ToR learn and unlearn routes.
fn bgp_nic_addresses_reach_the_tor_and_are_withdrawn(lab: &Lab) {
    lab.ip_chassis(&["link", "add", "bgp-vrf", "type", "bridge"]);
    lab.ip_chassis(&["link", "set", "bgp-vrf", "up"]);
    lab.ip_chassis(&["link", "add", "bgp-nic", "type", "ifb"]);
    lab.ip_chassis(&["link", "set", "bgp-nic", "master", "bgp-vrf", "up"]);

    let leak = lab.dir().join("leak-vrf.conf");
    std::fs::write(&leak, LEAK_VRF_CONFIG).expect("write leak config");
    lab.vtysh_chassis_apply(&leak);
    let running = lab.vtysh_chassis("show running-config");
    assert!(
        running.contains("router bgp 64999 vrf bgp-vrf") && running.contains("import vrf bgp-vrf"),
        "leak config not in the chassis running-config:\n{running}"
    );

    // Not on bgp-nic: must never be advertised (added first, so once the bgp-nic route arrived
    // zebra and bgpd have processed this one too).
    lab.ip_chassis(&["addr", "add", "198.51.100.1/32", "dev", "br-ex"]);
    lab.ip_chassis(&["addr", "add", "203.0.113.10/32", "dev", "bgp-nic"]);
    lab.ip_chassis(&[
        "addr",
        "add",
        "2001:db8:ffff::10/128",
        "dev",
        "bgp-nic",
        "nodad",
    ]);
    // The agent's VRF-table default (must not be imported: it would beat the ToR's default).
    lab.ip_chassis(&[
        "route",
        "add",
        "unreachable",
        "default",
        "metric",
        "4278198272",
        "table",
        "10",
    ]);
    // Subnet mode: a route via the cr-lrp in the VRF table, on bgp-nic.
    lab.ip_chassis(&[
        "route",
        "add",
        "10.0.0.0/24",
        "via",
        "172.24.4.10",
        "dev",
        "bgp-nic",
        "onlink",
        "table",
        "10",
        "proto",
        "boot",
    ]);

    for (prefix, show) in [
        ("203.0.113.10/32", "show ip bgp json"),
        ("2001:db8:ffff::10/128", "show bgp ipv6 unicast json"),
        ("10.0.0.0/24", "show ip bgp json"),
    ] {
        let path = wait_for(&format!("{prefix} at the ToR"), CONVERGENCE_TIMEOUT, || {
            let table = lab.tor_json(show);
            // A path can show up before its next hop is resolved; wait for a valid one.
            table["routes"][prefix][0]
                .as_object()
                .filter(|p| p.get("valid") == Some(&serde_json::Value::Bool(true)))
                .cloned()
                .ok_or_else(|| format!("{:#}", table["routes"]))
        });
        assert_eq!(path["path"], "64999", "AS path of {prefix}: {path:?}");
        assert_eq!(path["valid"], true, "{prefix}: {path:?}");
        if !prefix.contains(':') {
            assert_eq!(
                path["nexthops"][0]["ip"],
                lab.env("CHASSIS_IP4"),
                "next hop of {prefix}: {path:?}"
            );
        }
    }
    let default = lab.ip_chassis(&["route", "show", "default"]);
    assert!(
        default.contains(&format!("via {} ", lab.env("TOR_IP4"))) && default.contains("proto bgp"),
        "the chassis' default route must stay the one learned from the ToR: {default}"
    );
    let v4 = lab.tor_json("show ip bgp json");
    assert!(
        v4["routes"].get("198.51.100.1/32").is_none(),
        "an address outside bgp-nic leaked to the ToR: {:#}",
        v4["routes"]
    );

    // The route first: deleting the last IPv4 address of bgp-nic makes the kernel flush every
    // IPv4 route through it, which would hide whether the route's own withdrawal works.
    lab.ip_chassis(&["route", "del", "10.0.0.0/24", "table", "10"]);
    lab.ip_chassis(&["addr", "del", "203.0.113.10/32", "dev", "bgp-nic"]);
    lab.ip_chassis(&["addr", "del", "2001:db8:ffff::10/128", "dev", "bgp-nic"]);
    for (prefix, show) in [
        ("203.0.113.10/32", "show ip bgp json"),
        ("2001:db8:ffff::10/128", "show bgp ipv6 unicast json"),
        ("10.0.0.0/24", "show ip bgp json"),
    ] {
        wait_for(
            &format!("{prefix} withdrawn at the ToR"),
            CONVERGENCE_TIMEOUT,
            || {
                let table = lab.tor_json(show);
                match table["routes"].get(prefix) {
                    None => Ok(()),
                    Some(paths) => Err(format!("{paths:#}")),
                }
            },
        );
    }
}

/// `["uuid", "<uuid>"]` → `<uuid>`.
fn uuid_of(cell: &Value) -> String {
    optional_uuid(cell).unwrap_or_else(|| panic!("not an OVSDB uuid: {cell}"))
}

/// `["uuid", "<uuid>"]` → Some, `["set", []]` → None.
fn optional_uuid(cell: &Value) -> Option<String> {
    match cell.as_array().map(Vec::as_slice) {
        Some([tag, Value::String(uuid)]) if tag == "uuid" => Some(uuid.clone()),
        _ => None,
    }
}
