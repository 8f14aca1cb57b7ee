# SPDX-License-Identifier: GPL-2.0
"""The verbs rules both ends must agree on: receive tags, READ/atomic depth,
response status and matching, ACK source ports, source addresses and a
closed connection (Documentation/transport.rst: C2, C4, C11-C13, C15)."""

import socket
import struct

from .. import wire
from ..agent import WC_BAD_RESP_ERR, WC_LOC_LEN_ERR, WC_REM_ACCESS_ERR, WC_SUCCESS
from ..suite import Skip, counter_delta, scenario
from .basic import pattern


@scenario(
    "receive tags: a SEND that arrives before the one ahead of it is placed at once in the receive its "
    "tag names; completions stay in order",
    ["C12", "§Exactly-once and ordering for verbs"],
)
def tag_placement(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(16384)
    ctx.recv(qp, mr, 0, 4096, wr=1)
    ctx.recv(qp, mr, 8192, 4096, wr=2)
    m0 = peer.build(wire.SEND, payload=pattern(3000, 51))  # tag 0
    m1 = peer.build(wire.SEND, payload=pattern(2000, 52))  # tag 1
    ctx.check((m0.packets[0].tag, m1.packets[0].tag) == (0, 1), "the peer tags them 0 and 1 (C12)")
    for i in range(len(m1.packets)):
        peer.transmit(m1, i, path=i + 1)
    ctx.require(peer.wait_acked(m1, 10), "the second SEND acknowledged")
    early = ctx.agent.poll(qp, 1, 0)
    ctx.check(not early, "no completion while the first SEND is missing", early)
    ctx.check(
        ctx.agent.get(mr, 8192, 2000) == pattern(2000, 52),
        "the second SEND's bytes already in the second receive (placed out of order, by tag)",
    )
    for i in range(len(m0.packets)):
        peer.transmit(m0, i, path=5 + i)
    ctx.require(peer.wait_acked(m0, 10), "the first SEND acknowledged")
    wcs = ctx.wait_wc(qp, peer, 2, 5)
    ctx.check(
        [(w["wr"], w["byte_len"], w["status"]) for w in wcs] == [(1, 3000, 0), (2, 2000, 0)],
        "completions in order: receive 1 with 3000 bytes, receive 2 with 2000",
        wcs,
    )
    ctx.check(ctx.agent.get(mr, 0, 3000) == pattern(3000, 51), "the first SEND's bytes in the first receive")


@scenario(
    "READ/atomic depth: the IUT keeps at most max_rd_atomic requests outstanding; its responder with "
    "max_dest_rd_atomic 0 refuses a READ as an invalid request",
    ["C15", "C11"],
)
def rd_atomic_depth(ctx):
    peer, qp = ctx.rc_pair(mtu=1024, max_rd_atomic=2)
    mr = ctx.mr(65536)
    peer.answer_reads = False
    for i in range(6):
        ctx.post(qp, "read", mr, i * 1024, 512, wr=i + 1, raddr=peer.mem_va, rkey=peer.mem_rkey)
    peer.pump(2.0)
    reqs = [p for _, p in peer.data_rx if p.op == wire.READ_REQ]
    ctx.check(
        len({p.msn for p in reqs}) == 2,
        f"two READ requests outstanding at most ({len(reqs)} seen)",
        [str(p) for p in reqs],
    )
    ctx.check(sorted({p.tag for p in reqs}) == [0, 1], "their tags are their response numbers 0 and 1 (C12)")
    peer.answer_reads = True
    for k in sorted(peer.rd_requests):
        peer.answer(k)
    ok = peer.pump(20, lambda: len(peer.rd_requests) == 6)
    ctx.check(ok, "the other four follow as responses complete", len(peer.rd_requests))
    wcs = ctx.wait_wc(qp, peer, 6, 10)
    ctx.check(len(wcs) == 6 and all(w["status"] == WC_SUCCESS for w in wcs), "all six READs complete", wcs)
    ctx.cleanup()
    peer, qp = ctx.rc_pair(mtu=1024, max_dest_rd_atomic=0)
    mr = ctx.mr(4096)
    acks = []
    peer.ack_hook = acks.append
    peer.send_msg(wire.READ_REQ, raddr=mr["addr"], rkey=mr["rkey"], dma_len=64)
    peer.pump(5, lambda: any(a.flags & wire.AF_NAK for a in acks))
    ctx.check(
        any(a.flags == wire.AF_NAK | wire.AF_INV | wire.AF_MSG and a.psn == 0 for a in acks),
        "max_dest_rd_atomic 0: the READ is NAKed as an invalid request (NAK|INV|MSG, MSN 0)",
        [str(a) for a in acks],
    )


def _iut_read(ctx, op="read", length=100):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(4096)
    peer.answer_reads = False
    kw = dict(raddr=peer.mem_va, rkey=peer.mem_rkey)
    if op == "faa":
        kw["add"] = 1
        length = 8
    ctx.post(qp, op, mr, 0, length, wr=1, **kw)
    ctx.require(peer.pump(10, lambda: peer.rd_requests), f"the IUT's {op} request arrives")
    return peer, qp


@scenario(
    "response status and matching: a READ answered 'not served' completes with a remote access error; "
    "a response of another length or kind is never a success",
    ["C11", "C13"],
)
def responses(ctx):
    peer, qp = _iut_read(ctx)
    peer.answer(0, status=1)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_REM_ACCESS_ERR,
        "tag 1 (not served), msg_len 0: IBV_WC_REM_ACCESS_ERR",
        wcs,
    )
    ctx.cleanup()
    peer, qp = _iut_read(ctx)
    r = peer.build(wire.READ_RESP, payload=pattern(50), stream=1, tag=0, msn=0)
    peer.transmit(r, 0)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_LOC_LEN_ERR,
        "a 50-byte READ_RESP for a 100-byte READ: IBV_WC_LOC_LEN_ERR",
        wcs,
    )
    ctx.check(ctx.agent.state(qp) == "err", "and the QP in the error state")
    ctx.cleanup()
    peer, qp = _iut_read(ctx, "faa")
    r = peer.build(wire.READ_RESP, payload=pattern(8), stream=1, tag=0, msn=0)
    peer.transmit(r, 0)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_BAD_RESP_ERR,
        "a READ_RESP answering a FETCH_ADD: IBV_WC_BAD_RESP_ERR",
        wcs,
    )


@scenario(
    "ACK source ports (SHOULD, a note): the IUT's ACK datagram led by path i leaves from its own path i's source port",
    ["C4", "§ACK bundles"],
)
def ack_ports(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    ctx.post(qp, "write", mr, 0, 65536, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 30), "a 64 KiB WRITE from the IUT complete")
    ports = {}
    for r, p in peer.data_rx:
        ports.setdefault(p.path, r.sport)
    n = len(peer.acks)
    m = peer.send_msg(wire.WRITE, 8 * 1024, raddr=mr["addr"], rkey=mr["rkey"], paths=list(range(8)))
    ctx.require(peer.wait_acked(m, 10), "an 8-packet WRITE over paths 0-7 acknowledged")
    # A bundle's port is its first ACK's path's (C4, §ACK bundles).
    got = {a.path: r.sport for r, a in peer.acks[n:] if a is (r.bundle or (a,))[0]}
    bad = {k: (v, ports.get(k)) for k, v in got.items() if k in ports and v != ports[k]}
    ctx.should(
        not bad and got, "C4 (SHOULD): each ACK datagram from the IUT's source port of its first ACK's path", bad or got
    )


@scenario(
    "source address: an RC QP drops a datagram from any address but its peer's",
    ["V0.4", "C2", "drop:rx_drop_bad_source"],
    needs=("counters", "alt_ip"),
)
def bad_source(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(4096)
    ctx.recv(qp, mr, 0, 4096, wr=1)
    acks = []
    peer.ack_hook = acks.append
    c0 = ctx.counters()
    m = peer.build(wire.SEND, payload=b"from elsewhere")
    p = peer.transmit(m, 0, path=0)
    # The same datagram again, from the alternative address.
    ctx.net.send_from(ctx.args.alt_ip, wire.encode(p), peer.port_of(0))
    peer.pump(0.5)
    c1 = ctx.counters()
    ctx.check(
        c1.get("rx_drop_bad_source", 0) - c0.get("rx_drop_bad_source", 0) == 1,
        "counted as rx_drop_bad_source",
        counter_delta(c0, c1, None),
    )
    ctx.check(len(acks) == 1, "only the copy from the peer's address acknowledged", [str(a) for a in acks])


def _udp_checksum(src, dst, udp):
    """The UDP checksum over the IPv4 pseudo-header and the datagram (RFC 768)."""
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">BBH", 0, 17, len(udp))
    data = pseudo + udp + (b"\0" if len(udp) % 2 else b"")
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s & 0xFFFF) or 0xFFFF


@scenario(
    "UDP checksum: a datagram whose checksum is wrong is dropped before the transport sees it; the same "
    "datagram with its checksum right is then taken as new",
    ["V0.1", "A sender MUST fill it"],
)
def checksum(ctx):
    if ":" in ctx.net.my_ip:
        raise Skip("IPv4 only")
    try:
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    except PermissionError:
        raise Skip("no raw socket (needs CAP_NET_RAW)")
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(4096)
    ctx.recv(qp, mr, 0, 4096, wr=1)
    acks = []
    peer.ack_hook = acks.append
    m = peer.build(wire.SEND, payload=pattern(200, 81))
    peer.transmit(m, 0, path=0)
    peer.pump(2, lambda: acks)
    ctx.require(len(acks) == 1, "the well-formed SEND acknowledged")
    m2 = peer.build(wire.SEND, payload=pattern(200, 82))
    d = m2.packets[0].copy()
    d.path, d.psn, d.stamp, d.floor = 1, peer.next_psn[1], peer.stamp(), peer.next_psn[1]
    body = wire.encode(d)
    sport = peer.port_of(1)
    udp = struct.pack(">HHHH", sport, ctx.net.port, 8 + len(body), 0) + body
    good = _udp_checksum(ctx.net.my_ip, ctx.net.iut_ip, udp)
    wrong = good ^ 0x0F0F or 0x1234  # never 0: that would mean "no checksum"
    bad = udp[:6] + struct.pack(">H", wrong) + body
    raw.sendto(bad, (ctx.net.iut_ip, 0))
    raw.close()
    peer.pump(0.5)
    ctx.check(len(acks) == 1, "the copy with a wrong checksum is not acknowledged", [str(a) for a in acks[1:]])
    ctx.recv(qp, mr, 0, 4096, wr=2)
    peer.out[1][d.psn] = (m2, 0)
    peer.next_psn[1] = (peer.next_psn[1] + 1) & 0xFFFFFFFF
    peer.net.send(body, sport)
    peer.pump(3, lambda: len(acks) > 1)
    wcs = ctx.wait_wc(qp, peer, 2, 5)
    ctx.check(
        len(wcs) == 2 and all(w["status"] == WC_SUCCESS for w in wcs) and wcs[1]["byte_len"] == 200,
        "the same datagram with its checksum right is taken (it was never seen)",
        wcs,
    )
    # The IUT's datagrams (its ACKs here) as the wire carried them: a raw
    # socket gets a copy of each with its IP header.
    seen = bad_sums = 0
    rx.setblocking(False)
    while True:
        try:
            pkt = rx.recv(70000)
        except BlockingIOError:
            break
        ihl = (pkt[0] & 0x0F) * 4
        if socket.inet_ntoa(pkt[12:16]) != ctx.net.iut_ip:
            continue
        udp = pkt[ihl:]
        if struct.unpack(">H", udp[2:4])[0] != ctx.net.port:
            continue
        seen += 1
        got = struct.unpack(">H", udp[6:8])[0]
        want = _udp_checksum(ctx.net.iut_ip, ctx.net.my_ip, udp[:6] + b"\0\0" + udp[8:])
        bad_sums += got != want
    rx.close()
    ctx.check(
        seen and not bad_sums,
        f"the IUT fills the UDP checksum of what it sends ({seen} datagrams, " f"{bad_sums} without a right one)",
    )
