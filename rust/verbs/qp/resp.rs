// SPDX-License-Identifier: GPL-2.0

//! The responder (rxe's `rxe_resp.c`): access checks and placement of
//! request packets, receive completions, READ and atomic execution and their
//! answers on the response stream, and responder errors.

use super::*;

impl Glue<'_> {
    /// A SEND's bytes do not fit receive `rsn` (`EFAULT`: longer than its
    /// SGEs) or its SGEs are not usable (a bad lkey or access): IBTA
    /// 9.7.5.2.4 responder error. The receive completes with
    /// `IBV_WC_LOC_LEN_ERR` / `IBV_WC_LOC_PROT_ERR` as the QP enters the
    /// error state, and the requester is NAKed with an invalid request
    /// (`IBV_WC_REM_INV_REQ_ERR`), as rxe does.
    pub(super) fn cannot_place(&mut self, rsn: u32, e: Error) -> Refuse {
        let status = if e == EFAULT {
            wc::LOC_LEN_ERR
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
    pub(super) fn responder_error(&mut self, r: Refuse) -> Refuse {
        self.flush();
        r
    }

    pub(super) fn rx_slot(&mut self, msn: u32) -> Option<&mut RxMsg> {
        self.io.rx.get_mut(msn as usize % RX_TRACK)
    }

    pub(super) fn resp(&self, k: u32) -> Option<Resp> {
        let i = (k as usize).checked_rem(RESP_SLOTS)?;
        self.io.resps.get(i).copied()
    }

    /// Responder: a READ or atomic request is complete (exactly once):
    /// queue its response, executing an atomic now.
    pub(super) fn answer(&mut self, r: &RxMsg) {
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

    /// Responder: response `msn` of the response stream, if owed (a refused
    /// request's answer is zero-length, its status in the tag).
    pub(super) fn response_message(&self, msn: u32) -> Option<MsgInfo> {
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

    /// Responder: bytes `[offset, offset + dst.len())` of response `msn`.
    pub(super) fn response_payload(
        &mut self,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> core::result::Result<(), Unreadable> {
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
        res.map_err(|_| Unreadable::Remote)
    }

    /// Responder: a packet of a request — access checks, then placement
    /// (RDMA WRITE at its RETH address, SEND into the receive its RSN names).
    pub(super) fn place_request(&mut self, p: &Placement<'_>) -> core::result::Result<(), Refuse> {
        let min_rnr = self.io.attr.min_rnr_timer;
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

    /// Responder: request `msn` is whole and every earlier one is: execute a
    /// READ/atomic (queue its answer) or complete the receive it consumed.
    pub(super) fn request_complete(&mut self, msn: u32) {
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

    /// Responder: the requester has response `msn`.
    pub(super) fn response_acked(&mut self, msn: u32) {
        if msn == self.io.resp_acked {
            self.io.resp_acked = self.io.resp_acked.wrapping_add(1);
        }
        // A request refused at execution is a class C responder error:
        // once the requester has its answer, this QP enters the error
        // state (rxe's `do_class_ac_error`).
        if self.resp(msn).is_some_and(|r| r.status != 0) {
            self.flush();
        }
    }
}
