# SPDX-License-Identifier: GPL-2.0
"""Loss, duplicates, reordering, path failure and retry exhaustion
(Documentation/transport.rst: ACK processing and loss detection, Receiver
operation, Path state machine, Timers)."""

import time

from .. import wire
from ..agent import WC_SUCCESS, WC_RETRY_EXC_ERR
from ..suite import scenario
from .basic import pattern


@scenario(
    "SACK hole at the peer: the IUT resends only the missing packet, with a new PSN, on another path",
    ["§ACK processing and loss detection", "§Transmission order", "C21"],
)
def sack_hole(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    data = pattern(65536, 11)
    ctx.agent.put(mr, 0, data)
    # A first WRITE, untouched: the IUT's paths get their RTT samples, so that
    # its timers fit the peer's pace before the loss.
    ctx.post(qp, "write", mr, 0, 16384, wr=9, raddr=peer.mem_va + 131072, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 30), "a first 16 KiB WRITE completes")
    ctx.require(len(ctx.wait_wc(qp, peer, 1, 10)) == 1, "and the IUT completes it")
    n0 = len(peer.data_rx)
    state = {"seen": {}, "lost": None, "t": None}

    def drop(p, rec):
        if p.type != wire.DATA or state["lost"] is not None:
            return False
        n = state["seen"][p.path] = state["seen"].get(p.path, 0) + 1
        # The second packet of the first path to carry four: three later
        # ones of the path will be SACKed (DupThresh 3).
        if n == 2 and p.stream == 0 and not p.flags & wire.F_RETX:
            state["lost"], state["t"] = p, rec.t
            return True
        return False

    peer.rx_drop = drop
    for i in range(2):
        ctx.post(qp, "write", mr, 0, 65536, wr=i + 1, raddr=peer.mem_va + i * 65536, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 3, 60), "two 64 KiB WRITEs complete at the peer despite the lost packet")
    lost = state["lost"]
    ctx.require(lost is not None, "the peer dropped one packet")
    ctx.diag(f"dropped: {lost}")
    rx = peer.data_rx[n0:]
    resent = [(r, p) for r, p in rx if p.stream == 0 and p.ssn == lost.ssn and not r.dropped]
    ctx.require(resent, "the lost packet (its SSN) resent")
    # Each copy avoids the path of the copy before it, which the IUT counts as
    # lost: a TCG stall can fire the IUT's timer on the path of the first
    # resend before the peer's ACK of it arrives, and the resend of that copy
    # may then go back to the path the original was lost on.
    prev = lost
    for r, p in resent:
        ctx.check(
            (p.path, p.psn) != (lost.path, lost.psn)
            and (p.msn, p.offset, p.op) == (lost.msn, lost.offset, lost.op)
            and p.flags & wire.F_RETX,
            f"resent {(r.t - state['t']) * 1000:.1f} ms later: a new PSN, the same SSN, MSN and offset, RETX",
            str(p),
        )
        ctx.check(
            p.path != prev.path,
            f"on another path than the copy before it (that copy on {prev.path}, this one on {p.path})",
        )
        prev = p
    # Detected by the SACK count, not a timer: no PROBE on the lost path (a
    # tail-loss probe's marker or a timeout's probe) before the resend. A note:
    # a slow peer can let the IUT's probe timeout fire first.
    first = resent[0][0].t
    probes = [p for r, p in peer.probes_rx if p.path == lost.path and state["t"] <= r.t <= first]
    ctx.should(not probes, "the loss found by the SACK count (no probe of its path before the resend)", probes)
    # Only lost packets are resent: a second copy of another packet is the
    # IUT's error unless its timer fired before the peer's ACK of the first
    # copy could reach it (the peer acknowledges each packet as it arrives;
    # half a second covers a TCG guest's stalls).
    when = {}
    late = []
    for r, p in rx:
        if p.stream != 0 or p.ssn == lost.ssn or r.dropped:
            continue
        if p.ssn in when:
            dt = r.t - when[p.ssn]
            (late if dt > 0.5 else []).append(f"ssn {p.ssn:#x} path {p.path} psn {p.psn:#x} after {dt * 1000:.0f} ms")
            ctx.diag(
                f"also resent: ssn {p.ssn:#x} on path {p.path} psn {p.psn:#x} {dt * 1000:.1f} ms after its "
                "first copy was acknowledged (the IUT's timer, before the ACK reached it)"
            )
        else:
            when[p.ssn] = r.t
    ctx.check(
        not late, "no packet the peer acknowledged resent more than 0.5 s later (only lost packets are resent)", late
    )
    ctx.check(bytes(peer.mem[:65536]) == data, "the WRITE's bytes placed whole")
    wcs = ctx.wait_wc(qp, peer, 2)
    ctx.check(len(wcs) == 2 and all(w["status"] == WC_SUCCESS for w in wcs), "the IUT completes both", wcs)


@scenario(
    "the IUT's receiver: cumulative PSN and 256-bit SACK over a hole, a late packet and a duplicate",
    ["§Receiver operation", "C19", "§ACK (72 bytes, fixed)"],
)
def iut_sack(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(16384)
    ctx.recv(qp, mr, 0, 8192, wr=1)
    m = peer.build(wire.SEND, payload=pattern(4000, 13))  # 4 packets
    x = peer.next_psn[2]
    peer.auto_ack = True
    acks = []
    peer.ack_hook = acks.append
    # Path 2: PSN x+1 and x+3 first (x and x+2 missing), then x+2, x.
    order = [(1, 1), (3, 3), (2, 2), (0, 0)]
    expect = [(x, {x + 1}), (x, {x + 1, x + 3}), (x, {x + 1, x + 2, x + 3}), (x + 4, set())]
    for (i, off), (cum, sack) in zip(order, expect):
        n = len(acks)
        # Every PSN from x on is unresolved: the floor stays at x.
        peer.transmit(m, i, path=2, psn=(x + off) & 0xFFFFFFFF, mutate=lambda p: setattr(p, "floor", x))
        peer.pump(5, lambda: len(acks) > n)
        a = acks[-1] if len(acks) > n else None
        ok = (
            a is not None
            and a.path == 2
            and a.cum == cum & 0xFFFFFFFF
            and set(a.sacked()) == {s & 0xFFFFFFFF for s in sack}
        )
        ctx.check(
            ok,
            f"after PSN x+{off}: ACK of path 2 with cum x+{cum - x} and SACK " f"{sorted(s - x for s in sack)}",
            str(a),
        )
        if a is not None:
            ctx.check(a.acked == 1, "acked counts the one packet since the previous ACK", a.acked)
    peer.next_psn[2] = (x + 4) & 0xFFFFFFFF
    # A network duplicate of PSN x+1: acknowledged again at once, not placed again.
    n = len(acks)
    dup = m.sent[0].copy()
    peer.net.send(wire.encode(dup), peer.port_of(2))
    peer.pump(5, lambda: len(acks) > n)
    ctx.check(
        len(acks) > n and acks[-1].cum == (x + 4) & 0xFFFFFFFF,
        "a duplicate is acknowledged at once",
        str(acks[-1]) if acks else None,
    )
    wcs = ctx.wait_wc(qp, peer, 2, 3)
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS and wcs[0]["byte_len"] == 4000,
        "one receive completion of 4000 bytes (the duplicate not delivered again)",
        wcs,
    )
    ctx.check(ctx.agent.get(mr, 0, 4000) == pattern(4000, 13), "the bytes placed whatever their order")


@scenario(
    "duplicates and reordering across paths: a SEND's packets in reverse order over 5 paths, one of them "
    "also resent as a retransmission; placed once, completed once",
    [
        "§Exactly-once and ordering for verbs",
        "V8",
        "C9",
        "a receiver accepts DATA and PROBE on every path index below its own limit",
    ],
)
def reorder_dup(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(16384)
    for i in range(2):
        ctx.recv(qp, mr, i * 8192, 8192, wr=10 + i)
    m = peer.build(wire.SEND, payload=pattern(5000, 17))  # 5 packets
    for i in reversed(range(5)):
        peer.transmit(m, i, path=(4 - i) + 40)  # paths 40-44: any index below 64 is taken (C9)
    peer.transmit(m, 2, path=7, retx=True)  # the same SSN again, a new PSN
    m2 = peer.send_msg(wire.SEND, payload=b"second")
    ctx.require(peer.wait_acked([m, m2], 10), "every packet acknowledged")
    wcs = ctx.wait_wc(qp, peer, 2, 5)
    ctx.check(
        [(w["status"], w["byte_len"], w["wr"]) for w in wcs] == [(0, 5000, 10), (0, 6, 11)],
        "two receive completions, in order: 5000 and 6 bytes",
        wcs,
    )
    ctx.check(ctx.agent.get(mr, 0, 5000) == pattern(5000, 17), "the reordered message's bytes whole")
    late = ctx.wait_wc(qp, peer, 1, 1)
    ctx.check(not late, "no third completion (the duplicate SSN was not delivered again)", late)


@scenario(
    "path failure: the peer stops answering one path; the IUT resends its packets elsewhere, probes it, "
    "moves it to a new source port, and uses it again once answered",
    ["§Path state machine (sender)", "§Paths and source ports", "C4"],
)
def path_failure(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(65536)
    data = pattern(65536, 19)
    ctx.agent.put(mr, 0, data)
    # Warm up: learn the paths and their ports.
    ctx.post(qp, "write", mr, 0, 65536, wr=1, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 30), "a first WRITE completes")
    ports = {}
    for r, p in peer.data_rx:
        ports.setdefault(p.path, r.sport)
    dead = max(ports)
    old = ports[dead]
    ctx.diag(f"paths {sorted(ports)}; path {dead} (port {old}) now dead")
    peer.rx_drop = lambda p, rec: p.path == dead and rec.sport == old
    n0 = len(peer.data_rx)
    posted = 1
    for rnd in range(4):
        for i in range(4):
            posted += 1
            ctx.post(qp, "write", mr, 0, 65536, wr=posted, raddr=peer.mem_va, rkey=peer.mem_rkey)
        ok = peer.wait_complete(0, posted, 120)
        ctx.require(ok, f"{posted - 1} more 64 KiB WRITEs complete with the path dead")
        if any(p.path == dead and r.sport != old for r, p in peer.data_rx[n0:]):
            break
    probes = [(r, p) for r, p in peer.probes_rx if p.path == dead]
    ctx.check(
        any(r.sport == old for r, _ in probes),
        f"the IUT probed path {dead} on its old port",
        [(r.sport, str(p)) for r, p in probes][:5],
    )
    moved = [(r, p) for r, p in peer.probes_rx + peer.data_rx[n0:] if p.path == dead and r.sport != old]
    ctx.check(moved, f"path {dead} moved to a new source port", sorted({r.sport for r, _ in moved}))
    if moved:
        new = moved[0][0].sport
        ctx.should(
            (new & 0xC000) == (old & 0xC000),
            f"the new port {new} stays in the old one's 16384-port quarter " f"({old})",
        )
        later = [p for r, p in peer.data_rx[n0:] if p.path == dead and r.sport != old]
        ctx.check(later, f"path {dead} carries DATA again from its new port", len(later))
    lost = [(r, p) for r, p in peer.data_rx[n0:] if r.dropped and p.type == wire.DATA]
    ctx.diag(f"{len(lost)} DATA packets dropped on the dead path")
    # Each of them (its SSN) arrived again, on another path or from the
    # path's new port.
    again = {}
    for r, p in peer.data_rx[n0:]:
        if not r.dropped:
            again.setdefault(p.ssn, []).append((p.path, r.sport))
    missing = [
        f"ssn {p.ssn:#x}" for r, p in lost if not any(pa != dead or sp != old for pa, sp in again.get(p.ssn, []))
    ]
    ctx.check(not missing, f"each of the {len(lost)} resent elsewhere", missing)
    ctx.check(bytes(peer.mem[:65536]) == data, "the bytes placed whole")
    wcs = ctx.wait_wc(qp, peer, posted, 20)
    ctx.check(
        len(wcs) == posted and all(w["status"] == WC_SUCCESS for w in wcs), f"the IUT completes all {posted}", wcs
    )


@scenario(
    "retry exhaustion: nothing the IUT sends is answered; its SEND fails with retry exceeded, no sooner than "
    "retry_cnt + 1 verbs timeouts, having resent meanwhile",
    ["C17", "§Timers"],
)
def retry_exhausted(ctx):
    # timeout 10: 4.096 us * 2^10 = 4.2 ms, the verbs minimum (IBTA 9.7.6.1.3);
    # the kernel runs 4 times it (C17): 16.8 ms. retry_cnt 2: the 3rd expiry fails.
    verbs, kernel = 4.096e-6 * 2**10, 4 * 4.096e-6 * 2**10
    peer, qp = ctx.rc_pair(mtu=1024, timeout=10, retry_cnt=2)
    mr = ctx.mr(4096)
    peer.rx_drop = lambda p, rec: True
    t0 = time.monotonic()
    ctx.post(qp, "send", mr, 0, 100)
    wcs = ctx.wait_wc(qp, peer, 1, 30)
    dt = time.monotonic() - t0
    ctx.check(
        len(wcs) == 1 and wcs[0]["status"] == WC_RETRY_EXC_ERR,
        f"the SEND completes with IBV_WC_RETRY_EXC_ERR ({dt * 1000:.0f} ms)",
        wcs,
    )
    ctx.check(dt >= 3 * verbs, f"no sooner than 3 verbs timeouts ({3 * verbs * 1000:.1f} ms): {dt * 1000:.0f} ms")
    ctx.should(
        3 * kernel <= dt <= 4 * 3 * kernel,
        f"as the kernel runs it (C17): 3 x {kernel * 1000:.1f} ms, within 4 times that ({dt * 1000:.0f} ms)",
    )
    sent = [r.t for r, p in peer.data_rx] + [r.t for r, p in peer.probes_rx]
    # At least once: a host that cannot run for a while handles several expiries
    # as one retry each, with fewer resends between (Timers).
    ctx.check(len(sent) >= 2, f"the SEND resent or its path probed meanwhile ({len(sent)} datagrams)")
    ctx.check(ctx.agent.state(qp) == "err", "the IUT's QP is in the error state")


@scenario(
    "an idle connection never fails: no traffic for 3 s with one path dead, then a SEND completes",
    ["Either way an **idle connection never fails**", "C18"],
)
def idle_never_fails(ctx):
    peer, qp = ctx.rc_pair(mtu=1024, timeout=14, retry_cnt=2)
    mr = ctx.mr(65536)
    ctx.post(qp, "write", mr, 0, 16384, raddr=peer.mem_va, rkey=peer.mem_rkey)
    ctx.require(peer.wait_complete(0, 1, 20), "a WRITE completes")
    ctx.wait_wc(qp, peer, 1, 5)
    paths = sorted({p.path for _, p in peer.data_rx})
    dead = paths[0]
    peer.rx_drop = lambda p, rec: p.path == dead
    peer.pump(3.0)
    ctx.check(ctx.agent.state(qp) == "rts", "the QP is still in RTS after 3 s idle")
    ctx.post(qp, "send", mr, 0, 64, wr=2)
    ok = peer.wait_complete(0, 2, 20)
    wcs = ctx.wait_wc(qp, peer, 1, 10)
    ctx.check(ok and len(wcs) == 1 and wcs[0]["status"] == WC_SUCCESS, "then a SEND completes with success", wcs)
