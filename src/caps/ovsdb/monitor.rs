//! Monitor requests and the decoding of `update`/`update2`/`update3` table-updates.
//!
//! Table-updates are decoded with a schema-aware serde seed straight into column indexes and
//! compact [`Datum`]s: no intermediate `serde_json::Value`, and columns the client did not ask
//! for are skipped without allocation.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::{Value, json};

use super::ops::MonitorCondition;
use super::replica::TableMeta;
use super::types::{Datum, DatumSeed, Interner, KeyStr, Uuid};
use std::cell::RefCell;

/// How one row changed, as the server said it.
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone)]
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

/// Decodes table-updates for the monitored tables (`metas`, indexed as in the replica).
pub struct UpdatesSeed<'a> {
    pub metas: &'a [Arc<TableMeta>],
    pub format: UpdateFormat,
    pub interner: Option<&'a RefCell<Interner>>,
}

impl<'de> DeserializeSeed<'de> for UpdatesSeed<'_> {
    type Value = Vec<TableUpdate>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for UpdatesSeed<'_> {
    type Value = Vec<TableUpdate>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OVSDB table-updates object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(name) = map.next_key::<KeyStr<'de>>()? {
            match self.metas.iter().position(|m| *m.name == *name) {
                Some(table) => {
                    let rows = map.next_value_seed(RowsSeed {
                        meta: &self.metas[table],
                        format: self.format,
                        interner: self.interner,
                    })?;
                    out.push(TableUpdate { table, rows });
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

struct RowsSeed<'a> {
    meta: &'a TableMeta,
    format: UpdateFormat,
    interner: Option<&'a RefCell<Interner>>,
}

impl<'de> DeserializeSeed<'de> for RowsSeed<'_> {
    type Value = Vec<(Uuid, RowChange)>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowsSeed<'_> {
    type Value = Vec<(Uuid, RowChange)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OVSDB table-update object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(uuid) = map.next_key::<Uuid>()? {
            let change = match self.format {
                UpdateFormat::V2 => map.next_value_seed(RowUpdate2Seed {
                    cols: ColumnsSeed {
                        meta: self.meta,
                        interner: self.interner,
                    },
                })?,
                UpdateFormat::V1 => map.next_value_seed(RowUpdate1Seed {
                    cols: ColumnsSeed {
                        meta: self.meta,
                        interner: self.interner,
                    },
                })?,
            };
            out.push((uuid, change));
        }
        Ok(out)
    }
}

struct RowUpdate2Seed<'a> {
    cols: ColumnsSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for RowUpdate2Seed<'_> {
    type Value = RowChange;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowUpdate2Seed<'_> {
    type Value = RowChange;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OVSDB row-update2 object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut change = None;
        while let Some(kind) = map.next_key::<KeyStr<'de>>()? {
            change = Some(match &*kind {
                "initial" | "insert" => {
                    RowChange::Insert(map.next_value_seed(FullRowSeed(self.cols))?)
                }
                "modify" => RowChange::Diff(map.next_value_seed(self.cols)?),
                "delete" => {
                    map.next_value::<IgnoredAny>()?;
                    RowChange::Delete
                }
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown row-update2 member {other:?}"
                    )));
                }
            });
        }
        change.ok_or_else(|| de::Error::custom("empty row-update2 object"))
    }
}

struct RowUpdate1Seed<'a> {
    cols: ColumnsSeed<'a>,
}

impl<'de> DeserializeSeed<'de> for RowUpdate1Seed<'_> {
    type Value = RowChange;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowUpdate1Seed<'_> {
    type Value = RowChange;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OVSDB row-update object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut has_old = false;
        let mut new = None;
        while let Some(kind) = map.next_key::<KeyStr<'de>>()? {
            match &*kind {
                "old" => {
                    map.next_value::<IgnoredAny>()?;
                    has_old = true;
                }
                "new" => new = Some(map.next_value_seed(FullRowSeed(self.cols))?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(match (has_old, new) {
            (_, None) => RowChange::Delete,
            (false, Some(cols)) => RowChange::Insert(cols),
            (true, Some(cols)) => RowChange::Replace(cols),
        })
    }
}

/// Decodes a complete row straight into its value array (columns not sent keep defaults).
struct FullRowSeed<'a>(ColumnsSeed<'a>);

impl<'de> DeserializeSeed<'de> for FullRowSeed<'_> {
    type Value = Box<[Datum]>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FullRowSeed<'_> {
    type Value = Box<[Datum]>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OVSDB row object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values: Box<[Datum]> = self.0.meta.defaults().into();
        while let Some(col) = map.next_key::<KeyStr<'de>>()? {
            match self.0.meta.column_index(&col) {
                Some(idx) => values[idx as usize] = self.0.datum(idx, &mut map)?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(values)
    }
}

#[derive(Clone, Copy)]
struct ColumnsSeed<'a> {
    meta: &'a TableMeta,
    interner: Option<&'a RefCell<Interner>>,
}

impl ColumnsSeed<'_> {
    fn datum<'de, A: MapAccess<'de>>(&self, idx: u16, map: &mut A) -> Result<Datum, A::Error> {
        use super::schema::AtomicType::Real;
        let mut d: Datum = map.next_value_seed(DatumSeed(self.interner))?;
        let ty = &self.meta.types[idx as usize];
        if ty.key == Real || ty.value == Some(Real) {
            d.coerce_reals(ty.key == Real, ty.value == Some(Real));
        }
        Ok(d)
    }
}

impl<'de> DeserializeSeed<'de> for ColumnsSeed<'_> {
    type Value = Vec<(u16, Datum)>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ColumnsSeed<'_> {
    type Value = Vec<(u16, Datum)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OVSDB row object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(col) = map.next_key::<KeyStr<'de>>()? {
            match self.meta.column_index(&col) {
                Some(idx) => out.push((idx, self.datum(idx, &mut map)?)),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// Decodes a `monitor_cond_since` reply `[found, last-txn-id, table-updates2]` in one pass.
pub struct CondSinceReplySeed<'a> {
    pub metas: &'a [Arc<TableMeta>],
    pub interner: Option<&'a RefCell<Interner>>,
}

/// A decoded `monitor_cond_since` reply.
pub struct CondSinceReply {
    pub found: bool,
    pub last_txn_id: Uuid,
    pub updates: Vec<TableUpdate>,
}

impl<'de> DeserializeSeed<'de> for CondSinceReplySeed<'_> {
    type Value = CondSinceReply;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for CondSinceReplySeed<'_> {
    type Value = CondSinceReply;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("[found, last-txn-id, table-updates2]")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let missing =
            || de::Error::custom("monitor_cond_since reply is not [found, txn-id, updates]");
        let found: bool = seq.next_element()?.ok_or_else(missing)?;
        let last_txn_id: Uuid = seq.next_element()?.ok_or_else(missing)?;
        let updates = seq
            .next_element_seed(UpdatesSeed {
                metas: self.metas,
                format: UpdateFormat::V2,
                interner: self.interner,
            })?
            .ok_or_else(missing)?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(missing());
        }
        Ok(CondSinceReply {
            found,
            last_txn_id,
            updates,
        })
    }
}
