//! The Northbound layer of the NB drivers (`nb_ovn_bgp_driver`): typed rows with incremental
//! indexes ([`model`]), replica changes → model ([`feed`]), the monitor-condition policy
//! ([`condition`]): which NB rows concern this chassis, as far as OVSDB conditions can say it,
//! the Southbound fallback for the gateways hosted here on OVN < 23.09 ([`gateways`]), and the
//! live feed ([`session`]).

pub mod condition;
pub mod feed;
pub mod gateways;
pub mod model;
pub mod session;
