# SPDX-License-Identifier: GPL-2.0
"""The verbs rules both ends must agree on: receive tags, READ/atomic depth,
response status and matching, ACK source ports, source addresses and a
closed connection (Documentation/transport.rst: C2, C4, C11-C13, C15)."""
import time

from .. import wire
from ..agent import WC_BAD_RESP_ERR, WC_LOC_LEN_ERR, WC_REM_ACCESS_ERR, WC_SUCCESS
from ..suite import scenario
from .basic import pattern


@scenario("receive tags: a SEND that arrives before the one ahead of it is placed at once in the receive its "
          "tag names; completions stay in order", ["C12", "§Exactly-once and ordering for verbs"])
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
    ctx.check(ctx.agent.get(mr, 8192, 2000) == pattern(2000, 52),
              "the second SEND's bytes already in the second receive (placed out of order, by tag)")
    for i in range(len(m0.packets)):
        peer.transmit(m0, i, path=5 + i)
    ctx.require(peer.wait_acked(m0, 10), "the first SEND acknowledged")
    wcs = ctx.wait_wc(qp, peer, 2, 5)
    ctx.check([(w["wr"], w["byte_len"], w["status"]) for w in wcs] == [(1, 3000, 0), (2, 2000, 0)],
              "completions in order: receive 1 with 3000 bytes, receive 2 with 2000", wcs)
    ctx.check(ctx.agent.get(mr, 0, 3000) == pattern(3000, 51), "the first SEND's bytes in the first receive")


@scenario("READ/atomic depth: the IUT keeps at most max_rd_atomic requests outstanding; its responder with "
          "max_dest_rd_atomic 0 refuses a READ as an invalid request", ["C15", "C11"])
def rd_atomic_depth(ctx):
    peer, qp = ctx.rc_pair(mtu=1024, max_rd_atomic=2)
    mr = ctx.mr(65536)
    peer.answer_reads = False
    for i in range(6):
        ctx.post(qp, "read", mr, i * 1024, 512, wr=i + 1, raddr=peer.mem_va, rkey=peer.mem_rkey)
    peer.pump(2.0)
    reqs = [p for _, p in peer.data_rx if p.op == wire.READ_REQ]
    ctx.check(len({p.msn for p in reqs}) == 2, f"two READ requests outstanding at most ({len(reqs)} seen)",
              [str(p) for p in reqs])
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
    ctx.check(any(a.flags == wire.AF_NAK | wire.AF_INV | wire.AF_MSG and a.psn == 0 for a in acks),
              "max_dest_rd_atomic 0: the READ is NAKed as an invalid request (NAK|INV|MSG, MSN 0)",
              [str(a) for a in acks])


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


@scenario("response status and matching: a READ answered 'not served' completes with a remote access error; "
          "a response of another length or kind is never a success",
          ["C11", "C13"])
def responses(ctx):
    peer, qp = _iut_read(ctx)
    peer.answer(0, status=1)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(len(wcs) == 1 and wcs[0]["status"] == WC_REM_ACCESS_ERR,
              "tag 1 (not served), msg_len 0: IBV_WC_REM_ACCESS_ERR", wcs)
    ctx.cleanup()
    peer, qp = _iut_read(ctx)
    r = peer.build(wire.READ_RESP, payload=pattern(50), stream=1, tag=0, msn=0)
    peer.transmit(r, 0)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(len(wcs) == 1 and wcs[0]["status"] == WC_LOC_LEN_ERR,
              "a 50-byte READ_RESP for a 100-byte READ: IBV_WC_LOC_LEN_ERR", wcs)
    ctx.check(ctx.agent.state(qp) == "err", "and the QP in the error state")
    ctx.cleanup()
    peer, qp = _iut_read(ctx, "faa")
    r = peer.build(wire.READ_RESP, payload=pattern(8), stream=1, tag=0, msn=0)
    peer.transmit(r, 0)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(len(wcs) == 1 and wcs[0]["status"] == WC_BAD_RESP_ERR,
              "a READ_RESP answering a FETCH_ADD: IBV_WC_BAD_RESP_ERR", wcs)


@scenario("ACK source ports: the IUT acknowledges path i from its own path i's source port",
          ["C4"])
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
    got = {a.path: r.sport for r, a in peer.acks[n:]}
    bad = {k: (v, ports.get(k)) for k, v in got.items() if k in ports and v != ports[k]}
    ctx.check(not bad and got, "each path's ACK from the IUT's source port of that path (SHOULD)", bad or got)


@scenario("source address: an RC QP drops a datagram from any address but its peer's", ["V0.4", "C2"],
          needs=("counters", "alt_ip"))
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
    ctx.check(c1.get("rx_drop_bad_source", 0) - c0.get("rx_drop_bad_source", 0) == 1,
              "counted as rx_drop_bad_source", {k: c1[k] - c0.get(k, 0) for k in c1 if c1[k] != c0.get(k, 0)})
    ctx.check(len(acks) == 1, "only the copy from the peer's address acknowledged", [str(a) for a in acks])
