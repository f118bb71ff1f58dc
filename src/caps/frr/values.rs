//! Validated values that may appear in FRR configuration.
//!
//! Every template parameter is one of these types (or [`InterfaceName`], an `ipnet` prefix or an
//! IP address): their constructors accept only digits, dots, colons and the interface-name
//! alphabet, so no tenant- or operator-supplied string can add a line, a comment or a second
//! command to what `vtysh` reads.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::types::InterfaceName;

/// Rejected FRR value, naming the input and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrrValueError {
    #[error("BGP AS number {0:?} is invalid: expected 1..=4294967295 (asplain) or X.Y (asdot)")]
    Asn(String),
    #[error("BGP router id {0:?} is invalid: expected a non-zero IPv4 address")]
    RouterId(String),
    #[error("VNI {0:?} is invalid: expected 1..=16777215")]
    Vni(String),
    #[error("route distinguisher {0:?} is invalid: {1}")]
    RouteDistinguisher(String, &'static str),
    #[error("route target {0:?} is invalid: {1}")]
    RouteTarget(String, &'static str),
    #[error("redistribute source {0:?} is invalid: expected connected, kernel or static")]
    Redistribute(String),
    #[error("DNS server {0:?} is not an IP address")]
    DnsServer(String),
    #[error(
        "no route distinguisher for VNI {vni}: neither an explicit RD nor a local VTEP IPv4 address is known"
    )]
    NoRouteDistinguisher { vni: u32 },
    #[error(
        "cannot derive an RD from VTEP {ip} and VNI {vni}: the IP:nn format needs an IPv4 address and nn <= 65535"
    )]
    RdFromVtep { ip: IpAddr, vni: u32 },
    #[error("{0}")]
    Interface(#[from] crate::types::ValueError),
}

/// BGP AS number (4-octet). Accepts asplain (`64999`) and asdot (`1.10` = 65546); renders asplain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Asn(u32);

impl Asn {
    pub fn new(asn: u32) -> Result<Self, FrrValueError> {
        if asn == 0 {
            return Err(FrrValueError::Asn(asn.to_string()));
        }
        Ok(Self(asn))
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

fn parse_decimal<T: FromStr>(s: &str) -> Option<T> {
    // `u32::from_str` accepts a leading `+`; FRR does not, so neither do we.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl FromStr for Asn {
    type Err = FrrValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || FrrValueError::Asn(s.to_owned());
        let value = match s.split_once('.') {
            Some((high, low)) => {
                let high: u16 = parse_decimal(high).ok_or_else(bad)?;
                let low: u16 = parse_decimal(low).ok_or_else(bad)?;
                (u32::from(high) << 16) | u32::from(low)
            }
            None => parse_decimal(s).ok_or_else(bad)?,
        };
        Self::new(value).map_err(|_| bad())
    }
}

impl fmt::Display for Asn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl TryFrom<String> for Asn {
    type Error = FrrValueError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Asn> for String {
    fn from(a: Asn) -> String {
        a.to_string()
    }
}

/// BGP router id: a non-zero IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RouterId(Ipv4Addr);

impl RouterId {
    pub fn new(ip: Ipv4Addr) -> Result<Self, FrrValueError> {
        if ip.is_unspecified() {
            return Err(FrrValueError::RouterId(ip.to_string()));
        }
        Ok(Self(ip))
    }

    pub fn ip(self) -> Ipv4Addr {
        self.0
    }
}

impl FromStr for RouterId {
    type Err = FrrValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ip: Ipv4Addr = s
            .parse()
            .map_err(|_| FrrValueError::RouterId(s.to_owned()))?;
        Self::new(ip)
    }
}

impl fmt::Display for RouterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl TryFrom<String> for RouterId {
    type Error = FrrValueError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<RouterId> for String {
    fn from(r: RouterId) -> String {
        r.to_string()
    }
}

/// VXLAN network identifier, 24 bits, 0 excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Vni(u32);

impl Vni {
    pub const MAX: u32 = (1 << 24) - 1;

    pub fn new(vni: u32) -> Result<Self, FrrValueError> {
        if vni == 0 || vni > Self::MAX {
            return Err(FrrValueError::Vni(vni.to_string()));
        }
        Ok(Self(vni))
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl FromStr for Vni {
    type Err = FrrValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let v: u32 = parse_decimal(s.trim()).ok_or_else(|| FrrValueError::Vni(s.to_owned()))?;
        Self::new(v).map_err(|_| FrrValueError::Vni(s.to_owned()))
    }
}

impl TryFrom<u32> for Vni {
    type Error = FrrValueError;
    fn try_from(v: u32) -> Result<Self, Self::Error> {
        Self::new(v)
    }
}

impl From<Vni> for u32 {
    fn from(v: Vni) -> u32 {
        v.0
    }
}

impl fmt::Display for Vni {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The three encodings of an RD / route target (RFC 4364 §4.2): type 0 (2-byte ASN : 4-byte
/// number), type 1 (IPv4 : 2-byte number), type 2 (4-byte ASN : 2-byte number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExtCommunityValue {
    As2 { asn: u16, number: u32 },
    Ipv4 { ip: Ipv4Addr, number: u16 },
    As4 { asn: u32, number: u16 },
}

impl ExtCommunityValue {
    fn parse(s: &str) -> Result<Self, &'static str> {
        let (admin, number) = s.rsplit_once(':').ok_or("expected ASN:nn or A.B.C.D:nn")?;
        if admin.contains('.') {
            let ip: Ipv4Addr = admin
                .parse()
                .map_err(|_| "administrator is not an IPv4 address")?;
            let number: u16 =
                parse_decimal(number).ok_or("number after an IPv4 address must be 0..=65535")?;
            return Ok(Self::Ipv4 { ip, number });
        }
        let asn: u32 = parse_decimal(admin).ok_or("administrator is not an AS number")?;
        if asn == 0 {
            return Err("AS number 0 is reserved");
        }
        match u16::try_from(asn) {
            Ok(asn) => {
                let number: u32 = parse_decimal(number)
                    .ok_or("number after a 2-byte AS number must be 0..=4294967295")?;
                Ok(Self::As2 { asn, number })
            }
            Err(_) => {
                let number: u16 = parse_decimal(number)
                    .ok_or("number after a 4-byte AS number must be 0..=65535")?;
                Ok(Self::As4 { asn, number })
            }
        }
    }
}

impl fmt::Display for ExtCommunityValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::As2 { asn, number } => write!(f, "{asn}:{number}"),
            Self::Ipv4 { ip, number } => write!(f, "{ip}:{number}"),
            Self::As4 { asn, number } => write!(f, "{asn}:{number}"),
        }
    }
}

/// BGP route distinguisher (`rd` under `address-family l2vpn evpn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RouteDistinguisher(pub ExtCommunityValue);

impl RouteDistinguisher {
    /// The RD upstream means to emit: `<local VTEP IP>:<vni>`. Fails (rather than rendering
    /// upstream's `rd None:<vni>`) when the VTEP is not IPv4 or the VNI does not fit 16 bits.
    pub fn from_vtep(ip: IpAddr, vni: Vni) -> Result<Self, FrrValueError> {
        match (ip, u16::try_from(vni.get())) {
            (IpAddr::V4(ip), Ok(number)) if !ip.is_unspecified() => {
                Ok(Self(ExtCommunityValue::Ipv4 { ip, number }))
            }
            _ => Err(FrrValueError::RdFromVtep { ip, vni: vni.get() }),
        }
    }

    /// An explicit RD if given, else one derived from the local VTEP; neither is an error.
    pub fn explicit_or_vtep(
        explicit: Option<RouteDistinguisher>,
        vtep: Option<IpAddr>,
        vni: Vni,
    ) -> Result<Self, FrrValueError> {
        match (explicit, vtep) {
            (Some(rd), _) => Ok(rd),
            (None, Some(ip)) => Self::from_vtep(ip, vni),
            (None, None) => Err(FrrValueError::NoRouteDistinguisher { vni: vni.get() }),
        }
    }
}

impl FromStr for RouteDistinguisher {
    type Err = FrrValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExtCommunityValue::parse(s)
            .map(Self)
            .map_err(|why| FrrValueError::RouteDistinguisher(s.to_owned(), why))
    }
}

impl fmt::Display for RouteDistinguisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// BGP route target (`route-target import|export`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RouteTarget(pub ExtCommunityValue);

impl FromStr for RouteTarget {
    type Err = FrrValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExtCommunityValue::parse(s)
            .map(Self)
            .map_err(|why| FrrValueError::RouteTarget(s.to_owned(), why))
    }
}

impl fmt::Display for RouteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// Serialised as their FRR text form (snapshots, replay cases).
macro_rules! text_serde {
    ($t:ty) => {
        impl TryFrom<String> for $t {
            type Error = FrrValueError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.to_string()
            }
        }
    };
}
text_serde!(RouteDistinguisher);
text_serde!(RouteTarget);

/// Route source redistributed into a BGP address family. The derived order is alphabetical, so
/// a `BTreeSet<Redistribute>` renders in a stable order (upstream iterates a Python set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Redistribute {
    Connected,
    Kernel,
    Static,
}

impl Redistribute {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Kernel => "kernel",
            Self::Static => "static",
        }
    }
}

impl FromStr for Redistribute {
    type Err = FrrValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "connected" => Ok(Self::Connected),
            "kernel" => Ok(Self::Kernel),
            "static" => Ok(Self::Static),
            _ => Err(FrrValueError::Redistribute(s.to_owned())),
        }
    }
}

impl fmt::Display for Redistribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A VRF name as FRR sees it: the kernel device name, so the same rules apply.
pub type VrfName = InterfaceName;

/// Parses OVN's `DHCP_Options.options:dns_server` (`"{10.0.0.2, 2001:db8::2}"` or a single
/// address) into addresses; any element that is not an IP address rejects the whole value.
pub fn parse_dns_servers(raw: &str) -> Result<Vec<IpAddr>, FrrValueError> {
    let inner = raw.trim().trim_start_matches('{').trim_end_matches('}');
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpAddr>()
                .map_err(|_| FrrValueError::DnsServer(s.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asn_accepts_asplain_and_asdot() {
        assert_eq!("64999".parse::<Asn>().unwrap().get(), 64999);
        assert_eq!("4294967295".parse::<Asn>().unwrap().get(), u32::MAX);
        assert_eq!("1.10".parse::<Asn>().unwrap().get(), 65546);
        for bad in [
            "0",
            "4294967296",
            "",
            "+5",
            "-1",
            "64999\nrouter bgp 1",
            "1.65536",
            "64 999",
        ] {
            assert!(bad.parse::<Asn>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn vni_bounds() {
        assert!(Vni::new(0).is_err());
        assert!(Vni::new(16_777_216).is_err());
        assert_eq!(Vni::new(16_777_215).unwrap().get(), 16_777_215);
        assert!("1001".parse::<Vni>().is_ok());
        assert!("1001;".parse::<Vni>().is_err());
    }

    #[test]
    fn router_id_is_ipv4() {
        assert!("172.24.4.1".parse::<RouterId>().is_ok());
        assert!("0.0.0.0".parse::<RouterId>().is_err());
        assert!("2001:db8::1".parse::<RouterId>().is_err());
        assert!("1.2.3.4\n".parse::<RouterId>().is_err());
    }

    #[test]
    fn rd_and_rt_formats() {
        for ok in [
            "64999:1",
            "65535:4294967295",
            "4200000000:65535",
            "10.0.0.1:1001",
        ] {
            assert_eq!(ok.parse::<RouteDistinguisher>().unwrap().to_string(), ok);
            assert_eq!(ok.parse::<RouteTarget>().unwrap().to_string(), ok);
        }
        for bad in [
            "64999",
            "0:1",
            "4200000000:65536",
            "10.0.0.1:65536",
            "10.0.0:1",
            "64999:1\nno router bgp 64999",
            "None:1001",
            "64999:-1",
            "a:b",
        ] {
            assert!(bad.parse::<RouteDistinguisher>().is_err(), "{bad:?}");
            assert!(bad.parse::<RouteTarget>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rd_from_vtep_requires_ipv4_and_16_bit_vni() {
        let vni = Vni::new(1001).unwrap();
        assert_eq!(
            RouteDistinguisher::from_vtep("10.0.0.1".parse().unwrap(), vni)
                .unwrap()
                .to_string(),
            "10.0.0.1:1001"
        );
        assert!(RouteDistinguisher::from_vtep("2001:db8::1".parse().unwrap(), vni).is_err());
        assert!(
            RouteDistinguisher::from_vtep("10.0.0.1".parse().unwrap(), Vni::new(70000).unwrap())
                .is_err()
        );
        assert_eq!(
            RouteDistinguisher::explicit_or_vtep(None, None, vni),
            Err(FrrValueError::NoRouteDistinguisher { vni: 1001 })
        );
    }

    #[test]
    fn dns_servers_from_ovn_option() {
        assert_eq!(
            parse_dns_servers("{10.0.0.2, 2001:db8::2}").unwrap(),
            vec![
                "10.0.0.2".parse::<IpAddr>().unwrap(),
                "2001:db8::2".parse().unwrap()
            ]
        );
        assert!(parse_dns_servers("{10.0.0.2, 1.1.1.1\n ipv6 nd ra-interval 1}").is_err());
    }

    #[test]
    fn redistribute_sorts_alphabetically() {
        let set: std::collections::BTreeSet<Redistribute> =
            [Redistribute::Kernel, Redistribute::Connected].into();
        let names: Vec<_> = set.iter().map(|r| r.as_str()).collect();
        assert_eq!(names, ["connected", "kernel"]);
    }
}
