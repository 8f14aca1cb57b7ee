//! The connection: sender and receiver halves of one RC QP pair, K paths, S streams and a
//! fixed pool of in-flight packet records. Sans-I/O: datagrams and time in, datagrams,
//! deadlines and completions out.

use super::cc::{CcConfig, PathCc};
use super::path::{PathRx, PathState, PathTx};
use super::sack::{seq_lt, SACK_BITS};
use super::stream::{RxVerdict, StreamRx, StreamTx};
use super::time::Instant;
use super::wire::{
    decode, decode_ack_packet, decode_data_packet, decode_probe_packet, AckHeader, DataHeader,
    DropReason, Op, ProbeHeader, Reth, AF_INV, AF_NAK, AF_RNR, DF_ACKREQ, DF_FIRST, DF_IMM,
    DF_LAST, DF_RETH, DF_RETX, DF_SE, MAX_DATA_HEADER,
};

/// Largest number of paths a connection may have.
pub const MAX_PATHS: usize = 64;

/// Connection parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Our connection id (the peer puts it in `dst_conn`).
    pub local_conn: u32,
    /// The peer's connection id.
    pub peer_conn: u32,
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
    /// Verbs `retry_cnt`: consecutive path timeouts without progress tolerated, per path.
    pub retry_cnt: u8,
    /// Verbs local ACK timeout (IBTA 9.7.6.1.3: 4.096 us * 2^`timeout`) times
    /// `retry_cnt`, in ns: the connection fails on timeouts only once no
    /// progress was made for this long as well (0: the count alone decides).
    /// The transport retransmits long before; this is the application's
    /// patience, which IBTA expresses as `timeout` and `retry_cnt`.
    pub give_up_ns: u64,
    /// Verbs `rnr_retry`: RNR refusals tolerated per packet (7 = unlimited).
    pub rnr_retry: u8,
    /// Consecutive probe timeouts before a path moves to a new source port.
    pub move_after: u8,
    /// Window cap from the peer's rate hint: `hint * min_rtt * headroom / 1024`.
    pub hint_headroom: u16,
    /// Pace data at the peer's hinted rate.
    pub pacing: bool,
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
        Config {
            local_conn: 0,
            peer_conn: 0,
            paths: 8,
            mtu: 4096,
            base_src_port: 49152,
            wire_overhead: 66,
            init_rto_ns: 1_000_000,
            min_rto_ns: 100_000,
            max_rto_ns: 100_000_000,
            retry_cnt: 7,
            give_up_ns: 0,
            rnr_retry: 7,
            move_after: 1,
            hint_headroom: 1536,
            pacing: true,
            init_qwnd: 4160,
            ack_every: 1,
            ack_delay_ns: 2_000,
            cc: CcConfig::default(),
        }
    }
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
    /// Opaque tag carried in every packet of the message ([`DataHeader::tag`]).
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Data packets sent, including retransmissions.
    pub data_tx: u32,
    /// Retransmissions.
    pub retx: u32,
    /// Path timeouts.
    pub timeouts: u16,
    /// Path moves to a new source port.
    pub moves: u16,
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
#[derive(Clone, Debug)]
pub struct Connection<const P: usize, const W: usize, const S: usize, const N: usize = 64> {
    cfg: Config,
    state: ConnState,
    tx: [PathTx; P],
    rx: [PathRx; P],
    members: [[u64; W]; P],
    pool: [Pkt; N],
    busy: [u64; W],
    lost: [u64; W],
    rnr_wait: [u64; W],
    stx: [StreamTx; S],
    srx: [StreamRx; S],
    /// Pending RNR report: path (0xff = none), PSN and timer.
    rnr_path: u8,
    rnr_timer: u8,
    rnr_psn: u32,
    /// Pending NAK: path (0xff = none) and the refused PSN.
    nak_path: u8,
    nak_psn: u32,
    /// The pending NAK is for an invalid request ([`AF_INV`]).
    nak_inv: bool,
    ack_pending: u64,
    /// Delayed-ACK deadline.
    ack_at: Instant,
    /// Paths in the probing state (bit per path).
    probing: u64,
    next_send: Instant,
    rnr_until: Instant,
    inflight: u32,
    ramp: u32,
    /// Sender-side ECN trim of the hinted rate, 1/1024 units (1024 = the full hint).
    rate_scale: u16,
    rate_ce: u16,
    rate_acked: u16,
    rate_round: u32,
    peer_hint: u32,
    local_hint: u32,
    min_rtt: u32,
    fair_epoch: u32,
    stall: u16,
    /// When acknowledged data last made progress (or the connection began).
    progress_at: Instant,
    rr_path: u8,
    rr_stream: u8,
    paced: bool,
    stats: Stats,
}

impl<const P: usize, const W: usize, const S: usize, const N: usize> Connection<P, W, S, N> {
    /// Compile-time limits: at most 64 paths, 16 streams, 256 in-flight packets.
    const LIMITS: () = {
        assert!(P >= 1 && P <= MAX_PATHS, "1..=64 paths");
        assert!(S >= 1 && S <= 16, "1..=16 streams");
        assert!(W >= 1 && W <= 16, "1..=16 mask words");
        assert!(N >= 1 && N <= 64 * W, "1..=64*W in-flight packet records");
    };

    /// A connection in the open state. `cfg.paths` is clamped to `1..=min(P, 64)`.
    pub fn new(mut cfg: Config) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::LIMITS;
        let maxp = P.clamp(1, MAX_PATHS) as u8;
        cfg.paths = cfg.paths.clamp(1, maxp);
        cfg.mtu = cfg.mtu.max(1);
        let mut c = Connection {
            cfg,
            state: ConnState::Open,
            tx: [PathTx::default(); P],
            rx: [PathRx::default(); P],
            members: [[0; W]; P],
            pool: [Pkt::default(); N],
            busy: [0; W],
            lost: [0; W],
            rnr_wait: [0; W],
            stx: [StreamTx::default(); S],
            srx: [StreamRx::default(); S],
            rnr_path: 0xff,
            rnr_timer: 0,
            rnr_psn: 0,
            nak_path: 0xff,
            nak_psn: 0,
            nak_inv: false,
            ack_pending: 0,
            ack_at: Instant::NEVER,
            probing: 0,
            next_send: Instant::ZERO,
            rnr_until: Instant::NEVER,
            inflight: 0,
            ramp: cfg.init_qwnd,
            rate_scale: 1024,
            rate_ce: 0,
            rate_acked: 0,
            rate_round: 0,
            peer_hint: 0,
            local_hint: 0,
            min_rtt: 0,
            fair_epoch: 0,
            stall: 0,
            progress_at: Instant::NEVER,
            rr_path: 0,
            rr_stream: 0,
            paced: false,
            stats: Stats::default(),
        };
        for (i, t) in c.tx.iter_mut().enumerate().take(usize::from(cfg.paths)) {
            t.state = PathState::Active;
            t.src_port = port_for(&cfg, i as u8, 0);
            t.rto_at = Instant::NEVER;
            t.cc = PathCc::new(&cfg.cc);
        }
        c
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Queues one more ACK on every path that has received data, so that a
    /// peer whose last ACK was lost hears it again; a verbs QP calls this as
    /// it is destroyed (its peer may still wait for that ACK).
    pub fn ack_all(&mut self) {
        for (p, rx) in self
            .rx
            .iter()
            .enumerate()
            .take(usize::from(self.cfg.paths).min(MAX_PATHS))
        {
            if rx.cum != 0 || !rx.sack.is_empty() {
                self.ack_pending |= 1u64 << p;
            }
        }
    }

    /// Stops the connection at once: nothing more is sent, not even the ACKs already
    /// due, every datagram is dropped (`closed`), and [`App::error`] is not called. For a receiver that could not report what
    /// it received (its completion queue overflowed, IBTA class G): unacknowledged, the
    /// peer's packets time out at the sender.
    pub fn abort(&mut self) {
        self.ack_pending = 0;
        self.ack_at = Instant::NEVER;
        self.nak_path = 0xff;
        self.rnr_path = 0xff;
        if self.state == ConnState::Open {
            self.state = ConnState::Error(ConnError::Aborted);
        }
    }

    /// Sets the verbs retry limits (`retry_cnt`, `rnr_retry`, and the
    /// patience [`Config::give_up_ns`]), which verbs fixes only when the QP
    /// moves to RTS, after the connection exists.
    pub fn set_retry_limits(&mut self, retry_cnt: u8, rnr_retry: u8, give_up_ns: u64) {
        self.cfg.retry_cnt = retry_cnt;
        self.cfg.rnr_retry = rnr_retry;
        self.cfg.give_up_ns = give_up_ns;
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

    /// Bytes in flight over all paths.
    pub fn inflight(&self) -> u32 {
        self.inflight
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

    fn rto(&self, t: &PathTx) -> u64 {
        let base = t.base_rto(
            u64::from(self.cfg.min_rto_ns),
            u64::from(self.cfg.max_rto_ns),
            u64::from(self.cfg.init_rto_ns),
        );
        base.saturating_mul(1u64 << t.backoff.min(16))
    }

    /// The next instant at which [`Connection::handle_timeout`] (or, for pacing,
    /// [`Connection::poll_transmit`]) must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.rnr_until.min(self.ack_at);
        for p in self.tx.iter().take(usize::from(self.cfg.paths)) {
            t = t.min(p.rto_at);
        }
        if self.paced {
            t = t.min(self.next_send);
        }
        if t == Instant::NEVER {
            None
        } else {
            Some(t)
        }
    }

    /// Processes expired timers.
    pub fn handle_timeout<A: App>(&mut self, now: Instant, app: &mut A) {
        if self.ack_at <= now {
            self.ack_at = Instant::NEVER;
            for (p, rx) in self.rx.iter().enumerate().take(MAX_PATHS) {
                if rx.acked > 0 {
                    self.ack_pending |= 1u64 << p;
                }
            }
        }
        if self.rnr_until <= now {
            for w in 0..W {
                let r = self.rnr_wait.get(w).copied().unwrap_or(0);
                if let Some(l) = self.lost.get_mut(w) {
                    *l |= r;
                }
                if let Some(r) = self.rnr_wait.get_mut(w) {
                    *r = 0;
                }
            }
            self.rnr_until = Instant::NEVER;
        }
        for p in 0..usize::from(self.cfg.paths).min(P) {
            let due = self.tx.get(p).map(|t| t.rto_at <= now).unwrap_or(false);
            if due {
                self.path_timeout(now, p, app);
            }
        }
    }

    fn fail<A: App>(&mut self, e: ConnError, app: &mut A) {
        if self.state == ConnState::Open {
            self.state = ConnState::Error(e);
            app.error(e);
        }
    }

    fn path_timeout<A: App>(&mut self, now: Instant, p: usize, app: &mut A) {
        self.stats.timeouts = self.stats.timeouts.wrapping_add(1);
        self.abandon_path(p);
        self.stall = self.stall.saturating_add(1);
        if self.progress_at == Instant::NEVER {
            self.progress_at = now;
        }
        let limit = u16::from(self.cfg.retry_cnt).saturating_mul(u16::from(self.cfg.paths));
        let patient = now.nanos_since(self.progress_at) < self.cfg.give_up_ns;
        if self.stall > limit && !patient {
            self.fail(ConnError::RetryExceeded, app);
        }
        let move_after = self.cfg.move_after;
        let cfg = self.cfg;
        let mut moved = false;
        if let Some(t) = self.tx.get_mut(p) {
            t.timeouts = t.timeouts.saturating_add(1);
            t.backoff = t.backoff.saturating_add(1).min(6);
            match t.state {
                PathState::Active => {
                    // Congestion never causes a timeout alone: suspect failure, probe.
                    t.state = PathState::Probing;
                    self.probing |= 1u64 << (p % 64);
                }
                PathState::Probing => {
                    if t.timeouts > move_after {
                        t.moves = t.moves.wrapping_add(1);
                        t.src_port = port_for(&cfg, p as u8, t.moves);
                        t.timeouts = 0;
                        t.backoff = 0;
                        moved = true;
                    }
                }
                PathState::Unused => {}
            }
            t.probe_due = true;
            t.rto_at = Instant::NEVER;
        }
        if moved {
            self.stats.moves = self.stats.moves.wrapping_add(1);
        }
    }

    /// Moves every in-flight packet of path `p` to the retransmission queue.
    fn abandon_path(&mut self, p: usize) {
        let Some(m) = self.members.get_mut(p) else {
            return;
        };
        let m = core::mem::replace(m, [0; W]);
        let mut freed = 0u32;
        for (w, mut bits) in m.into_iter().enumerate() {
            if let Some(l) = self.lost.get_mut(w) {
                *l |= bits;
            }
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(k) = self.pool.get(w * 64 + i) {
                    freed = freed.saturating_add(charge(k.len));
                }
            }
        }
        self.inflight = self.inflight.saturating_sub(freed);
        if let Some(t) = self.tx.get_mut(p) {
            t.inflight = 0;
            t.base_psn = t.next_psn;
        }
    }

    /// Processes one received datagram (the UDP payload). `ce` is whether the IP header
    /// carried ECN CE. Malformed or unacceptable packets return the reason to count.
    pub fn handle_packet<A: App>(
        &mut self,
        now: Instant,
        buf: &[u8],
        ce: bool,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        if self.state == ConnState::Error(ConnError::Aborted) {
            return Err(DropReason::Closed);
        }
        // Dispatch on the type byte so each header is decoded in place (same validation
        // and drop reasons as `wire::decode`).
        match buf.get(1).copied() {
            Some(1) => {
                let (h, payload) = decode_data_packet(buf)?;
                self.on_data(now, &h, payload, ce, app)
            }
            Some(2) => {
                let a = decode_ack_packet(buf)?;
                self.on_ack(now, &a, app)
            }
            Some(3) => {
                let pr = decode_probe_packet(buf)?;
                self.on_probe(&pr)
            }
            _ => match decode(buf) {
                Err(e) => Err(e),
                Ok(_) => Err(DropReason::UnknownType),
            },
        }
    }

    fn rx_path_check(&self, conn: u32, path: u8) -> Result<usize, DropReason> {
        if conn != self.cfg.local_conn {
            return Err(DropReason::WrongConnection);
        }
        let p = usize::from(path);
        if p >= usize::from(self.cfg.paths) || p >= P {
            return Err(DropReason::BadPath);
        }
        Ok(p)
    }

    fn on_probe(&mut self, h: &ProbeHeader) -> Result<RxEvent, DropReason> {
        let p = self.rx_path_check(h.dst_conn, h.path)?;
        if seq_lt(h.psn, h.floor) {
            return Err(DropReason::PsnOutOfWindow);
        }
        let rx = self.rx.get_mut(p).ok_or(DropReason::BadPath)?;
        rx.apply_floor(h.floor);
        rx.echo = h.stamp;
        self.ack_pending |= 1u64 << p;
        Ok(RxEvent::Probe)
    }

    fn on_data<A: App>(
        &mut self,
        now: Instant,
        h: &DataHeader,
        payload: &[u8],
        ce: bool,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let p = self.rx_path_check(h.dst_conn, h.path)?;
        if h.payload_len > self.cfg.mtu {
            return Err(DropReason::BadOffset);
        }
        let s = usize::from(h.stream);
        if s >= S {
            return Err(DropReason::StreamOutOfRange);
        }
        if seq_lt(h.psn, h.floor) {
            return Err(DropReason::PsnOutOfWindow);
        }
        let rx = self.rx.get_mut(p).ok_or(DropReason::BadPath)?;
        let cum = if seq_lt(rx.cum, h.floor) {
            h.floor
        } else {
            rx.cum
        };
        if h.psn.wrapping_sub(cum) > SACK_BITS && !seq_lt(h.psn, cum) {
            return Err(DropReason::PsnOutOfWindow);
        }
        let srx = self.srx.get_mut(s).ok_or(DropReason::StreamOutOfRange)?;
        let verdict = srx.check(h.ssn);
        if verdict == RxVerdict::OutOfWindow {
            return Err(DropReason::SsnOutOfWindow);
        }
        rx.apply_floor(h.floor);
        rx.echo = h.stamp;
        let in_order = h.psn == rx.cum;
        let op = Op::from_u8(h.op).unwrap_or(Op::Send);
        let last = h.flags & DF_LAST != 0;
        let ev = if verdict == RxVerdict::New {
            let pl = Placement {
                stream: h.stream,
                msn: h.msn,
                offset: h.offset,
                msg_len: h.msg_len,
                op,
                reth: (h.flags & DF_RETH != 0).then_some(h.reth),
                imm: (h.flags & DF_IMM != 0).then_some(h.imm),
                tag: h.tag,
                solicited: h.flags & DF_SE != 0,
                payload,
            };
            match app.place(&pl) {
                Ok(()) => {}
                Err(Refuse::Rnr(Rnr(t))) => {
                    self.ack_pending |= 1u64 << p;
                    self.rnr_path = p as u8;
                    self.rnr_psn = h.psn;
                    self.rnr_timer = t;
                    return Err(DropReason::ReceiverNotReady);
                }
                Err(r @ (Refuse::Access | Refuse::Invalid)) => {
                    self.ack_pending |= 1u64 << p;
                    self.nak_path = p as u8;
                    self.nak_psn = h.psn;
                    self.nak_inv = r == Refuse::Invalid;
                    return Err(DropReason::Refused);
                }
            }
            let stream = h.stream;
            srx.accept(h.ssn, last, |msn| app.complete(stream, msn));
            RxEvent::Data
        } else {
            self.stats.dup_rx = self.stats.dup_rx.wrapping_add(1);
            RxEvent::Duplicate
        };
        rx.mark(h.psn);
        rx.acked = rx.acked.saturating_add(1);
        if ce {
            rx.ce = rx.ce.saturating_add(1);
        }
        // ACK at once on anything the sender must hear about quickly; otherwise every
        // `ack_every` packets of the path, or after `ack_delay_ns`.
        let urgent = rx.acked >= u16::from(self.cfg.ack_every)
            || last
            || ce
            || !in_order
            || ev == RxEvent::Duplicate
            || h.flags & DF_ACKREQ != 0;
        if urgent {
            self.ack_pending |= 1u64 << p;
        } else if self.ack_at == Instant::NEVER {
            self.ack_at = now.add_nanos(u64::from(self.cfg.ack_delay_ns));
        }
        Ok(ev)
    }

    fn on_ack<A: App>(
        &mut self,
        now: Instant,
        a: &AckHeader,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let p = self.rx_path_check(a.dst_conn, a.path)?;
        if let ConnState::Error(_) = self.state {
            return Err(DropReason::Closed);
        }
        let cfg = self.cfg;
        let (base, next) = match self.tx.get(p) {
            Some(t) => (t.base_psn, t.next_psn),
            None => return Err(DropReason::BadPath),
        };
        if seq_lt(next, a.cum) {
            return Err(DropReason::AckOutOfRange);
        }
        let highest = a
            .sack
            .highest()
            .map(|h| a.cum.wrapping_add(1).wrapping_add(h));
        if let Some(hp) = highest {
            if !seq_lt(hp, next) {
                return Err(DropReason::AckOutOfRange);
            }
        }
        self.peer_hint = a.rate_hint;
        // ECN also trims the hinted rate once per round trip: x3/4 after a round in which
        // most packets (over all paths) carried CE, i.e. the congestion is at the receiver's
        // edge rather than on a few fabric routes (which the per-path windows handle), and
        // back to the full hint after a round that was not. Queues above the marking
        // threshold then drain faster than the 5 % headroom of the hint alone allows.
        self.rate_ce = self.rate_ce.saturating_add(a.ce);
        self.rate_acked = self.rate_acked.saturating_add(a.acked);
        let stamp = now.wire_stamp();
        if (stamp.wrapping_sub(self.rate_round) as i32) >= 0 {
            let s = u32::from(self.rate_scale);
            let edge = u32::from(self.rate_ce) * 2 > u32::from(self.rate_acked);
            let s = if edge { s * 3 / 4 } else { 1024 };
            self.rate_scale = s.clamp(64, 1024) as u16;
            self.rate_ce = 0;
            self.rate_acked = 0;
            self.rate_round = stamp.wrapping_add(self.min_rtt.max(1));
        }
        // RTT from the echoed stamp.
        let sample = now.wire_stamp().wrapping_sub(a.echo);
        let mut rtt_ok = false;
        if let Some(t) = self.tx.get_mut(p) {
            if sample < 1 << 31 && sample > 0 {
                t.rtt_sample(sample);
                rtt_ok = true;
            }
            if t.state == PathState::Probing && !t.probe_due && a.echo == t.probe_stamp {
                self.probing &= !(1u64 << (p % 64));
                t.state = PathState::Active;
                t.timeouts = 0;
                t.backoff = 0;
                t.cc.reset(&cfg.cc);
                t.rto_at = Instant::NEVER;
            }
        }
        if rtt_ok && (self.min_rtt == 0 || sample < self.min_rtt) {
            self.min_rtt = sample;
        }
        if a.flags & AF_NAK != 0 {
            let e = if a.flags & AF_INV != 0 {
                ConnError::RemoteInvalid
            } else {
                ConnError::RemoteAccess
            };
            self.fail(e, app);
            return Ok(RxEvent::Ack);
        }
        let rnr_psn = (a.flags & AF_RNR != 0).then_some(a.rnr_psn);
        let mut acked_bytes = 0u32;
        let mut lost_any = false;
        let mut min_psn: Option<u32> = None;
        let mut rnr_fail = false;
        let mut rnr_any = false;
        let mut freed = 0u32;
        for w in 0..W {
            let mut bits = self
                .members
                .get(p)
                .and_then(|m| m.get(w))
                .copied()
                .unwrap_or(0);
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                let bit = 1u64 << i;
                bits &= bits - 1;
                let Some(k) = self.pool.get_mut(w * 64 + i) else {
                    continue;
                };
                let d16 = k.psn.wrapping_sub(base as u16);
                let psn = base.wrapping_add(u32::from(d16));
                let off = psn.wrapping_sub(a.cum);
                let acked =
                    seq_lt(psn, a.cum) || ((1..=SACK_BITS).contains(&off) && a.sack.get(off - 1));
                let outcome = if rnr_psn == Some(psn) && !acked {
                    k.bump_rnr();
                    if cfg.rnr_retry < 7 && k.rnr() > cfg.rnr_retry {
                        rnr_fail = true;
                    }
                    rnr_any = true;
                    2
                } else if acked {
                    0
                } else if highest.map(|h| seq_lt(psn, h)).unwrap_or(false) {
                    1
                } else {
                    min_psn = Some(match min_psn {
                        Some(m) if seq_lt(m, psn) => m,
                        _ => psn,
                    });
                    continue;
                };
                let len = charge(k.len);
                let stream = k.stream();
                let ssn16 = k.ssn;
                let last = k.last();
                freed = freed.saturating_add(len);
                if let Some(m) = self.members.get_mut(p).and_then(|m| m.get_mut(w)) {
                    *m &= !bit;
                }
                match outcome {
                    0 => {
                        acked_bytes = acked_bytes.saturating_add(len);
                        if let Some(b) = self.busy.get_mut(w) {
                            *b &= !bit;
                        }
                        if let Some(st) = self.stx.get_mut(usize::from(stream)) {
                            let ssn = st.ssn_from_low(ssn16);
                            let sid = u16::from(stream);
                            st.on_acked(ssn, last, |msn| app.acked(sid, msn));
                        }
                    }
                    1 => {
                        lost_any = true;
                        self.stats.sack_lost = self.stats.sack_lost.wrapping_add(1);
                        if let Some(l) = self.lost.get_mut(w) {
                            *l |= bit;
                        }
                    }
                    _ => {
                        if let Some(r) = self.rnr_wait.get_mut(w) {
                            *r |= bit;
                        }
                    }
                }
            }
        }
        self.inflight = self.inflight.saturating_sub(freed);
        if rnr_any {
            let t = rnr_timer_ns(a.rnr_timer);
            let until = now.add_nanos(t);
            self.rnr_until = if self.rnr_until == Instant::NEVER {
                until
            } else {
                self.rnr_until.max(until)
            };
        }
        let rto_now = self.tx.get(p).map(|t| self.rto(t)).unwrap_or(0);
        let min_rto = u64::from(cfg.min_rto_ns);
        if let Some(t) = self.tx.get_mut(p) {
            t.inflight = t.inflight.saturating_sub(freed);
            t.base_psn = min_psn.unwrap_or(t.next_psn);
            let rtt = u64::from(t.srtt.max(1));
            t.cc.on_ack(&cfg.cc, now, rtt, acked_bytes, a.acked, a.ce);
            if lost_any {
                t.cc.on_loss(&cfg.cc, now, rtt);
            }
            if acked_bytes > 0 {
                t.timeouts = 0;
                t.backoff = 0;
            }
            if t.inflight == 0 {
                if t.state == PathState::Active {
                    t.rto_at = Instant::NEVER;
                }
            } else if acked_bytes > 0 || t.rto_at == Instant::NEVER {
                t.rto_at = now.add_nanos(rto_now.max(min_rto));
            }
        }
        if acked_bytes > 0 {
            self.stall = 0;
            self.progress_at = now;
            self.ramp = self.ramp.saturating_add(acked_bytes);
        }
        if rnr_fail {
            self.fail(ConnError::RnrRetryExceeded, app);
        }
        Ok(RxEvent::Ack)
    }

    /// Writes the next datagram to send into `buf` (at least `mtu + 84` bytes), or returns
    /// `None` if nothing may be sent now. Call repeatedly until `None`.
    pub fn poll_transmit<A: App>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        app: &mut A,
    ) -> Option<Transmit> {
        if self.state == ConnState::Error(ConnError::Aborted) {
            return None;
        }
        if self.ack_pending != 0 {
            if self.ack_at != Instant::NEVER && self.rx.iter().all(|r| r.acked == 0) {
                self.ack_at = Instant::NEVER;
            }
            return self.send_ack(buf);
        }
        if self.state != ConnState::Open {
            return None;
        }
        if self.probing != 0 {
            for p in 0..usize::from(self.cfg.paths).min(P) {
                let due = self
                    .tx
                    .get(p)
                    .map(|t| t.state == PathState::Probing && t.probe_due)
                    .unwrap_or(false);
                if due {
                    return self.send_probe(now, p, buf);
                }
            }
        }
        self.paced = false;
        if self.cfg.pacing && self.peer_hint != 0 && now < self.next_send {
            self.paced = true;
            return None;
        }
        let r = self.send_data(now, buf, app);
        if r.is_none() && self.ack_pending != 0 {
            // A failure while building data (an unreadable response) queued
            // a NAK: it goes out now, not at some later timer.
            return self.send_ack(buf);
        }
        if let Some(t) = &r {
            if self.cfg.pacing && self.peer_hint != 0 {
                let bytes = (t.len as u64).saturating_add(u64::from(self.cfg.wire_overhead));
                let r = u64::from(self.peer_hint) * u64::from(self.rate_scale) / 1024;
                let d = bytes.saturating_mul(1_000_000) / r.max(1);
                self.next_send = self.next_send.max(now).add_nanos(d);
            }
        }
        r
    }

    fn send_ack(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let p = self.ack_pending.trailing_zeros() as usize;
        self.ack_pending &= !(1u64 << (p % 64));
        let rx = self.rx.get_mut(p)?;
        let nak = usize::from(self.nak_path) == p;
        let rnr = usize::from(self.rnr_path) == p && !nak;
        let h = AckHeader {
            path: p as u8,
            dst_conn: self.cfg.peer_conn,
            echo: rx.echo,
            cum: rx.cum,
            rate_hint: self.local_hint,
            ce: rx.ce,
            acked: rx.acked,
            flags: if nak && self.nak_inv {
                AF_NAK | AF_INV
            } else if nak {
                AF_NAK
            } else if rnr {
                AF_RNR
            } else {
                0
            },
            rnr_timer: if rnr { self.rnr_timer } else { 0 },
            rnr_psn: if nak {
                self.nak_psn
            } else if rnr {
                self.rnr_psn
            } else {
                0
            },
            sack: rx.sack,
        };
        let len = h.encode(buf)?;
        self.stats.ce_echoed = self.stats.ce_echoed.wrapping_add(u32::from(rx.ce));
        rx.ce = 0;
        rx.acked = 0;
        if rnr {
            self.rnr_path = 0xff;
        }
        if nak {
            self.nak_path = 0xff;
        }
        Some(Transmit {
            len,
            path: p as u8,
            src_port: self.tx.get(p).map(|t| t.src_port).unwrap_or(0),
            ect: false,
            kind: TxKind::Ack,
        })
    }

    fn send_probe(&mut self, now: Instant, p: usize, buf: &mut [u8]) -> Option<Transmit> {
        let rto = self.tx.get(p).map(|t| self.rto(t)).unwrap_or(0);
        let t = self.tx.get_mut(p)?;
        let stamp = now.wire_stamp();
        let h = ProbeHeader {
            path: p as u8,
            dst_conn: self.cfg.peer_conn,
            psn: t.next_psn,
            stamp,
            floor: t.base_psn,
        };
        let len = h.encode(buf)?;
        t.probe_due = false;
        t.probe_stamp = stamp;
        t.rto_at = now.add_nanos(rto);
        Some(Transmit {
            len,
            path: p as u8,
            src_port: t.src_port,
            ect: true,
            kind: TxKind::Probe,
        })
    }

    fn pick_path(&mut self, len: u32) -> Option<usize> {
        let n = usize::from(self.cfg.paths).min(P);
        let start = usize::from(self.rr_path);
        for k in 0..n {
            let p = wrap(start + k, n);
            let Some(t) = self.tx.get(p) else { continue };
            if t.state != PathState::Active || !t.span_ok() {
                continue;
            }
            if t.inflight == 0 || t.inflight.saturating_add(len) <= t.cc.pwnd {
                self.rr_path = wrap(p + 1, n) as u8;
                return Some(p);
            }
        }
        None
    }

    fn find_lost(&self) -> Option<(usize, usize)> {
        for w in 0..W {
            let l = self.lost.get(w).copied().unwrap_or(0);
            if l != 0 {
                return Some((w, l.trailing_zeros() as usize));
            }
        }
        None
    }

    fn find_free(&self) -> Option<(usize, usize)> {
        for w in 0..W {
            let used = self.busy.get(w).copied().unwrap_or(u64::MAX);
            // Records beyond N do not exist: treat their bits as used.
            let valid = N.saturating_sub(w * 64);
            let used = if valid >= 64 {
                used
            } else {
                used | (u64::MAX << valid)
            };
            if used != u64::MAX {
                return Some((w, (!used).trailing_zeros() as usize));
            }
        }
        None
    }

    fn send_data<A: App>(&mut self, now: Instant, buf: &mut [u8], app: &mut A) -> Option<Transmit> {
        // Start-up ramp: the window may at most double per round trip (slow start) until
        // the peer's rate hint has had time to count every sender.
        if self.inflight >= self.ramp && self.inflight > 0 {
            return None;
        }
        if let Some(cap) = self.hint_cap() {
            let sum = self.qwnd_sum();
            if self.inflight >= cap.min(sum) && self.inflight > 0 {
                return None;
            }
        }
        // Retransmissions first, on any healthy path.
        if let Some((w, i)) = self.find_lost() {
            let k = *self.pool.get(w * 64 + i)?;
            let st = self.stx.get(usize::from(k.stream()))?;
            let msn = st.msn_from_low(k.msn);
            let ssn = st.ssn_from_low(k.ssn);
            let Some(info) = app.message(u16::from(k.stream()), msn) else {
                self.fail(ConnError::MessageVanished, app);
                return None;
            };
            let p = self.pick_path(charge(k.len))?;
            let t = self.build_data(
                now,
                p,
                buf,
                u16::from(k.stream()),
                msn,
                ssn,
                k.offset(),
                k.len,
                &info,
                true,
                app,
            )?;
            if let Some(l) = self.lost.get_mut(w) {
                *l &= !(1u64 << i);
            }
            self.track(now, w, i, p, k.len);
            self.stats.retx = self.stats.retx.wrapping_add(1);
            return Some(t);
        }
        let (w, i) = self.find_free()?;
        let n = S.min(256);
        for k in 0..n {
            let s = wrap(usize::from(self.rr_stream) + k, n);
            let Some(st) = self.stx.get(s) else { continue };
            if !st.can_send() {
                continue;
            }
            let (msn, off, ssn) = (st.tx_msn, st.tx_off, st.next_ssn);
            let Some(info) = app.message(s as u16, msn) else {
                continue;
            };
            let rem = info.len.saturating_sub(off);
            let len = rem.min(u32::from(self.cfg.mtu)) as u16;
            let p = self.pick_path(charge(len))?;
            let t =
                self.build_data(now, p, buf, s as u16, msn, ssn, off, len, &info, false, app)?;
            let last = off.saturating_add(u32::from(len)) >= info.len;
            if let Some(k) = self.pool.get_mut(w * 64 + i) {
                *k = Pkt {
                    path: 0,
                    meta: (s as u8 & 0x0f) | if last { 0x10 } else { 0 },
                    psn: 0,
                    ssn: ssn as u16,
                    msn: msn as u16,
                    len,
                    off_lo: off as u16,
                    off_hi: (off >> 16) as u16,
                };
            }
            if let Some(st) = self.stx.get_mut(s) {
                st.next_ssn = st.next_ssn.wrapping_add(1);
                if last {
                    st.tx_msn = st.tx_msn.wrapping_add(1);
                    st.tx_off = 0;
                } else {
                    st.tx_off = off.saturating_add(u32::from(len));
                }
            }
            if let Some(b) = self.busy.get_mut(w) {
                *b |= 1u64 << i;
            }
            self.track(now, w, i, p, len);
            self.rr_stream = wrap(s + 1, n) as u8;
            return Some(t);
        }
        None
    }

    fn qwnd_sum(&self) -> u32 {
        self.tx
            .iter()
            .filter(|t| t.state == PathState::Active)
            .fold(0u32, |a, t| a.saturating_add(t.cc.pwnd))
    }

    /// Records pool entry `(w, i)` as in flight on path `p` with the PSN just assigned.
    fn track(&mut self, now: Instant, w: usize, i: usize, p: usize, len: u16) {
        let rto = self.tx.get(p).map(|t| self.rto(t)).unwrap_or(0);
        let Some(t) = self.tx.get_mut(p) else { return };
        let psn = t.next_psn.wrapping_sub(1);
        if t.rto_at == Instant::NEVER {
            t.rto_at = now.add_nanos(rto);
        }
        t.inflight = t.inflight.saturating_add(charge(len));
        if let Some(k) = self.pool.get_mut(w * 64 + i) {
            k.path = p as u8;
            k.psn = psn as u16;
        }
        if let Some(m) = self.members.get_mut(p).and_then(|m| m.get_mut(w)) {
            *m |= 1u64 << i;
        }
        self.inflight = self.inflight.saturating_add(charge(len));
        self.stats.data_tx = self.stats.data_tx.wrapping_add(1);
    }

    #[allow(clippy::too_many_arguments)]
    fn build_data<A: App>(
        &mut self,
        now: Instant,
        p: usize,
        buf: &mut [u8],
        stream: u16,
        msn: u32,
        ssn: u32,
        offset: u32,
        len: u16,
        info: &MsgInfo,
        retransmit: bool,
        app: &mut A,
    ) -> Option<Transmit> {
        let t = self.tx.get(p)?;
        let end = offset.saturating_add(u32::from(len));
        let last = end >= info.len;
        let mut flags = 0u8;
        if offset == 0 {
            flags |= DF_FIRST;
        }
        if last {
            flags |= DF_LAST;
        }
        if info.op.needs_reth() {
            flags |= DF_RETH;
        }
        if info.op.has_imm() && last {
            flags |= DF_IMM;
        }
        if info.solicited && last {
            flags |= DF_SE;
        }
        if retransmit {
            flags |= DF_RETX;
        }
        // A window (path, start-up ramp or hint cap) is full after this packet: ask for
        // an immediate ACK rather than wait for the receiver's delayed-ACK timer.
        let two = charge(len).saturating_mul(2);
        let conn_cap = self.ramp.min(self.hint_cap().unwrap_or(u32::MAX));
        if t.inflight.saturating_add(two) > t.cc.pwnd
            || self.inflight.saturating_add(two) > conn_cap
        {
            flags |= DF_ACKREQ;
        }
        let h = DataHeader {
            path: p as u8,
            dst_conn: self.cfg.peer_conn,
            psn: t.next_psn,
            stamp: now.wire_stamp(),
            stream,
            op: info.op as u8,
            flags,
            payload_len: len,
            tag: info.tag,
            floor: t.base_psn,
            ssn,
            msn,
            offset,
            msg_len: info.len,
            reth: info.reth,
            imm: info.imm,
        };
        let hl = h.header_len();
        if buf.len() < hl.saturating_add(usize::from(len)) || hl > MAX_DATA_HEADER {
            return None;
        }
        h.encode(buf)?;
        let dst = buf.get_mut(hl..hl + usize::from(len))?;
        if let Err(e) = app.payload(stream, msn, offset, dst) {
            if e == Unreadable::Remote {
                // Tell the peer (on path 0: a NAK fails its whole connection).
                self.nak_path = 0;
                self.nak_psn = self.rx.first().map_or(0, |r| r.cum);
                self.nak_inv = false;
                self.ack_pending |= 1;
            }
            self.fail(ConnError::LocalProtection, app);
            return None;
        }
        let src_port = t.src_port;
        let psn = t.next_psn;
        if let Some(t) = self.tx.get_mut(p) {
            t.next_psn = t.next_psn.wrapping_add(1);
        }
        Some(Transmit {
            len: hl + usize::from(len),
            path: p as u8,
            src_port,
            ect: true,
            kind: TxKind::Data {
                stream,
                msn,
                offset,
                len,
                psn,
                retransmit,
            },
        })
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

fn port_for(cfg: &Config, path: u8, moves: u16) -> u16 {
    let off = u32::from(path) + u32::from(moves) * 0x9e37;
    cfg.base_src_port.wrapping_add((off % 16384) as u16)
}
