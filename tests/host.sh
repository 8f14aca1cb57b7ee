#!/usr/bin/env bash
# Host-side checks of the MetaRoCE protocol core (rust/proto) and simulator (tools/sim):
# format, lints, unit/property/mutation tests, the simulator's quick-scale table with its
# regression guards, the bench table's rules (tests/bench-table.sh), the Wireshark dissector against the reference decoder (tests/wireshark.sh,
# when tshark is installed), the compliance suite's codec against the worked examples, the worked wire examples against the reference, and a short cargo-fuzz smoke run when cargo-fuzz and a nightly
# toolchain are installed. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (workspace; includes the 1M-packet mutation test)"
cargo test --workspace

step "simulator, quick scale, with regression guards"
cargo run --release -p metaroce-sim -- --quick --check

step "Wireshark dissector: every field of every packet type against the reference decoder (tshark; skipped without it)"
bash tests/wireshark.sh

step "compliance suite (tools/compliance): its own codec and keys against every worked-example datagram; every spec reference of its scenarios resolves"
python3 tools/compliance/selftest.py
python3 tools/compliance/run.py --list >/dev/null

step "the bench's table (tools/bench.awk) from made-up results with known medians and ratios"
bash tests/bench-table.sh

step "worked examples: Documentation/transport-examples.rst is what the reference sends (rust/proto/examples/exchange.rs)"
if ! cargo run -q --release -p metaroce-proto --example exchange | diff -u Documentation/transport-examples.rst -; then
    echo "Documentation/transport-examples.rst is stale: regenerate it with"
    echo "  cargo run -q --release -p metaroce-proto --example exchange > Documentation/transport-examples.rst"
    exit 1
fi

step "fuzz smoke"
# Only when cargo-fuzz and nightly are installed, and either the fuzz targets were built
# before (rust/proto/fuzz/target exists) or METAROCE_FUZZ_SECONDS is set: a cold nightly
# build of the targets alone takes minutes on 2 cores.
secs="${METAROCE_FUZZ_SECONDS:-}"
if ! command -v cargo-fuzz >/dev/null 2>&1 || ! cargo +nightly --version >/dev/null 2>&1; then
    echo "cargo-fuzz or nightly not installed: skipped (the stable mutation test above ran)"
elif [ -z "$secs" ] && [ ! -d rust/proto/fuzz/target ]; then
    echo "fuzz targets not built yet: skipped (set METAROCE_FUZZ_SECONDS=N to build and run)"
elif [ "${secs:-20}" = 0 ]; then
    echo "METAROCE_FUZZ_SECONDS=0: skipped"
else
    for t in decode receive rc; do
        (cd rust/proto/fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="${secs:-20}" \
            -rss_limit_mb=1024 2>&1 | tail -n 3)
    done
fi

echo
echo "host checks: all passed"
