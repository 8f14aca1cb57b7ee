# SPDX-License-Identifier: GPL-2.0
"""Connection set-up, every opcode in both directions, segmentation and
spraying (Documentation/transport.rst: Connection set-up, Packet formats,
Sender operation, Exactly-once and ordering for verbs)."""

from .. import wire
from ..agent import WC_SUCCESS, WC_OPC
from ..peer import ECT0
from ..suite import scenario


def pattern(n, seed=1):
    return bytes((seed * 31 + i * 7 + (i >> 8)) & 0xFF for i in range(n))


@scenario(
    "set-up: the IUT's first SEND is addressed, keyed and sequenced as derived",
    ["C1", "C2", "C3", "C5", "C6", "C12", "C20", "C22", "DATA, PROBE and DATAGRAM datagrams MUST be sent ECT(0)"],
)
def setup(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(4096)
    data = pattern(300)
    ctx.agent.put(mr, 0, data)
    ctx.post(qp, "send", mr, 0, 300, wr=1)
    ctx.require(peer.wait_complete(0, 1, 15), "the IUT's 300-byte SEND arrived whole at the peer")
    rec, p = peer.data_rx[0]
    ctx.check(
        p.dst_conn == peer.my_qpn,
        "C1: dst_conn is the peer's QPN (the IUT's dest_qp_num)",
        f"{p.dst_conn:#x} != {peer.my_qpn:#x}",
    )
    ctx.check(rec.src == ctx.net.iut_ip, f"C2: sent from the address of the IUT's GID ({rec.src})")
    ctx.check(rec.dport == ctx.net.port, f"C3: to UDP port {ctx.net.port}")
    ctx.check(
        p.token == peer.rxd.token,
        "C5: token is the key of (sgid, dgid, IUT QPN, peer QPN, IUT sq_psn)",
        f"{p.token:#x} != {peer.rxd.token:#x}",
    )
    if ctx.shared:
        ctx.check(
            p.floor == p.psn,
            "shared: the first packet's floor is its PSN (the receiver syncs the path " "from it)",
            f"psn {p.psn:#x} floor {p.floor:#x}",
        )
        ctx.check(p.shared, "C22: the SHARED bit set")
    else:
        ctx.check(
            p.psn == peer.rxd.first_psn(p.path),
            f"C5: path {p.path}'s first PSN derived from the key",
            f"{p.psn:#x} != {peer.rxd.first_psn(p.path):#x}",
        )
        ctx.check(not p.shared, "C22: the SHARED bit clear")
    ctx.check(
        p.ssn == peer.rxd.first_ssn(0) and p.msn == 0,
        "C5: stream 0's first SSN derived, MSN 0",
        f"ssn {p.ssn:#x} msn {p.msn}",
    )
    ctx.check(p.inc != 0, f"C6: incarnation not 0 ({p.inc:#x})")
    ctx.check(p.tag == 0, "C12: the first receive-consuming message carries tag 0")
    ctx.check(rec.tos == ECT0, f"C20: DATA sent ECT(0) (ECN field {rec.tos})")
    m = peer.completed[0][0]
    ctx.check(m.op == wire.SEND and bytes(m.buf) == data, "the SEND's 300 bytes as posted")
    wcs = ctx.wait_wc(qp, peer)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS and wcs[0]["opcode"] == WC_OPC["send"],
        "the IUT completes the SEND with success once acknowledged",
        wcs,
    )


def _ops_iut_to_peer(ctx, atomic_write):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    data = pattern(5000, 2)
    ctx.agent.put(mr, 0, data)
    peer.mem[0:4096] = pattern(4096, 9)
    peer.mem[8192:8200] = (1000).to_bytes(8, "little")
    peer.mem[8200:8208] = (77).to_bytes(8, "little")
    va, rkey = peer.mem_va, peer.mem_rkey
    # (op, agent args, wire op, expected tag)
    ops = [
        ("send", dict(length=100), wire.SEND, 0),
        ("send_imm", dict(length=2000, imm=0x11223344), wire.SEND_IMM, 1),
        ("write", dict(length=3000, raddr=va + 16384, rkey=rkey), wire.WRITE, 0),
        ("write_imm", dict(length=10, raddr=va + 20480, rkey=rkey, imm=0xA5A5), wire.WRITE_IMM, 2),
        ("read", dict(length=2500, raddr=va, rkey=rkey, off=32768), wire.READ_REQ, 0),
        ("faa", dict(length=8, raddr=va + 8192, rkey=rkey, add=5, off=40960), wire.ATOMIC_FA, 1),
        (
            "cas",
            dict(length=8, raddr=va + 8200, rkey=rkey, compare=77, swap=0x0102030405060708, off=40968),
            wire.ATOMIC_CS,
            2,
        ),
        ("send", dict(length=0), wire.SEND, 3),
        ("send_inv", dict(length=40, inv=0x1234AB), wire.SEND_INV, 4),
    ]
    if atomic_write:
        ctx.agent.put(mr, 41000, (0x1122334455667788).to_bytes(8, "little"))
        ops.append(("atomic_write", dict(length=8, raddr=va + 8208, rkey=rkey, off=41000), wire.ATOMIC_WRITE, 0))
    for i, (op, kw, _, _) in enumerate(ops):
        kw = dict(kw)
        length, off = kw.pop("length"), kw.pop("off", 0)
        ctx.post(qp, op, mr, off, length, wr=i + 1, **kw)
    ctx.require(peer.wait_complete(0, len(ops), 30), f"all {len(ops)} requests complete at the peer, in MSN order")
    wcs = ctx.wait_wc(qp, peer, len(ops), 20)
    ctx.check(
        len(wcs) == len(ops) and all(w["status"] == WC_SUCCESS for w in wcs),
        f"the IUT completes all {len(ops)} work requests with success",
        wcs,
    )
    ctx.check([w["wr"] for w in wcs] == list(range(1, len(ops) + 1)), "in work-request order")
    for (op, kw, wop, tag), m in zip(ops, peer.completed[0]):
        pk = [p for _, p in peer.data_rx if p.stream == 0 and p.msn == m.msn]
        ctx.check(m.op == wop, f"{op}: on the wire as {wire.OP_NAMES[wop]} on stream 0 (C10)", wire.OP_NAMES[m.op])
        ctx.check(all(p.tag == tag for p in pk), f"{op}: tag {tag} (C12)", [p.tag for p in pk])
        if wop in wire.RETH_OPS:
            ctx.check(
                all(p.va == kw["raddr"] and p.rkey == rkey for p in pk), f"{op}: RETH va/rkey in every packet as posted"
            )
            want = 8 if op in ("faa", "cas", "atomic_write") else kw["length"]
            ctx.check(all(p.dma_len == want for p in pk), f"{op}: RETH dma_len {want}", [p.dma_len for p in pk])
        if wop in wire.IMM_OPS:
            want = kw.get("imm", kw.get("inv"))
            ctx.check(
                m.imm == want, f"{op}: immediate data (SEND_INV: the rkey) {want:#x} on the last packet", hex(m.imm)
            )
    ms = peer.completed[0]
    ctx.check(bytes(ms[0].buf) == data[:100] and bytes(ms[1].buf) == data[:2000], "SEND / SEND_IMM bytes")
    ctx.check(bytes(peer.mem[16384 : 16384 + 3000]) == data[:3000], "WRITE placed at RETH va")
    ctx.check(
        bytes(ms[5].buf) == (5).to_bytes(8, "big"), "C14: FETCH_ADD's addend big-endian on the wire", ms[5].buf.hex()
    )
    ctx.check(
        bytes(ms[6].buf) == (0x0102030405060708).to_bytes(8, "big") + (77).to_bytes(8, "big"),
        "C14: COMPARE_SWAP's operands swap then compare, big-endian",
        ms[6].buf.hex(),
    )
    ctx.check(ms[7].msg_len == 0 and len(ms[7].packets) == 1, "a zero-length SEND is one packet with no payload")
    # Responses: the peer answered READ (k 0), FETCH_ADD (k 1), COMPARE_SWAP (k 2) on stream 1 (C11).
    got = ctx.agent.get(mr, 32768, 2500)
    ctx.check(got == bytes(pattern(4096, 9)[:2500]), "READ: the peer's READ_RESP (stream 1, MSN 0) placed")
    fa = int.from_bytes(ctx.agent.get(mr, 40960, 8), "little")
    cs = int.from_bytes(ctx.agent.get(mr, 40968, 8), "little")
    ctx.check(
        fa == 1000 and cs == 77,
        "C14: ATOMIC_RESP values (big-endian on the wire) stored as native integers",
        f"faa {fa} cas {cs}",
    )
    if atomic_write:
        ctx.check(
            bytes(peer.mem[8208:8216]) == (0x1122334455667788).to_bytes(8, "little"),
            "ATOMIC_WRITE: the 8 bytes stored as they lie in the IUT's buffer",
        )


@scenario(
    "every request opcode from the IUT: SEND, SEND_IMM, WRITE, WRITE_IMM, READ, FETCH_ADD, COMPARE_SWAP, "
    "zero-length SEND, SEND_INV; the peer answers READ and atomics on stream 1",
    ["C10", "C11", "C12", "C13", "C14"],
)
def ops_from_iut(ctx):
    _ops_iut_to_peer(ctx, False)


@scenario("ATOMIC_WRITE from the IUT", ["C10", "C14"], needs=("atomic_write",))
def atomic_write_from_iut(ctx):
    _ops_iut_to_peer(ctx, True)


def _check_ack(ctx, peer, a, p, what):
    ok = a.token == peer.txd.token and a.inc == peer.inc and a.path == p.path and a.dst_conn == peer.my_qpn
    ctx.check(
        ok, f"{what}: the ACK names the data's path, token, incarnation and the peer's QPN (C1, C5, C6, C9)", str(a)
    )


@scenario(
    "every request opcode from the peer: the IUT acknowledges each packet at once, places, responds",
    ["C9", "C10", "C11", "C13", "C14", "C19", "C20"],
)
def ops_from_peer(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    ctx.agent.put(mr, 4096, pattern(3000, 5))
    ctx.agent.put(mr, 8192, (40).to_bytes(8, "little") + (9).to_bytes(8, "little"))
    for i in range(3):
        ctx.recv(qp, mr, 32768 + i * 4096, 4096, wr=100 + i)
    va, rkey = int(mr["addr"]), mr["rkey"]
    # SEND 2500 (3 packets), WRITE 1500 at +0, WRITE_IMM 4, READ 3000 of +4096, FETCH_ADD 2 at +8192,
    # COMPARE_SWAP(9 -> 0x55) at +8200, SEND_IMM 0.
    s = peer.send_msg(wire.SEND, payload=pattern(2500, 3))
    ctx.require(peer.wait_acked(s, 10), "SEND of 3 packets acknowledged", str(peer.acks[-1:]))
    acks = [a for _, a in peer.acks]
    for p in s.sent:
        a = next((a for a in acks if a.path == p.path and wire.seq_lt(p.psn, a.cum)), None)
        ctx.check(
            a is not None and a.stamp == p.stamp and a.acked >= 1,
            f"C19: path {p.path} psn {p.psn:#x} acknowledged at once, echoing its stamp",
            str(a),
        )
        if a:
            _check_ack(ctx, peer, a, p, f"path {p.path}")
    recs = [r for r, _ in peer.acks]
    ctx.check(all(r.tos == 0 for r in recs), "C20: ACKs sent Not-ECT", [r.tos for r in recs])
    w = peer.send_msg(wire.WRITE, payload=pattern(1500, 4), raddr=va, rkey=rkey)
    wi = peer.send_msg(wire.WRITE_IMM, payload=b"abcd", raddr=va + 2048, rkey=rkey, imm=0xBEEF)
    rd = peer.send_msg(wire.READ_REQ, payload=b"", raddr=va + 4096, rkey=rkey, dma_len=3000)
    fa = peer.send_msg(wire.ATOMIC_FA, payload=(2).to_bytes(8, "big"), raddr=va + 8192, rkey=rkey)
    cs = peer.send_msg(
        wire.ATOMIC_CS, payload=(0x55).to_bytes(8, "big") + (9).to_bytes(8, "big"), raddr=va + 8200, rkey=rkey
    )
    si = peer.send_msg(wire.SEND_IMM, payload=b"", imm=7)
    aw = []
    if "atomic_write" not in ctx.args.without:
        aw = [peer.send_msg(wire.ATOMIC_WRITE, payload=bytes(range(1, 9)), raddr=va + 8208, rkey=rkey)]
    ctx.require(
        peer.wait_acked([w, wi, rd, fa, cs, si] + aw, 10),
        "WRITE, WRITE_IMM, READ, FETCH_ADD, COMPARE_SWAP, " "zero-length SEND_IMM acknowledged",
    )
    ctx.require(peer.wait_complete(1, 3, 10), "three responses complete on the IUT's stream 1")
    r0, r1, r2 = peer.completed[1][:3]
    ctx.check(
        (r0.op, r0.msn, r0.tag) == (wire.READ_RESP, 0, 0) and bytes(r0.buf) == pattern(3000, 5),
        "C11/C13: response 0 is the READ's READ_RESP, tag 0 (served), 3000 bytes as in the IUT's memory",
        f"{wire.OP_NAMES[r0.op]} msn {r0.msn} tag {r0.tag} len {len(r0.buf)}",
    )
    rpk = {p.offset: p for _, p in peer.data_rx if p.stream == 1 and p.msn == 0}  # resent copies once
    cut = cut_of(rpk, 3000)
    ctx.check(
        cut and wire.cut_ok(cut, peer.mtu) or cut == 3000,
        "C7: the READ_RESP cut at one size, the path MTU or the IUT's link payload above it, at offsets k x that",
        {o: len(p.payload) for o, p in rpk.items()},
    )
    ctx.should(
        ctx.iut_cut(peer.mtu) in (None, cut) or cut == 3000,
        f"kernel (C7): cut at {ctx.iut_cut(peer.mtu)}, the IUT's link payload where the path MTU is its active MTU",
        cut,
    )
    ctx.check(
        (r1.op, r1.msn) == (wire.ATOMIC_RESP, 1) and bytes(r1.buf) == (40).to_bytes(8, "big"),
        "C11/C14: response 1 is FETCH_ADD's original value 40, big-endian",
        r1.buf.hex(),
    )
    ctx.check(
        (r2.op, r2.msn) == (wire.ATOMIC_RESP, 2) and bytes(r2.buf) == (9).to_bytes(8, "big"),
        "C11/C14: response 2 is COMPARE_SWAP's original value 9",
        r2.buf.hex(),
    )
    tags = {p.tag for _, p in peer.data_rx if p.stream == 1}
    ctx.check(tags == {0}, "C13: every response packet's tag 0 (served; other values reserved)", tags)
    wcs = ctx.wait_wc(qp, peer, 3, 10)
    ctx.check(
        [(w["status"], w["byte_len"]) for w in wcs] == [(0, 2500), (0, 4), (0, 0)],
        "the IUT's receives: SEND 2500 B, WRITE_IMM 4 B, SEND_IMM 0 B, in order",
        wcs,
    )
    if len(wcs) == 3:
        ctx.check(wcs[1]["imm"] == 0xBEEF and wcs[2]["imm"] == 7, "immediate data delivered", wcs)
    ctx.check(ctx.agent.get(mr, 32768, 2500) == pattern(2500, 3), "the SEND's bytes in the receive buffer")
    ctx.check(ctx.agent.get(mr, 0, 1500) == pattern(1500, 4), "the WRITE's bytes at its address")
    m = ctx.agent.get(mr, 8192, 16)
    ctx.check(
        int.from_bytes(m[:8], "little") == 42 and int.from_bytes(m[8:], "little") == 0x55,
        "C14: the IUT's targets updated as native integers (40 + 2, 9 -> 0x55)",
        m.hex(),
    )
    if aw:
        ctx.check(
            ctx.agent.get(mr, 8208, 8) == bytes(range(1, 9)),
            "C14: ATOMIC_WRITE's 8 bytes stored as they arrived (no response)",
            ctx.agent.get(mr, 8208, 8).hex(),
        )


def cut_of(pk, length):
    """The one size a message of length bytes, its packets by offset in pk, was cut at
    (C7): every packet but the last that size, at offsets k x it, the last the rest;
    0 if it was not cut so (or packets are missing)."""
    first = pk.get(0)
    if first is None:
        return 0
    cut = len(first.payload)
    if cut == 0 or sorted(pk) != list(range(0, length, cut)) or not length:
        return 0
    ok = all(len(p.payload) == min(cut, length - o) for o, p in pk.items())
    return cut if ok else 0


@scenario(
    "segmentation at the path MTU: a 10000-byte WRITE over path MTU 1024, 512 and 256 (where the path MTU is "
    "the IUT's active MTU, its link's payload may be the size)",
    ["C7", "C21"],
)
def segmentation(ctx):
    for mtu in (1024, 512, 256):
        peer, qp = ctx.rc_pair(mtu=mtu)
        mr = ctx.mr(16384)
        data = pattern(10000, mtu)
        ctx.agent.put(mr, 0, data)
        ctx.post(qp, "write", mr, 0, 10000, raddr=peer.mem_va, rkey=peer.mem_rkey)
        ctx.require(peer.wait_complete(0, 1, 20), f"MTU {mtu}: the WRITE complete at the peer")
        pk = sorted((p for _, p in peer.data_rx if p.stream == 0), key=lambda p: p.offset)
        uniq = {p.offset: p for p in pk}
        cut = cut_of(uniq, 10000)
        active = mtu == int(ctx.info.get("active_mtu", 0))
        ctx.check(
            cut == mtu or active and wire.cut_ok(cut, mtu),
            f"MTU {mtu}: every packet but the last carries exactly {mtu} bytes"
            + (" (or the link's payload above it: the active MTU)" if active else "")
            + " at offset k x that, the last the rest",
            {o: len(p.payload) for o, p in uniq.items()},
        )
        want = ctx.iut_cut(mtu)
        ctx.should(want in (None, cut), f"kernel (C7): MTU {mtu}: cut at {want}", cut)
        n = len(uniq)
        ssns = sorted(wire.seq_diff(p.ssn, peer.rxd.first_ssn(0)) for p in uniq.values())
        ctx.check(n and ssns == list(range(n)), f"MTU {mtu}: consecutive SSNs from the stream's first", ssns)
        ctx.check(bytes(peer.mem[:10000]) == data, f"MTU {mtu}: the bytes placed")
        ctx.check(len(ctx.wait_wc(qp, peer)) == 1, f"MTU {mtu}: the IUT completes the WRITE")
        ctx.cleanup()


@scenario(
    "spraying: a 64 KiB WRITE goes out over several paths, each from its own source port, each path's "
    "PSNs consecutive from its first",
    ["C4", "C5", "C8", "C9", "C21"],
)
def spraying(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    data = pattern(65536, 7)
    ctx.agent.put(mr, 0, data)
    for i in range(4):
        ctx.post(qp, "write", mr, 0, 65536, wr=i + 1, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 4, 60), "four 64 KiB WRITEs complete at the peer")
    ctx.check(len(ctx.wait_wc(qp, peer, 4)) == 4, "the IUT completes them")
    paths = {}
    for rec, p in peer.data_rx:
        paths.setdefault(p.path, []).append((rec.sport, p.psn))
    ctx.diag(f"paths used: {sorted(paths)}; packets per path {[len(v) for _, v in sorted(paths.items())]}")
    ctx.check(len(paths) >= 2, f"the IUT sprays over more than one path ({len(paths)})")
    ports = {k: {s for s, _ in v} for k, v in paths.items()}
    first = {k: sorted(v)[0] for k, v in ports.items()}
    ctx.check(len(set(first.values())) == len(first), "C4: each path from its own source port", ports)
    base = min(first.values()) - min(first)
    ctx.should(
        all(first[k] == base + k for k in first) and 49152 <= base,
        "C4 (SHOULD): path i from base + i, base in 49152-65535",
        first,
    )
    for k, v in sorted(paths.items()):
        first = v[0][1] if ctx.shared else peer.rxd.first_psn(k)
        psns = [wire.seq_diff(x, first) for _, x in v]
        ctx.check(
            sorted(psns) == list(range(len(psns))),
            f"C5: path {k}'s PSNs consecutive from its first PSN"
            + (" (shared: the path's first seen)" if ctx.shared else ""),
            psns[:10],
        )
