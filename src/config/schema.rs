//! The option table: every option the agent reads, with its type and what it means, plus the
//! options other oslo libraries register in the same file (accepted, without effect), and the
//! suggestions for misspelt names. Values are converted by [`super::value`].

/// Upstream's `[DEFAULT] driver` choices (`config.py`).
pub const UPSTREAM_DRIVERS: &[&str] = &[
    "ovn_bgp_driver",
    "ovn_evpn_driver",
    "ovn_stretched_l2_bgp_driver",
    "nb_ovn_bgp_driver",
];
/// Upstream's `[DEFAULT] exposing_method` choices.
pub const UPSTREAM_EXPOSING_METHODS: &[&str] = &["underlay", "l2vni", "vrf", "dynamic", "ovn"];

/// The value type of an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptType {
    /// oslo `IntOpt` with the bounds the agent needs.
    Int { min: i64, max: i64 },
    /// oslo `PortOpt`: 0-65535.
    Port,
    /// oslo `BoolOpt`.
    Bool,
    /// oslo `StrOpt` without constraints.
    Str,
    /// A file or directory path or a command: any non-empty string.
    Path,
    /// oslo `StrOpt(choices=…)`.
    Choice(&'static [&'static str]),
    /// `[DEFAULT] driver`: upstream's choices plus any driver registered in this build.
    Driver,
    /// `[DEFAULT] exposing_method`: upstream's choices plus any backend in this build.
    ExposingMethod,
    /// OVSDB remote, oslo `StrOpt(regex='^(tcp|ssl|unix):.+')`.
    Connection,
    /// oslo `IPOpt`: an IPv4 or IPv6 address.
    Ip,
    /// BGP AS number: `1..4294967295` or asdot `A.B`.
    AsNumber,
    /// BGP router id: an IPv4 address.
    RouterId,
    /// A Linux interface name (1-15 bytes, no `/`, `:` or whitespace).
    IfName,
    /// A routing table id the agent may own (not 0 or the kernel's 253-255).
    RouteTable,
    /// A network namespace name.
    Netns,
    /// oslo.log's `syslog_log_facility`: `LOG_USER`, `local0`, ... (see
    /// [`crate::logging::syslog_facility`]).
    SyslogFacility,
    /// oslo `ListOpt`: comma-separated items.
    List(ListItem),
}

/// The item type of a list option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListItem {
    Str,
    IfName,
    Ip,
    /// An IP prefix such as `192.168.0.0/16`.
    Prefix,
}

/// Whether an option exists upstream or is new in this agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Introduced {
    Upstream,
    New,
}

/// One option the agent reads.
#[derive(Debug, Clone, Copy)]
pub struct OptSpec {
    /// `DEFAULT` or a lowercase section name.
    pub section: &'static str,
    /// The name as oslo spells it (option names are case-sensitive: `bgp_AS`).
    pub name: &'static str,
    pub ty: OptType,
    /// May be unset (`None`); an empty value unsets it where oslo's type allows an empty value.
    pub optional: bool,
    /// oslo `deprecated_group='DEFAULT'`: also read from `[DEFAULT]` (a file's own `[ovn]` wins).
    pub deprecated_in_default: bool,
    pub introduced: Introduced,
    pub help: &'static str,
}

const fn opt(
    section: &'static str,
    name: &'static str,
    ty: OptType,
    help: &'static str,
) -> OptSpec {
    OptSpec {
        section,
        name,
        ty,
        optional: false,
        deprecated_in_default: false,
        introduced: Introduced::Upstream,
        help,
    }
}

const fn optional(mut o: OptSpec) -> OptSpec {
    o.optional = true;
    o
}

const fn also_default(mut o: OptSpec) -> OptSpec {
    o.deprecated_in_default = true;
    o
}

const fn new(mut o: OptSpec) -> OptSpec {
    o.introduced = Introduced::New;
    o
}

const SECONDS: OptType = OptType::Int {
    min: 1,
    max: u32::MAX as i64,
};

/// Every option the agent reads, in the order `check-config` prints them.
pub static OPTIONS: &[OptSpec] = &[
    // [DEFAULT]
    opt(
        "DEFAULT",
        "reconcile_interval",
        SECONDS,
        "Seconds between full re-syncs.",
    ),
    opt(
        "DEFAULT",
        "frr_reconcile_interval",
        SECONDS,
        "Seconds between FRR configuration re-syncs (repairs FRR after a restart).",
    ),
    opt(
        "DEFAULT",
        "expose_tenant_networks",
        OptType::Bool,
        "Expose tenant network IPs through the gateway chassis; takes precedence over expose_ipv6_gua_tenant_networks.",
    ),
    opt(
        "DEFAULT",
        "advertisement_method_tenant_networks",
        OptType::Choice(&["host", "subnet"]),
        "NB driver: advertise tenant networks per host (/32, /128) or per subnet; subnet also redistributes kernel routes in FRR.",
    ),
    opt(
        "DEFAULT",
        "require_snat_disabled_for_tenant_networks",
        OptType::Bool,
        "NB driver: expose a tenant subnet only if its router does not SNAT it.",
    ),
    opt(
        "DEFAULT",
        "expose_ipv6_gua_tenant_networks",
        OptType::Bool,
        "Expose only IPv6 global-unicast tenant IPs and subnets.",
    ),
    opt(
        "DEFAULT",
        "driver",
        OptType::Driver,
        "Driver: ovn_bgp_driver, nb_ovn_bgp_driver, ovn_evpn_driver or ovn_stretched_l2_bgp_driver.",
    ),
    opt(
        "DEFAULT",
        "ovsdb_connection",
        OptType::Connection,
        "Local OVS database (tcp:IP:PORT, ssl:IP:PORT or unix:PATH).",
    ),
    opt(
        "DEFAULT",
        "ovsdb_connection_timeout",
        SECONDS,
        "Seconds an OVN SB/NB transaction may take.",
    ),
    opt(
        "DEFAULT",
        "bgp_AS",
        OptType::AsNumber,
        "Local AS number used in the FRR configuration.",
    ),
    optional(opt(
        "DEFAULT",
        "bgp_router_id",
        OptType::RouterId,
        "BGP router id for the VRF; unset: taken from FRR's default instance.",
    )),
    optional(opt(
        "DEFAULT",
        "evpn_local_ip",
        OptType::Ip,
        "Local VXLAN tunnel endpoint IP (required by the vrf exposing method).",
    )),
    optional(opt(
        "DEFAULT",
        "evpn_nic",
        OptType::IfName,
        "Interface whose IP is the VXLAN tunnel endpoint when evpn_local_ip is unset (EVPN driver).",
    )),
    opt(
        "DEFAULT",
        "evpn_udp_dstport",
        OptType::Port,
        "VXLAN UDP destination port.",
    ),
    opt(
        "DEFAULT",
        "clear_vrf_routes_on_startup",
        OptType::Bool,
        "Flush the bgp_vrf_table_id routing table at start.",
    ),
    opt(
        "DEFAULT",
        "delete_vrf_on_disconnect",
        OptType::Bool,
        "vrf exposing method: delete the per-VNI VRF (kernel and FRR) when its last network goes.",
    ),
    opt(
        "DEFAULT",
        "bgp_nic",
        OptType::IfName,
        "Dummy interface inside bgp_vrf that carries the exposed /32 and /128 addresses.",
    ),
    opt(
        "DEFAULT",
        "bgp_vrf",
        OptType::IfName,
        "VRF used to leak the exposed routes into BGP.",
    ),
    opt(
        "DEFAULT",
        "bgp_vrf_table_id",
        OptType::RouteTable,
        "Routing table of bgp_vrf.",
    ),
    optional(opt(
        "DEFAULT",
        "address_scopes",
        OptType::List(ListItem::Str),
        "Neutron address scope IDs whose tenant networks may be exposed; unset or empty: no filter.",
    )),
    opt(
        "DEFAULT",
        "exposing_method",
        OptType::ExposingMethod,
        "How exposed IPs reach the fabric: underlay, vrf, ovn (l2vni and dynamic are accepted but have no backend).",
    ),
    opt(
        "DEFAULT",
        "debug",
        OptType::Bool,
        "oslo.log: log at debug level (RUST_LOG overrides); SIGHUP re-reads it.",
    ),
    optional(opt(
        "DEFAULT",
        "log_file",
        OptType::Path,
        "oslo.log: append logs to this file (relative: inside log_dir); reopened when moved or deleted, and on SIGHUP.",
    )),
    optional(opt(
        "DEFAULT",
        "log_dir",
        OptType::Path,
        "oslo.log: directory of a relative log_file; alone: log to <log_dir>/ovn-bgp-agent.log.",
    )),
    opt(
        "DEFAULT",
        "use_json",
        OptType::Bool,
        "oslo.log: every log output (file, stderr, syslog) writes one JSON object per line.",
    ),
    opt(
        "DEFAULT",
        "use_syslog",
        OptType::Bool,
        "oslo.log: also send logs to syslog (/dev/log) with syslog_log_facility.",
    ),
    opt(
        "DEFAULT",
        "syslog_log_facility",
        OptType::SyslogFacility,
        "oslo.log: syslog facility of use_syslog (LOG_USER, LOG_DAEMON, LOG_LOCAL0..7, ...; the LOG_ prefix and case are optional).",
    ),
    opt(
        "DEFAULT",
        "use_journal",
        OptType::Bool,
        "oslo.log: also send logs to journald (native protocol, structured fields).",
    ),
    opt(
        "DEFAULT",
        "use_stderr",
        OptType::Bool,
        "oslo.log: also log to stderr when log_file is set (without log_file the agent always logs to stderr).",
    ),
    // [agent]
    opt(
        "agent",
        "root_helper",
        OptType::Str,
        "Upstream: command prefix for privsep-helper. Accepted; the agent runs its helpers directly.",
    ),
    // [ovn]
    also_default(opt(
        "ovn",
        "ovn_sb_private_key",
        OptType::Path,
        "Private key (PEM) for ssl: connections to the OVN SB database.",
    )),
    also_default(opt(
        "ovn",
        "ovn_sb_certificate",
        OptType::Path,
        "Certificate (PEM) for ovn_sb_private_key.",
    )),
    also_default(opt(
        "ovn",
        "ovn_sb_ca_cert",
        OptType::Path,
        "CA certificate (PEM) to verify the OVN SB database.",
    )),
    optional(also_default(opt(
        "ovn",
        "ovn_sb_connection",
        OptType::Connection,
        "OVN SB database remote; unset: the local OVS external_ids:ovn-remote.",
    ))),
    also_default(opt(
        "ovn",
        "ovn_nb_private_key",
        OptType::Path,
        "Private key (PEM) for ssl: connections to the OVN NB database.",
    )),
    also_default(opt(
        "ovn",
        "ovn_nb_certificate",
        OptType::Path,
        "Certificate (PEM) for ovn_nb_private_key.",
    )),
    also_default(opt(
        "ovn",
        "ovn_nb_ca_cert",
        OptType::Path,
        "CA certificate (PEM) to verify the OVN NB database.",
    )),
    optional(also_default(opt(
        "ovn",
        "ovn_nb_connection",
        OptType::Connection,
        "OVN NB database remote; unset: the local OVS external_ids:ovn-nb-remote.",
    ))),
    new(opt(
        "ovn",
        "nb_watch_all_vm_ports",
        OptType::Bool,
        "NB driver: monitor every VM port of the Northbound, as upstream does, so that the destination of a live migration Neutron writes without activation-strategy (vhost-user ports, or live_migration_activation_strategy = \"\") exposes the port during the copy; memory and start time then grow with the cloud.",
    )),
    new(opt(
        "ovn",
        "ovsdb_max_message_size",
        OptType::Int {
            min: 1 << 20,
            max: 1 << 34,
        },
        "Largest message accepted from an OVSDB server (SB, NB, local OVS), in bytes; also the budget of messages and change batches queued inside the agent. A larger message ends the session with an error naming this option.",
    )),
    // [local_ovn_cluster]
    opt(
        "local_ovn_cluster",
        "ovn_nb_connection",
        OptType::Connection,
        "ovn exposing method: the node-local OVN NB database.",
    ),
    opt(
        "local_ovn_cluster",
        "external_nics",
        OptType::List(ListItem::IfName),
        "ovn exposing method: NICs facing the fabric.",
    ),
    opt(
        "local_ovn_cluster",
        "peer_ips",
        OptType::List(ListItem::Ip),
        "ovn exposing method: next hops (ECMP) and BFD peers, each on the fabric network whose subnet holds it.",
    ),
    opt(
        "local_ovn_cluster",
        "provider_networks_pool_prefixes",
        OptType::List(ListItem::Prefix),
        "ovn exposing method: prefixes of the provider networks.",
    ),
    opt(
        "local_ovn_cluster",
        "bgp_chassis_id",
        OptType::Str,
        "ovn exposing method: suffix of ovn-bridge-mappings-<id> and name of the local gateway chassis.",
    ),
    // [frr] (new)
    new(opt("frr", "vtysh_path", OptType::Path, "vtysh binary.")),
    new(opt(
        "frr",
        "vty_socket_dir",
        OptType::Path,
        "Directory of FRR's vty sockets (vtysh --vty_socketdir).",
    )),
    new(opt(
        "frr",
        "vtysh_timeout",
        SECONDS,
        "Seconds one vtysh invocation may take.",
    )),
    new(opt(
        "frr",
        "state_file",
        OptType::Path,
        "File recording the FRR objects (VRF stanzas, ND interfaces) the agent created, so it removes only those, also after a restart.",
    )),
    // [ovs] (new)
    new(opt(
        "ovs",
        "ovs_rundir",
        OptType::Path,
        "OVS run directory (where <bridge>.mgmt sockets live).",
    )),
    new(opt(
        "ovs",
        "ovs_vsctl_path",
        OptType::Path,
        "ovs-vsctl binary.",
    )),
    new(opt(
        "ovs",
        "ovs_ofctl_path",
        OptType::Path,
        "ovs-ofctl binary.",
    )),
    new(opt(
        "ovs",
        "flow_check_interval",
        SECONDS,
        "Seconds between checks that the agent's OpenFlow flows are still installed.",
    )),
    // [linux] (new)
    new(opt(
        "linux",
        "rt_tables_path",
        OptType::Path,
        "iproute2 routing table names file.",
    )),
    new(opt(
        "linux",
        "vrf_device_kind",
        OptType::Choice(&["vrf", "bridge"]),
        "Link kind of bgp_vrf: vrf, or bridge on kernels without VRF support (tests).",
    )),
    new(opt(
        "linux",
        "nic_device_kind",
        OptType::Choice(&["dummy", "ifb"]),
        "Link kind of bgp_nic: dummy, or ifb on kernels without dummy (tests).",
    )),
    new(opt(
        "linux",
        "rule_priority",
        OptType::Int { min: 1, max: 32765 },
        "Priority of the ip rules the agent installs (upstream: the kernel's pick, 32000 with pyroute2).",
    )),
    new(optional(opt(
        "linux",
        "netns",
        OptType::Netns,
        "Network namespace the agent configures; unset: its own.",
    ))),
    // [telemetry] (new)
    new(optional(opt(
        "telemetry",
        "metrics_address",
        OptType::Str,
        "host:port of the Prometheus /metrics, /healthz and /readyz listener; unset: off.",
    ))),
    new(opt(
        "telemetry",
        "control_socket",
        OptType::Str,
        "Unix socket (mode 0660) of ovn-bgp-agent status, explain and health; empty: off.",
    )),
    // [policy] (new)
    new(opt(
        "policy",
        "min_prefix_length_ipv4",
        OptType::Int { min: 0, max: 32 },
        "IPv4 routes and subnets shorter than this are never exposed.",
    )),
    new(opt(
        "policy",
        "min_prefix_length_ipv6",
        OptType::Int { min: 0, max: 128 },
        "IPv6 routes and subnets shorter than this are never exposed.",
    )),
];

/// Options other oslo libraries register in the same file: accepted and recorded, no effect
/// (the agent formats its own log lines, needs no privsep daemon and no lock files).
pub static NO_EFFECT: &[(&str, &[&str])] = &[
    (
        "DEFAULT",
        &[
            // oslo.log
            "verbose",
            "log_config_append",
            "log_config",
            "log_date_format",
            "watch_log_file",
            "log_color",
            "use_eventlog",
            "log_rotate_interval",
            "log_rotate_interval_type",
            "max_logfile_count",
            "max_logfile_size_mb",
            "log_rotation_type",
            "logging_context_format_string",
            "logging_default_format_string",
            "logging_debug_format_suffix",
            "logging_exception_prefix",
            "logging_user_identity_format",
            "default_log_levels",
            "publish_errors",
            "instance_format",
            "instance_uuid_format",
            "rate_limit_interval",
            "rate_limit_burst",
            "rate_limit_except_level",
            "fatal_deprecations",
        ],
    ),
    // Options of older upstream releases.
    ("agent", &["use_helper_for_ns_read", "root_helper_daemon"]),
    (
        "oslo_concurrency",
        &["disable_process_locking", "lock_path"],
    ),
    ("privsep", PRIVSEP),
    ("privsep_ovs_vsctl", PRIVSEP),
    ("privsep_vtysh", PRIVSEP),
];

const PRIVSEP: &[&str] = &[
    "helper_command",
    "user",
    "group",
    "capabilities",
    "thread_pool_size",
    "logger_name",
    "log_daemon_traceback",
];

/// Old option names oslo still reads (`deprecated_name`): `(section, old, current)`.
pub static DEPRECATED_NAMES: &[(&str, &str, &str)] = &[
    ("DEFAULT", "logfile", "log_file"),
    ("DEFAULT", "logdir", "log_dir"),
];

/// The option an old name (`[DEFAULT] logfile`) stands for.
pub fn find_deprecated_name(section: &str, name: &str) -> Option<&'static OptSpec> {
    DEPRECATED_NAMES
        .iter()
        .find(|(s, old, _)| *s == section && *old == name)
        .and_then(|(s, _, current)| find(s, current))
}

/// oslo's group-name rule: `DEFAULT` stays, every other section name is lowercased
/// (`[OVN]` is `[ovn]`; `[default]` is not `[DEFAULT]`).
pub fn normalize_section(name: &str) -> String {
    if name == "DEFAULT" {
        name.to_owned()
    } else {
        name.to_lowercase()
    }
}

/// The option `[section] name` (section already normalized; names are case-sensitive).
pub fn find(section: &str, name: &str) -> Option<&'static OptSpec> {
    OPTIONS
        .iter()
        .find(|o| o.section == section && o.name == name)
}

/// The `[ovn]` option that `[DEFAULT] name` is a deprecated spelling of.
pub fn find_deprecated_default(name: &str) -> Option<&'static OptSpec> {
    OPTIONS
        .iter()
        .find(|o| o.deprecated_in_default && o.name == name)
}

/// Whether `[section] name` is an option of another oslo library (accepted, no effect).
pub fn is_no_effect(section: &str, name: &str) -> bool {
    NO_EFFECT
        .iter()
        .any(|(s, names)| *s == section && names.contains(&name))
}

/// Every section name the agent accepts.
pub fn known_sections() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for s in OPTIONS
        .iter()
        .map(|o| o.section)
        .chain(NO_EFFECT.iter().map(|(s, _)| *s))
    {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Suggest what an unknown `[section] name` was meant to be, e.g. `[DEFAULT] bgp_AS`.
pub fn suggest_option(section: &str, name: &str) -> Option<String> {
    // The right name in the wrong section.
    if let Some(o) = OPTIONS.iter().find(|o| o.name == name) {
        return Some(format!("[{}] {}", o.section, o.name));
    }
    let in_section = OPTIONS
        .iter()
        .filter(|o| o.section == section)
        .map(|o| (o.section, o.name))
        .chain(
            NO_EFFECT
                .iter()
                .filter(|(s, _)| *s == section)
                .flat_map(|(s, names)| names.iter().map(move |n| (*s, *n))),
        );
    if let Some((_, n)) = closest(name, in_section) {
        return Some(n.to_owned());
    }
    let anywhere = OPTIONS.iter().map(|o| (o.section, o.name));
    closest(name, anywhere).map(|(s, n)| format!("[{s}] {n}"))
}

/// Suggest the section an unknown section name was meant to be.
pub fn suggest_section(name: &str) -> Option<&'static str> {
    closest(name, known_sections().into_iter().map(|s| (s, s))).map(|(s, _)| s)
}

/// The candidate nearest to `name` by case-insensitive edit distance, if near enough to be a typo.
fn closest(
    name: &str,
    candidates: impl Iterator<Item = (&'static str, &'static str)>,
) -> Option<(&'static str, &'static str)> {
    let lower = name.to_lowercase();
    let limit = (name.chars().count() / 4).max(2);
    candidates
        .map(|(s, n)| (strsim::levenshtein(&lower, &n.to_lowercase()), s, n))
        .filter(|(d, _, _)| *d <= limit)
        .min_by_key(|(d, _, _)| *d)
        .map(|(_, s, n)| (s, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(
            suggest_option("DEFAULT", "bgp_as").as_deref(),
            Some("bgp_AS")
        );
        assert_eq!(
            suggest_option("DEFAULT", "root_helper").as_deref(),
            Some("[agent] root_helper")
        );
        assert_eq!(
            suggest_option("DEFAULT", "reconcile_intervall").as_deref(),
            Some("reconcile_interval")
        );
        assert_eq!(suggest_option("DEFAULT", "zzzzzzzz"), None);
        assert_eq!(suggest_section("default"), Some("DEFAULT"));
    }
}
