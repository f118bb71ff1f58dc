//! One long-lived rtnetlink socket: dumps, and batches of requests pipelined over it.
//!
//! A batch is written with one `sendmsg` (netlink-proto encodes every message of a batch into one
//! datagram) and the kernel acknowledges each message in order, so thousands of changes cost a
//! handful of system calls. Several batches are kept in flight at once.

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
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::Arc;

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
}

fn set_rcvbuf_force(sock: &Socket) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let size = RCVBUF;
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
    /// Open the socket inside the worker's namespace and start the connection task on the
    /// current runtime.
    pub async fn open(worker: &NetnsWorker) -> Result<Self, NetlinkError> {
        let netns = worker.target().describe();
        let socket = worker
            .run(|| -> std::io::Result<Socket> {
                let sock = Socket::new(NETLINK_ROUTE)?;
                set_rcvbuf_force(&sock)?;
                // Short acks: a failed request does not echo the whole message back.
                sock.set_cap_ack(true)?;
                // EXT_ACK stays off: netlink-packet-core does not decode its TLVs.
                // Strict checking: dump requests are validated and filters honoured (routes
                // are dumped per table).
                sock.set_netlink_get_strict_chk(true)?;
                Ok(sock)
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
        tokio::spawn(conn);
        // The connection stops when nobody listens for unsolicited messages: drain them (the
        // socket joins no multicast group, so there are none in practice).
        tokio::spawn(async move { while unsolicited.next().await.is_some() {} });
        Ok(Self {
            handle,
            netns,
            dumping: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    fn closed(&self) -> NetlinkError {
        NetlinkError::ConnectionClosed(self.netns.clone())
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
            let (out, interrupted) = self.dump_once(what, message.clone(), flags).await?;
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
            .request(req, SocketAddr::new(0, 0))
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
                    return Err(NetlinkError::Unexpected {
                        op: format!("dump of {what}"),
                        detail: "overrun".to_owned(),
                    });
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
        let mut replies = match self.handle.request_batch(messages, SocketAddr::new(0, 0)) {
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
