//! What a backend produces: the kernel, FRR and OVS objects that must exist on this chassis.
//!
//! A backend turns an [`crate::exposure::ExposureSet`] into a [`DesiredSystem`]. The reconciler in
//! the capability layer ([`crate::caps`]) dumps what is really there (once per object class), diffs,
//! and applies the minimal change, touching only what [`Ownership`] says the agent owns.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

pub use crate::caps::frr::objects::{FrrObject, FrrObjectKey};
pub use crate::caps::local_nb::{LocalNbDesired, NbAtom, NbParent, NbRow, NbRowId, NbValue};
use crate::types::{InterfaceName, MacAddr};

/// Kind of a link the agent creates. The VRF and the NIC kinds are configurable because some
/// kernels (containers, minimal builds) lack `vrf`/`dummy`: `bridge`/`ifb` stand in there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    Vrf {
        table: u32,
    },
    Dummy,
    Ifb,
    Bridge,
    Vlan {
        parent: InterfaceName,
        id: u16,
    },
    /// Created without address learning (`nolearning`: EVPN distributes the MACs).
    Vxlan {
        vni: u32,
        local: Option<IpAddr>,
        dstport: u16,
        /// As a port of its master bridge: `neigh_suppress on learning off` (the NB `vrf`
        /// method's `bridge link set dev vxlan-<vni> neigh_suppress on learning off`).
        #[serde(default)]
        neigh_suppress: bool,
    },
    Veth {
        peer: InterfaceName,
    },
    /// A device someone else creates and deletes (an OVS bridge's own port, an OVS internal
    /// port): never created, deleted or recreated by the agent, of whatever kind it is; when it
    /// exists, `up`, `master` and `mac` are applied to it (upstream's `ensure_bridge` sets a
    /// provider bridge up, and never creates one in its place, U33).
    Existing,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinkSpec {
    pub name: InterfaceName,
    /// Created with this kind when absent. An existing link of another kind is left as it is
    /// (reported), unless the agent owns it (see [`Ownership::link_names`]): then it is recreated. A
    /// desired `Bridge` accepts any existing device of that name (the OVS bridge's own port).
    pub kind: LinkKind,
    /// `ip link set <name> master <master>`; `None` leaves the master alone.
    pub master: Option<InterfaceName>,
    /// `ip link set <name> address <mac>`; `None` leaves the MAC alone.
    pub mac: Option<MacAddr>,
    /// `ip link set <name> up`; `false` leaves the state alone (the agent never sets links down).
    pub up: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AddressSpec {
    pub dev: InterfaceName,
    pub addr: IpNet,
}

/// `ip rule add to|from <prefix> table <table> priority <priority>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RuleSpec {
    pub selector: RuleSelector,
    pub table: u32,
    pub priority: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSelector {
    To(IpNet),
    From(IpNet),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteType {
    Unicast,
    Unreachable,
}

/// A route the agent owns: always `proto boot` (3), in a table the agent owns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RouteSpec {
    pub table: u32,
    pub dst: IpNet,
    pub route_type: RouteType,
    pub via: Option<IpAddr>,
    pub dev: Option<InterfaceName>,
    /// `scope link` (device routes without a gateway).
    pub scope_link: bool,
    pub metric: Option<u32>,
}

/// Permanent neighbour entry (`ip neigh replace <ip> lladdr <mac> dev <dev> nud permanent`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NeighbourSpec {
    pub dev: InterfaceName,
    pub ip: IpAddr,
    pub lladdr: MacAddr,
}

/// Proxy neighbour entry (`ip -6 neigh add proxy <ip> dev <dev>`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProxyNeighbourSpec {
    pub dev: InterfaceName,
    pub ip: IpAddr,
}

/// One OpenFlow flow with the agent's cookie, as a validated match and action list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlowSpec {
    pub cookie: u64,
    pub priority: u16,
    /// e.g. `ip,in_port=2` — built only from validated values by the backend.
    pub matches: String,
    /// e.g. `mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL`.
    pub actions: String,
}

/// A flow the backend wants, before OVS port names are resolved to ofports. The reconciler
/// resolves every port the flow names (waiting while an ofport is `-1` or unset, or the port does
/// not exist yet) so no flow with `in_port=-1` or `output:-1` is ever emitted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortFlowSpec {
    pub bridge: InterfaceName,
    /// OVS port whose ofport goes into `in_port=`; empty: the flow matches any input port.
    pub in_port: String,
    pub cookie: u64,
    pub priority: u16,
    /// Match without the `in_port` part, e.g. `ip`.
    pub matches: String,
    /// Action list, e.g. `mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL`. A `{<port>}` placeholder stands
    /// for the ofport of that OVS port on the same bridge (`output:{vlan-100}`): build it with
    /// [`FlowAction::render`] rather than by hand, so a port name is never spliced in raw.
    pub actions: String,
}

/// The interface alias (`IFLA_IFALIAS`, `ip link set <dev> alias ...`) the agent sets on every
/// link it creates: the mark that says "this device is the agent's" across restarts.
///
/// Ownership has to survive the agent: an EVPN `br-<vni>` created before a restart, whose VNI
/// went away while the agent was down, must still be recognised as the agent's and deleted. A
/// name prefix (`br-`) cannot say that without also claiming every Linux bridge someone else
/// named `br-foo`; the alias can, because only the agent sets it.
pub const AGENT_LINK_ALIAS: &str = "ovn-bgp-agent";

/// `<bridge[:10]>.<vlan>`, upstream's VLAN device name (fits IFNAMSIZ with `.4094`).
pub fn vlan_device_name(bridge: &InterfaceName, vlan: u16) -> InterfaceName {
    let prefix: String = bridge.as_str().chars().take(10).collect();
    InterfaceName::new(format!("{prefix}.{vlan}")).expect("10 valid chars + .NNNN is a valid name")
}

/// One OpenFlow action, for building [`PortFlowSpec::actions`] from typed values. Port names are
/// written as `{<port>}` placeholders which the reconciler resolves, like `in_port`, to the
/// port's ofport (validating the name first; an invalid name rejects the flow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowAction {
    /// `mod_dl_dst:<mac>`
    ModDlDst(MacAddr),
    /// `mod_dl_src:<mac>`
    ModDlSrc(MacAddr),
    /// `strip_vlan`
    StripVlan,
    /// `output:<ofport of the named port>`
    Output(String),
    /// `NORMAL`
    Normal,
    /// `drop`
    Drop,
}

impl FlowAction {
    /// The action list text of [`PortFlowSpec::actions`].
    pub fn render(actions: &[FlowAction]) -> String {
        actions
            .iter()
            .map(|a| match a {
                Self::ModDlDst(mac) => format!("mod_dl_dst:{mac}"),
                Self::ModDlSrc(mac) => format!("mod_dl_src:{mac}"),
                Self::StripVlan => "strip_vlan".to_owned(),
                Self::Output(port) => format!("output:{{{port}}}"),
                Self::Normal => "NORMAL".to_owned(),
                Self::Drop => "drop".to_owned(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// An OVS port on a bridge (`ovs-vsctl --may-exist add-port <bridge> <name> [tag=<t>]`, plus
/// `type=internal` for internal ports). The agent marks the ports it adds with
/// `external_ids:ovn-bgp-agent=owned` on the Port row and only ever changes or deletes marked
/// ports: a port of that name without the marker is reported and left alone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OvsPortSpec {
    pub bridge: InterfaceName,
    /// Port and interface name (one interface per port).
    pub name: InterfaceName,
    /// `type=internal` (OVS creates the kernel device); otherwise a system port whose device
    /// (a veth end) is created by the kernel part.
    pub internal: bool,
    /// Access VLAN (`tag=`, 0..=4095); `None`: no tag.
    pub vlan_tag: Option<u16>,
}

/// A static MAC entry of a bridge's FDB (`ovs-appctl fdb/add <bridge> <port> <vlan> <mac>`).
/// Lost when ovs-vswitchd restarts; the reconciler adds it again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FdbEntrySpec {
    pub bridge: InterfaceName,
    /// OVS port the MAC is behind; the bridge's own name is its LOCAL port.
    pub port: InterfaceName,
    /// 0..=4095 (0: untagged).
    pub vlan: u16,
    pub mac: MacAddr,
}

/// What the reconciler may delete: everything in these scopes that is not desired goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ownership {
    /// Devices whose host addresses (/32, /128) are the agent's (bgp-nic).
    pub address_devices: BTreeSet<InterfaceName>,
    /// Devices whose every address is the agent's, whatever its prefix length: devices it
    /// creates and addresses with subnet prefixes (the NB vrf method's VRF-side veth holds its
    /// network's gateway addresses, `172.24.4.1/24`), so a gateway that moves leaves no stale
    /// address behind.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub all_address_devices: BTreeSet<InterfaceName>,
    /// Tables whose rules and `proto boot` routes are the agent's (per-bridge tables).
    pub tables: BTreeSet<u32>,
    /// Tables whose every route with a destination is the agent's, whatever its protocol,
    /// except the kernel's own (`proto kernel`: routes of addresses) and those of routing
    /// daemons (`proto bgp` 186 and FRR's other protocols, zebra's 11, babel's 42): a foreign
    /// `proto static` route there is deleted, or replaced by the desired route of the same
    /// destination. Upstream's stretched L2 driver sweeps its VRF table so (sparing only 186).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub swept_tables: BTreeSet<u32>,
    /// Devices whose permanent neighbours and proxy neighbours are the agent's.
    pub neighbour_devices: BTreeSet<InterfaceName>,
    /// Bridges whose flows with these cookies are the agent's.
    pub flow_cookies: BTreeSet<u64>,
    /// Exact names of links the agent owns (never prefixes: `bgp-vrf` does not own
    /// `bgp-vrf2`). An owned link that is not desired is deleted, one with the wrong kind or
    /// parameters is recreated, and one that lacks [`AGENT_LINK_ALIAS`] gets it.
    ///
    /// Besides these names, a link is the agent's when it carries [`AGENT_LINK_ALIAS`], or when
    /// [`Ownership::vlan_parents`] claims it. In every case only links of a kind the agent
    /// creates (vrf, dummy, ifb, bridge, vlan, vxlan, veth) are ever deleted, so an OVS port
    /// is never deleted.
    pub link_names: BTreeSet<InterfaceName>,
    /// Bridges whose upstream-named VLAN devices are the agent's: a link of kind vlan whose
    /// parent is one of these and whose name is exactly [`vlan_device_name`]`(parent, its vlan
    /// id)`. This is how the devices created by upstream's agent (no alias) are taken over
    /// when this agent replaces it, and deleted once their localnet tag is gone.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub vlan_parents: BTreeSet<InterfaceName>,
}

/// The kernel's table `local`, where the local routes of addresses outside a VRF are.
pub const LOCAL_TABLE: u32 = 255;

/// The kernel's own local route for an address, to be removed: the route `ip route del <dst>
/// table <table> proto kernel scope host dev <dev>` deletes (type local). Upstream's EVPN
/// driver removes it on `lo-<vni>` so the VRF forwards traffic to the address instead of
/// delivering it locally. The kernel re-adds the route whenever the address is re-added, so
/// this is desired state, repaired on every reconcile.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LocalRouteSuppression {
    /// The table the kernel put the local route in: the VRF's table when `dev` is enslaved
    /// to a VRF (it must be one of [`Ownership::tables`]), [`LOCAL_TABLE`] otherwise.
    pub table: u32,
    pub dst: IpAddr,
    pub dev: InterfaceName,
}

/// A class of objects a busy chassis has tens of thousands of: an ordered set whose copies share
/// their tree (a copy is one pointer; a change copies one path), so the backend hands each
/// new state on without copying it, and two versions of it are compared by visiting only what
/// they do not share ([`imbl::OrdSet::diff`]): an event costs what it changed, not what the
/// chassis exposes (issue 17). Serialized as a sequence, like a `BTreeSet`.
pub type ObjectSet<T> = imbl::OrdSet<T>;

/// A persistent map of desired objects (sysctls, FRR objects), as [`ObjectSet`]: a render
/// hands its last version on by sharing it, and two versions are compared by visiting only
/// what they do not share. Serialized as a map, like a `BTreeMap`.
pub type ObjectMap<K, V> = imbl::OrdMap<K, V>;

/// Keep only the elements of `set` that `keep` accepts (a persistent set has no `retain`): the
/// others are found in one pass and removed one by one (they are few: screened-out objects).
pub fn retain_objects<T: Ord + Clone>(set: &mut ObjectSet<T>, keep: impl Fn(&T) -> bool) {
    let gone: Vec<T> = set.iter().filter(|o| !keep(o)).cloned().collect();
    for o in &gone {
        set.remove(o);
    }
}

/// The complete desired state the backend computed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredSystem {
    pub links: ObjectSet<LinkSpec>,
    pub addresses: ObjectSet<AddressSpec>,
    pub rules: ObjectSet<RuleSpec>,
    pub routes: ObjectSet<RouteSpec>,
    pub neighbours: ObjectSet<NeighbourSpec>,
    pub proxy_neighbours: ObjectSet<ProxyNeighbourSpec>,
    /// `net.ipv4.conf.br-ex.proxy_arp` → `1`.
    pub sysctls: ObjectMap<String, String>,
    pub flows: ObjectSet<PortFlowSpec>,
    /// Local routes of the kernel that must not exist (see [`LocalRouteSuppression`]): one per
    /// tenant address of an EVPN gateway's VRF, so as many as it has VMs behind it.
    #[serde(default, skip_serializing_if = "ObjectSet::is_empty")]
    pub suppressed_local_routes: ObjectSet<LocalRouteSuppression>,
    /// OVS ports (EVPN `vlan-<vni>`/`veth-ovs-<vni>`, NB vrf `ovs<uuid11>`). Empty sets are left
    /// out of the serialized form so existing snapshots keep their shape.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub ovs_ports: BTreeSet<OvsPortSpec>,
    /// Static FDB entries on OVS bridges (`ovn` mode: the bridge's own MAC on LOCAL).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub fdb_entries: BTreeSet<FdbEntrySpec>,
    /// FRR configuration snippets to keep applied, already rendered from validated values.
    /// Never undone when they go away (see [`Self::frr_objects`] for objects that are).
    pub frr: Vec<String>,
    /// FRR objects (EVPN VRF stanzas, ND prefixes) with their removal: an object the agent
    /// created that is no longer desired is removed; objects it did not create never are.
    #[serde(default, skip_serializing_if = "ObjectMap::is_empty")]
    pub frr_objects: ObjectMap<FrrObjectKey, FrrObject>,
    /// Rows of the node-local OVN Northbound (the `ovn` method); `None`: the agent does not
    /// manage that database (its rows there are left as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_nb: Option<LocalNbDesired>,
    pub ownership: Ownership,
}

/// One object the reconciler could not apply, with the component's own error (e.g. the kernel's
/// errno message). Collected, never fatal: the other objects are still applied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectError {
    /// Object class (`addresses`, `routes`, `links`, `flows`, `frr`, ...).
    pub class: String,
    /// The object and the operation, e.g. `add address 192.0.2.1/32 dev bgp-nic`.
    pub object: String,
    pub error: String,
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.class, self.object, self.error)
    }
}

/// What one reconcile changed, by object class; zero everywhere on a second run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeReport {
    /// Objects created.
    pub added: BTreeMap<String, usize>,
    /// Objects modified in place (route or neighbour replaced, link attribute set, sysctl
    /// written, FRR snippets re-applied).
    #[serde(default)]
    pub changed: BTreeMap<String, usize>,
    /// Objects deleted.
    pub removed: BTreeMap<String, usize>,
    pub errors: Vec<ObjectError>,
}

impl ChangeReport {
    pub fn is_noop(&self) -> bool {
        self.total_changes() == 0 && self.errors.is_empty()
    }

    /// Number of objects added, changed or removed, all classes together.
    pub fn total_changes(&self) -> usize {
        self.added.values().sum::<usize>()
            + self.changed.values().sum::<usize>()
            + self.removed.values().sum::<usize>()
    }

    pub fn count_added(&mut self, class: &str, n: usize) {
        if n > 0 {
            *self.added.entry(class.to_owned()).or_default() += n;
        }
    }

    pub fn count_changed(&mut self, class: &str, n: usize) {
        if n > 0 {
            *self.changed.entry(class.to_owned()).or_default() += n;
        }
    }

    pub fn count_removed(&mut self, class: &str, n: usize) {
        if n > 0 {
            *self.removed.entry(class.to_owned()).or_default() += n;
        }
    }

    pub fn error(&mut self, class: &str, object: impl Into<String>, error: impl ToString) {
        self.errors.push(ObjectError {
            class: class.to_owned(),
            object: object.into(),
            error: error.to_string(),
        });
    }

    /// Fold another report (of other object classes) into this one.
    pub fn merge(&mut self, other: ChangeReport) {
        for (k, v) in other.added {
            self.count_added(&k, v);
        }
        for (k, v) in other.changed {
            self.count_changed(&k, v);
        }
        for (k, v) in other.removed {
            self.count_removed(&k, v);
        }
        self.errors.extend(other.errors);
    }
}
