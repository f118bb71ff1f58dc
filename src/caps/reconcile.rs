//! The composite reconciler behind [`SystemReconciler`]: the kernel part through netlink, then
//! the flows, then FRR, each class reported in one [`ChangeReport`].
//!
//! Order matters: links must exist before OVS ports and FRR interfaces refer to them. A class
//! that fails as a whole (FRR unreachable, OVS down) is reported as an error of that class; the
//! other classes are still applied.

use std::sync::Arc;

use async_trait::async_trait;

use super::netlink::{NetlinkError, NetlinkReconciler};
use super::{CapError, FlowReconciler, FrrConfigurator, SystemReconciler};
use crate::system::{ChangeReport, DesiredSystem};

pub const FLOWS: &str = "flows";
pub const FRR: &str = "frr";

pub struct CompositeReconciler {
    kernel: Arc<NetlinkReconciler>,
    flows: Option<Arc<dyn FlowReconciler>>,
    frr: Option<Arc<dyn FrrConfigurator>>,
}

impl CompositeReconciler {
    pub fn new(
        kernel: Arc<NetlinkReconciler>,
        flows: Option<Arc<dyn FlowReconciler>>,
        frr: Option<Arc<dyn FrrConfigurator>>,
    ) -> Self {
        Self { kernel, flows, frr }
    }

    pub fn kernel(&self) -> &Arc<NetlinkReconciler> {
        &self.kernel
    }
}

#[async_trait]
impl SystemReconciler for CompositeReconciler {
    async fn reconcile(&self, desired: &DesiredSystem) -> Result<ChangeReport, CapError> {
        let mut report = match self.kernel.reconcile(desired).await {
            Ok(r) => r,
            // Nothing was applied: refuse the whole state so flows/FRR stay consistent with it.
            Err(e @ NetlinkError::Rejected { .. }) => return Err(e.into()),
            Err(e) => {
                let mut r = ChangeReport::default();
                r.error("kernel", "netlink reconcile", e);
                r
            }
        };

        match &self.flows {
            Some(flows) => match flows
                .reconcile_flows(&desired.flows, &desired.ownership.flow_cookies)
                .await
            {
                Ok((added, removed)) => {
                    report.count_added(FLOWS, added);
                    report.count_removed(FLOWS, removed);
                }
                Err(e) => report.error(FLOWS, "reconcile flows", e),
            },
            None if !desired.flows.is_empty() => report.error(
                FLOWS,
                format!("{} flows", desired.flows.len()),
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
        Ok(report)
    }
}
