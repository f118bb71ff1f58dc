//! Exposure backends: one folder and one cargo feature each, registered under their upstream
//! `exposing_method` names.
//!
//! To add one: create `backends/<name>/mod.rs` with a type implementing
//! [`crate::plugin::ExposureBackend`] and an `inventory::submit!` of a
//! [`crate::plugin::BackendRegistration`], add the module below and a feature in `Cargo.toml`.

use async_trait::async_trait;

use crate::exposure::ExposureSet;
use crate::plugin::{ExposureBackend, PluginContext, PluginError, Rendered};

// The delta renders' state, whose objects leave with their last producer: the underlay's (also
// the `ovn` backend's kernel part) and the vrf backend's.
#[cfg(any(feature = "underlay", feature = "ovn_cluster", feature = "vrf"))]
pub(crate) mod counted;
#[cfg(feature = "ovn_cluster")]
pub mod ovn_cluster;
// The `ovn` backend announces its IPs from bgp-nic with the underlay backend's kernel part.
#[cfg(any(feature = "underlay", feature = "ovn_cluster"))]
pub mod underlay;
#[cfg(feature = "vrf")]
pub mod vrf;

/// A backend registered by name whose logic has not landed yet: it refuses to start.
pub struct PendingBackend {
    pub name: &'static str,
}

impl PendingBackend {
    fn not_implemented(&self) -> PluginError {
        PluginError::NotImplemented {
            what: format!("exposure backend {}", self.name),
        }
    }
}

#[async_trait]
impl ExposureBackend for PendingBackend {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        Err(self.not_implemented())
    }

    fn desired_system(&self, _exposures: &ExposureSet) -> Result<Rendered, PluginError> {
        Err(self.not_implemented())
    }
}
