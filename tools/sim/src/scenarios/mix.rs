//! Scenario 11: a background + foreground mix. Background: open-loop flows with sizes
//! from the web-search distribution (DCTCP, SIGCOMM 2010; [`Cdf::WEB_SEARCH`], mean
//! 1.6 MB) between random host pairs, Poisson arrivals at 50 % of every host's line
//! rate. Foreground: incasts of 16 random senders × 128 KiB to a random receiver, at
//! 1/4, 1/2 and 3/4 of the arrival window (groups 1, 2, 3).
//!
//! Every transfer has its own connection/QP (as HPCC's and IRN's simulators open one
//! per flow), created at t = 0 and posted at the transfer's start. The run lasts until
//! every transfer completed or 20 ms after the arrival window; flows still running
//! then count with that time (n unfinished printed).
//!
//! * Foreground completion: the incast's last completion minus its start, mean over
//!   the run's incasts, over the ideal on an idle fabric (16 × 128 KiB at 100 Gb/s plus
//!   one base RTT); mean ± 95 % CI over seeds.
//! * Background FCT p50/p99/p99.9 pooled over flows and seeds, all flows and flows of
//!   at most 100 KB (the latency-sensitive ones).

use super::*;
use crate::stats::Tail;
use crate::workload::{derangement, incast, poisson_flows, Cdf, Rng, Workload};

/// Incast fan-in and bytes per sender.
pub const FAN_IN: usize = 16;
pub const INCAST_BYTES: u64 = 128 << 10;
/// Background flows up to this size are "small".
pub const SMALL: u64 = 100_000;

/// The mix over `hosts` with an arrival window of `window` ns.
pub fn workload(hosts: &[u32], load: f64, window: u64, seed: u64) -> Workload {
    let mut w = poisson_flows(hosts, Cdf::WEB_SEARCH, load, LINE, 0, window, seed, 0);
    let mut rng = Rng::new(seed ^ 0xf0f0);
    for g in 1..=3u32 {
        let order = derangement(hosts.len(), &mut rng);
        let dst = hosts[order[0]];
        let senders: Vec<u32> = order[1..=FAN_IN].iter().map(|&i| hosts[i]).collect();
        w.append(incast(
            &senders,
            dst,
            INCAST_BYTES,
            window * u64::from(g) / 4,
            g,
        ));
    }
    w
}

/// Runs `wl` with one flow of variant `v` per transfer until every transfer completed
/// or `limit` ns. Returns whether everything completed.
pub fn run_per_transfer<const P: usize, const W: usize, const N: usize>(
    s: &mut Sim<P, W, N>,
    v: Variant,
    wl: Workload,
    limit: u64,
) -> bool {
    let flow_of: Vec<usize> = wl
        .transfers
        .iter()
        .map(|t| add(s, v, t.src, t.dst, false, t.bytes))
        .collect();
    run_driven(s, wl.transfers, flow_of, 50_000, limit)
}

/// What a driven mix run gives (scenarios 11 and 15).
pub struct Mix {
    /// Per incast: completion time, ns (None: unfinished).
    pub incasts: Vec<Option<u64>>,
    /// The open-loop flows: (bytes, FCT ns (unfinished: until the limit), finished).
    pub flows: Vec<(u64, f64, bool)>,
    pub drops: u64,
    pub paused_us: f64,
    pub peak_q: u64,
}

impl Mix {
    /// From a run that ended at `limit`: the completion of each group in `incasts`,
    /// the FCTs of group `flows`, and the fabric's drops, pause and peak queue.
    pub fn of<const P: usize, const W: usize, const N: usize>(
        s: &Sim<P, W, N>,
        incasts: std::ops::RangeInclusive<u32>,
        flows: u32,
        limit: u64,
    ) -> Mix {
        let d = s.driver.as_ref().expect("attached");
        let c = counters(s);
        Mix {
            incasts: incasts.map(|g| d.group_time(g)).collect(),
            flows: group_fcts(d, flows, limit),
            drops: c.drops,
            paused_us: c.paused_ns as f64 / 1e3,
            peak_q: c.peak_switch_q,
        }
    }
}

pub fn fabric() -> FatTree {
    leaf_spine(1, 4, 8, 8)
}

pub fn mix(v: Variant, load: f64, window: u64, seed: u64) -> Mix {
    let ft = fabric();
    let hosts: Vec<u32> = (0..ft.hosts()).collect();
    let wl = workload(&hosts, load, window, seed);
    let limit = window + 20_000_000;
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, seed, 0);
    run_per_transfer(&mut s, v, wl, limit);
    Mix::of(&s, 1..=3, 0, limit)
}

/// The FCTs of `group`'s transfers in a run driven by `d` that ended at `limit`:
/// (bytes, FCT ns, finished); an unfinished transfer counts until `limit`.
pub fn group_fcts(d: &crate::driver::Driver, group: u32, limit: u64) -> Vec<(u64, f64, bool)> {
    let mut v = Vec::new();
    for (i, t) in d.transfers.iter().enumerate() {
        if t.group != group {
            continue;
        }
        match (d.posted_at[i], d.done_at[i]) {
            (Some(p), Some(e)) => v.push((t.bytes, (e - p) as f64, true)),
            _ => v.push((t.bytes, (limit - t.start_ns) as f64, false)),
        }
    }
    v
}

/// One cell per column: each seed's incast completion times (`f`; None: unfinished)
/// averaged and divided by `ideal`, as mean ± 95 % CI ("—" without incasts), and the
/// mean of column `mc` (infinite if a seed did not finish; None if it had no incast,
/// so that no target is judged on nothing).
pub fn incast_cells<T>(
    res: &[Vec<T>],
    f: impl Fn(&T) -> &[Option<u64>],
    ideal: f64,
    mc: usize,
) -> (Vec<String>, Option<f64>) {
    let cols: Vec<Vec<Option<f64>>> = res
        .iter()
        .map(|r| {
            r.iter()
                .filter(|x| !f(x).is_empty())
                .map(|x| {
                    let t: Option<Vec<u64>> = f(x).iter().copied().collect();
                    t.map(|t| mean(&t.iter().map(|&y| y as f64).collect::<Vec<_>>()) / ideal)
                })
                .collect()
        })
        .collect();
    let (cells, m) = ratio_cells(&cols, ideal, mc);
    (cells, (!cols[mc].is_empty()).then_some(m))
}

/// The rows of a mix (scenarios 11 and 15), from each run's [`Mix`] (`f`): the
/// incasts' completion over `ideal` (row `incast`, target ≤ 3× with the reason
/// `why`; its metric prefixed by `what_done`), then [`fct_rows`] of the flows (`flows`).
pub fn mix_rows<T>(
    res: &[Vec<T>],
    f: impl Fn(&T) -> &Mix,
    ideal: f64,
    mc: usize,
    (incast, what_done, why, flows): (String, &str, &str, &str),
) -> Vec<Row> {
    let (cells, m) = incast_cells(res, |x| &f(x).incasts, ideal, mc);
    let mut rows = vec![Row {
        scenario: incast,
        metric: format!("{what_done}completion / idle ideal ({:.0} µs)", ideal / 1e3),
        cells,
        target: format!("≤ 3× ({why})"),
        met: m.map(|m| m <= 3.0),
        guard: None,
    }];
    rows.extend(fct_rows(res, |x| &f(x).flows, flows));
    rows
}

/// Two rows "`what`, all flows" and "`what`, flows ≤ 100 KB": FCT p50/p99/p99.9 of the
/// transfers `f` gives, pooled over seeds, per column.
pub fn fct_rows<T>(res: &[Vec<T>], f: impl Fn(&T) -> &[(u64, f64, bool)], what: &str) -> Vec<Row> {
    [("all flows", false), ("flows ≤ 100 KB", true)]
        .into_iter()
        .map(|(label, small)| {
            let cells = res
                .iter()
                .map(|r| {
                    let sel: Vec<&(u64, f64, bool)> = r
                        .iter()
                        .flat_map(|x| f(x).iter())
                        .filter(|(b, _, _)| !small || *b <= SMALL)
                        .collect();
                    let xs: Vec<f64> = sel.iter().map(|x| x.1).collect();
                    let unf = sel.iter().filter(|x| !x.2).count();
                    super::permutation::tail_cell(&(Tail::of(&xs), unf))
                })
                .collect();
            Row {
                scenario: format!("{what}, {label}"),
                metric: "FCT p50 / p99 / p99.9".into(),
                cells,
                target: "—".into(),
                met: None,
                guard: None,
            }
        })
        .collect()
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds_heavy();
    let window = sc.t(1_000_000, 3_000_000);
    let load = 0.5;
    let ideal = (FAN_IN as u64 * INCAST_BYTES) as f64 * 8.0 / GBPS as f64 + base_rtt();
    let mut sec = Section::new(
        11,
        "Background + foreground: web-search flows at 50 % load with incasts",
        format!(
            "4 leaves × 8 hosts, 8 spines (1:1), 100 Gb/s, 1 µs/hop. Background: web-search \
             flow sizes, Poisson arrivals at {:.0} % of every host's line rate for {:.0} ms, \
             random pairs. Foreground: {FAN_IN}→1 incasts of {} KiB per sender to a random \
             receiver at 1/4, 1/2 and 3/4 of the window. One connection/QP per transfer; run \
             until all complete or 20 ms after the window. Foreground: mean over the run's \
             3 incasts, then mean ± 95 % CI over {} seeds; background FCT percentiles pool \
             every flow of every seed.",
            load * 100.0,
            window as f64 / 1e6,
            INCAST_BYTES >> 10,
            seeds.len()
        ),
        &vs,
    );
    let res = per_column(&vs, &seeds, |v, sd| mix(v, load, window, sd));
    let mc = meta_col(&vs);
    sec.rows.extend(mix_rows(
        &res,
        |x| x,
        ideal,
        mc,
        (
            format!("{FAN_IN}→1 incast over 50 % background"),
            "foreground ",
            "the receiver link carries ~50 % background",
            "web-search background",
        ),
    ));
    sec.rows
        .push(fabric_row("whole mix".into(), "switch queue", &res, |x| {
            (x.drops, x.paused_us, x.peak_q)
        }));
    sec
}
