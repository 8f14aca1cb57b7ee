//! Multi-plane RoCE as operators run it: one flow over K RoCEv2 RC QPs
//! ([`crate::roce`]) with distinct UDP source ports, so that each QP hashes onto its own
//! plane (one QP per plane) or several per plane (QP scaling). Each QP keeps its own
//! PSN space, timers and DCQCN state; messages are assigned round-robin or split.

use crate::endpoint::{BasePkt, Endpoint};
use crate::qp::min_opt;
use crate::roce::{RoceConfig, RoceReceiver, RoceSender, SenderStats};

/// UDP source ports for `planes × qps_per_plane` QPs such that QP `i` lands on plane
/// `i % planes` under the engine's `plane_of(sport)`; ports are searched upwards from
/// `base` (RoCEv2 uses 49152..65535 for source ports). Panics if the range runs out.
pub fn plane_sports(
    planes: u8,
    qps_per_plane: u16,
    base: u16,
    plane_of: impl Fn(u16) -> u8,
) -> Vec<u16> {
    let k = usize::from(planes) * usize::from(qps_per_plane);
    let mut out = vec![0u16; k];
    let mut filled = vec![0u16; usize::from(planes)];
    let mut done = 0;
    let mut s = base;
    while done < k {
        let p = plane_of(s);
        let pi = usize::from(p);
        if pi < filled.len() && filled[pi] < qps_per_plane {
            out[usize::from(filled[pi]) * usize::from(planes) + pi] = s;
            filled[pi] += 1;
            done += 1;
        }
        s = s.checked_add(1).expect("source ports exhausted");
    }
    out
}

/// Multi-plane RoCE, sending side: one flow over K RC QPs (one per source port in
/// `sports`), each with its own PSN space, timers and DCQCN state. Posted messages go
/// to the QPs round-robin ([`MultiSender::post`]), or are split into K near-equal parts
/// ([`MultiSender::post_split`], as NCCL splits data over its QPs). The NIC serves the
/// QPs that may send round-robin. One engine slot; the receiving side demultiplexes by
/// source port.
#[derive(Clone, Debug)]
pub struct MultiSender {
    qps: Vec<RoceSender>,
    rr_post: usize,
    rr_tx: usize,
}

/// Multi-plane RoCE, receiving side: K responders, demultiplexed by source port.
#[derive(Clone, Debug)]
pub struct MultiReceiver {
    qps: Vec<RoceReceiver>,
}

/// Build a multi-plane flow: the sender lives in engine slot `sender_slot`, the receiver
/// in `receiver_slot`; `sports` (distinct, e.g. from [`plane_sports`]) name the QPs.
pub fn multi_plane(
    cfg: RoceConfig,
    sports: &[u16],
    sender_slot: u32,
    receiver_slot: u32,
) -> (MultiSender, MultiReceiver) {
    assert!(!sports.is_empty());
    for (i, s) in sports.iter().enumerate() {
        assert!(!sports[..i].contains(s), "source ports must be distinct");
    }
    let tx = sports
        .iter()
        .map(|&s| RoceSender::new(cfg, receiver_slot, s))
        .collect();
    let rx = sports
        .iter()
        .map(|&s| RoceReceiver::new(cfg, sender_slot, s))
        .collect();
    (
        MultiSender {
            qps: tx,
            rr_post: 0,
            rr_tx: 0,
        },
        MultiReceiver { qps: rx },
    )
}

impl MultiSender {
    /// Post a whole message on the next QP in turn; returns (QP index, message number).
    pub fn post(&mut self, len: u64) -> (usize, u32) {
        let i = self.rr_post;
        self.rr_post = (i + 1) % self.qps.len();
        (i, self.qps[i].post(len))
    }

    /// Split a message over all QPs (part sizes differ by at most one byte; parts of
    /// zero bytes are not posted).
    pub fn post_split(&mut self, len: u64) {
        let k = self.qps.len() as u64;
        for (i, qp) in self.qps.iter_mut().enumerate() {
            let part = len / k + u64::from((i as u64) < len % k);
            if part > 0 || (len == 0 && i == 0) {
                qp.post(part);
            }
        }
    }

    /// The per-QP senders (aggregate view: rates, counters, PSNs).
    pub fn qps(&self) -> &[RoceSender] {
        &self.qps
    }

    /// Sum of the per-QP counters.
    pub fn stats(&self) -> SenderStats {
        self.qps.iter().fold(SenderStats::default(), |a, q| {
            let s = q.stats;
            SenderStats {
                sent: a.sent + s.sent,
                retx: a.retx + s.retx,
                naks: a.naks + s.naks,
                timeouts: a.timeouts + s.timeouts,
                cnps: a.cnps + s.cnps,
            }
        })
    }

    fn qp_of(&self, sport: u16) -> Option<usize> {
        self.qps.iter().position(|q| q.sport() == sport)
    }
}

impl Endpoint for MultiSender {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, ce: bool) {
        if let Some(i) = self.qp_of(pkt.sport) {
            self.qps[i].on_packet(now, pkt, ce);
        }
    }

    fn poll_transmit(&mut self, now: u64) -> Option<BasePkt> {
        self.poll_transmit_where(now, &|_| true)
    }

    /// Round-robin over the QPs whose NIC port has room.
    fn poll_transmit_where(&mut self, now: u64, may_use: &dyn Fn(u16) -> bool) -> Option<BasePkt> {
        let k = self.qps.len();
        for j in 0..k {
            let i = (self.rr_tx + j) % k;
            if !may_use(self.qps[i].sport()) {
                continue;
            }
            if let Some(p) = self.qps[i].poll_transmit(now) {
                self.rr_tx = (i + 1) % k;
                return Some(p);
            }
        }
        None
    }

    fn next_timer(&self) -> Option<u64> {
        self.qps
            .iter()
            .fold(None, |a, q| min_opt(a, q.next_timer()))
    }

    fn on_timer(&mut self, now: u64) {
        for q in &mut self.qps {
            if q.next_timer().is_some_and(|t| t <= now) {
                q.on_timer(now);
            }
        }
    }

    fn delivered(&self) -> u64 {
        self.qps.iter().map(|q| q.delivered()).sum()
    }

    fn completed_msgs(&self) -> u64 {
        self.qps.iter().map(|q| q.completed_msgs()).sum()
    }

    fn errors(&self) -> u32 {
        self.qps.iter().map(|q| q.errors()).sum()
    }

    /// Sum of the QPs' DCQCN rates, bytes/s.
    fn rate(&self) -> Option<f64> {
        self.qps
            .iter()
            .map(|q| q.rate())
            .try_fold(0.0, |a, r| r.map(|r| a + r))
    }
    /// Round-robin, as [`MultiSender::post`]; returns the message number on its QP.
    fn post(&mut self, len: u64) -> Option<u32> {
        Some(MultiSender::post(self, len).1)
    }
}

impl MultiReceiver {
    pub fn qps(&self) -> &[RoceReceiver] {
        &self.qps
    }
}

impl Endpoint for MultiReceiver {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, ce: bool) {
        if let Some(q) = self.qps.iter_mut().find(|q| q.sport() == pkt.sport) {
            q.on_packet(now, pkt, ce);
        }
    }

    fn poll_transmit(&mut self, now: u64) -> Option<BasePkt> {
        self.qps.iter_mut().find_map(|q| q.poll_transmit(now))
    }

    fn next_timer(&self) -> Option<u64> {
        None
    }

    fn on_timer(&mut self, _now: u64) {}

    fn delivered(&self) -> u64 {
        self.qps.iter().map(|q| q.delivered()).sum()
    }

    /// Messages completed, summed over the QPs (each QP completes in order).
    fn completed_msgs(&self) -> u64 {
        self.qps.iter().map(|q| q.completed_msgs()).sum()
    }

    fn errors(&self) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpipe::Pipe;

    fn cfg() -> RoceConfig {
        let mut c = RoceConfig::deployed(100e9, true);
        c.ack_timeout_ns = 100_000;
        c
    }

    #[test]
    fn sports_per_plane() {
        let s = plane_sports(4, 2, 49152, |p| (p % 4) as u8);
        assert_eq!(s.len(), 8);
        for (i, p) in s.iter().enumerate() {
            assert_eq!(usize::from(p % 4), i % 4);
        }
        let mut d = s.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 8);
    }
    #[test]
    fn multi_plane_round_robin_and_demux() {
        let sports = plane_sports(4, 1, 49152, |p| (p % 4) as u8);
        let (mut s, mut r) = multi_plane(cfg(), &sports, 0, 1);
        for _ in 0..8 {
            s.post(100_000);
        }
        s.post_split(1_000_001);
        let mut pipe = Pipe::new().drop_first(&[3]);
        pipe.run(&mut s, &mut r, 1_000_000_000);
        assert_eq!(r.delivered(), 800_000 + 1_000_001);
        assert_eq!(r.completed_msgs(), 8 + 4);
        for q in r.qps() {
            assert_eq!(q.completed_msgs(), 3);
        }
        // PSN 3 was lost once (on the first QP to send it; the pipe counts by PSN):
        // that QP alone went back.
        assert_eq!(s.stats().naks, 1);
        assert_eq!(s.qps().iter().filter(|q| q.stats.retx > 0).count(), 1);
        assert_eq!(s.errors(), 0);
        assert_eq!(s.rate(), Some(4.0 * 100e9 / 8.0));
        // Every packet carried its QP's port.
        for (_, side, _, p) in &pipe.log {
            assert!(sports.contains(&p.sport), "side {side}");
        }
    }

    #[test]
    fn a_full_port_holds_back_only_its_own_qps() {
        // Four QPs, one per plane; the port of plane 1 is full: the sender keeps sending
        // round-robin on the other three, and on all four once it has room.
        let sports = plane_sports(4, 1, 49152, |p| (p % 4) as u8);
        let (mut s, _r) = multi_plane(cfg(), &sports, 0, 1);
        for _ in 0..4 {
            s.post(100_000);
        }
        let blocked = sports[1];
        let mut sent = Vec::new();
        // 10 µs apart: each QP's DCQCN rate limiter lets its next packet go.
        for t in 1..=6 {
            let p = s
                .poll_transmit_where(t * 10_000, &|sp| sp != blocked)
                .expect("room on three ports");
            sent.push(p.sport);
        }
        assert!(!sent.contains(&blocked), "{sent:?}");
        for sp in [sports[0], sports[2], sports[3]] {
            assert_eq!(sent.iter().filter(|&&x| x == sp).count(), 2, "{sent:?}");
        }
        assert!(s.poll_transmit_where(70_000, &|_| false).is_none());
        let p = (8..12)
            .map(|t| s.poll_transmit(t * 10_000).expect("room").sport)
            .collect::<Vec<_>>();
        assert!(p.contains(&blocked), "{p:?}");
    }
}
