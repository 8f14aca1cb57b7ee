//! A stream's failure and its end, on a connection that carries many streams
//! (Documentation/transport.rst, "Streams"): a failure one stream's message caused (a NAK
//! naming it, its RNR retries spent, its bytes unreadable or gone) fails what the
//! application says it takes down ([`Scope`]); a stream that fails or ends without the
//! connection loses its packets in flight and nothing else.

use super::super::path::{PathState, Tlp};
use super::super::time::Instant;
use super::app::{App, ConnError, Scope};
use super::timers::Timer;
use super::{charge, ConnState, Connection, RefusalKind, NO_STREAM};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Stream `s` failed with `e`: the application decides whether that fails the
    /// connection ([`App::stream_error`]; by default it does, and [`App::error`] is
    /// called) or only a range of streams (a QP's two), which are closed
    /// ([`Self::close_streams`]) while the connection carries on.
    pub(super) fn fail_stream<A: App>(&mut self, s: u16, e: ConnError, app: &mut A) {
        // A closed stream failed already (or its owner ended it): not again.
        if self.state != ConnState::Open || app.stream(s).is_some_and(|st| st.tx.closed) {
            return;
        }
        match app.stream_error(s, e) {
            Scope::Connection => self.fail(e, app),
            Scope::Streams { first, n } => self.close_streams(first, n, app),
        }
    }

    /// Streams `first..first + n` end here (their owner failed, was reset or is gone):
    /// their packets in flight, awaiting retransmission or waiting out an RNR timer are
    /// forgotten (never sent again; each path's floor moves past them, so the peer's
    /// path windows do not wait for them), and a refusal held for one of them is dropped
    /// (a NAK already due is still sent). Nothing else changes: the other streams, the
    /// paths' windows, RTTs and congestion state, the retry counts. Each stream the
    /// application still lends is marked closed
    /// ([`super::super::stream::StreamTx::closed`]: it sends nothing more, and a late
    /// NAK or a second failure naming it is not taken); it stays so until the
    /// application starts it over ([`super::super::stream::Stream::start`], with the
    /// keys of its new owner: a stream id reused under the same keys would take the old
    /// owner's packets still in the network for the new one's). Call it before the
    /// stream's state is dropped. The range stops below stream 65535 (no stream: it
    /// never wraps). The peer's packets for these streams are the application's to
    /// refuse or drop.
    pub fn close_streams<A: App>(&mut self, first: u16, n: u16, app: &mut A) {
        let n = n.min(NO_STREAM - first);
        let ends = |s: u16| s.wrapping_sub(first) < n;
        for s in (0..n).map(|i| first.wrapping_add(i)) {
            if let Some(st) = app.stream(s) {
                if !st.tx.closed {
                    // A message partly sent on it will not be finished.
                    if st.tx.tx_off > 0 {
                        self.partial = self.partial.saturating_sub(1);
                    }
                    st.tx.closed = true;
                    st.tx.rnr_until = 0;
                }
            }
        }
        let mut touched = 0u64;
        for w in 0..W {
            let mut busy = self.flight.busy.get(w).copied().unwrap_or(0);
            while busy != 0 {
                let bit = busy & busy.wrapping_neg();
                busy &= !bit;
                let i = bit.trailing_zeros() as usize;
                let Some(k) = self.flight.pool.get(w * 64 + i).copied() else {
                    continue;
                };
                if !ends(k.stream()) {
                    continue;
                }
                let p = usize::from(k.path());
                // On its path (in flight): uncharged from the path and the connection.
                // Lost or waiting out an RNR timer: already off its path and uncharged.
                if let Some(m) = self.flight.members.get_mut(p).and_then(|m| m.get_mut(w)) {
                    if *m & bit != 0 {
                        *m &= !bit;
                        let c = charge(k.len);
                        self.flight.inflight = self.flight.inflight.saturating_sub(c);
                        if let Some(t) = self.tx.get_mut(p) {
                            t.inflight = t.inflight.saturating_sub(c);
                        }
                        touched |= 1u64 << (p % 64);
                    }
                }
                for mask in [
                    &mut self.flight.busy,
                    &mut self.flight.lost,
                    &mut self.flight.rnr_wait,
                ] {
                    if let Some(m) = mask.get_mut(w) {
                        *m &= !bit;
                    }
                }
            }
        }
        for p in (0..P.min(64)).filter(|p| touched & (1u64 << p) != 0) {
            self.refloor(p);
        }
        // Nothing left waiting out an RNR timer: the timer stops.
        if self.flight.rnr_wait.iter().all(|r| *r == 0) {
            self.timers.stop(Timer::RnrRetry);
        }
        // A refusal held for one of them will never be due; a NAK already due still
        // goes (the peer's request was refused, whatever became of this end's owner).
        if self
            .reports
            .nak
            .is_some_and(|r| r.kind == RefusalKind::Held && r.stream != NO_STREAM && ends(r.stream))
        {
            self.reports.nak = None;
        }
    }

    /// Path `p`'s floor is its oldest packet still in flight (its next PSN if none),
    /// and a path with nothing left in flight stops its deadline.
    fn refloor(&mut self, p: usize) {
        let Some(t) = self.tx.get(p) else { return };
        let base = t.base_psn;
        let floor = self
            .flight
            .on_path(p)
            .filter_map(|(w, bit)| {
                let i = bit.trailing_zeros() as usize;
                self.flight.pool.get(w * 64 + i).map(|k| k.psn_above(base))
            })
            .min();
        let Some(t) = self.tx.get_mut(p) else { return };
        t.base_psn = floor.map_or(t.next_psn, |d| base.wrapping_add(u32::from(d)));
        if t.inflight == 0 {
            t.reo.set_hold(false);
            if t.state == PathState::Active && t.tlp == Tlp::Idle {
                t.rto_at = Instant::NEVER;
            }
        }
    }
}
