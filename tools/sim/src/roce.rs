//! RoCEv2 Reliable Connection as deployed: go-back-N loss recovery (InfiniBand
//! Architecture Specification vol. 1, ch. 9.7: PSN-ordered responder, NAK-sequence
//! error, local ACK timeout with a retry counter) under DCQCN rate control
//! ([`crate::dcqcn`]). Multi-plane RoCE (one flow over K such QPs) is
//! [`crate::multiplane`]; the message bookkeeping and rate limiter are [`crate::qp`].
//!
//! Model, per QP:
//! * **Sender (requester, DCQCN reaction point).** Messages are posted with
//!   [`RoceSender::post`]; each is cut into `ceil(len/mtu)` packets (at least one) with
//!   consecutive PSNs (u32, no 24-bit wrap: runs never send 2^24 packets per QP). Packets
//!   leave at the DCQCN rate `Rc` (the NIC's per-QP rate limiter: a packet of `w` wire
//!   bytes holds the next one back by `8w/Rc`), or as fast as the NIC serialises them
//!   without DCQCN. There is no window (RC has none). A cumulative ACK retires PSNs
//!   below `epsn`; a NAK (sequence error) also retires them and restarts transmission at
//!   `epsn` (go-back-N). The local ACK timer runs while packets are outstanding and
//!   restarts on progress; on expiry transmission restarts at the oldest unacknowledged
//!   PSN. `retry_cnt` retries are allowed: the `retry_cnt + 1`-th consecutive expiry
//!   without progress moves the QP to the error state (verbs: `IBV_WC_RETRY_EXC_ERR`),
//!   after which it sends nothing. Only timeouts count against `retry_cnt` here, and the
//!   count resets on progress (the lenient reading: a QP that makes progress never
//!   errors).
//! * **Receiver (responder, DCQCN notification point).** Accepts only the expected PSN;
//!   anything beyond it is discarded and answered by one NAK per out-of-order episode
//!   (the episode ends when the expected PSN arrives); duplicates are re-ACKed. ACKs are
//!   cumulative, one per `ack_every` in-order packets and always on a message's last
//!   packet (`ack_every = 1`, the default, is HPCC's `L2_ACK_INTERVAL 1`; real NICs
//!   coalesce, which only makes ACKs rarer). A CE-marked arrival produces a CNP subject
//!   to the NP interval.
//!
//! Wire sizes (bytes on the wire, preamble and inter-frame gap included): data =
//! payload + 82 (Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, preamble+SFD 8,
//! IFG 12), + 16 (RETH) on a message's first packet (an RDMA WRITE); ACK/NAK = 86
//! (BTH + AETH 4); CNP = 98 (BTH + 16 reserved bytes).
//!
//! Sources: IBA vol. 1 rel. 1.4 ch. 9 (transport), Annex A17 (RoCEv2, CNP format);
//! DCQCN per [`crate::dcqcn`]. Not modelled: 24-bit PSN wrap, RNR NAKs, READ responses,
//! ACK coalescing timers, the NIC's fast-retransmit heuristics of newer firmware.

use crate::dcqcn::{DcqcnParams, Np, Rp};
use crate::endpoint::{BaseKind, BasePkt, Endpoint};
use crate::qp::{min_opt, Limiter, MsgQueue};
use std::collections::VecDeque;

/// Preamble + SFD (8) + inter-frame gap (12).
pub const PHY_OVERHEAD: u32 = 20;
/// Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4.
pub const ROCE_HDR: u32 = 14 + 20 + 8 + 12 + 4 + 4;
/// RDMA extended transport header, first packet of an RDMA WRITE.
pub const RETH: u32 = 16;
/// ACK extended transport header.
pub const AETH: u32 = 4;
/// Wire bytes of an ACK or NAK.
pub const ACK_WIRE: u32 = ROCE_HDR + AETH + PHY_OVERHEAD;
/// Wire bytes of a CNP (BTH followed by 16 reserved bytes).
pub const CNP_WIRE: u32 = ROCE_HDR + 16 + PHY_OVERHEAD;

/// Wire bytes of a data packet with `len` payload bytes.
pub fn data_wire(len: u32, first_of_msg: bool) -> u32 {
    len + ROCE_HDR + PHY_OVERHEAD + if first_of_msg { RETH } else { 0 }
}

/// The IBA local ACK timeout for the QP attribute `timeout` = t: 4.096 µs · 2^t, ns
/// (t = 14, perftest's default, is 67.1 ms).
pub fn ib_local_ack_timeout_ns(t: u8) -> u64 {
    4096u64 << t.min(31)
}

/// Configuration of one RoCEv2 RC QP (both ends use the same).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoceConfig {
    /// Payload bytes per packet (the path MTU: 4096 in RDMA deployments).
    pub mtu: u32,
    /// Local ACK timeout, ns.
    pub ack_timeout_ns: u64,
    /// Retries before the QP errors (IBA: 3-bit `retry_cnt`, 7 is the usual maximum).
    pub retry_cnt: u32,
    /// Receiver: one cumulative ACK per this many in-order packets (and on a message's
    /// last packet).
    pub ack_every: u32,
    /// Send data and control in the lossless (PFC) class.
    pub lossless: bool,
    /// DCQCN parameters; None: no congestion control (line rate).
    pub dcqcn: Option<DcqcnParams>,
}

impl RoceConfig {
    /// RoCEv2 as deployed: MTU 4096, local ACK timeout 14 (67.1 ms), retry_cnt 7, an
    /// ACK per packet, DCQCN with HPCC's ns-3 parameters at `line_bps`.
    pub fn deployed(line_bps: f64, lossless: bool) -> RoceConfig {
        RoceConfig {
            mtu: 4096,
            ack_timeout_ns: ib_local_ack_timeout_ns(14),
            retry_cnt: 7,
            ack_every: 1,
            lossless,
            dcqcn: Some(DcqcnParams::hpcc_ns3(line_bps)),
        }
    }
}

/// Sender counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Data packets sent, retransmissions included.
    pub sent: u64,
    /// Data packets sent at a PSN sent before.
    pub retx: u64,
    pub naks: u64,
    pub timeouts: u64,
    pub cnps: u64,
}

/// The requester / reaction point of one RoCEv2 RC QP.
#[derive(Clone, Debug)]
pub struct RoceSender {
    cfg: RoceConfig,
    peer: u32,
    sport: u16,
    q: MsgQueue,
    una: u32,
    nxt: u32,
    high: u32,
    lim: Limiter,
    rto_at: Option<u64>,
    retries: u32,
    err: bool,
    pub stats: SenderStats,
}

impl RoceSender {
    /// `peer`: the receiver's engine slot; `sport`: this QP's UDP source port.
    pub fn new(cfg: RoceConfig, peer: u32, sport: u16) -> RoceSender {
        RoceSender {
            cfg,
            peer,
            sport,
            q: MsgQueue::new(cfg.mtu),
            una: 0,
            nxt: 0,
            high: 0,
            lim: Limiter::new(cfg.dcqcn),
            rto_at: None,
            retries: 0,
            err: false,
            stats: SenderStats::default(),
        }
    }

    /// Post a message of `len` bytes (an RDMA WRITE); returns its number on this QP.
    /// The engine should poll the host afterwards.
    pub fn post(&mut self, len: u64) -> u32 {
        self.q.post(len)
    }

    /// Oldest unacknowledged PSN.
    pub fn una(&self) -> u32 {
        self.una
    }

    /// Next PSN to send.
    pub fn nxt(&self) -> u32 {
        self.nxt
    }

    pub fn sport(&self) -> u16 {
        self.sport
    }

    /// The reaction point, if DCQCN runs.
    pub fn rp(&self) -> Option<&Rp> {
        self.lim.rp.as_ref()
    }

    /// Everything posted is acknowledged.
    pub fn idle(&self) -> bool {
        self.una == self.q.end()
    }

    fn progress(&mut self, now: u64, epsn: u32) {
        if epsn <= self.una || epsn > self.high {
            return;
        }
        self.q.ack(self.una, epsn);
        self.una = epsn;
        self.nxt = self.nxt.max(epsn);
        self.retries = 0;
        self.rto_at = (self.una < self.nxt).then_some(now + self.cfg.ack_timeout_ns);
    }
}

impl Endpoint for RoceSender {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, _ce: bool) {
        if self.err {
            return;
        }
        match pkt.kind {
            BaseKind::Ack { epsn, .. } => self.progress(now, epsn),
            BaseKind::Nak { epsn, .. } => {
                if epsn < self.una || epsn > self.high {
                    return;
                }
                self.stats.naks += 1;
                self.progress(now, epsn);
                self.nxt = epsn;
                self.rto_at = None;
            }
            BaseKind::Cnp => {
                self.stats.cnps += 1;
                self.lim.on_cnp(now);
            }
            BaseKind::Data { .. } => {}
        }
    }

    fn poll_transmit(&mut self, now: u64) -> Option<BasePkt> {
        if self.err || self.nxt >= self.q.end() || !self.lim.ready(now) {
            return None;
        }
        let psn = self.nxt;
        let info = self.q.pkt(psn);
        let wire = data_wire(info.len, info.first);
        self.nxt += 1;
        self.stats.sent += 1;
        if psn < self.high {
            self.stats.retx += 1;
        }
        self.high = self.high.max(self.nxt);
        self.lim.sent(now, wire);
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.cfg.ack_timeout_ns);
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
        if self.err {
            return None;
        }
        let has = self.nxt < self.q.end();
        min_opt(self.rto_at, self.lim.next_timer(has))
    }

    fn on_timer(&mut self, now: u64) {
        if self.err {
            return;
        }
        if let Some(t) = self.rto_at {
            if now >= t {
                self.rto_at = None;
                if self.una < self.high {
                    self.stats.timeouts += 1;
                    self.retries += 1;
                    if self.retries > self.cfg.retry_cnt {
                        self.err = true;
                        return;
                    }
                    self.nxt = self.una;
                }
            }
        }
        self.lim.on_timer(now);
    }

    /// Sender: payload bytes acknowledged.
    fn delivered(&self) -> u64 {
        self.q.acked_bytes
    }

    /// Sender: messages fully acknowledged.
    fn completed_msgs(&self) -> u64 {
        u64::from(self.q.retired())
    }

    fn errors(&self) -> u32 {
        u32::from(self.err)
    }

    fn rate(&self) -> Option<f64> {
        self.lim.rate_bps().map(|r| r / 8.0)
    }

    fn post(&mut self, len: u64) -> Option<u32> {
        Some(self.q.post(len))
    }
}

/// Receiver counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    pub acks: u64,
    pub naks: u64,
    pub cnps: u64,
    /// Data packets discarded (out of order or duplicate).
    pub discarded: u64,
}

/// The responder / notification point of one RoCEv2 RC QP.
#[derive(Clone, Debug)]
pub struct RoceReceiver {
    cfg: RoceConfig,
    peer: u32,
    sport: u16,
    epsn: u32,
    nak_sent: bool,
    since_ack: u32,
    np: Option<Np>,
    ctrl: VecDeque<BasePkt>,
    delivered: u64,
    msgs: u64,
    pub stats: ReceiverStats,
}

impl RoceReceiver {
    /// `peer`: the sender's engine slot; `sport`: the QP's source port (ACKs, NAKs and
    /// CNPs carry it, so they hash like the data's flow).
    pub fn new(cfg: RoceConfig, peer: u32, sport: u16) -> RoceReceiver {
        RoceReceiver {
            cfg,
            peer,
            sport,
            epsn: 0,
            nak_sent: false,
            since_ack: 0,
            np: cfg.dcqcn.map(|p| Np::new(p.cnp_interval_ns)),
            ctrl: VecDeque::new(),
            delivered: 0,
            msgs: 0,
            stats: ReceiverStats::default(),
        }
    }

    pub fn sport(&self) -> u16 {
        self.sport
    }

    /// Expected PSN.
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

impl Endpoint for RoceReceiver {
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
        if psn == self.epsn {
            self.epsn += 1;
            self.delivered += u64::from(len);
            self.nak_sent = false;
            self.since_ack += 1;
            if last {
                self.msgs += 1;
            }
            if last || self.since_ack >= self.cfg.ack_every {
                self.since_ack = 0;
                self.stats.acks += 1;
                let epsn = self.epsn;
                self.ctl(BaseKind::Ack { epsn, ce, echo: ts }, ACK_WIRE);
            }
        } else if psn > self.epsn {
            self.stats.discarded += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                self.stats.naks += 1;
                let epsn = self.epsn;
                self.ctl(
                    BaseKind::Nak {
                        epsn,
                        got: psn,
                        echo: ts,
                    },
                    ACK_WIRE,
                );
            }
        } else {
            self.stats.discarded += 1;
            self.stats.acks += 1;
            let epsn = self.epsn;
            self.ctl(BaseKind::Ack { epsn, ce, echo: ts }, ACK_WIRE);
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

    const MTU: u32 = 4096;

    fn cfg(dcqcn: bool) -> RoceConfig {
        let mut c = RoceConfig::deployed(100e9, true);
        c.ack_timeout_ns = 100_000;
        if !dcqcn {
            c.dcqcn = None;
        }
        c
    }

    fn pair(c: RoceConfig) -> (RoceSender, RoceReceiver) {
        (RoceSender::new(c, 1, 49152), RoceReceiver::new(c, 0, 49152))
    }

    #[test]
    fn wire_sizes() {
        assert_eq!(data_wire(4096, false), 4096 + 82);
        assert_eq!(data_wire(4096, true), 4096 + 98);
        assert_eq!(ACK_WIRE, 86);
        assert_eq!(CNP_WIRE, 98);
        assert_eq!(ib_local_ack_timeout_ns(14), 67_108_864);
    }

    #[test]
    fn lossless_transfer_completes_in_order() {
        let (mut s, mut r) = pair(cfg(true));
        for len in [10_000u64, 1 << 20, 0, 8] {
            s.post(len);
        }
        let mut pipe = Pipe::new();
        pipe.run(&mut s, &mut r, 1_000_000_000);
        assert_eq!(r.delivered(), 10_000 + (1 << 20) + 8);
        assert_eq!(r.completed_msgs(), 4);
        assert_eq!(s.completed_msgs(), 4);
        assert_eq!(s.delivered(), r.delivered());
        assert!(s.idle());
        assert_eq!(s.stats.retx, 0);
        assert_eq!(r.stats.naks, 0);
        assert_eq!(s.errors(), 0);
    }

    /// One loss: one NAK naming it; the sender goes back to exactly that PSN and resends
    /// everything after it that it had sent (go-back-N), nothing before it.
    #[test]
    fn go_back_n_from_the_naked_psn() {
        let (mut s, mut r) = pair(cfg(false));
        s.post(40 * u64::from(MTU));
        let mut pipe = Pipe::new().drop_first(&[5]);
        pipe.run(&mut s, &mut r, 1_000_000_000);
        assert_eq!(r.delivered(), 40 * u64::from(MTU));
        let naks: Vec<_> = pipe
            .log
            .iter()
            .filter_map(|(_, side, ev, p)| match (side, ev, p.kind) {
                (1, Ev::Sent, BaseKind::Nak { epsn, got, .. }) => Some((epsn, got)),
                _ => None,
            })
            .collect();
        assert_eq!(naks, vec![(5, 6)]);
        let tx = pipe.tx_per_psn(0);
        let twice: Vec<u32> = (0..40).filter(|p| tx[p] == 2).collect();
        assert!((0..40).all(|p| tx[&p] <= 2));
        assert_eq!(twice[0], 5);
        assert!(
            twice.len() > 3,
            "NAK came back while later packets were sent"
        );
        assert_eq!(*twice.last().unwrap(), 5 + twice.len() as u32 - 1);
        // The first retransmission follows the NAK's arrival.
        let nak_at = pipe
            .log
            .iter()
            .find(|l| l.1 == 1 && l.2 == Ev::Arrived && matches!(l.3.kind, BaseKind::Nak { .. }))
            .unwrap()
            .0;
        let retx_at = pipe
            .log
            .iter()
            .filter(|l| l.1 == 0 && l.2 == Ev::Sent)
            .filter(|l| matches!(l.3.kind, BaseKind::Data { psn: 5, .. }))
            .nth(1)
            .unwrap()
            .0;
        assert!(retx_at >= nak_at);
        assert_eq!(s.stats.timeouts, 0);
        assert_eq!(s.stats.naks, 1);
        assert_eq!(r.stats.naks, 1);
    }

    /// Nothing gets through: the first transmission plus 7 retries, each after one
    /// local ACK timeout, then the QP errors at the 8th expiry and falls silent.
    #[test]
    fn retry_exceeded_after_seven_retries() {
        let c = cfg(false);
        let (mut s, mut r) = pair(c);
        s.post(3 * u64::from(MTU));
        let mut pipe = Pipe::new().black_hole();
        let end = pipe.run(&mut s, &mut r, 1_000_000_000);
        assert_eq!(s.errors(), 1);
        assert_eq!(s.stats.timeouts, 8);
        let tx = pipe.tx_per_psn(0);
        assert_eq!(tx[&0], 8);
        assert_eq!(tx[&2], 8);
        // Each round starts one timeout after the previous one's first packet.
        let starts: Vec<u64> = pipe
            .log
            .iter()
            .filter(|l| l.2 == Ev::Sent && matches!(l.3.kind, BaseKind::Data { psn: 0, .. }))
            .map(|l| l.0)
            .collect();
        for w in starts.windows(2) {
            assert_eq!(w[1] - w[0], c.ack_timeout_ns);
        }
        assert_eq!(end, starts[7] + c.ack_timeout_ns);
        assert_eq!(s.next_timer(), None);
        assert_eq!(r.delivered(), 0);
    }

    /// CE marks → CNPs at most one per NP interval → rate cuts.
    #[test]
    fn ce_marks_produce_spaced_cnps_and_cut_the_rate() {
        let c = cfg(true);
        let (mut s, mut r) = pair(c);
        s.post(2_000 * u64::from(MTU));
        let mut pipe = Pipe::new().mark_all();
        pipe.run(&mut s, &mut r, 200_000);
        let cnps: Vec<u64> = pipe
            .log
            .iter()
            .filter(|l| l.1 == 1 && l.2 == Ev::Sent && l.3.kind == BaseKind::Cnp)
            .map(|l| l.0)
            .collect();
        let n = c.dcqcn.unwrap().cnp_interval_ns;
        assert!(cnps.len() > 5);
        assert!(cnps.windows(2).all(|w| w[1] - w[0] >= n));
        assert_eq!(r.stats.cnps as usize, cnps.len());
        assert!(s.rp().unwrap().cuts >= cnps.len() as u64 - 1);
        assert!(s.rate().unwrap() < 100e9 / 8.0 / 4.0);
    }

    /// The rate limiter spaces departures by 8·wire/Rc.
    #[test]
    fn pacing_follows_the_current_rate() {
        let (mut s, mut r) = pair(cfg(true));
        let cnp = BasePkt {
            conn: 0,
            kind: BaseKind::Cnp,
            sport: 49152,
            wire: CNP_WIRE,
            ect: false,
            lossless: true,
        };
        s.on_packet(0, &cnp, false);
        assert_eq!(s.rate(), Some(50e9 / 8.0));
        s.post(10 * u64::from(MTU));
        let mut pipe = Pipe::new();
        pipe.run(&mut s, &mut r, 1_000_000);
        let t: Vec<u64> = pipe
            .log
            .iter()
            .filter(|l| l.0 < 100_000 && l.1 == 0 && l.2 == Ev::Sent)
            .map(|l| l.0)
            .collect();
        assert_eq!(t.len(), 10);
        // 4194 B (first, RETH) then 4178 B at 50 Gb/s: 671.04 ns, 668.48 ns.
        assert!((671..=672).contains(&(t[1] - t[0])));
        for w in t[1..].windows(2) {
            assert!((668..=669).contains(&(w[1] - w[0])), "{:?}", w);
        }
    }

    /// ACK coalescing: one ACK per `ack_every` in-order packets, and one on each
    /// message's last packet.
    #[test]
    fn ack_coalescing() {
        let mut c = cfg(false);
        c.ack_every = 4;
        let (mut s, mut r) = pair(c);
        s.post(10 * u64::from(MTU)); // ACKs after 4, 8 and the last (10)
        s.post(3 * u64::from(MTU)); // the last (13)
        let mut pipe = Pipe::new();
        pipe.run(&mut s, &mut r, 1_000_000_000);
        let acks: Vec<u32> = pipe
            .log
            .iter()
            .filter_map(|l| match (l.1, l.2, l.3.kind) {
                (1, Ev::Sent, BaseKind::Ack { epsn, .. }) => Some(epsn),
                _ => None,
            })
            .collect();
        assert_eq!(acks, vec![4, 8, 10, 13]);
        assert!(s.idle());
    }

    /// The engine's view: trait objects only, messages posted through the trait.
    #[test]
    fn hosted_as_trait_objects() {
        let c = cfg(true);
        let mut s: Box<dyn Endpoint> = Box::new(RoceSender::new(c, 1, 7));
        let mut r: Box<dyn Endpoint> = Box::new(RoceReceiver::new(c, 0, 7));
        assert_eq!(s.post(5000), Some(0));
        assert_eq!(s.post(1), Some(1));
        assert_eq!(r.post(1), None);
        Pipe::new().run(s.as_mut(), r.as_mut(), 1_000_000_000);
        assert_eq!((r.delivered(), r.completed_msgs()), (5001, 2));
    }
}
