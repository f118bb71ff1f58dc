//! Agent configuration: the upstream `bgp-agent.conf` options (same sections, names, types and
//! defaults as `ovn_bgp_agent/config.py`), plus the paths and device kinds upstream hard-codes,
//! in sections of their own (`[frr]`, `[ovs]`, `[linux]`).
//!
//! Loading (INI via figment with oslo semantics, TOML, environment) lives in [`mod@load`]; the
//! option table with types and meanings in [`schema`]; oslo's value types in [`value`]; oslo's
//! INI dialect in [`ini`]; one source as a figment provider in [`layer`]; oslo's `$name`
//! references in [`substitute`]. `docs/configuration.md` lists every option.
//!
//! A configuration from [`load()`] has been checked option by option ([`value`]): the AS
//! number is digits (or asdot), the router id an IPv4 address, interface names valid Linux
//! names, peer IPs and prefixes parse — safe to put in a vtysh command or a netlink request.
//! A hand-built `AgentConfig` carries no such guarantee.

pub mod ini;
pub mod layer;
pub mod load;
pub mod schema;
pub mod substitute;
pub mod value;

use serde::{Deserialize, Serialize};

pub use load::{ConfigError, ConfigSources, LoadedConfig, load, load_with_env};

/// The whole effective configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(rename = "DEFAULT")]
    pub default: DefaultSection,
    pub ovn: OvnSection,
    pub local_ovn_cluster: LocalOvnClusterSection,
    pub agent: AgentSection,
    pub frr: FrrSection,
    pub ovs: OvsSection,
    pub linux: LinuxSection,
    pub policy: PolicySection,
    pub telemetry: TelemetrySection,
}

/// `[DEFAULT]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DefaultSection {
    pub reconcile_interval: u64,
    pub frr_reconcile_interval: u64,
    pub expose_tenant_networks: bool,
    pub advertisement_method_tenant_networks: TenantAdvertisement,
    pub require_snat_disabled_for_tenant_networks: bool,
    pub expose_ipv6_gua_tenant_networks: bool,
    pub driver: String,
    pub ovsdb_connection: String,
    pub ovsdb_connection_timeout: u64,
    /// `bgp_AS`: `1..=4294967295` or asdot `A.B` (checked on load).
    #[serde(rename = "bgp_AS")]
    pub bgp_as: String,
    /// An IPv4 address (checked on load).
    pub bgp_router_id: Option<String>,
    pub evpn_local_ip: Option<std::net::IpAddr>,
    pub evpn_nic: Option<String>,
    pub evpn_udp_dstport: u16,
    pub clear_vrf_routes_on_startup: bool,
    pub delete_vrf_on_disconnect: bool,
    pub bgp_nic: String,
    pub bgp_vrf: String,
    pub bgp_vrf_table_id: u32,
    pub address_scopes: Option<Vec<String>>,
    pub exposing_method: String,
    /// oslo.log `debug`: log at debug level.
    pub debug: bool,
    /// oslo.log: where and how the agent logs (`crate::logging`).
    pub log_file: Option<std::path::PathBuf>,
    pub log_dir: Option<std::path::PathBuf>,
    pub use_json: bool,
    pub use_syslog: bool,
    pub syslog_log_facility: String,
    pub use_journal: bool,
    pub use_stderr: bool,
}

impl Default for DefaultSection {
    fn default() -> Self {
        Self {
            reconcile_interval: 300,
            frr_reconcile_interval: 15,
            expose_tenant_networks: false,
            advertisement_method_tenant_networks: TenantAdvertisement::Host,
            require_snat_disabled_for_tenant_networks: false,
            expose_ipv6_gua_tenant_networks: false,
            driver: "ovn_bgp_driver".to_owned(),
            ovsdb_connection: "unix:/usr/local/var/run/openvswitch/db.sock".to_owned(),
            ovsdb_connection_timeout: 180,
            bgp_as: "64999".to_owned(),
            bgp_router_id: None,
            evpn_local_ip: None,
            evpn_nic: None,
            evpn_udp_dstport: 4789,
            clear_vrf_routes_on_startup: false,
            delete_vrf_on_disconnect: true,
            bgp_nic: "bgp-nic".to_owned(),
            bgp_vrf: "bgp-vrf".to_owned(),
            bgp_vrf_table_id: 10,
            address_scopes: None,
            exposing_method: "underlay".to_owned(),
            debug: false,
            log_file: None,
            log_dir: None,
            use_json: false,
            use_syslog: false,
            syslog_log_facility: "LOG_USER".to_owned(),
            use_journal: false,
            use_stderr: false,
        }
    }
}

/// `advertisement_method_tenant_networks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantAdvertisement {
    Host,
    Subnet,
}

/// `[ovn]` (every option also accepted in `[DEFAULT]`, its deprecated group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OvnSection {
    pub ovn_sb_private_key: String,
    pub ovn_sb_certificate: String,
    pub ovn_sb_ca_cert: String,
    pub ovn_sb_connection: Option<String>,
    pub ovn_nb_private_key: String,
    pub ovn_nb_certificate: String,
    pub ovn_nb_ca_cert: String,
    pub ovn_nb_connection: Option<String>,
    /// (New) NB driver: monitor every VM port (type `""`/`virtual`) of the Northbound instead
    /// of the ports bound here, for live migrations written without `activation-strategy`.
    pub nb_watch_all_vm_ports: bool,
    /// (New) Largest message accepted from an OVSDB server, in bytes.
    pub ovsdb_max_message_size: u64,
}

impl Default for OvnSection {
    fn default() -> Self {
        Self {
            ovn_sb_private_key: "/etc/pki/tls/private/ovn_bgp_agent.key".to_owned(),
            ovn_sb_certificate: "/etc/pki/tls/certs/ovn_bgp_agent.crt".to_owned(),
            ovn_sb_ca_cert: "/etc/ipa/ca.crt".to_owned(),
            ovn_sb_connection: None,
            ovn_nb_private_key: "/etc/pki/tls/private/ovn_bgp_agent.key".to_owned(),
            ovn_nb_certificate: "/etc/pki/tls/certs/ovn_bgp_agent.crt".to_owned(),
            ovn_nb_ca_cert: "/etc/ipa/ca.crt".to_owned(),
            ovn_nb_connection: None,
            nb_watch_all_vm_ports: false,
            ovsdb_max_message_size: 256 << 20,
        }
    }
}

/// `[local_ovn_cluster]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalOvnClusterSection {
    pub ovn_nb_connection: String,
    pub external_nics: Vec<String>,
    pub peer_ips: Vec<String>,
    pub provider_networks_pool_prefixes: Vec<String>,
    pub bgp_chassis_id: String,
}

impl Default for LocalOvnClusterSection {
    fn default() -> Self {
        Self {
            ovn_nb_connection: "unix:/var/run/ovn/ovnnb_db.sock".to_owned(),
            external_nics: Vec::new(),
            peer_ips: Vec::new(),
            provider_networks_pool_prefixes: vec!["192.168.0.0/16".to_owned()],
            bgp_chassis_id: "bgp".to_owned(),
        }
    }
}

/// `[agent]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSection {
    pub root_helper: String,
}

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            root_helper: "sudo".to_owned(),
        }
    }
}

/// `[frr]` (new: upstream hard-codes these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FrrSection {
    pub vtysh_path: String,
    pub vty_socket_dir: String,
    /// Seconds one vtysh invocation may take.
    pub vtysh_timeout: u64,
    /// Where the FRR objects the agent created (and how to remove them) are recorded, so that
    /// ownership survives an agent restart.
    pub state_file: String,
}

impl Default for FrrSection {
    fn default() -> Self {
        Self {
            vtysh_path: "/usr/bin/vtysh".to_owned(),
            vty_socket_dir: "/run/frr/".to_owned(),
            vtysh_timeout: 30,
            state_file: "/var/lib/ovn-bgp-agent/frr-objects.json".to_owned(),
        }
    }
}

/// `[ovs]` (new).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OvsSection {
    /// OVS run directory (where `<bridge>.mgmt` sockets live); passed to ovs-ofctl/ovs-vsctl.
    pub ovs_rundir: String,
    pub ovs_vsctl_path: String,
    pub ovs_ofctl_path: String,
    /// Seconds between checks that the agent's flows are still installed (OVS restart detection).
    pub flow_check_interval: u64,
}

impl Default for OvsSection {
    fn default() -> Self {
        Self {
            ovs_rundir: "/var/run/openvswitch".to_owned(),
            ovs_vsctl_path: "ovs-vsctl".to_owned(),
            ovs_ofctl_path: "ovs-ofctl".to_owned(),
            flow_check_interval: 5,
        }
    }
}

/// `[linux]` (new).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxSection {
    pub rt_tables_path: String,
    /// Link kind of `bgp_vrf`: `vrf` (production) or `bridge` (kernels without VRF support).
    pub vrf_device_kind: String,
    /// Link kind of `bgp_nic`: `dummy` (production) or `ifb` (kernels without dummy).
    pub nic_device_kind: String,
    /// Priority of the rules the agent installs (upstream: none, so pyroute2's 32000).
    pub rule_priority: u32,
    /// Network namespace the agent configures (empty: its own).
    pub netns: Option<String>,
}

impl Default for LinuxSection {
    fn default() -> Self {
        Self {
            rt_tables_path: "/etc/iproute2/rt_tables".to_owned(),
            vrf_device_kind: "vrf".to_owned(),
            nic_device_kind: "dummy".to_owned(),
            rule_priority: 32000,
            netns: None,
        }
    }
}

/// `[telemetry]` (new): how the running agent is seen into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TelemetrySection {
    /// `host:port` of the Prometheus `/metrics`, `/healthz` and `/readyz` listener; unset: off.
    pub metrics_address: Option<String>,
    /// Unix socket of `ovn-bgp-agent status`/`explain`/`health` (mode 0660); empty: off.
    pub control_socket: String,
}

impl Default for TelemetrySection {
    fn default() -> Self {
        Self {
            metrics_address: None,
            control_socket: "/run/ovn-bgp-agent/control.sock".to_owned(),
        }
    }
}

/// `[policy]` (new): what the policy stage refuses to expose, whatever a database says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicySection {
    /// IPv4 routes and subnets shorter than this are refused (a tenant `0.0.0.0/1` would
    /// otherwise hijack half the fabric's routing).
    pub min_prefix_length_ipv4: u8,
    /// The same for IPv6.
    pub min_prefix_length_ipv6: u8,
}

impl Default for PolicySection {
    fn default() -> Self {
        Self {
            min_prefix_length_ipv4: 8,
            min_prefix_length_ipv6: 32,
        }
    }
}
