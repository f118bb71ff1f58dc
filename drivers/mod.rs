//! Drivers: one folder and one cargo feature each, registered under their upstream names.
//!
//! To add one: create `drivers/<name>/mod.rs` with a type implementing
//! [`crate::plugin::Driver`] and an `inventory::submit!` of a [`crate::plugin::DriverRegistration`],
//! add `#[cfg(feature = "<name>")] pub mod <name>;` below and a feature in `Cargo.toml`.

use async_trait::async_trait;

use crate::exposure::ExposureSet;
use crate::plugin::{ChangeScope, Driver, PluginContext, PluginError};

#[cfg(feature = "evpn")]
pub mod evpn;
#[cfg(feature = "nb_bgp")]
pub mod nb_bgp;
#[cfg(feature = "sb_bgp")]
pub mod sb_bgp;
#[cfg(feature = "stretched_l2")]
pub mod stretched_l2;

/// A driver registered by name whose logic has not landed yet: it refuses to start, so the agent
/// never runs pretending to expose something.
pub struct PendingDriver {
    pub name: &'static str,
}

impl PendingDriver {
    fn not_implemented(&self) -> PluginError {
        PluginError::NotImplemented {
            what: format!("driver {}", self.name),
        }
    }
}

#[async_trait]
impl Driver for PendingDriver {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        Err(self.not_implemented())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        Err(self.not_implemented())
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        Err(self.not_implemented())
    }
}
