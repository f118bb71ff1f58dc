//! From the Southbound model to the EVPN exposures of this chassis (upstream-behaviour.md §1.3).
//!
//! Level-triggered and pure, like the SB BGP driver's computation: the same model and bridge
//! mappings always give the same [`ExposureSet`]; each event class of upstream's
//! `evpn_watcher.py` (§3.2) is a change of the model that [`compute`] answers as a whole.
//!
//! Per gateway port (`cr-lrp-<id>`, type `chassisredirect`) bound to this chassis whose
//! router-gateway patch port `<id>` carries a valid `neutron_bgpvpn:vni` and `:as`:
//! - one scope `evpn:<vni>` with [`EvpnParams::new`] (no explicit RD: the backend derives it
//!   from the VTEP address, never `None:<vni>`, U01) and one
//!   [`EvpnAttachment::RouterGateway`] on the gateway's provider network;
//! - the gateway's IPs ([`ExposureKind::GatewayPort`], neighbour MAC, IPv6 NDP proxy);
//! - each router subnet whose switch-side patch port carries the same VNI and AS, routed via
//!   the gateway address of its family;
//! - the IPs of the VMs bound on those subnets (type `""` or `virtual`, with a chassis), only
//!   announced (the backend puts them on `lo-<vni>`).
//!
//! The first gateway (chassis rows in uuid order, then ports by name) claims its VNI with its AS
//! and provider network; a later gateway asking for the same VNI with another AS or provider
//! network is skipped with the reason (one VRF has one BGP instance and one link to OVS).
//!
//! The provider network is the datapath of the patch port `<id>` (found by name, an index
//! lookup), the row the EVPN settings are read from. Upstream scanned every patch port's
//! `nat_addresses` for one mentioning the cr-lrp (`get_fip_associated`); that is the same port in
//! a Neutron deployment, but only while the router has `nat-addresses` set, and it costs a scan
//! and a cloud-wide monitor clause.
//!
//! The global scope stays empty: upstream's EVPN driver does not expose provider VMs or
//! floating IPs ("TO DO" in `ovn_evpn_driver.py`), and neither does this one.
//!
//! A row that cannot be used is recorded in `skipped` with the reason and the rest goes on.
//!
//! Incremental (issue 17), as the SB BGP driver's computation: each gateway port bound here is
//! a *root*, and each subnet it routes a *sub-root* (the VMs of that subnet). Each is computed
//! as a unit that records every model lookup it makes with the lookup's generation
//! ([`ModelKey`]); `ExposureCache` keeps the results and recomputes one only when a generation
//! it read has changed, so on a gateway with tens of thousands of VMs behind it, binding one VM
//! lists the VMs of that VM's subnet again, not every subnet's; and that listing takes over the
//! part of the last one of each port whose row is the same (the model stamps each version of a
//! row, [`SbModel::port_stamps_on_datapath`]): only the VM that changed is read, the others
//! keep their exposures' allocations, and the layout ([`IpLayout`]) re-decides only the IPs
//! between the common prefix and suffix of the old and new listing. A gateway's result is
//! what it asks for whatever the other gateways ask (its VNI, AS and provider network, its IPs
//! and subnets); which gateway gets a contested VNI is decided on every call, in the roots'
//! order, and a refused gateway is left out of the layout, so it comes back in full when the
//! claim before it goes. The results are laid out in a fresh computation's order, so "the first
//! gateway claims the VNI" and "the first producer of an IP wins" give the same answers:
//! [`compute`] is the cache started empty.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use ipnet::IpNet;

use crate::caps::frr::values::{Asn, Vni};
use crate::exposure::{
    EvpnAttachment, EvpnParams, ExposedIp, ExposedSubnet, ExposureKind, ExposureSet, IpLayout,
    ProviderNetwork, RootKey, ScopeId, next_version,
};
use crate::hash::{HashMap, HashSet};
use crate::ovn::generations::{CacheStats, ReadSet, Readers};
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::condition::{CR_LRP_PREFIX, EvpnSettings};
use crate::ovn::sb::model::{
    ModelKey, PortBinding, RecordedLookups, SbModel, Uuid, parse_port_addresses, vm_port_ips,
};
use crate::ovn::sb::provider::BridgeMappings;

const TABLE: &str = "Port_Binding";

/// The EVPN exposures this chassis must have (a computation from scratch).
pub fn compute(model: &SbModel, identity: &ChassisIdentity) -> ExposureSet {
    ExposureCache::default().compute(model, identity)
}

/// A skipped row of [`TABLE`]: (row, reason).
type Skip = (String, String);

fn skip(port: &PortBinding, reason: impl Into<String>) -> Skip {
    (
        format!("{} ({})", port.uuid, port.logical_port),
        reason.into(),
    )
}

/// What a gateway port bound here asks for, whatever the other gateways ask.
#[derive(Debug)]
enum Gateway {
    /// Not an EVPN gateway: not named `cr-lrp-<id>`, no patch port `<id>` (yet), or no
    /// networking-bgpvpn settings on it (a router of the SB BGP driver's).
    NotEvpn,
    /// An EVPN gateway that cannot be used, with the reason.
    Unusable(Skip),
    /// An EVPN gateway with everything it exposes if it gets its VNI.
    Asks(Box<Ask>),
}

/// A usable EVPN gateway: its VNI, AS and provider network, and what it exposes if no earlier
/// gateway claimed the VNI with another AS or provider network.
#[derive(Debug)]
struct Ask {
    vni: Vni,
    asn: Asn,
    provider: ProviderNetwork,
    /// Its own addresses.
    ips: Vec<Arc<ExposedIp>>,
    /// What its router's ports gave, in order: skips and subnets (the subnets' skips come
    /// between the router ports' skips, as a computation from scratch meets them).
    items: Vec<Item>,
    subnets: Vec<Subnet>,
}

#[derive(Debug)]
enum Item {
    Skip(Skip),
    /// An index in [`Ask::subnets`].
    Subnet(usize),
}

/// A router subnet attached with its gateway's VNI and AS: a sub-root, whose VMs are listed
/// apart from the gateway's result and from the other subnets'.
#[derive(Debug)]
struct Subnet {
    /// The router port (name, uuid) and the address's position in its `mac`: where the
    /// sub-root stands in the order of production, below its gateway.
    lrp: (String, Uuid),
    position: u32,
    exposed: ExposedSubnet,
    /// The subnet's switch datapath, where its VMs are.
    datapath: Uuid,
    /// Listed while the gateway has its VNI (a refused gateway's subnets are not listed).
    listing: Option<Listing>,
}

/// The VMs of a subnet: the addresses inside it of the VM ports bound on its datapath.
#[derive(Debug)]
struct Listing {
    /// What it was listed for: the VNI (the scope), the datapath and the subnet's network.
    of: (Vni, Uuid, IpNet),
    read: ReadSet<ModelKey>,
    ips: Vec<Arc<ExposedIp>>,
    skips: Vec<Skip>,
    /// What each port of the datapath gave, in the order of production: the next listing of
    /// the same datapath and network takes a port's part over, the same allocations, while its
    /// row is the same ([`SbModel::port_stamps_on_datapath`]).
    ports: Vec<Listed>,
    /// Tells this result from the one that replaces it ([`IpLayout`]).
    version: u64,
}

/// A port's part of a [`Listing`] (none when it is not a VM bound somewhere), with its name
/// (the exposures' source, shared by them) and the stamp of the row it was computed from: the
/// row of the same stamp gives the same part.
#[derive(Debug)]
struct Listed {
    name: Arc<str>,
    stamp: u64,
    /// Its IPs inside the subnet, a range of [`Listing::ips`]; or why it was skipped, an index
    /// in [`Listing::skips`].
    gave: Result<Range<usize>, usize>,
}

impl Subnet {
    /// Whether its listing holds for this VNI and the model as it is now, its reads judged by
    /// `reads_valid`.
    fn listing_valid(
        &self,
        vni: Vni,
        reads_valid: impl FnOnce(&ReadSet<ModelKey>) -> bool,
    ) -> bool {
        self.listing.as_ref().is_some_and(|l| {
            l.of.0 == vni
                && l.of.1 == self.datapath
                && l.of.2 == self.exposed.router_ip.trunc()
                && reads_valid(&l.read)
        })
    }

    /// Its listing's root in the reverse index, below the gateway of port uuid `gateway`.
    fn root(&self, gateway: &Uuid) -> EvpnRoot {
        EvpnRoot::Listing(gateway.clone(), self.lrp.clone(), self.position)
    }
}

/// A listing's [`EvpnRoot`] borrowed: its gateway's uuid, router port and position.
type ListingId<'a> = (&'a Uuid, &'a (String, Uuid), u32);

/// A root of the cache in its reverse index: a gateway, or a subnet's listing below it, by its
/// router port and position (the key [`GatewayResult::adopt_listings`] carries listings over by).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum EvpnRoot {
    Gateway(Uuid),
    Listing(Uuid, (String, Uuid), u32),
}

/// The result of one gateway root and what it was computed from.
#[derive(Debug)]
struct GatewayResult {
    /// The gateway's chassis row and name: the listings of its subnets are carried over to the
    /// next result only from the same place in the order of production (one version is one
    /// result of one root, [`IpLayout`]).
    at: (Uuid, String),
    read: ReadSet<ModelKey>,
    gateway: Gateway,
    /// Tells this result (the gateway's own IPs) from the one that replaces it.
    version: u64,
}

impl GatewayResult {
    fn compute(
        model: &SbModel,
        mappings: &BridgeMappings,
        chassis: &Uuid,
        crlrp: &PortBinding,
    ) -> Self {
        let mut reader = Reader::new(model);
        let gateway = reader.gateway(mappings, crlrp);
        GatewayResult {
            at: (chassis.clone(), crlrp.logical_port.clone()),
            read: reader.0.finish(),
            gateway,
            version: next_version(),
        }
    }

    /// The listings of its subnets as roots of the reverse index (`gateway` is its port's
    /// uuid), with what each read.
    fn listings<'a>(
        &'a self,
        gateway: &'a Uuid,
    ) -> impl Iterator<Item = (EvpnRoot, &'a ReadSet<ModelKey>)> + 'a {
        let subnets: &[Subnet] = match &self.gateway {
            Gateway::Asks(ask) => &ask.subnets,
            _ => &[],
        };
        subnets
            .iter()
            .filter_map(move |s| Some((s.root(gateway), &s.listing.as_ref()?.read)))
    }

    /// Take the gateway's roots out of the reverse index: its own and its listings'.
    fn forget(&self, gateway: &Uuid, readers: &mut Readers<ModelKey, EvpnRoot>) {
        readers.remove(&EvpnRoot::Gateway(gateway.clone()), &self.read);
        for (listing, read) in self.listings(gateway) {
            readers.remove(&listing, read);
        }
    }

    /// Take over the listings of `old` for the subnets that are still there: the listings
    /// are checked against the model before use, and most often a gateway's change (its
    /// addresses, another subnet attached) leaves its subnets' VMs as they were.
    fn adopt_listings(&mut self, old: GatewayResult) {
        if old.at != self.at {
            return;
        }
        let (Gateway::Asks(new), Gateway::Asks(old)) = (&mut self.gateway, old.gateway) else {
            return;
        };
        let mut listings: HashMap<((String, Uuid), u32), Listing> = old
            .subnets
            .into_iter()
            .filter_map(|s| Some(((s.lrp, s.position), s.listing?)))
            .collect();
        for subnet in &mut new.subnets {
            subnet.listing = listings.remove(&(subnet.lrp.clone(), subnet.position));
        }
    }
}

/// The gateway that claimed a VNI first (in the roots' order).
struct Claim {
    asn: Asn,
    provider: ProviderNetwork,
    gateway: String,
}

/// Whether `gateway` gets the VNI it asks for: `Some(reason)` when an earlier gateway claimed
/// it with another AS or provider network; the first claims it.
fn claim(
    claims: &mut BTreeMap<Vni, Claim>,
    gateway: &Gateway,
    crlrp: &PortBinding,
) -> Option<String> {
    let Gateway::Asks(ask) = gateway else {
        return None;
    };
    let (vni, asn, provider) = (ask.vni, ask.asn, &ask.provider);
    match claims.get(&vni) {
        Some(first) if first.asn != asn => Some(format!(
            "VNI {} is already used by gateway {} with AS {}; this gateway asks for AS {}: one \
             VRF cannot have two BGP instances",
            vni.get(),
            first.gateway,
            first.asn.get(),
            asn.get()
        )),
        Some(first) if first.provider != *provider => Some(format!(
            "VNI {} is already attached to provider network {} (bridge {}) by gateway {}; this \
             gateway is on {} (bridge {}): the VRF has one link to OVS",
            vni.get(),
            first.provider.physnet,
            first.provider.bridge,
            first.gateway,
            provider.physnet,
            provider.bridge
        )),
        Some(_) => None,
        None => {
            claims.insert(
                vni,
                Claim {
                    asn,
                    provider: provider.clone(),
                    gateway: crlrp.logical_port.clone(),
                },
            );
            None
        }
    }
}

/// A root in the order of production: the chassis row (in uuid order), the gateway port (in
/// `(logical_port, uuid)` order, as the model's index holds them), then its own addresses
/// before its subnets (in the order of its router's ports, then of their addresses).
#[derive(Clone, Copy)]
struct RootOrder<'a> {
    chassis: &'a Uuid,
    gateway: &'a PortBinding,
    subnet: Option<&'a Subnet>,
}

type OwnedOrder = (Uuid, String, Uuid, Option<(String, Uuid, u32)>);

impl RootKey for RootOrder<'_> {
    type Owned = OwnedOrder;

    fn to_owned_key(&self) -> Self::Owned {
        (
            self.chassis.clone(),
            self.gateway.logical_port.clone(),
            self.gateway.uuid.clone(),
            self.subnet
                .map(|s| (s.lrp.0.clone(), s.lrp.1.clone(), s.position)),
        )
    }

    fn cmp_owned(&self, (chassis, name, uuid, subnet): &Self::Owned) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        self.chassis
            .cmp(chassis)
            .then_with(|| self.gateway.logical_port.as_str().cmp(name))
            .then_with(|| self.gateway.uuid.cmp(uuid))
            .then_with(|| match (self.subnet, subnet) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(s), Some((lrp, lrp_uuid, position))) => s
                    .lrp
                    .0
                    .cmp(lrp)
                    .then_with(|| s.lrp.1.cmp(lrp_uuid))
                    .then_with(|| s.position.cmp(position)),
            })
    }
}

/// The per-root results of the last computation (see the module documentation).
#[derive(Debug, Default)]
pub struct ExposureCache {
    /// The bridge mappings the results hold for (the one input besides the model).
    mappings: Option<Vec<(String, String)>>,
    /// By gateway port uuid.
    gateways: HashMap<Uuid, GatewayResult>,
    /// The gateways and listings that read each lookup: an event looks at those of the lookups
    /// it stamped, not at every root's reads.
    readers: Readers<ModelKey, EvpnRoot>,
    /// The roots' IPs as last laid out.
    layout: IpLayout<OwnedOrder>,
    last: CacheStats,
    last_rows_read: usize,
}

impl ExposureCache {
    /// The EVPN exposures this chassis must have: equal to [`compute`]'s, recomputing only the
    /// gateways and subnets whose lookups changed since the last call.
    pub fn compute(&mut self, model: &SbModel, identity: &ChassisIdentity) -> ExposureSet {
        if self.mappings.as_ref() != Some(&identity.bridge_mappings) {
            self.gateways.clear();
            self.readers.clear();
            self.mappings = Some(identity.bridge_mappings.clone());
        }
        let generations = model.generations();
        // The roots whose reads an event changed, by kind and borrowed (no root built per
        // check); `None` (first call, new epoch, log outrun): each root's reads are checked.
        let stale = self.readers.stale(generations);
        let stale_gateways: Option<HashSet<&Uuid>> = stale.as_ref().map(|s| {
            s.iter()
                .filter_map(|r| match r {
                    EvpnRoot::Gateway(u) => Some(u),
                    EvpnRoot::Listing(..) => None,
                })
                .collect()
        });
        let stale_listings: Option<HashSet<ListingId<'_>>> = stale.as_ref().map(|s| {
            s.iter()
                .filter_map(|r| match r {
                    EvpnRoot::Listing(g, lrp, position) => Some((g, lrp, *position)),
                    EvpnRoot::Gateway(_) => None,
                })
                .collect()
        });
        // The bridges' ARP/NDP wiring, and the localnet patch ports the redirect flows match on.
        let (mappings, mut out) = BridgeMappings::wired(&identity.bridge_mappings, model);
        let mut stats = CacheStats::default();
        let mut rows_read = 0;
        let mut claims = BTreeMap::new();
        // Every gateway current, its claim decided and, when it has its VNI, its subnets
        // listed; in the roots' order (which gateway claims a contested VNI first does not
        // depend on hash order or on the order rows arrived in).
        let mut seen: Vec<(&Uuid, &PortBinding, Option<String>)> = Vec::new();
        let chassis_rows = model.chassis_uuids_named(&identity.system_id);
        for chassis in &chassis_rows {
            // The gateways only: the tenant VMs bound here too are not walked per event.
            for port in model.chassisredirect_on_chassis(chassis) {
                stats.roots += 1;
                let fresh = |cached: &GatewayResult| match &stale_gateways {
                    Some(stale) => !stale.contains(&port.uuid),
                    None => cached.read.still_valid(generations),
                };
                let mut result = match self.gateways.remove(&port.uuid) {
                    Some(cached) if fresh(&cached) => cached,
                    old => {
                        stats.recomputed += 1;
                        let mut new = GatewayResult::compute(model, &mappings, chassis, port);
                        if let Some(old) = old {
                            old.forget(&port.uuid, &mut self.readers);
                            new.adopt_listings(old);
                            for (listing, read) in new.listings(&port.uuid) {
                                self.readers.add(&listing, read);
                            }
                        }
                        self.readers
                            .add(&EvpnRoot::Gateway(port.uuid.clone()), &new.read);
                        new
                    }
                };
                let refused = claim(&mut claims, &result.gateway, port);
                if refused.is_none()
                    && let Gateway::Asks(ask) = &mut result.gateway
                {
                    for subnet in &mut ask.subnets {
                        stats.roots += 1;
                        let valid = subnet.listing_valid(ask.vni, |read| match &stale_listings {
                            Some(stale) => {
                                !stale.contains(&(&port.uuid, &subnet.lrp, subnet.position))
                            }
                            None => read.still_valid(generations),
                        });
                        if !valid {
                            stats.recomputed += 1;
                            let root = subnet.root(&port.uuid);
                            if let Some(old) = &subnet.listing {
                                self.readers.remove(&root, &old.read);
                            }
                            let listing = Reader::new(model).listing(
                                ask.vni,
                                &subnet.datapath,
                                subnet.exposed.router_ip.trunc(),
                                subnet.listing.take(),
                                &mut rows_read,
                            );
                            self.readers.add(&root, &listing.read);
                            subnet.listing = Some(listing);
                        }
                    }
                } else if let Gateway::Asks(ask) = &mut result.gateway {
                    // Refused: its subnets are not listed, so nothing keeps their listings
                    // current (an event that stamps what they read passes unseen); dropped,
                    // to be listed afresh once the gateway gets its VNI.
                    for subnet in &mut ask.subnets {
                        if let Some(old) = subnet.listing.take() {
                            self.readers.remove(&subnet.root(&port.uuid), &old.read);
                        }
                    }
                }
                self.gateways.insert(port.uuid.clone(), result);
                seen.push((chassis, port, refused));
            }
        }
        // Laid out in the roots' order: the scopes' parameters, subnets and skips of every
        // root (a few), the IPs as a delta of the last layout (only the roots whose result
        // changed are looked at; a refused gateway is left out, its IPs with it).
        let gateways = &self.gateways;
        let mut laid: Vec<(RootOrder<'_>, u64, ScopeId, &[Arc<ExposedIp>])> = Vec::new();
        for (chassis, port, refused) in &seen {
            let result = &gateways[&port.uuid];
            let ask = match (&result.gateway, refused) {
                (Gateway::NotEvpn, _) => continue,
                (Gateway::Unusable((row, reason)), _) => {
                    out.skip(TABLE, row.clone(), reason.clone());
                    continue;
                }
                (Gateway::Asks(_), Some(reason)) => {
                    let (row, reason) = skip(port, reason.clone());
                    out.skip(TABLE, row, reason);
                    continue;
                }
                (Gateway::Asks(ask), None) => ask,
            };
            let scope = ScopeId::Evpn(ask.vni);
            out.scope_mut(scope)
                .evpn
                .get_or_insert_with(|| EvpnParams::new(ask.vni, ask.asn))
                .attachments
                .insert(EvpnAttachment::RouterGateway {
                    provider: ask.provider.clone(),
                });
            let at = |subnet| RootOrder {
                chassis,
                gateway: port,
                subnet,
            };
            laid.push((at(None), result.version, scope, &ask.ips));
            for item in &ask.items {
                match item {
                    Item::Skip((row, reason)) => out.skip(TABLE, row.clone(), reason.clone()),
                    Item::Subnet(i) => {
                        let subnet = &ask.subnets[*i];
                        out.scope_mut(scope).subnets.insert(subnet.exposed.clone());
                        // Always there: listed above, as the gateway has its VNI.
                        let Some(listing) = &subnet.listing else {
                            continue;
                        };
                        for (row, reason) in &listing.skips {
                            out.skip(TABLE, row.clone(), reason.clone());
                        }
                        laid.push((at(Some(subnet)), listing.version, scope, &listing.ips));
                    }
                }
            }
        }
        self.layout.lay(
            laid.iter().map(|(order, version, scope, ips)| {
                (*order, *version, ips.iter().map(|ip| (*scope, ip)))
            }),
            &mut out,
        );
        if self.gateways.len() != seen.len() {
            let here: HashSet<&Uuid> = seen.iter().map(|(_, port, _)| &port.uuid).collect();
            let gone: Vec<Uuid> = (self.gateways.keys())
                .filter(|u| !here.contains(u))
                .cloned()
                .collect();
            for uuid in gone {
                if let Some(old) = self.gateways.remove(&uuid) {
                    old.forget(&uuid, &mut self.readers);
                }
            }
        }
        self.readers.now_current(generations);
        self.last = stats;
        self.last_rows_read = rows_read;
        out
    }

    /// How the last [`ExposureCache::compute`] went: the gateways and the subnets of those
    /// that have their VNI, and how many were recomputed.
    pub fn last_stats(&self) -> CacheStats {
        self.last
    }

    /// How many port rows the subnets listed again by the last [`ExposureCache::compute`]
    /// looked at (a VM's addresses parsed), the others' parts taken over from the listing
    /// before.
    pub fn last_rows_read(&self) -> usize {
        self.last_rows_read
    }
}

/// A router port's address of the same family as `ip`, among `gateway_ips`.
fn same_family(gateway_ips: &[IpNet], ip: IpNet) -> Option<IpNet> {
    gateway_ips
        .iter()
        .copied()
        .find(|g| g.addr().is_ipv4() == ip.addr().is_ipv4())
}

/// One root's computation: every model lookup goes through it, so it knows what it read.
struct Reader<'a>(RecordedLookups<'a>);

impl<'a> Reader<'a> {
    fn new(model: &'a SbModel) -> Self {
        Self(RecordedLookups::new(model))
    }

    /// The provider network of `datapath` here, or why it has none.
    fn provider_of(
        &mut self,
        mappings: &BridgeMappings,
        datapath: &str,
    ) -> Result<ProviderNetwork, String> {
        self.0.read(ModelKey::Localnets(datapath.to_owned()));
        mappings
            .provider_of(self.0.model(), datapath)
            .ok_or_else(|| mappings.why_not_provider(self.0.model(), datapath))
    }

    fn gateway(&mut self, mappings: &BridgeMappings, crlrp: &'a PortBinding) -> Gateway {
        // The root's own row: any change to it re-stamps its name.
        self.0.read(ModelKey::Named(crlrp.logical_port.clone()));
        let Some(id) = crlrp.logical_port.strip_prefix(CR_LRP_PREFIX) else {
            // Not a Neutron router gateway: not an EVPN gateway either.
            return Gateway::NotEvpn;
        };
        let Some(gateway_patch) = self.0.port_named(id) else {
            // Its patch port is not (yet) in the replica: no EVPN settings known.
            return Gateway::NotEvpn;
        };
        let (vni, asn) = match EvpnSettings::of(gateway_patch) {
            EvpnSettings::Absent => return Gateway::NotEvpn,
            EvpnSettings::Invalid(reason) => {
                return Gateway::Unusable(skip(
                    gateway_patch,
                    format!("EVPN gateway {}: {reason}", crlrp.logical_port),
                ));
            }
            EvpnSettings::Valid { vni, asn } => (vni, asn),
        };
        let addresses = match parse_port_addresses(&crlrp.mac) {
            Ok(Some(a)) => a,
            Ok(None) => {
                return Gateway::Unusable(skip(
                    crlrp,
                    format!("EVPN gateway (VNI {}) has no IP address", vni.get()),
                ));
            }
            Err(e) => return Gateway::Unusable(skip(crlrp, e)),
        };
        let provider = match self.provider_of(mappings, &gateway_patch.datapath) {
            Ok(provider) => provider,
            Err(why) => {
                return Gateway::Unusable(skip(
                    crlrp,
                    format!(
                        "EVPN gateway (VNI {}): its provider network cannot be wired here: {why}",
                        vni.get()
                    ),
                ));
            }
        };
        let ips = addresses
            .ips
            .iter()
            .map(|ip| {
                Arc::new(ExposedIp {
                    ndp_proxy: if ip.addr().is_ipv6() {
                        [ip.trunc()].into()
                    } else {
                        Default::default()
                    },
                    lladdr: Some(addresses.mac),
                    provider: Some(provider.clone()),
                    ..ExposedIp::announced(
                        ip.addr(),
                        ExposureKind::GatewayPort,
                        crlrp.logical_port.as_str(),
                    )
                })
            })
            .collect();
        let mut ask = Ask {
            vni,
            asn,
            provider,
            ips,
            items: Vec::new(),
            subnets: Vec::new(),
        };
        self.subnets(&mut ask, crlrp, id, &addresses.ips);
        Gateway::Asks(Box::new(ask))
    }

    /// The router's subnets attached with the gateway's VNI and AS (their VMs are listed
    /// apart, [`Self::listing`]).
    fn subnets(
        &mut self,
        ask: &mut Ask,
        crlrp: &PortBinding,
        gateway_id: &str,
        gateway_ips: &[IpNet],
    ) {
        let settings = (ask.vni, ask.asn);
        for lrp in self.0.ports_on_datapath(&crlrp.datapath) {
            if lrp.port_type != "patch"
                || lrp.chassis.is_some()
                || lrp.options.contains_key("chassis-redirect-port")
            {
                continue;
            }
            // The switch-side port (Neutron names it after the port id, `lrp-<id>` ↔ `<id>`)
            // carries the subnet's EVPN settings and is on the subnet's datapath.
            let Some(peer) = lrp
                .options
                .get("peer")
                .filter(|p| p.as_str() != gateway_id)
                .and_then(|p| self.0.port_named(p))
            else {
                continue;
            };
            match EvpnSettings::of(peer) {
                EvpnSettings::Absent => continue,
                EvpnSettings::Invalid(reason) => {
                    ask.items.push(Item::Skip(skip(
                        peer,
                        format!("subnet of EVPN gateway {}: {reason}", crlrp.logical_port),
                    )));
                    continue;
                }
                EvpnSettings::Valid { vni: v, asn: a } if (v, a) != settings => {
                    ask.items.push(Item::Skip(skip(
                        peer,
                        format!(
                            "subnet attached with VNI {} AS {}, its router's gateway {} with \
                             VNI {} AS {}: not exposed",
                            v.get(),
                            a.get(),
                            crlrp.logical_port,
                            settings.0.get(),
                            settings.1.get()
                        ),
                    )));
                    continue;
                }
                EvpnSettings::Valid { .. } => {}
            }
            let addresses = match parse_port_addresses(&lrp.mac) {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    ask.items.push(Item::Skip(skip(lrp, e)));
                    continue;
                }
            };
            for (position, router_ip) in addresses.ips.into_iter().enumerate() {
                if gateway_ips.iter().any(|g| g.addr() == router_ip.addr()) {
                    continue;
                }
                // No gateway address of the subnet's family: this family is not routable
                // through the gateway (upstream: UnboundLocalError on withdrawal, U12).
                let Some(via) = same_family(gateway_ips, router_ip) else {
                    continue;
                };
                ask.items.push(Item::Subnet(ask.subnets.len()));
                ask.subnets.push(Subnet {
                    lrp: (lrp.logical_port.clone(), lrp.uuid.clone()),
                    position: u32::try_from(position).unwrap_or(u32::MAX),
                    exposed: ExposedSubnet {
                        router_ip,
                        via: via.addr(),
                        provider: ask.provider.clone(),
                        source: lrp.logical_port.clone(),
                    },
                    datapath: peer.datapath.clone(),
                    listing: None,
                });
            }
        }
    }

    /// The addresses inside `network` of the VMs bound on `datapath` (a subnet's sub-root).
    /// A port's part of `previous` (a listing of the same datapath and network) is taken over
    /// while the port's row is the same (by its stamp: the row is not even looked up), so its
    /// exposures are the same allocations and the layout re-decides only the ports that
    /// changed. `read` counts the rows looked at.
    fn listing(
        mut self,
        vni: Vni,
        datapath: &str,
        network: IpNet,
        previous: Option<Listing>,
        read: &mut usize,
    ) -> Listing {
        let previous = previous.filter(|p| p.of.1 == datapath && p.of.2 == network);
        let (old_ips, old_skips, old_ports) = previous
            .map(|p| (p.ips, p.skips, p.ports))
            .unwrap_or_default();
        let mut ips = Vec::with_capacity(old_ips.len() + 2);
        let mut skips = Vec::new();
        let mut ports = Vec::with_capacity(old_ports.len() + 1);
        // The old parts, in the ports' order (by name): one walk.
        let mut old_ports = old_ports.into_iter().peekable();
        let model = self.0.model();
        for (name, uuid, stamp) in self.0.port_stamps_on_datapath(datapath) {
            // Those before this name (and not this row) are gone.
            while old_ports
                .next_if(|o| o.stamp != stamp && *o.name < *name)
                .is_some()
            {}
            if let Some(mut kept) = old_ports.next_if(|o| o.stamp == stamp) {
                kept.gave = match kept.gave {
                    Ok(range) => {
                        let start = ips.len();
                        ips.extend_from_slice(&old_ips[range]);
                        Ok(start..ips.len())
                    }
                    Err(i) => {
                        skips.push(old_skips[i].clone());
                        Err(skips.len() - 1)
                    }
                };
                ports.push(kept);
                continue;
            }
            // A row of the datapath: any change to it moves the generation read above.
            *read += 1;
            let Some(port) = model.port(uuid) else {
                continue;
            };
            let name: Arc<str> = name.into();
            let start = ips.len();
            // Not a VM bound somewhere: nothing, until its row changes.
            let vm = matches!(port.port_type.as_str(), "" | "virtual") && port.chassis.is_some();
            let gave = match vm.then(|| vm_port_ips(port)) {
                None => Ok(start..start),
                Some(Ok(port_ips)) => {
                    for ip in port_ips
                        .into_iter()
                        .flatten()
                        .filter(|ip| network.contains(&ip.addr()))
                    {
                        ips.push(Arc::new(ExposedIp::announced(
                            ip.addr(),
                            ExposureKind::TenantPort,
                            name.clone(),
                        )));
                    }
                    Ok(start..ips.len())
                }
                Some(Err(e)) => {
                    skips.push(skip(port, e));
                    Err(skips.len() - 1)
                }
            };
            ports.push(Listed { name, stamp, gave });
        }
        Listing {
            of: (vni, datapath.to_owned(), network),
            read: self.0.finish(),
            ips,
            skips,
            ports,
            version: next_version(),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeSet;
    use std::net::IpAddr;

    use super::*;
    use crate::exposure::ExposureScope;
    use crate::ovn::neutron::keys;

    const CH: &str = "c0000000-0000-0000-0000-000000000001";
    const OTHER_CH: &str = "c0000000-0000-0000-0000-000000000002";
    const ROUTER_DP: &str = "router";
    const PROVIDER_DP: &str = "provider";
    const TENANT_DP: &str = "tenant";
    const GW_MAC: &str = "fa:16:3e:aa:bb:cc";

    fn port(name: &str, ty: &str, dp: &str, mac: &str) -> PortBinding {
        PortBinding {
            uuid: format!("uuid-{name}"),
            logical_port: name.into(),
            port_type: ty.into(),
            datapath: dp.into(),
            mac: if mac.is_empty() {
                vec![]
            } else {
                vec![mac.into()]
            },
            ..Default::default()
        }
    }

    fn opt(mut p: PortBinding, k: &str, v: &str) -> PortBinding {
        p.options.insert(k.into(), v.into());
        p
    }

    fn evpn(mut p: PortBinding, vni: &str, asn: &str) -> PortBinding {
        p.external_ids.insert(keys::BGPVPN_VNI.into(), vni.into());
        p.external_ids.insert(keys::BGPVPN_AS.into(), asn.into());
        p
    }

    fn bound(mut p: PortBinding, chassis: &str) -> PortBinding {
        p.chassis = Some(chassis.into());
        p
    }

    /// Router `gw` (dual-stack gateway bound here on the flat provider network `public`, EVPN
    /// VNI 1001 AS 64999) with a dual-stack subnet attached with the same settings, and VMs on it.
    pub(in crate::drivers::evpn) fn model() -> SbModel {
        let mut m = SbModel::default();
        m.upsert_chassis(CH.into(), "node1".into());
        m.upsert_chassis(OTHER_CH.into(), "node2".into());
        for p in [
            opt(
                port("provnet-1", "localnet", PROVIDER_DP, "unknown"),
                "network_name",
                "public",
            ),
            bound(
                port(
                    "cr-lrp-gw",
                    "chassisredirect",
                    ROUTER_DP,
                    &format!("{GW_MAC} 172.24.100.5/24 2001:db8::5/64"),
                ),
                CH,
            ),
            opt(
                opt(port("lrp-gw", "patch", ROUTER_DP, GW_MAC), "peer", "gw"),
                "chassis-redirect-port",
                "cr-lrp-gw",
            ),
            evpn(
                opt(port("gw", "patch", PROVIDER_DP, "router"), "peer", "lrp-gw"),
                "1001",
                "64999",
            ),
            opt(
                port(
                    "lrp-sub",
                    "patch",
                    ROUTER_DP,
                    "fa:16:3e:dd:ee:ff 10.0.0.1/24 fd00::1/64",
                ),
                "peer",
                "sub",
            ),
            evpn(
                opt(port("sub", "patch", TENANT_DP, "router"), "peer", "lrp-sub"),
                "1001",
                "64999",
            ),
            bound(
                port("vm1", "", TENANT_DP, "fa:16:3e:00:00:10 10.0.0.10 fd00::10"),
                OTHER_CH,
            ),
            bound(
                port("vm-outside", "", TENANT_DP, "fa:16:3e:00:00:11 10.9.9.9"),
                OTHER_CH,
            ),
            port("vm-unbound", "", TENANT_DP, "fa:16:3e:00:00:12 10.0.0.12"),
            bound(
                port("vip", "virtual", TENANT_DP, "fa:16:3e:00:00:13 10.0.0.13"),
                CH,
            ),
            bound(
                port(
                    "provider-vm",
                    "",
                    PROVIDER_DP,
                    "fa:16:3e:00:00:14 172.24.100.14",
                ),
                CH,
            ),
        ] {
            m.upsert_port(p);
        }
        m
    }

    pub(in crate::drivers::evpn) fn node1() -> ChassisIdentity {
        ChassisIdentity {
            system_id: "node1".into(),
            bridge_mappings: vec![("public".into(), "br-ex".into())],
            ..Default::default()
        }
    }

    fn vni(n: u32) -> Vni {
        Vni::new(n).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn scope(set: &ExposureSet, n: u32) -> &ExposureScope {
        set.scopes
            .get(&ScopeId::Evpn(vni(n)))
            .unwrap_or_else(|| panic!("no scope evpn:{n} in {set:#?}"))
    }

    fn ips(scope: &ExposureScope) -> Vec<(IpAddr, ExposureKind, &str)> {
        scope
            .ips
            .values()
            .map(|e| (e.ip, e.kind, &*e.source))
            .collect()
    }

    fn reasons(set: &ExposureSet) -> Vec<String> {
        set.skipped
            .iter()
            .map(|s| format!("{}: {}", s.row, s.reason))
            .collect()
    }

    pub(in crate::drivers::evpn) fn with(
        m: &mut SbModel,
        name: &str,
        change: impl FnOnce(&mut PortBinding),
    ) {
        let mut p = m.port_named(name).unwrap().clone();
        change(&mut p);
        m.upsert_port(p);
    }

    #[test]
    fn a_gateway_bound_here_with_a_vpn_is_a_vni_scope_with_its_subnets_and_vms() {
        let set = compute(&model(), &node1());
        assert!(set.skipped.is_empty(), "{:?}", reasons(&set));
        // Provider VMs and FIPs are not exposed by this driver (upstream "TO DO").
        assert!(set.global().is_empty(), "{:?}", set.global());
        assert_eq!(set.scopes.len(), 2);
        let s = scope(&set, 1001);
        let provider = ProviderNetwork {
            physnet: "public".into(),
            bridge: "br-ex".parse().unwrap(),
            vlan: None,
            evpn: None,
        };
        let mut params = EvpnParams::new(vni(1001), Asn::new(64999).unwrap());
        params.attachments.insert(EvpnAttachment::RouterGateway {
            provider: provider.clone(),
        });
        assert_eq!(s.evpn, Some(params));
        assert_eq!(
            s.evpn.as_ref().unwrap().rd,
            None,
            "the backend derives the RD (U01)"
        );
        assert_eq!(
            ips(s),
            [
                (ip("10.0.0.10"), ExposureKind::TenantPort, "vm1"),
                (ip("10.0.0.13"), ExposureKind::TenantPort, "vip"),
                (ip("172.24.100.5"), ExposureKind::GatewayPort, "cr-lrp-gw"),
                (ip("2001:db8::5"), ExposureKind::GatewayPort, "cr-lrp-gw"),
                (ip("fd00::10"), ExposureKind::TenantPort, "vm1"),
            ]
        );
        let gw4 = &s.ips[&ip("172.24.100.5")];
        assert_eq!(gw4.lladdr, Some(GW_MAC.parse().unwrap()));
        assert_eq!(gw4.provider.as_ref(), Some(&provider));
        assert!(gw4.ndp_proxy.is_empty());
        let gw6 = &s.ips[&ip("2001:db8::5")];
        assert_eq!(
            gw6.ndp_proxy,
            BTreeSet::from(["2001:db8::/64".parse().unwrap()])
        );
        let tenant = &s.ips[&ip("10.0.0.10")];
        assert_eq!(
            (tenant.provider.as_ref(), tenant.lladdr, tenant.via),
            (None, None, None)
        );
        let subnets: Vec<(String, IpAddr, &str)> = s
            .subnets
            .iter()
            .map(|n| (n.router_ip.to_string(), n.via, n.source.as_str()))
            .collect();
        assert_eq!(
            subnets,
            [
                ("10.0.0.1/24".to_owned(), ip("172.24.100.5"), "lrp-sub"),
                ("fd00::1/64".to_owned(), ip("2001:db8::5"), "lrp-sub"),
            ]
        );
        assert!(s.subnets.iter().all(|n| n.provider == provider));
        // The bridge wiring (ARP/NDP, the localnet patch port the redirect flows match on).
        let wiring = &set.bridges[&"br-ex".parse().unwrap()];
        assert_eq!(
            wiring.localnet_ports,
            BTreeSet::from(["provnet-1".to_owned()])
        );
    }

    #[test]
    fn nothing_without_a_gateway_here_or_without_vpn_settings() {
        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| p.chassis = Some(OTHER_CH.into()));
        let set = compute(&m, &node1());
        assert_eq!(set.scopes.len(), 1, "only the empty global scope");
        assert!(set.skipped.is_empty());

        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| p.chassis = None);
        assert_eq!(compute(&m, &node1()).scopes.len(), 1);

        // A router without networking-bgpvpn settings is the SB BGP driver's, silently.
        let mut m = model();
        with(&mut m, "gw", |p| p.external_ids.clear());
        let set = compute(&m, &node1());
        assert_eq!((set.scopes.len(), set.skipped.len()), (1, 0));

        // An unknown chassis name (identity not yet in the replica).
        let other = ChassisIdentity {
            system_id: "node9".into(),
            ..node1()
        };
        assert_eq!(compute(&model(), &other).scopes.len(), 1);
    }

    #[test]
    fn hostile_or_incomplete_settings_are_skipped_with_the_reason() {
        for (key, value) in [
            (keys::BGPVPN_VNI, "ten"),
            (keys::BGPVPN_VNI, "16777216"),
            (keys::BGPVPN_VNI, "1001\nexit"),
            (keys::BGPVPN_VNI, "1001;"),
            (keys::BGPVPN_AS, "0"),
            (keys::BGPVPN_AS, "64999; no router bgp"),
        ] {
            let mut m = model();
            with(&mut m, "gw", |p| {
                p.external_ids.insert(key.into(), value.into());
            });
            let set = compute(&m, &node1());
            assert_eq!(set.scopes.len(), 1, "{key}={value:?} exposed");
            let r = reasons(&set);
            assert_eq!(r.len(), 1, "{r:?}");
            assert!(
                r[0].contains("(gw)") && r[0].contains(key) && r[0].contains(&format!("{value:?}")),
                "{r:?}"
            );
        }
        let mut m = model();
        with(&mut m, "gw", |p| {
            p.external_ids.remove(keys::BGPVPN_AS);
        });
        let r = reasons(&compute(&m, &node1()));
        assert!(r[0].contains("neutron_bgpvpn:as is missing"), "{r:?}");

        // A hostile subnet does not stop its gateway.
        let mut m = model();
        with(&mut m, "sub", |p| {
            p.external_ids.insert(keys::BGPVPN_VNI.into(), "x".into());
        });
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        assert!(s.subnets.is_empty());
        assert_eq!(s.ips.len(), 2, "the gateway's IPs only");
        assert!(reasons(&set)[0].contains("(sub)"), "{:?}", reasons(&set));
    }

    #[test]
    fn a_subnet_attached_with_other_settings_is_not_exposed() {
        let mut m = model();
        with(&mut m, "sub", |p| {
            p.external_ids
                .insert(keys::BGPVPN_AS.into(), "65000".into());
        });
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        assert!(s.subnets.is_empty());
        assert!(!s.ips.contains_key(&ip("10.0.0.10")));
        let r = reasons(&set);
        assert!(
            r[0].contains("VNI 1001 AS 65000") && r[0].contains("VNI 1001 AS 64999"),
            "{r:?}"
        );

        // Detached (settings removed): silently not exposed.
        let mut m = model();
        with(&mut m, "sub", |p| p.external_ids.clear());
        let set = compute(&m, &node1());
        assert!(scope(&set, 1001).subnets.is_empty() && set.skipped.is_empty());
    }

    #[test]
    fn unusable_gateways_are_skipped_with_the_reason() {
        // No bridge mapping for the provider network.
        let unmapped = ChassisIdentity {
            bridge_mappings: vec![("other".into(), "br-other".into())],
            ..node1()
        };
        let set = compute(&model(), &unmapped);
        assert_eq!(set.scopes.len(), 1);
        let r = reasons(&set);
        assert!(
            r[0].contains("physnet public") && r[0].contains("ovn-bridge-mappings"),
            "{r:?}"
        );

        // The provider localnet gone: the datapath is no provider network.
        let mut m = model();
        m.remove_port("uuid-provnet-1");
        let r = reasons(&compute(&m, &node1()));
        assert!(r[0].contains("no localnet port"), "{r:?}");

        // A gateway without addresses.
        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| p.mac = vec![GW_MAC.into()]);
        let r = reasons(&compute(&m, &node1()));
        assert!(r[0].contains("has no IP address"), "{r:?}");
    }

    #[test]
    fn a_vlan_provider_network_is_attached_with_its_tag() {
        let mut m = model();
        with(&mut m, "provnet-1", |p| p.tag = Some(100));
        let set = compute(&m, &node1());
        let params = scope(&set, 1001).evpn.as_ref().unwrap();
        let vlans: Vec<Option<u16>> = params
            .attachments
            .iter()
            .map(|a| a.provider().vlan)
            .collect();
        assert_eq!(vlans, [Some(100)]);
    }

    #[test]
    fn a_subnet_family_the_gateway_lacks_is_not_routed() {
        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| {
            p.mac = vec![format!("{GW_MAC} 172.24.100.5/24")]
        });
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        let routed: Vec<String> = s.subnets.iter().map(|n| n.router_ip.to_string()).collect();
        assert_eq!(routed, ["10.0.0.1/24"]);
        assert!(!s.ips.contains_key(&ip("fd00::10")));
    }

    /// A second router on this chassis: `cr-lrp-gx` sorts after `cr-lrp-gw`, so it is second.
    fn second_router(m: &mut SbModel, vni: &str, asn: &str, provider_dp: &str) {
        for p in [
            bound(
                port(
                    "cr-lrp-gx",
                    "chassisredirect",
                    "router2",
                    "fa:16:3e:aa:bb:dd 172.24.100.6/24",
                ),
                CH,
            ),
            evpn(
                opt(port("gx", "patch", provider_dp, "router"), "peer", "lrp-gx"),
                vni,
                asn,
            ),
        ] {
            m.upsert_port(p);
        }
    }

    #[test]
    fn a_vni_claimed_twice_goes_to_the_first_gateway_unless_the_settings_agree() {
        // Different AS: the first gateway (by name) keeps the VNI, the other is skipped.
        let mut m = model();
        second_router(&mut m, "1001", "65000", PROVIDER_DP);
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        assert_eq!(s.evpn.as_ref().unwrap().bgp_as.get(), 64999);
        assert!(!s.ips.contains_key(&ip("172.24.100.6")));
        let r = reasons(&set);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].contains("(cr-lrp-gx)") && r[0].contains("cr-lrp-gw with AS 64999"),
            "{r:?}"
        );

        // Same VNI, AS and provider network: one VRF serving both gateways.
        let mut m = model();
        second_router(&mut m, "1001", "64999", PROVIDER_DP);
        let set = compute(&m, &node1());
        assert!(set.skipped.is_empty(), "{:?}", reasons(&set));
        let s = scope(&set, 1001);
        assert!(s.ips.contains_key(&ip("172.24.100.6")));
        assert_eq!(s.evpn.as_ref().unwrap().attachments.len(), 1);

        // Same VNI and AS on another provider network: the VRF has one link to OVS.
        let mut m = model();
        m.upsert_port(opt(
            port("provnet-2", "localnet", "provider2", "unknown"),
            "network_name",
            "public2",
        ));
        second_router(&mut m, "1001", "64999", "provider2");
        let two = ChassisIdentity {
            bridge_mappings: vec![
                ("public".into(), "br-ex".into()),
                ("public2".into(), "br-ex2".into()),
            ],
            ..node1()
        };
        let set = compute(&m, &two);
        let r = reasons(&set);
        assert!(
            r[0].contains("already attached to provider network public"),
            "{r:?}"
        );

        // Another VNI: a second scope.
        let mut m = model();
        second_router(&mut m, "2002", "65000", PROVIDER_DP);
        let set = compute(&m, &node1());
        assert_eq!(scope(&set, 2002).evpn.as_ref().unwrap().bgp_as.get(), 65000);
        assert_eq!(set.scopes.len(), 3);
    }

    mod cache {
        //! The cache against a computation from scratch, over random sequences of row changes in
        //! a small world where every lookup the computation makes is exercised: gateways bound
        //! here (on two chassis rows of this name) or elsewhere, claiming one VNI with agreeing
        //! or conflicting AS and provider networks, subnets attached and detached, VMs bound,
        //! unbound and readdressed, provider localnets coming and going.

        use std::collections::BTreeMap;

        use proptest::prelude::*;

        use super::*;

        const HERE: &str = "ch-here";
        /// A second Chassis row of this chassis' name, sorting before the first.
        const HERE_TOO: &str = "ch-0-here";
        const ELSEWHERE: &str = "ch-other";
        const NAMES: &[&str] = &[
            "cr-lrp-g0",
            "cr-lrp-g1",
            "cr-lrp-g2",
            "g0",
            "g1",
            "g2",
            "lrp-s0",
            "lrp-s1",
            "s0",
            "s1",
            "vm0",
            "vm1",
            "vm2",
            "provnet-0",
            "provnet-1",
            "lrp-g0",
            "gw-no-prefix",
        ];
        const TYPES: &[&str] = &["", "virtual", "chassisredirect", "patch", "localnet"];
        const DATAPATHS: &[&str] = &["dp-p0", "dp-p1", "dp-r0", "dp-r1", "dp-t0", "dp-t1"];
        const MACS: &[&[&str]] = &[
            &[],
            &["fa:16:3e:00:00:01 172.24.4.5/24 2001:db8::5/64"],
            &["fa:16:3e:00:00:02 172.24.4.6/24"],
            &["fa:16:3e:00:00:03 10.0.0.1/24 fd00::1/64"],
            &["fa:16:3e:00:00:04 10.1.0.1/24 10.0.0.2/24"],
            &["fa:16:3e:00:00:05 10.0.0.10 fd00::10"],
            &["fa:16:3e:00:00:06 10.1.0.11 10.0.0.10"],
            &["unknown"],
            &["not-a-mac"],
            &["fa:16:3e:00:00:07"],
            &["fa:16:3e:00:00:08 172.24.4.5/24"],
        ];
        const OPTIONS: usize = 8;
        const EXTS: usize = 7;
        const CHASSIS: &[Option<&str>] = &[Some(HERE), Some(HERE_TOO), Some(ELSEWHERE), None];
        const MAPPINGS: &[&[(&str, &str)]] = &[
            &[("public", "br-ex")],
            &[("public", "br-ex"), ("public2", "br-ex2")],
            &[("public2", "br-ex2")],
            &[("public", "br/bad"), ("public2", "br-ex2")],
        ];

        /// What each row slot is in a working cloud: (name, type, datapath, mac, options,
        /// external ids, chassis) as indexes into the lists above. A step keeps each of them or
        /// draws it at random, so the paths that need several rows to agree (a gateway with its
        /// patch port and localnet, a router port with its peer and VMs) are reached often, and
        /// broken variants of them too. `cr-lrp-g2` is on the second chassis row, which sorts
        /// first: when that row and `public2` are there, it claims VNI 1001 on another provider
        /// network and `cr-lrp-g0` is refused.
        const ROLES: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
            (13, 4, 0, 0, 4, 0, 3), // provnet-0: physnet public on dp-p0
            (14, 4, 1, 0, 5, 0, 3), // provnet-1: physnet public2 on dp-p1
            (0, 2, 2, 1, 0, 0, 0),  // cr-lrp-g0, dual-stack, bound here, router dp-r0
            (1, 2, 3, 2, 0, 0, 0),  // cr-lrp-g1, IPv4, bound here, router dp-r1
            (2, 2, 2, 10, 0, 0, 1), // cr-lrp-g2, g0's IPv4 address, router dp-r0
            (3, 3, 0, 0, 0, 1, 3),  // g0: VNI 1001 AS 64999 on dp-p0
            (4, 3, 0, 0, 0, 2, 3),  // g1: VNI 1001 AS 65000 (conflicting AS)
            (5, 3, 1, 0, 0, 1, 3),  // g2: VNI 1001 AS 64999 on dp-p1 (conflicting provider)
            (15, 3, 2, 1, 6, 0, 3), // lrp-g0: the router's gateway port (not a subnet)
            (6, 3, 2, 3, 1, 0, 3),  // lrp-s0: dual-stack subnet, peer s0
            (7, 3, 2, 4, 2, 0, 3),  // lrp-s1: two IPv4 subnets, peer s1
            (8, 3, 4, 0, 7, 1, 3),  // s0: attached with VNI 1001 AS 64999, on dp-t0
            (9, 3, 5, 0, 0, 1, 3),  // s1: same, on dp-t1
            (10, 0, 4, 5, 0, 0, 2), // vm0 on dp-t0, bound elsewhere
            (11, 0, 5, 6, 0, 0, 2), // vm1 on dp-t1 (one address in s0's network)
            (12, 1, 4, 7, 0, 6, 0), // vm2: virtual, no port security, neutron:cidrs
            (12, 0, 5, 8, 0, 0, 2), // another vm2 with a broken MAC
            (16, 2, 3, 2, 0, 0, 0), // a chassisredirect port without the cr-lrp- prefix
        ];

        #[derive(Debug, Clone)]
        enum Step {
            Port {
                slot: usize,
                /// Per field: keep the role's value, or use the drawn one.
                keep: [bool; 7],
                drawn: [usize; 7],
                tag: bool,
            },
            RemovePort(usize),
            /// The second Chassis row of this chassis' name comes or goes.
            SecondChassis(bool),
            Mappings(usize),
            /// A VPN renumbered: every port with a VNI gets this VNI and AS at once.
            Renumber(u32, u32),
        }

        fn step() -> impl Strategy<Value = Step> {
            let drawn = (
                0..NAMES.len(),
                0..TYPES.len(),
                0..DATAPATHS.len(),
                0..MACS.len(),
                0..OPTIONS,
                0..EXTS,
                0..CHASSIS.len(),
            )
                .prop_map(|(a, b, c, d, e, f, g)| [a, b, c, d, e, f, g]);
            let keep = prop::array::uniform7(prop::bool::weighted(0.85));
            prop_oneof![
                8 => (0..ROLES.len(), keep, drawn, prop::bool::weighted(0.2)).prop_map(
                    |(slot, keep, drawn, tag)| Step::Port { slot, keep, drawn, tag }
                ),
                2 => (0..ROLES.len()).prop_map(Step::RemovePort),
                1 => any::<bool>().prop_map(Step::SecondChassis),
                1 => (0..MAPPINGS.len()).prop_map(Step::Mappings),
                1 => (prop::sample::select(vec![1001u32, 2002]), prop::sample::select(vec![64999u32, 65000]))
                    .prop_map(|(vni, asn)| Step::Renumber(vni, asn)),
            ]
        }

        fn slot_row(slot: usize, keep: [bool; 7], drawn: [usize; 7], tag: bool) -> PortBinding {
            let r = ROLES[slot];
            let role = [r.0, r.1, r.2, r.3, r.4, r.5, r.6];
            let f: Vec<usize> = (0..7)
                .map(|i| if keep[i] { role[i] } else { drawn[i] })
                .collect();
            let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            };
            let options = map(match f[4] {
                0 => &[],
                1 => &[("peer", "s0")],
                2 => &[("peer", "s1")],
                3 => &[("peer", "g0")],
                4 => &[("network_name", "public")],
                5 => &[("network_name", "public2")],
                6 => &[("peer", "g0"), ("chassis-redirect-port", "cr-lrp-g0")],
                _ => &[("peer", "lrp-s0")],
            });
            let external_ids = map(match f[5] {
                0 => &[],
                1 => &[(keys::BGPVPN_VNI, "1001"), (keys::BGPVPN_AS, "64999")],
                2 => &[(keys::BGPVPN_VNI, "1001"), (keys::BGPVPN_AS, "65000")],
                3 => &[(keys::BGPVPN_VNI, "2002"), (keys::BGPVPN_AS, "64999")],
                4 => &[(keys::BGPVPN_VNI, "x"), (keys::BGPVPN_AS, "64999")],
                5 => &[(keys::BGPVPN_VNI, "1001")],
                _ => &[(keys::CIDRS, "10.0.0.7/24 fd00::7/64")],
            });
            PortBinding {
                uuid: format!("pb-{slot:02}"),
                logical_port: NAMES[f[0]].into(),
                port_type: TYPES[f[1]].into(),
                datapath: DATAPATHS[f[2]].into(),
                mac: MACS[f[3]].iter().map(|m| m.to_string()).collect(),
                options,
                external_ids,
                chassis: CHASSIS[f[6]].map(str::to_owned),
                tag: tag.then_some(100),
                ..Default::default()
            }
        }

        fn identity(mappings: usize) -> ChassisIdentity {
            ChassisIdentity {
                system_id: "here".into(),
                bridge_mappings: MAPPINGS[mappings]
                    .iter()
                    .map(|(p, b)| (p.to_string(), b.to_string()))
                    .collect(),
                ..Default::default()
            }
        }

        /// The world: this chassis and another; with `working`, every role's row.
        fn world(working: bool) -> SbModel {
            let mut model = SbModel::default();
            model.upsert_chassis(HERE.into(), "here".into());
            model.upsert_chassis(ELSEWHERE.into(), "other".into());
            if working {
                for slot in 0..ROLES.len() {
                    model.upsert_port(slot_row(slot, [true; 7], [0; 7], false));
                }
            }
            model
        }

        fn apply(model: &mut SbModel, mappings: &mut usize, step: &Step) {
            match step {
                Step::Port {
                    slot,
                    keep,
                    drawn,
                    tag,
                } => model.upsert_port(slot_row(*slot, *keep, *drawn, *tag)),
                Step::RemovePort(slot) => model.remove_port(&format!("pb-{slot:02}")),
                Step::SecondChassis(true) => model.upsert_chassis(HERE_TOO.into(), "here".into()),
                Step::SecondChassis(false) => model.remove_chassis(HERE_TOO),
                Step::Mappings(m) => *mappings = *m,
                Step::Renumber(vni, asn) => {
                    let vpn: Vec<PortBinding> = model
                        .all_ports()
                        .into_iter()
                        .filter(|p| p.external_ids.contains_key(keys::BGPVPN_VNI))
                        .cloned()
                        .collect();
                    for mut p in vpn {
                        p.external_ids
                            .insert(keys::BGPVPN_VNI.into(), vni.to_string());
                        p.external_ids
                            .insert(keys::BGPVPN_AS.into(), asn.to_string());
                        model.upsert_port(p);
                    }
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            #[test]
            /// Computed after most steps, not all: the live driver computes once per batch of
            /// changes, so a root may have several changes to catch up with.
            fn the_cache_always_equals_a_computation_from_scratch(
                working in any::<bool>(),
                steps in prop::collection::vec((step(), prop::bool::weighted(0.7)), 1..60),
            ) {
                let mut model = world(working);
                let mut mappings = 0;
                let mut cache = ExposureCache::default();
                for (i, (s, then_compute)) in steps.iter().enumerate() {
                    apply(&mut model, &mut mappings, s);
                    if !then_compute && i + 1 < steps.len() {
                        continue;
                    }
                    // Now and then as after the model forgot what changed: every root's reads
                    // are checked.
                    if i % 7 == 6 {
                        cache.readers.lose_track();
                    }
                    let cached = cache.compute(&model, &identity(mappings));
                    let fresh = compute(&model, &identity(mappings));
                    prop_assert_eq!(cached, fresh, "after step {}: {:?}", i, s);
                }
            }
        }

        /// The exposures of each listed subnet of the gateway, in order.
        fn listed(cache: &ExposureCache) -> Vec<Vec<Arc<ExposedIp>>> {
            let Gateway::Asks(ask) = &cache.gateways["uuid-cr-lrp-gw"].gateway else {
                panic!("cr-lrp-gw asks for nothing");
            };
            ask.subnets
                .iter()
                .map(|s| s.listing.as_ref().unwrap().ips.clone())
                .collect()
        }

        /// A VM bound on a subnet of 200 (both families: two listings of one datapath): each
        /// listing reads that VM's row only and takes the others' parts over, the same
        /// allocations in the order a listing from scratch gives, so the layout decides that
        /// VM's two IPs only. Readdressing a VM, or renaming it, is that VM again; a VM that
        /// goes reads nothing.
        #[test]
        fn one_vm_of_a_large_subnet_reuses_the_others() {
            let mut m = model();
            for v in 0..200 {
                m.upsert_port(bound(
                    port(
                        &format!("vm-{v:03}"),
                        "",
                        TENANT_DP,
                        &format!("fa:16:3e:01:00:{v:02x} 10.0.0.{} fd00::1:{v:x}", 20 + v),
                    ),
                    OTHER_CH,
                ));
            }
            let mut cache = ExposureCache::default();
            cache.compute(&m, &node1());
            // Every row of the datapath (sub, vm1, vm-outside, vm-unbound, vip and the 200), in
            // each listing.
            assert_eq!(cache.last_rows_read(), 2 * 205);

            let mut event = |m: &SbModel, read: usize, decided: usize| {
                let before = listed(&cache);
                let set = cache.compute(m, &node1());
                assert_eq!(set, compute(m, &node1()));
                assert_eq!(cache.last_stats().recomputed, 2);
                assert_eq!(cache.last_rows_read(), read);
                assert_eq!(cache.layout.stats().ips_decided, decided);
                let Gateway::Asks(ask) = &cache.gateways["uuid-cr-lrp-gw"].gateway else {
                    unreachable!()
                };
                for (subnet, (before, after)) in
                    ask.subnets.iter().zip(before.iter().zip(listed(&cache)))
                {
                    let scratch = Reader::new(m).listing(
                        ask.vni,
                        &subnet.datapath,
                        subnet.exposed.router_ip.trunc(),
                        None,
                        &mut 0,
                    );
                    assert_eq!(after, scratch.ips);
                    assert_eq!(subnet.listing.as_ref().unwrap().skips, scratch.skips);
                    let new = after
                        .iter()
                        .filter(|a| !before.iter().any(|b| Arc::ptr_eq(a, b)))
                        .count();
                    assert_eq!(new, read / 2);
                }
            };
            m.upsert_port(bound(
                port(
                    "vm-1005",
                    "",
                    TENANT_DP,
                    "fa:16:3e:02:00:01 10.0.0.250 fd00::2:1",
                ),
                OTHER_CH,
            ));
            event(&m, 2, 2);
            with(&mut m, "vm-050", |p| {
                p.mac = vec!["fa:16:3e:01:00:32 10.0.0.251 fd00::1:32".into()]
            });
            // The IPv6 address is the same: a new allocation, equal, not decided again.
            event(&m, 2, 2);
            with(&mut m, "vm-060", |p| {
                p.logical_port = "vm-060-renamed".into()
            });
            event(&m, 2, 2);
            m.remove_port("uuid-vm-070");
            event(&m, 0, 2);
            // A column the listing does not use: the row is read again, its exposures are
            // new allocations, equal, and nothing is decided.
            with(&mut m, "vm-080", |p| p.up = Some(true));
            event(&m, 2, 0);
        }

        /// The test model with a second subnet, IPv4 only, on its own switch.
        fn two_subnets() -> SbModel {
            let mut m = model();
            m.upsert_port(opt(
                port(
                    "lrp-sub2",
                    "patch",
                    ROUTER_DP,
                    "fa:16:3e:dd:ee:01 10.1.0.1/24",
                ),
                "peer",
                "sub2",
            ));
            m.upsert_port(evpn(
                opt(
                    port("sub2", "patch", "tenant2", "router"),
                    "peer",
                    "lrp-sub2",
                ),
                "1001",
                "64999",
            ));
            m.upsert_port(bound(
                port("vm2", "", "tenant2", "fa:16:3e:00:00:20 10.1.0.20"),
                OTHER_CH,
            ));
            m
        }

        /// A VM bound on one subnet lists that subnet's VMs again, not the other subnets' nor
        /// the gateway; a gateway's change keeps its subnets' listings; a claim decided
        /// otherwise recomputes only the gateway that changed.
        #[test]
        fn an_event_recomputes_only_the_roots_it_touched() {
            let mut m = two_subnets();
            let mut cache = ExposureCache::default();
            let set = cache.compute(&m, &node1());
            assert_eq!(set, compute(&m, &node1()));
            // The gateway, and its subnets: 10.0.0.1/24 and fd00::1/64 of lrp-sub, 10.1.0.1/24.
            assert_eq!(
                cache.last_stats(),
                CacheStats {
                    roots: 4,
                    recomputed: 4
                }
            );
            let unchanged = cache.compute(&m, &node1());
            assert_eq!(cache.last_stats().recomputed, 0);
            assert!(
                unchanged.scopes[&ScopeId::Evpn(vni(1001))]
                    .ips
                    .ptr_eq(&set.scopes[&ScopeId::Evpn(vni(1001))].ips)
            );

            m.upsert_port(bound(
                port("vm3", "", "tenant2", "fa:16:3e:00:00:21 10.1.0.21"),
                OTHER_CH,
            ));
            let set = cache.compute(&m, &node1());
            assert_eq!(
                cache.last_stats(),
                CacheStats {
                    roots: 4,
                    recomputed: 1
                }
            );
            assert!(scope(&set, 1001).ips.contains_key(&ip("10.1.0.21")));
            assert_eq!(set, compute(&m, &node1()));

            // Readdressed on the dual-stack subnet: both of its families are listed again.
            with(&mut m, "vm1", |p| {
                p.mac = vec!["fa:16:3e:00:00:10 10.0.0.11 fd00::11".into()]
            });
            let set = cache.compute(&m, &node1());
            assert_eq!(cache.last_stats().recomputed, 2);
            assert!(scope(&set, 1001).ips.contains_key(&ip("fd00::11")));
            assert_eq!(set, compute(&m, &node1()));

            // The gateway's own row: the gateway again, its subnets' VMs kept.
            with(&mut m, "cr-lrp-gw", |p| {
                p.mac = vec![format!("{GW_MAC} 172.24.100.7/24 2001:db8::5/64")]
            });
            let set = cache.compute(&m, &node1());
            assert_eq!(cache.last_stats().recomputed, 1);
            assert!(scope(&set, 1001).ips.contains_key(&ip("172.24.100.7")));
            assert_eq!(set, compute(&m, &node1()));

            // A second gateway asking for the VNI with another AS is refused...
            second_router(&mut m, "1001", "65000", PROVIDER_DP);
            let set = cache.compute(&m, &node1());
            assert_eq!(
                cache.last_stats(),
                CacheStats {
                    roots: 5,
                    recomputed: 1
                }
            );
            assert!(!scope(&set, 1001).ips.contains_key(&ip("172.24.100.6")));
            assert_eq!(set, compute(&m, &node1()));
            // ...until the first one leaves the VPN: the second is not recomputed, it gets the
            // VNI when the claims are decided again.
            with(&mut m, "gw", |p| p.external_ids.clear());
            let set = cache.compute(&m, &node1());
            assert_eq!(
                cache.last_stats(),
                CacheStats {
                    roots: 2,
                    recomputed: 1
                }
            );
            let s = scope(&set, 1001);
            assert_eq!(s.evpn.as_ref().unwrap().bgp_as.get(), 65000);
            assert!(s.ips.contains_key(&ip("172.24.100.6")));
            assert_eq!(set, compute(&m, &node1()));
            // And back: the second is refused again, its address withdrawn.
            with(&mut m, "gw", |p| {
                p.external_ids
                    .insert(keys::BGPVPN_VNI.into(), "1001".into());
                p.external_ids
                    .insert(keys::BGPVPN_AS.into(), "64999".into());
            });
            let set = cache.compute(&m, &node1());
            assert!(!scope(&set, 1001).ips.contains_key(&ip("172.24.100.6")));
            assert_eq!(set, compute(&m, &node1()));
        }
    }
}
