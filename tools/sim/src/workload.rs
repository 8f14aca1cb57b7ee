//! Traffic matrices and collectives as pure generators: no engine, no topology, only a
//! list of transfers the engine starts and tracks.
//!
//! A [`Transfer`] moves `bytes` from host `src` to host `dst`. It may start once the
//! run reaches `start_ns` *and* every transfer in `after` has completed (all its bytes
//! placed at its destination). Transfers are numbered by their index and `after` only
//! names earlier ones, so a [`Workload`] is a DAG in topological order. `group` tags the
//! transfers of one collective or traffic class: a collective's completion time is the
//! last completion in its group, minus its start.
//!
//! Generators (sizes in bytes, times in ns, hosts as engine host numbers):
//! * [`permutation`]: every host sends to one other, a uniformly random derangement.
//! * [`incast`]: N senders to one receiver.
//! * [`all_to_all`]: every host to every other at once (what a grouped all-to-all posts),
//!   and [`all_to_all_shifted`]: N−1 rounds, round r sends i → i+r after round r−1.
//! * [`ring_allreduce`]: the ring algorithm (reduce-scatter then all-gather): 2(N−1)
//!   steps, each moving one chunk of ≈ S/N to the next rank; a rank's step-s send waits
//!   for its step-(s−1) receive. Each rank sends 2(N−1)/N · S.
//! * [`halving_doubling_allreduce`]: Rabenseifner's algorithm for N = 2^k (recursive
//!   halving reduce-scatter, recursive doubling all-gather): 2·log2 N pairwise exchange
//!   steps, also 2(N−1)/N · S per rank.
//! * [`poisson_flows`]: open-loop flows with sizes from an empirical CDF ([`Cdf`]) and
//!   Poisson arrivals at a given load; [`background_foreground`] mixes a permutation of
//!   long flows with such foreground traffic and periodic incasts.
//! * [`SIZES`]: the message-size sweep 8 B … 1 GiB.
//!
//! Not done: tree (double binary tree) all-reduce; hierarchical (intra-node) collectives.

/// The message-size sweep of collective benchmarks (nccl-tests style, ×8 steps):
/// 8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB, 2 MiB, 16 MiB, 128 MiB, 1 GiB.
pub const SIZES: [u64; 10] = [
    8,
    64,
    512,
    4 << 10,
    32 << 10,
    256 << 10,
    2 << 20,
    16 << 20,
    128 << 20,
    1 << 30,
];

/// One transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Its index in [`Workload::transfers`].
    pub id: usize,
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    /// Earliest start, ns.
    pub start_ns: u64,
    /// Transfers (earlier ids) that must have completed first.
    pub after: Vec<usize>,
    /// Collective or traffic class.
    pub group: u32,
}

/// A list of transfers in dependency order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    pub transfers: Vec<Transfer>,
}

impl Workload {
    pub fn new() -> Workload {
        Workload::default()
    }

    /// Append a transfer; returns its id.
    pub fn push(
        &mut self,
        src: u32,
        dst: u32,
        bytes: u64,
        start_ns: u64,
        after: Vec<usize>,
        group: u32,
    ) -> usize {
        let id = self.transfers.len();
        assert!(
            after.iter().all(|&a| a < id),
            "dependencies must come first"
        );
        self.transfers.push(Transfer {
            id,
            src,
            dst,
            bytes,
            start_ns,
            after,
            group,
        });
        id
    }

    /// Append all of `other`, renumbering its ids (groups are kept).
    pub fn append(&mut self, other: Workload) {
        let off = self.transfers.len();
        for mut t in other.transfers {
            t.id += off;
            for a in &mut t.after {
                *a += off;
            }
            self.transfers.push(t);
        }
    }

    pub fn len(&self) -> usize {
        self.transfers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.transfers.is_empty()
    }

    /// Bytes each host sends, indexed by host (up to the largest host named).
    pub fn bytes_sent(&self) -> Vec<u64> {
        let n = self
            .transfers
            .iter()
            .map(|t| t.src.max(t.dst) as usize + 1)
            .max()
            .unwrap_or(0);
        let mut v = vec![0; n];
        for t in &self.transfers {
            v[t.src as usize] += t.bytes;
        }
        v
    }

    /// Ids of a group's transfers.
    pub fn group(&self, g: u32) -> Vec<usize> {
        self.transfers
            .iter()
            .filter(|t| t.group == g)
            .map(|t| t.id)
            .collect()
    }

    /// Length of the longest dependency chain (a collective's step count).
    pub fn depth(&self) -> usize {
        let mut d = vec![0usize; self.transfers.len()];
        for t in &self.transfers {
            d[t.id] = 1 + t.after.iter().map(|&a| d[a]).max().unwrap_or(0);
        }
        d.into_iter().max().unwrap_or(0)
    }
}

/// Deterministic PRNG for generators (splitmix64; the engine's own generator may
/// differ, so workloads are reproducible on their own seed).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n > 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

/// A uniformly random derangement of 0..n (no fixed point), n ≥ 2: Fisher–Yates
/// shuffles rejected while they have a fixed point (≈ e tries on average).
pub fn derangement(n: usize, rng: &mut Rng) -> Vec<usize> {
    assert!(n >= 2, "a derangement needs two elements");
    loop {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        if p.iter().enumerate().all(|(i, &x)| i != x) {
            return p;
        }
    }
}

/// Permutation traffic: host `hosts[i]` sends `bytes` to `hosts[π(i)]`, π a random
/// derangement drawn from `seed`.
pub fn permutation(hosts: &[u32], bytes: u64, start_ns: u64, seed: u64, group: u32) -> Workload {
    let p = derangement(hosts.len(), &mut Rng::new(seed));
    let mut w = Workload::new();
    for (i, &j) in p.iter().enumerate() {
        w.push(hosts[i], hosts[j], bytes, start_ns, vec![], group);
    }
    w
}

/// Incast: every host in `senders` sends `bytes` to `dst` at `start_ns`.
pub fn incast(senders: &[u32], dst: u32, bytes: u64, start_ns: u64, group: u32) -> Workload {
    let mut w = Workload::new();
    for &s in senders {
        assert_ne!(s, dst);
        w.push(s, dst, bytes, start_ns, vec![], group);
    }
    w
}

/// All-to-all posted at once: each ordered pair moves `bytes_per_pair`.
pub fn all_to_all(hosts: &[u32], bytes_per_pair: u64, start_ns: u64, group: u32) -> Workload {
    let mut w = Workload::new();
    for &s in hosts {
        for &d in hosts {
            if s != d {
                w.push(s, d, bytes_per_pair, start_ns, vec![], group);
            }
        }
    }
    w
}

/// All-to-all in N−1 shifted rounds: in round r (1..N) rank i sends to rank (i+r) mod N
/// once its round-(r−1) send completed.
pub fn all_to_all_shifted(
    hosts: &[u32],
    bytes_per_pair: u64,
    start_ns: u64,
    group: u32,
) -> Workload {
    let n = hosts.len();
    let mut w = Workload::new();
    let mut prev: Vec<Option<usize>> = vec![None; n];
    for r in 1..n {
        for i in 0..n {
            let after = prev[i].into_iter().collect();
            prev[i] = Some(w.push(
                hosts[i],
                hosts[(i + r) % n],
                bytes_per_pair,
                start_ns,
                after,
                group,
            ));
        }
    }
    w
}

/// Size of chunk `c` of `s` bytes cut into `n` near-equal chunks.
fn chunk(s: u64, n: usize, c: usize) -> u64 {
    let n = n as u64;
    s / n + u64::from((c as u64) < s % n)
}

/// Ring all-reduce of `bytes` over `ranks` (ring order as given), N ≥ 2. Step s of rank
/// i is transfer id `s·N + i`: reduce-scatter steps s < N−1 send chunk (i−s) mod N,
/// all-gather steps send chunk (i+1−(s−N+1)) mod N, always to rank i+1; step s waits for
/// the step-(s−1) transfer from rank i−1.
pub fn ring_allreduce(ranks: &[u32], bytes: u64, start_ns: u64, group: u32) -> Workload {
    let n = ranks.len();
    assert!(n >= 2);
    let mut w = Workload::new();
    for s in 0..2 * (n - 1) {
        for i in 0..n {
            let c = if s < n - 1 {
                (i + n - s % n) % n
            } else {
                let t = s - (n - 1);
                (i + 1 + n - t % n) % n
            };
            let after = if s == 0 {
                vec![]
            } else {
                vec![(s - 1) * n + (i + n - 1) % n]
            };
            w.push(
                ranks[i],
                ranks[(i + 1) % n],
                chunk(bytes, n, c),
                start_ns,
                after,
                group,
            );
        }
    }
    w
}

/// Halving-doubling (Rabenseifner) all-reduce of `bytes` over N = 2^k ranks. Step g of
/// rank i is transfer id `g·N + i`. Reduce-scatter step j (mask N/2^(j+1)): rank i keeps
/// one half of its current byte range and sends the other half to `i ^ mask`;
/// all-gather mirrors it (masks 1, 2, …, N/2), each rank sending its whole current
/// range. Step g waits for the step-(g−1) transfer it received.
pub fn halving_doubling_allreduce(
    ranks: &[u32],
    bytes: u64,
    start_ns: u64,
    group: u32,
) -> Workload {
    let n = ranks.len();
    assert!(n >= 2 && n.is_power_of_two(), "needs 2^k ranks");
    let k = n.trailing_zeros() as usize;
    let mut range = vec![(0u64, bytes); n];
    let mut hist = vec![Vec::with_capacity(k); n];
    // Per step: (partner, bytes sent) for each rank.
    let mut steps: Vec<Vec<(usize, u64)>> = Vec::with_capacity(2 * k);
    for j in 0..k {
        let mask = n >> (j + 1);
        let mut st = Vec::with_capacity(n);
        for (i, r) in range.iter_mut().enumerate() {
            let (lo, hi) = *r;
            hist[i].push(*r);
            let mid = lo + (hi - lo) / 2;
            let (keep, send) = if i & mask == 0 {
                ((lo, mid), hi - mid)
            } else {
                ((mid, hi), mid - lo)
            };
            *r = keep;
            st.push((i ^ mask, send));
        }
        steps.push(st);
    }
    for j in 0..k {
        let mask = 1 << j;
        let mut st = Vec::with_capacity(n);
        for (i, r) in range.iter_mut().enumerate() {
            st.push((i ^ mask, r.1 - r.0));
            *r = hist[i][k - 1 - j];
        }
        steps.push(st);
    }
    let mut w = Workload::new();
    for (g, st) in steps.iter().enumerate() {
        for (i, &(p, b)) in st.iter().enumerate() {
            let after = if g == 0 {
                vec![]
            } else {
                // The previous step's transfer into rank i came from its partner then.
                let q = steps[g - 1][i].0;
                vec![(g - 1) * n + q]
            };
            w.push(ranks[i], ranks[p], b, start_ns, after, group);
        }
    }
    w
}

/// An empirical flow-size distribution: points (bytes, cumulative %), sampled by linear
/// interpolation of the inverse CDF.
#[derive(Clone, Copy, Debug)]
pub struct Cdf(pub &'static [(u64, f64)]);

impl Cdf {
    /// Web search (Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010), as
    /// tabulated in HPCC's `traffic_gen/WebSearch_distribution.txt`.
    pub const WEB_SEARCH: Cdf = Cdf(&[
        (0, 0.0),
        (10_000, 15.0),
        (20_000, 20.0),
        (30_000, 30.0),
        (50_000, 40.0),
        (80_000, 53.0),
        (200_000, 60.0),
        (1_000_000, 70.0),
        (2_000_000, 80.0),
        (5_000_000, 90.0),
        (10_000_000, 97.0),
        (30_000_000, 100.0),
    ]);

    /// Facebook Hadoop (Roy et al., "Inside the Social Network's (Datacenter) Network",
    /// SIGCOMM 2015), as tabulated in HPCC's `traffic_gen/FbHdp_distribution.txt`.
    pub const FB_HADOOP: Cdf = Cdf(&[
        (0, 0.0),
        (100, 1.0),
        (200, 2.0),
        (300, 5.0),
        (350, 15.0),
        (400, 20.0),
        (500, 30.0),
        (600, 40.0),
        (700, 50.0),
        (1_000, 60.0),
        (2_000, 67.0),
        (7_000, 70.0),
        (30_000, 72.0),
        (50_000, 82.0),
        (80_000, 87.0),
        (120_000, 90.0),
        (300_000, 95.0),
        (1_000_000, 97.5),
        (2_000_000, 99.0),
        (10_000_000, 100.0),
    ]);

    /// The size at cumulative percentage `y` (0..=100).
    pub fn at(&self, y: f64) -> u64 {
        let pts = self.0;
        for w in pts.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if y <= y1 {
                let x = x0 as f64 + (x1 - x0) as f64 * (y - y0) / (y1 - y0);
                return x.round() as u64;
            }
        }
        pts[pts.len() - 1].0
    }

    /// A random size (at least 1 byte).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        self.at(rng.unit() * 100.0).max(1)
    }

    /// Mean size of the piecewise-linear distribution, bytes.
    pub fn mean(&self) -> f64 {
        self.0
            .windows(2)
            .map(|w| (w[0].0 + w[1].0) as f64 / 2.0 * (w[1].1 - w[0].1) / 100.0)
            .sum()
    }
}

/// Open-loop flows between random distinct pairs of `hosts` with sizes from `cdf` and
/// Poisson arrivals in `[start_ns, start_ns + duration_ns)`, at an average offered load
/// of `load` × `link_bps` per host (payload bits).
#[allow(clippy::too_many_arguments)]
pub fn poisson_flows(
    hosts: &[u32],
    cdf: Cdf,
    load: f64,
    link_bps: f64,
    start_ns: u64,
    duration_ns: u64,
    seed: u64,
    group: u32,
) -> Workload {
    assert!(hosts.len() >= 2 && load > 0.0);
    let mut rng = Rng::new(seed);
    let flows_per_ns = load * link_bps * hosts.len() as f64 / (8.0 * cdf.mean()) / 1e9;
    let mut w = Workload::new();
    let mut t = start_ns as f64;
    let end = (start_ns + duration_ns) as f64;
    loop {
        t += rng.exp(1.0 / flows_per_ns);
        if t >= end {
            return w;
        }
        let s = rng.below(hosts.len() as u64) as usize;
        let mut d = rng.below(hosts.len() as u64 - 1) as usize;
        if d >= s {
            d += 1;
        }
        w.push(
            hosts[s],
            hosts[d],
            cdf.sample(&mut rng),
            t as u64,
            vec![],
            group,
        );
    }
}

/// Groups of [`background_foreground`].
pub const GROUP_BACKGROUND: u32 = 0;
pub const GROUP_FOREGROUND: u32 = 1;
pub const GROUP_INCAST_BASE: u32 = 2;

/// A background/foreground mix over `hosts`: a permutation of long flows of `bg_bytes`
/// at t = 0 (group 0); foreground flows from `fg_cdf` at `fg_load` of `link_bps` over
/// `duration_ns` (group 1); and every `incast_every_ns` an incast of `incast_fan_in`
/// random senders × `incast_bytes` to a random receiver (groups 2, 3, …; none if
/// `incast_every_ns` is 0).
#[allow(clippy::too_many_arguments)]
pub fn background_foreground(
    hosts: &[u32],
    bg_bytes: u64,
    fg_cdf: Cdf,
    fg_load: f64,
    link_bps: f64,
    duration_ns: u64,
    incast_every_ns: u64,
    incast_fan_in: usize,
    incast_bytes: u64,
    seed: u64,
) -> Workload {
    let mut w = permutation(hosts, bg_bytes, 0, seed, GROUP_BACKGROUND);
    w.append(poisson_flows(
        hosts,
        fg_cdf,
        fg_load,
        link_bps,
        0,
        duration_ns,
        seed ^ 1,
        GROUP_FOREGROUND,
    ));
    if incast_every_ns > 0 {
        assert!(incast_fan_in < hosts.len());
        let mut rng = Rng::new(seed ^ 2);
        let mut g = GROUP_INCAST_BASE;
        let mut t = incast_every_ns;
        while t < duration_ns {
            let order = derangement(hosts.len(), &mut rng);
            let dst = hosts[order[0]];
            let senders: Vec<u32> = order[1..=incast_fan_in].iter().map(|&i| hosts[i]).collect();
            w.append(incast(&senders, dst, incast_bytes, t, g));
            g += 1;
            t += incast_every_ns;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: u32) -> Vec<u32> {
        (0..n).collect()
    }

    #[test]
    fn permutation_is_a_derangement_and_seeded() {
        for seed in 0..50 {
            let w = permutation(&hosts(16), 1 << 20, 0, seed, 0);
            assert_eq!(w.len(), 16);
            let mut dsts: Vec<u32> = w.transfers.iter().map(|t| t.dst).collect();
            assert!(w.transfers.iter().all(|t| t.src != t.dst));
            dsts.sort();
            assert_eq!(dsts, hosts(16));
        }
        assert_eq!(
            permutation(&hosts(8), 1, 0, 7, 0),
            permutation(&hosts(8), 1, 0, 7, 0)
        );
        assert_ne!(
            permutation(&hosts(64), 1, 0, 7, 0),
            permutation(&hosts(64), 1, 0, 8, 0)
        );
        // Two hosts: the only derangement is the swap.
        let w = permutation(&[3, 9], 1, 0, 1, 0);
        assert_eq!((w.transfers[0].dst, w.transfers[1].dst), (9, 3));
    }

    #[test]
    fn ring_allreduce_steps_and_bytes() {
        for n in [2usize, 3, 4, 8, 16] {
            let s = 1u64 << 20;
            let s = s - s % n as u64; // divisible
            let w = ring_allreduce(&hosts(n as u32), s, 0, 5);
            assert_eq!(w.len(), 2 * (n - 1) * n);
            assert_eq!(w.depth(), 2 * (n - 1));
            for b in w.bytes_sent() {
                assert_eq!(b, 2 * (n as u64 - 1) * s / n as u64);
            }
            for t in &w.transfers {
                assert_eq!(t.dst, (t.src + 1) % n as u32);
                // A step waits for what this rank received in the previous step.
                for &a in &t.after {
                    assert_eq!(w.transfers[a].dst, t.src);
                    assert_eq!(a / n + 1, t.id / n);
                }
            }
        }
        // Not divisible: chunk sizes differ by one byte, totals still add up.
        let w = ring_allreduce(&hosts(3), 10, 0, 0);
        let sent: u64 = w.bytes_sent().iter().sum();
        assert_eq!(sent, 2 * 2 * 10);
    }

    /// In each phase a rank sends every chunk but one: the reduce-scatter skips chunk
    /// i+1 (the one it ends up owning, fully reduced), the all-gather skips chunk i+2
    /// (the one its successor owns).
    #[test]
    fn ring_allreduce_chunk_flow() {
        let n = 5;
        let s = 5 * 1000 + 3; // chunks 1001, 1001, 1001, 1000, 1000
        let w = ring_allreduce(&hosts(n as u32), s, 0, 0);
        for i in 0..n {
            let rs: u64 = (0..n - 1).map(|st| w.transfers[st * n + i].bytes).sum();
            let ag: u64 = (n - 1..2 * (n - 1))
                .map(|st| w.transfers[st * n + i].bytes)
                .sum();
            assert_eq!(rs, s - chunk(s, n, (i + 1) % n), "rank {i}");
            assert_eq!(ag, s - chunk(s, n, (i + 2) % n), "rank {i}");
        }
    }

    #[test]
    fn halving_doubling_steps_and_bytes() {
        for n in [2usize, 4, 8, 32] {
            let s = 1u64 << 20;
            let w = halving_doubling_allreduce(&hosts(n as u32), s, 0, 0);
            let k = n.trailing_zeros() as usize;
            assert_eq!(w.len(), 2 * k * n);
            assert_eq!(w.depth(), 2 * k);
            for b in w.bytes_sent() {
                assert_eq!(b, 2 * (n as u64 - 1) * s / n as u64);
            }
            for t in &w.transfers {
                for &a in &t.after {
                    assert_eq!(w.transfers[a].dst, t.src);
                }
            }
        }
        // Odd sizes: what a rank sends in the all-gather equals what it kept.
        let w = halving_doubling_allreduce(&hosts(4), 1001, 0, 0);
        let sent: u64 = w.bytes_sent().iter().sum();
        assert_eq!(sent, 2 * 3 * 1001);
    }

    #[test]
    fn incast_and_all_to_all() {
        let w = incast(&[1, 2, 3], 0, 100, 5, 9);
        assert!(w.transfers.iter().all(|t| t.dst == 0 && t.start_ns == 5));
        let w = all_to_all(&hosts(6), 10, 0, 0);
        assert_eq!(w.len(), 30);
        assert!(w.bytes_sent().iter().all(|&b| b == 50));
        let w = all_to_all_shifted(&hosts(6), 10, 0, 0);
        assert_eq!(w.len(), 30);
        assert_eq!(w.depth(), 5);
        let mut pairs: Vec<(u32, u32)> = w.transfers.iter().map(|t| (t.src, t.dst)).collect();
        pairs.sort();
        pairs.dedup();
        assert_eq!(pairs.len(), 30);
    }

    #[test]
    fn cdf_sampling() {
        let c = Cdf::WEB_SEARCH;
        assert_eq!(c.at(0.0), 0);
        assert_eq!(c.at(15.0), 10_000);
        assert_eq!(c.at(100.0), 30_000_000);
        assert_eq!(c.at(85.0), 3_500_000);
        let mut rng = Rng::new(1);
        let n = 200_000;
        let mean = (0..n).map(|_| c.sample(&mut rng) as f64).sum::<f64>() / n as f64;
        assert!(
            (mean / c.mean() - 1.0).abs() < 0.02,
            "{mean} vs {}",
            c.mean()
        );
        assert!(Cdf::FB_HADOOP.mean() < c.mean());
    }

    #[test]
    fn poisson_load_matches() {
        let h = hosts(32);
        let dur = 100_000_000; // 100 ms
        let w = poisson_flows(&h, Cdf::WEB_SEARCH, 0.3, 100e9, 0, dur, 3, 1);
        let bytes: u64 = w.transfers.iter().map(|t| t.bytes).sum();
        let offered = bytes as f64 * 8.0 / (dur as f64 / 1e9) / (32.0 * 100e9);
        assert!((offered - 0.3).abs() < 0.03, "{offered}");
        assert!(w
            .transfers
            .iter()
            .all(|t| t.src != t.dst && t.start_ns < dur));
        assert!(w
            .transfers
            .windows(2)
            .all(|p| p[0].start_ns <= p[1].start_ns));
    }

    #[test]
    fn mix_has_all_parts() {
        let h = hosts(16);
        let w = background_foreground(
            &h,
            1 << 30,
            Cdf::FB_HADOOP,
            0.2,
            100e9,
            1_000_000,
            250_000,
            8,
            64 << 10,
            4,
        );
        assert_eq!(w.group(GROUP_BACKGROUND).len(), 16);
        assert!(!w.group(GROUP_FOREGROUND).is_empty());
        for g in GROUP_INCAST_BASE..GROUP_INCAST_BASE + 3 {
            let ids = w.group(g);
            assert_eq!(ids.len(), 8);
            let dst = w.transfers[ids[0]].dst;
            assert!(ids
                .iter()
                .all(|&i| w.transfers[i].dst == dst && w.transfers[i].src != dst));
        }
        assert!(w.group(GROUP_INCAST_BASE + 3).is_empty());
        for (i, t) in w.transfers.iter().enumerate() {
            assert_eq!(t.id, i);
        }
    }

    #[test]
    fn sizes_sweep() {
        assert_eq!(SIZES[0], 8);
        assert_eq!(SIZES[9], 1 << 30);
        assert!(SIZES.windows(2).all(|w| w[1] == 8 * w[0]));
    }
}
