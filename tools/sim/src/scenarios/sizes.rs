//! Scenario 10: collective message sizes outside scenario 4's 64 KiB–16 MiB, for the
//! ring and the halving-doubling (Rabenseifner) all-reduce.
//!
//! * Latency-bound: 8 B and 4 KiB over 8 ranks (ring chunks of 1 B and 512 B;
//!   halving-doubling halves down to 1 B and 512 B), where completion time is the
//!   per-step latency: 2(N−1) = 14 steps for the ring, 2·log2 N = 6 for
//!   halving-doubling.
//! * Bandwidth-bound: 256 MiB over 4 ranks (quick: 4 MiB), and at full scale 1 GiB
//!   over 8 ranks (each rank moves 2(N−1)/N × S = 1.75 GiB, 150 ms of line rate: about
//!   3 s of CPU a run, so 3 seeds instead of 5).
//!
//! Fabric: scenario 4's quick fabric, 4 leaves × 8 hosts, 8 spines (1:1); ranks placed
//! round-robin over the leaves (8 ranks: two per leaf; ring neighbours on different
//! leaves; halving-doubling's step with partner i ^ 4 stays on the leaf). One
//! connection/QP per communicating pair; a step is posted when the transfer it waits for
//! completed at its receiver.
//!
//! Ideal ([`ideal_ns`]): the longest dependency chain, each step costing its bytes at
//! 100 Gb/s plus the one-way latency of one packet on its path (4 hops × 1 µs and
//! store-and-forward at 3 switches across a spine, 2 hops and 1 switch within a leaf);
//! payload only.

use super::*;
use crate::workload::{halving_doubling_allreduce, ring_allreduce, Workload};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Algo {
    Ring,
    HalvingDoubling,
}

impl Algo {
    pub fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring all-reduce",
            Algo::HalvingDoubling => "halving-doubling all-reduce",
        }
    }
    /// Dependent steps of the algorithm over `n` ranks.
    pub fn steps(self, n: u64) -> u64 {
        match self {
            Algo::Ring => 2 * (n - 1),
            Algo::HalvingDoubling => 2 * u64::from(n.trailing_zeros()),
        }
    }
}

/// One-way latency of the first packet of a `bytes` transfer over `hops` links (the
/// store-and-forward of one packet at each of the `hops − 1` switches).
fn one_way(bytes: u64, hops: u32) -> f64 {
    let pkt = bytes.min(u64::from(MTU)) as f64 + 82.0;
    f64::from(hops) * DELAY as f64 + f64::from(hops - 1) * pkt * 8.0 / GBPS as f64
}

/// The ideal completion time (ns) of a workload on `ft`: the longest dependency chain,
/// each transfer costing its bytes at 100 Gb/s plus the one-way latency of its path
/// (2 hops within a leaf, 4 across a spine). Ranks send one transfer per step, so no
/// two transfers of a step share a NIC.
pub fn ideal_ns(wl: &Workload, ft: &FatTree) -> f64 {
    let mut done = vec![0.0f64; wl.len()];
    for t in &wl.transfers {
        let hops = if ft.tor_of(t.src) == ft.tor_of(t.dst) {
            2
        } else {
            4
        };
        let ready = t.after.iter().map(|&a| done[a]).fold(0.0, f64::max);
        done[t.id] = ready + t.bytes as f64 * 8.0 / GBPS as f64 + one_way(t.bytes, hops);
    }
    done.into_iter().fold(0.0, f64::max)
}

/// The workload of one all-reduce of `bytes` per rank over `n` ranks on `ft`.
pub fn workload(ft: &FatTree, a: Algo, n: u32, bytes: u64) -> Workload {
    let r = ranks(ft, n);
    match a {
        Algo::Ring => ring_allreduce(&r, bytes, 0, 0),
        Algo::HalvingDoubling => halving_doubling_allreduce(&r, bytes, 0, 0),
    }
}

/// Ranks round-robin over the leaves of `ft`.
pub fn ranks(ft: &FatTree, n: u32) -> Vec<u32> {
    let leaves = ft.tors();
    let per = u32::from(ft.hosts_per_tor);
    (0..n).map(|i| (i % leaves) * per + i / leaves).collect()
}

/// Completion time (ns) of one all-reduce, None if it did not finish by `limit`; and
/// the workload's dependency depth (its step count).
pub fn cct(v: Variant, a: Algo, n: u32, bytes: u64, seed: u64, limit: u64) -> (Option<u64>, usize) {
    let ft = collectives::fabric(true);
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 0);
    let wl = workload(&ft, a, n, bytes);
    let depth = wl.depth();
    run_workload(&mut s, v, wl, limit);
    (s.driver.as_ref().and_then(|d| d.group_time(0)), depth)
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let big: u64 = if sc.quick { 4 << 20 } else { 256 << 20 };
    let mut cases: Vec<(u32, u64)> = vec![(8, 8), (8, 4 << 10), (4, big)];
    if !sc.quick {
        cases.push((8, 1 << 30));
    }
    // The 1 GiB rows: 3 seeds (about 3 s of CPU a run).
    let seeds_for = |b: u64| -> &[u64] {
        if b >= 1 << 30 {
            &seeds[..seeds.len().min(3)]
        } else {
            &seeds
        }
    };
    let ft = collectives::fabric(true);
    let mut sec = Section::new(
        10,
        &format!(
            "Collective sizes 8 B–{}: ring and halving-doubling all-reduce",
            if sc.quick { "4 MiB" } else { "1 GiB" }
        ),
        format!(
            "4 leaves × 8 hosts, 8 spines (1:1), 100 Gb/s, 1 µs/hop; ranks round-robin over \
             the leaves, one connection/QP per communicating pair. 8 B and 4 KiB over 8 ranks \
             (latency-bound: 14 ring steps, 6 halving-doubling steps); {} MiB over 4 ranks{} \
             (bandwidth-bound). Completion time over the ideal (per step: payload at line \
             rate + one-way latency); mean ± 95 % CI over {} seeds{}; 'not done' if a seed \
             did not finish within 20 × ideal + 5 ms.",
            big >> 20,
            if sc.quick {
                ""
            } else {
                " and 1 GiB over 8 ranks"
            },
            seeds.len(),
            if sc.quick { "" } else { " (3 for 1 GiB)" }
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    for a in [Algo::Ring, Algo::HalvingDoubling] {
        for &(n, b) in &cases {
            let ideal = ideal_ns(&workload(&ft, a, n, b), &ft);
            let limit = (20.0 * ideal) as u64 + 5_000_000;
            let cols: Vec<Vec<Option<f64>>> = vs
                .iter()
                .map(|v| {
                    seeds_for(b)
                        .iter()
                        .map(|&sd| cct(*v, a, n, b, sd, limit).0.map(|t| t as f64 / ideal))
                        .collect()
                })
                .collect();
            let (cells, m) = ratio_cells(&cols, ideal, mc);
            let size = if b >= 1 << 30 {
                format!("{} GiB", b >> 30)
            } else if b >= 1 << 20 {
                format!("{} MiB", b >> 20)
            } else if b >= 1 << 10 {
                format!("{} KiB", b >> 10)
            } else {
                format!("{b} B")
            };
            sec.rows.push(Row {
                scenario: format!("{}, {size}, {n} ranks", a.name()),
                metric: format!(
                    "completion / ideal ({} steps, {:.1} µs)",
                    a.steps(u64::from(n)),
                    ideal / 1e3
                ),
                cells,
                target: "≤ 1.5×".into(),
                met: Some(m <= 1.5),
                guard: Some(m <= 2.0),
            });
        }
    }
    sec
}
