//! Test harness: two baseline endpoints back to back over a full-duplex pipe with a
//! serialisation rate and a fixed one-way delay, with chosen packets dropped or
//! CE-marked. It is also the smallest example of hosting an [`Endpoint`]:
//!
//! 1. deliver every packet due at `now` with `on_packet(now, pkt, ce)`;
//! 2. call `on_timer(now)` on an endpoint whose `next_timer()` is `≤ now`;
//! 3. while the endpoint's NIC is free at `now`, take `poll_transmit(now)` and start
//!    serialising it (the NIC is busy for `8·wire/rate`);
//! 4. advance to the earliest of: the next arrival, a `next_timer()` in the future, the
//!    time a busy NIC frees.
//!
//! After `on_timer(now)` an endpoint never reports a `next_timer() ≤ now` (asserted).

use crate::endpoint::{BaseKind, BasePkt, Endpoint};
use std::collections::{HashMap, VecDeque};

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    Sent,
    Dropped,
    Arrived,
}

/// One log line: time, sending side (0 = a, 1 = b), event, packet.
pub type LogLine = (u64, usize, Ev, BasePkt);

/// A rule on a packet (`n`: for data, how many times this side sent this PSN before,
/// so 0 on the first transmission).
pub type Rule = Box<dyn FnMut(&BasePkt, u32) -> bool>;

pub struct Pipe {
    pub delay_ns: u64,
    pub bps: f64,
    pub drop: Rule,
    pub mark: Rule,
    pub log: Vec<LogLine>,
}

impl Pipe {
    /// 100 Gb/s, 1 µs one way, no loss, no marks.
    pub fn new() -> Pipe {
        Pipe {
            delay_ns: 1_000,
            bps: 100e9,
            drop: Box::new(|_, _| false),
            mark: Box::new(|_, _| false),
            log: Vec::new(),
        }
    }

    /// Drop data packets of these PSNs on their first transmission.
    pub fn drop_first(mut self, psns: &'static [u32]) -> Pipe {
        self.drop = Box::new(
            move |p, n| matches!(p.kind, BaseKind::Data { psn, .. } if n == 0 && psns.contains(&psn)),
        );
        self
    }

    /// Drop every data packet.
    pub fn black_hole(mut self) -> Pipe {
        self.drop = Box::new(|p, _| matches!(p.kind, BaseKind::Data { .. }));
        self
    }

    /// Drop any packet (data or control) with probability `p`, seeded.
    pub fn random_loss(mut self, p: f64, seed: u64) -> Pipe {
        let mut rng = crate::workload::Rng::new(seed);
        self.drop = Box::new(move |_, _| rng.unit() < p);
        self
    }

    /// CE-mark every data packet.
    pub fn mark_all(mut self) -> Pipe {
        self.mark = Box::new(|p, _| matches!(p.kind, BaseKind::Data { .. }));
        self
    }

    /// Data transmissions by side `s` per PSN.
    pub fn tx_per_psn(&self, s: usize) -> HashMap<u32, u32> {
        let mut m = HashMap::new();
        for (_, side, ev, p) in &self.log {
            if let (true, Ev::Sent, BaseKind::Data { psn, .. }) = (*side == s, ev, p.kind) {
                *m.entry(psn).or_default() += 1;
            }
        }
        m
    }

    /// Count of log lines of side `s` with event `ev` whose packet matches `f`.
    pub fn count(&self, s: usize, ev: Ev, f: impl Fn(&BaseKind) -> bool) -> usize {
        self.log
            .iter()
            .filter(|(_, side, e, p)| *side == s && *e == ev && f(&p.kind))
            .count()
    }

    /// Run until `until` ns or until nothing is pending; returns the last event time.
    pub fn run(&mut self, a: &mut dyn Endpoint, b: &mut dyn Endpoint, until: u64) -> u64 {
        let mut eps: [&mut dyn Endpoint; 2] = [a, b];
        let mut wire: [VecDeque<(u64, BasePkt, bool)>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut nic_free = [0u64; 2];
        let mut txn: [HashMap<u32, u32>; 2] = [HashMap::new(), HashMap::new()];
        let mut now = 0u64;
        loop {
            for from in 0..2 {
                while wire[from].front().is_some_and(|w| w.0 <= now) {
                    let (_, p, ce) = wire[from].pop_front().unwrap();
                    self.log.push((now, from, Ev::Arrived, p));
                    eps[1 - from].on_packet(now, &p, ce);
                }
            }
            for (i, ep) in eps.iter_mut().enumerate() {
                if ep.next_timer().is_some_and(|t| t <= now) {
                    ep.on_timer(now);
                    let t = ep.next_timer();
                    assert!(t.is_none_or(|t| t > now), "side {i}: timer {t:?} at {now}");
                }
            }
            for i in 0..2 {
                while nic_free[i] <= now {
                    let Some(p) = eps[i].poll_transmit(now) else {
                        break;
                    };
                    let ser = (f64::from(p.wire) * 8e9 / self.bps).ceil() as u64;
                    nic_free[i] = now + ser;
                    let n = match p.kind {
                        BaseKind::Data { psn, .. } => {
                            let c = txn[i].entry(psn).or_default();
                            *c += 1;
                            *c - 1
                        }
                        _ => 0,
                    };
                    self.log.push((now, i, Ev::Sent, p));
                    if (self.drop)(&p, n) {
                        self.log.push((now, i, Ev::Dropped, p));
                    } else {
                        let ce = p.ect && (self.mark)(&p, n);
                        wire[i].push_back((now + ser + self.delay_ns, p, ce));
                    }
                }
            }
            let mut next: Option<u64> = None;
            let mut consider = |t: u64| {
                if t > now {
                    next = Some(next.map_or(t, |n: u64| n.min(t)));
                }
            };
            for i in 0..2 {
                if let Some(w) = wire[i].front() {
                    consider(w.0);
                }
                if let Some(t) = eps[i].next_timer() {
                    consider(t);
                }
                consider(nic_free[i]);
            }
            match next {
                Some(t) if t <= until => now = t,
                _ => return now,
            }
        }
    }
}
