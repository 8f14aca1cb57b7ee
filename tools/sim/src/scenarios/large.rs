//! Scenario 14: the permutation of scenario 3 at the scale, 1,024 hosts, every
//! column: on a 2-tier fat tree (32 leaves × 32 hosts; 32 spines at 1:1, 8 at 4:1) and
//! on a 3-tier one (16 pods × 8 ToRs × 8 hosts; 1:1 with 8 aggregation switches per
//! pod and 64 cores, 4:1 as 2:1 at the ToR × 2:1 at the aggregation switch, 4 per pod
//! and 16 cores; every flow leaves its pod, as in scenario 9).
//!
//! Aggregate goodput only (long flows; payload placed from 1/4 of the run to its end
//! over hosts × 100 Gb/s / oversubscription), with the single-path ECMP bound of
//! [`permutation::ecmp_maxmin_bound`]. One 1 ms run is about 4 s of CPU on the
//! development machine (`--scale`'s MetaRoCE alone, with 10 times the samples, about
//! 12 s), so the rows run 1 ms over 3 seeds (`--full`, or `--only 14`): 30 runs, about
//! 2 minutes for the 2-tier rows and about 5 for the 3-tier ones (5 switch hops a
//! packet instead of 3); the FCT tails stay with scenarios 3 and 9.
//! Quick scale (`--only 14` without `--full`): 16 leaves × 16 hosts (256) and 4 pods ×
//! 4 ToRs × 4 hosts (64), 0.4 ms, 2 seeds.

use super::*;

/// The tree: `tors` leaves × `tors` hosts, `os`:1 at the leaf.
pub fn fabric(tors: u16, os: u16) -> FatTree {
    FatTree::two_tier(tors, tors, os)
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds: Vec<u64> = (0..sc.t(2, 3)).map(|i| sc.seed + i).collect();
    let dur = sc.t(400_000, 1_000_000);
    let tors = if sc.quick { 16 } else { 32 };
    let ft1 = fabric(tors, 1);
    let (pods, tpp, hpt) = if sc.quick { (4, 4, 4) } else { (16, 8, 8) };
    let (t3, t34) = (
        tier3::tree(pods, tpp, hpt, 1, 1),
        tier3::tree(pods, tpp, hpt, 2, 2),
    );
    let mut sec = Section::new(
        14,
        "Permutation at 1,024 hosts (256 and 64 at quick scale), 2- and 3-tier, 1:1 and 4:1",
        format!(
            "2-tier: {} leaves × {} hosts ({} hosts), {} spines at 1:1 / {} at 4:1; \
             each host sends to a host on another leaf (scenario 3's traffic). 3-tier: {} \
             pods × {} ToRs × {} hosts ({} hosts), 1:1 with {} aggregation switches per \
             pod and {} cores, 4:1 as 2:1 at the ToR × 2:1 at the aggregation switch ({} \
             per pod, {} cores); each host sends to a host in another pod (scenario 9's \
             traffic). 100 Gb/s, 1 µs/hop. Long flows, {:.1} ms, payload placed from 1/4 \
             of the run over hosts × 100 Gb/s / oversubscription. Mean ± 95 % CI over {} \
             seeds.",
            ft1.tors(),
            ft1.hosts_per_tor,
            ft1.hosts(),
            ft1.tor_uplinks,
            ft1.tor_uplinks / 4,
            t3.pods,
            t3.tors_per_pod,
            t3.hosts_per_tor,
            t3.hosts(),
            t3.tor_uplinks,
            t3.cores(),
            t34.tor_uplinks,
            t34.cores(),
            dur as f64 / 1e6,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    for os in [1u16, 4] {
        let ft = fabric(tors, os);
        let (mut row, m) = permutation::goodput_row(
            &vs,
            &seeds,
            mc,
            (ft, u32::from(ft.hosts_per_tor), os, dur),
            format!("permutation {os}:1, {} hosts", ft.hosts()),
        );
        // Scenario 3's guards: the same traffic, 8× the hosts.
        row.guard = Some(m >= if os == 1 { 0.70 } else { 0.80 });
        sec.rows.push(row);
    }
    for (ft, os) in [(t3, 1u16), (t34, 4)] {
        let (row, _) = permutation::goodput_row(
            &vs,
            &seeds,
            mc,
            (ft, tier3::per_pod(&ft), os, dur),
            format!("3-tier permutation {os}:1, {} hosts", ft.hosts()),
        );
        sec.rows.push(row);
    }
    sec
}
