//! Scenario 15: short flows and incasts among long flows ([`background_foreground`]).
//! Background: a permutation of long flows (1 GiB each, none finishes) from t = 0, so
//! every host's link is busy; foreground: flows with Facebook-Hadoop sizes
//! ([`Cdf::FB_HADOOP`], mostly under 10 KB) between random pairs, Poisson arrivals at
//! 20 % of every host's line rate over the window, and every quarter of the window an
//! 8→1 incast of 64 KiB per sender to a random receiver.
//!
//! Every transfer has its own connection/QP, created at t = 0 and posted at its start
//! (as in scenario 11). The run lasts until every foreground and incast transfer
//! completed, or 10 ms after the window (unfinished ones then count with that time).
//!
//! * Foreground FCT p50/p99/p99.9, pooled over flows and seeds: flows of at most
//!   100 KB (latency-bound: what long flows' queues cost them) and all.
//! * Incast completion: the last completion minus the start, mean over the run's
//!   incasts, over the idle-fabric ideal (8 × 64 KiB at 100 Gb/s plus one base RTT).
//! * Background goodput: bytes the long flows placed from 1/4 of the window to its end,
//!   over hosts × 100 Gb/s (the foreground takes about 20 % of it), beside the same
//!   long flows' goodput without any foreground (the same permutation alone).

use super::*;
use crate::driver::Driver;
use crate::workload::{
    background_foreground, permutation, Cdf, GROUP_BACKGROUND, GROUP_FOREGROUND, GROUP_INCAST_BASE,
};

/// Incast fan-in and bytes per sender.
pub const FAN_IN: usize = 8;
pub const INCAST_BYTES: u64 = 64 << 10;
/// Foreground offered load, fraction of each host's line rate.
pub const FG_LOAD: f64 = 0.2;
/// Each long flow's bytes: more than a window carries.
pub const BG_BYTES: u64 = 1 << 30;

pub struct Run {
    /// The incasts and the foreground flows (`flows`), drops, pause, peak queue.
    pub mix: mix::Mix,
    /// Background goodput from 1/4 of the window to its end, fraction of hosts × line.
    pub bg: f64,
}

/// One run over `window` ns; without `foreground`, the long flows alone (the same
/// permutation: the baseline of their goodput).
pub fn one(v: Variant, window: u64, seed: u64, foreground: bool) -> Run {
    let ft = mix::fabric();
    let hosts: Vec<u32> = (0..ft.hosts()).collect();
    let wl = if foreground {
        background_foreground(
            &hosts,
            BG_BYTES,
            Cdf::FB_HADOOP,
            FG_LOAD,
            LINE,
            window,
            window / 4,
            FAN_IN,
            INCAST_BYTES,
            seed,
        )
    } else {
        permutation(&hosts, BG_BYTES, 0, seed, GROUP_BACKGROUND)
    };
    let limit = window + 10_000_000;
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 0);
    let flow_of: Vec<usize> = wl
        .transfers
        .iter()
        .map(|t| add(&mut s, v, t.src, t.dst, false, t.bytes))
        .collect();
    let bg_flows: Vec<usize> = wl
        .group(GROUP_BACKGROUND)
        .into_iter()
        .map(|i| flow_of[i])
        .collect();
    let flows = s.flows.len();
    s.attach(Driver::new(wl.transfers, flow_of, flows));
    let placed = |s: &Sim<8, 1, 64>| bg_flows.iter().map(|&f| s.delivered(f)).sum::<u64>();
    s.run(window / 4);
    let b0 = placed(&s);
    s.run(window);
    let b1 = placed(&s);
    let fg_done = |s: &Sim<8, 1, 64>| {
        let d = s.driver.as_ref().expect("attached");
        d.transfers
            .iter()
            .zip(&d.done_at)
            .all(|(t, e)| t.group == GROUP_BACKGROUND || e.is_some())
    };
    let mut t = window;
    while t < limit && !fg_done(&s) {
        t = (t + 50_000).min(limit);
        s.run(t);
    }
    let d = s.driver.as_ref().expect("attached");
    let last = d.transfers.iter().map(|t| t.group).max().unwrap_or(0);
    let span = (window - window / 4) as f64 * 1e-9;
    Run {
        mix: mix::Mix::of(&s, GROUP_INCAST_BASE..=last, GROUP_FOREGROUND, limit),
        bg: (b1 - b0) as f64 / span / (f64::from(ft.hosts()) * line_bytes()),
    }
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let window = sc.t(1_000_000, 2_000_000);
    let ideal = (FAN_IN as u64 * INCAST_BYTES) as f64 * 8.0 / GBPS as f64 + base_rtt();
    let mut sec = Section::new(
        15,
        "Short flows and incasts among long flows",
        format!(
            "4 leaves × 8 hosts, 8 spines (1:1), 100 Gb/s, 1 µs/hop. Background: a \
             permutation of long flows from t = 0 (none finishes). Foreground: \
             Facebook-Hadoop flow sizes, Poisson arrivals at {:.0} % of every host's line \
             rate for {:.0} ms, random pairs, and every {:.2} ms an {FAN_IN}→1 incast of {} \
             KiB per sender to a random receiver. One connection/QP per transfer; run until \
             the foreground completes or 10 ms after the window. Incasts: mean over the \
             run's, then mean ± 95 % CI over {} seeds; FCT percentiles pool every flow of \
             every seed; long-flow goodput from 1/4 of the window, and (in brackets) of the \
             same long flows alone.",
            FG_LOAD * 100.0,
            window as f64 / 1e6,
            window as f64 / 4e6,
            INCAST_BYTES >> 10,
            seeds.len()
        ),
        &vs,
    );
    let res = per_column(&vs, &seeds, |v, sd| one(v, window, sd, true));
    let alone = per_column(&vs, &seeds, |v, sd| one(v, window, sd, false));
    let mc = meta_col(&vs);
    sec.rows.extend(mix::mix_rows(
        &res,
        |x| &x.mix,
        ideal,
        mc,
        (
            format!("{FAN_IN}→1 incasts among long flows"),
            "",
            "every link carries a long flow",
            "Hadoop foreground",
        ),
    ));
    let bg = |r: &[Run]| ci(&r.iter().map(|x| x.bg * 100.0).collect::<Vec<_>>(), 1, " %");
    sec.rows.push(Row {
        scenario: "long flows".into(),
        metric: "goodput / hosts × 100 Gb/s among the foreground (alone)".into(),
        cells: res
            .iter()
            .zip(&alone)
            .map(|(r, a)| format!("{} ({})", bg(r), bg(a)))
            .collect(),
        target: "—".into(),
        met: None,
        guard: None,
    });
    sec.rows
        .push(fabric_row("whole run".into(), "switch queue", &res, |x| {
            (x.mix.drops, x.mix.paused_us, x.mix.peak_q)
        }));
    sec
}
