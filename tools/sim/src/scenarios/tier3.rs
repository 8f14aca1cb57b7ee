//! Scenario 9: permutation on a 3-tier fat tree (ToR–aggregation–core) at 1:1 and 4:1
//! (2:1 at the ToR × 2:1 at the aggregation switch). Every host sends to a host in
//! another pod, so every flow crosses the core and meets both oversubscribed tiers.
//!
//! Full scale: 4 pods × 4 ToRs × 4 hosts (64 hosts); 1:1 has 4 aggregation switches per
//! pod and 16 cores, 4:1 has 2 aggregation switches per pod and 4 cores. Quick: 4 pods
//! × 2 ToRs × 4 hosts (32 hosts). A 1,024-host tree (`--scale --tiers 3`) takes minutes
//! of CPU per run and transport; here every column and seed must run.
//!
//! * Aggregate goodput: long flows; payload placed from 1/4 of the run to its end over
//!   the capacity for this traffic (hosts × 100 Gb/s / (ToR × aggregation
//!   oversubscription)), with the single-path ECMP bound (every baseline QP pinned to
//!   its hashed path, max-min fair rates; [`permutation::maxmin`]).
//! * FCT: the same permutation with one message of S bytes per flow, all at t = 0;
//!   p50/p99/p99.9 pooled over flows and seeds (a p99.9 from fewer than 1,000 flows is
//!   the maximum), and the ideal (S at the host's share of the bottleneck + base RTT of
//!   the 6-hop path).

use super::*;
use crate::stats::Tail;
use crate::workload::Workload;

/// The tree: 4 pods of `tors` ToRs × 4 hosts, `tos`:1 at the ToR, `aos`:1 at the
/// aggregation switch.
pub fn fabric(tors: u16, tos: u16, aos: u16) -> FatTree {
    FatTree {
        host_gbps: GBPS,
        fabric_gbps: GBPS,
        host_delay_ns: DELAY,
        fabric_delay_ns: DELAY,
        ..FatTree::three_tier(4, tors, 4, tos, aos)
    }
}

/// Every host to a host in another pod (a seeded permutation).
pub fn pairs(ft: &FatTree, seed: u64) -> Vec<(u32, u32)> {
    let per_pod = u32::from(ft.hosts_per_tor) * u32::from(ft.tors_per_pod);
    crate::scale::permutation(ft.hosts(), per_pod, seed)
        .into_iter()
        .enumerate()
        .map(|(a, b)| (a as u32, b))
        .collect()
}

/// Aggregate goodput over the capacity for this traffic (`os` = total oversubscription).
pub fn goodput(v: Variant, ft: FatTree, os: u16, seed: u64, dur: u64) -> f64 {
    let mut s: Sim<8, 1, 4, 64> = sim(v, ft, 8, seed, 50_000);
    for (a, b) in pairs(&ft, seed) {
        add(&mut s, v, a, b, true, 0);
    }
    s.run(dur);
    let d: f64 = delivered_between(&s, dur / 4, dur).iter().sum();
    let cap = f64::from(ft.hosts()) * line_bytes() / f64::from(os);
    d / ((dur - dur / 4) as f64 * 1e-9) / cap
}

/// FCTs (ns) of one message of `bytes` per flow; unfinished flows count as `limit`.
pub fn fcts(v: Variant, ft: FatTree, seed: u64, bytes: u64, limit: u64) -> (Vec<f64>, usize) {
    let mut s: Sim<8, 1, 4, 64> = sim(v, ft, 8, seed, 0);
    let mut wl = Workload::new();
    for (a, b) in pairs(&ft, seed) {
        wl.push(a, b, bytes, 0, vec![], 0);
    }
    run_workload(&mut s, v, wl, limit);
    let d = s.driver.as_ref().expect("attached");
    let unfinished = d.done_at.iter().filter(|x| x.is_none()).count();
    let mut f: Vec<f64> = d.fcts().into_iter().map(|x| x as f64).collect();
    f.extend(std::iter::repeat_n(limit as f64, unfinished));
    (f, unfinished)
}

/// The single-path ECMP bound of [`goodput`]: every flow pinned to the path its
/// baseline QP's source port hashes onto, max-min fair over those paths.
pub fn ecmp_bound(ft: FatTree, os: u16, seed: u64) -> f64 {
    let s: Sim<8, 1, 4, 64> = sim(Variant::ROCE_LOSSY, ft, 8, seed, 0);
    let f = &s.fabric;
    let paths: Vec<Vec<usize>> = pairs(&ft, seed)
        .into_iter()
        .enumerate()
        .map(|(i, (a, b))| {
            let sp = sport(i, seed);
            let key = crate::net::flow_key(a, b, sp);
            let mut l = f.host_up(f.plane_of(sp), a);
            let mut path = vec![l];
            while let Node::Switch(sw) = f.topo.links[l].to {
                l = f.route(sw, b, key).expect("routed");
                path.push(l);
            }
            path
        })
        .collect();
    let rate = permutation::maxmin(&paths, f.topo.links.len());
    rate.iter().sum::<f64>() / (f64::from(ft.hosts()) / f64::from(os))
}

/// Unloaded round trip over the 6 hops of a cross-pod path, ns.
pub fn rtt_3tier() -> f64 {
    let ser = |b: u32| f64::from(b) * 8.0 / GBPS as f64;
    12.0 * DELAY as f64 + 6.0 * ser(MTU + 60 + OVERHEAD) + 6.0 * ser(68 + OVERHEAD)
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let tors = if sc.quick { 2 } else { 4 };
    let dur = sc.t(600_000, 1_000_000);
    let bytes: u64 = if sc.quick { 256 << 10 } else { 1 << 20 };
    let limit = 20_000_000;
    let ft1 = fabric(tors, 1, 1);
    let ft4 = fabric(tors, 2, 2);
    let mut sec = Section::new(
        9,
        "Permutation on a 3-tier fat tree, 1:1 and 4:1",
        format!(
            "4 pods × {tors} ToRs × 4 hosts ({} hosts); 1:1: {} aggregation switches per pod, \
             {} cores; 4:1 (2:1 at the ToR × 2:1 at the aggregation switch): {} per pod, {} \
             cores; 100 Gb/s, 1 µs/hop, cross-pod RTT {:.1} µs. Every host sends to a host in \
             another pod. Goodput: long flows, {:.1} ms, payload placed from 1/4 of the run \
             over hosts × 100 Gb/s / oversubscription. FCT: one {} KiB message per flow, all \
             at t = 0. Mean ± 95 % CI over {} seeds; FCT percentiles pool every flow of every \
             seed. Scaled down from the issue's 1,024 hosts (`--scale --tiers 3`) so that \
             every column and seed runs in the --full budget.",
            ft1.hosts(),
            ft1.tor_uplinks,
            ft1.cores(),
            ft4.tor_uplinks,
            ft4.cores(),
            rtt_3tier() / 1e3,
            dur as f64 / 1e6,
            bytes >> 10,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    for (ft, os) in [(ft1, 1u16), (ft4, 4)] {
        let g: Vec<Vec<f64>> = vs
            .iter()
            .map(|v| {
                seeds
                    .iter()
                    .map(|&sd| goodput(*v, ft, os, sd, dur) * 100.0)
                    .collect()
            })
            .collect();
        let m = mean(&g[mc]) / 100.0;
        let bound: Vec<f64> = seeds
            .iter()
            .map(|&sd| ecmp_bound(ft, os, sd) * 100.0)
            .collect();
        sec.rows.push(Row {
            scenario: format!("3-tier permutation {os}:1, {} hosts", ft.hosts()),
            metric: format!(
                "aggregate goodput / capacity (single-path ECMP bound {})",
                ci(&bound, 1, " %")
            ),
            cells: g.iter().map(|x| ci(x, 1, " %")).collect(),
            target: "≥ 90 %".into(),
            met: Some(m >= 0.90),
            guard: None,
        });
        let ideal = bytes as f64 * 8.0 / (LINE / f64::from(os)) * 1e9 + rtt_3tier();
        let tails: Vec<(Option<Tail>, usize)> = vs
            .iter()
            .map(|v| {
                let mut all = Vec::new();
                let mut unf = 0;
                for &sd in &seeds {
                    let (f, u) = fcts(*v, ft, sd, bytes, limit);
                    all.extend(f);
                    unf += u;
                }
                (Tail::of(&all), unf)
            })
            .collect();
        let mp99 = tails[mc].0.map(|t| t.p99 / ideal).unwrap_or(f64::INFINITY);
        sec.rows.push(Row {
            scenario: format!("3-tier permutation {os}:1, {} KiB flows", bytes >> 10),
            metric: format!("FCT p50 / p99 / p99.9 (ideal {:.0} µs)", ideal / 1e3),
            cells: tails.iter().map(tail_cell).collect(),
            target: "p99 ≤ 2 × ideal".into(),
            met: Some(mp99 <= 2.0),
            guard: None,
        });
    }
    sec
}

/// "p50 / p99 / p99.9 µs (n, unfinished)".
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
