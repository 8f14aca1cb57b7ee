//! What the connection reports about itself as it runs: the happenings a host may trace
//! (the kernel module turns each into a `metaroce:*` trace event; Documentation/
//! observability.rst). The core reports them through [`super::App::event`], whose
//! default does nothing, so a host that does not observe pays for nothing but building
//! the value, which the optimiser drops with the empty call.

use super::super::path::PathState;

/// How a data packet was declared lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LossCause {
    /// An ACK's SACK bitmap reported a later PSN of the same path received.
    SackGap = 0,
    /// The path's retransmission timer expired with the packet in flight, or its
    /// tail-loss probe's marker went a probe timeout unanswered (the path is presumed
    /// failing; Documentation/transport.rst, "Tail-loss probe").
    Timeout = 1,
    /// A tail-loss probe: the path's probe timeout (PTO, about 1¼ round trips) passed
    /// without an answer and this was the newest packet in flight on it; it is resent
    /// on the fastest other path with room, and a marker follows the older packets on
    /// this one (Documentation/transport.rst, "Tail-loss probe").
    TailProbe = 2,
    /// The path was retired ([`super::Connection::set_paths`] lowered the path count)
    /// with the packet in flight on it: it is resent on the paths that remain.
    Retired = 3,
}

/// One happening of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A data packet in flight on `path` with `psn` is lost: it waits for retransmission.
    Lost {
        /// Path it was sent on.
        path: u8,
        /// Its PSN on that path.
        psn: u32,
        /// How the loss was detected.
        cause: LossCause,
    },
    /// A lost data packet is sent again (as a new packet: new path PSN, same stream SSN).
    Retransmit {
        /// Path it goes out on now.
        path: u8,
        /// Its new PSN on that path.
        psn: u32,
        /// Path it was lost on.
        from_path: u8,
        /// Stream.
        stream: u16,
        /// Stream sequence number (unchanged by retransmission).
        ssn: u32,
    },
    /// A path's state or source port changed: a timeout put an active path to probing,
    /// an answered probe made it active again, or repeated probe timeouts moved it to a
    /// new UDP source port (`from == to == Probing`, `old_port != new_port`).
    PathState {
        /// Path.
        path: u8,
        /// State before.
        from: PathState,
        /// State after.
        to: PathState,
        /// Source port before.
        old_port: u16,
        /// Source port after.
        new_port: u16,
    },
    /// A path's retransmission timer expired.
    Timeout {
        /// Path.
        path: u8,
        /// The timeout that expired, ns (backoff included).
        rto_ns: u64,
        /// The path's backoff exponent after this timeout (0..=6).
        backoff: u8,
        /// Consecutive timeouts of the path, this one included.
        timeouts: u8,
    },
    /// The rate hint the peer returns on its ACKs changed (1000 bytes/s units; 0 none).
    PeerHint {
        /// Hint before.
        old: u32,
        /// Hint after.
        new: u32,
    },
}
