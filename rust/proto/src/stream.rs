//! Per-stream state: a stream is an ordered sequence of messages; its packets are numbered
//! by a stream sequence number (SSN). The receiver keeps a 128-packet window of received
//! SSNs (for exactly-once counting) and of message-last SSNs (for in-order completion); the
//! sender keeps the mirror image of acknowledged SSNs (for requester completions) and never
//! sends an SSN at or beyond `acked_base + STREAM_WINDOW`, so the receiver's window always
//! covers every SSN in flight.

use super::conn::MsgInfo;
use super::ident::Ident;

/// Width of the per-stream SSN window in packets.
pub const STREAM_WINDOW: u32 = 128;

/// How far before a stream's cumulative SSN a packet out of the stream window may be a
/// *late original* (held in a congested queue while its resend went through), in SSNs:
/// 2^16, as far back as a path takes a late PSN (Documentation/transport.rst,
/// "Receiver operation", steps 3 and 4). Such a packet is not placed (everything before the
/// cumulative SSN was received) and changes nothing but what its arrival says: its path
/// counts it and echoes its CE mark ([`StreamRx::late`]).
pub const STREAM_LATE: u32 = 1 << 16;

/// [`StreamTx::retries`]: the bit that marks a stream the current local ACK timer tick
/// has counted; set and cleared within the tick, so clear between ticks.
pub const RETRY_COUNTED: u8 = 0x80;

/// Sender half of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTx {
    /// Next SSN to assign to a new packet.
    pub next_ssn: u32,
    /// Message currently being segmented.
    pub tx_msn: u32,
    /// Offset of the next new packet in `tx_msn`.
    pub tx_off: u32,
    /// Every SSN below this is acknowledged.
    pub acked_base: u32,
    /// Next MSN to report as acknowledged.
    pub acked_msn: u32,
    /// Packets of the stream the receiver refused with RNR and not yet acknowledged:
    /// while any is, the stream sends nothing new ([`StreamTx::can_send`]), as an IBTA
    /// requester stops at an RNR NAK, and its refused packets alone are resent after
    /// the RNR timer (so a receiver that is not ready costs its own stream, not the
    /// others' share of the connection's window and packet records).
    pub rnr_held: u16,
    /// The stream was closed ([`crate::conn::Connection::close_streams`]): it sends
    /// nothing, and a failure or a NAK naming it is not taken again. Cleared when the
    /// stream starts over ([`Stream::start`], [`Stream::restart_tx`]).
    pub closed: bool,
    /// Shared connections: local ACK timer ticks the stream went through with a packet
    /// outstanding and none acknowledged (bits 0-6; the first arms, each later one is
    /// a retry), and, within a tick only, [`RETRY_COUNTED`] (bit 7); past its QP's
    /// `retry_cnt` retries the stream fails alone with *retry exceeded*
    /// (Documentation/transport.rst, "Retries are each stream's"). Any acknowledged
    /// packet of the stream clears the count.
    pub retries: u8,
    /// When the stream's packets refused with RNR may be resent (ns of the host's
    /// clock; 0: none waits): its own RNR timer, so a long one on another stream does
    /// not hold this one.
    pub rnr_until: u64,
    /// Bit i: SSN `acked_base + i` acknowledged.
    pub acked: Bits128,
    /// Bit i: SSN `acked_base + i` is the last packet of its message.
    pub last: Bits128,
}

impl StreamTx {
    /// Whether a new SSN may be assigned: it stays within the receiver's window, no
    /// packet of the stream waits out an RNR refusal ([`StreamTx::rnr_held`]), and the
    /// stream is not closed.
    #[inline]
    pub fn can_send(&self) -> bool {
        self.next_ssn.wrapping_sub(self.acked_base) < STREAM_WINDOW
            && self.rnr_held == 0
            && !self.closed
    }

    /// Reconstructs a full SSN from its low 16 bits (valid for SSNs in the window).
    #[inline]
    pub fn ssn_from_low(&self, low: u16) -> u32 {
        let d = low.wrapping_sub(self.acked_base as u16);
        self.acked_base.wrapping_add(u32::from(d))
    }

    /// Reconstructs a full MSN from its low 16 bits (in-flight MSNs are at most
    /// [`STREAM_WINDOW`] behind `tx_msn`).
    #[inline]
    pub fn msn_from_low(&self, low: u16) -> u32 {
        let back = (self.tx_msn as u16).wrapping_sub(low);
        self.tx_msn.wrapping_sub(u32::from(back))
    }

    /// Records that `ssn` (with `last` if it ends its message) was acknowledged; returns
    /// the messages that became fully acknowledged, in order.
    pub fn on_acked(&mut self, ssn: u32, last: bool) -> Done {
        // Progress: the retry count starts over.
        self.retries = 0;
        let d = ssn.wrapping_sub(self.acked_base);
        let first = self.acked_msn;
        if d >= STREAM_WINDOW {
            return Done::none(first);
        }
        if d == 0 && self.acked.is_empty() {
            self.acked_base = self.acked_base.wrapping_add(1);
            if last {
                self.acked_msn = self.acked_msn.wrapping_add(1);
                return Done { first, n: 1 };
            }
            return Done::none(first);
        }
        self.acked.set(d);
        if last {
            self.last.set(d);
        }
        let n = self.acked.trailing_ones();
        if n == 0 {
            return Done::none(first);
        }
        let msgs = self.last.count_below(n);
        self.acked_msn = self.acked_msn.wrapping_add(msgs);
        self.acked.shift_down(n);
        self.last.shift_down(n);
        self.acked_base = self.acked_base.wrapping_add(n);
        Done { first, n: msgs }
    }
}

/// Messages a stream finished (completed at the receiver, acknowledged at the sender):
/// `n` consecutive MSNs from `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// The first of them.
    pub first: u32,
    /// How many.
    pub n: u32,
}

impl Done {
    fn none(first: u32) -> Self {
        Done { first, n: 0 }
    }

    /// The MSNs, in order.
    pub fn msns(self) -> impl Iterator<Item = u32> {
        (0..self.n).map(move |i| self.first.wrapping_add(i))
    }
}

/// Outcome of offering one packet to a stream receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxVerdict {
    /// New packet: place it.
    New,
    /// Already received: do not place or count again.
    Duplicate,
    /// Beyond the window: drop.
    OutOfWindow,
}

/// Receiver half of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRx {
    /// Every SSN below this is received.
    pub cum: u32,
    /// Next MSN to complete.
    pub next_msn: u32,
    /// Bit i: SSN `cum + i` received (bit 0 is always clear).
    pub got: Bits128,
    /// Bit i: SSN `cum + i` ends its message.
    pub last: Bits128,
}

impl StreamRx {
    /// Classifies `ssn` without changing state. A duplicate lies at most
    /// [`STREAM_WINDOW`] behind `cum` (the sender never has an SSN in flight further
    /// back: everything below its `acked_base` was received, and its `next_ssn` is within
    /// the window of that); anything else outside the window is out of it (further back,
    /// see [`StreamRx::late`]).
    #[inline]
    pub fn check(&self, ssn: u32) -> RxVerdict {
        let d = ssn.wrapping_sub(self.cum);
        if d >= 1u32 << 31 {
            if self.cum.wrapping_sub(ssn) <= STREAM_WINDOW {
                RxVerdict::Duplicate
            } else {
                RxVerdict::OutOfWindow
            }
        } else if d >= STREAM_WINDOW {
            RxVerdict::OutOfWindow
        } else if self.got.get(d) {
            RxVerdict::Duplicate
        } else {
            RxVerdict::New
        }
    }

    /// Whether `ssn`, out of the window ([`StreamRx::check`]), may be a late original:
    /// more than [`STREAM_WINDOW`] and at most [`STREAM_LATE`] before `cum`.
    #[inline]
    pub fn late(&self, ssn: u32) -> bool {
        let back = self.cum.wrapping_sub(ssn);
        back > STREAM_WINDOW && back <= STREAM_LATE
    }

    /// Marks a [`RxVerdict::New`] `ssn` received; returns the messages now whole and in
    /// order.
    pub fn accept(&mut self, ssn: u32, last: bool) -> Done {
        let d = ssn.wrapping_sub(self.cum);
        let first = self.next_msn;
        if d >= STREAM_WINDOW {
            return Done::none(first);
        }
        if d == 0 && self.got.is_empty() {
            // In order with nothing pending above: no bitmap work.
            self.cum = self.cum.wrapping_add(1);
            if last {
                self.next_msn = self.next_msn.wrapping_add(1);
                return Done { first, n: 1 };
            }
            return Done::none(first);
        }
        self.got.set(d);
        if last {
            self.last.set(d);
        }
        let n = self.got.trailing_ones();
        if n == 0 {
            return Done::none(first);
        }
        let msgs = self.last.count_below(n);
        self.next_msn = self.next_msn.wrapping_add(msgs);
        self.got.shift_down(n);
        self.last.shift_down(n);
        self.cum = self.cum.wrapping_add(n);
        Done { first, n: msgs }
    }
}

/// A 128-bit bitmap in two 64-bit words (8-byte aligned, unlike `u128`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bits128 {
    w: [u64; 2],
}

impl Bits128 {
    /// Whether bit `i` is set (bits >= 128 read clear).
    #[inline]
    pub fn get(&self, i: u32) -> bool {
        self.w
            .get((i / 64) as usize)
            .map(|w| (w >> (i % 64)) & 1 == 1)
            .unwrap_or(false)
    }

    /// Sets bit `i` (bits >= 128 ignored).
    #[inline]
    pub fn set(&mut self, i: u32) {
        if let Some(w) = self.w.get_mut((i / 64) as usize) {
            *w |= 1u64 << (i % 64);
        }
    }

    /// Consecutive set bits from bit 0.
    #[inline]
    pub fn trailing_ones(&self) -> u32 {
        let [a, b] = self.w;
        let t = a.trailing_ones();
        if t < 64 {
            t
        } else {
            64 + b.trailing_ones()
        }
    }

    /// Number of set bits below bit `n`.
    #[inline]
    pub fn count_below(&self, n: u32) -> u32 {
        let [a, b] = self.w;
        if n >= 128 {
            a.count_ones() + b.count_ones()
        } else if n >= 64 {
            a.count_ones() + (b & ((1u64 << (n - 64)) - 1)).count_ones()
        } else {
            (a & ((1u64 << n) - 1)).count_ones()
        }
    }

    /// Shifts towards bit 0 by `n`.
    #[inline]
    pub fn shift_down(&mut self, n: u32) {
        let [a, b] = self.w;
        self.w = if n >= 128 {
            [0, 0]
        } else if n >= 64 {
            [b >> (n - 64), 0]
        } else if n == 0 {
            [a, b]
        } else {
            [(a >> n) | (b << (64 - n)), b >> n]
        };
    }

    /// Whether no bit is set.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.w == [0, 0]
    }
}

impl Bits128 {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: Bits128 = Bits128 { w: [0; 2] };
}

impl Default for Bits128 {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl StreamTx {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: StreamTx = StreamTx {
        next_ssn: 0,
        tx_msn: 0,
        tx_off: 0,
        acked_base: 0,
        acked_msn: 0,
        rnr_held: 0,
        closed: false,
        retries: 0,
        rnr_until: 0,
        acked: Bits128::EMPTY,
        last: Bits128::EMPTY,
    };
}

impl Default for StreamTx {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl StreamRx {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: StreamRx = StreamRx {
        cum: 0,
        next_msn: 0,
        got: Bits128::EMPTY,
        last: Bits128::EMPTY,
    };
}

impl Default for StreamRx {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// One stream's state, both halves, as the application holds it: the connection keeps
/// none ([`crate::conn::App::stream`]), so a host with many streams (one or two per
/// QP) pays for each where it keeps the stream's owner, and a connection's size does
/// not grow with them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    /// What this end sends on it.
    pub tx: StreamTx,
    /// What this end receives on it.
    pub rx: StreamRx,
}

impl Stream {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: Stream = Stream {
        tx: StreamTx::EMPTY,
        rx: StreamRx::EMPTY,
    };

    /// Stream `s` of a connection whose sending key is `tx` and receiving key `rx`
    /// (Documentation/transport.rst, "Identity"): both halves at their first SSN.
    pub fn start(tx: Ident, rx: Ident, s: u16) -> Self {
        let mut st = Stream::EMPTY;
        st.restart_tx(tx, s);
        st.restart_rx(rx, s);
        st
    }

    /// The sending half starts over at its first SSN under key `id`.
    pub fn restart_tx(&mut self, id: Ident, s: u16) {
        let ssn = id.first_ssn(s);
        self.tx = StreamTx {
            next_ssn: ssn,
            acked_base: ssn,
            ..StreamTx::EMPTY
        };
    }

    /// The receiving half starts over at its first SSN under key `id`.
    pub fn restart_rx(&mut self, id: Ident, s: u16) {
        self.rx = StreamRx {
            cum: id.first_ssn(s),
            ..StreamRx::EMPTY
        };
    }

    /// Whether the sending half has nothing in flight and nothing unacknowledged.
    pub fn tx_idle(&self) -> bool {
        self.tx.acked_base == self.tx.next_ssn
    }
}

/// A fixed table of `S` streams and a round-robin cursor: the stream store of an
/// application with few streams (the RC engine's two, tests). An application
/// implements [`crate::conn::App::stream`] and [`crate::conn::App::ready_stream`]
/// with [`StreamTable::get`] and [`StreamTable::next_ready`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTable<const S: usize> {
    streams: [Stream; S],
    rr: u16,
}

impl<const S: usize> Default for StreamTable<S> {
    /// Every stream at its first SSN under [`Ident::DEFAULT`] in both directions.
    fn default() -> Self {
        Self::new(Ident::DEFAULT, Ident::DEFAULT)
    }
}

impl<const S: usize> StreamTable<S> {
    /// Every stream at its first SSN under the sending key `tx` and receiving key `rx`.
    pub fn new(tx: Ident, rx: Ident) -> Self {
        let mut t = StreamTable {
            streams: [Stream::EMPTY; S],
            rr: 0,
        };
        t.restart_tx(tx);
        t.restart_rx(rx);
        t
    }

    /// Stream `s`, if the table has it.
    pub fn get(&mut self, s: u16) -> Option<&mut Stream> {
        self.streams.get_mut(usize::from(s))
    }

    /// Stream `s`, read only.
    pub fn peek(&self, s: u16) -> Option<&Stream> {
        self.streams.get(usize::from(s))
    }

    /// Every sending half starts over under key `id`.
    pub fn restart_tx(&mut self, id: Ident) {
        for (s, st) in self.streams.iter_mut().enumerate() {
            st.restart_tx(id, s as u16);
        }
    }

    /// Every receiving half starts over under key `id`.
    pub fn restart_rx(&mut self, id: Ident) {
        for (s, st) in self.streams.iter_mut().enumerate() {
            st.restart_rx(id, s as u16);
        }
    }

    /// The next of the first `n` streams (at most `S`), round robin from the one after
    /// the last returned, whose window has room, with the MSN of its next message to
    /// send; the cursor moves past it. `n` calls visit every stream once.
    pub fn rotate(&mut self, n: u16) -> Option<(u16, u32)> {
        let n = S.min(usize::from(n));
        for k in 0..n {
            let s = (usize::from(self.rr) + k) % n;
            let Some(st) = self.streams.get(s) else {
                continue;
            };
            if st.tx.can_send() {
                self.rr = ((s + 1) % n) as u16;
                return Some((s as u16, st.tx.tx_msn));
            }
        }
        None
    }

    /// [`crate::conn::App::ready_stream`] for an application with streams `0..n` whose
    /// messages `posted` describes: the next of them in round-robin order with window
    /// room and its next message posted, with that message.
    pub fn next_ready(
        &mut self,
        n: u16,
        mut posted: impl FnMut(u16, u32) -> Option<MsgInfo>,
    ) -> Option<(u16, MsgInfo)> {
        for _ in 0..n {
            let (s, msn) = self.rotate(n)?;
            if let Some(m) = posted(s, msn) {
                return Some((s, m));
            }
        }
        None
    }
}
