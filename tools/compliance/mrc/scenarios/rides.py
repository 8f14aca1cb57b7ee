# SPDX-License-Identifier: GPL-2.0
"""ACKs riding on DATA (Documentation/transport.rst, "ACKs riding on DATA"): the
IUT takes a DATA riding after the peer's ACKs, both as if each had come alone,
and lets its own READ responses ride on the ACKs of their requests."""

from .. import wire
from ..agent import WC_SUCCESS
from ..peer import ECT0
from ..suite import scenario
from .basic import pattern


@scenario(
    "ACKs riding on DATA from the peer: the IUT takes the ACK and the SEND riding after it "
    "(its WRITE completes on that ACK alone, the SEND lands)",
    ["§ACKs riding on DATA", "Every end MUST take rides", "H18"],
)
def peer_rides(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(8192)
    ctx.agent.put(mr, 0, pattern(64, 41))
    ctx.recv(qp, mr, 4096, 4096, wr=100)
    # The peer acknowledges nothing by itself: the ACK of the IUT's WRITE is held
    # for a bundle and goes only riding on the peer's SEND.
    peer.auto_ack = False
    peer.bundle_acks = wire.MAX_ACK_BUNDLE
    ctx.post(qp, "write", mr, 0, 64, wr=5, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 10), "the IUT's WRITE arrives")
    path = peer.data_rx[-1][1].path
    peer.send_ack(path)
    ctx.require(len(peer._held) == 1 and not peer.bundles_sent, "the peer holds its ACK")
    m = peer.build(wire.SEND, payload=pattern(100, 43))
    peer.transmit(m, 0, ride=True)
    ctx.check(peer.rides_sent == 1, "the ACK went riding on the SEND, in one datagram")
    wcs = ctx.wait_wc(qp, peer, 2, 10)
    ok = {(w["wr"], w["status"]) for w in wcs}
    ctx.check(
        (5, WC_SUCCESS) in ok,
        "the IUT's WRITE completes: it took the ACK riding before the SEND",
        wcs,
    )
    ctx.check(
        (100, WC_SUCCESS) in ok and any(w["wr"] == 100 and w.get("byte_len") == 100 for w in wcs),
        "the IUT's receive completes with the SEND's 100 bytes: it took the riding DATA",
        wcs,
    )
    ctx.check(bytes(peer.mem[:64]) == pattern(64, 41), "the WRITE's bytes placed at the peer")
    ctx.check(peer.wait_acked(m, 10), "the IUT acknowledges the riding SEND")
    ctx.check(ctx.agent.get(mr, 4096, 100) == pattern(100, 43), "the SEND's bytes placed at the IUT")


@scenario(
    "ACKs riding on DATA from the IUT (SHOULD): the response to a one-packet READ rides on the ACK of "
    "its request, sent ECT(0), and both are right",
    ["§ACKs riding on DATA", "C19", "C20", "the DATA goes after the ACKs if the whole fits"],
)
def iut_rides(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(4096)
    ctx.agent.put(mr, 0, pattern(4 * 64, 47))
    va, rkey = int(mr["addr"]), mr["rkey"]
    for i in range(4):
        rd = peer.send_msg(wire.READ_REQ, payload=b"", raddr=va + 64 * i, rkey=rkey, dma_len=64)
        ctx.require(peer.wait_acked(rd, 10), f"READ {i} acknowledged")
        ctx.require(peer.wait_complete(1, i + 1, 10), f"READ {i} answered")
    got = [bytes(m.buf) for m in peer.completed[1][:4]]
    ctx.check(
        got == [pattern(4 * 64, 47)[64 * i : 64 * (i + 1)] for i in range(4)],
        "C11: the four READ_RESPs carry the bytes the READs name",
    )
    rides = [(r, p) for r, p in peer.data_rx if r.ride is p]
    ctx.should(
        len(rides) >= 3 and all(p.op == wire.READ_RESP for _, p in rides),
        "C19 (SHOULD): the READ_RESPs ride on the ACKs of their requests",
        f"{len(rides)} of 4 rode",
    )
    ctx.check(
        all(r.tos in (ECT0, 3) for r, _ in rides),
        "C20: a datagram of ACKs with a DATA riding is sent ECT(0)",
        [r.tos for r, _ in rides],
    )
    lone = [r for r, _ in peer.acks if r.ride is None]
    ctx.check(all(r.tos == 0 for r in lone), "C20: ACK datagrams without DATA sent Not-ECT", [r.tos for r in lone])
