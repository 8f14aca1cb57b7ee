#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host self-test of the suite's own codec and key derivation, against the
worked examples of Documentation/transport-examples.rst (what the reference
sends): every datagram shown there is decoded by mrc/wire.py, its fields
compared with the example's decoded line, and re-encoded to the same bytes;
the set-up table's keys, tokens, first PSNs and SSNs are derived by
mrc/ident.py. A disagreement is a fault in the suite, the spec or the
reference. No guest needed: tests/host.sh runs it.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mrc import wire  # noqa: E402
from mrc.ident import Direction, gid_bytes  # noqa: E402

doc = open(
    sys.argv[1]
    if len(sys.argv) > 1
    else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Documentation", "transport-examples.rst")
).read()
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print(f"not ok - {what}")


# The set-up table.
def field(name):
    return re.search(name + r"\s+(.*)", doc, re.M).group(1)


ga, qa, pa = re.search(r"GID ``::ffff:([\d.]+)``, QPN (0x[0-9a-f]+), ``sq_psn`` (0x[0-9a-f]+)", field("^A")).groups()
gb, qb, pb = re.search(r"GID ``::ffff:([\d.]+)``, QPN (0x[0-9a-f]+), ``sq_psn`` (0x[0-9a-f]+)", field("^B")).groups()
ab = Direction(gid_bytes(ga), gid_bytes(gb), int(qa, 16), int(qb, 16), int(pa, 16))
ba = Direction(gid_bytes(gb), gid_bytes(ga), int(qb, 16), int(qa, 16), int(pb, 16))
for d, row in ((ab, "Key A → B"), (ba, "Key B → A")):
    key, tok = re.search(r"``(0x[0-9a-f]+)`` \(token ``(0x[0-9a-f]+)``\)", field(row)).groups()
    check(d.key == int(key, 16) and d.token == int(tok, 16), f"{row}: {d.key:#x}")
for d, pre in ((ab, "A → B"), (ba, "B → A")):
    psns = re.findall(r"path (\d) ``(0x[0-9a-f]+)``", field(pre + " first PSNs"))
    ssns = re.findall(r"stream (\d) ``(0x[0-9a-f]+)``", field(pre + " first SSNs"))
    check(psns and all(d.first_psn(int(i)) == int(v, 16) for i, v in psns), f"{pre} first PSNs")
    check(ssns and all(d.first_ssn(int(i)) == int(v, 16) for i, v in ssns), f"{pre} first SSNs")


def fields(text, p):
    """The decoded line `text` of one datagram (or of one ACK of a bundle) against `p`."""
    kind = text.split()[0]
    check(wire.TYPE_NAMES[p.type] == kind, f"{text[:60]}: type {kind}")
    kv = dict(
        re.findall(
            r"\b(inc|path|psn|stream|ssn|msn|offset|msg_len|tag|floor|cum|rate_hint|ce|acked|"
            r"rnr_timer|rnr_psn|dst_qpn|src_qpn|qkey|stamp) (0x[0-9a-f]+|\d+)",
            text,
        )
    )
    names = {"dst_qpn": "dst_conn", "rnr_timer": "rnr_timer"}
    for k, v in kv.items():
        attr = names.get(k, k)
        if hasattr(p, attr):
            check(getattr(p, attr) == int(v, 0), f"{text[:60]}: {k} {v} (decoded {getattr(p, attr)})")
    sk = re.search(r"sack \[([^\]]*)\]", text)
    if sk and p.type == wire.ACK:
        want = [int(x, 16) for x in re.findall(r"0x[0-9a-f]+", sk.group(1))]
        check(p.sacked() == want, f"{text[:60]}: sack {want}")
    if p.type == wire.DATA:
        op = re.search(r" op (\w+)", text).group(1)
        check(wire.OP_NAMES[p.op] == op, f"{text[:60]}: op {op}")


# Every datagram: "N. X → Y: TYPE key value ..." then "::" and the hex lines.
n = 0
for m in re.finditer(
    r"^\d+\. [AB] → [AB]: ([\s\S]*?)\n\n +::\n\n((?:     [0-9a-f]{4}  [^\n]*\n)+)"
    r"(?:           … (\d+) more payload bytes\n)?",
    doc,
    re.M,
):
    text, dump, more = " ".join(m.group(1).split()), m.group(2), int(m.group(3) or 0)
    raw = bytes.fromhex("".join(l[11:].strip().replace(" ", "") for l in dump.splitlines()))
    if more:
        raw += bytes(more)  # elided payload: the header's fields are what is checked
    n += 1
    try:
        p = wire.decode(raw)
    except wire.Malformed as e:
        check(False, f"{text[:60]}: decodes ({e})")
        continue
    if text.startswith("ACK bundle of ") or " ++ riding " in text:
        # "ACK bundle of N: ACK ... + ACK ...": each ACK of the bundle in turn; then,
        # after " ++ riding ", the DATA riding after them (§ACKs riding on DATA).
        text, _, riding = text.partition(" ++ riding ")
        parts = text.split(": ", 1)[1].split(" + ") if text.startswith("ACK bundle of ") else [text]
        acks, ride = wire.decode_ride(raw)
        check(len(parts) == len(acks), f"{text[:60]}: {len(parts)} ACKs, decoded {len(acks)}")
        check((ride is None) == (not riding), f"{text[:60]}: a DATA rides iff the text says so")
        again = b"".join(wire.encode(a) for a in acks) + (wire.encode(ride) if ride is not None else b"")
        check(again == raw, f"{text[:60]}: re-encodes to the same bytes")
        for part, a in zip(parts, acks):
            fields(part, a)
        if ride is not None and riding:
            fields(riding, ride)
        continue
    if not more:
        check(wire.encode(p) == raw, f"{text[:60]}: re-encodes to the same bytes")
    fields(text, p)
check(n >= 50, f"{n} datagrams found in the examples")
print(
    f"{'ok' if not fails else 'not ok'} - tools/compliance codec and keys against {n} worked-example datagrams "
    f"({fails} disagreements)"
)
sys.exit(1 if fails else 0)
