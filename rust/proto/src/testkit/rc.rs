//! A host model of an RC QP's verbs objects for the RC engine ([`crate::rc`]): SQ and RQ
//! rings, an optional SRQ, memory regions, CQs with a capacity, QP state and events; and
//! a pair of such QPs, each an engine plus a [`Connection`], over a seeded lossy,
//! reordering, duplicating link ([`Pair`]). Host only (uses `alloc`).

use crate::conn::{Config, Connection, TxKind};
use crate::rc::{
    self, access, AtomicOp, Attrs, Completions, Cqe, Engine, LocalOps, MemError, Memory, QpControl,
    QpMode, RecvQueue, RecvWqe, Resp, RxMsg, SendMsg, SendQueue, SendWqe, Sge, Storage, Taken,
    WcStatus, WrOpcode,
};
use crate::time::Instant;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

/// A send WQE in the model's SQ: the engine's fields, its SGEs and its inline data.
#[derive(Clone, Debug, Default)]
pub struct SqEntry {
    /// The WQE.
    pub wqe: SendWqe,
    /// Its SGEs.
    pub sges: Vec<Sge>,
    /// Its inline data (and ATOMIC_WRITE's 8 bytes).
    pub inline: Vec<u8>,
}

/// A memory region: `bytes` at `va`, opened by `key` (lkey and rkey alike).
#[derive(Clone, Debug)]
pub struct Mr {
    /// Local and remote key.
    pub key: u32,
    /// Address of byte 0.
    pub va: u64,
    /// Contents.
    pub bytes: Vec<u8>,
    /// `IB_ACCESS_*` bits.
    pub access: u32,
    /// Not invalidated.
    pub valid: bool,
}

/// Asynchronous events the model recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `IB_EVENT_SQ_DRAINED`.
    SqDrained,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`.
    LastWqeReached,
}

/// One QP's verbs objects.
#[derive(Clone, Debug)]
pub struct Host {
    /// QP state.
    pub mode: QpMode,
    /// QP attributes.
    pub attrs: Attrs,
    /// SQ slots (a power of two; the ring holds one fewer).
    pub sq: Vec<SqEntry>,
    /// SQ producer and consumer slots.
    pub sq_prod: u32,
    /// See `sq_prod`.
    pub sq_cons: u32,
    /// RQ slots (empty with an SRQ).
    pub rq: Vec<(RecvWqe, Vec<Sge>)>,
    /// RQ producer and consumer slots.
    pub rq_prod: u32,
    /// See `rq_prod`.
    pub rq_cons: u32,
    /// The SRQ's posted WQEs (`Some`: the QP uses an SRQ).
    pub srq: Option<VecDeque<(u64, Vec<Sge>)>>,
    /// Memory regions.
    pub mrs: Vec<Mr>,
    /// Send completions.
    pub send_cq: Vec<Cqe>,
    /// Receive completions and their solicited flag.
    pub recv_cq: Vec<(Cqe, bool)>,
    /// Completions each CQ takes before it overruns (`usize::MAX`: unbounded).
    pub cq_cap: usize,
    /// Events raised.
    pub events: Vec<Event>,
    /// Responses longer than asked for.
    pub bad_responses: u32,
    /// Snapshot this region's bytes at every successful send completion (into
    /// `snapshots`), to check what a completion guarantees at the moment it is written.
    pub snapshot_key: Option<u32>,
    /// `(wr_id, bytes)` of each snapshot.
    pub snapshots: Vec<(u64, Vec<u8>)>,
}

impl Host {
    /// A QP in RTS with `slots` SQ and RQ slots (a power of two), every remote access
    /// allowed, `max_rd_atomic` 16, 4 SGEs, 64 inline bytes.
    pub fn new(slots: usize, srq: bool) -> Self {
        let slots = slots.next_power_of_two().max(2);
        Host {
            mode: QpMode::Rts,
            attrs: Attrs {
                access: access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC,
                min_rnr_timer: 1,
                max_rd_atomic: 16,
                max_send_sge: 4,
                max_inline_data: 64,
                max_recv_sge: 4,
                srq_sge: srq.then_some(4),
                sq_sig_all: false,
            },
            sq: vec![SqEntry::default(); slots],
            sq_prod: 0,
            sq_cons: 0,
            rq: if srq {
                Vec::new()
            } else {
                vec![(RecvWqe::default(), Vec::new()); slots]
            },
            rq_prod: 0,
            rq_cons: 0,
            srq: srq.then(VecDeque::new),
            mrs: Vec::new(),
            send_cq: Vec::new(),
            recv_cq: Vec::new(),
            cq_cap: usize::MAX,
            events: Vec::new(),
            bad_responses: 0,
            snapshot_key: None,
            snapshots: Vec::new(),
        }
    }

    fn mask(n: usize) -> u32 {
        (n as u32).wrapping_sub(1)
    }

    /// Registers `len` zeroed bytes under `key` with `access`; returns the region's
    /// address.
    pub fn reg_mr(&mut self, key: u32, len: usize, access: u32) -> u64 {
        let va = u64::from(key) << 32 | 0x1000;
        self.mrs.push(Mr {
            key,
            va,
            bytes: vec![0; len],
            access,
            valid: true,
        });
        va
    }

    /// The region `key` names.
    pub fn mr(&self, key: u32) -> Option<&Mr> {
        self.mrs.iter().find(|m| m.key == key)
    }

    /// The region `key` names, mutably.
    pub fn mr_mut(&mut self, key: u32) -> Option<&mut Mr> {
        self.mrs.iter_mut().find(|m| m.key == key)
    }

    /// Posts a send WQE; `false` if the SQ is full.
    pub fn post_send(&mut self, e: SqEntry) -> bool {
        let m = Self::mask(self.sq.len());
        let next = self.sq_prod.wrapping_add(1) & m;
        if next == self.sq_cons {
            return false;
        }
        if let Some(s) = self.sq.get_mut(self.sq_prod as usize) {
            *s = e;
        }
        self.sq_prod = next;
        true
    }

    /// Posts a receive (to the SRQ if the QP has one); `false` if the RQ is full.
    pub fn post_recv(&mut self, wr_id: u64, sges: &[Sge]) -> bool {
        let num_sge = sges.len() as u32;
        if let Some(q) = self.srq.as_mut() {
            q.push_back((wr_id, sges.to_vec()));
            return true;
        }
        let m = Self::mask(self.rq.len());
        let next = self.rq_prod.wrapping_add(1) & m;
        if next == self.rq_cons {
            return false;
        }
        if let Some(s) = self.rq.get_mut(self.rq_prod as usize) {
            *s = (RecvWqe { wr_id, num_sge }, sges.to_vec());
        }
        self.rq_prod = next;
        true
    }

    /// Runs `f` on `len` bytes at `va` of region `key` after the key, validity, access
    /// and bound checks the kernel makes (in its order: denial before bounds).
    fn access<R>(
        &mut self,
        key: u32,
        va: u64,
        len: usize,
        need: u32,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, MemError> {
        let m = self
            .mrs
            .iter_mut()
            .find(|m| m.key == key)
            .ok_or(MemError::Denied)?;
        if !m.valid || m.access & need != need {
            return Err(MemError::Denied);
        }
        let off = va.checked_sub(m.va).ok_or(MemError::Fault)?;
        let off = usize::try_from(off).map_err(|_| MemError::Fault)?;
        let end = off.checked_add(len).ok_or(MemError::Fault)?;
        let b = m.bytes.get_mut(off..end).ok_or(MemError::Fault)?;
        Ok(f(b))
    }
}

impl SendQueue for Host {
    fn sq_producer(&self) -> Option<u32> {
        Some(self.sq_prod)
    }
    fn sq_advance(&self, slot: u32, n: u32) -> u32 {
        slot.wrapping_add(n) & Self::mask(self.sq.len())
    }
    fn sq_set_consumer(&mut self, slot: u32) {
        self.sq_cons = slot;
    }
    fn sq_wqe(&self, slot: u32) -> Option<SendWqe> {
        self.sq.get(slot as usize).map(|e| e.wqe)
    }
    fn sq_sge(&self, slot: u32, i: u32) -> Option<Sge> {
        self.sq.get(slot as usize)?.sges.get(i as usize).copied()
    }
    fn sq_inline(&self, slot: u32, offset: u32, dst: &mut [u8]) -> bool {
        let Some(e) = self.sq.get(slot as usize) else {
            return false;
        };
        let o = offset as usize;
        match e.inline.get(o..o + dst.len()) {
            Some(s) => {
                dst.copy_from_slice(s);
                true
            }
            None => false,
        }
    }
}

impl RecvQueue for Host {
    fn rq_producer(&self) -> Option<u32> {
        self.srq.is_none().then_some(self.rq_prod)
    }
    fn rq_advance(&self, slot: u32, n: u32) -> u32 {
        slot.wrapping_add(n) & Self::mask(self.rq.len())
    }
    fn rq_distance(&self, from: u32, to: u32) -> u32 {
        to.wrapping_sub(from) & Self::mask(self.rq.len())
    }
    fn rq_set_consumer(&mut self, slot: u32) {
        self.rq_cons = slot;
    }
    fn rq_wqe(&self, slot: u32) -> Option<RecvWqe> {
        self.rq.get(slot as usize).map(|e| e.0)
    }
    fn rq_sge(&self, slot: u32, i: u32) -> Option<Sge> {
        self.rq.get(slot as usize)?.1.get(i as usize).copied()
    }
    fn srq_take(&mut self, sges: &mut [Sge]) -> Option<(u64, u32)> {
        let (wr_id, s) = self.srq.as_mut()?.pop_front()?;
        for (d, x) in sges.iter_mut().zip(s.iter()) {
            *d = *x;
        }
        Some((wr_id, s.len() as u32))
    }
}

impl Memory for Host {
    fn local_check(&mut self, lkey: u32, va: u64, len: usize) -> Result<(), MemError> {
        self.access(lkey, va, len, 0, |_| ())
    }
    fn local_read(&mut self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), MemError> {
        self.access(lkey, va, dst.len(), 0, |b| dst.copy_from_slice(b))
    }
    fn local_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), MemError> {
        self.access(lkey, va, src.len(), access::LOCAL_WRITE, |b| {
            b.copy_from_slice(src)
        })
    }
    fn remote_check(&mut self, rkey: u32, va: u64, len: usize, need: u32) -> Result<(), MemError> {
        self.access(rkey, va, len, need, |_| ())
    }
    fn remote_read(&mut self, rkey: u32, va: u64, dst: &mut [u8]) -> Result<(), MemError> {
        self.access(rkey, va, dst.len(), access::REMOTE_READ, |b| {
            dst.copy_from_slice(b)
        })
    }
    fn remote_write(&mut self, rkey: u32, va: u64, src: &[u8]) -> Result<(), MemError> {
        self.access(rkey, va, src.len(), access::REMOTE_WRITE, |b| {
            b.copy_from_slice(src)
        })
    }
    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        self.access(rkey, va, 8, access::REMOTE_ATOMIC, |b| {
            let mut cur = [0u8; 8];
            cur.copy_from_slice(b);
            let old = u64::from_ne_bytes(cur);
            b.copy_from_slice(&op.apply(old).to_ne_bytes());
            old
        })
    }
    fn invalidate(&mut self, key: u32) -> bool {
        match self.mr_mut(key) {
            Some(m) if m.valid => {
                m.valid = false;
                true
            }
            _ => false,
        }
    }
}

impl Completions for Host {
    fn push_send(&mut self, c: &Cqe) -> bool {
        if self.send_cq.len() >= self.cq_cap {
            return false;
        }
        self.send_cq.push(*c);
        if let (Some(k), WcStatus::Success) = (self.snapshot_key, c.status) {
            let b = self.mr(k).map(|m| m.bytes.clone()).unwrap_or_default();
            self.snapshots.push((c.wr_id, b));
        }
        true
    }
    fn push_recv(&mut self, c: &Cqe, solicited: bool) -> bool {
        if self.recv_cq.len() >= self.cq_cap {
            return false;
        }
        self.recv_cq.push((*c, solicited));
        true
    }
}

impl QpControl for Host {
    fn attrs(&self) -> Attrs {
        self.attrs
    }
    fn mode(&self) -> QpMode {
        self.mode
    }
    fn enter_error(&mut self) {
        self.mode = QpMode::Err;
    }
    fn sq_drained(&mut self) {
        self.events.push(Event::SqDrained);
    }
    fn last_wqe_reached(&mut self) {
        self.events.push(Event::LastWqeReached);
    }
    fn bad_response(&mut self) {
        self.bad_responses += 1;
    }
}

impl LocalOps for Host {
    /// LOCAL_INV invalidates the MR `ex` names (`LOC_QP_OP_ERR` if it cannot); BIND_MW
    /// and REG_MR are not modelled (`LOC_QP_OP_ERR`).
    fn local_op(&mut self, slot: u32) -> WcStatus {
        let w = self.sq_wqe(slot).unwrap_or_default();
        match WrOpcode::from_raw(w.opcode) {
            Some(WrOpcode::LocalInv) if self.invalidate(w.ex) => WcStatus::Success,
            _ => WcStatus::LocQpOpErr,
        }
    }
}

/// The engine's tables in `Vec`s.
pub type VecTables = Storage<Vec<SendMsg>, Vec<u32>, Vec<RxMsg>, Vec<Taken>, Vec<Sge>, Vec<Resp>>;

/// Tables for an SQ of `slots` slots and, with an SRQ, `srq_sge` SGEs per SRQ WQE.
pub fn tables(slots: usize, srq_sge: Option<u32>) -> VecTables {
    let srq = srq_sge.unwrap_or(0) as usize;
    Storage {
        sends: vec![SendMsg::default(); slots],
        reads: vec![0; slots],
        rx: vec![RxMsg::default(); rc::RX_TRACK],
        taken: vec![Taken::default(); if srq > 0 { rc::RX_TRACK } else { 0 }],
        taken_sges: vec![Sge::default(); rc::RX_TRACK * srq],
        resps: vec![Resp::default(); rc::RESP_SLOTS],
    }
}

/// The connection of a model QP (the kernel's: 4 paths, 2 streams, 64 packets).
pub type Conn = Connection<4, 1, 2, 64>;

/// One side: its verbs objects, engine and connection.
pub struct Node {
    /// Verbs objects.
    pub host: Host,
    /// The RC engine.
    pub engine: Engine<VecTables>,
    /// The connection.
    pub conn: Conn,
}

impl Node {
    /// A QP `local` talking to `peer`, with `slots` SQ/RQ slots.
    pub fn new(local: u32, peer: u32, slots: usize, srq: bool) -> Self {
        let host = Host::new(slots, srq);
        let engine = Engine::new(tables(host.sq.len(), host.attrs.srq_sge));
        let mut cfg = Config {
            local_conn: local,
            peer_conn: peer,
            paths: 4,
            mtu: 1024,
            init_rto_ns: 2_000_000,
            min_rto_ns: 500_000,
            max_rto_ns: 50_000_000,
            ack_delay_ns: 0,
            pacing: false,
            ..Config::default()
        };
        // timeout 14 (67 ms per local ACK timeout), retry_cnt 7, rnr_retry 7.
        rc::retry_config(&mut cfg, 14, 7, 7);
        Node {
            host,
            engine,
            conn: Connection::new(cfg),
        }
    }

    /// Sets the retry limits as `modify_qp` to RTS does.
    pub fn set_retry(&mut self, timeout: u8, retry_cnt: u8, rnr_retry: u8) {
        let mut c = *self.conn.config();
        rc::retry_config(&mut c, timeout, retry_cnt, rnr_retry);
        self.conn
            .set_retry_limits(c.retry_cnt, c.rnr_retry, c.give_up_ns);
    }

    /// Moves the QP to the error state (flushing), as `modify_qp` does.
    pub fn modify_to_error(&mut self) {
        self.host.mode = QpMode::Err;
        self.engine.flush(&mut self.host);
    }

    /// The doorbell in the error state: new WQEs flush (as the kernel's doorbell).
    pub fn doorbell(&mut self) {
        if self.host.mode == QpMode::Err {
            self.engine.flush(&mut self.host);
        }
    }
}

/// Deterministic xorshift generator.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0 | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// True with probability `ppm` / 1,000,000.
    pub fn ppm(&mut self, ppm: u32) -> bool {
        self.next_u64() % 1_000_000 < u64::from(ppm)
    }
    /// A value below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64().checked_rem(n).unwrap_or(0)
    }
}

/// Link impairments, per datagram, in parts per million.
#[derive(Clone, Copy, Debug, Default)]
pub struct Link {
    /// Dropped.
    pub loss_ppm: u32,
    /// Delivered twice.
    pub dup_ppm: u32,
    /// Delayed by up to `reorder_ns` more than the base delay.
    pub reorder_ppm: u32,
    /// Base one-way delay, ns.
    pub delay_ns: u64,
    /// Extra delay of a reordered datagram, ns.
    pub reorder_ns: u64,
    /// Everything from node 1 is lost (the peer is gone).
    pub b_gone: bool,
}

/// Two model QPs (`a` = node 0, `b` = node 1) over a seeded impaired link.
pub struct Pair {
    /// Node 0.
    pub a: Node,
    /// Node 1.
    pub b: Node,
    /// The link.
    pub link: Link,
    /// Its randomness.
    pub rng: Rng,
    /// Simulated time, ns.
    pub now: u64,
    /// Datagrams in flight: (arrival, sequence, destination node, bytes).
    pub wire: Vec<(u64, u64, u8, Vec<u8>)>,
    seq: u64,
    /// Data packets each node sent (with retransmissions).
    pub data_sent: [u64; 2],
    /// Datagrams each node's connection dropped.
    pub rx_drops: [u64; 2],
}

impl Pair {
    /// Two QPs of `slots` slots (`srq`: node 1 receives from an SRQ) over `link`, seeded.
    pub fn new(slots: usize, srq: bool, link: Link, seed: u64) -> Self {
        Pair {
            a: Node::new(1, 2, slots, false),
            b: Node::new(2, 1, slots, srq),
            link,
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            now: 1_000_000,
            wire: Vec::new(),
            seq: 0,
            data_sent: [0; 2],
            rx_drops: [0; 2],
        }
    }

    fn node(&mut self, i: u8) -> &mut Node {
        if i == 0 {
            &mut self.a
        } else {
            &mut self.b
        }
    }

    /// Node `i` sends what it has to (as the kernel's pump: a lost receive completion
    /// first stops the connection).
    fn pump(&mut self, i: u8) {
        let now = Instant(self.now);
        let mut buf = [0u8; 1024 + 256];
        loop {
            let n = self.node(i);
            if n.engine.settle(&mut n.host) {
                n.conn.abort();
            }
            let Some(t) = n
                .conn
                .poll_transmit(now, &mut buf, &mut n.engine.bind(&mut n.host))
            else {
                break;
            };
            if matches!(t.kind, TxKind::Data { .. }) {
                self.data_sent[usize::from(i)] += 1;
            }
            let bytes = buf.get(..t.len).unwrap_or(&[]).to_vec();
            self.send(i, bytes);
        }
    }

    fn send(&mut self, from: u8, bytes: Vec<u8>) {
        let l = self.link;
        if (from == 1 && l.b_gone) || self.rng.ppm(l.loss_ppm) {
            return;
        }
        let copies = if self.rng.ppm(l.dup_ppm) { 2 } else { 1 };
        for _ in 0..copies {
            let mut at = self.now + l.delay_ns;
            if self.rng.ppm(l.reorder_ppm) {
                at += 1 + self.rng.below(l.reorder_ns.max(1));
            }
            self.seq += 1;
            self.wire.push((at, self.seq, 1 - from, bytes.clone()));
        }
    }

    /// Runs until both sides are quiet (nothing in flight, no deadline) or `budget_ns`
    /// of simulated time passed; returns whether they went quiet.
    pub fn run(&mut self, budget_ns: u64) -> bool {
        let end = self.now.saturating_add(budget_ns);
        self.pump(0);
        self.pump(1);
        loop {
            // The earliest of: a datagram's arrival, either connection's deadline.
            let next_pkt = self.wire.iter().map(|w| (w.0, w.1)).min();
            let ta = self.a.conn.poll_timeout().map(|t| t.0);
            let tb = self.b.conn.poll_timeout().map(|t| t.0);
            let next_timer = ta.into_iter().chain(tb).min();
            let at = match (next_pkt, next_timer) {
                (None, None) => return true,
                (Some(p), None) => p.0,
                (None, Some(t)) => t,
                (Some(p), Some(t)) => p.0.min(t),
            };
            if at > end {
                return false;
            }
            self.now = self.now.max(at);
            if let Some(p) = next_pkt.filter(|p| p.0 <= self.now) {
                let Some(k) = self.wire.iter().position(|w| (w.0, w.1) == p) else {
                    continue;
                };
                let (_, _, to, bytes) = self.wire.swap_remove(k);
                let now = Instant(self.now);
                let n = self.node(to);
                // As the kernel: a QP in the error state takes no packet.
                let r = if n.host.mode == QpMode::Err {
                    Err(())
                } else {
                    n.conn
                        .handle_packet(now, &bytes, false, &mut n.engine.bind(&mut n.host))
                        .map_err(|_| ())
                };
                if r.is_err() {
                    self.rx_drops[usize::from(to)] += 1;
                }
                self.pump(to);
                continue;
            }
            for i in 0..2u8 {
                let t = self.now;
                let now = Instant(t);
                let n = self.node(i);
                if n.conn.poll_timeout().is_some_and(|d| d.0 <= t) {
                    n.conn.handle_timeout(now, &mut n.engine.bind(&mut n.host));
                }
                self.pump(i);
            }
        }
    }

    /// Rings node `i`'s doorbell: sends what it can (or flushes in the error state).
    pub fn doorbell(&mut self, i: u8) {
        self.node(i).doorbell();
        self.pump(i);
    }
}

impl Pair {
    /// A pair with a mixed workload posted on both sides (every opcode, receives on
    /// both), for fuzzing: `srq` puts node 1 on an SRQ.
    pub fn fuzz_setup(srq: bool, seed: u64) -> Self {
        let mut p = Pair::new(16, srq, Link::default(), seed);
        let all = access::LOCAL_WRITE
            | access::REMOTE_WRITE
            | access::REMOTE_READ
            | access::REMOTE_ATOMIC;
        for (i, n) in [&mut p.a, &mut p.b].into_iter().enumerate() {
            let va = n.host.reg_mr(0x10, 1 << 16, all);
            let s = |off: u64, len: u32| Sge {
                addr: va + off,
                length: len,
                lkey: 0x10,
            };
            for r in 0..6u64 {
                n.host.post_recv(r, &[s(r * 4096, 4096)]);
            }
            let ops = [
                WrOpcode::Send,
                WrOpcode::SendWithImm,
                WrOpcode::RdmaWrite,
                WrOpcode::RdmaWriteWithImm,
                WrOpcode::RdmaRead,
                WrOpcode::AtomicCmpAndSwp,
                WrOpcode::AtomicFetchAndAdd,
                WrOpcode::SendWithInv,
            ];
            for (k, op) in ops.into_iter().enumerate() {
                let len = if matches!(op, WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd) {
                    8
                } else {
                    (k as u32 + 1) * 700 + i as u32
                };
                n.host.post_send(SqEntry {
                    wqe: SendWqe {
                        wr_id: k as u64,
                        opcode: op as u32,
                        send_flags: crate::rc::send_flags::SIGNALED,
                        remote_addr: (u64::from(0x10u32) << 32 | 0x1000) + 32768,
                        rkey: 0x10,
                        atomic_rkey: 0x10,
                        length: len,
                        num_sge: 1,
                        ..SendWqe::default()
                    },
                    sges: vec![s(8192 + k as u64 * 64, len)],
                    inline: Vec::new(),
                });
            }
        }
        p
    }

    /// Delivers `bytes` to node `to` at the current time and lets it respond.
    pub fn inject(&mut self, to: u8, bytes: &[u8]) {
        let now = Instant(self.now);
        let n = self.node(to & 1);
        if n.host.mode != QpMode::Err {
            let _ = n
                .conn
                .handle_packet(now, bytes, false, &mut n.engine.bind(&mut n.host));
        }
        self.pump(to & 1);
    }

    /// Advances time by `ns` and runs both connections' expired timers.
    pub fn tick(&mut self, ns: u64) {
        self.now = self.now.saturating_add(ns);
        for i in 0..2u8 {
            let t = self.now;
            let n = self.node(i);
            if n.conn.poll_timeout().is_some_and(|d| d.0 <= t) {
                n.conn
                    .handle_timeout(Instant(t), &mut n.engine.bind(&mut n.host));
            }
            self.pump(i);
        }
    }

    /// Datagrams the nodes sent and the link has not delivered yet, oldest first.
    pub fn take_wire(&mut self) -> Vec<(u8, Vec<u8>)> {
        let mut w = core::mem::take(&mut self.wire);
        w.sort_by_key(|x| (x.0, x.1));
        w.into_iter().map(|x| (x.2, x.3)).collect()
    }
}

/// The fuzz entry: `data` drives a [`Pair::fuzz_setup`] pair. Byte 0: bit 0 SRQ. Then
/// records of `[kind, len_lo, len_hi, bytes…]`: kind bit 0 is the destination node; bit 1
/// set means "deliver the oldest captured datagram, mutated by XOR with `bytes`", clear
/// means "deliver `bytes` as is"; bits 2-7 advance time by that many 100 µs. Nothing may
/// panic; afterwards every completion is one the engine may produce. Returns the
/// completions written (both sides, both CQs).
pub fn fuzz_engine(data: &[u8]) -> usize {
    let (&flags, mut rest) = match data.split_first() {
        Some(x) => x,
        None => return 0,
    };
    let mut p = Pair::fuzz_setup(flags & 1 != 0, u64::from(flags));
    p.pump(0);
    p.pump(1);
    let mut captured: VecDeque<(u8, Vec<u8>)> = p.take_wire().into();
    while let [kind, lo, hi, tail @ ..] = rest {
        let n = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let (bytes, tail) = tail.split_at(n);
        rest = tail;
        let to = kind & 1;
        if kind & 2 != 0 {
            if let Some((dst, mut d)) = captured.pop_front() {
                for (x, m) in d.iter_mut().zip(bytes) {
                    *x ^= m;
                }
                p.inject(dst, &d);
            }
        } else {
            p.inject(to, bytes);
        }
        p.tick(u64::from(kind >> 2) * 100_000);
        captured.extend(p.take_wire());
        if captured.len() > 256 {
            captured.drain(..128);
        }
    }
    // Whatever arrived: every WQE completes at most once, sends in SQ order.
    for n in [&p.a, &p.b] {
        let ids: Vec<u64> = n.host.send_cq.iter().map(|c| c.wr_id).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "send completions out of order: {ids:?}"
        );
        let mut r: Vec<u64> = n.host.recv_cq.iter().map(|c| c.0.wr_id).collect();
        r.sort_unstable();
        assert!(
            r.windows(2).all(|w| w[0] < w[1]),
            "a receive completed twice: {r:?}"
        );
    }
    [&p.a, &p.b]
        .iter()
        .map(|n| n.host.send_cq.len() + n.host.recv_cq.len())
        .sum()
}
