//! The comparison scenarios (issue 13): every row runs MetaRoCE and the baselines an
//! operator would recognise, each on the fabric it is deployed on, over several seeds,
//! and reports delivered bytes only.
//!
//! Columns ([`Variant`]):
//! * **MetaRoCE (sim)**: the simulator's `Connection` configuration (min RTO 200 µs,
//!   8 paths), over a lossy shared-buffer fabric with step ECN at K = 100 KB.
//! * **MetaRoCE (kernel)**: the kernel module's exact `Connection` parameters
//!   (rust/verbs/qp/control.rs: HZ=250 tick, min RTO 4 ms, pacing slack 8 ms, init RTO
//!   20 ms, max RTO 500 ms, verbs local ACK timer 67 ms), same fabric.
//! * **RoCEv2+DCQCN, PFC**: go-back-N RC QPs at line rate under DCQCN (HPCC's ns-3
//!   parameters) on a lossless fabric (PFC) with that configuration's RED ECN
//!   (Kmin 400 KB, Kmax 1600 KB, Pmax 0.2), local ACK timeout 14 (67.1 ms, perftest's
//!   and older NCCL's default; PFC makes loss rare).
//! * **RoCEv2+DCQCN, lossy**: the same without PFC, local ACK timeout 6 (262 µs).
//! * **IRN+DCQCN, lossy**: selective repeat, BDP-FC, RTO 100/320 µs, DCQCN, no PFC.
//! * **Multi-plane RoCE** (planes scenario): one flow over one QP per plane, or 4 QPs
//!   per plane (QP scaling), each a RoCEv2+DCQCN QP.
//!
//! Same switch model for everyone in a row (Tomahawk-class shared buffer, 2.5 MB per
//! Tb/s, dynamic threshold alpha 1, control in a strict-priority queue); each transport
//! gets its own published ECN setting.

pub mod collectives;
pub mod elephants;
pub mod failure;
pub mod incast;
pub mod large;
pub mod loss;
pub mod mix;
pub mod permutation;
pub mod planes;
pub mod reorder;
pub mod sensitivity;
pub mod sizes;
pub mod spread;
pub mod state;
pub mod tier3;

use crate::dcqcn::{DcqcnParams, EcnRed};
use crate::endpoint::Endpoint;
use crate::irn::{IrnConfig, IrnReceiver, IrnSender};
use crate::multiplane::{multi_plane, plane_sports};
use crate::roce::{data_wire, ib_local_ack_timeout_ns, RoceConfig, RoceReceiver, RoceSender};
use crate::sim::{Params, Sim, Transport, MTU, OVERHEAD};
use crate::stats::mean_ci95;
use crate::switch::{Ecn, SwitchConfig};
use crate::topo::{FatTree, Node};

pub const GBPS: u64 = 100;
pub const DELAY: u64 = 1000;
/// MetaRoCE's step ECN threshold, bytes.
pub const K: u64 = 100_000;
pub const MIN_RTO: u32 = 200_000;
/// The kernel module's RTO floor, ns (`MIN_RTO_NS` in rust/verbs/qp/control.rs).
pub const KERNEL_MIN_RTO: u32 = 1_000_000;
/// The kernel module's delayed ACK: the defaults of its `ack_every` and
/// `ack_delay_us` parameters (`METAROCE_DEFAULT_ACK_*` in include/metaroce.h).
pub const KERNEL_ACK_EVERY: u8 = 2;
pub const KERNEL_ACK_DELAY_NS: u32 = 100_000;
/// The kernel module's ACK bundles: its `ack_bundle` parameter's default
/// (`METAROCE_DEFAULT_ACK_BUNDLE`).
pub const KERNEL_ACK_BUNDLE: u8 = 16;
/// The kernel module's ACKs riding on DATA: its `ack_ride` parameter's default (on;
/// the core bounds a ride by the MTU).
pub const KERNEL_ACK_RIDE: u16 = u16::MAX;
/// The kernel module's trains: its `train` parameter's default
/// (`METAROCE_DEFAULT_TRAIN`).
pub const KERNEL_TRAIN: u8 = 4;
/// Line rate, bits/s.
pub const LINE: f64 = GBPS as f64 * 1e9;
/// RoCEv2 local ACK timeout on lossy fabrics: IBA `timeout` 6 = 262 µs. Above the
/// worst queueing delay of the fabric (a 2 MB dynamic-threshold queue drains in
/// 160 µs at 100 Gb/s), so it does not fire spuriously; the same order as MetaRoCE's
/// min RTO (200 µs) and IRN's RTO_high (320 µs).
pub const ROCE_LOSSY_TIMEOUT: u8 = 6;
/// RoCEv2 local ACK timeout on PFC fabrics: 14 = 67.1 ms (perftest's default).
pub const ROCE_PFC_TIMEOUT: u8 = 14;

#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub quick: bool,
    pub seed: u64,
    /// `--kernel`: only the kernel-configuration MetaRoCE column; guards report only.
    pub kernel_only: bool,
    /// The DCQCN sensitivity columns instead of the standard ones (scenario 8).
    pub dcqcn_presets: bool,
}

impl Scale {
    pub fn t(&self, quick: u64, full: u64) -> u64 {
        if self.quick {
            quick
        } else {
            full
        }
    }
    /// Seeds of every headline figure: 3 at quick scale, 5 at full.
    pub fn seeds(&self) -> Vec<u64> {
        let n = if self.quick { 3 } else { 5 };
        (0..n).map(|i| self.seed + i).collect()
    }
    /// Fewer seeds for the costliest rows (quick: 2, full: 5).
    pub fn seeds_heavy(&self) -> Vec<u64> {
        let n = if self.quick { 2 } else { 5 };
        (0..n).map(|i| self.seed + i).collect()
    }
    /// The standard columns of a row.
    pub fn variants(&self) -> Vec<Variant> {
        if self.dcqcn_presets {
            let ps = [Preset::Hpcc, Preset::Zhu];
            ps.iter()
                .map(|&p| Variant::RocePfc(p))
                .chain(ps.iter().map(|&p| Variant::RoceLossy(p)))
                .chain(ps.iter().map(|&p| Variant::IrnLossy(p)))
                .collect()
        } else if self.kernel_only {
            vec![Variant::MetaKernel]
        } else {
            vec![
                Variant::Meta,
                Variant::MetaKernel,
                Variant::ROCE_PFC,
                Variant::ROCE_LOSSY,
                Variant::IRN_LOSSY,
            ]
        }
    }
}

/// Which published DCQCN parameter set a baseline column runs (see [`crate::dcqcn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    /// HPCC's ns-3 DCQCN as its paper ran it (`run.py --cc dcqcn`): 300 µs timer, no
    /// byte counter, F = 1.
    Hpcc,
    /// The DCQCN authors' ns-3 configuration: 60 µs timer, 300 kB byte counter, F = 5.
    Zhu,
}

impl Preset {
    pub fn params(self) -> DcqcnParams {
        match self {
            Preset::Hpcc => DcqcnParams::hpcc_ns3(LINE),
            Preset::Zhu => DcqcnParams::zhu_ns3(LINE),
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Preset::Hpcc => "HPCC ns-3 preset",
            Preset::Zhu => "DCQCN-authors preset",
        }
    }
}

/// The DCQCN preset of the headline baseline columns: HPCC's (`run.py --cc dcqcn`,
/// ConnectX's firmware increase steps scaled to 100 Gb/s; the DCQCN configuration of
/// most RDMA simulation papers since 2019). It does better than the DCQCN authors'
/// 2015 preset in the permutation rows, where every flow is cut deep at the start: that
/// preset clamps the target rate on every cut and its hyper increase needs five
/// 300 kB byte-counter events, so a QP cut to a few Gb/s climbs back at 40 Mb/s per
/// 60 µs. Scenario 8 runs both presets on the congestion rows.
pub const HEADLINE: Preset = Preset::Hpcc;

/// What a column models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Meta,
    MetaKernel,
    RocePfc(Preset),
    RoceLossy(Preset),
    IrnLossy(Preset),
    /// Multi-plane RoCE: `qpp` QPs per plane, PFC or not.
    MpRoce {
        qpp: u16,
        pfc: bool,
    },
}

impl Variant {
    /// The headline baseline columns.
    pub const ROCE_PFC: Variant = Variant::RocePfc(HEADLINE);
    pub const ROCE_LOSSY: Variant = Variant::RoceLossy(HEADLINE);
    pub const IRN_LOSSY: Variant = Variant::IrnLossy(HEADLINE);

    pub fn label(&self) -> String {
        let tag = |p: &Preset| {
            if *p == HEADLINE {
                String::new()
            } else {
                format!(" ({})", p.label())
            }
        };
        match self {
            Variant::Meta => "MetaRoCE (sim config)".into(),
            Variant::MetaKernel => "MetaRoCE (kernel config)".into(),
            Variant::RocePfc(p) => format!("RoCEv2+DCQCN, PFC{}", tag(p)),
            Variant::RoceLossy(p) => format!("RoCEv2+DCQCN, lossy{}", tag(p)),
            Variant::IrnLossy(p) => format!("IRN+DCQCN, lossy{}", tag(p)),
            Variant::MpRoce { qpp, pfc } => format!(
                "multi-plane RoCE+DCQCN, {qpp} QP/plane, {}",
                if *pfc { "PFC" } else { "lossy" }
            ),
        }
    }
    /// The label with the DCQCN preset always named (scenario 8).
    pub fn label_with_preset(&self) -> String {
        match self {
            Variant::RocePfc(p) | Variant::RoceLossy(p) | Variant::IrnLossy(p)
                if *p == HEADLINE =>
            {
                format!("{} ({})", self.label(), p.label())
            }
            _ => self.label(),
        }
    }
    pub fn is_meta(&self) -> bool {
        matches!(self, Variant::Meta | Variant::MetaKernel)
    }
    pub fn pfc(&self) -> bool {
        matches!(
            self,
            Variant::RocePfc(_) | Variant::MpRoce { pfc: true, .. }
        )
    }
    /// The DCQCN preset of a baseline column.
    pub fn preset(&self) -> Preset {
        match self {
            Variant::RocePfc(p) | Variant::RoceLossy(p) | Variant::IrnLossy(p) => *p,
            _ => HEADLINE,
        }
    }
    /// The switch configuration this transport is deployed with.
    pub fn switch(&self) -> SwitchConfig {
        if self.is_meta() {
            SwitchConfig::shared(Ecn::step(K))
        } else if self.pfc() {
            SwitchConfig::lossless(dcqcn_ecn(), u64::from(data_wire(MTU, true)))
        } else {
            SwitchConfig::shared(dcqcn_ecn())
        }
    }
    /// The MetaRoCE parameters of this column (unused by the baselines).
    pub fn params(&self, paths: u8, seed: u64, sample_ns: u64) -> Params {
        params(*self == Variant::MetaKernel, paths, seed, sample_ns)
    }
    pub fn roce(&self) -> RoceConfig {
        let mut c = RoceConfig::deployed(LINE, self.pfc());
        c.dcqcn = Some(self.preset().params());
        c.ack_timeout_ns = ib_local_ack_timeout_ns(if self.pfc() {
            ROCE_PFC_TIMEOUT
        } else {
            ROCE_LOSSY_TIMEOUT
        });
        c
    }
}

/// DCQCN's switch marking (HPCC ns-3 configuration at 100 Gb/s).
pub fn dcqcn_ecn() -> Ecn {
    let r = EcnRed::HPCC_100G;
    Ecn {
        kmin: r.kmin_bytes,
        kmax: r.kmax_bytes,
        pmax: r.pmax,
    }
}

/// MetaRoCE parameters: the simulator's, or the kernel module's (`kernel`).
pub fn params(kernel: bool, paths: u8, seed: u64, sample_ns: u64) -> Params {
    let k = kernel;
    Params {
        transport: Transport::Meta,
        paths,
        streams: 4,
        msg_len: 64 * 1024,
        min_rto_ns: if k { KERNEL_MIN_RTO } else { MIN_RTO },
        init_rto_ns: if k { 20_000_000 } else { MIN_RTO },
        max_rto_ns: if k {
            500_000_000
        } else {
            metaroce_proto::conn::Config::DEFAULT.max_rto_ns
        },
        // The kernel's hrtimer fires on time here (exact simulated timers): the slack
        // its lateness measurement then gives.
        pacing_slack_us: if k {
            metaroce_proto::time::pacing_slack_us(0)
        } else {
            0
        },
        // The kernel's QPs have the verbs local ACK timer; perftest asks for
        // `timeout` 14 (67 ms, run as 268 ms).
        ack_timeout_ns: if k {
            metaroce_proto::rc::ack_timeout_ns(14)
        } else {
            0
        },
        // The kernel's module parameters `ack_every` and `ack_delay_us`
        // (their defaults, include/metaroce.h).
        ack_every: if k {
            KERNEL_ACK_EVERY
        } else {
            metaroce_proto::conn::Config::DEFAULT.ack_every
        },
        ack_delay_ns: if k {
            KERNEL_ACK_DELAY_NS
        } else {
            metaroce_proto::conn::Config::DEFAULT.ack_delay_ns
        },
        ack_bundle: if k {
            KERNEL_ACK_BUNDLE
        } else {
            metaroce_proto::conn::Config::DEFAULT.ack_bundle
        },
        ack_ride: if k {
            KERNEL_ACK_RIDE
        } else {
            metaroce_proto::conn::Config::DEFAULT.ack_ride
        },
        train: if k {
            KERNEL_TRAIN
        } else {
            metaroce_proto::conn::Config::DEFAULT.train
        },
        base_window: 128 * 1024,
        sample_ns,
        seed,
    }
}

/// A leaf–spine fabric of 100 Gb/s links, 1 µs per hop.
pub fn leaf_spine(planes: u8, leaves: u16, hpl: u16, spines: u16) -> FatTree {
    FatTree {
        host_gbps: GBPS,
        fabric_gbps: GBPS,
        host_delay_ns: DELAY,
        fabric_delay_ns: DELAY,
        ..FatTree::leaf_spine(planes, leaves, hpl, spines)
    }
}

/// Payload bytes/s of one 100 Gb/s link carrying MTU-sized MetaRoCE-framed packets is
/// slightly below this; every goodput is normalised to the same line-rate reference.
pub fn line_bytes() -> f64 {
    LINE / 8.0
}

/// Unloaded round trip across a spine (data one way, ACK back), ns.
pub fn base_rtt() -> f64 {
    let ser = |b: u32| f64::from(b) * 8.0 / GBPS as f64;
    8.0 * DELAY as f64 + 4.0 * ser(MTU + 60 + OVERHEAD) + 4.0 * ser(68 + OVERHEAD)
}

/// A new run of variant `v`.
pub fn sim<const P: usize, const W: usize, const N: usize>(
    v: Variant,
    ft: FatTree,
    paths: u8,
    seed: u64,
    sample_ns: u64,
) -> Sim<P, W, N> {
    Sim::new(ft, v.switch(), v.params(paths, seed, sample_ns))
}

/// A UDP source port for a baseline QP (RoCEv2's 49152..65535), from the flow and seed.
pub fn sport(flow: usize, seed: u64) -> u16 {
    49152 + (crate::net::mix(flow as u64 ^ seed.wrapping_mul(0x9e37_79b9)) % 16000) as u16
}

/// Adds a flow of variant `v` from `a` to `b` starting at `start`. `endless`: the
/// sender always has data (one huge message for the baselines, endless 64 KiB messages
/// on 4 streams for MetaRoCE); otherwise a workload flow whose messages a
/// [`crate::driver::Driver`] posts (all of `msg_len` bytes for MetaRoCE).
pub fn add<const P: usize, const W: usize, const N: usize>(
    s: &mut Sim<P, W, N>,
    v: Variant,
    a: u32,
    b: u32,
    endless: bool,
    msg_len: u64,
) -> usize {
    let fl = s.flows.len();
    let seed = s.params.seed;
    let post = |e: &mut dyn Endpoint| {
        if endless {
            e.post(1 << 38);
        }
    };
    match v {
        Variant::Meta | Variant::MetaKernel => {
            if endless {
                s.add_flow(a, b, u32::MAX)
            } else {
                let len = u32::try_from(msg_len).expect("message fits u32");
                s.add_flow_with(a, b, 0, len, 1)
            }
        }
        Variant::RocePfc(_) | Variant::RoceLossy(_) => {
            let cfg = v.roce();
            let sp = sport(fl, seed);
            let now = s.now;
            s.add_flow_dyn(a, b, now, None, |sa, sb| {
                let mut tx = RoceSender::new(cfg, sb, sp);
                post(&mut tx);
                (Box::new(tx), Box::new(RoceReceiver::new(cfg, sa, sp)))
            })
        }
        Variant::IrnLossy(p) => {
            let mut cfg = IrnConfig::paper_100g(LINE, base_rtt() as u64, true);
            cfg.dcqcn = Some(p.params());
            let sp = sport(fl, seed);
            let now = s.now;
            s.add_flow_dyn(a, b, now, None, |sa, sb| {
                let mut tx = IrnSender::new(cfg, sb, sp);
                post(&mut tx);
                (Box::new(tx), Box::new(IrnReceiver::new(cfg, sa, sp)))
            })
        }
        Variant::MpRoce { qpp, .. } => {
            let cfg = v.roce();
            let planes = s.fabric.ft().planes;
            let base = sport(fl, seed).min(60000);
            let sports = plane_sports(planes, qpp, base, |x| {
                (u32::from(x) % u32::from(planes)) as u8
            });
            let now = s.now;
            s.add_flow_dyn(a, b, now, None, |sa, sb| {
                let (mut tx, rx) = multi_plane(cfg, &sports, sa, sb);
                if endless {
                    // Split the endless supply over the QPs (as NCCL splits a buffer).
                    tx.post_split(1 << 40);
                }
                (Box::new(tx), Box::new(rx))
            })
        }
    }
}

/// The spine that ToR `tor`'s uplink `l` (plane 0) goes to.
pub fn spine_of<const P: usize, const W: usize, const N: usize>(
    s: &Sim<P, W, N>,
    tor: u16,
    l: usize,
) -> u16 {
    (0..s.fabric.ft().tor_uplinks)
        .find(|&j| s.fabric.up(0, tor, j) == l)
        .expect("an uplink of the ToR")
}

/// Fabric-wide counters of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub drops: u64,
    pub paused_ns: u64,
    pub xoff: u64,
    pub peak_switch_q: u64,
}

pub fn counters<const P: usize, const W: usize, const N: usize>(s: &Sim<P, W, N>) -> Counters {
    let mut c = Counters::default();
    for (l, p) in s.fabric.ports.iter().enumerate() {
        c.drops += p.stats.drops();
        c.paused_ns += p.stats.paused_ns;
        c.xoff += p.stats.xoff_frames;
        if let Node::Switch(_) = s.fabric.topo.links[l].from {
            c.peak_switch_q = c.peak_switch_q.max(p.stats.peak_q);
        }
    }
    c
}

/// Errors reported to the verbs layer by every endpoint of the run.
pub fn total_errors<const P: usize, const W: usize, const N: usize>(s: &Sim<P, W, N>) -> u32 {
    use crate::sim::Ep;
    s.slots
        .iter()
        .map(|sl| match &sl.ep {
            Ep::Meta(_, app) => app.errors,
            Ep::Base(e) => e.errors,
            Ep::Dyn(e) => e.errors(),
        })
        .sum()
}

/// Bytes delivered per flow between the samples at or before `t0` and `t1`.
pub fn delivered_between<const P: usize, const W: usize, const N: usize>(
    s: &Sim<P, W, N>,
    t0: u64,
    t1: u64,
) -> Vec<f64> {
    let at = |t: u64| {
        s.samples
            .iter()
            .rev()
            .find(|x| x.t <= t)
            .map(|x| x.delivered.clone())
            .unwrap_or_else(|| vec![0; s.flows.len()])
    };
    let a = at(t0);
    let b = at(t1);
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (*y - *x) as f64)
        .collect()
}

/// Sample times and per-flow cumulative delivered bytes.
pub fn series<const P: usize, const W: usize, const N: usize>(
    s: &Sim<P, W, N>,
) -> (Vec<u64>, Vec<Vec<u64>>) {
    let times: Vec<u64> = s.samples.iter().map(|x| x.t).collect();
    let cums = (0..s.flows.len())
        .map(|f| s.samples.iter().map(|x| x.delivered[f]).collect())
        .collect();
    (times, cums)
}

/// "mean ± half (n)" of per-seed figures, with `d` decimals and a unit.
pub fn ci(xs: &[f64], d: usize, unit: &str) -> String {
    match mean_ci95(xs) {
        Some(c) => format!("{:.d$} ± {:.d$}{unit}", c.mean, c.half),
        None => match xs.first() {
            Some(x) => format!("{x:.d$}{unit}"),
            None => "—".into(),
        },
    }
}

pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// One table row: a cell per column of its section.
pub struct Row {
    pub scenario: String,
    pub metric: String,
    pub cells: Vec<String>,
    pub target: String,
    pub met: Option<bool>,
    /// Regression guard for `--check`: looser than the target, so a clear regression of
    /// MetaRoCE fails the host checks while known misses do not.
    pub guard: Option<bool>,
}

/// One scenario's table.
pub struct Section {
    pub num: u32,
    pub title: String,
    /// What the run is: topology, sizes, seeds, windows.
    pub setup: String,
    pub cols: Vec<String>,
    pub rows: Vec<Row>,
}

impl Section {
    pub fn new(num: u32, title: &str, setup: String, vs: &[Variant]) -> Section {
        Section {
            num,
            title: title.into(),
            setup,
            cols: vs.iter().map(Variant::label).collect(),
            rows: Vec::new(),
        }
    }

    pub fn print(&self) {
        println!("### {}. {}\n", self.num, self.title);
        println!("{}\n", self.setup);
        print!("| scenario | metric |");
        for c in &self.cols {
            print!(" {c} |");
        }
        println!(" target | met |");
        print!("|---|---|");
        for _ in &self.cols {
            print!("---|");
        }
        println!("---|---|");
        for r in &self.rows {
            print!("| {} | {} |", r.scenario, r.metric);
            for c in &r.cells {
                print!(" {c} |");
            }
            println!(
                " {} | {} |",
                r.target,
                match r.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "",
                }
            );
        }
        println!();
    }
}

/// Index of the guarded MetaRoCE column (the sim configuration; the kernel one with
/// `--kernel`).
pub fn meta_col(vs: &[Variant]) -> usize {
    vs.iter()
        .position(|v| *v == Variant::Meta)
        .or_else(|| vs.iter().position(|v| v.is_meta()))
        .unwrap_or(0)
}

/// Attaches `wl` to `s` with one flow of variant `v` per (src, dst) pair (every
/// transfer of a pair must have the same size), and runs until every transfer is done
/// or `limit` ns. Returns whether everything completed.
pub fn run_workload<const P: usize, const W: usize, const N: usize>(
    s: &mut Sim<P, W, N>,
    v: Variant,
    wl: crate::workload::Workload,
    limit: u64,
) -> bool {
    let mut pairs: std::collections::HashMap<(u32, u32), (usize, u64)> = Default::default();
    let mut flow_of = Vec::with_capacity(wl.transfers.len());
    for t in &wl.transfers {
        let e = *pairs
            .entry((t.src, t.dst))
            .or_insert_with(|| (add(s, v, t.src, t.dst, false, t.bytes), t.bytes));
        assert_eq!(e.1, t.bytes, "one transfer size per pair");
        flow_of.push(e.0);
    }
    run_driven(s, wl.transfers, flow_of, 20_000, limit)
}

/// Attaches a driver for `transfers` (transfer i on flow `flow_of[i]`) and runs in
/// steps of `step` ns until every transfer completed (true) or `limit` ns (false).
pub fn run_driven<const P: usize, const W: usize, const N: usize>(
    s: &mut Sim<P, W, N>,
    transfers: Vec<crate::workload::Transfer>,
    flow_of: Vec<usize>,
    step: u64,
    limit: u64,
) -> bool {
    let flows = s.flows.len();
    s.attach(crate::driver::Driver::new(transfers, flow_of, flows));
    let mut t = 0;
    while t < limit {
        t = (t + step).min(limit);
        s.run(t);
        if s.driver.as_ref().is_some_and(|d| d.all_done()) {
            return true;
        }
    }
    false
}

/// `f(variant, seed)` for every column and seed: one `Vec` per column.
pub fn per_column<T>(vs: &[Variant], seeds: &[u64], f: impl Fn(Variant, u64) -> T) -> Vec<Vec<T>> {
    vs.iter()
        .map(|&v| seeds.iter().map(|&sd| f(v, sd)).collect())
        .collect()
}

/// One "mean ± CI× (mean µs)" cell per column from its per-seed ratios to `ideal`
/// ("not done (k/n seeds)" if a seed, None, did not finish; "—" without seeds), and
/// the mean ratio of column `mc` (infinite unless it has seeds and every one finished).
pub fn ratio_cells(cols: &[Vec<Option<f64>>], ideal: f64, mc: usize) -> (Vec<String>, f64) {
    let mut m = f64::INFINITY;
    let cells = cols
        .iter()
        .enumerate()
        .map(|(j, per)| {
            if per.is_empty() {
                return "—".into();
            }
            let done: Vec<f64> = per.iter().flatten().copied().collect();
            if done.len() < per.len() {
                return format!("not done ({}/{} seeds)", done.len(), per.len());
            }
            if j == mc {
                m = mean(&done);
            }
            format!(
                "{}× ({:.0} µs)",
                ci(&done, 2, ""),
                mean(&done) * ideal / 1e3
            )
        })
        .collect();
    (cells, m)
}

/// "drops / pause µs / peak KB" cell: each a mean ± 95 % CI over seeds.
pub fn drops_pause_peak(drops: &[f64], paused_us: &[f64], peak_kb: &[f64]) -> String {
    format!(
        "{} / {} / {}",
        ci(drops, 0, ""),
        ci(paused_us, 0, ""),
        ci(peak_kb, 0, "")
    )
}

/// The "drops / PFC pause µs / peak `queue` KB" row of `scenario`: one cell per
/// transport, from each seed's `(drops, pause µs, peak queue bytes)` given by `f`.
pub fn fabric_row<T>(
    scenario: String,
    queue: &str,
    res: &[Vec<T>],
    f: impl Fn(&T) -> (u64, f64, u64),
) -> Row {
    let cells = res
        .iter()
        .map(|r| {
            let v: Vec<(u64, f64, u64)> = r.iter().map(&f).collect();
            drops_pause_peak(
                &v.iter().map(|x| x.0 as f64).collect::<Vec<_>>(),
                &v.iter().map(|x| x.1).collect::<Vec<_>>(),
                &v.iter().map(|x| x.2 as f64 / 1e3).collect::<Vec<_>>(),
            )
        })
        .collect();
    Row {
        scenario,
        metric: format!("drops / PFC pause µs / peak {queue} KB"),
        cells,
        target: "—".into(),
        met: None,
        guard: None,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_planes;
#[cfg(test)]
mod tests_rows;
