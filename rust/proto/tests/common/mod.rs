//! Test harness: two connections over a tiny deterministic network with per-path FIFO
//! delay, random loss, and cross-path reordering.
#![allow(dead_code)]

use metaroce_proto::conn::{
    App, Config, ConnError, Connection, Event, MsgInfo, Placement, Refuse, Rnr, Transmit, TxKind,
    Unreadable,
};
use metaroce_proto::ident::Ident;
use metaroce_proto::stream::{Stream, StreamTable};
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{DropCounters, Op};
use std::collections::BTreeMap;

pub type Conn = Connection<8, 1>;

/// Deterministic xorshift PRNG.
#[derive(Clone)]
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
}

pub fn pattern(stream: u16, msn: u32, off: u32) -> u8 {
    (u32::from(stream).wrapping_mul(31) ^ msn.wrapping_mul(7) ^ off.wrapping_mul(13) ^ (off >> 8))
        as u8
}

/// Sender + receiver application: messages queued per stream, placement bookkeeping.
#[derive(Clone, Default)]
pub struct TestApp {
    pub msgs: [Vec<u32>; 4],
    pub placed: BTreeMap<(u16, u32), Vec<u8>>,
    pub placed_count: BTreeMap<(u16, u32), u32>,
    pub completed: [Vec<u32>; 4],
    pub acked: [Vec<u32>; 4],
    pub errors: Vec<ConnError>,
    pub violations: Vec<String>,
    pub rnr_left: u32,
    /// Refuse every packet of this message ...
    pub refuse: Option<(u16, u32)>,
    /// ... with this reason (default: remote access error).
    pub refuse_as: Option<Refuse>,
    /// The bytes of this message (stream, msn) cannot be read, with this kind.
    pub unreadable: Option<(u16, u32, Unreadable)>,
    /// Every (stream, msn, offset) whose bytes `payload` supplied.
    pub supplied: Vec<(u16, u32, u32)>,
    pub expect_len: BTreeMap<(u16, u32), u32>,
    /// Every event the connection reported ([`App::event`]).
    pub events: Vec<Event>,
    /// The streams' state (keys [`Ident::DEFAULT`] unless a test starts them over).
    pub table: StreamTable<4>,
}

impl TestApp {
    /// An application whose stream table is keyed as connection `cfg`'s (its sending
    /// and receiving idents).
    pub fn keyed(cfg: &metaroce_proto::conn::Config) -> Self {
        TestApp {
            table: metaroce_proto::stream::StreamTable::new(cfg.tx_ident, cfg.rx_ident),
            ..TestApp::default()
        }
    }

    pub fn op_for(msn: u32) -> Op {
        match msn % 4 {
            0 => Op::Send,
            1 => Op::Write,
            2 => Op::SendImm,
            _ => Op::WriteImm,
        }
    }
}

/// Message `msn` of `stream` as [`TestApp`] describes it, if queued.
fn test_msg(msgs: &[Vec<u32>; 4], stream: u16, msn: u32) -> Option<MsgInfo> {
    let len = *msgs.get(stream as usize)?.get(msn as usize)?;
    Some(MsgInfo {
        op: TestApp::op_for(msn),
        len,
        reth: metaroce_proto::wire::Reth {
            va: 0x1000,
            rkey: 7,
            len,
        },
        imm: msn,
        tag: msn as u16,
        solicited: msn.is_multiple_of(3),
        mtu: 0,
    })
}

impl App for TestApp {
    fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        self.table.get(s)
    }
    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)> {
        let msgs = &self.msgs;
        self.table.next_ready(4, |s, msn| test_msg(msgs, s, msn))
    }
    fn restart_rx(&mut self, id: Ident) {
        self.table.restart_rx(id);
    }
    fn message(&mut self, stream: u16, msn: u32) -> Option<MsgInfo> {
        test_msg(&self.msgs, stream, msn)
    }
    fn payload(
        &mut self,
        stream: u16,
        msn: u32,
        offset: u32,
        dst: &mut [u8],
    ) -> Result<(), Unreadable> {
        if let Some((s, m, kind)) = self.unreadable {
            if (s, m) == (stream, msn) {
                return Err(kind);
            }
        }
        for (i, b) in dst.iter_mut().enumerate() {
            *b = pattern(stream, msn, offset + i as u32);
        }
        self.supplied.push((stream, msn, offset));
        Ok(())
    }
    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse> {
        if self.refuse == Some((p.stream, p.msn)) {
            return Err(self.refuse_as.unwrap_or(Refuse::Access));
        }
        if self.rnr_left > 0 && p.offset == 0 {
            self.rnr_left -= 1;
            return Err(Rnr(1).into());
        }
        let key = (p.stream, p.msn);
        if p.tag != p.msn as u16 {
            self.violations
                .push(format!("tag {} != msn {key:?}", p.tag));
        }
        let last = p.offset + p.payload.len() as u32 == p.msg_len;
        if p.solicited != (last && p.msn.is_multiple_of(3)) {
            self.violations
                .push(format!("solicited flag wrong {key:?} @{}", p.offset));
        }
        if let Some(l) = self.expect_len.get(&key) {
            if *l != p.msg_len {
                self.violations.push(format!("len mismatch {key:?}"));
            }
        } else {
            self.expect_len.insert(key, p.msg_len);
        }
        let buf = self
            .placed
            .entry(key)
            .or_insert_with(|| vec![0u8; p.msg_len as usize]);
        let cnt = self.placed_count.entry(key).or_insert(0);
        for (i, b) in p.payload.bytes().enumerate() {
            let o = p.offset as usize + i;
            if b != pattern(p.stream, p.msn, o as u32) {
                self.violations.push(format!("bad byte {key:?} @{o}"));
                break;
            }
            buf[o] = 1;
        }
        *cnt += p.payload.len() as u32;
        if p.msg_len == 0 {
            *cnt += 0;
        }
        Ok(())
    }
    fn complete(&mut self, stream: u16, msn: u32) {
        let key = (stream, msn);
        let c = &mut self.completed[stream as usize];
        if c.last().map(|l| *l + 1).unwrap_or(0) != msn {
            self.violations.push(format!(
                "out of order completion {key:?} after {:?}",
                c.last()
            ));
        }
        c.push(msn);
        let len = self.expect_len.get(&key).copied().unwrap_or(0);
        let cnt = self.placed_count.get(&key).copied().unwrap_or(0);
        if cnt != len {
            self.violations.push(format!(
                "completion of {key:?} with {cnt}/{len} bytes placed"
            ));
        }
        if let Some(b) = self.placed.get(&key) {
            if b.contains(&0) {
                self.violations
                    .push(format!("completion of {key:?} with holes"));
            }
        }
    }
    fn acked(&mut self, stream: u16, msn: u32) {
        let c = &mut self.acked[stream as usize];
        if c.last().map(|l| *l + 1).unwrap_or(0) != msn {
            self.violations
                .push(format!("out of order ack s{stream} m{msn}"));
        }
        c.push(msn);
    }
    fn error(&mut self, e: ConnError) {
        self.errors.push(e);
    }
    fn event(&mut self, e: Event) {
        self.events.push(e);
    }
}

/// The adversary's hook ([`Net::forger`]).
pub type Forger = Box<dyn FnMut(bool, &[u8]) -> Vec<Vec<u8>>>;

/// A chosen loss ([`Net::filter`]): given the direction (from `a`) and what a node
/// sent, whether the network drops it.
pub type Filter = Box<dyn FnMut(bool, &Transmit) -> bool>;

/// A datagram on the wire: (to `b`, bytes, CE-marked on its route, plane).
pub type InFlight = (bool, Vec<u8>, bool, u8);

pub struct Net {
    pub a: Conn,
    pub b: Conn,
    pub app_a: TestApp,
    pub app_b: TestApp,
    pub now: u64,
    /// (deliver_at, seq) -> (to_b, bytes, CE-marked on its route, plane)
    pub q: BTreeMap<(u64, u64), InFlight>,
    pub seq: u64,
    pub rng: Rng,
    pub loss: f64,
    pub dup: f64,
    pub path_delay: [u64; 8],
    pub path_busy: [[u64; 8]; 2],
    pub ce_prob: f64,
    /// Paths (bit `p`: path `p`) whose data packets from `a` all arrive CE-marked: a
    /// congested, ECN-marking queue on their route.
    pub marked_paths: u8,
    /// Data packets `a` sent per path (retransmissions included).
    pub data_on: [u64; 8],
    pub lost_psns: Vec<(u8, u32)>,
    /// (stream, msn, offset) of every data packet the network dropped.
    pub lost_data: Vec<(u16, u32, u32)>,
    /// Drop ACKs too (otherwise only data is lost).
    pub lose_acks: bool,
    /// Drop everything sent on (path, src_port).
    pub blackhole: Option<(u8, u16)>,
    /// A fabric of `spines` spines in which spine `dead` drops everything (a
    /// gray failure), in both directions: a datagram's spine is a hash of its
    /// direction and UDP source port (ECMP), `(spines, dead)`.
    pub dead_spine: Option<(u16, u16)>,
    /// The chance that the dead spine drops a datagram (1.0: a black hole).
    pub spine_loss: f64,
    /// Minimum per-path window seen, and whether inflight ever exceeded its bound.
    pub min_pwnd_seen: u32,
    pub retx: Vec<(u8, u32, u16, u32, u32)>,
    pub dropped: u64,
    /// Chance that a packet skips its path's delay and FIFO order (netem
    /// `reorder`): it then overtakes earlier packets of the same path.
    pub reorder: f64,
    /// Timer resolution, ns (0: exact): timers are handled only on multiples of it, as
    /// the kernel's `timer_list` does (4 ms at HZ=250).
    pub tick: u64,
    /// An adversary: before each datagram is delivered it may inject forged
    /// ones towards the same node (`to_b`, the real datagram as a template).
    pub forger: Option<Forger>,
    /// Drops the datagrams it picks (besides random `loss`).
    pub filter: Option<Filter>,
    /// Forged datagrams injected, and why each was dropped.
    pub forged: u64,
    pub forged_drops: DropCounters,
    /// Forgeries the connection accepted (none may be).
    pub forged_accepted: Vec<Vec<u8>>,
    /// Every real datagram delivered: (time, to_b, bytes, accepted).
    pub trace: Vec<(u64, bool, Vec<u8>, bool)>,
    pub keep_trace: bool,
    /// Datagrams each end transmitted, lost ones included: `[a, b]`.
    pub sent: [u64; 2],
    /// Receive batches, as a kernel's NAPI poll delivers them (0: none): a
    /// datagram's end also takes every datagram due to it within this many ns
    /// of the first (each at its own arrival time) before it transmits, unless
    /// its connection's batch is full (`Connection::batch_full`).
    pub rx_window: u64,
}

/// The spine an ECMP hash sends a datagram over: direction and source port
/// mixed (splitmix64), modulo `spines`.
pub fn spine_of(from_a: bool, src_port: u16, spines: u16) -> u16 {
    let mut z = u64::from(src_port) ^ if from_a { 0x9e37_79b9 } else { 0x7f4a_7c15 } << 20;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % u64::from(spines.max(1))) as u16
}

/// The kernel module's timers (RTO floor one 4 ms tick, init 20 ms, max 500 ms)
/// with the verbs limits perftest asks for (`timeout` 14: 67 ms, `retry_cnt` 7),
/// 8 paths, MTU 1024, its delayed ACK (`ack_every` 2, `ack_delay_us` 100), ACK
/// bundles (`ack_bundle` 16) and ACKs riding on DATA (`ack_ride`), the module
/// parameters' defaults, and runs of 4 DATA packets a path (`train=4`).
pub fn kernel_like_config(local: u32, peer: u32) -> Config {
    Config {
        local_conn: local,
        peer_conn: peer,
        incarnation: metaroce_proto::testkit::rc::incarnation_of(local),
        paths: 8,
        mtu: 1024,
        init_rto_ns: 20_000_000,
        min_rto_ns: 4_000_000,
        max_rto_ns: 500_000_000,
        retry_cnt: 7,
        ack_timeout_ns: 4096 << 14,
        ack_every: 2,
        ack_bundle: 16,
        ack_delay_ns: 100_000,
        ack_ride: u16::MAX,
        train: 4,
        ..Config::default()
    }
}

pub fn config(local: u32, peer: u32, paths: u8) -> Config {
    Config {
        local_conn: local,
        peer_conn: peer,
        incarnation: metaroce_proto::testkit::rc::incarnation_of(local),
        paths,
        mtu: 1024,
        init_rto_ns: 200_000,
        min_rto_ns: 50_000,
        ..Config::default()
    }
}

impl Net {
    /// Both connections anew from `a` and `b`, each application's streams at their
    /// first SSNs under its connection's keys (as a host starts them).
    pub fn connect(&mut self, a: Config, b: Config) {
        self.a = Conn::new(a);
        self.b = Conn::new(b);
        self.app_a.table = StreamTable::new(a.tx_ident, a.rx_ident);
        self.app_b.table = StreamTable::new(b.tx_ident, b.rx_ident);
    }

    pub fn new(seed: u64, paths: u8, loss: f64) -> Net {
        let mut rng = Rng(seed | 1);
        let mut path_delay = [0u64; 8];
        for d in path_delay.iter_mut() {
            *d = 2_000 + rng.next() % 8_000;
        }
        Net {
            a: Conn::new(config(1, 2, paths)),
            b: Conn::new(config(2, 1, paths)),
            app_a: TestApp::default(),
            app_b: TestApp::default(),
            now: 0,
            q: BTreeMap::new(),
            seq: 0,
            rng,
            loss,
            dup: 0.0,
            path_delay,
            path_busy: [[0; 8]; 2],
            ce_prob: 0.0,
            marked_paths: 0,
            data_on: [0; 8],
            lost_psns: Vec::new(),
            lost_data: Vec::new(),
            lose_acks: true,
            blackhole: None,
            dead_spine: None,
            spine_loss: 1.0,
            min_pwnd_seen: u32::MAX,
            retx: Vec::new(),
            dropped: 0,
            reorder: 0.0,
            tick: 0,
            forger: None,
            filter: None,
            forged: 0,
            forged_drops: DropCounters::default(),
            forged_accepted: Vec::new(),
            trace: Vec::new(),
            keep_trace: false,
            sent: [0; 2],
            rx_window: 0,
        }
    }

    fn pump(&mut self, from_a: bool) {
        let mut buf = [0u8; 2048];
        loop {
            let now = Instant(self.now);
            let t = if from_a {
                self.a.poll_transmit(now, &mut buf, &mut self.app_a)
            } else {
                self.b.poll_transmit(now, &mut buf, &mut self.app_b)
            };
            let Some(t) = t else { break };
            self.sent[usize::from(!from_a)] += 1;
            let p = t.path as usize % 8;
            if let TxKind::Data {
                retransmit: true,
                psn,
                stream,
                msn,
                offset,
                ..
            } = t.kind
            {
                self.retx.push((t.path, psn, stream, msn, offset));
            }
            let is_data = matches!(t.kind, TxKind::Data { .. });
            if from_a && is_data {
                self.data_on[p] += 1;
            }
            let marked = from_a && is_data && self.marked_paths & (1 << p) != 0;
            let on_dead = self
                .dead_spine
                .is_some_and(|(n, dead)| spine_of(from_a, t.src_port, n) == dead);
            let picked = self.filter.as_mut().is_some_and(|f| f(from_a, &t));
            let holed = picked
                || (from_a && self.blackhole == Some((t.path, t.src_port)))
                || (on_dead && (self.spine_loss >= 1.0 || self.rng.chance(self.spine_loss)));
            if holed || ((is_data || self.lose_acks) && self.rng.chance(self.loss)) {
                if let TxKind::Data {
                    psn,
                    stream,
                    msn,
                    offset,
                    ..
                } = t.kind
                {
                    if from_a {
                        self.lost_psns.push((t.path, psn));
                        self.lost_data.push((stream, msn, offset));
                    }
                }
                continue;
            }
            // FIFO per (direction, path): never deliver before the previous one on the path.
            let dir = if from_a { 0 } else { 1 };
            let at = if self.rng.chance(self.reorder) {
                self.now + 1
            } else {
                let at = (self.now + self.path_delay[p]).max(self.path_busy[dir][p] + 1);
                self.path_busy[dir][p] = at;
                at
            };
            let bytes = buf[..t.len].to_vec();
            self.seq += 1;
            self.q
                .insert((at, self.seq), (from_a, bytes.clone(), marked, t.plane));
            if self.rng.chance(self.dup) {
                self.seq += 1;
                self.q
                    .insert((at + 50_000, self.seq), (from_a, bytes, marked, t.plane));
            }
        }
    }

    /// Runs until both sides are idle or `until` ns pass. Returns false on timeout.
    pub fn run(&mut self, until: u64) -> bool {
        loop {
            self.pump(true);
            self.pump(false);
            let next_pkt = self.q.keys().next().map(|k| k.0);
            // With a tick, a deadline is handled on the first tick at or after it and
            // not before now (one already due waits for the next tick, as in the kernel).
            let (tk, at) = (self.tick, self.now);
            let up = |t: u64| {
                if tk == 0 {
                    t
                } else {
                    t.max(at).div_ceil(tk).saturating_mul(tk)
                }
            };
            let ta = self.a.poll_timeout().map(|t| up(t.0));
            let tb = self.b.poll_timeout().map(|t| up(t.0));
            let next = [next_pkt, ta, tb].into_iter().flatten().min();
            let Some(next) = next else { return true };
            if next > until {
                return false;
            }
            self.now = self.now.max(next);
            let mut batch: Option<(u64, bool)> = None;
            while let Some(((at, s), _)) = self.q.iter().next().map(|(k, v)| (*k, v.clone())) {
                // The first datagram due, then (with `rx_window`) the rest of its batch:
                // datagrams to the same end within the window, each at its time.
                match batch {
                    None if at > self.now => break,
                    Some((first, to))
                        if at > first + self.rx_window || self.q[&(at, s)].0 != to =>
                    {
                        break
                    }
                    _ => {}
                }
                self.now = self.now.max(at);
                let now = Instant(self.now);
                {
                    let (to_b, bytes, marked, plane) = self.q.remove(&(at, s)).unwrap();
                    if let Some(f) = self.forger.as_mut() {
                        for fake in f(to_b, &bytes) {
                            self.forged += 1;
                            let r = if to_b {
                                self.b.handle_packet(now, &fake, false, &mut self.app_b)
                            } else {
                                self.a.handle_packet(now, &fake, false, &mut self.app_a)
                            };
                            match r {
                                Err(e) => self.forged_drops.count(e),
                                Ok(_) => self.forged_accepted.push(fake),
                            }
                        }
                    }
                    let ce = marked || self.rng.chance(self.ce_prob);
                    let r = if to_b {
                        self.b
                            .handle_packet_on(now, &bytes, ce, plane, &mut self.app_b)
                    } else {
                        self.a
                            .handle_packet_on(now, &bytes, ce, plane, &mut self.app_a)
                    };
                    if r.is_err() {
                        self.dropped += 1;
                    }
                    if self.keep_trace {
                        self.trace.push((self.now, to_b, bytes, r.is_ok()));
                    }
                    batch.get_or_insert((at, to_b));
                }
                // A full batch is answered at once (as the kernel does).
                let full = match batch {
                    Some((_, true)) => self.b.batch_full(),
                    _ => self.a.batch_full(),
                };
                if self.rx_window == 0 || full {
                    break;
                }
            }
            // The batch may have moved the clock on.
            let now = Instant(self.now);
            if self.tick == 0 || self.now.is_multiple_of(self.tick) {
                self.a.handle_timeout(now, &mut self.app_a);
                self.b.handle_timeout(now, &mut self.app_b);
            }
            for p in 0..usize::from(self.a.config().paths) {
                if let Some(t) = self.a.path(p) {
                    self.min_pwnd_seen = self.min_pwnd_seen.min(t.cc.pwnd);
                }
            }
            if self.done() {
                return true;
            }
        }
    }

    /// Carries 16 messages of 64 KiB on each of 4 streams to completion (within 10 s)
    /// and checks that every byte was placed where it belongs.
    pub fn bulk(&mut self) {
        for s in 0..4 {
            self.app_a.msgs[s] = vec![64 * 1024; 16];
        }
        assert!(self.run(10_000_000_000));
        assert!(
            self.app_b.violations.is_empty(),
            "{:?}",
            self.app_b.violations
        );
    }

    pub fn done(&self) -> bool {
        (0..4).all(|s| self.app_a.acked[s].len() == self.app_a.msgs[s].len())
    }

    pub fn total_bytes(&self) -> u64 {
        self.app_a
            .msgs
            .iter()
            .flatten()
            .map(|l| u64::from(*l))
            .sum()
    }
}

/// Posts `count` messages of `len` bytes on `a`'s stream 0 and runs until they are
/// acknowledged (within 2 s); the time it took, ns.
pub fn send_all(n: &mut Net, count: usize, len: u32) -> u64 {
    let t0 = n.now;
    for _ in 0..count {
        n.app_a.msgs[0].push(len);
    }
    assert!(n.run(t0 + 2_000_000_000), "messages stuck");
    n.now - t0
}

/// Tail-loss probes `a` reported.
pub fn tail_probe_count(n: &Net) -> usize {
    let probe = |e: &&Event| {
        matches!(
            e,
            Event::Lost {
                cause: metaroce_proto::conn::LossCause::TailProbe,
                ..
            }
        )
    };
    n.app_a.events.iter().filter(probe).count()
}

/// (DATA packets with ACKREQ, DATA packets, ACK datagrams) in `n`'s trace since
/// entry `from`.
pub fn ackreqs(n: &Net, from: usize) -> (usize, usize, usize) {
    use metaroce_proto::wire::{decode_data_packet, peek_type, PacketType, DF_ACKREQ};
    let mut c = (0, 0, 0);
    for (_, to_b, bytes, _) in &n.trace[from..] {
        match peek_type(bytes) {
            Some(PacketType::Data) if *to_b => {
                let (h, _) = decode_data_packet(bytes).expect("the sender's DATA decodes");
                c.0 += usize::from(h.flags & DF_ACKREQ != 0);
                c.1 += 1;
            }
            Some(PacketType::Ack) if !to_b => c.2 += 1,
            _ => {}
        }
    }
    c
}
