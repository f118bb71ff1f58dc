//! The composite reconciler behind [`SystemReconciler`]: OVS ports, the kernel part through
//! netlink, then the flows, the static FDB entries, then FRR, each class reported in one
//! [`ChangeReport`].
//!
//! Order matters: OVS creates the devices of internal ports, which the kernel part then enslaves
//! to a VRF and sets up, so OVS ports go first (a system port whose veth does not exist yet is
//! fine for OVS: it gets its ofport once the kernel part creates the veth). Links must exist
//! before flows and FRR interfaces refer to them; flows and FDB entries need the ports' ofports.
//! A class that fails as a whole (FRR unreachable, OVS down) is reported as an error of that
//! class; the other classes are still applied.
//!
//! In the agent ([`CompositeReconciler::with_background_tools`]) the classes applied through
//! external tools run in three tasks of their own, one per target ([`Chain`]: OVS — ports unless
//! they must exist before the kernel part, flows, FDB; FRR — snippets and objects; the local
//! NB), each fed the latest desired state: a reconcile applies the kernel part, then waits for
//! the tools only briefly. A hung `vtysh` or `ovs-vsctl` (killed at its own timeout) therefore
//! never delays the next kernel exposure, nor the other targets; each catches up with the
//! latest state when its tool answers again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::netlink::NetlinkReconciler;
use super::{
    CapError, FdbReconciler, FlowReconciler, FrrConfigurator, OvsPortReconciler, SystemReconciler,
};
use crate::system::{ChangeReport, DesiredSystem, ObjectError, OvsPortSpec};

pub const FLOWS: &str = "flows";
pub const FRR: &str = "frr";
pub const FRR_OBJECTS: &str = super::frr::objects::CLASS;
pub const LOCAL_NB: &str = super::local_nb::CLASS;
pub const OVS_PORTS: &str = "ovs_ports";
pub const FDB: &str = "fdb";
/// The report class of tool-driven classes still being applied in the background.
pub const TOOLS: &str = "tools";
/// A chain still busy with an earlier state when a reconcile submitted the next one.
const STILL_BUSY: &str = "still applying an earlier state; this one follows in the background";
/// A chain that had not finished when the reconcile stopped waiting (followed by the wait).
const STILL_APPLYING: &str = "still being applied after ";

/// The tool chains a reconcile's `report` left applying in the background (the `object` of
/// their [`TOOLS`] errors): [`SystemReconciler::caught_up`] tells when they are done.
pub fn chains_behind(report: &ChangeReport) -> Vec<String> {
    report
        .errors
        .iter()
        .filter(|e| is_behind(e))
        .map(|e| e.object.clone())
        .collect()
}

/// Whether `e` only says that its tool chain was left applying in the background.
pub fn is_behind(e: &ObjectError) -> bool {
    e.class == TOOLS && (e.error == STILL_BUSY || e.error.starts_with(STILL_APPLYING))
}
/// How long the agent's reconcile waits for the tool classes: long enough for the usual no-op
/// (FRR fingerprint unchanged, flows unchanged) or a quick apply, short enough that a hung tool
/// holds the next kernel exposure back by no more than this.
pub const AGENT_TOOL_WAIT: Duration = Duration::from_millis(250);

pub struct CompositeReconciler {
    kernel: Arc<NetlinkReconciler>,
    /// The classes applied through external tools; shared with the background task.
    tools: Arc<ToolClasses>,
    /// `Some`: the tool classes run in a background task and a reconcile waits this long for
    /// them; `None`: they run inline, after the kernel part.
    tool_wait: Option<Duration>,
    workers: std::sync::Mutex<[Option<ToolWorker>; CHAINS.len()]>,
    generation: AtomicU64,
    /// The OVS port set last applied without error inline (see [`Self::ports_first`]).
    ports_applied: std::sync::Mutex<Option<BTreeSet<OvsPortSpec>>>,
}

/// Everything applied through `ovs-vsctl`, `ovs-ofctl`, `ovs-appctl`, `vtysh` or an OVSDB
/// transaction.
struct ToolClasses {
    flows: Option<Arc<dyn FlowReconciler>>,
    frr: Option<Arc<dyn FrrConfigurator>>,
    frr_objects: Option<Arc<super::frr::FrrObjects>>,
    local_nb: super::local_nb::LocalNbSlot,
    ovs_ports: Option<Arc<dyn OvsPortReconciler>>,
    fdb: Option<Arc<dyn FdbReconciler>>,
    /// When a periodic flow check runs beside this reconciler (the agent's case), a flow set
    /// (and an OVS port set) equal to the last one applied without error is not re-checked on
    /// every reconcile: that saves an `ovs-vsctl` and an `ovs-ofctl dump-flows` per bridge on
    /// every OVSDB event, and drift (an OVS restart, `emer-reset`, a port deleted by hand) is
    /// the flow check's job (it re-runs the ports' last reconcile too). Static FDB entries
    /// likewise: an unchanged set costs no `ovs-appctl fdb/show` per bridge per event (the flow
    /// check re-runs their last reconcile as well, which puts back what a vswitchd restart
    /// dropped).
    skip_unchanged_flows: bool,
    last_flows: std::sync::Mutex<Option<FlowState>>,
    last_fdb: std::sync::Mutex<Option<std::collections::BTreeSet<crate::system::FdbEntrySpec>>>,
}

/// The targets the tool classes are applied to, each on its own in the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chain {
    /// OVS ports, flows, FDB entries (`ovs-vsctl`, `ovs-ofctl`, `ovs-appctl`).
    Ovs,
    /// FRR snippets, then FRR objects (`vtysh`).
    Frr,
    /// The node-local NB (an OVSDB transaction).
    LocalNb,
}

const CHAINS: [Chain; 3] = [Chain::Ovs, Chain::Frr, Chain::LocalNb];

impl Chain {
    fn name(self) -> &'static str {
        match self {
            Chain::Ovs => "OVS ports, flows and FDB entries",
            Chain::Frr => "FRR configuration and objects",
            Chain::LocalNb => "local NB rows",
        }
    }
}

/// A background task's ends: the latest request, and the last generation it finished.
#[derive(Clone)]
struct ToolWorker {
    submit: watch::Sender<Option<ToolRequest>>,
    done: watch::Receiver<(u64, Option<ChangeReport>)>,
}

#[derive(Clone)]
struct ToolRequest {
    generation: u64,
    desired: Arc<DesiredSystem>,
    with_ports: bool,
}

type FlowState = (
    crate::system::ObjectSet<crate::system::PortFlowSpec>,
    std::collections::BTreeSet<u64>,
);

impl CompositeReconciler {
    pub fn new(
        kernel: Arc<NetlinkReconciler>,
        flows: Option<Arc<dyn FlowReconciler>>,
        frr: Option<Arc<dyn FrrConfigurator>>,
    ) -> Self {
        Self {
            kernel,
            tools: Arc::new(ToolClasses {
                flows,
                frr,
                frr_objects: None,
                local_nb: super::local_nb::LocalNbSlot::default(),
                ovs_ports: None,
                fdb: None,
                skip_unchanged_flows: false,
                last_flows: std::sync::Mutex::new(None),
                last_fdb: std::sync::Mutex::new(None),
            }),
            tool_wait: None,
            workers: std::sync::Mutex::new([None, None, None]),
            generation: AtomicU64::new(0),
            ports_applied: std::sync::Mutex::new(None),
        }
    }

    /// The tool classes while the reconciler is being built (nothing shares them yet).
    fn tools_mut(&mut self) -> &mut ToolClasses {
        Arc::get_mut(&mut self.tools).expect("the reconciler is configured before its first use")
    }

    /// Adds the FRR object class ([`DesiredSystem::frr_objects`]).
    pub fn with_frr_objects(mut self, objects: Arc<super::frr::FrrObjects>) -> Self {
        self.tools_mut().frr_objects = Some(objects);
        self
    }

    /// Adds the node-local NB class ([`DesiredSystem::local_nb`]).
    pub fn with_local_nb(mut self, local_nb: Arc<super::local_nb::LocalNb>) -> Self {
        let slot = super::local_nb::LocalNbSlot::default();
        slot.fill(local_nb);
        self.tools_mut().local_nb = slot;
        self
    }

    /// Adds the node-local NB class through a slot its backend fills once it has connected
    /// (the connection needs the configuration and an async start; the reconciler is built
    /// before any backend).
    pub fn with_local_nb_slot(mut self, slot: super::local_nb::LocalNbSlot) -> Self {
        self.tools_mut().local_nb = slot;
        self
    }

    /// Plugs in the OVS port and static FDB entry classes.
    pub fn with_ovs_ports_and_fdb(
        mut self,
        ovs_ports: Option<Arc<dyn OvsPortReconciler>>,
        fdb: Option<Arc<dyn FdbReconciler>>,
    ) -> Self {
        let tools = self.tools_mut();
        tools.ovs_ports = ovs_ports;
        tools.fdb = fdb;
        self
    }

    /// See `ToolClasses::skip_unchanged_flows`: only with a periodic flow check.
    pub fn with_flow_check_running(mut self) -> Self {
        self.tools_mut().skip_unchanged_flows = true;
        self
    }

    /// Runs the tool classes in a background task fed the latest desired state; a reconcile
    /// applies the kernel part and waits at most `wait` for the tools (their outcome is logged
    /// by the task when it comes later, and reported under [`TOOLS`] meanwhile).
    pub fn with_background_tools(mut self, wait: Duration) -> Self {
        self.tool_wait = Some(wait);
        self
    }

    pub fn kernel(&self) -> &Arc<NetlinkReconciler> {
        &self.kernel
    }

    /// Whether the OVS ports are applied before the kernel part, inline: only when there are
    /// ports to have and they changed since they were last applied without error (internal
    /// ports create devices the kernel part then configures). Otherwise (no ports, or the same
    /// ports: a check for drift) they go with the other tool classes.
    fn ports_first(&self, desired: &DesiredSystem) -> bool {
        self.tools.ovs_ports.is_some()
            && !desired.ovs_ports.is_empty()
            && self
                .ports_applied
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                != Some(&desired.ovs_ports)
    }

    /// Whether the tool chain checks the OVS ports this time (they were not applied inline).
    /// With the periodic OVS check running, a set equal to the one last applied without error
    /// is not: the check re-applies it (a port deleted by hand), as it does the flows, and an
    /// `ovs-vsctl` read (~4 ms of CPU) per OVSDB event is saved on an EVPN gateway.
    fn ports_due(&self, desired: &DesiredSystem) -> bool {
        !self.tools.skip_unchanged_flows
            || self
                .ports_applied
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                != Some(&desired.ovs_ports)
    }

    /// The background task of `chain`, started on first use (inside the runtime).
    fn worker(&self, chain: Chain) -> ToolWorker {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        let index = CHAINS
            .iter()
            .position(|c| *c == chain)
            .expect("every chain");
        let w = workers[index].get_or_insert_with(|| {
            let (submit, mut requests) = watch::channel(None::<ToolRequest>);
            let (finished, done) = watch::channel((0, None));
            let tools = self.tools.clone();
            let wait = self.tool_wait.unwrap_or_default();
            tokio::spawn(async move {
                // Ends when the reconciler (the sender) is dropped.
                while requests.changed().await.is_ok() {
                    let Some(request) = requests.borrow_and_update().clone() else {
                        continue;
                    };
                    let started = tokio::time::Instant::now();
                    let applying = Applying::start();
                    let report = tools
                        .apply_chain(chain, &request.desired, request.with_ports)
                        .await;
                    drop(applying);
                    if started.elapsed() > wait {
                        // The reconcile that asked stopped waiting: nobody else logs this.
                        log_late(&report, started.elapsed());
                    }
                    finished.send_replace((request.generation, Some(report)));
                }
            });
            ToolWorker { submit, done }
        });
        w.clone()
    }
}

/// A tool chain applying a state, counted in `tool_chains_applying` until dropped (also when
/// the apply panics).
struct Applying;

impl Applying {
    fn start() -> Self {
        crate::telemetry::global::TOOL_CHAINS_APPLYING.inc();
        Self
    }
}

impl Drop for Applying {
    fn drop(&mut self) {
        crate::telemetry::global::TOOL_CHAINS_APPLYING.dec();
    }
}

/// The outcome of tool classes that finished after their reconcile stopped waiting. At debug
/// level: the agent's loop logs the outcome of the last state submitted when the chains are
/// done (`tool chains caught up`, [`SystemReconciler::caught_up`]), with a warning for each
/// object not applied; an earlier state's outcome is superseded by it.
fn log_late(report: &ChangeReport, took: Duration) {
    for e in &report.errors {
        tracing::debug!(class = %e.class, object = %e.object, "not applied: {}", e.error);
    }
    tracing::debug!(
        took = ?took,
        added = ?report.added,
        changed = ?report.changed,
        removed = ?report.removed,
        errors = report.errors.len(),
        "tool classes applied in the background"
    );
}

/// What the tool classes need of a desired state (cloned for the background task; the kernel
/// part, the bulk of it, is not).
fn tool_part(desired: &DesiredSystem) -> DesiredSystem {
    DesiredSystem {
        flows: desired.flows.clone(),
        ovs_ports: desired.ovs_ports.clone(),
        fdb_entries: desired.fdb_entries.clone(),
        frr: desired.frr.clone(),
        frr_objects: desired.frr_objects.clone(),
        local_nb: desired.local_nb.clone(),
        ownership: desired.ownership.clone(),
        ..DesiredSystem::default()
    }
}

impl ToolClasses {
    fn flows_unchanged(&self, desired: &DesiredSystem) -> bool {
        self.skip_unchanged_flows
            && self
                .last_flows
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|(flows, cookies)| {
                    *flows == desired.flows && *cookies == desired.ownership.flow_cookies
                })
    }

    fn fdb_unchanged(&self, desired: &DesiredSystem) -> bool {
        self.skip_unchanged_flows
            && self
                .last_fdb
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|fdb| *fdb == desired.fdb_entries)
    }

    fn remember_flows(&self, desired: Option<&DesiredSystem>) {
        *self.last_flows.lock().unwrap_or_else(|e| e.into_inner()) =
            desired.map(|d| (d.flows.clone(), d.ownership.flow_cookies.clone()));
    }

    async fn apply_ports(&self, desired: &DesiredSystem) -> ChangeReport {
        let mut report = ChangeReport::default();
        match &self.ovs_ports {
            Some(ports) => report.merge(ports.reconcile_ports(&desired.ovs_ports).await),
            None if !desired.ovs_ports.is_empty() => report.error(
                OVS_PORTS,
                format!("{} OVS ports", desired.ovs_ports.len()),
                "not configured",
            ),
            None => {}
        }
        report
    }

    /// Flows, FDB entries, FRR snippets and objects, the local NB (and the OVS ports when
    /// `with_ports`), in that order.
    async fn apply(&self, desired: &DesiredSystem, with_ports: bool) -> ChangeReport {
        let mut report = ChangeReport::default();
        for chain in CHAINS {
            report.merge(self.apply_chain(chain, desired, with_ports).await);
        }
        report
    }

    async fn apply_chain(
        &self,
        chain: Chain,
        desired: &DesiredSystem,
        with_ports: bool,
    ) -> ChangeReport {
        match chain {
            Chain::Ovs => self.apply_ovs(desired, with_ports).await,
            Chain::Frr => self.apply_frr(desired).await,
            Chain::LocalNb => self.apply_local_nb(desired).await,
        }
    }

    async fn apply_ovs(&self, desired: &DesiredSystem, with_ports: bool) -> ChangeReport {
        let mut report = ChangeReport::default();
        if with_ports {
            report.merge(self.apply_ports(desired).await);
        }
        match &self.flows {
            // Flows not applied stay reported until the flow check applies them.
            Some(flows) if self.flows_unchanged(desired) => {
                if let Some(e) = flows.standing_error() {
                    report.error(FLOWS, "reconcile flows", e);
                }
            }
            Some(flows) => match flows
                .reconcile_flows(&desired.flows, &desired.ownership.flow_cookies)
                .await
            {
                Ok((added, removed)) => {
                    report.count_added(FLOWS, added);
                    report.count_removed(FLOWS, removed);
                    self.remember_flows(Some(desired));
                }
                Err(e) => {
                    // With the periodic flow check running, it retries these flows (it keeps
                    // the last desired set whatever the outcome): an event that does not change
                    // them need not try again. Otherwise every event would re-run a dump that
                    // failed, typically one that timed out because ovs-vswitchd is saturated
                    // (with 30k exposures it re-reads every address and route on each kernel
                    // notification), and keep the OVS chain busy for good.
                    self.remember_flows(self.skip_unchanged_flows.then_some(desired));
                    report.error(FLOWS, "reconcile flows", e);
                }
            },
            None if !desired.flows.is_empty() => report.error(
                FLOWS,
                format!("{} flows", desired.flows.len()),
                "not configured",
            ),
            None => {}
        }

        match &self.fdb {
            // Entries not applied stay reported until the periodic check applies them.
            Some(fdb) if self.fdb_unchanged(desired) => report.errors.extend(fdb.standing_errors()),
            Some(fdb) => {
                report.merge(fdb.reconcile_fdb(&desired.fdb_entries).await);
                // Whatever the outcome, as for the flows: the periodic check retries.
                if self.skip_unchanged_flows {
                    *self.last_fdb.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(desired.fdb_entries.clone());
                }
            }
            None if !desired.fdb_entries.is_empty() => report.error(
                FDB,
                format!("{} FDB entries", desired.fdb_entries.len()),
                "not configured",
            ),
            None => {}
        }
        report
    }

    async fn apply_frr(&self, desired: &DesiredSystem) -> ChangeReport {
        let mut report = ChangeReport::default();
        match &self.frr {
            Some(frr) => match frr.ensure(&desired.frr).await {
                Ok(applied) => report.count_changed(FRR, applied),
                Err(e) => report.error(FRR, "apply FRR configuration", e),
            },
            None if !desired.frr.is_empty() => report.error(
                FRR,
                format!("{} FRR snippets", desired.frr.len()),
                "not configured",
            ),
            None => {}
        }

        // After the kernel part: a VRF device the agent deleted there makes FRR accept
        // `no vrf` (FRR refuses to delete an active VRF).
        match &self.frr_objects {
            Some(objects) => report.merge(objects.reconcile(&desired.frr_objects).await),
            None if !desired.frr_objects.is_empty() => report.error(
                FRR_OBJECTS,
                format!("{} FRR objects", desired.frr_objects.len()),
                "not configured",
            ),
            None => {}
        }
        report
    }

    async fn apply_local_nb(&self, desired: &DesiredSystem) -> ChangeReport {
        let mut report = ChangeReport::default();
        match (self.local_nb.get(), &desired.local_nb) {
            (Some(nb), Some(rows)) => report.merge(nb.reconcile(rows).await),
            (None, Some(rows)) if !rows.rows.is_empty() => report.error(
                LOCAL_NB,
                format!("{} local NB rows", rows.rows.len()),
                "not configured",
            ),
            _ => {}
        }
        report
    }
}

#[async_trait]
impl SystemReconciler for CompositeReconciler {
    async fn reconcile(&self, desired: &DesiredSystem) -> Result<ChangeReport, CapError> {
        self.reconcile_shared(&Arc::new(desired.clone())).await
    }

    async fn reconcile_shared(
        &self,
        desired: &Arc<DesiredSystem>,
    ) -> Result<ChangeReport, CapError> {
        let mut report = ChangeReport::default();
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let ports_first = self.tool_wait.is_none() || self.ports_first(desired);
        if ports_first {
            let ports = self.tools.apply_ports(desired).await;
            *self.ports_applied.lock().unwrap_or_else(|e| e.into_inner()) =
                ports.errors.is_empty().then(|| desired.ovs_ports.clone());
            report.merge(ports);
        }
        match self.kernel.reconcile_shared(desired).await {
            Ok(r) => report.merge(r),
            Err(e) => report.error("kernel", "netlink reconcile", e),
        }
        let Some(wait) = self.tool_wait else {
            report.merge(self.tools.apply(desired, false).await);
            return Ok(report);
        };
        let request = ToolRequest {
            generation,
            desired: Arc::new(tool_part(desired)),
            with_ports: !ports_first && self.ports_due(desired),
        };
        let workers: Vec<(Chain, ToolWorker)> =
            CHAINS.iter().map(|c| (*c, self.worker(*c))).collect();
        // A chain still applying an earlier state (a tool slow or hung) is not waited for: it
        // would hold every reconcile back by the whole wait while it stays busy.
        let mut busy = Vec::new();
        for (chain, worker) in &workers {
            let submitted = worker.submit.borrow().as_ref().map_or(0, |r| r.generation);
            if worker.done.borrow().0 < submitted {
                busy.push(*chain);
            }
            worker.submit.send_replace(Some(request.clone()));
        }
        let deadline = tokio::time::Instant::now() + wait;
        for (chain, worker) in workers {
            if busy.contains(&chain) {
                report.error(TOOLS, chain.name(), STILL_BUSY);
                continue;
            }
            let mut done = worker.done;
            let finished = tokio::time::timeout_at(deadline, async {
                done.wait_for(|(g, _)| *g >= generation)
                    .await
                    .ok()
                    .and_then(|d| d.1.clone())
            })
            .await;
            match finished {
                Ok(Some(tools)) => report.merge(tools),
                Ok(None) => report.error(TOOLS, chain.name(), "the background task ended"),
                Err(_) => report.error(
                    TOOLS,
                    chain.name(),
                    format!(
                        "{STILL_APPLYING}{wait:?}; continues in the background (a hung vtysh or ovs-vsctl is killed at its timeout)"
                    ),
                ),
            }
        }
        Ok(report)
    }

    async fn caught_up(&self, chains: Vec<String>) -> ChangeReport {
        let workers: Vec<(Chain, ToolWorker)> = {
            let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            CHAINS
                .iter()
                .zip(workers.iter())
                .filter(|(c, _)| chains.iter().any(|n| n == c.name()))
                .filter_map(|(c, w)| Some((*c, w.clone()?)))
                .collect()
        };
        if workers.is_empty() {
            // Nothing to wait for (a chain this reconciler never started): never resolves, so
            // the caller does not wake for nothing.
            return std::future::pending().await;
        }
        let mut report = ChangeReport::default();
        for (chain, worker) in workers {
            // The last state submitted: no reconcile runs while the caller waits here.
            let submitted = worker.submit.borrow().as_ref().map_or(0, |r| r.generation);
            let mut done = worker.done;
            match done.wait_for(|(g, _)| *g >= submitted).await {
                Ok(d) => {
                    if let Some(r) = &d.1 {
                        report.merge(r.clone());
                    }
                }
                Err(_) => report.error(TOOLS, chain.name(), "the background task ended"),
            }
        }
        report
    }
}
