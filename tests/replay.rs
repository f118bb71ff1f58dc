//! Every replay case under `tests/fixtures/replay/` (any depth: a folder with a `case.json` is a
//! case) replayed through its compiled driver and compared with its `NN-expected.json` files.
//! A case that cannot run fails; nothing is skipped. Regenerate after an intended change with
//! `UPDATE_SNAPSHOTS=1 cargo test --test replay`, and review the diff. The case format is in
//! `src/replay.rs`.

use std::path::{Path, PathBuf};

use ovn_bgp_agent::replay::{self, ReplayCase, StepCheck};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/replay")
}

/// The case folders under `dir`; a folder that is neither a case nor holds cases is reported.
fn case_dirs(dir: &Path, out: &mut Vec<PathBuf>, problems: &mut Vec<String>) {
    if dir.join("case.json").exists() {
        out.push(dir.to_owned());
        return;
    }
    let mut subdirs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            subdirs.push(path);
        } else if path.extension().is_none_or(|e| e != "md") {
            problems.push(format!(
                "{}: a file outside any case folder (no case.json next to it)",
                path.display()
            ));
        }
    }
    if subdirs.is_empty() {
        problems.push(format!(
            "{}: no case.json and no case folders",
            dir.display()
        ));
    }
    subdirs.sort();
    for d in subdirs {
        case_dirs(&d, out, problems);
    }
}

/// Replay one case; the problems found, empty when it matches.
fn replay_case(dir: &Path, update: bool) -> Vec<String> {
    let name = dir.strip_prefix(fixtures()).unwrap_or(dir).display();
    let case = match ReplayCase::load(dir) {
        Ok(c) => c,
        Err(e) => return vec![format!("{name}: {e}")],
    };
    let mut problems: Vec<String> = case
        .config_warnings
        .iter()
        .map(|w| format!("{name}: bgp-agent.conf: {w}"))
        .collect();
    let steps = match replay::run(&case) {
        Ok(s) => s,
        Err(e) => return vec![format!("{name}: {e}")],
    };
    for step in &steps {
        if update {
            replay::write_expected(&case, step).unwrap();
        }
        match replay::check_step(&case, step).unwrap() {
            StepCheck::Same => {}
            StepCheck::Missing => problems.push(format!(
                "{name}: no {} (UPDATE_SNAPSHOTS=1 writes it)",
                step.expected_file()
            )),
            StepCheck::Differs(diff) => problems.push(format!(
                "{name}: step {:02} differs from {} (- expected, + got):\n{diff}",
                step.number,
                step.expected_file()
            )),
        }
    }
    // An expected file without its step is a case that lost a step.
    let stale = (steps.len()..100).map(|n| format!("{n:02}-expected.json"));
    for file in stale.filter(|f| dir.join(f).exists()) {
        problems.push(format!("{name}: {file} has no step"));
    }
    problems
}

#[test]
fn every_recorded_case_replays_as_expected() {
    let mut dirs = Vec::new();
    let mut problems = Vec::new();
    case_dirs(&fixtures(), &mut dirs, &mut problems);
    assert!(
        dirs.len() >= 9,
        "expected the SB driver's cases, found {dirs:?}"
    );
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    for dir in &dirs {
        problems.extend(replay_case(dir, update));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A scratch case: `case.json` for the SB driver plus the given files.
fn scratch_case(tag: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oba-replay-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("case.json"),
        r#"{"driver": "ovn_bgp_driver", "database": "OVN_Southbound",
            "external_ids": {"system-id": "ch-1", "ovn-bridge-mappings": "public:br-ex"}}"#,
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

const DB: &str =
    r#"{"Chassis": [{"_uuid": ["uuid", "c0000000-0000-0000-0000-000000000001"], "name": "ch-1"}]}"#;

fn error_of(tag: &str, files: &[(&str, &str)]) -> String {
    let dir = scratch_case(tag, files);
    let result = ReplayCase::load(&dir).and_then(|case| replay::run(&case).map(|_| ()));
    std::fs::remove_dir_all(&dir).unwrap();
    match result {
        Err(e) => e.to_string(),
        Ok(()) => panic!("{tag}: the case ran"),
    }
}

/// A case that does not say what it means is an error naming the file, never a silent no-op.
#[test]
fn a_case_that_cannot_run_is_an_error_naming_the_file() {
    let e = error_of("gap", &[("00-db.json", DB), ("02-update.json", "{}")]);
    assert!(
        e.contains("02-update.json") && e.contains("01-update.json is missing"),
        "{e}"
    );

    let e = error_of(
        "column",
        &[(
            "00-db.json",
            r#"{"Chassis": [{"_uuid": ["uuid", "c0000000-0000-0000-0000-000000000001"], "nmae": "ch-1"}]}"#,
        )],
    );
    assert!(
        e.contains("00-db.json") && e.contains("no column \"nmae\""),
        "{e}"
    );

    let e = error_of(
        "insert-twice",
        &[
            ("00-db.json", DB),
            (
                "01-update.json",
                r#"{"Chassis": {"c0000000-0000-0000-0000-000000000001": {"insert": {"name": "x"}}}}"#,
            ),
        ],
    );
    assert!(
        e.contains("01-update.json") && e.contains("insert of a row that exists"),
        "{e}"
    );

    let e = error_of(
        "modify-missing",
        &[
            ("00-db.json", DB),
            (
                "01-update.json",
                r#"{"Chassis": {"c0000000-0000-0000-0000-000000000009": {"modify": {"name": "x"}}}}"#,
            ),
        ],
    );
    assert!(e.contains("change of a row that does not exist"), "{e}");

    let e = error_of("stray", &[("00-db.json", DB), ("1-update.json", "{}")]);
    assert!(
        e.contains("1-update.json") && e.contains("not a file of a replay case"),
        "{e}"
    );
}

/// `driver_inputs` must name steps of the case and be understood by the driver: the SB driver
/// takes none, the NB driver only `hosted_gateways`.
#[test]
fn driver_inputs_are_checked() {
    let with_case = |tag: &str, case_json: &str| {
        let dir = scratch_case(tag, &[("00-db.json", DB)]);
        std::fs::write(dir.join("case.json"), case_json).unwrap();
        let result = ReplayCase::load(&dir).and_then(|case| replay::run(&case).map(|_| ()));
        std::fs::remove_dir_all(&dir).unwrap();
        result.expect_err(tag).to_string()
    };
    let e = with_case(
        "inputs-sb",
        r#"{"driver": "ovn_bgp_driver", "database": "OVN_Southbound",
            "external_ids": {"system-id": "ch-1"}, "driver_inputs": {"00": {"x": 1}}}"#,
    );
    assert!(e.contains("driver_inputs"), "{e}");
    let e = with_case(
        "inputs-gap",
        r#"{"driver": "ovn_bgp_driver", "database": "OVN_Southbound",
            "external_ids": {"system-id": "ch-1"}, "driver_inputs": {"03": {}}}"#,
    );
    assert!(e.contains("\"03\" does not name a step"), "{e}");

    let dir = scratch_case("inputs-nb", &[("00-db.json", "{}")]);
    std::fs::write(
        dir.join("case.json"),
        r#"{"driver": "nb_ovn_bgp_driver", "database": "OVN_Northbound",
            "external_ids": {"system-id": "ch-1", "hostname": "node1"},
            "driver_inputs": {"00": {"hosted_gateway": ["lrp-1"]}}}"#,
    )
    .unwrap();
    let e = replay::run(&ReplayCase::load(&dir).unwrap())
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        e.contains("unknown input \"hosted_gateway\"") && e.contains("hosted_gateways"),
        "{e}"
    );
}
