//! Per-path sender congestion control: DCTCP-style ECN AIMD plus loss decrease.
//!
//! * Additive increase `pwnd += ai * acked / W`. `W = pwnd` (about `ai` bytes per round
//!   trip per path) while the path sees no congestion; once its `alpha` shows ECN marks
//!   (`alpha >= 1/16`), `W` is the sum of the connection's active path windows, so the
//!   connection as a whole grows about `ai` per round trip however many paths it has
//!   (RFC 6356's "do no harm": a multipath connection takes no more of a shared
//!   bottleneck than a single-path one). The coupling is ECN-gated because a shared
//!   bottleneck marks before it drops, while random loss (no marks) cuts one path's
//!   window and a coupled increase would take K times longer to regrow it.
//! * ECN: once per round trip `alpha = (1 - g) * alpha + g * F` where `F` is the fraction of
//!   acknowledged packets that carried CE; if any did, `pwnd *= 1 - alpha / 2`.
//! * Loss (SACK gap): `pwnd *= loss_keep / 1024`, at most once per round trip.
//! * Timeouts are failure signals, handled by the path state machine, not here.

use super::time::Instant;

/// DCTCP `alpha` (1/1024 units, here 1/16) from which the increase is coupled: about
/// one round trip in which every packet was marked, or several with a few marks; with
/// `g = 1/16` it decays below again some 40 unmarked round trips later.
const COUPLE_ALPHA: u16 = 64;

/// Congestion-control parameters (shared by all paths of a connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcConfig {
    /// Initial per-path window in bytes.
    pub init_pwnd: u32,
    /// Smallest per-path window in bytes (at least one packet).
    pub min_pwnd: u32,
    /// Largest per-path window in bytes.
    pub max_pwnd: u32,
    /// Additive increase per round trip in bytes.
    pub ai: u32,
    /// EWMA gain `g` as a right shift (`g = 2^-shift`).
    pub g_shift: u8,
    /// Window kept on a loss, in 1/1024 units.
    pub loss_keep: u16,
}

impl Default for CcConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl CcConfig {
    /// The defaults, usable in constants.
    pub const DEFAULT: CcConfig = {
        CcConfig {
            init_pwnd: 4 * 4096,
            min_pwnd: 4096,
            max_pwnd: 1 << 20,
            ai: 4096,
            g_shift: 4,
            loss_keep: 768,
        }
    };
}

/// One path's congestion state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathCc {
    /// Current window in bytes.
    pub pwnd: u32,
    /// DCTCP alpha in 1/1024 units (0..=1024).
    pub alpha: u16,
    acked: u16,
    ce: u16,
    /// End of the current ECN round (low 32 bits of ns), valid with [`ROUND`].
    round_end: u32,
    /// End of the loss-decrease hold-off (low 32 bits of ns), valid with [`HOLD`].
    last_loss: u32,
    /// [`ROUND`], [`HOLD`], [`MARKED`].
    flags: u8,
}

/// `round_end` is set: an ECN round is running.
const ROUND: u8 = 1;
/// `last_loss` is set: a loss decrease was made and its hold-off may be running.
const HOLD: u8 = 2;
/// A CE mark was acknowledged since the path (re)started: only then may `alpha`, which
/// starts at 1 as DCTCP's does, couple the increase.
const MARKED: u8 = 4;

/// Whether a deadline `t` (low 32 bits of ns), armed at most `span_ns` ahead of its
/// arming (`armed`: it was armed at all), is still in the future at `now`. A deadline
/// more than 4 spans ahead is a stale one from before a wrap of the 32-bit clock (the
/// path was idle for seconds), not a future one: it has passed. (A fresh controller has
/// no deadline: with `now` the kernel's `ktime_get()`, a stamp 0 would lie up to 2^31 ns
/// "ahead" of half of all start times.)
#[inline]
fn pending(armed: bool, now: u32, t: u32, span_ns: u64) -> bool {
    let ahead = u64::from(t.wrapping_sub(now));
    armed && ahead != 0 && ahead <= span(span_ns).saturating_mul(4)
}

/// A round or hold-off length: the round trip, within [1 ns, 2^30 ns].
#[inline]
fn span(rtt_ns: u64) -> u64 {
    rtt_ns.clamp(1, 1 << 30)
}

impl PathCc {
    /// A fresh controller at the initial window.
    pub fn new(cfg: &CcConfig) -> PathCc {
        PathCc {
            pwnd: cfg.init_pwnd.max(cfg.min_pwnd),
            alpha: 1024,
            ..PathCc::default()
        }
    }

    /// `bytes` newly acknowledged, `pkts` of them with `ce` marked, at `now` with round
    /// trip estimate `rtt_ns`; `coupled`: the sum of the windows the additive increase
    /// is shared by while this path is [`PathCc::congested`] (the connection's congested
    /// Active paths; a sum below this window leaves the increase uncoupled).
    #[allow(clippy::too_many_arguments)]
    pub fn on_ack(
        &mut self,
        cfg: &CcConfig,
        now: Instant,
        rtt_ns: u64,
        bytes: u32,
        pkts: u16,
        ce: u16,
        coupled: u32,
    ) {
        self.acked = self.acked.saturating_add(pkts);
        self.ce = self.ce.saturating_add(ce.min(pkts));
        if ce > 0 {
            self.flags |= MARKED;
        }
        let stamp = now.wire_stamp();
        if !pending(self.flags & HOLD != 0, stamp, self.last_loss, rtt_ns) {
            self.flags &= !HOLD;
        }
        if !pending(self.flags & ROUND != 0, stamp, self.round_end, rtt_ns) {
            if self.acked > 0 {
                let f = (u32::from(self.ce) * 1024) / u32::from(self.acked);
                let a = u32::from(self.alpha);
                let g = u32::from(cfg.g_shift);
                let a = a - a.checked_shr(g).unwrap_or(0) + f.checked_shr(g).unwrap_or(0);
                self.alpha = a.min(1024) as u16;
                if self.ce > 0 {
                    let cut = (u64::from(self.pwnd) * u64::from(self.alpha)) / 2048;
                    self.pwnd = self.pwnd.saturating_sub(cut as u32).max(cfg.min_pwnd);
                }
            }
            self.acked = 0;
            self.ce = 0;
            self.round_end = stamp.wrapping_add(span(rtt_ns) as u32);
            self.flags |= ROUND;
        }
        if ce == 0 && bytes > 0 {
            let w = if self.congested() {
                self.pwnd.max(coupled)
            } else {
                self.pwnd
            }
            .max(1);
            let inc = (u64::from(cfg.ai) * u64::from(bytes)) / u64::from(w);
            self.pwnd = self
                .pwnd
                .saturating_add(inc.min(u64::from(u32::MAX)) as u32)
                .min(cfg.max_pwnd);
        }
    }

    /// Whether the path sees congestion (ECN marks since it (re)started, and `alpha` at
    /// least 1/16): its increase is then coupled.
    pub fn congested(&self) -> bool {
        self.flags & MARKED != 0 && self.alpha >= COUPLE_ALPHA
    }

    /// Whether the path has seen ECN marks since it (re)started: the precondition of
    /// [`PathCc::congested`].
    pub fn marked(&self) -> bool {
        self.flags & MARKED != 0
    }

    /// A loss was detected at `now`.
    pub fn on_loss(&mut self, cfg: &CcConfig, now: Instant, rtt_ns: u64) {
        let stamp = now.wire_stamp();
        if !pending(self.flags & HOLD != 0, stamp, self.last_loss, rtt_ns) {
            let w = (u64::from(self.pwnd) * u64::from(cfg.loss_keep)) / 1024;
            self.pwnd = (w.min(u64::from(u32::MAX)) as u32).max(cfg.min_pwnd);
            self.last_loss = stamp.wrapping_add(span(rtt_ns) as u32);
            self.flags |= HOLD;
        }
    }

    /// The path was (re)validated after a failure: restart from the initial window.
    pub fn reset(&mut self, cfg: &CcConfig) {
        *self = PathCc::new(cfg);
    }
}

impl PathCc {
    /// The initial (all-zero) value, usable in constants.
    pub const EMPTY: PathCc = PathCc {
        pwnd: 0,
        alpha: 0,
        acked: 0,
        ce: 0,
        round_end: 0,
        last_loss: 0,
        flags: 0,
    };
}

impl Default for PathCc {
    fn default() -> Self {
        Self::EMPTY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: u64 = 10_000;

    /// Window after one unmarked ACK of `bytes` with `alpha` set and coupled sum `w`.
    fn grown(alpha: u16, pwnd: u32, bytes: u32, w: u32) -> u32 {
        let cfg = CcConfig::DEFAULT;
        let mut cc = PathCc::new(&cfg);
        cc.pwnd = pwnd;
        cc.alpha = alpha;
        // Mid-round: no alpha update before the increase.
        cc.round_end = 20_000;
        cc.flags = ROUND | MARKED;
        cc.on_ack(&cfg, Instant(1), RTT, bytes, 1, 0, w);
        cc.pwnd
    }

    #[test]
    fn unmarked_path_grows_by_its_own_window() {
        // 4 KiB acked on a 16 KiB window: ai * 4096 / 16384 = 1024, whatever the sum.
        assert_eq!(grown(0, 16384, 4096, 8 * 16384), 16384 + 1024);
        assert_eq!(
            grown(COUPLE_ALPHA - 1, 16384, 4096, 8 * 16384),
            16384 + 1024
        );
    }

    #[test]
    fn marked_path_shares_the_increase_over_the_connection() {
        // Coupled over 8 equal paths: an eighth of the uncoupled increase.
        assert_eq!(grown(COUPLE_ALPHA, 16384, 4096, 8 * 16384), 16384 + 128);
        // A sum below the path's own window (a stale or zero sum) never speeds it up.
        assert_eq!(grown(1024, 16384, 4096, 0), 16384 + 1024);
    }

    /// Window after `n` fully CE-marked one-packet ACKs 1 µs apart from `start` ns.
    fn after_marks(cc: &mut PathCc, start: u64, n: u64) -> u32 {
        let cfg = CcConfig::DEFAULT;
        for k in 0..n {
            cc.on_ack(&cfg, Instant(start + k * 1_000), RTT, 4096, 1, 1, 0);
        }
        cc.pwnd
    }

    #[test]
    fn a_fresh_path_reacts_whatever_the_clock_reads() {
        // The kernel's clock is ktime_get(): its low 32 bits are anything. Before, a
        // fresh path whose clock read 2^31 ns or more ignored ECN and loss for up to
        // 2.1 s (its deadlines started at stamp 0, "in the future").
        let cfg = CcConfig::DEFAULT;
        for start in [1_000_000u64, 0x8000_0000 + 1_000_000, 0xffff_ff00, 5 << 32] {
            let mut cc = PathCc::new(&cfg);
            assert_eq!(after_marks(&mut cc, start, 100), cfg.min_pwnd, "{start:#x}");
            let mut cc = PathCc::new(&cfg);
            cc.pwnd = 1 << 19;
            cc.on_loss(&cfg, Instant(start), RTT);
            assert_eq!(cc.pwnd, 3 << 17, "{start:#x}");
            // One decrease per round trip.
            cc.on_loss(&cfg, Instant(start + 1_000), RTT);
            assert_eq!(cc.pwnd, 3 << 17, "{start:#x}");
        }
    }

    #[test]
    fn a_path_idle_across_a_clock_wrap_still_reacts() {
        // A round armed, then 3.5 s of silence: its 32-bit end now reads 0.8 s ahead.
        let cfg = CcConfig::DEFAULT;
        let mut cc = PathCc::new(&cfg);
        after_marks(&mut cc, 1_000, 1);
        cc.pwnd = 1 << 19;
        let w = after_marks(&mut cc, 3_500_000_000, 30);
        assert!(w < 1 << 18, "{w}");
    }

    #[test]
    fn a_fresh_path_is_coupled_only_once_marked() {
        // alpha starts at 1, as DCTCP's: without a mark that is no sign of congestion.
        let cfg = CcConfig::DEFAULT;
        let mut cc = PathCc::new(&cfg);
        assert!(!cc.congested());
        cc.on_ack(&cfg, Instant(1_000), RTT, 4096, 1, 0, 0);
        assert!(!cc.congested());
        cc.on_ack(&cfg, Instant(2_000), RTT, 4096, 1, 1, 0);
        assert!(cc.congested());
        cc.reset(&cfg);
        assert!(!cc.congested());
    }
}
