//! `exposing_method = underlay`: IPs on the bgp-nic dummy in the bgp-vrf VRF, leaked to the
//! default BGP instance; per-bridge tables, rules and routes.
//!
//! - [`render`]: exposures → desired kernel/OVS objects (pure, snapshot-tested).
//! - `UnderlayBackend`: gathers the facts rendering needs (routing table numbers from the
//!   rt_tables file, bridge MACs from OVS, FRR's router id) and adds the FRR base configuration.

pub mod render;

use std::collections::BTreeSet;
use std::time::Duration;

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
use crate::plugin::{BackendRegistration, ExposureBackend, PluginContext, PluginError, Rendered};
use crate::types::InterfaceName;
use render::{Facts, UnderlaySettings, VrfKind};

const NAME: &str = "underlay";
/// Bridge MACs can change when OVS recreates a bridge's internal port; re-read them this often.
const BRIDGE_MAC_MAX_AGE: Duration = Duration::from_secs(10);

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
}

impl UnderlayBackend {
    fn from_context(ctx: &PluginContext) -> Result<Self, PluginError> {
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
        })
    }

    /// The FRR base configuration: the leak VRF (A1-A3), plus, where `bgp-vrf` is only a bridge
    /// stand-in, a route-map redistribution of bgp-nic in the default instance.
    async fn render_frr(&mut self) -> Result<(), PluginError> {
        let redistribute = self.redistribute.clone();
        let leak = leak_vrf_from_config(&self.default, redistribute.clone(), &self.vtysh)
            .await
            .map_err(|e| failed(format!("FRR base configuration: {e}")))?;
        let mut snippets = vec![
            leak.render()
                .map_err(|e| failed(format!("FRR leak template: {e}")))?,
        ];
        if self.settings.vrf_kind == VrfKind::Bridge {
            let nic = NicRedistribute {
                bgp_as: leak.bgp_as,
                nic: self.settings.bgp_nic.clone(),
                redistribute,
            };
            snippets.push(
                nic.render()
                    .map_err(|e| failed(format!("FRR NIC redistribution template: {e}")))?,
            );
        }
        self.frr_snippets = snippets;
        Ok(())
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

    async fn refresh_bridge_macs(&mut self, bridges: &BTreeSet<InterfaceName>) {
        let fresh = self
            .macs_read_at
            .is_some_and(|t| t.elapsed() < BRIDGE_MAC_MAX_AGE);
        let complete = bridges
            .iter()
            .all(|b| self.facts.bridge_macs.contains_key(b));
        if (fresh && complete) || bridges.is_empty() {
            return;
        }
        let list: Vec<&InterfaceName> = bridges.iter().collect();
        match self.ovs.port_table_for(&list, &[]).await {
            Ok(ports) => {
                self.facts.bridge_macs.clear();
                for bridge in bridges {
                    match ports.bridge_mac(bridge.as_str()) {
                        Some(mac) => {
                            self.facts.bridge_macs.insert(bridge.clone(), mac);
                        }
                        None => debug!(bridge = %bridge, "bridge has no MAC in OVS (yet)"),
                    }
                }
                self.macs_read_at = Some(Instant::now());
            }
            Err(e) => warn!("reading bridge MACs from OVS: {e}"),
        }
    }
}

#[async_trait]
impl ExposureBackend for UnderlayBackend {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        // FRR may still be starting: a failure here is retried at every observe.
        if let Err(e) = self.render_frr().await {
            warn!("{e}; retrying at the next reconcile");
        }
        Ok(())
    }

    async fn observe(&mut self, exposures: &ExposureSet) -> Result<(), PluginError> {
        let bridges: BTreeSet<InterfaceName> = exposures.bridges.keys().cloned().collect();
        self.refresh_tables(&bridges);
        self.refresh_bridge_macs(&bridges).await;
        // The driver says whether routes (not only addresses) are announced (A2: upstream's
        // `redistribute kernel` with the subnet advertisement method).
        let mut redistribute = BTreeSet::from([Redistribute::Connected]);
        if exposures
            .needs
            .contains(&RealisationNeed::RedistributeKernel)
        {
            redistribute.insert(Redistribute::Kernel);
        }
        if redistribute != self.redistribute {
            self.redistribute = redistribute;
            self.frr_snippets.clear();
        }
        if self.frr_snippets.is_empty()
            && let Err(e) = self.render_frr().await
        {
            warn!("{e}; retrying at the next reconcile");
        }
        Ok(())
    }

    fn desired_system(&self, exposures: &ExposureSet) -> Result<Rendered, PluginError> {
        let mut rendered = render::render(&self.settings, &self.facts, exposures);
        rendered.system.frr = self.frr_snippets.clone();
        Ok(rendered)
    }
}

inventory::submit! {
    BackendRegistration {
        name: NAME,
        description: "IPs on the bgp-nic dummy in the bgp-vrf VRF, leaked to the default BGP instance; per-bridge tables, rules and routes",
        factory: |ctx: &PluginContext| Ok(Box::new(UnderlayBackend::from_context(ctx)?)),
    }
}
