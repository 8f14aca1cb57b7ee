//! The responder (IBTA 9.7.5; rxe's `rxe_resp.c`): access checks and placement of
//! request packets, RSN matching of receives (RQ and SRQ), receive completions, READ and
//! atomic execution (exactly once) and their answers on the response stream, and
//! responder errors.

use super::super::conn::{MsgInfo, Placement, Refuse, Rnr, Unreadable};
use super::super::wire::Op;
use super::env::{AtomicOp, Env};
use super::sge::SgeError;
use super::types::{access, wc_flags, Cqe, QpMode, WcOpcode, WcStatus};
use super::{
    at, atomic_len, consumes_recv, Engine, Held, Resp, RxRecv, Tables, Taken, RESP_ACCESS,
};

impl<T: Tables> Engine<T> {
    /// A SEND's bytes do not fit receive `rsn` ([`SgeError::Len`]: longer than its SGEs)
    /// or its SGEs are not usable: IBTA 9.7.5.2.4 responder error. The receive completes
    /// with `IB_WC_LOC_LEN_ERR` / `IB_WC_LOC_PROT_ERR` (`IB_WC_LOC_QP_OP_ERR` for a
    /// malformed WQE) as the QP enters the error state, and the requester is NAKed with
    /// an invalid request (`IB_WC_REM_INV_REQ_ERR`), as rxe does ([`Self::refuse_request`]).
    fn cannot_place<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
        rsn: u32,
        e: SgeError,
    ) -> Refuse {
        let status = match e {
            SgeError::Len => WcStatus::LocLenErr,
            SgeError::QpOp => WcStatus::LocQpOpErr,
            SgeError::Prot => WcStatus::LocProtErr,
        };
        self.refuse_request(env, msn, Refuse::Invalid, Some((rsn, status)))
    }

    /// Request `msn` is refused for good (IBTA 9.9.3.1.2 class C: invalid request,
    /// remote access error; `rx_error`: the receive it could not be placed into). The
    /// requester is NAKed with `r` and this QP enters the error state (rxe's
    /// `do_class_ac_error`), but not before every earlier request has completed and
    /// every response owed has been acknowledged: the NAK acknowledges the earlier
    /// requests (IBTA 9.7.5.2.4), which out-of-order placement may not have finished
    /// yet. Until then the refusal is held ([`Refuse::Held`]: dropped, the requester
    /// resends); the oldest refused request is the one NAKed.
    fn refuse_request<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
        r: Refuse,
        rx_error: Option<(u32, WcStatus)>,
    ) -> Refuse {
        let ahead = msn.wrapping_sub(self.rx_msn);
        let older = |h: &Held| h.msn.wrapping_sub(self.rx_msn) <= ahead;
        if !self.held.as_ref().is_some_and(older) {
            self.held = Some(Held {
                msn,
                refuse: r,
                rx_error,
            });
        }
        self.held_verdict(env, msn)
    }

    /// A packet of request `msn`, at or after the held refusal: NAK it (and enter the
    /// error state) if it is the refused request and everything before it is done,
    /// else hold it.
    fn held_verdict<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, msn: u32) -> Refuse {
        let Some(h) = self.held else {
            return Refuse::Held;
        };
        if msn != h.msn || self.rx_msn != h.msn || self.resp_acked != self.resp_next {
            return Refuse::Held;
        }
        if env.mode() != QpMode::Err {
            if h.rx_error.is_some() {
                self.rx_error = h.rx_error;
            }
            self.flush(env);
        }
        h.refuse
    }

    /// Responder: the NAK of held request `msn` (the next to complete) if it is due
    /// now ([`Self::refuse_request`]); the QP then enters the error state.
    pub(super) fn refusal_due<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
    ) -> Option<Refuse> {
        match self.held_verdict(env, msn) {
            Refuse::Held => None,
            r => Some(r),
        }
    }

    /// Responder: whether this QP, in the error state, still takes packets — it refused
    /// a request for good. It answers the requester: a lost NAK is sent again when the
    /// refused packet is resent, and a lost ACK of an earlier request again when that
    /// is (the connection acknowledges duplicates itself). Nothing is placed or
    /// executed. Without it a requester that lost either would time out and report
    /// *retry exceeded* on a request the responder executed (IBTA's responder drops
    /// everything in the error state, which a lossy fabric cannot afford).
    /// The host passes a packet to a QP in the error state only if it lingers.
    pub fn lingers(&self) -> bool {
        self.held.is_some()
    }

    fn resp(&mut self, k: u32) -> Option<Resp> {
        at(self.t.resps(), k).copied()
    }

    /// Responder: READ/atomic request `msn` is complete (exactly once): execute it and
    /// queue its response, the next response number's (IBTA 9.4.5, 9.7.5.1.4). Its
    /// request was stored under that number as it was placed; if it was not (a peer
    /// numbering its requests wrongly), the QP enters the error state.
    fn answer<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, msn: u32) {
        let k = self.resp_next;
        let Some(mut r) = self.resp(k).filter(|r| r.msn == msn) else {
            self.flush(env);
            return;
        };
        let qp_access = env.attrs().access;
        let mut served = false;
        match r.op {
            Some(Op::ReadReq) => {
                r.op = Some(Op::ReadResp);
                // Checked again now that it executes: the key may have been invalidated
                // or the MR deregistered since the request arrived.
                served = qp_access & access::REMOTE_READ != 0
                    && (r.len == 0
                        || env
                            .remote_check(r.rkey, r.va, r.len as usize, access::REMOTE_READ)
                            .is_ok());
            }
            Some(op @ (Op::AtomicCmpSwap | Op::AtomicFetchAdd)) => {
                r.op = Some(Op::AtomicResp);
                r.len = 8;
                let mut first = [0u8; 8];
                let mut second = [0u8; 8];
                let (a, b) = r.data.split_at(8);
                first.copy_from_slice(a);
                second.copy_from_slice(b);
                let first = u64::from_be_bytes(first);
                // Payload: swap (or addend), then compare.
                let aop = if op == Op::AtomicCmpSwap {
                    AtomicOp::CmpSwap {
                        compare: u64::from_be_bytes(second),
                        swap: first,
                    }
                } else {
                    AtomicOp::FetchAdd(first)
                };
                // Checked and executed under one hold of the region: it cannot go away
                // between the check and the operation. Memory untouched on failure; the
                // requester gets a remote access error, never a value that was not read.
                if qp_access & access::REMOTE_ATOMIC != 0 {
                    if let Ok(old) = env.remote_atomic(r.rkey, r.va, aop) {
                        r.data = [0; 16];
                        if let Some(d) = r.data.get_mut(..8) {
                            d.copy_from_slice(&old.to_be_bytes());
                        }
                        served = true;
                    }
                }
            }
            _ => {
                self.flush(env);
                return;
            }
        }
        r.status = if served { 0 } else { RESP_ACCESS };
        if let Some(slot) = at(self.t.resps(), k) {
            *slot = r;
        }
        self.resp_next = k.wrapping_add(1);
    }

    /// Responder: the full response number of a READ/atomic request whose tag carries
    /// its low 16 bits (every number in use is at most 256 past `resp_acked`).
    fn resp_number(&self, tag: u16) -> u32 {
        let base = self.resp_acked;
        base.wrapping_add(u32::from(tag.wrapping_sub(base as u16)))
    }

    /// Responder: response `msn` of the response stream, if owed (a refused request's
    /// answer is zero-length, its status in the tag).
    pub(super) fn response_message(&mut self, msn: u32) -> Option<MsgInfo> {
        if msn.wrapping_sub(self.resp_acked) >= self.resp_next.wrapping_sub(self.resp_acked) {
            return None;
        }
        let r = self.resp(msn)?;
        let op =
            r.op.filter(|o| matches!(o, Op::ReadResp | Op::AtomicResp))?;
        Some(MsgInfo {
            op,
            len: if r.status != 0 { 0 } else { r.len },
            tag: r.status,
            ..MsgInfo::default()
        })
    }

    /// Responder: bytes `[offset, offset + dst.len())` of response `msn`.
    pub(super) fn response_payload<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), Unreadable> {
        let Some(r) = self.resp(msn) else {
            return Err(Unreadable::Local);
        };
        if r.status != 0 || dst.is_empty() {
            // A refused request's zero-length answer: nothing to read.
            return Ok(());
        }
        if r.op == Some(Op::AtomicResp) {
            let src = r.data.get(offset as usize..8).unwrap_or(&[]);
            let n = dst.len().min(src.len());
            if let (Some(d), Some(s)) = (dst.get_mut(..n), src.get(..n)) {
                d.copy_from_slice(s);
            }
            return Ok(());
        }
        // Read again on every (re)transmission, checked again each time: memory
        // deregistered or a window invalidated since the request executed is never read
        // (or sent as zeros); the requester is NAKed instead (rxe re-checks in
        // `read_reply`).
        if env.attrs().access & access::REMOTE_READ == 0 {
            return Err(Unreadable::Remote);
        }
        let va = r.va.wrapping_add(u64::from(offset));
        env.remote_read(r.rkey, va, dst)
            .map_err(|_| Unreadable::Remote)
    }

    /// Responder: a packet of a request — the responder slot bound, access checks, then
    /// placement (RDMA WRITE at its RETH address, SEND into the receive its RSN names).
    pub(super) fn place_request<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        p: &Placement<'_>,
    ) -> Result<(), Refuse> {
        // In the error state (lingering, [`Self::lingers`]) nothing is placed: the
        // refused request is NAKed again, anything else dropped.
        if env.mode() == QpMode::Err {
            return Err(self.held_verdict(env, p.msn));
        }
        // At or after a request refused for good: never placed, NAKed or held.
        if let Some(h) = self.held {
            if p.msn.wrapping_sub(self.rx_msn) >= h.msn.wrapping_sub(self.rx_msn) {
                return Err(self.held_verdict(env, p.msn));
            }
        }
        let a = env.attrs();
        let min_rnr = a.min_rnr_timer;
        let answered = matches!(p.op, Op::ReadReq | Op::AtomicCmpSwap | Op::AtomicFetchAdd);
        // A QP without responder resources takes no READ or atomic (ATOMIC_WRITE
        // included, as rxe's `check_resource`): an invalid request (IBTA 9.7.5.2.4
        // class C; rxe's RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
        if (answered || p.op == Op::AtomicWrite) && a.max_dest_rd_atomic == 0 {
            return Err(self.refuse_request(env, p.msn, Refuse::Invalid, None));
        }
        // A READ's or atomic's response number (its tag): its entry in `resps` until
        // the requester has its response. Past the table it waits (RNR). A number
        // that cannot be this request's (below the responses already queued, or more
        // ahead of them than the request is of the next to complete, or another
        // request's entry) is an invalid request.
        let k = if answered {
            let k = self.resp_number(p.tag);
            if k.wrapping_sub(self.resp_acked) as usize >= self.t.resps().len() {
                return Err(Rnr(min_rnr).into());
            }
            let ahead = k.wrapping_sub(self.resp_next);
            let taken = self
                .resp(k)
                .is_some_and(|r| r.op.is_some() && r.msn != p.msn);
            if ahead > p.msn.wrapping_sub(self.rx_msn) || taken {
                return Err(self.refuse_request(env, p.msn, Refuse::Invalid, None));
            }
            Some(k)
        } else {
            None
        };
        // The QP's own access rights first (rxe's `check_qp_attr_access`): an operation
        // the QP does not take is an invalid request, whatever its length; then
        // alignment, then the key (IBTA 9.7.5.1.3, C9-88). Refusals are class C
        // responder errors: the requester is NAKed and this QP enters the error state.
        let need_qp = match p.op {
            Op::Write | Op::WriteImm | Op::AtomicWrite => access::REMOTE_WRITE,
            Op::ReadReq => access::REMOTE_READ,
            Op::AtomicCmpSwap | Op::AtomicFetchAdd => access::REMOTE_ATOMIC,
            _ => 0,
        };
        if a.access & need_qp != need_qp {
            return Err(self.refuse_request(env, p.msn, Refuse::Invalid, None));
        }
        let r = p.reth.unwrap_or_default();
        let key_ok = match p.op {
            // An atomic's operands are its whole message, in one packet: ATOMIC_WRITE
            // and FETCH_ADD 8 bytes, CMP_SWAP 16 (Documentation/transport.rst, the op
            // table). Any other length is an invalid request: nothing is executed on
            // zero padding or on bytes past the operands.
            Op::AtomicWrite | Op::AtomicCmpSwap | Op::AtomicFetchAdd
                if p.offset != 0
                    || p.msg_len != atomic_len(p.op)
                    || p.payload.len() != atomic_len(p.op) as usize =>
            {
                return Err(self.refuse_request(env, p.msn, Refuse::Invalid, None));
            }
            // rxe: RESPST_ERR_MISALIGNED_ATOMIC, NAK invalid request.
            Op::AtomicWrite | Op::AtomicCmpSwap | Op::AtomicFetchAdd if r.va & 7 != 0 => {
                return Err(self.refuse_request(env, p.msn, Refuse::Invalid, None));
            }
            // (A zero-length RDMA WRITE validates no R_Key, IBTA 9.7.4.1.4.)
            // ATOMIC_WRITE: one aligned 8-byte copy into the page.
            Op::Write | Op::WriteImm | Op::AtomicWrite if !p.payload.is_empty() => {
                let va = r.va.wrapping_add(u64::from(p.offset));
                env.remote_write(r.rkey, va, p.payload).is_ok()
            }
            Op::ReadReq if r.len != 0 => env
                .remote_check(r.rkey, r.va, r.len as usize, access::REMOTE_READ)
                .is_ok(),
            Op::AtomicCmpSwap | Op::AtomicFetchAdd => env
                .remote_check(r.rkey, r.va, 8, access::REMOTE_ATOMIC)
                .is_ok(),
            _ => true,
        };
        if !key_ok {
            return Err(self.refuse_request(env, p.msn, Refuse::Access, None));
        }
        let rsn = if consumes_recv(p.op) {
            Some(self.place_into_receive(env, p, min_rnr)?)
        } else {
            None
        };
        let Some(rx) = at(self.t.rx(), p.msn) else {
            return Ok(());
        };
        let first = rx.op.is_none();
        rx.op = Some(p.op);
        if let Some(v) = rsn.and_then(|rsn| at(self.t.recvs(), rsn)) {
            if first {
                *v = RxRecv {
                    len: p.msg_len,
                    imm: 0,
                    solicited: false,
                };
            }
            if let Some(i) = p.imm {
                v.imm = i;
            }
            v.solicited |= p.solicited;
        }
        if let Some(e) = k.and_then(|k| at(self.t.resps(), k)) {
            // (Checked above: an atomic's payload is exactly its operands, at offset 0;
            // a READ or atomic is one packet.)
            let mut data = [0u8; 16];
            if let Some(d) = data.get_mut(..p.payload.len()) {
                p.payload.copy_to(d);
            }
            *e = Resp {
                va: r.va,
                data,
                rkey: r.rkey,
                len: r.len,
                msn: p.msn,
                op: Some(p.op),
                status: 0,
            };
        }
        Ok(())
    }

    /// A receive-consuming packet: the receive its RSN names (the RQ's, or an SRQ WQE
    /// taken for that RSN), RNR if not posted yet (IBTA 9.7.5.2.8), then its bytes.
    /// Returns the RSN.
    fn place_into_receive<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        p: &Placement<'_>,
        min_rnr: u8,
    ) -> Result<u32, Refuse> {
        // The RSN's low 16 bits are in the tag; rebuild it against the oldest receive not
        // yet completed.
        let base = self.rx_rsn;
        let rsn = base.wrapping_add(u32::from(p.tag.wrapping_sub(base as u16)));
        let ahead = rsn.wrapping_sub(base);
        let scatters = p.op != Op::WriteImm;
        // (Never with a table as the host sizes it: a message less than the stream
        // window ahead consumes a receive less than that, and one posted, ahead.)
        if ahead as usize >= self.t.recvs().len() {
            return Err(Rnr(min_rnr).into());
        }
        if let Some(ms) = env.attrs().srq_sge {
            let n = self.t.taken().len();
            if ahead as usize >= n {
                return Err(Rnr(min_rnr).into());
            }
            let i = (rsn as usize).checked_rem(n).unwrap_or(0);
            let ms = ms as usize;
            if !self.t.taken().get(i).is_some_and(|t| t.valid) {
                let from = i.saturating_mul(ms);
                let Some(sl) = self.t.taken_sges().get_mut(from..from.saturating_add(ms)) else {
                    return Err(Rnr(min_rnr).into());
                };
                let Some((wr_id, num_sge)) = env.srq_take(sl) else {
                    return Err(Rnr(min_rnr).into());
                };
                if let Some(t) = self.t.taken().get_mut(i) {
                    *t = Taken {
                        valid: true,
                        wr_id,
                        num_sge,
                    };
                }
            }
            if scatters {
                if let Err(e) = self.scatter_taken(env, i, p.offset, p.payload) {
                    return Err(self.cannot_place(env, p.msn, rsn, e));
                }
            }
        } else {
            let Some(prod) = env.rq_producer() else {
                return Err(Rnr(min_rnr).into());
            };
            let posted = env.rq_distance(self.rq_cons, prod);
            if ahead >= posted {
                return Err(Rnr(min_rnr).into());
            }
            let slot = env.rq_advance(self.rq_cons, ahead);
            if scatters {
                if let Err(e) = Self::scatter(env, slot, p.offset, p.payload) {
                    return Err(self.cannot_place(env, p.msn, rsn, e));
                }
            }
        }
        Ok(rsn)
    }

    /// Responder: request `msn` is whole and every earlier one is: execute a READ/atomic
    /// (queue its answer) or complete the receive it consumed (IBTA 9.7.5.1.6).
    pub(super) fn request_complete<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, msn: u32) {
        self.rx_msn = msn.wrapping_add(1);
        let Some(op) = at(self.t.rx(), msn).and_then(|r| r.op.take()) else {
            return;
        };
        if matches!(op, Op::ReadReq | Op::AtomicCmpSwap | Op::AtomicFetchAdd) {
            self.answer(env, msn);
            return;
        }
        if consumes_recv(op) {
            let v = at(self.t.recvs(), self.rx_rsn).copied().unwrap_or_default();
            self.complete_receive(env, op, v.len, v.imm, v.solicited);
        }
    }

    /// The oldest receive (the RQ's, or the SRQ WQE taken for the next RSN) completes
    /// with a message of `op`, `len` bytes, immediate data (or SEND_WITH_INV's rkey)
    /// `imm` (IBTA 9.7.5.1.6); RC and UC alike.
    pub(super) fn complete_receive<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        op: Op,
        len: u32,
        imm: u32,
        solicited: bool,
    ) {
        let wr_id = if env.attrs().srq_sge.is_some() {
            let Some(t) = at(self.t.taken(), self.rx_rsn) else {
                return;
            };
            t.valid = false;
            t.wr_id
        } else {
            let Some(w) = env.rq_wqe(self.rq_cons) else {
                return;
            };
            w.wr_id
        };
        let mut status = WcStatus::Success;
        let (opcode, flags, ex) = match op {
            Op::Send => (WcOpcode::Recv, 0, 0),
            Op::SendImm => (WcOpcode::Recv, wc_flags::WITH_IMM, imm.to_be()),
            Op::SendInv => {
                // IBTA 10.6.7.2.2: invalidate the named window or fast-registration MR
                // of this QP's PD as the receive completes.
                if !env.invalidate(imm) {
                    // Class J (IBTA 9.9.3.1.2; rxe's RESPST_ERR_INVALIDATE_RKEY): the
                    // receive completes with a remote invalid request error and the QP
                    // enters the error state.
                    status = WcStatus::RemInvReqErr;
                }
                (WcOpcode::Recv, wc_flags::WITH_INVALIDATE, imm)
            }
            _ => (WcOpcode::RecvRdmaWithImm, wc_flags::WITH_IMM, imm.to_be()),
        };
        let c = Cqe {
            wr_id,
            status,
            opcode,
            byte_len: len,
            ex,
            flags,
            from_peer: true,
        };
        self.push_recv(env, &c, solicited);
        if env.rq_producer().is_some() {
            self.rq_cons = env.rq_advance(self.rq_cons, 1);
            env.rq_set_consumer(self.rq_cons);
        }
        self.rx_rsn = self.rx_rsn.wrapping_add(1);
        if status != WcStatus::Success {
            self.flush(env);
        }
    }

    /// Responder: the requester has response `msn`: its entry is free.
    pub(super) fn response_acked<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, msn: u32) {
        if msn != self.resp_acked {
            return;
        }
        self.resp_acked = self.resp_acked.wrapping_add(1);
        let refused = at(self.t.resps(), msn).is_some_and(|r| {
            r.op = None;
            r.status != 0
        });
        // A request refused at execution is a class C responder error: once the
        // requester has its answer, this QP enters the error state (rxe's
        // `do_class_ac_error`).
        if refused {
            self.flush(env);
        }
    }
}
