//! A run on several threads: the fabric cut into partitions, one [`Sim`] each, advanced
//! in lock-step windows (conservative synchronous parallel discrete-event simulation,
//! R. M. Fujimoto, "Parallel discrete event simulation", CACM 33(10), 1990, §3; the
//! window is the lookahead of Chandy and Misra's algorithm).
//!
//! A partition owns a set of nodes: a ToR with its hosts (their endpoints, NIC ports and
//! receivers' fair-share state), and an equal share of each switch tier. It runs every
//! event of its nodes. Two things cross a cut, both one cable's propagation delay or more
//! after the event that makes them: a packet's arrival at the far end of a link, and a
//! PFC frame back to a link's transmitter. So with `L` the smallest delay of a cut
//! cable, no event in `[t, t + L)` can create one for another partition before `t + L`:
//! every partition runs its events of the window alone, then the partitions swap what
//! they made for each other (the packet leaves one arena and enters the other's), and
//! the next window starts.
//!
//! Deterministic: a partition takes the messages of a window in the order of the
//! partitions that sent them, each in the order it made them, whatever the threads'
//! timing. With one partition it is the sequential engine, event for event; with `n`,
//! events of the same nanosecond at one node can run in another order than the
//! sequential engine's (messages enter a queue at a window's end), so figures differ from
//! `n = 1` like another seed's, not more. Not for runs with a workload driver (a
//! transfer's completion posts the next one on another host at once: no lookahead).

use crate::net::{Body, Pkt};
use crate::sim::{Sample, Sim};
use crate::switch::PortStats;
use crate::topo::{Node, Topology};
use std::sync::{Condvar, Mutex, MutexGuard};

/// What one partition hands another.
#[derive(Clone, Debug)]
pub enum Msg {
    /// A packet reaches the far end of the link it is on ([`Pkt::in_link`]) at `at`.
    Arrive { at: u64, pkt: Pkt, body: Body },
    /// A PFC frame (pause `on`, or resume) reaches link `link`'s transmitter at `at`.
    Pause { at: u64, link: u32, on: bool },
}

/// One partition's view of the cut.
#[derive(Clone, Debug)]
pub struct Part {
    me: u8,
    /// Owner of every node: hosts, then switches.
    owner: Vec<u8>,
    hosts: u32,
    /// Messages for each partition, made in the current window.
    pub out: Vec<Vec<Msg>>,
}

/// The owner of node `n` in an owner table of [`cut`] (hosts, then switches).
fn owner_of(owner: &[u8], hosts: u32, n: Node) -> u8 {
    match n {
        Node::Host(h) => owner[h as usize],
        Node::Switch(s) => owner[(hosts + s) as usize],
    }
}

impl Part {
    pub fn me(&self) -> u8 {
        self.me
    }
    #[inline]
    fn owner(&self, n: Node) -> u8 {
        owner_of(&self.owner, self.hosts, n)
    }
    #[inline]
    pub fn owns(&self, n: Node) -> bool {
        self.owner(n) == self.me
    }
    pub fn owns_host(&self, h: u32) -> bool {
        self.owns(Node::Host(h))
    }
    /// Queues message `m` for the partition that owns node `to`.
    pub fn ship(&mut self, to: Node, m: Msg) {
        let d = usize::from(self.owner(to));
        self.out[d].push(m);
    }
    /// Queues a copy of a packet arriving at node `to` at `at` for its owner (built in
    /// the queue's slot, not moved there).
    #[inline]
    pub fn ship_packet(&mut self, to: Node, at: u64, pkt: &Pkt, body: &Body) {
        let d = usize::from(self.owner(to));
        self.out[d].push(Msg::Arrive {
            at,
            pkt: pkt.clone(),
            body: body.clone(),
        });
    }
}

/// The owner of every node (hosts, then switches) when `t` is cut into `n` partitions:
/// ToRs in `n` contiguous runs (whole pods together, when pods divide evenly), each host
/// with its ToR, and each tier's other switches split the same way by index.
pub fn cut(t: &Topology, n: u8) -> Vec<u8> {
    let ft = &t.ft;
    let share = |i: u32, of: u32| (u64::from(i) * u64::from(n) / u64::from(of.max(1))) as u8;
    let mut owner: Vec<u8> = (0..ft.hosts())
        .map(|h| share(ft.tor_of(h), ft.tors()))
        .collect();
    owner.extend(t.switches.iter().map(|s| {
        let of = match s.tier {
            0 => ft.tors(),
            1 => ft.tier1(),
            _ => ft.cores(),
        };
        share(s.index, of)
    }));
    owner
}

/// The window: the smallest propagation delay of a link whose ends have different owners
/// (`None`: nothing is cut).
pub fn lookahead(t: &Topology, owner: &[u8]) -> Option<u64> {
    let of = |n: Node| owner_of(owner, t.ft.hosts(), n);
    t.links
        .iter()
        .filter(|l| of(l.from) != of(l.to))
        .map(|l| l.delay)
        .min()
}

/// The partitions' barrier at the end of each window. A thread that panics breaks it,
/// so the others panic too instead of waiting for ever (`std::sync::Barrier` is not
/// poisoned by a panic).
struct Gate {
    n: usize,
    /// Arrived, generation, broken.
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, (usize, u64, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn wait(&self) {
        let mut g = self.lock();
        let generation = g.1;
        g.0 += 1;
        if g.0 == self.n {
            g.0 = 0;
            g.1 += 1;
            self.cv.notify_all();
        }
        while g.1 == generation && !g.2 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        assert!(!g.2, "another partition's thread panicked");
    }
    fn break_all(&self) {
        self.lock().2 = true;
        self.cv.notify_all();
    }
}

/// Breaks the gate when its thread unwinds.
struct BreakOnPanic<'a>(&'a Gate);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_all();
        }
    }
}

/// A run over `sims.len()` partitions, one thread each.
pub struct Parallel<const P: usize, const W: usize, const N: usize> {
    pub sims: Vec<Sim<P, W, N>>,
    /// Window length, ns (the lookahead).
    pub window: u64,
    /// The first time not yet run.
    next: u64,
    /// Windows run.
    pub windows: u64,
}

impl<const P: usize, const W: usize, const N: usize> Parallel<P, W, N> {
    /// `n` partitions of the run `make` builds (called `n` times: the same fabric, flows
    /// and events each time; each copy then runs only its own nodes).
    pub fn new(n: u8, make: impl Fn() -> Sim<P, W, N>) -> Self {
        assert!(n >= 1, "at least one partition");
        let mut sims: Vec<Sim<P, W, N>> = (0..n).map(|_| make()).collect();
        let mut window = u64::MAX;
        if n > 1 {
            let owner = cut(&sims[0].fabric.topo, n);
            // Nothing cut (every node in one partition): no messages, one window.
            window = lookahead(&sims[0].fabric.topo, &owner).unwrap_or(u64::MAX >> 2);
            assert!(window >= 1, "a cut link without delay");
            let hosts = sims[0].fabric.topo.ft.hosts();
            for (me, s) in sims.iter_mut().enumerate() {
                s.partition(Part {
                    me: me as u8,
                    owner: owner.clone(),
                    hosts,
                    out: vec![Vec::new(); usize::from(n)],
                });
            }
        }
        Parallel {
            sims,
            window,
            next: 0,
            windows: 0,
        }
    }

    /// Runs every partition to `until` (inclusive, as [`Sim::run`]).
    pub fn run(&mut self, until: u64) {
        let n = self.sims.len();
        if n == 1 {
            self.sims[0].run(until);
            return;
        }
        if self.next > until {
            return;
        }
        // Mailboxes `[parity][to][from]`: a window's messages go to its parity's boxes,
        // read after the barrier that ends it; a box is written again two windows later,
        // after the next barrier, which its reader passes only once it has emptied it.
        let mail: Vec<Mutex<Vec<crate::parallel::Msg>>> =
            (0..2 * n * n).map(|_| Mutex::new(Vec::new())).collect();
        let slot = |parity: u64, to: usize, from: usize| (parity as usize * n + to) * n + from;
        let barrier = Gate {
            n,
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
        };
        let (start, window) = (self.next, self.window);
        let windows = (until - start) / window + 1;
        std::thread::scope(|scope| {
            for (me, sim) in self.sims.iter_mut().enumerate() {
                let (mail, barrier) = (&mail, &barrier);
                scope.spawn(move || {
                    let _gate = BreakOnPanic(barrier);
                    let mut t = start;
                    for w in 0..windows {
                        let end = (t + window - 1).min(until);
                        sim.run(end);
                        // Buffers go round: the box holds the empty buffer its reader
                        // left, swapped for this window's messages.
                        let part = sim.fabric.part.as_mut().expect("partitioned");
                        for to in (0..n).filter(|&d| d != me) {
                            let mut b = mail[slot(w & 1, to, me)].lock().expect("mailbox");
                            std::mem::swap(&mut *b, &mut part.out[to]);
                        }
                        barrier.wait();
                        for from in (0..n).filter(|&d| d != me) {
                            let mut b = mail[slot(w & 1, me, from)].lock().expect("mailbox");
                            sim.ingest(&mut b);
                        }
                        t = end + 1;
                    }
                });
            }
        });
        self.windows += windows;
        self.next = until + 1;
    }

    /// Payload bytes placed at the receiver of flow `f` (the receiver's partition's count;
    /// the others' copies of it never run).
    pub fn delivered(&self, f: usize) -> u64 {
        self.sims.iter().map(|s| s.delivered(f)).sum()
    }
    /// When the receiver of bounded flow `f` completed it.
    #[cfg_attr(not(test), allow(dead_code))] // the tests; --scale runs endless flows
    pub fn finish(&self, f: usize) -> Option<u64> {
        self.sims.iter().find_map(|s| s.flow_info[f].finish)
    }
    pub fn events(&self) -> u64 {
        self.sims.iter().map(|s| s.events).sum()
    }
    pub fn by_kind(&self) -> [u64; 6] {
        let mut k = [0; 6];
        for s in &self.sims {
            for (a, b) in k.iter_mut().zip(s.by_kind) {
                *a += b;
            }
        }
        k
    }
    pub fn pending_events(&self) -> usize {
        self.sims.iter().map(Sim::pending_events).sum()
    }
    pub fn live_packets(&self) -> usize {
        self.sims.iter().map(|s| s.fabric.pool.live()).sum()
    }
    /// Link `l`'s counters: each partition counts what its events did on it.
    pub fn port_stats(&self, l: usize) -> PortStats {
        let mut st = PortStats::default();
        for s in &self.sims {
            st.merge(&s.fabric.ports[l].stats);
        }
        st
    }
    /// Peak use of switch `sw`'s shared buffer (only its owner's copy moves).
    pub fn buffer_peak(&self, sw: usize) -> u64 {
        self.sims
            .iter()
            .map(|s| s.fabric.bufs[sw].peak)
            .max()
            .unwrap_or(0)
    }
    /// The samples (every partition samples at the same times): each flow's delivered
    /// bytes summed over the partitions (only its receiver's counts), its sender's rate
    /// from the sender's partition, the watched link's queue from its transmitter's.
    pub fn samples(&self) -> Vec<Sample> {
        let mut out = self.sims[0].samples.clone();
        if self.sims.len() == 1 {
            return out;
        }
        let s0 = &self.sims[0];
        let owner = |n: Node| {
            self.sims
                .iter()
                .position(|s| s.fabric.part.as_ref().is_some_and(|p| p.owns(n)))
                .expect("every node has a partition")
        };
        let senders: Vec<usize> = s0
            .flows
            .iter()
            .map(|&(a, _)| owner(Node::Host(s0.slots[a as usize].host)))
            .collect();
        let watched = s0.watch_link.map(|l| owner(s0.fabric.topo.links[l].from));
        for o in out.iter_mut() {
            o.delivered.iter_mut().for_each(|d| *d = 0);
        }
        for (k, s) in self.sims.iter().enumerate() {
            for (o, x) in out.iter_mut().zip(&s.samples) {
                debug_assert_eq!(o.t, x.t);
                for (d, y) in o.delivered.iter_mut().zip(&x.delivered) {
                    *d += y;
                }
                for (f, r) in o.rate.iter_mut().enumerate() {
                    if senders[f] == k {
                        *r = x.rate[f];
                    }
                }
                if watched == Some(k) {
                    o.queue = x.queue;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale::permutation;
    use crate::switch::{Ecn, SwitchConfig};
    use crate::tests::meta_params;
    use crate::topo::FatTree;

    /// 16 hosts on 4 leaves, 2 spines (2:1), every host sending 8 × 64 KiB to a host on
    /// another leaf; `pfc`: the toy go-back-N baseline (128 KiB windows from the start)
    /// on a lossless fabric, with a 12 → 1 incast added. Returns the run after 20 ms.
    fn run(n: u8, pfc: bool) -> Parallel<8, 1, 64> {
        let ft = FatTree::two_tier(4, 4, 2);
        let mut cfg = SwitchConfig::shared(Ecn::step(100_000));
        if pfc {
            cfg = SwitchConfig::lossless(cfg.ecn, 4096 + 200);
        }
        let pairs = permutation(16, 4, 7);
        let mut params = meta_params();
        if pfc {
            params.transport = crate::sim::Transport::Base;
        }
        let mut p = Parallel::new(n, || {
            let mut s: Sim<8, 1, 64> = Sim::new(ft, cfg, params.clone());
            for (a, &b) in pairs.iter().enumerate() {
                s.add_flow(a as u32, b, 2);
            }
            if pfc {
                for a in 4..16 {
                    s.add_flow(a, 0, 16);
                }
            }
            s
        });
        p.run(20_000_000);
        p
    }

    #[test]
    fn partitions_complete_what_one_engine_completes() {
        let one = run(1, false);
        let flows = one.sims[0].flows.len();
        for n in [2, 3] {
            let p = run(n, false);
            assert!(p.window == 1000, "the fabric delay: {}", p.window);
            for f in 0..flows {
                assert_eq!(p.delivered(f), one.delivered(f), "flow {f}, {n} partitions");
                assert_eq!(p.delivered(f), 8 * 64 * 1024, "flow {f}");
                let (a, b) = (one.finish(f).unwrap(), p.finish(f).expect("finished"));
                // Same-time events can run in another order: a little jitter, no more.
                assert!(
                    a.abs_diff(b) * 10 < a,
                    "flow {f}: {a} ns alone, {b} ns in {n} partitions"
                );
            }
            assert!(
                p.events().abs_diff(one.events()) * 50 < one.events(),
                "{} events against {}",
                p.events(),
                one.events()
            );
        }
        let (a, b) = (run(2, false), run(2, false));
        for f in 0..flows {
            assert_eq!(
                a.finish(f),
                b.finish(f),
                "deterministic whatever the threads do"
            );
        }
        assert_eq!(a.events(), b.events());
    }

    #[test]
    fn pfc_frames_cross_partitions() {
        for n in [1, 2] {
            let p = run(n, true);
            let links = p.sims[0].fabric.ports.len();
            let st: Vec<PortStats> = (0..links).map(|l| p.port_stats(l)).collect();
            assert_eq!(st.iter().map(PortStats::drops).sum::<u64>(), 0, "lossless");
            let xoff: u64 = st.iter().map(|s| s.xoff_frames).sum();
            let xon: u64 = st.iter().map(|s| s.xon_frames).sum();
            assert!(
                xoff > 0 && xon == xoff,
                "{n} partitions: {xoff} XOFF, {xon} XON"
            );
            for f in 0..p.sims[0].flows.len() {
                assert!(p.finish(f).is_some(), "flow {f}, {n} partitions");
            }
        }
        // Pause frames cross the cut: some spine-to-leaf link paused in a 2-way run,
        // with its transmitter and its receiver in different partitions.
        let p = run(2, true);
        let t = &p.sims[0].fabric.topo;
        let owner = cut(t, 2);
        let of = |n: Node| owner_of(&owner, t.ft.hosts(), n);
        let crossed = (0..t.links.len())
            .filter(|&l| of(t.links[l].from) != of(t.links[l].to))
            .map(|l| p.port_stats(l).xoff_frames)
            .sum::<u64>();
        assert!(crossed > 0, "no pause crossed the cut");
    }

    #[test]
    fn a_panicking_partition_stops_the_others_instead_of_hanging() {
        let gate = Gate {
            n: 2,
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _g = BreakOnPanic(&gate);
                    for _ in 0..3 {
                        gate.wait();
                    }
                });
                s.spawn(|| {
                    let _g = BreakOnPanic(&gate);
                    gate.wait();
                    panic!("partition 1 fails in its second window");
                });
            });
        }));
        assert!(r.is_err(), "the panic reaches the caller");
        assert!(gate.lock().2, "the gate is broken");
    }

    #[test]
    fn the_cut_keeps_hosts_with_their_tor_and_splits_tiers() {
        let t = Topology::build(FatTree::three_tier(4, 2, 4, 1, 1), 1);
        let owner = cut(&t, 2);
        let hosts = t.ft.hosts();
        for h in 0..hosts {
            let tor = t
                .switches
                .iter()
                .position(|s| s.tier == 0 && s.index == t.ft.tor_of(h));
            assert_eq!(
                owner[h as usize],
                owner[hosts as usize + tor.unwrap()],
                "host {h}"
            );
        }
        for tier in 0..3 {
            let of = |p: u8| {
                t.switches
                    .iter()
                    .enumerate()
                    .filter(|(i, s)| s.tier == tier && owner[hosts as usize + i] == p)
                    .count()
            };
            assert_eq!(of(0), of(1), "tier {tier}");
        }
        assert_eq!(
            owner[..hosts as usize].iter().filter(|&&o| o == 0).count(),
            16
        );
        assert_eq!(lookahead(&t, &owner), Some(t.ft.fabric_delay_ns));
        assert_eq!(lookahead(&t, &cut(&t, 1)), None);
    }
}
