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
                ..ExposedIp::announced(
                    ip.addr(),
                    ExposureKind::GatewayPort,
                    crlrp.logical_port.as_str(),
                )
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
                        port.logical_port.as_str(),
                    ));
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeSet;
    use std::net::IpAddr;

    use super::*;
    use crate::exposure::ExposureScope;
    use crate::ovn::neutron::keys;

    const CH: &str = "c0000000-0000-0000-0000-000000000001";
    const OTHER_CH: &str = "c0000000-0000-0000-0000-000000000002";
    const ROUTER_DP: &str = "router";
    const PROVIDER_DP: &str = "provider";
    const TENANT_DP: &str = "tenant";
    const GW_MAC: &str = "fa:16:3e:aa:bb:cc";

    fn port(name: &str, ty: &str, dp: &str, mac: &str) -> PortBinding {
        PortBinding {
            uuid: format!("uuid-{name}"),
            logical_port: name.into(),
            port_type: ty.into(),
            datapath: dp.into(),
            mac: if mac.is_empty() {
                vec![]
            } else {
                vec![mac.into()]
            },
            ..Default::default()
        }
    }

    fn opt(mut p: PortBinding, k: &str, v: &str) -> PortBinding {
        p.options.insert(k.into(), v.into());
        p
    }

    fn evpn(mut p: PortBinding, vni: &str, asn: &str) -> PortBinding {
        p.external_ids.insert(keys::BGPVPN_VNI.into(), vni.into());
        p.external_ids.insert(keys::BGPVPN_AS.into(), asn.into());
        p
    }

    fn bound(mut p: PortBinding, chassis: &str) -> PortBinding {
        p.chassis = Some(chassis.into());
        p
    }

    /// Router `gw` (dual-stack gateway bound here on the flat provider network `public`, EVPN
    /// VNI 1001 AS 64999) with a dual-stack subnet attached with the same settings, and VMs on it.
    pub(in crate::drivers::evpn) fn model() -> SbModel {
        let mut m = SbModel::default();
        m.upsert_chassis(CH.into(), "node1".into());
        m.upsert_chassis(OTHER_CH.into(), "node2".into());
        for p in [
            opt(
                port("provnet-1", "localnet", PROVIDER_DP, "unknown"),
                "network_name",
                "public",
            ),
            bound(
                port(
                    "cr-lrp-gw",
                    "chassisredirect",
                    ROUTER_DP,
                    &format!("{GW_MAC} 172.24.100.5/24 2001:db8::5/64"),
                ),
                CH,
            ),
            opt(
                opt(port("lrp-gw", "patch", ROUTER_DP, GW_MAC), "peer", "gw"),
                "chassis-redirect-port",
                "cr-lrp-gw",
            ),
            evpn(
                opt(port("gw", "patch", PROVIDER_DP, "router"), "peer", "lrp-gw"),
                "1001",
                "64999",
            ),
            opt(
                port(
                    "lrp-sub",
                    "patch",
                    ROUTER_DP,
                    "fa:16:3e:dd:ee:ff 10.0.0.1/24 fd00::1/64",
                ),
                "peer",
                "sub",
            ),
            evpn(
                opt(port("sub", "patch", TENANT_DP, "router"), "peer", "lrp-sub"),
                "1001",
                "64999",
            ),
            bound(
                port("vm1", "", TENANT_DP, "fa:16:3e:00:00:10 10.0.0.10 fd00::10"),
                OTHER_CH,
            ),
            bound(
                port("vm-outside", "", TENANT_DP, "fa:16:3e:00:00:11 10.9.9.9"),
                OTHER_CH,
            ),
            port("vm-unbound", "", TENANT_DP, "fa:16:3e:00:00:12 10.0.0.12"),
            bound(
                port("vip", "virtual", TENANT_DP, "fa:16:3e:00:00:13 10.0.0.13"),
                CH,
            ),
            bound(
                port(
                    "provider-vm",
                    "",
                    PROVIDER_DP,
                    "fa:16:3e:00:00:14 172.24.100.14",
                ),
                CH,
            ),
        ] {
            m.upsert_port(p);
        }
        m
    }

    pub(in crate::drivers::evpn) fn node1() -> ChassisIdentity {
        ChassisIdentity {
            system_id: "node1".into(),
            bridge_mappings: vec![("public".into(), "br-ex".into())],
            ..Default::default()
        }
    }

    fn vni(n: u32) -> Vni {
        Vni::new(n).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn scope(set: &ExposureSet, n: u32) -> &ExposureScope {
        set.scopes
            .get(&ScopeId::Evpn(vni(n)))
            .unwrap_or_else(|| panic!("no scope evpn:{n} in {set:#?}"))
    }

    fn ips(scope: &ExposureScope) -> Vec<(IpAddr, ExposureKind, &str)> {
        scope
            .ips
            .values()
            .map(|e| (e.ip, e.kind, &*e.source))
            .collect()
    }

    fn reasons(set: &ExposureSet) -> Vec<String> {
        set.skipped
            .iter()
            .map(|s| format!("{}: {}", s.row, s.reason))
            .collect()
    }

    pub(in crate::drivers::evpn) fn with(
        m: &mut SbModel,
        name: &str,
        change: impl FnOnce(&mut PortBinding),
    ) {
        let mut p = m.port_named(name).unwrap().clone();
        change(&mut p);
        m.upsert_port(p);
    }

    #[test]
    fn a_gateway_bound_here_with_a_vpn_is_a_vni_scope_with_its_subnets_and_vms() {
        let set = compute(&model(), &node1());
        assert!(set.skipped.is_empty(), "{:?}", reasons(&set));
        // Provider VMs and FIPs are not exposed by this driver (upstream "TO DO").
        assert!(set.global().is_empty(), "{:?}", set.global());
        assert_eq!(set.scopes.len(), 2);
        let s = scope(&set, 1001);
        let provider = ProviderNetwork {
            physnet: "public".into(),
            bridge: "br-ex".parse().unwrap(),
            vlan: None,
            evpn: None,
        };
        let mut params = EvpnParams::new(vni(1001), Asn::new(64999).unwrap());
        params.attachments.insert(EvpnAttachment::RouterGateway {
            provider: provider.clone(),
        });
        assert_eq!(s.evpn, Some(params));
        assert_eq!(
            s.evpn.as_ref().unwrap().rd,
            None,
            "the backend derives the RD (U01)"
        );
        assert_eq!(
            ips(s),
            [
                (ip("10.0.0.10"), ExposureKind::TenantPort, "vm1"),
                (ip("10.0.0.13"), ExposureKind::TenantPort, "vip"),
                (ip("172.24.100.5"), ExposureKind::GatewayPort, "cr-lrp-gw"),
                (ip("2001:db8::5"), ExposureKind::GatewayPort, "cr-lrp-gw"),
                (ip("fd00::10"), ExposureKind::TenantPort, "vm1"),
            ]
        );
        let gw4 = &s.ips[&ip("172.24.100.5")];
        assert_eq!(gw4.lladdr, Some(GW_MAC.parse().unwrap()));
        assert_eq!(gw4.provider.as_ref(), Some(&provider));
        assert!(gw4.ndp_proxy.is_empty());
        let gw6 = &s.ips[&ip("2001:db8::5")];
        assert_eq!(
            gw6.ndp_proxy,
            BTreeSet::from(["2001:db8::/64".parse().unwrap()])
        );
        let tenant = &s.ips[&ip("10.0.0.10")];
        assert_eq!(
            (tenant.provider.as_ref(), tenant.lladdr, tenant.via),
            (None, None, None)
        );
        let subnets: Vec<(String, IpAddr, &str)> = s
            .subnets
            .iter()
            .map(|n| (n.router_ip.to_string(), n.via, n.source.as_str()))
            .collect();
        assert_eq!(
            subnets,
            [
                ("10.0.0.1/24".to_owned(), ip("172.24.100.5"), "lrp-sub"),
                ("fd00::1/64".to_owned(), ip("2001:db8::5"), "lrp-sub"),
            ]
        );
        assert!(s.subnets.iter().all(|n| n.provider == provider));
        // The bridge wiring (ARP/NDP, the localnet patch port the redirect flows match on).
        let wiring = &set.bridges[&"br-ex".parse().unwrap()];
        assert_eq!(
            wiring.localnet_ports,
            BTreeSet::from(["provnet-1".to_owned()])
        );
    }

    #[test]
    fn nothing_without_a_gateway_here_or_without_vpn_settings() {
        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| p.chassis = Some(OTHER_CH.into()));
        let set = compute(&m, &node1());
        assert_eq!(set.scopes.len(), 1, "only the empty global scope");
        assert!(set.skipped.is_empty());

        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| p.chassis = None);
        assert_eq!(compute(&m, &node1()).scopes.len(), 1);

        // A router without networking-bgpvpn settings is the SB BGP driver's, silently.
        let mut m = model();
        with(&mut m, "gw", |p| p.external_ids.clear());
        let set = compute(&m, &node1());
        assert_eq!((set.scopes.len(), set.skipped.len()), (1, 0));

        // An unknown chassis name (identity not yet in the replica).
        let other = ChassisIdentity {
            system_id: "node9".into(),
            ..node1()
        };
        assert_eq!(compute(&model(), &other).scopes.len(), 1);
    }

    #[test]
    fn hostile_or_incomplete_settings_are_skipped_with_the_reason() {
        for (key, value) in [
            (keys::BGPVPN_VNI, "ten"),
            (keys::BGPVPN_VNI, "16777216"),
            (keys::BGPVPN_VNI, "1001\nexit"),
            (keys::BGPVPN_VNI, "1001;"),
            (keys::BGPVPN_AS, "0"),
            (keys::BGPVPN_AS, "64999; no router bgp"),
        ] {
            let mut m = model();
            with(&mut m, "gw", |p| {
                p.external_ids.insert(key.into(), value.into());
            });
            let set = compute(&m, &node1());
            assert_eq!(set.scopes.len(), 1, "{key}={value:?} exposed");
            let r = reasons(&set);
            assert_eq!(r.len(), 1, "{r:?}");
            assert!(
                r[0].contains("(gw)") && r[0].contains(key) && r[0].contains(&format!("{value:?}")),
                "{r:?}"
            );
        }
        let mut m = model();
        with(&mut m, "gw", |p| {
            p.external_ids.remove(keys::BGPVPN_AS);
        });
        let r = reasons(&compute(&m, &node1()));
        assert!(r[0].contains("neutron_bgpvpn:as is missing"), "{r:?}");

        // A hostile subnet does not stop its gateway.
        let mut m = model();
        with(&mut m, "sub", |p| {
            p.external_ids.insert(keys::BGPVPN_VNI.into(), "x".into());
        });
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        assert!(s.subnets.is_empty());
        assert_eq!(s.ips.len(), 2, "the gateway's IPs only");
        assert!(reasons(&set)[0].contains("(sub)"), "{:?}", reasons(&set));
    }

    #[test]
    fn a_subnet_attached_with_other_settings_is_not_exposed() {
        let mut m = model();
        with(&mut m, "sub", |p| {
            p.external_ids
                .insert(keys::BGPVPN_AS.into(), "65000".into());
        });
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        assert!(s.subnets.is_empty());
        assert!(!s.ips.contains_key(&ip("10.0.0.10")));
        let r = reasons(&set);
        assert!(
            r[0].contains("VNI 1001 AS 65000") && r[0].contains("VNI 1001 AS 64999"),
            "{r:?}"
        );

        // Detached (settings removed): silently not exposed.
        let mut m = model();
        with(&mut m, "sub", |p| p.external_ids.clear());
        let set = compute(&m, &node1());
        assert!(scope(&set, 1001).subnets.is_empty() && set.skipped.is_empty());
    }

    #[test]
    fn unusable_gateways_are_skipped_with_the_reason() {
        // No bridge mapping for the provider network.
        let unmapped = ChassisIdentity {
            bridge_mappings: vec![("other".into(), "br-other".into())],
            ..node1()
        };
        let set = compute(&model(), &unmapped);
        assert_eq!(set.scopes.len(), 1);
        let r = reasons(&set);
        assert!(
            r[0].contains("physnet public") && r[0].contains("ovn-bridge-mappings"),
            "{r:?}"
        );

        // The provider localnet gone: the datapath is no provider network.
        let mut m = model();
        m.remove_port("uuid-provnet-1");
        let r = reasons(&compute(&m, &node1()));
        assert!(r[0].contains("no localnet port"), "{r:?}");

        // A gateway without addresses.
        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| p.mac = vec![GW_MAC.into()]);
        let r = reasons(&compute(&m, &node1()));
        assert!(r[0].contains("has no IP address"), "{r:?}");
    }

    #[test]
    fn a_vlan_provider_network_is_attached_with_its_tag() {
        let mut m = model();
        with(&mut m, "provnet-1", |p| p.tag = Some(100));
        let set = compute(&m, &node1());
        let params = scope(&set, 1001).evpn.as_ref().unwrap();
        let vlans: Vec<Option<u16>> = params
            .attachments
            .iter()
            .map(|a| a.provider().vlan)
            .collect();
        assert_eq!(vlans, [Some(100)]);
    }

    #[test]
    fn a_subnet_family_the_gateway_lacks_is_not_routed() {
        let mut m = model();
        with(&mut m, "cr-lrp-gw", |p| {
            p.mac = vec![format!("{GW_MAC} 172.24.100.5/24")]
        });
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        let routed: Vec<String> = s.subnets.iter().map(|n| n.router_ip.to_string()).collect();
        assert_eq!(routed, ["10.0.0.1/24"]);
        assert!(!s.ips.contains_key(&ip("fd00::10")));
    }

    /// A second router on this chassis: `cr-lrp-gx` sorts after `cr-lrp-gw`, so it is second.
    fn second_router(m: &mut SbModel, vni: &str, asn: &str, provider_dp: &str) {
        for p in [
            bound(
                port(
                    "cr-lrp-gx",
                    "chassisredirect",
                    "router2",
                    "fa:16:3e:aa:bb:dd 172.24.100.6/24",
                ),
                CH,
            ),
            evpn(
                opt(port("gx", "patch", provider_dp, "router"), "peer", "lrp-gx"),
                vni,
                asn,
            ),
        ] {
            m.upsert_port(p);
        }
    }

    #[test]
    fn a_vni_claimed_twice_goes_to_the_first_gateway_unless_the_settings_agree() {
        // Different AS: the first gateway (by name) keeps the VNI, the other is skipped.
        let mut m = model();
        second_router(&mut m, "1001", "65000", PROVIDER_DP);
        let set = compute(&m, &node1());
        let s = scope(&set, 1001);
        assert_eq!(s.evpn.as_ref().unwrap().bgp_as.get(), 64999);
        assert!(!s.ips.contains_key(&ip("172.24.100.6")));
        let r = reasons(&set);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].contains("(cr-lrp-gx)") && r[0].contains("cr-lrp-gw with AS 64999"),
            "{r:?}"
        );

        // Same VNI, AS and provider network: one VRF serving both gateways.
        let mut m = model();
        second_router(&mut m, "1001", "64999", PROVIDER_DP);
        let set = compute(&m, &node1());
        assert!(set.skipped.is_empty(), "{:?}", reasons(&set));
        let s = scope(&set, 1001);
        assert!(s.ips.contains_key(&ip("172.24.100.6")));
        assert_eq!(s.evpn.as_ref().unwrap().attachments.len(), 1);

        // Same VNI and AS on another provider network: the VRF has one link to OVS.
        let mut m = model();
        m.upsert_port(opt(
            port("provnet-2", "localnet", "provider2", "unknown"),
            "network_name",
            "public2",
        ));
        second_router(&mut m, "1001", "64999", "provider2");
        let two = ChassisIdentity {
            bridge_mappings: vec![
                ("public".into(), "br-ex".into()),
                ("public2".into(), "br-ex2".into()),
            ],
            ..node1()
        };
        let set = compute(&m, &two);
        let r = reasons(&set);
        assert!(
            r[0].contains("already attached to provider network public"),
            "{r:?}"
        );

        // Another VNI: a second scope.
        let mut m = model();
        second_router(&mut m, "2002", "65000", PROVIDER_DP);
        let set = compute(&m, &node1());
        assert_eq!(scope(&set, 2002).evpn.as_ref().unwrap().bgp_as.get(), 65000);
        assert_eq!(set.scopes.len(), 3);
    }
}
