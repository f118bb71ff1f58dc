//! The live EVPN driver: the shared SB driver ([`SbDriver`]) under the [`EvpnGateways`]
//! condition policy, so a chassis holds its gateways, their routers, the subnets attached to
//! the gateway's VPN and their VMs, and the localnet ports; not the whole cloud (upstream
//! replicated every Port_Binding on every node, U05).

use super::compute::compute;
use crate::ovn::sb::condition::EvpnGateways;
use crate::ovn::sb::driver::SbDriver;
use crate::plugin::PluginContext;

pub const NAME: &str = "ovn_evpn_driver";

/// The live driver.
pub type EvpnDriver = SbDriver<EvpnGateways>;

/// The driver registered as [`NAME`].
pub fn driver(ctx: &PluginContext) -> EvpnDriver {
    SbDriver::new(
        NAME,
        ctx,
        EvpnGateways,
        Box::new(compute),
        super::explain::explain,
    )
}
