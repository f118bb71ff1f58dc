//! Addresses: dump parsing and add/delete requests.

use ipnet::IpNet;
use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::IpAddr;

use super::conn::Request;

/// An address as dumped: device index and the address with its prefix length.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ObservedAddress {
    pub index: u32,
    pub addr: IpNet,
}

pub(crate) fn dump_request(family: AddressFamily) -> RouteNetlinkMessage {
    dump_request_of(family, 0)
}

/// Dump of one device's addresses (`index`; 0: every device). The session's socket has
/// `NETLINK_GET_STRICT_CHK` set, so the kernel walks that device's addresses alone.
pub(crate) fn dump_request_of(family: AddressFamily, index: u32) -> RouteNetlinkMessage {
    let mut m = AddressMessage::default();
    m.header.family = family;
    m.header.index = index;
    RouteNetlinkMessage::GetAddress(m)
}

pub(crate) fn parse(message: &RouteNetlinkMessage) -> Option<ObservedAddress> {
    let RouteNetlinkMessage::NewAddress(m) = message else {
        return None;
    };
    // IPv4 reports the local address in IFA_LOCAL (IFA_ADDRESS is the peer on p2p links);
    // IPv6 only has IFA_ADDRESS.
    let mut local = None;
    let mut address = None;
    for a in &m.attributes {
        match a {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            _ => {}
        }
    }
    let ip = local.or(address)?;
    let addr = IpNet::new(ip, m.header.prefix_len).ok()?;
    Some(ObservedAddress {
        index: m.header.index,
        addr,
    })
}

fn message(index: u32, addr: IpNet) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header.index = index;
    m.header.prefix_len = addr.prefix_len();
    match addr.addr() {
        IpAddr::V4(_) => {
            m.header.family = AddressFamily::Inet;
            m.attributes.push(AddressAttribute::Local(addr.addr()));
            m.attributes.push(AddressAttribute::Address(addr.addr()));
        }
        IpAddr::V6(_) => {
            m.header.family = AddressFamily::Inet6;
            m.attributes.push(AddressAttribute::Address(addr.addr()));
        }
    }
    m
}

pub(crate) fn add_request(index: u32, dev: &str, addr: IpNet) -> Request {
    Request {
        message: RouteNetlinkMessage::NewAddress(message(index, addr)),
        flags: NLM_F_CREATE | NLM_F_REPLACE,
        what: format!("add address {addr} dev {dev}"),
    }
}

pub(crate) fn delete_request(index: u32, dev: &str, addr: IpNet) -> Request {
    Request {
        message: RouteNetlinkMessage::DelAddress(message(index, addr)),
        flags: 0,
        what: format!("delete address {addr} dev {dev}"),
    }
}
