// SPDX-License-Identifier: GPL-2.0

//! The requester (rxe's `rxe_req.c`): send WQEs turned into messages of the
//! request stream, their checks, local operations (BIND_MW, LOCAL_INV,
//! REG_MR), and the bytes each message carries.

use super::*;

impl Glue<'_> {
    /// The SQ's next WQE as the message `msn` of stream 0, if posted.
    pub(super) fn next_request(&mut self, msn: u32) -> Option<MsgInfo> {
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
            self.send_cqe(&w, status);
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
    pub(super) fn refuse(
        &mut self,
        msn: u32,
        w: SendWqe,
        slot: u32,
        status: u32,
    ) -> Option<MsgInfo> {
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
    pub(super) fn check_gather(&self, w: &SendWqe, slot: u32) -> Result {
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

    pub(super) fn advance_scan(&mut self, slot: u32) {
        if let Some(sq) = self.io.sq.as_ref() {
            self.io.scan = sq.advance(slot, 1);
        }
    }

    /// Whether a READ or atomic sent earlier still waits for its response.
    pub(super) fn responses_pending(&self) -> bool {
        let n = self.io.msns.wrapping_sub(self.io.sq_msn);
        (0..n).any(|k| {
            self.send_msg(self.io.sq_msn.wrapping_add(k))
                .is_some_and(|m| m.needs_resp && !m.resp_done)
        })
    }

    /// Runs a local operation (BIND_MW, LOCAL_INV, REG_MR); returns its
    /// status (rxe's: `IB_WC_LOC_QP_OP_ERR` for a failed REG_MR or MR
    /// invalidation, `IB_WC_MW_BIND_ERR` for a window).
    pub(super) fn local_op(&self, w: &SendWqe) -> u32 {
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

    /// Requester: bytes `[offset, offset + dst.len())` of request `msn`
    /// (gathered from its SGEs, or an atomic's operands).
    pub(super) fn request_payload(
        &mut self,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> core::result::Result<(), Unreadable> {
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
}
