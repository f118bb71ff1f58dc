//! OpenFlow flows as the agent compares them: a canonical key built either from a desired flow
//! or from a line of `ovs-ofctl dump-flows`, and the `add-flows` batch that turns one set into
//! the other.
//!
//! Canonical form: match fields as an unordered set, actions in order with the OpenFlow 1.3
//! renderings mapped to the 1.0 ones (`set_field:M->eth_dst` = `mod_dl_dst:M`), lower case.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::OvsError;
use super::ports::OvsPortName;

/// Attributes `dump-flows` prints next to the match that are statistics, not part of the flow.
const STATS: &[&str] = &[
    "duration",
    "n_packets",
    "n_bytes",
    "idle_age",
    "hard_age",
    "packet_count",
    "byte_count",
];
/// Flow flags printed by OpenFlow 1.3+ dumps.
const FLAGS: &[&str] = &[
    "reset_counts",
    "send_flow_rem",
    "check_overlap",
    "no_packet_counts",
    "no_byte_counts",
];
/// Keys that are part of a flow but not of its match (kept in the key, left out of deletes).
const NON_MATCH: &[&str] = &["idle_timeout", "hard_timeout", "importance"];
/// Keys a desired match must not contain: the reconciler sets them itself.
const RESERVED: &[&str] = &["cookie", "priority", "in_port", "actions", "table"];

/// Checks a match or action text from a desired flow: printable, no whitespace or characters
/// that separate flows, fields or commands (`;`, `#`, quotes, backslash).
pub(crate) fn check_flow_text(field: &'static str, text: &str) -> Result<(), OvsError> {
    let bad = |why: &'static str| OvsError::InvalidFlowText {
        field,
        text: text.to_owned(),
        why,
    };
    if text.len() > 4096 {
        return Err(bad("longer than 4096 bytes"));
    }
    if !text.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'_' | b':' | b'.' | b',' | b'=' | b'/' | b'(' | b')' | b'-' | b'>' | b'[' | b']'
            )
    }) {
        return Err(bad(
            "only ASCII letters, digits and _ : . , = / ( ) - > [ ] are allowed",
        ));
    }
    Ok(())
}

/// Splits on commas outside parentheses/brackets (`resubmit(,2)`, `load:1->NXM_NX_REG0[0..3]`).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// One match field in the form `dump-flows` prints it, for the spellings a backend is likely to
/// use: `dl_type=0x0800` is `ip`, host prefixes lose their `/32`, addresses under a mask are
/// truncated to the network (OVS prints `nw_dst=10.0.0.0/24` for `10.0.0.5/24`).
fn normalize_match(token: &str) -> String {
    let t = token.to_ascii_lowercase();
    let Some((key, value)) = t.split_once('=') else {
        return t;
    };
    let key = match key {
        "ip_src" => "nw_src",
        "ip_dst" => "nw_dst",
        k => k,
    };
    match key {
        "dl_type" => match value {
            "0x0800" | "0x800" => "ip".to_owned(),
            "0x86dd" => "ipv6".to_owned(),
            "0x0806" | "0x806" => "arp".to_owned(),
            _ => format!("{key}={value}"),
        },
        "nw_src" | "nw_dst" | "ipv6_src" | "ipv6_dst" => match value.parse::<ipnet::IpNet>() {
            Ok(net) if net.prefix_len() == net.max_prefix_len() => format!("{key}={}", net.addr()),
            Ok(net) => format!("{key}={}", net.trunc()),
            Err(_) => format!("{key}={value}"),
        },
        _ => format!("{key}={value}"),
    }
}

fn normalize_action(action: &str) -> String {
    let a = action.to_ascii_lowercase();
    if let Some((value, field)) = a
        .strip_prefix("set_field:")
        .and_then(|rest| rest.rsplit_once("->"))
    {
        match field {
            "eth_dst" => return format!("mod_dl_dst:{value}"),
            "eth_src" => return format!("mod_dl_src:{value}"),
            _ => {}
        }
    }
    if let Some(port) = a.strip_prefix("output=") {
        return format!("output:{port}");
    }
    if a == "strip_vlan" {
        return "pop_vlan".to_owned();
    }
    a
}

/// A flow's identity for comparison.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowKey {
    pub cookie: u64,
    pub table: u8,
    pub priority: u16,
    /// Match fields (and non-match attributes such as `idle_timeout=`), lower case.
    pub matches: BTreeSet<String>,
    pub actions: Vec<String>,
}

impl FlowKey {
    /// Key of a desired flow: `matches` (already checked) plus `in_port=<ofport>` when given.
    pub fn desired(
        cookie: u64,
        priority: u16,
        matches: &str,
        in_port: Option<u32>,
        actions: &str,
    ) -> Result<Self, OvsError> {
        check_flow_text("matches", matches)?;
        check_flow_text("actions", actions)?;
        let mut set = BTreeSet::new();
        for m in split_top_level(matches) {
            let key = m.split('=').next().unwrap_or(m).to_ascii_lowercase();
            if RESERVED.contains(&key.as_str()) || STATS.contains(&key.as_str()) {
                return Err(OvsError::InvalidFlowText {
                    field: "matches",
                    text: matches.to_owned(),
                    why: "cookie, priority, in_port, table and actions are set by the reconciler",
                });
            }
            set.insert(normalize_match(m));
        }
        if let Some(in_port) = in_port {
            set.insert(format!("in_port={in_port}"));
        }
        let actions: Vec<String> = split_top_level(actions)
            .into_iter()
            .map(normalize_action)
            .collect();
        if actions.is_empty() {
            return Err(OvsError::InvalidFlowText {
                field: "actions",
                text: String::new(),
                why: "empty (write `drop` explicitly)",
            });
        }
        Ok(Self {
            cookie,
            table: 0,
            priority,
            matches: set,
            actions,
        })
    }

    /// Parses one flow line of `ovs-ofctl --no-names dump-flows` (with or without stats, any
    /// OpenFlow version). Returns `None` for header lines (`NXST_FLOW reply …`).
    pub fn parse_dump_line(line: &str) -> Result<Option<Self>, OvsError> {
        let line = line.trim();
        if line.is_empty() || !line.contains("actions=") {
            return Ok(None);
        }
        let bad = |detail: &str| OvsError::Parse {
            what: "ovs-ofctl dump-flows",
            detail: format!("{detail}: {line}"),
        };
        let (head, actions) = line
            .split_once(" actions=")
            .or_else(|| line.strip_prefix("actions=").map(|a| ("", a)))
            .ok_or_else(|| bad("no actions"))?;
        let mut key = FlowKey {
            cookie: 0,
            table: 0,
            priority: 32768, // OpenFlow default priority (not printed when default)
            matches: BTreeSet::new(),
            actions: split_top_level(actions)
                .into_iter()
                .map(normalize_action)
                .collect(),
        };
        for token in head
            .split(',')
            .flat_map(str::split_whitespace)
            .filter(|t| !t.is_empty())
        {
            let (k, v) = match token.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (token, None),
            };
            match (k, v) {
                ("cookie", Some(v)) => {
                    key.cookie = parse_u64(v).ok_or_else(|| bad("cookie"))?;
                }
                ("table", Some(v)) => key.table = v.parse().map_err(|_| bad("table"))?,
                ("priority", Some(v)) => key.priority = v.parse().map_err(|_| bad("priority"))?,
                (k, _) if STATS.contains(&k) || FLAGS.contains(&k) => {}
                _ => {
                    key.matches.insert(normalize_match(token));
                }
            }
        }
        Ok(Some(key))
    }

    /// `delete_strict` line for `ovs-ofctl add-flows` that removes exactly this flow (same
    /// cookie, table, priority and match), never a flow of another cookie.
    pub fn delete_line(&self) -> String {
        format!(
            "delete_strict cookie={:#x}/-1,table={},priority={}{}",
            self.cookie,
            self.table,
            self.priority,
            self.match_text(true)
        )
    }

    fn match_text(&self, match_only: bool) -> String {
        // Protocol shorthands (`ip`, `ipv6`, `arp`…) must precede the fields that need them.
        let (short, fields): (Vec<&String>, Vec<&String>) =
            self.matches.iter().partition(|m| !m.contains('='));
        let mut s = String::new();
        for m in short.into_iter().chain(fields) {
            let key = m.split('=').next().unwrap_or(m);
            if match_only && NON_MATCH.contains(&key) {
                continue;
            }
            s.push(',');
            s.push_str(m);
        }
        s
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cookie={:#x},table={},priority={}{} actions={}",
            self.cookie,
            self.table,
            self.priority,
            self.match_text(false),
            self.actions.join(",")
        )
    }
}

fn parse_u64(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Parses a whole dump, keeping flows whose cookie is in `cookies`.
pub(crate) fn parse_dump(
    text: &str,
    cookies: &BTreeSet<u64>,
) -> Result<BTreeSet<FlowKey>, OvsError> {
    let mut flows = BTreeSet::new();
    for line in text.lines() {
        if let Some(key) = FlowKey::parse_dump_line(line)?
            && cookies.contains(&key.cookie)
        {
            flows.insert(key);
        }
    }
    Ok(flows)
}

/// A desired flow: its key and the `add` line that installs it, written with the backend's own
/// (checked) match and action text so ovs-ofctl parses exactly what the backend meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredFlow {
    pub key: FlowKey,
    pub add_line: String,
}

impl DesiredFlow {
    pub fn new(
        cookie: u64,
        priority: u16,
        matches: &str,
        in_port: Option<u32>,
        actions: &str,
    ) -> Result<Self, OvsError> {
        let key = FlowKey::desired(cookie, priority, matches, in_port, actions)?;
        let mut line = format!("add cookie={cookie:#x},table=0,priority={priority}");
        if !matches.is_empty() {
            line.push(',');
            line.push_str(matches);
        }
        if let Some(in_port) = in_port {
            line.push_str(&format!(",in_port={in_port}"));
        }
        line.push_str(" actions=");
        line.push_str(actions);
        Ok(Self {
            key,
            add_line: line,
        })
    }
}

/// A piece of a desired flow's action text: literal text, or a `{<port>}` placeholder naming
/// the port whose ofport goes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ActionPiece {
    Text(String),
    Port(OvsPortName),
}

/// Splits action text at its `{<port>}` placeholders. A port name is validated like `in_port`
/// (so no brace, comma or whitespace can come through it); an unbalanced brace is refused.
pub(crate) fn action_pieces(actions: &str) -> Result<Vec<ActionPiece>, OvsError> {
    let bad = |why: &'static str| OvsError::InvalidFlowText {
        field: "actions",
        text: actions.to_owned(),
        why,
    };
    let mut pieces = Vec::new();
    let mut rest = actions;
    while let Some(open) = rest.find('{') {
        let (text, after) = rest.split_at(open);
        if text.contains('}') {
            return Err(bad("`}` without `{`"));
        }
        let close = after.find('}').ok_or_else(|| bad("`{` without `}`"))?;
        if !text.is_empty() {
            pieces.push(ActionPiece::Text(text.to_owned()));
        }
        pieces.push(ActionPiece::Port(OvsPortName::new(&after[1..close])?));
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(bad("`}` without `{`"));
    }
    if !rest.is_empty() {
        pieces.push(ActionPiece::Text(rest.to_owned()));
    }
    Ok(pieces)
}

/// The action text with every placeholder replaced by `ofport(name)`.
pub(crate) fn fill_action_ports(
    pieces: &[ActionPiece],
    mut ofport: impl FnMut(&OvsPortName) -> u32,
) -> String {
    pieces
        .iter()
        .map(|p| match p {
            ActionPiece::Text(t) => t.clone(),
            ActionPiece::Port(name) => ofport(name).to_string(),
        })
        .collect()
}

/// The `add-flows` input turning `present` into `desired`: deletes first, then adds.
pub(crate) fn batch(
    present: &BTreeSet<FlowKey>,
    desired: &BTreeMap<FlowKey, String>,
) -> (String, usize, usize) {
    let mut text = String::new();
    let mut removed = 0;
    let mut added = 0;
    for stale in present.iter().filter(|k| !desired.contains_key(k)) {
        text.push_str(&stale.delete_line());
        text.push('\n');
        removed += 1;
    }
    for (_, add_line) in desired.iter().filter(|(k, _)| !present.contains(k)) {
        text.push_str(add_line);
        text.push('\n');
        added += 1;
    }
    (text, added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: &str = "aa:aa:aa:aa:aa:01";

    fn a9(proto: &str) -> FlowKey {
        FlowKey::desired(
            999,
            900,
            proto,
            Some(2),
            &format!("mod_dl_dst:{MAC},NORMAL"),
        )
        .unwrap()
    }

    #[test]
    fn of10_and_of13_dumps_compare_equal_to_desired() {
        let of10 = " cookie=0x3e7, duration=0.014s, table=0, n_packets=0, n_bytes=0, idle_age=0, priority=900,ip,in_port=2 actions=mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL";
        let of13 = " cookie=0x3e7, reset_counts priority=900,ip,in_port=2 actions=set_field:aa:aa:aa:aa:aa:01->eth_dst,NORMAL";
        let nostats =
            " cookie=0x3e7, priority=900,ip,in_port=2 actions=mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL";
        for line in [of10, of13, nostats] {
            assert_eq!(
                FlowKey::parse_dump_line(line).unwrap().unwrap(),
                a9("ip"),
                "{line}"
            );
        }
        assert_ne!(
            FlowKey::parse_dump_line(nostats).unwrap().unwrap(),
            a9("ipv6")
        );
    }

    #[test]
    fn header_and_default_flows() {
        assert_eq!(
            FlowKey::parse_dump_line("NXST_FLOW reply (xid=0x4):").unwrap(),
            None
        );
        let k = FlowKey::parse_dump_line(" priority=0 actions=NORMAL")
            .unwrap()
            .unwrap();
        assert_eq!((k.cookie, k.priority), (0, 0));
        let k = FlowKey::parse_dump_line(" cookie=0x5, ip actions=resubmit(,2),NORMAL")
            .unwrap()
            .unwrap();
        assert_eq!(k.priority, 32768);
        assert_eq!(k.actions, ["resubmit(,2)", "normal"]);
    }

    #[test]
    fn batch_deletes_stray_and_adds_missing() {
        let cookies: BTreeSet<u64> = [999].into();
        let dump = " cookie=0x3e7, priority=900,ip,in_port=7 actions=NORMAL\n cookie=0x3e7, priority=900,ip,in_port=2 actions=mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL\n cookie=0x5, priority=10,ip actions=NORMAL\n";
        let present = parse_dump(dump, &cookies).unwrap();
        assert_eq!(present.len(), 2, "other cookies ignored");
        let desired: BTreeMap<FlowKey, String> = ["ip", "ipv6"]
            .into_iter()
            .map(|p| {
                let d = DesiredFlow::new(999, 900, p, Some(2), &format!("mod_dl_dst:{MAC},NORMAL"))
                    .unwrap();
                assert_eq!(d.key, a9(p));
                (d.key, d.add_line)
            })
            .collect();
        let (text, added, removed) = batch(&present, &desired);
        assert_eq!((added, removed), (1, 1));
        assert_eq!(
            text,
            "delete_strict cookie=0x3e7/-1,table=0,priority=900,ip,in_port=7\n\
             add cookie=0x3e7,table=0,priority=900,ipv6,in_port=2 actions=mod_dl_dst:aa:aa:aa:aa:aa:01,NORMAL\n"
        );
        let all: BTreeSet<FlowKey> = desired.keys().cloned().collect();
        let (text, added, removed) = batch(&all, &desired);
        assert_eq!((text.as_str(), added, removed), ("", 0, 0));
    }

    #[test]
    fn common_spellings_compare_equal_to_the_dump() {
        let desired = FlowKey::desired(
            999,
            1000,
            "dl_type=0x0800,ip_dst=10.0.0.5/24,nw_src=172.24.100.10/32",
            Some(3),
            "mod_dl_dst:AA:AA:AA:AA:AA:01,output=4",
        )
        .unwrap();
        let dumped = FlowKey::parse_dump_line(
            " cookie=0x3e7, priority=1000,ip,in_port=3,nw_src=172.24.100.10,nw_dst=10.0.0.0/24 actions=mod_dl_dst:aa:aa:aa:aa:aa:01,output:4",
        )
        .unwrap()
        .unwrap();
        assert_eq!(desired, dumped);
    }

    #[test]
    fn output_placeholders_are_split_and_filled() {
        let pieces =
            action_pieces("mod_dl_dst:aa:aa:aa:aa:aa:01,strip_vlan,output:{vlan-100}").unwrap();
        assert_eq!(
            pieces,
            [
                ActionPiece::Text("mod_dl_dst:aa:aa:aa:aa:aa:01,strip_vlan,output:".to_owned()),
                ActionPiece::Port(OvsPortName::new("vlan-100").unwrap()),
            ]
        );
        assert_eq!(
            fill_action_ports(&pieces, |_| 7),
            "mod_dl_dst:aa:aa:aa:aa:aa:01,strip_vlan,output:7"
        );
        assert_eq!(
            action_pieces("NORMAL").unwrap(),
            [ActionPiece::Text("NORMAL".to_owned())]
        );
        for bad in [
            "output:{a,b}",
            "output:{}",
            "output:{x",
            "output:x}",
            "output:{a}}",
            "output:{{a}}",
            "output:{a b}",
        ] {
            assert!(action_pieces(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_flow_without_in_port_has_no_in_port_match() {
        let d = DesiredFlow::new(999, 1000, "ip,nw_dst=10.0.0.0/24", None, "NORMAL").unwrap();
        assert_eq!(
            d.add_line,
            "add cookie=0x3e7,table=0,priority=1000,ip,nw_dst=10.0.0.0/24 actions=NORMAL"
        );
        let dumped = FlowKey::parse_dump_line(
            " cookie=0x3e7, priority=1000,ip,nw_dst=10.0.0.0/24 actions=NORMAL",
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.key, dumped);
        let d = DesiredFlow::new(999, 5, "", None, "drop").unwrap();
        assert_eq!(
            d.add_line,
            "add cookie=0x3e7,table=0,priority=5 actions=drop"
        );
    }

    #[test]
    fn hostile_flow_text_is_rejected() {
        for (m, a) in [
            ("ip in_port=3", "NORMAL"),
            ("ip\nadd cookie=0", "NORMAL"),
            ("ip;reboot", "NORMAL"),
            ("ip,cookie=1", "NORMAL"),
            ("ip,actions=drop", "NORMAL"),
            ("ip,in_port=9", "NORMAL"),
            ("ip", "NORMAL actions=drop"),
            ("ip", ""),
            ("ip", "output:1#"),
        ] {
            assert!(
                FlowKey::desired(999, 1, m, Some(1), a).is_err(),
                "{m:?} {a:?}"
            );
        }
    }
}
