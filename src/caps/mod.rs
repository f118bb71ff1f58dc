//! The capability layer: the only code that talks to systems outside the agent.
//!
//! - [`ovsdb`]: OVSDB JSON-RPC client and in-memory replica (OVN NB/SB, local Open_vSwitch).
//! - [`netlink`]: links, addresses, rules, routes, neighbours, sysctls over one rtnetlink socket.
//! - [`frr`]: validated FRR configuration rendered with minijinja and applied through `vtysh`.
//! - [`ovs`]: cookie flows through `ovs-ofctl`, ports through `ovs-vsctl`, static FDB entries
//!   through `ovs-appctl`.
//!
//! Plugins receive these as handles in [`Capabilities`]; the reconciler behind
//! [`SystemReconciler`] is what applies a backend's [`DesiredSystem`].

pub mod frr;
pub mod local_nb;
pub mod netlink;
pub mod ovs;
pub mod ovsdb;
pub(crate) mod privilege;
pub mod process;
pub mod reconcile;
pub mod rt_tables;

use std::sync::Arc;

use async_trait::async_trait;

use crate::system::{ChangeReport, DesiredSystem};

/// Errors of the capability layer, naming the capability and the object concerned.
#[derive(Debug, thiserror::Error)]
pub enum CapError {
    #[error("{what} is not implemented yet in this build")]
    NotImplemented { what: String },
    #[error("{capability}: {message}")]
    Failed {
        capability: &'static str,
        message: String,
    },
    #[error("frr: {0}")]
    Frr(#[from] frr::FrrError),
    #[error("ovs: {0}")]
    Ovs(#[from] ovs::OvsError),
}

/// Applies a desired system state: dump each object class once, diff, apply the difference.
#[async_trait]
pub trait SystemReconciler: Send + Sync {
    async fn reconcile(&self, desired: &DesiredSystem) -> Result<ChangeReport, CapError>;

    /// [`Self::reconcile`] of a state the caller shares: a reconciler that applies the next
    /// state as a delta from this one keeps it without copying it.
    async fn reconcile_shared(
        &self,
        desired: &std::sync::Arc<DesiredSystem>,
    ) -> Result<ChangeReport, CapError> {
        self.reconcile(desired).await
    }

    /// Once each tool chain named in `chains` (those a reconcile left applying in the
    /// background, [`reconcile::chains_behind`]) has applied the last state submitted to it:
    /// what those applies did, their changes and errors, which no reconcile reported. Never
    /// resolves for a reconciler without background chains. Cancel-safe.
    async fn caught_up(&self, chains: Vec<String>) -> ChangeReport {
        let _ = chains;
        std::future::pending().await
    }
}

/// Keeps the agent's cookie flows on OVS bridges equal to `desired`; returns (added, removed).
#[async_trait]
pub trait FlowReconciler: Send + Sync {
    async fn reconcile_flows(
        &self,
        desired: &crate::system::ObjectSet<crate::system::PortFlowSpec>,
        owned_cookies: &std::collections::BTreeSet<u64>,
    ) -> Result<(usize, usize), CapError>;

    /// The problems of the last reconcile, whoever ran it (an event's or the periodic flow
    /// check's), `None` when it applied everything: reported again by a reconcile that leaves
    /// an unchanged flow set to the flow check, so that flows not applied stay in the report
    /// (and `status`) until they are.
    fn standing_error(&self) -> Option<String> {
        None
    }
}

/// Keeps the agent's OVS ports (those marked `external_ids:ovn-bgp-agent=owned`) equal to
/// `desired`; problems are errors of class `ovs_ports` in the report.
#[async_trait]
pub trait OvsPortReconciler: Send + Sync {
    async fn reconcile_ports(
        &self,
        desired: &std::collections::BTreeSet<crate::system::OvsPortSpec>,
    ) -> ChangeReport;
}

/// Keeps static OVS FDB entries equal to `desired`; problems are errors of class `fdb`.
#[async_trait]
pub trait FdbReconciler: Send + Sync {
    async fn reconcile_fdb(
        &self,
        desired: &std::collections::BTreeSet<crate::system::FdbEntrySpec>,
    ) -> ChangeReport;

    /// The problems of the last reconcile, whoever ran it (an event's or the periodic check's):
    /// reported again by a reconcile that leaves an unchanged set to the periodic check, so
    /// that an entry not applied stays in the report (and `status`) until it is.
    fn standing_errors(&self) -> Vec<crate::system::ObjectError> {
        Vec::new()
    }
}

/// Keeps FRR configuration snippets applied; returns how many were (re)applied.
#[async_trait]
pub trait FrrConfigurator: Send + Sync {
    async fn ensure(&self, snippets: &[String]) -> Result<usize, CapError>;
}

/// A reconciler that refuses to work: used until the real one is wired in, so nothing pretends
/// to have applied anything.
pub struct UnavailableReconciler;

#[async_trait]
impl SystemReconciler for UnavailableReconciler {
    async fn reconcile(&self, _desired: &DesiredSystem) -> Result<ChangeReport, CapError> {
        Err(CapError::NotImplemented {
            what: "the kernel/FRR/OVS reconciler".to_owned(),
        })
    }
}

/// Handles to the capabilities, cloned into every plugin.
#[derive(Clone)]
pub struct Capabilities {
    pub reconciler: Arc<dyn SystemReconciler>,
    /// The kernel capability on its own (kind probes, direct use by backends).
    pub netlink: Arc<netlink::NetlinkReconciler>,
    /// The OVS flow capability, when wired: the host runs its periodic flow check.
    pub ovs_flows: Option<Arc<ovs::reconciler::OvsFlows>>,
    /// The FRR capability, when wired: the host runs its restart watch.
    pub frr: Option<Arc<frr::configurator::VtyshConfigurator>>,
    /// The one vtysh runner (`[frr]`): plugins query FRR through it (router id, `show … json`).
    pub vtysh: frr::vtysh::Vtysh,
    /// The one OVS tool runner (`[ovs]`): plugins read OVS through it (bridge MACs, ofports).
    pub ovs_tools: ovs::tools::OvsTools,
    /// The node-local NB the reconciler writes (`exposing_method = ovn`), filled by that
    /// backend once connected.
    pub local_nb: local_nb::LocalNbSlot,
}

impl Capabilities {
    /// Capabilities for this build and configuration. Cheap: the netlink socket (in
    /// `[linux] netns`) is opened on first use. Flows and FRR are plugged in with
    /// [`Capabilities::with_flows_and_frr`] once their capabilities exist.
    pub fn new(config: &crate::config::AgentConfig) -> Self {
        let netlink = Arc::new(netlink::NetlinkReconciler::from_config(&config.linux));
        Self {
            reconciler: Arc::new(reconcile::CompositeReconciler::new(
                netlink.clone(),
                None,
                None,
            )),
            netlink,
            ovs_flows: None,
            frr: None,
            vtysh: frr::vtysh::Vtysh::new(frr::VtyshOptions::from_config(&config.frr)),
            ovs_tools: ovs::tools::OvsTools::new(ovs::tools::OvsOptions::from_config(&config.ovs)),
            local_nb: local_nb::LocalNbSlot::default(),
        }
    }

    /// Capabilities for tests: `reconciler` applies everything (a fake, usually); the other
    /// handles are built from `config` and opened only if used.
    pub fn new_test(
        config: &crate::config::AgentConfig,
        reconciler: Arc<dyn SystemReconciler>,
    ) -> Self {
        Self {
            reconciler,
            ..Self::new(config)
        }
    }

    /// Everything the agent itself uses: the kernel, OVS flows (`[ovs]`) and FRR (`[frr]`).
    /// The host runs the OVS flow check beside it ([`ovs::reconciler::OvsFlows::spawn_flow_check`]),
    /// so an unchanged flow set is not re-checked on every reconcile.
    pub fn for_agent(config: &crate::config::AgentConfig) -> Self {
        let netlink = Arc::new(netlink::NetlinkReconciler::from_config(&config.linux));
        let ovs_options = ovs::OvsOptions::from_config(&config.ovs);
        let ovs_ports = Arc::new(ovs::OvsPorts::new(ovs_options.clone()));
        let fdb = Arc::new(ovs::OvsFdb::new(ovs_options.clone()));
        // The periodic flow check (run by the host) also repairs ports and FDB entries: FDB
        // entries do not survive a vswitchd restart.
        let ovs_flows = Arc::new(
            ovs::reconciler::OvsFlows::new(ovs_options).with_drift_checks(vec![
                ovs_ports.clone() as Arc<dyn ovs::DriftCheck>,
                fdb.clone() as Arc<dyn ovs::DriftCheck>,
            ]),
        );
        let frr = Arc::new(frr::configurator::VtyshConfigurator::from_config(config));
        // The state file is read on the first reconcile and written only when the agent
        // creates or removes an FRR object: a backend without FRR objects never touches it.
        let frr_objects = Arc::new(frr::FrrObjects::from_config(config, frr.clone()));
        let local_nb = local_nb::LocalNbSlot::default();
        let composite = reconcile::CompositeReconciler::new(
            netlink.clone(),
            Some(ovs_flows.clone() as Arc<dyn FlowReconciler>),
            Some(frr.clone() as Arc<dyn FrrConfigurator>),
        )
        .with_frr_objects(frr_objects)
        .with_local_nb_slot(local_nb.clone())
        .with_ovs_ports_and_fdb(
            Some(ovs_ports as Arc<dyn OvsPortReconciler>),
            Some(fdb as Arc<dyn FdbReconciler>),
        )
        .with_flow_check_running()
        .with_background_tools(reconcile::AGENT_TOOL_WAIT);
        Self {
            reconciler: Arc::new(composite),
            netlink,
            vtysh: frr.vtysh().clone(),
            ovs_tools: ovs_flows.tools().clone(),
            ovs_flows: Some(ovs_flows),
            frr: Some(frr),
            local_nb,
        }
    }

    /// The same kernel capability, with flow and FRR reconcilers.
    pub fn with_flows_and_frr(
        self,
        flows: Option<Arc<dyn FlowReconciler>>,
        frr: Option<Arc<dyn FrrConfigurator>>,
    ) -> Self {
        Self {
            reconciler: Arc::new(reconcile::CompositeReconciler::new(
                self.netlink.clone(),
                flows,
                frr,
            )),
            netlink: self.netlink,
            ovs_flows: self.ovs_flows,
            frr: self.frr,
            vtysh: self.vtysh,
            ovs_tools: self.ovs_tools,
            local_nb: self.local_nb,
        }
    }
}
