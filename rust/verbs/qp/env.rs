// SPDX-License-Identifier: GPL-2.0

//! The RC engine's traits ([`crate::proto::rc::env`]) on the kernel's
//! objects: the SQ/RQ rings in rxe's format, the SRQ, the CQs, the QP's
//! state and events; and the engine's tables in kernel memory. The engine's
//! opcode and status values are asserted equal to the kernel's here, so the
//! engine's enums are the one source of truth.

use super::*;
use crate::ffi::bindings as b;
use crate::ffi::rxe_abi::{send_flags, Sge, Wc};
use crate::proto::rc::{
    self, Attrs, Completions, Cqe, LocalOps, QpControl, QpMode, RecvQueue, Resp, RxMsg, RxRecv,
    ScatterGather, SendMsg, SendQueue, Taken, WcOpcode, WcStatus, WrOpcode, RX_TRACK,
};
use kernel::alloc::KVVec;

macro_rules! same {
    ($($ours:expr => $theirs:expr),+ $(,)?) => {
        $(
            #[allow(clippy::unnecessary_cast)]
            const _: () = assert!($ours as u32 == $theirs as u32);
        )+
    };
}

same! {
    WrOpcode::RdmaWrite => b::ib_wr_opcode_IB_WR_RDMA_WRITE,
    WrOpcode::RdmaWriteWithImm => b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
    WrOpcode::Send => b::ib_wr_opcode_IB_WR_SEND,
    WrOpcode::SendWithImm => b::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
    WrOpcode::RdmaRead => b::ib_wr_opcode_IB_WR_RDMA_READ,
    WrOpcode::AtomicCmpAndSwp => b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
    WrOpcode::AtomicFetchAndAdd => b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
    WrOpcode::LocalInv => b::ib_wr_opcode_IB_WR_LOCAL_INV,
    WrOpcode::BindMw => b::ib_wr_opcode_IB_WR_BIND_MW,
    WrOpcode::SendWithInv => b::ib_wr_opcode_IB_WR_SEND_WITH_INV,
    WrOpcode::AtomicWrite => b::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    WrOpcode::RegMr => b::ib_wr_opcode_IB_WR_REG_MR,
    WcStatus::Success => b::ib_wc_status_IB_WC_SUCCESS,
    WcStatus::LocLenErr => b::ib_wc_status_IB_WC_LOC_LEN_ERR,
    WcStatus::LocQpOpErr => b::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    WcStatus::LocProtErr => b::ib_wc_status_IB_WC_LOC_PROT_ERR,
    WcStatus::WrFlushErr => b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    WcStatus::MwBindErr => b::ib_wc_status_IB_WC_MW_BIND_ERR,
    WcStatus::BadRespErr => b::ib_wc_status_IB_WC_BAD_RESP_ERR,
    WcStatus::RemInvReqErr => b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    WcStatus::RemAccessErr => b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    WcStatus::RetryExcErr => b::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    WcStatus::RnrRetryExcErr => b::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
    WcOpcode::Send => b::ib_wc_opcode_IB_WC_SEND,
    WcOpcode::RdmaWrite => b::ib_wc_opcode_IB_WC_RDMA_WRITE,
    WcOpcode::RdmaRead => b::ib_wc_opcode_IB_WC_RDMA_READ,
    WcOpcode::CompSwap => b::ib_wc_opcode_IB_WC_COMP_SWAP,
    WcOpcode::FetchAdd => b::ib_wc_opcode_IB_WC_FETCH_ADD,
    WcOpcode::BindMw => b::ib_wc_opcode_IB_WC_BIND_MW,
    WcOpcode::LocalInv => b::ib_wc_opcode_IB_WC_LOCAL_INV,
    WcOpcode::AtomicWrite => b::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
    WcOpcode::RegMr => b::ib_wc_opcode_IB_WC_REG_MR,
    WcOpcode::Recv => b::ib_wc_opcode_IB_WC_RECV,
    WcOpcode::RecvRdmaWithImm => b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
    // User CQs carry `ib_uverbs_wc_opcode`: equal for every send opcode but
    // REG_MR, which only kernel QPs post.
    WcOpcode::Send => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_SEND,
    WcOpcode::RdmaWrite => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_WRITE,
    WcOpcode::RdmaRead => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_READ,
    WcOpcode::CompSwap => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_COMP_SWAP,
    WcOpcode::FetchAdd => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_FETCH_ADD,
    WcOpcode::BindMw => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_BIND_MW,
    WcOpcode::LocalInv => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_LOCAL_INV,
    WcOpcode::AtomicWrite => b::ib_uverbs_wc_opcode_IB_UVERBS_WC_ATOMIC_WRITE,
    rc::wc_flags::WITH_IMM => b::ib_wc_flags_IB_WC_WITH_IMM,
    rc::wc_flags::WITH_INVALIDATE => b::ib_wc_flags_IB_WC_WITH_INVALIDATE,
    rc::send_flags::FENCE => b::ib_send_flags_IB_SEND_FENCE,
    rc::send_flags::SIGNALED => b::ib_send_flags_IB_SEND_SIGNALED,
    rc::send_flags::SOLICITED => b::ib_send_flags_IB_SEND_SOLICITED,
    rc::send_flags::INLINE => b::ib_send_flags_IB_SEND_INLINE,
    // The ring format's flags (what the provider writes) are the same.
    rc::send_flags::FENCE => send_flags::FENCE,
    rc::send_flags::SIGNALED => send_flags::SIGNALED,
    rc::send_flags::SOLICITED => send_flags::SOLICITED,
    rc::send_flags::INLINE => send_flags::INLINE,
    rc::access::LOCAL_WRITE => b::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
    rc::access::REMOTE_WRITE => b::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
    rc::access::REMOTE_READ => b::ib_access_flags_IB_ACCESS_REMOTE_READ,
    rc::access::REMOTE_ATOMIC => b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
    rc::access::MW_BIND => b::ib_access_flags_IB_ACCESS_MW_BIND,
}

/// The engine's tables of one QP, in kernel memory.
pub(crate) type RcTables = rc::Storage<
    KSlice<SendMsg>,
    KSlice<u32>,
    KSlice<RxMsg>,
    KSlice<RxRecv>,
    KSlice<Taken>,
    KSlice<Sge>,
    KSlice<Resp>,
    Sge,
>;

/// A kernel vector as the engine's storage (`AsMut<[T]>`): `kvmalloc`
/// memory, so that a table sized by the consumer's queue depth (up to
/// `max_qp_wr` slots) never asks for a high-order contiguous allocation.
pub(crate) struct KSlice<T>(KVVec<T>);

impl<T> AsMut<[T]> for KSlice<T> {
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

fn table<T: Clone>(n: usize, v: T) -> Result<KSlice<T>> {
    let mut k = KVVec::new();
    k.extend_with(n, v, GFP_KERNEL)?;
    Ok(KSlice(k))
}

/// The tables of a QP of type `t` with an SQ of `sq_slots` slots, an RQ of
/// `rq_slots` (0: none) and, with an SRQ, `srq_sge` SGEs per SRQ WQE (0:
/// none). The receive tracking (`rx`, 128 bytes; `recvs`, 12 bytes a
/// receive the RQ holds, at most 128) is an RC QP's alone; the response
/// table is allocated when `modify_qp` sets `max_dest_rd_atomic`
/// ([`resp_table`]). Documentation/testing.rst, "Many QPs", has the sizes.
pub(super) fn tables(
    t: QpType,
    sq_slots: usize,
    rq_slots: usize,
    srq_sge: usize,
) -> Result<RcTables> {
    let srq = srq_sge != 0;
    let rc = t == QpType::Rc;
    let recvs = match (rc, srq) {
        (false, _) => 0,
        (true, true) => RX_TRACK,
        (true, false) => rq_slots.min(RX_TRACK),
    };
    Ok(rc::Storage {
        sends: table(sq_slots, SendMsg::default())?,
        reads: table(sq_slots, 0u32)?,
        rx: table(if rc { RX_TRACK } else { 0 }, RxMsg::default())?,
        recvs: table(recvs, RxRecv::default())?,
        taken: table(if srq { RX_TRACK } else { 0 }, Taken::default())?,
        taken_sges: table(RX_TRACK * srq_sge, Sge::default())?,
        resps: table(0, Resp::default())?,
        sge: core::marker::PhantomData,
    })
}

/// An RC QP's response table for `max_dest_rd_atomic` responder resources
/// ([`rc::resp_slots`]: 40 bytes per entry, twice the resources; none for 0).
pub(super) fn resp_table(max_dest_rd_atomic: u8) -> Result<KSlice<Resp>> {
    table(rc::resp_slots(max_dest_rd_atomic), Resp::default())
}

/// The engine carries the ring's SGEs as they are: only the rings' reader
/// makes them, and one read from a kernel consumer's ring keeps that origin
/// (the `Span` rule of `ffi::mem`), which the engine cannot forge.
impl ScatterGather for Sge {
    fn length(&self) -> u32 {
        Sge::length(self)
    }
}

impl rc::HostSge for Glue<'_> {
    type Sge = Sge;
}

/// The engine's view of a send WQE.
pub(super) fn send_wqe(w: &SendWqe) -> rc::SendWqe {
    rc::SendWqe {
        wr_id: w.wr_id,
        opcode: w.opcode,
        send_flags: w.send_flags,
        ex: w.ex,
        remote_addr: w.remote_addr,
        rkey: w.rkey,
        length: w.length,
        num_sge: w.num_sge,
        compare_add: w.compare_add,
        swap: w.swap,
        atomic_rkey: w.atomic_rkey,
    }
}

impl SendQueue for Glue<'_> {
    fn sq_producer(&self) -> Option<u32> {
        self.io.sq.as_ref().map(|q| q.producer())
    }
    fn sq_advance(&self, slot: u32, n: u32) -> u32 {
        self.io.sq.as_ref().map_or(slot, |q| q.advance(slot, n))
    }
    fn sq_set_consumer(&mut self, slot: u32) {
        if let Some(q) = self.io.sq.as_ref() {
            q.set_consumer(slot);
        }
    }
    fn sq_wqe(&self, slot: u32) -> Option<rc::SendWqe> {
        SendWqe::read(self.io.sq.as_ref()?, slot)
            .ok()
            .map(|w| send_wqe(&w))
    }
    fn sq_sge(&self, slot: u32, i: u32) -> Option<Sge> {
        SendWqe::sge(self.io.sq.as_ref()?, slot, i).ok()
    }
    fn sq_inline(&self, slot: u32, offset: u32, dst: &mut [u8]) -> bool {
        self.io
            .sq
            .as_ref()
            .is_some_and(|q| SendWqe::inline_data(q, slot, offset as usize, dst).is_ok())
    }
}

impl RecvQueue for Glue<'_> {
    fn rq_producer(&self) -> Option<u32> {
        self.io.rq.as_ref().map(|q| q.producer())
    }
    fn rq_advance(&self, slot: u32, n: u32) -> u32 {
        self.io.rq.as_ref().map_or(slot, |q| q.advance(slot, n))
    }
    fn rq_distance(&self, from: u32, to: u32) -> u32 {
        self.io.rq.as_ref().map_or(0, |q| q.distance(from, to))
    }
    fn rq_set_consumer(&mut self, slot: u32) {
        if let Some(q) = self.io.rq.as_ref() {
            q.set_consumer(slot);
        }
    }
    fn rq_wqe(&self, slot: u32) -> Option<rc::RecvWqe> {
        let w = RecvWqe::read(self.io.rq.as_ref()?, slot).ok()?;
        Some(rc::RecvWqe {
            wr_id: w.wr_id,
            num_sge: w.num_sge,
        })
    }
    fn rq_sge(&self, slot: u32, i: u32) -> Option<Sge> {
        RecvWqe::sge(self.io.rq.as_ref()?, slot, i).ok()
    }
    fn srq_take(&mut self, sges: &mut [Sge]) -> Option<(u64, u32)> {
        self.qp.srq.as_ref()?.take(sges)
    }
}

impl Glue<'_> {
    fn wc(&self, c: &Cqe) -> Wc {
        Wc {
            wr_id: c.wr_id,
            status: c.status as u32,
            opcode: c.opcode as u32,
            byte_len: c.byte_len,
            ex: c.ex,
            qp_num: self.qp.qpn,
            src_qp: if c.from_peer {
                self.io.attr.dest_qpn
            } else {
                0
            },
            wc_flags: c.flags,
            net_type: 0,
        }
    }
}

impl Completions for Glue<'_> {
    fn push_send(&mut self, c: &Cqe) -> bool {
        self.qp.scq.push(&self.wc(c), false, self.qp.handle)
    }
    fn push_recv(&mut self, c: &Cqe, solicited: bool) -> bool {
        self.qp.rcq.push(&self.wc(c), solicited, self.qp.handle)
    }
}

impl QpControl for Glue<'_> {
    fn attrs(&self) -> Attrs {
        let (a, c) = (&self.io.attr, &self.io.caps);
        Attrs {
            access: a.access,
            min_rnr_timer: a.min_rnr_timer,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            max_send_sge: c.max_send_sge,
            max_inline_data: c.max_inline_data,
            max_recv_sge: c.max_recv_sge,
            srq_sge: self.qp.srq.as_ref().map(|_| self.io.srq_sge as u32),
            sq_sig_all: self.qp.sq_sig_all,
        }
    }
    fn mode(&self) -> QpMode {
        match self.io.attr.state {
            QpState::Rts => QpMode::Rts,
            QpState::Sqd => QpMode::Sqd,
            QpState::Err => QpMode::Err,
            _ => QpMode::Idle,
        }
    }
    fn enter_error(&mut self) {
        self.io.attr.state = QpState::Err;
    }
    fn sq_drained(&mut self) {
        self.qp.events.sq_drained();
    }
    fn last_wqe_reached(&mut self) {
        self.qp.events.last_wqe_reached();
    }
    fn bad_response(&mut self) {
        self.qp.dev.count(counter::BAD_RESPONSES, 1);
    }
}

impl LocalOps for Glue<'_> {
    fn local_op(&mut self, slot: u32) -> WcStatus {
        match self.io.sq.as_ref().map(|q| SendWqe::read(q, slot)) {
            Some(Ok(w)) => self.run_local_op(&w),
            _ => WcStatus::LocQpOpErr,
        }
    }
}
