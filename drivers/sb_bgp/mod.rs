//! `ovn_bgp_driver`: SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this chassis.

use crate::drivers::PendingDriver;
use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_bgp_driver",
        description: "SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this chassis",
        supported_backends: &["underlay"],
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingDriver { name: "ovn_bgp_driver" })),
    }
}
