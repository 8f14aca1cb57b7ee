//! Where each header field lies (`Documentation/transport.rst`): a single-byte field is
//! its offset, a wider one its byte range. Encoding and decoding both read this table,
//! so no offset is written twice.

/// The bytes of a multi-byte field.
pub(crate) type Field = core::ops::Range<usize>;

/// Common header, every datagram.
pub(crate) mod common {
    use super::Field;
    pub(crate) const VERSION: usize = 0;
    pub(crate) const TYPE: usize = 1;
    pub(crate) const PATH: usize = 2;
    /// The incarnation (version 3): DATA and PROBE, the sending connection's; ACK,
    /// the acknowledged connection's; DATAGRAM, zero.
    pub(crate) const INC: Field = 3..5;
    /// The destination (24 bits): the receiver's QPN.
    pub(crate) const DST_CONN: Field = 5..8;
    pub(crate) const PSN: Field = 8..12;
    pub(crate) const STAMP: Field = 12..16;
    /// The direction's token (`ident`): 0 in a DATAGRAM.
    pub(crate) const TOKEN: Field = 16..20;
}

/// DATA, after the common header.
pub(crate) mod data {
    use super::Field;
    pub(crate) const STREAM: Field = 20..22;
    pub(crate) const OP: usize = 22;
    pub(crate) const FLAGS: usize = 23;
    pub(crate) const PAYLOAD_LEN: Field = 24..26;
    pub(crate) const TAG: Field = 26..28;
    pub(crate) const FLOOR: Field = 28..32;
    pub(crate) const SSN: Field = 32..36;
    pub(crate) const MSN: Field = 36..40;
    pub(crate) const OFFSET: Field = 40..44;
    pub(crate) const MSG_LEN: Field = 44..48;
}

/// The RETH extension, from its own start (after the DATA header).
pub(crate) mod reth {
    use super::Field;
    pub(crate) const VA: Field = 0..8;
    pub(crate) const RKEY: Field = 8..12;
    pub(crate) const LEN: Field = 12..16;
}

/// The immediate-data extension, from its own start (after the RETH, if any).
pub(crate) mod imm {
    use super::Field;
    pub(crate) const IMM: Field = 0..4;
}

/// ACK, after the common header (whose PSN is zero and whose stamp is the echo).
pub(crate) mod ack {
    use super::super::super::sack::SACK_BYTES;
    use super::Field;
    pub(crate) const CUM: Field = 20..24;
    pub(crate) const RATE_HINT: Field = 24..28;
    pub(crate) const CE: Field = 28..30;
    pub(crate) const ACKED: Field = 30..32;
    pub(crate) const FLAGS: usize = 32;
    pub(crate) const RNR_TIMER: usize = 33;
    /// With `AF_MSG`, the refused message's stream; else zero. (Its MSN is the common
    /// header's `psn`.)
    pub(crate) const NAK_STREAM: Field = 34..36;
    pub(crate) const RNR_PSN: Field = 36..40;
    pub(crate) const SACK: Field = 40..40 + SACK_BYTES;
}

/// PROBE, after the common header.
pub(crate) mod probe {
    use super::Field;
    pub(crate) const FLOOR: Field = 20..24;
}

/// DATAGRAM, after the common header (whose path and PSN are zero).
pub(crate) mod datagram {
    use super::Field;
    pub(crate) const SRC_QPN: Field = 20..24;
    pub(crate) const QKEY: Field = 24..28;
    pub(crate) const FLAGS: usize = 28;
    /// Reserved, zero.
    pub(crate) const RESERVED: usize = 29;
    pub(crate) const PAYLOAD_LEN: Field = 30..32;
    pub(crate) const IMM: Field = 32..36;
}
