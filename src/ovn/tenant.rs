//! The tenant-network options of `[DEFAULT]`, as every BGP driver applies them: whether tenant
//! networks are exposed at all, which addresses (`expose_ipv6_gua_tenant_networks` alone: IPv6
//! global unicast only) and which address scopes (`address_scopes`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::config::DefaultSection;
use crate::ovn::neutron;

/// `expose_tenant_networks`, `expose_ipv6_gua_tenant_networks`, `address_scopes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantOptions {
    pub expose_tenant_networks: bool,
    pub expose_ipv6_gua_tenant_networks: bool,
    /// `address_scopes`: when set, only subnets/ports whose address scope is listed are exposed.
    pub address_scopes: Option<BTreeSet<String>>,
}

impl TenantOptions {
    pub fn from_config(d: &DefaultSection) -> Self {
        Self {
            expose_tenant_networks: d.expose_tenant_networks,
            expose_ipv6_gua_tenant_networks: d.expose_ipv6_gua_tenant_networks,
            address_scopes: d
                .address_scopes
                .as_ref()
                .map(|s| s.iter().cloned().collect()),
        }
    }

    /// Tenant networks are exposed at all.
    pub fn enabled(&self) -> bool {
        self.expose_tenant_networks || self.expose_ipv6_gua_tenant_networks
    }

    /// `expose_tenant_networks` overrides the GUA-only option.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        if self.expose_tenant_networks {
            return true;
        }
        match ip {
            IpAddr::V4(_) => false,
            // Global unicast is 2000::/3 (documentation prefixes included, as upstream).
            IpAddr::V6(v6) => (v6.segments()[0] & 0xe000) == 0x2000,
        }
    }

    /// With address scopes configured, the scope of `ip`'s family in a port's `external_ids`
    /// (`neutron:subnet_pool_addr_scope4/6`) must be listed; a port without one is refused, as
    /// upstream.
    pub fn allows_scope(&self, external_ids: &BTreeMap<String, String>, ip: IpAddr) -> bool {
        let Some(allowed) = &self.address_scopes else {
            return true;
        };
        neutron::address_scope(ip.is_ipv4(), |k| external_ids.get(k).map(String::as_str))
            .is_some_and(|s| allowed.contains(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gua_only_and_scopes() {
        let mut t = TenantOptions {
            expose_ipv6_gua_tenant_networks: true,
            ..Default::default()
        };
        assert!(t.enabled());
        assert!(t.allows_ip("2001:db8::1".parse().unwrap()));
        assert!(!t.allows_ip("fd00::1".parse().unwrap()));
        assert!(!t.allows_ip("10.0.0.1".parse().unwrap()));
        let ids = BTreeMap::from([(
            "neutron:subnet_pool_addr_scope4".to_owned(),
            "scope-a".to_owned(),
        )]);
        assert!(t.allows_scope(&ids, "10.0.0.1".parse().unwrap()));
        t.address_scopes = Some(BTreeSet::from(["scope-a".to_owned()]));
        assert!(t.allows_scope(&ids, "10.0.0.1".parse().unwrap()));
        assert!(
            !t.allows_scope(&ids, "2001:db8::1".parse().unwrap()),
            "no v6 scope"
        );
        assert!(!TenantOptions::default().enabled());
    }
}
