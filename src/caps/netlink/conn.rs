//! One long-lived rtnetlink socket: dumps, and batches of requests pipelined over it.
//!
//! A batch is written with one `sendmsg` (netlink-proto encodes every message of a batch into one
//! datagram) and the kernel acknowledges each message in order, so thousands of changes cost a
//! handful of system calls. Several batches are kept in flight at once.
//!
//! Every request and dump has a deadline ([`REQUEST_TIMEOUT`]), and a receive-buffer overflow
//! (`ENOBUFS`: the kernel dropped answers) fails every request waiting on the socket at once
//! ([`NetlinkError::Resync`]) instead of leaving one waiting for an ack that will never come.
//! Both errors end the session ([`NetlinkError::ends_session`]): the reconciler drops it and
//! the next reconcile opens a new socket and dumps everything afresh.

// Unsafe code allowed in this file only: setsockopt on the netlink socket and adopting its raw fd.
#![allow(unsafe_code)]

use futures::StreamExt;
use futures::stream;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::proto::{ConnectionHandle, NetlinkCodec};
use rtnetlink::sys::protocols::NETLINK_ROUTE;
use rtnetlink::sys::{Socket, SocketAddr, TokioSocket};
use std::future::Future;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::NetlinkError;
use super::error::KernelErrno;
use super::netns::NetnsWorker;

/// Messages per datagram. A route message is ~80 bytes: 256 of them stay far below the socket
/// send buffer, and their acks (36 bytes each with NETLINK_CAP_ACK) far below the receive buffer.
const BATCH: usize = 256;
/// Batches in flight at once.
const IN_FLIGHT: usize = 8;
/// Receive buffer: large dumps (10k+ routes) and many acks in flight must not overflow it.
const RCVBUF: libc::c_int = 16 << 20;
/// How long one request (a batch's acks, a whole dump) may take before the session is
/// considered hung. The kernel answers in microseconds to milliseconds; a full dump of 100k
/// routes takes well under a second.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A request to apply: the message, its netlink flags (beyond REQUEST|ACK) and a description
/// of the object for error reports.
pub struct Request {
    pub message: RouteNetlinkMessage,
    pub flags: u16,
    pub what: String,
}

#[derive(Clone)]
pub struct NetlinkConn {
    handle: ConnectionHandle<RouteNetlinkMessage>,
    netns: String,
    /// A netlink socket runs one dump at a time (a second one gets EBUSY): dumps queue here.
    /// Plain requests are not affected and keep flowing during a dump.
    dumping: Arc<tokio::sync::Mutex<()>>,
    timeout: Duration,
    /// Becomes `true` once the socket reported an overflow: answers were lost.
    overflowed: watch::Receiver<bool>,
    /// Where requests go: the kernel (port 0), except in tests that need a peer that never
    /// answers.
    destination: SocketAddr,
    /// The socket's own netlink port (bound at open).
    port: u32,
    _tasks: Arc<Tasks>,
}

/// The connection task and the task reading unsolicited messages, stopped (closing the
/// socket) when the last clone of the connection is dropped: a session dropped after a
/// timeout must not leave its socket behind.
struct Tasks(Vec<tokio::task::AbortHandle>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Why a request was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupted {
    Timeout,
    Overflow,
}

/// Does this message, read from the socket outside any request, say answers were lost?
/// netlink-proto turns a receive error `ENOBUFS` into an `NLMSG_OVERRUN` message with sequence
/// number 0, which matches no request and so arrives here.
pub(crate) fn signals_lost_answers(message: &NetlinkMessage<RouteNetlinkMessage>) -> bool {
    matches!(message.payload, NetlinkPayload::Overrun(_))
}

/// `SO_RCVBUFFORCE` (past the system's cap, with CAP_NET_ADMIN), else the capped `SO_RCVBUF`.
pub(crate) fn set_rcvbuf_force(sock: &Socket, size: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain setsockopt on a socket we own, with a c_int value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &size as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        // Without CAP_NET_ADMIN fall back to the capped SO_RCVBUF.
        sock.set_rx_buf_sz(size)
    }
}

impl NetlinkConn {
    /// The socket's netlink port: the kernel's notifications of this connection's requests
    /// carry it.
    pub(crate) fn port(&self) -> u32 {
        self.port
    }

    /// Open the socket inside the worker's namespace and start the connection task on the
    /// current runtime.
    pub async fn open(worker: &NetnsWorker, timeout: Duration) -> Result<Self, NetlinkError> {
        Self::open_with_buffer(worker, timeout, RCVBUF).await
    }

    /// [`Self::open`] with a receive buffer of `rcvbuf` bytes (the kernel's minimum when
    /// smaller): a tiny one makes the kernel drop acks, the way to test a session that ends
    /// midway on a real kernel.
    pub(crate) async fn open_with_buffer(
        worker: &NetnsWorker,
        timeout: Duration,
        rcvbuf: libc::c_int,
    ) -> Result<Self, NetlinkError> {
        let netns = worker.target().describe();
        let (socket, port) = worker
            .run(move || -> std::io::Result<(Socket, u32)> {
                let mut sock = Socket::new(NETLINK_ROUTE)?;
                let port = sock.bind_auto()?.port_number();
                set_rcvbuf_force(&sock, rcvbuf)?;
                // Short acks: a failed request does not echo the whole message back.
                sock.set_cap_ack(true)?;
                // EXT_ACK stays off: netlink-packet-core does not decode its TLVs.
                // Strict checking: dump requests are validated and filters honoured (routes
                // are dumped per table).
                sock.set_netlink_get_strict_chk(true)?;
                Ok((sock, port))
            })
            .await?
            .map_err(|source| NetlinkError::Socket {
                netns: netns.clone(),
                source,
            })?;
        // SAFETY: the fd comes from a Socket we just created and gave up ownership of.
        let socket = unsafe { TokioSocket::from_raw_fd(socket.into_raw_fd()) };
        let (conn, handle, mut unsolicited) = rtnetlink::proto::from_socket_with_codec::<
            RouteNetlinkMessage,
            TokioSocket,
            NetlinkCodec,
        >(socket);
        let conn_task = tokio::spawn(conn).abort_handle();
        // The connection stops when nobody listens for unsolicited messages: drain them (the
        // socket joins no multicast group, so the only ones are overflow reports).
        let (overflow_tx, overflowed) = watch::channel(false);
        let drain = tokio::spawn(async move {
            while let Some((message, _)) = unsolicited.next().await {
                if signals_lost_answers(&message) {
                    tracing::warn!("netlink receive buffer overflowed: resync");
                    overflow_tx.send_replace(true);
                }
            }
        })
        .abort_handle();
        Ok(Self {
            handle,
            netns,
            dumping: Arc::new(tokio::sync::Mutex::new(())),
            timeout,
            overflowed,
            destination: SocketAddr::new(0, 0),
            port,
            _tasks: Arc::new(Tasks(vec![conn_task, drain])),
        })
    }

    /// The socket's netlink port id, as listed by `ss -f netlink` and `/proc/net/netlink`.
    pub fn local_port(&self) -> u32 {
        self.port
    }

    /// Send every request to the netlink socket bound to `port` instead of the kernel.
    #[cfg(test)]
    fn with_destination(mut self, port: u32) -> Self {
        self.destination = SocketAddr::new(port, 0);
        self
    }

    fn closed(&self) -> NetlinkError {
        NetlinkError::ConnectionClosed(self.netns.clone())
    }

    /// The error of the request named `op` after `why`.
    fn interrupted(&self, why: Interrupted, op: &str) -> NetlinkError {
        self.interrupted_after(why, op, self.timeout)
    }

    /// [`Self::interrupted`], for a request that was given `deadline`.
    fn interrupted_after(&self, why: Interrupted, op: &str, deadline: Duration) -> NetlinkError {
        match why {
            Interrupted::Timeout => NetlinkError::Timeout {
                op: op.to_owned(),
                netns: self.netns.clone(),
                timeout: deadline,
            },
            Interrupted::Overflow => NetlinkError::Resync {
                op: op.to_owned(),
                netns: self.netns.clone(),
            },
        }
    }

    /// `fut` within the deadline, unless the socket overflows first (then at once).
    async fn guarded<T>(&self, fut: impl Future<Output = T>) -> Result<T, Interrupted> {
        self.guarded_for(self.timeout, fut).await
    }

    /// [`Self::guarded`] with a deadline of `deadline`.
    async fn guarded_for<T>(
        &self,
        deadline: Duration,
        fut: impl Future<Output = T>,
    ) -> Result<T, Interrupted> {
        let mut overflowed = self.overflowed.clone();
        tokio::select! {
            biased;
            // An `Err` (the drain task ended with the connection) disables this branch: the
            // request then ends as ConnectionClosed.
            Ok(_) = overflowed.wait_for(|o| *o) => Err(Interrupted::Overflow),
            r = tokio::time::timeout(deadline, fut) => r.map_err(|_| Interrupted::Timeout),
        }
    }

    /// Dump one object class (`NLM_F_DUMP`).
    pub async fn dump(
        &self,
        what: &str,
        message: RouteNetlinkMessage,
    ) -> Result<Vec<RouteNetlinkMessage>, NetlinkError> {
        self.dump_flags(what, message, NLM_F_DUMP).await
    }

    /// A request answered by data messages (a dump, or a get by name with `flags = 0`).
    /// A dump the kernel marks as interrupted (`NLM_F_DUMP_INTR`: the table changed while it
    /// was read) is read again.
    pub async fn dump_flags(
        &self,
        what: &str,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NetlinkError> {
        let _one_dump_at_a_time = self.dumping.lock().await;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (out, interrupted) = self
                .guarded(self.dump_once(what, message.clone(), flags))
                .await
                .map_err(|why| self.interrupted(why, &format!("dump of {what}")))??;
            if !interrupted || attempts >= 5 {
                return Ok(out);
            }
        }
    }

    async fn dump_once(
        &self,
        what: &str,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<(Vec<RouteNetlinkMessage>, bool), NetlinkError> {
        let mut req = NetlinkMessage::from(message);
        req.header.flags = NLM_F_REQUEST | flags;
        let mut replies = self
            .handle
            .request(req, self.destination)
            .map_err(|_| self.closed())?;
        let mut out = Vec::new();
        let mut interrupted = false;
        while let Some(reply) = replies.next().await {
            interrupted |= reply.header.flags & NLM_F_DUMP_INTR != 0;
            match reply.payload {
                NetlinkPayload::InnerMessage(m) => out.push(m),
                NetlinkPayload::Error(e) => {
                    if let Some(code) = e.code {
                        return Err(NetlinkError::Kernel {
                            op: format!("dump of {what}"),
                            errno: KernelErrno(-code.get()),
                        });
                    }
                }
                NetlinkPayload::Done(_) => break,
                NetlinkPayload::Overrun(_) => {
                    return Err(self.interrupted(Interrupted::Overflow, &format!("dump of {what}")));
                }
                _ => {}
            }
        }
        Ok((out, interrupted))
    }

    /// Apply one request and wait for its ack.
    pub async fn apply_one(&self, request: Request) -> Result<(), NetlinkError> {
        let what = request.what.clone();
        match self.apply(vec![request]).await.pop() {
            Some((_, r)) => r,
            None => Err(NetlinkError::Unexpected {
                op: what,
                detail: "no acknowledgement".to_owned(),
            }),
        }
    }

    /// Apply many requests, pipelined: returns each request's description with its outcome.
    /// One failing request never stops the others.
    pub async fn apply(&self, requests: Vec<Request>) -> Vec<(String, Result<(), NetlinkError>)> {
        let mut chunks: Vec<Vec<Request>> = Vec::new();
        let mut requests = requests.into_iter().peekable();
        while requests.peek().is_some() {
            chunks.push(requests.by_ref().take(BATCH).collect());
        }
        stream::iter(chunks.into_iter().map(|chunk| self.apply_batch(chunk)))
            .buffer_unordered(IN_FLIGHT)
            .flat_map(stream::iter)
            .collect()
            .await
    }

    async fn apply_batch(&self, batch: Vec<Request>) -> Vec<(String, Result<(), NetlinkError>)> {
        let mut whats = Vec::with_capacity(batch.len());
        let mut messages = Vec::with_capacity(batch.len() + 1);
        messages.push(marker());
        for r in batch {
            let mut m = NetlinkMessage::from(r.message);
            m.header.flags = NLM_F_REQUEST | NLM_F_ACK | r.flags;
            messages.push(m);
            whats.push(r.what);
        }
        let mut replies = match self.handle.request_batch(messages, self.destination) {
            Ok(r) => r,
            Err(_) => {
                return whats.into_iter().map(|w| (w, Err(self.closed()))).collect();
            }
        };
        // netlink-proto swallows positive acks and ends the stream once every message is
        // answered: only errors arrive, tagged with their sequence number. The sequence numbers
        // of a batch are consecutive and the marker (always refused: no such ifindex) comes
        // first, so its number locates every error. The marker's answer is recognised by the
        // request header the kernel echoes (an RTM_GETLINK: no real request is one).
        let collect = async {
            let mut marker_seq = None;
            let mut errors: Vec<(u32, i32)> = Vec::new();
            while let Some(reply) = replies.next().await {
                if let NetlinkPayload::Error(e) = reply.payload
                    && let Some(code) = e.code
                {
                    let echoed_type = e.header.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
                    if echoed_type == Some(RTM_GETLINK) {
                        marker_seq = Some(reply.header.sequence_number);
                    } else {
                        errors.push((reply.header.sequence_number, -code.get()));
                    }
                }
            }
            (marker_seq, errors)
        };
        // The kernel handles a batch inside the `sendmsg` that carries it, one batch after the
        // other, so a batch's answers may wait behind every batch in flight before it: each is
        // given the session's timeout. (With 30k addresses on one device, where every new
        // address makes the kernel rescan them all and ovs-vswitchd re-dump them, eight
        // batches can take longer than one timeout without anything being hung.)
        let deadline = self.timeout * IN_FLIGHT as u32;
        let (marker_seq, errors) = match self.guarded_for(deadline, collect).await {
            Ok(answers) => answers,
            // Which acks were lost is unknown: every request of the batch fails.
            Err(why) => {
                return whats
                    .into_iter()
                    .map(|w| {
                        let e = self.interrupted_after(why, &w, deadline);
                        (w, Err(e))
                    })
                    .collect();
            }
        };
        let mut results: Vec<(String, Result<(), NetlinkError>)> =
            whats.into_iter().map(|w| (w, Ok(()))).collect();
        let Some(base) = marker_seq else {
            // No answer to the marker: the connection broke before the batch was processed.
            for slot in &mut results {
                slot.1 = Err(self.closed());
            }
            return results;
        };
        for (seq, errno) in errors {
            let slot = seq
                .checked_sub(base.wrapping_add(1))
                .and_then(|i| results.get_mut(i as usize));
            match slot {
                Some(slot) => {
                    slot.1 = Err(NetlinkError::Kernel {
                        op: slot.0.clone(),
                        errno: KernelErrno(errno),
                    })
                }
                None => tracing::warn!(seq, base, errno, "netlink error outside its batch"),
            }
        }
        results
    }
}

/// `RTM_GETLINK`, as echoed in error replies.
const RTM_GETLINK: u16 = 18;

/// `RTM_GETLINK` of an interface index that cannot exist: answered with ENODEV, marking where a
/// batch's sequence numbers start.
fn marker() -> NetlinkMessage<RouteNetlinkMessage> {
    let mut link = rtnetlink::packet_route::link::LinkMessage::default();
    link.header.index = i32::MAX as u32;
    let mut m = NetlinkMessage::from(RouteNetlinkMessage::GetLink(link));
    m.header.flags = NLM_F_REQUEST | NLM_F_ACK;
    m
}

#[cfg(test)]
mod tests {
    //! Deterministic hangs and overflows: the requests go to a second netlink socket of the
    //! test's own, which never answers (root may unicast between netlink sockets), and that
    //! socket plays the kernel reporting an overflow. Nothing is sent to the kernel.
    use super::*;
    use crate::caps::netlink::links;
    use crate::caps::netlink::netns::NetnsTarget;
    use rtnetlink::packet_core::{NLMSG_OVERRUN, NetlinkHeader};

    async fn conn_to_silent_peer(timeout: Duration) -> (NetlinkConn, Socket, NetnsWorker) {
        let worker = NetnsWorker::spawn(NetnsTarget::from_config(None)).expect("worker");
        let conn = NetlinkConn::open(&worker, timeout)
            .await
            .expect("netlink socket (the tests run as root)");
        let mut peer = Socket::new(NETLINK_ROUTE).expect("peer socket");
        let port = peer.bind_auto().expect("bind").port_number();
        (conn.with_destination(port), peer, worker)
    }

    fn link_up_request() -> Request {
        let observed = links::ObservedLink {
            index: 1,
            name: "lo".to_owned(),
            kind: None,
            master: None,
            mac: None,
            up: false,
            vrf_table: None,
            vlan_id: None,
            parent: None,
            ..Default::default()
        };
        links::set_request(&observed, None, None, false, true).expect("a change")
    }

    fn overrun() -> NetlinkMessage<RouteNetlinkMessage> {
        let mut header = NetlinkHeader::default();
        header.message_type = NLMSG_OVERRUN;
        let mut m = NetlinkMessage::new(header, NetlinkPayload::Overrun(Vec::new()));
        m.finalize();
        m
    }

    #[tokio::test]
    async fn an_unanswered_request_or_dump_times_out_naming_itself() {
        let timeout = Duration::from_millis(200);
        let (conn, _peer, _worker) = conn_to_silent_peer(timeout).await;
        let started = tokio::time::Instant::now();
        let e = conn.apply_one(link_up_request()).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        match &e {
            NetlinkError::Timeout { op, timeout: t, .. } => {
                assert_eq!(op, "set link lo up");
                // A request may wait behind every batch in flight before it.
                assert_eq!(*t, timeout * IN_FLIGHT as u32);
            }
            other => panic!("not a timeout: {other:?}"),
        }
        assert!(e.ends_session(), "{e}");
        assert!(
            e.to_string().starts_with("set link lo up: no answer"),
            "{e}"
        );
        let e = conn.dump("links", links::dump_request()).await.unwrap_err();
        assert!(
            matches!(&e, NetlinkError::Timeout { op, .. } if op == "dump of links"),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn an_overflow_fails_the_waiting_requests_at_once_and_every_later_one() {
        // A deadline far beyond the test's own: only the overflow can end the request.
        let (conn, peer, _worker) = conn_to_silent_peer(Duration::from_secs(600)).await;
        let waiting = tokio::spawn({
            let conn = conn.clone();
            async move { conn.apply_one(link_up_request()).await }
        });
        // Let the request reach the peer before the overflow is reported.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let m = overrun();
        let mut buf = vec![0u8; m.buffer_len()];
        m.serialize(&mut buf);
        peer.send_to(&buf, &SocketAddr::new(conn.local_port(), 0), 0)
            .expect("send the overflow report");
        let r = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiting request ends at once")
            .expect("task");
        match r {
            Err(NetlinkError::Resync { op, .. }) => assert_eq!(op, "set link lo up"),
            other => panic!("not a resync: {other:?}"),
        }
        let later = tokio::time::timeout(Duration::from_secs(5), conn.apply_one(link_up_request()))
            .await
            .expect("no wait after an overflow");
        assert!(
            matches!(&later, Err(e @ NetlinkError::Resync { .. }) if e.ends_session()),
            "{later:?}"
        );
    }

    #[test]
    fn only_an_overrun_signals_lost_answers() {
        assert!(signals_lost_answers(&overrun()));
        let link = NetlinkMessage::from(links::dump_request());
        assert!(!signals_lost_answers(&link));
        let mut ack = rtnetlink::packet_core::ErrorMessage::default();
        ack.code = None;
        let ack: NetlinkMessage<RouteNetlinkMessage> =
            NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::Error(ack));
        assert!(!signals_lost_answers(&ack));
    }
}
