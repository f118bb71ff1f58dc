//! Typed OVN rows declared once per table: one `ovn_table` declaration gives the Rust struct,
//! the columns to monitor and the conversion from a replica [`Row`], so the columns read and the
//! columns monitored cannot drift apart. [`OvnTable::check_schema`] checks, at start, that every
//! declared column exists in the server's schema with a type its reader understands: a misspelt
//! or retyped column is a start-time error naming table and column, not a silently empty field.
//!
//! ```
//! use ovn_bgp_agent::ovn::table::OvnTable;
//! ovn_bgp_agent::ovn_table! {
//!     /// A Chassis row.
//!     pub struct ChassisName in "Chassis" {
//!         pub name: String = "name" as Str,
//!         pub other_config: std::collections::BTreeMap<String, String> = "other_config" as StrMap [optional],
//!     }
//! }
//! assert_eq!(ChassisName::TABLE, "Chassis");
//! ```

use std::collections::BTreeMap;

use crate::caps::ovsdb::schema::{AtomicType, ColumnType};
use crate::caps::ovsdb::{DatabaseSchema, OvsdbError, Row};

/// How a declared column is read, and so which schema types it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// A string (`""` when an optional column is empty).
    Str,
    /// Every string of a string set.
    Strs,
    /// A UUID reference as text (`""` when empty).
    Ref,
    /// An optional UUID reference as text.
    OptRef,
    /// Every UUID of a reference set, as text.
    Refs,
    OptBool,
    OptInt,
    /// A string → string map.
    StrMap,
}

impl ColumnKind {
    /// Whether a column of type `ty` can be read this way.
    pub fn accepts(self, ty: &ColumnType) -> bool {
        let single = ty.value.is_none() && ty.max == Some(1);
        let set = ty.value.is_none();
        match self {
            ColumnKind::Str => single && ty.key == AtomicType::String,
            ColumnKind::Strs => set && ty.key == AtomicType::String,
            ColumnKind::Ref | ColumnKind::OptRef => single && ty.key == AtomicType::Uuid,
            ColumnKind::Refs => set && ty.key == AtomicType::Uuid,
            ColumnKind::OptBool => single && ty.key == AtomicType::Boolean,
            ColumnKind::OptInt => single && ty.key == AtomicType::Integer,
            ColumnKind::StrMap => {
                ty.key == AtomicType::String && ty.value == Some(AtomicType::String)
            }
        }
    }

    /// What the reader expects, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            ColumnKind::Str => "a string",
            ColumnKind::Strs => "a set of strings",
            ColumnKind::Ref => "a UUID",
            ColumnKind::OptRef => "an optional UUID",
            ColumnKind::Refs => "a set of UUIDs",
            ColumnKind::OptBool => "an optional boolean",
            ColumnKind::OptInt => "an optional integer",
            ColumnKind::StrMap => "a string-to-string map",
        }
    }
}

/// The readers of each [`ColumnKind`], named as the kinds so the macro can call them.
#[allow(non_snake_case)]
pub mod read {
    use super::*;

    pub fn Str(row: &Row, column: &str) -> String {
        row.str(column).to_owned()
    }
    pub fn Strs(row: &Row, column: &str) -> Vec<String> {
        row.strs(column).map(str::to_owned).collect()
    }
    pub fn Ref(row: &Row, column: &str) -> String {
        row.opt_uuid(column)
            .map(|u| u.to_string())
            .unwrap_or_default()
    }
    pub fn OptRef(row: &Row, column: &str) -> Option<String> {
        row.opt_uuid(column).map(|u| u.to_string())
    }
    pub fn Refs(row: &Row, column: &str) -> Vec<String> {
        row.uuids(column).map(|u| u.to_string()).collect()
    }
    pub fn OptBool(row: &Row, column: &str) -> Option<bool> {
        row.bool(column)
    }
    pub fn OptInt(row: &Row, column: &str) -> Option<i64> {
        row.int(column)
    }
    pub fn StrMap(row: &Row, column: &str) -> BTreeMap<String, String> {
        row.map(column)
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// One declared column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnDecl {
    pub column: &'static str,
    pub kind: ColumnKind,
    /// Monitored only when the server's schema has it (columns that differ between OVN
    /// versions); read as empty otherwise.
    pub optional: bool,
}

/// A declared column the server's schema does not match.
#[derive(Debug, thiserror::Error)]
pub enum SchemaMismatch {
    #[error(transparent)]
    Missing(#[from] OvsdbError),
    #[error(
        "schema of {db}: column {table}.{column} is {found}, but the agent reads it as {expected}"
    )]
    WrongType {
        db: String,
        table: &'static str,
        column: &'static str,
        expected: &'static str,
        found: String,
    },
}

/// What `ovn_table` implements for each declared table.
pub trait OvnTable: Sized {
    const TABLE: &'static str;
    const COLUMNS: &'static [ColumnDecl];

    /// The typed row of a replica row of this table.
    fn from_row(row: &Row) -> Self;

    /// The columns to monitor on a server with `schema`: every required column and the
    /// optional ones it has.
    fn monitored_columns(schema: &DatabaseSchema) -> Vec<&'static str> {
        let present = schema.tables.get(Self::TABLE);
        Self::COLUMNS
            .iter()
            .filter(|c| !c.optional || present.is_some_and(|t| t.columns.contains_key(c.column)))
            .map(|c| c.column)
            .collect()
    }

    /// Every required column exists in `schema`, and every declared column present has a type
    /// its reader understands.
    fn check_schema(schema: &DatabaseSchema) -> Result<(), SchemaMismatch> {
        let required: Vec<String> = Self::COLUMNS
            .iter()
            .filter(|c| !c.optional)
            .map(|c| c.column.to_owned())
            .collect();
        let table = schema.check(Self::TABLE, &required)?;
        for c in Self::COLUMNS {
            let Some(ty) = table.columns.get(c.column) else {
                continue;
            };
            if !c.kind.accepts(ty) {
                return Err(SchemaMismatch::WrongType {
                    db: schema.name.clone(),
                    table: Self::TABLE,
                    column: c.column,
                    expected: c.kind.describe(),
                    found: describe_type(ty),
                });
            }
        }
        Ok(())
    }
}

fn describe_type(ty: &ColumnType) -> String {
    let max = ty.max.map_or("unlimited".to_owned(), |m| m.to_string());
    match ty.value {
        Some(v) => format!("a map {:?} -> {v:?} (min {}, max {max})", ty.key, ty.min),
        None => format!("{:?} (min {}, max {max})", ty.key, ty.min),
    }
}

/// Declares a typed OVN row: the struct (with a `uuid` field first), and its [`OvnTable`]
/// implementation. Each field names its column and how it is read (a [`ColumnKind`]); `[optional]`
/// marks a column that only some OVN versions have.
#[macro_export]
macro_rules! ovn_table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident in $table:literal {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty = $column:literal as $kind:ident $([$flag:ident])?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        $vis struct $name {
            /// The row's `_uuid`, as text.
            pub uuid: String,
            $( $(#[$fmeta])* $fvis $field: $ty, )*
        }

        impl $crate::ovn::table::OvnTable for $name {
            const TABLE: &'static str = $table;
            const COLUMNS: &'static [$crate::ovn::table::ColumnDecl] = &[
                $( $crate::ovn::table::ColumnDecl {
                    column: $column,
                    kind: $crate::ovn::table::ColumnKind::$kind,
                    optional: $crate::ovn_table!(@optional $($flag)?),
                }, )*
            ];

            fn from_row(row: &$crate::caps::ovsdb::Row) -> Self {
                $name {
                    uuid: row.uuid().to_string(),
                    $( $field: $crate::ovn::table::read::$kind(row, $column), )*
                }
            }
        }
    };
    (@optional) => { false };
    (@optional optional) => { true };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::ovn_table! {
        #[allow(dead_code)]
        struct Misspelt in "Port_Binding" {
            logical_port: String = "logical_port" as Str,
            port_type: String = "typo" as Str,
        }
    }

    crate::ovn_table! {
        #[allow(dead_code)]
        struct Retyped in "Port_Binding" {
            chassis: String = "chassis" as Str,
        }
    }

    crate::ovn_table! {
        #[allow(dead_code)]
        struct WithOptional in "Load_Balancer" {
            name: String = "name" as Str,
            groups: Vec<String> = "ls_datapath_group" as Refs [optional],
            absent: Vec<String> = "no_such_column" as Refs [optional],
        }
    }

    fn sb_schema() -> DatabaseSchema {
        let text = std::fs::read_to_string("/usr/share/ovn/ovn-sb.ovsschema")
            .expect("OVN is installed (scripts/install-deps.sh)");
        DatabaseSchema::from_json(&serde_json::from_str(&text).unwrap(), "file").unwrap()
    }

    #[test]
    fn a_misspelt_column_is_a_start_time_error_naming_it() {
        let schema = sb_schema();
        let e = Misspelt::check_schema(&schema).unwrap_err().to_string();
        assert!(e.contains("Port_Binding.typo"), "{e}");
        let e = Retyped::check_schema(&schema).unwrap_err().to_string();
        assert!(e.contains("Port_Binding.chassis"), "{e}");
        assert!(e.contains("reads it as a string"), "{e}");
    }

    #[test]
    fn optional_columns_are_monitored_only_when_present() {
        let schema = sb_schema();
        WithOptional::check_schema(&schema).unwrap();
        let cols = WithOptional::monitored_columns(&schema);
        assert!(cols.contains(&"name"));
        assert!(!cols.contains(&"no_such_column"));
        assert_eq!(
            cols.contains(&"ls_datapath_group"),
            schema.tables["Load_Balancer"]
                .columns
                .contains_key("ls_datapath_group")
        );
    }
}
