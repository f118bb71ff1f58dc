//! `exposing_method = underlay`: IPs on the bgp-nic dummy in the bgp-vrf VRF, leaked to the
//! default BGP instance; per-bridge tables, rules and routes.
//!
//! - [`render`]: exposures → desired kernel/OVS objects (pure, snapshot-tested).
//! - `UnderlayBackend`: gathers the facts rendering needs (routing table numbers from the
//!   rt_tables file, bridge MACs from OVS, FRR's router id) and adds the FRR base configuration.
//!
//! The facts that take a tool run (FRR's router id through `vtysh`, bridge MACs through
//! `ovs-vsctl`) are fetched in background tasks: `observe` never waits for a tool, so a hung
//! `vtysh` or `ovs-vsctl` never holds back the kernel part of a reconcile. When a fetch brings
//! something new, [`ExposureBackend::changed`] fires and the host reconciles again.

pub mod incremental;
mod merge;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use tokio::time::Instant;

use async_trait::async_trait;
use tracing::{debug, warn};

use crate::caps::frr::base::leak_vrf_from_config;
use crate::caps::frr::templates::{FrrSnippet, NicRedistribute};
use crate::caps::frr::values::Redistribute;
use crate::caps::frr::vtysh::Vtysh;
use crate::caps::ovs::tools::OvsTools;
use crate::caps::rt_tables::RtTables;
use crate::config::DefaultSection;
use crate::exposure::{ExposureSet, RealisationNeed};
#[cfg(feature = "underlay")]
use crate::plugin::BackendRegistration;
use crate::plugin::{ExposureBackend, PluginContext, PluginError, Rendered};
use crate::types::{InterfaceName, MacAddr};
use render::{Facts, UnderlaySettings, VrfKind};

const NAME: &str = "underlay";
/// Bridge MACs can change when OVS recreates a bridge's internal port; re-read them this often.
const BRIDGE_MAC_MAX_AGE: Duration = Duration::from_secs(10);
/// How long `start` waits for the FRR base configuration before the first reconcile.
const FIRST_RENDER_WAIT: Duration = Duration::from_millis(500);

fn failed(message: impl Into<String>) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: message.into(),
    }
}

pub(crate) struct UnderlayBackend {
    settings: UnderlaySettings,
    default: DefaultSection,
    rt_tables: RtTables,
    ovs: OvsTools,
    vtysh: Vtysh,
    facts: Facts,
    /// Bridges whose table numbers are in `facts.tables`.
    known_bridges: BTreeSet<InterfaceName>,
    macs_read_at: Option<Instant>,
    /// Rendered FRR base configuration; empty until FRR answered (router id discovery).
    frr_snippets: Vec<String>,
    /// The redistribute sources `frr_snippets` were rendered with.
    redistribute: BTreeSet<Redistribute>,
    /// The FRR base configuration being rendered (it may ask FRR for its router id).
    frr_render: Option<JoinHandle<Result<Vec<String>, PluginError>>>,
    /// Bridge MACs being read from OVS.
    mac_read: Option<JoinHandle<Result<BTreeMap<InterfaceName, MacAddr>, String>>>,
    /// The last rendering, updated by the next exposure set's differences (issue 17).
    incremental: std::sync::Mutex<incremental::IncrementalRender>,
}

impl UnderlayBackend {
    /// Also the kernel and FRR part of the `ovn` backend (`backends/ovn_cluster`).
    pub(crate) fn from_context(ctx: &PluginContext) -> Result<Self, PluginError> {
        let config = &ctx.config;
        Ok(Self {
            settings: UnderlaySettings::from_config(config).map_err(failed)?,
            default: config.default.clone(),
            rt_tables: RtTables::from_config(config),
            ovs: ctx.caps.ovs_tools.clone(),
            vtysh: ctx.caps.vtysh.clone(),
            facts: Facts::default(),
            known_bridges: BTreeSet::new(),
            macs_read_at: None,
            frr_snippets: Vec::new(),
            redistribute: BTreeSet::from([Redistribute::Connected]),
            frr_render: None,
            mac_read: None,
            incremental: Default::default(),
        })
    }

    /// Starts rendering the FRR base configuration in the background, unless it is rendered or
    /// being rendered.
    fn start_frr_render(&mut self) {
        if !self.frr_snippets.is_empty() || self.frr_render.is_some() {
            return;
        }
        let (default, vtysh) = (self.default.clone(), self.vtysh.clone());
        let (bridge_stand_in, nic) = (
            self.settings.vrf_kind == VrfKind::Bridge,
            self.settings.bgp_nic.clone(),
        );
        let redistribute = self.redistribute.clone();
        self.frr_render = Some(tokio::spawn(async move {
            render_frr(
                &default,
                redistribute,
                &vtysh,
                bridge_stand_in.then_some(nic),
            )
            .await
        }));
    }

    /// Takes a finished FRR render; true if it brought the snippets.
    fn take_frr_render(
        &mut self,
        result: Result<Result<Vec<String>, PluginError>, String>,
    ) -> bool {
        match result.map_err(failed).and_then(|r| r) {
            Ok(snippets) => {
                self.frr_snippets = snippets;
                true
            }
            Err(e) => {
                warn!("{e}; retrying at the next reconcile");
                false
            }
        }
    }

    fn refresh_tables(&mut self, bridges: &BTreeSet<InterfaceName>) {
        if *bridges == self.known_bridges {
            return;
        }
        let list: Vec<InterfaceName> = bridges.iter().cloned().collect();
        match self.rt_tables.ensure(&list) {
            Ok(tables) => {
                self.facts.tables.clear();
                for (bridge, table) in tables {
                    match table {
                        Ok(n) => {
                            self.facts.tables.insert(bridge, n);
                        }
                        Err(e) => warn!(bridge = %bridge, "no routing table: {e}"),
                    }
                }
                self.known_bridges = bridges.clone();
            }
            Err(e) => warn!(path = %self.rt_tables.path().display(), "rt_tables: {e}"),
        }
    }

    /// Starts reading the bridges' MACs in the background when they are stale or incomplete.
    fn refresh_bridge_macs(&mut self, bridges: &BTreeSet<InterfaceName>) {
        let fresh = self
            .macs_read_at
            .is_some_and(|t| t.elapsed() < BRIDGE_MAC_MAX_AGE);
        let complete = bridges
            .iter()
            .all(|b| self.facts.bridge_macs.contains_key(b));
        if (fresh && complete) || bridges.is_empty() || self.mac_read.is_some() {
            return;
        }
        let (ovs, bridges) = (self.ovs.clone(), bridges.clone());
        self.mac_read = Some(tokio::spawn(async move {
            let list: Vec<&InterfaceName> = bridges.iter().collect();
            let ports = ovs
                .port_table_for(&list, &[])
                .await
                .map_err(|e| e.to_string())?;
            let mut macs = BTreeMap::new();
            for bridge in &bridges {
                match ports.bridge_mac(bridge.as_str()) {
                    Some(mac) => {
                        macs.insert(bridge.clone(), mac);
                    }
                    None => debug!(bridge = %bridge, "bridge has no MAC in OVS (yet)"),
                }
            }
            Ok(macs)
        }));
    }

    /// Takes a finished MAC read; true if the MACs differ from those rendered with.
    fn take_mac_read(
        &mut self,
        result: Result<Result<BTreeMap<InterfaceName, MacAddr>, String>, String>,
    ) -> bool {
        match result.and_then(|r| r) {
            Ok(macs) => {
                self.macs_read_at = Some(Instant::now());
                let new = macs != self.facts.bridge_macs;
                self.facts.bridge_macs = macs;
                new
            }
            Err(e) => {
                warn!("reading bridge MACs from OVS: {e}");
                false
            }
        }
    }
}

/// The FRR base configuration: the leak VRF (A1-A3), plus, where `bgp-vrf` is only a bridge
/// stand-in (`bridge_nic`: the NIC), a route-map redistribution of bgp-nic in the default
/// instance.
async fn render_frr(
    default: &DefaultSection,
    redistribute: BTreeSet<Redistribute>,
    vtysh: &Vtysh,
    bridge_nic: Option<InterfaceName>,
) -> Result<Vec<String>, PluginError> {
    let leak = leak_vrf_from_config(default, redistribute.clone(), vtysh)
        .await
        .map_err(|e| failed(format!("FRR base configuration: {e}")))?;
    let mut snippets = vec![
        leak.render()
            .map_err(|e| failed(format!("FRR leak template: {e}")))?,
    ];
    if let Some(nic) = bridge_nic {
        let nic = NicRedistribute {
            bgp_as: leak.bgp_as,
            nic,
            redistribute,
        };
        snippets.push(
            nic.render()
                .map_err(|e| failed(format!("FRR NIC redistribution template: {e}")))?,
        );
    }
    Ok(snippets)
}

/// A finished background task's result, its panic or cancellation as text.
async fn joined<T>(handle: &mut JoinHandle<T>) -> Result<T, String> {
    handle
        .await
        .map_err(|e| format!("background task failed: {e}"))
}

#[async_trait]
impl ExposureBackend for UnderlayBackend {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        // FRR may still be starting: a failure is retried at every observe. The first
        // reconcile waits briefly for the usual quick answer, so that a healthy FRR gets its
        // base configuration with it.
        self.start_frr_render();
        if let Some(handle) = self.frr_render.as_mut()
            && let Ok(result) = tokio::time::timeout(FIRST_RENDER_WAIT, joined(handle)).await
        {
            self.frr_render = None;
            self.take_frr_render(result);
        }
        Ok(())
    }

    async fn observe(&mut self, exposures: &ExposureSet) -> Result<(), PluginError> {
        let bridges: BTreeSet<InterfaceName> = exposures.bridges.keys().cloned().collect();
        self.refresh_tables(&bridges);
        self.refresh_bridge_macs(&bridges);
        // The driver says whether routes (not only addresses) are announced (A2: upstream's
        // `redistribute kernel` with the subnet advertisement method; stretched L2 (G1):
        // `kernel` alone).
        let redistribute = if exposures
            .needs
            .contains(&RealisationNeed::RedistributeKernelOnly)
        {
            BTreeSet::from([Redistribute::Kernel])
        } else if exposures.redistributes_kernel() {
            BTreeSet::from([Redistribute::Connected, Redistribute::Kernel])
        } else {
            BTreeSet::from([Redistribute::Connected])
        };
        if redistribute != self.redistribute {
            self.redistribute = redistribute;
            self.frr_snippets.clear();
            if let Some(stale) = self.frr_render.take() {
                stale.abort();
            }
        }
        self.start_frr_render();
        Ok(())
    }

    /// Fires when a background fetch brought new facts: the FRR base configuration, or bridge
    /// MACs that differ. Cancel-safe: an interrupted wait leaves the task in place.
    async fn changed(&mut self) -> Result<(), PluginError> {
        loop {
            match (self.frr_render.as_mut(), self.mac_read.as_mut()) {
                (None, None) => return std::future::pending().await,
                (Some(frr), None) => {
                    let result = joined(frr).await;
                    self.frr_render = None;
                    if self.take_frr_render(result) {
                        return Ok(());
                    }
                }
                (frr, Some(macs)) => {
                    let frr_done = async {
                        match frr {
                            Some(h) => Some(joined(h).await),
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        result = frr_done => {
                            self.frr_render = None;
                            if self.take_frr_render(result.expect("only resolves with a result")) {
                                return Ok(());
                            }
                        }
                        result = joined(macs) => {
                            self.mac_read = None;
                            if self.take_mac_read(result) {
                                return Ok(());
                            }
                        }
                    }
                }
            }
        }
    }

    fn desired_system(&self, exposures: &ExposureSet) -> Result<Rendered, PluginError> {
        let mut rendered = render::render(&self.settings, &self.facts, exposures);
        rendered.system.frr = self.frr_snippets.clone();
        Ok(rendered)
    }

    fn desired_system_shared(&self, exposures: &Arc<ExposureSet>) -> Result<Rendered, PluginError> {
        // A panic in a render leaves a state the next render would build on: start again.
        let mut incremental = self.incremental.lock().unwrap_or_else(|e| {
            let mut guard = e.into_inner();
            *guard = Default::default();
            guard
        });
        let mut rendered = incremental.render(&self.settings, &self.facts, exposures);
        rendered.system.frr = self.frr_snippets.clone();
        Ok(rendered)
    }
}

// Registered only with its own feature: the `ovn` backend reuses the code without it.
#[cfg(feature = "underlay")]
inventory::submit! {
    BackendRegistration {
        name: NAME,
        description: "IPs on the bgp-nic dummy in the bgp-vrf VRF, leaked to the default BGP instance; per-bridge tables, rules and routes",
        factory: |ctx: &PluginContext| Ok(Box::new(UnderlayBackend::from_context(ctx)?)),
    }
}
