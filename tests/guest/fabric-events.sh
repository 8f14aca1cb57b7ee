#!/usr/bin/env bash
# Two guests on the routed leaf–spine fabric of tests/fabric.sh: what the
# fabric does to the RDMA device named by $1 (mr0: metaroce; rxe0: the
# kernel's rxe, the baseline) — issue 11's spread, hint, congestion and
# failover checks. First everything tests/guest/fabric.sh checks, then:
#   spread      one RC flow (ib_write_bw -q 1, guest 1 -> guest 2): mr0 sends
#               on every path with an even share; the packets per spine show
#               where the ECMP hash put the paths
#   hints       4 flows into guest 2 as 4 processes, then ib_write_bw -q 4:
#               the receiver's fair-share hint reaches the senders and is
#               about a quarter of the one-flow hint; Jain's index of the 4
#               processes' sending rates while all 4 ran (their QPs' packet counts)
#   congestion  spine 1 rate-limited with an ECN-marking RED queue: CE marks
#               received and echoed, spine 1's share of the traffic falls
#               below the others'
#   failover    4 integrity pairs (tests/integrity, every byte checked) while
#               the busiest spine is (a) taken down, (b) made a gray black
#               hole (100 % loss, link up; mr0 must move paths off it),
#               (c) made 5 % lossy (each a separate EVENT below); with
#               --tput (tests/run --long) then ib_write_bw -q 4 with the
#               spine still failed, as a fraction of the lossless -q 4
#               figure (medians of 3: a speed figure, so not in the default
#               run; tools/bench.sh --fabric measures the same)
# For mr0 these are checks; for rxe0 the same runs are the baseline and only
# reported (its one source port per QP lands on one spine; rxe retries
# without limit at retry_cnt 7, so a QP on a black hole stalls: its runs
# are capped at 30 s).
#   fabric-events.sh [mr0|rxe0] [--tput] [EVENT...]
# EVENT: down, gray100, gray5 (default: all three, in that order). tests/run
# runs gray100 only, the failure only the transport can route around; `tests/run
# --long` runs all three.
# mr0 with a connection per QP (MR_SHARED=0 unless set): the 4 flows of the
# hint check stand for 4 senders, each with its own connection and so its
# own share at the receiver; with shared connections (the module's default)
# one guest's 4 QPs to the other are one connection, one share.
export MR_SHARED=${MR_SHARED:-0}
fe_dev=${1:-mr0}
case $fe_dev in
  mr*|rxe*) ;;
  *) echo "fabric-events.sh: the first argument is the device (mr0 or rxe0), got '$fe_dev'" >&2; exit 2 ;;
esac
fe_events=() fe_tput=0
fe_args=("${@:2}")
[[ ${fe_args[0]:-} == --tput ]] && { fe_tput=1; fe_args=("${fe_args[@]:1}"); }
for a in "${fe_args[@]}"; do
  [[ " ${fe_events[*]// /} " != *" $a "* ]] ||
    { echo "fabric-events.sh: event '$a' given twice" >&2; exit 2; }
  case $a in
    down) fe_events+=("down") ;;
    gray100) fe_events+=("gray 100") ;;
    gray5) fe_events+=("gray 5") ;;
    *) echo "fabric-events.sh: unknown event '$a' (down, gray100, gray5)" >&2; exit 2 ;;
  esac
done
((${#fe_events[@]})) || fe_events=("down" "gray 100" "gray 5")
MR_FABRIC_MORE=1 . "$MR_REPO/tests/guest/fabric.sh" "$fe_dev" 4
# fabric.sh leaves: dev, gid, the fabric up, MR_PEER_IP4 the peer's address.
mr() { [[ $dev == mr0 ]]; }
# rx_drop_counts: the device's rx_drop_<reason> counters, "name value" a line;
# rx_drop_delta BEFORE AFTER: the reasons that grew between two of those, "name +n".
rx_drop_counts() { rdma statistic show link "$dev/1" | grep -oE 'rx_drop_[a-z_]+ [0-9]+'; }
rx_drop_delta() {
  awk 'NR == FNR { b[$1] = $2; next } $2 > b[$1] { printf "%s +%d ", $1, $2 - b[$1]; n++ } END { if (!n) printf "none" }' \
    <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}
sender() { ((MR_ID == 1)); }   # guest 1 owns the fabric and sends
ev=$MR_RUNDIR/events
mkdir -p "$ev"
# bw_of OUTPUT SIZE: perftest's average MB/s.
bw_of() { awk -v s="$2" '$1 == s && NF >= 4 { v = $4 } END { print v + 0 }' <<<"$1"; }
# perf PORT SECS ARGS...: one ib_write_bw side; the sender connects to the
# receiver, retrying until it listens.
perf() {
  # Limits scale with the kernel's speed (tests/lib.sh slow: 8x on the debug
  # one), and so does the QP's local ACK timeout (qp_timeout: perftest's
  # default 14 on the normal kernel, 17 on the debug one, whose round trips
  # under load reach the 268 ms that 14 gives).
  # PERF_NICE=N runs perftest at nice N.
  local port=$1 t o r end u nc=(); t=$(slow "$2"); u=$(qp_timeout); shift 2
  [[ -n ${PERF_NICE:-} ]] && nc=(nice -n "$PERF_NICE")
  if ! sender; then timeout "$t" "${nc[@]}" ib_write_bw -d "$dev" -x "$gid" -F -u "$u" -p "$port" "$@" 2>&1; return; fi
  end=$((SECONDS + $(slow 60)))
  while :; do
    o=$(timeout "$t" "${nc[@]}" ib_write_bw -d "$dev" -x "$gid" -F -u "$u" -p "$port" "$@" "$MR_PEER_IP4" 2>&1); r=$?
    ((r == 0)) || grep -q 'remote address' <<<"$o" || ((SECONDS >= end)) && break
    nap 1
  done
  printf '%s\n' "$o"; return "$r"
}
# perf_runs N PORT SECS ARGS...: the same ib_write_bw on both sides N times
# (ports PORT, PORT+100, ...: one throughput figure under TCG swings by a
# third). The sender prints "RC MEDIAN BW..." (MB/s; RC the first non-zero
# exit status) and, on a failure, that run's output.
perf_runs() {
  local runs=$1 port=$2 t=$3 k o r rc=0 bws="" bad=""; shift 3
  for ((k = 0; k < runs; k++)); do
    if sender; then
      o=$(perf $((port + 100 * k)) "$t" "$@"); r=$?
      ((rc == 0 && r != 0)) && { rc=$r; bad=$o; }
      bws+=" $(bw_of "$o" 65536)"
    else
      perf $((port + 100 * k)) "$t" "$@" >/dev/null 2>&1
    fi
  done
  sender || return 0
  echo "$rc $(tr ' ' '\n' <<<"$bws" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')$bws"
  [[ -z $bad ]] || printf '%s\n' "$bad"
}
# qpview: mr0's per-QP view, one line per RC QP with a connection:
# "qpn paths peer_hint rate_hint local_ack_timeouts s0 s1 ..." (sN: pN_sent).
qpview() {
  rdma -dd res show qp link "$dev/1" 2>/dev/null | tr -s ' \n' '\n' | awk '
    $0 == "lqpn" { getline q; next }
    $0 ~ /^drv_(paths|peer_hint|rate_hint|local_ack_timeouts)$/ { k = substr($0, 5); getline v; a[q, k] = v; seen[q] = 1; next }
    $0 ~ /^drv_p[0-9]+_sent$/ { getline v; s[q] = s[q] " " v; next }
    END { for (q in seen) print q, a[q, "paths"], a[q, "peer_hint"], a[q, "rate_hint"], a[q, "local_ack_timeouts"] + 0 s[q] }'
}
# sample FILE SECS: for SECS seconds, keep in FILE the latest qpview among
# those that showed the most QPs (all flows running, none finished yet), and
# in FILE.all every sample that showed at least 4, each after a line "-".
sample() {
  local f=$1 end=$((SECONDS + $2)) v n best=0
  # Ahead of the flows: four perftests share the guest's one vCPU,
  # and at normal priority the sampler got two samples in a 14 s run (a CI
  # run's index came out 0 for want of samples).
  renice -n -20 -p "$BASHPID" >/dev/null 2>&1 || true
  : >"$f"; : >"$f.all"
  while ((SECONDS < end)); do
    v=$(qpview); n=$(grep -c . <<<"$v")
    [[ -n $v ]] && ((n >= best)) && { echo "$v" >"$f"; best=$n; }
    ((n >= 4)) && printf -- '-\n%s\n' "$v" >>"$f.all"
    nap 0.5
  done
}
# hint_check DESC VIEW: the hints the senders' QPs saw while all 4 ran (every
# sample), as fractions of the one-flow hint: the median must lie in
# 0.15-0.4 (a quarter, with the estimator's epoch noise under TCG).
# On a kernel MR_SLOW times slower (the debug one, under TCG) the check is
# reported, not judged: there the QPs' packets reach the receiver in runs of
# about a window each (the windows follow the 10 Gb/s link, not the guests'
# CPU, which is the bottleneck), each longer than the estimator's longest
# epoch (64 ticks, 64 ms at HZ=1000), so it counts one sender per epoch: at
# 874aa21 the median sample said C/1 (172 samples, C/3-C/1), for 4 processes
# and for one process with 4 QPs alike, while the 4 flows' Jain index was 1.000.
hint_check() {
  local r
  if (($(slow 1) > 1)); then
    skip "$dev: $1: hints about a quarter of one flow's" "the estimator cannot count senders whose packets arrive in runs longer than its 64-tick epoch (this kernel runs $(slow 1)x slower)"
    diag "$dev: $1: hints seen: $(awk -v h1="${hint1:-0}" '$2 > 0 && h1 > 0 { printf " %.2f", $3 / h1 }' "$2.all" | head -c 400)"
    return
  fi
  r=$(awk -v h1="${hint1:-0}" '$2 > 0 && h1 > 0 { f[++n] = $3 / h1 }
    END { if (!n) { print "none"; exit 1 }
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (f[j] < f[i]) { t = f[i]; f[i] = f[j]; f[j] = t }
      m = f[int((n + 1) / 2)]; printf "median %.2f of one flow (%d samples, %.2f-%.2f)", m, n, f[1], f[n]
      exit !(m >= 0.15 && m <= 0.4) }' "$2.all")
  if (($? == 0)); then pass "$dev: $1: the ACKs carry the receiver's fair share, $r, one flow $hint1 kB/s"
  else fail "$dev: $1: hints about a quarter of one flow's" "$r; one flow: ${hint1:-none}"; fi
}
# jain_qps VIEW: Jain's index of the flows' sending rates while all of them
# ran, from VIEW.all: each QP's DATA packets sent (all paths) between the first
# sample and the last one before any QP reached its final count (that flow was
# done). A flow that is starved while the others run shows as such, however
# fast it goes once they are done. Prints "INDEX SAMPLES COUNTS..." ("0 0" when
# no two samples qualify).
jain_qps() {
  awk '$1 == "-" { k++; next }
    k && NF >= 6 { t = 0; for (i = 6; i <= NF; i++) t += $i; c[k, $1] = t; has[k, $1] = 1; q[$1] = 1; if (t > fin[$1]) fin[$1] = t }
    END {
      # The first sample at which some QP had its final count, less one.
      end = k
      for (x in q) for (i = 1; i <= k; i++) if (has[i, x] && c[i, x] == fin[x]) { if (i < end) end = i; break }
      end--
      n = 0; t = 0; s = 0; out = ""
      for (x in q) { if (end < 2 || !has[1, x] || !has[end, x]) { print "0 0"; exit }
        d = c[end, x] - c[1, x]; n++; t += d; s += d * d; out = out " " d }
      if (!s) { print "0 0"; exit }
      printf "%.3f %d%s\n", t * t / (n * s), end, out }' "$1.all"
}
# share DELTAS: each spine's percentage of the A->B packets.
share() { tr ' ' '\n' <<<"$1" | awk -F'[:/]' '{ n[$1] = $2; t += $2 } END { for (i = 1; i in n; i++) printf "%s%d:%.0f%%", (i > 1 ? " " : ""), i, t ? 100 * n[i] / t : 0 }'; }

# --- spread: one RC flow -------------------------------------------------
meet spread
if sender; then
  before=$(fabric_counters); view=$(mktemp)
  mr && { sample "$view" "$(slow 40)" & sp=$!; }
  out=$(perf 18601 120 -s 65536 -n 400 -q 1); rc=$?
  [[ -n ${sp:-} ]] && { kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null; }
  d=$(spine_deltas "$before" "$(fabric_counters)")
  bw1=$(bw_of "$out" 65536)
  if ((rc == 0)); then pass "$dev: one flow, ib_write_bw 400 x 64 KiB across the fabric: $bw1 MB/s"
  else fail "$dev: one flow, ib_write_bw -q 1 (rc=$rc)" "$out"; fi
  diag "$dev: one flow: A->B packets per spine $(share "$d") (spine:a2b/b2a $d), $(spines_used "$d" 20) of 4 spines carry it"
  if mr; then
    v=$(head -1 "$view"); diag "$dev: the QP's view (qpn paths peer_hint rate_hint local_ack_timeouts sent per path): $v"
    read -r _ paths hint1 _ _ sent <<<"$v"
    # The view shows the first 8 paths (fewer with paths < 8).
    if [[ ${paths:-0} -ge 1 ]] && awk -v s="$sent" -v p="$paths" 'BEGIN { n = split(s, a, " "); for (i = 1; i <= n; i++) t += a[i]; m = t / n
        for (i = 1; i <= n; i++) if (a[i] < m / 2 || a[i] > 2 * m) exit 1; exit !(n == (p < 8 ? p : 8) && t > 0) }'; then
      pass "$dev: the flow sprays over its $paths paths, each within 0.5-2x of the mean (packets per path:$sent)"
    else fail "$dev: the flow sprays over all its paths evenly" "paths ${paths:-?} sent:${sent:-?}"; fi
    # The issue's per-flow target: no spine below half or above twice its
    # quarter. With the spine chosen by hashing the source port, 8 paths
    # meet it for about 60 % of flows (see Documentation/fabric.rst).
    if tr ' ' '\n' <<<"$d" | awk -F'[:/]' '{ n[NR] = $2; t += $2 } END { for (i in n) if (n[i] < t / 8 || n[i] > t / 2) exit 1; exit !(t > 0) }'
    then diag "$dev: spine share target (each spine 12.5-50 %) met by this flow"
    else diag "$dev: spine share target (each spine 12.5-50 %) NOT met by this flow: the hash put its ports unevenly"; fi
  fi
  rm -f "$view"
else
  out=$(perf 18601 120 -s 65536 -n 400 -q 1) || diag "receiver: $(tail -3 <<<"$out")"
fi

# --- hints: four flows into one receiver ---------------------------------
# The receiver's four servers listen before the four senders start together.
meet hints
if sender; then
  meet hints-listening
  view=$(mktemp)
  mr && { sample "$view" "$(slow 150)" & sp=$!; }
  # The four busy-polling perftests run at nice 10 (ib_write_bw has no event
  # mode), below the kernel's deferred network work (ksoftirqd, nice 0) on the
  # guest's one vCPU. At nice 0 on the debug kernel the flows took turns (the
  # receiver counted 1-2 of them at a time), their round trips passed the
  # 268 ms local ACK timeout (126-361 expiries per QP) and one failed with
  # retry exceeded.
  for k in 1 2 3 4; do
    (PERF_NICE=10 perf $((18610 + k)) 150 -s 65536 -n 500 -q 1; echo "rc $?") >"$ev/flow.$k" 2>&1 &
  done
  wait $(jobs -p | grep -vx "${sp:-x}")
  [[ -n ${sp:-} ]] && { kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null; }
  # perftest's MB/s are reported, not judged: it converts cycles with a CPU
  # frequency it samples at the end of the run, and on the guest's one vCPU,
  # busy with the other three flows, that sample fails ("Correlation
  # coefficient r^2 < 0.9", then 0.00 MB/s: a CI run's index came out 0.000)
  # or comes out skewed per flow. Each flow's average would also hide a flow
  # starved while the others ran. mr0's index is of the QPs' sending rates
  # while all four ran (jain_qps); a flow that failed fails the check.
  pbws="" rcs=""
  for k in 1 2 3 4; do
    pbws+=" $(bw_of "$(cat "$ev/flow.$k")" 65536)"
    rcs+=" $(awk '$1 == "rc" { r = $2 } END { print (r == "" ? "none" : r) }' "$ev/flow.$k")"
  done
  if mr; then
    read -r jain n counts < <(jain_qps "$view")
    if [[ $rcs == " 0 0 0 0" ]] && awk -v j="$jain" 'BEGIN { exit !(j >= 0.95) }'; then
      pass "$dev: 4 flows into one receiver, Jain's index $jain >= 0.95 of their sending rates while all 4 ran (each QP's DATA packets between samples 1 and $n: $counts; perftest's MB/s:$pbws)"
    else fail "$dev: 4 flows into one receiver, Jain's index $jain < 0.95 or a flow failed" "exit statuses:$rcs; packets between samples 1 and ${n:-0}: ${counts:-none}; perftest's MB/s:$pbws; $(tail -qn 3 "$ev"/flow.[1-4] "$ev"/flow-rx.[1-4] 2>/dev/null)"; fi
    diag "$dev: 4 flows' QPs (qpn paths peer_hint rate_hint local_ack_timeouts sent): $(tr '\n' ';' <"$view")"
    hint_check "4 flows (4 processes)" "$view"
  else
    jain=$(awk -v s="$pbws" 'BEGIN { n = split(s, a, " "); for (i = 1; i <= n; i++) { t += a[i]; q += a[i] * a[i] }
      printf "%.3f", q ? t * t / (n * q) : 0 }')
    diag "$dev: 4 flows into one receiver: Jain's index $jain of perftest's MB/s:$pbws (exit statuses:$rcs)"
  fi
  rm -f "$view" "$view.all"
else
  for k in 1 2 3 4; do
    (PERF_NICE=10 perf $((18610 + k)) 150 -s 65536 -n 500 -q 1; echo "rc $?") >"$ev/flow-rx.$k" 2>&1 &
  done
  retry 60 eval '[[ $(ss -ltn | grep -cE ":1861[1-4]\b") -ge 4 ]]' ||
    diag "receiver: not all 4 servers listen: $(ss -ltn)"
  meet hints-listening
  wait
fi
meet hints-q4
if sender; then
  view=$(mktemp)
  mr && { sample "$view" "$(slow 40)" & sp=$!; }
  out=$(perf 18620 120 -s 65536 -n 300 -q 4); rc=$?
  [[ -n ${sp:-} ]] && { kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null; }
  bw4=$(bw_of "$out" 65536)
  if ((rc == 0)); then pass "$dev: ib_write_bw -q 4, 300 x 64 KiB, lossless fabric: $bw4 MB/s"
  else fail "$dev: ib_write_bw -q 4 lossless (rc=$rc)" "$out"; fi
  if mr && ((fe_tput)); then
    # The reference for the failover runs: the median of this run and two more.
    read -r _ _ b1 b2 < <(perf_runs 2 18720 120 -s 65536 -n 300 -q 4)
    diag "$dev: lossless -q 4, 3 runs (MB/s): $bw4 ${b1:-0} ${b2:-0}"
    bw4=$(printf '%s\n' "$bw4" "${b1:-0}" "${b2:-0}" | sort -g | sed -n 2p)
  fi
  if mr; then
    diag "$dev: -q 4 QPs (qpn paths peer_hint rate_hint local_ack_timeouts sent): $(tr '\n' ';' <"$view")"
    hint_check "ib_write_bw -q 4" "$view"
  fi
  rm -f "$view" "$view.all"
else
  perf 18620 120 -s 65536 -n 300 -q 4 >/dev/null 2>&1
  mr && ((fe_tput)) && perf_runs 2 18720 120 -s 65536 -n 300 -q 4 >/dev/null
fi

# --- congestion: spine 1 rate-limited, ECN-marking RED --------------------
meet congest
# The spine's rate must be below the flows' share of it. On a kernel MR_SLOW
# times slower the flows are: there (the debug kernel at 874aa21: -q 4 at
# 0.27 MB/s in all, about 0.5 Mbit/s per spine, so a 4 Mbit/s spine kept its
# 25 % and RED marked 5 packets) the rate is half the spine's share of the
# lossless -q 4 rate measured above.
rate=4mbit
if (($(slow 1) > 1)); then
  rate=$(awk -v b="${bw4:-0}" 'BEGIN { k = int(b * 8000 / 4 / 2); if (k < 50) k = 50; if (k > 4000) k = 4000; print k "kbit" }')
fi
ctime=150; mr || ctime=40   # an rxe QP hashed onto the spine crawls: 40 s shows it
if sender; then
  check "spine 1 congested: tbf $rate with RED ecn (A->B)" fabric_spine 1 congest "$rate"
  before=$(fabric_counters)
  out=$(perf 18630 "$ctime" -s 65536 -n 200 -q 4); rc=$?
  after=$(fabric_counters)
  fabric_spine 1 clear
  d=$(spine_deltas "$before" "$after")
  marked=$(awk '$2 == 1 { sub("marked=", "", $5); print $5 }' <<<"$after")
  dropped=$(awk '$2 == 1 { sub("dropped=", "", $6); print $6 }' <<<"$after")
  diag "$dev: congested spine 1: A->B share per spine $(share "$d") ($d); RED marked $marked, queue drops $dropped; $(bw_of "$out" 65536) MB/s (rc=$rc)"
  if mr; then
    ((rc == 0)) && pass "$dev: ib_write_bw -q 4 through a congested spine completes" \
      || fail "$dev: ib_write_bw -q 4 through a congested spine (rc=$rc)" "$out"
    ((marked > 0)) && pass "$dev: spine 1's RED queue marked $marked packets CE" \
      || fail "$dev: spine 1 marked no packet CE" "$after"
    if tr ' ' '\n' <<<"$d" | awk -F'[:/]' '{ n[$1] = $2 } END { o = (n[2] + n[3] + n[4]) / 3; exit !(n[1] < o) }'; then
      pass "$dev: the congested spine carries less than the others ($(share "$d"))"
    else fail "$dev: the congested spine carries less than the others" "$(share "$d")"; fi
  fi
else
  ce0=$(counter ecn_ce_marked); echo0=$(counter ecn_ce_echoed)
  drops0=$(rx_drop_counts)
  perf 18630 "$ctime" -s 65536 -n 200 -q 4 >/dev/null 2>&1
  ce=$(($(counter ecn_ce_marked) - ce0)); echoed=$(($(counter ecn_ce_echoed) - echo0))
  if mr; then
    ((ce > 0 && echoed > 0)) && pass "$dev: receiver got $ce CE-marked packets and echoed $echoed marks" \
      || fail "$dev: CE marks received ($ce) and echoed ($echoed)"
    # A CE mark on a packet the receiver drops (one its path's window has
    # passed, or its stream's beyond a late original's reach, transport.rst
    # "Receiver operation" step 4: psn_/ssn_out_of_window) is never echoed;
    # the reasons say how many.
    diag "$dev: the receiver's drops during the transfer, by reason: $(rx_drop_delta "$drops0" "$(rx_drop_counts)")"
  else diag "$dev: receiver counted $ce CE-marked packets"; fi
fi

# --- failover: integrity during a spine failure --------------------------
bin=$MR_REPO/out/integrity
# Limits scaled with the kernel's speed (slow: 8x on the debug one).
cap=$(slow 150); mr || cap=$(slow 30)  # rxe stalls without limit on a black hole: 30 s shows it
runs=3; mr || runs=1        # rxe's failover throughput is only reported
[[ -x $bin ]] || fail "out/integrity missing: run 'make -C tests/integrity' on the host"
# integrity_pairs TAG SEED: 4 pairs, guest 2 serves, guest 1 drives; each
# result in $ev/TAG.K ("rc N" and the summary line).
integrity_pairs() {
  local tag=$1 seed=$2 k
  for k in 1 2 3 4; do
    if sender; then
      (o=$(timeout "$cap" "$bin" -d "$dev" -g "$gid" -p $((19000 + k)) -s $((seed * 10 + k)) -n 150 -M 262144 \
            client "$MR_PEER_IP4" 2>&1); r=$?
       echo "rc $r $(grep -m1 '^# integrity:' <<<"$o") $(grep -m1 '^not ok' <<<"$o")" >"$ev/$tag.$k") &
    else
      timeout "$cap" "$bin" -d "$dev" -g "$gid" -p $((19000 + k)) server >/dev/null 2>&1 &
    fi
  done
}
# busiest: the spine that carried the most A->B packets between two snapshots.
# The last spine carries the TCP side channels (tests/fabric.sh) and is
# never failed.
busiest() { spine_deltas "$1" "$2" | tr ' ' '\n' | awk -F'[:/]' -v last="$(fabric_spines)" '$1 < last && $2 > m { m = $2; s = $1 } END { print s + 0 }'; }
n=0
for event in "${fe_events[@]}"; do
  # n: the event's place in the full list (its seeds, ports and file names
  # are the same whichever events run).
  case $event in down) n=1 ;; "gray 100") n=2 ;; *) n=3 ;; esac
  meet "failover-$n"
  integrity_pairs "fo$n" "$n"
  if sender; then
    moves0=$(counter path_moves)
    before=$(fabric_counters); nap 4
    s=$(busiest "$before" "$(fabric_counters)"); ((s > 0)) || s=1
    # shellcheck disable=SC2086
    fabric_spine "$s" $event
    wait
    fabric_counters >"$ev/after.$n"
    ok=0 res=""
    for k in 1 2 3 4; do
      r=$(cat "$ev/fo$n.$k"); res+=" [pair $k: $r]"
      [[ $r == "rc 0 "* ]] && ok=$((ok + 1))
    done
    if mr; then
      ((ok == 4)) && pass "$dev: spine $s $event during 4 integrity runs: all 4 complete, every byte checked, 0 corrupt/lost/duplicated" \
        || fail "$dev: spine $s $event during 4 integrity runs: $ok of 4 passed" "$res"
    else diag "$dev (baseline): spine $s $event during 4 integrity runs: $ok of 4 passed:$res"; fi
    # --tput: throughput with the spine still failed, against the lossless
    # -q 4 runs: medians of 3 over mr0.
    if ((fe_tput)); then
      out=$(perf_runs "$runs" $((18640 + n)) "$cap" -s 65536 -n 300 -q 4)
      read -r rc bwe bws <<<"$(head -1 <<<"$out")"
      frac=$(awk -v a="$bwe" -v b="${bw4:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
      if mr; then
        if ((rc == 0)) && awk -v f="$frac" 'BEGIN { exit !(f >= 0.75) }'; then
          pass "$dev: spine $s $event: ib_write_bw -q 4 $bwe MB/s (median of $bws), $frac of lossless ($bw4; target 0.90, TCG noise floor 0.75)"
        else fail "$dev: spine $s $event: ib_write_bw -q 4 $bwe MB/s, $frac of lossless (rc=$rc)" "$out"; fi
      else diag "$dev (baseline): spine $s $event: ib_write_bw -q 4 $bwe MB/s, $frac of lossless (rc=$rc)"; fi
    fi
    # Moves over the whole failure (the integrity runs, then the throughput
    # runs or one more transfer: on an idle host the integrity runs may be
    # nearly over when the spine fails). Only a black hole the routing does not see needs the
    # transport to move: a spine that is down leaves the leaves' multipath
    # sets at once (its flows rehash), and random loss is repaired by SACK (a
    # move needs two timeouts in a row on one path).
    moves=$(($(counter path_moves) - moves0))
    # Without the throughput runs, and no move yet (the integrity runs
    # nearly over when the spine failed): one more transfer over the failed
    # spine, which the receiver joins.
    more=0
    ((!fe_tput)) && mr && [[ $event == "gray 100" ]] && ((moves == 0)) && more=1
    swap "fo$n-more" "$more" >/dev/null
    if ((more)); then
      perf $((18650 + n)) "$cap" -s 65536 -n 100 -q 4 >/dev/null
      moves=$(($(counter path_moves) - moves0))
    fi
    if mr && [[ $event == "gray 100" ]]; then
      ((moves > 0)) && pass "$dev: spine $s $event: paths moved off it (path_moves +$moves)" \
        || fail "$dev: spine $s $event: no path moved"
    else diag "$dev: spine $s $event: path_moves +$moves"; fi
    fabric_spine "$s" clear
  else
    wait
    ((fe_tput)) && perf_runs "$runs" $((18640 + n)) "$cap" -s 65536 -n 300 -q 4 >/dev/null
    [[ $(swap "fo$n-more" 0) == 1 ]] && perf $((18650 + n)) "$cap" -s 65536 -n 100 -q 4 >/dev/null
  fi
done
meet end
if mr; then
  diag "$dev: counters: $(rdma statistic show link "$dev/1" | grep -oE '(tx_packets|retransmits|rto_timeouts|path_moves|probes|rate_hint_changes|ecn_ce_marked|ecn_ce_echoed|local_ack_timeouts|rx_drops) [0-9]+' | tr '\n' ' ')"
fi
done_testing
