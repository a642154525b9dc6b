#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then runs them.
# Usage: scripts/test-all.sh            (CI runs exactly this)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
cargo --version
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt

step "test dependencies"
# Debian packages the tests drive: the real Vim (stdio example host), tmux (the real claude CLI),
# script (pseudo-terminal for the ask prompt).
missing=()
for tool in vim:vim tmux:tmux script:bsdutils; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi
# Python `websockets` is a real peer in the runtimes' socket tests.
python3 -c 'import websockets' 2>/dev/null || python3 -m pip install -q websockets

step "format"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "tests"
cargo test --workspace

for extra in scripts/test-*.d/*.sh; do
  [ -e "$extra" ] || continue
  step "$extra"
  bash "$extra"
done
step "all passed"
