//! Screening of a desired state before it is applied: each invalid or conflicting object is
//! dropped and reported, everything else is applied.
//!
//! Deletions are computed from the desired state, so a dropped object would look "no longer
//! desired" and its live counterpart would be deleted (a route withdrawn because a second
//! tenant claimed the same prefix). So a dropped object is also *held*: whatever the kernel
//! has under its identity (the route of that table, destination and metric; the neighbour of
//! that device and IP; the link of that name...) is neither changed nor deleted until the
//! conflict is gone.
//!
//! The checks are per object (or per identity for conflicts), so screening a delta of a few
//! objects costs the same as screening them inside a full state.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;

use crate::system::{
    DesiredSystem, LOCAL_TABLE, LinkKind, LinkSpec, LocalRouteSuppression, NeighbourSpec,
    ObjectSet, Ownership, RouteSpec, RouteType, RuleSpec, retain_objects,
};

use super::changes::Changes;
use super::reconciler::class;
use super::routes::{self, RouteIdentity};
use super::sysctl;

/// Table numbers the agent never owns or writes to: unspec, default, main, local.
pub(crate) fn is_reserved_table(table: u32) -> bool {
    matches!(table, 0 | 253..=255)
}

fn bad_host_ip(ip: IpAddr) -> bool {
    ip.is_unspecified() || ip.is_multicast()
}

/// One object left out of the desired state, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// Object class, as in [`crate::system::ChangeReport`] (`routes`, `links`, ...).
    pub class: &'static str,
    /// The object, e.g. `route 192.0.2.1/32 dev bgp-nic table 200 proto boot scope link`.
    pub object: String,
    pub reason: String,
}

/// Identities of dropped objects: what the kernel has under them is left as it is.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub links: HashSet<String>,
    pub addresses: HashSet<(String, IpNet)>,
    pub rules: HashSet<RuleSpec>,
    pub routes: HashSet<RouteIdentity>,
    pub neighbours: HashSet<(String, IpAddr)>,
    pub proxy_neighbours: HashSet<(String, IpAddr)>,
}

/// A desired state without its invalid and conflicting objects.
pub(crate) struct Screened<'d> {
    /// Borrowed when nothing was dropped (the usual case: no copy of a large state).
    pub desired: Cow<'d, DesiredSystem>,
    pub held: Held,
    pub dropped: Vec<Dropped>,
}

/// Drop every invalid object and both (all) sides of every conflict.
///
/// Why all sides of a conflict and not the first or the last: the sets are ordered by value,
/// not by when an object was added, so "the later one" would be an arbitrary winner that can
/// flip when an unrelated field changes. Dropping every side and holding the identity keeps
/// what the kernel has (typically the object from before the conflict arose), reports the
/// conflict under every side's name, and changes nothing until the conflict is resolved.
pub(crate) fn screen(desired: &DesiredSystem) -> Screened<'_> {
    let mut s = Screening::default();
    s.links(&desired.links);
    for t in &desired.ownership.tables {
        if is_reserved_table(*t) {
            s.dropped.push(Dropped {
                class: class::OWNERSHIP,
                object: format!("ownership of table {t}"),
                reason: "reserved table (unspec/default/main/local); not owned".to_owned(),
            });
            s.bad_tables.insert(*t);
        }
    }
    for a in &desired.addresses {
        if bad_host_ip(a.addr.addr()) {
            s.dropped.push(Dropped {
                class: class::ADDRESSES,
                object: format!("address {} dev {}", a.addr, a.dev),
                reason: "not a unicast address".to_owned(),
            });
            s.held.addresses.insert((a.dev.to_string(), a.addr));
        }
    }
    for r in &desired.rules {
        let reason = if is_reserved_table(r.table) {
            Some(format!("table {} is reserved", r.table))
        } else if r.priority == 0 {
            Some("priority 0 belongs to the local table rule".to_owned())
        } else {
            None
        };
        if let Some(reason) = reason {
            s.dropped.push(Dropped {
                class: class::RULES,
                object: format!("rule {:?} table {}", r.selector, r.table),
                reason,
            });
            s.held.rules.insert(r.clone());
        }
    }
    s.routes(&desired.routes);
    s.neighbours(&desired.neighbours);
    for n in &desired.proxy_neighbours {
        if bad_host_ip(n.ip) {
            s.dropped.push(Dropped {
                class: class::PROXY_NEIGHBOURS,
                object: format!("proxy neighbour {} dev {}", n.ip, n.dev),
                reason: "not a unicast address".to_owned(),
            });
            s.held.proxy_neighbours.insert((n.dev.to_string(), n.ip));
        }
    }
    for (k, v) in &desired.sysctls {
        let problem = sysctl::key_path(k)
            .err()
            .or_else(|| sysctl::check_value(k, v).err());
        if let Some(e) = problem {
            s.dropped.push(Dropped {
                class: class::SYSCTLS,
                object: format!("sysctl {k:?}"),
                reason: e.to_string(),
            });
            s.bad_sysctls.insert(k.clone());
        }
    }
    for l in &desired.suppressed_local_routes {
        if let Some(reason) = local_route_problem(l, &desired.ownership) {
            s.dropped.push(Dropped {
                class: class::LOCAL_ROUTES,
                object: describe_suppression(l),
                reason: reason.to_owned(),
            });
            s.bad_local_routes.insert(l.clone());
        }
    }
    s.finish(desired)
}

/// Why the kernel's local route of `l` cannot be removed, if it cannot.
fn local_route_problem(l: &LocalRouteSuppression, own: &Ownership) -> Option<&'static str> {
    if l.table == 0 {
        Some("table 0 (unspec) holds no route")
    } else if l.table != LOCAL_TABLE && !own.tables.contains(&l.table) {
        // Also what lets a delta find the suppressions of an address it adds with a lookup
        // per table (the reconciler's `apply_delta`).
        Some("neither table local (255) nor one the agent owns")
    } else if bad_host_ip(l.dst) {
        Some("not a unicast address")
    } else {
        None
    }
}

/// [`screen`] of `new`, checking only what it adds to `old` (`changes`), when `old` was screened without
/// dropping anything and has the same links, sysctls and ownership (the caller checks that). A conflict in `new` involves at least one object `old` did not
/// have (`old` had none), so checking each added object alone and against the objects of
/// `new` with its identity is enough: a few lookups per event, not an index of every route.
/// `None` when an added object would be dropped: the caller screens `new` in full, for the
/// report of every side.
pub(crate) fn screen_delta<'d>(
    changes: &Changes<'_>,
    new: &'d DesiredSystem,
) -> Option<Screened<'d>> {
    let clean = changes
        .addresses
        .added
        .iter()
        .all(|a| !bad_host_ip(a.addr.addr()))
        && changes
            .rules
            .added
            .iter()
            .all(|r| !is_reserved_table(r.table) && r.priority != 0)
        && changes
            .routes
            .added
            .iter()
            .all(|r| route_problem(r).is_none() && !shares_identity(&new.routes, r))
        && changes
            .neighbours
            .added
            .iter()
            .all(|n| !bad_host_ip(n.ip) && !shares_key(&new.neighbours, n))
        && changes
            .proxy_neighbours
            .added
            .iter()
            .all(|n| !bad_host_ip(n.ip))
        && changes
            .local_routes
            .added
            .iter()
            .all(|l| local_route_problem(l, &new.ownership).is_none());
    clean.then(|| Screened {
        desired: Cow::Borrowed(new),
        held: Held::default(),
        dropped: Vec::new(),
    })
}

/// Whether another route of `routes` has the identity of `r` (table, destination network,
/// metric). Those routes have a destination address inside `r`'s network, so they are
/// found between the lowest such route and the network's last address.
fn shares_identity(routes: &ObjectSet<RouteSpec>, r: &RouteSpec) -> bool {
    let id = routes::desired_key(r, None).identity;
    let net = id.dst;
    let Ok(lowest_dst) = IpNet::new(net.network(), 0) else {
        return true;
    };
    let lowest = RouteSpec {
        table: id.table,
        dst: lowest_dst,
        route_type: RouteType::Unicast,
        via: None,
        dev: None,
        scope_link: false,
        metric: None,
    };
    routes
        .range(lowest..)
        .take_while(|o| {
            o.table == id.table
                && o.dst.addr().is_ipv4() == net.addr().is_ipv4()
                && o.dst.addr() <= net.broadcast()
        })
        .any(|o| o != r && routes::desired_key(o, None).identity == id)
}

/// Whether another neighbour of `neighbours` has the device and IP of `n`.
fn shares_key(neighbours: &ObjectSet<NeighbourSpec>, n: &NeighbourSpec) -> bool {
    let lowest = NeighbourSpec {
        dev: n.dev.clone(),
        ip: n.ip,
        lladdr: crate::types::MacAddr([0; 6]),
    };
    neighbours
        .range(lowest..)
        .take_while(|o| o.dev == n.dev && o.ip == n.ip)
        .any(|o| o != n)
}

pub(crate) fn describe_suppression(l: &LocalRouteSuppression) -> String {
    format!(
        "local route {} dev {} table {} proto kernel scope host",
        l.dst, l.dev, l.table
    )
}

#[derive(Default)]
struct Screening {
    dropped: Vec<Dropped>,
    held: Held,
    bad_tables: BTreeSet<u32>,
    bad_links: BTreeSet<LinkSpec>,
    bad_routes: BTreeSet<RouteSpec>,
    bad_neighbours: BTreeSet<NeighbourSpec>,
    bad_sysctls: BTreeSet<String>,
    bad_local_routes: BTreeSet<LocalRouteSuppression>,
}

impl Screening {
    fn links(&mut self, links: &crate::system::ObjectSet<LinkSpec>) {
        let mut by_name: BTreeMap<&str, Vec<&LinkSpec>> = BTreeMap::new();
        for l in links {
            by_name.entry(l.name.as_str()).or_default().push(l);
        }
        for (name, specs) in &by_name {
            if specs.len() > 1 {
                for l in specs {
                    self.drop_link(
                        l,
                        format!(
                            "desired {} times with different settings; none is applied, the link {name} is left as it is",
                            specs.len()
                        ),
                    );
                }
            }
        }
        for l in links {
            if let Some(reason) = link_problem(l) {
                self.drop_link(l, reason);
            }
        }
    }

    fn drop_link(&mut self, l: &LinkSpec, reason: String) {
        if self.bad_links.insert(l.clone()) {
            self.dropped.push(Dropped {
                class: class::LINKS,
                object: format!("link {} ({:?})", l.name, l.kind),
                reason,
            });
            self.held.links.insert(l.name.to_string());
        }
    }

    fn routes(&mut self, desired: &ObjectSet<RouteSpec>) {
        let mut by_identity: BTreeMap<RouteIdentity, Vec<&RouteSpec>> = BTreeMap::new();
        for r in desired {
            by_identity
                .entry(routes::desired_key(r, None).identity)
                .or_default()
                .push(r);
        }
        // Two routes the kernel cannot tell apart would replace each other on every reconcile.
        for specs in by_identity.values().filter(|v| v.len() > 1) {
            for r in specs {
                let others: Vec<String> = specs
                    .iter()
                    .filter(|o| *o != r)
                    .map(|o| routes::describe(o))
                    .collect();
                self.drop_route(
                    r,
                    format!(
                        "conflicts with {} (same table, destination and metric); neither is applied, the kernel's route is left as it is",
                        others.join(", ")
                    ),
                );
            }
        }
        for r in desired {
            if let Some(reason) = route_problem(r) {
                self.drop_route(r, reason);
            }
        }
    }

    fn drop_route(&mut self, r: &RouteSpec, reason: String) {
        if self.bad_routes.insert(r.clone()) {
            self.dropped.push(Dropped {
                class: class::ROUTES,
                object: routes::describe(r),
                reason,
            });
            self.held
                .routes
                .insert(routes::desired_key(r, None).identity);
        }
    }

    fn neighbours(&mut self, desired: &ObjectSet<NeighbourSpec>) {
        let mut by_key: BTreeMap<(&str, IpAddr), Vec<&NeighbourSpec>> = BTreeMap::new();
        for n in desired {
            by_key.entry((n.dev.as_str(), n.ip)).or_default().push(n);
        }
        for specs in by_key.values().filter(|v| v.len() > 1) {
            let macs: Vec<String> = specs.iter().map(|n| n.lladdr.to_string()).collect();
            for n in specs {
                self.drop_neighbour(
                    n,
                    format!(
                        "desired with {} MAC addresses ({}); none is applied, the kernel's entry is left as it is",
                        specs.len(),
                        macs.join(", ")
                    ),
                );
            }
        }
        for n in desired {
            if bad_host_ip(n.ip) {
                self.drop_neighbour(n, "not a unicast address".to_owned());
            }
        }
    }

    fn drop_neighbour(&mut self, n: &NeighbourSpec, reason: String) {
        if self.bad_neighbours.insert(n.clone()) {
            self.dropped.push(Dropped {
                class: class::NEIGHBOURS,
                object: format!("neighbour {} lladdr {} dev {}", n.ip, n.lladdr, n.dev),
                reason,
            });
            self.held.neighbours.insert((n.dev.to_string(), n.ip));
        }
    }

    fn finish(self, desired: &DesiredSystem) -> Screened<'_> {
        if self.dropped.is_empty() {
            return Screened {
                desired: Cow::Borrowed(desired),
                held: self.held,
                dropped: self.dropped,
            };
        }
        let mut d = desired.clone();
        d.ownership.tables.retain(|t| !self.bad_tables.contains(t));
        crate::system::retain_objects(&mut d.links, |l| !self.bad_links.contains(l));
        retain_objects(&mut d.addresses, |a| {
            !self.held.addresses.contains(&(a.dev.to_string(), a.addr))
        });
        retain_objects(&mut d.rules, |r| !self.held.rules.contains(r));
        for r in &self.bad_routes {
            d.routes.remove(r);
        }
        for n in &self.bad_neighbours {
            d.neighbours.remove(n);
        }
        retain_objects(&mut d.proxy_neighbours, |n| {
            !self
                .held
                .proxy_neighbours
                .contains(&(n.dev.to_string(), n.ip))
        });
        for k in &self.bad_sysctls {
            d.sysctls.remove(k);
        }
        retain_objects(&mut d.suppressed_local_routes, |l| {
            !self.bad_local_routes.contains(l)
        });
        Screened {
            desired: Cow::Owned(d),
            held: self.held,
            dropped: self.dropped,
        }
    }
}

fn link_problem(l: &LinkSpec) -> Option<String> {
    if l.master.as_ref() == Some(&l.name) {
        return Some("cannot be its own master".to_owned());
    }
    match &l.kind {
        LinkKind::Vrf { table } if is_reserved_table(*table) => {
            Some(format!("vrf table {table} is reserved"))
        }
        LinkKind::Vlan { id, .. } if !(1..=4094).contains(id) => {
            Some(format!("vlan id {id} outside 1..=4094"))
        }
        LinkKind::Vlan { parent, .. } if parent == &l.name => {
            Some("vlan parent is itself".to_owned())
        }
        LinkKind::Vxlan { vni, .. } if !(1..=0xFF_FFFF).contains(vni) => {
            Some(format!("vni {vni} outside 1..=16777215"))
        }
        LinkKind::Vxlan { dstport: 0, .. } => Some("vxlan dstport 0".to_owned()),
        LinkKind::Vxlan {
            local: Some(local), ..
        } if bad_host_ip(*local) => Some(format!("vxlan local {local} is not a host address")),
        LinkKind::Veth { peer } if peer == &l.name => Some("veth peer is itself".to_owned()),
        _ => None,
    }
}

fn route_problem(r: &RouteSpec) -> Option<String> {
    if is_reserved_table(r.table) {
        return Some("table is reserved".to_owned());
    }
    if r.via.is_some_and(|v| v.is_ipv4() != r.dst.addr().is_ipv4()) {
        return Some("gateway of the other address family".to_owned());
    }
    match r.route_type {
        RouteType::Unreachable if r.via.is_some() || r.dev.is_some() => {
            return Some("an unreachable route has no gateway or device".to_owned());
        }
        RouteType::Unicast if r.via.is_none() && r.dev.is_none() => {
            return Some("needs a gateway or a device".to_owned());
        }
        _ => {}
    }
    if r.scope_link && r.via.is_some() {
        return Some("scope link with a gateway".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::AddressSpec;
    use crate::system::RuleSpec;
    use crate::types::InterfaceName;

    fn name(s: &str) -> InterfaceName {
        InterfaceName::new(s).unwrap()
    }

    fn route(dst: &str, dev: &str) -> RouteSpec {
        RouteSpec {
            table: 200,
            dst: dst.parse().unwrap(),
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(name(dev)),
            scope_link: true,
            metric: None,
        }
    }

    /// One object of a small world where objects collide: routes of one identity written
    /// differently (a host bit set, the IPv4 metric spelled out), neighbours of one IP with
    /// two MACs, and invalid ones of every class.
    fn object(d: &mut DesiredSystem, b: [u8; 4]) {
        let table = [200, 201, 254][usize::from(b[1] % 3)];
        match b[0] % 6 {
            0 => {
                let dst = [
                    "192.0.2.1/32",
                    "192.0.2.2/32",
                    "10.0.0.0/24",
                    "10.0.0.1/24",
                    "10.0.0.7/32",
                    "2001:db8::/64",
                    "2001:db8::5/128",
                    "0.0.0.0/0",
                ][usize::from(b[2] % 8)];
                let mut r = route(dst, ["br-ex", "br-vlan"][usize::from(b[3] % 2)]);
                r.table = table;
                r.metric = (b[3] & 2 != 0).then_some(0);
                if b[3] & 4 != 0 {
                    r.via = Some("192.0.2.254".parse().unwrap());
                    r.scope_link = b[3] & 8 != 0;
                }
                d.routes.insert(r);
            }
            1 => {
                d.neighbours.insert(NeighbourSpec {
                    dev: name(["br-ex", "br-vlan"][usize::from(b[1] % 2)]),
                    ip: ["192.0.2.9", "192.0.2.10", "224.0.0.1"][usize::from(b[2] % 3)]
                        .parse()
                        .unwrap(),
                    lladdr: crate::types::MacAddr([2, 0, 0, 0, 0, b[3] % 3]),
                });
            }
            2 => {
                d.addresses.insert(AddressSpec {
                    dev: name("bgp-nic"),
                    addr: ["192.0.2.1/32", "192.0.2.2/32", "224.0.0.5/32", "0.0.0.0/32"]
                        [usize::from(b[2] % 4)]
                    .parse()
                    .unwrap(),
                });
            }
            3 => {
                d.rules.insert(RuleSpec {
                    selector: crate::system::RuleSelector::To(
                        ["192.0.2.1/32", "10.0.0.1/24"][usize::from(b[2] % 2)]
                            .parse()
                            .unwrap(),
                    ),
                    table,
                    priority: [1000, 0][usize::from(b[3].is_multiple_of(5))],
                });
            }
            5 => {
                // Table 200 is the agent's (see the test), 201 is not, 0 names nothing.
                d.suppressed_local_routes.insert(LocalRouteSuppression {
                    table: [LOCAL_TABLE, 200, 201, 0][usize::from(b[1] % 4)],
                    dst: ["192.0.2.1", "2001:db8::7", "224.0.0.1"][usize::from(b[2] % 3)]
                        .parse()
                        .unwrap(),
                    dev: name("lo-100"),
                });
            }
            _ => {
                d.proxy_neighbours
                    .insert(crate::system::ProxyNeighbourSpec {
                        dev: name("br-ex"),
                        ip: ["2001:db8::", "ff02::1"][usize::from(b[2] % 2)]
                            .parse()
                            .unwrap(),
                    });
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Screening what a state adds to a clean one finds a problem exactly when a full
        /// screening does, and otherwise gives what it gives.
        #[test]
        fn a_delta_screens_as_the_whole_state(
            base in proptest::collection::vec(proptest::prelude::any::<[u8; 4]>(), 0..20),
            added in proptest::collection::vec(proptest::prelude::any::<[u8; 4]>(), 0..4),
            removed in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3),
        ) {
            let mut raw = DesiredSystem::default();
            raw.ownership.tables.insert(200);
            for b in base {
                object(&mut raw, b);
            }
            // A clean state: what screening kept (both sides of a conflict went).
            let old = screen(&raw).desired.into_owned();
            proptest::prop_assume!(screen(&old).dropped.is_empty());
            let mut new = old.clone();
            for b in added {
                object(&mut new, b);
            }
            for i in removed {
                if let Some(r) = new.routes.iter().nth(usize::from(i) % new.routes.len().max(1)).cloned() {
                    new.routes.remove(&r);
                }
            }
            let full = screen(&new);
            match screen_delta(&Changes::between(&old, &new), &new) {
                Some(delta) => {
                    proptest::prop_assert!(full.dropped.is_empty(), "missed: {:?}", full.dropped);
                    proptest::prop_assert!(matches!(delta.desired, Cow::Borrowed(_)));
                    proptest::prop_assert!(delta.dropped.is_empty());
                }
                None => proptest::prop_assert!(!full.dropped.is_empty(), "a clean state refused"),
            }
        }
    }

    #[test]
    fn a_valid_state_is_borrowed_and_nothing_is_held() {
        let mut d = DesiredSystem::default();
        d.routes.insert(route("192.0.2.1/32", "br-ex"));
        d.addresses.insert(AddressSpec {
            dev: name("bgp-nic"),
            addr: "192.0.2.1/32".parse().unwrap(),
        });
        let s = screen(&d);
        assert!(matches!(s.desired, Cow::Borrowed(_)));
        assert!(s.dropped.is_empty() && s.held.routes.is_empty());
    }

    #[test]
    fn every_side_of_a_conflict_is_dropped_and_held_the_rest_kept() {
        let mut d = DesiredSystem::default();
        d.routes.insert(route("192.0.2.1/32", "br-ex"));
        d.routes.insert(route("192.0.2.1/32", "br-vlan"));
        d.routes.insert(route("192.0.2.2/32", "br-ex"));
        for mac in ["02:00:00:00:00:01", "02:00:00:00:00:02"] {
            d.neighbours.insert(NeighbourSpec {
                dev: name("br-ex"),
                ip: "192.0.2.9".parse().unwrap(),
                lladdr: mac.parse().unwrap(),
            });
        }
        d.addresses.insert(AddressSpec {
            dev: name("bgp-nic"),
            addr: "224.0.0.5/32".parse().unwrap(),
        });
        d.ownership.tables.extend([200, 254]);
        let s = screen(&d);
        let classes: Vec<&str> = s.dropped.iter().map(|p| p.class).collect();
        assert_eq!(
            classes,
            [
                "ownership",
                "addresses",
                "routes",
                "routes",
                "neighbours",
                "neighbours"
            ],
            "{:#?}",
            s.dropped
        );
        assert!(
            s.dropped[2].reason.contains("dev br-vlan"),
            "each side names the other: {}",
            s.dropped[2].reason
        );
        let kept = &s.desired;
        assert_eq!(
            kept.routes.iter().collect::<Vec<_>>(),
            [&route("192.0.2.2/32", "br-ex")]
        );
        assert!(kept.neighbours.is_empty() && kept.addresses.is_empty());
        assert_eq!(kept.ownership.tables, [200].into());
        assert_eq!(s.held.routes.len(), 1);
        assert!(
            s.held
                .neighbours
                .contains(&("br-ex".to_owned(), "192.0.2.9".parse().unwrap()))
        );
    }
}
