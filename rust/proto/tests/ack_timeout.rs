//! The verbs local ACK timer (IBTA 9.7.6.1.3) and the retry limit: a connection
//! fails with `RetryExceeded` at the (`retry_cnt` + 1)-th local ACK timeout without
//! progress, never because its fast path RTOs fired many times, and a host that
//! could not run for a while (its clock jumped) counts one retry, not all the
//! timeouts it skipped.

mod common;
use common::*;
use metaroce_proto::conn::{Config, ConnError, Connection};
use metaroce_proto::time::Instant;

/// 4.096 us * 2^14: what perftest and ibv_rc_pingpong ask for (`timeout` 14).
const T: u64 = 4096 << 14;

fn cfg(local: u32, peer: u32) -> Config {
    kernel_like_config(local, peer)
}

fn net(seed: u64) -> Net {
    let mut n = Net::new(seed, 8, 0.0);
    n.a = Connection::new(cfg(1, 2));
    n.b = Connection::new(cfg(2, 1));
    for d in n.path_delay.iter_mut() {
        *d = 500_000 + *d * 100;
    }
    n
}

/// A peer that answers nothing: the sender fails after exactly `retry_cnt` + 1 local
/// ACK timeouts, about (7 + 1) * 67 ms after it sent, although its 8 paths timed
/// out far more often than `retry_cnt` times each.
#[test]
fn silent_peer_fails_at_the_eighth_local_ack_timeout() {
    let mut n = net(3);
    n.loss = 1.0;
    n.app_a.msgs[0].push(4096);
    n.run(8 * T - 1_000_000);
    assert!(n.app_a.errors.is_empty(), "failed before 8 x {T} ns");
    let s = n.a.stats();
    assert_eq!(s.ack_timeouts, 7, "{s:?}");
    assert!(
        u32::from(s.timeouts) > 7 * 8,
        "path timeouts {}",
        s.timeouts
    );
    n.run(8 * T + 1_000_000);
    assert_eq!(n.app_a.errors, vec![ConnError::RetryExceeded]);
    assert_eq!(n.a.stats().ack_timeouts, 8);
}

/// `retry_cnt` 0: the first local ACK timeout fails the connection.
#[test]
fn retry_cnt_zero_fails_at_the_first_local_ack_timeout() {
    let mut n = net(4);
    let mut c = cfg(1, 2);
    c.retry_cnt = 0;
    n.a = Connection::new(c);
    n.loss = 1.0;
    n.app_a.msgs[0].push(100);
    n.run(T - 1_000_000);
    assert!(n.app_a.errors.is_empty());
    n.run(T + 1_000_000);
    assert_eq!(n.app_a.errors, vec![ConnError::RetryExceeded]);
    assert_eq!(n.a.stats().ack_timeouts, 1);
}

/// A fabric that swallows everything for `pause_ms`, then recovers: shorter than
/// (retry_cnt + 1) local ACK timeouts survives with every message delivered;
/// longer fails.
fn outage(pause_ms: u64) -> (Vec<ConnError>, u32, bool) {
    let mut n = net(5);
    n.app_a.msgs[0].extend([4096, 4096]);
    assert!(n.run(5_000_000_000));
    n.loss = 1.0;
    n.app_a.msgs[0].extend([4096, 8192, 100]);
    n.run(n.now + pause_ms * 1_000_000);
    n.loss = 0.0;
    let done = n.run(n.now + 10_000_000_000) && n.app_a.errors.is_empty();
    (n.app_a.errors.clone(), n.a.stats().ack_timeouts, done)
}

#[test]
fn an_outage_shorter_than_the_patience_loses_nothing() {
    let (errors, ack_timeouts, done) = outage(400);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(done);
    // 400 ms / 67 ms: five or six expiries (the last one may fall on the recovery).
    assert!((5..=6).contains(&ack_timeouts), "{ack_timeouts}");
}

#[test]
fn an_outage_longer_than_the_patience_fails_the_connection() {
    let (errors, ack_timeouts, done) = outage(700);
    assert_eq!(errors, vec![ConnError::RetryExceeded]);
    assert_eq!(ack_timeouts, 8);
    assert!(!done);
}

/// The sender's host did not run for 5 s (a starved guest): its first timer call
/// after the gap counts one local ACK timeout, not 74, and the message goes through.
#[test]
fn a_host_that_did_not_run_counts_one_retry() {
    let mut n = net(6);
    n.loss = 1.0;
    n.app_a.msgs[0].push(4096);
    n.run(1_000_000);
    n.loss = 0.0;
    n.now += 5_000_000_000;
    n.a.handle_timeout(Instant(n.now), &mut n.app_a);
    assert_eq!(n.a.stats().ack_timeouts, 1);
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert!(n.run(n.now + 5_000_000_000));
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert_eq!(n.app_a.acked[0], vec![0]);
}

/// A peer that is alive but slow (30 ms round trip against a 20 ms initial RTO and a
/// 4 ms floor): path timeouts fire, yet once the first message has given the paths
/// an RTT every message is acknowledged within one local ACK timeout, so no retry is
/// counted after the first (which may cost one: its timeouts discard late ACKs).
#[test]
fn spurious_path_timeouts_are_not_retries() {
    let mut n = net(7);
    for d in n.path_delay.iter_mut() {
        *d = 15_000_000;
    }
    n.app_a.msgs[0].push(4096);
    assert!(n.run(n.now + 5_000_000_000));
    let first = *n.a.stats();
    assert!(first.ack_timeouts <= 1, "{first:?}");
    for _ in 0..20 {
        n.app_a.msgs[0].push(4096);
        assert!(n.run(n.now + 5_000_000_000));
    }
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    let s = n.a.stats();
    assert!(s.timeouts > 0, "no path timeout: the test shows nothing");
    assert_eq!(s.ack_timeouts, first.ack_timeouts, "{s:?}");
}

/// An idle connection never counts a retry, however long it stays idle.
#[test]
fn idle_connection_has_no_local_ack_timer() {
    let mut n = net(8);
    n.app_a.msgs[0].push(4096);
    assert!(n.run(1_000_000_000));
    assert_eq!(n.a.poll_timeout(), None);
    n.now += 60_000_000_000;
    n.a.handle_timeout(Instant(n.now), &mut n.app_a);
    assert_eq!(n.a.stats().ack_timeouts, 0);
}

/// The peer's host pauses for 150 ms (every packet both ways waits; none is lost):
/// every path times out, again and again. Once the pause ends the probes are
/// answered and the transfer completes: at most the two local ACK timeouts the pause
/// itself spans are counted.
#[test]
fn a_pause_of_the_peer_does_not_stall_the_connection() {
    let mut n = net(9);
    n.app_a.msgs[0].extend([65536; 4]);
    assert!(n.run(n.now + 5_000_000_000));
    let saved = n.path_delay;
    n.app_a.msgs[0].extend([65536; 16]);
    for d in n.path_delay.iter_mut() {
        *d = 150_000_000;
    }
    n.run(n.now + 2_000_000);
    n.path_delay = saved;
    assert!(n.run(n.now + 10_000_000_000));
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert_eq!(n.app_a.acked[0].len(), 20);
    let s = n.a.stats();
    assert!(s.timeouts >= 8, "the pause timed every path out: {s:?}");
    assert!(s.ack_timeouts <= 2, "{s:?}");
}

/// Round trips that jump far above the RTO (a queue builds faster than the RTT
/// estimate follows: 2 ms, then 60 ms): every path times out before its ACK
/// arrives, and the late ACKs acknowledge packets the sender no longer tracks on
/// that path. They still show that the peer receives, and their echoes raise the
/// RTT estimate: the transfer completes without failing the connection.
#[test]
fn late_acks_of_abandoned_packets_are_progress() {
    let mut n = net(10);
    let mut c = cfg(1, 2);
    c.init_rto_ns = 4_000_000;
    n.a = Connection::new(c);
    n.app_a.msgs[0].extend([16384; 4]);
    assert!(n.run(n.now + 5_000_000_000));
    for d in n.path_delay.iter_mut() {
        *d = 30_000_000;
    }
    n.app_a.msgs[0].extend([16384; 16]);
    assert!(n.run(n.now + 20_000_000_000));
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert_eq!(n.app_a.acked[0].len(), 20);
    let s = n.a.stats();
    assert!(s.timeouts > 8, "{s:?}");
    assert!(s.ack_timeouts <= 2, "{s:?}");
}

/// A peer 50 ms away goes silent (its host stalls; everything both ways is lost):
/// the paths' RTOs back off, but never past the local ACK timeout, so the sender
/// transmits (resends or probes) within every local ACK period until its
/// `retry_cnt` + 1-th expiry: each retry the user asked for is a real one. (Without
/// the bound, base RTOs of about 55 ms backed off to 110-220 ms, and a period went by
/// with nothing sent.)
#[test]
fn every_local_ack_period_holds_a_retransmission() {
    let mut n = net(11);
    for d in n.path_delay.iter_mut() {
        *d = 25_000_000;
    }
    n.app_a.msgs[0].extend([4096; 8]);
    assert!(n.run(n.now + 5_000_000_000));
    n.loss = 1.0;
    n.app_a.msgs[0].extend([4096; 8]);
    let start = n.now;
    let mut quiet = Vec::new();
    for k in 1..=7 {
        let before = n.sent[0];
        n.run(start + k * T + T / 2);
        if n.sent[0] == before {
            quiet.push(k);
        }
    }
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert!(quiet.is_empty(), "periods with nothing sent: {quiet:?}");
}
