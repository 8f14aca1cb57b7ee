// SPDX-License-Identifier: GPL-2.0

//! Transmission outside a connection's lock (Documentation/device.rst,
//! "Data path"). The pump builds each datagram under the lock straight
//! into its skb, routes it and queues it in a [`Batch`] of up to [`BATCH`];
//! then it drops the lock and hands the batch to the network stack, so a
//! receive on another CPU does not wait for the IP stack and the NIC driver,
//! and takes the lock again for the next.
//!
//! One context at a time sends for a connection ([`Sender`], under its
//! lock). A pump that finds another context sending leaves, asking it to
//! poll the connection again after its batch; so datagrams leave in the
//! order they were built, and nothing waits behind a lock for the network
//! stack. The sender keeps bottom halves disabled from [`Sender::begin`] to
//! [`Sender::end`], so that it is neither preempted nor interrupted by a
//! softirq of this CPU while others rely on it.

use super::*;
use crate::ffi::net::{Dest, RouteCache, Routed, TxDatagram};
use crate::ffi::sync::{BhDisabled, BhGuard, BhLock};
use crate::proto::conn::TxKind;

/// The most datagrams one pump sends (then the timer sends the rest).
const BUDGET: u32 = 256;

/// Datagrams built per hold of a connection's lock. 1: each leaves as soon
/// as it is built. 8 was measured (Documentation/bench.rst, "Data path (stop
/// 53)"): the first datagram of a batch left later, and under emulation,
/// where the peer works while this guest builds, that cost more (4 KiB WRITE
/// 9 % slower, `ib_write_lat` 7 % higher) than the lock holds it saved.
pub(super) const BATCH: usize = 1;

/// Room a datagram needs beyond the path MTU's payload
/// ([`Connection::poll_transmit`]: at least `mtu + 84` bytes).
const DATAGRAM_ROOM: usize = 84;

/// The capacity of a datagram for a connection of path MTU `mtu` whose
/// scratch buffer is `scratch` bytes (the larger could not be sent whole).
pub(super) fn capacity(mtu: usize, scratch: usize) -> usize {
    (mtu + DATAGRAM_ROOM).min(scratch)
}

/// The pump of a connection behind `lock`, whose guard `g` the caller
/// holds. Unless another context is sending (then it returns at once: that
/// one polls again), it becomes the sender (`sender` finds its [`Sender`])
/// and, a batch at a time, builds under the lock (`build(g, batch,
/// budget)`: at most `budget` datagrams, counted down; when it stops before
/// the batch is full it returns the time to poll again), sends without it,
/// and takes it again; at most [`BUDGET`] datagrams. Then it calls `arm`
/// with that time, if any, under the lock: a context that pumps next arms
/// after this one, for the state it saw (a timer moves earlier or later).
pub(super) fn pump<'a, T>(
    lock: &'a BhLock<T>,
    mut g: BhGuard<'a, T>,
    dev: &DevShared<Qp>,
    sender: fn(&mut T) -> &mut Sender,
    mut build: impl FnMut(&mut BhGuard<'a, T>, &mut Batch, &mut u32) -> Option<Instant>,
    arm: impl FnOnce(Instant),
) {
    if !sender(&mut g).begin() {
        return;
    }
    // Bottom halves stay off until the sender ends.
    let _bh = BhDisabled::new();
    let mut budget = BUDGET;
    let mut batch = Batch::new();
    let next = loop {
        let next = build(&mut g, &mut batch, &mut budget);
        if batch.is_empty() {
            break next;
        }
        let full = batch.is_full();
        drop(g);
        batch.send(dev);
        g = lock.lock();
        if !sender(&mut g).again(full) {
            break next;
        }
    };
    sender(&mut g).end();
    if let Some(at) = next {
        arm(at);
    }
    drop(g);
}

/// Which context sends a connection's datagrams (kept under its lock).
#[derive(Default)]
pub(super) struct Sender {
    /// A context is sending.
    sending: bool,
    /// Another context made datagrams sendable while it was.
    again: bool,
}

impl Sender {
    /// Makes the caller the sender; `false` (and the sender will poll again)
    /// if another context is.
    pub(super) fn begin(&mut self) -> bool {
        if self.sending {
            self.again = true;
            return false;
        }
        self.sending = true;
        self.again = false;
        true
    }

    /// After a batch went out: whether the sender polls the connection
    /// again, because the batch was full (`full`: the core may have more) or
    /// another context asked ([`Self::begin`]).
    pub(super) fn again(&mut self, full: bool) -> bool {
        core::mem::take(&mut self.again) || full
    }

    /// The sender is done.
    pub(super) fn end(&mut self) {
        self.sending = false;
    }
}

/// A datagram of a [`Batch`]: routed, with what counting it needs.
struct Item {
    r: Routed,
    len: usize,
    probe: bool,
}

/// Datagrams routed under a connection's lock, sent in order after it is
/// dropped ([`Batch::send`]). Anything still queued when it is dropped is
/// freed, not sent.
pub(super) struct Batch {
    items: [Option<Item>; BATCH],
    n: usize,
}

impl Batch {
    /// An empty batch.
    pub(super) fn new() -> Self {
        Batch {
            items: [const { None }; BATCH],
            n: 0,
        }
    }

    /// Whether no datagram is queued.
    pub(super) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether [`BATCH`] datagrams are queued.
    pub(super) fn is_full(&self) -> bool {
        self.n >= BATCH
    }

    /// Traces datagram `d`, the first `t.len` bytes of which the core wrote
    /// as `t` describes (`metaroce:tx`, under QPN `qpn`), routes it from
    /// `src` to `dst` through device `dev`'s netdev (through `routes`, slot
    /// the path, when given) and queues it; a datagram that cannot be routed
    /// is dropped, uncounted. A full batch is sent first (still in order).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push(
        &mut self,
        dev: &DevShared<Qp>,
        qpn: u32,
        src: &IpAddr,
        dst: &IpAddr,
        t: &Transmit,
        mut d: TxDatagram,
        routes: Option<(&mut RouteCache, usize)>,
    ) {
        let len = t.len.min(d.buf().len());
        observe::trace_tx(qpn, t, &d.buf()[..len]);
        let to = Dest {
            src: *src,
            dst: *dst,
            oif: dev.planes.oif(t),
            src_port: t.src_port,
            dst_port: dev.transport.port(),
            ect: t.ect,
        };
        let Ok(r) = dev.transport.prepare(d, len, &to, routes) else {
            return;
        };
        if self.is_full() {
            self.send(dev);
        }
        self.items[self.n] = Some(Item {
            r,
            len,
            probe: t.kind == TxKind::Probe,
        });
        self.n += 1;
    }

    /// [`Self::push`] of datagram `bytes` (copied into an skb); dropped,
    /// uncounted, if no skb can be had.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_bytes(
        &mut self,
        dev: &DevShared<Qp>,
        qpn: u32,
        src: &IpAddr,
        dst: &IpAddr,
        t: &Transmit,
        bytes: &[u8],
        routes: Option<(&mut RouteCache, usize)>,
    ) {
        let Ok(mut d) = TxDatagram::new(bytes.len()) else {
            return;
        };
        d.buf().copy_from_slice(bytes);
        let t = Transmit {
            len: bytes.len(),
            ..*t
        };
        self.push(dev, qpn, src, dst, &t, d, routes);
    }

    /// Hands the queued datagrams to the network stack through device
    /// `dev`'s tunnel, in the order they were queued, and counts them
    /// (`tx_packets`, `tx_bytes`, `probes`). Leaves the batch empty.
    pub(super) fn send(&mut self, dev: &DevShared<Qp>) {
        let (mut packets, mut bytes, mut probes) = (0u64, 0u64, 0u64);
        for it in self.items.iter_mut().take(self.n) {
            if let Some(Item { r, len, probe }) = it.take() {
                dev.transport.xmit(r);
                packets += 1;
                bytes += len as u64;
                probes += u64::from(probe);
            }
        }
        self.n = 0;
        dev.count(counter::TX_PACKETS, packets);
        dev.count(counter::TX_BYTES, bytes);
        if probes != 0 {
            dev.count(counter::PROBES, probes);
        }
    }
}
