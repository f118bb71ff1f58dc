//! `ovn-bgp-agent explain` for the stretched L2 driver: the gateways and router ports that
//! mention an address or a port, and the routes they give (computed without address scopes:
//! the filter is named when it applies). On demand only: a scan of the model.

use super::compute::{LRP_PREFIX, StretchedOptions, compute};
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::model::{CHASSISREDIRECT, PortBinding, SbModel};
use crate::plugin::ExplainQuery;

fn mentions(pb: &PortBinding, q: &ExplainQuery) -> bool {
    pb.logical_port == q.text
        || pb.uuid == q.text
        || q.ip.is_some_and(|ip| {
            pb.mac.iter().any(|m| {
                m.split_whitespace()
                    .any(|w| w.split('/').next() == Some(ip.to_string().as_str()))
            })
        })
}

/// The findings about `q`, one line each.
pub(crate) fn explain(
    model: &SbModel,
    _identity: &ChassisIdentity,
    q: &ExplainQuery,
) -> Vec<String> {
    let mut out = Vec::new();
    let set = compute(model, &StretchedOptions::default());
    for pb in model.all_ports().into_iter().filter(|p| mentions(p, q)) {
        let chassis = pb.chassis.as_deref().and_then(|c| model.chassis_name(c));
        out.push(format!(
            "Port_Binding {} ({}): type {:?}, chassis {:?}, datapath {}",
            pb.logical_port, pb.uuid, pb.port_type, chassis, pb.datapath
        ));
        if pb.port_type == CHASSISREDIRECT {
            out.push(
                "  a router gateway: its router's subnets are routed via it on every chassis, \
                 wherever it is bound"
                    .to_owned(),
            );
        } else if !pb.logical_port.starts_with(LRP_PREFIX) || pb.chassis.is_some() {
            out.push(
                "  neither a gateway nor a router port: this driver announces nothing for it"
                    .to_owned(),
            );
        }
        for route in set
            .global()
            .routes
            .values()
            .filter(|r| r.source == pb.logical_port)
        {
            out.push(format!(
                "  announces {} {}",
                route.prefix,
                route
                    .via
                    .map_or_else(|| "on-link".to_owned(), |v| format!("via {v}"))
            ));
        }
        for s in set.skipped.iter().filter(|s| s.row.contains(&pb.uuid)) {
            out.push(format!("  skipped: {}", s.reason));
        }
    }
    if let Some(ip) = q.ip {
        for route in set
            .global()
            .routes
            .values()
            .filter(|r| r.prefix.contains(&ip))
        {
            out.push(format!(
                "{ip} is inside the announced route {} (from {})",
                route.prefix, route.source
            ));
        }
    }
    if out.is_empty() {
        out.push(format!(
            "no gateway or router port of this chassis' Southbound view mentions {:?}: the \
             stretched L2 driver monitors every chassisredirect port, their routers' ports and \
             the switch-side peers of those",
            q.text
        ));
    } else {
        out.push(
            "(computed without [DEFAULT] address_scopes; with them, a subnet is announced only \
             in the gateway's scope of its family, and that scope listed)"
                .to_owned(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_and_an_address_inside_a_route_are_explained() {
        let mut m = SbModel::default();
        m.upsert_port(PortBinding {
            uuid: "u1".into(),
            logical_port: "cr-lrp-gw".into(),
            port_type: CHASSISREDIRECT.into(),
            datapath: "dp".into(),
            mac: vec!["fa:16:3e:00:00:01 172.24.4.10/24".into()],
            ..Default::default()
        });
        m.upsert_port(PortBinding {
            uuid: "u2".into(),
            logical_port: "lrp-sub".into(),
            port_type: "patch".into(),
            datapath: "dp".into(),
            mac: vec!["fa:16:3e:00:00:02 10.0.0.1/24".into()],
            ..Default::default()
        });
        let id = ChassisIdentity::default();
        let lines = explain(&m, &id, &ExplainQuery::new("172.24.4.10")).join("\n");
        assert!(
            lines.contains("cr-lrp-gw") && lines.contains("a router gateway"),
            "{lines}"
        );
        assert!(lines.contains("announces 172.24.4.0/24 on-link"), "{lines}");
        let lines = explain(&m, &id, &ExplainQuery::new("10.0.0.7")).join("\n");
        assert!(
            lines.contains("inside the announced route 10.0.0.0/24 (from lrp-sub)"),
            "{lines}"
        );
        let lines = explain(&m, &id, &ExplainQuery::new("vm9")).join("\n");
        assert!(lines.contains("no gateway or router port"), "{lines}");
    }
}
