#!/usr/bin/env bash
# Runs metaroce's kselftest programs and prints KTAP in the format of the
# kernel's tools/testing/selftests/kselftest/runner.sh:
#   TAP version 13 / 1..N / "# selftests: metaroce: NAME", the test's output
#   prefixed "# ", then "ok N selftests: metaroce: NAME" ("# SKIP" for exit 4),
#   "not ok N ... # TIMEOUT S seconds" (exit 124) or "not ok N ... # exit=RC".
# The per-test timeout comes from ./settings ("timeout="), overridden by
# KSELFTEST_TIMEOUT; KSELFTEST_<NAME>_ARGS adds arguments, as in the kernel.
# Exits 1 if any test failed.
#   ksft-runner.sh TEST...
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 1
timeout=45   # kselftest's default
if [[ -r settings ]]; then
  while IFS='=' read -r k v; do
    [[ $k == timeout ]] && timeout=$v
  done < <(grep -v '^#' settings)
fi
timeout=${KSELFTEST_TIMEOUT:-$timeout}
echo "TAP version 13"
echo "1..$#"
i=0 bad=0
for t in "$@"; do
  i=$((i + 1))
  hdr="selftests: metaroce: $t"
  echo "# timeout set to $timeout"
  echo "# $hdr"
  if [[ ! -e $t ]]; then
    echo "# Warning: file $t is missing!"; echo "not ok $i $hdr"; bad=1; continue
  fi
  var=KSELFTEST_$(tr -c '[:alnum:]_\n' '_' <<<"$t" | tr '[:lower:]' '[:upper:]')_ARGS
  # shellcheck disable=SC2086
  timeout -k 10 "$timeout" ./"$t" ${!var:-} 2>&1 | sed -u 's/^/# /'
  rc=${PIPESTATUS[0]}
  case $rc in
    0) echo "ok $i $hdr" ;;
    4) echo "ok $i $hdr # SKIP" ;;
    124) echo "#"; echo "not ok $i $hdr # TIMEOUT $timeout seconds"; bad=1 ;;
    *) echo "not ok $i $hdr # exit=$rc"; bad=1 ;;
  esac
done
exit $bad
