//! Discrete-event engine: hosts with transport endpoints over a [`Fabric`].
//!
//! Endpoints are of three kinds: MetaRoCE (the real `metaroce-proto` connection, driven
//! directly), the toy go-back-N baseline ([`crate::toy`]), and any
//! [`crate::endpoint::Endpoint`] (DCQCN RoCEv2, IRN, ...). A host's NIC pulls packets
//! round-robin from its endpoints while its ports hold less than two full packets per
//! plane; the endpoint's source port picks the plane.
//!
//! Metrics: per flow, bytes placed at the receiver over time ([`Sample::delivered`],
//! every `sample_ns`) and start/finish times of bounded flows ([`Flow`]); per link,
//! [`crate::switch::PortStats`] (bytes sent, drops by cause, ECN marks, peak queue, PFC
//! frames and pause time); per switch, peak shared-buffer use.

use crate::driver::Driver;
use crate::endpoint::{self, Endpoint};
use crate::fabric::Fabric;
use crate::net::{flow_key, Body, Pkt, CTRL, DATA, HEAD};
use crate::parallel::{Msg, Part};
use crate::queue::{Ev, Queue, Timers};
use crate::switch::SwitchConfig;
use crate::topo::FatTree;
use crate::toy::{BaseEnd, BASE_HDR, NEVER};
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::fair::{FairShare, HANDOUT_PERCENT};
use metaroce_proto::testkit::BulkApp;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::peek_dst_conn;
use std::collections::VecDeque;

pub use crate::toy::MTU;
/// How many events ahead the run loop prefetches packets and ports ([`Fabric::prefetch`]),
/// and what depends on them.
const PREFETCH_FAR: usize = 8;
const PREFETCH_NEAR: usize = 3;

/// Ethernet + IPv4 + UDP + FCS + preamble/IFG.
pub const OVERHEAD: u32 = 14 + 20 + 8 + 4 + 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Meta,
    Base,
}

/// Application for simulated MetaRoCE endpoints: an endless (or bounded) supply of
/// messages on every stream; counts unique bytes placed and completions.
pub type SimApp = BulkApp<'static>;

pub enum Ep<const P: usize, const W: usize, const N: usize> {
    Meta(Box<Connection<P, W, N>>, Box<SimApp>),
    Base(BaseEnd),
    Dyn(Box<dyn Endpoint>),
}

pub struct Slot<const P: usize, const W: usize, const N: usize> {
    pub host: u32,
    pub peer_host: u32,
    pub peer: u32,
    pub flow: u32,
    /// When the endpoint wants its timer.
    pub timer_at: u64,
    pub ready: bool,
    pub ep: Ep<P, W, N>,
}

/// One flow's record.
#[derive(Clone, Copy, Debug)]
pub struct Flow {
    #[allow(dead_code)]
    // API for issue 13's baselines and workloads (roce.rs, irn.rs, workload.rs)
    pub sender: u32,
    pub receiver: u32,
    /// When the sender starts, ns.
    pub start: u64,
    /// When the receiver completed the last message (bounded flows), ns.
    pub finish: Option<u64>,
    /// Messages (toy baseline: packets) the receiver must complete; `None`: endless.
    pub msgs: Option<u64>,
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
    /// Delayed ACK (MetaRoCE, [`Config::ack_every`], [`Config::ack_delay_ns`]).
    pub ack_every: u8,
    pub ack_delay_ns: u32,
    /// ACK bundles (MetaRoCE, [`Config::ack_bundle`]).
    pub ack_bundle: u8,
    /// ACKs riding on DATA (MetaRoCE, [`Config::ack_ride`]).
    pub ack_ride: u16,
    /// Runs of DATA on a path (MetaRoCE, [`Config::train`]).
    pub train: u8,
    pub base_window: u32,
    pub sample_ns: u64,
    pub seed: u64,
}

pub struct Sim<const P: usize, const W: usize, const N: usize> {
    pub now: u64,
    pub fabric: Fabric,
    q: Queue,
    timers: Timers,
    pub slots: Vec<Slot<P, W, N>>,
    pub fair: Vec<FairShare>,
    pub params: Params,
    pub samples: Vec<Sample>,
    pub watch_link: Option<usize>,
    pub events: u64,
    /// Events by kind: NIC done, switch port done, arrival at host, at switch, other, timer.
    pub by_kind: [u64; 6],
    buf: Vec<u8>,
    rxbuf: Vec<u8>,
    /// Flows: (sender slot, receiver slot).
    pub flows: Vec<(u32, u32)>,
    pub flow_info: Vec<Flow>,
    /// Per host: endpoints that may have packets to send.
    ready: Vec<VecDeque<u32>>,
    failures: Vec<Vec<usize>>,
    started: bool,
    /// A workload run on the flows ([`Sim::attach`]).
    pub driver: Option<Driver>,
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
    #[allow(dead_code)] // diagnostics only: no scenario scores the allowed rate
    pub rate: Vec<f64>,
}

impl<const P: usize, const W: usize, const N: usize> Sim<P, W, N> {
    pub fn new(ft: FatTree, cfg: SwitchConfig, params: Params) -> Self {
        let fabric = Fabric::new(ft, cfg, params.seed);
        // Receivers hand out a little less than their line rate so standing queues drain.
        let cap_kbps = ft.host_gbps * 1_000_000 / 8 * u64::from(ft.planes) * HANDOUT_PERCENT / 100;
        let fair = (0..ft.hosts())
            .map(|_| {
                let mut f = FairShare::new(
                    cap_kbps.min(u64::from(u32::MAX)) as u32,
                    10_000,
                    MTU + 60 + OVERHEAD,
                );
                f.wire_overhead = OVERHEAD;
                f
            })
            .collect();
        Sim {
            now: 0,
            fabric,
            q: Queue::default(),
            timers: Timers::default(),
            slots: Vec::new(),
            fair,
            params,
            samples: Vec::new(),
            watch_link: None,
            events: 0,
            by_kind: [0; 6],
            buf: vec![0u8; 9000],
            rxbuf: vec![0u8; 9000],
            flows: Vec::new(),
            flow_info: Vec::new(),
            ready: (0..ft.hosts()).map(|_| VecDeque::new()).collect(),
            failures: Vec::new(),
            started: false,
            driver: None,
        }
    }

    /// [`Sim::add_flow`] with messages of `msg_len` bytes on `streams` streams (a
    /// MetaRoCE workload flow: `limit` 0, one stream; the driver raises the limit).
    pub fn add_flow_with(
        &mut self,
        a: u32,
        b: u32,
        limit: u32,
        msg_len: u32,
        streams: u16,
    ) -> usize {
        let (l, st) = (self.params.msg_len, self.params.streams);
        self.params.msg_len = msg_len;
        self.params.streams = streams;
        let f = self.add_flow(a, b, limit);
        self.params.msg_len = l;
        self.params.streams = st;
        f
    }

    /// Runs `d`'s transfers on this run's flows (created beforehand, one per pair).
    pub fn attach(&mut self, d: Driver) {
        assert!(!self.started, "attach before run");
        self.driver = Some(d);
    }

    /// Posts workload transfer `i` on its flow's sender.
    fn post_transfer(&mut self, i: usize) {
        let now = self.now;
        let Some(d) = self.driver.as_mut() else {
            return;
        };
        let (f, bytes) = d.post(i, now);
        let a = self.flows[f].0;
        match &mut self.slots[a as usize].ep {
            Ep::Meta(_, app) => {
                assert_eq!(
                    u64::from(app.msg.len),
                    bytes,
                    "one message size per MetaRoCE flow"
                );
                app.limit += 1;
            }
            Ep::Dyn(e) => {
                e.post(bytes).expect("sender end");
            }
            Ep::Base(_) => panic!("the toy baseline does not run workloads"),
        }
        self.service(a);
    }

    /// Receiver `id` delivered something: complete and start workload transfers.
    fn drive(&mut self, id: u32) {
        let f = self.slots[id as usize].flow as usize;
        if self.flow_info[f].receiver != id {
            return;
        }
        let msgs = match &self.slots[id as usize].ep {
            Ep::Meta(_, app) => app.completed_msgs,
            Ep::Dyn(e) => e.completed_msgs(),
            Ep::Base(_) => return,
        };
        let now = self.now;
        let Some(d) = self.driver.as_mut() else {
            return;
        };
        for (c, start) in d.completed(f, msgs, now) {
            if start <= now {
                self.post_transfer(c);
            } else {
                self.q.push(start, Ev::Post(c as u32));
            }
        }
    }

    /// Adds a flow from host `a` to host `b` of the run's transport with `limit`
    /// messages per stream (`u32::MAX`: endless), starting now.
    pub fn add_flow(&mut self, a: u32, b: u32, limit: u32) -> usize {
        let ia = self.slots.len() as u32;
        let ib = ia + 1;
        let planes = self.fabric.ft().planes;
        let bounded = limit != u32::MAX;
        let mut msgs = None;
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
                        wire_overhead: OVERHEAD as u8,
                        init_rto_ns: self.params.init_rto_ns,
                        max_rto_ns: self.params.max_rto_ns,
                        pacing_slack_us: self.params.pacing_slack_us,
                        ack_timeout_ns: self.params.ack_timeout_ns,
                        ack_every: self.params.ack_every,
                        ack_delay_ns: self.params.ack_delay_ns,
                        ack_bundle: self.params.ack_bundle,
                        ack_ride: self.params.ack_ride,
                        train: self.params.train,
                        min_rto_ns: self.params.min_rto_ns,
                        ..Config::default()
                    };
                    let streams = if host == a { self.params.streams } else { 0 };
                    if bounded {
                        msgs = Some(u64::from(limit) * u64::from(self.params.streams));
                    }
                    let app = SimApp {
                        limit,
                        ..BulkApp::write(self.params.msg_len, streams).with_reth(0x10_0000, 1)
                    };
                    Ep::Meta(Box::new(Connection::new(cfg)), Box::new(app))
                }
                Transport::Base => {
                    let pkts = limit.saturating_mul(self.params.msg_len.div_ceil(MTU));
                    if bounded {
                        msgs = Some(u64::from(pkts));
                    }
                    Ep::Base(BaseEnd::new(
                        if host == a { pkts } else { 0 },
                        self.params.base_window,
                        1024 + mix16(u64::from(me) ^ self.params.seed),
                    ))
                }
            };
            self.push_slot(host, peer_host, peer, ep);
        }
        self.push_flow(ia, ib, self.now, msgs)
    }

    /// Adds a flow of [`Endpoint`]s from host `a` to host `b`, starting at `start` ns;
    /// `make(sender_slot, receiver_slot)` builds the two ends (a packet's `conn` is the
    /// slot of the end it is for). `msgs`: messages the receiver must complete for the
    /// flow to finish (`None`: endless).
    pub fn add_flow_dyn(
        &mut self,
        a: u32,
        b: u32,
        start: u64,
        msgs: Option<u64>,
        make: impl FnOnce(u32, u32) -> (Box<dyn Endpoint>, Box<dyn Endpoint>),
    ) -> usize {
        let ia = self.slots.len() as u32;
        let ib = ia + 1;
        let (sa, sb) = make(ia, ib);
        self.push_slot(a, b, ib, Ep::Dyn(sa));
        self.push_slot(b, a, ia, Ep::Dyn(sb));
        self.push_flow(ia, ib, start, msgs)
    }

    fn push_slot(&mut self, host: u32, peer_host: u32, peer: u32, ep: Ep<P, W, N>) {
        self.slots.push(Slot {
            host,
            peer_host,
            peer,
            flow: self.flows.len() as u32,
            timer_at: NEVER,
            ready: false,
            ep,
        });
    }

    fn push_flow(&mut self, ia: u32, ib: u32, start: u64, msgs: Option<u64>) -> usize {
        self.flows.push((ia, ib));
        self.flow_info.push(Flow {
            sender: ia,
            receiver: ib,
            start,
            finish: None,
            msgs,
        });
        if self.started {
            for id in [ia, ib] {
                if !self.owns(self.slots[id as usize].host) {
                    continue;
                }
                self.q.push(start.max(self.now), Ev::Start(id));
            }
        }
        self.flows.len() - 1
    }

    /// Links `links` fail at `t` (see [`Fabric::reconverge_ns`]).
    pub fn fail_at(&mut self, t: u64, links: Vec<usize>) {
        self.failures.push(links);
        self.q.push(t, Ev::Fail(self.failures.len() as u32 - 1));
    }

    /// Links `links` come back at `t`.
    #[allow(dead_code)] // API for issue 13's baselines and workloads (roce.rs, irn.rs, workload.rs)
    pub fn restore_at(&mut self, t: u64, links: Vec<usize>) {
        self.failures.push(links);
        self.q.push(t, Ev::Restore(self.failures.len() as u32 - 1));
    }

    /// Makes this the share `part` of a partitioned run ([`crate::parallel`]): it runs
    /// only the events of the nodes `part` owns. Before the run starts.
    pub fn partition(&mut self, part: Part) {
        assert!(!self.started, "partition before run");
        assert!(
            self.driver.is_none(),
            "a workload driver needs one partition"
        );
        self.fabric.reseed(part.me());
        self.fabric.part = Some(part);
    }

    /// Host `h`'s endpoints run here.
    fn owns(&self, h: u32) -> bool {
        self.fabric.part.as_ref().is_none_or(|p| p.owns_host(h))
    }

    /// Takes another partition's messages of the window just run (leaves `msgs` empty).
    pub fn ingest(&mut self, msgs: &mut Vec<Msg>) {
        for m in msgs.iter() {
            self.fabric.receive(&mut self.q, m);
        }
        msgs.clear();
    }

    /// Events waiting (a measure of the engine's working set), timers excluded.
    pub fn pending_events(&self) -> usize {
        self.q.len()
    }

    pub fn run(&mut self, until: u64) {
        if !self.started {
            self.started = true;
            for i in 0..self.slots.len() {
                if !self.owns(self.slots[i].host) {
                    continue;
                }
                let start = self.flow_info[self.slots[i].flow as usize].start;
                if start <= self.now {
                    self.service(i as u32);
                } else {
                    self.q.push(start, Ev::Start(i as u32));
                }
            }
            if self.params.sample_ns > 0 {
                self.q.push(self.now, Ev::Sample);
            }
            let roots = self.driver.as_ref().map(Driver::roots).unwrap_or_default();
            for (i, start) in roots {
                if start <= self.now {
                    self.post_transfer(i);
                } else {
                    self.q.push(start, Ev::Post(i as u32));
                }
            }
        }
        loop {
            let te = self.q.peek_time().unwrap_or(NEVER);
            if let Some((tt, id)) = self.timers.peek() {
                if tt < te && tt <= until {
                    let real = self.slots[id as usize].timer_at;
                    if tt < real {
                        // A stale entry (the endpoint re-armed later, [`Timers::lower`]):
                        // moved to the real deadline, or dropped; no event.
                        self.timers.set(id, real);
                        continue;
                    }
                    // An endpoint timer, before any other event.
                    self.now = tt;
                    self.events += 1;
                    self.by_kind[5] += 1;
                    self.timers.set(id, NEVER);
                    self.slots[id as usize].timer_at = NEVER;
                    self.timeout(id);
                    self.service(id);
                    continue;
                }
            }
            if te > until {
                break;
            }
            let (t, ev) = self.q.pop().expect("peeked");
            self.now = t;
            // Memory latency bounds the engine: start loading what the events a few
            // places behind this one will touch (no effect on results).
            if let Some(e) = self.q.ahead(PREFETCH_FAR) {
                self.fabric.prefetch(e, true);
            }
            if let Some(e) = self.q.ahead(PREFETCH_NEAR) {
                self.fabric.prefetch(e, false);
            }
            self.events += 1;
            // Events by kind, classified by what the fabric returns (a host's NIC or
            // not), so the run loop reads no link table.
            if !matches!(ev, Ev::LinkDone(_) | Ev::Arrive(..)) {
                self.by_kind[4] += 1;
            }
            match ev {
                Ev::LinkDone(l) => {
                    if let Some(h) = self.fabric.on_link_done(t, &mut self.q, l as usize) {
                        self.by_kind[0] += 1;
                        self.pump(h);
                    } else {
                        self.by_kind[1] += 1;
                    }
                }
                Ev::Arrive(pid) => {
                    if let Some(h) = self.fabric.on_arrive(t, &mut self.q, pid) {
                        self.by_kind[2] += 1;
                        self.deliver(h, pid);
                    } else {
                        self.by_kind[3] += 1;
                    }
                }
                Ev::Pause(l, on) => {
                    if let Some(h) = self.fabric.on_pause(t, &mut self.q, l as usize, on) {
                        self.pump(h);
                    }
                }
                Ev::Start(i) => self.service(i),
                Ev::Fail(i) => {
                    let links = std::mem::take(&mut self.failures[i as usize]);
                    self.fabric.fail(t, &mut self.q, &links);
                    self.failures[i as usize] = links;
                }
                Ev::Restore(i) => {
                    let links = std::mem::take(&mut self.failures[i as usize]);
                    self.fabric.restore(t, &mut self.q, &links);
                    self.failures[i as usize] = links;
                }
                Ev::Reconverge(p) => self.fabric.reconverge(t, p),
                Ev::Sample => {
                    self.sample();
                    self.q.push(t + self.params.sample_ns, Ev::Sample);
                }
                Ev::Post(i) => self.post_transfer(i as usize),
            }
        }
        self.now = until;
    }

    /// Payload bytes placed at the receiver of flow `f`, each byte once.
    pub fn delivered(&self, f: usize) -> u64 {
        match &self.slots[self.flows[f].1 as usize].ep {
            Ep::Meta(_, app) => app.placed,
            Ep::Base(e) => e.delivered,
            Ep::Dyn(e) => e.delivered(),
        }
    }

    fn sample(&mut self) {
        let mut delivered = Vec::with_capacity(self.flows.len());
        let mut rate = Vec::with_capacity(self.flows.len());
        for (f, &(a, _)) in self.flows.iter().enumerate() {
            delivered.push(self.delivered(f));
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
                Ep::Dyn(e) => e.rate().unwrap_or(f64::INFINITY),
            });
        }
        let queue = self
            .watch_link
            .map(|l| self.fabric.ports[l].waiting())
            .unwrap_or(0);
        self.samples.push(Sample {
            t: self.now,
            delivered,
            queue,
            rate,
        });
    }

    fn deliver(&mut self, h: u32, pid: u32) {
        let now = Instant(self.now);
        let ce = self.fabric.pool.get(pid).ce;
        let id = match self.fabric.pool.body(pid) {
            Body::Meta { .. } | Body::MetaLong(_) => {
                let len = match self.fabric.pool.body(pid) {
                    Body::Meta { len, head } => {
                        let len = usize::from(*len);
                        let kept = len.min(HEAD);
                        self.rxbuf[..kept].copy_from_slice(&head[..kept]);
                        len
                    }
                    Body::MetaLong(b) => {
                        self.rxbuf[..b.len()].copy_from_slice(b);
                        b.len()
                    }
                    _ => 0,
                };
                self.fabric.pool.free(pid);
                let bytes = &self.rxbuf[..len];
                let Ok(id) = peek_dst_conn(bytes) else {
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
                        let hint = self.fair[h as usize].note(now, c.fair_slot(), len as u32);
                        c.set_rate_hint(hint);
                    }
                    let _ = c.handle_packet(now, bytes, ce, &mut **app);
                }
                id
            }
            Body::Toy(b) => {
                let b = *b;
                self.fabric.pool.free(pid);
                if let Ep::Base(e) = &mut self.slots[b.conn as usize].ep {
                    e.rx(self.now, b.kind, ce, self.params.min_rto_ns);
                }
                b.conn
            }
            Body::Ext(b) => {
                let b = *b;
                self.fabric.pool.free(pid);
                if let Ep::Dyn(e) = &mut self.slots[b.conn as usize].ep {
                    e.on_packet(self.now, &b, ce);
                }
                b.conn
            }
        };
        self.check_done(id);
        if self.driver.is_some() {
            self.drive(id);
        }
        self.service(id);
    }

    /// Records the finish time of a bounded flow whose receiver `id` just completed it.
    fn check_done(&mut self, id: u32) {
        let slot = &self.slots[id as usize];
        let f = &self.flow_info[slot.flow as usize];
        let (Some(m), None) = (f.msgs, f.finish) else {
            return;
        };
        if f.receiver != id {
            return;
        }
        let done = match &slot.ep {
            Ep::Meta(_, app) => app.completed_msgs >= m,
            Ep::Base(e) => u64::from(e.epsn) >= m,
            Ep::Dyn(e) => e.completed_msgs() >= m,
        };
        if done {
            self.flow_info[slot.flow as usize].finish = Some(self.now);
        }
    }

    fn timeout(&mut self, id: u32) {
        let now = self.now;
        match &mut self.slots[id as usize].ep {
            Ep::Meta(c, app) => c.handle_timeout(Instant(now), &mut **app),
            Ep::Base(e) => e.timeout(now, self.params.base_window),
            Ep::Dyn(e) => e.on_timer(now),
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
            Ep::Base(e) => e.next_timer(),
            Ep::Dyn(e) => e.next_timer().unwrap_or(NEVER),
        };
        let t = if next_timer == NEVER {
            NEVER
        } else {
            next_timer.max(now + 1)
        };
        if t != slot.timer_at {
            slot.timer_at = t;
            self.timers.lower(id, t);
        }
    }

    /// The host NIC pulls packets round-robin from ready endpoints while its ports hold
    /// less than two full packets per plane waiting (a NIC does not queue milliseconds
    /// of data). An endpoint of several QPs (multi-plane RoCE) sends only on QPs whose
    /// plane's port holds less than two full packets: each NIC port schedules its own
    /// QPs, so a port that is paused or slow does not hold back the others. One plane:
    /// the same as the total's bound.
    fn pump(&mut self, host: u32) {
        let planes = self.fabric.ft().planes;
        let per_port = 2 * u64::from(MTU + 200);
        let room = u64::from(planes) * per_port;
        // Endpoints in a row that had data only for full ports (kept ready).
        let mut blocked = 0usize;
        loop {
            if self.fabric.host_q[host as usize] >= room
                || blocked >= self.ready[host as usize].len()
            {
                return;
            }
            let mut full = 0u8;
            if planes > 1 {
                for p in 0..planes {
                    if self.fabric.host_port_bytes(host, p) >= per_port {
                        full |= 1 << p;
                    }
                }
            }
            let Some(id) = self.ready[host as usize].pop_front() else {
                return;
            };
            match self.poll_one(id, full) {
                Some(pid) => {
                    blocked = 0;
                    self.ready[host as usize].push_back(id);
                    self.fabric.inject_pid(self.now, &mut self.q, pid);
                    self.arm(id);
                }
                // Nothing for the ports with room, some port full: ready again when
                // a port drains (LinkDone pumps this host).
                None if full != 0 && matches!(self.slots[id as usize].ep, Ep::Dyn(_)) => {
                    blocked += 1;
                    self.ready[host as usize].push_back(id);
                    self.arm(id);
                }
                None => {
                    self.slots[id as usize].ready = false;
                    self.arm(id);
                }
            }
        }
    }

    /// The next packet endpoint `id` sends, allocated in the packet arena; `full`: the
    /// host's NIC ports (bit per plane) a multi-QP endpoint must not send on.
    fn poll_one(&mut self, id: u32, full: u8) -> Option<u32> {
        let now = self.now;
        let slot = &mut self.slots[id as usize];
        let (host, peer_host, peer) = (slot.host, slot.peer_host, slot.peer);
        let pkt = |sport: u16, class: u8, wire: u32, ect: bool| Pkt {
            src: host,
            dst: peer_host,
            sport,
            class,
            ect,
            ce: false,
            wire,
            key: flow_key(host, peer_host, sport),
            in_link: 0,
        };
        match &mut slot.ep {
            Ep::Meta(c, app) => {
                let t = c.poll_transmit(Instant(now), &mut self.buf, &mut **app)?;
                let class = if self.buf[1] == 1 { DATA } else { CTRL };
                // DATA: its headers (the payload is not simulated); anything else
                // whole (an ACK bundle is longer than `HEAD`).
                let kept = if class == DATA {
                    t.len.min(HEAD)
                } else {
                    t.len
                };
                let p = pkt(t.src_port, class, t.len as u32 + OVERHEAD, t.ect);
                Some(
                    self.fabric
                        .pool
                        .alloc_meta(p, t.len as u16, &self.buf[..kept]),
                )
            }
            Ep::Base(e) => {
                let (kind, data) = e.poll(now, self.params.min_rto_ns)?;
                let (class, wire) = if data {
                    (DATA, MTU + BASE_HDR + OVERHEAD)
                } else {
                    (CTRL, BASE_HDR + 8 + OVERHEAD)
                };
                let body = Body::Toy(crate::net::BasePkt { conn: peer, kind });
                let p = pkt(e.sport, class, wire, true);
                Some(self.fabric.pool.alloc(p, body))
            }
            Ep::Dyn(e) => {
                let b: endpoint::BasePkt = if full == 0 {
                    e.poll_transmit(now)?
                } else {
                    let planes = u16::from(self.fabric.ft().planes);
                    e.poll_transmit_where(now, &|sport| full & 1 << (sport % planes) == 0)?
                };
                let class = ext_class(&b);
                let p = pkt(b.sport, class, b.wire, b.ect);
                Some(self.fabric.pool.alloc(p, Body::Ext(b)))
            }
        }
    }
}

/// The switch traffic class of a baseline packet: data in the data class (lossless
/// when the fabric runs PFC), ACK/NAK/CNP in the control class (strict priority, never
/// paused), as RoCE deployments configure CNPs and as HPCC's simulator runs DCQCN
/// (`ACK_HIGH_PRIO 1`). The class follows the packet kind, not the QP's `lossless`
/// flag: that flag says which fabric the QP is deployed on.
pub fn ext_class(b: &endpoint::BasePkt) -> u8 {
    match b.kind {
        endpoint::BaseKind::Data { .. } => DATA,
        _ => CTRL,
    }
}

pub fn mix16(x: u64) -> u16 {
    (crate::net::mix(x) % 30000) as u16
}
