//! Property tests of the JSON-RPC message splitter: arbitrary JSON, arbitrary read boundaries.

use ovn_bgp_agent::caps::ovsdb::framing::{FrameSplitter, FramingError};
use proptest::prelude::*;
use serde_json::Value;

fn tricky_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("\\\"".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just("é€😀".to_owned()),
            Just("\n\t\u{1}".to_owned()),
            "[a-z0-9 :,]{0,6}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        tricky_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((tricky_string(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Messages split at arbitrary points, several per read, come out whole and in order.
    #[test]
    fn arbitrary_messages_and_cuts(
        values in prop::collection::vec(json_value(), 1..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        pretty in any::<bool>(),
    ) {
        let messages: Vec<Value> = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| serde_json::json!({"id": i, "method": "x\"}{", "params": [v]}))
            .collect();
        let mut stream = Vec::new();
        let mut texts = Vec::new();
        for m in &messages {
            let text = if pretty { serde_json::to_vec_pretty(m) } else { serde_json::to_vec(m) };
            let text = text.unwrap();
            stream.extend(&text);
            stream.extend_from_slice(b" \n");
            texts.push(text);
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        points.push(0);
        points.push(stream.len());
        points.sort();
        points.dedup();
        let mut splitter = FrameSplitter::new(1 << 20);
        let mut got = Vec::new();
        for w in points.windows(2) {
            splitter.extend(&stream[w[0]..w[1]]);
            while let Some(frame) = splitter.next_frame().unwrap() {
                got.push(frame.to_vec());
            }
        }
        // Frames are exactly the serialized messages (compared as bytes: float text
        // round-trips are not the splitter's business).
        prop_assert_eq!(got, texts);
        prop_assert_eq!(splitter.pending_bytes(), 0);
    }

    /// A message over the limit is refused once the limit is crossed, whatever the chunking,
    /// and the splitter never holds much more than the limit.
    #[test]
    fn oversized_message_is_refused_early(limit in 16usize..4096, chunk in 1usize..512) {
        let mut splitter = FrameSplitter::new(limit);
        let mut fed = 0usize;
        splitter.extend(b"{\"id\":1,\"result\":\"");
        let filler = vec![b'a'; chunk];
        let err = loop {
            match splitter.next_frame() {
                Err(e) => break e,
                Ok(Some(_)) => panic!("no message can be complete"),
                Ok(None) => {}
            }
            prop_assert!(splitter.pending_bytes() <= limit + chunk + 32);
            splitter.extend(&filler);
            fed += chunk;
            prop_assert!(fed <= limit + 2 * chunk + 32, "limit not enforced");
        };
        prop_assert_eq!(err, FramingError::TooLarge { limit });
    }
}

#[test]
fn garbage_between_messages_is_an_error() {
    let mut s = FrameSplitter::new(1024);
    s.extend(b"{\"a\":1} HTTP/1.1");
    assert!(s.next_frame().unwrap().is_some());
    assert_eq!(s.next_frame(), Err(FramingError::Garbage { byte: b'H' }));
    let mut s = FrameSplitter::new(1024);
    s.extend(b"{\"a\":]]");
    assert!(matches!(s.next_frame(), Ok(Some(_)) | Err(_)));
}
