//! Receiver fair-share rate hints.
//!
//! A receiving node divides its inbound capacity among the connections that sent it data in
//! the last epoch and returns each its share on every ACK. An epoch lasts at least one base
//! round trip and at least as long as it takes every active sender, at its share, to send four
//! full packets (otherwise slow senders would be missed and the share overestimated). "Its
//! share" is of the capacity or, when the data arrives slower than that (senders limited
//! elsewhere: their hosts, another bottleneck), of the arrival rate measured over the last
//! epoch, up to [`MAX_EPOCHS`] shortest epochs. Senders that come in bursts (ACK-clocked
//! over a round trip much longer than the base one) skip whole epochs: when a sender seen
//! within the last 8 epochs returns after skipping at least one, the next epoch is twice as
//! long (up to [`MAX_EPOCHS`] shortest epochs), and an epoch without such a return shrinks
//! it by an eighth. The state is per node (a device), plus one `u32` per connection: the
//! 16-bit stamp of the last epoch it sent in and the bytes it sent then (256-byte units,
//! saturating at 16 MiB). A connection silent for a multiple of 65,535 epochs to within
//! one epoch (at least 0.65 s) is not counted for that epoch.
//!
//! **Max-min** (like RCP's single rate): senders limited elsewhere (their application,
//! their NIC, another bottleneck) leave part of `capacity / n` unused, so the estimator
//! offers a higher *level* when
//! - two epochs in a row arrived below [`RAISE_BELOW`] of the capacity (counting each
//!   datagram with [`FairShare::wire_overhead`] more bytes, the framing the capacity
//!   includes: all senders at `capacity / n` arrive at about the capacity),
//! - with as many senders as the epoch before,
//! - some sender sent at least [`FULL`] of its offer in the epoch before (when none
//!   does, every sender is limited elsewhere: a higher level would change nothing but
//!   the hint),
//! - and the level was not raised at the start of the epoch that just ended (the
//!   senders get an epoch to take a raise before it is judged):
//!
//! the offer is then scaled by [`AIM`]·capacity / arrival rate, by at most 5/4, to at
//! most the capacity. After an epoch that arrived above the capacity it is scaled down
//! by capacity / arrival rate; senders joining scale it by old count / new count; a
//! level within 1/16 of `capacity / n` is dropped. Limited
//! senders keep sending what they can; the others converge to the max-min share,
//! `(capacity − what the limited ones use) / (number of the others)`.

use super::time::Instant;

/// The longest epoch, in shortest epochs (`epoch_ns`): a trickle of data does not stretch
/// the count of active senders over seconds.
pub const MAX_EPOCHS: u64 = 64;

/// The share of its inbound capacity a receiving node hands out, percent: a little
/// below line rate, so that standing queues drain (what remains of a queue above the
/// ECN marking threshold drains by the senders' ECN trim). 95 % left every 2-RTT window
/// of an incast at 16 or 64 senders at 87-90 % goodput (every sender a few packets per
/// window: the arrivals' jitter went unbuffered) and a receiver with half its senders
/// limited elsewhere at 88 %; 98 % gives 93 % and 94 % (simulator scenario 2), 100 %
/// let the queue of a 256-sender incast's first packets stand (worst window 22 %).
pub const HANDOUT_PERCENT: u64 = 98;

/// Arrival below this share of the capacity (per 1024) raises the level.
pub const RAISE_BELOW: u64 = 973; // 95 %
/// What a raise aims the arrival rate at, per 1024 of the capacity.
pub const AIM: u64 = 1014; // 99 %
/// A sender that sent at least this share of its offer over an epoch (per 1024) takes
/// all it is offered.
pub const FULL: u64 = 768; // 75 %

/// Per-node fair-share estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShare {
    /// Inbound capacity in units of 1000 bytes/s.
    pub capacity: u32,
    /// Shortest epoch in nanoseconds (about one base round trip).
    pub epoch_ns: u64,
    /// Nanoseconds one full packet takes at `capacity`.
    pub pkt_ns: u64,
    /// Bytes each datagram takes on the wire beyond those noted (Ethernet, IP, UDP,
    /// FCS; 0 until set): the arrival rate is compared with the capacity in wire bytes.
    pub wire_overhead: u32,
    /// Datagrams received in the current epoch.
    cur_pkts: u32,
    /// The current epoch's stamp, never 0 (a slot's 0: never seen).
    epoch: u16,
    epoch_start: Instant,
    cur: u32,
    prev: u32,
    /// Bytes received in the current epoch.
    cur_bytes: u64,
    /// Nanoseconds one full packet took at the arrival rate of the last full epoch (0:
    /// none measured).
    seen_pkt_ns: u64,
    pkt_bytes: u32,
    /// Epoch length in shortest epochs, `1..=MAX_EPOCHS`.
    stretch: u16,
    /// Whether a recent sender returned after skipping an epoch, in this epoch.
    skipped: bool,
    /// Whether the level was raised at the start of this epoch.
    raised: bool,
    /// Whether the previous epoch arrived below [`RAISE_BELOW`].
    low: bool,
    /// Senders seen in this epoch that sent at least `full_bytes` in the previous one.
    full: u32,
    /// Bytes a sender sends in the previous epoch if it takes [`FULL`] of its offer.
    full_bytes: u64,
    /// The max-min level offered above `capacity / n` (1000 bytes/s units; 0: none).
    level: u32,
}

impl FairShare {
    /// A new estimator for `capacity` (1000 bytes/s units; set it a little below line
    /// rate, [`HANDOUT_PERCENT`], so standing queues drain), shortest epoch `epoch_ns` and
    /// full packets of `pkt_bytes` on the wire.
    pub fn new(capacity: u32, epoch_ns: u64, pkt_bytes: u32) -> FairShare {
        let pkt_ns = u64::from(pkt_bytes).saturating_mul(1_000_000) / u64::from(capacity.max(1));
        FairShare {
            capacity,
            epoch_ns: epoch_ns.max(1),
            pkt_ns,
            wire_overhead: 0,
            cur_pkts: 0,
            epoch: 1,
            epoch_start: Instant::ZERO,
            cur: 0,
            prev: 0,
            cur_bytes: 0,
            seen_pkt_ns: 0,
            pkt_bytes: pkt_bytes.max(1),
            stretch: 1,
            skipped: false,
            raised: false,
            low: false,
            full: 0,
            full_bytes: u64::MAX,
            level: 0,
        }
    }

    /// Notes that the connection owning `slot` received a datagram of `bytes` bytes of
    /// data at `now`; returns its share (1000 bytes/s units, never 0 unless capacity is 0).
    pub fn note(&mut self, now: Instant, slot: &mut u32, bytes: u32) -> u32 {
        let since = now.nanos_since(self.epoch_start);
        let len = self.epoch_len();
        if since >= len {
            // One idle epoch or more: the previous count is that of the last full epoch.
            let idle = since >= len.saturating_mul(2);
            let offered = u64::from(self.share());
            self.level = if idle { 0 } else { self.next_level(since) };
            // kB/s × ns = 10^-6 bytes.
            self.full_bytes = if idle {
                u64::MAX
            } else {
                (offered.saturating_mul(since) / 1_000_000).saturating_mul(FULL) / 1024
            };
            self.full = 0;
            self.prev = if idle { 0 } else { self.cur };
            self.seen_pkt_ns = if idle || self.cur_bytes == 0 {
                0
            } else {
                since.saturating_mul(u64::from(self.pkt_bytes)) / self.cur_bytes
            };
            self.cur_bytes = 0;
            self.cur_pkts = 0;
            self.cur = 0;
            self.stretch = if self.skipped {
                self.stretch.saturating_mul(2)
            } else {
                self.stretch - self.stretch / 8
            }
            .clamp(1, MAX_EPOCHS as u16);
            self.skipped = false;
            self.epoch = self.epoch.wrapping_add(1).max(1);
            self.epoch_start = now;
        }
        self.cur_bytes = self.cur_bytes.saturating_add(u64::from(bytes));
        self.cur_pkts = self.cur_pkts.saturating_add(1);
        let stamp = (*slot >> 16) as u16;
        let mut units = *slot & 0xffff;
        if stamp != self.epoch {
            // Stamps skip 0: across a wrap the 16-bit difference counts one too many.
            let mut gap = self.epoch.wrapping_sub(stamp);
            if stamp > self.epoch {
                gap = gap.wrapping_sub(1);
            }
            if stamp != 0 && (2..=8).contains(&gap) {
                self.skipped = true;
            }
            if stamp != 0 && gap == 1 && u64::from(units) * 256 >= self.full_bytes {
                self.full = self.full.saturating_add(1);
            }
            units = 0;
            self.cur = self.cur.saturating_add(1);
        }
        units = (units + bytes.div_ceil(256)).min(0xffff);
        *slot = u32::from(self.epoch) << 16 | units;
        self.share()
    }

    /// The level for the next epoch, from the one that just ended after `since` ns
    /// (see the module documentation); sets `raised`.
    fn next_level(&mut self, since: u64) -> u32 {
        let was_raised = core::mem::replace(&mut self.raised, false);
        let cap = u64::from(self.capacity);
        let fair = cap / u64::from(self.cur.max(1));
        let offered = u64::from(self.joined_level()).max(fair);
        // Arrival rate on the wire, 1000 bytes/s: bytes per ns times 10^6.
        let wire = self
            .cur_bytes
            .saturating_add(u64::from(self.cur_pkts).saturating_mul(u64::from(self.wire_overhead)));
        let rate = wire.saturating_mul(1_000_000) / since.max(1);
        let low = rate.saturating_mul(1024) < cap.saturating_mul(RAISE_BELOW);
        let was_low = core::mem::replace(&mut self.low, low);
        let next = if rate > cap {
            offered.saturating_mul(cap) / rate
        } else if low && was_low && self.cur == self.prev && self.full > 0 && !was_raised {
            self.raised = true;
            let aim = cap.saturating_mul(AIM) / 1024;
            (offered.saturating_mul(aim) / rate.max(1))
                .min(offered.saturating_mul(5) / 4)
                .min(cap)
        } else {
            offered
        };
        // Within 1/16 of the count's share: none (an idle level drifts back to it).
        if next.saturating_mul(16) > fair.saturating_mul(17) {
            next as u32
        } else {
            0
        }
    }

    /// Current epoch length: the stretched shortest epoch, and at least `4 * active` full
    /// packets at the capacity or at the last epoch's arrival rate, whichever is slower;
    /// beyond the capacity's bound, at most `MAX_EPOCHS * epoch_ns`.
    pub fn epoch_len(&self) -> u64 {
        let n = u64::from(self.cur.max(self.prev));
        let per_pkt = self.pkt_ns.max(self.seen_pkt_ns);
        let want = n
            .saturating_mul(4)
            .saturating_mul(per_pkt)
            .max(self.epoch_ns.saturating_mul(u64::from(self.stretch)));
        let cap = self
            .epoch_ns
            .saturating_mul(MAX_EPOCHS)
            .max(n.saturating_mul(4).saturating_mul(self.pkt_ns));
        self.epoch_ns.max(want.min(cap))
    }

    /// Current share per active sender: `capacity / n`, or the max-min level above it.
    /// At least 1 unless the capacity is 0: a hint of 0 on the wire means none (the
    /// sender would go unpaced), and more senders than units of capacity would round
    /// each share down to it.
    pub fn share(&self) -> u32 {
        let n = self.cur.max(self.prev).max(1);
        (self.capacity / n)
            .max(self.joined_level())
            .max(1)
            .min(self.capacity)
    }

    /// The level, scaled down by `prev / cur` when senders joined in this epoch: it was
    /// set for the previous epoch's senders (else each newcomer would be offered what
    /// the few had, until the level decays by capacity / arrival epoch after epoch).
    fn joined_level(&self) -> u32 {
        if self.cur > self.prev {
            (u64::from(self.level) * u64::from(self.prev) / u64::from(self.cur)) as u32
        } else {
            self.level
        }
    }

    /// The max-min level above `capacity / n` (1000 bytes/s units; 0: none).
    pub fn level(&self) -> u32 {
        self.level
    }

    /// Active senders counted (max of this and the previous epoch).
    pub fn active(&self) -> u32 {
        self.cur.max(self.prev)
    }
}
