//! `ovn_bgp_driver`: SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this
//! chassis (upstream-behaviour.md §1.1).
//!
//! - [`model`]: typed Southbound rows with incremental indexes.
//! - [`compute`]: model → [`crate::exposure::ExposureSet`] for this chassis.
//! - [`rows`]: RFC 7047 JSON rows → typed rows (recorded snapshots).
//! - [`live`]: the OVSDB feed (local Open_vSwitch + conditional Southbound monitor).

pub mod compute;
pub mod live;
pub mod model;
pub mod rows;

use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_bgp_driver",
        description: "SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this chassis",
        supported_backends: &["underlay"],
        factory: |ctx: &PluginContext| Ok(Box::new(live::SbBgpDriver::new(ctx))),
    }
}
