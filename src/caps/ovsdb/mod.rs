//! OVSDB JSON-RPC client (RFC 7047 + OVS extensions) and in-memory replica. Filled in by the
//! OVSDB capability work; nothing here pretends to connect yet.
