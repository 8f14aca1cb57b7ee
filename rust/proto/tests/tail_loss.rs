//! Tail-loss probes (Documentation/transport.rst, "Tail-loss probe"; RFC 8985 section
//! 7): a packet lost with nothing sent after it on its path has no SACK gap to reveal
//! it. After the path's probe timeout (PTO, about 1¼ round trips) the newest packet in
//! flight there is sent again (on the path with the shortest round trip), and a probe
//! marker follows the older ones on the path: its answer shows them lost. Only the RTO
//! after that is a path timeout: random loss neither abandons nor moves a path.

mod common;
use common::*;
use metaroce_proto::conn::{Connection, Event, LossCause, TxKind};

fn count(n: &Net, f: impl Fn(&Event) -> bool) -> usize {
    n.app_a.events.iter().filter(|e| f(e)).count()
}

/// Packets `a` declared lost for `why`.
fn losses(n: &Net, why: LossCause) -> usize {
    count(
        n,
        |e| matches!(e, Event::Lost { cause, .. } if *cause == why),
    )
}

fn tail_probes(n: &Net) -> usize {
    losses(n, LossCause::TailProbe)
}

fn timeouts(n: &Net) -> usize {
    count(n, |e| matches!(e, Event::Timeout { .. }))
}

/// Posts one message of `len` bytes on stream 0 and runs until it is acknowledged;
/// the time it took, ns.
fn rpc(n: &mut Net, len: u32) -> u64 {
    let t0 = n.now;
    n.app_a.msgs[0].push(len);
    assert!(
        n.run(t0 + 1_000_000_000),
        "message {} stuck",
        n.app_a.msgs[0].len()
    );
    n.now - t0
}

/// A filter dropping the data packets from `a` whose ordinal (the first sent after the
/// filter is installed = 0, retransmissions included) `drop` names.
fn drop_data(drop: &'static [u64]) -> Filter {
    let mut k = 0u64;
    Box::new(move |from_a, t| {
        if !from_a || !matches!(t.kind, TxKind::Data { .. }) {
            return false;
        }
        k += 1;
        drop.contains(&(k - 1))
    })
}

#[test]
fn a_lost_tail_is_probed_not_timed_out() {
    // One path, messages of one packet: every loss is a tail loss.
    let mut n = Net::new(7, 1, 0.0);
    n.lose_acks = false;
    // Twenty lossless messages: the path's RTT variance settles (it starts at half
    // the first sample, RFC 6298).
    let mut warm = 0;
    for _ in 0..20 {
        warm = rpc(&mut n, 1024);
    }
    n.filter = Some(drop_data(&[0]));
    let lossy = rpc(&mut n, 1024);
    let rto = n.a.path(0).map(|t| t.srtt).unwrap();
    assert_eq!(tail_probes(&n), 1, "{:?}", n.app_a.events);
    assert_eq!(timeouts(&n), 0, "{:?}", n.app_a.events);
    assert_eq!(n.a.stats().moves, 0);
    // A probe timeout (5/4 of a round trip here) and one round trip more: well under
    // the 50 µs RTO floor this configuration has.
    assert!(
        lossy < warm + 50_000 && lossy <= 3 * warm,
        "lost tail took {lossy} ns (lossless {warm} ns, srtt {rto} ns)"
    );
    assert_eq!(n.retx.len(), 1);
    assert_eq!(n.app_b.completed[0].len(), 21);
}

#[test]
fn the_marker_reveals_the_earlier_losses_on_its_path() {
    // One path, a message of four packets whose last three are lost: the probe
    // takes the fourth out of flight and a marker follows the other two; its answer
    // shows them missing, and all three are resent.
    let mut n = Net::new(11, 1, 0.0);
    n.lose_acks = false;
    rpc(&mut n, 1024);
    n.filter = Some(drop_data(&[1, 2, 3]));
    rpc(&mut n, 4 * 1024);
    assert_eq!(tail_probes(&n), 1, "{:?}", n.app_a.events);
    assert_eq!(timeouts(&n), 0, "{:?}", n.app_a.events);
    assert_eq!(n.a.stats().sack_lost, 2, "{:?}", n.app_a.events);
    let gaps = losses(&n, LossCause::SackGap);
    assert_eq!(gaps, 2, "{:?}", n.app_a.events);
    assert_eq!(n.retx.len(), 3);
}

/// Over `paths` paths, four one-packet messages, then a fifth whose packet and its
/// first resend are both lost.
fn tail_and_resend_lost(paths: u8) -> Net {
    let mut n = Net::new(13, paths, 0.0);
    n.lose_acks = false;
    for _ in 0..4 {
        rpc(&mut n, 1024);
    }
    n.filter = Some(drop_data(&[0, 1]));
    rpc(&mut n, 1024);
    n
}

#[test]
fn a_lost_probe_ends_in_a_path_timeout() {
    // One path: the tail and its resend are both lost. The resend went out after the
    // probe, so the path's deadline is its RTO, whose expiry is a path timeout
    // (probing, the data resent once the path answers); the message completes.
    let n = tail_and_resend_lost(1);
    assert_eq!(tail_probes(&n), 1, "{:?}", n.app_a.events);
    assert_eq!(timeouts(&n), 1, "{:?}", n.app_a.events);
    assert_eq!(n.lost_psns.len(), 2);
    assert_eq!(n.app_b.completed[0].len(), 5);
}

#[test]
fn a_lost_resend_is_probed_again_on_its_new_path() {
    // Two paths: the tail and its resend (which avoids the path it was lost on) are
    // both lost; the second path's probe timeout resends it again, back on the first
    // path. No path times out.
    let n = tail_and_resend_lost(2);
    assert_eq!(tail_probes(&n), 2, "{:?}", n.app_a.events);
    assert_eq!(timeouts(&n), 0, "{:?}", n.app_a.events);
    let (a, b) = (n.lost_psns[0].0, n.lost_psns[1].0);
    assert_ne!(a, b, "the resend avoids the path it was lost on");
    assert_eq!(n.retx.last().map(|r| r.0), Some(a));
    assert_eq!(n.app_b.completed[0].len(), 5);
}

#[test]
fn the_probe_is_resent_over_the_fastest_path_and_the_marker_holds_its_own() {
    // Four paths of different round trips; a message of 8 packets, two per path; the
    // two on the slowest path are lost. The probe resends the newer over the fastest
    // path, and the marker's answer shows the older lost.
    let mut n = Net::new(17, 4, 0.0);
    n.lose_acks = false;
    n.path_delay = [9_000, 2_000, 5_000, 3_000, 0, 0, 0, 0];
    for _ in 0..20 {
        rpc(&mut n, 8 * 1024);
    }
    let mut lost = 0;
    n.filter = Some(Box::new(move |from_a, t| {
        let hit = from_a
            && t.path == 0
            && matches!(
                t.kind,
                TxKind::Data {
                    retransmit: false,
                    ..
                }
            );
        if hit && lost < 2 {
            lost += 1;
            return true;
        }
        false
    }));
    rpc(&mut n, 8 * 1024);
    assert_eq!(n.lost_psns.len(), 2, "{:?}", n.app_a.events);
    assert_eq!(tail_probes(&n), 1, "{:?}", n.app_a.events);
    assert_eq!(timeouts(&n), 0, "{:?}", n.app_a.events);
    // Both resent over the fastest path (1).
    assert_eq!(n.retx.len(), 2);
    assert!(n.retx.iter().all(|r| r.0 == 1), "{:?}", n.retx);
    assert_eq!(n.a.stats().sack_lost, 1);
}

/// p50 and p99 of `v` (nearest rank).
fn pct(v: &mut [u64]) -> (u64, u64) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    (at(0.50), at(0.99))
}

/// One 16 KiB message at a time over 8 paths at 1 % random loss of data and ACKs
/// (3,000 messages): the tail of every path's share is a tail loss when lost.
#[test]
fn rpcs_at_one_percent_loss_keep_their_paths_and_their_tail() {
    let mut moves = 0;
    let mut worst = 0.0f64;
    for seed in [3u64, 5, 9] {
        let mut n = Net::new(seed, 8, 0.01);
        let mut t: Vec<u64> = (0..3000).map(|_| rpc(&mut n, 16 * 1024)).collect();
        let (p50, p99) = pct(&mut t);
        let s = n.a.stats();
        println!(
            "seed {seed}: p50 {:.1} us p99 {:.1} us, {} tail probes, {} timeouts, {} moves, \
             {} retransmissions of {} packets",
            p50 as f64 / 1e3,
            p99 as f64 / 1e3,
            tail_probes(&n),
            s.timeouts,
            s.moves,
            s.retx,
            s.data_tx,
        );
        moves += s.moves;
        worst = worst.max(p99 as f64 / p50 as f64);
    }
    assert_eq!(moves, 0, "random loss moved a path");
    assert!(worst <= 2.0, "p99 {worst:.2} x p50");
}

/// A pair with the kernel module's timers (a 20 ms initial RTO, a 4 ms floor) on
/// `paths` paths.
fn kernel_net(seed: u64, paths: u8) -> Net {
    let mut n = Net::new(seed, paths, 0.0);
    let (mut ca, mut cb) = (kernel_like_config(1, 2), kernel_like_config(2, 1));
    ca.paths = paths;
    cb.paths = paths;
    n.a = Connection::new(ca);
    n.b = Connection::new(cb);
    n.lose_acks = false;
    n
}

#[test]
fn the_first_flight_has_a_probe_timeout_too() {
    // The tail of a new connection's first message is lost: the RTO armed before any
    // RTT sample becomes a probe timeout with the first sample, not 20 ms later.
    let mut n = kernel_net(7, 1);
    n.filter = Some(drop_data(&[3]));
    let t = rpc(&mut n, 4 * 1024);
    assert_eq!(tail_probes(&n), 1, "{:?}", n.app_a.events);
    assert!(t < 200_000, "first-flight tail took {t} ns");
}

#[test]
fn resends_avoid_a_dead_fastest_path() {
    // The fastest of 8 paths goes dead; one-packet messages. A tail lost there is
    // resent over another path, never back onto the dead one.
    for kernel in [false, true] {
        let mut n = if kernel {
            kernel_net(5, 8)
        } else {
            let mut n = Net::new(5, 8, 0.0);
            n.lose_acks = false;
            n
        };
        n.path_delay = [1_000, 6_000, 7_000, 8_000, 9_000, 6_500, 7_500, 8_500];
        for _ in 0..64 {
            rpc(&mut n, 1024);
        }
        n.blackhole = Some((0, n.a.path(0).unwrap().src_port));
        let before = n.retx.len();
        for _ in 0..16 {
            rpc(&mut n, 1024);
        }
        let onto_dead = n.retx[before..].iter().filter(|r| r.0 == 0).count();
        assert!(n.retx.len() > before, "kernel {kernel}: nothing was lost");
        assert_eq!(onto_dead, 0, "kernel {kernel}: {:?}", &n.retx[before..]);
        assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    }
}

#[test]
fn a_round_trip_step_without_loss_times_no_path_out() {
    // Every path's one-way delay steps from 2 to 25 µs mid-transfer and nothing is
    // lost: probe timeouts fire (their packets were only late), but the markers'
    // answers are due within the RTO, so no path times out.
    for paths in [1u8, 8] {
        let mut n = Net::new(21, paths, 0.0);
        n.path_delay = [2_000; 8];
        for s in 0..4 {
            n.app_a.msgs[s] = vec![64 * 1024; 8];
        }
        let t0 = n.now;
        n.run(t0 + 100_000);
        n.path_delay = [25_000; 8];
        assert!(n.run(t0 + 10_000_000_000));
        assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
        assert_eq!(n.a.stats().timeouts, 0, "{paths} paths: {:?}", n.a.stats());
    }
}

#[test]
fn a_dead_path_costs_round_trips_not_its_rto() {
    // With the kernel's 4 ms RTO floor, one of 8 paths goes dead under a 64 KiB
    // message. Its probe timeout fires a tail-loss probe; the marker goes unanswered
    // for another, and everything the path still held is resent on the others: the
    // message completes in a few round trips (about 10 µs each here), not the RTO.
    // With an ACK per packet (`ack_every` 1, the kernel's before its delayed ACK) and
    // with the kernel's delayed ACK (`ack_every` 2, 100 µs: ten of these round trips).
    for delayed in [false, true] {
        for seed in [3u64, 5, 9] {
            let mut n = kernel_net(seed, 8);
            if !delayed {
                let (mut ca, mut cb) = (*n.a.config(), *n.b.config());
                (ca.ack_every, ca.ack_delay_ns, cb.ack_every, cb.ack_delay_ns) = (1, 0, 1, 0);
                n.a = Connection::new(ca);
                n.b = Connection::new(cb);
            }
            for _ in 0..32 {
                rpc(&mut n, 64 * 1024);
            }
            let warm = rpc(&mut n, 64 * 1024);
            n.blackhole = Some((2, n.a.path(2).unwrap().src_port));
            let dead = rpc(&mut n, 64 * 1024);
            println!("seed {seed}, delayed ACK {delayed}: 64 KiB message {warm} ns, with a dead path {dead} ns");
            assert!(dead < 300_000, "seed {seed}: {dead} ns with a dead path");
            // Resent elsewhere, not timed out: the path keeps its state until its RTO.
            assert_eq!(n.a.stats().timeouts, 0, "seed {seed}: {:?}", n.a.stats());
            assert!(losses(&n, LossCause::Timeout) > 0, "seed {seed}");
            // Later messages avoid it.
            let on_dead = n.data_on[2];
            for _ in 0..8 {
                rpc(&mut n, 64 * 1024);
            }
            assert_eq!(n.data_on[2], on_dead, "seed {seed}: data on the dead path");
            assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
            // With an ACK per packet, its RTO then moves it. With delayed ACKs a late
            // ACK for packets it carried before it went silent disarms that RTO (the
            // path has nothing in flight): it stays avoided and keeps its port
            // (Documentation/device.rst, "Acknowledgements").
            if !delayed {
                let t0 = n.now;
                assert!(n.run(t0 + 100_000_000));
                assert!(n.a.stats().timeouts > 0, "seed {seed}: {:?}", n.a.stats());
            }
        }
    }
}
