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
use super::replica::Row;
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
    /// Whether `row` satisfies the clause, as ovsdb-server evaluates it (RFC 7047 §5.1):
    /// `==`/`!=` compare whole values (sets and maps unordered), `includes` holds when every
    /// element (or key-value pair) of the clause's value is in the column, `excludes` when none
    /// is, and `<`, `<=`, `>`, `>=` compare one integer or real (an empty optional column never
    /// satisfies them, as in ovsdb-server). A column the row does not carry never matches:
    /// the server would have refused the condition.
    pub fn matches(&self, row: &Row) -> bool {
        let (column, function, value) = match self {
            Clause::Literal(b) => return *b,
            Clause::Compare {
                column,
                function,
                value,
            } => (column, *function, value),
        };
        let Some(field) = row.get(column) else {
            return false;
        };
        match function {
            Function::Eq => datum_equal(field, value),
            Function::Ne => !datum_equal(field, value),
            Function::Includes => datum_includes(field, value),
            Function::Excludes => datum_excludes(field, value),
            Function::Lt | Function::Le | Function::Gt | Function::Ge => {
                let (Some(a), Some(b)) = (field.as_atom(), value.as_atom()) else {
                    return false;
                };
                let ordering = match (a, b) {
                    (Atom::Integer(a), Atom::Integer(b)) => a.cmp(b),
                    (Atom::Integer(_) | Atom::Real(_), Atom::Integer(_) | Atom::Real(_)) => {
                        // NaN compares with nothing.
                        match a.as_f64().partial_cmp(&b.as_f64()) {
                            Some(o) => o,
                            None => return false,
                        }
                    }
                    _ => return false,
                };
                match function {
                    Function::Lt => ordering.is_lt(),
                    Function::Le => ordering.is_le(),
                    Function::Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                }
            }
        }
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
    /// Whether ovsdb-server delivers `row` under this condition: `All` every row, `Nothing`
    /// none, `Any` the rows at least one clause matches (an empty `Any` matches none, as the
    /// `[false]` it is sent as).
    pub fn matches(&self, row: &Row) -> bool {
        match self {
            MonitorCondition::All => true,
            MonitorCondition::Nothing => false,
            MonitorCondition::Any(clauses) => clauses.iter().any(|c| c.matches(row)),
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

/// OVSDB value equality: sets and maps compare as unordered collections; an empty set and an
/// empty map are the same empty value (`["set",[]]` is how a condition names an empty map).
fn datum_equal(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Map(x), Datum::Map(y)) => x.len() == y.len() && x.iter().all(|p| y.contains(p)),
        (Datum::Map(_), other) | (other, Datum::Map(_)) => a.is_empty() && other.is_empty(),
        _ => {
            let (x, y) = (a.atoms(), b.atoms());
            x.len() == y.len() && x.iter().all(|e| y.contains(e))
        }
    }
}

/// `field includes arg`: every element (pair) of `arg` is in `field`; the empty value is
/// included in everything.
fn datum_includes(field: &Datum, arg: &Datum) -> bool {
    if arg.is_empty() {
        return true;
    }
    match (field, arg) {
        (Datum::Map(f), Datum::Map(a)) => a.iter().all(|p| f.contains(p)),
        (Datum::Map(_), _) | (_, Datum::Map(_)) => false,
        _ => arg.atoms().iter().all(|e| field.atoms().contains(e)),
    }
}

/// `field excludes arg`: no element (pair) of `arg` is in `field`.
fn datum_excludes(field: &Datum, arg: &Datum) -> bool {
    match (field, arg) {
        (Datum::Map(f), Datum::Map(a)) => !a.iter().any(|p| f.contains(p)),
        // A set against a map: only the empty value is excluded (the server refuses the rest).
        (Datum::Map(_), _) | (_, Datum::Map(_)) => arg.is_empty(),
        _ => !arg.atoms().iter().any(|e| field.atoms().contains(e)),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::caps::ovsdb::client::{MonitorSpec, TableSpec};
    use crate::caps::ovsdb::decode;
    use crate::caps::ovsdb::monitor::UpdateFormat;
    use crate::caps::ovsdb::replica::Replica;
    use crate::caps::ovsdb::schema::DatabaseSchema;

    const U1: &str = "11111111-1111-1111-1111-111111111111";
    const U2: &str = "22222222-2222-2222-2222-222222222222";

    /// A row of a table with one column of each shape, decoded by the client's own decoder.
    fn row(columns: Value) -> Arc<Row> {
        let schema = DatabaseSchema::from_json(
            &json!({"name": "T", "version": "1.0.0", "tables": {"T": {"columns": {
                "name": {"type": "string"},
                "type": {"type": "string"},
                "tag": {"type": {"key": "integer", "min": 0, "max": 1}},
                "weight": {"type": "real"},
                "chassis": {"type": {"key": "uuid", "min": 0, "max": 1}},
                "mac": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
                "options": {"type": {"key": "string", "value": "string",
                                     "min": 0, "max": "unlimited"}}
            }}}}),
            "test",
        )
        .unwrap();
        let metas = MonitorSpec::default()
            .table(TableSpec::new("T", &[]))
            .metas(&schema)
            .unwrap();
        let text = json!({"T": {U1: {"initial": columns}}}).to_string();
        let updates = decode::table_updates(&text, &metas, UpdateFormat::V2, None).unwrap();
        let mut replica = Replica::new(metas);
        replica.resync(updates, &mut Vec::new());
        replica.row("T", Uuid::parse(U1).unwrap()).unwrap().clone()
    }

    fn set(items: &[&str]) -> Datum {
        Datum::set(items.iter().map(Atom::string).collect())
    }

    #[test]
    fn equality_compares_whole_values_sets_and_maps_unordered() {
        let r = row(json!({
            "name": "vm1",
            "chassis": ["uuid", U1],
            "mac": ["set", ["b", "a"]],
            "options": ["map", [["peer", "x"], ["k", "v"]]]
        }));
        assert!(Clause::eq("name", "vm1").matches(&r));
        assert!(!Clause::eq("name", "vm2").matches(&r));
        assert!(Clause::new("name", Function::Ne, "vm2").matches(&r));
        assert!(Clause::eq("chassis", Uuid::parse(U1).unwrap()).matches(&r));
        assert!(!Clause::eq("chassis", Uuid::parse(U2).unwrap()).matches(&r));
        // Set order does not matter; a subset is not equal.
        assert!(Clause::eq("mac", set(&["a", "b"])).matches(&r));
        assert!(!Clause::eq("mac", set(&["a"])).matches(&r));
        assert!(Clause::eq("options", Datum::map([("k", "v"), ("peer", "x")])).matches(&r));
        assert!(!Clause::eq("options", Datum::map([("k", "v")])).matches(&r));
        // A column the row does not carry never matches.
        assert!(!Clause::eq("no_such_column", "vm1").matches(&r));
    }

    #[test]
    fn empty_values_as_sb_conditions_use_them() {
        // `mac == []`, `nat_addresses != []`, `chassis == []` on empty columns.
        let empty = row(json!({"name": "lb-vip"}));
        assert!(Clause::eq("mac", Datum::empty()).matches(&empty));
        assert!(!Clause::new("mac", Function::Ne, Datum::empty()).matches(&empty));
        assert!(Clause::eq("chassis", Datum::empty()).matches(&empty));
        // An empty map equals the empty set the condition is written with.
        assert!(Clause::eq("options", Datum::empty()).matches(&empty));
        let full = row(json!({"mac": "fa:16:3e:00:00:01 10.0.0.5"}));
        assert!(!Clause::eq("mac", Datum::empty()).matches(&full));
        assert!(Clause::new("mac", Function::Ne, Datum::empty()).matches(&full));
    }

    #[test]
    fn includes_and_excludes_test_elements_and_pairs() {
        let r = row(json!({
            "mac": ["set", ["a", "b", "c"]],
            "options": ["map", [["peer", "x"], ["k", "v"]]]
        }));
        let f =
            |column: &str, function, value: Datum| Clause::new(column, function, value).matches(&r);
        assert!(f("mac", Function::Includes, set(&["a", "c"])));
        assert!(!f("mac", Function::Includes, set(&["a", "z"])));
        assert!(f("mac", Function::Includes, Datum::empty()));
        assert!(f("mac", Function::Excludes, set(&["y", "z"])));
        assert!(!f("mac", Function::Excludes, set(&["z", "b"])));
        assert!(f("mac", Function::Excludes, Datum::empty()));
        // Maps: a pair is in the map only with the same key and value.
        assert!(f(
            "options",
            Function::Includes,
            Datum::map([("peer", "x")])
        ));
        assert!(!f(
            "options",
            Function::Includes,
            Datum::map([("peer", "y")])
        ));
        assert!(f(
            "options",
            Function::Excludes,
            Datum::map([("peer", "y")])
        ));
        assert!(!f(
            "options",
            Function::Excludes,
            Datum::map([("k", "v"), ("q", "r")])
        ));
    }

    #[test]
    fn inequalities_compare_one_number_and_never_an_empty_optional() {
        let r = row(json!({"tag": 100, "weight": 1.5}));
        let f =
            |column: &str, function, value: Datum| Clause::new(column, function, value).matches(&r);
        assert!(f("tag", Function::Lt, 101.into()));
        assert!(!f("tag", Function::Lt, 100.into()));
        assert!(f("tag", Function::Le, 100.into()));
        assert!(f("tag", Function::Gt, 99.into()));
        assert!(!f("tag", Function::Gt, 100.into()));
        assert!(f("tag", Function::Ge, 100.into()));
        assert!(f("weight", Function::Gt, Datum::Atom(Atom::Real(1.25))));
        assert!(!f("weight", Function::Ge, Datum::Atom(Atom::Real(2.0))));
        // Strings are not ordered by these functions.
        assert!(!f("name", Function::Lt, "zzz".into()));
        let untagged = row(json!({}));
        for function in [Function::Lt, Function::Le, Function::Gt, Function::Ge] {
            assert!(!Clause::new("tag", function, 100_i64).matches(&untagged));
        }
    }

    #[test]
    fn conditions_or_their_clauses_and_literals_are_constant() {
        let r = row(json!({"name": "vm1", "type": "localnet"}));
        assert!(MonitorCondition::All.matches(&r));
        assert!(!MonitorCondition::Nothing.matches(&r));
        assert!(!MonitorCondition::any([]).matches(&r));
        assert!(Clause::Literal(true).matches(&r));
        assert!(!Clause::Literal(false).matches(&r));
        let c = MonitorCondition::any([Clause::eq("name", "vm2"), Clause::eq("type", "localnet")]);
        assert!(c.matches(&r));
        let c = MonitorCondition::any([Clause::eq("name", "vm2"), Clause::Literal(false)]);
        assert!(!c.matches(&r));
    }
}
