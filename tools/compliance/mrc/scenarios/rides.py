# SPDX-License-Identifier: GPL-2.0
"""ACKs riding on DATA (Documentation/transport.rst, "ACKs riding on DATA"): the
IUT takes a DATA riding after the peer's ACKs, both as if each had come alone,
and lets its own READ responses ride on the ACKs of their requests."""

from .. import wire
from ..agent import WC_SUCCESS
from ..peer import ECT0
from ..suite import counter_delta, scenario
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
    c0 = ctx.counters() if "counters" not in ctx.args.without else None
    # The peer acknowledges the IUT's WRITE only riding on its SEND, sent from the
    # receive of the WRITE itself (a shared connection's short RTO would resend the
    # WRITE while the peer took its time); a copy resent anyway is acknowledged alone.
    peer.bundle_acks = wire.MAX_ACK_BUNDLE
    m = peer.build(wire.SEND, payload=pattern(100, 43))
    copies = []

    def hook(p):
        if p.op != wire.WRITE:
            return True
        copies.append(p)
        if len(copies) > 1:
            return True
        peer.send_ack(p.path)
        peer.transmit(m, 0, ride=True)
        return False

    peer.auto_ack = hook
    ctx.post(qp, "write", mr, 0, 64, wr=5, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 10), "the IUT's WRITE arrives")
    ctx.check(peer.rides_sent == 1, "the peer's ACK went riding on its SEND, in one datagram")
    wcs = ctx.wait_wc(qp, peer, 2, 10)
    ok = {(w["wr"], w["status"]) for w in wcs}
    ctx.check((5, WC_SUCCESS) in ok, "the IUT's WRITE completes", wcs)
    ctx.check(
        (100, WC_SUCCESS) in ok and any(w["wr"] == 100 and w.get("byte_len") == 100 for w in wcs),
        "the IUT's receive completes with the SEND's 100 bytes: it took the riding DATA",
        wcs,
    )
    if len(copies) == 1:
        ctx.check((5, WC_SUCCESS) in ok, "the WRITE completed on the riding ACK alone (no copy was resent)")
    else:
        ctx.diag(f"the IUT resent its WRITE before the ride arrived ({len(copies)} copies)")
    ctx.check(bytes(peer.mem[:64]) == pattern(64, 41), "the WRITE's bytes placed at the peer")
    ctx.check(peer.wait_acked(m, 10), "the IUT acknowledges the riding SEND")
    ctx.check(ctx.agent.get(mr, 4096, 100) == pattern(100, 43), "the SEND's bytes placed at the IUT")
    if c0 is not None:
        d = counter_delta(c0, ctx.counters(), ("rx_drop", "unknown"))
        ctx.check(not d, "the IUT dropped nothing of the ride (no record refused)", d)


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
