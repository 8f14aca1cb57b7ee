// SPDX-License-Identifier: GPL-2.0

//! The device's receiver fair-share estimator (Documentation/transport.rst,
//! "Congestion control"; Documentation/device.rst, "Fair share"): one
//! [`FairShare`] per device, fed by every DATA packet that arrives for any of
//! its RC QPs, which returns each sending connection its share of the
//! device's inbound capacity on every ACK (the rate hint), as the simulator
//! does.
//!
//! Capacity: the `rx_mbps` module parameter, else the netdev's link speed
//! (ethtool), else [`FALLBACK_MBPS`]; [`HANDOUT_PERCENT`] (98 %) of it is
//! handed out. Epoch: the smallest RTT any connection of the device measured
//! (the base RTT), clamped to [[`MIN_EPOCH_NS`], one timer tick];
//! [`INIT_EPOCH_NS`] until a connection measured one.
//!
//! Locking: the estimator's lock is a leaf taken under the QP lock (held for
//! one `note`); the base RTT is an atomic.

use crate::ffi::sync::BhLock;
use crate::proto::fair::{FairShare, HANDOUT_PERCENT};
use crate::proto::time::Instant;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// Link speed assumed when the netdev does not report one (virtio-net
/// without a configured speed): 10 Gb/s, what veth reports.
pub(crate) const FALLBACK_MBPS: u32 = 10_000;
/// Epoch before any connection of the device measured an RTT, ns.
const INIT_EPOCH_NS: u64 = 1_000_000;
/// Shortest epoch, ns: a loopback QP's RTT (a few µs) must not make the
/// epoch so short that remote senders between two packets go uncounted.
const MIN_EPOCH_NS: u64 = 50_000;
/// Bytes a full packet takes on the wire beyond its payload (the MetaRoCE
/// data header allowance and Ethernet/IP/UDP, as the simulator counts).
const PKT_OVERHEAD: u32 = 60 + WIRE_OVERHEAD;
/// Bytes a datagram takes on the wire beyond its UDP payload (Ethernet with
/// FCS, IPv4, UDP; the `wire_overhead` of the connections' configuration).
const WIRE_OVERHEAD: u32 = 66;

/// A device's fair-share state.
#[pin_data]
pub(crate) struct DevFair {
    #[pin]
    est: BhLock<FairShare>,
    /// Smallest RTT sample of any connection of the device, ns (`u32::MAX`:
    /// none yet).
    base_rtt: AtomicU32,
    /// The longest epoch, ns (one timer tick).
    max_epoch: u64,
    /// Capacity handed out, 1000 bytes/s.
    pub(crate) capacity: u32,
    /// Where the capacity came from: the link speed in Mb/s it was derived
    /// from, and whether that was the `rx_mbps` parameter, the link, or the
    /// fallback.
    pub(crate) mbps: u32,
    pub(crate) source: &'static str,
}

impl DevFair {
    /// An estimator for a link of `link_mbps` (`None`: unknown), overridden by
    /// a non-zero `param_mbps`, for full packets of `mtu` payload bytes.
    pub(crate) fn new(
        param_mbps: u32,
        link_mbps: Option<u32>,
        mtu: u32,
        tick_ns: u64,
    ) -> impl PinInit<Self> {
        let (mbps, source) = match (param_mbps, link_mbps) {
            (0, Some(l)) => (l, "link"),
            (0, None) => (FALLBACK_MBPS, "fallback"),
            (p, _) => (p, "rx_mbps"),
        };
        // Mb/s to 1000 bytes/s: * 1e6 / 8 / 1000 = * 125.
        let cap = (u64::from(mbps) * 125 * HANDOUT_PERCENT / 100).clamp(1, u64::from(u32::MAX));
        let capacity = cap as u32;
        let max_epoch = tick_ns.max(MIN_EPOCH_NS);
        let mut est = FairShare::new(capacity, INIT_EPOCH_NS.min(max_epoch), mtu + PKT_OVERHEAD);
        est.wire_overhead = WIRE_OVERHEAD;
        pin_init!(DevFair {
            est <- crate::ffi::sync::new_bh_lock!(est, "metaroce_fair"),
            base_rtt: AtomicU32::new(u32::MAX),
            max_epoch,
            capacity,
            mbps,
            source,
        })
    }

    /// Notes that the connection owning `slot` received a DATA packet of
    /// `bytes` at `now`; returns its share (the hint for its ACKs). Called
    /// under the QP lock; takes the estimator's lock for the call.
    pub(crate) fn note(&self, now: Instant, slot: &mut u32, bytes: u32) -> u32 {
        let rtt = self.base_rtt.load(Ordering::Relaxed);
        let mut f = self.est.lock();
        if rtt != u32::MAX {
            f.epoch_ns = u64::from(rtt).clamp(MIN_EPOCH_NS, self.max_epoch);
        }
        f.note(now, slot, bytes)
    }

    /// Records a connection's smallest RTT sample (ns, 0 = none): the base
    /// RTT is the smallest over the device's connections.
    pub(crate) fn note_rtt(&self, rtt: u32) {
        if rtt != 0 {
            self.base_rtt.fetch_min(rtt, Ordering::Relaxed);
        }
    }

    /// The base RTT measured so far, ns (`None`: none yet).
    pub(crate) fn base_rtt(&self) -> Option<u32> {
        let r = self.base_rtt.load(Ordering::Relaxed);
        (r != u32::MAX).then_some(r)
    }
}
