// SPDX-License-Identifier: GPL-2.0

//! The completer (rxe's `rxe_comp.c`): send completions in SQ order, READ
//! and atomic responses placed into the WQEs they answer, the error state
//! and its flush, and completion queue overflow.

use super::*;

impl Glue<'_> {
    pub(super) fn send_msg(&self, msn: u32) -> Option<SendMsg> {
        let i = (msn as usize).checked_rem(self.io.sends.len())?;
        self.io.sends.get(i).copied()
    }

    /// Marks in-flight send message `msn` as failed with `status` (the
    /// first failure stands).
    pub(super) fn set_fail(&mut self, msn: u32, status: u32) {
        if let Some(i) = (msn as usize).checked_rem(self.io.sends.len()) {
            if let Some(s) = self.io.sends.get_mut(i) {
                if s.fail == 0 {
                    s.fail = status;
                }
            }
        }
    }

    pub(super) fn record(&mut self, msn: u32, m: SendMsg) {
        if let Some(i) = (msn as usize).checked_rem(self.io.sends.len()) {
            if let Some(s) = self.io.sends.get_mut(i) {
                *s = m;
            }
        }
    }

    /// Completes the oldest send WQE (in order).
    pub(super) fn complete_send(&mut self, status: u32) {
        if self.io.sq.is_none() || self.io.sq_msn == self.io.msns {
            return;
        }
        let Some(m) = self.send_msg(self.io.sq_msn) else {
            return;
        };
        self.send_cqe(&m.wqe, status);
        let Some(sq) = self.io.sq.as_ref() else {
            return;
        };
        self.io.sq_cons = sq.advance(self.io.sq_cons, 1);
        self.io.sq_msn = self.io.sq_msn.wrapping_add(1);
        sq.set_consumer(self.io.sq_cons);
        self.sq_drained_check();
    }

    /// Writes the completion of send WQE `w` with `status` if it asks for
    /// one (signaled, or any with `sq_sig_all`) or failed (IBTA 10.8.3.1).
    pub(super) fn send_cqe(&self, w: &SendWqe, status: u32) {
        let signaled = self.qp.sq_sig_all || w.send_flags & send_flags::SIGNALED != 0;
        if !signaled && status == wc::SUCCESS {
            return;
        }
        let (opcode, byte_len) = match w.opcode {
            wr::RDMA_WRITE | wr::RDMA_WRITE_WITH_IMM => (wc::OP_RDMA_WRITE, w.length),
            wr::RDMA_READ => (wc::OP_RDMA_READ, w.length),
            wr::ATOMIC_CMP_AND_SWP => (wc::OP_COMP_SWAP, w.length),
            wr::ATOMIC_FETCH_AND_ADD => (wc::OP_FETCH_ADD, w.length),
            wr::ATOMIC_WRITE => (wc::OP_ATOMIC_WRITE, w.length),
            wr::BIND_MW => (wc::OP_BIND_MW, 0),
            wr::REG_MR => (wc::OP_REG_MR, 0),
            wr::LOCAL_INV => (wc::OP_LOCAL_INV, 0),
            _ => (wc::OP_SEND, w.length),
        };
        let wc = Wc {
            wr_id: w.wr_id,
            status,
            opcode,
            byte_len,
            qp_num: self.qp.qpn,
            ..Wc::default()
        };
        self.post(&self.qp.scq, &wc, false);
    }

    /// Writes a completion into `cq`; a full CQ loses it, raises
    /// `IB_EVENT_CQ_ERR` and sends the QP to the error state (IBTA 11.4.2.1,
    /// class G; rxe's `rxe_cq_post`), by [`Self::settle`].
    pub(super) fn post(&self, cq: &Cq, wc: &Wc, solicited: bool) {
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
    pub(super) fn settle(&mut self) -> bool {
        if self.io.cq_lost.take() && self.io.attr.state != QpState::Err {
            self.flush();
            self.io.cq_lost.set(false);
            return true;
        }
        false
    }

    /// In SQD with asynchronous notification: raises `IB_EVENT_SQ_DRAINED`
    /// once no send WQE is in progress (IBTA 10.3.1.2).
    pub(super) fn sq_drained_check(&mut self) {
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
    pub(super) fn flush(&mut self) {
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
    pub(super) fn flushed_rx(&self, rsn: u32, wr_id: u64) {
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
    pub(super) fn flushed(&self, cq: &Cq, wr_id: u64, opcode: u32) {
        let wc = Wc {
            wr_id,
            status: wc::WR_FLUSH_ERR,
            opcode,
            qp_num: self.qp.qpn,
            ..Wc::default()
        };
        self.post(cq, &wc, false);
    }

    /// Completes, in SQ order, every WQE whose request is acknowledged and
    /// whose response (READ, atomic) is whole.
    pub(super) fn complete_sends(&mut self) {
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
    pub(super) fn read_msn(&self, k: u32) -> Option<u32> {
        let i = (k as usize).checked_rem(self.io.reads.len())?;
        self.io.reads.get(i).copied()
    }

    /// Requester: a packet of a READ or atomic response, placed into the
    /// SGEs of the WQE it answers.
    pub(super) fn place_response(&mut self, p: &Placement<'_>) -> core::result::Result<(), Refuse> {
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
        Ok(())
    }

    /// Requester: response `msn` is whole; its WQE may complete.
    pub(super) fn response_complete(&mut self, msn: u32) {
        if let Some(m) = self.read_msn(msn) {
            if let Some(i) = (m as usize).checked_rem(self.io.sends.len()) {
                if let Some(s) = self.io.sends.get_mut(i) {
                    s.resp_done = true;
                }
            }
        }
        self.io.reads_done = self.io.reads_done.wrapping_add(1);
        self.complete_sends();
    }

    /// Requester: request `msn` is acknowledged; completes what it can, in
    /// SQ order.
    pub(super) fn request_acked(&mut self, msn: u32) {
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

    /// The connection failed: the QP enters the error state, the oldest WQE
    /// reporting why.
    pub(super) fn failed(&mut self, e: ConnError) {
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
