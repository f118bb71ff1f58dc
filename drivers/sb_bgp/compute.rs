//! From the Southbound model to the exposures of this chassis (upstream-behaviour.md §1.1).
//!
//! Level-triggered and pure: the same model and options always give the same [`ExposureSet`].
//! Only local objects are visited (ports bound here, the routers of gateway ports bound here and
//! their subnets), through the model's indexes. A row that cannot be used is recorded in
//! `skipped` and the computation goes on (upstream aborted the whole sync, U30/U31).
//!
//! Incremental (issue 17): each port bound here is a *root* whose exposures are computed as a
//! unit, recording every model lookup it makes with the lookup's generation
//! ([`ModelKey`]). [`ExposureCache`] keeps each root's result and recomputes a root only when a
//! generation it read has changed, so on a gateway hosting 30 routers with a thousand FIPs each,
//! binding one VM recomputes that VM's root, not the 30k exposures. The results are then laid
//! out in the same order as a fresh computation's, so "the first producer of an IP wins" gives
//! the same answer: [`compute`] is the cache started empty.

use std::collections::BTreeSet;

use crate::hash::HashMap;

use ipnet::IpNet;

use super::fips::FipEntry;
use super::model::{
    LoadBalancer, ModelKey, PortBinding, RecordedLookups, SbModel, Uuid, lb_vip_name,
    parse_neutron_cidrs, parse_port_addresses, vm_port_ips,
};
use crate::exposure::{
    ExposedIp, ExposedSubnet, ExposureKind, ExposureSet, IpLayout, ProviderNetwork, RootKey,
    ScopeId, next_version,
};
pub use crate::ovn::generations::CacheStats;
use crate::ovn::generations::{ReadSet, Readers};
use crate::ovn::sb::provider::BridgeMappings;

const TABLE: &str = "Port_Binding";
const CR_LRP_PREFIX: &str = "cr-lrp-";
const LRP_PREFIX: &str = "lrp-";

/// Who this chassis is and what it wires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalChassis {
    /// `Open_vSwitch.external_ids:system-id` (the SB `Chassis.name`).
    pub name: String,
    /// `ovn-bridge-mappings` in order: (physnet, bridge), unvalidated.
    pub bridge_mappings: Vec<(String, String)>,
}

pub use crate::ovn::tenant::TenantOptions;

/// The exposures this chassis must have (a computation from scratch).
pub fn compute(model: &SbModel, local: &LocalChassis, tenant: &TenantOptions) -> ExposureSet {
    ExposureCache::default().compute(model, local, tenant)
}

/// What one root produced, each kind in order. Kept apart so that laying the roots out visits
/// only their subnets and skips (a few), and the IPs of the roots whose result changed: a
/// router's gateway port produces its thousand FIPs, which an event elsewhere need not walk.
#[derive(Debug, Default)]
struct Produced {
    ips: Vec<std::sync::Arc<ExposedIp>>,
    subnets: Vec<ExposedSubnet>,
    /// Skipped rows: (row, reason) of [`TABLE`].
    skips: Vec<(String, String)>,
}

/// The result of one root and what it was computed from.
#[derive(Debug)]
struct RootResult {
    /// Every lookup made, with its generation then.
    read: ReadSet<ModelKey>,
    produced: Produced,
    /// The `nat_addresses` entries it exposed, parsed, with their FIPs (the root's last IPs):
    /// the next computation of the root keeps what their next versions share with them.
    fips: Vec<FipEntry>,
    /// Tells this result from the one that replaces it ([`IpLayout`]).
    version: u64,
}

/// A root in the order of production: the chassis row (in uuid order), then the port (in
/// `(logical_port, uuid)` order, as the model's index holds them). Borrowed from the index, so
/// listing the roots looks no row up.
#[derive(Clone, Copy)]
struct RootOrder<'a> {
    chassis: &'a Uuid,
    name: &'a str,
    uuid: &'a Uuid,
}

impl RootKey for RootOrder<'_> {
    type Owned = (Uuid, String, Uuid);

    fn to_owned_key(&self) -> Self::Owned {
        (
            self.chassis.clone(),
            self.name.to_owned(),
            self.uuid.clone(),
        )
    }

    fn cmp_owned(&self, (chassis, name, uuid): &Self::Owned) -> std::cmp::Ordering {
        self.chassis
            .cmp(chassis)
            .then_with(|| self.name.cmp(name.as_str()))
            .then_with(|| self.uuid.cmp(uuid))
    }
}

/// The per-root results of the last computation (see the module documentation).
#[derive(Debug, Default)]
pub struct ExposureCache {
    /// The inputs besides the model the results hold for.
    inputs: Option<(LocalChassis, TenantOptions)>,
    roots: HashMap<Uuid, RootResult>,
    /// The roots that read each lookup: an event looks at those of the lookups it stamped,
    /// not at every root's reads.
    readers: Readers<ModelKey, Uuid>,
    /// The roots' IPs as last laid out.
    layout: IpLayout<(Uuid, String, Uuid)>,
    last: CacheStats,
}

impl ExposureCache {
    /// The exposures this chassis must have: equal to [`compute`]'s, recomputing only the roots
    /// whose lookups changed since the last call.
    pub fn compute(
        &mut self,
        model: &SbModel,
        local: &LocalChassis,
        tenant: &TenantOptions,
    ) -> ExposureSet {
        let inputs = (local.clone(), tenant.clone());
        if self.inputs.as_ref() != Some(&inputs) {
            self.roots.clear();
            self.readers.clear();
            self.inputs = Some(inputs);
        }
        let generations = model.generations();
        // The roots whose reads an event changed; `None` (first call, new epoch, log outrun):
        // each root's reads are checked.
        let stale = self.readers.stale(generations);
        let (mappings, mut out) = BridgeMappings::wired(&local.bridge_mappings, model);
        let mut stats = CacheStats::default();
        let mut seen: Vec<RootOrder<'_>> = Vec::new();
        let chassis_rows = model.chassis_uuids_named(&local.name);
        for chassis in &chassis_rows {
            for (name, uuid) in model.port_keys_on_chassis(chassis) {
                let fresh = self.roots.get(uuid).is_some_and(|r| match &stale {
                    Some(stale) => !stale.contains(uuid),
                    None => r.read.still_valid(generations),
                });
                if !fresh {
                    // Only a root to compute again needs its row.
                    let Some(port) = model.port(uuid) else {
                        continue;
                    };
                    stats.recomputed += 1;
                    let mut old = self.roots.remove(&port.uuid);
                    let mut root = Root {
                        lookups: RecordedLookups::new(model),
                        mappings: &mappings,
                        tenant,
                        produced: Produced::default(),
                        last_fips: old.as_mut().map(|o| std::mem::take(&mut o.fips)),
                        fips: Vec::new(),
                    };
                    root.expose_local_port(port);
                    let result = root.finish();
                    if let Some(old) = old {
                        self.readers.remove(&port.uuid, &old.read);
                    }
                    self.readers.add(&port.uuid, &result.read);
                    self.roots.insert(port.uuid.clone(), result);
                }
                stats.roots += 1;
                seen.push(RootOrder {
                    chassis,
                    name: name.as_str(),
                    uuid,
                });
            }
        }
        // Laid out in the roots' order, once every root is current: the subnets and skips of
        // every root (a few), the IPs as a delta of the last layout (only the roots whose
        // result changed are looked at).
        let n_seen = seen.len();
        let roots = &self.roots;
        let mut subnets = Vec::new();
        let mut skips = Vec::new();
        let laid = seen.iter().map(|order| {
            let root = &roots[order.uuid];
            subnets.extend(&root.produced.subnets);
            skips.extend(&root.produced.skips);
            // A root's FIPs come last (see `Root::expose_ip`), kept in their entries.
            let fips = root.fips.iter().flat_map(FipEntry::ips);
            let ips = root.produced.ips.iter().chain(fips);
            let ips = ips.map(|ip| (ScopeId::Global, ip));
            (*order, root.version, ips)
        });
        self.layout.lay(laid, &mut out);
        for s in subnets {
            out.global_mut().subnets.insert(s.clone());
        }
        for (row, reason) in skips {
            out.skip(TABLE, row.clone(), reason.clone());
        }
        if self.roots.len() != n_seen {
            let seen: crate::hash::HashSet<&Uuid> = seen.iter().map(|o| o.uuid).collect();
            let (readers, roots) = (&mut self.readers, &mut self.roots);
            readers.retain(roots, Uuid::clone, |r| &r.read, |u| seen.contains(u));
        }
        self.readers.now_current(generations);
        self.last = stats;
        out
    }

    /// How the last [`ExposureCache::compute`] went.
    pub fn last_stats(&self) -> CacheStats {
        self.last
    }
}

/// One root's computation: every model lookup goes through it, so it knows what it read.
struct Root<'a> {
    lookups: RecordedLookups<'a>,
    mappings: &'a BridgeMappings,
    tenant: &'a TenantOptions,
    produced: Produced,
    /// The root's FIP entries as last computed, taken as their next versions are parsed.
    last_fips: Option<Vec<FipEntry>>,
    fips: Vec<FipEntry>,
}

impl<'a> Root<'a> {
    fn finish(self) -> RootResult {
        RootResult {
            read: self.lookups.finish(),
            produced: self.produced,
            fips: self.fips,
            version: next_version(),
        }
    }

    fn read(&mut self, key: ModelKey) {
        self.lookups.read(key);
    }

    /// The provider network a datapath belongs to, if it has a localnet port of a physnet mapped
    /// on this chassis.
    fn provider_of(&mut self, datapath: &str) -> Option<ProviderNetwork> {
        self.read(ModelKey::Localnets(datapath.to_owned()));
        self.mappings.provider_of(self.lookups.model(), datapath)
    }

    fn port_named(&mut self, name: &str) -> Option<&'a PortBinding> {
        self.lookups.port_named(name)
    }

    fn ports_on_datapath(&mut self, datapath: &str) -> Vec<&'a PortBinding> {
        self.lookups.ports_on_datapath(datapath)
    }

    fn nat_ports_resident_on(&mut self, name: &str) -> Vec<&'a PortBinding> {
        self.read(ModelKey::ResidentNat(name.to_owned()));
        self.lookups.model().nat_ports_resident_on(name)
    }

    fn lb_vip_ports_on_datapath(&mut self, datapath: &str) -> Vec<&'a PortBinding> {
        self.read(ModelKey::LbVips(datapath.to_owned()));
        self.lookups.model().lb_vip_ports_on_datapath(datapath)
    }

    fn load_balancers_named(&mut self, name: &str) -> Vec<&'a LoadBalancer> {
        self.read(ModelKey::LoadBalancers(name.to_owned()));
        self.lookups.model().load_balancers_named(name).collect()
    }

    /// The root's IPs but its FIPs, which come after them all ([`Self::expose_local_port`]
    /// ends with them) and stay in their parsed entries.
    fn expose_ip(&mut self, ip: ExposedIp) {
        debug_assert!(self.fips.is_empty(), "an IP exposed after the root's FIPs");
        self.produced.ips.push(ip.into());
    }

    fn skip(&mut self, port: &PortBinding, reason: impl Into<String>) {
        self.produced.skips.push((
            format!("{} ({})", port.uuid, port.logical_port),
            reason.into(),
        ));
    }

    /// IPs of a VM-like port: `mac[0]`, or `neutron:cidrs` when the MAC is `unknown`.
    fn port_ips(&mut self, port: &PortBinding) -> Option<Vec<IpNet>> {
        vm_port_ips(port).unwrap_or_else(|e| {
            self.skip(port, e);
            None
        })
    }

    fn expose_local_port(&mut self, port: &'a PortBinding) {
        // The root's own row: any change to it re-stamps its name.
        self.read(ModelKey::Named(port.logical_port.clone()));
        if port.up == Some(false) {
            return;
        }
        match port.port_type.as_str() {
            "" | "virtual" => self.expose_vm_port(port),
            "chassisredirect" => self.expose_gateway_port(port),
            _ => {}
        }
        // Last: a root's FIPs stay in their parsed entries, after its other IPs.
        self.expose_fips_resident_on(port);
    }

    fn expose_vm_port(&mut self, port: &PortBinding) {
        let Some(provider) = self.provider_of(&port.datapath) else {
            // Tenant network: reachable through its FIPs (below) or its router's gateway.
            return;
        };
        let Some(ips) = self.port_ips(port) else {
            return;
        };
        let virtual_port = port.port_type == "virtual";
        let ndp_proxy: BTreeSet<IpNet> = if virtual_port {
            match port
                .external_ids
                .get("neutron:cidrs")
                .map(|c| parse_neutron_cidrs(c))
                .transpose()
            {
                Ok(cidrs) => cidrs
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| c.addr().is_ipv6())
                    .map(|c| c.trunc())
                    .collect(),
                Err(e) => {
                    self.skip(port, e);
                    BTreeSet::new()
                }
            }
        } else {
            BTreeSet::new()
        };
        for ip in ips {
            self.expose_ip(ExposedIp {
                ip: ip.addr(),
                kind: if virtual_port {
                    ExposureKind::VirtualPort
                } else {
                    ExposureKind::ProviderPort
                },
                source: port.logical_port.as_str().into(),
                provider: Some(provider.clone()),
                lladdr: None,
                ndp_proxy: ndp_proxy.clone(),
                via: None,
            });
        }
    }

    /// FIPs announced by this chassis: `nat_addresses` entries of patch ports that are
    /// resident on `port` (centralized on a gateway port, distributed on a VM port).
    fn expose_fips_resident_on(&mut self, port: &PortBinding) {
        for patch in self.nat_ports_resident_on(&port.logical_port) {
            let Some(provider) = self.provider_of(&patch.datapath) else {
                continue;
            };
            for raw in &patch.nat_addresses {
                // The entry's last version: the same port's entry with the same MAC.
                let mac = raw.split_whitespace().next();
                let last = self.last_fips.as_mut().and_then(|last| {
                    let i = last.iter().position(|f| {
                        **f.source() == *patch.logical_port && Some(f.mac()) == mac
                    })?;
                    Some(last.swap_remove(i))
                });
                let parsed = match last {
                    Some(last) => last.reparse(raw, &provider),
                    None => FipEntry::parse(raw, patch.logical_port.as_str().into(), &provider),
                };
                let entry = match parsed {
                    Ok(e) => e,
                    Err(e) => {
                        self.skip(patch, format!("nat_addresses: {e}"));
                        continue;
                    }
                };
                if entry.resident() != Some(port.logical_port.as_str()) {
                    continue;
                }
                self.fips.push(entry);
            }
        }
    }

    fn expose_gateway_port(&mut self, crlrp: &'a PortBinding) {
        let addresses = match parse_port_addresses(&crlrp.mac) {
            Ok(Some(a)) => a,
            Ok(None) => return,
            Err(e) => return self.skip(crlrp, e),
        };
        let Some(id) = crlrp.logical_port.strip_prefix(CR_LRP_PREFIX) else {
            return self.skip(
                crlrp,
                "chassisredirect port name does not start with cr-lrp-",
            );
        };
        // Neutron names the provider-side patch port after the router port id.
        let Some(provider_port) = self.port_named(id) else {
            return self.skip(crlrp, format!("provider patch port {id:?} not found"));
        };
        let Some(provider) = self.provider_of(&provider_port.datapath) else {
            return self.skip(
                crlrp,
                "gateway is not on a provider network mapped on this chassis",
            );
        };
        for ip in &addresses.ips {
            let ndp_proxy = if ip.addr().is_ipv6() {
                BTreeSet::from([ip.trunc()])
            } else {
                BTreeSet::new()
            };
            self.expose_ip(ExposedIp {
                ip: ip.addr(),
                kind: ExposureKind::GatewayPort,
                source: crlrp.logical_port.as_str().into(),
                provider: Some(provider.clone()),
                lladdr: Some(addresses.mac),
                ndp_proxy,
                via: None,
            });
        }
        let mut router_datapaths = BTreeSet::from([crlrp.datapath.clone()]);
        if self.tenant.enabled() {
            self.expose_tenant_subnets(crlrp, &addresses.ips, &provider, &mut router_datapaths);
        }
        self.expose_provider_lbs(crlrp, &provider_port.datapath, &provider, &router_datapaths);
    }

    fn expose_tenant_subnets(
        &mut self,
        crlrp: &PortBinding,
        gateway_ips: &[IpNet],
        provider: &ProviderNetwork,
        reachable: &mut BTreeSet<String>,
    ) {
        for lrp in self.ports_on_datapath(&crlrp.datapath) {
            if lrp.port_type != "patch"
                || !lrp.logical_port.starts_with(LRP_PREFIX)
                || lrp.chassis.is_some()
                || lrp.options.contains_key("chassis-redirect-port")
            {
                continue;
            }
            let Some(peer_name) = lrp.options.get("peer") else {
                continue;
            };
            let addresses = match parse_port_addresses(&lrp.mac) {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    self.skip(lrp, e);
                    continue;
                }
            };
            let peer = self.port_named(peer_name);
            if let Some(peer) = peer {
                reachable.insert(peer.datapath.clone());
            }
            for router_ip in addresses.ips {
                if gateway_ips.iter().any(|g| g.addr() == router_ip.addr()) {
                    continue;
                }
                // The subnet is routed via the gateway address of its family; none means this
                // family is not routable through this gateway (upstream: UnboundLocalError, U12).
                let Some(via) = gateway_ips
                    .iter()
                    .map(IpNet::addr)
                    .find(|g| g.is_ipv4() == router_ip.addr().is_ipv4())
                else {
                    continue;
                };
                if !self.tenant.allows_ip(router_ip.addr()) {
                    continue;
                }
                match peer {
                    Some(peer)
                        if !self
                            .tenant
                            .allows_scope(&peer.external_ids, router_ip.addr()) =>
                    {
                        continue;
                    }
                    // The address scope is on the peer row: without it the subnet's scope is
                    // unknown, and with address scopes configured that is a refusal.
                    None if self.tenant.address_scopes.is_some() => {
                        self.skip(
                            lrp,
                            format!(
                                "tenant subnet {router_ip}: address scopes are configured and \
                                 the peer port {peer_name:?} (where the scope is) is missing"
                            ),
                        );
                        continue;
                    }
                    _ => {}
                }
                self.produced.subnets.push(ExposedSubnet {
                    router_ip,
                    via,
                    provider: provider.clone(),
                    source: lrp.logical_port.clone(),
                });
                if let Some(peer) = peer {
                    self.expose_tenant_ips(&peer.datapath, router_ip);
                }
            }
        }
    }

    /// Tenant VM and LB VIP addresses inside `subnet`, announced on the gateway chassis.
    fn expose_tenant_ips(&mut self, datapath: &str, subnet: IpNet) {
        let network = subnet.trunc();
        for port in self.ports_on_datapath(datapath) {
            let (ips, kind) = match port.port_type.as_str() {
                "" if port.mac.is_empty() && port.chassis.is_none() => {
                    // Octavia OVN-provider VIP port: first address of neutron:cidrs.
                    let Some(cidrs) = port.external_ids.get("neutron:cidrs") else {
                        continue;
                    };
                    match parse_neutron_cidrs(cidrs) {
                        Ok(c) => (
                            c.into_iter().take(1).collect::<Vec<_>>(),
                            ExposureKind::LoadBalancerVip,
                        ),
                        Err(e) => {
                            self.skip(port, e);
                            continue;
                        }
                    }
                }
                "" if port.chassis.is_some() => match self.port_ips(port) {
                    Some(ips) => (ips, ExposureKind::TenantPort),
                    None => continue,
                },
                "virtual" => match self.port_ips(port) {
                    Some(ips) => (ips, ExposureKind::TenantPort),
                    None => continue,
                },
                _ => continue,
            };
            for ip in ips {
                let addr = ip.addr();
                if !network.contains(&addr)
                    || !self.tenant.allows_ip(addr)
                    || !self.tenant.allows_scope(&port.external_ids, addr)
                {
                    continue;
                }
                self.expose_ip(ExposedIp {
                    ip: addr,
                    kind,
                    source: port.logical_port.as_str().into(),
                    provider: None,
                    lladdr: None,
                    ndp_proxy: BTreeSet::new(),
                    via: None,
                });
            }
        }
    }

    /// Octavia OVN-provider load balancers with a VIP on the provider network whose members sit
    /// behind this gateway's router.
    fn expose_provider_lbs(
        &mut self,
        crlrp: &PortBinding,
        provider_datapath: &str,
        provider: &ProviderNetwork,
        reachable: &BTreeSet<String>,
    ) {
        for vip_port in self.lb_vip_ports_on_datapath(provider_datapath) {
            if !vip_port.port_type.is_empty()
                || vip_port.chassis.is_some()
                || !vip_port.mac.is_empty()
            {
                continue;
            }
            let Some(lb_name) = lb_vip_name(vip_port) else {
                continue;
            };
            let behind_this_router = self
                .load_balancers_named(lb_name)
                .into_iter()
                .any(|lb| !lb.datapaths.is_disjoint(reachable));
            if !behind_this_router {
                continue;
            }
            let Some(cidrs) = vip_port.external_ids.get("neutron:cidrs") else {
                continue;
            };
            let vip = match parse_neutron_cidrs(cidrs) {
                Ok(c) => c.into_iter().next(),
                Err(e) => {
                    self.skip(vip_port, e);
                    continue;
                }
            };
            if let Some(vip) = vip {
                self.expose_ip(ExposedIp {
                    ip: vip.addr(),
                    kind: ExposureKind::LoadBalancerVip,
                    source: format!("{} via {}", vip_port.logical_port, crlrp.logical_port).into(),
                    provider: Some(provider.clone()),
                    lladdr: None,
                    ndp_proxy: BTreeSet::new(),
                    via: None,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The cache against a computation from scratch, over random sequences of row changes in a
    //! small world where every lookup the computation makes is exercised: names collide, ports
    //! move between datapaths and chassis, NAT entries and load balancers come and go.

    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    const HERE: &str = "ch-here";
    const NAMES: &[&str] = &[
        "vm0",
        "vm1",
        "cr-lrp-r0",
        "cr-lrp-r1",
        "r0",
        "r1",
        "lrp-t0",
        "lrp-t1",
        "ls-t0",
        "lb-vip",
        "provnet-pub",
        "patch-x",
    ];
    const TYPES: &[&str] = &["", "virtual", "chassisredirect", "patch", "localnet"];
    const DATAPATHS: &[&str] = &["dp-prov", "dp-other", "dp-r0", "dp-r1", "dp-t0"];
    const MACS: &[&[&str]] = &[
        &[],
        &["fa:16:3e:00:00:01 172.24.4.10"],
        &["fa:16:3e:00:00:02 10.0.0.5 2001:db8::5"],
        &["unknown"],
        &["not-a-mac"],
        &["fa:16:3e:00:00:03 172.24.4.1/24 2001:db8::1/64"],
        &["fa:16:3e:00:00:04 10.0.0.1/24 2001:db9::1/64"],
    ];
    const NATS: &[&[&str]] = &[
        &[],
        &["fa:16:3e:00:00:09 172.24.4.50 is_chassis_resident(\"cr-lrp-r0\")"],
        &["fa:16:3e:00:00:0a 172.24.4.51 172.24.4.10 is_chassis_resident(\"vm0\")"],
        &[
            "fa:16:3e:00:00:0b 172.24.4.52 is_chassis_resident(\"cr-lrp-r1\")",
            "junk",
        ],
    ];
    const OPTIONS: usize = 5;
    const EXTS: usize = 4;
    const CHASSIS: usize = 3;

    /// What each row slot is in a working cloud: (name, type, datapath, mac, options, external
    /// ids, chassis) as indexes into the lists above. A step keeps each of them or draws it at
    /// random, so the paths that need several rows to agree (a gateway with its provider
    /// port, router interface, peer and tenant VMs; a load balancer's VIP port) are reached
    /// often, and broken variants of them too.
    const ROLES: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
        (10, 4, 0, 0, 2, 0, 2), // the provider network's localnet port
        (2, 2, 2, 5, 0, 0, 0),  // cr-lrp-r0, bound here, on router r0
        (3, 2, 3, 5, 0, 0, 0),  // cr-lrp-r1
        (4, 3, 0, 0, 0, 0, 2),  // r0's provider-side patch port
        (5, 3, 0, 0, 0, 0, 2),  // r1's
        (6, 3, 2, 6, 1, 0, 2),  // r0's interface on the tenant network, peer ls-t0
        (7, 3, 3, 6, 1, 0, 2),  // r1's
        (8, 3, 4, 6, 4, 0, 2),  // ls-t0, the tenant side, peer lrp-t0
        (0, 0, 4, 2, 0, 0, 1),  // a tenant VM bound elsewhere
        (1, 1, 4, 3, 0, 1, 1),  // a virtual tenant port without port security
        (9, 0, 0, 0, 0, 2, 2),  // an Octavia VIP port on the provider network
        (11, 3, 0, 0, 0, 0, 2), // a patch port carrying NAT entries
        (0, 0, 0, 1, 0, 0, 0),  // a provider VM bound here
        (1, 1, 0, 3, 0, 1, 0),  // a virtual provider port bound here
    ];

    #[derive(Debug, Clone)]
    enum Step {
        Port {
            slot: usize,
            /// Per field: keep the role's value, or use the drawn one.
            keep: [bool; 7],
            drawn: [usize; 7],
            up: usize,
            nat: usize,
            tag: bool,
        },
        RemovePort(usize),
        Lb {
            slot: usize,
            name: usize,
            datapaths: Vec<usize>,
        },
        RemoveLb(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        let drawn = (
            0..NAMES.len(),
            0..TYPES.len(),
            0..DATAPATHS.len(),
            0..MACS.len(),
            0..OPTIONS,
            0..EXTS,
            0..CHASSIS,
        )
            .prop_map(|(a, b, c, d, e, f, g)| [a, b, c, d, e, f, g]);
        let keep = prop::array::uniform7(prop::bool::weighted(0.85));
        prop_oneof![
            6 => (0..ROLES.len(), keep, drawn, 0..3usize, 0..NATS.len(), any::<bool>()).prop_map(
                |(slot, keep, drawn, up, nat, tag)| Step::Port { slot, keep, drawn, up, nat, tag }
            ),
            2 => (0..ROLES.len()).prop_map(Step::RemovePort),
            1 => (0..2usize, 0..2usize, prop::collection::vec(0..DATAPATHS.len(), 0..3))
                .prop_map(|(slot, name, datapaths)| Step::Lb { slot, name, datapaths }),
            1 => (0..2usize).prop_map(Step::RemoveLb),
        ]
    }

    fn apply(model: &mut SbModel, step: &Step) {
        let strs = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match step {
            Step::Port {
                slot,
                keep,
                drawn,
                up,
                nat,
                tag,
            } => {
                let r = ROLES[*slot];
                let role = [r.0, r.1, r.2, r.3, r.4, r.5, r.6];
                let f: Vec<usize> = (0..7)
                    .map(|i| if keep[i] { role[i] } else { drawn[i] })
                    .collect();
                let options: BTreeMap<String, String> = match f[4] {
                    0 => BTreeMap::new(),
                    1 => [("peer".into(), "ls-t0".into())].into(),
                    2 => [("network_name".into(), "public".into())].into(),
                    3 => [("chassis-redirect-port".into(), "cr-lrp-r0".into())].into(),
                    _ => [("peer".into(), "lrp-t0".into())].into(),
                };
                let external_ids: BTreeMap<String, String> = match f[5] {
                    0 => BTreeMap::new(),
                    1 => [("neutron:cidrs".into(), "10.0.0.7/24".into())].into(),
                    2 => [
                        ("neutron:port_name".into(), "ovn-lb-vip-lb0".into()),
                        ("neutron:cidrs".into(), "172.24.4.77/24".into()),
                    ]
                    .into(),
                    _ => [("neutron:cidrs".into(), "bad".into())].into(),
                };
                model.upsert_port(PortBinding {
                    uuid: format!("pb-{slot}"),
                    logical_port: NAMES[f[0]].into(),
                    port_type: TYPES[f[1]].into(),
                    datapath: DATAPATHS[f[2]].into(),
                    mac: strs(MACS[f[3]]),
                    options,
                    external_ids,
                    chassis: [Some(HERE.to_owned()), Some("ch-other".into()), None][f[6]].clone(),
                    up: [Some(true), None, Some(false)][*up],
                    tag: tag.then_some(100),
                    nat_addresses: strs(NATS[*nat]),
                });
            }
            Step::RemovePort(slot) => model.remove_port(&format!("pb-{slot}")),
            Step::Lb {
                slot,
                name,
                datapaths,
            } => model.upsert_load_balancer(LoadBalancer {
                uuid: format!("lb-{slot}"),
                name: ["lb0", "lb1"][*name].into(),
                datapaths: datapaths.iter().map(|d| DATAPATHS[*d].to_owned()).collect(),
            }),
            Step::RemoveLb(slot) => model.remove_load_balancer(&format!("lb-{slot}")),
        }
    }

    fn world() -> (SbModel, LocalChassis) {
        let mut model = SbModel::default();
        model.upsert_chassis(HERE.into(), "here".into());
        model.upsert_chassis("ch-other".into(), "other".into());
        let local = LocalChassis {
            name: "here".into(),
            bridge_mappings: vec![("public".into(), "br-ex".into())],
        };
        (model, local)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn the_cache_always_equals_a_computation_from_scratch(
            steps in prop::collection::vec(step(), 1..60),
            tenant_on in any::<bool>(),
        ) {
            let (mut model, local) = world();
            let tenant = TenantOptions {
                expose_tenant_networks: tenant_on,
                ..Default::default()
            };
            let mut cache = ExposureCache::default();
            for (i, s) in steps.iter().enumerate() {
                apply(&mut model, s);
                // Not after every step: several changes may be pending, as in a batch.
                if i % 3 == 2 {
                    continue;
                }
                // Now and then as after the model forgot what changed: every root's reads
                // are checked.
                if i % 7 == 6 {
                    cache.readers.lose_track();
                }
                let cached = cache.compute(&model, &local, &tenant);
                let fresh = compute(&model, &local, &tenant);
                prop_assert_eq!(cached, fresh, "after step {}: {:?}", i, s);
            }
        }
    }

    /// Binding one VM on a gateway hosting routers recomputes that VM's root alone.
    #[test]
    fn an_event_recomputes_only_the_roots_it_touched() {
        let (mut model, local) = world();
        let tenant = TenantOptions {
            expose_tenant_networks: true,
            ..Default::default()
        };
        let port = |uuid: &str, name: &str, kind: &str, dp: &str, mac: &[&str]| PortBinding {
            uuid: uuid.into(),
            logical_port: name.into(),
            port_type: kind.into(),
            datapath: dp.into(),
            mac: mac.iter().map(|m| m.to_string()).collect(),
            up: Some(true),
            ..Default::default()
        };
        let mut localnet = port("ln", "provnet-pub", "localnet", "dp-prov", &[]);
        localnet
            .options
            .insert("network_name".into(), "public".into());
        model.upsert_port(localnet);
        for r in 0..2 {
            model.upsert_port(port(
                &format!("prov-{r}"),
                &format!("r{r}"),
                "patch",
                "dp-prov",
                &[],
            ));
            let mut cr = port(
                &format!("cr-{r}"),
                &format!("cr-lrp-r{r}"),
                "chassisredirect",
                &format!("dp-r{r}"),
                &[&format!("fa:16:3e:00:00:0{r} 172.24.4.{r}/24")],
            );
            cr.chassis = Some(HERE.into());
            model.upsert_port(cr);
            let mut patch = port(
                &format!("nat-{r}"),
                &format!("pn-{r}"),
                "patch",
                "dp-prov",
                &[],
            );
            patch.nat_addresses = vec![format!(
                "fa:16:3e:00:01:0{r} 172.24.5.{r} is_chassis_resident(\"cr-lrp-r{r}\")"
            )];
            model.upsert_port(patch);
        }
        let mut cache = ExposureCache::default();
        let before = cache.compute(&model, &local, &tenant);
        assert_eq!(before.global().ips.len(), 4, "{before:?}");
        assert_eq!(cache.last_stats().recomputed, 2);
        let mut vm = port(
            "vm",
            "vm0",
            "",
            "dp-prov",
            &["fa:16:3e:00:00:10 172.24.4.10"],
        );
        vm.chassis = Some(HERE.into());
        model.upsert_port(vm);
        let after = cache.compute(&model, &local, &tenant);
        assert_eq!(after.global().ips.len(), 5);
        assert_eq!(
            cache.last_stats(),
            CacheStats {
                roots: 3,
                recomputed: 1
            }
        );
        assert_eq!(after, compute(&model, &local, &tenant));
        // A NAT entry of one router changes: that router's root alone.
        let mut patch = port("nat-1", "pn-1", "patch", "dp-prov", &[]);
        patch.nat_addresses =
            vec!["fa:16:3e:00:01:01 172.24.5.9 is_chassis_resident(\"cr-lrp-r1\")".into()];
        model.upsert_port(patch);
        let after = cache.compute(&model, &local, &tenant);
        assert_eq!(cache.last_stats().recomputed, 1);
        assert!(
            after
                .global()
                .ips
                .contains_key(&"172.24.5.9".parse::<std::net::IpAddr>().unwrap())
        );
        assert_eq!(after, compute(&model, &local, &tenant));
    }

    /// Generations of rows long gone are forgotten (a churning cloud must not grow them
    /// without bound); every cached root is then recomputed once, and still right.
    #[test]
    fn forgotten_generations_recompute_everything_once() {
        let (mut model, local) = world();
        let tenant = TenantOptions::default();
        let mut vm = PortBinding {
            uuid: "vm".into(),
            logical_port: "vm0".into(),
            datapath: "dp-prov".into(),
            mac: vec!["fa:16:3e:00:00:10 172.24.4.10".into()],
            chassis: Some(HERE.into()),
            ..Default::default()
        };
        let mut localnet = PortBinding {
            uuid: "ln".into(),
            logical_port: "provnet-pub".into(),
            port_type: "localnet".into(),
            datapath: "dp-prov".into(),
            ..Default::default()
        };
        localnet
            .options
            .insert("network_name".into(), "public".into());
        model.upsert_port(localnet);
        model.upsert_port(vm.clone());
        let mut cache = ExposureCache::default();
        cache.compute(&model, &local, &tenant);
        let epoch = model.generation_epoch();
        for i in 0..3000 {
            let churn = PortBinding {
                uuid: format!("churn-{i}"),
                logical_port: format!("gone-{i}"),
                datapath: format!("dp-gone-{i}"),
                ..Default::default()
            };
            model.upsert_port(churn);
            model.remove_port(&format!("churn-{i}"));
        }
        assert!(
            model.generation_epoch() > epoch,
            "stamps were never dropped"
        );
        let set = cache.compute(&model, &local, &tenant);
        assert_eq!(cache.last_stats().recomputed, 1);
        assert_eq!(set, compute(&model, &local, &tenant));
        vm.mac = vec!["fa:16:3e:00:00:10 172.24.4.11".into()];
        model.upsert_port(vm);
        let set = cache.compute(&model, &local, &tenant);
        assert!(
            set.global()
                .ips
                .contains_key(&"172.24.4.11".parse::<std::net::IpAddr>().unwrap())
        );
        assert_eq!(set, compute(&model, &local, &tenant));
    }
}
