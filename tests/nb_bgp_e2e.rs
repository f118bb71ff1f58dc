//! The NB BGP driver with the underlay backend, end to end: the real lab (OVN NB/SB + northd,
//! OVS + ovn-controller, FRR chassis + ToR peer in network namespaces) with Neutron's keys, and
//! the real agent binary with `driver = nb_ovn_bgp_driver`. On OVN 23.03 (no
//! `Logical_Router_Port.status`) the gateway is found through the Southbound's chassisredirect
//! binding of this chassis; on OVN 25.03 (the chroot tier) through `status:hosting-chassis`.
#![cfg(all(feature = "nb_bgp", feature = "underlay"))]

mod agent_fixture;
mod lab_fixture;

use std::time::Duration;

use agent_fixture::Agent;
use lab_fixture::{
    CONVERGENCE_TIMEOUT, Lab, gateway_hands_over_and_back, has, require_root, wait_for, wait_tor,
};

/// The NB driver on the lab's configuration; short intervals so repairs are observable.
const OVERRIDES: &str = "[DEFAULT]\ndriver = nb_ovn_bgp_driver\nexposing_method = underlay\nreconcile_interval = 20\nfrr_reconcile_interval = 2\n[ovs]\nflow_check_interval = 2\n";

#[test]
fn nb_driver_exposes_the_topology_follows_changes_and_survives_its_own_restart() {
    nb_end_to_end(&[], "Southbound");
}

#[test]
fn on_ovn_25_03_the_nb_driver_reads_the_gateway_from_lrp_status() {
    nb_end_to_end(&[("LAB_OVN", "25.03")], "Logical_Router_Port.status");
}

fn nb_end_to_end(up_env: &[(&str, &str)], gateway_source: &str) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    // The lab's floating IP is centralized (its NAT row has no external_mac), which Neutron
    // says in NB_Global.
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=False",
    ]);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);

    let vm4 = format!("{}/32", lab.env("VM_PROVIDER_IP4"));
    let vm6 = format!("{}/128", lab.env("VM_PROVIDER_IP6"));
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let gw6 = format!("{}/128", lab.env("GW_IP6"));
    let fip = format!("{}/32", lab.env("FIP_IP4"));
    let tenant = format!("{}/32", lab.env("VM_TENANT_IP4"));
    let all = [&vm4, &vm6, &gw4, &gw6, &fip, &tenant];

    // Every exposure kind of the topology reaches the ToR.
    wait_tor(&lab, "all exposed routes at the ToR", |p| {
        all.iter().all(|x| has(p, x))
    });
    agent.assert_running();
    let log = agent.log();
    assert!(
        log.contains("gateways hosted here") && log.contains(gateway_source),
        "the agent says where it reads the gateways from ({gateway_source}):\n{}",
        agent.log_tail()
    );

    // Kernel state: addresses on bgp-nic, and (unlike the SB driver) a permanent neighbour with
    // the provider VM's MAC on the provider bridge.
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    for a in all {
        assert!(addrs.contains(a.as_str()), "{a} not on bgp-nic:\n{addrs}");
    }
    let neigh = lab.ip_chassis(&["neigh", "show", "dev", "br-ex", "nud", "permanent"]);
    assert!(
        neigh.contains(&format!(
            "{} lladdr {}",
            lab.env("VM_PROVIDER_IP4"),
            lab.env("VM_PROVIDER_MAC")
        )),
        "no permanent neighbour for the provider VM:\n{neigh}"
    );
    let table = lab.br_ex_table();
    let rules = lab.ip_chassis(&["rule", "show"]);
    assert!(
        rules.contains(&format!("to 10.0.0.1/24 lookup {table}")),
        "tenant subnet rule (host mode):\n{rules}"
    );

    // Live migration, written as Neutron writes it. Away (requested-chassis and neutron:host_id
    // name another host): withdrawn. Migrating back here (requested-chassis lists both hosts,
    // neutron:host_id still names the other one, activation-strategy=rarp): this host is listed,
    // so it is exposed here, as upstream does; only the activation-strategy clause of the port
    // condition brings such a row to this chassis.
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
    wait_tor(&lab, "provider VM withdrawn after moving away", |p| {
        !has(p, &vm4) && has(p, &gw4) && has(p, &fip)
    });
    lab.nbctl(&[
        "lsp-set-options",
        &vm_port,
        &format!("requested-chassis=another-host,{here}"),
        "activation-strategy=rarp",
    ]);
    wait_tor(&lab, "provider VM back while migrating here", |p| {
        has(p, &vm4)
    });
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

    // The FIP mode switched at run time: distributed, the lab's NAT (no external_mac) cannot be
    // exposed and is reported; centralized again, it comes back. Nothing else moves.
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=True",
    ]);
    wait_tor(&lab, "FIP withdrawn in distributed mode", |p| {
        !has(p, &fip) && has(p, &gw4) && has(p, &vm4) && has(p, &tenant)
    });
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=False",
    ]);
    wait_tor(&lab, "FIP back in centralized mode", |p| has(p, &fip));

    // A restart of the agent withdraws nothing: zero UPDATEs at the ToR.
    std::thread::sleep(Duration::from_secs(3));
    let before = lab.updates_received_from_chassis();
    let starts_before = agent.log().matches("reason=\"start\"").count();
    agent.restart();
    wait_for(
        "the restarted agent's first reconcile",
        CONVERGENCE_TIMEOUT,
        || {
            if agent.log().matches("reason=\"start\"").count() > starts_before {
                Ok(())
            } else {
                Err(agent.log_tail())
            }
        },
    );
    std::thread::sleep(Duration::from_secs(4));
    agent.assert_running();
    assert_eq!(
        lab.updates_received_from_chassis(),
        before,
        "the ToR received UPDATEs across an agent restart:\n{}",
        agent.log_tail()
    );
    let p = lab.tor_prefixes();
    assert!(all.iter().all(|x| has(&p, x)), "{p:?}");
}

#[test]
fn moving_the_gateway_to_a_second_chassis_withdraws_it_and_moving_it_back_re_exposes_it() {
    gateway_failover(&[("LAB_CHASSIS2", "1")], "Southbound");
}

#[test]
fn on_ovn_25_03_moving_the_gateway_away_and_back_follows_lrp_status() {
    gateway_failover(
        &[("LAB_CHASSIS2", "1"), ("LAB_OVN", "25.03")],
        "Logical_Router_Port.status",
    );
}

/// The agent runs on chassis 1, where the router's gateway port is scheduled (priority 1); the
/// lab's two chassis have a geneve tunnel, so BFD runs between them. The gateway is handed over
/// to chassis 2 for real (its ovn-controller claims `cr-lrp-<gw port>` in SB; on OVN 25.03 the
/// NB LRP's `status:hosting-chassis` says chassis 2) twice, by a higher priority and by chassis
/// 1's ovn-controller leaving SB, and comes back each time: the gateway IPs and the centralized
/// FIP go from the ToR and chassis 1's bgp-nic and come back (`gateway_hands_over_and_back`).
fn gateway_failover(up_env: &[(&str, &str)], gateway_source: &str) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=False",
    ]);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);
    gateway_hands_over_and_back(&lab, &mut || agent.assert_running());
    assert!(
        agent.log().contains(gateway_source),
        "the agent reads the gateways from {gateway_source}:\n{}",
        agent.log_tail()
    );
}
