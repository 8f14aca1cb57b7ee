mod common;
use common::*;

#[test]
fn lossless_transfer_completes_in_order() {
    let mut n = Net::new(1, 8, 0.0);
    for s in 0..4 {
        n.app_a.msgs[s] = (0..50).map(|i| (i * 977 % 5000) as u32).collect();
    }
    assert!(n.run(1_000_000_000), "did not finish");
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(n.app_a.violations.is_empty(), "{:?}", n.app_a.violations);
    for s in 0..4 {
        assert_eq!(n.app_b.completed[s].len(), 50);
        assert_eq!(n.app_a.acked[s].len(), 50);
    }
    assert_eq!(n.a.stats().retx, 0);
    assert!(n.app_a.errors.is_empty());
}

#[test]
fn lossy_transfer_completes_exactly_once() {
    for seed in 1..20 {
        let mut n = Net::new(seed, 4, 0.05);
        n.dup = 0.02;
        for s in 0..4 {
            n.app_a.msgs[s] = (0..30)
                .map(|i| ((i * 7919 + seed as usize * 13) % 9000) as u32)
                .collect();
        }
        assert!(n.run(10_000_000_000), "seed {seed} did not finish");
        assert!(
            n.app_b.violations.is_empty(),
            "seed {seed}: {:?}",
            n.app_b.violations
        );
        assert!(
            n.app_a.violations.is_empty(),
            "seed {seed}: {:?}",
            n.app_a.violations
        );
        for s in 0..4 {
            assert_eq!(n.app_b.completed[s].len(), 30, "seed {seed}");
        }
        assert!(
            n.app_a.errors.is_empty(),
            "seed {seed}: {:?}",
            n.app_a.errors
        );
    }
}

#[test]
fn lossy_stats_are_plausible() {
    let mut n = Net::new(7, 8, 0.05);
    for s in 0..4 {
        n.app_a.msgs[s] = (0..40).map(|_| 20_000).collect();
    }
    assert!(n.run(10_000_000_000));
    let st = *n.a.stats();
    eprintln!(
        "stats {st:?} lost {} retx {} dropped {}",
        n.lost_psns.len(),
        n.retx.len(),
        n.dropped
    );
    assert!(st.retx > 0);
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    // Every retransmission names a packet that was really lost (or whose path timed out).
    let lost: std::collections::BTreeSet<_> = n.lost_psns.iter().copied().collect();
    let spurious = n.retx.len() as i64 - lost.len() as i64;
    eprintln!("spurious (upper bound) {spurious}");
}

#[test]
fn dense_connection_fits_two_kib() {
    assert!(std::mem::size_of::<metaroce_proto::DenseConnection>() <= 2048);
}

#[test]
fn pool_size_bounds_packets_in_flight() {
    use metaroce_proto::conn::Connection;
    use metaroce_proto::time::Instant;
    let mut cfg = config(1, 2, 8);
    cfg.init_qwnd = u32::MAX; // only the pool may limit
    let mut c: Connection<8, 1, 3> = Connection::new(cfg);
    let mut app = TestApp::default();
    app.msgs[0] = vec![100_000];
    let mut buf = [0u8; 2048];
    let mut sent = 0;
    for _ in 0..100 {
        if c.poll_transmit(Instant(1), &mut buf, &mut app).is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, 3);
}

#[test]
fn a_zero_window_configuration_still_moves_data() {
    // `CcConfig` windows of 0 bytes (min, initial or max): an empty path always has
    // room for one packet, so the transfer completes instead of hanging with no timer.
    for (min, init, max) in [(0, 0, 1 << 20), (4096, 16384, 0), (0, 0, 0)] {
        let mut n = Net::new(3, 8, 0.0);
        let (mut ca, mut cb) = (config(1, 2, 8), config(2, 1, 8));
        for c in [&mut ca, &mut cb] {
            c.cc.min_pwnd = min;
            c.cc.init_pwnd = init;
            c.cc.max_pwnd = max;
        }
        n.a = metaroce_proto::conn::Connection::new(ca);
        n.b = metaroce_proto::conn::Connection::new(cb);
        n.bulk();
        assert!(n.done(), "({min}, {init}, {max})");
    }
}
