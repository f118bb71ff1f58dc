//! The incremental EVPN render against a full render of the same inputs, after every step of
//! random sequences of changes: IPs of every flavour (tenant addresses on `lo-<vni>`, gateway
//! addresses with a neighbour and NDP proxies shared between IPs, routed IPs, IPs of a network
//! no port attaches), scopes coming and going with their parameters and attachments (router
//! gateways flat or tagged, localnet ports, a hostile port uuid), subnets, routes, the global
//! scope, and the facts (the VTEP address, refused tables, retained VRFs).

use std::net::IpAddr;

use ipnet::IpNet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::caps::frr::values::Asn;
use crate::exposure::{
    BridgeWiring, EvpnAttachment, EvpnParams, ExposedIp, ExposedRoute, ExposedSubnet, ExposureKind,
    LocalnetAttachment, ProviderNetwork, RouteKind,
};
use crate::system::LinkKind;
use crate::types::InterfaceName;

use super::super::render::render;

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

fn settings(vrf_is_bridge: bool, delete_vrf_on_disconnect: bool) -> VrfSettings {
    VrfSettings {
        vrf_is_bridge,
        loopback_kind: LinkKind::Dummy,
        udp_dstport: 4789,
        delete_vrf_on_disconnect,
    }
}

fn vni(b: u8) -> Vni {
    Vni::new(100 + u32::from(b % 2)).unwrap()
}

fn provider(b: u8) -> ProviderNetwork {
    ProviderNetwork {
        physnet: Arc::from(["public", "vlans"][usize::from(b % 2)]),
        bridge: name(["br-ex", "br-vlan"][usize::from(b % 2)]),
        vlan: (b & 2 != 0).then_some(100),
        evpn: None,
    }
}

/// A few IPs of each family, so that changes hit the same keys again.
fn ip(i: u8) -> IpAddr {
    match i % 8 {
        0..=3 => format!("10.0.0.{}", 10 + i % 8).parse().unwrap(),
        _ => format!("2001:db8::{}", 10 + i % 8).parse().unwrap(),
    }
}

fn attachment(b: u8) -> EvpnAttachment {
    if b & 1 == 0 {
        EvpnAttachment::RouterGateway {
            provider: provider(b >> 1),
        }
    } else {
        EvpnAttachment::Localnet(LocalnetAttachment {
            provider: provider(b >> 1),
            // One uuid cannot name a device: its scope is refused.
            port_uuid: [
                "6a1b2c3d-0000-4000-8000-000000000001",
                "6a1b2c3d-0000",
                "zz",
            ][usize::from((b >> 3) % 3)]
            .to_owned(),
            port_name: format!("ln-{}", (b >> 2) % 2),
            gateway_addresses: [format!("10.0.{}.1/24", (b >> 4) % 2).parse().unwrap()].into(),
            nd_prefixes: Default::default(),
        })
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
    match s.what {
        // Upsert an IP (the most common event).
        0..=3 => {
            let addr = ip(b[0]);
            let mut exposed = ExposedIp::announced(
                addr,
                [ExposureKind::TenantPort, ExposureKind::GatewayPort][usize::from(b[1] % 2)],
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
            }
            if b[1] & 16 != 0 && b[5].is_multiple_of(3) {
                exposed.via = Some("10.0.0.1".parse().unwrap());
            }
            set.scope_mut(ScopeId::Evpn(vni(b[5])))
                .ips
                .insert(addr, exposed.into());
        }
        4 | 5 => {
            if let Some(scope) = set.scopes.get_mut(&ScopeId::Evpn(vni(b[5]))) {
                scope.ips.remove(&ip(b[0]));
            }
        }
        6 => {
            // A scope's parameters: set, changed, one more attachment, or gone.
            let id = ScopeId::Evpn(vni(b[0]));
            match b[1] % 5 {
                0 => {
                    set.scopes.remove(&id);
                }
                1 => {
                    set.scope_mut(id).evpn = None;
                }
                n => {
                    let scope = set.scope_mut(id);
                    let params = scope.evpn.get_or_insert_with(|| {
                        EvpnParams::new(vni(b[0]), Asn::new(64999).unwrap())
                    });
                    if n == 2 {
                        params.attachments.clear();
                    }
                    params.attachments.insert(attachment(b[2]));
                    if n == 4 {
                        params.bgp_as = Asn::new(65000 + u32::from(b[3] % 2)).unwrap();
                    }
                }
            }
        }
        7 => {
            let subnet = ExposedSubnet {
                router_ip: ["192.168.0.1/24", "2001:db8:5::1/64"][usize::from(b[0] % 2)]
                    .parse()
                    .unwrap(),
                via: ip(b[1]),
                provider: provider(b[2]),
                source: format!("lrp-{}", b[3] % 2),
            };
            let scope = set.scope_mut(ScopeId::Evpn(vni(b[5])));
            if b[4].is_multiple_of(2) {
                scope.subnets.insert(subnet);
            } else {
                scope.subnets.remove(&subnet);
            }
        }
        8 => {
            let prefix: IpNet = ["10.9.0.0/24", "2001:db8:9::/64"][usize::from(b[0] % 2)]
                .parse()
                .unwrap();
            let scope = set.scope_mut(ScopeId::Evpn(vni(b[5])));
            if b[1].is_multiple_of(3) {
                scope.routes.remove(&prefix);
            } else {
                scope.expose_route(ExposedRoute {
                    prefix,
                    kind: RouteKind::TenantSubnet,
                    via: (b[2] & 1 != 0).then(|| "10.0.0.1".parse().unwrap()),
                    provider: (b[2] & 2 != 0).then(|| provider(b[3])),
                    source: "router".to_owned(),
                });
            }
        }
        9 => {
            // The facts the system tells: the VTEP address, a refused table.
            match b[0] % 4 {
                0 => {
                    facts.vtep = None;
                    facts.vtep_problem = Some("no address on lo".to_owned());
                }
                1 => {
                    facts.vtep = Some("192.0.2.10".parse().unwrap());
                    facts.vtep_problem = None;
                }
                2 => {
                    let table = vni(b[1]).get();
                    if facts.refused_tables.remove(&table).is_none() {
                        facts
                            .refused_tables
                            .insert(table, "rt_tables says main".into());
                    }
                }
                _ => {
                    let v = vni(b[1]);
                    if facts.retained.remove(&v).is_none() {
                        facts
                            .retained
                            .insert(v, EvpnParams::new(v, Asn::new(64999).unwrap()));
                        facts.claimed_tables.insert(v.get());
                    }
                }
            }
        }
        10 => {
            let bridge = name(["br-ex", "br-vlan"][usize::from(b[0] % 2)]);
            if b[1].is_multiple_of(3) {
                set.bridges.remove(&bridge);
            } else {
                set.bridges.insert(
                    bridge.clone(),
                    BridgeWiring {
                        bridge,
                        physnets: ["public".to_owned()].into(),
                        vlans: Default::default(),
                        localnet_ports: [format!("provnet-{}", b[2] % 2)].into(),
                        index: 1,
                    },
                );
            }
        }
        _ => {
            // The global scope, which this backend reports and does not realise.
            let addr = ip(b[0]);
            if b[1].is_multiple_of(2) {
                set.expose_ip(ExposedIp::announced(addr, ExposureKind::FloatingIp, "fip"));
            } else {
                set.global_mut().ips.remove(&addr);
            }
        }
    }
}

fn initial_facts() -> Facts {
    Facts {
        vtep: Some("192.0.2.10".parse().unwrap()),
        ..Facts::default()
    }
}

/// Two realised scopes to start from: a router gateway on the flat network, a localnet port
/// on the other.
fn initial_set() -> ExposureSet {
    let mut set = ExposureSet::default();
    for (b, attach) in [(0, 0), (1, 0b11)] {
        let mut params = EvpnParams::new(vni(b), Asn::new(64999).unwrap());
        params.attachments.insert(attachment(attach));
        set.scope_mut(ScopeId::Evpn(vni(b))).evpn = Some(params);
    }
    set
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// After every step, the incremental render equals a full render of the same inputs:
    /// objects, reports and their order.
    #[test]
    fn equals_a_full_render(
        steps in prop::collection::vec(step(), 1..60),
        vrf_is_bridge in any::<bool>(),
        delete_vrf_on_disconnect in any::<bool>(),
    ) {
        let settings = settings(vrf_is_bridge, delete_vrf_on_disconnect);
        let mut facts = initial_facts();
        let mut set = initial_set();
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

/// A gateway's VRF with `n` tenant addresses behind it (SB EVPN).
fn busy_gateway(n: u32) -> ExposureSet {
    let mut set = ExposureSet::default();
    let v = Vni::new(1001).unwrap();
    let scope = set.scope_mut(ScopeId::Evpn(v));
    let mut params = EvpnParams::new(v, Asn::new(64999).unwrap());
    params.attachments.insert(EvpnAttachment::RouterGateway {
        provider: provider(0),
    });
    scope.evpn = Some(params);
    for i in 0..n {
        scope.expose_ip(tenant(i));
    }
    set
}

fn tenant(i: u32) -> ExposedIp {
    let addr: IpAddr = format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)
        .parse()
        .unwrap();
    ExposedIp::announced(addr, ExposureKind::TenantPort, format!("vm-{i}"))
}

/// An event that binds one VM next to many renders that VM only (and not the scope's frame),
/// and one that changes the scope's frame (another attachment) renders its IPs all again.
#[test]
fn one_more_vm_renders_one_ip() {
    let settings = settings(false, true);
    let facts = initial_facts();
    let mut set = busy_gateway(1000);
    let mut incremental = IncrementalRender::default();
    incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(
        incremental.stats(),
        RenderStats {
            full: true,
            ips_rendered: 1000,
            frames_rendered: 1,
        }
    );

    let id = ScopeId::Evpn(Vni::new(1001).unwrap());
    set.scope_mut(id).expose_ip(tenant(5000));
    let got = incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(
        incremental.stats(),
        RenderStats {
            full: false,
            ips_rendered: 1,
            frames_rendered: 0,
        }
    );
    assert_eq!(got, render(&settings, &facts, &set));
    assert_eq!(got.system.addresses.len(), 1001);
    assert_eq!(got.system.suppressed_local_routes.len(), 1001);

    // The same exposures again: nothing rendered, the same state.
    let again = incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(incremental.stats().ips_rendered, 0);
    assert_eq!(again, got);

    set.scope_mut(id)
        .evpn
        .as_mut()
        .unwrap()
        .attachments
        .insert(EvpnAttachment::RouterGateway {
            provider: provider(1),
        });
    let got = incremental.render(&settings, &facts, &Arc::new(set.clone()));
    assert_eq!(incremental.stats().ips_rendered, 1001);
    assert_eq!(incremental.stats().frames_rendered, 1);
    assert_eq!(got, render(&settings, &facts, &set));
}
