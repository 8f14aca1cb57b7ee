#!/usr/bin/env bash
# Host-side checks of the MetaRoCE protocol core (rust/proto) and simulator (tools/sim):
# format, lints, unit/property/mutation tests, the simulator's quick-scale table with its
# regression guards, and a short cargo-fuzz smoke run when cargo-fuzz and a nightly
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

step "fuzz smoke"
secs="${METAROCE_FUZZ_SECONDS:-20}"
if command -v cargo-fuzz >/dev/null 2>&1 && cargo +nightly --version >/dev/null 2>&1; then
    for t in decode receive; do
        (cd rust/proto/fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$secs" \
            -rss_limit_mb=1024 2>&1 | tail -n 3)
    done
else
    echo "cargo-fuzz or nightly not installed: skipped (the stable mutation test above ran)"
fi

echo
echo "host checks: all passed"
