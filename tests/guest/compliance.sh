#!/usr/bin/env bash
# The wire-compliance suite (tools/compliance, README.md "Compliance
# suite") against the kernel module: guest 1 is the implementation under
# test (metaroce.ko, device mr0, tools/compliance/agent's mr-agent driving
# it), guest 2 the independent peer (no MetaRoCE device: it owns UDP port
# 4792 itself) running tools/compliance/run.py over the private link. Every
# scenario is a TAP line of guest 2, with the spec requirements it covers;
# the coverage report is written to the run directory (compliance-report.md).
#   qemu/vm-run -n 2 -t 900 tests/guest/compliance.sh [-S|-P] [RUN.PY ARGS...]
# -S / -P: the device shares connections / has one per QP (MR_SHARED; this
# script's default is per-QP, the module's shared). RUN.PY ARGS: e.g. --only
# sack-hole malformed. About 2.5 minutes a mode under TCG, boot included.
# On a debug kernel (or with MR_SLOW above 1) the suite runs with --slow.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=mr0
export MR_SHARED=${MR_SHARED:-0}
# -S / -P anywhere among the arguments; the rest go to run.py.
args=()
for a in "$@"; do
  case $a in -S) MR_SHARED=1 ;; -P) MR_SHARED=0 ;; *) args+=("$a") ;; esac
done
set -- "${args[@]}"
opts=()
((MR_SHARED)) && opts+=(--shared)
# A debug kernel (or MR_SLOW) stalls for tens of milliseconds under TCG: the
# suite's --slow timers (RNR 491.52 ms, verbs timeout 18), so that a stall of
# the IUT is not taken for a timer it broke (rnr-to-iut read resends its loss
# timers raced out as "sooner than the RNR timer" on the debug kernel).
(($(slow 1) > 1)) && opts+=(--slow)
agent=$MR_REPO/out/mr-agent
if ((MR_ID == 1)); then
  # Without the agent the peer has nothing to talk to: say so, and let guest 2
  # go on (its suite then fails to reach the agent) rather than wait for us.
  [[ -x $agent && -z $(find "$MR_REPO/tools/compliance/agent" -name '*.[ch]' -newer "$agent") ]] ||
    { fail "out/mr-agent missing or older than its source: run 'make -C tools/compliance/agent' on the host"
      meet ready; meet done 600; done_testing; }
  add_link "$dev"
  link_ready "$dev"
  "$agent" -d "$dev" -g "$gid" >"$MR_RUNDIR/agent.log" 2>&1 &
  apid=$!
  check "mr-agent listening" retry 30 grep -q listening "$MR_RUNDIR/agent.log"
  meet ready
  meet done 1800
  kill "$apid" 2>/dev/null; wait "$apid" 2>/dev/null
  diag "IUT counters after the suite: $(rdma statistic show link "$dev/1" | tr '\n' ' ')"
  check_kmemleak 2>/dev/null
else
  check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
  # A second address on the link, for the source-address scenario (C2, V0.4).
  alt=${MR_IP4%.*}.$((${MR_IP4##*.} + 100))
  check "second address $alt on $MR_IF" ip addr add "$alt/24" dev "$MR_IF"
  meet ready
  rcf=$MR_RUNDIR/suite.rc
  fold_tap "compliance: " < <(python3 "$MR_REPO/tools/compliance/run.py" --agent "$MR_PEER_IP4" \
    --my-ip "$MR_IP4" --alt-ip "$alt" --report "$MR_RUNDIR/compliance-report.md" "${opts[@]}" "$@" 2>&1
    echo $? >"$rcf")
  rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc=255
  ((rc == 0)) && pass "the suite exits 0" || fail "the suite exits 0 (exit $rc)"
  rep=$MR_RUNDIR/compliance-report.md
  if [[ -s $rep ]]; then
    pass "coverage report written: $(grep -E '^## (MUST|SHOULD|kernel)' "$rep" | sed 's/^## //' | paste -sd ';' | sed 's/;/; /g')"
  else
    fail "coverage report written"
  fi
  ip addr del "$alt/24" dev "$MR_IF" 2>/dev/null
  meet done 60
fi
done_testing
