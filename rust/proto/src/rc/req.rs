//! The requester (IBTA 9.7.4.1, 10.8.3; rxe's `rxe_req.c`): send WQEs turned into
//! messages of the request stream, their validity checks, local operations, the
//! initiator depth, FENCE, RSN tags, and the bytes each message carries.

use super::super::conn::{MsgInfo, Unreadable};
use super::super::wire::{Op, Reth};
use super::env::Env;
use super::sge::gather;
use super::types::{send_flags, QpMode, SendWqe, WcStatus, WrOpcode};
use super::{at, atomic_len, consumes_recv, Engine, SendMsg, Tables};

/// The message op, RETH and length of send WQE `w`; `None` for an opcode the transport
/// does not carry (a local QP operation error).
fn message_of(w: &SendWqe) -> Option<(Op, Reth, u32)> {
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
    Some(match WrOpcode::from_raw(w.opcode)? {
        WrOpcode::Send => (Op::Send, Reth::default(), w.length),
        WrOpcode::SendWithImm => (Op::SendImm, Reth::default(), w.length),
        WrOpcode::SendWithInv => (Op::SendInv, Reth::default(), w.length),
        WrOpcode::RdmaWrite => (Op::Write, rdma, w.length),
        WrOpcode::AtomicWrite => (
            Op::AtomicWrite,
            Reth { len: 8, ..rdma },
            atomic_len(Op::AtomicWrite),
        ),
        WrOpcode::RdmaWriteWithImm => (Op::WriteImm, rdma, w.length),
        WrOpcode::RdmaRead => (Op::ReadReq, rdma, 0),
        WrOpcode::AtomicCmpAndSwp => (Op::AtomicCmpSwap, atomic, atomic_len(Op::AtomicCmpSwap)),
        WrOpcode::AtomicFetchAndAdd => (Op::AtomicFetchAdd, atomic, atomic_len(Op::AtomicFetchAdd)),
        // Local operations never reach here; anything else (FLUSH …) is not carried.
        _ => return None,
    })
}

impl SendMsg {
    /// The record of WQE `w` at SQ `slot` as a message carrying `tag`.
    fn new(w: &SendWqe, slot: u32, tag: u16) -> Self {
        let atomic = matches!(
            WrOpcode::from_raw(w.opcode),
            Some(WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd)
        );
        let known =
            send_flags::FENCE | send_flags::SIGNALED | send_flags::SOLICITED | send_flags::INLINE;
        SendMsg {
            wr_id: w.wr_id,
            remote_addr: w.remote_addr,
            compare_add: w.compare_add,
            swap: w.swap,
            ex: w.ex,
            rkey: if atomic { w.atomic_rkey } else { w.rkey },
            length: w.length,
            num_sge: w.num_sge,
            slot,
            tag,
            opcode: u8::try_from(w.opcode).unwrap_or(u8::MAX),
            send_flags: (w.send_flags & known) as u8,
            ..SendMsg::default()
        }
    }

    /// The WQE as recorded (the key its message carries as both keys).
    pub(super) fn wqe(&self) -> SendWqe {
        SendWqe {
            wr_id: self.wr_id,
            opcode: u32::from(self.opcode),
            send_flags: u32::from(self.send_flags),
            ex: self.ex,
            remote_addr: self.remote_addr,
            rkey: self.rkey,
            length: self.length,
            num_sge: self.num_sge,
            compare_add: self.compare_add,
            swap: self.swap,
            atomic_rkey: self.rkey,
        }
    }

    /// The message (the connection's view of it; the default for a WQE that is none).
    pub(super) fn info(&self) -> MsgInfo {
        let w = self.wqe();
        let Some((op, reth, len)) = message_of(&w) else {
            return MsgInfo::default();
        };
        MsgInfo {
            op,
            len,
            reth,
            // Immediate data is stored in network order; SEND_WITH_INV's rkey in host
            // order.
            imm: if op == Op::SendInv {
                w.ex
            } else {
                u32::from_be(w.ex)
            },
            tag: self.tag,
            solicited: w.send_flags & send_flags::SOLICITED != 0,
            mtu: 0,
        }
    }
}

impl<T: Tables> Engine<T> {
    /// The send message `msn` of the request stream: an in-flight one again, or the SQ's
    /// next WQE turned into a message, if one is posted and may start.
    pub(super) fn next_request<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
    ) -> Option<MsgInfo> {
        if msn.wrapping_sub(self.sq_msn) < self.msns.wrapping_sub(self.sq_msn) {
            return self.send_msg(msn).map(|m| m.info());
        }
        if msn != self.msns || self.error.is_some() || env.mode() != QpMode::Rts {
            return None;
        }
        let (w, slot) = loop {
            let slot = self.scan;
            if slot == env.sq_producer()? {
                return None;
            }
            let w = env.sq_wqe(slot)?;
            // IBV_SEND_FENCE: wait until earlier READs and atomics are done (IBTA
            // 10.8.3.3).
            if w.send_flags & send_flags::FENCE != 0 && self.responses_pending() {
                return None;
            }
            if !WrOpcode::from_raw(w.opcode).is_some_and(WrOpcode::is_local) {
                break (w, slot);
            }
            // Local operations complete in SQ order: run one only once every earlier WQE
            // has completed.
            if self.sq_msn != self.msns {
                return None;
            }
            let status = env.local_op(slot);
            self.send_cqe(env, &w, status);
            let next = env.sq_advance(slot, 1);
            self.scan = next;
            self.sq_cons = next;
            env.sq_set_consumer(next);
            if status != WcStatus::Success {
                self.flush(env);
                return None;
            }
        };
        let Some((op, _, _)) = message_of(&w) else {
            return self.refuse(env, msn, w, slot, WcStatus::LocQpOpErr);
        };
        let a = env.attrs();
        let inline = w.send_flags & send_flags::INLINE != 0;
        let is_atomic = matches!(op, Op::AtomicCmpSwap | Op::AtomicFetchAdd);
        if w.num_sge > a.max_send_sge
            || (inline && w.length > a.max_inline_data)
            || w.length > (1 << 31)
            || (is_atomic && w.length < 8)
            || (op == Op::AtomicWrite && w.length != 8)
        {
            return self.refuse(env, msn, w, slot, WcStatus::LocQpOpErr);
        }
        // The bytes a request carries must all be readable before any is sent (a bad
        // lkey, another PD's MR, an SGE past its MR): otherwise nothing is sent and the
        // WQE completes with a local protection error (rxe's `finish_packet`).
        let gathers = matches!(
            op,
            Op::Send | Op::SendImm | Op::SendInv | Op::Write | Op::WriteImm
        ) && !inline;
        if gathers && !Self::check_gather(env, &w, slot) {
            return self.refuse(env, msn, w, slot, WcStatus::LocProtErr);
        }
        let needs_resp = op == Op::ReadReq || is_atomic;
        // At most `max_rd_atomic` READs and atomics outstanding (IBTA 9.7.3.1.3
        // initiator depth; rxe's `check_init_depth`).
        let depth = u32::from(a.max_rd_atomic.max(1));
        if needs_resp && self.tx_reads.wrapping_sub(self.reads_done) >= depth {
            return None;
        }
        // The tag: a receive-consuming message's RSN, a READ's or atomic's response
        // number (low 16 bits; Documentation/transport.rst, `tag`), so that the
        // responder places either where it belongs however early it arrives.
        let tag = if consumes_recv(op) {
            let t = self.tx_rsn as u16;
            self.tx_rsn = self.tx_rsn.wrapping_add(1);
            t
        } else if needs_resp {
            let k = self.tx_reads;
            self.tx_reads = k.wrapping_add(1);
            if let Some(r) = at(self.t.reads(), k) {
                *r = msn;
            }
            k as u16
        } else {
            0
        };
        let m = SendMsg {
            needs_resp,
            ..SendMsg::new(&w, slot, tag)
        };
        self.record(msn, m);
        self.msns = self.msns.wrapping_add(1);
        self.scan = env.sq_advance(slot, 1);
        Some(m.info())
    }

    /// A WQE that cannot be carried out: once every earlier WQE has completed
    /// (completions stay in SQ order), it completes with `status` and the QP enters the
    /// error state; nothing of it is sent.
    fn refuse<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
        w: SendWqe,
        slot: u32,
        status: WcStatus,
    ) -> Option<MsgInfo> {
        if self.sq_msn != self.msns {
            return None;
        }
        self.msns = self.msns.wrapping_add(1);
        self.scan = env.sq_advance(slot, 1);
        self.record(
            msn,
            SendMsg {
                fail: Some(status),
                ..SendMsg::new(&w, slot, 0)
            },
        );
        self.flush(env);
        None
    }

    /// Whether a READ or atomic sent earlier still waits for its response.
    fn responses_pending(&mut self) -> bool {
        let n = self.msns.wrapping_sub(self.sq_msn);
        (0..n).any(|k| {
            self.send_msg(self.sq_msn.wrapping_add(k))
                .is_some_and(|m| m.needs_resp && !m.resp_done)
        })
    }

    /// Requester: bytes `[offset, offset + dst.len())` of request `msn` (gathered from
    /// its SGEs or inline data, or an atomic's operands).
    pub(super) fn request_payload<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), Unreadable> {
        let Some(m) = self.send_msg(msn) else {
            return Err(Unreadable::Local);
        };
        let w = m.wqe();
        let res = match WrOpcode::from_raw(w.opcode) {
            Some(op @ (WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd)) => {
                // Payload: swap (or addend), then compare, big-endian.
                let (first, second) = if op == WrOpcode::AtomicCmpAndSwp {
                    (w.swap, w.compare_add)
                } else {
                    (w.compare_add, 0)
                };
                let mut b = [0u8; 16];
                let (x, y) = b.split_at_mut(8);
                x.copy_from_slice(&first.to_be_bytes());
                y.copy_from_slice(&second.to_be_bytes());
                let src = b.get(offset as usize..).unwrap_or(&[]);
                let n = dst.len().min(src.len());
                if let (Some(d), Some(s)) = (dst.get_mut(..n), src.get(..n)) {
                    d.copy_from_slice(s);
                }
                Ok(())
            }
            _ => gather(env, &w, m.slot, offset, dst),
        };
        if res.is_err() {
            // Its memory went away after the WQE was checked (deregistered while in
            // flight): nothing more of it is sent, and it completes with a local
            // protection error.
            self.set_fail(msn, WcStatus::LocProtErr);
            return Err(Unreadable::Local);
        }
        Ok(())
    }
}
