//! Several configuration snippets in one `vtysh -f` run.
//!
//! vtysh reads a file line by line in the CLI node the previous line left it in, climbing to a
//! parent node only for a line the current node does not know, and it accepts abbreviations.
//! `ADD_VRF` ends inside `router bgp … vrf …`, so in a file of two of them the second one's
//! `vrf vrf-200` is read as bgpd's `vrf-policy` and its `vni 200` never reaches zebra's VRF.
//! Each snippet is therefore *closed* here: the blocks it leaves open are exited, so the next
//! one is read from the configuration node, as it would be in a file of its own.
//!
//! Why batch at all: every `vtysh` run connects to every daemon and costs 40-60 ms (up to 190
//! ms on a loaded gateway) whatever it carries: ten EVPN VRFs created in ten runs took 0.56 s,
//! in one run 0.06 s (FRR 8.4). A cold start or an FRR restart with hundreds of VRFs paid that
//! once per VRF, before FRR's own work (issue 17).

/// Most snippets sent in one run. A run answers when the daemons do: during a cold start, while
/// zebra digests the 30k addresses just added, 60 EVPN VRFs took 7 s in one run (0.2 s on an
/// idle FRR). This bounds a run's length well under the default vtysh timeout (30 s), and what
/// a failed run costs to retry snippet by snippet; the fixed cost of a run is still paid only
/// once per 32 objects.
pub(crate) const MAX_SNIPPETS_PER_RUN: usize = 32;

/// An open CLI block, as far as closing it is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// `vrf X`: left with `exit-vrf`.
    Vrf,
    /// `address-family …` inside `router bgp`: left with `exit-address-family`.
    AddressFamily,
    /// `router …`, `interface …`, `route-map …` and the like: left with `exit`.
    Other,
}

/// Top-level commands that open a block. A line starting with one of them is read at the
/// configuration node (vtysh climbs there when the current node does not know it), so it
/// replaces whatever block was open.
const TOP_LEVEL_BLOCKS: [(&str, Block); 4] = [
    ("vrf ", Block::Vrf),
    ("router ", Block::Other),
    ("interface ", Block::Other),
    ("route-map ", Block::Other),
];

/// The blocks `snippet` leaves open at its end, outermost first.
fn open_blocks(snippet: &str) -> Vec<Block> {
    let mut open: Vec<Block> = Vec::new();
    for line in snippet.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('!') {
            continue;
        }
        if let Some((_, block)) = TOP_LEVEL_BLOCKS.iter().find(|(p, _)| line.starts_with(p)) {
            open.clear();
            open.push(*block);
        } else if line.starts_with("address-family ") {
            open.push(Block::AddressFamily);
        } else if line == "exit-address-family" {
            if open.last() == Some(&Block::AddressFamily) {
                open.pop();
            }
        } else if line == "exit-vrf" {
            if open.last() == Some(&Block::Vrf) {
                open.pop();
            }
        } else if line == "exit" {
            open.pop();
        } else if line == "end" {
            open.clear();
        }
    }
    open
}

/// `snippet`, newline-terminated, followed by the lines that leave the blocks it left open.
pub(crate) fn closed(snippet: &str) -> String {
    let mut text = String::with_capacity(snippet.len() + 32);
    text.push_str(snippet);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    for block in open_blocks(snippet).iter().rev() {
        text.push_str(match block {
            Block::Vrf => "exit-vrf\n",
            Block::AddressFamily => "exit-address-family\n",
            Block::Other => "exit\n",
        });
    }
    text
}

/// One file for `vtysh -f` holding `snippets` in order, each closed.
pub(crate) fn joined<'a>(snippets: impl IntoIterator<Item = &'a str>) -> String {
    let mut text = String::new();
    for snippet in snippets {
        text.push_str(&closed(snippet));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::frr::objects::tests::add_vrf;
    use crate::caps::frr::templates::{
        AddVrf, ConfigureNd, DelVrf, FrrSnippet, LeakVrf, NicRedistribute, UnconfigureNd,
    };
    use crate::caps::frr::values::{Redistribute, Vni};

    fn tail(text: &str, n: usize) -> Vec<&str> {
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        lines[lines.len() - n..].to_vec()
    }

    #[test]
    fn add_vrf_is_left_at_the_configuration_node() {
        let snippet = add_vrf(100).render().unwrap();
        // It ends inside `router bgp 64999 vrf vrf-100`, after its last address family.
        assert_eq!(open_blocks(&snippet), [Block::Other]);
        let text = closed(&snippet);
        assert!(text.starts_with(&snippet));
        assert_eq!(tail(&text, 2), ["  exit-address-family", "exit"]);
        assert!(open_blocks(&text).is_empty());
    }

    #[test]
    fn every_template_is_closed() {
        let vni = Vni::new(100).unwrap();
        let nd = ConfigureNd {
            interface: crate::types::InterfaceName::new("veth-100").unwrap(),
            prefix: "2001:db8::/64".parse().unwrap(),
            managed_config: true,
            autoconfig: false,
            dns_servers: vec!["2001:db8::53".parse().unwrap()],
        };
        let snippets = [
            add_vrf(100).render().unwrap(),
            DelVrf::new("64999".parse().unwrap(), AddVrf::default_vrf_name(vni))
                .render()
                .unwrap(),
            nd.render().unwrap(),
            UnconfigureNd(nd.clone()).render().unwrap(),
            LeakVrf {
                bgp_as: "64999".parse().unwrap(),
                vrf_name: crate::types::InterfaceName::new("bgp-vrf").unwrap(),
                router_id: "10.0.0.1".parse().unwrap(),
                redistribute: [Redistribute::Connected].into(),
            }
            .render()
            .unwrap(),
            NicRedistribute {
                bgp_as: "64999".parse().unwrap(),
                nic: crate::types::InterfaceName::new("bgp-nic").unwrap(),
                redistribute: [Redistribute::Connected].into(),
            }
            .render()
            .unwrap(),
        ];
        for snippet in &snippets {
            assert!(open_blocks(&closed(snippet)).is_empty(), "{snippet}");
        }
        // The removal of a VRF and the ND snippets are top-level or close themselves: nothing
        // is added to them.
        for snippet in &snippets[1..4] {
            assert_eq!(&closed(snippet), snippet, "{snippet}");
        }
    }

    #[test]
    fn blocks_are_tracked_as_vtysh_climbs_them() {
        // A top-level opener replaces the open blocks (vtysh climbs to the configuration node
        // for it); `exit` leaves one; the exits of a kind close only their kind.
        assert_eq!(
            open_blocks("router bgp 1\n address-family ipv4 unicast\n"),
            [Block::Other, Block::AddressFamily]
        );
        assert_eq!(
            open_blocks("router bgp 1\n address-family ipv4 unicast\nvrf red\n"),
            [Block::Vrf]
        );
        assert!(open_blocks("vrf red\n vni 5\nexit-vrf\n").is_empty());
        assert_eq!(open_blocks("router bgp 1\nexit-vrf\n"), [Block::Other]);
        assert!(open_blocks("router bgp 1\n address-family ipv4 unicast\nend\n").is_empty());
        assert!(open_blocks("! a comment\n\nip prefix-list x permit any\n").is_empty());
        assert_eq!(
            closed("router bgp 1\n address-family l2vpn evpn"),
            "router bgp 1\n address-family l2vpn evpn\nexit-address-family\nexit\n"
        );
    }

    #[test]
    fn snippets_are_joined_in_order() {
        let text = joined(["vrf a\n vni 1", "router bgp 1 vrf a\n"]);
        assert_eq!(text, "vrf a\n vni 1\nexit-vrf\nrouter bgp 1 vrf a\nexit\n");
        assert!(joined(std::iter::empty()).is_empty());
    }
}
