//! The agent host: picks the configured driver and backend, then runs the reconcile loop.
//!
//! One task owns the driver and the backend. It reconciles when the driver reports a change, when
//! `reconcile_interval` elapses (drift repair: a deleted rule, an OVS or FRR restart), and stops
//! on SIGTERM/SIGINT without withdrawing anything: a restart must not disturb what is exposed.

use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tracing::{debug, error, info, warn};

use crate::caps::Capabilities;
use crate::config::AgentConfig;
use crate::exposure::SkippedRow;
use crate::plugin::{
    self, ChangeScope, Driver, ExposureBackend, PluginContext, PluginError, SelectionError,
};
use crate::system::DesiredSystem;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Selection(#[from] SelectionError),
    #[error("driver {driver}: {source}")]
    Driver {
        driver: String,
        #[source]
        source: PluginError,
    },
    #[error("exposure backend {backend}: {source}")]
    Backend {
        backend: String,
        #[source]
        source: PluginError,
    },
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

/// The loaded plugins and what they share.
pub struct Agent {
    ctx: PluginContext,
    driver_name: &'static str,
    backend_name: &'static str,
    driver: Box<dyn Driver>,
    backend: Box<dyn ExposureBackend>,
    last_skipped: Vec<SkippedRow>,
    last_desired: Option<DesiredSystem>,
}

impl Agent {
    /// Select and construct the plugins named in the configuration.
    pub fn new(config: Arc<AgentConfig>) -> Result<Self, HostError> {
        let (d, b) = plugin::select(&config.default.driver, &config.default.exposing_method)?;
        let caps = Capabilities::for_agent(&config);
        let ctx = PluginContext { config, caps };
        let driver = (d.factory)(&ctx).map_err(|source| HostError::Driver {
            driver: d.name.to_owned(),
            source,
        })?;
        let backend = (b.factory)(&ctx).map_err(|source| HostError::Backend {
            backend: b.name.to_owned(),
            source,
        })?;
        Ok(Self {
            ctx,
            driver_name: d.name,
            backend_name: b.name,
            driver,
            backend,
            last_skipped: Vec::new(),
            last_desired: None,
        })
    }

    fn driver_err(&self, source: PluginError) -> HostError {
        HostError::Driver {
            driver: self.driver_name.to_owned(),
            source,
        }
    }

    fn backend_err(&self, source: PluginError) -> HostError {
        HostError::Backend {
            backend: self.backend_name.to_owned(),
            source,
        }
    }

    /// Compute the desired state and apply it. A failure is logged and retried at the next
    /// trigger; it never stops the agent.
    async fn reconcile(&mut self, why: &str) {
        let exposures = match self.driver.desired_exposures() {
            Ok(e) => e,
            Err(e) => {
                error!(
                    driver = self.driver_name,
                    reason = why,
                    "computing exposures failed: {e}"
                );
                return;
            }
        };
        // Log a broken row once when it appears, not at every reconcile.
        for skipped in exposures
            .skipped
            .iter()
            .filter(|s| !self.last_skipped.contains(s))
        {
            warn!(table = %skipped.table, row = %skipped.row, "row skipped: {}", skipped.reason);
        }
        self.last_skipped = exposures.skipped.clone();
        if let Err(e) = self.backend.observe(&exposures).await {
            error!(
                backend = self.backend_name,
                reason = why,
                "observing the system failed: {e}"
            );
            return;
        }
        let desired = match self.backend.desired_system(&exposures) {
            Ok(d) => d,
            Err(e) => {
                error!(
                    backend = self.backend_name,
                    reason = why,
                    "rendering system state failed: {e}"
                );
                return;
            }
        };
        self.apply(desired, why).await;
    }

    async fn apply(&mut self, desired: DesiredSystem, why: &str) {
        match self.ctx.caps.reconciler.reconcile(&desired).await {
            Ok(report) if report.is_noop() => debug!(reason = why, "reconciled: no change"),
            Ok(report) => {
                for e in &report.errors {
                    warn!(class = %e.class, object = %e.object, "not applied: {}", e.error);
                }
                info!(
                    reason = why,
                    added = ?report.added,
                    changed = ?report.changed,
                    removed = ?report.removed,
                    errors = report.errors.len(),
                    "reconciled"
                );
            }
            Err(e) => error!(reason = why, "applying system state failed: {e}"),
        }
        self.last_desired = Some(desired);
    }

    /// Re-apply the last desired state without recomputing it: repairs drift (a rule deleted by
    /// hand, an address removed) between full reconciles, at the cost of one dump per class.
    async fn repair(&mut self) {
        if let Some(desired) = self.last_desired.take() {
            self.apply(desired, "repair").await;
        }
    }

    /// Background checks of the capabilities that can lose state behind the agent's back:
    /// OVS flows (restart, `emer-reset`) and FRR configuration (daemon restart).
    fn spawn_watchers(&self) {
        let caps = &self.ctx.caps;
        if let Some(flows) = &caps.ovs_flows {
            flows.clone().spawn_flow_check();
        }
        if let Some(frr) = &caps.frr {
            let every = Duration::from_secs(self.ctx.config.default.frr_reconcile_interval.max(1));
            frr.clone().spawn_restart_watch(every);
        }
    }

    /// Start the plugins and run until SIGTERM/SIGINT.
    pub async fn run(mut self) -> Result<(), HostError> {
        let mut sigterm = signal(SignalKind::terminate()).map_err(HostError::Signals)?;
        let mut sigint = signal(SignalKind::interrupt()).map_err(HostError::Signals)?;
        info!(
            driver = self.driver_name,
            exposing_method = self.backend_name,
            "starting"
        );
        let ctx = self.ctx.clone();
        tokio::select! {
            r = self.driver.start(&ctx) => r.map_err(|e| self.driver_err(e))?,
            _ = sigterm.recv() => return Ok(()),
            _ = sigint.recv() => return Ok(()),
        }
        self.backend
            .start(&ctx)
            .await
            .map_err(|e| self.backend_err(e))?;
        self.reconcile("start").await;
        self.spawn_watchers();

        let defaults = &ctx.config.default;
        let full = Duration::from_secs(defaults.reconcile_interval.max(1));
        let quick = Duration::from_secs(defaults.frr_reconcile_interval.max(1));
        let now = tokio::time::Instant::now();
        let mut periodic = tokio::time::interval_at(now + full, full);
        let mut repair = tokio::time::interval_at(now + quick, quick);
        for timer in [&mut periodic, &mut repair] {
            timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        loop {
            tokio::select! {
                change = self.driver.changed() => match change {
                    Ok(ChangeScope::Full) => self.reconcile("full resync").await,
                    Ok(ChangeScope::Rows) => self.reconcile("change").await,
                    Err(e) => return Err(self.driver_err(e)),
                },
                _ = periodic.tick() => self.reconcile("reconcile_interval").await,
                _ = repair.tick() => self.repair().await,
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
            }
        }
        // Deliberately no cleanup: exposed routes stay so a restart withdraws nothing.
        info!("stopping; exposed state left in place");
        Ok(())
    }
}
