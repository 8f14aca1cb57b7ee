#!/usr/bin/env bash
# Two guests whose metaroce devices disagree on the connection mode
# (Documentation/transport.rst, "Connection set-up", C22; device.rst,
# "Shared connections"): guest 1 adds mr0 sharing connections (shared=1),
# guest 2 with a connection per QP (shared=0). Two RC exchanges between them
# (ibv_rc_pingpong, each guest serving once) must fail, the client with
# "transport retry counter exceeded" (nothing it sends is taken), and each
# device must say why: its rx_drop_mode_mismatch counter grew (every
# datagram of the peer dropped for its mode, none taken), and its kernel log
# names the peer's address and both modes once.
#   qemu/vm-run -n 2 tests/guest/mode.sh
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=mr0
if ((MR_ID == 1)); then export MR_SHARED=1; else export MR_SHARED=0; fi
add_link "$dev"
link_ready "$dev"
meet ready
slow 1 >/dev/null
m0=$(counter rx_drop_mode_mismatch) rx0=$(counter rx_packets)

# exchange SERVER-ID PORT: guest SERVER-ID serves ibv_rc_pingpong, the other
# connects (retrying until the server listens); the client must fail with
# retry exceeded, the server must get nothing (its time limit ends it).
exchange() {
  local srv=$1 port=$2 out rc end
  if ((MR_ID == srv)); then
    out=$(timeout "$(slow 40)" ibv_rc_pingpong -d "$dev" -g "$gid" -p "$port" -n 5 2>&1); rc=$?
    if ((rc == 124)); then pass "$dev: server on port $port received nothing (ended by its time limit)"
    else fail "$dev: server on port $port received nothing (exit $rc)" "$out"; fi
  else
    end=$((SECONDS + $(slow 30)))
    while :; do
      out=$(timeout "$(slow 35)" ibv_rc_pingpong -d "$dev" -g "$gid" -p "$port" -n 5 "$MR_PEER_IP4" 2>&1); rc=$?
      grep -qi "couldn't connect" <<<"$out" && ((SECONDS < end)) || break
      sleep 1
    done
    if ((rc != 0)) && grep -q 'transport retry counter exceeded' <<<"$out"; then
      pass "$dev: client to port $port fails with retry exceeded (exit $rc)"
    else fail "$dev: client to port $port fails with retry exceeded (exit $rc)" "$out"; fi
  fi
  meet "done-$port"
}
exchange 1 18991
exchange 2 18992

m=$(($(counter rx_drop_mode_mismatch) - m0)) rx=$(($(counter rx_packets) - rx0))
if ((m > 0)); then pass "$dev: the peer's datagrams dropped for their mode: rx_drop_mode_mismatch +$m (rx_packets +$rx)"
else fail "$dev: rx_drop_mode_mismatch grew (+$m, rx_packets +$rx)" "$(rdma statistic show link "$dev/1")"; fi
if ((MR_ID == 1)); then want="runs a connection per QP, this device shared connections"
else want="runs shared connections, this device a connection per QP"; fi
lines=$(dmesg | grep -c "$MR_PEER_IP4 $want")
if ((lines == 1)); then pass "$dev: the kernel log says once why: '$MR_PEER_IP4 $want'"
else fail "$dev: the kernel log says once why ('$MR_PEER_IP4 $want': $lines lines)" "$(dmesg | grep -i 'runs\|mode' | tail -5)"; fi
done_testing
