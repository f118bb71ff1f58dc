//! `ovn_bgp_driver`: SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this
//! chassis (upstream-behaviour.md §1.1).
//!
//! - [`model`]: typed Southbound rows with incremental indexes.
//! - [`compute`]: model → [`crate::exposure::ExposureSet`] for this chassis.
//! - [`feed`]: replica rows → the model, for the live feed and recorded snapshots alike.
//! - [`live`]: the OVSDB feed (local Open_vSwitch + conditional Southbound monitor).

pub mod compute;
pub mod feed;
pub mod live;
pub mod model;

use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_bgp_driver",
        description: "SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this chassis",
        supported_backends: &["underlay"],
        own_backend: None,
        factory: |ctx: &PluginContext| Ok(Box::new(live::SbBgpDriver::new(ctx))),
    }
}
