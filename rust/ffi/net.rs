// SPDX-License-Identifier: GPL-2.0

//! Kernel UDP tunnel sockets: the transport's datagrams in and out.
//!
//! [`UdpTunnel`] binds an IPv4 and an IPv6 (v6-only) kernel UDP socket to
//! one port in `init_net` and sets them up as UDP tunnel sockets
//! (`setup_udp_tunnel_sock`), the way `rdma_rxe` and the kernel's UDP
//! encapsulations do: the UDP layer checks the checksum and hands every
//! datagram to the socket's `encap_rcv` hook in softirq, which here calls
//! [`UdpReceiver::receive`] with the payload and always consumes the skb.
//! [`UdpTunnel::send_datagram`] routes a datagram built in its own skb
//! ([`TxDatagram`], through a [`RouteCache`] when given) and hands it to
//! `udp_tunnel_xmit_skb` / `udp_tunnel6_xmit_skb`, which add the UDP and IP
//! headers (and the checksum, offloaded when the egress netdev can).
//!
//! # Invariants
//!
//! - The `sk_user_data` of both sockets points to the tunnel's [`Shared`],
//!   a heap allocation that outlives the sockets: [`UdpTunnel`]'s `Drop`
//!   releases them (`udp_tunnel_sock_release` clears `sk_user_data` and waits
//!   for an RCU grace period) and waits for one more grace period before the
//!   allocation is freed. The receive path runs inside an RCU read-side
//!   critical section, so no `encap_rcv` call is running or can start once
//!   `Drop` returns.

use super::bindings as b;
use super::sync::BhDisabled;
use core::ptr;
use core::slice;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::error::Error;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

mod tx;
use tx::{Route, RouteKey};
pub(crate) use tx::{RouteCache, TxDatagram, MAX_UDP_PAYLOAD};

/// An IP address, as bytes in network order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IpAddr {
    /// An IPv4 address.
    V4([u8; 4]),
    /// An IPv6 address.
    V6([u8; 16]),
}

/// The address as the kernel prints `%pI4` and `%pI6` (eight groups of four
/// hex digits, not compressed).
impl core::fmt::Display for IpAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            IpAddr::V4([a, b, c, d]) => write!(f, "{a}.{b}.{c}.{d}"),
            IpAddr::V6(x) => {
                for (i, g) in x.chunks_exact(2).enumerate() {
                    let sep = if i == 0 { "" } else { ":" };
                    write!(f, "{sep}{:04x}", u16::from_be_bytes([g[0], g[1]]))?;
                }
                Ok(())
            }
        }
    }
}

impl IpAddr {
    /// The ifindex of the netdev (in `init_net`) that owns this local
    /// address, if any.
    pub(crate) fn local_ifindex(&self) -> Option<i32> {
        // SAFETY: the helper reads 4 or 16 bytes, which the variant holds.
        let i = unsafe {
            match self {
                IpAddr::V4(a) => b::metaroce_local_ifindex(false, a.as_ptr()),
                IpAddr::V6(a) => b::metaroce_local_ifindex(true, a.as_ptr()),
            }
        };
        (i > 0).then_some(i)
    }

    /// The address of a RoCE v2 GID: an IPv4-mapped IPv6 address
    /// (`::ffff:a.b.c.d`) is IPv4, anything else IPv6 (as `rdma_gid2ip`).
    pub(crate) fn from_gid(gid: &[u8; 16]) -> IpAddr {
        match *gid {
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d] => IpAddr::V4([a, b, c, d]),
            _ => IpAddr::V6(*gid),
        }
    }

    /// The RoCE v2 GID of the address: IPv4 as `::ffff:a.b.c.d`.
    pub(crate) fn to_gid(self) -> [u8; 16] {
        match self {
            IpAddr::V4([a, b, c, d]) => [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d],
            IpAddr::V6(gid) => gid,
        }
    }
}

/// IP ECN codepoints (RFC 3168), the low two bits of the TOS / traffic class.
pub(crate) mod ecn {
    /// Not ECN-capable transport.
    pub(crate) const NOT_ECT: u8 = 0;
    /// ECN-capable transport, ECT(0): what [`super::UdpTunnel::send`] marks.
    pub(crate) const ECT0: u8 = 2;
    /// Congestion experienced.
    pub(crate) const CE: u8 = 3;
}

/// What the IP and UDP headers of a received datagram said.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RxMeta {
    /// Source address.
    pub(crate) src: IpAddr,
    /// Destination address (one of ours).
    pub(crate) dst: IpAddr,
    /// UDP source port.
    pub(crate) src_port: u16,
    /// The IP ECN field is CE (congestion experienced).
    pub(crate) ce: bool,
    /// The IP ECN field, 0..=3 (see [`ecn`]).
    pub(crate) ecn: u8,
    /// The ifindex of the netdev it came in on (`skb_iif`).
    pub(crate) iif: i32,
}

/// Receive hook of a [`UdpTunnel`].
pub(crate) trait UdpReceiver: Send + Sync + 'static {
    /// Bytes of a datagram's UDP payload that [`Self::takes_pieces`] needs
    /// to see (the tunnel pulls that many, or the whole datagram, into the
    /// first piece).
    const HEAD: usize = 0;

    /// Whether the receiver takes the datagram whose UDP payload starts with
    /// `head` (at least [`Self::HEAD`] bytes, or all of it) in two pieces,
    /// as the device left it: its linear part and one page fragment, with
    /// no copy. Otherwise, as by default, the tunnel linearizes it first (a
    /// copy, and an allocation when the skb's head has no room).
    fn takes_pieces(&self, _head: &[u8]) -> bool {
        false
    }

    /// Called in softirq, inside an RCU read-side critical section, for every
    /// datagram to the tunnel's port, with the UDP payload as `head` then
    /// `tail` back to back (`tail` is empty unless [`Self::takes_pieces`]
    /// said yes; both live for the call only). Must not sleep.
    fn receive(&self, head: &[u8], tail: &[u8], meta: &RxMeta);
}

/// What the sockets' `sk_user_data` points to (see the module invariants).
struct Shared<R> {
    receiver: Arc<R>,
    /// Datagrams dropped before the receiver: UDP length inconsistent with
    /// the skb, an IP header we cannot read, or no memory to linearize.
    malformed: AtomicU64,
}

/// Kernel UDP tunnel sockets bound to one port in `init_net`, IPv4 and (if
/// the kernel has IPv6 enabled) IPv6. Dropping it closes both and guarantees
/// that no receive callback runs afterwards; it sleeps, so drop it in process
/// context.
///
/// # Invariants
///
/// `sock4` is a live UDP tunnel socket owned by this object; `sock6` is one
/// too, or null when IPv6 is unavailable. Both carry `shared` as
/// `sk_user_data` and `encap_rcv::<R>` as their hook.
pub(crate) struct UdpTunnel<R: UdpReceiver> {
    shared: KBox<Shared<R>>,
    sock4: *mut b::socket,
    sock6: *mut b::socket,
    port: u16,
}

// SAFETY: the sockets are kernel objects usable from any thread (the xmit
// functions and release take their own locks); `Shared<R>` is `Send + Sync`
// because `R` is.
unsafe impl<R: UdpReceiver> Send for UdpTunnel<R> {}
// SAFETY: see `Send`; `&UdpTunnel` only sends datagrams and reads counters.
unsafe impl<R: UdpReceiver> Sync for UdpTunnel<R> {}

/// The MTU of the netdev (in `init_net`) whose index is `ifindex`, read now;
/// `None` if there is no such netdev.
pub(crate) fn netdev_mtu(ifindex: i32) -> Option<u32> {
    // SAFETY: the helper looks the index up under RCU and reads one field;
    // any value is acceptable.
    let mtu = unsafe { b::metaroce_ifindex_mtu(ifindex) };
    (mtu != 0).then_some(mtu)
}

/// Whether `e`, from [`UdpTunnel::send`], means there is no route to the
/// destination (`EHOSTUNREACH`, `ENETUNREACH`), as opposed to a datagram
/// lost for want of memory or queue room.
pub(crate) fn is_unreachable(e: Error) -> bool {
    let n = e.to_errno();
    n == neg(b::EHOSTUNREACH) || n == neg(b::ENETUNREACH)
}

/// A negative errno from C as an [`Error`].
fn errno(e: c_int) -> Error {
    Error::from_errno(e)
}

/// `-code` for a positive errno constant of the bindings.
fn neg(code: u32) -> c_int {
    -(code as c_int)
}

impl<R: UdpReceiver> UdpTunnel<R> {
    /// Opens the sockets on `port`. Sleeps (process context only).
    ///
    /// Errors: `EADDRINUSE` if the port is taken (for IPv4 or IPv6), `ENOMEM`,
    /// or another errno from socket creation. The IPv6 socket is skipped, not
    /// an error, when the kernel runs without IPv6.
    pub(crate) fn new(port: u16, receiver: Arc<R>) -> Result<Pin<KBox<Self>>> {
        let shared = KBox::new(
            Shared {
                receiver,
                malformed: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?;
        let mut tunnel = UdpTunnel {
            shared,
            sock4: ptr::null_mut(),
            sock6: ptr::null_mut(),
            port,
        };
        // From here on, an early return drops `tunnel`, which releases the
        // sockets opened so far.
        tunnel.sock4 = tunnel.open(false)?;
        match tunnel.open(true) {
            Ok(sock) => tunnel.sock6 = sock,
            Err(e)
                if e.to_errno() == neg(b::EAFNOSUPPORT) || e.to_errno() == neg(b::EPFNOSUPPORT) =>
            {
                pr_info!("udp port {}: no IPv6 in this kernel, IPv4 only\n", port);
            }
            Err(e) => return Err(e),
        }
        Ok(KBox::pin(tunnel, GFP_KERNEL)?)
    }

    /// One tunnel socket on `self.port`, carrying `self.shared`.
    fn open(&self, ipv6: bool) -> Result<*mut b::socket> {
        let user = ptr::from_ref::<Shared<R>>(&*self.shared).cast_mut();
        let mut sock = ptr::null_mut();
        // SAFETY: `user` points to the heap allocation of `self.shared`,
        // which stays put and outlives the socket (module invariants);
        // `encap_rcv::<R>` expects exactly that as `sk_user_data`. `sock` is
        // a valid out-pointer.
        let ret = unsafe {
            b::metaroce_udp_tunnel_open(
                ipv6,
                self.port.to_be(),
                Some(encap_rcv::<R>),
                user.cast::<c_void>(),
                &mut sock,
            )
        };
        if ret != 0 {
            return Err(errno(ret));
        }
        Ok(sock)
    }

    /// The UDP port the sockets are bound to.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Whether the IPv6 socket exists (the kernel has IPv6).
    pub(crate) fn has_ipv6(&self) -> bool {
        !self.sock6.is_null()
    }

    /// Datagrams dropped before reaching the receiver: malformed (UDP length
    /// inconsistent, unreadable IP header) or not linearizable (no memory).
    pub(crate) fn malformed(&self) -> u64 {
        self.shared.malformed.load(Ordering::Relaxed)
    }

    /// Sends one datagram from `src` to `dst`:`dst_port` with UDP source port
    /// `src_port`: [`Self::send_datagram`] of a [`TxDatagram`] of `max_len`
    /// bytes that `fill` writes (it gets them zeroed and returns how many it
    /// wrote, at most `max_len`; 0 sends nothing and returns `Ok`), routed
    /// without a cache.
    ///
    /// Errors: those of [`TxDatagram::new`] and [`Self::send_datagram`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send(
        &self,
        src: &IpAddr,
        dst: &IpAddr,
        oif: i32,
        src_port: u16,
        dst_port: u16,
        ect: bool,
        max_len: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result {
        let mut d = TxDatagram::new(max_len)?;
        let n = fill(d.buf());
        if n == 0 {
            return Ok(());
        }
        let to = Dest {
            src: *src,
            dst: *dst,
            oif,
            src_port,
            dst_port,
            ect,
        };
        self.send_datagram(d, n, &to, None).map(|_| ())
    }

    /// Sends the first `len` bytes of datagram `d` (at most its capacity)
    /// as the UDP payload from `to.src` to `to.dst`:`to.dst_port` with UDP
    /// source port `to.src_port`.
    ///
    /// Routes (source address `src`; through netdev `oif` if it is not 0, as
    /// a RoCE device sends through its own netdev), through slot `slot` of
    /// `routes` when given (IPv4; the slot is re-looked-up when its key or
    /// the routing tables changed), and hands the skb to
    /// `udp_tunnel_xmit_skb` / `udp_tunnel6_xmit_skb`. The IP header carries
    /// ECT(0) when `to.ect`, TTL / hop limit 64 and (IPv4) DF; the UDP
    /// checksum is valid, offloaded when the route's netdev can (IPv4, one
    /// datagram, a netdev that cannot: computed at once, over the payload
    /// just written, rather than by `skb_checksum_help` on the way out).
    ///
    /// Never sleeps: runs with bottom halves disabled, so it is callable in
    /// softirq and in process context. A receive callback of a datagram sent
    /// to this host may run before `send_datagram` returns.
    ///
    /// Errors: `EHOSTUNREACH` when there is no route (or `src` is not usable
    /// for `dst`), `EINVAL` for mixed address families, `EAFNOSUPPORT` for
    /// IPv6 without an IPv6 socket. `Ok` means the datagram was handed to
    /// the IP layer, which may still drop it; it says whether the route's
    /// netdev takes UDP GSO bursts (`NETIF_F_GSO_UDP_L4`), where
    /// a run is best sent as one ([`TxDatagram::set_segment`]); otherwise
    /// software GSO copies each datagram of a burst once more. The datagram
    /// is consumed either way.
    pub(crate) fn send_datagram(
        &self,
        d: TxDatagram,
        len: usize,
        to: &Dest,
        routes: Option<(&mut RouteCache, usize)>,
    ) -> Result<bool> {
        const TTL: u8 = 64;
        let tos = if to.ect { ecn::ECT0 } else { ecn::NOT_ECT };
        let (sport, dport) = (to.src_port.to_be(), to.dst_port.to_be());
        let skb = d.trimmed(len);
        let oif = to.oif;
        let _bh = BhDisabled::new();
        match (to.src, to.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let (s, d) = (u32::from_ne_bytes(s), u32::from_ne_bytes(d));
                let mut err = 0;
                let dst = match routes {
                    Some((cache, slot)) => {
                        let key = RouteKey {
                            src: s,
                            dst: d,
                            sport,
                            oif,
                        };
                        cache.route4(self.sock4, slot, key, tos, dport, &mut err)
                    }
                    // SAFETY: `sock4` is live (type invariant); `err` is a
                    // valid out-pointer.
                    None => unsafe {
                        b::metaroce_route4(self.sock4, s, d, sport, dport, tos, oif, &mut err)
                    },
                };
                let route = Route::new(dst)?;
                // SAFETY: `sock4` is live; the route is an IPv4 `rtable`
                // (`dst` is its first field) and its reference, like the skb,
                // passes to the helper (`udp_tunnel_xmit_skb` or its
                // checksum-complete twin), which consumes both. Bottom halves
                // are disabled, as the xmit path requires.
                let gso = unsafe {
                    b::metaroce_udp4_xmit(
                        route.into_raw().cast::<b::rtable>(),
                        (*self.sock4).sk,
                        skb.into_raw(),
                        s,
                        d,
                        tos,
                        TTL,
                        (b::IP_DF as u16).to_be(),
                        sport,
                        dport,
                    )
                };
                Ok(gso)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                if self.sock6.is_null() {
                    return Err(errno(neg(b::EAFNOSUPPORT)));
                }
                let mut err = 0;
                // SAFETY: `sock6` is live (type invariant, checked non-null);
                // the addresses are 16 readable bytes; `err` is valid.
                let dst = unsafe {
                    b::metaroce_route6(
                        self.sock6,
                        s.as_ptr(),
                        d.as_ptr(),
                        sport,
                        dport,
                        tos,
                        oif,
                        &mut err,
                    )
                };
                let route = Route::new(dst)?;
                let gso = route.gso_udp();
                let (s6, d6) = (in6(s), in6(d));
                // SAFETY: `sock6` is live; the route reference and the skb
                // pass to `udp_tunnel6_xmit_skb`, which consumes both; the
                // addresses are read during the call. No tunnel netdev (null)
                // to count statistics on. Bottom halves are disabled.
                unsafe {
                    b::udp_tunnel6_xmit_skb(
                        route.into_raw(),
                        (*self.sock6).sk,
                        skb.into_raw(),
                        ptr::null_mut(),
                        &s6,
                        &d6,
                        tos,
                        TTL,
                        0,
                        sport,
                        dport,
                        false,
                    )
                };
                Ok(gso)
            }
            _ => Err(EINVAL),
        }
    }
}

/// Where a datagram goes: addresses, the netdev to send through (0: any),
/// UDP ports, and whether it is ECN-capable (ECT(0)).
pub(crate) struct Dest {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) oif: i32,
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
    pub(crate) ect: bool,
}

impl<R: UdpReceiver> Drop for UdpTunnel<R> {
    fn drop(&mut self) {
        for sock in [self.sock6, self.sock4] {
            if !sock.is_null() {
                // SAFETY: the socket is live and ours (type invariant); it is
                // released once. Dropping sleeps: process context.
                unsafe { b::udp_tunnel_sock_release(sock) };
            }
        }
        // A receive that found a socket before its release may still be in
        // `encap_rcv` (it read `sk_user_data` as null, or as `shared`, in an
        // RCU read-side section): wait for it before `shared` and the
        // module's code can go.
        // SAFETY: process context, no locks held.
        unsafe { b::synchronize_rcu() };
    }
}

/// An IPv6 address as the C type.
fn in6(addr: [u8; 16]) -> b::in6_addr {
    b::in6_addr {
        in6_u: b::in6_addr__bindgen_ty_1 { u6_addr8: addr },
    }
}

/// The UDP header and datagram of `skb` in at most two pieces (its linear
/// part, then one page fragment), with [`UdpReceiver::HEAD`] bytes of the
/// payload (or all of it) in the first; `None` if it cannot be had that way.
///
/// # Safety
///
/// As [`with_datagram`]; the slices live while the caller owns the skb and
/// changes nothing of it.
unsafe fn pieces<'a, R: UdpReceiver>(skb: *mut b::sk_buff) -> Option<(&'a [u8], &'a [u8])> {
    let (mut hp, mut hl, mut tp, mut tl) = (ptr::null(), 0u32, ptr::null(), 0u32);
    // SAFETY: the caller owns the skb; the out-pointers are valid. Pulling
    // may reallocate the skb's head, so its pointers are read after it.
    let ok = unsafe {
        b::metaroce_skb_pieces(
            skb,
            (8 + R::HEAD) as u32,
            &mut hp,
            &mut hl,
            &mut tp,
            &mut tl,
        )
    };
    if !ok {
        return None;
    }
    // SAFETY: the helper's contract: `hl` readable bytes at `hp` (the linear
    // part, never empty: it holds the UDP header), `tl` at `tp` when `tl` is
    // not 0; nothing changes them while we own the skb and do not modify it.
    let head = unsafe { slice::from_raw_parts(hp, hl as usize) };
    let tail = if tl == 0 || tp.is_null() {
        &[][..]
    } else {
        // SAFETY: as above.
        unsafe { slice::from_raw_parts(tp, tl as usize) }
    };
    Some((head, tail))
}

/// Hands the payload and headers of a received datagram to `r`: in two
/// pieces where the skb has them and `r` takes them, else linearized.
///
/// Returns `false` (and `r` is not called) if the datagram is malformed or
/// cannot be linearized.
///
/// # Safety
///
/// `skb` is a received UDP datagram owned by the caller, with `data` at the
/// UDP header and the network header set, as `encap_rcv` gets it.
unsafe fn with_datagram<R: UdpReceiver>(skb: *mut b::sk_buff, r: &R) -> bool {
    // SAFETY: our caller's contract is `pieces`'.
    let mut got = unsafe { pieces::<R>(skb) };
    if let Some((h, t)) = got {
        if !t.is_empty() && !r.takes_pieces(h.get(8..).unwrap_or(&[])) {
            got = None;
        }
    }
    let (udp, tail) = match got {
        Some(p) => p,
        None => {
            // SAFETY: the caller owns the skb; linearizing may reallocate its
            // head (keeping the header offsets), so the pointers are read
            // after it. (The pieces above are not used again.)
            if unsafe { b::metaroce_skb_linearize(skb) } != 0 {
                return false;
            }
            // SAFETY: a linear skb has `len` readable bytes at `data`.
            let (data, len) =
                unsafe { (b::metaroce_skb_data(skb), b::metaroce_skb_len(skb) as usize) };
            // SAFETY: as above: `data` and `len` describe the linear payload.
            (unsafe { slice::from_raw_parts(data, len) }, &[][..])
        }
    };
    let len = udp.len() + tail.len();
    // SAFETY: the caller guarantees the network header is set.
    let nh = unsafe { b::metaroce_skb_network_header(skb) };
    let Some(ip_len) = (udp.as_ptr() as usize).checked_sub(nh as usize) else {
        return false;
    };
    // SAFETY: the IP header (and any extension headers) lie in the skb's
    // linear head, from the network header up to the UDP header at `data`.
    let ip = unsafe { slice::from_raw_parts(nh, ip_len) };

    // SAFETY: the caller owns the skb.
    let iif = unsafe { b::metaroce_skb_iif(skb) };
    let Some(meta) = meta_of(ip, udp, iif) else {
        return false;
    };
    let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if !(8..=len).contains(&ulen) {
        return false;
    }
    // The UDP payload: bytes 8..ulen of the two pieces (the UDP layer trims
    // the skb to `ulen`, so `tail` is normally whole).
    let head = udp.get(8..ulen.min(udp.len())).unwrap_or(&[]);
    let tail = tail.get(..ulen.saturating_sub(udp.len())).unwrap_or(&[]);
    r.receive(head, tail, &meta);
    true
}

/// The addresses, source port, ECN field and ingress of a datagram from its
/// IP header `ip` and UDP header (the first 8 bytes of `udp`); `None` if
/// they cannot be read.
fn meta_of(ip: &[u8], udp: &[u8], iif: i32) -> Option<RxMeta> {
    let src_port = u16::from_be_bytes([*udp.first()?, *udp.get(1)?]);
    udp.get(..8)?;
    let (src, dst, dsfield) = match ip.first()? >> 4 {
        4 if ip.len() >= 20 => (
            IpAddr::V4(ip[12..16].try_into().ok()?),
            IpAddr::V4(ip[16..20].try_into().ok()?),
            ip[1],
        ),
        6 if ip.len() >= 40 => (
            IpAddr::V6(ip[8..24].try_into().ok()?),
            IpAddr::V6(ip[24..40].try_into().ok()?),
            (ip[0] << 4) | (ip[1] >> 4),
        ),
        _ => return None,
    };
    let ecn = dsfield & 3;
    Some(RxMeta {
        src,
        dst,
        src_port,
        ce: ecn == ecn::CE,
        ecn,
        iif,
    })
}

/// `encap_rcv` of the tunnel sockets: hand the datagram to the receiver and
/// consume the skb.
///
/// # Safety
///
/// Called only by the UDP layer, in softirq under `rcu_read_lock`, for a
/// socket opened by [`UdpTunnel::open`] with the same `R`, with an skb it
/// passes to us (the UDP header at `data`, checksum verified).
unsafe extern "C" fn encap_rcv<R: UdpReceiver>(sk: *mut b::sock, skb: *mut b::sk_buff) -> c_int {
    // SAFETY: `sk` is the live socket the datagram arrived on.
    let user = unsafe { b::metaroce_sk_user_data(sk) };
    if user.is_null() {
        // The tunnel is being dropped.
        // SAFETY: the skb is ours to consume.
        unsafe { b::metaroce_kfree_skb(skb) };
        return 0;
    }
    // SAFETY: a non-null `sk_user_data` is the tunnel's `Shared<R>`, alive
    // until a grace period after it was cleared (module invariants), and we
    // are inside the receive path's RCU read-side critical section.
    let shared = unsafe { &*user.cast::<Shared<R>>() };
    // SAFETY: the skb is as `with_datagram` requires (our caller's contract).
    let delivered = unsafe { with_datagram(skb, &*shared.receiver) };
    if delivered {
        // SAFETY: the skb is ours; the payload slice died with the callback.
        unsafe { b::metaroce_consume_skb(skb) };
    } else {
        shared.malformed.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the skb is ours.
        unsafe { b::metaroce_kfree_skb(skb) };
    }
    0
}
