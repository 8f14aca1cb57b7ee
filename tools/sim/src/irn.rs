//! IRN (Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM 2018): RoCE made
//! loss-tolerant in the NIC, for a lossy fabric without PFC.
//!
//! Model, per QP (the paper's §3):
//! * **Selective repeat.** The receiver places every in-window packet, in order or not,
//!   counting each byte once; it ACKs in-order arrivals cumulatively and answers *every*
//!   out-of-order arrival with a NACK carrying the cumulative ACK (`epsn`) and the PSN
//!   that triggered it (`got`, a selective ACK). Messages complete in PSN order (verbs
//!   completion order).
//! * **Sender recovery.** The sender keeps a bitmap of SACKed PSNs above its cumulative
//!   ACK. The first NACK starts a recovery episode that lasts until the cumulative ACK
//!   passes the highest PSN sent when it began. In recovery a PSN below the highest SACKed
//!   one that is not SACKed is presumed lost and retransmitted once per episode, ahead of
//!   new data; nothing else is resent. A timeout presumes every un-SACKed outstanding
//!   PSN lost and starts an episode from the cumulative ACK. (A lost retransmission is
//!   repaired by the next timeout, as in the paper.)
//! * **BDP-FC.** At most `bdp_pkts` PSNs outstanding (`nxt − una`): the paper caps
//!   in-flight packets at the path's bandwidth-delay product in MTUs (see [`bdp_pkts`]).
//! * **Two timeouts.** `RTO_low` while at most `n_low` packets are outstanding (the tail
//!   of a message, where a loss yields no NACK), `RTO_high` otherwise. Paper, 40 Gb/s:
//!   `RTO_low = 100 µs`, `N = 3`, `RTO_high = 320 µs` ("an estimate of the maximum
//!   RTT"). At 100 Gb/s we keep both ([`IrnConfig::paper_100g`]): `RTO_high` bounds the
//!   worst queueing RTT, which is set by switch buffer per unit of port rate, and that
//!   ratio has stayed roughly constant across switch generations, so the 40 G value is
//!   not made smaller; `RTO_low` only needs to exceed a few base RTTs (≈ 10 µs here).
//!   The timer restarts on every cumulative-ACK advance; its deadline uses the
//!   outstanding count at the time it is read.
//! * **Congestion control.** DCQCN on top (the paper's main configuration, reusing
//!   [`crate::dcqcn`]) or none (`dcqcn: None`: line rate limited by BDP-FC only, the
//!   paper's "IRN without CC" rows).
//!
//! Wire sizes as RoCEv2 ([`crate::roce`]); the NACK carries the extra 4-byte SACKed PSN
//! (90 wire bytes).

use crate::dcqcn::{DcqcnParams, Np};
use crate::endpoint::{BaseKind, BasePkt, Endpoint};
use crate::qp::{min_opt, Limiter, MsgQueue};
use crate::roce::{data_wire, ACK_WIRE, CNP_WIRE};
use std::collections::{BTreeMap, VecDeque};

/// Wire bytes of an IRN NACK (an ACK plus the 4-byte SACKed PSN).
pub const NACK_WIRE: u32 = ACK_WIRE + 4;

/// The BDP cap in packets: `ceil(line · rtt / (8 · (mtu + 82)))`, at least 1 — the
/// wire bytes one base RTT holds, in full packets.
pub fn bdp_pkts(line_bps: f64, rtt_ns: u64, mtu: u32) -> u32 {
    let bytes = line_bps * rtt_ns as f64 / 8e9;
    ((bytes / f64::from(data_wire(mtu, false))).ceil() as u32).max(1)
}

/// Configuration of one IRN QP (both ends use the same).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IrnConfig {
    /// Payload bytes per packet.
    pub mtu: u32,
    /// BDP-FC cap on outstanding PSNs.
    pub bdp_pkts: u32,
    /// Timeout while at most `n_low` packets are outstanding, ns.
    pub rto_low_ns: u64,
    /// Timeout otherwise, ns.
    pub rto_high_ns: u64,
    /// See `rto_low_ns`.
    pub n_low: u32,
    /// Send in the lossless class (IRN is meant for lossy fabrics: false).
    pub lossless: bool,
    /// DCQCN on top; None: no congestion control.
    pub dcqcn: Option<DcqcnParams>,
}

impl IrnConfig {
    /// The paper's timeouts and N, BDP-FC for `base_rtt_ns` at `line_bps`, MTU 4096,
    /// lossy, DCQCN (HPCC's ns-3 parameters) on top when `cc`.
    pub fn paper_100g(line_bps: f64, base_rtt_ns: u64, cc: bool) -> IrnConfig {
        IrnConfig {
            mtu: 4096,
            bdp_pkts: bdp_pkts(line_bps, base_rtt_ns, 4096),
            rto_low_ns: 100_000,
            rto_high_ns: 320_000,
            n_low: 3,
            lossless: false,
            dcqcn: cc.then(|| DcqcnParams::hpcc_ns3(line_bps)),
        }
    }
}

/// IRN sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrnSenderStats {
    pub sent: u64,
    pub retx: u64,
    pub nacks: u64,
    pub timeouts: u64,
    pub cnps: u64,
    /// Largest `nxt − una` seen right after a send.
    pub max_outstanding: u32,
}

/// The sending side of one IRN QP.
#[derive(Clone, Debug)]
pub struct IrnSender {
    cfg: IrnConfig,
    peer: u32,
    sport: u16,
    q: MsgQueue,
    una: u32,
    nxt: u32,
    high: u32,
    /// `sacked[i]`: PSN `una + i` was selectively acknowledged.
    sacked: VecDeque<bool>,
    recovery: Option<u32>,
    /// Un-SACKed PSNs below this are presumed lost.
    lost_below: u32,
    /// Next PSN the recovery scan looks at.
    retx_ptr: u32,
    lim: Limiter,
    /// Time the retransmission timer was (re)started, if running.
    rto_from: Option<u64>,
    pub stats: IrnSenderStats,
}

impl IrnSender {
    pub fn new(cfg: IrnConfig, peer: u32, sport: u16) -> IrnSender {
        assert!(cfg.bdp_pkts > 0);
        IrnSender {
            cfg,
            peer,
            sport,
            q: MsgQueue::new(cfg.mtu),
            una: 0,
            nxt: 0,
            high: 0,
            sacked: VecDeque::new(),
            recovery: None,
            lost_below: 0,
            retx_ptr: 0,
            lim: Limiter::new(cfg.dcqcn),
            rto_from: None,
            stats: IrnSenderStats::default(),
        }
    }

    /// Post a message of `len` bytes; returns its number on this QP.
    pub fn post(&mut self, len: u64) -> u32 {
        self.q.post(len)
    }

    pub fn una(&self) -> u32 {
        self.una
    }

    pub fn in_recovery(&self) -> bool {
        self.recovery.is_some()
    }

    pub fn idle(&self) -> bool {
        self.una == self.q.end()
    }

    fn outstanding(&self) -> u32 {
        self.nxt - self.una
    }

    fn rto(&self) -> u64 {
        if self.outstanding() <= self.cfg.n_low {
            self.cfg.rto_low_ns
        } else {
            self.cfg.rto_high_ns
        }
    }

    fn is_sacked(&self, psn: u32) -> bool {
        psn >= self.una && self.sacked.get((psn - self.una) as usize) == Some(&true)
    }

    fn cum_ack(&mut self, now: u64, epsn: u32) {
        if epsn <= self.una || epsn > self.high {
            return;
        }
        self.q.ack(self.una, epsn);
        let n = ((epsn - self.una) as usize).min(self.sacked.len());
        self.sacked.drain(..n);
        self.una = epsn;
        self.nxt = self.nxt.max(epsn);
        self.retx_ptr = self.retx_ptr.max(epsn);
        if self.recovery.is_some_and(|end| self.una >= end) {
            self.recovery = None;
        }
        self.rto_from = (self.una < self.nxt).then_some(now);
    }

    fn sack(&mut self, psn: u32) {
        if psn < self.una || psn >= self.high {
            return;
        }
        let i = (psn - self.una) as usize;
        if self.sacked.len() <= i {
            self.sacked.resize(i + 1, false);
        }
        self.sacked[i] = true;
        self.lost_below = self.lost_below.max(psn);
    }

    /// The next presumed-lost PSN to retransmit, if in recovery.
    fn next_hole(&mut self) -> Option<u32> {
        self.recovery?;
        let mut p = self.retx_ptr.max(self.una);
        while p < self.lost_below.min(self.high) {
            if !self.is_sacked(p) {
                return Some(p);
            }
            p += 1;
        }
        self.retx_ptr = p;
        None
    }
}

impl Endpoint for IrnSender {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, _ce: bool) {
        match pkt.kind {
            BaseKind::Ack { epsn, .. } => self.cum_ack(now, epsn),
            BaseKind::Nak { epsn, got, .. } => {
                self.stats.nacks += 1;
                self.cum_ack(now, epsn);
                self.sack(got);
                if self.recovery.is_none() && got >= self.una {
                    self.recovery = Some(self.high);
                    self.retx_ptr = self.una;
                }
            }
            BaseKind::Cnp => {
                self.stats.cnps += 1;
                self.lim.on_cnp(now);
            }
            BaseKind::Data { .. } => {}
        }
    }

    fn poll_transmit(&mut self, now: u64) -> Option<BasePkt> {
        if !self.lim.ready(now) {
            return None;
        }
        let psn = if let Some(p) = self.next_hole() {
            self.retx_ptr = p + 1;
            self.stats.retx += 1;
            p
        } else if self.nxt < self.q.end() && self.outstanding() < self.cfg.bdp_pkts {
            let p = self.nxt;
            self.nxt += 1;
            if p < self.high {
                self.stats.retx += 1;
            }
            p
        } else {
            return None;
        };
        self.high = self.high.max(psn + 1);
        self.stats.sent += 1;
        self.stats.max_outstanding = self.stats.max_outstanding.max(self.outstanding());
        let info = self.q.pkt(psn);
        let wire = data_wire(info.len, info.first);
        self.lim.sent(now, wire);
        if self.rto_from.is_none() {
            self.rto_from = Some(now);
        }
        Some(BasePkt {
            conn: self.peer,
            kind: BaseKind::Data {
                psn,
                len: info.len,
                ts: now,
                msg: info.msg,
                last: info.last,
            },
            sport: self.sport,
            wire,
            ect: true,
            lossless: self.cfg.lossless,
        })
    }

    fn next_timer(&self) -> Option<u64> {
        let has = (self.recovery.is_some() && self.retx_ptr < self.lost_below.min(self.high))
            || (self.nxt < self.q.end() && self.outstanding() < self.cfg.bdp_pkts);
        min_opt(
            self.rto_from.map(|t| t + self.rto()),
            self.lim.next_timer(has),
        )
    }

    fn on_timer(&mut self, now: u64) {
        if let Some(t) = self.rto_from {
            if now >= t + self.rto() {
                self.stats.timeouts += 1;
                self.rto_from = None;
                // Every un-SACKed outstanding PSN is presumed lost.
                self.recovery = Some(self.high);
                self.lost_below = self.high;
                self.retx_ptr = self.una;
            }
        }
        self.lim.on_timer(now);
    }

    /// Sender: payload bytes cumulatively acknowledged.
    fn delivered(&self) -> u64 {
        self.q.acked_bytes
    }

    fn completed_msgs(&self) -> u64 {
        u64::from(self.q.retired())
    }

    fn errors(&self) -> u32 {
        0
    }

    fn rate(&self) -> Option<f64> {
        self.lim.rate_bps().map(|r| r / 8.0)
    }

    fn post(&mut self, len: u64) -> Option<u32> {
        Some(self.q.post(len))
    }
}

/// IRN receiver counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrnReceiverStats {
    pub acks: u64,
    pub nacks: u64,
    pub cnps: u64,
    pub duplicates: u64,
}

/// The receiving side of one IRN QP.
#[derive(Clone, Debug)]
pub struct IrnReceiver {
    cfg: IrnConfig,
    peer: u32,
    sport: u16,
    epsn: u32,
    /// Out-of-order PSNs placed above `epsn` → last packet of its message.
    ooo: BTreeMap<u32, bool>,
    np: Option<Np>,
    ctrl: VecDeque<BasePkt>,
    delivered: u64,
    msgs: u64,
    pub stats: IrnReceiverStats,
}

impl IrnReceiver {
    pub fn new(cfg: IrnConfig, peer: u32, sport: u16) -> IrnReceiver {
        IrnReceiver {
            cfg,
            peer,
            sport,
            epsn: 0,
            ooo: BTreeMap::new(),
            np: cfg.dcqcn.map(|p| Np::new(p.cnp_interval_ns)),
            ctrl: VecDeque::new(),
            delivered: 0,
            msgs: 0,
            stats: IrnReceiverStats::default(),
        }
    }

    pub fn epsn(&self) -> u32 {
        self.epsn
    }

    fn ctl(&mut self, kind: BaseKind, wire: u32) {
        self.ctrl.push_back(BasePkt {
            conn: self.peer,
            kind,
            sport: self.sport,
            wire,
            ect: false,
            lossless: self.cfg.lossless,
        });
    }
}

impl Endpoint for IrnReceiver {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, ce: bool) {
        let BaseKind::Data {
            psn, len, ts, last, ..
        } = pkt.kind
        else {
            return;
        };
        if ce && self.np.as_mut().is_some_and(|np| np.on_ce(now)) {
            self.stats.cnps += 1;
            self.ctl(BaseKind::Cnp, CNP_WIRE);
        }
        if psn < self.epsn || self.ooo.contains_key(&psn) {
            self.stats.duplicates += 1;
            self.stats.acks += 1;
            let epsn = self.epsn;
            self.ctl(BaseKind::Ack { epsn, ce, echo: ts }, ACK_WIRE);
            return;
        }
        self.delivered += u64::from(len);
        if psn == self.epsn {
            self.epsn += 1;
            if last {
                self.msgs += 1;
            }
            while let Some(l) = self.ooo.remove(&self.epsn) {
                self.epsn += 1;
                if l {
                    self.msgs += 1;
                }
            }
            self.stats.acks += 1;
            let epsn = self.epsn;
            self.ctl(BaseKind::Ack { epsn, ce, echo: ts }, ACK_WIRE);
        } else {
            self.ooo.insert(psn, last);
            self.stats.nacks += 1;
            let epsn = self.epsn;
            self.ctl(
                BaseKind::Nak {
                    epsn,
                    got: psn,
                    echo: ts,
                },
                NACK_WIRE,
            );
        }
    }

    fn poll_transmit(&mut self, _now: u64) -> Option<BasePkt> {
        self.ctrl.pop_front()
    }

    fn next_timer(&self) -> Option<u64> {
        None
    }

    fn on_timer(&mut self, _now: u64) {}

    fn delivered(&self) -> u64 {
        self.delivered
    }

    fn completed_msgs(&self) -> u64 {
        self.msgs
    }

    fn errors(&self) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testpipe::{Ev, Pipe};

    const MTU: u64 = 4096;

    fn cfg(bdp: u32, cc: bool) -> IrnConfig {
        let mut c = IrnConfig::paper_100g(100e9, 8_000, cc);
        c.bdp_pkts = bdp;
        c
    }

    fn pair(c: IrnConfig) -> (IrnSender, IrnReceiver) {
        (IrnSender::new(c, 1, 50000), IrnReceiver::new(c, 0, 50000))
    }

    #[test]
    fn bdp_in_packets() {
        // 100 Gb/s × 8 µs = 100 kB = 23.9 packets of 4178 wire bytes.
        assert_eq!(bdp_pkts(100e9, 8_000, 4096), 24);
        assert_eq!(bdp_pkts(100e9, 1, 4096), 1);
    }

    #[test]
    fn single_loss_one_retransmission_of_that_packet_only() {
        let (mut s, mut r) = pair(cfg(64, false));
        s.post(40 * MTU);
        let mut pipe = Pipe::new().drop_first(&[5]);
        pipe.run(&mut s, &mut r, 1_000_000_000);
        let tx = pipe.tx_per_psn(0);
        assert_eq!(tx[&5], 2);
        assert!((0..40).filter(|&p| p != 5).all(|p| tx[&p] == 1));
        assert_eq!(s.stats.retx, 1);
        assert_eq!(s.stats.timeouts, 0);
        // Every out-of-order arrival was NACKed, naming the hole.
        let nacks = pipe.count(1, Ev::Sent, |k| matches!(k, BaseKind::Nak { epsn: 5, .. }));
        assert!(nacks >= 2);
        assert_eq!(nacks as u64, r.stats.nacks);
        assert_eq!(r.delivered(), 40 * MTU);
        assert_eq!(r.completed_msgs(), 1);
        assert!(s.idle() && !s.in_recovery());
    }

    #[test]
    fn several_losses_each_repaired_once() {
        let (mut s, mut r) = pair(cfg(64, false));
        for _ in 0..4 {
            s.post(10 * MTU);
        }
        let mut pipe = Pipe::new().drop_first(&[5, 9, 17, 30]);
        pipe.run(&mut s, &mut r, 1_000_000_000);
        let tx = pipe.tx_per_psn(0);
        for p in 0..40 {
            let want = if [5, 9, 17, 30].contains(&p) { 2 } else { 1 };
            assert_eq!(tx[&p], want, "psn {p}");
        }
        assert_eq!(r.delivered(), 40 * MTU);
        assert_eq!(r.completed_msgs(), 4);
        assert_eq!(s.completed_msgs(), 4);
    }

    /// The sender's view of `nxt − una`, replayed from the log, never exceeds the cap,
    /// and the cap binds.
    #[test]
    fn in_flight_never_exceeds_the_bdp_cap() {
        let cap = 8;
        let (mut s, mut r) = pair(cfg(cap, false));
        s.post(300 * MTU);
        let mut pipe = Pipe::new().drop_first(&[20, 21, 100, 150, 299]);
        pipe.delay_ns = 5_000;
        pipe.run(&mut s, &mut r, 1_000_000_000);
        let (mut nxt, mut una) = (0u32, 0u32);
        let mut peak = 0;
        for (_, side, ev, p) in &pipe.log {
            match (side, ev, p.kind) {
                (0, Ev::Sent, BaseKind::Data { psn, .. }) => nxt = nxt.max(psn + 1),
                (1, Ev::Arrived, BaseKind::Ack { epsn, .. } | BaseKind::Nak { epsn, .. }) => {
                    una = una.max(epsn)
                }
                _ => {}
            }
            assert!(nxt - una <= cap);
            peak = peak.max(nxt - una);
        }
        assert_eq!(peak, cap);
        assert_eq!(s.stats.max_outstanding, cap);
        assert_eq!(r.delivered(), 300 * MTU);
    }

    fn first_retx_at(pipe: &Pipe, psn: u32) -> u64 {
        pipe.log
            .iter()
            .filter(|l| l.1 == 0 && l.2 == Ev::Sent)
            .filter(|l| matches!(l.3.kind, BaseKind::Data { psn: p, .. } if p == psn))
            .nth(1)
            .expect("retransmitted")
            .0
    }

    #[test]
    fn rto_low_with_few_packets_outstanding() {
        let c = cfg(64, false);
        let (mut s, mut r) = pair(c);
        s.post(2 * MTU);
        let mut pipe = Pipe::new().black_hole();
        pipe.run(&mut s, &mut r, 150_000);
        assert_eq!(first_retx_at(&pipe, 0), c.rto_low_ns);
        assert_eq!(s.stats.timeouts, 1);
    }

    #[test]
    fn rto_high_with_many_packets_outstanding() {
        let c = cfg(64, false);
        let (mut s, mut r) = pair(c);
        s.post(20 * MTU);
        let mut pipe = Pipe::new().black_hole();
        pipe.run(&mut s, &mut r, 350_000);
        assert_eq!(first_retx_at(&pipe, 0), c.rto_high_ns);
        // Only the lost packets are resent, each once per timeout.
        assert_eq!(s.stats.retx, 20);
    }

    /// A tail loss yields no NACK: once the ACKs leave only two packets outstanding the
    /// timer runs with RTO_low from the last ACK advance.
    #[test]
    fn tail_loss_repaired_by_rto_low() {
        let c = cfg(64, false);
        let (mut s, mut r) = pair(c);
        s.post(20 * MTU);
        let mut pipe = Pipe::new().drop_first(&[18, 19]);
        pipe.run(&mut s, &mut r, 1_000_000_000);
        let last_ack = pipe
            .log
            .iter()
            .filter(|l| l.1 == 1 && l.2 == Ev::Arrived)
            .find(|l| matches!(l.3.kind, BaseKind::Ack { epsn: 18, .. }))
            .unwrap()
            .0;
        assert_eq!(first_retx_at(&pipe, 18), last_ack + c.rto_low_ns);
        assert_eq!(r.delivered(), 20 * MTU);
        assert_eq!(s.stats.retx, 2);
    }

    #[test]
    fn dcqcn_on_top_cuts_the_rate() {
        let (mut s, mut r) = pair(cfg(64, true));
        s.post(500 * MTU);
        let mut pipe = Pipe::new().mark_all();
        pipe.run(&mut s, &mut r, 1_000_000_000);
        assert!(s.stats.cnps > 0 && r.stats.cnps == s.stats.cnps);
        assert!(s.lim.rp.as_ref().unwrap().cuts > 0);
        assert_eq!(r.delivered(), 500 * MTU);
        // The run goes on until no timer is left: the rate has recovered to line rate.
        assert_eq!(s.rate(), Some(100e9 / 8.0));
    }

    /// 1 % of all packets (data, ACKs, NACKs, CNPs) lost at random: both transports
    /// finish and place every byte once; IRN resends far less than go-back-N (seeds
    /// 1–3: 36–38 retransmissions against 263–273).
    #[test]
    fn random_loss_irn_vs_go_back_n() {
        use crate::roce::{RoceConfig, RoceReceiver, RoceSender};
        let n = 3_000u64;
        for seed in 1..4 {
            let mut rc = RoceConfig::deployed(100e9, false);
            rc.ack_timeout_ns = 100_000;
            let (mut s, mut r) = (RoceSender::new(rc, 1, 1), RoceReceiver::new(rc, 0, 1));
            for _ in 0..10 {
                s.post(n / 10 * MTU);
            }
            let mut pipe = Pipe::new().random_loss(0.01, seed);
            pipe.run(&mut s, &mut r, 10_000_000_000);
            assert_eq!(r.delivered(), n * MTU, "seed {seed}");
            assert_eq!(r.completed_msgs(), 10);
            assert_eq!(s.errors(), 0);
            let roce_retx = s.stats.retx;

            let (mut s, mut r) = pair(cfg(24, true));
            for _ in 0..10 {
                s.post(n / 10 * MTU);
            }
            let mut pipe = Pipe::new().random_loss(0.01, seed);
            pipe.run(&mut s, &mut r, 10_000_000_000);
            assert_eq!(r.delivered(), n * MTU, "seed {seed}");
            assert_eq!(r.completed_msgs(), 10);
            assert!(s.idle());
            // About 1 % of 3000 lost, plus lost retransmissions and spurious ones from
            // lost NACKs: far below go-back-N's resend of whole windows.
            assert!(s.stats.retx < 150, "irn {}", s.stats.retx);
            assert!(
                s.stats.retx * 3 < roce_retx,
                "irn {} roce {roce_retx}",
                s.stats.retx
            );
        }
    }
}
