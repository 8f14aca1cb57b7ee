# SPDX-License-Identifier: GPL-2.0
"""Malformed and misdirected datagrams: each dropped, counted under the
reason the spec names (rx_drop_<reason>), never acknowledged, changing no
state (Documentation/transport.rst: Drop reasons, Validation order)."""

import struct

from .. import wire
from ..agent import WC_SUCCESS
from ..suite import counter_delta, scenario
from .basic import pattern


def _common(peer, path=0):
    """The common header of a datagram from the peer's current state."""
    return dict(
        path=path,
        inc=peer.inc,
        dst_conn=peer.iut_qpn,
        psn=peer.next_psn[path],
        stamp=peer.stamp(),
        token=peer.txd.token,
        shared=peer.shared,
    )


def _data(peer, **kw):
    """A valid 100-byte SEND from the peer's current state, nothing consumed."""
    d = _common(peer)
    d.update(
        stream=0,
        op=wire.SEND,
        flags=wire.F_FIRST | wire.F_LAST,
        tag=peer.rsn & 0xFFFF,
        floor=peer._floor(0),
        ssn=peer.next_ssn[0],
        msn=peer.next_msn[0],
        offset=0,
        msg_len=100,
        payload=pattern(100, 37),
    )
    d.update(kw)
    return wire.Data(**d)


def _ack(peer, **kw):
    """An ACK of the path the IUT sent its first DATA on (peer.ack_path)."""
    p = peer.ack_path
    d = dict(
        path=p,
        inc=peer.iut_inc or 1,
        dst_conn=peer.iut_qpn,
        stamp=0,
        token=peer.rxd.token,
        cum=peer.cum[p],
        shared=peer.shared,
    )
    d.update(kw)
    return wire.Ack(**d)


def _probe(peer, **kw):
    d = _common(peer)
    d.update(floor=peer._floor(0))
    d.update(kw)
    return wire.Probe(**d)


def _flip(raw, off, mask):
    """`raw` with byte `off` XORed with `mask`."""
    b = bytearray(raw)
    b[off] ^= mask
    return bytes(b)


def _set(raw, off, fmt, val):
    b = bytearray(raw)
    struct.pack_into(fmt, b, off, val)
    return bytes(b)


e = wire.encode
# (reason counter, what, fn(peer) -> datagram, requirement ids)
CASES = [
    # The kernel counts a datagram under 20 bytes as unknown_qpn_drops: it
    # looks up dst_conn (V0.2) before the header checks (H1).
    ("unknown_qpn_drops", "10 bytes", lambda peer: e(_data(peer))[:10], ["V0.2", "H1", "drop:unknown_qpn_drops"]),
    (
        "unknown_qpn_drops",
        "a QPN no QP has",
        lambda peer: e(_data(peer, dst_conn=peer.iut_qpn ^ 0x800000)),
        ["V0.2", "C1"],
    ),
    ("rx_drop_bad_version", "version 3", lambda peer: _set(e(_data(peer)), 0, ">B", 3), ["H2", "drop:bad_version"]),
    ("rx_drop_unknown_type", "type 5", lambda peer: _set(e(_data(peer)), 1, ">B", 5), ["H3", "drop:unknown_type"]),
    (
        "rx_drop_unknown_type",
        "type 4 (DATAGRAM) for an RC QP",
        lambda peer: e(wire.Datagram(dst_conn=peer.iut_qpn)),
        ["drop:unknown_type"],
    ),
    ("rx_drop_bad_flags", "DATA with inc 0", lambda peer: e(_data(peer, inc=0)), ["H4", "``inc``: MUST NOT be 0"]),
    ("rx_drop_truncated", "DATA of 40 bytes", lambda peer: e(_data(peer))[:40], ["H5", "drop:truncated"]),
    ("rx_drop_unknown_op", "op 11", lambda peer: e(_data(peer, op=11)), ["H6", "drop:unknown_op"]),
    ("rx_drop_bad_flags", "DATA flag 0x80", lambda peer: e(_data(peer, flags=0x83)), ["H7", "Bit 0x80 MUST be 0"]),
    (
        "rx_drop_truncated",
        "RETH announced, 8 bytes after the header",
        lambda peer: _set(e(_data(peer)), 23, ">B", 0x07)[:56],
        ["H8"],
    ),
    (
        "rx_drop_length_mismatch",
        "payload_len 99 for 100 bytes",
        lambda peer: _set(e(_data(peer)), 24, ">H", 99),
        ["H9", "drop:length_mismatch", "``payload_len``: MUST equal the datagram length"],
    ),
    (
        "rx_drop_bad_offset",
        "offset + payload_len past msg_len",
        lambda peer: e(_data(peer, msg_len=60)),
        ["H10", "drop:bad_offset"],
    ),
    (
        "rx_drop_bad_flags",
        "FIRST missing at offset 0",
        lambda peer: e(_data(peer, flags=wire.F_LAST)),
        ["H11", "drop:bad_flags"],
    ),
    (
        "rx_drop_bad_offset",
        "an empty packet of a 100-byte message",
        lambda peer: e(_data(peer, payload=b"", flags=wire.F_FIRST)),
        ["H12"],
    ),
    ("rx_drop_bad_flags", "RETH on a SEND", lambda peer: e(_data(peer, flags=0x07)), ["H13"]),
    ("rx_drop_bad_flags", "IMM on a SEND", lambda peer: e(_data(peer, flags=0x0B)), ["H14"]),
    (
        "rx_drop_bad_flags",
        "SE without LAST",
        lambda peer: e(_data(peer, msg_len=200, flags=wire.F_FIRST | wire.F_SE)),
        ["H15"],
    ),
    (
        "rx_drop_mode_mismatch",
        "the other mode's SHARED bit",
        lambda peer: e(_data(peer, shared=not peer.shared)),
        ["H16", "C22", "drop:mode_mismatch"],
    ),
    ("rx_drop_bad_path", "DATA on path 64", lambda peer: e(_data(peer, path=64)), ["V2", "C9", "drop:bad_path"]),
    (
        "rx_drop_bad_token",
        "DATA with another token",
        lambda peer: e(_data(peer, token=peer.txd.token ^ 1)),
        ["V3", "drop:bad_token", "C5"],
    ),
    (
        "rx_drop_bad_offset",
        "more payload than any receiver takes (4097 bytes, C7)",
        lambda peer: e(_data(peer, payload=pattern(4097), msg_len=4097)),
        ["V5", "C7"],
    ),
    (
        "rx_drop_stream_out_of_range",
        "stream 2",
        lambda peer: e(_data(peer, stream=2)),
        ["V6", "C10", "drop:stream_out_of_range"],
    ),
    ("rx_drop_unknown_op", "READ_RESP on stream 0", lambda peer: e(_data(peer, op=wire.READ_RESP)), ["V6", "C10"]),
    (
        "rx_drop_unknown_op",
        "SEND on stream 1",
        lambda peer: e(_data(peer, stream=1, ssn=peer.next_ssn[1])),
        ["V6", "C10"],
    ),
    (
        "rx_drop_psn_out_of_window",
        "PSN 300 past the path's cum",
        lambda peer: e(_data(peer, psn=peer.next_psn[0] + 300)),
        ["V7", "drop:psn_out_of_window"],
    ),
    (
        "rx_drop_psn_out_of_window",
        "floor after psn",
        lambda peer: e(_data(peer, floor=peer.next_psn[0] + 1)),
        ["V7", "``floor``: MUST NOT be after ``psn``"],
    ),
    (
        "rx_drop_ssn_out_of_window",
        "SSN 200 past the stream's",
        lambda peer: e(_data(peer, ssn=peer.next_ssn[0] + 200)),
        ["V8", "drop:ssn_out_of_window", "Stream window: ``ssn - cum_ssn`` MUST be below 128"],
    ),
    ("rx_drop_bad_flags", "ACK with inc 0", lambda peer: e(_ack(peer, inc=0)), ["H4"]),
    ("rx_drop_truncated", "ACK of 71 bytes", lambda peer: e(_ack(peer))[:71], ["H5"]),
    ("rx_drop_truncated", "ACK of 73 bytes (a torn second ACK)", lambda peer: e(_ack(peer)) + b"\0", ["H5"]),
    (
        "rx_drop_bad_flags",
        "ACK with INV but no NAK",
        lambda peer: e(_ack(peer, flags=wire.AF_INV)),
        ["H7", "``flags``: Other bits, INV or MSG without NAK"],
    ),
    (
        "rx_drop_bad_flags",
        "ACK with nak_stream but no MSG",
        lambda peer: e(_ack(peer, nak_stream=1)),
        ["H7", "``nak_stream``: Without MSG it"],
    ),
    (
        "rx_drop_truncated",
        "ACK bundle of 2 ACKs and 71 bytes",
        lambda peer: e(_ack(peer)) * 2 + e(_ack(peer))[:71],
        ["H5"],
    ),
    (
        "rx_drop_length_mismatch",
        "ACK bundle of 17 ACKs",
        lambda peer: e(_ack(peer)) * 17,
        ["H6", "§ACK bundles"],
    ),
    (
        "rx_drop_wrong_connection",
        "ACK bundle whose 2nd ACK names another QP",
        lambda peer: e(_ack(peer)) + e(_ack(peer, dst_conn=peer.iut_qpn ^ 1)),
        ["H17"],
    ),
    (
        "rx_drop_wrong_connection",
        "ACK bundle whose 2nd ACK has another token",
        lambda peer: e(_ack(peer)) + e(_ack(peer, token=peer.rxd.token ^ 0x100)),
        ["H17"],
    ),
    (
        "rx_drop_bad_flags",
        "an ACK with a DATA riding after it whose flag 0x80 is set",
        lambda peer: e(_ack(peer)) + e(_data(peer, flags=0x83)),
        ["H18", "H7"],
    ),
    (
        "rx_drop_length_mismatch",
        "an ACK with a DATA riding after it, one byte short",
        lambda peer: (e(_ack(peer)) + e(_data(peer)))[:-1],
        ["H18", "H9"],
    ),
    (
        "rx_drop_wrong_connection",
        "an ACK with a DATA of the other SHARED bit riding after it",
        lambda peer: e(_ack(peer)) + e(_data(peer, shared=not peer.shared)),
        ["H18", "drop:wrong_connection"],
    ),
    (
        "rx_drop_wrong_connection",
        "an ACK with a DATA for another QP riding after it",
        lambda peer: e(_ack(peer)) + e(_data(peer, dst_conn=peer.iut_qpn ^ 1)),
        ["H18"],
    ),
    (
        "rx_drop_length_mismatch",
        "16 ACKs and one more before a riding DATA",
        lambda peer: e(_ack(peer)) * 17 + e(_data(peer)),
        ["H18", "H6"],
    ),
    (
        "rx_drop_unknown_type",
        "ACK bundle whose 2nd record is typed PROBE",
        lambda peer: e(_ack(peer)) + _flip(e(_ack(peer)), 1, 0x01),
        ["H17"],
    ),
    (
        "rx_drop_bad_version",
        "ACK bundle whose 2nd record is version 4",
        lambda peer: e(_ack(peer)) + _flip(e(_ack(peer)), 0, 0x01),
        ["H17"],
    ),
    (
        "rx_drop_bad_flags",
        "ACK bundle whose 2nd record has inc 0",
        lambda peer: e(_ack(peer)) + e(_ack(peer, inc=0)),
        ["H17"],
    ),
    (
        "rx_drop_bad_flags",
        "ACK bundle whose 2nd record has a PSN without MSG",
        lambda peer: e(_ack(peer)) + e(_ack(peer, psn=5)),
        ["H17"],
    ),
    (
        "rx_drop_wrong_connection",
        "ACK bundle whose 2nd record has the other SHARED bit",
        lambda peer: e(_ack(peer)) + _flip(e(_ack(peer)), 1, 0x80),
        ["H17"],
    ),
    (
        "rx_drop_wrong_connection",
        "ACK bundle whose 2nd record has another incarnation",
        lambda peer: e(_ack(peer)) + e(_ack(peer, inc=(peer.iut_inc or 1) ^ 0x11)),
        ["H17"],
    ),
    (
        "rx_drop_wrong_connection",
        "ACK bundle whose 2nd record names another QP, and a torn tail",
        lambda peer: e(_ack(peer)) + e(_ack(peer, dst_conn=peer.iut_qpn ^ 1)) + b"\x05\x02",
        ["H17"],
    ),
    ("rx_drop_length_mismatch", "ACK bundle of 16 ACKs and a byte", lambda peer: e(_ack(peer)) * 16 + b"\x05", ["H6"]),
    (
        "rx_drop_truncated",
        "ACK bundle with a tail of 19 bytes",
        lambda peer: e(_ack(peer)) + e(_ack(peer))[:19],
        ["H5"],
    ),
    (
        "rx_drop_bad_path",
        "ACK bundle: a valid ACK, then one of path 40",
        lambda peer: e(_ack(peer)) + e(_ack(peer, path=40)),
        ["V2", "§ACK bundles"],
    ),
    (
        "rx_drop_bad_token",
        "ACK bundle of two ACKs with another token",
        lambda peer: e(_ack(peer, token=peer.rxd.token ^ 0x100)) * 2,
        ["V3"],
    ),
    (
        "rx_drop_mode_mismatch",
        "ACK bundle of two ACKs of the other mode",
        lambda peer: _flip(e(_ack(peer)), 1, 0x80) * 2,
        ["H16"],
    ),
    ("rx_drop_bad_path", "ACK of a path the IUT never sent on", lambda peer: e(_ack(peer, path=40)), ["V2"]),
    ("rx_drop_bad_token", "ACK with another token", lambda peer: e(_ack(peer, token=peer.rxd.token ^ 0x100)), ["V3"]),
    (
        "rx_drop_ack_out_of_range",
        "ACK whose cum is past the IUT's next PSN",
        lambda peer: e(_ack(peer, cum=peer.cum[peer.ack_path] + 5)),
        ["drop:ack_out_of_range"],
    ),
    ("rx_drop_bad_flags", "PROBE with inc 0", lambda peer: e(_probe(peer, inc=0)), ["H4"]),
    ("rx_drop_truncated", "PROBE of 23 bytes", lambda peer: e(_probe(peer))[:23], ["H5"]),
    ("rx_drop_length_mismatch", "PROBE of 25 bytes", lambda peer: e(_probe(peer)) + b"\0", ["H6"]),
    ("rx_drop_bad_token", "PROBE with another token", lambda peer: e(_probe(peer, token=peer.txd.token ^ 2)), ["V3"]),
    (
        "rx_drop_psn_out_of_window",
        "PROBE psn 300 after its floor",
        lambda peer: e(_probe(peer, psn=peer.next_psn[0] + 300)),
        ["§PROBE (24 bytes, fixed)"],
    ),
]
SHARED_CASES = [
    (
        "rx_drop_stale_incarnation",
        "shared: DATA of another incarnation (the member is not fresh)",
        lambda peer: e(_data(peer, inc=peer.inc ^ 0x5A5A)),
        ["V4", "drop:stale_incarnation"],
    ),
    (
        "rx_drop_stale_incarnation",
        "shared: an ACK not echoing the IUT's own incarnation",
        lambda peer: e(_ack(peer, inc=peer.iut_inc ^ 0x33)),
        ["V4"],
    ),
]
ALL_REFS = sorted({r for *_, refs in CASES + SHARED_CASES for r in refs})


@scenario(
    "malformed and misdirected datagrams: each dropped, counted under its reason, unacknowledged, changing "
    "nothing (a SEND after them is taken as the next)",
    ALL_REFS + ["A receiver MUST drop a datagram that fails any check", "MUST use these names for these causes"],
    needs=("counters",),
)
def malformed(ctx):
    peer, qp = ctx.rc_pair(mtu=1024)
    mr = ctx.mr(8192)
    ctx.recv(qp, mr, 0, 2048, wr=1)
    ctx.recv(qp, mr, 2048, 2048, wr=2)
    # First the IUT sends a SEND and the peer one (so that both ends know the
    # other's incarnation, and a shared IUT's path is synchronised).
    ctx.post(qp, "send", mr, 4096, 8, wr=50)
    ctx.require(peer.wait_complete(0, 1, 10), "a SEND from the IUT arrives")
    ctx.wait_wc(qp, peer, 1, 5)
    peer.ack_path = peer.data_rx[0][1].path
    first = peer.send_msg(wire.SEND, payload=b"first", paths=[1])
    ctx.require(peer.wait_acked(first, 10), "a SEND from the peer acknowledged")
    acks = []
    peer.ack_hook = acks.append
    bad = 0
    for reason, what, build, refs in CASES + (SHARED_CASES if peer.shared else []):
        c0 = ctx.counters()
        peer.send_raw(build(peer), path=0)
        peer.pump(0.15)
        c1 = ctx.counters()
        delta = counter_delta(c0, c1, ("rx_drop", "unknown"))
        want = {reason: 1}
        if reason != "unknown_qpn_drops":
            want["rx_drops"] = 1
        if not ctx.check(delta == want, f"{what}: counted as {reason}", delta):
            bad += 1
    ctx.check(not acks, "none of them acknowledged", [str(a) for a in acks])
    m = peer.send_msg(wire.SEND, payload=pattern(100, 37), paths=[0])
    ok = peer.wait_acked(m, 10)
    wcs = ctx.wait_wc(qp, peer, 2, 5)
    ctx.check(
        ok and len(wcs) == 2 and all(w["status"] == WC_SUCCESS for w in wcs) and wcs[1]["byte_len"] == 100,
        "then the same SEND, well formed, is taken as the connection's next message",
        wcs,
    )
    ctx.check(ctx.agent.state(qp) == "rts", "the IUT's QP still in RTS")


@scenario(
    "a QP in RESET (not in RTR, RTS or SQD) takes nothing: its DATA is dropped (rx_drop_qp_state) "
    "and not acknowledged",
    ["V0.3", "C18", "drop:rx_drop_qp_state"],
    needs=("counters",),
)
def qp_state(ctx):
    peer, qp = ctx.rc_pair(mtu=1024, connect=False)
    acks = []
    peer.ack_hook = acks.append
    c0 = ctx.counters()
    peer.send_msg(wire.SEND, payload=b"early")
    peer.pump(0.5)
    c1 = ctx.counters()
    ctx.check(
        c1.get("rx_drop_qp_state", 0) - c0.get("rx_drop_qp_state", 0) == 1,
        "counted as rx_drop_qp_state",
        counter_delta(c0, c1, None),
    )
    ctx.check(not acks, "not acknowledged")
