//! Planes: a connection's paths spread over a multi-plane host's networks
//! ([`super::super::plane`]; Documentation/transport.rst, "Planes"). The host says
//! how many planes it has and which work ([`Connection::set_planes`]) and which plane
//! a datagram came in on ([`Connection::handle_packet_on`]); every [`Transmit`] says
//! which plane to send it on.
//!
//! Nothing of this is on the wire: planes are each end's own business, like source
//! ports. Both ends reach each other's one address on every plane.

use super::super::bytes::Bytes;
use super::super::plane::{move_steps, plane_of, MAX_PLANES};
use super::super::sack::{seq_diff, seq_lt};
use super::super::time::Instant;
use super::super::wire::DropReason;
use super::{App, Connection, RxEvent};

/// A path silent on its plane tries another plane with no sign that it works
/// ([`Connection::move_plane`]) on a move after `EXPLORE_MOVES` moves without an answer,
/// once its silence has lasted `EXPLORE_RTTS` of the connection's smallest round trip
/// and `EXPLORE_MIN_RTOS` of its RTO floor (`Config::min_rto_ns`), or a quarter of
/// its verbs retry budget if that is shorter.
pub(super) const EXPLORE_MOVES: u8 = 2;
/// See [`EXPLORE_MOVES`].
pub(super) const EXPLORE_RTTS: u64 = 128;
/// See [`EXPLORE_MOVES`].
pub(super) const EXPLORE_MIN_RTOS: u64 = 8;

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Sends over `n` planes (clamped to `1..=`[`MAX_PLANES`]) of which those with
    /// their bit set in `up` work (bit `k`: plane `k`). Takes effect with the next
    /// datagram: paths change planes by [`plane_of`]'s rule, nothing is resent. A
    /// new connection has one plane.
    pub fn set_planes(&mut self, n: u8, up: u8) {
        self.planes = n.clamp(1, MAX_PLANES);
        self.planes_up = up;
    }

    /// The plane path `p` sends DATA and PROBE on ([`plane_of`] of its plane steps).
    pub fn path_plane(&self, p: usize) -> u8 {
        let steps = self.tx.get(p).map_or(0, |t| t.plane_steps);
        plane_of(p as u8, steps, self.planes, self.planes_up)
    }

    /// Path `p` moves to a new source port at `now`: to another plane if one answered
    /// since the path went silent ([`Connection::went_quiet`]); else it keeps its plane,
    /// unless it explores ([`move_steps`]): it moved [`EXPLORE_MOVES`] times before
    /// without an answer and its silence is long ([`EXPLORE_RTTS`],
    /// [`EXPLORE_MIN_RTOS`], capped at a quarter of the verbs retry budget). A stall of
    /// the whole connection (a paused or overloaded host) is short; a plane that failed
    /// silently stays failed.
    pub(super) fn move_plane(&mut self, p: usize, now: Instant) {
        let (n, up) = (self.planes, self.planes_up);
        let Some(t) = self.tx.get(p) else { return };
        let since = self.quiet_from.get(p).copied().unwrap_or(0);
        let heard = self.planes_heard;
        let alive = (0..n.min(MAX_PLANES))
            .filter(|&k| heard & (1 << k) != 0)
            .filter(|&k| seq_lt(since, self.plane_answered[usize::from(k)]))
            .fold(0u8, |m, k| m | 1 << k);
        let mut quiet = u64::from(self.min_rtt)
            .saturating_mul(EXPLORE_RTTS)
            .max(u64::from(self.cfg.min_rto_ns).saturating_mul(EXPLORE_MIN_RTOS));
        // Within a quarter of the verbs retry budget (`retry_cnt + 1` local ACK
        // timeouts without progress), so that the try comes before the QP would fail.
        if let Some(t) = self.ack_timeout() {
            let budget = t.saturating_mul(u64::from(self.cfg.retry_cnt) + 1);
            quiet = quiet.min(budget / 4);
        }
        // (A silence past 35 minutes reads as negative: long enough.)
        let silence = seq_diff(now.as_micros32(), since);
        let long = silence < 0 || (silence as u64).saturating_mul(1000) >= quiet;
        let explore = t.silent_moves >= EXPLORE_MOVES && long;
        if let Some(t) = self.tx.get_mut(p) {
            t.plane_steps = move_steps(p as u8, t.plane_steps, n, up, alive, explore);
            t.silent_moves = t.silent_moves.saturating_add(1);
        }
    }

    /// Path `p` sends its first datagram since its last answer at `now`: its silence
    /// begins ([`Connection::move_plane`]).
    pub(super) fn went_quiet(&mut self, p: usize, now: Instant) {
        if let Some(q) = self.quiet_from.get_mut(p) {
            *q = now.as_micros32();
        }
    }

    /// Path `p` was answered at `now` (an ACK of what it sent on its plane, or an
    /// answer validating it): it and its plane work.
    pub(super) fn note_answer(&mut self, p: usize, now: Instant) {
        let k = self.path_plane(p);
        if let Some(t) = self.tx.get_mut(p) {
            t.sent_since_answer = false;
            t.silent_moves = 0;
        }
        if let Some(q) = self.quiet_from.get_mut(p) {
            *q = now.as_micros32();
        }
        if let Some(a) = self.plane_answered.get_mut(usize::from(k)) {
            *a = now.as_micros32();
            self.planes_heard |= 1 << k;
        }
    }

    /// How many planes the connection sends over, and which work (bit per plane).
    pub fn planes(&self) -> (u8, u8) {
        (self.planes, self.planes_up)
    }

    /// [`Connection::handle_packet`] for a datagram that came in on plane `plane`:
    /// if the connection takes it, the ACKs of its path go back on that plane (until
    /// a later datagram of the path comes in on another). A plane beyond the
    /// connection's counts as plane 0.
    pub fn handle_packet_on<A: App>(
        &mut self,
        now: Instant,
        buf: &[u8],
        ce: bool,
        plane: u8,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        self.handle_pieces_on(now, Bytes::from(buf), ce, plane, app)
    }

    /// [`Connection::handle_pieces`] for a datagram that came in on plane `plane` (as
    /// [`Connection::handle_packet_on`]).
    pub fn handle_pieces_on<A: App>(
        &mut self,
        now: Instant,
        dg: Bytes<'_>,
        ce: bool,
        plane: u8,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        self.ingress = if plane < self.planes { plane } else { 0 };
        let r = self.handle_pieces(now, dg, ce, app);
        self.ingress = 0;
        r
    }

    /// Path `p`'s newest DATA or PROBE came in on the plane being handled.
    pub(super) fn note_ingress(&mut self, p: usize) {
        let k = self.ingress;
        if let Some(a) = self.ack_plane.get_mut(p) {
            *a = k;
        }
    }

    /// The plane path `p`'s ACKs go out on: the one its newest DATA or PROBE came in
    /// on, if it still works here; else this end's own rule for path `p`.
    pub(super) fn ack_plane_of(&self, p: usize) -> u8 {
        let k = self.ack_plane.get(p).copied().unwrap_or(0);
        if k < self.planes && self.planes_up & (1 << k) != 0 {
            return k;
        }
        self.path_plane(p)
    }
}
