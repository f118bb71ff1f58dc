//! Device kinds chosen by configuration (`[linux] vrf_device_kind`, `nic_device_kind`).

use crate::system::LinkKind;

use super::NetlinkError;

/// The kind of `bgp_vrf`: `vrf` with its table (production), or `bridge` where the kernel has no
/// VRF support (containers, minimal kernels; FRR then sees a plain interface).
pub fn vrf_link_kind(configured: &str, table: u32) -> Result<LinkKind, NetlinkError> {
    match configured {
        "vrf" => Ok(LinkKind::Vrf { table }),
        "bridge" => Ok(LinkKind::Bridge),
        other => Err(NetlinkError::Invalid {
            object: format!("[linux] vrf_device_kind = {other}"),
            reason: "must be vrf or bridge".to_owned(),
        }),
    }
}

/// The kind of `bgp_nic`: `dummy` (production) or `ifb`/`bridge` where the kernel lacks dummy.
pub fn nic_link_kind(configured: &str) -> Result<LinkKind, NetlinkError> {
    match configured {
        "dummy" => Ok(LinkKind::Dummy),
        "ifb" => Ok(LinkKind::Ifb),
        "bridge" => Ok(LinkKind::Bridge),
        other => Err(NetlinkError::Invalid {
            object: format!("[linux] nic_device_kind = {other}"),
            reason: "must be dummy, ifb or bridge".to_owned(),
        }),
    }
}
