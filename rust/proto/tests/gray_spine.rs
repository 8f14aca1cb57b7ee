//! A gray failure in an ECMP fabric: one of 4 spines drops everything in both
//! directions while its links stay up. Each datagram's spine is a hash of its
//! direction and UDP source port, so a sender's path and the receiver's ACKs for
//! it can each land on the dead spine. A one-way bulk transfer (the receiver
//! sends nothing but ACKs) must still complete, with every path that can be
//! moved off the dead spine moved.

mod common;
use common::*;
use metaroce_proto::conn::{Config, Connection};

fn cfg(local: u32, peer: u32) -> Config {
    kernel_like_config(local, peer)
}

/// A pair across 4 spines of which `dead` loses `loss` of what crosses it, with
/// TCG-like delays (~0.7-1.3 ms one way) and `msgs` 64 KiB messages queued a -> b.
fn net(seed: u64, dead: u16, loss: f64, msgs: usize) -> Net {
    let mut n = Net::new(seed, 8, 0.0);
    // Each end's own base port, as the kernel draws them.
    let (mut ca, mut cb) = (cfg(1, 2), cfg(2, 1));
    ca.base_src_port = 49152 + (seed as u16 % 128) * 64;
    cb.base_src_port = 57344 + (seed as u16 % 128) * 64;
    n.a = Connection::new(ca);
    n.b = Connection::new(cb);
    for d in n.path_delay.iter_mut() {
        *d = 500_000 + *d * 100;
    }
    n.dead_spine = Some((4, dead));
    n.spine_loss = loss;
    n.app_a.msgs[0] = vec![64 * 1024; msgs];
    n
}

fn one_way(seed: u64, dead: u16) -> Result<(), String> {
    let mut n = net(seed, dead, 1.0, 30);
    let ok = n.run(n.now + 60_000_000_000);
    if !ok || !n.app_a.errors.is_empty() || n.app_a.acked[0].len() != 30 {
        return Err(format!(
            "seed {seed} dead spine {dead}: acked {} of 30, errors {:?}, a {:?}",
            n.app_a.acked[0].len(),
            n.app_a.errors,
            n.a.stats()
        ));
    }
    if !n.app_b.violations.is_empty() {
        return Err(format!("seed {seed}: {:?}", n.app_b.violations));
    }
    Ok(())
}

#[test]
fn one_way_transfer_survives_a_gray_spine() {
    let fails: Vec<String> = (1..=12u64)
        .flat_map(|s| (0..4u16).map(move |d| (s, d)))
        .filter_map(|(s, d)| one_way(s, d).err())
        .collect();
    assert!(
        fails.is_empty(),
        "{} of 48 failed: {:#?}",
        fails.len(),
        fails
    );
}

/// 300 x 64 KiB one way, with spine `seed % 4` dropping `loss` of what crosses it
/// (both directions): the simulated time to the last acknowledgement.
fn transfer_ns(seed: u64, loss: f64) -> Result<u64, String> {
    let mut n = net(seed, (seed % 4) as u16, loss, 300);
    if !n.run(n.now + 600_000_000_000) || !n.app_a.errors.is_empty() {
        return Err(format!(
            "seed {seed} loss {loss}: {:?} {:?}",
            n.app_a.errors,
            n.a.stats()
        ));
    }
    Ok(n.now)
}

/// The fabric test's gray failure at 5 % (tests/guest/fabric-events.sh): one of 4
/// spines losing 5 % costs the transfer at most 10 % of its lossless speed (the
/// issue's target 0.90), measured in simulated time, free of the guests' noise.
#[test]
fn five_percent_on_one_spine_costs_at_most_ten_percent() {
    for seed in 1..=6u64 {
        let t0 = transfer_ns(seed, 0.0).unwrap();
        let t5 = transfer_ns(seed, 0.05).unwrap();
        let ratio = t0 as f64 / t5 as f64;
        println!(
            "seed {seed}: lossless {t0} ns, 5 % on spine {}: {t5} ns, {ratio:.2}",
            seed % 4
        );
        assert!(ratio >= 0.90, "seed {seed}: {ratio:.2} of lossless");
    }
}
