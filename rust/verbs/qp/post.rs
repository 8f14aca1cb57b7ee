// SPDX-License-Identifier: GPL-2.0

//! Posting and transmission: the user doorbell, kernel `ib_post_send` /
//! `ib_post_recv`, and the pump that sends what the protocol core has to send
//! and arms the QP's timer.

use super::tx::{send_counted, Out, Pump, Source};
use super::*;

impl Qp {
    /// Sends datagram `bytes` the core described in `t` from `src` to `dst`
    /// through the device's netdev, counted and traced ([`send_counted`]).
    pub(super) fn send_counted(&self, src: &IpAddr, dst: &IpAddr, t: &Transmit, bytes: &[u8]) {
        send_counted(&self.dev, self.qpn, src, dst, t, bytes, None);
    }

    /// Adds what connection `c`'s counters gained since `io.last_stats` to
    /// the device's counters.
    pub(super) fn fold_stats(&self, c: &Conn, io: &mut Io) {
        fold_stats(&self.dev, c.stats(), &mut io.last_stats);
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
                    let Inner { io, rc, .. } = &mut *g;
                    rc.flush(&mut Glue { qp: this, io });
                    return Ok(());
                }
                _ => return Err(EINVAL),
            }
            if this.qp_type.is_datagram() {
                Qp::datagrams_locked(this, &mut g);
                return Ok(());
            }
            if this.qp_type == QpType::Uc {
                Qp::uc_locked(this, &mut g);
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
            let Inner { io, rc, .. } = &mut *g;
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
                rc.flush(&mut Glue { qp: this, io });
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
        let Inner { io, rc, .. } = &mut *g;
        if !this.kernel || io.dead || io.attr.state == QpState::Reset {
            return Err(EINVAL);
        }
        let r = wrs.post(io.rq.as_ref().ok_or(EINVAL)?, io.caps.max_recv_sge);
        if io.attr.state == QpState::Err {
            rc.flush(&mut Glue { qp: this, io });
        }
        r
    }

    /// Sends whatever the core has to send (at most 256 datagrams per call),
    /// then arms the timer for the core's next deadline.
    pub(super) fn pump(this: &Arc<Self>) {
        Self::pump_locked(this, this.inner.lock());
    }

    /// Sends a datagram QP's posted datagrams and settles its completions,
    /// with the QP lock held (`g`).
    pub(super) fn datagrams_locked(this: &Arc<Self>, g: &mut BhGuard<'_, Inner>) {
        let Inner {
            io, rc, scratch, ..
        } = &mut **g;
        let mut env = Glue { qp: this, io };
        env.datagrams_out(rc, scratch);
        rc.settle(&mut env);
    }

    /// [`Self::pump`] with the QP lock already held (`g`): what the caller
    /// just did and the datagrams it calls for are one critical section. (A
    /// receive pumps at the end of its batch, `Qp::receive`; a `destroy_qp`
    /// that comes first sends the ACKs it owes itself, `Qp::destroy`.)
    ///
    /// A member of a shared connection has the connection send (without
    /// this lock: the connection's comes first).
    pub(super) fn pump_locked(this: &Arc<Self>, mut g: BhGuard<'_, Inner>) {
        if let Some(l) = g.link.clone() {
            drop(g);
            Peer::pump(&l.peer, Some(l.id));
            return;
        }
        let slack = this.dev.pacing_slack_us();
        let mut pump = Pump::new();
        let next = loop {
            let Inner {
                conn,
                io,
                rc,
                scratch,
                tx,
                ..
            } = &mut *g;
            let (Some(c), Some(src), Some(dst)) = (conn.as_mut(), io.src, io.dst) else {
                return;
            };
            c.set_pacing_slack_us(slack);
            let (planes, up) = this.dev.planes.state();
            c.set_planes(planes, up);
            let mut env = Glue { qp: this, io };
            if rc.settle(&mut env) {
                c.abort();
            }
            let (mtu, train) = (c.config().mtu, c.config().train);
            let out = Out {
                dev: &this.dev,
                src,
                dst,
            };
            let mut conn = QpSource {
                c,
                rc,
                env,
                now: Instant(now_ns()),
                qpn: this.qpn,
            };
            // Sent under the QP lock: the tunnel transmits with bottom halves
            // off, so a datagram to this host is received later, in softirq.
            if !pump.round(&out, mtu, train, tx, scratch, &mut conn) {
                let QpSource { c, env, .. } = conn;
                this.fold_stats(c, env.io);
                this.dev.fair.note_rtt(c.min_rtt());
                break c.poll_timeout();
            }
        };
        // Armed before the lock is released: `Timer::arm` moves a queued timer
        // either way, so a pump racing on another CPU, arming after its own
        // unlock, could otherwise leave the deadline of an older state.
        if let Some(at) = next {
            Timer::arm(this, at.as_nanos());
        }
        drop(g);
    }
}

/// An RC QP's own connection as its pump sees it (at time `now`).
struct QpSource<'a> {
    c: &'a mut Conn,
    rc: &'a mut Engine<RcTables>,
    env: Glue<'a>,
    now: Instant,
    qpn: u32,
}

impl Source for QpSource<'_> {
    fn poll(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        self.c
            .poll_transmit(self.now, buf, &mut self.rc.bind(&mut self.env))
    }

    fn trace(&mut self, t: &Transmit, bytes: &[u8]) {
        observe::trace_tx(self.qpn, t, bytes);
    }
}

/// Adds what a connection's counters `st` gained since `last` to device
/// `dev`'s counters; `last` becomes `st`.
pub(super) fn fold_stats(dev: &DevShared<Qp>, st: &Stats, last: &mut Stats) {
    let st = *st;
    let last = core::mem::replace(last, st);
    for (k, n) in [
        (counter::RETRANSMITS, st.retx.wrapping_sub(last.retx)),
        (
            counter::TIMEOUTS,
            u32::from(st.timeouts.wrapping_sub(last.timeouts)),
        ),
        (
            counter::LOCAL_ACK_TIMEOUTS,
            st.ack_timeouts.wrapping_sub(last.ack_timeouts),
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
        dev.count(k, u64::from(n));
    }
}
