//! How a third party adds a driver without touching the agent's code.
//!
//! `StaticDriver` exposes the IPs listed in `$STATIC_DRIVER_IPS` (comma-separated) on a chassis,
//! whatever the databases say: a toy, but it goes through the same contract as the real drivers.
//! Registering it is one `inventory::submit!`; the binary then reuses the agent's command line:
//!
//! ```text
//! cargo run --example custom_driver -- plugins
//! cargo run --example custom_driver -- --config-file my.conf      # [DEFAULT] driver = example_static_driver
//! ```

use std::net::IpAddr;

use async_trait::async_trait;
use ovn_bgp_agent::exposure::{ExposedIp, ExposureKind, ExposureSet};
use ovn_bgp_agent::plugin::{ChangeScope, Driver, DriverRegistration, PluginContext, PluginError};

struct StaticDriver {
    ips: Vec<IpAddr>,
}

#[async_trait]
impl Driver for StaticDriver {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        Ok(())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        // Nothing ever changes: the host's periodic reconcile still repairs drift.
        std::future::pending().await
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        let mut set = ExposureSet::default();
        for ip in &self.ips {
            // Announced only: no provider wiring, so the underlay backend puts the address on
            // bgp-nic and the leak VRF announces it. The policy stage still refuses what must
            // never be exposed (multicast, loopback, the host's own addresses...).
            set.expose_ip(ExposedIp::announced(
                *ip,
                ExposureKind::ProviderPort,
                "STATIC_DRIVER_IPS",
            ));
        }
        Ok(set)
    }
}

fn build(_ctx: &PluginContext) -> Result<Box<dyn Driver>, PluginError> {
    let raw = std::env::var("STATIC_DRIVER_IPS").unwrap_or_default();
    let mut ips = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        ips.push(item.parse().map_err(|e| PluginError::Failed {
            plugin: "example_static_driver".to_owned(),
            message: format!("STATIC_DRIVER_IPS entry {item:?}: {e}"),
        })?);
    }
    Ok(Box::new(StaticDriver { ips }))
}

inventory::submit! {
    DriverRegistration {
        name: "example_static_driver",
        description: "example: exposes the IPs in $STATIC_DRIVER_IPS",
        supported_backends: &["underlay"],
        own_backend: None,
        factory: build,
        replay: None,
    }
}

fn main() -> std::process::ExitCode {
    ovn_bgp_agent::cli::main()
}
