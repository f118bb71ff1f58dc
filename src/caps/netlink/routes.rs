//! Routes in the agent's tables: `proto boot`, unicast (scope link, via, dev) or unreachable.

use ipnet::IpNet;
use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::conn::Request;
use crate::system::{RouteSpec, RouteType as SpecRouteType};

/// The kernel's default metric of IPv6 routes added without one (`IP6_RT_PRIO_USER`).
const IPV6_DEFAULT_METRIC: u32 = 1024;

/// What the kernel identifies a route by: a second route with the same identity replaces it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteIdentity {
    pub table: u32,
    pub dst: IpNet,
    pub metric: u32,
}

/// A route reduced to what the agent specifies, normalised so that a desired route and its dump
/// compare equal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteKey {
    pub identity: RouteIdentity,
    pub unreachable: bool,
    pub via: Option<IpAddr>,
    pub oif: Option<u32>,
    pub scope_link: bool,
}

#[derive(Debug, Clone)]
pub struct ObservedRoute {
    pub protocol: RouteProtocol,
    /// `None` for routes the agent never writes (multipath, other types): never equal to a
    /// desired route.
    pub key: Option<RouteKey>,
    pub identity: RouteIdentity,
    pub message: RouteMessage,
}

/// Dump of one table. The socket has `NETLINK_GET_STRICT_CHK` set, so the kernel filters by
/// table itself: the main table (a full BGP feed from FRR) and the local table (one route per
/// address) are never read.
pub fn dump_request(family: AddressFamily, table: u32) -> RouteNetlinkMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = family;
    m.header.table = header_table(table);
    m.attributes.push(RouteAttribute::Table(table));
    RouteNetlinkMessage::GetRoute(m)
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(ip) => Some(IpAddr::V4(*ip)),
        RouteAddress::Inet6(ip) => Some(IpAddr::V6(*ip)),
        _ => None,
    }
}

pub fn parse(message: &RouteNetlinkMessage) -> Option<ObservedRoute> {
    let RouteNetlinkMessage::NewRoute(m) = message else {
        return None;
    };
    let h = &m.header;
    let v6 = match h.address_family {
        AddressFamily::Inet => false,
        AddressFamily::Inet6 => true,
        _ => return None,
    };
    let mut table = u32::from(h.table);
    let mut dst = None;
    let mut via = None;
    let mut oif = None;
    let mut metric = 0;
    let mut plain = h.tos == 0 && h.source_prefix_length == 0;
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = route_ip(d),
            RouteAttribute::Gateway(g) => via = route_ip(g),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::MultiPath(_) | RouteAttribute::Via(_) | RouteAttribute::Source(_) => {
                plain = false
            }
            _ => {}
        }
    }
    let unspecified = if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    let dst = IpNet::new(dst.unwrap_or(unspecified), h.destination_prefix_length).ok()?;
    let identity = RouteIdentity { table, dst, metric };
    let unreachable = match h.kind {
        RouteType::Unicast => false,
        RouteType::Unreachable => true,
        _ => {
            plain = false;
            false
        }
    };
    let key = plain.then(|| RouteKey {
        identity: identity.clone(),
        unreachable,
        via,
        // IPv6 unreachable routes are reported on `lo`.
        oif: if unreachable { None } else { oif },
        // IPv6 has no route scopes (always reported as universe).
        scope_link: !v6 && h.scope == RouteScope::Link,
    });
    Some(ObservedRoute {
        protocol: h.protocol,
        key,
        identity,
        message: m.clone(),
    })
}

/// The key a desired route will have once applied; `oif` is the index of `spec.dev`.
pub(crate) fn desired_key(spec: &RouteSpec, oif: Option<u32>) -> RouteKey {
    let dst = spec.dst.trunc();
    let v6 = dst.addr().is_ipv6();
    let unreachable = spec.route_type == SpecRouteType::Unreachable;
    RouteKey {
        identity: RouteIdentity {
            table: spec.table,
            dst,
            metric: spec
                .metric
                .unwrap_or(if v6 { IPV6_DEFAULT_METRIC } else { 0 }),
        },
        unreachable,
        via: spec.via,
        oif: if unreachable { None } else { oif },
        scope_link: !v6 && spec.scope_link,
    }
}

pub(crate) fn describe(spec: &RouteSpec) -> String {
    let mut s = match spec.route_type {
        SpecRouteType::Unicast => format!("route {}", spec.dst.trunc()),
        SpecRouteType::Unreachable => format!("route unreachable {}", spec.dst.trunc()),
    };
    if let Some(v) = spec.via {
        s.push_str(&format!(" via {v}"));
    }
    if let Some(d) = &spec.dev {
        s.push_str(&format!(" dev {d}"));
    }
    s.push_str(&format!(" table {} proto boot", spec.table));
    if spec.scope_link {
        s.push_str(" scope link");
    }
    if let Some(m) = spec.metric {
        s.push_str(&format!(" metric {m}"));
    }
    s
}

fn address(ip: IpAddr) -> RouteAddress {
    match ip {
        IpAddr::V4(a) => RouteAddress::Inet(a),
        IpAddr::V6(a) => RouteAddress::Inet6(a),
    }
}

fn header_table(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC)
}

/// `ip route replace ... proto boot`.
pub(crate) fn add_request(spec: &RouteSpec, oif: Option<u32>) -> Request {
    let dst = spec.dst.trunc();
    let mut m = RouteMessage::default();
    m.header.address_family = if dst.addr().is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    m.header.destination_prefix_length = dst.prefix_len();
    m.header.table = header_table(spec.table);
    m.header.protocol = RouteProtocol::Boot;
    m.header.kind = match spec.route_type {
        SpecRouteType::Unicast => RouteType::Unicast,
        SpecRouteType::Unreachable => RouteType::Unreachable,
    };
    m.header.scope = if spec.scope_link && spec.via.is_none() {
        RouteScope::Link
    } else {
        RouteScope::Universe
    };
    m.attributes.push(RouteAttribute::Table(spec.table));
    if dst.prefix_len() > 0 {
        m.attributes
            .push(RouteAttribute::Destination(address(dst.addr())));
    }
    if let Some(v) = spec.via {
        m.attributes.push(RouteAttribute::Gateway(address(v)));
    }
    if let Some(i) = oif {
        m.attributes.push(RouteAttribute::Oif(i));
    }
    if let Some(p) = spec.metric {
        m.attributes.push(RouteAttribute::Priority(p));
    }
    Request {
        message: RouteNetlinkMessage::NewRoute(m),
        flags: NLM_F_CREATE | NLM_F_REPLACE,
        what: format!("replace {}", describe(spec)),
    }
}

/// Delete the route `spec` describes, as [`add_request`] added it (protocol boot, its scope,
/// type, next hop and metric: the kernel matches each).
pub(crate) fn delete_spec_request(spec: &RouteSpec, oif: Option<u32>) -> Request {
    let add = add_request(spec, oif);
    let RouteNetlinkMessage::NewRoute(m) = add.message else {
        unreachable!("add_request builds a NewRoute")
    };
    Request {
        message: RouteNetlinkMessage::DelRoute(m),
        flags: 0,
        what: format!("delete {}", describe(spec)),
    }
}

/// Whether a foreign route of `protocol` in a swept table ([`crate::system::Ownership::swept_tables`])
/// is the agent's to replace or delete: not the kernel's own (routes of addresses) and not a
/// routing daemon's (zebra 11, babel 42, FRR's 186-199: bgp, isis, ospf, rip, ripng, nhrp,
/// eigrp, ldp, sharp, pbr, static, openfabric, srte).
pub fn sweepable_protocol(protocol: RouteProtocol) -> bool {
    let n = u8::from(protocol);
    !(protocol == RouteProtocol::Kernel || n == 11 || n == 42 || (186..=199).contains(&n))
}

/// Delete a dumped route (the agent's `proto boot` one, or a swept foreign one). The request
/// names the route's protocol, so the kernel itself refuses to delete a route of another
/// protocol with the same destination.
pub fn delete_request(route: &ObservedRoute) -> Request {
    let src = &route.message;
    let mut m = RouteMessage::default();
    m.header.address_family = src.header.address_family;
    m.header.destination_prefix_length = src.header.destination_prefix_length;
    m.header.tos = src.header.tos;
    m.header.table = src.header.table;
    m.header.protocol = route.protocol;
    m.header.scope = src.header.scope;
    m.header.kind = src.header.kind;
    for a in &src.attributes {
        match a {
            RouteAttribute::Table(_)
            | RouteAttribute::Destination(_)
            | RouteAttribute::Gateway(_)
            | RouteAttribute::Oif(_)
            | RouteAttribute::Priority(_) => m.attributes.push(a.clone()),
            _ => {}
        }
    }
    let id = &route.identity;
    Request {
        message: RouteNetlinkMessage::DelRoute(m),
        flags: 0,
        what: format!(
            "delete route {} table {} metric {} proto {}",
            id.dst,
            id.table,
            id.metric,
            match route.protocol {
                RouteProtocol::Boot => "boot".to_owned(),
                other => u8::from(other).to_string(),
            }
        ),
    }
}

/// A host route the kernel made for an address of the host: type local, `proto kernel`,
/// `scope host`, on one device.
#[derive(Debug, Clone)]
pub(crate) struct ObservedLocalRoute {
    pub table: u32,
    pub dst: IpAddr,
    pub oif: u32,
    pub message: RouteMessage,
}

/// The kernel's local route in `message`, if it is one (anything else is `None`, so nothing
/// else can be deleted through [`delete_local_request`]).
pub(crate) fn parse_local(message: &RouteNetlinkMessage) -> Option<ObservedLocalRoute> {
    let RouteNetlinkMessage::NewRoute(m) = message else {
        return None;
    };
    let h = &m.header;
    // IPv6 has no route scopes: its local routes are reported with scope universe.
    let (host_len, scope) = match h.address_family {
        AddressFamily::Inet => (32, RouteScope::Host),
        AddressFamily::Inet6 => (128, RouteScope::Universe),
        _ => return None,
    };
    if h.kind != RouteType::Local
        || h.protocol != RouteProtocol::Kernel
        || h.scope != scope
        || h.destination_prefix_length != host_len
    {
        return None;
    }
    let mut table = u32::from(h.table);
    let mut dst = None;
    let mut oif = None;
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = route_ip(d),
            RouteAttribute::Oif(i) => oif = Some(*i),
            _ => {}
        }
    }
    Some(ObservedLocalRoute {
        table,
        dst: dst?,
        oif: oif?,
        message: m.clone(),
    })
}

/// `ip route del <dst> table <t> proto kernel scope host dev <dev>` (type local): the request
/// names protocol, scope, type and device, so the kernel deletes nothing else.
pub(crate) fn delete_local_request(route: &ObservedLocalRoute, dev: &str) -> Request {
    let src = &route.message;
    let mut m = RouteMessage::default();
    m.header.address_family = src.header.address_family;
    m.header.destination_prefix_length = src.header.destination_prefix_length;
    m.header.table = src.header.table;
    m.header.protocol = RouteProtocol::Kernel;
    m.header.scope = src.header.scope;
    m.header.kind = RouteType::Local;
    for a in &src.attributes {
        match a {
            RouteAttribute::Table(_)
            | RouteAttribute::Destination(_)
            | RouteAttribute::Oif(_)
            | RouteAttribute::Priority(_) => m.attributes.push(a.clone()),
            _ => {}
        }
    }
    Request {
        message: RouteNetlinkMessage::DelRoute(m),
        flags: 0,
        what: format!(
            "delete local route {} dev {dev} table {} proto kernel scope host",
            route.dst, route.table
        ),
    }
}
