//! `nb_ovn_bgp_driver` under the replay engine ([`crate::replay`]): the shared [`NbFeed`], the
//! [`NbConditionPolicy`] and the live driver's [`ExposureCache`], fed with the rows the engine
//! delivers.
//!
//! The gateways hosted here come from `Logical_Router_Port.status:hosting-chassis` when the
//! case's schema has the column (OVN >= 23.09, a `schema-extra.json`), or from the case's
//! `driver_inputs` (`{"hosted_gateways": ["<lrp name>", ...]}`, or `null` to go back to
//! `status`): what the live driver reads from the Southbound `chassisredirect` bindings of this
//! chassis on older OVN.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::compute::{ExposureCache, LocalChassis, NbOptions};
use super::{NAME, nb_options, policy};
use crate::caps::ovsdb::{Change, DatabaseSchema, MonitorCondition, MonitorSpec};
use crate::exposure::ExposureSet;
use crate::ovn::nb::condition::{NbConditionPolicy, monitor_conditions};
use crate::ovn::nb::feed::{NbFeed, check_schema, has_lrp_status, monitor_spec};
use crate::plugin::PluginError;
use crate::replay::{ReplayDriver, ReplayInput};

fn failed(message: impl Into<String>) -> PluginError {
    PluginError::Failed {
        plugin: NAME.to_owned(),
        message: message.into(),
    }
}

/// The replay hook of `nb_ovn_bgp_driver`.
pub fn start(input: &ReplayInput) -> Result<Box<dyn ReplayDriver>, PluginError> {
    let options = nb_options(&input.config);
    Ok(Box::new(NbBgpReplay {
        local: super::live::local_chassis(&input.identity),
        policy_base: policy(&input.config, &options),
        lrp_status: Cell::new(false),
        options,
        hosted: None,
        feed: NbFeed::default(),
        cache: std::sync::Mutex::new(ExposureCache::default()),
    }))
}

struct NbBgpReplay {
    local: LocalChassis,
    policy_base: NbConditionPolicy,
    /// Whether the case's schema has `Logical_Router_Port.status` (set by `monitor_spec`).
    lrp_status: Cell<bool>,
    options: NbOptions,
    hosted: Option<BTreeSet<String>>,
    feed: NbFeed,
    /// The live driver's per-root results, so replayed cases run the same computation.
    cache: std::sync::Mutex<ExposureCache>,
}

impl NbBgpReplay {
    fn wanted(&self) -> BTreeMap<String, MonitorCondition> {
        let policy = NbConditionPolicy {
            lrp_status: self.lrp_status.get(),
            ..self.policy_base.clone()
        };
        monitor_conditions(
            &policy.wanted(
                &self.feed.model,
                &self.local.system_id,
                &self.local.hostname,
                &self.local.bridge_mappings,
                self.hosted.as_ref(),
            ),
            policy.evpn,
        )
    }
}

impl ReplayDriver for NbBgpReplay {
    fn database(&self) -> &str {
        "OVN_Northbound"
    }

    fn monitor_spec(&self, schema: &DatabaseSchema) -> Result<MonitorSpec, PluginError> {
        check_schema(schema).map_err(|e| failed(e.to_string()))?;
        self.lrp_status.set(has_lrp_status(schema));
        Ok(monitor_spec(schema, &self.wanted()))
    }

    fn apply(&mut self, changes: &[Change]) {
        self.feed.apply(changes);
    }

    fn conditions(&self) -> BTreeMap<String, MonitorCondition> {
        self.wanted()
    }

    fn exposures(&self) -> Result<ExposureSet, PluginError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        Ok(cache.compute(
            &self.feed.model,
            &self.local,
            &self.options,
            self.hosted.as_ref(),
        ))
    }

    fn driver_input(&mut self, input: &Value) -> Result<(), PluginError> {
        let object = input
            .as_object()
            .ok_or_else(|| failed("driver_inputs: expected {\"hosted_gateways\": [...] | null}"))?;
        for (key, value) in object {
            match (key.as_str(), value) {
                ("hosted_gateways", Value::Null) => self.hosted = None,
                ("hosted_gateways", Value::Array(names)) => {
                    let names = names
                        .iter()
                        .map(|n| {
                            n.as_str().map(str::to_owned).ok_or_else(|| {
                                failed(format!("driver_inputs: hosted_gateways: {n} is not a name"))
                            })
                        })
                        .collect::<Result<BTreeSet<String>, _>>()?;
                    self.hosted = Some(names);
                }
                _ => {
                    return Err(failed(format!(
                        "driver_inputs: unknown input {key:?} = {value} (hosted_gateways: a list \
                         of router port names, or null)"
                    )));
                }
            }
        }
        Ok(())
    }
}
