//! From the Southbound model to the routes this chassis announces (upstream-behaviour.md §1.4,
//! acceptance row G1).
//!
//! For every router gateway in the cloud (`cr-lrp-<id>`, type `chassisredirect`, wherever it is
//! bound), and every router port (`lrp-*`, unbound, not the gateway's own) of its router: the
//! router subnet of each family is routed via the gateway address of that family, and the
//! gateway's network is announced on-link so that nexthop resolves. Both go to the VRF table
//! through `bgp-nic`, and FRR redistributes kernel routes only.
//!
//! Level-triggered and pure: the same model always gives the same [`ExposureSet`], so what
//! upstream did in its events (add and remove the routes of changed networks, drop the link
//! route when no route via the network remains, U15) follows from recomputing; and its sync's
//! behaviour (every gateway in the cloud) holds also between syncs (U16). A row that cannot be
//! used is recorded in `skipped` and the others are still announced (upstream: one malformed
//! address raised out of the whole sync).
//!
//! Incremental (issue 17), as the SB BGP driver's computation: each gateway is a *root*
//! computed as a unit that records every model lookup it makes with its generation (the
//! ports of its router's datapath, the patch ports carrying address scopes); [`RouteCache`]
//! keeps each gateway's steps and recomputes a gateway only when a generation it read moved, so
//! a router port changed on one of a thousand routers re-reads that router. Which route of a
//! prefix is announced depends on the gateways before (the first stays, a clash is reported),
//! so the steps are replayed in the gateways' order on every call: [`compute`] is the cache
//! started empty.

use std::collections::{BTreeSet, HashMap, HashSet};

use ipnet::IpNet;

use crate::exposure::{ExposedRoute, ExposureSet, RealisationNeed, RouteKind};
use crate::ovn::generations::{CacheStats, ReadSet};
use crate::ovn::neutron;
use crate::ovn::sb::condition::CR_LRP_PREFIX;
use crate::ovn::sb::model::{
    CHASSISREDIRECT, ModelKey, PortBinding, RecordedLookups, SbModel, Uuid, parse_port_addresses,
};

const TABLE: &str = "Port_Binding";
/// Prefix of a router port's name; the rest is the id of its peer, the switch-side patch port.
pub(crate) const LRP_PREFIX: &str = "lrp-";

/// `neutron:subnet_pool_addr_scope4/6` of the patch port on the other side of a router port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Scopes {
    v4: Option<String>,
    v6: Option<String>,
}

impl Scopes {
    fn of(port: &PortBinding) -> Self {
        let get = |v4: bool| {
            neutron::address_scope(v4, |k| port.external_ids.get(k).map(String::as_str))
                .map(str::to_owned)
        };
        Self {
            v4: get(true),
            v6: get(false),
        }
    }

    fn family(&self, v4: bool) -> Option<&str> {
        if v4 { &self.v4 } else { &self.v6 }.as_deref()
    }

    fn any_in(&self, allowed: &BTreeSet<String>) -> bool {
        [&self.v4, &self.v6]
            .into_iter()
            .flatten()
            .any(|s| allowed.contains(s))
    }
}

/// The driver's options: `[DEFAULT] address_scopes`.
#[derive(Debug, Clone, Default)]
pub struct StretchedOptions {
    /// When set, a gateway is announced only if one of its scopes is listed, and a subnet only
    /// if it has the gateway's scope of its family and that scope is listed.
    pub address_scopes: Option<BTreeSet<String>>,
}

impl StretchedOptions {
    pub fn from_config(config: &crate::config::AgentConfig) -> Self {
        Self {
            address_scopes: config
                .default
                .address_scopes
                .as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| s.iter().cloned().collect()),
        }
    }
}

/// The routes this chassis announces: the same on every chassis of the cloud (a computation
/// from scratch).
pub fn compute(model: &SbModel, options: &StretchedOptions) -> ExposureSet {
    RouteCache::default().compute(model, options)
}

fn row(port: &PortBinding) -> String {
    format!("{} ({})", port.uuid, port.logical_port)
}

/// One step of a gateway's result, replayed in the roots' order: whether a route is
/// announced depends on the routes of the gateways before it (the first of a prefix stays).
#[derive(Debug)]
enum Step {
    /// A row of [`TABLE`] that cannot be used: (row, reason).
    Skip(String, String),
    /// `<router subnet> via <gateway ip>` and the gateway's network on-link, unless they
    /// clash with what is already announced.
    Route(Box<RouteAttempt>),
}

#[derive(Debug)]
struct RouteAttempt {
    subnet: ExposedRoute,
    link: ExposedRoute,
    gateway_ip: IpNet,
    /// The rows a clash is reported on.
    crlrp_row: String,
    lrp_row: String,
}

/// A gateway's steps and what they were computed from.
#[derive(Debug)]
struct RootResult {
    read: ReadSet<ModelKey>,
    steps: Vec<Step>,
}

/// The per-gateway results of the last computation (issue 17: an event recomputes the
/// gateways whose lookups changed, not every router of the cloud; the routes are then laid out
/// by replaying every gateway's steps in order, a few per router).
#[derive(Debug, Default)]
pub struct RouteCache {
    /// The address scopes the results hold for.
    scopes: Option<Option<BTreeSet<String>>>,
    roots: HashMap<Uuid, RootResult>,
    last: CacheStats,
}

impl RouteCache {
    /// Equal to [`compute`]'s, recomputing only the gateways whose lookups changed.
    pub fn compute(&mut self, model: &SbModel, options: &StretchedOptions) -> ExposureSet {
        if self.scopes.as_ref() != Some(&options.address_scopes) {
            self.roots.clear();
            self.scopes = Some(options.address_scopes.clone());
        }
        let mut out = ExposureSet::default();
        // Routes, never addresses: FRR redistributes the VRF table's kernel routes and nothing
        // else, and the table's stray routes are removed, whatever is announced.
        out.needs.insert(RealisationNeed::RedistributeKernelOnly);
        out.needs.insert(RealisationNeed::SweepVrfTable);
        let mut stats = CacheStats::default();
        let gateways = model.chassisredirect_ports();
        for crlrp in &gateways {
            stats.roots += 1;
            let fresh = self
                .roots
                .get(&crlrp.uuid)
                .is_some_and(|r| r.read.still_valid(model.generations()));
            if !fresh {
                stats.recomputed += 1;
                let mut root = Root {
                    lookups: RecordedLookups::new(model),
                    options,
                    steps: Vec::new(),
                };
                root.gateway(crlrp);
                let result = RootResult {
                    read: root.lookups.finish(),
                    steps: root.steps,
                };
                self.roots.insert(crlrp.uuid.clone(), result);
            }
        }
        for crlrp in &gateways {
            for step in &self.roots[&crlrp.uuid].steps {
                match step {
                    Step::Skip(row, reason) => out.skip(TABLE, row.clone(), reason.clone()),
                    Step::Route(attempt) => announce(&mut out, attempt),
                }
            }
        }
        if self.roots.len() != gateways.len() {
            let seen: HashSet<&Uuid> = gateways.iter().map(|g| &g.uuid).collect();
            self.roots.retain(|u, _| seen.contains(u));
        }
        self.last = stats;
        out
    }

    /// How the last [`RouteCache::compute`] went.
    pub fn last_stats(&self) -> CacheStats {
        self.last
    }
}

/// One gateway's computation: every model lookup goes through it, so it knows what it read.
struct Root<'a> {
    lookups: RecordedLookups<'a>,
    options: &'a StretchedOptions,
    steps: Vec<Step>,
}

impl Root<'_> {
    fn skip(&mut self, port: &PortBinding, reason: impl Into<String>) {
        self.steps.push(Step::Skip(row(port), reason.into()));
    }

    /// The address scopes of the switch-side patch port named `peer`, when address scopes are
    /// configured; `Err` (skipped) when that port is missing, since the scope is unknown.
    fn scopes_of_peer(&mut self, port: &PortBinding, peer: &str) -> Result<Option<Scopes>, ()> {
        if self.options.address_scopes.is_none() {
            return Ok(None);
        }
        match self.lookups.port_named(peer) {
            Some(p) => Ok(Some(Scopes::of(p))),
            None => {
                self.skip(
                    port,
                    format!(
                        "address scopes are configured and the patch port {peer:?} (where the \
                         scope is) is missing"
                    ),
                );
                Err(())
            }
        }
    }

    fn gateway(&mut self, crlrp: &PortBinding) {
        // The gateway's own row: any change to it re-stamps its name.
        self.lookups
            .read(ModelKey::Named(crlrp.logical_port.clone()));
        if crlrp.port_type != CHASSISREDIRECT {
            return;
        }
        let Some(id) = crlrp.logical_port.strip_prefix(CR_LRP_PREFIX) else {
            return self.skip(
                crlrp,
                "chassisredirect port name does not start with cr-lrp-: not a router gateway",
            );
        };
        let gateway_ips = match parse_port_addresses(&crlrp.mac) {
            Ok(Some(a)) => a.ips,
            Ok(None) => {
                return self.skip(
                    crlrp,
                    format!(
                        "gateway without networks (mac {:?}): nothing to route via it",
                        crlrp.mac
                    ),
                );
            }
            Err(e) => return self.skip(crlrp, e),
        };
        let Ok(gateway_scopes) = self.scopes_of_peer(crlrp, id) else {
            return;
        };
        if let (Some(allowed), Some(scopes)) = (&self.options.address_scopes, &gateway_scopes)
            && !scopes.any_in(allowed)
        {
            // Not in an address scope announced here: a configured filter, not a bad row.
            return;
        }
        for lrp in self.lookups.ports_on_datapath(&crlrp.datapath) {
            if lrp.chassis.is_some()
                || !lrp.logical_port.starts_with(LRP_PREFIX)
                || lrp.options.contains_key("chassis-redirect-port")
            {
                continue;
            }
            self.router_port(crlrp, &gateway_ips, gateway_scopes.as_ref(), lrp);
        }
    }

    fn router_port(
        &mut self,
        crlrp: &PortBinding,
        gateway_ips: &[IpNet],
        gateway_scopes: Option<&Scopes>,
        lrp: &PortBinding,
    ) {
        let router_ips = match parse_port_addresses(&lrp.mac) {
            Ok(Some(a)) => a.ips,
            // A router port without networks routes nothing.
            Ok(None) => return,
            Err(e) => return self.skip(lrp, e),
        };
        // A port holding a gateway address is the gateway's own (upstream compares address
        // and prefix length).
        if router_ips.iter().any(|r| gateway_ips.contains(r)) {
            return;
        }
        let peer = &lrp.logical_port[LRP_PREFIX.len()..];
        let Ok(router_scopes) = self.scopes_of_peer(lrp, peer) else {
            return;
        };
        if let Some(scopes) = &router_scopes
            && scopes.v4.is_none()
            && scopes.v6.is_none()
        {
            // Address scopes are configured and this subnet is in none.
            return;
        }
        for router_ip in router_ips {
            let v4 = router_ip.addr().is_ipv4();
            let mut same_family = gateway_ips
                .iter()
                .filter(|g| g.addr().is_ipv4() == v4)
                .peekable();
            if same_family.peek().is_none() {
                self.skip(
                    lrp,
                    format!(
                        "subnet {}: gateway {} has no IPv{} address to route it via",
                        router_ip.trunc(),
                        crlrp.logical_port,
                        if v4 { 4 } else { 6 }
                    ),
                );
                continue;
            }
            if let (Some(allowed), Some(g), Some(r)) =
                (&self.options.address_scopes, gateway_scopes, &router_scopes)
            {
                let scope = g.family(v4);
                if scope != r.family(v4) || !scope.is_some_and(|s| allowed.contains(s)) {
                    continue;
                }
            }
            for gateway_ip in same_family {
                self.route(crlrp, *gateway_ip, lrp, router_ip);
            }
        }
    }

    /// `<router subnet> via <gateway ip>` and the gateway's network on-link (the nexthop must
    /// resolve in the table), announced at layout unless they clash with an earlier route.
    fn route(
        &mut self,
        crlrp: &PortBinding,
        gateway_ip: IpNet,
        lrp: &PortBinding,
        router_ip: IpNet,
    ) {
        self.steps.push(Step::Route(Box::new(RouteAttempt {
            subnet: ExposedRoute {
                prefix: router_ip.trunc(),
                kind: RouteKind::TenantSubnet,
                via: Some(gateway_ip.addr()),
                provider: None,
                source: lrp.logical_port.clone(),
            },
            link: ExposedRoute {
                prefix: gateway_ip.trunc(),
                kind: RouteKind::GatewayNetwork,
                via: None,
                provider: None,
                source: crlrp.logical_port.clone(),
            },
            gateway_ip,
            crlrp_row: row(crlrp),
            lrp_row: row(lrp),
        })));
    }
}

/// Announce `attempt` in `out` unless it clashes with what is announced already: the first
/// route of a prefix stays, a clash is reported.
fn announce(out: &mut ExposureSet, attempt: &RouteAttempt) {
    let RouteAttempt {
        subnet,
        link,
        gateway_ip,
        crlrp_row,
        lrp_row,
    } = attempt;
    if let Some(first) = out.global().routes.get(&subnet.prefix)
        && first != subnet
    {
        let reason = format!(
            "route {} via {}: {} is already announced {} (from {})",
            subnet.prefix,
            gateway_ip.addr(),
            subnet.prefix,
            first
                .via
                .map_or_else(|| "on-link".to_owned(), |v| format!("via {v}")),
            first.source
        );
        return out.skip(TABLE, lrp_row.clone(), reason);
    }
    if link.prefix == subnet.prefix {
        let reason = format!(
            "subnet {} is the network of its own gateway {}: routed via itself",
            subnet.prefix, gateway_ip
        );
        return out.skip(TABLE, lrp_row.clone(), reason);
    }
    if let Some(first) = out.global().routes.get(&link.prefix)
        && first.via.is_some()
    {
        let reason = format!(
            "gateway network {} is also a routed subnet (via {}, from {}): its routes are \
             not announced",
            link.prefix,
            first.via.map(|v| v.to_string()).unwrap_or_default(),
            first.source
        );
        return out.skip(TABLE, crlrp_row.clone(), reason);
    }
    let global = out.global_mut();
    global.expose_route(link.clone());
    global.expose_route(subnet.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTER_DP: &str = "dp-router";

    fn port(uuid: &str, name: &str, ty: &str, mac: &str) -> PortBinding {
        PortBinding {
            uuid: uuid.into(),
            logical_port: name.into(),
            port_type: ty.into(),
            datapath: ROUTER_DP.into(),
            mac: if mac.is_empty() {
                vec![]
            } else {
                vec![mac.into()]
            },
            ..Default::default()
        }
    }

    fn model() -> SbModel {
        let mut m = SbModel::default();
        let mut cr = port(
            "p1",
            "cr-lrp-gw",
            "chassisredirect",
            "fa:16:3e:00:00:01 172.24.4.10/24 2001:db8::a/64",
        );
        cr.chassis = Some("elsewhere".into());
        m.upsert_port(cr);
        let mut own = port(
            "p2",
            "lrp-gw",
            "patch",
            "fa:16:3e:00:00:01 172.24.4.10/24 2001:db8::a/64",
        );
        own.options
            .insert("chassis-redirect-port".into(), "cr-lrp-gw".into());
        m.upsert_port(own);
        m.upsert_port(port(
            "p3",
            "lrp-sub",
            "patch",
            "fa:16:3e:00:00:02 10.0.0.1/24 fd00:10::1/64",
        ));
        m
    }

    fn routes(set: &ExposureSet) -> Vec<String> {
        set.global()
            .routes
            .values()
            .map(|r| match r.via {
                Some(v) => format!("{} via {v}", r.prefix),
                None => format!("{} link", r.prefix),
            })
            .collect()
    }

    #[test]
    fn g1_every_gateway_routes_its_subnets_per_family() {
        let set = compute(&model(), &StretchedOptions::default());
        assert_eq!(
            routes(&set),
            [
                "10.0.0.0/24 via 172.24.4.10",
                "172.24.4.0/24 link",
                "2001:db8::/64 link",
                "fd00:10::/64 via 2001:db8::a"
            ]
        );
        assert!(set.skipped.is_empty(), "{:?}", set.skipped);
        assert_eq!(
            set.needs,
            [
                RealisationNeed::RedistributeKernelOnly,
                RealisationNeed::SweepVrfTable
            ]
            .into()
        );
        assert!(set.global().ips.is_empty() && set.bridges.is_empty());
    }

    #[test]
    fn address_scopes_must_match_the_gateways_and_be_allowed() {
        let mut m = model();
        let scoped = |name: &str, s4: Option<&str>, s6: Option<&str>| {
            let mut p = port(&format!("u-{name}"), name, "patch", "");
            p.datapath = "dp-other".into();
            for (k, v) in [
                (neutron::keys::ADDRESS_SCOPE4, s4),
                (neutron::keys::ADDRESS_SCOPE6, s6),
            ] {
                if let Some(v) = v {
                    p.external_ids.insert(k.into(), v.into());
                }
            }
            p
        };
        let options = StretchedOptions {
            address_scopes: Some(["as-a".to_owned()].into()),
        };
        // No patch port of the gateway: its scope is unknown, skipped with a reason.
        let set = compute(&m, &options);
        assert!(routes(&set).is_empty());
        assert!(
            set.skipped[0].reason.contains("\"gw\""),
            "{:?}",
            set.skipped
        );
        m.upsert_port(scoped("gw", Some("as-a"), Some("as-b")));
        m.upsert_port(scoped("sub", Some("as-a"), Some("as-b")));
        // v4 in the allowed scope on both sides; v6 scope equal but not allowed.
        let set = compute(&m, &options);
        assert_eq!(
            routes(&set),
            ["10.0.0.0/24 via 172.24.4.10", "172.24.4.0/24 link"]
        );
        // The subnet in another scope than the gateway's: nothing.
        m.upsert_port(scoped("sub", Some("as-c"), Some("as-b")));
        assert!(routes(&compute(&m, &options)).is_empty());
        // The gateway in no allowed scope: nothing, and no skip (a filter, not a bad row).
        m.upsert_port(scoped("gw", Some("as-c"), None));
        let set = compute(&m, &options);
        assert!(routes(&set).is_empty() && set.skipped.is_empty());
    }

    #[test]
    fn hostile_rows_are_skipped_with_a_reason_and_the_rest_announced() {
        let mut m = model();
        let mut bad = port("p9", "lrp-bad", "patch", "fa:16:3e:00:00:09 10.1.0.1/33");
        bad.datapath = ROUTER_DP.into();
        m.upsert_port(bad);
        let mut v6only = port("p8", "lrp-v6", "patch", "fa:16:3e:00:00:08 fd00:20::1/64");
        v6only.datapath = "dp-r2".into();
        m.upsert_port(v6only);
        let mut cr2 = port(
            "p7",
            "cr-lrp-gw2",
            "chassisredirect",
            "fa:16:3e:00:00:07 172.24.4.20/24",
        );
        cr2.datapath = "dp-r2".into();
        m.upsert_port(cr2);
        let mut bare = port("p6", "cr-lrp-gw3", "chassisredirect", "fa:16:3e:00:00:06");
        bare.datapath = "dp-r3".into();
        m.upsert_port(bare);
        let set = compute(&m, &StretchedOptions::default());
        assert_eq!(routes(&set).len(), 4, "{:?}", routes(&set));
        let reasons: Vec<(String, String)> = set
            .skipped
            .iter()
            .map(|s| (s.row.clone(), s.reason.clone()))
            .collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(
            reasons
                .iter()
                .any(|(r, why)| r.contains("lrp-bad") && why.contains("10.1.0.1/33"))
        );
        assert!(
            reasons
                .iter()
                .any(|(r, why)| r.contains("lrp-v6") && why.contains("no IPv6"))
        );
        assert!(
            reasons
                .iter()
                .any(|(r, why)| r.contains("cr-lrp-gw3") && why.contains("without networks"))
        );
    }

    #[test]
    fn a_subnet_routed_by_two_routers_stays_with_the_first_and_the_clash_is_reported() {
        let mut m = model();
        let mut cr2 = port(
            "p7",
            "cr-lrp-gw2",
            "chassisredirect",
            "fa:16:3e:00:00:07 172.24.5.20/24",
        );
        cr2.datapath = "dp-r2".into();
        m.upsert_port(cr2);
        let mut dup = port("p8", "lrp-dup", "patch", "fa:16:3e:00:00:08 10.0.0.254/24");
        dup.datapath = "dp-r2".into();
        m.upsert_port(dup);
        let set = compute(&m, &StretchedOptions::default());
        assert_eq!(
            set.global().routes[&"10.0.0.0/24".parse::<IpNet>().unwrap()].source,
            "lrp-sub"
        );
        // No link route for a gateway that routes nothing.
        assert!(!routes(&set).contains(&"172.24.5.0/24 link".to_owned()));
        assert_eq!(set.skipped.len(), 1);
        assert!(
            set.skipped[0]
                .reason
                .contains("already announced via 172.24.4.10")
        );
    }

    /// The cache against a computation from scratch, after every step of random row changes:
    /// gateways and router ports of two routers coming, going, moving between routers and
    /// changing addresses (clashing subnets, a subnet that is its gateway's network, broken
    /// MACs), the patch ports carrying the address scopes, with and without scopes configured.
    mod cache {
        use super::*;
        use proptest::prelude::*;

        const NAMES: [&str; 9] = [
            "cr-lrp-gw0",
            "cr-lrp-gw1",
            "lrp-gw0",
            "lrp-s0",
            "lrp-s1",
            "gw0",
            "s0",
            "s1",
            "x",
        ];
        const TYPES: [&str; 3] = ["chassisredirect", "patch", ""];
        const DATAPATHS: [&str; 3] = ["dp-r0", "dp-r1", "dp-s"];
        const MACS: [&str; 7] = [
            "fa:16:3e:00:00:01 172.24.4.10/24 2001:db8::a/64",
            "fa:16:3e:00:00:02 172.24.5.10/24",
            "fa:16:3e:00:00:03 10.0.0.1/24 fd00:10::1/64",
            "fa:16:3e:00:00:04 10.0.0.254/24",
            "fa:16:3e:00:00:05 172.24.4.1/24",
            "not a mac",
            "",
        ];
        const SCOPES: [Option<&str>; 3] = [Some("as-a"), Some("as-b"), None];

        #[derive(Debug, Clone)]
        enum Step {
            Port { slot: usize, f: [usize; 6] },
            Remove(usize),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                5 => (0..6usize, (0..NAMES.len(), 0..TYPES.len(), 0..DATAPATHS.len(), 0..MACS.len(), 0..3usize, 0..SCOPES.len()))
                    .prop_map(|(slot, (a, b, c, d, e, g))| Step::Port { slot, f: [a, b, c, d, e, g] }),
                1 => (0..6usize).prop_map(Step::Remove),
            ]
        }

        fn apply(model: &mut SbModel, step: &Step) {
            match step {
                Step::Port { slot, f } => {
                    let mut p = PortBinding {
                        uuid: format!("pb-{slot}"),
                        logical_port: NAMES[f[0]].into(),
                        port_type: TYPES[f[1]].into(),
                        datapath: DATAPATHS[f[2]].into(),
                        mac: if MACS[f[3]].is_empty() {
                            vec![]
                        } else {
                            vec![MACS[f[3]].into()]
                        },
                        ..Default::default()
                    };
                    match f[4] {
                        0 => {}
                        1 => {
                            p.options
                                .insert("chassis-redirect-port".into(), "cr-lrp-gw0".into());
                        }
                        _ => p.chassis = Some("ch".into()),
                    }
                    if let Some(scope) = SCOPES[f[5]] {
                        p.external_ids
                            .insert(neutron::keys::ADDRESS_SCOPE4.into(), scope.into());
                    }
                    model.upsert_port(p);
                }
                Step::Remove(slot) => model.remove_port(&format!("pb-{slot}")),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            #[test]
            fn the_cache_always_equals_a_computation_from_scratch(
                steps in prop::collection::vec(step(), 1..50),
                scoped in any::<bool>(),
            ) {
                let options = StretchedOptions {
                    address_scopes: scoped.then(|| ["as-a".to_owned()].into()),
                };
                let mut model = model();
                let mut cache = RouteCache::default();
                for (i, s) in steps.iter().enumerate() {
                    apply(&mut model, s);
                    // Not after every step: several changes may be pending, as in a batch.
                    if i % 3 == 2 {
                        continue;
                    }
                    let cached = cache.compute(&model, &options);
                    let fresh = compute(&model, &options);
                    prop_assert_eq!(cached, fresh, "after step {}: {:?}", i, s);
                }
            }
        }

        /// A router port changed on one router recomputes that router's gateway only.
        #[test]
        fn an_event_recomputes_only_the_gateway_it_touched() {
            let mut m = model();
            for r in 0..20 {
                let mut cr = port(
                    &format!("cr{r}"),
                    &format!("cr-lrp-g{r}"),
                    "chassisredirect",
                    &format!("fa:16:3e:00:01:{r:02x} 172.25.{r}.1/24"),
                );
                cr.datapath = format!("dp-x{r}");
                m.upsert_port(cr);
                let mut lrp = port(
                    &format!("l{r}"),
                    &format!("lrp-t{r}"),
                    "patch",
                    &format!("fa:16:3e:00:02:{r:02x} 10.{r}.0.1/24"),
                );
                lrp.datapath = format!("dp-x{r}");
                m.upsert_port(lrp);
            }
            let options = StretchedOptions::default();
            let mut cache = RouteCache::default();
            let first = cache.compute(&m, &options);
            assert_eq!(cache.last_stats().recomputed, 21);
            assert_eq!(first.global().routes.len(), 2 + 2 * 20);
            let mut lrp = port("l7", "lrp-t7", "patch", "fa:16:3e:00:02:07 10.77.0.1/24");
            lrp.datapath = "dp-x7".into();
            m.upsert_port(lrp);
            let next = cache.compute(&m, &options);
            assert_eq!(cache.last_stats().recomputed, 1);
            assert_eq!(cache.last_stats().roots, 21);
            assert_eq!(next, compute(&m, &options));
            assert!(
                next.global()
                    .routes
                    .contains_key(&"10.77.0.0/24".parse::<IpNet>().unwrap())
            );
            assert!(cache.compute(&m, &options) == next);
            assert_eq!(cache.last_stats().recomputed, 0);
        }
    }
}
