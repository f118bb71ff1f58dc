//! The live Northbound feed of the NB drivers: the local chassis identity, a Northbound client
//! monitoring the tables of [`super::feed::monitor_spec`] under the per-table conditions of the
//! driver's [`NbConditionPolicy`], and, on OVN < 23.09 (no `Logical_Router_Port.status`), a
//! Southbound client for the gateways hosted here ([`super::gateways`]). A driver adds its
//! options and its computation over [`NbSession::model`] and [`NbSession::hosted_gateways`].
//!
//! Start: read the identity; probe the Northbound schema (typed-row check, optional columns);
//! without LRP `status`, connect the Southbound fallback; connect the Northbound with the
//! conditions an empty model calls for; then, round after round (at most
//! [`crate::replay::MAX_CONDITION_ROUNDS`]), apply what arrived and send the conditions the rows
//! call for (own Chassis row → its bindings → gateways hosted here → their routers → NATs, load
//! balancers, tenant switches), until they stop changing. So the first reconcile sees everything.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::{debug, info, warn};

use super::condition::{NbConditionPolicy, WantedConditions, monitor_conditions};
use super::feed::{
    NbFeed, NbSchemaError, check_schema, has_lrp_status, has_nat_gateway_port, monitor_spec,
};
use super::gateways::{self, HostedGateways};
use super::model::{NbGlobal, NbModel};
use crate::caps::ovsdb::{
    BatchKind, ChangeBatch, MonitorCondition, MonitorSpec, OvsdbClient, OvsdbError, TableSpec,
};
use crate::config::AgentConfig;
use crate::ovn::connect::{ConnectError, nb_client_config, sb_client_config};
use crate::ovn::identity::{ChassisIdentity, IdentityError};
use crate::ovn::sb::condition::chassis_condition;
use crate::ovn::sb::model::ChassisRow;
use crate::ovn::table::OvnTable;
use crate::plugin::ChangeScope;

/// How many condition rounds a start waits for: each round follows one more hop.
const START_CONDITION_ROUNDS: usize = crate::replay::MAX_CONDITION_ROUNDS;

/// Why the Southbound is read at all, for the errors of the fallback.
const FALLBACK_WHY: &str = "the Northbound has no Logical_Router_Port.status (OVN < 23.09), so \
                            the gateways hosted here are read from the Southbound";

/// Why the Northbound feed failed.
#[derive(Debug, thiserror::Error)]
pub enum NbSessionError {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("Northbound: {0}")]
    Ovsdb(#[from] OvsdbError),
    #[error("Northbound: {0}")]
    Schema(#[from] NbSchemaError),
    #[error("{db}: no schema after connecting")]
    NoSchema { db: &'static str },
    #[error("{db}: the change stream of the client was already taken")]
    EventsTaken { db: &'static str },
    #[error("{FALLBACK_WHY}: {source}")]
    SouthboundConnect {
        #[source]
        source: ConnectError,
    },
    #[error("{FALLBACK_WHY}: Southbound: {source}")]
    Southbound {
        #[source]
        source: OvsdbError,
    },
    #[error("{FALLBACK_WHY}: Southbound: {source}")]
    SouthboundSchema {
        #[source]
        source: NbSchemaError,
    },
    #[error("monitor_cond_change on {db} {table}: {source}")]
    Condition {
        db: &'static str,
        table: String,
        #[source]
        source: OvsdbError,
    },
    #[error("Northbound client stopped")]
    NbStopped,
    #[error("Southbound client stopped")]
    SbStopped,
    #[error("local OVS database client stopped")]
    OvsStopped,
}

/// Where the session learns which gateways are hosted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewaySource {
    /// `Logical_Router_Port.status:hosting-chassis` (OVN >= 23.09): no Southbound connection.
    LrpStatus,
    /// The Southbound `chassisredirect` bindings of this chassis (older OVN).
    Southbound,
}

/// The Southbound client of the gateway fallback.
struct SbGateways {
    client: OvsdbClient,
    events: UnboundedReceiver<ChangeBatch>,
    state: HostedGateways,
    /// The system-id the Chassis condition was last sent for.
    chassis_for: String,
    /// The Port_Binding condition last sent.
    bindings: MonitorCondition,
}

impl SbGateways {
    async fn start(
        config: &AgentConfig,
        identity: &ChassisIdentity,
    ) -> Result<Self, NbSessionError> {
        let client_config = sb_client_config(config, identity)
            .map_err(|source| NbSessionError::SouthboundConnect { source })?;
        let sb_err = |source| NbSessionError::Southbound { source };
        let probe = OvsdbClient::connect(
            client_config.clone(),
            MonitorSpec::default().table(
                TableSpec::new(ChassisRow::TABLE, &["name"])
                    .with_condition(chassis_condition(&identity.system_id)),
            ),
        )
        .await
        .map_err(sb_err)?;
        let schema = probe
            .schema()
            .ok_or(NbSessionError::NoSchema { db: "Southbound" })?;
        drop(probe);
        gateways::check_schema(&schema)
            .map_err(|source| NbSessionError::SouthboundSchema { source })?;
        let bindings = MonitorCondition::any([]);
        let client = OvsdbClient::connect(
            client_config,
            gateways::monitor_spec(&schema, &identity.system_id, bindings.clone()),
        )
        .await
        .map_err(sb_err)?;
        let events = client
            .events()
            .ok_or(NbSessionError::EventsTaken { db: "Southbound" })?;
        Ok(SbGateways {
            client,
            events,
            state: HostedGateways::default(),
            chassis_for: identity.system_id.clone(),
            bindings,
        })
    }

    /// Send the Chassis and Port_Binding conditions `system_id` and the rows call for; whether
    /// anything was sent.
    async fn update_conditions(&mut self, system_id: &str) -> Result<bool, NbSessionError> {
        let mut sent = false;
        if self.chassis_for != system_id {
            self.client
                .set_condition(ChassisRow::TABLE, chassis_condition(system_id))
                .await
                .map_err(|source| condition_error("Southbound", ChassisRow::TABLE, source))?;
            self.chassis_for = system_id.to_owned();
            sent = true;
        }
        let want = self.state.binding_condition(system_id);
        if want != self.bindings {
            debug!("updating the Southbound Port_Binding condition (bindings of this chassis)");
            self.client
                .set_condition(gateways::RedirectBinding::TABLE, want.clone())
                .await
                .map_err(|source| {
                    condition_error("Southbound", gateways::RedirectBinding::TABLE, source)
                })?;
            self.bindings = want;
            sent = true;
        }
        Ok(sent)
    }
}

impl SbGateways {
    /// Apply every batch already waiting.
    fn drain(&mut self) -> ChangeScope {
        let mut scope = ChangeScope::Rows;
        while let Ok(batch) = self.events.try_recv() {
            if batch.kind != BatchKind::Update {
                scope = ChangeScope::Full;
            }
            self.state.apply(&batch.changes);
        }
        scope
    }

    /// Returns once the rows of the conditions sent so far are in the change stream: the
    /// server sends them right after its reply to `monitor_cond_change`, before answering
    /// the next request.
    async fn barrier(&self) -> Result<(), NbSessionError> {
        self.client
            .call("echo", json!([]))
            .await
            .map(drop)
            .map_err(|source| NbSessionError::Southbound { source })
    }
}

fn condition_error(db: &'static str, table: &str, source: OvsdbError) -> NbSessionError {
    NbSessionError::Condition {
        db,
        table: table.to_owned(),
        source,
    }
}

/// What woke [`NbSession::changed`].
enum Wake {
    Nb(Option<ChangeBatch>),
    Sb(Option<ChangeBatch>),
    Identity(bool),
}

/// The live Northbound feed of one NB driver.
pub struct NbSession {
    policy: NbConditionPolicy,
    identity_feed: tokio::sync::watch::Receiver<ChassisIdentity>,
    identity: ChassisIdentity,
    feed: NbFeed,
    nb: OvsdbClient,
    nb_events: UnboundedReceiver<ChangeBatch>,
    /// The per-table conditions last sent to the Northbound.
    conditions: BTreeMap<String, MonitorCondition>,
    /// The per-table conditions the model calls for, made again only when it changed so.
    wanted: WantedConditions,
    /// The Southbound fallback, on OVN < 23.09 only.
    southbound: Option<SbGateways>,
    /// The gateways hosted here by the Southbound; `None` with [`GatewaySource::LrpStatus`].
    hosted: Option<BTreeSet<String>>,
}

impl NbSession {
    /// Connect to the Northbound (and, without LRP `status`, the Southbound) of `identity` and
    /// return once the first complete replica, and the rows the converged conditions pull in,
    /// are in the model. `policy.lrp_status` is set from the server's schema.
    pub async fn start(
        config: &AgentConfig,
        mut identity_feed: tokio::sync::watch::Receiver<ChassisIdentity>,
        mut policy: NbConditionPolicy,
    ) -> Result<Self, NbSessionError> {
        let identity = identity_feed.borrow_and_update().clone();
        let client_config = nb_client_config(config, &identity)?;
        // The optional columns differ between OVN versions: ask the schema first.
        let probe = OvsdbClient::connect(
            client_config.clone(),
            MonitorSpec::default().table(TableSpec::new(NbGlobal::TABLE, &[])),
        )
        .await?;
        let schema = probe
            .schema()
            .ok_or(NbSessionError::NoSchema { db: "Northbound" })?;
        drop(probe);
        check_schema(&schema)?;
        policy.lrp_status = has_lrp_status(&schema);
        if !has_nat_gateway_port(&schema) {
            warn!(
                "the Northbound has no NAT.gateway_port (OVN < 22.12): centralized floating IPs \
                 cannot be placed on their gateway and are not exposed"
            );
        }
        let southbound = if policy.lrp_status {
            info!(
                "gateways hosted here: read from Logical_Router_Port.status:hosting-chassis \
                 (no Southbound connection)"
            );
            None
        } else {
            info!(
                "gateways hosted here: {FALLBACK_WHY} (chassisredirect bindings of chassis {})",
                identity.system_id
            );
            Some(SbGateways::start(config, &identity).await?)
        };
        // The Southbound first: the gateways hosted here decide the Northbound conditions.
        let mut southbound = southbound;
        let mut hosted = None;
        if let Some(sb) = &mut southbound {
            sb.drain();
            if sb.update_conditions(&identity.system_id).await? {
                sb.barrier().await?;
                sb.drain();
            }
            hosted = Some(sb.state.hosted(&identity.system_id));
        }
        let feed = NbFeed::default();
        let conditions = monitor_conditions(
            &policy.wanted(
                &feed.model,
                &identity.system_id,
                &identity.hostname,
                &identity.bridge_mappings,
                hosted.as_ref(),
            ),
            policy.evpn,
        );
        let nb = OvsdbClient::connect(client_config, monitor_spec(&schema, &conditions)).await?;
        let nb_events = nb
            .events()
            .ok_or(NbSessionError::EventsTaken { db: "Northbound" })?;
        let mut session = NbSession {
            policy,
            identity_feed,
            identity,
            feed,
            nb,
            nb_events,
            conditions,
            wanted: WantedConditions::default(),
            southbound,
            hosted,
        };
        for _ in 0..START_CONDITION_ROUNDS {
            session.drain();
            let sb_sent = session.update_sb_conditions().await?;
            let nb_sent = session.update_nb_conditions().await?;
            if !sb_sent && !nb_sent {
                break;
            }
            // The server sends the rows a new condition selects right after its reply: an echo
            // behind them makes sure they are in the change stream before the next round.
            if sb_sent && let Some(sb) = &session.southbound {
                sb.barrier().await?;
            }
            if nb_sent {
                session.nb.call("echo", json!([])).await?;
            }
        }
        session.drain();
        info!(
            rows = ?session.feed.model.counts(),
            hosted_gateways = ?session.hosted,
            "Northbound replica ready"
        );
        Ok(session)
    }

    /// The model of the rows monitored.
    pub fn model(&self) -> &NbModel {
        &self.feed.model
    }

    /// The last usable chassis identity.
    pub fn identity(&self) -> &ChassisIdentity {
        &self.identity
    }

    /// Where the gateways hosted here are learnt.
    pub fn gateway_source(&self) -> GatewaySource {
        if self.southbound.is_some() {
            GatewaySource::Southbound
        } else {
            GatewaySource::LrpStatus
        }
    }

    /// The router ports the Southbound says are hosted here (the `hosted_gateways` of the NB
    /// driver's computation); `None`: read `status:hosting-chassis`.
    pub fn hosted_gateways(&self) -> Option<&BTreeSet<String>> {
        self.hosted.as_ref()
    }

    /// The condition policy in use (`lrp_status` as the server's schema says).
    pub fn policy(&self) -> &NbConditionPolicy {
        &self.policy
    }

    /// The per-table Northbound conditions last sent.
    pub fn conditions(&self) -> &BTreeMap<String, MonitorCondition> {
        &self.conditions
    }

    /// Wait for the next Northbound, Southbound or identity change, and apply it and everything
    /// already waiting. Cancel-safe: only channel receives are awaited, and what one received is
    /// applied before any further `.await`. The conditions the model now calls for are sent by
    /// [`NbSession::settle`], which the host never cancels.
    pub async fn changed(&mut self) -> Result<ChangeScope, NbSessionError> {
        let nb_events = &mut self.nb_events;
        let sb_events = self.southbound.as_mut().map(|s| &mut s.events);
        let identity_feed = &mut self.identity_feed;
        let wake = tokio::select! {
            batch = nb_events.recv() => Wake::Nb(batch),
            batch = async {
                match sb_events {
                    Some(events) => events.recv().await,
                    None => std::future::pending().await,
                }
            } => Wake::Sb(batch),
            changed = identity_feed.changed() => Wake::Identity(changed.is_ok()),
        };
        let mut scope = ChangeScope::Rows;
        match wake {
            Wake::Nb(None) => return Err(NbSessionError::NbStopped),
            Wake::Sb(None) => return Err(NbSessionError::SbStopped),
            Wake::Identity(false) => return Err(NbSessionError::OvsStopped),
            Wake::Nb(Some(batch)) => {
                if batch.kind != BatchKind::Update {
                    scope = ChangeScope::Full;
                }
                self.feed.apply(&batch.changes);
            }
            Wake::Sb(Some(batch)) => {
                if batch.kind != BatchKind::Update {
                    scope = ChangeScope::Full;
                }
                if let Some(sb) = &mut self.southbound {
                    sb.state.apply(&batch.changes);
                }
            }
            Wake::Identity(true) => {
                self.identity = self.identity_feed.borrow_and_update().clone();
            }
        }
        if self.drain() == ChangeScope::Full {
            scope = ChangeScope::Full;
        }
        Ok(scope)
    }

    /// Follow the conditions the model calls for after a change (`monitor_cond_change` on each
    /// table whose condition changed). Not cancel-safe: a cut round trip would leave the
    /// recorded condition behind the server's. Failures are logged, not fatal: the client
    /// re-sends its conditions after a reconnect, and the next change retries.
    pub async fn settle(&mut self) -> Result<(), NbSessionError> {
        if let Err(e) = self.update_sb_conditions().await {
            warn!("{e}");
        }
        if let Err(e) = self.update_nb_conditions().await {
            warn!("{e}");
        }
        Ok(())
    }

    /// Apply every batch already waiting, so a burst costs one reconcile; then the hosted
    /// gateways the Southbound rows and the identity give.
    fn drain(&mut self) -> ChangeScope {
        let mut scope = ChangeScope::Rows;
        while let Ok(batch) = self.nb_events.try_recv() {
            if batch.kind != BatchKind::Update {
                scope = ChangeScope::Full;
            }
            self.feed.apply(&batch.changes);
        }
        if let Some(sb) = &mut self.southbound
            && sb.drain() == ChangeScope::Full
        {
            scope = ChangeScope::Full;
        }
        if self.identity_feed.has_changed().unwrap_or(false) {
            self.identity = self.identity_feed.borrow_and_update().clone();
        }
        self.hosted = self
            .southbound
            .as_ref()
            .map(|sb| sb.state.hosted(&self.identity.system_id));
        scope
    }

    async fn update_sb_conditions(&mut self) -> Result<bool, NbSessionError> {
        match &mut self.southbound {
            Some(sb) => sb.update_conditions(&self.identity.system_id).await,
            None => Ok(false),
        }
    }

    /// Send each table's condition that differs from the one last sent; whether any was sent.
    async fn update_nb_conditions(&mut self) -> Result<bool, NbSessionError> {
        let want = self.wanted.conditions(
            &self.policy,
            &self.feed.model,
            &self.identity.system_id,
            &self.identity.hostname,
            &self.identity.bridge_mappings,
            self.hosted.as_ref(),
        );
        let mut sent = false;
        for (table, condition) in want {
            if self.conditions.get(table) == Some(condition) {
                continue;
            }
            debug!(table, "updating the Northbound monitor condition");
            self.nb
                .set_condition(table, condition.clone())
                .await
                .map_err(|source| condition_error("Northbound", table, source))?;
            self.conditions.insert(table.clone(), condition.clone());
            sent = true;
        }
        Ok(sent)
    }
}
