//! Writes a pcap of MetaRoCE datagrams made by the reference encoder, and the field
//! values a dissector must show for each, for the Wireshark dissector's test
//! (`tests/wireshark.sh`, `tools/wireshark/metaroce.lua`):
//!
//!     cargo run -p metaroce-proto --example wire_pcap -- OUT.pcap OUT.expect
//!
//! The capture holds, in this order:
//!
//! 1. every datagram of four exchanges between two model QPs each (`testkit::Pair`,
//!    every verbs opcode; 5, 10, 15 and 0 % of the datagrams lost after capture,
//!    10 % swapped with their successor), as captured at the sender;
//! 2. hand-made datagrams through the encoders: each op, RNR/NAK/INV ACKs, SACK
//!    bitmaps that wrap the PSN space, PROBEs, DATAGRAMs, a shared connection's DATA,
//!    ACK and PROBE (`wire::set_shared`);
//! 3. malformed variants of those, one per check of the decoder;
//! 4. a DATA datagram and a shared connection's to other UDP ports (the heuristic
//!    dissector's), and a look-alike (version 3, type DATA, too short) and a DATAGRAM
//!    with the SHARED bit to other ports, which it must leave alone.
//!
//! Expected values come from the reference decoder (`wire::decode`,
//! `wire::decode_datagram`); a malformed variant expects the `DropReason` the
//! decoder returns. `OUT.expect` has one line per frame, tab-separated `key=value`:
//! `frame=N`, `proto=metaroce|none`, `drop=REASON|-`, then `metaroce.*` fields
//! (lists comma-separated). Ethernet/IPv4/UDP framing with valid checksums; in
//! exchange `k` node 0 is 10.0.k.1 (QPN 1), node 1 10.0.k.2 (QPN 2); hand-made
//! datagrams go between 10.0.100.1 and 10.0.100.2.

use metaroce_proto::rc::{access, QpMode, Sge, WrOpcode};
use metaroce_proto::sack::Sack;
use metaroce_proto::testkit::rc::{sge, Link, Pair, Rng, SqEntry};
use metaroce_proto::wire::{self, AckHeader, DataHeader, DatagramHeader, Op, Packet, ProbeHeader};
use std::fmt::Write as _;
use std::io::Write as _;

const PORT: u16 = wire::DEFAULT_UDP_PORT;

/// One captured frame and what the dissector must show for it.
struct Frame {
    at_ns: u64,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    ecn: u8,
    payload: Vec<u8>,
    /// `key=value` pairs (frame number added when written).
    expect: Vec<(String, String)>,
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for w in h.chunks(2) {
        let hi = u32::from(w[0]) << 8;
        sum += hi | u32::from(*w.get(1).unwrap_or(&0));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IPv4 + UDP around `f.payload`.
fn frame_bytes(f: &Frame, id: u16) -> Vec<u8> {
    let udp_len = 8 + f.payload.len();
    let ip_len = 20 + udp_len;
    let mut b = Vec::with_capacity(14 + ip_len);
    b.extend_from_slice(&[0x52, 0x54, 0, 0x6d, 0x72, f.dst[3]]);
    b.extend_from_slice(&[0x52, 0x54, 0, 0x6d, 0x72, f.src[3]]);
    b.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, f.ecn];
    ip.extend_from_slice(&(ip_len as u16).to_be_bytes());
    ip.extend_from_slice(&id.to_be_bytes());
    ip.extend_from_slice(&0x4000u16.to_be_bytes());
    ip.extend_from_slice(&[64, 17, 0, 0]);
    ip.extend_from_slice(&f.src);
    ip.extend_from_slice(&f.dst);
    let c = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    b.extend_from_slice(&ip);
    let mut udp = Vec::with_capacity(udp_len);
    udp.extend_from_slice(&f.sport.to_be_bytes());
    udp.extend_from_slice(&f.dport.to_be_bytes());
    udp.extend_from_slice(&(udp_len as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&f.payload);
    // Pseudo-header, then the datagram (checksum 0 while summing).
    let mut ps = Vec::with_capacity(12 + udp_len);
    ps.extend_from_slice(&f.src);
    ps.extend_from_slice(&f.dst);
    ps.extend_from_slice(&[0, 17]);
    ps.extend_from_slice(&(udp_len as u16).to_be_bytes());
    ps.extend_from_slice(&udp);
    let c = match ipv4_checksum(&ps) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    b.extend_from_slice(&udp);
    b
}

fn kv(out: &mut Vec<(String, String)>, k: &str, v: impl ToString) {
    out.push((format!("metaroce.{k}"), v.to_string()));
}

fn common(e: &mut Vec<(String, String)>, b: &[u8]) {
    let u32at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    kv(e, "version", b[0]);
    // The type without the SHARED bit, which is a field of its own.
    kv(e, "type", b[1] & !wire::TYPE_SHARED);
    kv(e, "shared", u8::from(wire::is_shared(b)));
    kv(e, "path", b[2]);
    kv(e, "inc", u16::from_be_bytes([b[3], b[4]]));
    kv(e, "dst_conn", u32at(4) & 0x00ff_ffff);
    kv(e, "psn", u32at(8));
    let is_ack = wire::peek_type(b) == Some(wire::PacketType::Ack);
    kv(e, if is_ack { "echo" } else { "stamp" }, u32at(12));
    kv(e, "token", u32at(16));
}

/// The payload as the dissector's `metaroce.payload` (absent when empty).
fn payload_hex(e: &mut Vec<(String, String)>, payload: &[u8]) {
    if !payload.is_empty() {
        let hex = payload.iter().fold(String::new(), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        });
        kv(e, "payload", hex);
    }
}

fn flag_bits(e: &mut Vec<(String, String)>, prefix: &str, v: u8, names: &[(u8, &str)]) {
    kv(e, prefix, v);
    for (bit, name) in names {
        kv(e, &format!("{prefix}.{name}"), u8::from(v & bit != 0));
    }
}

/// A DATA packet's own fields (`riding`: after ACKs, whose header length the datagram
/// shows).
fn data_fields(e: &mut Vec<(String, String)>, h: &DataHeader, payload: &[u8], riding: bool) {
    kv(e, "stream", h.stream);
    kv(e, "op", h.op);
    flag_bits(
        e,
        "flags",
        h.flags,
        &[
            (wire::DF_FIRST, "first"),
            (wire::DF_LAST, "last"),
            (wire::DF_RETH, "reth"),
            (wire::DF_IMM, "imm"),
            (wire::DF_RETX, "retx"),
            (wire::DF_ACKREQ, "ackreq"),
            (wire::DF_SE, "se"),
        ],
    );
    kv(e, "payload_len", h.payload_len);
    kv(e, "tag", h.tag);
    kv(e, "floor", h.floor);
    kv(e, "ssn", h.ssn);
    kv(e, "msn", h.msn);
    kv(e, "offset", h.offset);
    kv(e, "msg_len", h.msg_len);
    if !riding {
        kv(e, "hdr_len", h.header_len());
    }
    if h.flags & wire::DF_RETH != 0 {
        kv(e, "reth.va", h.reth.va);
        kv(e, "reth.rkey", h.reth.rkey);
        kv(e, "reth.dma_len", h.reth.len);
    }
    if h.flags & wire::DF_IMM != 0 {
        kv(e, "imm", h.imm);
    }
    payload_hex(e, payload);
}

/// What the dissector must show for datagram `b`: every field of a well-formed one,
/// the drop reason of a malformed one (`bad_path`: a DATA/PROBE path the receiver
/// has no room for, which the header decoder does not check).
fn expect(b: &[u8]) -> Vec<(String, String)> {
    let mut e = vec![("proto".to_string(), "metaroce".to_string())];
    // By the type bits alone: a DATAGRAM with the SHARED bit is judged as one.
    let r = if wire::peek_type(b) == Some(wire::PacketType::Datagram) {
        wire::decode_datagram(b).map(|_| None)
    } else {
        wire::decode(b).map(Some)
    };
    let p = match r {
        Err(reason) => {
            e.push(("drop".into(), reason.name().into()));
            return e;
        }
        Ok(p) => p,
    };
    let path_bad = match p {
        Some(Packet::Data(h, _)) => h.path >= 64,
        Some(Packet::Probe(h)) => h.path >= 64,
        // A DATA riding after ACKs: its own path.
        Some(Packet::Ack(_)) => wire::decode_ride(b)
            .ok()
            .and_then(|r| r.1)
            .is_some_and(|d| d[2] >= 64),
        _ => false,
    };
    e.push((
        "drop".into(),
        if path_bad { "bad_path" } else { "-" }.into(),
    ));
    common(&mut e, b);
    match p {
        Some(Packet::Data(h, payload)) => data_fields(&mut e, &h, payload, false),
        Some(Packet::Ack(h)) => {
            kv(&mut e, "cum", h.cum);
            kv(&mut e, "rate_hint", h.rate_hint);
            kv(&mut e, "ce", h.ce);
            kv(&mut e, "acked", h.acked);
            flag_bits(
                &mut e,
                "ack_flags",
                h.flags,
                &[
                    (wire::AF_RNR, "rnr"),
                    (wire::AF_NAK, "nak"),
                    (wire::AF_INV, "inv"),
                    (wire::AF_MSG, "msg"),
                    (wire::AF_CLOSED, "closed"),
                ],
            );
            kv(&mut e, "rnr_timer", h.rnr_timer & 0x1f);
            kv(&mut e, "rnr_psn", h.rnr_psn);
            kv(&mut e, "nak_stream", h.nak_stream);
            kv(&mut e, "nak_msn", h.nak_msn);
            let psns: Vec<String> = (0..256u32)
                .filter(|&i| h.sack.get(i))
                .map(|i| h.cum.wrapping_add(1 + i).to_string())
                .collect();
            kv(&mut e, "sack.count", psns.len());
            kv(&mut e, "sack.psn", psns.join(","));
            // A bundle's further ACKs (Documentation/transport.rst, "ACK bundles").
            let (acks, ride) = wire::decode_ride(b).expect("decoded above");
            let rest: Vec<AckHeader> = acks.skip(1).collect();
            if !rest.is_empty() {
                kv(&mut e, "bundle", rest.len() + 1);
                let list = |f: &dyn Fn(&AckHeader) -> String| {
                    rest.iter().map(f).collect::<Vec<_>>().join(",")
                };
                kv(&mut e, "bundle.path", list(&|a| a.path.to_string()));
                kv(&mut e, "bundle.echo", list(&|a| a.echo.to_string()));
                kv(&mut e, "bundle.cum", list(&|a| a.cum.to_string()));
                kv(&mut e, "bundle.ce", list(&|a| a.ce.to_string()));
                kv(&mut e, "bundle.acked", list(&|a| a.acked.to_string()));
                kv(&mut e, "bundle.flags", list(&|a| a.flags.to_string()));
                let count = |a: &AckHeader| (0..256u32).filter(|&i| a.sack.get(i)).count();
                kv(&mut e, "bundle.sack.count", list(&|a| count(a).to_string()));
            }
            // A DATA riding after the ACKs (Documentation/transport.rst, "ACKs riding
            // on DATA"): its common header as `ride.*`, then its own fields.
            if let Some(d) = ride {
                kv(&mut e, "ride", b.len() - d.len());
                let u32at = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
                kv(&mut e, "ride.type", d[1] & !wire::TYPE_SHARED);
                kv(&mut e, "ride.path", d[2]);
                kv(&mut e, "ride.inc", u16::from_be_bytes([d[3], d[4]]));
                kv(&mut e, "ride.dst_conn", u32at(4) & 0x00ff_ffff);
                kv(&mut e, "ride.psn", u32at(8));
                kv(&mut e, "ride.stamp", u32at(12));
                kv(&mut e, "ride.token", u32at(16));
                let (h, payload) = wire::decode_data_packet(d).expect("decoded above");
                data_fields(&mut e, &h, payload, true);
            }
        }
        Some(Packet::Probe(h)) => kv(&mut e, "floor", h.floor),
        None => {
            let (h, payload) = wire::decode_datagram(b).expect("decoded above");
            kv(&mut e, "src_qpn", h.src_qpn);
            kv(&mut e, "qkey", h.qkey);
            flag_bits(
                &mut e,
                "dgram_flags",
                h.flags,
                &[(wire::GF_IMM, "imm"), (wire::GF_SE, "se")],
            );
            kv(&mut e, "payload_len", h.payload_len);
            kv(&mut e, "imm", h.imm);
            payload_hex(&mut e, payload);
        }
    }
    e
}

const HA: [u8; 4] = [10, 0, 100, 1];
const HB: [u8; 4] = [10, 0, 100, 2];

/// Two model QPs with work posted on both sides: node 0 sends every verbs opcode
/// (SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ, both atomics; `copies` times),
/// node 1 SENDs back; the receives they consume are posted.
fn workload(k: u8, copies: u64) -> Pair {
    const A_MR: u32 = 0x10;
    const B_MR: u32 = 0x20;
    let seed = u64::from(k) * 7;
    let mut p = Pair::new(64, k.is_multiple_of(2), Link::default(), seed);
    let all =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let a = p.a.host.reg_mr(A_MR, 1 << 18, all);
    let b = p.b.host.reg_mr(B_MR, 1 << 18, all);
    let wqe = |op: WrOpcode, wr_id: u64, sges: Vec<Sge>, remote: u64| {
        let mut e = SqEntry::signaled(op, wr_id, sges).at(remote, B_MR);
        e.wqe.compare_add = 5;
        e.wqe.swap = 9;
        e
    };
    for c in 0..copies {
        let o = c * 0x8000;
        for r in 0..3 {
            p.b.host.post_recv(
                c * 8 + r,
                &[sge(
                    b,
                    0x30000 + (c * 3 + r) as usize * 0x2000,
                    0x2000,
                    B_MR,
                )],
            );
        }
        for r in 0..2 {
            p.a.host.post_recv(
                c * 8 + r,
                &[sge(
                    a,
                    0x30000 + (c * 2 + r) as usize * 0x2000,
                    0x2000,
                    A_MR,
                )],
            );
        }
        let ops = [
            (WrOpcode::Send, 3000, 0),
            (WrOpcode::SendWithImm, 2500, 0),
            (WrOpcode::RdmaWrite, 6000, b + o),
            (WrOpcode::RdmaWriteWithImm, 1500, b + o + 0x2000),
            (WrOpcode::RdmaRead, 5000, b + 0x20000),
            (WrOpcode::AtomicFetchAndAdd, 8, b + 0x2f000 + c * 16),
            (WrOpcode::AtomicCmpAndSwp, 8, b + 0x2f008 + c * 16),
        ];
        for (i, (op, len, remote)) in ops.into_iter().enumerate() {
            let local = sge(a, o as usize + i * 0x1000, len, A_MR);
            p.a.host
                .post_send(wqe(op, c * 16 + i as u64, vec![local], remote));
        }
        for (i, (op, len)) in [(WrOpcode::Send, 4000), (WrOpcode::SendWithImm, 100)]
            .into_iter()
            .enumerate()
        {
            let local = sge(b, o as usize + i * 0x1000, len, B_MR);
            p.b.host
                .post_send(wqe(op, c * 16 + i as u64, vec![local], 0));
        }
    }
    p
}

/// Exchange number `k` (its connection's number in the capture) between 10.0.k.1
/// and 10.0.k.2 of [`workload`]: every datagram either node sends, as captured at
/// the sender; `loss_ppm` of them are lost after capture. Returns (frames, lost,
/// retransmissions, completions).
fn exchange(frames: &mut Vec<Frame>, k: u8, loss_ppm: u32, start_ns: u64) -> [u64; 4] {
    let (a, b) = ([10, 0, k, 1], [10, 0, k, 2]);
    let mut p = workload(k, 3);
    p.now = start_ns;
    let mut rng = Rng(u64::from(k) ^ 0x5eed_0fca_9700);
    let first = frames.len();
    let mut lost = 0u64;
    let mut idle = 0u32;
    p.doorbell(0);
    p.doorbell(1);
    // Until quiet (a bound on datagrams all the same).
    while idle < 400 && frames.len() - first < 5000 {
        let wire = p.take_wire();
        if wire.is_empty() {
            idle += 1;
            p.tick(100_000);
            continue;
        }
        idle = 0;
        let mut deliver = Vec::new();
        for (to, bytes) in wire {
            let from = 1 - to;
            let (src, dst) = if from == 0 { (a, b) } else { (b, a) };
            let ecn = match wire::peek_type(&bytes) {
                Some(wire::PacketType::Data | wire::PacketType::Probe) => 2,
                _ => 0,
            };
            let mut e = expect(&bytes);
            let ep =
                |ip: [u8; 4], q: u32| format!("{}.{}.{}.{}/0x{q:06x}", ip[0], ip[1], ip[2], ip[3]);
            let ip = |ip: [u8; 4]| format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]);
            e.push((
                "metaroce.conn.key".into(),
                format!("{} <-> {}", ep(a, 1), ep(b, 2)),
            ));
            e.push(("metaroce.conn".into(), k.to_string()));
            // The data direction: an ACK travels against it.
            let is_ack = wire::peek_type(&bytes) == Some(wire::PacketType::Ack);
            let (ds, dd) = if is_ack { (dst, src) } else { (src, dst) };
            let token = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
            let dir = format!("{} -> {} token 0x{token:08x}", ip(ds), ip(dd));
            e.push((
                "metaroce.path.key".into(),
                format!("{dir} path {}", bytes[2]),
            ));
            e.push(("metaroce.dir".into(), dir));
            frames.push(Frame {
                at_ns: p.now,
                src,
                dst,
                sport: 49152 + 64 * u16::from(from) + u16::from(bytes[2]),
                dport: PORT,
                ecn,
                payload: bytes.clone(),
                expect: e,
            });
            if rng.ppm(loss_ppm) {
                lost += 1;
                continue;
            }
            deliver.push((to, bytes));
        }
        for i in 1..deliver.len() {
            if rng.ppm(100_000) {
                deliver.swap(i - 1, i);
            }
        }
        for (to, bytes) in deliver {
            p.inject(to, &bytes);
            p.tick(2_000);
        }
    }
    assert!(
        p.a.host.mode == QpMode::Rts && p.b.host.mode == QpMode::Rts,
        "exchange {k} ended in {:?}/{:?}",
        p.a.host.mode,
        p.b.host.mode
    );
    let done = [&p.a, &p.b]
        .iter()
        .map(|n| (n.host.send_cq.len() + n.host.recv_cq.len()) as u64)
        .sum();
    let retx = u64::from(p.a.conn.stats().retx) + u64::from(p.b.conn.stats().retx);
    [(frames.len() - first) as u64, lost, retx, done]
}

fn data(op: Op, flags: u8, payload: &[u8]) -> Vec<u8> {
    let h = DataHeader {
        path: 3,
        inc: 0x5a17,
        dst_conn: 0x65_4321,
        psn: 0xffff_fffe,
        stamp: 0x1234_5678,
        token: 0x270e_e837,
        stream: 1,
        op: op as u8,
        flags,
        payload_len: payload.len() as u16,
        tag: 7,
        floor: 0xffff_fff0,
        ssn: 0xf8ea_ba23,
        msn: 42,
        offset: 0,
        msg_len: payload.len() as u32,
        reth: wire::Reth {
            va: 0x7f00_dead_beef_0000,
            rkey: 0xabcd_0102,
            len: 4096,
        },
        imm: 0xcafe_f00d,
    };
    let mut b = vec![0u8; h.header_len() + payload.len()];
    let n = h.encode(&mut b).expect("room");
    b[n..].copy_from_slice(payload);
    b
}

fn ack(flags: u8, cum: u32, sack_bits: &[u32]) -> Vec<u8> {
    let mut sack = Sack::EMPTY;
    for &i in sack_bits {
        sack.set(i);
    }
    let h = AckHeader {
        path: 3,
        inc: 0x5a17,
        dst_conn: 0x12_3456,
        echo: 0x1234_5678,
        token: 0x270e_e837,
        cum,
        rate_hint: 1_187_500,
        ce: 2,
        acked: 9,
        flags,
        rnr_timer: if flags & wire::AF_RNR != 0 { 12 } else { 0 },
        rnr_psn: if flags != 0 { cum } else { 0 },
        nak_stream: if flags & wire::AF_MSG != 0 { 1 } else { 0 },
        nak_msn: if flags & wire::AF_MSG != 0 { 7 } else { 0 },
        sack,
    };
    let mut b = vec![0u8; wire::ACK_LEN];
    h.encode(&mut b).expect("room");
    b
}

fn probe(path: u8) -> Vec<u8> {
    let h = ProbeHeader {
        path,
        inc: 0x5a17,
        dst_conn: 0x65_4321,
        psn: 100,
        stamp: 0x0bad_cafe,
        token: 0x270e_e837,
        floor: 90,
    };
    let mut b = vec![0u8; wire::PROBE_LEN];
    h.encode(&mut b).expect("room");
    b
}

fn datagram(flags: u8, payload: &[u8]) -> Vec<u8> {
    let h = DatagramHeader {
        dst_qpn: 0x65_4321,
        src_qpn: 0x12_3456,
        qkey: 0x8001_0000,
        flags,
        payload_len: payload.len() as u16,
        imm: if flags & wire::GF_IMM != 0 {
            0x0102_0304
        } else {
            0
        },
        stamp: 77,
    };
    let mut b = vec![0u8; wire::DATAGRAM_LEN + payload.len()];
    h.encode(&mut b).expect("room");
    b[wire::DATAGRAM_LEN..].copy_from_slice(payload);
    b
}

/// Well-formed hand-made datagrams: every op, flag and type.
fn handmade() -> Vec<Vec<u8>> {
    use wire::{DF_ACKREQ, DF_FIRST, DF_IMM, DF_LAST, DF_RETH, DF_RETX, DF_SE};
    let fl = DF_FIRST | DF_LAST;
    let p8 = 0x0102_0304_0506_0708u64.to_be_bytes();
    let mut cs = [0u8; 16];
    cs[..8].copy_from_slice(&0x1111_2222_3333_4444u64.to_be_bytes());
    cs[8..].copy_from_slice(&0x5555_6666_7777_8888u64.to_be_bytes());
    let mut out = vec![
        data(Op::Send, fl | DF_SE, b"hello, metaroce"),
        data(Op::SendImm, fl | DF_IMM, b"imm"),
        data(Op::Write, fl | DF_RETH | DF_RETX, b"written"),
        data(Op::WriteImm, fl | DF_RETH | DF_IMM | DF_ACKREQ, b"w+imm"),
        data(Op::ReadReq, fl | DF_RETH, b""),
        data(Op::ReadResp, fl, b"read back"),
        data(Op::AtomicCmpSwap, fl | DF_RETH, &cs),
        data(Op::AtomicFetchAdd, fl | DF_RETH, &p8),
        data(Op::AtomicResp, fl, &p8),
        data(Op::SendInv, fl | DF_IMM, b"inv"),
        data(Op::AtomicWrite, fl | DF_RETH, &p8),
        ack(0, 1000, &[]),
        ack(0, 1000, &[0, 1, 2, 4, 63, 64, 200, 255]),
        ack(0, 0xffff_fff8, &[0, 5, 6, 7, 8, 9, 100]),
        ack(wire::AF_RNR, 55, &[3]),
        ack(wire::AF_NAK, 56, &[]),
        ack(wire::AF_NAK | wire::AF_INV, 57, &[]),
        ack(wire::AF_NAK | wire::AF_INV | wire::AF_MSG, 58, &[]),
        ack(wire::AF_NAK | wire::AF_MSG | wire::AF_CLOSED, 59, &[]),
        probe(0),
        probe(63),
        datagram(0, b""),
        datagram(wire::GF_IMM | wire::GF_SE, b"a UD message"),
    ];
    // A shared connection's DATA, ACK and PROBE: the same, with the SHARED bit.
    for mut b in [
        data(Op::Write, fl | DF_RETH, b"shared"),
        ack(0, 1000, &[0, 2]),
        probe(5),
    ] {
        wire::set_shared(&mut b, true).expect("a type byte");
        out.push(b);
    }
    // ACK bundles of 2 and of 16 (the most), paths and bodies differing.
    for n in [2usize, 16] {
        let mut b = Vec::new();
        for k in 0..n {
            let mut a = ack(
                if k == 1 { wire::AF_RNR } else { 0 },
                2000 + k as u32,
                &[k as u32],
            );
            a[2] = k as u8;
            a[12..16].copy_from_slice(&(77 + k as u32).to_be_bytes());
            b.extend_from_slice(&a);
        }
        out.push(b);
    }
    // A middle packet of a multi-packet message.
    let mut mid = data(Op::Send, 0, &[0x5a; 64]);
    mid[40..44].copy_from_slice(&64u32.to_be_bytes());
    mid[44..48].copy_from_slice(&256u32.to_be_bytes());
    out.push(mid);
    // The last packet of a message of three.
    let mut last = data(Op::Send, DF_LAST, &[0xa5; 10]);
    last[40..44].copy_from_slice(&2048u32.to_be_bytes());
    last[44..48].copy_from_slice(&2058u32.to_be_bytes());
    out.push(last);
    // DATA riding after ACKs (Documentation/transport.rst, "ACKs riding on DATA"): a
    // READ response after one ACK, a WRITE after a bundle of three.
    let mut ride = ack(0, 1000, &[1]);
    ride.extend_from_slice(&data(Op::ReadResp, fl, b"read back"));
    out.push(ride);
    let mut ride = Vec::new();
    for k in 0..3u8 {
        let mut a = ack(0, 3000 + u32::from(k), &[]);
        a[2] = k;
        ride.extend_from_slice(&a);
    }
    ride.extend_from_slice(&data(Op::Write, fl | DF_RETH, b"written after three ACKs"));
    out.push(ride);
    out
}

/// Malformed variants: (base, mutation) pairs, one per check of the decoder.
fn malformed() -> Vec<Vec<u8>> {
    use wire::{DF_FIRST, DF_IMM, DF_LAST, DF_RETH, DF_SE};
    let fl = DF_FIRST | DF_LAST;
    let send = data(Op::Send, fl, b"0123456789");
    let write = data(Op::Write, fl | DF_RETH, b"0123456789");
    let ackp = ack(0, 1000, &[1]);
    let probep = probe(1);
    let dg = datagram(wire::GF_IMM, b"xyz");
    let set = |b: &Vec<u8>, at: usize, v: u8| {
        let mut b = b.clone();
        b[at] = v;
        b
    };
    let cut = |b: &Vec<u8>, n: usize| b[..n].to_vec();
    // `n` copies of ACK `b` and `tail` bytes of another.
    let bundle = |b: &Vec<u8>, n: usize, tail: usize| {
        let mut v = b.repeat(n);
        v.extend_from_slice(&b[..tail]);
        v
    };
    let grow = |b: &Vec<u8>| {
        let mut b = b.clone();
        b.push(0);
        b
    };
    let mut past = send.clone();
    past[44..48].copy_from_slice(&5u32.to_be_bytes()); // msg_len < payload
    let mut overflow = send.clone();
    overflow[40..44].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut empty = data(Op::Send, fl, b"");
    empty[44..48].copy_from_slice(&1u32.to_be_bytes());
    empty[23] = DF_FIRST;
    let mut se_mid = send.clone();
    se_mid[44..48].copy_from_slice(&20u32.to_be_bytes());
    se_mid[23] = DF_FIRST | DF_SE;
    vec![
        cut(&send, 10),                 // truncated: no common header
        cut(&send, 30),                 // truncated DATA header
        cut(&write, 52),                // truncated RETH
        cut(&ackp, 71),                 // truncated ACK
        cut(&probep, 23),               // truncated PROBE
        cut(&dg, 30),                   // truncated DATAGRAM
        set(&send, 0, 4),               // bad_version (version 4)
        set(&send, 0, 7),               // bad_version
        set(&send, 1, 0),               // unknown_type
        set(&send, 1, 9),               // unknown_type
        set(&send, 1, 0x85),            // unknown_type: type 5, SHARED bit (0x80) set
        set(&send, 22, 11),             // unknown_op
        set(&set(&send, 3, 0), 4, 0),   // bad_flags: DATA incarnation 0
        set(&set(&ackp, 3, 0), 4, 0),   // bad_flags: ACK incarnation 0
        set(&set(&probep, 3, 0), 4, 0), // bad_flags: PROBE incarnation 0
        set(&dg, 4, 1),                 // bad_flags: DATAGRAM incarnation
        set(&send, 23, fl | 0x80),      // bad_flags: bit 0x80
        set(&send, 23, DF_LAST),        // bad_flags: FIRST missing
        set(&send, 23, DF_FIRST),       // bad_flags: LAST missing
        set(&data(Op::Send, fl, b"0123456789abcdef"), 23, fl | DF_RETH), // RETH on SEND
        set(&send, 22, Op::SendImm as u8), // bad_flags: SEND_IMM without IMM
        se_mid,                         // bad_flags: SE not on LAST
        set(&ackp, 32, 0x10),           // bad_flags: ACK flag bits
        set(&ackp, 32, wire::AF_INV),   // bad_flags: INV without NAK
        set(&ackp, 32, wire::AF_MSG),   // bad_flags: MSG without NAK
        set(&ackp, 32, wire::AF_NAK | wire::AF_CLOSED), // bad_flags: CLOSED without MSG
        set(
            &ackp,
            32,
            wire::AF_NAK | wire::AF_MSG | wire::AF_INV | wire::AF_CLOSED,
        ), // bad_flags: CLOSED with INV
        set(&ackp, 35, 1),              // bad_flags: NAK stream without MSG
        set(&ackp, 11, 1),              // bad_flags: ACK PSN without MSG
        set(&dg, 2, 1),                 // bad_flags: DATAGRAM path
        set(&dg, 11, 1),                // bad_flags: DATAGRAM PSN
        set(&dg, 19, 1),                // bad_flags: DATAGRAM token
        set(&dg, 28, DF_IMM | 0x01),    // bad_flags: DATAGRAM flags
        set(&dg, 29, 1),                // bad_flags: DATAGRAM reserved
        set(&dg, 1, 0x84),              // bad_flags: DATAGRAM with the SHARED bit (0x80)
        set(&send, 25, 11),             // length_mismatch: payload_len
        grow(&send),                    // length_mismatch: extra byte
        grow(&ackp),                    // truncated: a torn second ACK
        bundle(&ackp, 2, 10),           // truncated: a bundle's torn third ACK
        bundle(&ackp, 17, 0),           // length_mismatch: 17 ACKs
        set(&bundle(&ackp, 3, 0), 2 * wire::ACK_LEN + 19, 9), // wrong_connection: token
        set(&bundle(&ackp, 2, 0), wire::ACK_LEN + 7, 9), // wrong_connection: dst_conn
        set(&bundle(&ackp, 2, 0), wire::ACK_LEN + 32, 0x80), // bad_flags: a bundled ACK's flags
        set(&bundle(&ackp, 17, 0), 32, 0x80), // bad_flags: the first ACK before the length
        set(&bundle(&ackp, 2, 10), 32, 0x80), // bad_flags: the first ACK before a torn tail
        set(&bundle(&ackp, 2, 30), 2 * wire::ACK_LEN, 0), // bad_version: a torn tail's
        set(
            &set(&bundle(&ackp, 2, 10), wire::ACK_LEN + 7, 9),
            2 * wire::ACK_LEN,
            0,
        ), // wrong_connection before a torn tail
        set(&set(&bundle(&ackp, 2, 0), 32, 0x80), wire::ACK_LEN + 19, 9), // bad_flags before wrong_connection
        grow(&probep),                                                    // length_mismatch: PROBE
        set(&dg, 31, 4),      // length_mismatch: DATAGRAM
        past,                 // bad_offset: past msg_len
        overflow,             // bad_offset: overflow
        empty,                // bad_offset: empty packet
        set(&send, 2, 64),    // bad_path: DATA
        set(&probep, 2, 200), // bad_path: PROBE
        // DATA riding after ACKs (H18): its reserved flag, one byte short, the other
        // SHARED bit, after 17 ACKs, its version, a PROBE where it would ride.
        [ackp.clone(), set(&send, 23, fl | 0x80)].concat(), // bad_flags
        cut(
            &[ackp.clone(), send.clone()].concat(),
            wire::ACK_LEN + send.len() - 1,
        ), // length_mismatch
        [ackp.clone(), set(&send, 1, 0x81)].concat(),       // wrong_connection
        [ackp.clone(), set(&send, 7, 0x99)].concat(),       // wrong_connection: another dst_conn
        [bundle(&ackp, 17, 0), send.clone()].concat(),      // length_mismatch
        [ackp.clone(), set(&send, 0, 7)].concat(),          // bad_version
        [ackp.clone(), probep.clone()].concat(),            // unknown_type: a PROBE does not ride
        [ackp.clone(), set(&send, 2, 64)].concat(),         // bad_path: the riding DATA's
    ]
}

fn write_pcap(path: &str, frames: &[Frame]) -> std::io::Result<()> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    for (i, f) in frames.iter().enumerate() {
        let b = frame_bytes(f, i as u16);
        let t = 1_764_600_000_000_000_000u64 + f.at_ns;
        out.extend_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((t % 1_000_000_000 / 1000) as u32).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&b);
    }
    std::fs::write(path, out)
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(pcap), Some(exp)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: wire_pcap OUT.pcap OUT.expect");
        std::process::exit(2);
    };
    let mut frames = Vec::new();
    let mut sums = [0u64; 4];
    for (k, loss_ppm) in [(1, 50_000), (2, 100_000), (3, 150_000), (4, 0)] {
        let start = frames
            .last()
            .map_or(1_000_000, |f: &Frame| f.at_ns + 1_000_000);
        let r = exchange(&mut frames, k, loss_ppm, start);
        for (s, x) in sums.iter_mut().zip(r) {
            *s += x;
        }
    }
    let [exchanged, lost, retx, completions] = sums;
    let mut t = frames.last().map_or(0, |f| f.at_ns);
    let mut add = |frames: &mut Vec<Frame>, b: Vec<u8>, dport: u16| {
        t += 1000;
        // Hand-made DATA/PROBE/DATAGRAM go HA -> HB, ACKs back.
        let (src, dst) = if wire::peek_type(&b) == Some(wire::PacketType::Ack) {
            (HB, HA)
        } else {
            (HA, HB)
        };
        let e = expect(&b);
        frames.push(Frame {
            at_ns: t,
            src,
            dst,
            sport: 50000,
            dport,
            ecn: 0,
            payload: b,
            expect: e,
        });
    };
    let good = handmade();
    let bad = malformed();
    let (n_good, n_bad) = (good.len(), bad.len());
    for b in good {
        add(&mut frames, b, PORT);
    }
    for b in bad {
        // Every variant must be one the receiver drops.
        assert!(
            expect(&b).iter().any(|(k, v)| k == "drop" && v != "-"),
            "a malformed variant decodes: {b:02x?}"
        );
        add(&mut frames, b, PORT);
    }
    // The heuristic dissector: a DATA to port 5000 and a shared connection's to 5001;
    // a look-alike to 39999 and a DATAGRAM with the SHARED bit to 39998 it must refuse.
    add(&mut frames, data(Op::Write, 0x07, b"heuristic"), 5000);
    let mut shared = data(Op::Write, 0x07, b"shared heuristic");
    wire::set_shared(&mut shared, true).expect("a type byte");
    add(&mut frames, shared, 5001);
    let mut shared_dg = datagram(0, b"xyz");
    wire::set_shared(&mut shared_dg, true).expect("a type byte");
    for (dport, payload) in [
        // Version 3, type DATA, but 30 bytes: no MetaRoCE datagram.
        (39999, b"\x03\x01\x00\x01 this is not metaroce ".to_vec()),
        // Well-formed but for the SHARED bit, which no DATAGRAM has.
        (39998, shared_dg),
    ] {
        t += 1000;
        frames.push(Frame {
            at_ns: t,
            src: HA,
            dst: HB,
            sport: 50001,
            dport,
            ecn: 0,
            payload,
            expect: vec![("proto".into(), "none".into())],
        });
    }

    write_pcap(pcap, &frames)?;
    let mut w = std::io::BufWriter::new(std::fs::File::create(exp)?);
    for (i, f) in frames.iter().enumerate() {
        write!(w, "frame={}", i + 1)?;
        for (k, v) in &f.expect {
            write!(w, "\t{k}={v}")?;
        }
        writeln!(w)?;
    }
    w.flush()?;
    let bad_seen = frames
        .iter()
        .filter(|f| f.expect.iter().any(|(k, v)| k == "drop" && v != "-"))
        .count();
    eprintln!(
        "wire_pcap: {} frames: exchange {exchanged} (lost {lost}, retransmitted {retx}, \
         completions {completions}), hand-made {n_good}, malformed {n_bad} ({bad_seen} with a drop \
         reason), heuristic 4",
        frames.len()
    );
    Ok(())
}
