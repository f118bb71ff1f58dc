//! The agent's base BGP configuration (A1–A3) from its own configuration file.

use std::collections::BTreeSet;

use super::FrrError;
use super::templates::LeakVrf;
use super::values::{Asn, Redistribute, RouterId};
use super::vtysh::Vtysh;
use crate::config::DefaultSection;
use crate::types::InterfaceName;

/// `LEAK_VRF` for `[DEFAULT] bgp_AS`, `bgp_vrf` and `bgp_router_id`; when the router id is not
/// configured, FRR's own (`show ip bgp summary json`, A3) is used.
pub async fn leak_vrf_from_config(
    default: &DefaultSection,
    redistribute: BTreeSet<Redistribute>,
    vtysh: &Vtysh,
) -> Result<LeakVrf, FrrError> {
    let bgp_as: Asn = default.bgp_as.trim().parse()?;
    let vrf_name =
        InterfaceName::new(default.bgp_vrf.as_str()).map_err(super::FrrValueError::from)?;
    let router_id = match default.bgp_router_id.as_deref().map(str::trim) {
        Some(configured) if !configured.is_empty() => configured.parse::<RouterId>()?,
        _ => vtysh.bgp_router_id().await?,
    };
    Ok(LeakVrf {
        bgp_as,
        vrf_name,
        router_id,
        redistribute,
    })
}

/// Redistribute sources of the default VRF leak: `connected`, plus `kernel` with
/// `advertisement_method_tenant_networks = subnet` (A2).
pub fn default_redistribute(default: &DefaultSection) -> BTreeSet<Redistribute> {
    let mut set = BTreeSet::from([Redistribute::Connected]);
    if default.advertisement_method_tenant_networks == crate::config::TenantAdvertisement::Subnet {
        set.insert(Redistribute::Kernel);
    }
    set
}
