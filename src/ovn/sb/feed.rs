//! Southbound rows, as the OVSDB replica holds them, into the SB drivers' model: the one
//! conversion both the live drivers and the replay harness ([`crate::replay`]) go through. A
//! replayed case is decoded by the OVSDB client's own decoder into a replica and filtered by the
//! driver's monitor condition, so a replay exercises the same code as a real download.

use std::collections::{BTreeSet, HashMap};

use super::model::{
    ChassisRow, LoadBalancer, LoadBalancerRow, LogicalDpGroup, PortBinding, SbModel,
};
use crate::caps::ovsdb::{
    Change, ChangeKind, DatabaseSchema, MonitorCondition, MonitorSpec, Row, TableSpec,
};
use crate::ovn::table::{OvnTable, SchemaMismatch};

/// Why a Southbound schema cannot serve the SB drivers.
pub type SbSchemaError = SchemaMismatch;

/// Every table the SB drivers read is declared with columns and readers the server's schema
/// matches (the start-time check of the typed rows). Logical_DP_Group is only checked where it
/// exists (OVN >= 21.09).
pub fn check_schema(schema: &DatabaseSchema) -> Result<(), SbSchemaError> {
    PortBinding::check_schema(schema)?;
    ChassisRow::check_schema(schema)?;
    LoadBalancerRow::check_schema(schema)?;
    if schema.tables.contains_key(LogicalDpGroup::TABLE) {
        LogicalDpGroup::check_schema(schema)?;
    }
    Ok(())
}

/// The Southbound tables and columns the SB drivers read, as `schema` has them (the
/// Load_Balancer datapath columns and Logical_DP_Group differ between OVN versions), with the
/// conditions the live driver monitors under (none for a snapshot).
pub fn monitor_spec(
    schema: &DatabaseSchema,
    chassis: Option<MonitorCondition>,
    port_bindings: Option<MonitorCondition>,
) -> MonitorSpec {
    let with = |t: TableSpec, c: Option<MonitorCondition>| match c {
        Some(c) => t.with_condition(c),
        None => t,
    };
    let table = |name: &str, columns: Vec<&str>| TableSpec::new(name, &columns);
    let mut spec = MonitorSpec::default()
        .table(with(
            table(ChassisRow::TABLE, ChassisRow::monitored_columns(schema)),
            chassis,
        ))
        .table(with(
            table(PortBinding::TABLE, PortBinding::monitored_columns(schema)),
            port_bindings,
        ))
        .table(table(
            LoadBalancerRow::TABLE,
            LoadBalancerRow::monitored_columns(schema),
        ));
    if schema.tables.contains_key(LogicalDpGroup::TABLE) {
        spec = spec.table(table(
            LogicalDpGroup::TABLE,
            LogicalDpGroup::monitored_columns(schema),
        ));
    }
    spec
}

/// Convert a replica row into the typed row.
pub fn port_binding_from_row(row: &Row) -> PortBinding {
    PortBinding::from_row(row)
}

/// The model, and the raw rows it is resolved from.
#[derive(Debug, Default)]
pub struct SbFeed {
    pub model: SbModel,
    /// Raw Load_Balancer rows (name, direct datapaths, group references), resolved into the
    /// model whenever a row or a group changes.
    lb_rows: HashMap<String, (String, Vec<String>, Vec<String>)>,
    groups: HashMap<String, Vec<String>>,
}

impl SbFeed {
    /// Apply one batch of Southbound changes to the model.
    pub fn apply(&mut self, changes: &[Change]) {
        let mut lbs_to_resolve = BTreeSet::new();
        let mut groups_changed = false;
        for change in changes {
            let uuid = change.uuid.to_string();
            let new = match &change.kind {
                ChangeKind::Insert { new } | ChangeKind::Update { new, .. } => Some(new),
                ChangeKind::Delete { .. } => None,
            };
            match &*change.table {
                PortBinding::TABLE => match new {
                    Some(row) => self.model.upsert_port(PortBinding::from_row(row)),
                    None => self.model.remove_port(&uuid),
                },
                ChassisRow::TABLE => match new {
                    Some(row) => self
                        .model
                        .upsert_chassis(uuid, ChassisRow::from_row(row).name),
                    None => self.model.remove_chassis(&uuid),
                },
                LogicalDpGroup::TABLE => {
                    match new {
                        Some(row) => {
                            self.groups
                                .insert(uuid, LogicalDpGroup::from_row(row).datapaths);
                        }
                        None => {
                            self.groups.remove(&uuid);
                        }
                    }
                    groups_changed = true;
                }
                LoadBalancerRow::TABLE => {
                    match new {
                        Some(row) => {
                            let lb = LoadBalancerRow::from_row(row);
                            // Columns an older schema lacks are read as empty.
                            let groups = [
                                lb.datapath_group,
                                lb.ls_datapath_group,
                                lb.lr_datapath_group,
                            ]
                            .concat();
                            self.lb_rows
                                .insert(uuid.clone(), (lb.name, lb.datapaths, groups));
                        }
                        None => {
                            self.lb_rows.remove(&uuid);
                        }
                    }
                    lbs_to_resolve.insert(uuid);
                }
                _ => {}
            }
        }
        if groups_changed {
            lbs_to_resolve.extend(self.lb_rows.keys().cloned());
        }
        for lb in lbs_to_resolve {
            self.resolve_lb(&lb);
        }
    }

    fn resolve_lb(&mut self, uuid: &str) {
        let Some((name, direct, groups)) = self.lb_rows.get(uuid) else {
            self.model.remove_load_balancer(uuid);
            return;
        };
        let mut datapaths: BTreeSet<String> = direct.iter().cloned().collect();
        for g in groups {
            datapaths.extend(self.groups.get(g).into_iter().flatten().cloned());
        }
        self.model.upsert_load_balancer(LoadBalancer {
            uuid: uuid.to_owned(),
            name: name.clone(),
            datapaths,
        });
    }
}
