// SPDX-License-Identifier: GPL-2.0

//! Transmission: how a pump (an RC QP's own connection, `post.rs`, or a
//! shared connection, `peer.rs`) hands what the protocol core writes to the
//! network stack. Each datagram is written straight into its skb; a run of
//! DATA packets on one path (`Config::train`) is written one after another
//! into one skb and goes out as one UDP GSO burst when the netdev takes one,
//! else datagram by datagram (`Documentation/device.rst`,
//! "Trains").

use super::*;
use crate::ffi::net::{Dest, RouteCache, TxDatagram, MAX_UDP_PAYLOAD};
use crate::ffi::rdma::ext::MAX_PLANES;
use crate::proto::conn::TxKind;

/// Room a datagram needs beyond the path MTU's payload
/// ([`Connection::poll_transmit`]: at least `mtu + 84` bytes).
pub(super) const DATAGRAM_ROOM: usize = 84;

/// The most datagrams one pump call sends (then it arms its timer, and the
/// rest goes at the next call).
const BUDGET: usize = 256;

/// What a pump keeps between calls: its output routes (one slot per path),
/// a datagram (an skb) allocated but not written by its last round, the
/// length and plane of that round's first datagram if it was a DATA (length
/// 0 if not: the next round's skb is then allocated with room for a run of
/// that length, which spares a copy), and, plane by plane, whether the
/// netdev the last datagram on it went through takes UDP GSO bursts (until
/// one went: no).
pub(crate) struct TxCache {
    routes: RouteCache,
    spare: Option<TxDatagram>,
    data_len: usize,
    data_plane: usize,
    bursts: [bool; MAX_PLANES],
}

impl TxCache {
    fn new() -> Self {
        TxCache {
            routes: RouteCache::new(),
            spare: None,
            data_len: 0,
            data_plane: 0,
            bursts: [false; MAX_PLANES],
        }
    }
}

/// Where a pump sends: the device and the connection's two addresses.
pub(super) struct Out<'a> {
    pub(super) dev: &'a DevShared<Qp>,
    pub(super) src: IpAddr,
    pub(super) dst: IpAddr,
}

/// A connection as a pump sees it.
pub(super) trait Source {
    /// Writes the connection's next datagram into `buf` (at least the path
    /// MTU plus [`DATAGRAM_ROOM`] bytes) and describes it, as
    /// [`Connection::poll_transmit`] does; `None`: nothing to send now.
    fn poll(&mut self, buf: &mut [u8]) -> Option<Transmit>;

    /// Traces datagram `bytes`, which `t` describes (`metaroce:tx`).
    fn trace(&mut self, t: &Transmit, bytes: &[u8]);
}

/// One pump call: at most [`BUDGET`] datagrams, sent round by round
/// ([`Self::round`]).
pub(super) struct Pump {
    budget: usize,
    /// A datagram the core wrote after a run it did not belong to: the
    /// first of the next round (the core counts it as sent, so it goes out
    /// whatever the budget).
    carry: Option<(TxDatagram, Transmit)>,
}

impl Pump {
    pub(super) fn new() -> Self {
        Pump {
            budget: BUDGET,
            carry: None,
        }
    }

    /// One round: the connection's next datagram, and when it is a DATA and
    /// its plane's netdev takes UDP GSO bursts ([`TxCache`]) the run that
    /// follows it on its path (up to `train` datagrams, one UDP payload's
    /// worth, the budget left), sent as one skb; on any other netdev
    /// software GSO would copy each datagram of the run once more, and each
    /// goes in its own skb, a round apiece. `mtu`: the
    /// connection's path MTU; `cache`: the pump's [`TxCache`] (allocated
    /// here on first use); `scratch`: where a datagram is written when no
    /// skb can be had (the datagram is then copied, if an skb can be had by
    /// then). Returns whether anything was sent: `false` when the source
    /// had nothing, or the budget is spent.
    pub(super) fn round(
        &mut self,
        out: &Out<'_>,
        mtu: u16,
        train: u8,
        cache: &mut Option<KBox<TxCache>>,
        scratch: &mut [u8],
        src: &mut impl Source,
    ) -> bool {
        if self.budget == 0 && self.carry.is_none() {
            return false;
        }
        if cache.is_none() {
            *cache = KBox::new(TxCache::new(), GFP_ATOMIC).ok();
        }
        let one = (usize::from(mtu) + DATAGRAM_ROOM).min(scratch.len());
        // Datagrams a run on plane `k` may have: `train`, within the budget,
        // where the plane's netdev takes bursts; else 1.
        let most = usize::from(train.max(1)).min(self.budget);
        let runs = |cache: &Option<KBox<TxCache>>, k: usize| {
            let bursts = cache
                .as_ref()
                .is_some_and(|x| x.bursts.get(k).copied().unwrap_or(false));
            if bursts {
                most
            } else {
                1
            }
        };
        // The skb a run of `n` datagrams `len` bytes long needs: room for
        // the core to write one more after all but the last, within one UDP
        // datagram's worth of payload (a GSO skb's limit: at a 9000-byte
        // MTU, 7 packets).
        let room = |len: usize, n: usize| {
            let k = n.min(MAX_UDP_PAYLOAD / len.max(1)).max(1);
            (k - 1) * len + one
        };
        let (mut d, carried) = match self.carry.take() {
            Some((d, t)) => (d, Some(t)),
            None => {
                // After a DATA, most likely another on its plane: room for
                // its run there.
                let want = match cache
                    .as_ref()
                    .map_or((0, 0), |x| (x.data_len, x.data_plane))
                {
                    (0, _) => one,
                    (len, k) => room(len, runs(cache, k)),
                };
                // The spare only if it has that room (a one-datagram spare
                // stays for the next ACK: taken for a DATA it would cost
                // the copy below).
                let spare = cache.as_mut().and_then(|x| match x.spare.take() {
                    Some(d) if d.cap() >= want => Some(d),
                    small => {
                        x.spare = small;
                        None
                    }
                });
                let d = spare
                    .or_else(|| TxDatagram::new(want).ok())
                    .or_else(|| TxDatagram::new(one).ok().filter(|_| want > one));
                match d {
                    Some(d) => (d, None),
                    None => return self.via_scratch(out, cache, scratch, src),
                }
            }
        };
        let fresh = carried.is_none();
        let Some(t) = carried.or_else(|| src.poll(d.buf_at(0, one))) else {
            if let Some(x) = cache.as_mut() {
                x.spare = Some(d);
            }
            return false;
        };
        let data = matches!(t.kind, TxKind::Data { .. });
        let plane = out.dev.planes.oif(&t).0;
        let n = runs(cache, plane);
        if let Some(x) = cache.as_mut() {
            x.data_len = if data { t.len } else { 0 };
            x.data_plane = plane;
        }
        // A DATA may start a run: it moves to a datagram with room for one
        // (an ACK never needs it). Only the first of a pump call, or the
        // first after an ACK, pays this copy.
        if fresh && data && n > 1 && d.cap() < room(t.len, n) {
            if let Ok(mut run) = TxDatagram::new(room(t.len, n)) {
                run.buf_at(0, t.len).copy_from_slice(d.buf_at(0, t.len));
                let small = core::mem::replace(&mut d, run);
                if let Some(x) = cache.as_mut() {
                    x.spare = Some(small);
                }
            }
        }
        src.trace(&t, d.buf_at(0, t.len));
        let mut run = Train::new(t);
        let mut lone = None;
        while run.len() + one <= d.cap()
            && run.len() + t.len <= MAX_UDP_PAYLOAD
            && run.wants_more()
            && run.count() < n
        {
            let at = run.len();
            let Some(u) = src.poll(d.buf_at(at, one)) else {
                break;
            };
            if run.take(&u) {
                src.trace(&u, d.buf_at(at, u.len));
                continue;
            }
            // Not of the run: the first of the next, copied to a datagram
            // of its own.
            let size = if matches!(u.kind, TxKind::Data { .. }) {
                room(u.len, runs(cache, out.dev.planes.oif(&u).0))
            } else {
                one
            };
            self.carry = TxDatagram::new(size).ok().map(|mut o| {
                o.buf_at(0, u.len).copy_from_slice(d.buf_at(at, u.len));
                (o, u)
            });
            if self.carry.is_none() {
                // No skb: the core wrote it as sent, and it goes from
                // `scratch`.
                let n = u.len.min(scratch.len()).min(one);
                scratch[..n].copy_from_slice(d.buf_at(at, n));
                lone = Some((u, n));
            }
            break;
        }
        self.budget = self.budget.saturating_sub(run.count());
        let routes = cache.as_mut().map(|x| (&mut x.routes, usize::from(t.path)));
        let gso = run.send(out, d, routes);
        learn(cache, gso);
        if let Some((u, n)) = lone {
            src.trace(&u, &scratch[..n]);
            self.budget = self.budget.saturating_sub(1);
            let routes = cache.as_mut().map(|x| (&mut x.routes, usize::from(u.path)));
            let gso = send_copy(out, &u, &scratch[..n], routes);
            learn(cache, gso);
        }
        true
    }

    /// [`Self::round`] when no skb could be had: the next datagram is
    /// written into `scratch`, then copied into an skb.
    fn via_scratch(
        &mut self,
        out: &Out<'_>,
        cache: &mut Option<KBox<TxCache>>,
        scratch: &mut [u8],
        src: &mut impl Source,
    ) -> bool {
        let Some(t) = src.poll(scratch) else {
            return false;
        };
        let len = t.len.min(scratch.len());
        src.trace(&t, &scratch[..len]);
        self.budget = self.budget.saturating_sub(1);
        let routes = cache.as_mut().map(|x| (&mut x.routes, usize::from(t.path)));
        let gso = send_copy(out, &t, &scratch[..len], routes);
        learn(cache, gso);
        true
    }
}

/// Keeps what a send said of its plane's netdev ([`transmit`]) for the next
/// rounds.
fn learn(cache: &mut Option<KBox<TxCache>>, sent: Option<(usize, bool)>) {
    if let (Some(x), Some((k, gso))) = (cache.as_mut(), sent) {
        if let Some(b) = x.bursts.get_mut(k) {
            *b = gso;
        }
    }
}

/// The datagrams a round wrote one after another into one skb: a run of
/// DATA packets on one path, each as long as the first but the last, which
/// may be shorter and ends it: one UDP GSO burst (`Config::train` of them at
/// most, as the core sends).
struct Train {
    /// The first.
    first: Transmit,
    /// Datagrams in the run, and their bytes.
    count: usize,
    len: usize,
    /// Whether the run is over (its last was shorter, or a datagram not of
    /// it came next).
    closed: bool,
}

impl Train {
    fn new(first: Transmit) -> Self {
        Train {
            first,
            count: 1,
            len: first.len,
            closed: !matches!(first.kind, TxKind::Data { .. }),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn count(&self) -> usize {
        self.count
    }

    /// Whether another datagram may join (the caller also checks the room).
    fn wants_more(&self) -> bool {
        !self.closed
    }

    /// Takes `u`, written right after the run, if it belongs to it: DATA on
    /// the same path, source port, plane and ECN codepoint, no longer than
    /// the first. Otherwise it stays out, and the run is over.
    fn take(&mut self, u: &Transmit) -> bool {
        let f = &self.first;
        let joins = matches!(u.kind, TxKind::Data { .. })
            && u.path == f.path
            && u.src_port == f.src_port
            && u.plane == f.plane
            && u.ect == f.ect
            && u.len <= f.len
            && u.len != 0;
        if !joins {
            self.closed = true;
            return false;
        }
        self.count += 1;
        self.len += u.len;
        self.closed = u.len < f.len;
        true
    }

    /// Sends the run from datagram `d` ([`transmit`]).
    fn send(
        self,
        out: &Out<'_>,
        d: TxDatagram,
        routes: Option<(&mut RouteCache, usize)>,
    ) -> Option<(usize, bool)> {
        transmit(out, &self.first, d, self.len, self.count, routes)
    }
}

/// Hands the first `len` bytes of datagram `d` to the stack: `count`
/// datagrams the core wrote one after another, each described by `first`
/// but for its length (each as long as the first, the last perhaps
/// shorter), as one UDP GSO burst when `count` > 1; routed through `routes`
/// (slot: the path) when given. Counted (`tx_packets`, `tx_bytes`,
/// `probes`) datagram by datagram, as if each went alone, and a burst in
/// `tx_gso_bursts`, and on its plane, if it went out. Returns, if it went
/// out, its plane and whether the route's netdev takes UDP GSO bursts.
fn transmit(
    out: &Out<'_>,
    first: &Transmit,
    mut d: TxDatagram,
    len: usize,
    count: usize,
    routes: Option<(&mut RouteCache, usize)>,
) -> Option<(usize, bool)> {
    let dev = out.dev;
    let (plane, oif) = dev.planes.oif(first);
    let to = Dest {
        src: out.src,
        dst: out.dst,
        oif,
        src_port: first.src_port,
        dst_port: dev.transport.port(),
        ect: first.ect,
    };
    if count > 1 {
        d.set_segment(u16::try_from(first.len).unwrap_or(0));
    }
    let gso = dev.transport.send_datagram(d, len, &to, routes).ok()?;
    dev.planes.sent(plane, count as u64);
    dev.count(counter::TX_PACKETS, count as u64);
    dev.count(counter::TX_BYTES, len as u64);
    if count > 1 {
        dev.count(counter::TX_BURSTS, 1);
    }
    if first.kind == TxKind::Probe {
        dev.count(counter::PROBES, 1);
    }
    Some((plane, gso))
}

/// Sends datagram `bytes`, which `t` describes, copied into an skb of its
/// own ([`transmit`], whose answer it returns); nothing goes out (and
/// nothing is counted) if no skb can be had. The caller traced it.
fn send_copy(
    out: &Out<'_>,
    t: &Transmit,
    bytes: &[u8],
    routes: Option<(&mut RouteCache, usize)>,
) -> Option<(usize, bool)> {
    let Ok(mut d) = TxDatagram::new(bytes.len()) else {
        return None;
    };
    d.buf().copy_from_slice(bytes);
    transmit(out, t, d, bytes.len(), 1, routes)
}

/// Sends datagram `bytes`, which the core described in `t`, from `src` to
/// `dst` through device `dev`'s netdev (copied into an skb; routed through
/// `routes` when given); traced (`metaroce:tx`, under QPN `qpn`) and counted
/// ([`transmit`]). Nothing goes out (and nothing is counted) if no skb can
/// be had.
pub(super) fn send_counted(
    dev: &DevShared<Qp>,
    qpn: u32,
    src: &IpAddr,
    dst: &IpAddr,
    t: &Transmit,
    bytes: &[u8],
    routes: Option<(&mut RouteCache, usize)>,
) {
    observe::trace_tx(qpn, t, bytes);
    let out = Out {
        dev,
        src: *src,
        dst: *dst,
    };
    send_copy(&out, t, bytes, routes);
}
