//! `ovn-bgp-agent explain` for the SB driver: what this chassis' Southbound rows say about an
//! address or a port (its binding chassis, `up`, type, whether its datapath is a provider
//! network mapped here, the NAT entries resident on it). On demand only: a scan of the local
//! model, never on the event path.

use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::model::{PortBinding, SbModel};
use crate::plugin::ExplainQuery;

fn mentions(pb: &PortBinding, q: &ExplainQuery) -> bool {
    pb.logical_port == q.text
        || pb.uuid == q.text
        || q.ip.is_some_and(|ip| {
            let ip = ip.to_string();
            pb.mac
                .iter()
                .chain(&pb.nat_addresses)
                .any(|m| m.split_whitespace().any(|w| w == ip))
        })
}

/// The findings about `q`, one line each.
pub(crate) fn explain(
    model: &SbModel,
    identity: &ChassisIdentity,
    q: &ExplainQuery,
) -> Vec<String> {
    let mut out = Vec::new();
    let here = identity.system_id.as_str();
    for pb in model.all_ports().into_iter().filter(|p| mentions(p, q)) {
        let chassis = pb.chassis.as_deref().and_then(|c| model.chassis_name(c));
        out.push(format!(
            "Port_Binding {} ({}): type {:?}, chassis {:?}, up {:?}, datapath {}",
            pb.logical_port, pb.uuid, pb.port_type, chassis, pb.up, pb.datapath
        ));
        out.push(match chassis {
            Some(c) if c == here => format!("  bound here ({here})"),
            Some(c) => format!("  bound to chassis {c}, not this one ({here}): not exposed here"),
            None => "  bound to no chassis: nothing to expose here".to_owned(),
        });
        let localnets = model.localnets_on_datapath(&pb.datapath);
        if localnets.is_empty() {
            out.push(
                "  its datapath has no localnet port: a tenant network (exposed only behind a \
                 gateway bound here, with tenant networks on)"
                    .to_owned(),
            );
        }
        for ln in localnets {
            let physnet = ln
                .options
                .get("network_name")
                .map(String::as_str)
                .unwrap_or("");
            out.push(
                match identity.bridge_mappings.iter().find(|(p, _)| p == physnet) {
                    Some((_, bridge)) => {
                        format!("  provider network: physnet {physnet} on bridge {bridge} here")
                    }
                    None => format!(
                        "  physnet {physnet:?} is not in this chassis' bridge mappings: not \
                         exposed here"
                    ),
                },
            );
        }
        for nat in model.nat_ports_resident_on(&pb.logical_port) {
            out.push(format!(
                "  nat_addresses resident on it, from {}: {:?}",
                nat.logical_port, nat.nat_addresses
            ));
        }
    }
    if out.is_empty() {
        out.push(format!(
            "no Port_Binding of this chassis' Southbound view mentions {:?}: the SB driver \
             monitors the ports bound to this chassis ({here}), the gateways bound here and the \
             datapaths behind them; a port bound elsewhere is not exposed here",
            q.text
        ));
    }
    out
}
