//! ovn-bgp-agent: exposes OpenStack/OVN workloads over BGP.
//!
//! Layout: `src/` holds the host ([`host`], [`cli`]), the contracts ([`plugin`], [`exposure`],
//! [`system`]), the configuration ([`config`]), the capability layer ([`caps`]) and the OVN layer
//! shared by the drivers ([`ovn`]). Drivers live in `drivers/`, exposure backends in
//! `backends/`, one folder and one cargo feature each.

#[cfg(feature = "mimalloc")]
pub mod alloc;
pub mod caps;
pub mod cli;
pub mod config;
pub mod control;
pub mod control_cli;
pub mod doctor;
pub mod exposure;
pub(crate) mod hash;
pub mod host;
pub(crate) mod logging;
pub(crate) mod notify;
pub mod ovn;
pub mod plugin;
pub(crate) mod policy;
pub mod replay;
pub mod system;
pub mod telemetry;
pub mod types;

#[path = "../drivers/mod.rs"]
pub mod drivers;

#[path = "../backends/mod.rs"]
pub mod backends;
