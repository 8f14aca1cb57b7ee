//! Scenario 3: permutation traffic on a 2-tier fat tree at 1:1 and 2:1 oversubscription
//! (every host sends to one host on another leaf, a seeded permutation).
//!
//! * Aggregate goodput: long flows; payload placed from 1/4 of the run to its end, over
//!   the fabric's capacity for this traffic (hosts × 100 Gb/s / oversubscription).
//! * Flow completion times: the same permutation with one message of S bytes per flow,
//!   all posted at t = 0; p50/p99/p99.9 over every flow of every seed (n given; a p99.9
//!   from fewer than 1,000 flows is the maximum), and the ideal (S at the per-host share
//!   of the bottleneck, plus one base RTT).

use super::*;
use crate::stats::Tail;
use crate::workload::Workload;

fn fabric(sc: Scale, os: u16) -> FatTree {
    if sc.quick {
        FatTree::two_tier(4, 8, os)
    } else {
        FatTree::two_tier(8, 16, os)
    }
}

/// A seeded permutation as (sender, receiver) pairs in which no host sends within its
/// group of `group` consecutive hosts (its ToR: `hosts_per_tor`; its pod in a 3-tier
/// tree), so every flow crosses that tier.
pub fn pairs(ft: &FatTree, group: u32, seed: u64) -> Vec<(u32, u32)> {
    crate::scale::permutation(ft.hosts(), group, seed)
        .into_iter()
        .enumerate()
        .map(|(a, b)| (a as u32, b))
        .collect()
}

/// Aggregate goodput of the permutation [`pairs`]`(ft, group, seed)` over the capacity
/// for this traffic (`os`: the tree's total oversubscription).
pub fn goodput(v: Variant, ft: FatTree, group: u32, os: u16, seed: u64, dur: u64) -> f64 {
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 50_000);
    for (a, b) in pairs(&ft, group, seed) {
        add(&mut s, v, a, b, true, 0);
    }
    s.run(dur);
    let d: f64 = delivered_between(&s, dur / 4, dur).iter().sum();
    let cap = f64::from(ft.hosts()) * line_bytes() / f64::from(os);
    d / ((dur - dur / 4) as f64 * 1e-9) / cap
}

/// Flow completion times (ns) of one message of `bytes` per flow of the permutation
/// [`pairs`]`(ft, group, seed)`, and how many did not finish by `limit` (see
/// [`fct_tail`]).
pub fn fcts(
    v: Variant,
    ft: FatTree,
    group: u32,
    seed: u64,
    bytes: u64,
    limit: u64,
) -> (Vec<f64>, usize) {
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 0);
    let mut wl = Workload::new();
    for (a, b) in pairs(&ft, group, seed) {
        wl.push(a, b, bytes, 0, vec![], 0);
    }
    run_workload(&mut s, v, wl, limit);
    fct_tail(&s, limit)
}

/// The FCTs (ns) of a run's attached workload, a flow that did not finish counted as
/// `limit`, and how many did not finish.
pub fn fct_tail<const P: usize, const W: usize, const N: usize>(
    s: &Sim<P, W, N>,
    limit: u64,
) -> (Vec<f64>, usize) {
    let d = s.driver.as_ref().expect("attached");
    let unfinished = d.done_at.iter().filter(|x| x.is_none()).count();
    let mut f: Vec<f64> = d.fcts().into_iter().map(|x| x as f64).collect();
    f.extend(std::iter::repeat_n(limit as f64, unfinished));
    (f, unfinished)
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let dur = sc.t(1_000_000, 2_000_000);
    let bytes: u64 = if sc.quick { 512 << 10 } else { 2 << 20 };
    let limit = 20_000_000;
    let ft1 = fabric(sc, 1);
    let mut sec = Section::new(
        3,
        "Permutation on a 2-tier fat tree, 1:1 and 2:1",
        format!(
            "{} leaves × {} hosts ({} hosts), {} spines at 1:1 / {} at 2:1, 100 Gb/s, 1 µs/hop; \
             each host sends to a host on another leaf. Goodput: long flows, {:.0} ms, \
             payload placed from 1/4 of the run over hosts × 100 Gb/s / oversubscription. \
             FCT: one {} KiB message per flow, all at t = 0. Mean ± 95 % CI over {} seeds; \
             FCT percentiles pool every flow of every seed.",
            ft1.tors(),
            ft1.hosts_per_tor,
            ft1.hosts(),
            ft1.tor_uplinks,
            ft1.tor_uplinks / 2,
            dur as f64 / 1e6,
            bytes >> 10,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    for os in [1u16, 2] {
        let ft = fabric(sc, os);
        let tor = u32::from(ft.hosts_per_tor);
        let (mut row, m) = goodput_row(
            &vs,
            &seeds,
            mc,
            (ft, tor, os, dur),
            format!("permutation {os}:1, {} hosts", ft.hosts()),
        );
        row.guard = Some(m >= if os == 1 { 0.70 } else { 0.80 });
        sec.rows.push(row);
        let ideal = bytes as f64 * 8.0 / (LINE / f64::from(os)) * 1e9 + base_rtt();
        let tails = pooled_tails(&vs, &seeds, |v, sd| fcts(v, ft, tor, sd, bytes, limit));
        let mp99 = tails[mc].0.map(|t| t.p99 / ideal).unwrap_or(f64::INFINITY);
        sec.rows.push(Row {
            scenario: format!("permutation {os}:1, {} KiB flows", bytes >> 10),
            metric: format!("FCT p50 / p99 / p99.9 (ideal {:.0} µs)", ideal / 1e3),
            cells: tails.iter().map(tail_cell).collect(),
            target: "p99 ≤ 2 × ideal".into(),
            met: Some(mp99 <= 2.0),
            guard: Some(tails[mc].1 == 0 && mp99 <= 5.0),
        });
    }
    sec
}

/// The aggregate goodput a perfect single-path congestion control would reach on this
/// permutation: every baseline QP pinned to the path its UDP source port hashes onto
/// (the same ECMP hashes as the runs), rates max-min fair over those paths (progressive
/// filling), over the same capacity as [`goodput`]. The bound for any single-path
/// transport; multipath transports are not bound by it.
pub fn ecmp_maxmin_bound(ft: FatTree, group: u32, os: u16, seed: u64) -> f64 {
    let v = Variant::ROCE_LOSSY;
    let s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 0);
    let f = &s.fabric;
    let paths: Vec<Vec<usize>> = pairs(&ft, group, seed)
        .into_iter()
        .enumerate()
        .map(|(i, (a, b))| f.hashed_path(a, b, sport(i, seed)))
        .collect();
    let rate = maxmin(&paths, f.topo.links.len());
    rate.iter().sum::<f64>() / (f64::from(ft.hosts()) / f64::from(os))
}

/// Max-min fair rates (in units of one link's capacity, every link alike) of flows
/// pinned to `paths` (link indices) over `nl` links, by progressive filling.
pub fn maxmin(paths: &[Vec<usize>], nl: usize) -> Vec<f64> {
    let mut cap = vec![1.0f64; nl];
    let mut rate = vec![0.0f64; paths.len()];
    let mut frozen = vec![false; paths.len()];
    loop {
        let mut users = vec![0u32; nl];
        for (i, p) in paths.iter().enumerate() {
            if !frozen[i] {
                for &l in p {
                    users[l] += 1;
                }
            }
        }
        let Some((inc, _)) = (0..nl)
            .filter(|&l| users[l] > 0)
            .map(|l| (cap[l] / f64::from(users[l]), l))
            .min_by(|x, y| x.0.total_cmp(&y.0))
        else {
            break;
        };
        for (i, p) in paths.iter().enumerate() {
            if !frozen[i] {
                rate[i] += inc;
                for &l in p {
                    cap[l] -= inc;
                }
            }
        }
        for (i, p) in paths.iter().enumerate() {
            if !frozen[i] && p.iter().any(|&l| cap[l] < 1e-9) {
                frozen[i] = true;
            }
        }
    }
    rate
}

/// Per variant: the FCT tail of every flow of every seed pooled (`fcts(variant, seed)`
/// gives one run's FCTs and its unfinished count), and the unfinished flows summed.
pub fn pooled_tails(
    vs: &[Variant],
    seeds: &[u64],
    fcts: impl Fn(Variant, u64) -> (Vec<f64>, usize),
) -> Vec<(Option<Tail>, usize)> {
    vs.iter()
        .map(|&v| {
            let mut all = Vec::new();
            let mut unf = 0;
            for &sd in seeds {
                let (f, u) = fcts(v, sd);
                all.extend(f);
                unf += u;
            }
            (Tail::of(&all), unf)
        })
        .collect()
}

/// "p50 / p99 / p99.9 µs (n N[, U unfinished])", or a dash without flows.
pub fn tail_cell(t: &(Option<Tail>, usize)) -> String {
    match &t.0 {
        Some(x) => format!(
            "{:.0} / {:.0} / {:.0} µs (n {}{})",
            x.p50 / 1e3,
            x.p99 / 1e3,
            x.p999 / 1e3,
            x.n,
            if t.1 > 0 {
                format!(", {} unfinished", t.1)
            } else {
                String::new()
            }
        ),
        None => "—".into(),
    }
}

/// The goodput row of the permutation [`pairs`]`(ft, group, seed)` run for `dur` ns:
/// every variant over `seeds` (% of capacity, mean ± CI), the single-path ECMP bound in
/// the metric, target ≥ 90 % for column `mc` (no guard); and that column's mean as a
/// fraction.
pub fn goodput_row(
    vs: &[Variant],
    seeds: &[u64],
    mc: usize,
    (ft, group, os, dur): (FatTree, u32, u16, u64),
    scenario: String,
) -> (Row, f64) {
    let g: Vec<Vec<f64>> = vs
        .iter()
        .map(|v| {
            seeds
                .iter()
                .map(|&sd| goodput(*v, ft, group, os, sd, dur) * 100.0)
                .collect()
        })
        .collect();
    let m = mean(&g[mc]) / 100.0;
    let bound: Vec<f64> = seeds
        .iter()
        .map(|&sd| ecmp_maxmin_bound(ft, group, os, sd) * 100.0)
        .collect();
    let row = Row {
        scenario,
        metric: format!(
            "aggregate goodput / capacity (single-path ECMP bound {})",
            ci(&bound, 1, " %")
        ),
        cells: g.iter().map(|x| ci(x, 1, " %")).collect(),
        target: "≥ 90 %".into(),
        met: Some(m >= 0.90),
        guard: None,
    };
    (row, m)
}
