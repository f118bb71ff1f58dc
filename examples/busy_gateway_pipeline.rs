//! What one event costs in the SB driver and the underlay rendering on a busy gateway, without
//! daemons (issue 17): a Southbound model with R routers whose gateway is bound here, each with
//! 500 centralized FIPs and 500 tenant VMs behind it (exposed here with tenant networks on), as
//! `scripts/bench/sb_bgp_bench.sh --busy` loads; then a provider VM is bound here, event after
//! event, and each stage is timed (median of the events):
//! - the exposures computed from scratch (what every event cost before the per-port cache),
//! - the exposures through the cache (what the agent does now),
//! - the underlay backend's rendering of them, in full and as a delta of the last one.
//!
//! Then the same for the NB driver over a Northbound model of the same shape (routers whose
//! gateway port is hosted here, their FIPs and tenant VMs), a provider VM created and bound
//! here per event.
//!
//! Then the EVPN driver (`ovn_evpn_driver`) and the vrf rendering over the SB model with each
//! router's gateway and tenant subnet in a VPN of its own (VNI 1000 + r), as
//! `sb_bgp_bench.sh --busy ... --evpn` loads: its tenant VMs are what this chassis exposes (on
//! `lo-<vni>`); a tenant VM of router 0 is bound per event.
//!
//! Then the `ovn` exposing method's rendering (its local NB rows and the announced set, with
//! the underlay rendering of that set as the backend composes them), in full and as a delta,
//! over N provider VMs with MACs in the global scope; one more is exposed per event.
//!
//! Then, with `l2` first (that section only, EXPOSURES being the routers of the cloud, default
//! 1000 10000): the stretched-L2 driver over a cloud of R routers, each gateway on the one
//! provider network (its network announced on-link once, every later gateway's a clash-free
//! repeat) with one tenant subnet; a router port with a new subnet is added to a router per
//! event: the routes from scratch, through the cache, and the underlay rendering as a delta.
//!
//! Then, with `layout` first (that section only), the drivers' layout alone: one IP put in the
//! middle of a root of 1k, 10k and 30k IPs (a router's FIPs) and taken out again; and the SB
//! driver through its cache with one router of that many FIPs here, one FIP added per event.
//!
//! Run: `cargo run --release --example busy_gateway_pipeline [ovn|l2|layout|evpn] [EXPOSURES...]`
//! (default 1000 10000 30000; `ovn`, `l2`, `layout` or `evpn` first: that section only;
//! `PIPELINE_EVENTS` events per size, 31 by default; `PIPELINE_CACHED_ONLY=1`: the SB, NB and
//! EVPN sections without their checks from scratch, which cool the caches, see [`checked`];
//! `PIPELINE_COLD_MB=N`: N MiB written before each of their events, see [`cool_caches`]).

// A benchmark runs on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

/// The agent's allocator, so that what is timed allocates as the agent does (glibc malloc
/// made the stages' many small allocations look several times dearer in this benchmark).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: ovn_bgp_agent::alloc::AgentAllocator = ovn_bgp_agent::alloc::AgentAllocator;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ovn_bgp_agent::backends::underlay::incremental::IncrementalRender;
use ovn_bgp_agent::backends::underlay::render::{
    Facts, NicKind, UnderlaySettings, VrfKind, render,
};
use ovn_bgp_agent::drivers::nb_bgp::compute as nb;
use ovn_bgp_agent::drivers::sb_bgp::compute::{
    ExposureCache, LocalChassis, TenantOptions, compute,
};
use ovn_bgp_agent::ovn::nb::model::{
    DNAT_AND_SNAT, LOCALNET, LogicalRouter, LogicalSwitch, Lrp, Lsp, Nat, NbGlobal, NbModel,
};
use ovn_bgp_agent::ovn::sb::model::{PortBinding, SbModel};
use ovn_bgp_agent::types::InterfaceName;

const HERE: &str = "chassis-here";
const PER_ROUTER: usize = 500;
/// Whether each event's cached result is checked against a computation (and rendering) from
/// scratch, as by default. Those run just before the timed path and take 100-500 times as
/// long, so the timed path starts with caches the check has filled with other data:
/// `PIPELINE_CACHED_ONLY=1` leaves them out (their columns then read 0), as in the agent,
/// where nothing of the kind runs before an event (its other work, and the other processes
/// between events, still cool the caches).
fn checked() -> bool {
    std::env::var_os("PIPELINE_CACHED_ONLY").is_none()
}

/// With `PIPELINE_COLD_MB=N`, before each event: N MiB written, a line at a time, so that the
/// timed path starts with caches holding other data, as the agent's events do (between two
/// events of a busy gateway, ovs-vswitchd, FRR, the OVSDB servers and the agent's other work
/// run on the same cores). Without it (and with `PIPELINE_CACHED_ONLY=1`) the timed path runs
/// with the caches it warmed at the last event.
fn cool_caches() {
    let Some(mib) = std::env::var("PIPELINE_COLD_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return;
    };
    let mut other = vec![0u8; mib << 20];
    for (i, b) in other.iter_mut().enumerate().step_by(64) {
        *b = i as u8;
    }
    std::hint::black_box(&other);
}

/// Events per size: `PIPELINE_EVENTS` (more for a profile), else 31.
fn events() -> usize {
    std::env::var("PIPELINE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(31)
}

fn port(uuid: String, name: String, kind: &str, dp: &str, mac: Vec<String>) -> PortBinding {
    PortBinding {
        uuid,
        logical_port: name,
        port_type: kind.into(),
        datapath: dp.into(),
        mac,
        up: Some(true),
        ..Default::default()
    }
}

fn ip(base: [u8; 2], i: usize) -> String {
    format!(
        "{}.{}.{}.{}",
        base[0],
        base[1] as usize + i / 65536,
        (i / 256) % 256,
        i % 256
    )
}

fn busy_model(exposures: usize) -> SbModel {
    let mut m = SbModel::default();
    m.upsert_chassis(HERE.into(), "here".into());
    let mut ln = port("ln".into(), "provnet".into(), "localnet", "dp-prov", vec![]);
    ln.options.insert("network_name".into(), "public".into());
    m.upsert_port(ln);
    for r in 0..exposures.div_ceil(2 * PER_ROUTER) {
        let rdp = format!("dp-r{r}");
        let tdp = format!("dp-t{r}");
        let gw = ip([172, 24], 1 + r);
        let mut cr = port(
            format!("cr-{r}"),
            format!("cr-lrp-gw{r}"),
            "chassisredirect",
            &rdp,
            vec![format!("fa:16:3e:00:{:02x}:01 {gw}/16", r % 256)],
        );
        cr.chassis = Some(HERE.into());
        m.upsert_port(cr);
        m.upsert_port(port(
            format!("pgw-{r}"),
            format!("gw{r}"),
            "patch",
            "dp-prov",
            vec![],
        ));
        let fips: Vec<String> = (0..PER_ROUTER)
            .map(|f| ip([172, 25], r * PER_ROUTER + f))
            .collect();
        let mut nat = port(
            format!("nat-{r}"),
            format!("natp{r}"),
            "patch",
            "dp-prov",
            vec![],
        );
        nat.nat_addresses = vec![format!(
            "fa:16:3e:01:{:02x}:01 {} is_chassis_resident(\"cr-lrp-gw{r}\")",
            r % 256,
            fips.join(" ")
        )];
        m.upsert_port(nat);
        let mut lrp = port(
            format!("lrp-{r}"),
            format!("lrp-if{r}"),
            "patch",
            &rdp,
            vec![format!(
                "fa:16:3e:02:{:02x}:01 10.{}.{}.1/22",
                r % 256,
                200 + r / 64,
                (r % 64) * 4
            )],
        );
        lrp.options.insert("peer".into(), format!("ls-if{r}"));
        m.upsert_port(lrp);
        m.upsert_port(port(
            format!("ls-{r}"),
            format!("ls-if{r}"),
            "patch",
            &tdp,
            vec![],
        ));
        for v in 0..PER_ROUTER {
            let mut vm = port(
                format!("tvm-{r}-{v}"),
                format!("tvm-{r}-{v}"),
                "",
                &tdp,
                vec![tenant_vm_address(r, v)],
            );
            vm.chassis = Some("elsewhere".into());
            m.upsert_port(vm);
        }
    }
    m
}

/// MAC and IP of tenant VM `v` of router `r` (inside the router's /22).
fn tenant_vm_address(r: usize, v: usize) -> String {
    format!(
        "fa:16:3e:03:{:02x}:{:02x} 10.{}.{}.{}",
        (v / 256) % 256,
        v % 256,
        200 + r / 64,
        (r % 64) * 4 + (v + 2) / 256,
        (v + 2) % 256
    )
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let sizes = sizes();
    if std::env::args().nth(1).as_deref() == Some("ovn") {
        ovn_events(&sizes);
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("evpn") {
        evpn_events(&sizes);
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("layout") {
        layout_events(&sizes);
        fip_events(&sizes);
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("l2") {
        let routers = if std::env::args().nth(2).is_some() {
            sizes
        } else {
            vec![1000, 10_000]
        };
        stretched_l2_events(&routers);
        return;
    }
    let local = LocalChassis {
        name: "here".into(),
        bridge_mappings: vec![("public".into(), "br-ex".into())],
    };
    let tenant = TenantOptions {
        expose_tenant_networks: true,
        ..Default::default()
    };
    let bridge = InterfaceName::new("br-ex").unwrap();
    let settings = UnderlaySettings {
        bgp_nic: InterfaceName::new("bgp-nic").unwrap(),
        bgp_vrf: InterfaceName::new("bgp-vrf").unwrap(),
        vrf_table: 10,
        vrf_kind: VrfKind::Vrf,
        nic_kind: NicKind::Dummy,
        rule_priority: 32000,
    };
    let mut facts = Facts::default();
    facts.tables.insert(bridge.clone(), 200);
    facts
        .bridge_macs
        .insert(bridge, "aa:aa:aa:aa:aa:01".parse().unwrap());
    println!(
        "| exposures here | from scratch (ms) | cached (ms) | roots recomputed | underlay render (ms) | render as a delta (ms) |"
    );
    println!("|---|---|---|---|---|---|");
    for &n in &sizes {
        let mut model = busy_model(n);
        let mut cache = ExposureCache::default();
        let first = cache.compute(&model, &local, &tenant);
        let (mut scratch, mut cached, mut rendered) = (Vec::new(), Vec::new(), Vec::new());
        let mut incremental = IncrementalRender::default();
        incremental.render(&settings, &facts, &Arc::new(first.clone()));
        let mut delta = Vec::new();
        let mut recomputed = 0;
        for e in 0..events() {
            let mut vm = port(
                format!("pvm-{e}"),
                format!("pvm-{e}"),
                "",
                "dp-prov",
                vec![format!(
                    "fa:16:3e:04:00:{:02x} {}",
                    e % 256,
                    ip([172, 30], e)
                )],
            );
            vm.chassis = Some(HERE.into());
            model.upsert_port(vm);
            let check = checked();
            cool_caches();
            let t = Instant::now();
            let fresh = check.then(|| compute(&model, &local, &tenant));
            scratch.push(t.elapsed());
            let t = Instant::now();
            let set = cache.compute(&model, &local, &tenant);
            cached.push(t.elapsed());
            recomputed = cache.last_stats().recomputed;
            if let Some(fresh) = fresh {
                assert_eq!(set, fresh);
            }
            let t = Instant::now();
            let out = check.then(|| render(&settings, &facts, &set));
            rendered.push(t.elapsed());
            let shared = Arc::new(set);
            let t = Instant::now();
            let as_delta = incremental.render(&settings, &facts, &shared);
            delta.push(t.elapsed());
            assert!(!incremental.stats().full);
            if let Some(out) = out {
                assert!(out.system.addresses.len() > shared.global().ips.len() / 2);
                assert_eq!(as_delta, out);
            }
        }
        println!(
            "| {} | {:.2} | {:.2} | {} of {} | {:.2} | {:.2} |",
            first.global().ips.len(),
            median(scratch),
            median(cached),
            recomputed,
            cache.last_stats().roots,
            median(rendered),
            median(delta)
        );
    }
    nb_events(&sizes);
    evpn_events(&sizes);
    ovn_events(&sizes);
    layout_events(&sizes);
    fip_events(&sizes);
}

/// The SB driver through its cache, one router hosted here with N centralized FIPs (the
/// issue's busy gateway), one FIP added to it per event: the router's root is computed again
/// with all its FIPs, then laid out (its IPs compared with the last ones, equal but new).
fn fip_events(sizes: &[usize]) {
    let local = LocalChassis {
        name: "here".into(),
        bridge_mappings: vec![("public".into(), "br-ex".into())],
    };
    let tenant = TenantOptions::default();
    println!();
    println!(
        "| SB: FIPs of one router here | one FIP added: the row into the model (ms) | cached computation (ms) | roots recomputed |"
    );
    println!("|---|---|---|---|");
    for &n in sizes {
        let mut model = busy_model(2 * PER_ROUTER);
        let mut fips: Vec<String> = (0..n).map(|f| ip([172, 25], f)).collect();
        let nat = |fips: &[String]| {
            let mut nat = port("nat-0".into(), "natp0".into(), "patch", "dp-prov", vec![]);
            nat.nat_addresses = vec![format!(
                "fa:16:3e:01:00:01 {} is_chassis_resident(\"cr-lrp-gw0\")",
                fips.join(" ")
            )];
            nat
        };
        model.upsert_port(nat(&fips));
        let mut cache = ExposureCache::default();
        let first = cache.compute(&model, &local, &tenant);
        assert!(first.global().ips.len() > n);
        let mut took = Vec::new();
        let mut upserts = Vec::new();
        let mut recomputed = 0;
        for e in 0..events() {
            fips.insert(n / 2, ip([172, 26], e));
            let row = nat(&fips);
            let t = Instant::now();
            model.upsert_port(row);
            upserts.push(t.elapsed());
            let t = Instant::now();
            let set = cache.compute(&model, &local, &tenant);
            took.push(t.elapsed());
            recomputed = cache.last_stats().recomputed;
            assert!(set.global().ips.len() > n + e);
        }
        println!(
            "| {n} | {:.3} | {:.3} | {recomputed} of {} |",
            median(upserts),
            median(took),
            cache.last_stats().roots
        );
    }
}

/// The drivers' layout alone: one root of N IPs (a router's FIPs), one IP put in its middle and
/// taken out again per event, the others kept (the same allocations).
fn layout_events(sizes: &[usize]) {
    use ovn_bgp_agent::exposure::{
        ExposedIp, ExposureKind, ExposureSet, IpLayout, RootKey, ScopeId, next_version,
    };
    struct Root;
    impl RootKey for Root {
        type Owned = u8;
        fn to_owned_key(&self) -> u8 {
            0
        }
        fn cmp_owned(&self, owned: &u8) -> std::cmp::Ordering {
            0.cmp(owned)
        }
    }
    let fip = |i: usize| {
        let ip = std::net::IpAddr::from([172, 24, (i / 256) as u8, (i % 256) as u8]);
        (
            ScopeId::Global,
            Arc::new(ExposedIp::announced(
                ip,
                ExposureKind::FloatingIp,
                format!("fip{i}"),
            )),
        )
    };
    println!();
    println!("| IpLayout: IPs in one root | one IP put in / taken out of its middle (ms) |");
    println!("|---|---|");
    for &n in sizes {
        let mut ips: Vec<_> = (0..n).map(fip).collect();
        let mut layout = IpLayout::default();
        let lay = |ips: &[(ScopeId, Arc<ExposedIp>)], layout: &mut IpLayout<u8>| {
            let mut out = ExposureSet::default();
            let t = Instant::now();
            layout.lay(
                [(Root, next_version(), ips.iter().map(|(s, e)| (*s, e)))],
                &mut out,
            );
            t.elapsed()
        };
        lay(&ips, &mut layout);
        let mut took = Vec::new();
        for e in 0..events() {
            ips.insert(n / 2, fip(n + e));
            took.push(lay(&ips, &mut layout));
            ips.remove(n / 2);
            took.push(lay(&ips, &mut layout));
        }
        println!("| {n} | {:.3} |", median(took));
    }
}

/// The `ovn` method's rendering with the underlay rendering of its announced set, one provider
/// VM with a MAC exposed per event (see the module doc).
fn ovn_events(sizes: &[usize]) {
    use ovn_bgp_agent::backends::ovn_cluster::incremental::IncrementalRender as OvnIncremental;
    use ovn_bgp_agent::backends::ovn_cluster::render::{
        BridgeFacts, ClusterFacts, ClusterSettings, Mappings, render as ovn,
    };
    use ovn_bgp_agent::exposure::{ExposedIp, ExposureKind, ExposureSet, ProviderNetwork};
    use ovn_bgp_agent::ovn::identity::ChassisIdentity;

    let settings = ClusterSettings {
        peers: vec!["100.64.1.5".parse().unwrap()],
        prefixes: vec!["172.16.0.0/12".parse().unwrap()],
        external_nics: ["eth1".to_owned()].into(),
        chassis: "bgp".to_owned(),
    };
    let identity = ChassisIdentity {
        bridge_mappings: vec![("provider".into(), "br-osp".into())],
        extra_bridge_mappings: [("bgp".to_owned(), "dcfabric:br-ex,local:br-osp".to_owned())]
            .into(),
        ..Default::default()
    };
    let mappings = Mappings::from_identity(&identity, "bgp");
    let facts = ClusterFacts {
        bridges: [(
            InterfaceName::new("br-ex").unwrap(),
            BridgeFacts {
                mac: Some("52:54:00:00:00:01".parse().unwrap()),
                addresses: vec!["100.64.1.1/24".parse().unwrap()],
                ports: ["eth1".to_owned(), "patch-dcfabric-to-br-int".to_owned()].into(),
            },
        )]
        .into(),
    };
    let kernel_settings = UnderlaySettings {
        bgp_nic: InterfaceName::new("bgp-nic").unwrap(),
        bgp_vrf: InterfaceName::new("bgp-vrf").unwrap(),
        vrf_table: 10,
        vrf_kind: VrfKind::Vrf,
        nic_kind: NicKind::Dummy,
        rule_priority: 32000,
    };
    let kernel_facts = Facts::default();
    let provider = ProviderNetwork {
        physnet: Arc::from("provider"),
        bridge: InterfaceName::new("br-osp").unwrap(),
        vlan: None,
        evpn: None,
    };
    let vm = |i: usize| {
        let addr = ip([172, 16], i).parse().unwrap();
        let mut e = ExposedIp::announced(addr, ExposureKind::ProviderPort, format!("vm-{i}"));
        e.provider = Some(provider.clone());
        e.lladdr = Some(
            format!("fa:16:3e:00:{:02x}:{:02x}", (i >> 8) % 256, i % 256)
                .parse()
                .unwrap(),
        );
        e
    };
    println!();
    println!("| ovn: exposed IPs with MACs | full render (ms) | render as a delta (ms) |");
    println!("|---|---|---|");
    for &n in sizes {
        let mut set = ExposureSet::default();
        for i in 0..n {
            set.expose_ip(vm(i));
        }
        let mut cluster = OvnIncremental::default();
        let mut kernel = IncrementalRender::default();
        let (_, announced) = cluster.render(&settings, &mappings, &facts, &Arc::new(set.clone()));
        kernel.render(&kernel_settings, &kernel_facts, &announced);
        let (mut full, mut delta) = (Vec::new(), Vec::new());
        for e in 0..events() {
            set.expose_ip(vm(n + e));
            let t = Instant::now();
            let (want, want_announced) = ovn(&settings, &mappings, &facts, &set);
            let want_kernel = render(&kernel_settings, &kernel_facts, &want_announced);
            full.push(t.elapsed());
            let shared = Arc::new(set.clone());
            let t = Instant::now();
            let (got, announced) = cluster.render(&settings, &mappings, &facts, &shared);
            let got_kernel = kernel.render(&kernel_settings, &kernel_facts, &announced);
            delta.push(t.elapsed());
            assert!(!cluster.stats().full && !kernel.stats().full);
            assert_eq!(got, want);
            assert_eq!(got_kernel, want_kernel);
        }
        println!("| {n} | {:.2} | {:.2} |", median(full), median(delta));
    }
}

/// The EVPN driver and the vrf rendering, one tenant VM bound per event (see the module doc).
fn evpn_events(sizes: &[usize]) {
    use ovn_bgp_agent::backends::vrf::incremental::IncrementalRender as VrfIncremental;
    use ovn_bgp_agent::backends::vrf::render::{Facts as VrfFacts, VrfSettings, render as vrf};
    use ovn_bgp_agent::drivers::evpn::compute::{ExposureCache as EvpnCache, compute as evpn};
    use ovn_bgp_agent::ovn::identity::ChassisIdentity;
    use ovn_bgp_agent::system::LinkKind;
    let identity = ChassisIdentity {
        system_id: "here".into(),
        bridge_mappings: vec![("public".into(), "br-ex".into())],
        ..Default::default()
    };
    let settings = VrfSettings {
        vrf_is_bridge: false,
        loopback_kind: LinkKind::Dummy,
        udp_dstport: 4789,
        delete_vrf_on_disconnect: true,
    };
    let facts = VrfFacts {
        vtep: Some("192.0.2.1".parse().unwrap()),
        ..VrfFacts::default()
    };
    println!();
    println!(
        "| EVPN: tenant VMs here | from scratch (ms) | cached (ms) | roots recomputed | vrf render (ms) | render as a delta (ms) |"
    );
    println!("|---|---|---|---|---|---|");
    for &n in sizes {
        // Twice the routers of the SB shape: EVPN exposes the VMs, not the FIPs.
        let mut model = busy_model(2 * n);
        let routers = (2 * n).div_ceil(2 * PER_ROUTER);
        for r in 0..routers {
            for (uuid, name, dp) in [
                (format!("pgw-{r}"), format!("gw{r}"), "dp-prov".to_owned()),
                (format!("ls-{r}"), format!("ls-if{r}"), format!("dp-t{r}")),
            ] {
                let mut p = port(uuid, name, "patch", &dp, vec![]);
                p.external_ids = ext(&[
                    ("neutron_bgpvpn:vni", (1000 + r).to_string()),
                    ("neutron_bgpvpn:as", "64999".into()),
                ]);
                model.upsert_port(p);
            }
        }
        let mut cache = EvpnCache::default();
        let first = cache.compute(&model, &identity);
        let mut incremental = VrfIncremental::default();
        incremental.render(&settings, &facts, &Arc::new(first.clone()));
        let (mut scratch, mut cached, mut rendered, mut delta) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut recomputed = 0;
        let mut live: std::collections::VecDeque<(String, usize)> = Default::default();
        let mut free = Vec::new();
        for e in 0..events() {
            // 500 addresses free in router 0's /22 (its VMs take 10.200.0-1.x): past them,
            // events alternate between unbinding the oldest VM bound here and binding one at its
            // address (one change per event, as a bind or an unbind is: two far apart in one
            // listing would lay out every IP between them).
            if e >= 500 && (e - 500) % 2 == 0 {
                let (name, slot) = live.pop_front().expect("500 VMs bound");
                model.remove_port(&name);
                free.push(slot);
            } else {
                let slot = free.pop().unwrap_or(e);
                let mut vm = port(
                    format!("new-{e}"),
                    format!("new-{e}"),
                    "",
                    "dp-t0",
                    vec![format!(
                        "fa:16:3e:05:{:02x}:{:02x} 10.200.{}.{}",
                        (e / 256) % 256,
                        e % 256,
                        2 + slot / 250,
                        1 + slot % 250
                    )],
                );
                vm.chassis = Some("elsewhere".into());
                model.upsert_port(vm);
                live.push_back((format!("new-{e}"), slot));
            }
            let check = checked();
            cool_caches();
            let t = Instant::now();
            let fresh = check.then(|| evpn(&model, &identity));
            scratch.push(t.elapsed());
            let t = Instant::now();
            let set = cache.compute(&model, &identity);
            cached.push(t.elapsed());
            recomputed = cache.last_stats().recomputed;
            if let Some(fresh) = fresh {
                assert_eq!(set, fresh);
            }
            let t = Instant::now();
            let out = check.then(|| vrf(&settings, &facts, &set));
            rendered.push(t.elapsed());
            let shared = Arc::new(set);
            let t = Instant::now();
            let as_delta = incremental.render(&settings, &facts, &shared);
            delta.push(t.elapsed());
            assert!(!incremental.stats().full);
            if let Some(out) = out {
                assert_eq!(as_delta, out);
            }
        }
        let vms: usize = first.scopes.values().map(|s| s.ips.len()).sum();
        println!(
            "| {} ({} VRFs) | {:.2} | {:.2} | {} of {} | {:.2} | {:.2} |",
            vms,
            first.scopes.len() - 1,
            median(scratch),
            median(cached),
            recomputed,
            cache.last_stats().roots,
            median(rendered),
            median(delta)
        );
    }
}

/// The exposure counts of the command line, by default 1k, 10k and 30k.
fn sizes() -> Vec<usize> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !matches!(a.as_str(), "ovn" | "l2" | "layout" | "evpn"))
        .map(|a| a.parse().expect("exposure counts"))
        .collect();
    if sizes.is_empty() {
        vec![1000, 10_000, 30_000]
    } else {
        sizes
    }
}

fn ext(entries: &[(&str, String)]) -> std::collections::BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The NB rows of the same busy gateway: per router a gateway port hosted here, 500
/// centralized FIPs and a tenant switch of 500 VMs (bound elsewhere) behind its interface.
fn nb_busy_model(exposures: usize) -> NbModel {
    let mut m = NbModel::default();
    m.upsert_nb_global(NbGlobal {
        uuid: "global".into(),
        external_ids: ext(&[("neutron:fip-distributed", "False".into())]),
    });
    let mut ln = Lsp {
        uuid: "ln".into(),
        name: "provnet".into(),
        port_type: LOCALNET.into(),
        ..Default::default()
    };
    ln.options.insert("network_name".into(), "public".into());
    m.upsert_lsp(ln);
    m.upsert_switch(LogicalSwitch {
        uuid: "ls-pub".into(),
        name: "neutron-pub".into(),
        ports: vec!["ln".into()],
        ..Default::default()
    });
    for r in 0..exposures.div_ceil(2 * PER_ROUTER) {
        m.upsert_lrp(Lrp {
            uuid: format!("lrp-gw{r}"),
            name: format!("lrp-gw{r}"),
            mac: format!("fa:16:3e:00:{:02x}:01", r % 256),
            networks: vec![format!("{}/16", ip([172, 24], 1 + r))],
            external_ids: ext(&[("neutron:network_name", "neutron-pub".into())]),
            status: ext(&[("hosting-chassis", HERE.into())]),
        });
        let mut nat = Vec::new();
        for f in 0..PER_ROUTER {
            let uuid = format!("nat-{r}-{f}");
            m.upsert_nat(Nat {
                uuid: uuid.clone(),
                nat_type: DNAT_AND_SNAT.into(),
                external_ip: ip([172, 25], r * PER_ROUTER + f),
                logical_ip: format!("10.{}.{}.{}", 200 + r / 64, (r % 64) * 4, 2 + f % 250),
                ..Default::default()
            });
            nat.push(uuid);
        }
        m.upsert_router(LogicalRouter {
            uuid: format!("lr-{r}"),
            name: format!("neutron-r{r}"),
            ports: vec![format!("lrp-gw{r}")],
            nat,
        });
        m.upsert_lsp(Lsp {
            uuid: format!("rif-{r}"),
            name: format!("rif-{r}"),
            port_type: "router".into(),
            up: Some(true),
            external_ids: ext(&[
                (
                    "neutron:cidrs",
                    format!("10.{}.{}.1/22", 200 + r / 64, (r % 64) * 4),
                ),
                ("neutron:device_owner", "network:router_interface".into()),
                ("neutron:device_id", format!("r{r}")),
            ]),
            ..Default::default()
        });
        let mut ports = vec![format!("rif-{r}")];
        for v in 0..PER_ROUTER {
            let uuid = format!("tvm-{r}-{v}");
            m.upsert_lsp(nb_vm(&uuid, tenant_vm_address(r, v), "elsewhere"));
            ports.push(uuid);
        }
        m.upsert_switch(LogicalSwitch {
            uuid: format!("ls-t{r}"),
            name: format!("neutron-t{r}"),
            ports,
            ..Default::default()
        });
    }
    m
}

/// A VM's port, up, requested on `host`.
fn nb_vm(uuid: &str, address: String, host: &str) -> Lsp {
    let mut vm = Lsp {
        uuid: uuid.into(),
        name: uuid.into(),
        addresses: vec![address],
        up: Some(true),
        ..Default::default()
    };
    vm.options.insert("requested-chassis".into(), host.into());
    vm
}

fn nb_events(sizes: &[usize]) {
    let local = nb::LocalChassis {
        hostname: "here".into(),
        system_id: HERE.into(),
        bridge_mappings: vec![("public".into(), "br-ex".into())],
    };
    let options = nb::NbOptions {
        tenant: TenantOptions {
            expose_tenant_networks: true,
            ..Default::default()
        },
        ..Default::default()
    };
    println!();
    println!("| NB: exposures here | from scratch (ms) | cached (ms) | roots recomputed |");
    println!("|---|---|---|---|");
    for &n in sizes {
        let mut model = nb_busy_model(n);
        let mut cache = nb::ExposureCache::default();
        let first = cache.compute(&model, &local, &options, None);
        let (mut scratch, mut cached) = (Vec::new(), Vec::new());
        let mut recomputed = 0;
        let mut provider_ports = vec!["ln".to_owned()];
        for e in 0..events() {
            let uuid = format!("pvm-{e}");
            let address = format!("fa:16:3e:04:00:{:02x} {}", e % 256, ip([172, 30], e));
            model.upsert_lsp(nb_vm(&uuid, address, "here"));
            provider_ports.push(uuid);
            model.upsert_switch(LogicalSwitch {
                uuid: "ls-pub".into(),
                name: "neutron-pub".into(),
                ports: provider_ports.clone(),
                ..Default::default()
            });
            cool_caches();
            let t = Instant::now();
            let fresh = checked().then(|| nb::compute(&model, &local, &options, None));
            scratch.push(t.elapsed());
            let t = Instant::now();
            let set = cache.compute(&model, &local, &options, None);
            cached.push(t.elapsed());
            recomputed = cache.last_stats().recomputed;
            if let Some(fresh) = fresh {
                assert_eq!(set, fresh);
            }
        }
        println!(
            "| {} | {:.2} | {:.2} | {} of {} |",
            first.global().ips.len(),
            median(scratch),
            median(cached),
            recomputed,
            cache.last_stats().roots,
        );
    }
}

/// The stretched-L2 driver over a cloud of `routers` routers and its underlay rendering, one
/// router port with a new subnet added per event (see the module doc).
fn stretched_l2_events(sizes: &[usize]) {
    use ovn_bgp_agent::drivers::stretched_l2::compute::{
        RouteCache, StretchedOptions, compute as l2,
    };
    let settings = UnderlaySettings {
        bgp_nic: InterfaceName::new("bgp-nic").unwrap(),
        bgp_vrf: InterfaceName::new("bgp-vrf").unwrap(),
        vrf_table: 10,
        vrf_kind: VrfKind::Vrf,
        nic_kind: NicKind::Dummy,
        rule_priority: 32000,
    };
    let facts = Facts::default();
    let options = StretchedOptions::default();
    println!(
        "| l2: routers in the cloud | routes | from scratch (ms) | cached (ms) | roots recomputed | route attempts decided | render as a delta (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &n in sizes {
        let mut model = SbModel::default();
        for r in 0..n {
            let dp = format!("dp-r{r}");
            let gw = format!(
                "fa:16:3e:10:{:02x}:{:02x} {}/16",
                (r >> 8) % 256,
                r % 256,
                ip([172, 24], r + 1)
            );
            model.upsert_port(port(
                format!("cr-{r}"),
                format!("cr-lrp-r{r}"),
                "chassisredirect",
                &dp,
                vec![gw],
            ));
            let sub = format!(
                "fa:16:3e:20:{:02x}:{:02x} 10.{}.{}.1/24",
                (r >> 8) % 256,
                r % 256,
                r / 256,
                r % 256
            );
            model.upsert_port(port(
                format!("lrp-{r}"),
                format!("lrp-s{r}"),
                "patch",
                &dp,
                vec![sub],
            ));
        }
        let mut cache = RouteCache::default();
        let first = cache.compute(&model, &options);
        let mut incremental = IncrementalRender::default();
        incremental.render(&settings, &facts, &Arc::new(first.clone()));
        let (mut scratch, mut cached, mut delta) = (Vec::new(), Vec::new(), Vec::new());
        let (mut recomputed, mut decided) = (0, 0);
        for e in 0..events() {
            let r = (e * 7919) % n;
            let mac = format!(
                "fa:16:3e:30:00:{:02x} 11.{}.{}.1/24",
                e % 256,
                e / 256,
                e % 256
            );
            model.upsert_port(port(
                format!("lrp-e{e}"),
                format!("lrp-e{e}"),
                "patch",
                &format!("dp-r{r}"),
                vec![mac],
            ));
            let t = Instant::now();
            let fresh = l2(&model, &options);
            scratch.push(t.elapsed());
            let t = Instant::now();
            let set = cache.compute(&model, &options);
            cached.push(t.elapsed());
            recomputed = cache.last_stats().recomputed;
            decided = cache.last_layout().attempts_decided;
            assert_eq!(set, fresh);
            let shared = Arc::new(set);
            let t = Instant::now();
            incremental.render(&settings, &facts, &shared);
            delta.push(t.elapsed());
            assert!(!incremental.stats().full);
        }
        println!(
            "| {} | {} | {:.2} | {:.2} | {} of {} | {} | {:.2} |",
            n,
            first.global().routes.len(),
            median(scratch),
            median(cached),
            recomputed,
            cache.last_stats().roots,
            decided,
            median(delta)
        );
    }
}
