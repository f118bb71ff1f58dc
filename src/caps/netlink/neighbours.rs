//! Permanent neighbours (`ip neigh replace ... nud permanent`) and proxy entries
//! (`ip -6 neigh add proxy ...`).

use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::IpAddr;

use super::conn::Request;
use crate::types::MacAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObservedNeighbour {
    pub index: u32,
    pub ip: IpAddr,
    pub lladdr: Option<[u8; 6]>,
    pub permanent: bool,
    pub proxy: bool,
}

fn family(v6: bool) -> AddressFamily {
    if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    }
}

/// Dump of the neighbour cache, or with `proxy` of the proxy table (`NTF_PROXY` in the request).
pub(crate) fn dump_request(v6: bool, proxy: bool) -> RouteNetlinkMessage {
    let mut m = NeighbourMessage::default();
    m.header.family = family(v6);
    if proxy {
        m.header.flags = NeighbourFlags::Proxy;
    }
    RouteNetlinkMessage::GetNeighbour(m)
}

pub(crate) fn parse(message: &RouteNetlinkMessage) -> Option<ObservedNeighbour> {
    let RouteNetlinkMessage::NewNeighbour(m) = message else {
        return None;
    };
    let mut ip = None;
    let mut lladdr = None;
    for a in &m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => ip = Some(IpAddr::V4(*a)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                ip = Some(IpAddr::V6(*a))
            }
            NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
                let mut mac = [0u8; 6];
                mac.copy_from_slice(l);
                lladdr = Some(mac);
            }
            _ => {}
        }
    }
    Some(ObservedNeighbour {
        index: m.header.ifindex,
        ip: ip?,
        lladdr,
        permanent: m.header.state == NeighbourState::Permanent,
        proxy: m.header.flags.contains(NeighbourFlags::Proxy),
    })
}

fn destination(ip: IpAddr) -> NeighbourAttribute {
    NeighbourAttribute::Destination(match ip {
        IpAddr::V4(a) => NeighbourAddress::Inet(a),
        IpAddr::V6(a) => NeighbourAddress::Inet6(a),
    })
}

fn base(index: u32, ip: IpAddr, proxy: bool) -> NeighbourMessage {
    let mut m = NeighbourMessage::default();
    m.header.family = family(ip.is_ipv6());
    m.header.ifindex = index;
    m.header.state = NeighbourState::Permanent;
    if proxy {
        m.header.flags = NeighbourFlags::Proxy;
    }
    m.attributes.push(destination(ip));
    m
}

pub(crate) fn replace_request(index: u32, dev: &str, ip: IpAddr, lladdr: MacAddr) -> Request {
    let mut m = base(index, ip, false);
    m.attributes
        .push(NeighbourAttribute::LinkLayerAddress(lladdr.0.to_vec()));
    Request {
        message: RouteNetlinkMessage::NewNeighbour(m),
        flags: NLM_F_CREATE | NLM_F_REPLACE,
        what: format!("replace neighbour {ip} lladdr {lladdr} dev {dev} nud permanent"),
    }
}

pub(crate) fn delete_request(index: u32, dev: &str, ip: IpAddr) -> Request {
    Request {
        message: RouteNetlinkMessage::DelNeighbour(base(index, ip, false)),
        flags: 0,
        what: format!("delete neighbour {ip} dev {dev}"),
    }
}

pub(crate) fn add_proxy_request(index: u32, dev: &str, ip: IpAddr) -> Request {
    Request {
        message: RouteNetlinkMessage::NewNeighbour(base(index, ip, true)),
        flags: NLM_F_CREATE | NLM_F_REPLACE,
        what: format!("add proxy neighbour {ip} dev {dev}"),
    }
}

pub(crate) fn delete_proxy_request(index: u32, dev: &str, ip: IpAddr) -> Request {
    Request {
        message: RouteNetlinkMessage::DelNeighbour(base(index, ip, true)),
        flags: 0,
        what: format!("delete proxy neighbour {ip} dev {dev}"),
    }
}
