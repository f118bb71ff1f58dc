//! EVPN scopes → kernel, OVS and FRR objects: the one EVPN realisation shared by the SB
//! `ovn_evpn_driver` and the NB driver's `exposing_method = vrf` (upstream-behaviour.md §1.3,
//! §2 `vrf` column, acceptance rows E1–E3, F1–F3).
//!
//! Per VNI `v`: the VRF `vrf-v` (table `v`), the bridge `br-v` in it, the VXLAN device
//! `vxlan-v` on the bridge (local VTEP, no learning) and the FRR `vrf`/`vni`/`router bgp … vrf`
//! stanzas (an FRR object, removed with `DEL_VRF` when the VNI goes). How the VRF reaches OVS
//! depends on the scope's [`EvpnAttachment`]s:
//!
//! - [`EvpnAttachment::RouterGateway`] (SB EVPN): `veth-vrf-v`↔`veth-ovs-v` (flat) or the OVS
//!   internal port `vlan-v` (tagged); the gateway's addresses as scope-link routes with a
//!   permanent neighbour; router subnets as routes via the gateway and cookie-998 flows that
//!   send their traffic from the provider patch port into the VRF; tenant addresses on the
//!   dummy `lo-v` without the kernel's local route; unreachable defaults in table `v`.
//! - [`EvpnAttachment::Localnet`] (NB `vrf`): `vrf<id>`↔`ovs<id>` per localnet port with the
//!   anycast MAC, the network's gateway addresses, forwarding and proxy ARP/NDP, cookie-999
//!   MAC-tweak flows towards the anycast MAC and router advertisements for IPv6 subnets;
//!   exposures are routes (and neighbours) in table `v` through that veth.
//!
//! Pure: what only the system knows (the VTEP address, the tables the rt_tables file refused)
//! comes in as [`Facts`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv6Net};

use crate::backends::counted::SystemObject;
use crate::caps::frr::objects::FrrObject;
use crate::caps::frr::templates::{AddVrf, ConfigureNd};
use crate::caps::frr::values::{RouteDistinguisher, Vni};
use crate::exposure::{
    EvpnAttachment, EvpnParams, ExposedIp, ExposedSubnet, ExposureScope, ExposureSet,
    LocalnetAttachment, ProviderNetwork, RouteMap, ScopeId,
};
use crate::plugin::Rendered;
use crate::system::{
    AddressSpec, DesiredSystem, FlowAction, LinkKind, LinkSpec, LocalRouteSuppression,
    NeighbourSpec, OvsPortSpec, PortFlowSpec, ProxyNeighbourSpec, RouteSpec, RouteType,
};
use crate::types::{InterfaceName, MacAddr};

/// Cookie of the SB EVPN subnet redirect flows (upstream's 998).
pub const REDIRECT_COOKIE: u64 = 998;
/// Priority of the SB EVPN subnet redirect flows.
pub const REDIRECT_PRIORITY: u16 = 1000;
/// Cookie of the NB `vrf` method's MAC-tweak flows (upstream's 999, as the underlay's).
pub const MAC_TWEAK_COOKIE: u64 = 999;
/// Priority of the MAC-tweak flows.
pub const MAC_TWEAK_PRIORITY: u16 = 900;
/// Metric of the unreachable defaults of a VNI table (upstream's 4278198272), so any route
/// FRR installs from EVPN wins over them.
pub const UNREACHABLE_METRIC: u32 = 4_278_198_272;

/// Link kinds of the VRF and of `lo-<vni>`: the real ones in production; stand-ins where the
/// kernel lacks them (`[linux] vrf_device_kind`, `nic_device_kind`, as for the underlay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VrfSettings {
    /// `true`: VRFs are Linux bridges (no kernel VRF: routes are still put in table `<vni>`,
    /// FRR's EVPN cannot work, which the fast test tier accepts).
    pub vrf_is_bridge: bool,
    pub loopback_kind: LinkKind,
    /// `[DEFAULT] evpn_udp_dstport`.
    pub udp_dstport: u16,
    /// `[DEFAULT] delete_vrf_on_disconnect` (NB `vrf`): when false, a VNI that loses its last
    /// localnet keeps its VRF and FRR stanzas.
    pub delete_vrf_on_disconnect: bool,
}

impl VrfSettings {
    pub fn from_config(config: &crate::config::AgentConfig) -> Result<Self, String> {
        let l = &config.linux;
        let vrf_is_bridge = match l.vrf_device_kind.as_str() {
            "vrf" => false,
            "bridge" => true,
            other => {
                return Err(format!(
                    "[linux] vrf_device_kind = {other:?}: expected vrf or bridge"
                ));
            }
        };
        let loopback_kind =
            crate::caps::netlink::nic_link_kind(&l.nic_device_kind).map_err(|e| e.to_string())?;
        Ok(Self {
            vrf_is_bridge,
            loopback_kind,
            udp_dstport: config.default.evpn_udp_dstport,
            delete_vrf_on_disconnect: config.default.delete_vrf_on_disconnect,
        })
    }
}

/// What only the system can tell the renderer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The local VTEP address: `[DEFAULT] evpn_local_ip`, else resolved from the host
    /// (`None`: no EVPN scope can be realised, each is reported).
    pub vtep: Option<IpAddr>,
    /// Why no VTEP address could be found, for the report.
    pub vtep_problem: Option<String>,
    /// VNIs whose table number the rt_tables file gives to something else, with the reason.
    pub refused_tables: BTreeMap<u32, String>,
    /// Tables of VNIs the agent claimed in the rt_tables file: their routes are the agent's,
    /// also after the VNI is gone (the unreachable defaults outlive the VRF device).
    pub claimed_tables: BTreeSet<u32>,
    /// VNIs kept without exposures (`delete_vrf_on_disconnect = false`), with the parameters
    /// they were configured with.
    pub retained: BTreeMap<Vni, EvpnParams>,
}

fn name(text: String) -> InterfaceName {
    InterfaceName::new(text).expect("prefix + VNI (≤ 8 digits) or 11 uuid characters fit IFNAMSIZ")
}

pub fn vrf_name(vni: Vni) -> InterfaceName {
    AddVrf::default_vrf_name(vni)
}
pub fn bridge_name(vni: Vni) -> InterfaceName {
    name(format!("br-{vni}"))
}
pub fn vxlan_name(vni: Vni) -> InterfaceName {
    name(format!("vxlan-{vni}"))
}
pub fn loopback_name(vni: Vni) -> InterfaceName {
    name(format!("lo-{vni}"))
}
/// The SB EVPN veth pair: `veth-vrf-<vni>`↔`veth-ovs-<vni>`. "veth-vrf-" + 8 digits is 17
/// characters: a VNI of 7 or more digits does not fit IFNAMSIZ (upstream fails to create the
/// device there), so such a pair is named `vv-<vni>`↔`vo-<vni>` instead.
fn veth_pair_names(vni: Vni) -> (InterfaceName, InterfaceName) {
    match (
        InterfaceName::new(format!("veth-vrf-{vni}")),
        InterfaceName::new(format!("veth-ovs-{vni}")),
    ) {
        (Ok(vrf_side), Ok(ovs_side)) => (vrf_side, ovs_side),
        _ => (name(format!("vv-{vni}")), name(format!("vo-{vni}"))),
    }
}

/// The devices through which a scope reaches OVS, per attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Port {
    /// VRF-side device (routes and neighbours go on it).
    vrf_side: InterfaceName,
    /// OVS-side port name.
    ovs_side: InterfaceName,
    /// The MAC the VRF side answers with.
    mac: MacAddr,
    provider: ProviderNetwork,
    /// Where IPv6 NDP proxies for the gateway go (SB: the bridge when flat, `vlan-<vni>`).
    ndp_device: InterfaceName,
}

/// Upstream's anycast MAC: `02:00:00:00:00:00 + (vni << 16 | vlan)` (VNI 100, VLAN 0 →
/// `02:00:00:64:00:00`).
pub fn anycast_mac(vni: Vni, vlan: u16) -> MacAddr {
    let x: u64 = (u64::from(vni.get()) << 16) | u64::from(vlan);
    let b = x.to_be_bytes();
    MacAddr([0x02, b[3], b[4], b[5], b[6], b[7]])
}

/// The EUI-64 link-local address of `mac` (`fe80::/64`), which the kernel derives only when the
/// MAC is set before the device comes up.
pub fn link_local_of(mac: MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 0x02,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

fn same_network(a: &ProviderNetwork, b: &ProviderNetwork) -> bool {
    a.physnet == b.physnet && a.bridge == b.bridge && a.vlan == b.vlan
}

fn host_net(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

/// Render every EVPN scope of `exposures` (the global scope is not this backend's: anything in
/// it is reported).
pub fn render(settings: &VrfSettings, facts: &Facts, exposures: &ExposureSet) -> Rendered {
    let mut out = Rendered::default();
    render_global_skip(exposures, &mut out);
    render_base(facts, exposures, &mut out.system);
    let mut rendered_vnis = BTreeSet::new();
    for (id, scope) in &exposures.scopes {
        let Some(pass) = frame_pass(settings, facts, exposures, id, scope) else {
            continue;
        };
        for (row, reason) in pass.before_ips {
            out.skip(row, reason);
        }
        match pass.frame {
            Ok(mut framed) => {
                let mut sink = FullSink {
                    system: &mut framed.system,
                    out: &mut out,
                };
                for ip in scope.ips.values() {
                    render_ip(&framed.frame, ip, &mut sink);
                }
                for (row, reason) in framed.after_ips {
                    out.skip(row, reason);
                }
                merge(&mut out.system, framed.system);
                rendered_vnis.insert(framed.frame.vni);
            }
            Err(why) => out.skip(id.to_string(), why),
        }
    }
    render_retained(settings, facts, &rendered_vnis, &mut out);
    out
}

/// The report of what the global scope holds: nothing of it is this backend's.
pub(super) fn render_global_skip(exposures: &ExposureSet, out: &mut Rendered) {
    let global = exposures.global();
    if !global.is_empty() {
        out.skip(
            "global scope",
            format!(
                "the vrf realisation exposes only EVPN scopes; {} addresses, {} routes and {} \
                 subnets of the default VRF are not exposed",
                global.ips.len(),
                global.routes.len(),
                global.subnets.len()
            ),
        );
    }
}

/// What stays the agent's after the scope that made it is gone: the VNI tables it claimed
/// (their unreachable defaults outlive the VRF), its flow cookies and the NDP proxies on the
/// provider bridges.
pub(super) fn render_base(facts: &Facts, exposures: &ExposureSet, d: &mut DesiredSystem) {
    d.ownership
        .tables
        .extend(facts.claimed_tables.iter().copied());
    d.ownership
        .flow_cookies
        .extend([REDIRECT_COOKIE, MAC_TWEAK_COOKIE]);
    d.ownership
        .neighbour_devices
        .extend(exposures.bridges.keys().cloned());
}

/// The VRFs kept without exposures (`delete_vrf_on_disconnect = false`) that no scope rendered.
pub(super) fn render_retained(
    settings: &VrfSettings,
    facts: &Facts,
    rendered_vnis: &BTreeSet<Vni>,
    out: &mut Rendered,
) {
    if settings.delete_vrf_on_disconnect {
        return;
    }
    for (vni, params) in &facts.retained {
        if rendered_vnis.contains(vni) {
            continue;
        }
        let mut bare = params.clone();
        bare.attachments.clear();
        if let Err(why) = render_vrf(settings, facts, *vni, &bare, &mut out.system) {
            out.skip(format!("evpn:{vni} (retained)"), why);
        }
    }
}

/// One EVPN scope without its IPs: what every IP of the scope is rendered against.
#[derive(Clone)]
pub(super) struct FramePass {
    /// Reported whether or not the scope renders (an ND prefix FRR's template refuses).
    pub(super) before_ips: Vec<(String, String)>,
    /// The scope's frame, or why it cannot be realised (nothing of it is made).
    pub(super) frame: Result<Framed, String>,
}

/// A scope's objects without its IPs', and what its IPs are rendered against.
#[derive(Clone)]
pub(super) struct Framed {
    pub(super) system: DesiredSystem,
    pub(super) frame: ScopeFrame,
    /// Reported after the IPs' own reports (subnets that cannot be routed).
    pub(super) after_ips: Vec<(String, String)>,
}

/// What one IP of a realised scope is rendered against: equal frames render an IP alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScopeFrame {
    pub(super) vni: Vni,
    table: u32,
    /// SB EVPN (a router gateway attachment): tenant addresses go on `lo-<vni>`.
    gateway_flavour: bool,
    /// The table of the kernel's local routes of `lo-<vni>`'s addresses.
    local_table: u32,
    ports: Vec<Port>,
}

impl ScopeFrame {
    fn port_of(&self, provider: &Option<ProviderNetwork>) -> Option<&Port> {
        match provider {
            Some(p) => self
                .ports
                .iter()
                .find(|port| same_network(&port.provider, p)),
            // Only announced (a tenant IP routed via its gateway): the scope's only port.
            None if self.ports.len() == 1 => self.ports.first(),
            None => None,
        }
    }
}

/// What a scope's frame is rendered from besides the settings, the facts and the bridges'
/// wiring: equal inputs render an equal frame (the rendering is pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FrameInputs {
    params: Option<EvpnParams>,
    subnets: BTreeSet<ExposedSubnet>,
    /// Shared with the scope's: compared by visiting only the nodes they do not share.
    routes: RouteMap,
    /// The MAC of each subnet's gateway address (the redirect flows' source MAC).
    gateway_macs: Vec<Option<MacAddr>>,
}

impl FrameInputs {
    /// Whether `scope`'s frame would be rendered from these inputs (compared in place: no copy
    /// per scope and event).
    pub(super) fn matches(&self, scope: &ExposureScope) -> bool {
        self.params == scope.evpn
            && self.subnets == scope.subnets
            && self.routes == scope.routes
            && self.gateway_macs.len() == scope.subnets.len()
            && self
                .gateway_macs
                .iter()
                .zip(&scope.subnets)
                .all(|(mac, s)| *mac == scope.ips.get(&s.via).and_then(|g| g.lladdr))
    }

    pub(super) fn of(scope: &ExposureScope) -> Self {
        Self {
            params: scope.evpn.clone(),
            subnets: scope.subnets.clone(),
            routes: scope.routes.clone(),
            gateway_macs: scope
                .subnets
                .iter()
                .map(|s| scope.ips.get(&s.via).and_then(|g| g.lladdr))
                .collect(),
        }
    }
}

/// The frame of scope `id` (`None`: not an EVPN scope).
pub(super) fn frame_pass(
    settings: &VrfSettings,
    facts: &Facts,
    exposures: &ExposureSet,
    id: &ScopeId,
    scope: &ExposureScope,
) -> Option<FramePass> {
    let ScopeId::Evpn(vni) = id else { return None };
    let mut before_ips = Vec::new();
    let frame = match &scope.evpn {
        None => Err("EVPN scope without EVPN parameters".to_owned()),
        Some(params) => render_frame(
            settings,
            facts,
            exposures,
            *vni,
            params,
            scope,
            &mut before_ips,
        ),
    };
    Some(FramePass { before_ips, frame })
}

/// One object an exposed IP of an EVPN scope renders to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum IpObject {
    Address(AddressSpec),
    LocalRoute(LocalRouteSuppression),
    Route(RouteSpec),
    Neighbour(NeighbourSpec),
    ProxyNeighbour(ProxyNeighbourSpec),
    /// A device whose neighbours (NDP proxies) are the agent's.
    NeighbourDevice(InterfaceName),
}

impl IpObject {
    /// Whether `d` has it.
    pub(super) fn is_in(&self, d: &DesiredSystem) -> bool {
        match self {
            IpObject::Address(o) => d.addresses.contains(o),
            IpObject::LocalRoute(o) => d.suppressed_local_routes.contains(o),
            IpObject::Route(o) => d.routes.contains(o),
            IpObject::Neighbour(o) => d.neighbours.contains(o),
            IpObject::ProxyNeighbour(o) => d.proxy_neighbours.contains(o),
            IpObject::NeighbourDevice(o) => d.ownership.neighbour_devices.contains(o),
        }
    }
}

impl SystemObject for IpObject {
    fn insert_into(self, d: &mut DesiredSystem) -> bool {
        match self {
            IpObject::Address(o) => d.addresses.insert(o).is_none(),
            IpObject::LocalRoute(o) => d.suppressed_local_routes.insert(o).is_none(),
            IpObject::Route(o) => d.routes.insert(o).is_none(),
            IpObject::Neighbour(o) => d.neighbours.insert(o).is_none(),
            IpObject::ProxyNeighbour(o) => d.proxy_neighbours.insert(o).is_none(),
            IpObject::NeighbourDevice(o) => d.ownership.neighbour_devices.insert(o),
        }
    }

    fn remove_from(&self, d: &mut DesiredSystem) -> bool {
        match self {
            IpObject::Address(o) => d.addresses.remove(o).is_some(),
            IpObject::LocalRoute(o) => d.suppressed_local_routes.remove(o).is_some(),
            IpObject::Route(o) => d.routes.remove(o).is_some(),
            IpObject::Neighbour(o) => d.neighbours.remove(o).is_some(),
            IpObject::ProxyNeighbour(o) => d.proxy_neighbours.remove(o).is_some(),
            IpObject::NeighbourDevice(o) => d.ownership.neighbour_devices.remove(o),
        }
    }
}

/// Where an IP's objects and its report go.
pub(super) trait IpSink {
    fn object(&mut self, object: IpObject);
    fn skip(&mut self, row: String, reason: &'static str);
}

/// A full render's sink: the scope's scratch system and the render's reports.
struct FullSink<'a> {
    system: &'a mut DesiredSystem,
    out: &'a mut Rendered,
}

impl IpSink for FullSink<'_> {
    fn object(&mut self, object: IpObject) {
        object.insert_into(self.system);
    }
    fn skip(&mut self, row: String, reason: &'static str) {
        self.out.skip(row, reason);
    }
}

/// One exposed IP of a realised scope.
pub(super) fn render_ip(frame: &ScopeFrame, ip: &ExposedIp, sink: &mut impl IpSink) {
    let vni = frame.vni;
    if frame.gateway_flavour && ip.provider.is_none() && ip.via.is_none() {
        // A tenant address: on lo-<vni>, without the kernel's local route, so the VRF
        // forwards traffic to it instead of delivering it here.
        let lo = loopback_name(vni);
        sink.object(IpObject::Address(AddressSpec {
            dev: lo.clone(),
            addr: host_net(ip.ip),
        }));
        sink.object(IpObject::LocalRoute(LocalRouteSuppression {
            table: frame.local_table,
            dst: ip.ip,
            dev: lo,
        }));
        return;
    }
    let Some(port) = frame.port_of(&ip.provider) else {
        sink.skip(
            format!("evpn:{vni} {} ({})", ip.ip, ip.source),
            "no attachment of this VRF to the IP's provider network",
        );
        return;
    };
    sink.object(IpObject::Route(RouteSpec {
        table: frame.table,
        dst: host_net(ip.ip),
        route_type: RouteType::Unicast,
        via: ip.via,
        dev: Some(port.vrf_side.clone()),
        scope_link: ip.via.is_none(),
        metric: None,
    }));
    if let Some(mac) = ip.lladdr {
        sink.object(IpObject::Neighbour(NeighbourSpec {
            dev: port.vrf_side.clone(),
            ip: ip.ip,
            lladdr: mac,
        }));
    }
    for prefix in &ip.ndp_proxy {
        sink.object(IpObject::ProxyNeighbour(ProxyNeighbourSpec {
            dev: port.ndp_device.clone(),
            ip: prefix.addr(),
        }));
        sink.object(IpObject::NeighbourDevice(port.ndp_device.clone()));
    }
}

/// The VRF, bridge, VXLAN device and FRR stanzas of one VNI.
fn render_vrf(
    settings: &VrfSettings,
    facts: &Facts,
    vni: Vni,
    params: &EvpnParams,
    d: &mut DesiredSystem,
) -> Result<(), String> {
    let table = vni.get();
    if let Some(why) = facts.refused_tables.get(&table) {
        return Err(format!("table {table}: {why}"));
    }
    let Some(vtep) = facts.vtep else {
        return Err(facts
            .vtep_problem
            .clone()
            .unwrap_or_else(|| "no local VTEP address: set [DEFAULT] evpn_local_ip".to_owned()));
    };
    // U01: the RD is the explicit one or <VTEP>:<vni>, never `None:<vni>`.
    let rd = RouteDistinguisher::explicit_or_vtep(params.rd, Some(vtep), vni)
        .map_err(|e| format!("route distinguisher: {e}"))?;
    let (vrf, br, vx) = (vrf_name(vni), bridge_name(vni), vxlan_name(vni));
    let neigh_suppress = params
        .attachments
        .iter()
        .any(|a| matches!(a, EvpnAttachment::Localnet(_)));
    d.links.insert(LinkSpec {
        name: vrf.clone(),
        kind: if settings.vrf_is_bridge {
            LinkKind::Bridge
        } else {
            LinkKind::Vrf { table }
        },
        master: None,
        mac: None,
        up: true,
    });
    d.links.insert(LinkSpec {
        name: br.clone(),
        kind: LinkKind::Bridge,
        master: (!settings.vrf_is_bridge).then(|| vrf.clone()),
        mac: None,
        up: true,
    });
    d.links.insert(LinkSpec {
        name: vx.clone(),
        kind: LinkKind::Vxlan {
            vni: table,
            local: Some(vtep),
            dstport: settings.udp_dstport,
            neigh_suppress,
        },
        master: Some(br.clone()),
        mac: None,
        up: true,
    });
    d.ownership.link_names.extend([vrf.clone(), br, vx]);
    d.ownership.tables.insert(table);
    let add = AddVrf {
        bgp_as: params.bgp_as,
        vrf_name: vrf,
        vni,
        rd,
        route_targets: Vec::new(),
        export_targets: params.export_targets.clone(),
        import_targets: params.import_targets.clone(),
        redistribute: params.redistribute.clone(),
    };
    let (key, object) = FrrObject::evpn_vrf(&add).map_err(|e| format!("FRR VRF stanza: {e}"))?;
    d.frr_objects.insert(key, object);
    Ok(())
}

/// One EVPN scope without its IPs, into a scratch system merged only when the whole scope
/// renders: a scope that cannot be realised leaves nothing half-made.
fn render_frame(
    settings: &VrfSettings,
    facts: &Facts,
    exposures: &ExposureSet,
    vni: Vni,
    params: &EvpnParams,
    scope: &ExposureScope,
    before_ips: &mut Vec<(String, String)>,
) -> Result<Framed, String> {
    let mut d = DesiredSystem::default();
    render_vrf(settings, facts, vni, params, &mut d)?;
    let table = vni.get();
    let vrf = vrf_name(vni);
    let mut ports: Vec<Port> = Vec::new();
    let mut gateway_flavour = false;
    for attachment in &params.attachments {
        match attachment {
            EvpnAttachment::RouterGateway { provider } => {
                gateway_flavour = true;
                ports.push(router_gateway_port(vni, provider, &vrf, &mut d));
            }
            EvpnAttachment::Localnet(l) => {
                ports.push(localnet_port(vni, l, &vrf, &mut d, before_ips)?);
            }
        }
    }
    if gateway_flavour {
        let lo = loopback_name(vni);
        d.links.insert(LinkSpec {
            name: lo.clone(),
            kind: settings.loopback_kind.clone(),
            master: Some(vrf.clone()),
            mac: None,
            up: true,
        });
        d.ownership.link_names.insert(lo.clone());
        d.ownership.address_devices.insert(lo);
        for dst in ["0.0.0.0/0", "::/0"] {
            let dst: IpNet = dst.parse().expect("valid default prefix");
            d.routes.insert(RouteSpec {
                table,
                dst,
                route_type: RouteType::Unreachable,
                via: None,
                dev: None,
                scope_link: false,
                metric: Some(UNREACHABLE_METRIC),
            });
        }
    }
    let frame = ScopeFrame {
        vni,
        table,
        gateway_flavour,
        local_table: if settings.vrf_is_bridge { 255 } else { table },
        ports,
    };
    let mut after_ips = Vec::new();
    for subnet in &scope.subnets {
        let row = format!("evpn:{vni} subnet {} ({})", subnet.router_ip, subnet.source);
        let Some(port) = frame.port_of(&Some(subnet.provider.clone())) else {
            after_ips.push((
                row,
                "no attachment of this VRF to the subnet's provider network".to_owned(),
            ));
            continue;
        };
        let net = subnet.router_ip.trunc();
        d.routes.insert(RouteSpec {
            table,
            dst: net,
            route_type: RouteType::Unicast,
            via: Some(subnet.via),
            dev: Some(port.vrf_side.clone()),
            scope_link: false,
            metric: None,
        });
        if gateway_flavour {
            // The gateway's MAC: the source of the subnet's traffic leaving the router.
            let Some(gateway_mac) = scope.ips.get(&subnet.via).and_then(|g| g.lladdr) else {
                after_ips.push((
                    row,
                    "the gateway address it is routed via has no MAC here".to_owned(),
                ));
                continue;
            };
            redirect_flows(exposures, port, gateway_mac, net, &mut d);
        }
    }
    for route in scope.routes.values() {
        let port = frame.port_of(&route.provider);
        d.routes.insert(RouteSpec {
            table,
            dst: route.prefix,
            route_type: RouteType::Unicast,
            via: route.via,
            dev: port.map(|p| p.vrf_side.clone()),
            scope_link: route.via.is_none(),
            metric: None,
        });
    }
    Ok(Framed {
        system: d,
        frame,
        after_ips,
    })
}

/// SB EVPN: `veth-vrf-v`↔`veth-ovs-v` on a flat network, the OVS internal port `vlan-v` on a
/// VLAN network.
fn router_gateway_port(
    vni: Vni,
    provider: &ProviderNetwork,
    vrf: &InterfaceName,
    d: &mut DesiredSystem,
) -> Port {
    // A fixed MAC (upstream lets the kernel pick one): the redirect flows rewrite to it, and a
    // recreated device keeps it, so the flows stay right.
    let mac = anycast_mac(vni, provider.vlan.unwrap_or(0));
    match provider.vlan.filter(|t| *t != 0) {
        Some(tag) => {
            let dev = name(format!("vlan-{vni}"));
            d.ovs_ports.insert(OvsPortSpec {
                bridge: provider.bridge.clone(),
                name: dev.clone(),
                internal: true,
                vlan_tag: Some(tag),
            });
            d.links.insert(LinkSpec {
                name: dev.clone(),
                kind: LinkKind::Existing,
                master: Some(vrf.clone()),
                mac: Some(mac),
                up: true,
            });
            d.sysctls
                .insert(format!("net.ipv6.conf.{dev}.proxy_ndp"), "1".to_owned());
            d.ownership.neighbour_devices.insert(dev.clone());
            Port {
                vrf_side: dev.clone(),
                ovs_side: dev.clone(),
                mac,
                provider: provider.clone(),
                ndp_device: dev,
            }
        }
        None => {
            let (vrf_side, ovs_side) = veth_pair_names(vni);
            veth_pair(&vrf_side, &ovs_side, vrf, mac, provider, None, d);
            Port {
                vrf_side,
                ovs_side,
                mac,
                provider: provider.clone(),
                ndp_device: provider.bridge.clone(),
            }
        }
    }
}

/// A veth pair with the VRF end in `vrf` and the other end a port of the provider bridge.
fn veth_pair(
    vrf_side: &InterfaceName,
    ovs_side: &InterfaceName,
    vrf: &InterfaceName,
    mac: MacAddr,
    provider: &ProviderNetwork,
    tag: Option<u16>,
    d: &mut DesiredSystem,
) {
    d.links.insert(LinkSpec {
        name: vrf_side.clone(),
        kind: LinkKind::Veth {
            peer: ovs_side.clone(),
        },
        master: Some(vrf.clone()),
        mac: Some(mac),
        up: true,
    });
    // The peer comes and goes with its pair; the agent only sets it up.
    d.links.insert(LinkSpec {
        name: ovs_side.clone(),
        kind: LinkKind::Existing,
        master: None,
        mac: None,
        up: true,
    });
    d.ovs_ports.insert(OvsPortSpec {
        bridge: provider.bridge.clone(),
        name: ovs_side.clone(),
        internal: false,
        vlan_tag: tag,
    });
    d.ownership.link_names.insert(vrf_side.clone());
    d.ownership.neighbour_devices.insert(vrf_side.clone());
}

/// NB `vrf`: the veth pair of one localnet port, its addresses, sysctls, MAC-tweak flows and
/// router advertisements.
fn localnet_port(
    vni: Vni,
    l: &LocalnetAttachment,
    vrf: &InterfaceName,
    d: &mut DesiredSystem,
    before_ips: &mut Vec<(String, String)>,
) -> Result<Port, String> {
    let id: String = l.port_uuid.chars().take(11).collect();
    if id.len() < 11 || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(format!(
            "localnet port {}: uuid {:?} cannot name a device",
            l.port_name, l.port_uuid
        ));
    }
    let (vrf_side, ovs_side) = (name(format!("vrf{id}")), name(format!("ovs{id}")));
    let vlan = l.provider.vlan.unwrap_or(0);
    let mac = anycast_mac(vni, vlan);
    veth_pair(
        &vrf_side,
        &ovs_side,
        vrf,
        mac,
        &l.provider,
        (vlan != 0).then_some(vlan),
        d,
    );
    d.ownership.address_devices.insert(vrf_side.clone());
    // Its gateway addresses carry the subnet's prefix length: a moved gateway's old one goes.
    d.ownership.all_address_devices.insert(vrf_side.clone());
    let k = vlan % 256;
    let helper4 = Ipv4Addr::new(169, 254, k as u8, k as u8);
    let helper6: Ipv6Addr = format!("fd53:d91e:400:7f17::{k:x}:{k:x}")
        .parse()
        .expect("valid IPv6 address");
    let mut addresses: Vec<IpNet> = vec![
        IpNet::from(IpAddr::V4(helper4)),
        IpNet::from(IpAddr::V6(helper6)),
        IpNet::V6(Ipv6Net::new(link_local_of(mac), 64).expect("valid prefix length")),
    ];
    addresses.extend(l.gateway_addresses.iter().copied());
    for addr in addresses {
        d.addresses.insert(AddressSpec {
            dev: vrf_side.clone(),
            addr,
        });
    }
    for key in [
        "net.ipv4.ip_forward".to_owned(),
        "net.ipv4.conf.all.forwarding".to_owned(),
        "net.ipv6.conf.all.forwarding".to_owned(),
        format!("net.ipv4.conf.{vrf_side}.forwarding"),
        format!("net.ipv6.conf.{vrf_side}.forwarding"),
        format!("net.ipv4.conf.{vrf_side}.proxy_arp"),
        format!("net.ipv6.conf.{vrf_side}.proxy_ndp"),
    ] {
        d.sysctls.insert(key, "1".to_owned());
    }
    // Traffic of the network leaving br-int towards the fabric goes to the anycast MAC, so the
    // VRF side routes it.
    if !l.port_name.is_empty() {
        for matches in ["ip", "ipv6"] {
            d.flows.insert(PortFlowSpec {
                bridge: l.provider.bridge.clone(),
                in_port: format!("patch-{}-to-br-int", l.port_name),
                cookie: MAC_TWEAK_COOKIE,
                priority: MAC_TWEAK_PRIORITY,
                matches: matches.to_owned(),
                actions: FlowAction::render(&[FlowAction::ModDlDst(mac), FlowAction::Normal]),
            });
        }
        d.ownership.flow_cookies.insert(MAC_TWEAK_COOKIE);
    }
    for nd in &l.nd_prefixes {
        let configure = ConfigureNd {
            interface: vrf_side.clone(),
            managed_config: true,
            dns_servers: nd.dns_servers.clone(),
            prefix: nd.prefix,
            autoconfig: nd.stateless,
        };
        match FrrObject::nd(&configure) {
            Ok((key, object)) => {
                d.frr_objects.insert(key, object);
            }
            Err(e) => before_ips.push((
                format!("evpn:{vni} nd {} on {vrf_side}", nd.prefix),
                format!("FRR ND template: {e}"),
            )),
        }
    }
    Ok(Port {
        vrf_side: vrf_side.clone(),
        ovs_side,
        mac,
        provider: l.provider.clone(),
        ndp_device: vrf_side,
    })
}

/// SB EVPN: traffic of a router subnet leaving the gateway (source MAC the gateway's) enters
/// the VRF instead of the provider network: one flow per family and localnet patch port.
fn redirect_flows(
    exposures: &ExposureSet,
    port: &Port,
    gateway_mac: MacAddr,
    net: IpNet,
    d: &mut DesiredSystem,
) {
    let Some(wiring) = exposures.bridges.get(&port.provider.bridge) else {
        return;
    };
    let mut actions = vec![FlowAction::ModDlDst(port.mac)];
    if port.provider.vlan.is_some_and(|t| t != 0) {
        actions.push(FlowAction::StripVlan);
    }
    actions.push(FlowAction::Output(port.ovs_side.to_string()));
    let matches = match net {
        IpNet::V4(_) => format!("ip,dl_src={gateway_mac},nw_src={net}"),
        IpNet::V6(_) => format!("ipv6,dl_src={gateway_mac},ipv6_src={net}"),
    };
    for localnet in &wiring.localnet_ports {
        d.flows.insert(PortFlowSpec {
            bridge: port.provider.bridge.clone(),
            in_port: format!("patch-{localnet}-to-br-int"),
            cookie: REDIRECT_COOKIE,
            priority: REDIRECT_PRIORITY,
            matches: matches.clone(),
            actions: FlowAction::render(&actions),
        });
    }
    d.ownership.flow_cookies.insert(REDIRECT_COOKIE);
}

/// Merge one scope's objects into the whole.
pub(super) fn merge(into: &mut DesiredSystem, from: DesiredSystem) {
    into.links.extend(from.links);
    into.addresses.extend(from.addresses);
    into.rules.extend(from.rules);
    into.routes.extend(from.routes);
    into.neighbours.extend(from.neighbours);
    into.proxy_neighbours.extend(from.proxy_neighbours);
    into.sysctls.extend(from.sysctls);
    into.flows.extend(from.flows);
    into.suppressed_local_routes
        .extend(from.suppressed_local_routes);
    into.ovs_ports.extend(from.ovs_ports);
    into.fdb_entries.extend(from.fdb_entries);
    into.frr_objects.extend(from.frr_objects);
    let (o, f) = (&mut into.ownership, from.ownership);
    o.address_devices.extend(f.address_devices);
    o.all_address_devices.extend(f.all_address_devices);
    o.tables.extend(f.tables);
    o.neighbour_devices.extend(f.neighbour_devices);
    o.flow_cookies.extend(f.flow_cookies);
    o.link_names.extend(f.link_names);
    o.vlan_parents.extend(f.vlan_parents);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::frr::values::Asn;
    use crate::exposure::{BridgeWiring, ExposedIp, ExposedSubnet, ExposureKind, NdPrefix};

    fn settings() -> VrfSettings {
        VrfSettings {
            vrf_is_bridge: false,
            loopback_kind: LinkKind::Dummy,
            udp_dstport: 4789,
            delete_vrf_on_disconnect: true,
        }
    }

    fn vni(n: u32) -> Vni {
        Vni::new(n).unwrap()
    }

    fn ifname(s: &str) -> InterfaceName {
        InterfaceName::new(s).unwrap()
    }

    fn provider(vlan: Option<u16>) -> ProviderNetwork {
        ProviderNetwork {
            physnet: "public".into(),
            bridge: ifname("br-ex"),
            vlan,
            evpn: None,
        }
    }

    fn wiring(set: &mut ExposureSet) {
        set.bridges.insert(
            ifname("br-ex"),
            BridgeWiring {
                bridge: ifname("br-ex"),
                physnets: ["public".to_owned()].into(),
                vlans: Default::default(),
                localnet_ports: ["provnet-1".to_owned()].into(),
                index: 1,
            },
        );
    }

    const CR_MAC: &str = "fa:16:3e:00:00:05";

    /// F1: a gateway bound here on a flat provider network, VNI 1001, AS 64999.
    fn f1(vlan: Option<u16>) -> ExposureSet {
        let mut set = ExposureSet::default();
        wiring(&mut set);
        let mut params = EvpnParams::new(vni(1001), Asn::new(64999).unwrap());
        params.attachments.insert(EvpnAttachment::RouterGateway {
            provider: provider(vlan),
        });
        let scope = set.scope_mut(ScopeId::Evpn(vni(1001)));
        scope.evpn = Some(params);
        scope.expose_ip(ExposedIp {
            provider: Some(provider(vlan)),
            lladdr: Some(CR_MAC.parse().unwrap()),
            ..ExposedIp::announced(
                "172.24.100.5".parse().unwrap(),
                ExposureKind::GatewayPort,
                "cr-lrp-r1",
            )
        });
        set
    }

    fn f2(vlan: Option<u16>) -> ExposureSet {
        let mut set = f1(vlan);
        let scope = set.scope_mut(ScopeId::Evpn(vni(1001)));
        scope.subnets.insert(ExposedSubnet {
            router_ip: "10.0.0.1/24".parse().unwrap(),
            via: "172.24.100.5".parse().unwrap(),
            provider: provider(vlan),
            source: "lrp-sub1".into(),
        });
        scope.expose_ip(ExposedIp::announced(
            "10.0.0.10".parse().unwrap(),
            ExposureKind::TenantPort,
            "vm1",
        ));
        set
    }

    fn link<'a>(d: &'a DesiredSystem, name: &str) -> &'a LinkSpec {
        d.links
            .iter()
            .find(|l| l.name.as_str() == name)
            .unwrap_or_else(|| panic!("no link {name} in {:#?}", d.links))
    }

    #[test]
    fn f1_router_gateway_on_a_flat_network() {
        let r = render(
            &settings(),
            &super::super::facts_with_vtep("10.0.0.1"),
            &f1(None),
        );
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let d = &r.system;
        assert_eq!(link(d, "vrf-1001").kind, LinkKind::Vrf { table: 1001 });
        assert_eq!(link(d, "br-1001").master, Some(ifname("vrf-1001")));
        let vx = link(d, "vxlan-1001");
        assert_eq!(
            vx.kind,
            LinkKind::Vxlan {
                vni: 1001,
                local: Some("10.0.0.1".parse().unwrap()),
                dstport: 4789,
                neigh_suppress: false
            }
        );
        assert_eq!(vx.master, Some(ifname("br-1001")));
        assert_eq!(link(d, "lo-1001").master, Some(ifname("vrf-1001")));
        let veth = link(d, "veth-vrf-1001");
        assert_eq!(
            veth.kind,
            LinkKind::Veth {
                peer: ifname("veth-ovs-1001")
            }
        );
        assert_eq!(veth.master, Some(ifname("vrf-1001")));
        assert!(d.ovs_ports.contains(&OvsPortSpec {
            bridge: ifname("br-ex"),
            name: ifname("veth-ovs-1001"),
            internal: false,
            vlan_tag: None
        }));
        assert!(d.routes.contains(&RouteSpec {
            table: 1001,
            dst: "172.24.100.5/32".parse().unwrap(),
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(ifname("veth-vrf-1001")),
            scope_link: true,
            metric: None
        }));
        for dst in ["0.0.0.0/0", "::/0"] {
            assert!(
                d.routes.contains(&RouteSpec {
                    table: 1001,
                    dst: dst.parse().unwrap(),
                    route_type: RouteType::Unreachable,
                    via: None,
                    dev: None,
                    scope_link: false,
                    metric: Some(4278198272)
                }),
                "unreachable default {dst}"
            );
        }
        assert!(d.neighbours.contains(&NeighbourSpec {
            dev: ifname("veth-vrf-1001"),
            ip: "172.24.100.5".parse().unwrap(),
            lladdr: CR_MAC.parse().unwrap()
        }));
        // U01: the RD is the VTEP's, never None:1001.
        let frr: Vec<_> = d.frr_objects.values().map(|o| o.apply_snippet()).collect();
        assert_eq!(frr.len(), 1);
        assert!(
            frr[0].contains("vrf vrf-1001") && frr[0].contains("vni 1001"),
            "{}",
            frr[0]
        );
        assert!(
            frr[0].contains("router bgp 64999 vrf vrf-1001"),
            "{}",
            frr[0]
        );
        assert!(frr[0].contains("rd 10.0.0.1:1001"), "{}", frr[0]);
        assert!(frr[0].contains("redistribute connected"), "{}", frr[0]);
        assert!(!frr[0].contains("redistribute kernel"), "{}", frr[0]);
        let remove = d.frr_objects.values().next().unwrap().remove_snippet();
        assert!(remove.contains("no vrf vrf-1001"), "{remove}");
        assert!(
            remove.contains("no router bgp 64999 vrf vrf-1001"),
            "{remove}"
        );
        for owned in [
            "vrf-1001",
            "br-1001",
            "vxlan-1001",
            "lo-1001",
            "veth-vrf-1001",
        ] {
            assert!(d.ownership.link_names.contains(&ifname(owned)), "{owned}");
        }
        assert!(d.ownership.tables.contains(&1001));
    }

    #[test]
    fn f2_subnet_routes_redirect_flows_and_tenant_addresses_on_lo() {
        let r = render(
            &settings(),
            &super::super::facts_with_vtep("10.0.0.1"),
            &f2(None),
        );
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let d = &r.system;
        assert!(d.routes.contains(&RouteSpec {
            table: 1001,
            dst: "10.0.0.0/24".parse().unwrap(),
            route_type: RouteType::Unicast,
            via: Some("172.24.100.5".parse().unwrap()),
            dev: Some(ifname("veth-vrf-1001")),
            scope_link: false,
            metric: None
        }));
        let mac = anycast_mac(vni(1001), 0);
        assert_eq!(link(d, "veth-vrf-1001").mac, Some(mac));
        let flow = d.flows.iter().next().expect("a redirect flow");
        assert_eq!(d.flows.len(), 1, "{:#?}", d.flows);
        assert_eq!(flow.cookie, 998);
        assert_eq!(flow.priority, 1000);
        assert_eq!(flow.in_port, "patch-provnet-1-to-br-int");
        assert_eq!(
            flow.matches,
            format!("ip,dl_src={CR_MAC},nw_src=10.0.0.0/24")
        );
        assert_eq!(
            flow.actions,
            format!("mod_dl_dst:{mac},output:{{veth-ovs-1001}}")
        );
        assert!(d.addresses.contains(&AddressSpec {
            dev: ifname("lo-1001"),
            addr: "10.0.0.10/32".parse().unwrap()
        }));
        assert!(d.suppressed_local_routes.contains(&LocalRouteSuppression {
            table: 1001,
            dst: "10.0.0.10".parse().unwrap(),
            dev: ifname("lo-1001")
        }));
    }

    #[test]
    fn a_tagged_provider_network_uses_an_ovs_internal_vlan_port() {
        let r = render(
            &settings(),
            &super::super::facts_with_vtep("10.0.0.1"),
            &f2(Some(100)),
        );
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let d = &r.system;
        assert!(d.ovs_ports.contains(&OvsPortSpec {
            bridge: ifname("br-ex"),
            name: ifname("vlan-1001"),
            internal: true,
            vlan_tag: Some(100)
        }));
        let vlan = link(d, "vlan-1001");
        assert_eq!(vlan.kind, LinkKind::Existing);
        assert_eq!(vlan.master, Some(ifname("vrf-1001")));
        assert!(!d.links.iter().any(|l| l.name.as_str().starts_with("veth")));
        let flow = d.flows.iter().next().unwrap();
        assert!(
            flow.actions.contains("strip_vlan,output:{vlan-1001}"),
            "{}",
            flow.actions
        );
        assert_eq!(
            d.sysctls
                .get("net.ipv6.conf.vlan-1001.proxy_ndp")
                .map(String::as_str),
            Some("1")
        );
    }

    /// E1/E2: the NB `vrf` method on a flat EVPN provider network with a VM bound here.
    fn e1() -> ExposureSet {
        let mut set = ExposureSet::default();
        wiring(&mut set);
        let mut params = EvpnParams::new(vni(100), Asn::new(64999).unwrap());
        params
            .redistribute
            .insert(crate::caps::frr::values::Redistribute::Kernel);
        params.route_targets_for_test();
        params
            .attachments
            .insert(EvpnAttachment::Localnet(LocalnetAttachment {
                provider: provider(None),
                port_uuid: "abcdef12-3456-7890-abcd-ef1234567890".into(),
                port_name: "provnet-1".into(),
                gateway_addresses: ["172.24.100.1/24".parse().unwrap()].into(),
                nd_prefixes: [NdPrefix {
                    prefix: "2001:db8::/64".parse().unwrap(),
                    stateless: false,
                    dns_servers: vec![],
                }]
                .into(),
            }));
        let scope = set.scope_mut(ScopeId::Evpn(vni(100)));
        scope.evpn = Some(params);
        scope.expose_ip(ExposedIp {
            provider: Some(provider(None)),
            lladdr: Some("fa:16:3e:11:11:11".parse().unwrap()),
            ..ExposedIp::announced(
                "172.24.100.10".parse().unwrap(),
                ExposureKind::ProviderPort,
                "vm-port",
            )
        });
        set
    }

    impl EvpnParams {
        fn route_targets_for_test(&mut self) {
            self.import_targets = vec!["64999:1".parse().unwrap()];
            self.export_targets = vec!["64999:1".parse().unwrap()];
        }
    }

    #[test]
    fn e1_e2_localnet_attachment_of_the_nb_vrf_method() {
        let r = render(
            &settings(),
            &super::super::facts_with_vtep("10.0.0.1"),
            &e1(),
        );
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let d = &r.system;
        let vx = link(d, "vxlan-100");
        assert!(
            matches!(
                vx.kind,
                LinkKind::Vxlan {
                    neigh_suppress: true,
                    ..
                }
            ),
            "{vx:?}"
        );
        let veth = link(d, "vrfabcdef12-34");
        assert_eq!(
            veth.kind,
            LinkKind::Veth {
                peer: ifname("ovsabcdef12-34")
            }
        );
        assert_eq!(veth.master, Some(ifname("vrf-100")));
        assert_eq!(veth.mac, Some("02:00:00:64:00:00".parse().unwrap()));
        assert!(d.ovs_ports.contains(&OvsPortSpec {
            bridge: ifname("br-ex"),
            name: ifname("ovsabcdef12-34"),
            internal: false,
            vlan_tag: None
        }));
        for addr in ["169.254.0.0/32", "172.24.100.1/24", "fe80::ff:fe64:0/64"] {
            assert!(
                d.addresses.contains(&AddressSpec {
                    dev: ifname("vrfabcdef12-34"),
                    addr: addr.parse().unwrap()
                }),
                "{addr} in {:#?}",
                d.addresses
            );
        }
        assert!(d.routes.contains(&RouteSpec {
            table: 100,
            dst: "172.24.100.10/32".parse().unwrap(),
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(ifname("vrfabcdef12-34")),
            scope_link: true,
            metric: None
        }));
        assert!(d.neighbours.contains(&NeighbourSpec {
            dev: ifname("vrfabcdef12-34"),
            ip: "172.24.100.10".parse().unwrap(),
            lladdr: "fa:16:3e:11:11:11".parse().unwrap()
        }));
        // E2: nothing on a bgp-nic, no lo-<vni>, no unreachable defaults.
        assert!(
            d.addresses
                .iter()
                .all(|a| a.dev.as_str() == "vrfabcdef12-34")
        );
        assert!(
            !d.routes
                .iter()
                .any(|r| r.route_type == RouteType::Unreachable)
        );
        assert_eq!(d.flows.len(), 2, "ip and ipv6 MAC-tweak flows");
        for f in &d.flows {
            assert_eq!((f.cookie, f.priority), (999, 900));
            assert_eq!(f.actions, "mod_dl_dst:02:00:00:64:00:00,NORMAL");
        }
        let vrf = d
            .frr_objects
            .iter()
            .find(|(k, _)| k.as_str() == "vrf vrf-100")
            .expect("FRR VRF")
            .1
            .apply_snippet();
        for line in [
            "rd 10.0.0.1:100",
            "redistribute connected",
            "redistribute kernel",
            "route-target import 64999:1",
            "route-target export 64999:1",
            "advertise ipv4 unicast",
        ] {
            assert!(vrf.contains(line), "{line} in {vrf}");
        }
        assert!(
            d.frr_objects
                .keys()
                .any(|k| k.as_str() == "nd interface vrfabcdef12-34 prefix 2001:db8::/64")
        );
        for key in [
            "net.ipv4.ip_forward",
            "net.ipv6.conf.all.forwarding",
            "net.ipv4.conf.vrfabcdef12-34.proxy_arp",
            "net.ipv6.conf.vrfabcdef12-34.proxy_ndp",
        ] {
            assert_eq!(d.sysctls.get(key).map(String::as_str), Some("1"), "{key}");
        }
    }

    #[test]
    fn e3_no_vtep_address_reports_every_scope_and_creates_nothing() {
        let facts = Facts {
            vtep_problem: Some("no local VTEP address: set [DEFAULT] evpn_local_ip".into()),
            ..Facts::default()
        };
        let r = render(&settings(), &facts, &e1());
        assert!(r.system.links.is_empty() && r.system.frr_objects.is_empty());
        assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
        assert!(
            r.skipped[0].reason.contains("evpn_local_ip"),
            "{:?}",
            r.skipped
        );
    }

    #[test]
    fn a_refused_table_or_hostile_uuid_skips_only_its_scope() {
        let mut facts = super::super::facts_with_vtep("10.0.0.1");
        facts
            .refused_tables
            .insert(1001, "table 1001 belongs to br-ex".into());
        let mut set = f1(None);
        for (n, scope) in e1().scopes {
            if n != ScopeId::Global {
                set.scopes.insert(n, scope);
            }
        }
        let r = render(&settings(), &facts, &set);
        assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
        assert!(r.skipped[0].reason.contains("br-ex"));
        assert!(r.system.links.iter().any(|l| l.name.as_str() == "vrf-100"));
        assert!(!r.system.links.iter().any(|l| l.name.as_str() == "vrf-1001"));

        let mut hostile = e1();
        let scope = hostile.scopes.get_mut(&ScopeId::Evpn(vni(100))).unwrap();
        let params = scope.evpn.as_mut().unwrap();
        let Some(EvpnAttachment::Localnet(l)) = params.attachments.pop_first() else {
            panic!()
        };
        params
            .attachments
            .insert(EvpnAttachment::Localnet(LocalnetAttachment {
                port_uuid: "../../etc;x".into(),
                ..l
            }));
        let r = render(
            &settings(),
            &super::super::facts_with_vtep("10.0.0.1"),
            &hostile,
        );
        assert!(r.system.links.is_empty());
        assert!(
            r.skipped[0].reason.contains("cannot name a device"),
            "{:?}",
            r.skipped
        );
    }

    #[test]
    fn a_vrf_is_kept_without_exposures_when_delete_vrf_on_disconnect_is_off() {
        let mut facts = super::super::facts_with_vtep("10.0.0.1");
        let params = e1().scopes[&ScopeId::Evpn(vni(100))].evpn.clone().unwrap();
        facts.retained.insert(vni(100), params);
        let keep = VrfSettings {
            delete_vrf_on_disconnect: false,
            ..settings()
        };
        let r = render(&keep, &facts, &ExposureSet::default());
        assert!(r.system.links.iter().any(|l| l.name.as_str() == "vrf-100"));
        assert!(
            !r.system
                .links
                .iter()
                .any(|l| l.name.as_str().starts_with("vrfabc"))
        );
        assert_eq!(r.system.frr_objects.len(), 1);
        let gone = render(&settings(), &facts, &ExposureSet::default());
        assert!(gone.system.links.is_empty());
    }

    #[test]
    fn the_largest_vni_gets_a_veth_pair_that_fits_ifnamsiz() {
        let mut set = f1(None);
        let scope = set.scopes.remove(&ScopeId::Evpn(vni(1001))).unwrap();
        let mut params = scope.evpn.clone().unwrap();
        params.vni = vni(0xFF_FFFF);
        // <VTEP>:<vni> cannot carry a VNI above 65535: such a VNI needs an explicit RD.
        params.rd = Some("64999:1".parse().unwrap());
        set.scopes.insert(
            ScopeId::Evpn(vni(0xFF_FFFF)),
            ExposureScope {
                evpn: Some(params),
                ..scope
            },
        );
        let r = render(
            &settings(),
            &super::super::facts_with_vtep("10.0.0.1"),
            &set,
        );
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let veth = link(&r.system, "vv-16777215");
        assert_eq!(
            veth.kind,
            LinkKind::Veth {
                peer: ifname("vo-16777215")
            }
        );
        assert!(
            r.system
                .ovs_ports
                .iter()
                .any(|p| p.name.as_str() == "vo-16777215")
        );
        // Six digits still get upstream's names.
        assert_eq!(veth_pair_names(vni(999_999)).1.as_str(), "veth-ovs-999999");
    }

    #[test]
    fn anycast_mac_and_its_link_local() {
        assert_eq!(anycast_mac(vni(100), 0).to_string(), "02:00:00:64:00:00");
        assert_eq!(
            anycast_mac(vni(0xFF_FFFF), 4094).to_string(),
            "02:ff:ff:ff:0f:fe"
        );
        assert_eq!(
            link_local_of(anycast_mac(vni(100), 0)).to_string(),
            "fe80::ff:fe64:0"
        );
    }
}
