//! The sender's view of the receiver: [`Connection::on_ack`] resolves the in-flight
//! records of a path (acknowledged, lost to a SACK gap, refused with RNR), updates the
//! RTT, the rate-hint trim and the path's congestion window; and the receiver's side,
//! [`Connection::send_ack`], which also carries a pending NAK or RNR report.

use super::super::path::{PathState, Tlp};
use super::super::sack::{seq_lt, SACK_BITS};
use super::super::time::Instant;
use super::super::wire::{
    set_shared, AckHeader, DropReason, ACK_LEN, AF_CLOSED, AF_INV, AF_MSG, AF_NAK, AF_RNR,
    MAX_ACK_BUNDLE, MAX_DATA_HEADER,
};
use super::timers::Timer;
use super::{
    charge, port_for, rnr_timer_ns, App, ConnError, ConnState, Connection, Event, LossCause,
    RefusalKind, RxEvent, Transmit, TxKind, MAX_PATHS, NO_STREAM,
};

/// The fewest PSNs after a packet on its path that an ACK must report received (SACK)
/// before the packet counts as lost (TCP's DupThresh, RFC 5681 section 3.2; RFC 6675).
/// Packets of one path arrive in order unless something in the path reorders them
/// (adaptive routing, a LAG, a NIC's queues, a software switch): a packet overtaken by
/// one or two is taken for reordered, not lost. A loss too near its path's tail to be
/// overtaken three times is the tail-loss probe's ([`super::timers`]). The rule holds
/// only until the connection is seen to reorder; from then on an overtaken packet is
/// lost when it is still missing a reordering window later ([`super::reorder`]).
///
/// Measured (rust/proto/tests/reorder.rs, gray_spine.rs): with netem-style reordering
/// (a packet overtakes everything in flight on its path), 1 / 5 / 25 % of packets
/// reordered cost 3.3 / 16 / 69 % retransmissions with a threshold of 1 and 0 / 0-0.1
/// / 13-20 % with 3 (with the reordering hold, 40 seeds: 0 / <= 0.1 / <= 0.34 %); a
/// threshold of half the path's packets in flight gave 4-7 % at 25 % but found real
/// losses so late that 5 % loss on a spine cost 15 % of the transfer's speed (3: 7-8
/// %).
const DUP_THRESH: u32 = 3;

/// The ECN trim after a round trip marked at the receiver's edge, 1/1024 of the hint.
const EDGE_TRIM: u16 = 768;

/// The parts of [`Config`](super::Config) ACK processing reads (copying the whole
/// configuration per ACK cost more than the rest of the reads).
struct Cfg {
    cc: super::super::cc::CcConfig,
    rnr_retry: u8,
}

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    pub(super) fn on_ack<A: App>(
        &mut self,
        now: Instant,
        a: &AckHeader,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let p = self.tx_path_check(a.dst_conn, a.path)?;
        let member = self.ack_from(a.dst_conn, a.token, app)?;
        if self.cfg.shared && a.inc != self.cfg.incarnation {
            return Err(DropReason::StaleIncarnation);
        }
        if let ConnState::Error(_) = self.state {
            return Err(DropReason::Closed);
        }
        let cfg = Cfg {
            cc: self.cfg.cc,
            rnr_retry: self.cfg.rnr_retry,
        };
        let (base, next) = match self.tx.get(p) {
            Some(t) => (t.base_psn, t.next_psn),
            None => return Err(DropReason::BadPath),
        };
        // What the ACK may name: `cum` and a refused PSN from at most 256 behind the
        // path's floor (an ACK overtaken by a later one, or answering packets the
        // sender has abandoned since) up to its next PSN; SACKed PSNs below the next.
        let in_range =
            |psn: u32| !seq_lt(next, psn) && base.wrapping_sub(psn) as i32 <= SACK_BITS as i32;
        if !in_range(a.cum) {
            return Err(DropReason::AckOutOfRange);
        }
        if a.flags & (AF_RNR | AF_NAK) != 0 && !in_range(a.rnr_psn) {
            return Err(DropReason::AckOutOfRange);
        }
        // The highest PSN the ACK reports received: a packet before it is overtaken.
        let top = a
            .sack
            .highest()
            .map(|h| a.cum.wrapping_add(1).wrapping_add(h));
        if let Some(hp) = top {
            if !seq_lt(hp, next) {
                return Err(DropReason::AckOutOfRange);
            }
        }
        // A NAK naming a message: a stream of this connection, and a message sent on it
        // and not yet fully acknowledged.
        let named = (a.flags & AF_MSG != 0).then(|| {
            let s = match member {
                Some(id) => app.stream_in(id, a.nak_stream).unwrap_or(NO_STREAM),
                None => a.nak_stream,
            };
            (s, a.nak_msn)
        });
        if let Some((s, msn)) = named {
            let st = &app
                .stream(s)
                .filter(|_| s != NO_STREAM)
                .ok_or(DropReason::StreamOutOfRange)?
                .tx;
            let sent = st
                .tx_msn
                .wrapping_sub(st.acked_msn)
                .wrapping_add(u32::from(st.tx_off > 0));
            if msn.wrapping_sub(st.acked_msn) >= sent {
                return Err(DropReason::AckOutOfRange);
            }
        }
        // Whether the path's deadline was a probe timeout before this ACK (which may
        // give the path its first RTT sample: the RTO armed without one is then
        // rearmed as a PTO below).
        let was_pto = self.tx.get(p).is_some_and(Self::pto_armed);
        // RTT from the echoed stamp.
        let sample = now.wire_stamp().wrapping_sub(a.echo);
        let mut rtt_ok = false;
        // An ACK reporting a refusal echoes the newest packet the path accepted, not
        // the refused one (a refusal changes no path state but the floor): no RTT
        // sample from it.
        let report = a.flags & (AF_RNR | AF_NAK) != 0;
        let mut marker = false;
        // Whether this ACK validated the path (an answer to a probe sent since it went
        // Probing or moved, on its plane) and whether it was active before it.
        let mut validated = false;
        let was_active = self.tx.get(p).is_some_and(|t| t.state == PathState::Active);
        if let Some(t) = self.tx.get_mut(p) {
            if sample < 1 << 31 && sample > 0 && !report {
                t.rtt_sample(sample);
                rtt_ok = true;
            }
            // An answer to any probe sent since the path went Probing (or moved)
            // validates it: with round trips longer than the probe timeout,
            // only the latest probe's answer would never come in time.
            let since_probe = a.echo.wrapping_sub(t.probe_stamp) as i32 >= 0;
            // A tail-loss probe's marker answered: the path is FIFO, so what it still
            // has in flight and this ACK does not acknowledge never arrived.
            let bit = 1u64 << (p % 64);
            let held = t.state == PathState::Active && self.probing & bit != 0;
            if held && !t.probe_due && since_probe {
                self.probing &= !bit;
                marker = true;
            }
            if t.state == PathState::Probing && t.probe_stamp != 0 && since_probe {
                validated = true;
                self.probing &= !(1u64 << (p % 64));
                t.state = PathState::Active;
                app.event(Event::PathState {
                    path: p as u8,
                    from: PathState::Probing,
                    to: PathState::Active,
                    old_port: t.src_port,
                    new_port: t.src_port,
                });
                t.probe_due = false;
                t.timeouts = 0;
                t.backoff = 0;
                t.cc.reset(&cfg.cc);
                t.rto_at = Instant::NEVER;
            }
        }
        if rtt_ok && (self.min_rtt == 0 || sample < self.min_rtt) {
            self.min_rtt = sample;
        }
        // A NAK: one naming no message fails the connection now (nothing else of the
        // ACK matters then); one naming a message is reported refused now (the
        // application records what completes how before anything this ACK acknowledges
        // is taken) and fails its stream after the ACK is taken.
        let nak = self.nak_first(a, named, app);
        if self.state != ConnState::Open {
            return Ok(RxEvent::Ack);
        }
        let rnr_psn = (a.flags & AF_RNR != 0).then_some(a.rnr_psn);
        // When the refused packet may be resent (only an ACK with RNR has one).
        let rnr_until =
            rnr_psn.map_or(Instant::NEVER, |_| now.add_nanos(rnr_timer_ns(a.rnr_timer)));
        // The packet a NAK refused stays as it is (not lost: it arrived); the NAK fails
        // its stream below, which forgets it.
        let nak_psn = (a.flags & AF_NAK != 0).then_some(a.rnr_psn);
        let reo = self.tx.get(p).map(|t| t.reo).unwrap_or_default();
        // The PSN below which unresolved packets of the path are lost now: on a path
        // not seen to reorder, the one with `DUP_THRESH` SACKed PSNs from it on
        // (reordering room; on one that reorders, overtaken packets wait for a
        // reordering hold instead, unless the host could not end it in time:
        // reorder.rs), or one refused with RNR (refused, but it arrived; otherwise a
        // packet lost during an RNR wait, with nothing after it on its path accepted,
        // waited for the path's RTO, which the other packets' refusals keep
        // restarting).
        let count = !reo.seen() || self.tx.get(p).is_some_and(|t| self.hold_untimely(t, top));
        let highest = a
            .sack
            .nth_highest(DUP_THRESH)
            .filter(|_| count)
            .map(|h| a.cum.wrapping_add(1).wrapping_add(h));
        // Packets overtaken by this ACK are marked with the generation of the next
        // hold to start: the running one's if none runs, else the one after it.
        let mark_gen = reo.gen() ^ reo.hold();
        let mut overtaken = false;
        let mut reordered = false;
        // A packet of the running hold's generation, overtaken before the hold began,
        // arriving in its second half: the window is too narrow for this path.
        let late = reo.hold()
            && self
                .tx
                .get(p)
                .is_some_and(|t| t.rto_at.0.saturating_sub(now.0) < self.reo_wnd(t) / 2);
        let mut widen = false;
        // Whether packets of the running hold's generation are still outstanding.
        let mut gen_left = false;
        let highest = match (highest, rnr_psn) {
            (Some(h), Some(r)) if seq_lt(h, r) => Some(r),
            (None, r) => r,
            (h, _) => h,
        };
        // Past a tail-loss probe's marker (the path sent nothing since): everything.
        let highest = if marker { Some(next) } else { highest };
        let mut acked_bytes = 0u32;
        let mut lost_any = false;
        let mut min_psn: Option<u32> = None;
        let mut rnr_fail: Option<u16> = None;
        let mut rnr_any = false;
        let mut freed = 0u32;
        for (w, bit) in self.flight.on_path(p) {
            let i = bit.trailing_zeros() as usize;
            let Some(k) = self.flight.pool.get_mut(w * 64 + i) else {
                continue;
            };
            let psn = k.full_psn(base);
            let off = psn.wrapping_sub(a.cum);
            let acked =
                seq_lt(psn, a.cum) || ((1..=SACK_BITS).contains(&off) && a.sack.get(off - 1));
            // Overtaken before, acknowledged now: the path reorders.
            reordered |= acked && k.overtaken().is_some();
            widen |= acked && late && k.overtaken() == Some(reo.gen());
            let outcome = if rnr_psn == Some(psn) && !acked {
                // Its stream waits out its own RNR timer, and sends nothing new until
                // the packet is acknowledged.
                if let Some(st) = app.stream(k.stream()) {
                    if k.rnr() == 0 {
                        st.tx.rnr_held = st.tx.rnr_held.saturating_add(1);
                    }
                    st.tx.rnr_until = st.tx.rnr_until.max(rnr_until.0);
                }
                k.bump_rnr();
                let rnr_retry = app
                    .stream_retry_limits(k.stream())
                    .map_or(cfg.rnr_retry, |(_, r)| r);
                if rnr_retry < 7 && k.rnr() > rnr_retry {
                    rnr_fail = Some(k.stream());
                }
                rnr_any = true;
                2
            } else if acked {
                0
            } else if nak_psn != Some(psn) && highest.is_some_and(|h| seq_lt(psn, h)) {
                1
            } else {
                if k.overtaken().is_none() && top.is_some_and(|t| seq_lt(psn, t)) {
                    k.set_overtaken(mark_gen);
                    overtaken = true;
                }
                gen_left |= reo.hold() && k.overtaken() == Some(reo.gen());
                min_psn = Some(match min_psn {
                    Some(m) if seq_lt(m, psn) => m,
                    _ => psn,
                });
                continue;
            };
            let len = charge(k.len);
            let stream = k.stream();
            let ssn16 = k.ssn;
            let last = k.last();
            let was_refused = k.rnr() > 0;
            freed = freed.saturating_add(len);
            if let Some(m) = self.flight.members.get_mut(p).and_then(|m| m.get_mut(w)) {
                *m &= !bit;
            }
            match outcome {
                0 => {
                    acked_bytes = acked_bytes.saturating_add(len);
                    if let Some(b) = self.flight.busy.get_mut(w) {
                        *b &= !bit;
                    }
                    if let Some(st) = app.stream(stream) {
                        if was_refused {
                            st.tx.rnr_held = st.tx.rnr_held.saturating_sub(1);
                        }
                        let ssn = st.tx.ssn_from_low(ssn16);
                        let done = st.tx.on_acked(ssn, last);
                        for msn in done.msns() {
                            app.acked(stream, msn);
                        }
                    }
                }
                1 => {
                    lost_any = true;
                    self.sack_lose(p, w, bit, psn, app);
                }
                _ => {
                    if let Some(r) = self.flight.rnr_wait.get_mut(w) {
                        *r |= bit;
                    }
                }
            }
        }
        self.flight.inflight = self.flight.inflight.saturating_sub(freed);
        if rnr_any {
            // The earliest stream's RNR deadline ([`Self::rnr_expired`]).
            let wait = self.timers.get(Timer::RnrRetry).min(rnr_until);
            self.timers.set(Timer::RnrRetry, wait);
        }
        let mut rearm = false;
        // Whether the path answered on its plane ([`Self::note_answer`]): validated, or
        // acknowledged while active (a probing path has sent nothing on its plane but
        // probes, so an acknowledgement then is a late one from before it moved).
        let mut alive = validated;
        // A congested path shares its additive increase with the connection's other
        // congested paths (cc.rs).
        // Only a path already marked can be congested after this ACK (an ACK carrying
        // CE grows no window), so the others skip the walk over the paths.
        let coupled = match self.tx.get(p) {
            Some(t) if t.cc.marked() => self.coupled_sum(),
            _ => 0,
        };
        if let Some(t) = self.tx.get_mut(p) {
            t.inflight = t.inflight.saturating_sub(freed);
            t.base_psn = min_psn.unwrap_or(t.next_psn);
            let rtt = u64::from(t.srtt.max(1));
            t.cc.on_ack(&cfg.cc, now, rtt, acked_bytes, a.acked, a.ce, coupled);
            t.ce = t.ce.wrapping_add(u32::from(a.ce));
            if lost_any {
                t.cc.on_loss(&cfg.cc, now, rtt);
            }
            // An RNR refusal answers as an acknowledgement does: the packet reached
            // the peer over this path, so the path is alive and its RTO restarts.
            let answered = acked_bytes > 0 || rnr_any || marker;
            alive |= answered && was_active;
            if answered {
                t.timeouts = 0;
                t.backoff = 0;
                // A tail-loss probe is answered too, or no longer needed (what the path
                // still has in flight is the next probe timeout's business).
                t.tlp = Tlp::Idle;
                if t.state == PathState::Active {
                    t.probe_due = false;
                    self.probing &= !(1u64 << (p % 64));
                }
            }
            if t.inflight == 0 {
                t.reo.set_hold(false);
                if t.state == PathState::Active {
                    t.rto_at = Instant::NEVER;
                }
            } else if !t.reo.hold() {
                rearm = (answered && !was_pto) || t.rto_at == Instant::NEVER;
            }
        }
        if alive {
            self.note_answer(p, now);
        }
        if reordered {
            // Reordering is seldom a single route's: a NIC's queues, a host's software
            // switch or netem reorder them all. Every path holds from now on.
            for t in self.tx.iter_mut() {
                t.reo.set_seen();
            }
        }
        if widen {
            for t in self.tx.iter_mut() {
                t.reo.widen();
            }
        }
        if rearm {
            // From the path's updated RTT: its probe timeout or its RTO.
            let d = self.tx.get(p).map_or(0, |t| self.path_deadline(t));
            if let Some(t) = self.tx.get_mut(p) {
                t.rto_at = now.add_nanos(d);
            }
        }
        // A reordering hold for the packets just overtaken, unless one runs (they wait
        // for the next); one that expired before this ACK came, or has nothing left to
        // wait for (its packets all arrived), ends now.
        if let Some(t) = self.tx.get(p).copied() {
            if overtaken && t.inflight > 0 && !t.reo.hold() && Self::holds(&t) {
                let at = now.add_nanos(self.reo_wnd(&t));
                if let Some(t) = self.tx.get_mut(p) {
                    t.reo.set_hold(true);
                    t.rto_at = at;
                }
            } else if t.reo.hold() && (t.rto_at <= now || (reo.hold() && !gen_left)) {
                self.reorder_expired(now, p, app);
            }
        }
        // The peer answers: it acknowledged data in flight, refused some with RNR,
        // or reports data it received (`acked`) that this side no longer tracks
        // on the path (the path timed out before the ACK came: the data waits for
        // retransmission elsewhere). Any of them restarts the local ACK timer.
        // Without a local ACK timer only acknowledged data and RNR refusals are
        // progress: an RNR wait is the peer's answer, bounded by `rnr_retry` alone.
        if acked_bytes > 0 || rnr_any || a.acked > 0 {
            self.progress(now, acked_bytes > 0 || rnr_any, app);
        }
        if acked_bytes > 0 {
            self.flight.ramp = self.flight.ramp.saturating_add(acked_bytes);
            if self.peer_hint != a.rate_hint {
                app.event(Event::PeerHint {
                    old: self.peer_hint,
                    new: a.rate_hint,
                });
            }
            let before = self.paced_rate();
            self.peer_hint = a.rate_hint;
            self.trim_rate(now, a.ce, a.acked);
            self.repace(now, before);
        }
        if let Some(s) = rnr_fail {
            self.fail_stream(s, ConnError::RnrRetryExceeded, app);
        }
        if acked_bytes > 0 {
            // An acknowledged response may release a held refusal.
            self.release(app);
        }
        // The NAK's stream fails last: what the ACK acknowledges (of any stream) was
        // taken above.
        if let Some((s, e)) = nak {
            self.fail_stream(s, e, app);
        }
        Ok(RxEvent::Ack)
    }

    /// The first part of a NAK's handling, before the rest of its ACK: naming no
    /// message, it fails the connection (and the caller takes nothing more of the ACK,
    /// as before a connection failure); naming one of an open stream, it reports the
    /// message refused ([`App::refused`]) and returns the stream and error to fail once
    /// the ACK is taken. A NAK for a closed stream (late, or duplicated) is not taken.
    fn nak_first<A: App>(
        &mut self,
        a: &AckHeader,
        named: Option<(u16, u32)>,
        app: &mut A,
    ) -> Option<(u16, ConnError)> {
        if a.flags & AF_NAK == 0 || self.state != ConnState::Open {
            return None;
        }
        let e = if a.flags & AF_CLOSED != 0 {
            ConnError::RemoteClosed
        } else if a.flags & AF_INV != 0 {
            ConnError::RemoteInvalid
        } else {
            ConnError::RemoteAccess
        };
        let Some((s, msn)) = named else {
            self.fail(e, app);
            return None;
        };
        // A NAK for a stream gone or closed is stale: ignored.
        let open = app.stream(s).map(|st| !st.tx.closed);
        if open != Some(true) {
            return None;
        }
        // Every message before the named one is complete at the peer; the named one
        // (a closed stream's next to complete, or one whose completion the peer lost)
        // is not, whatever the ACK says of its packets.
        app.refused(s, msn, e);
        Some((s, e))
    }

    /// Record `(w, bit)`, PSN `psn` on path `p`, is lost to a SACK gap (rule 3, or a
    /// reordering hold that expired): counted, reported, queued for retransmission.
    /// (The caller takes it off its path and out of the bytes in flight.)
    pub(super) fn sack_lose<A: App>(
        &mut self,
        p: usize,
        w: usize,
        bit: u64,
        psn: u32,
        app: &mut A,
    ) {
        self.stats.sack_lost = self.stats.sack_lost.wrapping_add(1);
        app.event(Event::Lost {
            path: p as u8,
            psn,
            cause: LossCause::SackGap,
        });
        if let Some(l) = self.flight.lost.get_mut(w) {
            *l |= bit;
        }
    }

    /// The sender's ECN trim of the hinted rate, once per round trip: 3/4 of the hint
    /// after a round in which most packets (over all paths) carried CE, i.e. the
    /// congestion is at the receiver's edge (or the sender's) rather than on a few
    /// fabric routes (which the per-path windows handle), and back to the full hint
    /// after a round that was not. Queues above the marking threshold then drain
    /// faster than the 5 % headroom of the hint alone allows. One step, not
    /// compounding: the marks of a round show the queue of a round trip before, which
    /// under that queue is several rounds of `min_rtt`, so a trim compounding per round
    /// (x3/4 each, as before) cut 64 senders into one receiver to under half the hint
    /// and left its link at 16-60 % for some round trips after the queue of their first
    /// packets drained (simulator scenario 2). A milder step (7/8) no longer shares a
    /// bottleneck both ends' edges mark: a 4-path connection got 0.68 of a 1-path one's
    /// share (`path_count_buys_no_share_of_a_shared_bottleneck`).
    fn trim_rate(&mut self, now: Instant, ce: u16, acked: u16) {
        self.rate_ce = self.rate_ce.saturating_add(ce);
        self.rate_acked = self.rate_acked.saturating_add(acked);
        let stamp = now.wire_stamp();
        if (stamp.wrapping_sub(self.rate_round) as i32) >= 0 {
            let edge = u32::from(self.rate_ce) * 2 > u32::from(self.rate_acked);
            self.rate_scale = if edge { EDGE_TRIM } else { 1024 };
            self.rate_ce = 0;
            self.rate_acked = 0;
            self.rate_round = stamp.wrapping_add(self.min_rtt.max(1));
        }
    }

    /// The paced rate, 1000 bytes/s: the peer's hint times the ECN trim (0: none).
    pub(super) fn paced_rate(&self) -> u64 {
        u64::from(self.peer_hint) * u64::from(self.rate_scale) / 1024
    }

    /// The paced rate rose from `before`: the wait for the next packet, which was timed
    /// at the old rate, shrinks in proportion. Otherwise a sender that was slow (many
    /// senders sharing a receiver, a trim) would go on waiting one slow packet time
    /// after its rate came back: at 64 senders, 46 µs for one 4 KiB packet at half the
    /// share, which left a receiver link idle for a few round trips after an incast's
    /// queue drained.
    fn repace(&mut self, now: Instant, before: u64) {
        let after = self.paced_rate();
        let clock = self.timers.get(Timer::Pacing);
        if before == 0 || after <= before || clock <= now {
            return;
        }
        let wait = clock.nanos_since(now);
        let wait = wait.saturating_mul(before) / after;
        self.timers.set(Timer::Pacing, now.add_nanos(wait));
    }

    /// Writes the next ACK datagram to `buf`: the ACK of the path that made it due (or
    /// the lowest pending), then, with [`Config::ack_bundle`](super::Config::ack_bundle)
    /// above 1, the ACKs of the other pending paths that go to the same destination
    /// and plane, as many as the bundle and `mtu` plus a DATA header allow
    /// (`Documentation/transport.rst`, "ACK bundles"). A path left out stays pending.
    pub(super) fn send_ack<A: App>(&mut self, buf: &mut [u8], app: &mut A) -> Option<Transmit> {
        let lead = usize::from(self.reports.ack_lead);
        let p = if lead < 64 && self.reports.ack_pending & (1u64 << lead) != 0 {
            lead
        } else {
            self.reports.ack_pending.trailing_zeros() as usize
        };
        // Used once: a later datagram is led by the next packet that makes one due,
        // else by the lowest path due.
        self.reports.ack_lead = u8::MAX;
        self.reports.ack_pending &= !(1u64 << (p % 64));
        self.rx.get(p)?;
        if self.peer_inc == 0 {
            // Nothing accepted from the peer: no incarnation to echo, nothing to
            // acknowledge (Documentation/transport.rst, "Incarnations").
            self.reports.ack_pending = 0;
            return None;
        }
        let to = self.write_ack(p, buf, None, app)?;
        let plane = self.ack_plane_of(p);
        let most = usize::from(self.cfg.ack_bundle).clamp(1, MAX_ACK_BUNDLE);
        let room = buf
            .len()
            .min(usize::from(self.cfg.mtu) + MAX_DATA_HEADER)
            .min(most * ACK_LEN);
        let mut len = ACK_LEN;
        // Candidates: every path owing an ACK or holding packets back.
        let mut rest = self.reports.ack_pending;
        if room >= 2 * ACK_LEN {
            for (q, r) in self.rx.iter().enumerate().take(MAX_PATHS) {
                if r.acked > 0 && q != p {
                    rest |= 1u64 << q;
                }
            }
        }
        while rest != 0 && len + ACK_LEN <= room {
            let q = rest.trailing_zeros() as usize;
            rest &= !(1u64 << q);
            if self.ack_plane_of(q) != plane {
                continue;
            }
            let Some(out) = buf.get_mut(len..) else { break };
            if self.write_ack(q, out, Some(to), app).is_some() {
                self.reports.ack_pending &= !(1u64 << q);
                len += ACK_LEN;
            }
        }
        if len > ACK_LEN && self.rx.iter().all(|r| r.acked == 0) {
            // Nothing held back is left for the delayed-ACK timer.
            self.timers.stop(Timer::DelayedAck);
        }
        Some(Transmit {
            len,
            path: p as u8,
            // From this end's source port of the same path index; a path beyond
            // the `paths` this end sends on has its first port, never 0.
            src_port: match self.tx.get(p) {
                Some(t) if p < usize::from(self.cfg.paths) => t.src_port,
                _ => port_for(&self.cfg, p as u8, 0),
            },
            plane,
            ect: false,
            kind: TxKind::Ack,
        })
    }

    /// Writes path `p`'s ACK to the start of `out` and takes what it reports (the
    /// path's CE and packet counts, its NAK or RNR report) as sent; returns where it
    /// goes, (`dst_conn`, token). With `to`, an ACK that would go elsewhere is not
    /// written and changes nothing.
    pub(super) fn write_ack<A: App>(
        &mut self,
        p: usize,
        out: &mut [u8],
        to: Option<(u32, u32)>,
        app: &mut A,
    ) -> Option<(u32, u32)> {
        // A NAK for this path goes first; an RNR report for it waits for the next ACK.
        let nak = self
            .reports
            .nak
            .filter(|n| usize::from(n.path) == p && n.kind != RefusalKind::Held);
        let rnr = self
            .reports
            .rnr
            .filter(|r| usize::from(r.path) == p && nak.is_none());
        let report = nak.or(rnr);
        // A NAK's refused message is its stream's next message to complete.
        let named = nak
            .filter(|n| n.stream != NO_STREAM)
            .map(|n| (n.stream, n.msn));
        let (dst, token) = self.ack_to(p, named.map(|(s, _)| s), app)?;
        if to.is_some_and(|t| t != (dst, token)) {
            return None;
        }
        // On the wire a shared connection's stream is its member's (0 or 1).
        let named = match named {
            Some((s, m)) if self.cfg.shared => Some((app.stream_out(s)?.1, m)),
            x => x,
        };
        let rx = self.rx.get_mut(p)?;
        let h = AckHeader {
            path: p as u8,
            inc: self.peer_inc,
            dst_conn: dst,
            echo: rx.echo,
            token,
            cum: rx.cum,
            rate_hint: self.local_hint,
            ce: rx.ce,
            acked: rx.acked,
            flags: match report.map(|r| r.kind) {
                Some(RefusalKind::Invalid) => AF_NAK | AF_INV,
                Some(RefusalKind::Closed) => AF_NAK | AF_CLOSED,
                Some(RefusalKind::Access) => AF_NAK,
                Some(RefusalKind::Rnr { .. }) => AF_RNR,
                Some(RefusalKind::Held) | None => 0,
            } | if named.is_some() { AF_MSG } else { 0 },
            rnr_timer: match report.map(|r| r.kind) {
                Some(RefusalKind::Rnr { timer }) => timer,
                _ => 0,
            },
            rnr_psn: report.map_or(0, |r| r.psn),
            nak_stream: named.map_or(0, |(s, _)| s),
            nak_msn: named.map_or(0, |(_, m)| m),
            sack: rx.sack,
        };
        h.encode(out)?;
        set_shared(out, self.cfg.shared)?;
        self.stats.ce_echoed = self.stats.ce_echoed.wrapping_add(u32::from(rx.ce));
        rx.ce = 0;
        rx.acked = 0;
        if rnr.is_some() {
            self.reports.rnr = None;
        }
        if nak.is_some() {
            self.reports.nak = None;
        }
        Some((dst, token))
    }
}
