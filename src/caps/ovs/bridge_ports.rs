//! OVS ports the agent adds to bridges: EVPN `vlan-<vni>` (internal, tagged) and
//! `veth-ovs-<vni>` (a veth end), NB vrf `ovs<uuid11>` ports.
//!
//! Ownership is a marker, not a name pattern: every port the agent adds carries
//! `external_ids:ovn-bgp-agent=owned` on its Port row. A marked port that is no longer desired is
//! deleted; a desired port whose tag or interface type drifted is corrected; a port without the
//! marker is never changed, even when its name is desired (it is reported instead).
//!
//! Per reconcile: one `ovs-vsctl --format=json` read (the marked ports, the desired names, the
//! desired bridges) and, only when something differs, one `ovs-vsctl` with every change chained
//! by `--`. If that transaction fails, each change is tried on its own so one bad port (a bridge
//! deleted meanwhile) does not hold back the others.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::OvsError;
use super::ports::{uuid, uuid_set};
use super::tools::{OvsOptions, OvsTools};
use crate::system::{ChangeReport, OvsPortSpec};

/// `external_ids` key and value marking a Port row as the agent's.
pub(crate) const OWNER_KEY: &str = "ovn-bgp-agent";
pub(crate) const OWNER_VALUE: &str = "owned";
/// Object class name in the [`ChangeReport`].
pub(crate) const CLASS: &str = "ovs_ports";

/// A Port row as the reconciler needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortRow {
    uuid: String,
    tag: Option<u16>,
    owned: bool,
}

/// What OVSDB holds about the ports concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PortState {
    /// Marked ports, and ports with a desired name (marked or not), by name.
    ports: BTreeMap<String, PortRow>,
    /// Interface `type` by name, for desired names.
    iface_types: BTreeMap<String, String>,
    /// Desired bridges that exist, with the uuids of their ports.
    bridges: BTreeMap<String, BTreeSet<String>>,
}

const PORT_COLUMNS: &str = "--columns=_uuid,name,tag,external_ids";

impl PortState {
    /// The read: marked ports (`find`), then, when there are desired names, those ports and
    /// interfaces, then, when there are desired bridges, those bridges. `--if-exists`: a missing
    /// name is simply absent (never `list` without names: that would list every row).
    fn vsctl_args(names: &[&str], bridges: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec!["--format=json".into()];
        let mut cmd = |parts: &[&str], names: &[&str]| {
            args.push("--".into());
            args.extend(parts.iter().map(|p| (*p).to_owned()));
            args.extend(names.iter().map(|n| (*n).to_owned()));
        };
        cmd(
            &[
                PORT_COLUMNS,
                "find",
                "Port",
                &format!("external_ids:{OWNER_KEY}={OWNER_VALUE}"),
            ],
            &[],
        );
        if !names.is_empty() {
            cmd(&["--if-exists", PORT_COLUMNS, "list", "Port"], names);
            cmd(
                &["--if-exists", "--columns=name,type", "list", "Interface"],
                names,
            );
        }
        if !bridges.is_empty() {
            cmd(
                &["--if-exists", "--columns=name,ports", "list", "Bridge"],
                bridges,
            );
        }
        args
    }

    fn parse(text: &str, with_names: bool, with_bridges: bool) -> Result<Self, OvsError> {
        let bad = |detail: String| OvsError::Parse {
            what: "ovs-vsctl find/list Port/Interface/Bridge",
            detail,
        };
        let tables: Vec<Value> = serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let expected = 1 + 2 * usize::from(with_names) + usize::from(with_bridges);
        if tables.len() != expected {
            return Err(bad(format!(
                "expected {expected} tables, got {}",
                tables.len()
            )));
        }
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
        let string = |v: &Value, what: &str| -> Result<String, OvsError> {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad(format!("{what} {v} is not a string")))
        };
        let mut state = PortState::default();
        let mut tables = tables.iter();
        let mut port_rows = rows(tables.next().expect("counted"), 4)?;
        if with_names {
            port_rows.extend(rows(tables.next().expect("counted"), 4)?);
            for row in rows(tables.next().expect("counted"), 2)? {
                state.iface_types.insert(
                    string(&row[0], "interface name")?,
                    string(&row[1], "interface type")?,
                );
            }
        }
        for row in port_rows {
            let name = string(&row[1], "port name")?;
            let tag = match &row[2] {
                Value::Number(n) => Some(
                    n.as_u64()
                        .and_then(|t| u16::try_from(t).ok())
                        .ok_or_else(|| bad(format!("tag {n} of port {name}")))?,
                ),
                _ => None,
            };
            let port = PortRow {
                uuid: uuid(&row[0]).ok_or_else(|| bad(format!("uuid of port {name}")))?,
                tag,
                owned: map_get(&row[3], OWNER_KEY) == Some(OWNER_VALUE),
            };
            state.ports.insert(name, port);
        }
        if with_bridges {
            for row in rows(tables.next().expect("counted"), 2)? {
                state.bridges.insert(
                    string(&row[0], "bridge name")?,
                    uuid_set(&row[1]).into_iter().collect(),
                );
            }
        }
        Ok(state)
    }
}

/// A value of an OVSDB map column (`["map", [[k, v], ...]]`).
fn map_get<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(kind), Value::Array(pairs)]) if kind == "map" => {
            pairs
                .iter()
                .find_map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([Value::String(k), Value::String(v)]) if k == key => Some(v.as_str()),
                    _ => None,
                })
        }
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Add,
    Change,
    Remove,
}

/// One port's change: the `ovs-vsctl` commands (chained with `--`) that make it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PortOp {
    kind: OpKind,
    /// For reports: `add port vlan-100 to br-ex`.
    object: String,
    commands: Vec<Vec<String>>,
}

fn type_matches(spec: &OvsPortSpec, actual: Option<&str>) -> bool {
    match actual {
        Some("internal") => spec.internal,
        Some("" | "system") | None => !spec.internal,
        Some(_) => false,
    }
}

/// `add-port` (with the marker and tag) and the interface type.
fn add_commands(spec: &OvsPortSpec) -> Vec<Vec<String>> {
    let mut add = vec![
        "--may-exist".to_owned(),
        "add-port".to_owned(),
        spec.bridge.to_string(),
        spec.name.to_string(),
    ];
    if let Some(tag) = spec.vlan_tag {
        add.push(format!("tag={tag}"));
    }
    add.push(format!("external_ids:{OWNER_KEY}={OWNER_VALUE}"));
    let mut commands = vec![add];
    if spec.internal {
        commands.push(vec![
            "set".into(),
            "interface".into(),
            spec.name.to_string(),
            "type=internal".into(),
        ]);
    }
    commands
}

/// The changes turning `state` into `desired`, and the desired ports that cannot be realised
/// (object, reason).
fn plan(
    desired: &BTreeSet<OvsPortSpec>,
    state: &PortState,
) -> (Vec<PortOp>, Vec<(String, String)>) {
    let mut ops = Vec::new();
    let mut problems = Vec::new();
    let mut by_name: BTreeMap<&str, Vec<&OvsPortSpec>> = BTreeMap::new();
    for spec in desired {
        by_name.entry(spec.name.as_str()).or_default().push(spec);
    }
    for (name, specs) in &by_name {
        let [spec] = specs.as_slice() else {
            problems.push((
                format!("port {name}"),
                format!(
                    "desired {} times with different settings; none applied",
                    specs.len()
                ),
            ));
            continue;
        };
        let object = format!("port {name} on bridge {}", spec.bridge);
        if spec.vlan_tag.is_some_and(|t| t > 4095) {
            problems.push((object, "VLAN tag above 4095".to_owned()));
            continue;
        }
        let Some(bridge_ports) = state.bridges.get(spec.bridge.as_str()) else {
            problems.push((object, format!("no bridge {} in OVSDB", spec.bridge)));
            continue;
        };
        let Some(row) = state.ports.get(*name) else {
            ops.push(PortOp {
                kind: OpKind::Add,
                object: format!("add {object}"),
                commands: add_commands(spec),
            });
            continue;
        };
        if !row.owned {
            problems.push((
                object,
                format!(
                    "a port of that name exists without external_ids:{OWNER_KEY}={OWNER_VALUE}; \
                     the agent leaves it alone (delete it, or set the marker to hand it over)"
                ),
            ));
            continue;
        }
        if !bridge_ports.contains(&row.uuid) {
            // The agent's port, on another bridge: move it in the same transaction.
            let mut commands = vec![vec![
                "--if-exists".to_owned(),
                "del-port".to_owned(),
                name.to_string(),
            ]];
            commands.extend(add_commands(spec));
            ops.push(PortOp {
                kind: OpKind::Change,
                object: format!("move {object}"),
                commands,
            });
            continue;
        }
        let mut commands = Vec::new();
        if row.tag != spec.vlan_tag {
            commands.push(match spec.vlan_tag {
                Some(tag) => vec![
                    "set".into(),
                    "port".into(),
                    name.to_string(),
                    format!("tag={tag}"),
                ],
                None => vec![
                    "clear".into(),
                    "port".into(),
                    name.to_string(),
                    "tag".into(),
                ],
            });
        }
        if !type_matches(spec, state.iface_types.get(*name).map(String::as_str)) {
            let kind = if spec.internal { "internal" } else { "system" };
            commands.push(vec![
                "set".into(),
                "interface".into(),
                name.to_string(),
                format!("type={kind}"),
            ]);
        }
        if !commands.is_empty() {
            ops.push(PortOp {
                kind: OpKind::Change,
                object: format!("correct {object}"),
                commands,
            });
        }
    }
    for (name, row) in &state.ports {
        if row.owned && !by_name.contains_key(name.as_str()) {
            ops.push(PortOp {
                kind: OpKind::Remove,
                object: format!("delete port {name}"),
                commands: vec![vec!["--if-exists".into(), "del-port".into(), name.clone()]],
            });
        }
    }
    (ops, problems)
}

/// Whether ovs-vsctl itself refused the transaction (a bridge gone meanwhile, a name taken by a
/// race), so trying the changes one by one can save the others. Not when it timed out or was
/// killed: with ovs-vswitchd down, ovs-vsctl waits for it until its timeout, and one run per
/// change would only multiply that wait.
fn refused_by_ovsdb(err: &OvsError) -> bool {
    match err {
        OvsError::Failed { status, output, .. } => {
            status.code().is_some() && !output.to_ascii_lowercase().contains("timeout")
        }
        _ => false,
    }
}

fn chained(ops: &[&PortOp]) -> Vec<String> {
    let mut args = Vec::new();
    for op in ops {
        for command in &op.commands {
            args.push("--".to_owned());
            args.extend(command.iter().cloned());
        }
    }
    args
}

#[derive(Debug, Default)]
struct Memory {
    /// The last desired set, for [`OvsPorts::check_now`].
    last: Option<BTreeSet<OvsPortSpec>>,
    /// The last run desired nothing, read OVSDB and left no marked port: an empty desired set
    /// needs no read until something is desired again.
    clean: bool,
}

/// Reconciles the agent's OVS ports through `ovs-vsctl`.
pub struct OvsPorts {
    tools: OvsTools,
    memory: tokio::sync::Mutex<Memory>,
}

impl OvsPorts {
    pub fn new(options: OvsOptions) -> Self {
        Self::with_tools(OvsTools::new(options))
    }

    pub fn with_tools(tools: OvsTools) -> Self {
        Self {
            tools,
            memory: tokio::sync::Mutex::default(),
        }
    }

    /// Makes the marked ports equal to `desired`; every problem is an error of class
    /// `CLASS` in the report, naming the port.
    pub async fn reconcile(&self, desired: &BTreeSet<OvsPortSpec>) -> ChangeReport {
        // Async mutex: a periodic check and the caller's reconcile never interleave.
        let mut memory = self.memory.lock().await;
        memory.last = Some(desired.clone());
        let mut report = ChangeReport::default();
        if desired.is_empty() && memory.clean {
            return report;
        }
        memory.clean = false;
        let names: Vec<&str> = desired.iter().map(|p| p.name.as_str()).collect();
        let bridges: BTreeSet<&str> = desired.iter().map(|p| p.bridge.as_str()).collect();
        let bridges: Vec<&str> = bridges.into_iter().collect();
        let read = async {
            let text = self
                .tools
                .vsctl(&PortState::vsctl_args(&names, &bridges))
                .await?;
            PortState::parse(&text, !names.is_empty(), !bridges.is_empty())
        };
        let state = match read.await {
            Ok(s) => s,
            Err(e) => {
                report.error(CLASS, "read OVS ports", e);
                return report;
            }
        };
        let (ops, problems) = plan(desired, &state);
        for (object, error) in problems {
            report.error(CLASS, object, error);
        }
        let done = self.apply(&ops, &mut report).await;
        for op in &done {
            match op.kind {
                OpKind::Add => report.count_added(CLASS, 1),
                OpKind::Change => report.count_changed(CLASS, 1),
                OpKind::Remove => report.count_removed(CLASS, 1),
            }
        }
        if !done.is_empty() {
            tracing::info!(changes = done.len(), "reconciled OVS ports");
        }
        memory.clean = desired.is_empty() && report.errors.is_empty();
        report
    }

    /// Applies `ops` in one transaction; if it fails, each on its own. Returns the ops applied.
    async fn apply<'a>(&self, ops: &'a [PortOp], report: &mut ChangeReport) -> Vec<&'a PortOp> {
        let all: Vec<&PortOp> = ops.iter().collect();
        if all.is_empty() {
            return all;
        }
        let err = match self.tools.vsctl(&chained(&all)).await {
            Ok(_) => return all,
            Err(e) => e,
        };
        if all.len() == 1 || !refused_by_ovsdb(&err) {
            for op in all {
                report.error(CLASS, op.object.clone(), &err);
            }
            return Vec::new();
        }
        tracing::warn!(error = %err, "OVS port transaction failed; applying the changes one by one");
        let mut done = Vec::new();
        for op in all {
            match self.tools.vsctl(&chained(&[op])).await {
                Ok(_) => done.push(op),
                Err(e) => report.error(CLASS, op.object.clone(), e),
            }
        }
        done
    }

    /// Re-runs the last reconcile (drift repair): puts back a port deleted by hand, corrects a
    /// tag changed by hand.
    pub async fn check_now(&self) -> Option<ChangeReport> {
        let last = self.memory.lock().await.last.clone()?;
        Some(self.reconcile(&last).await)
    }
}

#[async_trait::async_trait]
impl crate::caps::OvsPortReconciler for OvsPorts {
    async fn reconcile_ports(&self, desired: &BTreeSet<OvsPortSpec>) -> ChangeReport {
        self.reconcile(desired).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InterfaceName;

    fn spec(bridge: &str, name: &str, internal: bool, tag: Option<u16>) -> OvsPortSpec {
        OvsPortSpec {
            bridge: InterfaceName::new(bridge).unwrap(),
            name: InterfaceName::new(name).unwrap(),
            internal,
            vlan_tag: tag,
        }
    }

    #[test]
    fn read_arguments_never_list_whole_tables() {
        assert_eq!(
            PortState::vsctl_args(&[], &[]).join(" "),
            "--format=json -- --columns=_uuid,name,tag,external_ids find Port external_ids:ovn-bgp-agent=owned"
        );
        assert_eq!(
            PortState::vsctl_args(&["vlan-100"], &["br-ex"]).join(" "),
            "--format=json -- --columns=_uuid,name,tag,external_ids find Port external_ids:ovn-bgp-agent=owned \
             -- --if-exists --columns=_uuid,name,tag,external_ids list Port vlan-100 \
             -- --if-exists --columns=name,type list Interface vlan-100 \
             -- --if-exists --columns=name,ports list Bridge br-ex"
        );
    }

    const READ: &str = r#"{"data":[[["uuid","u1"],"vlan-100",7,["map",[["ovn-bgp-agent","owned"]]]],[["uuid","u2"],"veth-ovs-5",["set",[]],["map",[["ovn-bgp-agent","owned"]]]]],"headings":["_uuid","name","tag","external_ids"]}
{"data":[[["uuid","u1"],"vlan-100",7,["map",[["ovn-bgp-agent","owned"]]]],[["uuid","u3"],"theirs",["set",[]],["map",[]]]],"headings":["_uuid","name","tag","external_ids"]}
{"data":[["vlan-100","internal"],["theirs",""]],"headings":["name","type"]}
{"data":[["br-ex",["set",[["uuid","u1"],["uuid","u3"]]]]],"headings":["name","ports"]}
"#;

    #[test]
    fn plans_add_correct_remove_and_leaves_unmarked_ports_alone() {
        let state = PortState::parse(READ, true, true).unwrap();
        assert!(state.ports["vlan-100"].owned && !state.ports["theirs"].owned);
        assert_eq!(state.ports["vlan-100"].tag, Some(7));
        let desired: BTreeSet<OvsPortSpec> = [
            spec("br-ex", "vlan-100", true, Some(100)),
            spec("br-ex", "theirs", true, None),
            spec("br-ex", "veth-ovs-9", false, None),
            spec("br-nope", "vlan-7", true, Some(7)),
        ]
        .into();
        let (ops, problems) = plan(&desired, &state);
        let lines: Vec<String> = ops
            .iter()
            .map(|o| format!("{:?} {}", o.kind, chained(&[o]).join(" ")))
            .collect();
        assert_eq!(
            lines,
            [
                "Add -- --may-exist add-port br-ex veth-ovs-9 external_ids:ovn-bgp-agent=owned",
                "Change -- set port vlan-100 tag=100",
                "Remove -- --if-exists del-port veth-ovs-5",
            ]
        );
        let objects: Vec<&str> = problems.iter().map(|(o, _)| o.as_str()).collect();
        assert_eq!(
            objects,
            [
                "port theirs on bridge br-ex",
                "port vlan-7 on bridge br-nope"
            ]
        );
        assert!(problems[0].1.contains("without external_ids"));
    }

    #[test]
    fn a_marked_port_on_another_bridge_is_moved_and_a_wrong_type_corrected() {
        let state = PortState::parse(READ, true, true).unwrap();
        let desired: BTreeSet<OvsPortSpec> = [spec("br-ex", "veth-ovs-5", true, Some(3))].into();
        let mut state2 = state.clone();
        state2.bridges.insert("br-ex".into(), BTreeSet::new());
        let (ops, _) = plan(&desired, &state2);
        assert_eq!(
            chained(&[&ops[0]]).join(" "),
            "-- --if-exists del-port veth-ovs-5 -- --may-exist add-port br-ex veth-ovs-5 tag=3 \
             external_ids:ovn-bgp-agent=owned -- set interface veth-ovs-5 type=internal"
        );
        let desired: BTreeSet<OvsPortSpec> = [spec("br-ex", "vlan-100", false, Some(7))].into();
        let (ops, _) = plan(&desired, &state);
        assert_eq!(
            chained(&[&ops[0]]).join(" "),
            "-- set interface vlan-100 type=system"
        );
        assert_eq!(ops.len(), 2, "veth-ovs-5 is no longer desired: {ops:?}");
    }

    #[test]
    fn only_a_refused_transaction_is_retried_change_by_change() {
        use std::os::unix::process::ExitStatusExt;
        let failed = |raw: i32, output: &str| OvsError::Failed {
            command: "ovs-vsctl".to_owned(),
            status: std::process::ExitStatus::from_raw(raw),
            output: output.to_owned(),
        };
        assert!(refused_by_ovsdb(&failed(
            256,
            "ovs-vsctl: no bridge named br-nope"
        )));
        assert!(!refused_by_ovsdb(&failed(
            256,
            "ovs-vsctl: timeout after 10 seconds"
        )));
        // Killed by SIGALRM (its --timeout).
        assert!(!refused_by_ovsdb(&failed(14, "")));
    }

    #[test]
    fn conflicting_and_out_of_range_desires_are_reported() {
        let state = PortState::parse(READ, true, true).unwrap();
        let desired: BTreeSet<OvsPortSpec> = [
            spec("br-ex", "p1", true, Some(1)),
            spec("br-ex", "p1", true, Some(2)),
            spec("br-ex", "p2", true, Some(4096)),
        ]
        .into();
        let (ops, problems) = plan(&desired, &state);
        assert!(ops.iter().all(|o| o.kind == OpKind::Remove), "{ops:?}");
        assert_eq!(problems.len(), 2, "{problems:?}");
    }
}
