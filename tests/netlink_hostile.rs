//! Hostile or invalid values never reach the kernel: names are refused when the desired state
//! is built (or deserialised), and a desired state with any invalid value is refused as a whole
//! before anything is applied.

mod netlink_support;

use netlink_support::{TestNetns, ifname};
use ovn_bgp_agent::caps::netlink::NetlinkError;
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
async fn an_invalid_desired_state_is_refused_before_anything_is_applied() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
    ns.ip(&["link", "set", "bgp-nic", "up"]);
    let r = ns.reconciler();

    let valid = {
        let mut d = DesiredSystem::default();
        d.links.insert(LinkSpec {
            name: ifname("br-new"),
            kind: LinkKind::Bridge,
            master: None,
            mac: None,
            up: true,
        });
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
        match r.reconcile(&d).await {
            Err(NetlinkError::Rejected { problems }) => {
                println!("{what}: rejected: {problems:?}");
                assert_eq!(problems.len(), 1, "{what}: {problems:?}");
            }
            other => panic!("{what}: not rejected: {other:?}"),
        }
        // Nothing of the valid part was applied.
        assert!(
            !ns.ip(&["addr", "show", "dev", "bgp-nic"])
                .contains("192.0.2.1"),
            "{what}"
        );
        assert!(
            ns.ip_raw(&["link", "show", "dev", "br-new"]).status.code() != Some(0),
            "{what}"
        );
        let t200 = ns.ip_raw(&["route", "show", "table", "200"]);
        assert!(
            String::from_utf8_lossy(&t200.stdout).trim().is_empty(),
            "{what}"
        );
        assert_eq!(ns.sysctl("net.ipv4.conf.bgp-nic.proxy_arp"), "0", "{what}");
    }
    // The valid state alone goes through.
    let report = r.reconcile(&valid).await.unwrap();
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(ns.sysctl("net.ipv4.conf.bgp-nic.proxy_arp"), "1");
}
