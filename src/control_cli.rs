//! `ovn-bgp-agent status`, `explain` and `health`: clients of the running agent's control
//! socket ([`crate::control`]), printing for a person, or the agent's JSON with `--json`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use crate::config::{self, ConfigSources};
use crate::control::{self, ControlRequest};

/// The control socket: `--socket`, else `[telemetry] control_socket` of the configuration.
fn socket_path(sources: &ConfigSources, socket: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(s) = socket {
        return Ok(s.to_owned());
    }
    let loaded = config::load::load(sources).map_err(|e| e.to_string())?;
    let path = loaded.config.telemetry.control_socket;
    if path.is_empty() {
        return Err(
            "[telemetry] control_socket is empty (off) in this configuration; \
                    give --socket"
                .to_owned(),
        );
    }
    Ok(PathBuf::from(path))
}

fn ask(
    sources: &ConfigSources,
    socket: Option<&Path>,
    req: ControlRequest,
) -> Result<Value, String> {
    let path = socket_path(sources, socket)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(control::request(&path, &req))
        .map_err(|e| e.to_string())
}

/// Ask the agent; `Err` is the exit code when it failed or the reply was printed as JSON.
fn ask_for_person(
    sources: &ConfigSources,
    socket: Option<&Path>,
    req: ControlRequest,
    json: bool,
) -> Result<Value, ExitCode> {
    match ask(sources, socket, req) {
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::FAILURE)
        }
        Ok(v) if json => {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            Err(ExitCode::SUCCESS)
        }
        Ok(v) => Ok(v),
    }
}

fn health_line(h: &Value) -> String {
    let flag = |k: &str| h.get(k).and_then(Value::as_bool).unwrap_or(false);
    let mut s = format!(
        "{}, {}",
        if flag("live") { "live" } else { "NOT LIVE" },
        if flag("ready") { "ready" } else { "not ready" }
    );
    if let Some(reasons) = h.get("reasons").and_then(Value::as_array) {
        for r in reasons.iter().filter_map(Value::as_str) {
            s.push_str(&format!("\n  {r}"));
        }
    }
    s
}

fn counts(v: &Value) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "-".to_owned())
}

fn reconcile_line(r: &Value) -> String {
    let str_of = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
    // The agent reports the unix time it finished; "ago" is from this host's clock.
    let ago = r
        .get("finished_at")
        .and_then(Value::as_f64)
        .map(|at| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            format!("{:.1} s ago, ", (now - at).max(0.0))
        })
        .unwrap_or_default();
    let mut s = format!(
        "{} ({}), {ago}took {:.1} ms; added: {}; changed: {}; removed: {}",
        str_of("result"),
        str_of("trigger"),
        r.get("duration_ms").and_then(Value::as_f64).unwrap_or(0.0),
        counts(&r["added"]),
        counts(&r["changed"]),
        counts(&r["removed"]),
    );
    if let Some(errors) = r.get("errors").and_then(Value::as_array) {
        for e in errors.iter().filter_map(Value::as_str) {
            s.push_str(&format!("\n  error: {e}"));
        }
    }
    s
}

/// `status`: exit 0 when the agent answered.
pub fn status(sources: &ConfigSources, socket: Option<&Path>, json: bool) -> ExitCode {
    let v = match ask_for_person(sources, socket, ControlRequest::Status, json) {
        Ok(v) => v,
        Err(code) => return code,
    };
    println!("health: {}", health_line(&v["health"]));
    match v.get("last_reconcile").filter(|r| !r.is_null()) {
        Some(r) => println!("last reconcile: {}", reconcile_line(r)),
        None => println!("last reconcile: none yet"),
    }
    let exposed = v["exposed"].as_object().cloned().unwrap_or_default();
    let total: usize = exposed
        .values()
        .map(|l| l.as_array().map_or(0, Vec::len))
        .sum();
    println!("exposed: {total}");
    for (kind, items) in &exposed {
        let items = items.as_array().cloned().unwrap_or_default();
        println!("  {kind} ({}):", items.len());
        for i in items {
            let what = i
                .get("ip")
                .or_else(|| i.get("prefix"))
                .map(|x| x.as_str().map(str::to_owned).unwrap_or(x.to_string()))
                .unwrap_or_default();
            let via = i
                .get("via")
                .and_then(Value::as_str)
                .map(|v| format!(" via {v}"))
                .unwrap_or_default();
            println!(
                "    {what:<40}{via} from {} [{}]",
                i["source"].as_str().unwrap_or("?"),
                i["scope"].as_str().unwrap_or("?")
            );
        }
    }
    let refused = v["refused"].as_array().cloned().unwrap_or_default();
    println!("refused: {}", refused.len());
    for r in refused {
        println!(
            "  {} {}: {}",
            r["table"].as_str().unwrap_or("?"),
            r["row"].as_str().unwrap_or("?"),
            r["reason"].as_str().unwrap_or("?")
        );
    }
    ExitCode::SUCCESS
}

/// `explain <ip|port>`.
pub fn explain(
    sources: &ConfigSources,
    socket: Option<&Path>,
    query: &str,
    json: bool,
) -> ExitCode {
    let req = ControlRequest::Explain {
        query: query.to_owned(),
    };
    let v = match ask_for_person(sources, socket, req, json) {
        Ok(v) => v,
        Err(code) => return code,
    };
    println!("{}:", control::describe(query));
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    let exposed = list("exposed");
    if exposed.is_empty() {
        println!("  not exposed on this chassis");
    }
    for e in &exposed {
        let ip = &e["ip"];
        let provider = ip["provider"]
            .as_object()
            .map(|p| {
                format!(
                    " on {}/{}{}",
                    p.get("physnet").and_then(Value::as_str).unwrap_or("?"),
                    p.get("bridge").and_then(Value::as_str).unwrap_or("?"),
                    p.get("vlan")
                        .and_then(Value::as_u64)
                        .map(|v| format!(" vlan {v}"))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        println!(
            "  exposed [{}]: {} as {} from {}{provider}",
            e["scope"].as_str().unwrap_or("?"),
            ip["ip"].as_str().unwrap_or("?"),
            ip["kind"].as_str().unwrap_or("?"),
            ip["source"].as_str().unwrap_or("?"),
        );
    }
    for c in list("covered_by") {
        println!("  covered by: {c}");
    }
    for r in list("refused") {
        println!(
            "  refused ({} {}): {}",
            r["table"].as_str().unwrap_or("?"),
            r["row"].as_str().unwrap_or("?"),
            r["reason"].as_str().unwrap_or("?")
        );
    }
    let driver = list("driver");
    if !driver.is_empty() {
        println!("driver:");
        for l in driver.iter().filter_map(Value::as_str) {
            println!("  {l}");
        }
    }
    let backend = list("backend");
    if !backend.is_empty() {
        println!("backend objects:");
        for l in backend.iter().filter_map(Value::as_str) {
            println!("  {l}");
        }
    }
    ExitCode::SUCCESS
}

/// `health`: exit 0 live and ready (or live with `--live`), 1 otherwise, 2 when the agent
/// cannot be asked (not running); for exec probes.
pub fn health(sources: &ConfigSources, socket: Option<&Path>, live_only: bool) -> ExitCode {
    let v = match ask(sources, socket, ControlRequest::Health) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{}", health_line(&v));
    let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    if flag("live") && (live_only || flag("ready")) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
