// SPDX-License-Identifier: GPL-2.0

//! Shared connections (Documentation/device.rst, "Shared connections";
//! the wire rules: Documentation/transport.rst, "Shared connections"): on a
//! device added with the `shared` module parameter set, the RC QPs to one
//! peer (the same local and remote IP address) are the *members* of one
//! protocol connection, a [`Peer`]: one set of paths, one congestion
//! controller, one fair share at the receiver, one ACK stream. Member `id`'s
//! two streams (requests; READ/atomic responses) are the connection's
//! streams `2 id` and `2 id + 1`.
//!
//! The RC engines stay in their QPs. The connection calls them through
//! [`Mux`], which locks one member QP at a time under the connection's lock:
//! the lock order is the device's peer table (a mutex, process context),
//! then a connection, then a QP. Nothing holding a QP lock takes a
//! connection lock: the QP paths (post, modify, destroy, receive) drop it
//! first and then call in here.
//!
//! Membership changes only under the device's peer table: a QP joins at RTR
//! ([`Peer::join`]) and leaves at RESET or destroy ([`Peer::leave`]); the
//! last member to leave removes the connection. A QP in the error state stays
//! a member whose streams are closed (its peer hears `CLOSED`).

use super::mux::{split, Closing, Member, Mux, Ready};
use super::tx::{Out, Pump, Source, TxCache};
use super::*;
use crate::ffi::sync::BhGuard;
use crate::proto::conn::{PathWants, TxKind};
use crate::proto::ident::Ident;
use crate::proto::wire::{ACK_LEN, MAX_DATA_HEADER};
use crate::verbs::device::MAX_PAYLOAD;
use kernel::alloc::KVVec;
use kernel::sync::Mutex;

/// The connection QPs to one peer share: room for 64 paths and 256 packets in
/// flight (four times one QP's, for all its members together).
type PeerConn = Connection<{ crate::proto::conn::MAX_PATHS }, 4, 256>;

/// Most members of one connection: member `id`'s streams are `2 id` and
/// `2 id + 1` of the connection's 16-bit stream space, where 65535 is none.
const MAX_MEMBERS: usize = 32767;

/// Members a connection has room for at first (doubled as needed).
const FIRST_ROOM: usize = 16;

/// The device's shared connections, by peer ([`super::super::shared::Grouped`]).
#[pin_data]
pub(crate) struct PeerTable {
    /// The connections (`None`: a free entry; the kernel's `Vec` cannot
    /// remove one).
    #[pin]
    list: Mutex<KVec<Option<Arc<Peer>>>>,
}

impl PeerTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(PeerTable {
            list <- kernel::new_mutex!(KVec::new(), "metaroce_peers"),
        })
    }
}

/// A member's place in its connection, held by its QP.
#[derive(Clone)]
pub(super) struct Link {
    pub(super) peer: Arc<Peer>,
    pub(super) id: u16,
}

/// What a QP brings when it joins (at RTR).
pub(super) struct Join {
    /// Its QPN and its peer's.
    pub(super) qpn: u32,
    pub(super) dest_qpn: u32,
    /// The pair's keys (sending, receiving), from `rq_psn` until RTS.
    pub(super) tx: Ident,
    pub(super) rx: Ident,
    /// Its path MTU, bytes.
    pub(super) mtu: u16,
    /// Its stream class: a connection carries the QPs of one class.
    pub(super) class: u8,
}

/// The member tables, by member id.
struct Slots {
    qps: KVVec<Option<Arc<Qp>>>,
    members: KVVec<Member>,
    ready: Ready,
    /// Free ids: `free[..nfree]`.
    free: KVVec<u16>,
    nfree: usize,
}

impl Slots {
    /// Tables for `room` members, all free (allocates: process context).
    fn new(room: usize) -> Result<Self> {
        let mut qps = KVVec::new();
        qps.extend_with(room, None, GFP_KERNEL)?;
        let mut members = KVVec::new();
        members.extend_with(room, Member::default(), GFP_KERNEL)?;
        let mut buf = KVVec::new();
        buf.extend_with(room, 0u16, GFP_KERNEL)?;
        let mut free = KVVec::new();
        free.extend_with(room, 0u16, GFP_KERNEL)?;
        // Lowest id first.
        for (i, f) in free.iter_mut().enumerate() {
            *f = (room - 1 - i) as u16;
        }
        Ok(Slots {
            qps,
            members,
            ready: Ready {
                buf,
                head: 0,
                len: 0,
            },
            free,
            nfree: room,
        })
    }

    fn room(&self) -> usize {
        self.qps.len()
    }

    /// Moves every member of these full tables (no id free) into `bigger`
    /// (made by [`Slots::new`]), whose ids above ours stay free; `self` is
    /// left empty (drop it outside the lock).
    fn grow_into(&mut self, bigger: &mut Slots) {
        let old = self.room();
        for (n, o) in bigger.qps.iter_mut().zip(self.qps.iter_mut()) {
            *n = o.take();
        }
        for (n, o) in bigger.members.iter_mut().zip(self.members.iter()) {
            *n = *o;
        }
        let cap = self.ready.buf.len();
        for i in 0..self.ready.len {
            let id = self.ready.buf.get((self.ready.head + i) % cap).copied();
            if let (Some(x), Some(id)) = (bigger.ready.buf.get_mut(i), id) {
                *x = id;
            }
        }
        bigger.ready.head = 0;
        bigger.ready.len = self.ready.len;
        // `Slots::new` stacked every id, the lowest on top: its bottom
        // entries are the ids above ours, so they alone stay free.
        bigger.nfree = bigger.room() - old;
        core::mem::swap(self, bigger);
    }
}

struct PeerInner {
    conn: KBox<PeerConn>,
    slots: Slots,
    count: usize,
    /// Some member (the one probes are addressed to).
    some: Option<u16>,
    closing: Closing,
    /// One datagram being built when no skb can be had.
    scratch: KVec<u8>,
    /// Its transmit state (output routes by path, a spare skb), from its
    /// first pump.
    tx: Option<KBox<TxCache>>,
    /// The connection's counters when last added to the device's.
    last_stats: Stats,
    /// The most patient retry limits of its members so far.
    retry: (u8, u8, u64),
    /// The path counts its members ask for; it sends on the largest.
    wants: PathWants,
    /// What a member asks for until it sets a count: the device's `paths`.
    default_paths: u8,
}

/// The connection the RC QPs of a device to one peer share.
#[pin_data]
pub(crate) struct Peer {
    src: IpAddr,
    dst: IpAddr,
    /// The stream class of its members.
    class: u8,
    dev: Arc<DevShared<Qp>>,
    #[pin]
    timer: Timer<Peer>,
    /// What a received datagram calls for, sent at the end of its receive
    /// batch (`Documentation/device.rst`, "Data path").
    #[pin]
    batch: Deferred<Peer>,
    #[pin]
    inner: crate::ffi::sync::BhLock<PeerInner>,
}

impl_has_timer! { impl HasTimer for Peer { self.timer } }
impl_has_deferred! { impl HasDeferred for Peer { self.batch } }

impl DeferredCallback for Peer {
    /// The end of a receive batch that delivered datagrams to members of
    /// this connection: the ACKs and data they call for.
    fn run(this: &Arc<Self>) {
        Peer::pump(this, None);
    }
}

impl TimerCallback for Peer {
    fn fired(this: &Arc<Self>) {
        this.dev.note_timer(this.timer.deadline_ns(), now_ns());
        let mut g = this.inner.lock();
        let now = Instant(now_ns());
        g.run(&this.dev, None, |c, mux| c.handle_timeout(now, mux));
        Peer::pump_locked(this, g);
    }
}

impl PeerInner {
    /// Runs `f` on the connection with the members as its application
    /// (`arrived`: the QPN and member id a received datagram was dispatched
    /// to); then closes the streams of members that entered the error state.
    fn run<R>(
        &mut self,
        dev: &DevShared<Qp>,
        arrived: Option<(u32, u16)>,
        f: impl FnOnce(&mut PeerConn, &mut Mux<'_>) -> R,
    ) -> R {
        let PeerInner {
            conn,
            slots,
            closing,
            some,
            ..
        } = self;
        let Slots {
            qps,
            members,
            ready,
            ..
        } = slots;
        // The members as the application, borrowing the tables afresh.
        macro_rules! mux {
            () => {
                Mux {
                    dev,
                    qps,
                    members,
                    ready,
                    closing,
                    arrived,
                    some: *some,
                    held: None,
                }
            };
        }
        let r = f(conn, &mut mux!());
        // Each close may find another member in error: a few rounds at most.
        for _ in 0..4 {
            if closing.n == 0 && !closing.overflow {
                break;
            }
            let c = core::mem::take(closing);
            let mut mux = mux!();
            for id in c.ids.iter().take(c.n) {
                conn.close_streams(id * 2, 2, &mut mux);
            }
            if c.overflow {
                for id in 0..mux.qps.len() as u16 {
                    if mux.in_error_open(id) {
                        conn.close_streams(id * 2, 2, &mut mux);
                    }
                }
            }
        }
        r
    }

    /// Member `id` joins as `j` describes, with QP `qp`; `None` if full.
    fn add(&mut self, qp: Arc<Qp>, j: &Join) -> Option<u16> {
        let s = &mut self.slots;
        if s.nfree == 0 {
            return None;
        }
        s.nfree -= 1;
        let id = *s.free.get(s.nfree)?;
        let m = s.members.get_mut(usize::from(id))?;
        *m = Member {
            qpn: j.qpn,
            peer: j.dest_qpn,
            tx: j.tx,
            rx: j.rx,
            rx_alt: Ident::DEFAULT,
            joined: self.conn.epoch(),
            mtu: j.mtu,
            fresh: true,
            sent: false,
            // A stale entry of an earlier member may still be in the ring.
            queued: m.queued,
            paths: self.default_paths,
            limits: None,
            awaiting: false,
        };
        self.wants.join(self.default_paths);
        *s.qps.get_mut(usize::from(id))? = Some(qp);
        self.count += 1;
        self.some.get_or_insert(id);
        Some(id)
    }

    /// Has the connection send on the largest path count its members ask
    /// for (none left: unchanged); returns the count it sends on.
    fn apply_paths(&mut self, dev: &DevShared<Qp>) -> u8 {
        let now = self.conn.config().paths;
        match self.wants.effective() {
            Some(n) if n != now => self.run(dev, None, |c, mux| c.set_paths(n, mux)),
            _ => now,
        }
    }

    /// The connection takes the most patient retry limits of its members at
    /// RTS (Documentation/device.rst, "Shared connections"); a member in RTR
    /// has none yet (verbs sets them at RTS, and `timeout` 0 would mean
    /// never), and a responder that stays there needs none.
    fn raise_retry(&mut self, (cnt, rnr, timeout): (u8, u8, u64)) {
        let (c0, r0, t0) = self.retry;
        // `rnr_retry` 7 is unlimited (the largest anyway); a timeout that
        // never expires is `u64::MAX`.
        let (cnt, rnr, timeout) = (c0.max(cnt), r0.max(rnr), t0.max(timeout));
        self.retry = (cnt, rnr, timeout);
        self.conn.set_retry_limits(cnt, rnr, timeout);
    }

    /// The QPN a datagram the connection sends is traced under: its member's.
    fn trace_qpn(&self, t: &Transmit) -> u32 {
        let id = match t.kind {
            TxKind::Data { stream, .. } => Some(split(stream).0),
            _ => self.some,
        };
        id.and_then(|i| self.slots.members.get(usize::from(i)))
            .map_or(0, |m| m.qpn)
    }
}

/// A shared connection as its pump sees it (at time `now`).
struct PeerSource<'a, 'g> {
    g: &'a mut BhGuard<'g, PeerInner>,
    dev: &'a DevShared<Qp>,
    now: Instant,
}

impl Source for PeerSource<'_, '_> {
    fn poll(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let now = self.now;
        self.g
            .run(self.dev, None, |c, mux| c.poll_transmit(now, buf, mux))
    }

    fn trace(&mut self, t: &Transmit, bytes: &[u8]) {
        // The member's QPN, looked up only when traced.
        if crate::ffi::trace::tx_enabled() {
            super::observe::trace_tx(self.g.trace_qpn(t), t, bytes);
        }
    }
}

impl Peer {
    /// `qp` joins the connection to the peer at `dst` from `src` (created if
    /// none), as `j` describes. `ENOSPC` when the connection has
    /// [`MAX_MEMBERS`].
    pub(super) fn join(qp: &Arc<Qp>, j: &Join, src: IpAddr, dst: IpAddr) -> Result<Link> {
        let dev = &qp.dev;
        let mut list = dev.peers.list.lock();
        let found = list
            .iter()
            .flatten()
            .find(|p| p.src == src && p.dst == dst && p.class == j.class)
            .cloned();
        let peer = match found {
            Some(p) => p,
            None => {
                let p = Peer::new(dev, src, dst, j.class)?;
                match list.iter_mut().find(|e| e.is_none()) {
                    Some(e) => *e = Some(p.clone()),
                    None => list.push(Some(p.clone()), GFP_KERNEL)?,
                }
                p
            }
        };
        // Room (allocated here, not under the connection's lock; membership
        // changes only under `list`, so it is still there below).
        let (count, room) = {
            let g = peer.inner.lock();
            (g.count, g.slots.room())
        };
        let mut old = None;
        // Full (no id free): grow.
        if count >= room {
            if room >= MAX_MEMBERS {
                return Err(ENOSPC);
            }
            let mut bigger = Slots::new((room * 2).min(MAX_MEMBERS))?;
            peer.inner.lock().slots.grow_into(&mut bigger);
            old = Some(bigger);
        }
        let id = peer.inner.lock().add(qp.clone(), j).ok_or(ENOSPC)?;
        drop(list);
        drop(old);
        Ok(Link { peer, id })
    }

    /// A connection without members. It accepts packets of up to
    /// [`MAX_PAYLOAD`] bytes, the most any QP cuts at; each member sends at most
    /// its own cut.
    fn new(dev: &Arc<DevShared<Qp>>, src: IpAddr, dst: IpAddr, class: u8) -> Result<Arc<Peer>> {
        let mut conn = crate::ffi::boxed::copy_to_heap(&PeerConn::BLANK, GFP_KERNEL)?;
        let r = || u64::from(crate::ffi::random::random_u32());
        let base = transport_config(dev);
        // An ACK bundle must fit the netdev as a member's DATA does: at most
        // the port's active MTU plus a DATA packet's largest headers (the
        // connection's own `mtu` is the largest any member may have).
        let fit = (super::ud::port_mtu(dev.ifindex) + MAX_DATA_HEADER) / ACK_LEN;
        let cfg = Config {
            shared: true,
            // Every path's first PSN: the peer takes them from the floors.
            tx_ident: Ident(r() << 32 | r()),
            mtu: MAX_PAYLOAD,
            ack_bundle: base
                .ack_bundle
                .min(u8::try_from(fit).unwrap_or(u8::MAX))
                .max(1),
            // Within the port's MTU, whatever the members' (`mtu` is the most
            // of any).
            ack_ride: base.ack_ride.min(
                u16::try_from(super::ud::port_mtu(dev.ifindex) + MAX_DATA_HEADER)
                    .unwrap_or(u16::MAX),
            ),
            ..base
        };
        conn.reset(cfg);
        let slots = Slots::new(FIRST_ROOM)?;
        let mut scratch = KVec::new();
        scratch.extend_with(4096 + 256, 0u8, GFP_KERNEL)?;
        let inner = PeerInner {
            conn,
            slots,
            count: 0,
            some: None,
            closing: Closing::default(),
            scratch,
            tx: None,
            last_stats: Stats::default(),
            retry: (0, 0, 0),
            wants: PathWants::new(),
            default_paths: cfg.paths,
        };
        Arc::pin_init(
            pin_init!(Peer {
                src,
                dst,
                class,
                dev: dev.clone(),
                timer <- Timer::new(),
                batch <- Deferred::new(),
                inner <- crate::ffi::sync::new_bh_lock!(inner, "metaroce_peer"),
            }),
            GFP_KERNEL,
        )
    }

    /// Member `link` leaves (its QP is reset or destroyed; the caller holds
    /// no lock of it): what the connection received is acknowledged once
    /// more while the member is still there to address it to (the peer may
    /// still wait for the ACK of the QP's last message: verbs applications
    /// often destroy right after their last completion, and the ACK of the
    /// last member of a connection has no one else to go to), then its
    /// streams close, and the last member removes the connection.
    pub(super) fn leave(dev: &DevShared<Qp>, link: Link) {
        let Link { peer, id } = link;
        peer.inner.lock().conn.ack_all();
        Peer::pump(&peer, None);
        let mut list = dev.peers.list.lock();
        let (qp, empty) = {
            let mut g = peer.inner.lock();
            g.run(dev, None, |c, mux| c.close_streams(id * 2, 2, mux));
            let qp = g.slots.qps.get_mut(usize::from(id)).and_then(|q| q.take());
            if qp.is_some() {
                let s = &mut g.slots;
                if let Some(f) = s.free.get_mut(s.nfree) {
                    *f = id;
                    s.nfree += 1;
                }
                g.count -= 1;
                let asked = g.slots.members.get(usize::from(id)).map_or(0, |m| m.paths);
                g.wants.leave(asked);
                g.apply_paths(dev);
                if g.some == Some(id) {
                    g.some = g
                        .slots
                        .qps
                        .iter()
                        .position(|q| q.is_some())
                        .map(|i| i as u16);
                }
            }
            (qp, g.count == 0)
        };
        let gone = if empty {
            list.iter_mut()
                .find(|e| e.as_ref().is_some_and(|p| Arc::ptr_eq(p, &peer)))
                .and_then(|e| e.take())
        } else {
            None
        };
        drop(list);
        Peer::pump(&peer, None);
        if gone.is_some() {
            peer.timer.shutdown();
        }
        drop((qp, gone));
    }

    /// Member `id` moved to RTS: its sending key becomes `tx` unless something
    /// went out under the RTR one, the peer may answer under `rx_alt` while
    /// nothing was accepted, and the retry limits are its own now.
    pub(super) fn rts(&self, id: u16, tx: Ident, rx_alt: Ident, retry: (u8, u8, u64)) {
        let mut g = self.inner.lock();
        let PeerInner { slots, .. } = &mut *g;
        if let (Some(m), Some(Some(qp))) = (
            slots.members.get_mut(usize::from(id)),
            slots.qps.get(usize::from(id)),
        ) {
            if !m.sent && m.tx != tx {
                m.tx = tx;
                qp.inner.lock().rc.restart_tx(tx);
            }
            if m.fresh && rx_alt != m.rx {
                m.rx_alt = rx_alt;
            }
        }
        drop(g);
        self.retry_limits(id, retry);
    }

    /// Member `id`'s retry limits are `retry` (RTS, or RTS again with new
    /// ones): its streams fail by its `retry_cnt` and `rnr_retry`; the
    /// connection's local ACK timer runs at the most patient `timeout`.
    pub(super) fn retry_limits(&self, id: u16, retry: (u8, u8, u64)) {
        let mut g = self.inner.lock();
        if let Some(m) = g.slots.members.get_mut(usize::from(id)) {
            m.limits = Some((retry.0, retry.1));
        }
        g.raise_retry(retry);
    }

    /// A datagram the dispatch table gave member `id`'s QP `qp` (which
    /// admitted it).
    pub(super) fn receive(this: &Arc<Self>, qp: &Qp, id: u16, dg: Bytes<'_>, meta: &RxMeta) {
        let mut g = this.inner.lock();
        let now = Instant(now_ns());
        let arrived = Some((qp.qpn, id));
        let (planes, up) = this.dev.planes.state();
        let plane = this.dev.planes.plane_of_iif(meta.iif);
        let r = g.run(&this.dev, arrived, |c, mux| {
            c.set_planes(planes, up);
            c.handle_pieces_on(now, dg, meta.ce, plane, mux)
        });
        match r {
            Err(reason) => qp.drop_rx(dg, meta, counter::DROP_FIRST + reason as usize),
            Ok(ev) => qp.took(dg, meta, ev == RxEvent::Data),
        }
        qp.note_share(&mut *g.conn, r, now, dg.len());
        // Sent at the end of the receive batch, or now once it is full
        // (`Qp::receive`).
        if g.conn.batch_full() {
            Peer::pump_locked(this, g);
            return;
        }
        drop(g);
        Deferred::queue(this);
    }

    /// Sends what the connection has to send; `id`: a member that may have
    /// something new (posted, or moved to the error state).
    pub(super) fn pump(this: &Arc<Self>, id: Option<u16>) {
        let mut g = this.inner.lock();
        if let Some(id) = id {
            let Slots { members, ready, .. } = &mut g.slots;
            ready.push(members, id);
        }
        Peer::pump_locked(this, g);
    }

    /// [`Self::pump`] with the lock held (at most 256 datagrams, in runs
    /// as `post.rs` sends them, `tx.rs`), then arms the timer for the
    /// connection's next deadline.
    fn pump_locked(this: &Arc<Self>, mut g: BhGuard<'_, PeerInner>) {
        let dev = &*this.dev;
        let slack = dev.pacing_slack_us();
        let out = Out {
            dev,
            src: this.src,
            dst: this.dst,
        };
        // Out of the guard while the connection writes (`PeerInner::run`
        // borrows all of it); put back below.
        let mut scratch = core::mem::take(&mut g.scratch);
        let mut tx = g.tx.take();
        let mut pump = Pump::new();
        let next = loop {
            g.conn.set_pacing_slack_us(slack);
            let (planes, up) = dev.planes.state();
            g.conn.set_planes(planes, up);
            let (mtu, train) = (g.conn.config().mtu, g.conn.config().train);
            let mut conn = PeerSource {
                g: &mut g,
                dev,
                now: Instant(now_ns()),
            };
            if !pump.round(&out, mtu, train, &mut tx, &mut scratch, &mut conn) {
                let PeerInner {
                    conn, last_stats, ..
                } = &mut *g;
                fold_stats(dev, conn.stats(), last_stats);
                dev.fair.note_rtt(conn.min_rtt());
                break conn.poll_timeout();
            }
        };
        g.scratch = scratch;
        g.tx = tx;
        // Armed before the lock is released: `Timer::arm` moves a queued timer
        // either way, so a pump racing on another CPU, arming after its own
        // unlock, could otherwise leave the deadline of an older state.
        if let Some(at) = next {
            Timer::arm(this, at.as_nanos());
        }
        drop(g);
    }

    /// The connection's state and paths for the extension API
    /// ([`Qp::query_paths`] of a member).
    pub(super) fn query_paths(&self, out: &mut crate::ffi::rdma::ext::PathsOut<'_>) -> Result {
        let g = self.inner.lock();
        super::ext::report(&*g.conn, g.count as u32, true, self.class, out);
        Ok(())
    }

    /// Member `id` asks for `n` paths ([`Qp::set_paths`]); the connection
    /// sends on the largest count its members ask for ([`PathWants`]: no QP
    /// takes paths from another's traffic). Returns the count it sends on.
    pub(super) fn set_paths(this: &Arc<Self>, id: u16, n: u8) -> u8 {
        let mut g = this.inner.lock();
        let PeerInner { slots, wants, .. } = &mut *g;
        if let Some(m) = slots.members.get_mut(usize::from(id)) {
            wants.leave(m.paths);
            wants.join(n);
            m.paths = n;
        }
        let set = g.apply_paths(&this.dev);
        Peer::pump_locked(this, g);
        set
    }

    /// Adds the connection's state to a resource dump of member `qpn`
    /// ([`Qp::fill_res`]), with `shared` 1 and `members`.
    pub(super) fn fill_res(&self, out: &mut crate::ffi::rdma::res::ResAttrs) -> Result {
        let g = self.inner.lock();
        out.u32(format_args!("shared"), 1)?;
        out.u32(format_args!("members"), g.count as u32)?;
        super::res::fill_conn(&*g.conn, out)
    }
}
