//! The live feed of the SB BGP driver: the local Open_vSwitch database (identity, SB remote,
//! bridge mappings) and the Southbound database, monitored with conditions so that a chassis
//! holds the rows that concern it, not the whole cloud (upstream replicated every Port_Binding
//! on every node, U05).
//!
//! Port_Binding rows monitored (clauses are OR-ed by OVSDB):
//! - `chassis == <this chassis>`: ports bound here (VMs, virtual ports, gateway ports);
//! - `type == "localnet"`: which datapaths are provider networks, and their VLAN tags;
//! - `nat_addresses != []`: the patch ports carrying FIPs (centralized and distributed);
//! - `mac == []`: Octavia VIP ports;
//! - for each gateway port bound here, its provider patch port by name, and (tenant exposure)
//!   its router's datapath and the datapaths of the router's subnets, found by following
//!   `options:peer` — added with `monitor_cond_change` as the rows arrive.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use tracing::{debug, info, warn};

use super::compute::{LocalChassis, TenantOptions, compute};
use super::feed::{SbFeed, monitor_spec};
use crate::caps::ovsdb::{
    BatchKind, ChangeBatch, Clause, ClientConfig, Datum, Function, MonitorCondition, MonitorSpec,
    OvsdbClient, TableSpec, TlsFiles, Uuid, condition_eq,
};
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::plugin::{ChangeScope, Driver, PluginContext, PluginError};

pub const NAME: &str = "ovn_bgp_driver";

fn failed(message: impl Into<String>) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: message.into(),
    }
}

/// What this chassis reads from its own Open_vSwitch row.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OvsIdentity {
    system_id: String,
    ovn_remote: Option<String>,
    bridge_mappings: Vec<(String, String)>,
}

fn read_identity(client: &OvsdbClient) -> Result<OvsIdentity, PluginError> {
    let replica = client.replica();
    let table = replica
        .get_table("Open_vSwitch")
        .map_err(|e| failed(format!("local OVS database: {e}")))?;
    let row = table
        .iter()
        .next()
        .ok_or_else(|| failed("local OVS database has no Open_vSwitch row"))?;
    let system_id = row
        .map_get("external_ids", "system-id")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            failed("Open_vSwitch external_ids:system-id is not set (is ovn-controller configured?)")
        })?
        .to_owned();
    let bridge_mappings = row
        .map_get("external_ids", "ovn-bridge-mappings")
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .filter_map(|m| {
            let (physnet, bridge) = m.split_once(':')?;
            Some((physnet.trim().to_owned(), bridge.trim().to_owned()))
        })
        .collect();
    Ok(OvsIdentity {
        system_id,
        ovn_remote: row.map_get("external_ids", "ovn-remote").map(str::to_owned),
        bridge_mappings,
    })
}

/// The Southbound client configuration: `[ovn] ovn_sb_connection`, else `ovn-remote`.
fn sb_client_config(
    config: &AgentConfig,
    identity: &OvsIdentity,
) -> Result<ClientConfig, PluginError> {
    let remote = config
        .ovn
        .ovn_sb_connection
        .clone()
        .or_else(|| identity.ovn_remote.clone())
        .ok_or_else(|| {
            failed("no Southbound remote: set [ovn] ovn_sb_connection or Open_vSwitch external_ids:ovn-remote")
        })?;
    let mut client = ClientConfig::new(&remote, "OVN_Southbound")
        .map_err(|e| failed(format!("Southbound remote {remote:?}: {e}")))?;
    if remote.split(',').any(|r| r.trim().starts_with("ssl:")) {
        client.tls = Some(TlsFiles {
            private_key: config.ovn.ovn_sb_private_key.clone().into(),
            certificate: config.ovn.ovn_sb_certificate.clone().into(),
            ca_cert: config.ovn.ovn_sb_ca_cert.clone().into(),
        });
    }
    Ok(client)
}

pub struct SbBgpDriver {
    config: Arc<AgentConfig>,
    tenant: TenantOptions,
    local: LocalChassis,
    feed: SbFeed,
    ovs: Option<OvsdbClient>,
    ovs_events: Option<tokio::sync::mpsc::UnboundedReceiver<ChangeBatch>>,
    sb: Option<OvsdbClient>,
    sb_events: Option<tokio::sync::mpsc::UnboundedReceiver<ChangeBatch>>,
    /// The Port_Binding condition last sent to the server.
    pb_condition: BTreeSet<ConditionClause>,
}

/// A Port_Binding clause in a form that can be compared and sorted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ConditionClause {
    Chassis(String),
    Localnet,
    HasNatAddresses,
    NoMac,
    PortNamed(String),
    Datapath(String),
}

impl ConditionClause {
    fn to_clause(&self) -> Option<Clause> {
        Some(match self {
            ConditionClause::Chassis(u) => Clause::eq("chassis", Uuid::parse(u)?),
            ConditionClause::Localnet => Clause::eq("type", "localnet"),
            ConditionClause::HasNatAddresses => {
                Clause::new("nat_addresses", Function::Ne, Datum::empty())
            }
            ConditionClause::NoMac => Clause::eq("mac", Datum::empty()),
            ConditionClause::PortNamed(n) => Clause::eq("logical_port", n.as_str()),
            ConditionClause::Datapath(u) => Clause::eq("datapath", Uuid::parse(u)?),
        })
    }
}

impl SbBgpDriver {
    pub fn new(ctx: &PluginContext) -> Self {
        let d = &ctx.config.default;
        Self {
            config: ctx.config.clone(),
            tenant: TenantOptions {
                expose_tenant_networks: d.expose_tenant_networks,
                expose_ipv6_gua_tenant_networks: d.expose_ipv6_gua_tenant_networks,
                address_scopes: d
                    .address_scopes
                    .as_ref()
                    .map(|s| s.iter().cloned().collect()),
            },
            local: LocalChassis::default(),
            feed: SbFeed::default(),
            ovs: None,
            ovs_events: None,
            sb: None,
            sb_events: None,
            pb_condition: BTreeSet::new(),
        }
    }

    /// The Port_Binding clauses the current model calls for (see the module documentation).
    fn wanted_condition(&self) -> BTreeSet<ConditionClause> {
        let mut want = BTreeSet::from([
            ConditionClause::Localnet,
            ConditionClause::HasNatAddresses,
            ConditionClause::NoMac,
        ]);
        for chassis in self.feed.model.chassis_uuids_named(&self.local.name) {
            for port in self.feed.model.ports_on_chassis(&chassis) {
                let Some(id) = port
                    .logical_port
                    .strip_prefix("cr-lrp-")
                    .filter(|_| port.port_type == "chassisredirect")
                else {
                    continue;
                };
                want.insert(ConditionClause::PortNamed(id.to_owned()));
                if self.tenant.expose_tenant_networks || self.tenant.expose_ipv6_gua_tenant_networks
                {
                    want.insert(ConditionClause::Datapath(port.datapath.clone()));
                    for router_port in self.feed.model.ports_on_datapath(&port.datapath) {
                        let Some(peer) = router_port.options.get("peer") else {
                            continue;
                        };
                        want.insert(ConditionClause::PortNamed(peer.clone()));
                        if let Some(peer_row) = self.feed.model.port_named(peer) {
                            want.insert(ConditionClause::Datapath(peer_row.datapath.clone()));
                        }
                    }
                }
            }
            want.insert(ConditionClause::Chassis(chassis));
        }
        want
    }

    /// Send a new Port_Binding condition when the model calls for one. The server answers with
    /// the rows that now match (or stop matching), which arrive as ordinary changes.
    async fn update_condition(&mut self) -> Result<(), PluginError> {
        let want = self.wanted_condition();
        if want == self.pb_condition {
            return Ok(());
        }
        let Some(sb) = &self.sb else {
            return Ok(());
        };
        let clauses: Vec<Clause> = want.iter().filter_map(ConditionClause::to_clause).collect();
        debug!(
            clauses = clauses.len(),
            "updating the Port_Binding monitor condition"
        );
        sb.set_condition("Port_Binding", MonitorCondition::any(clauses))
            .await
            .map_err(|e| failed(format!("monitor_cond_change on Port_Binding: {e}")))?;
        self.pb_condition = want;
        Ok(())
    }

    /// Follow the local Open_vSwitch row. A row that became unusable (system-id removed, say) is
    /// reported and the last good identity kept: exposures are not withdrawn on a hiccup.
    fn apply_ovs(&mut self) {
        let Some(ovs) = &self.ovs else {
            return;
        };
        let identity = match read_identity(ovs) {
            Ok(identity) => identity,
            Err(e) => {
                warn!(
                    "{e}; keeping chassis {} and its bridge mappings",
                    self.local.name
                );
                return;
            }
        };
        if identity.system_id != self.local.name {
            // The chassis identity is what every exposure is keyed on; follow it, loudly.
            warn!(
                old = %self.local.name,
                new = %identity.system_id,
                "Open_vSwitch external_ids:system-id changed"
            );
        }
        self.local = LocalChassis {
            name: identity.system_id,
            bridge_mappings: identity.bridge_mappings,
        };
    }

    async fn connect_sb(&mut self, identity: &OvsIdentity) -> Result<(), PluginError> {
        let client_config = sb_client_config(&self.config, identity)?;
        // The Load_Balancer datapath columns differ between OVN versions: ask the schema first.
        let probe = OvsdbClient::connect(
            client_config.clone(),
            MonitorSpec::default().table(
                TableSpec::new("Chassis", &["name"])
                    .with_condition(condition_eq("name", identity.system_id.as_str())),
            ),
        )
        .await
        .map_err(|e| failed(format!("Southbound: {e}")))?;
        let schema = probe
            .schema()
            .ok_or_else(|| failed("Southbound: no schema after connecting"))?;
        drop(probe);
        let spec = monitor_spec(
            &schema,
            Some(condition_eq("name", identity.system_id.as_str())),
            Some(MonitorCondition::any(
                self.wanted_condition()
                    .iter()
                    .filter_map(ConditionClause::to_clause),
            )),
        );
        self.pb_condition = self.wanted_condition();
        let sb = OvsdbClient::connect(client_config, spec)
            .await
            .map_err(|e| failed(format!("Southbound: {e}")))?;
        self.sb_events = sb.events();
        self.sb = Some(sb);
        Ok(())
    }

    /// Apply every batch already waiting, so a burst costs one reconcile.
    fn drain(&mut self) -> Result<ChangeScope, PluginError> {
        let mut scope = ChangeScope::Rows;
        let mut batches = Vec::new();
        if let Some(rx) = &mut self.sb_events {
            while let Ok(b) = rx.try_recv() {
                batches.push(b);
            }
        }
        for batch in &batches {
            if batch.kind != BatchKind::Update {
                scope = ChangeScope::Full;
            }
            self.feed.apply(&batch.changes);
        }
        let mut ovs_changed = false;
        if let Some(rx) = &mut self.ovs_events {
            while rx.try_recv().is_ok() {
                ovs_changed = true;
            }
        }
        if ovs_changed {
            self.apply_ovs();
        }
        Ok(scope)
    }
}

#[async_trait]
impl Driver for SbBgpDriver {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        let ovs_config = ClientConfig::new(&self.config.default.ovsdb_connection, "Open_vSwitch")
            .map_err(|e| {
            failed(format!(
                "[DEFAULT] ovsdb_connection {:?}: {e}",
                self.config.default.ovsdb_connection
            ))
        })?;
        let ovs = OvsdbClient::connect(
            ovs_config,
            MonitorSpec::default().table(TableSpec::new("Open_vSwitch", &["external_ids"])),
        )
        .await
        .map_err(|e| failed(format!("local OVS database: {e}")))?;
        self.ovs_events = ovs.events();
        let identity = read_identity(&ovs)?;
        self.ovs = Some(ovs);
        self.local = LocalChassis {
            name: identity.system_id.clone(),
            bridge_mappings: identity.bridge_mappings.clone(),
        };
        info!(chassis = %identity.system_id, mappings = ?identity.bridge_mappings, "local chassis");
        self.connect_sb(&identity).await?;
        // The initial download, and the rows the first conditions pull in (gateway routers,
        // their subnets) before the first reconcile, so a start exposes everything at once.
        for _ in 0..4 {
            self.drain()?;
            let before = self.pb_condition.clone();
            self.update_condition().await?;
            if before == self.pb_condition {
                break;
            }
        }
        self.drain()?;
        info!(
            ports = self.feed.model.port_count(),
            "Southbound replica ready"
        );
        Ok(())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        let (Some(sb_rx), Some(ovs_rx)) = (&mut self.sb_events, &mut self.ovs_events) else {
            return Err(failed("changed() called before start()"));
        };
        let mut scope = ChangeScope::Rows;
        tokio::select! {
            batch = sb_rx.recv() => match batch {
                Some(batch) => {
                    if batch.kind != BatchKind::Update {
                        scope = ChangeScope::Full;
                    }
                    self.feed.apply(&batch.changes);
                }
                None => return Err(failed("Southbound client stopped")),
            },
            batch = ovs_rx.recv() => match batch {
                Some(_) => self.apply_ovs(),
                None => return Err(failed("local OVS database client stopped")),
            },
        }
        if self.drain()? == ChangeScope::Full {
            scope = ChangeScope::Full;
        }
        Ok(scope)
    }

    async fn settle(&mut self) -> Result<(), PluginError> {
        // Not fatal: the client re-sends its conditions after a reconnect, and the next change
        // retries this one.
        if let Err(e) = self.update_condition().await {
            warn!("{e}");
        }
        Ok(())
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        let mut set = compute(&self.feed.model, &self.local, &self.tenant);
        // Upstream's base configuration redistributes kernel routes with the subnet method,
        // whatever the driver (A2).
        if self.config.default.advertisement_method_tenant_networks
            == crate::config::TenantAdvertisement::Subnet
        {
            set.needs
                .insert(crate::exposure::RealisationNeed::RedistributeKernel);
        }
        Ok(set)
    }
}
