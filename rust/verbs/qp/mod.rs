// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (IBTA 10.2.4, 11.2.5): the state machine, the SQ/RQ rings
//! shared with the rxe provider, and the glue between them and two sans-I/O
//! cores: the RC engine ([`crate::proto::rc`], which holds the requester,
//! responder and completer rules: WQEs to messages, RSN matching, READ and
//! atomic answers, in-order completions, flush and error statuses) and the
//! protocol connection ([`crate::proto::conn::Connection`], which segments,
//! sprays, acknowledges and retransmits the engine's messages).
//!
//! An RC QP in RTR or RTS has one engine and either owns one connection,
//! whose [`crate::proto::conn::App`] the engine is ([`crate::proto::rc::Bound`]
//! over [`Glue`], which implements the engine's traits on this QP's rings,
//! the device's MR and MW tables, its CQs, SRQ and events: `env`), or, on a
//! device that shares connections, is a member of the connection to its peer
//! (`peer`), whose application multiplexes its members' engines.
//!
//! Files: `control` (create/modify/query/destroy), `post` (doorbell, kernel
//! posts, transmission), `env` (the engine's traits on the kernel objects),
//! `mem` (memory access: lkeys, rkeys and windows), `local` (BIND_MW,
//! LOCAL_INV, REG_MR), `peer` (shared connections) and `mux` (their
//! members as the connection's application), `uc` (unreliable
//! connected QPs), `ud` (datagram
//! QPs), `observe` (trace events), `res` (the resource-dump view), `ext`
//! (the extension API: paths queried and set); this file
//! holds the QP's state, its timer and its receive path.

mod control;
mod env;
mod ext;
mod local;
mod mem;
mod mux;
mod observe;
mod peer;
mod post;
mod res;
mod tx;
mod uc;
mod ud;

use super::counters as counter;
use super::cq::Cq;
use super::shared::{DevShared, Grouped};
use super::srq::Srq;
use crate::ffi::defer::{impl_has_deferred, Deferred, DeferredCallback};
use crate::ffi::net::{IpAddr, RxMeta};
use crate::ffi::rdma::{
    modify_qp_is_ok, qp_mask, PdId, QpAttr, QpCaps, QpEvents, QpHandle, QpInit, QpState, QpType,
};
use crate::ffi::rxe_abi::{Queue, RecvWqe, SendWqe, SGE_SIZE};
use crate::ffi::sync::BhGuard;
use crate::ffi::timer::{impl_has_timer, now_ns, Timer, TimerCallback};
use crate::ffi::udata::UContext;
use crate::ffi::wr::{RecvWrs, SendWrs};
use crate::net::Endpoint;
use crate::proto::bytes::Bytes;
use crate::proto::conn::{Config, Connection, RxEvent, Stats, Transmit};
use crate::proto::rc::{Engine, UcLink};
use crate::proto::time::Instant;
use crate::proto::wire::DropReason;
use kernel::prelude::*;
use kernel::sync::Arc;

use control::transport_config;
pub(super) use env::RcTables;
use observe::conn_event;
pub(crate) use peer::PeerTable;
use peer::{Link, Peer};
use post::fold_stats;

/// The protocol connection of one RC QP: room for 64 paths (the `paths`
/// module parameter says how many are used), 64 packets in flight. 9712
/// bytes, allocated at RTR (Documentation/device.rst, "Paths"). Its two
/// streams (requests; READ/atomic responses) are the engine's.
type Conn = Connection<{ crate::proto::conn::MAX_PATHS }, 1, 64>;

/// The QP state behind its lock, except the connection and the engine.
struct Io {
    attr: QpAttr,
    caps: QpCaps,
    sq: Option<Queue>,
    rq: Option<Queue>,
    /// SGEs per SRQ WQE (0 without an SRQ).
    srq_sge: usize,
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    /// The connection's counters when last added to the device's.
    last_stats: Stats,
    dead: bool,
    /// Its stream class (the extension API; 0 unless pinned before RTR):
    /// on a device that shares connections, part of the connection's key.
    class: u8,
}

struct Inner {
    conn: Option<KBox<Conn>>,
    /// On a device that shares connections: this RC QP's membership (from
    /// RTR until RESET or destroy).
    link: Option<Link>,
    /// A UC QP's link (RTR opens its receiving half, RTS its sending half);
    /// `None` for every other type (boxed: it is 96 bytes, and keeps the QP
    /// object within 1 KiB, Documentation/testing.rst, "Many QPs").
    uc: Option<KBox<UcLink>>,
    io: Io,
    /// The RC engine (UD QPs use its ring heads and flush).
    rc: Engine<RcTables>,
    /// One datagram being built (datagram QPs, UC, and RC when no skb can
    /// be had).
    scratch: KVec<u8>,
    /// An RC QP's transmit state (boxed, as `uc`; from its first pump).
    tx: Option<KBox<tx::TxCache>>,
}

/// A queue pair.
#[pin_data]
pub(crate) struct Qp {
    qpn: u32,
    qp_type: QpType,
    /// The core's `ib_qp`, named by this QP's completions on kernel CQs.
    handle: QpHandle,
    /// A kernel consumer's QP (rings in kernel memory, `ib_post_*`).
    kernel: bool,
    events: QpEvents,
    pd: PdId,
    sq_sig_all: bool,
    dev: Arc<DevShared<Qp>>,
    scq: Arc<Cq>,
    rcq: Arc<Cq>,
    srq: Option<Arc<Srq>>,
    #[pin]
    timer: Timer<Qp>,
    /// What a received datagram calls for, sent at the end of its receive
    /// batch (`Documentation/device.rst`, "Data path").
    #[pin]
    batch: Deferred<Qp>,
    #[pin]
    inner: crate::ffi::sync::BhLock<Inner>,
}

impl_has_timer! { impl HasTimer for Qp { self.timer } }
impl_has_deferred! { impl HasDeferred for Qp { self.batch } }

impl DeferredCallback for Qp {
    /// The end of a receive batch that delivered datagrams to this QP (RC,
    /// a connection of its own): the ACKs and data they call for, with
    /// every packet of the batch taken.
    fn run(this: &Arc<Self>) {
        Qp::pump(this);
    }
}

// The QP object with its `Arc` count fits a `kmalloc-1k` (Documentation/
// testing.rst, "Many QPs"): a few bytes more would take a `kmalloc-2k`.
// (Not with lockdep, whose locks are larger.)
#[cfg(not(CONFIG_DEBUG_LOCK_ALLOC))]
const _: () = assert!(core::mem::size_of::<Qp>() + 8 <= 1024);

impl Grouped for Qp {
    type Peers = PeerTable;
}

impl TimerCallback for Qp {
    fn fired(this: &Arc<Self>) {
        this.dev.note_timer(this.timer.deadline_ns(), now_ns());
        let mut g = this.inner.lock();
        if this.qp_type.is_datagram() {
            // Datagrams a kernel consumer posted with interrupts off.
            if matches!(g.io.attr.state, QpState::Rts | QpState::Sqd) {
                Qp::datagrams_locked(this, &mut g);
            }
            return;
        }
        if this.qp_type == QpType::Uc {
            // The rest of what a UC QP had to send (or what a kernel
            // consumer posted with interrupts off).
            if matches!(g.io.attr.state, QpState::Rts | QpState::Sqd) {
                Qp::uc_locked(this, &mut g);
            }
            return;
        }
        if let Some(l) = g.link.clone() {
            // What a kernel consumer posted with interrupts off.
            drop(g);
            Peer::pump(&l.peer, Some(l.id));
            return;
        }
        {
            let Inner { conn, io, rc, .. } = &mut *g;
            if let Some(c) = conn {
                let mut env = Glue { qp: this, io };
                c.handle_timeout(Instant(now_ns()), &mut rc.bind(&mut env));
            }
        }
        Qp::pump_locked(this, g);
    }
}

impl Endpoint for Qp {
    fn receive(this: &Arc<Self>, dg: Bytes<'_>, meta: &RxMeta) {
        this.dev.count(counter::RX_PACKETS, 1);
        this.dev.count(counter::RX_BYTES, dg.len() as u64);
        if meta.ce {
            this.dev.count(counter::ECN_CE, 1);
        }
        if this.qp_type.is_datagram() {
            let mut g = this.inner.lock();
            let Inner { io, rc, .. } = &mut *g;
            let mut env = Glue { qp: this, io };
            // (Only DATA comes in pieces, and a UD QP takes none.)
            let r = match dg.pieces() {
                [whole, []] => env.datagram_in(rc, whole, meta),
                _ => Err(counter::DROP_FIRST + DropReason::UnknownType as usize),
            };
            match r {
                Err(reason) => this.drop_rx(dg, meta, reason),
                Ok(()) => this.trace_rx(dg, meta, None),
            }
            rc.settle(&mut env);
            return;
        }
        if this.qp_type == QpType::Uc {
            Qp::uc_receive(this, dg, meta);
            return;
        }
        let mut g = this.inner.lock();
        if let Some(l) = g.link.clone() {
            // In the error state too: the connection answers that the QP is
            // closed (transport.rst, "Shared connections").
            let ok = this.admits(&g.io, true, dg, meta);
            drop(g);
            if ok {
                Peer::receive(&l.peer, this, l.id, dg, meta);
            }
            return;
        }
        {
            let Inner { conn, io, rc, .. } = &mut *g;
            let Some(c) = conn else {
                this.drop_rx(dg, meta, counter::DROP_QP_STATE);
                return;
            };
            if !this.admits(io, rc.lingers(), dg, meta) {
                return;
            }
            let now = Instant(now_ns());
            let mut env = Glue { qp: this, io };
            let mut app = rc.bind(&mut env);
            let (planes, up) = this.dev.planes.state();
            c.set_planes(planes, up);
            let plane = this.dev.planes.plane_of_iif(meta.iif);
            let r = c.handle_pieces_on(now, dg, meta.ce, plane, &mut app);
            match r {
                Err(reason) => this.drop_rx(dg, meta, counter::DROP_FIRST + reason as usize),
                Ok(ev) => this.took(dg, meta, ev == RxEvent::Data),
            }
            this.note_share(c, r, now, dg.len());
            if c.batch_full() {
                // `RX_BATCH` datagrams held: answered now, not at the batch's end.
                Qp::pump_locked(this, g);
                return;
            }
        }
        // The ACK, and whatever else this datagram calls for, is built at
        // the end of the receive batch, once with every datagram of the batch
        // taken (`Documentation/device.rst`, "Data path").
        drop(g);
        Deferred::queue(this);
    }
}

impl Qp {
    /// Whether a connected QP (RC, UC) takes a datagram in its state from
    /// `meta`'s source: in RTR, RTS or SQD, or in the error state if it
    /// `lingers` after refusing a request (so that it answers the requester,
    /// `Engine::lingers`), and only from the peer set by `modify_qp`. A
    /// refused one is counted (`rx_drops` and its reason) and traced.
    fn admits(&self, io: &Io, lingers: bool, dg: Bytes<'_>, meta: &RxMeta) -> bool {
        let reason = if !io.takes_packets(lingers) {
            counter::DROP_QP_STATE
        } else if io.dst != Some(meta.src) {
            counter::DROP_BAD_SOURCE
        } else {
            return true;
        };
        self.drop_rx(dg, meta, reason);
        false
    }

    /// The device's fair share for the sender of a datagram of `len` bytes
    /// that connection `c` took with result `r`, set as `c`'s hint (its ACKs,
    /// sent next, carry it): only data the connection accepted counts, so
    /// forged datagrams cannot skew anyone's share.
    fn note_share<const P: usize, const W: usize, const N: usize>(
        &self,
        c: &mut Connection<P, W, N>,
        r: Result<RxEvent, DropReason>,
        now: Instant,
        len: usize,
    ) {
        if let Ok(RxEvent::Data | RxEvent::Duplicate) = r {
            let bytes = u32::try_from(len).unwrap_or(u32::MAX);
            let hint = self.dev.fair.note(now, c.fair_slot(), bytes);
            if hint != c.rate_hint() {
                self.dev.count(counter::HINT_CHANGES, 1);
                self.trace_local_hint(c.rate_hint(), hint);
                c.set_rate_hint(hint);
            }
        }
    }

    /// Traces datagram `dg`, which the QP (or its connection) took; `placed`:
    /// its payload was placed, counted in `rx_pieces` if it came in pieces.
    fn took(&self, dg: Bytes<'_>, meta: &RxMeta, placed: bool) {
        if placed && !dg.pieces()[1].is_empty() {
            self.dev.count(counter::RX_PIECES, 1);
        }
        self.trace_rx(dg, meta, None);
    }

    /// Counts datagram `dg` as dropped for device counter `reason`
    /// (with `rx_drops`) and traces it (`metaroce:rx`).
    fn drop_rx(&self, dg: Bytes<'_>, meta: &RxMeta, reason: usize) {
        self.dev.count(counter::RX_DROPS, 1);
        self.dev.count(reason, 1);
        if reason == counter::DROP_FIRST + DropReason::ModeMismatch as usize {
            self.dev.note_mode_mismatch(&meta.src);
        }
        self.trace_rx(dg, meta, Some(reason));
    }
}

/// Bytes per SQ / RQ slot for the requested SGEs / inline data (rxe's sizing).
fn sq_elem(caps: &QpCaps) -> usize {
    SendWqe::HEADER + (caps.max_send_sge as usize * SGE_SIZE).max(caps.max_inline_data as usize)
}

/// Largest inline data per send WQE.
const MAX_INLINE: u32 = 512;

impl Io {
    /// Whether a connected QP in this state takes packets: in RTR, RTS or
    /// SQD, and in the error state only if it `lingers` to deliver a refusal.
    fn takes_packets(&self, lingers: bool) -> bool {
        match self.attr.state {
            QpState::Rtr | QpState::Rts | QpState::Sqd => true,
            QpState::Err => lingers,
            _ => false,
        }
    }

    fn reset(&mut self) {
        for q in [&self.sq, &self.rq].into_iter().flatten() {
            q.set_producer(0);
            q.set_consumer(0);
        }
    }
}

/// The kernel side of one QP as the RC engine sees it (the traits of
/// [`crate::proto::rc::env`], implemented in `env`).
struct Glue<'a> {
    qp: &'a Qp,
    io: &'a mut Io,
}
