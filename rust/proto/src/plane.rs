//! Planes: which of a multi-plane host's networks a path sends on
//! (Documentation/transport.rst, "Planes"; Documentation/extension.rst).
//!
//! A plane is one of several independent networks between the same hosts
//! (its own NIC and switches), all reaching the peer's one address. The
//! core knows nothing of networks: the host binds planes (a plane index
//! `0..n`) to its interfaces and asks [`plane_of`] where each datagram
//! goes. The rule spreads a connection's paths evenly over the planes
//! (consecutive path indices on consecutive planes), skips planes the host
//! knows are down, and moves a path to the next plane each time the path
//! moves to a new source port (after consecutive timeouts: the sign of a
//! plane that fails silently, a gray failure the host cannot see), so a
//! failed plane costs each of its paths one move and the application
//! nothing.

/// The most planes a host binds.
pub const MAX_PLANES: u8 = 8;

/// The plane path `path` sends on after `moves` moves to a new source port,
/// among `n` planes of which those with their bit set in `up` work (bit `k`:
/// plane `k`): plane `(path + moves) mod n`, or the next working plane after
/// it (cyclically); plane 0 when none works or `n <= 1`. `n` above
/// [`MAX_PLANES`] counts as [`MAX_PLANES`].
pub fn plane_of(path: u8, moves: u16, n: u8, up: u8) -> u8 {
    let n = n.min(MAX_PLANES);
    if n <= 1 {
        return 0;
    }
    let first = ((u32::from(path) + u32::from(moves)) % u32::from(n)) as u8;
    (0..n)
        .map(|i| (first + i) % n)
        .find(|&k| up & (1 << k) != 0)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_plane_or_none_is_plane_zero() {
        for path in 0..64 {
            assert_eq!(plane_of(path, 3, 1, 0xff), 0);
            assert_eq!(plane_of(path, 3, 0, 0xff), 0);
        }
    }

    #[test]
    fn paths_spread_evenly_over_working_planes() {
        for n in 2..=MAX_PLANES {
            let mut count = [0u32; MAX_PLANES as usize];
            for path in 0..64 {
                count[usize::from(plane_of(path, 0, n, 0xff))] += 1;
            }
            let used = &count[..usize::from(n)];
            let (lo, hi) = (used.iter().min().unwrap(), used.iter().max().unwrap());
            assert!(hi - lo <= 1, "n={n}: {used:?}");
            assert!(count[usize::from(n)..].iter().all(|&c| c == 0));
        }
    }

    #[test]
    fn a_move_goes_to_the_next_plane() {
        for n in 2..=MAX_PLANES {
            for path in 0..16 {
                let a = plane_of(path, 0, n, 0xff);
                let b = plane_of(path, 1, n, 0xff);
                assert_eq!(b, (a + 1) % n);
                // Moves wrap with the counter, still on a valid plane.
                assert!(plane_of(path, u16::MAX, n, 0xff) < n);
            }
        }
    }

    #[test]
    fn a_down_plane_is_skipped_and_none_down_means_plane_zero() {
        // Plane 1 of 2 down: every path on plane 0.
        assert!((0..64).all(|p| plane_of(p, 0, 2, 0b01) == 0));
        // Plane 1 of 4 down: its paths go to plane 2, the others stay.
        for p in 0..64u8 {
            let k = plane_of(p, 0, 4, 0b1101);
            assert_eq!(k, if p % 4 == 1 { 2 } else { p % 4 });
        }
        // Nothing works: plane 0 (sending fails there, as on one plane).
        assert!((0..64).all(|p| plane_of(p, 5, 4, 0) == 0));
        // Bits above n are ignored.
        assert!((0..64).all(|p| plane_of(p, 0, 2, 0b1100) == 0));
    }
}
