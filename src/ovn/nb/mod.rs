//! The Northbound layer of the NB drivers (`nb_ovn_bgp_driver`): typed rows with incremental
//! indexes ([`model`]), replica changes → model ([`feed`]) and the monitor-condition policy
//! ([`condition`]): which NB rows concern this chassis, as far as OVSDB conditions can say it.

pub mod condition;
pub mod feed;
pub mod model;
