//! The option table: every option the agent reads, with its oslo type and what it means, plus
//! the options other oslo libraries register in the same file (accepted, without effect).
//!
//! Values are converted the way oslo.config's types do (`oslo_config/types.py`): booleans
//! `true/false/yes/no/on/off/1/0` in any case, integers in Python `int()` syntax, lists split on
//! commas with each item trimmed. Where upstream hands a string to vtysh, netlink or OVN
//! unchecked (AS number, router id, interface names, peer IPs, prefixes) the agent checks it here.

use std::net::{IpAddr, Ipv4Addr};

use figment::value::Value;

use crate::plugin;

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
        "oslo.log: log at debug level (RUST_LOG overrides).",
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
        "ovn exposing method: next hops (ECMP) and BFD peers, in bridge-mapping order.",
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
];

/// Options other oslo libraries register in the same file: accepted and recorded, no effect
/// (the agent logs through tracing, needs no privsep daemon and no lock files).
pub static NO_EFFECT: &[(&str, &[&str])] = &[
    (
        "DEFAULT",
        &[
            // oslo.log
            "verbose",
            "log_config_append",
            "log_config",
            "log_date_format",
            "log_file",
            "logfile",
            "log_dir",
            "logdir",
            "watch_log_file",
            "use_syslog",
            "use_journal",
            "use_json",
            "syslog_log_facility",
            "use_stderr",
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

/// Convert a value as written (a string from INI/env, or a TOML value) to the option's type.
/// `Ok(None)` means unset. `Err` says what was expected.
pub fn convert(spec: &OptSpec, value: &Value) -> Result<Option<Value>, String> {
    if let OptType::List(item) = spec.ty {
        let items = list_items(value)?;
        if spec.optional && items.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, raw) in items.iter().enumerate() {
            check_list_item(item, raw)
                .map_err(|e| format!("list item {} ({raw:?}): {e}", i + 1))?;
            out.push(Value::from(raw.clone()));
        }
        return Ok(Some(Value::from(out)));
    }
    match value {
        Value::Bool(_, b) if spec.ty == OptType::Bool => return Ok(Some(Value::from(*b))),
        Value::Num(_, n) if is_int(spec.ty) => {
            let n = n.to_i128().ok_or_else(|| expected(spec.ty))?;
            return int_in_range(spec.ty, n).map(Some);
        }
        Value::String(..) => {}
        _ => return Err(expected(spec.ty)),
    }
    let text = value.as_str().unwrap_or_default();
    if spec.optional && text.is_empty() && allows_empty_as_unset(spec.ty) {
        return Ok(None);
    }
    convert_str(spec.ty, text).map(Some)
}

fn is_int(ty: OptType) -> bool {
    matches!(
        ty,
        OptType::Int { .. } | OptType::Port | OptType::RouteTable
    )
}

/// oslo turns an empty string into "" for `StrOpt` (falsy, as unset) but refuses it for
/// typed options and for a `regex` that needs characters; the agent does the same.
fn allows_empty_as_unset(ty: OptType) -> bool {
    matches!(
        ty,
        OptType::Str | OptType::RouterId | OptType::IfName | OptType::Netns
    )
}

fn expected(ty: OptType) -> String {
    match ty {
        OptType::Int { min, max } => format!("expected an integer from {min} to {max}"),
        OptType::Port => "expected a port number (0-65535)".to_owned(),
        OptType::Bool => "expected a boolean (true/false, yes/no, on/off, 1/0)".to_owned(),
        OptType::Str => "expected a string".to_owned(),
        OptType::Path => "expected a non-empty path".to_owned(),
        OptType::Choice(c) => format!("expected one of: {}", c.join(", ")),
        OptType::Driver => format!("expected one of: {}", driver_choices().join(", ")),
        OptType::ExposingMethod => {
            format!("expected one of: {}", exposing_choices().join(", "))
        }
        OptType::Connection => {
            "expected an OVSDB connection string matching ^(tcp|ssl|unix):.+".to_owned()
        }
        OptType::Ip => "expected an IPv4 or IPv6 address".to_owned(),
        OptType::AsNumber => {
            "expected an AS number (1-4294967295, or asdot A.B with A,B in 0-65535)".to_owned()
        }
        OptType::RouterId => "expected an IPv4 address (BGP router id)".to_owned(),
        OptType::IfName => {
            "expected an interface name (1-15 bytes, no '/', ':' or whitespace)".to_owned()
        }
        OptType::RouteTable => {
            "expected a routing table id from 1 to 4294967295 other than the kernel's 253 (default), 254 (main) and 255 (local)".to_owned()
        }
        OptType::Netns => "expected a network namespace name".to_owned(),
        OptType::List(_) => "expected a comma-separated list".to_owned(),
    }
}

/// Driver names accepted by the configuration: upstream's, plus any in this build (an
/// out-of-tree driver registered through `inventory`). Whether the build has it is checked at
/// plugin selection.
pub fn driver_choices() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = UPSTREAM_DRIVERS.to_vec();
    for d in plugin::drivers() {
        if !v.contains(&d.name) {
            v.push(d.name);
        }
    }
    v
}

/// `exposing_method` values accepted by the configuration (see [`driver_choices`]).
pub fn exposing_choices() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = UPSTREAM_EXPOSING_METHODS.to_vec();
    for b in plugin::backends() {
        if !v.contains(&b.name) {
            v.push(b.name);
        }
    }
    v
}

fn convert_str(ty: OptType, s: &str) -> Result<Value, String> {
    let ok = |v: bool| {
        if v {
            Ok(Value::from(s.to_owned()))
        } else {
            Err(expected(ty))
        }
    };
    match ty {
        OptType::Int { .. } | OptType::Port | OptType::RouteTable => {
            let n = parse_python_int(s).ok_or_else(|| expected(ty))?;
            int_in_range(ty, n)
        }
        OptType::Bool => parse_bool(s).map(Value::from).ok_or_else(|| expected(ty)),
        OptType::Str => Ok(Value::from(s.to_owned())),
        OptType::Path => ok(!s.is_empty()),
        OptType::Choice(c) => ok(c.contains(&s)),
        OptType::Driver => ok(driver_choices().contains(&s)),
        OptType::ExposingMethod => ok(exposing_choices().contains(&s)),
        OptType::Connection => ok(is_connection(s)),
        OptType::Ip => ok(s.parse::<IpAddr>().is_ok()),
        OptType::AsNumber => ok(is_as_number(s)),
        OptType::RouterId => ok(s.parse::<Ipv4Addr>().is_ok()),
        OptType::IfName => ok(is_ifname(s)),
        OptType::Netns => ok(is_netns(s)),
        OptType::List(_) => Err(expected(ty)),
    }
}

fn int_in_range(ty: OptType, n: i128) -> Result<Value, String> {
    let (min, max): (i128, i128) = match ty {
        OptType::Int { min, max } => (min.into(), max.into()),
        OptType::Port => (0, 65535),
        OptType::RouteTable => {
            if matches!(n, 0 | 253..=255) {
                return Err(expected(ty));
            }
            (1, u32::MAX.into())
        }
        _ => return Err(expected(ty)),
    };
    if n < min || n > max {
        return Err(expected(ty));
    }
    // In range of u32 or i64 by construction.
    Ok(u64::try_from(n)
        .map(Value::from)
        .unwrap_or_else(|_| Value::from(n as i64)))
}

/// oslo `types.Boolean`: case-insensitive true/1/on/yes and false/0/off/no.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Some(true),
        "false" | "0" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// Python `int()`: optional sign, decimal digits, single underscores between digits.
pub fn parse_python_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let n: i128 = digits.replace('_', "").parse().ok()?;
    Some(if neg { -n } else { n })
}

fn is_connection(s: &str) -> bool {
    ["tcp:", "ssl:", "unix:"]
        .iter()
        .any(|p| s.strip_prefix(p).is_some_and(|rest| !rest.is_empty()))
}

fn is_as_number(s: &str) -> bool {
    let plain = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && t.len() <= 10;
    match s.split_once('.') {
        None => {
            plain(s)
                && s.parse::<u64>()
                    .is_ok_and(|n| (1..=u32::MAX as u64).contains(&n))
        }
        Some((hi, lo)) => {
            plain(hi)
                && plain(lo)
                && hi.parse::<u32>().is_ok_and(|h| h <= 65535)
                && lo.parse::<u32>().is_ok_and(|l| l <= 65535)
                && (hi, lo) != ("0", "0")
        }
    }
}

/// The kernel's `dev_valid_name`.
pub fn is_ifname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && !s
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c == '\0')
}

fn is_netns(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s != "."
        && s != ".."
        && !s
            .chars()
            .any(|c| c == '/' || c == '\0' || c.is_whitespace())
}

fn check_list_item(item: ListItem, s: &str) -> Result<(), String> {
    let ok = match item {
        ListItem::Str => true,
        ListItem::IfName => is_ifname(s),
        ListItem::Ip => s.parse::<IpAddr>().is_ok(),
        ListItem::Prefix => s.parse::<ipnet::IpNet>().is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(match item {
            ListItem::Str => "expected a string",
            ListItem::IfName => "expected an interface name",
            ListItem::Ip => "expected an IPv4 or IPv6 address",
            ListItem::Prefix => "expected an IP prefix such as 192.168.0.0/16",
        }
        .to_owned())
    }
}

/// oslo `types.List`: strip, drop one trailing comma, split on commas, trim each item.
/// A TOML array of strings is taken item by item.
fn list_items(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(_, s) => {
            let s = s.trim();
            let s = s.strip_suffix(',').unwrap_or(s);
            if s.is_empty() {
                return Ok(Vec::new());
            }
            Ok(s.split(',').map(|i| i.trim().to_owned()).collect())
        }
        Value::Array(_, items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "expected a list of strings".to_owned())
            })
            .collect(),
        _ => Err("expected a comma-separated list".to_owned()),
    }
}

/// How a value as written is shown in messages: strings as written, others TOML-like.
pub fn display_raw(value: &Value) -> String {
    match value {
        Value::String(_, s) => s.clone(),
        Value::Char(_, c) => c.to_string(),
        Value::Bool(_, b) => b.to_string(),
        Value::Num(_, n) => n
            .to_i128()
            .map(|i| i.to_string())
            .or_else(|| n.to_f64().map(|f| f.to_string()))
            .unwrap_or_default(),
        Value::Empty(..) => String::new(),
        Value::Array(_, items) => items.iter().map(display_raw).collect::<Vec<_>>().join(","),
        Value::Dict(..) => "{…}".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oslo_booleans() {
        for t in ["true", "TRUE", "Yes", "on", "1"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["false", "No", "OFF", "0"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("y"), None);
        assert_eq!(parse_bool(""), None);
    }

    #[test]
    fn python_ints() {
        assert_eq!(parse_python_int(" 300 "), Some(300));
        assert_eq!(parse_python_int("+5"), Some(5));
        assert_eq!(parse_python_int("-5"), Some(-5));
        assert_eq!(parse_python_int("1_000"), Some(1000));
        for bad in ["", "abc", "1.5", "0x10", "1__0", "_1", "1_", "-"] {
            assert_eq!(parse_python_int(bad), None, "{bad}");
        }
    }

    #[test]
    fn as_numbers() {
        for good in ["1", "64999", "4294967295", "1.10", "65535.65535"] {
            assert!(is_as_number(good), "{good}");
        }
        for bad in [
            "0",
            "4294967296",
            "-1",
            "65000 ",
            "1.65536",
            "a",
            "",
            "65000\nexit",
        ] {
            assert!(!is_as_number(bad), "{bad}");
        }
    }

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
