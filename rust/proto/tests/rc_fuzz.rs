//! Stable-Rust stand-in for the `rc` cargo-fuzz target: random and mutated datagrams
//! (captured from a live exchange) into two model QPs' engines. Nothing may panic
//! (overflow checks are on in test builds); sends complete in order, nothing twice.
use metaroce_proto::testkit::rc::{fuzz_engine, Rng};

#[test]
fn mutated_datagrams_never_panic_the_engine() {
    let iters: u64 = std::env::var("FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut rng = Rng(0x5eed);
    for _ in 0..iters {
        let mut d = vec![rng.next_u64() as u8];
        for _ in 0..rng.below(40) {
            let kind = rng.next_u64() as u8;
            // Mostly mutations of captured datagrams (few bits flipped), some raw bytes.
            let mutate = rng.below(4) != 0;
            let kind = if mutate { kind | 2 } else { kind & !2 };
            let n = rng.below(if mutate { 8 } else { 120 }) as usize;
            d.push(kind & 0x1f);
            d.extend_from_slice(&(n as u16 + if mutate { 40 } else { 0 }).to_le_bytes());
            for k in 0..n + if mutate { 40 } else { 0 } {
                let b = if mutate && (k >= n || rng.below(3) != 0) {
                    0
                } else {
                    rng.next_u64() as u8
                };
                d.push(b);
            }
        }
        let _ = fuzz_engine(&d);
    }
}

/// The harness reaches the engine: replaying the captured datagrams unmutated completes
/// work on both sides.
#[test]
fn unmutated_replay_completes_work() {
    let mut d = vec![0u8];
    for _ in 0..400 {
        d.extend_from_slice(&[2 | (1 << 2), 0, 0]);
    }
    let n = fuzz_engine(&d);
    assert!(n >= 20, "only {n} completions");
}
