//! Network sysctls (`net.*`), read and written under `/proc/sys` by the namespace thread, so
//! they apply to the configured namespace.

use std::path::PathBuf;

use super::NetlinkError;

/// The `/proc/sys` path of a `sysctl(8)` key. A `/` inside a key component stands for a literal
/// dot, as in `sysctl -w net.ipv4.conf.br-ex/100.proxy_arp=1` (device `br-ex.100`). Only `net.*`
/// keys are accepted: the others are not per network namespace.
pub(crate) fn key_path(key: &str) -> Result<PathBuf, NetlinkError> {
    let invalid = |reason: &str| NetlinkError::Invalid {
        object: format!("sysctl key {key:?}"),
        reason: reason.to_owned(),
    };
    if key.len() > 200 {
        return Err(invalid("too long"));
    }
    let mut path = PathBuf::from("/proc/sys");
    for (i, part) in key.split('.').enumerate() {
        let part = part.replace('/', ".");
        if i == 0 && part != "net" {
            return Err(invalid("only net.* sysctls are per network namespace"));
        }
        if part.is_empty() || part == "." || part == ".." {
            return Err(invalid("empty or relative component"));
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'))
        {
            return Err(invalid(
                "only ASCII letters, digits and - _ . : @ (and / for a dot in a device name)",
            ));
        }
        path.push(part);
    }
    if key.split('.').count() < 3 {
        return Err(invalid("too short: net.<section>.<name> at least"));
    }
    Ok(path)
}

/// Values are short tokens (`0`, `1`, `2`); anything else is rejected.
pub(crate) fn check_value(key: &str, value: &str) -> Result<(), NetlinkError> {
    if value.is_empty()
        || value.len() > 32
        || !value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(NetlinkError::Invalid {
            object: format!("sysctl {key} value {value:?}"),
            reason: "must be a short token of letters, digits or -".to_owned(),
        });
    }
    Ok(())
}

/// Outcome of ensuring one sysctl: `Ok(true)` if it was written.
pub(crate) fn ensure(key: &str, path: &PathBuf, value: &str) -> Result<bool, NetlinkError> {
    let err = |source| NetlinkError::Sysctl {
        key: key.to_owned(),
        path: path.display().to_string(),
        source,
    };
    let current = std::fs::read_to_string(path).map_err(err)?;
    if current.trim() == value {
        return Ok(false);
    }
    std::fs::write(path, format!("{value}\n")).map_err(err)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_proc_sys_with_slash_for_a_dot_in_a_device_name() {
        assert_eq!(
            key_path("net.ipv4.conf.br-ex/100.proxy_arp").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/conf/br-ex.100/proxy_arp")
        );
        assert_eq!(
            key_path("net.ipv6.conf.all.forwarding").unwrap(),
            PathBuf::from("/proc/sys/net/ipv6/conf/all/forwarding")
        );
        for bad in [
            "kernel.panic",
            "net",
            "net.ipv4..x.y",
            "net.ipv4.conf.//.x",
            "net.ipv4.conf.a b.x",
            "net.ipv4.conf.a\n.x",
        ] {
            assert!(key_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_value("k", "1").is_ok());
        assert!(check_value("k", "1 0").is_err());
        assert!(check_value("k", "").is_err());
    }
}
