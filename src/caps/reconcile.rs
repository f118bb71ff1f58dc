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

use std::sync::Arc;

use async_trait::async_trait;

use super::netlink::NetlinkReconciler;
use super::{
    CapError, FdbReconciler, FlowReconciler, FrrConfigurator, OvsPortReconciler, SystemReconciler,
};
use crate::system::{ChangeReport, DesiredSystem};

pub const FLOWS: &str = "flows";
pub const FRR: &str = "frr";
pub const FRR_OBJECTS: &str = super::frr::objects::CLASS;
pub const LOCAL_NB: &str = super::local_nb::CLASS;
pub const OVS_PORTS: &str = "ovs_ports";
pub const FDB: &str = "fdb";

pub struct CompositeReconciler {
    kernel: Arc<NetlinkReconciler>,
    flows: Option<Arc<dyn FlowReconciler>>,
    frr: Option<Arc<dyn FrrConfigurator>>,
    frr_objects: Option<Arc<super::frr::FrrObjects>>,
    local_nb: Option<Arc<super::local_nb::LocalNb>>,
    ovs_ports: Option<Arc<dyn OvsPortReconciler>>,
    fdb: Option<Arc<dyn FdbReconciler>>,
    /// When a periodic flow check runs beside this reconciler (the agent's case), a flow set
    /// equal to the last one applied without error is not re-checked on every reconcile: that
    /// saves an `ovs-vsctl` and an `ovs-ofctl dump-flows` per bridge on every OVSDB event, and
    /// drift (an OVS restart, `emer-reset`) is the flow check's job.
    skip_unchanged_flows: bool,
    last_flows: std::sync::Mutex<Option<FlowState>>,
}

type FlowState = (
    std::collections::BTreeSet<crate::system::PortFlowSpec>,
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
            flows,
            frr,
            frr_objects: None,
            local_nb: None,
            ovs_ports: None,
            fdb: None,
            skip_unchanged_flows: false,
            last_flows: std::sync::Mutex::new(None),
        }
    }

    /// Adds the FRR object class ([`DesiredSystem::frr_objects`]).
    pub fn with_frr_objects(mut self, objects: Arc<super::frr::FrrObjects>) -> Self {
        self.frr_objects = Some(objects);
        self
    }

    /// Adds the node-local NB class ([`DesiredSystem::local_nb`]).
    pub fn with_local_nb(mut self, local_nb: Arc<super::local_nb::LocalNb>) -> Self {
        self.local_nb = Some(local_nb);
        self
    }

    /// Plugs in the OVS port and static FDB entry classes.
    pub fn with_ovs_ports_and_fdb(
        mut self,
        ovs_ports: Option<Arc<dyn OvsPortReconciler>>,
        fdb: Option<Arc<dyn FdbReconciler>>,
    ) -> Self {
        self.ovs_ports = ovs_ports;
        self.fdb = fdb;
        self
    }

    /// See `CompositeReconciler::skip_unchanged_flows`: only with a periodic flow check.
    pub fn with_flow_check_running(mut self) -> Self {
        self.skip_unchanged_flows = true;
        self
    }

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

    fn remember_flows(&self, desired: Option<&DesiredSystem>) {
        *self.last_flows.lock().unwrap_or_else(|e| e.into_inner()) =
            desired.map(|d| (d.flows.clone(), d.ownership.flow_cookies.clone()));
    }

    pub fn kernel(&self) -> &Arc<NetlinkReconciler> {
        &self.kernel
    }
}

#[async_trait]
impl SystemReconciler for CompositeReconciler {
    async fn reconcile(&self, desired: &DesiredSystem) -> Result<ChangeReport, CapError> {
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
        match self.kernel.reconcile(desired).await {
            Ok(r) => report.merge(r),
            Err(e) => report.error("kernel", "netlink reconcile", e),
        }

        match &self.flows {
            Some(_) if self.flows_unchanged(desired) => {}
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
                    self.remember_flows(None);
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
            Some(fdb) => report.merge(fdb.reconcile_fdb(&desired.fdb_entries).await),
            None if !desired.fdb_entries.is_empty() => report.error(
                FDB,
                format!("{} FDB entries", desired.fdb_entries.len()),
                "not configured",
            ),
            None => {}
        }

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

        match (&self.local_nb, &desired.local_nb) {
            (Some(nb), Some(rows)) => report.merge(nb.reconcile(rows).await),
            (None, Some(rows)) if !rows.rows.is_empty() => report.error(
                LOCAL_NB,
                format!("{} local NB rows", rows.rows.len()),
                "not configured",
            ),
            _ => {}
        }
        Ok(report)
    }
}
