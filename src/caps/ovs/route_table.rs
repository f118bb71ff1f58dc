//! Whether the local ovs-vswitchd follows the agent's routing tables. Every address the agent
//! adds (an exposed IP on bgp-nic, in bgp_vrf; an EVPN VM's on `lo-<vni>`, in its VRF) brings a
//! local route; an ovs-vswitchd without OVS commit 840979663 reads every route of every routing
//! table again at each route change, with work per route that grows with the addresses of the
//! namespace: CPU quadratic in the addresses, about 0.1 s per change at 2k, 3 s at 10k, 30 s at
//! 30k (docs/sb-bgp-benchmark.md, "ovs-vswitchd on a real gateway"; with a VRF on OVS 3.1 too,
//! measured in the VM tier). `doctor` reports it, and the agent warns once when it puts that many
//! addresses on such an ovs-vswitchd's host.

/// Whether an ovs-vswitchd of a version follows only the main routing tables, or re-reads
/// every route of every table (a VRF's included) at each route change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteTableFix {
    /// OVS commit 840979663 ("route-table: Avoid routes from non-standard routing tables").
    Present,
    Missing,
    Unknown,
}

/// The releases that have the fix, as the messages name them ([`route_table_fix`] decides).
pub(crate) const FIXED_IN: &str = "2.17.10, 3.0.7, 3.1.5, 3.2.3, 3.3.1, and 3.4 and later";

/// The releases that have the fix, by branch: 2.17.10, 3.0.7, 3.1.5, 3.2.3, 3.3.1, and every
/// release from 3.4.0 on (the branches before 2.17 had ended and have none).
pub(crate) fn route_table_fix(ovs_version: &str) -> RouteTableFix {
    let mut parts = ovs_version
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map(str::parse::<u32>);
    let (Some(Ok(major)), Some(Ok(minor)), Some(Ok(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return RouteTableFix::Unknown;
    };
    let first_fixed_patch = match (major, minor) {
        (0 | 1, _) => return RouteTableFix::Missing,
        (2, 0..=16) => return RouteTableFix::Missing,
        (2, 17) => 10,
        (2, _) => return RouteTableFix::Unknown,
        (3, 0) => 7,
        (3, 1) => 5,
        (3, 2) => 3,
        (3, 3) => 1,
        _ => 0,
    };
    if patch >= first_fixed_patch {
        RouteTableFix::Present
    } else {
        RouteTableFix::Missing
    }
}

/// Addresses from which an ovs-vswitchd without the fix spends about 0.1 s of CPU per change.
pub(crate) const ADDRESSES_WORTH_A_WARNING: usize = 2000;

/// The agent's one warning about its host's ovs-vswitchd (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct RouteTableAdvice {
    warned: bool,
}

impl RouteTableAdvice {
    /// The warning to log now that the agent holds `addresses` addresses on a host whose
    /// ovs-vswitchd reports `ovs_version`, if that ovs-vswitchd lacks the fix; `None` otherwise
    /// (fewer addresses, a fixed or unknown version, or already warned).
    pub(crate) fn check(&mut self, ovs_version: Option<&str>, addresses: usize) -> Option<String> {
        if self.warned || addresses < ADDRESSES_WORTH_A_WARNING {
            return None;
        }
        let version = ovs_version?;
        if route_table_fix(version) != RouteTableFix::Missing {
            return None;
        }
        self.warned = true;
        // 0.1 s at 2k addresses, quadratic (measured at 2k, 10k and 30k on OVS 3.1).
        let seconds = 0.1 * (addresses as f64 / 2000.0).powi(2);
        Some(format!(
            "ovs-vswitchd {version} reads every route of every routing table again at each \
             route change (the VRFs' included): with the {addresses} addresses this agent holds, \
             each exposure that changes costs it about {seconds:.1} s of CPU, growing with the \
             square of the addresses; Open vSwitch {FIXED_IN} do not (OVS commit 840979663); \
             see `ovn-bgp-agent doctor`"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fix_is_known_by_branch() {
        use RouteTableFix::*;
        for (version, want) in [
            ("2.13.8", Missing),
            ("2.17.9", Missing),
            ("2.17.10", Present),
            ("3.0.6", Missing),
            ("3.0.7", Present),
            ("3.1.0", Missing),
            ("3.1.4", Missing),
            ("3.1.5", Present),
            ("3.2.2", Missing),
            ("3.2.3", Present),
            ("3.3.0", Missing),
            ("3.3.1", Present),
            ("3.4.0", Present),
            ("3.5.0", Present),
            ("4.0.0", Present),
            // Distribution suffixes after the version are ignored.
            ("3.1.0-2+deb12u1", Missing),
            ("3.3.4-0ubuntu1", Present),
            ("", Unknown),
            ("3.1", Unknown),
            ("banana", Unknown),
            ("2.18.0", Unknown),
        ] {
            assert_eq!(route_table_fix(version), want, "{version:?}");
        }
    }

    #[test]
    fn the_agent_warns_once_past_the_threshold_on_an_ovs_without_the_fix() {
        let mut advice = RouteTableAdvice::default();
        assert_eq!(advice.check(Some("3.1.0"), 1999), None);
        assert_eq!(advice.check(Some("3.5.0"), 30_000), None);
        assert_eq!(advice.check(None, 30_000), None);
        assert_eq!(advice.check(Some("banana"), 30_000), None);
        let warning = advice.check(Some("3.1.0"), 10_000).expect("a warning");
        assert!(
            warning.contains("ovs-vswitchd 3.1.0") && warning.contains("about 2.5 s of CPU"),
            "{warning}"
        );
        assert!(!warning.contains("  "), "a run of spaces in: {warning}");
        assert_eq!(advice.check(Some("3.1.0"), 30_000), None, "only once");
    }
}
