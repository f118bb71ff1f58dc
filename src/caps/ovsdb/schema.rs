//! Database schemas (RFC 7047 section 3.2), reduced to what the client needs: which tables and
//! columns exist and the shape of each column's type.

use std::collections::HashMap;

use serde_json::Value;

use super::error::OvsdbError;

/// Atomic type of a column's keys or values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicType {
    Integer,
    Real,
    Boolean,
    String,
    Uuid,
}

/// The type of one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnType {
    pub key: AtomicType,
    pub value: Option<AtomicType>,
    pub min: u64,
    /// `None` means "unlimited".
    pub max: Option<u64>,
}

impl ColumnType {
    /// Exactly one atom (min = max = 1, not a map).
    pub fn is_scalar(&self) -> bool {
        self.value.is_none() && self.min == 1 && self.max == Some(1)
    }
    pub fn is_map(&self) -> bool {
        self.value.is_some()
    }
}

#[derive(Debug, Clone)]
pub struct TableSchema {
    pub name: String,
    pub columns: HashMap<String, ColumnType>,
}

#[derive(Debug, Clone)]
pub struct DatabaseSchema {
    pub name: String,
    pub version: String,
    pub tables: HashMap<String, TableSchema>,
}

fn atomic(v: &Value) -> Option<AtomicType> {
    let name = match v {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("type")?.as_str()?,
        _ => return None,
    };
    Some(match name {
        "integer" => AtomicType::Integer,
        "real" => AtomicType::Real,
        "boolean" => AtomicType::Boolean,
        "string" => AtomicType::String,
        "uuid" => AtomicType::Uuid,
        _ => return None,
    })
}

fn column_type(v: &Value) -> Option<ColumnType> {
    if let Some(key) = atomic(v) {
        return Some(ColumnType {
            key,
            value: None,
            min: 1,
            max: Some(1),
        });
    }
    let o = v.as_object()?;
    let key = atomic(o.get("key")?)?;
    let value = match o.get("value") {
        Some(v) => Some(atomic(v)?),
        None => None,
    };
    let min = o.get("min").map(|m| m.as_u64()).unwrap_or(Some(1))?;
    let max = match o.get("max") {
        None => Some(1),
        Some(Value::String(s)) if s == "unlimited" => None,
        Some(m) => Some(m.as_u64()?),
    };
    Some(ColumnType {
        key,
        value,
        min,
        max,
    })
}

impl DatabaseSchema {
    /// Parses the result of `get_schema`.
    pub fn from_json(v: &Value, remote: &str) -> Result<Self, OvsdbError> {
        let bad = |reason: String| OvsdbError::BadSchema {
            remote: remote.to_owned(),
            reason,
        };
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no name".into()))?;
        let version = v
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let tables_json = v
            .get("tables")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("no tables".into()))?;
        let mut tables = HashMap::new();
        for (tname, t) in tables_json {
            let cols = t
                .get("columns")
                .and_then(Value::as_object)
                .ok_or_else(|| bad(format!("table {tname} has no columns")))?;
            let mut columns = HashMap::new();
            for (cname, c) in cols {
                let ty = c
                    .get("type")
                    .and_then(column_type)
                    .ok_or_else(|| bad(format!("column {tname}.{cname} has an invalid type")))?;
                columns.insert(cname.clone(), ty);
            }
            // Every table has these implicitly.
            for implicit in ["_uuid", "_version"] {
                columns.insert(
                    implicit.to_owned(),
                    ColumnType {
                        key: AtomicType::Uuid,
                        value: None,
                        min: 1,
                        max: Some(1),
                    },
                );
            }
            tables.insert(
                tname.clone(),
                TableSchema {
                    name: tname.clone(),
                    columns,
                },
            );
        }
        Ok(DatabaseSchema {
            name: name.to_owned(),
            version,
            tables,
        })
    }

    /// Checks that a table and columns exist, naming the first missing one.
    pub fn check(&self, table: &str, columns: &[String]) -> Result<&TableSchema, OvsdbError> {
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| OvsdbError::MissingTable {
                db: self.name.clone(),
                table: table.to_owned(),
                version: self.version.clone(),
            })?;
        for c in columns {
            if !t.columns.contains_key(c) {
                return Err(OvsdbError::MissingColumn {
                    db: self.name.clone(),
                    table: table.to_owned(),
                    column: c.clone(),
                    version: self.version.clone(),
                });
            }
        }
        Ok(t)
    }
}
