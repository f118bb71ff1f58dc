//! FRR capability against real FRR: two instances (zebra + bgpd as user frr) in two network
//! namespaces joined by a veth pair, eBGP between them. Each test owns its instances, config
//! dirs, pid files and vty socket dirs.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod frrovs_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use frrovs_support::{FrrNode, Netns, require, shared_tempdir, unique_tag, wait_for};
use ovn_bgp_agent::caps::FrrConfigurator;
use ovn_bgp_agent::caps::frr::vtysh::BgpRib;
use ovn_bgp_agent::caps::frr::{
    AddVrf, Asn, ConfigureNd, DelVrf, FrrError, FrrObject, FrrObjectKey, FrrObjects, FrrSnippet,
    LeakVrf, NicRedistribute, Redistribute, RouteDistinguisher, RouteTarget, ShowQuery, Vni, Vtysh,
    VtyshConfigurator, VtyshOptions, default_redistribute, leak_vrf_from_config,
};
use ovn_bgp_agent::system::{ChangeReport, ObjectMap};
use ovn_bgp_agent::types::InterfaceName;

const CHASSIS_AS: &str = "64999";
const PEER_AS: &str = "65000";

fn vtysh_for(dir: &std::path::Path) -> Vtysh {
    Vtysh::new(VtyshOptions {
        vtysh_path: frrovs_support::VTYSH.into(),
        vty_socket_dir: dir.to_path_buf(),
        timeout: Duration::from_secs(20),
    })
}

fn frr_conf(
    hostname: &str,
    asn: &str,
    router_id: &str,
    peer: &str,
    peer_as: Option<&str>,
) -> String {
    let mut c = format!(
        "frr defaults traditional\nhostname {hostname}\nrouter bgp {asn}\n bgp router-id {router_id}\n no bgp ebgp-requires-policy\n"
    );
    if let Some(peer_as) = peer_as {
        c.push_str(&format!(
            " neighbor {peer} remote-as {peer_as}\n neighbor {peer} timers connect 1\n neighbor {peer} advertisement-interval 0\n"
        ));
    }
    c
}

/// Chassis and peer FRR, eBGP over a veth pair; the chassis netns has an ifb `bgp-nic`.
struct Lab {
    // Drop order = declaration order: daemons first, then their netns, then their files.
    chassis: FrrNode,
    peer: FrrNode,
    chassis_ns: Netns,
    _peer_ns: Netns,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn start(with_peer_session: bool) -> Self {
        require(&[
            frrovs_support::ZEBRA,
            frrovs_support::BGPD,
            frrovs_support::VTYSH,
        ]);
        let tag = unique_tag();
        let dir = shared_tempdir();
        let chassis_ns = Netns::new(format!("{tag}-c"));
        let peer_ns = Netns::new(format!("{tag}-t"));
        let (vc, vp) = (format!("{tag}c"), format!("{tag}p"));
        frrovs_support::run(
            "ip",
            &[
                "link",
                "add",
                &vc,
                "netns",
                &chassis_ns.name,
                "type",
                "veth",
                "peer",
                &vp,
                "netns",
                &peer_ns.name,
            ],
        );
        chassis_ns.ip(&["addr", "add", "100.64.0.1/30", "dev", &vc]);
        peer_ns.ip(&["addr", "add", "100.64.0.2/30", "dev", &vp]);
        chassis_ns.ip(&["link", "set", &vc, "up"]);
        peer_ns.ip(&["link", "set", &vp, "up"]);
        chassis_ns.ip(&["link", "add", "bgp-nic", "type", "ifb"]);
        chassis_ns.ip(&["link", "set", "bgp-nic", "up"]);
        let peer_as = with_peer_session.then_some(PEER_AS);
        let chassis = FrrNode::start(
            &chassis_ns,
            dir.path().join("chassis"),
            &frr_conf("chassis", CHASSIS_AS, "100.64.0.1", "100.64.0.2", peer_as),
        );
        let peer = FrrNode::start(
            &peer_ns,
            dir.path().join("peer"),
            &frr_conf(
                "peer",
                PEER_AS,
                "100.64.0.2",
                "100.64.0.1",
                with_peer_session.then_some(CHASSIS_AS),
            ),
        );
        Self {
            chassis,
            peer,
            chassis_ns,
            _peer_ns: peer_ns,
            _dir: dir,
        }
    }

    fn configurator(&self) -> VtyshConfigurator {
        VtyshConfigurator::new(vtysh_for(&self.chassis.dir))
    }
}

fn asn() -> Asn {
    CHASSIS_AS.parse().unwrap()
}

fn bgp_vrf() -> InterfaceName {
    InterfaceName::new("bgp-vrf").unwrap()
}

fn leak(router_id: &str) -> LeakVrf {
    LeakVrf {
        bgp_as: asn(),
        vrf_name: bgp_vrf(),
        router_id: router_id.parse().unwrap(),
        redistribute: [Redistribute::Connected].into(),
    }
}

fn nic_redistribute() -> NicRedistribute {
    NicRedistribute {
        bgp_as: asn(),
        nic: InterfaceName::new("bgp-nic").unwrap(),
        redistribute: [Redistribute::Connected].into(),
    }
}

/// Normalised running-config: lines trimmed, so nesting is compared by order only.
fn config_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// `needles` appear in `haystack` in this order (not necessarily adjacent).
fn in_order(haystack: &[String], needles: &[&str]) -> bool {
    let mut it = haystack.iter();
    needles.iter().all(|n| it.any(|h| h == n))
}

fn assert_leak_applied(running: &str, router_id: &str) {
    let lines = config_lines(running);
    assert!(
        in_order(
            &lines,
            &[
                "router bgp 64999",
                "address-family ipv4 unicast",
                "import vrf bgp-vrf",
                "exit-address-family",
                "address-family ipv6 unicast",
                "import vrf bgp-vrf",
            ]
        ),
        "{running}"
    );
    assert!(
        in_order(
            &lines,
            &[
                "router bgp 64999 vrf bgp-vrf",
                &format!("bgp router-id {router_id}"),
                "address-family ipv4 unicast",
                "redistribute connected",
                "exit-address-family",
                "address-family ipv6 unicast",
                "redistribute connected",
            ]
        ),
        "{running}"
    );
}

fn peer_routes(peer: &Vtysh) -> Option<Vec<String>> {
    let rt = tokio::runtime::Handle::current();
    let rib: BgpRib =
        tokio::task::block_in_place(|| rt.block_on(peer.show_json(&ShowQuery::IpBgpJson))).ok()?;
    Some(rib.routes.keys().cloned().collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nic_address_is_learned_by_the_peer_and_withdrawn() {
    let lab = Lab::start(true);
    let chassis_vtysh = vtysh_for(&lab.chassis.dir);
    let peer_vtysh = vtysh_for(&lab.peer.dir);

    // A3: router id discovered from FRR when bgp_router_id is unset.
    let router_id = chassis_vtysh.bgp_router_id().await.unwrap();
    assert_eq!(router_id.to_string(), "100.64.0.1");

    // The same through the config path: `bgp_router_id` unset → FRR's router id.
    let config = ovn_bgp_agent::config::AgentConfig::default();
    assert_eq!(config.default.bgp_router_id, None);
    let leak_from_config = leak_vrf_from_config(
        &config.default,
        default_redistribute(&config.default),
        &chassis_vtysh,
    )
    .await
    .unwrap();
    assert_eq!(leak_from_config, leak(&router_id.to_string()));
    // Golden: upstream's LEAK_VRF text without the blank lines its Jinja tags left.
    assert_eq!(
        leak_from_config.render().unwrap(),
        "router bgp 64999\n  address-family ipv4 unicast\n    import vrf bgp-vrf\n  exit-address-family\n\n  \
         address-family ipv6 unicast\n    import vrf bgp-vrf\n  exit-address-family\n\n\
         router bgp 64999 vrf bgp-vrf\n  bgp router-id 100.64.0.1\n  address-family ipv4 unicast\n    \
         redistribute connected\n  exit-address-family\n\n  address-family ipv6 unicast\n    \
         redistribute connected\n  exit-address-family\n\n"
    );

    let configurator = lab.configurator();
    let snippets = vec![
        leak_from_config.render().unwrap(),
        nic_redistribute().render().unwrap(),
    ];
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 2);
    // Accepted by real vtysh although the kernel has no VRF named bgp-vrf.
    assert_leak_applied(&lab.chassis.running_config(), "100.64.0.1");
    // Idempotent and cheap: nothing changed, FRR did not restart → no vtysh run.
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 0);

    lab.chassis_ns
        .ip(&["addr", "add", "192.0.2.10/32", "dev", "bgp-nic"]);
    wait_for("peer learns 192.0.2.10/32", Duration::from_secs(30), || {
        peer_routes(&peer_vtysh)?
            .contains(&"192.0.2.10/32".to_owned())
            .then_some(())
    });
    // Only the NIC's addresses are exported, not the transfer network.
    assert!(
        !peer_routes(&peer_vtysh)
            .unwrap()
            .contains(&"100.64.0.0/30".to_owned())
    );

    lab.chassis_ns
        .ip(&["addr", "del", "192.0.2.10/32", "dev", "bgp-nic"]);
    wait_for(
        "peer withdraws 192.0.2.10/32",
        Duration::from_secs(30),
        || (!peer_routes(&peer_vtysh)?.contains(&"192.0.2.10/32".to_owned())).then_some(()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frr_restart_is_detected_and_config_reapplied() {
    let mut lab = Lab::start(false);
    let configurator = lab.configurator();
    let snippets = vec![leak("172.24.4.1").render().unwrap()];
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 1);
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 0);
    assert_leak_applied(&lab.chassis.running_config(), "172.24.4.1");

    // A4: FRR killed and started again from its own config: the agent's part is gone...
    lab.chassis.restart();
    assert!(
        !lab.chassis.running_config().contains("import vrf bgp-vrf"),
        "restart should have wiped the applied config"
    );
    // ...and the very next ensure (the 15 s FRR loop) notices and re-applies.
    let start = Instant::now();
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 1);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_leak_applied(&lab.chassis.running_config(), "172.24.4.1");
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 0);

    // FRR down: an error naming vtysh, and once it is back the config is applied again.
    lab.chassis.kill();
    // The stale sockets left by SIGKILL do not fool the check (the pid files name dead
    // processes): the apply is attempted and vtysh's failure is reported.
    let err = configurator.ensure(&snippets).await.unwrap_err();
    assert!(err.to_string().contains("vtysh"), "{err}");
    lab.chassis.restart();
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 1);
    assert_leak_applied(&lab.chassis.running_config(), "172.24.4.1");

    // The watch (frr_reconcile_interval, here 1 s) repairs a restart without any other call.
    let configurator = std::sync::Arc::new(configurator);
    let watch = configurator
        .clone()
        .spawn_restart_watch(Duration::from_secs(1));
    lab.chassis.restart();
    wait_for(
        "leak re-applied by the watch",
        Duration::from_secs(10),
        || {
            lab.chassis
                .try_running_config()?
                .contains("import vrf bgp-vrf")
                .then_some(())
        },
    );
    assert_leak_applied(&lab.chassis.running_config(), "172.24.4.1");
    watch.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evpn_vrf_template_is_accepted_by_vtysh() {
    let lab = Lab::start(false);
    let vni = Vni::new(1001).unwrap();
    let add = AddVrf {
        bgp_as: asn(),
        vrf_name: AddVrf::default_vrf_name(vni),
        vni,
        rd: RouteDistinguisher::explicit_or_vtep(None, Some("10.0.0.1".parse().unwrap()), vni)
            .unwrap(),
        route_targets: vec!["64999:1001".parse::<RouteTarget>().unwrap()],
        export_targets: vec![],
        import_targets: vec![],
        redistribute: [Redistribute::Kernel, Redistribute::Connected].into(),
    };
    let configurator = lab.configurator();
    assert_eq!(
        configurator.ensure(&[add.render().unwrap()]).await.unwrap(),
        1
    );
    let running = lab.chassis.running_config();
    let lines = config_lines(&running);
    assert!(
        in_order(
            &lines,
            &[
                "vrf vrf-1001",
                "vni 1001",
                "router bgp 64999 vrf vrf-1001",
                "address-family l2vpn evpn",
                "rd 10.0.0.1:1001"
            ]
        ),
        "{running}"
    );
    assert!(
        running.contains("route-target import 64999:1001"),
        "{running}"
    );

    // DEL_VRF removes it; removing again is a no-op, not vtysh's "Can't find BGP instance".
    let del = DelVrf::new(asn(), AddVrf::default_vrf_name(vni))
        .render()
        .unwrap();
    assert_eq!(configurator.ensure(&[]).await.unwrap(), 0);
    assert!(configurator.remove(&del).await.unwrap() >= 2);
    let running = lab.chassis.running_config();
    assert!(!running.contains("vrf-1001"), "{running}");
    assert_eq!(configurator.remove(&del).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_values_are_rejected_and_nothing_is_applied() {
    let lab = Lab::start(false);
    let before = lab.chassis.running_config();

    // Values that could carry commands or are out of range never become template input.
    assert!(InterfaceName::new("bgp-nic\nno router bgp 64999").is_err());
    assert!(InterfaceName::new("bgp-nic;reboot").is_err());
    assert!(InterfaceName::new("0123456789abcdef").is_err());
    assert!(Vni::new(0).is_err());
    assert!(Vni::new(16_777_216).is_err());
    assert!("None:1001".parse::<RouteDistinguisher>().is_err());
    assert!(
        "64999:1001\nno router bgp 64999"
            .parse::<RouteTarget>()
            .is_err()
    );
    assert!("64999 \n".parse::<Asn>().is_err());
    // Upstream's `rd None:<vni>`: no RD and no VTEP is a typed error, not a rendering.
    assert!(RouteDistinguisher::explicit_or_vtep(None, None, Vni::new(5).unwrap()).is_err());

    // A snippet smuggling a control character is refused before vtysh runs.
    let configurator = lab.configurator();
    let err = configurator
        .ensure_applied(&["router bgp 64999\r\n no bgp default ipv4-unicast\n".to_owned()])
        .await
        .unwrap_err();
    assert!(matches!(err, FrrError::UnsafeSnippet { .. }), "{err}");
    assert_eq!(lab.chassis.running_config(), before);

    // vtysh's own complaint and exit status are carried in the error.
    let err = configurator
        .ensure_applied(&["router bgp 64999\n  this is not a command\n".to_owned()])
        .await
        .unwrap_err();
    match &err {
        FrrError::VtyshFailed {
            output,
            status,
            command,
        } => {
            assert!(output.contains("Unknown command"), "{err}");
            assert!(!status.success());
            assert!(command.contains("--vty_socket"), "{command}");
        }
        other => panic!("expected VtyshFailed, got {other}"),
    }
    // A failed apply is retried next time, not remembered as applied.
    assert!(
        configurator
            .ensure_applied(&["router bgp 64999\n  this is not a command\n".to_owned()])
            .await
            .is_err()
    );

    // Several snippets go in one run; when FRR refuses a line of one, the error names that
    // line and the other snippets are applied all the same (the next call tries them all
    // again).
    let snippets = [
        leak("172.24.4.9").render().unwrap(),
        "router bgp 64999\n  this is not a command either\n".to_owned(),
        nic_redistribute().render().unwrap(),
    ];
    let err = configurator.ensure_applied(&snippets).await.unwrap_err();
    match &err {
        FrrError::VtyshFailed { output, .. } => {
            assert!(output.contains("this is not a command either"), "{err}");
        }
        other => panic!("expected VtyshFailed, got {other}"),
    }
    let running = lab.chassis.running_config();
    assert_leak_applied(&running, "172.24.4.9");
    assert!(
        has_line(&running, "redistribute connected route-map oba-bgp-nic"),
        "{running}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_vtysh_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let marker: PathBuf = dir.path().join("sleeper.pid");
    let fake = dir.path().join("vtysh");
    frrovs_support::write_executable(
        &fake,
        &format!(
            "#!/bin/sh\nsleep 60 &\necho $! > {}\nwait\n",
            marker.display()
        ),
    );
    let vty_dir = dir.path().join("vty");
    std::fs::create_dir(&vty_dir).unwrap();
    let configurator = VtyshConfigurator::new(Vtysh::new(VtyshOptions {
        vtysh_path: fake,
        vty_socket_dir: vty_dir,
        timeout: Duration::from_secs(1),
    }));
    let start = Instant::now();
    let err = configurator
        .ensure_applied(&[leak("172.24.4.1").render().unwrap()])
        .await
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert!(err.to_string().contains("did not finish within"), "{err}");
    // The script's own child was killed with it (process group), not left running.
    let pid = std::fs::read_to_string(&marker).unwrap();
    wait_for("sleeper killed", Duration::from_secs(5), || {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z")).then_some(())
    });
}

fn evpn_vrf(vni: u32) -> AddVrf {
    let vni = Vni::new(vni).unwrap();
    AddVrf {
        bgp_as: asn(),
        vrf_name: AddVrf::default_vrf_name(vni),
        vni,
        rd: RouteDistinguisher::from_vtep("10.0.0.1".parse().unwrap(), vni).unwrap(),
        route_targets: vec![format!("64999:{vni}").parse().unwrap()],
        export_targets: vec![],
        import_targets: vec![],
        redistribute: [Redistribute::Connected, Redistribute::Kernel].into(),
    }
}

fn evpn_objects(vnis: &[u32]) -> ObjectMap<FrrObjectKey, FrrObject> {
    vnis.iter()
        .map(|vni| FrrObject::evpn_vrf(&evpn_vrf(*vni)).unwrap())
        .collect()
}

/// VRF names with a BGP instance (`show bgp vrf all json`: one key per instance).
fn bgp_vrfs(node: &FrrNode) -> Vec<String> {
    let json: serde_json::Value =
        serde_json::from_str(&node.vtysh_cmd("show bgp vrf all json")).unwrap();
    json.as_object().unwrap().keys().cloned().collect()
}

fn has_line(running: &str, line: &str) -> bool {
    running.lines().any(|l| l.trim() == line)
}

fn count(report: &ChangeReport, which: &str) -> usize {
    let map = match which {
        "added" => &report.added,
        "changed" => &report.changed,
        _ => &report.removed,
    };
    map.get("frr_objects").copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frr_objects_are_diffed_and_only_the_agents_are_removed() {
    let mut lab = Lab::start(false);
    let state_dir = tempfile::tempdir().unwrap();
    let state_file = state_dir.path().join("lib/frr-objects.json");
    let configurator = Arc::new(lab.configurator());
    let objects = FrrObjects::new(configurator.clone(), &state_file);

    // An operator's own EVPN VRF, configured by hand: never the agent's to remove.
    let socket_dir = lab.chassis.dir.to_str().unwrap().to_owned();
    frrovs_support::run(
        frrovs_support::VTYSH,
        &[
            "--vty_socket",
            &socket_dir,
            "-c",
            "configure terminal",
            "-c",
            "vrf vrf-300",
            "-c",
            "vni 300",
            "-c",
            "exit-vrf",
            "-c",
            "router bgp 64999 vrf vrf-300",
        ],
    );

    let report = objects.reconcile(&evpn_objects(&[100, 200])).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "added"), 2, "{report:?}");
    let running = lab.chassis.running_config();
    for line in [
        "vrf vrf-100",
        "vni 100",
        "vrf vrf-200",
        "vni 200",
        "router bgp 64999 vrf vrf-100",
        "router bgp 64999 vrf vrf-200",
        "rd 10.0.0.1:200",
    ] {
        assert!(has_line(&running, line), "{line} missing:\n{running}");
    }
    let vrfs = bgp_vrfs(&lab.chassis);
    for vrf in ["vrf-100", "vrf-200", "vrf-300"] {
        assert!(vrfs.contains(&vrf.to_owned()), "{vrfs:?}");
    }
    // Ownership is on disk, private, and lists only the agent's objects.
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(&state_file).unwrap();
        assert!(
            text.contains("vrf vrf-100") && text.contains("vrf vrf-200"),
            "{text}"
        );
        assert!(!text.contains("vrf-300"), "{text}");
    }

    // Nothing changed: no vtysh run, nothing reported.
    let report = objects.reconcile(&evpn_objects(&[100, 200])).await;
    assert!(report.is_noop(), "{report:?}");

    // vrf-200 no longer desired: its stanza goes, the hand-made vrf-300 stays.
    let report = objects.reconcile(&evpn_objects(&[100])).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "removed"), 1, "{report:?}");
    assert_eq!(report.total_changes(), 1, "{report:?}");
    let running = lab.chassis.running_config();
    assert!(!running.contains("vrf-200"), "{running}");
    assert!(has_line(&running, "vrf vrf-100"), "{running}");
    assert!(has_line(&running, "vrf vrf-300"), "{running}");
    assert!(
        has_line(&running, "router bgp 64999 vrf vrf-300"),
        "{running}"
    );
    let vrfs = bgp_vrfs(&lab.chassis);
    assert!(!vrfs.contains(&"vrf-200".to_owned()), "{vrfs:?}");

    // An agent restart: a new reconciler reading the same file still removes what the old one
    // created, and still leaves vrf-300 alone.
    drop(objects);
    let objects = FrrObjects::new(configurator.clone(), &state_file);
    assert_eq!(
        objects.owned_keys().await,
        [FrrObjectKey::vrf(&AddVrf::default_vrf_name(
            Vni::new(100).unwrap()
        ))]
    );
    let report = objects.reconcile(&ObjectMap::new()).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "removed"), 1, "{report:?}");
    let running = lab.chassis.running_config();
    assert!(!running.contains("vrf-100"), "{running}");
    assert!(has_line(&running, "vrf vrf-300"), "{running}");
    assert!(objects.owned_keys().await.is_empty());
    assert!(objects.reconcile(&ObjectMap::new()).await.is_noop());

    // FRR restarted from its own file: the agent's objects are gone and re-applied at the next
    // reconcile (the vty-socket fingerprint changed), then it is quiet again.
    let report = objects.reconcile(&evpn_objects(&[100])).await;
    assert_eq!(count(&report, "added"), 1, "{report:?}");
    lab.chassis.restart();
    assert!(!lab.chassis.running_config().contains("vrf-100"));
    let report = objects.reconcile(&evpn_objects(&[100])).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "changed"), 1, "{report:?}");
    assert!(has_line(&lab.chassis.running_config(), "vrf vrf-100"));
    assert!(objects.reconcile(&evpn_objects(&[100])).await.is_noop());

    // An agent restart while FRR has the object exactly: nothing is sent again (re-sending an
    // EVPN VRF makes bgpd re-announce its type-5 routes to the fabric).
    drop(objects);
    let objects = FrrObjects::new(configurator.clone(), &state_file);
    let report = objects.reconcile(&evpn_objects(&[100])).await;
    assert!(report.is_noop(), "re-applied what FRR has: {report:?}");
    // ... but a changed object is sent.
    let report = objects.reconcile(&evpn_objects(&[100, 200])).await;
    assert_eq!(count(&report, "added"), 1, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frr_nd_object_is_applied_and_removed() {
    let lab = Lab::start(false);
    let state_dir = tempfile::tempdir().unwrap();
    let objects = FrrObjects::new(
        Arc::new(lab.configurator()),
        state_dir.path().join("frr-objects.json"),
    );
    let nd = ConfigureNd {
        interface: InterfaceName::new("bgp-nic").unwrap(),
        managed_config: true,
        dns_servers: vec!["2001:db8::53".parse().unwrap()],
        prefix: "2001:db8:1::/64".parse().unwrap(),
        autoconfig: false,
    };
    let desired: ObjectMap<_, _> = [FrrObject::nd(&nd).unwrap()].into_iter().collect();
    let report = objects.reconcile(&desired).await;
    assert!(report.errors.is_empty(), "{report:?}");
    let running = lab.chassis.running_config();
    assert!(
        has_line(&running, "ipv6 nd prefix 2001:db8:1::/64 no-autoconfig"),
        "{running}"
    );
    assert!(
        has_line(&running, "ipv6 nd rdnss 2001:db8::53"),
        "{running}"
    );

    let report = objects.reconcile(&ObjectMap::new()).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "removed"), 1, "{report:?}");
    let running = lab.chassis.running_config();
    assert!(!running.contains("2001:db8:1::/64"), "{running}");
    assert!(!running.contains("rdnss"), "{running}");
    assert!(!running.contains("managed-config-flag"), "{running}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_frr_object_state_never_reaches_vtysh() {
    let lab = Lab::start(false);
    let before = lab.chassis.running_config();
    let state_dir = tempfile::tempdir().unwrap();
    let state_file = state_dir.path().join("frr-objects.json");
    // A record whose removal smuggles a carriage return (a second command for vtysh's parser).
    std::fs::write(
        &state_file,
        r#"{"version":1,"objects":{"vrf vrf-9":{"remove":"no router bgp 64999\r\n"}}}"#,
    )
    .unwrap();
    let objects = FrrObjects::new(Arc::new(lab.configurator()), &state_file);
    let report = objects.reconcile(&ObjectMap::new()).await;
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(
        report.errors[0].error.contains("only printable ASCII"),
        "{report:?}"
    );
    assert_eq!(lab.chassis.running_config(), before);
    // Kept (and retried), not silently forgotten.
    assert_eq!(objects.owned_keys().await.len(), 1);
}

/// FRR's pid files live in a directory the `frr` user owns, and the agent reads them as root to
/// tell a live daemon from a stale socket. A FIFO (opening it would wait for a writer, reading it
/// forever), a symlink to `/dev/zero` (an endless read) and an oversized file there are refused
/// at once with an error naming the file; the FRR check goes on and the configuration is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_pid_files_cannot_wedge_the_frr_check() {
    use ovn_bgp_agent::caps::frr::read_pid_file;
    let lab = Lab::start(false);
    let dir = lab.chassis.dir.clone();
    let configurator = lab.configurator();
    let snippets = vec![leak("172.24.4.1").render().unwrap()];
    assert_eq!(configurator.ensure(&snippets).await.unwrap(), 1);

    let zebra_pid = dir.join("zebra.pid");
    let bgpd_pid = dir.join("bgpd.pid");
    assert!(
        read_pid_file(&zebra_pid).unwrap().is_some(),
        "FRR wrote no zebra.pid in {}",
        dir.display()
    );
    std::fs::remove_file(&zebra_pid).unwrap();
    nix::unistd::mkfifo(&zebra_pid, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::remove_file(&bgpd_pid).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &bgpd_pid).unwrap();
    let big = dir.join("big.pid");
    std::fs::write(&big, vec![b'1'; 1 << 20]).unwrap();

    let started = Instant::now();
    let fifo = read_pid_file(&zebra_pid).unwrap_err().to_string();
    assert!(
        fifo.contains("zebra.pid") && fifo.contains("is a FIFO"),
        "{fifo}"
    );
    let link = read_pid_file(&bgpd_pid).unwrap_err().to_string();
    assert!(
        link.contains("bgpd.pid") && link.contains("symbolic link"),
        "{link}"
    );
    let long = read_pid_file(&big).unwrap_err().to_string();
    assert!(long.contains("longer than 32 bytes"), "{long}");
    assert!(started.elapsed() < Duration::from_secs(1));

    // The check itself (every frr_reconcile_interval, and before each apply) still returns at
    // once, counting both daemons as running, and a forced re-apply goes through.
    let fingerprint = tokio::time::timeout(
        Duration::from_secs(2),
        ovn_bgp_agent::caps::frr::FrrFingerprint::read(&dir),
    )
    .await
    .expect("the FRR check hung on a pid file")
    .unwrap();
    assert!(!fingerprint.is_empty());
    configurator.invalidate().await;
    let applied = tokio::time::timeout(Duration::from_secs(20), configurator.ensure(&snippets))
        .await
        .expect("ensure hung on a pid file")
        .unwrap();
    assert_eq!(applied, 1);
    assert_leak_applied(&lab.chassis.running_config(), "172.24.4.1");
}

/// A fixed snippet, for an object FRR refuses.
struct Text(&'static str);

impl FrrSnippet for Text {
    fn render(&self) -> Result<String, ovn_bgp_agent::caps::frr::RenderError> {
        Ok(self.0.to_owned())
    }
}

/// A configurator whose vtysh is a wrapper logging each invocation's arguments (one line per
/// run) before running the real one.
fn counting_configurator(lab: &Lab, dir: &std::path::Path) -> (VtyshConfigurator, PathBuf) {
    let log = dir.join("vtysh-runs.log");
    let wrapper = dir.join("vtysh");
    frrovs_support::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\nexec {real} \"$@\"\n",
            log = log.display(),
            real = frrovs_support::VTYSH
        ),
    );
    let vtysh = Vtysh::new(VtyshOptions {
        vtysh_path: wrapper,
        vty_socket_dir: lab.chassis.dir.clone(),
        timeout: Duration::from_secs(20),
    });
    (VtyshConfigurator::new(vtysh), log)
}

/// How many `vtysh -f` runs the wrapper logged.
fn apply_runs(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" -f "))
        .count()
}

/// The VNI configured under `vrf <name>` in the running configuration.
fn vni_of(running: &str, vrf: &str) -> Option<String> {
    let mut lines = running.lines().map(str::trim);
    lines.find(|l| *l == format!("vrf {vrf}"))?;
    lines
        .take_while(|l| *l != "exit-vrf")
        .find_map(|l| l.strip_prefix("vni ").map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_frr_objects_take_one_vtysh_run_and_a_refused_one_is_isolated() {
    let lab = Lab::start(false);
    let state_dir = tempfile::tempdir().unwrap();
    let (configurator, log) = counting_configurator(&lab, state_dir.path());
    let objects = FrrObjects::new(
        Arc::new(configurator),
        state_dir.path().join("objects.json"),
    );
    let vnis: Vec<u32> = (1000..1040).collect();

    // A cold start with 40 EVPN VRFs: two runs (32 objects at most in one), and every VRF's
    // lines where a file of its own would have put them (ADD_VRF ends inside `router bgp …
    // vrf`: unclosed, the next `vrf` line is read as bgpd's `vrf-policy` and its `vni` never
    // reaches zebra).
    let report = objects.reconcile(&evpn_objects(&vnis)).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "added"), 40, "{report:?}");
    assert_eq!(apply_runs(&log), 2);
    let running = lab.chassis.running_config();
    assert!(!running.contains("vrf-policy"), "{running}");
    for vni in &vnis {
        let vrf = format!("vrf-{vni}");
        assert_eq!(vni_of(&running, &vrf), Some(vni.to_string()), "{running}");
        assert!(
            has_line(&running, &format!("rd 10.0.0.1:{vni}")),
            "{vrf}:\n{running}"
        );
    }
    let vrfs = bgp_vrfs(&lab.chassis);
    assert!(
        vnis.iter().all(|v| vrfs.contains(&format!("vrf-{v}"))),
        "{vrfs:?}"
    );

    // 30 of them no longer wanted: one run removes them all, the other 10 stay.
    let kept = &vnis[..10];
    let report = objects.reconcile(&evpn_objects(kept)).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "removed"), 30, "{report:?}");
    assert_eq!(apply_runs(&log), 3);
    let running = lab.chassis.running_config();
    let vrfs = bgp_vrfs(&lab.chassis);
    for vni in &vnis {
        let vrf = format!("vrf-{vni}");
        let wanted = kept.contains(vni);
        assert_eq!(
            vni_of(&running, &vrf).is_some(),
            wanted,
            "{vrf}:\n{running}"
        );
        assert_eq!(vrfs.contains(&vrf), wanted, "{vrf}: {vrfs:?}");
    }

    // Five new VRFs and an object FRR refuses (a line bgpd does not know): the run fails, the
    // refused object is reported by name, the five are configured all the same.
    let mut desired = evpn_objects(&[kept, &[2000, 2001, 2002, 2003, 2004]].concat());
    let refused = FrrObject::from_snippets(
        &Text("router bgp 64999 vrf vrf-bad\n  this is not a command\n"),
        &Text("no router bgp 64999 vrf vrf-bad\n"),
    )
    .unwrap();
    desired.insert(
        FrrObjectKey::bgp_vrf(asn(), &InterfaceName::new("vrf-bad").unwrap()),
        refused,
    );
    let report = objects.reconcile(&desired).await;
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(
        report.errors[0]
            .to_string()
            .contains("router bgp 64999 vrf vrf-bad"),
        "{report:?}"
    );
    assert_eq!(count(&report, "added"), 5, "{report:?}");
    let running = lab.chassis.running_config();
    for vni in [1000, 2000, 2001, 2002, 2003, 2004] {
        assert_eq!(
            vni_of(&running, &format!("vrf-{vni}")),
            Some(vni.to_string()),
            "{running}"
        );
    }
    // The failed run, then vrf-bad alone (the five were configured by the run: not resent).
    assert_eq!(
        apply_runs(&log),
        5,
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
}
