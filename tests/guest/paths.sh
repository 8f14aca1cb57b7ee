#!/usr/bin/env bash
# Two guests: the extension API (Documentation/extension.rst). metaroce-paths
# (tools/metaroce-dv, over libmetaroce-dv) carries MSGS checked SENDs of 16 KiB
# over one RC QP of DEV and changes the number of paths the QP's connection
# sends on during the transfer (at 20 % of the messages posted: 2, at 40 %:
# 16, at 70 %: 3), reading the connection and its paths every tenth of the
# messages.
#   paths.sh [-S|-P] [DEV [MSGS [NETEM-ARGS...]]]  (-S: DEV shares connections,
#   -P: a connection per QP; neither: the module's default, shared)
#   make -C tools/metaroce-dv && qemu/vm-run -n 2 tests/guest/paths.sh mr0 2000 loss 1% delay 1ms reorder 25%
# Checked: both sides exit 0 (every message arrives once and in order, every
# byte right, every completion a success); every set is reported back by the
# next query (paths and records); the errors (query and set before RTR, 0 and
# max_paths + 1 paths: EINVAL; refused sets change nothing); the per-path
# values are real (a path with packets sent, an RTT sample and a window);
# the 12 paths the 16-path step added carried data; with -S both ends pin
# the QP to stream class 2 and the connection reports itself shared and of
# class 2 (a class above 7, or set after RTS: EINVAL; as nobody, without
# CAP_NET_ADMIN: EPERM); on rxe0 the
# extension API answers EOPNOTSUPP (metaroce-paths exits 3).
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
case ${1:-} in -S) export MR_SHARED=1; shift ;; -P) export MR_SHARED=0; shift ;; esac
dev=${1:-mr0}
msgs=${2:-2000}
netem=("${@:3}")
bin=$MR_REPO/out/metaroce-paths
src=$MR_REPO/tools/metaroce-dv
if [[ -x $bin && ! $bin -ot $src/metaroce-paths.c && ! $bin -ot $src/metaroce_dv.c ]]; then
  pass "out/metaroce-paths built and up to date"
else fail "out/metaroce-paths missing or older than its sources: run 'make -C tools/metaroce-dv' on the host"; done_testing; fi

add_link "$dev"
link_ready "$dev" "${netem[@]}"
meet ready

# The servers' port differs per run of a seq.sh boot (both guests step alike).
port=$((18700 + (msgs % 100) + 100 * ${#netem[@]}))
role=server args=()
# Shared: both ends pin the QP to stream class 2 (the tool checks the
# connection reports it).
(($(mr_shared))) && [[ $dev != rxe* ]] && args=(-c 2)
((MR_ID == 1)) || { role=client args+=(-e -P 0.2:2,0.4:16,0.7:3 "$MR_PEER_IP4"); }
out=$MR_RUNDIR/paths.out.$MR_ID
rcf=$MR_RUNDIR/paths.rc.$MR_ID
rm -f "$rcf"
t0=$SECONDS
fold_tap "$dev: " < <(timeout "$(slow 600)" "$bin" -d "$dev" -g "$gid" -p "$port" -n "$msgs" \
  -i $((msgs / 10)) "${args[@]}" 2>&1 | tee "$out"; echo "${PIPESTATUS[0]}" >"$rcf")
rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc=255
if ((rc == 0)); then pass "$dev: metaroce-paths $role -n $msgs exits 0 ($((SECONDS - t0)) s)"
else fail "$dev: metaroce-paths $role -n $msgs exits 0 (exit $rc)" "$(grep -v '^# path' "$out" | tail -20)"; fi

if ((MR_ID != 1)); then
  # Per-path values during traffic: some path sent packets, has an RTT
  # sample and a window.
  real=$(awk '/^# path at / { for (i = 1; i < NF; i++) v[$i] = $(i + 1); if (v["sent"] > 0 && v["srtt_ns"] > 0 && v["pwnd"] > 0) n++ } END { print n + 0 }' "$out")
  if ((real > 0)); then pass "$dev: per-path state read during traffic ($real path records with packets sent, SRTT and window)"
  else fail "$dev: per-path state read during traffic" "$(grep '^# path at' "$out" | head -8)"; fi
  # The paths the 16-path step added (4..15) carried data: a query while
  # 16 paths were in use shows packets sent on each of them.
  added=$(awk '/^# conn at / { p = 0; for (i = 1; i < NF; i++) if ($i == "paths") p = $(i + 1); sixteen = (p == 16) }
               /^# path at / && sixteen { i = $5 + 0; for (k = 1; k < NF; k++) if ($k == "sent") s = $(k + 1); if (i >= 4 && s > 0) seen[i] = 1 }
               END { n = 0; for (i in seen) n++; print n }' "$out")
  if ((added == 12)); then pass "$dev: the 12 paths added by the 16-path step carried data"
  else fail "$dev: the 12 paths added by the 16-path step carried data (seen on $added)" \
    "$(grep -E '^# (conn|path) at ' "$out" | head -40)"; fi
  if (($(mr_shared))) && [[ $dev != rxe* ]]; then
    if grep -q '^# conn start: flags 0x1 ' "$out"; then pass "$dev: the connection reports itself shared"
    else fail "$dev: the connection reports itself shared" "$(grep '^# conn start' "$out")"; fi
    # A class is an administrator's choice: without CAP_NET_ADMIN, EPERM
    # (the tool pins it before it connects, so no peer is needed).
    np=$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
      "$bin" -d "$dev" -g "$gid" -p 1 -n 1 -c 1 127.0.0.1 2>&1)
    if grep -q 'stream class 1 pinned (Operation not permitted)' <<<"$np"; then
      pass "$dev: a stream class without CAP_NET_ADMIN: EPERM"
    elif grep -q 'ibv_open_device\|ibv_create_qp\|PD/MR/CQ' <<<"$np"; then
      skip "$dev: a stream class without CAP_NET_ADMIN: EPERM" "an unprivileged user cannot open $dev here"
    else fail "$dev: a stream class without CAP_NET_ADMIN: EPERM" "$np"; fi
  fi
  diag "$dev: $(grep -m1 '^# metaroce-paths:' "$out")"
  diag "$dev: $(grep -m1 '^# conn end' "$out")"
fi
stats=$(rdma statistic show link "$dev/1" 2>&1)
diag "$dev counters: $(tr -s ' \n' ' ' <<<"$stats")"
meet done

# Another device: the extension API says it is not there.
if ((MR_ID != 1)); then
  add_link rxe0
  rgid=$(retry 10 gid_index rxe0 "$MR_IP4") || rgid=1
  "$bin" -d rxe0 -g "$rgid" -n 1 >"$out.rxe" 2>&1
  rc=$?
  if ((rc == 3)) && grep -q EOPNOTSUPP "$out.rxe"; then pass "rxe0: the extension API answers EOPNOTSUPP (exit 3)"
  else fail "rxe0: the extension API answers EOPNOTSUPP (exit 3)" "exit $rc: $(cat "$out.rxe")"; fi
  rdma link delete rxe0
fi
done_testing
