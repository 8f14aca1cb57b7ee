#!/usr/bin/env bash
# Two guests: many RC QP pairs at once over one shared connection
# (Documentation/device.rst, "Shared connections"). mr0 is added with the
# `shared` module parameter set (written through sysfs before `rdma link
# add`, so it holds for this device alone), then NPAIRS (default 16) copies
# of the integrity test (tests/integrity/integrity.c: every opcode, every
# byte checked) run at once, each over its own QP pair, seeds 1..NPAIRS. The
# clients start 0.1 s apart and pair i runs OPS + (13 i mod OPS) operations,
# so QPs join the connection and leave it while the others carry traffic.
#   shared.sh [NPAIRS [OPS [NETEM-ARGS...]]]
#   make -C tests/integrity && qemu/vm-run -n 2 -t 1200 tests/guest/shared.sh 16 40 loss 1% delay 1ms reorder 25%
# Checked: every pair exits 0 (0 corrupt, lost or duplicated); while they
# run, every RC QP of mr0 that `rdma resource show qp -dd` shows with a
# connection reports `shared 1` and the same path-0 source port (one
# connection; `members` may differ within a dump, which is not atomic while
# pairs finish), and a dump saw at least NPAIRS/4 members at once (how many
# overlap depends on the guests' speed: on an idle host a lossless pair
# takes about 5 s; 7 of 16 were seen once with a 0.25 s spacing).
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
npairs=${1:-16}
ops=${2:-40}
netem=("${@:3}")
dev=mr0
integrity_built

MR_SHARED=1 add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
if ((${#netem[@]})); then
  load_kmod sch_netem >/dev/null 2>&1
  check "netem on $MR_IF: ${netem[*]}" tc qdisc add dev "$MR_IF" root netem "${netem[@]}"
fi
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid"
else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; done_testing; fi
meet ready

# sample: one `rdma resource show qp -dd` of mr0's RC QPs with a connection:
# "QPS MEMBERS-MIN MEMBERS-MAX SHARED-QPS DISTINCT-P0-SPORTS".
sample() {
  rdma resource show qp link "$dev" -dd 2>/dev/null | awk '
    / type RC / && / drv_paths / {
      n++; sh = 0
      for (i = 1; i < NF; i++) {
        if ($i == "drv_shared") sh = $(i + 1)
        if ($i == "drv_members") { m = $(i + 1); if (lo == "" || m < lo) lo = m; if (m > hi) hi = m }
        if ($i == "drv_p0_sport") ports[$(i + 1)] = 1
      }
      if (sh == 1) s++
    }
    END { k = 0; for (p in ports) k++; printf "%d %d %d %d %d\n", n, lo + 0, hi + 0, s + 0, k }'
}

t0=$SECONDS
role=server
((MR_ID == 1)) || role="client $MR_PEER_IP4"
out=$MR_RUNDIR/shared.$MR_ID
mkdir -p "$out"
pids=()
for ((i = 1; i <= npairs; i++)); do
  args=(-d "$dev" -g "$gid" -p $((19900 + i)))
  if ((MR_ID != 1)); then
    args+=(-s "$i" -n $((ops + 13 * i % ops)) -M 65536)
    nap 0.1
  fi
  # shellcheck disable=SC2086
  (timeout 900 "$MR_REPO/out/integrity" "${args[@]}" $role >"$out/$i.tap" 2>&1; echo $? >"$out/$i.rc") &
  pids+=($!)
done
# Samples while they run (every 2 s; the first ones may see few QPs yet).
best=0 bad=""
while :; do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  ((alive)) || break
  read -r n lo hi s k <<<"$(sample)"
  if ((n > 0)); then
    ((hi > best)) && best=$hi
    # Every QP with a connection is a member of the one connection.
    ((s == n && k == 1)) || bad+="$n QPs: shared $s, members $lo..$hi, $k path-0 ports; "
  fi
  nap 1
done
wait
ok=0
for ((i = 1; i <= npairs; i++)); do
  rc=$(cat "$out/$i.rc" 2>/dev/null)
  if [[ $rc == 0 ]]; then ok=$((ok + 1))
  else fail "$dev: integrity $role pair $i exits 0 (exit ${rc:-none})" "$(tail -15 "$out/$i.tap")"; fi
done
((ok == npairs)) && pass "$dev: $npairs integrity pairs at once, all exit 0 ($((SECONDS - t0)) s)"
diag "$dev: pair 1: $(grep -E '^# integrity: ' "$out/1.tap")"
if [[ -z $bad ]]; then pass "$dev: every sampled RC QP a member of one shared connection (most members seen at once: $best)"
else fail "$dev: every sampled RC QP a member of one shared connection" "$bad"; fi
if ((best * 4 >= npairs)); then pass "$dev: at least $npairs/4 members at once ($best)"
else fail "$dev: at least $npairs/4 members at once" "most seen: $best"; fi
stats=$(rdma statistic show link "$dev/1" 2>&1)
diag "$dev counters: $(tr -s ' \n' ' ' <<<"$stats")"
meet done
done_testing
