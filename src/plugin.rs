//! The plugin host's contracts: drivers and exposure backends, registered with `inventory`.
//!
//! A driver watches OVSDB and answers "what must be exposed here?"; a backend answers "which kernel,
//! FRR and OVS objects realise that?". Neither applies anything: the host hands the backend's
//! [`DesiredSystem`] to the reconciler of the capability layer. A third party adds a plugin by
//! writing a type that implements one trait and an `inventory::submit!` of a registration (see
//! `examples/custom_driver.rs`).

use std::sync::Arc;

use async_trait::async_trait;

use crate::caps::Capabilities;
use crate::config::AgentConfig;
use crate::exposure::{ExposureSet, SkippedRow};
use crate::system::DesiredSystem;

/// Errors a plugin reports to the host. Each carries what an operator needs to act.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{what} is not implemented yet in this build")]
    NotImplemented { what: String },
    #[error("{plugin}: {message}")]
    Failed { plugin: String, message: String },
    #[error(transparent)]
    Capability(#[from] crate::caps::CapError),
}

/// What the host gives a plugin: the effective configuration, the capability handles and the
/// chassis identity.
#[derive(Clone)]
pub struct PluginContext {
    pub config: Arc<AgentConfig>,
    pub caps: Capabilities,
    /// Who this chassis is (system-id, hostname, bridge mappings, remotes), read once by the
    /// host for every plugin, on first use.
    pub identity: crate::ovn::identity::IdentitySource,
}

impl PluginContext {
    /// A context whose identity is read from `[DEFAULT] ovsdb_connection` when first asked for.
    pub fn new(config: Arc<AgentConfig>, caps: Capabilities) -> Self {
        let identity = crate::ovn::identity::IdentitySource::from_config(config.clone());
        Self {
            config,
            caps,
            identity,
        }
    }
}

/// How much changed since the last call to [`Driver::desired_exposures`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeScope {
    /// Rows changed; a reconcile of the exposures is due.
    Rows,
    /// The replica was re-downloaded or the local chassis was re-created: reconcile everything.
    Full,
}

/// A driver: turns its OVSDB replica into the set of exposures this chassis must have.
#[async_trait]
pub trait Driver: Send {
    /// Connect to the databases, register the monitors, and return once the first complete
    /// replica is in memory.
    async fn start(&mut self, ctx: &PluginContext) -> Result<(), PluginError>;

    /// Wait for the next change that affects exposures. Level-triggered: the host recomputes
    /// from the replica, so coalescing many notifications into one return is correct.
    ///
    /// Must be cancel-safe: the host drops this future when a timer or a signal fires first,
    /// so it may only await channel receives (or other cancel-safe waits) and apply what it
    /// received synchronously. Work that must not be cut in the middle (a
    /// `monitor_cond_change` round trip) goes in [`Driver::settle`].
    async fn changed(&mut self) -> Result<ChangeScope, PluginError>;

    /// Follow-up work after [`Driver::changed`] returned, which the host awaits to completion
    /// before anything else (never cancelled by a timer): e.g. sending a new monitor condition
    /// the changed rows call for. Errors are logged and the work is retried after the next
    /// change.
    async fn settle(&mut self) -> Result<(), PluginError> {
        Ok(())
    }

    /// The complete desired exposures, computed from the replica. Rows that cannot be used are
    /// recorded in [`ExposureSet::skipped`], never abort the computation.
    fn desired_exposures(&self) -> Result<ExposureSet, PluginError>;

    /// For `ovn-bgp-agent explain`: what the driver's rows say about `query` (an IP address or
    /// a port name/uuid) on this chassis: which rows mention it, which rule applied and which
    /// condition failed. One line per finding; empty when the driver has nothing to say.
    fn explain(&self, query: &ExplainQuery) -> Vec<String> {
        let _ = query;
        Vec::new()
    }
}

/// What `ovn-bgp-agent explain` asks about: an address or a row name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainQuery {
    /// The query as given.
    pub text: String,
    /// The query as an IP address, when it is one.
    pub ip: Option<std::net::IpAddr>,
}

impl ExplainQuery {
    pub fn new(text: &str) -> Self {
        let text = text.trim().to_owned();
        let ip = text.parse().ok();
        Self { text, ip }
    }
}

/// What a backend renders: the objects to reconcile, and what it could not realise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub system: DesiredSystem,
    /// Exposures, scopes or fields the backend cannot realise (an EVPN scope given to the
    /// underlay backend, a bridge without a routing table, ...): reported, never dropped
    /// silently. [`SkippedRow::table`] is [`crate::exposure::BACKEND`] for these.
    pub skipped: Vec<SkippedRow>,
    /// Record skipped items with [`Rendered::skip`], which keeps this index.
    #[doc(hidden)]
    pub skip_index: crate::exposure::ListIndex,
}

impl Rendered {
    pub fn skip(&mut self, row: impl Into<String>, reason: impl Into<String>) {
        let skipped = SkippedRow {
            table: crate::exposure::BACKEND.to_owned(),
            row: row.into(),
            reason: reason.into(),
        };
        self.skip_index.record(&mut self.skipped, skipped);
    }
}

/// An exposure backend: realises exposures as kernel, FRR and OVS objects.
#[async_trait]
pub trait ExposureBackend: Send {
    /// Prepare what the backend needs before the first reconcile (routing tables file, the
    /// router id from FRR, ...).
    async fn start(&mut self, ctx: &PluginContext) -> Result<(), PluginError>;

    /// Gather the facts about the system that rendering needs and only the system knows (bridge
    /// MACs, routing table numbers, FRR's router id). Called before every
    /// [`ExposureBackend::desired_system`]; cheap when nothing changed.
    async fn observe(&mut self, _exposures: &ExposureSet) -> Result<(), PluginError> {
        Ok(())
    }

    /// The objects that must exist for `exposures` (plus the base configuration: VRF, NIC, FRR
    /// leak configuration), with the scopes the reconciler owns, and what could not be
    /// realised.
    fn desired_system(&self, exposures: &ExposureSet) -> Result<Rendered, PluginError>;

    /// [`ExposureBackend::desired_system`] of exposures the host keeps after this call: a
    /// backend may hold on to them to render the next set as a delta (the underlay backend
    /// does). The default renders them in full.
    fn desired_system_shared(
        &self,
        exposures: &std::sync::Arc<ExposureSet>,
    ) -> Result<Rendered, PluginError> {
        self.desired_system(exposures)
    }

    /// Wait until something the backend owns outside the kernel changed behind its back (a
    /// row of a node-local OVN database edited by someone), so the host reconciles. Must be
    /// cancel-safe, like [`Driver::changed`]. The default never fires.
    async fn changed(&mut self) -> Result<(), PluginError> {
        std::future::pending().await
    }
}

pub type DriverFactory = fn(&PluginContext) -> Result<Box<dyn Driver>, PluginError>;
pub type BackendFactory = fn(&PluginContext) -> Result<Box<dyn ExposureBackend>, PluginError>;

/// A driver compiled into this binary, under its upstream name.
pub struct DriverRegistration {
    /// Upstream name, as in `[DEFAULT] driver`.
    pub name: &'static str,
    pub description: &'static str,
    /// Backend names (`[DEFAULT] exposing_method`) this driver can work with.
    pub supported_backends: &'static [&'static str],
    /// A realisation the driver always uses, whatever `exposing_method` says: upstream's EVPN
    /// driver ignores the option (its default is `underlay`), so `driver = ovn_evpn_driver`
    /// alone must get the EVPN realisation. `None`: chosen by `exposing_method`.
    pub own_backend: Option<&'static str>,
    pub factory: DriverFactory,
    /// The driver fed by the replay engine instead of an OVSDB client (`ovn-bgp-agent replay`,
    /// `tests/fixtures/replay/`); `None`: the driver cannot be replayed.
    pub replay: Option<crate::replay::ReplayFactory>,
}

/// An exposure backend compiled into this binary, under its upstream `exposing_method` name.
pub struct BackendRegistration {
    pub name: &'static str,
    pub description: &'static str,
    pub factory: BackendFactory,
}

impl std::fmt::Debug for DriverRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverRegistration")
            .field("name", &self.name)
            .field("supported_backends", &self.supported_backends)
            .field("own_backend", &self.own_backend)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for BackendRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendRegistration")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

inventory::collect!(DriverRegistration);
inventory::collect!(BackendRegistration);

/// Drivers in this build, sorted by name.
pub fn drivers() -> Vec<&'static DriverRegistration> {
    let mut all: Vec<_> = inventory::iter::<DriverRegistration>.into_iter().collect();
    all.sort_by_key(|r| r.name);
    all
}

/// Backends in this build, sorted by name.
pub fn backends() -> Vec<&'static BackendRegistration> {
    let mut all: Vec<_> = inventory::iter::<BackendRegistration>.into_iter().collect();
    all.sort_by_key(|r| r.name);
    all
}

/// Why a configured driver/backend pair cannot run in this build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("[DEFAULT] driver = {name}: no such driver in this build; available: {available}")]
    UnknownDriver { name: String, available: String },
    #[error(
        "[DEFAULT] exposing_method = {name}: no such exposure backend in this build; available: {available}"
    )]
    UnknownBackend { name: String, available: String },
    #[error(
        "driver {driver} does not support exposing_method = {backend}; it supports: {supported} \
         (upstream silently exposes nothing for this pair)"
    )]
    UnsupportedPair {
        driver: String,
        backend: String,
        supported: String,
    },
    #[error(
        "driver {driver} always uses the {backend} realisation (it ignores exposing_method), \
         but this build lacks it: build with the `{backend}` feature"
    )]
    OwnBackendMissing { driver: String, backend: String },
}

fn join_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "(none)".to_owned()
    } else {
        v.join(", ")
    }
}

/// Pick the driver and backend named in the configuration, or say exactly why not.
pub fn select(
    driver: &str,
    backend: &str,
) -> Result<(&'static DriverRegistration, &'static BackendRegistration), SelectionError> {
    let drivers = drivers();
    let backends = backends();
    let d =
        drivers
            .iter()
            .find(|r| r.name == driver)
            .ok_or_else(|| SelectionError::UnknownDriver {
                name: driver.to_owned(),
                available: join_names(drivers.iter().map(|r| r.name)),
            })?;
    if let Some(own) = d.own_backend {
        let b = backends.iter().find(|r| r.name == own).ok_or_else(|| {
            SelectionError::OwnBackendMissing {
                driver: driver.to_owned(),
                backend: own.to_owned(),
            }
        })?;
        return Ok((d, b));
    }
    let b = backends.iter().find(|r| r.name == backend).ok_or_else(|| {
        SelectionError::UnknownBackend {
            name: backend.to_owned(),
            available: join_names(backends.iter().map(|r| r.name)),
        }
    })?;
    if !d.supported_backends.contains(&backend) {
        return Err(SelectionError::UnsupportedPair {
            driver: driver.to_owned(),
            backend: backend.to_owned(),
            supported: join_names(
                d.supported_backends
                    .iter()
                    .copied()
                    .filter(|n| backends.iter().any(|r| r.name == *n)),
            ),
        });
    }
    Ok((d, b))
}
