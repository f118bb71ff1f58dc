//! The Southbound model now lives in the shared OVN layer ([`crate::ovn::sb::model`]), for
//! every SB driver; re-exported here for the SB BGP driver's modules.

pub use crate::ovn::sb::model::*;
