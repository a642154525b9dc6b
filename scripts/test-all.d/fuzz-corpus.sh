#!/usr/bin/env bash
# The fuzz crate on stable: format, lints, and every committed corpus file replayed through every
# target without libFuzzer (fuzz/tests/corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings
cargo test --manifest-path fuzz/Cargo.toml
# Every libFuzzer target builds (on stable: libFuzzer's runtime links, without the coverage
# instrumentation `cargo fuzz` adds on nightly).
cargo build --manifest-path fuzz/Cargo.toml --features libfuzzer --bins
