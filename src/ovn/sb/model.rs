//! The SB drivers' typed view of the Southbound rows they use, with the indexes their queries need.
//!
//! Rows enter and leave one at a time (from replica change events or a recorded snapshot), and
//! every index is updated in O(1) per row, so computing the exposures of this chassis costs
//! O(what is local), never a scan of the cloud-wide Port_Binding table.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::hash::HashMap;
use crate::ovn::generations::Generations;
use crate::ovn::index;

/// OVSDB row uuid as text.
pub type Uuid = String;

/// `Port_Binding.type` of a distributed gateway port's chassis-redirect port (`cr-lrp-<id>`).
pub const CHASSISREDIRECT: &str = "chassisredirect";

pub use crate::ovn::neutron::{
    LB_VIP_PORT_PREFIX, NatEntry, PortAddresses, nat_entry_resident, parse_ip_or_cidr,
    parse_nat_entry, parse_neutron_cidrs, parse_port_addresses,
};

crate::ovn_table! {
    /// The Port_Binding columns the SB drivers read.
    pub struct PortBinding in "Port_Binding" {
        pub logical_port: String = "logical_port" as Str,
        pub port_type: String = "type" as Str,
        pub mac: Vec<String> = "mac" as Strs,
        pub chassis: Option<Uuid> = "chassis" as OptRef,
        /// `None` when the column is empty (older OVN, or not yet set).
        pub up: Option<bool> = "up" as OptBool,
        pub datapath: Uuid = "datapath" as Ref,
        pub options: BTreeMap<String, String> = "options" as StrMap,
        pub tag: Option<i64> = "tag" as OptInt,
        pub nat_addresses: Vec<String> = "nat_addresses" as Strs,
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

crate::ovn_table! {
    /// A Chassis row: its name (the `system-id` of its host).
    pub struct ChassisRow in "Chassis" {
        pub name: String = "name" as Str,
    }
}

crate::ovn_table! {
    /// A Load_Balancer row as monitored: the datapath columns differ between OVN versions
    /// (`datapaths`, then `datapath_group`, then `ls_datapath_group`/`lr_datapath_group`).
    pub struct LoadBalancerRow in "Load_Balancer" {
        pub name: String = "name" as Str,
        pub datapaths: Vec<Uuid> = "datapaths" as Refs [optional],
        pub datapath_group: Vec<Uuid> = "datapath_group" as Refs [optional],
        pub ls_datapath_group: Vec<Uuid> = "ls_datapath_group" as Refs [optional],
        pub lr_datapath_group: Vec<Uuid> = "lr_datapath_group" as Refs [optional],
    }
}

crate::ovn_table! {
    /// A Logical_DP_Group row (OVN >= 21.09): a set of datapaths shared by load balancers.
    pub struct LogicalDpGroup in "Logical_DP_Group" {
        pub datapaths: Vec<Uuid> = "datapaths" as Refs,
    }
}

/// A Load_Balancer row: its name and the datapaths of the switches and routers it is applied to
/// (already resolved through `ls_datapath_group`/`datapath_group`/`lr_datapath_group`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancer {
    pub uuid: Uuid,
    pub name: String,
    pub datapaths: BTreeSet<Uuid>,
}

/// Ports of an index entry, by logical port name, then uuid.
type PortSet = BTreeSet<(String, Uuid)>;

/// The ports of a datapath, as [`PortSet`], each with its row's stamp
/// ([`SbModel::port_stamps_on_datapath`]).
type StampedPortSet = BTreeMap<(String, Uuid), u64>;

/// A fresh stamp for a row as upserted: unique in the process (not only in one model, so a
/// stamp read from one model is never mistaken for a row of another, a clone's included).
fn next_row_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn port_key(port: &PortBinding) -> (String, Uuid) {
    (port.logical_port.clone(), port.uuid.clone())
}

/// Something a computation over the model can read, for change tracking: each index lookup a
/// driver makes is one of these, and the model stamps it with a new generation whenever a row
/// that is (or was) in it changes. A driver that remembers the generations of what it read can
/// tell, per local port, whether its exposures may have changed without recomputing them
/// (issue 17: a busy gateway recomputes only what an event touched).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ModelKey {
    /// [`SbModel::ports_on_datapath`].
    Ports(Uuid),
    /// [`SbModel::port_named`], and the content of the port of that name.
    Named(String),
    /// [`SbModel::nat_ports_resident_on`].
    ResidentNat(String),
    /// [`SbModel::localnets_on_datapath`].
    Localnets(Uuid),
    /// [`SbModel::lb_vip_ports_on_datapath`].
    LbVips(Uuid),
    /// [`SbModel::load_balancers_named`].
    LoadBalancers(String),
}

/// Lookups of a model that record each key they read with its generation then: one root's
/// computation in a per-root cache (the SB BGP, EVPN and stretched L2 drivers'), which is
/// computed again only when one of those generations moved ([`ReadSet`]).
#[cfg(any(feature = "sb_bgp", feature = "evpn", feature = "stretched_l2"))]
pub(crate) struct RecordedLookups<'a> {
    model: &'a SbModel,
    read: Vec<(ModelKey, u64)>,
}

#[cfg(any(feature = "sb_bgp", feature = "evpn", feature = "stretched_l2"))]
impl<'a> RecordedLookups<'a> {
    pub(crate) fn new(model: &'a SbModel) -> Self {
        Self {
            model,
            read: Vec::new(),
        }
    }

    /// The model, for what needs no recording (or is recorded with [`Self::read`]).
    #[cfg_attr(not(any(feature = "sb_bgp", feature = "evpn")), allow(dead_code))]
    pub(crate) fn model(&self) -> &'a SbModel {
        self.model
    }

    /// Record a lookup of `key` made directly on the model.
    pub(crate) fn read(&mut self, key: ModelKey) {
        let generation = self.model.generation(&key);
        self.read.push((key, generation));
    }

    pub(crate) fn port_named(&mut self, name: &str) -> Option<&'a PortBinding> {
        self.read(ModelKey::Named(name.to_owned()));
        self.model.port_named(name)
    }

    /// Stamped whenever a port of the datapath enters, changes or leaves.
    pub(crate) fn ports_on_datapath(&mut self, datapath: &str) -> Vec<&'a PortBinding> {
        self.read(ModelKey::Ports(datapath.to_owned()));
        self.model.ports_on_datapath(datapath)
    }

    /// [`SbModel::port_stamps_on_datapath`], recorded as [`Self::ports_on_datapath`].
    #[cfg(feature = "evpn")]
    pub(crate) fn port_stamps_on_datapath(
        &mut self,
        datapath: &str,
    ) -> impl Iterator<Item = (&'a str, &'a Uuid, u64)> + use<'a> {
        self.read(ModelKey::Ports(datapath.to_owned()));
        self.model.port_stamps_on_datapath(datapath)
    }

    /// What was read, to check the result against the model later.
    pub(crate) fn finish(self) -> crate::ovn::generations::ReadSet<ModelKey> {
        crate::ovn::generations::ReadSet::new(self.model.generations(), self.read)
    }
}

/// The rows plus incremental indexes.
#[derive(Debug, Default, Clone)]
pub struct SbModel {
    ports: HashMap<Uuid, PortBinding>,
    by_name: HashMap<String, Uuid>,
    by_chassis: HashMap<String, PortSet>,
    by_datapath: HashMap<String, StampedPortSet>,
    /// Localnet ports by datapath: decides whether a datapath is a provider network.
    localnet_by_datapath: HashMap<String, PortSet>,
    /// Localnet ports by `options:network_name`: the VLAN tags of a physnet.
    localnet_by_physnet: HashMap<String, PortSet>,
    /// Patch ports with a `nat_addresses` entry resident on a port, by that port's name.
    nat_by_resident: HashMap<String, PortSet>,
    /// Octavia OVN-provider VIP ports (`neutron:port_name = ovn-lb-vip-<lb>`) by datapath.
    lb_vip_by_datapath: HashMap<String, PortSet>,
    /// Every `chassisredirect` port (cr-lrp) in the model, wherever it is bound.
    chassisredirect: PortSet,
    /// The `chassisredirect` ports by the chassis they are bound to: the gateways hosted here,
    /// without walking every port bound here (an EVPN gateway also hosts its tenant VMs: tens
    /// of thousands, per event).
    chassisredirect_by_chassis: HashMap<String, PortSet>,
    /// Chassis name by Chassis row uuid.
    chassis: HashMap<Uuid, String>,
    load_balancers: HashMap<Uuid, LoadBalancer>,
    lb_by_name: HashMap<String, BTreeSet<Uuid>>,
    generations: Generations<ModelKey>,
}

impl SbModel {
    /// The generation of `key`: it changes whenever what a lookup of `key` returns may have.
    pub fn generation(&self, key: &ModelKey) -> u64 {
        self.generations.get(key)
    }

    /// Changes when every generation read before may have been forgotten.
    pub fn generation_epoch(&self) -> u64 {
        self.generations.epoch()
    }

    /// The generations themselves, for [`crate::ovn::generations::ReadSet`] (the SB BGP, EVPN
    /// and stretched L2 drivers').
    #[cfg_attr(
        not(any(feature = "sb_bgp", feature = "evpn", feature = "stretched_l2")),
        allow(dead_code)
    )]
    pub(crate) fn generations(&self) -> &Generations<ModelKey> {
        &self.generations
    }

    fn stamp(&mut self, key: ModelKey) {
        let live = self.ports.len() + self.load_balancers.len();
        self.generations.stamp(key, live);
    }

    /// Stamp every lookup `port` is part of (called for a row entering and leaving).
    fn stamp_port(&mut self, port: &PortBinding) {
        self.stamp(ModelKey::Ports(port.datapath.clone()));
        self.stamp(ModelKey::Named(port.logical_port.clone()));
        for resident in nat_residents(port) {
            self.stamp(ModelKey::ResidentNat(resident));
        }
        if port.port_type == "localnet" {
            self.stamp(ModelKey::Localnets(port.datapath.clone()));
        }
        if lb_vip_name(port).is_some() {
            self.stamp(ModelKey::LbVips(port.datapath.clone()));
        }
    }

    pub fn upsert_chassis(&mut self, uuid: Uuid, name: String) {
        self.chassis.insert(uuid, name);
    }

    pub fn remove_chassis(&mut self, uuid: &str) {
        self.chassis.remove(uuid);
    }

    /// Uuids of the Chassis rows named `name` (normally one).
    pub fn chassis_uuids_named(&self, name: &str) -> BTreeSet<Uuid> {
        self.chassis
            .iter()
            .filter(|(_, n)| n.as_str() == name)
            .map(|(u, _)| u.clone())
            .collect()
    }

    pub fn upsert_load_balancer(&mut self, lb: LoadBalancer) {
        self.remove_load_balancer(&lb.uuid.clone());
        index::insert(&mut self.lb_by_name, &lb.name, lb.uuid.clone());
        self.stamp(ModelKey::LoadBalancers(lb.name.clone()));
        self.load_balancers.insert(lb.uuid.clone(), lb);
    }

    pub fn remove_load_balancer(&mut self, uuid: &str) {
        if let Some(old) = self.load_balancers.remove(uuid) {
            index::remove(&mut self.lb_by_name, &old.name, &old.uuid);
            self.stamp(ModelKey::LoadBalancers(old.name));
        }
    }

    pub fn load_balancers_named(&self, name: &str) -> impl Iterator<Item = &LoadBalancer> {
        self.lb_by_name
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|u| self.load_balancers.get(u))
    }

    pub fn upsert_port(&mut self, port: PortBinding) {
        let uuid = port.uuid.clone();
        self.remove_port(&uuid);
        self.by_name.insert(port.logical_port.clone(), uuid.clone());
        if let Some(ch) = &port.chassis {
            index::insert(&mut self.by_chassis, ch, port_key(&port));
        }
        self.by_datapath
            .entry(port.datapath.clone())
            .or_default()
            .insert(port_key(&port), next_row_stamp());
        if port.port_type == "localnet" {
            index::insert(
                &mut self.localnet_by_datapath,
                &port.datapath,
                port_key(&port),
            );
            if let Some(net) = port.options.get("network_name") {
                index::insert(&mut self.localnet_by_physnet, net, port_key(&port));
            }
        }
        for resident in nat_residents(&port) {
            index::insert(&mut self.nat_by_resident, &resident, port_key(&port));
        }
        if lb_vip_name(&port).is_some() {
            index::insert(
                &mut self.lb_vip_by_datapath,
                &port.datapath,
                port_key(&port),
            );
        }
        if port.port_type == CHASSISREDIRECT {
            self.chassisredirect.insert(port_key(&port));
            if let Some(ch) = &port.chassis {
                index::insert(&mut self.chassisredirect_by_chassis, ch, port_key(&port));
            }
        }
        self.stamp_port(&port);
        self.ports.insert(uuid, port);
    }

    pub fn remove_port(&mut self, uuid: &str) {
        let Some(old) = self.ports.remove(uuid) else {
            return;
        };
        let uuid = &old.uuid;
        if self.by_name.get(&old.logical_port) == Some(uuid) {
            self.by_name.remove(&old.logical_port);
        }
        if let Some(ch) = &old.chassis {
            index::remove(&mut self.by_chassis, ch, &port_key(&old));
        }
        if let Some(set) = self.by_datapath.get_mut(&old.datapath) {
            set.remove(&port_key(&old));
            if set.is_empty() {
                self.by_datapath.remove(&old.datapath);
            }
        }
        if old.port_type == "localnet" {
            index::remove(
                &mut self.localnet_by_datapath,
                &old.datapath,
                &port_key(&old),
            );
            if let Some(net) = old.options.get("network_name") {
                index::remove(&mut self.localnet_by_physnet, net, &port_key(&old));
            }
        }
        for resident in nat_residents(&old) {
            index::remove(&mut self.nat_by_resident, &resident, &port_key(&old));
        }
        if lb_vip_name(&old).is_some() {
            index::remove(&mut self.lb_vip_by_datapath, &old.datapath, &port_key(&old));
        }
        self.chassisredirect.remove(&port_key(&old));
        if old.port_type == CHASSISREDIRECT
            && let Some(ch) = &old.chassis
        {
            index::remove(&mut self.chassisredirect_by_chassis, ch, &port_key(&old));
        }
        self.stamp_port(&old);
    }

    pub fn port(&self, uuid: &str) -> Option<&PortBinding> {
        self.ports.get(uuid)
    }

    pub fn port_named(&self, name: &str) -> Option<&PortBinding> {
        self.by_name.get(name).and_then(|u| self.ports.get(u))
    }

    /// The ports of an index entry, by logical port name then uuid (see [`PortSet`]).
    fn resolve<'a>(
        &'a self,
        keys: impl IntoIterator<Item = &'a (String, Uuid)>,
    ) -> Vec<&'a PortBinding> {
        keys.into_iter()
            .filter_map(|(_, u)| self.ports.get(u))
            .collect()
    }

    pub fn ports_on_chassis(&self, chassis_uuid: &str) -> Vec<&PortBinding> {
        self.resolve(self.port_keys_on_chassis(chassis_uuid))
    }

    /// The (name, uuid) of the ports bound to the chassis row `chassis_uuid`, in the order of
    /// [`Self::ports_on_chassis`], without looking their rows up: a cache that has the result
    /// of most of them needs only their keys (issue 17).
    pub fn port_keys_on_chassis(
        &self,
        chassis_uuid: &str,
    ) -> impl Iterator<Item = &(String, Uuid)> + '_ {
        self.by_chassis.get(chassis_uuid).into_iter().flatten()
    }

    /// The `chassisredirect` ports bound to the chassis row `chassis_uuid`, in the order of
    /// [`Self::ports_on_chassis`].
    pub fn chassisredirect_on_chassis(&self, chassis_uuid: &str) -> Vec<&PortBinding> {
        self.resolve(
            self.chassisredirect_by_chassis
                .get(chassis_uuid)
                .into_iter()
                .flatten(),
        )
    }

    pub fn ports_on_datapath(&self, datapath: &str) -> Vec<&PortBinding> {
        self.resolve(
            self.by_datapath
                .get(datapath)
                .into_iter()
                .flat_map(|s| s.keys()),
        )
    }

    /// The ports of `datapath` in the order of [`Self::ports_on_datapath`], as (name, uuid,
    /// stamp), without looking their rows up. A row's stamp is unique in the process to that
    /// version of the row (every upsert takes a fresh one), so what was computed from a row
    /// still holds for the row of the same stamp.
    pub fn port_stamps_on_datapath<'a>(
        &'a self,
        datapath: &str,
    ) -> impl Iterator<Item = (&'a str, &'a Uuid, u64)> + use<'a> {
        self.by_datapath
            .get(datapath)
            .into_iter()
            .flatten()
            .map(|((name, uuid), stamp)| (name.as_str(), uuid, *stamp))
    }

    pub fn localnets_on_datapath(&self, datapath: &str) -> Vec<&PortBinding> {
        self.resolve(
            self.localnet_by_datapath
                .get(datapath)
                .into_iter()
                .flatten(),
        )
    }

    pub fn localnets_of_physnet(&self, physnet: &str) -> Vec<&PortBinding> {
        self.resolve(self.localnet_by_physnet.get(physnet).into_iter().flatten())
    }

    pub fn nat_ports_resident_on(&self, port_name: &str) -> Vec<&PortBinding> {
        self.resolve(self.nat_by_resident.get(port_name).into_iter().flatten())
    }

    pub fn lb_vip_ports_on_datapath(&self, datapath: &str) -> Vec<&PortBinding> {
        self.resolve(self.lb_vip_by_datapath.get(datapath).into_iter().flatten())
    }

    /// Every `chassisredirect` port (cr-lrp) in the model, wherever it is bound.
    pub fn chassisredirect_ports(&self) -> Vec<&PortBinding> {
        self.resolve(&self.chassisredirect)
    }

    /// The `chassisredirect` ports named `name` (one, unless names are reused).
    #[cfg(feature = "stretched_l2")]
    pub(crate) fn chassisredirect_named(&self, name: &str) -> Vec<&PortBinding> {
        let from = (name.to_owned(), Uuid::new());
        self.resolve(
            self.chassisredirect
                .range(from..)
                .take_while(|(n, _)| n == name),
        )
    }

    pub fn chassis_name(&self, uuid: &str) -> Option<&str> {
        self.chassis.get(uuid).map(String::as_str)
    }

    /// Every port binding of the model, for `explain` (a scan, on demand only).
    pub fn all_ports(&self) -> Vec<&PortBinding> {
        let mut v: Vec<&PortBinding> = self.ports.values().collect();
        v.sort_by(|a, b| a.logical_port.cmp(&b.logical_port));
        v
    }

    pub fn port_count(&self) -> usize {
        self.ports.len()
    }
}

/// The load-balancer name of an Octavia VIP port (`neutron:port_name = ovn-lb-vip-<lb>`).
pub fn lb_vip_name(port: &PortBinding) -> Option<&str> {
    crate::ovn::neutron::lb_vip_name(
        port.external_ids
            .get(crate::ovn::neutron::keys::PORT_NAME)
            .map(String::as_str),
    )
}

/// The IPs of a VM-like port (type `""` or `virtual`): those of `mac[0]`, or `neutron:cidrs`
/// when `mac[0]` is `unknown` (a port without port security, whose addresses OVN does not
/// know). `Ok(None)`: the port has no IP; `Err`: a malformed address, with the reason.
pub fn vm_port_ips(port: &PortBinding) -> Result<Option<Vec<ipnet::IpNet>>, String> {
    if let Some(a) = parse_port_addresses(&port.mac)? {
        return Ok(Some(a.ips));
    }
    let unknown = port.mac.first().is_some_and(|m| m.trim() == "unknown");
    let cidrs = port
        .external_ids
        .get(crate::ovn::neutron::keys::CIDRS)
        .filter(|_| unknown);
    match cidrs {
        Some(c) => Ok(Some(parse_neutron_cidrs(c)?).filter(|ips| !ips.is_empty())),
        None => Ok(None),
    }
}

/// Names of the ports the `nat_addresses` entries of `port` are resident on, read from their
/// residence clauses alone: a router's entry lists its thousands of centralized FIPs and this
/// runs four times per update of its row. An entry with a bad IP is indexed all the same, so
/// the computation reports it.
fn nat_residents(port: &PortBinding) -> BTreeSet<String> {
    port.nat_addresses
        .iter()
        .filter_map(|e| nat_entry_resident(e))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_updates_and_deletes() {
        let mut m = SbModel::default();
        let mut p = PortBinding {
            uuid: "u1".into(),
            logical_port: "vm1".into(),
            chassis: Some("ch".into()),
            datapath: "dp1".into(),
            ..Default::default()
        };
        m.upsert_port(p.clone());
        assert_eq!(m.ports_on_chassis("ch").len(), 1);
        p.chassis = None;
        p.datapath = "dp2".into();
        m.upsert_port(p);
        assert!(m.ports_on_chassis("ch").is_empty());
        assert!(m.ports_on_datapath("dp1").is_empty());
        assert_eq!(m.ports_on_datapath("dp2").len(), 1);
        m.remove_port("u1");
        assert!(m.port_named("vm1").is_none());
        assert!(m.ports_on_datapath("dp2").is_empty());
    }

    /// The gateways of a chassis are its `chassisredirect` ports, in the order of its ports,
    /// whichever way a row moves (bound elsewhere, retyped, deleted).
    #[test]
    fn gateways_on_a_chassis_are_its_chassisredirect_ports() {
        let mut m = SbModel::default();
        let port = |uuid: &str, name: &str, chassis: Option<&str>, kind: &str| PortBinding {
            uuid: uuid.into(),
            logical_port: name.into(),
            chassis: chassis.map(Into::into),
            datapath: "dp".into(),
            port_type: kind.into(),
            ..Default::default()
        };
        let gateways = |m: &SbModel, ch: &str| -> Vec<String> {
            m.chassisredirect_on_chassis(ch)
                .iter()
                .map(|p| p.logical_port.clone())
                .collect()
        };
        let filtered = |m: &SbModel, ch: &str| -> Vec<String> {
            m.ports_on_chassis(ch)
                .iter()
                .filter(|p| p.port_type == CHASSISREDIRECT)
                .map(|p| p.logical_port.clone())
                .collect()
        };
        m.upsert_port(port("u3", "cr-lrp-b", Some("ch"), CHASSISREDIRECT));
        m.upsert_port(port("u1", "vm", Some("ch"), ""));
        m.upsert_port(port("u2", "cr-lrp-a", Some("ch"), CHASSISREDIRECT));
        m.upsert_port(port("u4", "cr-lrp-c", Some("other"), CHASSISREDIRECT));
        assert_eq!(gateways(&m, "ch"), ["cr-lrp-a", "cr-lrp-b"]);
        assert_eq!(gateways(&m, "ch"), filtered(&m, "ch"));
        // Bound elsewhere, retyped, unbound, deleted: each leaves the chassis's gateways.
        m.upsert_port(port("u2", "cr-lrp-a", Some("other"), CHASSISREDIRECT));
        assert_eq!(gateways(&m, "ch"), ["cr-lrp-b"]);
        assert_eq!(gateways(&m, "other"), ["cr-lrp-a", "cr-lrp-c"]);
        m.upsert_port(port("u3", "cr-lrp-b", Some("ch"), "patch"));
        assert!(gateways(&m, "ch").is_empty());
        m.upsert_port(port("u4", "cr-lrp-c", None, CHASSISREDIRECT));
        m.remove_port("u2");
        assert!(gateways(&m, "other").is_empty());
        assert_eq!(gateways(&m, "other"), filtered(&m, "other"));
        assert!(m.chassisredirect_by_chassis.is_empty());
    }

    /// A row keeps its stamp until it is upserted again (even unchanged); the other rows keep
    /// theirs; a clone and its original stamp their next upserts apart.
    #[test]
    fn a_row_keeps_its_stamp_until_it_is_upserted_again() {
        let row = |uuid: &str, name: &str| PortBinding {
            uuid: uuid.into(),
            logical_port: name.into(),
            datapath: "dp".into(),
            ..Default::default()
        };
        let stamps = |m: &SbModel| -> Vec<(String, Uuid, u64)> {
            m.port_stamps_on_datapath("dp")
                .map(|(name, uuid, stamp)| (name.to_owned(), uuid.clone(), stamp))
                .collect()
        };
        let mut m = SbModel::default();
        m.upsert_port(row("u2", "vm2"));
        m.upsert_port(row("u1", "vm1"));
        let first = stamps(&m);
        let names: Vec<&str> = first.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["vm1", "vm2"], "the order of ports_on_datapath");
        m.upsert_port(row("u1", "vm1"));
        let second = stamps(&m);
        assert_ne!(first[0].2, second[0].2);
        assert_eq!(first[1], second[1]);
        let mut copy = m.clone();
        copy.upsert_port(row("u2", "vm2"));
        m.upsert_port(row("u2", "vm2"));
        assert_ne!(stamps(&copy)[1].2, stamps(&m)[1].2);
    }
}
