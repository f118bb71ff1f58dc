//! Rows of a node-local OVN Northbound (the `ovn` exposing method, upstream-behaviour.md §2),
//! kept equal to what a backend wants through OVSDB `transact`.
//!
//! # Desired rows
//! A backend lists rows as [`LocalNbDesired::rows`]: each has an identity ([`NbRowId`]: table
//! and a natural key the backend chooses, e.g. the router's name), its column values
//! ([`NbValue`], generic column → value maps) and, for rows of non-root tables, the parent row
//! and column that holds it ([`NbParent`]).
//!
//! # Ownership
//! A row is the agent's when its `external_ids` carry `ovn-bgp-agent:owned=true`; its identity
//! is `external_ids:ovn-bgp-agent:key`. `Static_MAC_Binding` has no `external_ids`: its rows are
//! the agent's when their `logical_port` is the name of a `Logical_Router_Port` the agent owns,
//! and their identity is `(logical_port, ip)` (the table's index). Rows that are not the agent's
//! are never updated, deleted or removed from a set; a desired row that would collide with one
//! (same index columns, or the same `name` in tables without an index) is skipped and reported.
//!
//! # References
//! Two kinds, both between desired rows:
//! - Containment (`Logical_Router.ports`, `.policies`, `.static_routes`,
//!   `Logical_Switch.ports`, `Logical_Router_Port.gateway_chassis`): the child names its parent
//!   ([`NbRow::parent`]); the parent's column is never compared or overwritten as a whole.
//!   The reconciler adds the child to it (in the parent's `insert`, or with `mutate … insert`
//!   when the parent exists) and removes it from a parent it left (`mutate … delete`), so
//!   children the agent does not own, added to an agent's router by someone else, stay. These
//!   tables are not root tables: a child nobody references is garbage-collected by the server,
//!   which is why the reference must be made in the same transaction as the insert.
//! - Plain references ([`NbAtom::Ref`], e.g. `Logical_Router_Static_Route.bfd`): resolved to
//!   the row's UUID, or to its `named-uuid` when it is inserted in the same transaction.
//!
//! # Reconcile
//! One diff against the replica (all columns of the tables written are monitored), then one
//! transaction: inserts (children before their parents), updates of the desired columns that
//! differ in owned rows (someone edited them), membership mutations, deletes of owned rows no
//! longer desired. Columns a desired row does not list are left alone. Nothing to do sends
//! nothing. Values must be in the server's canonical form (e.g. `networks` as the server
//! stores them), or every reconcile rewrites them.
//!
//! # As a delta (issue 17)
//! The `ovn` method desires one `Static_MAC_Binding` per exposed IP with a MAC: a full plan
//! validates and compares 30k rows per event. [`LocalNb::reconcile`] keeps the last desired
//! state it applied without error and, when nothing changed the agent's rows behind its back
//! since, plans only the rows that differ between it and the new one, found by visiting only
//! what the two persistent maps do not share ([`LocalNbDesired::rows`]), when these are
//! bindings (a root row that refers to nothing and that nothing refers to, so its change
//! requires nothing of the other rows: looked up by the replica's index on `ip`). Whether
//! anything changed behind its back is read from the replica's journal
//! ([`super::ovsdb::Replica::take_journal`]: every row changed since the last plan, taken
//! under the replica's lock with the replica it describes), as the kernel reconciler reads
//! its mirror's dirty set: the server sends a transaction's update before its reply, so the
//! echo of the agent's own transaction is in the journal, and it is told from anyone else's
//! change by what each changed row ended as: the agent's rows as the last desired state
//! wants them (the echo, consumed), or someone else's row that never was one of the agent's
//! (ignored, as a full plan ignores it); anything else (an edit, a deletion, a copy, a child
//! moved, a resync after a reconnect) makes the next plan a full one. Other changes of the
//! desired state (a router port, a peer) are planned in full too.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::ovsdb::schema::{AtomicType, DatabaseSchema};
use super::ovsdb::{
    Atom, BatchKind, ClientConfig, Datum, Journal, MonitorSpec, Mutator, Op, OvsdbClient,
    OvsdbError, Replica, Row, TableSpec, Uuid,
};
use crate::system::ChangeReport;

/// Object class name in the [`ChangeReport`].
pub const CLASS: &str = "local_nb";
/// `external_ids` key marking a row as the agent's.
pub const OWNED_KEY: &str = "ovn-bgp-agent:owned";
/// `external_ids` key holding the row's [`NbRowId::key`].
pub const IDENTITY_KEY: &str = "ovn-bgp-agent:key";

/// Identity of a desired row: its table and a natural key chosen by the backend (a name, or
/// e.g. `10 inport == "bgp-router-openstack"` for a policy).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NbRowId {
    pub table: String,
    pub key: String,
}

impl NbRowId {
    pub fn new(table: &str, key: impl Into<String>) -> Self {
        Self {
            table: table.to_owned(),
            key: key.into(),
        }
    }
}

impl std::fmt::Display for NbRowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.table, self.key)
    }
}

/// One value of a column (no reals: no column the agent writes has them).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NbAtom {
    String(String),
    Integer(i64),
    Boolean(bool),
    /// Another desired row (a UUID column).
    Ref(NbRowId),
}

/// The value of one column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NbValue {
    /// A required scalar column.
    Atom(NbAtom),
    /// A set column, or an optional column (empty: unset).
    Set(BTreeSet<NbAtom>),
    /// A string → string map (`options`, `external_ids`: the agent's marker keys are added).
    Map(BTreeMap<String, String>),
}

impl From<&str> for NbValue {
    fn from(s: &str) -> Self {
        NbValue::Atom(NbAtom::String(s.to_owned()))
    }
}
impl From<String> for NbValue {
    fn from(s: String) -> Self {
        NbValue::Atom(NbAtom::String(s))
    }
}
impl From<i64> for NbValue {
    fn from(i: i64) -> Self {
        NbValue::Atom(NbAtom::Integer(i))
    }
}
impl From<bool> for NbValue {
    fn from(b: bool) -> Self {
        NbValue::Atom(NbAtom::Boolean(b))
    }
}

/// The row and column that hold a row of a non-root table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NbParent {
    pub row: NbRowId,
    pub column: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NbRow {
    pub columns: BTreeMap<String, NbValue>,
    /// Required for rows of non-root tables, refused for the others.
    pub parent: Option<NbParent>,
}

/// Every row the agent wants in the local NB; owned rows not listed are deleted.
///
/// A persistent map: one `Static_MAC_Binding` per exposed IP with a MAC makes it as large as
/// what the chassis exposes, and it is copied per event (the backend's last rendering, the
/// desired state, the tool chain's request): a copy shares the tree, and the next state,
/// derived from the last by what changed, shares all but that (issue 17).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalNbDesired {
    pub rows: imbl::OrdMap<NbRowId, NbRow>,
}

/// The tables the reconciler writes: whether they are root tables and their unique columns.
struct TableRule {
    name: &'static str,
    root: bool,
    /// Columns identifying a row for conflict detection (the schema index, or `name`).
    unique: &'static [&'static str],
}

const TABLES: &[TableRule] = &[
    TableRule {
        name: "Logical_Router",
        root: true,
        unique: &["name"],
    },
    TableRule {
        name: "Logical_Router_Port",
        root: false,
        unique: &["name"],
    },
    TableRule {
        name: "Logical_Switch",
        root: true,
        unique: &["name"],
    },
    TableRule {
        name: "Logical_Switch_Port",
        root: false,
        unique: &["name"],
    },
    TableRule {
        name: "Logical_Router_Policy",
        root: false,
        unique: &[],
    },
    TableRule {
        name: "Logical_Router_Static_Route",
        root: false,
        unique: &[],
    },
    TableRule {
        name: "Gateway_Chassis",
        root: false,
        unique: &["name"],
    },
    TableRule {
        name: "BFD",
        root: true,
        unique: &["logical_port", "dst_ip"],
    },
    TableRule {
        name: STATIC_MAC_BINDING,
        root: true,
        unique: &["logical_port", "ip"],
    },
];

const STATIC_MAC_BINDING: &str = "Static_MAC_Binding";

/// Strong references that hold non-root rows: (parent table, column, child table).
const CONTAINERS: &[(&str, &str, &str)] = &[
    ("Logical_Router", "ports", "Logical_Router_Port"),
    ("Logical_Router", "policies", "Logical_Router_Policy"),
    (
        "Logical_Router",
        "static_routes",
        "Logical_Router_Static_Route",
    ),
    ("Logical_Switch", "ports", "Logical_Switch_Port"),
    ("Logical_Router_Port", "gateway_chassis", "Gateway_Chassis"),
];

fn rule(table: &str) -> Option<&'static TableRule> {
    TABLES.iter().find(|t| t.name == table)
}

/// What one reconcile would send, and what it would change.
#[derive(Debug, Default)]
pub struct LocalNbPlan {
    pub ops: Vec<Op>,
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    /// Desired rows skipped, owned rows kept, with the reason.
    pub errors: Vec<(String, String)>,
}

/// Where the agent's reconciler finds the node-local NB: empty until the `ovn` backend has
/// connected, then filled once. Clones share the one slot.
#[derive(Clone, Default)]
pub struct LocalNbSlot(Arc<std::sync::OnceLock<Arc<LocalNb>>>);

impl LocalNbSlot {
    /// Fills the slot; false if it was already filled (the first connection stays).
    pub fn fill(&self, local_nb: Arc<LocalNb>) -> bool {
        self.0.set(local_nb).is_ok()
    }

    pub fn get(&self) -> Option<&Arc<LocalNb>> {
        self.0.get()
    }
}

/// Keeps the agent's rows of the local NB equal to a [`LocalNbDesired`].
pub struct LocalNb {
    client: OvsdbClient,
    changes: watch::Receiver<u64>,
    transactions: AtomicU64,
    /// One reconcile at a time (two would plan against the same replica and insert twice),
    /// with the last desired state it applied without error: the base of a delta.
    serial: tokio::sync::Mutex<Option<LocalNbDesired>>,
    deltas: AtomicU64,
}

impl LocalNb {
    /// The monitor of the tables the reconciler writes, all columns.
    pub fn monitor_spec() -> MonitorSpec {
        TABLES
            .iter()
            .fold(MonitorSpec::default(), |spec, t| {
                spec.table(TableSpec::new(t.name, &[]))
            })
            // A binding is found by its IP: one per exposed IP.
            .index(STATIC_MAC_BINDING, "ip")
    }

    /// Connects to the local NB (`leader_only`: writes go to the cluster leader) and monitors
    /// the tables it writes. Returns once the first download is in the replica.
    pub async fn connect(mut config: ClientConfig) -> Result<Self, OvsdbError> {
        config.leader_only = true;
        let client = OvsdbClient::connect(config, Self::monitor_spec()).await?;
        Ok(Self::with_client(client))
    }

    /// `[local_ovn_cluster] ovn_nb_connection`, OVN_Northbound. (`ssl:` needs the `[ovn]` key
    /// files: set [`ClientConfig::tls`] and use [`Self::connect`].)
    pub async fn connect_from_config(
        config: &crate::config::AgentConfig,
    ) -> Result<Self, OvsdbError> {
        let mut client_config = ClientConfig::new(
            &config.local_ovn_cluster.ovn_nb_connection,
            "OVN_Northbound",
        )?;
        client_config.max_message_size = crate::ovn::connect::max_message_size(config);
        Self::connect(client_config).await
    }

    /// Wraps a client that monitors at least [`Self::monitor_spec`].
    pub fn with_client(client: OvsdbClient) -> Self {
        client.enable_journal();
        let (tx, rx) = watch::channel(0u64);
        if let Some(mut events) = client.events() {
            tokio::spawn(async move {
                while let Some(batch) = events.recv().await {
                    if batch.kind != BatchKind::Initial {
                        tx.send_modify(|n| *n += 1);
                    }
                }
            });
        }
        Self {
            client,
            changes: rx,
            transactions: AtomicU64::new(0),
            serial: tokio::sync::Mutex::new(None),
            deltas: AtomicU64::new(0),
        }
    }

    /// Changes whenever the monitored tables of the local NB change (anyone's edit, the
    /// agent's own transactions included, and a resync after a reconnect): the host reconciles
    /// when it does, so an edit of the agent's rows is repaired. The value is a counter.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// Whether the local NB changed since the last reconcile in a way a reconcile has to see:
    /// false when every row changed since (the replica's journal, left in place for that
    /// reconcile) is the echo of the agent's own transactions or a row of someone else's, so
    /// that a full plan of the last state applied would find nothing to do
    /// ([`unchanged_since`]). True when there is no such state (never applied, or its
    /// transaction failed) or the journal lost track (a resync after a reconnect). Waits for a
    /// reconcile in flight: the echo of its transaction arrives before its reply, and is only
    /// known as the echo once the reply recorded what it applied. The backend asks this before
    /// waking the host, so a binding added costs one reconcile, not a second one for its echo.
    pub async fn needs_reconcile(&self) -> bool {
        let applied = self.serial.lock().await;
        let Some(last) = applied.as_ref() else {
            return true;
        };
        let replica = self.client.replica();
        replica
            .peek_journal(|journal| journal.lost || !unchanged_since(&replica, last, journal))
            .unwrap_or(true)
    }

    /// Transactions sent so far (a reconcile with nothing to do sends none).
    pub fn transactions_sent(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    pub fn client(&self) -> &OvsdbClient {
        &self.client
    }

    /// Reconciles planned as a delta so far (see [`Self::reconcile`]).
    pub fn deltas_planned(&self) -> u64 {
        self.deltas.load(Ordering::Relaxed)
    }

    /// The diff between `desired` and the replica, as one transaction's operations (a full
    /// plan).
    pub fn plan(&self, desired: &LocalNbDesired) -> LocalNbPlan {
        let Some(schema) = self.client.schema() else {
            return LocalNbPlan {
                errors: vec![("local NB".to_owned(), "no schema yet".to_owned())],
                ..Default::default()
            };
        };
        let replica = self.client.replica();
        plan(&schema, &replica, desired)
    }

    /// Applies the plan in one transaction. Per-row problems are errors of the report; a
    /// failed transaction (nothing applied) is one error.
    ///
    /// A delta when it can be one (see [`plan_delta`]): the last desired state was applied
    /// by this reconciler without error, the rows changed in the local NB since (the
    /// replica's journal: the echo of that transaction, anyone's edits) left the agent's rows
    /// as it wanted them ([`unchanged_since`]), and what differs between it and `desired`
    /// are bindings only. Otherwise a full plan.
    pub async fn reconcile(&self, desired: &LocalNbDesired) -> ChangeReport {
        let mut applied = self.serial.lock().await;
        let mut report = ChangeReport::default();
        let plan = self.plan_from(applied.take().as_ref(), desired);
        for (object, error) in &plan.errors {
            report.error(CLASS, object.clone(), error);
        }
        let clean = plan.errors.is_empty();
        if plan.ops.is_empty() {
            *applied = clean.then(|| desired.clone());
            return report;
        }
        let n = plan.ops.len();
        let mut ops = plan.ops;
        ops.push(Op::comment("ovn-bgp-agent: reconcile the local NB"));
        self.transactions.fetch_add(1, Ordering::Relaxed);
        match self.client.transact(ops).await {
            Ok(_) => {
                report.count_added(CLASS, plan.added);
                report.count_changed(CLASS, plan.changed);
                report.count_removed(CLASS, plan.removed);
                // The server sends a transaction's update before its reply (ovsdb-server(7)
                // 4.1.6): the echo is in the replica, and its journal, already.
                *applied = clean.then(|| desired.clone());
            }
            Err(e) => report.error(CLASS, format!("transaction of {n} operations"), e),
        }
        report
    }

    /// A delta from `last` (the last state applied without error) when it can be one, else a
    /// full plan. Takes the replica's journal either way: the next delta starts from here.
    fn plan_from(&self, last: Option<&LocalNbDesired>, desired: &LocalNbDesired) -> LocalNbPlan {
        let Some(schema) = self.client.schema() else {
            return self.plan(desired);
        };
        let replica = self.client.replica();
        let journal = replica.take_journal();
        if let (Some(last), Some(journal)) = (last, journal)
            && !journal.lost
            && unchanged_since(&replica, last, &journal)
            && let Some(plan) = plan_delta(&schema, &replica, last, desired)
        {
            self.deltas.fetch_add(1, Ordering::Relaxed);
            return plan;
        }
        plan(&schema, &replica, desired)
    }
}

/// The names of the desired router ports (a binding's `logical_port` must be one).
fn lrp_names(desired: &LocalNbDesired) -> HashSet<&str> {
    table_rows(desired, "Logical_Router_Port")
        .filter_map(|(_, r)| string_column(r, "name"))
        .collect()
}

/// The desired rows of one table, found by range (a few, next to many bindings).
fn table_rows<'a>(
    desired: &'a LocalNbDesired,
    table: &'a str,
) -> impl Iterator<Item = (&'a NbRowId, &'a NbRow)> + 'a {
    desired
        .rows
        .range(NbRowId::new(table, "")..)
        .take_while(move |(id, _)| id.table == table)
}

fn string_column<'a>(row: &'a NbRow, column: &str) -> Option<&'a str> {
    match row.columns.get(column) {
        Some(NbValue::Atom(NbAtom::String(s))) => Some(s.as_str()),
        _ => None,
    }
}

/// A replica row as the full plan sees it: `None` when it is not the agent's, its identity
/// when it is (`Err`: the agent's, without one: a stray the full plan deletes). Bindings are
/// the agent's by their port (`lrp_names`: the agent's router ports).
fn owned_identity(row: &Row, lrp_names: &HashSet<&str>) -> Option<Result<NbRowId, ()>> {
    if row.table() == STATIC_MAC_BINDING {
        let port = row.str("logical_port");
        return lrp_names.contains(port).then(|| {
            Ok(NbRowId::new(
                STATIC_MAC_BINDING,
                smb_key(port, row.str("ip")),
            ))
        });
    }
    if rule(row.table()).is_none() || !owned_marker(row) {
        return None;
    }
    Some(
        row.map_get("external_ids", IDENTITY_KEY)
            .map(|key| NbRowId::new(row.table(), key))
            .ok_or(()),
    )
}

/// The one owned row of identity `id` (not a binding), if there is exactly one.
fn find_owned(replica: &Replica, id: &NbRowId) -> Option<Arc<Row>> {
    let mut found = replica.table(&id.table)?.iter().filter(|r| {
        owned_marker(r) && r.map_get("external_ids", IDENTITY_KEY) == Some(id.key.as_str())
    });
    let one = found.next()?;
    found.next().is_none().then(|| one.clone())
}

/// Whether the rows changed in the local NB since `last` was applied (`journal`: its
/// transaction's echo and anyone's edits) leave the agent's rows as `last` wants them, so
/// that a full plan of `last` would find nothing to do. Each changed row is looked at as it
/// is now and as it was before each change: one the agent's under an identity of `last` that
/// it no longer has (deleted, disowned, re-keyed) means that identity's row went behind the
/// agent's back; one that is the agent's now must be a row of `last`, the only one of its
/// identity, with `last`'s columns and, for a router, switch or router port, `last`'s
/// children of the agent's ([`as_desired`]); a row that is not the agent's and was not under
/// an identity of `last` is someone else's, which a full plan does not look at either.
fn unchanged_since(replica: &Replica, last: &LocalNbDesired, journal: &Journal) -> bool {
    let lrp_names = lrp_names(last);
    journal.rows.iter().all(|((table, uuid), versions)| {
        let now = replica.row(table, *uuid);
        let is = now.and_then(|r| owned_identity(r, &lrp_names));
        let gone = versions
            .iter()
            .filter_map(|v| owned_identity(v, &lrp_names)?.ok())
            .any(|was| last.rows.contains_key(&was) && !matches!(&is, Some(Ok(is)) if *is == was));
        match (is, now) {
            _ if gone => false,
            (None, _) => true,
            (Some(Ok(is)), Some(now)) => as_desired(replica, last, &is, now, &lrp_names),
            (Some(_), _) => false, // a stray of the agent's: a full plan deletes it
        }
    })
}

/// Whether the agent's row `row` of identity `id` is as `last` wants it.
fn as_desired(
    replica: &Replica,
    last: &LocalNbDesired,
    id: &NbRowId,
    row: &Arc<Row>,
    lrp_names: &HashSet<&str>,
) -> bool {
    let Some(want) = last.rows.get(id) else {
        return false; // the agent's and not desired: a full plan deletes it
    };
    // Bindings are unique by the schema's index; the others by nothing but the agent.
    if id.table != STATIC_MAC_BINDING
        && find_owned(replica, id).is_none_or(|r| r.uuid() != row.uuid())
    {
        return false;
    }
    let parent = want.parent.as_ref().map(|p| &p.row);
    let mut handles: HashMap<&NbRowId, Handle> = HashMap::new();
    for r in refs(want).filter(|r| Some(*r) != parent) {
        match find_owned(replica, r) {
            Some(target) => handles.insert(r, Handle::Existing(target.uuid())),
            None => return false,
        };
    }
    if update_op(id, want, row, &handles).is_some() {
        return false;
    }
    // The agent's children in its containment columns: those of `last`, in no other.
    CONTAINERS
        .iter()
        .filter(|(parent, _, _)| *parent == id.table)
        .all(|(_, column, child)| {
            let members: BTreeSet<NbRowId> = row
                .uuids(column)
                .filter_map(|u| replica.row(child, u))
                .filter_map(|r| owned_identity(r, lrp_names)?.ok())
                .collect();
            let wanted: BTreeSet<NbRowId> = table_rows(last, child)
                .filter(|(_, r)| {
                    r.parent
                        .as_ref()
                        .is_some_and(|p| p.row == *id && p.column == *column)
                })
                .map(|(c, _)| c.clone())
                .collect();
            members == wanted
        })
}

/// A delta from `last`, applied without error and unchanged since (see [`unchanged_since`]),
/// to `desired`: only the rows that differ are planned, found by visiting only what the two
/// persistent maps do not share. `None` (a full plan is needed) unless every row that differs
/// is a `Static_MAC_Binding` (one per exposed IP: what changes per event) under its own
/// identity: a root row that refers to nothing and that nothing refers to, so its change
/// requires nothing of the other rows. The operations and counts are those a full plan
/// would make for the same replica.
fn plan_delta(
    schema: &DatabaseSchema,
    replica: &Replica,
    last: &LocalNbDesired,
    desired: &LocalNbDesired,
) -> Option<LocalNbPlan> {
    let binding = |id: &NbRowId, row: &NbRow| {
        id.table == STATIC_MAC_BINDING
            && row.parent.is_none()
            && refs(row).next().is_none()
            && match_id(id, row) == *id
    };
    let mut upserts = Vec::new();
    let mut removals = Vec::new();
    for d in last.rows.diff(&desired.rows) {
        match d {
            imbl::ordmap::DiffItem::Add(id, row) => upserts.push((id, row)),
            imbl::ordmap::DiffItem::Update { old, new } => {
                if !binding(old.0, old.1) {
                    return None;
                }
                upserts.push(new);
            }
            imbl::ordmap::DiffItem::Remove(id, row) => removals.push((id, row)),
        }
    }
    if upserts
        .iter()
        .chain(&removals)
        .any(|(id, row)| !binding(id, row))
    {
        return None;
    }
    let table = replica.table(STATIC_MAC_BINDING)?;
    // The agent's binding of this identity: its port is one of the agent's router ports
    // (those of `last`, which are those of `desired`: only bindings differ).
    let lrp_names = lrp_names(desired);
    let find = |row: &NbRow| -> Option<Option<Arc<Row>>> {
        let (port, ip) = (
            string_column(row, "logical_port")?,
            string_column(row, "ip")?,
        );
        let found = table.find_str("ip", ip).ok()?;
        Some(
            found
                .into_iter()
                .find(|r| r.str("logical_port") == port && lrp_names.contains(port))
                .cloned(),
        )
    };
    let mut out = LocalNbPlan::default();
    let no_handles = HashMap::new();
    let (mut inserts, mut updates, mut deletes) = (Vec::new(), Vec::new(), Vec::new());
    for (n, (id, row)) in upserts.iter().enumerate() {
        let current = find(row)?;
        let exists = |_: &NbRowId| current.is_some();
        if let Err(why) = validate(schema, replica, &exists, id, row, &lrp_names) {
            out.errors.push((format!("write {id}"), why));
            continue;
        }
        match current {
            Some(cur) => {
                if let Some(op) = update_op(id, row, &cur, &no_handles) {
                    updates.push(op);
                    out.changed += 1;
                }
            }
            None => {
                inserts.push(insert_op(id, row, &no_handles, &format!("row{n}")));
                out.added += 1;
            }
        }
    }
    for (_, row) in &removals {
        if let Some(cur) = find(row)? {
            deletes.push(Op::delete(STATIC_MAC_BINDING).where_uuid(cur.uuid()));
            out.removed += 1;
        }
    }
    out.ops.extend(inserts);
    out.ops.extend(updates);
    out.ops.extend(deletes);
    Some(out)
}

fn owned_marker(row: &Row) -> bool {
    row.map_get("external_ids", OWNED_KEY) == Some("true")
}

/// Sorted, comparable form of a datum: set elements and map pairs in a stable order.
fn canonical(d: &Datum) -> (Vec<String>, Vec<(String, String)>) {
    let key = |a: &Atom| serde_json::to_string(a).unwrap_or_default();
    let mut atoms: Vec<String> = d.atoms().iter().map(key).collect();
    atoms.sort();
    let mut pairs: Vec<(String, String)> =
        d.pairs().iter().map(|(k, v)| (key(k), key(v))).collect();
    pairs.sort();
    (atoms, pairs)
}

/// How a desired row is referred to in the transaction.
#[derive(Clone)]
enum Handle {
    Existing(Uuid),
    New(Arc<str>),
}

impl Handle {
    fn atom(&self) -> Atom {
        match self {
            Handle::Existing(u) => Atom::Uuid(*u),
            Handle::New(n) => Atom::NamedUuid(n.clone()),
        }
    }
}

fn atom_of(atom: &NbAtom, handles: &HashMap<&NbRowId, Handle>) -> Option<Atom> {
    Some(match atom {
        NbAtom::String(s) => Atom::string(s),
        NbAtom::Integer(i) => Atom::Integer(*i),
        NbAtom::Boolean(b) => Atom::Boolean(*b),
        NbAtom::Ref(id) => handles.get(id)?.atom(),
    })
}

fn datum_of(value: &NbValue, handles: &HashMap<&NbRowId, Handle>) -> Option<Datum> {
    Some(match value {
        NbValue::Atom(a) => Datum::Atom(atom_of(a, handles)?),
        NbValue::Set(s) => Datum::Set(
            s.iter()
                .map(|a| atom_of(a, handles))
                .collect::<Option<Vec<_>>>()?
                .into_boxed_slice(),
        ),
        NbValue::Map(m) => Datum::map(m.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    })
}

fn atom_ref(a: &NbAtom) -> Option<&NbRowId> {
    match a {
        NbAtom::Ref(id) => Some(id),
        _ => None,
    }
}

fn refs(row: &NbRow) -> impl Iterator<Item = &NbRowId> {
    row.columns
        .values()
        .flat_map(|v| -> Vec<&NbRowId> {
            match v {
                NbValue::Atom(a) => atom_ref(a).into_iter().collect(),
                NbValue::Set(s) => s.iter().filter_map(atom_ref).collect(),
                NbValue::Map(_) => Vec::new(),
            }
        })
        .chain(row.parent.as_ref().map(|p| &p.row))
}

/// Type check of one desired column against the schema.
fn check_column(
    schema: &DatabaseSchema,
    table: &str,
    column: &str,
    value: &NbValue,
) -> Result<(), String> {
    let ty = schema
        .tables
        .get(table)
        .and_then(|t| t.columns.get(column))
        .ok_or_else(|| format!("the schema has no column {table}.{column}"))?;
    if column.starts_with('_') {
        return Err(format!("{column} cannot be written"));
    }
    let atom_fits = |a: &NbAtom| {
        matches!(
            (a, ty.key),
            (NbAtom::String(_), AtomicType::String)
                | (NbAtom::Integer(_), AtomicType::Integer)
                | (NbAtom::Boolean(_), AtomicType::Boolean)
                | (NbAtom::Ref(_), AtomicType::Uuid)
        )
    };
    let ok = match value {
        NbValue::Map(_) => {
            ty.is_map() && ty.key == AtomicType::String && ty.value == Some(AtomicType::String)
        }
        _ if ty.is_map() => false,
        NbValue::Atom(a) => atom_fits(a) && ty.min <= 1,
        NbValue::Set(s) => {
            s.iter().all(atom_fits)
                && (s.len() as u64) >= ty.min
                && ty.max.is_none_or(|max| s.len() as u64 <= max)
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "value {value:?} does not fit the type of {table}.{column} ({ty:?})"
        ))
    }
}

/// Owned rows of the replica by identity, plus every row's ownership.
struct Existing {
    by_id: HashMap<NbRowId, Arc<Row>>,
    owned: HashSet<Uuid>,
    /// Owned rows that have no (or a duplicate) identity: deleted.
    strays: Vec<Arc<Row>>,
}

fn smb_key(logical_port: &str, ip: &str) -> String {
    format!("{logical_port} {ip}")
}

fn existing(replica: &Replica) -> Existing {
    let mut by_id = HashMap::new();
    let mut owned = HashSet::new();
    let mut strays = Vec::new();
    let mut owned_lrp_names = HashSet::new();
    for t in TABLES.iter().filter(|t| t.name != STATIC_MAC_BINDING) {
        let Some(table) = replica.table(t.name) else {
            continue;
        };
        for row in table.iter().filter(|r| owned_marker(r)) {
            owned.insert(row.uuid());
            if t.name == "Logical_Router_Port" {
                owned_lrp_names.insert(row.str("name").to_owned());
            }
            match row.map_get("external_ids", IDENTITY_KEY) {
                Some(key) => {
                    let id = NbRowId::new(t.name, key);
                    if let Some(dup) = by_id.insert(id, row.clone()) {
                        strays.push(dup);
                    }
                }
                None => strays.push(row.clone()),
            }
        }
    }
    if let Some(table) = replica.table(STATIC_MAC_BINDING) {
        for row in table
            .iter()
            .filter(|r| owned_lrp_names.contains(r.str("logical_port")))
        {
            owned.insert(row.uuid());
            let id = NbRowId::new(
                STATIC_MAC_BINDING,
                smb_key(row.str("logical_port"), row.str("ip")),
            );
            by_id.insert(id, row.clone());
        }
    }
    Existing {
        by_id,
        owned,
        strays,
    }
}

/// The identity under which a desired row is matched with the replica: its own, except for
/// `Static_MAC_Binding` (no `external_ids`), matched by `(logical_port, ip)`.
fn match_id(id: &NbRowId, row: &NbRow) -> NbRowId {
    if id.table != STATIC_MAC_BINDING {
        return id.clone();
    }
    let col = |c: &str| match row.columns.get(c) {
        Some(NbValue::Atom(NbAtom::String(s))) => s.clone(),
        _ => String::new(),
    };
    NbRowId::new(
        STATIC_MAC_BINDING,
        smb_key(&col("logical_port"), &col("ip")),
    )
}

fn plan(schema: &DatabaseSchema, replica: &Replica, desired: &LocalNbDesired) -> LocalNbPlan {
    let mut out = LocalNbPlan::default();
    let existing = existing(replica);

    // 1. Rows that cannot be written: unknown table, bad column, wrong parent, collision with
    //    a row that is not the agent's; then, until nothing changes, rows that depend on them.
    let mut refused: BTreeMap<&NbRowId, String> = BTreeMap::new();
    let desired_lrp_names = lrp_names(desired);
    for (id, row) in &desired.rows {
        let exists = |m: &NbRowId| existing.by_id.contains_key(m);
        if let Err(why) = validate(schema, replica, &exists, id, row, &desired_lrp_names) {
            refused.insert(id, why);
        }
    }
    loop {
        let before = refused.len();
        for (id, row) in &desired.rows {
            if refused.contains_key(id) {
                continue;
            }
            if let Some(dep) = refs(row).find(|r| refused.contains_key(r)) {
                refused.insert(id, format!("depends on {dep}, which is skipped"));
            } else if let Some(missing) = refs(row).find(|r| !desired.rows.contains_key(*r)) {
                refused.insert(id, format!("refers to {missing}, which is not desired"));
            }
        }
        if refused.len() == before {
            break;
        }
    }
    for (id, why) in &refused {
        out.errors.push((format!("write {id}"), why.clone()));
    }
    let wanted: BTreeMap<&NbRowId, &NbRow> = desired
        .rows
        .iter()
        .filter(|(id, _)| !refused.contains_key(id))
        .collect();

    // 2. Handles: the UUID of an owned row, or a named-uuid for a row to insert.
    let mut handles: HashMap<&NbRowId, Handle> = HashMap::new();
    let mut current: HashMap<&NbRowId, Arc<Row>> = HashMap::new();
    for (n, (id, row)) in wanted.iter().enumerate() {
        match existing.by_id.get(&match_id(id, row)) {
            Some(r) => {
                handles.insert(*id, Handle::Existing(r.uuid()));
                current.insert(*id, r.clone());
            }
            None => {
                handles.insert(*id, Handle::New(Arc::from(format!("row{n}"))));
            }
        }
    }

    // 3. Children per parent (for new parents: in their insert).
    let mut children: BTreeMap<(&NbRowId, &str), Vec<Atom>> = BTreeMap::new();
    for (id, row) in &wanted {
        if let Some(p) = &row.parent {
            children
                .entry((&p.row, p.column.as_str()))
                .or_default()
                .push(handles[*id].atom());
        }
    }

    // 4. Inserts, children before the rows that refer to them.
    let mut inserts = Vec::new();
    for id in insertion_order(&wanted) {
        let row = wanted[id];
        let Handle::New(name) = &handles[id] else {
            continue;
        };
        let mut op = insert_op(id, row, &handles, name);
        for ((parent, column), atoms) in &children {
            if *parent == id {
                op = op.set(column, Datum::Set(atoms.clone().into_boxed_slice()));
            }
        }
        inserts.push(op);
        out.added += 1;
    }
    out.ops.extend(inserts);

    // 5. Updates of owned rows whose desired columns differ, and membership of children.
    let mut changed_rows: HashSet<&NbRowId> = HashSet::new();
    for (id, row) in &wanted {
        let Some(cur) = current.get(*id) else {
            continue;
        };
        if let Some(op) = update_op(id, row, cur, &handles) {
            out.ops.push(op);
            changed_rows.insert(id);
        }
    }
    for (id, row) in &wanted {
        let Some(p) = &row.parent else { continue };
        let (child, Handle::Existing(parent)) = (&handles[*id], &handles[&p.row]) else {
            continue; // a new parent lists its children in its insert
        };
        let child = match child {
            Handle::Existing(child) => *child,
            // A new child of an existing parent: added to it in this transaction (after its
            // insert, which the named-uuid refers to), or the server collects it at once.
            Handle::New(_) => {
                out.ops
                    .push(Op::mutate(&p.row.table).where_uuid(*parent).mutation(
                        &p.column,
                        Mutator::Insert,
                        Datum::Atom(child.atom()),
                    ));
                continue;
            }
        };
        let parent_row = &current[&p.row];
        if !parent_row.uuids(&p.column).any(|u| u == child) {
            out.ops
                .push(Op::mutate(&p.row.table).where_uuid(*parent).mutation(
                    &p.column,
                    Mutator::Insert,
                    Datum::Atom(Atom::Uuid(child)),
                ));
            changed_rows.insert(id);
        }
        // Left another parent of the agent's (moved): taken out there.
        if let Some(table) = replica.table(&p.row.table) {
            for other in table.iter().filter(|r| {
                r.uuid() != *parent
                    && existing.owned.contains(&r.uuid())
                    && r.uuids(&p.column).any(|u| u == child)
            }) {
                out.ops
                    .push(Op::mutate(&p.row.table).where_uuid(other.uuid()).mutation(
                        &p.column,
                        Mutator::Delete,
                        Datum::Atom(Atom::Uuid(child)),
                    ));
                changed_rows.insert(id);
            }
        }
    }
    out.changed = changed_rows.len();

    // 6. Deletes of owned rows no longer desired.
    let keep: HashSet<Uuid> = current.values().map(|r| r.uuid()).collect();
    let mut doomed: Vec<Arc<Row>> = existing
        .by_id
        .values()
        .filter(|r| !keep.contains(&r.uuid()))
        .cloned()
        .collect();
    doomed.extend(existing.strays.iter().cloned());
    doomed.sort_by_key(|r| r.uuid());
    doomed.dedup_by_key(|r| r.uuid());
    // Someone else's row holds it (deleting it would break their reference), or it holds
    // someone else's row (the server would garbage-collect theirs): left alone, reported.
    let mut kept_rows: HashSet<Uuid> = HashSet::new();
    for row in &doomed {
        let what = format!(
            "delete {} {}",
            row.table(),
            row.map_get("external_ids", IDENTITY_KEY).unwrap_or("")
        );
        let why = if let Some(holder) =
            holders(replica, row).find(|h| !existing.owned.contains(&h.uuid()))
        {
            format!(
                "held by {} {}, which is not the agent's",
                holder.table(),
                holder.uuid()
            )
        } else if let Some(child) = held(row).find(|c| !existing.owned.contains(c)) {
            format!("holds row {child}, which is not the agent's")
        } else {
            continue;
        };
        out.errors.push((what, why));
        kept_rows.insert(row.uuid());
    }
    let doomed_set: HashSet<Uuid> = doomed
        .iter()
        .map(|r| r.uuid())
        .filter(|u| !kept_rows.contains(u))
        .collect();
    for row in doomed.iter().filter(|r| doomed_set.contains(&r.uuid())) {
        // A holder that stays (kept, refused or still desired) lets go of it first.
        for holder in holders(replica, row).filter(|h| !doomed_set.contains(&h.uuid())) {
            for (parent, column, child) in CONTAINERS {
                if *parent == holder.table()
                    && *child == row.table()
                    && holder.uuids(column).any(|u| u == row.uuid())
                {
                    out.ops
                        .push(Op::mutate(parent).where_uuid(holder.uuid()).mutation(
                            column,
                            Mutator::Delete,
                            Datum::Atom(Atom::Uuid(row.uuid())),
                        ));
                }
            }
        }
        out.ops.push(Op::delete(row.table()).where_uuid(row.uuid()));
        out.removed += 1;
    }
    out
}

/// The insert of a desired row, without the children a new parent lists.
fn insert_op(id: &NbRowId, row: &NbRow, handles: &HashMap<&NbRowId, Handle>, name: &str) -> Op {
    let mut op = Op::insert(&id.table).uuid_name(name);
    for (column, value) in &row.columns {
        if column == "external_ids" {
            continue;
        }
        if let Some(d) = datum_of(value, handles) {
            op = op.set(column, d);
        }
    }
    if let Some(ext) = external_ids(id, row) {
        op = op.set("external_ids", ext);
    }
    op
}

/// The update of the desired columns of `cur` that differ, if any.
fn update_op(
    id: &NbRowId,
    row: &NbRow,
    cur: &Row,
    handles: &HashMap<&NbRowId, Handle>,
) -> Option<Op> {
    let mut op = Op::update(&id.table).where_uuid(cur.uuid());
    let mut differs = false;
    for (column, value) in &row.columns {
        if column == "external_ids" {
            continue;
        }
        let Some(want) = datum_of(value, handles) else {
            continue;
        };
        if cur.get(column).map(canonical) != Some(canonical(&want)) {
            op = op.set(column, want);
            differs = true;
        }
    }
    if let Some(want) = external_ids(id, row)
        && cur.get("external_ids").map(canonical) != Some(canonical(&want))
    {
        op = op.set("external_ids", want);
        differs = true;
    }
    differs.then_some(op)
}

/// Rows holding `row` through a containment column.
fn holders<'a>(replica: &'a Replica, row: &'a Row) -> impl Iterator<Item = &'a Arc<Row>> + 'a {
    CONTAINERS
        .iter()
        .filter(move |(_, _, child)| *child == row.table())
        .filter_map(move |(parent, column, _)| Some((replica.table(parent)?, *column)))
        .flat_map(move |(table, column)| {
            table
                .iter()
                .filter(move |h| h.uuids(column).any(|u| u == row.uuid()))
        })
}

/// Rows `row` holds through its containment columns.
fn held(row: &Row) -> impl Iterator<Item = Uuid> + '_ {
    CONTAINERS
        .iter()
        .filter(move |(parent, _, _)| *parent == row.table())
        .flat_map(move |(_, column, _)| row.uuids(column).collect::<Vec<_>>())
}

/// The desired `external_ids` plus the agent's marker and identity (not for
/// `Static_MAC_Binding`, which has none).
fn external_ids(id: &NbRowId, row: &NbRow) -> Option<Datum> {
    if id.table == STATIC_MAC_BINDING {
        return None;
    }
    let mut map = match row.columns.get("external_ids") {
        Some(NbValue::Map(m)) => m.clone(),
        _ => BTreeMap::new(),
    };
    map.insert(OWNED_KEY.to_owned(), "true".to_owned());
    map.insert(IDENTITY_KEY.to_owned(), id.key.clone());
    Some(Datum::map(map))
}

fn validate(
    schema: &DatabaseSchema,
    replica: &Replica,
    exists: &dyn Fn(&NbRowId) -> bool,
    id: &NbRowId,
    row: &NbRow,
    desired_lrp_names: &HashSet<&str>,
) -> Result<(), String> {
    let rule = rule(&id.table).ok_or_else(|| {
        format!(
            "table {} is not one the local NB reconciler writes",
            id.table
        )
    })?;
    for (column, value) in &row.columns {
        check_column(schema, &id.table, column, value)?;
    }
    match (&row.parent, rule.root) {
        (None, false) => {
            return Err(format!(
                "{} is not a root table: the row needs a parent (the server would drop it)",
                id.table
            ));
        }
        (Some(_), true) => return Err(format!("{} rows have no parent", id.table)),
        (Some(p), false) => {
            if !CONTAINERS.iter().any(|(pt, col, child)| {
                *pt == p.row.table && *col == p.column && *child == id.table
            }) {
                return Err(format!(
                    "{}.{} does not hold {} rows",
                    p.row.table, p.column, id.table
                ));
            }
        }
        (None, true) => {}
    }
    if let Some((_, column, child)) = CONTAINERS
        .iter()
        .find(|(parent, column, _)| *parent == id.table && row.columns.contains_key(*column))
    {
        return Err(format!(
            "{}.{column} is filled from the {child} rows that name this row as their parent, not listed",
            id.table
        ));
    }
    if id.table == STATIC_MAC_BINDING {
        let port = match row.columns.get("logical_port") {
            Some(NbValue::Atom(NbAtom::String(s))) => s.as_str(),
            _ => return Err("logical_port must be a string".to_owned()),
        };
        if !desired_lrp_names.contains(port) {
            return Err(format!(
                "logical_port {port} is not a Logical_Router_Port the agent writes, so the binding could not be recognised as the agent's"
            ));
        }
    }
    // A row of someone else with the same unique columns: the insert would fail the whole
    // transaction (indexed tables) or leave two rows of one name.
    if !exists(&match_id(id, row)) && !rule.unique.is_empty() {
        let wanted: Option<Vec<Datum>> = rule
            .unique
            .iter()
            .map(|c| {
                row.columns
                    .get(*c)
                    .and_then(|v| datum_of(v, &HashMap::new()))
            })
            .collect();
        let same = |r: &&Arc<Row>| {
            wanted.as_ref().is_some_and(|wanted| {
                rule.unique
                    .iter()
                    .zip(wanted)
                    .all(|(c, w)| r.get(c).map(canonical) == Some(canonical(w)))
            })
        };
        let other = replica.table(&id.table).and_then(|table| {
            // A binding through the index on its IP (one per exposed IP: a scan each would
            // make a plan quadratic).
            match (id.table == STATIC_MAC_BINDING, string_column(row, "ip")) {
                (true, Some(ip)) => match table.find_str("ip", ip) {
                    Ok(found) => found.into_iter().find(same).cloned(),
                    Err(_) => table.iter().find(same).cloned(),
                },
                _ => table.iter().find(same).cloned(),
            }
        });
        if let Some(other) = other {
            return Err(format!(
                "{} row {} has the same {} and is not the agent's",
                id.table,
                other.uuid(),
                rule.unique.join(", ")
            ));
        }
    }
    Ok(())
}

/// Rows in an order where every row comes after the rows it refers to (children first).
fn insertion_order<'a>(wanted: &BTreeMap<&'a NbRowId, &'a NbRow>) -> Vec<&'a NbRowId> {
    // Edges: a row refers to its plain references; a parent refers to its children.
    let mut deps: BTreeMap<&NbRowId, BTreeSet<&NbRowId>> = BTreeMap::new();
    for (id, row) in wanted {
        let entry = deps.entry(*id).or_default();
        for r in refs(row) {
            if row.parent.as_ref().map(|p| &p.row) != Some(r) {
                entry.insert(r);
            }
        }
        if let Some(p) = &row.parent {
            deps.entry(&p.row).or_default().insert(*id);
        }
    }
    let mut order = Vec::new();
    let mut done: HashSet<&NbRowId> = HashSet::new();
    while order.len() < wanted.len() {
        let ready: Vec<&NbRowId> = wanted
            .keys()
            .filter(|id| !done.contains(*id))
            .filter(|id| {
                deps.get(*id).is_none_or(|d| {
                    d.iter()
                        .all(|x| done.contains(x) || !wanted.contains_key(x))
                })
            })
            .copied()
            .collect();
        // A cycle: the server resolves named-uuids of the whole transaction anyway.
        let ready = if ready.is_empty() {
            wanted
                .keys()
                .filter(|id| !done.contains(*id))
                .copied()
                .collect()
        } else {
            ready
        };
        for id in ready {
            done.insert(id);
            order.push(id);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(t: &str, k: &str) -> NbRowId {
        NbRowId::new(t, k)
    }

    #[test]
    fn children_are_inserted_before_their_parents() {
        let lr = id("Logical_Router", "r");
        let lrp = id("Logical_Router_Port", "p");
        let gc = id("Gateway_Chassis", "g");
        let rows: BTreeMap<NbRowId, NbRow> = [
            (lr.clone(), NbRow::default()),
            (
                lrp.clone(),
                NbRow {
                    parent: Some(NbParent {
                        row: lr.clone(),
                        column: "ports".into(),
                    }),
                    ..Default::default()
                },
            ),
            (
                gc.clone(),
                NbRow {
                    parent: Some(NbParent {
                        row: lrp.clone(),
                        column: "gateway_chassis".into(),
                    }),
                    ..Default::default()
                },
            ),
        ]
        .into();
        let wanted: BTreeMap<&NbRowId, &NbRow> = rows.iter().collect();
        assert_eq!(insertion_order(&wanted), [&gc, &lrp, &lr]);
    }

    #[test]
    fn canonical_ignores_set_and_map_order() {
        let a = Datum::set(vec![Atom::string("b"), Atom::string("a")]);
        let b = Datum::set(vec![Atom::string("a"), Atom::string("b")]);
        assert_eq!(canonical(&a), canonical(&b));
        let m1 = Datum::map([("x", "1"), ("y", "2")]);
        let m2 = Datum::map([("y", "2"), ("x", "1")]);
        assert_eq!(canonical(&m1), canonical(&m2));
        // A one-element set and the scalar are the same value.
        assert_eq!(
            canonical(&Datum::Set(vec![Atom::Integer(1)].into_boxed_slice())),
            canonical(&Datum::Atom(Atom::Integer(1)))
        );
    }
}
