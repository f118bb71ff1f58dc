//! The Southbound feed now lives in the shared OVN layer ([`crate::ovn::sb::feed`]), for every
//! SB driver; re-exported here for the SB BGP driver's modules and tests.

pub use crate::ovn::sb::feed::*;
