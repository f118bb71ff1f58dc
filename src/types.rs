//! Validated domain values shared by every layer.
//!
//! Anything that came from a tenant (a port name, a MAC string in an OVSDB row) or from an operator's
//! config file is parsed into one of these types before it can reach the kernel, `vtysh` or
//! `ovs-ofctl`. The constructors reject everything that could change the meaning of a command line
//! or a configuration snippet (whitespace, newlines, `;`, quotes, over-long names).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Errors from parsing a domain value; each names the offending input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("interface name {0:?} is invalid: {1}")]
    InterfaceName(String, &'static str),
    #[error("MAC address {0:?} is invalid")]
    Mac(String),
}

/// Linux interface name: 1..=15 bytes (IFNAMSIZ - 1), no `/`, whitespace, control characters, or
/// characters that would need quoting in a shell or FRR configuration.
///
/// Held inline (the bytes, zero-padded, and the length): every object of a desired state names
/// its device, and on a busy gateway that is tens of thousands of names per event, so a clone is
/// a 16-byte copy, never an allocation. (Not `Copy`: names are passed around as values that
/// look owned, and cloned explicitly where the code needs another.) The order is the string's:
/// a valid name has no NUL byte, so comparing the zero-padded bytes orders a prefix first, as
/// `str` does.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InterfaceName {
    bytes: [u8; InterfaceName::MAX_LEN],
    len: u8,
}

impl InterfaceName {
    pub const MAX_LEN: usize = 15;

    pub fn new(name: impl Into<String>) -> Result<Self, ValueError> {
        let name = name.into();
        if name.is_empty() {
            return Err(ValueError::InterfaceName(name, "empty"));
        }
        if name.len() > Self::MAX_LEN {
            return Err(ValueError::InterfaceName(
                name,
                "longer than 15 characters (IFNAMSIZ)",
            ));
        }
        if name == "." || name == ".." {
            return Err(ValueError::InterfaceName(name, "reserved name"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'))
        {
            return Err(ValueError::InterfaceName(
                name,
                "only ASCII letters, digits and - _ . : @ are allowed",
            ));
        }
        let mut bytes = [0u8; Self::MAX_LEN];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(Self {
            bytes,
            len: name.len() as u8,
        })
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (checked in `new`).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)])
            .expect("an interface name is ASCII")
    }
}

impl fmt::Debug for InterfaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InterfaceName")
            .field(&self.as_str())
            .finish()
    }
}

impl fmt::Display for InterfaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InterfaceName {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for InterfaceName {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<InterfaceName> for String {
    fn from(n: InterfaceName) -> String {
        n.as_str().to_owned()
    }
}

/// Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacAddr(pub [u8; 6]);

impl FromStr for MacAddr {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in out.iter_mut() {
            let part = parts.next().ok_or_else(|| ValueError::Mac(s.to_owned()))?;
            if part.is_empty() || part.len() > 2 {
                return Err(ValueError::Mac(s.to_owned()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| ValueError::Mac(s.to_owned()))?;
        }
        if parts.next().is_some() {
            return Err(ValueError::Mac(s.to_owned()));
        }
        Ok(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl TryFrom<String> for MacAddr {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_validated() {
        assert!(InterfaceName::new("bgp-nic").is_ok());
        assert!(InterfaceName::new("br-ex.100").is_ok());
        assert!(InterfaceName::new("0123456789abcdef").is_err(), "16 chars");
        assert!(InterfaceName::new("a;b").is_err());
        assert!(InterfaceName::new("a\nb").is_err());
        assert!(InterfaceName::new("a b").is_err());
        assert!(InterfaceName::new("a/b").is_err());
        assert!(InterfaceName::new("").is_err());
    }

    /// Held inline, a name still orders, prints, hashes and serializes as its string.
    #[test]
    fn interface_names_behave_as_their_strings() {
        let names = [
            "br",
            "br-ex",
            "br-ex.100",
            "br-ex1",
            "bgp-nic",
            "a",
            "A",
            "z.4094",
            "0123456789abcde",
            "br-e",
            "vrf-1001",
            "veth-ovs-10",
        ];
        let mut by_name: Vec<InterfaceName> = names
            .iter()
            .map(|n| InterfaceName::new(*n).unwrap())
            .collect();
        let mut by_string: Vec<&str> = names.to_vec();
        by_name.sort();
        by_string.sort();
        let sorted: Vec<&str> = by_name.iter().map(InterfaceName::as_str).collect();
        assert_eq!(sorted, by_string);
        let n = InterfaceName::new("br-ex.100").unwrap();
        assert_eq!(n.to_string(), "br-ex.100");
        assert_eq!(format!("{n:?}"), "InterfaceName(\"br-ex.100\")");
        assert_eq!(String::from(n.clone()), "br-ex.100");
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"br-ex.100\"");
        let back: InterfaceName = serde_json::from_str("\"br-ex.100\"").unwrap();
        assert_eq!(back, n);
        assert!(serde_json::from_str::<InterfaceName>("\"a;b\"").is_err());
        assert_ne!(
            InterfaceName::new("br").unwrap(),
            InterfaceName::new("br-ex").unwrap()
        );
    }

    #[test]
    fn mac_round_trips_and_rejects_garbage() {
        let m: MacAddr = "FA:16:3e:0:00:10".parse().unwrap();
        assert_eq!(m.to_string(), "fa:16:3e:00:00:10");
        for bad in [
            "",
            "fa:16:3e:00:00",
            "fa:16:3e:00:00:10:11",
            "zz:16:3e:00:00:10",
            "fa:16:3e:00:00:100",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }
}
