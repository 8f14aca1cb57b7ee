//! Tests of the scenario plumbing: each baseline runs on the fabric it is labelled
//! with, the workload driver completes collectives no faster than the ideal bound, and
//! the scenario metrics score delivered bytes.

use super::*;
use crate::stats::jain_over_time;
use crate::workload::{all_to_all, ring_allreduce, Workload};

#[test]
fn variants_get_their_fabric_and_ecn() {
    assert!(Variant::ROCE_PFC.switch().pfc.is_some());
    assert!(Variant::ROCE_LOSSY.switch().pfc.is_none());
    assert!(Variant::IRN_LOSSY.switch().pfc.is_none());
    assert!(Variant::Meta.switch().pfc.is_none());
    assert_eq!(Variant::Meta.switch().ecn, Ecn::step(K));
    assert_eq!(Variant::ROCE_PFC.switch().ecn.kmin, 400_000);
    assert_eq!(Variant::ROCE_LOSSY.switch().ecn.kmax, 1_600_000);
    // Same buffer model in a row.
    for v in [
        Variant::Meta,
        Variant::ROCE_PFC,
        Variant::ROCE_LOSSY,
        Variant::IRN_LOSSY,
    ] {
        assert_eq!(v.switch().buffer_per_tbps, 2_500_000);
        assert!(v.switch().strict_ctrl);
    }
    assert_eq!(Variant::ROCE_LOSSY.roce().ack_timeout_ns, 262_144);
    assert_eq!(Variant::ROCE_PFC.roce().ack_timeout_ns, 67_108_864);
    assert!(Variant::ROCE_PFC.roce().lossless && !Variant::ROCE_LOSSY.roce().lossless);
    let k = Variant::MetaKernel.params(8, 1, 0);
    assert_eq!(k.min_rto_ns, KERNEL_MIN_RTO);
    assert_eq!(Variant::Meta.params(8, 1, 0).min_rto_ns, MIN_RTO);
}

#[test]
fn dcqcn_pfc_incast_pauses_without_drops_and_lossy_drops() {
    let pfc = incast::incast(Variant::ROCE_PFC, 16, 1, 400_000);
    assert_eq!(pfc.drops, 0, "lossless fabric drops nothing");
    assert!(pfc.paused_us > 0.0, "incast onto a lossless port pauses");
    let lossy = incast::incast(Variant::ROCE_LOSSY, 16, 1, 400_000);
    assert!(lossy.drops > 0, "the same incast without PFC drops");
    assert_eq!(lossy.paused_us, 0.0);
    // Delivered-bytes utilisation is a fraction of the line.
    assert!(
        pfc.util_all > 0.3 && pfc.util_all <= 1.0,
        "{}",
        pfc.util_all
    );
}

#[test]
fn metaroce_incast_is_fair_and_keeps_the_queue_small() {
    let m = incast::incast(Variant::Meta, 16, 1, 600_000);
    assert_eq!(m.drops, 0);
    assert!(m.peak_q < 500_000, "{}", m.peak_q);
    assert!(m.util_all > 0.8, "{}", m.util_all);
}

#[test]
fn metaroce_permutation_fills_most_of_the_bisection() {
    let ft = FatTree::two_tier(2, 4, 1);
    let g = permutation::goodput(
        Variant::Meta,
        ft,
        u32::from(ft.hosts_per_tor),
        1,
        1,
        600_000,
    );
    assert!(g > 0.7 && g < 1.0, "{g}");
}

#[test]
fn ring_allreduce_completes_no_faster_than_ideal() {
    for v in [Variant::Meta, Variant::ROCE_LOSSY, Variant::IRN_LOSSY] {
        let t = collectives::cct(v, collectives::Coll::Ring, 8, 256 << 10, 1, 5_000_000)
            .expect("completes");
        let ideal = collectives::ideal_ns(collectives::Coll::Ring, 8, 256 << 10);
        assert!(
            t as f64 >= ideal && (t as f64) < 3.0 * ideal,
            "{v:?} {t} {ideal}"
        );
    }
}

#[test]
fn driver_posts_dependent_transfers_only_after_completion() {
    let ft = leaf_spine(1, 2, 2, 2);
    let v = Variant::ROCE_PFC;
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, 1, 0);
    let mut wl = Workload::new();
    let a = wl.push(0, 2, 100_000, 0, vec![], 0);
    wl.push(2, 1, 100_000, 0, vec![a], 0);
    assert!(run_workload(&mut s, v, wl, 2_000_000));
    let d = s.driver.as_ref().unwrap();
    assert!(d.posted_at[1].unwrap() >= d.done_at[0].unwrap());
    assert!(d.done_at[1].unwrap() > d.done_at[0].unwrap());
    assert_eq!(s.delivered(0), 100_000);
    assert_eq!(s.delivered(1), 100_000);
}

#[test]
fn workload_flows_reuse_one_connection_per_pair() {
    let ft = leaf_spine(1, 2, 2, 2);
    let v = Variant::Meta;
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, 1, 0);
    let ranks = [0, 2, 1, 3];
    assert!(run_workload(
        &mut s,
        v,
        ring_allreduce(&ranks, 64 << 10, 0, 0),
        5_000_000
    ));
    // 6 steps over a 4-ring: 4 pairs, each a single connection.
    assert_eq!(s.flows.len(), 4);
    let mut s: Sim<8, 1, 64> = sim(v, ft, 8, 1, 0);
    assert!(run_workload(
        &mut s,
        v,
        all_to_all(&ranks, 8192, 0, 0),
        5_000_000
    ));
    assert_eq!(s.flows.len(), 12);
}

#[test]
fn gray_spine_hits_the_single_path_baseline() {
    let clean = loss::goodput(Variant::ROCE_LOSSY, loss::Loss::LastHop(0.0), 1, 500_000);
    let gray = loss::goodput(Variant::ROCE_LOSSY, loss::Loss::GraySpine(1.0), 1, 500_000);
    assert!(clean > 0.9 * line_bytes(), "{clean}");
    assert!(
        gray < 0.01 * line_bytes(),
        "the QP's only spine drops everything: {gray}"
    );
    let meta = loss::goodput(Variant::Meta, loss::Loss::GraySpine(1.0), 1, 1_000_000);
    assert!(
        meta > 0.6 * line_bytes(),
        "MetaRoCE routes around it: {meta}"
    );
}

/// The ECMP max-min bound of the permutation is a fraction of capacity, and
/// progressive filling shares a link equally.
#[test]
fn maxmin_shares_links_and_bounds_the_permutation() {
    let r = permutation::maxmin(&[vec![0, 1], vec![1], vec![2]], 3);
    assert_eq!(r, vec![0.5, 0.5, 1.0]);
    let b = permutation::ecmp_maxmin_bound(FatTree::two_tier(4, 8, 1), 8, 1, 1);
    assert!(b > 0.2 && b <= 1.0, "{b}");
}

/// An `a`-path and a `b`-path MetaRoCE connection from two hosts of one leaf to two of
/// another over a single spine: one shared 100 Gb/s uplink, each receiver's own link
/// free (so the receivers' hints, 100 Gb/s each, do not split it: the senders' windows
/// must). Returns the bytes each delivered over the second half of the run and the
/// smallest Jain index over 10-RTT windows from 50 RTT on.
fn shared_uplink(a: u8, b: u8) -> (f64, f64, f64) {
    let dur = 4_000_000;
    let mut s: Sim<8, 1, 64> = sim(Variant::Meta, leaf_spine(1, 2, 2, 1), 8, 1, 20_000);
    s.params.paths = a;
    add(&mut s, Variant::Meta, 0, 2, true, 0);
    s.params.paths = b;
    add(&mut s, Variant::Meta, 1, 3, true, 0);
    s.run(dur);
    let d = delivered_between(&s, dur / 2, dur);
    let rtt = base_rtt();
    let from = (50.0 * rtt) as u64;
    let times: Vec<u64> = s
        .samples
        .iter()
        .map(|x| x.t)
        .filter(|&t| t >= from)
        .collect();
    let cums: Vec<Vec<u64>> = (0..2)
        .map(|f| {
            s.samples
                .iter()
                .filter(|x| x.t >= from)
                .map(|x| x.delivered[f])
                .collect()
        })
        .collect();
    let worst = jain_over_time(&times, &cums, (10.0 * rtt) as u64)
        .into_iter()
        .map(|(_, j)| j.unwrap_or(0.0))
        .fold(1.0, f64::min);
    (d[0], d[1], worst)
}

/// RFC 6356's second goal ("do no harm"): a connection's windows are coupled (the
/// increase is shared by its paths), so more paths through one bottleneck do not buy
/// a bigger share of it (issue: 8 paths took 75.1 Gb/s against 1 path's 21.5). Issue
/// 14's targets: share ratio within 1.2, Jain over 10-RTT windows within 10 % of 1 by
/// 50 RTT.
#[test]
fn path_count_buys_no_share_of_a_shared_bottleneck() {
    for (a, b) in [(8, 1), (4, 1), (8, 2), (2, 1)] {
        let (da, db, jain) = shared_uplink(a, b);
        let ratio = da / db;
        println!(
            "{a} paths {da:.3e} B, {b} paths {db:.3e} B, ratio {ratio:.2}, \
             worst Jain from 50 RTT {jain:.3}"
        );
        assert!(
            (1.0 / 1.2..=1.2).contains(&ratio),
            "{a}:{b} paths: ratio {ratio:.2}"
        );
        assert!(jain >= 0.9, "{a}:{b} paths: Jain {jain:.3}");
    }
}
