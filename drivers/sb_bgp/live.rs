//! The live SB BGP driver: the shared SB driver ([`SbDriver`]: the Southbound session) under
//! the local-chassis condition policy
//! ([`crate::ovn::sb::condition::LocalChassisPolicy`]), so a chassis holds the rows that concern
//! it, not the whole cloud (upstream replicated every Port_Binding on every node, U05).

use std::sync::Mutex;

use super::compute::{ExposureCache, LocalChassis, TenantOptions};
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::condition::LocalChassisPolicy;
use crate::ovn::sb::driver::SbDriver;
use crate::ovn::sb::model::SbModel;
use crate::plugin::PluginContext;

pub const NAME: &str = "ovn_bgp_driver";

/// The live driver.
pub type SbBgpDriver = SbDriver<LocalChassisPolicy>;

/// The driver registered as [`NAME`], with the tenant options of `ctx`'s configuration.
pub fn driver(ctx: &PluginContext) -> SbBgpDriver {
    let tenant = tenant_options(&ctx.config);
    let config = ctx.config.clone();
    SbDriver::new(
        NAME,
        ctx,
        policy(&tenant),
        cached_exposures(tenant, config),
        super::explain::explain,
    )
}

/// [`exposures`] through a cache of per-port results kept between calls (see
/// [`ExposureCache`]): what the live driver and the replay engine compute with.
pub fn cached_exposures(
    tenant: TenantOptions,
    config: std::sync::Arc<AgentConfig>,
) -> crate::ovn::sb::driver::ComputeFn {
    let cache = Mutex::new(ExposureCache::default());
    Box::new(move |model, identity| {
        // A panic while computing leaves a cache that is merely stale-proof: every entry is
        // checked against the model's generations before reuse.
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        exposures_with(&mut cache, model, identity, &tenant, &config)
    })
}

/// The tenant-network options of `[DEFAULT]`.
pub fn tenant_options(config: &AgentConfig) -> TenantOptions {
    TenantOptions::from_config(&config.default)
}

/// The Port_Binding condition policy of these options: routers and subnets are followed only
/// when tenant networks are exposed.
pub fn policy(tenant: &TenantOptions) -> LocalChassisPolicy {
    LocalChassisPolicy {
        follow_tenant_networks: tenant.enabled(),
    }
}

/// The driver's exposures over `model` for the chassis `identity` (the live driver and the
/// replay engine both answer with this).
pub fn exposures(
    model: &SbModel,
    identity: &ChassisIdentity,
    tenant: &TenantOptions,
    config: &AgentConfig,
) -> ExposureSet {
    exposures_with(
        &mut ExposureCache::default(),
        model,
        identity,
        tenant,
        config,
    )
}

/// [`exposures`], reusing what `cache` holds from earlier calls.
pub fn exposures_with(
    cache: &mut ExposureCache,
    model: &SbModel,
    identity: &ChassisIdentity,
    tenant: &TenantOptions,
    config: &AgentConfig,
) -> ExposureSet {
    let local = LocalChassis {
        name: identity.system_id.clone(),
        bridge_mappings: identity.bridge_mappings.clone(),
    };
    let mut set = cache.compute(model, &local, tenant);
    let stats = cache.last_stats();
    tracing::debug!(
        roots = stats.roots,
        recomputed = stats.recomputed,
        "exposures computed (ports bound here, of which recomputed)"
    );
    // Upstream's base configuration redistributes kernel routes with the subnet method,
    // whatever the driver (A2).
    if config.default.advertisement_method_tenant_networks
        == crate::config::TenantAdvertisement::Subnet
    {
        set.needs
            .insert(crate::exposure::RealisationNeed::RedistributeKernel);
    }
    set
}
