# SPDX-License-Identifier: GPL-2.0
"""Which QP pairs share a connection (Documentation/transport.rst, C22,
"Shared connections")."""

import random

from .. import wire
from ..agent import WC_SUCCESS
from ..peer import RcPeer
from ..suite import scenario
from .basic import pattern


@scenario(
    "grouping: two RC QP pairs between the same two addresses are one connection when shared (one PSN "
    "sequence per path, one incarnation, each datagram addressed and keyed by its own pair), two otherwise",
    ["C22", "Both ends MUST group the same pairs", "§Shared connections", "C1", "C5", "C6"],
)
def grouping(ctx):
    qa, qb = ctx.agent.qp("rc"), ctx.agent.qp("rc")
    ctx.qps += [qa, qb]
    pa = RcPeer(ctx.net, qa["qpn"], random.randrange(1 << 24), 1024, shared=ctx.shared, log=ctx.diag)
    pb = RcPeer(
        ctx.net,
        qb["qpn"],
        random.randrange(1 << 24),
        1024,
        shared=ctx.shared,
        log=ctx.diag,
        member_of=pa if ctx.shared else None,
    )
    ctx.peers += [pa, pb]
    ctx.connect(qa, pa)
    ctx.connect(qb, pb)
    mr = ctx.mr(65536)
    ctx.agent.put(mr, 0, pattern(32768, 71))
    for i in range(2):
        ctx.post(qa, "write", mr, 0, 32768, wr=1 + i, raddr=pa.mem_va, rkey=pa.mem_rkey)
        ctx.post(qb, "write", mr, 0, 32768, wr=1 + i, raddr=pb.mem_va, rkey=pb.mem_rkey)
    ok = pa.pump(60, lambda: len(pa.completed[0]) >= 2 and len(pb.completed[0]) >= 2)
    ctx.require(ok, "both QPs' two 32 KiB WRITEs complete at the peer")
    ctx.check(
        bytes(pa.mem[:32768]) == pattern(32768, 71) and bytes(pb.mem[:32768]) == pattern(32768, 71),
        "each pair's bytes in its own memory",
    )
    da = [(r, p) for r, p in pa.data_rx]
    db = [(r, p) for r, p in pb.data_rx]
    ctx.check(
        all(p.dst_conn == pa.my_qpn and p.token == pa.rxd.token for _, p in da)
        and all(p.dst_conn == pb.my_qpn and p.token == pb.rxd.token for _, p in db),
        "every datagram addressed to its own pair's QPN, with that pair's token (C1, C5)",
    )
    per_path = {}
    for who, lst in (("a", da), ("b", db)):
        for _, p in lst:
            per_path.setdefault(p.path, []).append((who, p.psn))
    if ctx.shared:
        ctx.check(len({p.inc for _, p in da + db}) == 1, "one incarnation for both pairs (one connection, C6)")
        gaps = {}
        for path, v in per_path.items():
            psns = sorted({x for _, x in v}, key=lambda x: wire.seq_diff(x, v[0][1]))
            d = [wire.seq_diff(x, psns[0]) for x in psns]
            if d != list(range(len(d))):
                gaps[path] = d[:12]
        ctx.check(not gaps, "each path carries one PSN sequence for both pairs: consecutive across them", gaps)
        mixed = [path for path, v in per_path.items() if {w for w, _ in v} == {"a", "b"}]
        ctx.check(mixed, f"both pairs' packets on the same paths ({len(mixed)} of {len(per_path)})")
    else:
        ok = all(
            wire.seq_diff(p.psn, peer.rxd.first_psn(p.path)) >= 0
            and wire.seq_diff(p.psn, peer.rxd.first_psn(p.path)) < 256
            for peer, lst in ((pa, da), (pb, db))
            for _, p in lst
        )
        ctx.check(ok, "each pair's PSNs from its own key's first PSNs (a connection each)")
    wcs = ctx.wait_wc(qa, pa, 2, 10) + ctx.wait_wc(qb, pa, 2, 10)
    ctx.check(len(wcs) == 4 and all(w["status"] == WC_SUCCESS for w in wcs), "the IUT completes all four", wcs)
    ma = pa.send_msg(wire.WRITE, 3000, raddr=mr["addr"], rkey=mr["rkey"])
    mb = pb.send_msg(wire.WRITE, 3000, raddr=mr["addr"] + 8192, rkey=mr["rkey"])
    ctx.check(pa.wait_acked([ma, mb], 10), "the peer's WRITEs on both pairs acknowledged")
