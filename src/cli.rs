//! Command line: `ovn-bgp-agent [--config-file F]... [--config-dir D]...
//! [run|check-config|plugins|replay <case-dir> [--update]]`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{self, ConfigSources};
use crate::host::Agent;
use crate::logging;
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
    /// Log output format (`json`: as `--use-json`); overrides `[DEFAULT] use_json`.
    #[arg(long = "log-format", global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    /// oslo.log `--debug`: log at debug level (as `[DEFAULT] debug = true`).
    #[arg(short = 'd', long = "debug", global = true)]
    pub debug: bool,
    /// oslo.log `--log-file`: append logs to this file instead of stderr (relative paths are
    /// taken inside the log dir when one is given); overrides `[DEFAULT] log_file`.
    #[arg(long = "log-file", global = true, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// oslo.log `--log-dir`: directory of a relative log file (alone:
    /// `<dir>/ovn-bgp-agent.log`); overrides `[DEFAULT] log_dir`.
    #[arg(long = "log-dir", global = true, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// oslo.log `--use-json`: one JSON object per log line (as `[DEFAULT] use_json = true`).
    #[arg(long = "use-json", global = true)]
    pub use_json: bool,
    /// oslo.log `--use-syslog`: also log to syslog on /dev/log (as `[DEFAULT] use_syslog`).
    #[arg(long = "use-syslog", global = true)]
    pub use_syslog: bool,
    /// oslo.log `--syslog-log-facility`: the syslog facility (`LOG_USER`, `local0`, ...).
    #[arg(long = "syslog-log-facility", global = true, value_name = "FACILITY")]
    pub syslog_log_facility: Option<String>,
    /// oslo.log `--use-journal`: also log to journald (as `[DEFAULT] use_journal`).
    #[arg(long = "use-journal", global = true)]
    pub use_journal: bool,
    /// oslo.log `--watch-log-file`: accepted; the log file is always reopened when moved.
    #[arg(long = "watch-log-file", global = true, hide = true)]
    pub watch_log_file: bool,
    /// oslo.log's removed `--verbose`: accepted and reported as ignored, so that the agent
    /// starts with the command lines deployment tools still pass.
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

/// The configuration, or `None` after printing one `error:` line per bad value.
fn load_or_report(cli: &Cli) -> Option<config::LoadedConfig> {
    match config::load::load(&sources(cli)) {
        Ok(l) => Some(l),
        Err(e) => {
            for line in e.to_string().lines() {
                eprintln!("error: {line}");
            }
            None
        }
    }
}

/// `check-config`: the effective configuration, one `[section] key = value  (source)` line per
/// option; warnings on stderr; failure on a bad value or a driver/backend this build cannot run.
fn check_config(cli: &Cli) -> ExitCode {
    let Some(loaded) = load_or_report(cli) else {
        return ExitCode::FAILURE;
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
    let Some(loaded) = load_or_report(cli) else {
        return ExitCode::FAILURE;
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

/// The oslo.log flags given on the command line, which override the configuration file.
fn log_overrides(cli: &Cli) -> logging::LogOverrides {
    logging::LogOverrides {
        debug: cli.debug,
        log_file: cli.log_file.clone(),
        log_dir: cli.log_dir.clone(),
        use_json: match (cli.use_json, cli.log_format) {
            (true, _) | (false, Some(LogFormat::Json)) => Some(true),
            (false, Some(LogFormat::Text)) => Some(false),
            (false, None) => None,
        },
        use_syslog: cli.use_syslog,
        use_journal: cli.use_journal,
        syslog_log_facility: cli.syslog_log_facility.clone(),
    }
}

fn run(cli: &Cli) -> ExitCode {
    // First, while this is the only thread: the tools the agent will run get none of its
    // capabilities (every thread created later inherits the restricted sets).
    crate::caps::process::restrict_tool_capabilities();
    let loaded = match config::load::load(&sources(cli)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = logging::init(&loaded, sources(cli), log_overrides(cli)) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    if cli.verbose {
        tracing::warn!("--verbose is an oslo.log option this agent accepts and ignores");
    }
    // Before anything is touched: a process without what its mode cannot work without stops
    // here, with the missing privilege and the fix, rather than failing every write later.
    if let Err(fatal) = crate::caps::privilege::check_at_start(&loaded.config) {
        for m in &fatal {
            tracing::error!("{m}");
        }
        tracing::error!(
            "not starting: the configured mode cannot work without these privileges \
             (docs/operations.md#privileges)"
        );
        return ExitCode::FAILURE;
    }
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
    // From here on SIGHUP reloads instead of killing the agent.
    if let Err(e) = runtime.block_on(async { logging::watch_sighup() }) {
        tracing::error!("cannot install the SIGHUP handler: {e}");
        return ExitCode::FAILURE;
    }
    let agent = match Agent::new(Arc::new(loaded.config)) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // The agent's loop runs as a task of the runtime, not on this thread (`block_on`'s future):
    // the tasks that wake it (the OVSDB sessions, the netlink connection and mirror) then hand
    // over on the worker thread they run on, instead of waking this thread through a futex for
    // every step of every event (a tenth of the agent's CPU per event went to those switches).
    match runtime.block_on(runtime.spawn(agent.run())) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            tracing::error!("the agent's loop ended abnormally: {e}");
            ExitCode::FAILURE
        }
    }
}
