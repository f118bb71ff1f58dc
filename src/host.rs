//! The agent host: picks the configured driver and backend, then runs the reconcile loop.
//!
//! One task owns the driver and the backend. It reconciles when the driver reports a change, when
//! the backend reports a change it saw (its own objects edited behind its back), when
//! `reconcile_interval` elapses (drift repair: a deleted rule, an OVS or FRR restart), and stops
//! on SIGTERM/SIGINT without withdrawing anything: a restart must not disturb what is exposed.
//!
//! Between the driver and the backend sits the policy stage (`crate::policy`): what must never
//! reach the host's routing is refused and reported there, whatever the driver computed.
//!
//! Cancel safety: the waits raced in the loop's `select!` (a driver or backend change, timers,
//! the shutdown signal) are all cancel-safe; the driver's follow-up work
//! ([`Driver::settle`], e.g. a `monitor_cond_change`) and the reconcile itself run outside that
//! race, so a timer can never cut them in half. Only shutdown interrupts them, and an
//! interrupted apply leaves what was applied in place. Timers are tokio's, so the loop runs
//! under paused time in tests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tracing::{debug, error, info, warn};

use tokio::sync::mpsc;

use crate::caps::Capabilities;
use crate::caps::reconcile::{chains_behind, is_behind};
use crate::config::AgentConfig;
use crate::control::{self, ExplainRequest};
use crate::exposure::{ExposureSet, SkippedRow};
use crate::plugin::{
    self, ChangeScope, Driver, ExposureBackend, PluginContext, PluginError, SelectionError,
};
use crate::policy::{self, PolicyContext, PolicyStage};
use crate::system::{ChangeReport, DesiredSystem, ObjectError};
use crate::telemetry::{HealthLimits, Stage, Telemetry};

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

/// A future that resolves when the agent must stop.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a repair of kernel state removed behind the agent's back waits for the rest of the
/// burst it is probably part of.
const KERNEL_REPAIR_DELAY: Duration = Duration::from_millis(50);

/// Every how many periodic reconciles the kernel mirror is replaced by a fresh dump: the
/// drift repair of last resort, should the kernel ever change something without telling
/// (hourly at the default `reconcile_interval`). The others plan every class against it.
const MIRROR_RESYNC_EVERY: u64 = 12;

/// What one pass of the loop was woken by; the reason logged with each reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    Driver(ChangeScope),
    Backend,
    Periodic,
    Repair,
    /// The kernel lost something the agent owns behind its back (seen by the kernel mirror).
    Kernel,
    /// The tool chains the last reconcile left applying in the background are done.
    CaughtUp,
    Stop,
}

/// The errors of the last apply, to tell a new problem from one still there.
#[derive(Debug, Default)]
struct ErrorLog {
    last: std::collections::HashSet<ObjectError>,
}

impl ErrorLog {
    /// Record this apply's `errors`: each with whether it is new since the last apply, and
    /// those gone since.
    fn update<'a>(
        &mut self,
        errors: &'a [ObjectError],
    ) -> (Vec<(&'a ObjectError, bool)>, Vec<ObjectError>) {
        let now: std::collections::HashSet<ObjectError> = errors.iter().cloned().collect();
        let new = errors.iter().map(|e| (e, !self.last.contains(e))).collect();
        let mut cleared: Vec<ObjectError> = self.last.difference(&now).cloned().collect();
        cleared.sort_by(|a, b| (&a.class, &a.object).cmp(&(&b.class, &b.object)));
        self.last = now;
        (new, cleared)
    }
}

/// Counters of what the loop did, for tests and (later) metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Driver changes received.
    pub changes: u64,
    /// [`Driver::settle`] calls that ran to completion.
    pub settled: u64,
    /// Reconciles that ran to completion (applied, or failed and logged).
    pub reconciles: u64,
    /// Drift repairs of the last desired state.
    pub repairs: u64,
    /// Of which repairs of kernel state removed behind the agent's back.
    pub kernel_repairs: u64,
}

/// The loaded plugins and what they share.
pub struct Agent {
    ctx: PluginContext,
    driver_name: &'static str,
    backend_name: &'static str,
    driver: Box<dyn Driver>,
    backend: Box<dyn ExposureBackend>,
    policy: PolicyStage,
    /// Shared with the telemetry's snapshot, not copied.
    last_skipped: Arc<Vec<SkippedRow>>,
    /// The objects the last apply did not apply (see [`Agent::log_errors`]).
    last_errors: ErrorLog,
    last_desired: Option<Arc<DesiredSystem>>,
    /// The tool chains the last apply left applying in the background, and since when: until
    /// they are done, `status` would show them as pending (and their outcome nowhere).
    behind: Vec<String>,
    behind_since: tokio::time::Instant,
    /// The last apply's other errors, which the chains' outcome joins once they are done.
    standing: Vec<ObjectError>,
    /// Warns once when this host's ovs-vswitchd would spend much on the agent's addresses.
    route_table_advice: crate::caps::ovs::route_table::RouteTableAdvice,
    stats: LoopStats,
    telemetry: Arc<Telemetry>,
    /// `explain` requests from the control socket, served between wake-ups.
    explain_rx: mpsc::Receiver<ExplainRequest>,
    explain_tx: mpsc::Sender<ExplainRequest>,
}

impl Agent {
    /// Select and construct the plugins named in the configuration.
    pub fn new(config: Arc<AgentConfig>) -> Result<Self, HostError> {
        let (d, b) = plugin::select(&config.default.driver, &config.default.exposing_method)?;
        if d.own_backend.is_some() && config.default.exposing_method != b.name {
            info!(
                driver = d.name,
                exposing_method = %config.default.exposing_method,
                realisation = b.name,
                "this driver ignores exposing_method, as upstream's does"
            );
        }
        let caps = Capabilities::for_agent(&config);
        let ctx = PluginContext::new(config, caps);
        let driver = (d.factory)(&ctx).map_err(|source| HostError::Driver {
            driver: d.name.to_owned(),
            source,
        })?;
        let backend = (b.factory)(&ctx).map_err(|source| HostError::Backend {
            backend: b.name.to_owned(),
            source,
        })?;
        Ok(Self::with_plugins(ctx, d.name, driver, b.name, backend))
    }

    /// A host for plugins built by the caller (tests, embedding).
    pub fn with_plugins(
        ctx: PluginContext,
        driver_name: &'static str,
        driver: Box<dyn Driver>,
        backend_name: &'static str,
        backend: Box<dyn ExposureBackend>,
    ) -> Self {
        let policy = PolicyStage::new(PolicyContext::from_config(&ctx.config.policy));
        let d = &ctx.config.default;
        let limits = HealthLimits {
            // The repair timer wakes the loop every frr_reconcile_interval.
            idle_limit: Duration::from_secs(2 * d.frr_reconcile_interval.max(1) + 30),
            // A wake's work waits at most for a few vtysh/OVS runs, each bounded.
            stall_limit: Duration::from_secs((4 * ctx.config.frr.vtysh_timeout).max(120)),
        };
        let telemetry = Telemetry::new(driver_name, backend_name, limits);
        let (explain_tx, explain_rx) = mpsc::channel(16);
        Self {
            ctx,
            driver_name,
            backend_name,
            driver,
            backend,
            policy,
            last_skipped: Arc::default(),
            last_errors: ErrorLog::default(),
            last_desired: None,
            behind: Vec::new(),
            behind_since: tokio::time::Instant::now(),
            standing: Vec::new(),
            route_table_advice: Default::default(),
            stats: LoopStats::default(),
            telemetry,
            explain_rx,
            explain_tx,
        }
    }

    /// What the agent reports about itself (metrics, health, status).
    pub fn telemetry(&self) -> Arc<Telemetry> {
        self.telemetry.clone()
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

    /// The IPs of every OVSDB remote the agent talks to: exposing one would cut the agent off
    /// its own databases.
    fn remote_ips(&self) -> Vec<std::net::IpAddr> {
        let c = &self.ctx.config;
        [
            Some(c.default.ovsdb_connection.as_str()),
            c.ovn.ovn_sb_connection.as_deref(),
            c.ovn.ovn_nb_connection.as_deref(),
            Some(c.local_ovn_cluster.ovn_nb_connection.as_str()),
        ]
        .into_iter()
        .flatten()
        .flat_map(policy::remote_ips)
        .collect()
    }

    /// Re-read what the policy stage protects: the host's own addresses and the OVSDB remotes.
    /// The agent's own addresses are not the host's: those on the devices whose addresses the
    /// backend owns (bgp-nic) and those it renders (ARP/NDP helpers), taken from the last
    /// desired state or, before the first reconcile, from the backend's base rendering; so a
    /// restarted agent does not mistake what its predecessor exposed for the host's addresses.
    /// One read of the host's addresses (`host_addresses`: the devices that are not the
    /// agent's), at start and at each periodic reconcile, not per event.
    async fn refresh_protected(&mut self) {
        let mut protected = self.remote_ips();
        let base;
        let ours = match &self.last_desired {
            Some(desired) => &**desired,
            None => {
                base = self
                    .backend
                    .desired_system(&ExposureSet::default())
                    .map(|r| r.system)
                    .unwrap_or_default();
                &base
            }
        };
        match self.ctx.caps.netlink.host_addresses().await {
            Ok(addresses) => protected.extend(
                addresses
                    .into_iter()
                    .filter(|(dev, addr)| {
                        !ours
                            .ownership
                            .address_devices
                            .iter()
                            .any(|d| d.as_str() == dev)
                            && !ours.addresses.iter().any(|a| a.addr == *addr)
                    })
                    .map(|(_, addr)| addr.addr()),
            ),
            Err(e) => warn!("reading the host's addresses for the exposure policy: {e}"),
        }
        protected.sort();
        protected.dedup();
        self.policy.set_protected(protected);
    }

    /// Log an object not applied once when the problem appears, and when it is gone, not at
    /// every reconcile: a tool chain busy for a minute behind a saturated ovs-vswitchd, or a
    /// device missing, is one problem, not one warning per event. The last reconcile's errors
    /// stay in `status` and the metrics.
    fn log_errors(&mut self, errors: &[ObjectError]) {
        let (errors, cleared) = self.last_errors.update(errors);
        for (e, new) in errors {
            if is_behind(e) {
                // Not a failure: the chain's outcome is logged when it is done (`tool chains
                // caught up`, or `not applied` for what it could not apply).
                debug!(class = %e.class, object = %e.object, "{}", e.error);
            } else if new {
                warn!(class = %e.class, object = %e.object, "not applied: {}", e.error);
            } else {
                debug!(class = %e.class, object = %e.object, "still not applied: {}", e.error);
            }
        }
        for e in cleared.iter().filter(|e| !is_behind(e)) {
            info!(class = %e.class, object = %e.object, "no longer failing: {}", e.error);
        }
    }

    /// Log a skipped row or exposure once when it appears, not at every reconcile.
    fn report_skipped(&mut self, skipped: Arc<Vec<SkippedRow>>) {
        // Hashed, not scanned: thousands of skipped rows are compared every reconcile.
        let before: std::collections::HashSet<&SkippedRow> = self.last_skipped.iter().collect();
        for s in skipped.iter().filter(|s| !before.contains(s)) {
            warn!(table = %s.table, row = %s.row, "row skipped: {}", s.reason);
        }
        self.last_skipped = skipped;
    }

    /// The driver's exposures after the policy stage.
    fn exposures(&mut self) -> Result<ExposureSet, PluginError> {
        let started = tokio::time::Instant::now();
        let mut exposures = self.driver.desired_exposures()?;
        let computed = tokio::time::Instant::now();
        self.telemetry
            .stage_took(Stage::Compute, computed - started);
        self.policy.apply(&mut exposures);
        self.telemetry.stage_took(Stage::Policy, computed.elapsed());
        Ok(exposures)
    }

    /// Compute the desired state and apply it. A failure is logged and retried at the next
    /// trigger; it never stops the agent.
    async fn reconcile(&mut self, why: &str) {
        self.stats.reconciles += 1;
        let started = tokio::time::Instant::now();
        let result = self.compute_and_apply(why).await;
        self.record(why, started, &result).await;
    }

    /// Tell the telemetry how a reconcile or repair ended.
    async fn record(
        &mut self,
        why: &str,
        started: tokio::time::Instant,
        result: &Result<(ChangeReport, Arc<DesiredSystem>), String>,
    ) {
        let (report, desired) = match result {
            Ok((report, desired)) => (Ok(report), Some(desired.clone())),
            Err(e) => (Err(e.clone()), None),
        };
        if let Some(d) = &desired {
            let version = self.ctx.identity.ovs_version();
            if let Some(warning) = self.route_table_advice.check(version, d.addresses.len()) {
                warn!("{warning}");
            }
        }
        self.telemetry
            .reconciled(why, started.elapsed(), report, desired)
            .await;
    }

    async fn compute_and_apply(
        &mut self,
        why: &str,
    ) -> Result<(ChangeReport, Arc<DesiredSystem>), String> {
        let mut exposures = self.exposures().map_err(|e| {
            error!(
                driver = self.driver_name,
                reason = why,
                "computing exposures failed: {e}"
            );
            format!("computing exposures failed: {e}")
        })?;
        let render_started = tokio::time::Instant::now();
        if let Err(e) = self.backend.observe(&exposures).await {
            error!(
                backend = self.backend_name,
                reason = why,
                "observing the system failed: {e}"
            );
            return Err(format!("observing the system failed: {e}"));
        }
        // The exposures are shared from here on (the backend may keep them to render the
        // next set as a delta; the telemetry keeps them for `status`): their skipped rows are
        // taken out first, as the telemetry gets them apart.
        let mut skipped = std::mem::take(&mut exposures.skipped);
        exposures.skip_index = Default::default();
        let exposures = Arc::new(exposures);
        let rendered = self
            .backend
            .desired_system_shared(&exposures)
            .map_err(|e| {
                error!(
                    backend = self.backend_name,
                    reason = why,
                    "rendering system state failed: {e}"
                );
                format!("rendering system state failed: {e}")
            })?;
        self.telemetry
            .stage_took(Stage::Render, render_started.elapsed());
        skipped.extend(rendered.skipped);
        let skipped = Arc::new(skipped);
        self.report_skipped(skipped.clone());
        self.telemetry.exposures_computed(exposures, skipped).await;
        self.apply(Arc::new(rendered.system), why).await
    }

    async fn apply(
        &mut self,
        desired: Arc<DesiredSystem>,
        why: &str,
    ) -> Result<(ChangeReport, Arc<DesiredSystem>), String> {
        let started = tokio::time::Instant::now();
        let applied = self.ctx.caps.reconciler.reconcile_shared(&desired).await;
        self.telemetry.stage_took(Stage::Apply, started.elapsed());
        self.behind = applied.as_ref().map(chains_behind).unwrap_or_default();
        self.behind_since = tokio::time::Instant::now();
        self.standing = applied.as_ref().map_or_else(
            |_| Vec::new(),
            |r| r.errors.iter().filter(|e| !is_behind(e)).cloned().collect(),
        );
        let result = match applied {
            Ok(report) if report.is_noop() => {
                self.log_errors(&report.errors);
                debug!(reason = why, "reconciled: no change");
                Ok((report, desired.clone()))
            }
            Ok(report) => {
                self.log_errors(&report.errors);
                info!(
                    reason = why,
                    added = ?report.added,
                    changed = ?report.changed,
                    removed = ?report.removed,
                    errors = report.errors.len(),
                    "reconciled"
                );
                Ok((report, desired.clone()))
            }
            Err(e) => {
                error!(reason = why, "applying system state failed: {e}");
                Err(format!("applying system state failed: {e}"))
            }
        };
        self.last_desired = Some(desired);
        result
    }

    /// The tool chains the last apply left in the background are done: `report` is what they
    /// did. Logged and shown in `status` now, with the apply's other errors, rather than at the
    /// next reconcile (up to `frr_reconcile_interval` later without an event); nothing is
    /// applied again.
    async fn caught_up(&mut self, report: ChangeReport) {
        let mut errors = std::mem::take(&mut self.standing);
        errors.extend(report.errors.iter().cloned());
        self.log_errors(&errors);
        info!(
            took = ?self.behind_since.elapsed(),
            chains = ?self.behind,
            added = ?report.added,
            changed = ?report.changed,
            removed = ?report.removed,
            errors = report.errors.len(),
            "tool chains caught up"
        );
        self.telemetry
            .tools_caught_up(&report, &errors, self.behind_since.elapsed())
            .await;
        self.behind = chains_behind(&report);
        self.standing = errors;
    }

    /// Re-apply the last desired state without recomputing it: repairs drift (a rule deleted by
    /// hand, an address removed) between full reconciles. The kernel part is then a no-op delta
    /// unless the kernel mirror saw a foreign change (`Wake::Kernel`); sysctls and proxy
    /// neighbours, which have no notifications, are read every time.
    async fn repair(&mut self, why: &str) {
        if let Some(desired) = self.last_desired.take() {
            self.stats.repairs += 1;
            let started = tokio::time::Instant::now();
            let result = self.apply(desired, why).await;
            self.record(why, started, &result).await;
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

    /// The control socket and the metrics listener, as configured. Neither is needed to expose
    /// anything: a failure is logged and the agent runs without it.
    async fn spawn_interfaces(&mut self) {
        let t = &self.ctx.config.telemetry;
        if !t.control_socket.is_empty() {
            let path = std::path::Path::new(&t.control_socket);
            match control::bind_control_socket(path).await {
                Ok(listener) => {
                    info!(path = %path.display(), "control socket for status, explain, health");
                    control::spawn_control_server(
                        listener,
                        self.telemetry.clone(),
                        self.explain_tx.clone(),
                    );
                }
                Err(e) => warn!("{e}"),
            }
        }
        if let Some(address) = &t.metrics_address
            && let Err(e) = control::spawn_metrics_listener(address, self.telemetry.clone()).await
        {
            warn!("{e}");
        }
    }

    /// Start the plugins and run until SIGTERM/SIGINT.
    pub async fn run(self) -> Result<(), HostError> {
        let mut sigterm = signal(SignalKind::terminate()).map_err(HostError::Signals)?;
        let mut sigint = signal(SignalKind::interrupt()).map_err(HostError::Signals)?;
        let shutdown: Shutdown = Box::pin(async move {
            tokio::select! {
                _ = sigterm.recv() => info!("SIGTERM"),
                _ = sigint.recv() => info!("SIGINT"),
            }
        });
        self.run_until(shutdown).await.map(|_| ())
    }

    /// Start the plugins and run until `shutdown` resolves; returns what the loop did.
    pub async fn run_until(mut self, mut shutdown: Shutdown) -> Result<LoopStats, HostError> {
        info!(
            driver = self.driver_name,
            exposing_method = self.backend_name,
            "starting"
        );
        let ctx = self.ctx.clone();
        // Up before the databases sync, so probes see "live, not ready" during a long start
        // (waiting for a database is not a hang: the loop is busy only from its first reconcile).
        self.spawn_interfaces().await;
        tokio::select! {
            r = self.driver.start(&ctx) => r.map_err(|e| self.driver_err(e))?,
            _ = &mut shutdown => return Ok(self.stats),
        }
        tokio::select! {
            r = self.backend.start(&ctx) => r.map_err(|e| self.backend_err(e))?,
            _ = &mut shutdown => return Ok(self.stats),
        }
        self.telemetry.wake();
        tokio::select! {
            _ = async {
                self.refresh_protected().await;
                self.reconcile("start").await;
            } => {}
            _ = &mut shutdown => return Ok(self.stats),
        }
        self.telemetry.set_ready();
        self.telemetry.idle();
        crate::notify::ready(&self.telemetry.summary(None));
        crate::notify::spawn_watchdog(self.telemetry.clone());
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
        let kernel = ctx.caps.netlink.clone();
        let mut periodic_runs: u64 = 0;
        // What the tool chains did once caught up, from the wait to the work (`Wake` is a copy).
        let mut late: Option<ChangeReport> = None;
        loop {
            // Only cancel-safe waits race here (see the module documentation).
            let wake = tokio::select! {
                change = self.driver.changed() => match change {
                    Ok(scope) => Wake::Driver(scope),
                    Err(e) => return Err(self.driver_err(e)),
                },
                change = self.backend.changed() => match change {
                    Ok(()) => Wake::Backend,
                    Err(e) => return Err(self.backend_err(e)),
                },
                _ = periodic.tick() => Wake::Periodic,
                _ = kernel.changed_behind_back() => Wake::Kernel,
                _ = repair.tick() => Wake::Repair,
                report = self.ctx.caps.reconciler.caught_up(self.behind.clone()),
                    if !self.behind.is_empty() => {
                    late = Some(report);
                    Wake::CaughtUp
                }
                Some(req) = self.explain_rx.recv() => {
                    // Answered at once from the driver's rows; not a wake-up of the loop.
                    let _ = req.reply.send(self.driver.explain(&req.query));
                    continue;
                }
                _ = &mut shutdown => Wake::Stop,
            };
            let woke_at = tokio::time::Instant::now();
            self.telemetry.wake();
            // The work a wake-up calls for, interrupted by nothing but shutdown.
            let work = async {
                match wake {
                    Wake::Driver(scope) => {
                        self.stats.changes += 1;
                        self.telemetry.driver_change();
                        if let Err(e) = self.driver.settle().await {
                            warn!(driver = self.driver_name, "{e}");
                        }
                        self.stats.settled += 1;
                        let why = match scope {
                            ChangeScope::Full => "full resync",
                            ChangeScope::Rows => "change",
                        };
                        self.reconcile(why).await;
                        self.telemetry.change_applied(woke_at.elapsed());
                    }
                    Wake::Backend => self.reconcile("backend change").await,
                    Wake::Periodic => {
                        self.refresh_protected().await;
                        periodic_runs += 1;
                        kernel.plan_in_full_next();
                        if periodic_runs.is_multiple_of(MIRROR_RESYNC_EVERY) {
                            kernel.resync_next();
                        }
                        self.reconcile("reconcile_interval").await;
                    }
                    Wake::Repair => self.repair("repair").await,
                    Wake::CaughtUp => {
                        if let Some(report) = late.take() {
                            self.caught_up(report).await;
                        }
                    }
                    Wake::Kernel => {
                        // A burst (a flushed table, a deleted device) is repaired at once.
                        tokio::time::sleep(KERNEL_REPAIR_DELAY).await;
                        self.stats.kernel_repairs += 1;
                        self.repair("kernel change").await
                    }
                    Wake::Stop => {}
                }
            };
            if wake == Wake::Stop {
                break;
            }
            tokio::select! {
                _ = work => {}
                _ = &mut shutdown => break,
            }
            self.telemetry.idle();
        }
        // Deliberately no cleanup: exposed routes stay so a restart withdraws nothing.
        crate::notify::stopping();
        info!("stopping; exposed state left in place");
        Ok(self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(object: &str, text: &str) -> ObjectError {
        ObjectError {
            class: "tools".into(),
            object: object.into(),
            error: text.into(),
        }
    }

    /// A problem that lasts many reconciles is new once, then repeated, then cleared once;
    /// the same object failing otherwise is a new problem.
    #[test]
    fn errors_are_new_once_and_cleared_once() {
        let mut log = ErrorLog::default();
        let busy = error("OVS ports, flows and FDB entries", "still applying");
        let frr = error("FRR configuration", "still applying");
        let (seen, cleared) = log.update(std::slice::from_ref(&busy));
        assert_eq!(seen, vec![(&busy, true)]);
        assert!(cleared.is_empty());
        let both = [busy.clone(), frr.clone()];
        let (seen, cleared) = log.update(&both);
        assert_eq!(seen, vec![(&busy, false), (&frr, true)]);
        assert!(cleared.is_empty());
        let other = error("OVS ports, flows and FDB entries", "timed out");
        let (seen, cleared) = log.update(std::slice::from_ref(&other));
        assert_eq!(seen, vec![(&other, true)]);
        assert_eq!(cleared, vec![frr, busy]);
        let (seen, cleared) = log.update(&[]);
        assert!(seen.is_empty());
        assert_eq!(cleared, vec![other]);
    }
}
