//! Where the agent logs, as oslo.log sets it up from `[DEFAULT]` (`debug`, `log_file`,
//! `log_dir`, `use_json`, `use_syslog`, `syslog_log_facility`, `use_journal`, `use_stderr`) and
//! its command-line flags, which override the file:
//!
//! - `log_file` (relative: inside `log_dir`; `log_dir` alone: `<log_dir>/ovn-bgp-agent.log`),
//!   appended with `O_APPEND` and reopened when moved or deleted (oslo's `WatchedFileHandler`);
//! - stderr when `use_stderr` is set or there is no log file (oslo: stdout in that case);
//! - `use_syslog`: datagrams on `/dev/log` with `syslog_log_facility`;
//! - `use_journal`: journald's native protocol (`tracing-journald`), with structured fields;
//! - `use_json`: one JSON object per line on the file, stderr and syslog outputs.
//!
//! SIGHUP ([`reload`]) re-reads the configuration files and rebuilds all of the above (which
//! also reopens the log file, for logrotate's move-then-HUP); every other option keeps the value
//! it had at start, and SIGHUP says which changed ones wait for a restart. The outputs sit behind
//! one `tracing_subscriber::reload` layer, so the swap is atomic for the events around it.

mod file;
mod syslog;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

pub(crate) use syslog::{SYSLOG_FACILITIES, syslog_facility};

use crate::config::{self, ConfigSources, DefaultSection, LoadedConfig};

/// oslo.log names the default log file and the syslog/journal identifier after the program.
pub(crate) const PROGRAM: &str = "ovn-bgp-agent";

/// The `[DEFAULT]` options SIGHUP applies; every other option needs a restart.
pub(crate) const RELOADED_OPTIONS: &[&str] = &[
    "debug",
    "log_file",
    "log_dir",
    "use_json",
    "use_syslog",
    "syslog_log_facility",
    "use_journal",
    "use_stderr",
];

#[derive(Debug, thiserror::Error)]
pub(crate) enum LoggingError {
    #[error("cannot open the log file {path} ({given_by}): {source}")]
    LogFile {
        path: PathBuf,
        /// The option or flag that named it.
        given_by: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--syslog-log-facility {0:?}: not a syslog facility (LOG_USER, LOG_DAEMON, LOG_LOCAL0..7, ...)"
    )]
    Facility(String),
    #[error("cannot install the logger: {0}")]
    Install(String),
    #[error("cannot reload the logging outputs: {0}")]
    Reload(#[source] reload::Error),
}

/// oslo.log's command-line flags: each one given overrides the configuration file.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogOverrides {
    /// `-d/--debug` (can only turn debug on, as in oslo).
    pub(crate) debug: bool,
    pub(crate) log_file: Option<PathBuf>,
    pub(crate) log_dir: Option<PathBuf>,
    /// `--use-json`, `--log-format json|text`.
    pub(crate) use_json: Option<bool>,
    pub(crate) use_syslog: bool,
    pub(crate) use_journal: bool,
    pub(crate) syslog_log_facility: Option<String>,
}

/// The effective logging set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogSettings {
    pub(crate) debug: bool,
    /// The log file and the option or flag that named it.
    pub(crate) file: Option<(PathBuf, &'static str)>,
    pub(crate) json: bool,
    /// The syslog facility code, when `use_syslog`.
    pub(crate) syslog: Option<u8>,
    pub(crate) journal: bool,
    pub(crate) stderr: bool,
}

impl LogSettings {
    /// The configuration file's values with the command line's on top, combined as oslo.log
    /// combines them (`_get_log_file_path`: an absolute `log_file` ignores `log_dir`).
    pub(crate) fn resolve(file: &DefaultSection, cli: &LogOverrides) -> Result<Self, LoggingError> {
        let (log_file, file_given_by) = match (&cli.log_file, &file.log_file) {
            (Some(f), _) => (Some(f), "--log-file"),
            (None, Some(f)) => (Some(f), "[DEFAULT] log_file"),
            (None, None) => (None, ""),
        };
        let (log_dir, dir_given_by) = match (&cli.log_dir, &file.log_dir) {
            (Some(d), _) => (Some(d), "--log-dir"),
            (None, Some(d)) => (Some(d), "[DEFAULT] log_dir"),
            (None, None) => (None, ""),
        };
        let path = match (log_dir, log_file) {
            (Some(dir), Some(f)) => Some((dir.join(f), file_given_by)),
            (None, Some(f)) => Some((f.clone(), file_given_by)),
            (Some(dir), None) => Some((dir.join(format!("{PROGRAM}.log")), dir_given_by)),
            (None, None) => None,
        };
        let use_syslog = cli.use_syslog || file.use_syslog;
        let syslog = if use_syslog {
            Some(match &cli.syslog_log_facility {
                Some(name) => {
                    syslog_facility(name).ok_or_else(|| LoggingError::Facility(name.clone()))?
                }
                // Checked when the configuration was loaded.
                None => syslog_facility(&file.syslog_log_facility).unwrap_or(1),
            })
        } else {
            None
        };
        Ok(Self {
            debug: cli.debug || file.debug,
            stderr: file.use_stderr || path.is_none(),
            file: path,
            json: cli.use_json.unwrap_or(file.use_json),
            syslog,
            journal: cli.use_journal || file.use_journal,
        })
    }
}

type Output = Box<dyn Layer<Registry> + Send + Sync>;

/// A destination that takes each event's formatted text in one piece (one `write`, one
/// datagram), which the formatter's several small writes would otherwise split.
pub(crate) trait LineSink {
    fn deliver(&self, level: tracing::Level, line: &[u8]);
}

/// One event's text for a [`LineSink`], delivered when the formatter drops it.
pub(crate) struct EventLine<'a, S: LineSink> {
    sink: &'a S,
    level: tracing::Level,
    buf: Vec<u8>,
}

impl<'a, S: LineSink> EventLine<'a, S> {
    pub(crate) fn new(sink: &'a S, level: tracing::Level) -> Self {
        Self {
            sink,
            level,
            buf: Vec::with_capacity(256),
        }
    }
}

impl<S: LineSink> std::io::Write for EventLine<'_, S> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<S: LineSink> Drop for EventLine<'_, S> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.sink.deliver(self.level, &self.buf);
        }
    }
}

/// The outputs of one set-up, and what could not be set up but does not stop the agent
/// (syslog or journald not listening), to be logged once the outputs are installed.
struct Outputs {
    layer: Output,
    problems: Vec<String>,
}

/// A formatting output on `writer`: JSON, or text (with its own timestamp unless the
/// destination stamps lines itself).
fn formatted<W>(writer: W, json: bool, ansi: bool, timestamps: bool) -> Output
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    match (json, timestamps) {
        (true, _) => layer.json().boxed(),
        (false, true) => layer.boxed(),
        (false, false) => layer.without_time().boxed(),
    }
}

/// `RUST_LOG` when set, else `debug` or `info`.
fn level_filter(debug: bool) -> EnvFilter {
    EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if debug { "debug" } else { "info" }))
}

fn build(settings: &LogSettings) -> Result<Outputs, LoggingError> {
    let mut outputs: Vec<Output> = Vec::new();
    let mut problems = Vec::new();
    if let Some((path, given_by)) = &settings.file {
        let file = file::LogFile::open(path.clone()).map_err(|source| LoggingError::LogFile {
            path: path.clone(),
            given_by,
            source,
        })?;
        outputs.push(formatted(file, settings.json, false, true));
    }
    if settings.stderr {
        let colour = !settings.json
            && stderr_wants_colour(
                std::io::IsTerminal::is_terminal(&std::io::stderr()),
                std::env::var_os("NO_COLOR").as_deref(),
            );
        outputs.push(formatted(std::io::stderr, settings.json, colour, true));
    }
    if let Some(facility) = settings.syslog {
        let (syslog, error) = syslog::Syslog::new(facility, PROGRAM);
        if let Some(e) = error {
            problems.push(format!(
                "use_syslog: {}: {e}; syslog lines are dropped until a syslog daemon listens there",
                syslog::SYSLOG_SOCKET
            ));
        }
        // syslog stamps each line with its own time.
        outputs.push(formatted(syslog, settings.json, false, false));
    }
    if settings.journal {
        match tracing_journald::layer() {
            Ok(journal) => outputs.push(journal.with_syslog_identifier(PROGRAM.to_owned()).boxed()),
            Err(e) => problems.push(format!(
                "use_journal: journald is not listening on /run/systemd/journal/socket ({e}); \
                 no journal output until it is and the agent gets SIGHUP"
            )),
        }
    }
    Ok(Outputs {
        layer: Box::new(level_filter(settings.debug).and_then(outputs)),
        problems,
    })
}

/// Colour only on a terminal, and never when `NO_COLOR` is set to anything non-empty
/// (no-color.org): a journal or a redirected log must not carry escape codes.
fn stderr_wants_colour(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// What SIGHUP needs: how the configuration was found, the flags on top, what is in force.
struct Installed {
    handle: reload::Handle<Output, Registry>,
    sources: ConfigSources,
    overrides: LogOverrides,
    /// `(section, key, value)` of every option at start (to name the changed ones on SIGHUP).
    options: Vec<(String, String, String)>,
}

static INSTALLED: OnceLock<Mutex<Installed>> = OnceLock::new();

fn option_values(loaded: &LoadedConfig) -> Vec<(String, String, String)> {
    loaded
        .provenance
        .iter()
        .map(|p| (p.section.to_owned(), p.key.to_owned(), p.value.clone()))
        .collect()
}

/// Install the process's logger from the loaded configuration and the command line. Problems
/// that do not stop the agent (syslog or journald absent) are logged as warnings.
pub(crate) fn init(
    loaded: &LoadedConfig,
    sources: ConfigSources,
    overrides: LogOverrides,
) -> Result<(), LoggingError> {
    let settings = LogSettings::resolve(&loaded.config.default, &overrides)?;
    let outputs = build(&settings)?;
    let (layer, handle) = reload::Layer::new(outputs.layer);
    tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .map_err(|e| LoggingError::Install(e.to_string()))?;
    for p in &outputs.problems {
        tracing::warn!("{p}");
    }
    let installed = Installed {
        handle,
        sources,
        overrides,
        options: option_values(loaded),
    };
    INSTALLED
        .set(Mutex::new(installed))
        .map_err(|_| LoggingError::Install("installed twice".to_owned()))
}

/// SIGHUP: re-read the configuration files, rebuild the logging outputs (reopening the log
/// file), and name each changed option that only a restart applies. A configuration that no
/// longer loads, or a log file that cannot be opened, leaves the current outputs in place.
pub(crate) fn reload() {
    let Some(installed) = INSTALLED.get() else {
        return;
    };
    let installed = installed.lock().unwrap_or_else(|p| p.into_inner());
    let loaded = match config::load(&installed.sources) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("SIGHUP: configuration not reloaded, logging unchanged: {e}");
            return;
        }
    };
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let settings = match LogSettings::resolve(&loaded.config.default, &installed.overrides) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("SIGHUP: logging unchanged: {e}");
            return;
        }
    };
    let outputs = match build(&settings) {
        Ok(o) => o,
        Err(e) => {
            tracing::error!("SIGHUP: logging unchanged: {e}");
            return;
        }
    };
    if let Err(e) = installed.handle.reload(outputs.layer) {
        tracing::error!("SIGHUP: {}", LoggingError::Reload(e));
        return;
    }
    follow_with_log_crate();
    for p in &outputs.problems {
        tracing::warn!("{p}");
    }
    let new_options = option_values(&loaded);
    for (section, key, value) in &new_options {
        let before = installed
            .options
            .iter()
            .find(|(s, k, _)| s == section && k == key)
            .map(|(_, _, v)| v);
        let reloaded = section == "DEFAULT" && RELOADED_OPTIONS.contains(&key.as_str());
        if !reloaded && before.is_some_and(|b| b != value) {
            tracing::warn!(
                "SIGHUP: [{section}] {key} changed to {value:?}; it takes effect at the next restart"
            );
        }
    }
    tracing::info!(
        debug = settings.debug,
        log_file = %settings
            .file
            .as_ref()
            .map_or(String::new(), |(p, _)| p.display().to_string()),
        json = settings.json,
        syslog = settings.syslog.is_some(),
        journal = settings.journal,
        stderr = settings.stderr,
        "SIGHUP: configuration re-read, logging outputs reopened"
    );
    tracing::debug!("SIGHUP: debug logging is on");
    // `installed.options` keeps the values in force since start, so a change that waits for a
    // restart is named again at every SIGHUP until then.
}

/// Libraries that log through the `log` crate (rustls) are bridged into tracing with the level
/// in force at start as their ceiling (`try_init`); a reload moves that ceiling with the new
/// filter, so turning `debug` on by SIGHUP also shows their debug lines.
fn follow_with_log_crate() {
    use tracing::level_filters::LevelFilter;
    let level = match LevelFilter::current() {
        LevelFilter::OFF => log::LevelFilter::Off,
        LevelFilter::ERROR => log::LevelFilter::Error,
        LevelFilter::WARN => log::LevelFilter::Warn,
        LevelFilter::INFO => log::LevelFilter::Info,
        LevelFilter::DEBUG => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    log::set_max_level(level);
}

/// Handle SIGHUP for the rest of the process's life ([`reload`] on each), instead of being
/// killed by it. Needs a tokio runtime.
pub(crate) fn watch_sighup() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP");
            if let Err(e) = tokio::task::spawn_blocking(reload).await {
                tracing::error!("SIGHUP: the reload panicked: {e}");
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(stderr_wants_colour(true, None));
        assert!(stderr_wants_colour(true, Some(OsStr::new(""))));
        assert!(!stderr_wants_colour(true, Some(OsStr::new("1"))));
        assert!(!stderr_wants_colour(false, None));
    }

    fn file_options(f: impl FnOnce(&mut DefaultSection)) -> DefaultSection {
        let mut d = DefaultSection::default();
        f(&mut d);
        d
    }

    #[test]
    fn log_file_and_log_dir_combine_as_in_oslo() {
        let none = LogOverrides::default();
        let s = LogSettings::resolve(&DefaultSection::default(), &none).unwrap();
        assert_eq!(s.file, None);
        assert!(s.stderr, "no log file: stderr");

        let d = file_options(|d| {
            d.log_file = Some("agent.log".into());
            d.log_dir = Some("/var/log/oba".into());
        });
        let s = LogSettings::resolve(&d, &none).unwrap();
        assert_eq!(
            s.file,
            Some(("/var/log/oba/agent.log".into(), "[DEFAULT] log_file"))
        );
        assert!(!s.stderr, "a log file and no use_stderr: no stderr");

        // An absolute log_file ignores log_dir (os.path.join).
        let d = file_options(|d| {
            d.log_file = Some("/tmp/a.log".into());
            d.log_dir = Some("/var/log/oba".into());
            d.use_stderr = true;
        });
        let s = LogSettings::resolve(&d, &none).unwrap();
        assert_eq!(s.file, Some(("/tmp/a.log".into(), "[DEFAULT] log_file")));
        assert!(s.stderr);

        let d = file_options(|d| d.log_dir = Some("/var/log/oba".into()));
        let s = LogSettings::resolve(&d, &none).unwrap();
        assert_eq!(
            s.file,
            Some(("/var/log/oba/ovn-bgp-agent.log".into(), "[DEFAULT] log_dir"))
        );
    }

    #[test]
    fn command_line_flags_override_the_file() {
        let d = file_options(|d| {
            d.log_file = Some("/var/log/file.log".into());
            d.use_json = true;
            d.syslog_log_facility = "LOG_LOCAL3".into();
        });
        let cli = LogOverrides {
            debug: true,
            log_file: Some("/tmp/cli.log".into()),
            use_json: Some(false),
            use_syslog: true,
            ..LogOverrides::default()
        };
        let s = LogSettings::resolve(&d, &cli).unwrap();
        assert_eq!(s.file, Some(("/tmp/cli.log".into(), "--log-file")));
        assert!(s.debug && !s.json);
        assert_eq!(s.syslog, Some(19), "the file's facility with --use-syslog");

        let cli = LogOverrides {
            use_syslog: true,
            syslog_log_facility: Some("bogus".into()),
            ..LogOverrides::default()
        };
        assert!(matches!(
            LogSettings::resolve(&d, &cli),
            Err(LoggingError::Facility(_))
        ));
    }
}
