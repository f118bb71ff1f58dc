//! `ovn_bgp_driver`: SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this
//! chassis (upstream-behaviour.md §1.1).
//!
//! - [`model`]: typed Southbound rows with incremental indexes.
//! - [`compute`]: model → [`crate::exposure::ExposureSet`] for this chassis.
//! - [`rows`]: RFC 7047 JSON rows → typed rows (recorded snapshots).
//!
//! The live OVSDB feed lands with the OVSDB capability; until then the registered driver refuses
//! to start rather than pretend.

pub mod compute;
pub mod model;
pub mod rows;

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
