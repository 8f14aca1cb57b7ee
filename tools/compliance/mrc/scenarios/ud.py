# SPDX-License-Identifier: GPL-2.0
"""The unreliable datagram service (Documentation/transport.rst, DATAGRAM,
D1-D9)."""

import ipaddress
import random
import struct
import time

from .. import wire
from ..agent import WC_SUCCESS
from ..peer import ECT0
from ..suite import counter_delta, scenario
from .basic import pattern

IBV_WC_GRH, IBV_WC_WITH_IMM = 1, 2


class UdPeer:
    """The peer's UD QP: collects the DATAGRAMs addressed to its QPN."""

    def __init__(self, net):
        self.net = net
        self.qpn = self.my_qpn = random.randrange(16, 1 << 24)
        self.got = []  # (Rx, wire.Datagram)
        self.violations = []
        net.peers[self.qpn] = self

    def handle(self, rec):
        if rec.pkt is None:
            self.violations.append(("D1", f"malformed DATAGRAM ({rec.error})"))
        else:
            self.got.append((rec, rec.pkt))

    def pump(self, t, until):
        end = time.monotonic() + t
        while not until() and time.monotonic() < end:
            r = self.net.recv(0.05)
            if r:
                self.net.dispatch(r)
        return until()


@scenario(
    "UD from the IUT: one DATAGRAM per SEND, header fields as D1-D8 say",
    ["D1", "D2", "D3", "D4", "D5", "D6", "D7", "D8"],
)
def ud_from_iut(ctx):
    qp = ctx.agent.qp("ud")
    ctx.qps.append(qp)
    ctx.agent.cmd("connect", qp=qp["id"], qkey=0x11110000)
    peer = UdPeer(ctx.net)
    ctx.peers.append(peer)
    mr = ctx.mr(8192)
    ctx.agent.put(mr, 0, pattern(1000, 41))
    dgid = ctx.net_gid()
    ctx.post(qp, "send", mr, 0, 1000, wr=1, dgid=dgid, dqpn=peer.qpn, qkey=0x2222)
    ctx.post(qp, "send_imm", mr, 0, 10, wr=2, dgid=dgid, dqpn=peer.qpn, qkey=0x80000000, imm=0xC0FFEE, solicited=1)
    ctx.post(qp, "send", mr, 0, 0, wr=3, dgid=dgid, dqpn=peer.qpn, qkey=0x2222)
    ctx.require(peer.pump(10, lambda: len(peer.got) >= 3), "three DATAGRAMs arrive", len(peer.got))
    (r1, d1), (r2, d2), (r3, d3) = peer.got[:3]
    ctx.check(all(r.tos == ECT0 for r, _ in peer.got), "D8: sent ECT(0)", [r.tos for r, _ in peer.got])
    ctx.check(
        all(r.src == ctx.net.iut_ip and r.dport == ctx.net.port for r, _ in peer.got),
        "D2: from the IUT's address to the MetaRoCE port",
    )
    ctx.should(
        all(r.sport == 49152 + qp["qpn"] % 16384 for r, _ in peer.got),
        f"D3 (kernel): source port 49152 + QPN mod 16384 ({49152 + qp['qpn'] % 16384})",
        [r.sport for r, _ in peer.got],
    )
    ctx.check(
        all(d.dst_conn == peer.qpn and d.src_qpn == qp["qpn"] for _, d in peer.got),
        "D4/D5: dst_conn the destination QPN, src_qpn the IUT's",
    )
    ctx.check(
        d1.qkey == 0x2222 and d2.qkey == 0x11110000,
        "D6: the WR's Q_Key; with its high bit, the QP's own",
        [hex(d1.qkey), hex(d2.qkey)],
    )
    ctx.check(d1.payload == pattern(1000, 41) and d3.payload == b"", "D7: the payload as posted (1000 and 0 bytes)")
    ctx.check(
        d2.flags == wire.F_IMM | wire.F_SE and d2.imm == 0xC0FFEE and d1.flags == 0,
        "D1: IMM and SE flags, immediate data big-endian",
        str(d2),
    )
    wcs = ctx.wait_wc(qp, None, 3, 5)
    ctx.check(len(wcs) == 3 and all(w["status"] == WC_SUCCESS for w in wcs), "the IUT completes the three", wcs)


@scenario(
    "UD to the IUT: a DATAGRAM is received with a 40-byte GRH area built from its addresses; a wrong "
    "Q_Key or no posted receive drops it, counted",
    [
        "D1",
        "D6",
        "D7",
        "D9",
        "drop:rx_drop_bad_qkey",
        "drop:rx_drop_no_receive",
        "``type``: DATAGRAM: MUST be 0",
        "``inc``: DATAGRAM: MUST be 0",
        "``token``: DATAGRAM: MUST be 0",
        "other bits MUST be 0",
        "``reserved``: MUST be 0",
        "``payload_len``: MUST equal the bytes after the header",
    ],
    needs=("counters",),
)
def ud_to_iut(ctx):
    qp = ctx.agent.qp("ud")
    ctx.qps.append(qp)
    ctx.agent.cmd("connect", qp=qp["id"], qkey=0x3333)
    peer = UdPeer(ctx.net)
    ctx.peers.append(peer)
    mr = ctx.mr(16384)
    c0 = ctx.counters()

    def dg(payload, **kw):
        d = dict(dst_conn=qp["qpn"], src_qpn=peer.qpn, qkey=0x3333, payload=payload)
        d.update(kw)
        return wire.encode(wire.Datagram(**d))

    sport = 49152 + peer.qpn % 16384
    ctx.net.send(dg(b"no receive yet"), sport)
    ctx.net.send(dg(b"wrong qkey", qkey=0x3334), sport)
    time.sleep(0.3)
    c1 = ctx.counters()
    d = counter_delta(c0, c1)
    ctx.check(
        d == {"rx_drop_no_receive": 1, "rx_drop_bad_qkey": 1, "rx_drops": 2},
        "no receive posted: rx_drop_no_receive; a wrong Q_Key: rx_drop_bad_qkey",
        d,
    )

    def setb(raw, off, val):
        b = bytearray(raw)
        b[off] = val
        return bytes(b)

    # Malformed DATAGRAMs (D1 and the DATAGRAM table), each counted alone.
    bad = [
        ("bad_flags", "path 1", dg(b"x", path=1)),
        ("bad_flags", "inc 1", dg(b"x", inc=1)),
        ("bad_flags", "psn 1", dg(b"x", psn=1)),
        ("bad_flags", "token 1", dg(b"x", token=1)),
        ("bad_flags", "the SHARED bit in type", setb(dg(b"x"), 1, 0x84)),
        ("bad_flags", "flag 0x01", dg(b"x", flags=0x01)),
        ("bad_flags", "reserved 1", dg(b"x", reserved=1)),
        ("length_mismatch", "payload_len 5 for 6 bytes", dg(b"length")[:-1] + b"\0\0"),
        ("truncated", "35 bytes", dg(b"")[:35]),
    ]
    for reason, what, raw in bad:
        c0 = ctx.counters()
        ctx.net.send(raw, sport)
        time.sleep(0.15)
        c1 = ctx.counters()
        d = counter_delta(c0, c1)
        ctx.check(d == {f"rx_drop_{reason}": 1, "rx_drops": 1}, f"DATAGRAM with {what}: {reason}", d)
    for i in range(3):
        ctx.recv(qp, mr, i * 5000, 4136, wr=10 + i)
    ctx.net.send(dg(pattern(100, 43), flags=wire.F_IMM, imm=0xABCD), sport)
    ctx.net.send(dg(pattern(4096, 44)), sport)
    wcs = ctx.wait_wc(qp, None, 2, 5)
    ctx.check(
        len(wcs) == 2
        and wcs[0]["status"] == WC_SUCCESS
        and wcs[0]["byte_len"] == 140
        and wcs[0]["src_qp"] == peer.qpn
        and wcs[0]["flags"] & IBV_WC_GRH
        and wcs[0]["flags"] & IBV_WC_WITH_IMM
        and wcs[0]["imm"] == 0xABCD,
        "D9: RECV of 40 + 100 bytes, src_qp, GRH and immediate data",
        wcs,
    )
    got = ctx.agent.get(mr, 0, 140)
    ip = ipaddress.ip_address(ctx.net.my_ip)
    if ip.version == 4:
        hdr = got[20:40]
        ctx.check(
            got[:20] == bytes(20)
            and hdr[0] == 0x45
            and hdr[8] == 64
            and hdr[9] == 17
            and hdr[12:16] == ip.packed
            and hdr[16:20] == ipaddress.ip_address(ctx.net.iut_ip).packed
            and struct.unpack(">H", hdr[2:4])[0] == 28 + 36 + 100,
            "D9: GRH area: 20 zero bytes, then an IPv4 header (TTL 64, UDP, the addresses, total length)",
            got[:40].hex(),
        )
    ctx.check(got[40:140] == pattern(100, 43), "D9: the payload after the GRH area")
    ctx.check(
        len(wcs) == 2 and wcs[1]["byte_len"] == 40 + 4096 and ctx.agent.get(mr, 5040, 4096) == pattern(4096, 44),
        "D7: a 4096-byte DATAGRAM taken",
        wcs[1:],
    )
