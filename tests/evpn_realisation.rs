//! The `vrf` backend's EVPN realisation applied by the composite reconciler to a real kernel
//! (network namespace) and a real OVS (ovsdb-server + userspace ovs-vswitchd): rows F1/F2 of
//! the acceptance table on a flat and a VLAN provider network, repair of a device deleted by
//! hand (U35), withdrawal of everything (F3), and foreign `br-*`/`vrf-*`/`vxlan-*` devices left
//! alone (U34).
//!
//! This kernel has no `vrf` or `dummy` module: the VRF is a bridge and `lo-<vni>` an ifb here
//! (`[linux] vrf_device_kind = bridge`, `nic_device_kind = ifb`); the real kinds and FRR's EVPN
//! are exercised in the full-kernel tier (tests/vm_tier.rs). The FRR stanzas themselves are
//! tested against a real FRR in tests/frr_capability.rs.

mod frrovs_support;

use frrovs_support::{OvsNode, unique_tag};
use ovn_bgp_agent::backends::vrf::render::{Facts, VrfSettings, render};
use ovn_bgp_agent::caps::SystemReconciler;
use ovn_bgp_agent::caps::frr::values::{Asn, Vni};
use ovn_bgp_agent::exposure::{
    BridgeWiring, EvpnAttachment, EvpnParams, ExposedIp, ExposedSubnet, ExposureKind, ExposureSet,
    ProviderNetwork, ScopeId,
};
use ovn_bgp_agent::system::{DesiredSystem, LinkKind};
use ovn_bgp_agent::types::InterfaceName;

const GW_MAC: &str = "fa:16:3e:00:00:05";

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

fn provider(vlan: Option<u16>) -> ProviderNetwork {
    ProviderNetwork {
        physnet: "public".into(),
        bridge: name("br-ex"),
        vlan,
        evpn: None,
    }
}

/// A gateway on `vlan` with VNI `vni`, one router subnet and one tenant VM behind it (F1+F2).
fn add_gateway(set: &mut ExposureSet, vni: u32, vlan: Option<u16>, gw: &str, subnet: &str) {
    let vni = Vni::new(vni).unwrap();
    let mut params = EvpnParams::new(vni, Asn::new(64999).unwrap());
    params.attachments.insert(EvpnAttachment::RouterGateway {
        provider: provider(vlan),
    });
    let scope = set.scope_mut(ScopeId::Evpn(vni));
    scope.evpn = Some(params);
    scope.expose_ip(ExposedIp {
        provider: Some(provider(vlan)),
        lladdr: Some(GW_MAC.parse().unwrap()),
        ..ExposedIp::announced(gw.parse().unwrap(), ExposureKind::GatewayPort, "cr-lrp-r")
    });
    let router_ip: ipnet::IpNet = subnet.parse().unwrap();
    scope.subnets.insert(ExposedSubnet {
        router_ip,
        via: gw.parse().unwrap(),
        provider: provider(vlan),
        source: "lrp-subnet".into(),
    });
    let vm = match router_ip.addr() {
        std::net::IpAddr::V4(a) => std::net::IpAddr::V4((u32::from(a) + 9).into()),
        other => other,
    };
    scope.expose_ip(ExposedIp::announced(vm, ExposureKind::TenantPort, "vm"));
}

fn exposures() -> ExposureSet {
    let mut set = ExposureSet::default();
    set.bridges.insert(
        name("br-ex"),
        BridgeWiring {
            bridge: name("br-ex"),
            physnets: ["public".to_owned()].into(),
            vlans: [100].into(),
            localnet_ports: ["provnet-x".to_owned()].into(),
            index: 1,
        },
    );
    add_gateway(&mut set, 1001, None, "172.24.100.5", "10.0.0.1/24");
    add_gateway(&mut set, 2002, Some(100), "172.24.200.5", "10.2.0.1/24");
    set
}

fn settings() -> VrfSettings {
    VrfSettings {
        vrf_is_bridge: true,
        loopback_kind: LinkKind::Ifb,
        udp_dstport: 4789,
        delete_vrf_on_disconnect: true,
    }
}

fn facts() -> Facts {
    Facts {
        vtep: Some("10.0.0.1".parse().unwrap()),
        claimed_tables: [1001, 2002].into(),
        ..Facts::default()
    }
}

/// The desired system without its FRR objects (no FRR runs here; they are checked in
/// tests/frr_capability.rs).
fn kernel_and_ovs(set: &ExposureSet) -> DesiredSystem {
    let rendered = render(&settings(), &facts(), set);
    assert!(rendered.skipped.is_empty(), "{:?}", rendered.skipped);
    let mut d = rendered.system;
    assert_eq!(
        d.frr_objects.len(),
        set.scopes.len() - 1,
        "one VRF stanza per VNI"
    );
    d.frr_objects.clear();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_gateway_evpn_is_realised_repaired_and_withdrawn_leaving_foreign_devices() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let ip = |args: &[&str]| node.netns.ip(args);
    // Someone else's devices with the agent's name patterns (U34).
    ip(&["link", "add", "br-foo", "type", "bridge"]);
    ip(&["link", "add", "vrf-foo", "type", "bridge"]);
    ip(&[
        "link", "add", "vxlan-7", "type", "vxlan", "id", "7", "dstport", "4789",
    ]);
    let foreign = || {
        for dev in ["br-foo", "vrf-foo", "vxlan-7"] {
            ip(&["link", "show", "dev", dev]);
        }
    };

    let r = frrovs_support::composite_without_frr(&node);
    let desired = kernel_and_ovs(&exposures());
    let report = r.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "{:#?}", report.errors);

    // F1, flat network: the VNI's devices.
    let show = |dev: &str| ip(&["-d", "link", "show", "dev", dev]);
    // (A bridge cannot be a port of the bridge standing in for the VRF: in the full-kernel
    // tier br-1001 is enslaved to the real vrf-1001.)
    assert!(show("br-1001").contains("bridge"));
    assert!(show("vrf-1001").contains("bridge"));
    let vx = show("vxlan-1001");
    assert!(
        vx.contains("vxlan id 1001 local 10.0.0.1") && vx.contains("nolearning"),
        "{vx}"
    );
    assert!(vx.contains("master br-1001"), "{vx}");
    assert!(show("lo-1001").contains("master vrf-1001"));
    let veth = show("veth-vrf-1001");
    assert!(
        veth.contains("master vrf-1001") && veth.contains("veth"),
        "{veth}"
    );
    assert!(
        node.vsctl(&["list-ports", "br-ex"])
            .contains("veth-ovs-1001"),
        "the OVS end is a port of the provider bridge"
    );
    // F1/F2 routes in the VNI table, and the unreachable defaults.
    // (`ip` prints no `proto boot`, its default: the filter shows only such routes.)
    let table = ip(&["route", "show", "table", "1001", "proto", "boot"]);
    assert!(
        table.contains("172.24.100.5 dev veth-vrf-1001 scope link"),
        "{table}"
    );
    assert!(
        table.contains("10.0.0.0/24 via 172.24.100.5 dev veth-vrf-1001"),
        "{table}"
    );
    assert!(
        table.contains("unreachable default metric 4278198272"),
        "{table}"
    );
    let table6 = ip(&["-6", "route", "show", "table", "1001", "proto", "boot"]);
    assert!(
        table6.contains("unreachable default dev lo metric 4278198272"),
        "{table6}"
    );
    let neigh = ip(&["neigh", "show", "dev", "veth-vrf-1001"]);
    assert!(
        neigh.contains(&format!("172.24.100.5 lladdr {GW_MAC} PERMANENT")),
        "{neigh}"
    );
    // F2: the tenant VM on lo-1001, without the kernel's local route.
    assert!(ip(&["addr", "show", "dev", "lo-1001"]).contains("10.0.0.10/32"));
    let local = ip(&["route", "show", "table", "local", "10.0.0.10"]);
    assert!(local.trim().is_empty(), "local route left: {local}");
    // F2: the subnet's redirect flow into the veth.
    let veth_ofport = node.ofport("veth-ovs-1001");
    let flows = node.flows("br-ex", "cookie=998/-1");
    let flat: Vec<_> = flows.iter().filter(|f| f.contains("10.0.0.0/24")).collect();
    assert_eq!(flat.len(), 1, "{flows:#?}");
    assert!(flat[0].contains("priority=1000"), "{flat:?}");
    assert!(flat[0].contains(&format!("dl_src={GW_MAC}")), "{flat:?}");
    assert!(
        flat[0].contains(&format!("output:{veth_ofport}")) && !flat[0].contains("strip_vlan"),
        "{flat:?}"
    );

    // VLAN network: the OVS internal port vlan-2002 with its tag, in the VRF.
    assert_eq!(
        node.vsctl(&["get", "port", "vlan-2002", "tag"]).trim(),
        "100"
    );
    assert!(show("vlan-2002").contains("master vrf-2002"));
    let vlan_ofport = node.ofport("vlan-2002");
    let tagged: Vec<_> = flows.iter().filter(|f| f.contains("10.2.0.0/24")).collect();
    assert_eq!(tagged.len(), 1, "{flows:#?}");
    assert!(
        tagged[0].contains(&format!("strip_vlan,output:{vlan_ofport}")),
        "{tagged:?}"
    );
    assert!(
        ip(&["route", "show", "table", "2002", "proto", "boot"])
            .contains("10.2.0.0/24 via 172.24.200.5 dev vlan-2002")
    );

    assert!(
        r.reconcile(&desired).await.unwrap().is_noop(),
        "a second reconcile changes nothing"
    );

    // U35: a device deleted by hand comes back with what was on it.
    ip(&["link", "del", "veth-vrf-1001"]);
    let repaired = r.reconcile(&desired).await.unwrap();
    assert!(repaired.errors.is_empty(), "{:#?}", repaired.errors);
    assert!(show("veth-vrf-1001").contains("master vrf-1001"));
    assert!(
        ip(&["route", "show", "table", "1001"])
            .contains("10.0.0.0/24 via 172.24.100.5 dev veth-vrf-1001")
    );
    assert_eq!(
        node.flows("br-ex", "cookie=998/-1").len(),
        2,
        "flows follow the recreated port"
    );
    foreign();

    // F3: the gateways go: every device, port, flow and route of both VNIs goes; the foreign
    // devices stay.
    let empty = ExposureSet {
        bridges: exposures().bridges,
        ..Default::default()
    };
    let withdrawn = r.reconcile(&kernel_and_ovs(&empty)).await.unwrap();
    assert!(withdrawn.errors.is_empty(), "{:#?}", withdrawn.errors);
    let links = ip(&["link", "show"]);
    for gone in [
        "vrf-1001",
        "br-1001",
        "vxlan-1001",
        "lo-1001",
        "veth-vrf-1001",
        "veth-ovs-1001",
        "vrf-2002",
    ] {
        assert!(
            !links.contains(&format!(" {gone}:")),
            "{gone} left: {links}"
        );
    }
    let ports = node.vsctl(&["list-ports", "br-ex"]);
    assert!(
        !ports.contains("veth-ovs-1001") && !ports.contains("vlan-2002"),
        "{ports}"
    );
    assert!(node.flows("br-ex", "cookie=998/-1").is_empty());
    for t in ["1001", "2002"] {
        assert!(
            ip(&["route", "show", "table", t]).trim().is_empty(),
            "table {t} not empty"
        );
    }
    foreign();
}
