# SPDX-License-Identifier: GPL-2.0
"""MetaRoCE datagram formats (Documentation/transport.rst, "Packet formats",
"DATAGRAM", "Validation order" H1-H15), written from the spec alone.

decode() applies the header checks H1-H15 in the spec's order and raises
Malformed(reason) with the spec's drop-reason name for the first that fails:
every datagram the implementation under test sends goes through it, so a
malformed one fails its scenario. encode_*() build datagrams field by field,
so a scenario can also build malformed ones on purpose.
"""

import struct
from dataclasses import dataclass

VERSION = 6
DATA, ACK, PROBE, DATAGRAM = 1, 2, 3, 4
TYPE_SHARED = 0x80
TYPE_NAMES = {DATA: "DATA", ACK: "ACK", PROBE: "PROBE", DATAGRAM: "DATAGRAM"}

# DATA ops (the op table).
SEND, SEND_IMM, WRITE, WRITE_IMM, READ_REQ, READ_RESP = 0, 1, 2, 3, 4, 5
ATOMIC_CS, ATOMIC_FA, ATOMIC_RESP, SEND_INV, ATOMIC_WRITE = 6, 7, 8, 9, 10
OP_NAMES = [
    "SEND",
    "SEND_IMM",
    "WRITE",
    "WRITE_IMM",
    "READ_REQ",
    "READ_RESP",
    "ATOMIC_CS",
    "ATOMIC_FA",
    "ATOMIC_RESP",
    "SEND_INV",
    "ATOMIC_WRITE",
]
RETH_OPS = {WRITE, WRITE_IMM, READ_REQ, ATOMIC_CS, ATOMIC_FA, ATOMIC_WRITE}
IMM_OPS = {SEND_IMM, WRITE_IMM, SEND_INV}
REQUEST_OPS = {SEND, SEND_IMM, SEND_INV, WRITE, WRITE_IMM, ATOMIC_WRITE, READ_REQ, ATOMIC_CS, ATOMIC_FA}
RESPONSE_OPS = {READ_RESP, ATOMIC_RESP}
RECV_OPS = {SEND, SEND_IMM, SEND_INV, WRITE_IMM}  # consume a receive (C12)
RD_ATOMIC_OPS = {READ_REQ, ATOMIC_CS, ATOMIC_FA}  # answered on stream 1 (C11)

# DATA flags.
F_FIRST, F_LAST, F_RETH, F_IMM, F_RETX, F_ACKREQ, F_SE = 1, 2, 4, 8, 0x10, 0x20, 0x40
# ACK flags.
AF_RNR, AF_NAK, AF_INV, AF_MSG, AF_CLOSED = 1, 2, 4, 8, 0x10

COMMON = struct.Struct(">BBBH3sIII")  # version type path inc dst_conn(3) psn stamp token
DATA_HDR = struct.Struct(">HBBHHIIIII")  # stream op flags payload_len tag floor ssn msn offset msg_len
RETH = struct.Struct(">QII")
ACK_BODY = struct.Struct(">IIHHBBHI32s")  # cum rate_hint ce acked flags rnr_timer nak_stream rnr_psn sack
DGRAM_BODY = struct.Struct(">IIBBHI")  # src_qpn qkey flags reserved payload_len imm


class Malformed(Exception):
    """A datagram that fails a header check; .reason is the spec's name."""

    def __init__(self, reason, why=""):
        super().__init__(f"{reason}: {why}" if why else reason)
        self.reason = reason


@dataclass
class Common:
    """The common header's fields (20 bytes, every datagram)."""

    path: int = 0
    inc: int = 1
    dst_conn: int = 0
    psn: int = 0
    stamp: int = 0
    token: int = 0

    def copy(self, **kw):
        """A copy with some fields changed."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(kw)
        return type(self)(**d)


@dataclass
class Data(Common):
    stream: int = 0
    op: int = SEND
    flags: int = 0
    tag: int = 0
    floor: int = 0
    ssn: int = 0
    msn: int = 0
    offset: int = 0
    msg_len: int = 0
    va: int = 0
    rkey: int = 0
    dma_len: int = 0
    imm: int = 0
    payload: bytes = b""
    shared: bool = False
    type = DATA

    def __str__(self):
        f = "|".join(
            n
            for b, n in (
                (F_FIRST, "FIRST"),
                (F_LAST, "LAST"),
                (F_RETH, "RETH"),
                (F_IMM, "IMM"),
                (F_RETX, "RETX"),
                (F_ACKREQ, "ACKREQ"),
                (F_SE, "SE"),
            )
            if self.flags & b
        )
        op = OP_NAMES[self.op] if self.op < len(OP_NAMES) else str(self.op)
        return (
            f"DATA path {self.path} psn {self.psn:#x} floor {self.floor:#x} stream {self.stream} {op} "
            f"[{f}] ssn {self.ssn:#x} msn {self.msn} tag {self.tag} off {self.offset}/{self.msg_len} "
            f"{len(self.payload)} B"
        )


@dataclass
class Ack(Common):
    """psn: nak_msn with MSG; stamp: the echo."""

    cum: int = 0
    rate_hint: int = 0
    ce: int = 0
    acked: int = 0
    flags: int = 0
    rnr_timer: int = 0
    nak_stream: int = 0
    rnr_psn: int = 0
    sack: int = 0  # bit i: cum + 1 + i received
    shared: bool = False
    type = ACK

    def sacked(self):
        """PSNs the SACK bitmap reports received."""
        return [(self.cum + 1 + i) & 0xFFFFFFFF for i in range(256) if self.sack >> i & 1]

    def __str__(self):
        f = "|".join(
            n
            for b, n in ((AF_RNR, "RNR"), (AF_NAK, "NAK"), (AF_INV, "INV"), (AF_MSG, "MSG"), (AF_CLOSED, "CLOSED"))
            if self.flags & b
        )
        return (
            f"ACK path {self.path} cum {self.cum:#x} sack {[hex(p) for p in self.sacked()]} acked {self.acked} "
            f"ce {self.ce} hint {self.rate_hint} echo {self.stamp:#x} [{f}] rnr_psn {self.rnr_psn:#x} "
            f"nak {self.nak_stream}/{self.psn}"
        )


@dataclass
class Probe(Common):
    floor: int = 0
    shared: bool = False
    type = PROBE

    def __str__(self):
        return f"PROBE path {self.path} psn {self.psn:#x} floor {self.floor:#x} stamp {self.stamp:#x}"


@dataclass
class Datagram(Common):
    """path, inc, psn and token MUST be 0 (D1)."""

    inc: int = 0
    src_qpn: int = 0
    qkey: int = 0
    flags: int = 0
    imm: int = 0
    payload: bytes = b""
    reserved: int = 0
    type = DATAGRAM

    def __str__(self):
        return f"DATAGRAM dst {self.dst_conn:#x} src_qpn {self.src_qpn:#x} qkey {self.qkey:#x} {len(self.payload)} B"


def _common(t, shared, path, inc, dst, psn, stamp, token):
    return COMMON.pack(
        VERSION,
        t | (TYPE_SHARED if shared else 0),
        path,
        inc,
        (dst & 0xFFFFFF).to_bytes(3, "big"),
        psn & 0xFFFFFFFF,
        stamp & 0xFFFFFFFF,
        token & 0xFFFFFFFF,
    )


def encode(p, payload_len=None) -> bytes:
    """The datagram of p, fields as they are (no consistency enforced)."""
    if p.type == DATA:
        ext = b""
        if p.flags & F_RETH:
            ext += RETH.pack(p.va, p.rkey, p.dma_len)
        if p.flags & F_IMM:
            ext += struct.pack(">I", p.imm)
        pl = len(p.payload) if payload_len is None else payload_len
        return (
            _common(DATA, p.shared, p.path, p.inc, p.dst_conn, p.psn, p.stamp, p.token)
            + DATA_HDR.pack(
                p.stream,
                p.op,
                p.flags,
                pl,
                p.tag,
                p.floor & 0xFFFFFFFF,
                p.ssn & 0xFFFFFFFF,
                p.msn & 0xFFFFFFFF,
                p.offset,
                p.msg_len,
            )
            + ext
            + p.payload
        )
    if p.type == ACK:
        return _common(ACK, p.shared, p.path, p.inc, p.dst_conn, p.psn, p.stamp, p.token) + ACK_BODY.pack(
            p.cum & 0xFFFFFFFF,
            p.rate_hint,
            p.ce,
            p.acked,
            p.flags,
            p.rnr_timer,
            p.nak_stream,
            p.rnr_psn & 0xFFFFFFFF,
            p.sack.to_bytes(32, "little"),
        )
    if p.type == PROBE:
        return _common(PROBE, p.shared, p.path, p.inc, p.dst_conn, p.psn, p.stamp, p.token) + struct.pack(
            ">I", p.floor & 0xFFFFFFFF
        )
    if p.type == DATAGRAM:
        pl = len(p.payload) if payload_len is None else payload_len
        return (
            _common(DATAGRAM, False, p.path, p.inc, p.dst_conn, p.psn, p.stamp, p.token)
            + DGRAM_BODY.pack(p.src_qpn, p.qkey, p.flags, p.reserved, pl, p.imm)
            + p.payload
        )
    raise ValueError(p)


def _read_common(b: bytes):
    """The common header's fields (H1, H2): (type without SHARED, shared, path, inc,
    dst_conn, psn, stamp, token)."""
    if len(b) < 20:
        raise Malformed("truncated", f"{len(b)} bytes")
    version, t, path, inc, dst, psn, stamp, token = COMMON.unpack_from(b)
    if version != VERSION:
        raise Malformed("bad_version", str(version))
    return t & 0x7F, bool(t & TYPE_SHARED), path, inc, int.from_bytes(dst, "big"), psn, stamp, token


def decode(b: bytes):
    """Decode and check a datagram (H1-H15, the ACK and DATAGRAM rules); raises
    Malformed with the reason the spec names."""
    t, shared, path, inc, dst, psn, stamp, token = _read_common(b)
    if t == DATA:
        if inc == 0:
            raise Malformed("bad_flags", "inc 0")
        if len(b) < 48:
            raise Malformed("truncated")
        stream, op, flags, plen, tag, floor, ssn, msn, offset, msg_len = DATA_HDR.unpack_from(b, 20)
        if op > 10:
            raise Malformed("unknown_op", str(op))
        if flags & 0x80:
            raise Malformed("bad_flags", "flag 0x80")
        hl = 48 + (16 if flags & F_RETH else 0) + (4 if flags & F_IMM else 0)
        if len(b) < hl:
            raise Malformed("truncated")
        if plen != len(b) - hl:
            raise Malformed("length_mismatch", f"payload_len {plen}, {len(b) - hl} bytes")
        if offset + plen > 0xFFFFFFFF or offset + plen > msg_len:
            raise Malformed("bad_offset", f"{offset}+{plen} > {msg_len}")
        first, last = offset == 0, offset + plen == msg_len
        if bool(flags & F_FIRST) != first or bool(flags & F_LAST) != last:
            raise Malformed("bad_flags", "FIRST/LAST")
        if plen == 0 and msg_len != 0:
            raise Malformed("bad_offset", "empty packet of a non-empty message")
        if bool(flags & F_RETH) != (op in RETH_OPS):
            raise Malformed("bad_flags", "RETH")
        if bool(flags & F_IMM) != (op in IMM_OPS and last):
            raise Malformed("bad_flags", "IMM")
        if flags & F_SE and not last:
            raise Malformed("bad_flags", "SE")
        p = Data(
            path=path,
            inc=inc,
            dst_conn=dst,
            psn=psn,
            stamp=stamp,
            token=token,
            stream=stream,
            op=op,
            flags=flags,
            tag=tag,
            floor=floor,
            ssn=ssn,
            msn=msn,
            offset=offset,
            msg_len=msg_len,
            shared=shared,
        )
        o = 48
        if flags & F_RETH:
            p.va, p.rkey, p.dma_len = RETH.unpack_from(b, o)
            o += 16
        if flags & F_IMM:
            p.imm = struct.unpack_from(">I", b, o)[0]
            o += 4
        p.payload = bytes(b[o:])
        return p
    if t == ACK:
        return decode_ride(b)[0][0]
    if t == PROBE:
        if inc == 0:
            raise Malformed("bad_flags", "inc 0")
        if len(b) < 24:
            raise Malformed("truncated")
        if len(b) > 24:
            raise Malformed("length_mismatch")
        return Probe(
            path=path,
            inc=inc,
            dst_conn=dst,
            psn=psn,
            stamp=stamp,
            token=token,
            floor=struct.unpack_from(">I", b, 20)[0],
            shared=shared,
        )
    if t == DATAGRAM:
        if len(b) < 36:
            raise Malformed("truncated")
        src, qkey, flags, res, plen, imm = DGRAM_BODY.unpack_from(b, 20)
        if shared or path or inc or psn or token or res or flags & ~(F_IMM | F_SE):
            raise Malformed("bad_flags")
        if plen != len(b) - 36:
            raise Malformed("length_mismatch")
        return Datagram(dst_conn=dst, stamp=stamp, src_qpn=src, qkey=qkey, flags=flags, imm=imm, payload=bytes(b[36:]))
    raise Malformed("unknown_type", str(t))


MAX_PAYLOAD = 4096  # C7: the most payload a DATA packet carries, and every receiver takes


def link_payload(link_mtu):
    """C7: the payload of a DATA packet that fills a link of MTU link_mtu bytes: the
    MTU less 128 bytes (IPv6, UDP and the largest MetaRoCE header, with room), down to
    a multiple of 8, at most 4096; 0 if link_mtu is unknown (0) or too small."""
    return min(max(link_mtu - 128, 0), 4096) & ~7 if link_mtu else 0


def cut_ok(s, mtu):
    """C7: whether s bytes is a segment size a sender of path MTU mtu may cut at: the
    path MTU, or a link's payload above it (below the next IB MTU, at most 4096, a
    multiple of 8)."""
    return s == mtu or (mtu < s < 2 * mtu and s <= 4096 and s % 8 == 0)


def seq_lt(a, b):
    """Serial-number order of 32-bit sequence numbers (a < b)."""
    return ((a - b) & 0xFFFFFFFF) >= 0x80000000


def seq_diff(a, b):
    """a - b as a signed distance."""
    d = (a - b) & 0xFFFFFFFF
    return d - (1 << 32) if d >= 0x80000000 else d


# The bytes every record of an ACK bundle repeats from the first (version, type,
# inc, dst_conn, token): §ACK bundles, H17.
_BUNDLE_SAME = ((0, 2), (3, 8), (16, 20))
MAX_ACK_BUNDLE = 16


def decode_acks(b: bytes):
    """Decode an ACK datagram: one 72-byte ACK or a bundle of up to 16 (§ACK
    bundles, H1-H7 and H17, each record in turn); raises Malformed for the whole datagram."""
    if not b:
        raise Malformed("truncated")
    out = [_ack_record(b[:72])]
    if len(b) > 72 * MAX_ACK_BUNDLE:
        raise Malformed("length_mismatch", f"{len(b)} bytes: more than {MAX_ACK_BUNDLE} ACKs")
    for at in range(72, len(b), 72):
        rec = b[at : at + 72]
        out.append(_ack_record(rec))
        if any(rec[i:j] != b[i:j] for i, j in _BUNDLE_SAME):
            raise Malformed("wrong_connection", f"record {at // 72} of a bundle names another connection")
    return out


def decode_ride(b: bytes):
    """Decode an ACK datagram that may carry a DATA after its ACKs (§ACKs riding on
    DATA): (the ACKs, the riding wire.Data or None). The leading 72-byte records typed
    ACK make a bundle (decode_acks' checks); what follows them rides if it is typed
    DATA, carries the first record's SHARED bit and passes a DATA's own checks;
    anything else is judged as part of the bundle. Raises Malformed for the whole
    datagram."""
    cut = 0
    while cut <= 72 * MAX_ACK_BUNDLE and len(b) >= cut + 72 and b[cut + 1] & 0x7F == ACK:
        cut += 72
    rest = b[cut:]
    if cut == 0 or len(rest) < 2 or rest[1] & 0x7F != DATA:
        return decode_acks(b), None
    acks = decode_acks(b[:cut])
    if (rest[1] ^ b[1]) & TYPE_SHARED or rest[5:8] != b[5:8]:
        raise Malformed("wrong_connection", "a DATA of the other SHARED bit or dst_conn rides on the ACKs")
    return acks, decode(rest)


def _ack_record(b: bytes):
    t, shared, path, inc, dst, psn, stamp, token = _read_common(b)
    if t != ACK:
        raise Malformed("unknown_type", str(t))
    if inc == 0:
        raise Malformed("bad_flags", "inc 0")
    if len(b) < 72:
        raise Malformed("truncated")
    cum, hint, ce, acked, flags, rt, nak_stream, rnr_psn, sack = ACK_BODY.unpack_from(b, 20)
    if flags & ~0x1F:
        raise Malformed("bad_flags", "reserved ACK flag")
    if flags & (AF_INV | AF_MSG) and not flags & AF_NAK:
        raise Malformed("bad_flags", "INV/MSG without NAK")
    if flags & AF_CLOSED and (flags & (AF_NAK | AF_MSG)) != (AF_NAK | AF_MSG) or flags & AF_CLOSED and flags & AF_INV:
        raise Malformed("bad_flags", "CLOSED")
    if not flags & AF_MSG and (nak_stream or psn):
        raise Malformed("bad_flags", "nak_stream/psn without MSG")
    return Ack(
        path=path,
        inc=inc,
        dst_conn=dst,
        psn=psn,
        stamp=stamp,
        token=token,
        cum=cum,
        rate_hint=hint,
        ce=ce,
        acked=acked,
        flags=flags,
        rnr_timer=rt,
        nak_stream=nak_stream,
        rnr_psn=rnr_psn,
        sack=int.from_bytes(sack, "little"),
        shared=shared,
    )
