//! MetaRoCE packet formats: encode and decode. All multi-byte fields are big-endian
//! (network order) except the SACK bitmap, which is a little-endian bit string
//! (see [`super::sack`]). Decoding never panics and rejects malformed input with a
//! [`DropReason`].

use super::bytes::Bytes;
use super::sack::{Sack, SACK_BYTES};

/// Protocol version carried in byte 0.
pub const VERSION: u8 = 6;
/// Default UDP destination port (a module parameter; deliberately not RoCEv2's 4791).
pub const DEFAULT_UDP_PORT: u16 = 4792;
/// The largest destination the common header carries (24 bits: a QPN).
pub const MAX_DST: u32 = 0x00ff_ffff;
/// Length of the common header.
pub const COMMON_LEN: usize = field::common::TOKEN.end;
/// Length of a data packet's headers without optional extensions.
pub const DATA_LEN: usize = field::data::MSG_LEN.end;
/// Length of the remote-address extension (RETH).
pub const RETH_LEN: usize = field::reth::LEN.end;
/// Length of the immediate-data extension.
pub const IMM_LEN: usize = field::imm::IMM.end;
/// Length of an ACK (a datagram carries one or a bundle of them, [`decode_acks`]).
pub const ACK_LEN: usize = field::ack::SACK.end;
/// Length of a PROBE packet.
pub const PROBE_LEN: usize = field::probe::FLOOR.end;
/// Length of a DATAGRAM packet's headers (unreliable datagram service).
pub const DATAGRAM_LEN: usize = field::datagram::IMM.end;

mod bundle;
mod drop;
mod field;
mod summary;
pub use bundle::{decode_acks, decode_ride, AckBundle, MAX_ACK_BUNDLE};
pub use drop::{DropCounters, DropReason};
use field::Field;
pub use summary::Summary;
/// Largest header a data packet can have.
pub const MAX_DATA_HEADER: usize = DATA_LEN + RETH_LEN + IMM_LEN;

/// Bit 7 of the type byte: the sending connection is shared by several QP pairs
/// (`Documentation/transport.rst`, C22). A connection takes only datagrams of its own
/// mode (else `ModeMismatch`); a DATAGRAM never has it (`BadFlags`).
pub const TYPE_SHARED: u8 = 0x80;

/// Packet type (byte 1 of the common header, without [`TYPE_SHARED`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketType {
    /// Carries (part of) a message.
    Data = 1,
    /// Acknowledges one path: cumulative PSN, SACK bitmap, ECN echo, rate hint.
    Ack = 2,
    /// Asks for an ACK on a path that is being (re)validated; carries no data.
    Probe = 3,
    /// One unreliable datagram (verbs UD SEND): no connection, no ACK.
    Datagram = 4,
}

impl PacketType {
    /// Decodes a type byte.
    pub fn from_u8(v: u8) -> Option<PacketType> {
        use PacketType::*;
        // Types are numbered from 1 in this order.
        let by_number = [Data, Ack, Probe, Datagram];
        by_number.get(usize::from(v).wrapping_sub(1)).copied()
    }
}

/// The packet type of a datagram, read from the type byte without validating anything
/// else (`None`: too short to have one, or unknown).
#[inline]
pub fn peek_type(buf: &[u8]) -> Option<PacketType> {
    buf.get(field::common::TYPE)
        .map(|t| t & !TYPE_SHARED)
        .and_then(PacketType::from_u8)
}

/// Whether a datagram says its sending connection is shared ([`TYPE_SHARED`]), read
/// without validating anything else (`false` if too short to have a type byte).
#[inline]
pub fn is_shared(buf: &[u8]) -> bool {
    buf.get(field::common::TYPE)
        .is_some_and(|t| t & TYPE_SHARED != 0)
}

/// Sets or clears [`TYPE_SHARED`] in an encoded datagram (a connection marks what it
/// sends with its mode after encoding the header). `None` if `buf` has no type byte.
#[inline]
pub fn set_shared(buf: &mut [u8], shared: bool) -> Option<()> {
    let t = buf.get_mut(field::common::TYPE)?;
    *t = if shared {
        *t | TYPE_SHARED
    } else {
        *t & !TYPE_SHARED
    };
    Some(())
}

/// Verbs operation of the message a data packet belongs to. The core carries it; the
/// verbs layer gives it meaning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// SEND: consumes a posted receive at the responder.
    #[default]
    Send = 0,
    /// SEND with immediate data.
    SendImm = 1,
    /// RDMA WRITE to the RETH's (va, rkey).
    Write = 2,
    /// RDMA WRITE with immediate data (consumes a receive).
    WriteImm = 3,
    /// RDMA READ request; RETH names the remote buffer and its length.
    ReadReq = 4,
    /// RDMA READ response data (placed by MSN at the requester).
    ReadResp = 5,
    /// Atomic compare-and-swap; payload is swap (8 B) then compare (8 B).
    AtomicCmpSwap = 6,
    /// Atomic fetch-and-add; payload is the addend (8 B).
    AtomicFetchAdd = 7,
    /// Atomic response; payload is the original value (8 B).
    AtomicResp = 8,
    /// SEND with invalidate: the immediate field carries the rkey the
    /// responder invalidates when the receive completes.
    SendInv = 9,
    /// ATOMIC WRITE (IBTA 1.5 9.4.6): 8 bytes stored at the RETH's (va, rkey)
    /// as one 8-byte write; acknowledged like a WRITE.
    AtomicWrite = 10,
}

impl Op {
    /// Decodes an op byte.
    pub fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            0 => Op::Send,
            1 => Op::SendImm,
            2 => Op::Write,
            3 => Op::WriteImm,
            4 => Op::ReadReq,
            5 => Op::ReadResp,
            6 => Op::AtomicCmpSwap,
            7 => Op::AtomicFetchAdd,
            8 => Op::AtomicResp,
            9 => Op::SendInv,
            10 => Op::AtomicWrite,
            _ => return None,
        })
    }

    /// Whether every packet of this op must carry a RETH.
    pub fn needs_reth(self) -> bool {
        matches!(
            self,
            Op::Write
                | Op::WriteImm
                | Op::ReadReq
                | Op::AtomicCmpSwap
                | Op::AtomicFetchAdd
                | Op::AtomicWrite
        )
    }

    /// Whether the last packet of this op carries immediate data (for
    /// SEND_INV: the rkey to invalidate).
    pub fn has_imm(self) -> bool {
        matches!(self, Op::SendImm | Op::WriteImm | Op::SendInv)
    }
}

/// Data flag: first packet of its message.
pub const DF_FIRST: u8 = 0x01;
/// Data flag: last packet of its message.
pub const DF_LAST: u8 = 0x02;
/// Data flag: a RETH follows the data header.
pub const DF_RETH: u8 = 0x04;
/// Data flag: immediate data follows (after the RETH if both).
pub const DF_IMM: u8 = 0x08;
/// Data flag: this packet is a retransmission (informational).
pub const DF_RETX: u8 = 0x10;
/// Data flag: the sender asks for an immediate ACK.
pub const DF_ACKREQ: u8 = 0x20;
/// Data flag: solicited event (IBTA 9.2.4 SE bit); set on the last packet of a message
/// whose work request asked for it.
pub const DF_SE: u8 = 0x40;
const DF_KNOWN: u8 = 0x7f;

/// ACK flag: the RNR fields are valid.
pub const AF_RNR: u8 = 0x01;
/// ACK flag: NAK, remote access error (IBTA 9.7.5.2.4): the receiver refused
/// the packet with PSN `rnr_psn` (the RNR fields carry it); the connection
/// fails.
pub const AF_NAK: u8 = 0x02;
/// ACK flag, only with [`AF_NAK`]: the NAK is for an invalid request
/// (IBTA 9.7.5.2.4, NAK code 1: e.g. a SEND longer than the posted receive)
/// rather than a remote access error.
pub const AF_INV: u8 = 0x04;
/// ACK flag, only with [`AF_NAK`]: the NAK names the refused message
/// ([`AckHeader::nak_stream`], [`AckHeader::nak_msn`]), and every earlier message of
/// that stream is complete at the receiver (IBTA 9.7.5.2.4: a NAK acknowledges every
/// request before the one it refuses). Without it the NAK names no message.
pub const AF_MSG: u8 = 0x08;
/// ACK flag, only with [`AF_NAK`] and [`AF_MSG`] (not [`AF_INV`]): the named message's
/// stream is closed at the receiver (its owner, a QP of a shared connection, takes no
/// packet any more: it is in the error state). Unlike another NAK it says nothing of
/// the stream's earlier messages; the sender fails that stream alone
/// (Documentation/transport.rst, "Shared connections").
pub const AF_CLOSED: u8 = 0x10;

/// Remote buffer named by a RETH: virtual address, key and DMA length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reth {
    /// Remote virtual address of the message's byte 0.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Total DMA length (for READ requests the length to read).
    pub len: u32,
}

/// A decoded (or to-be-encoded) data packet header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataHeader {
    /// Path index the packet was sent on.
    pub path: u8,
    /// The sending connection's incarnation (Documentation/transport.rst,
    /// "Incarnations").
    pub inc: u16,
    /// Destination: the receiver's connection id, a QPN (24 bits, at most
    /// [`MAX_DST`]; encoding refuses more).
    pub dst_conn: u32,
    /// Per-path packet sequence number.
    pub psn: u32,
    /// Sender timestamp (low 32 bits of its nanosecond clock), echoed in ACKs.
    pub stamp: u32,
    /// The direction's token ([`super::ident`]).
    pub token: u32,
    /// Stream index.
    pub stream: u16,
    /// Verbs op (raw byte; validated on decode).
    pub op: u8,
    /// `DF_*` flags.
    pub flags: u8,
    /// Payload bytes following the headers.
    pub payload_len: u16,
    /// Message tag: 16 bits the application attaches to a message and the core carries
    /// unchanged in every packet of it (the verbs layer: the receive sequence number).
    pub tag: u16,
    /// Sender's path floor: every PSN below it is resolved and needs no ACK.
    pub floor: u32,
    /// Stream sequence number: the packet's position in its stream.
    pub ssn: u32,
    /// Message sequence number within the stream.
    pub msn: u32,
    /// Byte offset of the payload in the message.
    pub offset: u32,
    /// Total message length in bytes.
    pub msg_len: u32,
    /// Remote buffer, if `DF_RETH`.
    pub reth: Reth,
    /// Immediate data, if `DF_IMM`.
    pub imm: u32,
}

impl DataHeader {
    /// Encoded header length implied by the flags.
    pub fn header_len(&self) -> usize {
        let mut n = DATA_LEN;
        if self.flags & DF_RETH != 0 {
            n += RETH_LEN;
        }
        if self.flags & DF_IMM != 0 {
            n += IMM_LEN;
        }
        n
    }

    /// Writes the headers to the start of `out`; returns the header length, or `None`
    /// if `out` is too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let n = self.header_len();
        use field::data::*;
        let b = out.get_mut(..n)?;
        let head = Head {
            t: PacketType::Data,
            path: self.path,
            inc: self.inc,
            conn: self.dst_conn,
            psn: self.psn,
            stamp: self.stamp,
            token: self.token,
        };
        put_common(b, head)?;
        put(b, STREAM, self.stream.to_be_bytes())?;
        *b.get_mut(OP)? = self.op;
        *b.get_mut(FLAGS)? = self.flags;
        put(b, PAYLOAD_LEN, self.payload_len.to_be_bytes())?;
        put(b, TAG, self.tag.to_be_bytes())?;
        put(b, FLOOR, self.floor.to_be_bytes())?;
        put(b, SSN, self.ssn.to_be_bytes())?;
        put(b, MSN, self.msn.to_be_bytes())?;
        put(b, OFFSET, self.offset.to_be_bytes())?;
        put(b, MSG_LEN, self.msg_len.to_be_bytes())?;
        let mut ext = b.get_mut(DATA_LEN..)?;
        if self.flags & DF_RETH != 0 {
            put(ext, field::reth::VA, self.reth.va.to_be_bytes())?;
            put(ext, field::reth::RKEY, self.reth.rkey.to_be_bytes())?;
            put(ext, field::reth::LEN, self.reth.len.to_be_bytes())?;
            ext = ext.get_mut(RETH_LEN..)?;
        }
        if self.flags & DF_IMM != 0 {
            put(ext, field::imm::IMM, self.imm.to_be_bytes())?;
        }
        Some(n)
    }
}

/// A decoded (or to-be-encoded) ACK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckHeader {
    /// Path being acknowledged.
    pub path: u8,
    /// The incarnation of the connection whose data this acknowledges (the data
    /// sender's, echoed).
    pub inc: u16,
    /// Destination: the data sender's connection id, a QPN (24 bits).
    pub dst_conn: u32,
    /// Echo of the stamp of the newest data/probe packet received on the path.
    pub echo: u32,
    /// The token of the direction acknowledged (the data's).
    pub token: u32,
    /// Cumulative PSN: the next PSN expected on the path (all below are done).
    pub cum: u32,
    /// Receiver fair-share rate hint in units of 1000 bytes/s (0 = no hint).
    pub rate_hint: u32,
    /// Data packets received with ECN CE on this path since the previous ACK.
    pub ce: u16,
    /// Data packets newly received on this path since the previous ACK.
    pub acked: u16,
    /// `AF_*` flags.
    pub flags: u8,
    /// RNR timer in units of 10 µs (valid with `AF_RNR`).
    pub rnr_timer: u8,
    /// The PSN refused with RNR (valid with `AF_RNR`) or NAK.
    pub rnr_psn: u32,
    /// With [`AF_MSG`]: the stream of the refused message (else 0).
    pub nak_stream: u16,
    /// With [`AF_MSG`]: the MSN of the refused message (else 0; carried in the common
    /// header's `psn` field).
    pub nak_msn: u32,
    /// SACK: bit i stands for PSN `cum + 1 + i`.
    pub sack: Sack,
}

impl AckHeader {
    /// Writes the ACK to the start of `out`; returns [`ACK_LEN`] or `None` if too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        use field::ack::*;
        let b = out.get_mut(..ACK_LEN)?;
        let head = Head {
            t: PacketType::Ack,
            path: self.path,
            inc: self.inc,
            conn: self.dst_conn,
            psn: self.nak_msn,
            stamp: self.echo,
            token: self.token,
        };
        put_common(b, head)?;
        put(b, CUM, self.cum.to_be_bytes())?;
        put(b, RATE_HINT, self.rate_hint.to_be_bytes())?;
        put(b, CE, self.ce.to_be_bytes())?;
        put(b, ACKED, self.acked.to_be_bytes())?;
        *b.get_mut(FLAGS)? = self.flags;
        *b.get_mut(RNR_TIMER)? = self.rnr_timer;
        put(b, NAK_STREAM, self.nak_stream.to_be_bytes())?;
        put(b, RNR_PSN, self.rnr_psn.to_be_bytes())?;
        let mut s = [0u8; SACK_BYTES];
        self.sack.encode(&mut s);
        put(b, SACK, s)?;
        Some(ACK_LEN)
    }
}

/// A decoded (or to-be-encoded) probe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeHeader {
    /// Path being probed.
    pub path: u8,
    /// The sending connection's incarnation.
    pub inc: u16,
    /// Destination: the receiver's connection id, a QPN (24 bits, at most
    /// [`MAX_DST`]; encoding refuses more).
    pub dst_conn: u32,
    /// The path's next PSN (not consumed by the probe).
    pub psn: u32,
    /// Sender timestamp, echoed in the ACK.
    pub stamp: u32,
    /// The direction's token.
    pub token: u32,
    /// Sender's path floor.
    pub floor: u32,
}

impl ProbeHeader {
    /// Writes the probe to the start of `out`; returns [`PROBE_LEN`] or `None`.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let b = out.get_mut(..PROBE_LEN)?;
        let head = Head {
            t: PacketType::Probe,
            path: self.path,
            inc: self.inc,
            conn: self.dst_conn,
            psn: self.psn,
            stamp: self.stamp,
            token: self.token,
        };
        put_common(b, head)?;
        put(b, field::probe::FLOOR, self.floor.to_be_bytes())?;
        Some(PROBE_LEN)
    }
}

/// A decoded packet; data payloads borrow from the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    /// Data header and payload.
    Data(DataHeader, &'a [u8]),
    /// ACK.
    Ack(AckHeader),
    /// Probe.
    Probe(ProbeHeader),
}

/// Reads the destination connection id of a datagram (for demultiplexing) without
/// validating anything else.
pub fn peek_dst_conn(buf: &[u8]) -> Result<u32, DropReason> {
    if buf.len() < COMMON_LEN {
        return Err(DropReason::Truncated);
    }
    get_u24(buf, field::common::DST_CONN)
}

/// The common header's fields.
struct Common {
    /// The type byte without [`TYPE_SHARED`].
    t: u8,
    /// [`TYPE_SHARED`] was set.
    shared: bool,
    path: u8,
    inc: u16,
    dst_conn: u32,
    psn: u32,
    stamp: u32,
    token: u32,
}

/// Validates the common header and reads it.
#[inline]
fn common(buf: &[u8]) -> Result<Common, DropReason> {
    if buf.len() < COMMON_LEN {
        return Err(DropReason::Truncated);
    }
    use field::common::*;
    if get_u8(buf, VERSION)? != self::VERSION {
        return Err(DropReason::BadVersion);
    }
    let t = get_u8(buf, TYPE)?;
    Ok(Common {
        t: t & !TYPE_SHARED,
        shared: t & TYPE_SHARED != 0,
        path: get_u8(buf, PATH)?,
        inc: get_u16(buf, INC)?,
        dst_conn: get_u32(buf, DST_CONN.start - 1..DST_CONN.end)? & MAX_DST,
        psn: get_u32(buf, PSN)?,
        stamp: get_u32(buf, STAMP)?,
        token: get_u32(buf, TOKEN)?,
    })
}

/// Decodes and validates a MetaRoCE datagram (the UDP payload).
#[inline]
pub fn decode(buf: &[u8]) -> Result<Packet<'_>, DropReason> {
    match PacketType::from_u8(common(buf)?.t) {
        Some(PacketType::Data) => decode_data_packet(buf).map(|(h, p)| Packet::Data(h, p)),
        // A bundle of ACKs decodes as its first ([`decode_acks`] gives them all; a
        // DATA riding after them, [`decode_ride`], must decode too).
        Some(PacketType::Ack) => decode_ride(buf)
            .and_then(|(mut b, data)| {
                if let Some(d) = data {
                    decode_data_packet(d)?;
                }
                b.next().ok_or(DropReason::Truncated)
            })
            .map(Packet::Ack),
        Some(PacketType::Probe) => decode_probe_packet(buf).map(Packet::Probe),
        Some(PacketType::Datagram) | None => Err(DropReason::UnknownType),
    }
}

/// Decodes a datagram that must be DATA (same validation as [`decode`]).
#[inline]
pub fn decode_data_packet(buf: &[u8]) -> Result<(DataHeader, &[u8]), DropReason> {
    let c = common(buf)?;
    if c.t != PacketType::Data as u8 {
        return Err(DropReason::UnknownType);
    }
    decode_data(buf, &c)
}

/// [`decode_data_packet`] of a datagram a host hands over in pieces ([`Bytes`]): the
/// same validation and drop reasons, the lengths checked against the whole datagram.
/// The first piece must hold the header whole (at least
/// `min(`[`MAX_DATA_HEADER`]`, len)` bytes, as [`data_in_pieces`] checks); a header cut
/// across the pieces is `Truncated`.
#[inline]
pub fn decode_data_pieces(dg: Bytes<'_>) -> Result<(DataHeader, Bytes<'_>), DropReason> {
    let c = common(dg.head())?;
    if c.t != PacketType::Data as u8 {
        return Err(DropReason::UnknownType);
    }
    decode_data_in(dg, &c)
}

/// Whether a datagram whose first piece is `head` may be handed to
/// [`crate::conn::Connection::handle_pieces_on`] in pieces: it says it is DATA and
/// `head` holds its header whole (read without validating anything else). Any other
/// datagram goes whole.
#[inline]
pub fn data_in_pieces(head: &[u8]) -> bool {
    let Some(flags) = head.get(field::data::FLAGS) else {
        return false;
    };
    let mut n = DATA_LEN;
    if flags & DF_RETH != 0 {
        n += RETH_LEN;
    }
    if flags & DF_IMM != 0 {
        n += IMM_LEN;
    }
    peek_type(head) == Some(PacketType::Data) && head.len() >= n
}

/// Decodes a datagram that must be one lone ACK (exactly [`ACK_LEN`] bytes; a bundle
/// of several is [`decode_acks`]'s).
#[inline]
pub fn decode_ack_packet(buf: &[u8]) -> Result<AckHeader, DropReason> {
    let c = common(buf)?;
    if c.t != PacketType::Ack as u8 {
        return Err(DropReason::UnknownType);
    }
    if c.inc == 0 {
        return Err(DropReason::BadFlags);
    }
    if buf.len() < ACK_LEN {
        return Err(DropReason::Truncated);
    }
    if buf.len() != ACK_LEN {
        return Err(DropReason::LengthMismatch);
    }
    use field::ack::*;
    let flags = get_u8(buf, FLAGS)?;
    let nak_stream = get_u16(buf, NAK_STREAM)?;
    let named = flags & AF_MSG != 0;
    if flags & !(AF_RNR | AF_NAK | AF_INV | AF_MSG | AF_CLOSED) != 0
        || (flags & (AF_INV | AF_MSG) != 0 && flags & AF_NAK == 0)
        || (flags & AF_CLOSED != 0 && flags & (AF_NAK | AF_MSG | AF_INV) != AF_NAK | AF_MSG)
        || (!named && (nak_stream != 0 || c.psn != 0))
    {
        return Err(DropReason::BadFlags);
    }
    Ok(AckHeader {
        path: c.path,
        inc: c.inc,
        dst_conn: c.dst_conn,
        echo: c.stamp,
        token: c.token,
        cum: get_u32(buf, CUM)?,
        rate_hint: get_u32(buf, RATE_HINT)?,
        ce: get_u16(buf, CE)?,
        acked: get_u16(buf, ACKED)?,
        flags,
        rnr_timer: get_u8(buf, RNR_TIMER)?,
        rnr_psn: get_u32(buf, RNR_PSN)?,
        nak_stream,
        nak_msn: c.psn,
        sack: Sack::decode(&get(buf, SACK)?),
    })
}

/// Decodes a datagram that must be a PROBE (same validation as [`decode`]).
#[inline]
pub fn decode_probe_packet(buf: &[u8]) -> Result<ProbeHeader, DropReason> {
    let c = common(buf)?;
    if c.t != PacketType::Probe as u8 {
        return Err(DropReason::UnknownType);
    }
    if c.inc == 0 {
        return Err(DropReason::BadFlags);
    }
    if buf.len() < PROBE_LEN {
        return Err(DropReason::Truncated);
    }
    if buf.len() != PROBE_LEN {
        return Err(DropReason::LengthMismatch);
    }
    Ok(ProbeHeader {
        path: c.path,
        inc: c.inc,
        dst_conn: c.dst_conn,
        psn: c.psn,
        stamp: c.stamp,
        token: c.token,
        floor: get_u32(buf, field::probe::FLOOR)?,
    })
}

#[inline]
fn decode_data<'a>(buf: &'a [u8], c: &Common) -> Result<(DataHeader, &'a [u8]), DropReason> {
    let (h, payload) = decode_data_in(Bytes::from(buf), c)?;
    Ok((h, payload.head()))
}

/// [`decode_data`] of a datagram in pieces: the header is read from the first piece (a
/// header that does not lie whole in it reads as `Truncated`), the lengths are checked
/// against the whole.
#[inline]
fn decode_data_in<'a>(dg: Bytes<'a>, c: &Common) -> Result<(DataHeader, Bytes<'a>), DropReason> {
    let buf = dg.head();
    let total = dg.len();
    // Incarnation 0 is no connection's (checked right after the type, as for ACK and
    // PROBE).
    if c.inc == 0 {
        return Err(DropReason::BadFlags);
    }
    if total < DATA_LEN {
        return Err(DropReason::Truncated);
    }
    use field::data::*;
    let op_raw = get_u8(buf, OP)?;
    let op = Op::from_u8(op_raw).ok_or(DropReason::UnknownOp)?;
    let flags = get_u8(buf, FLAGS)?;
    if flags & !DF_KNOWN != 0 {
        return Err(DropReason::BadFlags);
    }
    let mut h = DataHeader {
        path: c.path,
        inc: c.inc,
        dst_conn: c.dst_conn,
        psn: c.psn,
        stamp: c.stamp,
        token: c.token,
        stream: get_u16(buf, STREAM)?,
        op: op_raw,
        flags,
        payload_len: get_u16(buf, PAYLOAD_LEN)?,
        tag: get_u16(buf, TAG)?,
        floor: get_u32(buf, FLOOR)?,
        ssn: get_u32(buf, SSN)?,
        msn: get_u32(buf, MSN)?,
        offset: get_u32(buf, OFFSET)?,
        msg_len: get_u32(buf, MSG_LEN)?,
        reth: Reth::default(),
        imm: 0,
    };
    let hl = h.header_len();
    if total < hl {
        return Err(DropReason::Truncated);
    }
    if total - hl != h.payload_len as usize {
        return Err(DropReason::LengthMismatch);
    }
    let mut ext = buf.get(DATA_LEN..).ok_or(DropReason::Truncated)?;
    if flags & DF_RETH != 0 {
        h.reth = Reth {
            va: get_u64(ext, field::reth::VA)?,
            rkey: get_u32(ext, field::reth::RKEY)?,
            len: get_u32(ext, field::reth::LEN)?,
        };
        ext = ext.get(RETH_LEN..).ok_or(DropReason::Truncated)?;
    }
    if flags & DF_IMM != 0 {
        h.imm = get_u32(ext, field::imm::IMM)?;
    }
    let end = h
        .offset
        .checked_add(h.payload_len as u32)
        .ok_or(DropReason::BadOffset)?;
    if end > h.msg_len {
        return Err(DropReason::BadOffset);
    }
    let first = h.offset == 0;
    let last = end == h.msg_len;
    if (flags & DF_FIRST != 0) != first || (flags & DF_LAST != 0) != last {
        return Err(DropReason::BadFlags);
    }
    if h.payload_len == 0 && h.msg_len != 0 {
        return Err(DropReason::BadOffset);
    }
    if op.needs_reth() != (flags & DF_RETH != 0) {
        return Err(DropReason::BadFlags);
    }
    if (op.has_imm() && last) != (flags & DF_IMM != 0) {
        return Err(DropReason::BadFlags);
    }
    if flags & DF_SE != 0 && !last {
        return Err(DropReason::BadFlags);
    }
    let payload = dg.skip(hl).ok_or(DropReason::Truncated)?;
    Ok((h, payload))
}

/// The common header's fields, to be written ([`put_common`]).
struct Head {
    t: PacketType,
    path: u8,
    inc: u16,
    conn: u32,
    psn: u32,
    stamp: u32,
    token: u32,
}

/// Writes the common header. The destination is 24 bits: a `conn` above that is not
/// written (`None`), so no caller can put a value on the wire that the receiver would
/// read back as another.
fn put_common(b: &mut [u8], h: Head) -> Option<()> {
    use field::common::*;
    let Head {
        t,
        path,
        inc,
        conn,
        psn,
        stamp,
        token,
    } = h;
    if conn > MAX_DST {
        return None;
    }
    *b.get_mut(VERSION)? = self::VERSION;
    *b.get_mut(TYPE)? = t as u8;
    *b.get_mut(PATH)? = path;
    // The destination as 4 bytes from byte 4 (its top byte 0), then the incarnation
    // over bytes 3-4: two stores.
    put(b, DST_CONN.start - 1..DST_CONN.end, conn.to_be_bytes())?;
    put(b, INC, inc.to_be_bytes())?;
    put(b, PSN, psn.to_be_bytes())?;
    put(b, STAMP, stamp.to_be_bytes())?;
    put(b, TOKEN, token.to_be_bytes())
}

// Field access. Every caller has checked the buffer's length against its header first;
// a field beyond the end is still not read as 0 (or written nowhere) but fails: `None`
// when encoding, `Truncated` when decoding.

/// Writes `v` to field `f` of `b` (`None` if `b` is too short or `f` is not `K` bytes).
#[inline]
fn put<const K: usize>(b: &mut [u8], f: Field, v: [u8; K]) -> Option<()> {
    let d: &mut [u8; K] = b.get_mut(f)?.try_into().ok()?;
    *d = v;
    Some(())
}

/// The bytes of field `f` of `b`.
#[inline]
fn get<const K: usize>(b: &[u8], f: Field) -> Result<[u8; K], DropReason> {
    b.get(f)
        .and_then(|s| s.try_into().ok())
        .ok_or(DropReason::Truncated)
}
#[inline]
fn get_u8(b: &[u8], at: usize) -> Result<u8, DropReason> {
    b.get(at).copied().ok_or(DropReason::Truncated)
}
#[inline]
fn get_u16(b: &[u8], f: Field) -> Result<u16, DropReason> {
    get(b, f).map(u16::from_be_bytes)
}
#[inline]
fn get_u32(b: &[u8], f: Field) -> Result<u32, DropReason> {
    get(b, f).map(u32::from_be_bytes)
}
#[inline]
fn get_u24(b: &[u8], f: Field) -> Result<u32, DropReason> {
    get::<3>(b, f).map(|[x, y, z]| u32::from_be_bytes([0, x, y, z]))
}
#[inline]
fn get_u64(b: &[u8], f: Field) -> Result<u64, DropReason> {
    get(b, f).map(u64::from_be_bytes)
}

/// Datagram flag: immediate data is valid.
pub const GF_IMM: u8 = 0x08;
/// Datagram flag: solicited event.
pub const GF_SE: u8 = 0x40;

/// A DATAGRAM packet's headers: the unreliable datagram service (verbs UD),
/// outside any connection. `dst_conn` of the common header is the
/// destination QPN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatagramHeader {
    /// Destination QPN.
    pub dst_qpn: u32,
    /// Source QPN.
    pub src_qpn: u32,
    /// Q_Key (IBTA 10.2.5) the receiver checks.
    pub qkey: u32,
    /// `GF_*` flags.
    pub flags: u8,
    /// Payload bytes following the headers.
    pub payload_len: u16,
    /// Immediate data, valid with `GF_IMM`.
    pub imm: u32,
    /// Sender timestamp (informational).
    pub stamp: u32,
}

impl DatagramHeader {
    /// Writes the headers to the start of `out`; returns their length, or
    /// `None` if `out` is too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        use field::datagram::*;
        let b = out.get_mut(..DATAGRAM_LEN)?;
        let head = Head {
            t: PacketType::Datagram,
            path: 0,
            inc: 0,
            conn: self.dst_qpn,
            psn: 0,
            stamp: self.stamp,
            token: 0,
        };
        put_common(b, head)?;
        put(b, SRC_QPN, self.src_qpn.to_be_bytes())?;
        put(b, QKEY, self.qkey.to_be_bytes())?;
        *b.get_mut(FLAGS)? = self.flags;
        *b.get_mut(RESERVED)? = 0;
        put(b, PAYLOAD_LEN, self.payload_len.to_be_bytes())?;
        put(b, IMM, self.imm.to_be_bytes())?;
        Some(DATAGRAM_LEN)
    }
}

/// Decodes a DATAGRAM packet: its headers and payload.
pub fn decode_datagram(buf: &[u8]) -> Result<(DatagramHeader, &[u8]), DropReason> {
    let c = common(buf)?;
    if c.t != PacketType::Datagram as u8 {
        return Err(DropReason::UnknownType);
    }
    if buf.len() < DATAGRAM_LEN {
        return Err(DropReason::Truncated);
    }
    use field::datagram::*;
    let flags = get_u8(buf, FLAGS)?;
    if c.shared
        || c.path != 0
        || c.inc != 0
        || c.psn != 0
        || c.token != 0
        || flags & !(GF_IMM | GF_SE) != 0
        || get_u8(buf, RESERVED)? != 0
    {
        return Err(DropReason::BadFlags);
    }
    let h = DatagramHeader {
        dst_qpn: c.dst_conn,
        src_qpn: get_u32(buf, SRC_QPN)?,
        qkey: get_u32(buf, QKEY)?,
        flags,
        payload_len: get_u16(buf, PAYLOAD_LEN)?,
        imm: get_u32(buf, IMM)?,
        stamp: c.stamp,
    };
    let payload = buf.get(DATAGRAM_LEN..).ok_or(DropReason::Truncated)?;
    if payload.len() != usize::from(h.payload_len) {
        return Err(DropReason::LengthMismatch);
    }
    Ok((h, payload))
}

#[cfg(test)]
mod datagram_tests {
    use super::*;

    #[test]
    fn datagram_round_trip_and_rejects() {
        let h = DatagramHeader {
            dst_qpn: 0x12_3456,
            src_qpn: 17,
            qkey: 0x1111_1111,
            flags: GF_IMM,
            payload_len: 3,
            imm: 0xdead_beef,
            stamp: 9,
        };
        let mut b = [0u8; DATAGRAM_LEN + 3];
        assert_eq!(h.encode(&mut b), Some(DATAGRAM_LEN));
        b[DATAGRAM_LEN..].copy_from_slice(b"abc");
        let (d, p) = decode_datagram(&b).unwrap();
        assert_eq!((d, p), (h, &b"abc"[..]));
        assert_eq!(peek_dst_conn(&b), Ok(0x12_3456));
        assert_eq!(
            decode_datagram(&b[..DATAGRAM_LEN + 2]),
            Err(DropReason::LengthMismatch)
        );
        assert_eq!(decode_datagram(&b[..20]), Err(DropReason::Truncated));
        let mut bad = b;
        bad[28] = 0x01;
        assert_eq!(decode_datagram(&bad), Err(DropReason::BadFlags));
        let mut bad = b;
        bad[1] = 1;
        assert_eq!(decode_datagram(&bad), Err(DropReason::UnknownType));
        // A DATAGRAM is no connection's: the shared bit is a reserved one here.
        let mut bad = b;
        set_shared(&mut bad, true).unwrap();
        assert_eq!(peek_type(&bad), Some(PacketType::Datagram));
        assert_eq!(decode_datagram(&bad), Err(DropReason::BadFlags));
    }
}
