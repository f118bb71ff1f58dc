//! Step-wise replay of recorded OVSDB contents through a compiled driver, in the style of
//! holo's conformance tests: an initial database, then numbered server-side changes, each
//! followed by the exposures the driver computes and the monitor conditions it asks for.
//!
//! # A case
//! A folder holding:
//! - `case.json`: `{"driver": "<registered driver name>", "database": "<OVSDB database>",
//!   "external_ids": {<the local Open_vSwitch row's external_ids: system-id, hostname,
//!   ovn-bridge-mappings, ...>}, "description": "...", "steps": {"01": "what step 01 does"}}`
//!   (`description` and `steps` are optional, for people reading the case; `"driver_inputs":
//!   {"00": <value>, "02": <value>}` gives the driver, before a step's rows, what the live
//!   driver learns from another source, e.g. the NB driver's `{"hosted_gateways": [...]}`);
//! - `bgp-agent.conf` (optional): the agent's configuration, read by the agent's own loader
//!   (environment variables are not consulted);
//! - `schema.json` (optional): the complete schema of the database; without it the schema
//!   vendored in `schemas/` for `database` is used. `schema-extra.json` (optional,
//!   `{"<table>": {"<column>": <column schema>}}`) adds columns to it (a case recorded against a
//!   newer OVN);
//! - `00-db.json`: the whole server-side database at start, `{"<table>": [<row as select
//!   returns it, with "_uuid">, ...]}` (what `scripts/record-sb-snapshot.sh` records);
//! - `NN-update.json` for NN = 01, 02, ... without gaps: one server-side transaction in
//!   `update2` notation, `{"<table>": {"<uuid>": {"insert": {<columns>}} | {"modify":
//!   {<columns>}} | {"delete": null}}}`. As on the wire, `modify` gives the new value of a
//!   column holding at most one value, and the *difference* for sets and maps (an element
//!   present is removed, an absent one added; a map key with the same value is removed, with
//!   another value replaced);
//! - `NN-expected.json` for every step, 00 included: [`StepOutput`] as pretty JSON.
//!
//! Every column named must exist in the schema, an `insert` must name a new row and a
//! `modify`/`delete` an existing one: a case that does not say what it means fails.
//!
//! # What the engine does
//! It keeps the full server-side database and gives the driver only the rows its monitor
//! conditions select, as ovsdb-server does with `monitor_cond`: after the initial contents and
//! after each step, the rows are filtered by the current conditions and delivered as changes
//! (rows that start matching as inserts, rows that stop matching as deletes, changed matching
//! rows as modifies, restricted to the monitored columns); then the driver's wanted conditions
//! are read, and while they differ the rows are filtered again (as the live session's
//! `monitor_cond_change` loop does), at most [`MAX_CONDITION_ROUNDS`] times. So the
//! conditional-monitoring logic is tested without a server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::caps::ovsdb::decode;
use crate::caps::ovsdb::monitor::{RowChange, TableUpdate, UpdateFormat};
use crate::caps::ovsdb::replica::TableMeta;
use crate::caps::ovsdb::{
    Change, DatabaseSchema, MonitorCondition, MonitorSpec, OvsdbError, Replica, TableSpec,
};
use crate::config::AgentConfig;
use crate::config::load::{ConfigError, ConfigSources, load_with_env};
use crate::exposure::{ExposedIp, ExposureSet, ProviderNetwork};
use crate::ovn::identity::{ChassisIdentity, IdentityError, identity_from_external_ids};
use crate::plugin::{self, PluginError};

/// The OVN_Southbound schema vendored with the agent (see `schemas/README.md`).
pub const SB_SCHEMA: &str = include_str!("../schemas/ovn-sb.ovsschema");
/// The OVN_Northbound schema vendored with the agent.
pub const NB_SCHEMA: &str = include_str!("../schemas/ovn-nb.ovsschema");

/// Condition rounds allowed per step before the case fails: each round follows one more hop
/// of the rows the previous one pulled in (gateway → router → subnets takes three).
pub const MAX_CONDITION_ROUNDS: usize = 16;

/// What a driver's replay hook is given: what the live driver would get from the host.
#[derive(Debug, Clone)]
pub struct ReplayInput {
    pub config: Arc<AgentConfig>,
    pub identity: ChassisIdentity,
}

/// A driver as the replay engine drives it: the same model, condition policy and computation
/// as the live driver, fed by the engine instead of an OVSDB client.
pub trait ReplayDriver {
    /// The database it reads (`OVN_Southbound`, ...).
    fn database(&self) -> &str;
    /// The tables and columns it monitors on a server with `schema`, with the conditions it
    /// starts with (the live driver's first monitor request).
    fn monitor_spec(&self, schema: &DatabaseSchema) -> Result<MonitorSpec, PluginError>;
    /// Apply row changes, as the live driver applies a batch from its client.
    fn apply(&mut self, changes: &[Change]);
    /// The conditions it wants now, per table; tables not listed keep their condition.
    fn conditions(&self) -> BTreeMap<String, MonitorCondition>;
    /// Its exposures now (what `Driver::desired_exposures` returns).
    fn exposures(&self) -> Result<ExposureSet, PluginError>;
    /// A step's input from `case.json` `driver_inputs` (what the live driver learns from
    /// another source than the replayed database). A driver that takes none refuses it.
    fn driver_input(&mut self, input: &Value) -> Result<(), PluginError> {
        let _ = input;
        Err(PluginError::NotImplemented {
            what: "driver_inputs for this driver".to_owned(),
        })
    }
}

/// The replay hook of a [`crate::plugin::DriverRegistration`].
pub type ReplayFactory = fn(&ReplayInput) -> Result<Box<dyn ReplayDriver>, PluginError>;

/// Why a case could not be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {reason}", path.display())]
    Case { path: PathBuf, reason: String },
    #[error("{}: {source}", path.display())]
    Config {
        path: PathBuf,
        #[source]
        source: Box<ConfigError>,
    },
    #[error("{}: {source}", path.display())]
    Schema {
        path: PathBuf,
        #[source]
        source: Box<OvsdbError>,
    },
    #[error("case.json external_ids: {0}")]
    Identity(#[source] Box<IdentityError>),
    #[error("case.json: driver {name}: no such driver in this build; available: {available}")]
    UnknownDriver { name: String, available: String },
    #[error("case.json: driver {name} cannot be replayed (it registers no replay hook)")]
    NoReplay { name: String },
    #[error("case.json: database {case}, but driver {driver} reads {reads}")]
    Database {
        case: String,
        driver: String,
        reads: String,
    },
    #[error("driver {driver}: {source}")]
    Driver {
        driver: String,
        #[source]
        source: Box<PluginError>,
    },
    #[error("{file}: {reason}")]
    Step { file: String, reason: String },
    #[error(
        "{file}: the monitor conditions did not settle after {MAX_CONDITION_ROUNDS} rounds \
         (still changing: {tables})"
    )]
    NoConvergence { file: String, tables: String },
}

/// `case.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// The registered driver name (`[DEFAULT] driver`).
    pub driver: String,
    /// The OVSDB database the rows belong to (`OVN_Southbound`, `OVN_Northbound`).
    pub database: String,
    /// The local `Open_vSwitch` row's `external_ids` (`system-id`, `hostname`,
    /// `ovn-bridge-mappings`, ...). A missing `hostname` is empty, not this machine's.
    pub external_ids: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// What each step does, by number (`"01"`), printed by `replay`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, String>,
    /// Inputs the live driver gets from elsewhere than this database, by step number (`"00"`
    /// for the start), given to [`ReplayDriver::driver_input`] before that step's rows (e.g.
    /// the NB driver's gateways hosted here as the Southbound says, on OVN < 23.09).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub driver_inputs: BTreeMap<String, Value>,
}

/// One `NN-update.json`.
#[derive(Debug, Clone)]
pub struct CaseStep {
    pub number: u32,
    pub update: Value,
}

/// A loaded case folder.
#[derive(Debug)]
pub struct ReplayCase {
    pub dir: PathBuf,
    pub spec: CaseSpec,
    pub config: Arc<AgentConfig>,
    /// What the configuration loader warned about (unknown or deprecated options).
    pub config_warnings: Vec<String>,
    pub identity: ChassisIdentity,
    pub schema: DatabaseSchema,
    /// `00-db.json`.
    pub initial: Value,
    /// Steps 01, 02, ... in order.
    pub steps: Vec<CaseStep>,
}

/// What a step's `NN-expected.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepOutput {
    /// The monitor condition of every monitored table, as the `where` array sent to the
    /// server (`[true]`: every row).
    pub conditions: BTreeMap<String, Value>,
    /// How many rows of each monitored table the conditions deliver to the driver.
    pub rows: BTreeMap<String, usize>,
    pub exposures: ExposureSet,
}

/// The result of one step.
#[derive(Debug, Clone)]
pub struct ReplayedStep {
    pub number: u32,
    pub output: StepOutput,
    /// How many condition changes the step took to settle.
    pub condition_rounds: usize,
}

impl ReplayedStep {
    /// `00-db.json` or `NN-update.json`.
    pub fn input_file(&self) -> String {
        input_file(self.number)
    }
    /// `NN-expected.json`.
    pub fn expected_file(&self) -> String {
        format!("{:02}-expected.json", self.number)
    }
}

fn input_file(number: u32) -> String {
    if number == 0 {
        "00-db.json".to_owned()
    } else {
        format!("{number:02}-update.json")
    }
}

fn read_text(path: &Path) -> Result<String, ReplayError> {
    std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_json(path: &Path) -> Result<Value, ReplayError> {
    serde_json::from_str(&read_text(path)?).map_err(|source| ReplayError::Json {
        path: path.to_owned(),
        source,
    })
}

fn case_error(path: &Path, reason: impl Into<String>) -> ReplayError {
    ReplayError::Case {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// The files a case folder may hold besides the numbered ones.
const CASE_FILES: &[&str] = &[
    "case.json",
    "bgp-agent.conf",
    "schema.json",
    "schema-extra.json",
];

impl ReplayCase {
    /// Load and check a case folder (see the module documentation for its layout).
    pub fn load(dir: &Path) -> Result<Self, ReplayError> {
        let spec_path = dir.join("case.json");
        let spec: CaseSpec =
            serde_json::from_value(read_json(&spec_path)?).map_err(|source| ReplayError::Json {
                path: spec_path.clone(),
                source,
            })?;
        let identity = identity_from_external_ids(
            spec.external_ids
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
            String::new,
        )
        .map_err(|e| ReplayError::Identity(Box::new(e)))?;

        let conf = dir.join("bgp-agent.conf");
        let sources = ConfigSources {
            config_files: if conf.exists() {
                vec![conf.clone()]
            } else {
                Vec::new()
            },
            config_dirs: Vec::new(),
            oslo_default_search: false,
        };
        let loaded =
            load_with_env(&sources, std::iter::empty::<(String, String)>()).map_err(|source| {
                ReplayError::Config {
                    path: conf,
                    source: Box::new(source),
                }
            })?;

        let schema = load_schema(dir, &spec.database)?;

        // The numbered files: 00-db.json, then NN-update.json / NN-expected.json without gaps.
        let mut updates = BTreeMap::new();
        let listing = std::fs::read_dir(dir).map_err(|source| ReplayError::Read {
            path: dir.to_owned(),
            source,
        })?;
        for entry in listing {
            let entry = entry.map_err(|source| ReplayError::Read {
                path: dir.to_owned(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if CASE_FILES.contains(&name.as_str()) || name.ends_with(".md") || name == "00-db.json"
            {
                continue;
            }
            let numbered = name.split_once('-').and_then(|(n, rest)| {
                let number: u32 = n.parse().ok().filter(|_| n.len() == 2)?;
                Some((number, rest))
            });
            match numbered {
                Some((n, "update.json")) if n > 0 => {
                    updates.insert(n, entry.path());
                }
                Some((_, "expected.json")) => {}
                _ => {
                    return Err(case_error(
                        &entry.path(),
                        "not a file of a replay case (case.json, bgp-agent.conf, schema.json, \
                         schema-extra.json, 00-db.json, NN-update.json with NN from 01, \
                         NN-expected.json, *.md)",
                    ));
                }
            }
        }
        let mut steps = Vec::new();
        for (i, (number, path)) in updates.into_iter().enumerate() {
            let want = u32::try_from(i + 1).unwrap_or(u32::MAX);
            if number != want {
                return Err(case_error(
                    &path,
                    format!(
                        "steps must be numbered without gaps: {} is missing",
                        input_file(want)
                    ),
                ));
            }
            steps.push(CaseStep {
                number,
                update: read_json(&path)?,
            });
        }
        for key in spec.driver_inputs.keys() {
            let known = key
                .parse::<u32>()
                .is_ok_and(|n| n as usize <= steps.len() && key.len() == 2);
            if !known {
                return Err(case_error(
                    &spec_path,
                    format!("driver_inputs: {key:?} does not name a step of this case (00..)"),
                ));
            }
        }
        for key in spec.steps.keys() {
            let known = key
                .parse::<u32>()
                .is_ok_and(|n| n >= 1 && n as usize <= steps.len() && key.len() == 2);
            if !known {
                return Err(case_error(
                    &spec_path,
                    format!("steps: {key:?} does not name a step of this case (01..)"),
                ));
            }
        }
        Ok(ReplayCase {
            dir: dir.to_owned(),
            spec,
            config: Arc::new(loaded.config),
            config_warnings: loaded.warnings,
            identity,
            schema,
            initial: read_json(&dir.join("00-db.json"))?,
            steps,
        })
    }

    /// The path of a file of the case.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// What step `number` does, from `case.json` (`""` when not said).
    pub fn step_description(&self, number: u32) -> &str {
        if number == 0 {
            return &self.spec.description;
        }
        self.spec
            .steps
            .get(&format!("{number:02}"))
            .map_or("", String::as_str)
    }
}

/// The schema of a case: its `schema.json`, else the vendored one of its database, plus its
/// `schema-extra.json`.
fn load_schema(dir: &Path, database: &str) -> Result<DatabaseSchema, ReplayError> {
    let own = dir.join("schema.json");
    let (mut json, label) = if own.exists() {
        (read_json(&own)?, own.clone())
    } else {
        let text = match database {
            "OVN_Southbound" => SB_SCHEMA,
            "OVN_Northbound" => NB_SCHEMA,
            other => {
                return Err(case_error(
                    &dir.join("case.json"),
                    format!(
                        "no schema is vendored for database {other:?} (OVN_Southbound, \
                         OVN_Northbound): add the case's schema.json"
                    ),
                ));
            }
        };
        let json = serde_json::from_str(text).map_err(|source| ReplayError::Json {
            path: PathBuf::from("schemas/"),
            source,
        })?;
        (
            json,
            PathBuf::from(format!("vendored schema of {database}")),
        )
    };
    let extra_path = dir.join("schema-extra.json");
    if extra_path.exists() {
        let extra = read_json(&extra_path)?;
        let tables = extra
            .as_object()
            .ok_or_else(|| case_error(&extra_path, "not an object of tables"))?;
        for (table, columns) in tables {
            let target = json["tables"][table]["columns"]
                .as_object_mut()
                .ok_or_else(|| {
                    case_error(&extra_path, format!("no table {table} in the schema"))
                })?;
            let columns = columns.as_object().ok_or_else(|| {
                case_error(&extra_path, format!("{table}: not an object of columns"))
            })?;
            for (column, ty) in columns {
                target.insert(column.clone(), ty.clone());
            }
        }
    }
    let schema =
        DatabaseSchema::from_json(&json, &label.display().to_string()).map_err(|source| {
            ReplayError::Schema {
                path: label.clone(),
                source: Box::new(source),
            }
        })?;
    if schema.name != database {
        return Err(case_error(
            &label,
            format!(
                "schema of {}, but case.json says database {database}",
                schema.name
            ),
        ));
    }
    Ok(schema)
}

/// The server side: every table of the schema, every column, every row.
struct ServerDb {
    metas: Vec<Arc<TableMeta>>,
    replica: Replica,
}

impl ServerDb {
    fn new(schema: &DatabaseSchema) -> Result<Self, OvsdbError> {
        let mut names: Vec<&String> = schema.tables.keys().collect();
        names.sort();
        let spec = names.into_iter().fold(MonitorSpec::default(), |spec, t| {
            spec.table(TableSpec::new(t, &[]))
        });
        let metas = spec.metas(schema)?;
        Ok(ServerDb {
            replica: Replica::new(metas.clone()),
            metas,
        })
    }

    fn step_error(file: &str, reason: impl Into<String>) -> ReplayError {
        ReplayError::Step {
            file: file.to_owned(),
            reason: reason.into(),
        }
    }

    /// `table` and every column named exist in the schema (`_uuid`, `_version` aside).
    fn check_columns<'a>(
        &self,
        file: &str,
        table: &str,
        columns: impl Iterator<Item = &'a String>,
    ) -> Result<(), ReplayError> {
        let meta = self
            .metas
            .iter()
            .find(|m| &*m.name == table)
            .ok_or_else(|| Self::step_error(file, format!("no table {table} in the schema")))?;
        for column in columns {
            if column.starts_with('_') {
                continue;
            }
            if meta.column_index(column).is_none() {
                return Err(Self::step_error(
                    file,
                    format!(
                        "{table}: no column {column:?} in the schema (a newer OVN's column goes \
                         in schema-extra.json)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn decode(&self, file: &str, updates: &Value) -> Result<Vec<TableUpdate>, ReplayError> {
        decode::table_updates(&updates.to_string(), &self.metas, UpdateFormat::V2, None)
            .map_err(|e| Self::step_error(file, e.to_string()))
    }

    /// Load `00-db.json` (`{"<table>": [<row with _uuid>, ...]}`).
    fn load(&mut self, snapshot: &Value) -> Result<(), ReplayError> {
        let file = input_file(0);
        let shape = |m: String| Self::step_error(&file, m);
        let tables = snapshot
            .as_object()
            .ok_or_else(|| shape("not an object of tables".into()))?;
        // The rows as one initial table-updates object, as a monitor reply carries them.
        let mut updates = serde_json::Map::new();
        for (table, rows) in tables {
            let rows = rows
                .as_array()
                .ok_or_else(|| shape(format!("{table} is not an array of rows")))?;
            let mut by_uuid = serde_json::Map::new();
            for row in rows {
                let mut row = row
                    .as_object()
                    .cloned()
                    .ok_or_else(|| shape(format!("a {table} row is not an object")))?;
                let uuid = match row.remove("_uuid") {
                    Some(Value::Array(a)) if a.len() == 2 && a[0] == "uuid" => a[1]
                        .as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| shape(format!("a {table} row has a malformed _uuid")))?,
                    _ => return Err(shape(format!("a {table} row has no [\"uuid\", ...] _uuid"))),
                };
                row.remove("_version");
                self.check_columns(&file, table, row.keys())?;
                if by_uuid
                    .insert(uuid.clone(), serde_json::json!({ "initial": row }))
                    .is_some()
                {
                    return Err(shape(format!("{table} row {uuid} appears twice")));
                }
            }
            updates.insert(table.clone(), Value::Object(by_uuid));
        }
        let decoded = self.decode(&file, &Value::Object(updates))?;
        self.replica.resync(decoded, &mut Vec::new());
        Ok(())
    }

    /// Apply one `NN-update.json`.
    fn apply(&mut self, number: u32, update: &Value) -> Result<(), ReplayError> {
        let file = input_file(number);
        let tables = update
            .as_object()
            .ok_or_else(|| Self::step_error(&file, "not an object of tables"))?;
        for (table, rows) in tables {
            let rows = rows.as_object().ok_or_else(|| {
                Self::step_error(&file, format!("{table}: not an object of row uuids"))
            })?;
            for (uuid, change) in rows {
                let ops = change.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
                    Self::step_error(
                        &file,
                        format!(
                            "{table} {uuid}: expected one of {{\"insert\": {{...}}}}, \
                             {{\"modify\": {{...}}}}, {{\"delete\": null}}"
                        ),
                    )
                })?;
                let (op, columns) = ops.iter().next().expect("one member");
                let exists = crate::caps::ovsdb::Uuid::parse(uuid)
                    .ok_or_else(|| {
                        Self::step_error(&file, format!("{table}: {uuid:?} is not a UUID"))
                    })
                    .map(|u| self.replica.row(table, u).is_some())?;
                let problem = match (op.as_str(), exists) {
                    ("insert", true) => Some("insert of a row that exists"),
                    ("modify" | "delete", false) => Some("change of a row that does not exist"),
                    ("insert" | "modify" | "delete", _) => None,
                    _ => Some("unknown operation (insert, modify, delete)"),
                };
                if let Some(problem) = problem {
                    return Err(Self::step_error(
                        &file,
                        format!("{table} {uuid}: {op}: {problem}"),
                    ));
                }
                if let Some(columns) = columns.as_object() {
                    self.check_columns(&file, table, columns.keys())?;
                } else if op != "delete" {
                    return Err(Self::step_error(
                        &file,
                        format!("{table} {uuid}: {op}: not an object of columns"),
                    ));
                }
            }
        }
        let decoded = self.decode(&file, update)?;
        self.replica.apply(decoded, &mut Vec::new());
        Ok(())
    }
}

/// The driver's side: the rows its conditions select, with its columns.
struct DriverView {
    metas: Vec<Arc<TableMeta>>,
    conditions: Vec<MonitorCondition>,
    replica: Replica,
}

impl DriverView {
    fn new(schema: &DatabaseSchema, spec: &MonitorSpec) -> Result<Self, OvsdbError> {
        let metas = spec.metas(schema)?;
        Ok(DriverView {
            conditions: spec.tables.iter().map(|t| t.condition.clone()).collect(),
            replica: Replica::new(metas.clone()),
            metas,
        })
    }

    /// Deliver what the server would: the rows matching the conditions now, as the changes
    /// from what the driver holds.
    fn refilter(&mut self, server: &ServerDb) -> Vec<Change> {
        let mut updates = Vec::new();
        for (i, (meta, condition)) in self.metas.iter().zip(&self.conditions).enumerate() {
            let mut rows = Vec::new();
            if let Some(table) = server.replica.table(&meta.name) {
                for row in table.iter().filter(|r| condition.matches(r)) {
                    let values: Box<[_]> = meta
                        .columns
                        .iter()
                        .zip(meta.defaults())
                        .map(|(c, default)| row.get(c).cloned().unwrap_or_else(|| default.clone()))
                        .collect();
                    rows.push((row.uuid(), RowChange::Insert(values)));
                }
            }
            updates.push(TableUpdate { table: i, rows });
        }
        let mut changes = Vec::new();
        self.replica.resync(updates, &mut changes);
        changes
    }

    /// Take the driver's wanted conditions; the tables whose condition changed.
    fn follow(
        &mut self,
        schema: &DatabaseSchema,
        wanted: BTreeMap<String, MonitorCondition>,
        file: &str,
    ) -> Result<Vec<String>, ReplayError> {
        let mut changed = Vec::new();
        for (table, condition) in wanted {
            let i = self
                .metas
                .iter()
                .position(|m| *m.name == *table)
                .ok_or_else(|| ReplayError::Step {
                    file: file.to_owned(),
                    reason: format!(
                        "the driver sets a condition on {table}, which it does not monitor"
                    ),
                })?;
            // As the server validates a monitor_cond_change.
            let columns: Vec<String> = condition.columns().map(str::to_owned).collect();
            schema
                .check(&table, &columns)
                .map_err(|e| ReplayError::Step {
                    file: file.to_owned(),
                    reason: format!("the driver's condition on {table}: {e}"),
                })?;
            if self.conditions[i] != condition {
                self.conditions[i] = condition;
                changed.push(table);
            }
        }
        Ok(changed)
    }

    fn output(&self, exposures: ExposureSet) -> StepOutput {
        StepOutput {
            conditions: self
                .metas
                .iter()
                .zip(&self.conditions)
                .map(|(m, c)| (m.name.to_string(), c.to_json()))
                .collect(),
            rows: self
                .replica
                .tables()
                .map(|t| (t.name().to_owned(), t.len()))
                .collect(),
            exposures,
        }
    }
}

/// Replay `case` through its driver: the output after the initial contents (step 0) and after
/// each step.
pub fn run(case: &ReplayCase) -> Result<Vec<ReplayedStep>, ReplayError> {
    let drivers = plugin::drivers();
    let name = &case.spec.driver;
    let registration =
        drivers
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| ReplayError::UnknownDriver {
                name: name.clone(),
                available: drivers
                    .iter()
                    .map(|d| d.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
    let factory = registration
        .replay
        .ok_or_else(|| ReplayError::NoReplay { name: name.clone() })?;
    let driver_error = |source| ReplayError::Driver {
        driver: name.clone(),
        source: Box::new(source),
    };
    let mut driver = factory(&ReplayInput {
        config: case.config.clone(),
        identity: case.identity.clone(),
    })
    .map_err(driver_error)?;
    if driver.database() != case.spec.database {
        return Err(ReplayError::Database {
            case: case.spec.database.clone(),
            driver: name.clone(),
            reads: driver.database().to_owned(),
        });
    }
    let schema_error = |source| ReplayError::Schema {
        path: case.path("case.json"),
        source: Box::new(source),
    };
    let spec = driver.monitor_spec(&case.schema).map_err(driver_error)?;
    let mut server = ServerDb::new(&case.schema).map_err(schema_error)?;
    let mut view = DriverView::new(&case.schema, &spec).map_err(schema_error)?;

    let mut out = Vec::new();
    for number in 0..=case.steps.len() {
        let number = u32::try_from(number).unwrap_or(u32::MAX);
        let file = input_file(number);
        if let Some(input) = case.spec.driver_inputs.get(&format!("{number:02}")) {
            driver.driver_input(input).map_err(driver_error)?;
        }
        match number {
            0 => server.load(&case.initial)?,
            n => server.apply(n, &case.steps[n as usize - 1].update)?,
        }
        let mut rounds = 0;
        loop {
            let changes = view.refilter(&server);
            if !changes.is_empty() {
                driver.apply(&changes);
            }
            let changed = view.follow(&case.schema, driver.conditions(), &file)?;
            if changed.is_empty() {
                break;
            }
            rounds += 1;
            if rounds > MAX_CONDITION_ROUNDS {
                return Err(ReplayError::NoConvergence {
                    file,
                    tables: changed.join(", "),
                });
            }
        }
        let exposures = driver.exposures().map_err(driver_error)?;
        out.push(ReplayedStep {
            number,
            output: view.output(exposures),
            condition_rounds: rounds,
        });
    }
    Ok(out)
}

/// A step's output as its `NN-expected.json` holds it.
pub fn render_output(output: &StepOutput) -> String {
    serde_json::to_string_pretty(output).unwrap_or_else(|e| format!("unserialisable: {e}")) + "\n"
}

/// How a step compares with its `NN-expected.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepCheck {
    Same,
    /// The expected file is missing.
    Missing,
    /// A short line diff, expected (`-`) to got (`+`).
    Differs(String),
}

/// Compare a step's output with the case's `NN-expected.json`.
pub fn check_step(case: &ReplayCase, step: &ReplayedStep) -> Result<StepCheck, ReplayError> {
    let path = case.path(&step.expected_file());
    if !path.exists() {
        return Ok(StepCheck::Missing);
    }
    let expected = read_text(&path)?;
    let got = render_output(&step.output);
    Ok(if expected == got {
        StepCheck::Same
    } else {
        StepCheck::Differs(line_diff(&expected, &got, 40))
    })
}

/// Write a step's `NN-expected.json`.
pub fn write_expected(case: &ReplayCase, step: &ReplayedStep) -> Result<(), ReplayError> {
    let path = case.path(&step.expected_file());
    std::fs::write(&path, render_output(&step.output))
        .map_err(|source| ReplayError::Read { path, source })
}

/// A unified-style line diff of `a` (`-`) to `b` (`+`) with two lines of context, at most
/// `max_lines` lines (then `...`).
pub fn line_diff(a: &str, b: &str, max_lines: usize) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    // Longest common subsequence table, from the end (files are a few thousand lines at most).
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: (' ' | '-' | '+', line).
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 2;
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT).min(ops.len() - 1);
        ops[lo..=hi].iter().any(|(op, _)| *op != ' ')
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped && !out.is_empty() {
            out.push("  ...".to_owned());
        }
        skipped = false;
        out.push(format!("{op} {line}"));
    }
    if out.len() > max_lines {
        out.truncate(max_lines);
        out.push("  ... (diff truncated)".to_owned());
    }
    out.join("\n")
}

fn provider_text(p: &ProviderNetwork) -> String {
    let mut s = format!("{}/{}", p.physnet, p.bridge.as_str());
    if let Some(vlan) = p.vlan {
        s.push_str(&format!(" vlan {vlan}"));
    }
    if let Some(evpn) = &p.evpn {
        s.push_str(&format!(" evpn vni {}", evpn.vni.get()));
    }
    s
}

fn kind_text<T: Serialize>(kind: &T) -> String {
    match serde_json::to_value(kind) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => format!("?{e}"),
    }
}

fn ip_line(ip: &ExposedIp) -> String {
    let mut s = format!("{:<24} {:<18} {}", ip.ip, kind_text(&ip.kind), ip.source);
    if let Some(p) = &ip.provider {
        s.push_str(&format!("  on {}", provider_text(p)));
    }
    if let Some(mac) = ip.lladdr {
        s.push_str(&format!("  lladdr {mac}"));
    }
    if !ip.ndp_proxy.is_empty() {
        let nets: Vec<String> = ip.ndp_proxy.iter().map(ToString::to_string).collect();
        s.push_str(&format!("  ndp-proxy {}", nets.join(",")));
    }
    if let Some(via) = ip.via {
        s.push_str(&format!("  via {via}"));
    }
    s
}

/// A step's conditions and exposures for people: one line per clause, exposure, bridge and
/// skipped row.
pub fn describe_step(case: &ReplayCase, step: &ReplayedStep) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    let what = case.step_description(step.number);
    line(format!(
        "== step {:02} ({}){}{}",
        step.number,
        step.input_file(),
        if what.is_empty() { "" } else { ": " },
        what
    ));
    let o = &step.output;
    line(format!(
        "conditions ({} change{}):",
        step.condition_rounds,
        if step.condition_rounds == 1 { "" } else { "s" }
    ));
    for (table, condition) in &o.conditions {
        let clauses: Vec<String> = match condition.as_array() {
            Some(clauses) => clauses
                .iter()
                .map(|c| match c.as_array() {
                    Some(parts) if parts.len() == 3 => format!(
                        "{} {} {}",
                        parts[0].as_str().unwrap_or("?"),
                        parts[1].as_str().unwrap_or("?"),
                        parts[2]
                    ),
                    _ => c.to_string(),
                })
                .collect(),
            None => vec![condition.to_string()],
        };
        let rows = o.rows.get(table).copied().unwrap_or(0);
        line(format!("  {table} ({rows} rows delivered):"));
        for c in clauses {
            line(format!("    {c}"));
        }
    }
    for (scope, s) in &o.exposures.scopes {
        line(format!(
            "exposures, scope {scope}{}:",
            s.evpn
                .as_ref()
                .map(|e| format!(" (vni {}, as {})", e.vni.get(), e.bgp_as))
                .unwrap_or_default()
        ));
        if s.is_empty() {
            line("  (none)".to_owned());
        }
        for ip in s.ips.values() {
            line(format!("  {}", ip_line(ip)));
        }
        for sub in &s.subnets {
            line(format!(
                "  {:<24} {:<18} {}  via {} on {}",
                sub.router_ip.to_string(),
                "tenant_subnet",
                sub.source,
                sub.via,
                provider_text(&sub.provider)
            ));
        }
        for r in s.routes.values() {
            let mut l = format!(
                "  {:<24} {:<18} {}",
                r.prefix.to_string(),
                kind_text(&r.kind),
                r.source
            );
            if let Some(via) = r.via {
                l.push_str(&format!("  via {via}"));
            }
            if let Some(p) = &r.provider {
                l.push_str(&format!("  on {}", provider_text(p)));
            }
            line(l);
        }
        for ip in &s.shadowed {
            line(format!("  shadowed: {}", ip_line(ip)));
        }
    }
    for b in o.exposures.bridges.values() {
        let physnets: Vec<&str> = b.physnets.iter().map(String::as_str).collect();
        let vlans: Vec<String> = b.vlans.iter().map(ToString::to_string).collect();
        line(format!(
            "bridge {} (#{}): physnets {}; vlans {}",
            b.bridge.as_str(),
            b.index,
            physnets.join(","),
            if vlans.is_empty() {
                "-".to_owned()
            } else {
                vlans.join(",")
            }
        ));
    }
    if !o.exposures.needs.is_empty() {
        let needs: Vec<String> = o.exposures.needs.iter().map(kind_text).collect();
        line(format!("needs: {}", needs.join(", ")));
    }
    for s in &o.exposures.skipped {
        line(format!("skipped {} {}: {}", s.table, s.row, s.reason));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_diff_shows_changes_with_context() {
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
        let b = "1\n2\nx\n4\n5\n6\n7\n8\n9\ny\n";
        let d = line_diff(a, b, 40);
        assert_eq!(
            d,
            "  1\n  2\n- 3\n+ x\n  4\n  5\n  ...\n  8\n  9\n- 10\n+ y"
        );
        assert_eq!(line_diff(a, a, 40), "");
        let long: String = (0..100).map(|i| format!("{i}\n")).collect();
        let d = line_diff("", &long, 10);
        assert_eq!(d.lines().count(), 11);
        assert!(d.ends_with("(diff truncated)"));
    }

    #[test]
    fn vendored_schemas_parse() {
        for (text, name) in [(SB_SCHEMA, "OVN_Southbound"), (NB_SCHEMA, "OVN_Northbound")] {
            let json: Value = serde_json::from_str(text).unwrap();
            let schema = DatabaseSchema::from_json(&json, "vendored").unwrap();
            assert_eq!(schema.name, name);
        }
    }
}
