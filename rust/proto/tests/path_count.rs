//! Changing a connection's path count while it carries data
//! ([`Connection::set_paths`]; Documentation/transport.rst, "Changing the path
//! count"): raised paths carry data, retired ones carry none, their packets in
//! flight are resent on the others, their late ACKs still count, and every message
//! arrives once, in order.

mod common;
use common::*;
use metaroce_proto::conn::{Event, LossCause};
use metaroce_proto::path::PathState;

/// Every stream's 16 messages completed in order at the receiver and acknowledged
/// at the sender, every byte where it belongs, no error on either side.
fn assert_delivered(n: &Net) {
    assert!(n.done(), "not all acknowledged: {:?}", n.app_a.acked);
    for s in 0..4 {
        assert_eq!(
            n.app_b.completed[s],
            (0..16).collect::<Vec<u32>>(),
            "stream {s}"
        );
    }
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(n.app_a.errors.is_empty() && n.app_b.errors.is_empty());
}

/// 4 paths, then 2 mid-transfer, then 8, under 1 % loss (the whole transfer takes
/// about 0.9 ms on 4 paths): after the cut, no new
/// packet leaves on paths 2 and 3; after the raise, paths 4-7 carry data from their
/// own source ports; everything arrives.
#[test]
fn the_path_count_changes_during_a_transfer_without_loss() {
    for seed in 1..=8u64 {
        let mut n = Net::new(seed, 4, 0.01);
        for s in 0..4 {
            n.app_a.msgs[s] = vec![64 * 1024; 16];
        }
        assert!(!n.run(150_000), "seed {seed}: done before the change");
        assert!(n.data_on[..4].iter().all(|&d| d > 0), "{:?}", n.data_on);
        assert_eq!(n.a.set_paths(2, &mut n.app_a), 2);
        n.data_on = [0; 8];
        assert!(
            !n.run(n.now + 150_000),
            "seed {seed}: done while on 2 paths"
        );
        assert_eq!(&n.data_on[2..], &[0; 6], "seed {seed}: retired paths sent");
        assert!(n.data_on[0] > 0 && n.data_on[1] > 0);
        for p in 2..4 {
            assert_eq!(n.a.path(p).unwrap().state, PathState::Unused);
        }
        assert_eq!(n.a.set_paths(8, &mut n.app_a), 8);
        n.data_on = [0; 8];
        assert!(n.run(n.now + 10_000_000_000), "seed {seed}: stalled");
        assert!(
            n.data_on.iter().all(|&d| d > 0),
            "seed {seed}: {:?}",
            n.data_on
        );
        let ports: std::collections::BTreeSet<u16> =
            (0..8).map(|p| n.a.path(p).unwrap().src_port).collect();
        assert_eq!(ports.len(), 8, "one source port per path");
        assert_delivered(&n);
    }
}

/// Retiring paths with packets in flight and no loss: each of those packets is
/// reported lost as retired and resent on the path that remains, and the ACKs that
/// answer the retired paths afterwards are taken, not dropped as from a bad path.
#[test]
fn a_retired_paths_late_acks_still_count() {
    let mut n = Net::new(7, 4, 0.0);
    n.keep_trace = true;
    for s in 0..4 {
        n.app_a.msgs[s] = vec![64 * 1024; 16];
    }
    // Until the first packets are out, and none answered yet.
    assert!(!n.run(1_000));
    let flying: u32 = (1..4).map(|p| n.a.path(p).unwrap().inflight).sum();
    assert!(flying > 0, "nothing in flight on paths 1-3");
    n.app_a.events.clear();
    assert_eq!(n.a.set_paths(1, &mut n.app_a), 1);
    let retired = n
        .app_a
        .events
        .iter()
        .filter(|e| matches!(e, Event::Lost { cause: LossCause::Retired, path, .. } if *path >= 1))
        .count();
    assert!(retired > 0);
    assert_eq!(
        (1..4).map(|p| n.a.path(p).unwrap().inflight).sum::<u32>(),
        0
    );
    assert!(n.run(10_000_000_000), "stalled on one path");
    let late = n
        .trace
        .iter()
        .filter(|(_, to_b, b, _)| !to_b && b.get(2).is_some_and(|&path| path >= 1))
        .count();
    let refused: Vec<_> = n
        .trace
        .iter()
        .filter(|(_, to_b, _, ok)| !to_b && !ok)
        .collect();
    assert!(
        refused.is_empty(),
        "{} ACKs dropped, {late} on retired paths",
        refused.len()
    );
    assert_delivered(&n);
}

/// The count is clamped to `1..=P`, and a path raised again goes on from where it
/// stopped: the same source port, PSNs continuing.
#[test]
fn the_count_is_clamped_and_a_raised_path_resumes() {
    let mut n = Net::new(3, 4, 0.0);
    assert_eq!(n.a.set_paths(0, &mut n.app_a), 1);
    assert_eq!(n.a.set_paths(200, &mut n.app_a), 8);
    assert_eq!(Conn::max_paths(), 8);
    n.a.set_paths(4, &mut n.app_a);
    n.app_a.msgs[0] = vec![4096; 8];
    assert!(n.run(1_000_000_000));
    let before = *n.a.path(3).unwrap();
    assert!(before.next_psn != before.base_psn || before.inflight == 0);
    n.a.set_paths(3, &mut n.app_a);
    n.a.set_paths(4, &mut n.app_a);
    let after = *n.a.path(3).unwrap();
    assert_eq!(after.state, PathState::Active);
    assert_eq!(after.src_port, before.src_port);
    assert_eq!(after.next_psn, before.next_psn);
    n.app_a.msgs[0].extend([4096; 8]);
    assert!(n.run(n.now + 1_000_000_000));
    assert_eq!(n.app_b.completed[0], (0..16).collect::<Vec<u32>>());
    assert!(n.app_a.errors.is_empty() && n.app_b.errors.is_empty());
}

/// A shared connection sends on the largest count its members ask for: a member
/// asking for fewer paths does not take them from the others; the count falls when
/// the members that wanted more leave or ask for less.
#[test]
fn a_shared_connection_sends_on_the_largest_count_asked_for() {
    use metaroce_proto::conn::PathWants;
    let mut w = PathWants::new();
    assert_eq!(w.effective(), None);
    // Three members join with the default, 8.
    for _ in 0..3 {
        w.join(8);
    }
    assert_eq!(w.effective(), Some(8));
    // One asks for 2: the others still want 8.
    w.leave(8);
    w.join(2);
    assert_eq!(w.effective(), Some(8));
    // One asks for 16: heard at once.
    w.leave(8);
    w.join(16);
    assert_eq!(w.effective(), Some(16));
    // The 16 leaves: back to the last default member's 8.
    w.leave(16);
    assert_eq!(w.effective(), Some(8));
    // The last default member asks for 1: 2 is the largest left.
    w.leave(8);
    w.join(1);
    assert_eq!(w.effective(), Some(2));
    w.leave(2);
    w.leave(1);
    assert_eq!(w.effective(), None);
    // Out-of-range asks are clamped, never out of bounds.
    w.join(0);
    w.join(200);
    assert_eq!(w.effective(), Some(64));
    w.leave(200);
    assert_eq!(w.effective(), Some(1));
}
