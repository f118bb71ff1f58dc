//! Links against the real kernel, in a namespace of the test's own: every kind this kernel
//! has is created (with master, MAC, up), kinds it lacks give the operator's fix, links the
//! agent owns are recreated or deleted, everything else is left alone.

mod netlink_support;

use netlink_support::{TestNetns, ifname, up_link};
use ovn_bgp_agent::caps::netlink::{nic_link_kind, vrf_link_kind};
use ovn_bgp_agent::system::*;
use ovn_bgp_agent::types::MacAddr;

fn vxlan(vni: u32) -> LinkKind {
    LinkKind::Vxlan {
        vni,
        local: Some("10.0.0.1".parse().unwrap()),
        dstport: 4789,
        neigh_suppress: true,
    }
}

/// The links the agent creates are its own through their alias alone: no name is listed.
fn owned_by_marker() -> Ownership {
    Ownership::default()
}

#[tokio::test]
async fn available_kinds_are_created_adjusted_and_owned_ones_removed() {
    let ns = TestNetns::new();
    // Foreign devices: a macvlan named like the agent's links (a kind the agent never creates)
    // and a bridge; neither carries the agent's alias.
    ns.ip(&["link", "add", "other-br", "type", "bridge"]);
    ns.ip(&[
        "link", "add", "tst-mv", "link", "other-br", "type", "macvlan",
    ]);

    let mac: MacAddr = "02:00:00:64:00:00".parse().unwrap();
    let mut d = DesiredSystem {
        ownership: owned_by_marker(),
        ..Default::default()
    };
    d.links.insert(up_link("tst-br", LinkKind::Bridge));
    d.links.insert(up_link("tst-ifb", LinkKind::Ifb));
    d.links.insert(LinkSpec {
        master: Some(ifname("tst-br")),
        mac: Some(mac),
        ..up_link(
            "tst-v0",
            LinkKind::Veth {
                peer: ifname("tst-v1"),
            },
        )
    });
    d.links.insert(LinkSpec {
        master: Some(ifname("tst-br")),
        ..up_link("tst-vx", vxlan(100))
    });

    let r = ns.reconciler();
    let report = r.reconcile(&d).await.expect("reconcile");
    println!("{report:?}");
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(
        report.added.get("links"),
        Some(&4),
        "bridge, ifb, veth pair, vxlan"
    );

    let show = |dev: &str| ns.ip(&["-d", "link", "show", "dev", dev]);
    let br = show("tst-br");
    assert!(br.contains("state UP") || br.contains(",UP"), "{br}");
    assert!(br.contains("bridge"), "{br}");
    assert!(show("tst-ifb").contains("ifb"), "{}", show("tst-ifb"));
    let v0 = show("tst-v0");
    assert!(v0.contains("master tst-br"), "{v0}");
    assert!(v0.contains("link/ether 02:00:00:64:00:00"), "{v0}");
    assert!(v0.contains("veth"), "{v0}");
    assert!(show("tst-v1").contains("veth"), "the peer exists");
    let vx = show("tst-vx");
    assert!(
        vx.contains("vxlan id 100") && vx.contains("local 10.0.0.1") && vx.contains("dstport 4789"),
        "{vx}"
    );
    assert!(vx.contains("master tst-br"), "{vx}");
    assert!(
        vx.contains(" nolearning "),
        "the vxlan device never learns: {vx}"
    );
    assert!(
        vx.contains("neigh_suppress on") && vx.contains(" learning off"),
        "bridge port flags of the NB vrf method: {vx}"
    );

    assert!(
        r.reconcile(&d).await.unwrap().is_noop(),
        "second reconcile is a no-op"
    );

    // Port flags changed by hand are put back.
    ns.ip(&[
        "link",
        "set",
        "tst-vx",
        "type",
        "bridge_slave",
        "neigh_suppress",
        "off",
        "learning",
        "on",
    ]);
    let flags = r.reconcile(&d).await.unwrap();
    assert_eq!(flags.changed.get("links"), Some(&1), "{flags:?}");
    let vx = show("tst-vx");
    assert!(
        vx.contains("neigh_suppress on") && vx.contains(" learning off"),
        "{vx}"
    );

    // A VTEP address change recreates the owned vxlan device with the new local address.
    let mut moved = d.clone();
    retain_objects(&mut moved.links, |l| l.name.as_str() != "tst-vx");
    moved.links.insert(LinkSpec {
        master: Some(ifname("tst-br")),
        ..up_link(
            "tst-vx",
            LinkKind::Vxlan {
                vni: 100,
                local: Some("10.0.0.2".parse().unwrap()),
                dstport: 4789,
                neigh_suppress: true,
            },
        )
    });
    let recreated = r.reconcile(&moved).await.unwrap();
    assert!(recreated.errors.is_empty(), "{:#?}", recreated.errors);
    assert_eq!(recreated.removed.get("links"), Some(&1), "{recreated:?}");
    assert!(
        show("tst-vx").contains("local 10.0.0.2"),
        "{}",
        show("tst-vx")
    );
    assert!(r.reconcile(&d).await.unwrap().errors.is_empty());

    // What the agent exposes on its own (marked) devices is not an address of the host: a
    // restarted agent must not refuse it in its policy stage.
    ns.ip(&["addr", "add", "10.0.0.10/32", "dev", "tst-ifb"]);
    ns.ip(&["addr", "add", "192.0.2.1/24", "dev", "other-br"]);
    let host = r.host_addresses().await.unwrap();
    assert!(
        host.iter()
            .any(|(dev, a)| dev == "other-br" && a.to_string() == "192.0.2.1/24"),
        "{host:?}"
    );
    assert!(!host.iter().any(|(dev, _)| dev == "tst-ifb"), "{host:?}");
    // One device's addresses (the ovn method's fabric bridges, read every few seconds): both
    // families, nothing of the other devices', nothing for a name without a device.
    ns.ip(&["addr", "add", "2001:db8:7::1/64", "dev", "other-br"]);
    ns.ip(&["addr", "add", "10.0.0.11/32", "dev", "tst-ifb"]);
    let mut of = r.addresses_of(&["other-br", "no-such-dev"]).await.unwrap();
    of.retain(|(_, a)| !matches!(a, ipnet::IpNet::V6(v6) if v6.addr().is_unicast_link_local()));
    of.sort();
    assert_eq!(
        of,
        [
            ("other-br".to_owned(), "192.0.2.1/24".parse().unwrap()),
            ("other-br".to_owned(), "2001:db8:7::1/64".parse().unwrap()),
        ],
        "{of:?}"
    );
    let on_nic = r.addresses_of(&["tst-ifb"]).await.unwrap();
    assert!(
        on_nic.iter().all(|(dev, _)| dev == "tst-ifb") && on_nic.len() >= 2,
        "{on_nic:?}"
    );
    // With more devices that are not the agent's than it dumps one by one, the host's
    // addresses come from one dump of every address: the same answer.
    let by_device = r.host_addresses().await.unwrap();
    assert!(
        by_device
            .iter()
            .any(|(dev, a)| dev == "other-br" && a.to_string() == "2001:db8:7::1/64"),
        "{by_device:?}"
    );
    for i in 0..=ovn_bgp_agent::caps::netlink::HOST_DEVICE_DUMPS_MAX {
        ns.ip(&["link", "add", &format!("many{i}"), "type", "ifb"]);
    }
    ns.ip(&["addr", "add", "192.0.2.77/32", "dev", "many3"]);
    let dumped = r.host_addresses().await.unwrap();
    let mut expected = by_device.clone();
    expected.push(("many3".to_owned(), "192.0.2.77/32".parse().unwrap()));
    let sorted = |mut v: Vec<(String, ipnet::IpNet)>| {
        v.sort();
        v
    };
    assert_eq!(sorted(dumped), sorted(expected));
    for i in 0..=ovn_bgp_agent::caps::netlink::HOST_DEVICE_DUMPS_MAX {
        ns.ip(&["link", "del", &format!("many{i}")]);
    }

    // State drift: a link set down, a master removed: put back, counted as changes.
    ns.ip(&["link", "set", "tst-ifb", "down"]);
    ns.ip(&["link", "set", "tst-v0", "nomaster"]);
    let repaired = r.reconcile(&d).await.unwrap();
    assert_eq!(repaired.changed.get("links"), Some(&2), "{repaired:?}");
    assert!(show("tst-v0").contains("master tst-br"));

    // An owned link with the wrong parameters is recreated.
    let mut d2 = d.clone();
    retain_objects(&mut d2.links, |l| l.name.as_str() != "tst-vx");
    d2.links.insert(LinkSpec {
        master: Some(ifname("tst-br")),
        ..up_link("tst-vx", vxlan(200))
    });
    let recreated = r.reconcile(&d2).await.unwrap();
    assert!(recreated.errors.is_empty(), "{:#?}", recreated.errors);
    assert_eq!(recreated.removed.get("links"), Some(&1), "{recreated:?}");
    assert_eq!(recreated.added.get("links"), Some(&1), "{recreated:?}");
    assert!(show("tst-vx").contains("vxlan id 200"));

    // A link the agent did not create with the wrong parameters is reported and left as is.
    ns.ip(&[
        "link", "add", "ext-vx", "type", "vxlan", "id", "300", "dstport", "4789", "local",
        "10.0.0.1",
    ]);
    let mut d3 = d2.clone();
    d3.links.insert(up_link("ext-vx", vxlan(301)));
    let refused = r.reconcile(&d3).await.unwrap();
    assert_eq!(refused.errors.len(), 1, "{:#?}", refused.errors);
    assert!(
        refused.errors[0].error.contains("not owned by the agent"),
        "{}",
        refused.errors[0]
    );
    assert!(show("ext-vx").contains("vxlan id 300"));

    // Nothing desired: the agent's links go (one delete takes the veth pair), the rest stays.
    let cleaned = r
        .reconcile(&DesiredSystem {
            ownership: owned_by_marker(),
            ..Default::default()
        })
        .await
        .unwrap();
    println!("{cleaned:?}");
    assert!(cleaned.errors.is_empty(), "{:#?}", cleaned.errors);
    assert_eq!(cleaned.removed.get("links"), Some(&4), "{cleaned:?}");
    let all = ns.ip(&["link", "show"]);
    for gone in ["tst-br", "tst-ifb", "tst-v0", "tst-v1", "tst-vx"] {
        assert!(
            !all.contains(&format!(" {gone}:")) && !all.contains(&format!(" {gone}@")),
            "{gone} left: {all}"
        );
    }
    for kept in ["tst-mv@other-br", "other-br:", "ext-vx:"] {
        assert!(all.contains(kept), "{kept} deleted: {all}");
    }
}

/// vrf, dummy and vlan: created where the kernel has them, otherwise the error names the fix.
/// The branch taken is printed.
#[tokio::test]
async fn kinds_the_kernel_may_lack_are_created_or_give_the_fix() {
    let ns = TestNetns::new();
    let r = ns.reconciler();
    assert!(r.link_kind_supported("bridge").await.unwrap());
    assert!(!r.link_kind_supported("nosuchkind").await.unwrap());
    let cases = [
        (
            up_link("bgp-vrf", vrf_link_kind("vrf", 10).unwrap()),
            "vrf",
            "cannot create bgp-vrf of kind vrf: the kernel has no vrf support (modprobe vrf, or set [linux] vrf_device_kind = bridge)",
        ),
        (
            up_link("bgp-nic", nic_link_kind("dummy").unwrap()),
            "dummy",
            "cannot create bgp-nic of kind dummy: the kernel has no dummy support (modprobe dummy, or set [linux] nic_device_kind = ifb)",
        ),
        (
            up_link(
                "br-ex.100",
                LinkKind::Vlan {
                    parent: ifname("br-ex"),
                    id: 100,
                },
            ),
            "vlan",
            "cannot create br-ex.100 of kind vlan: the kernel has no vlan support (modprobe 8021q)",
        ),
    ];
    for (spec, kind, expected_error) in cases {
        let supported = r.link_kind_supported(kind).await.unwrap();
        let name = spec.name.to_string();
        let d = DesiredSystem {
            // The VLAN's parent is created in the same reconcile (before the VLAN).
            links: [spec, up_link("br-ex", LinkKind::Bridge)]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let report = r.reconcile(&d).await.unwrap();
        if supported {
            println!("kernel has {kind}: asserting {name} is created");
            assert!(report.errors.is_empty(), "{:#?}", report.errors);
            let shown = ns.ip(&["-d", "link", "show", "dev", &name]);
            assert!(shown.contains(kind), "{shown}");
            if kind == "vrf" {
                assert!(shown.contains("table 10"), "{shown}");
            }
            if kind == "vlan" {
                assert!(shown.contains("id 100"), "{shown}");
            }
        } else {
            println!("kernel lacks {kind}: asserting the error names the fix");
            assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
            assert_eq!(report.errors[0].error, expected_error);
            assert!(
                !ns.ip_raw(&["link", "show", "dev", &name]).status.success(),
                "{name} must not exist"
            );
        }
    }
    // The stand-ins configured for such kernels work here.
    let d = DesiredSystem {
        links: [
            up_link("bgp-vrf", vrf_link_kind("bridge", 10).unwrap()),
            LinkSpec {
                master: Some(ifname("bgp-vrf")),
                ..up_link("bgp-nic", nic_link_kind("ifb").unwrap())
            },
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let report = r.reconcile(&d).await.unwrap();
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert!(
        ns.ip(&["link", "show", "dev", "bgp-nic"])
            .contains("master bgp-vrf")
    );
    assert!(vrf_link_kind("bond", 10).is_err() && nic_link_kind("veth").is_err());
}

/// A device created in the same reconcile as its addresses gets them while still down and is
/// set up afterwards (faster on the kernel side); one that carries routes is up before its
/// routes go in (the kernel refuses a route through a down device). Both end up up, with
/// everything, and the next reconcile is a no-op.
#[tokio::test]
async fn devices_created_with_their_objects_end_up_up() {
    let ns = TestNetns::new();
    let mut d = DesiredSystem {
        ownership: Ownership {
            link_names: [ifname("tst-nic"), ifname("tst-br")].into(),
            address_devices: [ifname("tst-nic")].into(),
            tables: [210].into(),
            ..Default::default()
        },
        ..Default::default()
    };
    d.links.insert(up_link("tst-nic", LinkKind::Ifb));
    d.links.insert(up_link("tst-br", LinkKind::Bridge));
    for i in 1..=50u8 {
        d.addresses.insert(AddressSpec {
            dev: ifname("tst-nic"),
            addr: format!("192.0.2.{i}/32").parse().unwrap(),
        });
        d.routes.insert(RouteSpec {
            table: 210,
            dst: format!("198.51.100.{i}/32").parse().unwrap(),
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(ifname("tst-br")),
            scope_link: true,
            metric: None,
        });
    }
    d.addresses.insert(AddressSpec {
        dev: ifname("tst-nic"),
        addr: "2001:db8::5/128".parse().unwrap(),
    });

    let r = ns.reconciler();
    let report = r.reconcile(&d).await.expect("reconcile");
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.added.get("links"), Some(&2));
    assert_eq!(report.added.get("addresses"), Some(&51));
    assert_eq!(report.added.get("routes"), Some(&50));
    for dev in ["tst-nic", "tst-br"] {
        let show = ns.ip(&["link", "show", "dev", dev]);
        assert!(show.contains(",UP"), "{dev} is not up: {show}");
    }
    let v4 = ns.ip(&["-4", "addr", "show", "dev", "tst-nic"]);
    assert_eq!(v4.matches("inet 192.0.2.").count(), 50, "{v4}");
    assert!(
        ns.ip(&["-6", "addr", "show", "dev", "tst-nic"])
            .contains("2001:db8::5/128")
    );
    let routes = ns.ip(&["route", "show", "table", "210"]);
    assert_eq!(routes.lines().count(), 50, "{routes}");
    // The local routes of the addresses exist once the device is up.
    let local = ns.ip(&["route", "show", "table", "local", "dev", "tst-nic"]);
    assert_eq!(local.matches("local 192.0.2.").count(), 50, "{local}");

    let again = r.reconcile(&d).await.expect("second reconcile");
    assert!(again.is_noop(), "{again:?}");
}

/// Ownership by exact name or by the agent's alias, never by name prefix: `bgp-vrf` does not
/// own `bgp-vrf2`, and a Linux bridge `br-foo` someone else made is never the agent's, while
/// `br-100` carrying the alias (created before a restart, say) is deleted once not desired.
/// (The VLAN cases, `br-ex.100` owned through its parent and `br-ex.foo` not, are decided by
/// the same predicate in a unit test: this kernel has no 8021q.)
#[tokio::test]
async fn links_are_owned_by_exact_name_or_alias_never_by_prefix() {
    let ns = TestNetns::new();
    for name in ["bgp-vrf", "bgp-vrf2", "br-foo", "br-100"] {
        ns.ip(&["link", "add", name, "type", "bridge"]);
    }
    ns.ip(&["link", "set", "br-100", "alias", AGENT_LINK_ALIAS]);
    let d = DesiredSystem {
        links: [up_link("bgp-vrf", LinkKind::Bridge)].into_iter().collect(),
        ownership: Ownership {
            link_names: [ifname("bgp-vrf")].into(),
            vlan_parents: [ifname("br-ex")].into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let r = ns.reconciler();
    let report = r.reconcile(&d).await.expect("reconcile");
    println!("{report:?}");
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.removed.get("links"), Some(&1), "only br-100");
    let all = ns.ip(&["link", "show"]);
    assert!(!all.contains(" br-100:"), "{all}");
    for kept in [" bgp-vrf:", " bgp-vrf2:", " br-foo:"] {
        assert!(all.contains(kept), "{kept} deleted: {all}");
    }
    // The link owned by name now carries the alias (survives a rename of its owner's
    // configuration); the others were not touched.
    let shown = |dev: &str| ns.ip(&["link", "show", "dev", dev]);
    assert!(
        shown("bgp-vrf").contains(&format!("alias {AGENT_LINK_ALIAS}")),
        "{}",
        shown("bgp-vrf")
    );
    for other in ["bgp-vrf2", "br-foo"] {
        assert!(!shown(other).contains("alias"), "{}", shown(other));
    }
    assert!(r.reconcile(&d).await.unwrap().is_noop(), "second run");

    // A link the agent creates is marked at once, and so recognised after a "restart" (a new
    // reconciler) whose desired state no longer lists it and owns no name.
    let d2 = DesiredSystem {
        links: [up_link("br-200", LinkKind::Bridge)].into_iter().collect(),
        ..Default::default()
    };
    let created = r.reconcile(&d2).await.unwrap();
    assert_eq!(created.added.get("links"), Some(&1), "{created:?}");
    assert!(shown("br-200").contains(&format!("alias {AGENT_LINK_ALIAS}")));
    let restarted = ns.reconciler();
    let cleaned = restarted
        .reconcile(&DesiredSystem::default())
        .await
        .unwrap();
    println!("{cleaned:?}");
    let all = ns.ip(&["link", "show"]);
    assert!(!all.contains(" br-200:"), "{all}");
    // bgp-vrf got the alias above: with it, it is the agent's even when no longer named.
    assert!(!all.contains(" bgp-vrf:"), "{all}");
    for kept in [" bgp-vrf2:", " br-foo:"] {
        assert!(all.contains(kept), "{kept} deleted: {all}");
    }

    // Where the kernel has 8021q: VLAN devices made by upstream (no alias) on an owned parent
    // are the agent's only under their exact upstream name.
    if !r.link_kind_supported("vlan").await.unwrap() {
        println!("kernel lacks vlan: the VLAN cases are covered by the links unit test");
        return;
    }
    println!("kernel has vlan: asserting br-ex.100 goes and br-ex.foo stays");
    ns.ip(&["link", "add", "br-ex", "type", "bridge"]);
    for (name, id) in [("br-ex.100", "100"), ("br-ex.foo", "101")] {
        ns.ip(&[
            "link", "add", "link", "br-ex", "name", name, "type", "vlan", "id", id,
        ]);
    }
    let d3 = DesiredSystem {
        ownership: Ownership {
            vlan_parents: [ifname("br-ex")].into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let report = r.reconcile(&d3).await.unwrap();
    assert_eq!(report.removed.get("links"), Some(&1), "{report:?}");
    let all = ns.ip(&["link", "show"]);
    assert!(!all.contains(" br-ex.100@"), "{all}");
    assert!(all.contains(" br-ex.foo@br-ex"), "{all}");
}

/// A provider bridge that exists but is down is set up (upstream's `ensure_bridge`), whatever
/// its kind; one that does not exist is never created in its place (U33), and nothing is
/// reported for it at every reconcile.
#[tokio::test]
async fn an_existing_device_is_set_up_and_never_created() {
    let ns = TestNetns::new();
    // The OVS bridge's own device stands in as an ifb (any kind the agent does not own).
    ns.ip(&["link", "add", "br-prov", "type", "ifb"]);
    assert!(!ns.ip(&["link", "show", "br-prov"]).contains(",UP"));
    let rec = ns.reconciler();
    let mut desired = DesiredSystem::default();
    for name in ["br-prov", "br-missing"] {
        desired.links.insert(up_link(name, LinkKind::Existing));
    }
    let report = rec.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.changed.get("links"), Some(&1), "{report:?}");
    assert!(ns.ip(&["link", "show", "br-prov"]).contains(",UP"));
    assert!(
        !ns.ip_raw(&["link", "show", "br-missing"]).status.success(),
        "a missing device was created"
    );
    assert!(
        ns.ip(&["-d", "link", "show", "br-prov"]).contains("ifb"),
        "the device keeps its kind"
    );
    let again = rec.reconcile(&desired).await.unwrap();
    assert!(again.is_noop(), "{again:?}");
    // Not desired any more: left as it is (it is not the agent's), never deleted.
    let gone = rec.reconcile(&DesiredSystem::default()).await.unwrap();
    assert!(gone.errors.is_empty(), "{gone:?}");
    assert!(ns.ip(&["link", "show", "br-prov"]).contains(",UP"));
}
