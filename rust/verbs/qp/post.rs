// SPDX-License-Identifier: GPL-2.0

//! Posting and transmission: the user doorbell, kernel `ib_post_send` /
//! `ib_post_recv`, and the pump that sends what the protocol core has to send
//! and arms the QP's timer.

use super::xmit::{self, capacity, Batch};
use super::*;
use crate::ffi::net::{RouteCache, TxDatagram};

impl Qp {
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

    /// Sends whatever the core has to send (at most 256 datagrams per call;
    /// the timer sends the rest), then arms the timer for the core's next
    /// deadline.
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

    /// [`Self::pump`] with the QP lock already held (`g`), so that what the
    /// caller just did and the datagrams it calls for (the ACK of data whose
    /// completion user space can already see) are built in one critical
    /// section: a `destroy_qp` racing the receive cannot discard that ACK.
    /// They are sent after the lock is dropped
    /// ([`xmit`](super::xmit)); if another context is sending for this QP,
    /// that one sends them.
    ///
    /// A member of a shared connection has the connection send (without
    /// this lock: the connection's comes first).
    pub(super) fn pump_locked<'a>(this: &'a Arc<Self>, g: BhGuard<'a, Inner>) {
        if let Some(l) = g.link.clone() {
            drop(g);
            Peer::pump(&l.peer, Some(l.id));
            return;
        }
        xmit::pump(
            &this.inner,
            g,
            &this.dev,
            |i| &mut i.io.sender,
            |g, batch, budget| Self::build_locked(this, g, batch, budget),
            |at| Timer::arm(this, at.as_nanos()),
        );
    }

    /// Builds into `batch` (until it is full) what the core has to send, at
    /// most `budget` datagrams (counted down). When it stops for another
    /// reason, returns the time to poll again: the core's next deadline when
    /// it has nothing more to send, now when the budget is spent (the timer
    /// sends the rest); `None` without a connection.
    fn build_locked(
        this: &Arc<Self>,
        g: &mut BhGuard<'_, Inner>,
        batch: &mut Batch,
        budget: &mut u32,
    ) -> Option<Instant> {
        let slack = this.dev.pacing_slack_us();
        loop {
            if batch.is_full() {
                return None;
            }
            let Inner {
                conn,
                io,
                rc,
                scratch,
                tx,
                ..
            } = &mut **g;
            let (Some(c), Some(src), Some(dst)) = (conn.as_mut(), io.src, io.dst) else {
                return None;
            };
            let now = Instant(now_ns());
            c.set_pacing_slack_us(slack);
            let (planes, up) = this.dev.planes.state();
            c.set_planes(planes, up);
            let mut env = Glue { qp: this, io };
            if rc.settle(&mut env) {
                c.abort();
            }
            // The datagram is written straight into its skb (kept for the
            // next round when nothing was written); into `scratch` and
            // copied only when no skb could be had.
            if *budget == 0 {
                // Whatever is left (some of it may be another context's,
                // which left it to this one) goes from the timer, at once.
                this.fold_stats(c, env.io);
                return Some(now);
            }
            let t = {
                if tx.is_none() {
                    *tx = KBox::new(TxCache::new(), GFP_ATOMIC).ok();
                }
                let cap = capacity(c.config().mtu.into(), scratch.len());
                let spare = tx.as_mut().and_then(|x| x.spare.take());
                match spare.or_else(|| TxDatagram::new(cap).ok()) {
                    Some(mut d) => match c.poll_transmit(now, d.buf(), &mut rc.bind(&mut env)) {
                        Some(t) => {
                            let routes = tx.as_mut().map(|x| (&mut x.routes, usize::from(t.path)));
                            batch.push(&this.dev, this.qpn, &src, &dst, &t, d, routes);
                            Some(t)
                        }
                        None => {
                            if let Some(x) = tx.as_mut() {
                                x.spare = Some(d);
                            }
                            None
                        }
                    },
                    None => c
                        .poll_transmit(now, scratch, &mut rc.bind(&mut env))
                        .inspect(|t| {
                            let len = t.len.min(scratch.len());
                            let routes = tx.as_mut().map(|x| (&mut x.routes, usize::from(t.path)));
                            let bytes = &scratch[..len];
                            batch.push_bytes(&this.dev, this.qpn, &src, &dst, t, bytes, routes);
                        }),
                }
            };
            if t.is_none() {
                this.fold_stats(c, env.io);
                this.dev.fair.note_rtt(c.min_rtt());
                return c.poll_timeout();
            }
            *budget -= 1;
        }
    }
}

/// What an RC QP keeps between transmissions: its output routes, and a
/// datagram (an skb) allocated but not used by the last round of the pump.
pub(crate) struct TxCache {
    routes: RouteCache,
    spare: Option<TxDatagram>,
}

impl TxCache {
    fn new() -> Self {
        TxCache {
            routes: RouteCache::new(),
            spare: None,
        }
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
