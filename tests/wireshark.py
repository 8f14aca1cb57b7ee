#!/usr/bin/env python3
# Checks of the Wireshark dissector (tools/wireshark/metaroce.lua) with tshark.
#
#   wireshark.py fields PCAP EXPECT     every field of every frame against the
#                                       reference decoder's values (the files of
#                                       `cargo run -p metaroce-proto --example
#                                       wire_pcap`); used by tests/wireshark.sh
#   wireshark.py selftest PCAP EXPECT TMPDIR  the fields check must fail on a wrong
#                                       expected value and on a truncated datagram
#   wireshark.py capture RUNDIR         the captures of tests/guest/capture.sh
#                                       against what the guests logged; used by
#                                       tests/capture-check.sh
#
# Exits non-zero, with the mismatches, when a check fails.
import collections
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LUA = os.path.join(REPO, "tools", "wireshark", "metaroce.lua")
# The drop reasons the dissector flags (one expert info each).
REASONS = ["truncated", "bad_version", "unknown_type", "unknown_op", "bad_flags",
           "length_mismatch", "bad_offset", "bad_path", "wrong_connection"]
AGG = "|"


def tshark(pcap, fields, two_pass=True, display_filter=None):
    """Runs tshark with the dissector; returns one dict per frame: field -> list of values."""
    cmd = ["tshark", "-n", "-X", "lua_script:" + LUA, "-r", pcap, "-T", "fields",
           "-E", "occurrence=a", "-E", "aggregator=" + AGG, "-E", "separator=/t"]
    if two_pass:
        cmd.insert(1, "-2")
    if display_filter:
        cmd += ["-Y", display_filter]
    for f in fields:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True)
    err = "\n".join(l for l in r.stderr.splitlines() if "dangerous" not in l)
    if r.returncode != 0 or err.strip():
        sys.exit("tshark failed (exit %d):\n%s" % (r.returncode, err))
    rows = []
    for line in r.stdout.splitlines():
        vals = line.split("\t")
        vals += [""] * (len(fields) - len(vals))
        rows.append({f: (v.split(AGG) if v != "" else []) for f, v in zip(fields, vals)})
    return rows


def same(key, want, got):
    """Whether tshark's values `got` (a list) show the expected value `want` (a string)."""
    if key in ("metaroce.sack.psn",) or key.startswith("metaroce.bundle."):
        return [int(x) for x in want.split(",") if x] == [int(x, 0) for x in got]
    if len(got) != 1:
        return False
    g = got[0]
    if key == "metaroce.payload":
        return g.replace(":", "").lower() == want.lower()
    if re.fullmatch(r"-?\d+", want):
        try:
            return int(g, 0) == int(want)
        except ValueError:
            return g in ("True", "False") and int(g == "True") == int(want)
    return g == want


def check_fields(pcap, expect_path):
    expect = []
    for line in open(expect_path):
        kv = dict(x.split("=", 1) for x in line.rstrip("\n").split("\t"))
        expect.append(kv)
    keys = sorted({k for e in expect for k in e if k.startswith("metaroce.")})
    fields = (["frame.number", "frame.protocols", "_ws.malformed", "_ws.expert.message",
               "metaroce.drop"] + ["metaroce.expert." + r for r in REASONS]
              + [k for k in keys if k != "metaroce.drop"])
    rows = tshark(pcap, fields)
    bad = []
    n_fields = n_good = n_bad = n_none = 0
    if len(rows) != len(expect):
        bad.append("tshark shows %d frames, %d expected" % (len(rows), len(expect)))
    for e, r in zip(expect, rows):
        fr = e["frame"]
        protos = (r["frame.protocols"] or [""])[0].split(":")
        if e["proto"] == "none":
            n_none += 1
            if "metaroce" in protos:
                bad.append("frame %s: decoded as metaroce (%s), must not be" % (fr, protos))
            continue
        if "metaroce" not in protos:
            bad.append("frame %s: not decoded as metaroce (%s)" % (fr, ":".join(protos)))
            continue
        if e["drop"] != "-":
            n_bad += 1
            reason = e["drop"]
            if r["metaroce.drop"] != [reason]:
                bad.append("frame %s: metaroce.drop %s, expected %s" % (fr, r["metaroce.drop"], reason))
            if not r["metaroce.expert." + reason]:
                bad.append("frame %s: no expert info metaroce.expert.%s" % (fr, reason))
            if not r["_ws.malformed"]:
                bad.append("frame %s: not marked malformed" % fr)
            # A bad_path datagram decodes: its fields are checked below too.
            if reason != "bad_path":
                continue
        else:
            n_good += 1
            for k in ["metaroce.drop", "_ws.malformed", "_ws.expert.message"]:
                if r[k]:
                    bad.append("frame %s: well-formed, but %s = %s" % (fr, k, r[k]))
        for k, want in e.items():
            if not k.startswith("metaroce.") or k == "metaroce.drop":
                continue
            n_fields += 1
            if not same(k, want, r[k]):
                bad.append("frame %s: %s = %s, expected %s" % (fr, k, AGG.join(r[k]) or "(absent)", want))
    print("tshark decoded %d frames: %d well-formed MetaRoCE, %d malformed (drop reason and "
          "expert info checked), %d not MetaRoCE; %d field values compared"
          % (len(rows), n_good, n_bad, n_none, n_fields))
    return bad


def selftest(pcap, expect_path, tmpdir):
    """The fields check must catch (1) wrong expected values (frame 1's PSN; the mode
    of the first shared connection's datagram), (2) a well-formed datagram cut short
    by one byte (IP and UDP lengths adjusted); (3) a capture with a 96-byte snapshot
    length decodes without a Lua error."""
    lines = open(expect_path).read().splitlines()
    # (1) frame 1's PSN, plus one; the first frame expecting shared=1, 0.
    first = lines[0].split("\t")
    for n, kv in enumerate(first):
        if kv.startswith("metaroce.psn="):
            first[n] = "metaroce.psn=%d" % ((int(kv.split("=")[1]) + 1) % 2**32)
    lines1 = ["\t".join(first)] + lines[1:]
    shared = next(i for i, l in enumerate(lines) if "\tmetaroce.shared=1" in l)
    lines1[shared] = lines1[shared].replace("\tmetaroce.shared=1", "\tmetaroce.shared=0")
    wrong = os.path.join(tmpdir, "wrong.expect")
    open(wrong, "w").write("\n".join(lines1) + "\n")
    bad1 = check_fields(pcap, wrong)
    ok1 = (len(bad1) == 2 and bad1[0] == "frame 1: metaroce.psn = %s, expected %s"
           % (re.search(r"metaroce.psn=(\d+)", lines[0]).group(1), first_psn(first))
           and re.fullmatch(r"frame %d: metaroce.shared = (1|True), expected 0" % (shared + 1),
                            bad1[1]) is not None)
    print("selftest: a wrong expected PSN in frame 1, shared 0 in frame %d -> %s"
          % (shared + 1, bad1 or "no mismatch"))
    # (2) the first well-formed DATA with a payload, one byte short.
    target = next(i for i, l in enumerate(lines)
                  if "drop=-" in l and "metaroce.type=1\t" in l and "metaroce.payload=" in l)
    data = bytearray(open(pcap, "rb").read())
    pos, out = 24, bytearray(data[:24])
    for i in range(len(lines)):
        incl = int.from_bytes(data[pos + 8:pos + 12], "little")
        rec = bytearray(data[pos + 16:pos + 16 + incl])
        if i == target:
            rec = rec[:-1]
            rec[16:18] = (int.from_bytes(rec[16:18], "big") - 1).to_bytes(2, "big")  # IP total length
            rec[38:40] = (int.from_bytes(rec[38:40], "big") - 1).to_bytes(2, "big")  # UDP length
            rec[24:26] = b"\0\0"  # IP checksum: not checked by tshark by default
        out += data[pos:pos + 8] + len(rec).to_bytes(4, "little") * 2 + rec
        pos += 16 + incl
    cut = os.path.join(tmpdir, "cut.pcap")
    open(cut, "wb").write(out)
    bad2 = check_fields(cut, expect_path)
    fr = target + 1
    ok2 = any(b.startswith("frame %d: well-formed, but metaroce.drop = ['length_mismatch']" % fr)
              for b in bad2)
    print("selftest: frame %d cut by one byte -> %s" % (fr, bad2[:3] or "no mismatch"))
    # (3) every frame captured to 96 bytes only (tcpdump -s 96): decoded as far as it
    # was captured, no Lua error, the cut ones noted, none called malformed for it.
    pos, out = 24, bytearray(data[:24])
    out[16:20] = (96).to_bytes(4, "little")
    while pos < len(data):
        incl = int.from_bytes(data[pos + 8:pos + 12], "little")
        keep = min(incl, 96)
        out += data[pos:pos + 8] + keep.to_bytes(4, "little") + data[pos + 12:pos + 16]
        out += data[pos + 16:pos + 16 + keep]
        pos += 16 + incl
    snap = os.path.join(tmpdir, "snap96.pcap")
    open(snap, "wb").write(out)
    r = subprocess.run(["tshark", "-n", "-X", "lua_script:" + LUA, "-r", snap, "-V"],
                       capture_output=True, text=True)
    lua_errors = r.stdout.count("Lua Error")
    noted = len(re.findall(r"\d+ of \d+ bytes captured", r.stdout))
    ok3 = r.returncode == 0 and lua_errors == 0 and noted > 0
    print("selftest: every frame captured to 96 bytes -> %d Lua errors, %d frames noted as cut short"
          % (lua_errors, noted))
    bad = []
    if not ok1:
        bad.append("selftest: the wrong expected values were not caught exactly")
    if not ok2:
        bad.append("selftest: a truncated datagram was not caught as length_mismatch")
    if not ok3:
        bad.append("selftest: a capture cut to 96 bytes a frame (tshark exit %d, %d Lua errors, %d noted)"
                   % (r.returncode, lua_errors, noted))
    return bad


def first_psn(kvs):
    return next(kv.split("=")[1] for kv in kvs if kv.startswith("metaroce.psn="))


# ---------------------------------------------------------------------------
# The captures of tests/guest/capture.sh.

def counters(path):
    words = open(path).read().split()
    return {words[i]: int(words[i + 1]) for i in range(len(words) - 1)
            if re.fullmatch(r"[a-z_0-9]+", words[i]) and re.fullmatch(r"\d+", words[i + 1])}


def train_of(rundir, i):
    """The module's `train` in guest i (train.i, as the kernel takes it: 1-16; 16 if unknown)."""
    try:
        v = int(open(os.path.join(rundir, "train.%d" % i)).read().split()[0])
    except (OSError, ValueError, IndexError):
        return 16
    return min(max(v, 1), 16)


def netem_stats(path):
    """(packets sent, packets dropped) of the netem qdisc in `tc -s qdisc show` output."""
    text = open(path).read()
    m = re.search(r"qdisc netem .*?\n\s*Sent (\d+) bytes (\d+) pkt \(dropped (\d+)", text)
    if not m:
        sys.exit("no netem statistics in %s" % path)
    return int(m.group(2)), int(m.group(3))


def rc_qps(path):
    """The RC QPs `rdma -dd resource show qp` listed: {lqpn: (rqpn, paths, {source ports})}."""
    qps = {}
    for line in open(path):
        m = re.search(r"lqpn (\d+) rqpn (\d+) type RC", line)
        if not m:
            continue
        k = re.search(r"drv_paths (\d+)", line)
        q = qps.setdefault(int(m.group(1)), [int(m.group(2)), 0, set()])
        q[1] = max(q[1], int(k.group(1)) if k else 0)
        q[2].update(int(p) for p in re.findall(r"drv_p\d+_sport (\d+)", line))
    return qps


def check_capture(rundir):
    """Each guest captured both directions on its link (tests/guest/capture.sh). Every
    frame must decode as MetaRoCE with no expert info and name the other guest's QP,
    one connection; per guest, what it sent (captured leaving it) and received
    (captured arriving) must match its module's counters and netem's; and the
    messages must match what the integrity client logged (check_messages)."""
    bad = []
    fields = ["frame.number", "frame.protocols", "ip.src", "udp.srcport", "udp.length",
              "_ws.malformed", "_ws.expert.message", "metaroce.drop", "metaroce.type",
              "metaroce.shared",
              "metaroce.dst_conn", "metaroce.flags.retx", "metaroce.acked", "metaroce.ce",
              "metaroce.conn", "metaroce.conn.key", "metaroce.path", "metaroce.op",
              "metaroce.stream", "metaroce.msn", "metaroce.msg_len", "metaroce.reth.dma_len",
              "metaroce.offset", "metaroce.payload_len", "metaroce.ride"]
    ip = {i: open(os.path.join(rundir, "ip.%d" % i)).read().strip() for i in (1, 2)}
    qps = {i: rc_qps(os.path.join(rundir, "qp.%d" % i)) for i in (1, 2)}
    for i in (1, 2):
        if len(qps[i]) != 1:
            bad.append("guest %d: %d RC QPs seen during the run, expected 1: %s" % (i, len(qps[i]), qps[i]))
    if bad:
        return bad
    qpn = {i: next(iter(qps[i])) for i in (1, 2)}
    for i in (1, 2):
        if qps[i][qpn[i]][0] != qpn[3 - i]:
            bad.append("guest %d: QP %d's remote QPN %d is not guest %d's QPN %d"
                       % (i, qpn[i], qps[i][qpn[i]][0], 3 - i, qpn[3 - i]))
    want_key = " <-> ".join(sorted("%s/0x%06x" % (ip[j], qpn[j]) for j in (1, 2)))
    messages = {}  # (capturing guest, sender address, stream, MSN) -> (op, msg_len, dma_len)
    pieces = collections.defaultdict(set)  # the same key -> {(offset, payload_len)}
    seen = {}  # (capturing guest, sending guest) -> [datagrams]
    total = 0
    for i in (1, 2):
        rows = tshark(os.path.join(rundir, "capture.%d.pcap" % i), fields)
        total += len(rows)
        conns = set()
        modes = set()  # the SHARED bit of the connection's datagrams
        def tally_frame(r, i, fr):
            src = (r["ip.src"] or ["?"])[0]
            j = 1 if src == ip[1] else 2 if src == ip[2] else None
            if j is None:
                bad.append("guest %d frame %s: from %s, neither guest" % (i, fr, src))
                return
            if int(r["metaroce.dst_conn"][0], 0) != qpn[3 - j]:
                bad.append("guest %d frame %s: dst_conn %s, but guest %d's QPN is %d"
                           % (i, fr, r["metaroce.dst_conn"][0], 3 - j, qpn[3 - j]))
            conns.update(r["metaroce.conn.key"])
            # metaroce.type is the type bits alone (a shared connection's DATA is 1).
            t = int(r["metaroce.type"][0])
            if t in (1, 2, 3):
                modes.add(r["metaroce.shared"][0] in ("1", "True"))
            # A DATA riding after ACKs (Documentation/transport.rst, "ACKs riding on
            # DATA"): the frame's type is the ACKs', its DATA fields the DATA's.
            ride = bool(r["metaroce.ride"])
            if t == 1 or ride:
                key = (i, src, int(r["metaroce.stream"][0]), int(r["metaroce.msn"][0]))
                m = (int(r["metaroce.op"][0]), int(r["metaroce.msg_len"][0]),
                     int(r["metaroce.reth.dma_len"][0]) if r["metaroce.reth.dma_len"] else None)
                if messages.setdefault(key, m) != m:
                    bad.append("guest %d frame %s: message %s is %s here, %s before"
                               % (i, fr, key[1:], m, messages[key]))
                pieces[key].add((int(r["metaroce.offset"][0]), int(r["metaroce.payload_len"][0])))
            seen.setdefault((i, j), []).append({
                "type": t, "ride": ride,
                "retx": (t == 1 or ride) and r["metaroce.flags.retx"] == ["1"],
                "bytes": int(r["udp.length"][0]) - 8, "sport": int(r["udp.srcport"][0]),
                "path": int(r["metaroce.path"][0]),
                "acked": int(r["metaroce.acked"][0]) if r["metaroce.acked"] else None,
                "ce": sum(int(x) for x in r["metaroce.ce"])})

        for r in rows:
            fr = r["frame.number"][0]
            protos = (r["frame.protocols"] or [""])[0].split(":")
            if "metaroce" not in protos:
                bad.append("guest %d frame %s: not decoded as metaroce (%s)" % (i, fr, ":".join(protos)))
                continue
            flagged = False
            for k in ("_ws.malformed", "_ws.expert.message", "metaroce.drop"):
                if r[k]:
                    flagged = True
                    bad.append("guest %d frame %s: %s = %s" % (i, fr, k, AGG.join(r[k])))
            # A frame the dissector flagged is reported above, not tallied: its
            # fields may be missing or untrustworthy.
            if flagged:
                continue
            try:
                tally_frame(r, i, fr)
            except (IndexError, ValueError) as e:
                bad.append("guest %d frame %s: a field is missing or not a number (%s)" % (i, fr, e))
        if conns != {want_key}:
            bad.append("guest %d: connections %s, expected the one %s" % (i, sorted(conns), want_key))
        # Both ends run one mode: a datagram of the other is dropped (mode_mismatch).
        if len(modes) > 1:
            bad.append("guest %d: datagrams of both modes, shared and not, in one connection" % i)
        mode = {frozenset([True]): "shared", frozenset([False]): "per QP pair"}.get(
            frozenset(modes), "mixed" if modes else "none seen")
        print("guest %d (%s, QPN %d): %d frames decoded as MetaRoCE, connection %s (%s)"
              % (i, ip[i], qpn[i], len(rows), sorted(conns), mode))
    for i in (1, 2):
        eg = seen.get((i, i), [])
        ing = seen.get((i, 3 - i), [])
        c0 = counters(os.path.join(rundir, "counters.%d.before" % i))
        c1 = counters(os.path.join(rundir, "counters.%d.after" % i))
        d = {k: c1[k] - c0.get(k, 0) for k in c1}
        sent, dropped = netem_stats(os.path.join(rundir, "netem.%d" % i))
        paths = qps[i][qpn[i]][1]
        n = collections.Counter(e["type"] for e in eg)
        n_retx = sum(1 for e in eg if e["retx"])
        eg_bytes = sum(e["bytes"] for e in eg)
        # destroy_qp repeats the ACK of every path once (rust/verbs/qp/control.rs),
        # counted like any datagram sent. They end the capture, alone or bundled
        # (72 bytes an ACK, Documentation/transport.rst "ACK bundles"): counted by
        # ACK, not by datagram (a bundle of 8 is one datagram).
        tail = 0
        for e in reversed(eg):
            if e["type"] != 2 or e["ride"] or e["acked"] != 0:
                break
            tail += max(1, e["bytes"] // 72)
        print("guest %d sent (captured): %d DATA (%d RETX), %d ACK (%d with a DATA riding), %d PROBE, "
              "%d DATAGRAM, %d "
              "UDP payload bytes, ending in %d ACKs of nothing new; netem: %d sent, %d dropped; "
              "module: tx_packets %d, tx_bytes %d, retransmits %d, probes %d, paths %d; "
              "received (captured): %d; module: rx_packets %d, unknown_qpn_drops %d"
              % (i, n[1], n_retx, n[2], sum(1 for e in eg if e["ride"]), n[3], n[4], eg_bytes, tail,
                 sent, dropped,
                 d["tx_packets"], d["tx_bytes"], d["retransmits"], d["probes"], paths,
                 len(ing), d["rx_packets"], d["unknown_qpn_drops"]))
        # netem drops a run of DATA (one GSO skb, `tx_gso_bursts`) as one
        # packet: the datagrams lost at netem are then between its drops and
        # `train` times them (Documentation/device.rst, "Trains").
        lost = d["tx_packets"] - len(eg)
        if d.get("tx_gso_bursts", 0) == 0:
            lost_ok, lost_what = lost == dropped, "tx_packets = captured + netem drops"
        else:
            lost_ok = dropped <= lost <= dropped * train_of(rundir, i)
            lost_what = ("tx_packets = captured + the datagrams of netem's drops (%d drops, %d "
                         "datagrams; %d GSO bursts sent)" % (dropped, lost, d["tx_gso_bursts"]))
        checks = [
            ("datagrams captured leaving guest %d = netem's packets sent" % i, len(eg) == sent),
            ("%s (incl. the %d ACKs destroy_qp repeats)" % (lost_what, paths), lost_ok),
            ("the capture ends in %d (less netem drops) ACKs of nothing new" % paths,
             paths - dropped <= tail),
            ("captured RETX DATA <= retransmits <= captured RETX + datagrams lost at netem",
             n_retx <= d["retransmits"] <= n_retx + max(lost, dropped)),
            ("captured PROBEs <= probes <= captured PROBEs + netem drops",
             n[3] <= d["probes"] <= n[3] + dropped),
            ("captured UDP payload bytes <= tx_bytes", eg_bytes <= d["tx_bytes"]),
            ("sum of the captured ACKs' ce <= ecn_ce_echoed",
             sum(e["ce"] for e in eg) <= d["ecn_ce_echoed"]),
            ("DATA and ACKs captured", n[1] > 0 and n[2] > 0),
            ("datagrams captured arriving = rx_packets + unknown_qpn_drops",
             len(ing) == d["rx_packets"] + d["unknown_qpn_drops"]),
            # The link between the guests (a QEMU socket netdev) may lose, never add.
            ("what guest %d captured arriving <= what guest %d captured leaving (%d lost on the link)"
             % (i, 3 - i, len(seen.get((3 - i, 3 - i), [])) - len(ing)),
             len(ing) <= len(seen.get((3 - i, 3 - i), []))),
        ]
        if dropped == 0:
            checks.append(("no netem drop: tx_bytes = captured payload bytes",
                           eg_bytes == d["tx_bytes"]))
        for what, ok in checks:
            print("  %s - %s" % ("ok" if ok else "NOT OK", what))
            if not ok:
                bad.append("guest %d: %s" % (i, what))
        ports = qps[i][qpn[i]][2]
        used = {e["sport"] for e in eg if e["type"] in (1, 3)}
        path_ix = {e["path"] for e in eg if e["type"] in (1, 3)}
        print("  DATA/PROBE on %d paths (%s) from %d source ports%s"
              % (len(path_ix), sorted(path_ix), len(used),
                 "" if used <= ports else "; not in the polled `rdma resource` views (moved "
                 "between polls): %s" % sorted(used - ports)))
    # Every message was delivered: its packets in each capture cover its bytes.
    n_cov = 0
    for key, (op, msg_len, _) in messages.items():
        end = 0
        for off, n in sorted(pieces[key]):
            if off > end:
                break
            end = max(end, off + n)
        if end != msg_len:
            bad.append("guest %d's capture: message %s (%s, %d B): its packets cover %d B"
                       % (key[0], key[1:], OPS[op], msg_len, end))
        n_cov += 1
    print("%d messages in the two captures, each covered by its packets' offset and "
          "payload_len" % n_cov)
    bad += check_messages(rundir, messages)
    print("%d frames decoded in all; %d problems" % (total, len(bad)))
    return bad


# Integrity's per-kind tallies (its client's TAP lines) and the ops carrying them.
KINDS = [("SEND", [0]), ("SEND_WITH_IMM", [1]), ("RDMA_WRITE", [2]), ("RDMA_WRITE_WITH_IMM", [3]),
         ("RDMA_READ", [4, 5]), ("ATOMIC_FETCH_AND_ADD", [7]), ("ATOMIC_CMP_AND_SWP", [6])]
OPS = ["SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ_REQ", "READ_RESP", "ATOMIC_CS",
       "ATOMIC_FA", "ATOMIC_RESP"]


def check_messages(rundir, messages):
    """The messages each capture shows (distinct sender, stream, MSN), by op, against the
    work requests and bytes the integrity client logged per kind: one message per WR
    (a READ is a READ_REQ naming its length and a READ_RESP carrying it, an atomic one
    request and one ATOMIC_RESP), the bytes its messages carry (atomics: 8 B a WR)."""
    logged = {}
    for i in (1, 2):
        for line in open(os.path.join(rundir, "tap.%d" % i)):
            m = re.search(r"mr0: (\w+): \d+ ops, (\d+) WRs \(\d+ bursts\), (\d+) B", line)
            if m:
                logged[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    if len(logged) != len(KINDS):
        return ["integrity's per-kind tallies not found in tap.1/tap.2 (%s)" % sorted(logged)]
    bad = []
    for i in (1, 2):
        n = collections.Counter()
        size = collections.Counter()
        for key, (op, msg_len, dma_len) in messages.items():
            if key[0] != i:
                continue
            n[op] += 1
            size[op] += dma_len if op == 4 else msg_len
        print("guest %d's capture: messages by op: %s" % (i, ", ".join(
            "%s %d (%d B)" % (OPS[o], n[o], size[o]) for o in sorted(n))))
        for kind, ops in KINDS:
            wrs, nbytes = logged[kind]
            for op in ops:
                want_bytes = 8 * wrs if op in (6, 7) else nbytes
                got_bytes = 8 * n[op] if op in (6, 7) else size[op]
                ok = n[op] == wrs and got_bytes == want_bytes
                print("  %s - %s: %d WRs, %d B logged; %s messages captured: %d, %d B"
                      % ("ok" if ok else "NOT OK", kind, wrs, nbytes, OPS[op], n[op], got_bytes))
                if not ok:
                    bad.append("guest %d's capture: %s messages %d (%d B), integrity logged %s: %d WRs (%d B)"
                               % (i, OPS[op], n[op], got_bytes, kind, wrs, want_bytes))
        atomics = logged["ATOMIC_FETCH_AND_ADD"][0] + logged["ATOMIC_CMP_AND_SWP"][0]
        ok = n[8] == atomics
        print("  %s - ATOMIC_RESP messages captured: %d, atomics logged: %d"
              % ("ok" if ok else "NOT OK", n[8], atomics))
        if not ok:
            bad.append("guest %d's capture: %d ATOMIC_RESP messages, %d atomics logged" % (i, n[8], atomics))
        other = set(n) - {0, 1, 2, 3, 4, 5, 6, 7, 8}
        if other:
            bad.append("guest %d's capture: messages of ops integrity does not use: %s" % (i, sorted(other)))
    return bad


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "fields":
        bad = check_fields(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "selftest":
        bad = selftest(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "capture":
        bad = check_capture(sys.argv[2])
    else:
        sys.exit("usage: wireshark.py fields PCAP EXPECT | selftest PCAP EXPECT TMPDIR | capture RUNDIR")
    for b in bad[:50]:
        print("MISMATCH " + b)
    if len(bad) > 50:
        print("... and %d more" % (len(bad) - 50))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
