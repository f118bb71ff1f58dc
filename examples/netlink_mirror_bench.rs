//! What reading the kernel state costs per reconcile: the dumps of today against the mirror
//! kept current by notifications (issue 17). In a fresh namespace, N routes in table 200
//! (default 10 000) through one device; then, timed over several rounds:
//! - a no-op reconcile (today: one dump per class and per owned table, then the plan);
//! - a full dump of every class (every table), what the mirror reads at a (re)sync;
//! - a mirror read: a barrier (everything the kernel did before is in the mirror) and a copy
//!   of what the reconciler reads (links, addresses, rules, neighbours, table 200's routes);
//! - the mirror following the removal of the N routes (the barrier after the burst).
//!
//! Run as root: `cargo run --release --example netlink_mirror_bench [N]`.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::netlink::mirror::{KernelMirror, MirrorOptions, ObjectKey};
use ovn_bgp_agent::caps::netlink::{NetlinkReconciler, NetnsTarget};
use ovn_bgp_agent::system::*;
use ovn_bgp_agent::types::InterfaceName;
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
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
        let ip = Ipv4Addr::from(0x0a00_0000 + i + 1);
        d.routes.insert(RouteSpec {
            table: 200,
            dst: ipnet::IpNet::new(ip.into(), 32).expect("valid prefix"),
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(nic.clone()),
            scope_link: true,
            metric: None,
        });
    }
    d.ownership.tables.insert(200);
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

/// What the reconciler reads, from the mirror.
fn reconciler_view(m: &KernelMirror) -> Vec<RouteNetlinkMessage> {
    m.read(|s| {
        let mut out: Vec<RouteNetlinkMessage> = s
            .messages()
            .filter(|msg| !matches!(msg, RouteNetlinkMessage::NewRoute(_)))
            .cloned()
            .collect();
        out.extend(s.routes_of_table(AddressFamily::Inet, 200));
        out.extend(s.routes_of_table(AddressFamily::Inet6, 200));
        out
    })
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
    let want = desired(n);
    let r = reconciler.reconcile(&want).await.expect("apply");
    assert!(
        r.errors.is_empty(),
        "{:?}",
        &r.errors[..r.errors.len().min(3)]
    );

    let t = Instant::now();
    let mirror = KernelMirror::start(target, MirrorOptions::default())
        .await
        .expect("mirror");
    mirror.synced().await;
    let first_sync = t.elapsed();
    let routes_in_200 = mirror.read(|s| s.routes_of_table(AddressFamily::Inet, 200).len());
    assert_eq!(routes_in_200, n as usize, "the mirror holds every route");

    let rounds = 15;
    let (noop, r) = median(rounds, || reconciler.reconcile(&want)).await;
    assert!(
        r.expect("no-op").is_noop(),
        "the no-op reconcile changed something"
    );
    let (dump, fresh) = median(rounds, || mirror.fresh_dump()).await;
    let objects = fresh.expect("dump").len();
    let (read, view) = median(rounds, || async {
        mirror
            .barrier(Duration::from_secs(5))
            .await
            .expect("barrier");
        reconciler_view(&mirror)
    })
    .await;
    let (barrier, ()) = median(rounds, || async {
        mirror
            .barrier(Duration::from_secs(5))
            .await
            .expect("barrier")
    })
    .await;

    // Following a burst: remove the N routes, then wait until the mirror has seen it all.
    let empty = DesiredSystem {
        ownership: want.ownership.clone(),
        links: want.links.clone(),
        ..Default::default()
    };
    let status_before = *mirror.status().borrow();
    let t = Instant::now();
    reconciler.reconcile(&empty).await.expect("removal");
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
    assert_eq!(left, 0, "the mirror still holds removed routes");

    println!("N = {n} routes in table 200 ({objects} kernel objects in the namespace)");
    println!(
        "mirror first sync (dump of every class): {}",
        ms(first_sync)
    );
    println!(
        "no-op reconcile today (dumps + plan), median of {rounds}: {}",
        ms(noop)
    );
    println!("full dump of every class, median: {}", ms(dump));
    println!(
        "mirror read (barrier + copy of {} objects the reconciler reads), median: {}",
        view.len(),
        ms(read)
    );
    println!("mirror barrier alone, median: {}", ms(barrier));
    println!(
        "removal of the {n} routes: {} (reconcile), mirror caught up after {} ({} events, {} resyncs)",
        ms(removal),
        ms(caught_up),
        status.events - status_before.events,
        status.resyncs - status_before.resyncs
    );
}
