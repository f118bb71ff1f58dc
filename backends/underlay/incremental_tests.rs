//! The incremental underlay render against a full render of the same inputs, after every step
//! of random sequences of changes: IPs (with and without a provider, a VLAN, a neighbour, NDP
//! proxies shared between IPs, a nexthop the backend refuses), routes, subnets (some whose
//! rule equals an IP's), bridges and their tables, the realisation needs and EVPN scopes.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::caps::frr::values::{Asn, Vni};
use crate::exposure::{
    BridgeWiring, EvpnParams, ExposedIp, ExposedRoute, ExposureKind, ProviderNetwork,
    RealisationNeed, RouteKind, ScopeId,
};
use crate::types::InterfaceName;

use super::super::render::render;

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

/// The defaults of upstream's configuration: bgp-nic in bgp-vrf, table 10.
fn settings() -> UnderlaySettings {
    UnderlaySettings::from_config(&crate::config::AgentConfig::default()).unwrap()
}

const BRIDGES: [&str; 3] = ["br-ex", "br-vlan", "br-gone"];

fn provider(b: u8) -> ProviderNetwork {
    ProviderNetwork {
        physnet: Arc::from(["public", "vlans", "gone"][usize::from(b % 3)]),
        bridge: name(BRIDGES[usize::from(b % 3)]),
        vlan: (b & 4 != 0).then_some(100 + u16::from(b % 2)),
        evpn: None,
    }
}

/// A few IPs of each family, so that changes hit the same keys again.
fn ip(i: u8) -> IpAddr {
    match i % 6 {
        0..=3 => format!("172.24.4.{}", 10 + i % 6).parse().unwrap(),
        _ => format!("2001:db8::{}", 10 + i % 6).parse().unwrap(),
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

fn apply(set: &mut ExposureSet, facts: &mut Facts, s: &Step) {
    let b = s.b;
    let global = set.scopes.entry(ScopeId::Global).or_default();
    match s.what {
        // Upsert an IP (the most common event).
        0..=3 => {
            let addr = ip(b[0]);
            let mut exposed = ExposedIp::announced(
                addr,
                [ExposureKind::FloatingIp, ExposureKind::TenantPort][usize::from(b[1] % 2)],
                format!("port-{}", b[2] % 3),
            );
            if b[1] & 2 != 0 {
                exposed.provider = Some(provider(b[3]));
            }
            if b[1] & 4 != 0 {
                exposed.lladdr = Some(format!("fa:16:3e:00:00:0{}", b[4] % 3).parse().unwrap());
            }
            if addr.is_ipv6() && b[1] & 8 != 0 {
                // Shared by the IPv6 addresses: two producers of one proxy neighbour.
                exposed.ndp_proxy.insert("2001:db8::/64".parse().unwrap());
                if b[4] & 1 != 0 {
                    exposed.ndp_proxy.insert("2001:db8:1::/64".parse().unwrap());
                }
            }
            if b[1] & 16 != 0 && b[5].is_multiple_of(4) {
                exposed.via = Some("192.0.2.1".parse().unwrap());
            }
            global.ips.insert(addr, exposed.into());
        }
        4 | 5 => {
            global.ips.remove(&ip(b[0]));
        }
        6 => {
            let prefix: IpNet = ["10.0.0.0/24", "10.1.0.0/24", "2001:db8:5::/64"]
                [usize::from(b[0] % 3)]
            .parse()
            .unwrap();
            if b[1].is_multiple_of(3) {
                global.routes.remove(&prefix);
            } else {
                global.routes.insert(
                    prefix,
                    ExposedRoute {
                        prefix,
                        kind: RouteKind::TenantSubnet,
                        via: (b[2] & 1 != 0).then(|| "172.24.4.1".parse().unwrap()),
                        provider: None,
                        source: format!("router-{}", b[3] % 2),
                    },
                );
            }
        }
        7 => {
            // Some router IPs are an IP's host prefix: the same rule from two producers.
            let router_ip: IpNet = ["10.0.0.1/24", "172.24.4.10/32", "10.2.0.1/26"]
                [usize::from(b[0] % 3)]
            .parse()
            .unwrap();
            let subnet = ExposedSubnet {
                router_ip,
                via: ["172.24.4.100", "172.24.4.101"][usize::from(b[1] % 2)]
                    .parse()
                    .unwrap(),
                provider: provider(b[2]),
                source: format!("lrp-{}", b[3] % 2),
            };
            if b[4].is_multiple_of(2) {
                global.subnets.insert(subnet);
            } else {
                global.subnets.remove(&subnet);
            }
        }
        8 => {
            let bridge = name(BRIDGES[usize::from(b[0] % 3)]);
            if b[1].is_multiple_of(3) {
                set.bridges.remove(&bridge);
            } else {
                set.bridges.insert(
                    bridge.clone(),
                    BridgeWiring {
                        bridge,
                        physnets: BTreeSet::from(["public".to_owned()]),
                        vlans: if b[2] & 1 != 0 {
                            BTreeSet::from([100])
                        } else {
                            BTreeSet::new()
                        },
                        localnet_ports: BTreeSet::from([format!("ln-{}", b[3] % 2)]),
                        index: u16::from(b[0] % 3) + 1,
                    },
                );
            }
        }
        9 => {
            // The tables and MACs the system told: a bridge's table comes, goes or moves.
            let bridge = name(BRIDGES[usize::from(b[0] % 2)]);
            match b[1] % 3 {
                0 => {
                    facts.tables.remove(&bridge);
                }
                n => {
                    facts.tables.insert(bridge.clone(), 200 + u32::from(n));
                }
            }
            if b[2] & 1 != 0 {
                facts
                    .bridge_macs
                    .insert(bridge, "aa:aa:aa:aa:aa:01".parse().unwrap());
            }
        }
        10 => {
            let need = [
                RealisationNeed::RedistributeKernel,
                RealisationNeed::RedistributeKernelOnly,
                RealisationNeed::SweepVrfTable,
            ][usize::from(b[0] % 3)];
            if !set.needs.remove(&need) {
                set.needs.insert(need);
            }
        }
        _ => {
            // An EVPN scope the underlay backend reports and does not realise.
            let vni = Vni::new(100 + u32::from(b[0] % 2)).unwrap();
            let scope = set.scopes.entry(ScopeId::Evpn(vni)).or_default();
            scope.evpn = Some(EvpnParams::new(vni, Asn::new(64999).unwrap()));
            if b[1].is_multiple_of(2) {
                let addr = ip(b[2]);
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

fn initial_facts() -> Facts {
    let mut f = Facts::default();
    f.tables.insert(name("br-ex"), 200);
    f.tables.insert(name("br-vlan"), 201);
    f.bridge_macs
        .insert(name("br-ex"), "aa:aa:aa:aa:aa:01".parse().unwrap());
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// After every step, the incremental render equals a full render of the same inputs:
    /// objects, skips and their order.
    #[test]
    fn equals_a_full_render(steps in prop::collection::vec(step(), 1..60)) {
        let settings = settings();
        let mut facts = initial_facts();
        let mut set = ExposureSet::default();
        let mut incremental = IncrementalRender::default();
        for (i, s) in steps.iter().enumerate() {
            apply(&mut set, &mut facts, s);
            let shared = Arc::new(set.clone());
            let got = incremental.render(&settings, &facts, &shared);
            let want = render(&settings, &facts, &set);
            prop_assert_eq!(&got.system, &want.system, "step {}: {:?}", i, s);
            prop_assert_eq!(&got.skipped, &want.skipped, "step {}: {:?}", i, s);
        }
    }
}

fn fip(i: u32) -> ExposedIp {
    let addr: IpAddr = format!("172.24.{}.{}", 4 + i / 256, i % 256)
        .parse()
        .unwrap();
    let mut e = ExposedIp::announced(addr, ExposureKind::FloatingIp, format!("fip-{i}"));
    e.provider = Some(provider(0));
    e.lladdr = Some("fa:16:3e:00:00:01".parse().unwrap());
    e
}

/// An event that adds one IP next to many renders that IP only, and one that changes what
/// every exposure depends on (a bridge's table) renders them all again.
#[test]
fn one_more_ip_renders_one_exposure() {
    let settings = settings();
    let mut facts = initial_facts();
    let mut set = ExposureSet::default();
    for i in 0..1000 {
        set.expose_ip(fip(i));
    }
    let mut incremental = IncrementalRender::default();
    incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(
        incremental.stats(),
        RenderStats {
            full: true,
            exposures_rendered: 1000
        }
    );

    set.expose_ip(fip(1000));
    let got = incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(
        incremental.stats(),
        RenderStats {
            full: false,
            exposures_rendered: 1
        }
    );
    assert_eq!(got, render(&settings, &facts, &set));

    // A changed IP is taken out and put back: one exposure, counted once per side.
    let mut moved = fip(7);
    moved.lladdr = Some("fa:16:3e:00:00:02".parse().unwrap());
    let global = set.scopes.get_mut(&ScopeId::Global).unwrap();
    global.ips.insert(moved.ip, moved.into());
    let got = incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(incremental.stats().exposures_rendered, 2);
    assert!(!incremental.stats().full);
    assert_eq!(got, render(&settings, &facts, &set));

    facts.tables.insert(name("br-ex"), 250);
    let got = incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert!(incremental.stats().full);
    assert_eq!(got, render(&settings, &facts, &set));
}
