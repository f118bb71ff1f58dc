//! The live driver every SB driver is: the shared Southbound session ([`SbSession`]) under the
//! driver's condition policy, with the driver's computation and `explain` over its model. A
//! driver gives only those three; connecting, following changes and the condition are here.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::info;

use super::condition::SbConditionPolicy;
use super::model::SbModel;
use super::session::SbSession;
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::plugin::{ChangeScope, Driver, ExplainQuery, PluginContext, PluginError};

/// How a driver computes its exposures from the model and the chassis identity.
pub type ComputeFn = Box<dyn Fn(&SbModel, &ChassisIdentity) -> ExposureSet + Send + Sync>;

/// How a driver answers `ovn-bgp-agent explain` from the model and the chassis identity.
pub type ExplainFn = fn(&SbModel, &ChassisIdentity, &ExplainQuery) -> Vec<String>;

/// A live SB driver under condition policy `P`.
pub struct SbDriver<P> {
    name: &'static str,
    config: Arc<AgentConfig>,
    policy: P,
    compute: ComputeFn,
    explain: ExplainFn,
    session: Option<SbSession<P>>,
}

impl<P: SbConditionPolicy + Clone + 'static> SbDriver<P> {
    /// The driver registered as `name`.
    pub fn new(
        name: &'static str,
        ctx: &PluginContext,
        policy: P,
        compute: ComputeFn,
        explain: ExplainFn,
    ) -> Self {
        Self {
            name,
            config: ctx.config.clone(),
            policy,
            compute,
            explain,
            session: None,
        }
    }

    /// The live session, once started (its model and Port_Binding condition).
    pub fn session(&self) -> Option<&SbSession<P>> {
        self.session.as_ref()
    }

    fn failed(&self, e: impl std::fmt::Display) -> PluginError {
        PluginError::Failed {
            plugin: self.name.to_owned(),
            message: e.to_string(),
        }
    }
}

#[async_trait]
impl<P: SbConditionPolicy + Clone + 'static> Driver for SbDriver<P> {
    async fn start(&mut self, ctx: &PluginContext) -> Result<(), PluginError> {
        let identity = ctx.identity.feed().await.map_err(|e| self.failed(e))?;
        {
            let current = identity.borrow();
            info!(chassis = %current.system_id, mappings = ?current.bridge_mappings, "local chassis");
        }
        let session = SbSession::start(&self.config, identity, self.policy.clone())
            .await
            .map_err(|e| self.failed(e))?;
        self.session = Some(session);
        Ok(())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        let Some(session) = &mut self.session else {
            return Err(self.failed("changed() called before start()"));
        };
        match session.changed().await {
            Ok(scope) => Ok(scope),
            Err(e) => Err(self.failed(e)),
        }
    }

    async fn settle(&mut self) -> Result<(), PluginError> {
        let Some(session) = &mut self.session else {
            return Ok(());
        };
        match session.settle().await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(e)),
        }
    }

    fn explain(&self, query: &ExplainQuery) -> Vec<String> {
        match &self.session {
            Some(session) => (self.explain)(session.model(), session.identity(), query),
            None => vec!["the Southbound session has not started".to_owned()],
        }
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        Ok(match &self.session {
            Some(session) => (self.compute)(session.model(), session.identity()),
            // Nothing is known before start: nothing to expose.
            None => ExposureSet::default(),
        })
    }
}
