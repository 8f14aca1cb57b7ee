//! A congested path loses traffic to unmarked ones (issue 14's target; transport.rst,
//! "Congestion control"): its ECN-driven window shrinks while the others' grow, and
//! new data goes only to paths with room.

mod common;
use common::*;

/// Data packets per path carrying 16 messages of 64 KiB on each of 4 streams over 4
/// paths (each its own random delay), no loss; every data packet on the paths of
/// `marked` (bit p: path p) CE-marked.
fn spread(seed: u64, marked: u8) -> [u64; 4] {
    let mut n = Net::new(seed, 4, 0.0);
    n.marked_paths = marked;
    n.bulk();
    let mut d = [0; 4];
    d.copy_from_slice(&n.data_on[..4]);
    d
}

fn share0(d: [u64; 4]) -> f64 {
    d[0] as f64 / d.iter().sum::<u64>() as f64
}

#[test]
fn a_marked_path_carries_less_than_unmarked_ones() {
    for seed in [1u64, 3, 5, 7] {
        let clear = spread(seed, 0);
        let marked = spread(seed, 1);
        println!(
            "seed {seed}: data packets per path, unmarked {clear:?}, path 0 marked {marked:?}"
        );
        // Path 0 gives up at least 40 % of its unmarked share (a path at the one-packet
        // floor still carries a packet per its own round trip), and carries less than the
        // mean of the others.
        assert!(
            share0(marked) <= share0(clear) * 0.6,
            "seed {seed}: {clear:?} {marked:?}"
        );
        assert!(
            marked[0] * 3 < marked[1] + marked[2] + marked[3],
            "seed {seed}: {marked:?}"
        );
    }
}
