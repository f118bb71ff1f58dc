//! `exposing_method = ovn`: a node-local OVN cluster carries the traffic between OpenStack's
//! provider bridges and the fabric (HWOL/DPDK friendly: the kernel never sees it); the exposed
//! IPs are still announced from bgp-nic (upstream-behaviour.md §2 `ovn` column, H1).
//!
//! - [`render`]: exposures → rows of the local NB, egress/ingress flows, FDB entries (pure).
//! - [`incremental`]: the same as a delta (issue 17): the host's renders
//!   ([`ExposureBackend::desired_system_shared`]) render the IPs that changed, and hand the
//!   kernel part an announced set derived from the last one, which the underlay rendering
//!   renders as a delta in turn.
//! - `OvnClusterBackend`: connects to `[local_ovn_cluster] ovn_nb_connection` (leader only, the
//!   `[ovn] ovn_nb_*` TLS files for `ssl:`), hands the connection to the agent's reconciler
//!   ([`crate::caps::local_nb::LocalNbSlot`]), reads the facts rendering needs (the bridges'
//!   MACs, addresses and ports) in the background, and renders the kernel part (bgp-vrf,
//!   bgp-nic, the addresses, FRR's leak configuration) with the underlay backend's code, fed
//!   only the IPs to announce.
//!
//! The local NB's rows are desired state like the kernel's: an owned row edited or deleted by
//! hand is restored at the next reconcile, which the backend asks for as soon as the local NB
//! changes ([`ExposureBackend::changed`]); rows the agent did not create are never touched
//! (ownership: `external_ids:ovn-bgp-agent:owned`). The client follows the RAFT leader.

pub mod incremental;
pub mod render;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::backends::underlay::UnderlayBackend;
use crate::caps::local_nb::{LocalNb, LocalNbSlot};
use crate::caps::netlink::NetlinkReconciler;
use crate::caps::ovs::tools::OvsTools;
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::plugin::{BackendRegistration, ExposureBackend, PluginContext, PluginError, Rendered};
use crate::types::InterfaceName;
use render::{BridgeFacts, ClusterFacts, ClusterSettings, Mappings};

const NAME: &str = "ovn";
/// Bridge addresses, MACs and ports can change (a NIC re-addressed, the local cluster's
/// ovn-controller creating its patch port): re-read them this often.
const FACTS_MAX_AGE: Duration = Duration::from_secs(5);
/// How long `start` waits for the local NB before the first reconcile (it keeps connecting in
/// the background after that, and the rows follow once it answers).
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(5);

fn failed(message: impl Into<String>) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: message.into(),
    }
}

type Task<T> = Option<JoinHandle<Result<T, String>>>;

pub(crate) struct OvnClusterBackend {
    config: Arc<AgentConfig>,
    settings: ClusterSettings,
    /// The kernel and FRR part: bgp-vrf, bgp-nic, the announced addresses, the leak VRF.
    base: UnderlayBackend,
    ovs: OvsTools,
    netlink: Arc<NetlinkReconciler>,
    slot: LocalNbSlot,
    identity: Option<watch::Receiver<ChassisIdentity>>,
    mappings: Mappings,
    facts: ClusterFacts,
    facts_read_at: Option<Instant>,
    fact_read: Task<ClusterFacts>,
    connect: Task<LocalNb>,
    /// Changes of the local NB (anyone's edit, a resync after a leader change).
    nb_changes: Option<watch::Receiver<u64>>,
    /// Whether those changes need a reconcile ([`LocalNb::needs_reconcile`]: not when they are
    /// the echo of the agent's own transaction), asked in a task so `changed` stays
    /// cancel-safe; `nb_recheck`: the local NB changed again while it was asked.
    nb_check: Task<bool>,
    nb_recheck: bool,
    /// The last rendering, updated by the next exposure set's differences (issue 17).
    incremental: std::sync::Mutex<incremental::IncrementalRender>,
}

impl OvnClusterBackend {
    fn from_context(ctx: &PluginContext) -> Result<Self, PluginError> {
        Ok(Self {
            config: ctx.config.clone(),
            settings: ClusterSettings::from_config(&ctx.config).map_err(failed)?,
            base: UnderlayBackend::from_context(ctx)?,
            ovs: ctx.caps.ovs_tools.clone(),
            netlink: ctx.caps.netlink.clone(),
            slot: ctx.caps.local_nb.clone(),
            identity: None,
            mappings: Mappings::default(),
            facts: ClusterFacts::default(),
            facts_read_at: None,
            fact_read: None,
            connect: None,
            nb_changes: None,
            nb_check: None,
            nb_recheck: false,
            incremental: Default::default(),
        })
    }

    fn remote(&self) -> &str {
        &self.config.local_ovn_cluster.ovn_nb_connection
    }

    /// Takes a finished connection attempt: the reconciler gets the local NB.
    fn take_connect(&mut self, result: Result<Result<LocalNb, String>, String>) -> bool {
        match result.and_then(|r| r) {
            Ok(nb) => {
                info!(remote = %self.remote(), "local OVN NB connected (leader)");
                self.nb_changes = Some(nb.subscribe());
                self.slot.fill(Arc::new(nb));
                true
            }
            Err(e) => {
                // Only errors retrying cannot fix end the attempt (schema without a table the
                // method writes): the rows stay unwritten and every reconcile says why.
                warn!(remote = %self.remote(), "local OVN NB: {e}");
                false
            }
        }
    }

    /// Starts asking the local NB whether its changes need a reconcile; false without a
    /// local NB to ask (the caller reconciles).
    fn ask_nb_check(&mut self) -> bool {
        let Some(nb) = self.slot.get().cloned() else {
            return false;
        };
        self.nb_check = Some(tokio::spawn(async move { Ok(nb.needs_reconcile().await) }));
        true
    }

    fn refresh_mappings(&mut self) {
        if let Some(identity) = &self.identity {
            let mappings = Mappings::from_identity(&identity.borrow(), &self.settings.chassis);
            self.mappings = mappings;
        }
    }

    /// The bridges of the local cluster's fabric side, whose facts rendering needs.
    fn fact_bridges(&self) -> BTreeSet<InterfaceName> {
        self.mappings
            .cluster
            .iter()
            .map(|(_, b)| b.clone())
            .filter(|b| !self.mappings.main.iter().any(|(_, m)| m == b))
            .collect()
    }

    fn refresh_facts(&mut self) {
        let bridges = self.fact_bridges();
        let same_bridges = self.facts.bridges.keys().eq(bridges.iter());
        let fresh = self
            .facts_read_at
            .is_some_and(|t| t.elapsed() < FACTS_MAX_AGE);
        if (fresh && same_bridges) || self.fact_read.is_some() {
            return;
        }
        if bridges.is_empty() {
            self.facts = ClusterFacts::default();
            self.facts_read_at = Some(Instant::now());
            return;
        }
        let (ovs, netlink) = (self.ovs.clone(), self.netlink.clone());
        self.fact_read = Some(tokio::spawn(read_facts(ovs, netlink, bridges)));
    }

    fn take_facts(&mut self, result: Result<Result<ClusterFacts, String>, String>) -> bool {
        match result.and_then(|r| r) {
            Ok(facts) => {
                self.facts_read_at = Some(Instant::now());
                let new = facts != self.facts;
                self.facts = facts;
                new
            }
            Err(e) => {
                warn!("reading the local cluster's bridges: {e}");
                self.facts_read_at = Some(Instant::now());
                false
            }
        }
    }
}

/// MAC, kernel addresses and OVS ports of each bridge.
async fn read_facts(
    ovs: OvsTools,
    netlink: Arc<NetlinkReconciler>,
    bridges: BTreeSet<InterfaceName>,
) -> Result<ClusterFacts, String> {
    let list: Vec<&InterfaceName> = bridges.iter().collect();
    let table = ovs
        .port_table_for(&list, &[])
        .await
        .map_err(|e| format!("ovs-vsctl list: {e}"))?;
    let names: Vec<&str> = bridges.iter().map(InterfaceName::as_str).collect();
    let addresses = netlink
        .addresses_of(&names)
        .await
        .map_err(|e| format!("kernel addresses: {e}"))?;
    let mut out = ClusterFacts::default();
    for bridge in bridges {
        if table.get(bridge.as_str()).is_none() {
            continue; // not an OVS bridge (yet): reported by the renderer as without MAC
        }
        let ports = ovs
            .vsctl(&["list-ports".to_owned(), bridge.to_string()])
            .await
            .map_err(|e| format!("ovs-vsctl list-ports {bridge}: {e}"))?;
        let facts = BridgeFacts {
            mac: table.bridge_mac(bridge.as_str()),
            addresses: addresses
                .iter()
                .filter(|(dev, addr)| {
                    dev == bridge.as_str()
                        && !matches!(addr, ipnet::IpNet::V6(v6) if v6.addr().is_unicast_link_local())
                })
                .map(|(_, addr)| *addr)
                .collect(),
            ports: ports.lines().map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()).collect(),
        };
        out.bridges.insert(bridge, facts);
    }
    Ok(out)
}

/// A finished background task's result, its panic or cancellation as text.
async fn joined<T>(
    handle: &mut JoinHandle<Result<T, String>>,
) -> Result<Result<T, String>, String> {
    handle
        .await
        .map_err(|e| format!("background task failed: {e}"))
}

/// Waits for an optional task; pending forever without one.
async fn maybe<T>(task: &mut Task<T>) -> Result<Result<T, String>, String> {
    match task {
        Some(h) => joined(h).await,
        None => std::future::pending().await,
    }
}

/// Waits for a change of an optional watch; pending forever without one (or once it closed).
async fn watched<T>(rx: &mut Option<watch::Receiver<T>>) -> bool {
    match rx {
        Some(r) => r.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

#[async_trait]
impl ExposureBackend for OvnClusterBackend {
    async fn start(&mut self, ctx: &PluginContext) -> Result<(), PluginError> {
        if crate::ovn::tenant::TenantOptions::from_config(&self.config.default).enabled() {
            warn!(
                "tenant network exposure is on, but exposing_method = ovn does not support \
                 tenant networks (neither does upstream): tenant IPs and subnets are reported \
                 as skipped, not exposed"
            );
        }
        let client = crate::ovn::connect::local_nb_client_config(&self.config)
            .map_err(|e| failed(e.to_string()))?;
        let identity = ctx
            .identity
            .feed()
            .await
            .map_err(|e| failed(format!("local chassis identity: {e}")))?;
        self.identity = Some(identity);
        self.refresh_mappings();
        info!(
            remote = %self.remote(),
            chassis = %self.settings.chassis,
            mappings = ?self.mappings.cluster,
            "local OVN cluster"
        );
        self.connect = Some(tokio::spawn(async move {
            LocalNb::connect(client).await.map_err(|e| e.to_string())
        }));
        if let Some(handle) = self.connect.as_mut()
            && let Ok(result) = tokio::time::timeout(FIRST_CONNECT_WAIT, joined(handle)).await
        {
            self.connect = None;
            self.take_connect(result);
        }
        self.base.start(ctx).await
    }

    async fn observe(&mut self, _exposures: &ExposureSet) -> Result<(), PluginError> {
        self.refresh_mappings();
        self.refresh_facts();
        // The kernel part has no provider bridges and announces addresses only.
        self.base.observe(&ExposureSet::default()).await
    }

    /// Fires when the local NB changed (a row edited or deleted by hand, a resync after a
    /// leader change), when it got connected, when the bridges' facts (re-read every
    /// [`FACTS_MAX_AGE`]) or the chassis identity changed, or when the kernel part's
    /// background work brought something new. Cancel-safe: every wait is a task handle or a
    /// watch polled by reference, or a timer that is re-armed from the same instant.
    async fn changed(&mut self) -> Result<(), PluginError> {
        loop {
            // The bridges' facts are polled: a NIC re-addressed or the local cluster's
            // ovn-controller creating its patch port triggers no OVSDB event the agent sees.
            let stale_at = match (&self.fact_read, self.facts_read_at) {
                (None, Some(at)) if !self.fact_bridges().is_empty() => Some(at + FACTS_MAX_AGE),
                _ => None,
            };
            let Self {
                base,
                fact_read,
                connect,
                nb_changes,
                nb_check,
                identity,
                ..
            } = self;
            tokio::select! {
                r = base.changed() => return r,
                () = async {
                    match stale_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => self.refresh_facts(),
                result = maybe(fact_read) => {
                    self.fact_read = None;
                    if self.take_facts(result) {
                        return Ok(());
                    }
                }
                result = maybe(connect) => {
                    self.connect = None;
                    if self.take_connect(result) {
                        return Ok(());
                    }
                }
                open = watched(nb_changes) => {
                    if !open {
                        self.nb_changes = None;
                        return Ok(());
                    }
                    if self.nb_check.is_some() {
                        self.nb_recheck = true;
                    } else if !self.ask_nb_check() {
                        return Ok(());
                    }
                }
                result = maybe(nb_check) => {
                    self.nb_check = None;
                    match result.and_then(|r| r) {
                        Ok(false) if std::mem::take(&mut self.nb_recheck) => {
                            if !self.ask_nb_check() {
                                return Ok(());
                            }
                        }
                        Ok(false) => {} // only the agent's own echo: nothing to repair
                        Ok(true) => {
                            self.nb_recheck = false;
                            return Ok(());
                        }
                        Err(e) => {
                            self.nb_recheck = false;
                            warn!("local NB change check: {e}; reconciling");
                            return Ok(());
                        }
                    }
                }
                open = watched(identity) => {
                    if !open {
                        return Err(failed("the local OVS database client stopped"));
                    }
                    return Ok(());
                }
            }
        }
    }

    fn desired_system(&self, exposures: &ExposureSet) -> Result<Rendered, PluginError> {
        let (cluster, announced) =
            render::render(&self.settings, &self.mappings, &self.facts, exposures);
        let kernel = self.base.desired_system(&announced)?;
        Ok(self.compose(cluster, kernel))
    }

    fn desired_system_shared(&self, exposures: &Arc<ExposureSet>) -> Result<Rendered, PluginError> {
        let (cluster, announced) = {
            // A panic in a render leaves a state the next render would build on: start again.
            let mut incremental = self.incremental.lock().unwrap_or_else(|e| {
                let mut guard = e.into_inner();
                *guard = Default::default();
                guard
            });
            incremental.render(&self.settings, &self.mappings, &self.facts, exposures)
        };
        // The announced set shares its IPs' map with the last one: the underlay renders the
        // IPs that changed.
        let kernel = self.base.desired_system_shared(&announced)?;
        Ok(self.compose(cluster, kernel))
    }
}

impl OvnClusterBackend {
    /// The kernel part's rendering with the cluster's rows, flows, FDB entries and reports.
    fn compose(&self, cluster: Rendered, mut out: Rendered) -> Rendered {
        for s in cluster.skipped {
            out.skip(s.row, s.reason);
        }
        let system = cluster.system;
        out.system.flows.extend(system.flows);
        out.system.fdb_entries.extend(system.fdb_entries);
        out.system
            .ownership
            .flow_cookies
            .extend(system.ownership.flow_cookies);
        if self.slot.get().is_some() {
            out.system.local_nb = system.local_nb;
        } else {
            out.skip(
                format!("local NB {}", self.remote()),
                "not connected (yet): its rows are written once the cluster leader answers",
            );
        }
        out
    }
}

inventory::submit! {
    BackendRegistration {
        name: NAME,
        description: "node-local OVN cluster: a local OVN router carries the traffic (HWOL/DPDK friendly); IPs announced from bgp-nic",
        factory: |ctx: &PluginContext| Ok(Box::new(OvnClusterBackend::from_context(ctx)?)),
    }
}
