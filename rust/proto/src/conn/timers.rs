//! Deadlines: the connection-wide timer table (delayed ACK, RNR wait, pacing), the
//! per-path deadline ([`rto_at`](super::super::path::PathTx::rto_at): tail-loss probe,
//! retransmission or probe timeout) and what happens when they expire:
//! [`Connection::poll_timeout`], [`Connection::handle_timeout`], the tail-loss probe,
//! and the path timeout that moves a path to probing, then to a new source port.

use super::super::path::{PathState, PathTx, Tlp};
use super::super::time::Instant;
use super::{charge, port_for, App, ConnError, ConnState, Connection, Event, LossCause, MAX_PATHS};

/// A connection-wide timer (the per-path RTO is [`rto_at`](super::super::path::PathTx::rto_at)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// Delayed ACK: the paths with unacknowledged data owe an ACK.
    DelayedAck,
    /// End of the RNR wait: the packets refused with RNR go back to the
    /// retransmission queue.
    RnrRetry,
    /// Pacing: when the next data packet may go out. Always holds the next send time;
    /// it is a deadline only while the connection is `paced`.
    Pacing,
}

/// The connection-wide deadlines, [`Instant::NEVER`] when not armed.
#[derive(Clone, Copy, Debug)]
pub(super) struct TimerTable {
    delayed_ack: Instant,
    rnr_retry: Instant,
    pacing: Instant,
}

impl TimerTable {
    pub(super) const fn new() -> Self {
        TimerTable {
            delayed_ack: Instant::NEVER,
            rnr_retry: Instant::NEVER,
            pacing: Instant::ZERO,
        }
    }

    fn slot(&mut self, t: Timer) -> &mut Instant {
        match t {
            Timer::DelayedAck => &mut self.delayed_ack,
            Timer::RnrRetry => &mut self.rnr_retry,
            Timer::Pacing => &mut self.pacing,
        }
    }

    /// The deadline of `t` ([`Instant::NEVER`]: not armed).
    pub(super) fn get(&self, t: Timer) -> Instant {
        match t {
            Timer::DelayedAck => self.delayed_ack,
            Timer::RnrRetry => self.rnr_retry,
            Timer::Pacing => self.pacing,
        }
    }

    pub(super) fn set(&mut self, t: Timer, at: Instant) {
        *self.slot(t) = at;
    }

    pub(super) fn stop(&mut self, t: Timer) {
        self.set(t, Instant::NEVER);
    }

    pub(super) fn is_armed(&self, t: Timer) -> bool {
        self.get(t) != Instant::NEVER
    }

    /// Whether `t` has expired at `now` (never for a timer that is not armed).
    fn expired(&self, t: Timer, now: Instant) -> bool {
        self.get(t) <= now
    }

    /// The earliest connection-wide deadline; pacing's only if `paced`.
    fn next(&self, paced: bool) -> Instant {
        let t = self.rnr_retry.min(self.delayed_ack);
        if paced {
            t.min(self.pacing)
        } else {
            t
        }
    }
}

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// The next instant at which [`Connection::handle_timeout`] (or, for pacing,
    /// [`Connection::poll_transmit`]) must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.timers.next(false);
        if self.paced {
            t = t.min(self.pacing_due());
        }
        for p in self.tx.iter().take(usize::from(self.cfg.paths)) {
            t = t.min(p.rto_at);
        }
        if self.state == ConnState::Open {
            t = t.min(self.retry_at);
        }
        if t == Instant::NEVER {
            None
        } else {
            Some(t)
        }
    }

    /// Processes expired timers.
    pub fn handle_timeout<A: App>(&mut self, now: Instant, app: &mut A) {
        if self.timers.expired(Timer::DelayedAck, now) {
            self.timers.stop(Timer::DelayedAck);
            for (p, rx) in self.rx.iter().enumerate().take(MAX_PATHS) {
                if rx.acked > 0 {
                    self.reports.ack_pending |= 1u64 << p;
                }
            }
        }
        if self.timers.expired(Timer::RnrRetry, now) {
            self.rnr_expired(now, app);
        }
        if self.retry_at <= now {
            self.local_ack_timeout(now, app);
        }
        for p in 0..usize::from(self.cfg.paths).min(P) {
            let Some(t) = self.tx.get(p) else { continue };
            if t.rto_at > now {
                continue;
            }
            if t.reo.hold() {
                self.reorder_expired(now, p, app);
                // The deadline that follows may be due already (a timer that fired
                // the hold late): handled now.
                match self.tx.get(p) {
                    Some(t) if t.rto_at <= now && !t.reo.hold() => {}
                    _ => continue,
                }
            }
            let Some(t) = self.tx.get(p) else { continue };
            if Self::pto_armed(t) && t.inflight > 0 {
                self.tail_probe(now, p, app);
            } else if t.tlp == Tlp::Marker && t.state == PathState::Active {
                self.marker_overdue(now, p, app);
            } else {
                self.path_timeout(now, p, app);
            }
        }
    }

    /// Whether path `t`'s deadline ([`PathTx::rto_at`]) is a probe timeout (PTO):
    /// the path is active, has an RTT sample (else a PTO would rest on another path's
    /// round trip) and no tail-loss probe has fired since its last answer. Otherwise
    /// it is its RTO.
    pub(super) fn pto_armed(t: &PathTx) -> bool {
        t.state == PathState::Active && t.tlp == Tlp::Idle && t.srtt != 0
    }

    /// How long from now path `t`'s deadline lies when it is (re)armed: its probe
    /// timeout ([`Self::pto_armed`]; at most its RTO), or its RTO. The RTO runs from the
    /// path's last answer; a probe timeout from its newest packet.
    ///
    /// PTO = max(SRTT + 4 RTTVAR, 5/4 SRTT) + the ACK delay: RFC 6298's timeout without
    /// its floor (`min_rto_ns`, which is there for timers that cannot resolve less and
    /// for receivers that delay ACKs; this receiver ACKs at once but for `ack_delay_ns`),
    /// and never less than a quarter round trip of reordering room (RACK's reordering
    /// window, RFC 8985 section 6.2). RFC 8985 section 7.2 takes 2 SRTT, because a TCP
    /// receiver may delay an ACK by up to 200 ms; the variance term covers a path
    /// whose round trip jitters. A host timer that resolves only ticks fires it late
    /// (then it is about the RTO; the probe still spares the path a timeout).
    pub(super) fn path_deadline(&self, t: &PathTx) -> u64 {
        let rto = self.rto(t);
        if !Self::pto_armed(t) {
            return rto;
        }
        self.pto(t).min(rto)
    }

    /// Path `t`'s probe timeout, uncapped (see [`Self::path_deadline`]).
    fn pto(&self, t: &PathTx) -> u64 {
        let srtt = u64::from(t.srtt);
        (srtt + 4 * u64::from(t.rttvar)).max(srtt + srtt / 4) + u64::from(self.cfg.ack_delay_ns)
    }

    /// Path `p`'s probe timeout expired with data in flight and no answer: a tail-loss
    /// probe (RFC 8985 section 7.3; Documentation/transport.rst, "Tail-loss probe").
    /// The newest packet in flight on the path goes back to the retransmission queue
    /// (resent first, on the path with the shortest round trip). If older packets
    /// remain, a probe (the marker) follows them on the path, which sends no new data
    /// until it is answered: the answer declares whatever it does not acknowledge lost.
    /// A lost tail costs about a PTO and a round trip instead of an RTO, and the path
    /// stays active: a single random loss neither abandons nor moves a path (two, the
    /// tail and then the marker or its answer, time it out). The marker is due its
    /// answer within a probe timeout ([`Self::marker_overdue`]), and the path within
    /// the RTO; that expiring is a path timeout.
    fn tail_probe<A: App>(&mut self, now: Instant, p: usize, app: &mut A) {
        let rto = self.tx.get(p).map_or(0, |t| self.rto(t));
        let pto = self.tx.get(p).map_or(0, |t| self.pto(t));
        let base = self.tx.get(p).map_or(0, |t| t.base_psn);
        // The newest record in flight on the path: the greatest PSN above the floor.
        let mut newest: Option<(usize, u64, u16)> = None;
        for (w, bit) in self.flight.on_path(p) {
            let i = bit.trailing_zeros() as usize;
            if let Some(k) = self.flight.pool.get(w * 64 + i) {
                let d = k.psn_above(base);
                if !matches!(newest, Some((_, _, nd)) if d < nd) {
                    newest = Some((w, bit, d));
                }
            }
        }
        let Some(t) = self.tx.get_mut(p) else { return };
        t.tlp = Tlp::Fired;
        t.rto_at = Instant::NEVER;
        let Some((w, bit, d)) = newest else { return };
        let i = bit.trailing_zeros() as usize;
        let len = self
            .flight
            .pool
            .get(w * 64 + i)
            .map_or(0, |k| charge(k.len));
        t.inflight = t.inflight.saturating_sub(len);
        if t.inflight > 0 {
            // Older packets remain: a probe follows them on the path, which carries
            // no new data until it is answered. Its answer is due within a probe
            // timeout, or the older packets are resent elsewhere; the path itself is
            // due an answer within the RTO (else it times out: not sooner, since a
            // probe timeout may have fired only because the round trip grew). With
            // nothing else in flight the path has no deadline: its next packet's
            // answer, or its lack, tells.
            t.probe_due = true;
            if pto < rto {
                t.tlp = Tlp::Marker;
                t.rto_at = now.add_nanos(pto);
            } else {
                t.rto_at = now.add_nanos(rto);
            }
            self.probing |= 1u64 << (p % 64);
        }
        self.flight.inflight = self.flight.inflight.saturating_sub(len);
        if let Some(m) = self.flight.members.get_mut(p).and_then(|m| m.get_mut(w)) {
            *m &= !bit;
        }
        if let Some(l) = self.flight.lost.get_mut(w) {
            *l |= bit;
        }
        app.event(Event::Lost {
            path: p as u8,
            psn: base.wrapping_add(u32::from(d)),
            cause: LossCause::TailProbe,
        });
    }

    /// Path `p`'s tail-loss probe marker went a probe timeout without an answer, and
    /// nothing else of the path was answered since the probe fired: the path is
    /// presumed failing (a dead spine or link: REPS and UEC move traffic off such a
    /// path within a few round trips, not an RTO floor later). Everything still in
    /// flight on it is resent on the other paths ([`Event::Lost`], cause
    /// [`LossCause::Timeout`]), and the path stays held, still waiting for the
    /// marker's answer; it times out only when its RTO, counted from the probe, expires.
    /// If the round trip merely grew, this costs the path's window in duplicates and
    /// nothing else: the path keeps its state, window and port.
    fn marker_overdue<A: App>(&mut self, now: Instant, p: usize, app: &mut A) {
        let Some(t) = self.tx.get(p) else { return };
        let rest = self.rto(t).saturating_sub(self.pto(t));
        self.abandon_path(p, LossCause::Timeout, app);
        if let Some(t) = self.tx.get_mut(p) {
            t.tlp = Tlp::Fired;
            t.rto_at = now.add_nanos(rest);
        }
    }

    /// The local ACK timer expired: one retry (IBTA 9.7.6.1.3), counted once per
    /// expiry however late it is handled; past `retry_cnt` the connection fails. It
    /// runs while a packet is unacknowledged or a request awaits its response
    /// ([`Self::waiting`]); any answer of the peer, a response's data included,
    /// restarts it ([`Self::progress`]).
    fn local_ack_timeout<A: App>(&mut self, now: Instant, app: &mut A) {
        let Some(t) = self.ack_timeout() else {
            self.retry_at = Instant::NEVER;
            return;
        };
        if self.state != ConnState::Open || !self.waiting(app) {
            self.retry_at = Instant::NEVER;
            return;
        }
        if self.cfg.shared {
            // Each stream counts its own retries (and `ack_timeouts` counts those); the
            // connection never fails for them.
            self.retry_at = now.add_nanos(t);
            self.stream_retries(app);
            return;
        }
        self.stats.ack_timeouts = self.stats.ack_timeouts.wrapping_add(1);
        self.retries = self.retries.saturating_add(1);
        if self.retries > self.cfg.retry_cnt {
            self.retry_at = Instant::NEVER;
            self.fail(ConnError::RetryExceeded, app);
        } else {
            self.retry_at = now.add_nanos(t);
        }
    }

    /// The RNR timer expired: the packets whose stream's RNR deadline
    /// ([`super::super::stream::StreamTx::rnr_until`]) has passed are resent (queued as
    /// lost); the others wait, and the timer is rearmed for the earliest of them.
    fn rnr_expired<A: App>(&mut self, now: Instant, app: &mut A) {
        let mut next = Instant::NEVER;
        for w in 0..W {
            let mut waiting = self.flight.rnr_wait.get(w).copied().unwrap_or(0);
            let mut due = 0u64;
            while waiting != 0 {
                let bit = waiting & waiting.wrapping_neg();
                waiting &= !bit;
                let i = bit.trailing_zeros() as usize;
                let s = self.flight.pool.get(w * 64 + i).map_or(0, |k| k.stream());
                // A stream no longer lent: resend now (its message is found gone then).
                let until = app.stream(s).map_or(0, |st| st.tx.rnr_until);
                if until <= now.0 {
                    due |= bit;
                } else {
                    next = next.min(Instant(until));
                }
            }
            if let Some(l) = self.flight.lost.get_mut(w) {
                *l |= due;
            }
            if let Some(r) = self.flight.rnr_wait.get_mut(w) {
                *r &= !due;
            }
        }
        self.timers.set(Timer::RnrRetry, next);
    }

    pub(super) fn fail<A: App>(&mut self, e: ConnError, app: &mut A) {
        if self.state == ConnState::Open {
            self.state = ConnState::Error(e);
            app.error(e);
        }
    }

    pub(super) fn path_timeout<A: App>(&mut self, now: Instant, p: usize, app: &mut A) {
        self.stats.timeouts = self.stats.timeouts.wrapping_add(1);
        // The timeout that expired (its backoff grows below).
        let expired = self.tx.get(p).map(|t| self.rto(t)).unwrap_or(0);
        self.abandon_path(p, LossCause::Timeout, app);
        // Without a local ACK timer, path timeouts are the retries, but only while a
        // message is unacknowledged: an idle connection probes a dead path for as long
        // as it stays dead and never fails for it (verbs fails a QP only for work it
        // could not deliver, IBTA 9.7.6.1.3).
        if self.outstanding() {
            self.stall = self.stall.saturating_add(1);
        }
        let limit = u16::from(self.cfg.retry_cnt).saturating_mul(u16::from(self.cfg.paths));
        if self.cfg.ack_timeout_ns == 0 && self.stall > limit {
            self.fail(ConnError::RetryExceeded, app);
        }
        let move_after = self.cfg.move_after;
        let cfg = self.cfg;
        let mut moved = false;
        if let Some(t) = self.tx.get_mut(p) {
            let (from, old_port) = (t.state, t.src_port);
            t.timeouts = t.timeouts.saturating_add(1);
            t.backoff = t.backoff.saturating_add(1).min(6);
            app.event(Event::Timeout {
                path: p as u8,
                rto_ns: expired,
                backoff: t.backoff,
                timeouts: t.timeouts,
            });
            match t.state {
                PathState::Active => {
                    // Congestion never causes a timeout alone: suspect failure, probe.
                    t.state = PathState::Probing;
                    t.probe_stamp = 0;
                    self.probing |= 1u64 << (p % 64);
                }
                PathState::Probing => {
                    if t.timeouts > move_after {
                        t.moves = t.moves.wrapping_add(1);
                        t.src_port = port_for(&cfg, p as u8, t.moves);
                        t.probe_stamp = 0;
                        t.timeouts = 0;
                        t.backoff = 0;
                        // A new route: its round trip is not the old one's.
                        t.srtt = 0;
                        t.rttvar = 0;
                        moved = true;
                    }
                }
                PathState::Unused => {}
            }
            t.probe_due = true;
            t.tlp = Tlp::Idle;
            t.rto_at = Instant::NEVER;
            if t.state != from || t.src_port != old_port {
                app.event(Event::PathState {
                    path: p as u8,
                    from,
                    to: t.state,
                    old_port,
                    new_port: t.src_port,
                });
            }
        }
        if moved {
            self.stats.moves = self.stats.moves.wrapping_add(1);
            self.move_plane(p, now);
        }
    }

    /// Moves every in-flight packet of path `p` to the retransmission queue (each one
    /// reported [`Event::Lost`] with `cause`).
    pub(super) fn abandon_path<A: App>(&mut self, p: usize, cause: LossCause, app: &mut A) {
        let Some(m) = self.flight.members.get_mut(p) else {
            return;
        };
        let m = core::mem::replace(m, [0; W]);
        let base = self.tx.get(p).map_or(0, |t| t.base_psn);
        let mut freed = 0u32;
        for (w, mut bits) in m.into_iter().enumerate() {
            if let Some(l) = self.flight.lost.get_mut(w) {
                *l |= bits;
            }
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(k) = self.flight.pool.get(w * 64 + i) {
                    freed = freed.saturating_add(charge(k.len));
                    let psn = k.full_psn(base);
                    app.event(Event::Lost {
                        path: p as u8,
                        psn,
                        cause,
                    });
                }
            }
        }
        self.flight.inflight = self.flight.inflight.saturating_sub(freed);
        if let Some(t) = self.tx.get_mut(p) {
            t.inflight = 0;
            t.base_psn = t.next_psn;
            // Nothing left for a reordering hold to wait for.
            t.reo.set_hold(false);
        }
    }
}
