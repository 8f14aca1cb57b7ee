//! A plane failing silently mid-transfer ([`plane_of`]; Documentation/transport.rst,
//! "Planes"): 8 paths over 2 planes, and plane 1 starts dropping everything in both
//! directions (a gray failure, no link event). Each path on plane 1 times out, moves
//! to a new source port and with it to plane 0; nothing is lost to the application
//! (every message once, in order, no error) and nothing more goes to plane 1, not even
//! when a stall of the whole connection later moves paths that were on plane 0.

mod common;
use common::*;
use metaroce_proto::conn::Transmit;
use metaroce_proto::path::PathState;
use metaroce_proto::plane::plane_of;
use std::cell::Cell;
use std::rc::Rc;

const PLANES: u8 = 2;
/// How long the connection stalls: long enough for paths to time out twice and move,
/// short of the retry limit (`retry_cnt` x paths timeouts without progress).
const STALL_NS: u64 = 500_000;

/// Two nodes on two planes, each of 4 streams with `msgs` 64 KiB messages to send from
/// `a`; `dead`: plane 1 drops everything, counted in `sent_dead`; `stall`: every plane
/// drops everything.
struct Planes {
    n: Net,
    dead: Rc<Cell<bool>>,
    stall: Rc<Cell<bool>>,
    sent_dead: Rc<Cell<u64>>,
}

fn two_planes(seed: u64, msgs: usize) -> Planes {
    let mut n = Net::new(seed, 8, 0.0);
    n.a.set_planes(PLANES, 0b11);
    n.b.set_planes(PLANES, 0b11);
    for s in 0..4 {
        n.app_a.msgs[s] = vec![64 * 1024; msgs];
    }
    let dead = Rc::new(Cell::new(false));
    let stall = Rc::new(Cell::new(false));
    let sent_dead = Rc::new(Cell::new(0u64));
    let (d, st, sd) = (dead.clone(), stall.clone(), sent_dead.clone());
    n.filter = Some(Box::new(move |_from_a: bool, t: &Transmit| {
        let on_1 = t.plane == 1;
        if on_1 && d.get() {
            sd.set(sd.get() + 1);
        }
        (on_1 && d.get()) || st.get()
    }));
    Planes {
        n,
        dead,
        stall,
        sent_dead,
    }
}

#[test]
fn a_plane_that_fails_silently_costs_its_paths_one_move_and_the_application_nothing() {
    for seed in 1..=8u64 {
        let Planes {
            mut n,
            dead,
            sent_dead,
            ..
        } = two_planes(seed, 16);
        assert!(!n.run(150_000), "seed {seed}: done before the failure");
        // Both planes carried data before it.
        let before: [u64; 2] = core::array::from_fn(|k| {
            (0..8)
                .filter(|&p| plane_of(p, 0, PLANES, 0b11) == k as u8)
                .map(|p| n.data_on[usize::from(p)])
                .sum()
        });
        assert!(before.iter().all(|&c| c > 0), "seed {seed}: {before:?}");
        dead.set(true);
        assert!(
            n.run(2_000_000_000),
            "seed {seed}: not done after the failure"
        );
        assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
        assert!(n.app_a.errors.is_empty() && n.app_b.errors.is_empty());
        for s in 0..4 {
            assert_eq!(n.app_b.completed[s], (0..16).collect::<Vec<u32>>());
        }
        // Every path of a that was on plane 1 moved (to plane 0); none of plane 0's
        // did.
        for p in 0..8u8 {
            let moves = n.a.path(usize::from(p)).map_or(0, |t| t.moves);
            if plane_of(p, 0, PLANES, 0b11) == 1 {
                assert!(moves >= 1, "seed {seed}: path {p} never moved");
                assert_eq!(n.a.path_plane(usize::from(p)), 0, "seed {seed}: path {p}");
            }
        }
        // After the moves, plane 1 gets nothing more: a further exchange on the
        // settled connection sends nothing there.
        let settled = sent_dead.get();
        for s in 0..4 {
            n.app_a.msgs[s].extend([4096; 4]);
        }
        assert!(n.run(4_000_000_000), "seed {seed}: second batch not done");
        assert_eq!(
            sent_dead.get(),
            settled,
            "seed {seed}: plane 1 used after the moves"
        );
    }
}

/// After plane 1 failed silently and its paths left it, the whole connection stalls
/// (nothing gets through on any plane for a while: a slow peer, a congested host) and
/// paths on plane 0 time out and move too. A move goes to another plane only if that
/// plane answered while the path was silent; in a stall none did, so the paths keep
/// plane 0. Under the earlier rule (a move always to the next plane) paths went back onto
/// the failed plane (checked: fails here), as the guests' `multiplane.sh` once caught 5
/// of 8 paths there.
#[test]
fn a_stall_after_a_plane_failed_does_not_send_paths_back_to_it() {
    for seed in 1..=8u64 {
        let Planes {
            mut n,
            dead,
            stall,
            sent_dead,
        } = two_planes(seed, 8);
        assert!(!n.run(150_000), "seed {seed}: done before the failure");
        dead.set(true);
        assert!(
            n.run(2_000_000_000),
            "seed {seed}: not done after the failure"
        );
        let evacuated = sent_dead.get();
        // A second batch, and mid-way through it a stall long enough for paths on
        // plane 0 to time out twice and move.
        for s in 0..4 {
            n.app_a.msgs[s].extend([64 * 1024; 8]);
        }
        let t = n.now;
        assert!(
            !n.run(t + 100_000),
            "seed {seed}: second batch done before the stall"
        );
        let moves_before = n.a.stats().moves;
        stall.set(true);
        let t = n.now;
        let _ = n.run(t + STALL_NS);
        stall.set(false);
        let t = n.now;
        assert!(
            n.run(t + 4_000_000_000),
            "seed {seed}: second batch not done"
        );
        assert!(
            n.a.stats().moves > moves_before,
            "seed {seed}: the stall moved no path"
        );
        assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
        assert!(
            n.app_a.errors.is_empty() && n.app_b.errors.is_empty(),
            "seed {seed}: stats {:?} errors {:?} {:?}",
            n.a.stats(),
            n.app_a.errors,
            n.app_b.errors
        );
        for s in 0..4 {
            assert_eq!(n.app_b.completed[s], (0..16).collect::<Vec<u32>>());
        }
        for p in 0..8 {
            assert_eq!(n.a.path_plane(p), 0, "seed {seed}: path {p} on plane 1");
        }
        assert_eq!(
            sent_dead.get(),
            evacuated,
            "seed {seed}: plane 1 used again after the stall"
        );
    }
}

/// Runs `n` (two planes, 4 streams of 8 64 KiB messages from `a`) through two failures:
/// `step` ns in, plane 1 fails silently in both directions; once that batch is done,
/// plane 1 heals with nothing sent on it, a second batch starts and `step` ns in plane 0,
/// which every path is on now, fails silently too. Checks that both batches complete,
/// every message once, in order, with no error; returns the net at the end.
fn only_plane_in_use_fails(mut n: Net, seed: u64, step: u64) -> Net {
    n.a.set_planes(PLANES, 0b11);
    n.b.set_planes(PLANES, 0b11);
    for s in 0..4 {
        n.app_a.msgs[s] = vec![64 * 1024; 8];
    }
    // The plane that drops everything: none (2), 1, then 0.
    let dead = Rc::new(Cell::new(2u8));
    let d = dead.clone();
    n.filter = Some(Box::new(move |_from_a: bool, t: &Transmit| {
        t.plane == d.get()
    }));
    assert!(!n.run(step), "seed {seed}: done before the failure");
    dead.set(1);
    let t = n.now;
    assert!(
        n.run(t + 20_000_000_000),
        "seed {seed}: not done after plane 1 failed"
    );
    // Every path that carries data left plane 1.
    for p in 0..8 {
        if n.a.path(p).unwrap().state == PathState::Active {
            assert_eq!(n.a.path_plane(p), 0, "seed {seed}: path {p} on plane 1");
        }
    }
    for s in 0..4 {
        n.app_a.msgs[s].extend([64 * 1024; 8]);
    }
    let t = n.now;
    assert!(!n.run(t + step), "seed {seed}: second batch done at once");
    dead.set(0);
    let t = n.now;
    assert!(
        n.run(t + 20_000_000_000),
        "seed {seed}: second batch not done: stats {:?} errors {:?} {:?}",
        n.a.stats(),
        n.app_a.errors,
        n.app_b.errors
    );
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(
        n.app_a.errors.is_empty() && n.app_b.errors.is_empty(),
        "seed {seed}: errors {:?} {:?}",
        n.app_a.errors,
        n.app_b.errors
    );
    for s in 0..4 {
        assert_eq!(n.app_b.completed[s], (0..16).collect::<Vec<u32>>());
    }
    n
}

/// Plane 1 fails silently and its paths leave it; it heals with nothing sent on it; then
/// plane 0, which every path is on now, fails silently too ([`only_plane_in_use_fails`]).
/// The paths find no other plane answering, keep theirs for two moves, then try plane 1
/// (it may have healed: it has), and the first there to be answered brings the rest:
/// nothing is lost, no error, and every path that carries data ends on plane 1. (Under
/// a rule that never tried a plane without a sign that it works, every path stays on
/// plane 0 and the connection fails: checked.)
#[test]
fn when_the_only_plane_in_use_fails_the_paths_find_a_healed_one() {
    for seed in 1..=8u64 {
        let n = only_plane_in_use_fails(Net::new(seed, 8, 0.0), seed, 150_000);
        // The paths that carry data are on plane 1; any other is still probing plane 0
        // (it moves at its next timeout: the batch may end first).
        let active: Vec<usize> = (0..8)
            .filter(|&p| n.a.path(p).unwrap().state == PathState::Active)
            .collect();
        assert!(!active.is_empty(), "seed {seed}: no active path");
        for p in active {
            assert_eq!(
                n.a.path_plane(p),
                1,
                "seed {seed}: active path {p} on plane 0"
            );
        }
    }
}

/// The same with the kernel module's timers (`kernel_like_config`: a 4 ms RTO floor, a
/// 4 ms timer tick, the verbs local ACK timeout of 67 ms and `retry_cnt` 7) and round
/// trips of about 4.5 ms (TCG guests see 2-3 ms): the try of the healed plane comes
/// within a quarter of the verbs retry budget. After 128 round trips (about 0.6 s) it
/// came too late: the QP had failed with retry exceeded at 0.54 s (checked: fails
/// without the cap; found by a trial).
#[test]
fn with_kernel_timers_and_long_round_trips_the_try_comes_before_the_retry_limit() {
    for seed in 1..=4u64 {
        let mut n = Net::new(seed, 8, 0.0);
        n.connect(kernel_like_config(1, 2), kernel_like_config(2, 1));
        for d in n.path_delay.iter_mut() {
            *d = 2_000_000 + *d * 100;
        }
        n.tick = 4_000_000;
        only_plane_in_use_fails(n, seed, 20_000_000);
    }
}
