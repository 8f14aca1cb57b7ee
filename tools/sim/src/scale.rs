//! `--scale`: a permutation over a large fat tree, as a measurement of the engine's
//! speed and of the fabric (not a pass/fail test).
//!
//! `metaroce-sim --scale [--hosts-per-tor N] [--tors N] [--tiers 2|3] [--pods N]
//! [--oversub K] [--planes P] [--ms T] [--pfc] [--base] [--threads N] [--seed S]`
//! ([`crate::cli`] checks every value)
//!
//! Default: 1,024 hosts on a 2-tier 1:1 (32 leaves × 32 hosts, 32 spines) 100 Gb/s fabric
//! with Tomahawk-class shared-buffer switches (2.5 MB/Tb/s, alpha 1, step ECN at
//! 100 KB), every host sending to a distinct host on another leaf, 10 ms simulated.
//!
//! Target: under 60 s on the 2-core development machine. Two partitions on two threads
//! ([`crate::parallel`], the default `--threads 2`), idle machine, stop 45: 55.9 s
//! median of three (54.7-68.0 s), 382,106,095 events; the sequential engine
//! (`--threads 1`) 106.9 s in the same session. See `Documentation/simulation.rst`,
//! "Engine speed".

use crate::cli::ScaleArgs;
use crate::net::Rng;
use crate::parallel::Parallel;
use crate::sim::{Params, Sim, Transport, MTU, OVERHEAD};
use crate::switch::{Ecn, SwitchConfig};
use crate::topo::{FatTree, Node};
use std::time::Instant as WallClock;

/// A permutation of `0..n` in which no host sends to its own ToR (every flow crosses
/// the fabric), from a seeded shuffle with same-ToR pairs swapped away.
pub fn permutation(n: u32, per_tor: u32, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed ^ 0x9e47);
    let mut p: Vec<u32> = (0..n).collect();
    for i in (1..n as usize).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    if n <= per_tor {
        return p;
    }
    loop {
        let mut fixed = true;
        for i in 0..n as usize {
            if i as u32 / per_tor == p[i] / per_tor {
                let j = (rng.next_u64() % u64::from(n)) as usize;
                p.swap(i, j);
                fixed = false;
            }
        }
        if fixed {
            return p;
        }
    }
}

pub fn run(a: &ScaleArgs, params: Params) {
    let (tiers, os, planes, ms) = (a.tiers, a.oversub, a.planes, a.ms);
    let mut ft = if tiers == 3 {
        FatTree::three_tier(a.pods, a.tors, a.hosts_per_tor, os, 1)
    } else {
        FatTree::two_tier(a.tors, a.hosts_per_tor, os)
    };
    ft.planes = planes;
    let mut cfg = SwitchConfig::shared(Ecn::step(100_000));
    if a.pfc {
        cfg = SwitchConfig::lossless(cfg.ecn, u64::from(MTU + 100 + OVERHEAD));
    }
    let mut params = params;
    if a.base {
        params.transport = Transport::Base;
    }
    params.sample_ns = 100_000;
    let n = ft.hosts();
    let dur = (ms * 1e6) as u64;
    let wall = WallClock::now();
    let pairs = permutation(n, u32::from(ft.hosts_per_tor), params.seed);
    let mut s: Parallel<8, 1, 64> = Parallel::new(a.threads, || {
        let mut s = Sim::new(ft, cfg, params.clone());
        for (a, &b) in pairs.iter().enumerate() {
            s.add_flow(a as u32, b, u32::MAX);
        }
        s
    });
    let setup = wall.elapsed().as_secs_f64();
    let step = dur / 10;
    for i in 1..=10 {
        s.run(step * i);
        // Progress on stderr (the run takes minutes): simulated time, events so far,
        // events pending, packets alive in the fabric, wall seconds.
        eprintln!(
            "scale: {:.1} of {ms} ms simulated, {} events, {} pending, {} packets live, {:.0} s wall",
            (step * i) as f64 / 1e6,
            s.events(),
            s.pending_events(),
            s.live_packets(),
            wall.elapsed().as_secs_f64()
        );
    }
    let secs = wall.elapsed().as_secs_f64();
    let flows = s.sims[0].flows.len();
    let total: u64 = (0..flows).map(|f| s.delivered(f)).sum();
    // The second half: from the last sample at or before half time.
    let (half_t, half) = s
        .samples()
        .iter()
        .rev()
        .find(|x| x.t <= dur / 2)
        .map(|x| (x.t, x.delivered.iter().sum::<u64>()))
        .unwrap_or((0, 0));
    let cap = f64::from(n) * ft.host_gbps as f64 * f64::from(planes) * 1e9 / 8.0;
    let cap = cap / f64::from(os.max(1));
    let rate = |bytes: u64, ns: u64| bytes as f64 / (ns as f64 * 1e-9);
    let f = &s.sims[0].fabric;
    let mut peak_switch_q = 0;
    let (mut drops, mut marks, mut xoff, mut paused) = (0, 0, 0, 0);
    for l in 0..f.ports.len() {
        let st = s.port_stats(l);
        if let Node::Switch(_) = f.topo.links[l].from {
            peak_switch_q = peak_switch_q.max(st.peak_q);
        }
        drops += st.drops();
        marks += st.ecn_marks;
        xoff += st.xoff_frames;
        paused += st.paused_ns;
    }
    // The switch whose shared buffer peaked highest for its size, and that size.
    let (peak_buf, buf_size) = (0..f.bufs.len())
        .map(|b| (s.buffer_peak(b), f.bufs[b].size))
        .max_by(|x, y| (x.0 as f64 / x.1 as f64).total_cmp(&(y.0 as f64 / y.1 as f64)))
        .unwrap_or((0, 0));
    println!(
        "scale: {n} hosts, {tiers}-tier {os}:1, {planes} plane(s), {} Gb/s, {} switches, {} links, \
         {:?} transport, {}, {ms} ms simulated",
        ft.host_gbps,
        f.topo.switches.len(),
        f.topo.links.len(),
        s.sims[0].params.transport,
        if cfg.pfc.is_some() { "PFC" } else { "lossy" },
    );
    let (ad, au) = ft.agg_gbps();
    println!(
        "capacity: ToR {} Gb/s down / {} Gb/s up{}",
        ft.tor_down_gbps(),
        ft.tor_up_gbps(),
        if tiers == 3 {
            format!(", aggregation {ad} Gb/s down / {au} Gb/s up")
        } else {
            String::new()
        }
    );
    let threads = if a.threads == 1 {
        "1 thread (the sequential engine)".to_string()
    } else {
        format!(
            "{} threads ({} partitions, {} windows of {} ns)",
            a.threads, a.threads, s.windows, s.window
        )
    };
    println!(
        "wall {secs:.1} s (setup {setup:.1} s) on {threads}, {} events, {:.2} M events/s, \
         {:.0} ns simulated per wall ms",
        s.events(),
        s.events() as f64 / secs / 1e6,
        dur as f64 / (secs * 1e3),
    );
    let k = s.by_kind();
    println!(
        "events: NIC tx-done {}, switch tx-done {}, arrive host {}, arrive switch {}, other {}, timers {}",
        k[0], k[1], k[2], k[3], k[4], k[5]
    );
    // Samples come every 100 µs: when half the run is not on one, say where it starts.
    let later = if half_t == dur / 2 {
        "second half".to_string()
    } else {
        format!("from {:.1} ms", half_t as f64 / 1e6)
    };
    println!(
        "goodput (bytes placed): whole run {:.1} Tb/s = {:.1} % of capacity / oversubscription; \
         {later} {:.1} %",
        rate(total, dur) * 8e-12,
        rate(total, dur) / cap * 100.0,
        rate(total - half, dur - half_t) / cap * 100.0,
    );
    println!(
        "peak switch queue {} KB, peak shared buffer {} KB of {} KB; drops {drops}, ECN marks \
         {marks}, XOFF frames {xoff}, pause time {:.1} µs (all ports)",
        peak_switch_q / 1000,
        peak_buf / 1000,
        buf_size / 1000,
        paused as f64 / 1e3,
    );
}
