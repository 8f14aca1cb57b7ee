//! Tests of scenarios 9–15: the 3-tier permutation crosses the core, halving-doubling
//! runs its 2·log2 N steps no faster than the ideal, the mix gives every transfer its
//! own flow, reordering hurts go-back-N and not MetaRoCE, and PFC pauses spread to a
//! victim that shares no egress port with the incast while the lossy fabric does not;
//! short flows finish among never-ending long flows; the large permutation is 1,024
//! hosts, each sending off its leaf.

use super::*;
use crate::workload::Workload;

#[test]
fn pfc_pause_spreads_to_a_victim_off_the_incast_leaf() {
    let dur = 1_000_000;
    let pfc_on = spread::spread(Variant::ROCE_PFC, true, 1, dur);
    let pfc_off = spread::spread(Variant::ROCE_PFC, false, 1, dur);
    // Victim B shares no egress port with the incast: alone it runs at line rate; with
    // the incast its leaf's uplink is paused most of the time and it starves.
    assert!(pfc_off.victim_b > 0.9, "{}", pfc_off.victim_b);
    assert!(
        pfc_on.victim_b < 0.3 * pfc_off.victim_b,
        "{}",
        pfc_on.victim_b
    );
    // Paused for more than half of the victims' 3/4 of the run.
    assert!(pfc_on.pause_leaf1_up_us > 0.375 * dur as f64 / 1e3);
    assert!(pfc_on.pause_all_us > pfc_on.pause_leaf1_up_us);
    assert!(pfc_on.incast > 0.9, "PFC keeps the incast's link busy");
    // Same transport without PFC: no pause, victim B unaffected.
    let lossy_on = spread::spread(Variant::ROCE_LOSSY, true, 1, dur);
    let lossy_off = spread::spread(Variant::ROCE_LOSSY, false, 1, dur);
    assert_eq!(lossy_on.pause_all_us, 0.0);
    assert!(
        lossy_on.victim_b > 0.95 * lossy_off.victim_b,
        "{}",
        lossy_on.victim_b
    );
    // MetaRoCE (lossy, step ECN) keeps both victims and the leaf's buffer.
    let m_on = spread::spread(Variant::Meta, true, 1, dur);
    let m_off = spread::spread(Variant::Meta, false, 1, dur);
    assert!(m_on.victim_a > 0.95 * m_off.victim_a);
    assert!(m_on.victim_b > 0.95 * m_off.victim_b);
    assert!(m_on.leaf0_peak < m_on.leaf0_size / 4);
}

#[test]
fn halving_doubling_completes_in_its_steps_no_faster_than_ideal() {
    let ft = collectives::fabric(true);
    let bytes = 64 << 10;
    for (a, steps) in [(sizes::Algo::HalvingDoubling, 6), (sizes::Algo::Ring, 14)] {
        assert_eq!(a.steps(8), steps);
        let ideal = sizes::ideal_ns(&sizes::workload(&ft, a, 8, bytes), &ft);
        for v in [Variant::Meta, Variant::ROCE_PFC, Variant::IRN_LOSSY] {
            let (t, depth) = sizes::cct(v, a, 8, bytes, 1, 5_000_000);
            assert_eq!(depth as u64, steps, "{a:?}");
            let t = t.expect("completes") as f64;
            assert!(t >= ideal && t < 3.0 * ideal, "{a:?} {v:?} {t} {ideal}");
        }
    }
    // Halving-doubling over 8 ranks on 4 leaves: the partner i ^ 4 is on the same leaf,
    // so two of its six steps take the 2-hop path and the ideal is below six 4-hop steps.
    let hd = sizes::workload(&ft, sizes::Algo::HalvingDoubling, 8, 8);
    let local = hd
        .transfers
        .iter()
        .filter(|t| ft.tor_of(t.src) == ft.tor_of(t.dst))
        .count();
    assert_eq!(local, 2 * 8);
    assert!(sizes::ideal_ns(&hd, &ft) < 6.0 * 4.0 * DELAY as f64 + 6.0 * 3.0 * 100.0);
}

#[test]
fn three_tier_permutation_crosses_the_core() {
    let ft = tier3::fabric(2, 1, 1);
    let per_pod = u32::from(ft.hosts_per_tor) * u32::from(ft.tors_per_pod);
    let p = tier3::pairs(&ft, 3);
    assert_eq!(p.len() as u32, ft.hosts());
    assert!(p.iter().all(|(a, b)| a / per_pod != b / per_pod));
    let ft4 = tier3::fabric(4, 2, 2);
    assert_eq!(ft4.tor_down_gbps(), 2 * ft4.tor_up_gbps());
    let (d, u) = ft4.agg_gbps();
    assert_eq!(d, 2 * u);
    let b = tier3::ecmp_bound(ft, 1, 1);
    assert!(b > 0.2 && b <= 1.0, "{b}");
    let g = tier3::goodput(Variant::Meta, ft, 1, 1, 300_000);
    assert!(g > 0.5 && g < 1.0, "{g}");
}

#[test]
fn mix_gives_every_transfer_its_own_flow_and_finishes() {
    let ft = leaf_spine(1, 2, 2, 2);
    let v = Variant::ROCE_LOSSY;
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, 1, 0);
    let mut wl = Workload::new();
    // Two transfers of different sizes on one pair: one flow each.
    wl.push(0, 2, 10_000, 0, vec![], 0);
    wl.push(0, 2, 30_000, 5_000, vec![], 0);
    wl.push(1, 3, 20_000, 0, vec![], 1);
    assert!(mix::run_per_transfer(&mut s, v, wl, 2_000_000));
    assert_eq!(s.flows.len(), 3);
    assert_eq!(
        (s.delivered(0), s.delivered(1), s.delivered(2)),
        (10_000, 30_000, 20_000)
    );
    let m = mix::mix(Variant::Meta, 0.5, 200_000, 1);
    assert!(
        m.incasts.iter().all(Option::is_some),
        "every incast completes"
    );
    assert!(
        !m.flows.is_empty() && m.flows.iter().all(|x| x.2),
        "background completes"
    );
    assert_eq!(m.drops, 0);
}

#[test]
fn reordering_hurts_go_back_n_not_metaroce() {
    let dur = 500_000;
    let r0 = reorder::goodput(Variant::ROCE_LOSSY, 0.0, 1, dur);
    let r1 = reorder::goodput(Variant::ROCE_LOSSY, 0.01, 1, dur);
    assert!(r1 < 0.7 * r0, "go-back-N rewinds on reordering: {r0} {r1}");
    let m0 = reorder::goodput(Variant::Meta, 0.0, 1, dur);
    let m1 = reorder::goodput(Variant::Meta, 0.01, 1, dur);
    assert!(m1 > 0.9 * m0, "{m0} {m1}");
}

#[test]
fn short_flows_among_long_flows_finish_while_the_long_ones_run() {
    let r = elephants::one(Variant::Meta, 100_000, 1, true);
    // Every 1/4 window an incast, the first at 1/4: 3 in the window, all complete.
    assert_eq!(r.mix.incasts.len(), 3);
    assert!(
        r.mix.incasts.iter().all(Option::is_some),
        "{:?}",
        r.mix.incasts
    );
    assert!(
        !r.mix.flows.is_empty() && r.mix.flows.iter().all(|x| x.2),
        "foreground completes"
    );
    // A short flow cannot beat its bytes at line rate.
    assert!(r
        .mix
        .flows
        .iter()
        .all(|&(b, fct, _)| fct >= b as f64 * 8.0 / GBPS as f64));
    // The long flows never finish (1 GiB each) but carry traffic all along.
    assert!(r.bg > 0.2 && r.bg < 1.0, "{}", r.bg);
    assert_eq!(r.mix.drops, 0);
}

#[test]
fn the_large_permutation_is_1024_hosts_on_another_leaf() {
    let (ft1, ft4) = (large::fabric(32, 1), large::fabric(32, 4));
    assert_eq!((ft1.hosts(), ft4.hosts()), (1024, 1024));
    assert_eq!((ft1.tor_uplinks, ft4.tor_uplinks), (32, 8));
    let pairs = permutation::pairs(&ft1, 32, 3);
    assert_eq!(pairs.len(), 1024);
    assert!(pairs.iter().all(|&(a, b)| a / 32 != b / 32));
    let mut dst: Vec<u32> = pairs.iter().map(|p| p.1).collect();
    dst.sort_unstable();
    assert_eq!(dst, (0..1024).collect::<Vec<_>>());
    // The 3-tier rows: 1,024 hosts, 64 a pod, every flow to another pod; 1:1 has a
    // core for every aggregation uplink, 4:1 a quarter of the 1:1 tree's uplink capacity
    // at each tier.
    let (t1, t4) = (tier3::tree(16, 8, 8, 1, 1), tier3::tree(16, 8, 8, 2, 2));
    assert_eq!((t1.hosts(), t4.hosts()), (1024, 1024));
    assert_eq!(
        (tier3::per_pod(&t1), t1.tor_uplinks, t1.cores()),
        (64, 8, 64)
    );
    assert_eq!((t4.tor_uplinks, t4.agg_uplinks, t4.cores()), (4, 4, 16));
    let pairs = permutation::pairs(&t1, tier3::per_pod(&t1), 3);
    assert!(pairs.iter().all(|&(a, b)| a / 64 != b / 64));
}

#[test]
fn ratio_and_incast_cells_judge_only_what_ran() {
    // Column 0: two finished seeds at 1× and 2× of a 10 µs ideal; column 1: a seed
    // did not finish; column 2: no seed at all.
    let cols = vec![vec![Some(1.0), Some(2.0)], vec![Some(1.0), None], vec![]];
    let (cells, m) = ratio_cells(&cols, 10_000.0, 0);
    assert_eq!(m, 1.5);
    assert!(
        cells[0].starts_with("1.50 ± ") && cells[0].ends_with("× (15 µs)"),
        "{}",
        cells[0]
    );
    assert_eq!(cells[1], "not done (1/2 seeds)");
    assert_eq!(cells[2], "—");
    assert_eq!(ratio_cells(&cols, 10_000.0, 1).1, f64::INFINITY);
    assert_eq!(ratio_cells(&cols, 10_000.0, 2).1, f64::INFINITY);
    // Incasts: per seed the mean completion over the ideal; a seed without incasts
    // is not a zero, and a column without any judges nothing.
    let res: Vec<Vec<Vec<Option<u64>>>> = vec![
        vec![vec![Some(10_000), Some(30_000)], vec![]],
        vec![vec![Some(10_000), None]],
        vec![vec![], vec![]],
    ];
    let (cells, m) = mix::incast_cells(&res, |x| x, 10_000.0, 0);
    assert_eq!(m, Some(2.0));
    assert_eq!(cells[0], "2.00× (20 µs)", "one seed: no interval");
    assert_eq!(cells[1], "not done (0/1 seeds)");
    assert_eq!(cells[2], "—");
    assert_eq!(mix::incast_cells(&res, |x| x, 10_000.0, 2).1, None);
    // FCT rows pool seeds and split at 100 KB.
    let runs = vec![vec![
        vec![(1_000u64, 5_000.0, true)],
        vec![(200_000, 50_000.0, false)],
    ]];
    let rows = mix::fct_rows(&runs, |x| x, "t");
    assert!(
        rows[0].cells[0].contains("(n 2, 1 unfinished)"),
        "{}",
        rows[0].cells[0]
    );
    assert!(
        rows[1].cells[0].starts_with("5 / 5 / 5 µs (n 1)"),
        "{}",
        rows[1].cells[0]
    );
}
