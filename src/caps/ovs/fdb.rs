//! Static FDB entries on OVS bridges (`ovs-appctl fdb/add <bridge> <port> <vlan> <mac>`), as the
//! `ovn` exposing method needs for the bridge's own MAC.
//!
//! The FDB lives in ovs-vswitchd's memory only: there is no marker to tell the agent's entries
//! from an operator's, and a vswitchd restart drops them all. So ownership is this process's
//! memory: an entry is removed (`fdb/del`) only if this reconciler added it and it is no longer
//! desired; after a restart, desired entries are simply added again (the periodic OVS check runs
//! [`OvsFdb::check_now`]). `fdb/show` prints ports as ofports (`LOCAL` for the bridge's own
//! port), so port names are resolved through one `ovs-vsctl` read to compare.

use std::collections::{BTreeMap, BTreeSet};

use super::OvsError;
use super::ports::{OfportState, OvsPortName, PortTable};
use super::tools::{OvsOptions, OvsTools};
use crate::system::{ChangeReport, FdbEntrySpec};
use crate::types::{InterfaceName, MacAddr};

/// Object class name in the [`ChangeReport`].
pub(crate) const CLASS: &str = "fdb";

/// A static entry of `ovs-appctl fdb/show`: (port as printed, VLAN, MAC).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct StaticEntry {
    port: String,
    vlan: u16,
    mac: MacAddr,
}

/// The static entries of `fdb/show` (learned entries, with an age instead of `static`, are
/// ignored).
pub(crate) fn parse_fdb_show(text: &str) -> Result<Vec<StaticEntry>, OvsError> {
    let mut entries = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [] | ["port", ..] => {}
            [port, vlan, mac, "static"] => entries.push(StaticEntry {
                port: (*port).to_owned(),
                vlan: vlan.parse().map_err(|_| OvsError::Parse {
                    what: "ovs-appctl fdb/show",
                    detail: format!("VLAN in {line:?}"),
                })?,
                mac: mac.parse().map_err(|_| OvsError::Parse {
                    what: "ovs-appctl fdb/show",
                    detail: format!("MAC in {line:?}"),
                })?,
            }),
            [_, _, _, _] => {}
            _ => {
                return Err(OvsError::Parse {
                    what: "ovs-appctl fdb/show",
                    detail: format!("unexpected line {line:?}"),
                });
            }
        }
    }
    Ok(entries)
}

fn describe(e: &FdbEntrySpec) -> String {
    format!(
        "fdb entry {} vlan {} port {} on bridge {}",
        e.mac, e.vlan, e.port, e.bridge
    )
}

#[derive(Debug, Default)]
struct Memory {
    last: Option<BTreeSet<FdbEntrySpec>>,
    /// Entries this process added and has not deleted: the only ones it may delete.
    added: BTreeSet<FdbEntrySpec>,
    /// Whether ovs-vswitchd has `fdb/add` (asked once, when it answered).
    supported: Option<bool>,
}

/// Reconciles static FDB entries through `ovs-appctl`.
pub struct OvsFdb {
    tools: OvsTools,
    memory: tokio::sync::Mutex<Memory>,
    /// The errors of the last reconcile ([`crate::caps::FdbReconciler::standing_errors`]).
    last_errors: std::sync::Mutex<Vec<crate::system::ObjectError>>,
}

impl OvsFdb {
    pub fn new(options: OvsOptions) -> Self {
        Self::with_tools(OvsTools::new(options))
    }

    pub fn with_tools(tools: OvsTools) -> Self {
        Self {
            tools,
            memory: tokio::sync::Mutex::default(),
            last_errors: std::sync::Mutex::default(),
        }
    }

    async fn supported(&self, memory: &mut Memory) -> Result<bool, OvsError> {
        if let Some(s) = memory.supported {
            return Ok(s);
        }
        let commands = self.tools.appctl(&["list-commands"]).await?;
        let has = |c: &str| commands.split_whitespace().any(|w| w == c);
        let supported = has("fdb/add") && has("fdb/del");
        memory.supported = Some(supported);
        Ok(supported)
    }

    /// Makes the static entries equal to `desired` (adding missing ones, deleting ones this
    /// process added that are no longer desired). Problems are errors of class `CLASS`.
    pub async fn reconcile(&self, desired: &BTreeSet<FdbEntrySpec>) -> ChangeReport {
        let report = self.reconcile_once(desired).await;
        *self.last_errors.lock().unwrap_or_else(|e| e.into_inner()) = report.errors.clone();
        report
    }

    async fn reconcile_once(&self, desired: &BTreeSet<FdbEntrySpec>) -> ChangeReport {
        let mut memory = self.memory.lock().await;
        memory.last = Some(desired.clone());
        let mut report = ChangeReport::default();
        if desired.is_empty() && memory.added.is_empty() {
            return report;
        }
        match self.supported(&mut memory).await {
            Ok(true) => {}
            Ok(false) => {
                for e in desired {
                    report.error(
                        CLASS,
                        describe(e),
                        "this ovs-vswitchd has no `fdb/add`/`fdb/del` (static FDB entries need \
                         Open vSwitch 3.0 or later); the entry is not applied",
                    );
                }
                return report;
            }
            Err(e) => {
                report.error(CLASS, "ovs-appctl list-commands", e);
                return report;
            }
        }
        let bridges: BTreeSet<InterfaceName> = desired
            .iter()
            .chain(&memory.added)
            .map(|e| e.bridge.clone())
            .collect();
        // Ports other than the bridge's own (LOCAL) need their ofport to compare with fdb/show.
        let port_names: BTreeSet<OvsPortName> = desired
            .iter()
            .filter(|e| e.port != e.bridge)
            .filter_map(|e| OvsPortName::new(e.port.as_str()).ok())
            .collect();
        let ports = if port_names.is_empty() {
            PortTable::default()
        } else {
            let b: Vec<&InterfaceName> = bridges.iter().collect();
            let p: Vec<&OvsPortName> = port_names.iter().collect();
            match self.tools.port_table_for(&b, &p).await {
                Ok(t) => t,
                Err(e) => {
                    report.error(CLASS, "read OVS ports for the FDB entries", e);
                    return report;
                }
            }
        };
        let mut shown: BTreeMap<InterfaceName, Vec<StaticEntry>> = BTreeMap::new();
        for bridge in &bridges {
            let read =
                async { parse_fdb_show(&self.tools.appctl(&["fdb/show", bridge.as_str()]).await?) };
            match read.await {
                Ok(entries) => {
                    shown.insert(bridge.clone(), entries);
                }
                Err(e) => report.error(CLASS, format!("fdb/show {bridge}"), e),
            }
        }
        let present = |e: &FdbEntrySpec, port: &str| {
            shown.get(&e.bridge).is_some_and(|entries| {
                entries
                    .iter()
                    .any(|s| s.vlan == e.vlan && s.mac == e.mac && s.port == port)
            })
        };
        let key = |e: &FdbEntrySpec| (e.bridge.clone(), e.vlan, e.mac);
        let desired_keys: BTreeSet<_> = desired.iter().map(key).collect();

        // Deletes first; never one whose (bridge, vlan, mac) is desired: its fdb/add replaces
        // the port in place.
        let stale: Vec<FdbEntrySpec> = memory
            .added
            .iter()
            .filter(|e| !desired.contains(e) && !desired_keys.contains(&key(e)))
            .cloned()
            .collect();
        for e in stale {
            let Some(entries) = shown.get(&e.bridge) else {
                continue; // fdb/show failed: reported above, retried next time
            };
            if !entries.iter().any(|s| s.vlan == e.vlan && s.mac == e.mac) {
                memory.added.remove(&e); // already gone (vswitchd restarted)
                continue;
            }
            let (vlan, mac) = (e.vlan.to_string(), e.mac.to_string());
            match self
                .tools
                .appctl(&["fdb/del", e.bridge.as_str(), &vlan, &mac])
                .await
            {
                Ok(_) => {
                    memory.added.remove(&e);
                    report.count_removed(CLASS, 1);
                }
                Err(err) => report.error(CLASS, format!("delete {}", describe(&e)), err),
            }
        }
        memory
            .added
            .retain(|e| desired.contains(e) || !desired_keys.contains(&key(e)));

        for e in desired {
            if !shown.contains_key(&e.bridge) {
                continue;
            }
            if e.vlan > 4095 {
                report.error(CLASS, describe(e), "VLAN above 4095");
                continue;
            }
            let port = if e.port == e.bridge {
                "LOCAL".to_owned()
            } else {
                match ports.get(e.port.as_str()) {
                    Some(info) if info.bridge.as_deref() == Some(e.bridge.as_str()) => {
                        match info.ofport {
                            OfportState::Assigned(n) => n.to_string(),
                            state => {
                                report.error(
                                    CLASS,
                                    describe(e),
                                    format!("port has no usable ofport yet ({state})"),
                                );
                                continue;
                            }
                        }
                    }
                    Some(_) => {
                        report.error(CLASS, describe(e), "port is not on that bridge");
                        continue;
                    }
                    None => {
                        report.error(CLASS, describe(e), "no such port in OVSDB (yet)");
                        continue;
                    }
                }
            };
            if present(e, &port) {
                // Not claimed when someone else put it there: only entries this process added
                // are ever deleted.
                continue;
            }
            let (vlan, mac) = (e.vlan.to_string(), e.mac.to_string());
            match self
                .tools
                .appctl(&["fdb/add", e.bridge.as_str(), e.port.as_str(), &vlan, &mac])
                .await
            {
                Ok(_) => {
                    memory.added.insert(e.clone());
                    report.count_added(CLASS, 1);
                }
                Err(err) => report.error(CLASS, format!("add {}", describe(e)), err),
            }
        }
        report
    }

    /// Re-runs the last reconcile: puts back entries a vswitchd restart dropped.
    pub async fn check_now(&self) -> Option<ChangeReport> {
        let last = self.memory.lock().await.last.clone()?;
        Some(self.reconcile(&last).await)
    }
}

#[async_trait::async_trait]
impl crate::caps::FdbReconciler for OvsFdb {
    async fn reconcile_fdb(&self, desired: &BTreeSet<FdbEntrySpec>) -> ChangeReport {
        self.reconcile(desired).await
    }

    fn standing_errors(&self) -> Vec<crate::system::ObjectError> {
        self.last_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_static_entries_only() {
        let text = " port  VLAN  MAC                Age\n\
                    LOCAL     0  aa:bb:cc:dd:ee:01  static\n    \
                    2     5  aa:bb:cc:dd:ee:02  static\n    \
                    3     0  aa:82:45:99:12:1f    0\n";
        let entries = parse_fdb_show(text).unwrap();
        assert_eq!(
            entries,
            [
                StaticEntry {
                    port: "LOCAL".into(),
                    vlan: 0,
                    mac: "aa:bb:cc:dd:ee:01".parse().unwrap()
                },
                StaticEntry {
                    port: "2".into(),
                    vlan: 5,
                    mac: "aa:bb:cc:dd:ee:02".parse().unwrap()
                },
            ]
        );
        assert!(parse_fdb_show("LOCAL x aa:bb:cc:dd:ee:01 static").is_err());
        assert!(parse_fdb_show("what is this").is_err());
    }
}
