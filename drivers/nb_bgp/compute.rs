//! From the Northbound model to the exposures of this chassis (upstream-behaviour.md §1.2, §3.3,
//! §4.2): level-triggered and pure, the same model, chassis and options always give the same
//! [`ExposureSet`]. Only local objects are visited, through the model's indexes: ports listing
//! this host, gateways hosted here, and the routers, switches, NATs and load balancers behind
//! them. A row that cannot be used is recorded in `skipped` and the rest is computed.
//!
//! Incremental (issue 17): the ports listing this host, the gateways hosted here and their
//! routers are *roots* computed as units, each recording the model lookups it made
//! ([`NbKey`]); [`ExposureCache`] recomputes a root only when one of those changed and lays the
//! results out in a fresh computation's order; [`compute`] is the cache started empty.
//!
//! `exposing_method = vrf` (§2 `vrf` column, E1–E3): every exposure the underlay method puts
//! in the global scope goes into the scope `evpn:<vni>` of its provider network instead
//! (provider VMs and FIPs with their MAC as neighbour, gateways, centralized FIPs, LB VIPs;
//! tenant VMs, router interfaces and Octavia tenant VIPs as host routes via the gateway address
//! of their family, tenant subnets as prefixes via it in `subnet` mode), and nothing goes to
//! the global scope. A provider switch with `neutron_bgpvpn:type = l3` and a VNI, and a localnet
//! port of a physnet mapped here, gets its scope with one `Localnet` attachment per such port,
//! its subnets' gateway addresses and IPv6 router advertisements from their DHCP_Options.
//! Exposures on a network without usable EVPN settings are reported under [`VRF_METHOD`]
//! (upstream's vrf wiring finds no EVPN device for them and announces nothing); a gateway on
//! such a network is reported once, with everything behind it. Deviations from upstream:
//! `neutron_bgpvpn:as` is honoured (upstream always uses `[DEFAULT] bgp_AS`); the VRF exists as
//! soon as the network is served here, not with its first exposure (it is the network's
//! gateway); any unusable `neutron_bgpvpn:*` value refuses the network instead of raising in
//! `ast.literal_eval` mid-sync.
//!
//! Upstream defects (§7.1) this computation does not have:
//! - U09: each gateway's subnets and load balancers are computed once (upstream's sync did them
//!   twice).
//! - U12: a tenant subnet of a family the gateway has no address of is not exposed (upstream
//!   raised `UnboundLocalError`).
//! - U23: neighbours are part of the desired state of each exposure (`lladdr`), so a withdrawn
//!   VM's or FIP's permanent neighbour goes with it, on VLAN devices too.
//! - U24: the NDP proxy of a gateway or VM is desired exactly while that exposure is, not kept
//!   while any port of the chassis is active.
//! - U26: a load balancer without `lr_ref` is skipped, not a `KeyError` that aborts the sync.
//! - U27: port-forwarding VIPs in IPv6 form (`[2001:db8::1]:22`) are read.
//! - U28: a floating IP's chassis is the port's bound chassis from the whole
//!   `requested-chassis` list (live migration), not an exact comparison.
//! - U30/U31: one unusable row (bad MAC, bad CIDR, unreadable `neutron:fip-distributed`,
//!   hostile names) is skipped with its reason; every other exposure stays.
//! - U32: what is kept between computations ([`ExposureCache`]) is checked against the
//!   generation of every lookup it was computed from, so no event is lost to a concurrent sync.
//! - U25: `subnet`-mode routes are ordinary desired routes, withdrawn with their subnet.
//! - The FIP mode follows `NB_Global` at every computation: switching it moves the FIPs without a
//!   restart and without touching the exposures that stay.
//! - NB_Global without `neutron:fip-distributed` is distributed, as upstream; a value that is
//!   neither True nor False is reported and read as distributed, not a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::caps::frr::values::{Asn, Redistribute, RouteDistinguisher, RouteTarget, Vni};
use crate::exposure::{
    BridgeWiring, EvpnAttachment, EvpnParams, ExposedIp, ExposedRoute, ExposedSubnet, ExposureKind,
    ExposureSet, IpLayout, LocalnetAttachment, NdPrefix, ProviderEvpn, ProviderNetwork,
    RealisationNeed, RootKey, RouteKind, ScopeId, next_version,
};
use crate::hash::{HashMap, HashSet};
pub use crate::ovn::generations::CacheStats;
use crate::ovn::generations::{Generations, ReadSet, Readers};
use crate::ovn::nb::model::{
    DNAT_AND_SNAT, DhcpOptions, LoadBalancer, LogicalSwitch, Lrp, Lsp, Nat, NbKey, NbModel,
    PF_LB_PREFIX, SNAT, VIRTUAL,
};
use crate::ovn::neutron::{
    self, keys, parse_ip_or_cidr, parse_neutron_cidrs, parse_port_addresses,
};
use crate::ovn::table::OvnTable;
use crate::ovn::tenant::TenantOptions;
use crate::types::{InterfaceName, MacAddr};

/// Longest name of a row the driver uses (names end up in logs, OVS port names and snapshots).
pub const MAX_NAME_LEN: usize = 255;

/// Who this chassis is and what it wires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalChassis {
    /// `external_ids:hostname`: compared with `requested-chassis` and `neutron:host_id`.
    pub hostname: String,
    /// `external_ids:system-id`: compared with `status:hosting-chassis`.
    pub system_id: String,
    /// `ovn-bridge-mappings` in order: (physnet, bridge), unvalidated.
    pub bridge_mappings: Vec<(String, String)>,
}

/// `advertisement_method_tenant_networks`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TenantAdvertisement {
    /// Each tenant VM IP is announced (from the gateway chassis).
    #[default]
    Host,
    /// The tenant subnet is announced as a route, no per-VM IPs.
    Subnet,
}

/// `[DEFAULT] exposing_method`, as far as the computation differs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExposingMethod {
    /// Everything in the global scope (the default VRF, announced from `bgp-nic`).
    #[default]
    Underlay,
    /// Each L3 EVPN provider network in its own scope `evpn:<vni>`; nothing in the global one.
    Vrf,
}

/// The options of `[DEFAULT]` the NB driver computes with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NbOptions {
    /// `expose_tenant_networks`, `expose_ipv6_gua_tenant_networks`, `address_scopes`.
    pub tenant: TenantOptions,
    pub advertisement: TenantAdvertisement,
    pub require_snat_disabled_for_tenant_networks: bool,
    pub method: ExposingMethod,
    /// `[DEFAULT] bgp_AS`: the AS of an EVPN VRF whose switch has no `neutron_bgpvpn:as`.
    pub bgp_as: Option<Asn>,
}

/// The `table` of [`crate::exposure::SkippedRow`]s for exposures the `vrf` method has no
/// scope for (their rows are usable; their network is not an EVPN network).
pub const VRF_METHOD: &str = "exposing_method vrf";

/// A gateway hosted here, as the rest of the computation needs it.
#[derive(Debug, Clone, PartialEq)]
struct LocalGateway {
    lrp_uuid: String,
    router_uuid: Option<String>,
    mac: MacAddr,
    ips: Vec<IpNet>,
    provider: ProviderNetwork,
}

/// One change to the [`ExposureSet`] under construction. A root records the changes it makes
/// in order, and laying them out again in the computation's order gives exactly the set a
/// computation from scratch builds ("the first producer of an IP wins" included).
#[derive(Debug, Clone)]
enum Op {
    Skip(&'static str, String, String),
    Ip(ScopeId, std::sync::Arc<ExposedIp>),
    Subnet(ScopeId, ExposedSubnet),
    Route(ScopeId, ExposedRoute),
}

/// A root's changes, its IPs apart: laying the roots out applies every root's other changes
/// (a few) but visits the IPs of only the roots whose result changed (a gateway's thousand
/// FIPs are not walked by an event elsewhere).
#[derive(Debug, Default)]
struct RootOps {
    /// The changes other than IPs, in order.
    others: Vec<Op>,
    /// The IPs, in order.
    ips: Vec<(ScopeId, std::sync::Arc<ExposedIp>)>,
}

impl From<Vec<Op>> for RootOps {
    fn from(ops: Vec<Op>) -> Self {
        let mut split = Self::default();
        for op in ops {
            match op {
                Op::Ip(scope, ip) => split.ips.push((scope, ip)),
                other => split.others.push(other),
            }
        }
        split
    }
}

/// A root of the cache: the readers of a lookup ([`Readers`]) are roots of all three kinds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RootId {
    Port(String),
    Gateway(String),
    Router(String),
}

impl Op {
    fn apply(&self, out: &mut ExposureSet) {
        match self {
            Op::Skip(table, row, reason) => out.skip(table, row.clone(), reason.clone()),
            Op::Ip(scope, ip) => out.scope_mut(*scope).expose_ip(ip.clone()),
            Op::Subnet(scope, subnet) => {
                out.scope_mut(*scope).subnets.insert(subnet.clone());
            }
            Op::Route(scope, route) => out.scope_mut(*scope).expose_route(route.clone()),
        }
    }
}

struct Ctx<'a> {
    model: &'a NbModel,
    local: &'a LocalChassis,
    options: &'a NbOptions,
    /// physnet → bridge, validated.
    mappings: Vec<(Arc<str>, InterfaceName)>,
    /// `vrf` method: the EVPN settings of each provider switch served here that has usable
    /// ones, by switch uuid.
    evpn_of_switch: HashMap<String, Arc<ProviderEvpn>>,
    /// Tenant subnets exposed so far (in any scope), for the load-balancer VIPs inside them.
    tenant_subnets: Vec<IpNet>,
    /// The provider network of each switch looked up by name so far, with the switch's uuid:
    /// every FIP names its network, thousands of FIPs a handful of networks. Valid for one
    /// computation (the mappings and EVPN settings it depends on are set before the first
    /// lookup).
    provider_by_switch_name: HashMap<String, (Option<String>, Option<ProviderNetwork>)>,
    /// What the root being computed changed, in order.
    ops: Vec<Op>,
    /// What the root being computed read, with the generations then.
    reads: Vec<(NbKey, u64)>,
    /// What no root produces: bridge wiring, EVPN scopes' parameters, needs.
    out: ExposureSet,
}

/// The exposures this chassis must have. `hosted_gateways`: `None` reads the gateways' hosting
/// chassis from `Logical_Router_Port.status` (OVN >= 23.09); `Some` names the router ports
/// hosted here, as the Southbound `chassisredirect` bindings say (older OVN).
pub fn compute(
    model: &NbModel,
    local: &LocalChassis,
    options: &NbOptions,
    hosted_gateways: Option<&BTreeSet<String>>,
) -> ExposureSet {
    ExposureCache::default().compute(model, local, options, hosted_gateways)
}

/// What every root depends on besides its own reads: when it changes, nothing is reused.
#[derive(Debug, Clone, PartialEq)]
struct Prelude {
    mappings: Vec<(Arc<str>, InterfaceName)>,
    evpn_of_switch: HashMap<String, Arc<ProviderEvpn>>,
    distributed: bool,
}

/// A port listing this host: its exposures.
#[derive(Debug)]
struct PortResult {
    reads: ReadSet<NbKey>,
    ops: RootOps,
    /// Tells this result from the one that replaces it ([`IpLayout`]).
    version: u64,
}

/// A gateway hosted here: its addresses, its centralized FIPs (laid out after the ports),
/// and its router id and what the router's root needs of it.
#[derive(Debug)]
struct GatewayResult {
    reads: ReadSet<NbKey>,
    addresses: RootOps,
    fips: RootOps,
    gateway: Option<(String, LocalGateway)>,
    /// The versions of its addresses and of its FIPs (two roots of the layout).
    versions: (u64, u64),
}

/// A router with a gateway here: its tenant networks and load balancers, computed through its
/// first gateway, after the tenant subnets of the routers before it (its load-balancer VIPs
/// inside them are tenant addresses).
#[derive(Debug)]
struct RouterResult {
    reads: ReadSet<NbKey>,
    gateway: LocalGateway,
    subnets_before: Vec<IpNet>,
    subnets: Vec<IpNet>,
    ops: RootOps,
    version: u64,
}

/// A root in the order of production: the prelude (group 0), the gateways' addresses (1, by
/// name and uuid), the ports (2, by name and uuid), the gateways' FIPs (3, by router, then
/// name and uuid), the routers' networks (4, by router).
#[derive(Clone, Copy)]
struct RootOrder<'a>(u8, &'a str, &'a str, &'a str);

impl RootKey for RootOrder<'_> {
    type Owned = (u8, String, String, String);

    fn to_owned_key(&self) -> Self::Owned {
        (
            self.0,
            self.1.to_owned(),
            self.2.to_owned(),
            self.3.to_owned(),
        )
    }

    fn cmp_owned(&self, (group, a, b, c): &Self::Owned) -> std::cmp::Ordering {
        self.0
            .cmp(group)
            .then_with(|| self.1.cmp(a))
            .then_with(|| self.2.cmp(b))
            .then_with(|| self.3.cmp(c))
    }
}

/// The per-root results of the last computation (issue 17). The roots are the ports listing
/// this host, the gateways hosted here and the routers behind them; each records every model
/// lookup it makes with the lookup's generation ([`NbKey`]), and is recomputed only when one
/// of those has changed, or when what every root depends on (the bridge mappings, the EVPN
/// networks, the FIP mode, the options) has. On a gateway hosting 30 routers with a thousand
/// FIPs each, binding a VM recomputes that VM's port, not the 30k exposures.
#[derive(Debug, Default)]
pub struct ExposureCache {
    inputs: Option<(LocalChassis, NbOptions)>,
    prelude: Option<Prelude>,
    ports: HashMap<String, PortResult>,
    gateways: HashMap<String, GatewayResult>,
    routers: HashMap<String, RouterResult>,
    /// The roots that read each lookup: an event looks at those of the lookups it stamped,
    /// not at every root's reads.
    readers: Readers<NbKey, RootId>,
    /// The roots' IPs as last laid out.
    layout: IpLayout<(u8, String, String, String)>,
    last: CacheStats,
}

impl ExposureCache {
    fn clear(&mut self) {
        self.ports.clear();
        self.gateways.clear();
        self.routers.clear();
        self.readers.clear();
    }

    /// Whether the reads of the result of `root` are unchanged: by the roots the stamps since
    /// the last computation name (`stale`), or by checking its reads when that is not known.
    fn reads_valid(
        stale: Option<&HashSet<RootId>>,
        root: &RootId,
        reads: &ReadSet<NbKey>,
        generations: &Generations<NbKey>,
    ) -> bool {
        match stale {
            Some(stale) => !stale.contains(root),
            None => reads.still_valid(generations),
        }
    }

    /// `root`'s new result read `new`; its old one, if any, read `old`.
    fn reread(&mut self, root: RootId, old: Option<&ReadSet<NbKey>>, new: &ReadSet<NbKey>) {
        if let Some(old) = old {
            self.readers.remove(&root, old);
        }
        self.readers.add(&root, new);
    }

    /// How the last [`ExposureCache::compute`] went.
    pub fn last_stats(&self) -> CacheStats {
        self.last
    }

    /// The exposures this chassis must have: equal to [`compute`]'s, recomputing only the roots
    /// whose lookups changed since the last call.
    pub fn compute(
        &mut self,
        model: &NbModel,
        local: &LocalChassis,
        options: &NbOptions,
        hosted_gateways: Option<&BTreeSet<String>>,
    ) -> ExposureSet {
        let inputs = (local.clone(), options.clone());
        if self.inputs.as_ref() != Some(&inputs) {
            self.clear();
            self.inputs = Some(inputs);
        }
        let mut ctx = Ctx {
            model,
            local,
            options,
            mappings: Vec::new(),
            evpn_of_switch: HashMap::default(),
            tenant_subnets: Vec::new(),
            provider_by_switch_name: HashMap::default(),
            ops: Vec::new(),
            reads: Vec::new(),
            out: ExposureSet::default(),
        };
        // The prelude is small (the localnet ports of the mapped physnets) and always computed.
        ctx.wire_bridges();
        if options.method == ExposingMethod::Vrf {
            ctx.evpn_networks();
        }
        let distributed = ctx.fip_distributed();
        ctx.reads.clear();
        let prelude_ops = std::mem::take(&mut ctx.ops);
        let prelude = Prelude {
            mappings: ctx.mappings.clone(),
            evpn_of_switch: ctx.evpn_of_switch.clone(),
            distributed,
        };
        if self.prelude.as_ref() != Some(&prelude) {
            self.clear();
            self.prelude = Some(prelude);
        }
        let generations = model.generations();
        // The roots whose reads an event changed; `None` (first call, new epoch, log outrun):
        // each root's reads are checked.
        let stale = self.readers.stale(generations);
        let stale = stale.as_ref();
        let mut stats = CacheStats::default();

        let gateways = model.local_gateways(&local.system_id, hosted_gateways);
        // Router id → its gateways hosted here (the first by name carries the subnets).
        let mut routers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for lrp in &gateways {
            stats.roots += 1;
            let id = RootId::Gateway(lrp.uuid.clone());
            let valid = self
                .gateways
                .get(&lrp.uuid)
                .is_some_and(|r| Self::reads_valid(stale, &id, &r.reads, generations));
            if !valid {
                stats.recomputed += 1;
                ctx.read(NbKey::Lrp(lrp.uuid.clone()));
                let gateway = ctx.expose_gateway(lrp);
                let addresses = std::mem::take(&mut ctx.ops).into();
                if !distributed && let Some((_, gw)) = &gateway {
                    ctx.expose_centralized_fips(gw);
                }
                let result = GatewayResult {
                    reads: ctx.finish_reads(),
                    addresses,
                    fips: std::mem::take(&mut ctx.ops).into(),
                    gateway,
                    versions: (next_version(), next_version()),
                };
                let old = self.gateways.remove(&lrp.uuid);
                self.reread(id, old.as_ref().map(|o| &o.reads), &result.reads);
                self.gateways.insert(lrp.uuid.clone(), result);
            }
            if let Some((router, _)) = &self.gateways[&lrp.uuid].gateway {
                routers.entry(router.clone()).or_default().push(&lrp.uuid);
            }
        }

        let hostname = local.hostname.as_str();
        // The ports are listed by their keys (hundreds, most of them fresh): the stale ones by
        // uuid, so that checking one builds no [`RootId`], and a row is looked up only to
        // compute its root again.
        let stale_ports: Option<HashSet<&str>> = stale.map(|s| {
            s.iter()
                .filter_map(|id| match id {
                    RootId::Port(u) => Some(u.as_str()),
                    _ => None,
                })
                .collect()
        });
        let mut ports: Vec<(&str, &str)> = Vec::new();
        for (name, uuid) in model.port_keys_listing_host(hostname) {
            let valid = self.ports.get(uuid).is_some_and(|r| match &stale_ports {
                Some(stale) => !stale.contains(uuid.as_str()),
                None => r.reads.still_valid(generations),
            });
            if !valid {
                let Some(lsp) = model.lsp(uuid) else {
                    continue;
                };
                let id = RootId::Port(uuid.clone());
                stats.recomputed += 1;
                ctx.read(NbKey::Lsp(lsp.uuid.clone()));
                ctx.expose_bound_port(lsp, distributed);
                let result = PortResult {
                    reads: ctx.finish_reads(),
                    ops: std::mem::take(&mut ctx.ops).into(),
                    version: next_version(),
                };
                let old = self.ports.remove(&lsp.uuid);
                self.reread(id, old.as_ref().map(|o| &o.reads), &result.reads);
                self.ports.insert(lsp.uuid.clone(), result);
            }
            stats.roots += 1;
            ports.push((name, uuid));
        }

        for (router, lrps) in &routers {
            let Some((_, gw)) = lrps
                .first()
                .and_then(|l| self.gateways[*l].gateway.as_ref())
            else {
                continue;
            };
            stats.roots += 1;
            let id = RootId::Router(router.clone());
            let valid = self.routers.get(router).is_some_and(|r| {
                r.gateway == *gw
                    && r.subnets_before == ctx.tenant_subnets
                    && Self::reads_valid(stale, &id, &r.reads, generations)
            });
            if valid {
                let cached = &self.routers[router];
                ctx.tenant_subnets.extend(cached.subnets.iter().copied());
                continue;
            }
            stats.recomputed += 1;
            let before = ctx.tenant_subnets.len();
            if options.tenant.enabled() {
                ctx.expose_tenant_subnets(router, gw);
            }
            ctx.expose_lbs(router, gw);
            let result = RouterResult {
                reads: ctx.finish_reads(),
                gateway: gw.clone(),
                subnets_before: ctx.tenant_subnets[..before].to_vec(),
                subnets: ctx.tenant_subnets[before..].to_vec(),
                ops: std::mem::take(&mut ctx.ops).into(),
                version: next_version(),
            };
            let old = self.routers.remove(router);
            self.reread(id, old.as_ref().map(|o| &o.reads), &result.reads);
            self.routers.insert(router.clone(), result);
        }

        // Laid out in the order of a computation from scratch: every root's other changes,
        // then the IPs (they do not interact with the other changes) as a delta of the last
        // layout (only the roots whose result changed are looked at).
        let mut out = std::mem::take(&mut ctx.out);
        let name_of: HashMap<&str, &str> = gateways
            .iter()
            .map(|l| (l.uuid.as_str(), l.name.as_str()))
            .collect();
        let prelude_ops = RootOps::from(prelude_ops);
        let mut order: Vec<(RootOrder<'_>, u64, &RootOps)> = Vec::new();
        // The prelude is computed every time: a new version each time.
        order.push((RootOrder(0, "", "", ""), next_version(), &prelude_ops));
        for lrp in &gateways {
            let g = &self.gateways[&lrp.uuid];
            let key = RootOrder(1, &lrp.name, &lrp.uuid, "");
            order.push((key, g.versions.0, &g.addresses));
        }
        for (name, uuid) in &ports {
            let p = &self.ports[*uuid];
            order.push((RootOrder(2, name, uuid, ""), p.version, &p.ops));
        }
        for (router, lrps) in &routers {
            for lrp in lrps {
                let g = &self.gateways[*lrp];
                let key = RootOrder(3, router, name_of[lrp], lrp);
                order.push((key, g.versions.1, &g.fips));
            }
        }
        for router in routers.keys() {
            if let Some(r) = self.routers.get(router) {
                order.push((RootOrder(4, router, "", ""), r.version, &r.ops));
            }
        }
        for (_, _, ops) in &order {
            for op in &ops.others {
                op.apply(&mut out);
            }
        }
        let laid = order.iter().map(|(key, version, ops)| {
            let ips = ops.ips.iter().map(|(scope, ip)| (*scope, ip));
            (*key, *version, ips)
        });
        self.layout.lay(laid, &mut out);
        if options.advertisement == TenantAdvertisement::Subnet
            && options.method == ExposingMethod::Underlay
        {
            // Upstream's base configuration redistributes kernel routes with the subnet method
            // (A2); an EVPN VRF redistributes kernel routes anyway.
            out.needs.insert(RealisationNeed::RedistributeKernel);
        }

        // Forget the roots that are no longer here, and what they read.
        if self.gateways.len() > gateways.len() {
            let here: HashSet<&str> = gateways.iter().map(|l| l.uuid.as_str()).collect();
            let (readers, results) = (&mut self.readers, &mut self.gateways);
            let root = |u: &String| RootId::Gateway(u.clone());
            readers.retain(results, root, |r| &r.reads, |u| here.contains(u.as_str()));
        }
        if self.ports.len() > ports.len() {
            let here: HashSet<&str> = ports.iter().map(|(_, uuid)| *uuid).collect();
            let (readers, results) = (&mut self.readers, &mut self.ports);
            let root = |u: &String| RootId::Port(u.clone());
            readers.retain(results, root, |r| &r.reads, |u| here.contains(u.as_str()));
        }
        if self.routers.len() > routers.len() {
            let (readers, results) = (&mut self.readers, &mut self.routers);
            let root = |r: &String| RootId::Router(r.clone());
            readers.retain(results, root, |r| &r.reads, |r| routers.contains_key(r));
        }
        self.readers.now_current(generations);
        self.last = stats;
        out
    }
}

/// A name that cannot be used: empty, oversized, or carrying control characters (a newline
/// in a name would forge log lines and break the OVS port names built from it).
fn bad_name(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("empty name".to_owned())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!(
            "name of {} bytes (at most {MAX_NAME_LEN})",
            name.len()
        ))
    } else if name.chars().any(char::is_control) {
        Some(format!("name {:?} carries control characters", name))
    } else {
        None
    }
}

/// A row reference for `skipped`: uuid and name, the name escaped and cut so that a hostile one
/// cannot forge the report.
fn row_ref(uuid: &str, name: &str) -> String {
    let mut shown: String = name.escape_debug().take(80).collect();
    if shown.len() < name.escape_debug().count() {
        shown.push('…');
    }
    format!("{uuid} ({shown})")
}

/// Two VRF settings that may share one VNI: everything but the attachments equal.
fn same_vrf(a: &EvpnParams, b: &EvpnParams) -> bool {
    a.bgp_as == b.bgp_as
        && a.rd == b.rd
        && a.import_targets == b.import_targets
        && a.export_targets == b.export_targets
        && a.redistribute == b.redistribute
}

/// `a` then the elements of `b` not in `a`.
fn union(a: &[RouteTarget], b: &[RouteTarget]) -> Vec<RouteTarget> {
    let mut out = a.to_vec();
    for t in b {
        if !out.contains(t) {
            out.push(*t);
        }
    }
    out
}

/// One subnet's DHCP_Options: its gateway address with the subnet's prefix length, and for an
/// IPv6 subnet its router advertisement (upstream's `process_dhcp_opts`).
fn dhcp_row(row: &DhcpOptions) -> Result<(Option<IpNet>, Option<NdPrefix>), String> {
    let cidr: IpNet = row.cidr.trim().parse().map_err(|_| {
        format!(
            "cidr {:?} is not a prefix",
            row.cidr.escape_debug().to_string()
        )
    })?;
    let gateway = match row.options.get(keys::DHCP_ROUTER).map(|r| r.trim()) {
        None | Some("") => None,
        Some(router) => {
            let ip: IpAddr = router.parse().map_err(|_| {
                format!(
                    "options:router {:?} is not an IP address",
                    router.escape_debug().to_string()
                )
            })?;
            if ip.is_ipv4() != cidr.addr().is_ipv4() {
                return Err(format!(
                    "options:router {ip} is not of the family of {cidr}"
                ));
            }
            Some(IpNet::new(ip, cidr.prefix_len()).map_err(|e| e.to_string())?)
        }
    };
    let nd = match cidr.trunc() {
        IpNet::V4(_) => None,
        IpNet::V6(prefix) => {
            let dns_servers = match row.options.get(keys::DHCP_DNS_SERVER) {
                None => Vec::new(),
                Some(raw) => crate::caps::frr::values::parse_dns_servers(raw)
                    .map_err(|e| format!("options:dns_server: {e}"))?,
            };
            let stateless = row
                .options
                .get(keys::DHCP_V6_STATELESS)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            Some(NdPrefix {
                prefix,
                stateless,
                dns_servers,
            })
        }
    };
    Ok((gateway, nd))
}

/// A localnet `tag` that can be a VLAN id (1..=4094); anything else means untagged.
fn valid_vlan(tag: Option<i64>) -> Option<u16> {
    tag.and_then(|t| u16::try_from(t).ok())
        .filter(|t| (1..=4094).contains(t))
}

/// A VM's port (`""`) or a virtual port: the types whose addresses are exposed.
fn is_vm_type(port_type: &str) -> bool {
    port_type.is_empty() || port_type == VIRTUAL
}

/// The IPv6 prefixes of `neutron:cidrs`, for the NDP proxy.
fn ipv6_prefixes(cidrs: &[IpNet]) -> BTreeSet<IpNet> {
    cidrs
        .iter()
        .filter(|c| c.addr().is_ipv6())
        .map(IpNet::trunc)
        .collect()
}

/// The VIP address of a `vips` key: `ip:port`, `[ipv6]:port` or a bare address.
fn vip_address(key: &str) -> Option<IpAddr> {
    let key = key.trim();
    if let Some(rest) = key.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    if let Ok(ip) = key.parse() {
        return Some(ip);
    }
    key.rsplit_once(':')?
        .0
        .parse::<std::net::Ipv4Addr>()
        .ok()
        .map(IpAddr::V4)
}

impl<'a> Ctx<'a> {
    fn skip(&mut self, table: &'static str, row: impl Into<String>, reason: impl Into<String>) {
        self.ops.push(Op::Skip(table, row.into(), reason.into()));
    }

    fn skip_row(&mut self, table: &'static str, uuid: &str, name: &str, reason: impl Into<String>) {
        self.skip(table, row_ref(uuid, name), reason);
    }

    fn expose(&mut self, scope: ScopeId, ip: ExposedIp) {
        self.ops.push(Op::Ip(scope, ip.into()));
    }

    fn expose_subnet(&mut self, scope: ScopeId, subnet: ExposedSubnet) {
        self.ops.push(Op::Subnet(scope, subnet));
    }

    // ---- Lookups, recorded (see [`ExposureCache`])

    fn read(&mut self, key: NbKey) {
        let generation = self.model.generation(&key);
        self.reads.push((key, generation));
    }

    /// What the root just computed read.
    fn finish_reads(&mut self) -> ReadSet<NbKey> {
        ReadSet::new(self.model.generations(), std::mem::take(&mut self.reads))
    }

    fn switch_of_port(&mut self, lsp_uuid: &str) -> Option<&'a LogicalSwitch> {
        self.read(NbKey::SwitchOfPort(lsp_uuid.to_owned()));
        self.model.switch_of_port(lsp_uuid)
    }

    fn lsp_named(&mut self, name: &str) -> Option<&'a Lsp> {
        self.read(NbKey::LspNamed(name.to_owned()));
        self.model.lsp_named(name)
    }

    fn nats_of_router(&mut self, lr_uuid: &str) -> Vec<&'a Nat> {
        self.read(NbKey::NatsOfRouter(lr_uuid.to_owned()));
        self.model.nats_of_router(lr_uuid)
    }

    fn nats_of_gateway(&mut self, lrp_uuid: &str) -> Vec<&'a Nat> {
        self.read(NbKey::NatsOfGateway(lrp_uuid.to_owned()));
        self.model.nats_of_gateway(lrp_uuid)
    }

    fn nats_of_port(&mut self, lsp_name: &str) -> Vec<&'a Nat> {
        self.read(NbKey::NatsOfPort(lsp_name.to_owned()));
        self.model.nats_of_port(lsp_name)
    }

    fn router_interfaces(&mut self, router_id: &str) -> Vec<&'a Lsp> {
        self.read(NbKey::RouterInterfaces(router_id.to_owned()));
        self.model.router_interfaces(router_id)
    }

    fn ports_on_switch(&mut self, ls_uuid: &str) -> Vec<&'a Lsp> {
        self.read(NbKey::PortsOnSwitch(ls_uuid.to_owned()));
        self.model.ports_on_switch(ls_uuid)
    }

    fn lbs_of_router(&mut self, router_id: &str) -> Vec<&'a LoadBalancer> {
        self.read(NbKey::LbsOfRouter(router_id.to_owned()));
        self.model.lbs_of_router(router_id)
    }

    /// The router listing `lrp` (its uuid) and `lrp`'s Neutron router id.
    fn router_of_lrp(&mut self, lrp: &'a Lrp) -> (Option<&'a str>, Option<String>) {
        self.read(NbKey::RouterOfLrp(lrp.uuid.clone()));
        let uuid = self.model.router_of_lrp(&lrp.uuid).map(|r| r.uuid.clone());
        (self.model.router_id_of_lrp(lrp), uuid)
    }

    fn skip_lsp(&mut self, lsp: &Lsp, reason: impl Into<String>) {
        self.skip_row(Lsp::TABLE, &lsp.uuid, &lsp.name, reason);
    }

    /// Whether `lsp` has a usable name; reports it otherwise.
    fn lsp_name_ok(&mut self, lsp: &Lsp) -> bool {
        match bad_name(&lsp.name) {
            Some(reason) => {
                self.skip_lsp(lsp, reason);
                false
            }
            None => true,
        }
    }

    fn wire_bridges(&mut self) {
        for (position, (physnet, bridge)) in self.local.bridge_mappings.iter().enumerate() {
            let bridge = match InterfaceName::new(bridge.as_str()) {
                Ok(b) => b,
                Err(e) => {
                    self.skip(
                        "Open_vSwitch",
                        "external_ids:ovn-bridge-mappings",
                        format!("mapping {physnet}:{bridge}: {e}"),
                    );
                    continue;
                }
            };
            self.mappings
                .push((physnet.as_str().into(), bridge.clone()));
            let index = u16::try_from(position + 1).unwrap_or(u16::MAX);
            let mut vlans = BTreeSet::new();
            let mut ports = BTreeSet::new();
            let mut hostile = Vec::new();
            for localnet in self.model.localnets_of_physnet(physnet) {
                if bad_name(&localnet.name).is_some() {
                    hostile.push(localnet);
                    continue;
                }
                if let Some(vlan) = valid_vlan(localnet.vlan_tag()) {
                    vlans.insert(vlan);
                }
                ports.insert(localnet.name.clone());
            }
            for localnet in hostile {
                let reason = bad_name(&localnet.name).unwrap_or_default();
                self.skip_lsp(localnet, reason);
            }
            let wiring = self
                .out
                .bridges
                .entry(bridge.clone())
                .or_insert_with(|| BridgeWiring {
                    bridge,
                    physnets: BTreeSet::new(),
                    vlans: BTreeSet::new(),
                    localnet_ports: BTreeSet::new(),
                    index,
                });
            wiring.physnets.insert(physnet.clone());
            wiring.vlans.extend(vlans);
            wiring.localnet_ports.extend(ports);
        }
    }

    // ---- EVPN provider networks (`vrf` method)

    /// The L3 EVPN networks served here: each provider switch with a localnet port of a physnet
    /// mapped here and `neutron_bgpvpn:type = l3` gets its scope `evpn:<vni>` with one
    /// `Localnet` attachment per such localnet port, whether or not anything is exposed in it
    /// yet: its VRF is the network's router (the gateway addresses of its subnets). Upstream
    /// creates the devices with the first exposure; a VM booting on the network needs its
    /// gateway before that.
    fn evpn_networks(&mut self) {
        // (switch name, uuid) → its localnet ports mapped here, with their provider network;
        // by name, so which of two networks claiming one VNI gets it does not depend on uuids.
        let mut switches: BTreeMap<(String, String), Vec<(&'a Lsp, ProviderNetwork)>> =
            BTreeMap::new();
        let model = self.model;
        for (physnet, _) in self.mappings.clone() {
            for localnet in model.localnets_of_physnet(&physnet) {
                if bad_name(&localnet.name).is_some() {
                    continue; // reported by wire_bridges
                }
                let Some(ls) = model.switch_of_port(&localnet.uuid) else {
                    continue;
                };
                let Some(provider) = self.provider_of_localnet(&ls.uuid, localnet) else {
                    continue;
                };
                switches
                    .entry((ls.name.clone(), ls.uuid.clone()))
                    .or_default()
                    .push((localnet, provider));
            }
        }
        for ((_, ls_uuid), localnets) in switches {
            let Some(ls) = model.switch(&ls_uuid) else {
                continue;
            };
            let Some((evpn, mut params)) = self.evpn_settings(ls) else {
                continue;
            };
            let evpn = Arc::new(evpn);
            let (gateway_addresses, nd_prefixes) = self.dhcp_of_switch(ls);
            for (localnet, provider) in localnets {
                params
                    .attachments
                    .insert(EvpnAttachment::Localnet(LocalnetAttachment {
                        provider: ProviderNetwork {
                            evpn: Some(evpn.clone()),
                            ..provider
                        },
                        port_uuid: localnet.uuid.clone(),
                        port_name: localnet.name.clone(),
                        gateway_addresses: gateway_addresses.clone(),
                        nd_prefixes: nd_prefixes.clone(),
                    }));
            }
            let scope = self.out.scope_mut(ScopeId::Evpn(evpn.vni));
            match &mut scope.evpn {
                None => scope.evpn = Some(params),
                Some(first) if same_vrf(first, &params) => {
                    // Two networks in one VNI with the same settings share its VRF.
                    first.attachments.extend(params.attachments);
                }
                Some(_) => {
                    self.skip_switch(
                        ls,
                        format!(
                            "VNI {} is already the VRF of another network with other settings \
                             (AS, RD or route targets): not exposed",
                            evpn.vni
                        ),
                    );
                    continue;
                }
            }
            self.evpn_of_switch.insert(ls_uuid, evpn);
        }
    }

    fn skip_switch(&mut self, ls: &LogicalSwitch, reason: impl Into<String>) {
        self.skip_row(LogicalSwitch::TABLE, &ls.uuid, &ls.name, reason);
    }

    /// The EVPN settings of a provider switch, validated; `None` (reported when the switch
    /// asks for EVPN) when it has none usable. Any unusable `neutron_bgpvpn:*` value refuses
    /// the whole network: a VRF without the route targets or RD the operator set would import
    /// or export routes of another VPN (FRR derives its own), and nothing of such a value may
    /// reach vtysh.
    fn evpn_settings(&mut self, ls: &LogicalSwitch) -> Option<(ProviderEvpn, EvpnParams)> {
        let b = ls.bgpvpn();
        if b.is_empty() && b.ignored.is_empty() {
            return None; // not an EVPN network: its ports are reported when exposed
        }
        if b.vpn_type == Some(neutron::BgpvpnType::L2) {
            self.skip_switch(
                ls,
                "neutron_bgpvpn:type = l2: an L2 VNI is not what the vrf method realises (upstream \
                 serves only l3 networks with it)",
            );
            return None;
        }
        let mut problems: Vec<String> = b.ignored.iter().map(ToString::to_string).collect();
        if b.vpn_type.is_none() && problems.is_empty() {
            problems.push(format!("no {}", keys::BGPVPN_TYPE));
        }
        if b.vni.is_none() && !problems.iter().any(|p| p.contains(keys::BGPVPN_VNI)) {
            problems.push(format!("no {}", keys::BGPVPN_VNI));
        }
        let vni = b.vni.and_then(|v| Vni::new(v).ok());
        let bgp_as = match b.asn {
            Some(a) => Asn::new(a).ok(),
            None => self.options.bgp_as,
        };
        if bgp_as.is_none() && b.asn.is_none() {
            problems.push("[DEFAULT] bgp_AS is not a usable AS number".to_owned());
        }
        let frr_values = |list: &[neutron::RouteTarget], problems: &mut Vec<String>| {
            list.iter()
                .filter_map(|v| match v.to_string().parse::<RouteTarget>() {
                    Ok(t) => Some(t),
                    Err(e) => {
                        problems.push(e.to_string());
                        None
                    }
                })
                .collect::<Vec<_>>()
        };
        let rt = frr_values(&b.rt, &mut problems);
        let it = frr_values(&b.it, &mut problems);
        let et = frr_values(&b.et, &mut problems);
        let rd = match b
            .rd
            .first()
            .map(|r| r.to_string().parse::<RouteDistinguisher>())
        {
            None => None,
            Some(Ok(rd)) => Some(rd),
            Some(Err(e)) => {
                problems.push(e.to_string());
                None
            }
        };
        let (Some(vni), Some(bgp_as), true) = (vni, bgp_as, problems.is_empty()) else {
            self.skip_switch(
                ls,
                format!(
                    "EVPN settings not usable, the network is not exposed: {}",
                    problems.join("; ")
                ),
            );
            return None;
        };
        let evpn = ProviderEvpn {
            vni,
            l3: true,
            rd,
            route_targets: rt.clone(),
            import_targets: it.clone(),
            export_targets: et.clone(),
        };
        let mut params = EvpnParams::new(vni, bgp_as);
        params.rd = rd;
        // networking-bgpvpn's `rt` is import and export (upstream renders both lines).
        params.import_targets = union(&rt, &it);
        params.export_targets = union(&rt, &et);
        params.redistribute = BTreeSet::from([Redistribute::Connected, Redistribute::Kernel]);
        Some((evpn, params))
    }

    /// The gateway addresses (`options:router` with the subnet's prefix length) and IPv6 router
    /// advertisements of a switch's subnets, from their DHCP_Options rows; a malformed row is
    /// reported and left out.
    fn dhcp_of_switch(&mut self, ls: &LogicalSwitch) -> (BTreeSet<IpNet>, BTreeSet<NdPrefix>) {
        let mut gateways = BTreeSet::new();
        let mut nd = BTreeSet::new();
        let Some(network) = ls.network_id() else {
            return (gateways, nd);
        };
        for row in self.model.dhcp_options_of_network(network) {
            // A port's extra_dhcp_opts row repeats its subnet's and may override `router` for
            // that port only: the network's gateway is its subnet's.
            if row.is_port_specific() {
                continue;
            }
            match dhcp_row(row) {
                Ok((gateway, prefix)) => {
                    gateways.extend(gateway);
                    nd.extend(prefix);
                }
                Err(reason) => {
                    let name = format!("{} {}", ls.name, row.cidr);
                    self.skip_row(DhcpOptions::TABLE, &row.uuid, &name, reason);
                }
            }
        }
        (gateways, nd)
    }

    /// `NB_Global.external_ids:neutron:fip-distributed`; unreadable values are reported and
    /// read as the default (distributed).
    fn fip_distributed(&mut self) -> bool {
        match neutron::fip_distributed(self.model.fip_distributed_raw()) {
            Ok(d) => d,
            Err(e) => {
                self.skip(
                    "NB_Global",
                    "external_ids",
                    format!("{e}; floating IPs are treated as distributed (the default)"),
                );
                true
            }
        }
    }

    /// The provider network of switch `ls_uuid`: a localnet port of a physnet mapped here,
    /// with the switch's EVPN settings (`vrf` method).
    fn provider_of_switch(&mut self, ls_uuid: &str) -> Option<ProviderNetwork> {
        self.read(NbKey::LocalnetsOnSwitch(ls_uuid.to_owned()));
        self.model
            .localnets_on_switch(ls_uuid)
            .into_iter()
            .find_map(|localnet| self.provider_of_localnet(ls_uuid, localnet))
    }

    fn provider_of_localnet(&self, ls_uuid: &str, localnet: &Lsp) -> Option<ProviderNetwork> {
        let physnet = localnet.physnet()?;
        let (physnet, bridge) = self.mappings.iter().find(|(p, _)| &**p == physnet)?;
        Some(ProviderNetwork {
            physnet: physnet.clone(),
            bridge: bridge.clone(),
            vlan: valid_vlan(localnet.vlan_tag()),
            evpn: self.evpn_of_switch.get(ls_uuid).cloned(),
        })
    }

    /// Put an exposure where the exposing method wants it: the global scope (`underlay`), or
    /// the EVPN scope of its provider network (`vrf`; reported when the network has none).
    fn place(&mut self, mut ip: ExposedIp) {
        if self.options.method == ExposingMethod::Underlay {
            return self.expose(ScopeId::Global, ip);
        }
        match ip.provider.as_ref().map(|p| (p, p.evpn.as_ref())) {
            Some((_, Some(evpn))) => {
                // Upstream's vrf wiring answers NDP with the VRF side's own addresses and sets
                // no proxy entries for the exposures.
                ip.ndp_proxy.clear();
                let scope = ScopeId::Evpn(evpn.vni);
                self.expose(scope, ip);
            }
            Some((provider, None)) => {
                let row = format!("{} ({})", ip.ip, ip.source);
                let reason = format!(
                    "provider network {} (bridge {}{}) has no usable EVPN settings: the vrf \
                     method exposes only networks with neutron_bgpvpn:type = l3 and a VNI",
                    provider.physnet,
                    provider.bridge,
                    provider
                        .vlan
                        .map_or(String::new(), |v| format!(", VLAN {v}"))
                );
                self.skip(VRF_METHOD, row, reason);
            }
            None => {
                let row = format!("{} ({})", ip.ip, ip.source);
                self.skip(
                    VRF_METHOD,
                    row,
                    "no provider network to route it through: the vrf method exposes \
                     addresses only as routes in an EVPN network's VRF",
                );
            }
        }
    }

    fn provider_of_switch_named(&mut self, name: &str) -> Option<ProviderNetwork> {
        self.read(NbKey::SwitchNamed(name.to_owned()));
        if let Some((switch, known)) = self.provider_by_switch_name.get(name) {
            // What the first lookup read, this root reads too.
            let (switch, known) = (switch.clone(), known.clone());
            if let Some(switch) = switch {
                self.read(NbKey::LocalnetsOnSwitch(switch));
            }
            return known;
        }
        let switch = self.model.switch_named(name).map(|ls| ls.uuid.clone());
        let provider = match &switch {
            Some(uuid) => self.provider_of_switch(uuid),
            None => None,
        };
        self.provider_by_switch_name
            .insert(name.to_owned(), (switch, provider.clone()));
        provider
    }

    /// The MAC and IPs of a port (`addresses[0]`), or its `neutron:cidrs` when the MAC is
    /// `unknown`; `None` (reported when malformed) when it has none.
    fn port_addresses(&mut self, lsp: &Lsp) -> Option<(Option<MacAddr>, Vec<IpNet>)> {
        match parse_port_addresses(&lsp.addresses) {
            Ok(Some(a)) => Some((Some(a.mac), a.ips)),
            Ok(None) => {
                let unknown = lsp.addresses.iter().any(|a| a.trim() == "unknown");
                let cidrs = lsp.external_ids.get(keys::CIDRS)?;
                if !unknown {
                    return None;
                }
                match parse_neutron_cidrs(cidrs) {
                    Ok(ips) if !ips.is_empty() => Some((None, ips)),
                    Ok(_) => None,
                    Err(e) => {
                        self.skip_lsp(lsp, e);
                        None
                    }
                }
            }
            Err(e) => {
                self.skip_lsp(lsp, e.replace("mac column", "addresses"));
                None
            }
        }
    }

    /// `neutron:cidrs` of a port; reported and empty when malformed.
    fn port_cidrs(&mut self, lsp: &Lsp) -> Vec<IpNet> {
        let Some(raw) = lsp.external_ids.get(keys::CIDRS) else {
            return Vec::new();
        };
        match parse_neutron_cidrs(raw) {
            Ok(c) => c,
            Err(e) => {
                self.skip_lsp(lsp, e);
                Vec::new()
            }
        }
    }

    // ---- Gateways

    /// Expose a gateway router port hosted here; its router id and what the rest needs of it.
    fn expose_gateway(&mut self, lrp: &'a Lrp) -> Option<(String, LocalGateway)> {
        let table = Lrp::TABLE;
        if let Some(reason) = bad_name(&lrp.name) {
            self.skip_row(table, &lrp.uuid, &lrp.name, reason);
            return None;
        }
        let (router, router_uuid) = self.router_of_lrp(lrp);
        let Some(router) = router else {
            self.skip_row(
                table,
                &lrp.uuid,
                &lrp.name,
                "no router: no Logical_Router lists it and it has no neutron:router_name",
            );
            return None;
        };
        let mac: MacAddr = match lrp.mac.trim().parse() {
            Ok(m) => m,
            Err(_) => {
                self.skip_row(
                    table,
                    &lrp.uuid,
                    &lrp.name,
                    format!("bad MAC {:?}", lrp.mac),
                );
                return None;
            }
        };
        let mut ips = Vec::new();
        for network in &lrp.networks {
            match parse_ip_or_cidr(network.trim()) {
                Ok(n) => ips.push(n),
                Err(e) => self.skip_row(table, &lrp.uuid, &lrp.name, format!("networks: {e}")),
            }
        }
        let network = lrp
            .external_ids
            .get(keys::NETWORK_NAME)
            .map(|n| n.trim().to_owned())
            .unwrap_or_default();
        let Some(provider) = self.provider_of_switch_named(&network) else {
            self.skip_row(
                table,
                &lrp.uuid,
                &lrp.name,
                format!(
                    "gateway network {network:?} is not a provider network mapped on this chassis"
                ),
            );
            return None;
        };
        if self.options.method == ExposingMethod::Vrf && provider.evpn.is_none() {
            self.skip_row(
                table,
                &lrp.uuid,
                &lrp.name,
                format!(
                    "gateway network {network:?} has no usable EVPN settings (neutron_bgpvpn:type \
                     = l3 and a VNI): with exposing_method = vrf its addresses, floating IPs, \
                     tenant networks and load balancers are not exposed"
                ),
            );
            return None;
        }
        for ip in &ips {
            let ndp_proxy = if ip.addr().is_ipv6() {
                BTreeSet::from([ip.trunc()])
            } else {
                BTreeSet::new()
            };
            self.place(ExposedIp {
                ip: ip.addr(),
                kind: ExposureKind::GatewayPort,
                source: lrp.name.as_str().into(),
                provider: Some(provider.clone()),
                lladdr: Some(mac),
                ndp_proxy,
                via: None,
            });
        }
        Some((
            router.to_owned(),
            LocalGateway {
                lrp_uuid: lrp.uuid.clone(),
                router_uuid,
                mac,
                ips,
                provider,
            },
        ))
    }

    // ---- Ports bound here: provider VMs, virtual ports, distributed FIPs

    /// A port listing this host: exposed when it is a VM's or virtual port bound here and up.
    fn expose_bound_port(&mut self, lsp: &Lsp, distributed: bool) {
        let hostname = self.local.hostname.as_str();
        if !is_vm_type(&lsp.port_type) {
            return;
        }
        if lsp.bound_chassis(hostname) != Some(hostname) || lsp.up != Some(true) {
            return;
        }
        if !self.lsp_name_ok(lsp) {
            return;
        }
        let provider = match self.switch_of_port(&lsp.uuid) {
            Some(ls) => self.provider_of_switch(&ls.uuid),
            None => None,
        };
        if let Some(provider) = provider {
            self.expose_provider_port(lsp, provider);
        }
        if distributed && lsp.external_ids.contains_key(keys::PORT_FIP) {
            self.expose_distributed_fip(lsp);
        }
    }

    fn expose_provider_port(&mut self, lsp: &Lsp, provider: ProviderNetwork) {
        let Some((mac, ips)) = self.port_addresses(lsp) else {
            return;
        };
        let ndp_proxy = ipv6_prefixes(&self.port_cidrs(lsp));
        let kind = if lsp.port_type == VIRTUAL {
            ExposureKind::VirtualPort
        } else {
            ExposureKind::ProviderPort
        };
        for ip in ips {
            self.place(ExposedIp {
                ip: ip.addr(),
                kind,
                source: lsp.name.as_str().into(),
                provider: Some(provider.clone()),
                lladdr: mac,
                ndp_proxy: ndp_proxy.clone(),
                via: None,
            });
        }
    }

    /// A distributed FIP: `neutron:port_fip`, the NAT row of the port for its MAC and network.
    fn expose_distributed_fip(&mut self, lsp: &Lsp) {
        let fip = match neutron::port_fip(lsp.external_ids.get(keys::PORT_FIP).map(String::as_str))
        {
            Ok(Some(ip)) => ip,
            Ok(None) => return,
            Err(e) => return self.skip_lsp(lsp, e.to_string()),
        };
        let nats = self.nats_of_port(&lsp.name);
        let nat = nats
            .iter()
            .filter(|n| n.nat_type == DNAT_AND_SNAT)
            .find(|n| n.external_ip.trim().parse::<IpAddr>().ok() == Some(fip))
            .or_else(|| nats.iter().find(|n| n.nat_type == DNAT_AND_SNAT));
        let Some(nat) = nat else {
            return self.skip_lsp(
                lsp,
                format!("floating IP {fip}: no dnat_and_snat NAT row with this logical_port"),
            );
        };
        let mac_text = nat.external_mac.trim();
        if mac_text.is_empty() {
            // Without external_mac OVN answers for the FIP on the gateway chassis, not here.
            return self.skip_nat(
                nat,
                format!(
                    "floating IP {fip}: no external_mac, so OVN handles it on the gateway \
                     chassis, not on the VM's"
                ),
            );
        }
        let mac: MacAddr = match mac_text.parse() {
            Ok(m) => m,
            Err(_) => return self.skip_nat(nat, format!("bad external_mac {mac_text:?}")),
        };
        let Some(provider) = self.fip_provider(nat, None) else {
            return;
        };
        self.place(ExposedIp {
            ip: fip,
            kind: ExposureKind::FloatingIp,
            source: lsp.name.as_str().into(),
            provider: Some(provider),
            lladdr: Some(mac),
            ndp_proxy: BTreeSet::new(),
            via: None,
        });
    }

    fn skip_nat(&mut self, nat: &Nat, reason: impl Into<String>) {
        let name = format!("{} -> {}", nat.external_ip, nat.logical_ip);
        self.skip_row(Nat::TABLE, &nat.uuid, &name, reason);
    }

    /// The provider network of a FIP: its `neutron:fip_network_id` (a bare network id, switch
    /// `neutron-<id>`), else `fallback` (the gateway's network).
    fn fip_provider(
        &mut self,
        nat: &Nat,
        fallback: Option<&ProviderNetwork>,
    ) -> Option<ProviderNetwork> {
        let switch = neutron::fip_network_switch(
            nat.external_ids
                .get(keys::FIP_NETWORK_ID)
                .map(String::as_str),
        );
        match (switch, fallback) {
            (Some(switch), _) => match self.provider_of_switch_named(&switch) {
                Some(p) => Some(p),
                None => {
                    self.skip_nat(
                        nat,
                        format!(
                            "floating IP network {switch:?} is not a provider network mapped on \
                             this chassis"
                        ),
                    );
                    None
                }
            },
            (None, Some(p)) => Some(p.clone()),
            (None, None) => {
                self.skip_nat(nat, format!("no {}", keys::FIP_NETWORK_ID));
                None
            }
        }
    }

    // ---- Centralized FIPs

    /// The FIPs of a gateway hosted here: NATs whose `gateway_port` is it, and the router's
    /// NATs without `gateway_port` (a router with one gateway).
    fn expose_centralized_fips(&mut self, gw: &LocalGateway) {
        let mut nats: Vec<&Nat> = self.nats_of_gateway(&gw.lrp_uuid);
        if let Some(router) = &gw.router_uuid {
            nats.extend(
                self.nats_of_router(router)
                    .into_iter()
                    .filter(|n| n.gateway_port.is_none()),
            );
        }
        for nat in nats {
            if nat.nat_type != DNAT_AND_SNAT {
                continue;
            }
            let fip: IpAddr = match nat.external_ip.trim().parse() {
                Ok(ip) => ip,
                Err(_) => {
                    self.skip_nat(nat, format!("bad external_ip {:?}", nat.external_ip));
                    continue;
                }
            };
            let Some(provider) = self.fip_provider(nat, Some(&gw.provider)) else {
                continue;
            };
            let source = if nat.logical_port.is_empty() || bad_name(&nat.logical_port).is_some() {
                nat.uuid.clone()
            } else {
                nat.logical_port.clone()
            };
            self.place(ExposedIp {
                ip: fip,
                kind: ExposureKind::FloatingIp,
                source: source.into(),
                provider: Some(provider),
                lladdr: Some(gw.mac),
                ndp_proxy: BTreeSet::new(),
                via: None,
            });
        }
    }

    // ---- Tenant networks

    /// Whether a `snat` rule of the router covers `subnet`.
    fn snat_covers(&mut self, gw: &LocalGateway, subnet: IpNet) -> bool {
        let Some(router) = &gw.router_uuid else {
            return false;
        };
        self.nats_of_router(router)
            .into_iter()
            .filter(|n| n.nat_type == SNAT)
            .filter_map(|n| parse_ip_or_cidr(n.logical_ip.trim()).ok())
            .any(|net| net.trunc().contains(&subnet.trunc()))
    }

    fn expose_tenant_subnets(&mut self, router: &str, gw: &LocalGateway) {
        for rif in self.router_interfaces(router) {
            if rif.up != Some(true) || !self.lsp_name_ok(rif) {
                continue;
            }
            let cidrs = self.port_cidrs(rif);
            let switch = self.switch_of_port(&rif.uuid).map(|s| s.uuid.clone());
            for cidr in cidrs {
                // The family must be routable through this gateway (upstream: U12).
                let Some(via) = gw
                    .ips
                    .iter()
                    .map(IpNet::addr)
                    .find(|g| g.is_ipv4() == cidr.addr().is_ipv4())
                else {
                    continue;
                };
                if !self.options.tenant.allows_ip(cidr.addr())
                    || !self
                        .options
                        .tenant
                        .allows_scope(&rif.external_ids, cidr.addr())
                {
                    continue;
                }
                if self.options.require_snat_disabled_for_tenant_networks
                    && self.snat_covers(gw, cidr)
                {
                    continue;
                }
                self.tenant_subnets.push(cidr);
                match (self.options.advertisement, self.options.method) {
                    (TenantAdvertisement::Host, ExposingMethod::Underlay) => {
                        self.expose_subnet(
                            ScopeId::Global,
                            ExposedSubnet {
                                router_ip: cidr,
                                via,
                                provider: gw.provider.clone(),
                                source: rif.name.clone(),
                            },
                        );
                        if let Some(switch) = &switch {
                            self.expose_tenant_ips(switch, cidr, gw);
                        }
                    }
                    (TenantAdvertisement::Host, ExposingMethod::Vrf) => {
                        // Upstream's vrf host mode: the router interface address as a host
                        // route via the gateway (not the subnet: only hosts are announced),
                        // then each tenant VM the same way.
                        self.place(ExposedIp {
                            provider: Some(gw.provider.clone()),
                            via: Some(via),
                            ..ExposedIp::announced(
                                cidr.addr(),
                                ExposureKind::TenantPort,
                                rif.name.clone(),
                            )
                        });
                        if let Some(switch) = &switch {
                            self.expose_tenant_ips(switch, cidr, gw);
                        }
                    }
                    (TenantAdvertisement::Subnet, ExposingMethod::Vrf) => {
                        // The prefix via the gateway in the network's VRF, redistributed from
                        // the kernel table.
                        if let Some(evpn) = &gw.provider.evpn {
                            self.expose_subnet(
                                ScopeId::Evpn(evpn.vni),
                                ExposedSubnet {
                                    router_ip: cidr.trunc(),
                                    via,
                                    provider: gw.provider.clone(),
                                    source: rif.name.clone(),
                                },
                            );
                        }
                    }
                    (TenantAdvertisement::Subnet, ExposingMethod::Underlay) => {
                        let prefix = cidr.trunc();
                        self.expose_subnet(
                            ScopeId::Global,
                            ExposedSubnet {
                                router_ip: prefix,
                                via,
                                provider: gw.provider.clone(),
                                source: rif.name.clone(),
                            },
                        );
                        self.ops.push(Op::Route(
                            ScopeId::Global,
                            ExposedRoute {
                                prefix,
                                kind: RouteKind::TenantSubnet,
                                via: Some(via),
                                provider: None,
                                source: rif.name.clone(),
                            },
                        ));
                    }
                }
            }
        }
    }

    /// A tenant address behind gateway `gw`: only announced (`underlay`: the subnet route
    /// carries it), or a route via the gateway in its network's VRF (`vrf`). `None` when the
    /// gateway has no address of its family.
    fn tenant_ip(
        &self,
        ip: IpAddr,
        kind: ExposureKind,
        source: String,
        gw: &LocalGateway,
    ) -> Option<ExposedIp> {
        let announced = ExposedIp::announced(ip, kind, source);
        if self.options.method == ExposingMethod::Underlay {
            return Some(announced);
        }
        let via = gw
            .ips
            .iter()
            .map(IpNet::addr)
            .find(|g| g.is_ipv4() == ip.is_ipv4())?;
        Some(ExposedIp {
            provider: Some(gw.provider.clone()),
            via: Some(via),
            ..announced
        })
    }

    /// Host mode: the active VM and virtual ports of the tenant switch inside `subnet`.
    fn expose_tenant_ips(&mut self, switch: &str, subnet: IpNet, gw: &LocalGateway) {
        let network = subnet.trunc();
        for port in self.ports_on_switch(switch) {
            if !is_vm_type(&port.port_type) || port.up != Some(true) {
                continue;
            }
            if !self.lsp_name_ok(port) {
                continue;
            }
            let Some((_, ips)) = self.port_addresses(port) else {
                continue;
            };
            for ip in ips {
                let addr = ip.addr();
                if network.contains(&addr)
                    && self.options.tenant.allows_ip(addr)
                    && self.options.tenant.allows_scope(&port.external_ids, addr)
                    && let Some(ip) =
                        self.tenant_ip(addr, ExposureKind::TenantPort, port.name.clone(), gw)
                {
                    self.place(ip);
                }
            }
        }
    }

    // ---- Load balancers

    fn skip_lb(&mut self, lb: &LoadBalancer, reason: impl Into<String>) {
        self.skip_row(LoadBalancer::TABLE, &lb.uuid, &lb.name, reason);
    }

    fn expose_lbs(&mut self, router: &str, gw: &LocalGateway) {
        for lb in self.lbs_of_router(router) {
            if let Some(reason) = bad_name(&lb.name) {
                self.skip_lb(lb, reason);
                continue;
            }
            if lb.name.starts_with(PF_LB_PREFIX) {
                self.expose_pf_lb(lb, gw);
            } else {
                self.expose_octavia_lb(lb, gw);
            }
        }
    }

    /// A port-forwarding LB: each VIP (`ip:port`, `[ipv6]:port`) is a FIP of the router.
    fn expose_pf_lb(&mut self, lb: &LoadBalancer, gw: &LocalGateway) {
        for key in lb.vips.keys() {
            let Some(ip) = vip_address(key) else {
                self.skip_lb(lb, format!("bad VIP {key:?}"));
                continue;
            };
            self.place(ExposedIp {
                ip,
                kind: ExposureKind::FloatingIp,
                source: lb.name.as_str().into(),
                provider: Some(gw.provider.clone()),
                lladdr: None,
                ndp_proxy: BTreeSet::new(),
                via: None,
            });
        }
    }

    /// An Octavia OVN-provider LB of a local router: its VIP on a provider switch (wired and
    /// announced) or on a tenant switch (announced as a tenant IP in host mode), and its VIP's
    /// floating IP on the router's provider network.
    fn expose_octavia_lb(&mut self, lb: &LoadBalancer, gw: &LocalGateway) {
        let octavia = match neutron::octavia_lb(|k| lb.external_ids.get(k).map(String::as_str)) {
            Ok(Some(o)) => o,
            Ok(None) => return,
            Err(e) => return self.skip_lb(lb, e.to_string()),
        };
        if let Some(vip) = octavia.vip {
            let port = octavia
                .vip_port_id
                .as_deref()
                .and_then(|id| self.lsp_named(id));
            match port {
                None => self.skip_lb(
                    lb,
                    format!(
                        "VIP {vip}: port {:?} (neutron:vip_port_id) not found",
                        octavia.vip_port_id.as_deref().unwrap_or("")
                    ),
                ),
                Some(port) => {
                    let provider = match self.switch_of_port(&port.uuid) {
                        Some(ls) => self.provider_of_switch(&ls.uuid),
                        None => None,
                    };
                    match provider {
                        Some(provider) => self.place(ExposedIp {
                            ip: vip,
                            kind: ExposureKind::LoadBalancerVip,
                            source: lb.name.as_str().into(),
                            provider: Some(provider),
                            lladdr: None,
                            ndp_proxy: BTreeSet::new(),
                            via: None,
                        }),
                        None if self.options.tenant.enabled()
                            && self.options.advertisement == TenantAdvertisement::Host
                            && self.options.tenant.allows_ip(vip)
                            && self.tenant_subnet_exposed(vip) =>
                        {
                            match self.tenant_ip(
                                vip,
                                ExposureKind::LoadBalancerVip,
                                lb.name.clone(),
                                gw,
                            ) {
                                Some(ip) => self.place(ip),
                                None => self.skip_lb(
                                    lb,
                                    format!("VIP {vip}: the gateway has no address of its family"),
                                ),
                            }
                        }
                        None => {}
                    }
                }
            }
        }
        if let Some(fip) = octavia.vip_fip {
            self.place(ExposedIp {
                ip: fip,
                kind: ExposureKind::FloatingIp,
                source: lb.name.as_str().into(),
                provider: Some(gw.provider.clone()),
                lladdr: None,
                ndp_proxy: BTreeSet::new(),
                via: None,
            });
        }
    }

    /// Whether `ip` is inside a tenant subnet exposed so far (its router's, computed before).
    fn tenant_subnet_exposed(&self, ip: IpAddr) -> bool {
        self.tenant_subnets.iter().any(|s| s.trunc().contains(&ip))
    }
}

#[cfg(test)]
mod cache_tests;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn vip_keys_in_every_form() {
        assert_eq!(vip_address("172.24.4.40:22"), "172.24.4.40".parse().ok());
        assert_eq!(
            vip_address("[2001:db8::40]:22"),
            "2001:db8::40".parse().ok()
        );
        assert_eq!(vip_address("2001:db8::40"), "2001:db8::40".parse().ok());
        assert_eq!(vip_address("172.24.4.40"), "172.24.4.40".parse().ok());
        assert_eq!(vip_address("nonsense:22"), None);
        assert_eq!(vip_address("[2001:db8::40"), None);
    }

    use crate::ovn::nb::model::{LOCALNET, LogicalSwitch};

    fn dhcp(cidr: &str, options: &[(&str, &str)]) -> DhcpOptions {
        DhcpOptions {
            uuid: "d".into(),
            cidr: cidr.into(),
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn dhcp_rows_give_gateway_addresses_and_router_advertisements() {
        let (gw, nd) = dhcp_row(&dhcp("10.0.0.0/24", &[("router", "10.0.0.1")])).unwrap();
        assert_eq!(gw, "10.0.0.1/24".parse().ok());
        assert_eq!(nd, None);
        let (gw, nd) = dhcp_row(&dhcp(
            "2001:db8::/64",
            &[
                ("dhcpv6_stateless", "true"),
                ("dns_server", "{2001:db8::53, 2001:db8::54}"),
            ],
        ))
        .unwrap();
        assert_eq!(gw, None);
        let nd = nd.unwrap();
        assert!(nd.stateless);
        assert_eq!(nd.prefix.to_string(), "2001:db8::/64");
        assert_eq!(nd.dns_servers.len(), 2);
        // Stateful: router advertisements with no-autoconfig; DHCP off: no gateway.
        let (gw, nd) = dhcp_row(&dhcp("2001:db8:1::/64", &[])).unwrap();
        assert_eq!(gw, None);
        assert!(!nd.unwrap().stateless);
        for (cidr, options) in [
            ("10.0.0.0/24\nexit", vec![]),
            ("10.0.0.0/24", vec![("router", "10.0.0.1; rm -rf /")]),
            ("10.0.0.0/24", vec![("router", "2001:db8::1")]),
            (
                "2001:db8::/64",
                vec![("dns_server", "{2001:db8::53, exit}")],
            ),
        ] {
            assert!(
                dhcp_row(&dhcp(cidr, &options)).is_err(),
                "{cidr} {options:?} accepted"
            );
        }
    }

    /// A provider switch `neutron-net1` (uuid `ls`) with a localnet port of physnet `public`,
    /// and `ids` as its `external_ids`.
    pub(crate) fn evpn_model(ids: &[(&str, &str)]) -> NbModel {
        let mut m = NbModel::default();
        let mut ln = Lsp {
            uuid: "abcdef12-3456-4890-abcd-ef1234567890".into(),
            name: "provnet-1".into(),
            port_type: LOCALNET.into(),
            ..Default::default()
        };
        ln.options.insert("network_name".into(), "public".into());
        m.upsert_lsp(ln);
        m.upsert_switch(LogicalSwitch {
            uuid: "ls".into(),
            name: "neutron-net1".into(),
            ports: vec!["abcdef12-3456-4890-abcd-ef1234567890".into()],
            external_ids: ids
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        });
        m
    }

    fn vrf_options() -> NbOptions {
        NbOptions {
            method: ExposingMethod::Vrf,
            bgp_as: Asn::new(64999).ok(),
            ..Default::default()
        }
    }

    fn local() -> LocalChassis {
        LocalChassis {
            hostname: "node1".into(),
            system_id: "sys-1".into(),
            bridge_mappings: vec![("public".into(), "br-ex".into())],
        }
    }

    #[test]
    fn evpn_settings_give_the_scope_parameters() {
        let m = evpn_model(&[
            (keys::BGPVPN_TYPE, "l3"),
            (keys::BGPVPN_VNI, "100"),
            (keys::BGPVPN_RT, "['64999:1']"),
            (keys::BGPVPN_IT, "['64999:2', '64999:1']"),
            (keys::BGPVPN_ET, "['64999:3']"),
            (keys::BGPVPN_RD, "['10.0.0.1:7', '10.0.0.1:8']"),
        ]);
        let set = compute(&m, &local(), &vrf_options(), None);
        assert!(set.skipped.is_empty(), "{:?}", set.skipped);
        let vni = Vni::new(100).unwrap();
        let p = set.scopes[&ScopeId::Evpn(vni)].evpn.clone().unwrap();
        let text = |v: &[RouteTarget]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(p.bgp_as.get(), 64999);
        assert_eq!(text(&p.import_targets), ["64999:1", "64999:2"]);
        assert_eq!(text(&p.export_targets), ["64999:1", "64999:3"]);
        assert_eq!(p.rd.map(|r| r.to_string()).as_deref(), Some("10.0.0.1:7"));
        assert_eq!(
            p.redistribute,
            BTreeSet::from([Redistribute::Connected, Redistribute::Kernel])
        );
        let [EvpnAttachment::Localnet(l)] = p.attachments.iter().collect::<Vec<_>>()[..] else {
            panic!("one localnet attachment: {:?}", p.attachments);
        };
        assert_eq!(l.port_name, "provnet-1");
        assert_eq!(l.provider.bridge.as_str(), "br-ex");
        assert_eq!(l.provider.evpn.as_ref().map(|e| e.vni), Some(vni));

        // neutron_bgpvpn:as wins over [DEFAULT] bgp_AS.
        let m = evpn_model(&[
            (keys::BGPVPN_TYPE, "l3"),
            (keys::BGPVPN_VNI, "100"),
            (keys::BGPVPN_AS, "65001"),
        ]);
        let set = compute(&m, &local(), &vrf_options(), None);
        let p = set.scopes[&ScopeId::Evpn(vni)].evpn.clone().unwrap();
        assert_eq!(p.bgp_as.get(), 65001);
        // The underlay method reads none of it.
        let set = compute(&m, &local(), &NbOptions::default(), None);
        assert_eq!(set.scopes.len(), 1, "{:?}", set.scopes.keys());
    }

    #[test]
    fn hostile_or_incomplete_evpn_settings_refuse_the_network() {
        for (ids, why) in [
            (vec![(keys::BGPVPN_TYPE, "l3")], "no neutron_bgpvpn:vni"),
            (
                vec![(keys::BGPVPN_TYPE, "l3"), (keys::BGPVPN_VNI, "abc")],
                "VNI",
            ),
            (
                vec![(keys::BGPVPN_TYPE, "l3"), (keys::BGPVPN_VNI, "16777216")],
                "VNI",
            ),
            (
                vec![
                    (keys::BGPVPN_TYPE, "l3"),
                    (keys::BGPVPN_VNI, "100"),
                    (keys::BGPVPN_RT, "['64999:1\\nexit']"),
                ],
                keys::BGPVPN_RT,
            ),
            (
                vec![
                    (keys::BGPVPN_TYPE, "l3"),
                    (keys::BGPVPN_VNI, "100"),
                    (keys::BGPVPN_RT, "['64999:1;']"),
                ],
                keys::BGPVPN_RT,
            ),
            (
                vec![
                    (keys::BGPVPN_TYPE, "l3"),
                    (keys::BGPVPN_VNI, "100"),
                    (keys::BGPVPN_ET, "[64999:1]"),
                ],
                keys::BGPVPN_ET,
            ),
            (
                vec![
                    (keys::BGPVPN_TYPE, "l3"),
                    (keys::BGPVPN_VNI, "100"),
                    (keys::BGPVPN_AS, "0"),
                ],
                keys::BGPVPN_AS,
            ),
            (
                vec![(keys::BGPVPN_TYPE, "l2"), (keys::BGPVPN_VNI, "100")],
                "l2",
            ),
        ] {
            let set = compute(&evpn_model(&ids), &local(), &vrf_options(), None);
            assert_eq!(set.scopes.len(), 1, "{ids:?}: {:?}", set.scopes.keys());
            assert!(
                set.skipped
                    .iter()
                    .any(|r| r.table == "Logical_Switch" && r.reason.contains(why)),
                "{ids:?}: {:?}",
                set.skipped
            );
            assert!(
                set.skipped.iter().all(|r| !r.row.contains('\n')),
                "{:?}",
                set.skipped
            );
        }
        // No settings at all: not an EVPN network, nothing reported for the switch itself.
        let set = compute(&evpn_model(&[]), &local(), &vrf_options(), None);
        assert_eq!(set.scopes.len(), 1);
        assert!(set.skipped.is_empty(), "{:?}", set.skipped);
    }

    #[test]
    fn hostile_names_are_refused_and_shown_escaped() {
        assert!(bad_name("vm1").is_none());
        assert!(bad_name("").is_some());
        assert!(bad_name("vm1\nrow skipped: forged").is_some());
        assert!(bad_name(&"x".repeat(MAX_NAME_LEN + 1)).is_some());
        let shown = row_ref("u", "a\nb");
        assert!(!shown.contains('\n'), "{shown}");
        let long = row_ref("u", &"x".repeat(1000));
        assert!(long.len() < 120, "{long}");
    }
}
