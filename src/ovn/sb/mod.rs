//! The Southbound layer shared by the SB drivers (`ovn_bgp_driver`, `ovn_evpn_driver`,
//! `ovn_stretched_l2_bgp_driver`).
//!
//! - [`model`]: typed Southbound rows with incremental indexes.
//! - [`feed`]: replica rows → the model, for the live feed and recorded snapshots alike.
//! - [`condition`]: which Port_Binding rows each driver monitors, as a policy.
//! - [`session`]: the live feed (identity, Southbound client, condition convergence).

pub mod condition;
pub mod feed;
pub mod model;
pub mod session;
