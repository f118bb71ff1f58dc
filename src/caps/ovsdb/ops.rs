//! Transaction operations (RFC 7047 section 5.2) and conditions, with typed builders.
//!
//! ```
//! use ovn_bgp_agent::caps::ovsdb::{Atom, Datum, Mutator, Op};
//! let ops = vec![
//!     Op::insert("Logical_Switch").uuid_name("ls").set("name", "sw0"),
//!     Op::update("Port_Binding").where_eq("logical_port", "lp1").set("up", true),
//!     Op::mutate("Logical_Switch").where_eq("name", "sw0")
//!         .mutation("ports", Mutator::Insert, Datum::Atom(Atom::NamedUuid("ls".into()))),
//!     Op::comment("agent test"),
//! ];
//! assert_eq!(ops[0].to_json()["uuid-name"], "ls");
//! ```

use serde_json::{Value, json};

use super::error::OvsdbError;
use super::types::{Atom, Datum, Uuid};

/// Comparison function of a condition clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Includes,
    Excludes,
}

impl Function {
    fn as_str(self) -> &'static str {
        match self {
            Function::Eq => "==",
            Function::Ne => "!=",
            Function::Lt => "<",
            Function::Le => "<=",
            Function::Gt => ">",
            Function::Ge => ">=",
            Function::Includes => "includes",
            Function::Excludes => "excludes",
        }
    }
}

/// One clause `[column, function, value]`, or a literal `true`/`false`.
#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    Compare {
        column: String,
        function: Function,
        value: Datum,
    },
    Literal(bool),
}

impl Clause {
    pub fn new(column: impl Into<String>, function: Function, value: impl Into<Datum>) -> Self {
        Clause::Compare {
            column: column.into(),
            function,
            value: value.into(),
        }
    }
    pub fn eq(column: impl Into<String>, value: impl Into<Datum>) -> Self {
        Clause::new(column, Function::Eq, value)
    }
    pub fn to_json(&self) -> Value {
        match self {
            Clause::Literal(b) => Value::Bool(*b),
            Clause::Compare {
                column,
                function,
                value,
            } => json!([column, function.as_str(), value]),
        }
    }
}

/// Which rows of a table a monitor delivers: clauses combined with OR (as in `monitor_cond`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MonitorCondition {
    /// Every row (no condition).
    #[default]
    All,
    /// No row.
    Nothing,
    /// Rows matching at least one clause.
    Any(Vec<Clause>),
}

impl MonitorCondition {
    pub fn any(clauses: impl IntoIterator<Item = Clause>) -> Self {
        MonitorCondition::Any(clauses.into_iter().collect())
    }
    /// The `where` array sent to the server.
    pub fn to_json(&self) -> Value {
        match self {
            MonitorCondition::All => json!([true]),
            MonitorCondition::Nothing => json!([false]),
            MonitorCondition::Any(c) if c.is_empty() => json!([false]),
            MonitorCondition::Any(c) => Value::Array(c.iter().map(Clause::to_json).collect()),
        }
    }
    /// Columns the clauses refer to (validated against the schema).
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        let clauses: &[Clause] = match self {
            MonitorCondition::Any(c) => c,
            _ => &[],
        };
        clauses.iter().filter_map(|c| match c {
            Clause::Compare { column, .. } => Some(column.as_str()),
            Clause::Literal(_) => None,
        })
    }
}

/// Mutator of a `mutate` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutator {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Insert,
    Delete,
}

impl Mutator {
    fn as_str(self) -> &'static str {
        match self {
            Mutator::Add => "+=",
            Mutator::Sub => "-=",
            Mutator::Mul => "*=",
            Mutator::Div => "/=",
            Mutator::Mod => "%=",
            Mutator::Insert => "insert",
            Mutator::Delete => "delete",
        }
    }
}

/// One operation of a `transact` request. Build with the constructors and chain the setters.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    kind: OpKind,
    table: String,
    row: Vec<(String, Datum)>,
    conditions: Vec<Clause>,
    mutations: Vec<(String, Mutator, Datum)>,
    columns: Option<Vec<String>>,
    uuid_name: Option<String>,
    uuid: Option<Uuid>,
    wait_rows: Vec<Vec<(String, Datum)>>,
    wait_until_equal: bool,
    timeout_ms: Option<u64>,
    comment: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Insert,
    Update,
    Mutate,
    Delete,
    Select,
    Wait,
    Comment,
}

impl Op {
    fn new(kind: OpKind, table: &str) -> Op {
        Op {
            kind,
            table: table.to_owned(),
            row: Vec::new(),
            conditions: Vec::new(),
            mutations: Vec::new(),
            columns: None,
            uuid_name: None,
            uuid: None,
            wait_rows: Vec::new(),
            wait_until_equal: true,
            timeout_ms: None,
            comment: String::new(),
        }
    }
    pub fn insert(table: &str) -> Op {
        Op::new(OpKind::Insert, table)
    }
    pub fn update(table: &str) -> Op {
        Op::new(OpKind::Update, table)
    }
    pub fn mutate(table: &str) -> Op {
        Op::new(OpKind::Mutate, table)
    }
    pub fn delete(table: &str) -> Op {
        Op::new(OpKind::Delete, table)
    }
    pub fn select(table: &str) -> Op {
        Op::new(OpKind::Select, table)
    }
    /// `wait` until the rows matching the conditions equal (or, with `until_ne`, differ from)
    /// `rows` on `columns`.
    pub fn wait(table: &str, columns: &[&str], rows: Vec<Vec<(String, Datum)>>) -> Op {
        let mut op = Op::new(OpKind::Wait, table);
        op.columns = Some(columns.iter().map(|c| (*c).to_owned()).collect());
        op.wait_rows = rows;
        op
    }
    pub fn comment(text: impl Into<String>) -> Op {
        let mut op = Op::new(OpKind::Comment, "");
        op.comment = text.into();
        op
    }

    /// Sets a column (insert/update).
    pub fn set(mut self, column: &str, value: impl Into<Datum>) -> Op {
        self.row.push((column.to_owned(), value.into()));
        self
    }
    /// Names the inserted row so later operations can refer to it as `["named-uuid", name]`.
    pub fn uuid_name(mut self, name: &str) -> Op {
        self.uuid_name = Some(name.to_owned());
        self
    }
    /// Requests a specific UUID for an inserted row (OVS extension).
    pub fn with_uuid(mut self, uuid: Uuid) -> Op {
        self.uuid = Some(uuid);
        self
    }
    pub fn where_clause(mut self, clause: Clause) -> Op {
        self.conditions.push(clause);
        self
    }
    pub fn where_eq(self, column: &str, value: impl Into<Datum>) -> Op {
        self.where_clause(Clause::eq(column, value))
    }
    /// Restricts the operation to one row by UUID.
    pub fn where_uuid(self, uuid: Uuid) -> Op {
        self.where_eq("_uuid", Datum::Atom(Atom::Uuid(uuid)))
    }
    pub fn mutation(mut self, column: &str, mutator: Mutator, value: impl Into<Datum>) -> Op {
        self.mutations
            .push((column.to_owned(), mutator, value.into()));
        self
    }
    pub fn columns(mut self, columns: &[&str]) -> Op {
        self.columns = Some(columns.iter().map(|c| (*c).to_owned()).collect());
        self
    }
    pub fn until_ne(mut self) -> Op {
        self.wait_until_equal = false;
        self
    }
    pub fn timeout_ms(mut self, ms: u64) -> Op {
        self.timeout_ms = Some(ms);
        self
    }

    fn row_json(row: &[(String, Datum)]) -> Value {
        Value::Object(
            row.iter()
                .map(|(c, d)| (c.clone(), serde_json::to_value(d).unwrap_or(Value::Null)))
                .collect(),
        )
    }

    fn where_json(&self) -> Value {
        Value::Array(self.conditions.iter().map(Clause::to_json).collect())
    }

    /// The JSON object sent in the `transact` params.
    pub fn to_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        let op = match self.kind {
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Mutate => "mutate",
            OpKind::Delete => "delete",
            OpKind::Select => "select",
            OpKind::Wait => "wait",
            OpKind::Comment => "comment",
        };
        o.insert("op".into(), op.into());
        if self.kind == OpKind::Comment {
            o.insert("comment".into(), self.comment.clone().into());
            return Value::Object(o);
        }
        o.insert("table".into(), self.table.clone().into());
        match self.kind {
            OpKind::Insert => {
                o.insert("row".into(), Op::row_json(&self.row));
                if let Some(n) = &self.uuid_name {
                    o.insert("uuid-name".into(), n.clone().into());
                }
                if let Some(u) = self.uuid {
                    o.insert("uuid".into(), u.to_string().into());
                }
            }
            OpKind::Update => {
                o.insert("where".into(), self.where_json());
                o.insert("row".into(), Op::row_json(&self.row));
            }
            OpKind::Mutate => {
                o.insert("where".into(), self.where_json());
                o.insert(
                    "mutations".into(),
                    Value::Array(
                        self.mutations
                            .iter()
                            .map(|(c, m, d)| json!([c, m.as_str(), d]))
                            .collect(),
                    ),
                );
            }
            OpKind::Delete => {
                o.insert("where".into(), self.where_json());
            }
            OpKind::Select => {
                o.insert("where".into(), self.where_json());
                if let Some(c) = &self.columns {
                    o.insert("columns".into(), json!(c));
                }
            }
            OpKind::Wait => {
                o.insert("where".into(), self.where_json());
                o.insert(
                    "columns".into(),
                    json!(self.columns.clone().unwrap_or_default()),
                );
                o.insert(
                    "until".into(),
                    if self.wait_until_equal { "==" } else { "!=" }.into(),
                );
                o.insert(
                    "rows".into(),
                    Value::Array(self.wait_rows.iter().map(|r| Op::row_json(r)).collect()),
                );
                if let Some(t) = self.timeout_ms {
                    o.insert("timeout".into(), t.into());
                }
            }
            OpKind::Comment => {}
        }
        Value::Object(o)
    }
}

/// Result of one operation of a successful transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct OpResult(pub Value);

impl OpResult {
    /// UUID of the row an `insert` created.
    pub fn uuid(&self) -> Option<Uuid> {
        let u = self.0.get("uuid")?;
        let s = u.get(1)?.as_str()?;
        Uuid::parse(s)
    }
    /// Rows touched by `update`, `mutate` or `delete`.
    pub fn count(&self) -> Option<u64> {
        self.0.get("count")?.as_u64()
    }
    /// Rows returned by `select`.
    pub fn rows(&self) -> &[Value] {
        self.0
            .get("rows")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

/// Interprets a `transact` result array: the first error (an operation's or the commit's) fails
/// the whole transaction, naming the operation.
pub fn parse_transact_result(ops: &[Op], result: Value) -> Result<Vec<OpResult>, OvsdbError> {
    let arr = match result {
        Value::Array(a) => a,
        other => {
            return Err(OvsdbError::Transaction(format!(
                "result is not an array: {other}"
            )));
        }
    };
    for (i, r) in arr.iter().enumerate() {
        if let Some(err) = r.get("error") {
            let details = r.get("details").and_then(Value::as_str).unwrap_or("");
            let which = match ops.get(i) {
                Some(op) => format!("operation {i} ({})", op.to_json()),
                None => "commit".to_owned(),
            };
            return Err(OvsdbError::Transaction(format!("{which}: {err} {details}")));
        }
    }
    if arr.len() < ops.len() {
        return Err(OvsdbError::Transaction(format!(
            "server returned {} results for {} operations",
            arr.len(),
            ops.len()
        )));
    }
    Ok(arr.into_iter().map(OpResult).collect())
}
