//! Command line: `ovn-bgp-agent [--config-file F]... [--config-dir D]... [run|check-config|plugins]`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{self, ConfigSources};
use crate::host::Agent;
use crate::plugin;

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
        Command::Run => run(&cli),
    }
}

/// The `plugins` listing: drivers with the backends they support, then backends.
pub fn plugins_listing() -> String {
    let mut out = String::from("drivers:\n");
    for d in plugin::drivers() {
        out.push_str(&format!(
            "  {:<28} exposing methods: {}  ({})\n",
            d.name,
            d.supported_backends.join(", "),
            d.description
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

fn init_logging(format: LogFormat, debug: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if debug { "debug" } else { "info" }));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn run(cli: &Cli) -> ExitCode {
    let loaded = match config::load::load(&sources(cli)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    init_logging(cli.log_format, loaded.config.default.debug);
    for w in &loaded.warnings {
        tracing::warn!("{w}");
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
