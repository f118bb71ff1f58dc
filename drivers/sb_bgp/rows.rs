//! Decoding Southbound rows in RFC 7047 JSON notation (as `transact`/`select` and monitor
//! updates carry them) into the driver's typed rows. Used for recorded snapshots in tests and
//! tools; every malformed value is an error naming the column, never a panic.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::model::{LoadBalancer, PortBinding, SbModel};

/// A decoding error naming the table, the row and the column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{table} row {row}: column {column}: {message}")]
pub struct RowError {
    pub table: String,
    pub row: String,
    pub column: String,
    pub message: String,
}

struct Row<'a> {
    table: &'a str,
    uuid: String,
    value: &'a serde_json::Map<String, Value>,
}

impl<'a> Row<'a> {
    fn new(table: &'a str, value: &'a Value) -> Result<Self, RowError> {
        let err = |message: &str| RowError {
            table: table.to_owned(),
            row: "?".to_owned(),
            column: "_uuid".to_owned(),
            message: message.to_owned(),
        };
        let value = value
            .as_object()
            .ok_or_else(|| err("row is not an object"))?;
        let uuid = value
            .get("_uuid")
            .and_then(uuid_atom)
            .ok_or_else(|| err("missing or malformed _uuid"))?;
        Ok(Self { table, uuid, value })
    }

    fn err(&self, column: &str, message: impl Into<String>) -> RowError {
        RowError {
            table: self.table.to_owned(),
            row: self.uuid.clone(),
            column: column.to_owned(),
            message: message.into(),
        }
    }

    /// The members of a set column (a bare atom is a one-element set); absent → empty.
    fn set(&self, column: &str) -> Result<Vec<&'a Value>, RowError> {
        match self.value.get(column) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) if a.first().and_then(Value::as_str) == Some("set") => a
                .get(1)
                .and_then(Value::as_array)
                .map(|members| members.iter().collect())
                .ok_or_else(|| self.err(column, "malformed set")),
            Some(atom) => Ok(vec![atom]),
        }
    }

    fn string(&self, column: &str) -> Result<String, RowError> {
        match self.set(column)?.as_slice() {
            [] => Ok(String::new()),
            [v] => v
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| self.err(column, "expected a string")),
            _ => Err(self.err(column, "expected one string")),
        }
    }

    fn strings(&self, column: &str) -> Result<Vec<String>, RowError> {
        self.set(column)?
            .into_iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.err(column, "expected strings"))
            })
            .collect()
    }

    fn optional_uuid(&self, column: &str) -> Result<Option<String>, RowError> {
        match self.set(column)?.as_slice() {
            [] => Ok(None),
            [v] => uuid_atom(v)
                .map(Some)
                .ok_or_else(|| self.err(column, "expected a uuid")),
            _ => Err(self.err(column, "expected at most one uuid")),
        }
    }

    fn uuids(&self, column: &str) -> Result<Vec<String>, RowError> {
        self.set(column)?
            .into_iter()
            .map(|v| uuid_atom(v).ok_or_else(|| self.err(column, "expected uuids")))
            .collect()
    }

    fn optional_bool(&self, column: &str) -> Result<Option<bool>, RowError> {
        match self.set(column)?.as_slice() {
            [] => Ok(None),
            [v] => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.err(column, "expected a boolean")),
            _ => Err(self.err(column, "expected at most one boolean")),
        }
    }

    fn optional_int(&self, column: &str) -> Result<Option<i64>, RowError> {
        match self.set(column)?.as_slice() {
            [] => Ok(None),
            [v] => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.err(column, "expected an integer")),
            _ => Err(self.err(column, "expected at most one integer")),
        }
    }

    fn string_map(&self, column: &str) -> Result<BTreeMap<String, String>, RowError> {
        let Some(v) = self.value.get(column) else {
            return Ok(BTreeMap::new());
        };
        let pairs = v
            .as_array()
            .filter(|a| a.first().and_then(Value::as_str) == Some("map"))
            .and_then(|a| a.get(1))
            .and_then(Value::as_array)
            .ok_or_else(|| self.err(column, "expected a map"))?;
        pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(k), Value::String(v)]) => Ok((k.clone(), v.clone())),
                _ => Err(self.err(column, "expected string:string pairs")),
            })
            .collect()
    }
}

fn uuid_atom(v: &Value) -> Option<String> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(tag), Value::String(u)]) if tag == "uuid" || tag == "named-uuid" => {
            Some(u.clone())
        }
        _ => None,
    }
}

pub fn port_binding(value: &Value) -> Result<PortBinding, RowError> {
    let row = Row::new("Port_Binding", value)?;
    Ok(PortBinding {
        logical_port: row.string("logical_port")?,
        port_type: row.string("type")?,
        mac: row.strings("mac")?,
        chassis: row.optional_uuid("chassis")?,
        up: row.optional_bool("up")?,
        datapath: row.optional_uuid("datapath")?.unwrap_or_default(),
        options: row.string_map("options")?,
        tag: row.optional_int("tag")?,
        nat_addresses: row.strings("nat_addresses")?,
        external_ids: row.string_map("external_ids")?,
        uuid: row.uuid,
    })
}

/// A recorded Southbound snapshot: `{"<table>": [<row>, ...], ...}` with rows as `select`
/// returns them (each with `_uuid`).
pub fn load_snapshot(snapshot: &Value) -> (SbModel, Vec<RowError>) {
    let mut model = SbModel::default();
    let mut errors = Vec::new();
    let rows = |table: &str| -> Vec<&Value> {
        snapshot
            .get(table)
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    for v in rows("Chassis") {
        match Row::new("Chassis", v).and_then(|r| Ok((r.uuid.clone(), r.string("name")?))) {
            Ok((uuid, name)) => model.upsert_chassis(uuid, name),
            Err(e) => errors.push(e),
        }
    }
    for v in rows("Port_Binding") {
        match port_binding(v) {
            Ok(p) => model.upsert_port(p),
            Err(e) => errors.push(e),
        }
    }
    // Datapath groups referenced by load balancers.
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in rows("Logical_DP_Group") {
        match Row::new("Logical_DP_Group", v)
            .and_then(|r| Ok((r.uuid.clone(), r.uuids("datapaths")?)))
        {
            Ok((uuid, dps)) => {
                groups.insert(uuid, dps);
            }
            Err(e) => errors.push(e),
        }
    }
    for v in rows("Load_Balancer") {
        let lb = Row::new("Load_Balancer", v).and_then(|r| {
            let mut datapaths: BTreeSet<String> = r.uuids("datapaths")?.into_iter().collect();
            for column in ["datapath_group", "ls_datapath_group", "lr_datapath_group"] {
                for group in r.uuids(column)? {
                    datapaths.extend(groups.get(&group).into_iter().flatten().cloned());
                }
            }
            Ok(LoadBalancer {
                uuid: r.uuid.clone(),
                name: r.string("name")?,
                datapaths,
            })
        });
        match lb {
            Ok(lb) => model.upsert_load_balancer(lb),
            Err(e) => errors.push(e),
        }
    }
    (model, errors)
}
