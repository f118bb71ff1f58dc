//! `ovn_stretched_l2_bgp_driver`: SB DB driver: tenant subnets of every router routed via
//! their gateway port (stretched L2, upstream-behaviour.md §1.4).
//!
//! - [`compute`]: model → [`crate::exposure::ExposureSet`]: routes, not addresses, the same on
//!   every chassis (every gateway of the cloud).
//! - [`live`]: the driver: the shared Southbound session ([`crate::ovn::sb`]) under the
//!   [`crate::ovn::sb::condition::AllGateways`] condition policy.
//! - [`replay`]: the same pieces fed by the replay engine.

pub mod compute;
pub(crate) mod explain;
mod layout;
pub mod live;
pub mod replay;

use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_stretched_l2_bgp_driver",
        description: "SB DB driver: tenant subnets of every router routed via their gateway port (stretched L2)",
        supported_backends: &["underlay"],
        own_backend: None,
        factory: |ctx: &PluginContext| Ok(Box::new(live::driver(ctx))),
        replay: Some(replay::start),
    }
}
