//! Benchmark of the kernel reconciler: in a fresh network namespace, N addresses + N rules +
//! N routes applied from empty, a no-op second reconcile, and removal of everything.
//!
//! Run as root: `cargo run --release --example netlink_bench [N] [--kernel-reference]`
//! (default N = 10000). It creates the namespace `nlt-bench-<pid>` with `ip netns add` and
//! deletes it at the end. With `--kernel-reference` it also times `ip -batch` adding the same
//! objects in another fresh namespace: what the kernel itself needs, one request at a time.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]
// Unsafe code allowed in this benchmark: getrusage for the CPU split of the benchmark.
#![allow(unsafe_code)]

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::netlink::{NetlinkReconciler, NetnsTarget};
use ovn_bgp_agent::system::*;
use ovn_bgp_agent::types::InterfaceName;

struct Netns(String);

impl Netns {
    /// A fresh namespace `<prefix>-<pid>`, deleted on drop.
    fn add(prefix: &str) -> Netns {
        let ns = Netns(format!("{prefix}-{}", std::process::id()));
        let status = Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .expect("run ip (iproute2) as root");
        assert!(status.success(), "ip netns add {} failed", ns.0);
        ns
    }
}

/// A timed reconcile that must apply without object errors.
async fn timed_reconcile(
    r: &NetlinkReconciler,
    d: &DesiredSystem,
    what: &str,
) -> (ChangeReport, Timed) {
    let t = Timed::start();
    let report = r.reconcile(d).await.expect(what);
    let timed = Timed::since(t);
    assert!(
        report.errors.is_empty(),
        "{what}: {:?}",
        &report.errors[..report.errors.len().min(5)]
    );
    (report, timed)
}

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

/// (user, system) CPU time of the whole process so far. The kernel handles a netlink request
/// inside the `sendmsg` that carries it, so system time is the kernel's work for the agent.
fn cpu() -> (Duration, Duration) {
    // SAFETY: getrusage only writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (d(u.ru_utime), d(u.ru_stime))
}

/// Wall, user and system time of a phase.
struct Timed {
    wall: Duration,
    user: Duration,
    sys: Duration,
}

impl Timed {
    fn start() -> (Instant, (Duration, Duration)) {
        (Instant::now(), cpu())
    }
    fn since(start: (Instant, (Duration, Duration))) -> Timed {
        let (u, s) = cpu();
        Timed {
            wall: start.0.elapsed(),
            user: u - start.1.0,
            sys: s - start.1.1,
        }
    }
}

impl std::fmt::Display for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (user {}, kernel {})",
            ms(self.wall),
            ms(self.user),
            ms(self.sys)
        )
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u32 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let reference = args.iter().any(|a| a == "--kernel-reference");
    let ns = Netns::add("nlt-bench");

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
        let t = Timed::start();
        let r = reconciler.reconcile(&partial).await.expect("partial apply");
        println!("  {class:<10} alone: {} ({:?})", Timed::since(t), r.added);
    }
    let t = Timed::start();
    reconciler.reconcile(&empty).await.expect("partial removal");
    println!("  removal after the breakdown: {}", Timed::since(t));

    let (apply, t_apply) = timed_reconcile(&reconciler, &want, "apply").await;
    let (noop, t_noop) = timed_reconcile(&reconciler, &want, "no-op").await;
    assert!(
        noop.is_noop(),
        "second reconcile changed something: {noop:?}"
    );
    // The host's addresses with the agent's N on its own device: the policy stage's read at
    // start and at each periodic reconcile (each device that is not the agent's dumped alone),
    // and one device's (the ovn method's fabric bridges, every 5 s).
    let t = Timed::start();
    let all = reconciler.host_addresses().await.expect("host addresses");
    let t_all = Timed::since(t);
    // Timed on a second call: the fabric bridges' read is a steady one, every 5 s.
    let _ = reconciler
        .addresses_of(&["lo"])
        .await
        .expect("lo's addresses");
    let t = Timed::start();
    let one = reconciler
        .addresses_of(&["lo"])
        .await
        .expect("lo's addresses");
    let t_one = Timed::since(t);
    let (removal, t_remove) = timed_reconcile(&reconciler, &empty, "remove").await;

    // A node's first start: the devices do not exist either, so bgp-nic gets its addresses
    // before it is set up (reconciler.rs, `defer_up`).
    let cold_ns = Netns::add("nlt-bcold");
    let cold = NetlinkReconciler::new(NetnsTarget::from_config(Some(&cold_ns.0)));
    let (first, t_cold) = timed_reconcile(&cold, &want, "cold start").await;
    assert!(cold.reconcile(&want).await.expect("no-op").is_noop());

    println!("objects: {n} addresses + {n} rules + {n} routes");
    println!("apply from empty:   {t_apply}  ({:?})", apply.added);
    println!(
        "cold start (devices created too): {t_cold}  ({:?})",
        first.added
    );
    println!("no-op reconcile:    {t_noop}");
    println!("remove everything:  {t_remove}  ({:?})", removal.removed);
    println!(
        "host addresses (not the agent's devices): {t_all} ({})",
        all.len()
    );
    println!(
        "one device's addresses (lo):               {t_one} ({})",
        one.len()
    );
    if reference {
        kernel_reference(n);
    }
}

/// `ip -batch` on the same objects, in a fresh namespace, class by class.
fn kernel_reference(n: u32) {
    let ns = Netns::add("nlt-bref");
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
