//! The running agent's local interfaces: a unix control socket (`ovn-bgp-agent status`,
//! `explain`, `health`), protected by its file permissions, and an optional HTTP listener for
//! Prometheus (`/metrics`) and probes (`/healthz`, `/readyz`).
//!
//! Control protocol: the client writes one JSON request line (`{"cmd":"status"}`,
//! `{"cmd":"explain","query":"192.0.2.10"}`, `{"cmd":"health"}`) and reads one JSON reply.
//! `status` and `health` are answered from [`Telemetry`] directly; `explain` also asks the
//! reconcile loop, which owns the driver, through a channel it serves between wake-ups.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::exposure::{ExposureSet, SkippedRow};
use crate::plugin::ExplainQuery;
use crate::system::DesiredSystem;
use crate::telemetry::Telemetry;

/// Longest request line accepted on the control socket.
const MAX_REQUEST: u64 = 4096;
/// How long a client may take to send its request, and the loop to answer `explain`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control socket {path}: {source}")]
    Socket {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "control socket {path}: another agent answers there; this one runs without a control \
         socket"
    )]
    InUse { path: PathBuf },
    #[error("metrics listener {address}: {source}")]
    Listen {
        address: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot reach the agent at {path}: {source} (is it running, with this control_socket?)"
    )]
    Connect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the agent at {path} answered badly: {message}")]
    Reply { path: PathBuf, message: String },
}

/// A request of the control protocol.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum ControlRequest {
    Status,
    Health,
    Explain { query: String },
}

/// What the loop answers for `explain`: the driver's findings (it alone holds the rows).
pub struct ExplainRequest {
    pub query: ExplainQuery,
    pub reply: oneshot::Sender<Vec<String>>,
}

/// The full answer to `explain`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Explanation {
    pub query: String,
    /// Exposures of this query (an address exposed, or the exposures a row produced).
    pub exposed: Vec<Value>,
    /// Announced routes and tenant subnets that contain the address.
    pub covered_by: Vec<Value>,
    /// Rows and exposures refused that mention it, with the reason.
    pub refused: Vec<SkippedRow>,
    /// What the driver's rows say.
    pub driver: Vec<String>,
    /// The backend's objects (kernel, OVS, FRR, OVN) that mention it, by class.
    pub backend: Vec<String>,
}

/// Whether `text` contains `token` as a whole address or name (not as the start of a longer
/// one: `192.0.2.1` is not in `192.0.2.10`).
fn mentions(text: &str, token: &str) -> bool {
    if token.is_empty() {
        return false;
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == ':' || c == '-' || c == '_';
    text.match_indices(token).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + token.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The backend objects of `desired` that mention `token`, as `class: object` lines.
fn backend_objects(desired: &DesiredSystem, token: &str) -> Vec<String> {
    let Ok(Value::Object(classes)) = serde_json::to_value(desired) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (class, value) in classes {
        if class == "ownership" {
            continue;
        }
        let items: Vec<Value> = match value {
            Value::Array(a) => a,
            Value::Object(m) => m.into_iter().map(|(k, v)| json!({ k: v })).collect(),
            other => vec![other],
        };
        for item in items {
            let text = item.to_string();
            if mentions(&text, token) {
                out.push(format!("{class}: {text}"));
            }
        }
    }
    out
}

/// Assemble an explanation from the snapshot and the driver's findings.
pub fn explain(
    query: &ExplainQuery,
    exposures: &ExposureSet,
    skipped: &[SkippedRow],
    desired: Option<&DesiredSystem>,
    driver: Vec<String>,
) -> Explanation {
    let token = query
        .ip
        .map(|ip| ip.to_string())
        .unwrap_or(query.text.clone());
    let mut exposed = Vec::new();
    let mut covered_by = Vec::new();
    for (scope, s) in &exposures.scopes {
        for ip in s.ips.values() {
            if Some(ip.ip) == query.ip || *ip.source == *query.text {
                exposed.push(json!({ "scope": scope.to_string(), "ip": ip }));
            }
        }
        for r in s.routes.values() {
            let contains = query.ip.is_some_and(|a| r.prefix.contains(&a));
            if contains || r.source == query.text {
                covered_by.push(json!({ "scope": scope.to_string(), "route": r }));
            }
        }
        for sub in &s.subnets {
            let contains = query.ip.is_some_and(|a| sub.router_ip.trunc().contains(&a));
            if contains || sub.source == query.text {
                covered_by.push(json!({ "scope": scope.to_string(), "subnet": sub }));
            }
        }
    }
    let refused = skipped
        .iter()
        .filter(|s| s.row == query.text || mentions(&s.row, &token) || mentions(&s.reason, &token))
        .cloned()
        .collect();
    let backend = desired
        .map(|d| backend_objects(d, &token))
        .unwrap_or_default();
    Explanation {
        query: query.text.clone(),
        exposed,
        covered_by,
        refused,
        driver,
        backend,
    }
}

/// Bind the control socket at `path` (mode 0660) and serve it until the process ends. A socket
/// file left by a dead agent is replaced; one a live agent answers on is left alone.
pub async fn bind_control_socket(path: &Path) -> Result<UnixListener, ControlError> {
    let err = |source| ControlError::Socket {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            return Err(ControlError::InUse {
                path: path.to_owned(),
            });
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(err)?;
    Ok(listener)
}

/// Serve control requests on `listener`.
pub fn spawn_control_server(
    listener: UnixListener,
    telemetry: Arc<Telemetry>,
    explain_tx: mpsc::Sender<ExplainRequest>,
) {
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    warn!("control socket: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let telemetry = telemetry.clone();
            let explain_tx = explain_tx.clone();
            tokio::spawn(async move {
                if let Err(e) = serve_one(stream, &telemetry, &explain_tx).await {
                    debug!("control socket client: {e}");
                }
            });
        }
    });
}

async fn serve_one(
    stream: UnixStream,
    telemetry: &Telemetry,
    explain_tx: &mpsc::Sender<ExplainRequest>,
) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_REQUEST));
    tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request"))??;
    let reply = match serde_json::from_str::<ControlRequest>(line.trim()) {
        Err(e) => json!({ "error": format!("bad request: {e}") }),
        Ok(ControlRequest::Health) => json!(telemetry.health()),
        Ok(ControlRequest::Status) => status_json(telemetry).await,
        Ok(ControlRequest::Explain { query }) => {
            let query = ExplainQuery::new(&query);
            let (tx, rx) = oneshot::channel();
            let driver = match explain_tx
                .send(ExplainRequest {
                    query: query.clone(),
                    reply: tx,
                })
                .await
            {
                Ok(()) => tokio::time::timeout(REQUEST_TIMEOUT, rx)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_else(|| {
                        vec!["(the reconcile loop did not answer in time)".to_owned()]
                    }),
                Err(_) => vec!["(the reconcile loop is not running)".to_owned()],
            };
            let s = telemetry.snapshot().await;
            json!(explain(
                &query,
                &s.exposures,
                &s.skipped,
                s.desired.as_deref(),
                driver
            ))
        }
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    write.write_all(&bytes).await?;
    write.shutdown().await
}

/// The `status` reply: what is exposed, grouped by kind, the last reconcile, what was refused.
async fn status_json(telemetry: &Telemetry) -> Value {
    let s = telemetry.snapshot().await;
    let mut by_kind: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for (scope, sc) in &s.exposures.scopes {
        for ip in sc.ips.values() {
            let kind = crate::telemetry::kind_name(ip.kind);
            by_kind.entry(kind).or_default().push(json!({
                "scope": scope.to_string(),
                "ip": ip.ip,
                "source": ip.source,
            }));
        }
        for r in sc.routes.values() {
            by_kind.entry("route".to_owned()).or_default().push(json!({
                "scope": scope.to_string(),
                "prefix": r.prefix,
                "via": r.via,
                "source": r.source,
            }));
        }
        for sub in &sc.subnets {
            by_kind.entry("subnet".to_owned()).or_default().push(json!({
                "scope": scope.to_string(),
                "prefix": sub.router_ip.trunc(),
                "via": sub.via,
                "source": sub.source,
            }));
        }
    }
    json!({
        "health": telemetry.health(),
        "exposed": by_kind,
        "last_reconcile": s.last_reconcile,
        "last_success": s.last_success,
        "refused": *s.skipped,
    })
}

/// Send one request to the agent at `path` and return its reply.
pub async fn request(path: &Path, req: &ControlRequest) -> Result<Value, ControlError> {
    let connect = |source| ControlError::Connect {
        path: path.to_owned(),
        source,
    };
    let mut stream = UnixStream::connect(path).await.map_err(connect)?;
    let mut line = serde_json::to_vec(req).unwrap_or_default();
    line.push(b'\n');
    stream.write_all(&line).await.map_err(connect)?;
    let mut reply = String::new();
    tokio::time::timeout(
        REQUEST_TIMEOUT * 2,
        BufReader::new(stream).read_line(&mut reply),
    )
    .await
    .map_err(|_| ControlError::Reply {
        path: path.to_owned(),
        message: "no reply in time".to_owned(),
    })?
    .map_err(connect)?;
    serde_json::from_str(reply.trim()).map_err(|e| ControlError::Reply {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Listen for Prometheus scrapes and probes on `address` (`host:port`).
pub async fn spawn_metrics_listener(
    address: &str,
    telemetry: Arc<Telemetry>,
) -> Result<SocketAddr, ControlError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ControlError::Listen {
            address: address.to_owned(),
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|source| ControlError::Listen {
            address: address.to_owned(),
            source,
        })?;
    info!(address = %local, "metrics and probes on http://{local}/metrics, /healthz, /readyz");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let telemetry = telemetry.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let telemetry = telemetry.clone();
                    async move { Ok::<_, std::convert::Infallible>(http_reply(&req, &telemetry)) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, conn).await;
            });
        }
    });
    Ok(local)
}

fn http_reply<B>(req: &Request<B>, telemetry: &Telemetry) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, ctype: &str, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", ctype)
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    let probe = |ok: bool, health: &crate::telemetry::Health| {
        let body = serde_json::to_string(health).unwrap_or_default() + "\n";
        let status = if ok {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        text(status, "application/json", body)
    };
    match req.uri().path() {
        "/metrics" => text(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            telemetry.encode(),
        ),
        "/healthz" => {
            let h = telemetry.health();
            probe(h.live, &h)
        }
        "/readyz" => {
            let h = telemetry.health();
            probe(h.ready, &h)
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "try /metrics, /healthz or /readyz\n".to_owned(),
        ),
    }
}

/// An address is shown as itself; used by the CLI to say what it asks about.
pub fn describe(query: &str) -> String {
    match query.parse::<IpAddr>() {
        Ok(ip) => format!("address {ip}"),
        Err(_) => format!("row {query:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mention_is_a_whole_address_or_name() {
        assert!(mentions("add 192.0.2.1/32 dev bgp-nic", "192.0.2.1"));
        assert!(!mentions("add 192.0.2.10/32 dev bgp-nic", "192.0.2.1"));
        assert!(!mentions("add 10.192.0.2.1", "192.0.2.1"));
        assert!(mentions("\"2001:db8::1\"", "2001:db8::1"));
        assert!(!mentions("\"2001:db8::10\"", "2001:db8::1"));
        assert!(!mentions("\"2001:db8::1:5\"", "2001:db8::1"));
        assert!(mentions("{\"dst\":\"192.0.2.1\"}", "192.0.2.1"));
        assert!(!mentions("anything", ""));
    }
}
