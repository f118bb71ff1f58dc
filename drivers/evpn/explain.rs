//! `ovn-bgp-agent explain` for the EVPN driver: what this chassis' Southbound rows say about an
//! address or a port in the driver's terms (is it an EVPN gateway, a subnet attached to one, a
//! VM behind one; where it is bound; its `neutron_bgpvpn:*` settings), then what the driver
//! exposes for it and the skip reasons that name it. On demand only: a scan of the local model
//! and one computation, never on the event path.

use super::compute::compute;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::condition::{CR_LRP_PREFIX, EvpnSettings};
use crate::ovn::sb::model::{CHASSISREDIRECT, PortBinding, SbModel};
use crate::ovn::sb::provider::BridgeMappings;
use crate::plugin::ExplainQuery;

fn mentions(pb: &PortBinding, q: &ExplainQuery) -> bool {
    pb.logical_port == q.text
        || pb.uuid == q.text
        || q.ip.is_some_and(|ip| {
            let ip = ip.to_string();
            pb.mac.iter().any(|m| {
                m.split_whitespace()
                    .skip(1)
                    .any(|w| w.split('/').next() == Some(ip.as_str()))
            })
        })
}

fn settings_text(port: &PortBinding) -> String {
    match EvpnSettings::of(port) {
        EvpnSettings::Absent => format!(
            "{} has no neutron_bgpvpn:vni / neutron_bgpvpn:as: not attached to a BGP VPN",
            port.logical_port
        ),
        EvpnSettings::Invalid(reason) => {
            format!("{} has unusable EVPN settings: {reason}", port.logical_port)
        }
        EvpnSettings::Valid { vni, asn } => format!(
            "{} is attached with VNI {} AS {}",
            port.logical_port,
            vni.get(),
            asn.get()
        ),
    }
}

struct Explainer<'a> {
    model: &'a SbModel,
    here: &'a str,
    mappings: BridgeMappings,
    out: Vec<String>,
    /// The ports the findings went through (gateway patch ports, subnet ports): their skip
    /// reasons are shown too.
    related: Vec<String>,
}

impl<'a> Explainer<'a> {
    fn bound(&self, pb: &PortBinding) -> String {
        match pb.chassis.as_deref().map(|c| self.model.chassis_name(c)) {
            Some(Some(c)) if c == self.here => format!("bound here ({c})"),
            Some(Some(c)) => format!("bound to chassis {c}, not this one ({})", self.here),
            // The policy monitors only this chassis' Chassis row.
            Some(None) => format!("bound to another chassis, not this one ({})", self.here),
            None => "bound to no chassis".to_owned(),
        }
    }

    /// The EVPN settings of `port`, after `prefix`; its skip reasons are shown at the end.
    fn settings(&mut self, prefix: &str, port: &PortBinding) {
        self.related.push(port.logical_port.clone());
        self.out.push(format!("  {prefix}{}", settings_text(port)));
    }

    fn bound_here(&self, pb: &PortBinding) -> bool {
        pb.chassis
            .as_deref()
            .and_then(|c| self.model.chassis_name(c))
            .is_some_and(|c| c == self.here)
    }

    /// The gateway (cr-lrp) of router datapath `router`, if the model has it.
    fn gateway_of(&self, router: &str) -> Option<&'a PortBinding> {
        self.model
            .ports_on_datapath(router)
            .into_iter()
            .find(|p| p.port_type == CHASSISREDIRECT)
    }

    fn gateway(&mut self, crlrp: &PortBinding) {
        let bound = self.bound(crlrp);
        self.out.push(format!("  a router gateway port, {bound}"));
        if !self.bound_here(crlrp) {
            self.out
                .push("  only the chassis its gateway is bound to exposes its VPN".to_owned());
        }
        let Some(id) = crlrp.logical_port.strip_prefix(CR_LRP_PREFIX) else {
            self.out.push(format!(
                "  its name does not start with {CR_LRP_PREFIX}: not a Neutron router gateway"
            ));
            return;
        };
        match self.model.port_named(id) {
            None => self.out.push(format!(
                "  its router-gateway patch port {id} is not in this chassis' view: no EVPN \
                 settings known"
            )),
            Some(patch) => {
                self.settings("", patch);
                match self.mappings.provider_of(self.model, &patch.datapath) {
                    Some(p) => self.out.push(format!(
                        "  provider network: physnet {} on bridge {}, VLAN {:?}",
                        p.physnet, p.bridge, p.vlan
                    )),
                    None => self.out.push(format!(
                        "  {}",
                        self.mappings.why_not_provider(self.model, &patch.datapath)
                    )),
                }
            }
        }
    }

    fn router_port(&mut self, lrp: &PortBinding) {
        let Some(peer) = lrp
            .options
            .get("peer")
            .and_then(|p| self.model.port_named(p))
        else {
            self.out
                .push("  a patch port whose peer is not in this chassis' view".to_owned());
            return;
        };
        self.settings(&format!("peer {}: ", peer.logical_port), peer);
        self.router_of(&lrp.datapath);
    }

    /// What the gateway of router datapath `router` says.
    fn router_of(&mut self, router: &str) {
        match self.gateway_of(router) {
            Some(gw) => {
                let bound = self.bound(gw);
                self.out.push(format!(
                    "  its router's gateway {} is {bound}",
                    gw.logical_port
                ));
                if let Some(patch) = gw
                    .logical_port
                    .strip_prefix(CR_LRP_PREFIX)
                    .and_then(|id| self.model.port_named(id))
                {
                    self.settings("gateway: ", patch);
                }
            }
            None => self.out.push(
                "  no router gateway bound here behind it: only routers whose gateway is bound \
                 here are followed"
                    .to_owned(),
            ),
        }
    }

    fn vm(&mut self, vm: &PortBinding) {
        let bound = self.bound(vm);
        self.out.push(format!("  a VM port, {bound}"));
        if vm.chassis.is_none() {
            self.out
                .push("  a VM without a chassis is not announced".to_owned());
        }
        if !self.model.localnets_on_datapath(&vm.datapath).is_empty() {
            self.out.push(
                "  on a provider network: the EVPN driver does not expose provider VMs or \
                 floating IPs (neither does upstream's, a \"TO DO\" there)"
                    .to_owned(),
            );
            return;
        }
        // The router ports whose peer is on this datapath: the subnets the VM is behind.
        let subnets: Vec<&PortBinding> = self
            .model
            .ports_on_datapath(&vm.datapath)
            .into_iter()
            .filter(|p| p.port_type == "patch")
            .collect();
        if subnets.is_empty() {
            self.out.push(
                "  its network has no router port in this chassis' view: it is not behind an \
                 EVPN gateway bound here"
                    .to_owned(),
            );
        }
        for subnet in subnets {
            self.settings("subnet port ", subnet);
            if let Some(lrp) = subnet
                .options
                .get("peer")
                .and_then(|p| self.model.port_named(p))
            {
                self.router_of(&lrp.datapath);
            }
        }
    }

    fn exposures(&mut self, set: &ExposureSet, q: &ExplainQuery, names: &[String]) {
        let mut exposed = false;
        for (scope, ip) in set.all_ips() {
            if q.ip == Some(ip.ip) || names.iter().any(|n| **n == *ip.source) {
                exposed = true;
                self.out.push(format!(
                    "exposed: {} in scope {scope} as {:?} from {}",
                    ip.ip, ip.kind, ip.source
                ));
            }
        }
        for (scope, s) in &set.scopes {
            for subnet in &s.subnets {
                if names.contains(&subnet.source)
                    || q.ip.is_some_and(|ip| subnet.router_ip.contains(&ip))
                {
                    exposed = true;
                    self.out.push(format!(
                        "exposed: subnet {} in scope {scope} via {} from {}",
                        subnet.router_ip.trunc(),
                        subnet.via,
                        subnet.source
                    ));
                }
            }
        }
        for skipped in &set.skipped {
            let about = |n: &String| skipped.row.ends_with(&format!("({n})"));
            if names.iter().chain(&self.related).any(about) {
                self.out.push(format!(
                    "skipped: {} {}: {}",
                    skipped.table, skipped.row, skipped.reason
                ));
            }
        }
        if !exposed {
            self.out.push(format!(
                "not exposed by the EVPN driver on this chassis ({})",
                self.here
            ));
        }
    }
}

/// The findings about `q`, one line each.
pub(crate) fn explain(
    model: &SbModel,
    identity: &ChassisIdentity,
    q: &ExplainQuery,
) -> Vec<String> {
    let mut scratch = ExposureSet::default();
    let mut e = Explainer {
        model,
        here: identity.system_id.as_str(),
        mappings: BridgeMappings::new(&identity.bridge_mappings, &mut scratch),
        out: Vec::new(),
        related: Vec::new(),
    };
    let mut names = Vec::new();
    for pb in model.all_ports().into_iter().filter(|p| mentions(p, q)) {
        names.push(pb.logical_port.clone());
        e.out.push(format!(
            "Port_Binding {} ({}): type {:?}, datapath {}",
            pb.logical_port, pb.uuid, pb.port_type, pb.datapath
        ));
        match pb.port_type.as_str() {
            CHASSISREDIRECT => e.gateway(pb),
            "patch" if pb.options.contains_key("chassis-redirect-port") => {
                e.out.push("  the router side of a gateway port".to_owned());
            }
            "patch" => e.router_port(pb),
            "" | "virtual" => e.vm(pb),
            other => e
                .out
                .push(format!("  type {other:?}: not exposed by the EVPN driver")),
        }
    }
    if e.out.is_empty() {
        e.out.push(format!(
            "no Port_Binding of this chassis' Southbound view mentions {:?}: the EVPN driver \
             monitors the gateways bound to this chassis ({}), the routers of those with \
             neutron_bgpvpn settings, their attached subnets and the localnet ports",
            q.text, e.here
        ));
    }
    let set = compute(model, identity);
    e.exposures(&set, q, &names);
    e.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::evpn::compute::tests::{model, node1, with};
    use crate::ovn::neutron::keys;

    fn explain_text(model: &SbModel, q: &str) -> String {
        explain(model, &node1(), &ExplainQuery::new(q)).join("\n")
    }

    fn has(text: &str, parts: &[&str]) {
        for p in parts {
            assert!(text.contains(p), "{p:?} not in:\n{text}");
        }
    }

    #[test]
    fn explain_says_why_an_address_is_or_is_not_exposed() {
        let m = model();
        has(
            &explain_text(&m, "10.0.0.10"),
            &[
                "Port_Binding vm1",
                "a VM port, bound to chassis node2",
                "subnet port sub is attached with VNI 1001 AS 64999",
                "its router's gateway cr-lrp-gw is bound here (node1)",
                "exposed: 10.0.0.10 in scope evpn:1001 as TenantPort from vm1",
            ],
        );
        has(
            &explain_text(&m, "cr-lrp-gw"),
            &[
                "a router gateway port, bound here (node1)",
                "gw is attached with VNI 1001 AS 64999",
                "provider network: physnet public on bridge br-ex",
                "exposed: 172.24.100.5 in scope evpn:1001 as GatewayPort",
            ],
        );
        has(
            &explain_text(&m, "lrp-sub"),
            &["exposed: subnet 10.0.0.0/24 in scope evpn:1001 via 172.24.100.5"],
        );
        has(
            &explain_text(&m, "172.24.100.14"),
            &[
                "does not expose provider VMs or floating IPs",
                "not exposed by the EVPN driver on this chassis (node1)",
            ],
        );
        has(
            &explain_text(&m, "10.0.0.12"),
            &[
                "bound to no chassis",
                "a VM without a chassis is not announced",
            ],
        );
        has(
            &explain_text(&m, "192.0.2.99"),
            &["no Port_Binding of this chassis' Southbound view mentions \"192.0.2.99\""],
        );

        let mut m = model();
        with(&mut m, "gw", |p| {
            p.external_ids
                .insert(keys::BGPVPN_VNI.into(), "1001;exit".into());
        });
        has(
            &explain_text(&m, "cr-lrp-gw"),
            &[
                "gw has unusable EVPN settings: neutron_bgpvpn:vni = \"1001;exit\"",
                "skipped: Port_Binding uuid-gw (gw)",
                "not exposed by the EVPN driver",
            ],
        );
        // A VM behind a subnet attached with another AS: the subnet's skip reason is shown.
        let mut m = model();
        with(&mut m, "sub", |p| {
            p.external_ids
                .insert(keys::BGPVPN_AS.into(), "65000".into());
        });
        has(
            &explain_text(&m, "vm1"),
            &[
                "subnet port sub is attached with VNI 1001 AS 65000",
                "gateway: gw is attached with VNI 1001 AS 64999",
                "skipped: Port_Binding uuid-sub (sub): subnet attached with VNI 1001 AS 65000",
                "not exposed by the EVPN driver",
            ],
        );
    }
}
