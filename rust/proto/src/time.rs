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

    /// The low 32 bits of the nanosecond count, as carried in the wire timestamp field.
    #[inline]
    pub const fn wire_stamp(self) -> u32 {
        (self.0 & 0xffff_ffff) as u32
    }
}
