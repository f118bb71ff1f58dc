//! Checks on a whole desired state before anything is applied. Deletions are computed from the
//! desired state, so dropping one bad object and applying the rest would delete its live
//! counterpart: an invalid state is refused as a whole.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::system::{DesiredSystem, LinkKind, RouteType};

use super::sysctl;

/// Table numbers the agent never owns or writes to: unspec, default, main, local.
pub fn is_reserved_table(table: u32) -> bool {
    matches!(table, 0 | 253..=255)
}

fn bad_host_ip(ip: IpAddr) -> bool {
    ip.is_unspecified() || ip.is_multicast()
}

/// Every problem of the desired state, empty when it can be applied.
pub fn problems(desired: &DesiredSystem) -> Vec<String> {
    let mut p = Vec::new();
    for t in &desired.ownership.tables {
        if is_reserved_table(*t) {
            p.push(format!(
                "ownership of table {t}: reserved table (unspec/default/main/local)"
            ));
        }
    }
    let mut names = BTreeMap::new();
    for l in &desired.links {
        if let Some(prev) = names.insert(l.name.clone(), l) {
            p.push(format!(
                "link {} desired twice with different settings ({prev:?} / {l:?})",
                l.name
            ));
        }
        if l.master.as_ref() == Some(&l.name) {
            p.push(format!("link {} cannot be its own master", l.name));
        }
        match &l.kind {
            LinkKind::Vrf { table } if is_reserved_table(*table) => {
                p.push(format!("link {}: vrf table {table} is reserved", l.name))
            }
            LinkKind::Vlan { parent, id } => {
                if !(1..=4094).contains(id) {
                    p.push(format!("link {}: vlan id {id} outside 1..=4094", l.name));
                }
                if parent == &l.name {
                    p.push(format!("link {}: vlan parent is itself", l.name));
                }
            }
            LinkKind::Vxlan {
                vni,
                dstport,
                local,
            } => {
                if !(1..=0xFF_FFFF).contains(vni) {
                    p.push(format!("link {}: vni {vni} outside 1..=16777215", l.name));
                }
                if *dstport == 0 {
                    p.push(format!("link {}: vxlan dstport 0", l.name));
                }
                if local.is_some_and(bad_host_ip) {
                    p.push(format!(
                        "link {}: vxlan local {local:?} is not a host address",
                        l.name
                    ));
                }
            }
            LinkKind::Veth { peer } if peer == &l.name => {
                p.push(format!("link {}: veth peer is itself", l.name))
            }
            _ => {}
        }
    }
    for a in &desired.addresses {
        if bad_host_ip(a.addr.addr()) {
            p.push(format!(
                "address {} dev {}: not a unicast address",
                a.addr, a.dev
            ));
        }
    }
    for r in &desired.rules {
        if is_reserved_table(r.table) {
            p.push(format!(
                "rule {:?}: table {} is reserved",
                r.selector, r.table
            ));
        }
        if r.priority == 0 {
            p.push(format!(
                "rule {:?}: priority 0 belongs to the local table rule",
                r.selector
            ));
        }
    }
    let mut identities = BTreeMap::new();
    for r in &desired.routes {
        let what = format!("route {} table {}", r.dst, r.table);
        // Two routes the kernel cannot tell apart would replace each other on every reconcile.
        let metric = r
            .metric
            .unwrap_or(if r.dst.addr().is_ipv6() { 1024 } else { 0 });
        if let Some(prev) = identities.insert((r.table, r.dst.trunc(), metric), r)
            && prev != r
        {
            p.push(format!(
                "{what}: desired twice with the same metric ({prev:?} / {r:?})"
            ));
        }
        if is_reserved_table(r.table) {
            p.push(format!("{what}: table is reserved"));
        }
        if r.via.is_some_and(|v| v.is_ipv4() != r.dst.addr().is_ipv4()) {
            p.push(format!("{what}: gateway of the other address family"));
        }
        match r.route_type {
            RouteType::Unreachable if r.via.is_some() || r.dev.is_some() => p.push(format!(
                "{what}: an unreachable route has no gateway or device"
            )),
            RouteType::Unicast if r.via.is_none() && r.dev.is_none() => {
                p.push(format!("{what}: needs a gateway or a device"))
            }
            _ => {}
        }
        if r.scope_link && r.via.is_some() {
            p.push(format!("{what}: scope link with a gateway"));
        }
    }
    let mut neigh = BTreeMap::new();
    for n in &desired.neighbours {
        if bad_host_ip(n.ip) {
            p.push(format!(
                "neighbour {} dev {}: not a unicast address",
                n.ip, n.dev
            ));
        }
        if let Some(prev) = neigh.insert((n.dev.clone(), n.ip), n.lladdr)
            && prev != n.lladdr
        {
            p.push(format!(
                "neighbour {} dev {}: two MAC addresses ({prev}, {})",
                n.ip, n.dev, n.lladdr
            ));
        }
    }
    for n in &desired.proxy_neighbours {
        if bad_host_ip(n.ip) {
            p.push(format!(
                "proxy neighbour {} dev {}: not a unicast address",
                n.ip, n.dev
            ));
        }
    }
    for (k, v) in &desired.sysctls {
        if let Err(e) = sysctl::key_path(k) {
            p.push(e.to_string());
        }
        if let Err(e) = sysctl::check_value(k, v) {
            p.push(e.to_string());
        }
    }
    p
}
