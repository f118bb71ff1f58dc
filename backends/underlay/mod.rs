//! `exposing_method = underlay`: IPs on the bgp-nic dummy in the bgp-vrf VRF, leaked to the
//! default BGP instance; per-bridge tables, rules and routes.
//!
//! - [`render`]: exposures → desired kernel/OVS objects (pure).
//!
//! The system-facing half (table allocation, bridge MACs, FRR) lands with the kernel/FRR/OVS
//! capabilities; until then the registered backend refuses to start rather than pretend.

pub mod render;

use crate::backends::PendingBackend;
use crate::plugin::{BackendRegistration, PluginContext};

inventory::submit! {
    BackendRegistration {
        name: "underlay",
        description: "IPs on the bgp-nic dummy in the bgp-vrf VRF, leaked to the default BGP instance; per-bridge tables, rules and routes",
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingBackend { name: "underlay" })),
    }
}
