//! The client: one owner task per database connection that connects (trying the remotes of a
//! cluster in turn), checks the server through `_Server`, validates the schema, monitors, applies
//! updates to the replica, emits change batches, answers echoes, probes inactivity, runs the
//! caller's requests and reconnects with backoff when anything goes wrong.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock, RwLockReadGuard, Weak};
use std::time::Duration;

use tokio::time::Instant;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::error::OvsdbError;
use super::jsonrpc::{Connection, Incoming, RawJson, WireStats};
use super::monitor::{MonitorMethod, TableUpdate, UpdateFormat, monitor_requests};
use super::ops::{Clause, MonitorCondition, Op, OpResult, parse_transact_result};
use super::remote::{Backoff, Remote, TlsFiles, connect, random_u64};
use super::replica::{Change, Replica, TableMeta};
use super::schema::{AtomicType, ColumnType, DatabaseSchema};
use super::types::{Interner, Uuid};
use std::cell::RefCell;

/// How to reach the database.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The servers; several for a cluster (tried from a random start, as OVS does).
    pub remotes: Vec<Remote>,
    /// Database name, e.g. `OVN_Southbound`.
    pub db: String,
    /// Only use a clustered server that is the leader (and move when leadership moves).
    pub leader_only: bool,
    /// Key, certificate and CA for `ssl:` remotes.
    pub tls: Option<TlsFiles>,
    /// Send an echo after this long without traffic; drop the connection if the next interval
    /// passes silently too. `None` disables the probe.
    pub probe_interval: Option<Duration>,
    /// Largest accepted incoming message, in bytes. Also the budget of decoded messages
    /// waiting for the client task, and of change batches waiting for the consumer.
    pub max_message_size: usize,
    /// Longest one write to the server may take (a server that stops reading).
    pub write_timeout: Duration,
    /// First and longest delay between reconnect rounds.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Limit on connecting plus the handshake (get_schema, monitor) with one server.
    pub handshake_timeout: Duration,
}

impl ClientConfig {
    /// Default of [`ClientConfig::max_message_size`] (`[ovn] ovsdb_max_message_size`): 256 MiB,
    /// over three times the 70 MB first download of a 100k-port Southbound.
    pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 256 << 20;

    /// A configuration with the defaults: no leader-only, no TLS, 5 s probe, 256 MiB message
    /// limit, 30 s write timeout, 100 ms..8 s backoff.
    pub fn new(remotes: &str, db: &str) -> Result<Self, OvsdbError> {
        Ok(ClientConfig {
            remotes: Remote::parse_list(remotes)?,
            db: db.to_owned(),
            leader_only: false,
            tls: None,
            probe_interval: Some(Duration::from_secs(5)),
            max_message_size: Self::DEFAULT_MAX_MESSAGE_SIZE,
            write_timeout: super::jsonrpc::DEFAULT_WRITE_TIMEOUT,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(8),
            handshake_timeout: Duration::from_secs(60),
        })
    }
}

/// One monitored table: the columns needed (empty = all columns) and which rows.
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub name: String,
    pub columns: Vec<String>,
    pub condition: MonitorCondition,
}

impl TableSpec {
    pub fn new(name: &str, columns: &[&str]) -> Self {
        TableSpec {
            name: name.to_owned(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            condition: MonitorCondition::All,
        }
    }
    pub fn with_condition(mut self, condition: MonitorCondition) -> Self {
        self.condition = condition;
        self
    }
}

/// Everything the client monitors, and the indexes kept on the replica.
#[derive(Debug, Clone, Default)]
pub struct MonitorSpec {
    pub tables: Vec<TableSpec>,
    /// `(table, column)` pairs to index.
    pub indexes: Vec<(String, String)>,
}

impl MonitorSpec {
    pub fn table(mut self, t: TableSpec) -> Self {
        self.tables.push(t);
        self
    }
    pub fn index(mut self, table: &str, column: &str) -> Self {
        self.indexes.push((table.to_owned(), column.to_owned()));
        self
    }

    /// The replica layout of these tables in `schema`, or an error naming the first table or
    /// column the schema lacks. (Also how recorded contents are loaded without a server.)
    pub fn metas(&self, schema: &DatabaseSchema) -> Result<Vec<Arc<TableMeta>>, OvsdbError> {
        let mut metas = Vec::new();
        for t in &self.tables {
            let mut cols = t.columns.clone();
            cols.extend(t.condition.columns().map(str::to_owned));
            let ts = schema.check(&t.name, &cols)?;
            // No columns listed: every column of the table (sorted, for a stable layout).
            let wanted: Vec<String> = if t.columns.is_empty() {
                let mut all: Vec<String> = ts
                    .columns
                    .keys()
                    .filter(|c| !c.starts_with('_'))
                    .cloned()
                    .collect();
                all.sort();
                all
            } else {
                t.columns.clone()
            };
            let columns = wanted
                .iter()
                .filter(|c| *c != "_uuid")
                .map(|c| (c.clone(), ts.columns[c].clone()))
                .collect();
            metas.push(Arc::new(TableMeta::new(&t.name, columns)));
        }
        Ok(metas)
    }
}

/// Why a batch was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    /// The first complete download: every row is an insert.
    Initial,
    /// A complete re-download after a reconnect: only rows that differ from the replica's
    /// previous content are reported; a driver should reconcile once.
    Resync,
    /// An incremental transaction (including the missed transactions replayed on resume).
    Update,
}

/// The row changes of one server transaction, or of one resync, delivered in the order the
/// server committed them and only after the replica has applied them.
///
/// Rows inside one batch have no particular order (the server sends a set of row changes).
/// When a session resumes (`monitor_cond_since` found the last transaction id), the server
/// merges all the transactions missed while disconnected into one `Update` batch.
///
/// No change is ever dropped, and the queue is bounded in bytes: while the batches the consumer
/// has not dropped yet weigh more than [`ClientConfig::max_message_size`], further changes are
/// merged per row into one batch (see [`super::events`]), which arrives once the consumer has
/// made room.
#[derive(Debug, Clone)]
pub struct ChangeBatch {
    pub kind: BatchKind,
    /// Transaction id after this batch (clustered databases with `monitor_cond_since`).
    pub txn_id: Option<Uuid>,
    pub changes: Vec<Change>,
    /// For a batch from one update notification: when the notification had been read off the
    /// socket, so `received.elapsed()` at the consumer is the client's own share of the
    /// latency (decode, replica, indexes, channel).
    pub received: Option<tokio::time::Instant>,
    /// This batch's share of the queue's byte budget, given back when it is dropped (held
    /// only for its `Drop`).
    #[allow(dead_code)]
    pub(crate) weight: Option<Arc<super::events::BatchWeight>>,
}

/// Counters describing the client's life so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Sessions that completed the monitor handshake.
    pub sessions: u64,
    /// Sessions resumed from the last transaction id (`found` = true): no full download.
    pub resumed: u64,
    /// Sessions that downloaded everything.
    pub full_downloads: u64,
    /// Connection attempts that failed or sessions that ended with an error.
    pub failures: u64,
    /// Servers skipped because they were not the leader / not connected to the cluster.
    pub servers_skipped: u64,
    pub bytes_received: u64,
    pub messages_received: u64,
    pub monitor_method: Option<&'static str>,
    pub current_remote: Option<String>,
    pub last_error: Option<String>,
    /// Rows left out because a value broke the schema's bounds (a set longer than its `max`).
    pub rows_rejected: u64,
    /// Row changes merged into a held batch because the consumer lagged.
    pub changes_coalesced: u64,
    /// Bytes of change batches handed out and not yet dropped by the consumer.
    pub events_queued_bytes: u64,
}

#[derive(Default)]
struct SharedStats {
    sessions: AtomicU64,
    resumed: AtomicU64,
    full_downloads: AtomicU64,
    failures: AtomicU64,
    servers_skipped: AtomicU64,
    rows_rejected: AtomicU64,
    wire: Arc<WireStats>,
    method: Mutex<Option<&'static str>>,
    remote: Mutex<Option<String>>,
    last_error: Mutex<Option<String>>,
}

/// Every client alive in the process, by database name, for the metrics (read at scrape time:
/// nothing is recorded on the event path).
static LIVE_CLIENTS: LazyLock<Mutex<Vec<LiveClient>>> = LazyLock::new(Mutex::default);

/// A client's database name and a handle that does not keep it alive.
type LiveClient = (String, Weak<Shared>);

/// One live client as the metrics show it.
#[derive(Debug, Clone)]
pub struct ClientReport {
    pub database: String,
    pub connected: bool,
    pub stats: ClientStats,
    /// Rows held per monitored table.
    pub rows: Vec<(String, usize)>,
}

/// The clients alive now (the handles dropped since are forgotten).
pub fn live_clients() -> Vec<ClientReport> {
    let mut live = lock(&LIVE_CLIENTS);
    live.retain(|(_, w)| w.strong_count() > 0);
    live.iter()
        .filter_map(|(db, w)| {
            let shared = w.upgrade()?;
            let rows = shared
                .replica
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .tables()
                .map(|t| (t.name().to_owned(), t.len()))
                .collect();
            Some(ClientReport {
                database: db.clone(),
                connected: shared.connected.load(Ordering::Relaxed),
                stats: stats_of(&shared),
                rows,
            })
        })
        .collect()
}

fn stats_of(shared: &Shared) -> ClientStats {
    let s = &shared.stats;
    let events = lock(&shared.events).clone();
    ClientStats {
        sessions: s.sessions.load(Ordering::Relaxed),
        resumed: s.resumed.load(Ordering::Relaxed),
        full_downloads: s.full_downloads.load(Ordering::Relaxed),
        failures: s.failures.load(Ordering::Relaxed),
        servers_skipped: s.servers_skipped.load(Ordering::Relaxed),
        bytes_received: s.wire.bytes_received.load(Ordering::Relaxed),
        messages_received: s.wire.messages_received.load(Ordering::Relaxed),
        monitor_method: *lock(&s.method),
        current_remote: lock(&s.remote).clone(),
        last_error: lock(&s.last_error).clone(),
        rows_rejected: s.rows_rejected.load(Ordering::Relaxed),
        changes_coalesced: events
            .as_ref()
            .map_or(0, |e| e.coalesced.load(Ordering::Relaxed)),
        events_queued_bytes: events.as_ref().map_or(0, |e| e.queued() as u64),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

enum Command {
    Transact {
        ops: Vec<Op>,
        reply: oneshot::Sender<Result<Vec<OpResult>, OvsdbError>>,
    },
    SetCondition {
        table: usize,
        condition: MonitorCondition,
        reply: oneshot::Sender<Result<(), OvsdbError>>,
    },
    Call {
        method: String,
        params: Value,
        reply: oneshot::Sender<Result<Value, OvsdbError>>,
    },
}

enum Pending {
    Transact {
        ops: Vec<Op>,
        reply: oneshot::Sender<Result<Vec<OpResult>, OvsdbError>>,
    },
    Ack(oneshot::Sender<Result<(), OvsdbError>>),
    Call(String, oneshot::Sender<Result<Value, OvsdbError>>),
    Echo,
}

/// Read access to the replica. It is a lock guard: take it, read, drop it. It is not `Send`, so
/// the compiler refuses to hold it across an `.await` in a spawned task.
pub type ReplicaGuard<'a> = RwLockReadGuard<'a, Replica>;

struct Shared {
    replica: RwLock<Replica>,
    stats: SharedStats,
    connected: AtomicBool,
    schema: Mutex<Option<Arc<DatabaseSchema>>>,
    events: Mutex<Option<Arc<super::events::EventBudget>>>,
}

/// Handle to a monitored database. Dropping the last handle stops the client task.
pub struct OvsdbClient {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    events: Mutex<Option<mpsc::UnboundedReceiver<ChangeBatch>>>,
    task: JoinHandle<()>,
    table_ids: HashMap<String, usize>,
}

impl Drop for OvsdbClient {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OvsdbClient {
    /// Connects, validates the schema against `spec`, and returns once the replica holds the
    /// first complete download (its [`BatchKind::Initial`] batch waits in [`Self::events`]).
    /// Errors that retrying cannot fix (a missing table or column, a bad index) are returned;
    /// unreachable servers are retried with backoff until they answer (wrap the call in a
    /// timeout to bound the wait).
    pub async fn connect(config: ClientConfig, spec: MonitorSpec) -> Result<Self, OvsdbError> {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (cmd_tx, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
        let (ready_tx, mut ready_rx) = watch::channel(None::<Result<(), String>>);
        let shared = Arc::new(Shared {
            replica: RwLock::new(Replica::new(Vec::new())),
            stats: SharedStats::default(),
            connected: AtomicBool::new(false),
            schema: Mutex::new(None),
            events: Mutex::new(None),
        });
        let table_ids = spec
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        lock(&LIVE_CLIENTS).push((config.db.clone(), Arc::downgrade(&shared)));
        let (fatal_tx, fatal_rx) = oneshot::channel();
        let events = super::events::EventQueue::new(events_tx, config.max_message_size);
        *lock(&shared.events) = Some(events.budget());
        let worker = Worker {
            conditions: spec.tables.iter().map(|t| t.condition.clone()).collect(),
            spec,
            config,
            shared: shared.clone(),
            events,
            commands: cmd_rx,
            ready: ready_tx,
            fatal: Some(fatal_tx),
            metas: None,
            synced_once: false,
            conditions_changed: false,
            method: MonitorMethod::CondSince,
            max_index_seen: 0,
            stale_rejections: 0,
            interner: RefCell::new(Interner::default()),
        };
        let task = tokio::spawn(worker.run());
        let client = OvsdbClient {
            shared,
            commands: cmd_tx,
            events: Mutex::new(Some(events_rx)),
            task,
            table_ids,
        };
        let mut fatal_rx = fatal_rx;
        tokio::select! {
            biased;
            fatal = &mut fatal_rx => match fatal {
                Ok(e) => Err(e),
                Err(_) => Err(OvsdbError::Shutdown),
            },
            // Reduced to a bool at once: the watch guard must not live on (it is not Send).
            ready = async { ready_rx.wait_for(|v| v.is_some()).await.is_ok() } => {
                if ready {
                    Ok(client)
                } else {
                    // The worker ended: it reports why through `fatal` before ending.
                    Err(fatal_rx.await.unwrap_or(OvsdbError::Shutdown))
                }
            }
        }
    }

    /// Read access to the replica (see [`ReplicaGuard`]).
    pub fn replica(&self) -> ReplicaGuard<'_> {
        self.shared
            .replica
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a journal of the rows changed from now on (see [`Replica::take_journal`]).
    pub fn enable_journal(&self) {
        self.shared
            .replica
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .enable_journal();
    }

    /// The change stream; `Some` the first time only.
    pub fn events(&self) -> Option<mpsc::UnboundedReceiver<ChangeBatch>> {
        lock(&self.events).take()
    }

    /// Whether a session is established right now.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Relaxed)
    }

    /// The schema of the database, as the server reported it at the last handshake.
    pub fn schema(&self) -> Option<Arc<DatabaseSchema>> {
        lock(&self.shared.schema).clone()
    }

    pub fn stats(&self) -> ClientStats {
        stats_of(&self.shared)
    }

    /// Runs a transaction. Waits while the client is reconnecting. If the connection drops
    /// before the answer, fails with [`OvsdbError::ConnectionLost`] (the transaction may or may
    /// not have committed). Dropping the returned future sends `cancel` for it.
    pub async fn transact(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, OvsdbError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::Transact { ops, reply })
            .await
            .map_err(|_| OvsdbError::Shutdown)?;
        rx.await.map_err(|_| OvsdbError::Shutdown)?
    }

    /// Changes which rows of `table` are monitored (`monitor_cond_change`); rows leaving the
    /// condition arrive as deletes, rows entering it as inserts.
    pub async fn set_condition(
        &self,
        table: &str,
        condition: MonitorCondition,
    ) -> Result<(), OvsdbError> {
        let table = *self
            .table_ids
            .get(table)
            .ok_or_else(|| OvsdbError::NotMonitored(table.to_owned()))?;
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::SetCondition {
                table,
                condition,
                reply,
            })
            .await
            .map_err(|_| OvsdbError::Shutdown)?;
        rx.await.map_err(|_| OvsdbError::Shutdown)?
    }

    /// Any JSON-RPC request on the client's connection (e.g. `list_dbs`, `echo`).
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, OvsdbError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::Call {
                method: method.to_owned(),
                params,
                reply,
            })
            .await
            .map_err(|_| OvsdbError::Shutdown)?;
        rx.await.map_err(|_| OvsdbError::Shutdown)?
    }

    /// `list_dbs`.
    pub async fn list_dbs(&self) -> Result<Vec<String>, OvsdbError> {
        let v = self.call("list_dbs", json!([])).await?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|d| d.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default())
    }
}

/// Result of one session (connection lifetime).
enum SessionEnd {
    /// All handles dropped.
    Shutdown,
}

struct Worker {
    config: ClientConfig,
    spec: MonitorSpec,
    conditions: Vec<MonitorCondition>,
    shared: Arc<Shared>,
    events: super::events::EventQueue,
    commands: mpsc::Receiver<Command>,
    ready: watch::Sender<Option<Result<(), String>>>,
    fatal: Option<oneshot::Sender<OvsdbError>>,
    metas: Option<Vec<Arc<TableMeta>>>,
    synced_once: bool,
    /// A condition changed since the last full download: the next reconnect must not resume.
    conditions_changed: bool,
    method: MonitorMethod,
    /// Highest Raft log index seen, so a stale member is never used after a newer one.
    max_index_seen: i64,
    /// Consecutive servers refused for a Raft index older than `max_index_seen`.
    stale_rejections: usize,
    /// Shared copies of repeated strings (see [`Interner`]).
    interner: RefCell<Interner>,
}

/// A stream of messages from a connection, with notifications that arrived while the handshake
/// waited for an answer kept for later.
struct Session {
    conn: Connection,
    early: VecDeque<Incoming>,
    pending: HashMap<u64, Pending>,
    last_rx: Instant,
    echo_outstanding: bool,
    server: Option<Replica>,
}

const SERVER_MONITOR_ID: &str = "_Server";
/// Requests (transactions, condition changes, calls) queued for the connection task. Each
/// caller waits for its own answer, so this bounds the callers in flight, not the data: a
/// server that stops answering makes callers wait here (and time out) instead of growing a
/// queue without end.
const COMMAND_QUEUE: usize = 256;

fn server_database_meta() -> Arc<TableMeta> {
    let scalar = |key| ColumnType {
        key,
        value: None,
        min: 1,
        max: Some(1),
    };
    Arc::new(TableMeta::new(
        "Database",
        vec![
            ("name".into(), scalar(AtomicType::String)),
            ("model".into(), scalar(AtomicType::String)),
            ("connected".into(), scalar(AtomicType::Boolean)),
            ("leader".into(), scalar(AtomicType::Boolean)),
            (
                "index".into(),
                ColumnType {
                    key: AtomicType::Integer,
                    value: None,
                    min: 0,
                    max: Some(1),
                },
            ),
        ],
    ))
}

fn rpc_error(remote: &str, method: &str, error: &Value) -> OvsdbError {
    OvsdbError::Rpc {
        remote: remote.to_owned(),
        method: method.to_owned(),
        error: error.to_string(),
    }
}

fn parse_raw<'a, T: serde::Deserialize<'a>>(
    raw: &'a str,
    remote: &str,
    what: &str,
) -> Result<T, OvsdbError> {
    serde_json::from_str(raw).map_err(|e| OvsdbError::Protocol {
        remote: remote.to_owned(),
        reason: format!("{what}: {e}"),
    })
}

/// Decodes table-updates for `metas` (public for benchmarks and tests).
pub fn parse_updates(
    raw: &str,
    metas: &[Arc<TableMeta>],
    format: UpdateFormat,
    remote: &str,
    interner: Option<&RefCell<Interner>>,
) -> Result<Vec<TableUpdate>, OvsdbError> {
    // Rejected rows are logged; the statistics are a throwaway.
    parse_updates_counted(
        &SharedStats::default(),
        raw,
        metas,
        format,
        remote,
        interner,
    )
}

/// The client's error for table-updates that cannot be decoded.
fn updates_error(remote: &str) -> impl Fn(super::decode::DecodeError) -> OvsdbError + '_ {
    move |e| OvsdbError::Protocol {
        remote: remote.to_owned(),
        reason: format!("table-updates: {e}"),
    }
}

/// Like [`parse_updates`], counting the rows the decoder rejected in the client's statistics.
fn parse_updates_counted(
    stats: &SharedStats,
    raw: &str,
    metas: &[Arc<TableMeta>],
    format: UpdateFormat,
    remote: &str,
    interner: Option<&RefCell<Interner>>,
) -> Result<Vec<TableUpdate>, OvsdbError> {
    let (updates, rejected) =
        super::decode::table_updates_with_rejected(raw, metas, format, interner)
            .map_err(updates_error(remote))?;
    record_rejected(stats, remote, rejected);
    Ok(updates)
}

/// Logs rows the decoder left out (a hostile or broken server: a real one never sends a value
/// its own schema forbids) and counts them.
fn record_rejected(stats: &SharedStats, remote: &str, rejected: Vec<super::decode::RejectedRow>) {
    for r in rejected {
        tracing::warn!(%remote, "{r}");
        stats.rows_rejected.fetch_add(1, Ordering::Relaxed);
        *lock(&stats.last_error) = Some(format!("from {remote}: {r}"));
    }
}

fn is_unknown_method(error: &Value) -> bool {
    let s = error.to_string();
    s.contains("unknown method") || s.contains("not supported")
}

impl Session {
    async fn call(&mut self, method: &str, params: Value) -> Result<RawJson, OvsdbError> {
        let id = self.conn.request(method, params).await?;
        loop {
            let msg = self.conn.recv().await?;
            self.last_rx = Instant::now();
            match msg {
                Incoming::Response {
                    id: rid,
                    result,
                    error,
                } if rid.as_u64() == Some(id) => {
                    if let Some(e) = error {
                        return Err(rpc_error(&self.conn.remote, method, &e));
                    }
                    return result.ok_or_else(|| OvsdbError::Protocol {
                        remote: self.conn.remote.clone(),
                        reason: format!("{method} answer without result"),
                    });
                }
                Incoming::Request { id, method, params } if method == "echo" => {
                    let p: Value = parse_raw(params.get(), &self.conn.remote, "echo params")?;
                    self.conn.reply(id, p).await?;
                }
                other => self.early.push_back(other),
            }
        }
    }
}

impl Worker {
    fn remote_order(&self) -> Vec<Remote> {
        let mut list = self.config.remotes.clone();
        for i in (1..list.len()).rev() {
            let j = (random_u64() % (i as u64 + 1)) as usize;
            list.swap(i, j);
        }
        list
    }

    fn record_failure(&self, e: &OvsdbError) {
        self.shared.stats.failures.fetch_add(1, Ordering::Relaxed);
        *lock(&self.shared.stats.last_error) = Some(e.to_string());
    }

    async fn run(mut self) {
        let order = self.remote_order();
        let mut backoff = Backoff::new(self.config.backoff_initial, self.config.backoff_max);
        let mut next = 0usize;
        let mut failures_in_round = 0usize;
        loop {
            let remote = order[next % order.len()].clone();
            next += 1;
            let started = Instant::now();
            match self.session(&remote).await {
                Ok(SessionEnd::Shutdown) => return,
                Err(e) => {
                    self.shared.connected.store(false, Ordering::Relaxed);
                    let fatal = matches!(
                        e,
                        OvsdbError::MissingTable { .. }
                            | OvsdbError::MissingColumn { .. }
                            | OvsdbError::BadIndex { .. }
                            | OvsdbError::NoSuchDatabase { .. }
                            | OvsdbError::TlsConfig { .. }
                    );
                    if matches!(e, OvsdbError::ServerUnusable { .. }) {
                        self.shared
                            .stats
                            .servers_skipped
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    // Every member older than what we saw: the cluster was rebuilt or restored
                    // from backup, not merely lagging. Accept its history from now on.
                    if self.stale_rejections >= 2 * order.len() {
                        tracing::warn!(
                            max_index_seen = self.max_index_seen,
                            "all cluster members are older than the data seen before; accepting them"
                        );
                        self.max_index_seen = 0;
                        self.stale_rejections = 0;
                    }
                    tracing::warn!(remote = %remote, error = %e, "OVSDB session ended");
                    self.record_failure(&e);
                    if fatal && !self.synced_once {
                        if let Some(tx) = self.fatal.take() {
                            let _ = tx.send(e);
                        }
                        return;
                    }
                    if started.elapsed() > Duration::from_secs(10) {
                        backoff.reset();
                        failures_in_round = 0;
                    }
                    failures_in_round += 1;
                    if failures_in_round >= order.len() {
                        failures_in_round = 0;
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                }
            }
            if self.commands.is_closed() {
                return;
            }
        }
    }

    async fn handshake(
        &mut self,
        remote: &Remote,
    ) -> Result<(Session, Vec<TableUpdate>, bool, Option<Uuid>, usize), OvsdbError> {
        let stream = connect(remote, self.config.tls.as_ref()).await?;
        let conn = Connection::new(
            stream,
            remote.to_string(),
            self.config.max_message_size,
            self.shared.stats.wire.clone(),
        )
        .with_write_timeout(self.config.write_timeout);
        let mut s = Session {
            conn,
            early: VecDeque::new(),
            pending: HashMap::new(),
            last_rx: Instant::now(),
            echo_outstanding: false,
            server: None,
        };
        let name = remote.to_string();
        // The server's view of the database: clustered? connected? leader?
        // Always asked (as the OVS IDL does): even a single remote may be a cluster member
        // that lost its cluster and serves stale data.
        {
            let meta = server_database_meta();
            let req = json!({"Database": [{
                "columns": ["name", "model", "connected", "leader", "index"],
                "where": [["name", "==", self.config.db]],
            }]});
            match s
                .call("monitor_cond", json!(["_Server", SERVER_MONITOR_ID, req]))
                .await
            {
                Ok(raw) => {
                    let mut server = Replica::new(vec![meta.clone()]);
                    let ups = parse_updates(raw.get(), &[meta], UpdateFormat::V2, &name, None)?;
                    server.resync(ups, &mut Vec::new());
                    self.check_server(&server, &name)?;
                    s.server = Some(server);
                }
                Err(OvsdbError::Rpc { error, .. }) if !self.config.leader_only => {
                    tracing::debug!(remote = %name, %error, "no _Server database; not checking cluster state");
                }
                Err(e) => return Err(e),
            }
        }
        let schema_raw = match s.call("get_schema", json!([self.config.db])).await {
            Ok(raw) => raw,
            Err(OvsdbError::Rpc { error, .. }) if error.contains("unknown database") => {
                let dbs = s.call("list_dbs", json!([])).await?;
                let dbs: Vec<String> = parse_raw(dbs.get(), &name, "list_dbs")?;
                return Err(OvsdbError::NoSuchDatabase {
                    db: self.config.db.clone(),
                    remote: name,
                    available: dbs.join(", "),
                });
            }
            Err(e) => return Err(e),
        };
        let schema_json: Value = parse_raw(schema_raw.get(), &name, "schema")?;
        let schema = DatabaseSchema::from_json(&schema_json, &name)?;
        let metas = self.spec.metas(&schema)?;
        *lock(&self.shared.schema) = Some(Arc::new(schema));
        if self.metas.is_none() {
            let mut replica = Replica::new(metas.clone());
            for (t, c) in &self.spec.indexes {
                replica.add_index(t, c)?;
            }
            *self
                .shared
                .replica
                .write()
                .unwrap_or_else(|e| e.into_inner()) = replica;
            self.metas = Some(metas);
        }
        // Monitor, falling back to older methods the server does not know.
        let (updates, resumed, txn, bytes) = loop {
            let metas = self.metas.clone().unwrap_or_default();
            let tables: Vec<(Arc<TableMeta>, MonitorCondition)> = metas
                .iter()
                .cloned()
                .zip(self.conditions.iter().cloned())
                .collect();
            let requests = monitor_requests(&tables, self.method);
            let db = self.config.db.clone();
            let params = match self.method {
                MonitorMethod::CondSince => {
                    let last = if self.conditions_changed {
                        None
                    } else {
                        self.shared
                            .replica
                            .read()
                            .unwrap_or_else(|e| e.into_inner())
                            .last_txn_id
                    };
                    json!([db, db, requests, last.unwrap_or(Uuid::ZERO).to_string()])
                }
                _ => json!([db, db, requests]),
            };
            match s.call(self.method.name(), params).await {
                Ok(raw) => {
                    let metas = self.metas.clone().unwrap_or_default();
                    let bytes = raw.get().len();
                    if self.method == MonitorMethod::CondSince {
                        let reply = super::decode::cond_since_reply(
                            raw.get(),
                            &metas,
                            Some(&self.interner),
                        )
                        .map_err(|e| OvsdbError::Protocol {
                            remote: name.clone(),
                            reason: format!("monitor_cond_since reply: {e}"),
                        })?;
                        record_rejected(&self.shared.stats, &name, reply.rejected);
                        let resumed = reply.found && self.synced_once;
                        let txn = reply.last_txn_id;
                        break (
                            reply.updates,
                            resumed,
                            (txn != Uuid::ZERO).then_some(txn),
                            bytes,
                        );
                    }
                    let updates = parse_updates_counted(
                        &self.shared.stats,
                        raw.get(),
                        &metas,
                        self.method.format(),
                        &name,
                        Some(&self.interner),
                    )?;
                    break (updates, false, None, bytes);
                }
                Err(OvsdbError::Rpc { error, .. })
                    if self.method != MonitorMethod::Plain
                        && is_unknown_method(&Value::String(error.clone())) =>
                {
                    tracing::info!(remote = %name, method = self.method.name(), "server lacks monitor method; falling back");
                    self.method = match self.method {
                        MonitorMethod::CondSince => MonitorMethod::Cond,
                        _ => MonitorMethod::Plain,
                    };
                }
                Err(e) => return Err(e),
            }
        };
        Ok((s, updates, resumed, txn, bytes))
    }

    fn check_server(&mut self, server: &Replica, remote: &str) -> Result<(), OvsdbError> {
        let unusable = |reason: String| OvsdbError::ServerUnusable {
            remote: remote.to_owned(),
            reason,
        };
        let Some(table) = server.table("Database") else {
            return Ok(());
        };
        let Some(row) = table.iter().find(|r| r.str("name") == self.config.db) else {
            // Not (yet) listed: `get_schema` decides whether the database exists.
            return Ok(());
        };
        if row.str("model") != "clustered" {
            return Ok(());
        }
        if row.bool("connected") != Some(true) {
            return Err(unusable("not connected to its cluster".into()));
        }
        if self.config.leader_only && row.bool("leader") != Some(true) {
            return Err(unusable("not the cluster leader".into()));
        }
        if let Some(index) = row.int("index") {
            if index < self.max_index_seen {
                self.stale_rejections += 1;
                return Err(unusable(format!(
                    "its Raft index {index} is older than {} seen before",
                    self.max_index_seen
                )));
            }
            self.max_index_seen = index;
            self.stale_rejections = 0;
        }
        Ok(())
    }

    /// Hands a batch to the consumer; `bytes` is the size of the message it came from.
    fn emit(
        &mut self,
        kind: BatchKind,
        changes: Vec<Change>,
        received: Option<tokio::time::Instant>,
        bytes: usize,
    ) {
        let txn_id = self
            .shared
            .replica
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .last_txn_id;
        if changes.is_empty() && kind == BatchKind::Update {
            return;
        }
        self.events.push(kind, txn_id, changes, received, bytes);
    }

    async fn session(&mut self, remote: &Remote) -> Result<SessionEnd, OvsdbError> {
        *lock(&self.shared.stats.remote) = Some(remote.to_string());
        let (mut s, updates, resumed, txn, bytes) =
            tokio::time::timeout(self.config.handshake_timeout, self.handshake(remote))
                .await
                .map_err(|_| OvsdbError::ServerUnusable {
                    remote: remote.to_string(),
                    reason: format!(
                        "no complete handshake within {:?}",
                        self.config.handshake_timeout
                    ),
                })??;
        let name = remote.to_string();
        let metas = self.metas.clone().unwrap_or_default();
        let mut changes = Vec::new();
        let kind = {
            let mut r = self
                .shared
                .replica
                .write()
                .unwrap_or_else(|e| e.into_inner());
            // Only now that the updates are applied does the replica reflect `txn`.
            r.last_txn_id = txn;
            if resumed {
                r.apply(updates, &mut changes);
                BatchKind::Update
            } else {
                r.resync(updates, &mut changes);
                if self.synced_once {
                    BatchKind::Resync
                } else {
                    BatchKind::Initial
                }
            }
        };
        let st = &self.shared.stats;
        st.sessions.fetch_add(1, Ordering::Relaxed);
        if resumed {
            st.resumed.fetch_add(1, Ordering::Relaxed);
        } else {
            st.full_downloads.fetch_add(1, Ordering::Relaxed);
            self.conditions_changed = false;
        }
        *lock(&st.method) = Some(self.method.name());
        self.emit(kind, changes, None, bytes);
        self.synced_once = true;
        self.shared.connected.store(true, Ordering::Relaxed);
        self.ready.send_replace(Some(Ok(())));
        tracing::info!(remote = %name, resumed, method = self.method.name(), "OVSDB monitor established");
        let result = self.serve(&mut s, &metas).await;
        self.shared.connected.store(false, Ordering::Relaxed);
        for (_, p) in s.pending.drain() {
            let lost = || OvsdbError::ConnectionLost {
                remote: name.clone(),
            };
            match p {
                Pending::Transact { reply, .. } => drop(reply.send(Err(lost()))),
                Pending::Ack(reply) => drop(reply.send(Err(lost()))),
                Pending::Call(_, reply) => drop(reply.send(Err(lost()))),
                Pending::Echo => {}
            }
        }
        result
    }

    async fn serve(
        &mut self,
        s: &mut Session,
        metas: &[Arc<TableMeta>],
    ) -> Result<SessionEnd, OvsdbError> {
        let probe = self.config.probe_interval;
        let mut tick = tokio::time::interval(
            probe
                .map(|p| p / 4)
                .unwrap_or(Duration::from_secs(1))
                .max(Duration::from_millis(50)),
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            while let Some(msg) = s.early.pop_front() {
                self.handle(s, msg, metas).await?;
            }
            tokio::select! {
                msg = s.conn.recv() => {
                    let msg = msg?;
                    s.last_rx = Instant::now();
                    s.echo_outstanding = false;
                    self.handle(s, msg, metas).await?;
                }
                cmd = self.commands.recv() => {
                    let Some(cmd) = cmd else { return Ok(SessionEnd::Shutdown) };
                    self.command(s, cmd).await?;
                }
                // The consumer made room for changes held while it lagged.
                _ = self.events.drained(), if self.events.holding() => self.events.flush(),
                _ = tick.tick() => {
                    self.sweep_cancelled(s).await?;
                    if let Some(p) = probe
                        && s.last_rx.elapsed() >= p
                    {
                        if s.echo_outstanding && s.last_rx.elapsed() >= p * 2 {
                            return Err(OvsdbError::ProbeTimeout { remote: s.conn.remote.clone() });
                        }
                        if !s.echo_outstanding {
                            let id = s.conn.request("echo", json!([])).await?;
                            s.pending.insert(id, Pending::Echo);
                            s.echo_outstanding = true;
                        }
                    }
                }
            }
        }
    }

    /// Sends `cancel` for transactions whose caller gave up waiting.
    async fn sweep_cancelled(&mut self, s: &mut Session) -> Result<(), OvsdbError> {
        let gone: Vec<u64> = s
            .pending
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Transact { reply, .. } if reply.is_closed()))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            s.pending.remove(&id);
            s.conn.notify("cancel", json!([id])).await?;
        }
        Ok(())
    }

    async fn command(&mut self, s: &mut Session, cmd: Command) -> Result<(), OvsdbError> {
        match cmd {
            Command::Transact { ops, reply } => {
                if reply.is_closed() {
                    return Ok(());
                }
                let mut params = vec![Value::String(self.config.db.clone())];
                params.extend(ops.iter().map(Op::to_json));
                let id = match s.conn.request("transact", Value::Array(params)).await {
                    Ok(id) => id,
                    Err(e) => {
                        // The caller learns the connection went, not that the client shut down.
                        let _ = reply.send(Err(OvsdbError::ConnectionLost {
                            remote: s.conn.remote.clone(),
                        }));
                        return Err(e);
                    }
                };
                s.pending.insert(id, Pending::Transact { ops, reply });
            }
            Command::SetCondition {
                table,
                condition,
                reply,
            } => {
                let metas = self.metas.clone().unwrap_or_default();
                let Some(meta) = metas.get(table) else {
                    let _ = reply.send(Err(OvsdbError::Shutdown));
                    return Ok(());
                };
                if let Some(schema) = lock(&self.shared.schema).clone() {
                    let cols: Vec<String> = condition.columns().map(str::to_owned).collect();
                    if let Err(e) = schema.check(&meta.name, &cols) {
                        let _ = reply.send(Err(e));
                        return Ok(());
                    }
                }
                if self.method == MonitorMethod::Plain {
                    let _ = reply.send(Err(OvsdbError::Rpc {
                        remote: s.conn.remote.clone(),
                        method: "monitor_cond_change".into(),
                        error: "server supports only plain monitor".into(),
                    }));
                    return Ok(());
                }
                self.conditions[table] = condition.clone();
                self.conditions_changed = true;
                let db = &self.config.db;
                let req = json!({meta.name.to_string(): [{"where": condition.to_json()}]});
                let id = s
                    .conn
                    .request("monitor_cond_change", json!([db, db, req]))
                    .await?;
                s.pending.insert(id, Pending::Ack(reply));
            }
            Command::Call {
                method,
                params,
                reply,
            } => {
                let id = s.conn.request(&method, params).await?;
                s.pending.insert(id, Pending::Call(method, reply));
            }
        }
        Ok(())
    }

    async fn handle(
        &mut self,
        s: &mut Session,
        msg: Incoming,
        metas: &[Arc<TableMeta>],
    ) -> Result<(), OvsdbError> {
        let remote = s.conn.remote.clone();
        match msg {
            Incoming::Request { id, method, params } => {
                if method == "echo" {
                    let p: Value = parse_raw(params.get(), &remote, "echo params")?;
                    s.conn.reply(id, p).await?;
                } else {
                    s.conn
                        .reply_error(id, &format!("unknown method {method}"))
                        .await?;
                }
            }
            Incoming::Notification {
                method,
                params,
                received,
            } => {
                let (format, has_txn) = match method.as_str() {
                    "update" => (UpdateFormat::V1, false),
                    "update2" => (UpdateFormat::V2, false),
                    "update3" => (UpdateFormat::V2, true),
                    _ => {
                        tracing::debug!(%remote, %method, "ignoring notification");
                        return Ok(());
                    }
                };
                let parts: Vec<&RawValue> = parse_raw(params.get(), &remote, &method)?;
                let monitor_id: Value = match parts.first() {
                    Some(p) => parse_raw(p.get(), &remote, "monitor id")?,
                    None => Value::Null,
                };
                let (txn, body) = match (has_txn, parts.len()) {
                    (true, 3) => (
                        Some(parse_raw::<Uuid>(parts[1].get(), &remote, "txn id")?),
                        parts[2],
                    ),
                    (false, 2) => (None, parts[1]),
                    _ => {
                        return Err(OvsdbError::Protocol {
                            remote,
                            reason: format!("{method} with {} params", parts.len()),
                        });
                    }
                };
                if monitor_id == SERVER_MONITOR_ID {
                    let meta = server_database_meta();
                    let ups = parse_updates(body.get(), &[meta], UpdateFormat::V2, &remote, None)?;
                    if let Some(mut server) = s.server.take() {
                        server.apply(ups, &mut Vec::new());
                        self.check_server(&server, &remote)?;
                        s.server = Some(server);
                    }
                    return Ok(());
                }
                let updates = parse_updates_counted(
                    &self.shared.stats,
                    body.get(),
                    metas,
                    format,
                    &remote,
                    Some(&self.interner),
                )?;
                let mut changes = Vec::new();
                {
                    let mut r = self
                        .shared
                        .replica
                        .write()
                        .unwrap_or_else(|e| e.into_inner());
                    r.apply(updates, &mut changes);
                    if let Some(t) = txn {
                        r.last_txn_id = Some(t);
                    }
                }
                self.emit(BatchKind::Update, changes, Some(received), body.get().len());
            }
            Incoming::Response { id, result, error } => {
                let Some(p) = id.as_u64().and_then(|i| s.pending.remove(&i)) else {
                    return Ok(());
                };
                let result: Result<Value, OvsdbError> = match (error, result) {
                    (Some(e), _) => Err(rpc_error(&remote, "request", &e)),
                    (None, Some(r)) => parse_raw(r.get(), &remote, "result"),
                    (None, None) => Ok(Value::Null),
                };
                match p {
                    Pending::Transact { ops, reply } => {
                        let _ = reply.send(result.and_then(|v| parse_transact_result(&ops, v)));
                    }
                    Pending::Ack(reply) => {
                        let _ = reply.send(result.map(|_| ()));
                    }
                    Pending::Call(method, reply) => {
                        let _ = reply.send(result.map_err(|e| match e {
                            OvsdbError::Rpc { remote, error, .. } => OvsdbError::Rpc {
                                remote,
                                method,
                                error,
                            },
                            other => other,
                        }));
                    }
                    Pending::Echo => s.echo_outstanding = false,
                }
            }
        }
        Ok(())
    }
}

/// A monitor condition matching rows whose `column` equals `value` (e.g. Chassis_Private
/// `name == system-id`).
pub fn condition_eq(column: &str, value: impl Into<super::types::Datum>) -> MonitorCondition {
    MonitorCondition::Any(vec![Clause::eq(column, value)])
}

/// Compile-time check: the client and its futures can move between threads (drivers spawn them).
#[allow(dead_code)]
fn futures_are_send(c: &OvsdbClient, config: ClientConfig, spec: MonitorSpec) {
    fn send<T: Send>(_: T) {}
    fn sync<T: Sync>(_: &T) {}
    sync(c);
    send(OvsdbClient::connect(config, spec));
    send(c.transact(Vec::new()));
    send(c.set_condition("T", MonitorCondition::All));
    send(c.call("echo", json!([])));
    send(c.list_dbs());
}
