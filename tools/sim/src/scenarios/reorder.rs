//! Scenario 12: in-path reordering. Every switch egress link (leaf uplinks, spine
//! downlinks, leaf-to-host links; data and ACKs alike) delays a packet by 5 µs (about
//! half the base RTT) with probability p, so it arrives behind packets sent after it on
//! the same path; nothing is lost. 2 leaves × 8 hosts, 8 spines; 8 flows leaf 0 →
//! leaf 1.
//!
//! * Goodput: 8 long flows, payload placed from 1/4 of the run, over 8 × 100 Gb/s.
//! * FCT: each flow carries 16 messages of 256 KiB one after another (a message is
//!   posted when the previous one completed at the receiver); p50/p99/p99.9 pooled over
//!   messages and seeds.

use super::*;
use crate::stats::Tail;
use crate::workload::Workload;

/// Extra delay of a reordered packet, ns.
pub const REORDER_NS: u64 = 5_000;
const MSGS: usize = 16;
const MSG: u64 = 256 << 10;

fn setup<const P: usize, const W: usize, const N: usize>(s: &mut Sim<P, W, N>, p: f64) {
    for (l, spec) in s.fabric.topo.links.iter().enumerate() {
        if let Node::Switch(_) = spec.from {
            s.fabric.ports[l].reorder_p = p;
            s.fabric.ports[l].reorder_ns = REORDER_NS;
        }
    }
}

/// Aggregate goodput of 8 long flows over 8 × line rate.
pub fn goodput(v: Variant, p: f64, seed: u64, dur: u64) -> f64 {
    let mut s: Sim<8, 1, 64> = sim(v, leaf_spine(1, 2, 8, 8), 8, seed, 50_000);
    setup(&mut s, p);
    for i in 0..8 {
        add(&mut s, v, i, 8 + i, true, 0);
    }
    s.run(dur);
    let d: f64 = delivered_between(&s, dur / 4, dur).iter().sum();
    d / ((dur - dur / 4) as f64 * 1e-9) / (8.0 * line_bytes())
}

/// Message completion times (ns); unfinished messages count as `limit`.
pub fn fcts(v: Variant, p: f64, seed: u64, limit: u64) -> (Vec<f64>, usize) {
    let mut s: Sim<8, 1, 64> = sim(v, leaf_spine(1, 2, 8, 8), 8, seed, 0);
    setup(&mut s, p);
    let mut wl = Workload::new();
    for i in 0..8 {
        let mut prev = None;
        for _ in 0..MSGS {
            prev = Some(wl.push(i, 8 + i, MSG, 0, prev.into_iter().collect(), 0));
        }
    }
    run_workload(&mut s, v, wl, limit);
    super::permutation::fct_tail(&s, limit)
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let dur = sc.t(500_000, 1_000_000);
    let limit = 20_000_000;
    let mut sec = Section::new(
        12,
        "In-path reordering: every switch egress delays a fraction p of packets by 5 µs",
        format!(
            "2 leaves × 8 hosts, 8 spines, 100 Gb/s, 1 µs/hop; p of the packets leaving every \
             switch port (data and ACKs) take {} µs extra, none is lost. Goodput: 8 long flows \
             leaf 0 → leaf 1, {:.1} ms, payload placed from 1/4 of the run over 8 × 100 Gb/s. \
             FCT: the same 8 pairs, {MSGS} messages of {} KiB each one after another. Mean ± \
             95 % CI over {} seeds; FCT percentiles pool every message of every seed.",
            REORDER_NS / 1000,
            dur as f64 / 1e6,
            MSG >> 10,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    let mut base = 0.0;
    for p in [0.0, 0.01, 0.1] {
        let g: Vec<Vec<f64>> = vs
            .iter()
            .map(|v| {
                seeds
                    .iter()
                    .map(|&sd| goodput(*v, p, sd, dur) * 100.0)
                    .collect()
            })
            .collect();
        let m = mean(&g[mc]);
        if p == 0.0 {
            base = m;
        }
        let rel = m / base.max(1e-9);
        sec.rows.push(Row {
            scenario: format!("{} % of packets reordered", p * 100.0),
            metric: "aggregate goodput / 8 × 100 Gb/s".into(),
            cells: g.iter().map(|x| ci(x, 1, " %")).collect(),
            target: if p > 0.0 {
                "MetaRoCE ≥ 95 % of its 0 % figure".into()
            } else {
                "—".into()
            },
            met: (p > 0.0).then_some(rel >= 0.95),
            guard: None,
        });
        let ideal = MSG as f64 * 8.0 / LINE * 1e9 + base_rtt();
        let cells = vs
            .iter()
            .map(|v| {
                let mut all = Vec::new();
                let mut unf = 0;
                for &sd in &seeds {
                    let (f, u) = fcts(*v, p, sd, limit);
                    all.extend(f);
                    unf += u;
                }
                super::permutation::tail_cell(&(Tail::of(&all), unf))
            })
            .collect();
        sec.rows.push(Row {
            scenario: format!("{} % of packets reordered", p * 100.0),
            metric: format!(
                "{} KiB message FCT p50 / p99 / p99.9 (ideal {:.0} µs)",
                MSG >> 10,
                ideal / 1e3
            ),
            cells,
            target: "—".into(),
            met: None,
            guard: None,
        });
    }
    sec
}
