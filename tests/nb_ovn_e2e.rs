//! The NB driver with `exposing_method = ovn`, end to end in the fast-tier lab: the real OVN,
//! OVS and FRR of the lab, the agent binary, and a second OVN Northbound started here as the
//! node-local cluster (standalone, or a 3-member RAFT cluster on 127.0.0.1 for the leader
//! change). The local cluster's fabric side is a bridge `br-fab` with an address, a NIC port
//! (`eth-fab`, in `external_nics`) and the patch port the local cluster's ovn-controller would
//! create (`patch-dcfabric-…`, paired with a bridge standing in for its integration bridge);
//! the last test runs the whole local cluster, ovn-controller included, as
//! `scripts/lab/local-ovn.sh` (the demo's) brings it up.
//!
//! Checked: the rows of acceptance row H1 after each exposure and withdrawal, the egress and
//! ingress flows, the static FDB entry, the ToR learning the exposed IPs, rows deleted by hand
//! restored without a restart (well before the periodic reconcile), rows of others untouched,
//! tenant exposures reported (not failing the sync), and a leader change of the local cluster
//! followed. Run under the daemon lock: `flock /tmp/ovn-bgp-daemons.lock cargo test --test
//! nb_ovn_e2e`.
#![cfg(all(feature = "nb_bgp", feature = "ovn_cluster"))]
// Real daemons run on the wall clock.
#![allow(clippy::disallowed_types)]

mod agent_fixture;
mod lab_fixture;
mod ovsdb_support;

use std::process::Command;
use std::time::{Duration, Instant};

use agent_fixture::Agent;
use lab_fixture::{CONVERGENCE_TIMEOUT, Lab, has, require_root, wait_for, wait_tor};
use ovsdb_support::{Cluster, NB_SCHEMA, OvsdbServer};

/// The fabric side: bridge, its address, the peer (the ToR on the fabric), the NIC port.
const FABRIC_BRIDGE: &str = "br-fab";
const FABRIC_ADDRESS: &str = "100.64.7.1/24";
const PEER: &str = "100.64.7.2";
const FABRIC_NIC: &str = "eth-fab";
const PATCH: &str = "patch-dcfabric-localnet-to-br-int-bgp";
const PATCH_PEER: &str = "patch-br-int-bgp-to-dcfabric-localnet";
/// Stands in for the local cluster's integration bridge.
const CLUSTER_INT_BRIDGE: &str = "br-int-bgp";
const PROVIDER_PREFIX: &str = "172.24.4.0/24";
/// The periodic full reconcile: long, so a repair seen sooner was driven by the NB change.
const RECONCILE_INTERVAL: Duration = Duration::from_secs(120);
/// How fast a hand edit of the local NB must be repaired.
const REPAIR_TIMEOUT: Duration = Duration::from_secs(15);

fn overrides(nb_remote: &str) -> String {
    format!(
        "[DEFAULT]\ndriver = nb_ovn_bgp_driver\nexposing_method = ovn\n\
         reconcile_interval = {}\nfrr_reconcile_interval = 2\n\
         [ovs]\nflow_check_interval = 2\n\
         [local_ovn_cluster]\novn_nb_connection = {nb_remote}\npeer_ips = {PEER}\n\
         provider_networks_pool_prefixes = {PROVIDER_PREFIX}\nexternal_nics = {FABRIC_NIC}\n\
         bgp_chassis_id = bgp\n",
        RECONCILE_INTERVAL.as_secs()
    )
}

/// The agent's `reconciled` log lines that contain `with`.
fn reconciled_lines(log: &str, with: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("reconciled") && l.contains(with))
        .count()
}

/// `ovn-nbctl --db=<remote> ARGS…` against the local cluster.
fn local_nbctl(remote: &str, args: &[&str]) -> String {
    let out = Command::new("ovn-nbctl")
        .arg(format!("--db={remote}"))
        .arg("--timeout=10")
        .args(args)
        .output()
        .expect("run ovn-nbctl");
    assert!(
        out.status.success(),
        "ovn-nbctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fabric bridge, its NIC and the local cluster's patch port on the lab's OVS, and the
/// cluster's mappings in the Open_vSwitch row.
fn wire_fabric(lab: &Lab) {
    let datapath = lab
        .vsctl(&["get", "Bridge", "br-ex", "datapath_type"])
        .trim()
        .to_owned();
    lab.vsctl(&[
        "--may-exist",
        "add-br",
        FABRIC_BRIDGE,
        "--",
        "set",
        "Bridge",
        FABRIC_BRIDGE,
        &format!("datapath_type={datapath}"),
        "--",
        "--may-exist",
        "add-port",
        FABRIC_BRIDGE,
        FABRIC_NIC,
        "--",
        "set",
        "Interface",
        FABRIC_NIC,
        "type=internal",
        "--",
        "--may-exist",
        "add-br",
        CLUSTER_INT_BRIDGE,
        "--",
        "set",
        "Bridge",
        CLUSTER_INT_BRIDGE,
        &format!("datapath_type={datapath}"),
        "--",
        "--may-exist",
        "add-port",
        FABRIC_BRIDGE,
        PATCH,
        "--",
        "set",
        "Interface",
        PATCH,
        "type=patch",
        &format!("options:peer={PATCH_PEER}"),
        "--",
        "--may-exist",
        "add-port",
        CLUSTER_INT_BRIDGE,
        PATCH_PEER,
        "--",
        "set",
        "Interface",
        PATCH_PEER,
        "type=patch",
        &format!("options:peer={PATCH}"),
        "--",
        "set",
        "Open_vSwitch",
        ".",
        &format!("external_ids:ovn-bridge-mappings-bgp=\"dcfabric:{FABRIC_BRIDGE},local:br-ex\""),
    ]);
    wait_for("br-fab in the chassis", CONVERGENCE_TIMEOUT, || {
        let links = lab.ip_chassis(&["link", "show"]);
        if links.contains(&format!(" {FABRIC_BRIDGE}:")) {
            Ok(())
        } else {
            Err(links)
        }
    });
    lab.ip_chassis(&["link", "set", FABRIC_BRIDGE, "up"]);
    lab.ip_chassis(&["addr", "replace", FABRIC_ADDRESS, "dev", FABRIC_BRIDGE]);
}

fn fabric_mac(lab: &Lab) -> String {
    let link = lab.ip_chassis(&["-br", "link", "show", "dev", FABRIC_BRIDGE]);
    link.split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("MAC of {FABRIC_BRIDGE}: {link}"))
        .to_owned()
}

fn ofport(lab: &Lab, port: &str) -> String {
    lab.vsctl(&["get", "Interface", port, "ofport"])
        .trim()
        .to_owned()
}

/// Polls `probe` (a command's output) until `done` holds for it.
fn wait_output(
    what: &str,
    timeout: Duration,
    probe: impl Fn() -> String,
    done: impl Fn(&str) -> bool,
) -> String {
    wait_for(what, timeout, || {
        let out = probe();
        if done(&out) { Ok(out) } else { Err(out) }
    })
}

/// `assert!` that returns the failure as an `Err` (for [`wait_for`]).
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// The H1 rows in the local NB, as `ovn-nbctl` shows them.
fn h1_rows(remote: &str, fabric_mac: &str) -> Result<(), String> {
    let lrps = local_nbctl(remote, &["lrp-list", "bgp-router"]);
    check!(
        lrps.contains("bgp-router-openstack") && lrps.contains("bgp-router-dcfabric"),
        "{lrps}"
    );
    let openstack = local_nbctl(
        remote,
        &[
            "--columns=mac,networks",
            "list",
            "Logical_Router_Port",
            "bgp-router-openstack",
        ],
    );
    check!(
        openstack.contains("\"40:44:00:00:00:06\"") && openstack.contains(PROVIDER_PREFIX),
        "{openstack}"
    );
    let fabric = local_nbctl(
        remote,
        &[
            "--columns=mac,networks",
            "list",
            "Logical_Router_Port",
            "bgp-router-dcfabric",
        ],
    );
    check!(
        fabric.contains(fabric_mac) && fabric.contains(FABRIC_ADDRESS),
        "the fabric port takes br-fab's MAC and address:\n{fabric}"
    );
    let lsp = local_nbctl(
        remote,
        &[
            "--columns=type,options",
            "list",
            "Logical_Switch_Port",
            "openstack-bgp-router",
        ],
    );
    check!(
        lsp.contains("router")
            && lsp.contains(&format!("arp_proxy=\"{PROVIDER_PREFIX}\""))
            && lsp.contains("router-port=bgp-router-openstack"),
        "{lsp}"
    );
    let switches = local_nbctl(remote, &["ls-list"]);
    check!(
        switches.contains("(dcfabric)") && switches.contains("(local)"),
        "{switches}"
    );
    for (ls, port) in [
        ("dcfabric", "dcfabric-localnet"),
        ("local", "local-localnet"),
    ] {
        let ports = local_nbctl(remote, &["lsp-list", ls]);
        check!(ports.contains(port), "{ls}: {ports}");
        let options = local_nbctl(remote, &["lsp-get-options", port]);
        check!(options.contains(&format!("network_name={ls}")), "{options}");
    }
    let policies = local_nbctl(remote, &["lr-policy-list", "bgp-router"]);
    check!(
        policies.contains("10")
            && policies.contains("inport==\"bgp-router-openstack\"")
            && policies.contains("reroute")
            && policies.contains(PEER),
        "{policies}"
    );
    let routes = local_nbctl(remote, &["lr-route-list", "bgp-router"]);
    check!(
        routes.contains("0.0.0.0/0") && routes.contains(PEER) && routes.contains("bfd"),
        "ECMP default route with BFD:\n{routes}"
    );
    let bfd = local_nbctl(remote, &["--columns=logical_port,dst_ip", "list", "BFD"]);
    check!(
        bfd.contains("bgp-router-dcfabric") && bfd.contains(PEER),
        "U02: the BFD row is written:\n{bfd}"
    );
    let gateways = local_nbctl(remote, &["lrp-get-gateway-chassis", "bgp-router-openstack"]);
    check!(
        gateways.contains("bgp-router-openstack-bgp") && gateways.contains(" 1"),
        "{gateways}"
    );
    let owned = local_nbctl(
        remote,
        &[
            "--columns=external_ids",
            "list",
            "Logical_Router",
            "bgp-router",
        ],
    );
    check!(
        owned.contains("\"ovn-bgp-agent:owned\"=\"true\""),
        "{owned}"
    );
    Ok(())
}

/// Waits for the H1 rows; on failure, the agent's reports of what it skipped.
fn wait_h1_rows(remote: &str, fabric_mac: &str, agent: &Agent) {
    let deadline = Instant::now() + CONVERGENCE_TIMEOUT;
    loop {
        match h1_rows(remote, fabric_mac) {
            Ok(()) => return,
            Err(e) if Instant::now() >= deadline => {
                let log = agent.log();
                let skipped: Vec<&str> = log.lines().filter(|l| l.contains("skipped")).collect();
                panic!(
                    "H1 rows: {e}
the agent's skip reports:
{}
log tail:
{}",
                    skipped.join("\n"),
                    agent.log_tail()
                );
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn bindings(remote: &str) -> String {
    local_nbctl(
        remote,
        &[
            "--columns=logical_port,ip,mac,override_dynamic_mac",
            "list",
            "Static_MAC_Binding",
        ],
    )
}

/// The `Static_MAC_Binding` of `ip` as one line: `<ip> <mac> <override>`, if there is one on
/// the agent's port.
fn binding(remote: &str, ip: &str) -> Option<String> {
    let out = bindings(remote);
    out.split("\n\n").find_map(|row| {
        let field = |name: &str| {
            row.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().trim_matches('"').to_owned())
                .unwrap_or_default()
        };
        (field("ip") == ip && field("logical_port") == "bgp-router-openstack").then(|| {
            format!(
                "{} {} {}",
                field("ip"),
                field("mac"),
                field("override_dynamic_mac")
            )
        })
    })
}

#[test]
fn the_ovn_method_wires_the_local_cluster_and_keeps_its_rows() {
    require_root();
    let lab = Lab::start();
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=False",
    ]);
    let local = OvsdbServer::standalone(NB_SCHEMA, "local-nb");
    let remote = local.unix_remote();
    // Someone else's rows in the local cluster, there before the agent.
    local_nbctl(
        &remote,
        &[
            "lr-add",
            "foreign-router",
            "--",
            "lrp-add",
            "foreign-router",
            "foreign-lrp",
            "00:00:00:00:0f:01",
            "10.99.0.1/24",
            "--",
            "static-mac-binding-add",
            "foreign-lrp",
            "10.99.0.5",
            "00:00:00:00:0f:05",
        ],
    );
    let foreign_before = local_nbctl(&remote, &["show", "foreign-router"]);
    wire_fabric(&lab);
    let mac = fabric_mac(&lab);
    let mut agent = Agent::start(lab.dir(), &overrides(&remote));

    let vm = lab.env("VM_PROVIDER_IP4").to_owned();
    let vm_mac = lab.env("VM_PROVIDER_MAC").to_owned();
    let gw = lab.env("GW_IP4").to_owned();
    let fip = lab.env("FIP_IP4").to_owned();
    let host = |ip: &str| format!("{ip}/32");
    let started = Instant::now();
    wait_tor(&lab, "the provider VM, gateway and FIP at the ToR", |p| {
        [&vm, &gw, &fip].iter().all(|ip| has(p, &host(ip)))
    });
    let converged = started.elapsed();
    let on_nic = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    for ip in [&vm, &gw, &fip] {
        assert!(on_nic.contains(&host(ip)), "{ip} on bgp-nic:\n{on_nic}");
    }

    // H1: the local cluster's rows, and a binding per exposed IP with its MAC.
    wait_for(
        "the binding of the provider VM",
        CONVERGENCE_TIMEOUT,
        || binding(&remote, &vm).ok_or_else(|| bindings(&remote)),
    );
    wait_h1_rows(&remote, &mac, &agent);
    assert_eq!(binding(&remote, &vm), Some(format!("{vm} {vm_mac} true")));
    for ip in [&gw, &fip] {
        assert!(
            binding(&remote, ip).is_some(),
            "{ip}: {}",
            bindings(&remote)
        );
    }

    // The flows: OpenStack's egress to the local router's MAC, the fabric's ingress to the
    // local cluster's patch port, and the static FDB entry of br-fab's MAC.
    let patch = lab
        .vsctl(&["list-ports", "br-ex"])
        .lines()
        .find(|p| p.starts_with("patch-provnet-"))
        .expect("the provider network's patch port on br-ex")
        .to_owned();
    let egress = wait_output(
        "egress flows on br-ex",
        CONVERGENCE_TIMEOUT,
        || lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=999/-1"]),
        |out| out.matches("mod_dl_dst:40:44:00:00:00:06").count() == 2,
    );
    let in_port = format!("in_port={}", ofport(&lab, &patch));
    assert!(
        egress
            .lines()
            .filter(|l| l.contains("priority=1000") && l.contains(&in_port))
            .count()
            == 2,
        "ip and ipv6 from {patch}:\n{egress}"
    );
    assert!(
        !egress.contains("priority=900"),
        "no underlay MAC-tweak flows:\n{egress}"
    );
    let ingress = wait_output(
        "ingress flow on br-fab",
        CONVERGENCE_TIMEOUT,
        || lab.ovs_ofctl(&["dump-flows", FABRIC_BRIDGE, "cookie=999/-1"]),
        |out| out.contains(&format!("nw_dst={PROVIDER_PREFIX}")),
    );
    assert!(
        ingress.contains(&format!("in_port={}", ofport(&lab, FABRIC_NIC)))
            && ingress.contains(&format!(
                "actions=mod_dl_dst:{mac},output:{}",
                ofport(&lab, PATCH)
            ))
            && ingress.contains("priority=1000"),
        "{ingress}"
    );
    let fdb = wait_output(
        "the static FDB entry on br-fab",
        CONVERGENCE_TIMEOUT,
        || {
            String::from_utf8_lossy(
                &Command::new("ovs-appctl")
                    .arg("-t")
                    .arg(lab.dir().join("ovs/ovs-vswitchd.ctl"))
                    .args(["fdb/show", FABRIC_BRIDGE])
                    .output()
                    .expect("ovs-appctl fdb/show")
                    .stdout,
            )
            .into_owned()
        },
        |out| out.contains(&mac),
    );
    assert!(fdb.contains("static"), "{fdb}");

    // The steady state writes nothing to the local NB (values in the server's canonical form,
    // no row collected and re-inserted), though the FRR repair re-applies every 2 s.
    let nb_writes = |log: &str| reconciled_lines(log, "\"local_nb\"");
    let writes_before = nb_writes(&agent.log());
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        nb_writes(&agent.log()),
        writes_before,
        "no local NB writes in the steady state:\n{}",
        agent.log_tail()
    );

    // Tenant exposures (the lab's tenant VM) are reported once, not failing each sync.
    let log = agent.log();
    assert!(
        log.contains("tenant networks are not supported by exposing_method = ovn"),
        "{}",
        agent.log_tail()
    );
    let tenant = format!("{}/32", lab.env("VM_TENANT_IP4"));
    assert!(
        !has(&lab.tor_prefixes(), &tenant),
        "the tenant VM is not announced"
    );

    // Rows deleted by hand come back without a restart, long before the periodic reconcile;
    // a route someone adds to the agent's router stays.
    local_nbctl(
        &remote,
        &["lr-route-add", "bgp-router", "10.98.0.0/16", "100.64.7.3"],
    );
    let t = Instant::now();
    local_nbctl(
        &remote,
        &[
            "lr-policy-del",
            "bgp-router",
            "10",
            "inport==\"bgp-router-openstack\"",
        ],
    );
    local_nbctl(
        &remote,
        &["static-mac-binding-del", "bgp-router-openstack", &vm],
    );
    local_nbctl(&remote, &["lsp-del", "openstack-bgp-router"]);
    wait_for("the deleted rows restored", REPAIR_TIMEOUT, || {
        let policies = local_nbctl(&remote, &["lr-policy-list", "bgp-router"]);
        let lsps = local_nbctl(&remote, &["lsp-list", "local"]);
        match binding(&remote, &vm) {
            Some(_) if policies.contains(PEER) && lsps.contains("openstack-bgp-router") => Ok(()),
            other => Err(format!("{other:?}\n{policies}\n{lsps}")),
        }
    });
    let repaired = t.elapsed();
    wait_h1_rows(&remote, &mac, &agent);
    // An edited column of the agent's row is put back too.
    local_nbctl(
        &remote,
        &[
            "set",
            "Logical_Router_Port",
            "bgp-router-openstack",
            "mac=\"40:44:00:00:00:99\"",
        ],
    );
    wait_output(
        "the edited MAC restored",
        REPAIR_TIMEOUT,
        || {
            local_nbctl(
                &remote,
                &["get", "Logical_Router_Port", "bgp-router-openstack", "mac"],
            )
        },
        |out| out.trim() == "\"40:44:00:00:00:06\"",
    );

    // Withdrawal: the VM moves away; its binding and its address go, the rest stays. The
    // agent's own transactions (the binding deleted, then added back) come back to it as
    // changes of the local NB: they wake no reconcile of their own (`backend change`), only
    // edits of its rows by others do.
    let backend_wakes = |log: &str| reconciled_lines(log, "reason=\"backend change\"");
    std::thread::sleep(Duration::from_secs(1)); // the repairs' wakes are over
    let wakes_before = backend_wakes(&agent.log());
    let vm_port = lab.env("VM_PROVIDER_PORT_ID").to_owned();
    let here = lab.env("CHASSIS_HOSTNAME").to_owned();
    lab.nbctl(&[
        "lsp-set-options",
        &vm_port,
        "requested-chassis=another-host",
        "--",
        "set",
        "Logical_Switch_Port",
        &vm_port,
        "external_ids:\"neutron:host_id\"=another-host",
    ]);
    wait_tor(&lab, "the provider VM withdrawn", |p| {
        !has(p, &host(&vm)) && has(p, &host(&gw)) && has(p, &host(&fip))
    });
    wait_for(
        "its binding removed",
        CONVERGENCE_TIMEOUT,
        || match binding(&remote, &vm) {
            None => Ok(()),
            Some(b) => Err(b),
        },
    );
    assert!(binding(&remote, &gw).is_some(), "{}", bindings(&remote));
    assert!(
        !lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"])
            .contains(&host(&vm))
    );
    // And back.
    lab.nbctl(&[
        "lsp-set-options",
        &vm_port,
        &format!("requested-chassis={here}"),
        "--",
        "set",
        "Logical_Switch_Port",
        &vm_port,
        &format!("external_ids:\"neutron:host_id\"={here}"),
    ]);
    wait_tor(&lab, "the provider VM back", |p| has(p, &host(&vm)));
    wait_for("its binding back", CONVERGENCE_TIMEOUT, || {
        binding(&remote, &vm).ok_or_else(|| bindings(&remote))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        backend_wakes(&agent.log()),
        wakes_before,
        "the echo of the agent's own local NB transactions woke a reconcile:\n{}",
        agent.log_tail()
    );

    // Nobody else's rows were touched: the foreign router, its port and binding, and the
    // route added to the agent's router.
    assert_eq!(
        local_nbctl(&remote, &["show", "foreign-router"]),
        foreign_before
    );
    assert!(bindings(&remote).contains("10.99.0.5"));
    let routes = local_nbctl(&remote, &["lr-route-list", "bgp-router"]);
    assert!(routes.contains("10.98.0.0/16"), "{routes}");
    agent.assert_running();
    eprintln!(
        "nb_ovn_e2e: ToR converged {converged:?} after start; hand deletions repaired in \
         {repaired:?} (periodic reconcile: {RECONCILE_INTERVAL:?})"
    );
}

#[test]
fn the_ovn_method_follows_a_leader_change_of_the_local_cluster() {
    require_root();
    let lab = Lab::start();
    let mut cluster = Cluster::new(
        NB_SCHEMA,
        "OVN_Northbound",
        &[(16780, 16781), (16782, 16783), (16784, 16785)],
    );
    let leader = cluster.wait_ready("OVN_Northbound");
    let remote = cluster.remotes();
    wire_fabric(&lab);
    let mac = fabric_mac(&lab);
    let mut agent = Agent::start(lab.dir(), &overrides(&remote));
    let vm = lab.env("VM_PROVIDER_IP4").to_owned();
    wait_for(
        "the binding of the provider VM",
        CONVERGENCE_TIMEOUT,
        || binding(&remote, &vm).ok_or_else(|| bindings(&remote)),
    );
    wait_h1_rows(&remote, &mac, &agent);

    // The leader dies: the agent's client moves to the new leader, and a row deleted there
    // is restored by the agent without a restart.
    cluster.members[leader].kill();
    let new_leader = wait_for("a new leader", Duration::from_secs(30), || {
        cluster
            .leader("OVN_Northbound")
            .ok_or_else(|| "none yet".to_owned())
    });
    assert_ne!(new_leader, leader);
    let t = Instant::now();
    local_nbctl(
        &remote,
        &["static-mac-binding-del", "bgp-router-openstack", &vm],
    );
    local_nbctl(
        &remote,
        &[
            "lr-policy-del",
            "bgp-router",
            "10",
            "inport==\"bgp-router-openstack\"",
        ],
    );
    wait_for(
        "the rows restored on the new leader",
        Duration::from_secs(30),
        || {
            let policies = local_nbctl(&remote, &["lr-policy-list", "bgp-router"]);
            match binding(&remote, &vm) {
                Some(_) if policies.contains(PEER) => Ok(()),
                other => Err(format!("{other:?}\n{policies}")),
            }
        },
    );
    let repaired = t.elapsed();
    wait_h1_rows(&remote, &mac, &agent);
    agent.assert_running();
    let log = agent.log();
    assert!(
        log.contains("local OVN NB connected"),
        "{}",
        agent.log_tail()
    );
    eprintln!("nb_ovn_e2e: after the leader change, rows repaired in {repaired:?}");
}

/// `ovn-sbctl --db=<the local SB> ARGS…`.
fn local_sbctl(lab: &Lab, args: &[&str]) -> String {
    let out = Command::new("ovn-sbctl")
        .arg(format!("--db=unix:{}", lab.env("LOCAL_SB_SOCK")))
        .arg("--timeout=10")
        .args(args)
        .output()
        .expect("run ovn-sbctl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The whole local cluster as `scripts/lab/local-ovn.sh` (the demo's, `demo.sh --driver
/// nb-ovn`) brings it up: its NB, SB and northd, br-fab with the NIC and its address, and a
/// second `ovn-controller` on the lab's OVS. OVN 23.03's `ovn-controller -n <chassis>` reads
/// the chassis-suffixed keys (`ovn-remote-<chassis>`, `ovn-bridge-<chassis>`,
/// `ovn-bridge-mappings-<chassis>`, …) of the same Open_vSwitch row (ovn-controller(8),
/// "highly experimental"); the patch ports are its to create.
#[test]
fn a_second_ovn_controller_on_the_same_ovs_runs_the_local_cluster() {
    require_root();
    let mut lab = Lab::start();
    lab.start_local_ovn(&[]);
    // The script's names are the ones this test's agent configuration and checks use.
    for (key, expected) in [
        ("FABRIC_BRIDGE", FABRIC_BRIDGE),
        ("FABRIC_NIC", FABRIC_NIC),
        ("FABRIC_CIDR4", FABRIC_ADDRESS),
        ("FABRIC_PEER_IP4", PEER),
        ("LOCAL_OVN_CHASSIS", "bgp"),
    ] {
        assert_eq!(lab.env(key), expected, "lab.env {key} from local-ovn.sh");
    }
    let remote = format!("unix:{}", lab.env("LOCAL_NB_SOCK"));
    let controller_log =
        || std::fs::read_to_string(lab.dir().join("local-ovn/controller.log")).unwrap_or_default();
    let mut agent = Agent::start(lab.dir(), &overrides(&remote));
    let vm = lab.env("VM_PROVIDER_IP4").to_owned();
    wait_tor(&lab, "the provider VM at the ToR", |p| {
        has(p, &format!("{vm}/32"))
    });
    wait_h1_rows(&remote, &fabric_mac(&lab), &agent);

    // The controller registered chassis `bgp`, claimed the router's gateway ports (the
    // agent's Gateway_Chassis rows name it) and made the localnet patch ports.
    wait_output(
        "chassis bgp in the local SB",
        CONVERGENCE_TIMEOUT,
        || local_sbctl(&lab, &["--bare", "--columns=name", "list", "Chassis"]),
        |out| out.lines().any(|l| l.trim() == "bgp"),
    );
    let bgp_chassis = local_sbctl(
        &lab,
        &["--bare", "--columns=_uuid", "find", "Chassis", "name=bgp"],
    );
    for port in ["cr-bgp-router-openstack", "cr-bgp-router-dcfabric"] {
        wait_output(
            &format!("{port} bound to chassis bgp"),
            CONVERGENCE_TIMEOUT,
            || {
                local_sbctl(
                    &lab,
                    &[
                        "--bare",
                        "--columns=chassis",
                        "find",
                        "Port_Binding",
                        &format!("logical_port={port}"),
                    ],
                )
            },
            |out| !bgp_chassis.trim().is_empty() && out.trim() == bgp_chassis.trim(),
        );
    }
    let fabric_patch = wait_output(
        "the controller's patch port on br-fab",
        CONVERGENCE_TIMEOUT,
        || lab.vsctl(&["list-ports", FABRIC_BRIDGE]),
        |out| out.lines().any(|p| p.starts_with("patch-dcfabric-")),
    )
    .lines()
    .find(|p| p.starts_with("patch-dcfabric-"))
    .expect("patch port")
    .to_owned();
    // The agent finds it (bridge facts are re-read every few seconds) and sends the
    // fabric's traffic for the provider prefix into it.
    wait_output(
        "the ingress flow into the controller's patch port",
        CONVERGENCE_TIMEOUT,
        || lab.ovs_ofctl(&["dump-flows", FABRIC_BRIDGE, "cookie=999/-1"]),
        |out| out.contains(&format!("output:{}", ofport(&lab, &fabric_patch))),
    );
    // Both controllers keep their own patch ports on br-ex: OpenStack's and the local
    // cluster's `local` network.
    std::thread::sleep(Duration::from_secs(3));
    let ex_ports = lab.vsctl(&["list-ports", "br-ex"]);
    assert!(
        ex_ports.lines().any(|p| p.starts_with("patch-provnet-"))
            && ex_ports
                .lines()
                .any(|p| p.starts_with("patch-local-localnet-")),
        "{ex_ports}\n{}",
        controller_log()
    );
    wait_tor(&lab, "the provider VM still at the ToR", |p| {
        has(p, &format!("{vm}/32"))
    });
    agent.assert_running();
    eprintln!(
        "nb_ovn_e2e: second ovn-controller: patch ports {fabric_patch} and {}",
        ex_ports
            .lines()
            .filter(|p| p.starts_with("patch-"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
