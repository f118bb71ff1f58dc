//! The Southbound layer shared by the SB drivers (`ovn_bgp_driver`, `ovn_evpn_driver`,
//! `ovn_stretched_l2_bgp_driver`).
//!
//! - [`model`]: typed Southbound rows with incremental indexes.
//! - [`driver`]: the live SB driver (session, policy, computation, explain).
//! - [`feed`]: replica rows → the model, for the live feed and recorded snapshots alike.
//! - [`condition`]: which Port_Binding rows each driver monitors, as a policy.
//! - [`provider`]: bridge mappings, bridge wiring and the provider network of a datapath.
//! - [`replay`]: an SB driver fed by the replay engine instead of a Southbound client.
//! - [`session`]: the live feed (identity, Southbound client, condition convergence).

pub mod condition;
pub mod driver;
pub mod feed;
pub mod model;
pub mod provider;
pub mod replay;
pub mod session;
