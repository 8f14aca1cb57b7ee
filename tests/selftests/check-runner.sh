#!/usr/bin/env bash
# Host check of ksft-runner.sh itself: a passing, a failing, a skipping and a
# hanging program must give "ok", "not ok ... # exit=1", "ok ... # SKIP" and
# "not ok ... # TIMEOUT", under a correct header and plan, and exit 1.
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
((bad == 0)) && echo "runner: every outcome reported as kselftest's runner.sh does"
exit $bad
