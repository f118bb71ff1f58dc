//! From the Southbound model to the EVPN exposures of this chassis (upstream-behaviour.md §1.3).
//!
//! Level-triggered and pure, like the SB BGP driver's computation: the same model and bridge
//! mappings always give the same [`ExposureSet`]; each event class of upstream's
//! `evpn_watcher.py` (§3.2) is a change of the model that this function answers as a whole.
//!
//! Per gateway port (`cr-lrp-<id>`, type `chassisredirect`) bound to this chassis whose
//! router-gateway patch port `<id>` carries a valid `neutron_bgpvpn:vni` and `:as`:
//! - one scope `evpn:<vni>` with [`EvpnParams::new`] (no explicit RD: the backend derives it
//!   from the VTEP address, never `None:<vni>`, U01) and one
//!   [`EvpnAttachment::RouterGateway`] on the gateway's provider network;
//! - the gateway's IPs ([`ExposureKind::GatewayPort`], neighbour MAC, IPv6 NDP proxy);
//! - each router subnet whose switch-side patch port carries the same VNI and AS, routed via
//!   the gateway address of its family;
//! - the IPs of the VMs bound on those subnets (type `""` or `virtual`, with a chassis), only
//!   announced (the backend puts them on `lo-<vni>`).
//!
//! The provider network is the datapath of the patch port `<id>` (found by name, an index
//! lookup), the row the EVPN settings are read from. Upstream scanned every patch port's
//! `nat_addresses` for one mentioning the cr-lrp (`get_fip_associated`); that is the same port in
//! a Neutron deployment, but only while the router has `nat-addresses` set, and it costs a scan
//! and a cloud-wide monitor clause.
//!
//! The global scope stays empty: upstream's EVPN driver does not expose provider VMs or
//! floating IPs ("TO DO" in `ovn_evpn_driver.py`), and neither does this one.
//!
//! A row that cannot be used is recorded in `skipped` with the reason and the rest goes on.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::caps::frr::values::{Asn, Vni};
use crate::exposure::{
    EvpnAttachment, EvpnParams, ExposedIp, ExposedSubnet, ExposureKind, ExposureSet,
    ProviderNetwork, ScopeId,
};
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::condition::{CR_LRP_PREFIX, EvpnSettings};
use crate::ovn::sb::model::{
    CHASSISREDIRECT, PortBinding, SbModel, parse_port_addresses, vm_port_ips,
};
use crate::ovn::sb::provider::BridgeMappings;

const TABLE: &str = "Port_Binding";

/// The router gateway that claimed a VNI first (in the order of the gateway port names).
struct Claim {
    asn: Asn,
    provider: ProviderNetwork,
    gateway: String,
}

struct Ctx<'a> {
    model: &'a SbModel,
    mappings: BridgeMappings,
    claims: BTreeMap<Vni, Claim>,
    out: ExposureSet,
}

/// The EVPN exposures this chassis must have.
pub fn compute(model: &SbModel, identity: &ChassisIdentity) -> ExposureSet {
    // The bridges' ARP/NDP wiring, and the localnet patch ports the redirect flows match on.
    let (mappings, out) = BridgeMappings::wired(&identity.bridge_mappings, model);
    let mut ctx = Ctx {
        model,
        mappings,
        claims: BTreeMap::new(),
        out,
    };
    for chassis in model.chassis_uuids_named(&identity.system_id) {
        // Sorted by port name: which gateway claims a contested VNI first does not depend on
        // hash order or on the order rows arrived in.
        for port in model.ports_on_chassis(&chassis) {
            if port.port_type == CHASSISREDIRECT {
                ctx.expose_gateway(port);
            }
        }
    }
    ctx.out
}

/// A router port's address of the same family as `ip`, among `gateway_ips`.
fn same_family(gateway_ips: &[IpNet], ip: IpNet) -> Option<IpNet> {
    gateway_ips
        .iter()
        .copied()
        .find(|g| g.addr().is_ipv4() == ip.addr().is_ipv4())
}

impl<'a> Ctx<'a> {
    fn skip(&mut self, port: &PortBinding, reason: impl Into<String>) {
        self.out.skip(
            TABLE,
            format!("{} ({})", port.uuid, port.logical_port),
            reason,
        );
    }

    fn expose_gateway(&mut self, crlrp: &'a PortBinding) {
        let Some(id) = crlrp.logical_port.strip_prefix(CR_LRP_PREFIX) else {
            // Not a Neutron router gateway: not an EVPN gateway either.
            return;
        };
        let Some(gateway_patch) = self.model.port_named(id) else {
            // Its patch port is not (yet) in the replica: no EVPN settings known.
            return;
        };
        let (vni, asn) = match EvpnSettings::of(gateway_patch) {
            EvpnSettings::Absent => return,
            EvpnSettings::Invalid(reason) => {
                return self.skip(
                    gateway_patch,
                    format!("EVPN gateway {}: {reason}", crlrp.logical_port),
                );
            }
            EvpnSettings::Valid { vni, asn } => (vni, asn),
        };
        let addresses = match parse_port_addresses(&crlrp.mac) {
            Ok(Some(a)) => a,
            Ok(None) => {
                return self.skip(
                    crlrp,
                    format!("EVPN gateway (VNI {}) has no IP address", vni.get()),
                );
            }
            Err(e) => return self.skip(crlrp, e),
        };
        let Some(provider) = self
            .mappings
            .provider_of(self.model, &gateway_patch.datapath)
        else {
            let why = self
                .mappings
                .why_not_provider(self.model, &gateway_patch.datapath);
            return self.skip(
                crlrp,
                format!(
                    "EVPN gateway (VNI {}): its provider network cannot be wired here: {why}",
                    vni.get()
                ),
            );
        };
        match self.claims.get(&vni) {
            Some(first) if first.asn != asn => {
                return self.skip(
                    crlrp,
                    format!(
                        "VNI {} is already used by gateway {} with AS {}; this gateway asks for \
                         AS {}: one VRF cannot have two BGP instances",
                        vni.get(),
                        first.gateway,
                        first.asn.get(),
                        asn.get()
                    ),
                );
            }
            Some(first) if first.provider != provider => {
                return self.skip(
                    crlrp,
                    format!(
                        "VNI {} is already attached to provider network {} (bridge {}) by \
                         gateway {}; this gateway is on {} (bridge {}): the VRF has one link \
                         to OVS",
                        vni.get(),
                        first.provider.physnet,
                        first.provider.bridge,
                        first.gateway,
                        provider.physnet,
                        provider.bridge
                    ),
                );
            }
            Some(_) => {}
            None => {
                self.claims.insert(
                    vni,
                    Claim {
                        asn,
                        provider: provider.clone(),
                        gateway: crlrp.logical_port.clone(),
                    },
                );
            }
        }

        let scope = self.out.scope_mut(ScopeId::Evpn(vni));
        scope
            .evpn
            .get_or_insert_with(|| EvpnParams::new(vni, asn))
            .attachments
            .insert(EvpnAttachment::RouterGateway {
                provider: provider.clone(),
            });
        for ip in &addresses.ips {
            scope.expose_ip(ExposedIp {
                ndp_proxy: if ip.addr().is_ipv6() {
                    [ip.trunc()].into()
                } else {
                    Default::default()
                },
                lladdr: Some(addresses.mac),
                provider: Some(provider.clone()),
                ..ExposedIp::announced(ip.addr(), ExposureKind::GatewayPort, &crlrp.logical_port)
            });
        }
        self.expose_subnets(crlrp, id, (vni, asn), &addresses.ips, &provider);
    }

    /// The router's subnets attached with the gateway's VNI and AS, and their VMs.
    fn expose_subnets(
        &mut self,
        crlrp: &PortBinding,
        gateway_id: &str,
        settings: (Vni, Asn),
        gateway_ips: &[IpNet],
        provider: &ProviderNetwork,
    ) {
        let (vni, _) = settings;
        for lrp in self.model.ports_on_datapath(&crlrp.datapath) {
            if lrp.port_type != "patch"
                || lrp.chassis.is_some()
                || lrp.options.contains_key("chassis-redirect-port")
            {
                continue;
            }
            // The switch-side port (Neutron names it after the port id, `lrp-<id>` ↔ `<id>`)
            // carries the subnet's EVPN settings and is on the subnet's datapath.
            let Some(peer) = lrp
                .options
                .get("peer")
                .filter(|p| p.as_str() != gateway_id)
                .and_then(|p| self.model.port_named(p))
            else {
                continue;
            };
            match EvpnSettings::of(peer) {
                EvpnSettings::Absent => continue,
                EvpnSettings::Invalid(reason) => {
                    self.skip(
                        peer,
                        format!("subnet of EVPN gateway {}: {reason}", crlrp.logical_port),
                    );
                    continue;
                }
                EvpnSettings::Valid { vni: v, asn: a } if (v, a) != settings => {
                    self.skip(
                        peer,
                        format!(
                            "subnet attached with VNI {} AS {}, its router's gateway {} with \
                             VNI {} AS {}: not exposed",
                            v.get(),
                            a.get(),
                            crlrp.logical_port,
                            vni.get(),
                            settings.1.get()
                        ),
                    );
                    continue;
                }
                EvpnSettings::Valid { .. } => {}
            }
            let addresses = match parse_port_addresses(&lrp.mac) {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    self.skip(lrp, e);
                    continue;
                }
            };
            for router_ip in addresses.ips {
                if gateway_ips.iter().any(|g| g.addr() == router_ip.addr()) {
                    continue;
                }
                // No gateway address of the subnet's family: this family is not routable
                // through the gateway (upstream: UnboundLocalError on withdrawal, U12).
                let Some(via) = same_family(gateway_ips, router_ip) else {
                    continue;
                };
                self.out
                    .scope_mut(ScopeId::Evpn(vni))
                    .subnets
                    .insert(ExposedSubnet {
                        router_ip,
                        via: via.addr(),
                        provider: provider.clone(),
                        source: lrp.logical_port.clone(),
                    });
                self.expose_tenant_ips(vni, &peer.datapath, router_ip);
            }
        }
    }

    /// The addresses inside `subnet` of the VMs bound on the subnet's datapath.
    fn expose_tenant_ips(&mut self, vni: Vni, datapath: &str, subnet: IpNet) {
        let network = subnet.trunc();
        for port in self.model.ports_on_datapath(datapath) {
            if !matches!(port.port_type.as_str(), "" | "virtual") || port.chassis.is_none() {
                continue;
            }
            let ips = match vm_port_ips(port) {
                Ok(Some(ips)) => ips,
                Ok(None) => continue,
                Err(e) => {
                    self.skip(port, e);
                    continue;
                }
            };
            for ip in ips.into_iter().filter(|ip| network.contains(&ip.addr())) {
                self.out
                    .scope_mut(ScopeId::Evpn(vni))
                    .expose_ip(ExposedIp::announced(
                        ip.addr(),
                        ExposureKind::TenantPort,
                        &port.logical_port,
                    ));
            }
        }
    }
}
