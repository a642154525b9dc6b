#!/usr/bin/env bash
# The static Linux binary that goes on a remote machine or into a container (README, "Remote"):
# built for x86_64-unknown-linux-musl, checked to be static (`file`, `ldd`), to print --version,
# and to answer a `serve --stdio` exchange (ready first, a status line, exit 0 at stdin's end).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/lib/install.sh

start=$(date +%s)
target=x86_64-unknown-linux-musl
rustup target add "$target" >/dev/null
command -v file >/dev/null || apt_install file
cargo build --release --locked --target "$target" -p claude-ide-bridge-cli
bin="$PWD/target/$target/release/claude-ide-bridge"

file "$bin" | grep -Eq "statically linked|static-pie linked" ||
  { echo "musl: $bin is not static: $(file "$bin")" >&2; exit 1; }
if ldd "$bin" 2>&1 | grep -q "=>"; then
  echo "musl: $bin needs shared libraries: $(ldd "$bin" 2>&1)" >&2
  exit 1
fi
"$bin" --version | grep -q "^claude-ide-bridge " || { echo "musl: --version failed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ws" "$tmp/config"
lines=$(cd "$tmp/ws" && printf '{"type":"status"}\n' |
  HOME="$tmp" CLAUDE_CONFIG_DIR="$tmp/config" timeout 30 "$bin" serve --stdio --no-lsp \
    2>"$tmp/stderr") ||
  { echo "musl: serve --stdio failed: $(cat "$tmp/stderr")" >&2; exit 1; }
python3 - "$tmp/ws" <<PY
import json, sys
lines = [json.loads(l) for l in """$lines""".splitlines()]
assert lines[0]["type"] == "ready", lines
status = next(l for l in lines if l["type"] == "status")
assert status["port"] == lines[0]["port"] and status["workspace"] == [sys.argv[1]], lines
PY
echo "musl: $target binary static, $(stat -c %s "$bin") bytes, answered serve --stdio; took $(( $(date +%s) - start )) s"
