//! Why multi-plane RoCE with 4 QPs per plane over PFC stays below its single-path
//! bound in scenario 6 (one plane, 8 flows leaf 0 → leaf 1): a diagnostic with
//! assertions, a few seconds in release, so not in the default run:
//!
//! `cargo test --release -p metaroce-sim -- --ignored multi_plane_roce_gap`

use super::*;
use crate::roce::data_wire;

const DUR: u64 = 5_000_000;

/// Scenario 6's one-plane fabric and flows under `cfg`: goodput over capacity, pause
/// time at host ports and at switch ports (ns).
fn run(v: Variant, cfg: SwitchConfig, seed: u64) -> (f64, u64, u64) {
    let (g, s) = planes::run_with(v, cfg, 1, seed, DUR);
    let (mut host, mut fabric) = (0, 0);
    for (l, p) in s.fabric.ports.iter().enumerate() {
        match s.fabric.topo.links[l].from {
            Node::Host(_) => host += p.stats.paused_ns,
            Node::Switch(_) => fabric += p.stats.paused_ns,
        }
    }
    (g / (8.0 * line_bytes()), host, fabric)
}

/// Max-min fair goodput over capacity of the 32 QPs pinned to their hashed spines
/// (each QP's path: its host's uplink, leaf 0 → spine, spine → leaf 1, the receiver's
/// downlink, so a flow's 4 QPs share its NICs), as the run's hashes place them, with
/// payload counted as goodput counts it (headers excluded).
fn bound(seed: u64) -> f64 {
    let v = Variant::MpRoce { qpp: 4, pfc: true };
    let s: Sim<64, 8, 512> = Sim::new(leaf_spine(1, 2, 8, 8), v.switch(), v.params(8, seed, 0));
    let f = &s.fabric;
    let mut paths = Vec::new();
    for fl in 0..8u32 {
        let (a, b) = (fl, 8 + fl);
        let base = sport(fl as usize, seed).min(60000);
        for sp in crate::multiplane::plane_sports(1, 4, base, |_| 0) {
            paths.push(f.hashed_path(a, b, sp));
        }
    }
    let rates = permutation::maxmin(&paths, f.topo.links.len());
    rates.iter().sum::<f64>() / 8.0 * f64::from(MTU) / f64::from(data_wire(MTU, false))
}

#[test]
#[ignore = "diagnostic, a few seconds in release: cargo test --release -p metaroce-sim -- --ignored multi_plane_roce_gap"]
fn multi_plane_roce_gap_is_pfc_head_of_line_blocking_at_the_hosts() {
    let v = Variant::MpRoce { qpp: 4, pfc: true };
    let mut no_ecn = v.switch();
    no_ecn.ecn = Ecn {
        kmin: u64::MAX / 2,
        kmax: u64::MAX / 2,
        pmax: 0.0,
    };
    let (mut gaps, mut pauses) = (Vec::new(), Vec::new());
    for seed in 1..=5 {
        let b = bound(seed);
        let (g, host, fabric) = run(v, v.switch(), seed);
        let (g0, host0, _) = run(v, no_ecn, seed);
        println!(
            "seed {seed}: bound {:.1} %, goodput {:.1} %, gap {:.1} points; pause at host \
             ports {} µs, at switch ports {} µs; without ECN (PFC alone): {:.1} %, {} µs",
            b * 100.0,
            g * 100.0,
            (b - g) * 100.0,
            host / 1000,
            fabric / 1000,
            g0 * 100.0,
            host0 / 1000
        );
        // Every pause is a leaf pausing a host's port (stopping all 4 of its QPs, those
        // on uncongested spines too); no pause spreads between switches.
        assert_eq!(fabric, 0);
        assert!(host > 0);
        // DCQCN is what keeps the pauses down: PFC alone pauses more and delivers less.
        assert!(host0 > host && g0 < g, "seed {seed}");
        // Never above the bound (which counts payload only).
        assert!(g <= b + 0.005, "seed {seed}: {g} > {b}");
        gaps.push(b - g);
        pauses.push(host as f64);
    }
    // The gap below the bound follows the pause time, seed by seed.
    let r = pearson(&gaps, &pauses);
    println!("correlation of gap and host pause time over seeds: {r:.2}");
    assert!(r > 0.9, "{r}");
}

/// Pearson's correlation coefficient of two equally long samples.
fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    cov / (vx * vy).sqrt()
}
