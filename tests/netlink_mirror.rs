//! The kernel mirror against the real kernel, in a namespace of the test's own: after random
//! changes made by another process (`ip`), after a hand deletion and after an overflow of its
//! monitor socket, the mirror equals a fresh dump (issue 17).

mod netlink_support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use netlink_support::TestNetns;
use ovn_bgp_agent::caps::netlink::NetnsTarget;
use ovn_bgp_agent::caps::netlink::mirror::{KernelMirror, MirrorOptions, ObjectKey};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const BARRIER: Duration = Duration::from_secs(10);

async fn start(ns: &TestNetns, options: MirrorOptions) -> KernelMirror {
    let m = KernelMirror::start(NetnsTarget::from_config(Some(&ns.name)), options)
        .await
        .expect("start the mirror");
    tokio::time::timeout(BARRIER, m.synced())
        .await
        .expect("first sync within 10 s");
    m
}

/// The mirror, caught up with everything done before, against a fresh dump: equal, object by
/// object (a difference is printed key by key).
///
/// The kernel also changes things on its own, later (an IPv6 link-local address appears once
/// the carrier is seen, from a work queue): the mirror is read after a barrier that follows
/// the dump, and the comparison retried while the namespace settles. A lost or doubled event
/// never settles.
async fn assert_mirror_is_current(m: &KernelMirror, context: &str) -> BTreeMap<ObjectKey, String> {
    let mut attempts = 0;
    let (mirrored, fresh) = loop {
        attempts += 1;
        m.barrier(BARRIER).await.expect("barrier");
        let fresh = m.fresh_dump().await.expect("fresh dump").comparable_view();
        m.barrier(BARRIER).await.expect("barrier");
        let mirrored = m.read(|s| s.comparable_view());
        if mirrored == fresh || attempts == 10 {
            break (mirrored, fresh);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    if mirrored != fresh {
        let mut diff = Vec::new();
        for (k, v) in &fresh {
            match mirrored.get(k) {
                None => diff.push(format!("missing {k:?}: {v}")),
                Some(w) if w != v => {
                    diff.push(format!("differs {k:?}:\n  mirror {w}\n  kernel {v}"))
                }
                _ => {}
            }
        }
        for (k, v) in &mirrored {
            if !fresh.contains_key(k) {
                diff.push(format!("extra {k:?}: {v}"));
            }
        }
        panic!(
            "{context}: the mirror differs from a fresh dump:\n{}",
            diff.join("\n")
        );
    }
    assert!(
        mirrored.keys().any(|k| matches!(k, ObjectKey::Link(_))),
        "{context}: the comparison saw no link at all"
    );
    mirrored
}

/// `ip -n <ns> -force -batch -`: every command runs, failures (deleting what is not there,
/// a route through a down device) are part of the random sequence.
fn ip_batch(ns: &TestNetns, commands: &[String]) {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["-n", &ns.name, "-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run ip");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(commands.join("\n").as_bytes())
        .expect("write the batch");
    child.wait().expect("ip -batch");
}

/// One random change: `(kind, device, item)`, turned into an `ip` command.
fn command((kind, d, i): (u8, u8, u8)) -> String {
    let dev = format!("d{d}");
    let table = if i % 2 == 0 { 100 } else { 200 };
    match kind {
        0 => format!("link add {dev} type ifb"),
        1 => format!("link del {dev}"),
        2 => format!("link set {dev} up"),
        3 => format!("link set {dev} down"),
        4 => format!("addr add 10.{d}.{i}.1/24 dev {dev}"),
        5 => format!("addr del 10.{d}.{i}.1/24 dev {dev}"),
        6 => format!("-6 addr add fd00:{d}::{i}/64 dev {dev} nodad"),
        7 => format!("route add 172.16.{i}.0/24 dev {dev} table {table} proto boot"),
        8 => format!("route del 172.16.{i}.0/24 table {table}"),
        9 => format!("-6 route add fd10:{i}::/64 dev {dev} table {table} proto boot"),
        10 => format!("-6 route del fd10:{i}::/64 table {table}"),
        11 => format!(
            "rule add from 192.168.{i}.0/24 table {table} pref {}",
            1000 + u32::from(i)
        ),
        12 => format!("rule del pref {}", 1000 + u32::from(i)),
        13 => format!(
            "neigh replace 10.{d}.{i}.2 lladdr 02:00:00:00:{d:02x}:{i:02x} dev {dev} nud permanent"
        ),
        14 => format!("neigh del 10.{d}.{i}.2 dev {dev}"),
        15 => format!("route replace 172.16.{i}.0/24 dev {dev} table {table} metric 5 proto boot"),
        16 => "link add br1 type bridge".to_owned(),
        17 => format!("link set {dev} master br1"),
        18 => format!("link set {dev} nomaster"),
        19 => format!("neigh add proxy 10.{d}.{i}.3 dev {dev}"),
        _ => format!("neigh del proxy 10.{d}.{i}.3 dev {dev}"),
    }
}

fn changes() -> impl Strategy<Value = Vec<(u8, u8, u8)>> {
    prop::collection::vec((0u8..21, 0u8..3, 0u8..4), 1..60)
}

#[test]
fn the_mirror_equals_a_fresh_dump_after_random_changes_by_another_process() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // A fixed seed: the same sequences on every run.
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: 32,
            failure_persistence: None,
            max_shrink_iters: 16,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let applied = std::cell::Cell::new(0usize);
    // Objects of the random changes seen in the compared views: the sequences did something.
    let seen = std::cell::Cell::new(0usize);
    runner
        .run(&changes(), |seq| {
            let ns = TestNetns::new();
            rt.block_on(async {
                let m = start(&ns, MirrorOptions::default()).await;
                // Devices to work on from the start, so most commands apply.
                ip_batch(
                    &ns,
                    &(0..3)
                        .flat_map(|d| {
                            [
                                format!("link add d{d} type ifb"),
                                format!("link set d{d} up"),
                            ]
                        })
                        .collect::<Vec<_>>(),
                );
                // In three bursts, each checked: the mirror follows between bursts too.
                for part in seq.chunks(seq.len().div_ceil(3)) {
                    let commands: Vec<String> = part.iter().copied().map(command).collect();
                    ip_batch(&ns, &commands);
                    let view = assert_mirror_is_current(&m, &commands.join("; ")).await;
                    seen.set(
                        seen.get()
                            + view
                                .keys()
                                .filter(|k| match k {
                                    ObjectKey::Route { table, .. } => {
                                        *table == 100 || *table == 200
                                    }
                                    ObjectKey::Rule(_) | ObjectKey::Neighbour { .. } => true,
                                    _ => false,
                                })
                                .count(),
                    );
                }
            });
            applied.set(applied.get() + seq.len());
            Ok(())
        })
        .expect("every sequence");
    assert!(applied.get() > 12, "the random sequences were not run");
    assert!(
        seen.get() > 50,
        "the random changes left almost nothing to compare: {}",
        seen.get()
    );
}

#[tokio::test]
async fn a_route_deleted_by_hand_is_seen_through_the_monitor_within_a_second() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
    ns.ip(&["link", "set", "bgp-nic", "up"]);
    ns.ip(&[
        "route",
        "add",
        "10.9.0.0/24",
        "dev",
        "bgp-nic",
        "table",
        "200",
        "proto",
        "boot",
    ]);
    let m = start(&ns, MirrorOptions::default()).await;
    let count = |m: &KernelMirror| {
        m.read(|s| {
            s.routes_of_table(rtnetlink::packet_route::AddressFamily::Inet, 200)
                .len()
        })
    };
    assert_eq!(
        count(&m),
        1,
        "the route is in the mirror after the first sync"
    );
    let mut status = m.status();
    let before = status.borrow_and_update().removals;
    ns.ip(&["route", "del", "10.9.0.0/24", "table", "200"]);
    let started = tokio::time::Instant::now();
    tokio::time::timeout(
        Duration::from_secs(1),
        status.wait_for(|s| s.removals > before),
    )
    .await
    .expect("the deletion is notified within a second")
    .expect("the mirror runs");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(count(&m), 0, "the route is gone from the mirror");
    assert_mirror_is_current(&m, "after the deletion").await;
}

#[tokio::test]
async fn an_overflow_of_the_monitor_resyncs_and_the_mirror_equals_a_fresh_dump() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
    ns.ip(&["link", "set", "bgp-nic", "up"]);
    // The smallest receive buffer the kernel allows: a burst overflows it.
    let m = start(&ns, MirrorOptions { rcvbuf: 1 }).await;
    let mut status = m.status();
    let commands: Vec<String> = (0..4000u32)
        .map(|i| {
            format!(
                "route add 10.{}.{}.0/24 dev bgp-nic table 200 proto boot",
                i / 256,
                i % 256
            )
        })
        .collect();
    ip_batch(&ns, &commands);
    assert_mirror_is_current(&m, "after the burst").await;
    let s = *status.borrow_and_update();
    assert!(
        s.overflows >= 1,
        "the burst did not overflow the monitor: {s:?}"
    );
    assert!(s.resyncs >= 1, "no resync after the overflow: {s:?}");
    let routes = m.read(|s| {
        s.routes_of_table(rtnetlink::packet_route::AddressFamily::Inet, 200)
            .len()
    });
    assert_eq!(routes, 4000, "every route once, none lost or doubled");
    // Still following after the resync.
    ns.ip(&["route", "del", "10.0.0.0/24", "table", "200"]);
    assert_mirror_is_current(&m, "after a deletion following the resync").await;
}

/// The kernel flushes a downed link's IPv4 routes without telling anyone (only the IPv6 ones
/// are notified): the mirror must read them afresh, not keep them.
#[tokio::test]
async fn ipv4_routes_flushed_silently_with_a_link_set_down_leave_the_mirror() {
    let ns = TestNetns::new();
    ns.ip(&["link", "add", "d0", "type", "ifb"]);
    ns.ip(&["link", "set", "d0", "up"]);
    ns.ip(&["addr", "add", "10.0.0.1/24", "dev", "d0"]);
    ns.ip(&[
        "route",
        "add",
        "172.16.0.0/24",
        "dev",
        "d0",
        "table",
        "100",
        "proto",
        "boot",
    ]);
    let m = start(&ns, MirrorOptions::default()).await;
    let in_table_100 = |m: &KernelMirror| {
        m.read(|s| {
            s.routes_of_table(rtnetlink::packet_route::AddressFamily::Inet, 100)
                .len()
        })
    };
    assert_eq!(in_table_100(&m), 1);
    ns.ip(&["link", "set", "d0", "down"]);
    assert!(
        ns.ip(&["route", "show", "table", "100"]).trim().is_empty(),
        "the kernel kept the route of a down link"
    );
    assert_mirror_is_current(&m, "after link set down").await;
    assert_eq!(
        in_table_100(&m),
        0,
        "the flushed route stayed in the mirror"
    );
}
