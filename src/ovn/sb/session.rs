//! The live Southbound feed every SB driver runs: the local chassis identity, a Southbound
//! client monitoring the tables of [`super::feed::monitor_spec`] with the Port_Binding condition
//! of the driver's [`SbConditionPolicy`], and the loop that keeps the model and the condition
//! current. A driver adds only its policy and its computation over [`SbSession::model`].

use std::collections::BTreeSet;

use tokio::sync::mpsc::UnboundedReceiver;
use tracing::{debug, info, warn};

use super::condition::{ConditionClause, SbConditionPolicy, chassis_condition, monitor_condition};
use super::feed::{SbFeed, SbSchemaError, check_schema, monitor_spec};
use super::model::{ChassisRow, PortBinding, SbModel};
use crate::caps::ovsdb::{BatchKind, ChangeBatch, MonitorSpec, OvsdbClient, OvsdbError, TableSpec};
use crate::config::AgentConfig;
use crate::ovn::connect::{ConnectError, sb_client_config};
use crate::ovn::identity::{ChassisIdentity, IdentityError};
use crate::ovn::table::OvnTable;
use crate::plugin::ChangeScope;

/// How many condition rounds a start waits for: each round follows one more hop of
/// `options:peer` (gateway → router → subnets), so the first reconcile exposes everything.
const START_CONDITION_ROUNDS: usize = crate::replay::MAX_CONDITION_ROUNDS;

/// Why the Southbound feed failed.
#[derive(Debug, thiserror::Error)]
pub enum SbSessionError {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("Southbound: {0}")]
    Ovsdb(#[from] OvsdbError),
    #[error("Southbound: {0}")]
    Schema(#[from] SbSchemaError),
    #[error("Southbound: no schema after connecting")]
    NoSchema,
    #[error("Southbound: the change stream of the client was already taken")]
    EventsTaken,
    #[error("monitor_cond_change on Port_Binding: {0}")]
    Condition(#[source] OvsdbError),
    #[error("Southbound client stopped")]
    SbStopped,
    #[error("local OVS database client stopped")]
    OvsStopped,
}

/// The live Southbound feed of one SB driver, under condition policy `P`.
pub struct SbSession<P> {
    policy: P,
    identity_feed: tokio::sync::watch::Receiver<ChassisIdentity>,
    identity: ChassisIdentity,
    feed: SbFeed,
    sb: OvsdbClient,
    sb_events: UnboundedReceiver<ChangeBatch>,
    /// The Port_Binding condition last sent to the server.
    condition: BTreeSet<ConditionClause>,
    /// Something the policy reads changed since the condition was last computed and sent
    /// (a row the policy says may change it, a Chassis row, the identity, a full replica), or
    /// the last send failed: the next settle computes it again. Most events (a VM port) do
    /// not, and computing it walks every gateway's router (issue 17).
    condition_stale: bool,
}

impl<P: SbConditionPolicy> SbSession<P> {
    /// Connect to the Southbound of `identity` and return once the first complete replica, and
    /// the rows the first conditions pull in, are in the model.
    pub async fn start(
        config: &AgentConfig,
        mut identity_feed: tokio::sync::watch::Receiver<ChassisIdentity>,
        policy: P,
    ) -> Result<Self, SbSessionError> {
        let identity = identity_feed.borrow_and_update().clone();
        let client_config = sb_client_config(config, &identity)?;
        // The Load_Balancer datapath columns differ between OVN versions: ask the schema first.
        let probe = OvsdbClient::connect(
            client_config.clone(),
            MonitorSpec::default().table(
                TableSpec::new("Chassis", &["name"])
                    .with_condition(chassis_condition(&identity.system_id)),
            ),
        )
        .await?;
        let schema = probe.schema().ok_or(SbSessionError::NoSchema)?;
        drop(probe);
        check_schema(&schema)?;
        let feed = SbFeed::default();
        let condition = policy.wanted(&feed.model, &identity.system_id);
        let spec = monitor_spec(
            &schema,
            Some(chassis_condition(&identity.system_id)),
            Some(monitor_condition(&condition)),
        );
        let sb = OvsdbClient::connect(client_config, spec).await?;
        let sb_events = sb.events().ok_or(SbSessionError::EventsTaken)?;
        let mut session = SbSession {
            policy,
            identity_feed,
            identity,
            feed,
            sb,
            sb_events,
            condition,
            condition_stale: true,
        };
        // The initial download, and the rows the first conditions pull in (gateway routers,
        // their subnets) before the first reconcile, so a start exposes everything at once.
        for _ in 0..START_CONDITION_ROUNDS {
            session.drain();
            let before = session.condition.clone();
            session.condition_stale = true;
            session.update_condition().await?;
            if before == session.condition {
                break;
            }
        }
        session.drain();
        info!(
            ports = session.feed.model.port_count(),
            "Southbound replica ready"
        );
        Ok(session)
    }

    /// The model of the rows monitored.
    pub fn model(&self) -> &SbModel {
        &self.feed.model
    }

    /// The last usable chassis identity.
    pub fn identity(&self) -> &ChassisIdentity {
        &self.identity
    }

    /// The Port_Binding clauses last sent to the server.
    pub fn condition(&self) -> &BTreeSet<ConditionClause> {
        &self.condition
    }

    /// Wait for the next Southbound change or identity change, and apply it and everything
    /// already waiting. Cancel-safe: a batch received is applied before any further `.await`.
    /// The condition the model now calls for is sent by [`SbSession::settle`], which the host
    /// never cancels.
    pub async fn changed(&mut self) -> Result<ChangeScope, SbSessionError> {
        let mut scope = ChangeScope::Rows;
        tokio::select! {
            batch = self.sb_events.recv() => match batch {
                Some(batch) => {
                    if batch.kind != BatchKind::Update {
                        scope = ChangeScope::Full;
                    }
                    self.apply(&batch);
                }
                None => return Err(SbSessionError::SbStopped),
            },
            changed = self.identity_feed.changed() => match changed {
                Ok(()) => {
                    self.identity = self.identity_feed.borrow_and_update().clone();
                    self.condition_stale = true;
                }
                Err(_) => return Err(SbSessionError::OvsStopped),
            },
        }
        if self.drain() == ChangeScope::Full {
            scope = ChangeScope::Full;
        }
        Ok(scope)
    }

    /// Follow the condition the model calls for after a change (`monitor_cond_change`). Not
    /// cancel-safe: a cut round trip would leave the recorded condition behind the server's.
    pub async fn settle(&mut self) -> Result<(), SbSessionError> {
        // Not fatal: the client re-sends its conditions after a reconnect, and the next change
        // retries this one.
        if let Err(e) = self.update_condition().await {
            warn!("{e}");
        }
        Ok(())
    }

    /// Apply every batch already waiting, so a burst costs one reconcile.
    fn drain(&mut self) -> ChangeScope {
        let mut scope = ChangeScope::Rows;
        let mut batches = Vec::new();
        while let Ok(b) = self.sb_events.try_recv() {
            batches.push(b);
        }
        for batch in &batches {
            if batch.kind != BatchKind::Update {
                scope = ChangeScope::Full;
            }
            self.apply(batch);
        }
        if self.identity_feed.has_changed().unwrap_or(false) {
            self.identity = self.identity_feed.borrow_and_update().clone();
            self.condition_stale = true;
        }
        scope
    }

    /// Apply a batch to the model, noting whether it touched what the condition is computed
    /// from: a Port_Binding row the policy reads, as it was or as it is now, or a Chassis row.
    fn apply(&mut self, batch: &ChangeBatch) {
        let may_change = |session: &Self| {
            batch.kind != BatchKind::Update
                || batch.changes.iter().any(|c| match &*c.table {
                    PortBinding::TABLE => session
                        .feed
                        .model
                        .port(&c.uuid.to_string())
                        .is_some_and(|p| session.policy.port_may_change(p, &session.condition)),
                    ChassisRow::TABLE => true,
                    _ => false,
                })
        };
        if !self.condition_stale && may_change(self) {
            self.condition_stale = true;
        }
        self.feed.apply(&batch.changes);
        if !self.condition_stale && may_change(self) {
            self.condition_stale = true;
        }
    }

    /// Send a new Port_Binding condition when the model calls for one. The server answers with
    /// the rows that now match (or stop matching), which arrive as ordinary changes.
    async fn update_condition(&mut self) -> Result<(), SbSessionError> {
        if !self.condition_stale {
            return Ok(());
        }
        let want = self
            .policy
            .wanted(&self.feed.model, &self.identity.system_id);
        if want == self.condition {
            self.condition_stale = false;
            return Ok(());
        }
        debug!(
            clauses = want.len(),
            "updating the Port_Binding monitor condition"
        );
        self.sb
            .set_condition("Port_Binding", monitor_condition(&want))
            .await
            .map_err(SbSessionError::Condition)?;
        self.condition = want;
        self.condition_stale = false;
        Ok(())
    }
}
