//! OVS ports: validated names and the ofport table, read with one `ovs-vsctl` call.
//!
//! An interface's `ofport` is `-1` when vswitchd failed to open it and empty (`[]`) while it has
//! not been assigned yet (lesson-ofport-minus-one.txt). Neither may ever become `in_port=-1`:
//! [`OfportState`] makes the caller handle both.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::OvsError;
use crate::types::MacAddr;

/// An OVS port/interface name as it may appear in a desired flow. OVS allows long names (patch
/// ports are `patch-provnet-<uuid>-to-br-int`), so this is not an [`crate::types::InterfaceName`];
/// the alphabet is the same: nothing that separates fields in a flow or a command line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OvsPortName(String);

impl OvsPortName {
    pub const MAX_LEN: usize = 255;

    pub fn new(name: &str) -> Result<Self, OvsError> {
        let bad = |why: &'static str| OvsError::InvalidPortName {
            name: name.to_owned(),
            why,
        };
        if name.is_empty() {
            return Err(bad("empty"));
        }
        if name.len() > Self::MAX_LEN {
            return Err(bad("longer than 255 bytes"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'))
        {
            return Err(bad("only ASCII letters, digits and - _ . : @ are allowed"));
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OvsPortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `ofport` column of an `Interface` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfportState {
    /// A usable OpenFlow port number.
    Assigned(u32),
    /// `-1`: vswitchd could not open the interface (see the row's `error`).
    Failed,
    /// `[]`: not assigned yet (vswitchd has not processed the row, or is down).
    Unassigned,
}

impl fmt::Display for OfportState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Assigned(n) => write!(f, "{n}"),
            Self::Failed => f.write_str("-1"),
            Self::Unassigned => f.write_str("[] (unassigned)"),
        }
    }
}

/// One interface as the agent needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub name: String,
    /// Bridge the interface's port is attached to, if any.
    pub bridge: Option<String>,
    pub ofport: OfportState,
    /// vswitchd's `error` column (why the ofport is -1).
    pub error: Option<String>,
    pub mac_in_use: Option<MacAddr>,
}

/// All interfaces by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortTable {
    pub ports: BTreeMap<String, PortInfo>,
}

impl PortTable {
    /// The `ovs-vsctl` arguments (after global options) whose output [`PortTable::parse`] reads:
    /// three tables in one transaction, so port membership and ofports are consistent. With
    /// names, only those bridges and ports are listed (`--if-exists`: a missing one is simply
    /// absent), so a node with thousands of VM ports does not pay for them; without, everything.
    pub fn vsctl_args(bridges: &[&str], ports: &[&OvsPortName]) -> Vec<String> {
        let scoped = !bridges.is_empty() || !ports.is_empty();
        let mut args = Vec::new();
        let mut list = |columns: &str, table: &str, names: Vec<&str>| {
            args.push("--".to_owned());
            if scoped {
                args.push("--if-exists".to_owned());
            }
            args.push(format!("--columns={columns}"));
            args.push("list".to_owned());
            args.push(table.to_owned());
            args.extend(names.into_iter().map(str::to_owned));
        };
        let port_names: Vec<&str> = ports.iter().map(|p| p.as_str()).collect();
        // A bridge's own interface carries its MAC (`mac_in_use`), so bridges are listed as
        // interfaces too.
        let iface_names: Vec<&str> = port_names.iter().chain(bridges).copied().collect();
        if scoped && bridges.is_empty() {
            // No bridge named: ports cannot be placed; list all bridges (few) instead of none.
            list("name,ports", "Bridge", Vec::new());
        } else {
            list("name,ports", "Bridge", bridges.to_vec());
        }
        list("_uuid,interfaces", "Port", port_names);
        list(
            "_uuid,name,ofport,error,mac_in_use",
            "Interface",
            iface_names,
        );
        args
    }

    pub fn get(&self, name: &str) -> Option<&PortInfo> {
        self.ports.get(name)
    }

    /// Interfaces attached to `bridge` (e.g. to find its `patch-provnet-*` ports).
    pub fn on_bridge<'a>(&'a self, bridge: &'a str) -> impl Iterator<Item = &'a PortInfo> + 'a {
        self.ports
            .values()
            .filter(move |p| p.bridge.as_deref() == Some(bridge))
    }

    /// MAC of a bridge's own interface (what the MAC-tweak flows write as destination).
    pub fn bridge_mac(&self, bridge: &str) -> Option<MacAddr> {
        self.get(bridge)
            .filter(|p| p.bridge.as_deref() == Some(bridge))
            .and_then(|p| p.mac_in_use)
    }

    /// Parses `ovs-vsctl --format=json` output of [`PortTable::vsctl_args`].
    pub fn parse(text: &str) -> Result<Self, OvsError> {
        let bad = |detail: String| OvsError::Parse {
            what: "ovs-vsctl list Bridge/Port/Interface",
            detail,
        };
        let tables: Vec<Value> = serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let [bridges, ports, interfaces] = tables.as_slice() else {
            return Err(bad(format!("expected 3 tables, got {}", tables.len())));
        };
        let rows = |t: &Value, cols: usize| -> Result<Vec<Vec<Value>>, OvsError> {
            let data = t
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("table without data".to_owned()))?;
            data.iter()
                .map(|r| match r.as_array() {
                    Some(r) if r.len() == cols => Ok(r.clone()),
                    _ => Err(bad(format!("row {r} does not have {cols} columns"))),
                })
                .collect()
        };
        // port uuid → bridge name
        let mut port_bridge = BTreeMap::new();
        for row in rows(bridges, 2)? {
            let name = row[0].as_str().unwrap_or_default().to_owned();
            for uuid in uuid_set(&row[1]) {
                port_bridge.insert(uuid, name.clone());
            }
        }
        // interface uuid → bridge name
        let mut iface_bridge = BTreeMap::new();
        for row in rows(ports, 2)? {
            let Some(port_uuid) = uuid(&row[0]) else {
                continue;
            };
            if let Some(bridge) = port_bridge.get(&port_uuid) {
                for iface in uuid_set(&row[1]) {
                    iface_bridge.insert(iface, bridge.clone());
                }
            }
        }
        let mut table = PortTable::default();
        for row in rows(interfaces, 5)? {
            let Some(name) = row[1].as_str() else {
                return Err(bad(format!("interface name {} is not a string", row[1])));
            };
            let ofport = match &row[2] {
                Value::Number(n) => match n.as_i64() {
                    Some(-1) => OfportState::Failed,
                    Some(v) => u32::try_from(v)
                        .map(OfportState::Assigned)
                        .map_err(|_| bad(format!("ofport {v} of {name}")))?,
                    None => return Err(bad(format!("ofport {n} of {name}"))),
                },
                v if is_empty_set(v) => OfportState::Unassigned,
                v => return Err(bad(format!("ofport {v} of {name}"))),
            };
            let info = PortInfo {
                name: name.to_owned(),
                bridge: uuid(&row[0]).and_then(|u| iface_bridge.get(&u).cloned()),
                ofport,
                error: row[3].as_str().map(str::to_owned),
                mac_in_use: row[4].as_str().and_then(|m| m.parse().ok()),
            };
            table.ports.insert(name.to_owned(), info);
        }
        Ok(table)
    }
}

fn is_empty_set(v: &Value) -> bool {
    matches!(v.as_array().map(Vec::as_slice), Some([Value::String(s), Value::Array(items)]) if s == "set" && items.is_empty())
}

pub(crate) fn uuid(v: &Value) -> Option<String> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(kind), Value::String(u)]) if kind == "uuid" => Some(u.clone()),
        _ => None,
    }
}

/// A set column of uuids: either a single `["uuid", x]` or `["set", [["uuid", x], ...]]`.
pub(crate) fn uuid_set(v: &Value) -> Vec<String> {
    if let Some(u) = uuid(v) {
        return vec![u];
    }
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(kind), Value::Array(items)]) if kind == "set" => {
            items.iter().filter_map(uuid).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_are_validated() {
        assert!(OvsPortName::new("patch-provnet-0a1b2c3d-4e5f-to-br-int").is_ok());
        for bad in ["", "a\nb", "a,b", "a;b", "a b", "in_port=1", "x\0", "p\tq"] {
            assert!(OvsPortName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn vsctl_arguments_are_scoped_to_the_names_given() {
        let p = OvsPortName::new("patch-x").unwrap();
        assert_eq!(
            PortTable::vsctl_args(&["br-ex"], &[&p]).join(" "),
            "-- --if-exists --columns=name,ports list Bridge br-ex \
             -- --if-exists --columns=_uuid,interfaces list Port patch-x \
             -- --if-exists --columns=_uuid,name,ofport,error,mac_in_use list Interface patch-x br-ex"
        );
        assert_eq!(
            PortTable::vsctl_args(&[], &[]).join(" "),
            "-- --columns=name,ports list Bridge -- --columns=_uuid,interfaces list Port \
             -- --columns=_uuid,name,ofport,error,mac_in_use list Interface"
        );
    }

    #[test]
    fn parses_ofports_including_minus_one_and_empty() {
        let text = r#"{"data":[["br-ex",["set",[["uuid","p1"],["uuid","p2"]]]],["br-int",["uuid","p3"]]],"headings":["name","ports"]}
{"data":[[["uuid","p1"],["uuid","i1"]],[["uuid","p2"],["uuid","i2"]],[["uuid","p3"],["uuid","i3"]]],"headings":["_uuid","interfaces"]}
{"data":[[["uuid","i1"],"br-ex",65534,["set",[]],"4e:a4:bd:b0:e5:4d"],[["uuid","i2"],"patch-x",-1,"could not open",["set",[]]],[["uuid","i3"],"new0",["set",[]],["set",[]],["set",[]]],[["uuid","i4"],"orphan",3,["set",[]],["set",[]]]],"headings":["_uuid","name","ofport","error","mac_in_use"]}
"#;
        let t = PortTable::parse(text).unwrap();
        let br = t.get("br-ex").unwrap();
        assert_eq!(br.ofport, OfportState::Assigned(65534));
        assert_eq!(br.bridge.as_deref(), Some("br-ex"));
        assert_eq!(
            br.mac_in_use.unwrap().to_string(),
            "4e:a4:bd:b0:e5:4d".to_owned()
        );
        let p = t.get("patch-x").unwrap();
        assert_eq!(p.ofport, OfportState::Failed);
        assert_eq!(p.error.as_deref(), Some("could not open"));
        assert_eq!(t.get("new0").unwrap().ofport, OfportState::Unassigned);
        assert_eq!(t.get("new0").unwrap().bridge.as_deref(), Some("br-int"));
        assert_eq!(t.get("orphan").unwrap().bridge, None);
        assert!(PortTable::parse("{}").is_err());
    }
}
