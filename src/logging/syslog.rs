//! `use_syslog`: each log line as one datagram on `/dev/log`, in the format glibc's `syslog(3)`
//! writes there (`<PRI>Mmm dd hh:mm:ss ident[pid]: message`), which is what oslo.log's
//! `OSSysLogHandler` (Python's `syslog` module) produces. rsyslog, syslog-ng and journald all
//! read it. A restarted syslog daemon is reconnected to on the next line; while none listens,
//! lines are dropped, as `syslog(3)` drops them.

// Unsafe code allowed in this file only: `localtime_r` (libc) for the timestamp, local time as
// syslog(3) writes it; there is no safe binding in the dependencies.
#![allow(unsafe_code)]

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::Mutex;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Where syslog daemons listen (glibc's `_PATH_LOG`).
pub(crate) const SYSLOG_SOCKET: &str = "/dev/log";

/// Facility names oslo.log accepts, with their codes (`<syslog.h>`).
pub(crate) const SYSLOG_FACILITIES: &[(&str, u8)] = &[
    ("LOG_KERN", 0),
    ("LOG_USER", 1),
    ("LOG_MAIL", 2),
    ("LOG_DAEMON", 3),
    ("LOG_AUTH", 4),
    ("LOG_SYSLOG", 5),
    ("LOG_LPR", 6),
    ("LOG_NEWS", 7),
    ("LOG_UUCP", 8),
    ("LOG_CRON", 9),
    ("LOG_AUTHPRIV", 10),
    ("LOG_FTP", 11),
    ("LOG_LOCAL0", 16),
    ("LOG_LOCAL1", 17),
    ("LOG_LOCAL2", 18),
    ("LOG_LOCAL3", 19),
    ("LOG_LOCAL4", 20),
    ("LOG_LOCAL5", 21),
    ("LOG_LOCAL6", 22),
    ("LOG_LOCAL7", 23),
];

/// The facility code of a name as oslo.log reads it: case-insensitive, `LOG_` optional
/// (`local0`, `LOG_LOCAL0` and `log_local0` are the same).
pub(crate) fn syslog_facility(name: &str) -> Option<u8> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("LOG_") {
        upper
    } else {
        format!("LOG_{upper}")
    };
    SYSLOG_FACILITIES
        .iter()
        .find(|(n, _)| *n == full)
        .map(|(_, code)| *code)
}

/// syslog severity of a tracing level (as Python's SysLogHandler maps logging's levels).
fn severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// The connection to the syslog socket.
#[derive(Debug)]
pub(crate) struct Syslog {
    socket_path: &'static str,
    facility: u8,
    /// `ident[pid]`.
    tag: String,
    socket: Mutex<Option<UnixDatagram>>,
    /// Not connected, said once on stderr.
    said_down: std::sync::atomic::AtomicBool,
}

impl Syslog {
    /// Connects to `/dev/log` now; a failure is returned (for the caller to report) but the
    /// output still works: every line tries to connect again.
    pub(crate) fn new(facility: u8, ident: &str) -> (Self, Option<std::io::Error>) {
        let socket_path = SYSLOG_SOCKET;
        let (socket, error) = match connect(Path::new(socket_path)) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e)),
        };
        let said_down = std::sync::atomic::AtomicBool::new(error.is_some());
        (
            Self {
                socket_path,
                facility,
                tag: format!("{ident}[{}]", std::process::id()),
                socket: Mutex::new(socket),
                said_down,
            },
            error,
        )
    }

    fn send(&self, severity: u8, message: &[u8]) {
        let mut datagram = format!(
            "<{}>{} {}: ",
            u16::from(self.facility) * 8 + u16::from(severity),
            timestamp(),
            self.tag
        )
        .into_bytes();
        datagram.extend_from_slice(message.strip_suffix(b"\n").unwrap_or(message));
        let mut socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = socket.as_ref()
            && s.send(&datagram).is_ok()
        {
            return;
        }
        // Not connected, or the daemon restarted (its socket is a new one): connect again.
        match connect(Path::new(self.socket_path)).and_then(|s| s.send(&datagram).map(|_| s)) {
            Ok(s) => {
                *socket = Some(s);
                self.said_down
                    .store(false, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                *socket = None;
                if !self
                    .said_down
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    eprintln!(
                        "ovn-bgp-agent: use_syslog: {}: {e}; syslog lines are dropped until it \
                         accepts them",
                        self.socket_path
                    );
                }
            }
        }
    }
}

fn connect(path: &Path) -> std::io::Result<UnixDatagram> {
    let s = UnixDatagram::unbound()?;
    s.connect(path)?;
    Ok(s)
}

/// `Mmm dd hh:mm:ss` in local time, as syslog(3) writes it.
fn timestamp() -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // time_t is i64 on the 64-bit targets the agent runs on (glibc and musl alike); naming
    // `libc::time_t` is deprecated on musl.
    let t = i64::try_from(now).unwrap_or(0);
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the thread-safe variant.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if !ok {
        return "Jan  1 00:00:00".to_owned();
    }
    let month = MONTHS
        .get(usize::try_from(tm.tm_mon).unwrap_or(0))
        .unwrap_or(&"Jan");
    format!(
        "{month} {:>2} {:02}:{:02}:{:02}",
        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec
    )
}

impl super::LineSink for Syslog {
    fn deliver(&self, level: Level, line: &[u8]) {
        self.send(severity(&level), line);
    }
}

impl<'a> MakeWriter<'a> for Syslog {
    type Writer = super::EventLine<'a, Syslog>;

    /// Without an event's level (the formatter always passes it): `info`.
    fn make_writer(&'a self) -> Self::Writer {
        super::EventLine::new(self, Level::INFO)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        super::EventLine::new(self, *meta.level())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facility_names_as_oslo_reads_them() {
        assert_eq!(syslog_facility("LOG_USER"), Some(1));
        assert_eq!(syslog_facility("local0"), Some(16));
        assert_eq!(syslog_facility("log_local7"), Some(23));
        assert_eq!(syslog_facility("daemon"), Some(3));
        assert_eq!(syslog_facility("LOG_NOPE"), None);
    }

    #[test]
    fn timestamp_is_syslog_shaped() {
        let t = timestamp();
        assert_eq!(t.len(), 15, "{t:?}");
        assert_eq!(&t[3..4], " ");
        assert_eq!(&t[9..10], ":");
    }
}
