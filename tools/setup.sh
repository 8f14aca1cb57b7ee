#!/usr/bin/env bash
# Install everything metaroce needs on a fresh Debian 12 (bookworm) machine.
# Idempotent: every step checks before it acts, so a second run takes seconds.
#
#   bash tools/setup.sh          # as root
#
# What it installs (see README "Requirements"):
#   - Debian packages: kernel source 6.12, LLVM/clang toolchain, QEMU, rdma-core,
#     perftest, iproute2 and friends; tshark and tcpdump (the Wireshark dissector's
#     tests: tests/wireshark.sh, tests/capture-check.sh); trace-cmd and bpftrace
#     for the module's trace events (Documentation/observability.rst).
#   - rustup component rust-src for the active toolchain (the kernel's Rust needs it).
#   - bindgen-cli from crates.io at a pinned version.
#   - virtme-ng from PyPI at a pinned version, in /opt/metaroce/venv.
#   - /etc/systemd/network/10-metaroce-test-guests.link (qemu/guest-nic.link): the
#     test guests' udev keeps their NIC's name.
set -euo pipefail

BINDGEN_VERSION=0.73.2
VIRTME_NG_VERSION=1.42

log() { printf '[setup] %s\n' "$*"; }

export PATH="${HOME:-/root}/.cargo/bin:$PATH"

DEB_PKGS=(
  linux-source-6.12
  clang lld llvm libclang-dev
  qemu-system-x86
  flex bison bc libelf-dev libssl-dev cpio busybox-static
  rdma-core ibverbs-utils ibverbs-providers rdmacm-utils perftest libibverbs-dev librdmacm-dev
  iproute2 iputils-ping ethtool iperf3 kmod xz-utils python3-venv
  tshark tcpdump trace-cmd bpftrace
)

missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark's wireshark-common asks whether non-root users may capture: no.
  echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages: all present"
fi

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
  log "rustup component add rust-src"
  rustup component add rust-src
else
  log "rust-src: present"
fi

if ! command -v bindgen >/dev/null || [[ "$(bindgen --version 2>/dev/null)" != "bindgen $BINDGEN_VERSION" ]]; then
  log "cargo install bindgen-cli@$BINDGEN_VERSION"
  cargo install --locked --quiet "bindgen-cli@$BINDGEN_VERSION"
else
  log "bindgen $BINDGEN_VERSION: present"
fi

# virtme-ng in its own venv (Debian's python3), whatever python3 PATH finds first.
venv=/opt/metaroce/venv
if ! "$venv/bin/vng" --version 2>/dev/null | grep -q "$VIRTME_NG_VERSION"; then
  log "virtme-ng==$VIRTME_NG_VERSION into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "virtme-ng==$VIRTME_NG_VERSION"
else
  log "virtme-ng $VIRTME_NG_VERSION: present ($venv)"
fi

# The test guests' NIC keeps its name (qemu/guest-nic.link says why; it matches
# only the guests' MACs, so it changes nothing on the host).
link=/etc/systemd/network/10-metaroce-test-guests.link
if ! cmp -s "$(dirname "$0")/../qemu/guest-nic.link" "$link"; then
  log "install $link"
  install -D -m 0644 "$(dirname "$0")/../qemu/guest-nic.link" "$link"
else
  log "$link: present"
fi

log "done"
