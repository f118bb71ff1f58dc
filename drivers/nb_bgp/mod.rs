//! `nb_ovn_bgp_driver`: NB DB driver: provider VM, virtual port, floating IP, router gateway,
//! tenant subnet and load-balancer IPs of this chassis, read from the Northbound database
//! (upstream-behaviour.md §1.2).
//!
//! - [`compute`]: the Northbound model ([`crate::ovn::nb`]) → [`crate::exposure::ExposureSet`].
//! - [`replay`]: the step-wise replay hook (the model, condition policy and computation of the
//!   live driver, fed by the replay engine).
//!
//! The live driver (a Northbound session under [`crate::ovn::nb::condition::NbConditionPolicy`],
//! with the Southbound `chassisredirect` fallback for the gateways' hosting chassis on OVN <
//! 23.09) is not built yet: the registration refuses to start.

pub mod compute;
pub mod replay;

use crate::config::{AgentConfig, TenantAdvertisement as ConfigAdvertisement};
use crate::drivers::PendingDriver;
use crate::plugin::{DriverRegistration, PluginContext};
use compute::{NbOptions, TenantAdvertisement};

pub const NAME: &str = "nb_ovn_bgp_driver";

/// The options of `[DEFAULT]` the NB driver computes with.
pub fn nb_options(config: &AgentConfig) -> NbOptions {
    let d = &config.default;
    NbOptions {
        expose_tenant_networks: d.expose_tenant_networks,
        expose_ipv6_gua_tenant_networks: d.expose_ipv6_gua_tenant_networks,
        advertisement: match d.advertisement_method_tenant_networks {
            ConfigAdvertisement::Host => TenantAdvertisement::Host,
            ConfigAdvertisement::Subnet => TenantAdvertisement::Subnet,
        },
        require_snat_disabled_for_tenant_networks: d.require_snat_disabled_for_tenant_networks,
        address_scopes: d
            .address_scopes
            .as_ref()
            .map(|s| s.iter().cloned().collect()),
    }
}

inventory::submit! {
    DriverRegistration {
        name: NAME,
        description: "NB DB driver: like ovn_bgp_driver, read from the Northbound database",
        supported_backends: &["underlay", "vrf", "ovn"],
        own_backend: None,
        factory: |_ctx: &PluginContext| Ok(Box::new(PendingDriver { name: NAME })),
        replay: Some(replay::start),
    }
}
