# SPDX-License-Identifier: GPL-2.0
"""ECN and the receiver's rate hint in both directions, probes, and the keys
of a QP that answers from RTR (Documentation/transport.rst: Congestion
control, Transmission order, PROBE, Derivation, C5, C18, C20)."""

import time

from .. import wire
from ..ident import Direction
from ..agent import WC_SUCCESS
from ..peer import CE, ECT0
from ..suite import counter_delta, scenario
from .basic import pattern


@scenario(
    "ECN at the IUT's receiver: CE marks on the peer's DATA are echoed, packet by packet, in the ACK "
    "of their path; the IUT's ACKs carry its fair-share rate hint",
    ["A receiver MUST read the IP ECN field", "C20", "§Congestion control"],
)
def ecn_echo(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    acks = []
    peer.ack_hook = acks.append
    marks = [False, True, True, False, True, False]
    for i, ce in enumerate(marks):
        m = peer.build(wire.WRITE, payload=pattern(1024, i), raddr=int(mr["addr"]), rkey=mr["rkey"])
        n = len(acks)
        peer.transmit(m, 0, path=1, tos=CE if ce else ECT0)
        peer.pump(5, lambda: len(acks) > n)
    got = [(a.acked, a.ce) for a in acks if a.path == 1]
    # Each CE-marked packet is acknowledged at once (receiver step 9); an
    # unmarked one in order may wait (C19 is a SHOULD): count, do not pair.
    ctx.check(
        sum(a for a, _ in got) == len(marks) and sum(c for _, c in got) == sum(marks),
        f"the ACKs of path 1 report {len(marks)} packets and their {sum(marks)} CE marks (acked, ce per ACK)",
        got,
    )
    ctx.should(got == [(1, int(c)) for c in marks], "one ACK a packet, as the kernel (C19)", got)
    # Enough traffic for a fair-share epoch to end (1 ms before any sample; the base RTT after).
    m = peer.send_msg(wire.WRITE, 16 * 1024, raddr=int(mr["addr"]), rkey=mr["rkey"])
    peer.wait_acked(m, 10)
    time.sleep(0.05)
    m = peer.send_msg(wire.WRITE, 8 * 1024, raddr=int(mr["addr"]), rkey=mr["rkey"])
    peer.wait_acked(m, 10)
    hints = [a.rate_hint for a in acks]
    ctx.check(
        any(h > 0 for h in hints), f"the IUT's ACKs carry a non-zero rate hint (last {hints[-1]} kB/s)", hints[-8:]
    )


@scenario(
    "a late original far behind the IUT's stream: a WRITE's packet sent again with its own PSN and a CE mark "
    "after 300 more WRITEs on its path, 300 SSNs behind the stream's cumulative SSN: a duplicate (no drop "
    "counted, not placed again), acknowledged on its path with its CE mark echoed",
    ["V8", "C20", "A receiver MUST read the IP ECN field"],
    needs=("counters",),
)
def late_original(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(8192)
    addr, rkey = int(mr["addr"]), mr["rkey"]
    acks = []
    peer.ack_hook = acks.append
    first = peer.build(wire.WRITE, payload=pattern(1024, 5), raddr=addr, rkey=rkey)
    late = peer.transmit(first, 0, path=1)
    ctx.require(peer.wait_acked(first, 10), "the first WRITE acknowledged")
    more = [peer.send_msg(wire.WRITE, 64, paths=[1], raddr=addr + 4096, rkey=rkey) for _ in range(300)]
    ctx.require(peer.wait_acked(more, 60), "300 more one-packet WRITEs on path 1 acknowledged")
    # Zeroed: the late packet placed again would write its bytes back.
    ctx.agent.put(mr, 0, bytes(1024))
    c0 = ctx.counters()
    n = len(acks)
    peer.send_raw(wire.encode(late), path=1, tos=CE)
    peer.pump(5, lambda: any(a.path == 1 and a.ce for a in acks[n:]))
    got = [(a.acked, a.ce) for a in acks[n:] if a.path == 1]
    ctx.check(any(c for _, c in got), "an ACK of path 1 echoes the late packet's CE mark (acked, ce)", got)
    d = counter_delta(c0, ctx.counters())
    ctx.check(not d, "no drop counted (not ssn_out_of_window)", d)
    ctx.check(ctx.agent.get(mr, 0, 1024) == bytes(1024), "the late packet not placed again")


def _paced_rate(ctx, hint, all_ce):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    peer.rate_hint = hint
    if all_ce:
        # Report every packet CE-marked: the receiver's edge is congested.
        peer.ack_mutate = lambda a: setattr(a, "ce", a.acked)
    ctx.agent.put(mr, 0, pattern(65536, 3))
    t0 = len(peer.data_rx)
    for i in range(2):
        ctx.post(qp, "write", mr, 0, 65536, wr=i + 1, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(
        peer.wait_complete(0, 2, 120), f"hint {hint} kB/s{' and CE' if all_ce else ''}: two 64 KiB " "WRITEs complete"
    )
    recs = [r for r, _ in peer.data_rx[t0:]]
    # From the 9th packet on (the hint is in effect after the first ACKs).
    recs = recs[8:]
    span = recs[-1].t - recs[0].t
    wire_bytes = sum(len(r.raw) + 66 for r in recs[1:])
    rate = wire_bytes / span / 1000 if span > 0 else float("inf")
    ctx.diag(
        f"hint {hint} kB/s{', every packet reported CE' if all_ce else ''}: {len(recs)} packets in "
        f"{span * 1000:.0f} ms, {rate:.0f} kB/s of wire bytes"
    )
    ctx.wait_wc(qp, peer, 2, 10)
    ctx.cleanup()
    return rate


@scenario(
    "rate hint at the IUT's sender: paced at the peer's hint (wire bytes, 66 bytes of framing a datagram); "
    "the ECN trim measured",
    ["§Transmission order", "§Congestion control"],
)
def rate_hint(ctx):
    free = _paced_rate(ctx, 0, False)
    hint = max(10, int(free / 3))  # well below what the IUT reaches unpaced here
    r1 = _paced_rate(ctx, hint, False)
    ctx.check(r1 <= hint * 1.15, f"paced at the hint: {r1:.0f} <= 1.15 x {hint} kB/s (unpaced: {free:.0f})")
    ctx.check(r1 >= hint * 0.6, f"and not far below it: {r1:.0f} >= 0.6 x {hint} kB/s")
    # The ECN trim (3/4 of the hint after a round trip in which more than half
    # of the acknowledged packets carried CE, back to 1 after any other) is
    # measured and printed, not checked: under TCG, rounds of min_rtt with no
    # ACK in them come and go with the guests' timing, and lift the trim as
    # the rule says (0.75 in some runs, 1.0 in others of the same build).
    r2 = _paced_rate(ctx, hint, True)
    ctx.diag(
        f"with every packet reported CE: {r2:.0f} kB/s, {r2 / r1:.2f} of the plain paced rate "
        "(the ECN trim: 0.75 while it holds; measured, not checked)"
    )


@scenario(
    "PROBE: the IUT answers a PROBE on any path below 64 with an ACK of that path echoing its stamp, "
    "the floor applied",
    ["§PROBE (24 bytes, fixed)", "C9", "C19"],
)
def probe(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    acks = []
    peer.ack_hook = acks.append
    peer.next_psn[9] = (peer.next_psn[9] + 5) & 0xFFFFFFFF  # five PSNs resolved elsewhere
    pr = peer.probe(9)
    peer.pump(5, lambda: acks)
    a = acks[0] if acks else None
    ctx.check(
        a is not None and a.path == 9 and a.stamp == pr.stamp and a.cum == pr.floor and not a.sack,
        "an ACK of path 9 echoing the probe's stamp, cum at its floor",
        str(a),
    )
    pr = peer.probe(63)
    peer.pump(5, lambda: len(acks) > 1)
    ctx.check(len(acks) > 1 and acks[1].path == 63 and acks[1].stamp == pr.stamp, "path 63 likewise", str(acks[1:]))


@scenario(
    "a QP that answers from RTR: its READ response is keyed with its rq_psn (the key of the peer's "
    "sq_psn), as a peer still in RTR sends",
    ["C5", "C18", "§Derivation"],
)
def rtr_responder(ctx):
    peer, qp = ctx.rc_pair(mtu=1024, rtr_only=True)
    mr = ctx.mr(8192)
    ctx.agent.put(mr, 0, pattern(3000, 31))
    peer.rekey_rx(peer.my_psn)
    peer.send_msg(wire.READ_REQ, raddr=int(mr["addr"]), rkey=mr["rkey"], dma_len=3000)
    ctx.require(peer.wait_complete(1, 1, 10), "the READ response complete at the peer")
    d = Direction(peer.iut_gid, peer.my_gid, peer.iut_qpn, peer.my_qpn, peer.my_psn)
    pk = [p for _, p in peer.data_rx]
    ctx.check(
        all(p.token == d.token for p in pk),
        "every response packet carries the token of the key with " "psn = rq_psn",
        [hex(p.token) for p in pk],
    )
    if ctx.shared:
        ctx.check(
            pk[0].ssn == d.first_ssn(1),
            "stream 1's SSNs start from that key (shared: the paths from the " "connection's own)",
        )
    else:
        firsts = {}
        for p in pk:
            firsts.setdefault(p.path, p.psn)
        ctx.check(
            all(psn == d.first_psn(path) for path, psn in firsts.items()) and pk[0].ssn == d.first_ssn(1),
            "each path's first PSN and stream 1's first SSN are that key's",
            {k: hex(v) for k, v in firsts.items()},
        )
    ctx.check(bytes(peer.completed[1][0].buf) == pattern(3000, 31), "the READ's bytes")
    ctx.check(ctx.agent.state(qp) == "rtr", "the IUT's QP stayed in RTR")


@scenario(
    "the second receiving key: the IUT in RTS takes DATA keyed with its own sq_psn (what a peer still in RTR sends "
    "under), then settles on it: the first key's DATA is bad_token",
    ["C5", "§Derivation", "drop:bad_token"],
    needs=("counters",),
)
def second_key(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(8192)
    for i in range(2):
        ctx.recv(qp, mr, i * 4096, 4096, wr=i + 1)
    first = peer.txd
    peer.rekey_tx(peer.iut_psn)
    acks = []
    peer.ack_hook = acks.append
    m = peer.send_msg(wire.SEND, payload=pattern(500, 91))
    ok = peer.wait_acked(m, 10)
    ctx.check(
        ok and acks and all(a.token == peer.txd.token for a in acks),
        "a SEND under the key of the IUT's sq_psn acknowledged, its ACKs with that key's token",
        [hex(a.token) for a in acks],
    )
    wcs = ctx.wait_wc(qp, peer, 1, 5)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS and wcs[0]["byte_len"] == 500, "received (500 bytes)", wcs
    )
    c0 = ctx.counters()
    n = len(acks)
    d = wire.Data(
        path=3,
        inc=peer.inc,
        dst_conn=peer.iut_qpn,
        psn=first.first_psn(3),
        stamp=peer.stamp(),
        token=first.token,
        stream=0,
        op=wire.SEND,
        flags=wire.F_FIRST | wire.F_LAST,
        tag=1,
        floor=first.first_psn(3),
        ssn=first.first_ssn(0),
        msn=0,
        msg_len=8,
        payload=b"stranger",
        shared=peer.shared,
    )
    peer.send_raw(wire.encode(d), path=3)
    peer.pump(0.5)
    c1 = ctx.counters()
    delta = counter_delta(c0, c1)
    ctx.check(
        delta == {"rx_drop_bad_token": 1, "rx_drops": 1} and len(acks) == n,
        "then DATA under the first key (psn = the peer's sq_psn) is dropped as bad_token, unacknowledged",
        delta,
    )
