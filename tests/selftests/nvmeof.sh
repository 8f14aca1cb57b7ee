#!/usr/bin/env bash
# kselftest wrapper: tests/guest/nvmeof.sh mr0 (two guests): nvmet-rdma target, nvme-rdma host.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko"
run_guest nvmeof.sh mr0
