//! Statistics that cannot flatter: every figure from what was delivered, with its
//! spread.
//!
//! * [`percentile`] / [`Tail`]: nearest-rank percentiles (Hyndman & Fan type 1: the
//!   smallest sample with at least p % of the samples at or below it; no interpolation,
//!   so a reported p99 is a value that occurred). A p99.9 from fewer than 1,000 samples
//!   is the maximum; [`Tail`] carries `n` so a table can say so.
//! * [`mean_ci95`]: mean over seeds with a 95 % confidence interval from Student's t
//!   with n−1 degrees of freedom (`mean ± t₀.₉₇₅(n−1)·s/√n`, `s` the sample standard
//!   deviation): exact table for df ≤ 30, the Cornish–Fisher expansion of t in terms of
//!   the normal quantile above (error < 1e-3 for df > 30). Needs n ≥ 2; assumes the
//!   per-seed figures are independent and roughly normal.
//! * [`jain`]: Jain's fairness index `(Σx)² / (n·Σx²)`: 1 for equal shares, 1/n when one
//!   flow takes everything.
//! * Time series from cumulative counters sampled at common times (delivered payload
//!   bytes per flow, wire bytes per link): [`window_rates`] cuts them into windows of W
//!   (e.g. 10 base RTTs), interpolating the counters linearly at window edges (a counter
//!   is monotone, so interpolation never invents bytes); [`jain_over_time`] is Jain's
//!   index per window over the flows' delivered rates; [`utilisation`] a link's carried
//!   rate per window over its capacity.
//! * Convergence, from delivered bytes only: [`settle_time`] is the first window start at
//!   or after an event from which a series (Jain per window, utilisation per window)
//!   stays at or above a threshold to the end of the run; [`fair_share_time`] the first
//!   window start from which every flow's delivered rate stays within ±tol of its fair
//!   share; [`time_to_bytes`] when a counter first reaches a byte count (completion time
//!   from delivered bytes).

/// The p-th percentile (0 < p ≤ 100) by nearest rank; None for no samples.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    Some(nearest_rank(&v, p))
}

fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    // p·n/100 in floating point can land just above an integer (0.999 × 1000 =
    // 999.0000000000001): shave the rounding error before the ceiling.
    let r = (p * n as f64 / 100.0 - 1e-9).ceil() as usize;
    sorted[r.clamp(1, n) - 1]
}

/// The tail summary of a sample (flow completion times, say).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tail {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Tail {
    pub fn of(xs: &[f64]) -> Option<Tail> {
        if xs.is_empty() {
            return None;
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Tail {
            n: v.len(),
            p50: nearest_rank(&v, 50.0),
            p99: nearest_rank(&v, 99.0),
            p999: nearest_rank(&v, 99.9),
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }
}

/// t₀.₉₇₅ for df = 1..=30.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The two-sided 95 % quantile of Student's t with `df` degrees of freedom (df ≥ 1).
pub fn t975(df: usize) -> f64 {
    assert!(df >= 1);
    if df <= 30 {
        return T975[df - 1];
    }
    // Cornish–Fisher (Abramowitz & Stegun 26.7.5) around z = Φ⁻¹(0.975).
    let z: f64 = 1.959_963_984_540_054;
    let v = df as f64;
    let z3 = z.powi(3);
    let z5 = z.powi(5);
    let z7 = z.powi(7);
    z + (z3 + z) / (4.0 * v)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v)
}

/// A mean with its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanCi {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n−1 denominator).
    pub sd: f64,
    /// Half-width: the interval is `mean ± half`.
    pub half: f64,
}

impl MeanCi {
    pub fn lo(&self) -> f64 {
        self.mean - self.half
    }
    pub fn hi(&self) -> f64 {
        self.mean + self.half
    }
}

/// Mean and Student-t 95 % CI of per-seed figures; None for fewer than two.
pub fn mean_ci95(xs: &[f64]) -> Option<MeanCi> {
    let n = xs.len();
    if n < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    Some(MeanCi {
        n,
        mean,
        sd,
        half: t975(n - 1) * sd / (n as f64).sqrt(),
    })
}

/// Jain's fairness index of non-negative shares; None if empty or all zero.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && s2 > 0.0).then(|| s * s / (xs.len() as f64 * s2))
}

/// A cumulative counter at time `t` by linear interpolation between samples (clamped to
/// the first and last sample).
pub fn counter_at(times: &[u64], cum: &[u64], t: u64) -> f64 {
    assert_eq!(times.len(), cum.len());
    assert!(!times.is_empty());
    let i = times.partition_point(|&x| x <= t);
    if i == 0 {
        return cum[0] as f64;
    }
    if i == times.len() {
        return cum[i - 1] as f64;
    }
    let (t0, t1) = (times[i - 1], times[i]);
    let (c0, c1) = (cum[i - 1] as f64, cum[i] as f64);
    c0 + (c1 - c0) * (t - t0) as f64 / (t1 - t0) as f64
}

/// Rates (counter units per second) in consecutive windows of `window_ns` from the first
/// sample; only whole windows that end by the last sample. Returns (window start, rate).
pub fn window_rates(times: &[u64], cum: &[u64], window_ns: u64) -> Vec<(u64, f64)> {
    assert!(window_ns > 0);
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return vec![];
    };
    let mut out = Vec::new();
    let mut t = first;
    while t + window_ns <= last {
        let d = counter_at(times, cum, t + window_ns) - counter_at(times, cum, t);
        out.push((t, d * 1e9 / window_ns as f64));
        t += window_ns;
    }
    out
}

/// Jain's index per window over the flows' delivered rates (`cums[f]`: flow f's
/// cumulative delivered bytes at `times`). Windows where no flow delivered anything
/// give None. Pass only the flows that should be sharing in the interval studied.
pub fn jain_over_time(times: &[u64], cums: &[Vec<u64>], window_ns: u64) -> Vec<(u64, Option<f64>)> {
    let per: Vec<Vec<(u64, f64)>> = cums
        .iter()
        .map(|c| window_rates(times, c, window_ns))
        .collect();
    let nw = per.first().map_or(0, |p| p.len());
    (0..nw)
        .map(|w| {
            let xs: Vec<f64> = per.iter().map(|p| p[w].1).collect();
            (per[0][w].0, jain(&xs))
        })
        .collect()
}

/// A link's utilisation per window: carried wire bits per second over `capacity_bps`
/// (`cum_wire`: cumulative wire bytes sent on it at `times`).
pub fn utilisation(
    times: &[u64],
    cum_wire: &[u64],
    capacity_bps: f64,
    window_ns: u64,
) -> Vec<(u64, f64)> {
    window_rates(times, cum_wire, window_ns)
        .into_iter()
        .map(|(t, r)| (t, r * 8.0 / capacity_bps))
        .collect()
}

/// The first window start ≥ `from` after which every value stays ≥ `threshold` to the
/// end of the series (None windows count as below). None if it never settles.
pub fn settle_time(series: &[(u64, Option<f64>)], from: u64, threshold: f64) -> Option<u64> {
    let mut settled = None;
    for &(t, v) in series.iter().filter(|(t, _)| *t >= from) {
        match (v.is_some_and(|v| v >= threshold), settled) {
            (true, None) => settled = Some(t),
            (false, _) => settled = None,
            _ => {}
        }
    }
    settled
}

/// As [`settle_time`] for a series without gaps (utilisation).
pub fn settle_time_of(series: &[(u64, f64)], from: u64, threshold: f64) -> Option<u64> {
    let s: Vec<(u64, Option<f64>)> = series.iter().map(|&(t, v)| (t, Some(v))).collect();
    settle_time(&s, from, threshold)
}

/// The first window start ≥ `from` from which every flow's windowed delivered rate
/// (bytes/s) stays within `fair_bps/8 × (1 ± tol)` to the end of the series.
pub fn fair_share_time(
    times: &[u64],
    cums: &[Vec<u64>],
    window_ns: u64,
    fair_bps: f64,
    tol: f64,
    from: u64,
) -> Option<u64> {
    let fair = fair_bps / 8.0;
    let per: Vec<Vec<(u64, f64)>> = cums
        .iter()
        .map(|c| window_rates(times, c, window_ns))
        .collect();
    let nw = per.first().map_or(0, |p| p.len());
    let series: Vec<(u64, Option<f64>)> = (0..nw)
        .map(|w| {
            let ok = per.iter().all(|p| (p[w].1 - fair).abs() <= tol * fair);
            (per[0][w].0, Some(if ok { 1.0 } else { 0.0 }))
        })
        .collect();
    settle_time(&series, from, 1.0)
}

/// When a cumulative counter first reaches `target` (interpolated between samples);
/// None if it never does.
pub fn time_to_bytes(times: &[u64], cum: &[u64], target: u64) -> Option<u64> {
    let i = cum.partition_point(|&c| c < target);
    if i == cum.len() {
        return None;
    }
    if i == 0 {
        return Some(times[0]);
    }
    let (t0, t1) = (times[i - 1] as f64, times[i] as f64);
    let (c0, c1) = (cum[i - 1] as f64, cum[i] as f64);
    Some((t0 + (t1 - t0) * (target as f64 - c0) / (c1 - c0)).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    #[test]
    fn percentiles_on_known_arrays() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), Some(50.0));
        assert_eq!(percentile(&xs, 99.0), Some(99.0));
        assert_eq!(percentile(&xs, 99.9), Some(100.0));
        assert_eq!(percentile(&xs, 1.0), Some(1.0));
        let xs: Vec<f64> = (1..=1000).rev().map(f64::from).collect();
        let t = Tail::of(&xs).unwrap();
        assert_eq!((t.p50, t.p99, t.p999, t.max), (500.0, 990.0, 999.0, 1000.0));
        assert_eq!(t.n, 1000);
        assert!(close(t.mean, 500.5, 1e-9));
        assert_eq!(percentile(&[7.0], 99.9), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        // Nearest rank picks a sample, never an interpolated value.
        assert_eq!(percentile(&[1.0, 10.0], 50.0), Some(1.0));
    }

    #[test]
    fn student_t_ci_against_known_values() {
        // 1..5: mean 3, s = √2.5, t(4) = 2.776 → half-width 1.9629.
        let c = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!(close(c.mean, 3.0, 1e-12));
        assert!(close(c.sd, 2.5f64.sqrt(), 1e-12));
        assert!(close(c.half, 2.776 * 2.5f64.sqrt() / 5f64.sqrt(), 1e-9));
        assert!(close(c.half, 1.9629, 1e-3));
        // Two samples: t(1) = 12.706.
        let c = mean_ci95(&[10.0, 12.0]).unwrap();
        assert!(close(c.half, 12.706 * 2f64.sqrt() / 2f64.sqrt(), 1e-9));
        assert_eq!(mean_ci95(&[1.0]), None);
        // Identical samples: zero width.
        assert_eq!(mean_ci95(&[4.0; 6]).unwrap().half, 0.0);
        // Beyond the table, against published quantiles.
        assert!(close(t975(40), 2.021, 1e-3));
        assert!(close(t975(60), 2.000, 1e-3));
        assert!(close(t975(120), 1.980, 1e-3));
        assert!(close(t975(100_000), 1.960, 1e-3));
        assert!(t975(31) < t975(30) && t975(31) > t975(40));
    }

    #[test]
    fn jain_bounds() {
        assert!(close(jain(&[5.0; 8]).unwrap(), 1.0, 1e-12));
        assert!(close(jain(&[0.0, 0.0, 9.0, 0.0]).unwrap(), 0.25, 1e-12));
        assert!(close(jain(&[1.0, 3.0]).unwrap(), 16.0 / 20.0, 1e-12));
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn windows_and_jain_over_time() {
        // Two flows sampled every 1 µs for 10 µs. Flow a: 1000 B/µs throughout; flow b:
        // nothing for 4 µs, then 1000 B/µs.
        let times: Vec<u64> = (0..=10).map(|i| i * 1000).collect();
        let a: Vec<u64> = (0..=10).map(|i| i * 1000).collect();
        let b: Vec<u64> = (0..=10u64).map(|i| i.saturating_sub(4) * 1000).collect();
        let r = window_rates(&times, &a, 2000);
        assert_eq!(r.len(), 5);
        assert!(r.iter().all(|&(_, x)| close(x, 1e9, 1e-3)));
        let j = jain_over_time(&times, &[a.clone(), b.clone()], 2000);
        let v: Vec<f64> = j.iter().map(|x| x.1.unwrap()).collect();
        assert!(close(v[0], 0.5, 1e-12));
        assert!(close(v[1], 0.5, 1e-12));
        assert!(close(v[2], 1.0, 1e-12));
        assert_eq!(settle_time(&j, 0, 0.99), Some(4000));
        assert_eq!(
            fair_share_time(&times, &[a.clone(), b.clone()], 2000, 8e9, 0.05, 0),
            Some(4000)
        );
        // Windows that do not align with samples interpolate.
        let r = window_rates(&times, &b, 3000);
        assert!(close(r[1].1, 2000.0 * 1e9 / 3000.0, 1e-3));
        assert_eq!(time_to_bytes(&times, &b, 2500), Some(6500));
        assert_eq!(time_to_bytes(&times, &b, 0), Some(0));
        assert_eq!(time_to_bytes(&times, &b, 10_000), None);
    }

    #[test]
    fn utilisation_and_settling() {
        // A 100 Gb/s link carrying 25, 50, 100, 100, 90, 100 % in 1 µs windows.
        let per_us = [3125u64, 6250, 12500, 12500, 11250, 12500];
        let times: Vec<u64> = (0..=6).map(|i| i * 1000).collect();
        let mut cum = vec![0u64];
        for b in per_us {
            cum.push(cum.last().unwrap() + b);
        }
        let u = utilisation(&times, &cum, 100e9, 1000);
        let v: Vec<f64> = u.iter().map(|x| x.1).collect();
        for (x, want) in v.iter().zip([0.25, 0.5, 1.0, 1.0, 0.9, 1.0]) {
            assert!(close(*x, want, 1e-9));
        }
        assert_eq!(settle_time_of(&u, 0, 0.95), Some(5000));
        assert_eq!(settle_time_of(&u, 0, 0.85), Some(2000));
        assert_eq!(settle_time_of(&u, 0, 1.5), None);
    }
}
