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

use super::cq::Cq;
use super::device::DevShared;
use super::mr::{access, MrEntry};
use super::mw::{Binding, MW_BASE};
use super::srq::Srq;
use crate::ffi::net::{IpAddr, RxMeta};
use crate::ffi::rdma::counter;
use crate::ffi::sync::BhGuard;
use crate::ffi::timer::{impl_has_timer, now_ns, Timer, TimerCallback};
use crate::ffi::verbs::{
    modify_qp_is_ok, qp_mask, send_flags, MmInfo, QpAttr, QpCaps, QpEvents, QpHandle, QpInit,
    QpState, QpType, Queue, RecvWqe, RecvWrs, SendWqe, SendWrs, Sge, UContext, Wc, SGE_SIZE,
};
use crate::net::Endpoint;
use crate::proto::conn::{
    App, Config, ConnError, Connection, MsgInfo, Placement, Refuse, Rnr, Stats, Unreadable,
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
    pd: usize,
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

impl Qp {
    /// Creates an RC, UD or GSI QP with its rings mapped into `uc` (none: a
    /// kernel consumer's QP, posted to with `ib_post_send`/`ib_post_recv`);
    /// `handle` is the core's `ib_qp` its kernel completions name. The GSI
    /// QP is QPN 1 of its device; there is one per device (`EBUSY`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        dev: &Arc<DevShared>,
        pd: usize,
        init: &mut QpInit,
        scq: &Arc<Cq>,
        rcq: &Arc<Cq>,
        srq: Option<&Arc<Srq>>,
        uc: Option<&UContext>,
        handle: QpHandle,
        events: QpEvents,
    ) -> Result<(Arc<Qp>, u32, MmInfo, MmInfo)> {
        if init.qp_type == QpType::Gsi && uc.is_some() {
            return Err(EINVAL);
        }
        let a = dev.attrs;
        let c = &mut init.caps;
        // rxe_qp_chk_cap: every size within the device limits.
        if c.max_send_wr > a.max_qp_wr
            || c.max_send_sge > a.max_send_sge
            || c.max_recv_wr > a.max_qp_wr
            || c.max_recv_sge > a.max_recv_sge
            || c.max_inline_data > MAX_INLINE
        {
            return Err(EINVAL);
        }
        c.max_send_wr = c.max_send_wr.max(1);
        c.max_recv_wr = c.max_recv_wr.max(1);
        c.max_send_sge = c.max_send_sge.max(1);
        c.max_recv_sge = c.max_recv_sge.max(1);
        // Inline room is what the SGE array occupies, as rxe reports it.
        let room = (c.max_send_sge as usize * SGE_SIZE).max(c.max_inline_data as usize);
        c.max_inline_data = room as u32;
        c.max_send_sge = (room / SGE_SIZE) as u32;
        let sq = Queue::new(uc, c.max_send_wr, sq_elem(c))?;
        // With an SRQ the QP has no RQ of its own (nothing to map).
        let rq = match srq {
            Some(_) => None,
            None => Some(Queue::new(
                uc,
                c.max_recv_wr,
                RecvWqe::HEADER + c.max_recv_sge as usize * SGE_SIZE,
            )?),
        };
        // rxe reports the ring capacity back as the granted depth.
        c.max_send_wr = sq.slots() - 1;
        c.max_recv_wr = rq.as_ref().map_or(0, |q| q.slots() - 1);
        if srq.is_some() {
            c.max_recv_sge = 0;
        }
        let (sq_mi, rq_mi) = (
            sq.mminfo(),
            rq.as_ref().map(|q| q.mminfo()).unwrap_or_default(),
        );
        let srq_sge = srq.map_or(0, |s| s.max_sge() as usize);
        let mut taken = KVec::new();
        let mut taken_sges = KVec::new();
        if srq.is_some() {
            taken.extend_with(RX_TRACK, Taken::default(), GFP_KERNEL)?;
            taken_sges.extend_with(RX_TRACK * srq_sge, Sge::default(), GFP_KERNEL)?;
        }
        let mut sends = KVec::new();
        sends.extend_with(sq.slots() as usize, SendMsg::default(), GFP_KERNEL)?;
        let mut rx = KVec::new();
        rx.extend_with(RX_TRACK, RxMsg::default(), GFP_KERNEL)?;
        let mut reads = KVec::new();
        reads.extend_with(sends.len(), 0u32, GFP_KERNEL)?;
        let mut resps = KVec::new();
        resps.extend_with(RESP_SLOTS, Resp::default(), GFP_KERNEL)?;
        let mut scratch = KVec::new();
        scratch.extend_with(4096 + 256, 0u8, GFP_KERNEL)?;
        let io = Io {
            attr: QpAttr {
                port: 1,
                ..QpAttr::default()
            },
            caps: *c,
            sq: Some(sq),
            rq,
            sq_cons: 0,
            scan: 0,
            sq_msn: 0,
            msns: 0,
            sends,
            tx_rsn: 0,
            rq_cons: 0,
            rx_rsn: 0,
            rx,
            taken,
            taken_sges,
            srq_sge,
            tx_reads: 0,
            reads,
            reads_done: 0,
            resps,
            resp_next: 0,
            resp_acked: 0,
            rx_msn: 0,
            cq_lost: core::cell::Cell::new(false),
            sqd_notify: false,
            src: None,
            dst: None,
            error: None,
            last_stats: Stats::default(),
            last_wqe_sent: false,
            rx_error: None,
            dead: false,
        };
        let mut io = Some(io);
        let mut scratch = Some(scratch);
        let (qp_type, sq_sig_all) = (init.qp_type, init.sq_sig_all);
        let make = |qpn| {
            let io = io.take().ok_or(EINVAL)?;
            let scratch = scratch.take().ok_or(EINVAL)?;
            Arc::pin_init(
                pin_init!(Qp {
                    qpn,
                    qp_type,
                    handle,
                    kernel: uc.is_none(),
                    events: events.clone(),
                    pd,
                    sq_sig_all,
                    dev: dev.clone(),
                    scq: scq.clone(),
                    rcq: rcq.clone(),
                    srq: srq.cloned(),
                    timer <- Timer::new(),
                    inner <- crate::ffi::sync::new_bh_lock!(Inner { conn: None, io, scratch }, "metaroce_qp"),
                }),
                GFP_KERNEL,
            )
        };
        let (qpn, qp) = if qp_type == QpType::Gsi {
            dev.transport.insert_gsi(dev.ifindex, make)?
        } else {
            dev.transport.insert(make)?
        };
        Ok((qp, qpn, rq_mi, sq_mi))
    }

    /// `modify_qp`: validates like rxe (`rxe_qp_chk_attr`) and applies.
    pub(crate) fn modify(this: &Arc<Self>, a: &QpAttr) -> Result {
        let m = a.mask;
        // A move to RTR may need a connection: allocate it before taking the
        // QP lock (softirqs take that lock; an allocation may sleep).
        let mut spare =
            if m & qp_mask::STATE != 0 && a.state == QpState::Rtr && this.qp_type == QpType::Rc {
                Some(KBox::new(Conn::new(Config::default()), GFP_KERNEL)?)
            } else {
                None
            };
        {
            let mut g = this.inner.lock();
            let Inner { conn, io, .. } = &mut *g;
            if io.dead {
                return Err(EINVAL);
            }
            let cur = if m & qp_mask::CUR_STATE != 0 {
                a.cur_state
            } else {
                io.attr.state
            };
            let new = if m & qp_mask::STATE != 0 {
                a.state
            } else {
                cur
            };
            if !modify_qp_is_ok(cur, new, this.qp_type, m) {
                return Err(EINVAL);
            }
            if m & qp_mask::PORT != 0 && a.port != 1 {
                return Err(EINVAL);
            }
            if m & qp_mask::PKEY_INDEX != 0 && a.pkey_index != 0 {
                return Err(EINVAL);
            }
            if m & qp_mask::PATH_MTU != 0 && !(1..=5).contains(&a.path_mtu) {
                return Err(EINVAL);
            }
            let max_rd = this.dev.attrs.max_qp_rd_atom;
            if (m & qp_mask::MAX_QP_RD_ATOMIC != 0 && u32::from(a.max_rd_atomic) > max_rd)
                || (m & qp_mask::MAX_DEST_RD_ATOMIC != 0
                    && u32::from(a.max_dest_rd_atomic) > max_rd)
            {
                return Err(EINVAL);
            }
            if m & qp_mask::TIMEOUT != 0 && a.timeout > 31 {
                return Err(EINVAL);
            }
            // Field widths of IBTA 9.7.5.2.8-9 and 10.2.4 (rxe does not check
            // these; the exerciser holds metaroce to IBTA).
            if (m & qp_mask::DEST_QPN != 0 && a.dest_qpn > 0x00ff_ffff)
                || (m & qp_mask::RETRY_CNT != 0 && a.retry_cnt > 7)
                || (m & qp_mask::RNR_RETRY != 0 && a.rnr_retry > 7)
                || (m & qp_mask::MIN_RNR_TIMER != 0 && a.min_rnr_timer > 31)
            {
                return Err(EINVAL);
            }
            // Access bits: the standard ones and the optional range
            // (IB_ACCESS_OPTIONAL, bits 20-29), as rxe_qp_chk_attr allows.
            if m & qp_mask::ACCESS_FLAGS != 0 && a.access & !(0xff | 0x3ff0_0000) != 0 {
                return Err(EINVAL);
            }
            if m & qp_mask::CAP != 0
                && (a.caps.max_send_wr > io.caps.max_send_wr
                    || a.caps.max_recv_wr > io.caps.max_recv_wr
                    || a.caps.max_send_sge > io.caps.max_send_sge
                    || a.caps.max_recv_sge > io.caps.max_recv_sge)
            {
                return Err(EINVAL);
            }
            let t = &mut io.attr;
            macro_rules! take {
                ($bit:expr, $($f:ident),+) => { if m & $bit != 0 { $( t.$f = a.$f; )+ } };
            }
            take!(qp_mask::ACCESS_FLAGS, access);
            take!(qp_mask::QKEY, qkey);
            take!(qp_mask::PATH_MTU, path_mtu);
            take!(qp_mask::RQ_PSN, rq_psn);
            take!(qp_mask::SQ_PSN, sq_psn);
            take!(qp_mask::DEST_QPN, dest_qpn);
            take!(qp_mask::MIN_RNR_TIMER, min_rnr_timer);
            take!(qp_mask::TIMEOUT, timeout);
            take!(qp_mask::RETRY_CNT, retry_cnt);
            take!(qp_mask::RNR_RETRY, rnr_retry);
            take!(qp_mask::MAX_QP_RD_ATOMIC, max_rd_atomic);
            take!(qp_mask::MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
            take!(qp_mask::EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
            if m & qp_mask::AV != 0 {
                t.av = a.av;
                if let Some(av) = a.av {
                    io.src = Some(IpAddr::from_gid(&av.sgid));
                    io.dst = Some(IpAddr::from_gid(&av.dgid));
                }
            }
            if new != cur || m & qp_mask::STATE != 0 {
                io.attr.state = new;
                match new {
                    QpState::Reset => {
                        *conn = None;
                        io.reset();
                    }
                    QpState::Rtr if this.qp_type == QpType::Rc && conn.is_none() => {
                        if let Some(mut c) = spare.take() {
                            *c = Conn::new(this.config(io));
                            *conn = Some(c);
                        }
                    }
                    QpState::Rts => {
                        if let Some(c) = conn.as_mut() {
                            let t = &io.attr;
                            c.set_retry_limits(retry_cnt(t), rnr_retry(t), give_up_ns(t));
                        }
                    }
                    QpState::Err => {
                        let mut app = Glue { qp: this, io };
                        app.flush();
                    }
                    QpState::Sqd => {
                        io.sqd_notify = io.attr.en_sqd_async_notify;
                        let mut app = Glue { qp: this, io };
                        app.sq_drained_check();
                    }
                    _ => {}
                }
            }
        }
        Self::pump(this);
        Ok(())
    }

    fn config(&self, io: &Io) -> Config {
        let mtu = 128u16 << io.attr.path_mtu.clamp(1, 5);
        let t = &io.attr;
        Config {
            local_conn: self.qpn,
            peer_conn: t.dest_qpn,
            paths: PATHS,
            mtu,
            // ECMP entropy: a per-QP base in the dynamic port range.
            base_src_port: 49152 + ((self.qpn.wrapping_mul(2_654_435_761) >> 16) as u16 & 0x3ff8),
            // Guests under emulation have millisecond RTTs: a timer tick
            // (jiffies) is the floor anyway.
            init_rto_ns: 20_000_000,
            min_rto_ns: 4_000_000,
            max_rto_ns: 500_000_000,
            retry_cnt: retry_cnt(t),
            rnr_retry: rnr_retry(t),
            give_up_ns: give_up_ns(t),
            ack_delay_ns: 0,
            pacing: false,
            ..Config::default()
        }
    }

    /// `query_qp`.
    pub(crate) fn query(&self, a: &mut QpAttr, init: &mut QpInit) {
        let g = self.inner.lock();
        *a = g.io.attr;
        a.caps = g.io.caps;
        init.caps = g.io.caps;
        init.qp_type = self.qp_type;
        init.sq_sig_all = self.sq_sig_all;
    }

    /// `destroy_qp`: unlists the QP, stops its timer, flushes its WQEs and
    /// releases its rings (in process context, before the user context can
    /// go away).
    pub(crate) fn destroy(this: &Arc<Self>) {
        let table_ref = if this.qp_type == QpType::Gsi {
            this.dev.transport.remove_gsi(this.dev.ifindex)
        } else {
            this.dev.transport.remove(this.qpn)
        };
        this.timer.shutdown();
        let (sq, rq, conn) = {
            let mut g = this.inner.lock();
            let Inner { conn, io, scratch } = &mut *g;
            // No asynchronous event from a QP being destroyed.
            io.last_wqe_sent = true;
            let mut app = Glue { qp: this, io };
            app.flush();
            // The peer may still wait for the ACK of what this QP received
            // last (applications often destroy right after their last
            // completion): repeat the ACKs once, in case the first was lost.
            if let (Some(c), Some(src), Some(dst)) = (conn.as_mut(), app.io.src, app.io.dst) {
                c.ack_all();
                for _ in 0..crate::proto::conn::MAX_PATHS {
                    let now = Instant(now_ns());
                    let Some(t) = c.poll_transmit(now, scratch, &mut app) else {
                        break;
                    };
                    let len = t.len.min(scratch.len());
                    let _ = this.dev.transport.send(
                        &src,
                        &dst,
                        this.dev.ifindex,
                        t.src_port,
                        t.ect,
                        &scratch[..len],
                    );
                }
            }
            io.dead = true;
            (io.sq.take(), io.rq.take(), conn.take())
        };
        drop((sq, rq, conn, table_ref));
    }

    /// The user doorbell: new WQEs are in the SQ ring.
    pub(crate) fn doorbell(this: &Arc<Self>) -> Result {
        {
            let mut g = this.inner.lock();
            match g.io.attr.state {
                QpState::Rts | QpState::Sqd => {}
                // Posting in the error state succeeds, and the WQEs complete
                // with flush errors (rxe_post_send; IBTA 10.8.3.3).
                QpState::Err if !g.io.dead => {
                    let Inner { io, .. } = &mut *g;
                    Glue { qp: this, io }.flush();
                    return Ok(());
                }
                _ => return Err(EINVAL),
            }
            if this.qp_type.is_datagram() {
                let Inner { io, scratch, .. } = &mut *g;
                let mut app = Glue { qp: this, io };
                app.datagrams_out(scratch);
                app.settle();
                return Ok(());
            }
        }
        Self::pump(this);
        Ok(())
    }

    /// Kernel `ib_post_send`: writes the chain into the SQ ring and rings the
    /// doorbell. `EINVAL` before RTS (as rxe) or for a request
    /// [`SendWrs::write_next`] rejects, `ENOMEM` when the ring is full; the
    /// requests before the failed one are posted. In the error state the
    /// requests complete with flush errors.
    pub(crate) fn post_kernel_send(this: &Arc<Self>, wrs: &mut SendWrs) -> Result {
        let r = {
            let mut g = this.inner.lock();
            let Inner { io, .. } = &mut *g;
            if !this.kernel || io.dead {
                return Err(EINVAL);
            }
            let flush = match io.attr.state {
                QpState::Rts | QpState::Sqd => false,
                QpState::Err => true,
                _ => return Err(EINVAL),
            };
            let sq = io.sq.as_ref().ok_or(EINVAL)?;
            let r = wrs.post(sq, this.qp_type.is_datagram(), &io.caps);
            if flush {
                let mut app = Glue { qp: this, io };
                app.flush();
                return r;
            }
            r
        };
        if crate::ffi::sync::irqs_disabled() {
            // Called with interrupts off (ib_mad posts under an irqsave
            // lock): transmitting needs them on, so the QP's timer sends
            // from softirq, at the next tick.
            Timer::arm(this, now_ns());
            return r;
        }
        Self::doorbell(this)?;
        r
    }

    /// Kernel `ib_post_recv`: writes the chain into the RQ ring. `EINVAL` in
    /// RESET (as rxe), with an SRQ, or for too many SGEs; `ENOMEM` when the
    /// ring is full. In the error state the requests complete with flush
    /// errors.
    pub(crate) fn post_kernel_recv(this: &Arc<Self>, wrs: &mut RecvWrs) -> Result {
        let mut g = this.inner.lock();
        let Inner { io, .. } = &mut *g;
        if !this.kernel || io.dead || io.attr.state == QpState::Reset {
            return Err(EINVAL);
        }
        let r = wrs.post(io.rq.as_ref().ok_or(EINVAL)?, io.caps.max_recv_sge);
        if io.attr.state == QpState::Err {
            let mut app = Glue { qp: this, io };
            app.flush();
        }
        r
    }

    /// Sends whatever the core has to send (at most 256 datagrams per call),
    /// then arms the timer for the core's next deadline.
    fn pump(this: &Arc<Self>) {
        Self::pump_locked(this, this.inner.lock());
    }

    /// [`Self::pump`] with the QP lock already held (`g`), so that what the
    /// caller just did and the datagrams it calls for (the ACK of data whose
    /// completion user space can already see) are one critical section: a
    /// `destroy_qp` racing the receive cannot discard that ACK.
    fn pump_locked(this: &Arc<Self>, mut g: BhGuard<'_, Inner>) {
        let mut budget = 256;
        let next = loop {
            let Inner { conn, io, scratch } = &mut *g;
            let (Some(c), Some(src), Some(dst)) = (conn.as_mut(), io.src, io.dst) else {
                return;
            };
            let now = Instant(now_ns());
            let mut app = Glue { qp: this, io };
            if app.settle() {
                c.abort();
            }
            let t = if budget > 0 {
                c.poll_transmit(now, scratch, &mut app)
            } else {
                None
            };
            let Some(t) = t else {
                // The core's counters, into the device's.
                let st = *c.stats();
                let last = core::mem::replace(&mut io.last_stats, st);
                for (k, n) in [
                    (counter::RETRANSMITS, st.retx.wrapping_sub(last.retx)),
                    (
                        counter::TIMEOUTS,
                        u32::from(st.timeouts.wrapping_sub(last.timeouts)),
                    ),
                    (
                        counter::PATH_MOVES,
                        u32::from(st.moves.wrapping_sub(last.moves)),
                    ),
                    (counter::DUPLICATES, st.dup_rx.wrapping_sub(last.dup_rx)),
                    (
                        counter::SACK_LOSSES,
                        st.sack_lost.wrapping_sub(last.sack_lost),
                    ),
                    (
                        counter::ECN_ECHOED,
                        st.ce_echoed.wrapping_sub(last.ce_echoed),
                    ),
                ] {
                    this.dev.count(k, u64::from(n));
                }
                break c.poll_timeout();
            };
            budget -= 1;
            let len = t.len.min(scratch.len());
            // Sent under the QP lock: the tunnel transmits with bottom halves
            // off, so a datagram to this host is received later, in softirq.
            if this
                .dev
                .transport
                .send(
                    &src,
                    &dst,
                    this.dev.ifindex,
                    t.src_port,
                    t.ect,
                    &scratch[..len],
                )
                .is_ok()
            {
                this.dev.count(counter::TX_PACKETS, 1);
                this.dev.count(counter::TX_BYTES, len as u64);
            }
        };
        drop(g);
        if let Some(at) = next {
            Timer::arm(this, at.as_nanos());
        }
    }
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
/// completes with `IBV_WC_RETRY_EXC_ERR`: `retry_cnt` local ACK timeouts of
/// 4.096 us * 2^`timeout` (IBTA 9.7.6.1.3), `timeout` 0 meaning forever.
fn give_up_ns(t: &QpAttr) -> u64 {
    if t.timeout == 0 {
        return u64::MAX;
    }
    u64::from(retry_cnt(t)).saturating_mul(4096u64 << t.timeout.min(31))
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

/// The verbs side of one connection, as the protocol core sees it.
struct Glue<'a> {
    qp: &'a Qp,
    io: &'a mut Io,
}

impl Glue<'_> {
    fn send_msg(&self, msn: u32) -> Option<SendMsg> {
        let i = (msn as usize).checked_rem(self.io.sends.len())?;
        self.io.sends.get(i).copied()
    }

    /// Marks in-flight send message `msn` as failed with `status` (the
    /// first failure stands).
    fn set_fail(&mut self, msn: u32, status: u32) {
        if let Some(i) = (msn as usize).checked_rem(self.io.sends.len()) {
            if let Some(s) = self.io.sends.get_mut(i) {
                if s.fail == 0 {
                    s.fail = status;
                }
            }
        }
    }

    fn record(&mut self, msn: u32, m: SendMsg) {
        if let Some(i) = (msn as usize).checked_rem(self.io.sends.len()) {
            if let Some(s) = self.io.sends.get_mut(i) {
                *s = m;
            }
        }
    }

    /// Completes the oldest send WQE (in order).
    fn complete_send(&mut self, status: u32) {
        if self.io.sq.is_none() || self.io.sq_msn == self.io.msns {
            return;
        }
        let Some(m) = self.send_msg(self.io.sq_msn) else {
            return;
        };
        let signaled = self.qp.sq_sig_all || m.wqe.send_flags & send_flags::SIGNALED != 0;
        if signaled || status != wc::SUCCESS {
            let opcode = match m.wqe.opcode {
                wr::RDMA_WRITE | wr::RDMA_WRITE_WITH_IMM => wc::OP_RDMA_WRITE,
                wr::RDMA_READ => wc::OP_RDMA_READ,
                wr::ATOMIC_CMP_AND_SWP => wc::OP_COMP_SWAP,
                wr::ATOMIC_FETCH_AND_ADD => wc::OP_FETCH_ADD,
                wr::ATOMIC_WRITE => wc::OP_ATOMIC_WRITE,
                _ => wc::OP_SEND,
            };
            let wc = Wc {
                wr_id: m.wqe.wr_id,
                status,
                opcode,
                byte_len: m.wqe.length,
                qp_num: self.qp.qpn,
                ..Wc::default()
            };
            self.post(&self.qp.scq, &wc, false);
        }
        let Some(sq) = self.io.sq.as_ref() else {
            return;
        };
        self.io.sq_cons = sq.advance(self.io.sq_cons, 1);
        self.io.sq_msn = self.io.sq_msn.wrapping_add(1);
        sq.set_consumer(self.io.sq_cons);
        self.sq_drained_check();
    }

    /// Writes a completion into `cq`; a full CQ loses it, raises
    /// `IB_EVENT_CQ_ERR` and sends the QP to the error state (IBTA 11.4.2.1,
    /// class G; rxe's `rxe_cq_post`), by [`Self::settle`].
    fn post(&self, cq: &Cq, wc: &Wc, solicited: bool) {
        // Only a receive completion lost sends the QP to the error state
        // (responder class G); a lost send completion is the consumer's to
        // hear of through the event, as in rxe.
        if !cq.push(wc, solicited, self.qp.handle) && wc.opcode & wc::OP_RECV != 0 {
            self.io.cq_lost.set(true);
        }
    }

    /// After a receive completion was lost to a full CQ: the QP enters the
    /// error state (once); returns whether it did, so that the caller stops
    /// the connection before it acknowledges what was received (the sender
    /// then times out, as with rxe). Called where no completion is being
    /// written.
    fn settle(&mut self) -> bool {
        if self.io.cq_lost.take() && self.io.attr.state != QpState::Err {
            self.flush();
            self.io.cq_lost.set(false);
            return true;
        }
        false
    }

    /// In SQD with asynchronous notification: raises `IB_EVENT_SQ_DRAINED`
    /// once no send WQE is in progress (IBTA 10.3.1.2).
    fn sq_drained_check(&mut self) {
        if self.io.sqd_notify
            && self.io.attr.state == QpState::Sqd
            && self.io.sq_msn == self.io.msns
        {
            self.io.sqd_notify = false;
            self.qp.events.sq_drained();
        }
    }

    /// Moves the QP to the error state and completes every outstanding WQE:
    /// the oldest send with the error (if any), the rest with
    /// `IB_WC_WR_FLUSH_ERR` (IBTA 10.3.1, 11.4.2.3).
    fn flush(&mut self) {
        self.io.attr.state = QpState::Err;
        // Sends that became messages, then those still only in the ring.
        // The oldest takes the QP's error (a NAK, retries exhausted); a WQE
        // that failed on its own reports its own status; the rest flush.
        let mut first = self.io.error.take();
        while self.io.sq_msn != self.io.msns {
            let own = self.send_msg(self.io.sq_msn).map_or(0, |m| m.fail);
            let status = match (first.take(), own) {
                (_, f) if f != 0 => f,
                (Some(e), _) => e,
                _ => wc::WR_FLUSH_ERR,
            };
            self.complete_send(status);
        }
        if let Some(sq) = self.io.sq.as_ref() {
            let prod = sq.producer();
            let mut i = self.io.sq_cons;
            while i != prod {
                if let Ok(w) = SendWqe::read(sq, i) {
                    self.flushed(&self.qp.scq, w.wr_id, wc::OP_SEND);
                }
                i = sq.advance(i, 1);
            }
            self.io.sq_cons = prod;
            self.io.scan = prod;
            sq.set_consumer(prod);
        }
        if let Some(rq) = self.io.rq.as_ref() {
            let prod = rq.producer();
            let mut i = self.io.rq_cons;
            let mut rsn = self.io.rx_rsn;
            while i != prod {
                if let Ok(w) = RecvWqe::read(rq, i) {
                    self.flushed_rx(rsn, w.wr_id);
                }
                i = rq.advance(i, 1);
                rsn = rsn.wrapping_add(1);
            }
            self.io.rq_cons = prod;
            rq.set_consumer(prod);
        }
        // SRQ WQEs taken by messages that will not complete now.
        for k in 0..RX_TRACK as u32 {
            let rsn = self.io.rx_rsn.wrapping_add(k);
            let i = rsn as usize % RX_TRACK;
            if let Some(t) = self.io.taken.get_mut(i) {
                if t.valid {
                    t.valid = false;
                    let wr_id = t.wr_id;
                    self.flushed_rx(rsn, wr_id);
                }
            }
        }
        self.io.msns = self.io.sq_msn;
        // On an SRQ, the QP takes no more of its WQEs: tell the consumer
        // once per entry into the error state (IBTA 11.6.3.1).
        if self.qp.srq.is_some() && !self.io.last_wqe_sent {
            self.io.last_wqe_sent = true;
            self.qp.events.last_wqe_reached();
        }
    }

    /// The completion of receive `rsn` as the error state discards it: the
    /// status of the error it met, if it is the one that met it (a message
    /// it could not hold), else `IBV_WC_WR_FLUSH_ERR`.
    fn flushed_rx(&self, rsn: u32, wr_id: u64) {
        let status = match self.io.rx_error {
            Some((r, status)) if r == rsn => status,
            _ => wc::WR_FLUSH_ERR,
        };
        let wc = Wc {
            wr_id,
            status,
            opcode: wc::OP_RECV,
            qp_num: self.qp.qpn,
            ..Wc::default()
        };
        self.post(&self.qp.rcq, &wc, false);
    }

    /// Writes the `IBV_WC_WR_FLUSH_ERR` completion of a WQE the error state
    /// discards (IBTA 10.3.1).
    fn flushed(&self, cq: &Cq, wr_id: u64, opcode: u32) {
        let wc = Wc {
            wr_id,
            status: wc::WR_FLUSH_ERR,
            opcode,
            qp_num: self.qp.qpn,
            ..Wc::default()
        };
        self.post(cq, &wc, false);
    }

    /// Copies `dst.len()` bytes at `offset` of the WQE's data into `dst`.
    fn gather(&self, m: &SendMsg, offset: u32, dst: &mut [u8]) -> Result {
        let sq = self.io.sq.as_ref().ok_or(EINVAL)?;
        // ATOMIC_WRITE's 8 bytes are in the WQE (`dma.atomic_wr`, where
        // inline data goes).
        if m.wqe.send_flags & send_flags::INLINE != 0 || m.wqe.opcode == wr::ATOMIC_WRITE {
            return SendWqe::inline_data(sq, m.slot, offset as usize, dst);
        }
        let n = m.wqe.num_sge.min(self.io.caps.max_send_sge);
        self.walk_sges(
            n,
            |i| SendWqe::sge(sq, m.slot, i),
            offset,
            dst.len(),
            |e, off, r| e.read(off, &mut dst[r]),
            0,
        )
    }

    /// Scatters `data` at `offset` of the message into receive WQE `slot`.
    fn scatter(&self, slot: u32, offset: u32, data: &[u8]) -> Result {
        let rq = self.io.rq.as_ref().ok_or(EINVAL)?;
        let w = RecvWqe::read(rq, slot)?;
        if w.num_sge > self.io.caps.max_recv_sge {
            // A malformed WQE in the shared ring (the provider never writes
            // one): IBTA 9.9.3.1.1 class A, local QP operation error.
            return Err(E2BIG);
        }
        self.walk_sges(
            w.num_sge,
            |i| RecvWqe::sge(rq, slot, i),
            offset,
            data.len(),
            |e, off, r| e.write(off, &data[r]),
            access::LOCAL_WRITE,
        )
    }

    /// Scatters `data` at `offset` of the message into the SRQ WQE taken
    /// into entry `i`.
    fn scatter_taken(&self, i: usize, offset: u32, data: &[u8]) -> Result {
        let t = self.io.taken.get(i).copied().ok_or(EINVAL)?;
        let ms = self.io.srq_sge;
        let sges = self.io.taken_sges.get(i * ms..(i + 1) * ms).ok_or(EINVAL)?;
        if t.num_sge > ms as u32 {
            // A malformed SRQ WQE (see `scatter`).
            return Err(E2BIG);
        }
        self.walk_sges(
            t.num_sge,
            |k| sges.get(k as usize).copied().ok_or(EINVAL),
            offset,
            data.len(),
            |e, off, r| e.write(off, &data[r]),
            access::LOCAL_WRITE,
        )
    }

    /// Scatters response data (READ, atomic) into the SGEs of send WQE `m`.
    fn scatter_send(&self, m: &SendMsg, offset: u32, data: &[u8]) -> Result {
        let sq = self.io.sq.as_ref().ok_or(EINVAL)?;
        let n = m.wqe.num_sge.min(self.io.caps.max_send_sge);
        self.walk_sges(
            n,
            |i| SendWqe::sge(sq, m.slot, i),
            offset,
            data.len(),
            |e, off, r| e.write(off, &data[r]),
            access::LOCAL_WRITE,
        )
    }

    /// Maps bytes `[offset, offset + len)` of a WQE's data onto its `n`
    /// SGEs (`sge(i)`), and calls `f(region, offset_in_region, range)` for
    /// each piece under the MR table lock, after checking the lkey, the PD
    /// and `need` access. `EFAULT` if the SGEs are shorter than the data.
    fn walk_sges(
        &self,
        n: u32,
        sge: impl Fn(u32) -> Result<Sge>,
        offset: u32,
        len: usize,
        mut f: impl FnMut(&MrEntry, usize, core::ops::Range<usize>) -> Result,
        need: u32,
    ) -> Result {
        let mut skip = offset as usize;
        let mut done = 0;
        for i in 0..n {
            if done == len {
                break;
            }
            let s = sge(i)?;
            let sl = s.length as usize;
            if skip >= sl {
                skip -= sl;
                continue;
            }
            let take = (sl - skip).min(len - done);
            let va = s.addr.checked_add(skip as u64).ok_or(EFAULT)?;
            let pd = self.qp.pd;
            self.qp.dev.mrs.with(s.lkey, |e| {
                let off = e.check(pd, va, take, need)?;
                f(e, off, done..done + take)
            })?;
            done += take;
            skip = 0;
        }
        if done == len {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }

    /// A SEND's bytes do not fit receive `rsn` (`EFAULT`: longer than its
    /// SGEs) or its SGEs are not usable (a bad lkey or access): IBTA
    /// 9.7.5.2.4 responder error. The receive completes with
    /// `IBV_WC_LOC_LEN_ERR` / `IBV_WC_LOC_PROT_ERR` as the QP enters the
    /// error state, and the requester is NAKed with an invalid request
    /// (`IBV_WC_REM_INV_REQ_ERR`), as rxe does.
    fn cannot_place(&mut self, rsn: u32, e: Error) -> Refuse {
        let status = if e == EFAULT {
            LOC_LEN_ERR
        } else if e == E2BIG {
            wc::LOC_QP_OP_ERR
        } else {
            wc::LOC_PROT_ERR
        };
        self.io.rx_error = Some((rsn, status));
        self.flush();
        Refuse::Invalid
    }

    /// A request this responder refuses for good (IBTA 9.9.3.1.2 class C:
    /// invalid request, remote access error): the requester is NAKed with
    /// `r`, and this QP enters the error state (rxe's `do_class_ac_error`).
    fn responder_error(&mut self, r: Refuse) -> Refuse {
        self.flush();
        r
    }

    fn rx_slot(&mut self, msn: u32) -> Option<&mut RxMsg> {
        self.io.rx.get_mut(msn as usize % RX_TRACK)
    }
}

fn consumes_recv(op: Op) -> bool {
    matches!(op, Op::Send | Op::SendImm | Op::SendInv | Op::WriteImm)
}

impl Glue<'_> {
    /// The SQ's next WQE as the message `msn` of stream 0, if posted.
    fn next_request(&mut self, msn: u32) -> Option<MsgInfo> {
        if msn.wrapping_sub(self.io.sq_msn) < self.io.msns.wrapping_sub(self.io.sq_msn) {
            return self.send_msg(msn).map(|m| m.info);
        }
        if msn != self.io.msns || self.io.error.is_some() {
            return None;
        }
        if !matches!(self.io.attr.state, QpState::Rts) {
            return None;
        }
        let (w, slot) = loop {
            let sq = self.io.sq.as_ref()?;
            let slot = self.io.scan;
            if slot == sq.producer() {
                return None;
            }
            let w = SendWqe::read(sq, slot).ok()?;
            // IBV_SEND_FENCE: wait until earlier READs and atomics are done.
            if w.send_flags & send_flags::FENCE != 0 && self.responses_pending() {
                return None;
            }
            if !matches!(w.opcode, wr::BIND_MW | wr::LOCAL_INV | wr::REG_MR) {
                break (w, slot);
            }
            // Local operations complete in SQ order: run one only once
            // every earlier WQE has completed.
            if self.io.sq_msn != self.io.msns {
                return None;
            }
            let status = self.local_op(&w);
            let signaled = self.qp.sq_sig_all || w.send_flags & send_flags::SIGNALED != 0;
            if signaled || status != wc::SUCCESS {
                self.post(
                    &self.qp.scq,
                    &Wc {
                        wr_id: w.wr_id,
                        status,
                        opcode: match w.opcode {
                            wr::BIND_MW => wc::OP_BIND_MW,
                            wr::REG_MR => wc::OP_REG_MR,
                            _ => wc::OP_LOCAL_INV,
                        },
                        qp_num: self.qp.qpn,
                        ..Wc::default()
                    },
                    false,
                );
            }
            let next = sq.advance(slot, 1);
            self.io.scan = next;
            self.io.sq_cons = next;
            sq.set_consumer(next);
            if status != wc::SUCCESS {
                self.flush();
                return None;
            }
        };
        let rdma = Reth {
            va: w.remote_addr,
            rkey: w.rkey,
            len: w.length,
        };
        let atomic = Reth {
            va: w.remote_addr,
            rkey: w.atomic_rkey,
            len: 8,
        };
        let (op, reth, len) = match w.opcode {
            wr::SEND => (Op::Send, Reth::default(), w.length),
            wr::SEND_WITH_IMM => (Op::SendImm, Reth::default(), w.length),
            wr::SEND_WITH_INV => (Op::SendInv, Reth::default(), w.length),
            wr::RDMA_WRITE => (Op::Write, rdma, w.length),
            wr::ATOMIC_WRITE => (Op::AtomicWrite, Reth { len: 8, ..rdma }, 8),
            wr::RDMA_WRITE_WITH_IMM => (Op::WriteImm, rdma, w.length),
            wr::RDMA_READ => (Op::ReadReq, rdma, 0),
            wr::ATOMIC_CMP_AND_SWP => (Op::AtomicCmpSwap, atomic, 16),
            wr::ATOMIC_FETCH_AND_ADD => (Op::AtomicFetchAdd, atomic, 8),
            // Anything else (FLUSH …) is not carried.
            _ => return self.refuse(msn, w, slot, wc::LOC_QP_OP_ERR),
        };
        let inline = w.send_flags & send_flags::INLINE != 0;
        let is_atomic = matches!(op, Op::AtomicCmpSwap | Op::AtomicFetchAdd);
        if w.num_sge > self.io.caps.max_send_sge
            || (inline && w.length > self.io.caps.max_inline_data)
            || w.length > (1 << 31)
            || (is_atomic && w.length < 8)
            || (op == Op::AtomicWrite && w.length != 8)
        {
            return self.refuse(msn, w, slot, wc::LOC_QP_OP_ERR);
        }
        // The bytes a request carries must all be readable before any of
        // them is sent (a bad lkey, another PD's MR, an SGE past its MR):
        // otherwise nothing is sent and the WQE completes with a local
        // protection error (rxe's `finish_packet`).
        let gathers = matches!(
            op,
            Op::Send | Op::SendImm | Op::SendInv | Op::Write | Op::WriteImm
        ) && !inline;
        if gathers && self.check_gather(&w, slot).is_err() {
            return self.refuse(msn, w, slot, wc::LOC_PROT_ERR);
        }
        let needs_resp = matches!(op, Op::ReadReq) || is_atomic;
        // At most `max_rd_atomic` READs and atomics outstanding (IBTA
        // 9.7.3.1.3 initiator depth; rxe's `check_init_depth`).
        let depth = u32::from(self.io.attr.max_rd_atomic.max(1));
        if needs_resp && self.io.tx_reads.wrapping_sub(self.io.reads_done) >= depth {
            return None;
        }
        let tag = if consumes_recv(op) {
            let t = self.io.tx_rsn as u16;
            self.io.tx_rsn = self.io.tx_rsn.wrapping_add(1);
            t
        } else {
            0
        };
        if needs_resp {
            let k = self.io.tx_reads;
            self.io.tx_reads = k.wrapping_add(1);
            if let Some(i) = (k as usize).checked_rem(self.io.reads.len()) {
                if let Some(r) = self.io.reads.get_mut(i) {
                    *r = msn;
                }
            }
        }
        let info = MsgInfo {
            op,
            len,
            reth,
            // Immediate data is stored in network order; SEND_WITH_INV's
            // rkey in host order.
            imm: if op == Op::SendInv {
                w.ex
            } else {
                u32::from_be(w.ex)
            },
            tag,
            solicited: w.send_flags & send_flags::SOLICITED != 0,
        };
        self.record(
            msn,
            SendMsg {
                wqe: w,
                info,
                slot,
                acked: false,
                needs_resp,
                resp_done: false,
                fail: 0,
            },
        );
        self.io.msns = self.io.msns.wrapping_add(1);
        self.advance_scan(slot);
        Some(info)
    }

    /// A WQE that cannot be carried out: once every earlier WQE has
    /// completed (completions stay in SQ order), it completes with `status`
    /// and the QP goes to the error state; nothing of it is sent.
    fn refuse(&mut self, msn: u32, w: SendWqe, slot: u32, status: u32) -> Option<MsgInfo> {
        if self.io.sq_msn != self.io.msns {
            return None;
        }
        self.io.msns = self.io.msns.wrapping_add(1);
        self.advance_scan(slot);
        self.record(
            msn,
            SendMsg {
                wqe: w,
                slot,
                fail: status,
                ..SendMsg::default()
            },
        );
        self.flush();
        None
    }

    /// Whether every byte send WQE `w` (in SQ slot `slot`) gathers lies in
    /// an MR of the QP's PD that the lkey names.
    fn check_gather(&self, w: &SendWqe, slot: u32) -> Result {
        let sq = self.io.sq.as_ref().ok_or(EINVAL)?;
        self.walk_sges(
            w.num_sge,
            |i| SendWqe::sge(sq, slot, i),
            0,
            w.length as usize,
            |_, _, _| Ok(()),
            0,
        )
    }

    fn advance_scan(&mut self, slot: u32) {
        if let Some(sq) = self.io.sq.as_ref() {
            self.io.scan = sq.advance(slot, 1);
        }
    }

    /// Whether a READ or atomic sent earlier still waits for its response.
    fn responses_pending(&self) -> bool {
        let n = self.io.msns.wrapping_sub(self.io.sq_msn);
        (0..n).any(|k| {
            self.send_msg(self.io.sq_msn.wrapping_add(k))
                .is_some_and(|m| m.needs_resp && !m.resp_done)
        })
    }

    /// Runs a local operation (BIND_MW, LOCAL_INV, REG_MR); returns its
    /// status (rxe's: `IB_WC_LOC_QP_OP_ERR` for a failed REG_MR or MR
    /// invalidation, `IB_WC_MW_BIND_ERR` for a window).
    fn local_op(&self, w: &SendWqe) -> u32 {
        let pd = self.qp.pd;
        if w.opcode == wr::REG_MR {
            // Fast registration is for kernel consumers (rxe's provider
            // never emits it; a user WQE naming a kernel MR fails the PD
            // check).
            return match self
                .qp
                .dev
                .mrs
                .register(pd, w.reg_mr_key, w.reg_key, w.reg_access)
            {
                Ok(()) => wc::SUCCESS,
                Err(_) => wc::LOC_QP_OP_ERR,
            };
        }
        if w.opcode == wr::LOCAL_INV {
            // `ex` is `invalidate_rkey` for LOCAL_INV: a window's or a
            // fast-registration MR's key.
            return if w.ex >> 8 >= MW_BASE {
                match self.qp.dev.mws.invalidate(pd, w.ex) {
                    Ok(()) => wc::SUCCESS,
                    Err(_) => wc::MW_BIND_ERR,
                }
            } else {
                match self.qp.dev.mrs.invalidate(pd, w.ex) {
                    Ok(()) => wc::SUCCESS,
                    Err(_) => wc::LOC_QP_OP_ERR,
                }
            };
        }
        let (va, len) = (w.remote_addr, w.mw_length);
        // C10-74: remote write or atomic access through a window needs
        // local write access to its MR.
        let mut need = access::MW_BIND;
        if w.mw_access & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0 {
            need |= access::LOCAL_WRITE;
        }
        let in_mr = self.qp.dev.mrs.with(w.mw_mr_lkey, |e| {
            let l = usize::try_from(len).map_err(|_| EINVAL)?;
            e.check(pd, va, l, need).map(|_| ())
        });
        if in_mr.is_err() {
            return wc::MW_BIND_ERR;
        }
        let b = Binding {
            mr_key: w.mw_mr_lkey,
            va,
            len,
            access: w.mw_access,
        };
        match self
            .qp
            .dev
            .mws
            .bind(pd, self.qp.qpn, w.mw_rkey, w.mw_new_rkey, b)
        {
            Ok(()) => wc::SUCCESS,
            Err(_) => wc::MW_BIND_ERR,
        }
    }

    /// Runs `f` on the MR that remote key `rkey` opens for `[va, va + len)`
    /// with `need` access, and the offset of `va` in it: an MR's own rkey,
    /// or a bound memory window's (checked against the window first).
    fn remote<R>(
        &self,
        rkey: u32,
        va: u64,
        len: usize,
        need: u32,
        f: impl FnOnce(&MrEntry, usize) -> Result<R>,
    ) -> Result<R> {
        let pd = self.qp.pd;
        if rkey >> 8 >= MW_BASE {
            let b = self
                .qp
                .dev
                .mws
                .resolve(pd, self.qp.qpn, rkey)
                .ok_or(EACCES)?;
            let end = va.checked_add(len as u64).ok_or(EFAULT)?;
            if va < b.va || end > b.va.saturating_add(b.len) || b.access & need != need {
                return Err(EACCES);
            }
            return self.qp.dev.mrs.with(b.mr_key, |e| {
                let off = e.check(pd, va, len, 0)?;
                f(e, off)
            });
        }
        self.qp.dev.mrs.with(rkey, |e| {
            let off = e.check(pd, va, len, need)?;
            f(e, off)
        })
    }

    /// Completes, in SQ order, every WQE whose request is acknowledged and
    /// whose response (READ, atomic) is whole.
    fn complete_sends(&mut self) {
        while self.io.sq_msn != self.io.msns {
            let Some(m) = self.send_msg(self.io.sq_msn) else {
                return;
            };
            if m.fail != 0 {
                // The oldest WQE failed: it completes with its status, the
                // QP enters the error state and the rest flush.
                self.flush();
                return;
            }
            if !m.acked || (m.needs_resp && !m.resp_done) {
                return;
            }
            self.complete_send(wc::SUCCESS);
        }
    }

    /// The send message a response number `k` answers.
    fn read_msn(&self, k: u32) -> Option<u32> {
        let i = (k as usize).checked_rem(self.io.reads.len())?;
        self.io.reads.get(i).copied()
    }

    fn resp(&self, k: u32) -> Option<Resp> {
        let i = (k as usize).checked_rem(RESP_SLOTS)?;
        self.io.resps.get(i).copied()
    }

    /// Responder: a READ or atomic request is complete (exactly once):
    /// queue its response, executing an atomic now.
    fn answer(&mut self, r: &RxMsg) {
        let k = self.io.resp_next;
        let mut resp = Resp {
            op: Op::ReadResp,
            va: r.reth.va,
            rkey: r.reth.rkey,
            len: r.reth.len,
            data: [0; 8],
            status: 0,
        };
        if r.op == Op::ReadReq {
            // Checked again now that it executes: the key may have been
            // invalidated or the MR deregistered since the request arrived.
            let ok = self.io.attr.access & access::REMOTE_READ != 0
                && (r.reth.len == 0
                    || self
                        .remote(
                            r.reth.rkey,
                            r.reth.va,
                            r.reth.len as usize,
                            access::REMOTE_READ,
                            |_, _| Ok(()),
                        )
                        .is_ok());
            if !ok {
                resp.status = resp_status::ACCESS;
            }
        } else {
            resp.op = Op::AtomicResp;
            resp.len = 8;
            let ok = self.io.attr.access & access::REMOTE_ATOMIC != 0;
            let ops = r.operands;
            let cas = r.op == Op::AtomicCmpSwap;
            // Checked and executed under one hold of the MR table: the
            // region cannot go away between the check and the operation.
            let res = self.remote(
                r.reth.rkey,
                r.reth.va,
                8,
                access::REMOTE_ATOMIC,
                |e, off| {
                    if !ok {
                        return Err(EACCES);
                    }
                    let mut cur = [0u8; 8];
                    e.read(off, &mut cur)?;
                    let old = u64::from_ne_bytes(cur);
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&ops[..8]);
                    let first = u64::from_be_bytes(a);
                    let new = if cas {
                        let mut c = [0u8; 8];
                        c.copy_from_slice(&ops[8..]);
                        // Payload: swap, then compare.
                        if old == u64::from_be_bytes(c) {
                            first
                        } else {
                            old
                        }
                    } else {
                        old.wrapping_add(first)
                    };
                    e.write(off, &new.to_ne_bytes())?;
                    Ok(old)
                },
            );
            match res {
                Ok(old) => resp.data = old.to_be_bytes(),
                // Memory untouched; the requester gets a remote access
                // error, never an original value that was not read.
                Err(_) => resp.status = resp_status::ACCESS,
            }
        }
        if let Some(i) = (k as usize).checked_rem(RESP_SLOTS) {
            if let Some(slot) = self.io.resps.get_mut(i) {
                *slot = resp;
            }
        }
        self.io.resp_next = k.wrapping_add(1);
    }
}

/// Bytes of the GRH area at the start of every UD receive buffer (IBTA
/// 11.4.1.1: 40 bytes, the IPv4 header in its last 20 for RoCE v2 over IPv4).
const GRH_LEN: usize = 40;

impl Glue<'_> {
    /// UD: sends every new WQE of the SQ as one DATAGRAM packet and
    /// completes it (UD is unreliable: at once).
    fn datagrams_out(&mut self, scratch: &mut [u8]) {
        use crate::proto::wire::{DatagramHeader, DATAGRAM_LEN, GF_IMM, GF_SE};
        loop {
            let Some(sq) = self.io.sq.as_ref() else {
                return;
            };
            let slot = self.io.sq_cons;
            if slot == sq.producer() {
                return;
            }
            let Ok(w) = SendWqe::read(sq, slot) else {
                return;
            };
            let mut status = wc::SUCCESS;
            let ah = self.qp.dev.ahs.get(w.ah_num).filter(|a| a.pd == self.qp.pd);
            let len = w.length as usize;
            let room = scratch
                .len()
                .saturating_sub(DATAGRAM_LEN)
                .min(UD_MAX_PAYLOAD);
            let imm = w.opcode == wr::SEND_WITH_IMM;
            match ah {
                _ if w.opcode != wr::SEND && !imm => status = wc::LOC_QP_OP_ERR,
                _ if w.num_sge > self.io.caps.max_send_sge => status = wc::LOC_QP_OP_ERR,
                // IBTA C10-93.1.1: a UD message longer than the MTU emits
                // no packet and generates no error (rxe does the same).
                _ if len > room => {}
                None => status = wc::LOC_QP_OP_ERR,
                Some(ah) => {
                    let qkey = if w.ud_qkey & 0x8000_0000 != 0 {
                        self.io.attr.qkey
                    } else {
                        w.ud_qkey
                    };
                    let h = DatagramHeader {
                        dst_qpn: w.ud_qpn & 0x00ff_ffff,
                        src_qpn: self.qp.qpn,
                        qkey,
                        flags: if imm { GF_IMM } else { 0 }
                            | if w.send_flags & send_flags::SOLICITED != 0 {
                                GF_SE
                            } else {
                                0
                            },
                        payload_len: len as u16,
                        imm: u32::from_be(w.ex),
                        stamp: now_ns() as u32,
                    };
                    let m = SendMsg {
                        wqe: w,
                        slot,
                        ..SendMsg::default()
                    };
                    let ok = h.encode(scratch).is_some()
                        && self
                            .gather(&m, 0, &mut scratch[DATAGRAM_LEN..DATAGRAM_LEN + len])
                            .is_ok();
                    if !ok {
                        status = wc::LOC_PROT_ERR;
                    } else {
                        let (src, dst) =
                            (IpAddr::from_gid(&ah.av.sgid), IpAddr::from_gid(&ah.av.dgid));
                        let sport = 49152 + (self.qp.qpn & 0x3fff) as u16;
                        match self.qp.dev.transport.send(
                            &src,
                            &dst,
                            self.qp.dev.ifindex,
                            sport,
                            true,
                            &scratch[..DATAGRAM_LEN + len],
                        ) {
                            Ok(()) => {
                                self.qp.dev.count(counter::TX_PACKETS, 1);
                                self.qp
                                    .dev
                                    .count(counter::TX_BYTES, (DATAGRAM_LEN + len) as u64);
                            }
                            // No route to the AH's address: a local QP
                            // operation error (rxe fails the WQE when it
                            // cannot build the packet); a datagram lost
                            // any other way is UD's to lose.
                            Err(e) if crate::ffi::net::is_unreachable(e) => {
                                status = wc::LOC_QP_OP_ERR;
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            let signaled = self.qp.sq_sig_all || w.send_flags & send_flags::SIGNALED != 0;
            if signaled || status != wc::SUCCESS {
                self.post(
                    &self.qp.scq,
                    &Wc {
                        wr_id: w.wr_id,
                        status,
                        opcode: wc::OP_SEND,
                        byte_len: w.length,
                        qp_num: self.qp.qpn,
                        ..Wc::default()
                    },
                    false,
                );
            }
            self.io.sq_cons = sq.advance(slot, 1);
            sq.set_consumer(self.io.sq_cons);
            if status != wc::SUCCESS {
                self.flush();
                return;
            }
        }
    }

    /// UD: one received DATAGRAM into the next posted receive, after the
    /// 40-byte GRH area (IBTA 11.4.1.1).
    fn datagram_in(&mut self, pkt: &[u8], meta: &RxMeta) -> Result {
        let (h, payload) = crate::proto::wire::decode_datagram(pkt).map_err(|_| EINVAL)?;
        if !matches!(
            self.io.attr.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd
        ) || h.qkey != self.io.attr.qkey
        {
            return Err(EINVAL);
        }
        // The receive: the RQ's next, or the SRQ's (into entry 0 of `taken`,
        // which only RC QPs index by RSN). None posted: UD drops (IBTA
        // 10.7.2.2).
        let slot = self.io.rq_cons;
        let wr_id = match self.qp.srq.as_ref() {
            Some(srq) => {
                let ms = self.io.srq_sge;
                let sl = self.io.taken_sges.get_mut(..ms).ok_or(EINVAL)?;
                let (wr_id, num_sge) = srq.take(sl).ok_or(ENOMEM)?;
                let t = self.io.taken.get_mut(0).ok_or(EINVAL)?;
                *t = Taken {
                    valid: true,
                    wr_id,
                    num_sge,
                };
                wr_id
            }
            None => {
                let rq = self.io.rq.as_ref().ok_or(EINVAL)?;
                if slot == rq.producer() {
                    return Err(ENOMEM);
                }
                RecvWqe::read(rq, slot)?.wr_id
            }
        };
        let mut grh = [0u8; GRH_LEN];
        match (meta.src, meta.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                // The IPv4 header, as RoCE v2 receivers see it.
                let total = (20 + 8 + pkt.len()) as u16;
                grh[20] = 0x45;
                grh[22..24].copy_from_slice(&total.to_be_bytes());
                grh[28] = 64;
                grh[29] = 17;
                grh[32..36].copy_from_slice(&s);
                grh[36..40].copy_from_slice(&d);
                let sum = ipv4_checksum(&grh[20..40]);
                grh[30..32].copy_from_slice(&sum.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                grh[0] = 0x60;
                grh[4..6].copy_from_slice(&((8 + pkt.len()) as u16).to_be_bytes());
                grh[6] = 17;
                grh[7] = 64;
                grh[8..24].copy_from_slice(&s);
                grh[24..40].copy_from_slice(&d);
            }
            _ => {}
        }
        let fits = if self.qp.srq.is_some() {
            self.scatter_taken(0, 0, &grh).is_ok()
                && self.scatter_taken(0, GRH_LEN as u32, payload).is_ok()
        } else {
            self.scatter(slot, 0, &grh).is_ok()
                && self.scatter(slot, GRH_LEN as u32, payload).is_ok()
        };
        let imm = h.flags & crate::proto::wire::GF_IMM != 0;
        // Kernel consumers (the MAD layer building a reply's AH with
        // `ib_init_ah_attr_from_wc`) learn which IP header the GRH area holds.
        let (net_type, net_flag) = match (self.qp.kernel, meta.src) {
            (false, _) => (0, 0),
            (true, IpAddr::V4(_)) => (NET_IPV4, WC_WITH_NETWORK_HDR_TYPE),
            (true, IpAddr::V6(_)) => (NET_IPV6, WC_WITH_NETWORK_HDR_TYPE),
        };
        self.post(
            &self.qp.rcq,
            &Wc {
                wr_id,
                status: if fits { wc::SUCCESS } else { LOC_LEN_ERR },
                opcode: wc::OP_RECV,
                byte_len: (GRH_LEN + payload.len()) as u32,
                ex: if imm { h.imm.to_be() } else { 0 },
                qp_num: self.qp.qpn,
                src_qp: h.src_qpn,
                wc_flags: WC_GRH | net_flag | if imm { wc::WITH_IMM } else { 0 },
                net_type,
            },
            h.flags & crate::proto::wire::GF_SE != 0,
        );
        if let Some(t) = self.io.taken.get_mut(0) {
            t.valid = false;
        }
        if let (None, Some(rq)) = (self.qp.srq.as_ref(), self.io.rq.as_ref()) {
            self.io.rq_cons = rq.advance(slot, 1);
            rq.set_consumer(self.io.rq_cons);
        }
        Ok(())
    }
}

/// `IB_WC_LOC_LEN_ERR`.
const LOC_LEN_ERR: u32 = 1;
/// `IB_WC_GRH`.
const WC_GRH: u32 = 1;
/// `IB_WC_WITH_NETWORK_HDR_TYPE`.
const WC_WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;
/// `RDMA_NETWORK_IPV4`, `RDMA_NETWORK_IPV6` (`enum rdma_network_type`).
const NET_IPV4: u8 = 2;
const NET_IPV6: u8 = 3;

/// The IPv4 header checksum (RFC 791) of `h`, whose checksum field is zero.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
/// Largest UD payload: one IB MTU of 4096 bytes.
const UD_MAX_PAYLOAD: usize = 4096;

impl App for Glue<'_> {
    fn message(&mut self, stream: u16, msn: u32) -> Option<MsgInfo> {
        if stream == REQ {
            return self.next_request(msn);
        }
        if msn.wrapping_sub(self.io.resp_acked)
            >= self.io.resp_next.wrapping_sub(self.io.resp_acked)
        {
            return None;
        }
        let r = self.resp(msn)?;
        Some(MsgInfo {
            op: r.op,
            len: if r.status != 0 { 0 } else { r.len },
            tag: r.status,
            ..MsgInfo::default()
        })
    }

    fn payload(
        &mut self,
        stream: u16,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> core::result::Result<(), Unreadable> {
        if stream == RESP {
            let Some(r) = self.resp(msn) else {
                return Err(Unreadable::Local);
            };
            if r.status != 0 || dst.is_empty() {
                // A refused request's zero-length answer: nothing to read.
                return Ok(());
            }
            if r.op == Op::AtomicResp {
                let o = (offset as usize).min(8);
                let n = dst.len().min(8 - o);
                dst[..n].copy_from_slice(&r.data[o..o + n]);
                return Ok(());
            }
            let ok = self.io.attr.access & access::REMOTE_READ != 0;
            let va = r.va.wrapping_add(u64::from(offset));
            let n = dst.len();
            // Read again on every (re)transmission, checked again each
            // time: memory deregistered or a window invalidated since the
            // request was executed is never read (or sent as zeros); the
            // requester is NAKed instead (rxe re-checks in `read_reply`).
            let res = self.remote(r.rkey, va, n, access::REMOTE_READ, |e, off| {
                if !ok {
                    return Err(EACCES);
                }
                e.read(off, dst)
            });
            return res.map_err(|_| Unreadable::Remote);
        }
        let Some(m) = self.send_msg(msn) else {
            return Err(Unreadable::Local);
        };
        let res = match m.info.op {
            Op::AtomicCmpSwap | Op::AtomicFetchAdd => {
                // Payload: swap (or addend), then compare, big-endian.
                let (first, second) = if m.info.op == Op::AtomicCmpSwap {
                    (m.wqe.swap, m.wqe.compare_add)
                } else {
                    (m.wqe.compare_add, 0)
                };
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&first.to_be_bytes());
                b[8..].copy_from_slice(&second.to_be_bytes());
                let o = (offset as usize).min(16);
                let n = dst.len().min(16 - o);
                dst[..n].copy_from_slice(&b[o..o + n]);
                Ok(())
            }
            _ => self.gather(&m, offset, dst),
        };
        if res.is_err() {
            // Its memory went away after the WQE was checked (deregistered
            // while in flight): nothing more of it is sent, and the WQE
            // completes with a local protection error.
            self.set_fail(msn, wc::LOC_PROT_ERR);
            return Err(Unreadable::Local);
        }
        Ok(())
    }

    fn place(&mut self, p: &Placement<'_>) -> core::result::Result<(), Refuse> {
        let min_rnr = self.io.attr.min_rnr_timer;
        if p.stream == RESP {
            // Requester: READ data or an atomic's original value, for the
            // WQE this response answers.
            let Some(msn) = self.read_msn(p.msn) else {
                return Ok(());
            };
            let Some(m) = self.send_msg(msn) else {
                return Ok(());
            };
            if p.tag == resp_status::ACCESS {
                // The responder could not serve it (its memory went away
                // between the request's check and its execution).
                self.set_fail(msn, wc::REM_ACCESS_ERR);
                self.complete_sends();
                return Ok(());
            }
            let len = if p.op == Op::AtomicResp {
                8
            } else {
                m.wqe.length
            };
            // An atomic's original value travels big-endian; the WQE's
            // buffer gets it in host order, as an 8-byte integer.
            let mut v = [0u8; 8];
            let data = if p.op == Op::AtomicResp && p.payload.len() == 8 && p.offset == 0 {
                v.copy_from_slice(p.payload);
                v = u64::from_be_bytes(v).to_ne_bytes();
                &v[..]
            } else {
                p.payload
            };
            if p.offset as usize + data.len() > len as usize {
                // More than the WQE asked for: the peer is broken.
                self.qp.dev.count(counter::RX_DROPS, 1);
                return Ok(());
            }
            if self.scatter_send(&m, p.offset, data).is_err() {
                // The READ's or atomic's local SGEs cannot take the data (bad
                // lkey, no LOCAL_WRITE, past the MR): a local protection
                // error, never a success with nothing placed (rxe_comp).
                self.set_fail(msn, wc::LOC_PROT_ERR);
                self.complete_sends();
            }
            return Ok(());
        }
        if matches!(p.op, Op::ReadReq | Op::AtomicCmpSwap | Op::AtomicFetchAdd) {
            // Every response owed must have its own slot until acknowledged:
            // those already queued, plus one for each request-stream message
            // from the next to complete up to this one (each may be a READ
            // or atomic, answered in that order).
            let owed = self.io.resp_next.wrapping_sub(self.io.resp_acked);
            let ahead = p.msn.wrapping_sub(self.io.rx_msn);
            if owed.saturating_add(ahead) as usize >= RESP_SLOTS {
                return Err(Rnr(min_rnr).into());
            }
        }
        // The QP's own access rights first (rxe's `check_qp_attr_access`):
        // an operation the QP does not take is an invalid request, whatever
        // its length; then alignment, then the key (IBTA 9.7.5.1.3, C9-88).
        // Refusals are class C responder errors: the requester is NAKed and
        // this QP enters the error state too.
        let qp_access = self.io.attr.access;
        let need_qp = match p.op {
            Op::Write | Op::WriteImm | Op::AtomicWrite => access::REMOTE_WRITE,
            Op::ReadReq => access::REMOTE_READ,
            Op::AtomicCmpSwap | Op::AtomicFetchAdd => access::REMOTE_ATOMIC,
            _ => 0,
        };
        if qp_access & need_qp != need_qp {
            return Err(self.responder_error(Refuse::Invalid));
        }
        let r = p.reth.unwrap_or_default();
        let key_ok = match p.op {
            Op::AtomicWrite if p.offset != 0 || p.payload.len() != 8 || r.va % 8 != 0 => {
                return Err(self.responder_error(Refuse::Invalid));
            }
            Op::AtomicCmpSwap | Op::AtomicFetchAdd if r.va % 8 != 0 => {
                // rxe: RESPST_ERR_MISALIGNED_ATOMIC, NAK invalid request.
                return Err(self.responder_error(Refuse::Invalid));
            }
            // (A zero-length RDMA WRITE validates no R_Key, IBTA 9.7.4.1.4.)
            // ATOMIC_WRITE: one aligned 8-byte copy into the page.
            Op::Write | Op::WriteImm | Op::AtomicWrite if !p.payload.is_empty() => {
                let va = r.va.wrapping_add(u64::from(p.offset));
                self.remote(
                    r.rkey,
                    va,
                    p.payload.len(),
                    access::REMOTE_WRITE,
                    |e, off| e.write(off, p.payload),
                )
                .is_ok()
            }
            Op::ReadReq if r.len != 0 => self
                .remote(r.rkey, r.va, r.len as usize, access::REMOTE_READ, |_, _| {
                    Ok(())
                })
                .is_ok(),
            Op::AtomicCmpSwap | Op::AtomicFetchAdd => self
                .remote(r.rkey, r.va, 8, access::REMOTE_ATOMIC, |_, _| Ok(()))
                .is_ok(),
            _ => true,
        };
        if !key_ok {
            return Err(self.responder_error(Refuse::Access));
        }
        if consumes_recv(p.op) {
            // The RSN's low 16 bits are in the tag; rebuild it against the
            // oldest receive not yet completed.
            let base = self.io.rx_rsn;
            let rsn = base.wrapping_add(u32::from(p.tag.wrapping_sub(base as u16)));
            let ahead = rsn.wrapping_sub(base);
            if let Some(srq) = self.qp.srq.as_ref() {
                if ahead as usize >= RX_TRACK {
                    return Err(Rnr(min_rnr).into());
                }
                let i = rsn as usize % RX_TRACK;
                let ms = self.io.srq_sge;
                if !self.io.taken.get(i).is_some_and(|t| t.valid) {
                    let Some(sl) = self.io.taken_sges.get_mut(i * ms..(i + 1) * ms) else {
                        return Err(Rnr(min_rnr).into());
                    };
                    let Some((wr_id, num_sge)) = srq.take(sl) else {
                        return Err(Rnr(min_rnr).into());
                    };
                    if let Some(t) = self.io.taken.get_mut(i) {
                        *t = Taken {
                            valid: true,
                            wr_id,
                            num_sge,
                        };
                    }
                }
                if p.op != Op::WriteImm {
                    if let Err(e) = self.scatter_taken(i, p.offset, p.payload) {
                        return Err(self.cannot_place(rsn, e));
                    }
                }
            } else {
                let Some(rq) = self.io.rq.as_ref() else {
                    return Err(Rnr(min_rnr).into());
                };
                let posted = rq.distance(self.io.rq_cons, rq.producer());
                if ahead >= posted {
                    return Err(Rnr(min_rnr).into());
                }
                let slot = rq.advance(self.io.rq_cons, ahead);
                if p.op != Op::WriteImm {
                    if let Err(e) = self.scatter(slot, p.offset, p.payload) {
                        return Err(self.cannot_place(rsn, e));
                    }
                }
            }
        }
        let imm = p.imm;
        let (op, len, solicited) = (p.op, p.msg_len, p.solicited);
        let reth = p.reth.unwrap_or_default();
        let mut operands = [0u8; 16];
        if matches!(op, Op::AtomicCmpSwap | Op::AtomicFetchAdd) {
            let o = (p.offset as usize).min(16);
            let n = p.payload.len().min(16 - o);
            operands[o..o + n].copy_from_slice(&p.payload[..n]);
        }
        if let Some(r) = self.rx_slot(p.msn) {
            if !r.valid {
                *r = RxMsg {
                    op,
                    len,
                    imm: 0,
                    solicited: false,
                    valid: true,
                    reth,
                    operands: [0; 16],
                };
            }
            if let Some(i) = imm {
                r.imm = i;
            }
            for (d, s) in r.operands.iter_mut().zip(operands) {
                *d |= s;
            }
            r.solicited |= solicited;
        }
        Ok(())
    }

    fn complete(&mut self, stream: u16, msn: u32) {
        if stream == RESP {
            if let Some(m) = self.read_msn(msn) {
                if let Some(i) = (m as usize).checked_rem(self.io.sends.len()) {
                    if let Some(s) = self.io.sends.get_mut(i) {
                        s.resp_done = true;
                    }
                }
            }
            self.io.reads_done = self.io.reads_done.wrapping_add(1);
            self.complete_sends();
            return;
        }
        self.io.rx_msn = msn.wrapping_add(1);
        let Some(r) = self.rx_slot(msn).map(|r| {
            let v = *r;
            r.valid = false;
            v
        }) else {
            return;
        };
        if !r.valid {
            return;
        }
        if matches!(r.op, Op::ReadReq | Op::AtomicCmpSwap | Op::AtomicFetchAdd) {
            self.answer(&r);
            return;
        }
        if !consumes_recv(r.op) {
            return;
        }
        let wr_id = if self.qp.srq.is_some() {
            let i = self.io.rx_rsn as usize % RX_TRACK;
            let Some(t) = self.io.taken.get_mut(i) else {
                return;
            };
            t.valid = false;
            t.wr_id
        } else {
            let Some(rq) = self.io.rq.as_ref() else {
                return;
            };
            let Ok(w) = RecvWqe::read(rq, self.io.rq_cons) else {
                return;
            };
            w.wr_id
        };
        let mut status = wc::SUCCESS;
        let (opcode, flags, ex) = match r.op {
            Op::Send => (wc::OP_RECV, 0, 0),
            Op::SendImm => (wc::OP_RECV, wc::WITH_IMM, r.imm.to_be()),
            Op::SendInv => {
                // IBTA 10.6.7.2.2: invalidate the named window or
                // fast-registration MR of this QP's PD as the receive
                // completes.
                let (pd, key) = (self.qp.pd, r.imm);
                let done = if key >> 8 >= MW_BASE {
                    self.qp.dev.mws.invalidate(pd, key).is_ok()
                } else {
                    self.qp.dev.mrs.invalidate(pd, key).is_ok()
                };
                if !done {
                    // Class J (IBTA 9.9.3.1.2; rxe's
                    // RESPST_ERR_INVALIDATE_RKEY): the receive completes
                    // with a remote invalid request error and the QP
                    // enters the error state.
                    status = wc::REM_INV_REQ_ERR;
                }
                (wc::OP_RECV, wc::WITH_INVALIDATE, key)
            }
            _ => (wc::OP_RECV_RDMA_WITH_IMM, wc::WITH_IMM, r.imm.to_be()),
        };
        self.post(
            &self.qp.rcq,
            &Wc {
                wr_id,
                status,
                opcode,
                byte_len: r.len,
                ex,
                qp_num: self.qp.qpn,
                src_qp: self.io.attr.dest_qpn,
                wc_flags: flags,
                net_type: 0,
            },
            r.solicited,
        );
        if let Some(rq) = self.io.rq.as_ref() {
            self.io.rq_cons = rq.advance(self.io.rq_cons, 1);
            rq.set_consumer(self.io.rq_cons);
        }
        self.io.rx_rsn = self.io.rx_rsn.wrapping_add(1);
        if status != wc::SUCCESS {
            self.flush();
        }
    }

    fn acked(&mut self, stream: u16, msn: u32) {
        if stream == RESP {
            if msn == self.io.resp_acked {
                self.io.resp_acked = self.io.resp_acked.wrapping_add(1);
            }
            // A request refused at execution is a class C responder error:
            // once the requester has its answer, this QP enters the error
            // state (rxe's `do_class_ac_error`).
            if self.resp(msn).is_some_and(|r| r.status != 0) {
                self.flush();
            }
            return;
        }
        if let Some(status) = self.io.error.take() {
            if msn == self.io.sq_msn {
                self.complete_send(status);
            }
            self.flush();
            return;
        }
        if let Some(i) = (msn as usize).checked_rem(self.io.sends.len()) {
            if let Some(s) = self.io.sends.get_mut(i) {
                s.acked = true;
            }
        }
        self.complete_sends();
    }

    fn error(&mut self, e: ConnError) {
        self.io.error = Some(match e {
            ConnError::RetryExceeded => wc::RETRY_EXC_ERR,
            ConnError::RnrRetryExceeded => wc::RNR_RETRY_EXC_ERR,
            ConnError::MessageVanished => wc::LOC_QP_OP_ERR,
            ConnError::RemoteAccess => wc::REM_ACCESS_ERR,
            ConnError::RemoteInvalid => wc::REM_INV_REQ_ERR,
            // The WQE whose bytes could not be read carries its own status
            // (`set_fail`); a responder's failure flushes its own WQEs.
            ConnError::LocalProtection | ConnError::Aborted => {
                self.flush();
                return;
            }
        });
        self.flush();
    }
}
