#!/usr/bin/env bash
# Two guests with MR_PLANES=2: one metaroce device spreads a connection's
# paths over two planes (the guests' two private links), and a plane failing
# mid-transfer does not surface to the application (Documentation/
# extension.rst, "Planes").
#   multiplane.sh [DEV [MSGS]]      (defaults: mr0, 2000)
#   make -C tools/metaroce-dv && MR_PLANES=2 qemu/vm-run -n 2 -t 900 tests/guest/multiplane.sh mr0 2000
# Set-up, as a multi-plane host is set up: each guest has one host address
# (198.18.2.ID/32, on the first link's netdev, so the device has a GID for
# it), routed over both links (a multipath route via the peer's address on
# each); DEV is added on the first link's netdev and bound to both netdevs
# with metaroce-planes: planes 0 ($MR_IF) and 1 ($MR_IF2), numbered as the
# tool and metaroce_path_info.plane number them.
# Checked: the planes' refusals (the first netdev not the device's, a netdev
# twice, loopback: EINVAL; no such netdev: ENODEV; without CAP_NET_ADMIN:
# EPERM) change nothing; both planes are reported up. metaroce-paths carries
# MSGS checked 16 KiB SENDs over one RC QP between the host addresses on 8
# paths, and both exit 0 (every message once, in order, byte-exact, every
# completion a success) although during the transfer
#  - at a quarter of the messages the sender's plane 1 starts dropping
#    everything it sends (netem loss 100%: a gray failure, no link event),
#  - at half the receiver takes its plane 1 down (a link event);
# plane 1 carried the sender's datagrams until then (the plane counters);
# at the end every path of the sender is on plane 0; the receiver reports
# plane 1 down. Before the transfer, a netdev of another network namespace
# with plane 1's ifindex coming and going changes no plane's state.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
if [[ ${MR_PLANES:-1} != 2 || $MR_NGUESTS != 2 ]]; then
  skip "a connection over two planes" "no plane 2 (MR_PLANES=${MR_PLANES:-1}, $MR_NGUESTS guest(s)): MR_PLANES=2 qemu/vm-run -n 2"
  done_testing
fi
dev=${1:-mr0}
msgs=${2:-2000}
paths_bin=$MR_REPO/out/metaroce-paths
planes_bin=$MR_REPO/out/metaroce-planes
src=$MR_REPO/tools/metaroce-dv
for b in "$paths_bin" "$planes_bin"; do
  if [[ -x $b && ! $b -ot $src/${b##*/}.c && ! $b -ot $src/metaroce_dv.c ]]; then pass "out/${b##*/} built and up to date"
  else fail "out/${b##*/} missing or older than its sources: run 'make -C tools/metaroce-dv' on the host"; done_testing; fi
done

# netem now, not when plane 1 is to fail: loading it under TCG can take
# longer than the rest of the transfer.
load_kmod sch_netem >/dev/null 2>&1
# One host address per guest, routed over both planes.
host=198.18.2.$MR_ID peer_host=198.18.2.$((3 - MR_ID))
for k in all default "$MR_IF" "$MR_IF2"; do sysctl -qw "net.ipv4.conf.$k.rp_filter=0"; done
check "host address $host on $MR_IF" ip addr add "$host/32" dev "$MR_IF"
check "$peer_host routed over both planes" ip route add "$peer_host/32" src "$host" \
  nexthop via "$MR_PEER_IP4" dev "$MR_IF" nexthop via "$MR_PEER_IP4_2" dev "$MR_IF2"
# (Not pinged out of each link: the answer comes back on either plane, and a
# socket bound to one link misses it there.)
check "$peer_host answers" retry 90 ping -q -c1 -W1 -I "$host" "$peer_host"
add_link "$dev"
gid=$(retry 10 gid_index "$dev" "$host") || gid=""
if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $host at index $gid"
else fail "$dev: RoCE v2 GID for $host" "$(rdma link show 2>&1)"; done_testing; fi

# refuses ERRNO DESC NETDEV...: metaroce-planes DEV NETDEV... fails with ERRNO.
refuses() {
  local want=$1 desc=$2 out; shift 2
  out=$("$planes_bin" "$dev" "$@" 2>&1)
  if (($? == 1)) && grep -q "$want" <<<"$out"; then pass "$dev: planes $desc: $want"
  else fail "$dev: planes $desc: $want" "$out"; fi
}
refuses "Invalid argument" "not starting with $MR_IF" "$MR_IF2" "$MR_IF"
refuses "Invalid argument" "with $MR_IF twice" "$MR_IF" "$MR_IF"
refuses "Invalid argument" "with loopback" "$MR_IF" lo
refuses "No such device" "with no such netdev" "$MR_IF" '#999999'
np=$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$planes_bin" "$dev" "$MR_IF" "$MR_IF2" 2>&1)
if grep -q 'Operation not permitted' <<<"$np"; then pass "$dev: planes set without CAP_NET_ADMIN: EPERM"
elif grep -q 'ibv_open_device' <<<"$np"; then skip "$dev: planes set without CAP_NET_ADMIN: EPERM" "an unprivileged user cannot open $dev here"
else fail "$dev: planes set without CAP_NET_ADMIN: EPERM" "$np"; fi
one=$("$planes_bin" "$dev" 2>&1)
if [[ $(grep -c '^plane ' <<<"$one") == 1 ]] && grep -q "^plane 0: $MR_IF .* up " <<<"$one"; then
  pass "$dev: the refused sets changed nothing (one plane, $MR_IF)"
else fail "$dev: the refused sets changed nothing" "$one"; fi
set_out=$("$planes_bin" "$dev" "$MR_IF" "$MR_IF2" 2>&1)
if grep -q "^plane 0: $MR_IF .* up " <<<"$set_out" && grep -q "^plane 1: $MR_IF2 .* up " <<<"$set_out"; then
  pass "$dev: bound to $MR_IF and $MR_IF2, both up"
else fail "$dev: bound to $MR_IF and $MR_IF2, both up" "$set_out"; fi
# A netdev of another namespace with plane 1's ifindex, up, down and gone:
# an ifindex names a netdev within its namespace only, so no plane changes.
idx2=$(<"/sys/class/net/$MR_IF2/ifindex")
ip netns add mpns 2>/dev/null
for i in $(seq 2 "$idx2"); do ip -n mpns link add "nd$i" type dummy 2>/dev/null; done
ip -n mpns link set "nd$idx2" up 2>/dev/null; ip -n mpns link set "nd$idx2" down 2>/dev/null
ip netns del mpns
ns_out=$("$planes_bin" "$dev" 2>&1)
if grep -q "^plane 0: $MR_IF .* up " <<<"$ns_out" && grep -q "^plane 1: $MR_IF2 .* up " <<<"$ns_out"; then
  pass "$dev: another namespace's netdevs coming and going change no plane"
else fail "$dev: another namespace's netdevs coming and going change no plane" "$ns_out"; fi
meet planes-set

# plane1_tx: the datagrams the device sent on plane 1 ($MR_IF2).
plane1_tx() { "$planes_bin" "$dev" | awk '$1 == "plane" && $2 == "1:" { print $NF }'; }
out=$MR_RUNDIR/multiplane.out.$MR_ID
rcf=$MR_RUNDIR/multiplane.rc.$MR_ID
rm -f "$rcf" "$out" "$MR_RUNDIR"/multiplane.{at,ended,tx-before}.$MR_ID
: >"$out"
role=server args=()
# The QP's addresses are the host addresses (its GID); the tool's TCP side
# channel goes to the peer's plane-1 address, off the planes that fail.
((MR_ID == 1)) || { role=client args=(-P 0.01:8 "$MR_PEER_IP4"); }
# The failures, on the way: the sender's plane 1 drops everything at a
# quarter of the messages (its progress lines), the receiver's goes down at
# half.
# upto N: waits (polling every 0.2 s) until a progress line of the tool
# (every sixteenth of MSGS, fewer if one poll completes more) reached
# message N; prints the messages done then. (Counting lines instead let a
# receiver whose polls skipped lines fail its plane after the end.)
upto() {
  local end=$((SECONDS + $(slow 600))) at
  until at=$(awk -v n="$1" '/^# conn at / { sub(":", "", $4); if ($4 + 0 >= n) { print $4 + 0; exit } }' "$out") &&
    [[ -n $at ]]; do ((SECONDS < end)) || return 1; nap 0.2; done
  echo "$at"
}
# latest: the messages done by the tool's newest progress line (0: none yet).
latest() { awk '/^# conn at / { sub(":", "", $4); n = $4 + 0 } END { print n + 0 }' "$out"; }
(
  if ((MR_ID == 2)); then
    upto $((msgs / 4)) >/dev/null || exit 0
    tc qdisc add dev "$MR_IF2" root netem loss 100%
  else
    upto $((msgs / 2)) >/dev/null || exit 0
    ip link set "$MR_IF2" down
  fi
  # Still mid-transfer once it failed: the tool has not printed its end. The
  # message named is the newest progress line once the failure is in place.
  grep -c '^# conn end' "$out" >"$MR_RUNDIR/multiplane.ended.$MR_ID"
  latest >"$MR_RUNDIR/multiplane.at.$MR_ID"
  # What plane 1 had carried (the device counts a datagram as it hands it to
  # the netdev, before netem drops it): read after the failure, not before,
  # as metaroce-planes takes seconds under TCG, which would move the failure.
  ((MR_ID == 1)) || plane1_tx >"$MR_RUNDIR/multiplane.tx-before.$MR_ID"
) &
failer=$!
t0=$SECONDS
fold_tap "$dev: " < <(timeout "$(slow 600)" "$paths_bin" -d "$dev" -g "$gid" -p 18790 -n "$msgs" \
  -i $((msgs / 16)) "${args[@]}" 2>&1 | tee "$out"; echo "${PIPESTATUS[0]}" >"$rcf")
wait "$failer"
rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc=255
if ((rc == 0)); then pass "$dev: metaroce-paths $role -n $msgs exits 0 across the plane failures ($((SECONDS - t0)) s)"
else fail "$dev: metaroce-paths $role -n $msgs exits 0 across the plane failures (exit $rc)" "$(grep -v '^# path' "$out" | tail -20)"; fi

at=$(cat "$MR_RUNDIR/multiplane.at.$MR_ID" 2>/dev/null)
ended=$(cat "$MR_RUNDIR/multiplane.ended.$MR_ID" 2>/dev/null)
if [[ -n $at && $ended == 0 ]]; then
  pass "$dev: plane 1 failed mid-transfer (here: $( ((MR_ID == 2)) && echo "netem loss 100% on $MR_IF2" || echo "$MR_IF2 down"), in place by message ${at} of $msgs)"
else fail "$dev: plane 1 failed mid-transfer" "at message ${at:-never}; the transfer had ended by then: ${ended:-?}"; fi
if ((MR_ID == 2)); then
  before=$(cat "$MR_RUNDIR/multiplane.tx-before.$MR_ID" 2>/dev/null)
  if ((${before:-0} > 0)); then pass "$dev: plane 1 carried datagrams until it failed ($before sent on it by the time it was read, just after)"
  else fail "$dev: plane 1 carried datagrams until it failed" "plane 1 tx_packets ${before:-?}"; fi
  # At the end every path sends on plane 0.
  end_paths=$(grep '^# path end:' "$out")
  on1=$(grep -c ' plane 1$' <<<"$end_paths")
  moved=$(awk '{ for (i = 1; i < NF; i++) if ($i == "moves" && $(i + 1) > 0) n++ } END { print n + 0 }' <<<"$end_paths")
  if [[ -n $end_paths ]] && ((on1 == 0 && moved > 0)); then
    pass "$dev: at the end no path is on plane 1 ($moved path(s) moved at some point)"
  else fail "$dev: at the end no path is on plane 1" "$end_paths"; fi
  tc qdisc del dev "$MR_IF2" root 2>/dev/null
else
  st=$("$planes_bin" "$dev" 2>&1)
  if grep -q "^plane 1: $MR_IF2 .* down " <<<"$st"; then pass "$dev: plane 1 reported down after $MR_IF2 went down"
  else fail "$dev: plane 1 reported down after $MR_IF2 went down" "$st"; fi
  ip link set "$MR_IF2" up
fi
diag "$dev: $(grep -m1 '^# metaroce-paths:' "$out")"
diag "$dev: $("$planes_bin" "$dev" 2>&1 | tr '\n' ';')"
meet multiplane-done
ip route del "$peer_host/32" 2>/dev/null
ip addr del "$host/32" dev "$MR_IF" 2>/dev/null
done_testing
