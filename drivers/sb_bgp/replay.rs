//! `ovn_bgp_driver` under the replay engine ([`crate::replay`]): the shared SB replay driver
//! ([`SbReplay`]) with the live driver's condition policy and [`super::live::cached_exposures`] (so
//! every case also exercises the per-port cache across its steps).

use super::live::{self, NAME};
use crate::ovn::sb::replay::SbReplay;
use crate::plugin::PluginError;
use crate::replay::{ReplayDriver, ReplayInput};

/// The replay hook of `ovn_bgp_driver`.
pub fn start(input: &ReplayInput) -> Result<Box<dyn ReplayDriver>, PluginError> {
    let tenant = live::tenant_options(&input.config);
    let config = input.config.clone();
    let policy = live::policy(&tenant);
    Ok(Box::new(SbReplay::new(
        NAME,
        input.identity.clone(),
        policy,
        live::cached_exposures(tenant, config),
    )))
}
