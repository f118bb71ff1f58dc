//! `exposing_method = vrf` and the SB EVPN driver's own realisation: per-VNI VRF, bridge and
//! VXLAN, routes in the VNI table, FRR EVPN type-5 stanzas.
//!
//! - [`render`]: EVPN scopes → desired kernel/OVS/FRR objects (pure, unit-tested).
//! - [`incremental`]: the same rendering as a delta of the last one (what the host uses).
//! - `VrfBackend`: gathers what rendering needs from the system: the local VTEP address, the
//!   VNI tables claimed in the rt_tables file, the VRFs kept by `delete_vrf_on_disconnect =
//!   false`.
//!
//! Every device it creates carries the agent's alias, and garbage collection deletes only
//! those (U34: upstream deleted any `vrf-*`, `br-*`, `lo-*`, `vxlan-*` on the host); FRR VRF
//! stanzas are FRR objects recorded before they are applied, so only the agent's are removed.
//! Everything is desired state, so an FRR restart or a device deleted by hand is repaired by
//! the next reconcile (U35).

pub mod incremental;
pub mod render;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::caps::netlink::NetlinkReconciler;
use crate::caps::rt_tables::RtTables;
use crate::config::DefaultSection;
use crate::exposure::{EvpnAttachment, ExposureSet, ScopeId};
use crate::plugin::{BackendRegistration, ExposureBackend, PluginContext, PluginError, Rendered};
use render::{Facts, VrfSettings};
use std::sync::Arc;

const NAME: &str = "vrf";
/// How often a missing VTEP address is looked for again.
const VTEP_RETRY: Duration = Duration::from_secs(5);

fn failed(message: impl Into<String>) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: message.into(),
    }
}

pub(crate) struct VrfBackend {
    settings: VrfSettings,
    default: DefaultSection,
    rt_tables: RtTables,
    netlink: Arc<NetlinkReconciler>,
    facts: Facts,
    /// VNIs whose table claims are in `facts`.
    claimed_for: BTreeSet<u32>,
    vtep_looked_at: Option<Instant>,
    /// The last render, for the next one to be a delta of it.
    incremental: std::sync::Mutex<incremental::IncrementalRender>,
}

impl VrfBackend {
    fn from_context(ctx: &PluginContext) -> Result<Self, PluginError> {
        let settings = VrfSettings::from_config(&ctx.config).map_err(failed)?;
        Ok(Self {
            settings,
            default: ctx.config.default.clone(),
            rt_tables: RtTables::from_config(&ctx.config),
            netlink: ctx.caps.netlink.clone(),
            facts: Facts::default(),
            claimed_for: BTreeSet::new(),
            vtep_looked_at: None,
            incremental: Default::default(),
        })
    }

    /// `[DEFAULT] evpn_local_ip`, else the first global IPv4 /32 on `lo`, else the first
    /// address of `[DEFAULT] evpn_nic` (upstream's order).
    async fn resolve_vtep(&mut self) {
        if let Some(ip) = self.default.evpn_local_ip {
            self.facts.vtep = Some(ip);
            self.facts.vtep_problem = None;
            return;
        }
        if self.facts.vtep.is_some()
            || self
                .vtep_looked_at
                .is_some_and(|t| t.elapsed() < VTEP_RETRY)
        {
            return;
        }
        self.vtep_looked_at = Some(Instant::now());
        let addresses = match self.netlink.host_addresses().await {
            Ok(a) => a,
            Err(e) => {
                self.facts.vtep_problem = Some(format!(
                    "no local VTEP address: [DEFAULT] evpn_local_ip is not set and the host's \
                     addresses cannot be read ({e})"
                ));
                return;
            }
        };
        let from_lo = addresses.iter().find_map(|(dev, net)| match net.addr() {
            IpAddr::V4(a) if dev == "lo" && net.prefix_len() == 32 && !a.is_loopback() => {
                Some(IpAddr::V4(a))
            }
            _ => None,
        });
        let from_nic = self.default.evpn_nic.as_deref().and_then(|nic| {
            addresses
                .iter()
                .find(|(dev, net)| dev == nic && !net.addr().is_unspecified())
                .map(|(_, net)| net.addr())
        });
        match from_lo.or(from_nic) {
            Some(ip) => {
                info!(vtep = %ip, "local VTEP address resolved from the host");
                self.facts.vtep = Some(ip);
                self.facts.vtep_problem = None;
            }
            None => {
                self.facts.vtep_problem = Some(format!(
                    "no local VTEP address: set [DEFAULT] evpn_local_ip, or give `lo` a /32 \
                     IPv4 address{}",
                    match &self.default.evpn_nic {
                        Some(nic) => format!(" (the [DEFAULT] evpn_nic {nic} has no address)"),
                        None => " or set [DEFAULT] evpn_nic".to_owned(),
                    }
                ));
            }
        }
    }

    /// Claim the VNI tables in the rt_tables file (so no bridge ever gets one) when the VNI set
    /// changed, and list every claim (the agent's tables, also of VNIs gone since).
    fn claim_tables(&mut self, vnis: BTreeSet<u32>) {
        if vnis == self.claimed_for {
            return;
        }
        let names: Vec<_> = vnis
            .iter()
            .filter_map(|v| crate::caps::frr::values::Vni::new(*v).ok())
            .map(|v| (render::vrf_name(v), v.get()))
            .collect();
        match self.rt_tables.claim_vrf_tables(&names) {
            Ok(claims) => {
                self.facts.refused_tables.clear();
                for ((_, table), (_, claim)) in names.iter().zip(claims) {
                    if let Err(e) = claim {
                        self.facts.refused_tables.insert(*table, e.to_string());
                    }
                }
                self.claimed_for = vnis;
            }
            Err(e) => warn!(path = %self.rt_tables.path().display(), "rt_tables: {e}"),
        }
        match self.rt_tables.vrf_claims() {
            Ok(claims) => self.facts.claimed_tables = claims,
            Err(e) => warn!(path = %self.rt_tables.path().display(), "rt_tables: {e}"),
        }
        for refused in self.facts.refused_tables.keys() {
            self.facts.claimed_tables.remove(refused);
        }
    }
}

#[async_trait]
impl ExposureBackend for VrfBackend {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        self.resolve_vtep().await;
        if let Some(problem) = &self.facts.vtep_problem {
            // E3: said at start; EVPN scopes are reported until an address appears.
            warn!("{problem}");
        }
        Ok(())
    }

    async fn observe(&mut self, exposures: &ExposureSet) -> Result<(), PluginError> {
        self.resolve_vtep().await;
        let vnis: BTreeSet<u32> = exposures
            .scopes
            .keys()
            .filter_map(|s| match s {
                ScopeId::Evpn(v) => Some(v.get()),
                ScopeId::Global => None,
            })
            .chain(self.facts.retained.keys().map(|v| v.get()))
            .collect();
        self.claim_tables(vnis);
        if !self.settings.delete_vrf_on_disconnect {
            for (id, scope) in &exposures.scopes {
                if let (ScopeId::Evpn(vni), Some(params)) = (id, &scope.evpn)
                    && params
                        .attachments
                        .iter()
                        .any(|a| matches!(a, EvpnAttachment::Localnet(_)))
                {
                    self.facts.retained.insert(*vni, params.clone());
                }
            }
        }
        Ok(())
    }

    fn desired_system(&self, exposures: &ExposureSet) -> Result<Rendered, PluginError> {
        Ok(render::render(&self.settings, &self.facts, exposures))
    }

    fn desired_system_shared(&self, exposures: &Arc<ExposureSet>) -> Result<Rendered, PluginError> {
        // A panic in a render leaves a state the next render would build on: start again.
        let mut incremental = self.incremental.lock().unwrap_or_else(|e| {
            let mut guard = e.into_inner();
            *guard = Default::default();
            guard
        });
        Ok(incremental.render(&self.settings, &self.facts, exposures))
    }
}

/// For tests of the rendering with facts given by hand.
#[cfg(test)]
pub(crate) fn facts_with_vtep(vtep: &str) -> Facts {
    Facts {
        vtep: Some(vtep.parse().expect("test VTEP address")),
        ..Facts::default()
    }
}

inventory::submit! {
    BackendRegistration {
        name: NAME,
        description: "EVPN type-5 per provider network: per-VNI VRF, bridge and VXLAN, routes in the VNI table",
        factory: |ctx: &PluginContext| Ok(Box::new(VrfBackend::from_context(ctx)?)),
    }
}
