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

fn worst(p: f64) -> f64 {
    (1u64..=10)
        .into_iter()
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
/// reordering hold's time can (0-0.1 %).
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
    for seed in 1u64..=10 {
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
