//! The connection's events ([`App::event`]) agree with its counters and with what went
//! over the wire: the kernel's trace events are these, so a trace can be checked
//! against `rdma statistic` (tests/guest/observe.sh does, in the guests).
mod common;
use common::*;
use metaroce_proto::conn::{Event, LossCause};
use metaroce_proto::path::PathState;

fn count(n: &Net, f: impl Fn(&Event) -> bool) -> usize {
    n.app_a.events.iter().filter(|e| f(e)).count()
}

#[test]
fn lossy_run_events_match_counters() {
    for seed in 1..8 {
        let mut n = Net::new(seed, 4, 0.05);
        for s in 0..4 {
            n.app_a.msgs[s] = vec![20_000; 20];
        }
        assert!(n.run(10_000_000_000), "seed {seed} did not finish");
        let st = *n.a.stats();
        assert!(st.retx > 0, "seed {seed}: no loss");
        let retx = count(&n, |e| matches!(e, Event::Retransmit { .. }));
        assert_eq!(retx, st.retx as usize, "seed {seed}");
        // The harness records every retransmitted DATA it saw go out: the same packets.
        let wire: Vec<(u8, u32)> = n.retx.iter().map(|r| (r.0, r.1)).collect();
        let ev: Vec<(u8, u32)> = n
            .app_a
            .events
            .iter()
            .filter_map(|e| match *e {
                Event::Retransmit { path, psn, .. } => Some((path, psn)),
                _ => None,
            })
            .collect();
        assert_eq!(ev, wire, "seed {seed}");
        let sack = count(&n, |e| {
            matches!(
                e,
                Event::Lost {
                    cause: LossCause::SackGap,
                    ..
                }
            )
        });
        assert_eq!(sack, st.sack_lost as usize, "seed {seed}");
        let rto = count(&n, |e| matches!(e, Event::Timeout { .. }));
        assert_eq!(rto, usize::from(st.timeouts), "seed {seed}");
        // Every retransmission answers a loss (a SACK gap or a timeout).
        let lost = count(&n, |e| matches!(e, Event::Lost { .. }));
        assert!(lost >= retx, "seed {seed}: lost {lost} < retx {retx}");
        for e in &n.app_a.events {
            match *e {
                Event::Lost { path, .. } | Event::Timeout { path, .. } => assert!(path < 4),
                Event::Retransmit {
                    path,
                    from_path,
                    stream,
                    ..
                } => assert!(path < 4 && from_path < 4 && stream < 4),
                Event::PathState { path, .. } => assert!(path < 4),
                Event::PeerHint { .. } => {}
            }
        }
    }
}

#[test]
fn blackholed_path_reports_timeouts_probing_and_a_move() {
    let mut n = Net::new(9, 8, 0.0);
    let port = n.a.path(3).unwrap().src_port;
    n.blackhole = Some((3, port));
    for s in 0..4 {
        n.app_a.msgs[s] = vec![64 * 1024; 20];
    }
    assert!(n.run(60_000_000_000));
    let st = *n.a.stats();
    let moves: Vec<(u16, u16)> = n
        .app_a
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::PathState {
                path: 3,
                old_port,
                new_port,
                ..
            } if old_port != new_port => Some((old_port, new_port)),
            _ => None,
        })
        .collect();
    assert_eq!(moves.len(), usize::from(st.moves));
    assert_eq!(moves.first().map(|m| m.0), Some(port));
    assert_eq!(
        moves.last().map(|m| m.1),
        Some(n.a.path(3).unwrap().src_port)
    );
    let probing = count(&n, |e| {
        matches!(
            e,
            Event::PathState {
                path: 3,
                from: PathState::Active,
                to: PathState::Probing,
                ..
            }
        )
    });
    assert!(probing >= 1);
    // The moved path answers its probe and carries data again.
    let back = count(&n, |e| {
        matches!(
            e,
            Event::PathState {
                path: 3,
                from: PathState::Probing,
                to: PathState::Active,
                ..
            }
        )
    });
    assert!(back >= 1);
    // Timeouts carry the RTO that expired, doubling with the backoff.
    let timeouts: Vec<(u64, u8)> = n
        .app_a
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::Timeout {
                path: 3,
                rto_ns,
                backoff,
                ..
            } => Some((rto_ns, backoff)),
            _ => None,
        })
        .collect();
    assert!(!timeouts.is_empty());
    assert!(timeouts.iter().all(|t| t.0 > 0 && t.1 >= 1));
    // Losses to the timeout name PSNs that were sent on the path.
    let lost_rto = count(&n, |e| {
        matches!(
            e,
            Event::Lost {
                path: 3,
                cause: LossCause::Timeout,
                ..
            }
        )
    });
    assert!(lost_rto >= 1);
}

#[test]
fn peer_hint_changes_are_reported() {
    let mut n = Net::new(3, 4, 0.0);
    n.b.set_rate_hint(1000);
    n.app_a.msgs[0] = vec![20_000; 5];
    assert!(n.run(1_000_000_000));
    n.b.set_rate_hint(2000);
    n.app_a.msgs[0].extend([20_000; 5]);
    assert!(n.run(2_000_000_000));
    let hints: Vec<(u32, u32)> = n
        .app_a
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::PeerHint { old, new } => Some((old, new)),
            _ => None,
        })
        .collect();
    assert_eq!(hints, vec![(0, 1000), (1000, 2000)]);
}

/// Without a local ACK timer (`ack_timeout_ns` 0, the simulator's model) path
/// timeouts are the retries, but only while something is unacknowledged: once every
/// message is acknowledged, a path that stays dead (every source port it moves to is
/// dropped too) goes on probing, and the idle connection never fails however many of
/// its probes time out. Verbs fails a QP only for work it could not deliver (IBTA
/// 9.7.6.1.3); Documentation/transport.rst, "Retry limits".
#[test]
fn an_idle_connection_with_a_dead_path_probes_but_never_fails() {
    let mut n = Net::new(11, 8, 0.0);
    assert_eq!(n.a.config().ack_timeout_ns, 0);
    n.app_a.msgs[0] = vec![64 * 1024; 8];
    let end = 120_000_000_000u64;
    while n.now < end {
        let port = n.a.path(3).unwrap().src_port;
        n.blackhole = Some((3, port));
        let step = n.now + 10_000_000;
        n.run(step);
        n.now = n.now.max(step);
    }
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert_eq!(n.app_a.acked[0].len(), 8);
    let s = *n.a.stats();
    let limit = u32::from(n.a.config().retry_cnt) * 8;
    assert!(
        u32::from(s.timeouts) > 2 * limit,
        "path 3 timed out only {} times: the test shows nothing",
        s.timeouts
    );
    assert!(s.moves > 2, "{s:?}");
    assert_eq!(n.a.state(), metaroce_proto::conn::ConnState::Open);
}

/// Without a local ACK timer, an RNR refusal is progress too (the peer answers: it
/// only has no receive posted yet): a peer that refuses with RNR for far longer than
/// `retry_cnt * K` path timeouts, with `rnr_retry` 7 (unlimited, IBTA 9.7.5.2.8), does
/// not fail the connection with retry exceeded; the messages complete once it takes
/// them. The paths time out because the link loses 20 % of the datagrams both ways (an
/// RNR wait alone times no path out: tests/rnr_wait.rs).
#[test]
fn a_long_rnr_wait_is_not_a_retry() {
    let mut n = Net::new(12, 8, 0.2);
    assert_eq!(n.a.config().ack_timeout_ns, 0);
    assert_eq!(n.a.config().rnr_retry, 7);
    n.app_b.rnr_left = 30_000;
    n.app_a.msgs[0] = vec![4096; 4];
    assert!(n.run(600_000_000_000));
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    assert_eq!(n.app_a.acked[0].len(), 4);
    assert_eq!(n.app_b.rnr_left, 0);
    let s = *n.a.stats();
    let limit = u32::from(n.a.config().retry_cnt) * 8;
    assert!(
        u32::from(s.timeouts) > limit,
        "only {} path timeouts: the test shows nothing",
        s.timeouts
    );
}
