//! A hand-written decoder for table-updates, the one bulky thing an OVSDB server sends.
//!
//! A first download of a large Southbound database is one JSON message of tens of megabytes
//! (70 MB for 100k Port_Binding rows). Going through serde costs a `deserialize_any` dispatch,
//! a visitor and a `SeqAccess` per atom; this decoder knows the grammar of table-updates
//! (RFC 7047 §4.1.6, the `update2` extension) and of OVSDB values (§5.1), so it walks the
//! bytes once, borrows every string without escapes straight from the input, and writes
//! [`Datum`]s in their compact form. Columns and tables the client did not ask for are skipped
//! without allocating. Any malformed input is an error naming the byte offset; nothing is
//! half-applied because the caller only applies a fully decoded message.
//!
//! Cardinality is enforced as the bytes are read: a set or map with more elements than its
//! column's schema `max` (twice that in a `modify`, which carries a difference) stops being
//! decoded at the first element too many, and that row is rejected ([`RejectedRow`]: the row
//! leaves the replica, the rest of the message applies). A hostile server's million-element set
//! therefore costs no allocation beyond the schema's bound.

// Unsafe code allowed in this file only: one `from_utf8_unchecked` on bytes the scanner already validated.
#![allow(unsafe_code)]

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use super::framing::find_quote_or_backslash;
use super::monitor::{RowChange, TableUpdate, UpdateFormat};
use super::replica::TableMeta;
use super::schema::{AtomicType, ColumnType};
use super::types::{Atom, Datum, Interner, Uuid};

/// Strings up to this length are interned wherever they appear; map keys always are.
/// (Keys such as `neutron:device_owner` and short values such as `""` or `localnet` repeat in
/// every row; sharing them saves an allocation per occurrence and memory in the replica.)
pub(crate) const INTERN_MAX_LEN: usize = 16;

/// Why a message could not be decoded, with the byte offset where decoding stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub reason: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

impl std::error::Error for DecodeError {}

type Result<T> = std::result::Result<T, DecodeError>;

/// A row left out of a decoded message because one of its values breaks the schema's bounds;
/// it is delivered as a delete, so the replica never holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRow {
    pub table: Arc<str>,
    pub uuid: Uuid,
    pub reason: String,
}

impl std::fmt::Display for RejectedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "row {} of {} rejected: {}",
            self.uuid, self.table, self.reason
        )
    }
}

/// A `monitor_cond_since` reply: `[found, last-txn-id, table-updates2]`.
pub struct CondSinceReply {
    pub found: bool,
    pub last_txn_id: Uuid,
    pub updates: Vec<TableUpdate>,
    /// Rows left out (see [`RejectedRow`]).
    pub rejected: Vec<RejectedRow>,
}

/// Decodes a table-updates object (`null` counts as no updates). Rejected rows are logged.
pub fn table_updates(
    text: &str,
    metas: &[Arc<TableMeta>],
    format: UpdateFormat,
    interner: Option<&RefCell<Interner>>,
) -> Result<Vec<TableUpdate>> {
    let (out, rejected) = table_updates_with_rejected(text, metas, format, interner)?;
    for r in rejected {
        tracing::warn!("{r}");
    }
    Ok(out)
}

/// Decodes a table-updates object and returns the rows it rejected (see [`RejectedRow`]).
pub fn table_updates_with_rejected(
    text: &str,
    metas: &[Arc<TableMeta>],
    format: UpdateFormat,
    interner: Option<&RefCell<Interner>>,
) -> Result<(Vec<TableUpdate>, Vec<RejectedRow>)> {
    let mut p = Parser::new(text, interner);
    let out = p.updates(metas, format)?;
    p.end()?;
    Ok((out, p.rejected))
}

/// Decodes a `monitor_cond_since` reply in one pass.
pub fn cond_since_reply(
    text: &str,
    metas: &[Arc<TableMeta>],
    interner: Option<&RefCell<Interner>>,
) -> Result<CondSinceReply> {
    let mut p = Parser::new(text, interner);
    p.expect(
        b'[',
        "monitor_cond_since reply is not [found, txn-id, updates]",
    )?;
    let found = p.boolean()?;
    p.expect(
        b',',
        "monitor_cond_since reply is not [found, txn-id, updates]",
    )?;
    let last_txn_id = p.uuid_str()?;
    p.expect(
        b',',
        "monitor_cond_since reply is not [found, txn-id, updates]",
    )?;
    let updates = p.updates(metas, UpdateFormat::V2)?;
    p.expect(
        b']',
        "monitor_cond_since reply is not [found, txn-id, updates]",
    )?;
    p.end()?;
    Ok(CondSinceReply {
        found,
        last_txn_id,
        updates,
        rejected: p.rejected,
    })
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    interner: Option<&'a RefCell<Interner>>,
    /// Reused while a set or map is read, so each one is allocated once at its exact size.
    atoms: Vec<Atom>,
    pairs: Vec<(Atom, Atom)>,
    /// Unescaped copy of the last string that had escapes.
    unescaped: String,
    /// The column being decoded (set by `column`), for `memo`.
    col: usize,
    /// The strings last seen at each (column, pair position, key or value) of a map. Rows of a
    /// table carry the same `external_ids`/`options` keys in the same order, so a key is
    /// usually found here by one comparison, without hashing it for the interner. Allocated
    /// on first use, so a small message without maps does not pay for it.
    memo: Vec<Option<Arc<str>>>,
    /// Most elements the set or map being decoded may have (its column's schema bound).
    max_elements: Option<usize>,
    /// Set when the error being returned concerns one row only (a cardinality violation):
    /// [`Parser::rows`] then skips that row instead of failing the message.
    row_error: bool,
    rejected: Vec<RejectedRow>,
}

/// Columns and pair positions `Parser::memo` covers (more share slots, which is only slower).
const MEMO_COLUMNS: usize = 32;
const MEMO_PAIRS: usize = 16;

/// Whether a string goes through the interner.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Key,
    Value,
}

impl Role {
    /// Whether `s` in this role goes through the interner (see [`INTERN_MAX_LEN`]).
    fn shares(self, s: &str) -> bool {
        self == Role::Key || s.len() <= INTERN_MAX_LEN
    }
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, interner: Option<&'a RefCell<Interner>>) -> Self {
        Parser {
            b: text.as_bytes(),
            i: 0,
            interner,
            atoms: Vec::new(),
            pairs: Vec::new(),
            unescaped: String::new(),
            col: 0,
            memo: Vec::new(),
            max_elements: None,
            row_error: false,
            rejected: Vec::new(),
        }
    }

    /// Refuses a set or map element beyond the column's bound, before decoding it.
    #[inline]
    fn check_room(&mut self, len: usize) -> Result<()> {
        match self.max_elements {
            Some(max) if len >= max => {
                self.row_error = true;
                self.err(format!(
                    "more than {max} elements in a set or map (the schema's bound)"
                ))
            }
            _ => Ok(()),
        }
    }

    fn err<T>(&self, reason: impl Into<String>) -> Result<T> {
        Err(DecodeError {
            offset: self.i,
            reason: reason.into(),
        })
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.i += 1;
        }
    }

    /// The next non-blank byte, not consumed.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    #[inline]
    fn expect(&mut self, c: u8, what: &str) -> Result<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(format!("{what}: expected '{}'", c as char))
        }
    }

    /// After the last member of an object or array: `true` if another follows.
    #[inline]
    fn more(&mut self, close: u8) -> Result<bool> {
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => self.err(format!("expected ',' or '{}'", close as char)),
        }
    }

    /// Opens an object or array: `false` if it is empty (and already closed).
    #[inline]
    fn open(&mut self, open: u8, close: u8, what: &str) -> Result<bool> {
        self.expect(open, what)?;
        if self.peek() == Some(close) {
            self.i += 1;
            return Ok(false);
        }
        Ok(true)
    }

    fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.err("trailing characters after the value"),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    fn boolean(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b't') => self.literal(b"true").map(|_| true),
            Some(b'f') => self.literal(b"false").map(|_| false),
            _ => self.err("expected a boolean"),
        }
    }

    /// A string, borrowed from the input unless it has escapes.
    fn string(&mut self) -> Result<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string");
        }
        self.i += 1;
        let start = self.i;
        let Some(off) = find_quote_or_backslash(&self.b[start..]) else {
            return self.err("unterminated string");
        };
        let end = start + off;
        if self.b[end] == b'"' {
            self.i = end + 1;
            return Ok(Cow::Borrowed(self.slice(start, end)));
        }
        self.i = end;
        self.unescape_from(start)
    }

    /// `&input[start..end]` as text. The input is a `&str` and both ends sit next to an ASCII
    /// quote or backslash, so they are character boundaries.
    #[inline]
    fn slice(&self, start: usize, end: usize) -> &'a str {
        let b: &'a [u8] = self.b;
        // SAFETY: `b` came from a `&str` and `start`/`end` are on character boundaries (see
        // above), so the bytes are valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(&b[start..end]) }
    }

    /// The slow path of [`Parser::string`]: `self.i` is at the first backslash.
    fn unescape_from(&mut self, start: usize) -> Result<Cow<'a, str>> {
        let mut out = std::mem::take(&mut self.unescaped);
        out.clear();
        out.push_str(self.slice(start, self.i));
        loop {
            let Some(off) = find_quote_or_backslash(&self.b[self.i..]) else {
                return self.err("unterminated string");
            };
            let at = self.i + off;
            out.push_str(self.slice(self.i, at));
            self.i = at + 1;
            if self.b[at] == b'"' {
                let s = Cow::Owned(out.clone());
                self.unescaped = out;
                return Ok(s);
            }
            let Some(&e) = self.b.get(self.i) else {
                return self.err("unterminated string");
            };
            self.i += 1;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let c = self.unicode_escape()?;
                    out.push(c);
                }
                _ => {
                    self.i -= 1;
                    return self.err("invalid escape in string");
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u16> {
        let Some(h) = self.b.get(self.i..self.i + 4) else {
            return self.err("truncated \\u escape");
        };
        let mut v = 0u16;
        for &c in h {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return self.err("invalid \\u escape"),
            };
            v = (v << 4) | d as u16;
        }
        self.i += 4;
        Ok(v)
    }

    /// After `\u`: one code point, combining a UTF-16 surrogate pair.
    fn unicode_escape(&mut self) -> Result<char> {
        let hi = self.hex4()?;
        let cp = match hi {
            0xD800..=0xDBFF => {
                if !self.b[self.i..].starts_with(b"\\u") {
                    return self.err("lone surrogate in \\u escape");
                }
                self.i += 2;
                let lo = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return self.err("invalid low surrogate in \\u escape");
                }
                0x10000 + (((hi as u32) - 0xD800) << 10) + ((lo as u32) - 0xDC00)
            }
            0xDC00..=0xDFFF => return self.err("lone surrogate in \\u escape"),
            _ => hi as u32,
        };
        match char::from_u32(cp) {
            Some(c) => Ok(c),
            None => self.err("invalid \\u escape"),
        }
    }

    fn uuid_str(&mut self) -> Result<Uuid> {
        let at = self.i;
        let s = self.string()?;
        match Uuid::parse(&s) {
            Some(u) => Ok(u),
            None => Err(DecodeError {
                offset: at,
                reason: format!("{s:?} is not a UUID"),
            }),
        }
    }

    /// A JSON number as an OVSDB integer or real.
    fn number(&mut self) -> Result<Atom> {
        let start = self.i;
        let neg = self.b.get(self.i) == Some(&b'-');
        if neg {
            self.i += 1;
        }
        let digits = self.i;
        let mut v: u64 = 0;
        let mut overflow = false;
        while let Some(&c) = self.b.get(self.i) {
            if !c.is_ascii_digit() {
                break;
            }
            match v
                .checked_mul(10)
                .and_then(|x| x.checked_add((c - b'0') as u64))
            {
                Some(x) => v = x,
                None => overflow = true,
            }
            self.i += 1;
        }
        if self.i == digits {
            return self.err("invalid number");
        }
        let is_real = matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E'));
        if is_real {
            while let Some(&c) = self.b.get(self.i) {
                if !matches!(c, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    break;
                }
                self.i += 1;
            }
        }
        if is_real || overflow {
            // Beyond 64 bits JSON numbers are reals, as serde_json reads them.
            return match self.slice(start, self.i).parse::<f64>() {
                Ok(r) if r.is_finite() => Ok(Atom::Real(r)),
                _ => Err(DecodeError {
                    offset: start,
                    reason: "invalid number".into(),
                }),
            };
        }
        if neg {
            if v > i64::MAX as u64 + 1 {
                return match self.slice(start, self.i).parse::<f64>() {
                    Ok(r) => Ok(Atom::Real(r)),
                    Err(_) => self.err("invalid number"),
                };
            }
            Ok(Atom::Integer((v as i64).wrapping_neg()))
        } else {
            match i64::try_from(v) {
                Ok(i) => Ok(Atom::Integer(i)),
                Err(_) => Err(DecodeError {
                    offset: start,
                    reason: format!("integer {v} out of range"),
                }),
            }
        }
    }

    /// Like [`Parser::shared`], for the `pos`-th pair of a map of the current column.
    fn memo_shared(&mut self, s: &str, pos: usize, role: Role) -> Arc<str> {
        let Some(interner) = self.interner.filter(|_| role.shares(s)) else {
            return Arc::from(s);
        };
        if self.memo.is_empty() {
            self.memo.resize(MEMO_COLUMNS * MEMO_PAIRS * 2, None);
        }
        let slot = ((self.col % MEMO_COLUMNS) * MEMO_PAIRS + pos % MEMO_PAIRS) * 2
            + usize::from(role == Role::Value);
        if let Some(a) = &self.memo[slot]
            && **a == *s
        {
            return a.clone();
        }
        let a = interner.borrow_mut().intern(s);
        self.memo[slot] = Some(a.clone());
        a
    }

    /// A map key or value atom, strings through [`Parser::memo_shared`].
    fn map_atom(&mut self, pos: usize, role: Role) -> Result<Atom> {
        if self.peek() == Some(b'"') {
            let s = self.string()?;
            return Ok(Atom::String(self.memo_shared(&s, pos, role)));
        }
        self.atom(role)
    }

    fn shared(&self, s: &str, role: Role) -> Arc<str> {
        match self.interner {
            Some(i) if role.shares(s) => i.borrow_mut().intern(s),
            _ => Arc::from(s),
        }
    }

    /// One atom: a string, number, boolean, `["uuid", …]` or `["named-uuid", …]`.
    fn atom(&mut self, role: Role) -> Result<Atom> {
        match self.peek() {
            Some(b'"') => {
                let s = self.string()?;
                Ok(Atom::String(self.shared(&s, role)))
            }
            Some(b'[') => match self.tagged(false)? {
                Datum::Atom(a) => Ok(a),
                _ => unreachable!("tagged() returns only atoms when collections are not allowed"),
            },
            Some(b't' | b'f') => Ok(Atom::Boolean(self.boolean()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.err("expected an OVSDB atom, set or map"),
        }
    }

    /// One column value: an atom, `["set", […]]` or `["map", [[k, v], …]]`.
    #[inline]
    fn datum(&mut self) -> Result<Datum> {
        if self.peek() == Some(b'[') {
            return self.tagged(true);
        }
        Ok(Datum::Atom(self.atom(Role::Value)?))
    }

    /// A `[tag, …]` value, `self.i` at the `[`; sets and maps only where `collections`.
    fn tagged(&mut self, collections: bool) -> Result<Datum> {
        let at = self.i;
        self.i += 1;
        let tag = self.string()?;
        let d = match &*tag {
            "uuid" => {
                self.expect(b',', "[\"uuid\"] without a value")?;
                Datum::Atom(Atom::Uuid(self.uuid_str()?))
            }
            "named-uuid" => {
                self.expect(b',', "[\"named-uuid\"] without a name")?;
                let n = self.string()?;
                Datum::Atom(Atom::NamedUuid(Arc::from(&*n)))
            }
            "set" if collections => {
                self.expect(b',', "[\"set\"] without elements")?;
                let mut atoms = std::mem::take(&mut self.atoms);
                atoms.clear();
                let r = self.set_elements(&mut atoms);
                let d = r.map(|()| match atoms.len() {
                    1 => Datum::Atom(atoms.pop().expect("one element")),
                    _ => Datum::Set(atoms.drain(..).collect()),
                });
                atoms.clear();
                self.atoms = atoms;
                d?
            }
            "map" if collections => {
                self.expect(b',', "[\"map\"] without pairs")?;
                let mut pairs = std::mem::take(&mut self.pairs);
                pairs.clear();
                let r = self.map_pairs(&mut pairs);
                let d = r.map(|()| Datum::Map(pairs.drain(..).collect()));
                pairs.clear();
                self.pairs = pairs;
                d?
            }
            "set" | "map" => {
                return Err(DecodeError {
                    offset: at,
                    reason: "set or map where an atom was expected".into(),
                });
            }
            other => {
                return Err(DecodeError {
                    offset: at,
                    reason: format!("unknown OVSDB tag {other:?}"),
                });
            }
        };
        self.expect(b']', "OVSDB tagged value with more than 2 elements")?;
        Ok(d)
    }

    fn set_elements(&mut self, out: &mut Vec<Atom>) -> Result<()> {
        if !self.open(b'[', b']', "[\"set\"] without elements")? {
            return Ok(());
        }
        loop {
            self.check_room(out.len())?;
            out.push(self.atom(Role::Value)?);
            if !self.more(b']')? {
                return Ok(());
            }
        }
    }

    fn map_pairs(&mut self, out: &mut Vec<(Atom, Atom)>) -> Result<()> {
        if !self.open(b'[', b']', "[\"map\"] without pairs")? {
            return Ok(());
        }
        loop {
            let pos = out.len();
            self.check_room(pos)?;
            self.expect(b'[', "map pair is not [key, value]")?;
            let k = self.map_atom(pos, Role::Key)?;
            self.expect(b',', "map pair is not [key, value]")?;
            let v = self.map_atom(pos, Role::Value)?;
            self.expect(b']', "map pair is not [key, value]")?;
            out.push((k, v));
            if !self.more(b']')? {
                return Ok(());
            }
        }
    }

    /// A column value, with integers turned into reals where the schema says real (JSON does
    /// not tell `1` from `1.0`). `diff`: the value is a `modify`'s difference, which may name
    /// every old element and every new one.
    #[inline]
    fn column(&mut self, meta: &TableMeta, idx: u16, diff: bool) -> Result<Datum> {
        let at = self.i;
        self.col = idx as usize;
        let ty = &meta.types[idx as usize];
        self.max_elements = ty.max.map(|max| {
            let max = usize::try_from(max).unwrap_or(usize::MAX);
            if diff { max.saturating_mul(2) } else { max }
        });
        let decoded = self.datum();
        self.max_elements = None;
        let mut d = decoded.map_err(|e| DecodeError {
            offset: e.offset,
            reason: if self.row_error {
                format!("column {}: {}", meta.columns[idx as usize], e.reason)
            } else {
                e.reason
            },
        })?;
        conform(&mut d, &meta.types[idx as usize]).map_err(|reason| DecodeError {
            offset: at,
            reason: format!("column {}: {reason}", meta.columns[idx as usize]),
        })?;
        Ok(d)
    }

    /// Skips any JSON value (a table or column the client did not ask for).
    fn skip_value(&mut self) -> Result<()> {
        let mut depth = 0usize;
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    loop {
                        let Some(off) = find_quote_or_backslash(&self.b[self.i..]) else {
                            return self.err("unterminated string");
                        };
                        self.i += off + 1;
                        if self.b[self.i - 1] == b'"' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                Some(b'{' | b'[') => {
                    self.i += 1;
                    depth += 1;
                    continue;
                }
                Some(b'}' | b']') if depth > 0 => {
                    self.i += 1;
                    depth -= 1;
                }
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                _ => return self.err("invalid JSON value"),
            }
            if depth == 0 {
                return Ok(());
            }
            // Inside a container: a separator or the close of the container follows.
            match self.peek() {
                Some(b',' | b':') => self.i += 1,
                Some(b'}' | b']') => {}
                _ => return self.err("expected ',' or a closing bracket"),
            }
        }
    }

    /// A table-updates object for `metas`.
    fn updates(
        &mut self,
        metas: &[Arc<TableMeta>],
        format: UpdateFormat,
    ) -> Result<Vec<TableUpdate>> {
        if self.peek() == Some(b'n') {
            self.literal(b"null")?;
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        if !self.open(b'{', b'}', "table-updates must be an object")? {
            return Ok(out);
        }
        loop {
            let name = self.string()?;
            self.expect(b':', "table-updates")?;
            match metas.iter().position(|m| *m.name == *name) {
                Some(table) => {
                    let rows = self.rows(&metas[table], format)?;
                    out.push(TableUpdate { table, rows });
                }
                None => self.skip_value()?,
            }
            if !self.more(b'}')? {
                return Ok(out);
            }
        }
    }

    /// `{uuid: row-update, …}` of one table.
    fn rows(&mut self, meta: &TableMeta, format: UpdateFormat) -> Result<Vec<(Uuid, RowChange)>> {
        let mut out = Vec::new();
        if !self.open(b'{', b'}', "table-update must be an object")? {
            return Ok(out);
        }
        loop {
            let uuid = self.uuid_str()?;
            self.expect(b':', "table-update")?;
            self.ws();
            let row_start = self.i;
            let change = match format {
                UpdateFormat::V2 => self.row_update2(meta),
                UpdateFormat::V1 => self.row_update1(meta),
            };
            let change = match change {
                Ok(change) => change,
                Err(e) if std::mem::take(&mut self.row_error) => {
                    // Only this row is bad: skip the rest of it without decoding, and make sure
                    // the replica does not keep an earlier version of it.
                    self.i = row_start;
                    self.skip_value()?;
                    self.rejected.push(RejectedRow {
                        table: meta.name.clone(),
                        uuid,
                        reason: e.to_string(),
                    });
                    RowChange::Delete
                }
                Err(e) => return Err(e),
            };
            out.push((uuid, change));
            if !self.more(b'}')? {
                return Ok(out);
            }
        }
    }

    /// `{"initial"|"insert"|"modify"|"delete": …}`.
    fn row_update2(&mut self, meta: &TableMeta) -> Result<RowChange> {
        let at = self.i;
        if !self.open(b'{', b'}', "row-update2 must be an object")? {
            return Err(DecodeError {
                offset: at,
                reason: "empty row-update2 object".into(),
            });
        }
        let mut change;
        loop {
            let kind_at = self.i;
            let kind = self.string()?;
            self.expect(b':', "row-update2")?;
            change = match &*kind {
                "initial" | "insert" => RowChange::Insert(self.full_row(meta)?),
                "modify" => RowChange::Diff(self.column_list(meta)?),
                "delete" => {
                    self.skip_value()?;
                    RowChange::Delete
                }
                other => {
                    return Err(DecodeError {
                        offset: kind_at,
                        reason: format!("unknown row-update2 member {other:?}"),
                    });
                }
            };
            if !self.more(b'}')? {
                break;
            }
        }
        Ok(change)
    }

    /// `{"old": …, "new": …}` (the `update` notification of plain `monitor`).
    fn row_update1(&mut self, meta: &TableMeta) -> Result<RowChange> {
        let mut has_old = false;
        let mut new = None;
        if self.open(b'{', b'}', "row-update must be an object")? {
            loop {
                let kind = self.string()?;
                self.expect(b':', "row-update")?;
                match &*kind {
                    "old" => {
                        self.skip_value()?;
                        has_old = true;
                    }
                    "new" => new = Some(self.full_row(meta)?),
                    _ => self.skip_value()?,
                }
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        Ok(match (has_old, new) {
            (_, None) => RowChange::Delete,
            (false, Some(cols)) => RowChange::Insert(cols),
            (true, Some(cols)) => RowChange::Replace(cols),
        })
    }

    /// A complete row: every monitored column, those not sent at their default.
    fn full_row(&mut self, meta: &TableMeta) -> Result<Box<[Datum]>> {
        let mut values: Box<[Datum]> = meta.defaults().into();
        if !self.open(b'{', b'}', "row must be an object")? {
            return Ok(values);
        }
        loop {
            let col = self.string()?;
            self.expect(b':', "row")?;
            match meta.column_index(&col) {
                Some(idx) => values[idx as usize] = self.column(meta, idx, false)?,
                None => self.skip_value()?,
            }
            if !self.more(b'}')? {
                return Ok(values);
            }
        }
    }

    /// The columns present in a `modify` (each a difference to apply, or a new value).
    fn column_list(&mut self, meta: &TableMeta) -> Result<Vec<(u16, Datum)>> {
        let mut out = Vec::new();
        if !self.open(b'{', b'}', "row must be an object")? {
            return Ok(out);
        }
        loop {
            let col = self.string()?;
            self.expect(b':', "row")?;
            match meta.column_index(&col) {
                Some(idx) => out.push((idx, self.column(meta, idx, true)?)),
                None => self.skip_value()?,
            }
            if !self.more(b'}')? {
                return Ok(out);
            }
        }
    }
}

/// Checks a decoded column value against the column's schema type, and turns integers into
/// reals where the column is real (JSON does not tell `1` from `1.0`). A real server never
/// sends a mistyped value; a broken or hostile one gets an error here rather than a replica
/// whose typed accessors silently return nothing.
fn conform(d: &mut Datum, ty: &ColumnType) -> std::result::Result<(), String> {
    fn check(a: &mut Atom, want: AtomicType) -> std::result::Result<(), String> {
        match (want, &*a) {
            (AtomicType::Integer, Atom::Integer(_))
            | (AtomicType::Real, Atom::Real(_))
            | (AtomicType::Boolean, Atom::Boolean(_))
            | (AtomicType::String, Atom::String(_))
            | (AtomicType::Uuid, Atom::Uuid(_)) => Ok(()),
            (AtomicType::Real, Atom::Integer(i)) => {
                *a = Atom::Real(*i as f64);
                Ok(())
            }
            (want, got) => Err(format!("expected {want:?}, got {got:?}")),
        }
    }
    match (d, ty.value) {
        (Datum::Atom(a), None) => check(a, ty.key),
        (Datum::Set(atoms), None) => atoms.iter_mut().try_for_each(|a| check(a, ty.key)),
        (Datum::Map(pairs), Some(value)) => pairs.iter_mut().try_for_each(|(k, v)| {
            check(k, ty.key)?;
            check(v, value)
        }),
        // An empty set stands for an empty map.
        (Datum::Set(atoms), Some(_)) if atoms.is_empty() => Ok(()),
        (Datum::Map(_), None) => Err("a map in a set column".into()),
        (_, Some(_)) => Err("a set or atom in a map column".into()),
    }
}

/// A member of a JSON-RPC message object: its name and the byte range of its value.
pub type Member<'a> = (Cow<'a, str>, std::ops::Range<usize>);

/// The members of a JSON-RPC message object. `containers` are the byte ranges of the members
/// whose values are objects or arrays, as the framer found them, so a large `result` is not
/// scanned a second time (a member missing from the list is scanned).
pub fn envelope_members<'a>(
    text: &'a str,
    containers: &[(usize, usize)],
) -> Result<Vec<Member<'a>>> {
    let mut p = Parser::new(text, None);
    let mut out = Vec::new();
    let mut known = containers.iter().peekable();
    if p.open(b'{', b'}', "a JSON-RPC message must be an object")? {
        loop {
            let name = p.string()?;
            p.expect(b':', "JSON-RPC message")?;
            p.ws();
            let start = p.i;
            while known.next_if(|(open, _)| *open < start).is_some() {}
            match known.peek() {
                Some(&&(open, close)) if open == start => {
                    p.i = close;
                    known.next();
                }
                _ => p.skip_value()?,
            }
            out.push((name, start..p.i));
            if !p.more(b'}')? {
                break;
            }
        }
    }
    p.end()?;
    Ok(out)
}

/// Decodes one [`Datum`] from JSON text (tests and tools; the client decodes whole updates).
pub fn datum(text: &str) -> Result<Datum> {
    let mut p = Parser::new(text, None);
    let d = p.datum()?;
    p.end()?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datums() {
        let d = datum(
            r#"["map",[["a","1"],["b",2],["c",["uuid","01234567-89ab-cdef-0123-456789abcdef"]]]]"#,
        )
        .unwrap();
        assert_eq!(d.pairs().len(), 3);
        assert_eq!(datum(r#"["set",[]]"#).unwrap(), Datum::empty());
        assert_eq!(datum(r#"["set",[5]]"#).unwrap(), Datum::from(5i64));
        assert_eq!(
            datum("-9223372036854775808").unwrap(),
            Datum::from(i64::MIN)
        );
        assert_eq!(datum("1.5e3").unwrap(), Datum::Atom(Atom::Real(1500.0)));
        assert_eq!(
            datum(r#""a\"b\\c\u00e9\ud83d\ude00""#).unwrap(),
            Datum::from("a\"b\\c\u{e9}\u{1f600}")
        );
        for bad in [
            r#"["set",[["map",[]]]]"#,
            r#"["bogus",1]"#,
            r#"["uuid","nope"]"#,
            r#""\ud800""#,
            r#""unterminated"#,
            "9223372036854775808",
            "[\"set\",[1,]]",
            "tru",
            "1 2",
        ] {
            assert!(datum(bad).is_err(), "{bad} accepted");
        }
    }

    /// A set or map beyond the schema's bound rejects its row only; a `modify` may carry twice
    /// the bound (every old element removed, every new one added).
    #[test]
    fn cardinality_is_enforced_per_row() {
        let set = |max| ColumnType {
            key: AtomicType::String,
            value: None,
            min: 0,
            max: Some(max),
        };
        let map = ColumnType {
            key: AtomicType::String,
            value: Some(AtomicType::String),
            min: 0,
            max: Some(2),
        };
        let meta = Arc::new(TableMeta::new(
            "T",
            vec![("tags".into(), set(2)), ("opts".into(), map)],
        ));
        let (a, b, c, d) = (
            "00000000-0000-0000-0000-00000000000a",
            "00000000-0000-0000-0000-00000000000b",
            "00000000-0000-0000-0000-00000000000c",
            "00000000-0000-0000-0000-00000000000d",
        );
        let text = format!(
            r#"{{"T":{{"{a}":{{"insert":{{"tags":["set",["1","2","3"]]}}}},
                 "{b}":{{"modify":{{"tags":["set",["1","2","3","4"]]}}}},
                 "{c}":{{"modify":{{"opts":["map",[["k1","v"],["k2","v"],["k3","v"],["k4","v"],["k5","v"]]]}}}},
                 "{d}":{{"insert":{{"tags":["set",["1","2"]],"opts":["map",[["k","v"]]]}}}}}}}}"#
        );
        let (updates, rejected) =
            table_updates_with_rejected(&text, &[meta], UpdateFormat::V2, None).unwrap();
        let rows: Vec<(String, bool)> = updates[0]
            .rows
            .iter()
            .map(|(u, ch)| (u.to_string(), matches!(ch, RowChange::Delete)))
            .collect();
        assert_eq!(
            rows,
            [
                (a.to_owned(), true),
                (b.to_owned(), false),
                (c.to_owned(), true),
                (d.to_owned(), false)
            ]
        );
        let reasons: Vec<String> = rejected.iter().map(ToString::to_string).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(
            reasons[0].contains("column tags: more than 2 elements"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].contains("column opts: more than 4 elements"),
            "{reasons:?}"
        );
    }
}
