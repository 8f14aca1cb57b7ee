//! The ACKREQ rule (`Connection::build_data`, Documentation/transport.rst, "Flag
//! rules") must not leave a window-limited sender waiting for the receiver's
//! delayed-ACK timer, whatever `ack_every` both ends run (the kernel takes 1-64): the
//! cases a stop-48 trial found stalled when the rule assumed the peer's `ack_every` was
//! 2. `TRIAL_LONG_RTO=1` raises the RTO floor above the 20 ms timer, so that a wait
//! shows as time rather than as tail probes.

mod common;
use common::*;
use metaroce_proto::conn::Config;

const DELAY: u32 = 20_000_000;

struct R {
    took: u64,
    req: usize,
    data: usize,
    acks: usize,
    probes: usize,
    retx: u32,
}

/// `paths` paths; `f` adjusts (a, b); `warm` messages of `len` first, then `count`
/// messages of `len` timed.
#[allow(clippy::too_many_arguments)]
fn run(
    name: &str,
    paths: u8,
    loss: f64,
    f: impl Fn(&mut Config, &mut Config),
    hint: u32,
    warm: usize,
    count_msgs: usize,
    len: u32,
) -> R {
    let mut n = Net::new(11, paths, loss);
    let (mut a, mut b) = (config(1, 2, paths), config(2, 1, paths));
    (a.ack_delay_ns, b.ack_delay_ns) = (DELAY, DELAY);
    if std::env::var("TRIAL_LONG_RTO").is_ok() {
        // RTO floor above the 20 ms timer: the PTO (SRTT + the ACK delay) is the
        // path's deadline, as in the kernel (4 ms floor against a 100 us delay).
        for c in [&mut a, &mut b] {
            (c.min_rto_ns, c.init_rto_ns, c.max_rto_ns) = (100_000_000, 200_000_000, 1_000_000_000);
        }
    }
    f(&mut a, &mut b);
    n.connect(a, b);
    if hint != 0 {
        n.b.set_rate_hint(hint);
    }
    n.keep_trace = true;
    if warm > 0 {
        for _ in 0..warm {
            n.app_a.msgs[0].push(len);
        }
        assert!(n.run(n.now + 20_000_000_000), "{name}: warm-up stuck");
    }
    let t0 = n.trace.len();
    let (probes0, retx0) = (tail_probe_count(&n), n.a.stats().retx);
    let start = n.now;
    for _ in 0..count_msgs {
        n.app_a.msgs[0].push(len);
    }
    assert!(n.run(start + 60_000_000_000), "{name}: stuck");
    let (req, data, acks) = ackreqs(&n, t0);
    let r = R {
        took: n.now - start,
        req,
        data,
        acks,
        probes: tail_probe_count(&n) - probes0,
        retx: n.a.stats().retx - retx0,
    };
    eprintln!(
        "TRIAL {name:<48} took {:>9.3} ms ({:>5.1} timer waits)  ACKREQ {:>5}/{:<5} ACKs {:>5} tail_probes {:>3} retx {:>3}",
        r.took as f64 / 1e6,
        r.took as f64 / f64::from(DELAY),
        r.req,
        r.data,
        r.acks,
        r.probes,
        r.retx
    );
    r
}

fn pin(a: &mut Config, pkts: u32) {
    let w = pkts * 1088;
    (a.cc.init_pwnd, a.cc.min_pwnd, a.cc.max_pwnd) = (w, w.min(1088), w);
}

/// The kernel accepts `ack_every` up to 64 (rust/ffi/params.rs); with 4 (the
/// default until stop 46) and a window-limited connection of three packets a path, a
/// rule assuming the peer acknowledges every 2nd packet never asked, and each window
/// waited for the receiver's timer. One message of `len` over `paths` paths.
fn ack_every_4_three_packets_a_path(name: &str, paths: u8, len: u32) {
    let r = run(
        name,
        paths,
        0.0,
        |a, b| {
            pin(a, 3);
            (a.ack_every, b.ack_every, b.ack_bundle) = (4, 4, 16);
        },
        0,
        1,
        1,
        len,
    );
    assert!(r.took < u64::from(DELAY), "{name}: took {} ns", r.took);
    // A wait for the timer shows as tail probes of the held packets (and resends).
    assert_eq!((r.probes, r.retx), (0, 0), "{name}: tail probes, resends");
}

#[test]
fn ack_every_4_one_path_three_packets_does_not_wait_for_the_timer() {
    ack_every_4_three_packets_a_path("every 4, 1 path, pwnd 3", 1, 64 * 1024);
}

#[test]
fn ack_every_4_eight_paths_three_packets_does_not_wait_for_the_timer() {
    ack_every_4_three_packets_a_path("every 4, 8 paths, pwnd 3", 8, 256 * 1024);
}

/// Kernel-like timers and ACK settings (common::kernel_like_config: 100 us delay,
/// 4 ms RTO floor), the receiver's `ack_every` varied, windows pinned.
#[test]
fn kernel_like() {
    for every in [2u8, 4, 8] {
        for (paths, pk) in [(1u8, 2u32), (1, 3), (1, 5), (8, 2), (8, 3), (8, 5)] {
            let mut n = Net::new(11, paths, 0.0);
            let (mut a, mut b) = (kernel_like_config(1, 2), kernel_like_config(2, 1));
            (a.paths, b.paths) = (paths, paths);
            (a.ack_every, b.ack_every) = (every, every);
            pin(&mut a, pk);
            n.connect(a, b);
            send_all(&mut n, 1, 64 * 1024);
            let (p0, r0) = (tail_probe_count(&n), n.a.stats().retx);
            let took = send_all(&mut n, 8, 64 * 1024);
            let (probes, retx) = (tail_probe_count(&n) - p0, n.a.stats().retx - r0);
            eprintln!(
                "every {every} paths {paths} pwnd {pk}: 8 x 64 KiB took {:>8.3} ms, tail probes {probes}, retx {retx}",
                took as f64 / 1e6,
            );
            // Lossless: a sender that waited for the receiver's timer would probe its
            // tails (the kernel's probe timeout allows for 100 us, not for a wait).
            assert_eq!(
                (probes, retx),
                (0, 0),
                "every {every} paths {paths} pwnd {pk}"
            );
            assert!(
                took < 8_000_000,
                "every {every} paths {paths} pwnd {pk}: {took} ns"
            );
        }
    }
}
