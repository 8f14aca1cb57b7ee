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

fn one_way(seed: u64, dead: u16) -> Result<(), String> {
    let mut n = Net::new(seed, 8, 0.0);
    // Each end's ports from its own QPN, as the kernel derives them.
    let (mut ca, mut cb) = (cfg(1, 2), cfg(2, 1));
    ca.base_src_port = 49152 + (seed as u16 % 128) * 64;
    cb.base_src_port = 57344 + (seed as u16 % 128) * 64;
    n.a = Connection::new(ca);
    n.b = Connection::new(cb);
    for d in n.path_delay.iter_mut() {
        *d = 500_000 + *d * 100; // TCG-like: ~0.7-1.3 ms one way
    }
    n.dead_spine = Some((4, dead));
    n.app_a.msgs[0] = vec![64 * 1024; 30];
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
