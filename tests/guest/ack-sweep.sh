#!/usr/bin/env bash
# Delayed-ACK settings compared (a measurement, not a pass/fail test;
# Documentation/device.rst, "Acknowledgements"; Documentation/bench-history.rst): mr0
# (a connection per QP) in both guests; for each setting EVERY/DELAY_US[/BUNDLE]
# of MR_ACK_SETTINGS (default "1/0 2/100 4/100 1/0 2/100 4/100"), both guests
# write the module's ack_every, ack_delay_us and ack_bundle (BUNDLE: default
# 16, the module's; read at each connection's set-up), meet, and run ib_write_bw 64 KiB, ib_send_bw 64 KiB and
# ib_send_bw 4 KiB (16 MiB each, guest 2 -> guest 1). Each guest prints one
# line per run,
#   # TRIAL side=1 ack=4/100 test=write_bw size=65536 bw=10.91 rxpk_per_msg=64.00 kcpu_ms_per_mib=21.3/9.4
# (bw: perftest's MB/sec; rxpk_per_msg: packets mr0 received per message, on
# guest 2 the ACKs; kcpu: kernel CPU ms per MiB, SPLIT/SAMPLED as cpu_per_mib in
# tests/lib.sh) and
# one "# STATS" line with the mr0 counters that changed during the run.
#   MR_ACK_SETTINGS="1/0 4/100" qemu/vm-run -n 2 -t 1800 tests/guest/ack-sweep.sh
#   MR_ACK_SETTINGS="2/100/1 2/100/16 2/100/1 2/100/16" ...   (ACK bundles off/on)
# MR_NETEM (host environment), e.g. "loss 1%": a netem qdisc on both guests'
# egress for the whole sweep.
. "$MR_REPO/tests/lib.sh"
server() { ((MR_ID == 1)); }
stats() { rdma statistic show link mr0/1 2>/dev/null; }
rxp() { stats | awk '{ for (i = 1; i < NF; i++) if ($i == "rx_packets") { print $(i + 1); exit } }'; }
# changed OLD NEW: the counters of NEW ("name value" pairs) that differ from OLD's
changed() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); for (i = 1; i < n; i++) if (x[i + 1] ~ /^[0-9]+$/) o[x[i]] = x[i + 1]
    n = split(b, y, " "); for (i = 1; i < n; i++) if (y[i] in o && y[i + 1] != o[y[i]]) printf "%s=%d ", y[i], y[i + 1] - o[y[i]]
  }'
}
load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
tc qdisc del dev "$MR_IF" root >/dev/null 2>&1
if [[ -n ${MR_NETEM:-} ]]; then
  # shellcheck disable=SC2086 # the netem arguments, split
  check "netem $MR_NETEM on $MR_IF" tc qdisc add dev "$MR_IF" root netem $MR_NETEM
fi
check "insmod metaroce.ko shared=0" insmod "$MR_REPO/metaroce.ko" shared=0
check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
g=$(retry 10 gid_index mr0 "$MR_IP4") || { fail "mr0: RoCE v2 GID"; done_testing; }
p=/sys/module/metaroce/parameters
port=19000
for setting in ${MR_ACK_SETTINGS:-1/0 2/100 4/100 1/0 2/100 4/100}; do
  [[ $setting =~ ^[0-9]+/[0-9]+(/[0-9]+)?$ ]] || { fail "setting $setting: EVERY/DELAY_US[/BUNDLE]"; continue; }
  IFS=/ read -r every delay bundle <<<"$setting"
  echo "$every" >$p/ack_every && echo "$delay" >$p/ack_delay_us && echo "${bundle:-16}" >$p/ack_bundle ||
    { fail "ack=$setting: module parameters not writable"; continue; }
  for r in "write_bw 65536 256" "send_bw 65536 256" "send_bw 4096 4096"; do
    read -r t s n <<<"$r"
    port=$((port + 1))
    meet "run-$port"
    p0=$(rxp) c0=$(kernel_cpu) st0=$(stats)
    if server; then
      out=$(timeout 90 "ib_$t" -d mr0 -x "$g" -s "$s" -n "$n" -F -p "$port" 2>&1); rc=$?
    else
      for _ in $(seq 30); do
        out=$(timeout 90 "ib_$t" -d mr0 -x "$g" -s "$s" -n "$n" -F -p "$port" "$MR_PEER_IP4" 2>&1); rc=$?
        ((rc == 0)) && break
        sleep 1
      done
    fi
    c1=$(kernel_cpu) p1=$(rxp) st1=$(stats)
    bw=$(awk -v s="$s" '$1 == s && NF >= 4 { v = $4 } END { print v }' <<<"$out")
    ((rc == 0)) || diag "ack=$setting ib_$t -s $s: exit $rc: $(tail -3 <<<"$out")"
    diag "TRIAL side=$MR_ID ack=$setting test=$t size=$s bw=${bw:-fail}" \
      "rxpk_per_msg=$(awk -v d=$((p1 - p0)) -v n="$n" 'BEGIN { printf "%.2f", d / n }')" \
      "kcpu_ms_per_mib=$(cpu_per_mib "$c0" "$c1" $((s * n)) | tr ' ' '/')"
    diag "STATS side=$MR_ID ack=$setting test=$t size=$s $(changed "$st0" "$st1")"
  done
done
pass "sweep finished"
done_testing
