//! Benchmark of the kernel reconciler: in a fresh network namespace, N addresses + N rules +
//! N routes applied from empty, a no-op second reconcile, and removal of everything.
//!
//! Run as root: `cargo run --release --example netlink_bench [N] [--kernel-reference]`
//! (default N = 10000). It creates the namespace `nlt-bench-<pid>` with `ip netns add` and
//! deletes it at the end. With `--kernel-reference` it also times `ip -batch` adding the same
//! objects in another fresh namespace: what the kernel itself needs, one request at a time.

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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u32 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let reference = args.iter().any(|a| a == "--kernel-reference");
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
    if reference {
        kernel_reference(n);
    }
}

/// `ip -batch` on the same objects, in a fresh namespace, class by class.
fn kernel_reference(n: u32) {
    let ns = Netns(format!("nlt-bref-{}", std::process::id()));
    let run = |batch: &str| {
        let path = std::env::temp_dir().join(format!("{}.batch", ns.0));
        std::fs::write(&path, batch).expect("write batch file");
        let t = Instant::now();
        let ok = Command::new("ip")
            .args(["-n", &ns.0, "-batch"])
            .arg(&path)
            .status()
            .expect("run ip -batch");
        let elapsed = t.elapsed();
        let _ = std::fs::remove_file(&path);
        assert!(ok.success(), "ip -batch failed");
        elapsed
    };
    assert!(
        Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .expect("ip")
            .success()
    );
    run(
        "link add bgp-nic type ifb\nlink set bgp-nic up\nlink add br-ex type bridge\nlink set br-ex up\n",
    );
    let ips: Vec<Ipv4Addr> = (0..n)
        .map(|i| Ipv4Addr::from(0x0a00_0000 + i + 1))
        .collect();
    let batch = |f: &dyn Fn(&Ipv4Addr) -> String| ips.iter().map(f).collect::<String>();
    println!("kernel reference (ip -batch, one request at a time):");
    let a = run(&batch(&|ip| format!("addr add {ip}/32 dev bgp-nic\n")));
    println!("  addresses: {}", ms(a));
    let r = run(&batch(&|ip| {
        format!("rule add to {ip}/32 table 200 priority 1000\n")
    }));
    println!("  rules:     {}", ms(r));
    let t = run(&batch(&|ip| {
        format!("route add {ip}/32 dev br-ex table 200 proto boot scope link\n")
    }));
    println!("  routes:    {}", ms(t));
    println!("  total:     {}", ms(a + r + t));
}
