//! Loading the configuration with oslo.config's precedence, through figment:
//!
//! 1. defaults ([`AgentConfig::default`]);
//! 2. the `--config-file` files in order (or, with none given, oslo's default search), each
//!    overriding the ones before;
//! 3. the `*.conf` (and `*.toml`) files of each `--config-dir` (or oslo's default dirs), in
//!    name order;
//! 4. oslo's environment variables `OS_<SECTION>__<OPTION>`;
//! 5. the agent's `OVN_BGP_AGENT_<SECTION>__<OPTION>`.
//!
//! As in oslo, only the effective value of an option is checked, so a bad value overridden by
//! a later source is no error, and values may refer to other options (`$name`, see
//! [`super::substitute`]). Files ending in `.toml` are TOML with the same sections and
//! option names; every other file is upstream's INI.
//!
//! oslo reads `--config-file` and `--config-dir` arguments in command-line order; the agent
//! reads all files, then all dirs (the same for every usual invocation).

use std::fmt;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::Serialized;
use figment::value::{Dict, Value};

use super::AgentConfig;
use super::layer::{Layer, LayerError, Origin, Written};
use super::schema::{self, OptSpec};
use super::substitute::Resolver;
use super::value;

/// oslo `project` of the agent (`config.init(project='bgp-agent')`).
const PROJECT: &str = "bgp-agent";
/// oslo `prog`: the basename of upstream's executable.
const PROG: &str = "ovn-bgp-agent";
/// The agent's environment prefix.
pub const ENV_PREFIX: &str = "OVN_BGP_AGENT_";
/// oslo.config's environment prefix.
pub const OSLO_ENV_PREFIX: &str = "OS_";

/// Where configuration comes from, in precedence order (later overrides earlier).
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    /// `--config-file` arguments; none: oslo's default files (if `oslo_default_search`).
    pub config_files: Vec<PathBuf>,
    /// `--config-dir` arguments; none: oslo's default dirs (if `oslo_default_search`).
    pub config_dirs: Vec<PathBuf>,
    /// Search oslo's default locations for what is not given (the command line does;
    /// tests and embedders usually do not).
    pub oslo_default_search: bool,
}

/// What went wrong loading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Source(#[from] LayerError),
    #[error("--config-dir {path}: not found")]
    DirNotFound { path: PathBuf },
    #[error("--config-dir {path}: cannot list: {source}")]
    ReadDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("environment variable {var}: value is not valid UTF-8")]
    EnvNotUnicode { var: String },
    #[error("{}", InvalidValue::list(.0))]
    InvalidValues(Vec<InvalidValue>),
    #[error("building the configuration: {0}")]
    Build(Box<figment::Error>),
}

/// An option whose effective value does not fit its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidValue {
    /// Where the value was written (`path:line` or `env VAR`).
    pub origin: String,
    pub section: String,
    pub key: String,
    /// The value as written.
    pub value: String,
    /// What was expected.
    pub problem: String,
}

impl fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: [{}] {} = {:?}: {}",
            self.origin, self.section, self.key, self.value, self.problem
        )
    }
}

impl InvalidValue {
    fn list(all: &[InvalidValue]) -> String {
        all.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Where an option's effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueOrigin {
    Default,
    Written(Origin),
}

impl fmt::Display for ValueOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueOrigin::Default => f.write_str("default"),
            ValueOrigin::Written(o) => o.fmt(f),
        }
    }
}

/// One option's effective value and its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionProvenance {
    pub section: &'static str,
    pub key: &'static str,
    /// The effective value as it would be written in an INI file (empty: unset).
    pub value: String,
    pub origin: ValueOrigin,
}

/// An option of another oslo library: accepted, recorded, no effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoEffectOption {
    pub section: String,
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// The effective configuration and what loading it found.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: AgentConfig,
    /// Unknown sections and options, deprecated spellings: the agent runs anyway.
    pub warnings: Vec<String>,
    /// Every option, in [`schema::OPTIONS`] order, with where its value came from.
    pub provenance: Vec<OptionProvenance>,
    /// Options of oslo.log, oslo.privsep, oslo.concurrency found in the sources (last value
    /// of each), which the agent accepts without effect.
    pub no_effect: Vec<NoEffectOption>,
    /// The files read, in precedence order.
    pub files: Vec<PathBuf>,
}

impl LoadedConfig {
    /// Where `[section] key` got its value.
    pub fn origin(&self, section: &str, key: &str) -> Option<&ValueOrigin> {
        self.provenance
            .iter()
            .find(|p| p.section == section && p.key == key)
            .map(|p| &p.origin)
    }
}

/// Load from the sources and the process environment.
pub fn load(sources: &ConfigSources) -> Result<LoadedConfig, ConfigError> {
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        let wanted = k.starts_with(ENV_PREFIX)
            || k.starts_with(OSLO_ENV_PREFIX)
            || matches!(k, "HOME" | "SNAP" | "SNAP_COMMON");
        if !wanted {
            continue;
        }
        let v = v
            .into_string()
            .map_err(|_| ConfigError::EnvNotUnicode { var: k.to_owned() })?;
        env.push((k.to_owned(), v));
    }
    load_with_env(sources, env)
}

/// Load from the sources and the given environment (`HOME`, `SNAP` and `SNAP_COMMON` are used
/// for oslo's default search and `~`).
pub fn load_with_env<I, K, V>(sources: &ConfigSources, env: I) -> Result<LoadedConfig, ConfigError>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
        .collect();
    let files = files_to_read(sources, &env)?;
    let mut layers = Vec::with_capacity(files.len() + 2);
    for file in &files {
        layers.push(if file.extension().is_some_and(|e| e == "toml") {
            Layer::from_toml_file(file)?
        } else {
            Layer::from_ini_file(file)?
        });
    }
    let vars = || env.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    layers.push(Layer::from_env(vars(), OSLO_ENV_PREFIX, false));
    layers.push(Layer::from_env(vars(), ENV_PREFIX, true));
    build(layers, files)
}

/// The files to read, in precedence order: the given files (or oslo's default ones), then
/// the files of the given dirs (or of oslo's default dirs).
fn files_to_read(
    sources: &ConfigSources,
    env: &[(String, String)],
) -> Result<Vec<PathBuf>, ConfigError> {
    let get = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
    };
    let (default_files, default_dirs) = if sources.oslo_default_search {
        oslo_default_locations(
            get("HOME").as_deref(),
            Path::new("/etc"),
            get("SNAP").as_deref(),
            get("SNAP_COMMON").as_deref(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    // oslo expands `~` in the paths it is given (`--config-file=~/x.conf` escapes the shell).
    let home = get("HOME");
    let expand = |p: &PathBuf| match (p.strip_prefix("~"), &home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => p.clone(),
    };
    let mut files = if sources.config_files.is_empty() {
        default_files
    } else {
        sources.config_files.iter().map(expand).collect()
    };
    if sources.config_dirs.is_empty() {
        // Default dirs are skipped when missing; given ones must exist (as in oslo).
        for dir in &default_dirs {
            files.extend(dir_files(dir)?);
        }
    } else {
        for dir in sources.config_dirs.iter().map(expand) {
            if !dir.is_dir() {
                return Err(ConfigError::DirNotFound { path: dir });
            }
            files.extend(dir_files(&dir)?);
        }
    }
    Ok(files)
}

/// Layer the sources with figment, check each option's effective value, extract.
fn build(layers: Vec<Layer>, files: Vec<PathBuf>) -> Result<LoadedConfig, ConfigError> {
    let raw = layers
        .iter()
        .fold(Figment::new(), |figment, layer| figment.merge(layer));

    // Serializing plain structs with string keys cannot fail.
    let defaults = serde_json::to_value(AgentConfig::default()).unwrap_or_default();
    let mut resolver = Resolver::new(&raw, defaults);
    let mut typed = Dict::new();
    let mut invalid = Vec::new();
    let mut origins = Vec::with_capacity(schema::OPTIONS.len());
    for spec in schema::OPTIONS {
        let path = format!("{}.{}", spec.section, spec.name);
        let origin = raw
            .find_metadata(&path)
            .and_then(|meta| written_origin(&layers, &meta.name, spec))
            .map_or(ValueOrigin::Default, ValueOrigin::Written);
        if let Ok(value) = raw.find_value(&path) {
            match resolver.typed(spec) {
                Ok(Some(v)) => set(&mut typed, spec, v),
                Ok(None) => {}
                Err(problem) => invalid.push(InvalidValue {
                    origin: origin.to_string(),
                    section: spec.section.to_owned(),
                    key: spec.name.to_owned(),
                    value: value::display_raw(&value),
                    problem,
                }),
            }
        }
        origins.push((spec, origin));
    }
    if !invalid.is_empty() {
        return Err(ConfigError::InvalidValues(invalid));
    }

    let config: AgentConfig = Figment::from(Serialized::defaults(AgentConfig::default()))
        .merge(Serialized::defaults(typed))
        .extract()
        .map_err(|e| ConfigError::Build(Box::new(e)))?;

    let effective = serde_json::to_value(&config).unwrap_or_default();
    let provenance = origins
        .into_iter()
        .map(|(spec, origin)| OptionProvenance {
            section: spec.section,
            key: spec.name,
            value: ini_text(&effective[spec.section][spec.name]),
            origin,
        })
        .collect();

    Ok(LoadedConfig {
        config,
        no_effect: last_no_effect_values(&layers),
        warnings: layers.into_iter().flat_map(|l| l.warnings).collect(),
        provenance,
        files,
    })
}

/// The no-effect options set in the layers, each with its last value.
fn last_no_effect_values(layers: &[Layer]) -> Vec<NoEffectOption> {
    let mut out: Vec<NoEffectOption> = Vec::new();
    for w in layers.iter().flat_map(|l| l.no_effect.iter()) {
        out.retain(|n| !(n.section == w.section && n.key == w.key));
        out.push(NoEffectOption {
            section: w.section.clone(),
            key: w.key.clone(),
            value: value::display_raw(&w.value),
            origin: w.origin.clone(),
        });
    }
    out
}

/// The exact place a value came from: figment names the source, the layer knows the line.
fn written_origin(layers: &[Layer], source_name: &str, spec: &OptSpec) -> Option<Origin> {
    let key = (spec.section.to_owned(), spec.name.to_owned());
    layers
        .iter()
        .rev()
        .filter(|l| l.name == source_name)
        .find_map(|l| l.values.get(&key))
        .map(|w: &Written| w.origin.clone())
}

fn set(typed: &mut Dict, spec: &OptSpec, value: Value) {
    let section = typed
        .entry(spec.section.to_owned())
        .or_insert_with(|| Value::from(Dict::new()));
    if let Value::Dict(_, dict) = section {
        dict.insert(spec.name.to_owned(), value);
    }
}

/// A value as an INI file would spell it: lists comma-separated, unset empty.
fn ini_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(ini_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// oslo's default files and dirs (`find_config_files` / `find_config_dirs` with
/// project `bgp-agent`, prog `ovn-bgp-agent`): for each of `bgp-agent.conf` and
/// `ovn-bgp-agent.conf` (and the `.conf.d` dirs), the first that exists in `~/.bgp-agent/`,
/// `~/`, `/etc/bgp-agent/`, `/etc/`, `$SNAP_COMMON/etc/bgp-agent/`, `$SNAP/etc/bgp-agent/`.
pub fn oslo_default_locations(
    home: Option<&Path>,
    etc: &Path,
    snap: Option<&Path>,
    snap_common: Option<&Path>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut search: Vec<PathBuf> = Vec::new();
    if let Some(home) = home {
        search.push(home.join(format!(".{PROJECT}")));
        search.push(home.to_owned());
    }
    search.push(etc.join(PROJECT));
    search.push(etc.to_owned());
    if let (Some(snap), Some(snap_common)) = (snap, snap_common) {
        search.push(snap_common.join("etc").join(PROJECT));
        search.push(snap.join("etc").join(PROJECT));
    }
    let first = |name: String, want_dir: bool| {
        search
            .iter()
            .map(|d| d.join(&name))
            .find(|p| if want_dir { p.is_dir() } else { p.exists() })
    };
    let files = [PROJECT, PROG]
        .iter()
        .filter_map(|n| first(format!("{n}.conf"), false))
        .collect();
    let dirs = [PROJECT, PROG]
        .iter()
        .filter_map(|n| first(format!("{n}.conf.d"), true))
        .collect();
    (files, dirs)
}

/// A config dir's `*.conf` and `*.toml` files in name order (like oslo's sorted glob, which
/// skips dot files).
fn dir_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read_err = |source| ConfigError::ReadDir {
        path: dir.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.starts_with('.') && (name.ends_with(".conf") || name.ends_with(".toml")) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
