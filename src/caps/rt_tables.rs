//! Per-bridge routing table numbers, kept in the rt_tables file (`[linux] rt_tables_path`).
//!
//! Upstream picks a random free number and exits the process when none is left. Here the number
//! is deterministic — a stable hash of the bridge name, probed linearly over 1..=252 skipping
//! `bgp_vrf_table_id` and every number already in the file — so two chassis (or two runs) give a
//! bridge the same table. The file keeps all its other content; new `<n> <bridge>` lines are
//! appended through an atomic replace. Exhaustion is an error for that bridge only.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
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

    fn read(&self) -> Result<String, RtTablesError> {
        match std::fs::read_to_string(&self.path) {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(std::fs::read_to_string(SYSTEM_TEMPLATE)
                    .unwrap_or_else(|_| DEFAULT_CONTENT.to_owned()))
            }
            Err(e) => Err(self.io(e)),
        }
    }

    /// The table of every bridge, allocating and recording the missing ones in one write.
    /// A bridge that cannot get a number has its own error; the others are unaffected.
    pub fn ensure(
        &self,
        bridges: &[InterfaceName],
    ) -> Result<BTreeMap<InterfaceName, Result<u32, RtTablesError>>, RtTablesError> {
        let content = self.read()?;
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
        if !appended.is_empty() {
            let mut new = content;
            if !new.is_empty() && !new.ends_with('\n') {
                new.push('\n');
            }
            new.push_str(&appended);
            self.write_atomically(&new)?;
        }
        Ok(out)
    }

    /// Claim fixed table numbers for VRFs (EVPN: table = VNI, as upstream), in the same file
    /// as the bridge tables, so that the two can never collide: a bridge allocated later skips
    /// every number in the file, and a VRF whose number a bridge (or `bgp_vrf_table_id`, or a
    /// reserved table) already has gets its own error, the other VRFs being unaffected.
    pub fn claim_vrf_tables(
        &self,
        vrfs: &[(InterfaceName, u32)],
    ) -> Result<BTreeMap<InterfaceName, Result<u32, RtTablesError>>, RtTablesError> {
        let content = self.read()?;
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
        if !appended.is_empty() {
            let mut new = content;
            if !new.is_empty() && !new.ends_with('\n') {
                new.push('\n');
            }
            new.push_str(&appended);
            self.write_atomically(&new)?;
        }
        Ok(out)
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

    fn write_atomically(&self, content: &str) -> Result<(), RtTablesError> {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        let file_name = self
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "rt_tables".to_owned());
        let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(content.as_bytes())?;
            f.sync_all()?;
            if let Ok(meta) = std::fs::metadata(&self.path) {
                std::fs::set_permissions(&tmp, meta.permissions())?;
            }
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(|e| self.io(e))
    }
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
