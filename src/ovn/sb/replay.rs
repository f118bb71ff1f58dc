//! An SB driver under the replay engine ([`crate::replay`]): the live driver's pieces (the
//! shared [`SbFeed`], its condition policy, its exposure computation) fed with the rows the
//! engine delivers instead of a Southbound client. Each SB driver's replay hook builds one.

use std::collections::BTreeMap;

use super::condition::{SbConditionPolicy, chassis_condition, monitor_condition};
use super::driver::ComputeFn;
use super::feed::{SbFeed, check_schema, monitor_spec};
use super::model::PortBinding;
use crate::caps::ovsdb::{Change, DatabaseSchema, MonitorCondition, MonitorSpec};
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::table::OvnTable;
use crate::plugin::PluginError;
use crate::replay::ReplayDriver;

/// An SB driver as the replay engine drives it.
pub struct SbReplay<P> {
    plugin: &'static str,
    identity: ChassisIdentity,
    policy: P,
    feed: SbFeed,
    compute: ComputeFn,
}

impl<P: SbConditionPolicy> SbReplay<P> {
    /// The driver `plugin` (its registered name, for errors) on chassis `identity`.
    pub fn new(
        plugin: &'static str,
        identity: ChassisIdentity,
        policy: P,
        compute: ComputeFn,
    ) -> Self {
        Self {
            plugin,
            identity,
            policy,
            feed: SbFeed::default(),
            compute,
        }
    }

    fn port_binding_condition(&self) -> MonitorCondition {
        monitor_condition(
            &self
                .policy
                .wanted(&self.feed.model, &self.identity.system_id),
        )
    }
}

impl<P: SbConditionPolicy> ReplayDriver for SbReplay<P> {
    fn database(&self) -> &str {
        "OVN_Southbound"
    }

    fn monitor_spec(&self, schema: &DatabaseSchema) -> Result<MonitorSpec, PluginError> {
        check_schema(schema).map_err(|e| PluginError::Failed {
            plugin: self.plugin.to_owned(),
            message: e.to_string(),
        })?;
        Ok(monitor_spec(
            schema,
            Some(chassis_condition(&self.identity.system_id)),
            Some(self.port_binding_condition()),
        ))
    }

    fn apply(&mut self, changes: &[Change]) {
        self.feed.apply(changes);
    }

    fn conditions(&self) -> BTreeMap<String, MonitorCondition> {
        BTreeMap::from([(PortBinding::TABLE.to_owned(), self.port_binding_condition())])
    }

    fn exposures(&self) -> Result<ExposureSet, PluginError> {
        Ok((self.compute)(&self.feed.model, &self.identity))
    }
}
