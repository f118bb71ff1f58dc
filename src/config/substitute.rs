//! oslo.config's `$` references: a value may name another option, `$name`, `${name}` or
//! `${section.name}`; `$$` and `\$` are a literal `$`.
//!
//! As in oslo (`ConfigOpts._substitute`, a `string.Template` with dotted names, case-insensitive
//! pattern), a reference is replaced by the referenced option's effective value, itself
//! substituted and converted; an unqualified name is looked up in the value's own section, then
//! in `[DEFAULT]`; a `$` not followed by a name stays as written; a name that is no option is an
//! error. Values are written as Python's `str()` would (`True`, `['a', 'b']`, unset → empty).

use std::collections::HashMap;

use figment::Figment;
use figment::value::Value;

use super::schema::{self, OptSpec};
use super::value;

/// Resolves options' effective values, following `$` references.
pub struct Resolver<'a> {
    raw: &'a Figment,
    defaults: serde_json::Value,
    done: HashMap<(&'static str, &'static str), Result<Option<Value>, String>>,
    active: Vec<(&'static str, &'static str)>,
}

impl<'a> Resolver<'a> {
    /// `raw`: the layered sources; `defaults`: the default configuration as JSON.
    pub fn new(raw: &'a Figment, defaults: serde_json::Value) -> Self {
        Self {
            raw,
            defaults,
            done: HashMap::new(),
            active: Vec::new(),
        }
    }

    /// The option's effective value converted to its type (`None`: unset, the default applies),
    /// or what is wrong with it.
    pub fn typed(&mut self, spec: &'static OptSpec) -> Result<Option<Value>, String> {
        let key = (spec.section, spec.name);
        if let Some(done) = self.done.get(&key) {
            return done.clone();
        }
        if self.active.contains(&key) {
            return Err(format!(
                "circular $ reference through [{}] {}",
                spec.section, spec.name
            ));
        }
        self.active.push(key);
        let result = match self
            .raw
            .find_value(&format!("{}.{}", spec.section, spec.name))
        {
            Err(_) => Ok(None),
            Ok(Value::String(tag, s)) if s.contains('$') => self
                .substitute(spec.section, &s)
                .and_then(|t| value::convert(spec, &Value::String(tag, t))),
            Ok(v) => value::convert(spec, &v),
        };
        self.active.pop();
        self.done.insert(key, result.clone());
        result
    }

    /// Replace the `$` references in `text`, a value of `section`.
    fn substitute(&mut self, section: &str, text: &str) -> Result<String, String> {
        let text = text.replace("\\$", "$$");
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(tail) = after.strip_prefix('$') {
                out.push('$');
                rest = tail;
            } else if let Some(inner) = after.strip_prefix('{')
                && let Some(end) = inner.find('}')
                && is_name(&inner[..end])
            {
                out.push_str(&self.reference(section, &inner[..end])?);
                rest = &inner[end + 1..];
            } else {
                let len = name_len(after);
                if len == 0 {
                    out.push('$');
                    rest = after;
                } else {
                    out.push_str(&self.reference(section, &after[..len])?);
                    rest = &after[len..];
                }
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    fn reference(&mut self, section: &str, name: &str) -> Result<String, String> {
        let spec = match name.split_once('.') {
            Some((group, option)) => schema::find(&schema::normalize_section(group), option),
            None => schema::find(section, name).or_else(|| schema::find("DEFAULT", name)),
        }
        .ok_or_else(|| format!("${name} names no option the agent has"))?;
        match self.typed(spec) {
            Ok(Some(v)) => Ok(python_str_value(&v)),
            Ok(None) => Ok(python_str_json(&self.defaults[spec.section][spec.name])),
            Err(problem) => Err(format!(
                "${name}: [{}] {} is invalid: {problem}",
                spec.section, spec.name
            )),
        }
    }
}

/// Python `string.Template` name with oslo's dotted `idpattern` `[_a-z][._a-z0-9]*` (any case).
fn name_len(s: &str) -> usize {
    let b = s.as_bytes();
    if b.first()
        .is_none_or(|c| !(c.is_ascii_alphabetic() || *c == b'_'))
    {
        return 0;
    }
    b.iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.'))
        .unwrap_or(b.len())
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && name_len(s) == s.len()
}

fn python_str_value(v: &Value) -> String {
    match v {
        Value::Bool(_, b) => python_bool(*b).to_owned(),
        Value::Array(_, items) => python_list(items.iter().map(value::display_raw)),
        other => value::display_raw(other),
    }
}

fn python_str_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::Bool(b) => python_bool(*b).to_owned(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => python_list(items.iter().map(python_str_json)),
        other => other.to_string(),
    }
}

fn python_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

fn python_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.map(|i| format!("'{i}'")).collect();
    format!("[{}]", items.join(", "))
}
