//! Which Northbound rows the NB BGP driver monitors: a pure function of the model and the
//! chassis, so the conditional-monitoring logic is tested without a server (as the SB policies
//! in [`crate::ovn::sb::condition`]). OVSDB ORs the clauses of a table; the rows a clause pulls
//! in (a local gateway → its router → its router-interface ports → their switches) call for more
//! clauses, so the driver re-evaluates the policy after every batch until it stops changing.
//!
//! What OVSDB conditions can and cannot select in the NB (a clause compares one column with a
//! constant: `==`, `includes` of set elements or exact map pairs; clauses are ORed, never ANDed,
//! and there is no substring, prefix or key-presence test):
//!
//! | Table | Condition | Why |
//! |---|---|---|
//! | Logical_Router_Port | `status includes {hosting-chassis: <system-id>}` (OVN >= 23.09), or `name == <lrp>` for each gateway the Southbound says is hosted here | exactly the local gateways |
//! | Logical_Router | `ports includes <lrp uuid>` for each local gateway | exactly the local routers |
//! | Logical_Switch_Port | `options includes {requested-chassis: <hostname>}`, `external_ids includes {neutron:host_id: <hostname>}`, `options includes {activation-strategy: rarp}`, `type == "localnet"`; with tenant networks `external_ids includes {neutron:device_id: <router id>}` and `{neutron:network_name: <switch>}` per local router and tenant switch behind it; `name == <neutron:vip_port_id>` per load balancer of a local router | the ports bound here, not every VM port of the cloud. `requested-chassis` is one hostname except during a live migration (`"src,dst"`, which `includes` cannot match: it compares whole map values): the source still matches `neutron:host_id` (Neutron moves it at the end), and the destination matches `activation-strategy=rarp`, which Neutron sets with the two-host list, so every migration in flight in the cloud is monitored (few rows). Neutron omits it for vhost-user (DPDK) ports: the destination of such a migration exposes the port when Neutron binds it there (`requested-chassis` = the destination alone), not during the copy; the source exposes it throughout (so does Neutron's `[ovn] live_migration_activation_strategy = ""`). `[ovn] nb_watch_all_vm_ports = true` adds `type == ""` and `type == "virtual"`, upstream's view, at a memory and start-time cost that grows with the cloud. Virtual ports are bound by `neutron:host_id`. |
//! | Logical_Switch | `ports includes <uuid>` for every localnet port (provider switches) and, with tenant networks, every router-interface port of a local router | the provider switches and the tenant switches behind local routers |
//! | NAT | `gateway_port == <lrp uuid>` per local gateway (centralized FIPs); `logical_port == <port>` for each port listing this host with `neutron:port_fip` (distributed FIPs); `type == "snat"` when `require_snat_disabled_for_tenant_networks` | NAT has no router column: the NATs of a local router without `gateway_port` (Neutron before it set the column) could only be named by `_uuid`, which the agent's condition evaluator does not take; such rows are used when present but not asked for |
//! | Load_Balancer | `external_ids includes {lr_ref: neutron-<id>}` and `{neutron:router_name: neutron-<id>}` per local router | Octavia's and the port forwardings' LBs of local routers (the values Octavia and Neutron write, exactly) |
//! | DHCP_Options (`exposing_method = vrf` only) | `external_ids includes {neutron:network_id: <id>}` for each L3 EVPN provider switch (`neutron_bgpvpn:type = l3` with a VNI) with a localnet port of a physnet mapped here | the gateway addresses and IPv6 prefixes of the EVPN networks this chassis serves, not every subnet of the cloud; Neutron writes the network id on each subnet's row |
//! | NB_Global | every row | one row |

use std::collections::{BTreeMap, BTreeSet};

use super::model::{
    DhcpOptions, LOCALNET, LoadBalancer, LogicalRouter, LogicalSwitch, Lrp, Lsp, Nat, NbGlobal,
    NbKey, NbLookups, NbModel, SNAT, VIRTUAL,
};
use crate::caps::ovsdb::{Clause, Datum, Function, MonitorCondition, Uuid};
use crate::ovn::generations::{ReadSet, Readers};
use crate::ovn::neutron::{self, keys};
use crate::ovn::table::OvnTable;

/// One clause of the NB condition, in a form that can be compared and sorted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NbClause {
    /// LRP `status includes {hosting-chassis: <system-id>}`.
    LrpHostedOn(String),
    /// LRP `name == <name>`.
    LrpNamed(String),
    /// LR `ports includes <lrp uuid>`.
    RouterHasPort(String),
    /// LSP `type == <type>`.
    LspType(String),
    /// LSP `options includes {<key>: <value>}` (`requested-chassis`, `activation-strategy`).
    LspOption { key: &'static str, value: String },
    /// LSP `external_ids includes {<key>: <value>}` (`neutron:host_id`, `neutron:device_id`,
    /// `neutron:network_name`).
    LspExternalId { key: &'static str, value: String },
    /// LSP `name == <name>`.
    LspNamed(String),
    /// LS `ports includes <lsp uuid>`.
    SwitchHasPort(String),
    /// NAT `type == <type>`.
    NatType(String),
    /// NAT `gateway_port == <lrp uuid>`.
    NatGatewayPort(String),
    /// NAT `logical_port == <name>`.
    NatLogicalPort(String),
    /// LB `external_ids includes {<key>: neutron-<router id>}` (`lr_ref`, `neutron:router_name`).
    LbRouter {
        key: &'static str,
        router_id: String,
    },
    /// DHCP_Options `external_ids includes {neutron:network_id: <network id>}`.
    DhcpOfNetwork(String),
}

impl NbClause {
    /// The table the clause applies to.
    pub fn table(&self) -> &'static str {
        match self {
            NbClause::LrpHostedOn(_) | NbClause::LrpNamed(_) => Lrp::TABLE,
            NbClause::RouterHasPort(_) => LogicalRouter::TABLE,
            NbClause::LspType(_)
            | NbClause::LspOption { .. }
            | NbClause::LspExternalId { .. }
            | NbClause::LspNamed(_) => Lsp::TABLE,
            NbClause::SwitchHasPort(_) => LogicalSwitch::TABLE,
            NbClause::NatType(_) | NbClause::NatGatewayPort(_) | NbClause::NatLogicalPort(_) => {
                Nat::TABLE
            }
            NbClause::LbRouter { .. } => LoadBalancer::TABLE,
            NbClause::DhcpOfNetwork(_) => DhcpOptions::TABLE,
        }
    }

    /// The OVSDB clause; `None` for one naming a malformed uuid (never sent).
    pub fn to_clause(&self) -> Option<Clause> {
        let pair = |k: &str, v: &str| Datum::map([(k.to_owned(), v.to_owned())]);
        Some(match self {
            NbClause::LrpHostedOn(sys) => Clause::new(
                "status",
                Function::Includes,
                pair(keys::HOSTING_CHASSIS, sys),
            ),
            NbClause::LrpNamed(n) => Clause::eq("name", n.as_str()),
            NbClause::RouterHasPort(u) => Clause::new("ports", Function::Includes, Uuid::parse(u)?),
            NbClause::LspType(t) => Clause::eq("type", t.as_str()),
            NbClause::LspOption { key, value } => {
                Clause::new("options", Function::Includes, pair(key, value))
            }
            NbClause::LspExternalId { key, value } => {
                Clause::new("external_ids", Function::Includes, pair(key, value))
            }
            NbClause::LspNamed(n) => Clause::eq("name", n.as_str()),
            NbClause::SwitchHasPort(u) => Clause::new("ports", Function::Includes, Uuid::parse(u)?),
            NbClause::NatType(t) => Clause::eq("type", t.as_str()),
            NbClause::NatGatewayPort(u) => Clause::eq("gateway_port", Uuid::parse(u)?),
            NbClause::NatLogicalPort(n) => Clause::eq("logical_port", n.as_str()),
            NbClause::LbRouter { key, router_id } => Clause::new(
                "external_ids",
                Function::Includes,
                pair(key, &neutron::network_switch_name(router_id)),
            ),
            NbClause::DhcpOfNetwork(id) => Clause::new(
                "external_ids",
                Function::Includes,
                pair(keys::NETWORK_ID, id),
            ),
        })
    }
}

/// The tables the NB BGP driver monitors, in the order of [`super::feed::monitor_spec`].
pub const NB_TABLES: [&str; 7] = [
    Lsp::TABLE,
    LogicalSwitch::TABLE,
    LogicalRouter::TABLE,
    Lrp::TABLE,
    Nat::TABLE,
    LoadBalancer::TABLE,
    NbGlobal::TABLE,
];

/// The monitor condition of every NB table for a clause set: NB_Global whole, every other table
/// the rows its clauses select (none when it has no clause). `DHCP_Options` is monitored (and
/// so listed) only with `evpn`, the `vrf` exposing method.
pub fn monitor_conditions(
    clauses: &BTreeSet<NbClause>,
    evpn: bool,
) -> BTreeMap<String, MonitorCondition> {
    let mut out: BTreeMap<String, Vec<Clause>> = NB_TABLES
        .iter()
        .filter(|t| **t != NbGlobal::TABLE)
        .map(|t| ((*t).to_owned(), Vec::new()))
        .collect();
    if evpn {
        out.insert(DhcpOptions::TABLE.to_owned(), Vec::new());
    }
    for c in clauses {
        if let Some(clause) = c.to_clause()
            && let Some(table) = out.get_mut(c.table())
        {
            table.push(clause);
        }
    }
    let mut conditions: BTreeMap<String, MonitorCondition> = out
        .into_iter()
        .map(|(t, c)| (t, MonitorCondition::any(c)))
        .collect();
    conditions.insert(NbGlobal::TABLE.to_owned(), MonitorCondition::All);
    conditions
}

/// What the NB BGP driver's condition depends on besides the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NbConditionPolicy {
    /// The server's schema has `Logical_Router_Port.status` (OVN >= 23.09).
    pub lrp_status: bool,
    /// Tenant networks are exposed: follow local routers to their router-interface ports and
    /// tenant switches.
    pub follow_tenant_networks: bool,
    /// `require_snat_disabled_for_tenant_networks`: the routers' SNAT rules are needed.
    pub snat_rules: bool,
    /// `[ovn] nb_watch_all_vm_ports`: every VM and virtual port of the cloud too (upstream's
    /// view), for migrations written without `activation-strategy`.
    pub all_vm_ports: bool,
    /// `exposing_method = vrf`: the DHCP options of the L3 EVPN provider networks served here.
    pub evpn: bool,
}

impl NbConditionPolicy {
    /// The clauses `model` calls for on the chassis `system_id`/`hostname` with its
    /// `ovn-bridge-mappings` (physnet, bridge), with the gateways `hosted` here according to
    /// the Southbound when the NB cannot say it.
    pub fn wanted(
        &self,
        model: &NbModel,
        system_id: &str,
        hostname: &str,
        bridge_mappings: &[(String, String)],
        hosted: Option<&BTreeSet<String>>,
    ) -> BTreeSet<NbClause> {
        let mut look = NbLookups::plain(model);
        self.clauses(&mut look, system_id, hostname, bridge_mappings, hosted)
    }

    /// [`Self::wanted`], through lookups that may record what they read.
    fn clauses(
        &self,
        model: &mut NbLookups<'_>,
        system_id: &str,
        hostname: &str,
        bridge_mappings: &[(String, String)],
        hosted: Option<&BTreeSet<String>>,
    ) -> BTreeSet<NbClause> {
        let mut want = BTreeSet::from([
            NbClause::LspType(LOCALNET.to_owned()),
            NbClause::LspOption {
                key: keys::REQUESTED_CHASSIS,
                value: hostname.to_owned(),
            },
            NbClause::LspExternalId {
                key: keys::HOST_ID,
                value: hostname.to_owned(),
            },
            NbClause::LspOption {
                key: keys::ACTIVATION_STRATEGY,
                value: neutron::ACTIVATION_STRATEGY_RARP.to_owned(),
            },
        ]);
        if self.all_vm_ports {
            want.insert(NbClause::LspType(String::new()));
            want.insert(NbClause::LspType(VIRTUAL.to_owned()));
        }
        match hosted {
            Some(names) => want.extend(names.iter().cloned().map(NbClause::LrpNamed)),
            None if self.lrp_status => {
                want.insert(NbClause::LrpHostedOn(system_id.to_owned()));
            }
            None => {}
        }
        if self.snat_rules && self.follow_tenant_networks {
            want.insert(NbClause::NatType(SNAT.to_owned()));
        }
        for localnet in model.localnets() {
            want.insert(NbClause::SwitchHasPort(localnet.uuid.clone()));
        }
        if self.evpn {
            // Through the index of the localnet ports of each physnet mapped here: no scan of
            // the provider switches of the cloud.
            for (physnet, _) in bridge_mappings {
                for localnet in model.localnets_of_physnet(physnet) {
                    if let Some(ls) = model.switch_of_port(&localnet.uuid)
                        && ls.is_l3_evpn()
                        && let Some(id) = ls.network_id()
                    {
                        want.insert(NbClause::DhcpOfNetwork(id.to_owned()));
                    }
                }
            }
        }
        for port in model.fip_ports_listing_host(hostname) {
            want.insert(NbClause::NatLogicalPort(port.name.clone()));
        }
        // Without `status` and without the Southbound's word, no gateway is known to be here.
        let gateways = if hosted.is_some() || self.lrp_status {
            model.local_gateways(system_id, hosted)
        } else {
            Vec::new()
        };
        for lrp in gateways {
            want.insert(NbClause::RouterHasPort(lrp.uuid.clone()));
            want.insert(NbClause::NatGatewayPort(lrp.uuid.clone()));
            let Some(router_id) = model.router_id_of_lrp(lrp) else {
                continue;
            };
            for key in [keys::LB_LR_REF, keys::ROUTER_NAME] {
                want.insert(NbClause::LbRouter {
                    key,
                    router_id: router_id.to_owned(),
                });
            }
            // An Octavia VIP port is bound nowhere: asked for by name.
            for lb in model.lbs_of_router(router_id) {
                if let Some(port) = lb.vip_port_id() {
                    want.insert(NbClause::LspNamed(port.to_owned()));
                }
            }
            if self.follow_tenant_networks {
                want.insert(NbClause::LspExternalId {
                    key: keys::DEVICE_ID,
                    value: router_id.to_owned(),
                });
                for rif in model.router_interfaces(router_id) {
                    want.insert(NbClause::SwitchHasPort(rif.uuid.clone()));
                    // Every VM of the tenant network, wherever it is bound (host mode), by the
                    // key upstream itself finds a port's network with.
                    if let Some(ls) = model.switch_of_port(&rif.uuid) {
                        want.insert(NbClause::LspExternalId {
                            key: keys::NETWORK_NAME,
                            value: ls.name.clone(),
                        });
                    }
                }
            }
        }
        want
    }
}

/// The monitor conditions of [`NbConditionPolicy::wanted`], made again only when a lookup they
/// were made from changed, or the policy or the chassis did (issue 17: every event settles the
/// conditions, and making them walks the ports listing this host and the routers of the
/// gateways here: about a fifth of the NB driver's CPU per event on a busy gateway).
#[derive(Debug, Default)]
pub struct WantedConditions {
    made: Option<Made>,
    /// The keys the conditions were made from: an event that stamped none of them leaves them.
    readers: Readers<NbKey, ()>,
}

/// Conditions made, and from what.
#[derive(Debug)]
struct Made {
    policy: NbConditionPolicy,
    system_id: String,
    hostname: String,
    bridge_mappings: Vec<(String, String)>,
    hosted: Option<BTreeSet<String>>,
    reads: ReadSet<NbKey>,
    conditions: BTreeMap<String, MonitorCondition>,
}

impl WantedConditions {
    /// `monitor_conditions(policy.wanted(..), policy.evpn)`, as it is for `model` now.
    pub fn conditions(
        &mut self,
        policy: &NbConditionPolicy,
        model: &NbModel,
        system_id: &str,
        hostname: &str,
        bridge_mappings: &[(String, String)],
        hosted: Option<&BTreeSet<String>>,
    ) -> &BTreeMap<String, MonitorCondition> {
        let generations = model.generations();
        let current = self.made.take().filter(|m| {
            m.policy == *policy
                && m.system_id == system_id
                && m.hostname == hostname
                && m.bridge_mappings == bridge_mappings
                && m.hosted.as_ref() == hosted
                && match self.readers.stale(generations) {
                    Some(stale) => stale.is_empty(),
                    None => m.reads.still_valid(generations),
                }
        });
        let made = match current {
            Some(made) => made,
            None => {
                let mut look = NbLookups::recorded(model);
                let clauses =
                    policy.clauses(&mut look, system_id, hostname, bridge_mappings, hosted);
                let reads = look.finish();
                self.readers.clear();
                self.readers.add(&(), &reads);
                Made {
                    policy: policy.clone(),
                    system_id: system_id.to_owned(),
                    hostname: hostname.to_owned(),
                    bridge_mappings: bridge_mappings.to_vec(),
                    hosted: hosted.cloned(),
                    reads,
                    conditions: monitor_conditions(&clauses, policy.evpn),
                }
            }
        };
        self.readers.now_current(generations);
        &self.made.insert(made).conditions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovn::nb::model::ROUTER;

    const GW: &str = "aaaaaaaa-0000-0000-0000-000000000001";
    const LN: &str = "aaaaaaaa-0000-0000-0000-000000000002";
    const RIF: &str = "aaaaaaaa-0000-0000-0000-000000000003";
    const OTHER_RIF: &str = "aaaaaaaa-0000-0000-0000-000000000004";
    const TENANT_LS: &str = "aaaaaaaa-0000-0000-0000-000000000005";

    fn model() -> NbModel {
        let mut m = NbModel::default();
        let mut gw = Lrp {
            uuid: GW.into(),
            name: "lrp-gw".into(),
            ..Default::default()
        };
        gw.status
            .insert(keys::HOSTING_CHASSIS.into(), "sys-1".into());
        gw.external_ids
            .insert(keys::ROUTER_NAME.into(), "r1".into());
        m.upsert_lrp(gw);
        let mut ln = Lsp {
            uuid: LN.into(),
            name: "provnet-1".into(),
            port_type: LOCALNET.into(),
            ..Default::default()
        };
        ln.options.insert("network_name".into(), "public".into());
        m.upsert_lsp(ln);
        for (uuid, router) in [(RIF, "r1"), (OTHER_RIF, "r2")] {
            let mut rif = Lsp {
                uuid: uuid.into(),
                name: format!("rif-{router}"),
                port_type: ROUTER.into(),
                ..Default::default()
            };
            rif.external_ids.insert(
                keys::DEVICE_OWNER.into(),
                neutron::DEVICE_OWNER_ROUTER_INTERFACE.into(),
            );
            rif.external_ids
                .insert(keys::DEVICE_ID.into(), router.into());
            m.upsert_lsp(rif);
        }
        m.upsert_switch(LogicalSwitch {
            uuid: TENANT_LS.into(),
            name: "neutron-t1".into(),
            ports: vec![RIF.into()],
            ..Default::default()
        });
        let mut lb = LoadBalancer {
            uuid: "lb".into(),
            name: "octavia-lb".into(),
            ..Default::default()
        };
        lb.external_ids
            .insert(keys::LB_LR_REF.into(), "neutron-r1".into());
        lb.external_ids
            .insert(keys::LB_VIP_PORT_ID.into(), "vip-port".into());
        m.upsert_lb(lb);
        let mut vm = Lsp {
            uuid: "vm".into(),
            name: "vm1".into(),
            ..Default::default()
        };
        vm.options
            .insert(keys::REQUESTED_CHASSIS.into(), "node2,node1".into());
        vm.external_ids
            .insert(keys::PORT_FIP.into(), "172.24.4.10".into());
        m.upsert_lsp(vm);
        m
    }

    use NbClause as C;

    fn base() -> BTreeSet<NbClause> {
        BTreeSet::from([
            C::LspType(LOCALNET.into()),
            C::LspOption {
                key: keys::REQUESTED_CHASSIS,
                value: "node1".into(),
            },
            C::LspExternalId {
                key: keys::HOST_ID,
                value: "node1".into(),
            },
            C::LspOption {
                key: keys::ACTIVATION_STRATEGY,
                value: "rarp".into(),
            },
            C::SwitchHasPort(LN.into()),
            C::NatLogicalPort("vm1".into()),
        ])
    }

    fn router_clauses() -> [NbClause; 5] {
        [
            C::LspNamed("vip-port".into()),
            C::RouterHasPort(GW.into()),
            C::NatGatewayPort(GW.into()),
            C::LbRouter {
                key: keys::LB_LR_REF,
                router_id: "r1".into(),
            },
            C::LbRouter {
                key: keys::ROUTER_NAME,
                router_id: "r1".into(),
            },
        ]
    }

    #[test]
    fn gateways_hosted_here_by_status_pull_in_their_router() {
        let m = model();
        let p = NbConditionPolicy {
            lrp_status: true,
            follow_tenant_networks: false,
            snat_rules: true,
            all_vm_ports: false,
            evpn: false,
        };
        let mut expect = base();
        expect.insert(C::LrpHostedOn("sys-1".into()));
        expect.extend(router_clauses());
        assert_eq!(p.wanted(&m, "sys-1", "node1", &[], None), expect);

        // Tenant networks: the router's interfaces and their switches, and SNAT rules.
        let p = NbConditionPolicy {
            follow_tenant_networks: true,
            ..p
        };
        expect.extend([
            C::LspExternalId {
                key: keys::DEVICE_ID,
                value: "r1".into(),
            },
            C::SwitchHasPort(RIF.into()),
            C::LspExternalId {
                key: keys::NETWORK_NAME,
                value: "neutron-t1".into(),
            },
            C::NatType(SNAT.into()),
        ]);
        assert_eq!(p.wanted(&m, "sys-1", "node1", &[], None), expect);

        // Another chassis: no gateway, no router.
        let mut other = base();
        other.insert(C::LrpHostedOn("sys-2".into()));
        other.insert(C::NatType(SNAT.into()));
        assert_eq!(p.wanted(&m, "sys-2", "node1", &[], None), other);
    }

    #[test]
    fn without_lrp_status_the_southbound_names_the_gateways() {
        let m = model();
        let p = NbConditionPolicy {
            lrp_status: false,
            follow_tenant_networks: false,
            snat_rules: false,
            all_vm_ports: false,
            evpn: false,
        };
        // Nothing hosted known: no LRP clause at all (an empty condition selects nothing).
        assert_eq!(p.wanted(&m, "sys-1", "node1", &[], None), base());
        let hosted = BTreeSet::from(["lrp-gw".to_owned()]);
        let mut expect = base();
        expect.insert(C::LrpNamed("lrp-gw".into()));
        expect.extend(router_clauses());
        assert_eq!(p.wanted(&m, "sys-9", "node1", &[], Some(&hosted)), expect);
        let conditions = monitor_conditions(&expect, false);
        assert_eq!(conditions.len(), 7);
        assert_eq!(conditions["NB_Global"], MonitorCondition::All);
        assert_eq!(
            conditions["Logical_Router_Port"].to_json(),
            serde_json::json!([["name", "==", "lrp-gw"]])
        );
        assert_eq!(
            conditions["Load_Balancer"].to_json(),
            serde_json::json!([
                [
                    "external_ids",
                    "includes",
                    ["map", [["lr_ref", "neutron-r1"]]]
                ],
                [
                    "external_ids",
                    "includes",
                    ["map", [["neutron:router_name", "neutron-r1"]]]
                ]
            ])
        );
    }

    #[test]
    fn watching_all_vm_ports_adds_the_type_clauses_and_nothing_else() {
        let m = model();
        let narrow = NbConditionPolicy {
            lrp_status: true,
            follow_tenant_networks: false,
            snat_rules: false,
            all_vm_ports: false,
            evpn: false,
        };
        let wide = NbConditionPolicy {
            all_vm_ports: true,
            ..narrow.clone()
        };
        let mut expect = narrow.wanted(&m, "sys-1", "node1", &[], None);
        assert!(!expect.contains(&C::LspType(String::new())));
        expect.insert(C::LspType(String::new()));
        expect.insert(C::LspType(VIRTUAL.into()));
        assert_eq!(wide.wanted(&m, "sys-1", "node1", &[], None), expect);
    }

    #[test]
    fn the_vrf_method_monitors_the_dhcp_options_of_the_evpn_networks_served_here() {
        let mut m = model();
        let evpn_ls = |name: &str, ports: Vec<String>, vni: &str| LogicalSwitch {
            uuid: format!("ls-{name}"),
            name: format!("neutron-{name}"),
            ports,
            external_ids: [
                ("neutron_bgpvpn:type".to_owned(), "l3".to_owned()),
                ("neutron_bgpvpn:vni".to_owned(), vni.to_owned()),
            ]
            .into(),
        };
        m.upsert_switch(evpn_ls("net-1", vec![LN.into()], "100"));
        // An EVPN network of a physnet not mapped here, and one with an unusable VNI.
        let mut far = Lsp {
            uuid: "aaaaaaaa-0000-0000-0000-000000000009".into(),
            name: "provnet-far".into(),
            port_type: LOCALNET.into(),
            ..Default::default()
        };
        far.options.insert("network_name".into(), "far".into());
        m.upsert_lsp(far.clone());
        m.upsert_switch(evpn_ls("net-2", vec![far.uuid.clone()], "200"));
        let p = NbConditionPolicy {
            lrp_status: true,
            evpn: true,
            ..Default::default()
        };
        let mappings = [("public".to_owned(), "br-ex".to_owned())];
        let want = p.wanted(&m, "sys-1", "node1", &mappings, None);
        let dhcp: Vec<_> = want
            .iter()
            .filter(|c| matches!(c, C::DhcpOfNetwork(_)))
            .collect();
        assert_eq!(dhcp, [&C::DhcpOfNetwork("net-1".into())]);
        let conditions = monitor_conditions(&want, true);
        assert_eq!(
            conditions["DHCP_Options"].to_json(),
            serde_json::json!([[
                "external_ids",
                "includes",
                ["map", [["neutron:network_id", "net-1"]]]
            ]])
        );
        m.upsert_switch(evpn_ls("net-1", vec![LN.into()], "0"));
        let want = p.wanted(&m, "sys-1", "node1", &mappings, None);
        assert!(!want.iter().any(|c| matches!(c, C::DhcpOfNetwork(_))));
        // Underlay: no DHCP_Options table at all.
        let underlay = NbConditionPolicy { evpn: false, ..p };
        let want = underlay.wanted(&m, "sys-1", "node1", &mappings, None);
        assert!(!monitor_conditions(&want, false).contains_key("DHCP_Options"));
    }

    #[test]
    fn a_table_without_clauses_selects_nothing_and_bad_uuids_are_never_sent() {
        let c = monitor_conditions(
            &BTreeSet::from([C::RouterHasPort("not-a-uuid".into())]),
            false,
        );
        assert_eq!(c["Logical_Router"].to_json(), serde_json::json!([false]));
        assert_eq!(c["NAT"].to_json(), serde_json::json!([false]));
    }
}
