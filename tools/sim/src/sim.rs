//! Discrete-event engine: hosts with MetaRoCE or baseline endpoints over a [`Fabric`].

use crate::net::{BaseKind, BasePkt, Body, Fabric, NodeId, Pkt, Rng, Topo};
use metaroce_proto::cc::{CcConfig, PathCc};
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::fair::FairShare;
use metaroce_proto::testkit::BulkApp;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::peek_dst_conn;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

pub const MTU: u32 = 4096;
/// Ethernet + IPv4 + UDP + FCS + preamble/IFG.
pub const OVERHEAD: u32 = 14 + 20 + 8 + 4 + 20;
/// Baseline header (BTH + RETH + ICRC, as RoCEv2).
pub const BASE_HDR: u32 = 12 + 16 + 4;
const NEVER: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Meta,
    Base,
}

/// Application for simulated MetaRoCE endpoints: an endless (or bounded) supply of
/// messages on every stream; counts unique bytes placed and completions.
pub type SimApp = BulkApp<'static>;

/// Baseline RoCEv2-style endpoint: one path, go-back-N on the first gap, no SACK,
/// DCTCP-style ECN window (the same AIMD code as MetaRoCE's per-path controller).
#[derive(Debug)]
pub struct BaseEnd {
    pub una: u32,
    pub nxt: u32,
    pub limit: u32,
    pub cc: PathCc,
    pub srtt: u64,
    pub rto_at: u64,
    pub backoff: u32,
    pub epsn: u32,
    pub nak_sent: bool,
    pub delivered: u64,
    pub sport: u16,
    pub errors: u32,
    /// ACK/NAK waiting for the NIC (cumulative: a newer one replaces it).
    pub pending: Option<BaseKind>,
}

pub enum Ep<const P: usize, const W: usize, const S: usize, const N: usize> {
    Meta(Box<Connection<P, W, S, N>>, SimApp),
    Base(BaseEnd),
}

pub struct Slot<const P: usize, const W: usize, const S: usize, const N: usize> {
    pub host: u32,
    pub peer_host: u32,
    pub peer: u32,
    pub timer_at: u64,
    pub ready: bool,
    pub ep: Ep<P, W, S, N>,
}

enum Ev {
    LinkDone(usize),
    Arrive(usize, Pkt),
    Timer(u32, u64),
    Fail(Vec<usize>),
    Sample,
}

struct Event {
    t: u64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

/// Simulation parameters beyond the topology.
#[derive(Clone, Debug)]
pub struct Params {
    pub transport: Transport,
    pub paths: u8,
    pub streams: u16,
    pub msg_len: u32,
    pub min_rto_ns: u32,
    /// RTO before the first RTT sample (MetaRoCE), ns.
    pub init_rto_ns: u32,
    /// Largest RTO before backoff (MetaRoCE), ns.
    pub max_rto_ns: u32,
    /// Pacing slack (MetaRoCE, [`Config::pacing_slack_us`]), µs.
    pub pacing_slack_us: u16,
    /// Verbs local ACK timeout (MetaRoCE, [`Config::ack_timeout_ns`]), ns; 0: none,
    /// path timeouts count as retries.
    pub ack_timeout_ns: u64,
    pub base_window: u32,
    pub sample_ns: u64,
    pub seed: u64,
}

pub struct Sim<const P: usize, const W: usize, const S: usize, const N: usize> {
    pub now: u64,
    pub fabric: Fabric,
    pub slots: Vec<Slot<P, W, S, N>>,
    pub fair: Vec<FairShare>,
    heap: BinaryHeap<Event>,
    seq: u64,
    pub rng: Rng,
    pub params: Params,
    pub samples: Vec<Sample>,
    pub watch_link: Option<usize>,
    pub events: u64,
    buf: Vec<u8>,
    /// Flows: (sender slot, receiver slot).
    pub flows: Vec<(u32, u32)>,
    /// Per host: endpoints that may have packets to send.
    ready: Vec<VecDeque<u32>>,
}

/// A periodic measurement.
#[derive(Clone, Debug)]
pub struct Sample {
    pub t: u64,
    /// Unique bytes delivered per flow so far.
    pub delivered: Vec<u64>,
    /// Queue of the watched link (bytes).
    pub queue: u64,
    /// Sender's current allowed rate per flow (bytes/s), for convergence.
    pub rate: Vec<f64>,
}

impl<const P: usize, const W: usize, const S: usize, const N: usize> Sim<P, W, S, N> {
    pub fn new(topo: Topo, params: Params) -> Self {
        let fabric = Fabric::new(topo, params.seed);
        // Receivers hand out 95 % of their line rate so standing queues drain.
        let cap_kbps = topo.gbps * 1_000_000 / 8 * u64::from(topo.planes) * 95 / 100;
        let fair = (0..topo.hosts())
            .map(|_| {
                FairShare::new(
                    cap_kbps.min(u64::from(u32::MAX)) as u32,
                    10_000,
                    MTU + 60 + OVERHEAD,
                )
            })
            .collect();
        Sim {
            now: 0,
            fabric,
            slots: Vec::new(),
            fair,
            heap: BinaryHeap::new(),
            seq: 0,
            rng: Rng::new(params.seed),
            params,
            samples: Vec::new(),
            watch_link: None,
            events: 0,
            buf: vec![0u8; 9000],
            flows: Vec::new(),
            ready: (0..topo.hosts()).map(|_| VecDeque::new()).collect(),
        }
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Event {
            t,
            seq: self.seq,
            ev,
        });
    }

    /// Adds a flow from host `a` to host `b` with `limit` messages per stream.
    pub fn add_flow(&mut self, a: u32, b: u32, limit: u32) -> usize {
        let ia = self.slots.len() as u32;
        let ib = ia + 1;
        let planes = self.fabric.topo.planes;
        for (me, peer, host, peer_host) in [(ia, ib, a, b), (ib, ia, b, a)] {
            let ep = match self.params.transport {
                Transport::Meta => {
                    let base = 1024 + (mix16(u64::from(me) ^ self.params.seed) % 4096) * 8;
                    let cfg = Config {
                        local_conn: me,
                        peer_conn: peer,
                        paths: self.params.paths,
                        mtu: MTU as u16,
                        base_src_port: base - base % u16::from(planes),
                        wire_overhead: OVERHEAD as u16,
                        init_rto_ns: self.params.init_rto_ns,
                        max_rto_ns: self.params.max_rto_ns,
                        pacing_slack_us: self.params.pacing_slack_us,
                        ack_timeout_ns: self.params.ack_timeout_ns,
                        init_qwnd: std::env::var("SIM_IW")
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(Config::default().init_qwnd),
                        min_rto_ns: self.params.min_rto_ns,
                        ..Config::default()
                    };
                    let streams = if host == a { self.params.streams } else { 0 };
                    let app = SimApp {
                        limit,
                        ..BulkApp::write(self.params.msg_len, streams).with_reth(0x10_0000, 1)
                    };
                    Ep::Meta(Box::new(Connection::new(cfg)), app)
                }
                Transport::Base => Ep::Base(BaseEnd {
                    una: 0,
                    nxt: 0,
                    limit: if host == a {
                        limit.saturating_mul(self.params.msg_len.div_ceil(MTU))
                    } else {
                        0
                    },
                    cc: PathCc::new(&base_cc(self.params.base_window)),
                    srtt: 0,
                    rto_at: NEVER,
                    backoff: 0,
                    epsn: 0,
                    nak_sent: false,
                    delivered: 0,
                    errors: 0,
                    pending: None,
                    sport: 1024 + mix16(u64::from(me) ^ self.params.seed),
                }),
            };
            self.slots.push(Slot {
                host,
                peer_host,
                peer,
                timer_at: NEVER,
                ready: false,
                ep,
            });
        }
        self.flows.push((ia, ib));
        self.flows.len() - 1
    }

    pub fn fail_at(&mut self, t: u64, links: Vec<usize>) {
        self.push(t, Ev::Fail(links));
    }

    pub fn run(&mut self, until: u64) {
        if self.now == 0 {
            for i in 0..self.slots.len() {
                self.service(i as u32);
            }
            if self.params.sample_ns > 0 {
                self.push(0, Ev::Sample);
            }
        }
        while let Some(top) = self.heap.peek() {
            if top.t > until {
                break;
            }
            let Event { t, ev, .. } = self.heap.pop().expect("peeked");
            self.now = t;
            self.events += 1;
            match ev {
                Ev::LinkDone(l) => self.link_done(l),
                Ev::Arrive(l, pkt) => {
                    let to = self.fabric.links[l].to;
                    match to {
                        NodeId::Host(h) => self.deliver(h, pkt),
                        node => {
                            let nl = self.fabric.route(node, &pkt);
                            self.enqueue(nl, pkt);
                        }
                    }
                }
                Ev::Timer(i, at) => {
                    if self.slots[i as usize].timer_at == at {
                        self.slots[i as usize].timer_at = NEVER;
                        self.timeout(i);
                        self.service(i);
                    }
                }
                Ev::Fail(ls) => {
                    for l in ls {
                        let link = &mut self.fabric.links[l];
                        link.up = false;
                        link.drops += link.queue.len() as u64;
                        // Packets queued on a dead link are lost.
                        link.queue.clear();
                        link.qbytes = 0;
                    }
                }
                Ev::Sample => {
                    self.sample();
                    let t = self.now + self.params.sample_ns;
                    self.push(t, Ev::Sample);
                }
            }
        }
        self.now = until;
    }

    fn sample(&mut self) {
        let mut delivered = Vec::with_capacity(self.flows.len());
        let mut rate = Vec::with_capacity(self.flows.len());
        for &(a, b) in &self.flows {
            delivered.push(match &self.slots[b as usize].ep {
                Ep::Meta(_, app) => app.placed,
                Ep::Base(e) => e.delivered,
            });
            rate.push(match &self.slots[a as usize].ep {
                Ep::Meta(c, _) => {
                    let hint = c.pacing_rate() as f64;
                    let srtt = (0..usize::from(c.config().paths))
                        .filter_map(|p| c.path(p))
                        .map(|t| t.srtt)
                        .filter(|s| *s > 0)
                        .min()
                        .unwrap_or(0);
                    let wrate = if srtt > 0 {
                        f64::from(c.qwnd()) / (f64::from(srtt) * 1e-9)
                    } else {
                        f64::INFINITY
                    };
                    if hint > 0.0 {
                        wrate.min(hint)
                    } else {
                        wrate
                    }
                }
                Ep::Base(e) => {
                    if e.srtt > 0 {
                        f64::from(e.cc.pwnd) / (e.srtt as f64 * 1e-9)
                    } else {
                        f64::INFINITY
                    }
                }
            });
        }
        let queue = self
            .watch_link
            .map(|l| self.fabric.links[l].qbytes)
            .unwrap_or(0);
        self.samples.push(Sample {
            t: self.now,
            delivered,
            queue,
            rate,
        });
    }

    fn enqueue(&mut self, l: usize, mut pkt: Pkt) {
        let u = if self.fabric.links[l].loss > 0.0 {
            self.rng.unit()
        } else {
            1.0
        };
        let link = &mut self.fabric.links[l];
        if !link.up || u < link.loss || link.qbytes + u64::from(pkt.wire) > link.qlimit {
            link.drops += 1;
            return;
        }
        if pkt.ect && link.qbytes > link.ecn_k {
            pkt.ce = true;
        }
        link.qbytes += u64::from(pkt.wire);
        link.queue.push_back(pkt);
        if !link.busy {
            self.start_tx(l);
        }
    }

    fn start_tx(&mut self, l: usize) {
        let link = &mut self.fabric.links[l];
        let Some(p) = link.queue.front() else {
            link.busy = false;
            return;
        };
        link.busy = true;
        let t = self.now + (u64::from(p.wire) * link.ps_per_byte).div_ceil(1000);
        self.push(t, Ev::LinkDone(l));
    }

    fn link_done(&mut self, l: usize) {
        let link = &mut self.fabric.links[l];
        let Some(p) = link.queue.pop_front() else {
            link.busy = false;
            return;
        };
        link.qbytes -= u64::from(p.wire);
        let t = self.now + link.delay;
        let from_host = p.src;
        self.push(t, Ev::Arrive(l, p));
        self.start_tx(l);
        if self.host_link(l, from_host) {
            self.pump(from_host);
        }
    }

    fn host_link(&self, l: usize, h: u32) -> bool {
        (0..self.fabric.topo.planes).any(|p| self.fabric.host_up(p, h) == l)
    }

    fn deliver(&mut self, h: u32, pkt: Pkt) {
        let now = Instant(self.now);
        match pkt.body {
            Body::Meta(bytes) => {
                let Ok(id) = peek_dst_conn(&bytes) else {
                    return;
                };
                let Some(slot) = self.slots.get_mut(id as usize) else {
                    return;
                };
                if slot.host != h {
                    return;
                }
                if let Ep::Meta(c, app) = &mut slot.ep {
                    if bytes.get(1) == Some(&1) {
                        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                        let hint = self.fair[h as usize].note(now, c.fair_slot(), len);
                        c.set_rate_hint(hint);
                    }
                    let _ = c.handle_packet(now, &bytes, pkt.ce, app);
                }
                self.service(id);
            }
            Body::Base(b) => {
                let id = b.conn;
                let out = match &mut self.slots[id as usize].ep {
                    Ep::Base(e) => base_rx(e, self.now, b.kind, pkt.ce, self.params.min_rto_ns),
                    Ep::Meta(..) => None,
                };
                if let Some(k) = out {
                    if let Ep::Base(e) = &mut self.slots[id as usize].ep {
                        e.pending = Some(k);
                    }
                }
                self.service(id);
            }
        }
    }

    fn timeout(&mut self, id: u32) {
        let now = self.now;
        let slot = &mut self.slots[id as usize];
        match &mut slot.ep {
            Ep::Meta(c, app) => c.handle_timeout(Instant(now), app),
            Ep::Base(e) => {
                if e.rto_at <= now && e.una != e.nxt {
                    if e.backoff >= 7 {
                        // retry_cnt (7) exhausted: the QP goes to the error state.
                        e.errors += 1;
                        e.limit = 0;
                        e.nxt = e.una;
                        e.rto_at = NEVER;
                        return;
                    }
                    e.nxt = e.una;
                    e.backoff += 1;
                    e.cc.on_loss(
                        &base_cc(self.params.base_window),
                        Instant(now),
                        e.srtt.max(1),
                    );
                    e.rto_at = NEVER;
                }
            }
        }
    }

    /// Endpoint `id` may have something to send: put it on its host's ready ring, pull
    /// packets while the host NIC has room, and re-arm the endpoint's timer.
    fn service(&mut self, id: u32) {
        let host = self.slots[id as usize].host;
        let slot = &mut self.slots[id as usize];
        if !slot.ready {
            slot.ready = true;
            self.ready[host as usize].push_back(id);
        }
        self.pump(host);
        self.arm(id);
    }

    fn arm(&mut self, id: u32) {
        let now = self.now;
        let slot = &mut self.slots[id as usize];
        let next_timer = match &slot.ep {
            Ep::Meta(c, _) => c.poll_timeout().map(|t| t.0).unwrap_or(NEVER),
            Ep::Base(e) => {
                if e.una != e.nxt {
                    e.rto_at
                } else {
                    NEVER
                }
            }
        };
        if next_timer != NEVER && next_timer != slot.timer_at {
            let t = next_timer.max(now + 1);
            slot.timer_at = t;
            self.push(t, Ev::Timer(id, t));
        }
    }

    /// The host NIC pulls packets round-robin from ready endpoints while its queues hold
    /// less than two full packets per plane (a NIC does not queue milliseconds of data).
    fn pump(&mut self, host: u32) {
        let planes = self.fabric.topo.planes;
        let room = u64::from(planes) * 2 * u64::from(MTU + 200);
        loop {
            let queued: u64 = (0..planes)
                .map(|p| self.fabric.links[self.fabric.host_up(p, host)].qbytes)
                .sum();
            if queued >= room {
                return;
            }
            let Some(id) = self.ready[host as usize].pop_front() else {
                return;
            };
            match self.poll_one(id) {
                Some(p) => {
                    self.ready[host as usize].push_back(id);
                    let l = self.fabric.route(NodeId::Host(host), &p);
                    self.enqueue(l, p);
                    self.arm(id);
                }
                None => {
                    self.slots[id as usize].ready = false;
                    self.arm(id);
                }
            }
        }
    }

    fn poll_one(&mut self, id: u32) -> Option<Pkt> {
        let now = self.now;
        let slot = &mut self.slots[id as usize];
        let (host, peer_host, peer) = (slot.host, slot.peer_host, slot.peer);
        match &mut slot.ep {
            Ep::Meta(c, app) => {
                let t = c.poll_transmit(Instant(now), &mut self.buf, app)?;
                Some(Pkt {
                    src: host,
                    dst: peer_host,
                    sport: t.src_port,
                    wire: t.len as u32 + OVERHEAD,
                    ect: t.ect,
                    ce: false,
                    body: Body::Meta(self.buf[..t.len].into()),
                })
            }
            Ep::Base(e) => {
                if let Some(k) = e.pending.take() {
                    return Some(Pkt {
                        src: host,
                        dst: peer_host,
                        sport: e.sport,
                        wire: BASE_HDR + 8 + OVERHEAD,
                        ect: true,
                        ce: false,
                        body: Body::Base(BasePkt {
                            conn: peer,
                            kind: k,
                        }),
                    });
                }
                let open = e.nxt < e.limit
                    && u64::from(e.nxt.wrapping_sub(e.una)) * u64::from(MTU + BASE_HDR)
                        < u64::from(e.cc.pwnd).max(u64::from(MTU));
                if !open {
                    return None;
                }
                let psn = e.nxt;
                e.nxt += 1;
                if e.rto_at == NEVER {
                    let rto = base_rto(e.srtt, self.params.min_rto_ns) << e.backoff.min(6);
                    e.rto_at = now + rto;
                }
                Some(Pkt {
                    src: host,
                    dst: peer_host,
                    sport: e.sport,
                    wire: MTU + BASE_HDR + OVERHEAD,
                    ect: true,
                    ce: false,
                    body: Body::Base(BasePkt {
                        conn: peer,
                        kind: BaseKind::Data {
                            psn,
                            len: MTU,
                            ts: now,
                        },
                    }),
                })
            }
        }
    }
}

pub fn mix16(x: u64) -> u16 {
    (crate::net::mix(x) % 30000) as u16
}

pub fn base_cc(window: u32) -> CcConfig {
    CcConfig {
        init_pwnd: window,
        min_pwnd: MTU + BASE_HDR,
        max_pwnd: BASE_MAX_WINDOW,
        ai: MTU,
        g_shift: 4,
        loss_keep: 512,
    }
}

fn base_rto(srtt: u64, min: u32) -> u64 {
    (srtt * 2).max(u64::from(min))
}

/// Baseline receive: returns the packet to send back, if any.
fn base_rx(e: &mut BaseEnd, now: u64, k: BaseKind, ce: bool, min_rto: u32) -> Option<BaseKind> {
    match k {
        BaseKind::Data { psn, len, ts } => {
            let now = ts;
            if psn == e.epsn {
                e.epsn += 1;
                e.delivered += u64::from(len);
                e.nak_sent = false;
                Some(BaseKind::Ack {
                    epsn: e.epsn,
                    ce,
                    echo: now,
                })
            } else if psn > e.epsn {
                if e.nak_sent {
                    None
                } else {
                    e.nak_sent = true;
                    Some(BaseKind::Nak { epsn: e.epsn })
                }
            } else {
                Some(BaseKind::Ack {
                    epsn: e.epsn,
                    ce,
                    echo: now,
                })
            }
        }
        BaseKind::Ack { epsn, ce, echo } => {
            let sample = now.saturating_sub(echo).max(1);
            e.srtt = if e.srtt == 0 {
                sample
            } else {
                (e.srtt * 7 + sample) / 8
            };
            if epsn > e.una && epsn <= e.nxt {
                let n = epsn - e.una;
                e.una = epsn;
                e.backoff = 0;
                let rtt = e.srtt.max(1);
                e.cc.on_ack(
                    &base_cc_static(),
                    Instant(now),
                    rtt,
                    n * (MTU + BASE_HDR),
                    n as u16,
                    if ce { n as u16 } else { 0 },
                );
                e.rto_at = if e.una == e.nxt {
                    NEVER
                } else {
                    now + base_rto(e.srtt, min_rto)
                };
            }
            None
        }
        BaseKind::Nak { epsn, .. } => {
            if epsn >= e.una && epsn <= e.nxt {
                e.una = epsn;
                e.nxt = epsn;
                e.cc.on_loss(&base_cc_static(), Instant(now), e.srtt.max(1));
                e.rto_at = NEVER;
            }
            None
        }
    }
}

fn base_cc_static() -> CcConfig {
    base_cc(BASE_MAX_WINDOW)
}

/// Largest baseline window (bytes).
pub const BASE_MAX_WINDOW: u32 = 512 * 1024;
