//! Injected time: the core never reads a clock.

/// A point in time in nanoseconds on the caller's monotonic clock.
///
/// All arithmetic saturates, so no input can overflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

impl Instant {
    /// The zero instant.
    pub const ZERO: Instant = Instant(0);
    /// An instant later than every reachable one; used as "never".
    pub const NEVER: Instant = Instant(u64::MAX);

    /// Nanoseconds since the clock's origin.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + ns`, saturating.
    #[inline]
    pub const fn add_nanos(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }

    /// `self - earlier` in nanoseconds, or 0 if `earlier` is later.
    #[inline]
    pub const fn nanos_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// The low 32 bits of the time in microseconds (wrapping every 71 minutes; two
    /// such times compare as serial numbers, [`super::sack::seq_lt`], within 35 minutes of
    /// each other).
    pub const fn as_micros32(self) -> u32 {
        (self.0 / 1000) as u32
    }

    /// The low 32 bits of the nanosecond count, as carried in the wire timestamp field.
    #[inline]
    pub const fn wire_stamp(self) -> u32 {
        (self.0 & 0xffff_ffff) as u32
    }
}

/// How late a host's timer fires: a maximum of the observed lateness that decays by 1/32
/// of its excess over each later sample, so one long stall shows at once and fades over
/// some hundreds of expiries (4 ms to 10 µs in about 190). `old` and `sample` in ns; returns the new estimate.
pub const fn timer_lag(old: u64, sample: u64) -> u64 {
    if sample >= old {
        sample
    } else {
        old - (old - sample) / 32
    }
}

/// The smallest pacing slack a host's timer earns, ns: twice the `hrtimer` batching
/// slack the kernel module allows (10 µs, the `fq` qdisc's default).
pub const PACING_SLACK_FLOOR_NS: u64 = 20_000;

/// The pacing slack (µs, for `Config::pacing_slack_us`) of a host whose timer fires up
/// to `lag_ns` late ([`timer_lag`]): twice that plus [`PACING_SLACK_FLOOR_NS`], so that a
/// sender waiting for its pacing clock loses no sending time to a late expiry; at most
/// `u16::MAX` µs.
pub const fn pacing_slack_us(lag_ns: u64) -> u16 {
    let ns = lag_ns
        .saturating_mul(2)
        .saturating_add(PACING_SLACK_FLOOR_NS);
    let us = ns / 1000;
    if us > u16::MAX as u64 {
        u16::MAX
    } else {
        us as u16
    }
}

#[cfg(test)]
mod tests {
    use super::super::sack::seq_lt;
    use super::*;

    #[test]
    fn microsecond_times_compare_across_the_wrap() {
        let t = Instant(5_000_000);
        assert_eq!(t.as_micros32(), 5_000);
        assert!(seq_lt(5_000, 5_001) && !seq_lt(5_000, 5_000));
        assert!(!seq_lt(5_000, 4_999));
        // Across the wrap of the 32 bits (71 minutes).
        let before = Instant((u64::from(u32::MAX) - 10) * 1000).as_micros32();
        let after = Instant((u64::from(u32::MAX) + 10) * 1000).as_micros32();
        assert!(after < before && seq_lt(before, after));
        assert!(!seq_lt(after, before));
    }

    #[test]
    fn a_stall_shows_at_once_and_fades() {
        let mut lag = timer_lag(0, 3_000);
        assert_eq!(lag, 3_000);
        lag = timer_lag(lag, 4_000_000);
        assert_eq!(lag, 4_000_000, "a 4 ms stall is taken whole");
        let mut n = 0;
        while lag > 10_000 {
            lag = timer_lag(lag, 3_000);
            n += 1;
        }
        // (1 - 1/32)^n * 4 ms < 10 µs: n = ln(400) * 32 ≈ 190.
        assert!((150..=250).contains(&n), "{n} expiries to fade");
        assert!(lag >= 3_000, "never below the samples");
    }

    #[test]
    fn slack_covers_twice_the_lag_within_u16() {
        assert_eq!(pacing_slack_us(0), 20);
        assert_eq!(pacing_slack_us(10_000), 40);
        assert_eq!(pacing_slack_us(2_000_000), 4_020);
        assert_eq!(pacing_slack_us(u64::MAX), u16::MAX);
    }
}
