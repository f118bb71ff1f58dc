//! Northbound rows, as the OVSDB replica holds them, into the NB drivers' model: the one
//! conversion both the live driver and the replay harness ([`crate::replay`]) go through.

use std::collections::BTreeMap;

use super::model::{
    DhcpOptions, LoadBalancer, LogicalRouter, LogicalSwitch, Lrp, Lsp, Nat, NbGlobal, NbModel,
};
use crate::caps::ovsdb::{
    Change, ChangeKind, DatabaseSchema, MonitorCondition, MonitorSpec, TableSpec,
};
use crate::ovn::table::{OvnTable, SchemaMismatch};

/// Why a Northbound schema cannot serve the NB drivers.
pub type NbSchemaError = SchemaMismatch;

/// Every table the NB drivers read is declared with columns and readers the server's schema
/// matches; `Logical_Router_Port.status` (OVN >= 23.09) and `NAT.gateway_port` (OVN >= 22.12)
/// are optional.
pub fn check_schema(schema: &DatabaseSchema) -> Result<(), NbSchemaError> {
    Lsp::check_schema(schema)?;
    LogicalSwitch::check_schema(schema)?;
    LogicalRouter::check_schema(schema)?;
    Lrp::check_schema(schema)?;
    Nat::check_schema(schema)?;
    LoadBalancer::check_schema(schema)?;
    NbGlobal::check_schema(schema)?;
    DhcpOptions::check_schema(schema)?;
    Ok(())
}

/// Whether the server's schema has `Logical_Router_Port.status` (OVN >= 23.09): without it the
/// hosting chassis of a gateway comes from the Southbound (`chassisredirect` bindings).
pub fn has_lrp_status(schema: &DatabaseSchema) -> bool {
    schema
        .tables
        .get(Lrp::TABLE)
        .is_some_and(|t| t.columns.contains_key("status"))
}

/// Whether the server's schema has `NAT.gateway_port` (centralized floating IPs need it).
pub fn has_nat_gateway_port(schema: &DatabaseSchema) -> bool {
    schema
        .tables
        .get(Nat::TABLE)
        .is_some_and(|t| t.columns.contains_key("gateway_port"))
}

/// The tables and columns the NB drivers read, as `schema` has them, each with its condition
/// from `conditions` (by table name; a table not named is monitored whole). `DHCP_Options` is
/// monitored only when `conditions` names it: only the `vrf` exposing method reads it.
pub fn monitor_spec(
    schema: &DatabaseSchema,
    conditions: &BTreeMap<String, MonitorCondition>,
) -> MonitorSpec {
    let table = |name: &'static str, columns: Vec<&str>| {
        let t = TableSpec::new(name, &columns);
        match conditions.get(name) {
            Some(c) => t.with_condition(c.clone()),
            None => t,
        }
    };
    let mut spec = MonitorSpec::default()
        .table(table(Lsp::TABLE, Lsp::monitored_columns(schema)))
        .table(table(
            LogicalSwitch::TABLE,
            LogicalSwitch::monitored_columns(schema),
        ))
        .table(table(
            LogicalRouter::TABLE,
            LogicalRouter::monitored_columns(schema),
        ))
        .table(table(Lrp::TABLE, Lrp::monitored_columns(schema)))
        .table(table(Nat::TABLE, Nat::monitored_columns(schema)))
        .table(table(
            LoadBalancer::TABLE,
            LoadBalancer::monitored_columns(schema),
        ))
        .table(table(NbGlobal::TABLE, NbGlobal::monitored_columns(schema)));
    if conditions.contains_key(DhcpOptions::TABLE) {
        spec = spec.table(table(
            DhcpOptions::TABLE,
            DhcpOptions::monitored_columns(schema),
        ));
    }
    spec
}

/// The model fed from replica changes.
#[derive(Debug, Default)]
pub struct NbFeed {
    pub model: NbModel,
}

impl NbFeed {
    /// Apply one batch of Northbound changes to the model.
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            let uuid = change.uuid.to_string();
            let new = match &change.kind {
                ChangeKind::Insert { new } | ChangeKind::Update { new, .. } => Some(new),
                ChangeKind::Delete { .. } => None,
            };
            let m = &mut self.model;
            match (&*change.table, new) {
                (Lsp::TABLE, Some(row)) => m.upsert_lsp(Lsp::from_row(row)),
                (Lsp::TABLE, None) => m.remove_lsp(&uuid),
                (LogicalSwitch::TABLE, Some(row)) => m.upsert_switch(LogicalSwitch::from_row(row)),
                (LogicalSwitch::TABLE, None) => m.remove_switch(&uuid),
                (LogicalRouter::TABLE, Some(row)) => m.upsert_router(LogicalRouter::from_row(row)),
                (LogicalRouter::TABLE, None) => m.remove_router(&uuid),
                (Lrp::TABLE, Some(row)) => m.upsert_lrp(Lrp::from_row(row)),
                (Lrp::TABLE, None) => m.remove_lrp(&uuid),
                (Nat::TABLE, Some(row)) => m.upsert_nat(Nat::from_row(row)),
                (Nat::TABLE, None) => m.remove_nat(&uuid),
                (LoadBalancer::TABLE, Some(row)) => m.upsert_lb(LoadBalancer::from_row(row)),
                (LoadBalancer::TABLE, None) => m.remove_lb(&uuid),
                (NbGlobal::TABLE, Some(row)) => m.upsert_nb_global(NbGlobal::from_row(row)),
                (NbGlobal::TABLE, None) => m.remove_nb_global(&uuid),
                (DhcpOptions::TABLE, Some(row)) => {
                    m.upsert_dhcp_options(DhcpOptions::from_row(row))
                }
                (DhcpOptions::TABLE, None) => m.remove_dhcp_options(&uuid),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nb_schema(extra_status: bool) -> DatabaseSchema {
        let mut json: serde_json::Value =
            serde_json::from_str(crate::replay::NB_SCHEMA).expect("vendored NB schema");
        if extra_status {
            json["tables"]["Logical_Router_Port"]["columns"]["status"] = serde_json::json!({
                "type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}
            });
        }
        DatabaseSchema::from_json(&json, "vendored").unwrap()
    }

    #[test]
    fn the_vendored_23_03_schema_serves_the_driver_without_lrp_status() {
        let schema = nb_schema(false);
        check_schema(&schema).unwrap();
        assert!(!has_lrp_status(&schema));
        assert!(has_nat_gateway_port(&schema));
        assert!(!Lrp::monitored_columns(&schema).contains(&"status"));
        let newer = nb_schema(true);
        check_schema(&newer).unwrap();
        assert!(has_lrp_status(&newer));
        assert!(Lrp::monitored_columns(&newer).contains(&"status"));
        // Only the columns read are monitored.
        assert_eq!(
            LogicalSwitch::monitored_columns(&newer),
            vec!["name", "ports", "external_ids"]
        );
        let spec = monitor_spec(&newer, &BTreeMap::new());
        assert_eq!(spec.tables.len(), 7, "DHCP_Options only for the vrf method");
        let vrf = BTreeMap::from([(DhcpOptions::TABLE.to_owned(), MonitorCondition::any([]))]);
        assert_eq!(monitor_spec(&newer, &vrf).tables.len(), 8);
    }
}
