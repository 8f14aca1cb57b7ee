#!/usr/bin/env bash
# Host check of ksft-runner.sh itself: a passing, a failing, a skipping and a
# hanging program must give "ok", "not ok ... # exit=1", "ok ... # SKIP" and
# "not ok ... # TIMEOUT", under a correct header and plan, and exit 1; and
# the installed copy's run_kselftest.sh takes -l, -t, -c and refuses what it
# does not know.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
cp "$here/ksft-runner.sh" "$d/"
echo timeout=2 >"$d/settings"
printf '#!/bin/sh\necho "ok 1 - fine"\n' >"$d/pass.sh"
printf '#!/bin/sh\necho "not ok 1 - broken"\nexit 1\n' >"$d/fail.sh"
printf '#!/bin/sh\necho "SKIP: no peer"\nexit 4\n' >"$d/skip.sh"
printf '#!/bin/sh\nsleep 60\n' >"$d/hang.sh"
chmod +x "$d"/*.sh
out=$("$d/ksft-runner.sh" pass.sh fail.sh skip.sh hang.sh); rc=$?
printf '%s\n' "$out"
want=("TAP version 13" "1..4" "ok 1 selftests: metaroce: pass.sh" "not ok 2 selftests: metaroce: fail.sh # exit=1"
      "ok 3 selftests: metaroce: skip.sh # SKIP" "not ok 4 selftests: metaroce: hang.sh # TIMEOUT 2 seconds"
      "# not ok 1 - broken")
bad=0
for w in "${want[@]}"; do grep -qxF -- "$w" <<<"$out" || { echo "missing: '$w'"; bad=1; }; done
((rc == 1)) || { echo "runner exit $rc, wanted 1"; bad=1; }

# The installed copy's run_kselftest.sh: its options, on a fake list.
mkdir -p "$d/inst/metaroce"
cp "$here/run_kselftest.sh" "$d/inst/"
cp "$d"/*.sh "$d/settings" "$d/inst/metaroce/"
printf 'metaroce:pass.sh\nmetaroce:skip.sh\nmetaroce:fail.sh\n' >"$d/inst/kselftest-list.txt"
expect() { # expect RC PATTERN ARGS...: run_kselftest.sh ARGS exits RC, prints PATTERN
  local want=$1 pat=$2 o r; shift 2
  o=$("$d/inst/run_kselftest.sh" "$@" 2>&1); r=$?
  if ((r == want)) && grep -qE -- "$pat" <<<"$o"; then echo "run_kselftest.sh $*: exit $r, /$pat/"
  else echo "run_kselftest.sh $*: exit $r (wanted $want), output:"; printf '%s\n' "$o"; bad=1; fi
}
expect 0 '^metaroce:skip.sh$' -l
expect 0 '^ok 1 selftests: metaroce: pass.sh$' -t metaroce:pass.sh -t skip.sh
expect 1 '^not ok 3 selftests: metaroce: fail.sh # exit=1$' -c metaroce
expect 2 "no test 'metaroce:nope'" -t metaroce:nope
expect 2 "no collection 'net'" -c net
expect 2 "unknown argument '-x'" -x
((bad == 0)) && echo "runner: every outcome reported as kselftest's runner.sh does"
exit $bad
