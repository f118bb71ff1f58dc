//! OVS capability: cookie flows via `ovs-ofctl`, ports via `ovs-vsctl`, static FDB entries via
//! `ovs-appctl`.
//!
//! - `ports`: validated port names and the ofport table (one `ovs-vsctl` call for all ports).
//! - `bridge_ports`: the OVS ports the agent adds, owned by an `external_ids` marker.
//! - `fdb`: static FDB entries (`fdb/add`), owned by this process's memory.
//! - `flows`: canonical flow keys, dump parsing, `add-flows` batches.
//! - `tools`: running the two tools against a configurable OVS run directory.
//! - `route_table`: whether ovs-vswitchd follows the agent's routing tables (its version).
//! - `reconciler`: desired flows vs. the bridges' dumps, one `ovs-ofctl` per bridge, and the
//!   periodic check that reinstalls flows after an OVS restart or `emer-reset`.

pub(crate) mod bridge_ports;
pub(crate) mod fdb;
pub(crate) mod flows;
pub(crate) mod ports;
pub(crate) mod reconciler;
pub(crate) mod route_table;
pub(crate) mod tools;

use std::process::ExitStatus;

pub use bridge_ports::OvsPorts;
pub use fdb::OvsFdb;
pub use flows::{DesiredFlow, FlowKey};
pub use ports::{OfportState, OvsPortName, PortInfo, PortTable};
pub use reconciler::{DeferredFlow, FlowReport, OvsFlows, RejectedFlow};
pub use tools::{OvsOptions, OvsTools};

use crate::caps::process::RunError;
use crate::system::ChangeReport;

/// An OVS object class whose state can drift behind the agent's back (ovs-vswitchd restart,
/// an operator's `del-port`): the periodic OVS check ([`OvsFlows::spawn_flow_check`]) re-runs
/// its last reconcile.
#[async_trait::async_trait]
pub trait DriftCheck: Send + Sync {
    /// Object class, for logs.
    fn class(&self) -> &'static str;
    /// Re-applies the last desired state, if there was one.
    async fn check_now(&self) -> Option<ChangeReport>;
}

#[async_trait::async_trait]
impl DriftCheck for OvsPorts {
    fn class(&self) -> &'static str {
        bridge_ports::CLASS
    }
    async fn check_now(&self) -> Option<ChangeReport> {
        OvsPorts::check_now(self).await
    }
}

#[async_trait::async_trait]
impl DriftCheck for OvsFdb {
    fn class(&self) -> &'static str {
        fdb::CLASS
    }
    async fn check_now(&self) -> Option<ChangeReport> {
        OvsFdb::check_now(self).await
    }
}

/// Errors of the OVS capability, naming the tool invocation, bridge or port concerned.
#[derive(Debug, thiserror::Error)]
pub enum OvsError {
    #[error("OVS port name {name:?} is invalid: {why}")]
    InvalidPortName { name: String, why: &'static str },
    #[error("flow {field} {text:?} is invalid: {why}")]
    InvalidFlowText {
        field: &'static str,
        text: String,
        why: &'static str,
    },
    #[error("`{command}`: {source}")]
    Run {
        command: String,
        #[source]
        source: RunError,
    },
    #[error("`{command}` failed ({status}): {output}")]
    Failed {
        command: String,
        status: ExitStatus,
        output: String,
    },
    #[error("cannot parse {what}: {detail}")]
    Parse { what: &'static str, detail: String },
    #[error("{summary}")]
    Incomplete { summary: String },
}
