//! The NB driver's `exposing_method = vrf` exposures, as its replay cases record them
//! (`tests/fixtures/replay/nb_bgp_vrf/<case>/NN-expected.json`), rendered by the vrf backend
//! (`backends/vrf/render.rs`): the desired kernel, OVS and FRR objects of acceptance rows E1/E2
//! (upstream-behaviour.md §9) and of each step that changes an EVPN network, asserted object by
//! object. The replay engine compares exposures only; this closes the gap to the system.
#![cfg(all(feature = "nb_bgp", feature = "vrf"))]

use std::path::Path;

use ovn_bgp_agent::backends::vrf::render::{Facts, VrfSettings, render};
use ovn_bgp_agent::exposure::ExposureSet;
use ovn_bgp_agent::plugin::Rendered;
use ovn_bgp_agent::system::{
    AddressSpec, DesiredSystem, LinkKind, LinkSpec, NeighbourSpec, OvsPortSpec, RouteSpec,
    RouteType,
};
use ovn_bgp_agent::types::InterfaceName;

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

fn settings() -> VrfSettings {
    VrfSettings {
        vrf_is_bridge: false,
        loopback_kind: LinkKind::Dummy,
        udp_dstport: 4789,
        delete_vrf_on_disconnect: true,
    }
}

fn facts() -> Facts {
    Facts {
        vtep: Some("10.0.0.1".parse().unwrap()),
        ..Facts::default()
    }
}

/// The exposures of step `step` of replay case `case`.
fn exposures(case: &str, step: u32) -> ExposureSet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/nb_bgp_vrf")
        .join(case)
        .join(format!("{step:02}-expected.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let step: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(step["exposures"].clone()).unwrap()
}

fn rendered(case: &str, step: u32) -> Rendered {
    let r = render(&settings(), &facts(), &exposures(case, step));
    assert!(
        r.skipped.is_empty(),
        "{case} step {step}: the backend refused {:#?}",
        r.skipped
    );
    r
}

fn link<'a>(d: &'a DesiredSystem, n: &str) -> &'a LinkSpec {
    d.links
        .iter()
        .find(|l| l.name.as_str() == n)
        .unwrap_or_else(|| panic!("no link {n} in {:#?}", d.links))
}

/// The VRF side of the (only) localnet veth pair.
fn localnet_veth(d: &DesiredSystem) -> String {
    d.links
        .iter()
        .find(|l| matches!(l.kind, LinkKind::Veth { .. }))
        .expect("the localnet veth")
        .name
        .to_string()
}

fn has_link(d: &DesiredSystem, n: &str) -> bool {
    d.links.iter().any(|l| l.name.as_str() == n)
}

fn frr_text(d: &DesiredSystem) -> String {
    d.frr_objects
        .values()
        .map(|o| o.apply_snippet())
        .collect::<Vec<_>>()
        .join("\n")
}

fn host_route(table: u32, dst: &str, via: Option<&str>, dev: &str) -> RouteSpec {
    RouteSpec {
        table,
        dst: dst.parse().unwrap(),
        route_type: RouteType::Unicast,
        via: via.map(|v| v.parse().unwrap()),
        dev: Some(name(dev)),
        scope_link: via.is_none(),
        metric: None,
    }
}

#[test]
fn e1_e2_an_evpn_provider_network_with_a_vm_bound_here() {
    let d = rendered("evpn_provider_networks", 0).system;
    assert_eq!(link(&d, "vrf-100").kind, LinkKind::Vrf { table: 100 });
    assert_eq!(link(&d, "br-100").master, Some(name("vrf-100")));
    let vx = link(&d, "vxlan-100");
    assert_eq!(
        vx.kind,
        LinkKind::Vxlan {
            vni: 100,
            local: Some("10.0.0.1".parse().unwrap()),
            dstport: 4789,
            neigh_suppress: true
        }
    );
    assert_eq!(vx.master, Some(name("br-100")));
    // The veth named after the localnet port's uuid (abcdef12-34…), with the anycast MAC.
    let veth = link(&d, "vrfabcdef12-34");
    assert_eq!(
        veth.kind,
        LinkKind::Veth {
            peer: name("ovsabcdef12-34")
        }
    );
    assert_eq!(veth.master, Some(name("vrf-100")));
    assert_eq!(
        veth.mac.map(|m| m.to_string()).as_deref(),
        Some("02:00:00:64:00:00")
    );
    assert!(d.ovs_ports.contains(&OvsPortSpec {
        bridge: name("br-ex"),
        name: name("ovsabcdef12-34"),
        internal: false,
        vlan_tag: None
    }));
    for addr in ["169.254.0.0/32", "172.24.100.1/24"] {
        assert!(
            d.addresses.contains(&AddressSpec {
                dev: name("vrfabcdef12-34"),
                addr: addr.parse().unwrap()
            }),
            "{addr}"
        );
    }
    assert!(
        !d.addresses
            .iter()
            .any(|a| a.addr.to_string() == "172.24.100.254/24"),
        "a port's own DHCP options are not the subnet's gateway"
    );
    // E2: the VM as a route in table 100 with a permanent neighbour, nothing on a bgp-nic.
    for vm in ["172.24.100.10/32", "2001:db8:100::10/128"] {
        assert!(
            d.routes
                .contains(&host_route(100, vm, None, "vrfabcdef12-34")),
            "{vm} in {:#?}",
            d.routes
        );
    }
    assert!(d.neighbours.contains(&NeighbourSpec {
        dev: name("vrfabcdef12-34"),
        ip: "172.24.100.10".parse().unwrap(),
        lladdr: "fa:16:3e:11:11:11".parse().unwrap()
    }));
    assert!(!has_link(&d, "bgp-nic") && !has_link(&d, "bgp-vrf"));
    assert!(d.proxy_neighbours.is_empty(), "{:#?}", d.proxy_neighbours);
    assert_eq!(d.flows.len(), 2, "ip and ipv6 MAC-tweak flows");
    for f in &d.flows {
        assert_eq!((f.cookie, f.priority), (999, 900));
        assert_eq!(f.in_port, "patch-provnet-P-to-br-int");
        assert_eq!(f.actions, "mod_dl_dst:02:00:00:64:00:00,NORMAL");
    }
    let frr = frr_text(&d);
    for line in [
        "vrf vrf-100",
        "vni 100",
        "router bgp 64999 vrf vrf-100",
        "rd 10.0.0.1:100",
        "redistribute connected",
        "redistribute kernel",
        "route-target import 64999:1",
        "route-target export 64999:1",
        "advertise ipv4 unicast",
        "interface vrfabcdef12-34",
        "ipv6 nd prefix 2001:db8:100::/64",
        "ipv6 nd rdnss 2001:db8::53",
    ] {
        assert!(frr.contains(line), "{line:?} in\n{frr}");
    }
    assert!(
        !frr.contains("no-autoconfig"),
        "dhcpv6_stateless = true lets hosts autoconfigure:\n{frr}"
    );
}

#[test]
fn dhcp_changes_vni_changes_and_removal_follow_through_to_the_system() {
    // 01: the gateway address moves, a stateful IPv6 subnet gets its router advertisements.
    let d = rendered("evpn_provider_networks", 1).system;
    assert!(d.addresses.contains(&AddressSpec {
        dev: name("vrfabcdef12-34"),
        addr: "172.24.100.2/24".parse().unwrap()
    }));
    assert!(
        !d.addresses
            .iter()
            .any(|a| a.addr.to_string() == "172.24.100.1/24")
    );
    let frr = frr_text(&d);
    assert!(
        frr.contains("ipv6 nd prefix 2001:db8:101::/64 no-autoconfig"),
        "{frr}"
    );
    // 02: VNI 200: VRF 200 and table 200, no trace of 100 (the reconciler removes it).
    let d = rendered("evpn_provider_networks", 2).system;
    assert!(has_link(&d, "vrf-200") && !has_link(&d, "vrf-100"));
    assert!(
        d.routes
            .contains(&host_route(200, "172.24.100.10/32", None, "vrfabcdef12-34"))
    );
    assert_eq!(
        link(&d, "vrfabcdef12-34")
            .mac
            .map(|m| m.to_string())
            .as_deref(),
        Some("02:00:00:c8:00:00"),
        "the anycast MAC follows the VNI"
    );
    assert!(!frr_has_vrf(&d, 100) && frr_has_vrf(&d, 200));
    // 03: settings removed: nothing at all.
    let d = rendered("evpn_provider_networks", 3).system;
    assert!(d.links.is_empty() && d.routes.is_empty() && d.frr_objects.is_empty());
    // 04: network Q, VLAN 200, AS 65001, explicit RD and targets.
    let d = rendered("evpn_provider_networks", 4).system;
    let veth = link(&d, "vrfbcdef123-45");
    assert_eq!(
        veth.mac.map(|m| m.to_string()).as_deref(),
        Some("02:00:01:2c:00:c8")
    );
    assert!(d.ovs_ports.contains(&OvsPortSpec {
        bridge: name("br-ex"),
        name: name("ovsbcdef123-45"),
        internal: false,
        vlan_tag: Some(200)
    }));
    let frr = frr_text(&d);
    for line in [
        "router bgp 65001 vrf vrf-300",
        "rd 65001:300",
        "route-target import 65001:1",
        "route-target import 65001:2",
        "route-target export 65001:3",
    ] {
        assert!(frr.contains(line), "{line:?} in\n{frr}");
    }
    assert!(!frr.contains("route-target export 65001:1"), "{frr}");
}

fn frr_has_vrf(d: &DesiredSystem, vni: u32) -> bool {
    d.frr_objects
        .keys()
        .any(|k| k.as_str() == format!("vrf vrf-{vni}"))
}

#[test]
fn hostile_bgpvpn_values_never_reach_frr() {
    for step in 5..=9 {
        let d = rendered("evpn_provider_networks", step).system;
        assert!(
            !frr_has_vrf(&d, 300) && !has_link(&d, "vrf-300"),
            "step {step}: the refused network has no VRF"
        );
        let frr = frr_text(&d);
        for bad in ["exit", "rm -rf", "router bgp 1"] {
            assert!(!frr.contains(bad), "step {step}: {bad:?} in\n{frr}");
        }
    }
    assert!(frr_has_vrf(
        &rendered("evpn_provider_networks", 10).system,
        300
    ));
}

#[test]
fn gateway_tenant_networks_fips_and_lbs_are_routes_in_the_vrf() {
    let d = rendered("evpn_gateway_tenant_networks", 0).system;
    let veth = localnet_veth(&d);
    // Gateway with its MAC as neighbour; tenant hosts via the gateway address of their family.
    assert!(
        d.routes
            .contains(&host_route(100, "172.24.100.5/32", None, &veth))
    );
    assert!(d.neighbours.contains(&NeighbourSpec {
        dev: name(&veth),
        ip: "172.24.100.5".parse().unwrap(),
        lladdr: "fa:16:3e:aa:bb:01".parse().unwrap()
    }));
    for (host, via) in [
        ("10.0.0.1/32", "172.24.100.5"),
        ("10.0.0.10/32", "172.24.100.5"),
        ("10.0.0.30/32", "172.24.100.5"),
        ("2001:db8:5::1/128", "2001:db8:100::5"),
    ] {
        assert!(
            d.routes.contains(&host_route(100, host, Some(via), &veth)),
            "{host} via {via} in {:#?}",
            d.routes
        );
    }
    // FIP with the NAT's MAC, provider VIP and VIP FIP on-link.
    assert!(d.neighbours.contains(&NeighbourSpec {
        dev: name(&veth),
        ip: "172.24.100.50".parse().unwrap(),
        lladdr: "fa:16:3e:55:55:50".parse().unwrap()
    }));
    for onlink in ["172.24.100.31/32", "172.24.100.60/32"] {
        assert!(d.routes.contains(&host_route(100, onlink, None, &veth)));
    }
    // Nothing for the gateway on network Q, no subnet route in host mode.
    assert!(
        !d.routes
            .iter()
            .any(|r| r.dst.to_string() == "172.24.200.5/32")
    );
    assert!(!d.routes.iter().any(|r| r.dst.to_string() == "10.0.0.0/24"));
    // The gateway leaves: the VRF stays with its attachment, the routes go.
    let d = rendered("evpn_gateway_tenant_networks", 3).system;
    assert!(has_link(&d, "vrf-100"));
    assert!(d.routes.is_empty(), "{:#?}", d.routes);
}

#[test]
fn two_localnets_on_two_bridges_are_two_attachments_of_one_vrf() {
    let d = rendered("evpn_two_localnets_two_bridges", 0).system;
    // provnet-a (c0ffee00-11…) flat on br-ex, provnet-b (c0ffee00-22…) VLAN 30 on br-ex2.
    assert_eq!(link(&d, "vrfc0ffee00-11").master, Some(name("vrf-100")));
    assert_eq!(link(&d, "vrfc0ffee00-22").master, Some(name("vrf-100")));
    assert!(d.ovs_ports.contains(&OvsPortSpec {
        bridge: name("br-ex2"),
        name: name("ovsc0ffee00-22"),
        internal: false,
        vlan_tag: Some(30)
    }));
    assert_eq!(
        link(&d, "vrfc0ffee00-22")
            .mac
            .map(|m| m.to_string())
            .as_deref(),
        Some("02:00:00:64:00:1e"),
        "anycast MAC of VNI 100, VLAN 30"
    );
    assert!(
        !has_link(&d, "vrfc0ffee00-44"),
        "public3 is not mapped here"
    );
    assert!(
        d.routes
            .contains(&host_route(100, "172.24.100.10/32", None, "vrfc0ffee00-11"))
    );
    assert_eq!(link(&d, "vrfc0ffee00-33").master, Some(name("vrf-4000")));
    assert!(
        d.routes
            .contains(&host_route(4000, "192.168.40.5/32", None, "vrfc0ffee00-33"))
    );
    let in_ports: Vec<&str> = d.flows.iter().map(|f| f.in_port.as_str()).collect();
    for port in ["provnet-a", "provnet-b", "provnet-c"] {
        assert!(
            in_ports.contains(&format!("patch-{port}-to-br-int").as_str()),
            "{port}: {in_ports:?}"
        );
    }
    // provnet-b deleted: its veth and OVS port go, the rest stays.
    let d = rendered("evpn_two_localnets_two_bridges", 1).system;
    assert!(!has_link(&d, "vrfc0ffee00-22") && has_link(&d, "vrfc0ffee00-11"));
    assert!(
        !d.ovs_ports
            .iter()
            .any(|p| p.bridge.as_str() == "br-ex2" && p.vlan_tag == Some(30))
    );
}

#[test]
fn subnet_mode_routes_the_tenant_prefixes_via_the_gateway() {
    let d = rendered("evpn_tenant_subnet_mode", 0).system;
    let veth = localnet_veth(&d);
    for (prefix, via) in [
        ("10.0.0.0/24", "172.24.100.5"),
        ("2001:db8:5::/64", "2001:db8:100::5"),
    ] {
        assert!(
            d.routes
                .contains(&host_route(100, prefix, Some(via), &veth)),
            "{prefix} via {via} in {:#?}",
            d.routes
        );
    }
    assert!(
        !d.routes.iter().any(|r| r.dst.to_string() == "10.0.0.10/32"),
        "no per-VM routes in subnet mode"
    );
    assert!(frr_text(&d).contains("redistribute kernel"));
    let d = rendered("evpn_tenant_subnet_mode", 1).system;
    assert!(!d.routes.iter().any(|r| r.dst.to_string() == "10.0.0.0/24"));
}
