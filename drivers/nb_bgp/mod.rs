//! `nb_ovn_bgp_driver`: NB DB driver: provider VM, virtual port, floating IP, router gateway,
//! tenant subnet and load-balancer IPs of this chassis, read from the Northbound database
//! (upstream-behaviour.md §1.2).
//!
//! - [`compute`]: the Northbound model ([`crate::ovn::nb`]) → [`crate::exposure::ExposureSet`].
//! - [`live`]: the driver: a Northbound session under
//!   [`crate::ovn::nb::condition::NbConditionPolicy`], with the Southbound `chassisredirect`
//!   fallback for the gateways' hosting chassis on OVN < 23.09.
//! - [`replay`]: the step-wise replay hook (the model, condition policy and computation of the
//!   live driver, fed by the replay engine).
//!
//! Built exposing methods: `underlay` (everything in the default VRF, announced from `bgp-nic`),
//! `vrf` (each L3 EVPN provider network in a VRF of its own, realised by `backends/vrf`) and
//! `ovn` (computed as `underlay`; `backends/ovn_cluster` wires the node-local OVN cluster and
//! reports the tenant exposures it cannot realise).

pub mod compute;
pub(crate) mod explain;
pub mod live;
pub mod replay;

use crate::config::{AgentConfig, TenantAdvertisement as ConfigAdvertisement};
use crate::ovn::nb::condition::NbConditionPolicy;
use crate::ovn::tenant::TenantOptions;
use crate::plugin::{Driver, DriverRegistration, PluginContext, PluginError};
use compute::{ExposingMethod, NbOptions, TenantAdvertisement};

pub const NAME: &str = "nb_ovn_bgp_driver";

/// The options of `[DEFAULT]` the NB driver computes with.
pub fn nb_options(config: &AgentConfig) -> NbOptions {
    let d = &config.default;
    NbOptions {
        tenant: TenantOptions::from_config(d),
        advertisement: match d.advertisement_method_tenant_networks {
            ConfigAdvertisement::Host => TenantAdvertisement::Host,
            ConfigAdvertisement::Subnet => TenantAdvertisement::Subnet,
        },
        require_snat_disabled_for_tenant_networks: d.require_snat_disabled_for_tenant_networks,
        method: if d.exposing_method == "vrf" {
            ExposingMethod::Vrf
        } else {
            ExposingMethod::Underlay
        },
        // Checked when the configuration is loaded; an unusable value is reported per EVPN
        // network by the computation, not a panic here.
        bgp_as: d.bgp_as.trim().parse().ok(),
    }
}

/// The Northbound condition policy of these options (`lrp_status` is set by the session from
/// the server's schema).
pub fn policy(config: &AgentConfig, options: &NbOptions) -> NbConditionPolicy {
    NbConditionPolicy {
        lrp_status: false,
        follow_tenant_networks: options.tenant.enabled(),
        snat_rules: options.require_snat_disabled_for_tenant_networks,
        all_vm_ports: config.ovn.nb_watch_all_vm_ports,
        evpn: options.method == ExposingMethod::Vrf,
    }
}

fn factory(ctx: &PluginContext) -> Result<Box<dyn Driver>, PluginError> {
    Ok(Box::new(live::NbBgpDriver::new(ctx)))
}

inventory::submit! {
    DriverRegistration {
        name: NAME,
        description: "NB DB driver: like ovn_bgp_driver, read from the Northbound database",
        supported_backends: &["underlay", "vrf", "ovn"],
        own_backend: None,
        factory,
        replay: Some(replay::start),
    }
}
