# SPDX-License-Identifier: GPL-2.0
"""Keys, tokens, first PSNs and first SSNs of a direction
(Documentation/transport.rst, "Identity and threat model", "Derivation"; C5).

SipHash-2-4 is written here from Aumasson and Bernstein's paper (2012); the
self-test at the bottom checks the paper's test vector and the spec's worked
example.
"""

import ipaddress
import struct

MASK = (1 << 64) - 1
K_IDENT = b"MetaRoCE-ident-1"


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK


def siphash24(key16: bytes, msg: bytes) -> int:
    """SipHash-2-4 of msg under a 16-byte key: the 64-bit number of the
    specification (its final state words XORed)."""
    k0, k1 = struct.unpack("<QQ", key16)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(n):
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & MASK
            v1 = _rotl(v1, 13)
            v1 ^= v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & MASK
            v3 = _rotl(v3, 16)
            v3 ^= v2
            v0 = (v0 + v3) & MASK
            v3 = _rotl(v3, 21)
            v3 ^= v0
            v2 = (v2 + v1) & MASK
            v1 = _rotl(v1, 17)
            v1 ^= v2
            v2 = _rotl(v2, 32)

    n = len(msg)
    end = n - n % 8
    for i in range(0, end, 8):
        m = struct.unpack_from("<Q", msg, i)[0]
        v3 ^= m
        rounds(2)
        v0 ^= m
    tail = msg[end:] + bytes(7 - n % 8)
    b = ((n & 0xFF) << 56) | int.from_bytes(tail, "little")
    v3 ^= b
    rounds(2)
    v0 ^= b
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def gid_bytes(addr) -> bytes:
    """The 16-byte GID of an IP address (IPv4 as ::ffff:a.b.c.d: C2)."""
    a = ipaddress.ip_address(addr)
    if a.version == 4:
        return bytes(10) + b"\xff\xff" + a.packed
    return a.packed


class Direction:
    """What both ends derive for one direction (sender -> receiver)."""

    def __init__(self, sgid: bytes, dgid: bytes, sqpn: int, dqpn: int, psn: int):
        msg = sgid + dgid + struct.pack(">III", sqpn & 0xFFFFFF, dqpn & 0xFFFFFF, psn & 0xFFFFFF)
        self.key = siphash24(K_IDENT, msg)
        self.token = self.key >> 32

    def first_psn(self, path: int) -> int:
        assert 0 <= path < 64
        return siphash24(K_IDENT, struct.pack(">QB", self.key, path)) & 0xFFFFFFFF

    def first_ssn(self, stream: int) -> int:
        if stream < 192:
            return siphash24(K_IDENT, struct.pack(">QB", self.key, 64 + stream)) & 0xFFFFFFFF
        return siphash24(K_IDENT, struct.pack(">QBH", self.key, 0xFF, stream)) & 0xFFFFFFFF


def _selftest():
    # The paper's appendix: key 00..0f, message 00..0e -> a129ca6149be45e5.
    assert siphash24(bytes(range(16)), bytes(range(15))) == 0xA129CA6149BE45E5
    # transport.rst, "Derivation", worked example.
    d = Direction(gid_bytes("10.0.0.1"), gid_bytes("10.0.0.2"), 0x123456, 0x654321, 0xABCDEF)
    assert d.key == 0x270EE8376391366F, hex(d.key)
    assert d.token == 0x270EE837
    assert d.first_psn(0) == 0x01E945BB
    assert d.first_psn(63) == 0x4F4E6192
    assert d.first_ssn(0) == 0xF8EABA23


_selftest()
