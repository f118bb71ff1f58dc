//! The stretched L2 driver (`ovn_stretched_l2_bgp_driver`) with the underlay backend, end to
//! end in the fast-tier lab: the real OVN, OVS and FRR, the agent binary. Checked at the ToR
//! (what BGP learned), in the chassis' BGP table (the gateway as the routes' nexthop) and in
//! the kernel (table `bgp_vrf_table_id`), for the lab's gateway (bound to this chassis) and for
//! a second router whose gateway is bound to another chassis (a Chassis row of its own, as the
//! driver only reads the Southbound), as router ports and gateways come and go; and the VRF
//! table's stray routes: a foreign `proto static` one removed, BGP's own and another table's
//! untouched (G1).
//!
//! In the lab's stand-in kernel (no VRF module) the routes of table 10 reach FRR through the
//! operator configuration's `ip import-table 10` (scripts/lab/README.md), IPv4 only, and FRR
//! 8.4's import takes only the on-link routes (the gateway networks): a route via a gateway
//! address that no interface of the chassis holds is not imported (also with `onlink`). So here
//! the ToR learns the gateway networks, and the subnet routes are checked in the kernel and in
//! zebra's view of table 10 (selected kernel routes via the gateway: what `redistribute kernel`
//! announces from a real VRF, where they are the VRF's own kernel routes).
//! Run under the daemon lock: `flock /tmp/ovn-bgp-daemons.lock cargo test --test stretched_l2_e2e`.
#![cfg(all(feature = "stretched_l2", feature = "underlay"))]

mod agent_fixture;
mod lab_fixture;

use std::process::Command;

use agent_fixture::Agent;
use lab_fixture::{CONVERGENCE_TIMEOUT, Lab, has, require_root, run_ok, wait_for, wait_tor};

const OVERRIDES: &str = "[DEFAULT]\ndriver = ovn_stretched_l2_bgp_driver\n\
     reconcile_interval = 20\nfrr_reconcile_interval = 2\n";

/// The fake second chassis and the second router, named as Neutron names them.
const OTHER_CHASSIS: &str = "lab-chassis-stretched-2";
const R2: &str = "neutron-stretched-r2";
const R2_GW: &str = "lrp-stretched-gw2";
/// On a second external network, so that its gateway network is a prefix of its own at the ToR.
const R2_GW_IP: &str = "172.24.5.30";
const R2_LINK: &str = "172.24.5.0/24";
const R2_EXT: &str = "neutron-stretched-ext2";
const R2_RI: &str = "lrp-stretched-ri2";
const R2_NET: &str = "neutron-stretched-net2";

fn sbctl(lab: &Lab, args: &[&str]) -> String {
    run_ok(
        Command::new("ovn-sbctl")
            .arg(format!("--db=unix:{}", lab.env("SB_SOCK")))
            .args(args),
    )
}

/// Table 10 of the chassis, IPv4 (empty while the table does not exist). This iproute2 prints no
/// protocol for `proto boot`, the agent's: a route shown without one is the agent's.
fn vrf_table(lab: &Lab) -> String {
    let out = Command::new("ip")
        .args(["-n", lab.ns_chassis(), "route", "show", "table", "10"])
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_vrf_table(lab: &Lab, what: &str, done: impl Fn(&str) -> bool) -> String {
    wait_for(what, CONVERGENCE_TIMEOUT, || {
        let t = vrf_table(lab);
        if done(&t) { Ok(t) } else { Err(t) }
    })
}

/// The nexthop of `prefix` in zebra's view of table 10 when it is a selected kernel route there.
fn zebra_table10_nexthop(lab: &Lab, prefix: &str) -> Option<String> {
    let reply: serde_json::Value =
        serde_json::from_str(&lab.vtysh_chassis("show ip route table 10 json")).ok()?;
    let route = reply[prefix]
        .as_array()?
        .iter()
        .find(|r| r["protocol"] == "kernel" && r["selected"] == true)?;
    route["nexthops"][0]["ip"].as_str().map(str::to_owned)
}

fn wait_zebra_nexthop(lab: &Lab, prefix: &str, via: &str) {
    wait_for(
        &format!("{prefix} via {via} in zebra's table 10"),
        CONVERGENCE_TIMEOUT,
        || match zebra_table10_nexthop(lab, prefix) {
            Some(nh) if nh == via => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
}

/// The nexthop of `prefix` in a `show ip bgp json` reply (best path).
fn bgp_nexthop(reply: &serde_json::Value, prefix: &str) -> Option<String> {
    let paths = reply["routes"][prefix].as_array()?;
    let best = paths
        .iter()
        .find(|p| p["bestpath"].as_bool() == Some(true))
        .or(paths.first())?;
    best["nexthops"][0]["ip"].as_str().map(str::to_owned)
}

#[test]
fn every_gateways_subnets_are_routed_via_it_and_follow_router_ports_and_gateways() {
    require_root();
    let lab = Lab::start();
    let gw_ip = lab.env("GW_IP4").to_owned();
    let lab_subnet = "10.0.0.0/24";
    let link = "172.24.4.0/24";
    let mut agent = Agent::start(lab.dir(), OVERRIDES);

    // G1 for the lab's gateway (bound to this chassis): the subnet via the gateway and the
    // gateway network on-link, in table 10 through bgp-nic; nothing on bgp-nic.
    let t = wait_vrf_table(&lab, "the lab router's routes in table 10", |t| {
        t.contains(&format!("{lab_subnet} via {gw_ip} dev bgp-nic \n"))
            && t.contains(&format!("{link} dev bgp-nic scope link \n"))
    });
    let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
    assert!(
        !addrs.contains("inet "),
        "no address on bgp-nic:\n{addrs}\n{t}"
    );
    wait_zebra_nexthop(&lab, lab_subnet, &gw_ip);
    let p = wait_tor(&lab, "the lab gateway network at the ToR", |p| has(p, link));
    assert!(
        !p.iter().any(|x| x.ends_with("/32")),
        "routes, not addresses: {p:?}"
    );
    let tor = lab.tor_json("show ip bgp json");
    assert_eq!(
        bgp_nexthop(&tor, link).as_deref(),
        Some(lab.env("CHASSIS_IP4")),
        "{tor}"
    );
    // FRR redistributes kernel routes only in the agent's VRF instance.
    let running = wait_for("the leak configuration", CONVERGENCE_TIMEOUT, || {
        let running = lab.vtysh_chassis("show running-config");
        if running.contains("router bgp 64999 vrf bgp-vrf") {
            Ok(running)
        } else {
            Err(running)
        }
    });
    let vrf_stanza: String = running
        .split("router bgp 64999 vrf bgp-vrf")
        .nth(1)
        .map(|s| s.split("\nexit\n").next().unwrap_or(s).to_owned())
        .unwrap_or_default();
    assert!(vrf_stanza.contains("redistribute kernel"), "{running}");
    assert!(!vrf_stanza.contains("redistribute connected"), "{running}");

    // Stray routes: a foreign proto static route in table 10 goes; BGP's own in table 10 and a
    // static one in another table stay.
    for args in [
        &[
            "192.0.2.0/24",
            "dev",
            "bgp-nic",
            "table",
            "10",
            "proto",
            "static",
        ][..],
        &[
            "198.51.100.0/24",
            "dev",
            "bgp-nic",
            "table",
            "10",
            "proto",
            "bgp",
        ],
        &[
            "203.0.113.0/24",
            "dev",
            "bgp-nic",
            "table",
            "11",
            "proto",
            "static",
        ],
    ] {
        let mut v = vec!["route", "add"];
        v.extend_from_slice(args);
        lab.ip_chassis(&v);
    }

    // A second router whose gateway (on a second external network) is bound to another
    // chassis, with one subnet.
    sbctl(
        &lab,
        &["chassis-add", OTHER_CHASSIS, "geneve", "192.0.2.250"],
    );
    let gw_peer = &R2_GW["lrp-".len()..];
    let ri_peer = &R2_RI["lrp-".len()..];
    lab.nbctl(&[
        "ls-add",
        R2_EXT,
        "--",
        "lr-add",
        R2,
        "--",
        "lrp-add",
        R2,
        R2_GW,
        "fa:16:3e:00:02:01",
        &format!("{R2_GW_IP}/24"),
        "--",
        "lrp-set-gateway-chassis",
        R2_GW,
        OTHER_CHASSIS,
        "1",
        "--",
        "lsp-add",
        R2_EXT,
        gw_peer,
        "--",
        "lsp-set-type",
        gw_peer,
        "router",
        "--",
        "lsp-set-addresses",
        gw_peer,
        "router",
        "--",
        "lsp-set-options",
        gw_peer,
        &format!("router-port={R2_GW}"),
        "--",
        "ls-add",
        R2_NET,
        "--",
        "lrp-add",
        R2,
        R2_RI,
        "fa:16:3e:00:02:02",
        "10.2.0.1/24",
        "--",
        "lsp-add",
        R2_NET,
        ri_peer,
        "--",
        "lsp-set-type",
        ri_peer,
        "router",
        "--",
        "lsp-set-addresses",
        ri_peer,
        "router",
        "--",
        "lsp-set-options",
        ri_peer,
        &format!("router-port={R2_RI}"),
    ]);
    let cr = format!("cr-{R2_GW}");
    let find_uuid = |table: &str, condition: &str| {
        wait_for(
            &format!("{table} {condition} in SB"),
            CONVERGENCE_TIMEOUT,
            || {
                let u = sbctl(
                    &lab,
                    &["--bare", "--columns=_uuid", "find", table, condition],
                );
                let u = u.trim().to_owned();
                if u.len() == 36 { Ok(u) } else { Err(u) }
            },
        )
    };
    let chassis_uuid = find_uuid("Chassis", &format!("name={OTHER_CHASSIS}"));
    let cr_uuid = find_uuid("Port_Binding", &format!("logical_port={cr}"));
    // No ovn-controller runs for that chassis: bind the port to it as its controller would.
    sbctl(
        &lab,
        &[
            "set",
            "Port_Binding",
            &cr_uuid,
            &format!("chassis={chassis_uuid}"),
        ],
    );
    assert_eq!(lab.sb_bound_chassis(&cr).as_deref(), Some(OTHER_CHASSIS));
    let t = wait_vrf_table(
        &lab,
        "the second router's routes and the stray route gone",
        |t| {
            t.contains(&format!("10.2.0.0/24 via {R2_GW_IP} dev bgp-nic \n"))
                && t.contains(&format!("{R2_LINK} dev bgp-nic scope link \n"))
                && !t.contains("192.0.2.0/24")
        },
    );
    assert!(t.contains("198.51.100.0/24 dev bgp-nic proto bgp"), "{t}");
    let t11 = lab.ip_chassis(&["route", "show", "table", "11"]);
    assert!(
        t11.contains("203.0.113.0/24 dev bgp-nic proto static"),
        "{t11}"
    );
    wait_zebra_nexthop(&lab, "10.2.0.0/24", R2_GW_IP);
    wait_tor(&lab, "the remote gateway's network at the ToR", |p| {
        has(p, R2_LINK) && has(p, link) && !has(p, "192.0.2.0/24")
    });
    // The gateway unbound (no chassis at all) is still announced, as upstream's sync does: the
    // next steps find its routes.
    sbctl(&lab, &["clear", "Port_Binding", &cr_uuid, "chassis"]);

    // The router port's networks change: the old subnet withdrawn, the new one announced.
    lab.nbctl(&[
        "set",
        "Logical_Router_Port",
        R2_RI,
        "networks=\"10.3.0.1/24\"",
    ]);
    let t = wait_vrf_table(&lab, "the router port's new network", |t| {
        t.contains(&format!("10.3.0.0/24 via {R2_GW_IP} dev bgp-nic \n"))
            && !t.contains("10.2.0.0/24")
    });
    assert!(t.contains(R2_LINK), "{t}");
    wait_zebra_nexthop(&lab, "10.3.0.0/24", R2_GW_IP);

    // The router port goes: its subnet is withdrawn, and with it the link route of its gateway's
    // network (no route via it remains), also at the ToR; the lab router's routes stay.
    lab.nbctl(&["lrp-del", R2_RI]);
    let t = wait_vrf_table(&lab, "the deleted router port's routes gone", |t| {
        !t.contains("10.3.0.0/24") && !t.contains(R2_LINK)
    });
    assert!(t.contains(lab_subnet) && t.contains(link), "{t}");
    wait_tor(&lab, "the remote gateway's network withdrawn", |p| {
        !has(p, R2_LINK) && has(p, link)
    });

    // The lab's gateway goes: its subnet is withdrawn, and so is its network.
    lab.nbctl(&["lrp-del", &format!("lrp-{}", lab.env("GW_PORT_ID"))]);
    wait_tor(&lab, "the lab gateway's network withdrawn", |p| {
        !has(p, link)
    });
    let t = wait_vrf_table(&lab, "table 10 emptied of the agent's routes", |t| {
        !t.contains(lab_subnet) && !t.contains(link)
    });
    assert!(t.contains("198.51.100.0/24 dev bgp-nic proto bgp"), "{t}");
    agent.assert_running();
    let log = agent.log();
    assert!(log.contains("reconciled"), "{log}");
    assert!(
        !log.contains(" ERROR ") && !log.contains("errors=1"),
        "errors in the agent log:\n{}\n(its tail:)\n{}",
        agent.log_lines_with(&[" ERROR ", "errors=1"]),
        agent.log_tail()
    );
}
