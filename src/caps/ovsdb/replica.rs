//! The in-memory copy of the monitored tables, its indexes, and the change events computed
//! while applying updates.
//!
//! Rows are `Arc<Row>`: an update builds the new row and keeps the previous `Arc` for the event,
//! so events cost no copy and readers never see a half-applied row. Columns are addressed by a
//! per-table index interned at start ([`TableMeta`]); values are compact [`Datum`]s.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

use super::error::OvsdbError;
use super::monitor::{RowChange, TableUpdate};
use super::schema::{AtomicType, ColumnType};
use super::types::{Atom, Datum, Uuid};

/// Hashes UUIDs (already random) by folding their bytes: much cheaper than SipHash.
#[derive(Default)]
pub struct UuidHasher(u64);

impl Hasher for UuidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_usize(&mut self, _len: usize) {}
}

pub type UuidMap<V> = HashMap<Uuid, V, BuildHasherDefault<UuidHasher>>;
type UuidSet = HashSet<Uuid, BuildHasherDefault<UuidHasher>>;

fn empty_string() -> Arc<str> {
    static EMPTY: OnceLock<Arc<str>> = OnceLock::new();
    EMPTY.get_or_init(|| Arc::from("")).clone()
}

fn default_datum(ty: &ColumnType) -> Datum {
    if ty.value.is_some() {
        return Datum::Map(Box::new([]));
    }
    if ty.min == 0 {
        return Datum::empty();
    }
    Datum::Atom(match ty.key {
        AtomicType::Integer => Atom::Integer(0),
        AtomicType::Real => Atom::Real(0.0),
        AtomicType::Boolean => Atom::Boolean(false),
        AtomicType::String => Atom::String(empty_string()),
        AtomicType::Uuid => Atom::Uuid(Uuid::ZERO),
    })
}

/// The monitored columns of one table, interned: a row stores its values in this order.
#[derive(Debug)]
pub struct TableMeta {
    pub name: Arc<str>,
    pub columns: Vec<Arc<str>>,
    pub types: Vec<ColumnType>,
    defaults: Box<[Datum]>,
    by_name: HashMap<Arc<str>, u16>,
}

impl TableMeta {
    pub fn new(name: &str, columns: Vec<(String, ColumnType)>) -> Self {
        let cols: Vec<(Arc<str>, ColumnType)> = columns
            .into_iter()
            .filter(|(c, _)| c != "_uuid")
            .map(|(c, t)| (Arc::<str>::from(c), t))
            .collect();
        TableMeta {
            name: Arc::from(name),
            by_name: cols
                .iter()
                .enumerate()
                .map(|(i, (c, _))| (c.clone(), i as u16))
                .collect(),
            defaults: cols.iter().map(|(_, t)| default_datum(t)).collect(),
            columns: cols.iter().map(|(c, _)| c.clone()).collect(),
            types: cols.into_iter().map(|(_, t)| t).collect(),
        }
    }
    /// Default value of every column, in column order.
    pub fn defaults(&self) -> &[Datum] {
        &self.defaults
    }

    pub fn column_index(&self, name: &str) -> Option<u16> {
        // Monitored tables have a handful of columns: comparing strings beats hashing them.
        if self.columns.len() <= 32 {
            return self
                .columns
                .iter()
                .position(|c| **c == *name)
                .map(|i| i as u16);
        }
        self.by_name.get(name).copied()
    }
}

/// One row of a monitored table.
#[derive(Debug, Clone)]
pub struct Row {
    meta: Arc<TableMeta>,
    uuid: Uuid,
    values: Box<[Datum]>,
}

impl PartialEq for Row {
    fn eq(&self, other: &Row) -> bool {
        self.uuid == other.uuid && self.values == other.values
    }
}

impl Row {
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }
    pub fn table(&self) -> &str {
        &self.meta.name
    }
    /// The value of a monitored column (`None` if the column is not monitored).
    pub fn get(&self, column: &str) -> Option<&Datum> {
        self.meta
            .column_index(column)
            .map(|i| &self.values[i as usize])
    }
    /// The value of a column by interned index.
    pub fn get_index(&self, column: u16) -> &Datum {
        &self.values[column as usize]
    }
    fn atoms(&self, column: &str) -> &[Atom] {
        self.get(column).map(Datum::atoms).unwrap_or(&[])
    }
    /// A string column (`""` when unset or not a string); also the single value of an optional
    /// string column.
    pub fn str(&self, column: &str) -> &str {
        self.opt_str(column).unwrap_or("")
    }
    /// An optional string column (min 0, max 1).
    pub fn opt_str(&self, column: &str) -> Option<&str> {
        self.get(column)?.as_atom()?.as_str()
    }
    /// All strings of a string-set column.
    pub fn strs<'a>(&'a self, column: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.atoms(column).iter().filter_map(Atom::as_str)
    }
    /// An optional (or required) single UUID reference.
    pub fn opt_uuid(&self, column: &str) -> Option<Uuid> {
        self.get(column)?.as_atom()?.as_uuid()
    }
    /// All UUIDs of a reference-set column.
    pub fn uuids<'a>(&'a self, column: &str) -> impl Iterator<Item = Uuid> + 'a {
        self.atoms(column).iter().filter_map(Atom::as_uuid)
    }
    pub fn int(&self, column: &str) -> Option<i64> {
        self.get(column)?.as_atom()?.as_i64()
    }
    pub fn bool(&self, column: &str) -> Option<bool> {
        self.get(column)?.as_atom()?.as_bool()
    }
    /// A string-to-string map column as `(key, value)` pairs.
    pub fn map<'a>(&'a self, column: &str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.get(column)
            .map(Datum::pairs)
            .unwrap_or(&[])
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?, v.as_str()?)))
    }
    /// One key of a string-to-string map column.
    pub fn map_get(&self, column: &str, key: &str) -> Option<&str> {
        self.map(column).find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

enum Postings {
    One(Uuid),
    Many(UuidSet),
}

/// An index on one column: atom value -> rows holding it (every element of a set column).
struct ColumnIndex {
    column: u16,
    postings: HashMap<Atom, Postings, foldhash::fast::RandomState>,
}

impl ColumnIndex {
    fn add(&mut self, key: &Atom, uuid: Uuid) {
        match self.postings.get_mut(key) {
            None => {
                self.postings.insert(key.clone(), Postings::One(uuid));
            }
            Some(Postings::One(u)) if *u == uuid => {}
            Some(p @ Postings::One(_)) => {
                let Postings::One(first) = *p else { return };
                let mut set = UuidSet::default();
                set.insert(first);
                set.insert(uuid);
                *p = Postings::Many(set);
            }
            Some(Postings::Many(set)) => {
                set.insert(uuid);
            }
        }
    }
    fn remove(&mut self, key: &Atom, uuid: Uuid) {
        let empty = match self.postings.get_mut(key) {
            Some(Postings::One(u)) => *u == uuid,
            Some(Postings::Many(set)) => {
                set.remove(&uuid);
                if set.len() == 1 {
                    let only = set.iter().next().copied().unwrap_or(uuid);
                    self.postings.insert(key.clone(), Postings::One(only));
                }
                false
            }
            None => false,
        };
        if empty {
            self.postings.remove(key);
        }
    }
    fn insert_row(&mut self, row: &Row) {
        for a in row.values[self.column as usize].atoms() {
            self.add(a, row.uuid);
        }
    }
    fn remove_row(&mut self, row: &Row) {
        for a in row.values[self.column as usize].atoms() {
            self.remove(a, row.uuid);
        }
    }
}

/// One monitored table.
pub struct Table {
    meta: Arc<TableMeta>,
    rows: UuidMap<Arc<Row>>,
    indexes: Vec<ColumnIndex>,
}

impl Table {
    fn new(meta: Arc<TableMeta>) -> Self {
        Table {
            meta,
            rows: UuidMap::default(),
            indexes: Vec::new(),
        }
    }
    pub fn name(&self) -> &str {
        &self.meta.name
    }
    pub fn meta(&self) -> &Arc<TableMeta> {
        &self.meta
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    pub fn get(&self, uuid: Uuid) -> Option<&Arc<Row>> {
        self.rows.get(&uuid)
    }
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Row>> {
        self.rows.values()
    }
    /// Rows whose indexed `column` holds `value` (for a set column: contains it). Fails if no
    /// index was registered on that column, so a forgotten index never turns into a scan.
    pub fn find<'a>(
        &'a self,
        column: &str,
        value: &Atom,
    ) -> Result<impl Iterator<Item = &'a Arc<Row>> + use<'a>, OvsdbError> {
        let col = self.meta.column_index(column);
        let index = self
            .indexes
            .iter()
            .find(|i| Some(i.column) == col)
            .ok_or_else(|| OvsdbError::BadIndex {
                table: self.meta.name.to_string(),
                column: column.to_owned(),
                reason: "no index registered on this column".into(),
            })?;
        let (one, many) = match index.postings.get(value) {
            None => (None, None),
            Some(Postings::One(u)) => (Some(*u), None),
            Some(Postings::Many(set)) => (None, Some(set)),
        };
        Ok(one
            .into_iter()
            .chain(many.into_iter().flat_map(|s| s.iter().copied()))
            .filter_map(move |u| self.rows.get(&u)))
    }
    /// [`Table::find`] for a string value.
    pub fn find_str<'a>(
        &'a self,
        column: &str,
        value: &str,
    ) -> Result<impl Iterator<Item = &'a Arc<Row>> + use<'a>, OvsdbError> {
        self.find(column, &Atom::string(value))
    }
    /// [`Table::find`] for a UUID reference.
    pub fn find_uuid<'a>(
        &'a self,
        column: &str,
        value: Uuid,
    ) -> Result<impl Iterator<Item = &'a Arc<Row>> + use<'a>, OvsdbError> {
        self.find(column, &Atom::Uuid(value))
    }
    /// The first row found by an index on a column expected to be unique (e.g. `logical_port`).
    pub fn find_one(&self, column: &str, value: &Atom) -> Result<Option<&Arc<Row>>, OvsdbError> {
        Ok(self.find(column, value)?.next())
    }

    fn put(&mut self, row: Arc<Row>) -> Option<Arc<Row>> {
        let old = self.rows.insert(row.uuid, row.clone());
        for idx in &mut self.indexes {
            match &old {
                Some(o) if o.values[idx.column as usize] == row.values[idx.column as usize] => {}
                Some(o) => {
                    idx.remove_row(o);
                    idx.insert_row(&row);
                }
                None => idx.insert_row(&row),
            }
        }
        old
    }

    fn take(&mut self, uuid: Uuid) -> Option<Arc<Row>> {
        let old = self.rows.remove(&uuid)?;
        for idx in &mut self.indexes {
            idx.remove_row(&old);
        }
        Some(old)
    }

    fn build_row(&self, uuid: Uuid, values: Box<[Datum]>) -> Row {
        Row {
            meta: self.meta.clone(),
            uuid,
            values,
        }
    }

    fn row_from_columns(&self, uuid: Uuid, cols: Vec<(u16, Datum)>) -> Row {
        let mut values = self.meta.defaults.clone();
        for (i, d) in cols {
            values[i as usize] = d;
        }
        self.build_row(uuid, values)
    }
}

/// What happened to one row.
#[derive(Debug, Clone)]
pub enum ChangeKind {
    Insert {
        new: Arc<Row>,
    },
    /// `old` is the complete previous row; `changed` lists the columns whose value differs.
    Update {
        old: Arc<Row>,
        new: Arc<Row>,
        changed: Vec<u16>,
    },
    Delete {
        old: Arc<Row>,
    },
}

/// One row change, delivered after the replica applied it.
#[derive(Debug, Clone)]
pub struct Change {
    pub table: Arc<str>,
    pub uuid: Uuid,
    pub kind: ChangeKind,
}

impl Change {
    /// The row after the change (`None` for a delete).
    pub fn new_row(&self) -> Option<&Arc<Row>> {
        match &self.kind {
            ChangeKind::Insert { new } | ChangeKind::Update { new, .. } => Some(new),
            ChangeKind::Delete { .. } => None,
        }
    }
    /// The row before the change (`None` for an insert).
    pub fn old_row(&self) -> Option<&Arc<Row>> {
        match &self.kind {
            ChangeKind::Update { old, .. } | ChangeKind::Delete { old } => Some(old),
            ChangeKind::Insert { .. } => None,
        }
    }
    /// Names of the columns an update changed (empty for inserts and deletes).
    pub fn changed_columns(&self) -> Vec<&str> {
        match &self.kind {
            ChangeKind::Update { new, changed, .. } => changed
                .iter()
                .map(|&i| &*new.meta.columns[i as usize])
                .collect(),
            _ => Vec::new(),
        }
    }
    /// Whether an update changed `column`.
    pub fn changed(&self, column: &str) -> bool {
        self.changed_columns().contains(&column)
    }
}

pub(crate) fn diff_columns(old: &Row, new: &Row) -> Vec<u16> {
    (0..new.values.len() as u16)
        .filter(|&i| old.values[i as usize] != new.values[i as usize])
        .collect()
}

/// The replica of one database's monitored tables.
pub struct Replica {
    tables: Vec<Table>,
    by_name: HashMap<Arc<str>, usize>,
    pub(crate) last_txn_id: Option<Uuid>,
    /// Kept only when a consumer asked for it ([`Replica::enable_journal`]).
    journal: Option<std::sync::Mutex<Journal>>,
}

/// The rows changed since a consumer last took the journal ([`Replica::take_journal`]), read
/// under the replica's lock: exactly the changes that made the replica it reads, unlike the
/// change stream, which a task of the consumer's reads later. The local NB reconciler tells
/// by it whether anyone changed the rows it applied since it applied them (issue 17).
#[derive(Debug, Default)]
pub struct Journal {
    /// What changed is not known row by row: a complete re-download replaced the contents
    /// (after a reconnect), or more rows changed than the journal keeps.
    pub lost: bool,
    /// Each row changed, by table and UUID, with its contents before each change recorded
    /// (none before an insert): what it was at any point, not only at the start (a row
    /// inserted and deleted again has had contents, whom they concerned may matter).
    pub rows: HashMap<(Arc<str>, Uuid), Vec<Arc<Row>>>,
    /// Contents held in `rows`.
    versions: usize,
}

/// Rows and contents a journal holds at most before it only says it lost track
/// ([`Journal::lost`]).
const JOURNAL_ROWS: usize = 1 << 16;

impl Journal {
    fn record(&mut self, changes: &[Change]) {
        if self.lost {
            return;
        }
        for change in changes {
            let versions = self
                .rows
                .entry((change.table.clone(), change.uuid))
                .or_default();
            if let Some(old) = change.old_row() {
                versions.push(old.clone());
                self.versions += 1;
            }
        }
        if self.rows.len() + self.versions > JOURNAL_ROWS {
            self.lost();
        }
    }

    fn lost(&mut self) {
        self.lost = true;
        self.rows = HashMap::new();
        self.versions = 0;
    }
}

impl Replica {
    /// An empty replica of `metas` (the client builds its own; public for benchmarks).
    pub fn new(metas: Vec<Arc<TableMeta>>) -> Self {
        Replica {
            by_name: metas
                .iter()
                .enumerate()
                .map(|(i, m)| (m.name.clone(), i))
                .collect(),
            tables: metas.into_iter().map(Table::new).collect(),
            last_txn_id: None,
            journal: None,
        }
    }

    /// Records the rows changed from now on, for [`Self::take_journal`].
    pub fn enable_journal(&mut self) {
        self.journal
            .get_or_insert_with(|| std::sync::Mutex::new(Journal::default()));
    }

    /// The rows changed since the journal was enabled or last taken; `None` when it is not
    /// enabled.
    pub fn take_journal(&self) -> Option<Journal> {
        let journal = self.journal.as_ref()?;
        Some(std::mem::take(
            &mut *journal.lock().unwrap_or_else(|e| e.into_inner()),
        ))
    }

    /// Looks at the rows changed since the journal was enabled or last taken, leaving it in
    /// place; `None` when it is not enabled.
    pub fn peek_journal<R>(&self, f: impl FnOnce(&Journal) -> R) -> Option<R> {
        let journal = self.journal.as_ref()?;
        Some(f(&journal.lock().unwrap_or_else(|e| e.into_inner())))
    }

    fn journal_mut(&mut self) -> Option<&mut Journal> {
        self.journal
            .as_mut()
            .map(|j| j.get_mut().unwrap_or_else(|e| e.into_inner()))
    }

    /// Registers an index on a column and fills it.
    pub fn add_index(&mut self, table: &str, column: &str) -> Result<(), OvsdbError> {
        let bad = |reason: &str| OvsdbError::BadIndex {
            table: table.to_owned(),
            column: column.to_owned(),
            reason: reason.to_owned(),
        };
        let t = self
            .by_name
            .get(table)
            .map(|&i| &mut self.tables[i])
            .ok_or_else(|| bad("table is not monitored"))?;
        let col = t
            .meta
            .column_index(column)
            .ok_or_else(|| bad("column is not monitored"))?;
        if t.meta.types[col as usize].is_map() {
            return Err(bad("map columns cannot be indexed"));
        }
        if !t.indexes.iter().any(|i| i.column == col) {
            let mut idx = ColumnIndex {
                column: col,
                postings: HashMap::default(),
            };
            for row in t.rows.values() {
                idx.insert_row(row);
            }
            t.indexes.push(idx);
        }
        Ok(())
    }

    /// A monitored table.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.by_name.get(name).map(|&i| &self.tables[i])
    }
    /// A monitored table, or an error naming it.
    pub fn get_table(&self, name: &str) -> Result<&Table, OvsdbError> {
        self.table(name)
            .ok_or_else(|| OvsdbError::NotMonitored(name.to_owned()))
    }
    /// A row by table and UUID.
    pub fn row(&self, table: &str, uuid: Uuid) -> Option<&Arc<Row>> {
        self.table(table)?.get(uuid)
    }
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter()
    }
    /// The transaction id the replica reflects (clustered databases only).
    pub fn last_txn_id(&self) -> Option<Uuid> {
        self.last_txn_id
    }

    /// Applies incremental updates, appending the events to `out`.
    #[doc(hidden)]
    pub fn apply(&mut self, updates: Vec<TableUpdate>, out: &mut Vec<Change>) {
        let before = out.len();
        self.apply_updates(updates, out);
        if let Some(journal) = self.journal_mut() {
            journal.record(&out[before..]);
        }
    }

    fn apply_updates(&mut self, updates: Vec<TableUpdate>, out: &mut Vec<Change>) {
        for tu in updates {
            let t = &mut self.tables[tu.table];
            for (uuid, change) in tu.rows {
                let new = match change {
                    RowChange::Delete => {
                        if let Some(old) = t.take(uuid) {
                            out.push(Change {
                                table: t.meta.name.clone(),
                                uuid,
                                kind: ChangeKind::Delete { old },
                            });
                        }
                        continue;
                    }
                    RowChange::Insert(values) | RowChange::Replace(values) => {
                        t.build_row(uuid, values)
                    }
                    RowChange::Diff(cols) if !t.rows.contains_key(&uuid) => {
                        // A modify for a row we do not have (should not happen): treat the
                        // columns as the row's content so nothing is lost.
                        t.row_from_columns(uuid, cols)
                    }
                    RowChange::Diff(cols) => {
                        let Some(old) = t.rows.get(&uuid) else {
                            continue;
                        };
                        let mut values = old.values.clone();
                        for (i, d) in cols {
                            let slot = &mut values[i as usize];
                            let ty = &t.meta.types[i as usize];
                            // The server sends the new value for columns holding at most one
                            // atom, and a difference for sets and maps (observed on OVS 3.1).
                            *slot = if ty.is_map() || ty.max != Some(1) {
                                slot.apply_diff(&d)
                            } else {
                                d
                            };
                        }
                        Row {
                            meta: t.meta.clone(),
                            uuid,
                            values,
                        }
                    }
                };
                Self::store(t, new, out);
            }
        }
    }

    fn store(t: &mut Table, new: Row, out: &mut Vec<Change>) {
        match t.rows.get(&new.uuid) {
            Some(old) if **old == new => {}
            _ => {
                let uuid = new.uuid;
                let new = Arc::new(new);
                let kind = match t.put(new.clone()) {
                    Some(old) => ChangeKind::Update {
                        changed: diff_columns(&old, &new),
                        old,
                        new,
                    },
                    None => ChangeKind::Insert { new },
                };
                out.push(Change {
                    table: t.meta.name.clone(),
                    uuid,
                    kind,
                });
            }
        }
    }

    /// Replaces the contents with a complete snapshot (after a full download) and reports only
    /// the rows that really differ from what the replica had.
    #[doc(hidden)]
    pub fn resync(&mut self, updates: Vec<TableUpdate>, out: &mut Vec<Change>) {
        if let Some(journal) = self.journal_mut() {
            journal.lost();
        }
        let mut seen: Vec<UuidSet> = (0..self.tables.len()).map(|_| UuidSet::default()).collect();
        for tu in updates {
            let t = &mut self.tables[tu.table];
            t.rows.reserve(tu.rows.len().saturating_sub(t.rows.len()));
            for (uuid, change) in tu.rows {
                let row = match change {
                    RowChange::Insert(v) | RowChange::Replace(v) => t.build_row(uuid, v),
                    RowChange::Diff(c) => t.row_from_columns(uuid, c),
                    RowChange::Delete => continue,
                };
                seen[tu.table].insert(uuid);
                Self::store(t, row, out);
            }
        }
        for (ti, t) in self.tables.iter_mut().enumerate() {
            let gone: Vec<Uuid> = t
                .rows
                .keys()
                .filter(|u| !seen[ti].contains(u))
                .copied()
                .collect();
            for uuid in gone {
                if let Some(old) = t.take(uuid) {
                    out.push(Change {
                        table: t.meta.name.clone(),
                        uuid,
                        kind: ChangeKind::Delete { old },
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::caps::ovsdb::client::{MonitorSpec, TableSpec};
    use crate::caps::ovsdb::decode;
    use crate::caps::ovsdb::monitor::UpdateFormat;
    use crate::caps::ovsdb::schema::DatabaseSchema;

    const U1: &str = "11111111-1111-1111-1111-111111111111";
    const U2: &str = "22222222-2222-2222-2222-222222222222";

    fn replica() -> (Replica, Vec<Arc<TableMeta>>) {
        let schema = DatabaseSchema::from_json(
            &json!({"name": "T", "version": "1.0.0", "tables": {"T": {"columns": {
                "name": {"type": "string"}
            }}}}),
            "test",
        )
        .unwrap();
        let metas = MonitorSpec::default()
            .table(TableSpec::new("T", &[]))
            .metas(&schema)
            .unwrap();
        (Replica::new(metas.clone()), metas)
    }

    fn update(metas: &[Arc<TableMeta>], rows: serde_json::Value) -> Vec<TableUpdate> {
        let text = json!({ "T": rows }).to_string();
        decode::table_updates(&text, metas, UpdateFormat::V2, None).unwrap()
    }

    /// The journal holds every row changed since it was taken, with each content it had
    /// before a change (so a row inserted and deleted again is there with what it held); a
    /// resync loses track.
    #[test]
    fn the_journal_records_every_content_until_taken() {
        let (mut replica, metas) = replica();
        replica.apply(
            update(&metas, json!({U1: {"insert": {"name": "a"}}})),
            &mut Vec::new(),
        );
        assert!(replica.take_journal().is_none(), "not enabled");
        replica.enable_journal();
        replica.apply(
            update(
                &metas,
                json!({U1: {"modify": {"name": "b"}}, U2: {"insert": {"name": "c"}}}),
            ),
            &mut Vec::new(),
        );
        replica.apply(
            update(&metas, json!({U2: {"delete": null}})),
            &mut Vec::new(),
        );
        let journal = replica.take_journal().unwrap();
        assert!(!journal.lost);
        let names = |uuid: &str| -> Vec<String> {
            journal.rows[&(Arc::from("T"), Uuid::parse(uuid).unwrap())]
                .iter()
                .map(|r| r.str("name").to_owned())
                .collect()
        };
        assert_eq!(names(U1), ["a"]);
        assert_eq!(
            names(U2),
            ["c"],
            "inserted, then deleted: its content is kept"
        );
        assert!(replica.take_journal().unwrap().rows.is_empty(), "taken");

        replica.resync(
            update(&metas, json!({U1: {"initial": {"name": "b"}}})),
            &mut Vec::new(),
        );
        assert!(replica.take_journal().unwrap().lost);
        assert!(!replica.take_journal().unwrap().lost, "a new journal");
    }
}
