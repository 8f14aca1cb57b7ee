# SPDX-License-Identifier: GPL-2.0
"""The unreliable connected service (Documentation/transport.rst, "UC: the
unreliable connected service")."""

import random

from .. import wire
from ..agent import WC_SUCCESS
from ..peer import RcPeer
from ..suite import counter_delta, scenario
from .basic import pattern


def _uc_pair(ctx, mtu=1024):
    qp = ctx.agent.qp("uc")
    ctx.qps.append(qp)
    peer = RcPeer(ctx.net, qp["qpn"], random.randrange(1 << 24), mtu, log=ctx.diag)  # never shared (C22)
    ctx.peers.append(peer)
    peer.auto_ack = False  # UC: nothing is acknowledged
    peer.uc = True
    ctx.agent.cmd(
        "connect",
        qp=qp["id"],
        dqpn=peer.my_qpn,
        dgid=peer.my_gid.hex(),
        rq_psn=peer.my_psn,
        sq_psn=peer.iut_psn,
        mtu=mtu,
    )
    return peer, qp


@scenario(
    "UC: the IUT's UC SEND and WRITE go out on path 0 from one source port, PSNs from the key's first, "
    "floor = SSN = PSN, once each; the peer's UC WRITE and SEND are placed, an ACK is not taken",
    ["§UC: the unreliable connected service", "drop:unknown_type"],
    needs=("counters",),
)
def uc(ctx):
    peer, qp = _uc_pair(ctx)
    mr = ctx.mr(16384)
    ctx.agent.put(mr, 0, pattern(3000, 61))
    ctx.post(qp, "send", mr, 0, 3000, wr=1)
    ctx.post(qp, "write", mr, 0, 2000, wr=2, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.pump(10, lambda: len(peer.data_rx) >= 5), "five UC packets arrive", len(peer.data_rx))
    pk = [p for _, p in peer.data_rx]
    first = peer.rxd.first_psn(0)
    ctx.check(
        [wire.seq_diff(p.psn, first) for p in pk] == list(range(5)),
        "PSNs consecutive from path 0's first PSN of the key",
        [hex(p.psn) for p in pk],
    )
    ctx.check(
        all(
            p.path == 0
            and p.inc == 1
            and p.floor == p.psn
            and p.ssn == p.psn
            and p.stream == 0
            and p.tag == 0
            and not p.flags & (wire.F_RETX | wire.F_ACKREQ)
            for p in pk
        ),
        "path 0, inc 1, floor = SSN = PSN, stream 0, tag 0, no RETX or ACKREQ",
        [str(p) for p in pk[:2]],
    )
    ctx.check([p.msn for p in pk] == [0, 0, 0, 1, 1], "msn counts the connection's messages")
    ctx.check(len({r.sport for r, _ in peer.data_rx}) == 1, "one source port for the QP's life (no spraying)")
    ctx.should(
        49152 <= peer.data_rx[0][0].sport,
        "from the dynamic range (49152-65535)",
        {r.sport for r, _ in peer.data_rx},
    )
    ctx.check(not peer.acks and not peer.probes_rx, "the IUT sends no ACK or PROBE")
    wcs = ctx.wait_wc(qp, peer, 2, 5)
    ctx.check(len(wcs) == 2 and all(w["status"] == WC_SUCCESS for w in wcs), "both complete at the IUT", wcs)
    # The peer's UC WRITE and SEND to the IUT.
    ctx.recv(qp, mr, 8192, 4096, wr=9)
    m = peer.build(wire.WRITE, payload=pattern(1500, 62), raddr=mr["addr"] + 4096, rkey=mr["rkey"])
    for i in range(len(m.packets)):
        peer.transmit(
            m, i, path=0, mutate=lambda p: (setattr(p, "floor", p.psn), setattr(p, "ssn", p.psn), setattr(p, "tag", 0))
        )
    m = peer.build(wire.SEND, payload=pattern(700, 63), tag=0)
    peer.transmit(m, 0, path=0, mutate=lambda p: (setattr(p, "floor", p.psn), setattr(p, "ssn", p.psn)))
    wcs = ctx.wait_wc(qp, peer, 1, 5)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS and wcs[0]["byte_len"] == 700,
        "the peer's UC SEND received (700 bytes)",
        wcs,
    )
    ctx.check(
        ctx.agent.get(mr, 4096, 1500) == pattern(1500, 62) and ctx.agent.get(mr, 8192, 700) == pattern(700, 63),
        "the WRITE and the SEND's bytes placed",
    )
    c0 = ctx.counters()
    peer.send_ack(0)
    peer.pump(0.3)
    c1 = ctx.counters()
    d = counter_delta(c0, c1)
    ctx.check(d == {"rx_drop_unknown_type": 1, "rx_drops": 1}, "an ACK to a UC QP: unknown_type", d)
