//! Drivers: one folder and one cargo feature each, registered under their upstream names.
//!
//! To add one: create `drivers/<name>/mod.rs` with a type implementing
//! [`crate::plugin::Driver`] and an `inventory::submit!` of a [`crate::plugin::DriverRegistration`],
//! add `#[cfg(feature = "<name>")] pub mod <name>;` below and a feature in `Cargo.toml`.

#[cfg(feature = "evpn")]
pub mod evpn;
#[cfg(feature = "nb_bgp")]
pub mod nb_bgp;
#[cfg(feature = "sb_bgp")]
pub mod sb_bgp;
#[cfg(feature = "stretched_l2")]
pub mod stretched_l2;
