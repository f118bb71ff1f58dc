//! `ovn_stretched_l2_bgp_driver` under the replay engine ([`crate::replay`]): the shared SB
//! replay driver ([`SbReplay`]) with the live driver's [`AllGateways`] policy and
//! its cached [`super::compute::compute`].

use super::compute::StretchedOptions;
use super::live::{NAME, cached_routes};
use crate::ovn::sb::condition::AllGateways;
use crate::ovn::sb::replay::SbReplay;
use crate::plugin::PluginError;
use crate::replay::{ReplayDriver, ReplayInput};

/// The replay hook of `ovn_stretched_l2_bgp_driver`.
pub fn start(input: &ReplayInput) -> Result<Box<dyn ReplayDriver>, PluginError> {
    let options = StretchedOptions::from_config(&input.config);
    Ok(Box::new(SbReplay::new(
        NAME,
        input.identity.clone(),
        AllGateways,
        cached_routes(options),
    )))
}
