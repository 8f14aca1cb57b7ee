#!/usr/bin/env bash
# Two guests: what an operator sees of mr0 while it carries traffic over a
# lossy link (Documentation/observability.rst) — the metaroce:* trace events
# (tracefs; trace-cmd and perf list them; bpftrace counts two), `rdma resource show qp|cq|mr|pd
# -dd` during the run, and `rdma statistic`, each checked against the others:
# every event count equals its counter's increase over the traced window.
#   observe.sh mr0 [-D SECS] [NETEM-ARGS...]   (default: 20, loss 2% delay 1ms)
# in each of two guests (qemu/vm-run -n 2 tests/guest/observe.sh mr0).
# Guest 2 runs ib_write_bw -b (both directions, 64 KiB messages) for SECS x
# slow seconds against guest 1 (a duration, not a count: a debug guest's
# resource dump takes about half a minute, and a 150-message transfer there
# ended between two dumps, twice), again (at most 4 rounds) until both guests
# have caught the four resource views during a transfer.
# perftest runs at nice 19: it busy-polls the guest's one CPU, and the
# resource dumps beside it would otherwise get half of it. On a kernel
# without CONFIG_EVENT_TRACING the event checks are skipped (TAP # SKIP);
# the resource and counter checks still run.
. "$MR_REPO/tests/lib.sh"
# A guest test: on the host it would load the module and put netem on a NIC.
[[ ${MR_NGUESTS:-} == 2 && -n ${MR_PEER_IP4:-} ]] || {
  echo "observe.sh: runs in two test guests: qemu/vm-run -n 2 tests/guest/observe.sh mr0" >&2; exit 2; }
dev=${1:-mr0}
[[ $dev == mr* ]] || { echo "observe.sh: the first argument is the metaroce device (mr0), got '$dev'" >&2; exit 2; }
shift
secs=20
if [[ ${1:-} == -D ]]; then
  [[ ${2:-} =~ ^[1-9][0-9]{0,3}$ ]] || { echo "observe.sh: -D takes seconds, 1..9999, got '${2:-}'" >&2; exit 2; }
  secs=$2; shift 2
fi
[[ ${1:-} == -n ]] && { echo "observe.sh: -n ITERS is gone: each transfer runs -D SECS (x slow)" >&2; exit 2; }
# netem's arguments never start with '-': an option after them (or -D twice,
# or -D5) is a usage error, not a qdisc tc would refuse later.
for a in "$@"; do
  [[ $a != -* ]] || { echo "observe.sh: '$a': the only option is -D SECS, before the netem arguments (usage: observe.sh mr0 [-D SECS] [NETEM-ARGS...])" >&2; exit 2; }
done
dur=$(slow "$secs")
netem=("$@")
((${#netem[@]})) || netem=(loss 2% delay 1ms)
add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
load_kmod sch_netem >/dev/null 2>&1
check "netem on $MR_IF: ${netem[*]}" tc qdisc add dev "$MR_IF" root netem "${netem[@]}"
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
[[ -n $gid ]] && pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid" ||
  fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"
paths=$(cat /sys/module/metaroce/parameters/paths 2>/dev/null || echo 8)
work=$(mktemp -d)

# --- trace events: present, listed by the tools, enabled ---
T=/sys/kernel/tracing
mountpoint -q $T 2>/dev/null || mount -t tracefs nodev $T 2>/dev/null
events=(tx rx loss retransmit path_state rto rate_hint)
tracing=""
if [[ -d $T/events/metaroce ]]; then
  tracing=1
  missing=""
  for e in "${events[@]}"; do [[ -f $T/events/metaroce/$e/format ]] || missing+=" $e"; done
  [[ -z $missing ]] && pass "tracefs: events/metaroce/{${events[*]}}" ||
    fail "tracefs: metaroce events missing:$missing" "$(ls $T/events/metaroce)"
  fmt=$(cat $T/events/metaroce/tx/format)
  if grep -q 'field:u32 psn' <<<"$fmt" && grep -q 'field:u8 path' <<<"$fmt" &&
     grep -q 'field:u32 ssn' <<<"$fmt" && grep -q 'field:u8 retx' <<<"$fmt"; then
    pass "tracefs: metaroce:tx has psn, ssn, path, retx fields"
  else fail "tracefs: metaroce:tx format" "$fmt"; fi
  if command -v trace-cmd >/dev/null; then
    # A regex ('metaroce:*' is read as system:event, and '*' is no regex).
    n=$(trace-cmd list -e '^metaroce:' 2>/dev/null | grep -c '^metaroce:')
    ((n == ${#events[@]})) && pass "trace-cmd list -e '^metaroce:': $n events" ||
      fail "trace-cmd list -e '^metaroce:': $n events" "$(trace-cmd list -e '^metaroce:' 2>&1)"
  else diag "trace-cmd not installed (tools/setup.sh installs it)"; fi
  if command -v perf >/dev/null; then
    diag "perf list 'metaroce:*': $(perf list 'metaroce:*' 2>&1 | grep -c 'metaroce:') events"
  fi
  # One ring buffer large enough for the run (checked below: no overrun),
  # one clock across CPUs so that each path's events are in order.
  echo 0 >$T/tracing_on
  echo global >$T/trace_clock
  echo 32768 >$T/buffer_size_kb
  echo >$T/trace
  echo 1 >$T/events/metaroce/enable
  echo 1 >$T/tracing_on
else
  pass "metaroce trace events # SKIP kernel without CONFIG_EVENT_TRACING (no $T/events/metaroce)"
fi

# bpftrace on the same events (a BPF program per tracepoint, counting),
# running across the traced window like tracefs. Its counts are read from
# the maps it prints every second ("tick", then @tx and @retx), not from
# the copy it prints as it exits: its exit (detaching, freeing its clang and
# LLVM state) has taken minutes in a guest on a loaded host, and is checked
# on its own. "Attaching N probes" comes before the attach; the first tick
# after it (a BEGIN probe would be a uprobe on the bpftrace binary, which the
# guest reads over 9p and overlayfs).
bpf=""
# bpfmem: bpftrace's resident and peak memory and the guest's free memory.
bpfmem() { echo "$(grep -hE '^Vm(RSS|HWM)' /proc/$bpf/status 2>/dev/null | tr -s ' \t' ' ' | tr '\n' ' ')guest $(grep -E '^MemAvailable' /proc/meminfo | tr -s ' ')"; }
if [[ -n $tracing ]] && command -v bpftrace >/dev/null; then
  # Without BTF (the test kernels carry no debug info) bpftrace reads the
  # kernel's headers: those of the build tree this guest booted.
  if [[ -d ${MR_KDIR:-}/source/include ]]; then
    export BPFTRACE_KERNEL_BUILD=$MR_KDIR BPFTRACE_KERNEL_SOURCE=$MR_KDIR/source
  fi
  bpftrace -e 'tracepoint:metaroce:tx { @tx = count(); } tracepoint:metaroce:retransmit { @retx = count(); }
    interval:s:1 { printf("tick\n"); print(@tx); print(@retx); printf("end\n"); }' >"$work/bpf.out" 2>&1 &
  bpf=$! tb=$SECONDS ta=""
  # About 50 s in an idle guest (clang parsing the kernel's headers, then the
  # attach); the peer waits up to 400 s at the next meet.
  lim=$(slow 300)
  while ((SECONDS - tb < lim)); do
    [[ -z $ta ]] && grep -q '^Attaching' "$work/bpf.out" && ta=$((SECONDS - tb))
    grep -q '^tick' "$work/bpf.out" && break; kill -0 $bpf 2>/dev/null || break; nap 0.5
  done
  if grep -q '^tick' "$work/bpf.out"; then
    pass "bpftrace attached to metaroce:tx and metaroce:retransmit ('Attaching' after ${ta:-?} s, first tick after $((SECONDS - tb)) s; $(bpfmem))"
  else fail "bpftrace attaches to metaroce:* (CONFIG_BPF_EVENTS) within $lim s" "$(cat "$work/bpf.out")"; kill $bpf 2>/dev/null; bpf=""; fi
elif [[ -n $tracing ]]; then diag "bpftrace not installed (tools/setup.sh installs it)"; fi

# counters FILE: the device's counters, one "name value" a line.
counters() { rdma statistic show link "$dev/1" | tr ' ' '\n' | awk 'NF { if (k == "") k = $0; else { print k, $0; k = "" } }' | grep -E '^[a-z_]+ [0-9]+$' >"$1"; }
counters "$work/c0"
# The peer's bpftrace may attach later (up to its own slow 300 s).
meet traced "$(slow 400)"

# --- traffic, with the resource views read during it ---
server() { ((MR_ID == 1)); }
# res OBJECT FILTER...: `rdma -dd resource show`, one line per object (the
# driver attributes, drv_*, may wrap onto indented lines).
res() { rdma -dd resource show "$@" 2>&1 | awk '/^[^ \t]/ { if (r != "") print r; r = $0; next } { r = r " " $0 } END { if (r != "") print r }' | tr -s ' \t' ' '; }
# has LINE ATTR...: every drv_ATTR of LINE has a value; prints the missing ones.
has() { local l=$1 a m=""; shift; for a; do grep -qE " drv_$a [0-9a-z]+" <<<"$l" || m+=" $a"; done; echo "$m"; }
# transfer PORT: ib_write_bw -b (64 KiB both ways, $dur s) in the background,
# pid in $bwpid, output in $work/bw.out; guest 2 connects, retrying 60 s (x slow:
# a debug guest's nice-19 server took longer than 60 s to listen).
transfer() {
  local bw=(nice -n 19 ib_write_bw -d "$dev" -x "$gid" -s 65536 -D "$dur" -b -F -p "$1")
  local lim=$((dur + $(slow 600)))
  if server; then
    timeout $lim "${bw[@]}" >"$work/bw.out" 2>&1 &
  else
    nap 3
    ( end=$((SECONDS + $(slow 60)))
      while :; do
        timeout $lim "${bw[@]}" "$MR_PEER_IP4" >"$work/bw.out" 2>&1 && exit 0
        grep -q 'remote address' "$work/bw.out" && exit 1
        ((SECONDS < end)) || exit 1
        nap 1
      done ) &
  fi
  bwpid=$!
}
# The four views, each kept from the first dump that shows ib_write_bw's
# object (for qp: its RC QP with its connection, drv_paths), all taken
# during a transfer. Each dump is a process start: seconds under TCG, over a
# minute in a debug guest beside a busy-polling perftest (hence its nice 19), longer than one
# transfer there. So each view is polled on its own, and when a transfer
# ends before both guests have all four, both run another (at most 4).
qp="" cq="" mr="" pd="" dumps=0 t0=$SECONDS round=0 bwrc=0 bwlines=""
while :; do
  round=$((round + 1))
  transfer $((18515 + round))
  end=$((SECONDS + 300))
  while ((SECONDS < end)) && [[ -z $qp || -z $cq || -z $mr || -z $pd ]]; do
    dumps=$((dumps + 1))
    [[ -n $qp ]] || { v=$(res qp link "$dev/1"); grep -qE 'type RC .* drv_paths [0-9]+' <<<"$v" && qp=$v; }
    [[ -n $cq ]] || { v=$(res cq dev "$dev"); grep -q 'comm ib_write_bw' <<<"$v" && cq=$v; }
    [[ -n $mr ]] || { v=$(res mr dev "$dev"); grep -q 'comm ib_write_bw' <<<"$v" && mr=$v; }
    [[ -n $pd ]] || { v=$(res pd dev "$dev"); grep -q 'comm ib_write_bw' <<<"$v" && pd=$v; }
    kill -0 "$bwpid" 2>/dev/null || break
    nap 0.2
  done
  wait "$bwpid"; rc=$?
  line=$(awk '$1 == 65536 && NF >= 4' "$work/bw.out" | tail -1)
  if ((rc != 0)) || [[ -z $line ]]; then
    bwrc=$((rc ? rc : 1)); fail "$dev: ib_write_bw -b, round $round (rc=$rc)" "$(cat "$work/bw.out")"
  else bwlines+=" $(awk '{print $4}' <<<"$line")"; fi
  mine=0; [[ -n $qp && -n $cq && -n $mr && -n $pd ]] && mine=1
  # Both guests decide alike: "VIEWS OK" from each (all four views caught;
  # transfers without error so far).
  read -r other other_ok <<<"$(swap "views-$round" "$mine $((bwrc == 0))")"
  ((mine && other == 1)) && break
  ((bwrc == 0 && other_ok == 1 && round < 4)) || break
  diag "round $round ended before both guests had all four views (this guest: ${qp:+qp }${cq:+cq }${mr:+mr }${pd:+pd}; the peer's: $other): another round"
done
diag "resource dumps: $dumps in $((SECONDS - t0)) s, $round transfer round(s)"
if [[ -n $qp && -n $cq && -n $mr && -n $pd ]]; then
  [[ -n ${MR_VERBOSE:-} ]] && diag "$qp" "$cq" "$mr" "$pd"
  line=$(grep -m1 -E 'type RC .* drv_paths [0-9]+' <<<"$qp")
  diag "qp: $line"
  miss=$(has "$line" paths rate_hint peer_hint pacing_rate min_rtt_ns qwnd inflight data_tx retx timeouts \
    moves local_ack_timeouts p0_sport p0_state p0_pwnd p0_srtt_ns p0_sent p0_retx p0_ce p0_moves p0_timeouts)
  np=$(grep -oE ' drv_paths [0-9]+' <<<"$line" | awk '{print $2}')
  [[ -z $miss && $np == "$paths" ]] &&
    pass "rdma resource show qp -dd: RC QP with paths $np, its connection's and per-path attributes" ||
    fail "rdma resource show qp -dd: driver attributes (missing:$miss, paths $np)" "$qp"
  line=$(grep -m1 'comm ib_write_bw' <<<"$cq")
  diag "cq: $line"
  miss=$(has "$line" slots used overruns armed kernel)
  if [[ -n $line && -z $miss ]] && grep -qE ' drv_overruns 0 ' <<<"$line "; then
    pass "rdma resource show cq -dd: ib_write_bw's CQ: slots, used, overruns 0, armed, kernel"
  else fail "rdma resource show cq -dd: driver attributes (missing:$miss)" "$cq"; fi
  line=$(grep -m1 'comm ib_write_bw' <<<"$mr")
  diag "mr: $line"
  miss=$(has "$line" kind pages len access valid key)
  if [[ -n $line && -z $miss ]] && grep -qE ' drv_kind user .*drv_valid 1' <<<"$line"; then
    pass "rdma resource show mr -dd: ib_write_bw's MR: kind user, pages, len, access, valid 1, key"
  else fail "rdma resource show mr -dd: driver attributes (missing:$miss)" "$mr"; fi
  line=$(grep -m1 'comm ib_write_bw' <<<"$pd")
  diag "pd: $line"
  # The RDMA core has no driver callback for PDs: its own fields only.
  [[ -n $line ]] && pass "rdma resource show pd -dd: ib_write_bw's PD (core fields; the core has no driver op for PDs)" ||
    fail "rdma resource show pd -dd" "$pd"
else
  fail "ib_write_bw's objects show up in rdma resource show (qp ${qp:+seen}, cq ${cq:+seen}, mr ${mr:+seen}, pd ${pd:+seen})" \
    "$(res qp; cat "$work/bw.out")"
fi
((bwrc == 0)) && pass "$dev: ib_write_bw -b -D $dur, 64 KiB, over the lossy link, $round round(s):$bwlines MB/s"
meet traffic-done "$(slow 400)"
nap 3  # the last ACKs and timers settle; the QPs are gone
[[ -n $tracing ]] && echo 0 >$T/tracing_on
counters "$work/c1"
# delta NAME: the counter's increase over the traced window.
delta() { awk -v k="$1" 'FNR == NR { a[$1] = $2; next } $1 == k { print $2 - a[k] }' "$work/c0" "$work/c1"; }
diag "counters: $(for k in tx_packets rx_packets retransmits sack_losses rto_losses tail_probes rto_timeouts path_moves probes rate_hint_changes rx_drops; do printf '%s +%s ' $k "$(delta $k)"; done)"
# The comparisons below mean something only over real traffic: packets
# both ways, and retransmissions when netem drops (default: 2 %).
tx=$(delta tx_packets) rx=$(delta rx_packets) rt=$(delta retransmits) want_rt=0
[[ " ${netem[*]} " == *" loss "* ]] && want_rt=1
((tx > 0 && rx > 0 && (rt > 0 || !want_rt))) &&
  pass "the traced window carried traffic: tx_packets +$tx, rx_packets +$rx, retransmits +$rt" ||
  fail "the traced window carried traffic (tx_packets +$tx, rx_packets +$rx, retransmits +$rt): the event counts below would compare zeros"

# --- the events against the counters ---
if [[ -n $tracing ]]; then
  ovr=$(awk '/^overrun:/ { o += $2 } /^dropped events:/ { d += $3 } END { print o + d }' $T/per_cpu/cpu*/stats)
  ((ovr == 0)) && pass "trace buffer: no event lost (overrun + dropped 0)" ||
    fail "trace buffer lost $ovr events (raise buffer_size_kb)"
  cat $T/trace >"$work/trace"
  echo 0 >$T/events/metaroce/enable
  diag "excerpt:" "$(for e in tx rx loss retransmit path_state rto rate_hint; do grep -m2 " $e: " "$work/trace"; done)"
  # One line per event: "name key=value ...", counted and checked.
  awk -v paths="$paths" '
    { for (i = 1; i <= NF; i++) if ($i ~ /^[a-z_]+:$/ && $(i + 1) ~ /^qpn=/) break
      if (i > NF) next
      ev = substr($i, 1, length($i) - 1); delete f
      for (j = i + 1; j <= NF; j++) if (split($j, kv, "=") == 2) f[kv[1]] = kv[2]
      n[ev]++
      if ("path" in f && f["path"] + 0 >= paths) bad_path++
      if (ev == "tx" && f["type"] == "DATA") {
        data++; k = f["qpn"] "/" f["path"]
        if (k in last) { d = (f["psn"] - last[k] + 4294967296) % 4294967296
          if (d == 0 || d >= 2147483648) back++; else if (d > 1) gap++ }
        last[k] = f["psn"]; if (f["retx"] == 1) txretx++ }
      if (ev == "rx" && f["drop"] != "-") rxdrop++
      if (ev == "loss") loss[f["cause"]]++
      if (ev == "path_state" && split(f["sport"], s, "->") == 2 && s[1] != s[2]) moves++
      if (ev == "rate_hint" && f["side"] == "local") hint++ }
    END {
      printf "tx %d rx %d data %d txretx %d retransmit %d sack %d rtoloss %d tlp %d rto %d path_state %d moves %d hint %d rxdrop %d bad_path %d back %d gap %d\n",
        n["tx"], n["rx"], data, txretx, n["retransmit"], loss["sack"], loss["rto"], loss["tlp"], n["rto"], n["path_state"],
        moves, hint, rxdrop, bad_path, back, gap }' "$work/trace" >"$work/counts"
  read -r _ tx _ rx _ data _ txretx _ retx _ sack _ rtoloss _ tlp _ rto _ pstate _ moves _ hint _ rxdrop _ badpath _ back _ gap <"$work/counts"
  diag "events: $(cat "$work/counts")"
  # same DESC EVENTS COUNTER: an event count equals a counter's increase.
  same() { local c; c=$(delta "$3")
    [[ $2 == "$c" ]] && pass "$1: $2 events = $3 +$c" || fail "$1: $2 events, $3 +$c" "$(cat "$work/counts")"; }
  same "metaroce:tx" "$tx" tx_packets
  same "metaroce:rx" "$rx" rx_packets
  same "metaroce:rx with a drop reason" "$rxdrop" rx_drops
  same "metaroce:retransmit" "$retx" retransmits
  same "metaroce:tx with retx=1" "$txretx" retransmits
  same "metaroce:loss cause=sack" "$sack" sack_losses
  same "metaroce:loss cause=rto" "$rtoloss" rto_losses
  same "metaroce:loss cause=tlp" "$tlp" tail_probes
  same "metaroce:rto" "$rto" rto_timeouts
  same "metaroce:path_state with a new sport" "$moves" path_moves
  same "metaroce:rate_hint side=local" "$hint" rate_hint_changes
  if [[ -n $bpf ]]; then
    # The first complete print after the counters were read (the QPs were
    # gone by then: nothing more to count).
    n0=$(wc -l <"$work/bpf.out") lim=$(slow 60) t0=$SECONDS bcounts=""
    while ((SECONDS - t0 < lim)) && kill -0 $bpf 2>/dev/null; do
      # A map never written prints as an empty line: 0.
      bcounts=$(awk -v n0="$n0" 'NR > n0 && /^tick/ { t = 1; tx = 0; rx = 0; next }
        t && $1 == "@tx:" { tx = $2 } t && $1 == "@retx:" { rx = $2 } t && /^end/ { print tx + 0, rx + 0; exit }' "$work/bpf.out")
      [[ -n $bcounts ]] && break
      nap 0.5
    done
    read -r btx bretx <<<"$bcounts"
    [[ -n $bcounts ]] || fail "bpftrace prints its maps within $lim s" "$(tail -20 "$work/bpf.out")"
    # An event that fires while a BPF program already runs on its CPU (a
    # softirq's ACK tx inside the process-context tx program; the debug
    # kernel widens that window) does not run the program: the kernel counts
    # it in the program's recursion_misses (kernel/trace/bpf_trace.c,
    # trace_call_bpf). So each count may fall short of its counter by
    # exactly the misses of bpftrace's two tracepoint programs (prog_type 5),
    # read from its fdinfo; nothing else may differ.
    read -r nprog misses <<<"$(awk 'FNR == 1 { t = "" } /^prog_type:/ { t = $2 }
      /^recursion_misses:/ && t == 5 { n++; m += $2 } END { print n + 0, m + 0 }' /proc/$bpf/fdinfo/* 2>/dev/null)"
    ctx=$(delta tx_packets) cretx=$(delta retransmits)
    if [[ -z $bcounts ]]; then :
    elif ((nprog == 2)); then
      short=$(( (ctx - btx) + (cretx - bretx) ))
      if ((btx <= ctx && bretx <= cretx && short == misses)); then
        pass "bpftrace count(): metaroce:tx $btx, metaroce:retransmit $bretx = tx_packets +$ctx, retransmits +$cretx less $misses recursion misses"
      else fail "bpftrace count(): metaroce:tx $btx, metaroce:retransmit $bretx; tx_packets +$ctx, retransmits +$cretx; recursion misses $misses" "$(cat "$work/counts")"; fi
    else
      diag "bpftrace's tracepoint programs not found in /proc/$bpf/fdinfo ($nprog): counts compared exactly"
      same "bpftrace count() of metaroce:tx" "${btx:-none}" tx_packets
      same "bpftrace count() of metaroce:retransmit" "${bretx:-none}" retransmits
    fi
    # SIGINT: bpftrace detaches and exits. Bounded: a bpftrace that does not
    # exit is a failure with where it waited (state, kernel stack, memory,
    # sampled every 5 s), not a hung test.
    bpfwhere() { echo "+$((SECONDS - t0)) s: $(grep -E '^State' /proc/$bpf/status 2>/dev/null | tr -s ' \t' ' ') $(bpfmem)"
      cat /proc/$bpf/stack 2>/dev/null | head -12; }
    t0=$SECONDS lim=$(slow 300); bpfwhere >"$work/bpf.where"
    kill -INT $bpf
    while ((SECONDS - t0 < lim)) && kill -0 $bpf 2>/dev/null; do
      ((SECONDS - t0 < 5)) || (( (SECONDS - t0) % 5 )) || bpfwhere >>"$work/bpf.where"; nap 1
    done
    if kill -0 $bpf 2>/dev/null; then
      fail "bpftrace exits within $lim s of SIGINT" "$(cat "$work/bpf.where"; bpfwhere; for t in /proc/$bpf/task/*; do echo "${t##*/}: $(cat $t/wchan 2>/dev/null)"; done)"
      # SIGKILL does not end a task in an uninterruptible wait: bounded too.
      kill -9 $bpf 2>/dev/null
      retry 30 bash -c "! kill -0 $bpf 2>/dev/null" || diag "bpftrace survives SIGKILL: not waited for"
    else
      pass "bpftrace exits after SIGINT ($((SECONDS - t0)) s)"
      ((SECONDS - t0 < 30)) || diag "bpftrace's slow exit:" "$(cat "$work/bpf.where")"
    fi
    kill -0 $bpf 2>/dev/null || wait $bpf
  fi
  ((data > 1000)) && pass "metaroce:tx: $data DATA packets traced" || fail "metaroce:tx: only $data DATA packets traced"
  ((badpath == 0)) && pass "every traced path index < paths ($paths)" || fail "$badpath events name a path >= $paths"
  ((back == 0)) && pass "DATA PSNs increase on every (QP, path) ($gap gaps: datagrams the stack refused)" ||
    fail "DATA PSNs went backwards $back times on a (QP, path)" "$(cat "$work/counts")"
  # Both directions carry data over the lossy link: each side lost and resent some.
  ((retx > 0 && sack + rtoloss + tlp > 0)) && pass "lossy link: $((sack + rtoloss + tlp)) losses and $retx retransmissions traced" ||
    fail "lossy link: no loss or retransmission traced" "$(cat "$work/counts")"
fi
rm -rf "$work"
check_kmemleak
done_testing
