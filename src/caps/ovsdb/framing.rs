//! Finds JSON-RPC message boundaries in a byte stream.
//!
//! OVSDB sends bare JSON objects back to back with no length prefix, so the only way to know
//! where a message ends is to follow the JSON syntax: count brace/bracket depth outside strings
//! and track string and escape state so `"\"}"` inside a string never closes a message. The
//! splitter is incremental: a message may be split across any number of reads, and one read may
//! carry several messages. A message longer than the configured limit is rejected as soon as the
//! limit is crossed, so a hostile peer streaming an endless object costs at most `limit` bytes;
//! nesting deeper than [`MAX_DEPTH`] is rejected as it is read, so no later pass (serde_json, the
//! table-updates decoder) ever sees an absurdly deep value.

/// Deepest nesting of objects and arrays accepted in one message. The deepest thing OVSDB sends
/// is a set of UUIDs inside a row update inside a notification (about 10 levels); serde_json,
/// which decodes the small parts of a message, stops at 128.
pub const MAX_DEPTH: u32 = 64;

/// Why the byte stream could not be split into messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("unexpected byte {byte:#04x} between messages (a message must be a JSON object)")]
    Garbage { byte: u8 },
    #[error("unbalanced closing bracket {byte:#04x}")]
    Unbalanced { byte: u8 },
    #[error("message exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("message nests objects and arrays deeper than {max} levels")]
    TooDeep { max: u32 },
}

/// Incremental splitter: feed bytes with [`FrameSplitter::extend`], take complete messages with
/// [`FrameSplitter::next_frame`].
#[derive(Debug)]
pub struct FrameSplitter {
    buf: Vec<u8>,
    /// Bytes before this offset belong to messages already returned.
    consumed: usize,
    /// Next byte to examine.
    scan: usize,
    /// Start of the message being scanned, if inside one.
    start: Option<usize>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    limit: usize,
    /// Where the container value of the current top-level member opened (depth 1 → 2).
    member_open: usize,
    /// `[open, close]` byte ranges of the current message's top-level container members, so
    /// the JSON-RPC envelope can be decoded without scanning a 70 MB `result` a second time.
    members: Vec<(usize, usize)>,
}

/// One complete message, owned: the splitter hands over its buffer instead of copying a large
/// message out of it.
#[derive(Debug)]
pub struct Frame {
    pub bytes: Vec<u8>,
    /// Byte ranges (end exclusive) of the top-level members whose values are objects or
    /// arrays, in order.
    pub members: Vec<(usize, usize)>,
}

impl FrameSplitter {
    /// A splitter that rejects any message longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::with_capacity(64 * 1024),
            consumed: 0,
            scan: 0,
            start: None,
            depth: 0,
            in_string: false,
            escaped: false,
            limit,
            member_open: 0,
            members: Vec::new(),
        }
    }

    /// The buffer to read the next bytes into, with at least `min` bytes of spare capacity
    /// (read into `spare_capacity` directly, so bytes are copied once, from the socket).
    pub fn read_buffer(&mut self, min: usize) -> &mut Vec<u8> {
        self.compact();
        if self.buf.capacity() - self.buf.len() < min {
            self.buf.reserve(min);
        }
        &mut self.buf
    }

    /// Appends bytes read from the stream.
    pub fn extend(&mut self, data: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(data);
    }

    /// Bytes of the current, incomplete message held in memory (for tests and accounting).
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() - self.consumed
    }

    /// Drops bytes of messages already returned, so the buffer never grows with their count.
    fn compact(&mut self) {
        if self.consumed == 0 {
            return;
        }
        self.buf.drain(..self.consumed);
        self.scan -= self.consumed;
        if let Some(start) = self.start.as_mut() {
            *start -= self.consumed;
            self.member_open -= self.consumed;
            for (a, b) in self.members.iter_mut() {
                *a -= self.consumed;
                *b -= self.consumed;
            }
        }
        self.consumed = 0;
    }

    /// The next complete message, if the bytes fed so far contain one.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FramingError> {
        Ok(self.scan()?.map(|(start, end)| &self.buf[start..end]))
    }

    /// Like [`FrameSplitter::next_frame`], but the message is handed over as an owned
    /// [`Frame`]. A message that starts at the front of the buffer (every message that spanned
    /// several reads) takes the buffer itself; only the bytes after it are copied.
    pub fn take_frame(&mut self) -> Result<Option<Frame>, FramingError> {
        let Some((start, end)) = self.scan()? else {
            return Ok(None);
        };
        let mut members = std::mem::take(&mut self.members);
        let bytes = if start == 0 && end > 64 * 1024 {
            let rest = self.buf[end..].to_vec();
            let mut bytes = std::mem::replace(&mut self.buf, rest);
            bytes.truncate(end);
            self.scan -= end;
            self.consumed = 0;
            bytes
        } else {
            for (a, b) in members.iter_mut() {
                *a -= start;
                *b -= start;
            }
            self.buf[start..end].to_vec()
        };
        Ok(Some(Frame { bytes, members }))
    }

    /// Finds the end of the next message: `(start, end)` in `buf`, end exclusive.
    fn scan(&mut self) -> Result<Option<(usize, usize)>, FramingError> {
        let buf = &self.buf;
        let mut i = self.scan;
        let end = buf.len();
        while i < end {
            let b = buf[i];
            let Some(start) = self.start else {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => {
                        i += 1;
                        self.consumed = i;
                        continue;
                    }
                    b'{' => {
                        self.start = Some(i);
                        self.depth = 1;
                        // Never behind `start`, so `compact` can shift it like the rest.
                        self.member_open = i;
                        self.members.clear();
                        i += 1;
                        continue;
                    }
                    other => return Err(FramingError::Garbage { byte: other }),
                }
            };
            if self.in_string {
                if self.escaped {
                    // Whatever follows a backslash is part of the string.
                    self.escaped = false;
                    i += 1;
                } else {
                    // Fast path: skip ordinary string bytes in bulk.
                    match find_quote_or_backslash(&buf[i..end]) {
                        None => i = end,
                        Some(off) => {
                            let pos = i + off;
                            if buf[pos] == b'\\' {
                                self.escaped = true;
                            } else {
                                self.in_string = false;
                            }
                            i = pos + 1;
                        }
                    }
                }
            } else {
                match b {
                    b'"' => self.in_string = true,
                    b'{' | b'[' => {
                        self.depth += 1;
                        if self.depth > MAX_DEPTH {
                            return Err(FramingError::TooDeep { max: MAX_DEPTH });
                        }
                        if self.depth == 2 {
                            self.member_open = i;
                        }
                    }
                    b'}' | b']' => {
                        if self.depth == 0 {
                            return Err(FramingError::Unbalanced { byte: b });
                        }
                        self.depth -= 1;
                        if self.depth == 1 {
                            self.members.push((self.member_open, i + 1));
                        } else if self.depth == 0 {
                            if i + 1 - start > self.limit {
                                return Err(FramingError::TooLarge { limit: self.limit });
                            }
                            self.start = None;
                            self.scan = i + 1;
                            self.consumed = i + 1;
                            return Ok(Some((start, i + 1)));
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            if i - start > self.limit {
                return Err(FramingError::TooLarge { limit: self.limit });
            }
        }
        self.scan = i;
        if let Some(start) = self.start
            && end - start > self.limit
        {
            return Err(FramingError::TooLarge { limit: self.limit });
        }
        Ok(None)
    }
}

/// Position of the first `"` or `\\` in `hay`. OVSDB strings are mostly short (UUIDs, names,
/// `external_ids` keys), where a vector search's setup costs more than the search: the first
/// 32 bytes are checked eight at a time in a register, longer strings go to `memchr2`.
#[inline]
pub(crate) fn find_quote_or_backslash(hay: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Flags bytes of `w` equal to the byte in `pattern`: the lowest flagged byte is always a
    // true match (borrows only propagate upwards), which is all a forward search needs.
    #[inline]
    fn matches(w: u64, pattern: u64) -> u64 {
        let x = w ^ pattern;
        x.wrapping_sub(ONES) & !x & HIGHS
    }
    let mut i = 0;
    while i + 8 <= hay.len() && i < 32 {
        let w = u64::from_le_bytes(hay[i..i + 8].try_into().expect("8 bytes"));
        let m = matches(w, ONES * u64::from(b'"')) | matches(w, ONES * u64::from(b'\\'));
        if m != 0 {
            return Some(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    memchr::memchr2(b'"', b'\\', &hay[i..]).map(|off| i + off)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = FrameSplitter::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            s.extend(c);
            while let Some(f) = s.next_frame().unwrap() {
                out.push(String::from_utf8(f.to_vec()).unwrap());
            }
        }
        out
    }

    #[test]
    fn escaped_quotes_and_braces_stay_inside_strings() {
        let msg = br#"{"a":"x\"}{\\","b":[1,{"c":"]"}]}"#;
        for cut in 0..msg.len() {
            let got = split_all(&[&msg[..cut], &msg[cut..], b" {}"]);
            assert_eq!(
                got,
                vec![String::from_utf8(msg.to_vec()).unwrap(), "{}".into()]
            );
        }
    }

    #[test]
    fn garbage_and_limit() {
        let mut s = FrameSplitter::new(10);
        s.extend(b"x");
        assert_eq!(s.next_frame(), Err(FramingError::Garbage { byte: b'x' }));
        let mut s = FrameSplitter::new(10);
        s.extend(b"{\"aaaaaaaaaaaaaaaa");
        assert_eq!(s.next_frame(), Err(FramingError::TooLarge { limit: 10 }));
    }

    #[test]
    fn nesting_is_limited_as_it_is_read() {
        let ok = format!("{{\"a\":{}{}}}", "[".repeat(63), "]".repeat(63));
        assert_eq!(split_all(&[ok.as_bytes()]), vec![ok.clone()]);
        let mut s = FrameSplitter::new(1 << 20);
        // Unterminated: the error comes from the opening brackets alone.
        s.extend(format!("{{\"a\":{}", "[".repeat(64)).as_bytes());
        assert_eq!(
            s.next_frame(),
            Err(FramingError::TooDeep { max: MAX_DEPTH })
        );
    }
}
