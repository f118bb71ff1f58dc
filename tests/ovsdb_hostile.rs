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
        if !send(
            &mut sock,
            json!({"id": id, "result": result, "error": null}),
        )
        .await
        {
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
