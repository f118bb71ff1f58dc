//! Per-bridge routing tables in a private rt_tables file: deterministic numbers, the file's
//! other content preserved, exhaustion an error for that bridge only.

use std::sync::atomic::{AtomicU32, Ordering};

use ovn_bgp_agent::caps::rt_tables::{RtTables, RtTablesError, TABLE_RANGE, allocate};
use ovn_bgp_agent::types::InterfaceName;

static N: AtomicU32 = AtomicU32::new(0);

struct TempDir(std::path::PathBuf);
impl TempDir {
    fn new() -> Self {
        let p = std::env::temp_dir().join(format!(
            "nlt-rt-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn br(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

const ORIGINAL: &str = "#\n# reserved values\n#\n255\tlocal\n254\tmain\n253\tdefault\n0\tunspec\n#\n# local\n#\n150 custom # operator's own\n";

#[test]
fn numbers_are_deterministic_and_the_file_is_preserved() {
    let dir = TempDir::new();
    let path = dir.0.join("rt_tables");
    std::fs::write(&path, ORIGINAL).unwrap();
    let tables = RtTables::new(&path, 10);
    let got = tables.ensure(&[br("br-ex"), br("br-vlan")]).unwrap();
    let ex = *got[&br("br-ex")].as_ref().unwrap();
    let vlan = *got[&br("br-vlan")].as_ref().unwrap();
    assert!(TABLE_RANGE.contains(&ex) && TABLE_RANGE.contains(&vlan));
    assert!(![10, 150].contains(&ex) && ![10, 150].contains(&vlan) && ex != vlan);
    let content = std::fs::read_to_string(&path).unwrap();
    assert!(
        content.starts_with(ORIGINAL),
        "original content kept: {content}"
    );
    assert_eq!(
        &content[ORIGINAL.len()..],
        format!("{ex} br-ex\n{vlan} br-vlan\n")
    );

    // Same answers again, nothing appended.
    assert_eq!(tables.ensure_one(&br("br-ex")).unwrap(), ex);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);

    // Deterministic: another chassis with the same file gets the same numbers.
    let other = dir.0.join("rt_tables.other");
    std::fs::write(&other, ORIGINAL).unwrap();
    let other_tables = RtTables::new(&other, 10);
    assert_eq!(other_tables.ensure_one(&br("br-ex")).unwrap(), ex);
    assert_eq!(
        ex,
        allocate("br-ex", &[0, 150, 253, 254, 255].into(), 10).unwrap()
    );

    // A missing file is created with the standard reserved entries.
    let fresh = dir.0.join("sub").join("rt_tables");
    let n = RtTables::new(&fresh, 10).ensure_one(&br("br-ex")).unwrap();
    let created = std::fs::read_to_string(&fresh).unwrap();
    assert!(
        created.contains("254") && created.contains("main"),
        "{created}"
    );
    assert!(created.ends_with(&format!("{n} br-ex\n")), "{created}");
}

#[test]
fn exhaustion_is_an_error_for_that_bridge_only() {
    let dir = TempDir::new();
    let path = dir.0.join("rt_tables");
    // Every number but 10 (the VRF's) and 42 is taken.
    let mut content = String::from(ORIGINAL);
    for n in TABLE_RANGE.filter(|n| ![10, 42, 150].contains(n)) {
        content.push_str(&format!("{n} used{n}\n"));
    }
    std::fs::write(&path, &content).unwrap();
    let tables = RtTables::new(&path, 10);
    let got = tables
        .ensure(&[br("used7"), br("br-a"), br("br-b")])
        .unwrap();
    assert_eq!(
        *got[&br("used7")].as_ref().unwrap(),
        7,
        "existing entry kept"
    );
    let a = got[&br("br-a")].as_ref().unwrap();
    assert_eq!(*a, 42, "the last free number");
    match &got[&br("br-b")] {
        Err(e @ RtTablesError::Exhausted { bridge, .. }) => {
            assert_eq!(bridge, "br-b");
            assert!(
                e.to_string().contains("no free routing table number"),
                "{e}"
            );
        }
        other => panic!("br-b: {other:?}"),
    }
    let after = std::fs::read_to_string(&path).unwrap();
    assert_eq!(after, format!("{content}42 br-a\n"));
}

/// Run `f` on a thread of its own in a private mount namespace (the mounts it makes vanish with
/// the thread; commands it spawns inherit the namespace). Needs root.
fn in_private_mount_namespace<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
            .expect("unshare(CLONE_NEWNS): the test needs root");
        run("mount", &["--make-rprivate", "/"]);
        f()
    })
    .join()
    .unwrap()
}

fn run(cmd: &str, args: &[&str]) {
    let out = std::process::Command::new(cmd).args(args).output().unwrap();
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
}

/// rt_tables bind-mounted as a single file (a container layout): a rename over it fails with
/// EBUSY, yet tables are recorded, into the host's file; two agents sharing it and a foreign
/// writer appending meanwhile lose no line and never share a number.
#[test]
fn rt_tables_bind_mounted_as_a_single_file() {
    let dir = TempDir::new();
    let host_file = dir.0.join("host-rt_tables");
    std::fs::write(&host_file, ORIGINAL).unwrap();
    let mounted = dir.0.join("etc-iproute2").join("rt_tables");
    std::fs::create_dir_all(mounted.parent().unwrap()).unwrap();
    std::fs::write(&mounted, "").unwrap();

    let (host_file2, mounted2) = (host_file.clone(), mounted.clone());
    in_private_mount_namespace(move || {
        run(
            "mount",
            &[
                "--bind",
                host_file2.to_str().unwrap(),
                mounted2.to_str().unwrap(),
            ],
        );
        // The layout is real: what an atomic replace does fails here.
        let tmp = mounted2.with_file_name(".rt_tables.tmp");
        std::fs::write(&tmp, "x").unwrap();
        let err = std::fs::rename(&tmp, &mounted2).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBUSY), "{err}");
        std::fs::remove_file(&tmp).unwrap();

        let tables = RtTables::new(&mounted2, 10);
        let ex = tables.ensure_one(&br("br-ex")).unwrap();
        let text = std::fs::read_to_string(&host_file2).unwrap();
        assert_eq!(text, format!("{ORIGINAL}{ex} br-ex\n"), "the host's file");

        // Two agents allocating the same bridges at once, and someone appending by hand
        // without any lock.
        let bridges: Vec<InterfaceName> = (0..60).map(|i| br(&format!("br-{i}"))).collect();
        let agents: Vec<_> = (0..2)
            .map(|_| {
                let (path, bridges) = (mounted2.clone(), bridges.clone());
                std::thread::spawn(move || {
                    let tables = RtTables::new(&path, 10);
                    bridges
                        .iter()
                        .map(|b| tables.ensure_one(b).unwrap())
                        .collect::<Vec<u32>>()
                })
            })
            .collect();
        let foreign = {
            let path = mounted2.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                for i in 0..200 {
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .unwrap();
                    f.write_all(format!("# operator's line {i}\n").as_bytes())
                        .unwrap();
                }
            })
        };
        let answers: Vec<Vec<u32>> = agents.into_iter().map(|a| a.join().unwrap()).collect();
        foreign.join().unwrap();
        assert_eq!(answers[0], answers[1], "both agents got the same numbers");

        let text = std::fs::read_to_string(&host_file2).unwrap();
        assert!(text.starts_with(ORIGINAL), "{text}");
        for i in 0..200 {
            assert!(
                text.contains(&format!("# operator's line {i}\n")),
                "lost line {i}"
            );
        }
        let mut numbers = std::collections::BTreeSet::new();
        for (b, n) in bridges.iter().zip(&answers[0]) {
            let line = format!("{n} {b}\n");
            assert_eq!(text.matches(&line).count(), 1, "{line:?} in\n{text}");
            assert!(numbers.insert(*n), "table {n} given twice");
        }
        assert!(!numbers.contains(&ex) && !numbers.contains(&150) && !numbers.contains(&10));
    });
    // The mount went with the namespace; the host's file kept everything.
    assert_eq!(std::fs::read_to_string(&mounted).unwrap(), "");
    assert!(
        std::fs::read_to_string(&host_file)
            .unwrap()
            .contains("# operator's line 199\n")
    );
}
