//! Every Neutron and networking-bgpvpn convention the drivers read from OVN rows
//! (upstream-behaviour.md §1.6), parsed in one place so that an odd value is handled the same way
//! by every driver.
//!
//! Parsers of the SB BGP driver's row columns (`mac`, `nat_addresses`, `neutron:cidrs`) return a
//! `String` reason, which the driver records as a skipped row. The others return a
//! [`NeutronError`] naming the key and the value.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

/// The keys, as Neutron, Octavia and networking-bgpvpn write them.
pub mod keys {
    /// `"<ip>/<len> ..."` (PB, LSP).
    pub const CIDRS: &str = "neutron:cidrs";
    /// `ovn-lb-vip-<lb>` marks an Octavia VIP port (PB).
    pub const PORT_NAME: &str = "neutron:port_name";
    /// `neutron-<network id>` (LSP, LRP).
    pub const NETWORK_NAME: &str = "neutron:network_name";
    /// The router of a gateway LRP; `neutron-<router id>` on a port-forwarding LB.
    pub const ROUTER_NAME: &str = "neutron:router_name";
    pub const DEVICE_ID: &str = "neutron:device_id";
    pub const DEVICE_OWNER: &str = "neutron:device_owner";
    /// The floating IP of a port (LSP, distributed FIPs).
    pub const PORT_FIP: &str = "neutron:port_fip";
    /// The provider network of a FIP, as a bare id (NAT).
    pub const FIP_NETWORK_ID: &str = "neutron:fip_network_id";
    /// The binding host of a virtual port (LSP).
    pub const HOST_ID: &str = "neutron:host_id";
    /// Octavia OVN provider: `neutron-<router id>` of the LB's router (Load_Balancer).
    pub const LB_LR_REF: &str = "lr_ref";
    pub const LB_VIP: &str = "neutron:vip";
    pub const LB_VIP_FIP: &str = "neutron:vip_fip";
    pub const LB_VIP_PORT_ID: &str = "neutron:vip_port_id";
    pub const ADDRESS_SCOPE4: &str = "neutron:subnet_pool_addr_scope4";
    pub const ADDRESS_SCOPE6: &str = "neutron:subnet_pool_addr_scope6";
    /// `"True"`/`"False"` (NB_Global); absent means distributed.
    pub const FIP_DISTRIBUTED: &str = "neutron:fip-distributed";
    pub const BGPVPN_TYPE: &str = "neutron_bgpvpn:type";
    pub const BGPVPN_VNI: &str = "neutron_bgpvpn:vni";
    pub const BGPVPN_AS: &str = "neutron_bgpvpn:as";
    pub const BGPVPN_RD: &str = "neutron_bgpvpn:rd";
    pub const BGPVPN_RT: &str = "neutron_bgpvpn:rt";
    pub const BGPVPN_IT: &str = "neutron_bgpvpn:it";
    pub const BGPVPN_ET: &str = "neutron_bgpvpn:et";
    /// The Neutron network of a DHCP_Options row, as a bare id.
    pub const NETWORK_ID: &str = "neutron:network_id";
    /// Marks a DHCP_Options row holding one port's `extra_dhcp_opts`, not its subnet's.
    pub const DHCP_PORT_ID: &str = "port_id";
    /// `DHCP_Options.options` Neutron writes: the subnet's gateway, its DNS servers
    /// (`"{a, b}"`), and `"true"` for an IPv6 subnet in `dhcpv6-stateless` mode.
    pub const DHCP_ROUTER: &str = "router";
    pub const DHCP_DNS_SERVER: &str = "dns_server";
    pub const DHCP_V6_STATELESS: &str = "dhcpv6_stateless";
    /// In `options` of an LSP: the hostname(s) the port is bound to, a comma list during live
    /// migration.
    pub const REQUESTED_CHASSIS: &str = "requested-chassis";
    /// In `options` of an LSP: `rarp` while a live migration is in flight (Neutron sets it
    /// with the two-host `requested-chassis`, except for vhost-user ports).
    pub const ACTIVATION_STRATEGY: &str = "activation-strategy";
    /// In `status` of an LRP (OVN >= 23.09): the system-id of the chassis hosting the gateway.
    pub const HOSTING_CHASSIS: &str = "hosting-chassis";
}

/// `options:activation-strategy` of a port being live-migrated.
pub const ACTIVATION_STRATEGY_RARP: &str = "rarp";
/// `neutron:device_owner` of a router interface port.
pub const DEVICE_OWNER_ROUTER_INTERFACE: &str = "network:router_interface";
/// Prefix of the Neutron port name Octavia's OVN provider gives a load-balancer VIP port.
pub const LB_VIP_PORT_PREFIX: &str = "ovn-lb-vip-";
/// Prefix of OVN object names Neutron derives from its ids (`neutron-<id>`).
pub const NEUTRON_PREFIX: &str = "neutron-";

/// A Neutron key whose value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value:?}: {problem}")]
pub struct NeutronError {
    pub key: &'static str,
    pub value: String,
    pub problem: String,
}

impl NeutronError {
    fn new(key: &'static str, value: &str, problem: impl Into<String>) -> Self {
        NeutronError {
            key,
            value: value.to_owned(),
            problem: problem.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Addresses: `mac`, `nat_addresses`, `neutron:cidrs`.

/// One entry of `Port_Binding.nat_addresses`: `"<mac> <ip>... [is_chassis_resident(\"<port>\")]"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatEntry {
    pub mac: String,
    pub ips: Vec<IpAddr>,
    /// The port whose chassis answers for these IPs; `None` for entries without the clause
    /// (gateway routers), which upstream crashed on (U30).
    pub resident_port: Option<String>,
}

/// Parse one `nat_addresses` entry; `Err` names what is wrong.
pub fn parse_nat_entry(entry: &str) -> Result<NatEntry, String> {
    let mut tokens = entry.split_whitespace();
    let mac = tokens
        .next()
        .ok_or_else(|| "empty nat_addresses entry".to_owned())?;
    let mac = match nat_token(entry, 0, mac)? {
        NatToken::Mac(mac) => mac.to_owned(),
        _ => unreachable!("the first token is the MAC"),
    };
    let mut ips = Vec::new();
    let mut resident_port = None;
    for token in tokens {
        match nat_token(entry, 1, token)? {
            NatToken::Ip(ip) => ips.push(ip),
            NatToken::Resident(name) => resident_port = Some(name.to_owned()),
            NatToken::Mac(_) => unreachable!("only the first token is the MAC"),
        }
    }
    Ok(NatEntry {
        mac,
        ips,
        resident_port,
    })
}

/// One token of a `nat_addresses` entry, as [`nat_token`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatToken<'a> {
    /// The first token.
    Mac(&'a str),
    Ip(IpAddr),
    /// The port of an `is_chassis_resident("<port>")` clause.
    Resident(&'a str),
}

const RESIDENT_CLAUSE: &str = "is_chassis_resident(";

/// What the token at `index` of `entry` (split at whitespace) is; `Err` names what is wrong,
/// as [`parse_nat_entry`] reports it. Apart so that an entry can be read a part at a time
/// (a router's entry lists its thousands of centralized FIPs, and comes whole at each change).
pub fn nat_token<'a>(entry: &str, index: usize, token: &'a str) -> Result<NatToken<'a>, String> {
    if index == 0 {
        token
            .parse::<crate::types::MacAddr>()
            .map_err(|e| e.to_string())?;
        return Ok(NatToken::Mac(token));
    }
    if token.starts_with(RESIDENT_CLAUSE) {
        return resident_clause_port(token)
            .map(NatToken::Resident)
            .ok_or_else(|| match token.ends_with(')') {
                true => format!("bad is_chassis_resident port in {entry:?}"),
                false => format!("unterminated is_chassis_resident in {entry:?}"),
            });
    }
    token
        .parse::<IpAddr>()
        .map(NatToken::Ip)
        .map_err(|_| format!("bad IP {token:?} in nat_addresses entry"))
}

/// The port of an `is_chassis_resident("<port>")` token; `None` when it is malformed.
fn resident_clause_port(token: &str) -> Option<&str> {
    let name = token
        .strip_prefix(RESIDENT_CLAUSE)?
        .strip_suffix(')')?
        .trim_matches('"');
    (!name.is_empty() && !name.contains('"')).then_some(name)
}

/// The port a `nat_addresses` entry is resident on, read from its last `is_chassis_resident`
/// clause without parsing its IPs (a router's entry lists its thousands of centralized FIPs and
/// comes whole in every update of its row, which the model indexes by this). `None` without a
/// clause or when the last one is malformed; [`parse_nat_entry`] tells what is wrong with an
/// entry.
pub fn nat_entry_resident(entry: &str) -> Option<&str> {
    let mut tokens = entry.split_whitespace();
    tokens.next()?; // the MAC
    tokens
        .rev()
        .find(|t| t.starts_with(RESIDENT_CLAUSE))
        .and_then(resident_clause_port)
}

/// The addresses in `Port_Binding.mac[0]` (or an LSP's `addresses[0]`): `"<mac> <ip>[/<len>] ..."`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAddresses {
    pub mac: crate::types::MacAddr,
    /// Each address with its prefix length (`/32`, `/128` when the row gave none).
    pub ips: Vec<IpNet>,
}

/// Parse `mac[0]`. `Ok(None)` for a port without IPs (`"unknown"`, `"router"`, `"dynamic"`, a bare
/// MAC, or empty). Later entries (a port with several MACs) are not read, as upstream.
pub fn parse_port_addresses(mac_column: &[String]) -> Result<Option<PortAddresses>, String> {
    let Some(first) = mac_column.first() else {
        return Ok(None);
    };
    let mut tokens = first.split_whitespace();
    let Some(mac_text) = tokens.next() else {
        return Ok(None);
    };
    if mac_text == "unknown" || mac_text == "router" || mac_text == "dynamic" {
        return Ok(None);
    }
    let mac = mac_text
        .parse()
        .map_err(|_| format!("bad MAC {mac_text:?} in mac column"))?;
    let mut ips = Vec::new();
    for token in tokens {
        ips.push(parse_ip_or_cidr(token).map_err(|e| format!("{e} in mac column"))?);
    }
    if ips.is_empty() {
        return Ok(None);
    }
    Ok(Some(PortAddresses { mac, ips }))
}

/// `10.0.0.1/24` keeps its length; a bare address becomes a host prefix. Zoned IPv6 addresses
/// (`fe80::1%eth0`) are refused: a zone means nothing off the host.
pub fn parse_ip_or_cidr(token: &str) -> Result<IpNet, String> {
    if token.contains('/') {
        token
            .parse::<IpNet>()
            .map_err(|_| format!("bad CIDR {token:?}"))
    } else {
        token
            .parse::<IpAddr>()
            .map(IpNet::from)
            .map_err(|_| format!("bad IP {token:?}"))
    }
}

/// Parse `external_ids:neutron:cidrs` (`"10.0.0.10/24 2001:db8::10/64"`). Duplicates are kept,
/// in order: every consumer keys what it builds by address.
pub fn parse_neutron_cidrs(value: &str) -> Result<Vec<IpNet>, String> {
    value
        .split_whitespace()
        .map(|t| parse_ip_or_cidr(t).map_err(|e| format!("{e} in neutron:cidrs")))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Names and references.

/// The load-balancer name of an Octavia VIP port from its `neutron:port_name`
/// (`ovn-lb-vip-<lb>`); `None` for any other port.
pub fn lb_vip_name(port_name: Option<&str>) -> Option<&str> {
    port_name
        .and_then(|n| n.strip_prefix(LB_VIP_PORT_PREFIX))
        .filter(|n| !n.is_empty())
}

/// The network id in `neutron:network_name` (`neutron-<id>`); `None` when absent or not of that
/// form (a switch Neutron does not manage).
pub fn network_id(network_name: Option<&str>) -> Option<&str> {
    network_name
        .map(str::trim)
        .and_then(|n| n.strip_prefix(NEUTRON_PREFIX))
        .filter(|id| !id.is_empty())
}

/// The OVN Logical_Switch name of a Neutron network id: `neutron-<id>`.
pub fn network_switch_name(network_id: &str) -> String {
    format!("{NEUTRON_PREFIX}{network_id}")
}

/// The provider switch of a FIP: `neutron:fip_network_id` holds the bare network id, the switch
/// is `neutron-<id>`. A value already carrying the prefix is taken as the switch name itself.
pub fn fip_network_switch(fip_network_id: Option<&str>) -> Option<String> {
    let id = fip_network_id.map(str::trim).filter(|v| !v.is_empty())?;
    if id.starts_with(NEUTRON_PREFIX) {
        Some(id.to_owned())
    } else {
        Some(network_switch_name(id))
    }
}

/// The router id in `neutron:router_name` or `lr_ref`: the LRP holds the bare id, a
/// port-forwarding LB and `lr_ref` hold `neutron-<id>`; both give the id.
pub fn router_id(router_name: Option<&str>) -> Option<&str> {
    let v = router_name.map(str::trim).filter(|v| !v.is_empty())?;
    let id = v.strip_prefix(NEUTRON_PREFIX).unwrap_or(v);
    (!id.is_empty()).then_some(id)
}

/// The router a port attaches a subnet to: `neutron:device_id` when
/// `neutron:device_owner = network:router_interface`.
pub fn router_interface_of<'a>(
    device_owner: Option<&str>,
    device_id: Option<&'a str>,
) -> Option<&'a str> {
    if device_owner.map(str::trim) != Some(DEVICE_OWNER_ROUTER_INTERFACE) {
        return None;
    }
    device_id.map(str::trim).filter(|id| !id.is_empty())
}

/// `neutron:port_fip`: the floating IP of a port.
pub fn port_fip(value: Option<&str>) -> Result<Option<IpAddr>, NeutronError> {
    parse_opt_ip(keys::PORT_FIP, value)
}

fn parse_opt_ip(key: &'static str, value: Option<&str>) -> Result<Option<IpAddr>, NeutronError> {
    let Some(raw) = value else {
        return Ok(None);
    };
    let v = raw.trim();
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<IpAddr>()
        .map(Some)
        .map_err(|_| NeutronError::new(key, raw, "not an IP address"))
}

/// The address scope of a port for one family (`neutron:subnet_pool_addr_scope4/6`).
pub fn address_scope<'a>(is_ipv4: bool, get: impl Fn(&str) -> Option<&'a str>) -> Option<&'a str> {
    let key = if is_ipv4 {
        keys::ADDRESS_SCOPE4
    } else {
        keys::ADDRESS_SCOPE6
    };
    get(key).map(str::trim).filter(|s| !s.is_empty())
}

// ---------------------------------------------------------------------------------------------
// Binding: requested-chassis, host_id, hosting-chassis.

/// `options:requested-chassis`: the hostnames, in order, without blanks (`"node2,node1"` during a
/// live migration).
pub fn requested_chassis(value: Option<&str>) -> Vec<&str> {
    value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// The chassis (hostname) an LSP is bound to, as upstream's `get_port_chassis`: a virtual port's
/// `neutron:host_id`; otherwise `hostname` when `requested-chassis` lists it, else the first
/// listed one.
pub fn bound_chassis<'a>(
    port_type: &str,
    requested: Option<&'a str>,
    host_id: Option<&'a str>,
    hostname: &str,
) -> Option<&'a str> {
    if port_type == "virtual" {
        return host_id.map(str::trim).filter(|h| !h.is_empty());
    }
    let listed = requested_chassis(requested);
    listed
        .iter()
        .find(|c| **c == hostname)
        .or_else(|| listed.first())
        .copied()
}

/// `status:hosting-chassis` of an LRP: the system-id of its gateway chassis.
pub fn hosting_chassis(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

// ---------------------------------------------------------------------------------------------
// NB_Global and Octavia.

/// `NB_Global.external_ids:neutron:fip-distributed`: absent means distributed (upstream warns),
/// `True`/`False` in any case; anything else is an error, not a guess.
pub fn fip_distributed(value: Option<&str>) -> Result<bool, NeutronError> {
    let Some(raw) = value else {
        return Ok(true);
    };
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(NeutronError::new(
            keys::FIP_DISTRIBUTED,
            raw,
            "expected True or False",
        )),
    }
}

/// The Octavia OVN-provider keys of a Load_Balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OctaviaLb {
    /// The router id from `lr_ref` (`neutron-<id>`).
    pub router: String,
    pub vip: Option<IpAddr>,
    pub vip_fip: Option<IpAddr>,
    pub vip_port_id: Option<String>,
}

/// The Octavia keys of a Load_Balancer's `external_ids`; `Ok(None)` for an LB without `lr_ref`
/// (not attached to a router: upstream's KeyError, U26).
pub fn octavia_lb<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<OctaviaLb>, NeutronError> {
    let Some(router) = router_id(get(keys::LB_LR_REF)) else {
        return Ok(None);
    };
    Ok(Some(OctaviaLb {
        router: router.to_owned(),
        vip: parse_opt_ip(keys::LB_VIP, get(keys::LB_VIP))?,
        vip_fip: parse_opt_ip(keys::LB_VIP_FIP, get(keys::LB_VIP_FIP))?,
        vip_port_id: get(keys::LB_VIP_PORT_ID)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
    }))
}

// ---------------------------------------------------------------------------------------------
// networking-bgpvpn.

/// `neutron_bgpvpn:type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgpvpnType {
    L3,
    L2,
}

/// The administrator part of a route distinguisher or route target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RdAdmin {
    Asn(u32),
    Ipv4(Ipv4Addr),
}

/// A route distinguisher or route target, `ASN:NN` or `IPv4:NN` (RFC 4364 types 0, 1 and 2:
/// a 4-byte ASN or an IPv4 address leaves 2 bytes for the number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteDistinguisher {
    pub admin: RdAdmin,
    pub number: u32,
}

/// Route targets have the syntax of route distinguishers.
pub type RouteTarget = RouteDistinguisher;

impl fmt::Display for RouteDistinguisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.admin {
            RdAdmin::Asn(a) => write!(f, "{a}:{}", self.number),
            RdAdmin::Ipv4(ip) => write!(f, "{ip}:{}", self.number),
        }
    }
}

impl std::str::FromStr for RouteDistinguisher {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (admin, number) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} is not ASN:NN or IPv4:NN"))?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(number) {
            return Err(format!("{s:?}: {number:?} is not a number"));
        }
        let number: u32 = number
            .parse()
            .map_err(|_| format!("{s:?}: {number} is out of range"))?;
        let admin = if digits(admin) {
            let asn: u32 = admin
                .parse()
                .map_err(|_| format!("{s:?}: AS {admin} is out of range"))?;
            if asn == 0 {
                return Err(format!("{s:?}: AS 0 is reserved"));
            }
            if asn > u32::from(u16::MAX) && number > u32::from(u16::MAX) {
                return Err(format!(
                    "{s:?}: with a 4-byte AS the number must be at most 65535"
                ));
            }
            RdAdmin::Asn(asn)
        } else {
            let ip: Ipv4Addr = admin
                .parse()
                .map_err(|_| format!("{s:?}: {admin:?} is neither an AS nor an IPv4 address"))?;
            if number > u32::from(u16::MAX) {
                return Err(format!(
                    "{s:?}: with an IPv4 address the number must be at most 65535"
                ));
            }
            RdAdmin::Ipv4(ip)
        };
        Ok(RouteDistinguisher { admin, number })
    }
}

/// The networking-bgpvpn keys of a row. A key that is present but unusable is left out and its
/// reason recorded in `ignored` (upstream ignores an invalid VNI or AS).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bgpvpn {
    pub vpn_type: Option<BgpvpnType>,
    pub vni: Option<u32>,
    pub asn: Option<u32>,
    pub rd: Vec<RouteDistinguisher>,
    pub rt: Vec<RouteTarget>,
    /// Import targets.
    pub it: Vec<RouteTarget>,
    /// Export targets.
    pub et: Vec<RouteTarget>,
    pub ignored: Vec<NeutronError>,
}

impl Bgpvpn {
    /// Whether any `neutron_bgpvpn:*` setting was usable.
    pub fn is_empty(&self) -> bool {
        self.vpn_type.is_none()
            && self.vni.is_none()
            && self.asn.is_none()
            && self.rd.is_empty()
            && self.rt.is_empty()
            && self.it.is_empty()
            && self.et.is_empty()
    }
}

/// Largest VXLAN network identifier (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// Read every `neutron_bgpvpn:*` key through `get` (an `external_ids` lookup).
pub fn bgpvpn<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Bgpvpn {
    let mut out = Bgpvpn::default();
    if let Some(raw) = get(keys::BGPVPN_TYPE) {
        match raw.trim() {
            "l3" => out.vpn_type = Some(BgpvpnType::L3),
            "l2" => out.vpn_type = Some(BgpvpnType::L2),
            _ => out.ignored.push(NeutronError::new(
                keys::BGPVPN_TYPE,
                raw,
                "expected l3 or l2",
            )),
        }
    }
    if let Some(raw) = get(keys::BGPVPN_VNI) {
        match parse_u32(raw) {
            Some(v) if (1..=MAX_VNI).contains(&v) => out.vni = Some(v),
            _ => out.ignored.push(NeutronError::new(
                keys::BGPVPN_VNI,
                raw,
                format!("expected an integer VNI in 1..={MAX_VNI}"),
            )),
        }
    }
    if let Some(raw) = get(keys::BGPVPN_AS) {
        match parse_u32(raw) {
            Some(v) if v >= 1 => out.asn = Some(v),
            _ => out.ignored.push(NeutronError::new(
                keys::BGPVPN_AS,
                raw,
                "expected an integer AS in 1..=4294967295",
            )),
        }
    }
    for (key, field) in [
        (keys::BGPVPN_RD, &mut out.rd),
        (keys::BGPVPN_RT, &mut out.rt),
        (keys::BGPVPN_IT, &mut out.it),
        (keys::BGPVPN_ET, &mut out.et),
    ] {
        if let Some(raw) = get(key) {
            match parse_route_list(key, raw) {
                Ok(v) => *field = v,
                Err(e) => out.ignored.push(e),
            }
        }
    }
    out
}

/// An integer as Python's `int()` reads it from a string: surrounding whitespace, an optional
/// `+`, digits (underscores between digits allowed).
fn parse_u32(raw: &str) -> Option<u32> {
    let t = raw.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() || t.starts_with('_') || t.ends_with('_') || t.contains("__") {
        return None;
    }
    if !t.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return None;
    }
    t.replace('_', "").parse().ok()
}

/// A `neutron_bgpvpn:rd/rt/it/et` value: a Python list literal of strings, each `ASN:NN` or
/// `IPv4:NN`. One bad entry rejects the key: a partial set of targets would import or export a
/// VPN the operator did not ask for.
pub fn parse_route_list(
    key: &'static str,
    raw: &str,
) -> Result<Vec<RouteDistinguisher>, NeutronError> {
    let items = parse_python_str_list(raw).map_err(|p| NeutronError::new(key, raw, p))?;
    items
        .iter()
        .map(|s| {
            s.parse()
                .map_err(|p: String| NeutronError::new(key, raw, p))
        })
        .collect()
}

/// A Python list of string literals, read as `ast.literal_eval` reads it: `['a', "b"]`, `[]`, a
/// trailing comma, whitespace and newlines between tokens, adjacent literals concatenated
/// (`['a' 'b']` is `['ab']`), `u`/`r` prefixes and the common escapes. Anything else (a bare
/// word, a number, a nested list, a tuple, bytes, trailing text) is refused with the reason.
pub fn parse_python_str_list(text: &str) -> Result<Vec<String>, String> {
    let mut p = PyLexer {
        chars: text.chars().collect(),
        pos: 0,
    };
    p.skip_ws();
    if !p.eat('[') {
        return Err("not a Python list (expected '[')".to_owned());
    }
    let mut items = Vec::new();
    loop {
        p.skip_ws();
        if p.eat(']') {
            break;
        }
        let mut item = p.string_literal()?;
        // Implicit concatenation of adjacent literals.
        loop {
            p.skip_ws();
            if p.at_string_start() {
                item.push_str(&p.string_literal()?);
            } else {
                break;
            }
        }
        items.push(item);
        p.skip_ws();
        if p.eat(',') {
            continue;
        }
        if p.eat(']') {
            break;
        }
        return Err(match p.peek() {
            Some(c) => format!("expected ',' or ']' at {c:?} (position {})", p.pos),
            None => "unterminated list (missing ']')".to_owned(),
        });
    }
    p.skip_ws();
    if let Some(c) = p.peek() {
        return Err(format!(
            "unexpected {c:?} after the list (position {})",
            p.pos
        ));
    }
    Ok(items)
}

struct PyLexer {
    chars: Vec<char>,
    pos: usize,
}

impl PyLexer {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r' | '\x0c')) {
            self.pos += 1;
        }
    }

    /// Length of a string prefix (`u`, `r`, ...) followed by a quote at the cursor, if any.
    fn prefix_len(&self) -> Option<usize> {
        let mut n = 0;
        while let Some(c) = self.chars.get(self.pos + n) {
            if c.is_ascii_alphabetic() && n < 2 {
                n += 1;
            } else {
                break;
            }
        }
        matches!(self.chars.get(self.pos + n), Some('\'' | '"')).then_some(n)
    }

    fn at_string_start(&self) -> bool {
        self.prefix_len().is_some()
    }

    fn string_literal(&mut self) -> Result<String, String> {
        let start = self.pos;
        let Some(n) = self.prefix_len() else {
            return Err(match self.peek() {
                Some(c) => format!("expected a string literal at {c:?} (position {start})"),
                None => "unterminated list (missing ']')".to_owned(),
            });
        };
        let prefix: String = self.chars[self.pos..self.pos + n]
            .iter()
            .collect::<String>()
            .to_ascii_lowercase();
        let raw = match prefix.as_str() {
            "" | "u" => false,
            "r" => true,
            other => {
                return Err(format!(
                    "string prefix {other:?} at position {start} is not a plain string"
                ));
            }
        };
        self.pos += n;
        let quote = self.chars[self.pos];
        self.pos += 1;
        let triple = self.chars.get(self.pos) == Some(&quote)
            && self.chars.get(self.pos + 1) == Some(&quote);
        if triple {
            return Err(format!(
                "triple-quoted string at position {start} is not supported"
            ));
        }
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("unterminated string starting at position {start}"));
            };
            self.pos += 1;
            match c {
                c if c == quote => return Ok(out),
                '\n' | '\r' => {
                    return Err(format!(
                        "line break inside the string starting at position {start}"
                    ));
                }
                '\\' if raw => {
                    // A raw string keeps the backslash, and an escaped quote does not end it.
                    out.push('\\');
                    if let Some(next) = self.peek() {
                        out.push(next);
                        self.pos += 1;
                    }
                }
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(format!("unterminated string starting at position {start}"));
                    };
                    self.pos += 1;
                    match e {
                        '\\' => out.push('\\'),
                        '\'' => out.push('\''),
                        '"' => out.push('"'),
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        other => {
                            return Err(format!(
                                "escape \\{other} in the string at position {start} is not supported"
                            ));
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
        move |k| pairs.iter().find(|(key, _)| *key == k).map(|(_, v)| *v)
    }

    #[test]
    fn nat_entry_with_and_without_residence_clause() {
        let e =
            parse_nat_entry(r#"fa:16:3e:aa:bb:cc 172.24.100.20 is_chassis_resident("cr-lrp-R")"#)
                .unwrap();
        assert_eq!(e.resident_port.as_deref(), Some("cr-lrp-R"));
        assert_eq!(e.ips, vec!["172.24.100.20".parse::<IpAddr>().unwrap()]);
        let e = parse_nat_entry("fa:16:3e:aa:bb:cc 172.24.100.20 172.24.100.21").unwrap();
        assert_eq!(e.resident_port, None);
        assert_eq!(e.ips.len(), 2);
        assert!(parse_nat_entry("nonsense 1.2.3.4").is_err());
        assert!(parse_nat_entry("fa:16:3e:aa:bb:cc 1.2.3.400").is_err());
    }

    #[test]
    fn nat_entry_resident_reads_the_last_clause_alone() {
        let entry = r#"fa:16:3e:aa:bb:cc 172.24.100.20 is_chassis_resident("cr-lrp-R")"#;
        assert_eq!(nat_entry_resident(entry), Some("cr-lrp-R"));
        // The same answer as the full parse, for the entries it accepts...
        for entry in [
            entry,
            "fa:16:3e:aa:bb:cc 1.2.3.4",
            "fa:16:3e:aa:bb:cc",
            r#"fa:16:3e:aa:bb:cc is_chassis_resident("a") 1.2.3.4 is_chassis_resident("b")"#,
            "\tfa:16:3e:aa:bb:cc\t10.0.0.1\tis_chassis_resident(\"x\")\n",
        ] {
            assert_eq!(
                nat_entry_resident(entry),
                parse_nat_entry(entry).unwrap().resident_port.as_deref(),
                "{entry:?}"
            );
        }
        // ...and without parsing the IPs: a bad one does not hide the residence (the
        // computation reports the entry).
        assert_eq!(
            nat_entry_resident(r#"fa:16:3e:aa:bb:cc 1.2.3.400 is_chassis_resident("R")"#),
            Some("R")
        );
        // A clause as the first token is a bad MAC, not a residence.
        assert_eq!(nat_entry_resident(r#"is_chassis_resident("R")"#), None);
        for bad in [
            r#"fa:16:3e:aa:bb:cc 1.2.3.4 is_chassis_resident("a"b")"#,
            r#"fa:16:3e:aa:bb:cc 1.2.3.4 is_chassis_resident("cr-lrp-R""#,
            r#"fa:16:3e:aa:bb:cc is_chassis_resident("")"#,
            "",
        ] {
            assert_eq!(nat_entry_resident(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn nat_entry_odd_inputs() {
        assert!(parse_nat_entry("").is_err());
        assert!(parse_nat_entry("   \t ").is_err());
        // Tabs and repeated blanks separate tokens; a MAC alone is an entry without IPs.
        let e = parse_nat_entry("\tfa:16:3e:aa:bb:cc   10.0.0.1\t10.0.0.1 ").unwrap();
        assert_eq!(e.ips.len(), 2, "duplicates are kept as written");
        assert!(parse_nat_entry("fa:16:3e:aa:bb:cc").unwrap().ips.is_empty());
        // Zoned IPv6 addresses mean nothing off the host.
        assert!(parse_nat_entry("fa:16:3e:aa:bb:cc fe80::1%eth0").is_err());
        // Hostile residence clauses: quotes inside, unterminated, newline-split, empty.
        assert!(
            parse_nat_entry(r#"fa:16:3e:aa:bb:cc 1.2.3.4 is_chassis_resident("a"b")"#).is_err()
        );
        assert!(
            parse_nat_entry(r#"fa:16:3e:aa:bb:cc 1.2.3.4 is_chassis_resident("cr-lrp-R""#).is_err()
        );
        assert!(
            parse_nat_entry("fa:16:3e:aa:bb:cc 1.2.3.4 is_chassis_resident(\"cr\nx\")").is_err()
        );
        assert!(parse_nat_entry(r#"fa:16:3e:aa:bb:cc is_chassis_resident("")"#).is_err());
    }

    #[test]
    fn port_addresses_keep_prefix_lengths() {
        let a = parse_port_addresses(&["fa:16:3e:aa:bb:cc 172.24.100.5/24 2001:db8::5/64".into()])
            .unwrap()
            .unwrap();
        assert_eq!(a.ips[0].to_string(), "172.24.100.5/24");
        assert_eq!(a.ips[1].to_string(), "2001:db8::5/64");
        let a = parse_port_addresses(&["fa:16:3e:00:00:10 172.24.100.10".into()])
            .unwrap()
            .unwrap();
        assert_eq!(a.ips[0].to_string(), "172.24.100.10/32");
        assert_eq!(parse_port_addresses(&["unknown".into()]).unwrap(), None);
        assert_eq!(parse_port_addresses(&[]).unwrap(), None);
        assert!(parse_port_addresses(&["fa:16:3e:00:00:10 172.24.100.300".into()]).is_err());
        assert!(parse_port_addresses(&["zz 172.24.100.3".into()]).is_err());
    }

    #[test]
    fn port_addresses_odd_inputs() {
        for none in [
            "",
            "  ",
            "router",
            "dynamic",
            "fa:16:3e:00:00:10",
            "unknown 10.0.0.1",
        ] {
            assert_eq!(
                parse_port_addresses(&[none.into()]).unwrap(),
                None,
                "{none:?}"
            );
        }
        // Only mac[0] is read.
        let a = parse_port_addresses(&[
            "fa:16:3e:00:00:10\n10.0.0.1 10.0.0.1".into(),
            "garbage".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.ips.len(), 2);
        assert!(parse_port_addresses(&["fa:16:3e:00:00:10 fe80::1%eth0".into()]).is_err());
        assert!(parse_port_addresses(&["fa:16:3e:00:00:10 \"10.0.0.1\"".into()]).is_err());
        assert!(parse_port_addresses(&["fa:16:3e:00:00:10 10.0.0.1/33".into()]).is_err());
    }

    #[test]
    fn neutron_cidrs_odd_inputs() {
        assert_eq!(parse_neutron_cidrs("").unwrap(), vec![]);
        assert_eq!(parse_neutron_cidrs(" \n\t ").unwrap(), vec![]);
        let v = parse_neutron_cidrs(" 10.0.0.10/24\n2001:db8::10/64  10.0.0.10/24 ").unwrap();
        assert_eq!(
            v.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["10.0.0.10/24", "2001:db8::10/64", "10.0.0.10/24"]
        );
        assert_eq!(
            parse_neutron_cidrs("10.0.0.7").unwrap()[0].to_string(),
            "10.0.0.7/32"
        );
        let e = parse_neutron_cidrs("fe80::1%eth0/64").unwrap_err();
        assert!(e.contains("neutron:cidrs"), "{e}");
        assert!(parse_neutron_cidrs("'10.0.0.1/24'").is_err());
        assert!(parse_neutron_cidrs("10.0.0.1/24,10.0.0.2/24").is_err());
    }

    #[test]
    fn lb_vip_and_names() {
        assert_eq!(lb_vip_name(Some("ovn-lb-vip-lb1")), Some("lb1"));
        assert_eq!(lb_vip_name(Some("ovn-lb-vip-")), None);
        assert_eq!(lb_vip_name(Some("vm-port")), None);
        assert_eq!(lb_vip_name(None), None);
        assert_eq!(network_id(Some("neutron-abc")), Some("abc"));
        assert_eq!(network_id(Some(" neutron-abc \n")), Some("abc"));
        assert_eq!(network_id(Some("neutron-")), None);
        assert_eq!(network_id(Some("public")), None);
        assert_eq!(network_switch_name("abc"), "neutron-abc");
        assert_eq!(
            fip_network_switch(Some("abc")).as_deref(),
            Some("neutron-abc")
        );
        assert_eq!(
            fip_network_switch(Some("neutron-abc")).as_deref(),
            Some("neutron-abc")
        );
        assert_eq!(fip_network_switch(Some("  ")), None);
        assert_eq!(router_id(Some("neutron-r1")), Some("r1"));
        assert_eq!(router_id(Some("r1")), Some("r1"));
        assert_eq!(router_id(Some("neutron-")), None);
        assert_eq!(router_id(None), None);
        assert_eq!(
            router_interface_of(Some("network:router_interface"), Some("r1")),
            Some("r1")
        );
        assert_eq!(
            router_interface_of(Some("network:router_gateway"), Some("r1")),
            None
        );
        assert_eq!(
            router_interface_of(Some("network:router_interface"), Some(" ")),
            None
        );
    }

    #[test]
    fn port_fip_and_scopes() {
        assert_eq!(
            port_fip(Some(" 172.24.100.22 ")).unwrap(),
            Some("172.24.100.22".parse().unwrap())
        );
        assert_eq!(port_fip(None).unwrap(), None);
        assert_eq!(port_fip(Some("")).unwrap(), None);
        let e = port_fip(Some("172.24.100.22\n; rm -rf /")).unwrap_err();
        assert_eq!(e.key, keys::PORT_FIP);
        assert!(e.to_string().contains("\\n"), "value escaped: {e}");
        let ids = [
            (keys::ADDRESS_SCOPE4, "scope-a"),
            (keys::ADDRESS_SCOPE6, " "),
        ];
        assert_eq!(address_scope(true, map(&ids)), Some("scope-a"));
        assert_eq!(address_scope(false, map(&ids)), None);
    }

    #[test]
    fn requested_and_bound_chassis() {
        assert_eq!(
            requested_chassis(Some("node2, node1,,")),
            ["node2", "node1"]
        );
        assert!(requested_chassis(Some("")).is_empty());
        assert!(requested_chassis(None).is_empty());
        assert_eq!(
            bound_chassis("", Some("node2,node1"), None, "node1"),
            Some("node1")
        );
        assert_eq!(
            bound_chassis("", Some("node2,node1"), None, "node3"),
            Some("node2")
        );
        assert_eq!(bound_chassis("", None, Some("node1"), "node1"), None);
        // Virtual ports: requested-chassis ignored, host_id used.
        assert_eq!(
            bound_chassis("virtual", Some("node1"), Some("node2"), "node1"),
            Some("node2")
        );
        assert_eq!(bound_chassis("virtual", Some("node1"), None, "node1"), None);
        assert_eq!(hosting_chassis(Some(" ch-1 ")), Some("ch-1"));
        assert_eq!(hosting_chassis(Some("")), None);
    }

    #[test]
    fn fip_distributed_flag() {
        assert!(fip_distributed(None).unwrap());
        assert!(fip_distributed(Some("True")).unwrap());
        assert!(fip_distributed(Some("true")).unwrap());
        assert!(!fip_distributed(Some("False")).unwrap());
        assert!(!fip_distributed(Some(" FALSE ")).unwrap());
        for bad in ["", "yes", "0", "Fals"] {
            let e = fip_distributed(Some(bad)).unwrap_err();
            assert!(e.to_string().contains("neutron:fip-distributed"), "{e}");
        }
    }

    #[test]
    fn octavia_keys() {
        let ids = [
            (keys::LB_LR_REF, "neutron-r1"),
            (keys::LB_VIP, "172.24.100.30"),
            (keys::LB_VIP_FIP, "172.24.100.31"),
            (keys::LB_VIP_PORT_ID, "vip1"),
        ];
        let lb = octavia_lb(map(&ids)).unwrap().unwrap();
        assert_eq!(lb.router, "r1");
        assert_eq!(lb.vip, Some("172.24.100.30".parse().unwrap()));
        assert_eq!(lb.vip_fip, Some("172.24.100.31".parse().unwrap()));
        assert_eq!(lb.vip_port_id.as_deref(), Some("vip1"));
        assert_eq!(octavia_lb(map(&[(keys::LB_VIP, "1.2.3.4")])).unwrap(), None);
        let e =
            octavia_lb(map(&[(keys::LB_LR_REF, "neutron-r1"), (keys::LB_VIP, "x")])).unwrap_err();
        assert_eq!(e.key, keys::LB_VIP);
    }

    #[test]
    fn python_list_literals_as_literal_eval_reads_them() {
        let ok = |t: &str| parse_python_str_list(t).unwrap();
        assert_eq!(ok("['64999:1', '64999:2']"), ["64999:1", "64999:2"]);
        assert_eq!(ok("[\"64999:1\"]"), ["64999:1"]);
        assert!(ok("[]").is_empty());
        assert!(ok("  [ \n ]  ").is_empty());
        assert_eq!(ok("['a',]"), ["a"]);
        assert_eq!(ok("[\n  'a' ,\n\t\"b\"\n]\n"), ["a", "b"]);
        assert_eq!(ok("['a' 'b']"), ["ab"]);
        assert_eq!(ok("[u'a', r'b\\'c']"), ["a", "b\\'c"]);
        assert_eq!(ok(r#"['it''s', "say \"hi\""]"#), ["its", "say \"hi\""]);
        assert_eq!(ok(r#"['a\'b']"#), ["a'b"]);
        assert_eq!(ok("['a', 'a']"), ["a", "a"]);
        for bad in [
            "",
            "64999:1",
            "'64999:1'",
            "('a',)",
            "['a'",
            "['a',,]",
            "[,]",
            "[a]",
            "[1]",
            "[['a']]",
            "['a'] x",
            "['a']; import os",
            "[b'a']",
            "[f'a']",
            "['''a''']",
            "['a\nb']",
            "['a\\x41']",
            "['a' 1]",
            "{'a'}",
        ] {
            assert!(parse_python_str_list(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn route_distinguishers_and_targets() {
        let rd: RouteDistinguisher = "64999:1".parse().unwrap();
        assert_eq!(rd.admin, RdAdmin::Asn(64999));
        assert_eq!(rd.to_string(), "64999:1");
        let rd: RouteDistinguisher = "10.0.0.1:100".parse().unwrap();
        assert_eq!(rd.admin, RdAdmin::Ipv4("10.0.0.1".parse().unwrap()));
        assert_eq!(rd.to_string(), "10.0.0.1:100");
        assert!("4200000000:65535".parse::<RouteDistinguisher>().is_ok());
        assert!("65000:4294967295".parse::<RouteDistinguisher>().is_ok());
        for bad in [
            "",
            "64999",
            ":1",
            "64999:",
            "0:1",
            "4200000000:65536",
            "10.0.0.1:65536",
            "10.0.0.300:1",
            "2001:db8::1:1",
            "64999:-1",
            "64999:1 ",
            "as64999:1",
            "4294967296:1",
        ] {
            assert!(
                bad.parse::<RouteDistinguisher>().is_err(),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn bgpvpn_settings() {
        let ids = [
            (keys::BGPVPN_TYPE, "l3"),
            (keys::BGPVPN_VNI, " 1001 "),
            (keys::BGPVPN_AS, "64999"),
            (keys::BGPVPN_RD, "['64999:1001']"),
            (keys::BGPVPN_RT, "['64999:1', \"10.0.0.1:2\",]"),
            (keys::BGPVPN_IT, "[]"),
        ];
        let b = bgpvpn(map(&ids));
        assert_eq!(b.vpn_type, Some(BgpvpnType::L3));
        assert_eq!(b.vni, Some(1001));
        assert_eq!(b.asn, Some(64999));
        assert_eq!(b.rd.len(), 1);
        assert_eq!(
            b.rt.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["64999:1", "10.0.0.1:2"]
        );
        assert!(b.it.is_empty() && b.et.is_empty());
        assert!(b.ignored.is_empty(), "{:?}", b.ignored);
        assert!(bgpvpn(map(&[])).is_empty());

        let ids = [
            (keys::BGPVPN_TYPE, "L3"),
            (keys::BGPVPN_VNI, "16777216"),
            (keys::BGPVPN_AS, "sixty"),
            (keys::BGPVPN_RD, "['64999:1', 'bogus']"),
            (keys::BGPVPN_ET, "'64999:1'"),
        ];
        let b = bgpvpn(map(&ids));
        assert!(b.is_empty(), "{b:?}");
        let keys_ignored: Vec<&str> = b.ignored.iter().map(|e| e.key).collect();
        assert_eq!(
            keys_ignored,
            [
                keys::BGPVPN_TYPE,
                keys::BGPVPN_VNI,
                keys::BGPVPN_AS,
                keys::BGPVPN_RD,
                keys::BGPVPN_ET
            ]
        );
        assert!(
            b.ignored[3].to_string().contains("bogus"),
            "{}",
            b.ignored[3]
        );
        assert_eq!(parse_u32("+1_000"), Some(1000));
        assert_eq!(parse_u32("1__0"), None);
        assert_eq!(parse_u32("0x10"), None);
        assert_eq!(parse_u32("-1"), None);
    }
}
