#!/usr/bin/env bash
# The end-to-end suite (issue 6): the real `claude` CLI, pinned in tests/e2e/package.json, driven in tmux
# against `claude-ide-bridge serve` / `run`, with a scripted model endpoint (tests/e2e/fake_model.py).
# Installs what it needs on a fresh Debian machine; exits non-zero when a scenario fails; the last line is
# pytest's summary ("N passed, M failed in ...").
#   E2E_JOBS=2 (parallel scenarios)   E2E_BUDGET=570 (seconds for the whole pytest run)   extra args go to pytest
#   E2E_CACHE=~/.cache/claude-ide-bridge-e2e (downloads kept between runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
jobs=${E2E_JOBS:-2}
budget=${E2E_BUDGET:-570}

# shellcheck source=../lib/install.sh
. scripts/lib/install.sh

command -v tmux >/dev/null || apt_install tmux
command -v vim >/dev/null || apt_install vim   # test_vim.py: the Vim plugin with claude inside :ClaudeCode
command -v npm >/dev/null || apt_install nodejs npm
command -v python3 >/dev/null || apt_install python3 python3-pip
# test_remote.py: the container stand-in (a network and mount namespace; `ip` brings up its loopback)
command -v ip >/dev/null || apt_install iproute2
command -v nsenter >/dev/null || apt_install util-linux
# test_remote.py: claude on an SSH host (a real sshd the test starts on 127.0.0.1, the real ssh client)
[ -x /usr/sbin/sshd ] || apt_install openssh-server
command -v ssh >/dev/null || apt_install openssh-client

python3 -c 'import pytest, xdist' 2>/dev/null || pip_install pytest pytest-xdist

# The language server of the diagnostics scenario (issue 14).
command -v pyright-langserver >/dev/null || npm_install_global pyright

# The workspace of scenario 11 (the first edit, issue 32): the source of requests 2.32.3 from PyPI, fetched once
# into a cache (about 20 s: pip prepares its metadata); conftest.py fetches it the same way when it is missing.
export E2E_CACHE=${E2E_CACHE:-$HOME/.cache/claude-ide-bridge-e2e}
if [ ! -f "$E2E_CACHE/requests-2.32.3.tar.gz" ]; then
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  mkdir -p "$E2E_CACHE"
  python3 -m pip download -q --no-deps --no-binary :all: -d "$E2E_CACHE" requests==2.32.3
fi

# The client, at the version pinned in tests/e2e/package.json (the one place the pin lives).
npm install --prefix tests/e2e --no-audit --no-fund --no-package-lock --loglevel=error
tests/e2e/node_modules/.bin/claude --version

cargo build --release -p claude-ide-bridge-cli

# The release profile is the one `cargo install` uses (issue 32, item 7): no debug info and no
# symbol table in it, so the installed binary stays at most 8 MB (about 4.8 MB on x86_64 Linux
# with its whole-program LTO, 6.2 MB without; 8.0 MB with its symbols, 47 MB with debug = 1).
# package.sh checks the binary `cargo install` builds from crates.io, without this profile.
bin="$CARGO_TARGET_DIR/release/claude-ide-bridge"
size=$(stat -c %s "$bin")
echo "e2e: $bin is $size bytes (at most 8000000)"
if [ "$size" -gt 8000000 ]; then
  echo "e2e: the release binary grew past 8 MB: debug info or symbols back in [profile.release]? (profilers use --profile profiling)" >&2
  exit 1
fi

start=$(date +%s)
status=0
# test_windows.py (the Windows client and bridge under Wine) is platforms.sh's: it needs Wine.
timeout --signal=INT --kill-after=30 "$budget" \
  python3 -m pytest tests/e2e -p no:cacheprovider -n "$jobs" -rfEs --ignore tests/e2e/test_windows.py "$@" || status=$?
echo "e2e suite: $(( $(date +%s) - start )) s, exit status $status"
exit "$status"
