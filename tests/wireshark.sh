#!/usr/bin/env bash
# Host check of the Wireshark dissector (tools/wireshark/metaroce.lua): the
# reference encoder writes a pcap of every packet type (a lossy exchange of
# two model QPs, hand-made datagrams of every op and flag, one malformed
# variant per decoder check) with the values the reference decoder reads from
# each (rust/proto/examples/wire_pcap.rs); tshark decodes it with the
# dissector and tests/wireshark.py compares every field of every frame, the
# drop reason and expert info of every malformed one, and that well-formed
# ones carry none. Then the comparison must fail on a wrong expected value and
# on a datagram cut short (the check can fail). Skipped without tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v tshark >/dev/null 2>&1; then
  echo "tshark not installed: skipped (tools/setup.sh installs it)"
  exit 0
fi
tshark --version 2>/dev/null | head -1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo run -q -p metaroce-proto --example wire_pcap -- "$tmp/wire.pcap" "$tmp/wire.expect"
python3 tests/wireshark.py fields "$tmp/wire.pcap" "$tmp/wire.expect"
python3 tests/wireshark.py selftest "$tmp/wire.pcap" "$tmp/wire.expect" "$tmp"
echo "wireshark dissector: all checks passed"
