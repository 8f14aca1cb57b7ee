//! A stream's failure and its end, on a connection that carries many streams
//! (Documentation/transport.rst, "Streams"): a failure one stream's message caused (a NAK
//! naming it, its RNR retries spent, its bytes unreadable or gone) fails what the
//! application says it takes down ([`Scope`]); a stream that fails or ends without the
//! connection loses its packets in flight and nothing else.

use super::super::path::{PathState, Tlp};
use super::super::time::Instant;
use super::app::{App, ConnError, Scope};
use super::{charge, ConnState, Connection, RefusalKind, NO_STREAM};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Stream `s` failed with `e`: the application decides whether that fails the
    /// connection ([`App::stream_error`]; by default it does, and [`App::error`] is
    /// called) or only a range of streams (a QP's two), which are closed
    /// ([`Self::close_streams`]) while the connection carries on.
    pub(super) fn fail_stream<A: App>(&mut self, s: u16, e: ConnError, app: &mut A) {
        if self.state != ConnState::Open {
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
    /// (a NAK already due is still sent). Nothing else changes: the other streams, the paths' windows, RTTs and
    /// congestion state, the retry counts. The application must not offer these streams
    /// again until it restarts them ([`super::super::stream::Stream::start`]); the
    /// peer's packets for them are the application's to refuse or drop.
    pub fn close_streams<A: App>(&mut self, first: u16, n: u16, app: &mut A) {
        let ends = |s: u16| s.wrapping_sub(first) < n;
        // A message partly sent on one of them will not be finished.
        for s in (0..n).map(|i| first.wrapping_add(i)) {
            if app.stream(s).is_some_and(|st| st.tx.tx_off > 0) {
                self.partial = self.partial.saturating_sub(1);
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
