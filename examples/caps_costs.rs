//! Prints what the FRR and OVS capabilities cost against real daemons it starts itself (needs
//! root, frr and openvswitch-switch): `cargo run --example caps_costs [flows]`.
//!
//! Figures: applying N cookie flows from empty (one ovs-ofctl process), a no-op reconcile,
//! recovery after the flows were wiped, removal; FRR ensure() when something must be applied
//! and when nothing changed (no vtysh process at all).

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

#[path = "../tests/frrovs_support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::frr::{
    FrrSnippet, LeakVrf, Redistribute, Vtysh, VtyshConfigurator, VtyshOptions,
};
use ovn_bgp_agent::caps::ovs::{OvsFlows, OvsOptions};
use ovn_bgp_agent::system::PortFlowSpec;
use ovn_bgp_agent::types::InterfaceName;

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);

    // --- OVS
    let node = support::OvsNode::start(&support::unique_tag());
    node.provider_bridges();
    let flows = OvsFlows::new(OvsOptions {
        vsctl_path: support::OVS_VSCTL.into(),
        ofctl_path: support::OVS_OFCTL.into(),
        rundir: node.rundir().to_path_buf(),
        timeout: Duration::from_secs(30),
        flow_check_interval: Duration::from_secs(5),
    });
    let mac = node.mac_in_use("br-ex");
    let desired: BTreeSet<PortFlowSpec> = (0..n)
        .map(|i| PortFlowSpec {
            bridge: InterfaceName::new("br-ex").unwrap(),
            in_port: "patch-provnet-x-to-br-int".to_owned(),
            cookie: 999,
            priority: 900,
            matches: format!("ip,nw_dst=10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
            actions: format!("mod_dl_dst:{mac},NORMAL"),
        })
        .collect();
    let owned = BTreeSet::from([999u64]);
    let t = Instant::now();
    let r = flows.reconcile(&desired, &owned).await;
    println!(
        "ovs: {n} flows from empty: {} (added {})",
        ms(t.elapsed()),
        r.added
    );
    let t = Instant::now();
    let r = flows.reconcile(&desired, &owned).await;
    println!(
        "ovs: no-op reconcile of {n} flows: {} (added {}, removed {})",
        ms(t.elapsed()),
        r.added,
        r.removed
    );
    node.ofctl(&["del-flows", "br-ex"]);
    let t = Instant::now();
    let r = flows.check_now().await.unwrap();
    println!(
        "ovs: check after wipe: {} (reinstalled {})",
        ms(t.elapsed()),
        r.added
    );
    let t = Instant::now();
    let r = flows.reconcile(&BTreeSet::new(), &owned).await;
    println!(
        "ovs: remove {n} flows: {} (removed {})",
        ms(t.elapsed()),
        r.removed
    );

    // --- FRR
    let dir = support::shared_tempdir();
    let ns = support::Netns::new(format!("{}-c", support::unique_tag()));
    let frr = support::FrrNode::start(
        &ns,
        dir.path().join("frr"),
        "frr defaults traditional\nrouter bgp 64999\n",
    );
    let configurator = VtyshConfigurator::new(Vtysh::new(VtyshOptions {
        vtysh_path: support::VTYSH.into(),
        vty_socket_dir: frr.dir.clone(),
        timeout: Duration::from_secs(20),
    }));
    let leak = LeakVrf {
        bgp_as: "64999".parse().unwrap(),
        vrf_name: InterfaceName::new("bgp-vrf").unwrap(),
        router_id: "172.24.4.1".parse().unwrap(),
        redistribute: [Redistribute::Connected, Redistribute::Kernel].into(),
    }
    .render()
    .unwrap();
    let snippets = vec![leak];
    let t = Instant::now();
    let applied = configurator.ensure_applied(&snippets).await.unwrap();
    println!(
        "frr: ensure() applying {applied} snippet: {}",
        ms(t.elapsed())
    );
    let rounds = 100;
    let t = Instant::now();
    for _ in 0..rounds {
        assert_eq!(configurator.ensure_applied(&snippets).await.unwrap(), 0);
    }
    println!(
        "frr: ensure() with nothing to do: {:.1} µs per call (no vtysh run)",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
    );
    drop(frr);
}
