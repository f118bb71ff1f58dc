//! What the running agent tells about itself: Prometheus metrics, liveness and readiness, and
//! the snapshot behind `ovn-bgp-agent status` and `explain`.
//!
//! The host loop is the only writer: it records each wake-up, reconcile and apply here, and
//! swaps in the exposures and desired system it just computed (shared `Arc`s, never copied).
//! Readers (the metrics listener, the control socket) take a consistent view under a short
//! read lock. Metrics are those of the `prometheus-client` crate, with the
//! `ovn_bgp_agent_` prefix; process figures are read from `/proc/self` at scrape time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::RwLock;

use crate::exposure::{
    ExposedIp, ExposureKind, ExposureSet, IpMap, ScopeId, SkippedRow, ip_changes,
};
use crate::system::{ChangeReport, DesiredSystem, ObjectError};

/// Process-wide metrics the capability layer records into (it has no handle on the host's
/// [`Telemetry`]); every [`Telemetry`] registers them.
pub(crate) mod global {
    use std::sync::LazyLock;

    use prometheus_client::metrics::counter::Counter;

    /// FRR daemon restarts noticed (the vty socket fingerprint changed), each followed by a
    /// re-apply of the agent's configuration.
    pub(crate) static FRR_RESTARTS: LazyLock<Counter> = LazyLock::new(Counter::default);
    /// Flow checks that found the agent's OpenFlow flows drifted (an OVS restart,
    /// `emer-reset`) and repaired them.
    pub(crate) static FLOW_REPAIRS: LazyLock<Counter> = LazyLock::new(Counter::default);
    /// Tool chains (FRR, OVS) applying a desired state now. One that stays up is a slow or
    /// hung tool; after a start, it falls to 0 once FRR and the flows have what the kernel has.
    pub(crate) static TOOL_CHAINS_APPLYING: LazyLock<prometheus_client::metrics::gauge::Gauge> =
        LazyLock::new(Default::default);

    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

    /// Tool runs (vtysh, ovs-vsctl, ovs-ofctl, ovs-appctl) by tool and result.
    pub(crate) static SUBPROCESS_RUNS: LazyLock<Family<super::ToolResultLabels, Counter>> =
        LazyLock::new(Family::default);
    /// Their durations, by tool.
    pub(crate) static SUBPROCESS_SECONDS: LazyLock<Family<super::ToolLabels, Histogram>> =
        LazyLock::new(|| {
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 14)))
        });

    /// Record one run of `program`: `result` is `ok` (exit 0), `failed` (another exit status)
    /// or `error` (not started, timed out, output too large).
    pub(crate) fn subprocess_ran(
        program: &std::path::Path,
        result: &str,
        took: std::time::Duration,
    ) {
        let tool = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        SUBPROCESS_RUNS
            .get_or_create(&super::ToolResultLabels {
                tool: tool.clone(),
                result: result.to_owned(),
            })
            .inc();
        SUBPROCESS_SECONDS
            .get_or_create(&super::ToolLabels { tool })
            .observe(took.as_secs_f64());
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ToolResultLabels {
    tool: String,
    result: String,
}

/// The OVSDB clients' figures, read from the live clients at scrape time and summed per
/// database (a driver may hold more than one client on a database).
#[derive(Debug)]
struct OvsdbCollector;

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct DbLabels {
    database: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct PlanLabels {
    plan: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct DbTableLabels {
    database: String,
    table: String,
}

impl prometheus_client::collector::Collector for OvsdbCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::MetricType;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;

        let clients = crate::caps::ovsdb::live_clients();
        let mut per_db: BTreeMap<String, (bool, [u64; 7])> = BTreeMap::new();
        let mut rows: BTreeMap<(String, String), u64> = BTreeMap::new();
        for c in &clients {
            let e = per_db.entry(c.database.clone()).or_insert((true, [0; 7]));
            e.0 &= c.connected;
            let s = &c.stats;
            for (slot, v) in e.1.iter_mut().zip([
                s.sessions,
                s.resumed,
                s.full_downloads,
                s.failures,
                s.rows_rejected,
                s.bytes_received,
                s.changes_coalesced,
            ]) {
                *slot += v;
            }
            for (table, n) in &c.rows {
                *rows.entry((c.database.clone(), table.clone())).or_default() += *n as u64;
            }
        }
        let mut m = encoder.encode_descriptor(
            "ovsdb_connected",
            "1 when every client of the database has a session now",
            None,
            MetricType::Gauge,
        )?;
        for (db, (connected, _)) in &per_db {
            ConstGauge::new(i64::from(*connected)).encode(m.encode_family(&DbLabels {
                database: db.clone(),
            })?)?;
        }
        let counters: [(&str, &str); 7] = [
            (
                "ovsdb_sessions",
                "Sessions established (the first and every reconnect)",
            ),
            (
                "ovsdb_resumed_sessions",
                "Sessions resumed from the last transaction id, without a full download",
            ),
            (
                "ovsdb_full_downloads",
                "Sessions that downloaded every monitored row",
            ),
            (
                "ovsdb_connection_failures",
                "Connection attempts that failed and sessions that ended with an error",
            ),
            (
                "ovsdb_rows_rejected",
                "Rows left out for breaking the schema's bounds (hostile or corrupt server)",
            ),
            ("ovsdb_received_bytes", "Bytes received from the server"),
            (
                "ovsdb_changes_coalesced",
                "Row changes merged while the driver lagged (never dropped)",
            ),
        ];
        for (i, (name, help)) in counters.iter().enumerate() {
            let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (db, (_, values)) in &per_db {
                let labels = DbLabels {
                    database: db.clone(),
                };
                let family = m.encode_family(&labels)?;
                ConstCounter::new(values[i]).encode(family)?;
            }
        }
        let mut m = encoder.encode_descriptor(
            "ovsdb_rows",
            "Rows held in the replica, per database and table (what the monitor conditions select)",
            None,
            MetricType::Gauge,
        )?;
        for ((database, table), n) in rows {
            ConstGauge::new(n as i64)
                .encode(m.encode_family(&DbTableLabels { database, table })?)?;
        }
        Ok(())
    }
}

/// The kernel mirror's and the kernel reconciler's counters (process-wide, read at scrape time).
#[derive(Debug)]
struct KernelCollector;

impl prometheus_client::collector::Collector for KernelCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::MetricType;
        use prometheus_client::metrics::counter::ConstCounter;

        let k = &crate::caps::netlink::mirror::KERNEL_STATS;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        for (name, help, value) in [
            (
                "kernel_mirror_events",
                "Kernel notifications applied to the mirror of the kernel's objects",
                load(&k.events),
            ),
            (
                "kernel_foreign_changes",
                "Changes to what the agent owns in the kernel made by someone else (repaired at once)",
                load(&k.foreign),
            ),
            (
                "kernel_mirror_resyncs",
                "Full re-reads of the kernel after the first (overflow, silent flush, hourly check)",
                load(&k.resyncs),
            ),
            (
                "kernel_mirror_overflows",
                "Overflows of the kernel notification socket (each followed by a resync)",
                load(&k.overflows),
            ),
        ] {
            let m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(m)?;
        }
        let mut m = encoder.encode_descriptor(
            "kernel_reconciles",
            "Kernel reconciles by plan: delta (only what changed), full (every class, from the mirror), dumps (no mirror)",
            None,
            MetricType::Counter,
        )?;
        for (plan, value) in [
            ("delta", load(&k.deltas)),
            ("full", load(&k.full_plans)),
            ("dumps", load(&k.by_dumps)),
        ] {
            ConstCounter::new(value).encode(m.encode_family(&PlanLabels {
                plan: plan.to_owned(),
            })?)?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TriggerLabels {
    trigger: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

/// The stages of a reconcile, as timed in `reconcile_stage_duration_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The driver's exposures.
    Compute,
    /// The policy stage over them.
    Policy,
    /// The backend's view of the system and its rendering of the desired state.
    Render,
    /// The reconcilers applying it (kernel, then the wait for the tool chains).
    Apply,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Compute => "compute",
            Stage::Policy => "policy",
            Stage::Render => "render",
            Stage::Apply => "apply",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    trigger: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExposedLabels {
    kind: String,
    family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassOpLabels {
    class: String,
    op: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    driver: String,
    exposing_method: String,
}

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileResult {
    /// Applied with no object error.
    Applied,
    /// Applied, some objects refused (listed in the report).
    Partial,
    /// Nothing applied: computing, observing, rendering or applying failed.
    Failed,
}

impl ReconcileResult {
    fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Applied => "applied",
            ReconcileResult::Partial => "partial",
            ReconcileResult::Failed => "failed",
        }
    }
}

/// The last reconcile, as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ReconcileRecord {
    /// Unix time (seconds) it finished.
    pub finished_at: f64,
    pub trigger: String,
    pub duration_ms: f64,
    pub result: ReconcileResult,
    pub added: BTreeMap<String, usize>,
    pub changed: BTreeMap<String, usize>,
    pub removed: BTreeMap<String, usize>,
    /// Objects not applied, or why nothing was (`Failed`).
    pub errors: Vec<String>,
}

/// What the agent currently wants and did, shared with the control socket.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The exposures after the policy stage, as last computed.
    pub exposures: Arc<ExposureSet>,
    /// What the backend rendered from them.
    pub desired: Option<Arc<DesiredSystem>>,
    /// Rows and exposures refused, by the driver, the policy stage or the backend.
    pub skipped: Arc<Vec<SkippedRow>>,
    pub last_reconcile: Option<ReconcileRecord>,
    /// The last reconcile whose result was not `Failed`.
    pub last_success: Option<ReconcileRecord>,
}

/// Liveness limits: the loop wakes at least every `idle_limit` (its repair timer) and a wake's
/// work never takes longer than `stall_limit` unless something hangs.
#[derive(Debug, Clone, Copy)]
pub struct HealthLimits {
    pub idle_limit: Duration,
    pub stall_limit: Duration,
}

/// The answer of `/healthz`, `/readyz` and `ovn-bgp-agent health`.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub live: bool,
    pub ready: bool,
    /// Why not, when not.
    pub reasons: Vec<String>,
}

/// The agent's self-report.
pub struct Telemetry {
    registry: Registry,
    started: SystemTime,
    limits: HealthLimits,
    /// Unix time (ms) of the last wake-up of the loop; 0 before the loop runs.
    last_wake_ms: AtomicU64,
    /// Unix time (ms) the current wake's work started; 0 when idle.
    busy_since_ms: AtomicU64,
    /// Drivers' databases synced and the first reconcile done.
    ready: AtomicU64,
    /// Counts of the last exposures (addresses, routes, subnets, refusals), for `STATUS=`.
    counts: [AtomicU64; 4],
    snapshot: RwLock<Snapshot>,
    ip_counts: std::sync::Mutex<IpCounts>,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_seconds: Family<TriggerLabels, Histogram>,
    stage_seconds: Family<StageLabels, Histogram>,
    change_to_applied_seconds: Histogram,
    exposed: Family<ExposedLabels, Gauge>,
    skipped: Gauge,
    objects: Family<ClassOpLabels, Counter>,
    object_errors: Family<ClassLabels, Counter>,
    last_success_seconds: Gauge<f64, AtomicU64>,
    driver_changes: Counter,
    process_rss_bytes: Gauge,
    process_cpu_seconds: Gauge<f64, AtomicU64>,
    process_open_fds: Gauge,
    process_start_seconds: Gauge<f64, AtomicU64>,
}

fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// Exposed IPs by kind and family, kept with the maps they were counted from: the next maps
/// (which share their trees with these, issue 17) are counted by what differs.
#[derive(Debug, Default)]
struct IpCounts {
    maps: BTreeMap<ScopeId, IpMap>,
    counts: BTreeMap<(ExposureKind, &'static str), i64>,
}

impl IpCounts {
    fn count(&mut self, exposures: &ExposureSet) -> BTreeMap<(ExposureKind, &'static str), i64> {
        let mut add = |ip: &ExposedIp, n: i64| {
            *self.counts.entry((ip.kind, family(&ip.ip))).or_default() += n;
        };
        let empty = IpMap::new();
        let last = std::mem::take(&mut self.maps);
        let ids: BTreeSet<&ScopeId> = last.keys().chain(exposures.scopes.keys()).collect();
        for id in ids {
            let old = last.get(id).unwrap_or(&empty);
            let new = exposures.scopes.get(id).map_or(&empty, |s| &s.ips);
            for change in ip_changes(old, new) {
                if let Some(e) = change.old {
                    add(e, -1);
                }
                if let Some(e) = change.new {
                    add(e, 1);
                }
            }
        }
        self.counts.retain(|_, n| *n != 0);
        self.maps = exposures
            .scopes
            .iter()
            .map(|(id, s)| (*id, s.ips.clone()))
            .collect();
        self.counts.clone()
    }
}

/// `ip` label value of an exposure family.
fn family(ip: &std::net::IpAddr) -> &'static str {
    if ip.is_ipv4() { "ipv4" } else { "ipv6" }
}

/// The kind's name as it appears in snapshots (`provider_port`, `floating_ip`, ...).
pub(crate) fn kind_name(kind: ExposureKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{kind:?}"))
}

impl Telemetry {
    pub fn new(driver: &str, exposing_method: &str, limits: HealthLimits) -> Arc<Self> {
        let mut registry = Registry::with_prefix("ovn_bgp_agent");
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                driver: driver.to_owned(),
                exposing_method: exposing_method.to_owned(),
            })
            .set(1);
        registry.register(
            "build_info",
            "Version, driver and exposing method of this agent",
            build,
        );
        let t = Self {
            registry: Registry::default(),
            started: SystemTime::now(),
            limits,
            last_wake_ms: AtomicU64::new(0),
            busy_since_ms: AtomicU64::new(0),
            ready: AtomicU64::new(0),
            counts: Default::default(),
            snapshot: RwLock::new(Snapshot::default()),
            ip_counts: Default::default(),
            reconciles: Family::default(),
            reconcile_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            stage_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0001, 2.0, 18))
            }),
            change_to_applied_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            exposed: Family::default(),
            skipped: Gauge::default(),
            objects: Family::default(),
            object_errors: Family::default(),
            last_success_seconds: Gauge::default(),
            driver_changes: Counter::default(),
            process_rss_bytes: Gauge::default(),
            process_cpu_seconds: Gauge::default(),
            process_open_fds: Gauge::default(),
            process_start_seconds: Gauge::default(),
        };
        let r = &mut registry;
        r.register(
            "reconciles",
            "Reconciles by trigger and result (applied, partial, failed)",
            t.reconciles.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Time from the start of a reconcile (compute, render, apply) to its end, by trigger",
            t.reconcile_seconds.clone(),
        );
        r.register(
            "reconcile_stage_duration_seconds",
            "Time a reconcile spent in each stage: compute (the driver's exposures), policy, \
             render (the backend's desired state) and apply (the reconcilers); a drift repair \
             re-applies the last state and has only the last",
            t.stage_seconds.clone(),
        );
        r.register(
            "change_to_applied_seconds",
            "Time from a database change reaching the loop to its state applied",
            t.change_to_applied_seconds.clone(),
        );
        r.register(
            "exposed",
            "Addresses exposed (after the policy stage) by kind and family; routes and subnets \
             as kind route/subnet",
            t.exposed.clone(),
        );
        r.register(
            "skipped_rows",
            "Rows and exposures refused (driver, policy stage, backend) at the last reconcile",
            t.skipped.clone(),
        );
        r.register(
            "objects_changed",
            "Kernel/OVS/FRR/OVN objects added, changed or removed, by class",
            t.objects.clone(),
        );
        r.register(
            "object_errors",
            "Objects a reconcile could not apply, by class",
            t.object_errors.clone(),
        );
        r.register(
            "last_successful_reconcile_timestamp_seconds",
            "Unix time of the last reconcile that applied (fully or partly)",
            t.last_success_seconds.clone(),
        );
        r.register(
            "driver_changes",
            "Changes the driver reported (database updates, resyncs)",
            t.driver_changes.clone(),
        );
        r.register(
            "tool_chains_applying",
            "Tool chains (FRR, OVS) applying a desired state now, in the background of the \
             reconciles; one that stays up is a slow or hung tool",
            global::TOOL_CHAINS_APPLYING.clone(),
        );
        r.register_collector(Box::new(OvsdbCollector));
        r.register_collector(Box::new(KernelCollector));
        r.register(
            "subprocess_runs",
            "Runs of the tools the agent drives (vtysh, ovs-vsctl, ovs-ofctl, ovs-appctl), by \
             tool and result (ok, failed, error)",
            global::SUBPROCESS_RUNS.clone(),
        );
        r.register(
            "subprocess_duration_seconds",
            "How long each tool run took, by tool",
            global::SUBPROCESS_SECONDS.clone(),
        );
        r.register(
            "frr_restarts",
            "FRR daemon restarts noticed, each followed by a re-apply of the agent's configuration",
            global::FRR_RESTARTS.clone(),
        );
        r.register(
            "flow_repairs",
            "Flow checks that found the agent's OpenFlow flows lost or changed (OVS restart, \
             emer-reset) and repaired them",
            global::FLOW_REPAIRS.clone(),
        );
        r.register(
            "process_resident_memory_bytes",
            "Resident set size of the agent process",
            t.process_rss_bytes.clone(),
        );
        r.register(
            "process_cpu_seconds",
            "User and system CPU time of the agent process",
            t.process_cpu_seconds.clone(),
        );
        r.register(
            "process_open_fds",
            "Open file descriptors of the agent process",
            t.process_open_fds.clone(),
        );
        r.register(
            "process_start_time_seconds",
            "Unix time the agent process started",
            t.process_start_seconds.clone(),
        );
        t.process_start_seconds.set(unix_secs(t.started));
        Arc::new(Self { registry, ..t })
    }

    /// A telemetry for tests: generous limits.
    pub fn new_test() -> Arc<Self> {
        Self::new(
            "test",
            "test",
            HealthLimits {
                idle_limit: Duration::from_secs(3600),
                stall_limit: Duration::from_secs(3600),
            },
        )
    }

    /// The loop woke up and starts working.
    pub fn wake(&self) {
        let now = now_ms();
        self.last_wake_ms.store(now, Ordering::Relaxed);
        self.busy_since_ms.store(now, Ordering::Relaxed);
    }

    /// The loop finished a wake's work and waits again.
    pub fn idle(&self) {
        self.last_wake_ms.store(now_ms(), Ordering::Relaxed);
        self.busy_since_ms.store(0, Ordering::Relaxed);
    }

    pub fn driver_change(&self) {
        self.driver_changes.inc();
    }

    /// Databases synced and the first reconcile done.
    pub fn set_ready(&self) {
        self.ready.store(1, Ordering::Relaxed);
    }

    /// A database change took `since_change` from reaching the loop to being applied.
    pub fn change_applied(&self, since_change: Duration) {
        self.change_to_applied_seconds
            .observe(since_change.as_secs_f64());
    }

    /// A reconcile spent `took` in `stage`.
    pub fn stage_took(&self, stage: Stage, took: Duration) {
        self.stage_seconds
            .get_or_create(&StageLabels {
                stage: stage.name(),
            })
            .observe(took.as_secs_f64());
    }

    /// Record the exposures the driver and policy stage produced, and what was refused.
    pub async fn exposures_computed(
        &self,
        exposures: Arc<ExposureSet>,
        skipped: Arc<Vec<SkippedRow>>,
    ) {
        // Counted by kind first: the names are looked up once per kind, not once per address.
        // The IPs (tens of thousands) by what differs from the last count's maps.
        let ips = self
            .ip_counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .count(&exposures);
        let mut others: BTreeMap<(&'static str, &'static str), i64> = BTreeMap::new();
        for scope in exposures.scopes.values() {
            for r in scope.routes.values() {
                *others
                    .entry(("route", family(&r.prefix.addr())))
                    .or_default() += 1;
            }
            for s in &scope.subnets {
                *others
                    .entry(("subnet", family(&s.router_ip.addr())))
                    .or_default() += 1;
            }
        }
        // Kinds that went to zero leave the family rather than keep their last value.
        self.exposed.clear();
        let named = ips
            .iter()
            .map(|((kind, fam), n)| (kind_name(*kind), *fam, *n))
            .chain(
                others
                    .iter()
                    .map(|((kind, fam), n)| ((*kind).to_owned(), *fam, *n)),
            );
        for (kind, fam, n) in named {
            self.exposed
                .get_or_create(&ExposedLabels {
                    kind,
                    family: fam.to_owned(),
                })
                .set(n);
        }
        self.skipped.set(skipped.len() as i64);
        let sum_of = |kind: &str| -> u64 {
            others
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .map(|(_, n)| *n as u64)
                .sum()
        };
        let totals = [
            ips.values().map(|n| *n as u64).sum(),
            sum_of("route"),
            sum_of("subnet"),
            skipped.len() as u64,
        ];
        for (slot, n) in self.counts.iter().zip(totals) {
            slot.store(n, Ordering::Relaxed);
        }
        let mut s = self.snapshot.write().await;
        s.exposures = exposures;
        s.skipped = skipped;
    }

    /// Record the end of a reconcile.
    pub async fn reconciled(
        &self,
        trigger: &str,
        duration: Duration,
        report: Result<&ChangeReport, String>,
        desired: Option<Arc<DesiredSystem>>,
    ) {
        let (result, added, changed, removed, errors) = match report {
            Ok(r) => {
                self.count_objects(r);
                let result = if r.errors.is_empty() {
                    ReconcileResult::Applied
                } else {
                    ReconcileResult::Partial
                };
                (
                    result,
                    r.added.clone(),
                    r.changed.clone(),
                    r.removed.clone(),
                    r.errors.iter().map(ToString::to_string).collect(),
                )
            }
            Err(e) => (
                ReconcileResult::Failed,
                BTreeMap::new(),
                BTreeMap::new(),
                BTreeMap::new(),
                vec![e],
            ),
        };
        self.reconciles
            .get_or_create(&ResultLabels {
                trigger: trigger.to_owned(),
                result: result.as_str().to_owned(),
            })
            .inc();
        self.reconcile_seconds
            .get_or_create(&TriggerLabels {
                trigger: trigger.to_owned(),
            })
            .observe(duration.as_secs_f64());
        let record = ReconcileRecord {
            finished_at: unix_secs(SystemTime::now()),
            trigger: trigger.to_owned(),
            duration_ms: duration.as_secs_f64() * 1000.0,
            result,
            added,
            changed,
            removed,
            errors,
        };
        self.publish(record, desired).await;
    }

    /// `record` as the last reconcile's outcome (and the last success unless it failed, with
    /// the state it applied when given), in `status` and for systemd.
    async fn publish(&self, record: ReconcileRecord, desired: Option<Arc<DesiredSystem>>) {
        crate::notify::status(&self.summary(Some(record.result)));
        let mut s = self.snapshot.write().await;
        if record.result != ReconcileResult::Failed {
            self.last_success_seconds.set(record.finished_at);
            s.last_success = Some(record.clone());
            if desired.is_some() {
                s.desired = desired;
            }
        }
        s.last_reconcile = Some(record);
    }

    /// The objects a reconcile (or the tool chains it left in the background) changed, and
    /// those it could not apply, into their counters.
    fn count_objects(&self, r: &ChangeReport) {
        for (map, op) in [
            (&r.added, "added"),
            (&r.changed, "changed"),
            (&r.removed, "removed"),
        ] {
            for (class, n) in map {
                self.objects
                    .get_or_create(&ClassOpLabels {
                        class: class.clone(),
                        op: op.to_owned(),
                    })
                    .inc_by(*n as u64);
            }
        }
        for e in &r.errors {
            self.object_errors
                .get_or_create(&ClassLabels {
                    class: e.class.clone(),
                })
                .inc();
        }
    }

    /// The tool chains the last reconcile left applying in the background are done: `late` is
    /// what they did (counted now: no reconcile did), `errors` every object not applied now
    /// (the reconcile's other errors and theirs). `status` shows it as the last reconcile's
    /// outcome (trigger `tool chains caught up`, `took` since the reconcile), not as pending.
    /// Not a reconcile of its own: the reconcile counters and durations are left alone.
    pub async fn tools_caught_up(
        &self,
        late: &ChangeReport,
        errors: &[ObjectError],
        took: Duration,
    ) {
        self.count_objects(late);
        let result = if errors.is_empty() {
            ReconcileResult::Applied
        } else {
            ReconcileResult::Partial
        };
        let record = ReconcileRecord {
            finished_at: unix_secs(SystemTime::now()),
            trigger: "tool chains caught up".to_owned(),
            duration_ms: took.as_secs_f64() * 1000.0,
            result,
            added: late.added.clone(),
            changed: late.changed.clone(),
            removed: late.removed.clone(),
            errors: errors.iter().map(ToString::to_string).collect(),
        };
        self.publish(record, None).await;
    }

    /// One line for `systemctl status`: what is exposed and how the last reconcile went.
    pub fn summary(&self, last: Option<ReconcileResult>) -> String {
        let [ips, routes, subnets, refused] =
            [0, 1, 2, 3].map(|i| self.counts[i].load(Ordering::Relaxed));
        let last = match last {
            Some(r) => r.as_str(),
            None => "none",
        };
        format!(
            "exposing {ips} addresses, {routes} routes, {subnets} tenant subnets;              {refused} refused; last reconcile {last}"
        )
    }

    /// A read view of the snapshot.
    pub async fn snapshot(&self) -> tokio::sync::RwLockReadGuard<'_, Snapshot> {
        self.snapshot.read().await
    }

    /// Liveness and readiness now.
    pub fn health(&self) -> Health {
        let now = now_ms();
        let mut reasons = Vec::new();
        let last = self.last_wake_ms.load(Ordering::Relaxed);
        let busy = self.busy_since_ms.load(Ordering::Relaxed);
        let ms = |d: Duration| d.as_millis() as u64;
        let mut live = true;
        if busy != 0 && now.saturating_sub(busy) > ms(self.limits.stall_limit) {
            live = false;
            reasons.push(format!(
                "the reconcile loop has been working on one wake-up for {} s (limit {} s): \
                 something it waits for hangs",
                now.saturating_sub(busy) / 1000,
                self.limits.stall_limit.as_secs()
            ));
        } else if busy == 0 && last != 0 && now.saturating_sub(last) > ms(self.limits.idle_limit) {
            live = false;
            reasons.push(format!(
                "the reconcile loop has not woken for {} s (its repair timer fires every {} s or \
                 less)",
                now.saturating_sub(last) / 1000,
                self.limits.idle_limit.as_secs()
            ));
        }
        let ready = self.ready.load(Ordering::Relaxed) == 1;
        if !ready {
            reasons.push(
                "not ready: the databases are not synced or the first reconcile has not run"
                    .to_owned(),
            );
        }
        Health {
            live,
            ready: ready && live,
            reasons,
        }
    }

    /// The metrics in the Prometheus text format (process figures read now).
    pub fn encode(&self) -> String {
        self.refresh_process();
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    fn refresh_process(&self) {
        if let Ok(status) = std::fs::read_to_string("/proc/self/status")
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        {
            self.process_rss_bytes.set(kb * 1024);
        }
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat")
            && let Some(cpu) = cpu_seconds(&stat)
        {
            self.process_cpu_seconds.set(cpu);
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.process_open_fds.set(dir.count() as i64);
        }
    }
}

/// utime + stime of `/proc/<pid>/stat`, in seconds (fields 14 and 15, after the command name,
/// which may contain spaces and parentheses).
fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let ticks = clock_ticks();
    Some((utime + stime) / ticks)
}

#[allow(unsafe_code)] // sysconf is a plain libc query with no pointer arguments.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf takes an integer name and returns an integer; no memory is touched.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposure::ExposedIp;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "1234 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        assert_eq!(cpu_seconds(stat), Some(300.0 / clock_ticks()));
        assert_eq!(cpu_seconds("garbage"), None);
    }

    #[tokio::test]
    async fn metrics_follow_exposures_and_reconciles() {
        let t = Telemetry::new_test();
        let mut set = ExposureSet::default();
        set.expose_ip(ExposedIp::announced(
            "192.0.2.10".parse().unwrap(),
            ExposureKind::ProviderPort,
            "vm1",
        ));
        set.expose_ip(ExposedIp::announced(
            "2001:db8::10".parse().unwrap(),
            ExposureKind::FloatingIp,
            "fip1",
        ));
        t.exposures_computed(Arc::new(set), Arc::default()).await;
        let mut report = ChangeReport::default();
        report.count_added("addresses", 2);
        report.error("routes", "add route 192.0.2.10/32", "EEXIST");
        t.reconciled("change", Duration::from_millis(3), Ok(&report), None)
            .await;
        let text = t.encode();
        for line in [
            "ovn_bgp_agent_exposed{kind=\"provider_port\",family=\"ipv4\"} 1",
            "ovn_bgp_agent_exposed{kind=\"floating_ip\",family=\"ipv6\"} 1",
            "ovn_bgp_agent_objects_changed_total{class=\"addresses\",op=\"added\"} 2",
            "ovn_bgp_agent_object_errors_total{class=\"routes\"} 1",
            "ovn_bgp_agent_reconciles_total{trigger=\"change\",result=\"partial\"} 1",
            "ovn_bgp_agent_build_info{version=",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        assert!(text.contains("ovn_bgp_agent_process_resident_memory_bytes "));
        let s = t.snapshot().await;
        assert_eq!(
            s.last_reconcile.as_ref().unwrap().result,
            ReconcileResult::Partial
        );
        assert_eq!(s.exposures.global().ips.len(), 2);
    }

    proptest::proptest! {
        /// Counted by what differs from the last maps (two scopes coming and going, IPs
        /// coming, going and changing kind), the counts are those of counting from scratch.
        #[test]
        fn ip_counts_kept_equal_counting_from_scratch(
            steps in proptest::collection::vec(
                proptest::collection::vec((proptest::bool::ANY, 0u8..16, 0u8..3), 0..10),
                1..10,
            ),
        ) {
            let kinds = [ExposureKind::ProviderPort, ExposureKind::FloatingIp, ExposureKind::TenantPort];
            let mut set = ExposureSet::default();
            let mut kept = IpCounts::default();
            for changes in steps {
                for (evpn, n, what) in changes {
                    let scope = if evpn {
                        ScopeId::Evpn(crate::caps::frr::values::Vni::new(7).unwrap())
                    } else {
                        ScopeId::Global
                    };
                    let ip: std::net::IpAddr = if n % 2 == 0 {
                        format!("10.0.0.{n}").parse().unwrap()
                    } else {
                        format!("fd00::{n}").parse().unwrap()
                    };
                    let ips = &mut set.scope_mut(scope).ips;
                    if what == 0 && ips.contains_key(&ip) {
                        ips.remove(&ip);
                    } else {
                        ips.insert(ip, Arc::new(ExposedIp::announced(ip, kinds[usize::from(what)], "p")));
                    }
                    if n == 15 {
                        set.scopes.remove(&scope);
                    }
                }
                let counted = kept.count(&set);
                proptest::prop_assert_eq!(counted, IpCounts::default().count(&set));
            }
        }
    }

    #[test]
    fn health_is_live_and_not_ready_before_the_first_reconcile() {
        let t = Telemetry::new(
            "d",
            "b",
            HealthLimits {
                idle_limit: Duration::from_secs(60),
                stall_limit: Duration::from_secs(60),
            },
        );
        let h = t.health();
        assert!(h.live && !h.ready, "{h:?}");
        t.set_ready();
        assert!(t.health().ready);
        // A wake whose work started long ago: not live.
        t.busy_since_ms.store(now_ms() - 120_000, Ordering::Relaxed);
        let h = t.health();
        assert!(!h.live && !h.ready, "{h:?}");
        assert!(h.reasons[0].contains("hangs"), "{h:?}");
        // Idle too long: not live either.
        t.busy_since_ms.store(0, Ordering::Relaxed);
        t.last_wake_ms.store(now_ms() - 120_000, Ordering::Relaxed);
        assert!(!t.health().live);
    }
}
