//! Scenario 5: failures under 8 long flows between two leaves (8 hosts each, 8 spines).
//!
//! * **Link down with reconvergence**: at 1/3 of the run one spine's four links (to and
//!   from both leaves) go down; what they hold is lost; routing removes them from the
//!   ECMP groups 100 µs later.
//! * **Gray link**: at 1/3 of the run that spine's downlink to the receivers' leaf
//!   starts dropping every packet; it stays up and routing never reacts.
//!
//! The spine is the one the baselines' first QP hashes onto (so single-path transports
//! are affected); the same spine for every column. Recovery: the time from the failure
//! until delivered goodput (20 µs windows) is at least 90 % of the pre-failure goodput
//! × 7/8 (the remaining capacity) in three consecutive windows. Errors: retry-exceeded
//! errors reported to the verbs user; stalled: flows that delivered nothing in the last
//! sixth of the run.

use super::*;
use crate::net::flow_key;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    Down,
    Gray,
}

pub struct Outcome {
    pub recover_ns: Option<u64>,
    pub errors: u32,
    pub stalled: usize,
    /// Goodput after the failure (from 1/3 of the remaining time) over before.
    pub after: f64,
}

pub fn failure(v: Variant, kind: Fail, seed: u64, dur: u64) -> Outcome {
    let t = leaf_spine(1, 2, 8, 8);
    let tf = dur / 3;
    let mut s: Sim<8, 1, 64> = sim(v, t, 8, seed, 20_000);
    for i in 0..8 {
        add(&mut s, v, i, 8 + i, true, 0);
    }
    let key = flow_key(0, 8, sport(0, seed));
    let leaf0 = s.fabric.topo.switch(0, 0);
    let l = s.fabric.route(leaf0, 8, key).expect("route");
    let spine = spine_of(&s, 0, l);
    match kind {
        Fail::Down => {
            s.fabric.reconverge_ns = Some(100_000);
            let links = vec![
                s.fabric.up(0, 0, spine),
                s.fabric.down(0, spine, 0),
                s.fabric.up(0, 1, spine),
                s.fabric.down(0, spine, 1),
            ];
            s.fail_at(tf, links);
            s.run(dur);
        }
        Fail::Gray => {
            s.run(tf);
            let d = s.fabric.down(0, spine, 1);
            s.fabric.ports[d].loss = 1.0;
            s.run(dur);
        }
    }
    let rate = |a: u64, b: u64| delivered_between(&s, a, b).iter().sum::<f64>() / (b - a) as f64;
    let before = rate(tf / 2, tf);
    let goal = 0.9 * 7.0 / 8.0 * before;
    let w: Vec<(u64, f64)> = s
        .samples
        .windows(2)
        .filter(|p| p[0].t >= tf)
        .map(|p| {
            let a: u64 = p[0].delivered.iter().sum();
            let b: u64 = p[1].delivered.iter().sum();
            (p[0].t, (b - a) as f64 / (p[1].t - p[0].t) as f64)
        })
        .collect();
    let recover_ns = (0..w.len().saturating_sub(3))
        .find(|&i| w[i..i + 3].iter().all(|x| x.1 >= goal))
        .map(|i| w[i].0 - tf);
    let tail = delivered_between(&s, dur - dur / 6, dur);
    Outcome {
        recover_ns,
        errors: total_errors(&s),
        stalled: tail.iter().filter(|x| **x == 0.0).count(),
        after: rate(tf + (dur - tf) / 3, dur) / before.max(1e-9),
    }
}

pub fn run(sc: Scale) -> Section {
    let vs = sc.variants();
    let seeds = sc.seeds();
    let dur = sc.t(3_000_000, 10_000_000);
    let mut sec = Section::new(
        5,
        "Failures: a spine link down (reconvergence after 100 µs) and a gray link",
        format!(
            "2 leaves × 8 hosts, 8 spines, 100 Gb/s, 1 µs/hop; 8 long flows leaf 0 → leaf 1; \
             failure at {:.1} ms of {:.0} ms; mean ± 95 % CI over {} seeds (recovery time: \
             over the seeds that recovered, k/n given otherwise); errors and stalled flows \
             summed over the seeds.",
            dur as f64 / 3e6,
            dur as f64 / 1e6,
            seeds.len()
        ),
        &vs,
    );
    let mc = meta_col(&vs);
    for kind in [Fail::Down, Fail::Gray] {
        let res = per_column(&vs, &seeds, |v, sd| failure(v, kind, sd, dur));
        let cell = |r: &[Outcome]| {
            let xs: Vec<f64> = r
                .iter()
                .filter_map(|x| x.recover_ns)
                .map(|t| t as f64 / 1e3)
                .collect();
            let e: u32 = r.iter().map(|x| x.errors).sum();
            let st: usize = r.iter().map(|x| x.stalled).sum();
            let rec = if xs.len() == r.len() {
                format!("{} µs", ci(&xs, 0, ""))
            } else if xs.is_empty() {
                "not recovered".into()
            } else {
                format!("{} µs ({}/{} recovered)", ci(&xs, 0, ""), xs.len(), r.len())
            };
            let after: Vec<f64> = r.iter().map(|x| x.after * 100.0).collect();
            format!(
                "{rec}; after/before {}; {e} errors, {st} stalled",
                ci(&after, 0, " %")
            )
        };
        let m = &res[mc];
        let ok = m
            .iter()
            .all(|x| x.recover_ns.is_some_and(|r| r < 3 * u64::from(MIN_RTO)))
            && m.iter().all(|x| x.errors == 0 && x.stalled == 0);
        sec.rows.push(Row {
            scenario: match kind {
                Fail::Down => "1 of 8 spines down, reconverges after 100 µs".into(),
                Fail::Gray => "gray link: 1 spine downlink drops 100 %, no reconvergence".into(),
            },
            metric: "time to ≥ 90 % of remaining capacity; goodput after/before; errors".into(),
            cells: res.iter().map(|r| cell(r)).collect(),
            target: "< 3 min RTO (600 µs), 0 errors, 0 stalled".into(),
            met: Some(ok),
            guard: Some(
                m.iter().all(|x| x.recover_ns.is_some())
                    && m.iter().all(|x| x.errors == 0 && x.stalled == 0),
            ),
        });
    }
    sec
}
