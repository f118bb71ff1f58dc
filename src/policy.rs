//! The policy stage between a driver and a backend: exposures that must never reach the host's
//! routing or BGP, whatever a database says, are taken out of the set and reported as skipped
//! with the row they came from.
//!
//! A tenant controls addresses and subnets (a VM port's IPs, a router interface's CIDR); the
//! OVN databases are not a trust boundary the host's routing should depend on. Refused:
//! multicast, loopback, link-local, unspecified and limited-broadcast addresses; prefixes shorter
//! than `[policy] min_prefix_length_ipv4/6`; anything that equals or covers one of the host's own
//! addresses or an OVSDB remote (an exposure there would steal the host's management or
//! database traffic); and a tenant IP equal to a floating IP exposed in the same scope (the
//! floating IP keeps the address).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::PolicySection;
use std::sync::Arc;

use crate::exposure::{
    ExposedIp, ExposedRoute, ExposureKind, ExposureSet, POLICY, ScopeId, SkippedRow,
};

/// What the policy stage protects, gathered by the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PolicyContext {
    pub min_prefix_v4: u8,
    pub min_prefix_v6: u8,
    /// The host's own addresses (not those the agent put there) and the OVSDB remotes' IPs.
    pub protected: Vec<IpAddr>,
}

impl PolicyContext {
    pub(crate) fn from_config(policy: &PolicySection) -> Self {
        Self {
            min_prefix_v4: policy.min_prefix_length_ipv4,
            min_prefix_v6: policy.min_prefix_length_ipv6,
            protected: Vec::new(),
        }
    }
}

/// Why `ip` can never be announced, if it cannot.
fn unroutable(ip: IpAddr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified address");
    }
    if ip.is_loopback() {
        return Some("loopback address");
    }
    if ip.is_multicast() {
        return Some("multicast address");
    }
    match ip {
        IpAddr::V4(v4) if v4.is_link_local() => Some("link-local address"),
        IpAddr::V4(v4) if v4.is_broadcast() => Some("broadcast address"),
        IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80 => Some("link-local address"),
        // ::ffff:a.b.c.d would be announced as an IPv6 route to an IPv4 host.
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => Some("IPv4-mapped IPv6 address"),
        _ => None,
    }
}

impl PolicyContext {
    fn refuse_prefix(&self, net: IpNet) -> Option<String> {
        let min = match net {
            IpNet::V4(_) => self.min_prefix_v4,
            IpNet::V6(_) => self.min_prefix_v6,
        };
        if net.prefix_len() < min {
            return Some(format!(
                "{net}: prefix shorter than /{min} ([policy] min_prefix_length_ipv{})",
                if net.addr().is_ipv4() { 4 } else { 6 }
            ));
        }
        if let Some(why) = unroutable(net.network()) {
            return Some(format!("{net}: {why}"));
        }
        if let Some(p) = self.protected.iter().find(|p| net.contains(*p)) {
            return Some(format!(
                "{net} covers {p}, an address of this host or an OVSDB remote"
            ));
        }
        None
    }

    fn refuse_ip(&self, ip: IpAddr) -> Option<String> {
        if let Some(why) = unroutable(ip) {
            return Some(format!("{ip}: {why}"));
        }
        if self.protected.contains(&ip) {
            return Some(format!(
                "{ip} is an address of this host or an OVSDB remote"
            ));
        }
        None
    }
}

fn refused(row: &str, reason: String) -> SkippedRow {
    SkippedRow {
        table: POLICY.to_owned(),
        row: row.to_owned(),
        reason,
    }
}

/// Take every refused exposure out of `set` and record it in `set.skipped` (from scratch: see
/// [`PolicyStage`] for the stage that keeps its last verdicts).
#[cfg(test)]
pub(crate) fn apply(set: &mut ExposureSet, ctx: &PolicyContext) {
    PolicyStage::new(ctx.clone()).apply(set);
}

/// One scope's IPs and routes as the stage last saw and left them.
#[derive(Debug, Default)]
struct LastScope {
    /// The driver's IPs (after the shadowed ones were resolved), with the verdicts on them.
    ips: Verdicts<IpAddr, Arc<ExposedIp>>,
    /// The scope's routes (the stretched-L2 driver announces one per router subnet of the
    /// cloud), judged the same way.
    routes: Verdicts<IpNet, ExposedRoute>,
}

/// A persistent map of exposures as the stage last saw it, what it kept of it and the
/// refused ones with their report.
#[derive(Debug)]
struct Verdicts<K: Ord + Clone, V: Clone> {
    input: imbl::OrdMap<K, V>,
    kept: imbl::OrdMap<K, V>,
    refused: BTreeMap<K, SkippedRow>,
}

impl<K: Ord + Clone, V: Clone> Default for Verdicts<K, V> {
    fn default() -> Self {
        Self {
            input: imbl::OrdMap::new(),
            kept: imbl::OrdMap::new(),
            refused: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone, V: Clone + PartialEq> Verdicts<K, V> {
    /// `input` judged by `verdict`, from these verdicts on the last input: only the entries
    /// that differ from it are looked at (found by visiting what the two maps do not share).
    /// The refused entries are taken out of the kept map one by one, so it shares its tree
    /// with the input (a rebuilt map would share nothing with the next stage's last one).
    fn judge(
        mut self,
        input: &imbl::OrdMap<K, V>,
        verdict: impl Fn(&K, &V) -> Option<SkippedRow>,
    ) -> Self {
        if self.input.is_empty() {
            // From scratch: the kept map starts as the input itself.
            let mut kept = input.clone();
            let mut refused = BTreeMap::new();
            for (k, v) in input {
                if let Some(row) = verdict(k, v) {
                    refused.insert(k.clone(), row);
                    kept.remove(k);
                }
            }
            return Self {
                input: input.clone(),
                kept,
                refused,
            };
        }
        let last = &mut self;
        use imbl::ordmap::DiffItem;
        for change in last.input.diff(input) {
            let (k, new) = match change {
                DiffItem::Add(k, v) | DiffItem::Update { new: (k, v), .. } => (k, Some(v)),
                DiffItem::Remove(k, _) => (k, None),
            };
            last.refused.remove(k);
            match new.map(|v| (v, verdict(k, v))) {
                None => {
                    last.kept.remove(k);
                }
                Some((_, Some(row))) => {
                    last.refused.insert(k.clone(), row);
                    last.kept.remove(k);
                }
                Some((v, None)) => {
                    last.kept.insert(k.clone(), v.clone());
                }
            }
        }
        last.input = input.clone();
        self
    }
}

/// The policy stage (see the module's documentation), keeping its verdicts on the IPs between
/// calls: a set whose IPs share their maps with the last one (the drivers' layout) is judged
/// by what differs (issue 17: a gateway exposing 30k IPs checks the one that came, not the
/// 30k). The result is the same as judging everything again, which the tests check.
#[derive(Debug)]
pub(crate) struct PolicyStage {
    ctx: PolicyContext,
    last: BTreeMap<ScopeId, LastScope>,
}

impl PolicyStage {
    pub(crate) fn new(ctx: PolicyContext) -> Self {
        Self {
            ctx,
            last: BTreeMap::new(),
        }
    }

    /// Protect these addresses from now on (the host's own, the OVSDB remotes'): the next
    /// set is judged from scratch when they changed.
    pub(crate) fn set_protected(&mut self, protected: Vec<IpAddr>) {
        if self.ctx.protected != protected {
            self.ctx.protected = protected;
            self.last.clear();
        }
    }

    /// Take every refused exposure out of `set` and record it in `set.skipped`.
    pub(crate) fn apply(&mut self, set: &mut ExposureSet) {
        let ctx = &self.ctx;
        let mut skipped = Vec::new();
        let mut last = std::mem::take(&mut self.last);
        for (scope_id, scope) in &mut set.scopes {
            resolve_shadowed(scope, &mut skipped);
            let previous = last.remove(scope_id).unwrap_or_default();
            let judged = LastScope {
                ips: previous
                    .ips
                    .judge(&scope.ips, |_, exposed| refused_ip(ctx, *scope_id, exposed)),
                // The kept routes' map is the driver's less the refused ones (shared with its
                // last one, which the render compares it with).
                routes: previous.routes.judge(&scope.routes, |net, route| {
                    ctx.refuse_prefix(*net).map(|reason| {
                        refused(
                            &route.source,
                            format!("route in scope {scope_id}: {reason}"),
                        )
                    })
                }),
            };
            scope.ips = judged.ips.kept.clone();
            skipped.extend(judged.ips.refused.values().cloned());
            scope.routes = judged.routes.kept.clone();
            skipped.extend(judged.routes.refused.values().cloned());
            self.last.insert(*scope_id, judged);
            scope.subnets.retain(|subnet| {
                let reason = ctx
                    .refuse_prefix(subnet.router_ip.trunc())
                    .or_else(|| ctx.refuse_ip(subnet.via).map(|r| format!("via {r}")));
                match reason {
                    Some(reason) => {
                        skipped.push(refused(
                            &subnet.source,
                            format!("tenant subnet in scope {scope_id}: {reason}"),
                        ));
                        false
                    }
                    None => true,
                }
            });
        }
        // Recorded once each, in linear time: a flood of refused exposures (a tenant's 10k IPs
        // in a protected range) must not cost a quadratic search per reconcile.
        for s in skipped {
            set.skip_index.record(&mut set.skipped, s);
        }
    }
}

/// Why an exposed IP is refused, as reported.
fn refused_ip(ctx: &PolicyContext, scope: ScopeId, exposed: &ExposedIp) -> Option<SkippedRow> {
    let reason = ctx.refuse_ip(exposed.ip)?;
    Some(refused(
        &exposed.source,
        format!("{:?} in scope {scope}: {reason}", exposed.kind),
    ))
}

/// A tenant IP and a floating IP with the same address in one scope: the floating IP keeps it
/// (announcing the tenant's /32 would steal the floating IP's traffic), the tenant IP is
/// reported. Other shadowed producers are duplicates of a kind the first producer covers.
fn resolve_shadowed(scope: &mut crate::exposure::ExposureScope, skipped: &mut Vec<SkippedRow>) {
    let shadowed = scope.take_shadowed();
    for later in shadowed {
        let Some(first) = scope.ips.get(&later.ip) else {
            continue;
        };
        let tenant_vs_fip = |a: &ExposedIp, b: &ExposedIp| {
            a.kind == ExposureKind::TenantPort && b.kind == ExposureKind::FloatingIp
        };
        if tenant_vs_fip(first, &later) {
            skipped.push(refused(
                &first.source,
                format!(
                    "tenant IP {} equals floating IP of {}; the floating IP is exposed",
                    first.ip, later.source
                ),
            ));
            scope.ips.insert(later.ip, later);
        } else if tenant_vs_fip(&later, first) {
            skipped.push(refused(
                &later.source,
                format!(
                    "tenant IP {} equals floating IP of {}; the floating IP is exposed",
                    later.ip, first.source
                ),
            ));
        }
    }
}

/// The IPs of OVSDB remotes (`tcp:10.0.0.1:6642,ssl:[fd00::1]:6642`); unix sockets have none.
pub(crate) fn remote_ips(remotes: &str) -> Vec<IpAddr> {
    remotes
        .split(',')
        .filter_map(|r| {
            let rest = r
                .trim()
                .strip_prefix("tcp:")
                .or_else(|| r.trim().strip_prefix("ssl:"))?;
            let host = match rest.strip_prefix('[') {
                Some(v6) => v6.split_once(']')?.0,
                None => rest.rsplit_once(':').map_or(rest, |(h, _)| h),
            };
            host.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::exposure::{ExposedSubnet, IpMap, ProviderNetwork, RouteKind, RouteMap};
    use crate::types::InterfaceName;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// After every step of a random sequence (IPs coming, going, changing kind or source,
        /// some unroutable or protected, tenant IPs shadowed by floating IPs, the protected
        /// addresses changing; routes coming, going and changing, some too short, unroutable or
        /// covering a protected address), the stage that keeps its verdicts gives what judging
        /// the same set from scratch gives: the IPs and routes kept and the rows reported, in
        /// order.
        #[test]
        fn keeping_verdicts_equals_judging_from_scratch(
            steps in proptest::collection::vec(
                (
                    proptest::collection::vec((0u8..24, 0u8..4, proptest::bool::ANY), 0..8),
                    proptest::option::of(0u8..24),
                    proptest::collection::vec((0u8..24, 0u8..3), 0..6),
                ),
                1..10,
            ),
        ) {
            // A small address space where some addresses are refused.
            let ip = |n: u8| -> IpAddr {
                match n % 6 {
                    0 => format!("127.0.0.{n}"),
                    1 => format!("192.0.2.{n}"),
                    _ => format!("10.0.0.{n}"),
                }
                .parse()
                .unwrap()
            };
            // Routes: /24s of those addresses, and /4s (shorter than the minimum).
            let net = |n: u8| -> IpNet {
                let len = if n % 5 == 4 { 4 } else { 24 };
                IpNet::new(ip(n), len).unwrap().trunc()
            };
            let mut ips = IpMap::new();
            let mut routes = RouteMap::new();
            let mut stage = PolicyStage::new(ctx());
            let mut protected = ctx().protected;
            for (changes, protect, route_changes) in steps {
                for (n, what) in route_changes {
                    let prefix = net(n);
                    if what == 0 {
                        routes.remove(&prefix);
                    } else {
                        routes.insert(prefix, ExposedRoute {
                            prefix,
                            kind: RouteKind::TenantSubnet,
                            via: None,
                            provider: None,
                            source: format!("router-{what}"),
                        });
                    }
                }
                let mut shadowed = Vec::new();
                for (n, what, tenant) in changes {
                    let kind = if tenant { ExposureKind::TenantPort } else { ExposureKind::FloatingIp };
                    match what {
                        0 => {
                            ips.remove(&ip(n));
                        }
                        // A later producer of another kind, shadowed.
                        1 => shadowed.push(Arc::new(ExposedIp::announced(ip(n), kind, format!("later-{n}")))),
                        _ => {
                            let e = ExposedIp::announced(ip(n), kind, format!("port-{what}"));
                            ips.insert(ip(n), Arc::new(e));
                        }
                    }
                }
                if let Some(n) = protect {
                    protected = vec![ip(n)];
                    stage.set_protected(protected.clone());
                }
                let make = || {
                    let mut set = ExposureSet::default();
                    let scope = set.global_mut();
                    scope.ips = ips.clone();
                    scope.routes = routes.clone();
                    scope.shadowed = shadowed.clone();
                    set
                };
                let (mut kept, mut scratch) = (make(), make());
                stage.apply(&mut kept);
                apply(&mut scratch, &PolicyContext { protected: protected.clone(), ..ctx() });
                proptest::prop_assert_eq!(&kept.global().ips, &scratch.global().ips);
                proptest::prop_assert_eq!(&kept.global().routes, &scratch.global().routes);
                proptest::prop_assert_eq!(&kept.skipped, &scratch.skipped);
            }
        }
    }

    fn ctx() -> PolicyContext {
        PolicyContext {
            min_prefix_v4: 8,
            min_prefix_v6: 32,
            protected: vec!["192.0.2.7".parse().unwrap(), "fd00:64::1".parse().unwrap()],
        }
    }

    fn ip(kind: ExposureKind, addr: &str, source: &str) -> ExposedIp {
        ExposedIp::announced(addr.parse().unwrap(), kind, source)
    }

    fn provider() -> ProviderNetwork {
        ProviderNetwork {
            physnet: "physnet1".into(),
            bridge: InterfaceName::new("br-ex").unwrap(),
            vlan: None,
            evpn: None,
        }
    }

    #[test]
    fn unroutable_and_protected_ips_are_refused_with_their_row() {
        let mut set = ExposureSet::default();
        for (addr, source) in [
            ("224.0.0.5", "vm-mcast"),
            ("127.0.0.2", "vm-lo"),
            ("169.254.1.1", "vm-ll"),
            ("fe80::1", "vm-ll6"),
            ("0.0.0.0", "vm-zero"),
            ("255.255.255.255", "vm-bcast"),
            ("::ffff:10.0.0.1", "vm-mapped"),
            ("192.0.2.7", "vm-host"),
            ("172.24.4.10", "vm-good"),
            ("2001:db8::10", "vm-good6"),
        ] {
            set.expose_ip(ip(ExposureKind::ProviderPort, addr, source));
        }
        apply(&mut set, &ctx());
        let kept: BTreeSet<String> = set
            .global()
            .ips
            .values()
            .map(|e| e.source.to_string())
            .collect();
        assert_eq!(
            kept,
            BTreeSet::from(["vm-good".to_owned(), "vm-good6".to_owned()])
        );
        let rows: BTreeSet<&str> = set.skipped.iter().map(|s| s.row.as_str()).collect();
        assert_eq!(rows.len(), 8, "{:?}", set.skipped);
        assert!(set.skipped.iter().all(|s| s.table == POLICY));
        let host = set.skipped.iter().find(|s| s.row == "vm-host").unwrap();
        assert!(host.reason.contains("address of this host"), "{host:?}");
        let mcast = set.skipped.iter().find(|s| s.row == "vm-mcast").unwrap();
        assert!(mcast.reason.contains("multicast"), "{mcast:?}");
    }

    #[test]
    fn short_and_covering_prefixes_are_refused() {
        let mut set = ExposureSet::default();
        let scope = set.scope_mut(ScopeId::Global);
        for (prefix, source) in [
            ("0.0.0.0/0", "default"),
            ("10.0.0.0/7", "short"),
            ("192.0.2.0/24", "covers-host"),
            ("2001:db8::/16", "short6"),
            ("fd00:64::/64", "covers-host6"),
            ("172.24.4.0/24", "good"),
        ] {
            scope.expose_route(ExposedRoute {
                prefix: prefix.parse().unwrap(),
                kind: RouteKind::TenantSubnet,
                via: None,
                provider: None,
                source: source.into(),
            });
        }
        scope.subnets.insert(ExposedSubnet {
            router_ip: "192.0.2.1/24".parse().unwrap(),
            via: "172.24.4.10".parse().unwrap(),
            provider: provider(),
            source: "lrp-covers-host".into(),
        });
        scope.subnets.insert(ExposedSubnet {
            router_ip: "10.0.0.1/24".parse().unwrap(),
            via: "172.24.4.10".parse().unwrap(),
            provider: provider(),
            source: "lrp-good".into(),
        });
        apply(&mut set, &ctx());
        let routes: Vec<String> = set.global().routes.keys().map(|p| p.to_string()).collect();
        assert_eq!(routes, vec!["172.24.4.0/24"]);
        let subnets: Vec<&str> = set
            .global()
            .subnets
            .iter()
            .map(|s| s.source.as_str())
            .collect();
        assert_eq!(subnets, vec!["lrp-good"]);
        let short = set.skipped.iter().find(|s| s.row == "short").unwrap();
        assert!(short.reason.contains("min_prefix_length_ipv4"), "{short:?}");
        assert!(
            set.skipped
                .iter()
                .any(|s| s.row == "lrp-covers-host" && s.reason.contains("covers 192.0.2.7"))
        );
        assert_eq!(set.skipped.len(), 6, "{:?}", set.skipped);
    }

    #[test]
    fn a_tenant_ip_equal_to_a_floating_ip_loses_whichever_came_first() {
        for tenant_first in [true, false] {
            let mut set = ExposureSet::default();
            let tenant = ip(ExposureKind::TenantPort, "172.24.4.100", "tenant-vm");
            let mut fip = ip(ExposureKind::FloatingIp, "172.24.4.100", "patch-fip");
            fip.provider = Some(provider());
            if tenant_first {
                set.expose_ip(tenant);
                set.expose_ip(fip);
            } else {
                set.expose_ip(fip);
                set.expose_ip(tenant);
            }
            apply(&mut set, &ctx());
            let kept = &set.global().ips[&"172.24.4.100".parse::<std::net::IpAddr>().unwrap()];
            assert_eq!(
                kept.kind,
                ExposureKind::FloatingIp,
                "tenant first: {tenant_first}"
            );
            assert_eq!(set.skipped.len(), 1);
            assert_eq!(set.skipped[0].row, "tenant-vm");
            assert!(set.skipped[0].reason.contains("floating IP of patch-fip"));
        }
    }

    #[test]
    fn policy_applies_in_every_scope() {
        let mut set = ExposureSet::default();
        let vni = crate::caps::frr::values::Vni::new(100).unwrap();
        set.scope_mut(ScopeId::Evpn(vni)).expose_ip(ip(
            ExposureKind::TenantPort,
            "127.0.0.1",
            "evpn-vm",
        ));
        apply(&mut set, &ctx());
        assert!(set.scopes[&ScopeId::Evpn(vni)].ips.is_empty());
        assert!(set.skipped[0].reason.contains("scope evpn:100"));
    }

    #[test]
    fn remote_ips_are_parsed_from_ovsdb_remotes() {
        assert_eq!(
            remote_ips("tcp:10.0.0.1:6642, ssl:[fd00::1]:6642,unix:/run/ovn/ovnsb_db.sock"),
            vec![
                "10.0.0.1".parse::<IpAddr>().unwrap(),
                "fd00::1".parse().unwrap()
            ]
        );
        assert!(remote_ips("tcp:ovn-sb.example:6642").is_empty());
    }
}
