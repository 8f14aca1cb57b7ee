//! Scenario 9: permutation on a 3-tier fat tree (ToR–aggregation–core) at 1:1 and 4:1
//! (2:1 at the ToR × 2:1 at the aggregation switch). Every host sends to a host in
//! another pod, so every flow crosses the core and meets both oversubscribed tiers.
//!
//! Full scale: 4 pods × 4 ToRs × 4 hosts (64 hosts); 1:1 has 4 aggregation switches per
//! pod and 16 cores, 4:1 has 2 aggregation switches per pod and 4 cores. Quick: 4 pods
//! × 2 ToRs × 4 hosts (32 hosts). The 1,024-host tree's goodput rows are in scenario 14
//! ([`super::large`]); the FCT rows here need every column and seed at this size.
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

/// The tree: 4 pods of `tors` ToRs × 4 hosts, `tos`:1 at the ToR, `aos`:1 at the
/// aggregation switch.
pub fn fabric(tors: u16, tos: u16, aos: u16) -> FatTree {
    tree(4, tors, 4, tos, aos)
}

/// A 3-tier tree at the scenarios' link speed and delay: `pods` pods × `tors` ToRs ×
/// `hosts` hosts, `tos`:1 at the ToR, `aos`:1 at the aggregation switch.
pub fn tree(pods: u16, tors: u16, hosts: u16, tos: u16, aos: u16) -> FatTree {
    FatTree {
        host_gbps: GBPS,
        fabric_gbps: GBPS,
        host_delay_ns: DELAY,
        fabric_delay_ns: DELAY,
        ..FatTree::three_tier(pods, tors, hosts, tos, aos)
    }
}

/// Hosts per pod: no flow stays within its pod, so every flow crosses the core.
pub fn per_pod(ft: &FatTree) -> u32 {
    u32::from(ft.hosts_per_tor) * u32::from(ft.tors_per_pod)
}

/// Every host to a host in another pod (a seeded permutation).
#[cfg(test)]
pub fn pairs(ft: &FatTree, seed: u64) -> Vec<(u32, u32)> {
    permutation::pairs(ft, per_pod(ft), seed)
}

/// Aggregate goodput over the capacity for this traffic (`os` = total oversubscription).
#[cfg(test)]
pub fn goodput(v: Variant, ft: FatTree, os: u16, seed: u64, dur: u64) -> f64 {
    permutation::goodput(v, ft, per_pod(&ft), os, seed, dur)
}

/// FCTs (ns) of one message of `bytes` per flow; unfinished flows count as `limit`.
pub fn fcts(v: Variant, ft: FatTree, seed: u64, bytes: u64, limit: u64) -> (Vec<f64>, usize) {
    permutation::fcts(v, ft, per_pod(&ft), seed, bytes, limit)
}

/// The single-path ECMP bound of [`goodput`]: every flow pinned to the path its
/// baseline QP's source port hashes onto, max-min fair over those paths.
#[cfg(test)]
pub fn ecmp_bound(ft: FatTree, os: u16, seed: u64) -> f64 {
    permutation::ecmp_maxmin_bound(ft, per_pod(&ft), os, seed)
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
             seed. Scaled down from 1,024 hosts so that every column and seed runs in the \
             --full budget; scenario 14 has the 1,024-host tree's goodput rows.",
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
        let (row, _) = permutation::goodput_row(
            &vs,
            &seeds,
            mc,
            (ft, per_pod(&ft), os, dur),
            format!("3-tier permutation {os}:1, {} hosts", ft.hosts()),
        );
        sec.rows.push(row);
        let ideal = bytes as f64 * 8.0 / (LINE / f64::from(os)) * 1e9 + rtt_3tier();
        let tails = permutation::pooled_tails(&vs, &seeds, |v, sd| fcts(v, ft, sd, bytes, limit));
        let mp99 = tails[mc].0.map(|t| t.p99 / ideal).unwrap_or(f64::INFINITY);
        sec.rows.push(Row {
            scenario: format!("3-tier permutation {os}:1, {} KiB flows", bytes >> 10),
            metric: format!("FCT p50 / p99 / p99.9 (ideal {:.0} µs)", ideal / 1e3),
            cells: tails.iter().map(permutation::tail_cell).collect(),
            target: "p99 ≤ 2 × ideal".into(),
            met: Some(mp99 <= 2.0),
            guard: None,
        });
    }
    sec
}
