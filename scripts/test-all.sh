#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then runs them.
# Usage: scripts/test-all.sh            (CI runs exactly this)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/install.sh
. scripts/lib/install.sh

# Each step says when it began (minutes into the run), so a slow step shows in CI's log.
step() { printf '\n==> %s (at %dm%02ds)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

step "toolchain"
cargo --version
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt

step "test dependencies"
# Debian packages the tests drive: the real Vim (the plugin in editors/vim), tmux (the real claude CLI),
# script (pseudo-terminal for the ask prompt), groff (renders the man page the program prints),
# zsh and fish (load the completion scripts it prints; bash is there already).
missing=()
# clangd is a real language server for the LSP client's tests (program/lsp); npm installs pyright below.
# The "lint scripts" step runs shellcheck on this suite's own shell scripts.
for tool in vim:vim tmux:tmux script:bsdutils clangd:clangd npm:npm groff:groff-base zsh:zsh fish:fish \
  shellcheck:shellcheck; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done
# ALE, a real Vim linting plugin: the Vim plugin reports its diagnostics (program/cli/tests/vim.rs).
[ -e /usr/share/vim-ale/plugin/ale.vim ] || missing+=(vim-ale)
# A real OpenSSH server and client: the Vim plugin's remote use goes through them
# (program/cli/tests/vim_remote.rs starts sshd on 127.0.0.1 itself; it fails, not skips, without it).
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
# unshare and ip: network namespaces the program's tests make for themselves (run --host :: with
# the namespace's net.ipv6.bindv6only set, program/cli/tests/run_and_inspect.rs).
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi
# Python `websockets` is a real peer in the runtimes' socket tests.
python3 -c 'import websockets' 2>/dev/null || pip_install websockets
# Real language servers for program/lsp's tests (they fail, not skip, without them): pyright and
# typescript-language-server with the TypeScript it drives from npm (pinned; this
# typescript-language-server runs on Node 18 and later, vtsls too), ruff from PyPI.
pyright_version=1.1.414
pyright --version 2>/dev/null | grep -qF "$pyright_version" || npm_install_global "pyright@$pyright_version"
tsls_version=4.4.1 typescript_version=5.9.3
{ typescript-language-server --version 2>/dev/null | grep -qxF "$tsls_version" &&
  tsc --version 2>/dev/null | grep -qF "$typescript_version"; } ||
  npm_install_global "typescript-language-server@$tsls_version" "typescript@$typescript_version"
# vtsls, VS Code's TypeScript extension as a server (it brings its own TypeScript); its tests are
# skipped, not failed, on a machine without it.
vtsls_version=0.3.0
vtsls --version 2>/dev/null | grep -qF "$vtsls_version" || npm_install_global "@vtsls/language-server@$vtsls_version"
command -v ruff >/dev/null 2>&1 || pip_install ruff
# TypeScript 7's own server (`tsc --lsp`; the native compiler comes as npm's platform package), in
# a folder of its own: the global `typescript` above stays the 5.9 the two servers above drive
# (7 has no tsserver.js). program/lsp's real-server test finds it by CLAUDE_IDE_BRIDGE_TSC7.
ts7_version=7.0.2
ts7_dir="$PWD/target/typescript-$ts7_version"
export CLAUDE_IDE_BRIDGE_TSC7="$ts7_dir/node_modules/.bin/tsc"
"$CLAUDE_IDE_BRIDGE_TSC7" --version 2>/dev/null | grep -qF "$ts7_version" ||
  npm install --prefix "$ts7_dir" --silent --no-audit --no-fund --no-package-lock "typescript@$ts7_version"

step "format"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "lint scripts"
# The suite's own Python (pyflakes' and pycodestyle's errors; long lines allowed) and shell (every
# finding, sourced files followed), with no configuration read from the machine.
git ls-files -z '*.py' | xargs -0 ruff check --isolated --quiet --select E,F --ignore E501
git ls-files -z '*.sh' .ci/run | xargs -0 shellcheck -x -P SCRIPTDIR

step "docs (broken links and other rustdoc warnings fail)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The docs of private items too (what a newcomer reads first: module overviews, links between
# them), and the program's own: its binary shares the engine library's name, so `--workspace`
# leaves it out (cargo documents one of two outputs of the same name).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items --quiet
RUSTDOCFLAGS="-D warnings" cargo doc -p claude-ide-bridge-cli --bin claude-ide-bridge --no-deps \
  --document-private-items --quiet

# Everything below is also copied to a log, to add up the counts at the end; the tests that
# could not run on this machine add a line each to the skips file (tests/support's `skip`), listed
# at the end too.
log=$(mktemp)
skips=$(mktemp)
trap 'rm -f "$log" "$skips"' EXIT
export CLAUDE_IDE_BRIDGE_SKIPS=$skips

step "tests"
cargo test --workspace 2>&1 | tee -a "$log"
# The engine's WebSocket tests again with the text crate's portable path, where the first run
# took the AVX-512 one; a CPU without AVX-512 ran the portable path alone, said in the summary.
CLAUDE_IDE_BRIDGE_NO_AVX512=1 cargo test -p claude-ide-bridge --lib ws:: 2>&1 | tee -a "$log"
for flag in avx512f avx512bw avx512vbmi; do
  if [ "$(uname -m)" = x86_64 ] && ! grep -qw "$flag" /proc/cpuinfo; then
    echo "text crate: its AVX-512 path not tested: this CPU lacks $flag" >>"$skips"
  fi
done

for extra in scripts/test-*.d/*.sh; do
  [ -e "$extra" ] || continue
  step "$extra"
  bash "$extra" 2>&1 | tee -a "$log"
done

# One closing line for the whole suite: cargo's "test result" lines, pytest's summary (e2e) and the
# Autobahn comparisons (any failure above has already stopped the script).
# Then what did not run here: the Rust tests' skips (each named, with why) and pytest's count.
python3 - "$log" "$skips" <<'PY'
import collections, re, sys
passed = failed = pytest_skipped = 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line)
    if not m:
        m = re.search(r"^=+ (\d+) passed(?:, (\d+) failed)?", line)
        s = re.search(r"^=+ .*\b(\d+) skipped", line)
        if m and s:
            pytest_skipped += int(s.group(1))
    if not m:
        m = re.search(r"^autobahn [\w-]+: (\d+) passed, (\d+) failed", line)
    if m:
        passed += int(m.group(1))
        failed += int(m.group(2) or 0)
skips = collections.Counter(l.rstrip("\n") for l in open(sys.argv[2], errors="replace") if l.strip())
for line, n in sorted(skips.items()):
    print(f"skipped here: {line}" + (f" (x{n})" if n > 1 else ""))
if pytest_skipped:
    print(f"skipped here: {pytest_skipped} e2e scenario(s) (pytest's 'SKIPPED' lines above say why)")
print(f"all: {passed} passed, {failed} failed")
PY
echo "took $((SECONDS / 60))m$(printf %02d $((SECONDS % 60)))s"
