#!/usr/bin/env bash
# The kselftest shape (tests/selftests/), used the way kernel developers run
# tools/testing/selftests: `make -C tests/selftests run_tests` inside the
# guest, and its KTAP output checked: the header and plan, one result line per
# test numbered in order, no "not ok"; in one guest the one-guest tests pass
# and the two-guest ones are skipped ("# SKIP"), with two every test runs.
#   qemu/vm-run -n 1 -t 900 tests/guest/kselftest.sh
. "$MR_REPO/tests/lib.sh"
sel=$MR_REPO/tests/selftests
ktap=$MR_RUNDIR/ktap.$MR_ID
make -s --no-print-directory -C "$sel" run_tests >"$ktap" 2>&1
rc=$?
one=$(make -s --no-print-directory -C "$sel" -p -n emit_tests 2>/dev/null | sed -n 's/^TEST_PROGS_1 := //p')
two=$(make -s --no-print-directory -C "$sel" -p -n emit_tests 2>/dev/null | sed -n 's/^TEST_PROGS_2 := //p')
all=($one $two)
diag "$(grep -E '^(not )?ok ' "$ktap")"
[[ $(head -1 "$ktap") == "TAP version 13" ]] && pass "KTAP header" || fail "KTAP header" "$(head -3 "$ktap")"
grep -qx "1..${#all[@]}" "$ktap" && pass "KTAP plan 1..${#all[@]}" || fail "KTAP plan 1..${#all[@]}" "$(grep '^1\.\.' "$ktap")"
mapfile -t res < <(grep -E '^(not )?ok [0-9]+ ' "$ktap")
bad=""
for ((i = 0; i < ${#all[@]}; i++)); do
  [[ ${res[i]:-} =~ ^(not )?ok\ $((i + 1))\ selftests:\ metaroce:\ ${all[i]}( |$) ]] || bad+="#$((i + 1)) '${res[i]:-missing}'; "
done
((${#res[@]} == ${#all[@]})) && [[ -z $bad ]] && pass "one result line per test, in order (${#res[@]})" ||
  fail "one result line per test, in order" "$bad (${#res[@]} lines)"
nf=$(grep -c '^not ok ' "$ktap")
((nf == 0 && rc == 0)) && pass "no 'not ok' (make run_tests exit $rc)" ||
  fail "no 'not ok' (make run_tests exit $rc)" "$(grep -B30 '^not ok ' "$ktap" | tail -60)"
for t in $one; do
  grep -Eqx "ok [0-9]+ selftests: metaroce: $t" "$ktap" && pass "$t: ok" || fail "$t: ok" "$(grep -E "selftests: metaroce: $t" "$ktap")"
done
for t in $two; do
  if ((MR_NGUESTS == 2)); then
    grep -Eqx "ok [0-9]+ selftests: metaroce: $t" "$ktap" && pass "$t: ok" || fail "$t: ok"
  else
    grep -Eqx "ok [0-9]+ selftests: metaroce: $t # SKIP" "$ktap" && pass "$t: SKIP without a peer" || fail "$t: SKIP without a peer"
  fi
done
done_testing
