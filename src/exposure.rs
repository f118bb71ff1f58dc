//! What a driver produces: the set of things this chassis must make reachable.
//!
//! A driver reads its OVSDB replica and returns an [`ExposureSet`]; it never touches the system.
//! The set is plain, ordered data so that driver tests can compare it with snapshot files and the
//! backend can turn it into kernel/FRR/OVS objects deterministically.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::types::{InterfaceName, MacAddr};

/// A provider network as this chassis sees it: a physnet name from the localnet port, the OVS
/// bridge it maps to in `ovn-bridge-mappings`, and the localnet VLAN tag if any.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProviderNetwork {
    pub physnet: String,
    pub bridge: InterfaceName,
    pub vlan: Option<u16>,
}

/// Why an IP is exposed; kept for logs, metrics and snapshot readability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExposureKind {
    /// VM port on a provider network bound here.
    ProviderPort,
    /// `virtual` port (Octavia amphora VIP, allowed-address-pair) bound here.
    VirtualPort,
    /// Floating IP, centralized (on the gateway) or distributed (on the VM's chassis).
    FloatingIp,
    /// Router gateway port (`cr-lrp-*`) bound here.
    GatewayPort,
    /// Tenant VM IP announced on the gateway chassis (tenant exposure).
    TenantPort,
    /// OVN load-balancer VIP.
    LoadBalancerVip,
}

/// One IP this chassis must announce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposedIp {
    pub ip: IpAddr,
    pub kind: ExposureKind,
    /// The OVSDB row this exposure comes from (logical port name or row uuid), for logs.
    pub source: String,
    /// Provider network the traffic to this IP enters through; `None` for IPs that are only
    /// announced (tenant VM IPs behind a gateway: their route is the subnet route).
    pub provider: Option<ProviderNetwork>,
    /// Permanent neighbour entry on the provider device (gateway ports).
    pub lladdr: Option<MacAddr>,
    /// IPv6 prefixes to answer NDP for on the provider device.
    pub ndp_proxy: BTreeSet<IpNet>,
}

/// A tenant subnet routed through a gateway port bound here.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExposedSubnet {
    /// The router interface address with its prefix length (`10.0.0.1/24`): upstream's rule key.
    pub router_ip: IpNet,
    /// The gateway port address of the same family the subnet route goes via.
    pub via: IpAddr,
    pub provider: ProviderNetwork,
    pub source: String,
}

/// Per-bridge wiring a driver needs on this chassis regardless of what is exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeWiring {
    pub bridge: InterfaceName,
    /// Physnets mapped to this bridge in `ovn-bridge-mappings`.
    pub physnets: BTreeSet<String>,
    /// VLAN tags of localnet ports of those physnets (one VLAN device each).
    pub vlans: BTreeSet<u16>,
    /// Names of the localnet ports of those physnets: ovn-controller patches each into the
    /// bridge as `patch-<localnet>-to-br-int`, the in_port of the MAC-tweak flows.
    pub localnet_ports: BTreeSet<String>,
    /// 1-based position of the bridge in `ovn-bridge-mappings` (upstream's ARP/NDP helper address).
    pub index: u16,
}

/// A row the driver could not turn into an exposure; it is logged and the rest is still exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedRow {
    pub table: String,
    pub row: String,
    pub reason: String,
}

/// Everything a driver wants exposed on this chassis at one point in time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposureSet {
    pub ips: BTreeMap<IpAddr, ExposedIp>,
    pub subnets: BTreeSet<ExposedSubnet>,
    pub bridges: BTreeMap<InterfaceName, BridgeWiring>,
    pub skipped: Vec<SkippedRow>,
}

impl ExposureSet {
    /// Add an IP; the first producer of an IP wins, so a gateway port is not downgraded by a later
    /// tenant-port pass over the same address.
    pub fn expose_ip(&mut self, exposed: ExposedIp) {
        self.ips.entry(exposed.ip).or_insert(exposed);
    }

    /// Record a row that could not be used; the same problem found through two paths (e.g. a
    /// shared `nat_addresses` entry) is recorded once.
    pub fn skip(&mut self, table: &str, row: impl Into<String>, reason: impl Into<String>) {
        let skipped = SkippedRow {
            table: table.to_owned(),
            row: row.into(),
            reason: reason.into(),
        };
        if !self.skipped.contains(&skipped) {
            self.skipped.push(skipped);
        }
    }
}
