//! Why received packets are dropped, and per-reason counters.

/// Why a received packet was dropped. Every drop is counted by reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than the headers its type requires.
    Truncated = 0,
    /// Unsupported version.
    BadVersion = 1,
    /// Unknown packet type.
    UnknownType = 2,
    /// Unknown verbs op.
    UnknownOp = 3,
    /// Reserved flag bits set, or flags inconsistent with op / offsets.
    BadFlags = 4,
    /// Payload length field disagrees with the datagram length, or wrong fixed length.
    LengthMismatch = 5,
    /// offset + length beyond the message length, or payload larger than the MTU.
    BadOffset = 6,
    /// Path index not configured on this connection.
    BadPath = 7,
    /// Destination connection id does not match.
    WrongConnection = 8,
    /// PSN beyond the receiver's 256-packet path window.
    PsnOutOfWindow = 9,
    /// Stream index beyond the stream table.
    StreamOutOfRange = 10,
    /// Stream sequence number beyond the stream's receive window.
    SsnOutOfWindow = 11,
    /// ACK acknowledges PSNs never sent.
    AckOutOfRange = 12,
    /// Connection is in the error state.
    Closed = 13,
    /// Receive side not ready (RNR); the sender is told to retry later.
    ReceiverNotReady = 14,
    /// The application refused the packet (remote access error; NAKed).
    Refused = 15,
    /// The token is not the direction's (see `ident`): a forged or misdirected
    /// datagram.
    BadToken = 16,
    /// The incarnation is not the connection's (DATA, PROBE: not the peer's current
    /// one; ACK: not this end's): a datagram of an earlier connection still in the
    /// network.
    StaleIncarnation = 17,
    /// The datagram's mode ([`super::TYPE_SHARED`]) is not the receiving
    /// connection's: the two ends disagree on whether their QP pairs share
    /// connections (`Documentation/transport.rst`, C22).
    ModeMismatch = 18,
}

impl DropReason {
    /// Number of drop reasons (size of a counter array).
    pub const COUNT: usize = 19;
    /// Every reason, in counter order.
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Truncated,
        DropReason::BadVersion,
        DropReason::UnknownType,
        DropReason::UnknownOp,
        DropReason::BadFlags,
        DropReason::LengthMismatch,
        DropReason::BadOffset,
        DropReason::BadPath,
        DropReason::WrongConnection,
        DropReason::PsnOutOfWindow,
        DropReason::StreamOutOfRange,
        DropReason::SsnOutOfWindow,
        DropReason::AckOutOfRange,
        DropReason::Closed,
        DropReason::ReceiverNotReady,
        DropReason::Refused,
        DropReason::BadToken,
        DropReason::StaleIncarnation,
        DropReason::ModeMismatch,
    ];

    /// Counter index of this reason.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::BadVersion => "bad_version",
            DropReason::UnknownType => "unknown_type",
            DropReason::UnknownOp => "unknown_op",
            DropReason::BadFlags => "bad_flags",
            DropReason::LengthMismatch => "length_mismatch",
            DropReason::BadOffset => "bad_offset",
            DropReason::BadPath => "bad_path",
            DropReason::WrongConnection => "wrong_connection",
            DropReason::PsnOutOfWindow => "psn_out_of_window",
            DropReason::StreamOutOfRange => "stream_out_of_range",
            DropReason::SsnOutOfWindow => "ssn_out_of_window",
            DropReason::AckOutOfRange => "ack_out_of_range",
            DropReason::Closed => "closed",
            DropReason::ReceiverNotReady => "receiver_not_ready",
            DropReason::Refused => "refused",
            DropReason::BadToken => "bad_token",
            DropReason::StaleIncarnation => "stale_incarnation",
            DropReason::ModeMismatch => "mode_mismatch",
        }
    }
}

/// Per-reason drop counters, owned by whoever wants to count (device or connection).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    /// Count per [`DropReason::index`].
    pub counts: [u64; DropReason::COUNT],
}

impl DropCounters {
    /// Counts one drop.
    pub fn count(&mut self, r: DropReason) {
        if let Some(c) = self.counts.get_mut(r.index()) {
            *c = c.saturating_add(1);
        }
    }

    /// The count for one reason.
    pub fn get(&self, r: DropReason) -> u64 {
        self.counts.get(r.index()).copied().unwrap_or(0)
    }

    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, c| a.saturating_add(*c))
    }
}
