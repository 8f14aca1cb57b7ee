#!/usr/bin/env bash
# Two guests: connection setup through rdma_cm over the RDMA device named by
# $1 (default mr0), with unmodified librdmacm tools. rdma_cm resolves the
# peer's IP address to a GID and path, and ib_cm exchanges its REQ/REP/RTU
# (SIDR for UD) as MADs on each device's GSI QP (QP1): a kernel consumer of
# the device's kernel verbs (ib_mad: kernel PD/DMA MR, CQ, UD QP1,
# ib_post_send/ib_post_recv/ib_poll_cq). Guest 1 serves, guest 2 connects.
#   cm.sh [mr0|rxe0]
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=${1:-mr0}
add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
# pair "SERVER ARGS" "CLIENT ARGS" TOOL: guest 1 runs TOOL SERVER-ARGS, guest 2
# runs TOOL CLIENT-ARGS once guest 1's server listens; output in $out, exit
# in $rc. The client starts only after the server's listening rdma_cm ID is
# in `rdma resource show cm_id`: a client retried until the server listens
# can have one of its -c connections refused (the server not yet
# listening) and the other accepted (listening by then), and udaddy's or
# ucmatose's server then waits for ever on a client that has gone (a CI
# failure at 1cb089c: udaddy server rc=124, client rc=1).
pair() {
  local srv=$1 cli=$2 tool=$3 f pid
  if ((MR_ID == 1)); then
    f=$(mktemp)
    timeout 180 "$tool" $srv >"$f" 2>&1 &
    pid=$!
    retry 60 eval "! kill -0 $pid 2>/dev/null || rdma resource show cm_id 2>/dev/null | grep -w 'comm $tool' | grep -qw LISTEN" ||
      diag "$tool: no listening rdma_cm ID after 60 s: $(rdma resource show cm_id 2>&1)"
    meet "$tool-listening" 240
    wait "$pid"; rc=$?
    out=$(cat "$f"); rm -f "$f"
  else
    meet "$tool-listening" 240
    out=$(timeout 180 "$tool" $cli 2>&1); rc=$?
  fi
  [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
  return 0
}

# rping: RC, rdma_cm connect, SEND + RDMA READ + RDMA WRITE per ping; -v
# prints each ping's payload on the server, which checks the pattern.
pair "-s -a $MR_IP4 -C 10 -v" "-c -a $MR_PEER_IP4 -C 10 -v" rping
n=$(grep -c 'ping data: rdma-ping-' <<<"$out")
if ((rc == 0 && n == 10)); then pass "$dev: rping -C 10 -v: 10 pings carried ($(grep -m1 'ping data' <<<"$out"))"
else fail "$dev: rping -C 10 -v (rc=$rc, $n pings)" "$out$(dmesg | tail -30)"; fi

# ucmatose: RC connections through rdma_cm, sends on each, disconnect.
pair "-b $MR_IP4 -c 2 -C 10" "-s $MR_PEER_IP4 -c 2 -C 10" ucmatose
if ((rc == 0)) && grep -q 'test complete' <<<"$out"; then pass "$dev: ucmatose 2 connections x 10 messages: $(grep -E 'completion|test complete' <<<"$out" | tr '\n' ' ')"
else fail "$dev: ucmatose (rc=$rc)" "$out$(dmesg | tail -30)"; fi

# udaddy: UD through rdma_cm (SIDR resolves the peer's QPN and Q_Key).
pair "-b $MR_IP4 -c 2 -C 10" "-s $MR_PEER_IP4 -c 2 -C 10" udaddy
if ((rc == 0)) && grep -q 'test complete' <<<"$out"; then pass "$dev: udaddy 2 endpoints x 10 datagrams: $(grep -E 'test complete' <<<"$out" | tr '\n' ' ')"
else fail "$dev: udaddy (rc=$rc)" "$out$(dmesg | tail -30)"; fi

check "rdma link delete $dev" timeout 120 rdma link delete "$dev"
done_testing
