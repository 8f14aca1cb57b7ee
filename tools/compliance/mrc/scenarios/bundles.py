# SPDX-License-Identifier: GPL-2.0
"""ACK bundles (Documentation/transport.rst, "ACK bundles"): the IUT takes a
peer's bundled ACKs as if each had come alone, and bundles its own."""

from .. import wire
from ..agent import WC_SUCCESS
from ..suite import scenario
from .basic import pattern


@scenario(
    "ACK bundles from the peer: the IUT takes each ACK of a bundle as if it had come alone "
    "(a 64 KiB WRITE over 8 paths completes on them)",
    ["§ACK bundles", "a sender MUST take bundles", "§ACK (72 bytes, fixed)"],
)
def peer_bundles(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    data = pattern(65536, 23)
    ctx.agent.put(mr, 0, data)
    peer.bundle_acks = 8
    ctx.post(qp, "write", mr, 0, 65536, wr=5, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 30), "a 64 KiB WRITE from the IUT arrives")
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS,
        "and the IUT completes it, on bundled ACKs alone",
        wcs,
    )
    sizes = [len(b) for b in peer.bundles_sent]
    ctx.check(sizes and max(sizes) > 1, "the peer's ACKs went as bundles", sizes)
    ctx.check(bytes(peer.mem[: len(data)]) == data, "the data placed at the peer")


@scenario(
    "ACK bundles from the IUT (SHOULD): its ACK datagrams carry several paths' ACKs, each as it would travel "
    "alone, and every packet is acknowledged",
    [
        "§ACK bundles",
        "C19",
        "SHOULD NOT put one path in a bundle twice",
        "goes in the same datagram, if it goes to the same",
    ],
)
def iut_bundles(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    n = len(peer.acks)
    m = peer.send_msg(wire.WRITE, payload=pattern(65536, 29), raddr=mr["addr"], rkey=mr["rkey"])
    ctx.require(peer.wait_acked(m, 30), "a 64 KiB WRITE over the peer's paths acknowledged")
    got = peer.acks[n:]
    per = {}
    for r, _ in got:
        per[id(r)] = len(r.bundle) or 1
    sizes = sorted(per.values())
    ctx.should(
        sizes and sizes[-1] > 1,
        "C19 (SHOULD): the IUT bundles the ACKs of paths holding packets back",
        f"{len(got)} ACKs in {len(sizes)} datagrams, sizes {sizes}",
    )
    ctx.should(
        all(len({a.path for a in r.bundle}) == len(r.bundle) for r, _ in got),
        "§ACK bundles (SHOULD NOT): no path twice in one bundle",
    )
    ctx.check(ctx.agent.get(mr, 0, 65536) == pattern(65536, 29), "the WRITE placed at the IUT")
