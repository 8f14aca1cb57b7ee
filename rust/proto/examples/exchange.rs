//! Worked examples of the wire (Documentation/transport-examples.rst): two RC QPs set
//! up as the kernel sets them up (keys derived from GIDs, QPNs and PSNs; two paths,
//! path MTU 256, sprayed packet by packet), one exchange per kind of operation (every op, segmentation, RNR, a
//! loss recovered through SACK, both kinds of NAK) and a UD datagram, every datagram in
//! hex with its decoded fields. Generated, not written: `tests/host.sh` checks that the
//! document is this program's output.
//!
//!     cargo run -p metaroce-proto --example exchange > Documentation/transport-examples.rst

use metaroce_proto::conn::Config;
use metaroce_proto::ident::Ident;
use metaroce_proto::rc::{access, send_flags, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::{sge, Link, Pair, SqEntry};
use metaroce_proto::wire::{self, DatagramHeader, Op, Packet, PacketType};
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
/// B's region that A's SEND_WITH_INV invalidates.
const B_INV_MR: u32 = 0x0000_2b04;

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
        // Sprayed packet by packet (the kernel's `train` sends runs of 4 on a path:
        // the same packets, in another order over the paths).
        train: 1,
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
    if wire::peek_type(b) == Some(PacketType::Datagram) {
        return match wire::decode_datagram(b) {
            Ok((h, payload)) => {
                let mut s = format!(
                    "DATAGRAM dst_qpn {:#08x} src_qpn {:#08x} qkey {:#010x} flags {} \
                     stamp {:#x}, {} payload bytes",
                    h.dst_qpn,
                    h.src_qpn,
                    h.qkey,
                    flags(h.flags, &[(wire::GF_IMM, "IMM"), (wire::GF_SE, "SE")]),
                    h.stamp,
                    payload.len()
                );
                if h.flags & wire::GF_IMM != 0 {
                    let _ = write!(s, "; imm {:#010x}", h.imm);
                }
                s
            }
            Err(e) => format!("undecodable: {}", e.name()),
        };
    }
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
            if h.flags & wire::DF_IMM != 0 {
                let _ = write!(s, "; IMM {:#010x}", h.imm);
            }
            s
        }
        Ok(Packet::Ack(_)) if b.len() > wire::ACK_LEN => {
            // An ACK bundle: each ACK as it would travel alone, " + " between them;
            // a DATA riding after them likewise, after " ++ ".
            let (acks, ride) = match wire::decode_ride(b) {
                Ok((a, r)) => (a.collect::<Vec<_>>(), r),
                Err(e) => return format!("undecodable: {}", e.name()),
            };
            let parts: Vec<String> = acks
                .iter()
                .map(|a| {
                    let mut one = [0u8; wire::ACK_LEN];
                    a.encode(&mut one);
                    wire::set_shared(&mut one, wire::is_shared(b));
                    describe(&one)
                })
                .collect();
            let one = parts.join(" + ");
            match ride {
                Some(d) if parts.len() == 1 => format!("{one} ++ riding {}", describe(d)),
                Some(d) => format!(
                    "ACK bundle of {}: {one} ++ riding {}",
                    parts.len(),
                    describe(d)
                ),
                None => format!("ACK bundle of {}: {one}", parts.len()),
            }
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
                        (wire::AF_CLOSED, "CLOSED"),
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
            "PROBE inc {:#06x} path {} psn {:#010x} floor {:#010x}",
            p.inc, p.path, p.psn, p.floor
        ),
        Err(e) => format!("undecodable: {}", e.name()),
    }
}

/// Hex lines of `b`: every header byte, payload bytes after the first 16 elided.
fn hex(b: &[u8]) -> String {
    let header = match wire::decode(b) {
        Ok(Packet::Data(_, payload)) => b.len() - payload.len(),
        _ if wire::peek_type(b) == Some(PacketType::Datagram) => wire::DATAGRAM_LEN,
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
    /// Numbers (within the section) of datagrams the network loses.
    lose: Vec<usize>,
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
                let lost = self.lose.contains(&self.n);
                let line = format!(
                    "{}. {from} → {dst}: {}{}",
                    self.n,
                    describe(&b),
                    if lost { " — lost in the network" } else { "" }
                );
                // The item's body is indented as far as its text starts.
                let indent = " ".repeat(self.n.to_string().len() + 2);
                let _ = writeln!(self.out, "{}\n", wrap(&line, &indent));
                let _ = writeln!(self.out, "{indent}::\n\n{}", hex(&b));
                if !lost {
                    self.p.inject(to, &b);
                }
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
        self.lose.clear();
    }

    fn post(&mut self, e: SqEntry) {
        assert!(self.p.a.host.post_send(e));
        self.p.doorbell(0);
        self.deliver();
    }
}

/// The two QPs connected as the set-up table says, B's memory open to every remote
/// operation (and a second region for SEND_WITH_INV to invalidate), both regions
/// filled with patterns. Returns the pair and A's and B's region addresses.
fn connected_pair() -> (Pair, u64, u64) {
    connected_pair_with(|_| {})
}

/// [`connected_pair`], B's configuration changed by `b_cfg`.
fn connected_pair_with(b_cfg: impl Fn(&mut Config)) -> (Pair, u64, u64) {
    let link = Link {
        loss_ppm: 0,
        dup_ppm: 0,
        reorder_ppm: 0,
        delay_ns: 20_000,
        reorder_ns: 0,
        b_gone: false,
    };
    let mut p = Pair::new(16, false, link, 1);
    let (a_tx, b_tx) = keys();
    let base = *p.a.conn.config();
    p.a.connect(cfg(&base, A_QPN, B_QPN, a_tx, b_tx, 50000));
    let mut bc = cfg(&base, B_QPN, A_QPN, b_tx, a_tx, 60000);
    b_cfg(&mut bc);
    p.b.connect(bc);
    let all =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let a = p.a.host.reg_mr(A_MR, 4096, access::LOCAL_WRITE);
    let b = p.b.host.reg_mr(B_MR, 4096, all);
    p.b.host.reg_mr(B_INV_MR, 64, 0);
    for (i, x) in p.a.host.mr_mut(A_MR).unwrap().bytes.iter_mut().enumerate() {
        *x = i as u8;
    }
    for (i, x) in p.b.host.mr_mut(B_MR).unwrap().bytes.iter_mut().enumerate() {
        *x = (i as u8) ^ 0x80;
    }
    (p, a, b)
}

/// The keys of A's and B's sending directions.
fn keys() -> (Ident, Ident) {
    let (ga, gb) = (gid(1), gid(2));
    (
        Ident::derive(&ga, &gb, A_QPN, B_QPN, A_PSN),
        Ident::derive(&gb, &ga, B_QPN, A_QPN, B_PSN),
    )
}

/// A's send completions so far, as `wr_id status`.
fn send_cq(p: &Pair) -> Vec<String> {
    p.a.host
        .send_cq
        .iter()
        .map(|c| format!("{} {:?}", c.wr_id, c.status))
        .collect()
}

fn main() {
    let (p, a, b) = connected_pair();
    let (a_tx, b_tx) = keys();
    let mut ex = Ex {
        p,
        out: String::new(),
        n: 0,
        lose: Vec::new(),
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
         ``Documentation/transport.rst`` says (\"Connection set-up\"), as the reference\n\
         produces and checks them, and one UD datagram: ``rust/proto/examples/exchange.rs``\n\
         drives the reference protocol core and RC engine and prints this document, and\n\
         ``tests/host.sh`` fails if it and the program disagree. Payload bytes after the\n\
         first 16 of a DATA packet are elided. Time stands still while a datagram is\n\
         answered and moves on only for timers (the RNR wait), so most stamps are equal\n\
         (and no ACK gives an RTT sample).\n\n\
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
         ======================= =================================================\n\n\
         In the decoded lines ``tag`` is the message tag (``Documentation/transport.rst``,\n\
         C12 and C13): the receive sequence number of a SEND, SEND_IMM, SEND_INV or\n\
         WRITE_IMM (B takes its receives in that order), the response number of a READ or\n\
         atomic request (the response's MSN on B's stream 1), 0 otherwise.\n\n",
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
        "B has no receive posted: it refuses both packets of the SEND with RNR (its \
         ``min_rnr_timer`` in the report: code 1, 10 µs). B posts a receive; A resends \
         both packets after the RNR timer with new PSNs (RETX), each on the other path \
         (as a retransmission), and B acknowledges them. \
         The RNR reports echo no stamp: B has accepted nothing on either path yet.",
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
        "A zero-length READ_REQ on A's stream 0, tag 0: the first READ/atomic request; \
         B's READ_RESP on its stream 1 with MSN 0, each acknowledged. The response \
         rides after B's ACK of the request, in one datagram (``Documentation/transport.rst``, \
         \"ACKs riding on DATA\"); A, with nothing to send, acknowledges it alone.",
    );
    ex.post(
        SqEntry::signaled(WrOpcode::RdmaRead, 3, vec![sge(a, 1024, 16, A_MR)]).at(b + 2048, B_MR),
    );

    ex.section(
        "ATOMIC FETCH_ADD",
        "The addend (5) big-endian in 8 payload bytes, tag 1 (the second READ/atomic \
         request); B's ATOMIC_RESP, MSN 1, carries the original value big-endian.",
    );
    let mut fa = SqEntry::signaled(WrOpcode::AtomicFetchAndAdd, 4, vec![sge(a, 1536, 8, A_MR)])
        .at(b + 3072, B_MR);
    fa.wqe.compare_add = 5;
    ex.post(fa);

    ex.section(
        "ATOMIC CMP_SWAP",
        "Swap value then compare value, big-endian, 16 payload bytes, tag 2; the compare \
         value is what the FETCH_ADD left, so B swaps and returns it (response MSN 2).",
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
        "SEND with immediate data and a solicited event",
        "16 bytes, tag 1: the second receive-consuming message, so B places it into its \
         second posted receive. The last (here the only) packet carries IMM (the \
         immediate data, big-endian) and SE.",
    );
    assert!(ex.p.b.host.post_recv(11, &[sge(b, 512, 64, B_MR)]));
    let mut si = SqEntry::signaled(WrOpcode::SendWithImm, 6, vec![sge(a, 2048, 16, A_MR)]);
    si.wqe.ex = 0xcafe_f00du32.to_be();
    si.wqe.send_flags |= send_flags::SOLICITED;
    ex.post(si);

    ex.section(
        "RDMA WRITE with immediate data",
        "16 bytes placed at the RETH address; it also consumes a receive (tag 2, B's third) \
         to deliver the immediate data.",
    );
    assert!(ex.p.b.host.post_recv(12, &[sge(b, 576, 64, B_MR)]));
    let mut wi = SqEntry::signaled(WrOpcode::RdmaWriteWithImm, 7, vec![sge(a, 2064, 16, A_MR)])
        .at(b + 1536, B_MR);
    wi.wqe.ex = 0x0000_0abcu32.to_be();
    ex.post(wi);

    ex.section(
        "SEND with invalidate",
        "16 bytes into B's fourth receive (tag 3); the IMM field carries the R_Key B \
         invalidates when the receive completes (here its region 0x2b04).",
    );
    assert!(ex.p.b.host.post_recv(13, &[sge(b, 640, 64, B_MR)]));
    let mut sv = SqEntry::signaled(WrOpcode::SendWithInv, 8, vec![sge(a, 2080, 16, A_MR)]);
    sv.wqe.ex = B_INV_MR;
    ex.post(sv);
    assert!(
        !ex.p.b.host.mr(B_INV_MR).unwrap().valid,
        "the SEND_WITH_INV invalidated B's region"
    );

    ex.section(
        "ATOMIC WRITE",
        "8 bytes stored at the RETH address as they arrive, as one 8-byte write; tag 0 \
         and no response: B acknowledges it as a WRITE.",
    );
    let mut aw = SqEntry::signaled(WrOpcode::AtomicWrite, 9, vec![]).at(b + 3080, B_MR);
    aw.wqe.length = 8;
    aw.inline = vec![0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
    ex.post(aw);
    assert_eq!(
        ex.p.b.host.mr(B_MR).unwrap().bytes[3080..3088],
        [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
        "the ATOMIC_WRITE stored its bytes"
    );

    ex.section(
        "RDMA READ of 600 bytes: a response in three packets",
        "The READ_REQ (tag 3, the fourth READ/atomic request) asks for 600 bytes; B's \
         READ_RESP, MSN 3, is cut at the path MTU into 256 + 256 + 88 bytes, sprayed over \
         both paths, and placed by offset.",
    );
    ex.post(
        SqEntry::signaled(WrOpcode::RdmaRead, 10, vec![sge(a, 2560, 600, A_MR)]).at(b + 2048, B_MR),
    );
    assert_eq!(
        ex.p.a.host.mr(A_MR).unwrap().bytes[2560..3160],
        ex.p.b.host.mr(B_MR).unwrap().bytes[2048..2648],
        "the READ placed every byte"
    );

    ex.section(
        "RDMA WRITE of 2048 bytes with a packet lost: SACK",
        "Eight packets, four per path. The first packet on path 0 (datagram 1) is lost. \
         B acknowledges each later packet of path 0 with ``cum`` still at the lost PSN and \
         the later ones in the SACK bitmap; at the third of them A declares the packet \
         lost (three later PSNs of its path SACKed) and resends it, with a new PSN, on \
         path 1. The ACK of the resend covers it; A's floor on path 0 (in its next packet \
         there) then moves past the lost PSN.",
    );
    ex.lose = vec![1];
    assert!(ex.p.a.host.post_send(
        SqEntry::signaled(WrOpcode::RdmaWrite, 11, vec![sge(a, 0, 2048, A_MR)]).at(b, B_MR)
    ));
    ex.p.doorbell(0);
    ex.deliver();
    assert_eq!(
        ex.p.a.host.mr(A_MR).unwrap().bytes[..2048],
        ex.p.b.host.mr(B_MR).unwrap().bytes[..2048],
        "the WRITE placed every byte"
    );

    ex.section(
        "RDMA WRITE refused: remote access error",
        "The R_Key is not B's: B refuses the packet for good. Every earlier message of the \
         stream is complete, so the ACK carries NAK and MSG naming the refused message \
         (stream 0, its MSN); A's work request completes with ``IBV_WC_REM_ACCESS_ERR`` \
         and both QPs enter the error state.",
    );
    ex.post(SqEntry::signaled(WrOpcode::RdmaWrite, 12, vec![sge(a, 0, 16, A_MR)]).at(b, B_MR + 1));
    assert_eq!(
        send_cq(&ex.p),
        [
            "1 Success",
            "2 Success",
            "3 Success",
            "4 Success",
            "5 Success",
            "6 Success",
            "7 Success",
            "8 Success",
            "9 Success",
            "10 Success",
            "11 Success",
            "12 RemAccessErr"
        ],
        "the exchange went as described"
    );
    let recvs: Vec<(u64, WcStatus)> =
        ex.p.b
            .host
            .recv_cq
            .iter()
            .map(|(c, _)| (c.wr_id, c.status))
            .collect();
    assert_eq!(
        recvs[..4],
        [
            (10, WcStatus::Success),
            (11, WcStatus::Success),
            (12, WcStatus::Success),
            (13, WcStatus::Success)
        ],
        "B's receives completed in order"
    );

    // The invalid request needs QPs that are not in the error state: a new pair, set up
    // as before (the same keys, PSNs and incarnations).
    let (p, a, b) = connected_pair();
    ex.p = p;
    ex.section(
        "SEND longer than its receive: invalid request",
        "Two QPs set up as above, anew (so the PSNs and SSNs start over). B's receive holds \
         16 bytes, A sends 32: B refuses the message for good as an invalid request. The \
         ACK carries NAK, INV and MSG; A's work request completes with \
         ``IBV_WC_REM_INV_REQ_ERR``, B's receive with ``IBV_WC_LOC_LEN_ERR``, and both QPs \
         enter the error state.",
    );
    assert!(ex.p.b.host.post_recv(20, &[sge(b, 0, 16, B_MR)]));
    ex.post(SqEntry::signaled(
        WrOpcode::Send,
        21,
        vec![sge(a, 0, 32, A_MR)],
    ));
    assert_eq!(send_cq(&ex.p), ["21 RemInvReqErr"], "the SEND was refused");
    assert_eq!(
        ex.p.b
            .host
            .recv_cq
            .first()
            .map(|(c, _)| (c.wr_id, c.status)),
        Some((20, WcStatus::LocLenErr)),
        "B's receive could not hold it"
    );

    // An ACK bundle: B acknowledges every 2nd packet of a path and bundles.
    let (p, a, b) = connected_pair_with(|c| {
        c.ack_every = 2;
        c.ack_bundle = 16;
        c.ack_delay_ns = 100_000;
    });
    ex.p = p;
    ex.section(
        "RDMA WRITE of 1024 bytes, acknowledged in ACK bundles",
        "Two QPs set up as above, anew, but B acknowledges a path every 2nd packet and \
         bundles its ACKs (``Documentation/transport.rst``, \"ACK bundles\"; the kernel's \
         defaults, ``ack_every`` 2 and ``ack_bundle`` 16). A's four packets go over paths \
         0 and 1 in turn. Path 0's second packet makes its ACK due, and path 1's, held back, \
         rides along: one datagram of two 72-byte ACKs, from B's source port of path 0. \
         The last packet makes path 1's ACK due at once, alone (path 0 holds nothing).",
    );
    ex.post(SqEntry::signaled(WrOpcode::RdmaWrite, 30, vec![sge(a, 0, 1024, A_MR)]).at(b, B_MR));
    assert_eq!(send_cq(&ex.p), ["30 Success"], "the WRITE completed");

    ex.section(
        "UD SEND with immediate data",
        "Outside any connection: one DATAGRAM, no acknowledgement. A's UD QP 0x0001f0 \
         sends 16 bytes with immediate data to B's UD QP 0x0002f0 under Q_Key \
         0x11111111, from UDP source port 49152 + (0x0001f0 mod 16384) = 49648; \
         ``path``, ``inc``, ``psn`` and ``token`` are 0. (Built with the reference's \
         encoder as ``rust/verbs/qp/ud.rs`` builds it: the protocol core has no UD \
         state.) B's receive gets the 40-byte GRH area, then the 16 bytes.",
    );
    let h = DatagramHeader {
        dst_qpn: 0x0002f0,
        src_qpn: 0x0001f0,
        qkey: 0x1111_1111,
        flags: wire::GF_IMM,
        payload_len: 16,
        imm: 0x1234_5678,
        stamp: 0x000f_4240,
    };
    let mut d = vec![0u8; wire::DATAGRAM_LEN + 16];
    assert_eq!(h.encode(&mut d), Some(wire::DATAGRAM_LEN));
    for (i, x) in d[wire::DATAGRAM_LEN..].iter_mut().enumerate() {
        *x = i as u8;
    }
    assert_eq!(wire::decode_datagram(&d).map(|(x, _)| x), Ok(h));
    let line = format!("1. A → B: {}", describe(&d));
    let _ = writeln!(ex.out, "{}\n", wrap(&line, "   "));
    let _ = writeln!(ex.out, "   ::\n\n{}", hex(&d));

    print!("{head}{}", ex.out.trim_end());
    println!();
}
