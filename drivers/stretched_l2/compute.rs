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
//! prefix is announced depends on the gateways before (the first stays, a clash is reported):
//! the steps are laid out as a delta of the last layout (`super::layout`), so a gateway that
//! came, went or changed re-decides only the prefixes it routes (or routed) and the attempts
//! whose view of them changed, and the route map of the set is the last one with those
//! prefixes changed. Nor are the unchanged gateways walked: the cache keeps which gateways
//! read each lookup, and the model logs the lookups it stamped (`Generations::stamped_since`),
//! so an event looks at the gateways of the lookups it stamped and at those named by one (a
//! gateway that came or was renamed). Every gateway is walked (its lookups' generations and
//! its result's version checked, none of its steps looked at) only on the first call and
//! when the model no longer logs all that changed since the last (its log keeps about one
//! change per live row; a new epoch forgets it). [`compute`] is the cache started empty.

use std::collections::BTreeSet;
use std::sync::Arc;

use ipnet::IpNet;

pub use super::layout::RouteLayoutStats;
use super::layout::{GatewayKey, RouteLayout};
use crate::exposure::{
    ExposedRoute, ExposureSet, RealisationNeed, RootKey, RouteKind, next_version,
};
use crate::hash::{HashMap, HashSet};
use crate::ovn::generations::{CacheStats, ReadSet, Readers};
use crate::ovn::neutron;
use crate::ovn::sb::condition::CR_LRP_PREFIX;
use crate::ovn::sb::model::{
    CHASSISREDIRECT, ModelKey, PortBinding, RecordedLookups, SbModel, Uuid, parse_port_addresses,
};

pub(crate) const TABLE: &str = "Port_Binding";
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

/// One step of a gateway's result, laid out in the roots' order: whether a route is
/// announced depends on the routes of the gateways before it (the first of a prefix stays).
#[derive(Debug)]
pub(crate) enum Step {
    /// A row of [`TABLE`] that cannot be used: (row, reason).
    Skip(String, String),
    /// `<router subnet> via <gateway ip>` and the gateway's network on-link, unless they
    /// clash with what is already announced.
    /// Shared with the layout, which keeps the attempts it laid.
    Route(Arc<RouteAttempt>),
}

#[derive(Debug)]
pub(crate) struct RouteAttempt {
    pub(crate) subnet: ExposedRoute,
    pub(crate) link: ExposedRoute,
    pub(crate) gateway_ip: IpNet,
    /// The rows a clash is reported on.
    pub(crate) crlrp_row: String,
    pub(crate) lrp_row: String,
}

impl RouteAttempt {
    /// The rule of a replay in the gateways' order: announced, or else the skip it reports
    /// (row, reason), from the route `first` gives as announced before it at a prefix (the
    /// first route of a prefix stays, a clash is reported).
    pub(crate) fn clash<'r>(
        &self,
        first: impl Fn(IpNet) -> Option<&'r ExposedRoute>,
    ) -> Result<(), (String, String)> {
        let Self {
            subnet,
            link,
            gateway_ip,
            crlrp_row,
            lrp_row,
        } = self;
        if let Some(first) = first(subnet.prefix)
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
            return Err((lrp_row.clone(), reason));
        }
        if link.prefix == subnet.prefix {
            let reason = format!(
                "subnet {} is the network of its own gateway {}: routed via itself",
                subnet.prefix, gateway_ip
            );
            return Err((lrp_row.clone(), reason));
        }
        if let Some(first) = first(link.prefix)
            && let Some(via) = first.via
        {
            let reason = format!(
                "gateway network {} is also a routed subnet (via {}, from {}): its routes are \
                 not announced",
                link.prefix, via, first.source
            );
            return Err((crlrp_row.clone(), reason));
        }
        Ok(())
    }
}

/// A gateway's steps and what they were computed from.
#[derive(Debug)]
struct RootResult {
    read: ReadSet<ModelKey>,
    /// Shared with the layout, which takes them out when the gateway changes or goes.
    steps: Arc<[Step]>,
    /// Tells this result from the one that replaces it ([`RouteLayout`]).
    version: u64,
    /// Where it was laid in the order of production.
    key: GatewayKey,
}

/// A gateway in the order of production: `chassisredirect_ports()`'s, by logical port name
/// then uuid (as the model's index holds them).
struct GatewayOrder<'a>(&'a PortBinding);

impl RootKey for GatewayOrder<'_> {
    type Owned = GatewayKey;

    fn to_owned_key(&self) -> GatewayKey {
        (self.0.logical_port.clone(), self.0.uuid.clone())
    }

    fn cmp_owned(&self, (name, uuid): &GatewayKey) -> std::cmp::Ordering {
        self.0
            .logical_port
            .as_str()
            .cmp(name)
            .then_with(|| self.0.uuid.cmp(uuid))
    }
}

/// The per-gateway results of the last computation (issue 17: an event recomputes the
/// gateways whose lookups changed, not every router of the cloud, and lays out only their
/// steps: see the module documentation).
#[derive(Debug, Default)]
pub struct RouteCache {
    /// The address scopes the results hold for.
    scopes: Option<Option<BTreeSet<String>>>,
    roots: HashMap<Uuid, RootResult>,
    /// The gateways that read each key (those to look at again when it is stamped), and the
    /// model's epoch and clock the results are current to: the next call looks only at the
    /// gateways of the keys stamped since, while the model still logs them.
    readers: Readers<ModelKey, Uuid>,
    /// The gateways' steps as last laid out.
    layout: RouteLayout,
    last: CacheStats,
}

impl RouteCache {
    /// Equal to [`compute`]'s, recomputing only the gateways whose lookups changed.
    pub fn compute(&mut self, model: &SbModel, options: &StretchedOptions) -> ExposureSet {
        if self.scopes.as_ref() != Some(&options.address_scopes) {
            self.roots.clear();
            self.readers.clear();
            self.scopes = Some(options.address_scopes.clone());
        }
        let mut out = ExposureSet::default();
        // Routes, never addresses: FRR redistributes the VRF table's kernel routes and nothing
        // else, and the table's stray routes are removed, whatever is announced.
        out.needs.insert(RealisationNeed::RedistributeKernelOnly);
        out.needs.insert(RealisationNeed::SweepVrfTable);
        let generations = model.generations();
        match self.readers.stamped_since_current(generations) {
            Some(keys) => {
                let keys: Vec<&ModelKey> = keys.collect();
                self.changed(model, options, keys, &mut out);
            }
            None => self.every_gateway(model, options, &mut out),
        }
        self.readers.now_current(generations);
        out
    }

    /// Look at every gateway of the model: the first call, and after the model forgot what
    /// changed (its log is bounded, its epoch moved).
    fn every_gateway(
        &mut self,
        model: &SbModel,
        options: &StretchedOptions,
        out: &mut ExposureSet,
    ) {
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
                self.recompute(model, options, crlrp);
            }
        }
        // Laid out in the gateways' order once every one is current: only those whose result
        // changed are looked at.
        let roots = &self.roots;
        let laid = gateways.iter().map(|crlrp| {
            let root = &roots[&crlrp.uuid];
            (GatewayOrder(crlrp), root.version, &root.steps)
        });
        self.layout.lay(laid, out);
        if self.roots.len() != gateways.len() {
            let seen: HashSet<&Uuid> = gateways.iter().map(|g| &g.uuid).collect();
            let (readers, roots) = (&mut self.readers, &mut self.roots);
            readers.retain(roots, Uuid::clone, |r| &r.read, |u| seen.contains(u));
        }
        self.last = stats;
    }

    /// Look at the gateways that read a key stamped since the last call, and at those named
    /// by one (a gateway that came, or was renamed): every other gateway's lookups are as they
    /// were, so its result stands and is not looked at.
    fn changed(
        &mut self,
        model: &SbModel,
        options: &StretchedOptions,
        keys: Vec<&ModelKey>,
        out: &mut ExposureSet,
    ) {
        let mut candidates: BTreeSet<&Uuid> = BTreeSet::new();
        let mut named = Vec::new();
        for key in keys {
            candidates.extend(self.readers.of(key));
            if let ModelKey::Named(name) = key {
                named.extend(model.chassisredirect_named(name));
            }
        }
        candidates.extend(named.iter().map(|p| &p.uuid));
        let candidates: Vec<Uuid> = candidates.into_iter().cloned().collect();
        let mut recomputed = 0;
        let (mut gone, mut arrivals) = (Vec::new(), Vec::new());
        for uuid in candidates {
            let old_key = self.roots.get(&uuid).map(|r| r.key.clone());
            let gateway = model.port(&uuid).filter(|p| p.port_type == CHASSISREDIRECT);
            let Some(crlrp) = gateway else {
                gone.extend(old_key);
                self.forget(&uuid);
                continue;
            };
            if self
                .roots
                .get(&uuid)
                .is_some_and(|r| r.read.still_valid(model.generations()))
            {
                continue;
            }
            recomputed += 1;
            self.recompute(model, options, crlrp);
            let root = &self.roots[&uuid];
            if let Some(old) = old_key.filter(|k| *k != root.key) {
                gone.push(old);
            }
            arrivals.push((root.key.clone(), root.version, root.steps.clone()));
        }
        self.layout.lay_changes(gone, arrivals, out);
        self.last = CacheStats {
            roots: self.roots.len(),
            recomputed,
        };
    }

    /// Compute `crlrp`'s result again, and who reads what.
    fn recompute(&mut self, model: &SbModel, options: &StretchedOptions, crlrp: &PortBinding) {
        self.forget(&crlrp.uuid);
        let mut root = Root {
            lookups: RecordedLookups::new(model),
            options,
            steps: Vec::new(),
        };
        root.gateway(crlrp);
        let result = RootResult {
            read: root.lookups.finish(),
            steps: root.steps.into(),
            version: next_version(),
            key: GatewayOrder(crlrp).to_owned_key(),
        };
        self.readers.add(&crlrp.uuid, &result.read);
        self.roots.insert(crlrp.uuid.clone(), result);
    }

    /// Drop the result of the gateway `uuid`, and its reads.
    fn forget(&mut self, uuid: &Uuid) {
        let Some(old) = self.roots.remove(uuid) else {
            return;
        };
        self.readers.remove(uuid, &old.read);
    }

    /// How the last [`RouteCache::compute`] went.
    pub fn last_stats(&self) -> CacheStats {
        self.last
    }

    /// How the last [`RouteCache::compute`] laid its routes out.
    pub fn last_layout(&self) -> RouteLayoutStats {
        self.layout.stats()
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
        self.steps.push(Step::Route(Arc::new(RouteAttempt {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference the layout must equal (the computation before issue 17's delta): announce
    /// `attempt` in `out` unless it clashes with what is announced already (the rule the layout
    /// applies too, [`RouteAttempt::clash`]), replayed in order instead of by position.
    fn announce(out: &mut ExposureSet, attempt: &RouteAttempt) {
        let global = out.global();
        match attempt.clash(|prefix| global.routes.get(&prefix)) {
            Err((row, reason)) => out.skip(TABLE, row, reason),
            Ok(()) => {
                let global = out.global_mut();
                global.expose_route(attempt.link.clone());
                global.expose_route(attempt.subnet.clone());
            }
        }
    }

    /// Every gateway's steps replayed in order into a fresh set, as before issue 17's delta.
    fn replayed(model: &SbModel, options: &StretchedOptions) -> ExposureSet {
        let mut out = ExposureSet::default();
        out.needs.insert(RealisationNeed::RedistributeKernelOnly);
        out.needs.insert(RealisationNeed::SweepVrfTable);
        for crlrp in model.chassisredirect_ports() {
            let mut root = Root {
                lookups: RecordedLookups::new(model),
                options,
                steps: Vec::new(),
            };
            root.gateway(crlrp);
            for step in &root.steps {
                match step {
                    Step::Skip(row, reason) => out.skip(TABLE, row.clone(), reason.clone()),
                    Step::Route(attempt) => announce(&mut out, attempt),
                }
            }
        }
        out
    }

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

    /// The cache against a computation from scratch and against the replay of every gateway's
    /// steps in order (the computation before the delta layout), after every step of random
    /// row changes: gateways and router ports of four routers coming, going, moving between
    /// routers, renamed (a gateway reordered: the first of a prefix changes) and changing
    /// addresses (clashing subnets, gateways sharing a network or an address, a gateway network
    /// that is another router's subnet, a subnet that is its gateway's network, broken MACs),
    /// the patch ports carrying the address scopes, with and without scopes configured.
    mod cache {
        use super::*;
        use proptest::prelude::*;

        const NAMES: [&str; 12] = [
            "cr-lrp-gw0",
            "cr-lrp-gw1",
            "cr-lrp-a",
            "cr-lrp-z",
            "lrp-gw0",
            "lrp-s0",
            "lrp-s1",
            "lrp-s2",
            "gw0",
            "s0",
            "s1",
            "x",
        ];
        const TYPES: [&str; 3] = ["chassisredirect", "patch", ""];
        const DATAPATHS: [&str; 5] = ["dp-r0", "dp-r1", "dp-r2", "dp-r3", "dp-s"];
        const MACS: [&str; 11] = [
            "fa:16:3e:00:00:01 172.24.4.10/24 2001:db8::a/64",
            "fa:16:3e:00:00:02 172.24.5.10/24",
            "fa:16:3e:00:00:03 10.0.0.1/24 fd00:10::1/64",
            "fa:16:3e:00:00:04 10.0.0.254/24",
            "fa:16:3e:00:00:05 172.24.4.1/24",
            // Another gateway on the first one's network: the network's route is one, from
            // the first gateway.
            "fa:16:3e:00:00:06 172.24.4.20/24",
            // A gateway whose network is a router's subnet.
            "fa:16:3e:00:00:07 10.0.0.5/24",
            "fa:16:3e:00:00:08 10.1.0.1/24 fd00:10::2/64",
            "fa:16:3e:00:00:09 2001:db8::b/64",
            "not a mac",
            "",
        ];
        /// The addresses of [`Step::Router`]'s ports: two networks and subnets in them.
        const ROUTER_MACS: [&str; 6] = [
            "fa:16:3e:00:01:01 172.24.4.30/24",
            "fa:16:3e:00:01:02 172.24.4.31/24",
            "fa:16:3e:00:01:03 10.0.0.30/24",
            "fa:16:3e:00:01:04 10.0.0.31/24",
            "fa:16:3e:00:01:05 172.24.4.32/24",
            "fa:16:3e:00:01:06 192.168.0.1/24",
        ];
        const SCOPES: [Option<&str>; 3] = [Some("as-a"), Some("as-b"), None];
        const SLOTS: usize = 8;

        #[derive(Debug, Clone)]
        enum Step {
            Port {
                slot: usize,
                f: [usize; 6],
            },
            /// The port of a slot under another name, all else kept (a gateway reordered).
            Rename {
                slot: usize,
                name: usize,
            },
            /// A router of its own (a gateway and a router port on a datapath of their own, in
            /// slots of their own), its addresses among a few: routers often clash, and the
            /// first of several routing a prefix, or announcing a network, changes.
            Router {
                r: usize,
                name: usize,
                gw: usize,
                sub: usize,
            },
            Remove(usize),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                5 => (0..SLOTS, (0..NAMES.len(), 0..TYPES.len(), 0..DATAPATHS.len(), 0..MACS.len(), 0..3usize, 0..SCOPES.len()))
                    .prop_map(|(slot, (a, b, c, d, e, g))| Step::Port { slot, f: [a, b, c, d, e, g] }),
                1 => (0..SLOTS, 0..4usize).prop_map(|(slot, name)| Step::Rename { slot, name }),
                4 => (0..4usize, 0..4usize, 0..ROUTER_MACS.len(), 0..ROUTER_MACS.len())
                    .prop_map(|(r, name, gw, sub)| Step::Router { r, name, gw, sub }),
                1 => (0..SLOTS).prop_map(Step::Remove),
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
                Step::Rename { slot, name } => {
                    let uuid = format!("pb-{slot}");
                    if let Some(p) = model.all_ports().into_iter().find(|p| p.uuid == uuid) {
                        let mut p = p.clone();
                        p.logical_port = NAMES[*name].into();
                        model.upsert_port(p);
                    }
                }
                Step::Remove(slot) => model.remove_port(&format!("pb-{slot}")),
                Step::Router { r, name, gw, sub } => {
                    let datapath = format!("dp-router-{r}");
                    let mut cr = port(
                        &format!("router-gw-{r}"),
                        NAMES[*name],
                        "chassisredirect",
                        ROUTER_MACS[*gw],
                    );
                    cr.datapath = datapath.clone();
                    model.upsert_port(cr);
                    let mut lrp = port(
                        &format!("router-sub-{r}"),
                        &format!("lrp-router-{r}"),
                        "patch",
                        ROUTER_MACS[*sub],
                    );
                    lrp.datapath = datapath;
                    model.upsert_port(lrp);
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            #[test]
            fn the_cache_always_equals_a_computation_from_scratch(
                steps in prop::collection::vec(step(), 1..60),
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
                    // Now and then as after the model forgot what changed: every gateway is
                    // looked at (their versions against the layout's).
                    if i % 7 == 6 {
                        cache.readers.lose_track();
                    }
                    let cached = cache.compute(&model, &options);
                    let fresh = compute(&model, &options);
                    prop_assert_eq!(&cached, &fresh, "after step {}: {:?}", i, s);
                    // The skips in the same order (the set's equality compares the list).
                    prop_assert_eq!(&cached, &replayed(&model, &options), "after step {}: {:?}", i, s);
                }
            }
        }

        /// A cloud of routers whose gateways share the provider network: an event decides
        /// again the route attempts of the gateway it touched and those whose view of a prefix
        /// changed, not every gateway's, and the new route map shares all but those prefixes
        /// with the last one.
        #[test]
        fn an_event_decides_only_the_routes_it_touched() {
            let mut m = SbModel::default();
            let router = |m: &mut SbModel, r: usize, subnet: &str| {
                let dp = format!("dp-r{r}");
                let mut cr = port(
                    &format!("cr{r}"),
                    &format!("cr-lrp-r{r:03}"),
                    "chassisredirect",
                    &format!(
                        "fa:16:3e:00:01:{:02x} 172.24.{}.{}/16",
                        r % 256,
                        r / 200,
                        1 + r % 200
                    ),
                );
                cr.datapath = dp.clone();
                m.upsert_port(cr);
                let mut lrp = port(
                    &format!("l{r}"),
                    &format!("lrp-t{r}"),
                    "patch",
                    &format!("fa:16:3e:00:02:{:02x} {subnet}", r % 256),
                );
                lrp.datapath = dp;
                m.upsert_port(lrp);
            };
            for r in 0..200 {
                router(&mut m, r, &format!("10.{r}.0.1/24"));
            }
            let options = StretchedOptions::default();
            let mut cache = RouteCache::default();
            let first = cache.compute(&m, &options);
            assert_eq!(first.global().routes.len(), 201);
            assert_eq!(cache.last_layout().attempts_decided, 200);
            let decided = |cache: &RouteCache, gateways_laid, attempts_decided| {
                assert_eq!(
                    cache.last_layout(),
                    RouteLayoutStats {
                        gateways_laid,
                        attempts_decided
                    }
                );
            };

            // A second subnet on router 7: its gateway's two attempts.
            let mut lrp = port("l7b", "lrp-t7b", "patch", "fa:16:3e:00:03:07 11.7.0.1/24");
            lrp.datapath = "dp-r7".into();
            m.upsert_port(lrp);
            let second = cache.compute(&m, &options);
            decided(&cache, 1, 2);
            assert_eq!(second, replayed(&m, &options));
            assert_eq!(
                first.global().routes.diff(&second.global().routes).count(),
                1
            );

            // The first gateway of the network goes: the next one's route of it is announced
            // (one attempt decided again: those after it see an on-link route as before).
            m.remove_port("cr0");
            let third = cache.compute(&m, &options);
            decided(&cache, 1, 1);
            assert_eq!(third, replayed(&m, &options));
            assert_eq!(
                second.global().routes.diff(&third.global().routes).count(),
                2
            );

            // Router 150 routes router 9's subnet: reported as a clash, nothing else decided.
            router(&mut m, 150, "10.9.0.254/24");
            let fourth = cache.compute(&m, &options);
            decided(&cache, 1, 1);
            assert_eq!(fourth, replayed(&m, &options));
            assert_eq!(fourth.skipped.len(), 1, "{:?}", fourth.skipped);
            // Router 9's subnet goes: router 150's route of it is announced, the clash is not.
            let mut lrp = port("l9", "lrp-t9", "patch", "fa:16:3e:00:02:09 11.9.0.1/24");
            lrp.datapath = "dp-r9".into();
            m.upsert_port(lrp);
            let fifth = cache.compute(&m, &options);
            decided(&cache, 1, 2);
            assert_eq!(fifth, replayed(&m, &options));
            assert!(fifth.skipped.is_empty());

            // Nothing changed: nothing laid, the same routes.
            let sixth = cache.compute(&m, &options);
            decided(&cache, 0, 0);
            assert!(sixth.global().routes.ptr_eq(&fifth.global().routes));
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
