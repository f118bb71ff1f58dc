//! What one reconcile costs with N exposures already in place, by how the kernel is read
//! (issue 17). In a fresh namespace, N exposed IPs as the underlay renders them (an address on
//! bgp-nic, a rule to table 200, a route in table 200; default N = 10 000); then, timed over
//! several rounds (median):
//! - a reconcile adding one more exposure (and the next removing it), reading the kernel by
//!   dumps (the reconciler without its mirror), planning every class against the mirror, and
//!   as a delta (the agent's usual case);
//! - a no-op reconcile by dumps and as a delta;
//! - the mirror alone: its first sync, a fresh dump of every class, a barrier, and following
//!   the removal of the N exposures.
//!
//! Run as root: `cargo run --release --example netlink_mirror_bench [N]`.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::netlink::mirror::{KernelMirror, MirrorOptions, ObjectKey};
use ovn_bgp_agent::caps::netlink::{NetlinkReconciler, NetnsTarget};
use ovn_bgp_agent::system::*;
use ovn_bgp_agent::types::InterfaceName;
use rtnetlink::packet_route::AddressFamily;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn exposed(d: &mut DesiredSystem, i: u32) {
    let nic = InterfaceName::new("bgp-nic").expect("valid name");
    let ip = Ipv4Addr::from(0x0a00_0000 + i + 1);
    let dst = ipnet::IpNet::new(ip.into(), 32).expect("valid prefix");
    d.addresses.insert(AddressSpec {
        dev: nic.clone(),
        addr: dst,
    });
    d.rules.insert(RuleSpec {
        selector: RuleSelector::To(dst),
        table: 200,
        priority: 1000,
    });
    d.routes.insert(RouteSpec {
        table: 200,
        dst,
        route_type: RouteType::Unicast,
        via: None,
        dev: Some(nic),
        scope_link: true,
        metric: None,
    });
}

fn desired(n: u32) -> DesiredSystem {
    let nic = InterfaceName::new("bgp-nic").expect("valid name");
    let mut d = DesiredSystem::default();
    d.links.insert(LinkSpec {
        name: nic.clone(),
        kind: LinkKind::Ifb,
        master: None,
        mac: None,
        up: true,
    });
    for i in 0..n {
        exposed(&mut d, i);
    }
    d.ownership.tables.insert(200);
    d.ownership.address_devices.insert(nic);
    d
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Median of `rounds` runs of `f`.
async fn median<F, Fut, T>(rounds: usize, mut f: F) -> (Duration, T)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut times = Vec::with_capacity(rounds);
    let mut last = None;
    for _ in 0..rounds {
        let t = Instant::now();
        last = Some(f().await);
        times.push(t.elapsed());
    }
    times.sort();
    (times[rounds / 2], last.expect("at least one round"))
}

#[tokio::main]
async fn main() {
    let n: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let ns = Netns(format!("nlt-mbench-{}", std::process::id()));
    let ok = Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .expect("run ip (iproute2) as root");
    assert!(ok.success(), "ip netns add {} failed", ns.0);
    let target = NetnsTarget::from_config(Some(&ns.0));
    let reconciler = NetlinkReconciler::new(target.clone());
    let dumps = NetlinkReconciler::new(target.clone()).without_mirror();
    let want = Arc::new(desired(n));
    let mut plus_one = desired(n);
    exposed(&mut plus_one, n);
    let plus_one = Arc::new(plus_one);
    let r = reconciler.reconcile_shared(&want).await.expect("apply");
    assert!(
        r.errors.is_empty(),
        "{:?}",
        &r.errors[..r.errors.len().min(3)]
    );
    let rounds = 15;

    // One exposure more, then one less: (add, remove) medians.
    let pair = |how: &'static str| {
        let (reconciler, dumps, want, plus_one) = (&reconciler, &dumps, &want, &plus_one);
        async move {
            let (mut adds, mut removes) = (Vec::new(), Vec::new());
            let deltas = reconciler.deltas();
            for _ in 0..rounds {
                for (target, times) in [(plus_one, &mut adds), (want, &mut removes)] {
                    if how == "full" {
                        reconciler.plan_in_full_next();
                    }
                    let t = Instant::now();
                    let r = match how {
                        "dumps" => dumps.reconcile_shared(target).await,
                        _ => reconciler.reconcile_shared(target).await,
                    }
                    .expect("reconcile");
                    times.push(t.elapsed());
                    assert_eq!(r.total_changes(), 3, "{how}: {r:?}");
                }
            }
            let deltas = reconciler.deltas() - deltas;
            adds.sort();
            removes.sort();
            (adds[rounds / 2], removes[rounds / 2], deltas)
        }
    };
    let by_dumps = pair("dumps").await;
    let full = pair("full").await;
    let delta = pair("delta").await;
    assert_eq!(full.2, 0, "plan_in_full_next: no delta");
    assert_eq!(delta.2, 2 * rounds as u64, "every change a delta");
    let (noop_dumps, r) = median(rounds, || dumps.reconcile_shared(&want)).await;
    assert!(r.expect("no-op").is_noop());
    let same = Arc::new((*want).clone());
    let (noop_delta, r) = median(rounds, || reconciler.reconcile_shared(&same)).await;
    assert!(r.expect("no-op").is_noop());

    let t = Instant::now();
    let mirror = KernelMirror::start(target, MirrorOptions::default())
        .await
        .expect("mirror");
    mirror.synced().await;
    let first_sync = t.elapsed();
    let routes_in_200 = mirror.read(|s| s.routes_of_table(AddressFamily::Inet, 200).len());
    assert_eq!(routes_in_200, n as usize, "the mirror holds every route");
    let (dump, fresh) = median(rounds, || mirror.fresh_dump()).await;
    let objects = fresh.expect("dump").len();
    let (barrier, ()) = median(rounds, || async {
        mirror
            .barrier(Duration::from_secs(5))
            .await
            .expect("barrier")
    })
    .await;

    // Following a burst: remove the N exposures, then wait until the mirror has seen it all.
    let empty = Arc::new(DesiredSystem {
        ownership: want.ownership.clone(),
        links: want.links.clone(),
        ..Default::default()
    });
    let status_before = *mirror.status().borrow();
    let t = Instant::now();
    let removed = reconciler.reconcile_shared(&empty).await.expect("removal");
    assert!(
        removed.errors.is_empty(),
        "{:?}",
        &removed.errors[..removed.errors.len().min(3)]
    );
    let removal = t.elapsed();
    mirror
        .barrier(Duration::from_secs(30))
        .await
        .expect("barrier");
    let caught_up = t.elapsed();
    let status = *mirror.status().borrow();
    let left = mirror.read(|s| {
        s.comparable_view()
            .keys()
            .filter(|k| matches!(k, ObjectKey::Route { table: 200, .. }))
            .count()
    });
    if left > 0 {
        mirror.read(|s| {
            for (k, v) in s
                .comparable_view()
                .iter()
                .filter(|(k, _)| matches!(k, ObjectKey::Route { table: 200, .. }))
                .take(3)
            {
                eprintln!("left: {k:?} {v}");
            }
        });
        let out = Command::new("ip")
            .args(["-n", &ns.0, "route", "show", "table", "200"])
            .output()
            .expect("ip");
        eprintln!(
            "kernel table 200: {}",
            String::from_utf8_lossy(&out.stdout).lines().count()
        );
    }
    assert_eq!(
        left,
        0,
        "the mirror still holds removed routes: {removed:?}, {status:?}, the reconciler's mirror {:?}",
        reconciler.mirror_status().map(|s| s.0)
    );

    println!(
        "N = {n} exposed IPs (address + rule + route each; {objects} kernel objects in the namespace)"
    );
    println!("one exposure added / removed, median of {rounds}:");
    println!(
        "  reading by dumps:           {} / {}",
        ms(by_dumps.0),
        ms(by_dumps.1)
    );
    println!(
        "  full plan from the mirror:  {} / {}",
        ms(full.0),
        ms(full.1)
    );
    println!(
        "  delta:                      {} / {}",
        ms(delta.0),
        ms(delta.1)
    );
    println!(
        "no-op reconcile: by dumps {}, delta {}",
        ms(noop_dumps),
        ms(noop_delta)
    );
    println!(
        "mirror first sync (dump of every class): {}",
        ms(first_sync)
    );
    println!("full dump of every class, median: {}", ms(dump));
    println!("mirror barrier alone, median: {}", ms(barrier));
    println!(
        "removal of the {n} exposures: {} (reconcile), mirror caught up after {} ({} events, {} resyncs)",
        ms(removal),
        ms(caught_up),
        status.events - status_before.events,
        status.resyncs - status_before.resyncs
    );
}
