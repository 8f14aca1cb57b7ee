//! Scenario 14: the permutation of scenario 3 at the scale, 1,024 hosts on a
//! 2-tier fat tree (32 leaves × 32 hosts; 32 spines at 1:1, 8 at 4:1), every column.
//!
//! Aggregate goodput only (long flows; payload placed from 1/4 of the run to its end
//! over hosts × 100 Gb/s / oversubscription), with the single-path ECMP bound of
//! [`permutation::ecmp_maxmin_bound`]. One 1 ms run is about 4 s of CPU on the
//! development machine (`--scale`'s MetaRoCE alone, with 10 times the samples, about
//! 12 s), so the rows run 1 ms over 3 seeds (`--full`, or `--only 14`): 30 runs, about
//! 2 minutes; the FCT tails stay with scenario 3's 128 hosts.
//! Quick scale (`--only 14` without `--full`): 16 leaves × 16 hosts (256), 0.4 ms,
//! 2 seeds.

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
    let mut sec = Section::new(
        14,
        "Permutation at 1,024 hosts (256 at quick scale), 1:1 and 4:1",
        format!(
            "{} leaves × {} hosts ({} hosts), {} spines at 1:1 / {} at 4:1, 100 Gb/s, 1 µs/hop; \
             each host sends to a host on another leaf (scenario 3's traffic; 1,024 hosts \
             at full scale). Long flows, {:.1} ms, payload placed from 1/4 of the run over hosts × \
             100 Gb/s / oversubscription. Mean ± 95 % CI over {} seeds.",
            ft1.tors(),
            ft1.hosts_per_tor,
            ft1.hosts(),
            ft1.tor_uplinks,
            ft1.tor_uplinks / 4,
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
    sec
}
