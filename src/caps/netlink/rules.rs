//! Policy rules: `to|from <prefix> lookup <table> priority <n>`.

use ipnet::IpNet;
use rtnetlink::packet_core::NLM_F_CREATE;
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use std::net::IpAddr;

use super::conn::Request;
use crate::system::{RuleSelector, RuleSpec};

/// A rule as dumped. `spec` is `None` when the rule has selectors the agent never uses (it then
/// matches no desired rule and, in an owned table, is removed).
#[derive(Debug, Clone)]
pub(crate) struct ObservedRule {
    pub table: u32,
    pub spec: Option<RuleSpec>,
    pub message: RuleMessage,
}

pub(crate) fn dump_request(family: AddressFamily) -> RouteNetlinkMessage {
    let mut m = RuleMessage::default();
    m.header.family = family;
    RouteNetlinkMessage::GetRule(m)
}

pub(crate) fn parse(message: &RouteNetlinkMessage) -> Option<ObservedRule> {
    let RouteNetlinkMessage::NewRule(m) = message else {
        return None;
    };
    let mut table = u32::from(m.header.table);
    let mut priority = 0;
    let mut dst = None;
    let mut src = None;
    let mut plain = m.header.action == RuleAction::ToTable
        && m.header.tos == 0
        && m.header.flags == RuleFlags::empty();
    for a in &m.attributes {
        match a {
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Priority(p) => priority = *p,
            RuleAttribute::Destination(ip) => dst = Some(*ip),
            RuleAttribute::Source(ip) => src = Some(*ip),
            // Dumped with their "unset" values on every rule.
            RuleAttribute::SuppressPrefixLen(u32::MAX)
            | RuleAttribute::SuppressIfGroup(u32::MAX)
            | RuleAttribute::Protocol(_) => {}
            _ => plain = false,
        }
    }
    let selector = match (dst, src) {
        (Some(ip), None) => IpNet::new(ip, m.header.dst_len).ok().map(RuleSelector::To),
        (None, Some(ip)) => IpNet::new(ip, m.header.src_len)
            .ok()
            .map(RuleSelector::From),
        _ => None,
    };
    let spec = match selector {
        Some(selector) if plain => Some(RuleSpec {
            selector,
            table,
            priority,
        }),
        _ => None,
    };
    Some(ObservedRule {
        table,
        spec,
        message: m.clone(),
    })
}

fn family_of(ip: IpAddr) -> AddressFamily {
    if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

pub(crate) fn describe(spec: &RuleSpec) -> String {
    let (dir, net) = match &spec.selector {
        RuleSelector::To(n) => ("to", n),
        RuleSelector::From(n) => ("from", n),
    };
    format!(
        "rule {dir} {net} lookup {} priority {}",
        spec.table, spec.priority
    )
}

pub(crate) fn add_request(spec: &RuleSpec) -> Request {
    let mut m = RuleMessage::default();
    let net = match &spec.selector {
        RuleSelector::To(n) | RuleSelector::From(n) => *n,
    };
    m.header.family = family_of(net.addr());
    m.header.action = RuleAction::ToTable;
    m.header.table = u8::try_from(spec.table).unwrap_or(0);
    match &spec.selector {
        RuleSelector::To(n) => {
            m.header.dst_len = n.prefix_len();
            m.attributes.push(RuleAttribute::Destination(n.addr()));
        }
        RuleSelector::From(n) => {
            m.header.src_len = n.prefix_len();
            m.attributes.push(RuleAttribute::Source(n.addr()));
        }
    }
    m.attributes.push(RuleAttribute::Table(spec.table));
    m.attributes.push(RuleAttribute::Priority(spec.priority));
    Request {
        message: RouteNetlinkMessage::NewRule(m),
        // No NLM_F_EXCL: with it the kernel walks every rule to look for a duplicate before
        // walking them again to insert (doubling the quadratic cost of 10k rules). Only rules
        // absent from the dump are added; a duplicate from a concurrent writer in an owned
        // table is removed by the next reconcile.
        flags: NLM_F_CREATE,
        what: format!("add {}", describe(spec)),
    }
}

/// Delete the rule `spec` describes (what [`add_request`] added).
pub(crate) fn delete_spec_request(spec: &RuleSpec) -> Request {
    let add = add_request(spec);
    let RouteNetlinkMessage::NewRule(m) = add.message else {
        unreachable!("add_request builds a NewRule")
    };
    Request {
        message: RouteNetlinkMessage::DelRule(m),
        flags: 0,
        what: format!("delete {}", describe(spec)),
    }
}

/// Delete exactly the dumped rule: the kernel matches every attribute sent back.
pub(crate) fn delete_request(rule: &ObservedRule) -> Request {
    let what = match &rule.spec {
        Some(s) => describe(s),
        None => format!("rule {:?} lookup {}", rule.message.attributes, rule.table),
    };
    Request {
        message: RouteNetlinkMessage::DelRule(rule.message.clone()),
        flags: 0,
        what: format!("delete {what}"),
    }
}
