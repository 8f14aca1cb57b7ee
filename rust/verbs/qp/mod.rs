// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (IBTA 10.2.4, 11.2.5): the state machine, the SQ/RQ rings
//! shared with the rxe provider, and the glue between work requests and the
//! MetaRoCE protocol core ([`crate::proto::conn::Connection`]).
//!
//! An RC QP in RTR or RTS owns one connection. Each send WQE becomes one
//! message on stream 0 (verbs order); the core segments, sprays, acknowledges
//! and retransmits it and asks this module, through [`App`], for payload
//! bytes (gathered from the WQE's SGEs) and for where received bytes go
//! (RETH address for RDMA WRITE, the posted receive's SGEs for SEND).
//! Receive-consuming messages carry their receive sequence number (RSN) in
//! the message tag, so even a packet that overtakes earlier messages is
//! placed straight into its receive buffer. Completions are written in order
//! when the core reports a message acknowledged (sender) or complete
//! (receiver).
//!
//! RDMA READ and atomics: the request is a message on stream 0; the responder
//! answers, once the request is complete (so exactly once), with a response
//! message on stream 1 (READ data from its MR, or the atomic's original
//! value). The requester matches the k-th response to its k-th READ/atomic
//! WQE, places the data straight into that WQE's SGEs, and completes the WQE
//! (in SQ order) when both its request is acknowledged and its response is
//! whole.
//!
//! Files, as rxe splits its QP: `control` (create/modify/query/destroy),
//! `post` (doorbell, kernel posts, transmission), `req` (requester), `resp`
//! (responder), `comp` (completer, error state), `sge` (scatter/gather and
//! remote keys), `ud` (datagram QPs); this file holds the QP's state and
//! the protocol core's [`App`] entry points.

mod comp;
mod control;
mod post;
mod req;
mod resp;
mod sge;
mod ud;

use super::cq::Cq;
use super::device::DevShared;
use super::mr::{access, MrEntry, Span};
use super::mw::{Binding, MW_BASE};
use super::srq::Srq;
use crate::ffi::net::{IpAddr, RxMeta};
use crate::ffi::rdma::{counter, PdId};
use crate::ffi::sync::BhGuard;
use crate::ffi::timer::{impl_has_timer, now_ns, Timer, TimerCallback};
use crate::ffi::verbs::{
    modify_qp_is_ok, qp_mask, send_flags, MmInfo, QpAttr, QpCaps, QpEvents, QpHandle, QpInit,
    QpState, QpType, Queue, RecvWqe, RecvWrs, SendWqe, SendWrs, Sge, UContext, Wc, SGE_SIZE,
};
use crate::net::Endpoint;
use crate::proto::conn::{
    App, Config, ConnError, Connection, MsgInfo, Placement, Refuse, Rnr, Stats, Transmit,
    Unreadable,
};
use crate::proto::time::Instant;
use crate::proto::wire::{Op, Reth};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The protocol connection of one RC QP: 4 paths, 2 streams (requests;
/// READ/atomic responses), 64 packets in flight.
type Conn = Connection<4, 1, 2, 64>;
/// Stream of requests (the SQ's messages).
const REQ: u16 = 0;
/// Stream of READ and atomic responses.
const RESP: u16 = 1;
/// READ/atomic requests a responder holds answers for at once.
const RESP_SLOTS: usize = 256;
/// Paths per connection.
const PATHS: u8 = 4;
/// Messages the receiver tracks ahead of the oldest incomplete one.
const RX_TRACK: usize = 256;

/// `IB_WR_*` opcodes (`enum ib_wr_opcode`).
mod wr {
    pub(super) const RDMA_WRITE: u32 = 0;
    pub(super) const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub(super) const SEND: u32 = 2;
    pub(super) const SEND_WITH_IMM: u32 = 3;
    pub(super) const RDMA_READ: u32 = 4;
    pub(super) const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub(super) const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub(super) const LOCAL_INV: u32 = 7;
    pub(super) const BIND_MW: u32 = 8;
    pub(super) const SEND_WITH_INV: u32 = 9;
    pub(super) const ATOMIC_WRITE: u32 = 15;
    pub(super) const REG_MR: u32 = 0x20;
}

/// `IB_WC_*` status and opcode values (`enum ib_wc_status`, `ib_uverbs_wc`).
mod wc {
    pub(super) const SUCCESS: u32 = 0;
    pub(super) const LOC_LEN_ERR: u32 = 1;
    pub(super) const LOC_QP_OP_ERR: u32 = 2;
    pub(super) const LOC_PROT_ERR: u32 = 4;
    pub(super) const WR_FLUSH_ERR: u32 = 5;
    pub(super) const RETRY_EXC_ERR: u32 = 12;
    pub(super) const RNR_RETRY_EXC_ERR: u32 = 13;
    pub(super) const OP_SEND: u32 = 0;
    pub(super) const OP_RDMA_WRITE: u32 = 1;
    pub(super) const OP_RDMA_READ: u32 = 2;
    pub(super) const OP_COMP_SWAP: u32 = 3;
    pub(super) const OP_FETCH_ADD: u32 = 4;
    pub(super) const OP_BIND_MW: u32 = 5;
    pub(super) const OP_LOCAL_INV: u32 = 6;
    pub(super) const OP_REG_MR: u32 = 10;
    pub(super) const OP_ATOMIC_WRITE: u32 = 9;
    pub(super) const MW_BIND_ERR: u32 = 6;
    pub(super) const REM_ACCESS_ERR: u32 = 10;
    pub(super) const REM_INV_REQ_ERR: u32 = 9;
    pub(super) const OP_RECV: u32 = 128;
    pub(super) const OP_RECV_RDMA_WITH_IMM: u32 = 129;
    pub(super) const WITH_IMM: u32 = 2;
    pub(super) const WITH_INVALIDATE: u32 = 4;
}

/// A send WQE turned into a message.
#[derive(Clone, Copy, Default)]
struct SendMsg {
    wqe: SendWqe,
    info: MsgInfo,
    slot: u32,
    /// The request is acknowledged.
    acked: bool,
    /// A READ or atomic: completes only once its response is whole.
    needs_resp: bool,
    resp_done: bool,
    /// The WQE failed (an `IB_WC_*` status; 0: not failed): it completes
    /// with this status once every earlier WQE has, and the QP enters the
    /// error state.
    fail: u32,
}

/// An SRQ WQE a message took.
#[derive(Clone, Copy, Default)]
struct Taken {
    valid: bool,
    wr_id: u64,
    num_sge: u32,
}

/// A READ or atomic response the responder owes, in request order.
#[derive(Clone, Copy, Default)]
struct Resp {
    op: Op,
    va: u64,
    rkey: u32,
    len: u32,
    /// Atomic: the original value, big-endian as carried.
    data: [u8; 8],
    /// Not served ([`resp_status`]: the message tag carries it; 0: served).
    status: u16,
}

/// The tag of a READ/atomic response message: 0 when served; otherwise why
/// the responder could not serve it (IBTA 9.7.5.2.4 NAK codes), checked at
/// the time the responder executes the request, after the request itself was
/// acknowledged. The requester completes the WQE with the matching status.
mod resp_status {
    /// The key, range or access right no longer allow the operation.
    pub(super) const ACCESS: u16 = 1;
}

/// What the receiver knows of a message from its packets.
#[derive(Clone, Copy, Default)]
struct RxMsg {
    op: Op,
    len: u32,
    imm: u32,
    solicited: bool,
    valid: bool,
    /// READ/atomic requests: the remote buffer, and an atomic's operands.
    reth: Reth,
    operands: [u8; 16],
}

/// The QP state behind its lock, except the connection.
struct Io {
    attr: QpAttr,
    caps: QpCaps,
    sq: Option<Queue>,
    rq: Option<Queue>,
    /// SQ slot of the oldest WQE not yet completed.
    sq_cons: u32,
    /// SQ slot of the next WQE to turn into a message (the WQEs from
    /// `sq_cons` up to it are messages in flight, MSN `sq_msn` onwards).
    scan: u32,
    /// MSN of that WQE.
    sq_msn: u32,
    /// WQEs turned into messages (MSN of the next one).
    msns: u32,
    /// Messages in flight, indexed by MSN modulo the SQ size.
    sends: KVec<SendMsg>,
    /// Receive-consuming messages sent (RSN of the next).
    tx_rsn: u32,
    /// RQ slot of the oldest posted receive not yet completed, and its RSN.
    rq_cons: u32,
    rx_rsn: u32,
    rx: KVec<RxMsg>,
    /// With an SRQ: the WQE each receive-consuming message took, by RSN
    /// modulo `RX_TRACK`, and their SGEs (`srq_sge` per entry).
    taken: KVec<Taken>,
    taken_sges: KVec<Sge>,
    srq_sge: usize,
    /// Requester: READ/atomic WQEs sent (number of the next), and the MSN of
    /// each, by number modulo the SQ size.
    tx_reads: u32,
    reads: KVec<u32>,
    /// READ/atomic responses whole (so `tx_reads - reads_done` are
    /// outstanding, at most `max_rd_atomic`: rxe's `check_init_depth`).
    reads_done: u32,
    /// Responder: responses owed (`resp_next` - `resp_acked` of them).
    resps: KVec<Resp>,
    resp_next: u32,
    resp_acked: u32,
    /// Responder: MSN of the next request-stream message to complete.
    rx_msn: u32,
    /// A completion was lost to a full CQ: the QP enters the error state
    /// (IBTA 11.4.2.1, class G).
    cq_lost: core::cell::Cell<bool>,
    /// Moved to SQD with `IB_QP_EN_SQD_ASYNC_NOTIFY`: raise
    /// `IB_EVENT_SQ_DRAINED` once no send is in progress.
    sqd_notify: bool,
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    /// The first failure of the QP, reported on its oldest WQE.
    error: Option<u32>,
    /// The connection's counters when last added to the device's.
    last_stats: Stats,
    /// `IB_EVENT_QP_LAST_WQE_REACHED` raised since the QP entered the error
    /// state.
    last_wqe_sent: bool,
    /// The receive (by RSN) a message could not be placed into, and the
    /// status its completion reports when the QP flushes.
    rx_error: Option<(u32, u32)>,
    dead: bool,
}

struct Inner {
    conn: Option<KBox<Conn>>,
    io: Io,
    /// One datagram being built.
    scratch: KVec<u8>,
}

/// A queue pair.
#[pin_data]
pub(crate) struct Qp {
    qpn: u32,
    qp_type: QpType,
    /// The core's `ib_qp`, named by this QP's completions on kernel CQs.
    handle: QpHandle,
    /// A kernel consumer's QP (rings in kernel memory, `ib_post_*`).
    kernel: bool,
    events: QpEvents,
    pd: PdId,
    sq_sig_all: bool,
    dev: Arc<DevShared>,
    scq: Arc<Cq>,
    rcq: Arc<Cq>,
    srq: Option<Arc<Srq>>,
    #[pin]
    timer: Timer<Qp>,
    #[pin]
    inner: crate::ffi::sync::BhLock<Inner>,
}

impl_has_timer! { impl HasTimer for Qp { self.timer } }

impl TimerCallback for Qp {
    fn fired(this: &Arc<Self>) {
        let mut g = this.inner.lock();
        if this.qp_type.is_datagram() {
            // Datagrams a kernel consumer posted with interrupts off.
            if matches!(g.io.attr.state, QpState::Rts | QpState::Sqd) {
                let Inner { io, scratch, .. } = &mut *g;
                let mut app = Glue { qp: this, io };
                app.datagrams_out(scratch);
                app.settle();
            }
            return;
        }
        {
            let Inner { conn, io, .. } = &mut *g;
            if let Some(c) = conn {
                let mut app = Glue { qp: this, io };
                c.handle_timeout(Instant(now_ns()), &mut app);
            }
        }
        Qp::pump_locked(this, g);
    }
}

impl Endpoint for Qp {
    fn receive(this: &Arc<Self>, payload: &[u8], meta: &RxMeta) {
        this.dev.count(counter::RX_PACKETS, 1);
        this.dev.count(counter::RX_BYTES, payload.len() as u64);
        if meta.ce {
            this.dev.count(counter::ECN_CE, 1);
        }
        if this.qp_type.is_datagram() {
            let mut g = this.inner.lock();
            let Inner { io, .. } = &mut *g;
            let mut app = Glue { qp: this, io };
            if app.datagram_in(payload, meta).is_err() {
                this.dev.count(counter::RX_DROPS, 1);
            }
            app.settle();
            return;
        }
        let mut g = this.inner.lock();
        {
            let Inner { conn, io, .. } = &mut *g;
            let ok = matches!(io.attr.state, QpState::Rtr | QpState::Rts | QpState::Sqd);
            // Only the peer set by modify_qp may talk to this QP.
            let (Some(c), true, true) = (conn, ok, io.dst == Some(meta.src)) else {
                this.dev.count(counter::RX_DROPS, 1);
                return;
            };
            let mut app = Glue { qp: this, io };
            if let Err(r) = c.handle_packet(Instant(now_ns()), payload, meta.ce, &mut app) {
                this.dev.count(counter::RX_DROPS, 1);
                this.dev.count(counter::DROP_FIRST + r as usize, 1);
            }
        }
        // The ACK goes out before the lock is released (see `pump_locked`).
        Qp::pump_locked(this, g);
    }
}

/// Bytes per SQ / RQ slot for the requested SGEs / inline data (rxe's sizing).
fn sq_elem(caps: &QpCaps) -> usize {
    SendWqe::HEADER + (caps.max_send_sge as usize * SGE_SIZE).max(caps.max_inline_data as usize)
}

/// The connection's timeout budget: verbs `retry_cnt` retries per path
/// (0: the first local ACK timeout fails the QP, IBTA 9.7.6.1.3).
fn retry_cnt(t: &QpAttr) -> u8 {
    t.retry_cnt
}

/// Verbs `rnr_retry` (7 means unlimited, as in IBTA).
fn rnr_retry(t: &QpAttr) -> u8 {
    t.rnr_retry
}

/// How long a connection without progress keeps retrying before its WQE
/// completes with `IBV_WC_RETRY_EXC_ERR`: the first local ACK timeout of
/// 4.096 us * 2^`timeout` and one more for each of the `retry_cnt` retries
/// (IBTA 9.7.6.1.3; `retry_cnt` 0 still waits out one timeout), `timeout` 0
/// meaning forever.
fn give_up_ns(t: &QpAttr) -> u64 {
    if t.timeout == 0 {
        return u64::MAX;
    }
    (u64::from(retry_cnt(t)) + 1).saturating_mul(4096u64 << t.timeout.min(31))
}

/// Largest inline data per send WQE.
const MAX_INLINE: u32 = 512;

impl Io {
    fn reset(&mut self) {
        self.last_wqe_sent = false;
        self.rx_error = None;
        for q in [&self.sq, &self.rq].into_iter().flatten() {
            q.set_producer(0);
            q.set_consumer(0);
        }
        self.sq_cons = 0;
        self.scan = 0;
        self.sq_msn = 0;
        self.msns = 0;
        self.tx_rsn = 0;
        self.rq_cons = 0;
        self.rx_rsn = 0;
        self.tx_reads = 0;
        self.reads_done = 0;
        self.resp_next = 0;
        self.resp_acked = 0;
        self.rx_msn = 0;
        self.cq_lost.set(false);
        self.sqd_notify = false;
        self.error = None;
        for r in self.rx.iter_mut() {
            r.valid = false;
        }
        for t in self.taken.iter_mut() {
            t.valid = false;
        }
    }
}

/// Whether a message of `op` consumes a posted receive.
fn consumes_recv(op: Op) -> bool {
    matches!(op, Op::Send | Op::SendImm | Op::SendInv | Op::WriteImm)
}

/// The verbs side of one connection, as the protocol core sees it.
struct Glue<'a> {
    qp: &'a Qp,
    io: &'a mut Io,
}

/// The protocol core's calls, by stream: the request stream (this QP's SQ
/// as requester, its peer's requests as responder) and the response stream
/// (READ/atomic answers). The connection has no other stream.
impl App for Glue<'_> {
    fn message(&mut self, stream: u16, msn: u32) -> Option<MsgInfo> {
        match stream {
            REQ => self.next_request(msn),
            RESP => self.response_message(msn),
            _ => None,
        }
    }

    fn payload(
        &mut self,
        stream: u16,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> core::result::Result<(), Unreadable> {
        match stream {
            REQ => self.request_payload(msn, offset, dst),
            RESP => self.response_payload(msn, offset, dst),
            _ => Err(Unreadable::Local),
        }
    }

    fn place(&mut self, p: &Placement<'_>) -> core::result::Result<(), Refuse> {
        match p.stream {
            REQ => self.place_request(p),
            RESP => self.place_response(p),
            _ => Err(Refuse::Invalid),
        }
    }

    fn complete(&mut self, stream: u16, msn: u32) {
        match stream {
            REQ => self.request_complete(msn),
            RESP => self.response_complete(msn),
            _ => {}
        }
    }

    fn acked(&mut self, stream: u16, msn: u32) {
        match stream {
            REQ => self.request_acked(msn),
            RESP => self.response_acked(msn),
            _ => {}
        }
    }

    fn error(&mut self, e: ConnError) {
        self.failed(e)
    }
}
