//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
//! SIGCOMM 2015): the rate-based congestion control of RoCEv2 NICs.
//!
//! * The **notification point** ([`Np`]) is the receiving NIC: when a CE-marked packet
//!   arrives it sends a CNP to the sender, at most one per `cnp_interval_ns` per QP.
//! * The **reaction point** ([`Rp`]) is the sending NIC's per-QP rate limiter. Its state
//!   is the current rate `Rc`, the target rate `Rt` and the congestion estimate `α`:
//!   - on a CNP (at most one cut per `rate_decrease_interval_ns`, the NIC's rate-reduce
//!     monitor period): `Rt ← Rc` (see [`DcqcnParams::clamp_target`]),
//!     `Rc ← max(min_rate, Rc·(1 − α/2))`, `α ← (1 − g)·α + g`; the increase stages and
//!     the byte counter restart;
//!   - every `alpha_period_ns` without a cut: `α ← (1 − g)·α` (computed lazily: no
//!     per-microsecond timer event); `α` starts at `alpha_init` on the first CNP;
//!   - rate increase, driven by a timer of period `timer_ns` and (optionally) a byte
//!     counter of `byte_counter` bytes sent. Each event first picks the phase from the
//!     stage counters *before* the event (`T` timer events, `BC` byte-counter events
//!     since the last cut), then counts itself:
//!       - with a byte counter (the paper): fast recovery while `max(T, BC) < F`:
//!         `Rc ← (Rt + Rc)/2`; additive increase while `max(T, BC) ≥ F > min(T, BC)`:
//!         `Rt ← Rt + R_AI`, `Rc ← (Rt + Rc)/2`; hyper increase once `min(T, BC) ≥ F`:
//!         `Rt ← Rt + R_HAI`, `Rc ← (Rt + Rc)/2`;
//!       - timer only (the Mellanox model in HPCC's ns-3 `rdma-hw.cc`, which has no byte
//!         counter): fast recovery while `T < F`, one additive step at `T = F`, hyper
//!         increase for `T > F`.
//!
//!     `Rt` is capped at line rate. (802.1Qau QCN scales the hyper step by the stage
//!     number; DCQCN as implemented in HPCC's simulator, and here, adds a constant
//!     `R_HAI` per event.)
//!
//! Rates are bits per second (`f64`), times nanoseconds since the start of the run.

/// The parameters of one DCQCN deployment. Use a named preset; every field says where
/// its value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnParams {
    /// Line rate of the sending NIC, bits/s; the start rate and the cap of `Rt`.
    pub line_bps: f64,
    /// Lowest rate a cut may reach, bits/s.
    pub min_rate_bps: f64,
    /// EWMA gain `g` of `α`.
    pub g: f64,
    /// `α` set when the first CNP arrives (ConnectX `initial_alpha_value`, 1023/1024;
    /// HPCC's model: 1).
    pub alpha_init: f64,
    /// `K`: `α` decays once per this period without a cut, ns.
    pub alpha_period_ns: u64,
    /// At most one rate cut per this interval, ns (0: every CNP cuts).
    pub rate_decrease_interval_ns: u64,
    /// `T`: rate-increase timer period, ns.
    pub timer_ns: u64,
    /// `B`: rate-increase byte counter, wire bytes sent (None: timer only).
    pub byte_counter: Option<u64>,
    /// `F`: fast-recovery stages.
    pub f: u32,
    /// `R_AI`, bits/s.
    pub rai_bps: f64,
    /// `R_HAI`, bits/s.
    pub rhai_bps: f64,
    /// When false, a cut sets `Rt ← Rc` only if a rate increase happened since the
    /// previous cut (or it is the first cut); when true, always (the paper).
    pub clamp_target: bool,
    /// Notification point: at most one CNP per QP per this interval, ns.
    pub cnp_interval_ns: u64,
}

impl DcqcnParams {
    /// DCQCN as HPCC's paper ran it (Li et al., "HPCC: High Precision Congestion
    /// Control", SIGCOMM 2019; alibaba-edu/High-Precision-Congestion-Control,
    /// `simulation/run.py --cc dcqcn`, the configuration most later RDMA simulators
    /// copy): CC_MODE 1 (the Mellanox model of `rdma-hw.cc`), `ALPHA_RESUME_INTERVAL 1`
    /// (µs), `RATE_DECREASE_INTERVAL 4` (µs), `RP_TIMER 300` (µs),
    /// `EWMA_GAIN 0.00390625` (1/256), `FAST_RECOVERY_TIMES 1`,
    /// `RATE_AI 5·bw/25 Mb/s`, `RATE_HAI 50·bw/25 Mb/s` (bw in Gb/s: 20 and 200 Mb/s at
    /// 100 Gb/s, ConnectX's firmware defaults of 5 and 50 Mb/s scaled from 25 Gb/s),
    /// `MIN_RATE 1000Mb/s`, `CLAMP_TARGET_RATE 0`. (The repository's
    /// `mix/config.txt` is CC_MODE 3, HPCC itself; its DCQCN lines, `RP_TIMER 900`,
    /// `RATE_AI 50Mb/s`, `RATE_HAI 100Mb/s`, `MIN_RATE 100Mb/s`, are unused
    /// placeholders, not a DCQCN configuration anyone ran.)
    /// The units are those of `rdma-hw.cc`, which schedules all three timers with
    /// `MicroSeconds(..)`. That model has no byte counter and sets `α = 1` on the
    /// first CNP. Its notification point flags every ACK of a CE-marked packet and the
    /// reaction point checks for a flag every 4 µs; a CNP at most every 4 µs
    /// (`cnp_interval_ns`) with the same 4 µs cut interval reacts identically without
    /// an extra flag per ACK. The switch side of that configuration (ECN at 100 Gb/s:
    /// Kmin 400 KB, Kmax 1600 KB, Pmax 0.2) belongs to the fabric, see [`EcnRed`].
    pub fn hpcc_ns3(line_bps: f64) -> DcqcnParams {
        DcqcnParams {
            line_bps,
            min_rate_bps: 1e9,
            g: 1.0 / 256.0,
            alpha_init: 1.0,
            alpha_period_ns: 1_000,
            rate_decrease_interval_ns: 4_000,
            timer_ns: 300_000,
            byte_counter: None,
            f: 1,
            rai_bps: 5e6 * line_bps / 25e9,
            rhai_bps: 50e6 * line_bps / 25e9,
            clamp_target: false,
            cnp_interval_ns: 4_000,
        }
    }

    /// The configuration shipped with the DCQCN authors' ns-3 simulator (Yibo Zhu,
    /// github.com/bobzhuyb/ns3-rdma, `windows/ns-3-dev/mix/config.txt`, the simulator
    /// behind the DCQCN paper's simulations): `CNP_INTERVAL 50` (µs),
    /// `ALPHA_RESUME_INTERVAL 55` (µs), `RP_TIMER 60` (µs), `BYTE_COUNTER 300000`
    /// (bytes: `qbb-net-device.cc` subtracts packet sizes from it),
    /// `DCTCP_GAIN 0.00390625` (g = 1/256), `FAST_RECOVERY_TIMES 5`, `RATE_AI 40Mb/s`,
    /// `RATE_HAI 200Mb/s`, `CLAMP_TARGET_RATE 1`; `MinRate` is that file's attribute
    /// default, 100 Mb/s. Every CNP cuts (the NP interval spaces them). `α = 1` on the
    /// first CNP as in the paper's description (that code initialises α to 0.5; the
    /// difference is one cut).
    pub fn zhu_ns3(line_bps: f64) -> DcqcnParams {
        DcqcnParams {
            line_bps,
            min_rate_bps: 100e6,
            g: 1.0 / 256.0,
            alpha_init: 1.0,
            alpha_period_ns: 55_000,
            rate_decrease_interval_ns: 0,
            timer_ns: 60_000,
            byte_counter: Some(300_000),
            f: 5,
            rai_bps: 40e6,
            rhai_bps: 200e6,
            clamp_target: true,
            cnp_interval_ns: 50_000,
        }
    }
}

/// RED/ECN marking a switch egress queue applies for DCQCN: no mark below `kmin_bytes`,
/// probability rising linearly to `pmax` at `kmax_bytes`, always above. The HPCC ns-3
/// configuration at 100 Gb/s: `KMIN_MAP … 100000000000 400`, `KMAX_MAP … 1600`
/// (KB), `PMAX_MAP … 0.2`. For the fabric owner; endpoints do not mark.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EcnRed {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
}

impl EcnRed {
    /// HPCC's ns-3 configuration at 100 Gb/s (KB = 1000 B in that file's units).
    pub const HPCC_100G: EcnRed = EcnRed {
        kmin_bytes: 400_000,
        kmax_bytes: 1_600_000,
        pmax: 0.2,
    };

    /// Marking probability at a queue of `q` bytes (the arriving packet included or not:
    /// the caller's convention).
    pub fn p_mark(&self, q: u64) -> f64 {
        if q <= self.kmin_bytes {
            0.0
        } else if q >= self.kmax_bytes {
            1.0
        } else {
            self.pmax * (q - self.kmin_bytes) as f64 / (self.kmax_bytes - self.kmin_bytes) as f64
        }
    }
}

/// Which rate-increase rule fired (for tests and traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    FastRecovery,
    Additive,
    Hyper,
}

/// The reaction point of one QP.
#[derive(Clone, Debug)]
pub struct Rp {
    p: DcqcnParams,
    rc: f64,
    rt: f64,
    /// `α` as of `alpha_t`; decays once per `alpha_period_ns` after it.
    alpha: f64,
    alpha_t: u64,
    t_stage: u32,
    b_stage: u32,
    bytes: u64,
    /// Next rate-increase timer event (None: at line rate, or no cut yet).
    inc_at: Option<u64>,
    last_cut: Option<u64>,
    cut_pending: bool,
    increased_since_cut: bool,
    /// Rate cuts applied so far.
    pub cuts: u64,
    /// CNPs received so far.
    pub cnps: u64,
    /// The last rate-increase phase applied.
    pub last_phase: Option<Phase>,
}

impl Rp {
    pub fn new(p: DcqcnParams) -> Rp {
        Rp {
            p,
            rc: p.line_bps,
            rt: p.line_bps,
            alpha: p.alpha_init,
            alpha_t: 0,
            t_stage: 0,
            b_stage: 0,
            bytes: 0,
            inc_at: None,
            last_cut: None,
            cut_pending: false,
            increased_since_cut: false,
            cuts: 0,
            cnps: 0,
            last_phase: None,
        }
    }

    pub fn params(&self) -> &DcqcnParams {
        &self.p
    }

    /// Current rate `Rc`, bits/s.
    pub fn rate_bps(&self) -> f64 {
        self.rc
    }

    /// Target rate `Rt`, bits/s.
    pub fn target_bps(&self) -> f64 {
        self.rt
    }

    /// `α` at `now` (the decays since the last cut applied).
    pub fn alpha(&self, now: u64) -> f64 {
        let k = self.p.alpha_period_ns.max(1);
        let n = now.saturating_sub(self.alpha_t) / k;
        self.alpha * (1.0 - self.p.g).powi(n.min(i32::MAX as u64) as i32)
    }

    /// A CNP arrived at `now`. Returns true if the rate changed now (a cut within the
    /// cut interval of the previous one is deferred to the interval's end).
    pub fn on_cnp(&mut self, now: u64) -> bool {
        self.cnps += 1;
        match self.last_cut {
            Some(t) if now < t + self.p.rate_decrease_interval_ns => {
                self.cut_pending = true;
                false
            }
            _ => {
                self.cut(now);
                true
            }
        }
    }

    fn cut(&mut self, now: u64) {
        if self.last_cut.is_none() {
            self.alpha = self.p.alpha_init;
            self.alpha_t = now;
        }
        let a = self.alpha(now);
        if self.p.clamp_target || self.increased_since_cut || self.last_cut.is_none() {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - a / 2.0)).max(self.p.min_rate_bps);
        self.alpha = (1.0 - self.p.g) * a + self.p.g;
        self.alpha_t = now;
        self.t_stage = 0;
        self.b_stage = 0;
        self.bytes = 0;
        self.increased_since_cut = false;
        self.inc_at = Some(now + self.p.timer_ns);
        self.last_cut = Some(now);
        self.cut_pending = false;
        self.cuts += 1;
    }

    fn at_line(&self) -> bool {
        self.rc >= self.p.line_bps && self.rt >= self.p.line_bps
    }

    fn increase(&mut self, timer: bool) {
        let f = self.p.f;
        let (t, b) = (self.t_stage, self.b_stage);
        let phase = if self.p.byte_counter.is_some() {
            if t.max(b) < f {
                Phase::FastRecovery
            } else if t.min(b) < f {
                Phase::Additive
            } else {
                Phase::Hyper
            }
        } else if t < f {
            Phase::FastRecovery
        } else if t == f {
            Phase::Additive
        } else {
            Phase::Hyper
        };
        if timer {
            self.t_stage += 1;
        } else {
            self.b_stage += 1;
        }
        match phase {
            Phase::FastRecovery => {}
            Phase::Additive => self.rt = (self.rt + self.p.rai_bps).min(self.p.line_bps),
            Phase::Hyper => self.rt = (self.rt + self.p.rhai_bps).min(self.p.line_bps),
        }
        self.rc = ((self.rt + self.rc) / 2.0).min(self.p.line_bps);
        if self.p.line_bps - self.rc < 1.0 {
            // Halving the gap never closes it in floating point.
            self.rc = self.p.line_bps;
        }
        self.increased_since_cut = true;
        self.last_phase = Some(phase);
    }

    /// `wire` bytes left at the current rate (drives the byte counter). Returns true
    /// if the rate changed.
    pub fn on_sent(&mut self, wire: u64) -> bool {
        let Some(b) = self.p.byte_counter else {
            return false;
        };
        if self.last_cut.is_none() || self.at_line() {
            return false;
        }
        self.bytes += wire;
        let mut changed = false;
        while self.bytes >= b {
            self.bytes -= b;
            self.increase(false);
            changed = true;
        }
        changed
    }

    /// The next time [`Rp::on_timer`] has work (a deferred cut or a rate increase).
    pub fn next_timer(&self) -> Option<u64> {
        let cut = if self.cut_pending {
            self.last_cut.map(|t| t + self.p.rate_decrease_interval_ns)
        } else {
            None
        };
        match (cut, self.inc_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Timers due at `now` fire. Returns true if the rate changed.
    pub fn on_timer(&mut self, now: u64) -> bool {
        let mut changed = false;
        if self.cut_pending {
            if let Some(t) = self.last_cut {
                if now >= t + self.p.rate_decrease_interval_ns {
                    self.cut(now);
                    changed = true;
                }
            }
        }
        while let Some(t) = self.inc_at {
            if t > now {
                break;
            }
            self.increase(true);
            changed = true;
            self.inc_at = if self.at_line() {
                None
            } else {
                Some(t + self.p.timer_ns)
            };
        }
        changed
    }
}

/// The notification point of one QP: decides which CE marks produce a CNP.
#[derive(Clone, Debug, Default)]
pub struct Np {
    interval_ns: u64,
    last: Option<u64>,
    /// CNPs generated so far.
    pub cnps: u64,
}

impl Np {
    pub fn new(interval_ns: u64) -> Np {
        Np {
            interval_ns,
            last: None,
            cnps: 0,
        }
    }

    /// A CE-marked packet arrived at `now`: true if a CNP is to be sent.
    pub fn on_ce(&mut self, now: u64) -> bool {
        match self.last {
            Some(t) if now < t + self.interval_ns => false,
            _ => {
                self.last = Some(now);
                self.cnps += 1;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G100: f64 = 100e9;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn cnp_cuts_by_half_alpha_with_the_decayed_alpha() {
        let p = DcqcnParams::hpcc_ns3(G100);
        let mut rp = Rp::new(p);
        assert!(rp.on_cnp(10_000));
        // α = 1 at start: the first cut halves the rate; α stays 1.
        assert!(close(rp.rate_bps(), 50e9));
        assert!(close(rp.alpha(10_000), 1.0));
        assert!(close(rp.target_bps(), G100));
        // 40 µs later α has decayed 40 times (K = 1 µs).
        let t = 50_000;
        let a = (1.0 - p.g).powi(40);
        assert!(close(rp.alpha(t), a));
        assert!(rp.on_cnp(t));
        assert!(close(rp.rate_bps(), 50e9 * (1.0 - a / 2.0)));
        assert!(close(rp.alpha(t), (1.0 - p.g) * a + p.g));
        // Not clamped (CLAMP_TARGET_RATE 0, no increase since the last cut).
        assert!(close(rp.target_bps(), G100));
        assert_eq!(rp.cuts, 2);
    }

    #[test]
    fn cuts_are_spaced_by_the_decrease_interval() {
        let p = DcqcnParams::hpcc_ns3(G100);
        let mut rp = Rp::new(p);
        assert!(rp.on_cnp(0));
        assert!(!rp.on_cnp(1_000));
        assert!(!rp.on_cnp(2_000));
        assert_eq!(rp.next_timer(), Some(4_000));
        assert!(rp.on_timer(4_000));
        assert_eq!(rp.cuts, 2);
        assert_eq!(rp.cnps, 3);
        let a = (1.0 - p.g).powi(4);
        assert!(close(rp.rate_bps(), 50e9 * (1.0 - a / 2.0)));
    }

    #[test]
    fn min_rate_floor() {
        let mut p = DcqcnParams::hpcc_ns3(G100);
        p.rate_decrease_interval_ns = 0;
        let mut rp = Rp::new(p);
        for i in 0..100 {
            rp.on_cnp(i);
        }
        assert!(close(rp.rate_bps(), p.min_rate_bps));
    }

    /// Timer-only recovery (HPCC's model): F fast-recovery steps, one additive step,
    /// then hyper increase, one event per `T`.
    #[test]
    fn timer_recovery_fast_then_additive_then_hyper() {
        let mut p = DcqcnParams::hpcc_ns3(G100);
        p.f = 2;
        p.clamp_target = true;
        p.rate_decrease_interval_ns = 0;
        let mut rp = Rp::new(p);
        rp.on_cnp(0); // Rc 50, Rt 100
        rp.on_cnp(0); // α = 1 still: Rc 25, Rt 50 (clamped)
        assert!(close(rp.rate_bps(), 25e9));
        assert!(close(rp.target_bps(), 50e9));
        let t = p.timer_ns;
        assert_eq!(rp.next_timer(), Some(t));
        // Nothing happens before the timer.
        assert!(!rp.on_timer(t - 1));
        let mut rc = 25e9;
        let mut rt = 50e9;
        let expect = [
            Phase::FastRecovery,
            Phase::FastRecovery,
            Phase::Additive,
            Phase::Hyper,
            Phase::Hyper,
        ];
        for (i, ph) in expect.iter().enumerate() {
            let now = t * (i as u64 + 1);
            assert_eq!(rp.next_timer(), Some(now));
            assert!(rp.on_timer(now));
            assert_eq!(rp.last_phase, Some(*ph), "event {i}");
            match ph {
                Phase::FastRecovery => {}
                Phase::Additive => rt += p.rai_bps,
                Phase::Hyper => rt += p.rhai_bps,
            }
            rc = (rc + rt) / 2.0;
            assert!(
                close(rp.rate_bps(), rc),
                "event {i}: {} vs {rc}",
                rp.rate_bps()
            );
            assert!(close(rp.target_bps(), rt));
        }
    }

    /// With a byte counter (the paper, the authors' simulator): additive while only one counter passed F, hyper
    /// once both did.
    #[test]
    fn byte_counter_and_timer_stages() {
        let mut p = DcqcnParams::zhu_ns3(G100);
        p.f = 2;
        let b = p.byte_counter.unwrap();
        let mut rp = Rp::new(p);
        rp.on_cnp(0);
        rp.on_cnp(0); // Rt 50 G, Rc 25 G
                      // Byte counter: two fast-recovery steps, then additive (T still 0 < F).
        assert!(!rp.on_sent(b - 1));
        assert!(rp.on_sent(1));
        assert_eq!(rp.last_phase, Some(Phase::FastRecovery));
        rp.on_sent(b);
        assert_eq!(rp.last_phase, Some(Phase::FastRecovery));
        rp.on_sent(b);
        assert_eq!(rp.last_phase, Some(Phase::Additive));
        rp.on_sent(b);
        assert_eq!(rp.last_phase, Some(Phase::Additive));
        // Two timer events bring T to F: then both counters are ≥ F: hyper.
        rp.on_timer(p.timer_ns);
        assert_eq!(rp.last_phase, Some(Phase::Additive));
        rp.on_timer(2 * p.timer_ns);
        assert_eq!(rp.last_phase, Some(Phase::Additive));
        let rt = rp.target_bps();
        rp.on_sent(b);
        assert_eq!(rp.last_phase, Some(Phase::Hyper));
        assert!(close(rp.target_bps(), rt + p.rhai_bps));
    }

    #[test]
    fn recovers_to_line_rate_and_stops_the_timer() {
        let p = DcqcnParams::hpcc_ns3(G100);
        let mut rp = Rp::new(p);
        rp.on_cnp(0);
        let mut now = 0;
        while let Some(t) = rp.next_timer() {
            now = t;
            rp.on_timer(t);
            assert!(now < 1_000_000_000, "never recovers");
        }
        assert!(close(rp.rate_bps(), G100));
        // Rt never dropped (first cut keeps Rt at line rate): halving the gap each
        // 900 µs reaches line rate (to f64 precision) in well under 0.1 s.
        assert!(now < 100_000_000);
    }

    #[test]
    fn np_one_cnp_per_interval() {
        let mut np = Np::new(50_000);
        let sent: Vec<u64> = (0..200u64)
            .map(|i| i * 1_000)
            .filter(|&t| np.on_ce(t))
            .collect();
        assert_eq!(sent, vec![0, 50_000, 100_000, 150_000]);
        assert_eq!(np.cnps, 4);
    }

    #[test]
    fn red_marking_probability() {
        let r = EcnRed::HPCC_100G;
        assert_eq!(r.p_mark(400_000), 0.0);
        assert!(close(r.p_mark(1_000_000), 0.1));
        assert_eq!(r.p_mark(1_600_000), 1.0);
    }
}
