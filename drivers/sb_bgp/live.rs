//! The live SB BGP driver: the shared SB driver ([`SbDriver`]: the Southbound session) under
//! the local-chassis condition policy
//! ([`crate::ovn::sb::condition::LocalChassisPolicy`]), so a chassis holds the rows that concern
//! it, not the whole cloud (upstream replicated every Port_Binding on every node, U05).

use super::compute::{LocalChassis, TenantOptions, compute};
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
        Box::new(move |model, identity| exposures(model, identity, &tenant, &config)),
        super::explain::explain,
    )
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
    let local = LocalChassis {
        name: identity.system_id.clone(),
        bridge_mappings: identity.bridge_mappings.clone(),
    };
    let mut set = compute(model, &local, tenant);
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
