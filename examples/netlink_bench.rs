//! Benchmark of the kernel reconciler: in a fresh network namespace, N addresses + N rules +
//! N routes applied from empty, a no-op second reconcile, and removal of everything.
//!
//! Run as root: `cargo run --release --example netlink_bench [N]` (default 10000).
//! It creates the namespace `nlt-bench-<pid>` with `ip netns add` and deletes it at the end.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::netlink::{NetlinkReconciler, NetnsTarget};
use ovn_bgp_agent::system::*;
use ovn_bgp_agent::types::InterfaceName;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).expect("valid name")
}

fn desired(n: u32) -> DesiredSystem {
    let mut d = DesiredSystem::default();
    for (dev, kind) in [("bgp-nic", LinkKind::Ifb), ("br-ex", LinkKind::Bridge)] {
        d.links.insert(LinkSpec {
            name: name(dev),
            kind,
            master: None,
            mac: None,
            up: true,
        });
    }
    for i in 0..n {
        let ip = Ipv4Addr::from(0x0a00_0000 + i + 1);
        let host = ipnet::IpNet::new(ip.into(), 32).expect("valid prefix");
        d.addresses.insert(AddressSpec {
            dev: name("bgp-nic"),
            addr: host,
        });
        d.rules.insert(RuleSpec {
            selector: RuleSelector::To(host),
            table: 200,
            priority: 1000,
        });
        d.routes.insert(RouteSpec {
            table: 200,
            dst: host,
            route_type: RouteType::Unicast,
            via: None,
            dev: Some(name("br-ex")),
            scope_link: true,
            metric: None,
        });
    }
    d.ownership.address_devices.insert(name("bgp-nic"));
    d.ownership.tables.insert(200);
    d
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let ns = Netns(format!("nlt-bench-{}", std::process::id()));
    let status = Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .expect("run ip (iproute2) as root");
    assert!(status.success(), "ip netns add {} failed", ns.0);

    let reconciler = NetlinkReconciler::new(NetnsTarget::from_config(Some(&ns.0)));
    let want = desired(n);
    let empty = DesiredSystem {
        ownership: want.ownership.clone(),
        links: want.links.clone(),
        ..Default::default()
    };
    // Links first, so the timed runs measure addresses, rules and routes.
    reconciler.reconcile(&empty).await.expect("links");

    // Per-class breakdown: each class added on top of the previous ones, then all removed.
    let mut partial = empty.clone();
    for class in ["addresses", "rules", "routes"] {
        match class {
            "addresses" => partial.addresses = want.addresses.clone(),
            "rules" => partial.rules = want.rules.clone(),
            _ => partial.routes = want.routes.clone(),
        }
        let t = Instant::now();
        let r = reconciler.reconcile(&partial).await.expect("partial apply");
        println!("  {class:<10} alone: {} ({:?})", ms(t.elapsed()), r.added);
    }
    let t = Instant::now();
    reconciler.reconcile(&empty).await.expect("partial removal");
    println!("  removal after the breakdown: {}", ms(t.elapsed()));

    let t = Instant::now();
    let apply = reconciler.reconcile(&want).await.expect("apply");
    let t_apply = t.elapsed();
    assert!(
        apply.errors.is_empty(),
        "{:?}",
        &apply.errors[..apply.errors.len().min(5)]
    );

    let t = Instant::now();
    let noop = reconciler.reconcile(&want).await.expect("no-op");
    let t_noop = t.elapsed();
    assert!(
        noop.is_noop(),
        "second reconcile changed something: {noop:?}"
    );

    let t = Instant::now();
    let removal = reconciler.reconcile(&empty).await.expect("remove");
    let t_remove = t.elapsed();
    assert!(
        removal.errors.is_empty(),
        "{:?}",
        &removal.errors[..removal.errors.len().min(5)]
    );

    println!("objects: {n} addresses + {n} rules + {n} routes");
    println!("apply from empty:   {}  ({:?})", ms(t_apply), apply.added);
    println!("no-op reconcile:    {}", ms(t_noop));
    println!(
        "remove everything:  {}  ({:?})",
        ms(t_remove),
        removal.removed
    );
}
