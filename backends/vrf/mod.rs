//! `exposing_method = vrf`: EVPN type-5 per provider network: per-VNI VRF, bridge and VXLAN, routes in the VNI table.

use crate::backends::PendingBackend;
use crate::plugin::{BackendRegistration, PluginContext};

inventory::submit! {
    BackendRegistration {
        name: "vrf",
        description: "EVPN type-5 per provider network: per-VNI VRF, bridge and VXLAN, routes in the VNI table",
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingBackend { name: "vrf" })),
    }
}
