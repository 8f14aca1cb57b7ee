//! Scenario 6: planes. P parallel leaf–spine planes (2 leaves × 8 hosts, 8 spines per
//! plane), every host with one 100 Gb/s NIC port per plane; 8 long flows leaf 0 →
//! leaf 1. MetaRoCE spreads one connection over 8·P paths (source ports over every
//! plane). Multi-plane RoCE as operators run it: one flow over one RoCEv2+DCQCN QP per
//! plane, or 4 QPs per plane (QP scaling), the data split evenly over the QPs; each QP
//! hashes onto one spine of its plane. Aggregate goodput over the capacity
//! (8 × P × 100 Gb/s), and scaling against the same column's 1-plane figure.

use super::*;

pub fn tput(v: Variant, planes: u8, seed: u64, dur: u64) -> f64 {
    run_with(v, v.switch(), planes, seed, dur).0
}

/// [`tput`] with the switches configured by `cfg`, and the finished simulation.
pub fn run_with(
    v: Variant,
    cfg: SwitchConfig,
    planes: u8,
    seed: u64,
    dur: u64,
) -> (f64, Sim<64, 8, 512>) {
    let t = leaf_spine(planes, 2, 8, 8);
    let paths = (8 * planes).min(64);
    let mut s: Sim<64, 8, 512> = Sim::new(t, cfg, v.params(paths, seed, 50_000));
    for i in 0..8 {
        add(&mut s, v, i, 8 + i, true, 0);
    }
    s.run(dur);
    let d = delivered_between(&s, dur / 3, dur);
    (d.iter().sum::<f64>() / ((dur - dur / 3) as f64 * 1e-9), s)
}

pub fn variants(sc: Scale) -> Vec<Variant> {
    let mut vs = if sc.kernel_only {
        vec![Variant::MetaKernel]
    } else {
        vec![Variant::Meta, Variant::MetaKernel]
    };
    if !sc.kernel_only {
        vs.extend([
            Variant::MpRoce { qpp: 1, pfc: true },
            Variant::MpRoce { qpp: 4, pfc: true },
            Variant::MpRoce { qpp: 1, pfc: false },
        ]);
    }
    vs
}

pub fn run(sc: Scale) -> Section {
    let vs = variants(sc);
    let seeds = sc.seeds_heavy();
    let dur = sc.t(1_500_000, 5_000_000);
    let mut sec = Section::new(
        6,
        "Planes: MetaRoCE vs multi-plane RoCE (one QP per plane, 4 QPs per plane)",
        format!(
            "P planes of 2 leaves × 8 hosts, 8 spines, 100 Gb/s, 1 µs/hop; 8 long flows \
             leaf 0 → leaf 1; {:.1} ms, goodput from 1/3 of the run; mean ± 95 % CI over {} \
             seeds. Cells: % of capacity (8 × P × 100 Gb/s), then × linear from the same \
             column's 1-plane figure.",
            dur as f64 / 1e6,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    let mut one = vec![0.0; vs.len()];
    for p in [1u8, 2, 4, 8] {
        let cap = 8.0 * f64::from(p) * line_bytes();
        let mut cells = Vec::new();
        let mut ms = 0.0;
        let mut mu = 0.0;
        for (j, v) in vs.iter().enumerate() {
            let xs: Vec<f64> = seeds.iter().map(|&sd| tput(*v, p, sd, dur)).collect();
            let m = mean(&xs);
            if p == 1 {
                one[j] = m;
            }
            let lin = m / (f64::from(p) * one[j]);
            if j == mc {
                ms = lin;
                mu = m / cap;
            }
            let pct: Vec<f64> = xs.iter().map(|x| x / cap * 100.0).collect();
            cells.push(format!("{} ({lin:.2}×)", ci(&pct, 1, " %")));
        }
        sec.rows.push(Row {
            scenario: format!("{p} plane(s), 8 flows"),
            metric: "aggregate goodput / capacity (× linear)".into(),
            cells,
            target: if p == 8 {
                "≥ 0.95× linear, ≥ 85 % of capacity".into()
            } else {
                "—".into()
            },
            met: (p == 8).then_some(ms >= 0.95 && mu >= 0.85),
            guard: (p == 8).then_some(ms >= 0.90 && mu >= 0.75),
        });
    }
    sec
}
