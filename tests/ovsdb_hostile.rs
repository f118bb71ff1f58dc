//! Hostile and broken servers (a tokio listener in the test): garbage, truncated JSON, an
//! endless message, silence. The client must report an error and reconnect, never crash or
//! buffer without bound; it must answer the server's echo and probe a silent server.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ovn_bgp_agent::caps::ovsdb::framing::FrameSplitter;
use ovn_bgp_agent::caps::ovsdb::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Good,
    Garbage,
    Truncated,
    Endless,
    Silent,
    /// Knows only the original RFC 7047 `monitor` (no `monitor_cond*`).
    Old,
}

async fn read_msg(sock: &mut TcpStream, split: &mut FrameSplitter) -> Option<Value> {
    loop {
        if let Ok(Some(f)) = split.next_frame() {
            return serde_json::from_slice(f).ok();
        }
        let mut buf = [0u8; 4096];
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        split.extend(&buf[..n]);
    }
}

async fn send(sock: &mut TcpStream, v: Value) -> bool {
    sock.write_all(v.to_string().as_bytes()).await.is_ok()
}

/// Answers request `id` with `result`.
async fn answer(sock: &mut TcpStream, id: Value, result: Value) -> bool {
    send(sock, json!({"id": id, "result": result, "error": null})).await
}

/// Answers enough of the protocol for one table `T(name)`; after the monitor, sends an echo
/// request and reports what the client sends (`seen`).
async fn old_or_good(
    mut sock: TcpStream,
    seen: mpsc::UnboundedSender<Value>,
    answer_echo: bool,
    old: bool,
) {
    let mut split = FrameSplitter::new(1 << 20);
    while let Some(msg) = read_msg(&mut sock, &mut split).await {
        let _ = seen.send(msg.clone());
        let id = msg["id"].clone();
        if msg["params"][0] == "_Server" {
            // Like a server without the _Server database.
            let e = json!({"id": id, "result": null, "error": "unknown database"});
            if !send(&mut sock, e).await {
                return;
            }
            continue;
        }
        if old
            && matches!(
                msg["method"].as_str(),
                Some("monitor_cond_since" | "monitor_cond")
            )
        {
            if !send(
                &mut sock,
                json!({"id": id, "result": null, "error": "unknown method"}),
            )
            .await
            {
                return;
            }
            continue;
        }
        if msg["method"] == "monitor" {
            let uuid = "7b1e0d1c-1111-4222-8333-944455556666";
            let r = json!({"T": {uuid: {"new": {"name": "x"}}}});
            let ok = send(&mut sock, json!({"id": id, "result": r, "error": null})).await;
            let upd = json!({"T": {uuid: {"old": {"name": "x"}, "new": {"name": "y"}}}});
            let ok = ok
                && send(
                    &mut sock,
                    json!({"id": null, "method": "update", "params": [msg["params"][1], upd]}),
                )
                .await;
            if !ok {
                return;
            }
            continue;
        }
        if msg["method"] == "transact" && msg["params"][1]["op"] == "wait" {
            // Never answer: the client is expected to cancel.
            continue;
        }
        let result = match msg["method"].as_str() {
            Some("get_schema") => json!({"name": "Fake", "version": "1.0.0",
                "tables": {"T": {"columns": {"name": {"type": "string"}}}}}),
            Some("monitor_cond_since") => {
                let r = json!([false, "00000000-0000-0000-0000-000000000000",
                    {"T": {"7b1e0d1c-1111-4222-8333-944455556666": {"initial": {"name": "x\"}{"}}}}]);
                let ok = send(&mut sock, json!({"id": id, "result": r, "error": null})).await;
                // Now the server asks the client for an echo.
                let ok = ok
                    && send(
                        &mut sock,
                        json!({"id": "srv-echo", "method": "echo", "params": ["hi"]}),
                    )
                    .await;
                if !ok {
                    return;
                }
                continue;
            }
            Some("echo") if !answer_echo => continue,
            Some("echo") => msg["params"].clone(),
            Some(_) => json!({}),
            None => continue,
        };
        if !answer(&mut sock, id, result).await {
            return;
        }
    }
}

struct Fake {
    remote: String,
    accepts: Arc<AtomicUsize>,
    seen: mpsc::UnboundedReceiver<Value>,
    endless_sent: Arc<AtomicUsize>,
}

/// A listener whose n-th connection (0-based) behaves as `modes[n]` (the last mode repeats).
async fn fake(modes: Vec<Mode>) -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let remote = format!("tcp:{}", l.local_addr().unwrap());
    let accepts = Arc::new(AtomicUsize::new(0));
    let endless_sent = Arc::new(AtomicUsize::new(0));
    let (tx, seen) = mpsc::unbounded_channel();
    let (a, e) = (accepts.clone(), endless_sent.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = l.accept().await else {
                return;
            };
            let n = a.fetch_add(1, Ordering::SeqCst);
            let mode = modes[n.min(modes.len() - 1)];
            let tx = tx.clone();
            let e = e.clone();
            tokio::spawn(async move {
                match mode {
                    Mode::Good => old_or_good(sock, tx, true, false).await,
                    Mode::Silent => old_or_good(sock, tx, false, false).await,
                    Mode::Old => old_or_good(sock, tx, true, true).await,
                    Mode::Garbage => {
                        let _ = sock
                            .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n<html>")
                            .await;
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    }
                    Mode::Truncated => {
                        // Read the client's first request, answer half of it, hang up.
                        let mut buf = [0u8; 4096];
                        let _ = sock.read(&mut buf).await;
                        let _ = sock.write_all(br#"{"id":1,"result":{"name":"Fa"#).await;
                        let _ = sock.shutdown().await;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Mode::Endless => {
                        // Up to 1 GiB of one string, produced lazily; stops when the client hangs up.
                        let _ = sock.write_all(br#"{"id":1,"result":""#).await;
                        let chunk = vec![b'a'; 64 * 1024];
                        for _ in 0..(1usize << 30) / chunk.len() {
                            if sock.write_all(&chunk).await.is_err() {
                                return;
                            }
                            e.fetch_add(chunk.len(), Ordering::SeqCst);
                        }
                    }
                }
            });
        }
    });
    Fake {
        remote,
        accepts,
        seen,
        endless_sent,
    }
}

fn config(remote: &str) -> ClientConfig {
    let mut c = ClientConfig::new(remote, "Fake").unwrap();
    c.backoff_initial = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(100);
    c.max_message_size = 1 << 20;
    c
}

fn spec() -> MonitorSpec {
    MonitorSpec::default().table(TableSpec::new("T", &["name"]))
}

async fn connect_through(modes: Vec<Mode>) -> (OvsdbClient, Fake) {
    let f = fake(modes).await;
    let c = tokio::time::timeout(
        Duration::from_secs(20),
        OvsdbClient::connect(config(&f.remote), spec()),
    )
    .await
    .expect("client never reached the good server")
    .expect("connect");
    (c, f)
}

#[tokio::test]
async fn garbage_then_good_server() {
    let (c, f) = connect_through(vec![Mode::Garbage, Mode::Good]).await;
    let s = c.stats();
    assert!(f.accepts.load(Ordering::SeqCst) >= 2);
    assert!(s.failures >= 1, "{s:?}");
    assert!(
        s.last_error.as_deref().unwrap_or("").contains("framing"),
        "{s:?}"
    );
    let r = c.replica();
    let row = r.get_table("T").unwrap().iter().next().unwrap().clone();
    assert_eq!(row.str("name"), "x\"}{");
}

#[tokio::test]
async fn truncated_json_then_good_server() {
    let (c, f) = connect_through(vec![Mode::Truncated, Mode::Truncated, Mode::Good]).await;
    assert!(f.accepts.load(Ordering::SeqCst) >= 3);
    let s = c.stats();
    assert!(s.failures >= 2, "{s:?}");
    assert!(
        s.last_error
            .as_deref()
            .unwrap_or("")
            .contains("truncated JSON"),
        "{s:?}"
    );
}

#[tokio::test]
async fn endless_message_is_cut_at_the_limit() {
    let (c, f) = connect_through(vec![Mode::Endless, Mode::Good]).await;
    let s = c.stats();
    assert!(
        s.last_error
            .as_deref()
            .unwrap_or("")
            .contains("exceeds the limit of 1048576 bytes"),
        "{s:?}"
    );
    // The client hung up long before 1 GiB: only the limit plus socket buffers were sent.
    let sent = f.endless_sent.load(Ordering::SeqCst);
    assert!(
        sent < 64 << 20,
        "client kept reading {sent} bytes of an oversized message"
    );
}

#[tokio::test]
async fn answers_server_echo_and_probes_a_silent_server() {
    let f = fake(vec![Mode::Silent, Mode::Good]).await;
    let mut cfg = config(&f.remote);
    cfg.probe_interval = Some(Duration::from_millis(300));
    let c = OvsdbClient::connect(cfg, spec()).await.unwrap();
    let mut seen = f.seen;
    let mut echo_reply = false;
    let mut probe = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !(echo_reply && probe) {
        let m = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .expect("client neither answered the echo nor probed")
            .unwrap();
        if m["id"] == "srv-echo" && m["result"] == json!(["hi"]) {
            echo_reply = true;
        }
        if m["method"] == "echo" {
            probe = true;
        }
    }
    // The silent server never answers the probe: the client drops it and reconnects.
    let start = std::time::Instant::now();
    while f.accepts.load(Ordering::SeqCst) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no reconnect after unanswered probe"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start = std::time::Instant::now();
    while c.stats().sessions < 2 {
        assert!(start.elapsed() < Duration::from_secs(5), "{:?}", c.stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        c.stats()
            .last_error
            .unwrap_or_default()
            .contains("inactivity probe")
    );
}

#[tokio::test]
async fn falls_back_to_plain_monitor_and_applies_v1_updates() {
    let (c, _f) = connect_through(vec![Mode::Old]).await;
    assert_eq!(c.stats().monitor_method, Some("monitor"));
    let mut ev = c.events().unwrap();
    let first = ev.recv().await.unwrap();
    assert_eq!(first.kind, BatchKind::Initial);
    assert_eq!(first.changes[0].new_row().unwrap().str("name"), "x");
    let upd = tokio::time::timeout(Duration::from_secs(5), ev.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(upd.kind, BatchKind::Update);
    let ch = &upd.changes[0];
    assert_eq!(ch.changed_columns(), vec!["name"]);
    assert_eq!(ch.old_row().unwrap().str("name"), "x");
    assert_eq!(ch.new_row().unwrap().str("name"), "y");
    // Conditions cannot be changed on a plain monitor: a clear error, the session stays.
    let err = c
        .set_condition("T", condition_eq("name", "y"))
        .await
        .expect_err("plain monitor");
    assert!(err.to_string().contains("plain monitor"), "{err}");
    assert!(c.is_connected());
}

#[tokio::test]
async fn abandoned_transaction_is_cancelled() {
    let f = fake(vec![Mode::Good]).await;
    let mut cfg = config(&f.remote);
    cfg.probe_interval = Some(Duration::from_millis(200));
    let c = OvsdbClient::connect(cfg, spec()).await.unwrap();
    let mut seen = f.seen;
    let op = Op::wait("T", &["name"], vec![])
        .where_eq("name", "never")
        .timeout_ms(60_000);
    // Give up after 100 ms: dropping the future must send `cancel` with the request id.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), c.transact(vec![op]))
            .await
            .is_err()
    );
    let mut txn_id = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let m = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .expect("no cancel sent")
            .unwrap();
        if m["method"] == "transact" {
            txn_id = Some(m["id"].clone());
        }
        if m["method"] == "cancel" {
            assert_eq!(
                Some(m["params"][0].clone()),
                txn_id,
                "cancel names the transaction"
            );
            break;
        }
    }
}

// ---- Resource limits: what a hostile server can make the client hold ----

const ROW_A: &str = "7b1e0d1c-1111-4222-8333-944455556666";
const ROW_B: &str = "7b1e0d1c-2222-4222-8333-944455556666";

/// What a scripted server does once the client is monitoring.
#[derive(Clone)]
enum After {
    /// Keep answering (echo, transactions) as the good server does.
    Serve,
    /// Send `count` update2 notifications renaming row A, each with a name of `size` bytes,
    /// as fast as the socket takes them; then keep answering.
    Flood { count: usize, size: usize },
    /// Stop reading the socket (a server that no longer takes requests); the connection stays.
    Deaf,
    /// Answer the client's first request with arrays nested 100 000 deep, then hang.
    Deep,
}

/// A server for table `T(name, tags)`, `tags` a set of at most 4 strings, whose first download
/// is `initial` (table-updates2), followed by `after`. Later connections get the good server.
async fn scripted(initial: Value, after: After) -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let remote = format!("tcp:{}", l.local_addr().unwrap());
    let accepts = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let (tx, seen) = mpsc::unbounded_channel();
    let (a, e) = (accepts.clone(), sent.clone());
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = l.accept().await else {
                return;
            };
            let n = a.fetch_add(1, Ordering::SeqCst);
            let (initial, after, tx, e) = (initial.clone(), after.clone(), tx.clone(), e.clone());
            tokio::spawn(async move {
                let initial = if n == 0 {
                    initial
                } else {
                    json!({"T": {ROW_B: {"initial": {"name": "good"}}}})
                };
                let after = if n == 0 { after } else { After::Serve };
                scripted_session(sock, initial, after, tx, e).await;
            });
        }
    });
    Fake {
        remote,
        accepts,
        seen,
        endless_sent: sent,
    }
}

async fn scripted_session(
    mut sock: TcpStream,
    initial: Value,
    after: After,
    seen: mpsc::UnboundedSender<Value>,
    sent: Arc<AtomicUsize>,
) {
    let mut split = FrameSplitter::new(1 << 30);
    if let After::Deep = after {
        let _ = read_msg(&mut sock, &mut split).await;
        let mut msg = br#"{"id":1,"result":"#.to_vec();
        msg.extend(std::iter::repeat_n(b'[', 100_000));
        let _ = sock.write_all(&msg).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        return;
    }
    while let Some(msg) = read_msg(&mut sock, &mut split).await {
        let _ = seen.send(msg.clone());
        let id = msg["id"].clone();
        let result = match msg["method"].as_str() {
            Some("monitor_cond") if msg["params"][0] == "_Server" => {
                let e = json!({"id": id, "result": null, "error": "unknown database"});
                if !send(&mut sock, e).await {
                    return;
                }
                continue;
            }
            Some("get_schema") => json!({"name": "Fake", "version": "1.0.0",
            "tables": {"T": {"columns": {
                "name": {"type": "string"},
                "tags": {"type": {"key": "string", "min": 0, "max": 4}},
            }}}}),
            Some("monitor_cond_since") => {
                let r = json!([false, "00000000-0000-0000-0000-000000000000", initial]);
                if !send(&mut sock, json!({"id": id, "result": r, "error": null})).await {
                    return;
                }
                match &after {
                    After::Serve | After::Deep => {}
                    After::Flood { count, size } => {
                        let monitor = msg["params"][1].clone();
                        for i in 0..*count {
                            let name = format!("{i:08}{}", "x".repeat(size - 8));
                            let upd = json!({"T": {ROW_A: {"modify": {"name": name}}}});
                            let m = json!({"id": null, "method": "update2",
                                "params": [monitor, upd]});
                            if !send(&mut sock, m).await {
                                return;
                            }
                            sent.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    After::Deaf => {
                        // Keep the connection open, read nothing more.
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        return;
                    }
                }
                continue;
            }
            Some("echo") => msg["params"].clone(),
            Some(_) => json!([{}]),
            None => continue,
        };
        if !answer(&mut sock, id, result).await {
            return;
        }
    }
}

fn tags_spec() -> MonitorSpec {
    MonitorSpec::default().table(TableSpec::new("T", &["name", "tags"]))
}

/// A set of 100 000 elements in a column whose schema allows 4: that row is rejected as soon as
/// the fifth element is read (no 100 000-element allocation), the other rows of the same
/// message are applied, and the session stays up.
#[tokio::test]
async fn oversized_set_rejects_its_row_and_keeps_the_session() {
    let tags: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
    let initial = json!({"T": {
        ROW_A: {"initial": {"name": "hostile", "tags": ["set", tags]}},
        ROW_B: {"initial": {"name": "fine", "tags": ["set", ["a", "b"]]}},
    }});
    let f = scripted(initial, After::Serve).await;
    let c = tokio::time::timeout(
        Duration::from_secs(10),
        OvsdbClient::connect(config(&f.remote), tags_spec()),
    )
    .await
    .expect("connect hung")
    .expect("connect");
    let s = c.stats();
    assert_eq!(s.rows_rejected, 1, "{s:?}");
    let err = s.last_error.unwrap_or_default();
    assert!(
        err.contains(ROW_A) && err.contains("column tags") && err.contains("more than 4 elements"),
        "{err}"
    );
    {
        let r = c.replica();
        let t = r.get_table("T").unwrap();
        let names: Vec<String> = t.iter().map(|row| row.str("name").to_owned()).collect();
        assert_eq!(names, ["fine"], "only the good row is in the replica");
    }
    // Still the first connection, and it still answers.
    assert!(c.is_connected());
    assert_eq!(f.accepts.load(Ordering::SeqCst), 1);
    let dbs = tokio::time::timeout(Duration::from_secs(5), c.call("echo", json!(["ping"])))
        .await
        .expect("echo hung")
        .expect("echo");
    assert_eq!(dbs, json!(["ping"]));
}

/// A message nesting arrays 100 000 deep is refused after 64 levels, without reading the rest
/// (so neither serde_json nor the decoder ever sees it); the client reconnects.
#[tokio::test]
async fn absurd_nesting_is_refused_and_the_client_reconnects() {
    let f = scripted(json!({"T": {}}), After::Deep).await;
    let c = tokio::time::timeout(
        Duration::from_secs(10),
        OvsdbClient::connect(config(&f.remote), tags_spec()),
    )
    .await
    .expect("never got past the deep server")
    .expect("connect");
    assert_eq!(f.accepts.load(Ordering::SeqCst), 2);
    let err = c.stats().last_error.unwrap_or_default();
    assert!(err.contains("deeper than 64 levels"), "{err}");
    assert!(c.is_connected());
}

/// A server flooding updates to a consumer that does not read its events: the batches waiting
/// for the consumer stay within the budget (the message size limit, 1 MiB here), the rest is
/// merged per row; once the consumer reads, it gets the last version of the row in a handful of
/// batches. The client kept answering meanwhile.
#[tokio::test]
async fn flooded_updates_to_a_slow_consumer_stay_within_the_budget() {
    let (count, size) = (4000, 2048);
    let initial = json!({"T": {ROW_A: {"initial": {"name": "start"}}}});
    let f = scripted(initial, After::Flood { count, size }).await;
    let c = OvsdbClient::connect(config(&f.remote), tags_spec())
        .await
        .unwrap();
    let mut ev = c.events().unwrap();
    // Wait for the whole flood (8 MB) to have been sent and read, without consuming events.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (c.stats().messages_received as usize) < count + 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "flood not received: {:?}",
            c.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The last message is applied once the replica shows it.
    let last = format!("{:08}{}", count - 1, "x".repeat(size - 8));
    while c
        .replica()
        .get_table("T")
        .unwrap()
        .iter()
        .next()
        .unwrap()
        .str("name")
        != last
    {
        assert!(
            std::time::Instant::now() < deadline,
            "last update not applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = c.stats();
    assert!(
        s.events_queued_bytes <= 1 << 20,
        "{} bytes of batches queued for the consumer",
        s.events_queued_bytes
    );
    assert!(s.changes_coalesced > 0, "{s:?}");
    assert!(c.is_connected());
    // Now consume: the row's last version arrives, in far fewer batches than updates.
    let mut batches = 0;
    let mut seen_last = false;
    while !seen_last {
        let b = tokio::time::timeout(Duration::from_secs(5), ev.recv())
            .await
            .expect("the held changes never arrived")
            .unwrap();
        batches += 1;
        seen_last = b
            .changes
            .iter()
            .any(|ch| ch.new_row().is_some_and(|r| r.str("name") == last));
    }
    assert!(batches < count / 4, "{batches} batches for {count} updates");
    assert!(c.stats().events_queued_bytes <= 1 << 20);
}

/// A server that stops reading: a write that cannot complete times out, the caller of the
/// transaction learns the connection was lost, and the client reconnects.
#[tokio::test]
async fn a_server_that_stops_reading_times_the_write_out() {
    let f = scripted(json!({"T": {}}), After::Deaf).await;
    let mut cfg = config(&f.remote);
    cfg.write_timeout = Duration::from_millis(300);
    let c = OvsdbClient::connect(cfg, tags_spec()).await.unwrap();
    // 32 MB: more than the loopback socket buffers take.
    let op = Op::insert("T").set("name", "n".repeat(32 << 20));
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), c.transact(vec![op]))
        .await
        .expect("transact hung on a server that does not read")
        .expect_err("nobody read the transaction");
    assert!(matches!(err, OvsdbError::ConnectionLost { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.stats().sessions < 2 {
        assert!(std::time::Instant::now() < deadline, "{:?}", c.stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = c.stats();
    assert!(
        s.last_error
            .as_deref()
            .unwrap_or("")
            .contains("did not complete within 300ms"),
        "{s:?}"
    );
}

/// The reader stops reading the socket while a budget's worth of decoded messages waits for the
/// session: a server sending 20 MB to a connection nobody reads from gets only about the budget
/// (1 MiB) plus one message and the socket buffers through; nothing is lost once it is read.
#[tokio::test]
async fn the_reader_queue_is_bounded_in_bytes() {
    use ovn_bgp_agent::caps::ovsdb::jsonrpc::{Connection, Incoming, WireStats};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (count, size) = (100usize, 200_000usize);
    let written = Arc::new(AtomicUsize::new(0));
    let w = written.clone();
    tokio::spawn(async move {
        let (mut sock, _) = l.accept().await.unwrap();
        for i in 0..count {
            let m = json!({"id": null, "method": "note", "params": [i, "y".repeat(size)]});
            if !send(&mut sock, m).await {
                return;
            }
            w.fetch_add(1, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let stats = Arc::new(WireStats::default());
    let mut conn = Connection::new(Box::pin(stream), "test".into(), 1 << 20, stats.clone());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let read = stats.bytes_received.load(Ordering::SeqCst) as usize;
    // Budget 1 MiB + the message waiting for room + one read chunk (256 KiB); without the byte
    // budget, the 16 queued messages alone are 3.2 MB.
    assert!(
        read < (1 << 20) + size + (512 << 10),
        "read {read} bytes nobody consumed"
    );
    assert!(
        written.load(Ordering::SeqCst) < count,
        "the server was never held back"
    );
    for i in 0..count {
        match tokio::time::timeout(Duration::from_secs(5), conn.recv())
            .await
            .expect("message lost")
            .unwrap()
        {
            Incoming::Notification { params, .. } => {
                let p: Value = serde_json::from_str(params.get()).unwrap();
                assert_eq!(p[0], json!(i));
            }
            other => panic!("{other:?}"),
        }
    }
}
