//! The application (verbs layer) as the connection sees it: the [`App`] trait it
//! implements and the types that cross it (messages, placements, refusals, errors).

use super::super::bytes::Bytes;
use super::super::ident::Ident;
use super::super::stream::Stream;
use super::super::wire::{DropReason, Op, Reth};
use super::members::{MemberOut, MemberRx};
use super::Event;

/// Description of a message the application (verbs layer) has queued on a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgInfo {
    /// Verbs op.
    pub op: Op,
    /// Length in bytes.
    pub len: u32,
    /// Remote buffer, carried when `op.needs_reth()`.
    pub reth: Reth,
    /// Immediate data, carried when `op.has_imm()`.
    pub imm: u32,
    /// Opaque tag carried in every packet of the message ([`super::super::wire::DataHeader::tag`]).
    pub tag: u16,
    /// Solicited event requested (`DF_SE` on the last packet).
    pub solicited: bool,
    /// Largest payload per packet of this message, bytes; 0 (or more than
    /// [`super::Config::mtu`]): the connection's. On a shared connection each member
    /// QP has its own verbs path MTU (IBTA 9.7.5.1.3: a request packet carries at most
    /// the PMTU), while the connection's `mtu` bounds what it accepts.
    pub mtu: u16,
}

/// Where received bytes go; handed to [`App::place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement<'a> {
    /// Stream.
    pub stream: u16,
    /// Message sequence number in the stream.
    pub msn: u32,
    /// Offset of `payload` in the message.
    pub offset: u32,
    /// Message length.
    pub msg_len: u32,
    /// Verbs op.
    pub op: Op,
    /// Remote buffer, if the packet carried one.
    pub reth: Option<Reth>,
    /// Immediate data, if the packet carried it.
    pub imm: Option<u32>,
    /// The message's tag.
    pub tag: u16,
    /// The packet is the last of a message that asked for a solicited event.
    pub solicited: bool,
    /// Payload bytes (in the pieces the host received them in, [`Bytes`]).
    pub payload: Bytes<'a>,
}

/// Receiver-not-ready: the application cannot take this packet yet; the value is the 5-bit
/// RNR timer code of IBTA 9.7.5.2.8 table 45 (the QP's `min_rnr_timer`), which the
/// sender waits for before it retries ([`rnr_timer_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rnr(pub u8);

/// The RNR NAK timer of IBTA 9.7.5.2.8 table 45: how long a sender waits after an RNR NAK
/// carrying `code` (5 bits; higher bits ignored), in nanoseconds. Code 0 is the longest
/// (655.36 ms); codes 1-31 run from 0.01 ms to 491.52 ms.
pub fn rnr_timer_ns(code: u8) -> u64 {
    /// Table 45 in units of 10 µs, by code.
    const TABLE: [u32; 32] = [
        65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
        1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
    ];
    let units = TABLE.get(usize::from(code & 0x1f)).copied().unwrap_or(1);
    u64::from(units) * 10_000
}

/// Why the application cannot supply a message's bytes ([`App::payload`]). The packet is
/// not sent and the connection fails with [`ConnError::LocalProtection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// A buffer of the application's own request (bad key, access right or bounds, or
    /// memory deregistered since it was posted): only this side fails.
    Local,
    /// Memory a response reads on the peer's behalf (an RDMA READ's source) is no longer
    /// accessible: the peer is also NAKed (remote access error), as a responder does for a
    /// request it can no longer serve.
    Remote,
}

/// Why the application refuses a received packet ([`App::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refuse {
    /// Not yet (no receive posted): the sender retries after the timer.
    Rnr(Rnr),
    /// Never (bad key, range or access right): the receiver NAKs and the
    /// sender's connection fails with [`ConnError::RemoteAccess`].
    Access,
    /// Never (the request cannot be carried out, e.g. a SEND longer than the
    /// receive it consumes): the receiver NAKs and the sender's connection
    /// fails with [`ConnError::RemoteInvalid`].
    Invalid,
    /// Never, but an earlier message of the stream is not complete yet: the packet is
    /// dropped without a report (the sender resends it); the application refuses it
    /// with [`Refuse::Access`] or [`Refuse::Invalid`] once the earlier messages are
    /// complete, so that the NAK acknowledges them (IBTA 9.7.5.2.4).
    Held,
    /// Never again: the stream's owner takes no packet any more (a QP of a shared
    /// connection in the error state). Reported at once ([`AF_CLOSED`]); the sender
    /// fails that stream alone with [`ConnError::RemoteClosed`].
    ///
    /// [`AF_CLOSED`]: super::super::wire::AF_CLOSED
    Closed,
}

impl From<Rnr> for Refuse {
    fn from(r: Rnr) -> Self {
        Refuse::Rnr(r)
    }
}

/// Connection errors reported to the application (the QP goes to the error state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnError {
    /// Too many timeouts without progress (`retry_cnt`).
    RetryExceeded,
    /// Too many RNR refusals of one packet (`rnr_retry`).
    RnrRetryExceeded,
    /// The application no longer describes a message that is still in flight.
    MessageVanished,
    /// The peer refused a packet (NAK: remote access error).
    RemoteAccess,
    /// The peer refused a packet (NAK: invalid request).
    RemoteInvalid,
    /// The application could not supply a packet's bytes ([`Unreadable`]).
    LocalProtection,
    /// The application stopped the connection ([`super::Connection::abort`]).
    Aborted,
    /// The peer closed the stream ([`Refuse::Closed`]: its QP is in the error state).
    RemoteClosed,
}

/// What the failure of one stream takes down ([`App::stream_error`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The whole connection (every stream: one QP's connection).
    Connection,
    /// Streams `first..first + n` (a QP's two, on a connection that QPs share); the
    /// connection closes them ([`super::Connection::close_streams`]) and carries on.
    Streams {
        /// The first of them.
        first: u16,
        /// How many.
        n: u16,
    },
}

/// The application (verbs layer) seen from the core. Payload bytes never live in the core,
/// and neither do the streams: the application holds each stream's state
/// ([`Stream`], 104 bytes) with the stream's owner (a QP), and lends it for each call
/// ([`App::stream`]), so many streams cost the connection nothing
/// (Documentation/transport.rst, "Streams").
pub trait App {
    /// Stream `s`'s state, if `s` is a stream of this connection (else the packet or
    /// report naming it is dropped, [`super::super::wire::DropReason::StreamOutOfRange`]).
    /// A host starts each stream with [`Stream::start`] from the connection's keys
    /// ([`super::Config::tx_ident`], [`super::Config::rx_ident`]).
    fn stream(&mut self, s: u16) -> Option<&mut Stream>;
    /// Sender: a stream to take the next new packet from, with its next message (at its
    /// `tx_msn`, as [`App::message`] describes it): one whose window has room
    /// ([`super::super::stream::StreamTx::can_send`]) and whose next message is posted;
    /// `None` if none. The application decides the order (round robin:
    /// [`super::super::stream::StreamTable::next_ready`]).
    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)>;
    /// Receiver: the receiving key became `id` (the first accepted packet carried the
    /// alternative key, [`super::Config::rx_alt`]): every stream's receiving half starts
    /// over from it ([`Stream::restart_rx`]; nothing was received under the old key).
    fn restart_rx(&mut self, id: Ident);
    /// The message `msn` queued on `stream`, if it has been posted.
    fn message(&mut self, stream: u16, msn: u32) -> Option<MsgInfo>;
    /// Copies bytes `[offset, offset + dst.len())` of message `(stream, msn)` into `dst`.
    /// An error sends nothing (never a packet of made-up bytes) and fails the connection.
    fn payload(
        &mut self,
        stream: u16,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), Unreadable>;
    /// Receiver: whether stream `s` carries messages of `op`. Asked of a DATA packet
    /// right after its stream ([`App::stream`]), before anything changes; a packet of
    /// an op its stream does not carry is dropped ([`DropReason::UnknownOp`]). By
    /// default every op (a stream's ops are its owner's affair); an RC QP's stream 0
    /// carries its requests only and its stream 1 the responses only
    /// (Documentation/transport.rst, C10: [`crate::rc::carries`]).
    fn carries(&mut self, _s: u16, _op: Op) -> bool {
        true
    }
    /// Places received bytes (idempotent: the same bytes may arrive again only after a
    /// retransmission raced an ACK, and are then not placed twice).
    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse>;
    /// Receiver: message `(stream, msn)` is whole and every earlier one is complete.
    fn complete(&mut self, stream: u16, msn: u32);
    /// Receiver, shared connections: whether the completion [`App::complete`] just
    /// reported on `stream` was lost (its QP's completion queue was full: IBTA 11.4.2.1
    /// class G; the QP enters the error state). The message must then not count as
    /// done at the sender: the connection NAKs it `CLOSED` instead of letting its ACK
    /// stand for it (a connection of one pair stops acknowledging altogether,
    /// [`super::Connection::abort`]). By default never.
    fn completion_lost(&mut self, _stream: u16) -> bool {
        false
    }
    /// Sender, shared connections: the verbs retry limits of the QP that sends on
    /// `stream`, `(retry_cnt, rnr_retry)` (IBTA 9.7.6.1.3, 9.7.5.2.8; `rnr_retry` 7:
    /// unlimited), where they are its own: each stream fails by its own QP's counts.
    /// `None` (the default): the connection's ([`super::Config::retry_cnt`],
    /// [`super::Config::rnr_retry`]). The local ACK timer's period stays the
    /// connection's.
    fn stream_retry_limits(&mut self, _stream: u16) -> Option<(u8, u8)> {
        None
    }
    /// Sender: the first stream numbered `from` or above whose requests await a
    /// response from the peer (an RDMA READ or atomic request taken as a message whose
    /// response is not yet whole; [`crate::rc::REQ`] of an RC QP), `None` if none. The
    /// local ACK timer runs while any stream does, as it runs while any packet is
    /// unacknowledged (IBTA 9.7.6.1.3: the requester's timer covers a READ or atomic
    /// until its response arrives), so a response that stops coming fails its request
    /// with *retry exceeded* instead of leaving it outstanding for ever
    /// (Documentation/transport.rst, "Retries are each stream's"). Asked once per
    /// timer tick and when the peer answers; by default none.
    fn awaiting(&mut self, _from: u16) -> Option<u16> {
        None
    }
    /// Sender: message `(stream, msn)` is fully acknowledged, in order per stream.
    fn acked(&mut self, stream: u16, msn: u32);
    /// Receiver: whether message `(stream, msn)`, the stream's next to complete, is
    /// refused for good and its NAK due now (a refusal held so far, [`Refuse::Held`]);
    /// by default never.
    fn refusal(&mut self, _stream: u16, _msn: u32) -> Option<Refuse> {
        None
    }
    /// Sender: the peer refused message `(stream, msn)` for good (a NAK naming it, `e`
    /// [`ConnError::RemoteAccess`] or [`ConnError::RemoteInvalid`]); every earlier
    /// message of the stream is complete at the peer, acknowledged or not. Called just
    /// before [`App::error`]; by default nothing is done.
    fn refused(&mut self, _stream: u16, _msn: u32, _e: ConnError) {}
    /// Stream `s` failed with `e` (a NAK naming one of its messages, after
    /// [`App::refused`]; its RNR retries spent; its message gone or its bytes
    /// unreadable): what that takes down. By default the whole connection, which then
    /// fails ([`App::error`]); an application whose QPs share the connection fails the
    /// QP that owns `s` and returns its streams.
    fn stream_error(&mut self, _s: u16, _e: ConnError) -> Scope {
        Scope::Connection
    }
    /// The connection failed: every stream with it.
    fn error(&mut self, e: ConnError);
    /// Something a host may trace happened ([`Event`]); by default nothing is done.
    fn event(&mut self, _e: Event) {}

    // Shared connections only ([`super::Config::shared`]; Documentation/transport.rst,
    // "Shared connections"): the members, the QP pairs whose streams the connection
    // carries. A connection of one pair never calls these.

    /// Receiver: the member a DATA or PROBE addressed to `dst` (this end's QPN of the
    /// pair) with `token` is for: [`DropReason::WrongConnection`] if `dst` is no member,
    /// [`DropReason::BadToken`] if `token` is not the pair's receiving token.
    fn member_rx(&mut self, _dst: u32, _token: u32) -> Result<MemberRx, DropReason> {
        Err(DropReason::WrongConnection)
    }
    /// Receiver: a DATA or PROBE of member `id` passed every check (it is no longer
    /// fresh, [`MemberRx::fresh`]).
    fn member_accepted(&mut self, _id: u16) {}
    /// Sender: the member an ACK addressed to `dst` is for, and the token of its
    /// sending direction (the ACK must carry it).
    fn member_tx(&mut self, _dst: u32) -> Option<(u16, u32)> {
        None
    }
    /// Where member `id`'s datagrams go; `None` if it left. For an ACK of a member that
    /// left, any member will do (the connection asks [`App::any_member`]).
    fn member_out(&mut self, _id: u16) -> Option<MemberOut> {
        None
    }
    /// Some member that is still there (for a PROBE, or an ACK whose member left).
    fn any_member(&mut self) -> Option<u16> {
        None
    }
    /// Receiver: the connection's stream of member `id`'s wire stream `wire`.
    fn stream_in(&mut self, _id: u16, _wire: u16) -> Option<u16> {
        None
    }
    /// Sender: the member and wire stream of the connection's stream `s`.
    fn stream_out(&mut self, _s: u16) -> Option<(u16, u16)> {
        None
    }
}
