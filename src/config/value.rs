//! Option values converted the way oslo.config's types do (`oslo_config/types.py`): booleans
//! `true/false/yes/no/on/off/1/0` in any case, integers in Python `int()` syntax, lists split on
//! commas with each item trimmed. Where upstream hands a string to vtysh, netlink or OVN
//! unchecked (AS number, router id, interface names, peer IPs, prefixes) the agent checks it here.

use std::net::{IpAddr, Ipv4Addr};

use figment::value::Value;

use super::schema::{ListItem, OptSpec, OptType, UPSTREAM_DRIVERS, UPSTREAM_EXPOSING_METHODS};
use crate::plugin;

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
        OptType::SyslogFacility => format!(
            "expected a syslog facility: {}",
            crate::logging::SYSLOG_FACILITIES
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
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
        OptType::SyslogFacility => ok(crate::logging::syslog_facility(s).is_some()),
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
}
