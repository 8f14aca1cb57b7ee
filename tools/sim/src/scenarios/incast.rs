//! Scenario 2: incast N→1 on a leaf–spine fat tree (9 leaves × 8 hosts, 8 spines, 1:1):
//! N long flows from hosts on other leaves to host 0, all starting at t = 0.
//!
//! Scored on what arrives, not on what senders are allowed to send:
//! * **time to fair**: the first window start from which, in every window to the end of
//!   the run, every flow's delivered rate is within ±10 % of the flows' mean delivered
//!   rate *and* the receiver's downlink queue stays below the transport's own marking
//!   threshold (MetaRoCE K = 100 KB; DCQCN Kmin = 400 KB). Windows are long enough for
//!   each flow to deliver ~20 MTUs at its fair share (W = max(10 RTT, 20 MTU × N / line)):
//!   at 64→1 a 10-RTT window holds under 5 packets per flow, too few for ±10 %.
//! * Jain's index of delivered bytes in 10-RTT windows (mean over the second half).
//! * Receiver link goodput (payload placed / 100 Gb/s) over the first 50 RTTs (during
//!   convergence) and over the whole run.
//! * Drops (all causes, whole fabric), PFC pause time (sum over ports), peak queue on
//!   the receiver's downlink.

use super::*;
use crate::stats::{jain_over_time, settle_time, window_rates};

pub struct Incast {
    pub fair_ns: Option<u64>,
    pub window_ns: u64,
    pub jain: f64,
    pub util_conv: f64,
    pub util_all: f64,
    pub drops: u64,
    pub paused_us: f64,
    pub peak_q: u64,
    pub horizon_ns: u64,
    /// Receiver link goodput / line rate in the worst 2-RTT window from 2 RTT to the end.
    pub util_min2: f64,
}

fn k_of(v: Variant) -> u64 {
    if v.is_meta() {
        K
    } else {
        dcqcn_ecn().kmin
    }
}

pub fn incast(v: Variant, n: u32, seed: u64, dur: u64) -> Incast {
    let t = leaf_spine(1, 9, 8, 8);
    let mut s: Sim<8, 1, 64> = sim(v, t, 8, seed, 1_000);
    for i in 0..n {
        // 64 senders on the other 8 leaves; beyond that several per host.
        add(&mut s, v, 8 + i % 64, 0, true, 0);
    }
    let rx = s.fabric.host_down(0, 0);
    s.watch_link = Some(rx);
    s.run(dur);
    let rtt = base_rtt();
    let (times, cums) = series(&s);
    let w = ((10.0 * rtt) as u64).max(20 * u64::from(MTU) * 8 * u64::from(n) / GBPS);
    let per: Vec<Vec<(u64, f64)>> = cums.iter().map(|c| window_rates(&times, c, w)).collect();
    let k = k_of(v);
    let ok: Vec<(u64, Option<f64>)> = (0..per[0].len())
        .map(|i| {
            let t0 = per[0][i].0;
            let m = per.iter().map(|p| p[i].1).sum::<f64>() / f64::from(n);
            let fair = m > 0.0 && per.iter().all(|p| (p[i].1 - m).abs() <= 0.1 * m);
            let qmax = s
                .samples
                .iter()
                .filter(|x| x.t >= t0 && x.t <= t0 + w)
                .map(|x| x.queue)
                .max()
                .unwrap_or(0);
            (t0, Some(if fair && qmax < k { 1.0 } else { 0.0 }))
        })
        .collect();
    let fair_ns = settle_time(&ok, 0, 1.0);
    let w10 = (10.0 * rtt) as u64;
    let jt = jain_over_time(&times, &cums, w10);
    let second: Vec<f64> = jt
        .iter()
        .filter(|(t, _)| *t >= dur / 2)
        .map(|(_, j)| j.unwrap_or(0.0))
        .collect();
    let total: Vec<u64> = (0..times.len())
        .map(|i| cums.iter().map(|c| c[i]).sum())
        .collect();
    let conv = (50.0 * rtt) as u64;
    let at = |t: u64| crate::stats::counter_at(&times, &total, t);
    let w2 = (2.0 * rtt) as u64;
    let util_min2 = window_rates(&times, &total, w2)
        .iter()
        .filter(|(t, _)| *t >= w2)
        .map(|(_, r)| r / line_bytes())
        .fold(f64::INFINITY, f64::min);
    let util_conv = at(conv) / (conv as f64 * 1e-9) / line_bytes();
    let util_all = at(dur) / (dur as f64 * 1e-9) / line_bytes();
    let c = counters(&s);
    Incast {
        fair_ns,
        window_ns: w,
        jain: mean(&second),
        util_conv,
        util_all,
        drops: c.drops,
        paused_us: c.paused_ns as f64 / 1e3,
        peak_q: s.fabric.ports[rx].stats.peak_q,
        horizon_ns: dur,
        util_min2,
    }
}

/// Incast with `limited` of the `n` senders behind slow NICs (`lim_gbps`): what the
/// max-min split looks like (scored over the second half of the run).
pub struct Limited {
    /// Receiver link goodput / line rate.
    pub util: f64,
    /// Mean delivered rate of the limited senders, Gb/s of payload.
    pub lim_gbps: f64,
    /// Mean delivered rate of the other senders over their max-min share: what the
    /// receiver's link carries (at the all-greedy goodput, `greedy`) less what the
    /// limited ones deliver, split evenly.
    pub free_vs_mm: f64,
    /// Jain's index of the other senders' delivered bytes.
    pub jain_free: f64,
    pub drops: u64,
    pub peak_q: u64,
}

pub fn incast_limited(
    v: Variant,
    n: u32,
    limited: u32,
    lim_gbps: u64,
    greedy: f64,
    seed: u64,
    dur: u64,
) -> Limited {
    let t = leaf_spine(1, 9, 8, 8);
    let mut s: Sim<8, 1, 64> = sim(v, t, 8, seed, 1_000);
    for i in 0..n {
        // Interleaved over the leaves: sender i on host 8 + i.
        if i.is_multiple_of(2) && i / 2 < limited {
            let l = s.fabric.host_up(0, 8 + i);
            s.fabric.set_link_gbps(l, lim_gbps);
        }
        add(&mut s, v, 8 + i, 0, true, 0);
    }
    let rx = s.fabric.host_down(0, 0);
    s.watch_link = Some(rx);
    s.run(dur);
    let (times, cums) = series(&s);
    let at = |c: &Vec<u64>, t: u64| crate::stats::counter_at(&times, c, t);
    let half = dur / 2;
    let secs = (dur - half) as f64 * 1e-9;
    let rate = |c: &Vec<u64>| (at(c, dur) - at(c, half)) / secs;
    let is_lim = |i: u32| i.is_multiple_of(2) && i / 2 < limited;
    let lim: Vec<f64> = (0..n)
        .filter(|&i| is_lim(i))
        .map(|i| rate(&cums[i as usize]))
        .collect();
    let free: Vec<f64> = (0..n)
        .filter(|&i| !is_lim(i))
        .map(|i| rate(&cums[i as usize]))
        .collect();
    let total: f64 = lim.iter().sum::<f64>() + free.iter().sum::<f64>();
    let mm = (line_bytes() * greedy - lim.iter().sum::<f64>()) / free.len().max(1) as f64;
    let c = counters(&s);
    Limited {
        util: total / line_bytes(),
        lim_gbps: mean(&lim) * 8.0 / 1e9,
        free_vs_mm: mean(&free) / mm,
        jain_free: crate::stats::jain(&free).unwrap_or(0.0),
        drops: c.drops,
        peak_q: s.fabric.ports[rx].stats.peak_q,
    }
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds();
    let dur = sc.t(2_000_000, 5_000_000);
    let rtt = base_rtt();
    let mut sec = Section::new(
        2,
        "Incast N→1, scored on delivered bytes and the queue",
        format!(
            "9 leaves × 8 hosts, 8 spines (1:1), 100 Gb/s, 1 µs/hop, base RTT {:.1} µs; N \
             long flows from other leaves to host 0 from t = 0; {:.0} ms per run; mean ± \
             95 % CI over {} seeds (time to fair: over the seeds that settled, k/n given \
             when some did not).",
            rtt / 1e3,
            dur as f64 / 1e6,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    let mut greedy = Vec::new();
    for n in [16u32, 64, 256] {
        let res = per_column(&vs, &seeds, |v, sd| incast(v, n, sd, dur));
        if n == 16 {
            greedy = res
                .iter()
                .map(|r| mean(&r.iter().map(|x| x.util_all).collect::<Vec<_>>()))
                .collect();
        }
        let w = res[0][0].window_ns;
        let fair_cell = |r: &[Incast]| {
            let xs: Vec<f64> = r
                .iter()
                .filter_map(|x| x.fair_ns)
                .map(|t| t as f64 / rtt)
                .collect();
            if xs.len() == r.len() {
                format!("{} RTT", ci(&xs, 0, ""))
            } else if xs.is_empty() {
                format!("never (> {:.0} RTT)", r[0].horizon_ns as f64 / rtt)
            } else {
                format!("{} RTT ({}/{} settled)", ci(&xs, 0, ""), xs.len(), r.len())
            }
        };
        let m = &res[mc];
        let m_fair = m.iter().all(|x| x.fair_ns == Some(0));
        let m_jain = mean(&m.iter().map(|x| x.jain).collect::<Vec<_>>());
        // At 256→1 a window (20 packets per sender) is most of the run: no guard.
        let m_guard_fair = n > 64
            || m.iter()
                .all(|x| x.fair_ns.is_some_and(|t| t <= 4 * x.window_ns));
        sec.rows.push(Row {
            scenario: format!("incast {n}→1"),
            metric: format!(
                "time to fair ±10 % & queue < own K (windows of {:.0} µs = {:.0} RTT)",
                w as f64 / 1e3,
                w as f64 / rtt
            ),
            cells: res.iter().map(|r| fair_cell(r)).collect(),
            target: "fair from the 1st window".into(),
            met: Some(m_fair),
            guard: Some(m_guard_fair),
        });
        let col = |f: &dyn Fn(&Incast) -> f64, d: usize, unit: &str| -> Vec<String> {
            res.iter()
                .map(|r| ci(&r.iter().map(f).collect::<Vec<_>>(), d, unit))
                .collect()
        };
        sec.rows.push(Row {
            scenario: format!("incast {n}→1"),
            metric: "Jain, delivered, 10-RTT windows, 2nd half".into(),
            cells: col(&|x| x.jain, 3, ""),
            target: "≥ 0.98".into(),
            met: Some(m_jain >= 0.98),
            guard: Some(m_jain >= if n <= 16 { 0.95 } else { 0.85 }),
        });
        let uc = mean(&m.iter().map(|x| x.util_conv).collect::<Vec<_>>());
        sec.rows.push(Row {
            scenario: format!("incast {n}→1"),
            metric: "receiver link goodput, first 50 RTT".into(),
            cells: col(&|x| x.util_conv * 100.0, 1, " %"),
            target: "≥ 80 %".into(),
            met: Some(uc >= 0.80),
            guard: None,
        });
        let ua = mean(&m.iter().map(|x| x.util_all).collect::<Vec<_>>());
        sec.rows.push(Row {
            scenario: format!("incast {n}→1"),
            metric: "receiver link goodput, whole run".into(),
            cells: col(&|x| x.util_all * 100.0, 1, " %"),
            target: "≥ 90 %".into(),
            met: Some(ua >= 0.90),
            guard: Some(ua >= 0.80),
        });
        sec.rows.push(fabric_row(
            format!("incast {n}→1"),
            "rx queue",
            &res,
            |x| (x.drops, x.paused_us, x.peak_q),
        ));
        // Issue targets: utilisation from 2 RTT on, and the peak queue within N full
        // packets plus one bandwidth-delay product.
        let bound = f64::from(n) * f64::from(MTU + 60 + OVERHEAD) + line_bytes() * rtt * 1e-9;
        let u2 = mean(&m.iter().map(|x| x.util_min2).collect::<Vec<_>>());
        let qb = m
            .iter()
            .map(|x| x.peak_q as f64 / bound)
            .fold(0.0, f64::max);
        sec.rows.push(Row {
            scenario: format!("incast {n}→1"),
            metric: format!(
                "worst 2-RTT window's receiver goodput from 2 RTT on; peak rx queue / (N MTU + \
                 1 BDP = {:.0} KB)",
                bound / 1e3
            ),
            cells: res
                .iter()
                .map(|r| {
                    format!(
                        "{}; {}",
                        ci(
                            &r.iter().map(|x| x.util_min2 * 100.0).collect::<Vec<_>>(),
                            1,
                            " %"
                        ),
                        ci(
                            &r.iter()
                                .map(|x| x.peak_q as f64 / bound)
                                .collect::<Vec<_>>(),
                            2,
                            ""
                        )
                    )
                })
                .collect(),
            target: "≥ 90 %; ≤ 1".into(),
            met: Some(u2 >= 0.90 && qb <= 1.0),
            guard: None,
        });
    }
    // Half the senders behind 2 Gb/s NICs (below their 100/16 Gb/s count share): the
    // others should split what they leave (max-min).
    let (n, lim, lg) = (16u32, 8u32, 2u64);
    // The column's all-greedy 16→1 goodput (above) is the total it can deliver.
    let res: Vec<Vec<Limited>> = vs
        .iter()
        .zip(&greedy)
        .map(|(&v, &g)| {
            seeds
                .iter()
                .map(|&sd| incast_limited(v, n, lim, lg, g, sd, dur))
                .collect()
        })
        .collect();
    let col = |f: &dyn Fn(&Limited) -> f64, d: usize, unit: &str| -> Vec<String> {
        res.iter()
            .map(|r| ci(&r.iter().map(f).collect::<Vec<_>>(), d, unit))
            .collect()
    };
    let m = &res[mc];
    let scen = format!("incast {n}→1, {lim} senders behind {lg} Gb/s NICs");
    let util = mean(&m.iter().map(|x| x.util).collect::<Vec<_>>());
    sec.rows.push(Row {
        scenario: scen.clone(),
        metric: "receiver link goodput, 2nd half".into(),
        cells: col(&|x| x.util * 100.0, 1, " %"),
        target: "≥ 90 %".into(),
        met: Some(util >= 0.90),
        guard: Some(util >= 0.80),
    });
    let mm = mean(&m.iter().map(|x| x.free_vs_mm).collect::<Vec<_>>());
    sec.rows.push(Row {
        scenario: scen.clone(),
        metric: format!(
            "others' rate / max-min share (the column's all-greedy 16→1 goodput less the \
             limited senders', split {} ways); Jain among them; limited senders' Gb/s",
            n - lim
        ),
        cells: res
            .iter()
            .map(|r| {
                format!(
                    "{}; Jain {}; {}",
                    ci(&r.iter().map(|x| x.free_vs_mm).collect::<Vec<_>>(), 2, ""),
                    ci(&r.iter().map(|x| x.jain_free).collect::<Vec<_>>(), 3, ""),
                    ci(&r.iter().map(|x| x.lim_gbps).collect::<Vec<_>>(), 2, "")
                )
            })
            .collect(),
        target: "others within ±10 % of max-min".into(),
        met: Some((0.9..=1.1).contains(&mm)),
        guard: Some(mm >= 0.8),
    });
    sec.rows.push(fabric_row(scen, "rx queue", &res, |x| {
        (x.drops, 0.0, x.peak_q)
    }));
    sec
}
