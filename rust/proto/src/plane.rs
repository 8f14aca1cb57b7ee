//! Planes: which of a multi-plane host's networks a path sends on
//! (Documentation/transport.rst, "Planes"; Documentation/extension.rst).
//!
//! A plane is one of several independent networks between the same hosts
//! (its own NIC and switches), all reaching the peer's one address. The
//! core knows nothing of networks: the host binds planes (a plane index
//! `0..n`) to its interfaces and asks [`plane_of`] where each datagram
//! goes. The rule spreads a connection's paths evenly over the planes
//! (consecutive path indices on consecutive planes) and skips planes the host
//! knows are down. A path that moves to a new source port (after consecutive
//! timeouts: the sign of a plane that fails silently, a gray failure the host
//! cannot see) changes plane if another plane answered while its own was
//! silent ([`move_steps`]), so a failed plane costs each of its paths one move
//! and the application nothing, and a stall of the whole connection moves no
//! path off a working plane.

/// The most planes a host binds.
pub const MAX_PLANES: u8 = 8;

/// The plane path `path` sends on after `steps` steps through the planes
/// ([`move_steps`]), among `n` planes of which those with their bit set in `up`
/// work (bit `k`: plane `k`): plane `(path + steps) mod n`, or the next working plane after
/// it (cyclically); plane 0 when none works or `n <= 1`. `n` above
/// [`MAX_PLANES`] counts as [`MAX_PLANES`].
pub fn plane_of(path: u8, steps: u16, n: u8, up: u8) -> u8 {
    let n = n.min(MAX_PLANES);
    if n <= 1 {
        return 0;
    }
    let first = ((u32::from(path) + u32::from(steps)) % u32::from(n)) as u8;
    (0..n)
        .map(|i| (first + i) % n)
        .find(|&k| up & (1 << k) != 0)
        .unwrap_or(0)
}

/// The plane steps of path `path` when it moves to a new source port, from `steps`
/// (its plane: [`plane_of`] of them; `n` planes, `up` those that work; Documentation/
/// transport.rst, "Planes"). `alive` (bit `k`: plane `k`) holds the planes answered
/// since the path's own last answer, and `explore` says the path already moved once
/// without an answer since.
///
/// - The path goes to the next plane of its cycle, other than its own, that is
///   `alive`: its plane went silent while that one did not, the sign of a plane that
///   failed silently.
/// - If no other plane is alive, the whole connection went silent (a stall, a slow
///   peer, or every plane its paths use failed): the path keeps its plane (a new source
///   port on it), so a stall does not send paths of a working plane onto one that
///   failed before.
/// - Unless `explore`: the silence outlasted a move, and the path tries the next plane,
///   which may have healed while nothing was sent on it.
///
/// With one plane (`n <= 1`) the steps do not change.
pub fn move_steps(path: u8, steps: u16, n: u8, up: u8, alive: u8, explore: bool) -> u16 {
    let n = n.min(MAX_PLANES);
    if n <= 1 {
        return steps;
    }
    let from = plane_of(path, steps, n, up);
    let at = |i: u8| steps.wrapping_add(u16::from(i));
    let other = |i: &u8| plane_of(path, at(*i), n, up) != from;
    let live = (1..n)
        .filter(other)
        .find(|&i| alive & (1 << plane_of(path, at(i), n, up)) != 0);
    match live {
        Some(i) => at(i),
        None if explore => (1..n).find(other).map_or(steps, at),
        None => steps,
    }
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
    fn a_move_goes_to_a_plane_answered_since_and_else_stays_until_it_explores() {
        for path in 0..16u8 {
            for n in 2..=4u8 {
                let from = plane_of(path, 0, n, 0xff);
                let next = (from + 1) % n;
                // Every plane answered since: the next plane, as a move always went.
                let s = move_steps(path, 0, n, 0xff, 0xff, false);
                assert_eq!(plane_of(path, s, n, 0xff), next);
                // Only its own plane (or none) answered since: it stays.
                for alive in [0, 1 << from] {
                    assert_eq!(move_steps(path, 0, n, 0xff, alive, false), 0);
                }
                // Unless it explores: then the next plane.
                let s = move_steps(path, 0, n, 0xff, 0, true);
                assert_eq!(plane_of(path, s, n, 0xff), next);
                // One other plane answered since: that one, exploring or not.
                for k in (0..n).filter(|&k| k != from) {
                    for explore in [false, true] {
                        let s = move_steps(path, 0, n, 0xff, 1 << k, explore);
                        assert_eq!(plane_of(path, s, n, 0xff), k, "path {path} n {n} k {k}");
                    }
                }
            }
        }
        // A down plane is never chosen, even if it answered: path 0 on plane 0 of 3,
        // plane 1 down and alive, plane 2 up and alive.
        let s = move_steps(0, 0, 3, 0b101, 0b110, false);
        assert_eq!(plane_of(0, s, 3, 0b101), 2);
        // Only one plane works: nowhere else to go.
        assert_eq!(
            plane_of(0, move_steps(0, 0, 2, 0b01, 0b11, true), 2, 0b01),
            0
        );
        // One plane: the steps do not change.
        assert_eq!(move_steps(5, 7, 1, 0xff, 0xff, true), 7);
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
