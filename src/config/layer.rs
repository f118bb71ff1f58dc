//! One configuration source (an INI file, a TOML file, the environment) read into the agent's
//! sections and option names, and offered to figment as a [`Provider`].
//!
//! Each layer applies oslo's per-source rules before figment layers them: section names are
//! case-insensitive except `DEFAULT`; the last assignment of a key in a file wins; a
//! `[DEFAULT]` spelling of an `[ovn]` option counts unless the same file sets it in `[ovn]`.
//! Every value keeps where it was written (file and line, or environment variable), which the
//! provider's metadata interpolates for figment and `check-config`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use figment::value::{Dict, Map, Value};
use figment::{Metadata, Profile, Provider, Source};

use super::ini;
use super::schema::{self, OptSpec};

/// Where a value was written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    File { path: PathBuf, line: Option<usize> },
    Env { var: String },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File {
                path,
                line: Some(l),
            } => write!(f, "{}:{l}", path.display()),
            Origin::File { path, line: None } => write!(f, "{}", path.display()),
            Origin::Env { var } => write!(f, "env {var}"),
        }
    }
}

/// One value as written in a source.
#[derive(Debug, Clone)]
pub struct Written {
    /// Section as the agent names it (`DEFAULT` or lowercase).
    pub section: String,
    pub key: String,
    pub value: Value,
    pub origin: Origin,
}

/// A source read into the agent's option names.
#[derive(Debug, Clone)]
pub struct Layer {
    /// What figment calls this source: the file path or `environment`.
    pub name: String,
    pub file: Option<PathBuf>,
    /// Values of options the agent reads, by `(section, key)`.
    pub values: BTreeMap<(String, String), Written>,
    /// Options of other oslo libraries: accepted, no effect.
    pub no_effect: Vec<Written>,
    pub warnings: Vec<String>,
}

/// Errors reading one source.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{}: {}: {:?}", .source.line, .source.problem, .source.text)]
    IniSyntax {
        path: PathBuf,
        source: ini::IniSyntaxError,
    },
    #[error("{path}: invalid TOML: {message}")]
    TomlSyntax { path: PathBuf, message: String },
    #[error("{path}: [{section}] {key}: TOML sections hold only options, not tables")]
    TomlNested {
        path: PathBuf,
        section: String,
        key: String,
    },
    #[error("{path}: top-level key {key:?}: TOML options belong in a [section]")]
    TomlTopLevel { path: PathBuf, key: String },
}

impl Layer {
    fn new(name: String, file: Option<PathBuf>) -> Self {
        Self {
            name,
            file,
            values: BTreeMap::new(),
            no_effect: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Read an upstream-format INI file.
    pub fn from_ini_file(path: &Path) -> Result<Self, LayerError> {
        let text = read(path)?;
        let doc = ini::parse(&text).map_err(|source| LayerError::IniSyntax {
            path: path.to_owned(),
            source,
        })?;
        let mut layer = Layer::new(path.display().to_string(), Some(path.to_owned()));
        for s in &doc.sections {
            layer.check_section(
                &s.name,
                &Origin::File {
                    path: path.to_owned(),
                    line: Some(s.line),
                },
            );
        }
        let written = doc.assignments.into_iter().map(|a| Written {
            section: schema::normalize_section(&a.section),
            key: a.key,
            value: Value::from(a.value),
            origin: Origin::File {
                path: path.to_owned(),
                line: Some(a.line),
            },
        });
        layer.absorb(written);
        Ok(layer)
    }

    /// Read a TOML file with the same sections and option names.
    pub fn from_toml_file(path: &Path) -> Result<Self, LayerError> {
        let text = read(path)?;
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| LayerError::TomlSyntax {
                    path: path.to_owned(),
                    message: e.to_string().trim_end().to_owned(),
                })?;
        let mut layer = Layer::new(path.display().to_string(), Some(path.to_owned()));
        let lines = toml_key_lines(&text);
        let origin = |section: &str, key: Option<&str>| Origin::File {
            path: path.to_owned(),
            line: lines
                .get(&(section.to_owned(), key.map(str::to_owned)))
                .copied(),
        };
        let mut written = Vec::new();
        for (raw_section, body) in table {
            let toml::Value::Table(body) = body else {
                return Err(LayerError::TomlTopLevel {
                    path: path.to_owned(),
                    key: raw_section,
                });
            };
            layer.check_section(&raw_section, &origin(&raw_section, None));
            let section = schema::normalize_section(&raw_section);
            for (key, v) in body {
                let value = toml_to_value(&v).ok_or_else(|| LayerError::TomlNested {
                    path: path.to_owned(),
                    section: section.clone(),
                    key: key.clone(),
                })?;
                written.push(Written {
                    origin: origin(&raw_section, Some(&key)),
                    section: section.clone(),
                    key,
                    value,
                });
            }
        }
        layer.absorb(written.into_iter());
        Ok(layer)
    }

    /// Read `<prefix><SECTION>__<KEY>` variables. Section and key match case-insensitively.
    /// With `report_unknown`, a variable naming no option is a warning (the agent's own prefix);
    /// without, it is skipped (oslo's `OS_` prefix is shared with OpenStack clients).
    pub fn from_env<'a>(
        vars: impl Iterator<Item = (&'a str, &'a str)>,
        prefix: &str,
        report_unknown: bool,
    ) -> Self {
        let mut layer = Layer::new(format!("environment ({prefix}*)"), None);
        let mut written = Vec::new();
        for (var, value) in vars {
            let Some(rest) = var.strip_prefix(prefix) else {
                continue;
            };
            let origin = Origin::Env {
                var: var.to_owned(),
            };
            let Some((section, key)) = rest.split_once("__") else {
                if report_unknown {
                    layer.warnings.push(format!(
                        "{origin}: ignored: expected {prefix}<SECTION>__<OPTION>, e.g. {prefix}DEFAULT__BGP_AS"
                    ));
                }
                continue;
            };
            match resolve_env_name(section, key) {
                Some((section, key)) => written.push(Written {
                    section,
                    key,
                    value: Value::from(value.to_owned()),
                    origin,
                }),
                None if report_unknown => {
                    let hint = schema::suggest_option(&schema::normalize_section(section), key)
                        .map(|s| format!("; did you mean {s}?"))
                        .unwrap_or_default();
                    layer
                        .warnings
                        .push(format!("{origin}: ignored: names no known option{hint}"));
                }
                None => {}
            }
        }
        layer.absorb(written.into_iter());
        layer
    }

    fn check_section(&mut self, raw: &str, origin: &Origin) {
        let section = schema::normalize_section(raw);
        if schema::known_sections().contains(&section.as_str()) {
            return;
        }
        let hint = schema::suggest_section(raw)
            .map(|s| format!("; did you mean [{s}]?"))
            .unwrap_or_default();
        let case = if raw.eq_ignore_ascii_case("DEFAULT") {
            " (only [DEFAULT] in capitals is the default section)"
        } else {
            ""
        };
        self.warnings.push(format!(
            "{origin}: unknown section [{raw}]{case}, its options are ignored{hint}"
        ));
    }

    /// Sort values written in file order into options, no-effect options and warnings.
    fn absorb(&mut self, written: impl Iterator<Item = Written>) {
        let mut deprecated: Vec<(&'static OptSpec, Written)> = Vec::new();
        for w in written {
            if let Some(spec) = schema::find(&w.section, &w.key) {
                self.values
                    .insert((spec.section.to_owned(), spec.name.to_owned()), w);
            } else if w.section == "DEFAULT"
                && let Some(spec) = schema::find_deprecated_default(&w.key)
            {
                deprecated.retain(|(s, _)| s.name != spec.name);
                deprecated.push((spec, w));
            } else if let Some(spec) = schema::find_deprecated_name(&w.section, &w.key) {
                deprecated.retain(|(s, _)| s.name != spec.name);
                deprecated.push((spec, w));
            } else if schema::is_no_effect(&w.section, &w.key) {
                self.no_effect.push(w);
            } else if schema::known_sections().contains(&w.section.as_str()) {
                let hint = schema::suggest_option(&w.section, &w.key)
                    .map(|s| format!("; did you mean {s}?"))
                    .unwrap_or_default();
                self.warnings.push(format!(
                    "{}: unknown option [{}] {}, ignored{hint}",
                    w.origin, w.section, w.key
                ));
            }
            // Options of an unknown section were reported with the section.
        }
        for (spec, w) in deprecated {
            let key = (spec.section.to_owned(), spec.name.to_owned());
            if let Some(current) = self.values.get(&key) {
                self.warnings.push(format!(
                    "{}: [DEFAULT] {} is ignored: [{}] {} is set in the same source ({})",
                    w.origin, w.key, spec.section, spec.name, current.origin
                ));
            } else {
                self.warnings.push(format!(
                    "{}: [DEFAULT] {} is deprecated; use [{}] {}",
                    w.origin, w.key, spec.section, spec.name
                ));
                self.values.insert(
                    key,
                    Written {
                        section: spec.section.to_owned(),
                        key: spec.name.to_owned(),
                        ..w
                    },
                );
            }
        }
    }
}

/// The option a `SECTION__KEY` environment name stands for.
fn resolve_env_name(section: &str, key: &str) -> Option<(String, String)> {
    let section = if section.eq_ignore_ascii_case("DEFAULT") {
        "DEFAULT".to_owned()
    } else {
        section.to_lowercase()
    };
    if let Some(o) = schema::OPTIONS
        .iter()
        .find(|o| o.section == section && o.name.eq_ignore_ascii_case(key))
    {
        return Some((section, o.name.to_owned()));
    }
    if section == "DEFAULT"
        && let Some(o) = schema::OPTIONS
            .iter()
            .find(|o| o.deprecated_in_default && o.name.eq_ignore_ascii_case(key))
    {
        // Kept under [DEFAULT] so `absorb` applies the deprecated-group rule.
        return Some((section, o.name.to_owned()));
    }
    if let Some((_, old, _)) = schema::DEPRECATED_NAMES
        .iter()
        .find(|(s, old, _)| *s == section && old.eq_ignore_ascii_case(key))
    {
        // Kept under its old name so `absorb` warns and applies it.
        return Some((section, (*old).to_owned()));
    }
    schema::NO_EFFECT
        .iter()
        .filter(|(s, _)| *s == section)
        .flat_map(|(_, names)| names.iter())
        .find(|n| n.eq_ignore_ascii_case(key))
        .map(|n| (section.clone(), (*n).to_owned()))
}

fn read(path: &Path) -> Result<String, LayerError> {
    std::fs::read_to_string(path).map_err(|source| LayerError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The line of each section header `(section, None)` and key `(section, Some(key))` of a
/// TOML document (empty if it does not parse: the caller reports that).
fn toml_key_lines(text: &str) -> HashMap<(String, Option<String>), usize> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let mut lines = HashMap::new();
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return lines;
    };
    for (section, body) in doc.get_ref() {
        let name = section.get_ref().to_string();
        lines.insert((name.clone(), None), line_of(section.span().start));
        if let toml::de::DeValue::Table(body) = body.get_ref() {
            for (key, _) in body {
                lines.insert(
                    (name.clone(), Some(key.get_ref().to_string())),
                    line_of(key.span().start),
                );
            }
        }
    }
    lines
}

/// A TOML scalar or array as a figment value; `None` for a nested table.
fn toml_to_value(v: &toml::Value) -> Option<Value> {
    Some(match v {
        toml::Value::String(s) => Value::from(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::from(*b),
        toml::Value::Datetime(d) => Value::from(d.to_string()),
        toml::Value::Array(items) => Value::from(
            items
                .iter()
                .map(toml_to_value)
                .collect::<Option<Vec<_>>>()?,
        ),
        toml::Value::Table(_) => return None,
    })
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let origins: Arc<HashMap<String, String>> = Arc::new(
            self.values
                .iter()
                .map(|((s, k), w)| (format!("{s}.{k}"), w.origin.to_string()))
                .collect(),
        );
        let name = self.name.clone();
        let metadata = match &self.file {
            Some(path) => Metadata::from(name, Source::File(path.clone())),
            None => Metadata::named(name),
        };
        metadata.interpolater(move |_profile: &Profile, keys: &[&str]| {
            let key = keys.join(".");
            origins.get(&key).cloned().unwrap_or(key)
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut root = Dict::new();
        for ((section, key), w) in &self.values {
            let entry = root
                .entry(section.clone())
                .or_insert_with(|| Value::from(Dict::new()));
            if let Value::Dict(_, dict) = entry {
                dict.insert(key.clone(), w.value.clone());
            }
        }
        Ok(Profile::Default.collect(root))
    }
}
