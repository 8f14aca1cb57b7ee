// SPDX-License-Identifier: GPL-2.0

//! A device's planes (Documentation/extension.rst, "Planes"): the netdevs of
//! a multi-plane host, each leading to the same peers' addresses over its own
//! network. Plane 0 is the netdev the device was added on; the extension
//! API's "set planes" adds the others. Each datagram goes out on the plane
//! its [`Transmit`] names (`proto::plane`: paths spread over the working
//! planes, a moved path goes to the next one, ACKs go back the way their
//! data came), by the ifindex it is bound to; datagrams are taken from any
//! plane.
//!
//! Read on every transmit and receive, so kept in atomics: a change races
//! with a datagram at worst by sending it once more on the old plane.

use crate::ffi::rdma::ext::{netdev_state, PlaneInfo, MAX_PLANES};
use crate::proto::conn::Transmit;
use core::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, Ordering::Relaxed};
use kernel::prelude::*;

/// The planes of one device.
#[pin_data]
pub(crate) struct Planes {
    /// Each plane's netdev; `[0]` the device's own.
    ifindex: [AtomicI32; MAX_PLANES],
    /// How many planes (1 until set).
    n: AtomicU8,
    /// Bit `k`: plane `k`'s netdev is up with carrier.
    up: AtomicU8,
    /// Bit `k`: plane `k`'s netdev went away (never up again until set).
    gone: AtomicU8,
    /// Datagrams sent on each plane.
    tx: [AtomicU64; MAX_PLANES],
    /// Serialises [`Planes::set`] and [`Planes::netdev_event`].
    #[pin]
    lock: kernel::sync::Mutex<()>,
}

impl Planes {
    /// One plane, the device's netdev `ifindex`.
    pub(crate) fn new(ifindex: i32) -> impl PinInit<Self> {
        kernel::pin_init!(Planes {
            ifindex: core::array::from_fn(|i| AtomicI32::new(if i == 0 { ifindex } else { 0 })),
            n: AtomicU8::new(1),
            up: AtomicU8::new(1),
            gone: AtomicU8::new(0),
            tx: [const { AtomicU64::new(0) }; MAX_PLANES],
            lock <- kernel::new_mutex!((), "metaroce_planes"),
        })
    }

    /// How many planes there are, and which work (bit per plane), for the
    /// device's connections (`Connection::set_planes`).
    pub(crate) fn state(&self) -> (u8, u8) {
        let n = self.n.load(Relaxed);
        (n, self.up.load(Relaxed) & !self.gone.load(Relaxed))
    }

    /// The plane datagram `t` goes out on (plane 0 for a plane the device
    /// does not have), and that plane's netdev.
    pub(crate) fn oif(&self, t: &Transmit) -> (usize, i32) {
        let k = usize::from(t.plane);
        let k = if k < usize::from(self.n.load(Relaxed)) {
            k
        } else {
            0
        };
        (k, self.ifindex.get(k).map_or(0, |i| i.load(Relaxed)))
    }

    /// Counts `n` datagrams sent on plane `k` ([`Self::oif`]'s).
    pub(crate) fn sent(&self, k: usize, n: u64) {
        if let Some(c) = self.tx.get(k) {
            c.fetch_add(n, Relaxed);
        }
    }

    /// The plane of netdev `iif` (a received datagram's), 0 if none.
    pub(crate) fn plane_of_iif(&self, iif: i32) -> u8 {
        let n = usize::from(self.n.load(Relaxed));
        self.ifindex
            .iter()
            .take(n)
            .position(|i| i.load(Relaxed) == iif)
            .map_or(0, |k| k as u8)
    }

    /// The extension API's "set planes" (see [`crate::ffi::rdma::Driver::dev_set_planes`]);
    /// `own` is the device's netdev.
    pub(crate) fn set(&self, own: i32, list: &[i32]) -> Result {
        if list.is_empty() || list.len() > MAX_PLANES || list.first() != Some(&own) {
            return Err(EINVAL);
        }
        let mut up = 0u8;
        for (k, &i) in list.iter().enumerate() {
            if list[..k].contains(&i) {
                return Err(EINVAL);
            }
            let (is_up, loopback) = netdev_state(i).ok_or(ENODEV)?;
            if loopback {
                return Err(EINVAL);
            }
            up |= u8::from(is_up) << k;
        }
        let _g = self.lock.lock();
        // Fewer planes first, so that a datagram sent meanwhile never picks
        // a plane whose netdev is being written.
        let n = list.len() as u8;
        self.n.store(self.n.load(Relaxed).min(n), Relaxed);
        for (k, slot) in self.ifindex.iter().enumerate() {
            slot.store(list.get(k).copied().unwrap_or(0), Relaxed);
            if let Some(c) = self.tx.get(k) {
                c.store(0, Relaxed);
            }
        }
        self.gone.store(0, Relaxed);
        self.up.store(up, Relaxed);
        self.n.store(n, Relaxed);
        Ok(())
    }

    /// The extension API's "query planes": the planes in order, how many.
    pub(crate) fn query(&self, out: &mut [PlaneInfo; MAX_PLANES]) -> usize {
        let n = usize::from(self.n.load(Relaxed));
        let (up, gone) = (self.up.load(Relaxed), self.gone.load(Relaxed));
        for (k, o) in out.iter_mut().enumerate().take(n) {
            *o = PlaneInfo {
                ifindex: self.ifindex[k].load(Relaxed),
                up: up & (1 << k) != 0 && gone & (1 << k) == 0,
                gone: gone & (1 << k) != 0,
                tx_packets: self.tx[k].load(Relaxed),
            };
        }
        n
    }

    /// Netdev `ifindex` is now up with carrier or not, or went away.
    pub(crate) fn netdev_event(&self, ifindex: i32, up: bool, gone: bool) {
        let _g = self.lock.lock();
        let n = usize::from(self.n.load(Relaxed));
        for (k, slot) in self.ifindex.iter().enumerate().take(n) {
            if slot.load(Relaxed) != ifindex {
                continue;
            }
            let bit = 1u8 << k;
            if gone {
                self.gone.fetch_or(bit, Relaxed);
            }
            if up {
                self.up.fetch_or(bit, Relaxed);
            } else {
                self.up.fetch_and(!bit, Relaxed);
            }
        }
    }
}
