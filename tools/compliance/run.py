#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""MetaRoCE wire-compliance suite: an independent peer that plays the remote
queue pair against an implementation under test (IUT) and checks its
datagrams on the wire against Documentation/transport.rst.

  tools/compliance/run.py --agent HOST --my-ip ADDR [--iut-ip ADDR] [--port 4792]
                          [--only NAME ...] [--without CAP ...] [--report FILE] [--list]

The IUT side runs tools/compliance/agent/mr-agent (a libibverbs program the
suite drives over TCP) on the host of the device under test; this side needs
UDP port --port free (no MetaRoCE device of its own on that address). Output
is TAP, one line per scenario, with the spec requirements it covers;
--report writes the coverage report (Markdown): every requirement of the spec
and the scenarios that test it. README.md, "Compliance suite".
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mrc import suite, spec  # noqa: E402
import mrc.scenarios  # noqa: E402,F401  (registers the scenarios)

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--agent", help="address of the IUT's mr-agent")
ap.add_argument("--agent-port", type=int, default=18600)
ap.add_argument("--my-ip", help="this host's address on the link to the IUT")
ap.add_argument("--iut-ip", help="the IUT's address (default: the agent's GID)")
ap.add_argument("--alt-ip", help="another address of this host on the same link (for the source-address check)")
ap.add_argument(
    "--shared",
    action="store_true",
    help="the IUT shares connections between QP pairs of two hosts (C22, 'Shared connections')",
)
ap.add_argument(
    "--slow",
    action="store_true",
    help="the IUT stalls for seconds (a debug kernel under emulation): verbs timeout 18 instead of 14, "
    "RNR timers 491.52 ms instead of 122.88",
)
ap.add_argument("--port", type=int, default=4792, help="MetaRoCE UDP port on both ends (C3)")
ap.add_argument("--only", nargs="+", default=[], metavar="NAME", help="run only these scenarios (--list names them)")
ap.add_argument(
    "--without",
    nargs="+",
    default=[],
    choices=["counters", "atomic_write"],
    help="what the IUT lacks: rx_drop_<reason> counters, ATOMIC_WRITE (the scenarios needing it SKIP)",
)
ap.add_argument(
    "--agent-wait", type=float, default=120, metavar="S", help="how long to keep trying to reach the agent (120 s)"
)
ap.add_argument("--report", help="write the coverage report here")
ap.add_argument(
    "--spec",
    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Documentation", "transport.rst"),
)
ap.add_argument("--list", action="store_true", help="list the scenarios and what they cover, and exit")
ap.add_argument("--report-only", action="store_true", help="with --report: the coverage of the scenarios, not run")
args = ap.parse_args()
names = [n for n, *_ in suite.SCENARIOS]
unknown = [n for n in args.only if n not in names]
if unknown:
    ap.error(f"--only: no scenario named {', '.join(unknown)} (run.py --list names them)")
if args.report_only and not args.report:
    ap.error("--report-only needs --report FILE")
if args.report:
    try:
        open(args.report, "a").close()
    except OSError as e:
        ap.error(f"--report {args.report}: {e.strerror}")
if args.list:
    reqs = spec.parse(args.spec)
    for name, title, refs, needs, _ in suite.SCENARIOS:
        print(f"{name}: {title}\n    covers {', '.join(refs)}" + (f"; needs {', '.join(needs)}" if needs else ""))
        for r in refs:
            spec.resolve(reqs, r)
    sys.exit(0)
if args.report_only:
    reqs = spec.parse(args.spec)
    suite.write_report(args.report, reqs, [(n, r, "not run") for n, _, r, _, _ in suite.SCENARIOS], {})
    sys.exit(0)
if not args.agent or not args.my_ip:
    ap.error("--agent and --my-ip are required")
try:
    sys.exit(0 if suite.run(args) else 1)
except suite.SetupError as e:
    print(f"run.py: {e}", file=sys.stderr)
    sys.exit(2)
