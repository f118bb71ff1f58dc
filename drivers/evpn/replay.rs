//! `ovn_evpn_driver` under the replay engine ([`crate::replay`]): the shared SB replay driver
//! ([`SbReplay`]) with the live driver's [`EvpnGateways`] policy and
//! `live::cached_exposures` (so every case also exercises the per-gateway cache across
//! its steps).

use super::live::{self, NAME};
use crate::ovn::sb::condition::EvpnGateways;
use crate::ovn::sb::replay::SbReplay;
use crate::plugin::PluginError;
use crate::replay::{ReplayDriver, ReplayInput};

/// The replay hook of `ovn_evpn_driver`.
pub fn start(input: &ReplayInput) -> Result<Box<dyn ReplayDriver>, PluginError> {
    Ok(Box::new(SbReplay::new(
        NAME,
        input.identity.clone(),
        EvpnGateways,
        live::cached_exposures(),
    )))
}
