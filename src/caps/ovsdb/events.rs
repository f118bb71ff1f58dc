//! The queue between the client and its consumer, bounded in bytes.
//!
//! Every batch counts the size of the message it came from against a budget (the message size
//! limit) until the consumer drops it. While the budget is spent, further changes are not
//! queued one batch each but merged into one held batch, row by row (an insert then a modify is
//! an insert of the last version, a modify then a delete a delete of the first version, an
//! insert then a delete nothing): what is held is bounded by the number of rows monitored, not
//! by how many updates the server sends. The held batch goes out as soon as the consumer has
//! made room, so the consumer sees every row's last state, as after a resumed session. The
//! client never blocks on a slow consumer: it keeps answering echoes and requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::{Notify, mpsc};

use super::client::{BatchKind, ChangeBatch};
use super::replica::{Change, ChangeKind, diff_columns};
use super::types::Uuid;

/// Bytes of batches handed out and not yet dropped by the consumer.
#[derive(Debug)]
pub(crate) struct EventBudget {
    queued: AtomicUsize,
    limit: usize,
    /// Woken when the consumer drops a batch.
    drained: Notify,
    /// Changes merged into a held batch instead of being queued on their own.
    pub(crate) coalesced: AtomicU64,
}

impl EventBudget {
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    fn has_room(&self, bytes: usize) -> bool {
        let queued = self.queued();
        queued == 0 || queued.saturating_add(bytes) <= self.limit
    }
}

/// A batch's share of the budget, given back when the last clone of the batch is dropped.
#[derive(Debug)]
pub struct BatchWeight {
    budget: Arc<EventBudget>,
    bytes: usize,
}

impl Drop for BatchWeight {
    fn drop(&mut self) {
        self.budget.queued.fetch_sub(self.bytes, Ordering::Relaxed);
        self.budget.drained.notify_one();
    }
}

/// Changes merged while the budget was spent.
struct Held {
    kind: BatchKind,
    txn_id: Option<Uuid>,
    /// In arrival order; `None` where a row's changes cancelled out.
    changes: Vec<Option<Change>>,
    by_row: HashMap<(Arc<str>, Uuid), usize>,
    bytes: usize,
    received: Option<tokio::time::Instant>,
}

fn rank(kind: BatchKind) -> u8 {
    match kind {
        BatchKind::Update => 0,
        BatchKind::Resync => 1,
        BatchKind::Initial => 2,
    }
}

/// The change that takes a row from `first`'s old state to `then`'s new state, or `None` if
/// the row ends as it began.
fn combine(first: Change, then: Change) -> Option<Change> {
    let kind = match (first.kind, then.kind) {
        (ChangeKind::Insert { .. }, ChangeKind::Delete { .. }) => return None,
        (ChangeKind::Insert { .. }, ChangeKind::Insert { new })
        | (ChangeKind::Insert { .. }, ChangeKind::Update { new, .. }) => ChangeKind::Insert { new },
        (
            ChangeKind::Update { old, .. } | ChangeKind::Delete { old },
            ChangeKind::Delete { .. },
        ) => ChangeKind::Delete { old },
        (
            ChangeKind::Update { old, .. } | ChangeKind::Delete { old },
            ChangeKind::Update { new, .. } | ChangeKind::Insert { new },
        ) => {
            let changed = diff_columns(&old, &new);
            if changed.is_empty() {
                return None;
            }
            ChangeKind::Update { old, new, changed }
        }
    };
    Some(Change {
        table: first.table,
        uuid: first.uuid,
        kind,
    })
}

impl Held {
    fn merge(&mut self, kind: BatchKind, txn_id: Option<Uuid>, changes: Vec<Change>, bytes: usize) {
        if rank(kind) > rank(self.kind) {
            self.kind = kind;
        }
        if txn_id.is_some() {
            self.txn_id = txn_id;
        }
        self.bytes = self.bytes.saturating_add(bytes);
        for change in changes {
            let key = (change.table.clone(), change.uuid);
            match self.by_row.get(&key) {
                Some(&i) => {
                    let merged = match self.changes[i].take() {
                        Some(first) => combine(first, change),
                        None => Some(change),
                    };
                    self.changes[i] = merged;
                }
                None => {
                    self.by_row.insert(key, self.changes.len());
                    self.changes.push(Some(change));
                }
            }
        }
    }
}

/// The sending side: sends batches while the budget allows, merges them while it does not.
pub(crate) struct EventQueue {
    tx: mpsc::UnboundedSender<ChangeBatch>,
    budget: Arc<EventBudget>,
    held: Option<Held>,
}

impl EventQueue {
    /// A queue holding at most about `limit` bytes of unconsumed batches (and always at least
    /// one batch, whatever its size).
    pub(crate) fn new(tx: mpsc::UnboundedSender<ChangeBatch>, limit: usize) -> Self {
        Self {
            tx,
            budget: Arc::new(EventBudget {
                queued: AtomicUsize::new(0),
                limit,
                drained: Notify::new(),
                coalesced: AtomicU64::new(0),
            }),
            held: None,
        }
    }

    pub(crate) fn budget(&self) -> Arc<EventBudget> {
        self.budget.clone()
    }

    /// Whether changes wait for the consumer to make room.
    pub(crate) fn holding(&self) -> bool {
        self.held.is_some()
    }

    /// Resolves when the consumer drops a batch (then call [`Self::flush`]).
    pub(crate) async fn drained(&self) {
        self.budget.drained.notified().await
    }

    /// Queues one batch of changes that came from a message of `bytes` bytes.
    pub(crate) fn push(
        &mut self,
        kind: BatchKind,
        txn_id: Option<Uuid>,
        changes: Vec<Change>,
        received: Option<tokio::time::Instant>,
        bytes: usize,
    ) {
        if self.held.is_none() && self.budget.has_room(bytes) {
            self.send(
                ChangeBatch {
                    kind,
                    txn_id,
                    changes,
                    received,
                    weight: None,
                },
                bytes,
            );
            return;
        }
        self.budget
            .coalesced
            .fetch_add(changes.len() as u64, Ordering::Relaxed);
        let held = self.held.get_or_insert_with(|| Held {
            kind,
            txn_id: None,
            changes: Vec::new(),
            by_row: HashMap::new(),
            bytes: 0,
            received,
        });
        held.merge(kind, txn_id, changes, bytes);
        self.flush();
    }

    /// Sends the held batch if the consumer has made room for it.
    pub(crate) fn flush(&mut self) {
        let Some(held) = self.held.take_if(|h| self.budget.has_room(h.bytes)) else {
            return;
        };
        let changes: Vec<Change> = held.changes.into_iter().flatten().collect();
        // Changes that cancelled out still tell the consumer its view is current.
        let batch = ChangeBatch {
            kind: held.kind,
            txn_id: held.txn_id,
            changes,
            received: held.received,
            weight: None,
        };
        self.send(batch, held.bytes);
    }

    /// Sends `batch`, weighing `bytes` against the budget until the consumer drops it.
    fn send(&mut self, mut batch: ChangeBatch, bytes: usize) {
        self.budget.queued.fetch_add(bytes, Ordering::Relaxed);
        batch.weight = Some(Arc::new(BatchWeight {
            budget: self.budget.clone(),
            bytes,
        }));
        // A consumer that dropped its receiver gets nothing; the batch's weight is given back
        // as the failed send drops it.
        let _ = self.tx.send(batch);
    }
}
