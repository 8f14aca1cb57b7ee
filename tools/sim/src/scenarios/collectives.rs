//! Scenario 4: collectives on a 2-tier 1:1 fat tree (quick: 4 leaves × 8 hosts and 16
//! ranks; full: 8 leaves × 8 hosts and 64 ranks; 8 spines),
//! one rank per host, ranks placed round-robin over the leaves so that every ring
//! neighbour is on another leaf. Long-lived connections/QPs, one per communicating pair
//! (as NCCL keeps them); a transfer is posted when the one it depends on has completed
//! at its receiver ([`crate::driver`]).
//!
//! * Ring all-reduce of S bytes: 2(N−1) steps of S/N bytes to the next rank.
//!   Ideal: 2(N−1) × (S/N at 100 Gb/s + one-way latency: 4 hops × 1 µs plus
//!   store-and-forward of one packet at 3 switches).
//! * All-to-all, all pairs posted at once, S/N bytes per pair (S per rank).
//!   Ideal: (N−1)·S/N at 100 Gb/s + one-way latency.
//!
//! Collective completion time = last completion − start, over the ideal (payload only:
//! no header overhead in the ideal, so 1.0 is unreachable; ~1.03 is line rate).

use super::*;
use crate::workload::{all_to_all, ring_allreduce};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Coll {
    Ring,
    AllToAll,
}

/// Quick: 4 leaves × 8 hosts; full: 8 leaves × 8 hosts; 8 spines (1:1).
pub fn fabric(quick: bool) -> FatTree {
    leaf_spine(1, if quick { 4 } else { 8 }, 8, 8)
}

fn one_way(bytes: u64) -> f64 {
    let pkt = bytes.min(u64::from(MTU)) as f64 + 82.0;
    4.0 * DELAY as f64 + 3.0 * pkt * 8.0 / GBPS as f64
}

pub fn ideal_ns(c: Coll, n: u64, bytes: u64) -> f64 {
    let ser = |b: u64| b as f64 * 8.0 / GBPS as f64;
    let chunk = bytes / n;
    match c {
        Coll::Ring => 2.0 * (n - 1) as f64 * (ser(chunk) + one_way(chunk)),
        Coll::AllToAll => (n - 1) as f64 * ser(chunk) + one_way(chunk),
    }
}

/// Completion time of one collective (ns), None if it did not finish by `limit`.
pub fn cct(v: Variant, c: Coll, n: u32, bytes: u64, seed: u64, limit: u64) -> Option<u64> {
    let ft = fabric(n <= 32);
    let leaves = ft.tors();
    let per = u32::from(ft.hosts_per_tor);
    let ranks: Vec<u32> = (0..n).map(|i| (i % leaves) * per + i / leaves).collect();
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 0);
    let wl = match c {
        Coll::Ring => ring_allreduce(&ranks, bytes, 0, 0),
        Coll::AllToAll => all_to_all(&ranks, bytes / u64::from(n), 0, 0),
    };
    run_workload(&mut s, v, wl, limit);
    s.driver.as_ref().and_then(|d| d.group_time(0))
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let n: u32 = if sc.quick { 16 } else { 64 };
    let ft = fabric(sc.quick);
    let sizes: Vec<u64> = if sc.quick {
        vec![64 << 10, 1 << 20]
    } else {
        vec![64 << 10, 1 << 20, 16 << 20]
    };
    let mut sec = Section::new(
        4,
        "Collectives: ring all-reduce and all-to-all",
        format!(
            "{} leaves × 8 hosts, 8 spines (1:1), 100 Gb/s, 1 µs/hop; {n} ranks, one per host, \
             round-robin over the leaves; one connection/QP per communicating pair. \
             Collective completion time over the ideal bound (payload at line rate plus \
             per-step latency); mean ± 95 % CI over {} seeds; 'not done' if any seed did \
             not finish within 20 × ideal + 5 ms.",
            ft.tors(),
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    for c in [Coll::Ring, Coll::AllToAll] {
        for &b in &sizes {
            let ideal = ideal_ns(c, u64::from(n), b);
            let limit = (20.0 * ideal) as u64 + 5_000_000;
            let mut cells = Vec::new();
            let mut m = f64::INFINITY;
            for (j, v) in vs.iter().enumerate() {
                let xs: Vec<Option<u64>> = seeds
                    .iter()
                    .map(|&sd| cct(*v, c, n, b, sd, limit))
                    .collect();
                let done: Vec<f64> = xs.iter().flatten().map(|&t| t as f64 / ideal).collect();
                if j == mc && done.len() == xs.len() {
                    m = mean(&done);
                }
                cells.push(if done.len() == xs.len() {
                    format!(
                        "{}× ({:.0} µs)",
                        ci(&done, 2, ""),
                        mean(&done) * ideal / 1e3
                    )
                } else {
                    format!("not done ({}/{} seeds)", done.len(), xs.len())
                });
            }
            let name = match c {
                Coll::Ring => "ring all-reduce",
                Coll::AllToAll => "all-to-all",
            };
            sec.rows.push(Row {
                scenario: format!("{name}, {} KiB", b >> 10),
                metric: format!("completion / ideal ({:.0} µs)", ideal / 1e3),
                cells,
                target: "≤ 1.5×".into(),
                met: Some(m <= 1.5),
                guard: Some(m <= 4.0),
            });
        }
    }
    sec
}
