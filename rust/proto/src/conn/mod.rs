//! The connection: sender and receiver halves of one connection between two endpoints,
//! K paths and a fixed pool of in-flight packet records, carrying any number of ordered
//! streams whose state the application holds ([`App::stream`]). Sans-I/O: datagrams and
//! time in, datagrams, deadlines and completions out.

//!
//! The state is grouped by concern and so are the files: `config` (its parameters),
//! `app` (the application's side: the [`App`] trait and what crosses it), `tx` (sending
//! data and probes, path picking, pacing), `rx` (receiving data and probes), `ack`
//! (processing ACKs and sending them), `timers` (the timer table and what expires),
//! `event` (what it reports as it runs).

mod ack;
mod app;
mod config;
mod event;
mod members;
mod paths;
mod planes;
mod reorder;
mod rx;
mod streams;
mod timers;
mod tx;

use super::cc::PathCc;
use super::ident::Ident;
use super::path::{PathRx, PathState, PathTx};
use super::plane::MAX_PLANES;
use super::time::Instant;
use timers::{Timer, TimerTable};

pub use app::{rnr_timer_ns, App, ConnError, MsgInfo, Placement, Refuse, Rnr, Scope, Unreadable};
pub use config::Config;
pub use event::{Event, LossCause};
pub use members::{MemberOut, MemberRx};
pub use paths::PathWants;

/// Largest number of paths a connection may have.
pub const MAX_PATHS: usize = 64;

/// Most datagrams a host takes from one receive batch before it answers
/// ([`Connection::batch_full`]; Documentation/transport.rst, "Receiving", step 9): twice
/// the bundle a sprayed transfer gets at the kernel's defaults (`ack_every` 2, 8 paths),
/// so that the sender hears of a long batch's first packets while the host still takes
/// its last ones.
pub const RX_BATCH: u16 = 16;

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
    /// The plane it goes out on, `0..planes` ([`Connection::set_planes`]; 0 with one
    /// plane): DATA and PROBE by [`super::plane::plane_of`] from the path and its moves,
    /// an ACK on the plane its path's newest DATA or PROBE came in on.
    pub plane: u8,
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
    /// Shared connections: new peer incarnations taken (every receive path
    /// resynchronised).
    pub resyncs: u32,
}

/// One in-flight (or awaiting retransmission) data packet: enough to rebuild it with the
/// application's help. 16 bytes: sequence numbers are kept as their low 16 bits and
/// rebuilt against the path floor / stream base (both within 256 / 128 of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    /// Bits 0-5 path, bit 6 the reordering generation it was overtaken in, bit 7
    /// overtaken (a later packet of its path acknowledged before it).
    path: u8,
    /// Bit 4 last packet of its message, bits 5-7 RNR refusals (bits 0-3 clear).
    meta: u8,
    stream: u16,
    psn: u16,
    ssn: u16,
    msn: u16,
    len: u16,
    off_lo: u16,
    off_hi: u16,
}

impl Pkt {
    /// The path it is in flight on.
    fn path(&self) -> u8 {
        self.path & 0x3f
    }
    /// If a later packet of its path was acknowledged before it: the reordering
    /// generation ([`super::path::Reorder::gen`]) it was overtaken in.
    fn overtaken(&self) -> Option<bool> {
        (self.path & 0x80 != 0).then_some(self.path & 0x40 != 0)
    }
    fn set_overtaken(&mut self, gen: bool) {
        self.path = (self.path & 0x3f) | 0x80 | if gen { 0x40 } else { 0 };
    }
    fn stream(&self) -> u16 {
        self.stream
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
    /// The packet's distance above its path's floor `base` (a record in flight lies
    /// within the path's 256-PSN span from it).
    fn psn_above(&self, base: u32) -> u16 {
        self.psn.wrapping_sub(base as u16)
    }
    /// The packet's full PSN, rebuilt against its path's floor `base`.
    fn full_psn(&self, base: u32) -> u32 {
        base.wrapping_add(u32::from(self.psn_above(base)))
    }
}

/// A MetaRoCE connection with up to `P` paths and `N` in-flight packet records
/// (default 64; at most `64 * W`, `W` being the number of 64-bit mask words).
///
/// `Copy`: plain data (no references, no `Drop`), so a host may copy [`Connection::BLANK`]
/// into memory it allocated and [`Connection::reset`] it there, never holding a whole
/// connection on its stack (a kernel stack is 16 KiB; `Connection<64, ..>` is 9 KB).
#[derive(Clone, Copy, Debug)]
pub struct Connection<const P: usize, const W: usize, const N: usize = 64> {
    cfg: Config,
    state: ConnState,
    /// Sender state per path.
    tx: [PathTx; P],
    /// Receiver state per path.
    rx: [PathRx; P],
    /// The in-flight packet records.
    flight: Flight<P, W, N>,
    /// What the receiver owes the peer: ACKs, an RNR report, a NAK.
    reports: Reports,
    /// Connection-wide deadlines (the per-path RTO lives in [`PathTx::rto_at`]).
    timers: TimerTable,
    /// The last [`Connection::poll_transmit`] was held back by pacing: the pacing
    /// deadline ([`timers::Timer::Pacing`]) is one [`Connection::poll_timeout`] reports.
    paced: bool,
    /// No ACKREQ for a full record pool or stream window before this instant (at most
    /// one in the smallest RTT sample: [`Connection::build_data`]).
    limit_ask_at: Instant,
    /// Paths owing or awaiting a probe's answer (bit per path): those in the probing
    /// state, and active ones holding back new data for a tail-loss probe's
    /// ([`timers`]).
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
    /// Round-robin cursor: the next path to try.
    rr_path: u8,
    /// New DATA packets sent in a row on the path before `rr_path` ([`Config::train`]);
    /// `u8::MAX` once a message's last packet ended the run.
    rr_run: u8,
    /// The most paths this end has sent on ([`Config::paths`] at most times, more after
    /// [`Connection::set_paths`] lowered it): ACKs are taken on the paths below it, so
    /// a retired path's late answers still count.
    sent_paths: u8,
    /// Streams with a message partly sent (its first packet out, its last not yet).
    partial: u16,
    /// The peer's incarnation (Documentation/transport.rst, "Incarnations"): set by
    /// the first DATA or PROBE that passes every check; 0 until then.
    peer_inc: u16,
    /// Shared connections: receive paths not yet synchronised to the peer's current
    /// incarnation (bit per path; [`members`]).
    unsynced: u64,
    /// Shared connections: the member of the newest packet accepted on each path,
    /// whose pair the path's ACKs are addressed by.
    ack_member: [u16; P],
    /// Planes ([`Connection::set_planes`]): how many, which work (bit per plane), the
    /// plane of the datagram being handled, and the plane each path's newest DATA or
    /// PROBE came in on (its ACKs go back on it).
    planes: u8,
    planes_up: u8,
    ingress: u8,
    ack_plane: [u8; P],
    /// When each plane last answered a path on it (microseconds,
    /// [`Instant::as_micros32`]; bit `k` of `planes_heard`: plane `k` ever did), and
    /// when each path's silence began (its first transmission since its last answer,
    /// or that answer): where a moving path goes ([`super::plane::move_steps`]).
    plane_answered: [u32; MAX_PLANES as usize],
    planes_heard: u8,
    quiet_from: [u32; P],
    /// Datagrams taken since the host last asked what to send ([`Self::batch_full`]).
    rx_batch: u16,
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

impl<const P: usize, const W: usize, const N: usize> Flight<P, W, N> {
    /// The records in flight on path `p` when called (none for an index out of range),
    /// as `(word, bit)` pairs: a copy of the mask, so the caller may change the
    /// flight while it walks them.
    fn on_path(&self, p: usize) -> Records<W> {
        Records {
            words: self.members.get(p).copied().unwrap_or([0; W]),
            w: 0,
        }
    }

    /// The records in use when called, as [`Self::on_path`] gives them.
    fn in_use(&self) -> Records<W> {
        Records {
            words: self.busy,
            w: 0,
        }
    }

    /// The stream of record `(word, bit)` (as [`Records`] yields it), if there is one.
    fn stream_of(&self, w: usize, bit: u64) -> Option<u16> {
        self.pool
            .get(w * 64 + bit.trailing_zeros() as usize)
            .map(|k| k.stream())
    }
}

/// The set bits of a `W`-word record mask, lowest first, as `(word, bit)`: record
/// `word * 64 + bit.trailing_zeros()`.
struct Records<const W: usize> {
    words: [u64; W],
    w: usize,
}

impl<const W: usize> Iterator for Records<W> {
    type Item = (usize, u64);

    fn next(&mut self) -> Option<(usize, u64)> {
        while let Some(word) = self.words.get_mut(self.w) {
            if *word != 0 {
                let bit = *word & word.wrapping_neg();
                *word &= !bit;
                return Some((self.w, bit));
            }
            self.w += 1;
        }
        None
    }
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
    /// NAK, the stream is closed ([`AF_CLOSED`](super::wire::AF_CLOSED)).
    Closed,
    /// Not reported yet: the application refused the packet for good while an earlier
    /// message of its stream was incomplete ([`Refuse::Held`]). Kept in the NAK slot
    /// (never sent as such) until [`App::refusal`] says the NAK is due.
    Held,
}

/// A pending refusal report: the refused PSN on a path and what to tell the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Refusal {
    path: u8,
    kind: RefusalKind,
    psn: u32,
    /// A NAK's refused message, if it names one ([`AF_MSG`](super::wire::AF_MSG)): its
    /// stream ([`NO_STREAM`]: none) and MSN (the stream's next message to complete;
    /// known once the refusal is reported, not while it is held).
    stream: u16,
    msn: u32,
}

/// [`Refusal::stream`] of a refusal that names no message (stream 65535 is never one).
const NO_STREAM: u16 = u16::MAX;

/// What the receiver has to tell the peer.
#[derive(Clone, Copy, Debug)]
struct Reports {
    /// Paths owing an ACK (bit per path).
    ack_pending: u64,
    /// The path whose packet made the next ACK due at once: the ACK datagram goes
    /// out on its port (with bundling, so bundles ride every path's port in turn).
    /// `u8::MAX`: none (the lowest path due leads).
    ack_lead: u8,
    /// The latest RNR refusal not yet reported.
    rnr: Option<Refusal>,
    /// The latest NAK not yet sent (on its path it goes before an RNR report), or a
    /// held refusal ([`RefusalKind::Held`]).
    nak: Option<Refusal>,
}

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Compile-time limits: at most 64 paths, 1,024 in-flight packets.
    const LIMITS: () = {
        assert!(P >= 1 && P <= MAX_PATHS, "1..=64 paths");
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
        reports: Reports {
            ack_pending: 0,
            ack_lead: u8::MAX,
            rnr: None,
            nak: None,
        },
        timers: TimerTable::new(),
        paced: false,
        limit_ask_at: Instant::ZERO,
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
        rr_run: 0,
        sent_paths: 0,
        partial: 0,
        peer_inc: 0,
        unsynced: u64::MAX,
        ack_member: [0; P],
        planes: 1,
        planes_up: u8::MAX,
        ingress: 0,
        ack_plane: [0; P],
        plane_answered: [0; MAX_PLANES as usize],
        planes_heard: 0,
        quiet_from: [0; P],
        rx_batch: 0,
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
        self.sent_paths = cfg.paths;
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
    }

    /// Every path's first expected PSN and every stream's first SSN, from
    /// [`Config::rx_ident`].
    fn start_rx_seqs(&mut self) {
        let id = self.cfg.rx_ident;
        for (i, r) in self.rx.iter_mut().enumerate() {
            r.cum = id.isn(i as u8);
        }
    }

    /// Sets [`Config::rx_alt`] (verbs: at RTS, from `sq_psn`); ignored once a DATA
    /// or PROBE was accepted (a path moved from where the key starts it: every
    /// accepted packet moves its path's window).
    pub fn set_rx_alt(&mut self, id: Ident) {
        let key = self.cfg.rx_ident;
        let untouched = self
            .rx
            .iter()
            .enumerate()
            .all(|(i, r)| r.cum == key.isn(i as u8) && r.sack.is_empty());
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
    ///
    /// The peer's incarnation settles with it: the first such packet's becomes the
    /// connection's, and from then on a DATA or PROBE of another is stale
    /// ([`Self::inc_check`]).
    pub(super) fn settle_rx_key<A: App>(&mut self, id: Ident, inc: u16, app: &mut A) {
        self.peer_inc = inc;
        if id != self.cfg.rx_ident {
            self.cfg.rx_ident = id;
            self.start_rx_seqs();
            app.restart_rx(id);
        }
        self.cfg.rx_alt = Ident::DEFAULT;
    }

    /// Whether a DATA or PROBE of incarnation `inc` is the peer's current one (any is,
    /// before the first was accepted); changes nothing.
    pub(super) fn inc_check(&self, inc: u16) -> Result<(), super::wire::DropReason> {
        // A connection of one pair takes any (Documentation/transport.rst,
        // "Incarnations": it cannot tell a renewed peer from a stray).
        if self.cfg.shared && self.peer_inc != 0 && inc != self.peer_inc {
            return Err(super::wire::DropReason::StaleIncarnation);
        }
        Ok(())
    }

    /// The peer's incarnation (0: nothing accepted yet).
    pub fn peer_incarnation(&self) -> u16 {
        self.peer_inc
    }

    /// Shared connections: how many peer incarnations were taken so far. A member
    /// records it when it joins ([`MemberRx::joined`]).
    pub fn epoch(&self) -> u32 {
        self.stats.resyncs
    }

    /// Sets the key of the direction this end sends in ([`Config::tx_ident`]), which
    /// verbs completes only when the QP moves to RTS (`sq_psn`), after the connection
    /// exists. Refused (`false`) once anything was sent: the peer already knows the
    /// paths' PSNs. The host restarts its streams' sending halves from the same key
    /// ([`super::stream::Stream::restart_tx`]).
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
            let received = if self.cfg.shared {
                self.unsynced & (1u64 << p) == 0
            } else {
                rx.cum != id.isn(p as u8) || !rx.sack.is_empty()
            };
            if received {
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

    /// Whether the local ACK timer has anything to watch: a message unacknowledged
    /// ([`Self::outstanding`]) or a request awaiting its response ([`App::awaiting`]).
    pub(super) fn waiting<A: App>(&self, app: &mut A) -> bool {
        self.outstanding() || app.awaiting(0).is_some()
    }

    /// Progress for the retry limits: the peer answered. Restarts the local ACK
    /// timer while anything is still unacknowledged or awaits a response
    /// ([`Self::waiting`]); `data`: data was acknowledged or refused with RNR (the
    /// only progress the model without a local ACK timer counts).
    pub(super) fn progress<A: App>(&mut self, now: Instant, data: bool, app: &mut A) {
        if data {
            self.stall = 0;
        }
        let Some(t) = self.ack_timeout() else {
            self.retries = 0;
            self.retry_at = Instant::NEVER;
            return;
        };
        if self.cfg.shared {
            // The timer ticks on: progress is each stream's
            // ([`Self::stream_retries`]), not the connection's, and a tick that finds
            // nothing to watch stops it (so an ACK does not ask the members whether a
            // response is due: [`App::awaiting`] runs per tick, not per packet).
            if self.retry_at == Instant::NEVER && self.outstanding() {
                self.retry_at = now.add_nanos(t);
            }
            return;
        }
        self.retries = 0;
        self.retry_at = if self.waiting(app) {
            now.add_nanos(t)
        } else {
            Instant::NEVER
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

    /// Sets [`Config::pacing_slack_us`] while the connection runs: a host that measures
    /// how late its timer fires passes the slack that lateness calls for
    /// ([`crate::time::pacing_slack_us`]).
    pub fn set_pacing_slack_us(&mut self, us: u16) {
        self.cfg.pacing_slack_us = us;
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
    ///
    /// The backed-off value never exceeds `max(base, ack_timeout)` when a verbs local ACK
    /// timeout is set (no backoff at all when the base RTO is already that long): each
    /// local ACK timeout is one *retry* (IBTA 9.7.6.1.3), so
    /// every path that has anything to resend or probe does so within one of them. A
    /// backoff past it would let a QP whose round trip is long (a loaded host) spend its
    /// `retry_cnt` expiries waiting, without retransmitting, and fail with *retry
    /// exceeded* after fewer real retries than the user asked for.
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
        let backed = base.saturating_mul(1u64 << t.backoff.min(16));
        match self.ack_timeout() {
            Some(a) => backed.min(base.max(a)),
            None => backed,
        }
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
        resyncs: 0,
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
        stream: 0,
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
