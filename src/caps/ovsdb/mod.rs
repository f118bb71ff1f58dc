//! OVSDB client (RFC 7047 plus the OVS extensions) and in-memory replica, for OVN Northbound,
//! OVN Southbound and the local `Open_vSwitch` database.
//!
//! # Use
//!
//! ```no_run
//! use ovn_bgp_agent::caps::ovsdb::*;
//! # async fn demo() -> Result<(), OvsdbError> {
//! let mut config = ClientConfig::new("tcp:127.0.0.1:6642,tcp:127.0.0.2:6642", "OVN_Southbound")?;
//! config.leader_only = false;
//! let spec = MonitorSpec::default()
//!     .table(TableSpec::new("Port_Binding", &["logical_port", "type", "mac", "chassis", "datapath"]))
//!     .table(TableSpec::new("Chassis_Private", &["name", "chassis"])
//!         .with_condition(condition_eq("name", "my-system-id")))
//!     .index("Port_Binding", "logical_port")
//!     .index("Port_Binding", "chassis");
//! // Returns once the first complete download is in the replica (or a schema error).
//! let client = OvsdbClient::connect(config, spec).await?;
//! let mut events = client.events().expect("taken once");
//! {
//!     // A short read: the guard is not Send, so it cannot be held across an await.
//!     let replica = client.replica();
//!     let pb = replica.get_table("Port_Binding")?;
//!     for row in pb.find_str("logical_port", "vm1")? {
//!         println!("{} on {:?} mac {:?}", row.str("logical_port"), row.opt_uuid("chassis"),
//!                  row.strs("mac").collect::<Vec<_>>());
//!     }
//! }
//! while let Some(batch) = events.recv().await {
//!     // batch.kind: Initial (first download), Resync (full re-download after a reconnect:
//!     // only real differences are listed; reconcile once), Update (one transaction).
//!     for change in &batch.changes {
//!         match &change.kind {
//!             ChangeKind::Insert { new } => println!("+ {} {}", change.table, new.uuid()),
//!             ChangeKind::Update { old, new, .. } => {
//!                 println!("~ {} {:?}: {:?} -> {:?}", change.table, change.changed_columns(),
//!                          old.opt_uuid("chassis"), new.opt_uuid("chassis"))
//!             }
//!             ChangeKind::Delete { old } => println!("- {} {}", change.table, old.uuid()),
//!         }
//!     }
//! }
//! client.transact(vec![Op::update("Port_Binding").where_eq("logical_port", "vm1").set("up", true)])
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! # Design
//! - [`framing`]: splits the byte stream into messages by JSON syntax (strings and escapes
//!   tracked), with a size limit per message (`[ovn] ovsdb_max_message_size`) and a nesting
//!   limit.
//! - [`jsonrpc`]: a reader task per connection feeding a channel bounded in bytes; requests,
//!   replies, notifications; writes time out.
//! - [`events`]: the change batches for the consumer, bounded in bytes: beyond the budget,
//!   changes are merged per row instead of queued.
//! - [`types`], [`schema`], [`ops`]: atoms/sets/maps, schemas and validation, typed operation
//!   builders and conditions.
//! - [`monitor`]: monitor requests; `update`/`update2`/`update3` decoded by a schema-aware serde
//!   seed straight into the replica's compact form.
//! - [`replica`]: rows as `Arc<Row>` in per-table hash maps, column indexes kept incrementally,
//!   change computation and full-resync diffing.
//! - [`remote`]: `unix:`/`tcp:`/`ssl:` remotes, rustls, backoff with jitter.
//! - [`client`]: the owner task: connect, `_Server` check (clustered, connected, leader, index),
//!   `get_schema` validation, `monitor_cond_since` → `monitor_cond` → `monitor` fallback, resume
//!   from the last transaction id, echo both ways, inactivity probe, requests, reconnect.
//!
//! The replica sits behind a `std::sync::RwLock` written only by the owner task, one short
//! critical section per transaction (no table is ever cloned: an update replaces one
//! `Arc<Row>` and touches only the indexes whose column changed). Readers take
//! [`ReplicaGuard`]s briefly; the guard is not `Send`, so a spawned task cannot hold it across
//! an `.await` — but a current-thread test or `block_on` future can, and would then block the
//! owner task: read in a statement of its own. Events carry the `Arc<Row>`s (old and new), so a
//! driver usually needs no replica lookup to react to a change.
//!
//! Semantics worth knowing:
//! - Batches arrive in commit order; rows inside a batch have no order. A resumed session
//!   delivers everything missed as one `Update` batch; a full re-download delivers one
//!   [`BatchKind::Resync`] batch with only the rows that differ.
//! - `_Server` is always consulted when the server has it: a clustered member that is not
//!   connected to its cluster (or, with `leader_only`, not the leader, or older than data seen
//!   before) is skipped, and a session ends when its member stops qualifying.
//! - A condition change forces the next reconnect to download in full (the server's history
//!   cannot replay rows that entered the condition while disconnected).
//! - Columns holding at most one value (`min 0, max 1`) are replaced on `modify`; sets and maps
//!   receive the difference (what OVS 3.1 sends).

pub mod client;
pub mod decode;
pub mod error;
pub mod events;
pub mod framing;
pub mod jsonrpc;
pub mod monitor;
pub mod ops;
pub mod remote;
pub mod replica;
pub mod schema;
pub mod types;

pub use client::{
    BatchKind, ChangeBatch, ClientConfig, ClientReport, ClientStats, MonitorSpec, OvsdbClient,
    ReplicaGuard, TableSpec, condition_eq, live_clients,
};
pub use error::OvsdbError;
pub use ops::{Clause, Function, MonitorCondition, Mutator, Op, OpResult};
pub use remote::{Remote, TlsFiles};
pub use replica::{Change, ChangeKind, Journal, Replica, Row, Table};
pub use schema::DatabaseSchema;
pub use types::{Atom, Datum, Uuid};
