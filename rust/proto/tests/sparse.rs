//! Sparse, one-message-at-a-time traffic (verbs ping-pong) over a lossy,
//! duplicating link with the kernel module's configuration: every loss is a
//! tail loss that only the RTO can repair. No connection may fail.

mod common;
use common::*;
use metaroce_proto::conn::{Config, Connection};

fn kernel_config(local: u32, peer: u32) -> Config {
    // As rust/verbs/qp/control.rs configures an RC QP's connection.
    Config {
        local_conn: local,
        peer_conn: peer,
        paths: 4,
        mtu: 1024,
        init_rto_ns: 20_000_000,
        min_rto_ns: 4_000_000,
        max_rto_ns: 500_000_000,
        retry_cnt: 7,
        // timeout 14 (67 ms), retry_cnt 7, as ibv_rc_pingpong asks.
        ack_timeout_ns: 4096 * (1 << 14),
        rnr_retry: 7,
        ack_delay_ns: 0,
        pacing: false,
        ..Config::default()
    }
}

fn pingpong(seed: u64, loss: f64, dup: f64, reorder: f64, msgs: u32) -> Result<u64, String> {
    let mut net = Net::new(seed, 4, loss);
    net.reorder = reorder;
    net.a = Connection::new(kernel_config(1, 2));
    net.b = Connection::new(kernel_config(2, 1));
    net.dup = dup;
    for d in net.path_delay.iter_mut() {
        *d = 500_000 + *d * 100; // TCG-like: ~0.7-1.3 ms one way
    }
    for i in 0..msgs {
        net.app_a.msgs[0].push(4096);
        let until = net.now + 60_000_000_000;
        if !net.run(until) {
            return Err(format!("seed {seed}: message {i} not acknowledged in 60 s"));
        }
        if !net.app_a.errors.is_empty() {
            return Err(format!(
                "seed {seed}: message {i}: {:?} (a stats {:?})",
                net.app_a.errors,
                net.a.stats()
            ));
        }
    }
    if !net.app_a.violations.is_empty() || !net.app_b.violations.is_empty() {
        return Err(format!(
            "seed {seed}: {:?} {:?}",
            net.app_a.violations, net.app_b.violations
        ));
    }
    Ok(net.now)
}

/// Twenty seeded ping-pong runs of 300 messages; none may fail.
fn twenty_runs(seed_step: u64, reorder: f64) {
    let failures: Vec<String> = (1..=20u64)
        .filter_map(|seed| pingpong(seed * seed_step, 0.01, 0.01, reorder, 300).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of 20 runs failed: {:#?}",
        failures.len(),
        failures
    );
}

#[test]
fn pingpong_survives_one_percent_loss_and_duplication() {
    twenty_runs(7919, 0.0);
}

#[test]
fn pingpong_survives_netem_like_reordering() {
    // netem `loss 1% duplicate 1% delay 1ms reorder 25%`: a quarter of the
    // packets skip the delay and overtake earlier ones on the same path.
    twenty_runs(104_729, 0.25);
}

#[test]
fn refused_packet_is_nakked_and_fails_the_sender() {
    use metaroce_proto::conn::ConnError;
    let mut net = Net::new(99, 4, 0.0);
    net.a = Connection::new(kernel_config(1, 2));
    net.b = Connection::new(kernel_config(2, 1));
    net.app_b.refuse = Some((0, 2));
    for _ in 0..5 {
        net.app_a.msgs[0].push(3000);
    }
    net.run(net.now + 5_000_000_000);
    assert_eq!(net.app_a.errors, vec![ConnError::RemoteAccess]);
    // Only messages before the refused one can have been acknowledged.
    assert!(
        net.app_a.acked[0].iter().all(|&m| m < 2),
        "{:?}",
        net.app_a.acked[0]
    );
    assert!(
        !net.app_b.completed[0].contains(&2),
        "a refused message never completes"
    );
}

#[test]
fn invalid_request_nak_fails_the_sender_with_its_own_error() {
    use metaroce_proto::conn::{ConnError, Refuse};
    let mut net = Net::new(98, 4, 0.0);
    net.a = Connection::new(kernel_config(1, 2));
    net.b = Connection::new(kernel_config(2, 1));
    net.app_b.refuse = Some((0, 1));
    net.app_b.refuse_as = Some(Refuse::Invalid);
    for _ in 0..3 {
        net.app_a.msgs[0].push(5000);
    }
    net.run(net.now + 5_000_000_000);
    assert_eq!(net.app_a.errors, vec![ConnError::RemoteInvalid]);
    assert!(!net.app_b.completed[0].contains(&1));
}

/// A message whose bytes the sender cannot read (its buffer was deregistered) is never
/// sent: no packet of made-up bytes reaches the peer, nothing of it is placed, and only
/// the sender fails, with a local protection error.
#[test]
fn unreadable_local_payload_sends_nothing_and_fails_only_the_sender() {
    use metaroce_proto::conn::{ConnError, Unreadable};
    let mut net = Net::new(97, 4, 0.0);
    net.a = Connection::new(kernel_config(1, 2));
    net.b = Connection::new(kernel_config(2, 1));
    net.app_a.unreadable = Some((0, 2, Unreadable::Local));
    for _ in 0..4 {
        net.app_a.msgs[0].push(3000);
    }
    net.run(net.now + 5_000_000_000);
    assert_eq!(net.app_a.errors, vec![ConnError::LocalProtection]);
    assert!(net.app_b.errors.is_empty(), "{:?}", net.app_b.errors);
    assert!(
        !net.app_b.placed.keys().any(|&(s, m)| s == 0 && m >= 2),
        "bytes of the unreadable message (or later ones) reached the peer"
    );
    assert!(!net.app_a.supplied.iter().any(|&(_, m, _)| m == 2));
}

/// A responder that can no longer read what it owes the peer (an RDMA READ's source
/// deregistered mid-response) fails and NAKs: the peer fails with a remote access error
/// instead of waiting for, or completing with, bytes that were never read.
#[test]
fn unreadable_response_naks_the_peer() {
    use metaroce_proto::conn::{ConnError, Unreadable};
    let mut net = Net::new(96, 4, 0.0);
    net.a = Connection::new(kernel_config(1, 2));
    net.b = Connection::new(kernel_config(2, 1));
    // The request first (as verbs has it: a response answers an accepted request;
    // the NAK echoes the incarnation that request carried).
    net.app_a.msgs[0].push(1000);
    net.run(net.now + 5_000_000_000);
    net.app_b.msgs[1].push(9000);
    net.app_b.unreadable = Some((1, 0, Unreadable::Remote));
    net.run(net.now + 5_000_000_000);
    assert_eq!(net.app_b.errors, vec![ConnError::LocalProtection]);
    assert_eq!(net.app_a.errors, vec![ConnError::RemoteAccess]);
    assert!(!net.app_a.completed[1].contains(&0));
}

/// IBTA 9.7.5.2.8 table 45: the RNR NAK timer codes.
#[test]
fn rnr_timer_codes_follow_ibta_table_45() {
    use metaroce_proto::conn::rnr_timer_ns;
    assert_eq!(rnr_timer_ns(0), 655_360_000);
    assert_eq!(rnr_timer_ns(1), 10_000);
    assert_eq!(rnr_timer_ns(12), 640_000);
    assert_eq!(rnr_timer_ns(14), 1_280_000);
    assert_eq!(rnr_timer_ns(31), 491_520_000);
    assert_eq!(rnr_timer_ns(32 + 12), 640_000, "only the low 5 bits count");
    let t: Vec<u64> = (1..32).map(rnr_timer_ns).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "codes 1-31 increase");
}

/// A receiver that aborts (its completion queue overflowed) sends nothing more, not even
/// the ACK of what it just received: the sender fails with retry exceeded instead of
/// completing a message whose receive completion was lost.
#[test]
fn aborted_receiver_never_acknowledges_and_the_sender_times_out() {
    use metaroce_proto::conn::ConnError;
    let mut net = Net::new(95, 4, 0.0);
    let mut cfg_a = kernel_config(1, 2);
    cfg_a.retry_cnt = 1;
    cfg_a.ack_timeout_ns = 0;
    net.a = Connection::new(cfg_a);
    net.b = Connection::new(kernel_config(2, 1));
    net.b.abort();
    net.app_a.msgs[0].push(100);
    net.run(net.now + 10_000_000_000);
    assert!(net.app_a.acked[0].is_empty(), "{:?}", net.app_a.acked[0]);
    assert_eq!(net.app_a.errors, vec![ConnError::RetryExceeded]);
    assert!(
        net.app_b.errors.is_empty(),
        "abort does not call App::error"
    );
}

/// Verbs `retry_cnt` 0 means no retry (IBTA 9.7.6.1.3): the first timeout without
/// progress fails the connection; with 2, it takes more than one.
#[test]
fn retry_cnt_zero_fails_at_the_first_timeout() {
    use metaroce_proto::conn::ConnError;
    for (retry_cnt, want_more_than_one) in [(0u8, false), (2u8, true)] {
        let mut net = Net::new(94, 4, 0.0);
        let mut cfg_a = kernel_config(1, 2);
        cfg_a.retry_cnt = retry_cnt;
        cfg_a.ack_timeout_ns = 0;
        net.a = Connection::new(cfg_a);
        net.b = Connection::new(kernel_config(2, 1));
        net.b.abort();
        net.app_a.msgs[0].push(100);
        net.run(net.now + 10_000_000_000);
        assert_eq!(net.app_a.errors, vec![ConnError::RetryExceeded]);
        let timeouts = net.a.stats().timeouts;
        assert_eq!(
            timeouts > 1,
            want_more_than_one,
            "retry_cnt {retry_cnt}: {timeouts} timeouts"
        );
    }
}
