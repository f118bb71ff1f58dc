//! Command line: `ovn-bgp-agent [--config-file F]... [--config-dir D]...
//! [run|check-config|plugins|replay <case-dir> [--update]]`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{self, ConfigSources};
use crate::host::Agent;
use crate::plugin;
use crate::replay;

#[derive(Debug, Parser)]
#[command(
    name = "ovn-bgp-agent",
    version,
    about = "Expose OpenStack/OVN workloads over BGP"
)]
pub struct Cli {
    /// Configuration file (INI as upstream's bgp-agent.conf, or TOML by extension); repeatable,
    /// later files override earlier ones.
    #[arg(long = "config-file", global = true, value_name = "PATH")]
    pub config_file: Vec<PathBuf>,
    /// Directory of `*.conf` files read in name order after the config files; repeatable.
    #[arg(long = "config-dir", global = true, value_name = "DIR")]
    pub config_dir: Vec<PathBuf>,
    /// Log output format.
    #[arg(long = "log-format", global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// oslo.log `--debug`: log at debug level (as `[DEFAULT] debug = true`).
    #[arg(short = 'd', long = "debug", global = true)]
    pub debug: bool,
    /// oslo.log `--log-file`: append logs to this file instead of stderr (relative paths are
    /// taken inside `--log-dir` when given).
    #[arg(long = "log-file", global = true, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// oslo.log `--log-dir`: directory of `--log-file` (alone: `<dir>/ovn-bgp-agent.log`).
    #[arg(long = "log-dir", global = true, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// oslo.log `--use-json`: same as `--log-format json`.
    #[arg(long = "use-json", global = true)]
    pub use_json: bool,
    /// oslo.log flags deployment tools pass that have no meaning here; accepted so that the
    /// agent starts with the same command line as upstream, and reported as ignored.
    #[arg(long = "use-syslog", global = true, hide = true)]
    pub use_syslog: bool,
    #[arg(long = "use-journal", global = true, hide = true)]
    pub use_journal: bool,
    #[arg(long = "watch-log-file", global = true, hide = true)]
    pub watch_log_file: bool,
    #[arg(short = 'v', long = "verbose", global = true, hide = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent (the default).
    Run,
    /// Print the effective configuration and where each value came from; non-zero exit on errors.
    CheckConfig,
    /// List the drivers and exposure backends compiled into this binary.
    Plugins,
    /// What the running agent exposes now, grouped by kind, with the row each comes from; its
    /// health, last reconcile and what it refused. Asks the agent's control socket.
    Status {
        /// Print the agent's JSON reply.
        #[arg(long)]
        json: bool,
        /// The control socket (default: `[telemetry] control_socket` of the configuration).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Why an address or a port is, or is not, exposed on this chassis: the exposure and its
    /// row, what the driver's rows say (bound elsewhere, down, not on a provider network ...),
    /// what was refused and why, and the kernel/OVS/FRR objects made for it.
    Explain {
        /// An IP address, or a port name/uuid.
        query: String,
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Exit 0 if the running agent is live and ready (databases synced, first reconcile done),
    /// 1 if not, 2 if it cannot be asked; for exec probes.
    Health {
        /// Only liveness (the reconcile loop makes progress).
        #[arg(long)]
        live: bool,
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Check the host prerequisites of the configured mode (local OVS and the chassis identity,
    /// OVN databases, FRR's sockets, provider bridges, forwarding, rp_filter, VRF/dummy support)
    /// and say what to fix; exit 1 if any check fails. Changes nothing.
    Doctor,
    /// Replay a recorded case through the compiled driver: print the monitor conditions and
    /// exposures after the initial database (step 00) and after each NN-update.json, and fail
    /// naming the first step that differs from its NN-expected.json. The case folder holds
    /// case.json, 00-db.json, NN-update.json, NN-expected.json, and optionally bgp-agent.conf,
    /// schema.json, schema-extra.json (layout: docs/writing-a-driver.md). `--config-file` does
    /// not apply: the case's own bgp-agent.conf does.
    Replay {
        /// The case folder.
        case: PathBuf,
        /// Write every NN-expected.json from this build's output instead of comparing.
        #[arg(long)]
        update: bool,
    },
}

/// Entry point shared by the agent binary and the examples.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.as_ref().unwrap_or(&Command::Run) {
        Command::Plugins => {
            print!("{}", plugins_listing());
            ExitCode::SUCCESS
        }
        Command::CheckConfig => check_config(&cli),
        Command::Replay { case, update } => replay_case(case, *update),
        Command::Status { json, socket } => {
            crate::control_cli::status(&sources(&cli), socket.as_deref(), *json)
        }
        Command::Explain {
            query,
            json,
            socket,
        } => crate::control_cli::explain(&sources(&cli), socket.as_deref(), query, *json),
        Command::Doctor => doctor(&cli),
        Command::Health { live, socket } => {
            crate::control_cli::health(&sources(&cli), socket.as_deref(), *live)
        }
        Command::Run => run(&cli),
    }
}

/// `replay`: every step described on stdout; on stderr the first step that differs from its
/// expected file, with a short diff, and a non-zero exit.
fn replay_case(dir: &std::path::Path, update: bool) -> ExitCode {
    let case = match replay::ReplayCase::load(dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for w in &case.config_warnings {
        eprintln!("warning: {}: {w}", case.path("bgp-agent.conf").display());
    }
    let steps = match replay::run(&case) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    let mut first_failure: Option<(String, String)> = None;
    for step in &steps {
        print!("{}", replay::describe_step(&case, step));
        let expected = step.expected_file();
        if update {
            if let Err(e) = replay::write_expected(&case, step) {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
            println!("-> wrote {expected}\n");
            continue;
        }
        let verdict = match replay::check_step(&case, step) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        match verdict {
            replay::StepCheck::Same => println!("-> as {expected}\n"),
            replay::StepCheck::Missing => {
                println!("-> no {expected}\n");
                first_failure.get_or_insert((
                    format!(
                        "step {:02}: no {expected} (--update writes it)",
                        step.number
                    ),
                    String::new(),
                ));
            }
            replay::StepCheck::Differs(diff) => {
                println!("-> DIFFERS from {expected}\n");
                first_failure.get_or_insert((
                    format!(
                        "step {:02} ({}): the output differs from {expected} \
                         (- expected, + this build):",
                        step.number,
                        step.input_file()
                    ),
                    diff,
                ));
            }
        }
    }
    match first_failure {
        None => ExitCode::SUCCESS,
        Some((what, diff)) => {
            eprintln!("error: {}: {what}", dir.display());
            if !diff.is_empty() {
                eprintln!("{diff}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The `plugins` listing: drivers with the backends they support, then backends.
pub fn plugins_listing() -> String {
    let mut out = String::from("drivers:\n");
    for d in plugin::drivers() {
        let methods = match d.own_backend {
            Some(own) => format!("always {own} (exposing_method is ignored)"),
            None => d.supported_backends.join(", "),
        };
        out.push_str(&format!(
            "  {:<28} exposing methods: {}  ({})\n",
            d.name, methods, d.description
        ));
    }
    out.push_str("exposure backends (exposing_method):\n");
    for b in plugin::backends() {
        out.push_str(&format!("  {:<28} ({})\n", b.name, b.description));
    }
    out
}

fn sources(cli: &Cli) -> ConfigSources {
    ConfigSources {
        config_files: cli.config_file.clone(),
        config_dirs: cli.config_dir.clone(),
        // As upstream: with no --config-file/--config-dir, oslo's default locations.
        oslo_default_search: true,
    }
}

/// `check-config`: the effective configuration, one `[section] key = value  (source)` line per
/// option; warnings on stderr; failure on a bad value or a driver/backend this build cannot run.
fn check_config(cli: &Cli) -> ExitCode {
    let loaded = match config::load::load(&sources(cli)) {
        Ok(l) => l,
        Err(e) => {
            // One line per bad value.
            for line in e.to_string().lines() {
                eprintln!("error: {line}");
            }
            return ExitCode::FAILURE;
        }
    };
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    print!("{}", effective_config_listing(&loaded));
    if let Err(e) = plugin::select(
        &loaded.config.default.driver,
        &loaded.config.default.exposing_method,
    ) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// `doctor`: one line per check, with the fix; non-zero exit when one fails.
fn doctor(cli: &Cli) -> ExitCode {
    let loaded = match config::load::load(&sources(cli)) {
        Ok(l) => l,
        Err(e) => {
            for line in e.to_string().lines() {
                eprintln!("error: {line}");
            }
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let findings = rt.block_on(crate::doctor::run(&loaded.config));
    for f in &findings {
        println!("{f}");
    }
    if findings
        .iter()
        .any(|f| f.severity == crate::doctor::Severity::Fail)
    {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The `check-config` listing.
pub fn effective_config_listing(loaded: &config::LoadedConfig) -> String {
    let mut out = String::new();
    if loaded.files.is_empty() {
        out.push_str("# no configuration file read\n");
    } else {
        out.push_str("# files read, later overriding earlier:\n");
        for f in &loaded.files {
            out.push_str(&format!("#   {}\n", f.display()));
        }
    }
    for p in &loaded.provenance {
        out.push_str(&format!(
            "[{}] {} = {}  ({})\n",
            p.section,
            p.key,
            ini_value(&p.value),
            p.origin
        ));
    }
    if !loaded.no_effect.is_empty() {
        out.push_str(
            "# accepted for compatibility, no effect (oslo.log, oslo.privsep, oslo.concurrency):\n",
        );
        for n in &loaded.no_effect {
            out.push_str(&format!(
                "[{}] {} = {}  ({}; no effect)\n",
                n.section,
                n.key,
                ini_value(&n.value),
                n.origin
            ));
        }
    }
    out
}

/// A multi-line value as INI continuation lines.
fn ini_value(value: &str) -> String {
    value.replace('\n', "\n    ")
}

/// Where logs go: `--log-file`/`--log-dir` as oslo.log combines them, else stderr.
fn log_path(cli: &Cli) -> Option<PathBuf> {
    match (&cli.log_dir, &cli.log_file) {
        (Some(dir), Some(file)) if file.is_relative() => Some(dir.join(file)),
        (_, Some(file)) => Some(file.clone()),
        (Some(dir), None) => Some(dir.join("ovn-bgp-agent.log")),
        (None, None) => None,
    }
}

fn init_logging(cli: &Cli, debug: bool) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if debug { "debug" } else { "info" }));
    let json = cli.use_json || cli.log_format == LogFormat::Json;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match log_path(cli) {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("--log-file {}: {e}", path.display()))?;
            let builder = builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file));
            if json {
                builder.json().init()
            } else {
                builder.init()
            }
        }
        None if json => builder.json().init(),
        None => builder
            .with_writer(std::io::stderr)
            .with_ansi(stderr_wants_colour(
                std::io::IsTerminal::is_terminal(&std::io::stderr()),
                std::env::var_os("NO_COLOR").as_deref(),
            ))
            .init(),
    }
    Ok(())
}

/// Colour only on a terminal, and never when `NO_COLOR` is set to anything non-empty
/// (no-color.org): a journal or a redirected log must not carry escape codes.
fn stderr_wants_colour(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn run(cli: &Cli) -> ExitCode {
    let loaded = match config::load::load(&sources(cli)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = init_logging(cli, cli.debug || loaded.config.default.debug) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    for (given, flag) in [
        (cli.use_syslog, "--use-syslog"),
        (cli.use_journal, "--use-journal"),
        (cli.watch_log_file, "--watch-log-file"),
        (cli.verbose, "--verbose"),
    ] {
        if given {
            tracing::warn!("{flag} is an oslo.log option this agent accepts and ignores");
        }
    }
    let agent = match Agent::new(Arc::new(loaded.config)) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(agent.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
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
}
