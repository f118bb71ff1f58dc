//! Which Port_Binding rows an SB driver monitors: a policy per driver, each a pure function from
//! the model (and the chassis name) to the set of clauses, so the conditional-monitoring logic
//! is tested without a server. OVSDB ORs the clauses; the rows a clause pulls in can call for
//! more clauses (following `options:peer`), so a driver re-evaluates its policy after every
//! batch until the set stops changing.

use std::collections::BTreeSet;

use super::model::{CHASSISREDIRECT, PortBinding, SbModel};
use crate::caps::frr::values::{Asn, Vni};
use crate::caps::ovsdb::{Clause, Datum, Function, MonitorCondition, Uuid};
use crate::ovn::neutron;

/// Prefix of a chassis-redirect port's name; the rest is the gateway router port's id, which is
/// also the name of the provider switch's patch port.
pub const CR_LRP_PREFIX: &str = "cr-lrp-";

/// A Port_Binding clause in a form that can be compared and sorted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConditionClause {
    /// `chassis == <Chassis uuid>`.
    Chassis(String),
    /// `type == "localnet"`.
    Localnet,
    /// `nat_addresses != []`.
    HasNatAddresses,
    /// `mac == []` (Octavia VIP ports).
    NoMac,
    /// `logical_port == <name>`.
    PortNamed(String),
    /// `datapath == <Datapath_Binding uuid>`.
    Datapath(String),
    /// `type == "chassisredirect"`: every cr-lrp in the cloud.
    ChassisRedirect,
}

impl ConditionClause {
    /// The OVSDB clause; `None` for a clause naming a malformed uuid (never sent).
    pub fn to_clause(&self) -> Option<Clause> {
        Some(match self {
            ConditionClause::Chassis(u) => Clause::eq("chassis", Uuid::parse(u)?),
            ConditionClause::Localnet => Clause::eq("type", "localnet"),
            ConditionClause::HasNatAddresses => {
                Clause::new("nat_addresses", Function::Ne, Datum::empty())
            }
            ConditionClause::NoMac => Clause::eq("mac", Datum::empty()),
            ConditionClause::PortNamed(n) => Clause::eq("logical_port", n.as_str()),
            ConditionClause::Datapath(u) => Clause::eq("datapath", Uuid::parse(u)?),
            ConditionClause::ChassisRedirect => Clause::eq("type", CHASSISREDIRECT),
        })
    }
}

/// The monitor condition of a clause set.
pub fn monitor_condition(clauses: &BTreeSet<ConditionClause>) -> MonitorCondition {
    MonitorCondition::any(clauses.iter().filter_map(ConditionClause::to_clause))
}

/// The Chassis condition every SB driver monitors under: its own Chassis row, by name (the
/// `system-id`).
pub fn chassis_condition(system_id: &str) -> MonitorCondition {
    MonitorCondition::any([Clause::eq("name", system_id)])
}

/// An SB driver's Port_Binding monitor-condition policy.
pub trait SbConditionPolicy: Send + Sync {
    /// The clauses `model` calls for on the chassis named `chassis`.
    fn wanted(&self, model: &SbModel, chassis: &str) -> BTreeSet<ConditionClause>;

    /// Whether `port` entering, changing or leaving the model can change what [`Self::wanted`]
    /// calls for, given what it called for last (`wanted`), everything else unchanged. `true`
    /// unless the policy knows better: the session asks again only after such a change (or a
    /// Chassis row's, or the identity's), not after every event of a busy chassis.
    fn port_may_change(&self, _port: &PortBinding, _wanted: &BTreeSet<ConditionClause>) -> bool {
        true
    }
}

/// [`SbConditionPolicy::port_may_change`] for the policies of this module, which read the ports
/// bound to a chassis only when they are gateway ports (`chassisredirect`), the ports of a
/// router's datapath only through their `options:peer`, and any other port only by name, each
/// name they look up being one of their `PortNamed` clauses. A VM port, the usual event,
/// changes none of that (property test below).
fn read_by_these_policies(port: &PortBinding, wanted: &BTreeSet<ConditionClause>) -> bool {
    port.port_type == CHASSISREDIRECT
        || port.options.contains_key("peer")
        || wanted.contains(&ConditionClause::PortNamed(port.logical_port.clone()))
}

/// The gateway id of a cr-lrp bound anywhere (`cr-lrp-<id>` of type chassisredirect).
fn gateway_id(port: &PortBinding) -> Option<&str> {
    port.logical_port
        .strip_prefix(CR_LRP_PREFIX)
        .filter(|_| port.port_type == CHASSISREDIRECT)
}

/// The SB BGP driver (`ovn_bgp_driver`): the rows that concern this chassis.
/// - `chassis == <this chassis>`: ports bound here (VMs, virtual ports, gateway ports);
/// - `type == "localnet"`: which datapaths are provider networks, and their VLAN tags;
/// - `nat_addresses != []`: the patch ports carrying FIPs (centralized and distributed);
/// - `mac == []`: Octavia VIP ports;
/// - for each gateway port bound here, its provider patch port by name, and (tenant exposure)
///   its router's datapath and the datapaths of the router's subnets, found by following
///   `options:peer`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalChassisPolicy {
    /// `expose_tenant_networks` or `expose_ipv6_gua_tenant_networks`: follow the routers of
    /// local gateways and their subnets.
    pub follow_tenant_networks: bool,
}

impl SbConditionPolicy for LocalChassisPolicy {
    fn wanted(&self, model: &SbModel, chassis: &str) -> BTreeSet<ConditionClause> {
        let mut want = BTreeSet::from([
            ConditionClause::Localnet,
            ConditionClause::HasNatAddresses,
            ConditionClause::NoMac,
        ]);
        for chassis in model.chassis_uuids_named(chassis) {
            for port in model.ports_on_chassis(&chassis) {
                let Some(id) = gateway_id(port) else {
                    continue;
                };
                want.insert(ConditionClause::PortNamed(id.to_owned()));
                if self.follow_tenant_networks {
                    follow_router(model, port, &mut want, |_| true);
                }
            }
            want.insert(ConditionClause::Chassis(chassis));
        }
        want
    }

    fn port_may_change(&self, port: &PortBinding, wanted: &BTreeSet<ConditionClause>) -> bool {
        read_by_these_policies(port, wanted)
    }
}

/// The router datapath of gateway `crlrp` and, through `options:peer`, its subnets' patch
/// ports and (when `subnet_wanted` accepts the peer row) their datapaths.
fn follow_router(
    model: &SbModel,
    crlrp: &PortBinding,
    want: &mut BTreeSet<ConditionClause>,
    subnet_wanted: impl Fn(&PortBinding) -> bool,
) {
    want.insert(ConditionClause::Datapath(crlrp.datapath.clone()));
    for router_port in model.ports_on_datapath(&crlrp.datapath) {
        let Some(peer) = router_port.options.get("peer") else {
            continue;
        };
        want.insert(ConditionClause::PortNamed(peer.clone()));
        if let Some(peer_row) = model.port_named(peer).filter(|p| subnet_wanted(p)) {
            want.insert(ConditionClause::Datapath(peer_row.datapath.clone()));
        }
    }
}

/// The stretched L2 driver (`ovn_stretched_l2_bgp_driver`): every cr-lrp in the cloud (it
/// announces every router's subnets via its gateway, wherever the gateway is bound), each
/// router's ports (the tenant-side IPs) and their peers (address scopes). Not the ports bound
/// here: the driver announces the same routes on every chassis, and nothing of a VM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllGateways;

impl SbConditionPolicy for AllGateways {
    fn wanted(&self, model: &SbModel, _chassis: &str) -> BTreeSet<ConditionClause> {
        let mut want = BTreeSet::from([ConditionClause::ChassisRedirect]);
        for crlrp in model.chassisredirect_ports() {
            if gateway_id(crlrp).is_none() {
                continue;
            }
            want.insert(ConditionClause::Datapath(crlrp.datapath.clone()));
            for router_port in model.ports_on_datapath(&crlrp.datapath) {
                if let Some(peer) = router_port.options.get("peer") {
                    want.insert(ConditionClause::PortNamed(peer.clone()));
                }
            }
        }
        want
    }

    fn port_may_change(&self, port: &PortBinding, wanted: &BTreeSet<ConditionClause>) -> bool {
        read_by_these_policies(port, wanted)
    }
}

/// The networking-bgpvpn settings of a patch port (`neutron_bgpvpn:vni` and `:as`), as the
/// SB EVPN driver reads them: the only keys it uses (upstream's SB driver ignores `:rd`, `:rt`,
/// `:it`, `:et` and `:type`, and so does this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvpnSettings {
    /// Neither key: the port is not attached to a BGP VPN.
    Absent,
    Valid {
        vni: Vni,
        asn: Asn,
    },
    /// A key is missing or unusable; the reason names the key and quotes the value.
    Invalid(String),
}

impl EvpnSettings {
    /// The settings of `port`. A value is read as Python's `int()` reads it (surrounding
    /// whitespace allowed, as upstream); anything else (a word, `1001;x`, a newline inside the
    /// number, a VNI above 2^24-1, AS 0) is refused. The VNI and AS reach FRR only as the
    /// numbers parsed here, never as the row's text.
    pub fn of(port: &PortBinding) -> Self {
        let get = |k: &str| port.external_ids.get(k).map(String::as_str);
        let vni_raw = get(neutron::keys::BGPVPN_VNI);
        let as_raw = get(neutron::keys::BGPVPN_AS);
        if vni_raw.is_none() && as_raw.is_none() {
            return EvpnSettings::Absent;
        }
        let parsed = neutron::bgpvpn(get);
        let mut problems: Vec<String> = parsed
            .ignored
            .iter()
            .filter(|e| e.key == neutron::keys::BGPVPN_VNI || e.key == neutron::keys::BGPVPN_AS)
            .map(ToString::to_string)
            .collect();
        for (key, raw) in [
            (neutron::keys::BGPVPN_VNI, vni_raw),
            (neutron::keys::BGPVPN_AS, as_raw),
        ] {
            if raw.is_none() {
                problems.push(format!("{key} is missing"));
            }
        }
        let valid = parsed
            .vni
            .and_then(|v| Vni::new(v).ok())
            .zip(parsed.asn.and_then(|a| Asn::new(a).ok()));
        match valid {
            Some((vni, asn)) if problems.is_empty() => EvpnSettings::Valid { vni, asn },
            _ => EvpnSettings::Invalid(problems.join("; ")),
        }
    }

    /// The VNI and AS, when both are usable.
    pub fn valid(&self) -> Option<(Vni, Asn)> {
        match self {
            EvpnSettings::Valid { vni, asn } => Some((*vni, *asn)),
            _ => None,
        }
    }
}

/// Whether a port carries a usable networking-bgpvpn VNI and AS (the EVPN driver's test).
pub fn has_evpn_settings(port: &PortBinding) -> bool {
    EvpnSettings::of(port).valid().is_some()
}

/// The EVPN driver (`ovn_evpn_driver`): for each gateway port bound here (`cr-lrp-<id>`), its
/// router-gateway patch port `<id>` by name (it carries `neutron_bgpvpn:vni` and `:as`, and its
/// datapath is the provider network); when those settings are valid, the router's datapath,
/// the peers of its router ports (the subnets' patch ports, carrying their own settings) and the
/// datapaths of the subnets attached with the gateway's VNI and AS (their VMs); plus the
/// localnet ports (bridge and VLAN of the provider network). OVSDB cannot test a map key alone,
/// so the gateway's patch port is monitored by name and its keys decide whether the router is
/// followed. Nothing else of the cloud: not the provider datapath's ports (provider VMs are not
/// exposed by this driver), not other patch ports with `nat_addresses` (the provider datapath
/// is the gateway patch port's own, upstream scanned every patch port for it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvpnGateways;

impl SbConditionPolicy for EvpnGateways {
    fn wanted(&self, model: &SbModel, chassis: &str) -> BTreeSet<ConditionClause> {
        let mut want = BTreeSet::from([ConditionClause::Localnet]);
        for chassis in model.chassis_uuids_named(chassis) {
            for port in model.ports_on_chassis(&chassis) {
                let Some(id) = gateway_id(port) else {
                    continue;
                };
                want.insert(ConditionClause::PortNamed(id.to_owned()));
                let gateway = model
                    .port_named(id)
                    .and_then(|p| EvpnSettings::of(p).valid());
                if let Some(settings) = gateway {
                    follow_router(model, port, &mut want, |peer| {
                        // The gateway's own patch port is on the provider network: its
                        // datapath holds provider VMs, not tenant VMs.
                        peer.logical_port != id && EvpnSettings::of(peer).valid() == Some(settings)
                    });
                }
            }
            want.insert(ConditionClause::Chassis(chassis));
        }
        want
    }

    fn port_may_change(&self, port: &PortBinding, wanted: &BTreeSet<ConditionClause>) -> bool {
        read_by_these_policies(port, wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CH: &str = "11111111-1111-1111-1111-111111111111";
    const OTHER_CH: &str = "22222222-2222-2222-2222-222222222222";
    const ROUTER_DP: &str = "aaaaaaaa-0000-0000-0000-000000000001";
    const PROVIDER_DP: &str = "aaaaaaaa-0000-0000-0000-000000000002";
    const TENANT_DP: &str = "aaaaaaaa-0000-0000-0000-000000000003";
    const OTHER_ROUTER_DP: &str = "aaaaaaaa-0000-0000-0000-000000000004";

    fn port(uuid: &str, name: &str, ty: &str, dp: &str) -> PortBinding {
        PortBinding {
            uuid: uuid.into(),
            logical_port: name.into(),
            port_type: ty.into(),
            datapath: dp.into(),
            ..Default::default()
        }
    }

    fn with_peer(mut p: PortBinding, peer: &str) -> PortBinding {
        p.options.insert("peer".into(), peer.into());
        p
    }

    fn with_evpn(mut p: PortBinding) -> PortBinding {
        p.external_ids
            .insert(neutron::keys::BGPVPN_VNI.into(), "1001".into());
        p.external_ids
            .insert(neutron::keys::BGPVPN_AS.into(), "64999".into());
        p
    }

    /// A router with its gateway bound here (cr-lrp-gw, provider patch port `gw`), one tenant
    /// subnet (lrp-sub ↔ sub), and a second router whose gateway is bound elsewhere.
    fn model(evpn_gateway: bool, evpn_subnet: bool) -> SbModel {
        let mut m = SbModel::default();
        m.upsert_chassis(CH.into(), "node1".into());
        m.upsert_chassis(OTHER_CH.into(), "node2".into());
        let mut cr = port("p1", "cr-lrp-gw", "chassisredirect", ROUTER_DP);
        cr.chassis = Some(CH.into());
        m.upsert_port(cr);
        m.upsert_port(with_peer(port("p2", "lrp-gw", "patch", ROUTER_DP), "gw"));
        let gw = with_peer(port("p3", "gw", "patch", PROVIDER_DP), "lrp-gw");
        m.upsert_port(if evpn_gateway { with_evpn(gw) } else { gw });
        m.upsert_port(with_peer(port("p4", "lrp-sub", "patch", ROUTER_DP), "sub"));
        let sub = with_peer(port("p5", "sub", "patch", TENANT_DP), "lrp-sub");
        m.upsert_port(if evpn_subnet { with_evpn(sub) } else { sub });
        let mut vm = port("p6", "vm1", "", PROVIDER_DP);
        vm.chassis = Some(CH.into());
        m.upsert_port(vm);
        let mut cr2 = port("p7", "cr-lrp-gw2", "chassisredirect", OTHER_ROUTER_DP);
        cr2.chassis = Some(OTHER_CH.into());
        m.upsert_port(cr2);
        m.upsert_port(with_peer(
            port("p8", "lrp-sub2", "patch", OTHER_ROUTER_DP),
            "sub2",
        ));
        m
    }

    fn clauses(v: &[ConditionClause]) -> BTreeSet<ConditionClause> {
        v.iter().cloned().collect()
    }

    use ConditionClause as C;

    #[test]
    fn local_chassis_policy_follows_local_gateways_only_with_tenant_exposure() {
        let m = model(false, false);
        let base = [
            C::Localnet,
            C::HasNatAddresses,
            C::NoMac,
            C::Chassis(CH.into()),
        ];
        let p = LocalChassisPolicy {
            follow_tenant_networks: false,
        };
        let mut expect = clauses(&base);
        expect.insert(C::PortNamed("gw".into()));
        assert_eq!(p.wanted(&m, "node1"), expect);

        let p = LocalChassisPolicy {
            follow_tenant_networks: true,
        };
        expect.extend([
            C::Datapath(ROUTER_DP.into()),
            C::PortNamed("sub".into()),
            C::Datapath(TENANT_DP.into()),
            C::Datapath(PROVIDER_DP.into()),
        ]);
        assert_eq!(p.wanted(&m, "node1"), expect);
        // An unknown chassis (not yet in the replica) wants only the cloud-wide clauses.
        assert_eq!(
            p.wanted(&m, "node9"),
            clauses(&[C::Localnet, C::HasNatAddresses, C::NoMac])
        );
        // Every clause converts (the uuids are well formed).
        assert_eq!(
            monitor_condition(&expect),
            MonitorCondition::any(expect.iter().map(|c| c.to_clause().unwrap()))
        );
    }

    #[test]
    fn all_gateways_follows_every_cr_lrp() {
        let m = model(false, false);
        let want = AllGateways.wanted(&m, "node1");
        assert_eq!(
            want,
            clauses(&[
                C::ChassisRedirect,
                C::Datapath(ROUTER_DP.into()),
                C::Datapath(OTHER_ROUTER_DP.into()),
                C::PortNamed("gw".into()),
                C::PortNamed("sub".into()),
                C::PortNamed("sub2".into()),
            ])
        );
        assert_eq!(
            C::ChassisRedirect.to_clause().unwrap(),
            Clause::eq("type", "chassisredirect")
        );
    }

    #[test]
    fn evpn_gateways_follow_routers_whose_gateway_has_bgpvpn_keys() {
        let base = [
            C::Localnet,
            C::Chassis(CH.into()),
            C::PortNamed("gw".into()),
        ];
        // No EVPN settings on the gateway: only its patch port is watched, for when they come.
        assert_eq!(
            EvpnGateways.wanted(&model(false, true), "node1"),
            clauses(&base)
        );
        // EVPN gateway: router followed (its datapath, the peers of its ports); the subnet's
        // datapath only when it has the gateway's settings too; never the provider datapath
        // (the gateway patch port's own), nor anything of the router bound elsewhere.
        let mut expect = clauses(&base);
        expect.extend([C::Datapath(ROUTER_DP.into()), C::PortNamed("sub".into())]);
        assert_eq!(EvpnGateways.wanted(&model(true, false), "node1"), expect);
        expect.insert(C::Datapath(TENANT_DP.into()));
        let want = EvpnGateways.wanted(&model(true, true), "node1");
        assert_eq!(want, expect);
        assert!(
            !want.contains(&C::HasNatAddresses),
            "no cloud-wide NAT ports"
        );
        assert!(!want.contains(&C::Datapath(PROVIDER_DP.into())));
        assert!(!want.contains(&C::Datapath(OTHER_ROUTER_DP.into())));
        // Every clause converts (the uuids are well formed).
        assert_eq!(
            monitor_condition(&want),
            MonitorCondition::any(want.iter().map(|c| c.to_clause().unwrap()))
        );

        // A subnet attached with another VNI is not the gateway's: its VMs are not fetched.
        let mut m = model(true, true);
        let mut sub = m.port_named("sub").unwrap().clone();
        sub.external_ids
            .insert(neutron::keys::BGPVPN_VNI.into(), "2002".into());
        m.upsert_port(sub);
        assert!(
            !EvpnGateways
                .wanted(&m, "node1")
                .contains(&C::Datapath(TENANT_DP.into()))
        );
        // The gateway moved away: back to the cloud-wide localnets only.
        let mut m = model(true, true);
        let mut cr = m.port_named("cr-lrp-gw").unwrap().clone();
        cr.chassis = Some(OTHER_CH.into());
        m.upsert_port(cr);
        assert_eq!(
            EvpnGateways.wanted(&m, "node1"),
            clauses(&[C::Localnet, C::Chassis(CH.into())])
        );
    }

    #[test]
    fn evpn_settings_need_a_valid_vni_and_as() {
        let p = with_evpn(port("p", "gw", "patch", PROVIDER_DP));
        assert!(has_evpn_settings(&p));
        assert_eq!(
            EvpnSettings::of(&p)
                .valid()
                .map(|(v, a)| (v.get(), a.get())),
            Some((1001, 64999))
        );
        assert_eq!(
            EvpnSettings::of(&port("q", "gw", "patch", PROVIDER_DP)),
            EvpnSettings::Absent
        );
        let with = |key: &str, value: &str| {
            let mut q = p.clone();
            q.external_ids.insert(key.into(), value.into());
            EvpnSettings::of(&q)
        };
        let vni = neutron::keys::BGPVPN_VNI;
        let asn = neutron::keys::BGPVPN_AS;
        // As Python's int(): surrounding whitespace is accepted, and only the number is kept.
        assert!(with(vni, " 1001\n").valid().is_some());
        for (key, hostile) in [
            (vni, "not-a-number"),
            (vni, "16777216"),
            (vni, "0"),
            (vni, "-1"),
            (vni, "10\n01"),
            (vni, "1001;exit"),
            (asn, "0"),
            (asn, "64999; router bgp 1"),
            (asn, "4294967296"),
            (asn, "as64999"),
        ] {
            match with(key, hostile) {
                EvpnSettings::Invalid(reason) => assert!(
                    reason.contains(key) && reason.contains(&format!("{hostile:?}")),
                    "{key}={hostile:?}: {reason}"
                ),
                other => panic!("{key}={hostile:?} accepted: {other:?}"),
            }
        }
        let mut no_as = p;
        no_as.external_ids.remove(asn);
        assert!(!has_evpn_settings(&no_as));
        assert_eq!(
            EvpnSettings::of(&no_as),
            EvpnSettings::Invalid(format!("{asn} is missing"))
        );
    }

    /// A random port of a small world (names, types, datapaths, chassis and peers drawn from
    /// a few of each, so rows name, peer and shadow each other).
    fn drawn_port(slot: u8, draw: [u8; 6]) -> PortBinding {
        const NAMES: [&str; 8] = [
            "cr-lrp-gw",
            "gw",
            "lrp-gw",
            "lrp-sub",
            "sub",
            "vm1",
            "cr-lrp-gw2",
            "sub2",
        ];
        const TYPES: [&str; 5] = ["", "chassisredirect", "patch", "localnet", "virtual"];
        const DPS: [&str; 4] = [ROUTER_DP, PROVIDER_DP, TENANT_DP, OTHER_ROUTER_DP];
        let pick = |list: &[&'static str], d: u8| list[usize::from(d) % list.len()];
        let mut p = port(
            &format!("p{slot}"),
            pick(&NAMES, draw[0]),
            pick(&TYPES, draw[1]),
            pick(&DPS, draw[2]),
        );
        p.chassis = [None, Some(CH.to_owned()), Some(OTHER_CH.to_owned())]
            [usize::from(draw[3]) % 3]
            .clone();
        if !draw[4].is_multiple_of(3) {
            p = with_peer(p, pick(&NAMES, draw[4] / 3));
        }
        if draw[5].is_multiple_of(2) {
            p = with_evpn(p);
        }
        p
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// A port none of whose versions (before and after) the policy says may change its
        /// condition leaves what it wants as it was: what lets the session skip computing it
        /// after such an event. For every policy of this module, over random worlds and
        /// changes (a row inserted, changed, or deleted).
        #[test]
        fn a_port_said_not_to_matter_does_not_change_the_condition(
            world in proptest::collection::vec((0u8..10, proptest::prelude::any::<[u8; 6]>()), 0..14),
            slot in 0u8..10,
            change in proptest::option::of(proptest::prelude::any::<[u8; 6]>()),
        ) {
            let mut m = SbModel::default();
            m.upsert_chassis(CH.into(), "node1".into());
            m.upsert_chassis(OTHER_CH.into(), "node2".into());
            for (s, draw) in world {
                m.upsert_port(drawn_port(s, draw));
            }
            let policies: [&dyn SbConditionPolicy; 4] = [
                &LocalChassisPolicy { follow_tenant_networks: true },
                &LocalChassisPolicy { follow_tenant_networks: false },
                &AllGateways,
                &EvpnGateways,
            ];
            for policy in policies {
                let before = policy.wanted(&m, "node1");
                let old = m.port(&format!("p{slot}")).cloned();
                let mut after_model = m.clone();
                let new = change.map(|d| drawn_port(slot, d));
                match &new {
                    Some(p) => after_model.upsert_port(p.clone()),
                    None => after_model.remove_port(&format!("p{slot}")),
                }
                let matters = old.iter().chain(&new).any(|p| policy.port_may_change(p, &before));
                if !matters {
                    proptest::prop_assert_eq!(policy.wanted(&after_model, "node1"), before);
                }
            }
        }
    }
}
