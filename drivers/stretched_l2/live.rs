//! The live stretched L2 driver: the shared SB driver ([`SbDriver`]) under the [`AllGateways`]
//! condition policy: every chassisredirect port of the cloud, the ports of their routers and
//! the switch-side patch ports of those (address scopes); not the rest of the cloud (upstream
//! replicated every Port_Binding, U05).

use super::compute::{StretchedOptions, compute};
use crate::ovn::sb::condition::AllGateways;
use crate::ovn::sb::driver::SbDriver;
use crate::plugin::PluginContext;

pub const NAME: &str = "ovn_stretched_l2_bgp_driver";

/// The live driver.
pub type StretchedL2Driver = SbDriver<AllGateways>;

/// The driver registered as [`NAME`], with the address scopes of `ctx`'s configuration.
pub fn driver(ctx: &PluginContext) -> StretchedL2Driver {
    let options = StretchedOptions::from_config(&ctx.config);
    SbDriver::new(
        NAME,
        ctx,
        AllGateways,
        Box::new(move |model, _identity| compute(model, &options)),
        super::explain::explain,
    )
}
