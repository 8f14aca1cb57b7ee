#!/usr/bin/env bash
# Two guests: many RC QPs between them on the RDMA device $1 (mr0: metaroce,
# rxe0: the kernel's rxe, the baseline), with tests/scale/qpscale.c: the
# rates of creating, connecting (INIT+RTR+RTS) and destroying NQPS QPs
# (default 1024), ROUNDS (default 3) rounds of one 64-byte RDMA WRITE on
# every QP with every slot checked, and the kernel memory a QP costs.
#   scale.sh [-S|-P] DEV [NQPS [ROUNDS [QPSCALE-OPTIONS...]]]
# -S (or neither: the module's default): mr0 shares connections (the QPs to
# the peer are members of one: Documentation/device.rst, "Shared
# connections"); -P: a connection per QP.
#   make -C tests/scale && qemu/vm-run -n 2 -t 1800 tests/guest/seq.sh scale.sh -P mr0 + scale.sh rxe0
# Guest 1 serves, guest 2 drives (posts the WRITEs). Memory: at qpscale's
# hooks ("before": PD, MR and CQs made, no QP; "created": all QPs in RESET;
# "rts": all QPs of both guests at RTS; "traffic": after the last round;
# "destroyed": both guests destroyed every QP) each guest drops its page
# cache, shrinks every slab cache, and records /proc/meminfo,
# /proc/slabinfo, /proc/vmallocinfo and `rdma resource show`. Reported per
# QP: (rts - before) / NQPS of Slab, SUnreclaim, VmallocUsed, PageTables and
# MemAvailable (a drop), split at "created", the slab caches and vmalloc
# callers that grew most, and whether Slab + VmallocUsed came back to the
# baseline after destroy (the tolerance is explained where it is checked),
# and on the debug kernel that kmemleak finds no unreferenced object.
# The guests have 1 GiB (qemu/vm-run; MR_GUEST_MEM=2G on the host gives
# them more): enough for 16000 QPs on rxe0; on mr0 with a connection per QP
# about 37 KB a QP (29 KB of slab and 8 KiB of rings), shared about 13 KB.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
case ${1:-} in -S) export MR_SHARED=1; shift ;; -P) export MR_SHARED=0; shift ;; esac
dev=${1:-mr0}
nqps=${2:-1024}
rounds=${3:-3}
extra=("${@:4}")	# more qpscale options, both sides (-X: must fail; -E: QP 0 fails alone)
bin=$MR_REPO/out/qpscale
if [[ -x $bin && ! $bin -ot $MR_REPO/tests/scale/qpscale.c ]]; then pass "out/qpscale built and up to date"
else fail "out/qpscale missing or older than its source: run 'make -C tests/scale' on the host"; done_testing; fi

add_link "$dev"
link_ready "$dev"
diag "$dev: $(ibv_devinfo -v -d "$dev" 2>&1 | grep -E -w 'max_qp:|max_cq:|max_mr:' | tr -s ' \t' ' ' | tr '\n' ';')"
diag "guest: $(grep -E 'MemTotal' /proc/meminfo | tr -s ' '), $(nproc) CPU, vm.max_map_count $(sysctl -n vm.max_map_count)"
# Each QP's SQ and RQ are mapped into the process (rdma-core's rxe provider,
# which metaroce's ABI serves too): two mappings a QP, more than the default
# 65530 allow for 32768 QPs. The limit is the process's, not the device's.
((2 * nqps + 1000 > $(sysctl -n vm.max_map_count))) && sysctl -qw vm.max_map_count=$((2 * nqps + 65536))

# qp_count: the QPs `rdma resource show` counts on $dev (the kernel's too).
qp_count() { rdma resource show 2>/dev/null | awk -v d="$dev:" '$2 == d { for (i = 3; i < NF; i++) if ($i == "qp") print $(i + 1) }'; }
q0=$(qp_count)
snap=$MR_RUNDIR/snap.$MR_ID
mkdir -p "$snap"
echo "${q0:-0}" >"$snap/qp.base"

# The hook qpscale runs at each phase (its own process: no TAP of ours).
hook=$MR_RUNDIR/snap-hook.$MR_ID.sh
cat >"$hook" <<EOF
#!/usr/bin/env bash
d=$snap dev=$dev
EOF
cat >>"$hook" <<'EOF'
phase=$1
qpc() { rdma resource show 2>/dev/null | awk -v d="$dev:" '$2 == d { for (i = 3; i < NF; i++) if ($i == "qp") print $(i + 1) }'; }
settle() {
  # Objects freed after an RCU grace period or by a work item land first.
  read -rt 2 <> <(:) || :
  sync
  echo 3 >/proc/sys/vm/drop_caches
  local f
  for f in /sys/kernel/slab/*/shrink; do echo 1 >"$f"; done 2>/dev/null
}
take() {
  settle
  cat /proc/meminfo >"$d/$1.meminfo"
  cat /proc/slabinfo >"$d/$1.slabinfo"
  cat /proc/vmallocinfo >"$d/$1.vmallocinfo"
  rdma resource show >"$d/$1.res" 2>&1
}
if [[ $phase == destroyed ]]; then
  # Destroyed QPs may leave `rdma res` a little later (rxe frees in a work item).
  t=$SECONDS
  until (($(qpc) <= $(cat "$d/qp.base"))); do
    ((SECONDS - t < 120)) || break
    read -rt 0.5 <> <(:) || :
  done
  echo $((SECONDS - t)) >"$d/destroy.wait"
fi
# "before" twice, 3 s apart: the difference is the guest's own noise.
[[ $phase == before ]] && { take before0; read -rt 3 <> <(:) || :; }
take "$phase"
EOF
chmod +x "$hook"

# The servers' port differs per run of a seq.sh boot (both guests step alike).
port=$((18600 + (nqps % 1000)))
[[ $dev == rxe* ]] && port=$((port + 1000))
role=server peer=()
((MR_ID == 1)) || { role=client peer=("$MR_PEER_IP4"); }
out=$MR_RUNDIR/qpscale.out.$MR_ID
rcf=$MR_RUNDIR/qpscale.rc.$MR_ID
rm -f "$rcf"
tlimit=$(slow $((600 + nqps / 5)))
t0=$SECONDS
fold_tap "$dev: " < <(timeout "$tlimit" "$bin" -d "$dev" -g "$gid" -n "$nqps" -r "$rounds" -p "$port" \
  -H "$hook" "${extra[@]}" "${peer[@]}" 2>&1 | tee "$out"; echo "${PIPESTATUS[0]}" >"$rcf")
rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc=255
took=$((SECONDS - t0))
if ((rc == 0)); then pass "$dev: qpscale $role -n $nqps -r $rounds exits 0 ($took s)"
else fail "$dev: qpscale $role -n $nqps -r $rounds exits 0 (exit $rc, $took s)" \
  "$(dmesg | grep -E -A3 'invoked oom-killer|page allocation failure' | head -8
     dmesg | grep -E -m8 'Killed process|Out of memory|WARNING|BUG|metaroce\]|rxe' | grep -v -E '^\[ *[0-9.]+\]  \? '
     dmesg | grep -E -A12 'invoked oom-killer' | grep -E -m4 'metaroce|rdma_rxe|ib_uverbs'
     dmesg | grep -E 'slab_unreclaimable|^\[ *[0-9.]+\] Node 0 active' | head -2
     dmesg | tail -8; free -k)"; fi

# mem FIELD PHASE: a /proc/meminfo field (kB) at PHASE.
mem() { awk -v k="$1:" '$1 == k { print $2 }' "$snap/$2.meminfo" 2>/dev/null; }
# per FIELD A B: (B - A) of FIELD in bytes per QP; drop: (A - B).
per() { local a b; a=$(mem "$1" "$2") b=$(mem "$1" "$3"); [[ -n $a && -n $b ]] && echo $(((b - a) * 1024 / nqps)); }
drop() { local a b; a=$(mem "$1" "$2") b=$(mem "$1" "$3"); [[ -n $a && -n $b ]] && echo $(((a - b) * 1024 / nqps)); }
# delta FIELD A B: (B - A) of FIELD in kB.
delta() { local a b; a=$(mem "$1" "$2") b=$(mem "$1" "$3"); [[ -n $a && -n $b ]] && echo $((b - a)); }
# slabtop A B: the slab caches that grew most from A to B (bytes in slabs).
slabtop() {
  awk 'FNR == 1 { f++ } /^#|^slabinfo/ { next }
       { b = $15 * $6 * 4096; if (f == 1) { a[$1] = b; o[$1] = $2 } else { d = b - a[$1]; if (d != 0) printf "%d %s %+d\n", d, $1, $2 - o[$1] } }' \
    "$snap/$1.slabinfo" "$snap/$2.slabinfo" | sort -rn | head -"${3:-6}" |
    awk '{ printf "%s %+d KiB (%+d objs); ", $2, $1 / 1024, $3 }'
}
# slabsum A B: the growth of all /proc/slabinfo caches from A to B (bytes).
slabsum() {
  awk 'FNR == 1 { f++ } /^#|^slabinfo/ { next } { b = $15 * $6 * 4096; if (f == 1) a += b; else c += b }
       END { printf "%d\n", c - a }' "$snap/$1.slabinfo" "$snap/$2.slabinfo"
}
# vmtop A B: the vmalloc callers that grew most from A to B (bytes, areas).
vmtop() {
  awk 'FNR == 1 { f++ }
       { c = "?"; for (i = 3; i <= NF; i++) if ($i ~ /\+0x/) { c = $i; sub(/\+0x.*/, "", c); break }
         if (f == 1) { a[c] += $2; na[c]++ } else { b[c] += $2; nb[c]++ } }
       END { for (c in b) if (b[c] != a[c]) printf "%d %s %+d\n", b[c] - a[c], c, nb[c] - na[c] }' \
    "$snap/$1.vmallocinfo" "$snap/$2.vmallocinfo" | sort -rn | head -"${3:-4}" |
    awk '{ printf "%s %+d KiB (%+d areas, with guard pages); ", $2, $1 / 1024, $3 }' |
    sed -E 's/_R[A-Za-z0-9_]*_8metaroce[A-Za-z0-9_]*[0-9]+([A-Za-z][A-Za-z_]*)[0-9]+([A-Za-z_]+) /metaroce::\1::\2 /g'
}

if [[ -f $snap/before.meminfo && -f $snap/rts.meminfo ]]; then
  side=$([[ $MR_ID == 1 ]] && echo server || echo client)
  diag "$dev $side memory per QP, before -> rts (bytes): Slab $(per Slab before rts), SUnreclaim $(per SUnreclaim before rts), VmallocUsed $(per VmallocUsed before rts), PageTables $(per PageTables before rts), MemAvailable drop $(drop MemAvailable before rts)"
  [[ -f $snap/traffic.meminfo ]] &&
    diag "$dev $side memory per QP, before -> after traffic (bytes): Slab $(per Slab before traffic), VmallocUsed $(per VmallocUsed before traffic), MemAvailable drop $(drop MemAvailable before traffic)"
  [[ -f $snap/created.meminfo ]] &&
    diag "$dev $side memory per QP, before -> created (RESET) (bytes): Slab $(per Slab before created), VmallocUsed $(per VmallocUsed before created); created -> rts: Slab $(per Slab created rts), VmallocUsed $(per VmallocUsed created rts)"
  diag "$dev $side slab caches, before -> rts: $(slabtop before rts)"
  # Slab in /proc/meminfo also counts kmalloc() allocations above 8 KiB,
  # which come from the page allocator and appear in no /proc/slabinfo cache.
  diag "$dev $side Slab outside /proc/slabinfo (kmalloc > 8 KiB), per QP: $(((($(delta Slab before rts) * 1024) - $(slabsum before rts)) / nqps)) B"
  diag "$dev $side vmalloc callers, before -> rts: $(vmtop before rts)"
  diag "$dev $side rdma resource show at rts: $(grep "$dev:" "$snap/rts.res")"
  diag "$dev $side noise, two snapshots 3 s apart with nothing done: Slab $(delta Slab before0 before) kB, VmallocUsed $(delta VmallocUsed before0 before) kB"
fi
if [[ -f $snap/destroyed.meminfo && -f $snap/rts.meminfo ]]; then
  # Back to the baseline: what Slab + VmallocUsed still hold after destroy,
  # against what the QPs took. Tolerance: 2 % of what they took plus 256 KiB.
  # Freed slab objects stay in partly used slabs (SLUB frees a slab page only
  # when all its objects are free; the shrink above returns the empty ones)
  # and the page cache that the 9p root and the tools bring back is refilled
  # between snapshots; the noise line above shows that amount with no QP
  # involved. A leak of one 64-byte object per QP is 1 MiB at 16000 QPs and
  # still shows; what a QP costs in all (kilobytes) would show at any N.
  took_kb=$(($(delta Slab before rts) + $(delta VmallocUsed before rts)))
  left_kb=$(($(delta Slab before destroyed) + $(delta VmallocUsed before destroyed)))
  tol_kb=$((took_kb / 50 + 256))
  diag "$dev after destroy (waited $(cat "$snap/destroy.wait" 2>/dev/null) s for rdma res): Slab $(delta Slab before destroyed) kB, SUnreclaim $(delta SUnreclaim before destroyed) kB, VmallocUsed $(delta VmallocUsed before destroyed) kB against before; MemAvailable $(delta MemAvailable before destroyed) kB"
  diag "$dev slab caches, before -> destroyed: $(slabtop before destroyed)"
  if ((left_kb <= tol_kb)); then
    pass "$dev: memory back to baseline after destroy: Slab+VmallocUsed $left_kb kB over before (took $took_kb kB at RTS; tolerance $tol_kb kB)"
  else
    fail "$dev: memory back to baseline after destroy: Slab+VmallocUsed $left_kb kB over before (took $took_kb kB at RTS; tolerance $tol_kb kB)" \
      "$(slabtop before destroyed 10; vmtop before destroyed)"
  fi
fi

# Summary: the rates and the memory in one line (both sides, each its own).
sum=$(grep -m1 '^# qpscale: role' "$out" 2>/dev/null)
val() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<<"$sum"; }
if [[ -n $sum && -f $snap/rts.meminfo ]]; then
  line="$dev ${side:-?}: $nqps QPs: create $(val create_rate)/s, INIT+RTR+RTS $(val modify_rate)/s, destroy $(val destroy_rate)/s; $(val rounds) rounds, $(val completions) completions, $(val errors) errors, $(val corrupt) corrupt, $(val lost) lost ($(val traffic_s) s of traffic); per QP: Slab $(per Slab before rts) B, VmallocUsed $(per VmallocUsed before rts) B, MemAvailable drop $(drop MemAvailable before rts) B; $took s"
  if ((rc == 0)); then pass "summary: $line"; else fail "summary: $line"; fi
  echo "$line" >"$MR_RUNDIR/scale-summary.$MR_ID"
fi

# Destroy leaves no QP behind (the process has exited: its context too).
qp_back() { (($(qp_count) <= ${q0:-0})); }
retry 60 qp_back
q1=$(qp_count)
if [[ ${q1:-x} == "${q0:-0}" ]]; then pass "$dev: rdma resource show: $q1 QPs after destroy, as before ($q0)"
else fail "$dev: rdma resource show: $q1 QPs after destroy, $q0 before" "$(rdma resource show 2>&1)"; fi
# Nothing the QPs allocated is left unreferenced (debug kernels, which have kmemleak).
check_kmemleak
[[ -n ${MR_NESTED:-} ]] || done_testing
