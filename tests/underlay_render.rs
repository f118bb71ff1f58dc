//! The underlay backend's rendering of recorded exposures (the SB driver's replay cases after
//! their initial database), compared with a snapshot
//! (`tests/fixtures/underlay/<case>.json`; regenerate with `UPDATE_SNAPSHOTS=1`), plus the
//! acceptance rows of upstream-behaviour.md §9 it covers, asserted explicitly.
#![cfg(feature = "underlay")]

use std::path::Path;

use ovn_bgp_agent::backends::underlay::render::{
    Facts, NicKind, UnderlaySettings, VrfKind, render,
};
use ovn_bgp_agent::exposure::ExposureSet;
use ovn_bgp_agent::system::{DesiredSystem, LinkKind, RouteSpec, RuleSelector};
use ovn_bgp_agent::types::InterfaceName;

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

fn settings() -> UnderlaySettings {
    UnderlaySettings {
        bgp_nic: name("bgp-nic"),
        bgp_vrf: name("bgp-vrf"),
        vrf_table: 10,
        vrf_kind: VrfKind::Vrf,
        nic_kind: NicKind::Dummy,
        rule_priority: 32000,
    }
}

fn facts() -> Facts {
    let mut f = Facts::default();
    f.tables.insert(name("br-ex"), 200);
    f.bridge_macs
        .insert(name("br-ex"), "aa:aa:aa:aa:aa:01".parse().unwrap());
    f
}

/// The SB driver's exposures after the initial database of a replay case
/// (`tests/fixtures/replay/sb_bgp/<case>/00-expected.json`).
fn replayed_exposures(case: &str) -> ExposureSet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/sb_bgp")
        .join(case)
        .join("00-expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let step: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(step["exposures"].clone()).unwrap()
}

fn render_case(case: &str) -> DesiredSystem {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let exposures = replayed_exposures(case);
    let rendered = render(&settings(), &facts(), &exposures);
    assert!(rendered.skipped.is_empty(), "{:?}", rendered.skipped);
    let system = rendered.system;
    let rendered = serde_json::to_string_pretty(&system).unwrap() + "\n";
    let snapshot = root.join("underlay").join(format!("{case}.json"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
        std::fs::write(&snapshot, &rendered).unwrap();
    }
    let expected = std::fs::read_to_string(&snapshot).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (UPDATE_SNAPSHOTS=1 creates it)",
            snapshot.display()
        )
    });
    assert_eq!(
        rendered, expected,
        "{case}: rendering differs from the snapshot"
    );
    system
}

fn has_route(system: &DesiredSystem, dst: &str, via: Option<&str>, dev: &str) -> bool {
    system.routes.iter().any(|r: &RouteSpec| {
        r.table == 200
            && r.dst.to_string() == dst
            && r.via.map(|v| v.to_string()).as_deref() == via
            && r.dev.as_ref().map(|d| d.as_str()) == Some(dev)
    })
}

fn has_rule(system: &DesiredSystem, to: &str) -> bool {
    system
        .rules
        .iter()
        .any(|r| r.table == 200 && r.selector == RuleSelector::To(to.parse().unwrap()))
}

fn has_address(system: &DesiredSystem, dev: &str, addr: &str) -> bool {
    system
        .addresses
        .iter()
        .any(|a| a.dev.as_str() == dev && a.addr.to_string() == addr)
}

#[test]
fn gateway_tenant_and_fips() {
    let s = render_case("gateway_tenant_fips");
    // A1: VRF with its table and the NIC enslaved to it.
    assert!(
        s.links
            .iter()
            .any(|l| l.name.as_str() == "bgp-vrf" && l.kind == LinkKind::Vrf { table: 10 })
    );
    assert!(s.links.iter().any(|l| l.name.as_str() == "bgp-nic"
        && l.master.as_ref().map(|m| m.as_str()) == Some("bgp-vrf")));
    // A5/A6: default routes, ARP/NDP helper addresses and proxy sysctls on br-ex.
    assert!(has_route(&s, "0.0.0.0/0", None, "br-ex") && has_route(&s, "::/0", None, "br-ex"));
    assert!(has_address(&s, "br-ex", "169.254.1.1/32"));
    assert!(has_address(&s, "br-ex", "fd53:d91e:400:7f17::1:1/128"));
    assert_eq!(
        s.sysctls
            .get("net.ipv4.conf.br-ex.proxy_arp")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        s.sysctls
            .get("net.ipv6.conf.br-ex.proxy_ndp")
            .map(String::as_str),
        Some("1")
    );
    // A9: the MAC-tweak flow pair on the localnet patch port.
    let flows: Vec<_> = s
        .flows
        .iter()
        .map(|f| (f.in_port.as_str(), f.matches.as_str(), f.actions.as_str()))
        .collect();
    assert_eq!(
        flows,
        [
            (
                "patch-provnet-1-to-br-int",
                "ip",
                "mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL"
            ),
            (
                "patch-provnet-1-to-br-int",
                "ipv6",
                "mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL"
            ),
        ]
    );
    // B1: address on bgp-nic, rule and scope-link route in the bridge table, no neighbour.
    assert!(
        has_address(&s, "bgp-nic", "172.24.100.10/32")
            && has_address(&s, "bgp-nic", "2001:db8::10/128")
    );
    assert!(has_rule(&s, "172.24.100.10/32") && has_rule(&s, "2001:db8::10/128"));
    assert!(has_route(&s, "172.24.100.10/32", None, "br-ex"));
    assert!(
        !s.neighbours
            .iter()
            .any(|n| n.ip.to_string() == "172.24.100.10")
    );
    // C1: the gateway's permanent neighbours and the NDP proxy of its IPv6 network.
    let neigh: Vec<_> = s
        .neighbours
        .iter()
        .map(|n| (n.ip.to_string(), n.lladdr.to_string()))
        .collect();
    assert_eq!(
        neigh,
        [
            ("172.24.100.5".to_owned(), "fa:16:3e:aa:bb:cc".to_owned()),
            ("2001:db8::5".to_owned(), "fa:16:3e:aa:bb:cc".to_owned()),
        ]
    );
    assert!(
        s.proxy_neighbours
            .iter()
            .any(|p| p.ip.to_string() == "2001:db8::" && p.dev.as_str() == "br-ex")
    );
    // C2: the tenant subnet's rule keyed by the router address with mask, route via the gateway;
    // tenant VM IPs only on bgp-nic.
    assert!(has_rule(&s, "10.0.0.1/24"));
    assert!(has_route(&s, "10.0.0.0/24", Some("172.24.100.5"), "br-ex"));
    assert!(has_address(&s, "bgp-nic", "10.0.0.10/32"));
    assert!(!has_rule(&s, "10.0.0.10/32"));
    // Ownership: bgp-nic host addresses, the bridge table, cookie 999.
    assert!(s.ownership.tables.contains(&200));
    assert!(s.ownership.flow_cookies.contains(&999));
}

#[test]
fn vlan_provider_routes_through_the_vlan_device() {
    let s = render_case("vlan_no_tenant");
    // A7: one VLAN device per localnet tag, with its helper addresses and sysctls.
    for (dev, key, vid) in [
        ("br-ex.100", "br-ex/100", 100),
        ("br-ex.200", "br-ex/200", 200),
    ] {
        assert!(s.links.iter().any(|l| l.name.as_str() == dev
            && l.kind
                == LinkKind::Vlan {
                    parent: name("br-ex"),
                    id: vid
                }));
        assert_eq!(
            s.sysctls
                .get(&format!("net.ipv4.conf.{key}.proxy_arp"))
                .map(String::as_str),
            Some("1")
        );
    }
    assert!(
        s.ownership.vlan_parents.contains(&name("br-ex")),
        "VLAN devices `br-ex.<vid>` owned through their parent"
    );
    assert!(
        s.ownership
            .link_names
            .iter()
            .all(|n| !n.as_str().ends_with('.')),
        "no name prefix: {:?}",
        s.ownership.link_names
    );
    assert!(has_address(&s, "br-ex.100", "169.254.1.100/32"));
    assert!(has_address(&s, "br-ex.100", "fd53:d91e:400:7f17::1:64/128"));
    // B2: routes use the VLAN device; C1 on VLAN: the neighbour too (U22 fixed by construction).
    assert!(has_route(&s, "172.24.100.10/32", None, "br-ex.100"));
    assert!(
        s.neighbours
            .iter()
            .any(|n| n.ip.to_string() == "172.24.100.5" && n.dev.as_str() == "br-ex.100")
    );
}

#[test]
fn a_bridge_without_table_is_reported_and_the_rest_still_renders() {
    let exposures = replayed_exposures("gateway_tenant_fips");
    let rendered = render(&settings(), &Facts::default(), &exposures);
    let problems = rendered.skipped;
    assert!(
        problems
            .iter()
            .any(|p| p.reason.contains("no routing table for bridge br-ex")),
        "{problems:?}"
    );
    let system = rendered.system;
    // Announcements do not depend on the bridge: every IP is still on bgp-nic.
    assert_eq!(
        system
            .addresses
            .iter()
            .filter(|a| a.dev.as_str() == "bgp-nic")
            .count(),
        exposures.global().ips.len()
    );
    assert!(system.rules.is_empty());
}

/// What the underlay cannot realise is reported, never dropped silently: an EVPN scope, a
/// nexthop on an address, routes when the driver did not ask for kernel redistribution. With
/// the need stated, routes go to the VRF table through bgp-nic and that table becomes the
/// agent's (so a withdrawn route is deleted).
#[test]
fn scopes_nexthops_and_routes_are_realised_or_reported() {
    use ovn_bgp_agent::caps::frr::values::Vni;
    use ovn_bgp_agent::exposure::{
        ExposedIp, ExposedRoute, ExposureKind, RealisationNeed, RouteKind, ScopeId,
    };
    let mut exposures = ExposureSet::default();
    let vni = Vni::new(100).unwrap();
    exposures
        .scope_mut(ScopeId::Evpn(vni))
        .expose_ip(ExposedIp::announced(
            "10.0.0.5".parse().unwrap(),
            ExposureKind::TenantPort,
            "vm-evpn",
        ));
    let mut routed = ExposedIp::announced(
        "10.0.0.6".parse().unwrap(),
        ExposureKind::TenantPort,
        "vm-routed",
    );
    routed.via = Some("172.24.4.10".parse().unwrap());
    exposures.expose_ip(routed);
    exposures.expose_ip(ExposedIp::announced(
        "172.24.4.20".parse().unwrap(),
        ExposureKind::ProviderPort,
        "vm-plain",
    ));
    exposures.global_mut().expose_route(ExposedRoute {
        prefix: "10.1.0.0/24".parse().unwrap(),
        kind: RouteKind::TenantSubnet,
        via: Some("172.24.4.10".parse().unwrap()),
        provider: None,
        source: "lrp-1".into(),
    });
    exposures.global_mut().expose_route(ExposedRoute {
        prefix: "172.24.4.0/24".parse().unwrap(),
        kind: RouteKind::GatewayNetwork,
        via: None,
        provider: None,
        source: "cr-lrp-1".into(),
    });

    let r = render(&settings(), &facts(), &exposures);
    let rows: Vec<&str> = r.skipped.iter().map(|s| s.row.as_str()).collect();
    assert_eq!(
        rows,
        vec!["scope evpn:100", "vm-routed", "lrp-1", "cr-lrp-1"],
        "{:?}",
        r.skipped
    );
    assert!(r.skipped[0].reason.contains("no EVPN VRFs"));
    assert!(r.skipped[1].reason.contains("nexthop"));
    assert!(r.skipped[2].reason.contains("kernel redistribution"));
    let on_nic: Vec<String> = r
        .system
        .addresses
        .iter()
        .filter(|a| a.dev.as_str() == "bgp-nic")
        .map(|a| a.addr.to_string())
        .collect();
    assert_eq!(on_nic, vec!["172.24.4.20/32"]);
    assert!(!r.system.ownership.tables.contains(&10));

    exposures.needs.insert(RealisationNeed::RedistributeKernel);
    let r = render(&settings(), &facts(), &exposures);
    assert_eq!(r.skipped.len(), 2, "{:?}", r.skipped);
    assert!(r.system.ownership.tables.contains(&10));
    let in_vrf: Vec<(String, Option<String>, bool)> = r
        .system
        .routes
        .iter()
        .filter(|x| x.table == 10)
        .map(|x| {
            assert_eq!(x.dev.as_ref().map(|d| d.as_str()), Some("bgp-nic"));
            (
                x.dst.to_string(),
                x.via.map(|v| v.to_string()),
                x.scope_link,
            )
        })
        .collect();
    assert_eq!(
        in_vrf,
        vec![
            (
                "10.1.0.0/24".to_owned(),
                Some("172.24.4.10".to_owned()),
                false
            ),
            ("172.24.4.0/24".to_owned(), None, true),
        ]
    );
}

/// Stretched L2 (G1): kernel-only redistribution still renders the routes in the VRF table, and
/// the sweep need makes that table's stray non-BGP routes the agent's.
#[test]
fn kernel_only_redistribution_renders_routes_and_sweeps_the_vrf_table() {
    use ovn_bgp_agent::exposure::{ExposedRoute, RealisationNeed, RouteKind};
    let mut exposures = ExposureSet::default();
    exposures.global_mut().expose_route(ExposedRoute {
        prefix: "10.1.0.0/24".parse().unwrap(),
        kind: RouteKind::TenantSubnet,
        via: Some("172.24.4.10".parse().unwrap()),
        provider: None,
        source: "lrp-1".into(),
    });
    exposures
        .needs
        .insert(RealisationNeed::RedistributeKernelOnly);
    let r = render(&settings(), &facts(), &exposures);
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    assert!(r.system.ownership.tables.contains(&10));
    assert!(r.system.ownership.swept_tables.is_empty());
    assert_eq!(r.system.routes.iter().filter(|x| x.table == 10).count(), 1);

    exposures.needs.insert(RealisationNeed::SweepVrfTable);
    let r = render(&settings(), &facts(), &exposures);
    assert_eq!(r.system.ownership.swept_tables, [10].into());
    // Nothing else is swept: no bridge table is in the set.
    assert!(r.system.ownership.tables.iter().all(|t| *t == 10));
}
