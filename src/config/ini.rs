//! The INI dialect of oslo.config (`oslo_config/iniparser.py`), with the line of every assignment.
//!
//! Upstream configuration files are read by oslo's own line parser, whose rules differ from
//! the usual INI crates (rust-ini treats `\` at line end as a continuation and indented lines
//! as keys; none report line numbers), so the agent reads them with the same rules:
//!
//! - `key = value` or `key: value`; the separator is whichever of `=` and `:` comes first, so
//!   `ovsdb_connection = unix:/run/db.sock` keeps its colon;
//! - key and value are trimmed; a value wholly enclosed in matching `"` or `'` loses them;
//! - `#` and `;` start a comment only at the start of a line: `a = b # c` has the value `b # c`;
//! - an indented line continues the previous value (joined with `\n`); a blank line or any
//!   unindented line ends it; an indented line with no value to continue is an error;
//! - a key repeated in one section keeps every value, in order (the last one wins for every
//!   option the agent has: none is multi-valued);
//! - section names are kept as written (the caller applies oslo's case rules).

/// One `key = value` assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IniAssignment {
    /// Section name as written between the brackets.
    pub section: String,
    pub key: String,
    pub value: String,
    /// 1-based line of the key.
    pub line: usize,
}

/// A section header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IniSection {
    pub name: String,
    pub line: usize,
}

/// A parsed file: its sections and assignments in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IniDocument {
    pub sections: Vec<IniSection>,
    pub assignments: Vec<IniAssignment>,
}

/// A line oslo.config would refuse too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}: {text:?}")]
pub struct IniSyntaxError {
    pub line: usize,
    pub problem: &'static str,
    pub text: String,
}

/// An assignment being read (it may still get continuation lines).
struct Pending {
    key: String,
    lines: Vec<String>,
    line: usize,
}

/// Parse `text` with oslo.config's rules.
pub fn parse(text: &str) -> Result<IniDocument, IniSyntaxError> {
    let mut doc = IniDocument::default();
    let mut section: Option<String> = None;
    let mut pending: Option<Pending> = None;

    for (index, raw) in text.lines().enumerate() {
        let lineno = index + 1;
        let line = raw.trim_end();
        let err = |problem| IniSyntaxError {
            line: lineno,
            problem,
            text: line.to_owned(),
        };

        if line.is_empty() {
            // A blank line ends a multi-line value.
            flush(&mut doc, section.as_deref(), pending.take())?;
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match pending.as_mut() {
                Some(p) => p.lines.push(line.trim_start().to_owned()),
                None => return Err(err("unexpected continuation line")),
            }
            continue;
        }
        flush(&mut doc, section.as_deref(), pending.take())?;

        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(err("invalid section (must end with ])"));
            };
            if name.is_empty() {
                return Err(err("empty section name"));
            }
            doc.sections.push(IniSection {
                name: name.to_owned(),
                line: lineno,
            });
            section = Some(name.to_owned());
        } else if line.starts_with(['#', ';']) {
            // Comment.
        } else {
            let (key, value) = split_key_value(line).ok_or_else(|| err("no ':' or '=' found"))?;
            if key.is_empty() {
                return Err(err("key cannot be empty"));
            }
            if section.is_none() {
                return Err(err("section must be started before assignment"));
            }
            pending = Some(Pending {
                key: key.to_owned(),
                lines: vec![value],
                line: lineno,
            });
        }
    }
    flush(&mut doc, section.as_deref(), pending.take())?;
    Ok(doc)
}

fn flush(
    doc: &mut IniDocument,
    section: Option<&str>,
    pending: Option<Pending>,
) -> Result<(), IniSyntaxError> {
    let Some(p) = pending else { return Ok(()) };
    // `parse` refuses an assignment before any section, so `section` is set here.
    let section = section.ok_or_else(|| IniSyntaxError {
        line: p.line,
        problem: "section must be started before assignment",
        text: p.key.clone(),
    })?;
    doc.assignments.push(IniAssignment {
        section: section.to_owned(),
        key: p.key,
        value: p.lines.join("\n"),
        line: p.line,
    });
    Ok(())
}

/// Split at the first `=` or `:`; trim; drop one pair of enclosing quotes.
fn split_key_value(line: &str) -> Option<(&str, String)> {
    let sep = line.find(['=', ':'])?;
    let key = line[..sep].trim();
    let mut value = line[sep + 1..].trim();
    let bytes = value.as_bytes();
    if bytes.len() >= 2
        && (bytes[0] == b'"' || bytes[0] == b'\'')
        && bytes[0] == bytes[bytes.len() - 1]
    {
        value = &value[1..value.len() - 1];
    } else if value == "\"" || value == "'" {
        // oslo: value[0] == value[-1] also holds for a lone quote, which becomes empty.
        value = "";
    }
    Some((key, value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> IniAssignment {
        let doc = parse(text).expect("parses");
        assert_eq!(doc.assignments.len(), 1, "{doc:?}");
        doc.assignments[0].clone()
    }

    #[test]
    fn separator_is_the_first_of_equal_and_colon() {
        let a = one("[DEFAULT]\novsdb_connection = unix:/run/db.sock\n");
        assert_eq!(
            (a.key.as_str(), a.value.as_str()),
            ("ovsdb_connection", "unix:/run/db.sock")
        );
        let a = one("[DEFAULT]\nbgp_AS: 65000=x\n");
        assert_eq!((a.key.as_str(), a.value.as_str()), ("bgp_AS", "65000=x"));
    }

    #[test]
    fn inline_hash_is_part_of_the_value_and_quotes_are_stripped() {
        assert_eq!(
            one("[a]\nk = v # not a comment\n").value,
            "v # not a comment"
        );
        assert_eq!(one("[a]\nk = \"quoted # x\"\n").value, "quoted # x");
        assert_eq!(one("[a]\nk = 'x'\n").value, "x");
        assert_eq!(one("[a]\nk = \"x'\n").value, "\"x'");
        assert_eq!(one("[a]\nk =\n").value, "");
    }

    #[test]
    fn comments_only_at_line_start() {
        let doc = parse("# c\n; c\n[a]\n# k = 1\nk = 2\n").unwrap();
        assert_eq!(doc.assignments.len(), 1);
        assert_eq!(doc.assignments[0].line, 5);
    }

    #[test]
    fn continuation_lines_join_with_newline() {
        let doc = parse("[a]\nk = one\n  two\n\tthree\n\nj = x\n").unwrap();
        assert_eq!(doc.assignments[0].value, "one\ntwo\nthree");
        assert_eq!(doc.assignments[0].line, 2);
        assert_eq!(doc.assignments[1].line, 6);
    }

    #[test]
    fn duplicate_keys_are_all_kept_in_order() {
        let doc = parse("[a]\nk = 1\nk = 2\n").unwrap();
        let values: Vec<_> = doc.assignments.iter().map(|a| a.value.as_str()).collect();
        assert_eq!(values, ["1", "2"]);
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line() {
        for (text, line, problem) in [
            ("k = 1\n", 1, "section must be started before assignment"),
            ("[a]\n\n  x\n", 3, "unexpected continuation line"),
            ("[a\n", 1, "invalid section (must end with ])"),
            ("[]\n", 1, "empty section name"),
            ("[a]\njust words\n", 2, "no ':' or '=' found"),
            ("[a]\n= v\n", 2, "key cannot be empty"),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!((e.line, e.problem), (line, problem), "{text:?}");
        }
    }

    #[test]
    fn crlf_line_endings() {
        let a = one("[a]\r\nk = v\r\n");
        assert_eq!(a.value, "v");
    }
}
