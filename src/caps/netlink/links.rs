//! Links: what a dump says about a device, and the requests that create, adjust or delete one.

use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::link::{
    InfoData, InfoKind, InfoVeth, InfoVlan, InfoVrf, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo,
    LinkMessage,
};
use std::net::IpAddr;

use super::conn::Request;
use crate::system::{LinkKind, LinkSpec};
use crate::types::MacAddr;

/// A link as the kernel reports it.
#[derive(Debug, Clone)]
pub struct ObservedLink {
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
}

pub fn dump_request() -> RouteNetlinkMessage {
    RouteNetlinkMessage::GetLink(LinkMessage::default())
}

/// `RTM_GETLINK` for one name (answered by one message, or ENODEV).
pub fn get_request(name: &str) -> RouteNetlinkMessage {
    let mut m = LinkMessage::default();
    m.attributes.push(LinkAttribute::IfName(name.to_owned()));
    RouteNetlinkMessage::GetLink(m)
}

pub fn parse(message: &RouteNetlinkMessage) -> Option<ObservedLink> {
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
    };
    for attr in &m.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name = n.clone(),
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
                                if let InfoVxlan::Id(id) = i {
                                    link.vxlan_vni = Some(*id);
                                }
                            }
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
pub fn kind_name(kind: &LinkKind) -> &'static str {
    match kind {
        LinkKind::Vrf { .. } => "vrf",
        LinkKind::Dummy => "dummy",
        LinkKind::Ifb => "ifb",
        LinkKind::Bridge => "bridge",
        LinkKind::Vlan { .. } => "vlan",
        LinkKind::Vxlan { .. } => "vxlan",
        LinkKind::Veth { .. } => "veth",
    }
}

/// Kinds the agent creates; only links of these kinds are ever deleted by it.
pub const CREATABLE_KINDS: &[&str] = &["vrf", "dummy", "ifb", "bridge", "vlan", "vxlan", "veth"];

/// The operator's fix when the kernel lacks a kind.
pub fn missing_kind_fix(kind: &str) -> String {
    match kind {
        "vrf" => "modprobe vrf, or set [linux] vrf_device_kind = bridge".to_owned(),
        "dummy" => "modprobe dummy, or set [linux] nic_device_kind = ifb".to_owned(),
        "vlan" => "modprobe 8021q".to_owned(),
        other => format!("modprobe {other}"),
    }
}

/// Does the existing link realise the desired one? `Err` says what differs.
pub fn matches(
    spec: &LinkSpec,
    observed: &ObservedLink,
    parent_index: Option<u32>,
) -> Result<(), String> {
    let want = kind_name(&spec.kind);
    // Upstream's bridge fallback creates a Linux bridge only when no device of that name exists
    // (normally the OVS bridge's own port is there, of kind openvswitch or tun).
    if matches!(spec.kind, LinkKind::Bridge) {
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
        } => {
            let mut v = vec![InfoVxlan::Id(*vni), InfoVxlan::Port(*dstport)];
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
pub fn create_request(spec: &LinkSpec, parent_index: Option<u32>) -> Request {
    let mut m = LinkMessage::default();
    m.attributes
        .push(LinkAttribute::IfName(spec.name.to_string()));
    if let Some(p) = parent_index {
        m.attributes.push(LinkAttribute::Link(p));
    }
    m.attributes
        .push(LinkAttribute::LinkInfo(info_for(&spec.kind)));
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
pub fn probe_request(kind: &str, probe_name: &str) -> Request {
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

/// `ip link set <name> [master M] [address A] [up]`, only with what differs.
pub fn set_request(
    observed: &ObservedLink,
    master: Option<u32>,
    mac: Option<MacAddr>,
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

pub fn delete_request(index: u32, name: &str) -> Request {
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
    use crate::types::InterfaceName;
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
