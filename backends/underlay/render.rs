//! Exposures → kernel, OVS and FRR objects for `exposing_method = underlay`
//! (upstream-behaviour.md §1.0, acceptance rows A1-A10, B1-B6, C1-C7).
//!
//! Pure: everything the system has to tell (table numbers, bridge MACs, the router id) comes in
//! as [`Facts`], so the same inputs always render the same [`DesiredSystem`].

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::backends::counted::SystemObject;
use crate::exposure::{
    BridgeWiring, ExposedIp, ExposedRoute, ExposedSubnet, ExposureSet, ProviderNetwork,
    RealisationNeed, ScopeId,
};
use crate::plugin::Rendered;
use crate::system::{
    AddressSpec, DesiredSystem, LinkKind, LinkSpec, NeighbourSpec, PortFlowSpec,
    ProxyNeighbourSpec, RouteSpec, RouteType, RuleSelector, RuleSpec,
};
use crate::types::{InterfaceName, MacAddr};

/// The cookie of every flow the agent installs on provider bridges (upstream's 999).
pub const FLOW_COOKIE: u64 = 999;
/// Priority of the MAC-tweak flows.
pub const MAC_TWEAK_PRIORITY: u16 = 900;

/// Link kind of the VRF stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VrfKind {
    /// A real VRF bound to the table (production).
    Vrf,
    /// A Linux bridge (kernels without VRF support): routes stay in the main table and FRR
    /// redistributes bgp-nic's connected routes from the default instance.
    Bridge,
}

/// Link kind of the NIC carrying the exposed addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicKind {
    Dummy,
    Ifb,
}

/// The configuration the renderer needs, validated once at start.
#[derive(Debug, Clone)]
pub struct UnderlaySettings {
    pub bgp_nic: InterfaceName,
    pub bgp_vrf: InterfaceName,
    pub vrf_table: u32,
    pub vrf_kind: VrfKind,
    pub nic_kind: NicKind,
    pub rule_priority: u32,
}

impl UnderlaySettings {
    /// Validate the options the underlay backend uses; errors name the section and key.
    pub fn from_config(config: &crate::config::AgentConfig) -> Result<Self, String> {
        let d = &config.default;
        let l = &config.linux;
        let iface = |key: &str, value: &str| {
            InterfaceName::new(value).map_err(|e| format!("[DEFAULT] {key}: {e}"))
        };
        let vrf_kind = match l.vrf_device_kind.as_str() {
            "vrf" => VrfKind::Vrf,
            "bridge" => VrfKind::Bridge,
            other => {
                return Err(format!(
                    "[linux] vrf_device_kind = {other:?}: expected vrf or bridge"
                ));
            }
        };
        let nic_kind = match l.nic_device_kind.as_str() {
            "dummy" => NicKind::Dummy,
            "ifb" => NicKind::Ifb,
            other => {
                return Err(format!(
                    "[linux] nic_device_kind = {other:?}: expected dummy or ifb"
                ));
            }
        };
        Ok(Self {
            bgp_nic: iface("bgp_nic", &d.bgp_nic)?,
            bgp_vrf: iface("bgp_vrf", &d.bgp_vrf)?,
            vrf_table: d.bgp_vrf_table_id,
            vrf_kind,
            nic_kind,
            rule_priority: l.rule_priority,
        })
    }
}

/// What the system told the backend.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Routing table per provider bridge (from the rt_tables file).
    pub tables: BTreeMap<InterfaceName, u32>,
    /// MAC address of each provider bridge's own device (MAC-tweak flow target).
    pub bridge_macs: BTreeMap<InterfaceName, MacAddr>,
}

/// `169.254.` / `fd53:d91e:400:7f17::` helper addresses that make the bridge answer ARP/NDP.
fn arp_ndp_helpers(index: u16, last: u16) -> [IpNet; 2] {
    let k = (index % 256) as u8;
    let v4 = Ipv4Addr::new(169, 254, k, (last % 256) as u8);
    let v6 = Ipv6Addr::new(0xfd53, 0xd91e, 0x0400, 0x7f17, 0, 0, index, last % 256);
    [IpNet::from(IpAddr::V4(v4)), IpNet::from(IpAddr::V6(v6))]
}

pub use crate::system::vlan_device_name;

/// The device traffic for a provider network leaves through: the bridge, or its VLAN device.
fn provider_device(provider: &ProviderNetwork) -> InterfaceName {
    match provider.vlan {
        Some(vlan) => vlan_device_name(&provider.bridge, vlan),
        None => provider.bridge.clone(),
    }
}

fn host_prefix(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

fn proxy_sysctls(out: &mut DesiredSystem, dev: &InterfaceName) {
    // sysctl(8) keys: a dot inside the device name is written `/` (`net.ipv4.conf.br-ex/100...`).
    let dev = dev.as_str().replace('.', "/");
    out.sysctls
        .insert(format!("net.ipv4.conf.{dev}.proxy_arp"), "1".to_owned());
    out.sysctls
        .insert(format!("net.ipv6.conf.{dev}.proxy_ndp"), "1".to_owned());
}

struct Renderer<'a> {
    settings: &'a UnderlaySettings,
    facts: &'a Facts,
    out: Rendered,
}

/// One kernel object an exposure renders to: what the incremental render adds for an exposure
/// and takes out again when the exposure goes or changes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Object {
    Address(AddressSpec),
    Rule(RuleSpec),
    Route(RouteSpec),
    Neighbour(NeighbourSpec),
    ProxyNeighbour(ProxyNeighbourSpec),
}

impl SystemObject for Object {
    fn insert_into(self, system: &mut DesiredSystem) -> bool {
        match self {
            Object::Address(o) => system.addresses.insert(o).is_none(),
            Object::Rule(o) => system.rules.insert(o).is_none(),
            Object::Route(o) => system.routes.insert(o).is_none(),
            Object::Neighbour(o) => system.neighbours.insert(o).is_none(),
            Object::ProxyNeighbour(o) => system.proxy_neighbours.insert(o).is_none(),
        }
    }

    fn remove_from(&self, system: &mut DesiredSystem) -> bool {
        match self {
            Object::Address(o) => system.addresses.remove(o).is_some(),
            Object::Rule(o) => system.rules.remove(o).is_some(),
            Object::Route(o) => system.routes.remove(o).is_some(),
            Object::Neighbour(o) => system.neighbours.remove(o).is_some(),
            Object::ProxyNeighbour(o) => system.proxy_neighbours.remove(o).is_some(),
        }
    }
}

/// Where one exposure's objects and skips go: straight into the rendered state (a full
/// render), or recorded (the incremental render, see [`super::incremental`]).
pub(crate) trait Sink {
    fn object(&mut self, object: Object);
    fn skip(&mut self, row: &str, reason: String);
}

impl Sink for Rendered {
    fn object(&mut self, object: Object) {
        object.insert_into(&mut self.system);
    }

    fn skip(&mut self, row: &str, reason: String) {
        Rendered::skip(self, row, reason);
    }
}

/// What every exposure's rendering depends on besides the exposure itself. The incremental
/// render reuses an exposure's objects only while this is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ItemContext {
    pub tables: BTreeMap<InterfaceName, u32>,
    pub redistributes_kernel: bool,
}

impl ItemContext {
    pub(crate) fn of(facts: &Facts, exposures: &ExposureSet) -> Self {
        Self {
            tables: facts.tables.clone(),
            redistributes_kernel: exposures.redistributes_kernel(),
        }
    }
}

fn table_of(
    tables: &BTreeMap<InterfaceName, u32>,
    bridge: &InterfaceName,
    source: &str,
    out: &mut impl Sink,
) -> Option<u32> {
    let table = tables.get(bridge).copied();
    if table.is_none() {
        out.skip(
            source,
            format!("no routing table for bridge {bridge}; not wired"),
        );
    }
    table
}

/// An IP of the global scope: its address on bgp-nic and, behind a provider bridge, the rule,
/// route, neighbour and proxy neighbours that bring its traffic back to OVS.
pub(crate) fn render_ip(
    settings: &UnderlaySettings,
    tables: &BTreeMap<InterfaceName, u32>,
    exposed: &ExposedIp,
    out: &mut impl Sink,
) {
    if let Some(via) = exposed.via {
        out.skip(
            &exposed.source,
            format!(
                "{}: a nexthop ({via}) cannot be realised by the underlay backend (IPs are \
                 addresses on {})",
                exposed.ip, settings.bgp_nic
            ),
        );
        return;
    }
    let host = host_prefix(exposed.ip);
    out.object(Object::Address(AddressSpec {
        dev: settings.bgp_nic.clone(),
        addr: host,
    }));
    let Some(provider) = &exposed.provider else {
        return;
    };
    let Some(table) = table_of(tables, &provider.bridge, &exposed.source, out) else {
        return;
    };
    let dev = provider_device(provider);
    out.object(Object::Rule(RuleSpec {
        selector: RuleSelector::To(host),
        table,
        priority: settings.rule_priority,
    }));
    out.object(Object::Route(RouteSpec {
        table,
        dst: host,
        route_type: RouteType::Unicast,
        via: None,
        dev: Some(dev.clone()),
        scope_link: exposed.ip.is_ipv4(),
        metric: None,
    }));
    if let Some(lladdr) = exposed.lladdr {
        out.object(Object::Neighbour(NeighbourSpec {
            dev: dev.clone(),
            ip: exposed.ip,
            lladdr,
        }));
    }
    for net in &exposed.ndp_proxy {
        out.object(Object::ProxyNeighbour(ProxyNeighbourSpec {
            dev: dev.clone(),
            ip: net.network(),
        }));
    }
}

/// A route of the global scope: in the VRF table when the driver asks for kernel
/// redistribution.
pub(crate) fn render_route(
    settings: &UnderlaySettings,
    redistributes_kernel: bool,
    route: &ExposedRoute,
    out: &mut impl Sink,
) {
    if !redistributes_kernel {
        out.skip(
            &route.source,
            format!(
                "route {}: routes are only announced when the driver asks for kernel \
                 redistribution",
                route.prefix
            ),
        );
        return;
    }
    // Upstream (stretched L2, NB `subnet` mode): `ip route replace <net> [via <gw>] dev
    // bgp-nic table <bgp_vrf_table_id> proto boot`, on-link routes with scope link.
    out.object(Object::Route(RouteSpec {
        table: settings.vrf_table,
        dst: route.prefix,
        route_type: RouteType::Unicast,
        via: route.via,
        dev: Some(settings.bgp_nic.clone()),
        scope_link: route.via.is_none(),
        metric: None,
    }));
}

/// A tenant subnet behind a router gateway: the rule and route through the provider bridge.
pub(crate) fn render_subnet(
    settings: &UnderlaySettings,
    tables: &BTreeMap<InterfaceName, u32>,
    subnet: &ExposedSubnet,
    out: &mut impl Sink,
) {
    let Some(table) = table_of(tables, &subnet.provider.bridge, &subnet.source, out) else {
        return;
    };
    // Upstream's rule key is the router interface address with its mask (`to 10.0.0.1/24`).
    out.object(Object::Rule(RuleSpec {
        selector: RuleSelector::To(subnet.router_ip),
        table,
        priority: settings.rule_priority,
    }));
    out.object(Object::Route(RouteSpec {
        table,
        dst: subnet.router_ip.trunc(),
        route_type: RouteType::Unicast,
        via: Some(subnet.via),
        dev: Some(provider_device(&subnet.provider)),
        scope_link: false,
        metric: None,
    }));
}

/// Render the desired system; what cannot be realised (a bridge without a table number, an
/// EVPN scope, a nexthop on an IP) is reported in [`Rendered::skipped`] and the rest is still
/// rendered.
pub fn render(settings: &UnderlaySettings, facts: &Facts, exposures: &ExposureSet) -> Rendered {
    let mut out = render_base(settings, facts, exposures);
    let global = exposures.global();
    for exposed in global.ips.values() {
        render_ip(settings, &facts.tables, exposed, &mut out);
    }
    let redistributes = exposures.redistributes_kernel();
    for route in global.routes.values() {
        render_route(settings, redistributes, route, &mut out);
    }
    for subnet in &global.subnets {
        render_subnet(settings, &facts.tables, subnet, &mut out);
    }
    out
}

/// What does not come from one exposure: the VRF and NIC, the bridges' wiring, the ownership
/// scopes, and the skips of scopes the backend cannot realise. Small (a few objects per
/// bridge), so the incremental render recomputes it every time to tell whether it changed.
pub(crate) fn render_base(
    settings: &UnderlaySettings,
    facts: &Facts,
    exposures: &ExposureSet,
) -> Rendered {
    let mut r = Renderer {
        settings,
        facts,
        out: Rendered::default(),
    };
    r.base();
    for (scope, content) in &exposures.scopes {
        if *scope != ScopeId::Global && !content.is_empty() {
            r.out.skip(
                format!("scope {scope}"),
                format!(
                    "the underlay backend has no EVPN VRFs: {} IPs, {} routes, {} subnets not exposed",
                    content.ips.len(),
                    content.routes.len(),
                    content.subnets.len()
                ),
            );
        }
    }
    if exposures.redistributes_kernel() {
        // Routes are announced from the VRF table (FRR redistributes kernel routes): the table's
        // `proto boot` routes are the agent's, so a withdrawn route is deleted.
        r.out.system.ownership.tables.insert(settings.vrf_table);
    }
    if exposures.needs.contains(&RealisationNeed::SweepVrfTable) {
        r.out
            .system
            .ownership
            .swept_tables
            .insert(settings.vrf_table);
    }
    for wiring in exposures.bridges.values() {
        r.bridge(wiring);
    }
    r.out
}

impl Renderer<'_> {
    fn table_of(&mut self, bridge: &InterfaceName, source: &str) -> Option<u32> {
        table_of(&self.facts.tables, bridge, source, &mut self.out)
    }

    /// VRF + NIC, and the ownership scopes every underlay reconcile has.
    fn base(&mut self) {
        let s = self.settings;
        let vrf_kind = match s.vrf_kind {
            VrfKind::Vrf => LinkKind::Vrf { table: s.vrf_table },
            VrfKind::Bridge => LinkKind::Bridge,
        };
        self.out.system.links.insert(LinkSpec {
            name: s.bgp_vrf.clone(),
            kind: vrf_kind,
            master: None,
            mac: None,
            up: true,
        });
        self.out.system.links.insert(LinkSpec {
            name: s.bgp_nic.clone(),
            kind: match s.nic_kind {
                NicKind::Dummy => LinkKind::Dummy,
                NicKind::Ifb => LinkKind::Ifb,
            },
            master: Some(s.bgp_vrf.clone()),
            mac: None,
            up: true,
        });
        let own = &mut self.out.system.ownership;
        own.address_devices.insert(s.bgp_nic.clone());
        own.flow_cookies.insert(FLOW_COOKIE);
        own.link_names.insert(s.bgp_vrf.clone());
        own.link_names.insert(s.bgp_nic.clone());
    }

    fn bridge(&mut self, wiring: &BridgeWiring) {
        let bridge = &wiring.bridge;
        // The provider bridge is OVS's: set up when it is down (as upstream's `ensure_bridge`),
        // never created, even when it is missing (U33).
        self.out.system.links.insert(LinkSpec {
            name: bridge.clone(),
            kind: LinkKind::Existing,
            master: None,
            mac: None,
            up: true,
        });
        let Some(table) = self.table_of(bridge, &format!("bridge {bridge}")) else {
            return;
        };
        let own = &mut self.out.system.ownership;
        own.tables.insert(table);
        own.neighbour_devices.insert(bridge.clone());
        // Default routes: everything looked up in the bridge table leaves through the bridge.
        for (dst, scope_link) in [("0.0.0.0/0", true), ("::/0", false)] {
            self.out.system.routes.insert(RouteSpec {
                table,
                dst: dst.parse().expect("literal prefix"),
                route_type: RouteType::Unicast,
                via: None,
                dev: Some(bridge.clone()),
                scope_link,
                metric: None,
            });
        }
        for addr in arp_ndp_helpers(wiring.index, wiring.index) {
            self.out.system.addresses.insert(AddressSpec {
                dev: bridge.clone(),
                addr,
            });
        }
        proxy_sysctls(&mut self.out.system, bridge);
        // Every `<bridge[:10]>.<vid>` VLAN device on this bridge is the agent's: one whose
        // localnet tag is gone is deleted (A8).
        self.out
            .system
            .ownership
            .vlan_parents
            .insert(bridge.clone());
        for vlan in &wiring.vlans {
            let dev = vlan_device_name(bridge, *vlan);
            self.out.system.links.insert(LinkSpec {
                name: dev.clone(),
                kind: LinkKind::Vlan {
                    parent: bridge.clone(),
                    id: *vlan,
                },
                master: None,
                mac: None,
                up: true,
            });
            self.out
                .system
                .ownership
                .neighbour_devices
                .insert(dev.clone());
            for addr in arp_ndp_helpers(wiring.index, *vlan) {
                self.out.system.addresses.insert(AddressSpec {
                    dev: dev.clone(),
                    addr,
                });
            }
            proxy_sysctls(&mut self.out.system, &dev);
        }
        let Some(mac) = self.facts.bridge_macs.get(bridge) else {
            self.out.skip(
                format!("bridge {bridge}"),
                "MAC address unknown (device missing?); MAC-tweak flows not installed",
            );
            return;
        };
        for localnet in &wiring.localnet_ports {
            for family in ["ip", "ipv6"] {
                self.out.system.flows.insert(PortFlowSpec {
                    bridge: bridge.clone(),
                    in_port: format!("patch-{localnet}-to-br-int"),
                    cookie: FLOW_COOKIE,
                    priority: MAC_TWEAK_PRIORITY,
                    matches: family.to_owned(),
                    actions: format!("mod_dl_dst:{mac},NORMAL"),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_addresses_match_upstream() {
        let [v4, v6] = arp_ndp_helpers(1, 1);
        assert_eq!(v4.to_string(), "169.254.1.1/32");
        assert_eq!(v6.to_string(), "fd53:d91e:400:7f17::1:1/128");
        let [v4, v6] = arp_ndp_helpers(1, 100);
        assert_eq!(v4.to_string(), "169.254.1.100/32");
        assert_eq!(v6.to_string(), "fd53:d91e:400:7f17::1:64/128");
    }

    #[test]
    fn settings_are_validated_with_section_and_key() {
        let mut config = crate::config::AgentConfig::default();
        let s = UnderlaySettings::from_config(&config).unwrap();
        assert_eq!(
            (s.vrf_kind, s.nic_kind, s.vrf_table),
            (VrfKind::Vrf, NicKind::Dummy, 10)
        );
        config.linux.vrf_device_kind = "bridge".into();
        config.linux.nic_device_kind = "ifb".into();
        let s = UnderlaySettings::from_config(&config).unwrap();
        assert_eq!((s.vrf_kind, s.nic_kind), (VrfKind::Bridge, NicKind::Ifb));
        config.default.bgp_nic = "bgp nic;x".into();
        let e = UnderlaySettings::from_config(&config).unwrap_err();
        assert!(e.starts_with("[DEFAULT] bgp_nic:"), "{e}");
        config.default.bgp_nic = "bgp-nic".into();
        config.linux.vrf_device_kind = "macvlan".into();
        let e = UnderlaySettings::from_config(&config).unwrap_err();
        assert!(e.contains("[linux] vrf_device_kind"), "{e}");
    }

    #[test]
    fn vlan_device_names_fit_ifnamsiz() {
        let br = InterfaceName::new("br-provider1").unwrap();
        assert_eq!(vlan_device_name(&br, 4094).as_str(), "br-provide.4094");
    }
}
