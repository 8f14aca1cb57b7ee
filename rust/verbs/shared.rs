// SPDX-License-Identifier: GPL-2.0

//! What every object of a device shares: its attributes, MR, MW and AH
//! tables, counters, the receiver fair-share estimator and the module's
//! transport. Generic over the transport's
//! endpoint (the QP) so that the QP code and the device code both depend on
//! this file and not on each other.

use super::ah::AhTable;
use super::counters::NUM_COUNTERS;
use super::fair::DevFair;
use super::mr::MrTable;
use super::mw::MwTable;
use super::planes::Planes;
use crate::ffi::net::IpAddr;
use crate::ffi::rdma::DeviceAttrs;
use crate::net::{Endpoint, Transport};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// An endpoint kind whose instances a device groups: the QP, whose RC
/// instances to one peer may share a connection (`Peers` holds them).
pub(crate) trait Grouped: Endpoint {
    /// The device's table of groups.
    type Peers: Send + Sync;
}

/// What QPs, CQs and MRs of a device share: its limits, its MRs and the
/// module's transport.
#[pin_data]
pub(crate) struct DevShared<P: Grouped> {
    pub(crate) attrs: DeviceAttrs,
    #[pin]
    pub(crate) mrs: MrTable,
    #[pin]
    pub(crate) ahs: AhTable,
    #[pin]
    pub(crate) mws: MwTable,
    pub(crate) transport: Arc<Transport<P>>,
    /// The ifindex of the device's netdev (its GSI QP's key).
    pub(crate) ifindex: i32,
    /// Number of the next SRQ (`srq_num` of the rxe ABI).
    pub(crate) next_srq_num: core::sync::atomic::AtomicU32,
    /// The device counters ([`super::counters`]).
    pub(super) counters: [AtomicU64; NUM_COUNTERS],
    /// The receiver fair-share estimator ([`super::fair`]).
    #[pin]
    pub(crate) fair: DevFair,
    /// How late the QP timers of the device fire, ns
    /// ([`crate::proto::time::timer_lag`]).
    pub(crate) timer_lag: AtomicU64,
    /// RC QPs to one peer share a connection (the `shared` module parameter
    /// when the device was added).
    pub(crate) shared: bool,
    /// A datagram of the other connection mode was reported in the kernel log
    /// ([`DevShared::note_mode_mismatch`]).
    pub(crate) mode_warned: AtomicBool,
    /// The connections the device's QPs share, by peer.
    #[pin]
    pub(crate) peers: P::Peers,
    /// The device's planes ([`super::planes`]).
    #[pin]
    pub(crate) planes: Planes,
}

impl<P: Grouped> DevShared<P> {
    /// Adds `n` to counter `c` ([`super::counters`]).
    pub(crate) fn count(&self, c: usize, n: u64) {
        if let Some(x) = self.counters.get(c) {
            x.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Notes a datagram from `src` dropped because its connection mode is not
    /// this device's (`rx_drop_mode_mismatch`): the first one is reported in
    /// the kernel log, with what to do about it, since the QPs that meet it
    /// end in *retry exceeded* and that alone does not say why.
    pub(crate) fn note_mode_mismatch(&self, src: &IpAddr) {
        if self.mode_warned.swap(true, Ordering::Relaxed) {
            return;
        }
        let (theirs, ours) = if self.shared {
            ("a connection per QP", "shared connections (shared=1)")
        } else {
            ("shared connections", "a connection per QP (shared=0)")
        };
        pr_warn!(
            "ifindex {}: {} runs {}, this device {}: RC QPs between them cannot \
             connect (rx_drop_mode_mismatch); add both devices with the same \
             `shared` module parameter\n",
            self.ifindex,
            src,
            theirs,
            ours
        );
    }

    /// Notes that a QP timer armed for `deadline` (ns) fired at `now`.
    pub(crate) fn note_timer(&self, deadline: u64, now: u64) {
        let late = now.saturating_sub(deadline);
        // A lost race with another CPU's update only drops one sample.
        let old = self.timer_lag.load(Ordering::Relaxed);
        let new = crate::proto::time::timer_lag(old, late);
        if new != old {
            self.timer_lag.store(new, Ordering::Relaxed);
        }
    }

    /// The pacing slack the device's timers call for, µs
    /// ([`crate::proto::time::pacing_slack_us`]).
    pub(crate) fn pacing_slack_us(&self) -> u16 {
        crate::proto::time::pacing_slack_us(self.timer_lag.load(Ordering::Relaxed))
    }

    /// The counters' current values, in [`super::counters`] order.
    pub(crate) fn read_counters(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.counters.iter()) {
            *o = c.load(Ordering::Relaxed);
        }
    }
}
