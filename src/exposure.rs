//! What a driver produces: the set of things this chassis must make reachable.
//!
//! A driver reads its OVSDB replica and returns an [`ExposureSet`]; it never touches the system.
//! The set is plain, ordered data so that driver tests can compare it with snapshot files and the
//! backend can turn it into kernel/FRR/OVS objects deterministically.
//!
//! Exposures are *scoped*: the global scope is the default VRF / underlay (what the SB and NB BGP
//! drivers announce), and each EVPN VNI is a scope of its own with its EVPN parameters, so the
//! same tenant IP in two VNIs is two exposures, not one. In a scope there are host IPs (with an
//! optional nexthop), routes (stretched L2 announces routes, not addresses) and tenant subnets.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::caps::frr::values::{Asn, Redistribute, RouteDistinguisher, RouteTarget, Vni};
use crate::types::{InterfaceName, MacAddr};

/// The EVPN settings networking-bgpvpn puts on a provider network (`Logical_Switch.external_ids`
/// `neutron_bgpvpn:*`), already validated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProviderEvpn {
    pub vni: Vni,
    /// `neutron_bgpvpn:type`: `l3` (type-5 routes) or `l2`.
    pub l3: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rd: Option<RouteDistinguisher>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_targets: Vec<RouteTarget>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_targets: Vec<RouteTarget>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub export_targets: Vec<RouteTarget>,
}

/// A provider network as this chassis sees it: a physnet name from the localnet port, the OVS
/// bridge it maps to in `ovn-bridge-mappings`, and the localnet VLAN tag if any.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
///
/// Every exposure through the network carries a copy: the name and the EVPN settings are
/// shared, so a copy is a few words and no allocation (30k exposures are laid out per event).
pub struct ProviderNetwork {
    pub physnet: Arc<str>,
    pub bridge: InterfaceName,
    pub vlan: Option<u16>,
    /// EVPN settings of the network, when networking-bgpvpn set them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evpn: Option<Arc<ProviderEvpn>>,
}

/// Why an IP is exposed; kept for logs, metrics and snapshot readability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExposureKind {
    /// VM port on a provider network bound here.
    ProviderPort,
    /// `virtual` port (Octavia amphora VIP, allowed-address-pair) bound here.
    VirtualPort,
    /// Floating IP, centralized (on the gateway) or distributed (on the VM's chassis).
    FloatingIp,
    /// Router gateway port (`cr-lrp-*`) bound here.
    GatewayPort,
    /// Tenant VM IP announced on the gateway chassis (tenant exposure).
    TenantPort,
    /// OVN load-balancer VIP.
    LoadBalancerVip,
}

/// One IP this chassis must announce.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExposedIp {
    pub ip: IpAddr,
    pub kind: ExposureKind,
    /// The OVSDB row this exposure comes from (logical port name or row uuid), for logs.
    /// Shared: an exposure is copied at every event it is laid out in.
    pub source: Arc<str>,
    /// Provider network the traffic to this IP enters through; `None` for IPs that are only
    /// announced (tenant VM IPs behind a gateway: their route is the subnet route).
    pub provider: Option<ProviderNetwork>,
    /// Permanent neighbour entry on the provider device (gateway ports).
    pub lladdr: Option<MacAddr>,
    /// IPv6 prefixes to answer NDP for on the provider device.
    pub ndp_proxy: BTreeSet<IpNet>,
    /// Nexthop of the route to this IP, when it is not on-link (a tenant IP in an EVPN VRF is
    /// routed via its router's gateway address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<IpAddr>,
}

impl ExposedIp {
    /// An IP with no provider wiring, neighbour, NDP proxy or nexthop: only announced.
    pub fn announced(ip: IpAddr, kind: ExposureKind, source: impl Into<Arc<str>>) -> Self {
        Self {
            ip,
            kind,
            source: source.into(),
            provider: None,
            lladdr: None,
            ndp_proxy: BTreeSet::new(),
            via: None,
        }
    }
}

/// A tenant subnet routed through a gateway port bound here.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExposedSubnet {
    /// The router interface address with its prefix length (`10.0.0.1/24`): upstream's rule key.
    pub router_ip: IpNet,
    /// The gateway port address of the same family the subnet route goes via.
    pub via: IpAddr,
    pub provider: ProviderNetwork,
    pub source: String,
}

/// Why a route is announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteKind {
    /// A router gateway's own network, announced on-link so the nexthop of the tenant routes
    /// resolves (stretched L2).
    GatewayNetwork,
    /// A tenant subnet, announced as a prefix (stretched L2, NB `subnet` mode).
    TenantSubnet,
}

/// A prefix this chassis must announce as a route (not as an address).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposedRoute {
    pub prefix: IpNet,
    pub kind: RouteKind,
    /// Nexthop; `None` for an on-link route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<IpAddr>,
    /// The provider network the nexthop is reached through, when the backend must wire it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderNetwork>,
    pub source: String,
}

/// Which routing domain an exposure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScopeId {
    /// The default VRF / underlay: what is leaked to (or announced by) the default BGP instance.
    Global,
    /// One EVPN L3 VNI: a VRF of its own.
    Evpn(Vni),
}

impl fmt::Display for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeId::Global => f.write_str("global"),
            ScopeId::Evpn(vni) => write!(f, "evpn:{}", vni.get()),
        }
    }
}

impl FromStr for ScopeId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "global" {
            return Ok(ScopeId::Global);
        }
        let vni = s
            .strip_prefix("evpn:")
            .ok_or_else(|| format!("scope {s:?}: expected global or evpn:<vni>"))?;
        let vni: u32 = vni.parse().map_err(|_| format!("scope {s:?}: bad VNI"))?;
        Vni::new(vni)
            .map(ScopeId::Evpn)
            .map_err(|e| format!("scope {s:?}: {e}"))
    }
}

// Scopes are map keys in snapshots: serialise them as their display form.
impl Serialize for ScopeId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ScopeId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The EVPN parameters of a VNI scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvpnParams {
    pub vni: Vni,
    /// The BGP AS of the VRF's `router bgp <as> vrf <vrf>` instance.
    pub bgp_as: Asn,
    /// Explicit RD; `None` means the backend derives it from the local VTEP address (never
    /// `None:<vni>`, upstream U01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rd: Option<RouteDistinguisher>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_targets: Vec<RouteTarget>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub export_targets: Vec<RouteTarget>,
    /// Route sources the VRF's BGP instance redistributes: `connected` for the SB EVPN driver
    /// (its tenant addresses on `lo-<vni>`), `connected` and `kernel` for the NB `vrf` method
    /// (its exposures are routes in the VNI table).
    #[serde(default = "connected_only")]
    pub redistribute: BTreeSet<Redistribute>,
    /// How the VRF reaches OVS: the devices that connect it to the provider bridges. An IP,
    /// subnet or route of the scope is realised through the attachment of its provider network.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub attachments: BTreeSet<EvpnAttachment>,
}

fn connected_only() -> BTreeSet<Redistribute> {
    BTreeSet::from([Redistribute::Connected])
}

impl EvpnParams {
    /// Parameters with no explicit RD or route targets, `redistribute connected` and no
    /// attachment yet.
    pub fn new(vni: Vni, bgp_as: Asn) -> Self {
        Self {
            vni,
            bgp_as,
            rd: None,
            import_targets: Vec::new(),
            export_targets: Vec::new(),
            redistribute: connected_only(),
            attachments: BTreeSet::new(),
        }
    }
}

/// How an EVPN VRF is connected to an OVS provider bridge. The two drivers that use EVPN wire it
/// differently, and upstream's device names differ with them (§1.3, §2 `vrf`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvpnAttachment {
    /// SB `ovn_evpn_driver`, one per VNI: the veth pair `veth-vrf-<vni>`↔`veth-ovs-<vni>` on a
    /// flat network, or the OVS internal port `vlan-<vni>` (tagged) on a VLAN network; tenant
    /// addresses on the dummy `lo-<vni>`; unreachable defaults in the VNI table; router
    /// subnets redirected into the VRF by cookie-998 flows.
    RouterGateway { provider: ProviderNetwork },
    /// NB `vrf` method, one per localnet port of an EVPN provider network.
    Localnet(LocalnetAttachment),
}

impl EvpnAttachment {
    pub fn provider(&self) -> &ProviderNetwork {
        match self {
            Self::RouterGateway { provider } => provider,
            Self::Localnet(l) => &l.provider,
        }
    }
}

/// The NB `vrf` method's connection of one localnet port: the veth pair `vrf<id>`↔`ovs<id>`
/// (`<id>`: the first 11 characters of the localnet port's uuid) with the VRF end holding the
/// network's gateway addresses under an anycast MAC derived from the VNI and VLAN.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LocalnetAttachment {
    pub provider: ProviderNetwork,
    /// The localnet `Logical_Switch_Port`'s uuid.
    pub port_uuid: String,
    /// Its name: ovn-controller patches it into the bridge as `patch-<name>-to-br-int`, the
    /// `in_port` of the flows that send the network's traffic to the anycast MAC.
    pub port_name: String,
    /// The router addresses of the network's subnets (`DHCP_Options.options:router`) with the
    /// subnet's prefix length: the VRF side answers for them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub gateway_addresses: BTreeSet<IpNet>,
    /// IPv6 subnets announced by router advertisements from the VRF side (FRR
    /// `CONFIGURE_ND_TEMPLATE`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub nd_prefixes: BTreeSet<NdPrefix>,
}

/// Router advertisements for one IPv6 subnet (from its `DHCP_Options`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NdPrefix {
    pub prefix: ipnet::Ipv6Net,
    /// `dhcpv6_stateless = true`: hosts may autoconfigure (no `no-autoconfig`).
    pub stateless: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_servers: Vec<IpAddr>,
}

/// The IPs exposed in one scope: an ordered map whose copies share their tree (a copy is one
/// pointer, a change copies one path) and whose versions are compared by visiting only the
/// nodes they do not share ([`imbl::OrdMap::diff`]); serialized as a map (issue 17).
pub type IpMap = imbl::OrdMap<IpAddr, Arc<ExposedIp>>;

/// The routes of one scope: a persistent ordered map as [`IpMap`] (issue 17): the stretched-L2
/// driver changes a cloud's tens of thousands of routes by what an event changed, and the stages
/// after it compare two versions by visiting only the nodes they do not share.
pub type RouteMap = imbl::OrdMap<IpNet, ExposedRoute>;

/// An IP that differs between two versions of a scope's map: gone (`new` is `None`), come
/// (`old` is `None`) or changed (both).
pub(crate) struct IpChange<'a> {
    /// Read by the renders keyed by address (underlay, ovn); the vrf render and the telemetry
    /// read the exposures themselves.
    #[cfg_attr(
        not(any(feature = "underlay", feature = "ovn_cluster")),
        allow(dead_code)
    )]
    pub ip: &'a IpAddr,
    pub old: Option<&'a Arc<ExposedIp>>,
    pub new: Option<&'a Arc<ExposedIp>>,
}

/// The IPs that differ between `old` and `new`, in address order, found by visiting only the
/// nodes the two maps do not share: what the stages after the driver (policy, render,
/// telemetry) look at per event.
pub(crate) fn ip_changes<'a>(old: &'a IpMap, new: &'a IpMap) -> impl Iterator<Item = IpChange<'a>> {
    old.diff(new).map(|d| match d {
        imbl::ordmap::DiffItem::Add(ip, e) => IpChange {
            ip,
            old: None,
            new: Some(e),
        },
        imbl::ordmap::DiffItem::Remove(ip, e) => IpChange {
            ip,
            old: Some(e),
            new: None,
        },
        imbl::ordmap::DiffItem::Update { old, new } => IpChange {
            ip: new.0,
            old: Some(old.1),
            new: Some(new.1),
        },
    })
}

/// Everything exposed in one routing domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposureScope {
    /// EVPN parameters; `None` for the global scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evpn: Option<EvpnParams>,
    /// Shared (`Arc`): the drivers' caches and the backend's last rendering hold the same
    /// exposures, and laying 30k of them out copies pointers, not 136-byte values. A persistent
    /// map ([`IpMap`]): the next set shares all but what changed with the last one, and the
    /// stages after the driver compare the two by visiting only that.
    pub ips: IpMap,
    /// A persistent map ([`RouteMap`]), as the IPs.
    #[serde(default, skip_serializing_if = "imbl::OrdMap::is_empty")]
    pub routes: RouteMap,
    pub subnets: BTreeSet<ExposedSubnet>,
    /// IPs a later producer also claimed in this scope (the first producer keeps the IP). Kept
    /// so that the policy stage can resolve and report the conflicts that matter (a tenant IP
    /// equal to a floating IP); not part of what is exposed.
    #[serde(skip)]
    pub shadowed: Vec<Arc<ExposedIp>>,
    /// Record shadows with [`ExposureScope::expose_ip`], which keeps this index.
    #[serde(skip)]
    #[doc(hidden)]
    pub shadow_index: ListIndex,
}

impl ExposureScope {
    /// Add an IP; the first producer of an IP wins, so a gateway port is not downgraded by a later
    /// tenant-port pass over the same address.
    pub fn expose_ip(&mut self, exposed: impl Into<Arc<ExposedIp>>) {
        let exposed = exposed.into();
        match self.ips.get(&exposed.ip) {
            None => {
                self.ips.insert(exposed.ip, exposed);
            }
            Some(first) if first.kind != exposed.kind || first.source != exposed.source => {
                self.shadow(exposed);
            }
            Some(_) => {}
        }
    }

    /// Record a later producer of an IP, once (by value, as `shadowed.contains`), in the order
    /// of production.
    fn shadow(&mut self, exposed: Arc<ExposedIp>) {
        self.shadow_index.record(&mut self.shadowed, exposed);
    }

    /// The shadowed producers, taken with their index (which would only take memory).
    pub(crate) fn take_shadowed(&mut self) -> Vec<Arc<ExposedIp>> {
        self.shadow_index = ListIndex::default();
        std::mem::take(&mut self.shadowed)
    }

    /// Add a route; the first producer of a prefix wins.
    pub fn expose_route(&mut self, route: ExposedRoute) {
        self.routes.entry(route.prefix).or_insert(route);
    }

    pub fn is_empty(&self) -> bool {
        self.ips.is_empty() && self.routes.is_empty() && self.subnets.is_empty()
    }
}

/// Per-bridge wiring a driver needs on this chassis regardless of what is exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeWiring {
    pub bridge: InterfaceName,
    /// Physnets mapped to this bridge in `ovn-bridge-mappings`.
    pub physnets: BTreeSet<String>,
    /// VLAN tags of localnet ports of those physnets (one VLAN device each).
    pub vlans: BTreeSet<u16>,
    /// Names of the localnet ports of those physnets: ovn-controller patches each into the
    /// bridge as `patch-<localnet>-to-br-int`, the in_port of the MAC-tweak flows.
    pub localnet_ports: BTreeSet<String>,
    /// 1-based position of the bridge in `ovn-bridge-mappings` (upstream's ARP/NDP helper address).
    pub index: u16,
}

/// Something a driver needs from the realisation that the exposures alone do not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RealisationNeed {
    /// FRR must redistribute kernel routes (routes, not addresses, are announced: stretched L2
    /// and the NB driver's `subnet` mode), as upstream's `redistribute kernel`.
    RedistributeKernel,
    /// FRR redistributes kernel routes and nothing else (stretched L2: upstream forces
    /// `redistribute kernel` alone, its exposures are routes in the VRF table, never addresses).
    RedistributeKernelOnly,
    /// Every route with a destination in the VRF table is the agent's, except the kernel's own
    /// and those of routing daemons (BGP's, proto 186): a stray one is removed (stretched L2's
    /// sync deletes every non-BGP route of the table it did not add).
    SweepVrfTable,
}

/// A row the driver could not turn into an exposure, or an exposure the policy stage or the
/// backend refused; it is logged once and the rest is still exposed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SkippedRow {
    pub table: String,
    pub row: String,
    pub reason: String,
}

/// An index of a list whose items are recorded once each, in the order they first come (the
/// skipped rows, a scope's shadowed producers), so that recording costs constant time, not a
/// search of the list: a flood of hostile rows (10k bad rows are 10k skips) or of shadowed IPs
/// (overlapping tenant networks) must not cost a second per reconcile. It holds each item's
/// hash with the position of the first item of that hash: an item whose hash was seen is
/// compared with that one, and with the whole list only when they differ (two items of one
/// hash: rare). Derived data: not serialized, ignored by equality, rebuilt when the list was
/// changed without it (deserialized, taken, or pushed to directly), which its length tells.
#[derive(Debug, Clone, Default)]
pub struct ListIndex {
    /// The list's length when the index last followed it.
    len: usize,
    /// An item's hash, and where the first item of that hash is in the list.
    first: crate::hash::HashMap<u64, usize>,
}

impl PartialEq for ListIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for ListIndex {}

impl ListIndex {
    /// Push `item` onto `list` unless it is there already (by `==`, as `list.contains`).
    pub(crate) fn record<T: std::hash::Hash + PartialEq>(&mut self, list: &mut Vec<T>, item: T) {
        use std::hash::BuildHasher;
        let hash = |x: &T| foldhash::fast::FixedState::with_seed(0).hash_one(x);
        if self.len != list.len() {
            self.first.clear();
            for (at, x) in list.iter().enumerate() {
                self.first.entry(hash(x)).or_insert(at);
            }
        }
        let new = match self.first.entry(hash(&item)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(list.len());
                true
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                list.get(*o.get()) != Some(&item) && !list.contains(&item)
            }
        };
        if new {
            list.push(item);
        }
        self.len = list.len();
    }
}

/// Where a skipped item was refused, for [`SkippedRow::table`] of exposures (not rows).
pub const POLICY: &str = "policy";
pub const BACKEND: &str = "backend";

/// Everything a driver wants exposed on this chassis at one point in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposureSet {
    pub scopes: BTreeMap<ScopeId, ExposureScope>,
    pub bridges: BTreeMap<InterfaceName, BridgeWiring>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub needs: BTreeSet<RealisationNeed>,
    pub skipped: Vec<SkippedRow>,
    /// Record skipped rows with [`ExposureSet::skip`], which keeps this index.
    #[serde(skip)]
    #[doc(hidden)]
    pub skip_index: ListIndex,
}

impl Default for ExposureSet {
    /// An empty set still has its global scope, so snapshots always show it.
    fn default() -> Self {
        Self {
            scopes: BTreeMap::from([(ScopeId::Global, ExposureScope::default())]),
            bridges: BTreeMap::new(),
            needs: BTreeSet::new(),
            skipped: Vec::new(),
            skip_index: ListIndex::default(),
        }
    }
}

static EMPTY_SCOPE: std::sync::LazyLock<ExposureScope> =
    std::sync::LazyLock::new(ExposureScope::default);

impl ExposureSet {
    /// The default-VRF / underlay scope.
    pub fn global(&self) -> &ExposureScope {
        self.scopes.get(&ScopeId::Global).unwrap_or(&EMPTY_SCOPE)
    }

    pub fn global_mut(&mut self) -> &mut ExposureScope {
        self.scope_mut(ScopeId::Global)
    }

    pub fn scope_mut(&mut self, id: ScopeId) -> &mut ExposureScope {
        self.scopes.entry(id).or_default()
    }

    /// Routes are announced from the VRF table: FRR redistributes kernel routes (with or
    /// without connected ones).
    pub fn redistributes_kernel(&self) -> bool {
        self.needs.contains(&RealisationNeed::RedistributeKernel)
            || self
                .needs
                .contains(&RealisationNeed::RedistributeKernelOnly)
    }

    /// Add an IP to the global scope (see [`ExposureScope::expose_ip`]).
    pub fn expose_ip(&mut self, exposed: impl Into<Arc<ExposedIp>>) {
        self.global_mut().expose_ip(exposed);
    }

    /// Every exposed IP of every scope, with its scope.
    pub fn all_ips(&self) -> impl Iterator<Item = (ScopeId, &ExposedIp)> {
        self.scopes
            .iter()
            .flat_map(|(id, s)| s.ips.values().map(move |ip| (*id, ip.as_ref())))
    }

    /// Record a row that could not be used; the same problem found through two paths (e.g. a
    /// shared `nat_addresses` entry) is recorded once.
    pub fn skip(&mut self, table: &str, row: impl Into<String>, reason: impl Into<String>) {
        let skipped = SkippedRow {
            table: table.to_owned(),
            row: row.into(),
            reason: reason.into(),
        };
        self.skip_index.record(&mut self.skipped, skipped);
    }
}

mod layout;
pub use layout::{IpLayout, LayoutStats, RootKey, next_version};

#[cfg(test)]
mod tests {
    use super::*;

    fn vni(n: u32) -> Vni {
        Vni::new(n).unwrap()
    }

    #[test]
    fn the_same_ip_in_two_vnis_is_two_exposures() {
        let mut set = ExposureSet::default();
        let ip: IpAddr = "10.0.0.5".parse().unwrap();
        for n in [100, 200] {
            set.scope_mut(ScopeId::Evpn(vni(n)))
                .expose_ip(ExposedIp::announced(
                    ip,
                    ExposureKind::TenantPort,
                    format!("vm-{n}"),
                ));
        }
        let found: Vec<_> = set
            .all_ips()
            .map(|(s, e)| (s, e.source.to_string()))
            .collect();
        assert_eq!(
            found,
            vec![
                (ScopeId::Evpn(vni(100)), "vm-100".to_owned()),
                (ScopeId::Evpn(vni(200)), "vm-200".to_owned())
            ]
        );
        assert!(set.global().ips.is_empty());
    }

    #[test]
    fn scope_ids_round_trip_as_map_keys() {
        let mut set = ExposureSet::default();
        set.scope_mut(ScopeId::Evpn(vni(4096)));
        let json = serde_json::to_value(&set).unwrap();
        assert!(json["scopes"]["global"].is_object(), "{json}");
        assert!(json["scopes"]["evpn:4096"].is_object(), "{json}");
        let back: ExposureSet = serde_json::from_value(json).unwrap();
        assert_eq!(back, set);
        assert!("evpn:0".parse::<ScopeId>().is_err());
        assert!("evpn:x".parse::<ScopeId>().is_err());
        assert!("vrf".parse::<ScopeId>().is_err());
    }

    #[test]
    fn skipped_rows_are_recorded_once_in_order_also_after_a_round_trip() {
        let mut set = ExposureSet::default();
        for i in 0..20_000 {
            set.skip("Logical_Switch_Port", format!("lsp-{i}"), "bad CIDR");
        }
        set.skip("Logical_Switch_Port", "lsp-7", "bad CIDR");
        set.skip("Logical_Switch_Port", "lsp-7", "other reason");
        assert_eq!(set.skipped.len(), 20_001);
        assert_eq!(set.skipped[0].row, "lsp-0");
        assert_eq!(set.skipped[20_000].reason, "other reason");
        // Deserialized without its index: still recorded once.
        let mut back: ExposureSet =
            serde_json::from_value(serde_json::to_value(&set).unwrap()).unwrap();
        assert_eq!(back, set);
        back.skip("Logical_Switch_Port", "lsp-9", "bad CIDR");
        assert_eq!(back.skipped.len(), 20_001);
        // Pushed to directly: the index is rebuilt.
        back.skipped.push(SkippedRow {
            table: "NAT".into(),
            row: "n1".into(),
            reason: "r".into(),
        });
        back.skip("NAT", "n1", "r");
        assert_eq!(back.skipped.len(), 20_002);
    }

    #[test]
    fn a_second_producer_of_an_ip_is_shadowed_not_lost() {
        let mut scope = ExposureScope::default();
        let ip: IpAddr = "172.24.4.10".parse().unwrap();
        scope.expose_ip(ExposedIp::announced(ip, ExposureKind::TenantPort, "vm"));
        scope.expose_ip(ExposedIp::announced(ip, ExposureKind::FloatingIp, "patch"));
        scope.expose_ip(ExposedIp::announced(ip, ExposureKind::TenantPort, "vm"));
        assert_eq!(scope.ips[&ip].kind, ExposureKind::TenantPort);
        assert_eq!(scope.shadowed.len(), 1);
        assert_eq!(scope.shadowed[0].kind, ExposureKind::FloatingIp);
    }

    #[test]
    fn many_shadows_are_recorded_once_each_in_the_order_of_production() {
        // Overlapping tenant networks: every IP claimed again by several producers, some of
        // them more than once (an equal value in a new allocation, or the same one again).
        let ip = |i: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        let first =
            |i: u32| ExposedIp::announced(ip(i), ExposureKind::TenantPort, format!("vm-{i}"));
        let mut scope = ExposureScope::default();
        for i in 0..2_000 {
            scope.expose_ip(first(i));
        }
        // Each later producer, and whether it is of another kind or source than the first.
        let mut produced: Vec<(Arc<ExposedIp>, bool)> = Vec::new();
        for round in 0..4u32 {
            for i in 0..2_000 {
                let later = match (round + i) % 5 {
                    0 => ExposedIp::announced(ip(i), ExposureKind::FloatingIp, format!("fip-{i}")),
                    1 => ExposedIp::announced(
                        ip(i),
                        ExposureKind::TenantPort,
                        format!("vm-{}", i % 7),
                    ),
                    // The first producer again: not a shadow.
                    2 => first(i),
                    // The same kind and source as a shadow, another value: a shadow of its own.
                    3 => ExposedIp {
                        via: Some(ip(i + 1)),
                        ..ExposedIp::announced(ip(i), ExposureKind::FloatingIp, format!("fip-{i}"))
                    },
                    _ => match produced.last() {
                        Some((last, _)) => (**last).clone(),
                        None => first(i),
                    },
                };
                let winner = &scope.ips[&later.ip];
                let shadow = winner.kind != later.kind || winner.source != later.source;
                let later = Arc::new(later);
                scope.expose_ip(later.clone());
                if round == 3 && i % 2 == 0 {
                    // The very same allocation again.
                    scope.expose_ip(later.clone());
                }
                produced.push((later, shadow));
            }
        }
        // What the search of the list gave: each later producer of another kind or source,
        // the first time it comes.
        let mut want: Vec<Arc<ExposedIp>> = Vec::new();
        for (e, shadow) in produced {
            if shadow && !want.contains(&e) {
                want.push(e);
            }
        }
        assert!(want.len() > 4_000, "many shadows: {}", want.len());
        assert_eq!(scope.shadowed, want);

        // Changed without the index: rebuilt, so a shadow is still recorded once.
        let again = want[10].clone();
        scope.shadowed.push(Arc::new(ExposedIp::announced(
            ip(0),
            ExposureKind::LoadBalancerVip,
            "lb",
        )));
        scope.expose_ip(ExposedIp::announced(
            ip(0),
            ExposureKind::LoadBalancerVip,
            "lb",
        ));
        scope.expose_ip((*again).clone());
        assert_eq!(scope.shadowed.len(), want.len() + 1);
        // The index is not part of the value.
        let mut without = scope.clone();
        without.shadow_index = ListIndex::default();
        assert_eq!(without, scope);
        // Taken (by the policy stage): recorded anew.
        assert_eq!(scope.take_shadowed().len(), want.len() + 1);
        scope.expose_ip((*again).clone());
        scope.expose_ip((*again).clone());
        assert_eq!(scope.shadowed, vec![again]);
    }

    #[test]
    fn items_of_one_hash_are_told_apart() {
        /// Every value hashes alike: the index must compare them.
        #[derive(Debug, PartialEq)]
        struct Colliding(u32);
        impl std::hash::Hash for Colliding {
            fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
        }
        let mut index = ListIndex::default();
        let mut list = Vec::new();
        for n in [3, 1, 3, 2, 1, 4, 2] {
            index.record(&mut list, Colliding(n));
        }
        assert_eq!(list, [3, 1, 2, 4].map(Colliding));
    }
}
