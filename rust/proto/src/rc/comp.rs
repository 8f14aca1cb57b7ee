//! The completer (IBTA 10.8.3.1, 11.4.2; rxe's `rxe_comp.c`): send completions in SQ
//! order, READ and atomic responses placed into the WQEs they answer, the error state
//! and its flush, and a completion queue overrun.

use super::super::bytes::Bytes;
use super::super::conn::{ConnError, Placement, Refuse};
use super::super::wire::Op;
use super::env::Env;
use super::types::{send_flags, Cqe, QpMode, SendWqe, WcOpcode, WcStatus, WrOpcode};
use super::{at, conn_error_status, Engine, SendMsg, Tables, REQ, RESP_ACCESS};

impl<T: Tables> Engine<T> {
    pub(super) fn send_msg(&mut self, msn: u32) -> Option<SendMsg> {
        at(self.t.sends(), msn).copied()
    }

    /// Marks in-flight send message `msn` as failed with `status` (the first failure
    /// stands).
    pub(super) fn set_fail(&mut self, msn: u32, status: WcStatus) {
        if let Some(s) = at(self.t.sends(), msn) {
            if s.fail.is_none() {
                s.fail = Some(status);
            }
        }
    }

    pub(super) fn record(&mut self, msn: u32, m: SendMsg) {
        if let Some(s) = at(self.t.sends(), msn) {
            *s = m;
        }
    }

    /// Completes the oldest send WQE (in order) with `status`.
    fn complete_send<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, status: WcStatus) {
        if env.sq_producer().is_none() || self.sq_msn == self.msns {
            return;
        }
        let Some(m) = self.send_msg(self.sq_msn) else {
            return;
        };
        self.send_cqe(env, &m.wqe(), status);
        self.sq_cons = env.sq_advance(self.sq_cons, 1);
        self.sq_msn = self.sq_msn.wrapping_add(1);
        env.sq_set_consumer(self.sq_cons);
        self.sq_drained_check(env);
    }

    /// Writes the completion of send WQE `w` with `status` if it asks for one
    /// (signaled, or any with `sq_sig_all`) or failed (IBTA 10.8.3.1). A lost send
    /// completion only raises the CQ's event (as rxe).
    pub(super) fn send_cqe<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        w: &SendWqe,
        status: WcStatus,
    ) {
        let signaled = env.attrs().sq_sig_all || w.send_flags & send_flags::SIGNALED != 0;
        if !signaled && status == WcStatus::Success {
            return;
        }
        let (opcode, byte_len) = match WrOpcode::from_raw(w.opcode) {
            Some(WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm) => {
                (WcOpcode::RdmaWrite, w.length)
            }
            Some(WrOpcode::RdmaRead) => (WcOpcode::RdmaRead, w.length),
            Some(WrOpcode::AtomicCmpAndSwp) => (WcOpcode::CompSwap, w.length),
            Some(WrOpcode::AtomicFetchAndAdd) => (WcOpcode::FetchAdd, w.length),
            Some(WrOpcode::AtomicWrite) => (WcOpcode::AtomicWrite, w.length),
            Some(WrOpcode::BindMw) => (WcOpcode::BindMw, 0),
            Some(WrOpcode::RegMr) => (WcOpcode::RegMr, 0),
            Some(WrOpcode::LocalInv) => (WcOpcode::LocalInv, 0),
            _ => (WcOpcode::Send, w.length),
        };
        let c = Cqe {
            wr_id: w.wr_id,
            status,
            opcode,
            byte_len,
            ..Cqe::default()
        };
        env.push_send(&c);
    }

    /// Writes a receive completion; a full CQ loses it and the QP enters the error state
    /// at the next [`Self::settle`] (IBTA 11.4.2.1, responder class G; rxe's
    /// `rxe_cq_post`).
    pub(super) fn push_recv<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        c: &Cqe,
        solicited: bool,
    ) {
        if !env.push_recv(c, solicited) {
            self.cq_lost = true;
        }
    }

    /// A receive completion the host wrote itself (UD) was lost to a full CQ.
    pub fn note_cq_lost(&mut self) {
        self.cq_lost = true;
    }

    /// After a receive completion was lost to a full CQ: the QP enters the error state
    /// (once); returns whether it did, so that the caller stops the connection before it
    /// acknowledges what was received (the sender then times out, as with rxe). Call it
    /// where no completion is being written.
    pub fn settle<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) -> bool {
        if core::mem::take(&mut self.cq_lost) && env.mode() != QpMode::Err {
            self.flush(env);
            self.cq_lost = false;
            return true;
        }
        false
    }

    /// In SQD with asynchronous notification: raises `IB_EVENT_SQ_DRAINED` once no send
    /// WQE is in progress (IBTA 10.3.1.2).
    pub(super) fn sq_drained_check<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) {
        if self.sqd_notify && env.mode() == QpMode::Sqd && self.sq_msn == self.msns {
            self.sqd_notify = false;
            env.sq_drained();
        }
    }

    /// Moves the QP to the error state and completes every outstanding WQE: the oldest
    /// send with the connection's error (if any), a WQE that failed on its own with its
    /// own status, the rest with `IB_WC_WR_FLUSH_ERR` (IBTA 10.3.1, 11.4.2.3); receives
    /// likewise, the one a message could not be placed into with that error.
    pub fn flush<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) {
        env.enter_error();
        // Sends that became messages, then those still only in the ring.
        let mut first = self.error.take();
        while self.sq_msn != self.msns {
            let own = self.send_msg(self.sq_msn).and_then(|m| m.fail);
            let status = match (first.take(), own) {
                (_, Some(f)) => f,
                (Some(e), None) => e,
                (None, None) => WcStatus::WrFlushErr,
            };
            let before = self.sq_msn;
            self.complete_send(env, status);
            if self.sq_msn == before {
                // No SQ: nothing to complete.
                self.msns = self.sq_msn;
            }
        }
        // Every READ and atomic completed (flushed): no response is awaited any more
        // (the local ACK timer stops for them, [`Engine::awaiting`]), and one that
        // comes late is not placed (the QP is in the error state).
        self.reads_done = self.tx_reads;
        if let Some(prod) = env.sq_producer() {
            let mut i = self.sq_cons;
            while i != prod {
                if let Some(w) = env.sq_wqe(i) {
                    let c = Cqe {
                        wr_id: w.wr_id,
                        status: WcStatus::WrFlushErr,
                        ..Cqe::default()
                    };
                    env.push_send(&c);
                }
                i = env.sq_advance(i, 1);
            }
            self.sq_cons = prod;
            self.scan = prod;
            env.sq_set_consumer(prod);
        }
        if let Some(prod) = env.rq_producer() {
            let mut i = self.rq_cons;
            let mut rsn = self.rx_rsn;
            while i != prod {
                if let Some(w) = env.rq_wqe(i) {
                    self.flushed_rx(env, rsn, w.wr_id);
                }
                i = env.rq_advance(i, 1);
                rsn = rsn.wrapping_add(1);
            }
            self.rq_cons = prod;
            env.rq_set_consumer(prod);
        }
        // SRQ WQEs taken by messages that will not complete now.
        let n = self.t.taken().len() as u32;
        for k in 0..n {
            let rsn = self.rx_rsn.wrapping_add(k);
            let Some(t) = at(self.t.taken(), rsn) else {
                break;
            };
            if t.valid {
                t.valid = false;
                let wr_id = t.wr_id;
                self.flushed_rx(env, rsn, wr_id);
            }
        }
        self.msns = self.sq_msn;
        // On an SRQ, the QP takes no more of its WQEs: tell the consumer once per entry
        // into the error state (IBTA 11.6.3.1).
        if env.attrs().srq_sge.is_some() && !self.last_wqe_sent {
            self.last_wqe_sent = true;
            env.last_wqe_reached();
        }
    }

    /// The completion of receive `rsn` as the error state discards it: the status of the
    /// error it met, if it met one (a message it could not hold), else
    /// `IB_WC_WR_FLUSH_ERR`.
    fn flushed_rx<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, rsn: u32, wr_id: u64) {
        let status = match self.rx_error {
            // Once: a receive posted later in the error state (which may get the
            // same RSN, as flushing does not advance it) just flushes.
            Some((r, status)) if r == rsn => {
                self.rx_error = None;
                status
            }
            _ => WcStatus::WrFlushErr,
        };
        let c = Cqe {
            wr_id,
            status,
            opcode: WcOpcode::Recv,
            ..Cqe::default()
        };
        self.push_recv(env, &c, false);
    }

    /// Completes, in SQ order, every WQE whose request is acknowledged and whose
    /// response (READ, atomic) is whole.
    fn complete_sends<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) {
        while self.sq_msn != self.msns {
            let Some(m) = self.send_msg(self.sq_msn) else {
                return;
            };
            if m.fail.is_some() {
                // The oldest WQE failed: it completes with its status, the QP enters the
                // error state and the rest flush.
                self.flush(env);
                return;
            }
            if !m.acked || (m.needs_resp && !m.resp_done) {
                return;
            }
            let before = self.sq_msn;
            self.complete_send(env, WcStatus::Success);
            if self.sq_msn == before {
                return;
            }
        }
    }

    /// The send message response number `k` answers.
    fn read_msn(&mut self, k: u32) -> Option<u32> {
        at(self.t.reads(), k).copied()
    }

    /// Requester: a packet of a READ or atomic response, placed into the SGEs of the WQE
    /// it answers (IBTA 9.7.5.1.4-5). Only a response that can be the answer it names
    /// (Documentation/transport.rst, C11) is placed: response `k` of a READ or atomic
    /// sent and not yet answered, of the kind its request asks for, whose length is the
    /// request's. Any other is the responder's error: nothing of it is placed, and
    /// nothing completes with success on it ([`Self::bad_response`]).
    pub(super) fn place_response<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        p: &Placement<'_>,
    ) -> Result<(), Refuse> {
        // In the error state (a QP lingering after a refusal, [`Self::lingers`]) no
        // response is placed: its WQE was flushed.
        if env.mode() == QpMode::Err {
            return Err(Refuse::Held);
        }
        // A response packet is the requester's progress: the request stream's retry
        // count starts over ([`App::awaiting`], shared connections; a connection of
        // one pair restarts its timer on any new data).
        if let Some(st) = self.streams.get(REQ) {
            st.tx.retries = 0;
        }
        let sent = self.tx_reads.wrapping_sub(self.reads_done);
        let answers = match self.read_msn(p.msn) {
            Some(msn) if p.msn.wrapping_sub(self.reads_done) < sent => self
                .send_msg(msn)
                .filter(|m| m.needs_resp && !m.resp_done)
                .map(|m| (msn, m)),
            _ => None,
        };
        let Some((msn, m)) = answers else {
            // No READ or atomic waits for response `k`: it answers nothing.
            self.bad_response(env, None, WcStatus::BadRespErr);
            return Ok(());
        };
        let read = WrOpcode::from_raw(u32::from(m.opcode)) == Some(WrOpcode::RdmaRead);
        let want = if read { Op::ReadResp } else { Op::AtomicResp };
        if p.op != want {
            // A READ answered as an atomic, or an atomic as a READ.
            self.bad_response(env, Some(msn), WcStatus::BadRespErr);
            return Ok(());
        }
        if p.tag == RESP_ACCESS {
            // The responder could not serve it (its memory went away between the
            // request's check and its execution).
            self.set_fail(msn, WcStatus::RemAccessErr);
            self.complete_sends(env);
            return Ok(());
        }
        // A READ_RESP is the READ's length (its RETH `dma_len`), an ATOMIC_RESP one
        // packet of 8 bytes: more or fewer bytes than asked for (IBTA: a local length
        // error; siw's Read Response check) fail the WQE, whichever packet shows it,
        // before the message could complete with bytes missing or misplaced.
        let len = if read { m.length } else { 8 };
        let mut b = [0u8; 8];
        let original = p.payload.copy_to(&mut b).then_some(b);
        if p.msg_len != len || (!read && original.is_none()) {
            self.bad_response(env, Some(msn), WcStatus::LocLenErr);
            return Ok(());
        }
        // An atomic's original value travels big-endian; the WQE's buffer gets it in
        // host order, as an 8-byte integer.
        let v;
        let data = match original {
            Some(b) if !read => {
                v = u64::from_be_bytes(b).to_ne_bytes();
                Bytes::from(&v[..])
            }
            _ => p.payload,
        };
        if Self::scatter_send(env, &m, p.offset, data).is_err() {
            // The READ's or atomic's local SGEs cannot take the data (bad lkey, no
            // LOCAL_WRITE, past the MR): a local protection error, never a success with
            // nothing placed (rxe_comp).
            self.set_fail(msn, WcStatus::LocProtErr);
            self.complete_sends(env);
        }
        Ok(())
    }

    /// Requester: a response packet that cannot be the answer it names (a broken
    /// responder): nothing of it is placed, it is counted ([`Env::bad_response`]), and
    /// the WQE it names (`Some(msn)`) completes with `status` once every earlier WQE
    /// has, the QP entering the error state; naming none, the QP enters the error state
    /// at once, its oldest WQE reporting `status`. The connection takes the packet (it
    /// passed every check of the transport): the QP in the error state takes nothing
    /// more.
    fn bad_response<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: Option<u32>,
        status: WcStatus,
    ) {
        env.bad_response();
        match msn {
            Some(msn) => {
                self.set_fail(msn, status);
                self.complete_sends(env);
            }
            None => {
                self.error.get_or_insert(status);
                self.flush(env);
            }
        }
    }

    /// Requester: response `k` is whole; its WQE may complete.
    pub(super) fn response_complete<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, k: u32) {
        let sent = self.tx_reads.wrapping_sub(self.reads_done);
        if sent == 0 {
            // Nothing awaits a response: a flush (this response's own packet failed its
            // WQE and the QP entered the error state) already counted every one, and
            // counting this one again would leave a response awaited for ever
            // ([`Engine::awaiting`]).
            return;
        }
        if k.wrapping_sub(self.reads_done) < sent {
            if let Some(msn) = self.read_msn(k) {
                if let Some(s) = at(self.t.sends(), msn) {
                    s.resp_done = true;
                }
            }
        }
        self.reads_done = self.reads_done.wrapping_add(1);
        self.complete_sends(env);
    }

    /// Requester: request `msn` is acknowledged; completes what it can, in SQ order.
    pub(super) fn request_acked<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, msn: u32) {
        if let Some(status) = self.error.take() {
            if msn == self.sq_msn {
                self.complete_send(env, status);
            }
            self.flush(env);
            return;
        }
        if let Some(s) = at(self.t.sends(), msn) {
            s.acked = true;
        }
        self.complete_sends(env);
    }

    /// Requester: the responder refused request `msn` for good (a NAK naming it, `e`
    /// a remote access error or invalid request): every earlier request is complete
    /// there (IBTA 9.7.5.2.4), acknowledged or not, so each completes as soon as its
    /// response (READ, atomic) is whole, and this one with `e`'s status; the rest
    /// flush ([`Self::failed`] follows).
    pub(super) fn request_refused<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        msn: u32,
        e: ConnError,
    ) {
        let Some(status) = conn_error_status(e) else {
            return;
        };
        if msn.wrapping_sub(self.sq_msn) >= self.msns.wrapping_sub(self.sq_msn) {
            return;
        }
        let mut k = self.sq_msn;
        let mut own = false;
        while k != msn {
            match at(self.t.sends(), k) {
                Some(s) if s.fail.is_none() => s.acked = true,
                // An earlier WQE failed on its own: the ones before it complete, it
                // reports its error and the rest (the refused one too) flush.
                _ => {
                    own = true;
                    break;
                }
            }
            k = k.wrapping_add(1);
        }
        if !own {
            self.set_fail(msn, status);
        }
        self.named_nak = true;
        self.complete_sends(env);
    }

    /// The connection failed: the QP enters the error state, the oldest WQE reporting
    /// why ([`conn_error_status`]) unless the NAK named the refused request
    /// ([`Self::request_refused`] gave it its status).
    pub(super) fn failed<E: Env<Sge = T::Sge>>(&mut self, env: &mut E, e: ConnError) {
        if let Some(s) = conn_error_status(e).filter(|_| !self.named_nak) {
            self.error = Some(s);
        }
        self.flush(env);
    }
}
