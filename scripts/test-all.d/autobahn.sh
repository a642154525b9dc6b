#!/usr/bin/env bash
# RFC 6455 conformance: the Autobahn suite (sections 1-10) against both echo examples.
# Fails on any FAILED or NON-STRICT case, or any change from tests/conformance/autobahn-expected.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
# The runner is not part of this repository: CI places it beside the clone. It needs a Python 2.7
# (set PYTHON2=/path/to/python2.7 when it is not found). Without either, this step says why and is
# skipped, except under .ci/run, where it must run.
runner="${AUTOBAHN_RUNNER:-$root/../shared/conformance/autobahn}"
export AUTOBAHN_STATE="${AUTOBAHN_STATE:-$root/target/autobahn}"
skip() {
  if [ -n "${CLAUDE_IDE_BRIDGE_CI:-}" ]; then
    echo "autobahn: $1" >&2
    exit 1
  fi
  echo "autobahn: skipped: $1"
  exit 0
}
[ -e "$runner/install.sh" ] || skip "no Autobahn runner at $runner (set AUTOBAHN_RUNNER to its folder)"
mkdir -p "$AUTOBAHN_STATE"
if [ ! -x "$AUTOBAHN_STATE/.venv/py2/bin/wstest" ]; then
  bash "$runner/install.sh" || skip "the runner could not be installed (see above; it needs a Python 2.7: PYTHON2=...)"
fi
cargo build --release -q -p claude-ide-bridge-smol --example echo-smol
cargo build --release -q -p claude-ide-bridge-blocking --example echo-blocking
status=0
for ex in echo-smol echo-blocking; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$root/target/release/examples/$ex" "$port" >"$AUTOBAHN_STATE/$ex.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  out="$AUTOBAHN_STATE/reports/$ex"
  rm -rf "$out"
  bash "$runner/run.sh" --agent "$ex" --outdir "$out" "$port" | tail -1 || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  python3 "$root/tests/conformance/autobahn_compare.py" "$out/index.json" "$root/tests/conformance/autobahn-expected.json" ${AUTOBAHN_WRITE:+--write} || status=1
done
exit $status
