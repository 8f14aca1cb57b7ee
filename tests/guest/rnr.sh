#!/usr/bin/env bash
# Two guests: fairness and isolation under RNR. NQPS (default 8) RC QP pairs
# between the guests on DEV carry checked SENDs (tests/scale/rnriso.c, built
# by `make -C tests/scale`); in every other phase QP 0's receiver stops
# posting receives, so its sender waits on RNR (rnr_retry 7: for ever), and
# the other QPs' throughput is compared with a baseline phase in which QP 0's
# receiver posts as usual; afterwards the receiver posts again and QP 0's
# SENDs must complete.
#   rnr.sh [-S|-P] DEV [RNRISO-OPTIONS...]
# -S (or neither: the module's default): mr0 shares one connection per peer
# (Documentation/device.rst, "Shared connections"): QP 0's RNR wait must
# hold back its own stream only. -P: a connection per QP.
#   make -C tests/scale && qemu/vm-run -n 2 -t 900 tests/guest/seq.sh rnr.sh -S mr0 + rnr.sh -P mr0 + rnr.sh rxe0
# Guest 1 receives, guest 2 sends. Checked (rnriso): every SEND and receive
# completion successful, in order, every byte of every message, none lost;
# QP 0 completes nothing while its receiver posts nothing and everything once
# it posts again; the median over the repetitions of (healthy QPs' MiB/s with
# QP 0 on RNR) / (their MiB/s in the baseline) at least MIN_RATIO (rnriso -R,
# default 0.6: Documentation/testing.rst gives the measured noise floor).
# Here: on mr0 the receiver's RNR refusals (`rx_drop_receiver_not_ready`)
# grew, so QP 0 really met RNR; rxe0's counter (`send_rnr_err`) is reported.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
case ${1:-} in -S) export MR_SHARED=1; shift ;; -P) export MR_SHARED=0; shift ;; esac
dev=${1:-mr0}
extra=("${@:2}")
bin=$MR_REPO/out/rnriso
if [[ -x $bin && ! $bin -ot $MR_REPO/tests/scale/rnriso.c && ! $bin -ot $MR_REPO/tests/scale/side.h ]]; then
  pass "out/rnriso built and up to date"
else fail "out/rnriso missing or older than its source: run 'make -C tests/scale' on the host"; done_testing; fi

add_link "$dev"
link_ready "$dev"
meet ready

rnrc=rx_drop_receiver_not_ready
[[ $dev == rxe* ]] && rnrc=send_rnr_err
c0=$(counter "$rnrc")
# A port per device and mode: the parts of one seq.sh boot differ.
port=18900
(($(mr_shared))) && port=$((port + 10))
[[ $dev == rxe* ]] && port=$((port + 20))
role=server peer=()
((MR_ID == 1)) || { role=client peer=("$MR_PEER_IP4"); }
rcf=$MR_RUNDIR/rnriso.rc.$MR_ID
rm -f "$rcf"
t0=$SECONDS
fold_tap "$dev: " < <(timeout "$(slow 600)" "$bin" -d "$dev" -g "$gid" -p "$port" "${extra[@]}" \
  "${peer[@]}" 2>&1 | tee "$MR_RUNDIR/rnriso.out.$MR_ID"; echo "${PIPESTATUS[0]}" >"$rcf")
rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc=255
if ((rc == 0)); then pass "$dev: rnriso $role exits 0 ($((SECONDS - t0)) s)"
else fail "$dev: rnriso $role exits 0 (exit $rc, $((SECONDS - t0)) s)" "$(dmesg | tail -20)"; fi
c1=$(counter "$rnrc")
if ((MR_ID == 1)); then
  if [[ $dev == rxe* ]]; then diag "$dev: $rnrc grew by $((c1 - c0)) (RNR NAKs sent)"
  elif ((c1 > c0)); then pass "$dev: QP 0 met RNR: $rnrc grew by $((c1 - c0))"
  else fail "$dev: QP 0 met RNR: $rnrc grew by $((c1 - c0))"; fi
fi
diag "$dev counters: $(rdma statistic show link "$dev/1" 2>&1 | tr -s ' \n' ' ')"
meet done
[[ -n ${MR_NESTED:-} ]] || done_testing
