//! Links: what a dump says about a device, and the requests that create, adjust or delete one.

use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::link::{
    InfoBridgePort, InfoData, InfoKind, InfoPortData, InfoPortKind, InfoVeth, InfoVlan, InfoVrf,
    InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use std::collections::BTreeSet;
use std::net::IpAddr;

use super::conn::Request;
use crate::system::{AGENT_LINK_ALIAS, LinkKind, LinkSpec, Ownership, vlan_device_name};
use crate::types::{InterfaceName, MacAddr};

/// A link as the kernel reports it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObservedLink {
    pub index: u32,
    pub name: String,
    /// `IFLA_INFO_KIND` (`None` for devices without one, e.g. `lo`).
    pub kind: Option<String>,
    pub master: Option<u32>,
    pub mac: Option<[u8; 6]>,
    pub up: bool,
    pub vrf_table: Option<u32>,
    pub vlan_id: Option<u16>,
    pub parent: Option<u32>,
    pub vxlan_vni: Option<u32>,
    pub vxlan_local: Option<IpAddr>,
    pub vxlan_port: Option<u16>,
    pub vxlan_learning: Option<bool>,
    /// As a bridge port: `(neigh_suppress, learning)`, when the kernel reported them.
    pub bridge_port_flags: Option<(bool, bool)>,
    /// `IFLA_IFALIAS` ([`AGENT_LINK_ALIAS`] on the links the agent created).
    pub alias: Option<String>,
}

impl ObservedLink {
    /// Does it carry the agent's mark?
    pub(crate) fn marked(&self) -> bool {
        self.alias.as_deref() == Some(AGENT_LINK_ALIAS)
    }
}

/// Is `link` the agent's, so that it may be deleted when not desired, or recreated when its
/// parameters differ? Only links of a kind the agent creates ever are; then one of: its exact
/// name is in [`Ownership::link_names`], it carries [`AGENT_LINK_ALIAS`], or it is the
/// upstream-named VLAN device of a bridge in [`Ownership::vlan_parents`]. `name_of` gives the
/// name of an ifindex (the VLAN's parent).
pub(crate) fn owned<'a>(
    ownership: &Ownership,
    link: &ObservedLink,
    name_of: impl Fn(u32) -> Option<&'a str>,
) -> bool {
    let creatable = link
        .kind
        .as_deref()
        .is_some_and(|k| CREATABLE_KINDS.contains(&k));
    creatable
        && (ownership.link_names.iter().any(|n| n.as_str() == link.name)
            || link.marked()
            || is_upstream_vlan_of(&ownership.vlan_parents, link, name_of))
}

fn is_upstream_vlan_of<'a>(
    parents: &BTreeSet<InterfaceName>,
    link: &ObservedLink,
    name_of: impl Fn(u32) -> Option<&'a str>,
) -> bool {
    if link.kind.as_deref() != Some("vlan") {
        return false;
    }
    let (Some(id), Some(parent)) = (link.vlan_id, link.parent.and_then(name_of)) else {
        return false;
    };
    parents
        .iter()
        .find(|p| p.as_str() == parent)
        .is_some_and(|p| vlan_device_name(p, id).as_str() == link.name)
}

pub(crate) fn dump_request() -> RouteNetlinkMessage {
    RouteNetlinkMessage::GetLink(LinkMessage::default())
}

/// `RTM_GETLINK` for one name (answered by one message, or ENODEV).
pub(crate) fn get_request(name: &str) -> RouteNetlinkMessage {
    let mut m = LinkMessage::default();
    m.attributes.push(LinkAttribute::IfName(name.to_owned()));
    RouteNetlinkMessage::GetLink(m)
}

pub(crate) fn parse(message: &RouteNetlinkMessage) -> Option<ObservedLink> {
    let RouteNetlinkMessage::NewLink(m) = message else {
        return None;
    };
    let mut link = ObservedLink {
        index: m.header.index,
        name: String::new(),
        kind: None,
        master: None,
        mac: None,
        up: m.header.flags.contains(LinkFlags::Up),
        vrf_table: None,
        vlan_id: None,
        parent: None,
        vxlan_vni: None,
        vxlan_local: None,
        vxlan_port: None,
        vxlan_learning: None,
        bridge_port_flags: None,
        alias: None,
    };
    for attr in &m.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name = n.clone(),
            LinkAttribute::IfAlias(a) => link.alias = Some(a.clone()),
            LinkAttribute::Controller(i) => link.master = Some(*i),
            LinkAttribute::Link(i) => link.parent = Some(*i),
            LinkAttribute::Address(a) if a.len() == 6 => {
                let mut mac = [0u8; 6];
                mac.copy_from_slice(a);
                link.mac = Some(mac);
            }
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    match info {
                        LinkInfo::Kind(k) => link.kind = Some(kind_string(k)),
                        LinkInfo::Data(InfoData::Vrf(v)) => {
                            for i in v {
                                if let InfoVrf::TableId(t) = i {
                                    link.vrf_table = Some(*t);
                                }
                            }
                        }
                        LinkInfo::Data(InfoData::Vlan(v)) => {
                            for i in v {
                                if let InfoVlan::Id(id) = i {
                                    link.vlan_id = Some(*id);
                                }
                            }
                        }
                        LinkInfo::Data(InfoData::Vxlan(v)) => {
                            for i in v {
                                match i {
                                    InfoVxlan::Id(id) => link.vxlan_vni = Some(*id),
                                    InfoVxlan::Local(a) => link.vxlan_local = Some((*a).into()),
                                    InfoVxlan::Local6(a) => link.vxlan_local = Some((*a).into()),
                                    InfoVxlan::Port(p) => link.vxlan_port = Some(*p),
                                    InfoVxlan::Learning(l) => link.vxlan_learning = Some(*l),
                                    _ => {}
                                }
                            }
                        }
                        LinkInfo::PortData(InfoPortData::BridgePort(flags)) => {
                            let (mut suppress, mut learning) = (false, true);
                            for f in flags {
                                match f {
                                    InfoBridgePort::NeighSupress(on) => suppress = *on,
                                    InfoBridgePort::Learning(on) => learning = *on,
                                    _ => {}
                                }
                            }
                            link.bridge_port_flags = Some((suppress, learning));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    (!link.name.is_empty()).then_some(link)
}

fn kind_string(k: &InfoKind) -> String {
    match k {
        InfoKind::Other(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `IFLA_INFO_KIND` string of a desired kind.
pub(crate) fn kind_name(kind: &LinkKind) -> &'static str {
    match kind {
        LinkKind::Vrf { .. } => "vrf",
        LinkKind::Dummy => "dummy",
        LinkKind::Ifb => "ifb",
        LinkKind::Bridge => "bridge",
        LinkKind::Vlan { .. } => "vlan",
        LinkKind::Vxlan { .. } => "vxlan",
        LinkKind::Veth { .. } => "veth",
        LinkKind::Existing => "existing",
    }
}

/// Kinds the agent creates; only links of these kinds are ever deleted by it.
pub(crate) const CREATABLE_KINDS: &[&str] =
    &["vrf", "dummy", "ifb", "bridge", "vlan", "vxlan", "veth"];

/// The operator's fix when the kernel lacks a kind.
pub(crate) fn missing_kind_fix(kind: &str) -> String {
    match kind {
        "vrf" => "modprobe vrf, or set [linux] vrf_device_kind = bridge".to_owned(),
        "dummy" => "modprobe dummy, or set [linux] nic_device_kind = ifb".to_owned(),
        "vlan" => "modprobe 8021q".to_owned(),
        other => format!("modprobe {other}"),
    }
}

/// Does the existing link realise the desired one? `Err` says what differs.
pub(crate) fn matches(
    spec: &LinkSpec,
    observed: &ObservedLink,
    parent_index: Option<u32>,
) -> Result<(), String> {
    let want = kind_name(&spec.kind);
    // Upstream's bridge fallback creates a Linux bridge only when no device of that name exists
    // (normally the OVS bridge's own port is there, of kind openvswitch or tun). An existing
    // device is whatever kind it is.
    if matches!(spec.kind, LinkKind::Bridge | LinkKind::Existing) {
        return Ok(());
    }
    let have = observed.kind.as_deref().unwrap_or("(none)");
    if have != want {
        return Err(format!("it exists with kind {have}, desired {want}"));
    }
    match &spec.kind {
        LinkKind::Vrf { table } if observed.vrf_table != Some(*table) => Err(format!(
            "its vrf table is {:?}, desired {table}",
            observed.vrf_table
        )),
        LinkKind::Vlan { id, .. }
            if observed.vlan_id != Some(*id) || observed.parent != parent_index =>
        {
            Err(format!(
                "its vlan id/parent is {:?}/{:?}, desired {id}",
                observed.vlan_id, observed.parent
            ))
        }
        LinkKind::Vxlan { vni, .. } if observed.vxlan_vni != Some(*vni) => Err(format!(
            "its vni is {:?}, desired {vni}",
            observed.vxlan_vni
        )),
        LinkKind::Vxlan { local, .. } if observed.vxlan_local != *local => Err(format!(
            "its local address is {:?}, desired {local:?}",
            observed.vxlan_local
        )),
        LinkKind::Vxlan { dstport, .. } if observed.vxlan_port.is_some_and(|p| p != *dstport) => {
            Err(format!(
                "its destination port is {:?}, desired {dstport}",
                observed.vxlan_port
            ))
        }
        LinkKind::Vxlan { .. } if observed.vxlan_learning == Some(true) => {
            Err("it learns addresses, desired nolearning".to_owned())
        }
        _ => Ok(()),
    }
}

fn info_for(kind: &LinkKind) -> Vec<LinkInfo> {
    let mut infos = vec![LinkInfo::Kind(match kind {
        LinkKind::Vrf { .. } => InfoKind::Vrf,
        LinkKind::Dummy => InfoKind::Dummy,
        LinkKind::Ifb => InfoKind::Ifb,
        LinkKind::Bridge => InfoKind::Bridge,
        LinkKind::Vlan { .. } => InfoKind::Vlan,
        LinkKind::Vxlan { .. } => InfoKind::Vxlan,
        LinkKind::Veth { .. } => InfoKind::Veth,
        // Never created (create_round skips it); the kind is only named in errors.
        LinkKind::Existing => InfoKind::Other("existing".to_owned()),
    })];
    match kind {
        LinkKind::Vrf { table } => {
            infos.push(LinkInfo::Data(InfoData::Vrf(vec![InfoVrf::TableId(
                *table,
            )])))
        }
        LinkKind::Vlan { id, .. } => {
            infos.push(LinkInfo::Data(InfoData::Vlan(vec![InfoVlan::Id(*id)])))
        }
        LinkKind::Vxlan {
            vni,
            local,
            dstport,
            ..
        } => {
            let mut v = vec![
                InfoVxlan::Id(*vni),
                InfoVxlan::Port(*dstport),
                InfoVxlan::Learning(false),
            ];
            match local {
                Some(IpAddr::V4(a)) => v.push(InfoVxlan::Local(*a)),
                Some(IpAddr::V6(a)) => v.push(InfoVxlan::Local6(*a)),
                None => {}
            }
            infos.push(LinkInfo::Data(InfoData::Vxlan(v)));
        }
        LinkKind::Veth { peer } => {
            let mut p = LinkMessage::default();
            p.attributes.push(LinkAttribute::IfName(peer.to_string()));
            infos.push(LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(p))));
        }
        _ => {}
    }
    infos
}

/// `ip link add <name> type <kind> ...` (master, MAC and state are set afterwards).
pub(crate) fn create_request(spec: &LinkSpec, parent_index: Option<u32>) -> Request {
    let mut m = LinkMessage::default();
    m.attributes
        .push(LinkAttribute::IfName(spec.name.to_string()));
    if let Some(p) = parent_index {
        m.attributes.push(LinkAttribute::Link(p));
    }
    m.attributes
        .push(LinkAttribute::LinkInfo(info_for(&spec.kind)));
    // Marked at birth where the kernel takes the alias with the creation; where it does not,
    // the attribute pass right after the creation sets it (see `set_request`).
    m.attributes
        .push(LinkAttribute::IfAlias(AGENT_LINK_ALIAS.to_owned()));
    Request {
        message: RouteNetlinkMessage::NewLink(m),
        flags: NLM_F_CREATE | NLM_F_EXCL,
        what: format!(
            "create link {} of kind {}",
            spec.name,
            kind_name(&spec.kind)
        ),
    }
}

/// A probe for kind support: a request the kernel rejects with EOPNOTSUPP when the kind is
/// unknown, and otherwise with EINVAL before creating anything (a VLAN without parent, a VRF
/// without table) — or, for kinds without required attributes, a real device to delete again.
pub(crate) fn probe_request(kind: &str, probe_name: &str) -> Request {
    let mut m = LinkMessage::default();
    m.attributes
        .push(LinkAttribute::IfName(probe_name.to_owned()));
    let info_kind = match kind {
        "vrf" => InfoKind::Vrf,
        "dummy" => InfoKind::Dummy,
        "ifb" => InfoKind::Ifb,
        "bridge" => InfoKind::Bridge,
        "vlan" => InfoKind::Vlan,
        "vxlan" => InfoKind::Vxlan,
        "veth" => InfoKind::Veth,
        other => InfoKind::Other(other.to_owned()),
    };
    m.attributes
        .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(info_kind)]));
    Request {
        message: RouteNetlinkMessage::NewLink(m),
        flags: NLM_F_CREATE | NLM_F_EXCL,
        what: format!("probe link kind {kind}"),
    }
}

/// `ip link set <name> [master M] [address A] [alias ovn-bgp-agent] [up]`, only with what
/// differs (`mark`: the link must carry [`AGENT_LINK_ALIAS`]).
pub(crate) fn set_request(
    observed: &ObservedLink,
    master: Option<u32>,
    mac: Option<MacAddr>,
    mark: bool,
    up: bool,
) -> Option<Request> {
    let mut m = LinkMessage::default();
    m.header.index = observed.index;
    let mut what = Vec::new();
    if let Some(master) = master
        && observed.master != Some(master)
    {
        m.attributes.push(LinkAttribute::Controller(master));
        what.push(format!("master ifindex {master}"));
    }
    if let Some(mac) = mac
        && observed.mac != Some(mac.0)
    {
        m.attributes.push(LinkAttribute::Address(mac.0.to_vec()));
        what.push(format!("address {mac}"));
    }
    if mark && !observed.marked() {
        m.attributes
            .push(LinkAttribute::IfAlias(AGENT_LINK_ALIAS.to_owned()));
        what.push(format!("alias {AGENT_LINK_ALIAS}"));
    }
    if up && !observed.up {
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        what.push("up".to_owned());
    }
    if what.is_empty() {
        return None;
    }
    Some(Request {
        message: RouteNetlinkMessage::SetLink(m),
        flags: 0,
        what: format!("set link {} {}", observed.name, what.join(" ")),
    })
}

/// `bridge link set dev <name> neigh_suppress on learning off`, when the link is a bridge port
/// whose flags differ (or were not reported yet: right after it was enslaved in this run).
pub(crate) fn bridge_port_request(observed: &ObservedLink) -> Option<Request> {
    if observed.bridge_port_flags == Some((true, false)) {
        return None;
    }
    let mut m = LinkMessage::default();
    m.header.index = observed.index;
    m.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::PortKind(InfoPortKind::Bridge),
        LinkInfo::PortData(InfoPortData::BridgePort(vec![
            InfoBridgePort::NeighSupress(true),
            InfoBridgePort::Learning(false),
        ])),
    ]));
    // RTM_NEWLINK without NLM_F_CREATE, as `ip link set ... type bridge_slave` sends it: the
    // kernel reads port data (IFLA_INFO_SLAVE_DATA) only there, RTM_SETLINK ignores it.
    Some(Request {
        message: RouteNetlinkMessage::NewLink(m),
        flags: 0,
        what: format!(
            "set bridge port {} neigh_suppress on learning off",
            observed.name
        ),
    })
}

pub(crate) fn delete_request(index: u32, name: &str) -> Request {
    let mut m = LinkMessage::default();
    m.header.index = index;
    Request {
        message: RouteNetlinkMessage::DelLink(m),
        flags: 0,
        what: format!("delete link {name}"),
    }
}

#[cfg(test)]
mod tests {
    //! Round trips through the wire format for the kinds this test machine's kernel lacks (vrf,
    //! vlan): the requests carry what `ip link add ... type vrf table N` / `type vlan id N` send.
    use super::*;
    use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};

    fn round_trip(r: Request) -> ObservedLink {
        let mut m = NetlinkMessage::from(r.message);
        m.finalize();
        let mut buf = vec![0u8; m.buffer_len()];
        m.serialize(&mut buf);
        let back = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf).expect("decodes");
        let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) = back.payload else {
            panic!("not a NEWLINK")
        };
        parse(&RouteNetlinkMessage::NewLink(l)).expect("parses")
    }

    fn spec(kind: LinkKind) -> LinkSpec {
        LinkSpec {
            name: InterfaceName::new("x0").unwrap(),
            kind,
            master: None,
            mac: None,
            up: true,
        }
    }

    #[test]
    fn vrf_and_vlan_requests_carry_table_id_and_parent() {
        let vrf = round_trip(create_request(&spec(LinkKind::Vrf { table: 10 }), None));
        assert_eq!(
            (vrf.kind.as_deref(), vrf.vrf_table),
            (Some("vrf"), Some(10))
        );
        let vlan_kind = LinkKind::Vlan {
            parent: InterfaceName::new("br-ex").unwrap(),
            id: 100,
        };
        let vlan = round_trip(create_request(&spec(vlan_kind.clone()), Some(7)));
        assert_eq!(
            (vlan.kind.as_deref(), vlan.vlan_id, vlan.parent),
            (Some("vlan"), Some(100), Some(7))
        );
        assert!(matches(&spec(vlan_kind.clone()), &vlan, Some(7)).is_ok());
        assert!(matches(&spec(vlan_kind), &vlan, Some(8)).is_err());
        assert!(matches(&spec(LinkKind::Vrf { table: 11 }), &vrf, None).is_err());
        let dummy = round_trip(create_request(&spec(LinkKind::Dummy), None));
        assert_eq!(dummy.kind.as_deref(), Some("dummy"));
    }

    fn observed(index: u32, name: &str, kind: &str) -> ObservedLink {
        ObservedLink {
            index,
            name: name.to_owned(),
            kind: Some(kind.to_owned()),
            master: None,
            mac: None,
            up: true,
            vrf_table: None,
            vlan_id: None,
            parent: None,
            ..Default::default()
        }
    }

    fn vlan(index: u32, name: &str, parent: u32, id: u16) -> ObservedLink {
        ObservedLink {
            vlan_id: Some(id),
            parent: Some(parent),
            ..observed(index, name, "vlan")
        }
    }

    /// The links of the ownership scenario (the kernel here has no 8021q, so the VLAN cases
    /// are decided on observed values; tests/netlink_links.rs runs the rest for real).
    #[test]
    fn ownership_is_by_exact_name_marker_or_upstream_vlan_name_never_by_prefix() {
        let ownership = Ownership {
            link_names: [InterfaceName::new("bgp-vrf").unwrap()].into(),
            vlan_parents: [InterfaceName::new("br-ex").unwrap()].into(),
            ..Default::default()
        };
        let links = [
            observed(1, "br-ex", "openvswitch"),
            observed(2, "br-other", "bridge"),
            observed(10, "bgp-vrf", "vrf"),
            observed(11, "bgp-vrf2", "bridge"),
            observed(12, "br-foo", "bridge"),
            ObservedLink {
                alias: Some(AGENT_LINK_ALIAS.to_owned()),
                ..observed(13, "br-100", "bridge")
            },
            // Marked, but of a kind the agent never creates.
            ObservedLink {
                alias: Some(AGENT_LINK_ALIAS.to_owned()),
                ..observed(14, "mv-100", "macvlan")
            },
            vlan(20, "br-ex.100", 1, 100),
            vlan(21, "br-ex.foo", 1, 100),
            // Right name pattern, wrong id for the name.
            vlan(22, "br-ex.200", 1, 201),
            // Right name, on a bridge the agent does not own.
            vlan(23, "br-other.5", 2, 5),
            // Parent unknown (gone).
            vlan(24, "br-ex.7", 99, 7),
            // Own name, a kind the agent never creates (an OVS port named like the VRF).
            observed(25, "bgp-vrf", "openvswitch"),
        ];
        let names: std::collections::HashMap<u32, &str> =
            links.iter().map(|l| (l.index, l.name.as_str())).collect();
        let owned: Vec<&str> = links
            .iter()
            .filter(|l| owned(&ownership, l, |i| names.get(&i).copied()))
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(owned, ["bgp-vrf", "br-100", "br-ex.100"]);
    }

    #[test]
    fn creation_and_marking_carry_the_alias() {
        let made = round_trip(create_request(&spec(LinkKind::Bridge), None));
        assert!(made.marked(), "{made:?}");
        let unmarked = observed(3, "x0", "bridge");
        let r = set_request(&unmarked, None, None, true, false).expect("a change");
        assert_eq!(r.what, "set link x0 alias ovn-bgp-agent");
        assert!(set_request(&made, None, None, true, false).is_none());
        assert!(set_request(&unmarked, None, None, false, false).is_none());
    }

    #[test]
    fn missing_kind_fixes_name_the_config_option() {
        assert_eq!(
            missing_kind_fix("vrf"),
            "modprobe vrf, or set [linux] vrf_device_kind = bridge"
        );
        assert_eq!(
            missing_kind_fix("dummy"),
            "modprobe dummy, or set [linux] nic_device_kind = ifb"
        );
        assert_eq!(missing_kind_fix("vlan"), "modprobe 8021q");
    }
}
