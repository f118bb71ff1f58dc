//! OVSDB client benchmark (not a test): a real `ovsdb-server` with OVN_Southbound holding
//! 100k Port_Binding rows. Prints time to the first complete replica, decode throughput,
//! replica memory against the JSON size, peak RSS, and update-to-event latency at 1000
//! updates/s. Run with `cargo run --release --example ovsdb_bench [ROWS]`.
//! `BENCH_SAVE_REPLY=FILE` saves the monitor reply; `ovsdb_bench --replay FILE [RUNS]` then
//! runs only the decode pipeline on it, printing each run (for profiling).

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]
// Unsafe code allowed in this benchmark: a counting global allocator and getrusage, for the benchmark figures.
#![allow(unsafe_code)]

#[path = "../tests/ovsdb_support/mod.rs"]
mod ovsdb_support;

use std::alloc::{GlobalAlloc, Layout};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::ovsdb::client::parse_updates;
use ovn_bgp_agent::caps::ovsdb::framing::FrameSplitter;
use ovn_bgp_agent::caps::ovsdb::jsonrpc::{Incoming, decode};
use ovn_bgp_agent::caps::ovsdb::monitor::UpdateFormat;
use ovn_bgp_agent::caps::ovsdb::replica::TableMeta;
use ovn_bgp_agent::caps::ovsdb::schema::DatabaseSchema;
use ovn_bgp_agent::caps::ovsdb::*;
use ovsdb_support::{OvsdbServer, SB_SCHEMA};

/// Counts live heap bytes so the replica's footprint is measured exactly, on top of the
/// agent's own allocator (src/main.rs).
struct Counting;
#[cfg(feature = "mimalloc")]
static INNER: ovn_bgp_agent::alloc::AgentAllocator = ovn_bgp_agent::alloc::AgentAllocator;
#[cfg(not(feature = "mimalloc"))]
static INNER: std::alloc::System = std::alloc::System;
static LIVE: AtomicUsize = AtomicUsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { INNER.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { INNER.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { INNER.realloc(p, l, n) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

const PB_COLUMNS: &[&str] = &[
    "logical_port",
    "type",
    "mac",
    "chassis",
    "up",
    "datapath",
    "options",
    "tag",
    "nat_addresses",
    "external_ids",
    "virtual_parent",
    "tunnel_key",
];
const DATAPATHS: usize = 8;

/// (user, system, minor page faults) of the calling thread so far.
fn thread_rusage() -> (Duration, Duration, i64) {
    // SAFETY: getrusage only writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (d(u.ru_utime), d(u.ru_stime), u.ru_minflt)
}

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn hex(n: u64, width: usize) -> String {
    format!(
        "{:0width$x}",
        n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        width = width
    )
}

fn fake_uuid(n: u64) -> String {
    let h = format!("{}{}", hex(n, 16), hex(n ^ 0xabcdef, 16));
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn spec() -> MonitorSpec {
    MonitorSpec::default()
        .table(TableSpec::new("Port_Binding", PB_COLUMNS))
        .table(TableSpec::new(
            "Datapath_Binding",
            &["external_ids", "tunnel_key"],
        ))
        .index("Port_Binding", "logical_port")
        .index("Port_Binding", "datapath")
        .index("Port_Binding", "chassis")
        .index("Port_Binding", "type")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn load(server: &OvsdbServer, rows: usize) -> Vec<Uuid> {
    let mut cfg = ClientConfig::new(&server.unix_remote(), "OVN_Southbound").unwrap();
    cfg.probe_interval = None;
    let loader = OvsdbClient::connect(
        cfg,
        MonitorSpec::default().table(TableSpec::new("SB_Global", &["nb_cfg"])),
    )
    .await
    .unwrap();
    let mut ops = Vec::new();
    for d in 0..DATAPATHS {
        ops.push(
            Op::insert("Datapath_Binding")
                .set("tunnel_key", (d + 1) as i64)
                .set(
                    "external_ids",
                    Datum::map([(
                        "name",
                        format!("neutron-{}", fake_uuid(d as u64 + 1_000_000)),
                    )]),
                ),
        );
    }
    let dps: Vec<Uuid> = loader
        .transact(ops)
        .await
        .unwrap()
        .iter()
        .map(|r| r.uuid().unwrap())
        .collect();
    let mut uuids = Vec::with_capacity(rows);
    for chunk in (0..rows).collect::<Vec<_>>().chunks(5000) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|&i| {
                let n = i as u64;
                let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
                Op::insert("Port_Binding")
                    .set("logical_port", fake_uuid(n))
                    .set("datapath", dps[i % DATAPATHS])
                    .set("tunnel_key", (i / DATAPATHS + 1) as i64)
                    .set(
                        "mac",
                        Datum::set(vec![Atom::string(format!(
                            "fa:16:3e:{:02x}:{:02x}:{:02x} {ip}",
                            (i >> 16) & 255,
                            (i >> 8) & 255,
                            i & 255
                        ))]),
                    )
                    .set(
                        "options",
                        Datum::map([("requested-chassis", format!("compute-{:04}", i % 500))]),
                    )
                    .set(
                        "external_ids",
                        Datum::map([
                            ("neutron:cidrs", format!("{ip}/16")),
                            ("neutron:device_id", fake_uuid(n + 7_000_000)),
                            ("neutron:device_owner", "compute:nova".to_owned()),
                            (
                                "neutron:network_name",
                                format!(
                                    "neutron-{}",
                                    fake_uuid((i % DATAPATHS) as u64 + 1_000_000)
                                ),
                            ),
                            ("neutron:port_name", String::new()),
                            ("neutron:project_id", hex(n % 50, 32)),
                            ("neutron:revision_number", "3".to_owned()),
                            ("neutron:security_group_ids", fake_uuid(n % 20 + 9_000_000)),
                        ]),
                    )
            })
            .collect();
        for r in loader.transact(ops).await.unwrap() {
            uuids.push(r.uuid().unwrap());
        }
    }
    uuids
}

/// Fetches the raw `monitor_cond` reply bytes over a plain socket (what the client receives).
fn raw_monitor_reply(server: &OvsdbServer, metas: &[Arc<TableMeta>]) -> Vec<u8> {
    let mut sock = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
    let mut req = serde_json::Map::new();
    for m in metas {
        let cols: Vec<&str> = m.columns.iter().map(|c| &**c).collect();
        req.insert(m.name.to_string(), serde_json::json!([{"columns": cols}]));
    }
    let msg = serde_json::json!({"id": 1, "method": "monitor_cond", "params": ["OVN_Southbound", "b", req]});
    sock.write_all(msg.to_string().as_bytes()).unwrap();
    let mut split = FrameSplitter::new(1 << 31);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if let Some(f) = split.next_frame().unwrap() {
            return f.to_vec();
        }
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0, "server closed");
        split.extend(&buf[..n]);
    }
}

fn schema_metas(server: &OvsdbServer) -> Vec<Arc<TableMeta>> {
    metas_from(&ovsdb_support::run(
        "ovsdb-client",
        &["get-schema", &server.unix_remote(), "OVN_Southbound"],
    ))
}

/// The monitored tables of [`spec`], typed from an OVN_Southbound schema.
fn metas_from(schema_text: &str) -> Vec<Arc<TableMeta>> {
    let schema_json: serde_json::Value = serde_json::from_str(schema_text).unwrap();
    let schema = DatabaseSchema::from_json(&schema_json, "bench").unwrap();
    let mk = |t: &str, cols: &[&str]| {
        let ts = &schema.tables[t];
        Arc::new(TableMeta::new(
            t,
            cols.iter()
                .map(|c| ((*c).to_owned(), ts.columns[*c].clone()))
                .collect(),
        ))
    };
    vec![
        mk("Port_Binding", PB_COLUMNS),
        mk("Datapath_Binding", &["external_ids", "tunnel_key"]),
    ]
}

/// One pass of the client's decode pipeline over a saved monitor reply, as the reader task
/// runs it: 256 KiB socket reads into the splitter, the owned frame decoded, the table-updates
/// decoded into rows, the replica built with 4 Port_Binding indexes.
struct DecodeRun {
    replica: Replica,
    /// framing + JSON-RPC envelope, then table-updates, then replica.
    stages: [Duration; 3],
    wall: Duration,
    user: Duration,
    sys: Duration,
    faults: i64,
}

fn decode_run(raw: &[u8], metas: &[Arc<TableMeta>]) -> DecodeRun {
    let r0 = thread_rusage();
    let t = Instant::now();
    let mut split = FrameSplitter::new(1 << 31);
    let mut frame = None;
    for chunk in raw.chunks(256 * 1024) {
        // What a socket read does: copy into the splitter's spare capacity.
        split.read_buffer(chunk.len()).extend_from_slice(chunk);
        if let Some(f) = split.take_frame().unwrap() {
            frame = Some(decode(f, "bench").unwrap());
        }
    }
    drop(split);
    let Some(Incoming::Response {
        result: Some(result),
        ..
    }) = frame
    else {
        panic!("no reply")
    };
    let t_frame = t.elapsed();
    let interner = std::cell::RefCell::new(ovn_bgp_agent::caps::ovsdb::types::Interner::default());
    let updates = parse_updates(
        result.get(),
        metas,
        UpdateFormat::V2,
        "bench",
        Some(&interner),
    )
    .unwrap();
    let t_parse = t.elapsed();
    drop(result);
    let mut replica = Replica::new(metas.to_vec());
    for c in ["logical_port", "datapath", "chassis", "type"] {
        replica.add_index("Port_Binding", c).unwrap();
    }
    let mut changes = Vec::new();
    replica.resync(updates, &mut changes);
    let wall = t.elapsed();
    let r1 = thread_rusage();
    drop(changes);
    DecodeRun {
        replica,
        stages: [t_frame, t_parse - t_frame, wall - t_parse],
        wall,
        user: r1.0 - r0.0,
        sys: r1.1 - r0.1,
        faults: r1.2 - r0.2,
    }
}

/// `--replay FILE [RUNS]`: the decode pipeline alone on a reply saved with
/// `BENCH_SAVE_REPLY=FILE`, each run printed (for profiling, e.g. under `perf record`).
fn replay(path: &str, runs: usize) {
    let raw = std::fs::read(path).unwrap();
    let metas = metas_from(&std::fs::read_to_string("/usr/share/ovn/ovn-sb.ovsschema").unwrap());
    let mb = raw.len() as f64 / 1e6;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut keep = Vec::new();
    for _ in 0..runs {
        let r = decode_run(&raw, &metas);
        println!(
            "{:.0} ms = {:.0} MB/s (framing+envelope {:.0} ms, table-updates {:.0} ms, replica {:.0} ms; user {:.0} ms, sys {:.0} ms, {} minor faults)",
            ms(r.wall),
            mb / r.wall.as_secs_f64(),
            ms(r.stages[0]),
            ms(r.stages[1]),
            ms(r.stages[2]),
            ms(r.user),
            ms(r.sys),
            r.faults,
        );
        keep.push(r.replica);
    }
    // Freeing the replicas is not part of a download; leave it out of profiles.
    std::mem::forget(keep);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--replay") {
        let path = args
            .get(1)
            .expect("usage: ovsdb_bench --replay FILE [RUNS]");
        return replay(path, args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5));
    }
    let rows: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let server = OvsdbServer::standalone(SB_SCHEMA, "bench");
    let t = Instant::now();
    let uuids = load(&server, rows).await;
    let load_time = t.elapsed();

    // 2. The real client: connect → first complete replica.
    let mut cfg = ClientConfig::new(&server.unix_remote(), "OVN_Southbound").unwrap();
    cfg.probe_interval = None;
    let t = Instant::now();
    let reader = OvsdbClient::connect(cfg.clone(), spec()).await.unwrap();
    let first_replica = t.elapsed();
    let stats = reader.stats();
    let mut events = reader.events().unwrap();
    let initial = events.recv().await.unwrap();
    assert_eq!(initial.changes.len(), rows + DATAPATHS);
    drop(initial);
    let hwm_after_client_mb = status_kb("VmHWM:") as f64 / 1024.0;

    // 1. The decode pipeline alone, on the exact bytes the server sends.
    let metas = schema_metas(&server);
    let t = Instant::now();
    let raw = raw_monitor_reply(&server, &metas);
    let server_reply_time = t.elapsed();
    let json_len = raw.len();
    if let Some(path) = std::env::var_os("BENCH_SAVE_REPLY") {
        // For profiling the decoder alone (`--replay FILE`).
        std::fs::write(path, &raw).unwrap();
    }
    // Per run: (wall, user, system, minor faults) of the decoding thread.
    let mut runs: Vec<(Duration, Duration, Duration, i64)> = Vec::new();
    let mut replica_bytes = 0usize;
    // Replicas stay alive until all runs are done: freeing 100k rows between runs would make
    // glibc consolidate its free lists inside the next timed run, which the real client never
    // pays on a first download.
    let mut keep = Vec::new();
    for _ in 0..5 {
        let live0 = LIVE.load(Ordering::Relaxed);
        let r = decode_run(&raw, &metas);
        if std::env::var_os("BENCH_STAGES").is_some() {
            eprintln!(
                "framing+decode {:?}, table-updates {:?}, replica {:?}",
                r.stages[0], r.stages[1], r.stages[2]
            );
        }
        runs.push((r.wall, r.user, r.sys, r.faults));
        replica_bytes = LIVE.load(Ordering::Relaxed) - live0;
        assert_eq!(r.replica.get_table("Port_Binding").unwrap().len(), rows);
        keep.push(r.replica);
    }
    // The machine's price for fresh memory, for comparison with the runs' system time: first
    // touch of as many bytes as one run leaves allocated (replica + reply buffer), in small
    // blocks as the decoder allocates them, while the replicas are still alive (so it is fresh
    // memory too). On a VM whose host reclaims freed guest memory (virtio-balloon free page
    // reporting, as here) this is several times what the same writes cost on warm memory.
    let floor = {
        let bytes = replica_bytes + json_len;
        let r0 = thread_rusage();
        let t = Instant::now();
        let blocks: Vec<Box<[u8]>> = (0..bytes / 4096)
            .map(|i| vec![i as u8; 4096].into_boxed_slice())
            .collect();
        let wall = t.elapsed();
        let r1 = thread_rusage();
        drop(blocks);
        (bytes, wall, r1.1 - r0.1)
    };
    drop(keep);
    drop(raw);
    let mb = json_len as f64 / 1e6;

    // 3. Update-to-event latency at 1000 updates/s from a second client.
    let writer = Arc::new(
        OvsdbClient::connect(
            cfg,
            MonitorSpec::default().table(TableSpec::new("SB_Global", &["nb_cfg"])),
        )
        .await
        .unwrap(),
    );
    const UPDATES: usize = 5000;
    let sent: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; UPDATES]));
    let got: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; UPDATES]));
    // The client's own share: notification read off the socket → batch received here.
    let own: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::with_capacity(UPDATES)));
    let g = got.clone();
    let o = own.clone();
    let recv_task = tokio::spawn(async move {
        let mut n = 0;
        while n < UPDATES {
            let Some(batch) = events.recv().await else {
                break;
            };
            let now = Instant::now();
            if let Some(received) = batch.received {
                o.lock()
                    .unwrap()
                    .push(now.duration_since(received.into_std()));
            }
            for ch in &batch.changes {
                if let Some(new) = ch.new_row()
                    && let Some(seq) = new
                        .strs("nat_addresses")
                        .find_map(|s| s.strip_prefix("bench-")?.parse::<usize>().ok())
                    && seq < UPDATES
                {
                    g.lock().unwrap()[seq] = Some(now);
                    n += 1;
                }
            }
        }
    });
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let t_send = Instant::now();
    for seq in 0..UPDATES {
        tick.tick().await;
        let op = Op::update("Port_Binding")
            .where_uuid(uuids[(seq * 7919) % rows])
            .set(
                "nat_addresses",
                Datum::set(vec![Atom::string(format!("bench-{seq}"))]),
            );
        let w = writer.clone();
        sent.lock().unwrap()[seq] = Some(Instant::now());
        tokio::spawn(async move { w.transact(vec![op]).await.unwrap() });
    }
    let send_secs = t_send.elapsed().as_secs_f64();
    let _ = tokio::time::timeout(Duration::from_secs(10), recv_task).await;
    let sent = sent.lock().unwrap();
    let got = got.lock().unwrap();
    let mut lat: Vec<Duration> = sent
        .iter()
        .zip(got.iter())
        .filter_map(|(s, g)| Some(g.as_ref()?.duration_since(*s.as_ref()?)))
        .collect();
    lat.sort();
    let mut own = own.lock().unwrap().clone();
    own.sort();

    let hwm_mb = status_kb("VmHWM:") as f64 / 1024.0;
    println!("## OVSDB client benchmark ({rows} Port_Binding rows, {DATAPATHS} datapaths)\n");
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!(
        "| load via transact (transactions of 5000 inserts) | {:.2} s | - |",
        load_time.as_secs_f64()
    );
    println!("| monitor reply JSON size | {mb:.1} MB | - |");
    let by_wall = {
        let mut r = runs.clone();
        r.sort_by_key(|r| r.0);
        r
    };
    let (best, median) = (by_wall[0], by_wall[by_wall.len() / 2]);
    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "| decode pipeline (framing + JSON-RPC + table-updates + replica with 4 indexes), wall, best / median of {} | {:.0} ms = {:.0} MB/s / {:.0} ms = {:.0} MB/s | >= 200 MB/s |",
        runs.len(),
        best.0.as_secs_f64() * 1e3,
        rate(best.0),
        median.0.as_secs_f64() * 1e3,
        rate(median.0)
    );
    let min_user = runs.iter().map(|r| r.1).min().unwrap_or_default();
    let max_user = runs.iter().map(|r| r.1).max().unwrap_or_default();
    println!(
        "| decode pipeline, user CPU of the decoding thread, min–max | {:.0}–{:.0} ms = {:.0}–{:.0} MB/s | >= 200 MB/s |",
        min_user.as_secs_f64() * 1e3,
        max_user.as_secs_f64() * 1e3,
        rate(max_user),
        rate(min_user)
    );
    println!(
        "| decode pipeline, system CPU (page faults) of the decoding thread, best / median run | {:.0} ms, {} faults / {:.0} ms, {} faults | - |",
        best.2.as_secs_f64() * 1e3,
        best.3,
        median.2.as_secs_f64() * 1e3,
        median.3
    );
    println!(
        "| for comparison: first touch of {:.0} MB of fresh memory in 4 KiB blocks (no parsing), wall / system CPU | {:.0} ms / {:.0} ms | - |",
        floor.0 as f64 / 1e6,
        floor.1.as_secs_f64() * 1e3,
        floor.2.as_secs_f64() * 1e3
    );
    println!(
        "| replica memory (live heap, incl. 4 Port_Binding indexes) | {:.1} MB = {:.2}x JSON | <= 3x |",
        replica_bytes as f64 / 1e6,
        replica_bytes as f64 / json_len as f64
    );
    println!(
        "| connect → first complete replica (real client, server serialization included) | {:.0} ms | - |",
        first_replica.as_secs_f64() * 1e3
    );
    println!(
        "| bytes received by the client for it | {:.1} MB | - |",
        stats.bytes_received as f64 / 1e6
    );
    println!(
        "| updates sent / events received | {} in {:.2} s / {} | 1000/s |",
        UPDATES,
        send_secs,
        lat.len()
    );
    println!(
        "| transact sent → event delivered p50 | {:.0} µs | - |",
        percentile(&lat, 0.50).as_secs_f64() * 1e6
    );
    println!(
        "| transact sent → event delivered p99 | {:.0} µs | < 1 ms |",
        percentile(&lat, 0.99).as_secs_f64() * 1e6
    );
    println!(
        "| transact sent → event delivered max | {:.0} µs | - |",
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e6
    );
    println!(
        "| client's own share: update2 read off the socket → event delivered, p50 / p99 / max | {:.0} / {:.0} / {:.0} µs | < 1 ms |",
        percentile(&own, 0.50).as_secs_f64() * 1e6,
        percentile(&own, 0.99).as_secs_f64() * 1e6,
        own.last().copied().unwrap_or_default().as_secs_f64() * 1e6
    );
    println!(
        "| peak RSS after loading + first replica (VmHWM, loader client included) | {hwm_after_client_mb:.0} MB | - |"
    );
    println!(
        "| peak RSS of the whole bench process (VmHWM, incl. raw-reply copies of the decode bench) | {hwm_mb:.0} MB | - |"
    );
    println!(
        "| ovsdb-server: request → complete monitor reply on a raw socket | {:.0} ms | - |",
        server_reply_time.as_secs_f64() * 1e3
    );
}
