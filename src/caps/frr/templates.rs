//! FRR configuration snippets (upstream-behaviour.md §6), rendered with minijinja from validated
//! values only.
//!
//! Differences from upstream, on purpose: block tags leave no empty lines (`trim_blocks`), the
//! `redistribute` lines come from a sorted set (stable across processes), and `ADD_VRF` always has a
//! real route distinguisher (the constructor refuses to build one from a missing VTEP address
//! instead of rendering `rd None:<vni>`).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::OnceLock;

use ipnet::Ipv6Net;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use super::values::{Asn, Redistribute, RouteDistinguisher, RouteTarget, RouterId, Vni, VrfName};
use crate::types::InterfaceName;

/// Rendering failed; only possible through a bug in a template (values are pre-validated).
#[derive(Debug, thiserror::Error)]
#[error("rendering FRR template {template}: {source}")]
pub struct RenderError {
    pub template: &'static str,
    #[source]
    pub source: minijinja::Error,
}

const LEAK_VRF: &str = "\
router bgp {{ bgp_as }}
  address-family ipv4 unicast
    import vrf {{ vrf_name }}
  exit-address-family

  address-family ipv6 unicast
    import vrf {{ vrf_name }}
  exit-address-family

router bgp {{ bgp_as }} vrf {{ vrf_name }}
  bgp router-id {{ bgp_router_id }}
  address-family ipv4 unicast
  {% for redist in redistribute %}
    redistribute {{ redist }}
  {% endfor %}
  exit-address-family

  address-family ipv6 unicast
  {% for redist in redistribute %}
    redistribute {{ redist }}
  {% endfor %}
  exit-address-family

";

const ADD_VRF: &str = "\
vrf {{ vrf_name }}
  vni {{ vni }}
exit-vrf

router bgp {{ bgp_as }} vrf {{ vrf_name }}
  address-family ipv4 unicast
  {% for redist in redistribute %}
    redistribute {{ redist }}
  {% endfor %}
  exit-address-family
  address-family ipv6 unicast
  {% for redist in redistribute %}
    redistribute {{ redist }}
  {% endfor %}
  exit-address-family
  address-family l2vpn evpn
    advertise ipv4 unicast
    advertise ipv6 unicast
    rd {{ rd }}
  {% for route_target in route_targets %}
    route-target import {{ route_target }}
    route-target export {{ route_target }}
  {% endfor %}
  {% for route_target in export_targets %}
    route-target export {{ route_target }}
  {% endfor %}
  {% for route_target in import_targets %}
    route-target import {{ route_target }}
  {% endfor %}
  exit-address-family

";

const DEL_VRF: &str = "\
no vrf {{ vrf_name }}
{% if veth %}
no interface {{ veth }}
{% endif %}
no router bgp {{ bgp_as }} vrf {{ vrf_name }}

";

const CONFIGURE_ND: &str = "\
interface {{ intf }}
{% if managed_config %}
 ipv6 nd managed-config-flag
{% endif %}
{% for server in dns_servers %}
 ipv6 nd rdnss {{ server }}
{% endfor %}
 ipv6 nd prefix {{ prefix }}{% if not autoconfig %} no-autoconfig{% endif %}

 no ipv6 nd suppress-ra
exit
";

// Undoes CONFIGURE_ND inside the interface block (the interface itself may still exist in the
// kernel, so `no interface` would be refused): RAs off again, the prefix and the flags withdrawn.
const UNCONFIGURE_ND: &str = "\
interface {{ intf }}
 ipv6 nd suppress-ra
{% if managed_config %}
 no ipv6 nd managed-config-flag
{% endif %}
{% for server in dns_servers %}
 no ipv6 nd rdnss {{ server }}
{% endfor %}
 no ipv6 nd prefix {{ prefix }}
exit
";

const NIC_REDISTRIBUTE: &str = "\
route-map {{ route_map }} permit 10
 match interface {{ nic }}
exit
router bgp {{ bgp_as }}
  address-family ipv4 unicast
  {% for redist in redistribute %}
    redistribute {{ redist }} route-map {{ route_map }}
  {% endfor %}
  exit-address-family

  address-family ipv6 unicast
  {% for redist in redistribute %}
    redistribute {{ redist }} route-map {{ route_map }}
  {% endfor %}
  exit-address-family

";

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(true);
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // No auto-escaping: the output is FRR CLI, not HTML; safety comes from the value types.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        for (name, source) in [
            ("leak_vrf", LEAK_VRF),
            ("add_vrf", ADD_VRF),
            ("del_vrf", DEL_VRF),
            ("configure_nd", CONFIGURE_ND),
            ("unconfigure_nd", UNCONFIGURE_ND),
            ("nic_redistribute", NIC_REDISTRIBUTE),
        ] {
            env.add_template(name, source)
                .expect("built-in FRR templates are valid");
        }
        env
    })
}

fn render(template: &'static str, ctx: impl Serialize) -> Result<String, RenderError> {
    environment()
        .get_template(template)
        .and_then(|t| t.render(ctx))
        .map_err(|source| RenderError { template, source })
}

fn strings<T: ToString>(items: impl IntoIterator<Item = T>) -> Vec<String> {
    items.into_iter().map(|i| i.to_string()).collect()
}

/// A configuration snippet that can be rendered for `vtysh -f`.
pub trait FrrSnippet {
    fn render(&self) -> Result<String, RenderError>;
}

/// `LEAK_VRF_TEMPLATE`: import the agent VRF into the default BGP instance and redistribute
/// the VRF's routes (the underlay exposure of A1/A2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakVrf {
    pub bgp_as: Asn,
    pub vrf_name: VrfName,
    pub router_id: RouterId,
    pub redistribute: BTreeSet<Redistribute>,
}

impl FrrSnippet for LeakVrf {
    fn render(&self) -> Result<String, RenderError> {
        render(
            "leak_vrf",
            minijinja::context! {
                bgp_as => self.bgp_as.to_string(),
                vrf_name => self.vrf_name.as_str(),
                bgp_router_id => self.router_id.to_string(),
                redistribute => strings(&self.redistribute),
            },
        )
    }
}

/// `ADD_VRF_TEMPLATE`: an EVPN L3 VRF with its VNI, RD and route targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddVrf {
    pub bgp_as: Asn,
    pub vrf_name: VrfName,
    pub vni: Vni,
    pub rd: RouteDistinguisher,
    /// Imported and exported.
    pub route_targets: Vec<RouteTarget>,
    pub export_targets: Vec<RouteTarget>,
    pub import_targets: Vec<RouteTarget>,
    pub redistribute: BTreeSet<Redistribute>,
}

impl AddVrf {
    /// Upstream's default VRF name for a VNI: `vrf-<vni>`.
    pub fn default_vrf_name(vni: Vni) -> VrfName {
        // "vrf-" + at most 8 digits: always a valid interface name.
        InterfaceName::new(format!("vrf-{vni}")).expect("vrf-<24-bit vni> fits IFNAMSIZ")
    }
}

impl FrrSnippet for AddVrf {
    fn render(&self) -> Result<String, RenderError> {
        render(
            "add_vrf",
            minijinja::context! {
                bgp_as => self.bgp_as.to_string(),
                vrf_name => self.vrf_name.as_str(),
                vni => self.vni.get(),
                rd => self.rd.to_string(),
                route_targets => strings(&self.route_targets),
                export_targets => strings(&self.export_targets),
                import_targets => strings(&self.import_targets),
                redistribute => strings(&self.redistribute),
            },
        )
    }
}

/// `DEL_VRF_TEMPLATE`: remove an EVPN VRF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelVrf {
    pub bgp_as: Asn,
    pub vrf_name: VrfName,
    /// `veth-<vrf>` when that is a valid interface name (upstream's SB EVPN veth); a longer VRF
    /// name cannot have such an interface, so the line is omitted.
    pub veth: Option<InterfaceName>,
}

impl DelVrf {
    pub fn new(bgp_as: Asn, vrf_name: VrfName) -> Self {
        let veth = InterfaceName::new(format!("veth-{vrf_name}")).ok();
        Self {
            bgp_as,
            vrf_name,
            veth,
        }
    }
}

impl FrrSnippet for DelVrf {
    fn render(&self) -> Result<String, RenderError> {
        render(
            "del_vrf",
            minijinja::context! {
                bgp_as => self.bgp_as.to_string(),
                vrf_name => self.vrf_name.as_str(),
                veth => self.veth.as_ref().map(|v| v.as_str()),
            },
        )
    }
}

/// `CONFIGURE_ND_TEMPLATE`: router advertisements for an IPv6 subnet on a VRF-side interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigureNd {
    pub interface: InterfaceName,
    /// `ipv6 nd managed-config-flag` (upstream: always set).
    pub managed_config: bool,
    pub dns_servers: Vec<IpAddr>,
    pub prefix: Ipv6Net,
    /// SLAAC allowed; upstream adds `no-autoconfig` unless `dhcpv6_stateless` is true.
    pub autoconfig: bool,
}

impl FrrSnippet for ConfigureNd {
    fn render(&self) -> Result<String, RenderError> {
        render(
            "configure_nd",
            minijinja::context! {
                intf => self.interface.as_str(),
                managed_config => self.managed_config,
                dns_servers => strings(&self.dns_servers),
                prefix => self.prefix.to_string(),
                autoconfig => self.autoconfig,
            },
        )
    }
}

/// The removal of a [`ConfigureNd`]: router advertisements suppressed again and the prefix,
/// DNS servers and managed flag withdrawn, leaving the interface itself alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnconfigureNd(pub ConfigureNd);

impl FrrSnippet for UnconfigureNd {
    fn render(&self) -> Result<String, RenderError> {
        let nd = &self.0;
        render(
            "unconfigure_nd",
            minijinja::context! {
                intf => nd.interface.as_str(),
                managed_config => nd.managed_config,
                dns_servers => strings(&nd.dns_servers),
                prefix => nd.prefix.to_string(),
            },
        )
    }
}

/// Redistribute the routes of one interface (the agent's NIC) straight into the default BGP
/// instance, filtered by a route-map on that interface. Used where the kernel has no VRF
/// support (`[linux] vrf_device_kind = bridge`): without a kernel VRF, zebra puts the NIC's
/// connected routes in the default table, so the leak through `bgp-vrf` cannot carry them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicRedistribute {
    pub bgp_as: Asn,
    pub nic: InterfaceName,
    pub redistribute: BTreeSet<Redistribute>,
}

impl NicRedistribute {
    /// Name of the route-map the snippet defines (`oba-<nic>`).
    pub fn route_map_name(&self) -> String {
        format!("oba-{}", self.nic)
    }
}

impl FrrSnippet for NicRedistribute {
    fn render(&self) -> Result<String, RenderError> {
        render(
            "nic_redistribute",
            minijinja::context! {
                bgp_as => self.bgp_as.to_string(),
                nic => self.nic.as_str(),
                route_map => self.route_map_name(),
                redistribute => strings(&self.redistribute),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asn() -> Asn {
        "64999".parse().unwrap()
    }

    #[test]
    fn leak_vrf_golden() {
        let leak = LeakVrf {
            bgp_as: asn(),
            vrf_name: InterfaceName::new("bgp-vrf").unwrap(),
            router_id: "172.24.4.1".parse().unwrap(),
            redistribute: [Redistribute::Kernel, Redistribute::Connected].into(),
        };
        let expected = "\
router bgp 64999
  address-family ipv4 unicast
    import vrf bgp-vrf
  exit-address-family

  address-family ipv6 unicast
    import vrf bgp-vrf
  exit-address-family

router bgp 64999 vrf bgp-vrf
  bgp router-id 172.24.4.1
  address-family ipv4 unicast
    redistribute connected
    redistribute kernel
  exit-address-family

  address-family ipv6 unicast
    redistribute connected
    redistribute kernel
  exit-address-family

";
        assert_eq!(leak.render().unwrap(), expected);
    }

    #[test]
    fn add_vrf_golden_with_rd_from_vtep() {
        let vni = Vni::new(1001).unwrap();
        let add = AddVrf {
            bgp_as: asn(),
            vrf_name: AddVrf::default_vrf_name(vni),
            vni,
            rd: RouteDistinguisher::explicit_or_vtep(None, Some("10.0.0.1".parse().unwrap()), vni)
                .unwrap(),
            route_targets: vec!["64999:1001".parse().unwrap()],
            export_targets: vec![],
            import_targets: vec!["64999:7".parse().unwrap()],
            redistribute: [Redistribute::Connected].into(),
        };
        let expected = "\
vrf vrf-1001
  vni 1001
exit-vrf

router bgp 64999 vrf vrf-1001
  address-family ipv4 unicast
    redistribute connected
  exit-address-family
  address-family ipv6 unicast
    redistribute connected
  exit-address-family
  address-family l2vpn evpn
    advertise ipv4 unicast
    advertise ipv6 unicast
    rd 10.0.0.1:1001
    route-target import 64999:1001
    route-target export 64999:1001
    route-target import 64999:7
  exit-address-family

";
        assert_eq!(add.render().unwrap(), expected);
    }

    #[test]
    fn del_vrf_golden() {
        let del = DelVrf::new(asn(), InterfaceName::new("vrf-1001").unwrap());
        assert_eq!(
            del.render().unwrap(),
            "no vrf vrf-1001\nno interface veth-vrf-1001\nno router bgp 64999 vrf vrf-1001\n\n"
        );
        let long = DelVrf::new(asn(), InterfaceName::new("vrf-1234567890").unwrap());
        assert_eq!(
            long.render().unwrap(),
            "no vrf vrf-1234567890\nno router bgp 64999 vrf vrf-1234567890\n\n"
        );
    }

    #[test]
    fn configure_nd_golden() {
        let nd = ConfigureNd {
            interface: InterfaceName::new("vrfabcdef12-34").unwrap(),
            managed_config: true,
            dns_servers: vec!["2001:db8::53".parse().unwrap()],
            prefix: "2001:db8:1::/64".parse().unwrap(),
            autoconfig: false,
        };
        assert_eq!(
            nd.render().unwrap(),
            "interface vrfabcdef12-34\n ipv6 nd managed-config-flag\n ipv6 nd rdnss 2001:db8::53\n \
             ipv6 nd prefix 2001:db8:1::/64 no-autoconfig\n no ipv6 nd suppress-ra\nexit\n"
        );
        let slaac = ConfigureNd {
            autoconfig: true,
            dns_servers: vec![],
            managed_config: false,
            ..nd
        };
        assert_eq!(
            slaac.render().unwrap(),
            "interface vrfabcdef12-34\n ipv6 nd prefix 2001:db8:1::/64\n no ipv6 nd suppress-ra\nexit\n"
        );
    }

    #[test]
    fn unconfigure_nd_golden() {
        let nd = ConfigureNd {
            interface: InterfaceName::new("vrfabcdef12-34").unwrap(),
            managed_config: true,
            dns_servers: vec!["2001:db8::53".parse().unwrap()],
            prefix: "2001:db8:1::/64".parse().unwrap(),
            autoconfig: false,
        };
        assert_eq!(
            UnconfigureNd(nd).render().unwrap(),
            "interface vrfabcdef12-34\n ipv6 nd suppress-ra\n no ipv6 nd managed-config-flag\n \
             no ipv6 nd rdnss 2001:db8::53\n no ipv6 nd prefix 2001:db8:1::/64\nexit\n"
        );
    }

    #[test]
    fn nic_redistribute_golden() {
        let nic = NicRedistribute {
            bgp_as: asn(),
            nic: InterfaceName::new("bgp-nic").unwrap(),
            redistribute: [Redistribute::Connected].into(),
        };
        assert_eq!(
            nic.render().unwrap(),
            "route-map oba-bgp-nic permit 10\n match interface bgp-nic\nexit\nrouter bgp 64999\n  \
             address-family ipv4 unicast\n    redistribute connected route-map oba-bgp-nic\n  \
             exit-address-family\n\n  address-family ipv6 unicast\n    redistribute connected \
             route-map oba-bgp-nic\n  exit-address-family\n\n"
        );
    }
}
