//! `ovn_evpn_driver`: SB DB EVPN driver: per-VNI VRFs for router gateways annotated by
//! networking-bgpvpn (upstream-behaviour.md §1.3).
//!
//! - [`compute`]: model → [`crate::exposure::ExposureSet`] (one `evpn:<vni>` scope per gateway
//!   bound here with valid `neutron_bgpvpn:vni`/`:as`).
//! - [`live`]: the driver: the shared Southbound session ([`crate::ovn::sb`]) under the
//!   [`crate::ovn::sb::condition::EvpnGateways`] condition policy.
//! - [`replay`]: the same pieces fed by the replay engine.

pub mod compute;
pub(crate) mod explain;
pub mod live;
pub mod replay;

use crate::plugin::{DriverRegistration, PluginContext};

inventory::submit! {
    DriverRegistration {
        name: "ovn_evpn_driver",
        description: "SB DB EVPN driver: per-VNI VRFs for router gateways annotated by networking-bgpvpn",
        supported_backends: &["vrf"],
        // Upstream ignores exposing_method for this driver (its default is underlay): the
        // EVPN realisation is always used.
        own_backend: Some("vrf"),
        factory: |ctx: &PluginContext| Ok(Box::new(live::driver(ctx))),
        replay: Some(replay::start),
    }
}
