//! `nb_ovn_bgp_driver`: NB DB driver: like ovn_bgp_driver, read from the Northbound database.

use crate::drivers::PendingDriver;
use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "nb_ovn_bgp_driver",
        description: "NB DB driver: like ovn_bgp_driver, read from the Northbound database",
        supported_backends: &["underlay", "vrf", "ovn"],
        own_backend: None,
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingDriver { name: "nb_ovn_bgp_driver" })),
        replay: None,
    }
}
