//! RoCEv2 Reliable Connection as deployed: go-back-N loss recovery (InfiniBand
//! Architecture Specification vol. 1, ch. 9.7: PSN-ordered responder, NAK-sequence
//! error, local ACK timeout with a retry counter) under DCQCN rate control
//! ([`crate::dcqcn`]), plus multi-plane RoCE (one flow over K QPs with distinct UDP
//! source ports, so one QP per plane or QP scaling within a plane).
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

#[derive(Clone, Copy, Debug)]
struct Msg {
    first: u32,
    npkts: u32,
    len: u64,
}

/// One packet's place in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PktInfo {
    pub len: u32,
    pub msg: u32,
    pub first: bool,
    pub last: bool,
}

/// The posted messages of a sender and their PSN ranges (shared with IRN).
#[derive(Clone, Debug)]
pub struct MsgQueue {
    mtu: u32,
    msgs: VecDeque<Msg>,
    /// Messages retired from the front (fully acknowledged).
    retired: u32,
    end: u32,
    /// Payload bytes acknowledged.
    pub acked_bytes: u64,
}

impl MsgQueue {
    pub fn new(mtu: u32) -> MsgQueue {
        assert!(mtu > 0);
        MsgQueue {
            mtu,
            msgs: VecDeque::new(),
            retired: 0,
            end: 0,
            acked_bytes: 0,
        }
    }

    /// Append a message of `len` bytes; returns its number (from 0, per QP).
    pub fn post(&mut self, len: u64) -> u32 {
        let npkts = len.div_ceil(u64::from(self.mtu)).max(1);
        let npkts = u32::try_from(npkts).expect("message too long for u32 PSNs");
        let first = self.end;
        self.end = first.checked_add(npkts).expect("PSN space exhausted");
        self.msgs.push_back(Msg { first, npkts, len });
        self.retired + self.msgs.len() as u32 - 1
    }

    /// One past the last PSN posted.
    pub fn end(&self) -> u32 {
        self.end
    }

    /// Messages fully acknowledged.
    pub fn retired(&self) -> u32 {
        self.retired
    }

    fn last_len(&self, m: &Msg) -> u32 {
        (m.len - u64::from(m.npkts - 1) * u64::from(self.mtu)) as u32
    }

    /// The packet at `psn` (which must be posted and not yet acknowledged).
    pub fn pkt(&self, psn: u32) -> PktInfo {
        let i = self.msgs.partition_point(|m| m.first + m.npkts <= psn);
        let m = &self.msgs[i];
        debug_assert!(psn >= m.first && psn < m.first + m.npkts);
        let off = psn - m.first;
        let last = off + 1 == m.npkts;
        PktInfo {
            len: if last { self.last_len(m) } else { self.mtu },
            msg: self.retired + i as u32,
            first: off == 0,
            last,
        }
    }

    /// PSNs below `una` are acknowledged (was `old`): count their bytes, retire the
    /// messages they complete.
    pub fn ack(&mut self, old: u32, una: u32) {
        let mut p = old;
        for m in self.msgs.iter() {
            if p >= una {
                break;
            }
            let end = m.first + m.npkts;
            if end <= p {
                continue;
            }
            let hi = una.min(end);
            let full = hi - p;
            let mut b = u64::from(full) * u64::from(self.mtu);
            if hi == end {
                b = b - u64::from(self.mtu) + u64::from(self.last_len(m));
            }
            self.acked_bytes += b;
            p = hi;
        }
        while let Some(m) = self.msgs.front() {
            if m.first + m.npkts <= una {
                self.msgs.pop_front();
                self.retired += 1;
            } else {
                break;
            }
        }
    }
}

/// A sender's transmit gate: the DCQCN reaction point and the rate limiter that
/// spaces departures by `8·wire/Rc` (shared with IRN).
#[derive(Clone, Debug)]
pub struct Limiter {
    pub rp: Option<Rp>,
    next_tx: f64,
    last_tx: u64,
    last_wire: u32,
    last_timer: Option<u64>,
}

impl Limiter {
    pub fn new(p: Option<DcqcnParams>) -> Limiter {
        Limiter {
            rp: p.map(Rp::new),
            next_tx: 0.0,
            last_tx: 0,
            last_wire: 0,
            last_timer: None,
        }
    }

    /// May a packet leave at `now`?
    pub fn ready(&self, now: u64) -> bool {
        self.rp.is_none() || now as f64 >= self.next_tx
    }

    fn gap(&self, wire: u32) -> f64 {
        match &self.rp {
            Some(rp) => f64::from(wire) * 8e9 / rp.rate_bps(),
            None => 0.0,
        }
    }

    fn rate_changed(&mut self) {
        if self.last_wire > 0 {
            self.next_tx = self.last_tx as f64 + self.gap(self.last_wire);
        }
    }

    /// A packet of `wire` bytes left at `now`.
    pub fn sent(&mut self, now: u64, wire: u32) {
        self.last_tx = now;
        self.last_wire = wire;
        self.next_tx = now as f64 + self.gap(wire);
        if let Some(rp) = &mut self.rp {
            if rp.on_sent(u64::from(wire)) {
                self.rate_changed();
            }
        }
    }

    pub fn on_cnp(&mut self, now: u64) {
        if let Some(rp) = &mut self.rp {
            if rp.on_cnp(now) {
                self.rate_changed();
            }
        }
    }

    pub fn on_timer(&mut self, now: u64) {
        self.last_timer = Some(now);
        if let Some(rp) = &mut self.rp {
            if rp.on_timer(now) {
                self.rate_changed();
            }
        }
    }

    /// DCQCN timers and, if the sender has a packet waiting, the pacer's next departure
    /// (reported once: after an `on_timer` at or past it the engine is expected to poll
    /// whenever the NIC has room, and no timer repeats it).
    pub fn next_timer(&self, has_data: bool) -> Option<u64> {
        let pace = if has_data && self.rp.is_some() {
            let t = self.next_tx.ceil() as u64;
            self.last_timer.is_none_or(|l| t > l).then_some(t)
        } else {
            None
        };
        let rp = self.rp.as_ref().and_then(|r| r.next_timer());
        min_opt(pace, rp)
    }

    /// Current rate limit, bits/s (None without DCQCN).
    pub fn rate_bps(&self) -> Option<f64> {
        self.rp.as_ref().map(|r| r.rate_bps())
    }
}

pub fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
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
        self.qps.iter().position(|q| q.sport == sport)
    }
}

impl Endpoint for MultiSender {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, ce: bool) {
        if let Some(i) = self.qp_of(pkt.sport) {
            self.qps[i].on_packet(now, pkt, ce);
        }
    }

    fn poll_transmit(&mut self, now: u64) -> Option<BasePkt> {
        let k = self.qps.len();
        for j in 0..k {
            let i = (self.rr_tx + j) % k;
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
}

impl MultiReceiver {
    pub fn qps(&self) -> &[RoceReceiver] {
        &self.qps
    }
}

impl Endpoint for MultiReceiver {
    fn on_packet(&mut self, now: u64, pkt: &BasePkt, ce: bool) {
        if let Some(q) = self.qps.iter_mut().find(|q| q.sport == pkt.sport) {
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
    fn message_bookkeeping() {
        let mut q = MsgQueue::new(MTU);
        assert_eq!(q.post(10_000), 0); // 3 packets: 4096 4096 1808
        assert_eq!(q.post(0), 1); // 1 packet of 0 bytes
        assert_eq!(q.post(4096), 2); // 1 packet
        assert_eq!(q.end(), 5);
        let p = q.pkt(2);
        assert_eq!((p.len, p.msg, p.first, p.last), (1808, 0, false, true));
        let p = q.pkt(3);
        assert_eq!((p.len, p.msg, p.first, p.last), (0, 1, true, true));
        q.ack(0, 2);
        assert_eq!(q.acked_bytes, 8192);
        assert_eq!(q.retired(), 0);
        q.ack(2, 4);
        assert_eq!(q.acked_bytes, 10_000);
        assert_eq!(q.retired(), 2);
        assert_eq!(q.pkt(4).msg, 2);
        q.ack(4, 5);
        assert_eq!(q.acked_bytes, 14_096);
        assert_eq!(q.retired(), 3);
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
        let (mut s, mut r) = multi_plane(cfg(true), &sports, 0, 1);
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
}
