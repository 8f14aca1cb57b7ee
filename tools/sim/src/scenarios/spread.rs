//! Scenario 13: shared buffer across ports and PFC pause spreading. 4 leaves × 8 hosts
//! at 100 Gb/s, each leaf with one 800 Gb/s uplink to a single spine (1:1; every path
//! fixed, so the result does not depend on ECMP hashing, and no fabric link is
//! congested by the traffic itself). A 16→1 incast of long flows to host 0 (leaf 0)
//! from 7 hosts of leaf 1, 7 of leaf 2 and 2 of leaf 3 starts at t = 0; at 1/4 of the
//! run two victims start, neither sharing an egress port with the incast:
//!
//! * **victim A**: a 2→1 (hosts 23 and 30, on leaves 2 and 3) into host 1, another port
//!   of the incast's leaf: it needs a queue of its own out of the buffer the incast's
//!   queue shares (dynamic threshold), and its packets cross the spine → leaf 0 link
//!   that PFC pauses for the incast (head-of-line blocking).
//! * **victim B**: host 15 (leaf 1) → host 31 (leaf 3): neither end is on the incast's
//!   leaf, but leaf 1's uplink carries incast traffic, so when the spine's buffer fills
//!   it pauses that uplink and victim B with it (pause spreading two hops back from the
//!   congested port).
//!
//! Each run is repeated without the incast (the victims alone). Goodput: payload placed
//! over the second half of the run, over 100 Gb/s. Pause time: the time transmitters
//! spent paused (including a pause still on at the end), on leaf 1's uplink and summed
//! over all ports.

use super::*;

pub const INCAST_SENDERS: [u32; 16] =
    [8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 24, 25];
pub const VICTIM_A: [(u32, u32); 2] = [(23, 1), (30, 1)];
pub const VICTIM_B: (u32, u32) = (15, 31);

/// 4 leaves × 8 hosts at 100 Gb/s, one 800 Gb/s uplink per leaf to a single spine
/// (1:1): every path is fixed, so which links a pause reaches does not depend on ECMP
/// hashing, and no fabric link is congested unless PFC pauses it.
pub fn fabric() -> FatTree {
    FatTree {
        fabric_gbps: 8 * GBPS,
        ..leaf_spine(1, 4, 8, 1)
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Spread {
    /// Goodput over 100 Gb/s: victim A (both flows), victim B, the incast receiver.
    pub victim_a: f64,
    pub victim_b: f64,
    pub incast: f64,
    /// Pause time on leaf 1's uplinks and on all ports, µs.
    pub pause_leaf1_up_us: f64,
    pub pause_all_us: f64,
    /// Peak shared-buffer use of leaf 0, its size; peak queue and drops of victim A's
    /// port (leaf 0 → host 1).
    pub leaf0_peak: u64,
    pub leaf0_size: u64,
    pub va_peak_q: u64,
    pub va_drops: u64,
}

fn paused_ns(p: &crate::switch::Port, now: u64) -> u64 {
    p.stats.paused_ns + if p.paused { now - p.paused_at } else { 0 }
}

pub fn spread(v: Variant, with_incast: bool, seed: u64, dur: u64) -> Spread {
    let ft = fabric();
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 25_000);
    let inc: Vec<usize> = if with_incast {
        INCAST_SENDERS
            .iter()
            .map(|&a| add(&mut s, v, a, 0, true, 0))
            .collect()
    } else {
        vec![]
    };
    s.run(dur / 4);
    let va: Vec<usize> = VICTIM_A
        .iter()
        .map(|&(a, b)| add(&mut s, v, a, b, true, 0))
        .collect();
    let vb = add(&mut s, v, VICTIM_B.0, VICTIM_B.1, true, 0);
    s.run(dur);
    let d = delivered_between(&s, dur / 2, dur);
    let rate = |fs: &[usize]| {
        fs.iter().map(|&f| d[f]).sum::<f64>() / ((dur - dur / 2) as f64 * 1e-9) / line_bytes()
    };
    let f = &s.fabric;
    let now = s.now;
    let up1: u64 = (0..ft.tor_uplinks)
        .map(|j| paused_ns(&f.ports[f.up(0, 1, j)], now))
        .sum();
    let all: u64 = f.ports.iter().map(|p| paused_ns(p, now)).sum();
    let leaf0 = s.fabric.topo.switch(0, 0) as usize;
    let vport = f.host_down(0, 1);
    Spread {
        victim_a: rate(&va),
        victim_b: rate(&[vb]),
        incast: rate(&inc),
        pause_leaf1_up_us: up1 as f64 / 1e3,
        pause_all_us: all as f64 / 1e3,
        leaf0_peak: f.bufs[leaf0].peak,
        leaf0_size: f.bufs[leaf0].size,
        va_peak_q: f.ports[vport].stats.peak_q,
        va_drops: f.ports[vport].stats.drops(),
    }
}

/// A per-run figure of [`Spread`].
type Metric = fn(&Spread) -> f64;

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let dur = sc.t(1_000_000, 2_000_000);
    let mut sec = Section::new(
        13,
        "Shared buffer and PFC pause spreading: victims of a 16→1 incast",
        format!(
            "4 leaves × 8 hosts at 100 Gb/s, one 800 Gb/s uplink per leaf to a single spine \
             (1:1, fixed paths), 1 µs/hop; 16→1 incast of long flows to host 0 (leaf 0) from \
             leaves 1–3 from t = 0; victims from 1/4 of the run. Victim A: 2→1 from leaves 2 \
             and 3 into host 1 (another port of leaf 0). Victim B: leaf 1 → leaf 3 (shares \
             only leaf 1's uplink with the incast). {:.0} ms per run; goodput over the second \
             half as % of 100 Gb/s, with the incast (and, in brackets, the same victims \
             without it); mean ± 95 % CI over {} seeds.",
            dur as f64 / 1e6,
            seeds.len()
        ),
        &vs,
    );
    let on = per_column(&vs, &seeds, |v, sd| spread(v, true, sd, dur));
    let off = per_column(&vs, &seeds, |v, sd| spread(v, false, sd, dur));
    let pick = |r: &[Spread], f: fn(&Spread) -> f64| r.iter().map(f).collect::<Vec<f64>>();
    let mc = meta_col(&vs);
    let rows: [(&str, Metric); 2] = [
        (
            "victim A: 2→1 into another port of the incast's leaf",
            |x| x.victim_a * 100.0,
        ),
        (
            "victim B: leaf 1 → leaf 3, neither end on the incast's leaf",
            |x| x.victim_b * 100.0,
        ),
    ];
    for (name, f) in rows {
        let rel = mean(&pick(&on[mc], f)) / mean(&pick(&off[mc], f)).max(1e-9);
        sec.rows.push(Row {
            scenario: name.into(),
            metric: "goodput with the incast (without)".into(),
            cells: on
                .iter()
                .zip(&off)
                .map(|(a, b)| {
                    format!(
                        "{} ({})",
                        ci(&pick(a, f), 1, " %"),
                        ci(&pick(b, f), 1, " %")
                    )
                })
                .collect(),
            target: "MetaRoCE ≥ 90 % of its figure without the incast".into(),
            met: Some(rel >= 0.9),
            guard: Some(rel >= 0.8),
        });
    }
    sec.rows.push(Row {
        scenario: "16→1 incast receiver".into(),
        metric: "goodput".into(),
        cells: on
            .iter()
            .map(|r| ci(&pick(r, |x| x.incast * 100.0), 1, " %"))
            .collect(),
        target: "—".into(),
        met: None,
        guard: None,
    });
    sec.rows.push(Row {
        scenario: "pause spreading".into(),
        metric: format!(
            "PFC pause µs in {:.0} ms: leaf 1's uplink / all ports summed",
            dur as f64 / 1e6
        ),
        cells: on
            .iter()
            .map(|r| {
                format!(
                    "{} / {}",
                    ci(&pick(r, |x| x.pause_leaf1_up_us), 0, ""),
                    ci(&pick(r, |x| x.pause_all_us), 0, "")
                )
            })
            .collect(),
        target: "—".into(),
        met: None,
        guard: None,
    });
    sec.rows.push(Row {
        scenario: "shared buffer of the incast's leaf".into(),
        metric: "peak shared-buffer use KB (of its size, less PFC headroom) / victim A port: \
                 peak queue KB, drops"
            .into(),
        cells: on
            .iter()
            .map(|r| {
                format!(
                    "{} (of {}) / {}, {}",
                    ci(&pick(r, |x| x.leaf0_peak as f64 / 1e3), 0, ""),
                    r[0].leaf0_size / 1000,
                    ci(&pick(r, |x| x.va_peak_q as f64 / 1e3), 0, ""),
                    ci(&pick(r, |x| x.va_drops as f64), 0, "")
                )
            })
            .collect(),
        target: "—".into(),
        met: None,
        guard: None,
    });
    sec
}
