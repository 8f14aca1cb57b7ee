#!/usr/bin/env bash
# Two guests: a blind forger (tests/forger) against both ends of running
# integrity tests over mr0 (Documentation/transport.rst, "Identity and threat
# model"). Guest 1 serves, guest 2 drives; each guest's forger reads the QPN
# of its peer's QP (the attacker knows the connection ids) and sends the peer
# forged datagrams from its own address, i.e. the address the peer's QP
# accepts, from 16 source ports, at MR_FORGE_RATE datagrams a second (default
# 4000, about what the integrity run itself sends; unpaced, a forger takes a
# whole TCG vCPU and starves everything else in the guest, which measures
# TCG, not the transport).
#   blind    3 integrity runs while both forgers send well-formed DATA / ACK /
#            PROBE with guessed tokens and sequence numbers: every run 0
#            corrupt / lost / duplicated, no error completion, forgeries
#            counted (bad_token). With --goodput (tests/run --long), also 3
#            runs while they send the same to a closed port (the forgers' CPU
#            cost alone) and goodput: the median of the 3 paired ratios (run
#            k attacked / run k beside, back to back) — a speed figure, so
#            not in the default run.
#   flood    FLOOD datagrams (default 100000; the issue's 10^6:
#            MR_FLOOD=1000000), malformed and blind mixed, half over IPv4 and
#            half over IPv6, into the device while an integrity run is live:
#            the run unaffected, every datagram that reached the module
#            counted as a drop (by reason, or as unknown_qpn), no WARN /
#            KASAN / UBSAN / lockdep report (the runner fails on those).
# The binaries are built on the host (guests share its root fs):
#   make -C tests/integrity && make -C tests/forger
#   qemu/vm-run -n 2 -t 900 tests/guest/forgery.sh [--goodput] [FLOOD [RATE]]
# RATE: the flood's datagrams a second per address family (default 4000).
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=mr0
goodput=0
[[ ${1:-} == --goodput ]] && { goodput=1; shift; }
for a in "$@"; do
  [[ $a =~ ^[1-9][0-9]*$ ]] || { echo "forgery.sh: '$a': usage: forgery.sh [--goodput] [FLOOD [RATE]] (positive integers)" >&2; exit 2; }
done
flood=${1:-${MR_FLOOD:-100000}}
bin=$MR_REPO/out/integrity
forger=$MR_REPO/out/forger
for b in integrity forger; do
  [[ -x $MR_REPO/out/$b ]] && pass "out/$b built" \
    || { fail "out/$b missing: run 'make -C tests/$b' on the host"; done_testing; }
done
add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
retry 60 ping -6 -q -c1 -W1 "$MR_PEER_IP6" >/dev/null 2>&1 || diag "IPv6 peer not reachable yet"
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid"
else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; done_testing; fi

ev=$MR_RUNDIR/events
mkdir -p "$ev"
# Time limits are scaled for the kernel under test (tests/lib.sh slow; x8 on
# the debug kernel); slow settles MR_SLOW here, once, for the subshells below.
slow 1 >/dev/null
lim=$(slow 300)
# The remote QPN of this guest's RC QP in RTS (the peer's QPN), once it exists.
peer_qpn() { rdma res show qp link "$dev/1" 2>/dev/null | awk '/type RC/ && /state RTS/ { for (i = 1; i < NF; i++) if ($i == "rqpn") { print $(i + 1); exit } }'; }
# integrity_run TAG SEED TCP-PORT [FORGER-PORT]: one integrity pair; with a port, this
# guest's forger attacks its peer's QP at that port while it runs. Leaves
# "rc N summary" in $ev/TAG.$MR_ID and the forger's line in $ev/TAG.forger.$MR_ID.
integrity_run() {
  local tag=$1 seed=$2 tport=$3 port=${4:-} role=server out fp="" q
  ((MR_ID == 1)) || role="client $MR_PEER_IP4"
  meet "go-$tag"
  if [[ -n $port ]]; then
    (for _ in $(seq 600); do q=$(peer_qpn); [[ -n $q ]] && break; nap 0.1; done
     exec "$forger" -d "$MR_PEER_IP4" -p "$port" -c "${q:-16}" -m blind -n 1000000000 -r "$frate" -t "$lim" -s $((seed * 2 + MR_ID)) \
       >"$ev/$tag.forger.$MR_ID" 2>&1) &
    fp=$!
  fi
  local a=()
  ((MR_ID == 2)) && a=(-s "$seed" -n 150 -M 262144)
  out=$(timeout "$lim" "$bin" -d "$dev" -g "$gid" -p "$tport" "${a[@]}" $role 2>&1)
  echo "rc $? $(grep -m1 '^# integrity:' <<<"$out") $(grep -m1 '^not ok' <<<"$out")" >"$ev/$tag.$MR_ID"
  if [[ -n $fp ]]; then kill "$fp" 2>/dev/null; wait "$fp" 2>/dev/null; fi
}
mbps() { grep -oE '[0-9.]+ MB/s' "$1" | head -1 | cut -d' ' -f1; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] + 0 }'; }

# --- blind forgers against both ends ---------------------------------------
frate=${MR_FORGE_RATE:-4000}
tok0=$(counter rx_drop_bad_token); unk0=$(counter unknown_qpn_drops)
ctl=() att=()
kinds=(att); ((goodput)) && kinds=(ctl att)
for k in 1 2 3; do
  ((goodput)) && integrity_run "ctl$k" $((10 + k)) $((19100 + k)) 4793
  integrity_run "att$k" $((10 + k)) $((19110 + k)) 4792
  if ((MR_ID == 2)); then
    for t in "${kinds[@]}"; do
      r=$(cat "$ev/$t$k.2")
      if [[ $r == "rc 0 "*" 0 corrupt, 0 lost, 0 duplicated"* ]]; then
        pass "$dev: integrity run $k with forgers at $([[ $t == att ]] && echo "both QPs" || echo "a closed port"): 0 corrupt/lost/duplicated, no error completion"
      else fail "$dev: integrity run $k ($t) with forgers" "$r"; fi
      [[ $t == ctl ]] && ctl+=("$(mbps "$ev/$t$k.2")") || att+=("$(mbps "$ev/$t$k.2")")
    done
    diag "forgers, run $k: $(cat "$ev/att$k.forger.1" "$ev/att$k.forger.2" 2>/dev/null | tr '\n' ' ')"
  fi
done
tok=$(($(counter rx_drop_bad_token) - tok0)); unk=$(($(counter unknown_qpn_drops) - unk0))
((tok > 0)) && pass "$dev: forged datagrams reached the token check and were dropped: bad_token +$tok (unknown_qpn +$unk)" \
  || fail "$dev: no forgery was dropped as bad_token (unknown_qpn +$unk)" "$(rdma statistic show link "$dev/1")"
# Paired: run k under attack against run k beside forgers at a closed port,
# back to back, so that the host's load (other guests, builds: TCG guests
# are CPU-bound) weighs on both alike; the median of the three ratios.
if ((MR_ID == 2 && goodput)); then
  mc=$(median "${ctl[@]}"); ma=$(median "${att[@]}")
  ratios=()
  for i in "${!att[@]}"; do
    ratios+=("$(awk -v a="${att[i]}" -v c="${ctl[i]}" 'BEGIN { printf "%.2f", (c > 0 ? a / c : 0) }')")
  done
  frac=$(median "${ratios[@]}")
  if awk -v f="$frac" 'BEGIN { exit !(f >= 0.75) }'; then
    pass "$dev: goodput under attack is $frac of the forgers-at-a-closed-port runs (median of the paired ratios ${ratios[*]}; MB/s ${att[*]} vs ${ctl[*]}, medians $ma vs $mc; target 0.90, TCG noise floor 0.75)"
  else fail "$dev: goodput under attack is $frac of the forgers-at-a-closed-port runs (paired ratios ${ratios[*]}; MB/s ${att[*]} vs ${ctl[*]})"; fi
fi

# --- a flood of malformed datagrams into a live device ----------------------
meet flood
before=$(($(counter rx_drops) + $(counter unknown_qpn_drops)))
rx0=$(counter rx_packets)
half=$((flood / 2))
# At full speed the receiving guest's virtual NIC drops most of a flood under
# TCG (16 % arrived at 60 000/s); paced, every datagram reaches the module.
rate=${2:-4000}
(q=""; for _ in $(seq 600); do q=$(peer_qpn); [[ -n $q ]] && break; nap 0.1; done
 "$forger" -d "$MR_PEER_IP4" -c "${q:-16}" -m mix -n "$half" -r "$rate" -s $((90 + MR_ID)) >"$ev/flood4.$MR_ID" 2>&1
 "$forger" -d "$MR_PEER_IP6" -c "${q:-16}" -m mix -n "$((flood - half))" -r "$rate" -s $((95 + MR_ID)) >"$ev/flood6.$MR_ID" 2>&1) &
fp=$!
# The integrity run lasts about as long as the flood (about 3 operations a
# unit of -n, 200 operations a second on the normal kernel, fewer on the debug
# one), so the flood meets a live QP throughout.
ops=$((flood / 60)); ((ops < 300)) && ops=300; ((ops > 2000)) && ops=2000
a=(); ((MR_ID == 2)) && a=(-s 21 -n "$ops" -M 262144)
role=server; ((MR_ID == 1)) || role="client $MR_PEER_IP4"
out=$(timeout "$(slow 600)" "$bin" -d "$dev" -g "$gid" -p 19200 "${a[@]}" $role 2>&1); rc=$?
wait "$fp"
r="rc $rc $(grep -m1 '^# integrity:' <<<"$out") $(grep -m1 '^not ok' <<<"$out")"
if [[ $r == "rc 0 "* && ( $MR_ID == 1 || $r == *" 0 corrupt, 0 lost, 0 duplicated"* ) ]]; then
  pass "$dev: integrity during the flood ($role): $r"
else fail "$dev: integrity during the flood ($role)" "$r"; fi
sent=$(cat "$ev/flood4.$MR_ID" "$ev/flood6.$MR_ID" | awk '{ n += $3 } END { print n + 0 }')
diag "this guest's flood: $(cat "$ev/flood4.$MR_ID" "$ev/flood6.$MR_ID" | tr '\n' ' ')"
echo "$sent" >"$ev/sent.$MR_ID"
meet flood-done
nap 2
peer_sent=$(cat "$ev/sent.$((3 - MR_ID))")
counted=$(($(counter rx_drops) + $(counter unknown_qpn_drops) - before))
legit=$(($(counter rx_packets) - rx0))
# Datagrams can still be lost on the way (the virtual NIC's queues): 90 % of
# the peer's flood must reach the module and be counted.
if ((counted <= peer_sent + legit && counted * 10 >= peer_sent * 9)); then
  pass "$dev: the peer's flood of $peer_sent datagrams (paced at $rate/s per family): $counted counted as drops (rx_drops + unknown_qpn_drops)"
else fail "$dev: the peer's flood of $peer_sent datagrams: $counted counted as drops" "$(rdma statistic show link "$dev/1")"; fi
stats=$(rdma statistic show link "$dev/1")
drops=$(tr ' ' '\n' <<<"$stats" | awk 'p { print; exit } $0 == "rx_drops" { p = 1 }')
reasons=$(tr ' ' '\n' <<<"$stats" | awk 'p { n += $0; p = 0 } /^rx_drop_/ { p = 1 } END { print n + 0 }')
((drops == reasons)) && pass "$dev: every drop has its reason: rx_drops $drops = the sum of the rx_drop_* counters" \
  || fail "$dev: rx_drops $drops, its reasons add up to $reasons" "$stats"
diag "$dev: drops by reason: $(rdma statistic show link "$dev/1" | grep -oE '(rx_drop_[a-z_]+|unknown_qpn_drops) [1-9][0-9]*' | tr '\n' ' ')"
done_testing
