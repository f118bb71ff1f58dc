//! OVS capability: cookie flows via `ovs-ofctl`, ports via `ovs-vsctl`.
//!
//! - [`ports`]: validated port names and the ofport table (one `ovs-vsctl` call for all ports).
//! - [`flows`]: canonical flow keys, dump parsing, `add-flows` batches.
//! - [`tools`]: running the two tools against a configurable OVS run directory.
//! - [`reconciler`]: desired flows vs. the bridges' dumps, one `ovs-ofctl` per bridge, and the
//!   periodic check that reinstalls flows after an OVS restart or `emer-reset`.

pub mod flows;
pub mod ports;
pub mod reconciler;
pub mod tools;

use std::process::ExitStatus;

pub use flows::{DesiredFlow, FlowKey};
pub use ports::{OfportState, OvsPortName, PortInfo, PortTable};
pub use reconciler::{DeferredFlow, FlowReport, OvsFlows, RejectedFlow};
pub use tools::{OvsOptions, OvsTools};

use crate::caps::process::RunError;

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
    #[error("bridge {bridge}: {source}")]
    Bridge {
        bridge: String,
        #[source]
        source: Box<OvsError>,
    },
    #[error("{summary}")]
    Incomplete { summary: String },
}
