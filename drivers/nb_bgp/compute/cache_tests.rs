//! The per-root cache of the NB computation ([`ExposureCache`]) against a computation from
//! scratch: random sequences of row changes in a small world where names, ports, routers,
//! gateways, NAT rules and load balancers refer to each other (or to nothing), under every
//! exposing method and tenant mode.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::caps::frr::values::Asn;
use crate::ovn::nb::model::{
    DhcpOptions, LOCALNET, LoadBalancer, LogicalRouter, LogicalSwitch, Lrp, Lsp, Nat, NbGlobal,
    NbModel,
};
use crate::ovn::neutron::{DEVICE_OWNER_ROUTER_INTERFACE, keys};

/// One row change: `table` 0..=7 upserts a row of that table built from `b`, 8 removes one.
#[derive(Debug, Clone)]
struct Step {
    table: u8,
    b: [u8; 8],
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..9, any::<[u8; 8]>()).prop_map(|(table, b)| Step { table, b })
}

fn pick<'a>(choices: &[&'a str], i: u8) -> &'a str {
    choices[usize::from(i) % choices.len()]
}

fn map(entries: &[(&str, String)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn apply(m: &mut NbModel, s: &Step) {
    let b = s.b;
    match s.table {
        0 => {
            let slot = b[0] % 8;
            let kind = pick(&["", "", LOCALNET, "router", VIRTUAL], b[2]);
            let addresses = match b[3] % 5 {
                0 => vec![format!("fa:16:3e:00:00:0{slot} 172.24.4.{}", 10 + slot)],
                1 => vec![format!("fa:16:3e:00:00:0{slot} 10.0.0.{}", 10 + slot)],
                2 => vec!["unknown".to_owned()],
                3 => vec!["garbage here".to_owned()],
                _ => vec![],
            };
            let cidrs = match b[6] & 3 {
                1 => format!("10.0.0.{}/24", 10 + slot),
                2 => format!("172.24.4.{}/24", 10 + slot),
                3 => "10.0.0.1/24".to_owned(),
                _ => String::new(),
            };
            let rif = b[6] & 4 != 0;
            let mut options = map(&[(
                keys::REQUESTED_CHASSIS,
                pick(&["node1", "node2", "node1,node2", ""], b[4]).to_owned(),
            )]);
            if kind == LOCALNET {
                options.insert(
                    "network_name".into(),
                    pick(&["public", "other", "nowhere"], b[7]).into(),
                );
            }
            m.upsert_lsp(Lsp {
                uuid: format!("p{slot}"),
                name: pick(
                    &["vm0", "vm1", "vm2", "ln0", "rif0", "rif1", "vip0", "vm0"],
                    b[1],
                )
                .into(),
                port_type: kind.into(),
                addresses,
                options,
                up: [Some(true), Some(true), Some(false), None][usize::from(b[5] % 4)],
                tag: (b[7] & 8 != 0).then_some(100),
                tag_request: None,
                external_ids: map(&[
                    (keys::CIDRS, cidrs),
                    (
                        keys::DEVICE_OWNER,
                        if rif {
                            DEVICE_OWNER_ROUTER_INTERFACE
                        } else {
                            ""
                        }
                        .into(),
                    ),
                    (
                        keys::DEVICE_ID,
                        if rif {
                            pick(&["r0", "r1"], b[6] >> 3)
                        } else {
                            ""
                        }
                        .into(),
                    ),
                    (
                        keys::PORT_FIP,
                        if b[6] & 16 != 0 {
                            format!("172.24.4.{}", 100 + slot)
                        } else {
                            String::new()
                        },
                    ),
                    (
                        keys::HOST_ID,
                        if b[6] & 32 != 0 { "node1" } else { "" }.into(),
                    ),
                ]),
            });
        }
        1 => {
            let slot = b[0] % 4;
            let evpn = match b[3] % 4 {
                1 => vec![(keys::BGPVPN_TYPE, "l3"), (keys::BGPVPN_VNI, "100")],
                2 => vec![(keys::BGPVPN_TYPE, "l3"), (keys::BGPVPN_VNI, "101")],
                3 => vec![(keys::BGPVPN_TYPE, "l3")],
                _ => vec![],
            };
            m.upsert_switch(LogicalSwitch {
                uuid: format!("sw{slot}"),
                name: pick(
                    &[
                        "neutron-pub",
                        "neutron-pub2",
                        "neutron-t1",
                        "neutron-t2",
                        "neutron-pub",
                    ],
                    b[1],
                )
                .into(),
                ports: (0..8)
                    .filter(|i| b[2] & (1 << i) != 0)
                    .map(|i| format!("p{i}"))
                    .collect(),
                external_ids: evpn
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            });
        }
        2 => {
            let slot = b[0] % 3;
            m.upsert_router(LogicalRouter {
                uuid: format!("lr{slot}"),
                name: pick(&["neutron-r0", "neutron-r1", "junk"], b[1]).into(),
                ports: (0..4)
                    .filter(|i| b[2] & (1 << i) != 0)
                    .map(|i| format!("lrp{i}"))
                    .collect(),
                nat: (0..6)
                    .filter(|i| b[3] & (1 << i) != 0)
                    .map(|i| format!("nat{i}"))
                    .collect(),
            });
        }
        3 => {
            let slot = b[0] % 4;
            let networks = match b[3] % 4 {
                0 => vec![format!("172.24.4.{}/24", 1 + slot)],
                1 => vec!["172.24.4.1/24".into(), "2001:db8::1/64".into()],
                2 => vec![],
                _ => vec!["junk".into()],
            };
            m.upsert_lrp(Lrp {
                uuid: format!("lrp{slot}"),
                name: pick(&["lrp-a", "lrp-b", "lrp-c", "lrp-a"], b[1]).into(),
                mac: if b[2] % 4 == 3 {
                    "bad".into()
                } else {
                    format!("fa:16:3e:00:02:0{slot}")
                },
                networks,
                external_ids: map(&[
                    (
                        keys::NETWORK_NAME,
                        pick(&["neutron-pub", "neutron-pub2", "neutron-t1", ""], b[4]).into(),
                    ),
                    (
                        keys::ROUTER_NAME,
                        pick(&["", "neutron-r0", "", "neutron-r1"], b[5]).into(),
                    ),
                ]),
                status: map(&[(
                    keys::HOSTING_CHASSIS,
                    pick(&["sys-1", "sys-1", "sys-2", ""], b[6]).into(),
                )]),
            });
        }
        4 => {
            let slot = b[0] % 6;
            m.upsert_nat(Nat {
                uuid: format!("nat{slot}"),
                nat_type: if b[1].is_multiple_of(3) {
                    SNAT
                } else {
                    DNAT_AND_SNAT
                }
                .into(),
                external_ip: match b[2] % 3 {
                    0 => format!("172.24.4.{}", 100 + slot),
                    1 => "172.24.4.100".into(),
                    _ => "bad".into(),
                },
                external_mac: match b[5] % 3 {
                    0 => String::new(),
                    1 => format!("fa:16:3e:00:03:0{slot}"),
                    _ => "zz".into(),
                },
                logical_ip: pick(&["10.0.0.10", "10.0.0.0/24"], b[3]).into(),
                logical_port: pick(&["vm0", "vm1", "", ""], b[4]).into(),
                gateway_port: [None, Some("lrp0"), Some("lrp1"), Some("lrp2")]
                    [usize::from(b[6] % 4)]
                .map(str::to_owned),
                external_ids: map(&[(
                    keys::FIP_NETWORK_ID,
                    pick(&["", "pub", "pub2", "t1"], b[7]).into(),
                )]),
            });
        }
        5 => {
            let slot = b[0] % 3;
            let router = pick(&["neutron-r0", "neutron-r1"], b[2]).to_owned();
            let lb = if b[1].is_multiple_of(2) {
                LoadBalancer {
                    uuid: format!("lb{slot}"),
                    name: format!("{PF_LB_PREFIX}{slot}"),
                    vips: map(&[(
                        if b[3] % 3 == 2 {
                            "x".to_owned()
                        } else {
                            format!("172.24.4.{}:22", 200 + slot)
                        }
                        .as_str(),
                        "10.0.0.10:22".into(),
                    )]),
                    external_ids: map(&[(keys::ROUTER_NAME, router)]),
                }
            } else {
                LoadBalancer {
                    uuid: format!("lb{slot}"),
                    name: format!("lb-{slot}"),
                    vips: BTreeMap::new(),
                    external_ids: map(&[
                        (keys::LB_LR_REF, router),
                        (
                            keys::LB_VIP,
                            match b[3] % 3 {
                                0 => format!("10.0.0.{}", 50 + slot),
                                1 => format!("172.24.4.{}", 50 + slot),
                                _ => "bad".into(),
                            },
                        ),
                        (
                            keys::LB_VIP_PORT_ID,
                            pick(&["vip0", "vm1", ""], b[4]).into(),
                        ),
                        (
                            keys::LB_VIP_FIP,
                            if b[5] & 1 != 0 {
                                format!("172.24.4.{}", 210 + slot)
                            } else {
                                String::new()
                            },
                        ),
                    ]),
                }
            };
            m.upsert_lb(lb);
        }
        6 => m.upsert_nb_global(NbGlobal {
            uuid: "g0".into(),
            external_ids: map(&[(
                keys::FIP_DISTRIBUTED,
                pick(&["True", "False", "", "bad"], b[0]).into(),
            )]),
        }),
        7 => {
            let slot = b[0] % 2;
            m.upsert_dhcp_options(DhcpOptions {
                uuid: format!("d{slot}"),
                cidr: pick(&["172.24.4.0/24", "2001:db8::/64", "bad"], b[1]).into(),
                options: map(&[(keys::DHCP_ROUTER, pick(&["172.24.4.1", ""], b[2]).into())]),
                external_ids: map(&[(keys::NETWORK_ID, pick(&["pub", "pub2"], b[3]).into())]),
            });
        }
        _ => {
            let n = b[1];
            match b[0] % 8 {
                0 => m.remove_lsp(&format!("p{}", n % 8)),
                1 => m.remove_switch(&format!("sw{}", n % 4)),
                2 => m.remove_router(&format!("lr{}", n % 3)),
                3 => m.remove_lrp(&format!("lrp{}", n % 4)),
                4 => m.remove_nat(&format!("nat{}", n % 6)),
                5 => m.remove_lb(&format!("lb{}", n % 3)),
                6 => m.remove_nb_global("g0"),
                _ => m.remove_dhcp_options(&format!("d{}", n % 2)),
            }
        }
    }
}

fn local() -> LocalChassis {
    LocalChassis {
        hostname: "node1".into(),
        system_id: "sys-1".into(),
        bridge_mappings: vec![
            ("public".into(), "br-ex".into()),
            ("other".into(), "br-other".into()),
        ],
    }
}

fn options(method: u8, tenant: bool, subnet: bool, snat: bool) -> NbOptions {
    NbOptions {
        tenant: TenantOptions {
            expose_tenant_networks: tenant,
            ..Default::default()
        },
        advertisement: if subnet {
            TenantAdvertisement::Subnet
        } else {
            TenantAdvertisement::Host
        },
        require_snat_disabled_for_tenant_networks: snat,
        method: if method.is_multiple_of(2) {
            ExposingMethod::Underlay
        } else {
            ExposingMethod::Vrf
        },
        bgp_as: Asn::new(64999).ok(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_cache_always_equals_a_computation_from_scratch(
        steps in prop::collection::vec(step(), 1..80),
        method in any::<u8>(),
        tenant in any::<bool>(),
        subnet in any::<bool>(),
        snat in any::<bool>(),
        hosted in any::<bool>(),
    ) {
        let mut model = NbModel::default();
        let local = local();
        let options = options(method, tenant, subnet, snat);
        let hosted = hosted.then(|| BTreeSet::from(["lrp-a".to_owned(), "lrp-c".to_owned()]));
        let mut cache = ExposureCache::default();
        for (i, s) in steps.iter().enumerate() {
            apply(&mut model, s);
            // Not after every step: several changes may be pending, as in a batch.
            if i % 3 == 2 {
                continue;
            }
            // Now and then as after the model forgot what changed: every root's reads are
            // checked.
            if i % 7 == 6 {
                cache.readers.lose_track();
            }
            let cached = cache.compute(&model, &local, &options, hosted.as_ref());
            let fresh = compute(&model, &local, &options, hosted.as_ref());
            prop_assert_eq!(cached, fresh, "after step {}: {:?}", i, s);
        }
    }
}

/// A gateway with `fips` centralized FIPs, and a provider VM bound here.
fn busy_model(fips: u8) -> NbModel {
    let mut m = NbModel::default();
    let mut ln = Lsp {
        uuid: "ln".into(),
        name: "provnet".into(),
        port_type: LOCALNET.into(),
        ..Default::default()
    };
    ln.options.insert("network_name".into(), "public".into());
    m.upsert_lsp(ln);
    m.upsert_switch(LogicalSwitch {
        uuid: "sw-pub".into(),
        name: "neutron-pub".into(),
        ports: vec!["ln".into(), "vm".into()],
        ..Default::default()
    });
    m.upsert_lrp(Lrp {
        uuid: "lrp0".into(),
        name: "lrp-gw".into(),
        mac: "fa:16:3e:00:02:01".into(),
        networks: vec!["172.24.4.1/24".into()],
        external_ids: map(&[(keys::NETWORK_NAME, "neutron-pub".into())]),
        status: map(&[(keys::HOSTING_CHASSIS, "sys-1".into())]),
    });
    m.upsert_router(LogicalRouter {
        uuid: "lr0".into(),
        name: "neutron-r0".into(),
        ports: vec!["lrp0".into()],
        nat: (0..fips).map(|i| format!("nat{i}")).collect(),
    });
    for i in 0..fips {
        m.upsert_nat(Nat {
            uuid: format!("nat{i}"),
            nat_type: DNAT_AND_SNAT.into(),
            external_ip: format!("172.24.5.{i}"),
            logical_ip: format!("10.0.0.{i}"),
            ..Default::default()
        });
    }
    m.upsert_nb_global(NbGlobal {
        uuid: "g0".into(),
        external_ids: map(&[(keys::FIP_DISTRIBUTED, "False".into())]),
    });
    m
}

fn provider_vm(up: bool) -> Lsp {
    Lsp {
        uuid: "vm".into(),
        name: "vm0".into(),
        addresses: vec!["fa:16:3e:00:00:10 172.24.4.10".into()],
        options: map(&[(keys::REQUESTED_CHASSIS, "node1".into())]),
        up: Some(up),
        ..Default::default()
    }
}

/// Binding a VM on a gateway recomputes that VM's port alone, not the gateway's FIPs; a new
/// FIP of the router recomputes its gateway, not the VM.
#[test]
fn an_event_recomputes_only_the_roots_it_touched() {
    let mut model = busy_model(50);
    model.upsert_lsp(provider_vm(false));
    let local = local();
    let options = options(0, true, false, false);
    let mut cache = ExposureCache::default();
    let before = cache.compute(&model, &local, &options, None);
    assert_eq!(before.global().ips.len(), 51, "{before:?}");
    assert_eq!(
        cache.last_stats(),
        CacheStats {
            roots: 3,
            recomputed: 3
        }
    );

    model.upsert_lsp(provider_vm(true));
    let after = cache.compute(&model, &local, &options, None);
    assert_eq!(after.global().ips.len(), 52);
    assert_eq!(
        cache.last_stats(),
        CacheStats {
            roots: 3,
            recomputed: 1
        },
        "the VM's port alone"
    );
    assert_eq!(after, compute(&model, &local, &options, None));

    model.upsert_nat(Nat {
        uuid: "nat-new".into(),
        nat_type: DNAT_AND_SNAT.into(),
        external_ip: "172.24.6.1".into(),
        logical_ip: "10.0.0.99".into(),
        ..Default::default()
    });
    let mut router = model.router("lr0").cloned().unwrap();
    router.nat.push("nat-new".into());
    model.upsert_router(router);
    let after = cache.compute(&model, &local, &options, None);
    assert!(
        after
            .global()
            .ips
            .contains_key(&"172.24.6.1".parse::<std::net::IpAddr>().unwrap())
    );
    assert_eq!(
        cache.last_stats(),
        CacheStats {
            roots: 3,
            recomputed: 1
        },
        "the gateway alone: neither the VM nor the router's tenant side read the NAT rules"
    );
    assert_eq!(after, compute(&model, &local, &options, None));

    // What every root depends on (the FIP mode) recomputes them all.
    model.upsert_nb_global(NbGlobal {
        uuid: "g0".into(),
        external_ids: map(&[(keys::FIP_DISTRIBUTED, "True".into())]),
    });
    let after = cache.compute(&model, &local, &options, None);
    assert_eq!(cache.last_stats().recomputed, 3);
    assert_eq!(after, compute(&model, &local, &options, None));
}

/// Router `router`'s interface port (uuid `rif`) on 10.0.0.1/24.
fn router_interface(name: &str, router: &str, up: bool) -> Lsp {
    Lsp {
        uuid: "rif".into(),
        name: name.into(),
        port_type: "router".into(),
        up: Some(up),
        external_ids: map(&[
            (keys::CIDRS, "10.0.0.1/24".into()),
            (keys::DEVICE_OWNER, DEVICE_OWNER_ROUTER_INTERFACE.into()),
            (keys::DEVICE_ID, router.into()),
        ]),
        ..Default::default()
    }
}

/// An Octavia VIP on a tenant network is exposed while a tenant subnet holding it is, even
/// one of another router computed before its own: that router's root is recomputed when the
/// subnets before it change, though nothing it read did.
#[test]
fn a_load_balancer_follows_the_tenant_subnets_of_the_routers_before_it() {
    let mut model = busy_model(0);
    for (r, lrp) in [("r0", "lrp-a"), ("r1", "lrp-b")] {
        model.upsert_lrp(Lrp {
            uuid: format!("{lrp}-uuid"),
            name: lrp.into(),
            mac: "fa:16:3e:00:02:02".into(),
            networks: vec![format!("172.24.4.{}/24", if r == "r0" { 2 } else { 3 })],
            external_ids: map(&[
                (keys::NETWORK_NAME, "neutron-pub".into()),
                (keys::ROUTER_NAME, format!("neutron-{r}")),
            ]),
            status: map(&[(keys::HOSTING_CHASSIS, "sys-1".into())]),
        });
    }
    model.remove_lrp("lrp0");
    model.upsert_lsp(Lsp {
        uuid: "vip".into(),
        name: "vip0".into(),
        ..Default::default()
    });
    model.upsert_lb(LoadBalancer {
        uuid: "lb".into(),
        name: "lb-octavia".into(),
        vips: BTreeMap::new(),
        external_ids: map(&[
            (keys::LB_LR_REF, "neutron-r1".into()),
            (keys::LB_VIP, "10.0.0.50".into()),
            (keys::LB_VIP_PORT_ID, "vip0".into()),
        ]),
    });
    let rif = |up: bool| router_interface("rif0", "r0", up);
    let local = local();
    let options = options(0, true, false, false);
    let vip: std::net::IpAddr = "10.0.0.50".parse().unwrap();
    let mut cache = ExposureCache::default();
    for up in [false, true, false] {
        model.upsert_lsp(rif(up));
        let set = cache.compute(&model, &local, &options, None);
        assert_eq!(set.global().ips.contains_key(&vip), up, "rif up: {up}");
        assert_eq!(set, compute(&model, &local, &options, None));
    }
}

/// Rows OVN would refuse but a hostile or transient Northbound may hold: a NAT rule listed by
/// two routers, a port listed by two switches. A change of the shared row reaches the
/// computations of both, not only of the one the model's index resolves it to.
#[test]
fn a_row_shared_by_two_parents_updates_both() {
    let mut model = busy_model(0);
    let local = local();
    let options = options(0, true, false, false);
    // Two routers with a gateway here each, both listing nat-shared; router r1 also has a
    // tenant switch holding vm-shared, which a second switch lists too.
    for r in ["r0", "r1"] {
        model.upsert_lrp(Lrp {
            uuid: format!("lrp-{r}"),
            name: format!("lrp-{r}"),
            mac: "fa:16:3e:00:02:09".into(),
            networks: vec![
                if r == "r0" {
                    "172.24.4.2/24"
                } else {
                    "172.24.4.3/24"
                }
                .into(),
            ],
            external_ids: map(&[(keys::NETWORK_NAME, "neutron-pub".into())]),
            status: map(&[(keys::HOSTING_CHASSIS, "sys-1".into())]),
        });
        model.upsert_router(LogicalRouter {
            uuid: format!("lr-{r}"),
            name: format!("neutron-{r}"),
            ports: vec![format!("lrp-{r}")],
            nat: vec!["nat-shared".into()],
        });
    }
    let nat = |ip: &str| Nat {
        uuid: "nat-shared".into(),
        nat_type: DNAT_AND_SNAT.into(),
        external_ip: ip.into(),
        logical_ip: "10.0.0.5".into(),
        ..Default::default()
    };
    model.upsert_nat(nat("172.24.6.1"));
    model.upsert_lsp(router_interface("rif-r1", "r1", true));
    let vm = |up: bool| Lsp {
        uuid: "vm-shared".into(),
        name: "vm-shared".into(),
        addresses: vec!["fa:16:3e:00:00:20 10.0.0.20".into()],
        options: map(&[(keys::REQUESTED_CHASSIS, "elsewhere".into())]),
        up: Some(up),
        ..Default::default()
    };
    model.upsert_lsp(vm(false));
    model.upsert_switch(LogicalSwitch {
        uuid: "ls-t1".into(),
        name: "neutron-t1".into(),
        ports: vec!["rif".into(), "vm-shared".into()],
        ..Default::default()
    });
    model.upsert_switch(LogicalSwitch {
        uuid: "ls-other".into(),
        name: "neutron-other".into(),
        ports: vec!["vm-shared".into()],
        ..Default::default()
    });
    let mut cache = ExposureCache::default();
    let set = cache.compute(&model, &local, &options, None);
    assert_eq!(set, compute(&model, &local, &options, None));

    model.upsert_nat(nat("172.24.6.2"));
    model.upsert_lsp(vm(true));
    let set = cache.compute(&model, &local, &options, None);
    assert_eq!(set, compute(&model, &local, &options, None));
    let ips = &set.global().ips;
    assert!(
        ips.contains_key(&"172.24.6.2".parse::<std::net::IpAddr>().unwrap()),
        "{ips:?}"
    );
    assert!(
        !ips.contains_key(&"172.24.6.1".parse::<std::net::IpAddr>().unwrap()),
        "{ips:?}"
    );
    assert!(
        ips.contains_key(&"10.0.0.20".parse::<std::net::IpAddr>().unwrap()),
        "{ips:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The Northbound monitor conditions, made again only when a lookup they were made from
    /// changed, are always those made from scratch: through random row changes (several
    /// pending now and then), every policy, gateways from LRP status or from the Southbound,
    /// and a policy changed midway.
    #[test]
    fn the_wanted_conditions_always_equal_those_made_from_scratch(
        steps in prop::collection::vec(step(), 1..80),
        flags in any::<[bool; 5]>(),
        hosted in any::<bool>(),
        flip_at in any::<u8>(),
    ) {
        use crate::ovn::nb::condition::{NbConditionPolicy, WantedConditions, monitor_conditions};
        let mut model = NbModel::default();
        let local = local();
        let mut policy = NbConditionPolicy {
            lrp_status: flags[0],
            follow_tenant_networks: flags[1],
            snat_rules: flags[2],
            all_vm_ports: flags[3],
            evpn: flags[4],
        };
        let hosted = hosted.then(|| BTreeSet::from(["lrp-a".to_owned(), "lrp-c".to_owned()]));
        let mut cache = WantedConditions::default();
        for (i, s) in steps.iter().enumerate() {
            apply(&mut model, s);
            if i % 3 == 2 {
                continue;
            }
            if i == usize::from(flip_at) % steps.len() {
                policy.follow_tenant_networks = !policy.follow_tenant_networks;
            }
            // The index of the ports with a FIP is the ports listing a host, filtered.
            for host in ["node1", "node2"] {
                let fips: Vec<&str> =
                    model.fip_ports_listing_host(host).iter().map(|p| p.uuid.as_str()).collect();
                let listing: Vec<&str> = model
                    .ports_listing_host(host)
                    .iter()
                    .filter(|p| p.external_ids.contains_key(keys::PORT_FIP))
                    .map(|p| p.uuid.as_str())
                    .collect();
                prop_assert_eq!(fips, listing, "after step {}: {:?}", i, s);
            }
            let cached = cache
                .conditions(
                    &policy,
                    &model,
                    &local.system_id,
                    &local.hostname,
                    &local.bridge_mappings,
                    hosted.as_ref(),
                )
                .clone();
            let fresh = monitor_conditions(
                &policy.wanted(
                    &model,
                    &local.system_id,
                    &local.hostname,
                    &local.bridge_mappings,
                    hosted.as_ref(),
                ),
                policy.evpn,
            );
            prop_assert_eq!(cached, fresh, "after step {}: {:?}", i, s);
        }
    }
}
