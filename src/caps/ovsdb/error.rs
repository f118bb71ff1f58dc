//! Errors of the OVSDB capability, one enum for the whole client: every variant says which
//! remote, table, column or request it concerns, so an operator can act on the message alone.

use std::io;

/// Everything that can go wrong talking to an OVSDB server or using the replica.
#[derive(Debug, thiserror::Error)]
pub enum OvsdbError {
    #[error("invalid OVSDB remote {remote:?}: {reason}")]
    BadRemote { remote: String, reason: String },
    #[error("cannot connect to {remote}: {source}")]
    Connect { remote: String, source: io::Error },
    #[error("TLS configuration for {remote}: {reason}")]
    TlsConfig { remote: String, reason: String },
    #[error("TLS with {remote}: {reason}")]
    Tls { remote: String, reason: String },
    #[error("I/O error on the connection to {remote}: {source}")]
    Io { remote: String, source: io::Error },
    #[error("connection to {remote} closed by the server")]
    Closed { remote: String },
    #[error("framing error from {remote}: {reason}")]
    Framing { remote: String, reason: String },
    #[error(
        "message from {remote} exceeds the limit of {limit} bytes ([ovn] ovsdb_max_message_size)"
    )]
    MessageTooLarge { remote: String, limit: usize },
    #[error("writing to {remote} did not complete within {timeout:?} (the server is not reading)")]
    WriteTimeout {
        remote: String,
        timeout: std::time::Duration,
    },
    #[error("malformed JSON-RPC message from {remote}: {reason}")]
    Protocol { remote: String, reason: String },
    #[error("server {remote} answered {method} with error {error}")]
    Rpc {
        remote: String,
        method: String,
        error: String,
    },
    #[error("no answer from {remote} within the inactivity probe interval")]
    ProbeTimeout { remote: String },
    #[error("database {db:?} is not served by {remote} (it serves: {available})")]
    NoSuchDatabase {
        db: String,
        remote: String,
        available: String,
    },
    #[error("schema of {db}: table {table:?} does not exist (schema version {version})")]
    MissingTable {
        db: String,
        table: String,
        version: String,
    },
    #[error(
        "schema of {db}: column {table}.{column} does not exist (schema version {version}); is the server older than the agent expects?"
    )]
    MissingColumn {
        db: String,
        table: String,
        column: String,
        version: String,
    },
    #[error("cannot index {table}.{column}: {reason}")]
    BadIndex {
        table: String,
        column: String,
        reason: String,
    },
    #[error("invalid schema from {remote}: {reason}")]
    BadSchema { remote: String, reason: String },
    #[error("server {remote} is not usable: {reason}")]
    ServerUnusable { remote: String, reason: String },
    #[error("transaction failed: {0}")]
    Transaction(String),
    #[error("table {0:?} is not monitored by this client")]
    NotMonitored(String),
    #[error("the OVSDB client has shut down")]
    Shutdown,
    #[error("request cancelled because the connection to {remote} was lost")]
    ConnectionLost { remote: String },
}
