//! Trains (`Config::train`; Documentation/transport.rst, "Spraying"): a path sends up
//! to `train` new DATA packets in a row before the round robin moves on, and a message's
//! last packet ends a run, so a host can hand each run to its network stack as one UDP
//! GSO burst of same-sized datagrams; with 1 the sender sprays packet by packet. Either
//! way every path carries data and every byte arrives, under loss too.

mod common;
use common::*;
use metaroce_proto::conn::{Transmit, TxKind};
use std::cell::RefCell;
use std::rc::Rc;

/// A bulk transfer (4 streams of 16 x 64 KiB) from `a` with `train` (both ends; `loss`
/// on data), returning the path of every new DATA packet `a` sent, in order.
fn paths_sent(train: u8, loss: f64, seed: u64) -> Vec<u8> {
    sent(train, loss, seed, 64 * 1024, 4)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// `streams` streams of 16 messages of `len` bytes from `a` with `train` (both ends;
/// `loss` on data): the path and (stream, MSN) of every new DATA packet `a` sent, in
/// order.
fn sent(train: u8, loss: f64, seed: u64, len: u32, streams: usize) -> Vec<(u8, (u16, u32))> {
    let mut n = Net::new(seed, 8, loss);
    let mut a = config(1, 2, 8);
    let mut b = config(2, 1, 8);
    a.train = train;
    b.train = train;
    n.connect(a, b);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    n.filter = Some(Box::new(move |from_a: bool, t: &Transmit| {
        if let (
            true,
            TxKind::Data {
                retransmit: false,
                stream,
                msn,
                ..
            },
        ) = (from_a, t.kind)
        {
            s.borrow_mut().push((t.path, (stream, msn)));
        }
        false
    }));
    for st in 0..streams {
        n.app_a.msgs[st] = vec![len; 16];
    }
    assert!(n.run(10_000_000_000));
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(n.done());
    assert!(n.app_a.errors.is_empty() && n.app_b.errors.is_empty());
    assert!(n.data_on.iter().all(|&d| d > 0), "{:?}", n.data_on);
    let v = seen.borrow().clone();
    v
}

/// The lengths of the runs of consecutive packets on one path.
fn runs<T: PartialEq>(paths: &[T]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < paths.len() {
        let j = (i..paths.len())
            .find(|&j| paths[j] != paths[i])
            .unwrap_or(paths.len());
        out.push(j - i);
        i = j;
    }
    out
}

#[test]
fn a_path_sends_its_train_before_the_round_robin_moves_on() {
    for seed in 1..=4 {
        let p = paths_sent(4, 0.0, seed);
        let r = runs(&p);
        assert!(r.iter().all(|&n| n <= 4), "seed {seed}: a run above 4");
        let in_full = r.iter().filter(|&&n| n == 4).sum::<usize>();
        eprintln!(
            "train 4, seed {seed}: {} packets, {} in runs of 4",
            p.len(),
            in_full
        );
        assert!(
            in_full * 10 >= p.len() * 7,
            "seed {seed}: {in_full} of {} in full trains",
            p.len()
        );
    }
}

#[test]
fn a_train_of_one_sprays_packet_by_packet() {
    for seed in 1..=4 {
        let p = paths_sent(1, 0.0, seed);
        let r = runs(&p);
        let repeated = r.iter().filter(|&&n| n > 1).map(|n| n - 1).sum::<usize>();
        eprintln!(
            "train 1, seed {seed}: {} packets, {repeated} after one on the same path",
            p.len()
        );
        // Only when no other path has room does a path send twice in a row.
        assert!(repeated * 20 <= p.len(), "seed {seed}: {repeated}");
    }
}

#[test]
fn trains_deliver_everything_under_loss() {
    for seed in 1..=4 {
        let p = paths_sent(8, 0.01, seed);
        assert!(runs(&p).iter().all(|&n| n <= 8), "seed {seed}");
    }
}

/// Messages of 3 packets (3000 bytes, a 1 KiB MTU) on one stream (a QP's connection)
/// with trains of 4: each message is one run, on a path of its own, never two messages'
/// packets in one run. (Streams take turns packet by packet, so with several a run may
/// hold packets of several.)
#[test]
fn a_message_end_ends_the_run() {
    for seed in 1..=4 {
        let p = sent(4, 0.0, seed, 3000, 1);
        let paths: Vec<u8> = p.iter().map(|x| x.0).collect();
        let r = runs(&paths);
        assert!(r.iter().all(|&n| n <= 3), "seed {seed}: {r:?}");
        // Runs by (path, message): the same runs, so no run spans two messages.
        assert_eq!(runs(&p), r, "seed {seed}");
        let whole = r.iter().filter(|&&n| n == 3).count();
        assert!(
            whole * 10 >= r.len() * 9,
            "seed {seed}: {whole} of {}",
            r.len()
        );
    }
}

/// 16 messages of 64 KiB from `a` with the kernel's settings and `train`, the receiver
/// taking datagrams in batches of `rx_window` ns (0: each alone): the datagrams `b`
/// sent (its ACKs) and how long it took, ns.
fn acks(train: u8, rx_window: u64) -> (u64, u64) {
    let (n, took) = kernel_transfer(train, rx_window, 0.0, 3);
    (n.sent[1], took)
}

/// [`acks`]'s transfer under `loss` (data and ACKs) with seed `seed`: the network and
/// how long it took, ns.
fn kernel_transfer(train: u8, rx_window: u64, loss: f64, seed: u64) -> (Net, u64) {
    let mut n = Net::new(seed, 8, loss);
    n.lose_acks = loss > 0.0;
    let mut a = kernel_like_config(1, 2);
    let mut b = kernel_like_config(2, 1);
    a.train = train;
    b.train = train;
    n.connect(a, b);
    n.rx_window = rx_window;
    n.app_a.msgs[0] = vec![64 * 1024; 16];
    let t0 = n.now;
    assert!(n.run(10_000_000_000));
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(n.done());
    let took = n.now - t0;
    (n, took)
}

/// Under 1 % loss of data and ACKs, in receive batches: trains of 4 resend nothing that
/// was not lost, and take at most a quarter longer than spraying summed over 8 seeds
/// (a lost packet that ends a path's run is found by a tail probe or by the path's
/// next run, not by the next packet on it).
#[test]
fn under_loss_a_run_resends_only_what_was_lost() {
    for w in [2_000, 6_000] {
        let (mut t1, mut t4, mut p1, mut p4) = (0, 0, 0, 0);
        for seed in 1..=8 {
            for train in [1, 4] {
                let (n, took) = kernel_transfer(train, w, 0.01, seed);
                let spurious = n
                    .retx
                    .iter()
                    .filter(|&&(_, _, s, m, o)| !n.lost_data.contains(&(s, m, o)))
                    .count();
                assert_eq!(spurious, 0, "seed {seed}, train {train}, batches of {w} ns");
                let probes = tail_probe_count(&n);
                if train == 1 {
                    (t1, p1) = (t1 + took, p1 + probes);
                } else {
                    (t4, p4) = (t4 + took, p4 + probes);
                }
            }
        }
        eprintln!("1 % loss, batches of {w} ns: sprayed {t1} ns, {p1} tail probes; trains of 4 {t4} ns, {p4} tail probes");
        assert!(t4 * 4 <= t1 * 5, "{w}: {t4} ns against {t1}");
    }
}

/// A run's packets reach the receiver one after another on one path, so each path's
/// `ack_every` (2) comes due within the run. A receiver that takes its datagrams in
/// batches (as a NAPI poll delivers them: the kernel sends one ACK datagram a batch)
/// answers a run with one ACK datagram, as it answers sprayed packets: trains of 4 add
/// none, and the transfer takes no longer. Answered one by one, runs cost ACKs: each
/// path's second packet is due alone, with fewer other paths' ACKs to bundle.
#[test]
fn in_receive_batches_a_run_costs_no_more_acks() {
    for w in [5_000, 20_000] {
        let (sprayed, t1) = acks(1, w);
        let (runs, t4) = acks(4, w);
        eprintln!("batches of {w} ns: ACK datagrams {sprayed} sprayed, {runs} in trains of 4; {t1} / {t4} ns");
        assert!(runs * 10 <= sprayed * 11, "{w}: {runs} against {sprayed}");
        assert!(t4 * 10 <= t1 * 11, "{w}: {t4} ns against {t1}");
    }
    let (sprayed, _) = acks(1, 0);
    let (runs, _) = acks(4, 0);
    eprintln!("one by one: ACK datagrams {sprayed} sprayed, {runs} in trains of 4");
    assert!(runs > sprayed, "{runs} against {sprayed}");
}
