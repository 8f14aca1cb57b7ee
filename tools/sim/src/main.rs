//! MetaRoCE simulator: runs the six scenarios of the transport issue for MetaRoCE and a
//! RoCEv2-style baseline (one path, go-back-N, no SACK) and prints a Markdown table.
//!
//! Usage: `metaroce-sim [--quick|--full] [--seed N] [--check] [--only N] [--kernel]`
//! or `metaroce-sim --scale ...` (see [`scale`]): a 1,024-host permutation, measured.
//! `--kernel` runs MetaRoCE with the kernel module's connection configuration.
//! `--check` exits non-zero if a quick-scale MetaRoCE target regresses clearly.

// The baseline endpoints' contract (issue 13: DCQCN, IRN): the engine hosts them.
#[allow(dead_code)]
mod endpoint;
// Issue 13 baselines, workloads and statistics; not wired into the scenarios yet.
#[allow(dead_code)]
mod dcqcn;
mod fabric;
#[allow(dead_code)]
mod irn;
#[allow(dead_code)]
mod multiplane;
mod net;
#[allow(dead_code)]
mod qp;
mod queue;
#[allow(dead_code)]
mod roce;
mod scale;
mod sim;
#[allow(dead_code)]
mod stats;
mod switch;
#[cfg(test)]
mod testpipe;
#[cfg(test)]
mod tests;
mod topo;
mod toy;
#[allow(dead_code)]
mod workload;

use sim::{Ep, Params, Sim, Transport, MTU, OVERHEAD};
use std::time::Instant as WallClock;
use switch::SwitchConfig;
use topo::FatTree;

#[derive(Clone, Copy)]
struct Scale {
    quick: bool,
    seed: u64,
}

impl Scale {
    fn t(&self, quick_ns: u64, full_ns: u64) -> u64 {
        if self.quick {
            quick_ns
        } else {
            full_ns
        }
    }
}

const GBPS: u64 = 100;
const DELAY: u64 = 1000;
const K: u64 = 100_000;
const QLIMIT: u64 = 1_000_000;
const MIN_RTO: u32 = 200_000;

/// The original scenarios' leaf–spine fabric: 100 Gb/s, 1 µs per hop, one 1 MB FIFO per
/// port (no shared buffer), step ECN at 100 KB.
fn topo(planes: u8, leaves: u16, hpl: u16, spines: u16) -> FatTree {
    FatTree {
        host_gbps: GBPS,
        fabric_gbps: GBPS,
        host_delay_ns: DELAY,
        fabric_delay_ns: DELAY,
        ..FatTree::leaf_spine(planes, leaves, hpl, spines)
    }
}

fn legacy() -> SwitchConfig {
    SwitchConfig::legacy(QLIMIT, K)
}

/// `--kernel`: MetaRoCE runs the kernel module's connection configuration
/// (rust/verbs/qp/control.rs) instead of the simulator's: its timer resolves
/// one tick (HZ=250: 4 ms), so min RTO = one tick, pacing slack = two, init RTO
/// 20 ms (no device base RTT yet), max RTO 500 ms, the verbs local ACK timer
/// of perftest's `timeout` 14 (67 ms × 4) deciding retry exceeded. Paths, pacing, ECN and the
/// receiver fair share are the same (8 paths unless a scenario says).
static KERNEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The kernel's timer tick with HZ=250, ns.
const KERNEL_TICK: u32 = 4_000_000;

fn kernel() -> bool {
    KERNEL.load(std::sync::atomic::Ordering::Relaxed)
}

fn params(tr: Transport, paths: u8, seed: u64, sample_ns: u64) -> Params {
    // The baseline keeps its own configuration.
    let k = kernel() && matches!(tr, Transport::Meta);
    Params {
        transport: tr,
        paths,
        streams: 4,
        msg_len: 64 * 1024,
        min_rto_ns: if k { KERNEL_TICK } else { MIN_RTO },
        init_rto_ns: if k { 20_000_000 } else { MIN_RTO },
        max_rto_ns: if k {
            500_000_000
        } else {
            metaroce_proto::conn::Config::DEFAULT.max_rto_ns
        },
        pacing_slack_us: if k {
            (2 * KERNEL_TICK / 1000) as u16
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
        base_window: 128 * 1024,
        sample_ns,
        seed,
    }
}

/// Line rate in bytes/s of payload-carrying capacity of one link (wire bytes).
fn link_bps() -> f64 {
    GBPS as f64 * 1e9 / 8.0
}

/// Unloaded round trip (data one way, ACK back) across the spine, ns.
fn base_rtt() -> f64 {
    let ser = |b: u32| f64::from(b) * 8.0 / GBPS as f64;
    8.0 * DELAY as f64 + 4.0 * ser(MTU + 60 + OVERHEAD) + 4.0 * ser(68 + OVERHEAD)
}

struct Row {
    num: &'static str,
    scenario: String,
    metric: &'static str,
    meta: String,
    base: String,
    target: String,
    met: Option<bool>,
    /// Regression guard for `--check`: a looser bound than the target, so that a clear
    /// regression of MetaRoCE fails the host checks while known misses do not.
    guard: Option<bool>,
}

/// Errors reported to the verbs layer by every endpoint of the run.
fn total_errors<const P: usize, const W: usize, const S: usize, const N: usize>(
    s: &Sim<P, W, S, N>,
) -> u32 {
    s.slots
        .iter()
        .map(|sl| match &sl.ep {
            Ep::Meta(_, app) => app.errors,
            Ep::Base(e) => e.errors,
            Ep::Dyn(e) => e.errors(),
        })
        .sum()
}

fn delivered_between<const P: usize, const W: usize, const S: usize, const N: usize>(
    s: &Sim<P, W, S, N>,
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

// ---------------------------------------------------------------- scenario 1
fn loss_goodput(tr: Transport, loss: f64, sc: Scale) -> f64 {
    let t = topo(1, 2, 1, 8);
    let dur = sc.t(3_000_000, 20_000_000);
    let mut s: Sim<8, 1, 4, 64> = Sim::new(t, legacy(), params(tr, 8, sc.seed, 50_000));
    s.add_flow(0, 1, u32::MAX);
    // Random loss on both receivers' downlinks: data to host 1, ACKs to host 0.
    let (d1, d0) = (s.fabric.host_down(0, 1), s.fabric.host_down(0, 0));
    s.fabric.ports[d1].loss = loss;
    s.fabric.ports[d0].loss = loss;
    s.run(dur);
    let d = delivered_between(&s, dur / 5, dur);
    d[0] / ((dur - dur / 5) as f64 * 1e-9)
}

fn scenario1(sc: Scale, rows: &mut Vec<Row>) {
    let losses = [0.0, 0.001, 0.01, 0.05, 0.10];
    let mut res = [[0f64; 5]; 2];
    for (ti, tr) in [Transport::Meta, Transport::Base].into_iter().enumerate() {
        for (i, l) in losses.iter().enumerate() {
            res[ti][i] = loss_goodput(tr, *l, sc);
        }
    }
    for (i, l) in losses.iter().enumerate() {
        let m = res[0][i] / res[0][0];
        let b = res[1][i] / res[1][0];
        let (target, met, guard) = match i {
            2 => ("≥ 95 %".to_string(), Some(m >= 0.95), Some(m >= 0.93)),
            4 => ("≥ 60 %".to_string(), Some(m >= 0.60), Some(m >= 0.55)),
            _ => ("—".to_string(), None, None),
        };
        rows.push(Row {
            num: "1",
            scenario: format!("1 flow, {} % random loss", l * 100.0),
            metric: "goodput / lossless",
            meta: format!("{:.1} % ({:.1} Gb/s)", m * 100.0, res[0][i] * 8e-9),
            base: format!("{:.1} % ({:.1} Gb/s)", b * 100.0, res[1][i] * 8e-9),
            target,
            met,
            guard,
        });
    }
}

// ---------------------------------------------------------------- scenario 2
struct Incast {
    rtts: Option<f64>,
    jain: f64,
    horizon_rtts: f64,
}

fn incast(tr: Transport, n: u32, sc: Scale) -> Incast {
    let t = topo(1, 9, 8, 8);
    let dur = sc.t(1_500_000, 5_000_000);
    let sample = 1_000;
    let mut s: Sim<8, 1, 4, 64> = Sim::new(t, legacy(), params(tr, 8, sc.seed, sample));
    for i in 0..n {
        s.add_flow(8 + i, 0, u32::MAX);
    }
    s.watch_link = Some(s.fabric.host_down(0, 0));
    s.run(dur);
    let fair = link_bps() / f64::from(n);
    let rtt = base_rtt();
    if std::env::var("SIM_DEBUG").is_ok() {
        for x in s.samples.iter().step_by(
            std::env::var("SIM_STEP")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(20),
        ) {
            let mn = x.rate.iter().cloned().fold(f64::INFINITY, f64::min);
            let mx = x.rate.iter().cloned().fold(0.0, f64::max);
            let tot: u64 = x.delivered.iter().sum();
            if std::env::var("SIM_RATES").is_ok() {
                let v: Vec<String> = x.rate.iter().map(|r| format!("{:.1}", r * 8e-9)).collect();
                eprintln!("   {}", v.join(" "));
            }
            eprintln!(
                "t={:>8} q={:>8} rate min {:.2} max {:.2} (fair {:.2}) Gb/s delivered {}",
                x.t,
                x.queue,
                mn * 8e-9,
                mx * 8e-9,
                fair * 8e-9,
                tot
            );
        }
        eprintln!(
            "drops at bottleneck {}",
            s.fabric.ports[s.fabric.host_down(0, 0)].stats.drops()
        );
    }
    let hold = (20.0 * rtt) as u64;
    let ok: Vec<bool> = s
        .samples
        .iter()
        .map(|x| x.queue < K && x.rate.iter().all(|r| (r - fair).abs() <= 0.1 * fair))
        .collect();
    let mut rtts = None;
    for (i, x) in s.samples.iter().enumerate() {
        if x.t + hold > dur {
            break;
        }
        let all = s.samples[i..]
            .iter()
            .zip(&ok[i..])
            .take_while(|(y, _)| y.t <= x.t + hold)
            .all(|(_, o)| *o);
        if all {
            rtts = Some(x.t as f64 / rtt);
            break;
        }
    }
    let d = delivered_between(&s, dur / 2, dur);
    let sum: f64 = d.iter().sum();
    let sq: f64 = d.iter().map(|x| x * x).sum();
    let jain = if sq > 0.0 {
        sum * sum / (d.len() as f64 * sq)
    } else {
        0.0
    };
    Incast {
        rtts,
        jain,
        horizon_rtts: (dur - hold) as f64 / rtt,
    }
}

fn scenario2(sc: Scale, rows: &mut Vec<Row>) {
    for n in [16u32, 64] {
        let m = incast(Transport::Meta, n, sc);
        let b = incast(Transport::Base, n, sc);
        let f = |x: &Incast| match x.rtts {
            Some(r) => format!("{r:.1} RTT, Jain {:.3}", x.jain),
            None => format!("> {:.0} RTT, Jain {:.3}", x.horizon_rtts, x.jain),
        };
        rows.push(Row {
            num: "2",
            scenario: format!("incast {n}→1"),
            metric: "RTTs to fair share ±10 % & queue < K; Jain",
            meta: f(&m),
            base: f(&b),
            target: "≤ 2 RTT, Jain ≥ 0.98".into(),
            met: Some(m.rtts.map(|r| r <= 2.0).unwrap_or(false) && m.jain >= 0.98),
            guard: Some(
                m.rtts
                    .map(|r| r <= if n <= 16 { 10.0 } else { 60.0 })
                    .unwrap_or(false)
                    && m.jain >= 0.95,
            ),
        });
    }
}

// ---------------------------------------------------------------- scenario 3
fn bisection(tr: Transport, sc: Scale) -> f64 {
    let t = topo(1, 2, 8, 8);
    let dur = sc.t(2_000_000, 20_000_000);
    let mut s: Sim<8, 1, 4, 64> = Sim::new(t, legacy(), params(tr, 8, sc.seed, 50_000));
    for i in 0..8 {
        s.add_flow(i, 8 + i, u32::MAX);
    }
    s.run(dur);
    let d = delivered_between(&s, dur / 4, dur);
    let agg = d.iter().sum::<f64>() / ((dur - dur / 4) as f64 * 1e-9);
    agg / (8.0 * link_bps())
}

fn scenario3(sc: Scale, rows: &mut Vec<Row>) {
    let m = bisection(Transport::Meta, sc);
    let b = bisection(Transport::Base, sc);
    rows.push(Row {
        num: "3",
        scenario: "8 flows over 8 uplinks".into(),
        metric: "aggregate / bisection",
        meta: format!("{:.1} %", m * 100.0),
        base: format!("{:.1} %", b * 100.0),
        target: "≥ 90 %".into(),
        met: Some(m >= 0.90),
        guard: Some(m >= 0.85),
    });
}

// ---------------------------------------------------------------- scenario 4
fn planes_tput(tr: Transport, planes: u8, sc: Scale) -> f64 {
    let t = topo(planes, 2, 8, 8);
    let dur = sc.t(1_500_000, 10_000_000);
    let paths = (8 * planes).min(64);
    let mut s: Sim<64, 8, 4, 512> = Sim::new(t, legacy(), params(tr, paths, sc.seed, 50_000));
    for i in 0..8 {
        s.add_flow(i, 8 + i, u32::MAX);
    }
    s.run(dur);
    let d = delivered_between(&s, dur / 3, dur);
    d.iter().sum::<f64>() / ((dur - dur / 3) as f64 * 1e-9)
}

fn scenario4(sc: Scale, rows: &mut Vec<Row>) {
    let mut m1 = 0.0;
    let mut b1 = 0.0;
    for p in [1u8, 2, 4, 8] {
        let m = planes_tput(Transport::Meta, p, sc);
        let b = planes_tput(Transport::Base, p, sc);
        if p == 1 {
            m1 = m;
            b1 = b;
        }
        let ms = m / (f64::from(p) * m1);
        let bs = b / (f64::from(p) * b1);
        rows.push(Row {
            num: "4",
            scenario: format!("{p} plane(s), 8 flows, {} paths/conn", (8 * p).min(64)),
            metric: "aggregate (× linear from 1 plane)",
            meta: format!("{:.0} Gb/s ({:.2}×)", m * 8e-9, ms),
            base: format!("{:.0} Gb/s ({:.2}×)", b * 8e-9, bs),
            target: if p == 8 {
                "≥ 0.95× linear".into()
            } else {
                "—".into()
            },
            met: if p == 8 { Some(ms >= 0.95) } else { None },
            guard: if p == 8 { Some(ms >= 0.90) } else { None },
        });
    }
}

// ---------------------------------------------------------------- scenario 5
struct Failure {
    recover_ns: Option<u64>,
    errors: u32,
    stalled: usize,
}

fn failure(tr: Transport, plane: bool, sc: Scale) -> Failure {
    let planes = if plane { 4 } else { 1 };
    let t = topo(planes, 2, 8, 8);
    let dur = sc.t(3_000_000, 10_000_000);
    let tf = dur / 3;
    let paths = 8 * planes;
    let win = 20_000;
    let mut s: Sim<64, 8, 4, 512> = Sim::new(t, legacy(), params(tr, paths, sc.seed, win));
    for i in 0..8 {
        s.add_flow(i, 8 + i, u32::MAX);
    }
    let mut dead = Vec::new();
    if plane {
        dead.extend(s.fabric.topo.plane_links(1)); // every link of plane 1
    } else {
        // Fail the spine that the baseline's first flow hashes onto, so the baseline is
        // affected too (both transports see the same failure).
        let key = net::flow_key(0, 8, 1024 + sim::mix16(sc.seed));
        let l = s.fabric.route(0, 8, key).expect("leaf 0 routes to host 8");
        let spine = (l - s.fabric.up(0, 0, 0)) as u16;
        dead.push(s.fabric.up(0, 0, spine));
        dead.push(s.fabric.down(0, spine, 0));
        dead.push(s.fabric.up(0, 1, spine));
        dead.push(s.fabric.down(0, spine, 1));
    }
    s.fail_at(tf, dead);
    s.run(dur);
    let before = delivered_between(&s, tf / 2, tf).iter().sum::<f64>() / ((tf - tf / 2) as f64);
    let remaining = if plane { 0.75 } else { 7.0 / 8.0 };
    let goal = 0.9 * remaining * before;
    // Recovered: from this window on, three consecutive windows at >= goal.
    let mut rec = None;
    let w: Vec<(u64, f64)> = s
        .samples
        .windows(2)
        .filter(|p| p[0].t >= tf)
        .map(|p| {
            let a: u64 = p[0].delivered.iter().sum();
            let b: u64 = p[1].delivered.iter().sum();
            (p[0].t, (b - a) as f64 / (p[1].t - p[0].t) as f64)
        })
        .collect();
    for i in 0..w.len().saturating_sub(3) {
        if w[i..i + 3].iter().all(|x| x.1 >= goal) {
            rec = Some(w[i].0 - tf);
            break;
        }
    }
    let errors = total_errors(&s);
    // Flows that delivered nothing in the last sixth of the run are stalled (they will
    // end in a retry-exceeded error once their backoff runs out).
    let tail = delivered_between(&s, dur - dur / 6, dur);
    let stalled = tail.iter().filter(|x| **x == 0.0).count();
    Failure {
        recover_ns: rec,
        errors,
        stalled,
    }
}

fn scenario5(sc: Scale, rows: &mut Vec<Row>) {
    for plane in [false, true] {
        let m = failure(Transport::Meta, plane, sc);
        let b = failure(Transport::Base, plane, sc);
        let f = |x: &Failure| match x.recover_ns {
            Some(r) => format!(
                "{:.0} µs ({:.2} RTO), {} errors, {} flows stalled",
                r as f64 / 1e3,
                r as f64 / f64::from(MIN_RTO),
                x.errors,
                x.stalled
            ),
            None => format!(
                "not recovered, {} errors, {} flows stalled",
                x.errors, x.stalled
            ),
        };
        let ok = m
            .recover_ns
            .map(|r| r < 3 * u64::from(MIN_RTO))
            .unwrap_or(false)
            && m.errors == 0
            && m.stalled == 0;
        rows.push(Row {
            num: "5",
            scenario: if plane {
                "1 of 4 planes fails mid-transfer".into()
            } else {
                "1 of 8 spine uplinks fails mid-transfer".into()
            },
            metric: "time to ≥ 90 % of remaining capacity; app errors",
            meta: f(&m),
            base: f(&b),
            target: "< 3 RTO, 0 errors".into(),
            met: Some(ok),
            guard: Some(ok),
        });
    }
}

// ---------------------------------------------------------------- scenario 6
fn many(tr: Transport, sc: Scale) -> (f64, u64, u64, u32) {
    let t = topo(1, 2, 16, 8);
    let n = 16_000u32;
    let mut p = params(tr, 8, sc.seed, 0);
    p.msg_len = if sc.quick { 4096 } else { 16 * 1024 };
    p.streams = 1;
    let wall = WallClock::now();
    let mut s: Sim<8, 1, 4, 32> = Sim::new(t, legacy(), p);
    for i in 0..n {
        s.add_flow(0, 16 + i % 16, 1);
    }
    let dur = sc.t(50_000_000, 200_000_000);
    s.run(dur);
    let done = s
        .flows
        .iter()
        .filter(|(_, b)| match &s.slots[*b as usize].ep {
            Ep::Meta(_, app) => app.completed_msgs == 1,
            Ep::Base(e) => u64::from(e.epsn) * u64::from(MTU) >= u64::from(s.params.msg_len),
            Ep::Dyn(e) => e.completed_msgs() == 1,
        })
        .count() as u64;
    let errors = total_errors(&s);
    (wall.elapsed().as_secs_f64(), done, s.events, errors)
}

fn scenario6(sc: Scale, rows: &mut Vec<Row>) {
    let meta_bytes = std::mem::size_of::<metaroce_proto::DenseConnection>();
    let default_bytes = std::mem::size_of::<metaroce_proto::DefaultConnection>();
    let dense_tput = dense_single_flow(sc);
    let base_bytes = std::mem::size_of::<toy::BaseEnd>();
    let (mw, md, me, merr) = many(Transport::Meta, sc);
    let (bw, bd, be, berr) = many(Transport::Base, sc);
    rows.push(Row {
        num: "6",
        scenario: "16 000 connections on one node (8 paths, dense config)".into(),
        metric: "state bytes/conn; sim wall time",
        meta: format!(
            "{meta_bytes} B (default config {default_bytes} B); {mw:.1} s ({md}/16000 done, \
             {me} events, {merr} errors); dense single flow {:.1} Gb/s",
            dense_tput * 8e-9
        ),
        base: format!("{base_bytes} B; {bw:.1} s ({bd}/16000 done, {be} events, {berr} errors)"),
        target: "≤ 2048 B".into(),
        met: Some(meta_bytes <= 2048 && md == 16_000 && merr == 0),
        guard: Some(meta_bytes <= 2048 && default_bytes <= 2600 && md == 16_000 && merr == 0),
    });
}

/// Lossless single-flow goodput (bytes/s) of the dense configuration (32 in-flight
/// packets), to show it still fills a 100 Gb/s link.
fn dense_single_flow(sc: Scale) -> f64 {
    let t = topo(1, 2, 1, 8);
    let dur = sc.t(3_000_000, 20_000_000);
    let mut s: Sim<8, 1, 4, 32> =
        Sim::new(t, legacy(), params(Transport::Meta, 8, sc.seed, 50_000));
    s.add_flow(0, 1, u32::MAX);
    s.run(dur);
    let d = delivered_between(&s, dur / 5, dur);
    d[0] / ((dur - dur / 5) as f64 * 1e-9)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = !args.iter().any(|a| a == "--full");
    let check = args.iter().any(|a| a == "--check");
    KERNEL.store(
        args.iter().any(|a| a == "--kernel"),
        std::sync::atomic::Ordering::Relaxed,
    );
    let seed = args
        .iter()
        .position(|a| a == "--seed")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let only: Option<u32> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok());
    let sc = Scale { quick, seed };
    if args.iter().any(|a| a == "--scale") {
        scale::run(&args, params(Transport::Meta, 8, seed, 0));
        return;
    }
    let wall = WallClock::now();
    let mut rows = Vec::new();
    let run = |n: u32| only.map(|o| o == n).unwrap_or(true);
    let scenarios: [fn(Scale, &mut Vec<Row>); 6] = [
        scenario1, scenario2, scenario3, scenario4, scenario5, scenario6,
    ];
    for (n, scenario) in (1..).zip(scenarios) {
        if run(n) {
            scenario(sc, &mut rows);
        }
    }
    println!(
        "MetaRoCE simulator, {} scale, seed {seed}: {GBPS} Gb/s links, {DELAY} ns/hop, \
         queue {} KB, ECN K {} KB, MTU {MTU}, base RTT {:.1} µs, min RTO {} µs{}\n",
        if quick { "quick" } else { "full" },
        QLIMIT / 1000,
        K / 1000,
        base_rtt() / 1e3,
        params(Transport::Meta, 8, seed, 0).min_rto_ns / 1000,
        if kernel() {
            ", kernel configuration (--kernel: min RTO 4 ms (a tick), pacing slack 8 ms, \
             init RTO 20 ms, max RTO 500 ms)"
        } else {
            ""
        }
    );
    println!("| # | scenario | metric | MetaRoCE | RoCEv2-style baseline | target | met |");
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.num,
            r.scenario,
            r.metric,
            r.meta,
            r.base,
            r.target,
            match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            }
        );
    }
    println!(
        "\nsimulated in {:.1} s wall time",
        wall.elapsed().as_secs_f64()
    );
    if check {
        let bad: Vec<&Row> = rows.iter().filter(|r| r.guard == Some(false)).collect();
        for r in &bad {
            eprintln!(
                "simulator check: regression in '{}': {}",
                r.scenario, r.meta
            );
        }
        let missed = rows.iter().filter(|r| r.met == Some(false)).count();
        eprintln!(
            "simulator check: {} rows, {missed} targets missed (known), {} regressions",
            rows.len(),
            bad.len()
        );
        // The guards hold the simulator's configuration; --kernel reports only.
        if !bad.is_empty() && !kernel() {
            std::process::exit(1);
        }
    }
}
