//! `ovn-bgp-agent explain` for the NB driver: what this chassis' Northbound rows say about an
//! address or a port, in the driver's own terms (bound chassis, `up`, provider network, FIP
//! mode, gateway hosting). On demand only: a scan of the local model, never on the event path.

use std::net::IpAddr;

use ipnet::IpNet;

use super::compute::{ExposingMethod, LocalChassis, NbOptions, VRF_METHOD, compute};
use crate::exposure::ScopeId;
use crate::ovn::nb::model::{LogicalSwitch, Lsp, NbModel};
use crate::ovn::neutron::{self, keys};
use crate::ovn::table::OvnTable;
use crate::plugin::ExplainQuery;

fn port_mentions(lsp: &Lsp, q: &ExplainQuery) -> bool {
    lsp.name == q.text
        || lsp.uuid == q.text
        || q.ip.is_some_and(|ip| {
            let ip = ip.to_string();
            lsp.addresses
                .iter()
                .any(|a| a.split_whitespace().skip(1).any(|w| w == ip))
                || lsp
                    .external_ids
                    .get(keys::PORT_FIP)
                    .is_some_and(|f| f.split_whitespace().any(|w| w == ip))
        })
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The findings about `q`, one line each.
pub(crate) fn explain(
    model: &NbModel,
    local: &LocalChassis,
    options: &NbOptions,
    hosted: Option<&std::collections::BTreeSet<String>>,
    q: &ExplainQuery,
) -> Vec<String> {
    let mut out = Vec::new();
    let (lsps, nats, lrps, lbs) = model.all_rows();
    let host = local.hostname.as_str();
    for lsp in lsps.into_iter().filter(|l| port_mentions(l, q)) {
        let requested = lsp.options.get(keys::REQUESTED_CHASSIS).map(String::as_str);
        let host_id = lsp.external_ids.get(keys::HOST_ID).map(String::as_str);
        out.push(format!(
            "Logical_Switch_Port {} ({}): type {:?}, up {:?}, requested-chassis {:?}, \
             neutron:host_id {:?}",
            lsp.name, lsp.uuid, lsp.port_type, lsp.up, requested, host_id
        ));
        match lsp.bound_chassis(host) {
            Some(b) if b == host => out.push(format!("  bound here ({host})")),
            Some(b) => out.push(format!(
                "  bound to {b}, not this chassis ({host}): its provider IP is not exposed here"
            )),
            None => out.push("  bound to no chassis: not exposed as a provider port".to_owned()),
        }
        if lsp.up != Some(true) {
            out.push("  not up: exposed only once OVN reports it up".to_owned());
        }
        // The tenant filters, for the addresses of a tenant VM or a router interface's subnet.
        if options.tenant.enabled() {
            let addrs: Vec<IpAddr> = lsp
                .addresses
                .iter()
                .flat_map(|a| a.split_whitespace().skip(1))
                .chain(
                    lsp.external_ids
                        .get(keys::CIDRS)
                        .map(|c| c.split_whitespace().collect::<Vec<_>>())
                        .unwrap_or_default(),
                )
                .filter_map(|w| {
                    w.parse::<IpAddr>()
                        .ok()
                        .or_else(|| w.parse::<IpNet>().ok().map(|n| n.addr()))
                })
                .filter(|a| q.ip.is_none_or(|ip| ip == *a) || lsp.router_interface_of().is_some())
                .collect();
            for addr in addrs {
                if !options.tenant.allows_ip(addr) {
                    out.push(format!(
                        "  tenant address {addr}: refused by expose_tenant_networks / \
                         expose_ipv6_gua_tenant_networks"
                    ));
                } else if !options.tenant.allows_scope(&lsp.external_ids, addr) {
                    let key = if addr.is_ipv4() {
                        keys::ADDRESS_SCOPE4
                    } else {
                        keys::ADDRESS_SCOPE6
                    };
                    out.push(format!(
                        "  tenant address {addr}: address scope {:?} ({key}) is not in \
                         [DEFAULT] address_scopes: not exposed",
                        lsp.external_ids.get(key)
                    ));
                }
            }
        }
        match model.switch_of_port(&lsp.uuid) {
            None => out.push("  its switch is not in this chassis' view".to_owned()),
            Some(ls) => {
                let localnets = model.localnets_on_switch(&ls.uuid);
                if localnets.is_empty() {
                    out.push(format!(
                        "  switch {}: no localnet port, a tenant network (exposed only behind a \
                         gateway hosted here, with tenant networks on)",
                        ls.name
                    ));
                }
                if options.method == ExposingMethod::Vrf
                    && !model.localnets_on_switch(&ls.uuid).is_empty()
                {
                    out.push(format!("  switch {}: {}", ls.name, evpn_reading(ls)));
                }
                for ln in localnets {
                    let physnet = ln.physnet().unwrap_or("");
                    let bridge = local
                        .bridge_mappings
                        .iter()
                        .find(|(p, _)| p == physnet)
                        .map(|(_, b)| b.as_str());
                    out.push(match bridge {
                        Some(b) => format!(
                            "  switch {}: provider network, physnet {physnet} on bridge {b}",
                            ls.name
                        ),
                        None => format!(
                            "  switch {}: physnet {physnet:?} is not in this chassis' bridge \
                             mappings: not exposed here",
                            ls.name
                        ),
                    });
                }
            }
        }
    }
    let distributed = neutron::fip_distributed(model.fip_distributed_raw()).unwrap_or(true);
    for nat in nats.into_iter().filter(|n| {
        n.logical_port == q.text
            || n.uuid == q.text
            || q.ip.is_some_and(|ip| {
                n.external_ip.trim() == ip.to_string() || n.logical_ip.trim() == ip.to_string()
            })
    }) {
        let gateway = nat
            .gateway_port
            .as_deref()
            .and_then(|u| lrps.iter().find(|l| l.uuid == u));
        out.push(format!(
            "NAT {} ({}): {} -> {} port {:?}, gateway port {}; floating IPs are {} \
             (NB_Global neutron:fip-distributed {:?})",
            nat.nat_type,
            nat.uuid,
            nat.external_ip,
            nat.logical_ip,
            nat.logical_port,
            gateway.map_or("-".to_owned(), |g| g.name.clone()),
            if distributed {
                "distributed: exposed on the VM's chassis"
            } else {
                "centralized: exposed on the gateway's chassis"
            },
            model.fip_distributed_raw()
        ));
    }
    for lrp in lrps.iter().filter(|l| {
        l.name == q.text
            || l.uuid == q.text
            || q.ip.is_some_and(|ip| {
                l.networks
                    .iter()
                    .filter_map(|n| n.parse::<IpNet>().ok())
                    .any(|n| n.addr() == ip)
            })
    }) {
        let here = match hosted {
            Some(names) => names.contains(&lrp.name),
            None => lrp.hosting_chassis() == Some(local.system_id.as_str()),
        };
        out.push(format!(
            "Logical_Router_Port {} ({}): networks {:?}, hosting chassis {:?}{}; hosted here \
             (system-id {}): {}",
            lrp.name,
            lrp.uuid,
            lrp.networks,
            lrp.hosting_chassis(),
            if hosted.is_some() {
                " (read from the Southbound chassisredirect bindings: OVN < 23.09)"
            } else {
                ""
            },
            local.system_id,
            yes(here)
        ));
    }
    for lb in lbs.into_iter().filter(|lb| {
        lb.name == q.text
            || q.ip.is_some_and(|ip| {
                let ip = ip.to_string();
                lb.vips
                    .keys()
                    .any(|k| k.trim_start_matches('[').starts_with(&ip))
                    || [keys::LB_VIP, keys::LB_VIP_FIP]
                        .iter()
                        .any(|k| lb.external_ids.get(*k).is_some_and(|v| v.trim() == ip))
            })
    }) {
        out.push(format!(
            "Load_Balancer {} ({}): router {:?}, VIPs {:?}",
            lb.name,
            lb.uuid,
            lb.router_id(),
            lb.vips.keys().collect::<Vec<_>>()
        ));
    }
    if options.method == ExposingMethod::Vrf {
        out.extend(vrf_scopes(model, local, options, hosted, q));
    }
    if out.is_empty() {
        out.push(format!(
            "no row of this chassis' Northbound view mentions {}: the NB driver monitors the \
             ports bound to this host ({host}: requested-chassis or neutron:host_id), live \
             migrations in flight, and the routers whose gateway is hosted here (system-id {}); \
             a port bound elsewhere or behind a gateway hosted elsewhere is not exposed here",
            crate::control::describe(&q.text),
            local.system_id
        ));
    }
    out
}

/// A provider switch's EVPN settings as the `vrf` method reads them.
fn evpn_reading(ls: &LogicalSwitch) -> String {
    let b = ls.bgpvpn();
    if b.is_empty() && b.ignored.is_empty() {
        return "no neutron_bgpvpn:* settings: with exposing_method = vrf nothing on it is \
                exposed"
            .to_owned();
    }
    let problems: Vec<String> = b.ignored.iter().map(ToString::to_string).collect();
    match (b.vpn_type, b.vni) {
        _ if !problems.is_empty() => format!(
            "EVPN settings not usable ({}): the network is not exposed",
            problems.join("; ")
        ),
        (Some(neutron::BgpvpnType::L3), Some(vni)) => format!(
            "L3 EVPN network, VNI {vni} (scope evpn:{vni}), AS {}, RD {:?}, rt {:?}, it {:?}, \
             et {:?}",
            b.asn
                .map_or("[DEFAULT] bgp_AS".to_owned(), |a| a.to_string()),
            b.rd.iter().map(ToString::to_string).collect::<Vec<_>>(),
            b.rt.iter().map(ToString::to_string).collect::<Vec<_>>(),
            b.it.iter().map(ToString::to_string).collect::<Vec<_>>(),
            b.et.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ),
        (Some(neutron::BgpvpnType::L2), _) => {
            "neutron_bgpvpn:type = l2: not served by the vrf method".to_owned()
        }
        _ => "neutron_bgpvpn:type = l3 and a VNI are both needed: not an EVPN network".to_owned(),
    }
}

/// `vrf` method: which EVPN scope the queried address (or the port's addresses) lands in, or
/// the reasons it was refused. Computes the exposures once, on demand.
fn vrf_scopes(
    model: &NbModel,
    local: &LocalChassis,
    options: &NbOptions,
    hosted: Option<&std::collections::BTreeSet<String>>,
    q: &ExplainQuery,
) -> Vec<String> {
    let set = compute(model, local, options, hosted);
    let mut out = Vec::new();
    for (scope, exposed) in set.all_ips() {
        if q.ip != Some(exposed.ip) && *exposed.source != *q.text {
            continue;
        }
        let vrf = match scope {
            ScopeId::Evpn(vni) => format!("scope {scope}: VRF vrf-{vni}, table {vni}"),
            ScopeId::Global => format!("scope {scope}"),
        };
        out.push(format!(
            "{} ({:?} from {}) is exposed in {vrf}{}{}",
            exposed.ip,
            exposed.kind,
            exposed.source,
            exposed
                .via
                .map_or(String::new(), |v| format!(", routed via {v}")),
            exposed
                .provider
                .as_ref()
                .map_or(String::new(), |p| format!(", through bridge {}", p.bridge)),
        ));
    }
    for skipped in &set.skipped {
        let mentions = skipped.row.contains(&q.text)
            || q.ip.is_some_and(|ip| skipped.row.contains(&ip.to_string()));
        if mentions && (skipped.table == VRF_METHOD || skipped.table == LogicalSwitch::TABLE) {
            out.push(format!(
                "not exposed ({}: {}): {}",
                skipped.table, skipped.row, skipped.reason
            ));
        }
    }
    if out.is_empty() && q.ip.is_some() {
        out.push(format!(
            "{} is in no EVPN scope of this chassis (exposing_method = vrf)",
            q.text
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::frr::values::Asn;

    /// The provider switch of the computation's tests with a VM bound to node1 on it.
    fn model(ids: &[(&str, &str)]) -> NbModel {
        let mut m = super::super::compute::tests::evpn_model(ids);
        let mut vm = Lsp {
            uuid: "vm-uuid".into(),
            name: "vm1".into(),
            addresses: vec!["fa:16:3e:00:00:01 172.24.4.21".into()],
            up: Some(true),
            ..Default::default()
        };
        vm.options
            .insert(keys::REQUESTED_CHASSIS.into(), "node1".into());
        m.upsert_lsp(vm);
        let mut ls = m.switch("ls").cloned().expect("the provider switch");
        ls.ports.push("vm-uuid".into());
        m.upsert_switch(ls);
        m
    }

    fn lines(m: &NbModel, q: &str) -> String {
        let local = LocalChassis {
            hostname: "node1".into(),
            system_id: "sys-1".into(),
            bridge_mappings: vec![("public".into(), "br-ex".into())],
        };
        let options = NbOptions {
            method: ExposingMethod::Vrf,
            bgp_as: Asn::new(64999).ok(),
            ..Default::default()
        };
        explain(m, &local, &options, None, &ExplainQuery::new(q)).join("\n")
    }

    #[test]
    fn explain_names_the_evpn_scope_or_why_there_is_none() {
        let evpn = model(&[(keys::BGPVPN_TYPE, "l3"), (keys::BGPVPN_VNI, "100")]);
        let text = lines(&evpn, "172.24.4.21");
        assert!(text.contains("L3 EVPN network, VNI 100"), "{text}");
        assert!(
            text.contains("is exposed in scope evpn:100: VRF vrf-100, table 100"),
            "{text}"
        );
        let plain = model(&[]);
        let text = lines(&plain, "172.24.4.21");
        assert!(text.contains("no neutron_bgpvpn:* settings"), "{text}");
        assert!(text.contains("has no usable EVPN settings"), "{text}");
        let hostile = model(&[
            (keys::BGPVPN_TYPE, "l3"),
            (keys::BGPVPN_VNI, "100"),
            (keys::BGPVPN_RT, "['1:1; exit']"),
        ]);
        let text = lines(&hostile, "vm1");
        assert!(text.contains("EVPN settings not usable"), "{text}");
        assert!(!text.contains("is exposed in scope"), "{text}");
    }
}
