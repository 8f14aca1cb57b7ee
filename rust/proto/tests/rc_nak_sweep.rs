//! Refusals among good requests, swept: random workloads of 2-12 WQEs (WRITE, READ,
//! SEND, FETCH_ADD, CMP_SWAP) with 1-5 refused ones at random places (bad R_Key,
//! misaligned atomic, SEND too long), on clean and lossy/duplicating/reordering links,
//! RQ and SRQ, receives posted late (RNR) and traffic both ways; and the corner cases
//! the sweeps found (Documentation/transport.rst, "Refusals and their order"). Every
//! WQE before the oldest refused one succeeds (atomics executed once, data placed),
//! that one reports the NAK's error, the rest flush; nothing is placed after a flush.
mod rc_common;
use metaroce_proto::rc::{access, QpMode, WcStatus, WrOpcode};
use metaroce_proto::wire::{decode_ack_packet, decode_ride, peek_type, PacketType, AF_NAK};
use rc_common::*;

/// A second region on A that B may READ.
const A_SRC: u32 = 0x30;
/// A region on A without LOCAL_WRITE: a READ landing in it fails locally.
const A_RO: u32 = 0x40;

/// Bidirectional: A's first request is refused by B, while B's own READ of A is
/// in flight. B NAKs, flushes its READ (WR_FLUSH_ERR) and lingers; A's READ
/// response still arrives and B places it into the flushed WQE's buffer.
#[test]
fn lingering_qp_places_read_response_after_flush() {
    let (mut p, a, b) = setup(16, false, clean(), 1);
    let src = p.a.host.reg_mr(A_SRC, 16384, access::REMOTE_READ);
    for x in p.a.host.mr_mut(A_SRC).unwrap().bytes.iter_mut() {
        *x = 0xab;
    }
    // B's landing area: a marker that must stay.
    for x in p.b.host.mr_mut(B_MR).unwrap().bytes[4096..4096 + 8000].iter_mut() {
        *x = 0xee;
    }
    // A: a WRITE with a bad rkey (refused by B).
    assert!(p.a.host.post_send(rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, A_MR)]),
        b,
        B_MR + 99
    )));
    // B: a READ of A's region into its own memory.
    assert!(p.b.host.post_send(rdma(
        wqe(WrOpcode::RdmaRead, 7, vec![sge(b, 4096, 8000, B_MR)]),
        src,
        A_SRC
    )));
    p.doorbell(0);
    p.doorbell(1);
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RemAccessErr)]
    );
    assert_eq!(statuses(&p.b.host.send_cq), vec![(7, WcStatus::WrFlushErr)]);
    assert_eq!((p.a.host.mode, p.b.host.mode), (QpMode::Err, QpMode::Err));
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    let placed = bm[4096..4096 + 8000].iter().filter(|&&x| x == 0xab).count();
    assert_eq!(placed, 0, "bytes placed into a flushed READ's buffer");
}

/// WQE 1 (good WRITE), WQE 2 (READ whose local SGE has no LOCAL_WRITE: it fails
/// LOC_PROT_ERR when its response arrives), WQE 3 (CMP_SWAP, bad rkey). Every ACK
/// to A except NAKs is lost. The NAK acknowledges WQE 1 (executed); it must not
/// be flushed.
#[test]
fn nak_acknowledges_wqe_before_a_locally_failed_one() {
    let (mut p, a, b) = setup(16, false, clean(), 1);
    let ro = p.a.host.reg_mr(A_RO, 4096, 0);
    assert!(p.a.host.post_send(rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, A_MR)]),
        b + 8192,
        B_MR
    )));
    assert!(p.a.host.post_send(rdma(
        wqe(WrOpcode::RdmaRead, 2, vec![sge(ro, 0, 100, A_RO)]),
        b + B_READ as u64,
        B_MR
    )));
    assert!(p.a.host.post_send(rdma(
        wqe(WrOpcode::AtomicCmpAndSwp, 3, vec![sge(a, 16, 8, A_MR)]),
        b,
        B_MR + 99
    )));
    p.doorbell(0);
    for _ in 0..2000 {
        for (to, bytes) in p.take_wire() {
            if to == 0 && peek_type(&bytes) == Some(PacketType::Ack) {
                // A NAK, or lost (with whatever DATA rides on it).
                let (mut acks, _) = decode_ride(&bytes).unwrap();
                if !acks.any(|h| h.flags & AF_NAK != 0) {
                    continue;
                }
            }
            p.inject(to, &bytes);
        }
        p.tick(100_000);
        if p.a.host.mode == QpMode::Err {
            break;
        }
    }
    assert_eq!(
        &p.b.host.mr(B_MR).unwrap().bytes[8192..8292],
        &p.a.host.mr(A_MR).unwrap().bytes[0..100]
    );
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::LocProtErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
}

// ---------------------------------------------------------------------------
// Randomized sweep.

use metaroce_proto::testkit::rc::{Rng, SqEntry};

#[derive(Clone, Copy, Debug, PartialEq)]
enum K {
    Write(usize),
    Read(usize),
    Send(usize),
    Fadd(u64),
    Cas,
    BadWrite,
    BadRead,
    BadAtomic,
    Misaligned,
    TooLong,
}

impl K {
    fn bad(self) -> Option<WcStatus> {
        match self {
            K::BadWrite | K::BadRead | K::BadAtomic => Some(WcStatus::RemAccessErr),
            K::Misaligned | K::TooLong => Some(WcStatus::RemInvReqErr),
            _ => None,
        }
    }
}

const RECV_LEN: usize = 2000;
const RECV_BASE: usize = B_READ + 65536;
const CAS_OFF: usize = 64;

fn u64_at(m: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(m[off..off + 8].try_into().unwrap())
}

struct Cfg {
    srq: bool,
    bidir: bool,
    link: (u32, u32, u32),
    nbad_max: u64,
    late_recv: bool,
}

fn gen(rng: &mut Rng, nbad_max: u64) -> Vec<K> {
    let n = 2 + rng.below(11) as usize;
    let mut w: Vec<K> = (0..n)
        .map(|_| match rng.below(6) {
            0 => K::Write(1 + rng.below(5000) as usize),
            1 => K::Read(1 + rng.below(5000) as usize),
            2 => K::Send(rng.below(RECV_LEN as u64 + 1) as usize),
            3 => K::Fadd(1 + rng.below(1000)),
            4 => K::Cas,
            _ => K::Write(1 + rng.below(1500) as usize),
        })
        .collect();
    let nbad = 1 + rng.below(nbad_max);
    for _ in 0..nbad {
        let i = rng.below(n as u64) as usize;
        w[i] = match rng.below(6) {
            0 => K::BadWrite,
            1 => K::BadRead,
            2 => K::BadAtomic,
            3 => K::Misaligned,
            4 => K::TooLong,
            _ => K::BadWrite,
        };
    }
    w
}

fn sweep_one(cfg: &Cfg, seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let w = gen(&mut rng, cfg.nbad_max);
    let (l, d, r) = cfg.link;
    let (mut p, a, b) = setup(16, cfg.srq, lossy(l, d, r), seed);
    let nsend = w
        .iter()
        .filter(|k| matches!(k, K::Send(_) | K::TooLong))
        .count();
    let nrecv = nsend.max(1) + 1;
    let early = if cfg.late_recv {
        rng.below(nrecv as u64) as usize
    } else {
        nrecv
    };
    for i in 0..early {
        let off = RECV_BASE + RECV_LEN * i;
        assert!(p
            .b
            .host
            .post_recv(100 + i as u64, &[sge(b, off, RECV_LEN, B_MR)]));
    }
    let before = u64_at(&p.b.host.mr(B_MR).unwrap().bytes, 0);
    let cas_before = u64_at(&p.b.host.mr(B_MR).unwrap().bytes, CAS_OFF);
    for (i, k) in w.iter().enumerate() {
        let id = i as u64 + 1;
        let ao = i * 8192;
        let e: SqEntry = match *k {
            K::Write(n) => rdma(
                wqe(WrOpcode::RdmaWrite, id, vec![sge(a, ao, n, A_MR)]),
                b + 8192 * (i as u64 + 1),
                B_MR,
            ),
            K::Read(n) => rdma(
                wqe(WrOpcode::RdmaRead, id, vec![sge(a, ao, n, A_MR)]),
                b + (B_READ + i * 5000) as u64,
                B_MR,
            ),
            K::Send(n) => wqe(WrOpcode::Send, id, vec![sge(a, ao, n, A_MR)]),
            K::TooLong => wqe(WrOpcode::Send, id, vec![sge(a, ao, RECV_LEN + 1500, A_MR)]),
            K::Fadd(v) => {
                let mut e = rdma(
                    wqe(WrOpcode::AtomicFetchAndAdd, id, vec![sge(a, ao, 8, A_MR)]),
                    b,
                    B_MR,
                );
                e.wqe.compare_add = v;
                e
            }
            K::Cas => {
                let mut e = rdma(
                    wqe(WrOpcode::AtomicCmpAndSwp, id, vec![sge(a, ao, 8, A_MR)]),
                    b + CAS_OFF as u64,
                    B_MR,
                );
                // swap: increments by one when compare matches the current value; we
                // do not know the value, so compare with the expected chain value later.
                e.wqe.compare_add = u64::MAX; // never matches: just a read
                e.wqe.swap = 7;
                e
            }
            K::BadWrite => rdma(
                wqe(WrOpcode::RdmaWrite, id, vec![sge(a, ao, 3000, A_MR)]),
                b + 8192 * (i as u64 + 1),
                B_MR + 99,
            ),
            K::BadRead => rdma(
                wqe(WrOpcode::RdmaRead, id, vec![sge(a, ao, 3000, A_MR)]),
                b + B_READ as u64,
                B_MR + 99,
            ),
            K::BadAtomic => {
                let mut e = rdma(
                    wqe(WrOpcode::AtomicFetchAndAdd, id, vec![sge(a, ao, 8, A_MR)]),
                    b,
                    B_MR + 99,
                );
                e.wqe.compare_add = 1 << 40;
                e
            }
            K::Misaligned => {
                let mut e = rdma(
                    wqe(WrOpcode::AtomicFetchAndAdd, id, vec![sge(a, ao, 8, A_MR)]),
                    b + 4,
                    B_MR,
                );
                e.wqe.compare_add = 1 << 40;
                e
            }
        };
        assert!(p.a.host.post_send(e));
    }
    // Bidirectional: B sends its own requests to A (all good).
    let mut bw = Vec::new();
    if cfg.bidir {
        let all = access::LOCAL_WRITE
            | access::REMOTE_WRITE
            | access::REMOTE_READ
            | access::REMOTE_ATOMIC;
        let asrc = p.a.host.reg_mr(A_SRC, 65536, all);
        for (i, x) in p.a.host.mr_mut(A_SRC).unwrap().bytes.iter_mut().enumerate() {
            *x = pattern(i + 3);
        }
        for i in 0..4 {
            assert!(p.a.host.post_recv(
                200 + i,
                &[sge(asrc, 32768 + 4096 * i as usize, 4096, A_SRC)]
            ));
        }
        let nb = 1 + rng.below(6);
        for j in 0..nb {
            let id = 1000 + j;
            let bo = 0x38000 + 4096 * j as usize;
            let e = match rng.below(3) {
                0 => rdma(
                    wqe(WrOpcode::RdmaRead, id, vec![sge(b, bo, 3000, B_MR)]),
                    asrc + 4096 * j,
                    A_SRC,
                ),
                1 => rdma(
                    wqe(WrOpcode::RdmaWrite, id, vec![sge(b, bo, 3000, B_MR)]),
                    asrc + 4096 * j,
                    A_SRC,
                ),
                _ => wqe(WrOpcode::Send, id, vec![sge(b, bo, 2500, B_MR)]),
            };
            bw.push((id, e.wqe.opcode, bo));
            assert!(p.b.host.post_send(e));
        }
    }
    p.doorbell(0);
    if cfg.bidir {
        p.doorbell(1);
    }
    if early < nrecv {
        p.run(rng.below(3_000_000));
        // (A receive posted after a LOC_LEN_ERR flush repeats that error: pre-existing,
        // see nak_relen.rs; avoid it here.)
        if p.b.host.mode == QpMode::Err {
            p.run(30_000_000_000);
            let _ = nrecv;
            return Ok(()).and_then(|()| {
                if p.a.host.send_cq.len() == w.len() {
                    Ok(())
                } else {
                    Err(format!("seed {seed}: A incomplete"))
                }
            });
        }
        for i in early..nrecv {
            let off = RECV_BASE + RECV_LEN * i;
            assert!(p
                .b
                .host
                .post_recv(100 + i as u64, &[sge(b, off, RECV_LEN, B_MR)]));
        }
        if p.b.host.mode == QpMode::Err {
            p.b.doorbell();
        }
    }
    let quiet = p.run(30_000_000_000);
    let ctx = format!("seed {seed} w {w:?} quiet {quiet}");
    let f = w.iter().position(|k| k.bad().is_some()).unwrap();
    let mut want: Vec<(u64, WcStatus)> = Vec::new();
    for (i, k) in w.iter().enumerate() {
        let s = if i < f {
            WcStatus::Success
        } else if i == f {
            k.bad().unwrap()
        } else {
            WcStatus::WrFlushErr
        };
        want.push((i as u64 + 1, s));
    }
    let got = statuses(&p.a.host.send_cq);
    if got != want {
        return Err(format!("{ctx}: A send cq {got:?} want {want:?}"));
    }
    let am = p.a.host.mr(A_MR).unwrap().bytes.clone();
    let bm = p.b.host.mr(B_MR).unwrap().bytes.clone();
    let mut acc = before;
    for (i, k) in w.iter().enumerate().take(f) {
        let ao = i * 8192;
        match *k {
            K::Write(n) => {
                let bo = 8192 * (i + 1);
                if bm[bo..bo + n] != am[ao..ao + n] {
                    return Err(format!("{ctx}: WRITE {} data", i + 1));
                }
            }
            K::Read(n) => {
                let bo = B_READ + i * 5000;
                if bm[bo..bo + n] != am[ao..ao + n] {
                    return Err(format!("{ctx}: READ {} data", i + 1));
                }
            }
            K::Fadd(v) => {
                if u64_at(&am, ao) != acc {
                    return Err(format!(
                        "{ctx}: FADD {} original {} want {}",
                        i + 1,
                        u64_at(&am, ao),
                        acc
                    ));
                }
                acc = acc.wrapping_add(v);
            }
            K::Cas if u64_at(&am, ao) != cas_before => {
                return Err(format!("{ctx}: CAS {} original", i + 1));
            }
            _ => {}
        }
    }
    if u64_at(&bm, 0) != acc {
        return Err(format!("{ctx}: counter {} want {}", u64_at(&bm, 0), acc));
    }
    if u64_at(&bm, 4) != u64_at(&bm, 4) {
        unreachable!();
    }
    // Receives: the SENDs before f succeed in order; a TooLong at f: LocLenErr.
    let rx: Vec<_> =
        p.b.host
            .recv_cq
            .iter()
            .map(|c| (c.0.wr_id, c.0.status, c.0.byte_len))
            .collect();
    let mut r = 0usize;
    let mut wantrx = Vec::new();
    for (i, k) in w.iter().enumerate().take(f + 1) {
        match *k {
            K::Send(n) if i < f => {
                wantrx.push((100 + r as u64, WcStatus::Success, n as u32));
                let bo = RECV_BASE + RECV_LEN * r;
                let ao = i * 8192;
                if !cfg.srq && bm[bo..bo + n] != am[ao..ao + n] {
                    return Err(format!("{ctx}: SEND {} data", i + 1));
                }
                r += 1;
            }
            K::TooLong if i == f => {
                wantrx.push((100 + r as u64, WcStatus::LocLenErr, 0));
                r += 1;
            }
            _ => {}
        }
    }
    // SRQ: WQEs are taken in arrival order, and ones taken by later messages flush.
    let (rx, wantrx): (Vec<_>, Vec<_>) = if cfg.srq {
        (
            rx.iter()
                .filter(|x| x.1 != WcStatus::WrFlushErr)
                .map(|x| (0, x.1, x.2))
                .collect(),
            wantrx.iter().map(|x| (0, x.1, x.2)).collect(),
        )
    } else {
        (rx, wantrx)
    };
    let rx_ok: Vec<_> = rx
        .iter()
        .take(wantrx.len())
        .map(|x| (x.0, x.1, if x.1 == WcStatus::Success { x.2 } else { 0 }))
        .collect();
    if rx_ok != wantrx {
        return Err(format!("{ctx}: B recv cq {rx:?} want prefix {wantrx:?}"));
    }
    if rx
        .iter()
        .skip(wantrx.len())
        .any(|x| x.1 != WcStatus::WrFlushErr)
    {
        return Err(format!("{ctx}: B recv cq {rx:?} tail not flushed"));
    }
    if (p.a.host.mode, p.b.host.mode) != (QpMode::Err, QpMode::Err) {
        return Err(format!(
            "{ctx}: modes {:?} {:?}",
            p.a.host.mode, p.b.host.mode
        ));
    }
    if cfg.bidir {
        // B's own WQEs: a prefix of successes then flushes; all completed.
        let bs: Vec<_> =
            p.b.host
                .send_cq
                .iter()
                .map(|c| (c.wr_id, c.status))
                .collect();
        if bs.len() != bw.len() {
            return Err(format!("{ctx}: B send cq {bs:?} for {} WQEs", bw.len()));
        }
        let mut seen_fail = false;
        for (c, (id, op, bo)) in bs.iter().zip(&bw) {
            if c.0 != *id {
                return Err(format!("{ctx}: B order {bs:?}"));
            }
            match c.1 {
                WcStatus::Success if !seen_fail => {
                    let j = (id - 1000) as usize;
                    let asrc = p.a.host.mr(A_SRC).unwrap().bytes.clone();
                    if *op == WrOpcode::RdmaRead as u32
                        && bm[*bo..bo + 3000] != asrc[4096 * j..4096 * j + 3000]
                    {
                        return Err(format!("{ctx}: B READ {id} success without data"));
                    }
                    if *op == WrOpcode::RdmaWrite as u32
                        && bm[*bo..bo + 3000] != asrc[4096 * j..4096 * j + 3000]
                    {
                        return Err(format!("{ctx}: B WRITE {id} success without data"));
                    }
                }
                WcStatus::WrFlushErr => seen_fail = true,
                s => return Err(format!("{ctx}: B {id} {s:?} ({bs:?})")),
            }
        }
    }
    Ok(())
}

/// A sweep's configuration: link (loss, dup, reorder ppm), SRQ, traffic both ways,
/// at most `nbad_max` refused WQEs, receives posted late.
fn cfg(link: (u32, u32, u32), srq: bool, bidir: bool, nbad_max: u64, late_recv: bool) -> Cfg {
    Cfg {
        srq,
        bidir,
        link,
        nbad_max,
        late_recv,
    }
}

fn sweep(cfg: Cfg, seeds: std::ops::Range<u64>) {
    let mut fails = Vec::new();
    for s in seeds.clone() {
        if let Err(e) = sweep_one(&cfg, s) {
            fails.push(e);
        }
    }
    for f in fails.iter().take(8) {
        eprintln!("{f}");
    }
    assert!(
        fails.is_empty(),
        "{} of {} failed",
        fails.len(),
        seeds.end - seeds.start
    );
}

#[test]
fn sweep_clean() {
    sweep(cfg((0, 0, 0), false, false, 3, false), 0..80);
}
#[test]
fn sweep_lossy() {
    sweep(
        cfg((100_000, 100_000, 500_000), false, false, 3, false),
        0..120,
    );
}
#[test]
fn sweep_lossy_srq() {
    sweep(
        cfg((100_000, 100_000, 500_000), true, false, 3, false),
        0..120,
    );
}
#[test]
fn sweep_heavy() {
    sweep(
        cfg((250_000, 200_000, 800_000), false, false, 4, false),
        0..80,
    );
}
#[test]
fn sweep_bidir() {
    sweep(
        cfg((100_000, 100_000, 500_000), false, true, 3, false),
        0..80,
    );
}

/// A long READ, then a request B refuses. B holds the NAK until the READ's response
/// is acknowledged; meanwhile A's only unacknowledged packet is the held one, so only
/// the response data streaming in keeps A's local ACK timer from running out, and the
/// NAK must go as soon as it is due. Control: the same with a good CMP_SWAP.
fn long_read_then(bad: bool, timeout: u8, retry: u8, len: usize) -> Vec<(u64, WcStatus)> {
    long_read_link(bad, timeout, retry, len, clean())
}
fn long_read_link(
    bad: bool,
    timeout: u8,
    retry: u8,
    len: usize,
    link: metaroce_proto::testkit::rc::Link,
) -> Vec<(u64, WcStatus)> {
    let (mut p, a, b) = setup(16, false, link, 3);
    p.a.set_retry(timeout, retry, 7);
    p.b.set_retry(timeout, retry, 7);
    assert!(p.a.host.post_send(rdma(
        wqe(WrOpcode::RdmaRead, 1, vec![sge(a, 0, len, A_MR)]),
        b,
        B_MR
    )));
    assert!(p.a.host.post_send(rdma(
        wqe(WrOpcode::AtomicCmpAndSwp, 2, vec![sge(a, len, 8, A_MR)]),
        b + 8,
        if bad { B_MR + 99 } else { B_MR }
    )));
    p.doorbell(0);
    p.run(30_000_000_000);
    statuses(&p.a.host.send_cq)
}

#[test]
fn long_read_before_refused_request() {
    // Short local ACK timeouts and few retries: the refused request's NAK waits for
    // the READ's response, which restarts the requester's timer as it streams in,
    // and goes out as soon as the response is acknowledged.
    for timeout in [4u8, 6] {
        for retry in [0u8, 7] {
            let ok = vec![(1, WcStatus::Success), (2, WcStatus::Success)];
            let refused = vec![(1, WcStatus::Success), (2, WcStatus::RemAccessErr)];
            assert_eq!(long_read_then(false, timeout, retry, 200_000), ok);
            assert_eq!(
                long_read_then(true, timeout, retry, 200_000),
                refused,
                "timeout {timeout} retry_cnt {retry}"
            );
        }
    }
}

#[test]
fn long_read_before_refused_request_on_a_long_link() {
    let mut link = clean();
    link.delay_ns = 200_000;
    for (timeout, retry) in [(4u8, 7u8), (6, 1), (8, 0)] {
        assert_eq!(
            long_read_link(true, timeout, retry, 250_000, link),
            vec![(1, WcStatus::Success), (2, WcStatus::RemAccessErr)],
            "200 us one way, timeout {timeout} retry_cnt {retry}"
        );
    }
}

#[test]
fn sweep_late_recv() {
    sweep(
        cfg((100_000, 100_000, 500_000), false, false, 3, true),
        0..120,
    );
}
#[test]
fn sweep_late_recv_srq() {
    sweep(
        cfg((100_000, 100_000, 500_000), true, false, 3, true),
        0..120,
    );
}
#[test]
fn sweep_many() {
    for (l, d, r) in [
        (0, 0, 1_000_000),
        (50_000, 0, 0),
        (300_000, 300_000, 900_000),
    ] {
        sweep(cfg((l, d, r), false, false, 5, false), 1000..1060);
        sweep(cfg((l, d, r), true, true, 2, true), 1000..1060);
    }
}

/// Named NAKs built from a real ACK (right token) with the stream or MSN out of
/// range must be dropped without changing anything (inject checks), and A keeps
/// working.
#[test]
fn named_nak_out_of_range_is_dropped() {
    use metaroce_proto::wire::AF_MSG;
    let (mut p, a, b) = setup(16, false, clean(), 5);
    for i in 0..4u64 {
        assert!(p.a.host.post_send(rdma(
            wqe(WrOpcode::RdmaWrite, i + 1, vec![sge(a, 0, 3000, A_MR)]),
            b + 8192,
            B_MR
        )));
    }
    p.doorbell(0);
    let mut forged = 0;
    for _ in 0..200 {
        for (to, bytes) in p.take_wire() {
            if to == 0 && peek_type(&bytes) == Some(PacketType::Ack) {
                let h = decode_ack_packet(&bytes).unwrap();
                for (s, m) in [
                    (2u16, 0u32),
                    (0xffff, 0),
                    (0, 4),
                    (0, 1000),
                    (0, u32::MAX),
                    (1, 0),
                ] {
                    let mut f = h;
                    f.flags = AF_NAK | AF_MSG;
                    f.rnr_psn = h.cum.wrapping_sub(1);
                    f.nak_stream = s;
                    f.nak_msn = m;
                    let mut buf = [0u8; 128];
                    let n = f.encode(&mut buf).unwrap();
                    p.inject(0, &buf[..n]);
                    forged += 1;
                }
                assert_eq!(p.a.host.mode, QpMode::Rts);
            }
            p.inject(to, &bytes);
        }
        p.tick(100_000);
    }
    assert!(forged > 0);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        (1..=4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
}
