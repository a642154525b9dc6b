"""The real Windows `claude` against the Windows bridge, both under Wine.

`claude.exe` is npm's `@anthropic-ai/claude-code-win32-x64` at the version pinned in package.json (the
Windows build of the same client, a Bun program); the bridge is `claude-ide-bridge.exe` built for
`x86_64-pc-windows-gnu`. Both run under Wine in one prefix, so they share its processes, its Winsock on
the host's loopback and its drive `Z:` (the host's `/`): the lock file the Windows bridge writes
(`runningInWindows`, its folder as `Z:\\...`) is read by the Windows client's own code, which connects,
edits through `openDiff` with Windows paths, survives the bridge's restart and runs under `run`.

`scripts/test-all.d/platforms.sh` runs this file after its Wine tests (E2E_WINDOWS_CLAUDE,
E2E_WINDOWS_BRIDGE, WINEPREFIX); elsewhere its tests are skipped.

What Wine changes, and so what these tests do not look at: the client's screen. Wine's console draws the
client's output on the terminal badly (stale lines, pieces of escape sequences), so nothing here is read
from it but the first "manual mode on" that says the client is drawing; every assertion is on the bridge's
wire log and stderr, the model endpoint's requests, the client's own debug log or the files on disk.
Measured under Wine 8.0 (not a client's behaviour on Windows): a reconnection attempt to a port nothing
listens on is not refused but waits out the client's 30 s connection timeout, so a restart's reconnection
comes with the client's next attempt, about 31 s after the loss.
"""

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from harness import CLAUDE_BIN, WIN_BRIDGE, WIN_CLAUDE, Bridge, Sandbox, WireLog, press_until, text_of, \
    tool_result_text, tool_results, turn_text, wait_until
from test_scenarios import answered, assert_handshake, check_saved, edit_script, model_diagnostics_call, \
    selection_scene, wait_settled

pytestmark = pytest.mark.skipif(
    not (WIN_CLAUDE and WIN_BRIDGE),
    reason="the Windows claude and bridge run under Wine from scripts/test-all.d/platforms.sh "
           "(E2E_WINDOWS_CLAUDE, E2E_WINDOWS_BRIDGE)")

WINE = os.environ.get("E2E_WINE", "wine")
# Real language servers for the Windows bridge (platforms.sh fetches them). The folder holding ruff's Windows build
# (`ruff.exe`, from PyPI's win_amd64 wheel):
WIN_RUFF = os.environ.get("E2E_WINDOWS_RUFF")
# The folder holding npm's `pyright-langserver.cmd` shim, pyright's package under `node_modules` and Node's Windows
# build (`node.exe`, which the shim runs from its own folder): platforms.sh makes it from npm's packages.
WIN_PYRIGHT = os.environ.get("E2E_WINDOWS_PYRIGHT")
# A restart's reconnection under Wine: the client's first attempt waits out its 30 s timeout (above).
RECONNECT_TIMEOUT = 90


def winpath(path):
    """A sandbox path as the Windows programs name it: Wine's drive Z: is the host's `/`."""
    return "Z:" + str(path).replace("/", "\\")


def hostpath(text):
    """The host's path of a `Z:\\...` path."""
    assert text[:3].upper() == "Z:\\", text
    return Path(text[2:].replace("\\", "/"))


class WinBridge(Bridge):
    """The Windows `claude-ide-bridge.exe serve` under Wine (`wine` execs it: the process is the program's)."""

    exe = (WINE, WIN_BRIDGE)
    host_path = staticmethod(winpath)

    def lock_path(self):
        return hostpath(self.lock_file)


class WinSandbox(Sandbox):
    """A sandbox whose programs are the Windows ones: the client's config folder named as Windows names it."""

    bridge_class = WinBridge

    @staticmethod
    def project_key(folder):
        # the Windows client's key for a project: its Windows path with forward slashes (with the
        # backslashes it asks again whether the folder is trusted)
        return winpath(folder).replace("\\", "/")

    def __init__(self, root, name):
        super().__init__(root, name)
        self.env.update({"CLAUDE_CONFIG_DIR": winpath(self.cfg), "WINEDEBUG": "-all"})
        # one prefix for every test (platforms.sh's), not one per sandbox HOME: made once, and shared by
        # the programs of a test as one Windows machine's
        self.env.setdefault("WINEPREFIX", str(Path.home() / ".wine"))

    def client(self, args=("--ide",), window="claude", launcher=(WINE,), **kw):
        """`claude.exe` in a tmux window, started by `launcher` (Wine, or the bridge's `run -- `)."""
        debug = winpath(self.root / f"{window}-debug.log")  # where Client reads it
        command = [*launcher, winpath(WIN_CLAUDE), *args, "--debug-file", debug]
        return super().client(command=command, window=window, **kw)

    def windows_processes(self):
        """This sandbox's Windows programs still running, {pid: command line}: Wine gives each process the
        environment of the Windows one, so they are the host's Wine processes whose CLAUDE_CONFIG_DIR is this
        sandbox's."""
        mine = f"CLAUDE_CONFIG_DIR={winpath(self.cfg)}".encode()
        found = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                if mine in env and "wine" in os.path.basename(os.readlink(f"/proc/{pid}/exe")):
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    # not Wine's own services, which the first program that starts the Wine server hands its
                    # environment to, and which serve every test
                    if not cmdline.lower().startswith("c:\\windows\\"):
                        found[int(pid)] = cmdline.strip()
            except OSError:
                continue
        return found

    def close(self):
        super().close()
        # Closing the terminal does not end a Wine process at once (nor does SIGTERM always): end what is left.
        deadline = time.monotonic() + 10
        while (left := self.windows_processes()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)


SANDBOX = WinSandbox  # conftest's `sb` fixture makes these


def prompt(c, text):
    """Type a prompt and press Enter. The screen cannot show that the input box holds it (above): the test
    then waits for the model request that carries it."""
    c.type(text)
    time.sleep(0.5)
    c.keys("Enter")


def wait_client_says(c, text):
    """A line of the client's debug log holding `text`."""
    return wait_until(lambda: c.debug_lines(text), what=f"the client's debug log saying {text!r}", diag=c.sb.diag)


def check_edit_accepted(sb, b, path, expected, turn):
    """The prompted Edit became `openDiff` with the file's Windows path, answered FILE_SAVED; the client
    wrote the file and told the model (script entry `turn` answers the request after the edit)."""
    # The Windows claude under Wine, on a loaded 2-core machine, once took over 30 s from the prompt to the
    # `openDiff` (8 s on a quiet one): its first edit loads much under Wine.
    check_saved(sb, b, path, expected, named=winpath, wait=90)
    after = sb.model.wait_turn(turn, "the model turn after the edit")
    results = [tool_result_text(t) for t in tool_results(after["body"])]
    assert any(f"The file {winpath(path)} has been updated successfully" in r for r in results), results
    wait_until(lambda: f"diff accepted: {winpath(path)}" in b.stderr(), 10, "the bridge's log of the diff",
               diag=b.diag)


def test_windows_client_finds_the_bridge_and_an_edit_is_accepted(sb, runtime):
    path = sb.ws / "a.txt"
    path.write_text("hello world\n")
    sb.model.set_script(edit_script(winpath(path), "hello", "goodbye"))
    b = sb.bridge(runtime, on_diff="accept")
    lock = json.loads(b.lock_path().read_text())
    assert b.lock_path().parent == sb.cfg / "ide", b.lock_file
    assert lock["runningInWindows"] is True and lock["workspaceFolders"] == [winpath(sb.ws)], lock
    c = sb.client()
    c.wait_ready()
    assert_handshake(b)
    wait_client_says(c, "Successfully connected (transport: ws-ide)")
    prompt(c, "Change hello to goodbye in a.txt")
    first = turn_text(sb.model.wait_turn(0, "the prompt's model request", diag=sb.diag))
    # the Windows build, in the workspace by its Windows name
    assert "Platform: win32" in first and f"Primary working directory: {winpath(sb.ws)}" in first, first
    check_edit_accepted(sb, b, path, "goodbye world\n", 1)


def test_windows_restart_reconnects_by_itself(sb):
    """Issue 32, item 2 on Windows: the bridge killed and started again comes back on the same port with the
    same token (its state file under %LOCALAPPDATA%); the client's own retry reaches it."""
    path = sb.ws / "a.txt"
    path.write_text("hello world\n")
    sb.model.set_script(edit_script(winpath(path), "hello", "goodbye"))
    b1 = sb.bridge("smol", on_diff="accept")
    c = sb.client()
    c.wait_ready()
    wait_settled(b1)
    b1.stop(signal.SIGKILL)
    assert b1.lock_path().exists(), "a killed bridge cannot remove its lock file"
    b2 = sb.bridge("smol", name="bridge2", on_diff="accept")
    assert (b2.port, b2.lock_file) == (b1.port, b1.lock_file), b2.diag()
    assert "port and auth token: the last start's, kept in C:\\" in b2.stderr(), b2.diag()
    b2.wait_request("initialize", timeout=RECONNECT_TIMEOUT)
    assert_handshake(b2)
    wait_client_says(c, "WebSocket reconnection successful")
    wait_settled(b2)
    prompt(c, "Change hello to goodbye in a.txt")
    check_edit_accepted(sb, b2, path, "goodbye world\n", 1)
    assert not b1.tool_calls("openDiff")


def test_windows_selection_and_at_mention_from_the_editor(sb):
    """An editor on `serve --stdio` names its files as Windows does; the Windows client gets its selection and
    its at-mention and reads the lines itself."""
    src, b, c, selection = selection_scene(sb, "threads", named=winpath)
    wait_settled(b)
    # The client may drop a selection sent in the first moments after its handshake (docs/e2e.md) and its
    # screen cannot say whether it was taken (above): sent three times, a second apart, as an editor sends the
    # selection on every change.
    for _ in range(3):
        b.send(selection)
        time.sleep(1)
    b.wait_sent("selection_changed")
    prompt(c, "What does the selection do?")
    texts = turn_text(sb.model.wait_turn(0, "the first model turn", diag=sb.diag))
    assert f"The user selected the lines 5 to 6 from {winpath(src)}:" in texts, texts
    assert "return a - b" in texts

    b.send({"type": "at_mentioned", "filePath": winpath(src), "lineStart": 0, "lineEnd": 1})
    b.wait_sent("at_mentioned")
    time.sleep(1)  # the mention goes into the input box; the prompt is typed after it
    prompt(c, " and this?")
    texts = turn_text(sb.model.wait_turn(1, "the second model turn", diag=sb.diag))
    assert "@calc.py#L1-2" in texts, texts
    # the client read the mentioned lines itself, by the file's Windows path, and only those
    assert "Called the Read tool with the following input: " + json.dumps(
        {"file_path": winpath(src)}, separators=(",", ":"))[:-1] \
        in texts, texts
    assert "1\tdef add(a, b):\n2\t    return a + b" in texts, texts


def test_windows_run_launches_a_connected_client(sb):
    """`run -- claude.exe`: the Windows bridge starts the client on its console with the port in its
    environment; an edit is answered in the client's own prompt (`run` defers diffs); /exit ends both, and the
    lock file goes."""
    wire = sb.root / "run-wire.jsonl"
    c = sb.client(args=(), launcher=(WINE, WIN_BRIDGE, "run", "--workspace", winpath(sb.ws), "--runtime", "threads",
                                     "--wire-log", winpath(wire), "--ide-name", "e2e-run-win", "--"))
    c.wait_ready()
    w = WireLog(wire, diag=sb.diag)
    assert_handshake(w)
    wait_client_says(c, "Successfully connected (transport: ws-ide)")
    # `run` decides no diff itself (defer): the edit is answered in claude's own prompt, and the pending
    # openDiff ends with claude's close_tab. The screen cannot show the prompt (above): Enter (its `1. Yes`) is
    # pressed once the openDiff waits, and again while no close_tab came (a key pressed while the prompt is being
    # drawn is lost).
    path = sb.ws / "a.txt"
    path.write_text("hello world\n")
    sb.model.set_script(edit_script(winpath(path), "hello", "goodbye"))
    prompt(c, "Change hello to goodbye in a.txt")
    call = w.wait_tool_call("openDiff", timeout=60)
    close = press_until(lambda: c.keys("Enter"), lambda: w.wait_tool_call("close_tab", timeout=8), lambda: True,
                        tries=5, pause=2)
    tab = call["params"]["arguments"]["tab_name"]
    assert close["params"]["arguments"]["tab_name"] == tab, close
    assert text_of(w.wait_response(call["id"])["result"]) == ["DIFF_REJECTED", tab]
    wait_until(lambda: path.read_text() == "goodbye world\n", 30, "the proposal written by claude",
               diag=sb.diag)
    after = sb.model.wait_turn(1, "the model turn after the edit", diag=sb.diag)
    results = [tool_result_text(t) for t in tool_results(after["body"])]
    assert any(f"The file {winpath(path)} has been updated successfully" in r for r in results), results
    locks = list((sb.cfg / "ide").glob("*.lock"))
    assert len(locks) == 1, locks
    lock = json.loads(locks[0].read_text())
    assert lock["ideName"] == "e2e-run-win" and lock["runningInWindows"] is True, lock
    running = sb.windows_processes().values()
    assert any("claude-ide-bridge.exe run" in p for p in running) and any(
        p.startswith(winpath(WIN_CLAUDE)) for p in running), running
    prompt(c, "/exit")
    wait_until(lambda: sb.tmux.pane_dead(c.window), 30, "claude and run to exit", diag=sb.diag)
    assert not list((sb.cfg / "ide").glob("*.lock")), "run left its lock file behind"
    w.wait_wire(lambda e: e.get("event") == "disconnected", what="the client's disconnect")
    wait_until(lambda: not sb.windows_processes(), 10, "no Windows program of this test left running",
               diag=lambda: f"left: {sb.windows_processes()}")


@pytest.mark.skipif(not (WIN_RUFF and WIN_PYRIGHT),
                    reason="needs ruff's and pyright's Windows builds (E2E_WINDOWS_RUFF, E2E_WINDOWS_PYRIGHT: platforms.sh)")
def test_windows_edit_gets_real_language_servers_new_diagnostics(sb):
    """Diagnostics on Windows from real language servers, the two a Python user runs together: pyright (npm's
    package behind npm's own `.cmd` shim, run by Node's Windows build) and ruff's own Windows build (`ruff
    server`), both found on the Windows `PATH` by the Windows bridge; and the Windows client's own questions
    around an edit: its baseline `getDiagnostics {uri}` with `file://` and the Windows path before it writes the
    file, its `{}` after, which must name the file as the client asked for the client to match it, and both
    servers' new findings in the model's next request, without the error the file already had. The file is in a
    folder with a space and an `é` in its name, as under `C:\\Users\\John Smith`: a URI written by the book
    (`my%20app%20%C3%A9`) is not matched by the client."""
    (sb.ws / "my app é").mkdir()
    path = sb.ws / "my app é" / "app.py"
    # An error the file already has (pyright's), below an edit that keeps the line count: the client compares
    # ranges, so it is not new.
    path.write_text('import sys\n\nprint(sys.argv)\nLIMIT: str = 5\n')
    sb.model.set_script(edit_script(winpath(path), "import sys\n\nprint(sys.argv)\n",
                                    "import os, sys\n\nprint(sys.argv + 1)\n"))
    # Node's Windows build refuses to start on what Wine 8.0 reports by default (Windows 7) unless told not to check.
    env = {"WINEPATH": f"{winpath(Path(WIN_PYRIGHT))};{winpath(Path(WIN_RUFF))}", "NODE_SKIP_PLATFORM_CHECK": "1"}
    # pyright's first check under Wine takes seconds: the accept waits for it (--lsp-start-wait).
    b = sb.bridge("threads", on_diff="accept", env=env, extra_args=["--lsp-start-wait", "60s"])
    c = sb.client()
    c.wait_ready()
    assert_handshake(b)
    wait_client_says(c, "Successfully connected (transport: ws-ide)")
    prompt(c, "Import os in app.py and add one")
    check_edit_accepted(sb, b, path, 'import os, sys\n\nprint(sys.argv + 1)\nLIMIT: str = 5\n', 1)
    asked = "file://" + winpath(path)  # the Windows client's spelling: `file://Z:\...\app.py`
    calls = wait_until(lambda: (lambda cs: cs if len(cs) >= 2 else None)(b.tool_calls("getDiagnostics")),
                       what="the client's two questions around the edit", diag=sb.diag)
    baseline, after = calls[:2]
    assert baseline["params"]["arguments"] == {"uri": asked}, baseline
    before = json.loads(text_of(b.wait_response(baseline["id"], timeout=60)["result"])[0])
    assert [e["uri"] for e in before] == [asked], before
    old = [(d.get("source"), d.get("code")) for d in before[0]["diagnostics"] if d.get("severity") == "Error"]
    assert old == [("Pyright", "reportAssignmentType")], before
    assert after["params"]["arguments"] == {}, after
    found = json.loads(text_of(b.wait_response(after["id"], timeout=60)["result"])[0])
    mine = {(d.get("source"), d.get("code")) for e in found if e["uri"] == asked for d in e["diagnostics"]}
    assert {("Ruff", "F401"), ("Pyright", "reportOperatorIssue"), ("Pyright", "reportAssignmentType")} <= mine, found
    texts = turn_text(sb.model.wait_turn(1, "the model turn after the edit", diag=sb.diag))
    block = re.search(r"<new-diagnostics>[\s\S]*?</new-diagnostics>", texts)
    assert block and "app.py" in block.group(0), texts[-3000:]
    assert "[F401] (Ruff)" in block.group(0) and "[reportOperatorIssue] (Pyright)" in block.group(0), block.group(0)
    assert "reportAssignmentType" not in block.group(0), block.group(0)
    # Killed, the bridge takes its servers with it (each server's Job Object, closed with it): cmd.exe running the
    # shim, node.exe running pyright, ruff.exe.
    def servers():
        return {pid: p for pid, p in sb.windows_processes().items()
                if re.search(r"\b(cmd|node|ruff)\.exe\b", p, re.IGNORECASE)}
    assert servers(), sb.windows_processes()
    b.stop(signal.SIGKILL)
    wait_until(lambda: not servers(), 15, "the language servers gone with the killed bridge",
               diag=lambda: f"left: {servers()}")


# WSL's `wslpath` as the WSL client runs it (`-w` before an `openDiff`, `-u` for a lock file's folder), for the
# drives WSL mounts under /mnt; anything else is refused as WSL's refuses what it cannot convert.
WSLPATH = r"""#!/bin/sh
case "$1:$2" in
  -w:/mnt/[a-z]/*) rest="${2#/mnt/?}"; printf '%s:%s\n' "$(printf %s "$2" | cut -c6 | tr a-z A-Z)" \
                     "$(printf %s "$rest" | tr / '\\')" ;;
  -u:[A-Za-z]:\\*) rest="${2#?:}"; printf '/mnt/%s%s\n' "$(printf %s "$2" | cut -c1 | tr A-Z a-z)" \
                     "$(printf %s "$rest" | tr '\\' /)" ;;
  *) echo "wslpath: $2: Invalid argument" >&2; exit 1 ;;
esac
"""


# What a claude in WSL against the Windows bridge needs: the Linux client, and root for WSL's drive mount.
needs_linux_claude = pytest.mark.skipif(
    not Path(CLAUDE_BIN).exists(),
    reason="needs the Linux claude (scripts/test-all.d/e2e.sh installs it: npm install --prefix tests/e2e)")
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="WSL's drive mount needs a mount namespace (unshare -m, mount); CI runs as root")


def windows_profile(sb):
    """%USERPROFILE% of the Windows side, whose .claude\\ide the Windows bridge writes its lock file to (the
    bridge's CLAUDE_CONFIG_DIR: `env` for `sb.bridge`)."""
    win_home = sb.root / "winhome"
    (win_home / ".claude").mkdir(parents=True)
    return win_home, {"CLAUDE_CONFIG_DIR": winpath(win_home / ".claude")}


def in_wsl(path):
    """A sandbox path as the client in WSL names it: Wine's drive Z: mounted where WSL mounts drives."""
    return Path("/mnt/z" + str(path))


def wsl_client(sb, b, win_home):
    """The real Linux `claude --ide` as WSL runs it, in the workspace by its WSL path: told it is in WSL as WSL
    tells it (`WSL_DISTRO_NAME`), in a mount namespace where the Windows drive the workspace is on (Wine's Z:) is
    mounted where WSL mounts it (`/mnt/z`), with `USERPROFILE` handed over from Windows (WSLENV) and a stand-in for
    WSL's `wslpath`; ready, and connected to the Windows bridge `b`, found by its lock file under the profile."""
    assert b.lock_path().parent == win_home / ".claude" / "ide", b.lock_file
    tools = sb.root / "wsl-bin"
    tools.mkdir()
    (tools / "wslpath").write_text(WSLPATH)
    (tools / "wslpath").chmod(0o755)
    # The Linux client's own configuration, its project the workspace by its WSL path.
    config = json.loads((sb.cfg / ".claude.json").read_text())
    config["projects"] = {str(in_wsl(sb.ws)): next(iter(config["projects"].values()))}
    (sb.cfg / ".claude.json").write_text(json.dumps(config))
    debug = sb.root / "claude-debug.log"  # where Client reads it (the Linux client: not WinSandbox.client)
    mount = ('mount -t tmpfs tmpfs /mnt && mkdir -p "/mnt/z$1" && mount --bind "$1" "/mnt/z$1" && cd "/mnt/z$2" '
             '&& shift 2 && exec "$@"')
    c = Sandbox.client(sb, command=["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh",
                                    str(sb.root), str(sb.ws), CLAUDE_BIN, "--ide", "--debug-file", str(debug)],
                       env={"WSL_DISTRO_NAME": "Debian", "USERPROFILE": winpath(win_home),
                            "CLAUDE_CONFIG_DIR": str(sb.cfg), "PATH": f"{tools}:{os.environ['PATH']}",
                            # The client would first try the machine's default gateway (WSL 2's NAT), then
                            # 127.0.0.1, where mirrored networking has the Windows bridge: the tests use loopback
                            # only.
                            "CLAUDE_CODE_IDE_HOST_OVERRIDE": "127.0.0.1"})
    c.wait_ready()
    assert_handshake(b)
    return c


def wsl_mention_reaches_the_model(sb, b, c, src, first, turn, ask):
    """The editor's at-mention of `src`'s lines `first`+1 and `first`+2 went to the client in WSL by the file's WSL
    path and shows in its input box; with `ask` typed after it, it reaches the model (turn `turn`) with the client's
    own Read of those lines, and only those, by that path."""
    sent = b.wait_sent("at_mentioned", pred=lambda m: m["params"].get("lineStart") == first)["params"]
    assert sent["filePath"] == str(in_wsl(src)), sent
    tag = f"@{src.name}#L{first + 1}-{first + 2}"
    wait_until(lambda: tag in c.screen(history=False), 10, f"{tag} in the input box", diag=sb.diag)
    prompt(c, ask)
    texts = turn_text(sb.model.wait_turn(turn, f"the model turn with {tag}", diag=sb.diag))
    assert tag in texts, texts
    assert "Called the Read tool with the following input: " + json.dumps(
        {"file_path": str(in_wsl(src))}, separators=(",", ":"))[:-1] in texts, texts
    lines = src.read_text().splitlines()[first:first + 2]
    assert "\n".join(f"{first + 1 + i}\t{line}" for i, line in enumerate(lines)) in texts, texts


@pytest.mark.skipif(not WIN_RUFF, reason="needs ruff's Windows build (E2E_WINDOWS_RUFF: platforms.sh)")
@needs_linux_claude
@needs_root
def test_wsl_claude_edits_through_a_windows_bridge(sb):
    """`claude` run in WSL against a bridge running on Windows (the editor's side), as WSL 2's mirrored networking
    lets it connect (`wsl_client`). It finds the Windows bridge's lock file under the Windows profile, takes its
    `Z:\\...` folder for its own working directory (`/mnt/z/...`), and edits through `openDiff` with the Windows
    path; its questions around the edit name the file by its WSL path (`file:///mnt/z/...`), which the bridge reads
    as the Windows file: the baseline holds the file's old finding (not `[]`, which would have every old finding
    reported as new), and the model is told only the edit's new one."""
    win_home, bridge_env = windows_profile(sb)
    path = sb.ws / "app.py"
    path.write_text('import sys\n\nprint("hi")\n')  # ruff's F401, which the file already has
    sb.model.set_script(edit_script(in_wsl(path), 'print("hi")', "print(undefined_name)"))
    b = sb.bridge("threads", on_diff="accept", extra_args=["--lsp-start-wait", "60s"],
                  env={"WINEPATH": winpath(Path(WIN_RUFF)), **bridge_env})
    c = wsl_client(sb, b, win_home)
    prompt(c, "Print an undefined name in app.py")
    first = turn_text(sb.model.wait_turn(0, "the prompt's model request", diag=sb.diag))
    assert "Platform: linux" in first and f"Primary working directory: {in_wsl(sb.ws)}" in first, first
    check_saved(sb, b, path, 'import sys\n\nprint(undefined_name)\n', named=winpath)
    asked = f"file://{in_wsl(path)}"  # the WSL client's own spelling, not converted
    calls = wait_until(lambda: (lambda cs: cs if len(cs) >= 2 else None)(b.tool_calls("getDiagnostics")),
                       what="the client's two questions around the edit", diag=sb.diag)
    baseline, after = calls[:2]
    assert baseline["params"]["arguments"] == {"uri": asked}, baseline
    before = json.loads(text_of(b.wait_response(baseline["id"], timeout=60)["result"])[0])
    assert [(e["uri"], [d.get("code") for d in e["diagnostics"]]) for e in before] == [(asked, ["F401"])], before
    assert after["params"]["arguments"] == {}, after
    found = json.loads(text_of(b.wait_response(after["id"], timeout=60)["result"])[0])
    assert {d.get("code") for e in found if e["uri"] == asked for d in e["diagnostics"]} == {"F401", "F821"}, found
    texts = turn_text(sb.model.wait_turn(1, "the model turn after the edit", diag=sb.diag))
    block = re.search(r"<new-diagnostics>[\s\S]*?</new-diagnostics>", texts)
    assert block and "[F821] (Ruff)" in block.group(0) and "F401" not in block.group(0), texts[-3000:]


@needs_linux_claude
@needs_root
def test_wsl_claude_gets_the_windows_editors_selection_and_at_mention(sb):
    """An editor on Windows (`serve --stdio`, the test) names its files as Windows does; a claude in WSL
    (`wsl_client`) reads no `Z:\\...` path. Its `ide_connected` pid is no Windows process, so the bridge sends it
    the selection and the at-mention by the path WSL mounts the drive at: the selection's text reaches the model
    under `/mnt/z/...`, and the client reads the mentioned lines itself. (Before, it was sent `Z:\\...`: the model
    was told the selection came from `Z:\\...\\calc.py`, the mention became `@Z:\\...` and no line was read.)
    The model's own `getDiagnostics` names the editor's file by that path too. An at-mention the editor made
    before the client started waits in the bridge until the client is ready for it, and goes by that path too: the
    bridge knows where the client runs by then."""
    win_home, bridge_env = windows_profile(sb)
    src = sb.ws / "calc.py"
    src.write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    sb.model.set_script([{"text": "Noted the early mention."}, {"text": "Noted the selection."},
                         {"text": "Noted the mention."},
                         {"tool_use": {"name": "mcp__ide__getDiagnostics", "input": {}}}, {"text": "Read them."}])
    b = sb.bridge("threads", stdio=True, env=bridge_env)
    b.send({"type": "at_mentioned", "filePath": winpath(src), "lineStart": 4, "lineEnd": 5})  # no client yet
    c = wsl_client(sb, b, win_home)
    b.wait_event(lambda e: e.get("type") == "initialized", what="initialized on stdio")
    wait_settled(b)
    wait_until(lambda: "is a claude in WSL" in b.stderr(), 10, "the bridge saying the client is in WSL",
               diag=b.diag)
    wsl_mention_reaches_the_model(sb, b, c, src, 4, 0, " what is it?")
    wait_until(lambda: "Noted the early mention." in c.screen(history=False), 30, "the model's answer",
               diag=sb.diag)
    selection = {"type": "selection_changed", "filePath": winpath(src), "text": "def sub(a, b):\n    return a - b",
                 "selection": {"start": {"line": 4, "character": 0}, "end": {"line": 5, "character": 16}}}
    # sent until the client shows it (it may drop one sent in the first moments after its handshake)
    press_until(lambda: b.send(selection),
                lambda: wait_until(lambda: "2 lines selected" in c.screen(history=False), 3, "the selection shown"),
                lambda: True, 5)
    sent = b.wait_sent("selection_changed")["params"]
    assert (sent["filePath"], sent["fileUrl"]) == (str(in_wsl(src)), f"file://{in_wsl(src)}"), sent
    prompt(c, "What does the selection do?")
    texts = turn_text(sb.model.wait_turn(1, "the selection's model turn", diag=sb.diag))
    assert f"The user selected the lines 5 to 6 from {in_wsl(src)}:" in texts, texts
    assert "return a - b" in texts

    b.send({"type": "at_mentioned", "filePath": winpath(src), "lineStart": 0, "lineEnd": 1})
    wsl_mention_reaches_the_model(sb, b, c, src, 0, 2, " and this?")

    # The editor's diagnostics for the file, under its Windows URI; the model asks for every file's.
    b.send({"type": "diagnostics", "uri": "file:///" + winpath(src).replace("\\", "/"), "diagnostics": [
        {"message": "sub is never used", "severity": "Warning", "source": "editor",
         "range": {"start": {"line": 4, "character": 4}, "end": {"line": 4, "character": 7}}}]})
    assert b.wait_sent("diagnostics_changed")["params"]["uri"] == f"file://{in_wsl(src)}"
    prompt(c, "Any problems?")
    body, msgs = answered(b, model_diagnostics_call(b, c, 1))
    assert [(e["uri"], msgs) for e in body] == [(f"file://{in_wsl(src)}", ["sub is never used"])], body
    results = [tool_result_text(t) for t in tool_results(sb.model.wait_turn(4, "the turn after getDiagnostics",
                                                                            diag=sb.diag)["body"])]
    assert any(f"file://{in_wsl(src)}" in r for r in results), results
