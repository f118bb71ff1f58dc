//! Hostile, invalid or conflicting values never reach the kernel: names are refused when the
//! desired state is built (or deserialised); any other invalid or conflicting object is left
//! out and reported, and everything else is applied.

mod netlink_support;

use netlink_support::{TestNetns, ifname, up_link};
use ovn_bgp_agent::system::*;
use ovn_bgp_agent::types::InterfaceName;

#[test]
fn hostile_interface_names_cannot_be_built_or_deserialised() {
    for bad in [
        "0123456789abcdef", // 16 characters
        "br-ex\nip link del lo",
        "br-ex;reboot",
        "br ex",
        "../../etc",
        "",
    ] {
        assert!(InterfaceName::new(bad).is_err(), "{bad:?} accepted");
        let json = serde_json::json!({ "dev": bad, "addr": "192.0.2.1/32" });
        assert!(
            serde_json::from_value::<AddressSpec>(json).is_err(),
            "{bad:?} deserialised"
        );
    }
    assert!(
        InterfaceName::new("012345678901234").is_ok(),
        "15 characters fit"
    );
}

/// Makes one value of a valid desired state invalid.
type Spoiler = Box<dyn Fn(&mut DesiredSystem)>;

#[tokio::test]
async fn an_invalid_object_is_left_out_and_reported_the_rest_applied() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
    ns.ip(&["link", "set", "bgp-nic", "up"]);
    let r = ns.reconciler();

    let valid = {
        let mut d = DesiredSystem::default();
        d.links.insert(up_link("br-new", LinkKind::Bridge));
        d.addresses.insert(AddressSpec {
            dev: ifname("bgp-nic"),
            addr: "192.0.2.1/32".parse().unwrap(),
        });
        d.routes.insert(RouteSpec {
            table: 200,
            dst: "192.0.2.1/32".parse().unwrap(),
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(ifname("bgp-nic")),
            scope_link: true,
            metric: None,
        });
        d.sysctls
            .insert("net.ipv4.conf.bgp-nic.proxy_arp".to_owned(), "1".to_owned());
        d
    };

    let hostile: Vec<(&str, Spoiler)> = vec![
        (
            "sysctl key with a newline",
            Box::new(|d| {
                d.sysctls
                    .insert("net.ipv4.conf.all\n.forwarding".to_owned(), "1".to_owned());
            }),
        ),
        (
            "sysctl key with ;",
            Box::new(|d| {
                d.sysctls.insert(
                    "net.ipv4.conf.all;reboot.forwarding".to_owned(),
                    "1".to_owned(),
                );
            }),
        ),
        (
            "sysctl key escaping /proc/sys/net",
            Box::new(|d| {
                d.sysctls
                    .insert("kernel.core_pattern".to_owned(), "1".to_owned());
            }),
        ),
        (
            "sysctl key with ..",
            Box::new(|d| {
                d.sysctls
                    .insert("net.ipv4.conf.../../../etc.x".to_owned(), "1".to_owned());
            }),
        ),
        (
            "sysctl value with a newline",
            Box::new(|d| {
                d.sysctls
                    .insert("net.ipv4.conf.all.forwarding".to_owned(), "1\n0".to_owned());
            }),
        ),
        (
            "vlan id 4095",
            Box::new(|d| {
                d.links.insert(LinkSpec {
                    name: ifname("bgp-nic.4095"),
                    kind: LinkKind::Vlan {
                        parent: ifname("bgp-nic"),
                        id: 4095,
                    },
                    master: None,
                    mac: None,
                    up: true,
                });
            }),
        ),
        (
            "vni 0",
            Box::new(|d| {
                d.links.insert(LinkSpec {
                    name: ifname("vxlan-0"),
                    kind: LinkKind::Vxlan {
                        vni: 0,
                        local: None,
                        dstport: 4789,
                        neigh_suppress: false,
                    },
                    master: None,
                    mac: None,
                    up: true,
                });
            }),
        ),
        (
            "two routes the kernel cannot tell apart",
            Box::new(|d| {
                d.routes.insert(RouteSpec {
                    table: 200,
                    dst: "192.0.2.1/32".parse().unwrap(),
                    route_type: RouteType::Unicast,
                    via: None,
                    dev: Some(ifname("br-other")),
                    scope_link: true,
                    metric: None,
                });
            }),
        ),
        (
            "owning the main table",
            Box::new(|d| {
                d.ownership.tables.insert(254);
            }),
        ),
        (
            "route gateway of the other family",
            Box::new(|d| {
                d.routes.insert(RouteSpec {
                    table: 200,
                    dst: "10.0.0.0/24".parse().unwrap(),
                    route_type: RouteType::Unicast,
                    via: Some("2001:db8::1".parse().unwrap()),
                    dev: None,
                    scope_link: false,
                    metric: None,
                });
            }),
        ),
    ];
    for (what, spoil) in hostile {
        let mut d = valid.clone();
        spoil(&mut d);
        let report = r.reconcile(&d).await.expect(what);
        println!("{what}: {:?}", report.errors);
        // The two sides of a conflict are each reported; any other bad object once.
        let expected = if what.starts_with("two routes") { 2 } else { 1 };
        assert_eq!(
            report.errors.len(),
            expected,
            "{what}: {:#?}",
            report.errors
        );
        for e in &report.errors {
            assert!(e.error.starts_with("not applied: "), "{what}: {e}");
        }
        // The valid part was applied (or kept, from the previous round).
        assert!(
            ns.ip(&["addr", "show", "dev", "bgp-nic"])
                .contains("192.0.2.1/32"),
            "{what}"
        );
        assert!(
            ns.ip_raw(&["link", "show", "dev", "br-new"])
                .status
                .success(),
            "{what}"
        );
        assert_eq!(
            ns.ip(&["route", "show", "table", "200"]).trim(),
            "192.0.2.1 dev bgp-nic scope link",
            "{what}: the held route is kept as it was"
        );
        assert_eq!(ns.sysctl("net.ipv4.conf.bgp-nic.proxy_arp"), "1", "{what}");
        // The bad values did not reach the kernel.
        let links = ns.ip(&["link", "show"]);
        assert!(
            !links.contains("bgp-nic.4095") && !links.contains("vxlan-0"),
            "{what}"
        );
        assert!(
            !ns.ip(&["route", "show", "table", "200"])
                .contains("10.0.0.0"),
            "{what}"
        );
    }
    // The valid state alone goes through without a word.
    let report = r.reconcile(&valid).await.unwrap();
    assert!(report.is_noop(), "{report:?}");
    assert_eq!(ns.sysctl("net.ipv4.conf.bgp-nic.proxy_arp"), "1");
}

/// One conflicting pair (two routes for the same table and destination through different
/// devices, two MACs for one neighbour) among good objects: the good ones are applied, both
/// sides of each conflict are reported by name, and the kernel's existing route for the
/// contested destination is neither replaced nor deleted.
#[tokio::test]
async fn one_conflict_does_not_block_the_rest() {
    let ns = TestNetns::new();
    for dev in ["bgp-nic", "br-a", "br-b"] {
        ns.ip(&["link", "add", dev, "type", "ifb"]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    // What the agent applied before the conflict arose.
    ns.ip(&[
        "route",
        "add",
        "198.51.100.7/32",
        "dev",
        "br-a",
        "table",
        "200",
        "proto",
        "boot",
        "scope",
        "link",
    ]);
    let route = |dst: &str, dev: &str| RouteSpec {
        table: 200,
        dst: dst.parse().unwrap(),
        route_type: RouteType::Unicast,
        via: None,
        dev: Some(ifname(dev)),
        scope_link: true,
        metric: None,
    };
    let mut d = DesiredSystem::default();
    d.ownership.tables.insert(200);
    d.ownership.address_devices.insert(ifname("bgp-nic"));
    d.ownership.neighbour_devices.insert(ifname("br-a"));
    d.routes.insert(route("198.51.100.7/32", "br-a"));
    d.routes.insert(route("198.51.100.7/32", "br-b"));
    for mac in ["02:00:00:00:00:01", "02:00:00:00:00:02"] {
        d.neighbours.insert(NeighbourSpec {
            dev: ifname("br-a"),
            ip: "198.51.100.9".parse().unwrap(),
            lladdr: mac.parse().unwrap(),
        });
    }
    for i in 1..=5 {
        d.addresses.insert(AddressSpec {
            dev: ifname("bgp-nic"),
            addr: format!("192.0.2.{i}/32").parse().unwrap(),
        });
        d.routes.insert(route(&format!("203.0.113.{i}/32"), "br-b"));
    }

    let r = ns.reconciler();
    let report = r.reconcile(&d).await.expect("reconcile");
    println!("{report:#?}");
    assert_eq!(report.added.get("addresses"), Some(&5), "{report:?}");
    assert_eq!(report.added.get("routes"), Some(&5), "{report:?}");
    assert_eq!(report.removed.get("routes"), None, "the held route stays");
    let errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(
        errors.iter().any(|e| e.starts_with(
            "routes: route 198.51.100.7/32 dev br-a table 200 proto boot scope link: not applied: conflicts with route 198.51.100.7/32 dev br-b"
        )),
        "{errors:#?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with(
            "routes: route 198.51.100.7/32 dev br-b table 200 proto boot scope link: not applied: conflicts with route 198.51.100.7/32 dev br-a"
        )),
        "{errors:#?}"
    );
    assert_eq!(
        errors
            .iter()
            .filter(|e| e.starts_with("neighbours: neighbour 198.51.100.9")
                && e.contains("02:00:00:00:00:01, 02:00:00:00:00:02"))
            .count(),
        2,
        "{errors:#?}"
    );
    let addrs = ns.ip(&["-4", "addr", "show", "dev", "bgp-nic"]);
    assert_eq!(addrs.matches("inet 192.0.2.").count(), 5, "{addrs}");
    let t200 = ns.ip(&["route", "show", "table", "200"]);
    assert_eq!(t200.matches("203.0.113.").count(), 5, "{t200}");
    assert!(
        t200.contains("198.51.100.7 dev br-a scope link"),
        "the existing route is held: {t200}"
    );
    assert!(
        !ns.ip(&["neigh", "show", "dev", "br-a"])
            .contains("198.51.100.9"),
        "neither MAC applied"
    );

    // Resolved (one side withdrawn): the remaining side is applied.
    d.routes.remove(&route("198.51.100.7/32", "br-a"));
    let resolved = r.reconcile(&d).await.unwrap();
    assert_eq!(resolved.changed.get("routes"), Some(&1), "{resolved:?}");
    assert!(
        ns.ip(&["route", "show", "table", "200"])
            .contains("198.51.100.7 dev br-b scope link")
    );
}
