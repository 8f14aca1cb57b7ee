# SPDX-License-Identifier: GPL-2.0
"""Scenarios, their checks, TAP output and the coverage report.

A scenario is a function decorated with @scenario(name, refs): it gets a Ctx,
sets up what it needs on the implementation under test (IUT) through the
agent and on the peer, and makes checks with ctx.check(). It is one TAP line,
`ok N - name # spec: refs`, each check a diagnostic line under it; it fails
if a check fails, if it raises, or if the peer saw the IUT send anything
against the spec (a malformed datagram, a wrong token, address, port, ECN
codepoint, window: RcPeer.violations).
"""

import random
import threading
import time
import traceback

from . import spec as specmod
from . import wire
from .agent import Agent, AgentError
from .ident import gid_bytes
from .peer import Net, RcPeer

SCENARIOS = []


def scenario(name, refs, needs=()):
    """Register a scenario covering refs (ids or phrases of the spec).
    needs: capabilities of the IUT it requires ("atomic_write", "counters")."""

    def deco(fn):
        SCENARIOS.append((fn.__name__.replace("_", "-"), name, refs, needs, fn))
        return fn

    return deco


class Failed(Exception):
    pass


def counter_delta(before, after, prefixes=("rx_drop",)):
    """The counters (named with one of prefixes; all with prefixes None) that
    changed from before to after, and by how much."""
    return {
        k: v - before.get(k, 0)
        for k, v in after.items()
        if v != before.get(k, 0) and (prefixes is None or k.startswith(prefixes))
    }


class SetupError(Exception):
    """The suite cannot start: no agent, an address or port it cannot use."""


class Skip(Exception):
    """Raised by a scenario that cannot run here (reported as TAP SKIP)."""


# Seconds between two reads of the IUT's counters (Ctx.counters).
COUNTERS_FRESH = 0.025
_counters_at = 0.0


class Ctx:
    def __init__(self, args, agent, net, info):
        self.args, self.agent, self.net, self.info = args, agent, net, info
        self.checks = []
        self.notes = []
        self.shared = bool(getattr(args, "shared", False))
        self.slow = bool(getattr(args, "slow", False))
        self.peers = []
        self.qps = []

    def diag(self, msg):
        for l in str(msg).splitlines():
            print(f"#   {l}", flush=True)

    def check(self, cond, what, detail=""):
        self.checks.append((bool(cond), what))
        self.diag(f"{'ok' if cond else 'FAIL'} - {what}" + (f": {detail}" if detail and not cond else ""))
        return bool(cond)

    def should(self, cond, what, detail=""):
        """A SHOULD or a reference-kernel choice (levels "SHOULD", "kernel"):
        printed, counted in the report, never failing the scenario."""
        self.notes.append((bool(cond), what))
        self.diag(
            f"{'ok' if cond else 'NOTE (not met, not required)'} - {what}"
            + (f": {detail}" if detail and not cond else "")
        )
        return bool(cond)

    def require(self, cond, what, detail=""):
        if not self.check(cond, what, detail):
            raise Failed(what)

    # ---- set-up ------------------------------------------------------------
    def iut_gid(self):
        return self.info["gid"]

    def iut_cut(self, mtu):
        """The segment size the reference kernel cuts at for path MTU mtu (C7): its
        link's payload where mtu is its port's active MTU, else mtu; None if the agent
        does not know the IUT's link MTU."""
        link = wire.link_payload(int(self.info.get("link_mtu", 0)))
        if not link:
            return None
        return link if mtu == int(self.info.get("active_mtu", 0)) and mtu <= link < 2 * mtu else mtu

    def net_gid(self):
        """The peer's own GID (its address, C2), as the agent takes it."""
        return gid_bytes(self.net.my_ip).hex()

    def rc_pair(self, mtu=1024, paths=8, iut_psn=None, qp_kw=None, rtr_only=False, connect=True, **conn_kw):
        """An IUT RC QP (through the agent) and the peer's end of it, connected
        as C1-C7 say: the IUT's dqpn/dgid are the peer's QPN and address, its
        rq_psn the peer's sq_psn and its sq_psn what the peer expects."""
        qp = self.agent.qp("rc", **(qp_kw or {}))
        self.qps.append(qp)
        iut_psn = random.randrange(1 << 24) if iut_psn is None else iut_psn
        peer = RcPeer(self.net, qp["qpn"], iut_psn, mtu, paths=paths, shared=self.shared, log=self.diag)
        self.peers.append(peer)
        if connect:
            self.connect(qp, peer, rtr_only=rtr_only, **conn_kw)
        return peer, qp

    def connect(self, qp, peer, rtr_only=False, **conn_kw):
        kw = dict(
            dqpn=peer.my_qpn,
            dgid=peer.my_gid.hex(),
            rq_psn=peer.my_psn,
            sq_psn=peer.iut_psn,
            mtu=peer.mtu,
            max_rd_atomic=4,
            max_dest_rd_atomic=4,
            min_rnr_timer=1,
            # The verbs local ACK timeout: 14 (67 ms, a minimum; the kernel runs
            # 4x); --slow: 18 (1.07 s) for an IUT that stalls for seconds.
            timeout=18 if self.slow else 14,
        )
        kw.update(conn_kw)
        if rtr_only:
            kw["rtr_only"] = 1
        self.agent.cmd("connect", qp=qp["id"], **kw)

    def wait_wc(self, qp, peer, n=1, timeout=10.0):
        """Poll the IUT's CQ for n completions while the peer keeps answering
        (the agent's poll does not block, so ACKs are not held up)."""
        wcs = []
        end = time.monotonic() + timeout
        while len(wcs) < n and time.monotonic() < end:
            wcs += self.agent.poll(qp, n - len(wcs), 0)
            if len(wcs) < n:
                if peer is not None:
                    peer.pump(0.05)
                else:
                    time.sleep(0.05)
        return wcs

    def pumping(self, fn):
        """fn() (an agent call) in a thread while this thread keeps the peer
        answering: the IUT starts sending as a post returns, and a peer that
        waited for the agent's reply would answer late (and the IUT's timers
        would resend what was not lost)."""
        box = {}

        def run():
            try:
                box["r"] = fn()
            except BaseException as e:  # re-raised in the caller
                box["e"] = e

        t = threading.Thread(target=run)
        t.start()
        while t.is_alive():
            rec = self.net.recv(0.002)
            if rec is not None:
                self.net.dispatch(rec)
        t.join()
        if "e" in box:
            raise box["e"]
        return box.get("r")

    def post(self, qp, op, mr, off=0, length=0, wr=1, **kw):
        """Post a work request at the IUT (agent `send`), the peer answering meanwhile."""
        kw = dict(qp=qp["id"], op=op, mr=mr["id"], off=off, len=length, wr=wr, signaled=1, **kw)
        self.pumping(lambda: self.agent.cmd("send", **kw))

    def recv(self, qp, mr, off=0, length=4096, wr=100):
        self.pumping(lambda: self.agent.cmd("recv", qp=qp["id"], mr=mr["id"], off=off, len=length, wr=wr))

    def counters(self):
        """The IUT device's counters, read at least COUNTERS_FRESH seconds
        after the previous read: the RDMA core keeps a device's counters for
        RDMA_HW_STATS_DEFAULT_LIFESPAN (10 ms, in jiffies) and answers a read
        sooner than that with the values it read last, so a count taken right
        after a reply would miss what the reply's datagram changed."""
        global _counters_at
        wait = _counters_at + COUNTERS_FRESH - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        c = self.agent.counters()
        _counters_at = time.monotonic()
        return c

    def mr(self, length=65536, access=None):
        return self.agent.mr(length, access)

    def cleanup(self):
        for p in self.peers:
            self.net.ignore.add(p.my_qpn)
            self.net.peers.pop(p.my_qpn, None)
        try:
            self.agent.cmd("reset")
        except AgentError as e:
            self.diag(f"agent reset: {e}")
        # Let the IUT's last datagrams arrive and drop them.
        end = time.monotonic() + 0.2
        while time.monotonic() < end and self.net.recv(0.05):
            pass
        self.peers, self.qps = [], []

    def violations(self):
        v = [x for p in self.peers for x in p.violations]
        for rec in self.net.unclaimed:
            v.append(
                (
                    "C1",
                    f"a datagram for QPN {int.from_bytes(rec.raw[5:8], 'big'):#x}, no peer QP's: "
                    f"{rec.pkt or rec.error}",
                )
            )
        self.net.unclaimed.clear()
        return v


def run(args):
    reqs = specmod.parse(args.spec)
    # Every reference must resolve (a typo or a spec change is an error here).
    for _, _, refs, _, _ in SCENARIOS:
        for r in refs:
            specmod.resolve(reqs, r)
    print(f"# waiting for mr-agent at {args.agent}:{args.agent_port} (up to {args.agent_wait:.0f} s)", flush=True)
    try:
        agent = Agent(args.agent, args.agent_port, connect_for=args.agent_wait)
    except OSError as e:
        raise SetupError(
            f"no mr-agent at {args.agent}:{args.agent_port} after {args.agent_wait:.0f} s: {e.strerror or e}"
        )
    info = agent.info()
    try:
        net = Net(args.my_ip, args.iut_ip or info["ip"], args.port)
    except OSError as e:
        why = {
            98: f"UDP port {args.port} on {args.my_ip} is in use (a MetaRoCE device on this host?)",
            99: f"{args.my_ip} is not an address of this host",
        }.get(e.errno, e.strerror)
        raise SetupError(f"cannot bind UDP {args.my_ip}:{args.port}: {why}")
    ctx = Ctx(args, agent, net, info)
    print(f"# IUT: {info}; {'shared connections' if ctx.shared else 'a connection per QP'}", flush=True)
    selected = [s for s in SCENARIOS if not args.only or s[0] in args.only]
    results = []
    n = 0
    for name, title, refs, needs, fn in selected:
        n += 1
        ctx.checks = []
        ctx.notes = []
        lacks = [x for x in needs if x in args.without]
        if "alt_ip" in needs and not args.alt_ip:
            print(f"ok {n} - {name} # SKIP needs --alt-ip (a second address of this host)", flush=True)
            results.append((name, refs, "skip"))
            continue
        if lacks:
            print(f"ok {n} - {name} # SKIP the IUT lacks {', '.join(lacks)} (--without)", flush=True)
            results.append((name, refs, "skip"))
            continue
        print(f"# scenario {name}: {title}", flush=True)
        t0 = time.monotonic()
        err = None
        try:
            fn(ctx)
        except Skip as e:
            ctx.cleanup()
            print(f"ok {n} - {name} # SKIP {e}", flush=True)
            results.append((name, refs, "skip"))
            continue
        except Failed:
            pass
        except Exception:
            err = traceback.format_exc()
            ctx.diag(err)
        viol = ctx.violations()
        for rule, text in viol[:10]:
            ctx.diag(f"FAIL - the IUT sent against {rule}: {text}")
        ok = err is None and all(c for c, _ in ctx.checks) and not viol and ctx.checks
        ctx.cleanup()
        dt = time.monotonic() - t0
        unmet = sum(1 for c, _ in ctx.notes if not c)
        print(
            f"{'ok' if ok else 'not ok'} {n} - {name} ({len(ctx.checks)} checks"
            + (f", {len(ctx.notes)} SHOULD/kernel notes, {unmet} not met" if ctx.notes else "")
            + f", {dt:.1f} s) "
            f"# spec: {', '.join(refs)}",
            flush=True,
        )
        results.append((name, refs, "pass" if ok else "fail"))
    print(f"1..{n}", flush=True)
    if not any(r == "pass" for _, _, r in results):
        print("# no scenario passed", flush=True)
    if args.report:
        write_report(args.report, reqs, results, info)
    return all(r != "fail" for _, _, r in results) and any(r == "pass" for _, _, r in results)


def write_report(path, reqs, results, info):
    """The coverage report (Markdown): per level, every requirement, the
    scenarios that reference it and how they ended; a requirement counts as
    covered only by a scenario that passed."""
    by = {}
    for name, refs, res in results:
        for r in refs:
            by.setdefault(specmod.resolve(reqs, r).id, []).append((name, res))
    ran = any(res in ("pass", "fail") for *_, res in results)
    count = {k: sum(res == k for *_, res in results) for k in ("pass", "fail", "skip")}
    out = ["# MetaRoCE compliance report", ""]
    if ran:
        out += [
            f"Implementation under test: `{info.get('dev', '?')}` at {info.get('ip', '?')}. Scenarios: "
            f"{len(results)} ({count['pass']} passed, {count['fail']} failed, {count['skip']} skipped)."
        ]
    else:
        out += [f"Nothing run (--report-only): what the {len(results)} scenarios reference."]
    out += [
        f"Requirements read from the spec: {len(reqs)}. A requirement is covered when a scenario that "
        "references it passed.",
        "",
    ]

    def cell(t):
        return t.replace("|", "/").replace("\n", " ")

    def covered(rid):
        return any(res == "pass" for _, res in by.get(rid, []))

    secs = sorted(k for k in by if k.startswith("\u00a7"))
    out += ["## Sections exercised (sender and receiver behaviour the spec states without a row id)", ""]
    out += [f"- {k[1:]}: {', '.join(f'{n} ({res})' for n, res in by[k])}" for k in secs] + [""]
    rest = sorted(specmod.SECTIONS - {k[1:] for k in secs})
    out += ["Sections no scenario names (their rules may still be covered through row ids): " + "; ".join(rest), ""]
    for level in ("MUST", "SHOULD", "kernel"):
        rs = [r for r in reqs if r.level == level]
        if ran:
            head = f"## {level}: {sum(covered(r.id) for r in rs)} of {len(rs)} covered"
        else:
            head = f"## {level}: {sum(r.id in by for r in rs)} of {len(rs)} referenced by a scenario"
        out += [head, "", "| Id | Section | Requirement | Scenarios |", "|---|---|---|---|"]
        for r in rs:
            sc = ", ".join(f"{n} ({res})" for n, res in by.get(r.id, [])) or "**not covered**"
            out.append(f"| {r.id} | {cell(r.section)} | {cell(r.text)} | {sc} |")
        out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out))
