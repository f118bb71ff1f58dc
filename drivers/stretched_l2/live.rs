//! The live stretched L2 driver: the shared SB driver ([`SbDriver`]) under the [`AllGateways`]
//! condition policy: every chassisredirect port of the cloud, the ports of their routers and
//! the switch-side patch ports of those (address scopes); not the rest of the cloud (upstream
//! replicated every Port_Binding, U05).

use std::sync::Mutex;

use super::compute::{RouteCache, StretchedOptions};
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
        cached_routes(options),
        super::explain::explain,
    )
}

/// The computation through a cache of per-gateway results kept between calls ([`RouteCache`]):
/// what the live driver and the replay engine compute with.
pub fn cached_routes(options: StretchedOptions) -> crate::ovn::sb::driver::ComputeFn {
    let cache = Mutex::new(RouteCache::default());
    Box::new(move |model, _identity| {
        // A panic while computing leaves a cache that is merely stale-proof: every entry is
        // checked against the model's generations before reuse.
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.compute(model, &options)
    })
}
