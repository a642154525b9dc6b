#!/usr/bin/env bash
# The benchmark programs (benches/lsp, loopback, idle) run once each with the smallest counts: a
# smoke run, so that a change that breaks one (a flag it passes, a name it builds) fails here and
# not on the day its figures are wanted. Its figures are not read; BENCHMARKS.md's come from full runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
cargo build --release -q -p claude-ide-bridge-cli -p claude-ide-bridge-bench-lsp \
  -p claude-ide-bridge-bench-loopback -p claude-ide-bridge-bench-idle
# pyright (installed by test-all.sh) is bench-lsp's server.
target/release/claude-ide-bridge-bench-lsp --iterations 2 --cli-iterations 1 >/dev/null
# The servers of the library and the program, with a bare floor to compare to (Node's figures are
# skipped without `npm install` in benches/loopback/node).
target/release/claude-ide-bridge-bench-loopback --runtime smol --runtime threads \
  --runtime bare-ws --runtime bare-ws-smol --runtime serve-threads --runtime serve-smol \
  --notifications 2000 --calls 200 --pipelined 200 >/dev/null
target/release/claude-ide-bridge-bench-idle --seconds 1 >/dev/null
echo "benches: the benchmark programs ran (smoke run) in $(($(date +%s) - start)) s"
