//! The NB driver with `exposing_method = vrf`, end to end in the fast-tier lab: the real OVN,
//! OVS and FRR, the agent binary, and the lab's stand-in device kinds (`[linux]
//! vrf_device_kind = bridge`, `nic_device_kind = ifb`: the lab kernel has no VRF module, so the
//! VRF is a bridge and FRR's EVPN cannot carry routes; the full-kernel tier runs real VRFs).
//! Checked here: the devices, the routes in the VNI table, the OVS port and flows, and the FRR
//! stanzas, as the provider network's `neutron_bgpvpn:*` settings and DHCP options change.
//! Run under the daemon lock: `flock /tmp/ovn-bgp-daemons.lock cargo test --test nb_vrf_e2e`.
#![cfg(all(feature = "nb_bgp", feature = "vrf"))]

mod agent_fixture;
mod lab_fixture;

use agent_fixture::Agent;
use lab_fixture::{CONVERGENCE_TIMEOUT, Lab, require_root, wait_for};

fn overrides(vtep: &str) -> String {
    format!(
        "[DEFAULT]\ndriver = nb_ovn_bgp_driver\nexposing_method = vrf\nevpn_local_ip = {vtep}\n\
         reconcile_interval = 20\nfrr_reconcile_interval = 2\n[ovs]\nflow_check_interval = 2\n"
    )
}

/// Polls `probe` (a command's output) until `done` holds for it.
fn wait_output(what: &str, probe: impl Fn() -> String, done: impl Fn(&str) -> bool) -> String {
    wait_for(what, CONVERGENCE_TIMEOUT, || {
        let out = probe();
        if done(&out) { Ok(out) } else { Err(out) }
    })
}

#[test]
fn the_vrf_method_builds_the_evpn_network_and_follows_its_settings() {
    require_root();
    let lab = Lab::start();
    let switch = format!("neutron-{}", lab.env("NET_PUBLIC_ID"));
    // The localnet port's row uuid names the veth pair: vrf<uuid[0:11]> / ovs<uuid[0:11]>.
    let localnet = lab
        .nbctl(&[
            "--bare",
            "--columns=_uuid",
            "find",
            "Logical_Switch_Port",
            "type=localnet",
        ])
        .trim()
        .to_owned();
    assert_eq!(localnet.len(), 36, "one localnet port: {localnet:?}");
    let vrf_side = format!("vrf{}", &localnet[..11]);
    let ovs_side = format!("ovs{}", &localnet[..11]);
    // The subnet's gateway for the VRF side (not the lab's own 172.24.4.1, which the ToR side
    // of the lab may answer for), from DHCP_Options as Neutron writes it.
    let dhcp = lab
        .nbctl(&[
            "create",
            "DHCP_Options",
            "cidr=\"172.24.4.0/24\"",
            "options:router=\"172.24.4.254\"",
            &format!(
                "external_ids:\"neutron:network_id\"=\"{}\"",
                lab.env("NET_PUBLIC_ID")
            ),
        ])
        .trim()
        .to_owned();
    let set_evpn = |vni: &str| {
        lab.nbctl(&[
            "set",
            "Logical_Switch",
            &switch,
            "external_ids:\"neutron_bgpvpn:type\"=l3",
            &format!("external_ids:\"neutron_bgpvpn:vni\"={vni}"),
            "external_ids:\"neutron_bgpvpn:rt\"=\"['64999:1']\"",
        ]);
    };
    set_evpn("100");
    let vtep = lab.env("CHASSIS_IP4").to_owned();
    let mut agent = Agent::start(lab.dir(), &overrides(&vtep));

    // E1: the per-VNI devices and the veth pair with the anycast MAC.
    let links = wait_output(
        "the VNI 100 devices",
        || lab.ip_chassis(&["-d", "link", "show"]),
        |out| {
            ["vrf-100", "br-100", "vxlan-100", &vrf_side, &ovs_side]
                .iter()
                .all(|d| out.contains(&format!(" {d}:")) || out.contains(&format!(" {d}@")))
        },
    );
    let veth = lab.ip_chassis(&["-d", "link", "show", "dev", &vrf_side]);
    assert!(
        veth.contains("link/ether 02:00:00:64:00:00") && veth.contains("master vrf-100"),
        "{vrf_side}: anycast MAC, in the VRF:\n{veth}"
    );
    let vxlan = lab.ip_chassis(&["-d", "link", "show", "dev", "vxlan-100"]);
    assert!(
        vxlan.contains("id 100") && vxlan.contains(&format!("local {vtep}")),
        "vxlan-100:\n{vxlan}\n(all links:\n{links})"
    );
    assert!(vxlan.contains("master br-100"), "{vxlan}");
    let addrs = lab.ip_chassis(&["addr", "show", "dev", &vrf_side]);
    assert!(
        addrs.contains("172.24.4.254/24") && addrs.contains("169.254.0.0/32"),
        "gateway and helper addresses on {vrf_side}:\n{addrs}"
    );
    let ports = lab.vsctl(&["list-ports", "br-ex"]);
    assert!(
        ports.lines().any(|p| p == ovs_side),
        "{ovs_side} on br-ex:\n{ports}"
    );
    // E2: the provider VM bound here as a route in table 100 with its MAC as neighbour.
    let vm = lab.env("VM_PROVIDER_IP4").to_owned();
    let routes = wait_output(
        "the provider VM in table 100",
        || lab.ip_chassis(&["route", "show", "table", "100"]),
        |out| out.contains(&format!("{vm} dev {vrf_side} scope link")),
    );
    let neigh = lab.ip_chassis(&["neigh", "show", "dev", &vrf_side, "nud", "permanent"]);
    assert!(
        neigh.contains(&format!("{vm} lladdr {}", lab.env("VM_PROVIDER_MAC"))),
        "{neigh}\n(table 100:\n{routes})"
    );
    let nic = lab.ip_chassis(&["addr", "show"]);
    assert!(
        !nic.contains(&format!("{vm}/32")),
        "nothing on a bgp-nic with the vrf method:\n{nic}"
    );
    let flows = wait_output(
        "MAC-tweak flows towards the anycast MAC",
        || lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=999/-1"]),
        |out| out.matches("mod_dl_dst:02:00:00:64:00:00").count() >= 2,
    );
    assert!(flows.contains("priority=900"), "{flows}");
    // vtysh applies a stanza line by line, so a snapshot can show the `router bgp … vrf`
    // header before its body: wait for every line, not for the header.
    let rd = format!("rd {vtep}:100");
    let expected_frr = [
        "router bgp 64999 vrf vrf-100",
        " vni 100",
        &rd as &str,
        "route-target import 64999:1",
        "route-target export 64999:1",
        "redistribute kernel",
    ];
    wait_output(
        "FRR VRF stanzas",
        || lab.vtysh_chassis("show running-config"),
        |out| expected_frr.iter().all(|line| out.contains(line)),
    );

    // The gateway address moves (DHCP options): the VRF side follows.
    lab.nbctl(&[
        "set",
        "DHCP_Options",
        &dhcp,
        "options:router=\"172.24.4.253\"",
    ]);
    wait_output(
        "the gateway address followed",
        || lab.ip_chassis(&["addr", "show", "dev", &vrf_side]),
        |out| out.contains("172.24.4.253/24") && !out.contains("172.24.4.254/24"),
    );

    // VNI 100 -> 200, without a restart: VRF 100 and its FRR stanzas go, 200 comes.
    set_evpn("200");
    wait_output(
        "VNI 200 replaces 100",
        || lab.ip_chassis(&["link", "show"]),
        |out| out.contains(" vrf-200:") && !out.contains(" vrf-100:") && !out.contains("vxlan-100"),
    );
    wait_output(
        "the VM in table 200",
        || lab.ip_chassis(&["route", "show", "table", "200"]),
        |out| out.contains(&format!("{vm} dev {vrf_side}")),
    );
    wait_output(
        "FRR follows the VNI",
        || lab.vtysh_chassis("show running-config"),
        |out| out.contains("router bgp 64999 vrf vrf-200") && !out.contains("vrf vrf-100"),
    );
    wait_output(
        "MAC-tweak flows follow the anycast MAC",
        || lab.ovs_ofctl(&["dump-flows", "br-ex", "cookie=999/-1"]),
        |out| {
            out.contains("mod_dl_dst:02:00:00:c8:00:00")
                && !out.contains("mod_dl_dst:02:00:00:64:00:00")
        },
    );

    // The settings go: every device, OVS port, route and FRR stanza of the network goes.
    lab.nbctl(&[
        "remove",
        "Logical_Switch",
        &switch,
        "external_ids",
        "\"neutron_bgpvpn:type\"",
        "\"neutron_bgpvpn:vni\"",
        "\"neutron_bgpvpn:rt\"",
    ]);
    wait_output(
        "the EVPN devices removed",
        || lab.ip_chassis(&["link", "show"]),
        |out| !out.contains("vrf-200") && !out.contains(&vrf_side) && !out.contains("br-200"),
    );
    wait_output(
        "the OVS port removed",
        || lab.vsctl(&["list-ports", "br-ex"]),
        |out| !out.lines().any(|p| p == ovs_side),
    );
    wait_output(
        "the FRR VRF removed",
        || lab.vtysh_chassis("show running-config"),
        |out| !out.contains("vrf vrf-200"),
    );
    agent.assert_running();
    let log = agent.log();
    assert!(
        log.contains("has no usable EVPN settings"),
        "the provider VM is reported, not silently dropped:\n{}",
        agent.log_tail()
    );
}
