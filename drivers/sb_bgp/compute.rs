//! From the Southbound model to the exposures of this chassis (upstream-behaviour.md §1.1).
//!
//! Level-triggered and pure: the same model and options always give the same [`ExposureSet`].
//! Only local objects are visited (ports bound here, the routers of gateway ports bound here and
//! their subnets), through the model's indexes. A row that cannot be used is recorded in
//! `skipped` and the computation goes on (upstream aborted the whole sync, U30/U31).

use std::collections::BTreeSet;

use ipnet::IpNet;

use super::model::{
    PortBinding, SbModel, lb_vip_name, parse_nat_entry, parse_neutron_cidrs, parse_port_addresses,
    vm_port_ips,
};
use crate::exposure::{ExposedIp, ExposedSubnet, ExposureKind, ExposureSet, ProviderNetwork};
use crate::ovn::sb::provider::BridgeMappings;

const TABLE: &str = "Port_Binding";
const CR_LRP_PREFIX: &str = "cr-lrp-";
const LRP_PREFIX: &str = "lrp-";

/// Who this chassis is and what it wires.
#[derive(Debug, Clone, Default)]
pub struct LocalChassis {
    /// `Open_vSwitch.external_ids:system-id` (the SB `Chassis.name`).
    pub name: String,
    /// `ovn-bridge-mappings` in order: (physnet, bridge), unvalidated.
    pub bridge_mappings: Vec<(String, String)>,
}

pub use crate::ovn::tenant::TenantOptions;

struct Ctx<'a> {
    model: &'a SbModel,
    mappings: BridgeMappings,
    tenant: &'a TenantOptions,
    out: ExposureSet,
}

/// The exposures this chassis must have.
pub fn compute(model: &SbModel, local: &LocalChassis, tenant: &TenantOptions) -> ExposureSet {
    let (mappings, out) = BridgeMappings::wired(&local.bridge_mappings, model);
    let mut ctx = Ctx {
        model,
        mappings,
        tenant,
        out,
    };
    for chassis in model.chassis_uuids_named(&local.name) {
        for port in model.ports_on_chassis(&chassis) {
            ctx.expose_local_port(port);
        }
    }
    ctx.out
}

impl<'a> Ctx<'a> {
    /// The provider network a datapath belongs to, if it has a localnet port of a physnet mapped
    /// on this chassis.
    fn provider_of(&self, datapath: &str) -> Option<ProviderNetwork> {
        self.mappings.provider_of(self.model, datapath)
    }

    fn skip(&mut self, port: &PortBinding, reason: impl Into<String>) {
        let reason = reason.into();
        self.out.skip(
            TABLE,
            format!("{} ({})", port.uuid, port.logical_port),
            reason,
        );
    }

    /// IPs of a VM-like port: `mac[0]`, or `neutron:cidrs` when the MAC is `unknown`.
    fn port_ips(&mut self, port: &PortBinding) -> Option<Vec<IpNet>> {
        vm_port_ips(port).unwrap_or_else(|e| {
            self.skip(port, e);
            None
        })
    }

    fn expose_local_port(&mut self, port: &'a PortBinding) {
        if port.up == Some(false) {
            return;
        }
        match port.port_type.as_str() {
            "" | "virtual" => self.expose_vm_port(port),
            "chassisredirect" => self.expose_gateway_port(port),
            _ => {}
        }
        self.expose_fips_resident_on(port);
    }

    fn expose_vm_port(&mut self, port: &PortBinding) {
        let Some(provider) = self.provider_of(&port.datapath) else {
            // Tenant network: reachable through its FIPs (below) or its router's gateway.
            return;
        };
        let Some(ips) = self.port_ips(port) else {
            return;
        };
        let virtual_port = port.port_type == "virtual";
        let ndp_proxy: BTreeSet<IpNet> = if virtual_port {
            match port
                .external_ids
                .get("neutron:cidrs")
                .map(|c| parse_neutron_cidrs(c))
                .transpose()
            {
                Ok(cidrs) => cidrs
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| c.addr().is_ipv6())
                    .map(|c| c.trunc())
                    .collect(),
                Err(e) => {
                    self.skip(port, e);
                    BTreeSet::new()
                }
            }
        } else {
            BTreeSet::new()
        };
        for ip in ips {
            self.out.expose_ip(ExposedIp {
                ip: ip.addr(),
                kind: if virtual_port {
                    ExposureKind::VirtualPort
                } else {
                    ExposureKind::ProviderPort
                },
                source: port.logical_port.clone(),
                provider: Some(provider.clone()),
                lladdr: None,
                ndp_proxy: ndp_proxy.clone(),
                via: None,
            });
        }
    }

    /// FIPs announced by this chassis: `nat_addresses` entries of patch ports that are
    /// resident on `port` (centralized on a gateway port, distributed on a VM port).
    fn expose_fips_resident_on(&mut self, port: &PortBinding) {
        for patch in self.model.nat_ports_resident_on(&port.logical_port) {
            let Some(provider) = self.provider_of(&patch.datapath) else {
                continue;
            };
            for raw in &patch.nat_addresses {
                let entry = match parse_nat_entry(raw) {
                    Ok(e) => e,
                    Err(e) => {
                        self.skip(patch, format!("nat_addresses: {e}"));
                        continue;
                    }
                };
                if entry.resident_port.as_deref() != Some(port.logical_port.as_str()) {
                    continue;
                }
                for ip in entry.ips {
                    self.out.expose_ip(ExposedIp {
                        ip,
                        kind: ExposureKind::FloatingIp,
                        source: patch.logical_port.clone(),
                        provider: Some(provider.clone()),
                        lladdr: None,
                        ndp_proxy: BTreeSet::new(),
                        via: None,
                    });
                }
            }
        }
    }

    fn expose_gateway_port(&mut self, crlrp: &'a PortBinding) {
        let addresses = match parse_port_addresses(&crlrp.mac) {
            Ok(Some(a)) => a,
            Ok(None) => return,
            Err(e) => return self.skip(crlrp, e),
        };
        let Some(id) = crlrp.logical_port.strip_prefix(CR_LRP_PREFIX) else {
            return self.skip(
                crlrp,
                "chassisredirect port name does not start with cr-lrp-",
            );
        };
        // Neutron names the provider-side patch port after the router port id.
        let Some(provider_port) = self.model.port_named(id) else {
            return self.skip(crlrp, format!("provider patch port {id:?} not found"));
        };
        let Some(provider) = self.provider_of(&provider_port.datapath) else {
            return self.skip(
                crlrp,
                "gateway is not on a provider network mapped on this chassis",
            );
        };
        for ip in &addresses.ips {
            let ndp_proxy = if ip.addr().is_ipv6() {
                BTreeSet::from([ip.trunc()])
            } else {
                BTreeSet::new()
            };
            self.out.expose_ip(ExposedIp {
                ip: ip.addr(),
                kind: ExposureKind::GatewayPort,
                source: crlrp.logical_port.clone(),
                provider: Some(provider.clone()),
                lladdr: Some(addresses.mac),
                ndp_proxy,
                via: None,
            });
        }
        let mut router_datapaths = BTreeSet::from([crlrp.datapath.clone()]);
        if self.tenant.enabled() {
            self.expose_tenant_subnets(crlrp, &addresses.ips, &provider, &mut router_datapaths);
        }
        self.expose_provider_lbs(crlrp, &provider_port.datapath, &provider, &router_datapaths);
    }

    fn expose_tenant_subnets(
        &mut self,
        crlrp: &PortBinding,
        gateway_ips: &[IpNet],
        provider: &ProviderNetwork,
        reachable: &mut BTreeSet<String>,
    ) {
        for lrp in self.model.ports_on_datapath(&crlrp.datapath) {
            if lrp.port_type != "patch"
                || !lrp.logical_port.starts_with(LRP_PREFIX)
                || lrp.chassis.is_some()
                || lrp.options.contains_key("chassis-redirect-port")
            {
                continue;
            }
            let Some(peer_name) = lrp.options.get("peer") else {
                continue;
            };
            let addresses = match parse_port_addresses(&lrp.mac) {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    self.skip(lrp, e);
                    continue;
                }
            };
            let peer = self.model.port_named(peer_name);
            if let Some(peer) = peer {
                reachable.insert(peer.datapath.clone());
            }
            for router_ip in addresses.ips {
                if gateway_ips.iter().any(|g| g.addr() == router_ip.addr()) {
                    continue;
                }
                // The subnet is routed via the gateway address of its family; none means this
                // family is not routable through this gateway (upstream: UnboundLocalError, U12).
                let Some(via) = gateway_ips
                    .iter()
                    .map(IpNet::addr)
                    .find(|g| g.is_ipv4() == router_ip.addr().is_ipv4())
                else {
                    continue;
                };
                if !self.tenant.allows_ip(router_ip.addr()) {
                    continue;
                }
                match peer {
                    Some(peer)
                        if !self
                            .tenant
                            .allows_scope(&peer.external_ids, router_ip.addr()) =>
                    {
                        continue;
                    }
                    // The address scope is on the peer row: without it the subnet's scope is
                    // unknown, and with address scopes configured that is a refusal.
                    None if self.tenant.address_scopes.is_some() => {
                        self.skip(
                            lrp,
                            format!(
                                "tenant subnet {router_ip}: address scopes are configured and \
                                 the peer port {peer_name:?} (where the scope is) is missing"
                            ),
                        );
                        continue;
                    }
                    _ => {}
                }
                self.out.global_mut().subnets.insert(ExposedSubnet {
                    router_ip,
                    via,
                    provider: provider.clone(),
                    source: lrp.logical_port.clone(),
                });
                if let Some(peer) = peer {
                    self.expose_tenant_ips(&peer.datapath, router_ip);
                }
            }
        }
    }

    /// Tenant VM and LB VIP addresses inside `subnet`, announced on the gateway chassis.
    fn expose_tenant_ips(&mut self, datapath: &str, subnet: IpNet) {
        let network = subnet.trunc();
        for port in self.model.ports_on_datapath(datapath) {
            let (ips, kind) = match port.port_type.as_str() {
                "" if port.mac.is_empty() && port.chassis.is_none() => {
                    // Octavia OVN-provider VIP port: first address of neutron:cidrs.
                    let Some(cidrs) = port.external_ids.get("neutron:cidrs") else {
                        continue;
                    };
                    match parse_neutron_cidrs(cidrs) {
                        Ok(c) => (
                            c.into_iter().take(1).collect::<Vec<_>>(),
                            ExposureKind::LoadBalancerVip,
                        ),
                        Err(e) => {
                            self.skip(port, e);
                            continue;
                        }
                    }
                }
                "" if port.chassis.is_some() => match self.port_ips(port) {
                    Some(ips) => (ips, ExposureKind::TenantPort),
                    None => continue,
                },
                "virtual" => match self.port_ips(port) {
                    Some(ips) => (ips, ExposureKind::TenantPort),
                    None => continue,
                },
                _ => continue,
            };
            for ip in ips {
                let addr = ip.addr();
                if !network.contains(&addr)
                    || !self.tenant.allows_ip(addr)
                    || !self.tenant.allows_scope(&port.external_ids, addr)
                {
                    continue;
                }
                self.out.expose_ip(ExposedIp {
                    ip: addr,
                    kind,
                    source: port.logical_port.clone(),
                    provider: None,
                    lladdr: None,
                    ndp_proxy: BTreeSet::new(),
                    via: None,
                });
            }
        }
    }

    /// Octavia OVN-provider load balancers with a VIP on the provider network whose members sit
    /// behind this gateway's router.
    fn expose_provider_lbs(
        &mut self,
        crlrp: &PortBinding,
        provider_datapath: &str,
        provider: &ProviderNetwork,
        reachable: &BTreeSet<String>,
    ) {
        for vip_port in self.model.lb_vip_ports_on_datapath(provider_datapath) {
            if !vip_port.port_type.is_empty()
                || vip_port.chassis.is_some()
                || !vip_port.mac.is_empty()
            {
                continue;
            }
            let Some(lb_name) = lb_vip_name(vip_port) else {
                continue;
            };
            let behind_this_router = self
                .model
                .load_balancers_named(lb_name)
                .any(|lb| !lb.datapaths.is_disjoint(reachable));
            if !behind_this_router {
                continue;
            }
            let Some(cidrs) = vip_port.external_ids.get("neutron:cidrs") else {
                continue;
            };
            let vip = match parse_neutron_cidrs(cidrs) {
                Ok(c) => c.into_iter().next(),
                Err(e) => {
                    self.skip(vip_port, e);
                    continue;
                }
            };
            if let Some(vip) = vip {
                self.out.expose_ip(ExposedIp {
                    ip: vip.addr(),
                    kind: ExposureKind::LoadBalancerVip,
                    source: format!("{} via {}", vip_port.logical_port, crlrp.logical_port),
                    provider: Some(provider.clone()),
                    lladdr: None,
                    ndp_proxy: BTreeSet::new(),
                    via: None,
                });
            }
        }
    }
}
