//! In-path reordering is not loss (Documentation/transport.rst, "ACK processing and
//! loss detection", "Reordering hold"): a packet overtaken on its path by fewer than
//! three later ones is not declared lost (`DUP_THRESH`), and once the connection has
//! seen an overtaken packet arrive, none is until it is a reordering window late; a
//! tail is left to the tail-loss probe.

mod common;
use common::*;
use metaroce_proto::sack::Sack;

/// Retransmissions and data packets sent carrying 16 messages of 64 KiB on each of 4
/// streams over 8 paths with `loss` and a fraction `p` of packets reordered (sent
/// ahead of everything in flight on their path, as netem's `reorder` does), and the
/// transfer's time (ns) and data packets lost.
fn run(seed: u64, p: f64, loss: f64) -> (u32, u32, u64, usize) {
    let mut n = Net::new(seed, 8, loss);
    n.reorder = p;
    n.bulk();
    let s = n.a.stats();
    (s.retx, s.data_tx, n.now, n.lost_psns.len())
}

fn spurious(seed: u64, p: f64) -> (u32, u32) {
    let (retx, tx, _, _) = run(seed, p, 0.0);
    (retx, tx)
}

/// The worst share resent over 40 seeds (`Net::new` makes a seed odd: these are the
/// odd ones, 40 distinct runs).
fn worst(p: f64) -> f64 {
    (1u64..=40)
        .map(|s| 2 * s - 1)
        .map(|seed| {
            let (retx, tx) = spurious(seed, p);
            let r = f64::from(retx) / f64::from(tx);
            println!(
                "reorder {p}: seed {seed}: {retx} of {tx} retransmitted ({:.2} %)",
                r * 100.0
            );
            r
        })
        .fold(0.0, f64::max)
}

#[test]
fn light_reordering_costs_no_retransmission() {
    // Before the threshold: 3.3 % at 1 %, 16 % at 5 %.
    assert_eq!(worst(0.01), 0.0);
    assert!(worst(0.05) <= 0.002);
}

/// The target: at most 1 % at 25 %. A packet count cannot tell a packet
/// overtaken by three from a lost one (69 % with a threshold of 1, 13-20 % with 3); the
/// reordering hold's time can (median 0.05 %, worst 0.34 % over 40 seeds).
#[test]
fn heavy_reordering_costs_under_one_percent() {
    assert!(worst(0.25) <= 0.01);
}

/// Real losses amid reordering are still found, and soon: with 1 % loss and 25 %
/// reordering every loss is resent with few spurious retransmissions beside them, and
/// the transfer takes at most 15 % longer than with the reordering alone (the hold's
/// wait; measured 7 %).
#[test]
fn losses_amid_reordering_are_found_within_a_window() {
    let (mut t_reo, mut t_both) = (0u64, 0u64);
    for seed in (1u64..=10).map(|s| 2 * s - 1) {
        let (_, _, t, _) = run(seed, 0.25, 0.0);
        t_reo += t;
        let (retx, tx, t, lost) = run(seed, 0.25, 0.01);
        t_both += t;
        println!("seed {seed}: {lost} lost, {retx} of {tx} resent, {t} ns");
        assert!(retx as usize >= lost);
        assert!(
            f64::from(retx) - lost as f64 <= 0.01 * f64::from(tx),
            "{retx} {lost}"
        );
    }
    println!("reordering alone {t_reo} ns, with 1 % loss {t_both} ns");
    assert!(t_both * 100 <= t_reo * 115, "{t_both} {t_reo}");
}

#[test]
fn nth_highest_counts_set_bits_from_the_top() {
    let s = Sack::from_words([0b1011, 0, 1 << 5, 1 << 63]);
    assert_eq!(s.nth_highest(1), Some(255));
    assert_eq!(s.nth_highest(2), Some(128 + 5));
    assert_eq!(s.nth_highest(3), Some(3));
    assert_eq!(s.nth_highest(4), Some(1));
    assert_eq!(s.nth_highest(5), Some(0));
    assert_eq!(s.nth_highest(6), None);
    assert_eq!(Sack::EMPTY.nth_highest(1), None);
    assert_eq!(s.nth_highest(1), s.highest());
}

/// RPCs (64 KiB messages one at a time, 8 paths, the kernel's configuration) at 1 %
/// loss of data and ACKs on a host whose timer resolves only 4 ms ticks, as the
/// kernel's `timer_list` at HZ=250 (deadlines fire on the next tick; the kernel sets
/// two ticks of pacing slack): reordering must not make a loss wait a tick more often,
/// or longer, than without it. A hold is a few microseconds; a path whose ACKs have
/// stopped cannot end it before the tick, so there the count rule stays (reorder.rs,
/// `hold_untimely`), and a hold ended late rearms the probe timeout as from its start.
/// Without those two rules, 1 % reordering took the median from 19 us to 3.9 ms.
#[test]
fn reordering_costs_rpcs_no_timer_tick() {
    let tick = 4_000_000u64;
    let mut stats = Vec::new();
    for reo in [0.0, 0.01, 0.25] {
        let mut all = Vec::new();
        for seed in [3u64, 5, 9, 11] {
            let mut n = Net::new(seed, 8, 0.01);
            let (mut ca, mut cb) = (kernel_like_config(1, 2), kernel_like_config(2, 1));
            ca.pacing_slack_us = (2 * tick / 1000) as u16;
            cb.pacing_slack_us = ca.pacing_slack_us;
            n.a = Conn::new(ca);
            n.b = Conn::new(cb);
            n.reorder = reo;
            n.tick = tick;
            n.now = 1_000_000_000;
            for _ in 0..500 {
                let t0 = n.now;
                n.app_a.msgs[0].push(64 * 1024);
                assert!(n.run(t0 + 5_000_000_000));
                all.push(n.now - t0);
            }
            assert!(n.app_b.violations.is_empty());
        }
        all.sort_unstable();
        let mean = all.iter().sum::<u64>() / all.len() as u64;
        let over = all.iter().filter(|&&t| t > 1_000_000).count();
        let p50 = all[all.len() / 2];
        println!(
            "reorder {reo}: mean {mean} ns, p50 {p50} ns, {over} of {} over 1 ms",
            all.len()
        );
        stats.push((mean, p50, over));
    }
    let (mean0, _, over0) = stats[0];
    for &(mean, p50, over) in &stats[1..] {
        assert!(p50 < 100_000, "{p50}");
        assert!(over * 100 <= over0 * 110, "{over} {over0}");
        assert!(mean * 100 <= mean0 * 115, "{mean} {mean0}");
    }
}

/// Bulk transfers (16 messages of 64 KiB on each of 4 streams, the kernel's
/// configuration, every path 1 ms longer, as the bench's `netem delay 1ms reorder 25%`)
/// on the same 4 ms ticks: the count rule comes back only at a message's end, when
/// nothing more is being sent, so deep reordering is not resent. Measured: 0.2 % (1
/// path) and 0.8 % (8 paths) resent; 39 % and 8.7 % when a drained path alone brought
/// the count back, 74 % and 14 % before the hold.
#[test]
fn deep_reordering_on_timer_ticks_is_not_resent_in_bulk() {
    let tick = 4_000_000u64;
    for paths in [1u8, 8] {
        let (mut retx, mut tx) = (0u32, 0u32);
        for seed in [1u64, 3, 5, 7] {
            let mut n = Net::new(seed, paths, 0.0);
            let (mut ca, mut cb) = (kernel_like_config(1, 2), kernel_like_config(2, 1));
            ca.paths = paths;
            cb.paths = paths;
            ca.pacing_slack_us = (2 * tick / 1000) as u16;
            cb.pacing_slack_us = ca.pacing_slack_us;
            n.a = Conn::new(ca);
            n.b = Conn::new(cb);
            n.reorder = 0.25;
            n.tick = tick;
            for d in n.path_delay.iter_mut() {
                *d += 1_000_000;
            }
            n.bulk();
            retx += n.a.stats().retx;
            tx += n.a.stats().data_tx;
        }
        let r = f64::from(retx) / f64::from(tx);
        println!("{paths} paths: {retx} of {tx} resent ({:.2} %)", r * 100.0);
        assert!(r <= 0.02, "{r}");
    }
}
