//! `ovn_bgp_driver`: SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this
//! chassis (upstream-behaviour.md §1.1).
//!
//! - [`compute`]: model → [`crate::exposure::ExposureSet`] for this chassis.
//! - [`live`]: the driver: the shared Southbound session ([`crate::ovn::sb`]) under the
//!   local-chassis condition policy.
//! - [`model`], [`feed`]: re-exports of [`crate::ovn::sb::model`] and [`crate::ovn::sb::feed`].

pub mod compute;
pub(crate) mod explain;
pub mod feed;
mod fips;
pub mod live;
pub mod model;
pub mod replay;

use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_bgp_driver",
        description: "SB DB driver: VM, FIP, router gateway, tenant subnet and LB VIP IPs of this chassis",
        supported_backends: &["underlay"],
        own_backend: None,
        factory: |ctx: &PluginContext| Ok(Box::new(live::driver(ctx))),
        replay: Some(replay::start),
    }
}
