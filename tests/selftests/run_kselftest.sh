#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The runner of an installed copy (make -C tests/selftests install), with the
# options of the kernel's tools/testing/selftests/run_kselftest.sh that make
# sense for one collection:
#   run_kselftest.sh                      every test in kselftest-list.txt
#   run_kselftest.sh -t metaroce:TEST ... only these tests (-t may repeat;
#                                         "TEST" alone is accepted too)
#   run_kselftest.sh -c metaroce          the whole collection (the default)
#   run_kselftest.sh -l                   list the tests ("metaroce:TEST")
#   run_kselftest.sh -h                   this help
# KTAP on stdout (metaroce/ksft-runner.sh); exits 1 if a test failed, 2 on a
# usage error (an unknown option, collection or test).
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")" || exit 1
list=kselftest-list.txt
usage() { sed -n '3,13s/^# \{0,1\}//p' "$self"; }
for a; do case $a in -h|--help) usage; exit 0 ;; esac; done
[ -r "$list" ] || { echo "run_kselftest.sh: $list missing: this runs an installed copy (make -C tests/selftests install INSTALL_PATH=DIR, then DIR/run_kselftest.sh)" >&2; exit 2; }
tests=""
while [ $# -gt 0 ]; do
  case $1 in
    -l|--list) cat "$list"; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    -c|--collection)
      [ "${2:-}" = metaroce ] || { echo "run_kselftest.sh: no collection '${2:-}' (only metaroce)" >&2; exit 2; }
      shift 2 ;;
    -t|--test)
      t=${2:-}; t=${t#metaroce:}
      grep -qxF "metaroce:$t" "$list" || { echo "run_kselftest.sh: no test '${2:-}' (run_kselftest.sh -l lists them)" >&2; exit 2; }
      tests="$tests $t"; shift 2 ;;
    *) echo "run_kselftest.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[ -n "$tests" ] || tests=$(sed 's/^metaroce://' "$list")
cd metaroce || exit 1
# shellcheck disable=SC2086
exec ./ksft-runner.sh $tests
