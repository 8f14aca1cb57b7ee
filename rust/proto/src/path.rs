//! Per-path state: a path is one UDP source port (ECMP entropy) with its own PSN space,
//! window, RTT estimate and ECN state.

use super::cc::PathCc;
use super::sack::{seq_lt, Sack, SACK_BITS};
use super::time::Instant;

/// How far ahead of the receiver's `cum` a sender's floor may move it in one packet
/// (and how far behind `cum` a late packet may still be), in PSNs. A sender's floor
/// leads the receiver's `cum` only by what it abandoned unseen (a path's packets all
/// lost, then retransmitted elsewhere: at most 256 per round of timeouts before the path
/// probes, and a probe carries the floor too); 2^16 leaves room for 256 such rounds and
/// keeps a blind guess of an acceptable PSN at 2^-15 or less.
pub const FLOOR_WINDOW: u32 = 1 << 16;

/// Sender-side path state machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum PathState {
    /// Not configured.
    #[default]
    Unused = 0,
    /// Carries data.
    Active = 1,
    /// Suspected failed: carries only probes until one is acknowledged.
    Probing = 2,
}

/// Where a path stands in its tail-loss probe (RFC 8985 section 7;
/// Documentation/transport.rst, "Tail-loss probe"): what its deadline
/// ([`PathTx::rto_at`]) means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum Tlp {
    /// None fired since the path's last answer: the deadline is a probe timeout (once
    /// the path has an RTT sample).
    #[default]
    Idle = 0,
    /// Fired with older packets left in flight, the marker following them: the deadline
    /// is a probe timeout for the marker's answer; past it the older packets are
    /// presumed lost with the path and resent on others (then [`Tlp::Fired`]).
    Marker = 1,
    /// Fired (and nothing left in flight, or the marker overdue): the deadline is the
    /// RTO, whose expiry is a path timeout.
    Fired = 2,
}

/// A path's reordering state (RFC 8985's reordering window; Documentation/
/// transport.rst, "Reordering hold"): whether its deadline ([`PathTx::rto_at`]) is a
/// reordering hold, which generation of overtaken packets the hold is for, whether the
/// connection was seen to reorder, and how wide its reordering window is (the last two
/// are the connection's, kept alike in every path). One byte, in [`PathTx`]'s padding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reorder(u8);

impl Reorder {
    const HOLD: u8 = 1;
    const GEN: u8 = 2;
    const SEEN: u8 = 4;
    const WIDE_SHIFT: u8 = 3;
    const WIDE: u8 = 3 << Self::WIDE_SHIFT;

    /// No hold, generation 0, no reordering seen.
    pub const NONE: Reorder = Reorder(0);

    /// Whether the path's deadline is a reordering hold: when it expires, the overtaken
    /// packets of generation [`Reorder::gen`] still outstanding are lost.
    pub fn hold(self) -> bool {
        self.0 & Self::HOLD != 0
    }
    /// The generation the running hold is for (packets overtaken while it runs are
    /// marked with the other one, and wait for the next hold).
    pub fn gen(self) -> bool {
        self.0 & Self::GEN != 0
    }
    /// Whether a packet of the connection was overtaken on its path and still arrived:
    /// from then on losses are found by time (the hold) and not by count (three later
    /// packets of the path acknowledged).
    pub fn seen(self) -> bool {
        self.0 & Self::SEEN != 0
    }
    /// The reordering window's round-trip part, in quarters of the path's smoothed
    /// round trip: 2 to 4.
    pub fn quarters(self) -> u8 {
        ((self.0 & Self::WIDE) >> Self::WIDE_SHIFT) + 2
    }
    /// Widens the reordering window by a quarter of the round trip, up to a whole one
    /// (it never narrows again).
    pub fn widen(&mut self) {
        if self.quarters() < 4 {
            self.0 += 1 << Self::WIDE_SHIFT;
        }
    }
    /// Arms (`true`) or ends the hold.
    pub fn set_hold(&mut self, on: bool) {
        self.set(Self::HOLD, on);
    }
    /// Ends the hold and moves on to the next generation.
    pub fn next_gen(&mut self) {
        self.0 ^= Self::GEN;
        self.0 &= !Self::HOLD;
    }
    /// Records that the connection reorders.
    pub fn set_seen(&mut self) {
        self.0 |= Self::SEEN;
    }
    fn set(&mut self, bit: u8, on: bool) {
        if on {
            self.0 |= bit;
        } else {
            self.0 &= !bit;
        }
    }
}

/// Sender half of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathTx {
    /// State machine.
    pub state: PathState,
    /// Consecutive timeouts without an acknowledgement.
    pub timeouts: u8,
    /// RTO backoff exponent.
    pub backoff: u8,
    /// Whether a probe should be sent now.
    pub probe_due: bool,
    /// The tail-loss probe since the path's last answer, if any.
    pub tlp: Tlp,
    /// Reordering state (a hold in [`PathTx::rto_at`], reordering seen).
    pub reo: Reorder,
    /// Current UDP source port.
    pub src_port: u16,
    /// Times this path was moved to a new source port.
    pub moves: u16,
    /// Steps the path took through the planes (its plane: [`crate::plane::plane_of`]
    /// of this; a move adds what [`crate::plane::move_steps`] says; Documentation/
    /// transport.rst, "Planes").
    pub plane_steps: u16,
    /// Moves since the path's last answer (saturating).
    pub silent_moves: u8,
    /// Whether the path sent anything since its last answer (an ACK of something it
    /// sent while active, or the answer validating it): the connection notes when its
    /// silence began, for planes ([`crate::plane::move_steps`]).
    pub sent_since_answer: bool,
    /// Retransmissions sent on this path (wrapping; in the struct's padding).
    pub retx: u16,
    /// Packets the peer reported CE-marked on this path, as its ACKs echoed them
    /// (wrapping).
    pub ce: u32,
    /// Lowest unresolved PSN (the floor advertised to the receiver).
    pub base_psn: u32,
    /// Next PSN to assign.
    pub next_psn: u32,
    /// Bytes in flight.
    pub inflight: u32,
    /// Smoothed RTT in ns (0 = no sample yet).
    pub srtt: u32,
    /// RTT variance in ns.
    pub rttvar: u32,
    /// Stamp of the first probe sent since the path went Probing or moved (0: none
    /// yet); an ACK echoing it or a later stamp validates the path.
    pub probe_stamp: u32,
    /// The path's deadline ([`Instant::NEVER`] if none): a reordering hold
    /// ([`PathTx::reo`]), else a probe timeout or the RTO ([`PathTx::tlp`]).
    pub rto_at: Instant,
    /// Congestion state.
    pub cc: PathCc,
}

impl PathTx {
    /// Updates SRTT/RTTVAR with a sample (RFC 6298 gains 1/8 and 1/4).
    pub fn rtt_sample(&mut self, rtt: u32) {
        let rtt = rtt.max(1);
        if self.srtt == 0 {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            let err = self.srtt.abs_diff(rtt);
            self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
            self.srtt = self.srtt - self.srtt / 8 + rtt / 8;
        }
    }

    /// RTO before backoff: `srtt + 4 * rttvar`, clamped.
    pub fn base_rto(&self, min: u64, max: u64, init: u64) -> u64 {
        if self.srtt == 0 {
            return init;
        }
        let r = u64::from(self.srtt) + 4 * u64::from(self.rttvar);
        r.clamp(min, max.max(min))
    }

    /// Whether `psn` lies within the SACK-addressable span from the floor.
    pub fn span_ok(&self) -> bool {
        self.next_psn.wrapping_sub(self.base_psn) < SACK_BITS
    }
}

/// Receiver half of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathRx {
    /// Next expected PSN; everything below is received or abandoned by the sender.
    pub cum: u32,
    /// PSNs `cum + 1 + i` received.
    pub sack: Sack,
    /// Stamp of the newest packet, echoed in the next ACK.
    pub echo: u32,
    /// CE-marked packets since the last ACK.
    pub ce: u16,
    /// New packets since the last ACK.
    pub acked: u16,
}

impl PathRx {
    /// Whether `psn` can be tracked: `cum <= psn <= cum + 256`, or old.
    pub fn in_window(&self, psn: u32) -> bool {
        psn.wrapping_sub(self.cum) <= SACK_BITS || seq_lt(psn, self.cum)
    }

    /// Whether a DATA or PROBE packet's `psn` and `floor` lie in the receive window
    /// (changes nothing): the floor at most [`FLOOR_WINDOW`] from `cum` either way and
    /// not after `psn`, and `psn` at most [`SACK_BITS`] beyond `max(cum, floor)` or, for
    /// a late or duplicated packet, at most [`FLOOR_WINDOW`] behind `cum`.
    pub fn admits(&self, psn: u32, floor: u32) -> bool {
        let ahead = floor.wrapping_sub(self.cum);
        let behind = self.cum.wrapping_sub(floor);
        let base = if ahead <= FLOOR_WINDOW {
            floor
        } else if behind <= FLOOR_WINDOW + SACK_BITS {
            self.cum
        } else {
            return false;
        };
        if seq_lt(psn, floor) {
            return false;
        }
        psn.wrapping_sub(base) <= SACK_BITS
            || (seq_lt(psn, self.cum) && self.cum.wrapping_sub(psn) <= FLOOR_WINDOW)
    }

    /// Applies the sender's floor: PSNs below it need no tracking.
    pub fn apply_floor(&mut self, floor: u32) {
        let d = floor.wrapping_sub(self.cum);
        if d == 0 || d >= 1 << 31 {
            return;
        }
        // Bit d-1 stands for `floor` itself.
        let floor_received = self.sack.get(d - 1);
        self.sack.shift_down(d);
        self.cum = floor;
        if floor_received {
            self.fold();
        }
    }

    /// Marks `psn` received.
    pub fn mark(&mut self, psn: u32) {
        let d = psn.wrapping_sub(self.cum);
        if d == 0 && self.sack.is_empty() {
            // In-order arrival with no holes: the common case.
            self.cum = self.cum.wrapping_add(1);
        } else if d == 0 {
            self.fold();
        } else if d <= SACK_BITS {
            self.sack.set(d - 1);
        }
    }

    /// `cum` is received: advance past it and the run of received PSNs after it.
    fn fold(&mut self) {
        let n = self.sack.trailing_ones();
        self.cum = self.cum.wrapping_add(1).wrapping_add(n);
        self.sack.shift_down(n.saturating_add(1));
    }
}

impl PathTx {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: PathTx = PathTx {
        state: PathState::Unused,
        timeouts: 0,
        backoff: 0,
        probe_due: false,
        tlp: Tlp::Idle,
        reo: Reorder::NONE,
        src_port: 0,
        moves: 0,
        plane_steps: 0,
        silent_moves: 0,
        sent_since_answer: false,
        retx: 0,
        ce: 0,
        base_psn: 0,
        next_psn: 0,
        inflight: 0,
        srtt: 0,
        rttvar: 0,
        probe_stamp: 0,
        rto_at: Instant::ZERO,
        cc: PathCc::EMPTY,
    };
}

impl Default for PathTx {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl PathRx {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: PathRx = PathRx {
        cum: 0,
        sack: Sack::EMPTY,
        echo: 0,
        ce: 0,
        acked: 0,
    };
}

impl Default for PathRx {
    fn default() -> Self {
        Self::EMPTY
    }
}

#[cfg(test)]
mod tests {
    use super::Reorder;

    #[test]
    fn reorder_window_widens_from_half_to_a_whole_round_trip() {
        let mut r = Reorder::NONE;
        assert_eq!(r.quarters(), 2);
        r.widen();
        assert_eq!(r.quarters(), 3);
        r.widen();
        r.widen();
        r.widen();
        assert_eq!(r.quarters(), 4);
        assert!(!r.hold() && !r.seen() && !r.gen());
    }

    #[test]
    fn a_hold_ends_in_the_next_generation_and_keeps_the_rest() {
        let mut r = Reorder::NONE;
        r.set_seen();
        r.widen();
        r.set_hold(true);
        assert!(r.hold() && !r.gen());
        r.next_gen();
        assert!(!r.hold() && r.gen() && r.seen());
        assert_eq!(r.quarters(), 3);
        r.set_hold(true);
        r.next_gen();
        assert!(!r.hold() && !r.gen());
    }
}
