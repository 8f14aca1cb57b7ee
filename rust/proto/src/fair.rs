//! Receiver fair-share rate hints.
//!
//! A receiving node divides its inbound capacity among the connections that sent it data in
//! the last epoch (about one round trip) and returns each its share on every ACK. The state
//! is per node (a device), plus one `u32` epoch stamp per connection.

use super::time::Instant;

/// Per-node fair-share estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShare {
    /// Inbound capacity in units of 1000 bytes/s.
    pub capacity: u32,
    /// Epoch length in nanoseconds (about one base round trip).
    pub epoch_ns: u64,
    epoch: u32,
    epoch_start: Instant,
    cur: u32,
    prev: u32,
}

impl FairShare {
    /// A new estimator for `capacity` (1000 bytes/s units) and epoch length `epoch_ns`.
    pub fn new(capacity: u32, epoch_ns: u64) -> FairShare {
        FairShare {
            capacity,
            epoch_ns: epoch_ns.max(1),
            epoch: 1,
            epoch_start: Instant::ZERO,
            cur: 0,
            prev: 0,
        }
    }

    /// Notes that the connection owning `slot` received data at `now`; returns its share
    /// (1000 bytes/s units, never 0 unless capacity is 0).
    pub fn note(&mut self, now: Instant, slot: &mut u32) -> u32 {
        let since = now.nanos_since(self.epoch_start);
        if since >= self.epoch_ns {
            // One idle epoch or more: the previous count is that of the last full epoch.
            self.prev = if since >= self.epoch_ns.saturating_mul(2) {
                0
            } else {
                self.cur
            };
            self.cur = 0;
            self.epoch = self.epoch.wrapping_add(1).max(1);
            self.epoch_start = now;
        }
        if *slot != self.epoch {
            *slot = self.epoch;
            self.cur = self.cur.saturating_add(1);
        }
        self.share()
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
