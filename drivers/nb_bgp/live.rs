//! The live NB BGP driver: the shared Northbound session ([`crate::ovn::nb::session`]) under the
//! `NbConditionPolicy` of the configured options, and [`compute`] over its model. On OVN <
//! 23.09 the session also reads the gateways hosted here from the Southbound, which upstream's
//! NB driver cannot do (it sees no gateway and no centralized floating IP there).

use std::sync::Arc;

use async_trait::async_trait;
use tracing::info;

use super::compute::{ExposureCache, LocalChassis, NbOptions, compute};
use super::{NAME, nb_options, policy};
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::nb::model::NbModel;
use crate::ovn::nb::session::NbSession;
use crate::plugin::{ChangeScope, Driver, ExplainQuery, PluginContext, PluginError};

fn failed(e: impl std::fmt::Display) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: e.to_string(),
    }
}

/// Who this chassis is, as the computation needs it.
pub fn local_chassis(identity: &ChassisIdentity) -> LocalChassis {
    LocalChassis {
        hostname: identity.hostname.clone(),
        system_id: identity.system_id.clone(),
        bridge_mappings: identity.bridge_mappings.clone(),
    }
}

pub struct NbBgpDriver {
    config: Arc<AgentConfig>,
    options: NbOptions,
    session: Option<NbSession>,
    /// Per-root results between computations (issue 17): an event recomputes what it touched.
    cache: std::sync::Mutex<ExposureCache>,
}

impl NbBgpDriver {
    pub fn new(ctx: &PluginContext) -> Self {
        Self {
            config: ctx.config.clone(),
            options: nb_options(&ctx.config),
            session: None,
            cache: std::sync::Mutex::new(ExposureCache::default()),
        }
    }

    /// The session, once started (tests and diagnostics).
    pub fn session(&self) -> Option<&NbSession> {
        self.session.as_ref()
    }
}

#[async_trait]
impl Driver for NbBgpDriver {
    async fn start(&mut self, ctx: &PluginContext) -> Result<(), PluginError> {
        let identity = ctx.identity.feed().await.map_err(failed)?;
        {
            let current = identity.borrow();
            info!(
                chassis = %current.system_id,
                hostname = %current.hostname,
                mappings = ?current.bridge_mappings,
                "local chassis"
            );
        }
        let session = NbSession::start(&self.config, identity, policy(&self.config, &self.options))
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
            Some(session) => super::explain::explain(
                session.model(),
                &local_chassis(session.identity()),
                &self.options,
                session.hosted_gateways(),
                query,
            ),
            None => vec!["the Northbound session has not started".to_owned()],
        }
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        let Some(session) = &self.session else {
            // Nothing is known before start: nothing to expose.
            return Ok(compute(
                &NbModel::default(),
                &LocalChassis::default(),
                &self.options,
                None,
            ));
        };
        // A panic while computing leaves a cache that is merely stale-proof: every entry is
        // checked against the model's generations before reuse.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let set = cache.compute(
            session.model(),
            &local_chassis(session.identity()),
            &self.options,
            session.hosted_gateways(),
        );
        let stats = cache.last_stats();
        tracing::debug!(
            roots = stats.roots,
            recomputed = stats.recomputed,
            "exposures computed (ports, gateways and routers here, of which recomputed)"
        );
        Ok(set)
    }
}
