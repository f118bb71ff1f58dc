//! Property tests of the hand-written OVSDB decoder (src/caps/ovsdb/decode.rs) and of the
//! owned-frame path the client reads with (`FrameSplitter::take_frame` + `jsonrpc::decode`).
//!
//! The decoder is differential-tested against two independent references: the serde
//! `Deserialize` of `Datum` (a separate implementation of RFC 7047 §5.1) and the values the
//! test itself generated, serialized by serde_json.

use std::cell::RefCell;
use std::sync::Arc;

use ovn_bgp_agent::caps::ovsdb::decode;
use ovn_bgp_agent::caps::ovsdb::framing::FrameSplitter;
use ovn_bgp_agent::caps::ovsdb::jsonrpc::{Incoming, decode as decode_message};
use ovn_bgp_agent::caps::ovsdb::monitor::{RowChange, TableUpdate, UpdateFormat};
use ovn_bgp_agent::caps::ovsdb::replica::TableMeta;
use ovn_bgp_agent::caps::ovsdb::schema::DatabaseSchema;
use ovn_bgp_agent::caps::ovsdb::types::{Atom, Datum, Interner, Uuid};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Strings that stress the string scanner: quotes, backslashes, control characters, non-ASCII
/// (including astral characters, which JSON escapes as surrogate pairs), and lengths around
/// the 8-byte and 32-byte steps of the quote search.
fn tricky_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("\u{0}\u{1f}\n\t".to_owned()),
            Just("é€😀".to_owned()),
            Just("neutron:device_owner".to_owned()),
            "[a-zA-Z0-9 :,{}\\[\\]/]{0,40}",
        ],
        0..6,
    )
    .prop_map(|parts| parts.concat())
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<[u8; 16]>().prop_map(Uuid)
}

fn real() -> impl Strategy<Value = f64> {
    prop::num::f64::POSITIVE
        | prop::num::f64::NEGATIVE
        | prop::num::f64::NORMAL
        | prop::num::f64::SUBNORMAL
        | prop::num::f64::ZERO
}

fn atom() -> impl Strategy<Value = Atom> {
    prop_oneof![
        any::<i64>().prop_map(Atom::Integer),
        real().prop_map(Atom::Real),
        any::<bool>().prop_map(Atom::Boolean),
        tricky_string().prop_map(Atom::string),
        uuid().prop_map(Atom::Uuid),
    ]
}

fn datum() -> impl Strategy<Value = Datum> {
    prop_oneof![
        atom().prop_map(Datum::Atom),
        prop::collection::vec(atom(), 0..5).prop_map(Datum::set),
        prop::collection::vec((atom(), atom()), 0..5)
            .prop_map(|pairs| Datum::Map(pairs.into_boxed_slice())),
    ]
}

/// A table with one column of each shape the decoder coerces differently.
const SCHEMA: &str = r#"{"name":"T","version":"1.0.0","tables":{"Row":{"columns":{
    "name":{"type":"string"},
    "n":{"type":"integer"},
    "r":{"type":"real"},
    "flag":{"type":"boolean"},
    "refs":{"type":{"key":"uuid","min":0,"max":"unlimited"}},
    "ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},
    "weights":{"type":{"key":"string","value":"real","min":0,"max":"unlimited"}},
    "opt":{"type":{"key":"integer","min":0,"max":1}}}}}}"#;

fn meta() -> Arc<TableMeta> {
    let schema = DatabaseSchema::from_json(&serde_json::from_str(SCHEMA).unwrap(), "test").unwrap();
    let ts = &schema.tables["Row"];
    let cols = ["name", "n", "r", "flag", "refs", "ids", "weights", "opt"];
    Arc::new(TableMeta::new(
        "Row",
        cols.iter()
            .map(|c| ((*c).to_owned(), ts.columns[*c].clone()))
            .collect(),
    ))
}

/// Values for the columns of `meta()`, in its order; a real that happens to be integral is
/// sent as an integer literal when `int_reals` (the server does that, RFC 7047 §5.1).
#[derive(Debug, Clone)]
struct RowValues {
    name: String,
    n: i64,
    r: i32,
    flag: bool,
    refs: Vec<Uuid>,
    ids: Vec<(String, String)>,
    weights: Vec<(String, i32)>,
    opt: Option<i64>,
    /// Which columns are sent (absent ones take their default).
    present: [bool; 8],
}

fn row_values() -> impl Strategy<Value = RowValues> {
    (
        tricky_string(),
        any::<i64>(),
        any::<i32>(),
        any::<bool>(),
        prop::collection::vec(uuid(), 0..4),
        prop::collection::vec((tricky_string(), tricky_string()), 0..4),
        prop::collection::vec(("[a-z]{1,8}", any::<i32>()), 0..3),
        any::<Option<i64>>(),
        any::<[bool; 8]>(),
    )
        .prop_map(
            |(name, n, r, flag, refs, ids, weights, opt, present)| RowValues {
                name,
                n,
                r,
                flag,
                refs,
                ids,
                weights,
                opt,
                present,
            },
        )
}

impl RowValues {
    /// The wire form of each column and the datum the decoder must produce for it.
    fn columns(&self) -> Vec<(&'static str, Value, Datum)> {
        let refs = Datum::set(self.refs.iter().map(|u| Atom::Uuid(*u)).collect());
        let ids = Datum::map(self.ids.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let weights_wire = json!([
            "map",
            self.weights
                .iter()
                .map(|(k, w)| json!([k, w]))
                .collect::<Vec<_>>()
        ]);
        let weights = Datum::Map(
            self.weights
                .iter()
                .map(|(k, w)| (Atom::string(k), Atom::Real(f64::from(*w))))
                .collect(),
        );
        let opt = match self.opt {
            Some(v) => Datum::from(v),
            None => Datum::empty(),
        };
        vec![
            ("name", json!(self.name), Datum::from(self.name.as_str())),
            ("n", json!(self.n), Datum::from(self.n)),
            (
                "r",
                json!(self.r),
                Datum::Atom(Atom::Real(f64::from(self.r))),
            ),
            ("flag", json!(self.flag), Datum::from(self.flag)),
            ("refs", serde_json::to_value(&refs).unwrap(), refs),
            ("ids", serde_json::to_value(&ids).unwrap(), ids),
            ("weights", weights_wire, weights),
            ("opt", serde_json::to_value(&opt).unwrap(), opt),
        ]
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(RowValues),
    Modify(RowValues),
    Delete,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        row_values().prop_map(Op::Insert),
        row_values().prop_map(Op::Modify),
        Just(Op::Delete),
    ]
}

/// Builds an update2 table-updates object (plus a table and a column the client did not ask
/// for, which must be skipped) and the updates the decoder must return.
fn updates2(meta: &TableMeta, rows: &[(Uuid, Op)]) -> (String, Vec<TableUpdate>) {
    let mut wire = serde_json::Map::new();
    let mut expected = Vec::new();
    for (uuid, op) in rows {
        let (member, change) = match op {
            Op::Insert(values) => {
                let mut obj = serde_json::Map::new();
                let mut full: Vec<Datum> = meta.defaults().to_vec();
                for (i, (col, w, d)) in values.columns().into_iter().enumerate() {
                    if values.present[i] {
                        obj.insert(col.to_owned(), w);
                        full[i] = d;
                    }
                }
                obj.insert("not_monitored".into(), json!(["map", [["x", ["set", []]]]]));
                (json!({"insert": obj}), RowChange::Insert(full.into()))
            }
            Op::Modify(values) => {
                let mut obj = serde_json::Map::new();
                let mut diff = Vec::new();
                for (i, (col, w, d)) in values.columns().into_iter().enumerate() {
                    if values.present[i] {
                        obj.insert(col.to_owned(), w);
                        diff.push((col, i as u16, d));
                    }
                }
                // The decoder keeps wire order, and serde_json writes object keys sorted.
                diff.sort_by_key(|(col, _, _)| *col);
                let diff = diff.into_iter().map(|(_, i, d)| (i, d)).collect();
                (json!({"modify": obj}), RowChange::Diff(diff))
            }
            Op::Delete => (json!({"delete": null}), RowChange::Delete),
        };
        // Keyed by uuid: a duplicate generated uuid keeps its last value, as in the object.
        wire.insert(uuid.to_string(), member);
        expected.retain(|(u, _): &(Uuid, RowChange)| u != uuid);
        expected.push((*uuid, change));
    }
    // serde_json's map is ordered by key; the decoder keeps wire order, so sort the same way.
    expected.sort_by_key(|(u, _)| u.to_string());
    let text = serde_json::to_string(&json!({
        "Unmonitored": {"00000000-0000-0000-0000-000000000001": {"insert": {"a": [1, {"b": "]"}]}}},
        "Row": wire,
    }))
    .unwrap();
    (
        text,
        vec![TableUpdate {
            table: 0,
            rows: expected,
        }],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any datum, compact or pretty-printed, decodes to itself, and agrees with serde.
    #[test]
    fn datum_round_trips(d in datum(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&d).unwrap()
        } else {
            serde_json::to_string(&d).unwrap()
        };
        let ours = decode::datum(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        // serde_json reads reals correctly rounded only with its `float_roundtrip` feature,
        // which Cargo.toml enables; this catches losing it.
        let theirs: Datum = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&ours, &d, "ours: {}", text);
        prop_assert_eq!(&theirs, &d, "serde: {}", text);
    }

    /// Cutting a valid datum anywhere gives an error, never a panic or a wrong value.
    #[test]
    fn truncated_datums_are_errors(d in datum(), cut in any::<prop::sample::Index>()) {
        let text = serde_json::to_string(&d).unwrap();
        let at = cut.index(text.len());
        if let Some(prefix) = text.get(..at) {
            match decode::datum(prefix) {
                Err(e) => prop_assert!(e.offset <= prefix.len()),
                // A number cut short is still a number ("12" of "123"); nothing else is.
                Ok(v) => prop_assert!(matches!(v, Datum::Atom(Atom::Integer(_) | Atom::Real(_))), "{prefix} gave {v:?}"),
            }
        }
    }

    /// update2 table-updates: inserts fill absent columns with defaults, modifies list only
    /// the columns sent, reals sent as integers are reals, unknown tables and columns are
    /// skipped, with and without the interner.
    #[test]
    fn table_updates2(rows in prop::collection::vec((uuid(), op()), 0..8), intern in any::<bool>()) {
        let meta = meta();
        let (text, expected) = updates2(&meta, &rows);
        let interner = RefCell::new(Interner::default());
        let got = decode::table_updates(&text, &[meta], UpdateFormat::V2, intern.then_some(&interner))
            .map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        let got: Vec<TableUpdate> = got.into_iter().filter(|t| !t.rows.is_empty()).collect();
        let expected: Vec<TableUpdate> = expected.into_iter().filter(|t| !t.rows.is_empty()).collect();
        prop_assert_eq!(got, expected);
    }

    /// A message of any size, split across reads anywhere, is handed over whole by
    /// `take_frame`, with the spans of its container members, and decodes to the same
    /// envelope serde sees.
    #[test]
    fn owned_frames_and_envelopes(
        sizes in prop::collection::vec(0usize..3000, 1..4),
        big in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        kinds in prop::collection::vec(0u8..3, 1..4),
    ) {
        let mut stream = String::new();
        let mut messages = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            // A "big" message crosses the 64 KiB point where the buffer itself is handed over.
            let n = if big && i == 0 { n + 70_000 } else { *n };
            let payload: Vec<Value> = (0..n / 30).map(|k| json!({"k\"}": k, "v": "x]\\"})).collect();
            let m = match kinds[i % kinds.len()] {
                0 => json!({"id": i, "result": {"Row": payload}, "error": null}),
                1 => json!({"method": "update2", "params": [["mon", i], {"Row": payload}], "id": null}),
                _ => json!({"id": [i, "s"], "method": "echo", "params": payload}),
            };
            stream.push_str(&serde_json::to_string(&m).unwrap());
            stream.push_str(if i % 2 == 0 { "\n" } else { " \t" });
            messages.push(m);
        }
        let bytes = stream.as_bytes();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.push(bytes.len());
        points.sort_unstable();
        let mut split = FrameSplitter::new(1 << 24);
        let mut frames = Vec::new();
        let mut from = 0;
        for to in points {
            split.read_buffer(to - from).extend_from_slice(&bytes[from..to]);
            from = to;
            while let Some(frame) = split.take_frame().unwrap() {
                frames.push(frame);
            }
        }
        prop_assert_eq!(frames.len(), messages.len());
        for (frame, message) in frames.into_iter().zip(&messages) {
            let text = std::str::from_utf8(&frame.bytes).unwrap();
            prop_assert_eq!(&serde_json::from_str::<Value>(text).unwrap(), message);
            let containers: Vec<Value> = message
                .as_object()
                .unwrap()
                .values()
                .filter(|v| v.is_array() || v.is_object())
                .cloned()
                .collect();
            let spans: Vec<Value> = frame
                .members
                .iter()
                .map(|&(a, b)| serde_json::from_str(&text[a..b]).unwrap())
                .collect();
            prop_assert_eq!(spans, containers);
            let raw = |v: Option<&Value>| v.map(|v| serde_json::to_value(v).unwrap());
            match decode_message(frame, "test").unwrap() {
                Incoming::Response { id, result, error } => {
                    prop_assert_eq!(Some(&id), message.get("id"));
                    prop_assert_eq!(result.map(|r| serde_json::from_str::<Value>(r.get()).unwrap()), raw(message.get("result")));
                    prop_assert_eq!(error, None);
                }
                Incoming::Notification { method, params, .. } => {
                    prop_assert_eq!(Some(method.as_str()), message["method"].as_str());
                    prop_assert_eq!(&serde_json::from_str::<Value>(params.get()).unwrap(), &message["params"]);
                }
                Incoming::Request { id, method, params } => {
                    prop_assert_eq!(&id, &message["id"]);
                    prop_assert_eq!(Some(method.as_str()), message["method"].as_str());
                    prop_assert_eq!(&serde_json::from_str::<Value>(params.get()).unwrap(), &message["params"]);
                }
            }
        }
    }
}

/// Malformed table-updates are errors naming the byte where decoding stopped.
#[test]
fn malformed_table_updates_name_the_offset() {
    let meta = meta();
    let good_uuid = "01234567-89ab-cdef-0123-456789abcdef";
    for (bad, reason) in [
        (r#"{"Row":{"nope":{"insert":{}}}}"#.to_owned(), "UUID"),
        (
            format!(r#"{{"Row":{{"{good_uuid}":{{"upsert":{{}}}}}}}}"#),
            "upsert",
        ),
        (
            format!(r#"{{"Row":{{"{good_uuid}":{{"insert":{{"n":"seven"}}}}}}}}"#),
            "",
        ),
        (
            format!(r#"{{"Row":{{"{good_uuid}":{{"insert":{{"refs":["set",["x"]]}}}}}}}}"#),
            "",
        ),
        (
            format!(r#"{{"Row":{{"{good_uuid}":{{"insert":{{"n":1}}}}"#),
            "",
        ),
        (
            format!(r#"{{"Row":{{"{good_uuid}":{{"insert":{{"n":1}}}}}}}} trailing"#),
            "",
        ),
    ] {
        let err = decode::table_updates(&bad, std::slice::from_ref(&meta), UpdateFormat::V2, None)
            .expect_err(&bad);
        assert!(err.offset <= bad.len(), "{bad}: {err}");
        assert!(err.to_string().contains("at byte"), "{err}");
        assert!(err.reason.contains(reason), "{bad}: {err}");
    }
}
