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
    CONVERGENCE_TIMEOUT, Lab, OVN_25_03, OctaviaLb, gateway_hands_over_and_back, has, require_root,
    wait_for, wait_tor,
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
    restart_without_updates(&lab, &mut agent, &all.map(String::clone));
}

/// Restarts the agent once the ToR has settled and checks that the ToR received no UPDATE across
/// the restart and still has `expected`: the new agent finds everything it must expose (through
/// the monitor conditions it sets at start) already there and withdraws nothing.
fn restart_without_updates(lab: &Lab, agent: &mut Agent, expected: &[String]) {
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
    assert!(expected.iter().all(|x| has(&p, x)), "{p:?}");
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
/// FIP go from the ToR and chassis 1's bgp-nic and come back (`gateway_hands_over_and_back`), the router's load balancers
/// and port forwarding with it.
fn gateway_failover(up_env: &[(&str, &str)], gateway_source: &str) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=False",
    ]);
    // A load balancer and a port forwarding of the router: their rows come and go with the
    // router's monitor conditions, so they must follow the gateway like its own IPs.
    lab.add_octavia_lb(&tenant_lb(&lab));
    add_port_forwarding(&lab);
    let behind_gateway = [TENANT_VIP, VIP_FIP, PF_FIP].map(host);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);
    gateway_hands_over_and_back(&lab, &behind_gateway, &mut || agent.assert_running());
    assert!(
        agent.log().contains(gateway_source),
        "the agent reads the gateways from {gateway_source}:\n{}",
        agent.log_tail()
    );
}

/// Two tests running `body(up_env)`: one on the host's OVN (23.03), one on the 25.03 chroot.
macro_rules! on_both_ovn_tiers {
    ($body:ident: $on_host_ovn:ident, $on_ovn_25_03:ident) => {
        #[test]
        fn $on_host_ovn() {
            $body(&[]);
        }

        #[test]
        fn $on_ovn_25_03() {
            $body(OVN_25_03);
        }
    };
}

on_both_ovn_tiers!(load_balancers_end_to_end:
    load_balancers_and_port_forwardings_are_exposed_and_withdrawn_with_their_lb_and_router,
    on_ovn_25_03_load_balancers_and_port_forwardings_are_exposed_and_withdrawn);

/// The Octavia OVN-provider LBs and the port-forwarding LB of the lab's router (its gateway is
/// hosted on this chassis), in distributed FIP mode: the VIP's floating IP has a NAT row without
/// `external_mac` (the VIP port is never bound), so the LB's `neutron:vip_fip` is the only thing
/// that exposes it (upstream's reason for reading that key).
/// - tenant VIP (host mode): announced on bgp-nic, nothing wired (it is behind the router);
/// - VIP FIP, provider VIP, port-forwarding FIP: announced and wired to br-ex (rule + route in
///   the bridge table), without a neighbour (OVN answers ARP for them);
/// - deleting each LB withdraws exactly its IPs; deleting the router withdraws the rest.
fn load_balancers_end_to_end(up_env: &[(&str, &str)]) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=True",
    ]);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let tenant_vm = format!("{}/32", lab.env("VM_TENANT_IP4"));
    wait_tor(&lab, "gateway and tenant VM at the ToR", |p| {
        has(p, &gw4) && has(p, &tenant_vm)
    });
    let table = lab.br_ex_table();

    let tenant_lb = tenant_lb(&lab);
    let provider_lb = OctaviaLb {
        id: "e1a2b3c4-0000-4000-8000-00000000b002",
        vip_port_id: "e1a2b3c4-0000-4000-8000-00000000e002",
        network_id: lab.env("NET_PUBLIC_ID"),
        vip_cidr: "172.24.4.131/24",
        vip_fip: None,
        member: format!("{}:8080", lab.env("VM_PROVIDER_IP4")),
    };
    let provider_vip = "172.24.4.131";

    lab.add_octavia_lb(&tenant_lb);
    lab.add_octavia_lb(&provider_lb);
    let pf_lb = add_port_forwarding(&lab);
    let every_vip = [TENANT_VIP, VIP_FIP, provider_vip, PF_FIP].map(host);
    wait_tor(&lab, "every VIP and VIP FIP at the ToR", |p| {
        every_vip.iter().all(|x| has(p, x))
    });
    wait_kernel("the LBs' kernel state", || {
        announced_only(&lab, &table, TENANT_VIP)?;
        for ip in [VIP_FIP, provider_vip, PF_FIP] {
            wired(&lab, &table, ip)?;
        }
        Ok(())
    });
    // The load balancers' rows are monitored under conditions on the local routers: a
    // restarted agent has them from its first reconcile and withdraws nothing.
    restart_without_updates(&lab, &mut agent, &every_vip);

    // The port-forwarding LB goes (its floating IP deleted): only its FIP is withdrawn.
    lab.nbctl(&["lb-del", &pf_lb]);
    wait_tor(&lab, "port-forwarding FIP withdrawn, the rest kept", |p| {
        !has(p, &host(PF_FIP))
            && [TENANT_VIP, VIP_FIP, provider_vip]
                .iter()
                .all(|x| has(p, &host(x)))
    });
    wait_kernel("port-forwarding FIP unwired", || {
        absent(&lab, &table, PF_FIP)
    });

    // The provider-VIP LB goes.
    lab.delete_octavia_lb(&provider_lb);
    wait_tor(&lab, "provider VIP withdrawn", |p| {
        !has(p, &host(provider_vip)) && has(p, &host(VIP_FIP)) && has(p, &host(TENANT_VIP))
    });
    wait_kernel("provider VIP unwired", || {
        absent(&lab, &table, provider_vip)
    });
    lab.delete_vip_port(&provider_lb);

    // The tenant LB goes: its VIP and VIP FIP are withdrawn although Neutron's NAT row for the
    // FIP is still there (it has no external_mac: it cannot be exposed in distributed mode).
    lab.delete_octavia_lb(&tenant_lb);
    wait_tor(&lab, "tenant VIP and VIP FIP withdrawn", |p| {
        !has(p, &host(TENANT_VIP)) && !has(p, &host(VIP_FIP)) && has(p, &gw4)
    });
    wait_kernel("tenant VIP and VIP FIP gone from the kernel", || {
        absent(&lab, &table, TENANT_VIP)?;
        absent(&lab, &table, VIP_FIP)
    });
    lab.delete_vip_port(&tenant_lb);

    // Both again, then the router goes: every exposure that hangs off it is withdrawn, the
    // provider VM (not behind the router) stays.
    lab.add_octavia_lb(&tenant_lb);
    let pf_lb = add_port_forwarding(&lab);
    let router_vips = [TENANT_VIP, VIP_FIP, PF_FIP].map(host);
    wait_tor(&lab, "tenant LB and port forwarding back", |p| {
        router_vips.iter().all(|x| has(p, x))
    });
    lab.delete_router();
    let vm4 = format!("{}/32", lab.env("VM_PROVIDER_IP4"));
    wait_tor(&lab, "everything of the router withdrawn", |p| {
        router_vips.iter().all(|x| !has(p, x))
            && !has(p, &gw4)
            && !has(p, &tenant_vm)
            && has(p, &vm4)
    });
    wait_kernel("the router's exposures gone from the kernel", || {
        for ip in [TENANT_VIP, VIP_FIP, PF_FIP, lab.env("GW_IP4")] {
            absent(&lab, &table, ip)?;
        }
        Ok(())
    });
    // What Octavia and Neutron leave behind once the router is gone refers to nothing local.
    lab.nbctl(&["lb-del", &pf_lb]);
    lab.delete_octavia_lb(&tenant_lb);
    agent.assert_running();
}

on_both_ovn_tiers!(subnet_mode_end_to_end:
    subnet_mode_announces_the_tenant_subnet_as_a_prefix_once_snat_is_off,
    on_ovn_25_03_subnet_mode_announces_the_tenant_subnet_as_a_prefix_once_snat_is_off);

/// `advertisement_method_tenant_networks = subnet` with
/// `require_snat_disabled_for_tenant_networks = True`: the lab's router SNATs its tenant subnet,
/// so nothing of it is exposed; removing the SNAT (Neutron's `enable_snat=False`) exposes the
/// subnet as one prefix (rule and route in the bridge table, route `dev bgp-nic` in the VRF
/// table that FRR redistributes as a kernel route; no per-VM /32); removing the router interface
/// withdraws it.
fn subnet_mode_end_to_end(up_env: &[(&str, &str)]) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    let overrides = OVERRIDES.replacen(
        "[DEFAULT]\n",
        "[DEFAULT]\nadvertisement_method_tenant_networks = subnet\n\
         require_snat_disabled_for_tenant_networks = True\n",
        1,
    );
    let mut agent = Agent::start(lab.dir(), &overrides);
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let gw_ip = lab.env("GW_IP4").to_owned();
    let tenant_vm = format!("{}/32", lab.env("VM_TENANT_IP4"));
    let subnet = "10.0.0.0/24";

    wait_tor(&lab, "the gateway at the ToR", |p| has(p, &gw4));
    let table = lab.br_ex_table();
    // Redistribution of kernel routes is what announces the subnet (upstream A2).
    wait_for("redistribute kernel in FRR", CONVERGENCE_TIMEOUT, || {
        let config = lab.vtysh_chassis("show running-config");
        if config.contains("redistribute kernel") {
            Ok(())
        } else {
            Err(config)
        }
    });
    // The gateway and the subnet come from one computation: had the subnet been exposed, it
    // would have been realised with the gateway, so a short wait is enough to see it is not.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let p = lab.tor_prefixes();
    assert!(
        !has(&p, subnet) && !has(&p, &tenant_vm),
        "the SNATed subnet reached the ToR: {p:?}"
    );
    assert!(
        !subnet_in_kernel(&lab, &table, subnet, &gw_ip),
        "the SNATed subnet is in the kernel"
    );

    lab.nbctl(&["lr-nat-del", &lab.router_name(), "snat", subnet]);
    let p = wait_tor(&lab, "the subnet at the ToR once SNAT is off", |p| {
        has(p, subnet)
    });
    assert!(
        !has(&p, &tenant_vm),
        "subnet mode announced the VM's /32: {p:?}"
    );
    wait_kernel("the subnet's rule and routes", || {
        if subnet_in_kernel(&lab, &table, subnet, &gw_ip) {
            Ok(())
        } else {
            Err(kernel_state(&lab, &table))
        }
    });
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    assert!(
        !addrs.contains(&tenant_vm),
        "subnet mode put the VM's IP on bgp-nic:\n{addrs}"
    );

    // An Octavia LB on the tenant subnet: its VIP is inside the announced prefix, so it gets no
    // /32 of its own; its floating IP is announced.
    let tenant_lb = tenant_lb(&lab);
    lab.add_octavia_lb(&tenant_lb);
    let p = wait_tor(&lab, "the tenant LB's VIP FIP at the ToR", |p| {
        has(p, &host(VIP_FIP))
    });
    assert!(
        !has(&p, &host(TENANT_VIP)) && !on_bgp_nic(&lab, TENANT_VIP),
        "subnet mode announced the tenant VIP's /32: {p:?}\n{}",
        kernel_state(&lab, &table)
    );

    // Neutron removes the router interface: the LSP and the LRP go.
    lab.nbctl(&[
        "--",
        "lsp-del",
        lab.env("RI_PORT_ID"),
        "--",
        "lrp-del",
        &format!("lrp-{}", lab.env("RI_PORT_ID")),
    ]);
    wait_tor(&lab, "the subnet withdrawn, the gateway kept", |p| {
        !has(p, subnet) && has(p, &gw4)
    });
    wait_kernel("the subnet's rule and routes gone", || {
        let state = kernel_state(&lab, &table);
        if state.contains("10.0.0.0/24") {
            Err(state)
        } else {
            Ok(())
        }
    });
    agent.assert_running();
}

/// The tenant VIP of the Octavia LB [`tenant_lb`], and its floating IP.
const TENANT_VIP: &str = "10.0.0.30";
const VIP_FIP: &str = "172.24.4.130";

/// An Octavia LB with its VIP on the lab's tenant network, a floating IP on it, and the tenant VM
/// as its member.
fn tenant_lb(lab: &Lab) -> OctaviaLb<'_> {
    OctaviaLb {
        id: "e1a2b3c4-0000-4000-8000-00000000b001",
        vip_port_id: "e1a2b3c4-0000-4000-8000-00000000e001",
        network_id: lab.env("NET_PRIVATE_ID"),
        vip_cidr: "10.0.0.30/24",
        vip_fip: Some(VIP_FIP),
        member: format!("{}:8080", lab.env("VM_TENANT_IP4")),
    }
}

/// The floating IP of [`add_port_forwarding`].
const PF_FIP: &str = "172.24.4.140";

/// A TCP port forwarding of floating IP `PF_FIP` (port 2222) to the tenant VM's port 22, on the
/// lab's router; returns the name of its LB.
fn add_port_forwarding(lab: &Lab) -> String {
    lab.add_port_forwarding_lb(
        "f1a2b3c4-0000-4000-8000-0000000000f2",
        &[(
            &format!("{PF_FIP}:2222"),
            &format!("{}:22", lab.env("VM_TENANT_IP4")),
        )],
    )
}

fn host(ip: &str) -> String {
    format!("{ip}/32")
}

/// Waits until `probe` holds for the chassis' kernel state (the ToR may learn an address before
/// the same reconcile has written the rules and routes).
fn wait_kernel(what: &str, probe: impl FnMut() -> Result<(), String>) {
    wait_for(what, CONVERGENCE_TIMEOUT, probe);
}

/// bgp-nic addresses, rules and the bridge table and VRF table (10) routes, for messages.
fn kernel_state(lab: &Lab, table: &str) -> String {
    format!(
        "bgp-nic:\n{}rules:\n{}table {table}:\n{}table 10:\n{}neighbours:\n{}",
        lab.ip_chassis(&["-4", "addr", "show", "dev", "bgp-nic"]),
        lab.ip_chassis(&["-4", "rule", "show"]),
        lab.ip_chassis(&["-4", "route", "show", "table", table]),
        lab.ip_chassis(&["-4", "route", "show", "table", "10"]),
        lab.ip_chassis(&["-4", "neigh", "show", "nud", "permanent"]),
    )
}

fn on_bgp_nic(lab: &Lab, ip: &str) -> bool {
    lab.ip_chassis(&["-4", "addr", "show", "dev", "bgp-nic"])
        .contains(&format!("inet {ip}/32 "))
}

fn has_rule(lab: &Lab, table: &str, to: &str) -> bool {
    lab.ip_chassis(&["-4", "rule", "show"])
        .lines()
        .any(|l| l.contains(&format!("to {to} lookup {table}")))
}

fn has_route(lab: &Lab, table: &str, route: &str) -> bool {
    lab.ip_chassis(&["-4", "route", "show", "table", table])
        .lines()
        .any(|l| l.starts_with(route))
}

fn has_permanent_neighbour(lab: &Lab, ip: &str) -> bool {
    lab.ip_chassis(&["-4", "neigh", "show", "nud", "permanent"])
        .lines()
        .any(|l| l.starts_with(&format!("{ip} ")))
}

/// An IP announced and wired to the provider bridge: address on bgp-nic, `ip rule to <ip>
/// lookup <br-ex table>`, `<ip> dev br-ex` in that table; no neighbour (OVN answers for it).
fn wired(lab: &Lab, table: &str, ip: &str) -> Result<(), String> {
    let ok = on_bgp_nic(lab, ip)
        && has_rule(lab, table, ip)
        && has_route(lab, table, &format!("{ip} dev br-ex "))
        && !has_permanent_neighbour(lab, ip);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{ip} not wired as expected:\n{}",
            kernel_state(lab, table)
        ))
    }
}

/// An IP only announced (a tenant IP behind the router): on bgp-nic, no rule or route of its own.
fn announced_only(lab: &Lab, table: &str, ip: &str) -> Result<(), String> {
    let ok = on_bgp_nic(lab, ip)
        && !has_rule(lab, table, ip)
        && !has_route(lab, table, &format!("{ip} "));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{ip} not announced as expected:\n{}",
            kernel_state(lab, table)
        ))
    }
}

/// Nothing of `ip` left: no address, rule, route or neighbour.
fn absent(lab: &Lab, table: &str, ip: &str) -> Result<(), String> {
    let gone = !on_bgp_nic(lab, ip)
        && !has_rule(lab, table, ip)
        && !has_route(lab, table, &format!("{ip} "))
        && !has_permanent_neighbour(lab, ip);
    if gone {
        Ok(())
    } else {
        Err(format!("{ip} still there:\n{}", kernel_state(lab, table)))
    }
}

/// Subnet mode's kernel state for `subnet` (upstream D5): `ip rule to <net> lookup <br-ex
/// table>`, `<net> via <gateway> dev br-ex` in that table and `<net> via <gateway> dev bgp-nic`
/// in the VRF table.
fn subnet_in_kernel(lab: &Lab, table: &str, subnet: &str, gateway: &str) -> bool {
    has_rule(lab, table, subnet)
        && has_route(lab, table, &format!("{subnet} via {gateway} dev br-ex "))
        && has_route(lab, "10", &format!("{subnet} via {gateway} dev bgp-nic "))
}
