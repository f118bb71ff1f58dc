//! The driver's typed view of the Southbound rows it uses, with the indexes its queries need.
//!
//! Rows enter and leave one at a time (from replica change events or a recorded snapshot), and
//! every index is updated in O(1) per row, so computing the exposures of this chassis costs
//! O(what is local), never a scan of the cloud-wide Port_Binding table.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;

/// OVSDB row uuid as text.
pub type Uuid = String;

/// The Port_Binding columns the driver reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortBinding {
    pub uuid: Uuid,
    pub logical_port: String,
    pub port_type: String,
    pub mac: Vec<String>,
    pub chassis: Option<Uuid>,
    /// `None` when the column is empty (older OVN, or not yet set).
    pub up: Option<bool>,
    pub datapath: Uuid,
    pub options: BTreeMap<String, String>,
    pub tag: Option<i64>,
    pub nat_addresses: Vec<String>,
    pub external_ids: BTreeMap<String, String>,
}

/// A Load_Balancer row: its name and the datapaths of the switches and routers it is applied to
/// (already resolved through `ls_datapath_group`/`datapath_group`/`lr_datapath_group`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancer {
    pub uuid: Uuid,
    pub name: String,
    pub datapaths: BTreeSet<Uuid>,
}

/// One entry of `Port_Binding.nat_addresses`: `"<mac> <ip>... [is_chassis_resident(\"<port>\")]"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatEntry {
    pub mac: String,
    pub ips: Vec<IpAddr>,
    /// The port whose chassis answers for these IPs; `None` for entries without the clause
    /// (gateway routers), which upstream crashed on (U30).
    pub resident_port: Option<String>,
}

/// Parse one `nat_addresses` entry; `Err` names what is wrong.
pub fn parse_nat_entry(entry: &str) -> Result<NatEntry, String> {
    let mut tokens = entry.split_whitespace();
    let mac = tokens
        .next()
        .ok_or_else(|| "empty nat_addresses entry".to_owned())?
        .to_owned();
    mac.parse::<crate::types::MacAddr>()
        .map_err(|e| e.to_string())?;
    let mut ips = Vec::new();
    let mut resident_port = None;
    for token in tokens {
        if let Some(rest) = token.strip_prefix("is_chassis_resident(") {
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| format!("unterminated is_chassis_resident in {entry:?}"))?;
            let name = inner.trim_matches('"');
            if name.is_empty() || name.contains('"') {
                return Err(format!("bad is_chassis_resident port in {entry:?}"));
            }
            resident_port = Some(name.to_owned());
        } else {
            ips.push(
                token
                    .parse::<IpAddr>()
                    .map_err(|_| format!("bad IP {token:?} in nat_addresses entry"))?,
            );
        }
    }
    Ok(NatEntry {
        mac,
        ips,
        resident_port,
    })
}

/// The addresses in `Port_Binding.mac[0]`: `"<mac> <ip>[/<len>] ..."`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAddresses {
    pub mac: crate::types::MacAddr,
    /// Each address with its prefix length (`/32`, `/128` when the row gave none).
    pub ips: Vec<IpNet>,
}

/// Parse `mac[0]`. `Ok(None)` for a port without IPs (`"unknown"`, a bare MAC, or empty).
pub fn parse_port_addresses(mac_column: &[String]) -> Result<Option<PortAddresses>, String> {
    let Some(first) = mac_column.first() else {
        return Ok(None);
    };
    let mut tokens = first.split_whitespace();
    let Some(mac_text) = tokens.next() else {
        return Ok(None);
    };
    if mac_text == "unknown" || mac_text == "router" || mac_text == "dynamic" {
        return Ok(None);
    }
    let mac = mac_text
        .parse()
        .map_err(|_| format!("bad MAC {mac_text:?} in mac column"))?;
    let mut ips = Vec::new();
    for token in tokens {
        ips.push(parse_ip_or_cidr(token).map_err(|e| format!("{e} in mac column"))?);
    }
    if ips.is_empty() {
        return Ok(None);
    }
    Ok(Some(PortAddresses { mac, ips }))
}

/// `10.0.0.1/24` keeps its length; a bare address becomes a host prefix.
pub fn parse_ip_or_cidr(token: &str) -> Result<IpNet, String> {
    if token.contains('/') {
        token
            .parse::<IpNet>()
            .map_err(|_| format!("bad CIDR {token:?}"))
    } else {
        token
            .parse::<IpAddr>()
            .map(IpNet::from)
            .map_err(|_| format!("bad IP {token:?}"))
    }
}

/// Parse `external_ids:neutron:cidrs` (`"10.0.0.10/24 2001:db8::10/64"`).
pub fn parse_neutron_cidrs(value: &str) -> Result<Vec<IpNet>, String> {
    value
        .split_whitespace()
        .map(|t| parse_ip_or_cidr(t).map_err(|e| format!("{e} in neutron:cidrs")))
        .collect()
}

fn index_insert(index: &mut HashMap<String, HashSet<Uuid>>, key: &str, uuid: &Uuid) {
    index
        .entry(key.to_owned())
        .or_default()
        .insert(uuid.clone());
}

fn index_remove(index: &mut HashMap<String, HashSet<Uuid>>, key: &str, uuid: &Uuid) {
    if let Some(set) = index.get_mut(key) {
        set.remove(uuid);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

/// The rows plus incremental indexes.
#[derive(Debug, Default, Clone)]
pub struct SbModel {
    ports: HashMap<Uuid, PortBinding>,
    by_name: HashMap<String, Uuid>,
    by_chassis: HashMap<String, HashSet<Uuid>>,
    by_datapath: HashMap<String, HashSet<Uuid>>,
    /// Localnet ports by datapath: decides whether a datapath is a provider network.
    localnet_by_datapath: HashMap<String, HashSet<Uuid>>,
    /// Localnet ports by `options:network_name`: the VLAN tags of a physnet.
    localnet_by_physnet: HashMap<String, HashSet<Uuid>>,
    /// Patch ports with a `nat_addresses` entry resident on a port, by that port's name.
    nat_by_resident: HashMap<String, HashSet<Uuid>>,
    /// Octavia OVN-provider VIP ports (`neutron:port_name = ovn-lb-vip-<lb>`) by datapath.
    lb_vip_by_datapath: HashMap<String, HashSet<Uuid>>,
    /// Chassis name by Chassis row uuid.
    chassis: HashMap<Uuid, String>,
    load_balancers: HashMap<Uuid, LoadBalancer>,
    lb_by_name: HashMap<String, HashSet<Uuid>>,
}

impl SbModel {
    pub fn upsert_chassis(&mut self, uuid: Uuid, name: String) {
        self.chassis.insert(uuid, name);
    }

    pub fn remove_chassis(&mut self, uuid: &str) {
        self.chassis.remove(uuid);
    }

    /// Uuids of the Chassis rows named `name` (normally one).
    pub fn chassis_uuids_named(&self, name: &str) -> BTreeSet<Uuid> {
        self.chassis
            .iter()
            .filter(|(_, n)| n.as_str() == name)
            .map(|(u, _)| u.clone())
            .collect()
    }

    pub fn upsert_load_balancer(&mut self, lb: LoadBalancer) {
        self.remove_load_balancer(&lb.uuid.clone());
        index_insert(&mut self.lb_by_name, &lb.name, &lb.uuid);
        self.load_balancers.insert(lb.uuid.clone(), lb);
    }

    pub fn remove_load_balancer(&mut self, uuid: &str) {
        if let Some(old) = self.load_balancers.remove(uuid) {
            index_remove(&mut self.lb_by_name, &old.name, &old.uuid);
        }
    }

    pub fn load_balancers_named(&self, name: &str) -> impl Iterator<Item = &LoadBalancer> {
        self.lb_by_name
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|u| self.load_balancers.get(u))
    }

    pub fn upsert_port(&mut self, port: PortBinding) {
        let uuid = port.uuid.clone();
        self.remove_port(&uuid);
        self.by_name.insert(port.logical_port.clone(), uuid.clone());
        if let Some(ch) = &port.chassis {
            index_insert(&mut self.by_chassis, ch, &uuid);
        }
        index_insert(&mut self.by_datapath, &port.datapath, &uuid);
        if port.port_type == "localnet" {
            index_insert(&mut self.localnet_by_datapath, &port.datapath, &uuid);
            if let Some(net) = port.options.get("network_name") {
                index_insert(&mut self.localnet_by_physnet, net, &uuid);
            }
        }
        for resident in nat_residents(&port) {
            index_insert(&mut self.nat_by_resident, &resident, &uuid);
        }
        if lb_vip_name(&port).is_some() {
            index_insert(&mut self.lb_vip_by_datapath, &port.datapath, &uuid);
        }
        self.ports.insert(uuid, port);
    }

    pub fn remove_port(&mut self, uuid: &str) {
        let Some(old) = self.ports.remove(uuid) else {
            return;
        };
        let uuid = &old.uuid;
        if self.by_name.get(&old.logical_port) == Some(uuid) {
            self.by_name.remove(&old.logical_port);
        }
        if let Some(ch) = &old.chassis {
            index_remove(&mut self.by_chassis, ch, uuid);
        }
        index_remove(&mut self.by_datapath, &old.datapath, uuid);
        if old.port_type == "localnet" {
            index_remove(&mut self.localnet_by_datapath, &old.datapath, uuid);
            if let Some(net) = old.options.get("network_name") {
                index_remove(&mut self.localnet_by_physnet, net, uuid);
            }
        }
        for resident in nat_residents(&old) {
            index_remove(&mut self.nat_by_resident, &resident, uuid);
        }
        if lb_vip_name(&old).is_some() {
            index_remove(&mut self.lb_vip_by_datapath, &old.datapath, uuid);
        }
    }

    pub fn port(&self, uuid: &str) -> Option<&PortBinding> {
        self.ports.get(uuid)
    }

    pub fn port_named(&self, name: &str) -> Option<&PortBinding> {
        self.by_name.get(name).and_then(|u| self.ports.get(u))
    }

    fn resolve<'a>(&'a self, set: Option<&'a HashSet<Uuid>>) -> Vec<&'a PortBinding> {
        let mut v: Vec<&PortBinding> = set
            .into_iter()
            .flatten()
            .filter_map(|u| self.ports.get(u))
            .collect();
        // Deterministic order: exposures and their "first producer wins" rule must not depend
        // on hash order.
        v.sort_by(|a, b| {
            a.logical_port
                .cmp(&b.logical_port)
                .then(a.uuid.cmp(&b.uuid))
        });
        v
    }

    pub fn ports_on_chassis(&self, chassis_uuid: &str) -> Vec<&PortBinding> {
        self.resolve(self.by_chassis.get(chassis_uuid))
    }

    pub fn ports_on_datapath(&self, datapath: &str) -> Vec<&PortBinding> {
        self.resolve(self.by_datapath.get(datapath))
    }

    pub fn localnets_on_datapath(&self, datapath: &str) -> Vec<&PortBinding> {
        self.resolve(self.localnet_by_datapath.get(datapath))
    }

    pub fn localnets_of_physnet(&self, physnet: &str) -> Vec<&PortBinding> {
        self.resolve(self.localnet_by_physnet.get(physnet))
    }

    pub fn nat_ports_resident_on(&self, port_name: &str) -> Vec<&PortBinding> {
        self.resolve(self.nat_by_resident.get(port_name))
    }

    pub fn lb_vip_ports_on_datapath(&self, datapath: &str) -> Vec<&PortBinding> {
        self.resolve(self.lb_vip_by_datapath.get(datapath))
    }

    pub fn chassis_name(&self, uuid: &str) -> Option<&str> {
        self.chassis.get(uuid).map(String::as_str)
    }

    pub fn port_count(&self) -> usize {
        self.ports.len()
    }
}

/// Prefix of the Neutron port name Octavia's OVN provider gives a load-balancer VIP port.
pub const LB_VIP_PORT_PREFIX: &str = "ovn-lb-vip-";

/// The load-balancer name of an Octavia VIP port (`neutron:port_name = ovn-lb-vip-<lb>`).
pub fn lb_vip_name(port: &PortBinding) -> Option<&str> {
    port.external_ids
        .get("neutron:port_name")
        .and_then(|n| n.strip_prefix(LB_VIP_PORT_PREFIX))
        .filter(|n| !n.is_empty())
}

/// Names of the ports the `nat_addresses` entries of `port` are resident on (unparseable entries
/// are skipped here and reported when the exposures are computed).
fn nat_residents(port: &PortBinding) -> BTreeSet<String> {
    port.nat_addresses
        .iter()
        .filter_map(|e| parse_nat_entry(e).ok())
        .filter_map(|e| e.resident_port)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nat_entry_with_and_without_residence_clause() {
        let e =
            parse_nat_entry(r#"fa:16:3e:aa:bb:cc 172.24.100.20 is_chassis_resident("cr-lrp-R")"#)
                .unwrap();
        assert_eq!(e.resident_port.as_deref(), Some("cr-lrp-R"));
        assert_eq!(e.ips, vec!["172.24.100.20".parse::<IpAddr>().unwrap()]);
        let e = parse_nat_entry("fa:16:3e:aa:bb:cc 172.24.100.20 172.24.100.21").unwrap();
        assert_eq!(e.resident_port, None);
        assert_eq!(e.ips.len(), 2);
        assert!(parse_nat_entry("nonsense 1.2.3.4").is_err());
        assert!(parse_nat_entry("fa:16:3e:aa:bb:cc 1.2.3.400").is_err());
    }

    #[test]
    fn port_addresses_keep_prefix_lengths() {
        let a = parse_port_addresses(&["fa:16:3e:aa:bb:cc 172.24.100.5/24 2001:db8::5/64".into()])
            .unwrap()
            .unwrap();
        assert_eq!(a.ips[0].to_string(), "172.24.100.5/24");
        assert_eq!(a.ips[1].to_string(), "2001:db8::5/64");
        let a = parse_port_addresses(&["fa:16:3e:00:00:10 172.24.100.10".into()])
            .unwrap()
            .unwrap();
        assert_eq!(a.ips[0].to_string(), "172.24.100.10/32");
        assert_eq!(parse_port_addresses(&["unknown".into()]).unwrap(), None);
        assert_eq!(parse_port_addresses(&[]).unwrap(), None);
        assert!(parse_port_addresses(&["fa:16:3e:00:00:10 172.24.100.300".into()]).is_err());
        assert!(parse_port_addresses(&["zz 172.24.100.3".into()]).is_err());
    }

    #[test]
    fn indexes_follow_updates_and_deletes() {
        let mut m = SbModel::default();
        let mut p = PortBinding {
            uuid: "u1".into(),
            logical_port: "vm1".into(),
            chassis: Some("ch".into()),
            datapath: "dp1".into(),
            ..Default::default()
        };
        m.upsert_port(p.clone());
        assert_eq!(m.ports_on_chassis("ch").len(), 1);
        p.chassis = None;
        p.datapath = "dp2".into();
        m.upsert_port(p);
        assert!(m.ports_on_chassis("ch").is_empty());
        assert!(m.ports_on_datapath("dp1").is_empty());
        assert_eq!(m.ports_on_datapath("dp2").len(), 1);
        m.remove_port("u1");
        assert!(m.port_named("vm1").is_none());
        assert!(m.ports_on_datapath("dp2").is_empty());
    }
}
