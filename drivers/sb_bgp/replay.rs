//! `ovn_bgp_driver` under the replay engine ([`crate::replay`]): the live driver's pieces (the
//! shared [`SbFeed`], the [`LocalChassisPolicy`] condition, [`super::live::exposures`]) fed
//! with the rows the engine delivers instead of a Southbound client.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::compute::TenantOptions;
use super::live::{self, NAME};
use crate::caps::ovsdb::{Change, DatabaseSchema, MonitorCondition, MonitorSpec};
use crate::config::AgentConfig;
use crate::exposure::ExposureSet;
use crate::ovn::identity::ChassisIdentity;
use crate::ovn::sb::condition::{
    LocalChassisPolicy, SbConditionPolicy, chassis_condition, monitor_condition,
};
use crate::ovn::sb::feed::{SbFeed, check_schema, monitor_spec};
use crate::ovn::sb::model::PortBinding;
use crate::ovn::table::OvnTable;
use crate::plugin::PluginError;
use crate::replay::{ReplayDriver, ReplayInput};

/// The replay hook of `ovn_bgp_driver`.
pub fn start(input: &ReplayInput) -> Result<Box<dyn ReplayDriver>, PluginError> {
    let tenant = live::tenant_options(&input.config);
    Ok(Box::new(SbBgpReplay {
        config: input.config.clone(),
        identity: input.identity.clone(),
        policy: live::policy(&tenant),
        tenant,
        feed: SbFeed::default(),
    }))
}

struct SbBgpReplay {
    config: Arc<AgentConfig>,
    identity: ChassisIdentity,
    policy: LocalChassisPolicy,
    tenant: TenantOptions,
    feed: SbFeed,
}

impl SbBgpReplay {
    fn port_binding_condition(&self) -> MonitorCondition {
        monitor_condition(
            &self
                .policy
                .wanted(&self.feed.model, &self.identity.system_id),
        )
    }
}

impl ReplayDriver for SbBgpReplay {
    fn database(&self) -> &str {
        "OVN_Southbound"
    }

    fn monitor_spec(&self, schema: &DatabaseSchema) -> Result<MonitorSpec, PluginError> {
        check_schema(schema).map_err(|e| PluginError::Failed {
            plugin: NAME.to_owned(),
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
        Ok(live::exposures(
            &self.feed.model,
            &self.identity,
            &self.tenant,
            &self.config,
        ))
    }
}
