// SPDX-License-Identifier: GPL-2.0

//! Kernel work requests (`ib_post_send`, `ib_post_recv`,
//! `ib_post_srq_recv`) translated into rxe-layout rings.

use super::bindings as b;
use super::mem::read_posted;
use super::rdma::QpCaps;
use super::rxe_abi::queue::Queue;
use super::rxe_abi::wqe::{send_flags, RecvWqe, SendWqe, Sge};
use kernel::prelude::*;

/// The chain of work requests of a kernel `ib_post_send`, written into the
/// SQ ring one at a time. After a failure [`SendWrs::bad`] is the request
/// that failed (`bad_wr`).
///
/// # Invariants
///
/// `cur` is null or a valid `ib_send_wr` (of the container type its opcode
/// and the QP type imply) whose `next` chain stays valid for the call.
pub(crate) struct SendWrs {
    cur: *const b::ib_send_wr,
    /// The `ah_num` of an AH of the QP's device.
    ///
    /// # Safety
    ///
    /// Called with a live AH of the QP's device only.
    ah_num: unsafe fn(*mut b::ib_ah) -> u32,
}

/// The SGEs of a kernel work request (`sg_list`, `num_sge`); empty for a
/// null list or a count below 1.
///
/// # Safety
///
/// Unless empty as above, `sg` points to `n` valid `ib_sge`s that stay valid
/// and unchanged for `'a`.
unsafe fn sg_list<'a>(sg: *const b::ib_sge, n: i32) -> &'a [b::ib_sge] {
    match usize::try_from(n) {
        Ok(n) if n > 0 && !sg.is_null() => {
            // SAFETY: by the caller's guarantee `sg` holds `n` entries for
            // `'a`.
            unsafe { core::slice::from_raw_parts(sg, n) }
        }
        _ => &[],
    }
}

/// The IB_WR_* opcodes a kernel consumer may post, per QP type (rxe's
/// `rxe_wr_opcode_info` masks for what the data path implements).
fn send_opcode_ok(op: u32, ud: bool) -> bool {
    match op {
        b::ib_wr_opcode_IB_WR_SEND | b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => true,
        b::ib_wr_opcode_IB_WR_SEND_WITH_INV => !ud,
        b::ib_wr_opcode_IB_WR_RDMA_WRITE
        | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
        | b::ib_wr_opcode_IB_WR_RDMA_READ
        | b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
        | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
        | b::ib_wr_opcode_IB_WR_LOCAL_INV
        | b::ib_wr_opcode_IB_WR_REG_MR => !ud,
        _ => false,
    }
}

impl SendWrs {
    /// # Safety
    ///
    /// `wr` is null or the head of a valid chain, as the RDMA core passes to
    /// `ib_device_ops.post_send`, live for the life of the value, whose UD
    /// requests name AHs for which `ah_num` may be called.
    pub(in crate::ffi) unsafe fn new(
        wr: *const b::ib_send_wr,
        ah_num: unsafe fn(*mut b::ib_ah) -> u32,
    ) -> Self {
        SendWrs { cur: wr, ah_num }
    }

    /// The request not (yet) posted: the failed one after an error.
    pub(in crate::ffi) fn bad(&self) -> *const b::ib_send_wr {
        self.cur
    }

    /// Whether requests remain.
    pub(crate) fn pending(&self) -> bool {
        !self.cur.is_null()
    }

    /// Writes the requests into `q` from its producer index on, publishing
    /// each: `ENOMEM` when the ring is full, or [`Self::write_next`]'s error;
    /// the requests before the failed one stay posted.
    pub(crate) fn post(&mut self, q: &Queue, ud: bool, caps: &QpCaps) -> Result {
        while self.pending() {
            let prod = q.producer();
            let next = q.advance(prod, 1);
            if next == q.consumer() {
                return Err(ENOMEM);
            }
            self.write_next(q, prod, ud, caps)?;
            q.set_producer(next);
        }
        Ok(())
    }

    /// Validates the next request against `caps` and writes it into slot `i`
    /// of `q` (`ud`: a datagram QP). `EINVAL` for an opcode the QP type does
    /// not take, too many SGEs, inline data over `max_inline_data`, or
    /// lengths that overflow (rxe's `validate_send_wr`).
    pub(crate) fn write_next(&mut self, q: &Queue, i: u32, ud: bool, caps: &QpCaps) -> Result {
        if self.cur.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: by the invariant `cur` is a valid request.
        let wr = unsafe { &*self.cur };
        let op = wr.opcode;
        if !send_opcode_ok(op, ud) || wr.num_sge < 0 || wr.num_sge as u32 > caps.max_send_sge {
            return Err(EINVAL);
        }
        // SAFETY: `wr` is a valid request (the type invariant), so its
        // `sg_list` holds `num_sge` entries while `wr` is borrowed.
        let sgl = unsafe { sg_list(wr.sg_list, wr.num_sge) };
        let n = sgl.len();
        let mut length = 0u32;
        for s in sgl {
            length = length.checked_add(s.length).ok_or(EINVAL)?;
        }
        let flags = wr.send_flags as u32;
        let inline = flags & send_flags::INLINE != 0
            && matches!(
                op,
                b::ib_wr_opcode_IB_WR_SEND
                    | b::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                    | b::ib_wr_opcode_IB_WR_SEND_WITH_INV
                    | b::ib_wr_opcode_IB_WR_RDMA_WRITE
                    | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            );
        if inline && length > caps.max_inline_data {
            return Err(EINVAL);
        }
        let mut w = SendWqe {
            // SAFETY: plain data either way (`wr_id` or the `wr_cqe` pointer
            // in the same 8 bytes, handed back unchanged in `ib_wc`).
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            opcode: op,
            // IB_SEND_INLINE on an opcode that carries no inline data (READ,
            // atomics, local operations) is ignored, as in rxe: the WQE then
            // holds SGEs, never to be read as data.
            send_flags: if inline {
                flags
            } else {
                flags & !send_flags::INLINE
            },
            // SAFETY: a 32-bit union; the raw bits are carried.
            ex: unsafe { wr.ex.invalidate_rkey },
            length,
            num_sge: if inline { 0 } else { n as u32 },
            ..SendWqe::default()
        };
        let cur = self.cur;
        if ud {
            // SAFETY: a datagram QP's requests are `ib_ud_wr`s.
            let u = unsafe { &*cur.cast::<b::ib_ud_wr>() };
            if u.ah.is_null() {
                return Err(EINVAL);
            }
            w.ud_qpn = u.remote_qpn;
            w.ud_qkey = u.remote_qkey;
            // SAFETY: a kernel consumer's UD request names a live AH of the
            // QP's device (the chain's invariant and `new`'s contract).
            w.ah_num = unsafe { (self.ah_num)(u.ah) };
        } else {
            match op {
                b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
                | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                    // SAFETY: atomic requests are `ib_atomic_wr`s.
                    let a = unsafe { &*cur.cast::<b::ib_atomic_wr>() };
                    w.remote_addr = a.remote_addr;
                    w.compare_add = a.compare_add;
                    w.swap = a.swap;
                    w.atomic_rkey = a.rkey;
                }
                b::ib_wr_opcode_IB_WR_REG_MR => {
                    // SAFETY: REG_MR requests are `ib_reg_wr`s naming a live
                    // MR of the consumer's.
                    let r = unsafe { &*cur.cast::<b::ib_reg_wr>() };
                    if r.mr.is_null() {
                        return Err(EINVAL);
                    }
                    // SAFETY: as above.
                    w.reg_mr_key = unsafe { (*r.mr).lkey };
                    w.reg_key = r.key;
                    w.reg_access = r.access as u32;
                }
                b::ib_wr_opcode_IB_WR_RDMA_WRITE
                | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
                | b::ib_wr_opcode_IB_WR_RDMA_READ => {
                    // SAFETY: RDMA requests are `ib_rdma_wr`s.
                    let r = unsafe { &*cur.cast::<b::ib_rdma_wr>() };
                    w.remote_addr = r.remote_addr;
                    w.rkey = r.rkey;
                }
                _ => {}
            }
        }
        w.write(q, i, ud)?;
        if inline {
            let mut at = SendWqe::HEADER;
            let mut chunk = [0u8; 64];
            for s in sgl {
                let mut done = 0usize;
                while done < s.length as usize {
                    let k = (s.length as usize - done).min(chunk.len());
                    let addr = s.addr.checked_add(done as u64).ok_or(EFAULT)?;
                    // SAFETY: `addr..addr + k` is inside an SGE of the kernel
                    // request being posted (the invariant).
                    unsafe { read_posted(addr, &mut chunk[..k]) }?;
                    q.write(i, at, &chunk[..k])?;
                    at += k;
                    done += k;
                }
            }
        } else {
            for (k, s) in sgl.iter().enumerate() {
                let sge = Sge::new(s.addr, s.length, s.lkey);
                SendWqe::write_sge(q, i, k as u32, &sge)?;
            }
        }
        // SAFETY: `cur` is valid; its `next` is null or valid (invariant).
        self.cur = unsafe { (*cur).next };
        Ok(())
    }
}

/// The chain of a kernel `ib_post_recv` / `ib_post_srq_recv`, written into
/// an RQ or SRQ ring one at a time; after a failure [`RecvWrs::bad`] is the
/// request that failed.
///
/// # Invariants
///
/// `cur` is null or a valid `ib_recv_wr` whose `next` chain stays valid.
pub(crate) struct RecvWrs {
    cur: *const b::ib_recv_wr,
}

impl RecvWrs {
    /// # Safety
    ///
    /// `wr` is null or the head of a valid chain, as the RDMA core passes to
    /// `post_recv` / `post_srq_recv`, live for the life of the value.
    pub(in crate::ffi) unsafe fn new(wr: *const b::ib_recv_wr) -> Self {
        RecvWrs { cur: wr }
    }

    /// The request not (yet) posted: the failed one after an error.
    pub(in crate::ffi) fn bad(&self) -> *const b::ib_recv_wr {
        self.cur
    }

    /// Whether requests remain.
    pub(crate) fn pending(&self) -> bool {
        !self.cur.is_null()
    }

    /// Writes the requests into RQ or SRQ ring `q` from its producer index
    /// on (see [`SendWrs::post`]).
    pub(crate) fn post(&mut self, q: &Queue, max_sge: u32) -> Result {
        while self.pending() {
            let prod = q.producer();
            let next = q.advance(prod, 1);
            if next == q.consumer() {
                return Err(ENOMEM);
            }
            self.write_next(q, prod, max_sge)?;
            q.set_producer(next);
        }
        Ok(())
    }

    /// Writes the next request into slot `i` of `q`. `EINVAL` for more than
    /// `max_sge` SGEs or a total length that overflows.
    pub(crate) fn write_next(&mut self, q: &Queue, i: u32, max_sge: u32) -> Result {
        if self.cur.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: by the invariant `cur` is a valid request.
        let wr = unsafe { &*self.cur };
        if wr.num_sge < 0 || wr.num_sge as u32 > max_sge {
            return Err(EINVAL);
        }
        // SAFETY: `wr` is a valid request (the type invariant), so its
        // `sg_list` holds `num_sge` entries while `wr` is borrowed.
        let sgl = unsafe { sg_list(wr.sg_list, wr.num_sge) };
        let n = sgl.len();
        let mut sges = [Sge::default(); 32];
        let mut total = 0u32;
        for (d, s) in sges.iter_mut().zip(sgl) {
            total = total.checked_add(s.length).ok_or(EINVAL)?;
            *d = Sge::new(s.addr, s.length, s.lkey);
        }
        let sges = sges.get(..n).ok_or(EINVAL)?;
        // SAFETY: `wr_id` or the `wr_cqe` pointer, carried as 8 bytes.
        let wr_id = unsafe { wr.__bindgen_anon_1.wr_id };
        RecvWqe::write(q, i, wr_id, sges)?;
        self.cur = wr.next;
        Ok(())
    }
}
