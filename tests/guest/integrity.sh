#!/usr/bin/env bash
# Two guests: the project's data-integrity test (tests/integrity/integrity.c)
# over one RC QP pair on the RDMA device named by $1 (mr0: metaroce; rxe0: the
# kernel's rxe, the oracle). Guest 1 serves, guest 2 drives as the client.
#   integrity.sh [mr0|rxe0] [-Q] [-r RETRY_CNT] [-T TIMEOUT] [-s SEED] [-n OPS] [-M MAXSIZE] [NETEM-ARGS...]
# (the options in any order, before the netem arguments)
# With netem arguments (e.g. `loss 1% duplicate 1% delay 1ms reorder 25%`),
# both guests shape their egress on the link with them first.
# The binary is built on the host (guests share its root fs):
#   make -C tests/integrity && qemu/vm-run -n 2 -t 600 tests/guest/integrity.sh rxe0
# The -s/-n/-M options go to the client (defaults: seed 1, 300 ops, 1 MiB,
# about 29 MB in all); the server takes them from the client. -Q (both
# sides): the QPs at the device's reported limits (max_qp_wr, max_sge).
# -r/-T (both sides): the QPs' retry_cnt and local ACK timeout code (defaults
# 7 and 16); `-r 0 -T 11` (about 34 ms in the kernel) checks that a busy QP's
# healthy transfer never counts as a timeout.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=${1:-mr0}
shift
args=() deep=()
# The options in any order; the first other word starts the netem arguments.
while (($#)); do
  case $1 in
    -Q) deep+=(-Q); shift ;;
    -[rT]) (($# >= 2)) || break; deep+=("$1" "$2"); shift 2 ;;
    -[snM]) (($# >= 2)) || break; args+=("$1" "$2"); shift 2 ;;
    *) break ;;
  esac
done
integrity_built

add_link "$dev"
link_ready "$dev" "$@"

run_integrity "$dev" "$gid" "${deep[@]}" -- "${args[@]}"
done_testing
