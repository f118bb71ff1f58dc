//! Remotes (`unix:PATH`, `tcp:HOST:PORT`, `ssl:HOST:PORT`, comma-separated for clusters),
//! connecting to them (TLS through rustls), and the reconnect backoff.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use super::error::OvsdbError;

/// One server address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    Unix(PathBuf),
    Tcp { host: String, port: u16 },
    Ssl { host: String, port: u16 },
}

impl std::fmt::Display for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Remote::Unix(p) => write!(f, "unix:{}", p.display()),
            Remote::Tcp { host, port } => write!(f, "tcp:{}", join_host_port(host, *port)),
            Remote::Ssl { host, port } => write!(f, "ssl:{}", join_host_port(host, *port)),
        }
    }
}

fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn split_host_port(spec: &str, original: &str) -> Result<(String, u16), OvsdbError> {
    let bad = |reason: &str| OvsdbError::BadRemote {
        remote: original.to_owned(),
        reason: reason.to_owned(),
    };
    let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
        let (h, p) = rest
            .split_once("]:")
            .ok_or_else(|| bad("expected [IPv6]:PORT"))?;
        (h, p)
    } else {
        spec.rsplit_once(':')
            .ok_or_else(|| bad("expected HOST:PORT"))?
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let port = port.parse::<u16>().map_err(|_| bad("invalid port"))?;
    Ok((host.to_owned(), port))
}

impl Remote {
    /// Parses one remote.
    pub fn parse(s: &str) -> Result<Remote, OvsdbError> {
        let s = s.trim();
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(OvsdbError::BadRemote {
                    remote: s.to_owned(),
                    reason: "empty socket path".into(),
                });
            }
            return Ok(Remote::Unix(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix("tcp:") {
            let (host, port) = split_host_port(rest, s)?;
            return Ok(Remote::Tcp { host, port });
        }
        if let Some(rest) = s.strip_prefix("ssl:") {
            let (host, port) = split_host_port(rest, s)?;
            return Ok(Remote::Ssl { host, port });
        }
        Err(OvsdbError::BadRemote {
            remote: s.to_owned(),
            reason: "expected unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT".into(),
        })
    }

    /// Parses a comma-separated list (a cluster's members).
    pub fn parse_list(s: &str) -> Result<Vec<Remote>, OvsdbError> {
        let list: Vec<Remote> = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(Remote::parse)
            .collect::<Result<_, _>>()?;
        if list.is_empty() {
            return Err(OvsdbError::BadRemote {
                remote: s.to_owned(),
                reason: "no remote given".into(),
            });
        }
        Ok(list)
    }
}

/// PEM files for `ssl:` remotes (the `[ovn] ovn_sb_private_key/certificate/ca_cert` options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_cert: PathBuf,
}

/// A byte stream to a server, whatever the transport.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}
pub type BoxStream = Pin<Box<dyn Stream>>;

fn tls_error(remote: &Remote, reason: impl std::fmt::Display) -> OvsdbError {
    OvsdbError::Tls {
        remote: remote.to_string(),
        reason: reason.to_string(),
    }
}

/// Builds the rustls client configuration from PEM files; read once per connection attempt so
/// rotated certificates are picked up on reconnect.
fn tls_config(remote: &Remote, files: &TlsFiles) -> Result<rustls::ClientConfig, OvsdbError> {
    let tls_error = |remote: &Remote, reason: String| OvsdbError::TlsConfig {
        remote: remote.to_string(),
        reason,
    };
    let read = |p: &PathBuf| {
        std::fs::read(p).map_err(|e| tls_error(remote, format!("reading {}: {e}", p.display())))
    };
    let ca_pem = read(&files.ca_cert)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_slice()) {
        let cert =
            cert.map_err(|e| tls_error(remote, format!("CA {}: {e}", files.ca_cert.display())))?;
        roots
            .add(cert)
            .map_err(|e| tls_error(remote, format!("CA {}: {e}", files.ca_cert.display())))?;
    }
    if roots.is_empty() {
        return Err(tls_error(
            remote,
            format!("no certificate in CA file {}", files.ca_cert.display()),
        ));
    }
    let cert_pem = read(&files.certificate)?;
    let certs = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            tls_error(
                remote,
                format!("certificate {}: {e}", files.certificate.display()),
            )
        })?;
    let key_pem = read(&files.private_key)?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| tls_error(remote, format!("key {}: {e}", files.private_key.display())))?
        .ok_or_else(|| {
            tls_error(
                remote,
                format!("no private key in {}", files.private_key.display()),
            )
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(remote, e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| tls_error(remote, e.to_string()))
}

/// Opens a connection to one remote.
pub async fn connect(remote: &Remote, tls: Option<&TlsFiles>) -> Result<BoxStream, OvsdbError> {
    let conn_err = |source: io::Error| OvsdbError::Connect {
        remote: remote.to_string(),
        source,
    };
    match remote {
        Remote::Unix(path) => Ok(Box::pin(UnixStream::connect(path).await.map_err(conn_err)?)),
        Remote::Tcp { host, port } => {
            let s = TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(conn_err)?;
            s.set_nodelay(true).map_err(conn_err)?;
            Ok(Box::pin(s))
        }
        Remote::Ssl { host, port } => {
            let files = tls.ok_or_else(|| {
                tls_error(
                    remote,
                    "ssl: remote but no key/certificate/CA files configured",
                )
            })?;
            let config = tls_config(remote, files)?;
            let tcp = TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(conn_err)?;
            tcp.set_nodelay(true).map_err(conn_err)?;
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| tls_error(remote, format!("server name {host:?}: {e}")))?;
            let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| tls_error(remote, format!("handshake: {e}")))?;
            Ok(Box::pin(stream))
        }
    }
}

/// A small non-cryptographic generator (splitmix64) for jitter, shuffling and request UUIDs.
pub fn random_u64() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut s = STATE.load(Ordering::Relaxed);
    if s == 0 {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            ^ ((std::process::id() as u64) << 32);
        s = seed | 1;
    }
    s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    STATE.store(s, Ordering::Relaxed);
    let mut z = s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Capped exponential backoff with jitter (between half and all of the current delay).
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            current: initial,
        }
    }
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = base / 2;
        let jitter_ns = if half.as_nanos() == 0 {
            0
        } else {
            random_u64() % (half.as_nanos() as u64 + 1)
        };
        half + Duration::from_nanos(jitter_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_remotes() {
        let l = Remote::parse_list("tcp:127.0.0.1:6642,ssl:[::1]:6643,unix:/run/db.sock").unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].to_string(), "ssl:[::1]:6643");
        assert!(Remote::parse("tcp:foo").is_err());
        assert!(Remote::parse("http://x").is_err());
    }

    #[test]
    fn backoff_is_capped() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        for _ in 0..20 {
            assert!(b.next_delay() <= Duration::from_secs(1));
        }
    }
}
