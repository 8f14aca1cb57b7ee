//! Planes: a connection's paths spread over a multi-plane host's networks
//! ([`super::super::plane`]; Documentation/transport.rst, "Planes"). The host says
//! how many planes it has and which work ([`Connection::set_planes`]) and which plane
//! a datagram came in on ([`Connection::handle_packet_on`]); every [`Transmit`] says
//! which plane to send it on.
//!
//! Nothing of this is on the wire: planes are each end's own business, like source
//! ports. Both ends reach each other's one address on every plane.

use super::super::bytes::Bytes;
use super::super::plane::{plane_of, MAX_PLANES};
use super::super::time::Instant;
use super::super::wire::DropReason;
use super::{App, Connection, RxEvent};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Sends over `n` planes (clamped to `1..=`[`MAX_PLANES`]) of which those with
    /// their bit set in `up` work (bit `k`: plane `k`). Takes effect with the next
    /// datagram: paths change planes by [`plane_of`]'s rule, nothing is resent. A
    /// new connection has one plane.
    pub fn set_planes(&mut self, n: u8, up: u8) {
        self.planes = n.clamp(1, MAX_PLANES);
        self.planes_up = up;
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
        let moves = self.tx.get(p).map_or(0, |t| t.moves);
        plane_of(p as u8, moves, self.planes, self.planes_up)
    }
}
