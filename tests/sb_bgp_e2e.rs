//! The SB BGP driver with the underlay backend, end to end: a real lab (OVN NB/SB + northd, OVS +
//! ovn-controller, FRR chassis + ToR peer in network namespaces) and the real agent binary.
//! Each exposure is checked at the ToR (what BGP learned) and in the chassis kernel (addresses,
//! rules, routes, neighbours) and OVS (flows), as upstream-behaviour.md §9 describes.
#![cfg(all(feature = "sb_bgp", feature = "underlay"))]

mod agent_fixture;
mod lab_fixture;

use std::time::Duration;

use agent_fixture::Agent;
use lab_fixture::{
    CONVERGENCE_TIMEOUT, Lab, OVN_25_03, gateway_hands_over_and_back, has, require_root, wait_for,
    wait_tor,
};

/// Test intervals: short, so drift repair is observable quickly.
const OVERRIDES: &str = "[DEFAULT]\nreconcile_interval = 20\nfrr_reconcile_interval = 2\n[ovs]\nflow_check_interval = 2\n";

#[test]
fn exposes_the_topology_follows_bindings_and_survives_its_own_restart_with_100_ips() {
    exposes_the_topology_follows_bindings_and_survives_its_own_restart(&[]);
}

/// The same on OVN 25.03 (OVN central, northd, ovn-controller and OVS from Debian 13's packages):
/// the driver reads SB schema 20.41 and OVS 3.5's database as it reads 23.03's.
#[test]
fn on_ovn_25_03_exposes_the_topology_follows_bindings_and_survives_its_own_restart() {
    exposes_the_topology_follows_bindings_and_survives_its_own_restart(OVN_25_03);
}

/// The lab's topology (up.sh with `up_env`) exposed at the ToR, in the kernel and in OVS;
/// unbinding, hostile rows, an LB VIP, 100 FIPs, and an agent restart that sends no UPDATE.
fn exposes_the_topology_follows_bindings_and_survives_its_own_restart(up_env: &[(&str, &str)]) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);

    let vm4 = format!("{}/32", lab.env("VM_PROVIDER_IP4"));
    let vm6 = format!("{}/128", lab.env("VM_PROVIDER_IP6"));
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let gw6 = format!("{}/128", lab.env("GW_IP6"));
    let fip = format!("{}/32", lab.env("FIP_IP4"));
    let tenant = format!("{}/32", lab.env("VM_TENANT_IP4"));
    let all = [&vm4, &vm6, &gw4, &gw6, &fip, &tenant];

    // Everything of the topology reaches the ToR (B1, C1, C2, C6).
    wait_tor(&lab, "all exposed routes at the ToR", |p| {
        all.iter().all(|x| has(p, x))
    });
    agent.assert_running();

    // Kernel state on the chassis.
    let table = lab.br_ex_table();
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    for a in all {
        assert!(addrs.contains(a.as_str()), "{a} not on bgp-nic:\n{addrs}");
    }
    let rules = lab.ip_chassis(&["rule", "show"]) + &lab.ip_chassis(&["-6", "rule", "show"]);
    for ip in [
        lab.env("VM_PROVIDER_IP4"),
        lab.env("GW_IP4"),
        lab.env("FIP_IP4"),
        lab.env("VM_PROVIDER_IP6"),
    ] {
        assert!(
            rules.contains(&format!("to {ip} lookup {table}")),
            "no rule to {ip} lookup {table}:\n{rules}"
        );
    }
    // Tenant subnet: rule keyed by the router interface address with its mask (C2).
    assert!(
        rules.contains(&format!("to 10.0.0.1/24 lookup {table}")),
        "{rules}"
    );
    let routes = lab.ip_chassis(&["route", "show", "table", &table]);
    assert!(routes.contains("default dev br-ex"), "{routes}");
    assert!(
        routes.contains(&format!("{} dev br-ex", lab.env("VM_PROVIDER_IP4"))),
        "{routes}"
    );
    assert!(
        routes.contains(&format!("10.0.0.0/24 via {} dev br-ex", lab.env("GW_IP4"))),
        "{routes}"
    );
    // The gateway's MAC as permanent neighbour, no neighbour for the VM (C1 vs B1).
    let neigh = lab.ip_chassis(&["neigh", "show", "dev", "br-ex"]);
    assert!(
        neigh.contains(&format!(
            "{} lladdr fa:16:3e:00:00:01 PERMANENT",
            lab.env("GW_IP4")
        )),
        "{neigh}"
    );
    assert!(!neigh.contains(lab.env("VM_PROVIDER_IP4")), "{neigh}");
    let proxy = lab.ip_chassis(&["-6", "neigh", "show", "proxy"]);
    assert!(proxy.contains("2001:db8:: dev br-ex"), "{proxy}");
    // A9: the MAC-tweak flow pair on the provider bridge.
    let flows = lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=0x3e7/-1"]);
    assert_eq!(
        flows.lines().filter(|l| l.contains("cookie=0x3e7")).count(),
        2,
        "{flows}"
    );
    assert!(flows.contains("priority=900,ip,in_port="), "{flows}");
    assert!(flows.contains("priority=900,ipv6,in_port="), "{flows}");

    // Unbind the provider VM (as Nova does on delete: its interface loses iface-id): withdrawn
    // at the ToR and removed from bgp-nic (B3); the others stay.
    let tap = format!("tap{}", &lab.env("VM_PROVIDER_PORT_ID")[..11]);
    lab.vsctl(&["remove", "Interface", &tap, "external_ids", "iface-id"]);
    wait_tor(&lab, "provider VM withdrawn", |p| {
        !has(p, &vm4) && !has(p, &vm6) && has(p, &gw4) && has(p, &fip)
    });
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    assert!(!addrs.contains(vm4.as_str()), "{addrs}");
    let rules = lab.ip_chassis(&["rule", "show"]);
    assert!(
        !rules.contains(&format!("to {} lookup", lab.env("VM_PROVIDER_IP4"))),
        "{rules}"
    );

    // Bind it again.
    lab.vsctl(&[
        "set",
        "Interface",
        &tap,
        &format!("external_ids:iface-id={}", lab.env("VM_PROVIDER_PORT_ID")),
    ]);
    wait_tor(&lab, "provider VM exposed again", |p| {
        has(p, &vm4) && has(p, &vm6)
    });

    // A hostile row: the port's addresses become garbage. It is skipped with a warning naming
    // the row, its IP is withdrawn, and everything else stays exposed.
    let lsp = lab.env("VM_PROVIDER_PORT_ID").to_owned();
    lab.nbctl(&[
        "set",
        "Logical_Switch_Port",
        &lsp,
        "addresses=\"not-a-mac 172.24.4.20\"",
    ]);
    wait_tor(&lab, "hostile row withdrawn, others kept", |p| {
        !has(p, &vm4) && has(p, &gw4) && has(p, &fip) && has(p, &tenant)
    });
    wait_for(
        "the skipped row in the agent log",
        CONVERGENCE_TIMEOUT,
        || {
            let log = agent.log();
            let line = log
                .lines()
                .find(|l| l.contains("row skipped") && l.contains(&lsp) && l.contains("not-a-mac"));
            line.map(|_| ()).ok_or_else(|| agent.log_tail())
        },
    );
    lab.nbctl(&[
        "set",
        "Logical_Switch_Port",
        &lsp,
        "addresses=\"fa:16:3e:00:00:20 172.24.4.20 2001:db8::20\"",
    ]);
    wait_tor(&lab, "repaired row exposed again", |p| {
        all.iter().all(|x| has(p, x))
    });

    // An Octavia (OVN provider) load-balancer VIP on the tenant network: a port without
    // addresses or binding, named `ovn-lb-vip-<lb>`, its IP in neutron:cidrs. The gateway
    // chassis announces it (tenant exposure).
    let private_ls = format!("neutron-{}", lab.env("NET_PRIVATE_ID"));
    lab.nbctl(&[
        "lsp-add",
        &private_ls,
        "lb-vip-port",
        "--",
        "set",
        "Logical_Switch_Port",
        "lb-vip-port",
        "external_ids:\"neutron:cidrs\"=\"10.0.0.50/24\"",
        "external_ids:\"neutron:port_name\"=\"ovn-lb-vip-lb1\"",
    ]);
    wait_tor(&lab, "the LB VIP at the ToR", |p| has(p, "10.0.0.50/32"));
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    assert!(addrs.contains("10.0.0.50/32"), "{addrs}");
    lab.nbctl(&["lsp-del", "lb-vip-port"]);
    wait_tor(&lab, "the LB VIP withdrawn", |p| {
        !has(p, "10.0.0.50/32") && has(p, &gw4)
    });

    // 100 more centralized FIPs on the router (NAT rules; northd lists them in the gateway
    // patch port's nat_addresses), so the restart below covers 100+ exposed IPs.
    let router = format!("neutron-{}", lab.env("ROUTER_ID"));
    let mut args: Vec<String> = Vec::new();
    for i in 1..=100 {
        if i > 1 {
            args.push("--".into());
        }
        args.extend([
            "lr-nat-add".into(),
            router.clone(),
            "dnat_and_snat".into(),
            format!("172.24.5.{i}"),
            format!("10.0.0.{}", 100 + i),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    lab.nbctl(&args);
    let many = wait_tor(&lab, "100 more FIPs at the ToR", |p| {
        (1..=100).all(|i| has(p, &format!("172.24.5.{i}/32")))
    });
    assert!(many.len() >= 106, "{} prefixes", many.len());

    // Restart the agent: the ToR must see no UPDATE at all (nothing withdrawn and re-added).
    std::thread::sleep(Duration::from_secs(2)); // let BGP settle after the last change
    let before = lab.updates_received_from_chassis();
    let stop_took = agent.stop();
    assert!(
        stop_took < Duration::from_secs(2),
        "SIGTERM took {stop_took:?}"
    );
    let starts_before = agent.log().matches("reason=\"start\"").count();
    agent.restart();
    wait_for(
        "the restarted agent's first reconcile",
        CONVERGENCE_TIMEOUT,
        || {
            let starts = agent.log().matches("reason=\"start\"").count();
            if starts > starts_before {
                Ok(())
            } else {
                Err(agent.log_tail())
            }
        },
    );
    std::thread::sleep(Duration::from_secs(4)); // two repair ticks and FRR's advertisement timer
    agent.assert_running();
    assert_eq!(
        lab.updates_received_from_chassis(),
        before,
        "the ToR received UPDATEs across an agent restart:\n{}",
        agent.log_tail()
    );
    let p = lab.tor_prefixes();
    assert!(all.iter().all(|x| has(&p, x)), "{p:?}");
    assert_eq!(
        p.len(),
        many.len(),
        "the same prefixes before and after the restart"
    );
}

/// SIGTERM while an apply hangs (here: `vtysh -f` never returns) stops the agent within 5 s,
/// leaving what was already applied in place: a service manager's stop never waits for a stuck
/// tool, and a restart still withdraws nothing.
#[test]
fn sigterm_during_a_hung_apply_stops_within_five_seconds_and_leaves_everything_exposed() {
    require_root();
    let lab = Lab::start();
    let config = std::fs::read_to_string(lab.dir().join("bgp-agent.conf")).unwrap();
    let real_vtysh = config
        .lines()
        .find_map(|l| l.strip_prefix("vtysh_path = "))
        .expect("the lab configures vtysh_path")
        .trim()
        .to_owned();
    let marker = lab.dir().join("vtysh-apply-started");
    let wrapper = lab.dir().join("vtysh-hangs-on-apply");
    // Queries pass through; the configuration apply (`vtysh -f FILE`) hangs.
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = -f ]; then touch '{}'; exec sleep 300; fi\ndone\nexec '{real_vtysh}' \"$@\"\n",
            marker.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", &wrapper.display().to_string()])
        .status()
        .unwrap();
    let overrides = format!(
        "{OVERRIDES}[frr]\nvtysh_path = {}\nvtysh_timeout = 300\n",
        wrapper.display()
    );
    let mut agent = Agent::start(lab.dir(), &overrides);
    wait_for(
        "the agent inside its FRR apply",
        CONVERGENCE_TIMEOUT,
        || {
            if marker.exists() {
                Ok(())
            } else {
                Err(agent.log_tail())
            }
        },
    );
    // The kernel part of that apply came first: the gateway address is on bgp-nic.
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let before = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    assert!(before.contains(&gw4), "{before}");
    agent.assert_running();
    let took = agent.stop();
    assert!(
        took < Duration::from_secs(5),
        "SIGTERM during a hung apply took {took:?}"
    );
    let after = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    assert!(after.contains(&gw4), "withdrawn on stop:\n{after}");
    let _ = std::process::Command::new("pkill")
        .args(["-f", "exec sleep 300|sleep 300"])
        .status();
}

#[test]
fn moving_the_gateway_to_a_second_chassis_withdraws_it_and_moving_it_back_re_exposes_it() {
    gateway_failover(&[("LAB_CHASSIS2", "1")]);
}

#[test]
fn on_ovn_25_03_moving_the_gateway_away_and_back_withdraws_and_re_exposes_it() {
    gateway_failover(&[("LAB_CHASSIS2", "1"), OVN_25_03[0]]);
}

/// The agent runs on chassis 1, where the router's gateway port is scheduled (priority 1); the
/// lab's two chassis have a geneve tunnel, so BFD runs between them. The gateway is handed over
/// to chassis 2 for real (its ovn-controller claims `cr-lrp-<gw port>` in SB; on OVN 25.03 the
/// NB LRP's `status:hosting-chassis` says chassis 2) twice, by a higher priority and by chassis
/// 1's ovn-controller leaving SB, and comes back each time: the gateway IPs and the centralized
/// FIP go from the ToR and chassis 1's bgp-nic and come back (`gateway_hands_over_and_back`).
fn gateway_failover(up_env: &[(&str, &str)]) {
    require_root();
    let lab = Lab::start_with_env(up_env);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);
    gateway_hands_over_and_back(&lab, &[], &mut || agent.assert_running());
}
