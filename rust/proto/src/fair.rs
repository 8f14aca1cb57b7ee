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
//! it by an eighth. The state is per node (a device), plus one `u32` epoch stamp per
//! connection.

use super::time::Instant;

/// The longest epoch, in shortest epochs (`epoch_ns`): a trickle of data does not stretch
/// the count of active senders over seconds.
pub const MAX_EPOCHS: u64 = 64;

/// Per-node fair-share estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShare {
    /// Inbound capacity in units of 1000 bytes/s.
    pub capacity: u32,
    /// Shortest epoch in nanoseconds (about one base round trip).
    pub epoch_ns: u64,
    /// Nanoseconds one full packet takes at `capacity`.
    pub pkt_ns: u64,
    epoch: u32,
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
}

impl FairShare {
    /// A new estimator for `capacity` (1000 bytes/s units; set it a little below line rate,
    /// e.g. 95 %, so standing queues drain), shortest epoch `epoch_ns` and full packets of
    /// `pkt_bytes` on the wire.
    pub fn new(capacity: u32, epoch_ns: u64, pkt_bytes: u32) -> FairShare {
        let pkt_ns = u64::from(pkt_bytes).saturating_mul(1_000_000) / u64::from(capacity.max(1));
        FairShare {
            capacity,
            epoch_ns: epoch_ns.max(1),
            pkt_ns,
            epoch: 1,
            epoch_start: Instant::ZERO,
            cur: 0,
            prev: 0,
            cur_bytes: 0,
            seen_pkt_ns: 0,
            pkt_bytes: pkt_bytes.max(1),
            stretch: 1,
            skipped: false,
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
            self.prev = if idle { 0 } else { self.cur };
            self.seen_pkt_ns = if idle || self.cur_bytes == 0 {
                0
            } else {
                since.saturating_mul(u64::from(self.pkt_bytes)) / self.cur_bytes
            };
            self.cur_bytes = 0;
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
        if *slot != self.epoch {
            let gap = self.epoch.wrapping_sub(*slot);
            if *slot != 0 && (2..=8).contains(&gap) {
                self.skipped = true;
            }
            *slot = self.epoch;
            self.cur = self.cur.saturating_add(1);
        }
        self.share()
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

    /// Current share per active sender.
    pub fn share(&self) -> u32 {
        let n = self.cur.max(self.prev).max(1);
        self.capacity / n
    }

    /// Active senders counted (max of this and the previous epoch).
    pub fn active(&self) -> u32 {
        self.cur.max(self.prev)
    }
}
