//! Finds JSON-RPC message boundaries in a byte stream.
//!
//! OVSDB sends bare JSON objects back to back with no length prefix, so the only way to know
//! where a message ends is to follow the JSON syntax: count brace/bracket depth outside strings
//! and track string and escape state so `"\"}"` inside a string never closes a message. The
//! splitter is incremental: a message may be split across any number of reads, and one read may
//! carry several messages. A message longer than the configured limit is rejected as soon as the
//! limit is crossed, so a hostile peer streaming an endless object costs at most `limit` bytes.

/// Why the byte stream could not be split into messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("unexpected byte {byte:#04x} between messages (a message must be a JSON object)")]
    Garbage { byte: u8 },
    #[error("unbalanced closing bracket {byte:#04x}")]
    Unbalanced { byte: u8 },
    #[error("message exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
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
        }
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
        }
        self.consumed = 0;
    }

    /// The next complete message, if the bytes fed so far contain one.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FramingError> {
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
                    match memchr::memchr2(b'"', b'\\', &buf[i..end]) {
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
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        if self.depth == 0 {
                            return Err(FramingError::Unbalanced { byte: b });
                        }
                        self.depth -= 1;
                        if self.depth == 0 {
                            if i + 1 - start > self.limit {
                                return Err(FramingError::TooLarge { limit: self.limit });
                            }
                            self.start = None;
                            self.scan = i + 1;
                            self.consumed = i + 1;
                            return Ok(Some(&self.buf[start..=i]));
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
}
