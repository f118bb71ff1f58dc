//! Provider networks as an SB driver sees them from this chassis: `ovn-bridge-mappings` validated
//! once, the per-bridge wiring, and the provider network of a datapath (its localnet port's
//! physnet mapped to a bridge here, and its VLAN tag). Shared by the SB BGP and EVPN drivers, so
//! both find a gateway's bridge and VLAN the same way.

use std::collections::BTreeSet;

use super::model::SbModel;
use crate::exposure::{BridgeWiring, ExposureSet, ProviderNetwork};
use crate::types::InterfaceName;

/// `ovn-bridge-mappings` of this chassis, with the bridges validated as interface names.
#[derive(Debug, Clone, Default)]
pub struct BridgeMappings {
    /// (physnet, bridge, 1-based position in `ovn-bridge-mappings`), in that order. The
    /// position counts every configured mapping, valid or not, as upstream's index does.
    mappings: Vec<(String, InterfaceName, u16)>,
}

impl BridgeMappings {
    /// Validate `raw` (physnet, bridge) pairs; a bridge that is not a valid interface name is
    /// recorded in `out.skipped` and left out, the others are kept.
    pub fn new(raw: &[(String, String)], out: &mut ExposureSet) -> Self {
        let mut mappings = Vec::new();
        for (position, (physnet, bridge)) in raw.iter().enumerate() {
            let index = u16::try_from(position + 1).unwrap_or(u16::MAX);
            match InterfaceName::new(bridge.as_str()) {
                Ok(b) => mappings.push((physnet.clone(), b, index)),
                Err(e) => out.skip(
                    "Open_vSwitch",
                    "external_ids:ovn-bridge-mappings",
                    format!("mapping {physnet}:{bridge}: {e}"),
                ),
            }
        }
        Self { mappings }
    }

    /// The validated mappings of `raw`, and an exposure set holding their bridge wiring (see
    /// [`BridgeMappings::wire_bridges`]) and the mappings refused: where an SB driver's
    /// computation starts.
    pub fn wired(raw: &[(String, String)], model: &SbModel) -> (Self, ExposureSet) {
        let mut out = ExposureSet::default();
        let mappings = Self::new(raw, &mut out);
        mappings.wire_bridges(model, &mut out);
        (mappings, out)
    }

    /// The bridge `physnet` is mapped to here.
    pub fn bridge_of(&self, physnet: &str) -> Option<&InterfaceName> {
        self.mappings
            .iter()
            .find(|(p, _, _)| p == physnet)
            .map(|(_, b, _)| b)
    }

    /// Record the wiring of every mapped bridge in `out.bridges`: its physnets, the VLAN tags
    /// and names of their localnet ports, and its 1-based position in `ovn-bridge-mappings`
    /// (upstream's ARP/NDP helper addresses are derived from it).
    pub fn wire_bridges(&self, model: &SbModel, out: &mut ExposureSet) {
        for (physnet, bridge, index) in &self.mappings {
            let wiring = out
                .bridges
                .entry(bridge.clone())
                .or_insert_with(|| BridgeWiring {
                    bridge: bridge.clone(),
                    physnets: BTreeSet::new(),
                    vlans: BTreeSet::new(),
                    localnet_ports: BTreeSet::new(),
                    index: *index,
                });
            wiring.physnets.insert(physnet.clone());
            for localnet in model.localnets_of_physnet(physnet) {
                if let Some(vlan) = valid_vlan(localnet.tag) {
                    wiring.vlans.insert(vlan);
                }
                wiring.localnet_ports.insert(localnet.logical_port.clone());
            }
        }
    }

    /// The provider network `datapath` belongs to: its first localnet port (by name) whose
    /// physnet is mapped on this chassis.
    pub fn provider_of(&self, model: &SbModel, datapath: &str) -> Option<ProviderNetwork> {
        model
            .localnets_on_datapath(datapath)
            .into_iter()
            .find_map(|localnet| {
                let physnet = localnet.options.get("network_name")?;
                Some(ProviderNetwork {
                    physnet: physnet.as_str().into(),
                    bridge: self.bridge_of(physnet)?.clone(),
                    vlan: valid_vlan(localnet.tag),
                    evpn: None,
                })
            })
    }

    /// Why `datapath` has no provider network here (for skip reasons and `explain`).
    pub fn why_not_provider(&self, model: &SbModel, datapath: &str) -> String {
        let physnets: Vec<&str> = model
            .localnets_on_datapath(datapath)
            .into_iter()
            .filter_map(|l| l.options.get("network_name").map(String::as_str))
            .collect();
        if physnets.is_empty() {
            format!("datapath {datapath} has no localnet port: not a provider network")
        } else {
            format!(
                "physnet {} of datapath {datapath} is not in this chassis' ovn-bridge-mappings",
                physnets.join(", ")
            )
        }
    }
}

/// A localnet `tag` that can be a VLAN id (1..=4094); anything else means untagged.
pub fn valid_vlan(tag: Option<i64>) -> Option<u16> {
    tag.and_then(|t| u16::try_from(t).ok())
        .filter(|t| (1..=4094).contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovn::sb::model::PortBinding;

    fn localnet(uuid: &str, dp: &str, physnet: &str, tag: Option<i64>) -> PortBinding {
        let mut p = PortBinding {
            uuid: uuid.into(),
            logical_port: format!("provnet-{uuid}"),
            port_type: "localnet".into(),
            datapath: dp.into(),
            tag,
            ..Default::default()
        };
        p.options.insert("network_name".into(), physnet.into());
        p
    }

    #[test]
    fn provider_of_a_datapath_needs_a_mapped_localnet() {
        let mut m = SbModel::default();
        m.upsert_port(localnet("l1", "dp-flat", "public", None));
        m.upsert_port(localnet("l2", "dp-vlan", "vlans", Some(100)));
        m.upsert_port(localnet("l3", "dp-elsewhere", "other", Some(5000)));
        let raw = vec![
            ("public".to_owned(), "br-ex".to_owned()),
            ("vlans".to_owned(), "br-vlan".to_owned()),
            ("bad".to_owned(), "br/with/slash".to_owned()),
            ("more".to_owned(), "br-more".to_owned()),
        ];
        let mut out = ExposureSet::default();
        let mappings = BridgeMappings::new(&raw, &mut out);
        assert_eq!(out.skipped.len(), 1, "{:?}", out.skipped);
        let flat = mappings.provider_of(&m, "dp-flat").unwrap();
        assert_eq!((flat.bridge.as_str(), flat.vlan), ("br-ex", None));
        let vlan = mappings.provider_of(&m, "dp-vlan").unwrap();
        assert_eq!((vlan.bridge.as_str(), vlan.vlan), ("br-vlan", Some(100)));
        assert!(mappings.provider_of(&m, "dp-elsewhere").is_none());
        assert!(
            mappings
                .why_not_provider(&m, "dp-elsewhere")
                .contains("physnet other")
        );
        assert!(
            mappings
                .why_not_provider(&m, "dp-tenant")
                .contains("no localnet port")
        );
        mappings.wire_bridges(&m, &mut out);
        let wired: Vec<(&str, u16, Vec<u16>)> = out
            .bridges
            .values()
            .map(|w| {
                (
                    w.bridge.as_str(),
                    w.index,
                    w.vlans.iter().copied().collect(),
                )
            })
            .collect();
        // The invalid third mapping still counts in the positions.
        assert_eq!(
            wired,
            [
                ("br-ex", 1, vec![]),
                ("br-more", 4, vec![]),
                ("br-vlan", 2, vec![100])
            ]
        );
        assert_eq!(valid_vlan(Some(0)), None);
        assert_eq!(valid_vlan(Some(4095)), None);
    }
}
