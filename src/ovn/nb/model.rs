//! The NB drivers' typed view of the Northbound rows they use, with the indexes their queries
//! need.
//!
//! Rows enter and leave one at a time (replica change events), and every index is updated in
//! time proportional to the row itself (a switch's or router's own reference sets), never to the
//! table: the exposures of this chassis are computed from what is local (ports listing this
//! host, gateways hosted here, the routers and switches behind them), not from scans of 100k
//! ports or 10k routers.
//!
//! Relations are taken from OVN's own references where it has them (`Logical_Switch.ports`,
//! `Logical_Router.ports`, `Logical_Router.nat`, `NAT.gateway_port`) and from Neutron's keys
//! where OVN has none (the router of a router-interface port, of a load balancer, the network
//! of a floating IP).

use std::collections::{BTreeMap, BTreeSet};

use crate::hash::{HashMap, HashSet};
use crate::ovn::generations::{Generations, ReadSet};
use crate::ovn::index;

use crate::ovn::neutron::{self, keys};

/// OVSDB row uuid as text.
pub type Uuid = String;

/// `Logical_Switch_Port.type` of a provider network's port into the physical network.
pub const LOCALNET: &str = "localnet";
/// `Logical_Switch_Port.type` of a port peered with a router port.
pub const ROUTER: &str = "router";
/// `Logical_Switch_Port.type` of a virtual port (Octavia amphora VIP, allowed-address-pair).
pub const VIRTUAL: &str = "virtual";
/// Prefix of the name Neutron gives a port-forwarding load balancer.
pub const PF_LB_PREFIX: &str = "pf-floatingip-";
/// `NAT.type` of a floating IP.
pub const DNAT_AND_SNAT: &str = "dnat_and_snat";
/// `NAT.type` of a router's source NAT.
pub const SNAT: &str = "snat";

crate::ovn_table! {
    /// The Logical_Switch_Port columns the NB drivers read.
    pub struct Lsp in "Logical_Switch_Port" {
        pub name: String = "name" as Str,
        pub port_type: String = "type" as Str,
        /// `"<mac> <ip> ..."` entries (Neutron writes one), `unknown`, `router`.
        pub addresses: Vec<String> = "addresses" as Strs,
        /// `requested-chassis` (hostnames), `network_name` (localnet physnet).
        pub options: BTreeMap<String, String> = "options" as StrMap,
        /// `None` when the column is empty (never bound, or an older OVN).
        pub up: Option<bool> = "up" as OptBool,
        /// A localnet port's VLAN, as northd sets it from `tag_request`.
        pub tag: Option<i64> = "tag" as OptInt,
        pub tag_request: Option<i64> = "tag_request" as OptInt,
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

crate::ovn_table! {
    /// A Logical_Switch: its name (`neutron-<network id>`), its ports, and its `external_ids`
    /// (networking-bgpvpn's `neutron_bgpvpn:*` EVPN settings of a provider network).
    pub struct LogicalSwitch in "Logical_Switch" {
        pub name: String = "name" as Str,
        pub ports: Vec<Uuid> = "ports" as Refs,
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

crate::ovn_table! {
    /// A DHCP_Options row: Neutron writes one per subnet (`external_ids:subnet_id`,
    /// `neutron:network_id`) with the subnet's `cidr` and, when DHCP is on, its `options`
    /// (`router`, `dns_server`, `dhcpv6_stateless`); the NB `vrf` method takes the gateway
    /// addresses and IPv6 router advertisements of an EVPN provider network from them.
    pub struct DhcpOptions in "DHCP_Options" {
        pub cidr: String = "cidr" as Str,
        pub options: BTreeMap<String, String> = "options" as StrMap,
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

crate::ovn_table! {
    /// A Logical_Router: its name (`neutron-<router id>`), ports and NAT rules.
    pub struct LogicalRouter in "Logical_Router" {
        pub name: String = "name" as Str,
        pub ports: Vec<Uuid> = "ports" as Refs,
        pub nat: Vec<Uuid> = "nat" as Refs,
    }
}

crate::ovn_table! {
    /// A Logical_Router_Port. `status` (OVN >= 23.09) holds `hosting-chassis`, the system-id of
    /// the chassis hosting a gateway port; older NB schemas have no such column.
    pub struct Lrp in "Logical_Router_Port" {
        pub name: String = "name" as Str,
        pub mac: String = "mac" as Str,
        pub networks: Vec<String> = "networks" as Strs,
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
        pub status: BTreeMap<String, String> = "status" as StrMap [optional],
    }
}

crate::ovn_table! {
    /// A NAT rule. `gateway_port` is absent from NB schemas before 7.0 (OVN 22.12).
    pub struct Nat in "NAT" {
        pub nat_type: String = "type" as Str,
        pub external_ip: String = "external_ip" as Str,
        pub external_mac: String = "external_mac" as Str,
        pub logical_ip: String = "logical_ip" as Str,
        pub logical_port: String = "logical_port" as Str,
        pub gateway_port: Option<Uuid> = "gateway_port" as OptRef [optional],
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

crate::ovn_table! {
    /// A Load_Balancer: Octavia's (`lr_ref`, `neutron:vip*`) and Neutron's port forwardings
    /// (`pf-floatingip-*`, `neutron:router_name`).
    pub struct LoadBalancer in "Load_Balancer" {
        pub name: String = "name" as Str,
        pub vips: BTreeMap<String, String> = "vips" as StrMap,
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

crate::ovn_table! {
    /// NB_Global: `external_ids:neutron:fip-distributed`.
    pub struct NbGlobal in "NB_Global" {
        pub external_ids: BTreeMap<String, String> = "external_ids" as StrMap,
    }
}

impl Lsp {
    fn ext(&self, key: &str) -> Option<&str> {
        self.external_ids.get(key).map(String::as_str)
    }

    /// The hostnames this port may be bound to: every `requested-chassis` entry, or a virtual
    /// port's `neutron:host_id` (the index key of [`NbModel::ports_listing_host`]).
    pub fn candidate_hosts(&self) -> BTreeSet<String> {
        if self.port_type == VIRTUAL {
            return self
                .ext(keys::HOST_ID)
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(|h| BTreeSet::from([h.to_owned()]))
                .unwrap_or_default();
        }
        neutron::requested_chassis(
            self.options
                .get(keys::REQUESTED_CHASSIS)
                .map(String::as_str),
        )
        .into_iter()
        .map(str::to_owned)
        .collect()
    }

    /// The hostname this port is bound to, as upstream's `get_port_chassis`.
    pub fn bound_chassis(&self, hostname: &str) -> Option<&str> {
        neutron::bound_chassis(
            &self.port_type,
            self.options
                .get(keys::REQUESTED_CHASSIS)
                .map(String::as_str),
            self.ext(keys::HOST_ID),
            hostname,
        )
    }

    /// The router a router-interface port attaches its subnet to (`neutron:device_id` with
    /// `neutron:device_owner = network:router_interface`).
    pub fn router_interface_of(&self) -> Option<&str> {
        if self.port_type != ROUTER {
            return None;
        }
        neutron::router_interface_of(self.ext(keys::DEVICE_OWNER), self.ext(keys::DEVICE_ID))
    }

    /// A localnet port's physnet (`options:network_name`).
    pub fn physnet(&self) -> Option<&str> {
        if self.port_type != LOCALNET {
            return None;
        }
        self.options
            .get("network_name")
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
    }

    /// A localnet port's VLAN: `tag` (northd's copy), else `tag_request`.
    pub fn vlan_tag(&self) -> Option<i64> {
        self.tag.or(self.tag_request)
    }
}

impl LogicalSwitch {
    /// Its networking-bgpvpn settings (`neutron_bgpvpn:*`), each key read and checked.
    pub fn bgpvpn(&self) -> neutron::Bgpvpn {
        neutron::bgpvpn(|k| self.external_ids.get(k).map(String::as_str))
    }

    /// Whether it is an L3 EVPN network with a usable VNI: what the `vrf` method serves.
    pub fn is_l3_evpn(&self) -> bool {
        let b = self.bgpvpn();
        b.vpn_type == Some(neutron::BgpvpnType::L3) && b.vni.is_some()
    }

    /// The Neutron network id of its name (`neutron-<id>`).
    pub fn network_id(&self) -> Option<&str> {
        neutron::network_id(Some(&self.name))
    }
}

impl DhcpOptions {
    /// The Neutron network the row belongs to (`external_ids:neutron:network_id`).
    pub fn network_id(&self) -> Option<&str> {
        self.external_ids
            .get(keys::NETWORK_ID)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// A port's own options (`external_ids:port_id`, Neutron's `extra_dhcp_opts`) rather than
    /// its subnet's.
    pub fn is_port_specific(&self) -> bool {
        self.external_ids.contains_key(keys::DHCP_PORT_ID)
    }
}

impl Lrp {
    /// `status:hosting-chassis`: the system-id of the chassis hosting this gateway port.
    pub fn hosting_chassis(&self) -> Option<&str> {
        neutron::hosting_chassis(self.status.get(keys::HOSTING_CHASSIS).map(String::as_str))
    }
}

impl LoadBalancer {
    /// The router id this load balancer belongs to: Octavia's `lr_ref`, or a port forwarding's
    /// `neutron:router_name` (both `neutron-<id>`).
    pub fn router_id(&self) -> Option<&str> {
        let key = if self.name.starts_with(PF_LB_PREFIX) {
            keys::ROUTER_NAME
        } else {
            keys::LB_LR_REF
        };
        neutron::router_id(self.external_ids.get(key).map(String::as_str))
    }

    /// Octavia's `neutron:vip_port_id`.
    pub fn vip_port_id(&self) -> Option<&str> {
        self.external_ids
            .get(keys::LB_VIP_PORT_ID)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}

fn index_insert(index: &mut HashMap<String, HashSet<Uuid>>, key: &str, uuid: &str) {
    index
        .entry(key.to_owned())
        .or_default()
        .insert(uuid.to_owned());
}

/// The uuids under `key` in `index`, copied out (to stamp them while the model changes).
fn members(index: &HashMap<String, HashSet<Uuid>>, key: &str) -> Vec<Uuid> {
    index.get(key).into_iter().flatten().cloned().collect()
}

/// Rows by (name, uuid): an index that is listed in that order needs no sort
/// ([`crate::ovn::index`]).
type NamedSet = BTreeSet<(String, Uuid)>;

fn index_remove(index: &mut HashMap<String, HashSet<Uuid>>, key: &str, uuid: &str) {
    if let Some(set) = index.get_mut(key) {
        set.remove(uuid);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

/// Deterministic order: exposures and their "first producer wins" rule must not depend on hash
/// order.
fn sorted<'a, T>(
    rows: &'a HashMap<Uuid, T>,
    uuids: Option<&'a HashSet<Uuid>>,
    name: impl Fn(&T) -> &str,
) -> Vec<&'a T> {
    let mut v: Vec<(&str, &Uuid, &T)> = uuids
        .into_iter()
        .flatten()
        .filter_map(|u| rows.get(u).map(|r| (name(r), u, r)))
        .collect();
    v.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(b.1)));
    v.into_iter().map(|(_, _, r)| r).collect()
}

/// Something a computation over the model can read, for change tracking (issue 17; see
/// [`crate::ovn::generations`]): the model stamps a key whenever what its lookup returns, or
/// the content of a row it returns, may have changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NbKey {
    /// [`NbModel::lsp`]: the port row `uuid`.
    Lsp(Uuid),
    /// [`NbModel::lsp_named`].
    LspNamed(String),
    /// [`NbModel::router_interfaces`] of a router id.
    RouterInterfaces(String),
    /// Which switch [`NbModel::switch_of_port`] answers for a port uuid (not its content).
    SwitchOfPort(Uuid),
    /// Which switch [`NbModel::switch_named`] answers for a name (not its content).
    SwitchNamed(String),
    /// [`NbModel::localnets_on_switch`].
    LocalnetsOnSwitch(Uuid),
    /// [`NbModel::ports_on_switch`].
    PortsOnSwitch(Uuid),
    /// [`NbModel::router_of_lrp`] (and so [`NbModel::router_id_of_lrp`]): which router and
    /// its name.
    RouterOfLrp(Uuid),
    /// [`NbModel::nats_of_router`].
    NatsOfRouter(Uuid),
    /// [`NbModel::nats_of_gateway`].
    NatsOfGateway(Uuid),
    /// [`NbModel::nats_of_port`].
    NatsOfPort(String),
    /// [`NbModel::lrp`]: the router port row `uuid`.
    Lrp(Uuid),
    /// [`NbModel::lbs_of_router`].
    LbsOfRouter(String),
    /// [`NbModel::fip_ports_listing_host`], and the content of those ports.
    FipPortsListingHost(String),
    /// [`NbModel::localnets`] and [`NbModel::localnets_of_physnet`] (every physnet: a
    /// localnet port is rare and seldom changes), and the content of those ports.
    Localnets,
    /// [`NbModel::lrp_named`].
    LrpNamed(String),
    /// [`NbModel::lrps_hosted_on`].
    LrpsHostedOn(String),
    /// The content of the switch row `uuid` (not which ports list it).
    SwitchRow(Uuid),
}

/// What the lookups about one switch answered before a change of it.
struct SwitchTracking {
    /// (name, the switch that name resolved to).
    names: Vec<(String, Option<Uuid>)>,
    /// (port, the switch it resolved to).
    ports: Vec<(Uuid, Option<Uuid>)>,
    localnets: Option<HashSet<Uuid>>,
}

/// The rows plus incremental indexes.
#[derive(Debug, Default, Clone)]
pub struct NbModel {
    lsps: HashMap<Uuid, Lsp>,
    lsp_by_name: HashMap<String, Uuid>,
    /// Ports by every hostname in their `requested-chassis` (or virtual `neutron:host_id`),
    /// in (name, uuid) order: listed per event, in the order the exposures are laid out in.
    lsp_by_host: HashMap<String, NamedSet>,
    /// The same, of the ports with a FIP (`neutron:port_fip`): the monitor conditions name
    /// their NAT rules, and a VM without one binding here leaves the conditions as they are.
    fip_lsp_by_host: HashMap<String, NamedSet>,
    /// Localnet ports by physnet.
    localnet_by_physnet: HashMap<String, HashSet<Uuid>>,
    /// Router-interface ports by router id (`neutron:device_id`).
    rif_by_router: HashMap<String, HashSet<Uuid>>,

    switches: HashMap<Uuid, LogicalSwitch>,
    switch_by_name: HashMap<String, Uuid>,
    /// The switch listing each port in its `ports`.
    switch_of_port: HashMap<Uuid, Uuid>,
    /// Every switch listing each port (normally one; a port listed by two, which OVN refuses,
    /// changes the ports of both when it changes).
    switches_of_port: HashMap<Uuid, HashSet<Uuid>>,
    /// Localnet ports by switch (kept from both sides: the switch's `ports`, the port's type).
    localnet_by_switch: HashMap<Uuid, HashSet<Uuid>>,

    routers: HashMap<Uuid, LogicalRouter>,
    router_by_id: HashMap<String, Uuid>,
    router_of_lrp: HashMap<Uuid, Uuid>,
    /// The routers listing each NAT rule in their `nat` (normally one; every one of them is
    /// told when the rule changes).
    routers_of_nat: HashMap<Uuid, HashSet<Uuid>>,

    lrps: HashMap<Uuid, Lrp>,
    lrp_by_name: HashMap<String, Uuid>,
    lrp_by_hosting: HashMap<String, HashSet<Uuid>>,

    nats: HashMap<Uuid, Nat>,
    nat_by_logical_port: HashMap<String, HashSet<Uuid>>,
    nat_by_gateway_port: HashMap<Uuid, HashSet<Uuid>>,

    lbs: HashMap<Uuid, LoadBalancer>,
    lb_by_router: HashMap<String, HashSet<Uuid>>,

    nb_global: BTreeMap<Uuid, NbGlobal>,

    dhcp_options: HashMap<Uuid, DhcpOptions>,
    /// DHCP_Options rows by Neutron network id (`neutron:network_id`).
    dhcp_by_network: HashMap<String, HashSet<Uuid>>,

    generations: Generations<NbKey>,
}

impl NbModel {
    // ---- Change tracking

    /// The generation of `key`: it changes whenever what a lookup of `key` returns may have.
    pub fn generation(&self, key: &NbKey) -> u64 {
        self.generations.get(key)
    }

    /// The generations themselves, for [`crate::ovn::generations::ReadSet`] (the nb_bgp driver's).
    pub(crate) fn generations(&self) -> &Generations<NbKey> {
        &self.generations
    }

    fn stamp(&mut self, key: NbKey) {
        let live = self.lsps.len() + self.nats.len() + self.lrps.len() + self.lbs.len();
        self.generations.stamp(key, live);
    }

    /// Stamp every lookup port `lsp` is part of (called for a row entering and leaving).
    fn stamp_lsp(&mut self, lsp: &Lsp) {
        self.stamp(NbKey::Lsp(lsp.uuid.clone()));
        self.stamp(NbKey::LspNamed(lsp.name.clone()));
        if lsp.external_ids.contains_key(keys::PORT_FIP) {
            for host in lsp.candidate_hosts() {
                self.stamp(NbKey::FipPortsListingHost(host));
            }
        }
        if lsp.physnet().is_some() {
            self.stamp(NbKey::Localnets);
        }
        if let Some(router) = lsp.router_interface_of() {
            self.stamp(NbKey::RouterInterfaces(router.to_owned()));
        }
        for ls in members(&self.switches_of_port, &lsp.uuid) {
            if lsp.port_type == LOCALNET {
                self.stamp(NbKey::LocalnetsOnSwitch(ls.clone()));
            }
            self.stamp(NbKey::PortsOnSwitch(ls));
        }
    }

    /// Stamp every lookup NAT rule `nat` is part of.
    fn stamp_nat(&mut self, nat: &Nat) {
        if !nat.logical_port.is_empty() {
            self.stamp(NbKey::NatsOfPort(nat.logical_port.clone()));
        }
        if let Some(gw) = &nat.gateway_port {
            self.stamp(NbKey::NatsOfGateway(gw.clone()));
        }
        for router in members(&self.routers_of_nat, &nat.uuid) {
            self.stamp(NbKey::NatsOfRouter(router));
        }
    }

    // ---- Logical_Switch_Port

    pub fn upsert_lsp(&mut self, lsp: Lsp) {
        let uuid = lsp.uuid.clone();
        self.remove_lsp(&uuid);
        self.lsp_by_name.insert(lsp.name.clone(), uuid.clone());
        let fip = lsp.external_ids.contains_key(keys::PORT_FIP);
        for host in lsp.candidate_hosts() {
            let key = (lsp.name.clone(), uuid.clone());
            if fip {
                index::insert(&mut self.fip_lsp_by_host, &host, key.clone());
            }
            index::insert(&mut self.lsp_by_host, &host, key);
        }
        if let Some(physnet) = lsp.physnet() {
            index_insert(&mut self.localnet_by_physnet, physnet, &uuid);
        }
        if let Some(ls) = self
            .switch_of_port
            .get(&uuid)
            .filter(|_| lsp.port_type == LOCALNET)
        {
            index_insert(&mut self.localnet_by_switch, &ls.clone(), &uuid);
        }
        if let Some(router) = lsp.router_interface_of() {
            index_insert(&mut self.rif_by_router, router, &uuid);
        }
        self.stamp_lsp(&lsp);
        self.lsps.insert(uuid, lsp);
    }

    pub fn remove_lsp(&mut self, uuid: &str) {
        let Some(old) = self.lsps.remove(uuid) else {
            return;
        };
        if self.lsp_by_name.get(&old.name).is_some_and(|u| u == uuid) {
            self.lsp_by_name.remove(&old.name);
        }
        let key = (old.name.clone(), uuid.to_owned());
        for host in old.candidate_hosts() {
            index::remove(&mut self.lsp_by_host, &host, &key);
            index::remove(&mut self.fip_lsp_by_host, &host, &key);
        }
        if let Some(physnet) = old.physnet() {
            index_remove(&mut self.localnet_by_physnet, physnet, uuid);
        }
        if let Some(ls) = self.switch_of_port.get(uuid).cloned() {
            index_remove(&mut self.localnet_by_switch, &ls, uuid);
        }
        if let Some(router) = old.router_interface_of() {
            index_remove(&mut self.rif_by_router, router, uuid);
        }
        self.stamp_lsp(&old);
    }

    pub fn lsp(&self, uuid: &str) -> Option<&Lsp> {
        self.lsps.get(uuid)
    }

    pub fn lsp_named(&self, name: &str) -> Option<&Lsp> {
        self.lsp_by_name.get(name).and_then(|u| self.lsps.get(u))
    }

    /// Ports whose `requested-chassis` lists `hostname` (or virtual ports whose
    /// `neutron:host_id` is it); whether they are bound here is [`Lsp::bound_chassis`]'s answer.
    pub fn ports_listing_host(&self, hostname: &str) -> Vec<&Lsp> {
        self.resolve_named(self.port_keys_listing_host(hostname))
    }

    /// The (name, uuid) of [`Self::ports_listing_host`], in its order, without looking their
    /// rows up: a cache that has the result of most of them needs only their keys (issue 17).
    pub fn port_keys_listing_host(
        &self,
        hostname: &str,
    ) -> impl Iterator<Item = &(String, Uuid)> + '_ {
        self.lsp_by_host.get(hostname).into_iter().flatten()
    }

    /// [`Self::ports_listing_host`] with a FIP (`neutron:port_fip`).
    pub fn fip_ports_listing_host(&self, hostname: &str) -> Vec<&Lsp> {
        self.resolve_named(self.fip_lsp_by_host.get(hostname).into_iter().flatten())
    }

    fn resolve_named<'a>(&'a self, keys: impl Iterator<Item = &'a (String, Uuid)>) -> Vec<&'a Lsp> {
        keys.filter_map(|(_, u)| self.lsps.get(u)).collect()
    }

    pub fn localnets_of_physnet(&self, physnet: &str) -> Vec<&Lsp> {
        sorted(&self.lsps, self.localnet_by_physnet.get(physnet), |p| {
            &p.name
        })
    }

    /// Every localnet port in the model.
    pub fn localnets(&self) -> Vec<&Lsp> {
        let mut v: Vec<&Lsp> = self
            .localnet_by_physnet
            .values()
            .flatten()
            .filter_map(|u| self.lsps.get(u))
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
        v
    }

    /// Router-interface ports of router `router_id`.
    pub fn router_interfaces(&self, router_id: &str) -> Vec<&Lsp> {
        sorted(&self.lsps, self.rif_by_router.get(router_id), |p| &p.name)
    }

    // ---- Logical_Switch

    pub fn upsert_switch(&mut self, ls: LogicalSwitch) {
        let uuid = ls.uuid.clone();
        let before = self.switch_tracking(&uuid, Some(&ls));
        self.unlink_switch(&uuid);
        self.switch_by_name.insert(ls.name.clone(), uuid.clone());
        let mut taken_from = Vec::new();
        for port in &ls.ports {
            index_insert(&mut self.switches_of_port, port, &uuid);
            if let Some(previous) = self.switch_of_port.insert(port.clone(), uuid.clone())
                && previous != uuid
                && self
                    .localnet_by_switch
                    .get(&previous)
                    .is_some_and(|s| s.contains(port))
            {
                // A port listed by two switches (OVN refuses it; a transient or hostile NB
                // may not) belongs to the last: its localnet leaves the other's index too.
                index_remove(&mut self.localnet_by_switch, &previous, port);
                taken_from.push(previous);
            }
            if self.lsps.get(port).is_some_and(|p| p.port_type == LOCALNET) {
                index_insert(&mut self.localnet_by_switch, &uuid, port);
            }
        }
        self.switches.insert(uuid.clone(), ls);
        for previous in taken_from {
            self.stamp(NbKey::LocalnetsOnSwitch(previous));
        }
        self.stamp_switch_tracking(&uuid, before);
    }

    pub fn remove_switch(&mut self, uuid: &str) {
        if !self.switches.contains_key(uuid) {
            return;
        }
        let before = self.switch_tracking(uuid, None);
        self.unlink_switch(uuid);
        self.stamp_switch_tracking(uuid, before);
    }

    /// What the lookups about switch `uuid` answer before it becomes `new` (or goes): which
    /// switch its old and new names and ports resolve to, and its localnet ports. Only what a
    /// change moves is stamped after: a switch of thousands of ports gains one without
    /// invalidating every computation that read one of them.
    fn switch_tracking(&self, uuid: &str, new: Option<&LogicalSwitch>) -> SwitchTracking {
        let old = self.switches.get(uuid);
        let mut names: Vec<String> = old
            .iter()
            .chain(new.iter())
            .map(|ls| ls.name.clone())
            .collect();
        names.dedup();
        let mut seen: HashSet<&Uuid> = HashSet::default();
        let ports = old
            .iter()
            .chain(new.iter())
            .flat_map(|ls| ls.ports.iter())
            .filter(|p| seen.insert(p))
            .map(|p| (p.clone(), self.switch_of_port.get(p).cloned()))
            .collect();
        SwitchTracking {
            names: names
                .into_iter()
                .map(|n| {
                    let owner = self.switch_by_name.get(&n).cloned();
                    (n, owner)
                })
                .collect(),
            ports,
            localnets: self.localnet_by_switch.get(uuid).cloned(),
        }
    }

    fn stamp_switch_tracking(&mut self, uuid: &str, before: SwitchTracking) {
        for (name, owner) in before.names {
            if self.switch_by_name.get(&name) != owner.as_ref() {
                self.stamp(NbKey::SwitchNamed(name));
            }
        }
        for (port, owner) in before.ports {
            if self.switch_of_port.get(&port) != owner.as_ref() {
                self.stamp(NbKey::SwitchOfPort(port));
            }
        }
        if self.localnet_by_switch.get(uuid) != before.localnets.as_ref() {
            self.stamp(NbKey::LocalnetsOnSwitch(uuid.to_owned()));
        }
        self.stamp(NbKey::PortsOnSwitch(uuid.to_owned()));
        self.stamp(NbKey::SwitchRow(uuid.to_owned()));
    }

    /// Take switch `uuid` out of the rows and indexes, without stamping.
    fn unlink_switch(&mut self, uuid: &str) {
        let Some(old) = self.switches.remove(uuid) else {
            return;
        };
        if self
            .switch_by_name
            .get(&old.name)
            .is_some_and(|u| u == uuid)
        {
            self.switch_by_name.remove(&old.name);
        }
        for port in &old.ports {
            if self.switch_of_port.get(port).is_some_and(|s| s == uuid) {
                self.switch_of_port.remove(port);
            }
            index_remove(&mut self.switches_of_port, port, uuid);
        }
        self.localnet_by_switch.remove(uuid);
    }

    pub fn switch(&self, uuid: &str) -> Option<&LogicalSwitch> {
        self.switches.get(uuid)
    }

    pub fn switch_named(&self, name: &str) -> Option<&LogicalSwitch> {
        self.switch_by_name
            .get(name)
            .and_then(|u| self.switches.get(u))
    }

    /// The switch whose `ports` lists port `lsp_uuid`.
    pub fn switch_of_port(&self, lsp_uuid: &str) -> Option<&LogicalSwitch> {
        self.switch_of_port
            .get(lsp_uuid)
            .and_then(|u| self.switches.get(u))
    }

    /// The localnet ports of switch `ls_uuid`.
    pub fn localnets_on_switch(&self, ls_uuid: &str) -> Vec<&Lsp> {
        sorted(&self.lsps, self.localnet_by_switch.get(ls_uuid), |p| {
            &p.name
        })
    }

    /// The ports of switch `ls_uuid` that are in the model.
    pub fn ports_on_switch(&self, ls_uuid: &str) -> Vec<&Lsp> {
        let Some(ls) = self.switches.get(ls_uuid) else {
            return Vec::new();
        };
        let mut v: Vec<&Lsp> = ls.ports.iter().filter_map(|u| self.lsps.get(u)).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
        v
    }

    // ---- Logical_Router

    pub fn upsert_router(&mut self, lr: LogicalRouter) {
        let uuid = lr.uuid.clone();
        self.remove_router(&uuid);
        if let Some(id) = neutron::router_id(Some(&lr.name)) {
            self.router_by_id.insert(id.to_owned(), uuid.clone());
        }
        for port in &lr.ports {
            self.router_of_lrp.insert(port.clone(), uuid.clone());
        }
        for nat in &lr.nat {
            index_insert(&mut self.routers_of_nat, nat, &uuid);
        }
        self.stamp_router(&lr);
        self.routers.insert(uuid, lr);
    }

    pub fn remove_router(&mut self, uuid: &str) {
        let Some(old) = self.routers.remove(uuid) else {
            return;
        };
        if let Some(id) = neutron::router_id(Some(&old.name))
            && self.router_by_id.get(id).is_some_and(|u| u == uuid)
        {
            self.router_by_id.remove(id);
        }
        for port in &old.ports {
            if self.router_of_lrp.get(port).is_some_and(|r| r == uuid) {
                self.router_of_lrp.remove(port);
            }
        }
        for nat in &old.nat {
            index_remove(&mut self.routers_of_nat, nat, uuid);
        }
        self.stamp_router(&old);
    }

    /// Stamp every lookup router `lr` is part of (its ports are few: a router's name or NAT
    /// list changes only the gateways of that router).
    fn stamp_router(&mut self, lr: &LogicalRouter) {
        for port in &lr.ports {
            self.stamp(NbKey::RouterOfLrp(port.clone()));
        }
        self.stamp(NbKey::NatsOfRouter(lr.uuid.clone()));
    }

    pub fn router(&self, uuid: &str) -> Option<&LogicalRouter> {
        self.routers.get(uuid)
    }

    /// The router named `neutron-<router_id>`.
    pub fn router_by_id(&self, router_id: &str) -> Option<&LogicalRouter> {
        self.router_by_id
            .get(router_id)
            .and_then(|u| self.routers.get(u))
    }

    /// The router whose `ports` lists router port `lrp_uuid`.
    pub fn router_of_lrp(&self, lrp_uuid: &str) -> Option<&LogicalRouter> {
        self.router_of_lrp
            .get(lrp_uuid)
            .and_then(|u| self.routers.get(u))
    }

    /// The Neutron router id of router port `lrp`: from the router listing it in `ports`
    /// (`neutron-<id>`), else from the port's own `neutron:router_name`.
    pub fn router_id_of_lrp<'a>(&'a self, lrp: &'a Lrp) -> Option<&'a str> {
        match self.router_of_lrp(&lrp.uuid) {
            Some(lr) => neutron::router_id(Some(&lr.name)),
            None => neutron::router_id(lrp.external_ids.get(keys::ROUTER_NAME).map(String::as_str)),
        }
    }

    /// The gateway router ports hosted on this chassis: named in `hosted` when the hosting
    /// chassis comes from elsewhere (the Southbound `chassisredirect` bindings, OVN < 23.09),
    /// else those whose `status:hosting-chassis` is `system_id`.
    pub fn local_gateways(&self, system_id: &str, hosted: Option<&BTreeSet<String>>) -> Vec<&Lrp> {
        match hosted {
            Some(names) => names.iter().filter_map(|n| self.lrp_named(n)).collect(),
            None => self.lrps_hosted_on(system_id),
        }
    }

    /// The NAT rules of router `lr_uuid` that are in the model.
    pub fn nats_of_router(&self, lr_uuid: &str) -> Vec<&Nat> {
        let Some(lr) = self.routers.get(lr_uuid) else {
            return Vec::new();
        };
        let mut v: Vec<&Nat> = lr.nat.iter().filter_map(|u| self.nats.get(u)).collect();
        v.sort_by(|a, b| {
            a.external_ip
                .cmp(&b.external_ip)
                .then(a.logical_ip.cmp(&b.logical_ip))
                .then(a.uuid.cmp(&b.uuid))
        });
        v
    }

    // ---- Logical_Router_Port

    pub fn upsert_lrp(&mut self, lrp: Lrp) {
        let uuid = lrp.uuid.clone();
        self.remove_lrp(&uuid);
        self.lrp_by_name.insert(lrp.name.clone(), uuid.clone());
        if let Some(host) = lrp.hosting_chassis() {
            index_insert(&mut self.lrp_by_hosting, host, &uuid);
        }
        self.stamp_lrp(&lrp);
        self.lrps.insert(uuid, lrp);
    }

    pub fn remove_lrp(&mut self, uuid: &str) {
        let Some(old) = self.lrps.remove(uuid) else {
            return;
        };
        if self.lrp_by_name.get(&old.name).is_some_and(|u| u == uuid) {
            self.lrp_by_name.remove(&old.name);
        }
        if let Some(host) = old.hosting_chassis() {
            index_remove(&mut self.lrp_by_hosting, host, uuid);
        }
        self.stamp_lrp(&old);
    }

    /// Stamp every lookup router port `lrp` is part of (called for a row entering and leaving).
    fn stamp_lrp(&mut self, lrp: &Lrp) {
        self.stamp(NbKey::Lrp(lrp.uuid.clone()));
        self.stamp(NbKey::LrpNamed(lrp.name.clone()));
        if let Some(host) = lrp.hosting_chassis() {
            self.stamp(NbKey::LrpsHostedOn(host.to_owned()));
        }
    }

    pub fn lrp(&self, uuid: &str) -> Option<&Lrp> {
        self.lrps.get(uuid)
    }

    pub fn lrp_named(&self, name: &str) -> Option<&Lrp> {
        self.lrp_by_name.get(name).and_then(|u| self.lrps.get(u))
    }

    /// Router ports whose `status:hosting-chassis` is `system_id`.
    pub fn lrps_hosted_on(&self, system_id: &str) -> Vec<&Lrp> {
        sorted(&self.lrps, self.lrp_by_hosting.get(system_id), |p| &p.name)
    }

    /// Every router port in the model.
    pub fn lrps(&self) -> Vec<&Lrp> {
        let mut v: Vec<&Lrp> = self.lrps.values().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
        v
    }

    // ---- NAT

    pub fn upsert_nat(&mut self, nat: Nat) {
        let uuid = nat.uuid.clone();
        self.remove_nat(&uuid);
        if !nat.logical_port.is_empty() {
            index_insert(&mut self.nat_by_logical_port, &nat.logical_port, &uuid);
        }
        if let Some(gw) = &nat.gateway_port {
            index_insert(&mut self.nat_by_gateway_port, gw, &uuid);
        }
        self.stamp_nat(&nat);
        self.nats.insert(uuid, nat);
    }

    pub fn remove_nat(&mut self, uuid: &str) {
        let Some(old) = self.nats.remove(uuid) else {
            return;
        };
        if !old.logical_port.is_empty() {
            index_remove(&mut self.nat_by_logical_port, &old.logical_port, uuid);
        }
        if let Some(gw) = &old.gateway_port {
            index_remove(&mut self.nat_by_gateway_port, gw, uuid);
        }
        self.stamp_nat(&old);
    }

    /// NAT rules whose `logical_port` is `lsp_name`.
    pub fn nats_of_port(&self, lsp_name: &str) -> Vec<&Nat> {
        sorted(&self.nats, self.nat_by_logical_port.get(lsp_name), |n| {
            &n.external_ip
        })
    }

    /// NAT rules whose `gateway_port` is router port `lrp_uuid`.
    pub fn nats_of_gateway(&self, lrp_uuid: &str) -> Vec<&Nat> {
        sorted(&self.nats, self.nat_by_gateway_port.get(lrp_uuid), |n| {
            &n.external_ip
        })
    }

    // ---- Load_Balancer

    pub fn upsert_lb(&mut self, lb: LoadBalancer) {
        let uuid = lb.uuid.clone();
        self.remove_lb(&uuid);
        if let Some(router) = lb.router_id() {
            index_insert(&mut self.lb_by_router, router, &uuid);
            self.stamp(NbKey::LbsOfRouter(router.to_owned()));
        }
        self.lbs.insert(uuid, lb);
    }

    pub fn remove_lb(&mut self, uuid: &str) {
        let Some(old) = self.lbs.remove(uuid) else {
            return;
        };
        if let Some(router) = old.router_id() {
            index_remove(&mut self.lb_by_router, router, uuid);
            self.stamp(NbKey::LbsOfRouter(router.to_owned()));
        }
    }

    /// Load balancers of router `router_id` (Octavia's `lr_ref`, port forwardings'
    /// `neutron:router_name`).
    pub fn lbs_of_router(&self, router_id: &str) -> Vec<&LoadBalancer> {
        sorted(&self.lbs, self.lb_by_router.get(router_id), |l| &l.name)
    }

    // ---- NB_Global

    pub fn upsert_nb_global(&mut self, row: NbGlobal) {
        self.nb_global.insert(row.uuid.clone(), row);
    }

    pub fn remove_nb_global(&mut self, uuid: &str) {
        self.nb_global.remove(uuid);
    }

    /// `NB_Global.external_ids:neutron:fip-distributed`, raw (the NB has one NB_Global row).
    pub fn fip_distributed_raw(&self) -> Option<&str> {
        self.nb_global
            .values()
            .next()
            .and_then(|g| g.external_ids.get(keys::FIP_DISTRIBUTED))
            .map(String::as_str)
    }

    // ---- DHCP_Options

    pub fn upsert_dhcp_options(&mut self, row: DhcpOptions) {
        let uuid = row.uuid.clone();
        self.remove_dhcp_options(&uuid);
        if let Some(network) = row.network_id() {
            index_insert(&mut self.dhcp_by_network, network, &uuid);
        }
        self.dhcp_options.insert(uuid, row);
    }

    pub fn remove_dhcp_options(&mut self, uuid: &str) {
        let Some(old) = self.dhcp_options.remove(uuid) else {
            return;
        };
        if let Some(network) = old.network_id() {
            index_remove(&mut self.dhcp_by_network, network, uuid);
        }
    }

    /// The DHCP_Options rows of Neutron network `network_id`, by `cidr`.
    pub fn dhcp_options_of_network(&self, network_id: &str) -> Vec<&DhcpOptions> {
        sorted(
            &self.dhcp_options,
            self.dhcp_by_network.get(network_id),
            |d| &d.cidr,
        )
    }

    /// Every port, NAT, router port and load balancer of the model, for `explain` (a scan, on
    /// demand only: never on the event path).
    pub fn all_rows(&self) -> (Vec<&Lsp>, Vec<&Nat>, Vec<&Lrp>, Vec<&LoadBalancer>) {
        let mut lsps: Vec<&Lsp> = self.lsps.values().collect();
        lsps.sort_by(|a, b| a.name.cmp(&b.name));
        let mut nats: Vec<&Nat> = self.nats.values().collect();
        nats.sort_by(|a, b| a.external_ip.cmp(&b.external_ip));
        let mut lrps: Vec<&Lrp> = self.lrps.values().collect();
        lrps.sort_by(|a, b| a.name.cmp(&b.name));
        let mut lbs: Vec<&LoadBalancer> = self.lbs.values().collect();
        lbs.sort_by(|a, b| a.name.cmp(&b.name));
        (lsps, nats, lrps, lbs)
    }

    /// Row counts, for the start log.
    pub fn counts(&self) -> [(&'static str, usize); 8] {
        [
            ("Logical_Switch_Port", self.lsps.len()),
            ("Logical_Switch", self.switches.len()),
            ("Logical_Router", self.routers.len()),
            ("Logical_Router_Port", self.lrps.len()),
            ("NAT", self.nats.len()),
            ("Load_Balancer", self.lbs.len()),
            ("NB_Global", self.nb_global.len()),
            ("DHCP_Options", self.dhcp_options.len()),
        ]
    }
}

/// Lookups of a model that may record each key they read with its generation then: the
/// Northbound monitor conditions' cache ([`crate::ovn::nb::condition::WantedConditions`])
/// makes them again only when one of those moved. A plain one records nothing.
pub(crate) struct NbLookups<'a> {
    model: &'a NbModel,
    read: Option<Vec<(NbKey, u64)>>,
}

impl<'a> NbLookups<'a> {
    pub(crate) fn plain(model: &'a NbModel) -> Self {
        Self { model, read: None }
    }

    pub(crate) fn recorded(model: &'a NbModel) -> Self {
        Self {
            model,
            read: Some(Vec::new()),
        }
    }

    /// What was read (nothing when plain).
    pub(crate) fn finish(self) -> ReadSet<NbKey> {
        ReadSet::new(self.model.generations(), self.read.unwrap_or_default())
    }

    /// Records the key `key()` makes (made only when recording).
    fn read(&mut self, key: impl FnOnce() -> NbKey) {
        if let Some(read) = &mut self.read {
            let key = key();
            read.push((key.clone(), self.model.generation(&key)));
        }
    }

    pub(crate) fn localnets(&mut self) -> Vec<&'a Lsp> {
        self.read(|| NbKey::Localnets);
        self.model.localnets()
    }

    pub(crate) fn localnets_of_physnet(&mut self, physnet: &str) -> Vec<&'a Lsp> {
        self.read(|| NbKey::Localnets);
        self.model.localnets_of_physnet(physnet)
    }

    /// The switch listing port `lsp_uuid`, content included.
    pub(crate) fn switch_of_port(&mut self, lsp_uuid: &str) -> Option<&'a LogicalSwitch> {
        self.read(|| NbKey::SwitchOfPort(lsp_uuid.to_owned()));
        let ls = self.model.switch_of_port(lsp_uuid)?;
        // Its name and EVPN settings: not its ports, whose changes are many on a busy switch.
        self.read(|| NbKey::SwitchRow(ls.uuid.clone()));
        Some(ls)
    }

    pub(crate) fn fip_ports_listing_host(&mut self, hostname: &str) -> Vec<&'a Lsp> {
        self.read(|| NbKey::FipPortsListingHost(hostname.to_owned()));
        self.model.fip_ports_listing_host(hostname)
    }

    /// [`NbModel::local_gateways`], the content of each included.
    pub(crate) fn local_gateways(
        &mut self,
        system_id: &str,
        hosted: Option<&BTreeSet<String>>,
    ) -> Vec<&'a Lrp> {
        match hosted {
            Some(names) => {
                for name in names {
                    self.read(|| NbKey::LrpNamed(name.clone()));
                }
            }
            None => self.read(|| NbKey::LrpsHostedOn(system_id.to_owned())),
        }
        let gateways = self.model.local_gateways(system_id, hosted);
        for lrp in &gateways {
            self.read(|| NbKey::Lrp(lrp.uuid.clone()));
        }
        gateways
    }

    /// [`NbModel::router_id_of_lrp`] of a router port read through this (its content is).
    pub(crate) fn router_id_of_lrp(&mut self, lrp: &'a Lrp) -> Option<&'a str> {
        self.read(|| NbKey::RouterOfLrp(lrp.uuid.clone()));
        self.model.router_id_of_lrp(lrp)
    }

    pub(crate) fn lbs_of_router(&mut self, router_id: &str) -> Vec<&'a LoadBalancer> {
        self.read(|| NbKey::LbsOfRouter(router_id.to_owned()));
        self.model.lbs_of_router(router_id)
    }

    pub(crate) fn router_interfaces(&mut self, router_id: &str) -> Vec<&'a Lsp> {
        self.read(|| NbKey::RouterInterfaces(router_id.to_owned()));
        self.model.router_interfaces(router_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsp(uuid: &str, name: &str, ty: &str) -> Lsp {
        Lsp {
            uuid: uuid.into(),
            name: name.into(),
            port_type: ty.into(),
            ..Default::default()
        }
    }

    #[test]
    fn ports_are_indexed_by_every_listed_host_and_follow_updates() {
        let mut m = NbModel::default();
        let mut p = lsp("u1", "vm1", "");
        p.options
            .insert(keys::REQUESTED_CHASSIS.into(), "node2, node1".into());
        m.upsert_lsp(p.clone());
        assert_eq!(m.ports_listing_host("node1").len(), 1);
        assert_eq!(m.ports_listing_host("node2").len(), 1);
        assert_eq!(p.bound_chassis("node1"), Some("node1"));
        assert_eq!(p.bound_chassis("node3"), Some("node2"));
        p.options
            .insert(keys::REQUESTED_CHASSIS.into(), "node1".into());
        m.upsert_lsp(p);
        assert!(m.ports_listing_host("node2").is_empty());
        m.remove_lsp("u1");
        assert!(m.ports_listing_host("node1").is_empty());
        assert!(m.lsp_named("vm1").is_none());

        let mut v = lsp("u2", "vip", VIRTUAL);
        v.options
            .insert(keys::REQUESTED_CHASSIS.into(), "node9".into());
        v.external_ids.insert(keys::HOST_ID.into(), "node1".into());
        m.upsert_lsp(v);
        assert_eq!(m.ports_listing_host("node1").len(), 1);
        assert!(m.ports_listing_host("node9").is_empty());
    }

    #[test]
    fn localnet_switch_index_is_kept_whichever_row_comes_first() {
        let mut ln = lsp("ln", "provnet-1", LOCALNET);
        ln.options.insert("network_name".into(), "public".into());
        let ls = LogicalSwitch {
            uuid: "ls".into(),
            name: "neutron-net".into(),
            ports: vec!["ln".into(), "vm".into()],
            ..Default::default()
        };
        // Port first, then switch.
        let mut a = NbModel::default();
        a.upsert_lsp(ln.clone());
        a.upsert_switch(ls.clone());
        // Switch first, then port.
        let mut b = NbModel::default();
        b.upsert_switch(ls.clone());
        b.upsert_lsp(ln.clone());
        for m in [&mut a, &mut b] {
            assert_eq!(m.localnets_on_switch("ls").len(), 1);
            assert_eq!(
                m.switch_of_port("ln").map(|s| s.name.as_str()),
                Some("neutron-net")
            );
            assert_eq!(m.localnets_of_physnet("public").len(), 1);
        }
        // The port stops being a localnet; then the switch drops it.
        let mut plain = ln.clone();
        plain.port_type = String::new();
        a.upsert_lsp(plain);
        assert!(a.localnets_on_switch("ls").is_empty());
        assert!(a.localnets_of_physnet("public").is_empty());
        b.upsert_switch(LogicalSwitch {
            ports: vec!["vm".into()],
            ..ls
        });
        assert!(b.localnets_on_switch("ls").is_empty());
        assert!(b.switch_of_port("ln").is_none());
    }

    #[test]
    fn routers_gateways_nats_and_lbs_are_indexed() {
        let mut m = NbModel::default();
        m.upsert_router(LogicalRouter {
            uuid: "lr".into(),
            name: "neutron-r1".into(),
            ports: vec!["gw".into()],
            nat: vec!["n1".into()],
        });
        let mut gw = Lrp {
            uuid: "gw".into(),
            name: "lrp-gw".into(),
            ..Default::default()
        };
        gw.status
            .insert(keys::HOSTING_CHASSIS.into(), "sys-1".into());
        m.upsert_lrp(gw.clone());
        assert_eq!(m.lrps_hosted_on("sys-1").len(), 1);
        assert_eq!(
            m.router_of_lrp("gw").map(|r| r.name.as_str()),
            Some("neutron-r1")
        );
        assert!(m.router_by_id("r1").is_some());
        gw.status.clear();
        m.upsert_lrp(gw);
        assert!(m.lrps_hosted_on("sys-1").is_empty());

        m.upsert_nat(Nat {
            uuid: "n1".into(),
            nat_type: DNAT_AND_SNAT.into(),
            logical_port: "vm1".into(),
            gateway_port: Some("gw".into()),
            ..Default::default()
        });
        assert_eq!(m.nats_of_port("vm1").len(), 1);
        assert_eq!(m.nats_of_gateway("gw").len(), 1);
        assert_eq!(m.nats_of_router("lr").len(), 1);
        m.remove_nat("n1");
        assert!(m.nats_of_port("vm1").is_empty());
        assert!(m.nats_of_gateway("gw").is_empty());

        let mut pf = LoadBalancer {
            uuid: "lb1".into(),
            name: "pf-floatingip-x".into(),
            ..Default::default()
        };
        pf.external_ids
            .insert(keys::ROUTER_NAME.into(), "neutron-r1".into());
        m.upsert_lb(pf);
        let mut octavia = LoadBalancer {
            uuid: "lb2".into(),
            name: "lb".into(),
            ..Default::default()
        };
        octavia
            .external_ids
            .insert(keys::LB_LR_REF.into(), "neutron-r1".into());
        m.upsert_lb(octavia);
        assert_eq!(m.lbs_of_router("r1").len(), 2);
        m.remove_lb("lb1");
        assert_eq!(m.lbs_of_router("r1").len(), 1);
    }
}
