# SPDX-License-Identifier: GPL-2.0
"""A packet-level MetaRoCE peer that plays the remote RC (or UD) QP of a queue
pair whose other end is the implementation under test (IUT).

Written from Documentation/transport.rst: the connection set-up (C1-C22), the
receiver's steps (Receiver operation), ACK processing at the sender, the
verbs rules of Exactly-once and Refusals. It is deliberately simple and
scriptable: it sends what a scenario tells it to (no congestion control, no
automatic retransmission), acknowledges the IUT's DATA at once like the
kernel (C19) unless told otherwise, answers the IUT's READ and atomic
requests, and records every datagram it receives, with its IP ECN field,
source address and port, for the scenario to check.
"""

import random
import select
import socket
import subprocess
import struct
import time
from dataclasses import dataclass

from . import wire
from .ident import Direction, gid_bytes
from .wire import seq_diff, seq_lt

ECT0, CE = 0x02, 0x03
IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)


@dataclass
class Rx:
    """One datagram received from the IUT."""

    t: float
    raw: bytes
    pkt: object  # a wire.Data/Ack/Probe/Datagram, or None if malformed
    error: str  # the Malformed reason, or ""
    tos: int
    src: str
    sport: int
    dport: int
    dropped: bool = False  # the scenario pretended it was lost
    bundle: tuple = ()  # an ACK datagram's every ACK (§ACK bundles); pkt is the first
    ride: object = None  # the DATA riding after its ACKs (§ACKs riding on DATA)


def _link_mtu(ip):
    """The MTU of the netdev holding address ip (`ip -o addr show to IP`), 0 if
    none is found."""
    try:
        out = subprocess.run(["ip", "-o", "addr", "show", "to", ip], capture_output=True, text=True, timeout=5).stdout
        name = out.split()[1].split("@")[0]
        with open(f"/sys/class/net/{name}/mtu") as f:
            return int(f.read())
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return 0


class Net:
    """The peer's UDP endpoint: one receive socket on the MetaRoCE port (C3),
    one send socket per source port (each path's: C4)."""

    def __init__(self, my_ip, iut_ip, port=4792):
        self.my_ip, self.iut_ip, self.port = my_ip, iut_ip, port
        fam = socket.AF_INET6 if ":" in my_ip else socket.AF_INET
        self.fam = fam
        self.rx = socket.socket(fam, socket.SOCK_DGRAM)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        if fam == socket.AF_INET:
            self.rx.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        else:
            self.rx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
        self.rx.bind((my_ip, port))
        # C7: this end's link payload (0 if the link is not found): what the IUT's
        # cut may not exceed on a path of this link's MTU.
        self.link_payload = wire.link_payload(_link_mtu(my_ip))
        self.tx = {}
        self.log = []  # every Rx, in arrival order
        self.peers = {}  # QPN -> the peer QP a datagram's dst_conn names
        self.ignore = set()  # QPNs of earlier scenarios: their late datagrams are dropped
        self.unclaimed = []  # datagrams for no peer QP
        self.sent = []  # (t, sport, tos, raw) of every datagram sent

    def sock(self, sport):
        s = self.tx.get(sport)
        if s is None:
            s = socket.socket(self.fam, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((self.my_ip, sport))
            self.tx[sport] = s
        return s

    def send(self, raw, sport, tos=ECT0, dport=None):
        s = self.sock(sport)
        if self.fam == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos)
        s.sendto(raw, (self.iut_ip, dport or self.port))
        self.sent.append((time.monotonic(), sport, tos, raw))

    def send_from(self, ip, raw, sport):
        """Send a datagram from another local address (ECT(0))."""
        s = socket.socket(self.fam, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((ip, sport))
            s.sendto(raw, (self.iut_ip, self.port))
        finally:
            s.close()

    def dispatch(self, rec):
        """Hand a received datagram to the peer QP it is addressed to."""
        dst = int.from_bytes(rec.raw[5:8], "big") if len(rec.raw) >= 8 else None
        p = self.peers.get(dst)
        if p is not None:
            p.handle(rec)
        elif dst not in self.ignore:
            self.unclaimed.append(rec)

    def recv(self, timeout):
        """One datagram, or None after timeout seconds."""
        r, _, _ = select.select([self.rx], [], [], max(0.0, timeout))
        if not r:
            return None
        data, anc, _, addr = self.rx.recvmsg(70000, 64)
        tos = 0
        for lvl, typ, val in anc:
            if typ in (socket.IP_TOS, getattr(socket, "IPV6_TCLASS", 67)) and val:
                tos = val[0] if len(val) == 1 else struct.unpack("i", val[:4])[0]
        bundle, ride = (), None
        try:
            pkt, err = wire.decode(data), ""
            if pkt.type == wire.ACK:
                acks, ride = wire.decode_ride(data)
                bundle = tuple(acks)
        except wire.Malformed as e:
            pkt, err = None, e.reason
        rec = Rx(time.monotonic(), data, pkt, err, tos & 3, addr[0], addr[1], self.port, bundle=bundle, ride=ride)
        self.log.append(rec)
        return rec


class Message:
    """A message the peer sends (requester or responder side)."""

    def __init__(self, stream, msn, op, length, packets):
        self.stream, self.msn, self.op, self.length = stream, msn, op, length
        self.packets = packets  # list of wire.Data, first transmission
        self.acked = set()  # indices of packets acknowledged
        self.nak = None  # the Ack that refused it
        self.sent = []  # every wire.Data sent of it, retransmissions included

    @property
    def done(self):
        return len(self.acked) == len(self.packets)


class InMsg:
    """A message the peer receives on one stream."""

    def __init__(self, first):
        self.op, self.msn, self.msg_len = first.op, first.msn, first.msg_len
        self.tag, self.va, self.rkey, self.dma_len = first.tag, first.va, first.rkey, first.dma_len
        self.imm, self.se = 0, False
        self.buf = bytearray(first.msg_len)
        self.have = {}  # offset -> payload length
        self.packets = []
        self.complete = False

    def whole(self):
        return sum(self.have.values()) == self.msg_len and (self.msg_len or self.have)


class RcPeer:
    """The peer's end of one RC connection (per-QP mode, C1-C22)."""

    def __init__(
        self,
        net,
        iut_qpn,
        iut_psn,
        mtu,
        my_qpn=None,
        my_psn=None,
        paths=8,
        base_port=None,
        shared=False,
        mem_len=1 << 20,
        log=print,
        member_of=None,
    ):
        self.net, self.log_fn = net, log
        self.my_qpn = my_qpn if my_qpn is not None else random.randrange(16, 1 << 24)
        self.my_psn = my_psn if my_psn is not None else random.randrange(0, 1 << 24)
        self.iut_qpn, self.iut_psn, self.mtu = iut_qpn, iut_psn, mtu
        # C7: the most payload a DATA from the IUT may carry (MAX_PAYLOAD, and on this
        # link its payload: a larger datagram would not fit it), and each message's
        # segment size as first seen.
        self.take = max(mtu, min(net.link_payload or wire.MAX_PAYLOAD, wire.MAX_PAYLOAD))
        self.cuts = {}
        self.my_gid, self.iut_gid = gid_bytes(net.my_ip), gid_bytes(net.iut_ip)
        self.shared = shared
        self.uc = False  # the IUT's QP is UC: SSN = PSN, no stream window (UC section)
        # C5: my sending direction is keyed with my sq_psn (the IUT's rq_psn);
        # the IUT's with its sq_psn (my rq_psn).
        self.txd = Direction(self.my_gid, self.iut_gid, self.my_qpn, self.iut_qpn, self.my_psn)
        self.rxd = Direction(self.iut_gid, self.my_gid, self.iut_qpn, self.my_qpn, self.iut_psn)
        self.inc = random.randrange(1, 1 << 16)
        self.K = paths
        self.base = base_port if base_port is not None else 49152 + random.randrange(0, 16384 - 64) // 64 * 64
        # Sender state per path.
        self.next_psn = [self.txd.first_psn(i) for i in range(64)]
        self.out = [dict() for _ in range(64)]  # psn -> (Message, index)
        self.floor = list(self.next_psn)
        self.rr = 0
        # Sender state per stream (0 requests, 1 responses: C10).
        self.next_ssn = [self.txd.first_ssn(0), self.txd.first_ssn(1)]
        self.next_msn = [0, 0]
        self.rsn = 0  # receive sequence number of receive-consuming messages (C12)
        self.rdk = 0  # response number of READ/atomic requests (C11)
        self.sent_msgs = []
        # Receiver state per path. A shared connection's sender starts its
        # paths where it likes: a path is unsynchronised (None) until its first
        # packet, whose floor starts it ("Shared connections").
        self.cum = [None if shared else self.rxd.first_psn(i) for i in range(64)]
        self.got = [set() for _ in range(64)]  # PSNs received after cum
        self.echo = [0] * 64
        self.since = [[0, 0] for _ in range(64)]  # acked, ce since the last ACK
        self.ack_sport = {}
        # Receiver state per stream.
        self.cum_ssn = [self.rxd.first_ssn(0), self.rxd.first_ssn(1)]
        self.ssn_seen = [set(), set()]
        self.inmsgs = [dict(), dict()]  # msn -> InMsg
        self.next_complete = [0, 0]
        self.completed = [[], []]  # InMsg in completion order
        # The peer as a responder: a memory region the IUT may WRITE, READ and
        # run atomics on, and its posted receives.
        self.mem = bytearray(mem_len)
        self.mem_va = 0x7E5700000000 | (random.randrange(1 << 16) << 12)
        self.mem_rkey = random.randrange(1, 1 << 32)
        self.responses = {}  # k -> Message sent (stream 1)
        self.rd_requests = {}  # k -> InMsg of the IUT's READ/atomic request
        self.next_rd = 0  # next request number to answer
        # Policies the scenarios change.
        self.auto_ack = True  # or fn(Data) -> acknowledge it at once
        self.rate_hint = 0
        self.rx_drop = None  # fn(Data|Probe, Rx) -> True: pretend the packet was lost
        # Bundle the peer's plain ACKs, up to this many a datagram (§ACK bundles):
        # held until that many paths are due or the IUT falls quiet.
        self.bundle_acks = 1
        self.rides_sent = 0  # datagrams whose DATA carried held ACKs (transmit's ride)
        self._held = {}
        self.bundles_sent = []  # every bundle flush_acks sent, as its Acks
        self.rnr_policy = None  # fn(Data) -> rnr_timer code: refuse with RNR
        self.ack_hook = None  # fn(Ack) called for every ACK received
        self.ack_mutate = None  # fn(Ack) changing every ACK the peer sends
        self.answer_reads = True
        self.violations = []  # (rule, text): what the IUT sent against the spec
        self.acks = []  # every valid Ack the IUT sent
        self.data_rx = []  # every Data the IUT sent (accepted or not)
        self.probes_rx = []
        self.stamp0 = time.monotonic_ns()
        if member_of is not None:
            # Another member of member_of's shared connection ("Shared
            # connections"): the paths, their sequences and windows, the
            # incarnations and the port base are the connection's; the keys,
            # streams, tags and memory stay this pair's.
            assert shared and member_of.shared
            for k in ("inc", "K", "base", "next_psn", "out", "floor", "cum", "got", "echo", "since", "stamp0"):
                setattr(self, k, getattr(member_of, k))
            self.conn = member_of.conn
        else:
            self.conn = {"iut_inc": None}
        net.peers[self.my_qpn] = self

    @property
    def iut_inc(self):
        """The IUT's incarnation, taken from its first DATA or PROBE (the
        connection's, shared by a shared connection's members)."""
        return self.conn["iut_inc"]

    @iut_inc.setter
    def iut_inc(self, v):
        self.conn["iut_inc"] = v

    def rekey_tx(self, psn):
        """Send under the key of starting PSN psn from now on (C5: the peer's
        second receiving key is that of its own sq_psn); nothing sent yet."""
        self.txd = Direction(self.my_gid, self.iut_gid, self.my_qpn, self.iut_qpn, psn)
        self.next_psn[:] = [self.txd.first_psn(i) for i in range(64)]
        self.floor[:] = list(self.next_psn)
        self.next_ssn = [self.txd.first_ssn(0), self.txd.first_ssn(1)]

    def rekey_rx(self, psn):
        """Expect the IUT's DATA under the key of starting PSN psn (a QP that
        sends from RTR keys its sending direction with its rq_psn: C5)."""
        self.rxd = Direction(self.iut_gid, self.my_gid, self.iut_qpn, self.my_qpn, psn)
        self.cum = [None if self.shared else self.rxd.first_psn(i) for i in range(64)]
        self.cum_ssn = [self.rxd.first_ssn(0), self.rxd.first_ssn(1)]

    # ---- helpers -----------------------------------------------------------
    def stamp(self):
        return (time.monotonic_ns() - self.stamp0 + 1) & 0xFFFFFFFF

    def port_of(self, path):
        return self.base + path

    def violate(self, rule, text):
        self.violations.append((rule, text))
        self.log_fn(f"# VIOLATION {rule}: {text}")

    # ---- sending -----------------------------------------------------------
    def build(
        self, op, length=0, payload=None, stream=0, raddr=0, rkey=0, imm=0, dma_len=None, se=False, tag=None, msn=None
    ):
        """The packets of one message (not sent): segmented at the MTU (C7),
        consecutive SSNs, RETH in every packet of a RETH op, IMM on the last."""
        if payload is None:
            payload = bytes((i * 7 + 3) & 0xFF for i in range(length))
        length = len(payload)
        if tag is None:
            if stream == 1:
                tag = 0
            elif op in wire.RECV_OPS:
                tag, self.rsn = self.rsn & 0xFFFF, self.rsn + 1
            elif op in wire.RD_ATOMIC_OPS:
                tag, self.rdk = self.rdk & 0xFFFF, self.rdk + 1
            else:
                tag = 0
        if msn is None:
            msn = self.next_msn[stream]
            self.next_msn[stream] += 1
        if dma_len is None:
            dma_len = 8 if op in (wire.ATOMIC_CS, wire.ATOMIC_FA, wire.ATOMIC_WRITE) else length
        n = max(1, -(-length // self.mtu))
        pkts = []
        for i in range(n):
            off = i * self.mtu
            chunk = payload[off : off + self.mtu]
            fl = 0
            if off == 0:
                fl |= wire.F_FIRST
            if off + len(chunk) == length:
                fl |= wire.F_LAST
            if op in wire.RETH_OPS:
                fl |= wire.F_RETH
            if op in wire.IMM_OPS and fl & wire.F_LAST:
                fl |= wire.F_IMM
            if se and fl & wire.F_LAST:
                fl |= wire.F_SE
            pkts.append(
                wire.Data(
                    inc=self.inc,
                    dst_conn=self.iut_qpn,
                    token=self.txd.token,
                    stream=stream,
                    op=op,
                    flags=fl,
                    tag=tag,
                    ssn=self.next_ssn[stream],
                    msn=msn,
                    offset=off,
                    msg_len=length if op != wire.READ_REQ else 0,
                    va=raddr,
                    rkey=rkey,
                    dma_len=dma_len,
                    imm=imm if fl & wire.F_IMM else 0,
                    payload=chunk,
                    shared=self.shared,
                )
            )
            self.next_ssn[stream] = (self.next_ssn[stream] + 1) & 0xFFFFFFFF
        m = Message(stream, msn, op, length, pkts)
        self.sent_msgs.append(m)
        return m

    def pick_path(self):
        p = self.rr % self.K
        self.rr += 1
        return p

    def transmit(self, m, i, path=None, retx=False, tos=ECT0, psn=None, mutate=None, ride=False):
        """Send packet i of message m on a path (round robin by default) with
        the path's next PSN; returns the datagram's wire.Data. With ride, the ACKs
        held for a bundle go first in the same datagram (§ACKs riding on DATA)."""
        if path is None:
            path = self.pick_path()
        p = m.packets[i].copy()
        p.path = path
        p.psn = self.next_psn[path] if psn is None else psn
        if psn is None:
            self.next_psn[path] = (self.next_psn[path] + 1) & 0xFFFFFFFF
        p.stamp = self.stamp()
        if retx:
            p.flags |= wire.F_RETX
        self.out[path][p.psn] = (m, i)
        p.floor = self._floor(path)
        if mutate:
            mutate(p)
        raw = wire.encode(p)
        if ride and self._held:
            held, self._held = list(self._held.values()), {}
            self.bundles_sent.append(held)
            self.rides_sent += 1
            raw = b"".join(wire.encode(a) for a in held) + raw
        self.net.send(raw, self.port_of(path), tos)
        m.sent.append(p)
        return p

    def _floor(self, path):
        if self.out[path]:
            return min(self.out[path], key=lambda x: seq_diff(x, self.next_psn[path]))
        return self.next_psn[path]

    def send_msg(self, op, length=0, paths=None, **kw):
        """Build a message and send every packet of it, spraying over paths
        (a list of path indices, default round robin over K)."""
        m = self.build(op, length, **kw)
        for i in range(len(m.packets)):
            self.transmit(m, i, None if paths is None else paths[i % len(paths)])
        return m

    def probe(self, path, mutate=None):
        p = wire.Probe(
            path=path,
            inc=self.inc,
            dst_conn=self.iut_qpn,
            psn=self.next_psn[path],
            stamp=self.stamp(),
            token=self.txd.token,
            floor=self._floor(path),
            shared=self.shared,
        )
        if mutate:
            mutate(p)
        self.net.send(wire.encode(p), self.port_of(path), ECT0)
        return p

    def send_raw(self, raw, path=0, tos=ECT0):
        self.net.send(raw, self.port_of(path), tos)

    # ---- receiving ---------------------------------------------------------
    def pump(self, timeout=1.0, until=None):
        """Receive and handle datagrams for up to timeout seconds, or until
        until() is true (checked after each datagram). Returns until()'s last
        value (True without until)."""
        end = time.monotonic() + timeout
        while True:
            if until is not None and until():
                self.flush_acks()
                return True
            left = end - time.monotonic()
            if left <= 0:
                self.flush_acks()
                return until() if until is not None else True
            # Held ACKs go once the IUT is quiet for 2 ms.
            rec = self.net.recv(min(left, 0.002 if self._held else 0.05))
            if rec is not None:
                self.net.dispatch(rec)
            else:
                self.flush_acks()

    def handle(self, rec):
        if rec.pkt is None:
            self.violate("H", f"malformed datagram from the IUT ({rec.error}): {rec.raw[:48].hex()}")
            return
        p = rec.pkt
        if rec.src != self.net.iut_ip:
            self.violate("C2", f"datagram from {rec.src}, not the IUT's address {self.net.iut_ip}")
        if p.type == wire.DATAGRAM:
            return
        if p.shared != self.shared:
            self.violate("C22", f"SHARED bit {p.shared} on a {'shared' if self.shared else 'per-QP'} connection")
        if p.type == wire.DATA:
            self.on_data(rec, p)
        elif p.type == wire.ACK:
            # Each ACK of a bundle as if it had come alone (§ACK bundles).
            for a in rec.bundle or (p,):
                self.on_ack(rec, a)
            # Then the DATA riding after them, as if it had come alone (§ACKs riding
            # on DATA).
            if rec.ride is not None:
                if rec.ride.shared != self.shared:
                    self.violate("C22", f"SHARED bit {rec.ride.shared} on a riding DATA")
                self.on_data(rec, rec.ride)
        elif p.type == wire.PROBE:
            self.on_probe(rec, p)

    def _check_sender_fields(self, rec, p):
        if p.token != self.rxd.token:
            self.violate("C5", f"token {p.token:#x}, expected {self.rxd.token:#x}: {p}")
        if p.inc == 0:
            self.violate("C6", "inc 0")
        if self.iut_inc is None:
            self.iut_inc = p.inc
        elif p.inc != self.iut_inc:
            self.violate("C6", f"incarnation changed {self.iut_inc:#x} -> {p.inc:#x}")
        if rec.tos not in (ECT0, CE):
            self.violate("C20", f"{wire.TYPE_NAMES[p.type]} sent with ECN {rec.tos}, not ECT(0)")
        if rec.dport != self.net.port:
            self.violate("C3", f"to port {rec.dport}")
        if p.path >= 64:
            self.violate("C9", f"path {p.path}")

    def on_probe(self, rec, p):
        self.probes_rx.append((rec, p))
        self._check_sender_fields(rec, p)
        if self.rx_drop and self.rx_drop(p, rec):
            rec.dropped = True
            return
        self._sync(p.path, p.floor)
        self._apply_floor(p.path, p.floor)
        self.echo[p.path] = p.stamp
        self.send_ack(p.path)

    def _sync(self, path, floor):
        if self.cum[path] is None:
            self.cum[path] = floor

    def _apply_floor(self, path, floor):
        if seq_lt(self.cum[path], floor):
            self.cum[path] = floor
            self.got[path] = {x for x in self.got[path] if seq_lt(floor, x)}
        self._advance(path)

    def _advance(self, path):
        while self.cum[path] in self.got[path]:
            self.got[path].discard(self.cum[path])
            self.cum[path] = (self.cum[path] + 1) & 0xFFFFFFFF

    def on_data(self, rec, p):
        self.data_rx.append((rec, p))
        self._check_sender_fields(rec, p)
        n = len(p.payload)
        if n > self.take:
            self.violate("C7", f"{n} payload bytes: over path MTU {self.mtu} and the link's payload {self.take}")
        if n and not p.flags & wire.F_LAST:
            cut = self.cuts.setdefault((p.stream, p.msn), n)
            if not wire.cut_ok(n, self.mtu):
                self.violate("C7", f"a non-last packet of {n} bytes (MTU {self.mtu}; nor a link's payload above it)")
            elif n != cut or p.offset % n:
                self.violate("C7", f"a non-last packet of {n} bytes at offset {p.offset} in a message cut at {cut}")
        if p.stream not in (0, 1):
            self.violate("C10", f"stream {p.stream}")
            return
        if (p.stream == 0) != (p.op in wire.REQUEST_OPS):
            self.violate("C10", f"{wire.OP_NAMES[p.op]} on stream {p.stream}")
        if self.rx_drop and self.rx_drop(p, rec):
            rec.dropped = True
            return
        self._sync(p.path, p.floor)
        # Path window (receiver step 3) and stream window (step 4): the IUT
        # must keep inside them (C21).
        c = p.floor if seq_lt(self.cum[p.path], p.floor) else self.cum[p.path]
        if seq_diff(p.psn, c) >= 256 or seq_diff(p.floor, p.psn) > 0:
            self.violate(
                "C21", f"psn {p.psn:#x} floor {p.floor:#x} outside the path window (cum {self.cum[p.path]:#x})"
            )
        s = p.stream
        d = seq_diff(p.ssn, self.cum_ssn[s])
        if d >= 128 and not self.uc:
            self.violate("C21", f"ssn {p.ssn:#x} 128 or more after cum_ssn {self.cum_ssn[s]:#x}")
        if self.rnr_policy:
            code = self.rnr_policy(p)
            if code is not None:
                rec.dropped = True
                self._apply_floor(p.path, p.floor)
                self.send_ack(p.path, flags=wire.AF_RNR, rnr_timer=code, rnr_psn=p.psn)
                return
        dup = d < 0 or p.ssn in self.ssn_seen[s]
        self._apply_floor(p.path, p.floor)
        if not dup:
            self.ssn_seen[s].add(p.ssn)
            self._place(p)
        if seq_lt(p.psn, self.cum[p.path]) or p.psn in self.got[p.path]:
            pass  # a duplicate PSN: acknowledged again
        else:
            self.got[p.path].add(p.psn)
            self._advance(p.path)
        self.echo[p.path] = p.stamp
        self.since[p.path][0] += 1
        if rec.tos == CE:
            self.since[p.path][1] += 1
        # Advance cum_ssn over received SSNs.
        while self.cum_ssn[s] in self.ssn_seen[s]:
            self.ssn_seen[s].discard(self.cum_ssn[s])
            self.cum_ssn[s] = (self.cum_ssn[s] + 1) & 0xFFFFFFFF
        self._complete(s)
        if self.auto_ack is True or (callable(self.auto_ack) and self.auto_ack(p)):
            self.send_ack(p.path)

    def _place(self, p):
        msgs = self.inmsgs[p.stream]
        m = msgs.get(p.msn)
        if m is None:
            m = msgs[p.msn] = InMsg(p)
        m.packets.append(p)
        m.buf[p.offset : p.offset + len(p.payload)] = p.payload
        m.have[p.offset] = len(p.payload)
        if p.flags & wire.F_LAST:
            m.imm = p.imm
            m.se = bool(p.flags & wire.F_SE)
        if p.op == wire.WRITE or p.op == wire.WRITE_IMM:
            o = p.va - self.mem_va + p.offset
            if 0 <= o and o + len(p.payload) <= len(self.mem) and p.rkey == self.mem_rkey:
                self.mem[o : o + len(p.payload)] = p.payload

    def _complete(self, s):
        while True:
            m = self.inmsgs[s].get(self.next_complete[s])
            if m is None or not m.whole():
                return
            m.complete = True
            self.completed[s].append(m)
            self.next_complete[s] += 1
            if s == 0 and m.op in wire.RD_ATOMIC_OPS:
                self.rd_requests[len(self.rd_requests)] = m
                if self.answer_reads:
                    self.answer(len(self.rd_requests) - 1)
            if s == 0 and m.op == wire.ATOMIC_WRITE:
                o = m.va - self.mem_va
                if 0 <= o <= len(self.mem) - 8:
                    self.mem[o : o + 8] = m.buf[:8]

    def answer(self, k, status=0, paths=None):
        """Send response k (C11): READ_RESP with the bytes the READ names, or
        ATOMIC_RESP with the target's value before the atomic (C14)."""
        m = self.rd_requests[k]
        o = m.va - self.mem_va
        if m.op == wire.READ_REQ:
            data = bytes(self.mem[o : o + m.dma_len]) if status == 0 else b""
            r = self.build(wire.READ_RESP, payload=data, stream=1, tag=status, msn=k)
        else:
            old = int.from_bytes(self.mem[o : o + 8], "little")  # the target: this host's native order
            if m.op == wire.ATOMIC_FA:
                new = (old + int.from_bytes(m.buf[:8], "big")) & ((1 << 64) - 1)
            else:
                swap, cmp = int.from_bytes(m.buf[:8], "big"), int.from_bytes(m.buf[8:16], "big")
                new = swap if old == cmp else old
            self.mem[o : o + 8] = new.to_bytes(8, "little")
            r = self.build(wire.ATOMIC_RESP, payload=old.to_bytes(8, "big"), stream=1, tag=status, msn=k)
        self.next_msn[1] = max(self.next_msn[1], k + 1)
        self.responses[k] = r
        for i in range(len(r.packets)):
            self.transmit(r, i, None if paths is None else paths[i % len(paths)])
        return r

    def sack_bits(self, path):
        bits = 0
        if self.cum[path] is None:
            return 0
        for x in self.got[path]:
            d = seq_diff(x, self.cum[path]) - 1
            if 0 <= d < 256:
                bits |= 1 << d
        return bits

    def send_ack(self, path, flags=0, rnr_timer=0, rnr_psn=0, nak_stream=0, nak_msn=0, mutate=None, tos=0):
        a = wire.Ack(
            path=path,
            inc=self.iut_inc or 1,
            dst_conn=self.iut_qpn,
            psn=nak_msn,
            stamp=self.echo[path],
            token=self.rxd.token,
            cum=self.cum[path] or 0,
            rate_hint=self.rate_hint,
            ce=min(self.since[path][1], 0xFFFF),
            acked=min(self.since[path][0], 0xFFFF),
            flags=flags,
            rnr_timer=rnr_timer,
            nak_stream=nak_stream,
            rnr_psn=rnr_psn,
            sack=self.sack_bits(path),
            shared=self.shared,
        )
        self.since[path] = [0, 0]
        if self.ack_mutate:
            self.ack_mutate(a)
        if mutate:
            mutate(a)
        if self.bundle_acks > 1 and not (mutate or self.ack_mutate or flags or tos):
            old = self._held.pop(path, None)
            if old is not None:
                a.acked = min(a.acked + old.acked, 0xFFFF)
                a.ce = min(a.ce + old.ce, 0xFFFF)
            self._held[path] = a
            if len(self._held) >= min(self.bundle_acks, wire.MAX_ACK_BUNDLE):
                self.flush_acks()
            return a
        self.flush_acks()
        self.net.send(wire.encode(a), self.port_of(path), tos)
        return a

    def flush_acks(self):
        """Send the held ACKs as one bundle, from its first ACK's path's port (C4)."""
        if not self._held:
            return
        held, self._held = list(self._held.values()), {}
        self.bundles_sent.append(held)
        self.net.send(b"".join(wire.encode(a) for a in held), self.port_of(held[0].path), 0)

    def on_ack(self, rec, a):
        if a.token != self.txd.token:
            self.violate("C5", f"ACK token {a.token:#x}, expected {self.txd.token:#x}")
        if a.inc != self.inc:
            self.violate("C6", f"ACK inc {a.inc:#x}, not the peer's incarnation {self.inc:#x}")
        if rec.tos != 0 and rec.ride is None:
            self.violate("C20", f"ACK sent with ECN {rec.tos}, not Not-ECT")
        if rec.dport != self.net.port:
            self.violate("C3", f"ACK to port {rec.dport}")
        self.acks.append((rec, a))
        if a is (rec.bundle or (a,))[0]:
            # A bundle leaves from its first ACK's path's port (C4).
            self.ack_sport[a.path] = rec.sport
        if self.ack_hook:
            self.ack_hook(a)
        path = a.path
        if path >= 64:
            self.violate("C9", f"ACK path {path}")
            return
        sacked = set(a.sacked())
        for psn in list(self.out[path]):
            m, i = self.out[path][psn]
            if a.flags & (wire.AF_RNR | wire.AF_NAK) and psn == a.rnr_psn:
                continue
            if seq_lt(psn, a.cum) or psn in sacked:
                m.acked.add(i)
                del self.out[path][psn]
        if a.flags & wire.AF_NAK and a.flags & wire.AF_MSG:
            for m in self.sent_msgs:
                if m.stream == a.nak_stream and m.msn == a.psn:
                    m.nak = a

    # ---- waiting -----------------------------------------------------------
    def wait_acked(self, msgs, timeout=10.0):
        if not isinstance(msgs, (list, tuple)):
            msgs = [msgs]
        return self.pump(timeout, lambda: all(m.done or m.nak for m in msgs))

    def wait_complete(self, stream, n, timeout=10.0):
        """Until the IUT's stream has n messages complete at the peer."""
        return self.pump(timeout, lambda: len(self.completed[stream]) >= n)

    def iut_data(self, since=0):
        return [p for _, p in self.data_rx[since:]]
