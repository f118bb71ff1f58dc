//! Shared fixture of the netlink tests: a network namespace of their own (`nlt-<pid>-<n>`),
//! deleted on drop even when the test panics, and `ip` used only to set up and observe.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use ovn_bgp_agent::caps::netlink::{NetlinkReconciler, NetnsTarget};
use ovn_bgp_agent::system::{LinkKind, LinkSpec};
use ovn_bgp_agent::types::InterfaceName;

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub(crate) struct TestNetns {
    pub name: String,
}

impl TestNetns {
    pub(crate) fn new() -> Self {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("nlt-{}-{n}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .expect("the netlink tests need iproute2's `ip` (apt-get install iproute2) and root");
        assert!(
            out.status.success(),
            "ip netns add {name} failed (tests must run as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub(crate) fn reconciler(&self) -> NetlinkReconciler {
        NetlinkReconciler::new(NetnsTarget::from_config(Some(&self.name)))
    }

    /// `ip -n <ns> <args>`, which must succeed; returns stdout.
    pub(crate) fn ip(&self, args: &[&str]) -> String {
        let out = self.ip_raw(args);
        assert!(
            out.status.success(),
            "ip -n {} {}: {}",
            self.name,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn ip_raw(&self, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["-n", &self.name])
            .args(args)
            .output()
            .expect("run ip")
    }

    /// A sysctl read inside the namespace.
    pub(crate) fn sysctl(&self, key: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sysctl", "-n", key])
            .output()
            .expect("run sysctl");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

pub(crate) fn ifname(s: &str) -> InterfaceName {
    InterfaceName::new(s).expect("valid test interface name")
}

/// A link wanted up, with no master and no MAC of its own.
pub(crate) fn up_link(name: &str, kind: LinkKind) -> LinkSpec {
    LinkSpec {
        name: ifname(name),
        kind,
        master: None,
        mac: None,
        up: true,
    }
}
