//! The connection: sender and receiver halves of one RC QP pair, K paths, S streams and a
//! fixed pool of in-flight packet records. Sans-I/O: datagrams and time in, datagrams,
//! deadlines and completions out.

//!
//! The state is grouped by concern and so are the files: `tx` (sending data and probes,
//! path picking, pacing), `rx` (receiving data and probes), `ack` (processing ACKs and
//! sending them), `timers` (the timer table and what expires).

mod ack;
mod event;
mod rx;
mod timers;
mod tx;

use super::cc::{CcConfig, PathCc};
use super::ident::Ident;
use super::path::{PathRx, PathState, PathTx};
use super::stream::{StreamRx, StreamTx};
use super::time::Instant;
use super::wire::{Op, Reth};
use timers::{Timer, TimerTable};

pub use event::{Event, LossCause};

/// Largest number of paths a connection may have.
pub const MAX_PATHS: usize = 64;

/// Connection parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Our connection id (the peer puts it in `dst_conn`).
    pub local_conn: u32,
    /// The peer's connection id.
    pub peer_conn: u32,
    /// The key of the direction this end sends data in ([`Ident`]): the token of its
    /// DATA and PROBE packets (and of the ACKs it accepts) and its paths' first PSNs.
    pub tx_ident: Ident,
    /// The key of the direction the peer sends data in: the token of the DATA and
    /// PROBE packets this end accepts (and of its ACKs) and the first PSN it expects
    /// on each path.
    pub rx_ident: Ident,
    /// A second key the peer may send with, accepted only until the first DATA or
    /// PROBE is (then the connection keeps whichever key that packet carried): a
    /// verbs peer that never reaches RTS (a responder serving READs and atomics
    /// from RTR) knows no `sq_psn` and keys its data with its `rq_psn`, i.e. this
    /// end's `sq_psn` (Documentation/transport.rst, "Identity and threat model").
    /// Key 0 ([`Ident::DEFAULT`]): none.
    pub rx_alt: Ident,
    /// Number of paths in use, 1..=P (and at most 64).
    pub paths: u8,
    /// Payload bytes per full packet.
    pub mtu: u16,
    /// Source port of path 0; path i starts at `base_src_port + i`.
    pub base_src_port: u16,
    /// Bytes each packet costs on the wire below the MetaRoCE header (Ethernet, IP, UDP,
    /// preamble, gap), used for pacing.
    pub wire_overhead: u16,
    /// RTO before the first RTT sample, ns.
    pub init_rto_ns: u32,
    /// Smallest RTO, ns.
    pub min_rto_ns: u32,
    /// Largest RTO before backoff, ns.
    pub max_rto_ns: u32,
    /// Verbs `retry_cnt`: local ACK timeouts without progress tolerated before the
    /// connection fails with [`ConnError::RetryExceeded`] (IBTA 9.7.6.1.3). With
    /// `ack_timeout_ns` 0, path timeouts count instead, `retry_cnt` per path.
    pub retry_cnt: u8,
    /// Verbs local ACK timeout (IBTA 9.7.6.1.3: 4.096 us * 2^`timeout`), ns;
    /// `u64::MAX` never expires (verbs `timeout` 0). The path RTOs retransmit long
    /// before; this timer only measures the application's patience. It runs while
    /// any message is unacknowledged and restarts on progress (an ACK that
    /// acknowledges or reports received data, or an RNR report); each expiry is one
    /// retry, and the next expiry is one timeout
    /// after the previous one was *handled*, so a host that could not run for a
    /// while counts one retry, not all the timeouts its clock skipped. 0: no local
    /// ACK timer (the simulator's model): every path timeout is a retry.
    pub ack_timeout_ns: u64,
    /// Verbs `rnr_retry`: RNR refusals tolerated per packet (7 = unlimited).
    pub rnr_retry: u8,
    /// Consecutive probe timeouts before a path moves to a new source port.
    pub move_after: u8,
    /// Window cap from the peer's rate hint: `hint * min_rtt * headroom / 1024`.
    pub hint_headroom: u16,
    /// Pace data at the peer's hinted rate.
    pub pacing: bool,
    /// Pacing slack, µs (a u16: it fits this struct's padding): how far ahead of the
    /// pacing clock a sender may send, i.e. a burst allowance of that much sending time at
    /// the paced rate. 0 = strict spacing. A host whose timer resolves only ticks sets a
    /// tick or two (the most its timer fires late): with less, every pacing wait would
    /// cost a whole tick; the rate over that span is still the paced one.
    pub pacing_slack_us: u16,
    /// ACK after this many data packets on a path (1 = every packet).
    pub ack_every: u8,
    /// Longest an ACK is delayed, ns.
    pub ack_delay_ns: u32,
    /// Initial connection window (bytes of window charge); it then grows by the bytes
    /// acknowledged (doubling per round trip) until other limits bind.
    pub init_qwnd: u32,
    /// Congestion control.
    pub cc: CcConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Config {
    /// The defaults, usable in constants.
    pub const DEFAULT: Config = {
        Config {
            local_conn: 0,
            peer_conn: 0,
            tx_ident: Ident::DEFAULT,
            rx_ident: Ident::DEFAULT,
            rx_alt: Ident::DEFAULT,
            paths: 8,
            mtu: 4096,
            base_src_port: 49152,
            wire_overhead: 66,
            init_rto_ns: 1_000_000,
            min_rto_ns: 100_000,
            max_rto_ns: 100_000_000,
            retry_cnt: 7,
            ack_timeout_ns: 0,
            rnr_retry: 7,
            move_after: 1,
            hint_headroom: 1536,
            pacing: true,
            pacing_slack_us: 0,
            init_qwnd: 4160,
            ack_every: 1,
            ack_delay_ns: 2_000,
            cc: CcConfig::DEFAULT,
        }
    };
}

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
    /// Opaque tag carried in every packet of the message ([`super::wire::DataHeader::tag`]).
    pub tag: u16,
    /// Solicited event requested (`DF_SE` on the last packet).
    pub solicited: bool,
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
    /// Payload bytes.
    pub payload: &'a [u8],
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
    /// The application stopped the connection ([`Connection::abort`]).
    Aborted,
}

/// The application (verbs layer) seen from the core. Payload bytes never live in the core.
pub trait App {
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
    /// Places received bytes (idempotent: the same bytes may arrive again only after a
    /// retransmission raced an ACK, and are then not placed twice).
    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse>;
    /// Receiver: message `(stream, msn)` is whole and every earlier one is complete.
    fn complete(&mut self, stream: u16, msn: u32);
    /// Sender: message `(stream, msn)` is fully acknowledged, in order per stream.
    fn acked(&mut self, stream: u16, msn: u32);
    /// The connection failed.
    fn error(&mut self, e: ConnError);
    /// Something a host may trace happened ([`Event`]); by default nothing is done.
    fn event(&mut self, _e: Event) {}
}

/// What a transmitted datagram is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// An ACK for a path.
    Ack,
    /// A probe of a path being validated.
    Probe,
    /// A data packet.
    Data {
        /// Stream.
        stream: u16,
        /// Message.
        msn: u32,
        /// Offset in the message.
        offset: u32,
        /// Payload length.
        len: u16,
        /// PSN on the path.
        psn: u32,
        /// Whether this is a retransmission.
        retransmit: bool,
    },
}

/// A datagram written into the caller's buffer by [`Connection::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written (the UDP payload).
    pub len: usize,
    /// Path index.
    pub path: u8,
    /// UDP source port to use (ECMP entropy of the path).
    pub src_port: u16,
    /// Whether to mark the IP header ECT(0) (all data and probes).
    pub ect: bool,
    /// What it is.
    pub kind: TxKind,
}

/// What a received datagram did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxEvent {
    /// New data placed.
    Data,
    /// Data already received (counted once, not placed again).
    Duplicate,
    /// An ACK was processed.
    Ack,
    /// A probe was answered.
    Probe,
}

/// Connection state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Working.
    Open,
    /// Failed; only ACKs are still sent.
    Error(ConnError),
}

/// Per-connection counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Data packets sent, including retransmissions.
    pub data_tx: u32,
    /// Retransmissions.
    pub retx: u32,
    /// Path timeouts.
    pub timeouts: u16,
    /// Path moves to a new source port.
    pub moves: u16,
    /// Local ACK timeouts (verbs retries, [`Config::ack_timeout_ns`]).
    pub ack_timeouts: u32,
    /// Duplicate data packets received.
    pub dup_rx: u32,
    /// Data packets declared lost by a SACK gap (not by a timeout).
    pub sack_lost: u32,
    /// CE marks echoed to the sender in ACKs.
    pub ce_echoed: u32,
}

/// One in-flight (or awaiting retransmission) data packet: enough to rebuild it with the
/// application's help. 14 bytes: sequence numbers are kept as their low 16 bits and
/// rebuilt against the path floor / stream base (both within 256 / 128 of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    path: u8,
    /// Bits 0-3 stream, bit 4 last packet of its message, bits 5-7 RNR refusals.
    meta: u8,
    psn: u16,
    ssn: u16,
    msn: u16,
    len: u16,
    off_lo: u16,
    off_hi: u16,
}

impl Pkt {
    fn stream(&self) -> u8 {
        self.meta & 0x0f
    }
    fn last(&self) -> bool {
        self.meta & 0x10 != 0
    }
    fn rnr(&self) -> u8 {
        self.meta >> 5
    }
    fn bump_rnr(&mut self) {
        let r = (self.rnr() + 1).min(7);
        self.meta = (self.meta & 0x1f) | (r << 5);
    }
    fn offset(&self) -> u32 {
        u32::from(self.off_lo) | u32::from(self.off_hi) << 16
    }
}

/// A MetaRoCE connection with up to `P` paths, `S` streams and `N` in-flight packet records
/// (default 64; at most `64 * W`, `W` being the number of 64-bit mask words).
///
/// `Copy`: plain data (no references, no `Drop`), so a host may copy [`Connection::BLANK`]
/// into memory it allocated and [`Connection::reset`] it there, never holding a whole
/// connection on its stack (a kernel stack is 16 KiB; `Connection<64, ..>` is 9 KB).
#[derive(Clone, Copy, Debug)]
pub struct Connection<const P: usize, const W: usize, const S: usize, const N: usize = 64> {
    cfg: Config,
    state: ConnState,
    /// Sender state per path.
    tx: [PathTx; P],
    /// Receiver state per path.
    rx: [PathRx; P],
    /// The in-flight packet records.
    flight: Flight<P, W, N>,
    stx: [StreamTx; S],
    srx: [StreamRx; S],
    /// What the receiver owes the peer: ACKs, an RNR report, a NAK.
    reports: Reports,
    /// Connection-wide deadlines (the per-path RTO lives in [`PathTx::rto_at`]).
    timers: TimerTable,
    /// The last [`Connection::poll_transmit`] was held back by pacing: the pacing
    /// deadline ([`timers::Timer::Pacing`]) is one [`Connection::poll_timeout`] reports.
    paced: bool,
    /// Paths in the probing state (bit per path).
    probing: u64,
    // Rate-hint state. (Flat, not a struct: three u16 among u32s would pad a struct and
    // grow every connection by 8 bytes.)
    /// The peer's latest hint (1000 bytes/s units, 0 = none).
    peer_hint: u32,
    /// The hint this receiver returns on every ACK.
    local_hint: u32,
    /// Sender-side ECN trim of the hinted rate, 1/1024 units (1024 = the full hint).
    rate_scale: u16,
    /// CE marks and packets acknowledged in the current trim round.
    rate_ce: u16,
    rate_acked: u16,
    /// Wire stamp at which the current trim round ends.
    rate_round: u32,
    /// Smallest RTT sample over all paths, ns (0 = none yet): with the hint, the cap.
    min_rtt: u32,
    fair_epoch: u32,
    // Progress watch for the retry limits (`retry_cnt`, `ack_timeout_ns`).
    /// Path timeouts since acknowledged data last made progress (the model without
    /// a local ACK timer).
    stall: u16,
    /// Local ACK timer: when the next retry is counted ([`Instant::NEVER`]: idle).
    retry_at: Instant,
    /// Local ACK timeouts since the last progress.
    retries: u8,
    /// Round-robin cursors: the next path and stream to try.
    rr_path: u8,
    rr_stream: u8,
    stats: Stats,
}

/// The in-flight packet records: the pool, which path each record is on, and which
/// records are in use, awaiting retransmission or waiting out an RNR timer (bit per
/// record, `W` words).
#[derive(Clone, Copy, Debug)]
struct Flight<const P: usize, const W: usize, const N: usize> {
    pool: [Pkt; N],
    /// Records in flight on each path.
    members: [[u64; W]; P],
    busy: [u64; W],
    lost: [u64; W],
    rnr_wait: [u64; W],
    /// Bytes (window charge) in flight over all paths.
    inflight: u32,
    /// Start-up ramp: the most `inflight` may reach; it grows by the bytes acknowledged
    /// (at most doubling per round trip).
    ramp: u32,
}

/// A refusal the receiver reports in an ACK's RNR/NAK fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefusalKind {
    /// Receiver not ready ([`AF_RNR`](super::wire::AF_RNR)): retry after the RNR timer
    /// of this code.
    Rnr { timer: u8 },
    /// NAK, remote access error ([`AF_NAK`](super::wire::AF_NAK)).
    Access,
    /// NAK, invalid request ([`AF_INV`](super::wire::AF_INV)).
    Invalid,
}

/// A pending refusal report: the refused PSN on a path and what to tell the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Refusal {
    path: u8,
    kind: RefusalKind,
    psn: u32,
}

/// What the receiver has to tell the peer.
#[derive(Clone, Copy, Debug)]
struct Reports {
    /// Paths owing an ACK (bit per path).
    ack_pending: u64,
    /// The latest RNR refusal not yet reported.
    rnr: Option<Refusal>,
    /// The latest NAK not yet sent; on its path it goes before an RNR report.
    nak: Option<Refusal>,
}

impl<const P: usize, const W: usize, const S: usize, const N: usize> Connection<P, W, S, N> {
    /// Compile-time limits: at most 64 paths, 16 streams, 256 in-flight packets.
    const LIMITS: () = {
        assert!(P >= 1 && P <= MAX_PATHS, "1..=64 paths");
        assert!(S >= 1 && S <= 16, "1..=16 streams");
        assert!(W >= 1 && W <= 16, "1..=16 mask words");
        assert!(N >= 1 && N <= 64 * W, "1..=64*W in-flight packet records");
    };

    /// A blank connection (default configuration, no path in use), usable in constants:
    /// [`Connection::reset`] it before use.
    pub const BLANK: Self = Connection {
        cfg: Config::DEFAULT,
        state: ConnState::Open,
        tx: [PathTx::EMPTY; P],
        rx: [PathRx::EMPTY; P],
        flight: Flight {
            pool: [Pkt::EMPTY; N],
            members: [[0; W]; P],
            busy: [0; W],
            lost: [0; W],
            rnr_wait: [0; W],
            inflight: 0,
            ramp: 0,
        },
        stx: [StreamTx::EMPTY; S],
        srx: [StreamRx::EMPTY; S],
        reports: Reports {
            ack_pending: 0,
            rnr: None,
            nak: None,
        },
        timers: TimerTable::new(),
        paced: false,
        probing: 0,
        peer_hint: 0,
        local_hint: 0,
        rate_scale: 1024,
        rate_ce: 0,
        rate_acked: 0,
        rate_round: 0,
        min_rtt: 0,
        fair_epoch: 0,
        stall: 0,
        retry_at: Instant::NEVER,
        retries: 0,
        rr_path: 0,
        rr_stream: 0,
        stats: Stats::EMPTY,
    };

    /// A connection in the open state. `cfg.paths` is clamped to `1..=min(P, 64)`.
    pub fn new(cfg: Config) -> Self {
        let mut c = Self::BLANK;
        c.setup(cfg);
        c
    }

    /// Makes this connection what [`Connection::new`]`(cfg)` returns, in place: no
    /// connection-sized temporary (for hosts with small stacks; see the type's notes).
    pub fn reset(&mut self, cfg: Config) {
        let blank: &'static Self = &Self::BLANK;
        *self = *blank;
        self.setup(cfg);
    }

    /// The configuration-dependent part of [`Connection::new`], on a blank connection.
    fn setup(&mut self, mut cfg: Config) {
        #[allow(clippy::let_unit_value)]
        let () = Self::LIMITS;
        let maxp = P.clamp(1, MAX_PATHS) as u8;
        cfg.paths = cfg.paths.clamp(1, maxp);
        cfg.mtu = cfg.mtu.max(1);
        self.cfg = cfg;
        self.flight.ramp = cfg.init_qwnd;
        self.start_tx_seqs();
        self.start_rx_seqs();
        for (i, t) in self.tx.iter_mut().enumerate().take(usize::from(cfg.paths)) {
            t.state = PathState::Active;
            t.src_port = port_for(&cfg, i as u8, 0);
            t.rto_at = Instant::NEVER;
            t.cc = PathCc::new(&cfg.cc);
        }
    }

    /// Every path's first PSN and every stream's first SSN, from
    /// [`Config::tx_ident`].
    fn start_tx_seqs(&mut self) {
        let id = self.cfg.tx_ident;
        for (i, t) in self.tx.iter_mut().enumerate() {
            t.base_psn = id.isn(i as u8);
            t.next_psn = t.base_psn;
        }
        for (i, t) in self.stx.iter_mut().enumerate() {
            t.next_ssn = id.first_ssn(i as u8);
            t.acked_base = t.next_ssn;
        }
    }

    /// Every path's first expected PSN and every stream's first SSN, from
    /// [`Config::rx_ident`].
    fn start_rx_seqs(&mut self) {
        let id = self.cfg.rx_ident;
        for (i, r) in self.rx.iter_mut().enumerate() {
            r.cum = id.isn(i as u8);
        }
        for (i, r) in self.srx.iter_mut().enumerate() {
            r.cum = id.first_ssn(i as u8);
        }
    }

    /// Sets [`Config::rx_alt`] (verbs: at RTS, from `sq_psn`); ignored once a DATA
    /// or PROBE was accepted (a path or stream moved from where the key starts it).
    pub fn set_rx_alt(&mut self, id: Ident) {
        let key = self.cfg.rx_ident;
        let paths = self.rx.iter().enumerate();
        let untouched = paths
            .map(|(i, r)| r.cum == key.isn(i as u8) && r.sack.is_empty())
            .chain(
                self.srx
                    .iter()
                    .enumerate()
                    .map(|(i, r)| r.cum == key.first_ssn(i as u8) && r.got.is_empty()),
            )
            .all(|u| u);
        if untouched {
            self.cfg.rx_alt = id;
        }
    }

    /// The receiving key a DATA or PROBE carrying `token` is for (changes nothing): [`Config::rx_ident`], or [`Config::rx_alt`] while nothing
    /// was accepted yet (the first accepted packet clears it).
    pub(super) fn rx_key_for(&self, token: u32) -> Option<Ident> {
        if token == self.cfg.rx_ident.token() {
            return Some(self.cfg.rx_ident);
        }
        let alt = self.cfg.rx_alt;
        (alt != Ident::DEFAULT && token == alt.token()).then_some(alt)
    }

    /// Settles the receiving key on `id` (the first accepted DATA or PROBE carried
    /// it): if it is the alternative, the receive sequences start over from it
    /// (nothing was received under the other).
    pub(super) fn settle_rx_key(&mut self, id: Ident) {
        if id != self.cfg.rx_ident {
            self.cfg.rx_ident = id;
            self.start_rx_seqs();
        }
        self.cfg.rx_alt = Ident::DEFAULT;
    }

    /// Sets the key of the direction this end sends in ([`Config::tx_ident`]), which
    /// verbs completes only when the QP moves to RTS (`sq_psn`), after the connection
    /// exists. Refused (`false`) once anything was sent: the peer already knows the
    /// paths' PSNs.
    pub fn set_tx_ident(&mut self, id: Ident) -> bool {
        if self.stats.data_tx != 0 || self.tx.iter().any(|t| t.probe_stamp != 0) {
            return id == self.cfg.tx_ident;
        }
        self.cfg.tx_ident = id;
        self.start_tx_seqs();
        true
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Queues one more ACK on every path that has received data, so that a
    /// peer whose last ACK was lost hears it again; a verbs QP calls this as
    /// it is destroyed (its peer may still wait for that ACK).
    pub fn ack_all(&mut self) {
        let id = self.cfg.rx_ident;
        for (p, rx) in self.rx.iter().enumerate().take(MAX_PATHS) {
            if rx.cum != id.isn(p as u8) || !rx.sack.is_empty() {
                self.reports.ack_pending |= 1u64 << p;
            }
        }
    }

    /// Stops the connection at once: nothing more is sent, not even the ACKs already
    /// due, every datagram is dropped (`closed`), and [`App::error`] is not called. For a receiver that could not report what
    /// it received (its completion queue overflowed, IBTA class G): unacknowledged, the
    /// peer's packets time out at the sender.
    pub fn abort(&mut self) {
        self.reports.ack_pending = 0;
        self.timers.stop(Timer::DelayedAck);
        self.reports.nak = None;
        self.reports.rnr = None;
        if self.state == ConnState::Open {
            self.state = ConnState::Error(ConnError::Aborted);
        }
    }

    /// Sets the verbs retry limits (`retry_cnt`, `rnr_retry`, and the local ACK
    /// timeout [`Config::ack_timeout_ns`]), which verbs fixes only when the QP
    /// moves to RTS, after the connection exists.
    pub fn set_retry_limits(&mut self, retry_cnt: u8, rnr_retry: u8, ack_timeout_ns: u64) {
        self.cfg.retry_cnt = retry_cnt;
        self.cfg.rnr_retry = rnr_retry;
        self.cfg.ack_timeout_ns = ack_timeout_ns;
    }

    /// The local ACK timeout when one is set (not 0, not "never").
    pub(super) fn ack_timeout(&self) -> Option<u64> {
        let t = self.cfg.ack_timeout_ns;
        (t != 0 && t != u64::MAX).then_some(t)
    }

    /// Whether any message is unacknowledged (in flight, lost or waiting out RNR).
    pub(super) fn outstanding(&self) -> bool {
        self.flight.busy.iter().any(|&b| b != 0)
    }

    /// Progress for the retry limits: the peer answered. Restarts the local ACK
    /// timer while anything is still unacknowledged; `data`: data was acknowledged
    /// (the only progress the model without a local ACK timer counts).
    pub(super) fn progress(&mut self, now: Instant, data: bool) {
        if data {
            self.stall = 0;
        }
        self.retries = 0;
        self.retry_at = match self.ack_timeout() {
            Some(t) if self.outstanding() => now.add_nanos(t),
            _ => Instant::NEVER,
        };
    }

    /// Connection state.
    pub fn state(&self) -> ConnState {
        self.state
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Sender state of path `i`.
    pub fn path(&self, i: usize) -> Option<&PathTx> {
        self.tx.get(i)
    }

    /// DATA packets sent on path `i` (retransmissions included): how far its next
    /// PSN is from the first ([`Config::tx_ident`]).
    pub fn path_sent(&self, i: usize) -> u32 {
        let first = self.cfg.tx_ident.isn(i as u8);
        self.tx.get(i).map_or(0, |t| t.next_psn.wrapping_sub(first))
    }

    /// Bytes in flight over all paths.
    pub fn inflight(&self) -> u32 {
        self.flight.inflight
    }

    /// The connection window QWND: the sum of the active paths' windows, capped by the
    /// peer's rate hint times the minimum RTT.
    pub fn qwnd(&self) -> u32 {
        let sum = self
            .tx
            .iter()
            .filter(|t| t.state == PathState::Active)
            .fold(0u32, |a, t| a.saturating_add(t.cc.pwnd));
        match self.hint_cap() {
            Some(cap) => sum.min(cap),
            None => sum,
        }
    }

    /// The peer's latest rate hint (1000 bytes/s units, 0 = none).
    pub fn peer_hint(&self) -> u32 {
        self.peer_hint
    }

    /// The rate data is paced at, bytes/s: the peer's hint scaled by the sender's ECN
    /// reaction (0 = not paced).
    pub fn pacing_rate(&self) -> u64 {
        u64::from(self.peer_hint) * 1000 * u64::from(self.rate_scale) / 1024
    }

    /// Sets the fair-share rate hint this receiver returns on every ACK.
    pub fn set_rate_hint(&mut self, hint: u32) {
        self.local_hint = hint;
    }

    /// When the next data packet may go out: the pacing clock less the slack.
    pub(super) fn pacing_due(&self) -> Instant {
        let clock = self.timers.get(timers::Timer::Pacing).as_nanos();
        Instant(clock.saturating_sub(u64::from(self.cfg.pacing_slack_us) * 1000))
    }

    /// The hint this receiver returns on every ACK (1000 bytes/s units, 0 = none).
    pub fn rate_hint(&self) -> u32 {
        self.local_hint
    }

    /// The smallest RTT sample over all paths, ns (0 = none yet).
    pub fn min_rtt(&self) -> u32 {
        self.min_rtt
    }

    /// The epoch stamp a [`super::fair::FairShare`] keeps for this connection.
    pub fn fair_slot(&mut self) -> &mut u32 {
        &mut self.fair_epoch
    }

    /// Whether stream `s` has nothing in flight and nothing acknowledged pending.
    pub fn stream_idle(&self, s: usize) -> bool {
        self.stx
            .get(s)
            .map(|t| t.acked_base == t.next_ssn)
            .unwrap_or(true)
    }

    fn hint_cap(&self) -> Option<u32> {
        if self.peer_hint == 0 || self.min_rtt == 0 {
            return None;
        }
        // u64 only: the kernel provides no 128-bit division. hint is in 1000 B/s and
        // min_rtt in ns, so hint * min_rtt / 1e6 is bytes; saturation only means "no cap".
        let bytes = u64::from(self.peer_hint).saturating_mul(u64::from(self.min_rtt)) / 1_000_000;
        let cap = bytes.saturating_mul(u64::from(self.cfg.hint_headroom)) / 1024;
        let cap = cap.min(u64::from(u32::MAX)) as u32;
        Some(cap.max(u32::from(self.cfg.mtu)))
    }

    /// A path's RTO with its backoff. A path without an RTT sample yet (new, or
    /// moved to a new source port) borrows the largest base RTO of its sampled
    /// siblings, which crossed the same two hosts, and uses `init_rto_ns` only
    /// while no path has a sample.
    fn rto(&self, t: &PathTx) -> u64 {
        let (min, max) = (
            u64::from(self.cfg.min_rto_ns),
            u64::from(self.cfg.max_rto_ns),
        );
        let base = if t.srtt != 0 {
            t.base_rto(min, max, 0)
        } else {
            self.tx
                .iter()
                .take(usize::from(self.cfg.paths))
                .filter(|s| s.srtt != 0)
                .map(|s| s.base_rto(min, max, 0))
                .max()
                .unwrap_or(u64::from(self.cfg.init_rto_ns))
        };
        base.saturating_mul(1u64 << t.backoff.min(16))
    }
}

/// `i mod n` for `i < 2n` without a division.
#[inline]
fn wrap(i: usize, n: usize) -> usize {
    if i >= n {
        i - n
    } else {
        i
    }
}

/// Window charge of a packet: payload plus a fixed header allowance, so zero-length
/// messages still occupy the window.
fn charge(len: u16) -> u32 {
    u32::from(len) + 64
}

/// Source port of `path` after `moves` moves: `base_src_port + path` at first, then
/// scattered; always within the 16384-port quarter of the port space that holds
/// `base_src_port` (so a base in the dynamic range 49152-65535 keeps every port there).
fn port_for(cfg: &Config, path: u8, moves: u16) -> u16 {
    let off = u32::from(path) + u32::from(moves) * 0x9e37;
    let base = cfg.base_src_port;
    (base & 0xc000) | ((u32::from(base & 0x3fff) + off) % 16384) as u16
}

impl Stats {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: Stats = Stats {
        data_tx: 0,
        retx: 0,
        timeouts: 0,
        ack_timeouts: 0,
        moves: 0,
        dup_rx: 0,
        sack_lost: 0,
        ce_echoed: 0,
    };
}

impl Default for Stats {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Pkt {
    /// The initial (all-zero) value, usable in constants.
    const EMPTY: Pkt = Pkt {
        path: 0,
        meta: 0,
        psn: 0,
        ssn: 0,
        msn: 0,
        len: 0,
        off_lo: 0,
        off_hi: 0,
    };
}

impl Default for Pkt {
    fn default() -> Self {
        Self::EMPTY
    }
}
