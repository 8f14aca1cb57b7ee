//! Worked examples of the wire (Documentation/transport-examples.rst): two RC QPs set
//! up as the kernel sets them up (keys derived from GIDs, QPNs and PSNs; two paths,
//! path MTU 256), one exchange per kind of operation, every datagram in hex with its
//! decoded fields. Generated, not written: `tests/host.sh` checks that the document is
//! this program's output.
//!
//!     cargo run -p metaroce-proto --example exchange > Documentation/transport-examples.rst

use metaroce_proto::conn::Config;
use metaroce_proto::ident::Ident;
use metaroce_proto::rc::{access, WrOpcode};
use metaroce_proto::testkit::rc::{sge, Link, Pair, SqEntry};
use metaroce_proto::wire::{self, Op, Packet};
use std::fmt::Write;

const A_QPN: u32 = 0x0001_2345;
/// A's and B's incarnations.
const A_INC: u16 = 0x7a11;
const B_INC: u16 = 0x3b0c;
const B_QPN: u32 = 0x0006_789a;
/// A's `sq_psn` (B's `rq_psn`) and B's `sq_psn` (A's `rq_psn`).
const A_PSN: u32 = 0x00ab_cdef;
const B_PSN: u32 = 0x0012_3456;
const A_MR: u32 = 0x0000_1a01;
const B_MR: u32 = 0x0000_2b02;

fn gid(last: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&[198, 18, 0, last]);
    g
}

fn cfg(base: &Config, local: u32, peer: u32, tx: Ident, rx: Ident, port: u16) -> Config {
    Config {
        local_conn: local,
        peer_conn: peer,
        // Each end's own (a host draws them at random).
        incarnation: if local == A_QPN { A_INC } else { B_INC },
        tx_ident: tx,
        rx_ident: rx,
        paths: 2,
        mtu: 256,
        base_src_port: port,
        ..*base
    }
}

fn op_name(op: u8) -> &'static str {
    match Op::from_u8(op) {
        Some(Op::Send) => "SEND",
        Some(Op::SendImm) => "SEND_IMM",
        Some(Op::Write) => "WRITE",
        Some(Op::WriteImm) => "WRITE_IMM",
        Some(Op::ReadReq) => "READ_REQ",
        Some(Op::ReadResp) => "READ_RESP",
        Some(Op::AtomicCmpSwap) => "ATOMIC_CS",
        Some(Op::AtomicFetchAdd) => "ATOMIC_FA",
        Some(Op::AtomicResp) => "ATOMIC_RESP",
        Some(Op::SendInv) => "SEND_INV",
        Some(Op::AtomicWrite) => "ATOMIC_WRITE",
        None => "?",
    }
}

fn flags(v: u8, names: &[(u8, &str)]) -> String {
    let f: Vec<&str> = names
        .iter()
        .filter(|(b, _)| v & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if f.is_empty() {
        "-".into()
    } else {
        f.join("|")
    }
}

/// One line of decoded fields.
fn describe(b: &[u8]) -> String {
    match wire::decode(b) {
        Ok(Packet::Data(h, payload)) => {
            let mut s = format!(
                "DATA inc {:#06x} path {} psn {:#010x} stream {} op {} flags {} ssn {:#010x} \
                 msn {} offset {} msg_len {} tag {} floor {:#010x}, {} payload bytes",
                h.inc,
                h.path,
                h.psn,
                h.stream,
                op_name(h.op),
                flags(
                    h.flags,
                    &[
                        (wire::DF_FIRST, "FIRST"),
                        (wire::DF_LAST, "LAST"),
                        (wire::DF_RETH, "RETH"),
                        (wire::DF_IMM, "IMM"),
                        (wire::DF_RETX, "RETX"),
                        (wire::DF_ACKREQ, "ACKREQ"),
                        (wire::DF_SE, "SE"),
                    ]
                ),
                h.ssn,
                h.msn,
                h.offset,
                h.msg_len,
                h.tag,
                h.floor,
                payload.len()
            );
            if h.flags & wire::DF_RETH != 0 {
                let _ = write!(
                    s,
                    "; RETH va {:#x} rkey {:#x} len {}",
                    h.reth.va, h.reth.rkey, h.reth.len
                );
            }
            s
        }
        Ok(Packet::Ack(a)) => {
            let sacked: Vec<String> = (0..256u32)
                .filter(|&i| a.sack.get(i))
                .map(|i| format!("{:#010x}", a.cum.wrapping_add(1 + i)))
                .collect();
            let mut s = format!(
                "ACK inc {:#06x} path {} cum {:#010x} rate_hint {} ce {} acked {} flags {} \
                 sack [{}]",
                a.inc,
                a.path,
                a.cum,
                a.rate_hint,
                a.ce,
                a.acked,
                flags(
                    a.flags,
                    &[
                        (wire::AF_RNR, "RNR"),
                        (wire::AF_NAK, "NAK"),
                        (wire::AF_INV, "INV"),
                        (wire::AF_MSG, "MSG"),
                    ]
                ),
                sacked.join(" ")
            );
            if a.flags & (wire::AF_RNR | wire::AF_NAK) != 0 {
                let _ = write!(s, "; rnr_timer {} rnr_psn {:#010x}", a.rnr_timer, a.rnr_psn);
            }
            if a.flags & wire::AF_MSG != 0 {
                let _ = write!(s, "; nak_stream {} nak_msn {}", a.nak_stream, a.nak_msn);
            }
            s
        }
        Ok(Packet::Probe(p)) => format!(
            "PROBE inc {:#06x} path {} psn {:#010x}",
            p.inc, p.path, p.psn
        ),
        Err(e) => format!("undecodable: {}", e.name()),
    }
}

/// Hex lines of `b`: every header byte, payload bytes after the first 16 elided.
fn hex(b: &[u8]) -> String {
    let header = match wire::decode(b) {
        Ok(Packet::Data(_, payload)) => b.len() - payload.len(),
        _ => b.len(),
    };
    let shown = b.len().min(header + 16);
    let mut s = String::new();
    for (i, chunk) in b[..shown].chunks(16).enumerate() {
        let bytes: Vec<String> = chunk.iter().map(|x| format!("{x:02x}")).collect();
        let _ = writeln!(s, "     {:04x}  {}", i * 16, bytes.join(" "));
    }
    if shown < b.len() {
        let _ = writeln!(s, "           … {} more payload bytes", b.len() - shown);
    }
    s
}

/// `text` wrapped at 88 columns, continuation lines indented by `indent`.
fn wrap(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > 88 {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(w);
    }
    out.push_str(&line);
    out
}

struct Ex {
    p: Pair,
    out: String,
    n: usize,
}

impl Ex {
    /// Delivers every datagram in flight, in order, printing each, until both sides
    /// are quiet (delayed ACKs and other timers run 10 µs apart), at most `rounds`
    /// rounds of deliveries.
    fn deliver_rounds(&mut self, rounds: usize) {
        let mut done = 0;
        for _ in 0..50 {
            if done == rounds {
                return;
            }
            let wire = self.p.take_wire();
            if wire.is_empty() {
                self.p.tick(10_000);
                if self.p.wire.queue.is_empty() {
                    return;
                }
                continue;
            }
            done += 1;
            for (to, b) in wire {
                self.n += 1;
                let (from, dst) = if to == 1 { ("A", "B") } else { ("B", "A") };
                let line = format!("{}. {from} → {dst}: {}", self.n, describe(&b));
                let _ = writeln!(self.out, "{}\n", wrap(&line, "   "));
                let _ = writeln!(self.out, "   ::\n\n{}", hex(&b));
                self.p.inject(to, &b);
            }
        }
    }

    fn deliver(&mut self) {
        self.deliver_rounds(usize::MAX);
    }

    fn section(&mut self, title: &str, text: &str) {
        let _ = writeln!(
            self.out,
            "{title}\n{}\n\n{}\n",
            "-".repeat(title.chars().count()),
            wrap(text, "")
        );
        self.n = 0;
    }

    fn post(&mut self, e: SqEntry) {
        assert!(self.p.a.host.post_send(e));
        self.p.doorbell(0);
        self.deliver();
    }
}

fn main() {
    let link = Link {
        loss_ppm: 0,
        dup_ppm: 0,
        reorder_ppm: 0,
        delay_ns: 20_000,
        reorder_ns: 0,
        b_gone: false,
    };
    let mut p = Pair::new(16, false, link, 1);
    let (ga, gb) = (gid(1), gid(2));
    let a_tx = Ident::derive(&ga, &gb, A_QPN, B_QPN, A_PSN);
    let b_tx = Ident::derive(&gb, &ga, B_QPN, A_QPN, B_PSN);
    let base = *p.a.conn.config();
    p.a.connect(cfg(&base, A_QPN, B_QPN, a_tx, b_tx, 50000));
    p.b.connect(cfg(&base, B_QPN, A_QPN, b_tx, a_tx, 60000));
    let all =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let a = p.a.host.reg_mr(A_MR, 4096, access::LOCAL_WRITE);
    let b = p.b.host.reg_mr(B_MR, 4096, all);
    for (i, x) in p.a.host.mr_mut(A_MR).unwrap().bytes.iter_mut().enumerate() {
        *x = i as u8;
    }
    for (i, x) in p.b.host.mr_mut(B_MR).unwrap().bytes.iter_mut().enumerate() {
        *x = (i as u8) ^ 0x80;
    }
    let mut ex = Ex {
        p,
        out: String::new(),
        n: 0,
    };
    let mut head = String::new();
    let _ = write!(
        head,
        ".. SPDX-License-Identifier: GPL-2.0\n\n\
         .. Generated by `cargo run -p metaroce-proto --example exchange`; do not edit.\n\n\
         ==========================================\n\
         MetaRoCE transport: worked examples in hex\n\
         ==========================================\n\n\
         Every datagram (the UDP payload) of one exchange per kind of operation between two\n\
         RC queue pairs, A (requester) and B (responder), set up as\n\
         ``Documentation/transport.rst`` says (\"RC queue pairs: what both ends agree on\"),\n\
         as the reference produces and checks them: ``rust/proto/examples/exchange.rs``\n\
         drives the reference protocol core and RC engine and prints this document, and\n\
         ``tests/host.sh`` fails if it and the program disagree. Payload bytes after the\n\
         first 16 of a DATA packet are elided. Time stands still while a datagram is\n\
         answered and moves on only for timers (the RNR wait), so most stamps are equal.\n\n\
         Set-up\n------\n\n\
         ======================= =================================================\n\
         A                       GID ``::ffff:198.18.0.1``, QPN {A_QPN:#08x}, ``sq_psn`` {A_PSN:#08x}\n\
         B                       GID ``::ffff:198.18.0.2``, QPN {B_QPN:#08x}, ``sq_psn`` {B_PSN:#08x}\n\
         Path MTU, paths         256 bytes; ``K`` = 2 on both ends\n\
         Source ports            A: 50000 + path; B: 60000 + path\n\
         Incarnations            A: {A_INC:#06x}; B: {B_INC:#06x}\n\
         Memory                  A's MR lkey {A_MR:#x} at {a:#x}; B's MR rkey {B_MR:#x} at {b:#x}\n\
         Key A → B               ``{:#018x}`` (token ``{:#010x}``)\n\
         Key B → A               ``{:#018x}`` (token ``{:#010x}``)\n\
         A → B first PSNs        path 0 ``{:#010x}``, path 1 ``{:#010x}``\n\
         A → B first SSNs        stream 0 ``{:#010x}``, stream 1 ``{:#010x}``\n\
         B → A first PSNs        path 0 ``{:#010x}``, path 1 ``{:#010x}``\n\
         B → A first SSNs        stream 0 ``{:#010x}``, stream 1 ``{:#010x}``\n\
         ======================= =================================================\n\n",
        a_tx.0,
        a_tx.token(),
        b_tx.0,
        b_tx.token(),
        a_tx.isn(0),
        a_tx.isn(1),
        a_tx.first_ssn(0),
        a_tx.first_ssn(1),
        b_tx.isn(0),
        b_tx.isn(1),
        b_tx.first_ssn(0),
        b_tx.first_ssn(1),
    );

    ex.section(
        "SEND before a receive is posted: RNR, then SEND of 300 bytes",
        "B has no receive posted: it refuses the first packet with RNR (its \
         ``min_rnr_timer`` in the report: code 1, 10 µs). B posts a receive; A resends \
         both packets after the RNR timer with new PSNs (RETX), and B acknowledges them.",
    );
    let send = SqEntry::signaled(WrOpcode::Send, 1, vec![sge(a, 0, 300, A_MR)]);
    assert!(ex.p.a.host.post_send(send));
    ex.p.doorbell(0);
    // The SEND's packets, then B's RNR reports.
    ex.deliver_rounds(2);
    assert!(ex.p.b.host.post_recv(10, &[sge(b, 0, 512, B_MR)]));
    ex.deliver();

    ex.section(
        "RDMA WRITE of 16 bytes",
        "One packet with a RETH; B acknowledges it.",
    );
    ex.post(
        SqEntry::signaled(WrOpcode::RdmaWrite, 2, vec![sge(a, 512, 16, A_MR)]).at(b + 1024, B_MR),
    );

    ex.section(
        "RDMA READ of 16 bytes",
        "A zero-length READ_REQ on A's stream 0; B's READ_RESP on its stream 1 (response \
         MSN 0: the first READ/atomic request), each acknowledged.",
    );
    ex.post(
        SqEntry::signaled(WrOpcode::RdmaRead, 3, vec![sge(a, 1024, 16, A_MR)]).at(b + 2048, B_MR),
    );

    ex.section(
        "ATOMIC FETCH_ADD",
        "The addend (5) big-endian in 8 payload bytes; B's ATOMIC_RESP carries the original \
         value big-endian (response MSN 1).",
    );
    let mut fa = SqEntry::signaled(WrOpcode::AtomicFetchAndAdd, 4, vec![sge(a, 1536, 8, A_MR)])
        .at(b + 3072, B_MR);
    fa.wqe.compare_add = 5;
    ex.post(fa);

    ex.section(
        "ATOMIC CMP_SWAP",
        "Swap value then compare value, big-endian, 16 payload bytes; the compare value is \
         what the FETCH_ADD left, so B swaps and returns it (response MSN 2).",
    );
    let mut cs = SqEntry::signaled(WrOpcode::AtomicCmpAndSwp, 5, vec![sge(a, 1544, 8, A_MR)])
        .at(b + 3072, B_MR);
    // Compare with what the FETCH_ADD left there, so that the swap happens.
    let now = &ex.p.b.host.mr(B_MR).unwrap().bytes[3072..3080];
    let cur = u64::from_ne_bytes(now.try_into().unwrap());
    (cs.wqe.compare_add, cs.wqe.swap) = (cur, 0x1122_3344_5566_7788);
    ex.post(cs);
    let swapped = &ex.p.b.host.mr(B_MR).unwrap().bytes[3072..3080];
    assert_eq!(
        u64::from_ne_bytes(swapped.try_into().unwrap()),
        0x1122_3344_5566_7788,
        "the CMP_SWAP swapped"
    );

    ex.section(
        "RDMA WRITE refused: remote access error",
        "The R_Key is not B's: B refuses the packet for good. Every earlier message of the \
         stream is complete, so the ACK carries NAK and MSG naming the refused message \
         (stream 0, its MSN); A's work request completes with ``IBV_WC_REM_ACCESS_ERR`` \
         and both QPs enter the error state.",
    );
    ex.post(SqEntry::signaled(WrOpcode::RdmaWrite, 6, vec![sge(a, 0, 16, A_MR)]).at(b, B_MR + 1));

    let cq: Vec<String> =
        ex.p.a
            .host
            .send_cq
            .iter()
            .map(|c| format!("{} {:?}", c.wr_id, c.status))
            .collect();
    assert_eq!(
        cq,
        [
            "1 Success",
            "2 Success",
            "3 Success",
            "4 Success",
            "5 Success",
            "6 RemAccessErr"
        ],
        "the exchange went as described"
    );
    print!("{head}{}", ex.out.trim_end());
    println!();
}
