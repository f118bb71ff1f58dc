//! Where the gateways are hosted when the Northbound cannot say it: on OVN < 23.09 the NB schema
//! has no `Logical_Router_Port.status`, so the NB driver reads the Southbound `chassisredirect`
//! bindings of this chassis instead (`cr-<lrp name>` bound to this chassis: gateway `<lrp name>`
//! is hosted here). Upstream's NB driver sees no gateway and no centralized floating IP there.
//!
//! The Southbound is monitored as narrowly as OVSDB allows: the own `Chassis` row by name, and
//! `Port_Binding` with `chassis == <own Chassis uuid>` (three columns). OVSDB ORs the clauses of a
//! condition and cannot AND `type == "chassisredirect"` with the chassis, and `type ==
//! "chassisredirect"` alone would bring every gateway of the cloud; the ports bound here are as
//! many as this chassis runs, so the type is filtered here.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::caps::ovsdb::{
    Change, ChangeKind, Clause, DatabaseSchema, MonitorCondition, MonitorSpec, TableSpec, Uuid,
};
use crate::ovn::sb::condition::chassis_condition;
use crate::ovn::sb::model::{CHASSISREDIRECT, ChassisRow};
use crate::ovn::table::{OvnTable, SchemaMismatch};

/// Prefix OVN gives a chassis-redirect port: `cr-<logical router port name>`.
pub const CR_PREFIX: &str = "cr-";

crate::ovn_table! {
    /// The Port_Binding columns the gateway fallback reads.
    pub struct RedirectBinding in "Port_Binding" {
        pub logical_port: String = "logical_port" as Str,
        pub port_type: String = "type" as Str,
        pub chassis: Option<String> = "chassis" as OptRef,
    }
}

impl RedirectBinding {
    /// The router port this binding redirects to, for a `chassisredirect` binding.
    pub fn gateway_port(&self) -> Option<&str> {
        if self.port_type != CHASSISREDIRECT {
            return None;
        }
        self.logical_port
            .strip_prefix(CR_PREFIX)
            .filter(|n| !n.is_empty())
    }
}

/// The Southbound tables of the fallback are declared with columns the server's schema matches.
pub fn check_schema(schema: &DatabaseSchema) -> Result<(), SchemaMismatch> {
    ChassisRow::check_schema(schema)?;
    RedirectBinding::check_schema(schema)
}

/// The Southbound rows the fallback holds, and the gateways they say are hosted here.
#[derive(Debug, Default, Clone)]
pub struct HostedGateways {
    /// Chassis rows monitored (the own one; two during a system-id change): uuid → name.
    chassis: BTreeMap<String, String>,
    bindings: HashMap<String, RedirectBinding>,
}

impl HostedGateways {
    /// Apply one batch of Southbound changes.
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            let uuid = change.uuid.to_string();
            let new = match &change.kind {
                ChangeKind::Insert { new } | ChangeKind::Update { new, .. } => Some(new),
                ChangeKind::Delete { .. } => None,
            };
            match (&*change.table, new) {
                (ChassisRow::TABLE, Some(row)) => {
                    self.chassis.insert(uuid, ChassisRow::from_row(row).name);
                }
                (ChassisRow::TABLE, None) => {
                    self.chassis.remove(&uuid);
                }
                (RedirectBinding::TABLE, Some(row)) => {
                    self.bindings.insert(uuid, RedirectBinding::from_row(row));
                }
                (RedirectBinding::TABLE, None) => {
                    self.bindings.remove(&uuid);
                }
                _ => {}
            }
        }
    }

    /// The uuids of the Chassis rows named `system_id`.
    pub fn chassis_uuids(&self, system_id: &str) -> BTreeSet<String> {
        self.chassis
            .iter()
            .filter(|(_, name)| *name == system_id)
            .map(|(uuid, _)| uuid.clone())
            .collect()
    }

    /// The router ports whose `chassisredirect` binding is on the chassis `system_id`.
    pub fn hosted(&self, system_id: &str) -> BTreeSet<String> {
        let here = self.chassis_uuids(system_id);
        self.bindings
            .values()
            .filter(|b| b.chassis.as_ref().is_some_and(|c| here.contains(c)))
            .filter_map(|b| b.gateway_port().map(str::to_owned))
            .collect()
    }

    /// The Port_Binding condition for the chassis `system_id`: the ports bound to its Chassis
    /// row; nothing before the row is known.
    pub fn binding_condition(&self, system_id: &str) -> MonitorCondition {
        MonitorCondition::any(
            self.chassis_uuids(system_id)
                .iter()
                .filter_map(|u| Uuid::parse(u))
                .map(|u| Clause::eq("chassis", u)),
        )
    }
}

/// The Southbound monitor of the fallback: the Chassis named `system_id`, and the bindings of
/// `bindings`.
pub fn monitor_spec(
    schema: &DatabaseSchema,
    system_id: &str,
    bindings: MonitorCondition,
) -> MonitorSpec {
    MonitorSpec::default()
        .table(
            TableSpec::new(ChassisRow::TABLE, &ChassisRow::monitored_columns(schema))
                .with_condition(chassis_condition(system_id)),
        )
        .table(
            TableSpec::new(
                RedirectBinding::TABLE,
                &RedirectBinding::monitored_columns(schema),
            )
            .with_condition(bindings),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CH1: &str = "11111111-1111-1111-1111-111111111111";
    const CH2: &str = "22222222-2222-2222-2222-222222222222";

    fn binding(name: &str, ty: &str, chassis: Option<&str>) -> RedirectBinding {
        RedirectBinding {
            uuid: format!("pb-{name}"),
            logical_port: name.into(),
            port_type: ty.into(),
            chassis: chassis.map(str::to_owned),
        }
    }

    fn state(bindings: &[RedirectBinding]) -> HostedGateways {
        HostedGateways {
            chassis: BTreeMap::from([
                (CH1.to_owned(), "sys-1".to_owned()),
                (CH2.to_owned(), "sys-2".to_owned()),
            ]),
            bindings: bindings
                .iter()
                .map(|b| (b.uuid.clone(), b.clone()))
                .collect(),
        }
    }

    #[test]
    fn only_chassisredirect_bindings_of_this_chassis_are_hosted_gateways() {
        let s = state(&[
            binding("cr-lrp-a", CHASSISREDIRECT, Some(CH1)),
            binding("cr-lrp-b", CHASSISREDIRECT, Some(CH2)),
            // A VM bound here whose name happens to start with the prefix.
            binding("cr-vm", "", Some(CH1)),
            binding("cr-lrp-c", CHASSISREDIRECT, None),
            binding("cr-", CHASSISREDIRECT, Some(CH1)),
            binding("lrp-d", CHASSISREDIRECT, Some(CH1)),
        ]);
        assert_eq!(s.hosted("sys-1"), BTreeSet::from(["lrp-a".to_owned()]));
        assert_eq!(s.hosted("sys-2"), BTreeSet::from(["lrp-b".to_owned()]));
        assert!(s.hosted("sys-9").is_empty());
    }

    #[test]
    fn the_binding_condition_follows_the_chassis_row() {
        let s = state(&[]);
        assert_eq!(
            s.binding_condition("sys-1").to_json(),
            serde_json::json!([["chassis", "==", ["uuid", CH1]]])
        );
        // Before the Chassis row is known: nothing.
        assert_eq!(
            HostedGateways::default()
                .binding_condition("sys-1")
                .to_json(),
            serde_json::json!([false])
        );
    }

    #[test]
    fn the_installed_southbound_schema_serves_the_fallback() {
        let text = std::fs::read_to_string("/usr/share/ovn/ovn-sb.ovsschema")
            .expect("OVN is installed (scripts/install-deps.sh)");
        let schema =
            DatabaseSchema::from_json(&serde_json::from_str(&text).unwrap(), "file").unwrap();
        check_schema(&schema).unwrap();
        let spec = monitor_spec(&schema, "sys-1", MonitorCondition::any([]));
        assert_eq!(spec.tables.len(), 2);
    }
}
