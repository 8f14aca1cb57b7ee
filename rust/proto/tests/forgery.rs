//! A blind adversary against a pair of live connections (Documentation/transport.rst,
//! "Identity and threat model"): forged datagrams of every shape are injected towards
//! both ends while data flows over a lossy, reordering, duplicating network, and the run
//! must be indistinguishable from the same run without them — every real datagram
//! delivered at the same time with the same bytes and the same verdict, the same data
//! placed and completed, nothing falsely acknowledged, the same rate — and every forgery
//! dropped and counted by reason.
//!
//! Size: `MR_FORGERIES` forged datagrams (default 65,536; the full run of the issue is
//! `MR_FORGERIES=1048576 cargo test --release --test forgery`).

mod common;

use common::{config, Net, Rng};
use metaroce_proto::conn::Config;
use metaroce_proto::ident::Ident;
use metaroce_proto::path::FLOOR_WINDOW;
use metaroce_proto::sack::Sack;
use metaroce_proto::wire::{
    decode, AckHeader, DataHeader, DropReason, Packet, ProbeHeader, Reth, AF_MSG, AF_NAK, AF_RNR,
    DF_FIRST, DF_LAST, DF_RETH, VERSION,
};

const QPN_A: u32 = 0x3a_17c2;
const QPN_B: u32 = 0x91_0e5d;
const GID_A: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1];
const GID_B: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 1, 2];

fn idents() -> (Ident, Ident) {
    (
        Ident::derive(&GID_A, &GID_B, QPN_A, QPN_B, 0x5e_71a9),
        Ident::derive(&GID_B, &GID_A, QPN_B, QPN_A, 0x0c_33d4),
    )
}

/// A lossy, reordering, duplicating pair carrying 96 messages a -> b.
fn pair(seed: u64) -> Net {
    let mut n = Net::new(seed, 8, 0.01);
    n.reorder = 0.05;
    n.dup = 0.01;
    let (ab, ba) = idents();
    n.connect(
        Config {
            tx_ident: ab,
            rx_ident: ba,
            ..config(QPN_A, QPN_B, 8)
        },
        Config {
            tx_ident: ba,
            rx_ident: ab,
            ..config(QPN_B, QPN_A, 8)
        },
    );
    for s in 0..4 {
        n.app_a.msgs[s] = (0..24)
            .map(|i| 1 + (i * 7919 + s as u32 * 131) % 20_000)
            .collect();
    }
    n.keep_trace = true;
    n
}

/// What the adversary may know: the QPNs (they are on the wire), and in the
/// "token known" kinds the tokens too, but never where the windows are.
struct Forger {
    rng: Rng,
    per_step: u32,
    /// Tokens the target checks: (data/probe, ack) for node a, then for node b.
    tokens: [(u32, u32); 2],
}

impl Forger {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.next() % n.max(1)
    }

    fn forge(&mut self, to_b: bool, template: &[u8]) -> Vec<Vec<u8>> {
        (0..self.per_step)
            .map(|_| self.one(to_b, template))
            .collect()
    }

    fn one(&mut self, to_b: bool, template: &[u8]) -> Vec<u8> {
        let conn = if to_b { QPN_B } else { QPN_A };
        let (data_tok, ack_tok) = self.tokens[usize::from(to_b)];
        let mut buf = vec![0u8; 2048];
        let r = self.rng.next();
        let blind = self.rng.next() as u32;
        let path = self.below(9) as u8;
        let n = match r % 8 {
            // Random bytes, sometimes with a plausible version and type.
            0 => {
                let len = self.below(160) as usize;
                let mut b: Vec<u8> = (0..len).map(|_| self.rng.next() as u8).collect();
                if len > 8 && r & 0x100 != 0 {
                    b[0] = VERSION;
                    b[1] = 1 + (r >> 9) as u8 % 4;
                    b[4..8].copy_from_slice(&conn.to_be_bytes());
                }
                return b;
            }
            // Blind DATA: a guessed token; far floors and SSNs, or small ones.
            1 => {
                let psn = self.rng.next() as u32;
                let h = DataHeader {
                    path,
                    inc: self.rng.next() as u16 | 1,
                    dst_conn: conn,
                    psn,
                    stamp: 1,
                    token: blind,
                    stream: self.below(4) as u16,
                    op: 2,
                    flags: DF_FIRST | DF_LAST | DF_RETH,
                    payload_len: 8,
                    floor: if r & 0x100 != 0 {
                        psn
                    } else {
                        psn.wrapping_sub(self.below(300) as u32)
                    },
                    ssn: [0xffff_ffff, 0, self.rng.next() as u32][self.below(3) as usize],
                    msg_len: 8,
                    reth: Reth {
                        va: 0,
                        rkey: 1,
                        len: 8,
                    },
                    ..DataHeader::default()
                };
                h.encode(&mut buf).unwrap() + 8
            }
            // Blind ACK: every cum/SACK shape, a rate hint of 1 kB/s, NAK/RNR.
            2 => {
                let sack = match self.below(3) {
                    0 => Sack::EMPTY,
                    1 => Sack::from_words([u64::MAX; 4]),
                    _ => Sack::from_words([self.rng.next(), self.rng.next(), 0, 0]),
                };
                let flags = [0, AF_RNR, AF_NAK, AF_NAK | AF_MSG][self.below(4) as usize];
                let a = AckHeader {
                    path,
                    inc: self.rng.next() as u16 | 1,
                    dst_conn: conn,
                    echo: self.rng.next() as u32,
                    token: blind,
                    cum: self.rng.next() as u32,
                    rate_hint: 1,
                    ce: 50,
                    acked: 60,
                    flags,
                    rnr_timer: 31,
                    rnr_psn: self.rng.next() as u32,
                    nak_stream: if flags & AF_MSG != 0 {
                        self.below(2) as u16
                    } else {
                        0
                    },
                    nak_msn: if flags & AF_MSG != 0 {
                        self.below(4) as u32
                    } else {
                        0
                    },
                    sack,
                };
                a.encode(&mut buf).unwrap()
            }
            // Blind PROBE.
            3 => {
                let psn = self.rng.next() as u32;
                let p = ProbeHeader {
                    path,
                    inc: self.rng.next() as u16 | 1,
                    dst_conn: conn,
                    psn,
                    stamp: 7,
                    token: blind,
                    floor: psn,
                };
                p.encode(&mut buf).unwrap()
            }
            // The real datagram with a guessed token and the rest kept or mutated.
            4 | 5 => return self.mutate(template, Some(blind)),
            // The token known, the windows not: every sequence field far outside.
            _ => {
                let _ = (data_tok, ack_tok);
                return self.mutate(template, None);
            }
        };
        buf.truncate(n);
        buf
    }

    /// Re-encodes `template` with token `token` (or its own) and, for `None`, one
    /// sequence field moved out of every window the receiver could have.
    fn mutate(&mut self, template: &[u8], token: Option<u32>) -> Vec<u8> {
        let mut buf = vec![0u8; 2048];
        let far = (1 << 17) + self.below(1 << 29) as u32;
        let pick = self.below(4);
        let n = match decode(template) {
            Ok(Packet::Data(mut h, payload)) => {
                match token {
                    Some(t) => {
                        h.token = t;
                        if pick == 1 {
                            h.floor = h.floor.wrapping_add(far);
                            h.psn = h.floor;
                        } else if pick == 2 {
                            h.ssn = 0xffff_ffff;
                        }
                    }
                    None => match pick {
                        0 => {
                            h.psn = h.psn.wrapping_add(far);
                        }
                        1 => {
                            h.floor = h.floor.wrapping_add(FLOOR_WINDOW + far);
                            h.psn = h.floor;
                        }
                        2 => h.ssn = h.ssn.wrapping_add(256 + far),
                        _ => h.ssn = h.ssn.wrapping_sub(257 + far),
                    },
                }
                let hl = h.encode(&mut buf).unwrap();
                buf[hl..hl + payload.len()].copy_from_slice(payload);
                hl + payload.len()
            }
            Ok(Packet::Ack(mut a)) => {
                match token {
                    Some(t) => {
                        a.token = t;
                        if pick == 1 {
                            a.sack = Sack::from_words([u64::MAX; 4]);
                            a.rate_hint = 1;
                        } else if pick == 2 {
                            a.flags = AF_NAK;
                            a.rnr_psn = a.cum;
                        }
                    }
                    None => match pick {
                        0 => a.cum = a.cum.wrapping_add(513 + far),
                        1 => a.cum = a.cum.wrapping_sub(513 + far),
                        2 => {
                            a.flags = AF_NAK;
                            a.rnr_psn = a.cum.wrapping_add(513 + far);
                        }
                        _ => {
                            a.flags = AF_RNR;
                            a.rnr_timer = 31;
                            a.rnr_psn = a.cum.wrapping_sub(513 + far);
                        }
                    },
                }
                a.encode(&mut buf).unwrap()
            }
            Ok(Packet::Probe(mut p)) => {
                match token {
                    Some(t) => p.token = t,
                    None => {
                        p.floor = p.floor.wrapping_add(FLOOR_WINDOW + far);
                        p.psn = p.floor;
                    }
                }
                p.encode(&mut buf).unwrap()
            }
            Err(_) => return template.to_vec(),
        };
        buf.truncate(n);
        buf
    }
}

/// Everything observable about a finished run.
fn outcome(n: &Net) -> String {
    format!(
        "a: {:?} {:?} hint {} rate {} {:?}\nb: {:?} {:?} {:?} {:?}\nacked {:?}\ncompleted {:?}\nerrors {:?} {:?}",
        n.a.state(),
        n.a.stats(),
        n.a.peer_hint(),
        n.a.pacing_rate(),
        (0..8).map(|p| n.a.path(p).copied()).collect::<Vec<_>>(),
        n.b.state(),
        n.b.stats(),
        n.b.peer_hint(),
        n.app_b.placed,
        n.app_a.acked,
        n.app_b.completed,
        n.app_a.errors,
        n.app_b.errors,
    )
}

#[test]
fn blind_forgeries_change_nothing() {
    let total: u64 = std::env::var("MR_FORGERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 16);
    let seed = 0x5eed_f0e5;
    let mut clean = pair(seed);
    assert!(clean.run(2_000_000_000), "the clean run finishes");
    assert!(clean.app_a.errors.is_empty() && clean.app_b.errors.is_empty());
    assert!(!clean.lost_psns.is_empty(), "the network lost packets");
    let steps = clean.trace.len() as u64;
    let per_step = total.div_ceil(steps) as u32;

    let (ab, ba) = idents();
    let mut forger = Forger {
        rng: Rng(0xbad_f00d),
        per_step,
        tokens: [(ba.token(), ab.token()), (ab.token(), ba.token())],
    };
    let mut attacked = pair(seed);
    attacked.forger = Some(Box::new(move |to_b, t| forger.forge(to_b, t)));
    assert!(attacked.run(2_000_000_000), "the attacked run finishes");

    eprintln!(
        "{} forged datagrams over {} real ones; drops by reason: {:?}",
        attacked.forged,
        steps,
        DropReason::ALL
            .iter()
            .filter(|r| attacked.forged_drops.get(**r) > 0)
            .map(|r| (r.name(), attacked.forged_drops.get(*r)))
            .collect::<Vec<_>>()
    );
    assert!(attacked.forged >= total, "{} forged", attacked.forged);
    assert_eq!(
        attacked.forged_accepted.len(),
        0,
        "accepted forgeries: {:?}",
        attacked.forged_accepted.first()
    );
    assert_eq!(
        attacked.forged_drops.total(),
        attacked.forged,
        "every forgery counted"
    );
    // The blind kinds are stopped by the token, the token-known ones by the windows.
    assert!(attacked.forged_drops.get(DropReason::BadToken) > attacked.forged / 4);
    assert!(attacked.forged_drops.get(DropReason::PsnOutOfWindow) > 0);
    assert!(attacked.forged_drops.get(DropReason::SsnOutOfWindow) > 0);
    assert!(attacked.forged_drops.get(DropReason::AckOutOfRange) > 0);
    assert_eq!(attacked.trace.len(), clean.trace.len());
    for (i, (x, y)) in attacked.trace.iter().zip(&clean.trace).enumerate() {
        assert!(
            x == y,
            "real datagram {i} differs: {:?} vs {:?}",
            (x.0, x.1, x.3),
            (y.0, y.1, y.3)
        );
    }
    assert_eq!(outcome(&attacked), outcome(&clean));
    for s in 0..4 {
        assert_eq!(clean.app_a.acked[s].len(), clean.app_a.msgs[s].len());
    }
}

/// Before the windows were checked first, 8 forged DATA packets with SSN 0xffffffff (one
/// per path) ended a connection; now, even with the token and the paths' first PSNs
/// known, they change nothing (the stream's first SSN is not 0).
#[test]
fn far_ssn_with_known_token_is_dropped() {
    let mut n = pair(7);
    let (ab, _) = idents();
    let mut buf = [0u8; 128];
    for path in 0..8u8 {
        let h = DataHeader {
            path,
            inc: n.a.config().incarnation,
            dst_conn: QPN_B,
            psn: ab.isn(path),
            stamp: 1,
            token: ab.token(),
            op: 0,
            flags: DF_FIRST | DF_LAST,
            payload_len: 0,
            floor: ab.isn(path),
            ssn: 0xffff_ffff,
            ..DataHeader::default()
        };
        let len = h.encode(&mut buf).unwrap();
        let now = metaroce_proto::time::Instant(1);
        assert_eq!(
            n.b.handle_packet(now, &buf[..len], false, &mut n.app_b),
            Err(DropReason::SsnOutOfWindow)
        );
    }
    assert!(n.run(2_000_000_000));
    assert!(n.app_a.errors.is_empty() && n.app_b.errors.is_empty());
}
