//! JSON-RPC 1.0 over one OVSDB connection: a reader task that frames and decodes incoming
//! messages into a channel bounded in bytes (so a flood cannot grow memory without bound: the
//! reader stops reading the socket, and the server's own backlog handling takes over), and the
//! write half used by the session owner, whose writes time out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;

use super::error::OvsdbError;
use super::framing::{Frame, FrameSplitter, FramingError};
use super::remote::BoxStream;

/// A JSON value inside a received message, kept as text in the message's own buffer (no copy:
/// the first download of a large database is one message of tens of megabytes).
#[derive(Debug, Clone)]
pub struct RawJson {
    text: String,
    start: usize,
    end: usize,
}

impl RawJson {
    /// The value's JSON text.
    pub fn get(&self) -> &str {
        &self.text[self.start..self.end]
    }

    /// A value from its JSON text (tests and tools).
    pub fn from_text(text: impl Into<String>) -> RawJson {
        let text = text.into();
        let end = text.len();
        RawJson {
            text,
            start: 0,
            end,
        }
    }
}

/// A decoded incoming message. Bulky parts stay raw JSON text for a typed second pass.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: RawJson,
    },
    Notification {
        method: String,
        params: RawJson,
        /// When the whole message had been read from the socket (for latency accounting).
        received: tokio::time::Instant,
    },
    Response {
        id: Value,
        result: Option<RawJson>,
        error: Option<Value>,
    },
}

/// Decodes one framed message (public for benchmarks and tests).
pub fn decode(frame: Frame, remote: &str) -> Result<Incoming, OvsdbError> {
    let protocol = |reason: String| OvsdbError::Protocol {
        remote: remote.to_owned(),
        reason,
    };
    // Validating UTF-8 once up front (std's fast path) lets the decoders borrow every string.
    let text = String::from_utf8(frame.bytes)
        .map_err(|e| protocol(format!("message is not UTF-8: {}", e.utf8_error())))?;
    let members = super::decode::envelope_members(&text, &frame.members)
        .map_err(|e| protocol(format!("invalid JSON-RPC message: {e}")))?;
    let value = |name: &str, r: &std::ops::Range<usize>| -> Result<Value, OvsdbError> {
        serde_json::from_str(&text[r.clone()])
            .map_err(|e| protocol(format!("invalid JSON-RPC {name}: {e}")))
    };
    let (mut id, mut method, mut params_at, mut result, mut error) = (None, None, None, None, None);
    for (name, range) in &members {
        match &**name {
            "id" => id = Some(value("id", range)?),
            "method" => match value("method", range)? {
                Value::String(m) => method = Some(m),
                other => return Err(protocol(format!("method is not a string: {other}"))),
            },
            "params" => params_at = Some(range.clone()),
            "result" => result = Some(range.clone()),
            "error" => error = Some(value("error", range)?),
            _ => {}
        }
    }
    let raw = |text: String, r: std::ops::Range<usize>| RawJson {
        text,
        start: r.start,
        end: r.end,
    };
    let params = |text: String, p: Option<std::ops::Range<usize>>| match p {
        Some(r) => raw(text, r),
        None => RawJson::from_text("[]"),
    };
    match (method, id) {
        (Some(method), Some(id)) if !id.is_null() => Ok(Incoming::Request {
            id,
            method,
            params: params(text, params_at),
        }),
        (Some(method), _) => Ok(Incoming::Notification {
            method,
            params: params(text, params_at),
            received: tokio::time::Instant::now(),
        }),
        (None, Some(id)) => Ok(Incoming::Response {
            id,
            result: result
                .filter(|r| &text[r.clone()] != "null")
                .map(|r| raw(text, r)),
            error: error.filter(|e| !e.is_null()),
        }),
        (None, None) => Err(protocol("message with neither method nor id".into())),
    }
}

/// Counters shared with the client's statistics.
#[derive(Debug, Default)]
pub struct WireStats {
    pub bytes_received: AtomicU64,
    pub messages_received: AtomicU64,
}

/// A decoded message and its share of the queue's byte budget, given back when the session
/// takes the message off the queue.
type Queued = (Result<Incoming, OvsdbError>, Option<OwnedSemaphorePermit>);

/// One open JSON-RPC connection.
pub struct Connection {
    pub remote: String,
    rx: mpsc::Receiver<Queued>,
    writer: WriteHalf<BoxStream>,
    next_id: u64,
    reader: JoinHandle<()>,
    write_timeout: Duration,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Spare buffer space offered to each socket read.
const READ_CHUNK: usize = 256 * 1024;

/// How many messages may wait between the reader and the session, whatever their size (the
/// byte budget bounds their total size).
const QUEUE_MESSAGES: usize = 16;

/// Default time one write may take before the connection is given up.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The bytes a message counts against the queue budget: its size, at least 1, at most the
/// whole budget (so one message as large as the budget still passes, alone).
fn queue_weight(bytes: usize, budget: usize) -> u32 {
    bytes.clamp(1, budget.max(1)).min(u32::MAX as usize) as u32
}

async fn read_loop(
    mut rd: ReadHalf<BoxStream>,
    remote: String,
    max_message: usize,
    tx: mpsc::Sender<Queued>,
    stats: Arc<WireStats>,
) {
    let mut splitter = FrameSplitter::new(max_message);
    // At most `max_message` bytes of decoded messages wait for the session: with the message
    // being decoded here and the one the session is handling, a connection holds at most a
    // few times the message limit, however fast the server sends.
    let budget = max_message.min(u32::MAX as usize);
    let queue_bytes = Arc::new(Semaphore::new(budget));
    loop {
        let n = match rd.read_buf(splitter.read_buffer(READ_CHUNK)).await {
            Ok(0) => {
                let pending = splitter.pending_bytes();
                let err = if pending > 0 {
                    OvsdbError::Framing {
                        remote,
                        reason: format!(
                            "connection closed in the middle of a message ({pending} bytes of truncated JSON)"
                        ),
                    }
                } else {
                    OvsdbError::Closed { remote }
                };
                let _ = tx.send((Err(err), None)).await;
                return;
            }
            Ok(n) => n,
            Err(source) => {
                let _ = tx
                    .send((Err(OvsdbError::Io { remote, source }), None))
                    .await;
                return;
            }
        };
        stats.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
        loop {
            let mut weight = 1;
            let msg = match splitter.take_frame() {
                Ok(Some(frame)) => {
                    weight = queue_weight(frame.bytes.len(), budget);
                    decode(frame, &remote)
                }
                Ok(None) => break,
                Err(FramingError::TooLarge { limit }) => Err(OvsdbError::MessageTooLarge {
                    remote: remote.clone(),
                    limit,
                }),
                Err(e) => Err(OvsdbError::Framing {
                    remote: remote.clone(),
                    reason: e.to_string(),
                }),
            };
            let fatal = msg.is_err();
            stats.messages_received.fetch_add(1, Ordering::Relaxed);
            // Waits (reading nothing more) while the queue holds its budget of bytes.
            let Ok(permit) = queue_bytes.clone().acquire_many_owned(weight).await else {
                return;
            };
            if tx.send((msg, Some(permit))).await.is_err() || fatal {
                return;
            }
        }
    }
}

impl Connection {
    /// Wraps an open stream; `max_message` bounds one incoming message.
    pub fn new(
        stream: BoxStream,
        remote: String,
        max_message: usize,
        stats: Arc<WireStats>,
    ) -> Self {
        let (rd, writer) = tokio::io::split(stream);
        let (tx, rx) = mpsc::channel(QUEUE_MESSAGES);
        let reader = tokio::spawn(read_loop(rd, remote.clone(), max_message, tx, stats));
        Connection {
            remote,
            rx,
            writer,
            next_id: 1,
            reader,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }

    /// Gives up the connection when one write takes longer than `timeout` (a server that stops
    /// reading would otherwise hold the session forever).
    pub fn with_write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    async fn write(&mut self, v: &Value) -> Result<(), OvsdbError> {
        let mut bytes = serde_json::to_vec(v).map_err(|e| OvsdbError::Protocol {
            remote: self.remote.clone(),
            reason: format!("cannot encode request: {e}"),
        })?;
        bytes.push(b'\n');
        let io = |source| OvsdbError::Io {
            remote: self.remote.clone(),
            source,
        };
        let write = async {
            self.writer.write_all(&bytes).await?;
            self.writer.flush().await
        };
        match tokio::time::timeout(self.write_timeout, write).await {
            Ok(result) => result.map_err(io),
            Err(_) => Err(OvsdbError::WriteTimeout {
                remote: self.remote.clone(),
                timeout: self.write_timeout,
            }),
        }
    }

    /// Sends a request and returns its id (the answer arrives through [`Connection::recv`]).
    pub async fn request(&mut self, method: &str, params: Value) -> Result<u64, OvsdbError> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&serde_json::json!({"id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Sends a notification (no answer expected).
    pub async fn notify(&mut self, method: &str, params: Value) -> Result<(), OvsdbError> {
        self.write(&serde_json::json!({"id": null, "method": method, "params": params}))
            .await
    }

    /// Answers a request from the server.
    pub async fn reply(&mut self, id: Value, result: Value) -> Result<(), OvsdbError> {
        self.write(&serde_json::json!({"id": id, "result": result, "error": null}))
            .await
    }

    /// Answers a request the client does not support.
    pub async fn reply_error(&mut self, id: Value, error: &str) -> Result<(), OvsdbError> {
        self.write(&serde_json::json!({"id": id, "result": null, "error": error}))
            .await
    }

    /// The next message; an error means the connection is unusable.
    pub async fn recv(&mut self) -> Result<Incoming, OvsdbError> {
        match self.rx.recv().await {
            // The permit is dropped here: the message has left the queue.
            Some((m, _permit)) => m,
            None => Err(OvsdbError::Closed {
                remote: self.remote.clone(),
            }),
        }
    }
}

/// Whether a response id is the numeric id `want`.
pub fn id_is(id: &Value, want: u64) -> bool {
    id.as_u64() == Some(want)
}
