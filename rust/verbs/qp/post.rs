// SPDX-License-Identifier: GPL-2.0

//! Posting and transmission: the user doorbell, kernel `ib_post_send` /
//! `ib_post_recv`, and the pump that sends what the protocol core has to send
//! and arms the QP's timer.

use super::*;
use crate::ffi::net::{Dest, RouteCache, TxDatagram, MAX_UDP_PAYLOAD};
use crate::proto::conn::TxKind;

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
        let mut budget = 256;
        let slack = this.dev.pacing_slack_us();
        // A datagram written after a run that was not of it: the first of
        // the next.
        let mut carry: Option<(TxDatagram, Transmit)> = None;
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
            // copied only when no skb could be had. A run of DATA on one
            // path goes out as one UDP GSO burst (`train`).
            // (A carried datagram goes out whatever the budget: the core
            // wrote it as sent.)
            let t = if budget == 0 && carry.is_none() {
                None
            } else {
                if tx.is_none() {
                    *tx = KBox::new(TxCache::new(), GFP_ATOMIC).ok();
                }
                let one = (c.config().mtu as usize + DATAGRAM_ROOM).min(scratch.len());
                // A run fits one UDP datagram's worth of payload (a GSO skb's
                // limit): at a 9000-byte MTU, 7 packets.
                let most = (MAX_UDP_PAYLOAD / one.max(1)).max(1);
                let cap =
                    one.saturating_mul(usize::from(c.config().train.max(1)).min(budget).min(most));
                let spare = tx
                    .as_mut()
                    .and_then(|x| x.spare.take())
                    .filter(|d| d.cap() >= one);
                let first = match carry.take() {
                    Some((d, t)) => Some((d, Some(t))),
                    None => spare
                        .or_else(|| TxDatagram::new(one).ok())
                        .map(|d| (d, None)),
                };
                match first {
                    Some((mut d, carried)) => {
                        let fresh = carried.is_none();
                        let t = match carried {
                            Some(t) => Some(t),
                            None => c.poll_transmit(now, d.buf_at(0, one), &mut rc.bind(&mut env)),
                        };
                        match t {
                            Some(t) => {
                                // A DATA may start a run: it moves to a datagram
                                // with room for one (an ACK never needs it).
                                if fresh
                                    && matches!(t.kind, TxKind::Data { .. })
                                    && d.cap() < cap
                                    && cap >= 2 * one
                                {
                                    if let Ok(mut run) = TxDatagram::new(cap) {
                                        run.buf_at(0, t.len).copy_from_slice(d.buf_at(0, t.len));
                                        let small = core::mem::replace(&mut d, run);
                                        if let Some(x) = tx.as_mut() {
                                            x.spare = Some(small);
                                        }
                                    }
                                }
                                observe::trace_tx(this.qpn, &t, d.buf_at(0, t.len));
                                let mut train = Train::new(t);
                                let mut lone = None;
                                while train.len() + one <= d.cap()
                                    && train.wants_more()
                                    && train.count() < budget
                                {
                                    let at = train.len();
                                    let Some(u) = c.poll_transmit(
                                        now,
                                        d.buf_at(at, one),
                                        &mut rc.bind(&mut env),
                                    ) else {
                                        break;
                                    };
                                    if train.take(&u) {
                                        observe::trace_tx(this.qpn, &u, d.buf_at(at, u.len));
                                    } else {
                                        // Not of the run: the first of the next,
                                        // copied to a datagram of its own.
                                        let room = if matches!(u.kind, TxKind::Data { .. }) {
                                            cap
                                        } else {
                                            one
                                        };
                                        carry = TxDatagram::new(room).ok().map(|mut o| {
                                            o.buf_at(0, u.len).copy_from_slice(d.buf_at(at, u.len));
                                            (o, u)
                                        });
                                        if carry.is_none() {
                                            // No skb: the core wrote it as sent,
                                            // and it goes, from `scratch`.
                                            let n = u.len.min(scratch.len()).min(one);
                                            scratch[..n].copy_from_slice(d.buf_at(at, n));
                                            lone = Some((u, n));
                                        }
                                        break;
                                    }
                                }
                                budget = budget.saturating_sub(train.count() - 1);
                                let routes =
                                    tx.as_mut().map(|x| (&mut x.routes, usize::from(t.path)));
                                train.send(&this.dev, &src, &dst, d, routes);
                                if let Some((u, n)) = lone {
                                    send_counted(
                                        &this.dev,
                                        this.qpn,
                                        &src,
                                        &dst,
                                        &u,
                                        &scratch[..n],
                                        None,
                                    );
                                }
                                Some(t)
                            }
                            None => {
                                if let Some(x) = tx.as_mut() {
                                    x.spare = Some(d);
                                }
                                None
                            }
                        }
                    }
                    None => c
                        .poll_transmit(now, scratch, &mut rc.bind(&mut env))
                        .inspect(|t| {
                            let len = t.len.min(scratch.len());
                            let routes = tx.as_mut().map(|x| (&mut x.routes, usize::from(t.path)));
                            send_counted(
                                &this.dev,
                                this.qpn,
                                &src,
                                &dst,
                                t,
                                &scratch[..len],
                                routes,
                            );
                        }),
                }
            };
            if t.is_none() {
                this.fold_stats(c, env.io);
                this.dev.fair.note_rtt(c.min_rtt());
                break c.poll_timeout();
            }
            // Sent under the QP lock: the tunnel transmits with bottom halves
            // off, so a datagram to this host is received later, in softirq.
            budget = budget.saturating_sub(1);
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

/// Room a datagram needs beyond the path MTU's payload
/// ([`Connection::poll_transmit`]: at least `mtu + 84` bytes).
const DATAGRAM_ROOM: usize = 84;

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

/// The datagrams the pump wrote one after another into one skb: a run of
/// DATA packets on one path, each as long as the first but the last, which
/// may be shorter and ends it: one UDP GSO burst (`Config::train` of them at
/// most, as the core sends).
struct Train {
    /// The first.
    first: Transmit,
    /// Datagrams in the run, and their bytes.
    count: usize,
    len: usize,
    /// Whether the run is over (its last was shorter, or a datagram not of
    /// it came next).
    closed: bool,
}

impl Train {
    fn new(first: Transmit) -> Self {
        Train {
            first,
            count: 1,
            len: first.len,
            closed: !matches!(first.kind, TxKind::Data { .. }),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn count(&self) -> usize {
        self.count
    }

    /// Whether another datagram may join (the caller also checks the room).
    fn wants_more(&self) -> bool {
        !self.closed
    }

    /// Takes `u`, written right after the run, if it belongs to it: DATA on
    /// the same path, source port, plane and ECN codepoint, no longer than
    /// the first. Otherwise it stays out, and the run is over.
    fn take(&mut self, u: &Transmit) -> bool {
        let f = &self.first;
        let joins = matches!(u.kind, TxKind::Data { .. })
            && u.path == f.path
            && u.src_port == f.src_port
            && u.plane == f.plane
            && u.ect == f.ect
            && u.len <= f.len
            && u.len != 0;
        if !joins {
            self.closed = true;
            return false;
        }
        self.count += 1;
        self.len += u.len;
        self.closed = u.len < f.len;
        true
    }

    /// Sends the run (counted datagram by datagram, as if each went alone;
    /// the pump traced each as it was written) from datagram `d`.
    fn send(
        self,
        dev: &DevShared<Qp>,
        src: &IpAddr,
        dst: &IpAddr,
        mut d: TxDatagram,
        routes: Option<(&mut RouteCache, usize)>,
    ) {
        let f = &self.first;
        let to = Dest {
            src: *src,
            dst: *dst,
            oif: dev.planes.oif(f),
            src_port: f.src_port,
            dst_port: dev.transport.port(),
            ect: f.ect,
        };
        if self.count > 1 {
            d.set_segment(u16::try_from(f.len).unwrap_or(0));
        }
        if dev
            .transport
            .send_datagram(d, self.len, &to, routes)
            .is_ok()
        {
            dev.count(counter::TX_PACKETS, self.count as u64);
            dev.count(counter::TX_BYTES, self.len as u64);
            if f.kind == TxKind::Probe {
                dev.count(counter::PROBES, 1);
            }
        }
    }
}

/// Sends datagram `d`, the first `t.len` bytes of which the core wrote as
/// `t` describes, from `src` to `dst` through device `dev`'s netdev, routed
/// through `routes` (slot: the path) when given; traced (`metaroce:tx`,
/// under QPN `qpn`) as it is handed over, counted (`tx_packets`,
/// `tx_bytes`, `probes`) if it went out.
pub(super) fn send_datagram(
    dev: &DevShared<Qp>,
    qpn: u32,
    src: &IpAddr,
    dst: &IpAddr,
    t: &Transmit,
    mut d: TxDatagram,
    routes: Option<(&mut RouteCache, usize)>,
) {
    let len = t.len.min(d.buf().len());
    observe::trace_tx(qpn, t, &d.buf()[..len]);
    let to = Dest {
        src: *src,
        dst: *dst,
        oif: dev.planes.oif(t),
        src_port: t.src_port,
        dst_port: dev.transport.port(),
        ect: t.ect,
    };
    if dev.transport.send_datagram(d, len, &to, routes).is_ok() {
        dev.count(counter::TX_PACKETS, 1);
        dev.count(counter::TX_BYTES, len as u64);
        if t.kind == TxKind::Probe {
            dev.count(counter::PROBES, 1);
        }
    }
}

/// Sends datagram `bytes` the core described in `t` from `src` to `dst`
/// through device `dev`'s netdev (copied into an skb; routed through
/// `routes` when given), as [`send_datagram`]. Nothing goes out (and
/// nothing is counted) if no skb can be had.
pub(super) fn send_counted(
    dev: &DevShared<Qp>,
    qpn: u32,
    src: &IpAddr,
    dst: &IpAddr,
    t: &Transmit,
    bytes: &[u8],
    routes: Option<(&mut RouteCache, usize)>,
) {
    let Ok(mut d) = TxDatagram::new(bytes.len()) else {
        return;
    };
    d.buf().copy_from_slice(bytes);
    let t = Transmit {
        len: bytes.len(),
        ..*t
    };
    send_datagram(dev, qpn, src, dst, &t, d, routes);
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
