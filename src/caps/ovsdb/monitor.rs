//! Monitor requests and the decoding of `update`/`update2`/`update3` table-updates.
//!
//! Table-updates are decoded by [`super::decode`] straight into column indexes and compact
//! [`Datum`]s: no intermediate `serde_json::Value`, and columns the client did not ask for are
//! skipped without allocation.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ops::MonitorCondition;
use super::replica::TableMeta;
use super::types::{Datum, Uuid};

/// How one row changed, as the server said it.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// A row that now exists (`initial`, `insert`, or v1 `new` without `old`); columns not
    /// listed have their default value.
    Insert(Box<[Datum]>),
    /// `update2` `modify`: per column, a difference to apply (sets/maps) or the new value.
    Diff(Vec<(u16, Datum)>),
    /// v1 modification: the full new row.
    Replace(Box<[Datum]>),
    Delete,
}

/// Changes to one table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableUpdate {
    pub table: usize,
    pub rows: Vec<(Uuid, RowChange)>,
}

/// The wire flavour of table-updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateFormat {
    /// `monitor` / `update`: `{"old":…, "new":…}`.
    V1,
    /// `monitor_cond`(`_since`) / `update2` / `update3`.
    V2,
}

/// Which monitor method the session ended up using.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonitorMethod {
    CondSince,
    Cond,
    Plain,
}

impl MonitorMethod {
    pub fn name(self) -> &'static str {
        match self {
            MonitorMethod::CondSince => "monitor_cond_since",
            MonitorMethod::Cond => "monitor_cond",
            MonitorMethod::Plain => "monitor",
        }
    }
    pub fn format(self) -> UpdateFormat {
        match self {
            MonitorMethod::Plain => UpdateFormat::V1,
            _ => UpdateFormat::V2,
        }
    }
}

/// The monitor-requests object for `tables` (`(meta, condition)`).
pub fn monitor_requests(
    tables: &[(Arc<TableMeta>, MonitorCondition)],
    method: MonitorMethod,
) -> Value {
    let mut o = serde_json::Map::new();
    for (meta, cond) in tables {
        let columns: Vec<&str> = meta
            .columns
            .iter()
            .map(|c| &**c)
            .filter(|c| *c != "_uuid")
            .collect();
        let mut req = json!({"columns": columns});
        if method != MonitorMethod::Plain && *cond != MonitorCondition::All {
            req["where"] = cond.to_json();
        }
        o.insert(meta.name.to_string(), Value::Array(vec![req]));
    }
    Value::Object(o)
}
