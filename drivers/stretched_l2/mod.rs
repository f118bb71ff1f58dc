//! `ovn_stretched_l2_bgp_driver`: SB DB driver: tenant subnets of every router routed via their gateway port (stretched L2).

use crate::drivers::PendingDriver;
use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_stretched_l2_bgp_driver",
        description: "SB DB driver: tenant subnets of every router routed via their gateway port (stretched L2)",
        supported_backends: &["underlay"],
        own_backend: None,
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingDriver { name: "ovn_stretched_l2_bgp_driver" })),
        replay: None,
    }
}
