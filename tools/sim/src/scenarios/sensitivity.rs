//! Scenario 8: DCQCN parameter sensitivity. The congestion rows where the DCQCN
//! baselines do worst (permutation, incast, collectives), rerun with each published
//! DCQCN preset ([`Preset`]) for RoCEv2 over PFC, lossy RoCEv2 and IRN, on the same
//! fabrics and seeds as scenarios 2–4. The headline columns of those scenarios use
//! [`HEADLINE`]; this table shows what the other preset would have given.

use super::*;

pub fn run(sc: Scale) -> Section {
    let s8 = Scale {
        dcqcn_presets: true,
        kernel_only: false,
        ..sc
    };
    let vs = s8.variants();
    // The seeds of scenarios 2–4 (5 at full scale), so the rows compare like with like.
    let seeds = sc.seeds_heavy();
    let mut sec = Section::new(
        8,
        "DCQCN parameter sensitivity: HPCC's ns-3 preset against the DCQCN authors'",
        format!(
            "The baseline columns of scenarios 2–4 (same fabrics, workloads and seeds; {} seeds; \
             see their headings) with each published DCQCN preset. HPCC ns-3 (run.py --cc \
             dcqcn): rate-increase timer 300 µs, no byte counter, F 1, R_AI 20 Mb/s, \
             R_HAI 200 Mb/s, cut at most every 4 µs, target rate not clamped. DCQCN \
             authors' ns-3: timer 60 µs, byte counter 300 kB, F 5, R_AI 40 Mb/s, R_HAI \
             200 Mb/s, CNP at most every 50 µs, target rate clamped on every cut. Headline \
             preset in scenarios 1–6: {}.",
            seeds.len(),
            HEADLINE.label()
        ),
        &vs,
    );
    sec.cols = vs.iter().map(Variant::label_with_preset).collect();
    let mut row = |scenario: String, metric: &str, cells: Vec<String>| {
        sec.rows.push(Row {
            scenario,
            metric: metric.into(),
            cells,
            target: "—".into(),
            met: None,
            guard: None,
        })
    };
    let dur = sc.t(1_000_000, 2_000_000);
    for os in [1u16, 2] {
        let ft = if sc.quick {
            FatTree::two_tier(4, 8, os)
        } else {
            FatTree::two_tier(8, 16, os)
        };
        let cells = vs
            .iter()
            .map(|v| {
                let g: Vec<f64> = seeds
                    .iter()
                    .map(|&sd| {
                        permutation::goodput(*v, ft, u32::from(ft.hosts_per_tor), os, sd, dur)
                            * 100.0
                    })
                    .collect();
                ci(&g, 1, " %")
            })
            .collect();
        row(
            format!("permutation {os}:1, {} hosts", ft.hosts()),
            "aggregate goodput / capacity",
            cells,
        );
    }
    let idur = sc.t(2_000_000, 5_000_000);
    for n in [16u32, 64] {
        let runs: Vec<Vec<incast::Incast>> = vs
            .iter()
            .map(|v| {
                seeds
                    .iter()
                    .map(|&sd| incast::incast(*v, n, sd, idur))
                    .collect()
            })
            .collect();
        let pick = |f: fn(&incast::Incast) -> f64, d: usize, unit: &str| -> Vec<String> {
            runs.iter()
                .map(|r| ci(&r.iter().map(f).collect::<Vec<_>>(), d, unit))
                .collect()
        };
        row(
            format!("incast {n}→1"),
            "Jain, delivered, 10-RTT windows, 2nd half",
            pick(|x| x.jain, 3, ""),
        );
        row(
            format!("incast {n}→1"),
            "receiver link goodput, whole run",
            pick(|x| x.util_all * 100.0, 1, " %"),
        );
    }
    let ranks: u32 = if sc.quick { 16 } else { 64 };
    let b: u64 = if sc.quick { 1 << 20 } else { 16 << 20 };
    for (c, name) in [
        (collectives::Coll::Ring, "ring all-reduce"),
        (collectives::Coll::AllToAll, "all-to-all"),
    ] {
        let ideal = collectives::ideal_ns(c, u64::from(ranks), b);
        let limit = (20.0 * ideal) as u64 + 5_000_000;
        let cells = vs
            .iter()
            .map(|v| {
                let xs: Vec<Option<u64>> = seeds
                    .iter()
                    .map(|&sd| collectives::cct(*v, c, ranks, b, sd, limit))
                    .collect();
                let done: Vec<f64> = xs.iter().flatten().map(|&t| t as f64 / ideal).collect();
                if done.len() == xs.len() {
                    format!("{}×", ci(&done, 2, ""))
                } else {
                    format!("not done ({}/{} seeds)", done.len(), xs.len())
                }
            })
            .collect();
        row(
            format!("{name}, {} KiB, {ranks} ranks", b >> 10),
            &format!("completion / ideal ({:.0} µs)", ideal / 1e3),
            cells,
        );
    }
    sec
}
