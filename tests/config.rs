//! Configuration loading: upstream-format INI files (fixtures in tests/fixtures/config/), TOML,
//! environment, oslo precedence and semantics, errors and warnings, and `check-config` run as
//! the built binary.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use ovn_bgp_agent::config::layer::Origin;
use ovn_bgp_agent::config::load::{ValueOrigin, oslo_default_locations};
use ovn_bgp_agent::config::{
    AgentConfig, ConfigError, ConfigSources, LoadedConfig, TenantAdvertisement, load_with_env,
    schema,
};

const NO_ENV: [(&str, &str); 0] = [];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

/// A temporary directory for one test, removed on drop (also when the test panics).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("obgp-config-test-{}-{n}-{tag}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create dir");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn files(paths: &[&Path]) -> ConfigSources {
    ConfigSources {
        config_files: paths.iter().map(|p| p.to_path_buf()).collect(),
        ..Default::default()
    }
}

fn load_files(paths: &[&Path]) -> Result<LoadedConfig, ConfigError> {
    load_with_env(&files(paths), NO_ENV)
}

fn origin_of(loaded: &LoadedConfig, section: &str, key: &str) -> String {
    loaded
        .origin(section, key)
        .unwrap_or_else(|| panic!("no provenance for [{section}] {key}"))
        .to_string()
}

fn error_text(r: Result<LoadedConfig, ConfigError>) -> String {
    match r {
        Ok(l) => panic!("expected an error, loaded {:#?}", l.config),
        Err(e) => e.to_string(),
    }
}

#[test]
fn upstream_conf_with_every_option_is_read() {
    let conf = fixture("bgp-agent.conf");
    let new = fixture("new-sections.conf");
    let loaded = load_files(&[&conf, &new]).expect("fixture loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    // Every option the agent has is set by one of the two files.
    for p in &loaded.provenance {
        match &p.origin {
            ValueOrigin::Written(Origin::File {
                path,
                line: Some(_),
            }) => {
                assert!(path == &conf || path == &new, "[{}] {}", p.section, p.key)
            }
            other => panic!("[{}] {} comes from {other}", p.section, p.key),
        }
    }
    assert_eq!(loaded.provenance.len(), schema::OPTIONS.len());

    let c = &loaded.config;
    let d = &c.default;
    assert_eq!(d.reconcile_interval, 120);
    assert_eq!(d.frr_reconcile_interval, 30);
    assert!(d.expose_tenant_networks, "yes");
    assert_eq!(
        d.advertisement_method_tenant_networks,
        TenantAdvertisement::Subnet
    );
    assert!(d.require_snat_disabled_for_tenant_networks, "On");
    assert!(d.expose_ipv6_gua_tenant_networks, "1");
    assert_eq!(d.driver, "nb_ovn_bgp_driver");
    assert_eq!(d.ovsdb_connection, "tcp:127.0.0.1:6640");
    assert_eq!(d.ovsdb_connection_timeout, 90);
    assert_eq!(d.bgp_as, "64512");
    assert_eq!(d.bgp_router_id.as_deref(), Some("172.30.1.1"));
    assert_eq!(
        d.evpn_local_ip,
        Some("172.30.1.2".parse::<IpAddr>().unwrap())
    );
    assert_eq!(d.evpn_nic.as_deref(), Some("eth2"));
    assert_eq!(d.evpn_udp_dstport, 4790);
    assert!(d.clear_vrf_routes_on_startup, "TRUE");
    assert!(!d.delete_vrf_on_disconnect, "off");
    assert_eq!(d.bgp_nic, "bgp-nic-1");
    assert_eq!(d.bgp_vrf, "bgp-vrf-1");
    assert_eq!(d.bgp_vrf_table_id, 20);
    assert_eq!(
        d.address_scopes.as_deref(),
        Some(
            &[
                "11111111-2222-3333-4444-555555555555".to_owned(),
                "66666666-7777-8888-9999-000000000000".to_owned()
            ][..]
        )
    );
    assert_eq!(d.exposing_method, "vrf");
    assert!(d.debug);
    // oslo.log's options as upstream's sample sets them.
    assert_eq!(
        d.log_file.as_deref(),
        Some(Path::new("/var/log/ovn-bgp-agent/bgp-agent.log"))
    );
    assert!(!d.use_stderr && !d.use_json && !d.use_syslog && !d.use_journal);
    assert_eq!(d.syslog_log_facility, "LOG_LOCAL0");
    assert_eq!(
        c.agent.root_helper,
        "sudo ovn-bgp-agent-rootwrap /etc/ovn-bgp-agent/rootwrap.conf"
    );
    assert_eq!(c.ovn.ovn_sb_private_key, "/etc/pki/tls/private/sb.key");
    assert_eq!(c.ovn.ovn_sb_certificate, "/etc/pki/tls/certs/sb.crt");
    assert_eq!(c.ovn.ovn_sb_ca_cert, "/etc/pki/ca/sb-ca.crt");
    assert_eq!(
        c.ovn.ovn_sb_connection.as_deref(),
        Some("ssl:192.0.2.10:6642,ssl:192.0.2.11:6642")
    );
    assert_eq!(c.ovn.ovn_nb_private_key, "/etc/pki/tls/private/nb.key");
    assert_eq!(c.ovn.ovn_nb_certificate, "/etc/pki/tls/certs/nb.crt");
    assert_eq!(c.ovn.ovn_nb_ca_cert, "/etc/pki/ca/nb-ca.crt");
    assert_eq!(
        c.ovn.ovn_nb_connection.as_deref(),
        Some("ssl:192.0.2.10:6641")
    );
    let l = &c.local_ovn_cluster;
    assert_eq!(l.ovn_nb_connection, "unix:/run/ovn-local/ovnnb_db.sock");
    assert_eq!(l.external_nics, ["eth1", "eth2"]);
    assert_eq!(l.peer_ips, ["100.64.1.5", "100.65.1.5"]);
    assert_eq!(
        l.provider_networks_pool_prefixes,
        ["172.16.0.0/16", "fd00:1::/64"]
    );
    assert_eq!(l.bgp_chassis_id, "bgp-local");
    assert_eq!(c.frr.vtysh_path, "/usr/local/bin/vtysh");
    assert_eq!(c.frr.vty_socket_dir, "/run/frr-test/");
    assert_eq!(c.frr.vtysh_timeout, 10);
    assert_eq!(c.frr.state_file, "/var/lib/oba-test/frr-objects.json");
    assert_eq!(c.ovs.ovs_rundir, "/run/ovs-test");
    assert_eq!(c.ovs.ovs_vsctl_path, "/usr/local/bin/ovs-vsctl");
    assert_eq!(c.ovs.ovs_ofctl_path, "/usr/local/bin/ovs-ofctl");
    assert_eq!(c.ovs.flow_check_interval, 2);
    assert_eq!(c.linux.rt_tables_path, "/tmp/rt_tables");
    assert_eq!(c.linux.vrf_device_kind, "bridge");
    assert_eq!(c.linux.nic_device_kind, "ifb");
    assert_eq!(c.linux.rule_priority, 1000);
    assert_eq!(c.linux.netns.as_deref(), Some("chassis-1"));
    assert!(c.ovn.nb_watch_all_vm_ports);
    assert_eq!(
        c.telemetry.metrics_address.as_deref(),
        Some("127.0.0.1:9740")
    );
    assert_eq!(c.telemetry.control_socket, "/run/oba-test/control.sock");
    assert_eq!(c.ovn.ovsdb_max_message_size, 64 << 20);
    assert_eq!(c.policy.min_prefix_length_ipv4, 12);
    assert_eq!(c.policy.min_prefix_length_ipv6, 48);

    // Provenance names the line.
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "bgp_AS"),
        format!("{}:77", conf.display())
    );
    // oslo.log / privsep / oslo.concurrency options are recorded, without effect.
    let no_effect: BTreeSet<(String, String)> = loaded
        .no_effect
        .iter()
        .map(|n| (n.section.clone(), n.key.clone()))
        .collect();
    for (s, k) in [
        ("DEFAULT", "default_log_levels"),
        ("DEFAULT", "logging_context_format_string"),
        ("oslo_concurrency", "lock_path"),
        ("privsep", "helper_command"),
        ("privsep", "capabilities"),
        ("privsep_ovs_vsctl", "thread_pool_size"),
        ("privsep_vtysh", "logger_name"),
    ] {
        assert!(
            no_effect.contains(&(s.to_owned(), k.to_owned())),
            "[{s}] {k} not recorded: {no_effect:?}"
        );
    }
}

#[test]
fn no_sources_give_upstream_defaults() {
    let tmp = TempDir::new("defaults");
    let empty = tmp.write("empty.conf", "");
    for loaded in [
        load_with_env(&ConfigSources::default(), NO_ENV).unwrap(),
        load_files(&[&empty]).unwrap(),
    ] {
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert!(
            loaded
                .provenance
                .iter()
                .all(|p| p.origin == ValueOrigin::Default)
        );
        let c = &loaded.config;
        assert_eq!(c, &AgentConfig::default());
        // upstream-behaviour.md §5.
        let d = &c.default;
        assert_eq!(d.reconcile_interval, 300);
        assert_eq!(d.frr_reconcile_interval, 15);
        assert!(!d.expose_tenant_networks);
        assert_eq!(
            d.advertisement_method_tenant_networks,
            TenantAdvertisement::Host
        );
        assert!(!d.require_snat_disabled_for_tenant_networks);
        assert!(!d.expose_ipv6_gua_tenant_networks);
        assert_eq!(d.driver, "ovn_bgp_driver");
        assert_eq!(
            d.ovsdb_connection,
            "unix:/usr/local/var/run/openvswitch/db.sock"
        );
        assert_eq!(d.ovsdb_connection_timeout, 180);
        assert_eq!(d.bgp_as, "64999");
        assert_eq!(d.bgp_router_id, None);
        assert_eq!(d.evpn_local_ip, None);
        assert_eq!(d.evpn_nic, None);
        assert_eq!(d.evpn_udp_dstport, 4789);
        assert!(!d.clear_vrf_routes_on_startup);
        assert!(d.delete_vrf_on_disconnect);
        assert_eq!(d.bgp_nic, "bgp-nic");
        assert_eq!(d.bgp_vrf, "bgp-vrf");
        assert_eq!(d.bgp_vrf_table_id, 10);
        assert_eq!(d.address_scopes, None);
        assert_eq!(d.exposing_method, "underlay");
        assert!(!d.debug);
        assert_eq!(c.agent.root_helper, "sudo");
        assert_eq!(
            c.ovn.ovn_sb_private_key,
            "/etc/pki/tls/private/ovn_bgp_agent.key"
        );
        assert_eq!(
            c.ovn.ovn_nb_certificate,
            "/etc/pki/tls/certs/ovn_bgp_agent.crt"
        );
        assert_eq!(c.ovn.ovn_sb_ca_cert, "/etc/ipa/ca.crt");
        assert_eq!(c.ovn.ovn_sb_connection, None);
        assert_eq!(c.ovn.ovn_nb_connection, None);
        assert_eq!(
            c.local_ovn_cluster.ovn_nb_connection,
            "unix:/var/run/ovn/ovnnb_db.sock"
        );
        assert!(c.local_ovn_cluster.external_nics.is_empty());
        assert!(c.local_ovn_cluster.peer_ips.is_empty());
        assert_eq!(
            c.local_ovn_cluster.provider_networks_pool_prefixes,
            ["192.168.0.0/16"]
        );
        assert_eq!(c.local_ovn_cluster.bgp_chassis_id, "bgp");
        assert_eq!(c.linux.vrf_device_kind, "vrf");
        assert_eq!(c.linux.nic_device_kind, "dummy");
    }
}

#[test]
fn each_bad_value_type_is_an_error_naming_file_line_section_key_and_value() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "DEFAULT",
            "reconcile_interval",
            "abc",
            "expected an integer",
        ),
        (
            "DEFAULT",
            "reconcile_interval",
            "0",
            "expected an integer from 1",
        ),
        (
            "DEFAULT",
            "expose_tenant_networks",
            "maybe",
            "expected a boolean",
        ),
        (
            "ovn",
            "ovsdb_max_message_size",
            "4096",
            "expected an integer from 1048576 to 17179869184",
        ),
        (
            "DEFAULT",
            "evpn_local_ip",
            "300.1.1.1",
            "expected an IPv4 or IPv6 address",
        ),
        (
            "DEFAULT",
            "evpn_local_ip",
            "",
            "expected an IPv4 or IPv6 address",
        ),
        (
            "DEFAULT",
            "advertisement_method_tenant_networks",
            "prefix",
            "expected one of: host, subnet",
        ),
        (
            "DEFAULT",
            "exposing_method",
            "evpn",
            "expected one of: underlay, l2vni, vrf, dynamic, ovn",
        ),
        (
            "DEFAULT",
            "driver",
            "bgp_driver",
            "expected one of: ovn_bgp_driver",
        ),
        (
            "DEFAULT",
            "ovsdb_connection",
            "http://127.0.0.1:6640",
            "^(tcp|ssl|unix):.+",
        ),
        ("DEFAULT", "ovsdb_connection", "unix:", "^(tcp|ssl|unix):.+"),
        ("ovn", "ovn_sb_connection", "", "^(tcp|ssl|unix):.+"),
        (
            "DEFAULT",
            "evpn_udp_dstport",
            "65536",
            "expected a port number (0-65535)",
        ),
        (
            "DEFAULT",
            "evpn_udp_dstport",
            "-1",
            "expected a port number (0-65535)",
        ),
        ("DEFAULT", "bgp_AS", "65000 vrf x", "expected an AS number"),
        (
            "DEFAULT",
            "bgp_router_id",
            "1.2.3",
            "expected an IPv4 address",
        ),
        (
            "DEFAULT",
            "bgp_nic",
            "a-name-longer-than-15",
            "expected an interface name",
        ),
        (
            "DEFAULT",
            "bgp_vrf_table_id",
            "254",
            "other than the kernel's",
        ),
        (
            "local_ovn_cluster",
            "peer_ips",
            "10.0.0.1,10.0.0",
            "list item 2 (\"10.0.0\"): expected an IPv4 or IPv6 address",
        ),
        (
            "local_ovn_cluster",
            "provider_networks_pool_prefixes",
            "10.0.0.0/33",
            "expected an IP prefix",
        ),
        (
            "linux",
            "vrf_device_kind",
            "veth",
            "expected one of: vrf, bridge",
        ),
    ];
    let tmp = TempDir::new("bad");
    for (i, (section, key, value, expected)) in cases.iter().enumerate() {
        let path = tmp.write(
            &format!("bad-{i}.conf"),
            &format!("[{section}]\n# comment\n{key} = {value}\n"),
        );
        let msg = error_text(load_files(&[&path]));
        let want_prefix = format!("{}:3: [{section}] {key} = {value:?}: ", path.display());
        assert!(
            msg.starts_with(&want_prefix) && msg.contains(expected),
            "[{section}] {key} = {value:?}\n got: {msg}\nwant: {want_prefix}…{expected}…"
        );
    }
}

#[test]
fn all_bad_values_are_reported_together() {
    let tmp = TempDir::new("bad-all");
    let path = tmp.write(
        "bad.conf",
        "[DEFAULT]\nreconcile_interval = abc\nbgp_vrf_table_id = x\n",
    );
    let msg = error_text(load_files(&[&path]));
    assert_eq!(
        msg,
        format!(
            "{p}:2: [DEFAULT] reconcile_interval = \"abc\": expected an integer from 1 to 4294967295\n\
             {p}:3: [DEFAULT] bgp_vrf_table_id = \"x\": expected a routing table id from 1 to 4294967295 \
             other than the kernel's 253 (default), 254 (main) and 255 (local)",
            p = path.display()
        )
    );
}

#[test]
fn precedence_is_file_then_later_file_then_config_dir_then_environment() {
    let tmp = TempDir::new("precedence");
    let first = tmp.write(
        "first.conf",
        "[DEFAULT]\nreconcile_interval = 10\nfrr_reconcile_interval = 10\nbgp_AS = 65010\nbgp_nic = nic-first\n\n[ovn]\novn_sb_connection = tcp:10.0.0.1:6642\n",
    );
    let second = tmp.write(
        "second.conf",
        "[DEFAULT]\nfrr_reconcile_interval = 20\nbgp_AS = 65020\nbgp_nic = nic-second\n",
    );
    tmp.write("conf.d/20-b.conf", "[DEFAULT]\nbgp_nic = nic-dir-b\n");
    tmp.write(
        "conf.d/10-a.conf",
        "[DEFAULT]\nbgp_AS = 65030\nbgp_nic = nic-dir-a\n",
    );
    tmp.write("conf.d/.hidden.conf", "[DEFAULT]\nbgp_nic = hidden\n");
    tmp.write("conf.d/notes.txt", "[DEFAULT]\nbgp_nic = txt\n");
    let sources = ConfigSources {
        config_files: vec![first.clone(), second.clone()],
        config_dirs: vec![tmp.0.join("conf.d")],
        oslo_default_search: false,
    };
    let env = [
        ("OS_DEFAULT__BGP_VRF", "vrf-oslo-env"),
        ("OS_DEFAULT__BGP_AS", "65040"),
        ("OVN_BGP_AGENT_DEFAULT__BGP_AS", "65050"),
        ("OVN_BGP_AGENT_OVN__OVN_SB_CONNECTION", "ssl:10.0.0.2:6642"),
        (
            "OVN_BGP_AGENT_LOCAL_OVN_CLUSTER__PEER_IPS",
            "10.1.0.1, 10.1.0.2",
        ),
        ("OVN_BGP_AGENT_DEFAULT__EXPOSE_TENANT_NETWORKS", "Yes"),
        ("UNRELATED", "x"),
    ];
    let loaded = load_with_env(&sources, env).expect("loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let d = &loaded.config.default;
    assert_eq!(d.reconcile_interval, 10);
    assert_eq!(d.frr_reconcile_interval, 20);
    assert_eq!(d.bgp_nic, "nic-dir-b");
    assert_eq!(d.bgp_vrf, "vrf-oslo-env");
    assert_eq!(d.bgp_as, "65050");
    assert!(d.expose_tenant_networks);
    assert_eq!(
        loaded.config.ovn.ovn_sb_connection.as_deref(),
        Some("ssl:10.0.0.2:6642")
    );
    assert_eq!(
        loaded.config.local_ovn_cluster.peer_ips,
        ["10.1.0.1", "10.1.0.2"]
    );

    let dir = tmp.0.join("conf.d");
    assert_eq!(
        loaded.files,
        [
            first.clone(),
            second.clone(),
            dir.join("10-a.conf"),
            dir.join("20-b.conf")
        ]
    );
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "reconcile_interval"),
        format!("{}:2", first.display())
    );
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "frr_reconcile_interval"),
        format!("{}:2", second.display())
    );
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "bgp_nic"),
        format!("{}:2", dir.join("20-b.conf").display())
    );
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "bgp_vrf"),
        "env OS_DEFAULT__BGP_VRF"
    );
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "bgp_AS"),
        "env OVN_BGP_AGENT_DEFAULT__BGP_AS"
    );
    assert_eq!(origin_of(&loaded, "DEFAULT", "bgp_router_id"), "default");
}

#[test]
fn only_the_effective_value_is_checked_as_in_oslo() {
    let tmp = TempDir::new("effective");
    let bad = tmp.write("a.conf", "[DEFAULT]\nreconcile_interval = abc\n");
    let good = tmp.write("b.conf", "[DEFAULT]\nreconcile_interval = 60\n");
    let loaded = load_files(&[&bad, &good]).expect("later file overrides the bad value");
    assert_eq!(loaded.config.default.reconcile_interval, 60);

    let env_bad = load_with_env(
        &files(&[&good]),
        [("OVN_BGP_AGENT_DEFAULT__RECONCILE_INTERVAL", "soon")],
    );
    assert_eq!(
        error_text(env_bad),
        "env OVN_BGP_AGENT_DEFAULT__RECONCILE_INTERVAL: [DEFAULT] reconcile_interval = \"soon\": \
         expected an integer from 1 to 4294967295"
    );
}

#[test]
fn toml_files_use_the_same_sections_and_names() {
    let tmp = TempDir::new("toml");
    let ini = tmp.write(
        "base.conf",
        "[DEFAULT]\nreconcile_interval = 10\nbgp_nic = from-ini\n",
    );
    let toml = tmp.write(
        "override.toml",
        r#"
[DEFAULT]
reconcile_interval = 45
expose_tenant_networks = true
bgp_AS = "65100"
address_scopes = ["scope-a", "scope-b"]
evpn_udp_dstport = 4791

[local_ovn_cluster]
peer_ips = "10.2.0.1,10.2.0.2"

[OVN]
ovn_nb_connection = "tcp:192.0.2.1:6641"
"#,
    );
    let loaded = load_files(&[&ini, &toml]).expect("loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = &loaded.config;
    assert_eq!(c.default.reconcile_interval, 45);
    assert!(c.default.expose_tenant_networks);
    assert_eq!(c.default.bgp_as, "65100");
    assert_eq!(c.default.bgp_nic, "from-ini");
    assert_eq!(c.default.evpn_udp_dstport, 4791);
    assert_eq!(
        c.default.address_scopes.as_deref(),
        Some(&["scope-a".to_owned(), "scope-b".to_owned()][..])
    );
    assert_eq!(c.local_ovn_cluster.peer_ips, ["10.2.0.1", "10.2.0.2"]);
    assert_eq!(
        c.ovn.ovn_nb_connection.as_deref(),
        Some("tcp:192.0.2.1:6641")
    );
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "reconcile_interval"),
        format!("{}:3", toml.display())
    );
    assert_eq!(
        origin_of(&loaded, "ovn", "ovn_nb_connection"),
        format!("{}:13", toml.display())
    );

    let bad = tmp.write("bad.toml", "[DEFAULT]\nreconcile_interval = true\n");
    assert_eq!(
        error_text(load_files(&[&bad])),
        format!(
            "{}:2: [DEFAULT] reconcile_interval = \"true\": expected an integer from 1 to 4294967295",
            bad.display()
        )
    );
    let broken = tmp.write("broken.toml", "[DEFAULT\n");
    let msg = error_text(load_files(&[&broken]));
    assert!(
        msg.starts_with(&format!("{}: invalid TOML", broken.display())),
        "{msg}"
    );
}

#[test]
fn unknown_options_and_sections_warn_with_the_closest_known_name() {
    let tmp = TempDir::new("unknown");
    let path = tmp.write(
        "typos.conf",
        "[DEFAULT]\nbgp_as = 65000\nreconcile_intervall = 5\nroot_helper = sudo\n\n[default]\ndebug = true\n\n[agnet]\nroot_helper = x\n",
    );
    let env = [
        ("OVN_BGP_AGENT_DEFAULT__BGP_ASN", "1"),
        ("OVN_BGP_AGENT_NOSECTION", "1"),
    ];
    let loaded = load_with_env(&files(&[&path]), env).expect("warnings only");
    let p = path.display();
    assert_eq!(
        loaded.warnings,
        [
            format!(
                "{p}:6: unknown section [default] (only [DEFAULT] in capitals is the default section), its options are ignored; did you mean [DEFAULT]?"
            ),
            format!("{p}:9: unknown section [agnet], its options are ignored; did you mean [agent]?"),
            format!("{p}:2: unknown option [DEFAULT] bgp_as, ignored; did you mean bgp_AS?"),
            format!(
                "{p}:3: unknown option [DEFAULT] reconcile_intervall, ignored; did you mean reconcile_interval?"
            ),
            format!(
                "{p}:4: unknown option [DEFAULT] root_helper, ignored; did you mean [agent] root_helper?"
            ),
            "env OVN_BGP_AGENT_DEFAULT__BGP_ASN: ignored: names no known option; did you mean bgp_AS?"
                .to_owned(),
            "env OVN_BGP_AGENT_NOSECTION: ignored: expected OVN_BGP_AGENT_<SECTION>__<OPTION>, e.g. OVN_BGP_AGENT_DEFAULT__BGP_AS"
                .to_owned(),
        ]
    );
    // Like oslo (option names are case-sensitive), the misspelt options have no effect.
    assert_eq!(loaded.config.default.bgp_as, "64999");
    assert_eq!(loaded.config.default.reconcile_interval, 300);
    assert!(!loaded.config.default.debug);
}

#[test]
fn ovn_options_in_default_are_the_deprecated_group() {
    let tmp = TempDir::new("deprecated");
    let old = tmp.write(
        "old.conf",
        "[DEFAULT]\novn_sb_connection = tcp:10.0.0.1:6642\novn_sb_ca_cert = /old/ca.crt\n",
    );
    let loaded = load_files(&[&old]).unwrap();
    assert_eq!(
        loaded.config.ovn.ovn_sb_connection.as_deref(),
        Some("tcp:10.0.0.1:6642")
    );
    assert_eq!(loaded.config.ovn.ovn_sb_ca_cert, "/old/ca.crt");
    assert_eq!(
        origin_of(&loaded, "ovn", "ovn_sb_connection"),
        format!("{}:2", old.display())
    );
    assert_eq!(
        loaded.warnings[0],
        format!(
            "{}:2: [DEFAULT] ovn_sb_connection is deprecated; use [ovn] ovn_sb_connection",
            old.display()
        )
    );

    // In one file [ovn] wins over [DEFAULT]; a later file's [DEFAULT] wins over an earlier [ovn].
    let both = tmp.write(
        "both.conf",
        "[ovn]\novn_sb_connection = tcp:10.0.0.2:6642\n\n[DEFAULT]\novn_sb_connection = tcp:10.0.0.3:6642\n",
    );
    let loaded = load_files(&[&both]).unwrap();
    assert_eq!(
        loaded.config.ovn.ovn_sb_connection.as_deref(),
        Some("tcp:10.0.0.2:6642")
    );
    assert!(
        loaded.warnings[0].contains("[DEFAULT] ovn_sb_connection is ignored"),
        "{:?}",
        loaded.warnings
    );
    let loaded = load_files(&[&both, &old]).unwrap();
    assert_eq!(
        loaded.config.ovn.ovn_sb_connection.as_deref(),
        Some("tcp:10.0.0.1:6642")
    );

    // No other inheritance from [DEFAULT]: its ovn_nb_connection is [ovn]'s (deprecated group),
    // never [local_ovn_cluster]'s, and bgp_chassis_id there is unknown.
    let nb = tmp.write(
        "nb.conf",
        "[DEFAULT]
ovn_nb_connection = tcp:10.0.0.9:6641
bgp_chassis_id = other
",
    );
    let loaded = load_files(&[&nb]).unwrap();
    assert_eq!(
        loaded.config.ovn.ovn_nb_connection.as_deref(),
        Some("tcp:10.0.0.9:6641")
    );
    assert_eq!(
        loaded.config.local_ovn_cluster.ovn_nb_connection,
        "unix:/var/run/ovn/ovnnb_db.sock"
    );
    assert_eq!(loaded.config.local_ovn_cluster.bgp_chassis_id, "bgp");
    assert!(
        loaded.warnings.iter().any(|w| w.ends_with(
            "unknown option [DEFAULT] bgp_chassis_id, ignored; did you mean [local_ovn_cluster] bgp_chassis_id?"
        )),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn oslo_ini_dialect_in_a_file() {
    let tmp = TempDir::new("dialect");
    let path = tmp.write(
        "dialect.conf",
        "; semicolon comment\n\
         [OVN]\n\
         ovn_nb_connection: tcp:192.0.2.1:6641\n\
         \n\
         [Agent]\n\
         root_helper = \"sudo -E # keep env\"\n\
         \n\
         [DEFAULT]\n\
         bgp_vrf = vrf-one\n\
         bgp_vrf = vrf-two\n\
         address_scopes = a,\n  b ,c,\n\
         evpn_nic=eth9\n",
    );
    let loaded = load_files(&[&path]).expect("loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = &loaded.config;
    assert_eq!(
        c.ovn.ovn_nb_connection.as_deref(),
        Some("tcp:192.0.2.1:6641")
    );
    assert_eq!(c.agent.root_helper, "sudo -E # keep env");
    assert_eq!(c.default.bgp_vrf, "vrf-two");
    assert_eq!(
        origin_of(&loaded, "DEFAULT", "bgp_vrf"),
        format!("{}:10", path.display())
    );
    // A continuation line joins with a newline, which oslo's list splitting keeps in the item.
    assert_eq!(
        c.default.address_scopes.as_deref(),
        Some(&["a".to_owned(), "b".to_owned(), "c".to_owned()][..])
    );
    assert_eq!(c.default.evpn_nic.as_deref(), Some("eth9"));
}

#[test]
fn syntax_errors_and_missing_sources_name_the_file() {
    let tmp = TempDir::new("syntax");
    let path = tmp.write("broken.conf", "[DEFAULT]\nreconcile_interval 5\n");
    assert_eq!(
        error_text(load_files(&[&path])),
        format!(
            "{}:2: no ':' or '=' found: \"reconcile_interval 5\"",
            path.display()
        )
    );
    let missing = tmp.0.join("missing.conf");
    let msg = error_text(load_files(&[&missing]));
    assert!(
        msg.starts_with(&format!("{}: cannot read:", missing.display())),
        "{msg}"
    );
    let sources = ConfigSources {
        config_dirs: vec![tmp.0.join("no-such-dir")],
        ..Default::default()
    };
    assert_eq!(
        error_text(load_with_env(&sources, NO_ENV)),
        format!(
            "--config-dir {}: not found",
            tmp.0.join("no-such-dir").display()
        )
    );
}

#[test]
fn oslo_default_search_takes_the_first_location_of_each_name() {
    let tmp = TempDir::new("search");
    let home = tmp.0.join("home");
    let etc = tmp.0.join("etc");
    tmp.write("etc/bgp-agent/bgp-agent.conf", "");
    tmp.write("etc/bgp-agent.conf", "");
    tmp.write("etc/ovn-bgp-agent.conf", "");
    tmp.write("etc/bgp-agent/bgp-agent.conf.d/a.conf", "");
    tmp.write("home/.bgp-agent/ovn-bgp-agent.conf.d/a.conf", "");
    let (files, dirs) = oslo_default_locations(Some(&home), &etc, None, None);
    assert_eq!(
        files,
        [
            etc.join("bgp-agent/bgp-agent.conf"),
            etc.join("ovn-bgp-agent.conf")
        ]
    );
    assert_eq!(
        dirs,
        [
            etc.join("bgp-agent/bgp-agent.conf.d"),
            home.join(".bgp-agent/ovn-bgp-agent.conf.d")
        ]
    );
    tmp.write("home/bgp-agent.conf", "");
    let (files, _) = oslo_default_locations(Some(&home), &etc, None, None);
    assert_eq!(files[0], home.join("bgp-agent.conf"));

    // Through the loader: HOME comes from the given environment.
    tmp.write(
        "home/.bgp-agent/bgp-agent.conf",
        "[DEFAULT]\nbgp_nic = nic-home\n",
    );
    let sources = ConfigSources {
        oslo_default_search: true,
        ..Default::default()
    };
    let loaded = load_with_env(&sources, [("HOME", home.to_str().unwrap())]).unwrap();
    assert_eq!(loaded.config.default.bgp_nic, "nic-home");
    assert_eq!(loaded.files[0], home.join(".bgp-agent/bgp-agent.conf"));
}

#[test]
fn every_option_is_in_the_schema_the_struct_and_the_documentation() {
    let json = serde_json::to_value(AgentConfig::default()).unwrap();
    let mut in_struct = BTreeSet::new();
    for (section, body) in json.as_object().unwrap() {
        for key in body.as_object().unwrap().keys() {
            in_struct.insert((section.clone(), key.clone()));
        }
    }
    let in_schema: BTreeSet<(String, String)> = schema::OPTIONS
        .iter()
        .map(|o| (o.section.to_owned(), o.name.to_owned()))
        .collect();
    assert_eq!(in_struct, in_schema);

    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .expect("docs/configuration.md");
    for o in schema::OPTIONS {
        let row = format!("| `{}` | `{}` |", o.section, o.name);
        assert!(
            doc.contains(&row),
            "docs/configuration.md lacks the row {row}"
        );
    }
}

// ---- check-config, run as the built binary ----

fn check_config(args: &[&str], env: &[(&str, &str)], home: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"));
    cmd.arg("check-config").args(args).env("HOME", home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run ovn-bgp-agent check-config")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
#[cfg_attr(
    not(all(feature = "nb_bgp", feature = "vrf")),
    ignore = "the fixture selects nb_ovn_bgp_driver with exposing_method vrf: needs features nb_bgp and vrf"
)]
fn check_config_prints_every_option_with_its_source() {
    let tmp = TempDir::new("cli-ok");
    let conf = fixture("bgp-agent.conf");
    let extra = tmp.write("extra.conf", "[DEFAULT]\nbgp_AS = 65001\nbgp_as = 1\n");
    let out = check_config(
        &[
            "--config-file",
            conf.to_str().unwrap(),
            "--config-file",
            extra.to_str().unwrap(),
        ],
        &[("OVN_BGP_AGENT_DEFAULT__BGP_NIC", "nic-env")],
        &tmp.0,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for line in [
        format!("[DEFAULT] bgp_AS = 65001  ({}:2)", extra.display()),
        format!(
            "[DEFAULT] reconcile_interval = 120  ({}:43)",
            conf.display()
        ),
        "[DEFAULT] bgp_nic = nic-env  (env OVN_BGP_AGENT_DEFAULT__BGP_NIC)".to_owned(),
        format!(
            "[local_ovn_cluster] peer_ips = 100.64.1.5,100.65.1.5  ({}:150)",
            conf.display()
        ),
        "[frr] vtysh_path = /usr/bin/vtysh  (default)".to_owned(),
        "[linux] netns =   (default)".to_owned(),
        format!(
            "[DEFAULT] log_file = /var/log/ovn-bgp-agent/bgp-agent.log  ({}:21)",
            conf.display()
        ),
        format!(
            "[DEFAULT] default_log_levels = amqp=WARN,oslo.privsep.daemon=INFO,stevedore=WARN  ({}:33; no effect)",
            conf.display()
        ),
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing line {line:?} in:\n{stdout}"
        );
    }
    let option_lines = stdout
        .lines()
        .filter(|l| l.starts_with('[') && !l.ends_with("no effect)"))
        .count();
    assert_eq!(option_lines, schema::OPTIONS.len(), "{stdout}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "warning: {}:3: unknown option [DEFAULT] bgp_as, ignored; did you mean bgp_AS?",
            extra.display()
        )
    );
}

#[test]
fn check_config_fails_on_a_bad_value() {
    let tmp = TempDir::new("cli-bad");
    let conf = tmp.write("bad.conf", "[DEFAULT]\nreconcile_interval = abc\n");
    let out = check_config(&["--config-file", conf.to_str().unwrap()], &[], &tmp.0);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr).trim_end(),
        format!(
            "error: {}:2: [DEFAULT] reconcile_interval = \"abc\": expected an integer from 1 to 4294967295",
            conf.display()
        )
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));

    // `run` refuses the same file before doing anything.
    let run = Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
        .args(["--config-file", conf.to_str().unwrap(), "run"])
        .env("HOME", &tmp.0)
        .output()
        .expect("run ovn-bgp-agent run");
    assert!(!run.status.success());
    assert!(
        text(&run.stderr).contains("[DEFAULT] reconcile_interval = \"abc\""),
        "{}",
        text(&run.stderr)
    );
}

#[test]
#[cfg_attr(
    not(all(feature = "sb_bgp", feature = "vrf")),
    ignore = "checks the ovn_bgp_driver/vrf pair rejection: needs features sb_bgp and vrf"
)]
fn check_config_rejects_a_pair_this_build_cannot_run() {
    let tmp = TempDir::new("cli-pair");
    let unsupported = tmp.write(
        "pair.conf",
        "[DEFAULT]\ndriver = ovn_bgp_driver\nexposing_method = vrf\n",
    );
    let out = check_config(
        &["--config-file", unsupported.to_str().unwrap()],
        &[],
        &tmp.0,
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("error: driver ovn_bgp_driver does not support exposing_method = vrf"),
        "{stderr}"
    );

    // l2vni passes the configuration (upstream accepts it) but has no backend.
    let l2vni = tmp.write("l2vni.conf", "[DEFAULT]\nexposing_method = l2vni\n");
    let out = check_config(&["--config-file", l2vni.to_str().unwrap()], &[], &tmp.0);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "error: [DEFAULT] exposing_method = l2vni: no such exposure backend in this build"
        ),
        "{stderr}"
    );
    // The same through the environment.
    let out = check_config(
        &[],
        &[("OVN_BGP_AGENT_DEFAULT__EXPOSING_METHOD", "dynamic")],
        &tmp.0,
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("exposing_method = dynamic: no such exposure backend"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn dollar_references_are_substituted_as_in_oslo() {
    let tmp = TempDir::new("dollar");
    let path = tmp.write(
        "dollar.conf",
        "[DEFAULT]\n\
         bgp_vrf = vrf-$bgp_AS\n\
         bgp_nic = ${bgp_vrf}-n\n\
         bgp_router_id = $$notaref\n\
         evpn_nic = e\\$1\n\
         \n\
         [local_ovn_cluster]\n\
         bgp_chassis_id = ${ovn.ovn_sb_ca_cert}|$bgp_nic|$expose_tenant_networks|$ 5\n\
         ovn_nb_connection = unix:$ovs_rundir\n",
    );
    // bgp_router_id "$notaref" is no IPv4 address: the escape yields a literal `$`.
    let msg = error_text(load_files(&[&path]));
    assert_eq!(
        msg,
        format!(
            "{p}:4: [DEFAULT] bgp_router_id = \"$$notaref\": expected an IPv4 address (BGP router id)\n\
             {p}:9: [local_ovn_cluster] ovn_nb_connection = \"unix:$ovs_rundir\": $ovs_rundir names no option the agent has",
            p = path.display()
        )
    );
    let fixed = tmp.write(
        "fixed.conf",
        "[DEFAULT]\nbgp_router_id = 10.0.0.1\n\n[local_ovn_cluster]\novn_nb_connection = unix:${ovs.ovs_rundir}/nb.sock\n",
    );
    let c = load_files(&[&path, &fixed]).expect("loads").config;
    assert_eq!(c.default.bgp_vrf, "vrf-64999");
    assert_eq!(c.default.bgp_nic, "vrf-64999-n");
    assert_eq!(c.default.evpn_nic.as_deref(), Some("e$1"));
    assert_eq!(
        c.local_ovn_cluster.bgp_chassis_id,
        "/etc/ipa/ca.crt|vrf-64999-n|False|$ 5"
    );
    assert_eq!(
        c.local_ovn_cluster.ovn_nb_connection,
        "unix:/var/run/openvswitch/nb.sock"
    );

    let cycle = tmp.write(
        "cycle.conf",
        "[DEFAULT]\nbgp_nic = $bgp_vrf\nbgp_vrf = $bgp_nic\n",
    );
    let msg = error_text(load_files(&[&cycle]));
    assert!(msg.contains("circular $ reference"), "{msg}");
}

#[test]
fn tilde_in_given_paths_is_the_home_directory() {
    let tmp = TempDir::new("tilde");
    tmp.write("home/conf/a.conf", "[DEFAULT]\nbgp_nic = nic-tilde\n");
    tmp.write("home/dir/b.conf", "[DEFAULT]\nbgp_vrf = vrf-tilde\n");
    let sources = ConfigSources {
        config_files: vec![PathBuf::from("~/conf/a.conf")],
        config_dirs: vec![PathBuf::from("~/dir")],
        oslo_default_search: false,
    };
    let home = tmp.0.join("home");
    let loaded = load_with_env(&sources, [("HOME", home.to_str().unwrap())]).unwrap();
    assert_eq!(loaded.config.default.bgp_nic, "nic-tilde");
    assert_eq!(loaded.config.default.bgp_vrf, "vrf-tilde");
}

#[test]
fn check_config_prints_one_error_line_per_bad_value() {
    let tmp = TempDir::new("cli-bad-many");
    let conf = tmp.write(
        "bad.conf",
        "[DEFAULT]\nevpn_udp_dstport = 99999\nexpose_tenant_networks = si\n",
    );
    let out = check_config(&["--config-file", conf.to_str().unwrap()], &[], &tmp.0);
    assert!(!out.status.success());
    let p = conf.display();
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {p}:3: [DEFAULT] expose_tenant_networks = \"si\": expected a boolean (true/false, yes/no, on/off, 1/0)\n\
             error: {p}:2: [DEFAULT] evpn_udp_dstport = \"99999\": expected a port number (0-65535)\n"
        )
    );
}

#[test]
fn check_config_listing_writes_multi_line_values_as_continuations() {
    let tmp = TempDir::new("listing");
    let conf = tmp.write(
        "multi.conf",
        "[agent]\nroot_helper = sudo\n  --preserve-env\n",
    );
    let loaded = load_files(&[&conf]).unwrap();
    assert_eq!(loaded.config.agent.root_helper, "sudo\n--preserve-env");
    let listing = ovn_bgp_agent::cli::effective_config_listing(&loaded);
    let want = format!(
        "[agent] root_helper = sudo\n    --preserve-env  ({}:2)\n",
        conf.display()
    );
    assert!(listing.contains(&want), "{listing}");
}
