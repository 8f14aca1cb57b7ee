#!/usr/bin/env bash
# Two guests: what a hostile new user does to the RDMA device named by $1
# (default mr0, metaroce; rxe0 for the kernel's rxe, the oracle) with the
# unmodified rdma-core and perftest tools. Guest 1 serves, guest 2 connects.
#   abuse.sh [mr0|rxe0]
#   qemu/vm-run -n 2 -t 900 tests/guest/abuse.sh
# Sections:
#   uc     UC with perftest (ib_send_bw/ib_write_bw -c UC) and
#          ibv_uc_pingpong -c with multi-packet messages: on a clean link
#          every message arrives (the receiver counts bytes and dropped
#          messages; the perftest senders are rate-limited below what a TCG
#          guest absorbs).
#   sizes  1 byte (perftest, ibv_rc_pingpong), 0 bytes (ibv_ud_pingpong;
#          ibv_rc_pingpong -s 0 refused at ibv_reg_mr), the path MTU and
#          MTU +- 1, 8 MiB RDMA WRITE/READ, and max_msg_sz + 1 refused
#          cleanly.
#   kill   kill -9 of the client, then of the server, in the middle of
#          ib_write_bw -D 60 (scaled), then of the server in the middle of
#          ib_read_bw -s 4 MiB -t 1 -o 1 -D 60 (its client's READ, its request
#          acknowledged, then waits for a response that never comes: it must
#          fail with retry exceeded, not wait for ever): the other side ends within a bound, both guests release
#          every object of the dead processes, and a fresh run succeeds (each
#          kill's run after the one before; a short ib_write_bw after the
#          last).
#   mtu    the server's netdev MTU changed (1500 -> 9000 -> 1200 -> 1500,
#          down/up) under ib_write_bw -D 20 (scaled): the tool ends within a bound,
#          the port follows the MTU and comes back ACTIVE, and
#          ibv_rc_pingpong -c succeeds afterwards.
# MR_ABUSE_SECTIONS (space-separated, default all) runs a subset. Every time
# limit and bound is scaled by tests/lib.sh's slow (x8 on the debug kernel,
# where perftest's 5 x 8 MiB ran past the normal 90 s; MR_SLOW=N overrides).
. "$MR_REPO/tests/lib.sh"
dev=${1:-mr0}
sections=${MR_ABUSE_SECTIONS:-uc sizes kill mtu}
want() { [[ " $sections " == *" $1 "* ]]; }
t_start=$SECONDS
add_link "$dev"
link_ready "$dev"
mtu_enum() { ibv_devinfo -d "$dev" 2>/dev/null | awk '/active_mtu:/ { print $2; exit }'; }
pmtu=$(mtu_enum)
maxmsg=$(ibv_devinfo -v -d "$dev" 2>/dev/null | awk '/max_msg_sz:/ { print $2; exit }')
diag "$dev: active_mtu $pmtu, max_msg_sz $maxmsg"
[[ $pmtu =~ ^[0-9]+$ && $maxmsg =~ ^0x[0-9a-f]+$|^[0-9]+$ ]] &&
  pass "$dev: ibv_devinfo -v: active_mtu $pmtu, max_msg_sz $maxmsg" ||
  { fail "$dev: ibv_devinfo reports active_mtu and max_msg_sz" "$(ibv_devinfo -v -d "$dev" 2>&1)"; done_testing; }
maxmsg=$((maxmsg))
warns0=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call Trace')

server() { ((MR_ID == 1)); }
peer=$((3 - MR_ID))
# Every exchange gets a TCP port of its own: a client that retries can never
# reach the server of a later exchange.
port=18600
ev=$MR_RUNDIR/events
mkdir -p "$ev"
# swap NAME VALUE (tests/lib.sh) agrees on a verdict or a retry.

# run TIMEOUT CMD...: guest 1 serves; guest 2 retries (60 s) until guest 1's
# server is up. Output in $out, status in $rc.
run() {
  local t=$1; shift
  if server; then out=$(timeout -k 5 "$t" "$@" 2>&1); rc=$?; return "$rc"; fi
  local end=$((SECONDS + $(slow 60)))
  while :; do
    out=$(timeout -k 5 "$t" "$@" "$MR_PEER_IP4" 2>&1); rc=$?
    ((rc == 0)) && return 0
    grep -q 'remote address' <<<"$out" && return "$rc"
    ((SECONDS < end)) || return "$rc"
    nap 1
  done
}
dmesg_tail() { dmesg | tail -15; }
# The first GID/port lookups can race the other side: use a fresh port per call.
nextport() { port=$((port + 1)); }

# perf TOOL SIZE ITERS [OPTIONS...]: perftest between the guests; passes when
# the tool exits 0 and prints its result line for SIZE (both sides), and
# (on guest 1 with $expect_rx set) the receiver's checks in $rx_check hold.
perf() {
  local tool=$1 size=$2 iters=$3 line; shift 3
  nextport
  run "$(slow "${T:-90}")" "$tool" -d "$dev" -x "$gid" -p "$port" -s "$size" -n "$iters" -F "$@"
  line=$(awk -v s="$size" '$1 == s && NF >= 4' <<<"$out" | tail -1)
  if ((rc == 0)) && [[ -n $line ]]; then
    perf_line="$(awk '{print $4 " MB/s avg"}' <<<"$line")"; return 0
  fi
  perf_line="rc=$rc"; return 1
}

# pp TOOL ITERS SIZE [OPTIONS...]: an ibv_*_pingpong -c between the guests;
# passes when it exits 0 and reports "iters in" (every received buffer
# checked against the sender's pattern).
pp() {
  local tool=$1 iters=$2 size=$3; shift 3
  nextport
  run "$(slow "${T:-90}")" "$tool" -d "$dev" -g "$gid" -p "$port" -n "$iters" -s "$size" -c "$@"
  ((rc == 0)) && grep -q 'iters in' <<<"$out"
}
# pp_test DESC TOOL ITERS SIZE [OPTIONS...]: pp as a test. ibv_*_pingpong has
# no closing handshake: the side that finishes first destroys its QP, and the
# other side's last message can end unacknowledged (retry exceeded) when the
# bed drops its ACK; on guest 1 that alone is a diagnostic (traffic.sh).
pp_test() {
  local desc=$1; shift
  if pp "$@"; then pass "$dev: $desc: $(grep 'iters in' <<<"$out")"
  elif server && grep -q 'retry counter exceeded' <<<"$out"; then
    diag "$desc: last send unacknowledged after the peer left: $(grep -m1 Failed <<<"$out")"
  else fail "$dev: $desc (rc=$rc)" "$out$(dmesg_tail)"; fi
}

# The receiver's view on metaroce: the counters say what arrived.
ctr_snap() { snap=$(rdma statistic show link "$dev/1" 2>/dev/null); }
cval() { # cval TEXT NAME: counter NAME in TEXT (rdma statistic show output)
  local k=$2
  # rxe names its packet counters differently.
  if [[ $dev == rxe* ]]; then
    case $k in rx_packets) k=rcvd_pkts ;; tx_packets) k=sent_pkts ;; esac
  fi
  tr ' ' '\n' <<<"$1" | awk -v k="$k" 'p { v = $0; exit } $0 == k { p = 1 } END { print v + 0 }'
}
ctr_delta() { # ctr_delta NAME [NOW]: growth of counter NAME since ctr_snap (till the snapshot NOW)
  local now=${2:-$(rdma statistic show link "$dev/1" 2>/dev/null)}
  echo $(($(cval "$now" "$1") - $(cval "$snap" "$1")))
}

# --- UC ---------------------------------------------------------------------
# UC has no retransmission: a message that loses a packet is dropped whole.
# The bed itself can drop a datagram (the host's UDP socket between two
# starved TCG guests), so a failed exchange is tried once more -- both guests
# agree on it -- and the drop counters of the first try are shown.
# The sender is held to 2 MiB/s (perftest's software rate limiter, bursts of
# 2 messages): at full speed the sending guest outruns the receiving one and
# the host drops datagrams between them (its UDP RcvbufErrors counter grows),
# which UC cannot repair -- the bed's loss, not the device's.
uc_rate=(--rate_limit=2 --rate_units=M --rate_limit_type=SW --burst_size=2)
uc_perf() { # uc_perf TOOL SIZE ITERS
  local tool=$1 size=$2 iters=$3 try ok verdict other drops rxb txp rxp
  local T=45
  for try in 1 2; do
    ctr_snap
    ok=0; perf "$tool" "$size" "$iters" -c UC "${uc_rate[@]}" && ok=1
    verdict="$perf_line"
    txp=$(ctr_delta tx_packets) rxp=$(ctr_delta rx_packets)
    other=$(swap "uc-$tool-$size-$try" "$ok $txp")
    if ((ok)) && server && [[ $dev == mr* ]]; then
      # The receiver: every payload byte arrived, no message was dropped.
      drops=$(ctr_delta uc_msg_drops) rxb=$(ctr_delta rx_bytes)
      if ((drops != 0 || rxb < size * iters)); then
        ok=0; verdict="uc_msg_drops +$drops, rx_bytes +$rxb < $((size * iters))"
      else verdict+=", receiver: rx_bytes +$rxb >= $((size * iters)), uc_msg_drops +0"; fi
    fi
    server && [[ $dev == mr* ]] && verdict+="; packets: the sender sent ${other#* }, this receiver got $rxp"
    # Both guests' verdicts, after the receiver's checks.
    other=$(swap "uc-$tool-$size-$try-verdict" "$ok")
    ((ok && other == 1)) && break
    ((try == 1)) && diag "$tool -c UC: first try failed here=$ok peer=$other ($verdict; $(rdma statistic show link "$dev/1" 2>&1 |
      grep -o 'uc_msg_drops [0-9]*\|rx_drop_no_receive [0-9]*\|rx_drops [0-9]*' | tr '\n' ' ')): trying once more"
  done
  if ((ok)); then pass "$dev: $tool -c UC $iters x $size B at 2 MiB/s: $verdict"
  else fail "$dev: $tool -c UC $iters x $size B at 2 MiB/s ($verdict)" "$out$(dmesg_tail)"; fi
}
# unrel_pp TOOL ITERS SIZE DESC: ibv_uc_pingpong / ibv_ud_pingpong -c between
# the guests, tried once more (both guests agreeing) if a datagram was lost.
unrel_pp() {
  local tool=$1 iters=$2 size=$3 desc=$4 try ok other
  local T=45
  for try in 1 2; do
    ok=0; pp "$tool" "$iters" "$size" && ok=1
    other=$(swap "pp-$tool-$size-$try" "$ok")
    ((ok && other == 1)) && break
    ((try == 1)) && diag "$tool -s $size: first try failed here=$ok peer=$other (rc=$rc): trying once more"
  done
  if ((ok)); then pass "$dev: $tool -c $iters x $desc: $(grep 'iters in' <<<"$out")"
  else fail "$dev: $tool -c $iters x $desc (rc=$rc)" "$out$(dmesg_tail)"; fi
}
if want uc; then
  t0=$SECONDS
  uc_perf ib_send_bw 4096 200
  uc_perf ib_write_bw 16384 100
  unrel_pp ibv_uc_pingpong 20 $((4 * pmtu + 100)) "$((4 * pmtu + 100)) B (5 packets each), data checked"
  diag "section uc: $((SECONDS - t0)) s"
fi

# --- message-size extremes --------------------------------------------------
if want sizes; then
  t0=$SECONDS
  perf ib_send_bw 1 200 && pass "$dev: ib_send_bw 200 x 1 B: $perf_line" ||
    fail "$dev: ib_send_bw 200 x 1 B ($perf_line)" "$out$(dmesg_tail)"
  perf ib_write_bw 1 200 && pass "$dev: ib_write_bw 200 x 1 B: $perf_line" ||
    fail "$dev: ib_write_bw 200 x 1 B ($perf_line)" "$out$(dmesg_tail)"
  pp_test "ibv_rc_pingpong -c 20 x 1 B" ibv_rc_pingpong 20 1
  # 0 bytes: ibv_ud_pingpong sends -s bytes from a buffer of -s + 40 (its GRH
  # room), so -s 0 exchanges zero-length UD SENDs. ibv_rc_pingpong -s 0 asks
  # ibv_reg_mr for 0 bytes, which ib_umem_get refuses for every device (no
  # pages; rxe alike): it must fail there, cleanly, without a peer.
  unrel_pp ibv_ud_pingpong 20 0 "0 B (zero-length UD SENDs)"
  o=$(timeout -k 5 30 ibv_rc_pingpong -d "$dev" -g "$gid" -s 0 -n 5 -p $((port + 50)) 2>&1); r=$?
  if ((r != 0 && r != 124 && r != 137)) && grep -q "Couldn't register MR" <<<"$o"; then
    pass "$dev: ibv_rc_pingpong -s 0 refused cleanly at ibv_reg_mr of 0 bytes (exit $r)"
  else fail "$dev: ibv_rc_pingpong -s 0 refused cleanly at ibv_reg_mr (rc=$r)" "$o"; fi
  # A path MTU above the port's active MTU: metaroce refuses it at RTR (rxe
  # takes it and then sends datagrams the link cannot carry: retry exceeded on
  # one side, a hang on the other). Both sides in this guest, over loopback.
  if [[ $dev != rxe* ]] && ((pmtu < 4096)); then
    mp=$((port + 60))
    timeout -k 5 30 ibv_rc_pingpong -d "$dev" -g "$gid" -m 4096 -n 5 -p "$mp" >"$ev/mtu-srv.$MR_ID" 2>&1 &
    spid=$!; nap 1
    o=$(timeout -k 5 30 ibv_rc_pingpong -d "$dev" -g "$gid" -m 4096 -n 5 -p "$mp" 127.0.0.1 2>&1); r=$?
    wait "$spid"; sr=$?
    if ((r != 0 && r != 124 && r != 137 && sr != 0 && sr != 124 && sr != 137)) &&
      grep -q "Failed to modify QP to RTR" "$ev/mtu-srv.$MR_ID"; then
      # The server refuses first and closes: the client ends at its read.
      pass "$dev: ibv_rc_pingpong -m 4096 over active MTU $pmtu refused at RTR (server exit $sr; client exit $r: $(grep -m1 -E 'RTR|remote address' <<<"$o"))"
    else fail "$dev: ibv_rc_pingpong -m 4096 over active MTU $pmtu refused at RTR (rc=$r, server rc=$sr)" "$o$(cat "$ev/mtu-srv.$MR_ID")"; fi
  fi
  # The path MTU (ibv_rc_pingpong's default path MTU is 1024, so is the
  # port's active MTU at a netdev MTU of 1500) and one byte either side.
  for s in $((pmtu - 1)) "$pmtu" $((pmtu + 1)); do
    pp_test "ibv_rc_pingpong -c 20 x $s B (path MTU $pmtu)" ibv_rc_pingpong 20 "$s" -m "$pmtu"
  done
  perf ib_send_bw $((pmtu + 1)) 100 && pass "$dev: ib_send_bw 100 x $((pmtu + 1)) B (MTU+1): $perf_line" ||
    fail "$dev: ib_send_bw 100 x $((pmtu + 1)) B ($perf_line)" "$out$(dmesg_tail)"
  # Large: 8 MiB messages (8192 packets each).
  perf ib_write_bw 8388608 5 && pass "$dev: ib_write_bw 5 x 8 MiB: $perf_line" ||
    fail "$dev: ib_write_bw 5 x 8 MiB ($perf_line)" "$out$(dmesg_tail)"
  perf ib_read_bw 8388608 5 && pass "$dev: ib_read_bw 5 x 8 MiB: $perf_line" ||
    fail "$dev: ib_read_bw 5 x 8 MiB ($perf_line)" "$out$(dmesg_tail)"
  # Past max_msg_sz: refused cleanly (no peer needed; each side on its own).
  big=$((maxmsg + 1))
  for cmd in "ib_write_bw -d $dev -x $gid -F -s $big -n 5" "ibv_rc_pingpong -d $dev -g $gid -s $big -n 5"; do
    o=$(timeout -k 5 30 $cmd -p $((port + 50)) 2>&1); r=$?
    if ((r != 0 && r != 124 && r != 137)) && [[ -n $o ]]; then pass "$dev: ${cmd%% *} -s $big (max_msg_sz + 1) refused by the tool: $(grep -v '^ *$' <<<"$o" | tail -1)"
    else fail "$dev: ${cmd%% *} -s $big (max_msg_sz + 1) refused cleanly (rc=$r)" "$o"; fi
  done
  diag "section sizes: $((SECONDS - t0)) s"
fi

# --- kill -9 mid-transfer ---------------------------------------------------
# Objects of pid $1 on $dev: owned (tests/lib.sh); any user-space objects at all:
user_objs() {
  local r
  for r in qp mr pd; do rdma res show "$r" 2>/dev/null | grep -E "(^| )$dev[ /:].* pid [0-9]+"; done
}
# The -D runs' ib_write_bw runs at nice 19 on both sides: the client busy-polls
# its CQ, and in a debug guest the script beside it (its meet, its snapshot, the
# kill) got so little of the one CPU that the client's 240 s ran out first.
# start_client SECONDS [TOOL [OPTS]]: guest 2 starts TOOL (ib_write_bw) OPTS
# (-s 65536) -D SECONDS against guest 1 in the background (pid in $pid, output
# in $f), retrying for 60 s until it connects.
start_client() {
  local end=$((SECONDS + $(slow 60))) k tool=${2:-ib_write_bw} opts=${3:--s 65536}
  while :; do
    # shellcheck disable=SC2086 # opts: several words
    nice -n 19 stdbuf -oL "$tool" -d "$dev" -x "$gid" -p "$port" $opts -D "$1" -F "$MR_PEER_IP4" >"$f" 2>&1 &
    pid=$!
    for ((k = 0; k < $(slow 20); k++)); do
      grep -q 'remote address' "$f" && return 0
      kill -0 "$pid" 2>/dev/null || break
      nap 1
    done
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    ((SECONDS < end)) || return 1
    nap 1
  done
}
# kill_test VICTIM [TOOL [OPTS [last]]]: guest VICTIM's TOOL (ib_write_bw)
# OPTS (-s 65536) -D $kd (60 s, scaled by slow: the two guests' connects can
# lie tens of seconds apart on the debug kernel) is killed with -9 a few
# seconds into the transfer; "last": then a fresh short run.
kill_test() {
  local victim=$1 tool=${2:-ib_write_bw} opts=${3:--s 65536} me pid f t0 t1 line ended rc2 o v
  local who=$([[ $victim == 1 ]] && echo server || echo client)
  who+=" of $tool"
  nextport
  f=$MR_RUNDIR/kill$victim-$tool.out.$MR_ID
  ctr_snap
  if server; then
    # shellcheck disable=SC2086 # opts: several words
    nice -n 19 stdbuf -oL "$tool" -d "$dev" -x "$gid" -p "$port" $opts -D "$kd" -F >"$f" 2>&1 &
    pid=$!
  else
    start_client "$kd" "$tool" "$opts"
  fi
  if retry "$(slow 60)" grep -q 'remote address' "$f"; then
    pass "$dev: kill -9 of the $who: $tool -D $kd connected (pid $pid)"
  else fail "$dev: kill -9 of the $who: $tool -D $kd connects" "$(cat "$f")"; fi
  meet "kill$victim-$tool-connected"
  ctr_snap
  nap 3
  if ((MR_ID == victim)); then
    # The sender busy-polls its CQ and starves this script under TCG: one
    # snapshot, the kill at once, the sums after.
    local now alive=0 rxp txp
    now=$(rdma statistic show link "$dev/1" 2>/dev/null)
    kill -9 "$pid" 2>/dev/null && alive=1
    wait "$pid" 2>/dev/null
    if ((alive)); then pass "$dev: kill -9 of the $who (pid $pid) while it runs"
    else fail "$dev: kill -9 of the $who: it was still running 3 s into its $kd s" "$(cat "$f")"; fi
    rxp=$(ctr_delta rx_packets "$now") txp=$(ctr_delta tx_packets "$now")
    [[ $dev == mr* ]] && diag "the 3 s before the kill: $(for c in retransmits probes duplicates sack_losses rto_timeouts; do printf '%s +%s ' $c "$(ctr_delta $c "$now")"; done)"
    ((rxp + txp > 100)) && pass "$dev: kill -9 of the $who: traffic under way before the kill (rx_packets +$rxp, tx_packets +$txp)" ||
      fail "$dev: kill -9 of the $who: traffic under way before the kill (only rx_packets +$rxp, tx_packets +$txp)" "$(cat "$f")"
    swap "kill$victim-$tool-killed" 1 >/dev/null
  else
    swap "kill$victim-$tool-killed" 1 >/dev/null
    t0=$SECONDS
    # The survivor ends (with or without an error) within 45 s of the kill;
    # past that it is killed too, and that is a failure of the bound.
    ended=0
    retry "$(slow 45)" bash -c "! kill -0 $pid 2>/dev/null" && ended=1
    t1=$((SECONDS - t0))
    if ((ended)); then
      wait "$pid"; rc2=$?
      pass "$dev: kill -9 of the $who: the surviving $tool ends ${t1} s after it (exit $rc2: $(grep -m1 -iE 'error|fail|abort' "$f" || echo 'no error message'))"
      # The READ client's outstanding READ, its response cut off: it fails with
      # retry exceeded (perftest prints "Failed status 12"), as a QP whose peer
      # stopped answering does (IBTA 9.7.6.1.3).
      # (A run can end on its own before the kill lands: exit 0, no READ cut
      # off, nothing to judge.)
      if [[ $tool == ib_read_bw && $dev == mr* ]]; then
        if ((rc2 == 0)); then
          skip "$dev: kill -9 of the $who: the READ the server did not answer completes with retry exceeded (status 12)" "the survivor's run ended on its own (exit 0): no READ was cut off"
        else
          # ... by its local ACK timer: perftest's retry_cnt 7 is 8 timeouts
          # (the counter since the run connected; a lossless run counts none).
          v=$(ctr_delta local_ack_timeouts)
          if grep -q 'Failed status 12' "$f" && ((v >= 8)); then
            pass "$dev: kill -9 of the $who: the READ the server did not answer completed with retry exceeded (status 12) after local_ack_timeouts +$v"
          else fail "$dev: kill -9 of the $who: the READ the server did not answer completes with retry exceeded (status 12) after at least 8 local ACK timeouts (local_ack_timeouts +$v)" "$(cat "$f")"; fi
        fi
      fi
    else
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
      fail "$dev: kill -9 of the $who: the surviving $tool ends within 45 s (killed)" "$(cat "$f")$(dmesg_tail)"
    fi
  fi
  # Both guests: nothing of the dead (or ended) process within 30 s, and no
  # user-space QP, MR or PD left on $dev at all.
  gone() { [[ -z $(owned "$pid") && -z $(user_objs) ]]; }
  t0=$SECONDS
  if retry "$(slow 30)" gone; then pass "$dev: kill -9 of the $who: rdma res shows no qp/mr/pd/cq of pid $pid nor any user object after $((SECONDS - t0)) s"
  else fail "$dev: kill -9 of the $who: objects left after 30 s" "$(owned "$pid"; user_objs; rdma res show 2>&1)"; fi
  meet "kill$victim-$tool-clean"
  # A fresh short run between the guests (after a kill, the next kill test's
  # own run is that: it must connect and carry traffic).
  [[ ${4:-} == last ]] || return 0
  perf ib_write_bw 65536 50 && pass "$dev: after the kill of the $who: a fresh ib_write_bw 50 x 64 KiB: $perf_line" ||
    fail "$dev: after the kill of the $who: a fresh ib_write_bw 50 x 64 KiB ($perf_line)" "$out$(dmesg_tail)"
}
# The kill runs last 60 s: longer than the survivor's bound (45 s after the
# kill), so a survivor that does not notice its peer's death fails the bound
# instead of ending on its own -D timer.
kd=$(slow 60) md=$(slow 20)
if want kill; then
  t0s=$SECONDS
  # One 4 MiB READ at a time: the server most likely dies while a response is
  # under way, its request long acknowledged (nothing left in flight). Not on
  # the debug kernel (slow > 1): there the responder's kernel work took the
  # server guest's one CPU for minutes, and its script met the client only
  # after the run had ended on its own.
  kill_test 2
  if (($(slow 1) == 1)); then
    kill_test 1
    kill_test 1 ib_read_bw "-s 4194304 -t 1 -o 1" last
  else
    kill_test 1 ib_write_bw "-s 65536" last
    diag "$dev: kill -9 of the server of ib_read_bw: not run on the debug kernel (the server's script is starved past the run's end)"
  fi
  diag "section kill: $((SECONDS - t0s)) s"
fi

# --- MTU changes under traffic ----------------------------------------------
port_state() { rdma link show "$dev/1" 2>/dev/null | grep -o 'state [A-Z_]*' | head -1 | awk '{print $2}'; }
# The active MTU the port should have at netdev MTU $1: the largest IB MTU
# that fits with the RoCE v2 headers (IPv4 20 + UDP 8 + BTH 12 + ICRC 4 ...),
# at most the port's max_mtu.
if want mtu; then
  t0s=$SECONDS
  nextport
  f=$MR_RUNDIR/mtu.out.$MR_ID
  if server; then
    nice -n 19 stdbuf -oL ib_write_bw -d "$dev" -x "$gid" -p "$port" -s 65536 -D "$md" -F >"$f" 2>&1 &
    pid=$!
  else
    start_client "$md"
  fi
  retry "$(slow 60)" grep -q 'remote address' "$f" && pass "$dev: ib_write_bw -D $md connected" ||
    fail "$dev: ib_write_bw -D $md connects" "$(cat "$f")"
  t0=$SECONDS
  if server; then
    nap 2
    ctr_snap
    seen="" alive=0
    kill -0 "$pid" 2>/dev/null && alive=1
    for m in 9000 1200 1500; do
      ip link set "$MR_IF" mtu "$m" || fail "ip link set $MR_IF mtu $m"
      nap 3
      seen+="$m:$(mtu_enum) "
    done
    ip link set "$MR_IF" down; nap 2
    seen+="down:$(port_state) "
    ip link set "$MR_IF" up
    # The changes happened under traffic: the tool ran when they began and
    # data arrived while they went on.
    v=$(ctr_delta rx_packets)
    if ((alive && v > 100)); then
      pass "$dev: MTU changes and down/up under traffic (ib_write_bw running; rx_packets +${v:-?} meanwhile)"
    else fail "$dev: MTU changes under traffic (tool running: $alive, rx_packets +$v)" "$(cat "$f")"; fi
    # Down flushed the IPv6 address (keep_addr_on_down 0): as guest-init had it.
    ip -6 addr add "$MR_IP6/64" dev "$MR_IF" nodad 2>/dev/null
    diag "netdev MTU -> active_mtu: $seen"
    [[ $seen == "9000:4096 1200:1024 1500:$pmtu down:DOWN "* ]] &&
      pass "$dev: the port follows the netdev under traffic: $seen" ||
      fail "$dev: the port follows the netdev (want 9000:4096 1200:1024 1500:$pmtu down:DOWN)" "$seen"
  fi
  # The tool ends within its $md s and a bound (60 s more, scaled), cleanly or with an error.
  ended=0
  retry $((md + $(slow 60))) bash -c "! kill -0 $pid 2>/dev/null" && ended=1
  if ((ended)); then
    wait "$pid"; rc2=$?
    line=$(awk '$1 == 65536 && NF >= 4' "$f" | tail -1)
    pass "$dev: ib_write_bw -D $md under MTU changes ends after $((SECONDS - t0)) s: exit $rc2, $([[ -n $line ]] && awk '{print $4 " MB/s avg"}' <<<"$line" || grep -m1 -iE 'error|fail' "$f")"
  else
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    fail "$dev: ib_write_bw -D $md under MTU changes ends within $((md + $(slow 60))) s (killed)" "$(cat "$f")$(dmesg_tail)"
  fi
  if server; then
    retry "$(slow 30)" test "$(port_state)" = ACTIVE && [[ $(mtu_enum) == "$pmtu" ]] &&
      pass "$dev: after the MTU changes: port ACTIVE, active_mtu $(mtu_enum) at netdev MTU $(cat /sys/class/net/$MR_IF/mtu)" ||
      fail "$dev: after the MTU changes: port ACTIVE with active_mtu $pmtu" "$(rdma link show; ibv_devinfo -d "$dev")"
  fi
  gid2=$(retry 20 gid_index "$dev" "$MR_IP4") && [[ $gid2 == "$gid" ]] || diag "GID index now '${gid2:-none}' (was $gid)"
  gid=${gid2:-$gid}
  meet mtu-done
  pp_test "after the MTU changes: ibv_rc_pingpong -c 20 x 4096 B" ibv_rc_pingpong 20 4096
  diag "section mtu: $((SECONDS - t0s)) s"
fi

# --- the end ----------------------------------------------------------------
n=$(dmesg | grep -cE 'WARNING:|BUG:|Oops|Call Trace')
((n == warns0)) && pass "dmesg: no WARNING/BUG/Oops during the test" ||
  fail "dmesg: $((n - warns0)) WARNING/BUG/Oops lines during the test" "$(dmesg | grep -E -A20 'WARNING:|BUG:|Oops' | head -60)"
meet abuse-done
check "rdma link delete $dev" timeout 120 rdma link delete "$dev"
check_kmemleak
diag "abuse.sh: $((SECONDS - t_start)) s"
done_testing
