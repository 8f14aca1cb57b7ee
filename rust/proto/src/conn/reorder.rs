//! The reordering hold (RFC 8985's reordering window, kept per path; Documentation/
//! transport.rst, "Reordering hold"): a packet overtaken on its path (a later packet of
//! the path acknowledged before it) is lost only if it is still missing a reordering
//! window later, not as soon as three later ones are acknowledged.
//!
//! A connection finds losses by count (three later packets of the path acknowledged:
//! [`super::ack`]'s `DUP_THRESH`) until it is seen to reorder: an overtaken packet is
//! acknowledged after all. From then on an overtaken packet is only marked, with its
//! path's current generation, and the path's deadline becomes a hold of one reordering
//! window; packets overtaken while the hold runs get the other generation. When the
//! hold expires (or at the first ACK of the path after it), the packets of its
//! generation still outstanding are lost, and the next generation's hold starts if any
//! of its packets are waiting: an overtaken packet waits one to two windows, and a path
//! keeps one deadline. A hold whose packets all arrived ends at once. The window starts
//! at half the path's smoothed round trip plus its variance, and widens by a quarter
//! round trip (up to a whole one) whenever an overtaken packet arrives in the second
//! half of its hold.
//!
//! On a host whose timer resolves only ticks, a hold of microseconds ends a tick late
//! unless a later ACK of the path ends it: a path with nothing in flight after an
//! ACK's highest SACKed PSN keeps the count rule for it ([`Connection::hold_untimely`]),
//! and a hold ended late rearms the path's probe timeout as from its start, so it is
//! due at once rather than a tick later.
//!
//! The per-record state is two bits of its path byte; the path's, one byte in
//! [`PathTx`]'s padding ([`super::super::path::Reorder`]). Whether the connection
//! reorders, and its window's width, are kept alike in every path: reordering is
//! seldom one route's (a NIC's queues, a host's software switch, netem reorder them
//! all), and a path learning it alone would pay for it in spurious retransmissions.

use super::super::path::{PathState, PathTx, Tlp};
use super::super::time::Instant;
use super::{charge, App, Connection};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Path `t`'s reordering window, ns: [`Reorder::quarters`] quarters of its smoothed
    /// round trip (at least of the connection's smallest), plus its RTT variance and the
    /// ACK delay. RFC 8985 section 6.2 starts from `min_rtt / 4` and widens it by as much
    /// whenever a reordering turns out to have been taken for loss (DSACK), up to SRTT;
    /// here it widens whenever an overtaken packet arrives in the second half of its
    /// hold. A path's own round trip and its variance include its queue, which an
    /// overtaken packet waits in too. Measured (rust/proto/tests/reorder.rs, 25 % of
    /// packets reordered, the share resent): the count rule alone 13-20 %; a fixed
    /// quarter of the SRTT 17-23 %; a fixed whole SRTT 0.3-0.7 %; half the SRTT,
    /// widening as here, 0.2-0.9 %; that plus the variance 0-0.1 % (10 distinct seeds;
    /// over 40, median 0.05 %, worst 0.34 %).
    ///
    /// [`Reorder::quarters`]: super::super::path::Reorder::quarters
    pub(super) fn reo_wnd(&self, t: &PathTx) -> u64 {
        u64::from(t.srtt.max(self.min_rtt)) * u64::from(t.reo.quarters()) / 4
            + u64::from(t.rttvar)
            + u64::from(self.cfg.ack_delay_ns)
    }

    /// Whether a reordering hold on path `t`, after an ACK whose highest SACKed PSN is
    /// `top`, would end a timer tick late: the host's timer fires up to
    /// [`Config::pacing_slack_us`](super::Config::pacing_slack_us) late (a tick or two
    /// where it resolves only ticks, as the kernel's does), longer than the window, the
    /// path has nothing in flight after `top` and the connection is sending nothing
    /// more (the end of an RPC), so no later ACK of the path comes to end the hold on
    /// time. The path then keeps the count rule for this ACK (three
    /// later packets SACKed: lost), as before the connection was seen to reorder: on
    /// such a host a hold would make a loss at the end of a message (an RPC) wait a
    /// tick, where the count finds it at once.
    pub(super) fn hold_untimely(&self, t: &PathTx, top: Option<u32>) -> bool {
        let slack = u64::from(self.cfg.pacing_slack_us) * 1000;
        top.is_some_and(|h| h.wrapping_add(1) == t.next_psn)
            && self.reo_wnd(t) < slack
            && !self.sending()
    }

    /// Whether more packets are sure to follow: a message is partly sent, or packets
    /// wait for retransmission (the next of them may go on any path, and their ACKs
    /// keep the connection's ACK clock running).
    fn sending(&self) -> bool {
        self.partial > 0 || self.flight.lost.iter().any(|l| *l != 0)
    }

    /// Whether path `t` finds its overtaken packets lost by time (a reordering hold)
    /// rather than by count: it was seen to reorder, and its deadline is free for a
    /// hold (an active path with no tail-loss probe out, whose marker's answer
    /// declares everything before it lost anyway).
    pub(super) fn holds(t: &PathTx) -> bool {
        t.reo.seen() && t.state == PathState::Active && t.tlp == Tlp::Idle
    }

    /// Path `p`'s reordering hold ends at `now` (expired, or its packets all arrived):
    /// its packets overtaken in the hold's generation and still outstanding are lost
    /// (cause [`super::LossCause::SackGap`], as the gap they left is what found them); a hold
    /// for the next generation starts if packets of it wait, else the path's deadline
    /// (probe timeout or RTO) is rearmed from now or, if the hold is handled more than a
    /// window late (a host whose timer fired it a tick late), as if armed when the hold
    /// began: that deadline is then due at once ([`Self::handle_timeout`]) instead of a
    /// whole timeout later.
    pub(super) fn reorder_expired<A: App>(&mut self, now: Instant, p: usize, app: &mut A) {
        let Some(t) = self.tx.get(p) else { return };
        let (base, gen) = (t.base_psn, t.reo.gen());
        // The path's next deadline runs from now, or, when the hold is handled more
        // than a window after it expired (a timer that resolves only ticks), from when
        // the hold began: it is then likely due at once.
        let wnd = self.reo_wnd(t);
        let from = if now.0.saturating_sub(t.rto_at.0) > wnd {
            Instant(t.rto_at.0.saturating_sub(wnd))
        } else {
            now
        };
        let mut freed = 0u32;
        let mut waiting = false;
        let mut floor: Option<u16> = None;
        for (w, bit) in self.flight.on_path(p) {
            let i = bit.trailing_zeros() as usize;
            let Some(k) = self.flight.pool.get(w * 64 + i) else {
                continue;
            };
            let d = k.psn_above(base);
            match k.overtaken() {
                Some(g) if g == gen => {}
                o => {
                    waiting |= o.is_some();
                    floor = Some(floor.map_or(d, |f| f.min(d)));
                    continue;
                }
            }
            freed = freed.saturating_add(charge(k.len));
            if let Some(m) = self.flight.members.get_mut(p).and_then(|m| m.get_mut(w)) {
                *m &= !bit;
            }
            self.sack_lose(p, w, bit, base.wrapping_add(u32::from(d)), app);
        }
        self.flight.inflight = self.flight.inflight.saturating_sub(freed);
        let cfg = self.cfg;
        let Some(t) = self.tx.get_mut(p) else { return };
        t.reo.next_gen();
        t.inflight = t.inflight.saturating_sub(freed);
        t.base_psn = floor.map_or(t.next_psn, |d| base.wrapping_add(u32::from(d)));
        if freed > 0 {
            let rtt = u64::from(t.srtt.max(1));
            t.cc.on_loss(&cfg.cc, now, rtt);
        }
        let t = *t;
        let at = if t.inflight == 0 {
            Instant::NEVER
        } else if waiting && Self::holds(&t) {
            now.add_nanos(self.reo_wnd(&t))
        } else {
            from.add_nanos(self.path_deadline(&t))
        };
        if let Some(t) = self.tx.get_mut(p) {
            t.reo
                .set_hold(waiting && at != Instant::NEVER && Self::holds(t));
            t.rto_at = at;
        }
    }
}
