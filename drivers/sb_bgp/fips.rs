//! A router's centralized FIPs as the SB driver reads them: one `nat_addresses` entry of its
//! provider patch port lists them all (`"<mac> <fip>... is_chassis_resident(\"cr-lrp-…\")"`),
//! and every update of the row sends that entry whole. Parsed again from scratch, with an
//! [`ExposedIp`] made for each of its IPs, one FIP added to a router of 30k cost the driver
//! milliseconds per event (issue 17). A [`FipEntry`] keeps an entry's tokens with what each
//! became; the next version of the entry keeps the tokens it shares with this one (a common
//! prefix and suffix, cut at whitespace) with their `Arc<ExposedIp>`, which the layout then
//! compares by pointer, and parses only those in between.

use std::sync::Arc;

use crate::exposure::{ExposedIp, ExposureKind, ProviderNetwork};
use crate::ovn::neutron::{NatToken, nat_token, parse_nat_entry};

/// What a token of an entry became.
#[derive(Debug, Clone)]
enum Token {
    Mac,
    Ip(Arc<ExposedIp>),
    Resident(Box<str>),
}

/// One `nat_addresses` entry that parsed, with the exposures of its IPs.
#[derive(Debug)]
pub(crate) struct FipEntry {
    raw: Box<str>,
    /// The patch port's name (each exposure's source) and its provider network.
    source: Arc<str>,
    provider: ProviderNetwork,
    /// Byte offset of each token in `raw`, in order.
    starts: Vec<u32>,
    tokens: Vec<Token>,
}

/// Whitespace as `str::split_whitespace` sees it in ASCII (vertical tab included, which
/// `u8::is_ascii_whitespace` leaves out).
fn blank(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// Compared a block at a time (a comparison of slices), then byte by byte: an entry of 30k
/// FIPs is 400 kB.
const BLOCK: usize = 64;

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The length of the longest common suffix of `a` and `b`.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    while i + BLOCK <= n && a[n - i - BLOCK..n - i] == b[n - i - BLOCK..n - i] {
        i += BLOCK;
    }
    i + a[..n - i]
        .iter()
        .rev()
        .zip(b[..n - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// The tokens of `raw[from..to]` with their offsets in `raw` (`from` and `to` at token
/// boundaries).
fn tokens_of(raw: &str, from: usize, to: usize) -> impl Iterator<Item = (usize, &str)> {
    let bytes = raw.as_bytes();
    let mut at = from;
    std::iter::from_fn(move || {
        while at < to && blank(bytes[at]) {
            at += 1;
        }
        if at >= to {
            return None;
        }
        let start = at;
        while at < to && !blank(bytes[at]) {
            at += 1;
        }
        Some((start, &raw[start..at]))
    })
}

impl FipEntry {
    /// `raw` parsed from scratch; `Err` as [`parse_nat_entry`] reports it.
    pub(crate) fn parse(
        raw: &str,
        source: Arc<str>,
        provider: &ProviderNetwork,
    ) -> Result<FipEntry, String> {
        let mut entry = FipEntry {
            raw: raw.into(),
            source,
            provider: provider.clone(),
            starts: Vec::new(),
            tokens: Vec::new(),
        };
        // Offsets are kept in 32 bits; a longer entry (4 GiB) is parsed each time.
        if !raw.is_ascii() || raw.len() > u32::MAX as usize {
            // Unicode whitespace splits tokens too: the plain parse, no reuse.
            let parsed = parse_nat_entry(raw)?;
            entry.tokens.push(Token::Mac);
            let ips: Vec<_> = parsed
                .ips
                .into_iter()
                .map(|ip| entry.exposure(ip))
                .collect();
            entry.tokens.extend(ips.into_iter().map(Token::Ip));
            entry
                .tokens
                .extend(parsed.resident_port.map(|p| Token::Resident(p.into())));
            return Ok(entry);
        }
        entry.push_tokens(raw, 0, raw.len())?;
        if entry.tokens.is_empty() {
            return Err("empty nat_addresses entry".to_owned());
        }
        Ok(entry)
    }

    /// `raw` parsed, keeping the tokens it shares with this entry (see the module
    /// documentation); from scratch when the port or its provider network changed, or the MAC.
    pub(crate) fn reparse(self, raw: &str, provider: &ProviderNetwork) -> Result<FipEntry, String> {
        let (old, new) = (self.raw.as_bytes(), raw.as_bytes());
        let reusable = self.provider == *provider
            && self.starts.len() == self.tokens.len()
            && raw.is_ascii()
            && raw.len() <= u32::MAX as usize;
        if !reusable {
            return Self::parse(raw, self.source.clone(), provider);
        }
        if old == new {
            return Ok(self);
        }
        // The common prefix, cut after its last blank: the tokens before the cut are whole
        // and the same in both.
        let prefix = common_prefix(old, new);
        let cut = new[..prefix]
            .iter()
            .rposition(|&b| blank(b))
            .map_or(0, |i| i + 1);
        let kept_head = self.starts.partition_point(|&s| (s as usize) < cut);
        if kept_head == 0 {
            // The MAC differs: another entry.
            return Self::parse(raw, self.source.clone(), provider);
        }
        // The common suffix of what follows the cut, from a token's start in both (where it
        // starts, or after its first blank): the tokens in it are whole and the same in both.
        let suffix = common_suffix(&old[cut..], &new[cut..]);
        let at_token = |bytes: &[u8]| {
            let at = bytes.len() - suffix;
            at == 0 || blank(bytes[at - 1])
        };
        let tail_len = if at_token(old) && at_token(new) {
            suffix
        } else {
            new[new.len() - suffix..]
                .iter()
                .position(|&b| blank(b))
                .map_or(0, |i| suffix - i - 1)
        };
        let old_tail = old.len() - tail_len;
        let kept_tail = self.starts.partition_point(|&s| (s as usize) < old_tail);
        // The old entry's tokens taken apart, not copied (an entry of 30k: 30k reference
        // counts): its head, the new middle, its tail.
        let shift = new.len() as i64 - old.len() as i64;
        let FipEntry {
            source,
            provider,
            mut starts,
            mut tokens,
            ..
        } = self;
        let tail_starts = starts.split_off(kept_tail);
        let tail_tokens = tokens.split_off(kept_tail);
        starts.truncate(kept_head);
        tokens.truncate(kept_head);
        let mut entry = FipEntry {
            raw: raw.into(),
            source,
            provider,
            starts,
            tokens,
        };
        entry.push_tokens(raw, cut, new.len() - tail_len)?;
        // `new.len() - tail_len` and `old_tail` are the same token in both.
        entry
            .starts
            .extend(tail_starts.into_iter().map(|s| (s as i64 + shift) as u32));
        entry.tokens.extend(tail_tokens);
        Ok(entry)
    }

    /// Parse the tokens of `raw[from..to]` after those already in.
    fn push_tokens(&mut self, raw: &str, from: usize, to: usize) -> Result<(), String> {
        for (start, token) in tokens_of(raw, from, to) {
            let parsed = match nat_token(raw, self.tokens.len(), token) {
                Ok(t) => t,
                // The whole entry's first error, as the plain parse words it (the tokens
                // before were valid, but say it the one way).
                Err(e) => return Err(parse_nat_entry(raw).err().unwrap_or(e)),
            };
            self.starts.push(start as u32);
            self.tokens.push(match parsed {
                NatToken::Mac(_) => Token::Mac,
                NatToken::Ip(ip) => Token::Ip(self.exposure(ip)),
                NatToken::Resident(port) => Token::Resident(port.into()),
            });
        }
        Ok(())
    }

    fn exposure(&self, ip: std::net::IpAddr) -> Arc<ExposedIp> {
        Arc::new(ExposedIp {
            ip,
            kind: ExposureKind::FloatingIp,
            source: self.source.clone(),
            provider: Some(self.provider.clone()),
            lladdr: None,
            ndp_proxy: Default::default(),
            via: None,
        })
    }

    /// The MAC, the first token.
    pub(crate) fn mac(&self) -> &str {
        self.raw.split_whitespace().next().unwrap_or_default()
    }

    /// The port this entry's FIPs are resident on (its last residence clause).
    pub(crate) fn resident(&self) -> Option<&str> {
        self.tokens.iter().rev().find_map(|t| match t {
            Token::Resident(port) => Some(&**port),
            _ => None,
        })
    }

    /// The exposures of its IPs, in order.
    pub(crate) fn ips(&self) -> impl Iterator<Item = &Arc<ExposedIp>> {
        self.tokens.iter().filter_map(|t| match t {
            Token::Ip(e) => Some(e),
            _ => None,
        })
    }

    pub(crate) fn source(&self) -> &Arc<str> {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn provider(vlan: Option<u16>) -> ProviderNetwork {
        ProviderNetwork {
            physnet: "public".into(),
            bridge: crate::types::InterfaceName::new("br-ex").unwrap(),
            vlan,
            evpn: None,
        }
    }

    fn entry(ips: &[String]) -> String {
        format!(
            "fa:16:3e:00:00:01 {} is_chassis_resident(\"cr-lrp-gw\")",
            ips.join(" ")
        )
    }

    /// What the plain parse makes of `raw`, in the form compared.
    fn expected(raw: &str) -> Result<(String, Vec<std::net::IpAddr>, Option<String>), String> {
        parse_nat_entry(raw).map(|e| (e.mac, e.ips, e.resident_port))
    }

    fn got(
        e: &Result<FipEntry, String>,
    ) -> Result<(String, Vec<std::net::IpAddr>, Option<String>), String> {
        e.as_ref()
            .map(|e| {
                (
                    e.mac().to_owned(),
                    e.ips().map(|x| x.ip).collect(),
                    e.resident().map(str::to_owned),
                )
            })
            .map_err(Clone::clone)
    }

    #[test]
    fn common_prefix_and_suffix_across_blocks() {
        let a: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
        for at in [0, 1, 63, 64, 65, 128, 299] {
            let mut b = a.clone();
            b[at] ^= 1;
            assert_eq!(common_prefix(&a, &b), at);
            assert_eq!(common_suffix(&a, &b), 299 - at);
        }
        assert_eq!(common_prefix(&a, &a[..200]), 200);
        assert_eq!(common_suffix(&a, &a[100..]), 200);
        assert_eq!(common_prefix(&a, &[]), 0);
        assert_eq!(common_suffix(&a, &a), 300);
    }

    #[test]
    fn an_ip_put_in_keeps_the_others_exposures() {
        let ips: Vec<String> = (0..100).map(|i| format!("172.24.0.{i}")).collect();
        let first = FipEntry::parse(&entry(&ips), "natp".into(), &provider(None)).unwrap();
        let before: Vec<_> = first.ips().cloned().collect();
        let mut more = ips.clone();
        more.insert(50, "172.25.0.1".to_owned());
        let second = first.reparse(&entry(&more), &provider(None)).unwrap();
        let after: Vec<_> = second.ips().cloned().collect();
        assert_eq!(after.len(), 101);
        for (i, e) in after.iter().enumerate() {
            let old = match i {
                50 => {
                    assert_eq!(e.ip.to_string(), "172.25.0.1");
                    assert!(!before.iter().any(|b| Arc::ptr_eq(b, e)));
                    continue;
                }
                i if i < 50 => &before[i],
                i => &before[i - 1],
            };
            assert!(Arc::ptr_eq(old, e), "IP {i} made again");
        }
        // Another provider network (a VLAN set): every exposure is another.
        let third = second.reparse(&entry(&more), &provider(Some(10))).unwrap();
        assert!(
            third
                .ips()
                .all(|e| !after.iter().any(|a| Arc::ptr_eq(a, e)))
        );
        assert!(third.ips().all(|e| e.provider == Some(provider(Some(10)))));
    }

    /// Tokens the walk draws from: MACs, IPs, residence clauses, bad tokens, non-ASCII.
    const TOKENS: &[&str] = &[
        "fa:16:3e:00:00:01",
        "fa:16:3e:00:00:02",
        // IPs that begin or end alike: a common prefix or suffix inside a token.
        "172.24.0.3",
        "172.24.0.33",
        "72.24.0.33",
        "172.24.0.4",
        "2001:db8::1",
        "2001:db8::11",
        "is_chassis_resident(\"cr-lrp-a\")",
        "is_chassis_resident(\"cr-lrp-b\")",
        "is_chassis_resident(\"x\"y\")",
        "is_chassis_resident(\"open\"",
        "1.2.3.400",
        "fe80::1%eth0",
        "caf\u{e9}",
    ];
    const BLANKS: &[&str] = &[" ", "  ", "\t", "\x0b", "\n", "\u{a0}"];

    fn render(tokens: &[(usize, usize)]) -> String {
        tokens
            .iter()
            .map(|&(t, b)| format!("{}{}", TOKENS[t % TOKENS.len()], BLANKS[b % BLANKS.len()]))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Along random edits of an entry (a token put in, taken out or replaced, a blank
        /// changed, the provider network changed), each version read from the last gives what
        /// the plain parse of it gives: the same IPs in order, MAC and residence, or the same
        /// error.
        #[test]
        fn each_version_reads_as_the_plain_parse(
            start in proptest::collection::vec((2usize..8, 0usize..3), 0..12),
            edits in proptest::collection::vec((0u8..5, any::<usize>(), any::<usize>(), any::<usize>()), 1..24),
        ) {
            let mut tokens: Vec<(usize, usize)> = vec![(0, 0)];
            tokens.extend(start);
            tokens.push((8, 0));
            let mut vlan = None;
            let mut last: Option<FipEntry> = None;
            for (op, at, token, blank) in edits {
                let at = at % (tokens.len() + 1);
                // Mostly IPs and blanks, so that most versions parse and the next is read
                // from them; now and then anything (a bad token, a MAC, a clause).
                let (token, blank) = match token % 8 {
                    0 => (token / 8, blank),
                    _ => (2 + token / 8 % 6, blank % 3),
                };
                match op {
                    0 => tokens.insert(at, (token, blank)),
                    1 if at < tokens.len() => { tokens.remove(at); }
                    2 if at < tokens.len() => tokens[at] = (token, blank),
                    3 if at < tokens.len() => tokens[at].1 = blank,
                    4 => vlan = (token % 2 == 0).then_some(10),
                    _ => {}
                }
                let raw = render(&tokens);
                let parsed = match last.take() {
                    Some(last) => last.reparse(&raw, &provider(vlan)),
                    None => FipEntry::parse(&raw, "natp".into(), &provider(vlan)),
                };
                prop_assert_eq!(got(&parsed), expected(&raw), "{:?}", raw);
                if let Ok(e) = &parsed {
                    prop_assert!(e.ips().all(|x| x.provider == Some(provider(vlan))
                        && &*x.source == "natp"
                        && x.kind == ExposureKind::FloatingIp));
                }
                last = parsed.ok();
            }
        }
    }
}
