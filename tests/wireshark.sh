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
# The port preference and the heuristic's name: with the port moved to 5000
# and the heuristic off, the DATA to port 5000 is MetaRoCE and nothing to 4792
# is; with the heuristic off alone, the DATA to 5000 is not.
protos() {
  tshark -n -X lua_script:tools/wireshark/metaroce.lua -r "$tmp/wire.pcap" "$@" \
    -T fields -e udp.dstport -e frame.protocols 2>/dev/null
}
moved=$(protos -o metaroce.udp_port:5000 --disable-heuristic metaroce_udp)
plain=$(protos --disable-heuristic metaroce_udp)
if awk '$1 == 5000 && $2 ~ /metaroce/ { a++ } $1 == 4792 && $2 ~ /metaroce/ { b++ } END { exit !(a == 1 && b == 0) }' <<<"$moved" &&
   awk '$1 == 5000 && $2 ~ /metaroce/ { a++ } $1 == 4792 && $2 ~ /metaroce/ { b++ } END { exit !(a == 0 && b > 0) }' <<<"$plain"; then
  echo "preference metaroce.udp_port and heuristic metaroce_udp: as registered"
else
  echo "preference metaroce.udp_port / heuristic metaroce_udp: not as registered"; exit 1
fi
echo "wireshark dissector: all checks passed"
