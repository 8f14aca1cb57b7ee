# SPDX-License-Identifier: GPL-2.0
"""Client of the implementation's verbs agent (tools/compliance/agent/mr-agent.c:
one command a line, one reply a line, `ok key=value ...` or `err message`)."""

import socket
import time


class AgentError(Exception):
    pass


class Agent:
    def __init__(self, host, port=18600, timeout=60, connect_for=120):
        end = time.time() + connect_for
        while True:
            try:
                self.s = socket.create_connection((host, port), timeout=5)
                break
            except OSError:
                if time.time() > end:
                    raise
                time.sleep(0.5)
        self.s.settimeout(timeout)
        self.f = self.s.makefile("rwb")

    def raw(self, line):
        self.f.write(line.encode() + b"\n")
        self.f.flush()
        r = self.f.readline().decode().rstrip("\n")
        if not r:
            raise AgentError(f"agent closed the connection after: {line[:120]}")
        return r

    def cmd(self, verb, **kw):
        """Send VERB key=value...; return the reply's fields as a dict of str,
        raise AgentError on `err`."""
        line = " ".join([verb] + [f"{k}={v}" for k, v in kw.items() if v is not None])
        r = self.raw(line)
        if r.startswith("err"):
            raise AgentError(f"{line[:200]} -> {r}")
        out = {}
        for tok in r.split()[1:]:
            k, _, v = tok.partition("=")
            out[k] = v
        return out

    def try_cmd(self, verb, **kw):
        """cmd(), but return (None, message) instead of raising."""
        try:
            return self.cmd(verb, **kw), None
        except AgentError as e:
            return None, str(e)

    # Conveniences over the protocol.
    def info(self):
        return self.cmd("info")

    def mr(self, length, access=None):
        r = self.cmd("mr", len=length, access=access)
        return {
            "id": int(r["mr"]),
            "addr": int(r["addr"], 0),
            "rkey": int(r["rkey"], 0),
            "lkey": int(r["lkey"], 0),
            "len": int(r["len"]),
        }

    def put(self, mr, off, data: bytes):
        self.cmd("put", mr=mr["id"], off=off, hex=data.hex() or None)

    def get(self, mr, off, length) -> bytes:
        return bytes.fromhex(self.cmd("get", mr=mr["id"], off=off, len=length).get("hex", ""))

    def qp(self, qtype="rc", **kw):
        r = self.cmd("qp", type=qtype, **kw)
        return {"id": int(r["qp"]), "qpn": int(r["qpn"], 0), "type": qtype}

    def poll(self, qp, n=1, ms=2000):
        r = self.cmd("poll", qp=qp["id"], n=n, ms=ms)
        wcs = []
        for w in filter(None, r.get("wc", "").split(",")):
            wr, st, op, bl, imm, fl, src = w.split(":")
            wcs.append(
                {
                    "wr": int(wr, 0),
                    "status": int(st, 0),
                    "opcode": int(op, 0),
                    "byte_len": int(bl, 0),
                    "imm": int(imm, 0),
                    "flags": int(fl, 0),
                    "src_qp": int(src, 0),
                }
            )
        return wcs

    def counters(self):
        return {k: int(v, 0) for k, v in self.cmd("counters").items()}

    def state(self, qp):
        return self.cmd("state", qp=qp["id"])["state"]


# ibv_wc_status / ibv_wc_opcode numbers (libibverbs verbs.h), for messages.
WC_SUCCESS, WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR, WC_LOC_PROT_ERR = 0, 1, 2, 4
WC_WR_FLUSH_ERR, WC_BAD_RESP_ERR, WC_REM_INV_REQ_ERR, WC_REM_ACCESS_ERR = 5, 7, 9, 10
WC_RETRY_EXC_ERR, WC_RNR_RETRY_EXC_ERR = 12, 13
WC_OPC = {"send": 0, "write": 1, "read": 2, "cas": 3, "faa": 4, "recv": 128, "recv_imm": 129}
