//! The live EVPN driver: the shared SB driver ([`SbDriver`]) under the [`EvpnGateways`]
//! condition policy, so a chassis holds its gateways, their routers, the subnets attached to
//! the gateway's VPN and their VMs, and the localnet ports; not the whole cloud (upstream
//! replicated every Port_Binding on every node, U05).

use std::sync::Mutex;

use super::compute::ExposureCache;
use crate::ovn::sb::condition::EvpnGateways;
use crate::ovn::sb::driver::{ComputeFn, SbDriver};
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
        cached_exposures(),
        super::explain::explain,
    )
}

/// [`super::compute::compute`] through a cache of per-gateway and per-subnet results kept
/// between calls (see [`super::compute`]): what the live driver and the replay engine compute
/// with.
pub(crate) fn cached_exposures() -> ComputeFn {
    let cache = Mutex::new(ExposureCache::default());
    Box::new(move |model, identity| {
        // A panic while computing leaves a cache that is merely stale-proof: every entry is
        // checked against the model's generations before reuse.
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        let set = cache.compute(model, identity);
        let stats = cache.last_stats();
        tracing::debug!(
            roots = stats.roots,
            recomputed = stats.recomputed,
            "EVPN exposures computed (gateways bound here and their subnets, of which recomputed)"
        );
        set
    })
}
