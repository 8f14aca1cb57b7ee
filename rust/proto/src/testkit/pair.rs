//! Two model QPs ([`super::rc::Host`]), each an RC engine plus a [`Connection`], over a
//! seeded lossy, reordering, duplicating link; and the fuzz entry that drives them with
//! arbitrary datagrams. Host only (uses `alloc`).

use super::rc::{tables, Host, SqEntry, VecTables};
use crate::conn::{Config, Connection, TxKind};
use crate::rc::{self, access, Engine, QpMode, SendWqe, Sge, WrOpcode};
use crate::time::Instant;
use crate::wire::DropReason;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// The connection of a model QP (4 paths, 64 packets; the engine holds its 2 streams).
pub type Conn = Connection<4, 1, 64>;

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
        Node {
            host,
            engine,
            conn: Connection::new(model_config(local, peer)),
        }
    }

    /// A new connection of configuration `cfg`, the engine's streams at their first
    /// SSNs under its keys (as the kernel does at RTR).
    pub fn connect(&mut self, cfg: Config) {
        self.conn = Connection::new(cfg);
        self.engine.start_streams(cfg.tx_ident, cfg.rx_ident);
    }

    /// Sets the retry limits as `modify_qp` to RTS does.
    pub fn set_retry(&mut self, timeout: u8, retry_cnt: u8, rnr_retry: u8) {
        let mut c = *self.conn.config();
        rc::retry_config(&mut c, timeout, retry_cnt, rnr_retry);
        self.conn
            .set_retry_limits(c.retry_cnt, c.rnr_retry, c.ack_timeout_ns);
    }

    /// Sets `max_dest_rd_atomic` as `modify_qp` does ([`super::rc::set_max_dest_rd_atomic`]):
    /// whether the response table was replaced.
    pub fn set_max_dest_rd_atomic(&mut self, d: u8) -> bool {
        super::rc::set_max_dest_rd_atomic(&mut self.host, &mut self.engine, d)
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

/// The model QPs' connection configuration between connection ids `local` and `peer`:
/// 4 paths, a 1 KiB MTU, RTO 0.5-50 ms (2 ms before an RTT sample), no delayed ACK, ACKs
/// riding on DATA (as the kernel's) and runs of 4 DATA packets a path, no pacing; local
/// ACK timeout 14 (67 ms), `retry_cnt` 7, `rnr_retry` 7.
pub fn model_config(local: u32, peer: u32) -> Config {
    let mut cfg = Config {
        local_conn: local,
        peer_conn: peer,
        incarnation: incarnation_of(local),
        paths: 4,
        mtu: 1024,
        init_rto_ns: 2_000_000,
        min_rto_ns: 500_000,
        max_rto_ns: 50_000_000,
        ack_delay_ns: 0,
        ack_ride: u16::MAX,
        // Runs of DATA on a path, as the kernel sends them with `train=4`.
        train: 4,
        pacing: false,
        ..Config::default()
    };
    rc::retry_config(&mut cfg, 14, 7, 7);
    cfg
}

/// The models' incarnation for the connection whose id is `local`: nonzero, and not
/// the same at the two ends, so that every ACK's echo is checked against the right one.
pub fn incarnation_of(local: u32) -> u16 {
    (local as u16).wrapping_mul(0x9e37) | 1
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

/// The model link between node 0 and node 1: its impairments, their randomness and the
/// datagrams in flight.
pub struct Wire {
    /// The impairments.
    pub link: Link,
    rng: Rng,
    seq: u64,
    /// Datagrams in flight: (arrival, sequence, destination node, bytes).
    pub queue: Vec<(u64, u64, u8, Vec<u8>)>,
}

impl Wire {
    /// An empty link with `link`'s impairments, seeded.
    pub fn new(link: Link, seed: u64) -> Self {
        Wire {
            link,
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            seq: 0,
            queue: Vec::new(),
        }
    }

    /// A datagram node `from` sends at `now`: queued zero, one or two times, as the
    /// impairments say.
    pub fn send(&mut self, now: u64, from: u8, bytes: Vec<u8>) {
        let l = self.link;
        if (from == 1 && l.b_gone) || self.rng.ppm(l.loss_ppm) {
            return;
        }
        let copies = if self.rng.ppm(l.dup_ppm) { 2 } else { 1 };
        for _ in 0..copies {
            let mut at = now + l.delay_ns;
            if self.rng.ppm(l.reorder_ppm) {
                at += 1 + self.rng.below(l.reorder_ns.max(1));
            }
            self.seq += 1;
            self.queue.push((at, self.seq, 1 - from, bytes.clone()));
        }
    }

    /// When the next datagram arrives.
    pub fn next_arrival(&self) -> Option<u64> {
        self.queue.iter().map(|w| w.0).min()
    }

    /// The earliest datagram arrived by `now` (ties in sending order): (destination
    /// node, bytes).
    pub fn take_due(&mut self, now: u64) -> Option<(u8, Vec<u8>)> {
        let k = (0..self.queue.len())
            .filter(|k| self.queue[*k].0 <= now)
            .min_by_key(|k| (self.queue[*k].0, self.queue[*k].1))?;
        let (_, _, to, bytes) = self.queue.swap_remove(k);
        Some((to, bytes))
    }
}

/// The earliest of a datagram's arrival and a deadline.
pub(super) fn next_event(pkt: Option<u64>, timer: Option<u64>) -> Option<u64> {
    pkt.into_iter().chain(timer).min()
}

/// Two model QPs (`a` = node 0, `b` = node 1) over a seeded impaired link.
pub struct Pair {
    /// Node 0.
    pub a: Node,
    /// Node 1.
    pub b: Node,
    /// The link and what is in flight on it.
    pub wire: Wire,
    /// Simulated time, ns.
    pub now: u64,
    /// Data packets each node sent (with retransmissions).
    pub data_sent: [u64; 2],
    /// Datagrams each node sent (a DATA with ACKs riding on it is one).
    pub datagrams: [u64; 2],
    /// Datagrams each node's connection dropped.
    pub rx_drops: [u64; 2],
}

impl Pair {
    /// Two QPs of `slots` slots (`srq`: node 1 receives from an SRQ) over `link`, seeded.
    pub fn new(slots: usize, srq: bool, link: Link, seed: u64) -> Self {
        Pair {
            a: Node::new(1, 2, slots, false),
            b: Node::new(2, 1, slots, srq),
            wire: Wire::new(link, seed),
            now: 1_000_000,
            data_sent: [0; 2],
            datagrams: [0; 2],
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
            self.datagrams[usize::from(i)] += 1;
            let bytes = buf.get(..t.len).unwrap_or(&[]).to_vec();
            self.wire.send(self.now, i, bytes);
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
            let ta = self.a.conn.poll_timeout().map(|t| t.0);
            let tb = self.b.conn.poll_timeout().map(|t| t.0);
            let next_timer = ta.into_iter().chain(tb).min();
            let Some(at) = next_event(self.wire.next_arrival(), next_timer) else {
                return true;
            };
            if at > end {
                return false;
            }
            self.now = self.now.max(at);
            if let Some((to, bytes)) = self.wire.take_due(self.now) {
                let now = Instant(self.now);
                let n = self.node(to);
                // As the kernel: a QP in the error state takes no packet, unless it
                // lingers after refusing a request.
                let r = if n.host.mode == QpMode::Err && !n.engine.lingers() {
                    Err(())
                } else {
                    n.conn
                        .handle_pieces(
                            now,
                            super::as_received(&bytes),
                            false,
                            &mut n.engine.bind(&mut n.host),
                        )
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

    /// Delivers `bytes` to node `to` at the current time and lets it respond. A
    /// datagram the connection drops must leave it exactly as it was (panics
    /// otherwise): only a refusal (RNR, NAK) queues a report for the peer.
    pub fn inject(&mut self, to: u8, bytes: &[u8]) {
        let now = Instant(self.now);
        let n = self.node(to & 1);
        if n.host.mode != QpMode::Err || n.engine.lingers() {
            let before = n.conn;
            let r = n
                .conn
                .handle_packet(now, bytes, false, &mut n.engine.bind(&mut n.host));
            if let Err(e) = r {
                if !matches!(e, DropReason::ReceiverNotReady | DropReason::Refused) {
                    let (was, is) = (format!("{before:?}"), format!("{:?}", n.conn));
                    assert!(
                        was == is,
                        "a datagram dropped as {e:?} changed the connection"
                    );
                }
            }
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
        let mut w = core::mem::take(&mut self.wire.queue);
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
