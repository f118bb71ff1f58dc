//! The live feed of the SB BGP driver: the shared Southbound session
//! ([`crate::ovn::sb::session`]) under the local-chassis condition policy
//! ([`crate::ovn::sb::condition::LocalChassisPolicy`]), so a chassis holds the rows that concern
//! it, not the whole cloud (upstream replicated every Port_Binding on every node, U05).

use std::sync::Arc;

use async_trait::async_trait;
use tracing::info;

use super::compute::{LocalChassis, TenantOptions, compute};
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::condition::LocalChassisPolicy;
use crate::ovn::sb::model::SbModel;
use crate::ovn::sb::session::SbSession;
use crate::plugin::{ChangeScope, Driver, ExplainQuery, PluginContext, PluginError};

pub const NAME: &str = "ovn_bgp_driver";

fn failed(e: impl std::fmt::Display) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: e.to_string(),
    }
}

pub struct SbBgpDriver {
    config: Arc<AgentConfig>,
    tenant: TenantOptions,
    session: Option<SbSession<LocalChassisPolicy>>,
}

impl SbBgpDriver {
    pub fn new(ctx: &PluginContext) -> Self {
        Self {
            config: ctx.config.clone(),
            tenant: tenant_options(&ctx.config),
            session: None,
        }
    }
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

#[async_trait]
impl Driver for SbBgpDriver {
    async fn start(&mut self, ctx: &PluginContext) -> Result<(), PluginError> {
        let identity = ctx.identity.feed().await.map_err(failed)?;
        {
            let current = identity.borrow();
            info!(chassis = %current.system_id, mappings = ?current.bridge_mappings, "local chassis");
        }
        let session = SbSession::start(&self.config, identity, policy(&self.tenant))
            .await
            .map_err(failed)?;
        self.session = Some(session);
        Ok(())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        let Some(session) = &mut self.session else {
            return Err(failed("changed() called before start()"));
        };
        session.changed().await.map_err(failed)
    }

    async fn settle(&mut self) -> Result<(), PluginError> {
        match &mut self.session {
            Some(session) => session.settle().await.map_err(failed),
            None => Ok(()),
        }
    }

    fn explain(&self, query: &ExplainQuery) -> Vec<String> {
        match &self.session {
            Some(session) => super::explain::explain(session.model(), session.identity(), query),
            None => vec!["the Southbound session has not started".to_owned()],
        }
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        let Some(session) = &self.session else {
            // Nothing is known before start: nothing to expose.
            return Ok(compute(
                &SbModel::default(),
                &LocalChassis::default(),
                &self.tenant,
            ));
        };
        Ok(exposures(
            session.model(),
            session.identity(),
            &self.tenant,
            &self.config,
        ))
    }
}
