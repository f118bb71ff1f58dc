//! The incremental `ovn` render against a full render of the same inputs, after every step of
//! random sequences of changes: IPs (provider ports, floating IPs, tenant ports, with and
//! without a provider, a MAC or a nexthop), routes, subnets, bridges, EVPN scopes, and the
//! mappings and bridge facts (the side towards OpenStack coming and going). The announced set
//! goes through the underlay rendering as the backend composes them: incremental after
//! incremental against full after full.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use proptest::prelude::*;

use super::*;
use crate::backends::underlay::incremental::IncrementalRender as UnderlayIncremental;
use crate::backends::underlay::render::{
    Facts as UnderlayFacts, UnderlaySettings, render as underlay_render,
};
use crate::caps::frr::values::{Asn, Vni};
use crate::exposure::{
    BridgeWiring, EvpnParams, ExposedIp, ExposedRoute, ExposedSubnet, ExposureKind,
    ProviderNetwork, RouteKind, ScopeId,
};
use crate::ovn::identity::ChassisIdentity;
use crate::types::InterfaceName;

use super::super::render::{BridgeFacts, render};

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

fn settings() -> ClusterSettings {
    ClusterSettings {
        peers: vec!["100.64.1.5".parse().unwrap()],
        prefixes: vec!["192.168.0.0/16".parse().unwrap()],
        external_nics: BTreeSet::from(["eth1".to_owned()]),
        chassis: "bgp".to_owned(),
    }
}

/// The cluster's mappings: with the side towards OpenStack (br-osp is OpenStack's), without
/// it, or with an entry that cannot be used.
fn mappings(which: u8) -> Mappings {
    let cluster = [
        "dcfabric:br-ex, local:br-osp",
        "dcfabric:br-ex",
        "local:br-osp,bad entry",
    ][usize::from(which % 3)];
    let identity = ChassisIdentity {
        bridge_mappings: vec![("provider".into(), "br-osp".into())],
        extra_bridge_mappings: BTreeMap::from([("bgp".to_owned(), cluster.to_owned())]),
        ..Default::default()
    };
    Mappings::from_identity(&identity, "bgp")
}

fn facts(with_mac: bool) -> ClusterFacts {
    ClusterFacts {
        bridges: BTreeMap::from([(
            name("br-ex"),
            BridgeFacts {
                mac: with_mac.then(|| "52:54:00:00:00:01".parse().unwrap()),
                addresses: vec!["100.64.1.1/24".parse().unwrap()],
                ports: BTreeSet::from([
                    "eth1".to_owned(),
                    "patch-dcfabric-localnet-to-br-int-bgp".to_owned(),
                ]),
            },
        )]),
    }
}

fn provider() -> ProviderNetwork {
    ProviderNetwork {
        physnet: Arc::from("provider"),
        bridge: name("br-osp"),
        vlan: None,
        evpn: None,
    }
}

/// A few IPs of each family, so that changes hit the same keys again.
fn ip(i: u8) -> IpAddr {
    match i % 8 {
        0..=4 => format!("172.16.1.{}", 10 + i % 8).parse().unwrap(),
        _ => format!("2001:db8::{}", 10 + i % 8).parse().unwrap(),
    }
}

/// One change: `what` picks the kind, `b` shapes it.
#[derive(Debug, Clone)]
struct Step {
    what: u8,
    b: [u8; 6],
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..12, any::<[u8; 6]>()).prop_map(|(what, b)| Step { what, b })
}

/// What the backend renders from besides the exposures.
struct World {
    set: ExposureSet,
    mappings: Mappings,
    facts: ClusterFacts,
}

fn apply(w: &mut World, s: &Step) {
    let b = s.b;
    let global = w.set.scopes.entry(ScopeId::Global).or_default();
    match s.what {
        // Upsert an IP (the most common event).
        0..=3 => {
            let addr = ip(b[0]);
            let kind = [
                ExposureKind::ProviderPort,
                ExposureKind::FloatingIp,
                ExposureKind::TenantPort,
            ][usize::from(b[1] % 3)];
            let mut exposed = ExposedIp::announced(addr, kind, format!("port-{}", b[2] % 3));
            if !b[3].is_multiple_of(4) {
                exposed.provider = Some(provider());
            }
            if !b[4].is_multiple_of(3) {
                exposed.lladdr = Some(format!("fa:16:3e:00:00:0{}", b[4] % 3).parse().unwrap());
            }
            if b[5].is_multiple_of(7) {
                exposed.via = Some("192.0.2.1".parse().unwrap());
            }
            global.ips.insert(addr, exposed.into());
        }
        4 | 5 => {
            global.ips.remove(&ip(b[0]));
        }
        6 => {
            let prefix: IpNet = ["10.0.0.0/24", "2001:db8:5::/64"][usize::from(b[0] % 2)]
                .parse()
                .unwrap();
            if b[1].is_multiple_of(2) {
                global.routes.remove(&prefix);
            } else {
                global.routes.insert(
                    prefix,
                    ExposedRoute {
                        prefix,
                        kind: RouteKind::TenantSubnet,
                        via: None,
                        provider: None,
                        source: format!("router-{}", b[2] % 2),
                    },
                );
            }
        }
        7 => {
            let subnet = ExposedSubnet {
                router_ip: ["10.0.0.1/24", "10.2.0.1/26"][usize::from(b[0] % 2)]
                    .parse()
                    .unwrap(),
                via: "172.16.1.2".parse().unwrap(),
                provider: provider(),
                source: format!("lrp-{}", b[1] % 2),
            };
            if b[2].is_multiple_of(2) {
                global.subnets.insert(subnet);
            } else {
                global.subnets.remove(&subnet);
            }
        }
        8 => {
            let bridge = name("br-osp");
            if b[0].is_multiple_of(3) {
                w.set.bridges.remove(&bridge);
            } else {
                w.set.bridges.insert(
                    bridge.clone(),
                    BridgeWiring {
                        bridge,
                        physnets: BTreeSet::from(["provider".to_owned()]),
                        vlans: BTreeSet::new(),
                        localnet_ports: BTreeSet::from([format!("provnet-{}", b[1] % 2)]),
                        index: 1,
                    },
                );
            }
        }
        9 => w.mappings = mappings(b[0]),
        10 => w.facts = facts(b[0].is_multiple_of(2)),
        _ => {
            // An EVPN scope the backend reports and does not realise.
            let vni = Vni::new(100).unwrap();
            let scope = w.set.scopes.entry(ScopeId::Evpn(vni)).or_default();
            scope.evpn = Some(EvpnParams::new(vni, Asn::new(64999).unwrap()));
            if b[0].is_multiple_of(2) {
                let addr = ip(b[1]);
                scope.ips.insert(
                    addr,
                    ExposedIp::announced(addr, ExposureKind::TenantPort, "evpn-port").into(),
                );
            } else {
                scope.ips.clear();
            }
        }
    }
}

fn world() -> World {
    World {
        set: ExposureSet::default(),
        mappings: mappings(0),
        facts: facts(true),
    }
}

fn underlay_settings() -> UnderlaySettings {
    UnderlaySettings::from_config(&crate::config::AgentConfig::default()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// After every step, the incremental render equals a full render of the same inputs:
    /// rows, flows, FDB entries, reports and their order, the announced set; and the
    /// underlay's incremental render of the announced set equals its full render.
    #[test]
    fn equals_a_full_render(steps in prop::collection::vec(step(), 1..60)) {
        let settings = settings();
        let (underlay, underlay_facts) = (underlay_settings(), UnderlayFacts::default());
        let mut w = world();
        let mut incremental = IncrementalRender::default();
        let mut kernel = UnderlayIncremental::default();
        for (i, s) in steps.iter().enumerate() {
            apply(&mut w, s);
            let shared = Arc::new(w.set.clone());
            let (got, announced) = incremental.render(&settings, &w.mappings, &w.facts, &shared);
            let (want, want_announced) = render(&settings, &w.mappings, &w.facts, &w.set);
            prop_assert_eq!(&got.system, &want.system, "step {}: {:?}", i, s);
            prop_assert_eq!(&got.skipped, &want.skipped, "step {}: {:?}", i, s);
            prop_assert_eq!(&*announced, &want_announced, "step {}: {:?}", i, s);
            let got_kernel = kernel.render(&underlay, &underlay_facts, &announced);
            let want_kernel = underlay_render(&underlay, &underlay_facts, &want_announced);
            prop_assert_eq!(&got_kernel, &want_kernel, "step {}: {:?}", i, s);
        }
    }
}

fn vm(i: u32) -> ExposedIp {
    let addr: IpAddr = format!("172.16.{}.{}", 1 + i / 250, 1 + i % 250)
        .parse()
        .unwrap();
    let mut e = ExposedIp::announced(addr, ExposureKind::ProviderPort, format!("vm-{i}"));
    e.provider = Some(provider());
    e.lladdr = Some("fa:16:3e:00:00:01".parse().unwrap());
    e
}

/// An event that exposes one more IP next to many renders that IP, and the underlay renders
/// only it too (the announced set shares the rest with the last one); an event that changes
/// no announced IP hands on the same set; the side towards OpenStack going renders every IP's
/// rows again.
#[test]
fn one_more_ip_renders_one_ip_here_and_in_the_kernel_part() {
    let settings = settings();
    let (underlay, underlay_facts) = (underlay_settings(), UnderlayFacts::default());
    let mut w = world();
    for i in 0..1000 {
        w.set.expose_ip(vm(i));
    }
    let mut incremental = IncrementalRender::default();
    let mut kernel = UnderlayIncremental::default();
    let shared = Arc::new(w.set.clone());
    let (_, announced) = incremental.render(&settings, &w.mappings, &w.facts, &shared);
    kernel.render(&underlay, &underlay_facts, &announced);
    assert!(incremental.stats().full);
    assert_eq!(announced.global().ips.len(), 1000);

    w.set.expose_ip(vm(1000));
    let shared = Arc::new(w.set.clone());
    let (got, next) = incremental.render(&settings, &w.mappings, &w.facts, &shared);
    assert_eq!(
        incremental.stats(),
        RenderStats {
            full: false,
            ips_rendered: 1
        }
    );
    let (want, want_announced) = render(&settings, &w.mappings, &w.facts, &w.set);
    assert_eq!(got, want);
    assert_eq!(*next, want_announced);
    kernel.render(&underlay, &underlay_facts, &next);
    assert_eq!(
        kernel.stats(),
        crate::backends::underlay::incremental::RenderStats {
            full: false,
            exposures_rendered: 1
        }
    );
    let nb = got.system.local_nb.as_ref().unwrap();
    assert_eq!(
        nb.rows
            .keys()
            .filter(|id| id.table == "Static_MAC_Binding")
            .count(),
        1001
    );

    // Only a MAC changed: the binding follows, the announced set is the same allocation.
    let mut moved = vm(7);
    moved.lladdr = Some("fa:16:3e:00:00:02".parse().unwrap());
    w.set.global_mut().ips.insert(moved.ip, moved.into());
    let (got, again) =
        incremental.render(&settings, &w.mappings, &w.facts, &Arc::new(w.set.clone()));
    assert!(Arc::ptr_eq(&next, &again));
    assert_eq!(got, render(&settings, &w.mappings, &w.facts, &w.set).0);

    // No side towards OpenStack: no bindings, every IP's rows rendered again; the announced
    // set is still the same.
    w.mappings = mappings(1);
    let (got, again) =
        incremental.render(&settings, &w.mappings, &w.facts, &Arc::new(w.set.clone()));
    assert!(incremental.stats().full);
    assert!(Arc::ptr_eq(&next, &again));
    assert_eq!(got, render(&settings, &w.mappings, &w.facts, &w.set).0);
    assert!(
        !got.system
            .local_nb
            .unwrap()
            .rows
            .keys()
            .any(|id| id.table == "Static_MAC_Binding")
    );
}
