#!/usr/bin/env bash
# Two guests: NVMe over Fabrics (RDMA transport) across the RDMA device named
# by $1 (default mr0) — the kernel's own ULPs on both ends, unmodified:
# guest 1 exports a 64 MiB loop device (tmpfs file) with nvmet-rdma, guest 2
# connects with nvme-rdma (through /dev/nvme-fabrics, as nvme-cli does),
# writes 16 MiB of random data with O_DIRECT, reads it back, and both sides
# compare checksums (guest 2: the read-back; guest 1: its backing file).
# Kernel verbs exercised: kernel PDs/CQs/RC QPs set up by rdma_cm, fast-
# registration MRs (ib_map_mr_sg, REG_MR; LOCAL_INV or SEND_WITH_INV from the
# target), RDMA READ/WRITE by the target (rdma_rw), ib_drain_qp on teardown.
#   nvmeof.sh [mr0|rxe0]
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=${1:-mr0}
nqn=metaroce-test
add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
mkdir -p /mnt && mount -t tmpfs -o size=200m tmpfs /mnt

# A one-shot TCP side channel (port 5555): guest 2 sends its checksum when done.
side_recv() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", 5555)); s.listen(1); s.settimeout(float(sys.argv[1]))
c, _ = s.accept(); c.settimeout(30)
print(c.recv(256).decode().strip())
PY
}
side_send() {
  /usr/bin/python3 - "$MR_PEER_IP4" "$1" <<'PY'
import socket, sys
c = socket.create_connection((sys.argv[1], 5555), timeout=30); c.sendall(sys.argv[2].encode())
PY
}

if ((MR_ID == 1)); then
  check "modprobe nvmet-rdma" load_kmod nvmet nvmet-rdma
  truncate -s 64M /mnt/disk
  loopdev=$(losetup -f --show /mnt/disk)
  cfg=/sys/kernel/config/nvmet
  setup() {
    mkdir "$cfg/subsystems/$nqn" &&
    echo 1 >"$cfg/subsystems/$nqn/attr_allow_any_host" &&
    mkdir "$cfg/subsystems/$nqn/namespaces/1" &&
    echo -n "$loopdev" >"$cfg/subsystems/$nqn/namespaces/1/device_path" &&
    echo 1 >"$cfg/subsystems/$nqn/namespaces/1/enable" &&
    mkdir "$cfg/ports/1" &&
    echo rdma >"$cfg/ports/1/addr_trtype" &&
    echo ipv4 >"$cfg/ports/1/addr_adrfam" &&
    echo "$MR_IP4" >"$cfg/ports/1/addr_traddr" &&
    echo 4420 >"$cfg/ports/1/addr_trsvcid" &&
    ln -s "$cfg/subsystems/$nqn" "$cfg/ports/1/subsystems/$nqn"
  }
  check "nvmet: subsystem $nqn (namespace $loopdev) on rdma $MR_IP4:4420" setup
  peer_sum=$(side_recv 400) || peer_sum=""
  my_sum=$(head -c 16M /mnt/disk | sha256sum | cut -d' ' -f1)
  if [[ -n $peer_sum && $peer_sum == "$my_sum" ]]; then
    pass "$dev: the 16 MiB guest 2 wrote over NVMe/RDMA are in the target's backing file (sha256 ${my_sum:0:16}…)"
  else
    fail "$dev: target's backing file matches what guest 2 wrote" "peer: '${peer_sum}' here: $my_sum$(dmesg | tail -30)"
    diag "$(rdma statistic show link "$dev/1" 2>&1)"
  fi
  nap 5  # let the host disconnect first
  rm -f "$cfg/ports/1/subsystems/$nqn"; rmdir "$cfg/ports/1"
  echo 0 >"$cfg/subsystems/$nqn/namespaces/1/enable"
  rmdir "$cfg/subsystems/$nqn/namespaces/1" "$cfg/subsystems/$nqn"
  losetup -d "$loopdev"
else
  check "modprobe nvme-rdma" load_kmod nvme-core nvme-fabrics nvme-rdma
  connect() {
    echo "transport=rdma,traddr=$MR_PEER_IP4,trsvcid=4420,nqn=$nqn" >/dev/nvme-fabrics 2>/dev/null
  }
  check "nvme-rdma: connect to $nqn at $MR_PEER_IP4:4420" retry 120 connect
  ns=""
  for _ in $(seq 60); do
    ns=$(ls /dev/nvme*n1 2>/dev/null | head -1); [[ -n $ns ]] && break; nap 1
  done
  if [[ -n $ns ]]; then
    pass "namespace block device $ns ($(cat /sys/block/${ns#/dev/}/size) sectors)"
    head -c 16M /dev/urandom >/mnt/src
    sum=$(sha256sum </mnt/src | cut -d' ' -f1)
    check "dd 16 MiB to $ns (O_DIRECT, 1 MiB writes)" \
      timeout 300 dd if=/mnt/src of="$ns" bs=1M count=16 oflag=direct status=none
    check "dd 16 MiB back from $ns (O_DIRECT, 128 KiB reads)" \
      timeout 300 dd if="$ns" of=/mnt/back bs=128K count=128 iflag=direct status=none
    back=$(sha256sum </mnt/back | cut -d' ' -f1)
    if [[ $back == "$sum" ]]; then pass "$dev: 16 MiB read back over NVMe/RDMA equal what was written (sha256 ${sum:0:16}…)"
    else fail "$dev: read-back equals written data" "written $sum read $back"; fi
    side_send "$sum" || fail "side channel to the target"
    ctrl=$(basename "$(dirname "$(readlink -f /sys/block/${ns#/dev/}/device)")" 2>/dev/null)
    for c in /sys/class/nvme/nvme*; do echo 1 >"$c/delete_controller" 2>/dev/null; done
    check "nvme controller deleted" retry 60 bash -c '! ls /dev/nvme*n1 >/dev/null 2>&1'
  else
    fail "namespace block device appears" "$(dmesg | tail -30)"
    diag "$(rdma statistic show link "$dev/1" 2>&1)"
    side_send none
  fi
fi
nap 2
check "rdma link delete $dev" timeout 120 rdma link delete "$dev"
done_testing
