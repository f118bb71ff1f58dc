//! Per-bridge routing table numbers, kept in the rt_tables file (`[linux] rt_tables_path`).
//!
//! Upstream picks a random free number and exits the process when none is left. Here the number
//! is deterministic — a stable hash of the bridge name, probed linearly over 1..=252 skipping
//! `bgp_vrf_table_id` and every number already in the file — so two chassis (or two runs) give a
//! bridge the same table. Exhaustion is an error for that bridge only.
//!
//! The file is only ever appended to (as upstream does), never rewritten or replaced: read,
//! decide and append happen under an exclusive `flock` on the file, so two agents sharing it
//! cannot give one number twice, and a line someone else writes meanwhile is never lost. This
//! also works where the file is a bind mount of its own (a container layout), on which a
//! rename-over fails with `EBUSY`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::types::InterfaceName;

/// Numbers a bridge table may get (253..=255 are default/main/local, 0 is unspec).
pub const TABLE_RANGE: std::ops::RangeInclusive<u32> = 1..=252;

/// Content written when the file does not exist and no system template is there.
const DEFAULT_CONTENT: &str =
    "#\n# reserved values\n#\n255\tlocal\n254\tmain\n253\tdefault\n0\tunspec\n#\n# local\n#\n";
const SYSTEM_TEMPLATE: &str = "/usr/share/iproute2/rt_tables";

#[derive(Debug, thiserror::Error)]
pub enum RtTablesError {
    #[error("rt_tables file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "routing table {table} wanted by VRF {vrf} (table = VNI) is already {owner}'s in {path}; \
         the VRF is not created (renumber one of them)"
    )]
    TableTaken {
        vrf: String,
        table: u32,
        owner: String,
        path: String,
    },
    #[error(
        "no free routing table number in 1..=252 for bridge {bridge} (all used in {path} or reserved for bgp_vrf_table_id); free some lines in that file"
    )]
    Exhausted { bridge: String, path: String },
}

/// The rt_tables file and the number reserved for the BGP VRF.
#[derive(Debug, Clone)]
pub struct RtTables {
    path: PathBuf,
    vrf_table: u32,
}

/// One parsed line: number and name (comments and malformed lines are kept but not parsed).
fn parse_line(line: &str) -> Option<(u32, &str)> {
    let line = line.split('#').next()?.trim();
    let mut parts = line.split_whitespace();
    let n = parts.next()?.parse::<u32>().ok()?;
    let name = parts.next()?;
    Some((n, name))
}

/// FNV-1a: stable across builds and platforms (unlike `DefaultHasher`).
fn stable_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The number `bridge` gets given the numbers in use: its hash slot, or the next free one.
pub fn allocate(bridge: &str, used: &BTreeSet<u32>, vrf_table: u32) -> Option<u32> {
    let span = TABLE_RANGE.end() - TABLE_RANGE.start() + 1;
    let start = stable_hash(bridge) % span;
    (0..span)
        .map(|i| TABLE_RANGE.start() + (start + i) % span)
        .find(|n| *n != vrf_table && !used.contains(n))
}

impl RtTables {
    pub fn new(path: impl Into<PathBuf>, vrf_table: u32) -> Self {
        Self {
            path: path.into(),
            vrf_table,
        }
    }

    pub fn from_config(config: &crate::config::AgentConfig) -> Self {
        Self::new(
            &config.linux.rt_tables_path,
            config.default.bgp_vrf_table_id,
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> RtTablesError {
        RtTablesError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Read the file, let `decide` say what to append, and append it, all under an exclusive
    /// lock. A missing or empty file is taken as the system template (written with the first
    /// lines appended). The file is opened for writing only when something is to be written,
    /// so a read-only file that already has every line works. `decide` may run twice: once
    /// without the lock on a missing file, to create the file only when something is to be
    /// written.
    fn update<T>(&self, decide: impl Fn(&str) -> (T, String)) -> Result<T, RtTablesError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (out, appended) = decide(&template());
                if appended.is_empty() {
                    return Ok(out);
                }
                if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
                }
                // Created empty; whoever locks it first writes the template.
                self.open_for_append(true)?;
                File::open(&self.path).map_err(|e| self.io(e))?
            }
            Err(e) => return Err(self.io(e)),
        };
        let mut file = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| self.io(errno.into()))?;
        let mut content = String::new();
        file.read_to_string(&mut content).map_err(|e| self.io(e))?;
        let mut write = String::new();
        if content.is_empty() {
            content = template();
            write.push_str(&content);
        } else if !content.ends_with('\n') {
            write.push('\n');
        }
        let (out, appended) = decide(&content);
        if !appended.is_empty() {
            write.push_str(&appended);
            // One write under the lock (held by `file` until it drops): O_APPEND puts it
            // whole at the end, whoever else appends without locking.
            let mut w = self.open_for_append(false)?;
            w.write_all(write.as_bytes())
                .and_then(|()| w.sync_data())
                .map_err(|e| self.io(e))?;
        }
        Ok(out)
    }

    fn open_for_append(&self, create: bool) -> Result<File, RtTablesError> {
        std::fs::OpenOptions::new()
            .append(true)
            .create(create)
            .open(&self.path)
            .map_err(|e| self.io(e))
    }

    /// The table of every bridge, allocating and recording the missing ones in one write.
    /// A bridge that cannot get a number has its own error; the others are unaffected.
    pub fn ensure(
        &self,
        bridges: &[InterfaceName],
    ) -> Result<BTreeMap<InterfaceName, Result<u32, RtTablesError>>, RtTablesError> {
        self.update(|content| self.allocate_bridges(content, bridges))
    }

    /// The tables of `bridges` given the file's content, and the lines to append.
    fn allocate_bridges(
        &self,
        content: &str,
        bridges: &[InterfaceName],
    ) -> (BTreeMap<InterfaceName, Result<u32, RtTablesError>>, String) {
        let mut known: BTreeMap<String, u32> = BTreeMap::new();
        let mut used = BTreeSet::new();
        for (n, name) in content.lines().filter_map(parse_line) {
            used.insert(n);
            known.entry(name.to_owned()).or_insert(n);
        }
        let mut out = BTreeMap::new();
        let mut appended = String::new();
        for bridge in bridges {
            if out.contains_key(bridge) {
                continue;
            }
            let r = match known.get(bridge.as_str()) {
                Some(n) => Ok(*n),
                None => match allocate(bridge.as_str(), &used, self.vrf_table) {
                    Some(n) => {
                        used.insert(n);
                        known.insert(bridge.to_string(), n);
                        appended.push_str(&format!("{n} {bridge}\n"));
                        Ok(n)
                    }
                    None => Err(RtTablesError::Exhausted {
                        bridge: bridge.to_string(),
                        path: self.path.display().to_string(),
                    }),
                },
            };
            out.insert(bridge.clone(), r);
        }
        (out, appended)
    }

    /// Claim fixed table numbers for VRFs (EVPN: table = VNI, as upstream), in the same file
    /// as the bridge tables, so that the two can never collide: a bridge allocated later skips
    /// every number in the file, and a VRF whose number a bridge (or `bgp_vrf_table_id`, or a
    /// reserved table) already has gets its own error, the other VRFs being unaffected.
    pub fn claim_vrf_tables(
        &self,
        vrfs: &[(InterfaceName, u32)],
    ) -> Result<BTreeMap<InterfaceName, Result<u32, RtTablesError>>, RtTablesError> {
        self.update(|content| self.claim_in(content, vrfs))
    }

    /// The claims of `vrfs` given the file's content, and the lines to append.
    fn claim_in(
        &self,
        content: &str,
        vrfs: &[(InterfaceName, u32)],
    ) -> (BTreeMap<InterfaceName, Result<u32, RtTablesError>>, String) {
        let mut owners: BTreeMap<u32, String> = BTreeMap::new();
        for (n, name) in content.lines().filter_map(parse_line) {
            owners.entry(n).or_insert_with(|| name.to_owned());
        }
        owners.insert(self.vrf_table, "bgp_vrf_table_id".to_owned());
        let mut out = BTreeMap::new();
        let mut appended = String::new();
        for (vrf, table) in vrfs {
            let r = match owners.get(table) {
                Some(owner) if owner == vrf.as_str() => Ok(*table),
                Some(owner) => Err(RtTablesError::TableTaken {
                    vrf: vrf.to_string(),
                    table: *table,
                    owner: owner.clone(),
                    path: self.path.display().to_string(),
                }),
                None if *table == 0 || *table >= 253 && *table <= 255 => {
                    Err(RtTablesError::TableTaken {
                        vrf: vrf.to_string(),
                        table: *table,
                        owner: "the kernel".to_owned(),
                        path: self.path.display().to_string(),
                    })
                }
                None => {
                    owners.insert(*table, vrf.to_string());
                    appended.push_str(&format!("{table} {vrf}\n"));
                    Ok(*table)
                }
            };
            out.insert(vrf.clone(), r);
        }
        (out, appended)
    }

    /// The tables claimed for EVPN VRFs (`<n> vrf-<n>` lines), by this agent or by an earlier
    /// one: their routes stay the agent's after the VNI is gone. A missing file claims none.
    pub fn vrf_claims(&self) -> Result<BTreeSet<u32>, RtTablesError> {
        let content = match std::fs::read_to_string(&self.path) {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
            Err(e) => return Err(self.io(e)),
        };
        Ok(content
            .lines()
            .filter_map(parse_line)
            .filter(|(n, name)| name.strip_prefix("vrf-") == Some(n.to_string().as_str()))
            .map(|(n, _)| n)
            .collect())
    }

    /// The table of one bridge (see [`RtTables::ensure`]).
    pub fn ensure_one(&self, bridge: &InterfaceName) -> Result<u32, RtTablesError> {
        let mut m = self.ensure(std::slice::from_ref(bridge))?;
        m.remove(bridge).unwrap_or_else(|| {
            Err(RtTablesError::Exhausted {
                bridge: bridge.to_string(),
                path: self.path.display().to_string(),
            })
        })
    }
}

/// What a missing or empty rt_tables file stands for: the system's template, else the kernel's
/// reserved names.
fn template() -> String {
    std::fs::read_to_string(SYSTEM_TEMPLATE).unwrap_or_else(|_| DEFAULT_CONTENT.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> InterfaceName {
        InterfaceName::new(s).unwrap()
    }

    #[test]
    fn bridge_and_vrf_tables_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let rt = RtTables::new(dir.path().join("rt_tables"), 10);
        let br = rt.ensure_one(&name("br-ex")).unwrap();
        let claims = rt
            .claim_vrf_tables(&[
                (name("vrf-100000"), 100_000),
                (name("vrf-clash"), br),
                (name("vrf-10"), 10),
                (name("vrf-254"), 254),
            ])
            .unwrap();
        assert_eq!(claims[&name("vrf-100000")].as_ref().ok(), Some(&100_000));
        let clash = claims[&name("vrf-clash")].as_ref().unwrap_err().to_string();
        assert!(clash.contains("br-ex"), "{clash}");
        assert!(
            claims[&name("vrf-10")]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("bgp_vrf_table_id")
        );
        assert!(claims[&name("vrf-254")].is_err());
        // A VNI-numbered VRF in the bridge range is recorded, so a bridge added later skips it.
        let small = rt.claim_vrf_tables(&[(name("vrf-77"), 77)]).unwrap();
        assert_eq!(small[&name("vrf-77")].as_ref().ok(), Some(&77));
        let text = std::fs::read_to_string(dir.path().join("rt_tables")).unwrap();
        assert!(text.contains("77 vrf-77"), "{text}");
        for i in 0..200 {
            let t = rt.ensure_one(&name(&format!("br-{i}"))).unwrap();
            assert_ne!(t, 77, "a bridge got the VRF's table");
        }
        // Claiming again is idempotent.
        let again = rt.claim_vrf_tables(&[(name("vrf-77"), 77)]).unwrap();
        assert!(again[&name("vrf-77")].is_ok());
        // The claims are listed back (a bridge's line and the refused ones are not claims).
        assert_eq!(
            rt.vrf_claims().unwrap(),
            BTreeSet::from([77, 100_000]),
            "{text}"
        );
        let missing = RtTables::new(dir.path().join("none"), 10);
        assert!(missing.vrf_claims().unwrap().is_empty());
    }

    #[test]
    fn allocation_is_stable_and_skips_used_and_vrf_table() {
        let none = BTreeSet::new();
        let a = allocate("br-ex", &none, 10).unwrap();
        assert_eq!(Some(a), allocate("br-ex", &none, 10));
        assert!(TABLE_RANGE.contains(&a));
        let used: BTreeSet<u32> = [a].into();
        let b = allocate("br-ex", &used, 10).unwrap();
        assert_ne!(a, b);
        let all_but_10: BTreeSet<u32> = TABLE_RANGE.filter(|n| *n != 10).collect();
        assert_eq!(allocate("br-ex", &all_but_10, 10), None);
    }

    #[test]
    fn parse_ignores_comments_and_garbage() {
        assert_eq!(parse_line("200 br-ex # c"), Some((200, "br-ex")));
        assert_eq!(parse_line("255\tlocal"), Some((255, "local")));
        assert_eq!(parse_line("# 12 x"), None);
        assert_eq!(parse_line("abc def"), None);
    }
}
