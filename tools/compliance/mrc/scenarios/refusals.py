# SPDX-License-Identifier: GPL-2.0
"""RNR and NAK in both directions, and the order of refusals
(Documentation/transport.rst: Receiver operation step 5, Refusals and their
order, C16, the ACK flags)."""

import time

from .. import wire
from ..agent import WC_REM_ACCESS_ERR, WC_REM_INV_REQ_ERR, WC_RNR_RETRY_EXC_ERR, WC_SUCCESS, WC_WR_FLUSH_ERR
from ..suite import counter_delta, scenario
from .basic import pattern

# IBTA 9.7.5.2.8 table 45: RNR NAK timer codes in ms.
RNR_MS = [
    655.36,
    0.01,
    0.02,
    0.03,
    0.04,
    0.06,
    0.08,
    0.12,
    0.16,
    0.24,
    0.32,
    0.48,
    0.64,
    0.96,
    1.28,
    1.92,
    2.56,
    3.84,
    5.12,
    7.68,
    10.24,
    15.36,
    20.48,
    30.72,
    40.96,
    61.44,
    81.92,
    122.88,
    163.84,
    245.76,
    327.68,
    491.52,
]


def _counter_delta(ctx, before, name):
    return ctx.counters().get(name, 0) - before.get(name, 0)


@scenario(
    "RNR from the IUT: a SEND with no receive posted is refused with RNR (its min_rnr_timer), counted, "
    "and taken when resent after a receive is posted",
    [
        "C16",
        "V9",
        "drop:receiver_not_ready",
        "It MUST change what the sender needs to learn from it",
        "§Refusals and their order",
    ],
    needs=("counters",),
)
def rnr_from_iut(ctx):
    peer, qp = ctx.rc_pair(mtu=1024, min_rnr_timer=14)
    mr = ctx.mr(8192)
    c0 = ctx.counters()
    acks = []
    peer.ack_hook = acks.append
    m = peer.send_msg(wire.SEND, payload=pattern(100, 23), paths=[3])
    peer.pump(5, lambda: acks)
    a = acks[0] if acks else None
    sent = m.sent[0]
    ctx.check(
        a is not None and a.flags == wire.AF_RNR and a.rnr_psn == sent.psn and a.path == 3,
        "ACK of path 3 with RNR naming the SEND's PSN",
        str(a),
    )
    if a:
        ctx.check(a.rnr_timer & 0x1F == 14, f"rnr_timer is the IUT QP's min_rnr_timer (14): {a.rnr_timer}")
        ctx.check(a.cum == sent.psn, "the refused packet not marked received (cum unchanged)", str(a))
        ctx.check(
            a.stamp == 0, "the echo is not the refused packet's stamp (nothing accepted on the path yet)", hex(a.stamp)
        )
        ctx.check(a.acked == 0, "acked 0: the refused packet is not counted as received")
    ctx.check(
        _counter_delta(ctx, c0, "rx_drop_receiver_not_ready") == 1,
        "counted once as receiver_not_ready",
        _counter_delta(ctx, c0, "rx_drop_receiver_not_ready"),
    )
    ctx.recv(qp, mr, 0, 4096, wr=5)
    time.sleep(RNR_MS[14] / 1000)
    n = len(acks)
    r = peer.transmit(m, 0, path=4, retx=True)
    peer.pump(5, lambda: any(x.path == 4 and wire.seq_lt(r.psn, x.cum) for x in acks[n:]))
    ctx.check(
        any(x.path == 4 and x.cum == (r.psn + 1) & 0xFFFFFFFF and not x.flags for x in acks[n:]),
        "the resend (new PSN, path 4) acknowledged",
        [str(x) for x in acks[n:]],
    )
    wcs = ctx.wait_wc(qp, peer, 1, 5)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS and wcs[0]["byte_len"] == 100,
        "the receive completes with the 100 bytes",
        wcs,
    )


@scenario(
    "RNR to the IUT: it waits at least the RNR timer, resends with a new PSN, and fails with RNR retry "
    "exceeded after rnr_retry refusals",
    ["C16", "§ACK processing and loss detection"],
)
def rnr_to_iut(ctx):
    # A resend the RNR timer released comes at least the timer after the
    # refusal before it. One sent before the IUT heard of the refusal (its loss
    # timers fired first: the peer's report was still on its way) comes within
    # about a round trip of it, and its late report names a transmission no
    # longer outstanding, which counts nothing. With a 122.88 ms timer (491.52
    # with --slow) the two
    # are told apart by the gap: under a third of the timer is such a race,
    # from a third to the timer a resend too soon.
    code = 31 if ctx.slow else 27
    t = RNR_MS[code] / 1000

    def kinds(times):
        gaps = [b - a for a, b in zip(times, times[1:])]
        return gaps, [g >= 0.95 * t for g in gaps], [t / 3 <= g < 0.95 * t for g in gaps]

    peer, qp = ctx.rc_pair(mtu=1024, rnr_retry=2)
    mr = ctx.mr(4096)
    refusals = []

    def rnr(p):
        if p.stream == 0 and len(refusals) < 2:
            refusals.append((time.monotonic(), p))
            return code
        return None

    peer.rnr_policy = rnr
    ctx.post(qp, "send", mr, 0, 64, wr=1)
    ctx.require(peer.wait_complete(0, 1, 20), "the SEND taken after two RNR refusals")
    acc = [(r.t, p) for r, p in peer.data_rx if not r.dropped][-1]
    gaps, timed, early = kinds([x for x, _ in refusals] + [acc[0]])
    ctx.check(
        not any(early),
        f"no resend sooner than the RNR timer ({RNR_MS[code]} ms) after a refusal it could have heard of "
        "(within a third of it: a race with the report)",
        [f"{g * 1000:.1f} ms" for g in gaps],
    )
    psns = [(p.path, p.psn) for _, p in refusals] + [(acc[1].path, acc[1].psn)]
    ctx.check(
        len(set(psns)) == 3 and all(p.flags & wire.F_RETX for _, p in refusals[1:]) and acc[1].flags & wire.F_RETX,
        "each resend has a new PSN and RETX",
        psns,
    )
    wcs = ctx.wait_wc(qp, peer, 1, 5)
    ctx.check(len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS, "the SEND completes with success", wcs)
    # Now refuse for ever: rnr_retry 2 -> the third refusal fails it.
    refusals.clear()
    peer.rnr_policy = lambda p: (refusals.append((time.monotonic(), p)), code)[1] if p.stream == 0 else None
    ctx.post(qp, "send", mr, 0, 64, wr=2)
    wcs = ctx.wait_wc(qp, peer, 1, 20)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_RNR_RETRY_EXC_ERR,
        f"refused for ever, the SEND fails with IBV_WC_RNR_RETRY_EXC_ERR after {len(refusals)} refusals",
        wcs,
    )
    gaps, timed, early = kinds([x for x, _ in refusals])
    ctx.check(
        sum(timed) == 2 and not any(early),
        "rnr_retry (2) resends after the RNR timer, none too soon, then the failure",
        [f"{(x - refusals[0][0]) * 1000:.1f} ms: {p}" for x, p in refusals],
    )
    if len(gaps) > sum(timed):
        ctx.diag(f"{len(gaps) - sum(timed)} resend(s) within a third of the timer: sent before the report arrived")
    # rnr_retry 7: without limit (C16). Ten refusals, then the receive.
    ctx.cleanup()
    peer, qp = ctx.rc_pair(mtu=1024, rnr_retry=7)
    mr = ctx.mr(4096)
    refusals.clear()
    peer.rnr_policy = lambda p: (refusals.append(p), 1)[1] if p.stream == 0 and len(refusals) < 10 else None
    ctx.post(qp, "send", mr, 0, 64, wr=3)
    wcs = ctx.wait_wc(qp, peer, 1, 30)
    ctx.check(
        len(refusals) == 10 and len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS,
        f"rnr_retry 7 (without limit): taken after {len(refusals)} refusals, success",
        wcs,
    )


@scenario(
    "NAK from the IUT: a WRITE with a bad rkey is refused for good (NAK, MSG naming it), counted as "
    "refused, and the QP enters the error state; a SEND longer than its receive is an invalid request (INV)",
    ["V9", "drop:refused", "§Refusals and their order", "§ACK (72 bytes, fixed)"],
    needs=("counters",),
)
def nak_from_iut(ctx):
    for case in ("access", "invalid"):
        peer, qp = ctx.rc_pair(mtu=1024)
        mr = ctx.mr(8192)
        c0 = ctx.counters()
        acks = []
        peer.ack_hook = acks.append
        ok = peer.send_msg(wire.WRITE, payload=b"x" * 10, raddr=int(mr["addr"]), rkey=mr["rkey"], paths=[0])
        if case == "access":
            bad = peer.send_msg(
                wire.WRITE, payload=b"y" * 10, raddr=int(mr["addr"]), rkey=mr["rkey"] ^ 0x5A5A00, paths=[1]
            )
            want = wire.AF_NAK | wire.AF_MSG
        else:
            ctx.recv(qp, mr, 4096, 1000, wr=7)
            bad = peer.send_msg(wire.SEND, payload=b"z" * 1500, paths=[1, 2])
            want = wire.AF_NAK | wire.AF_MSG | wire.AF_INV
        peer.pump(5, lambda: any(a.flags & wire.AF_NAK for a in acks))
        nak = next((a for a in acks if a.flags & wire.AF_NAK), None)
        ctx.check(
            nak is not None and nak.flags == want and nak.nak_stream == 0 and nak.psn == bad.msn,
            f"{case}: an ACK with {'NAK|MSG' if case == 'access' else 'NAK|INV|MSG'} naming stream 0 MSN " f"{bad.msn}",
            str(nak),
        )
        if nak:
            ctx.check(
                nak.rnr_psn in {p.psn for p in bad.sent} and nak.path in {p.path for p in bad.sent},
                f"{case}: rnr_psn a packet of the refused message, on its path",
                str(nak),
            )
        ctx.check(ok.done, f"{case}: the earlier WRITE acknowledged")
        d = _counter_delta(ctx, c0, "rx_drop_refused")
        ctx.check(d >= 1, f"{case}: counted as refused ({d})")
        ctx.check(ctx.agent.state(qp) == "err", f"{case}: the IUT's QP in the error state")
        if case == "invalid":
            wcs = ctx.wait_wc(qp, None, 1, 3)
            ctx.check(
                len(wcs) == 1 and wcs[0]["status"] != WC_SUCCESS,
                "invalid: the receive the SEND could not fit completes with an error",
                wcs,
            )
        # A resent refused packet is NAKed again (the refusing side lingers).
        n = len(acks)
        peer.transmit(bad, 0, path=5, retx=True)
        peer.pump(5, lambda: any(a.flags & wire.AF_NAK for a in acks[n:]))
        ctx.check(
            any(a.flags & wire.AF_NAK and a.psn == bad.msn for a in acks[n:]),
            f"{case}: a resend of the refused packet is NAKed again",
            [str(a) for a in acks[n:]],
        )
        ctx.cleanup()


@scenario(
    "a NAK waits for the earlier messages: the refused WRITE arrives before an earlier SEND, and the NAK "
    "comes only once the SEND is complete",
    ["§Refusals and their order"],
)
def nak_order(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(8192)
    ctx.recv(qp, mr, 0, 4096, wr=1)
    acks = []
    peer.ack_hook = acks.append
    first = peer.build(wire.SEND, payload=pattern(2000, 29))  # MSN 0, 2 packets
    bad = peer.build(wire.WRITE, payload=b"q" * 8, raddr=int(mr["addr"]), rkey=mr["rkey"] ^ 0x7700)  # MSN 1
    peer.transmit(first, 0, path=0)
    peer.transmit(bad, 0, path=1)
    peer.pump(1.0)
    ctx.check(not any(a.flags & wire.AF_NAK for a in acks), "no NAK while MSN 0 is incomplete", [str(a) for a in acks])
    peer.transmit(first, 1, path=2)
    peer.pump(5, lambda: any(a.flags & wire.AF_NAK for a in acks))
    nak = next((a for a in acks if a.flags & wire.AF_NAK), None)
    ctx.check(nak is not None and nak.flags & wire.AF_MSG and nak.psn == 1, "then a NAK naming MSN 1", str(nak))
    # The held packet was not acknowledged: resend it (the spec: the sender resends) if no NAK came.
    wcs = ctx.wait_wc(qp, peer, 1, 5)
    ctx.check(
        wcs and wcs[0]["status"] == WC_SUCCESS and wcs[0]["byte_len"] == 2000,
        "the earlier SEND completes with success at the IUT",
        wcs,
    )


@scenario(
    "NAK to the IUT: a NAK naming its second message completes the first with success, the second with "
    "a remote access (or, with INV, invalid request) error, the rest flushed",
    ["§Refusals and their order", "§ACK (72 bytes, fixed)", "V0.3"],
    needs=("counters",),
)
def nak_to_iut(ctx):
    for inv in (False, True):
        peer, qp = ctx.rc_pair(mtu=1024)
        mr = ctx.mr(8192)
        held = []
        peer.rx_drop = lambda p, rec: p.type == wire.DATA and p.msn >= 1 and (held.append(p) or True)
        for i in range(3):
            ctx.post(qp, "write", mr, 0, 100, wr=i + 1, raddr=peer.mem_va, rkey=peer.mem_rkey)
        ctx.require(peer.wait_complete(0, 1, 10), "the first WRITE arrives and is acknowledged")
        ctx.require(peer.pump(10, lambda: held), "the second WRITE arrives")
        p1 = held[0]
        flags = wire.AF_NAK | wire.AF_MSG | (wire.AF_INV if inv else 0)
        peer._sync(p1.path, p1.floor)  # a refused packet settles its path as an accepted one does
        peer.send_ack(p1.path, flags=flags, rnr_psn=p1.psn, nak_stream=0, nak_msn=1)
        wcs = ctx.wait_wc(qp, peer, 3, 10)
        want = [WC_SUCCESS, WC_REM_INV_REQ_ERR if inv else WC_REM_ACCESS_ERR, WC_WR_FLUSH_ERR]
        ctx.check([w["status"] for w in wcs] == want, f"{'INV' if inv else 'access'}: completions {want}", wcs)
        if not inv and not ctx.shared:
            # The QP is in the error state (and does not linger: it refused
            # nothing): an ACK for it is dropped before its connection sees it (V0.3;
            # a shared connection's member in the error state still takes datagrams).
            c1 = ctx.counters()
            peer.send_ack(p1.path)
            peer.pump(0.3)
            c2 = ctx.counters()
            d = counter_delta(c1, c2)
            # (The peer's answers to probes the IUT sent before it failed may
            # arrive in the same window: count them too, by the same reason.)
            ctx.check(
                set(d) == {"rx_drop_qp_state", "rx_drops"} and d["rx_drop_qp_state"] == d["rx_drops"] >= 1,
                "then an ACK for the failed QP is dropped as rx_drop_qp_state (and only so)",
                d,
            )
        ctx.cleanup()
