//! How many paths a connection sends on, changed while it runs (the extension API's
//! "set paths"; Documentation/transport.rst, "Changing the path count").
//!
//! The count is the sender's alone: a receiver takes DATA and PROBE on any path index
//! below its own limit (`P`), whatever the sender's count, so neither end tells the
//! other. Two ends of the kernel module both have room for 64.
//!
//! On a shared connection each member QP asks for a count and the connection sends on
//! the largest asked for ([`PathWants`]): one application cannot take paths away from
//! another's traffic on the same connection.

use super::super::cc::PathCc;
use super::super::path::{PathState, Tlp};
use super::super::time::Instant;
use super::{port_for, App, Connection, Event, LossCause, MAX_PATHS};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// The most paths this connection can send on: `P`, at most 64.
    pub const fn max_paths() -> u8 {
        if P > MAX_PATHS {
            MAX_PATHS as u8
        } else {
            P as u8
        }
    }

    /// Sends on `n` paths from now on, `n` clamped to `1..=`[`Self::max_paths`];
    /// returns the count set. Nothing is lost either way:
    ///
    /// - Raising it starts paths `old..n` as a new connection's paths start: active,
    ///   at their source ports ([`super::Config::base_src_port`] plus the index, or
    ///   where an earlier move took them), with the initial window and no RTT sample.
    ///   Their PSNs go on from where they stopped (a path retired and raised again is
    ///   one sequence to the receiver).
    /// - Lowering it retires paths `n..old`: their packets in flight are resent on
    ///   the paths that remain (each reported [`Event::Lost`], [`LossCause::Retired`]),
    ///   and they carry nothing more, probes included. ACKs that answer them still
    ///   count (the packet may have arrived: the resent copy is then a duplicate the
    ///   receiver drops).
    ///
    /// Every change is reported as [`Event::PathState`] per path started or retired.
    pub fn set_paths<A: App>(&mut self, n: u8, app: &mut A) -> u8 {
        let n = n.clamp(1, Self::max_paths());
        let old = self.cfg.paths;
        for p in usize::from(n)..usize::from(old) {
            self.abandon_path(p, LossCause::Retired, app);
            let Some(t) = self.tx.get_mut(p) else {
                continue;
            };
            let from = t.state;
            t.state = PathState::Unused;
            t.probe_due = false;
            t.tlp = Tlp::Idle;
            t.rto_at = Instant::NEVER;
            self.probing &= !(1u64 << (p % 64));
            app.event(Event::PathState {
                path: p as u8,
                from,
                to: PathState::Unused,
                old_port: t.src_port,
                new_port: t.src_port,
            });
        }
        let cfg = self.cfg;
        for p in usize::from(old)..usize::from(n) {
            let Some(t) = self.tx.get_mut(p) else {
                continue;
            };
            let old_port = t.src_port;
            t.state = PathState::Active;
            t.src_port = port_for(&cfg, p as u8, t.moves);
            t.timeouts = 0;
            t.backoff = 0;
            t.probe_due = false;
            t.probe_stamp = 0;
            t.tlp = Tlp::Idle;
            t.srtt = 0;
            t.rttvar = 0;
            t.rto_at = Instant::NEVER;
            t.inflight = 0;
            t.base_psn = t.next_psn;
            t.cc = PathCc::new(&cfg.cc);
            t.reo.set_hold(false);
            app.event(Event::PathState {
                path: p as u8,
                from: PathState::Unused,
                to: PathState::Active,
                old_port,
                new_port: t.src_port,
            });
        }
        self.cfg.paths = n;
        self.sent_paths = self.sent_paths.max(n);
        if self.rr_path >= n {
            self.rr_path = 0;
            self.rr_run = 0;
        }
        n
    }
}

/// The path counts the members of a shared connection ask for, and the one it sends
/// on: the largest of them. A member asks for the host's default when it joins and
/// for what it sets later, so no member can lower the paths another member's traffic
/// has (more paths buy no larger share of a shared bottleneck: the congested paths'
/// increase is coupled, Documentation/transport.rst, "Congestion control"), while
/// every member raising is heard. 130 bytes; every operation costs at most 64 steps,
/// whatever the number of members.
#[derive(Clone, Copy, Debug)]
pub struct PathWants {
    /// Members asking for each count, by count (index 0 unused).
    wants: [u16; MAX_PATHS + 1],
}

impl Default for PathWants {
    fn default() -> Self {
        Self::new()
    }
}

impl PathWants {
    /// No member.
    pub const fn new() -> Self {
        Self {
            wants: [0; MAX_PATHS + 1],
        }
    }

    fn slot(&mut self, n: u8) -> Option<&mut u16> {
        self.wants.get_mut(usize::from(n.clamp(1, MAX_PATHS as u8)))
    }

    /// A member joins asking for `n` (clamped to `1..=64`).
    pub fn join(&mut self, n: u8) {
        if let Some(w) = self.slot(n) {
            *w = w.saturating_add(1);
        }
    }

    /// A member that asked for `n` leaves (or asks again: then [`Self::join`] with
    /// its new count).
    pub fn leave(&mut self, n: u8) {
        if let Some(w) = self.slot(n) {
            *w = w.saturating_sub(1);
        }
    }

    /// The count the connection sends on: the largest asked for; `None` without
    /// members.
    pub fn effective(&self) -> Option<u8> {
        self.wants.iter().rposition(|&w| w != 0).map(|n| n as u8)
    }
}
