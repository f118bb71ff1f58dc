//! Addresses, rules, routes, neighbours, proxy neighbours and sysctls against the real kernel,
//! in a namespace of the test's own: created, diffed, cleaned; a second reconcile changes
//! nothing; everything the agent does not own stays (upstream-behaviour.md §9 B1, B5, B6, C1).

mod netlink_support;

use std::net::IpAddr;

use netlink_support::{TestNetns, ifname, up_link};
use ovn_bgp_agent::system::*;

fn net(s: &str) -> ipnet::IpNet {
    s.parse().unwrap()
}
fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const T: u32 = 200;
const T_UNREACH: u32 = 201;
const PRIO: u32 = 1000;

fn dev_route(table: u32, dst: &str, dev: &str, scope_link: bool) -> RouteSpec {
    RouteSpec {
        table,
        dst: net(dst),
        route_type: RouteType::Unicast,
        via: None,
        dev: Some(ifname(dev)),
        scope_link,
        metric: None,
    }
}

fn to_rule(dst: &str) -> RuleSpec {
    RuleSpec {
        selector: RuleSelector::To(net(dst)),
        table: T,
        priority: PRIO,
    }
}

/// The state of acceptance rows A5/A6, B1 and C1 for one provider IP and one router gateway.
fn desired() -> DesiredSystem {
    let mut d = DesiredSystem::default();
    d.links.insert(up_link("bgp-nic", LinkKind::Ifb));
    d.links.insert(up_link("br-ex", LinkKind::Bridge));
    for (dev, a) in [
        ("bgp-nic", "172.24.100.10/32"),
        ("bgp-nic", "2001:db8::10/128"),
        ("bgp-nic", "172.24.100.5/32"),
        ("br-ex", "169.254.1.1/32"),
        ("br-ex", "fd53:d91e:400:7f17::1:1/128"),
    ] {
        d.addresses.insert(AddressSpec {
            dev: ifname(dev),
            addr: net(a),
        });
    }
    for r in [
        "172.24.100.10/32",
        "2001:db8::10/128",
        "172.24.100.5/32",
        "10.0.0.1/24",
    ] {
        d.rules.insert(to_rule(r));
    }
    d.rules.insert(RuleSpec {
        selector: RuleSelector::From(net("10.1.0.0/24")),
        table: T,
        priority: PRIO,
    });
    d.routes.insert(dev_route(T, "0.0.0.0/0", "br-ex", true));
    d.routes.insert(dev_route(T, "::/0", "br-ex", false));
    d.routes
        .insert(dev_route(T, "172.24.100.10/32", "br-ex", true));
    d.routes
        .insert(dev_route(T, "2001:db8::10/128", "br-ex", false));
    d.routes
        .insert(dev_route(T, "172.24.100.5/32", "br-ex", true));
    d.routes.insert(RouteSpec {
        via: Some(ip("172.24.100.5")),
        scope_link: false,
        ..dev_route(T, "10.0.0.0/24", "br-ex", false)
    });
    for dst in ["0.0.0.0/0", "::/0"] {
        d.routes.insert(RouteSpec {
            table: T_UNREACH,
            dst: net(dst),
            route_type: RouteType::Unreachable,
            via: None,
            dev: None,
            scope_link: false,
            metric: Some(4278198272),
        });
    }
    d.neighbours.insert(NeighbourSpec {
        dev: ifname("br-ex"),
        ip: ip("172.24.100.5"),
        lladdr: "fa:16:3e:aa:bb:cc".parse().unwrap(),
    });
    d.neighbours.insert(NeighbourSpec {
        dev: ifname("br-ex"),
        ip: ip("2001:db8::5"),
        lladdr: "fa:16:3e:aa:bb:cc".parse().unwrap(),
    });
    d.proxy_neighbours.insert(ProxyNeighbourSpec {
        dev: ifname("br-ex"),
        ip: ip("2001:db8::"),
    });
    d.sysctls = ObjectMap::from_iter([
        ("net.ipv4.conf.br-ex.proxy_arp".to_owned(), "1".to_owned()),
        ("net.ipv6.conf.br-ex.proxy_ndp".to_owned(), "1".to_owned()),
        ("net.ipv4.conf.all.forwarding".to_owned(), "1".to_owned()),
    ]);
    d.ownership.address_devices.insert(ifname("bgp-nic"));
    d.ownership.tables.extend([T, T_UNREACH]);
    d.ownership.neighbour_devices.insert(ifname("br-ex"));
    d
}

/// Foreign and stray objects, set up with `ip` before the agent's first reconcile.
fn set_up_foreign_and_stray(ns: &TestNetns) {
    for cmd in [
        "link add bgp-nic type ifb",
        "link add br-ex type bridge",
        "link add other0 type bridge",
        "link set bgp-nic up",
        "link set br-ex up",
        "link set other0 up",
        // B5: stray host address (goes), a /24 on bgp-nic (stays), a /32 elsewhere (stays).
        "addr add 192.0.2.99/32 dev bgp-nic",
        "addr add 192.0.2.1/24 dev bgp-nic",
        "addr add 198.51.100.1/32 dev other0",
        // Stray rule in the owned table (goes), rule to another table (stays).
        "rule add to 192.0.2.99/32 table 200 priority 1000",
        "rule add to 192.0.2.98/32 table 300 priority 1000",
        // Stray proto boot route in the owned table (goes); FRR's proto 186 and a static
        // route in the same table, and proto boot in another table (stay).
        "route add 192.0.2.99/32 dev br-ex table 200 proto boot scope link",
        "route add 192.0.2.97/32 dev br-ex table 200 proto 186",
        "route add 192.0.2.96/32 dev br-ex table 200 proto static",
        "route add 192.0.2.95/32 dev br-ex table 300 proto boot",
        // Stray permanent neighbour on an owned device (goes), one elsewhere (stays).
        "neigh add 172.24.100.99 lladdr fa:16:3e:00:00:99 dev br-ex nud permanent",
        "neigh add 198.51.100.2 lladdr fa:16:3e:00:00:98 dev other0 nud permanent",
        // Stray proxy on an owned device (goes), one elsewhere (stays).
        "-6 neigh add proxy 2001:db8:99:: dev br-ex",
        "-6 neigh add proxy 2001:db8:98:: dev other0",
    ] {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        ns.ip(&args);
    }
}

fn assert_foreign_untouched(ns: &TestNetns) {
    let addrs = ns.ip(&["addr", "show"]);
    assert!(addrs.contains("192.0.2.1/24"), "{addrs}");
    assert!(addrs.contains("198.51.100.1/32"), "{addrs}");
    let rules = ns.ip(&["rule", "show"]);
    assert!(rules.contains("to 192.0.2.98 lookup 300"), "{rules}");
    let t200 = ns.ip(&["-d", "route", "show", "table", "200"]);
    assert!(t200.contains("192.0.2.97 dev br-ex proto bgp"), "{t200}");
    assert!(t200.contains("192.0.2.96 dev br-ex proto static"), "{t200}");
    let t300 = ns.ip(&["-d", "route", "show", "table", "300"]);
    assert!(t300.contains("192.0.2.95 dev br-ex proto boot"), "{t300}");
    let neigh = ns.ip(&["neigh", "show", "dev", "other0"]);
    assert!(
        neigh.contains("198.51.100.2 lladdr fa:16:3e:00:00:98 PERMANENT"),
        "{neigh}"
    );
    let proxy = ns.ip(&["-6", "neigh", "show", "proxy"]);
    assert!(proxy.contains("2001:db8:98:: dev other0"), "{proxy}");
}

#[tokio::test]
async fn objects_created_diffed_cleaned_and_foreign_ones_kept() {
    let ns = TestNetns::new();
    set_up_foreign_and_stray(&ns);
    let r = ns.reconciler();

    let report = r.reconcile(&desired()).await.expect("first reconcile");
    println!("first reconcile: {report:?}");
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.added.get("addresses"), Some(&5));
    assert_eq!(report.added.get("rules"), Some(&5));
    assert_eq!(report.added.get("routes"), Some(&8));
    assert_eq!(report.added.get("neighbours"), Some(&2));
    assert_eq!(report.added.get("proxy_neighbours"), Some(&1));
    assert_eq!(report.removed.get("addresses"), Some(&1));
    assert_eq!(report.removed.get("rules"), Some(&1));
    assert_eq!(report.removed.get("routes"), Some(&1));
    assert_eq!(report.removed.get("neighbours"), Some(&1));
    assert_eq!(report.removed.get("proxy_neighbours"), Some(&1));
    assert_eq!(report.changed.get("sysctls"), Some(&3));
    assert_eq!(report.added.get("links"), None, "links existed already");

    // What the node must show.
    let nic = ns.ip(&["addr", "show", "dev", "bgp-nic"]);
    for a in ["172.24.100.10/32", "2001:db8::10/128", "172.24.100.5/32"] {
        assert!(nic.contains(a), "{a} missing on bgp-nic: {nic}");
    }
    assert!(!nic.contains("192.0.2.99"), "stray address left: {nic}");
    let br = ns.ip(&["addr", "show", "dev", "br-ex"]);
    assert!(
        br.contains("169.254.1.1/32") && br.contains("fd53:d91e:400:7f17::1:1/128"),
        "{br}"
    );
    let rules4 = ns.ip(&["rule", "show"]);
    assert!(
        rules4.contains("1000:\tfrom all to 172.24.100.10 lookup 200"),
        "{rules4}"
    );
    assert!(
        rules4.contains("1000:\tfrom all to 10.0.0.1/24 lookup 200"),
        "{rules4}"
    );
    assert!(
        rules4.contains("1000:\tfrom 10.1.0.0/24 lookup 200"),
        "{rules4}"
    );
    assert!(!rules4.contains("192.0.2.99"), "stray rule left: {rules4}");
    let rules6 = ns.ip(&["-6", "rule", "show"]);
    assert!(rules6.contains("to 2001:db8::10 lookup 200"), "{rules6}");
    let t4 = ns.ip(&["-d", "route", "show", "table", "200"]);
    for line in [
        "default dev br-ex proto boot scope link",
        "172.24.100.10 dev br-ex proto boot scope link",
        "10.0.0.0/24 via 172.24.100.5 dev br-ex proto boot",
    ] {
        assert!(t4.contains(line), "missing `{line}` in table 200: {t4}");
    }
    assert!(!t4.contains("192.0.2.99"), "stray route left: {t4}");
    let t6 = ns.ip(&["-d", "-6", "route", "show", "table", "200"]);
    assert!(
        t6.contains("2001:db8::10 dev br-ex proto boot scope global metric 1024"),
        "{t6}"
    );
    assert!(
        t6.contains("default dev br-ex proto boot scope global metric 1024"),
        "{t6}"
    );
    let u4 = ns.ip(&["-d", "route", "show", "table", "201"]);
    assert!(
        u4.contains("unreachable default proto boot scope global metric 4278198272"),
        "{u4}"
    );
    let u6 = ns.ip(&["-d", "-6", "route", "show", "table", "201"]);
    assert!(
        u6.contains("unreachable default dev lo proto boot scope global metric 4278198272"),
        "{u6}"
    );
    let neigh = ns.ip(&["neigh", "show", "dev", "br-ex"]);
    assert!(
        neigh.contains("172.24.100.5 lladdr fa:16:3e:aa:bb:cc PERMANENT"),
        "{neigh}"
    );
    assert!(
        neigh.contains("2001:db8::5 lladdr fa:16:3e:aa:bb:cc PERMANENT"),
        "{neigh}"
    );
    assert!(
        !neigh.contains("172.24.100.99"),
        "stray neighbour left: {neigh}"
    );
    let proxy = ns.ip(&["-6", "neigh", "show", "proxy"]);
    assert!(proxy.contains("2001:db8:: dev br-ex"), "{proxy}");
    assert!(
        !proxy.contains("2001:db8:99::"),
        "stray proxy left: {proxy}"
    );
    assert_eq!(ns.sysctl("net.ipv4.conf.br-ex.proxy_arp"), "1");
    assert_eq!(ns.sysctl("net.ipv6.conf.br-ex.proxy_ndp"), "1");
    assert_eq!(ns.sysctl("net.ipv4.conf.all.forwarding"), "1");
    assert_foreign_untouched(&ns);

    // A second reconcile with the same state: nothing to do.
    let again = r.reconcile(&desired()).await.expect("second reconcile");
    assert!(again.is_noop(), "second reconcile not a no-op: {again:?}");

    // Drift repair: something deleted behind the agent's back comes back, and only that.
    ns.ip(&[
        "rule",
        "del",
        "to",
        "172.24.100.10/32",
        "table",
        "200",
        "priority",
        "1000",
    ]);
    ns.ip(&["addr", "del", "2001:db8::10/128", "dev", "bgp-nic"]);
    let repaired = r.reconcile(&desired()).await.unwrap();
    assert_eq!(repaired.added.get("rules"), Some(&1), "{repaired:?}");
    assert_eq!(repaired.added.get("addresses"), Some(&1), "{repaired:?}");
    assert_eq!(repaired.total_changes(), 2, "{repaired:?}");

    // Changes: the gateway MAC moves, the tenant subnet's gateway changes, the VM goes.
    let mut d2 = desired();
    retain_objects(&mut d2.addresses, |a| a.addr != net("172.24.100.10/32"));
    retain_objects(&mut d2.rules, |r| {
        r.selector != RuleSelector::To(net("172.24.100.10/32"))
    });
    retain_objects(&mut d2.routes, |r| r.dst != net("172.24.100.10/32"));
    retain_objects(&mut d2.routes, |r| r.dst != net("10.0.0.0/24"));
    d2.routes.insert(RouteSpec {
        via: Some(ip("172.24.100.6")),
        scope_link: false,
        ..dev_route(T, "10.0.0.0/24", "br-ex", false)
    });
    retain_objects(&mut d2.neighbours, |n| n.ip != ip("172.24.100.5"));
    d2.neighbours.insert(NeighbourSpec {
        dev: ifname("br-ex"),
        ip: ip("172.24.100.5"),
        lladdr: "fa:16:3e:aa:bb:dd".parse().unwrap(),
    });
    let changed = r.reconcile(&d2).await.unwrap();
    println!("change: {changed:?}");
    assert!(changed.errors.is_empty(), "{:#?}", changed.errors);
    assert_eq!(changed.removed.get("addresses"), Some(&1));
    assert_eq!(changed.removed.get("rules"), Some(&1));
    assert_eq!(changed.removed.get("routes"), Some(&1));
    assert_eq!(
        changed.changed.get("routes"),
        Some(&1),
        "the via route is replaced in place"
    );
    assert_eq!(changed.changed.get("neighbours"), Some(&1));
    let t4 = ns.ip(&["-d", "route", "show", "table", "200"]);
    assert!(
        t4.contains("10.0.0.0/24 via 172.24.100.6 dev br-ex proto boot"),
        "{t4}"
    );
    assert!(!t4.contains("172.24.100.10"), "{t4}");
    let neigh = ns.ip(&["neigh", "show", "dev", "br-ex"]);
    assert!(
        neigh.contains("172.24.100.5 lladdr fa:16:3e:aa:bb:dd PERMANENT"),
        "{neigh}"
    );
    assert!(r.reconcile(&d2).await.unwrap().is_noop());

    // Nothing desired any more: everything the agent owns goes, the rest stays.
    let empty = DesiredSystem {
        ownership: desired().ownership,
        ..Default::default()
    };
    let cleaned = r.reconcile(&empty).await.unwrap();
    println!("cleanup: {cleaned:?}");
    assert!(cleaned.errors.is_empty(), "{:#?}", cleaned.errors);
    let nic = ns.ip(&["addr", "show", "dev", "bgp-nic"]);
    assert!(!nic.contains("/32") && !nic.contains("/128"), "{nic}");
    let rules = ns.ip(&["rule", "show"]) + &ns.ip(&["-6", "rule", "show"]);
    assert!(
        !rules.contains("lookup 200") && !rules.contains("lookup 201"),
        "{rules}"
    );
    let t200 = ns.ip(&["-d", "route", "show", "table", "200"])
        + &ns.ip(&["-d", "-6", "route", "show", "table", "200"]);
    assert!(!t200.contains("proto boot"), "{t200}");
    let t201 = ns.ip(&["-d", "route", "show", "table", "201"])
        + &ns.ip(&["-d", "-6", "route", "show", "table", "201"]);
    assert!(t201.trim().is_empty(), "{t201}");
    let neigh = ns.ip(&["neigh", "show", "dev", "br-ex"]);
    assert!(!neigh.contains("PERMANENT"), "{neigh}");
    let proxy = ns.ip(&["-6", "neigh", "show", "proxy"]);
    assert!(!proxy.contains("br-ex"), "{proxy}");
    // Addresses on br-ex are desired-only (br-ex is not an owned address device): they stay.
    let br = ns.ip(&["addr", "show", "dev", "br-ex"]);
    assert!(br.contains("169.254.1.1/32"), "{br}");
    assert_foreign_untouched(&ns);
    assert!(r.reconcile(&empty).await.unwrap().is_noop());
}

#[tokio::test]
async fn a_desired_route_never_replaces_a_foreign_one() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "br-ex", "type", "bridge"]);
    ns.ip(&["link", "set", "br-ex", "up"]);
    ns.ip(&[
        "route",
        "add",
        "192.0.2.97/32",
        "dev",
        "br-ex",
        "table",
        "200",
        "proto",
        "186",
    ]);
    let mut d = DesiredSystem::default();
    d.routes
        .insert(dev_route(T, "192.0.2.97/32", "br-ex", true));
    d.routes
        .insert(dev_route(T, "192.0.2.98/32", "br-ex", true));
    d.ownership.tables.insert(T);
    let report = ns.reconciler().reconcile(&d).await.unwrap();
    println!("{report:?}");
    assert_eq!(
        report.added.get("routes"),
        Some(&1),
        "the other route is still added"
    );
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert!(
        report.errors[0].error.contains("protocol 186"),
        "{}",
        report.errors[0]
    );
    let t = ns.ip(&["-d", "route", "show", "table", "200"]);
    assert!(t.contains("192.0.2.97 dev br-ex proto bgp"), "{t}");
    assert!(
        t.contains("192.0.2.98 dev br-ex proto boot scope link"),
        "{t}"
    );
}

#[tokio::test]
async fn a_failing_object_is_reported_and_the_rest_applied() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
    ns.ip(&["link", "set", "bgp-nic", "up"]);
    let mut d = DesiredSystem::default();
    d.addresses.insert(AddressSpec {
        dev: ifname("bgp-nic"),
        addr: net("192.0.2.10/32"),
    });
    // No such device: reported with the object, nothing else disturbed.
    d.addresses.insert(AddressSpec {
        dev: ifname("nonexistent0"),
        addr: net("192.0.2.11/32"),
    });
    // A gateway the kernel refuses (unreachable in that table): the kernel's errno is reported.
    d.routes.insert(RouteSpec {
        via: Some(ip("203.0.113.1")),
        scope_link: false,
        ..dev_route(T, "10.9.0.0/24", "bgp-nic", false)
    });
    d.routes
        .insert(dev_route(T, "192.0.2.12/32", "bgp-nic", true));
    d.ownership.tables.insert(T);
    let report = ns.reconciler().reconcile(&d).await.unwrap();
    println!("{report:#?}");
    assert_eq!(report.added.get("addresses"), Some(&1));
    assert_eq!(report.added.get("routes"), Some(&1));
    assert_eq!(report.errors.len(), 2, "{:#?}", report.errors);
    assert!(report.errors.iter().any(|e| e.class == "addresses"
        && e.object.contains("192.0.2.11/32")
        && e.error.contains("device nonexistent0 does not exist")));
    assert!(report.errors.iter().any(|e| e.class == "routes"
        && e.object.contains("10.9.0.0/24 via 203.0.113.1")
        && e.error.contains("os error")));
}

#[tokio::test]
async fn sysctls_of_a_dotted_device_name_use_the_slash_form() {
    let ns = TestNetns::new();
    let mut d = DesiredSystem::default();
    // A VLAN-style name (`<bridge[:10]>.<vid>`); a bridge here, the kernel lacks 8021q.
    d.links.insert(up_link("br-ex.100", LinkKind::Bridge));
    d.sysctls.insert(
        "net.ipv4.conf.br-ex/100.proxy_arp".to_owned(),
        "1".to_owned(),
    );
    d.sysctls.insert(
        "net.ipv6.conf.br-ex/100.proxy_ndp".to_owned(),
        "1".to_owned(),
    );
    let r = ns.reconciler();
    let report = r.reconcile(&d).await.unwrap();
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.changed.get("sysctls"), Some(&2), "{report:?}");
    assert_eq!(ns.sysctl("net.ipv4.conf.br-ex/100.proxy_arp"), "1");
    assert_eq!(ns.sysctl("net.ipv6.conf.br-ex/100.proxy_ndp"), "1");
    assert!(r.reconcile(&d).await.unwrap().is_noop());
    // A sysctl of a device that does not exist is reported with its path, the rest applied.
    d.sysctls.insert(
        "net.ipv4.conf.nonexistent0.proxy_arp".to_owned(),
        "1".to_owned(),
    );
    let report = r.reconcile(&d).await.unwrap();
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    assert!(
        report.errors[0]
            .object
            .contains("/proc/sys/net/ipv4/conf/nonexistent0/proxy_arp")
    );
}

/// Routes are read per table of interest: the kernel filters (strict checking), so a full BGP
/// feed in the main table or the local table's per-address routes are never dumped.
#[tokio::test]
async fn route_dumps_read_only_the_requested_table() {
    use ovn_bgp_agent::caps::netlink::conn::NetlinkConn;
    use ovn_bgp_agent::caps::netlink::netns::NetnsWorker;
    use ovn_bgp_agent::caps::netlink::{NetnsTarget, routes};
    use rtnetlink::packet_route::AddressFamily;

    let ns = TestNetns::new();
    ns.ip(&["link", "add", "br-ex", "type", "bridge"]);
    ns.ip(&["link", "set", "br-ex", "up"]);
    ns.ip(&["route", "add", "192.0.2.1/32", "dev", "br-ex"]);
    ns.ip(&[
        "route",
        "add",
        "192.0.2.2/32",
        "dev",
        "br-ex",
        "table",
        "200",
    ]);
    ns.ip(&[
        "route",
        "add",
        "192.0.2.3/32",
        "dev",
        "br-ex",
        "table",
        "300",
    ]);
    let worker = NetnsWorker::spawn(NetnsTarget::from_config(Some(&ns.name))).unwrap();
    let conn = NetlinkConn::open(&worker, ovn_bgp_agent::caps::netlink::conn::REQUEST_TIMEOUT)
        .await
        .unwrap();
    let dump = conn
        .dump("routes", routes::dump_request(AddressFamily::Inet, 200))
        .await
        .unwrap();
    let tables: Vec<u32> = dump
        .iter()
        .filter_map(routes::parse)
        .map(|r| r.identity.table)
        .collect();
    assert_eq!(tables, [200], "{dump:?}");
}

/// The kernel's own local route of an address (EVPN `lo-<vni>`: upstream deletes it so the
/// VRF forwards instead of delivering) is removed while the address stays, and removed again
/// when the kernel re-adds it with the address. Outside a VRF the kernel puts it in table
/// `local` (255), which the suppression names explicitly.
#[tokio::test]
async fn the_kernels_local_route_of_an_address_is_suppressed() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "lo-100", "type", "ifb"]);
    ns.ip(&["link", "set", "lo-100", "up"]);
    ns.ip(&["addr", "add", "192.0.2.7/32", "dev", "lo-100"]);
    ns.ip(&["addr", "add", "2001:db8::7/128", "dev", "lo-100", "nodad"]);
    // A second address on the device, whose local route is not suppressed.
    ns.ip(&["addr", "add", "192.0.2.8/32", "dev", "lo-100"]);
    let local = |family: &str| ns.ip(&[family, "route", "show", "table", "local", "dev", "lo-100"]);
    assert!(
        local("-4").contains("local 192.0.2.7 proto kernel scope host"),
        "{}",
        local("-4")
    );
    assert!(
        local("-6").contains("local 2001:db8::7 proto kernel metric 0"),
        "{}",
        local("-6")
    );

    let mut d = DesiredSystem::default();
    for dst in ["192.0.2.7", "2001:db8::7"] {
        d.suppressed_local_routes.insert(LocalRouteSuppression {
            table: 255,
            dst: ip(dst),
            dev: ifname("lo-100"),
        });
    }
    let r = ns.reconciler();
    let report = r.reconcile(&d).await.expect("reconcile");
    println!("{report:?}");
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.removed.get("local_routes"), Some(&2), "{report:?}");
    assert!(!local("-4").contains("192.0.2.7"), "{}", local("-4"));
    assert!(!local("-6").contains("2001:db8::7"), "{}", local("-6"));
    assert!(
        local("-4").contains("local 192.0.2.8 "),
        "only the named one goes"
    );
    let addrs = ns.ip(&["addr", "show", "dev", "lo-100"]);
    assert!(
        addrs.contains("192.0.2.7/32") && addrs.contains("2001:db8::7/128"),
        "{addrs}"
    );
    assert!(r.reconcile(&d).await.unwrap().is_noop(), "second reconcile");

    // The address re-added: the kernel adds the local route again, the reconciler removes it.
    ns.ip(&["addr", "del", "192.0.2.7/32", "dev", "lo-100"]);
    ns.ip(&["addr", "add", "192.0.2.7/32", "dev", "lo-100"]);
    assert!(local("-4").contains("local 192.0.2.7 "));
    let again = r.reconcile(&d).await.unwrap();
    assert_eq!(again.removed.get("local_routes"), Some(&1), "{again:?}");
    assert!(!local("-4").contains("192.0.2.7"), "{}", local("-4"));

    // A device that does not exist is reported, naming the route.
    d.suppressed_local_routes.insert(LocalRouteSuppression {
        table: 255,
        dst: ip("192.0.2.9"),
        dev: ifname("lo-999"),
    });
    let missing = r.reconcile(&d).await.unwrap();
    assert_eq!(missing.errors.len(), 1, "{missing:?}");
    assert_eq!(
        missing.errors[0].to_string(),
        "local_routes: local route 192.0.2.9 dev lo-999 table 255 proto kernel scope host: device lo-999 does not exist"
    );
}

/// Stretched L2's VRF table (G1): in a swept table every route with a destination that is not
/// desired goes, whatever its protocol, except the kernel's own and the routing daemons'
/// (BGP's 186, FRR's static 196); a foreign route with a desired route's identity is replaced;
/// default routes and other tables are untouched. A second reconcile changes nothing.
#[tokio::test]
async fn a_swept_table_loses_its_stray_routes_but_never_bgp_kernel_or_other_tables() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
    ns.ip(&["link", "set", "bgp-nic", "up"]);
    let add = |args: &[&str]| {
        let mut v = vec!["route", "add"];
        v.extend_from_slice(args);
        ns.ip(&v);
    };
    add(&[
        "192.0.2.0/24",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "static",
    ]);
    add(&[
        "198.51.100.0/24",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "bgp",
    ]);
    add(&[
        "198.51.101.0/24",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "196",
    ]);
    add(&[
        "198.51.102.0/24",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "kernel",
    ]);
    add(&[
        "default", "dev", "bgp-nic", "table", "10", "proto", "static",
    ]);
    add(&[
        "203.0.113.0/24",
        "dev",
        "bgp-nic",
        "table",
        "11",
        "proto",
        "static",
    ]);
    add(&[
        "2001:db8:5::/64",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "static",
    ]);
    add(&[
        "172.24.4.0/24",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "static",
        "scope",
        "link",
    ]);
    add(&[
        "10.0.0.0/24",
        "via",
        "172.24.4.10",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "static",
    ]);

    let mut d = DesiredSystem::default();
    d.links.insert(up_link("bgp-nic", LinkKind::Ifb));
    d.ownership.link_names.insert(ifname("bgp-nic"));
    d.routes
        .insert(dev_route(10, "172.24.4.0/24", "bgp-nic", true));
    d.routes.insert(RouteSpec {
        via: Some(ip("172.24.4.10")),
        ..dev_route(10, "10.0.0.0/24", "bgp-nic", false)
    });
    d.ownership.tables.insert(10);
    d.ownership.swept_tables.insert(10);
    let r = ns.reconciler();
    let report = r.reconcile(&d).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.removed.get("routes"), Some(&2), "{report:?}");
    // Numeric protocols (`-N`): FRR's package names 196 `static` too.
    let t4 = ns.ip(&["-N", "route", "show", "table", "10"]);
    let t6 = ns.ip(&["-N", "-6", "route", "show", "table", "10"]);
    let t11 = ns.ip(&["-N", "route", "show", "table", "11"]);
    // (`-N` prints no protocol for boot, 3: the agent's routes, the two foreign ones replaced.)
    let mut lines: Vec<&str> = t4.lines().map(str::trim).collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "10.0.0.0/24 via 172.24.4.10 dev bgp-nic",
            "172.24.4.0/24 dev bgp-nic scope 253",
            "198.51.100.0/24 dev bgp-nic proto 186 scope 253",
            "198.51.101.0/24 dev bgp-nic proto 196 scope 253",
            "198.51.102.0/24 dev bgp-nic proto 2 scope 253",
            "default dev bgp-nic proto 4 scope 253",
        ],
        "{t4}"
    );
    assert!(!t6.contains("2001:db8:5::/64"), "{t6}");
    assert!(t11.contains("203.0.113.0/24 dev bgp-nic proto 4"), "{t11}");
    assert!(r.reconcile(&d).await.unwrap().is_noop());

    // Without the sweep (the other drivers' VRF table), a foreign static route stays.
    add(&[
        "192.0.2.0/24",
        "dev",
        "bgp-nic",
        "table",
        "10",
        "proto",
        "static",
    ]);
    d.ownership.swept_tables.clear();
    assert!(r.reconcile(&d).await.unwrap().is_noop());
    let t4 = ns.ip(&["-N", "route", "show", "table", "10"]);
    assert!(t4.contains("192.0.2.0/24 dev bgp-nic proto 4"), "{t4}");
}
