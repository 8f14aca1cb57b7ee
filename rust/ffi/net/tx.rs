// SPDX-License-Identifier: GPL-2.0

//! The transmit side of [`super::UdpTunnel`]: a datagram built in its own
//! skb ([`TxDatagram`]: headroom for every header, payload bytes
//! initialized only as they are handed out, one UDP GSO burst when it holds
//! a run), and the held output routes it goes through ([`RouteCache`]).

use super::{b, errno, neg};
use core::{ptr, slice};
use kernel::ffi::c_int;
use kernel::prelude::*;

/// A held output route.
///
/// # Invariants
///
/// The pointer is a non-null `dst_entry` we hold a reference to.
pub(super) struct Route(*mut b::dst_entry);

impl Route {
    /// The result of a `metaroce_route*` lookup: `EHOSTUNREACH` for none.
    pub(super) fn new(dst: *mut b::dst_entry) -> Result<Self> {
        if dst.is_null() {
            Err(errno(neg(b::EHOSTUNREACH)))
        } else {
            Ok(Route(dst))
        }
    }

    /// Whether the route's netdev takes UDP GSO bursts
    /// (`NETIF_F_GSO_UDP_L4`).
    pub(super) fn gso_udp(&self) -> bool {
        // SAFETY: we hold a reference to the route (type invariant); the
        // helper reads its netdev under RCU (a held route's netdev may be
        // swapped and released), in any context.
        unsafe { b::metaroce_dst_gso_udp(self.0) }
    }

    /// Gives the reference away.
    pub(super) fn into_raw(self) -> *mut b::dst_entry {
        let dst = self.0;
        core::mem::forget(self);
        dst
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        // SAFETY: we hold a reference (type invariant); released once.
        unsafe { b::dst_release(self.0) };
    }
}

/// An skb being built for transmission.
///
/// # Invariants
///
/// The pointer is a non-null skb we own.
pub(super) struct TxSkb(*mut b::sk_buff);

// SAFETY: an skb we own may be filled, sent or freed on any CPU.
unsafe impl Send for TxSkb {}

impl TxSkb {
    /// Gives the skb away.
    pub(super) fn into_raw(self) -> *mut b::sk_buff {
        let skb = self.0;
        core::mem::forget(self);
        skb
    }
}

impl Drop for TxSkb {
    fn drop(&mut self) {
        // SAFETY: we own the skb (type invariant).
        unsafe { b::metaroce_kfree_skb(self.0) };
    }
}

/// The largest UDP payload behind an IPv4 header.
pub(crate) const MAX_UDP_PAYLOAD: usize = 65535 - 20 - 8;

/// A datagram being written straight into the skb that will carry it (no
/// copy on the way out): headroom for any link-layer, IP and UDP headers,
/// and up to `cap` bytes of UDP payload, zeroed as the writer asks for them
/// ([`TxDatagram::buf_at`]). Reusable until sent: a datagram nothing was
/// written to (or whose writer gave up) may be kept for the next one. It
/// may carry a run of same-sized datagrams, sent as one UDP GSO burst
/// ([`TxDatagram::set_segment`]).
///
/// # Invariants
///
/// `skb` is linear; the first `skb->len` bytes at its `data` are
/// initialized, and at most `cap`; its tailroom holds the rest of `cap`.
/// `seg` is 0 or the UDP payload of each datagram of the burst.
pub(crate) struct TxDatagram {
    skb: TxSkb,
    cap: usize,
    seg: u16,
}

impl TxDatagram {
    /// A datagram of up to `cap` bytes (none zeroed yet). `EMSGSIZE` if `cap`
    /// exceeds a UDP datagram, `ENOMEM`. Atomic allocation: any context.
    pub(crate) fn new(cap: usize) -> Result<Self> {
        if cap > MAX_UDP_PAYLOAD {
            return Err(errno(neg(b::EMSGSIZE)));
        }
        // SAFETY: any context; `cap` fits a `c_uint` (checked above).
        let skb = unsafe { b::metaroce_tx_skb_new(cap as u32) };
        if skb.is_null() {
            return Err(ENOMEM);
        }
        // The helper put nothing and left `cap` bytes of tailroom: the
        // invariants hold.
        Ok(TxDatagram {
            skb: TxSkb(skb),
            cap,
            seg: 0,
        })
    }

    /// How many payload bytes it can carry.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// The payload bytes, `cap` of them (zeroed, or what earlier writers
    /// left there).
    pub(crate) fn buf(&mut self) -> &mut [u8] {
        self.buf_at(0, self.cap)
    }

    /// Payload bytes `off .. off + len` (cut at `cap`): zeroed, or what
    /// earlier writers left there.
    pub(crate) fn buf_at(&mut self, off: usize, len: usize) -> &mut [u8] {
        let end = off.saturating_add(len).min(self.cap);
        let start = off.min(end);
        // SAFETY: the skb is ours and linear (type invariants).
        let have = unsafe { (*self.skb.0).len } as usize;
        if end > have {
            // SAFETY: the skb is ours; its tailroom holds `cap - have` bytes
            // (type invariants) and `end <= cap`; the bytes put are zeroed,
            // so the first `end` bytes are initialized and the invariants
            // still hold.
            unsafe { b::metaroce_skb_put_zero(self.skb.0, (end - have) as u32) };
        }
        // SAFETY: the skb is ours and linear with at least `end` initialized
        // bytes at `data` (above); nobody else sees it until it is sent, and
        // the slice borrows `self` mutably.
        unsafe {
            slice::from_raw_parts_mut(b::metaroce_skb_data(self.skb.0).add(start), end - start)
        }
    }

    /// Makes the payload a run of datagrams of `seg` bytes each, the last
    /// possibly shorter, to go out as one UDP GSO burst (each datagram its
    /// own UDP header and checksum, the same addresses, ports and IP
    /// header fields). 0, or a payload of at most `seg` bytes when it is
    /// sent: one datagram.
    pub(crate) fn set_segment(&mut self, seg: u16) {
        self.seg = seg;
    }

    /// The skb, trimmed to its first `len` bytes (at most those
    /// initialized), a GSO burst if [`Self::set_segment`] said so and it
    /// holds more than one segment.
    pub(super) fn trimmed(self, len: usize) -> TxSkb {
        let seg = self.seg;
        // SAFETY: the skb is ours; `skb_trim` never lengthens it.
        unsafe { b::skb_trim(self.skb.0, len.min(self.cap) as u32) };
        // SAFETY: the skb is ours and linear.
        let len = unsafe { (*self.skb.0).len } as usize;
        if seg != 0 && len > usize::from(seg) {
            // SAFETY: the skb is ours, not yet sent, and its payload is
            // longer than `seg` (the helper's precondition); the tunnel's
            // xmit pushes the UDP header the partial checksum starts at.
            unsafe { b::metaroce_skb_set_gso(self.skb.0, u32::from(seg)) };
        }
        self.skb
    }
}

/// What a cached IPv4 route was looked up for (network order).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct RouteKey {
    pub(super) src: u32,
    pub(super) dst: u32,
    pub(super) sport: u16,
    pub(super) oif: i32,
}

/// Slots of a [`RouteCache`].
pub(crate) const ROUTE_SLOTS: usize = 8;

/// Output routes of one sender, cached by slot (its paths, by index modulo
/// [`ROUTE_SLOTS`]), so that a datagram costs a `dst_check` rather than a
/// FIB lookup. IPv4 only: IPv6 datagrams are routed one by one. Each slot
/// is re-looked-up when its key (addresses, source port, netdev) changes or
/// `dst_check` finds the route stale (the routing tables changed). The user
/// serializes access (`&mut`).
///
/// # Invariants
///
/// Each non-null `dst` is a route we hold one reference to, looked up for
/// the slot's key.
pub(crate) struct RouteCache {
    dst: [*mut b::dst_entry; ROUTE_SLOTS],
    key: [RouteKey; ROUTE_SLOTS],
}

// SAFETY: route references may be used and released on any CPU.
unsafe impl Send for RouteCache {}

impl RouteCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        RouteCache {
            dst: [ptr::null_mut(); ROUTE_SLOTS],
            key: [RouteKey::default(); ROUTE_SLOTS],
        }
    }

    /// A held route for `key` through slot `slot % ROUTE_SLOTS`, or null
    /// with the errno in `err`.
    pub(super) fn route4(
        &mut self,
        sock: *mut b::socket,
        slot: usize,
        key: RouteKey,
        tos: u8,
        dport: u16,
        err: &mut c_int,
    ) -> *mut b::dst_entry {
        let i = slot % ROUTE_SLOTS;
        if self.key[i] != key {
            self.clear(i);
            self.key[i] = key;
        }
        // SAFETY: `sock` is the tunnel's live IPv4 socket (the caller's);
        // the slot is null or a route held for `key` (type invariants), so
        // the helper may reuse, replace or fill it, keeping one reference
        // in it; `err` is valid. Bottom halves are disabled by the caller.
        unsafe {
            b::metaroce_route4_cached(
                sock,
                &mut self.dst[i],
                key.src,
                key.dst,
                key.sport,
                dport,
                tos,
                key.oif,
                err,
            )
        }
    }

    /// Drops slot `i`'s route.
    fn clear(&mut self, i: usize) {
        let dst = core::mem::replace(&mut self.dst[i], ptr::null_mut());
        if !dst.is_null() {
            // SAFETY: we held a reference (type invariants), now given up.
            unsafe { b::dst_release(dst) };
        }
    }
}

impl Drop for RouteCache {
    fn drop(&mut self) {
        for i in 0..ROUTE_SLOTS {
            self.clear(i);
        }
    }
}
