//! A plane failing silently mid-transfer ([`plane_of`]; Documentation/transport.rst,
//! "Planes"): 8 paths over 2 planes, and plane 1 starts dropping everything in both
//! directions (a gray failure, no link event). Each path on plane 1 times out, moves
//! to a new source port and with it to plane 0; nothing is lost to the application
//! (every message once, in order, no error) and nothing more goes to plane 1.

mod common;
use common::*;
use metaroce_proto::conn::Transmit;
use metaroce_proto::plane::plane_of;
use std::cell::Cell;
use std::rc::Rc;

const PLANES: u8 = 2;

#[test]
fn a_plane_that_fails_silently_costs_its_paths_one_move_and_the_application_nothing() {
    for seed in 1..=8u64 {
        let mut n = Net::new(seed, 8, 0.0);
        n.a.set_planes(PLANES, 0b11);
        n.b.set_planes(PLANES, 0b11);
        for s in 0..4 {
            n.app_a.msgs[s] = vec![64 * 1024; 16];
        }
        let dead = Rc::new(Cell::new(false));
        // Datagrams that reached plane 1 while it was dead: (from a, path, moves).
        let sent_dead = Rc::new(Cell::new(0u64));
        let (d, sd) = (dead.clone(), sent_dead.clone());
        n.filter = Some(Box::new(move |_from_a: bool, t: &Transmit| {
            let on_1 = t.plane == 1;
            if on_1 && d.get() {
                sd.set(sd.get() + 1);
            }
            on_1 && d.get()
        }));
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
                assert_eq!(plane_of(p, moves, PLANES, 0b11), 0, "seed {seed}: path {p}");
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
