//! `exposing_method = ovn`: node-local OVN cluster: a local OVN router carries the traffic (HWOL/DPDK friendly).

use crate::backends::PendingBackend;
use crate::plugin::{BackendRegistration, PluginContext};

inventory::submit! {
    BackendRegistration {
        name: "ovn",
        description: "node-local OVN cluster: a local OVN router carries the traffic (HWOL/DPDK friendly)",
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingBackend { name: "ovn" })),
    }
}
