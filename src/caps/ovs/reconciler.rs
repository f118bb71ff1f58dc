//! Flow reconciliation: the backend's desired [`PortFlowSpec`]s against what each bridge holds.
//!
//! Per call: one `ovs-vsctl` for every port's ofport, then per bridge one `dump-flows` and, only if
//! something differs, one `ovs-ofctl add-flows` with the deletes and adds. A flow whose port has
//! no usable ofport (`-1`, `[]`, missing, on another bridge) is deferred: reported, not emitted,
//! and retried at the next reconcile. The last desired set is kept so that a periodic check
//! ([`OvsFlows::spawn_flow_check`]) can reinstall flows that OVS lost (restart, `emer-reset`),
//! and it keeps trying for as long as OVS is down.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::flows::{
    ActionPiece, DesiredFlow, FlowKey, action_pieces, batch, fill_action_ports, parse_dump,
};
use super::ports::{OfportState, OvsPortName, PortTable};
use super::tools::{OvsOptions, OvsTools};
use super::{DriftCheck, OvsError};
use crate::caps::{CapError, FlowReconciler};
use crate::system::PortFlowSpec;
use crate::types::InterfaceName;

/// A desired flow that could not be emitted yet because of its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredFlow {
    pub bridge: InterfaceName,
    pub port: String,
    /// Why: the ofport state, vswitchd's error, or the port's actual bridge.
    pub reason: String,
}

/// A desired flow refused: its text is unsafe, or ovs-ofctl could not parse it.
#[derive(Debug, Clone)]
pub struct RejectedFlow {
    pub bridge: InterfaceName,
    pub port: String,
    /// The flow as the backend gave it (match / actions) or as sent to ovs-ofctl.
    pub flow: String,
    pub error: String,
}

/// What one reconcile did.
#[derive(Debug, Clone, Default)]
pub struct FlowReport {
    pub added: usize,
    pub removed: usize,
    pub deferred: Vec<DeferredFlow>,
    /// Flows whose port does not exist (yet) in OVSDB: not an error — ovn-controller creates the
    /// patch port of a provider network only where that network is in use — and not emitted;
    /// the periodic flow check adds them once the port appears.
    pub absent: Vec<DeferredFlow>,
    pub rejected: Vec<RejectedFlow>,
    /// Failures that left a bridge (or all bridges, when OVSDB is unreachable) unreconciled.
    pub errors: Vec<String>,
    /// Bridges whose dump or apply failed.
    pub failed_bridges: BTreeSet<InterfaceName>,
    /// Desired flows OVS renders differently from how the backend wrote them (a warning: the
    /// reconciler learns the rendering so it does not delete and re-add them every time).
    pub non_canonical: Vec<String>,
}

impl FlowReport {
    pub fn is_complete(&self) -> bool {
        self.deferred.is_empty() && self.rejected.is_empty() && self.errors.is_empty()
    }

    /// One line per problem, for logs and [`CapError`].
    pub fn problems(&self) -> String {
        let mut lines = Vec::new();
        for d in &self.deferred {
            lines.push(format!(
                "flow on bridge {} for port {} deferred: {}",
                d.bridge, d.port, d.reason
            ));
        }
        for r in &self.rejected {
            lines.push(format!(
                "flow on bridge {} for port {:?} rejected ({}): {}",
                r.bridge, r.port, r.flow, r.error
            ));
        }
        lines.extend(self.errors.iter().cloned());
        lines.join("; ")
    }
}

#[derive(Debug, Default)]
struct State {
    last: Option<(BTreeSet<PortFlowSpec>, BTreeSet<u64>)>,
    /// Bridges that held the agent's flows: still cleaned when no flow is desired on them.
    bridges: BTreeSet<InterfaceName>,
    /// Per bridge: desired key → the key OVS shows for it, where they differ.
    aliases: BTreeMap<InterfaceName, BTreeMap<FlowKey, FlowKey>>,
}

/// Reconciles the agent's cookie flows through `ovs-ofctl`.
pub struct OvsFlows {
    tools: OvsTools,
    state: Mutex<State>,
    /// The problems of the last reconcile, whoever ran it ([`FlowReconciler::standing_error`]).
    standing: std::sync::Mutex<Option<String>>,
    /// Other OVS classes the periodic check repairs alongside the flows.
    drift_checks: Vec<Arc<dyn DriftCheck>>,
}

impl OvsFlows {
    pub fn new(options: OvsOptions) -> Self {
        Self {
            tools: OvsTools::new(options),
            state: Mutex::new(State::default()),
            standing: std::sync::Mutex::new(None),
            drift_checks: Vec::new(),
        }
    }

    /// Classes whose last reconcile [`Self::spawn_flow_check`] re-runs at every tick too.
    pub fn with_drift_checks(mut self, checks: Vec<Arc<dyn DriftCheck>>) -> Self {
        self.drift_checks = checks;
        self
    }

    /// Re-runs the last reconcile of every class in [`Self::with_drift_checks`], logging what
    /// had drifted.
    pub async fn check_others_now(&self) {
        for check in &self.drift_checks {
            let Some(report) = check.check_now().await else {
                continue;
            };
            if report.total_changes() > 0 {
                tracing::warn!(
                    class = check.class(),
                    added = ?report.added,
                    changed = ?report.changed,
                    removed = ?report.removed,
                    "OVS objects had drifted; repaired"
                );
            }
            for e in &report.errors {
                tracing::warn!(
                    class = check.class(),
                    "OVS check incomplete, will retry: {e}"
                );
            }
        }
    }

    pub fn from_config(config: &crate::config::AgentConfig) -> Self {
        Self::new(OvsOptions::from_config(&config.ovs))
    }

    pub fn tools(&self) -> &OvsTools {
        &self.tools
    }

    /// Makes the flows with `owned_cookies` on the concerned bridges equal to `desired`.
    pub async fn reconcile(
        &self,
        desired: &BTreeSet<PortFlowSpec>,
        owned_cookies: &BTreeSet<u64>,
    ) -> FlowReport {
        let report = self.reconcile_once(desired, owned_cookies).await;
        *self.standing.lock().unwrap_or_else(|e| e.into_inner()) =
            (!report.is_complete()).then(|| report.problems());
        report
    }

    async fn reconcile_once(
        &self,
        desired: &BTreeSet<PortFlowSpec>,
        owned_cookies: &BTreeSet<u64>,
    ) -> FlowReport {
        // An async mutex: reconciles (caller and periodic check) never interleave.
        let mut state = self.state.lock().await;
        state.last = Some((desired.clone(), owned_cookies.clone()));
        let bridges: BTreeSet<InterfaceName> = desired
            .iter()
            .map(|f| f.bridge.clone())
            .chain(state.bridges.iter().cloned())
            .collect();
        let report = self
            .reconcile_bridges(desired, owned_cookies, &bridges, &mut state.aliases)
            .await;
        state.bridges = desired.iter().map(|f| f.bridge.clone()).collect();
        // A bridge whose cleanup failed stays tracked so the next run retries it; so do all of
        // them when the port table could not be read (nothing was compared).
        if !report.errors.is_empty() && report.failed_bridges.is_empty() {
            state.bridges.extend(bridges.iter().cloned());
        }
        state.bridges.extend(report.failed_bridges.iter().cloned());
        report
    }

    async fn reconcile_bridges(
        &self,
        desired: &BTreeSet<PortFlowSpec>,
        owned_cookies: &BTreeSet<u64>,
        bridges: &BTreeSet<InterfaceName>,
        aliases: &mut BTreeMap<InterfaceName, BTreeMap<FlowKey, FlowKey>>,
    ) -> FlowReport {
        let mut report = FlowReport::default();
        if bridges.is_empty() {
            return report;
        }
        // Only the bridges and ports concerned: one call, sized by the agent's flows.
        let port_names: BTreeSet<OvsPortName> = desired
            .iter()
            .filter_map(|f| spec_ports(f).ok())
            .flat_map(|(in_port, pieces)| in_port.into_iter().chain(piece_ports(pieces)))
            .collect();
        let ports = if port_names.is_empty() {
            // Nothing to resolve (no flow, or only invalid port names, rejected below).
            PortTable::default()
        } else {
            let bridge_refs: Vec<&InterfaceName> = bridges.iter().collect();
            let port_refs: Vec<&OvsPortName> = port_names.iter().collect();
            match self.tools.port_table_for(&bridge_refs, &port_refs).await {
                Ok(p) => p,
                Err(e) => {
                    // Without ofports nothing can be compared; deleting now could remove flows
                    // that are only unresolvable for the moment. Retry next time.
                    report
                        .errors
                        .push(format!("cannot read OVS ports, no flow changed: {e}"));
                    return report;
                }
            }
        };
        let mut per_bridge: BTreeMap<InterfaceName, BTreeMap<FlowKey, String>> = bridges
            .iter()
            .map(|b| (b.clone(), BTreeMap::new()))
            .collect();
        let mut cookies = owned_cookies.clone();
        for spec in desired {
            cookies.insert(spec.cookie);
            match resolve(spec, &ports) {
                Ok(Resolved::Flow(flow)) => {
                    per_bridge
                        .entry(spec.bridge.clone())
                        .or_default()
                        .insert(flow.key, flow.add_line);
                }
                Ok(Resolved::Deferred(port, reason)) => report.deferred.push(DeferredFlow {
                    bridge: spec.bridge.clone(),
                    port: port.as_str().to_owned(),
                    reason,
                }),
                Ok(Resolved::Absent(port)) => report.absent.push(DeferredFlow {
                    bridge: spec.bridge.clone(),
                    port: port.as_str().to_owned(),
                    reason: "no such interface in OVSDB".to_owned(),
                }),
                Err(e) => report.rejected.push(RejectedFlow {
                    bridge: spec.bridge.clone(),
                    port: spec.in_port.clone(),
                    flow: format!(
                        "priority={},{} actions={}",
                        spec.priority, spec.matches, spec.actions
                    ),
                    error: e.to_string(),
                }),
            }
        }
        for (bridge, wanted) in &per_bridge {
            match self
                .reconcile_bridge(
                    bridge,
                    wanted,
                    &cookies,
                    owned_cookies,
                    aliases.entry(bridge.clone()).or_default(),
                )
                .await
            {
                Ok(outcome) => {
                    report.added += outcome.added;
                    report.removed += outcome.removed;
                    report.non_canonical.extend(outcome.non_canonical);
                    for (line, error) in outcome.dropped {
                        report.rejected.push(RejectedFlow {
                            bridge: bridge.clone(),
                            port: String::new(),
                            flow: line,
                            error,
                        });
                    }
                }
                Err(e) => {
                    report.failed_bridges.insert(bridge.clone());
                    report.errors.push(format!("bridge {bridge}: {e}"));
                }
            }
        }
        report
    }

    async fn reconcile_bridge(
        &self,
        bridge: &InterfaceName,
        wanted: &BTreeMap<FlowKey, String>,
        dump_cookies: &BTreeSet<u64>,
        owned_cookies: &BTreeSet<u64>,
        aliases: &mut BTreeMap<FlowKey, FlowKey>,
    ) -> Result<BridgeOutcome, OvsError> {
        // One cookie (the usual case): let the switch filter, so a big bridge costs little.
        let filter = match dump_cookies.iter().collect::<Vec<_>>().as_slice() {
            [only] => Some(format!("cookie={only:#x}/-1")),
            _ => None,
        };
        aliases.retain(|desired, _| wanted.contains_key(desired));
        let as_desired: BTreeMap<FlowKey, FlowKey> = aliases
            .iter()
            .map(|(d, o)| (o.clone(), d.clone()))
            .collect();
        let translate = |raw: &BTreeSet<FlowKey>| -> BTreeSet<FlowKey> {
            raw.iter()
                .map(|k| as_desired.get(k).unwrap_or(k).clone())
                // Flows of desired-but-not-owned cookies are never deleted: only owned cookies
                // are ours.
                .filter(|k| owned_cookies.contains(&k.cookie) || wanted.contains_key(k))
                .collect()
        };
        let raw_before = parse_dump(
            &self.tools.dump_flows(bridge, filter.as_deref()).await?,
            dump_cookies,
        )?;
        let present = translate(&raw_before);
        let (text, mut added, mut removed) = batch(&present, wanted);
        if added + removed == 0 {
            return Ok(BridgeOutcome::default());
        }
        let dropped = self.tools.apply_batch(bridge, &text).await?;
        for (line, _) in &dropped {
            if line.starts_with("add ") {
                added -= 1;
            } else {
                removed -= 1;
            }
        }
        tracing::info!(%bridge, added, removed, "reconciled OpenFlow flows");
        let mut non_canonical = Vec::new();
        if added > 0 {
            // Did every added flow show up as written? One more dump, only when flows were added.
            let raw_after = parse_dump(
                &self.tools.dump_flows(bridge, filter.as_deref()).await?,
                dump_cookies,
            )?;
            let after = translate(&raw_after);
            let dropped_lines: BTreeSet<&str> = dropped.iter().map(|(l, _)| l.as_str()).collect();
            let mut new_strays: Vec<&FlowKey> = raw_after
                .iter()
                .filter(|k| {
                    !raw_before.contains(k)
                        && !wanted.contains_key(k)
                        && !as_desired.contains_key(k)
                })
                .collect();
            for (key, line) in wanted {
                if after.contains(key) || dropped_lines.contains(line.as_str()) {
                    continue;
                }
                let same_slot = |k: &&FlowKey| {
                    k.cookie == key.cookie && k.table == key.table && k.priority == key.priority
                };
                let candidates: Vec<usize> = new_strays
                    .iter()
                    .enumerate()
                    .filter(|(_, k)| same_slot(k))
                    .map(|(i, _)| i)
                    .collect();
                let message = if let [only] = candidates.as_slice() {
                    let observed = new_strays.remove(*only).clone();
                    let m = format!("bridge {bridge}: `{line}` is shown by OVS as `{observed}`");
                    aliases.insert(key.clone(), observed);
                    m
                } else {
                    format!(
                        "bridge {bridge}: `{line}` does not appear in the flow table as written"
                    )
                };
                tracing::warn!("{message}; the backend should write the canonical form");
                non_canonical.push(message);
            }
        }
        Ok(BridgeOutcome {
            added,
            removed,
            dropped,
            non_canonical,
        })
    }

    /// Re-runs the last reconcile (if any): reinstalls flows lost to an OVS restart or
    /// `ovs-vsctl emer-reset`, and emits flows whose ports became usable.
    pub async fn check_now(&self) -> Option<FlowReport> {
        let last = self.state.lock().await.last.clone();
        let (desired, owned) = last?;
        Some(self.reconcile(&desired, &owned).await)
    }

    /// Runs [`Self::check_now`] every `flow_check_interval` until the handle is aborted. It never
    /// gives up: an unreachable OVS is logged and tried again at the next tick.
    pub fn spawn_flow_check(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        let interval = self.tools.options().flow_check_interval;
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                self.check_others_now().await;
                let Some(report) = self.check_now().await else {
                    continue;
                };
                if report.added > 0 || report.removed > 0 {
                    crate::telemetry::global::FLOW_REPAIRS.inc();
                    tracing::warn!(
                        added = report.added,
                        removed = report.removed,
                        "OpenFlow flows had drifted (OVS restart or emer-reset?); repaired"
                    );
                }
                if !report.is_complete() {
                    tracing::warn!(problems = %report.problems(), "flow check incomplete; will retry");
                }
            }
        })
    }
}

#[derive(Debug, Default)]
struct BridgeOutcome {
    added: usize,
    removed: usize,
    /// Batch lines ovs-ofctl refused, with its message.
    dropped: Vec<(String, String)>,
    non_canonical: Vec<String>,
}

enum Resolved {
    Flow(DesiredFlow),
    /// A port the flow names exists but cannot carry a flow now (ofport `-1`/`[]`, another
    /// bridge).
    Deferred(OvsPortName, String),
    /// A port the flow names does not exist.
    Absent(OvsPortName),
}

/// The validated `in_port` (none when empty) and the action text split at its port
/// placeholders.
fn spec_ports(spec: &PortFlowSpec) -> Result<(Option<OvsPortName>, Vec<ActionPiece>), OvsError> {
    let in_port = if spec.in_port.is_empty() {
        None
    } else {
        Some(OvsPortName::new(&spec.in_port)?)
    };
    Ok((in_port, action_pieces(&spec.actions)?))
}

fn piece_ports(pieces: Vec<ActionPiece>) -> impl Iterator<Item = OvsPortName> {
    pieces.into_iter().filter_map(|p| match p {
        ActionPiece::Port(name) => Some(name),
        ActionPiece::Text(_) => None,
    })
}

/// Resolves every port a flow names (its `in_port`, then its output ports, in order) to an
/// ofport on the flow's bridge; the first one that cannot be used defers the whole flow.
fn resolve(spec: &PortFlowSpec, ports: &PortTable) -> Result<Resolved, OvsError> {
    let (in_port, pieces) = spec_ports(spec)?;
    let mut ofports: BTreeMap<OvsPortName, u32> = BTreeMap::new();
    for port in in_port.iter().cloned().chain(piece_ports(pieces.clone())) {
        let Some(info) = ports.get(port.as_str()) else {
            return Ok(Resolved::Absent(port));
        };
        if info.bridge.as_deref() != Some(spec.bridge.as_str()) {
            let reason = match &info.bridge {
                Some(other) => format!("port is on bridge {other}"),
                None => "port is not attached to any bridge".to_owned(),
            };
            return Ok(Resolved::Deferred(port, reason));
        }
        match info.ofport {
            OfportState::Assigned(n) => {
                ofports.insert(port, n);
            }
            state => {
                let reason = format!(
                    "ofport {state}{}",
                    info.error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                );
                return Ok(Resolved::Deferred(port, reason));
            }
        }
    }
    let actions = fill_action_ports(&pieces, |name| ofports[name]);
    Ok(Resolved::Flow(DesiredFlow::new(
        spec.cookie,
        spec.priority,
        &spec.matches,
        in_port.map(|p| ofports[&p]),
        &actions,
    )?))
}

#[async_trait]
impl FlowReconciler for OvsFlows {
    /// Applies what can be applied; deferred, rejected or failed flows make the call an error
    /// (naming each) after the rest was applied, so the caller's report shows them.
    async fn reconcile_flows(
        &self,
        desired: &crate::system::ObjectSet<PortFlowSpec>,
        owned_cookies: &BTreeSet<u64>,
    ) -> Result<(usize, usize), CapError> {
        // A copy: called only when the desired flows changed (a few per VRF or bridge).
        let desired: BTreeSet<PortFlowSpec> = desired.iter().cloned().collect();
        let report = self.reconcile(&desired, owned_cookies).await;
        for absent in &report.absent {
            tracing::debug!(
                bridge = %absent.bridge,
                port = %absent.port,
                "no such port (yet): its flows wait for the flow check"
            );
        }
        if report.is_complete() {
            Ok((report.added, report.removed))
        } else {
            Err(CapError::Ovs(OvsError::Incomplete {
                summary: format!(
                    "{} flows added, {} removed; {}",
                    report.added,
                    report.removed,
                    report.problems()
                ),
            }))
        }
    }

    fn standing_error(&self) -> Option<String> {
        self.standing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
