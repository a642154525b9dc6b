"""Harness for driving the real `claude` CLI against `claude-ide-bridge` in tmux.

Every test gets a `Sandbox`: its own directory with `home/` (HOME), `cfg/` (CLAUDE_CONFIG_DIR), `ws/` (the
served workspace), its own tmux server (`tmux -S <sandbox>/tmux.sock`), its own scripted model endpoint and its own bridge
ports. Nothing is shared between tests, so they can run in parallel.

Assertions poll the client's screen, the bridge's wire log and the model's request log with bounded timeouts
(`wait_until`); a sleep is never an assertion.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CLAUDE_BIN = os.environ.get("E2E_CLAUDE_BIN") or str(HERE / "node_modules" / ".bin" / "claude")
_target = os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target")
BRIDGE_BIN = os.environ.get("E2E_BRIDGE_BIN") or str(Path(_target) / "release" / "claude-ide-bridge")
# The Windows `claude.exe` (npm's @anthropic-ai/claude-code-win32-x64 at the pinned version) and the Windows
# bridge, both run under Wine by test_windows.py (scripts/test-all.d/platforms.sh sets both; unset, those tests
# are skipped).
WIN_CLAUDE = os.environ.get("E2E_WINDOWS_CLAUDE")
WIN_BRIDGE = os.environ.get("E2E_WINDOWS_BRIDGE")
CLIENT_VERSION = json.loads((HERE / "package.json").read_text())["dependencies"]["@anthropic-ai/claude-code"]
API_KEY = "sk-ant-api03-e2e-dummy-key-0123456789abcdefghijklmnopqrstuvwxyz"

# Default bound for one wait. Generous: CI machines are slow and two tests run at once.
TIMEOUT = float(os.environ.get("E2E_TIMEOUT", "30"))


class Timeout(AssertionError):
    pass


def wait_until(fn, timeout=TIMEOUT, what="condition", interval=0.1, diag=None):
    """Poll `fn` until it returns something truthy; return that. Fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except (OSError, ValueError) as e:  # files not there yet, half-written lines
            last_exc = e
        if time.monotonic() >= deadline:
            msg = f"timed out after {timeout:.0f}s waiting for {what}"
            if last_exc:
                msg += f" (last error: {last_exc!r})"
            if diag:
                try:
                    msg += "\n" + diag()
                except Exception as e:  # diagnostics must never hide the real failure
                    msg += f"\n(diagnostics failed: {e!r})"
            raise Timeout(msg)
        time.sleep(interval)


def press_until(press, wait, still_asked, tries=3, pause=0.0):
    """`press()` a key at claude's prompt, then `wait()` (which raises `Timeout`) for what it causes. A key pressed
    while the prompt is being drawn is lost: pressed again while `still_asked()` holds, at most `tries` times, each
    after `pause` seconds. Returns what `wait()` returned."""
    for attempt in range(tries):
        time.sleep(pause)
        press()
        try:
            return wait()
        except Timeout:
            if attempt == tries - 1 or not still_asked():
                raise


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line being written
    except FileNotFoundError:
        pass
    return out


# --------------------------------------------------------------------------------------------------
# tmux


class Tmux:
    """A private tmux server for one test, its socket inside the sandbox (removed with the server)."""

    def __init__(self, socket, env, width=200, height=60):
        self.socket = str(socket)
        self.env = env
        self.width = width
        self.height = height
        self.windows = set()

    def cmd(self, *args, check=True):
        r = subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", *args], env=self.env,
                           capture_output=True, text=True, timeout=20)
        if check and r.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def new_window(self, window, command, cwd, log=None):
        """Run `command` (a shell string) in a new window; the window stays after the command ends."""
        if not self.windows:
            self.cmd("new-session", "-d", "-s", "e2e", "-n", window, "-x", str(self.width), "-y",
                     str(self.height), "-c", str(cwd), "sh", "-c", command)
            self.cmd("set-option", "-g", "remain-on-exit", "on")
            self.cmd("set-option", "-g", "history-limit", "5000")
        else:
            self.cmd("new-window", "-d", "-t", "e2e", "-n", window, "-c", str(cwd), "sh", "-c", command)
        self.windows.add(window)
        if log:
            self.cmd("pipe-pane", "-t", f"e2e:{window}", "-o", f"cat >> {shlex.quote(str(log))}")

    def capture(self, window, history=True):
        args = ["capture-pane", "-p", "-J", "-t", f"e2e:{window}"]
        if history:
            args += ["-S", "-3000"]
        return self.cmd(*args, check=False)

    def keys(self, window, *keys):
        self.cmd("send-keys", "-t", f"e2e:{window}", *keys)

    def text(self, window, text):
        self.cmd("send-keys", "-t", f"e2e:{window}", "-l", text)

    def pane_pid(self, window):
        out = self.cmd("display-message", "-p", "-t", f"e2e:{window}", "#{pane_pid}", check=False).strip()
        return int(out) if out.isdigit() else None

    def pane_dead(self, window):
        return self.cmd("display-message", "-p", "-t", f"e2e:{window}", "#{pane_dead}", check=False).strip() == "1"

    def kill(self):
        self.cmd("kill-server", check=False)
        try:
            os.unlink(self.socket)
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------------------------------
# the scripted model


class FakeModel:
    """`fake_model.py` in a subprocess: answers /v1/messages from `script.json`, logs every request."""

    def __init__(self, sandbox, prefix=(), name="model"):
        """`prefix`: a command that runs the endpoint elsewhere (`nsenter ... --`: in a network namespace,
        where its 127.0.0.1 is the namespace's)."""
        self.dir = sandbox.root / name
        self.dir.mkdir()
        self.script_path = self.dir / "script.json"
        self.log_path = self.dir / "requests.jsonl"
        self.port_file = self.dir / "port"
        self.set_script([])
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, str(HERE / "fake_model.py"), str(self.port_file), str(self.script_path),
             str(self.log_path)],
            stdout=open(self.dir / "stdout.log", "w"), stderr=subprocess.STDOUT)
        self.port = int(wait_until(lambda: self.port_file.read_text().strip(), 10, "the model endpoint's port"))
        self.url = f"http://127.0.0.1:{self.port}"

    def set_script(self, replies):
        tmp = self.script_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"replies": replies}))
        os.replace(tmp, self.script_path)

    def requests(self):
        return read_jsonl(self.log_path)

    def turns(self):
        """Requests of the main conversation (the ones that consume the script)."""
        return [r for r in self.requests() if r.get("main")]

    def wait_turn(self, index, what, diag=None, timeout=TIMEOUT):
        """The main-conversation request that script entry `index` answered, once it has come."""
        return wait_until(lambda: [r for r in self.turns() if r["reply_index"] == index], timeout, what,
                          diag=diag or self.summary)[0]

    def summary(self):
        lines = []
        for r in self.requests():
            msgs = r.get("body", {}).get("messages", [])
            last = msgs[-1] if msgs else {}
            lines.append(f"  {r.get('path')} main={r.get('main')} reply={r.get('reply_index')} "
                         f"last={json.dumps(last)[:300]}")
        return "model requests:\n" + "\n".join(lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def message_texts(body, roles=None):
    """All text in the messages of one request, in order (tool results included). The client (2.1.330) puts
    context such as the IDE selection into a message of role "system", so by default every role counts."""
    out = []
    for m in body.get("messages", []):
        if roles is not None and m.get("role") not in roles:
            continue
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
            continue
        for part in c or []:
            if part.get("type") == "text":
                out.append(part.get("text", ""))
            elif part.get("type") == "tool_result":
                rc = part.get("content")
                if isinstance(rc, str):
                    out.append(rc)
                else:
                    for p in rc or []:
                        if p.get("type") == "text":
                            out.append(p.get("text", ""))
    return out


def turn_text(turn):
    """The text of every message a model request carried, one string."""
    return "\n".join(message_texts(turn["body"]))


def tool_results(body):
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        if m.get("role") == "user" and isinstance(c, list):
            out.extend(p for p in c if p.get("type") == "tool_result")
    return out


def tool_result_text(part):
    rc = part.get("content")
    if isinstance(rc, str):
        return rc
    return "\n".join(p.get("text", "") for p in rc or [] if p.get("type") == "text")


# --------------------------------------------------------------------------------------------------
# the bridge


class WireLog:
    """Reads a `--wire-log` file: `{"t_ms","conn","dir","msg"}` and `{"t_ms","conn","event",...}` lines."""

    def __init__(self, path, diag=None):
        self.wire_path = Path(path)
        if diag is not None:
            self.diag = diag

    def diag(self):
        return "wire (tail):\n" + "\n".join("  " + json.dumps(w)[:400] for w in self.wire()[-25:])

    def wire(self):
        return read_jsonl(self.wire_path)

    def messages(self, direction=None):
        return [w for w in self.wire() if "msg" in w and (direction is None or w.get("dir") == direction)]

    def requests(self, method):
        """Requests/notifications the client sent with this method."""
        return [w["msg"] for w in self.messages("in") if w["msg"].get("method") == method]

    def tool_calls(self, name):
        return [m for m in self.requests("tools/call") if m.get("params", {}).get("name") == name]

    def response_to(self, req_id, conn=None):
        for w in self.messages("out"):
            m = w["msg"]
            if "method" not in m and m.get("id") == req_id and (conn is None or w.get("conn") == conn):
                return m
        return None

    def wait_wire(self, pred, timeout=TIMEOUT, what="a wire message"):
        def find():
            for w in self.wire():
                if pred(w):
                    return w
            return None
        return wait_until(find, timeout, what, diag=self.diag)

    def _wait_method(self, direction, method, timeout, pred, what):
        """The first message going `direction` ("in": from the client) with this method and `pred` true."""
        return self.wait_wire(lambda w: w.get("dir") == direction and w.get("msg", {}).get("method") == method
                              and pred(w["msg"]), timeout, what)["msg"]

    def wait_request(self, method, timeout=TIMEOUT, pred=lambda m: True):
        """A request or notification with this method that the client sent to the bridge."""
        return self._wait_method("in", method, timeout, pred, f"the client to send {method}")

    def wait_sent(self, method, timeout=TIMEOUT, pred=lambda m: True):
        """A request or notification with this method that the bridge sent to the client."""
        return self._wait_method("out", method, timeout, pred, f"the bridge to send {method}")

    def wait_tool_call(self, name, timeout=TIMEOUT, nth=1):
        """The nth tools/call of `name` (1-based)."""
        def find():
            calls = self.tool_calls(name)
            return calls[nth - 1] if len(calls) >= nth else None
        return wait_until(find, timeout, f"tools/call {name} #{nth}", diag=self.diag)

    def wait_response(self, req_id, timeout=TIMEOUT):
        return wait_until(lambda: self.response_to(req_id), timeout, f"the bridge's response to id {req_id}",
                          diag=self.diag)


    def wire_events(self, name):
        return [w for w in self.wire() if w.get("event") == name]


class Bridge(WireLog):
    """`claude-ide-bridge serve`, either as a subprocess (optionally with --stdio) or in a tmux window (TTY).

    The wire log (`--wire-log`) is what the assertions read; stderr goes to `stderr.log`.
    """

    # The program's command, and how a path of the sandbox is written on its command line (the Windows
    # program under Wine has its own: test_windows.py).
    exe = (BRIDGE_BIN,)

    @staticmethod
    def host_path(path):
        return str(path)

    def __init__(self, sandbox, runtime, *, stdio=False, tty=False, on_diff=None, name="bridge",
                 extra_args=(), ide_name=None, env=None, transport=(), workspace=None):
        """`transport`: a command the bridge runs through (`nsenter ... --`, as an editor reaches a remote
        bridge); `workspace`: the folder served (default: the sandbox's)."""
        self.sb = sandbox
        self.runtime = runtime
        self.stdio = stdio
        self.tty = tty
        self.name = name
        self.dir = sandbox.root / name
        self.dir.mkdir(exist_ok=True)
        self.wire_path = self.dir / "wire.jsonl"
        self.stderr_path = self.dir / "stderr.log"
        self.ide_name = ide_name or f"e2e-{runtime}"
        self.events = []
        self.events_lock = threading.Lock()
        self.proc = None
        self.port = None
        self.lock_file = None
        args = [*transport, *self.exe, "serve", "--workspace", self.host_path(workspace or sandbox.ws),
                "--runtime", runtime, "--wire-log", self.host_path(self.wire_path), "--ide-name", self.ide_name]
        if on_diff:
            args += ["--on-diff", on_diff]
        if stdio:
            args.append("--stdio")
        args += list(extra_args)
        self.args = args
        self.env = dict(sandbox.env, **(env or {}))
        self._start()

    def _start(self):
        if self.tty:
            cmd = " ".join(shlex.quote(a) for a in self.args)
            script = self.dir / "run.sh"
            script.write_text("#!/bin/sh\n" + "".join(
                f"export {k}={shlex.quote(v)}\n" for k, v in self.env.items()) + f"exec {cmd}\n")
            script.chmod(0o755)
            self.sb.tmux.new_window(self.name, str(script), self.sb.ws, log=self.stderr_path)
            text = wait_until(lambda: re.search(r"export CLAUDE_CODE_SSE_PORT=(\d+)", self.screen()),
                              20, "the bridge (tty) to print its port", diag=self.diag)
            self.port = int(text.group(1))
            m = re.search(r"lock file: (\S+)", self.screen())
            self.lock_file = m.group(1) if m else None
        else:
            self.proc = subprocess.Popen(
                self.args, env=self.env, cwd=self.sb.ws,
                stdin=subprocess.PIPE if self.stdio else subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.stdio else subprocess.DEVNULL,
                stderr=open(self.stderr_path, "a"))
            if self.stdio:
                threading.Thread(target=self._read_stdout, daemon=True).start()
                ready = self.wait_event(lambda e: e.get("type") == "ready", 20, "the bridge's ready line")
                self.port = int(ready["port"])
                self.lock_file = ready.get("lockFile")
            else:
                m = wait_until(lambda: re.search(r"export CLAUDE_CODE_SSE_PORT=(\d+)", self.stderr()),
                               20, "the bridge to print its port", diag=self.diag)
                self.port = int(m.group(1))
                m = re.search(r"lock file: (\S+)", self.stderr())
                self.lock_file = m.group(1) if m else None

    def _read_stdout(self):
        raw = open(self.dir / "stdout.jsonl", "a")
        for line in self.proc.stdout:
            raw.write(line.decode(errors="replace"))
            raw.flush()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.events_lock:
                self.events.append(ev)

    # stdio host side --------------------------------------------------------------------------

    def send(self, obj):
        assert self.stdio, "send() needs --stdio"
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def get_events(self, type_=None):
        with self.events_lock:
            evs = list(self.events)
        return [e for e in evs if type_ is None or e.get("type") == type_]

    def wait_event(self, pred, timeout=TIMEOUT, what="a bridge event"):
        def find():
            for e in self.get_events():
                if pred(e):
                    return e
            if self.proc is not None and self.proc.poll() is not None:
                raise Timeout(f"the bridge exited with {self.proc.returncode} while waiting for {what}\n"
                              + self.diag())
            return None
        return wait_until(find, timeout, what, diag=self.diag)

    # logs -------------------------------------------------------------------------------------

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def screen(self):
        return self.sb.tmux.capture(self.name) if self.tty else self.stderr()

    def diag(self):
        out = [f"--- bridge {self.name} ({' '.join(self.args)})"]
        if self.proc is not None:
            out.append(f"exit status: {self.proc.poll()}")
        out.append("stderr/screen (tail):\n" + "\n".join(self.screen().splitlines()[-40:]))
        out.append("wire (tail):")
        for w in self.wire()[-25:]:
            out.append("  " + json.dumps(w)[:400])
        if self.stdio:
            out.append("stdio events (tail):")
            for e in self.get_events()[-15:]:
                out.append("  " + json.dumps(e)[:300])
        return "\n".join(out)

    def stop(self, sig=signal.SIGTERM):
        if self.tty:
            pid = self.sb.tmux.pane_pid(self.name)
            if pid and not self.sb.tmux.pane_dead(self.name):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
                wait_until(lambda: self.sb.tmux.pane_dead(self.name), 10, "the bridge (tty) to exit")
            return
        if self.proc and self.proc.poll() is None:
            if self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def text_of(result):
    """The text items of an MCP tools/call result."""
    return [c.get("text") for c in (result or {}).get("content", []) if c.get("type") == "text"]


# --------------------------------------------------------------------------------------------------
# the client


class Client:
    """The real interactive `claude` in a tmux window."""

    def __init__(self, sandbox, *, args=("--ide",), env=None, cwd=None, window="claude", command=None):
        self.sb = sandbox
        self.window = window
        self.cwd = Path(cwd or sandbox.ws)
        full_env = dict(sandbox.env, **(env or {}))
        # The client's own debug log: its MCP "ide" lines (connects, reconnection attempts, 401s) explain
        # most failures. `E2E_CLIENT_DEBUG=0` turns it off.
        self.debug_path = sandbox.root / f"{window}-debug.log"
        debug = [] if os.environ.get("E2E_CLIENT_DEBUG") == "0" else ["--debug-file", str(self.debug_path)]
        cmd = command or [CLAUDE_BIN, *args, *debug]
        script = sandbox.root / f"{window}.sh"
        script.write_text("#!/bin/sh\n" + "".join(
            f"export {k}={shlex.quote(v)}\n" for k, v in full_env.items())
            + "exec " + " ".join(shlex.quote(str(a)) for a in cmd) + "\n")
        script.chmod(0o755)
        self.sb.tmux.new_window(window, str(script), self.cwd)

    def screen(self, history=True):
        return self.sb.tmux.capture(self.window, history)

    def debug_lines(self, needle='MCP server "ide"'):
        try:
            return [line for line in self.debug_path.read_text(errors="replace").splitlines() if needle in line]
        except FileNotFoundError:
            return []

    def diag(self):
        return ("--- client screen:\n" + "\n".join(
            line for line in self.screen().splitlines() if line.strip())[-6000:]
            + "\n--- client debug log, IDE lines (tail):\n" + "\n".join(line[:300] for line in self.debug_lines()[-20:]))

    def wait_screen(self, pattern, timeout=TIMEOUT, what=None, history=True):
        rx = re.compile(pattern)

        def find():
            if self.sb.tmux.pane_dead(self.window):
                raise Timeout(f"the client exited while waiting for {what or pattern}\n" + self.sb.diag())
            return rx.search(self.screen(history))
        return wait_until(find, timeout, what or f"/{pattern}/ on the client's screen", diag=self.sb.diag)

    def wait_ready(self, timeout=TIMEOUT):
        """Wait for the input prompt, answering the first-start questions that may come up."""
        def step():
            s = self.screen(history=False)
            if "Make auto mode your default" in s:
                self.sb.tmux.keys(self.window, "Down")
                time.sleep(0.2)
                self.sb.tmux.keys(self.window, "Enter")
                return None
            return re.search(r"manual mode on|\? for shortcuts", s)
        wait_until(step, timeout, "the client's input prompt", interval=0.3, diag=self.sb.diag)

    def type(self, text):
        self.sb.tmux.text(self.window, text)

    def keys(self, *keys):
        self.sb.tmux.keys(self.window, *keys)

    def input_line(self):
        """The text in the input box (the last line starting with the prompt sign), or None."""
        lines = [line for line in self.screen(history=False).splitlines() if line.startswith("❯")]
        if not lines:
            return None
        # an empty box shows the IDE's selection as a placeholder: "[⧉ In a.txt]", "[⧉ 2 lines selected]"
        return re.sub(r"^\[⧉[^\]]*\]", "", lines[-1][1:].strip()).strip()

    def submit(self, text, timeout=10, empty_first=True):
        """Type into the (empty) input box, wait until the box shows the text, press Enter."""
        if empty_first:
            wait_until(lambda: self.input_line() == "", timeout, "an empty input box", diag=self.sb.diag)
        self.type(text)
        wait_until(lambda: text in (self.input_line() or ""), timeout, f"{text!r} in the input box",
                   diag=self.sb.diag)
        time.sleep(0.3)  # let the input box settle; the next assertion is on what Enter causes
        self.keys("Enter")

    def slash_ide(self, empty_first=True):
        """Open `/ide`, return the dialog's text, close it with Escape."""
        self.submit("/ide", empty_first=empty_first)
        m = self.wait_screen(r"Connect to an IDE[\s\S]*?(Esc to cancel|Enter to select)", 15,
                             "the /ide dialog", history=False)
        text = m.group(0)
        self.keys("Escape")
        self.wait_screen(r"Kept IDE selection|Connect to an IDE", 5, "the dialog to close", history=False)
        wait_until(lambda: "Connect to an IDE" not in self.screen(history=False), 10, "the /ide dialog to close",
                   diag=self.sb.diag)
        return text


# --------------------------------------------------------------------------------------------------
# the sandbox


class Sandbox:
    bridge_class = Bridge  # the program this sandbox's tests run (test_windows.py: the Windows one)

    @staticmethod
    def project_key(folder):
        """How the client names a folder among the projects of its .claude.json."""
        return str(folder)

    def __init__(self, root: Path, name: str):
        self.root = root
        self.home = root / "home"
        self.cfg = root / "cfg"
        self.ws = root / "ws"
        for d in (self.home, self.cfg, self.ws):
            d.mkdir(parents=True, exist_ok=True)
        self.ws = self.ws.resolve()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "CLAUDE", "ANTHROPIC"))}
        env.update({
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.cfg),
            # where the bridge keeps each workspace's port and token for its next start
            "XDG_STATE_HOME": str(root / "state"),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "no_proxy": "127.0.0.1,localhost,::1",
            "NO_PROXY": "127.0.0.1,localhost,::1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        })
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            env.pop(k, None)
        self.env = env
        sock = root / "tmux.sock"
        if len(str(sock)) > 100:  # unix socket paths are limited to about 108 bytes
            sock = Path("/tmp") / f"{name}.sock"
        self.tmux = Tmux(sock, env)
        self.model = FakeModel(self)
        self.env.update({"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": self.model.url})
        self.bridges = []
        self.clients = []
        self.write_client_config([self.ws])

    def write_client_config(self, trusted_dirs):
        projects = {self.project_key(d): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                             "allowedTools": []} for d in trusted_dirs}
        (self.cfg / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": CLIENT_VERSION,
            "theme": "dark",
            "autoUpdates": False,
            "diffTool": "auto",
            # these two keep the "Make auto mode your default?" question away (Client.wait_ready answers
            # it anyway if a version asks again)
            "hasSeenAutoDefaultNudge": True,
            "hasResetAutoModeOptInForDefaultOffer": True,
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
            "projects": projects,
        }, indent=1))
        (self.cfg / "settings.json").write_text(json.dumps({"permissions": {"defaultMode": "default"}}))

    def bridge(self, runtime, **kw):
        b = self.bridge_class(self, runtime, **kw)
        self.bridges.append(b)
        return b

    def client(self, **kw):
        c = Client(self, **kw)
        self.clients.append(c)
        return c

    def diag(self):
        parts = [f"=== sandbox {self.root}"]
        for c in self.clients:
            parts.append(c.diag())
        for b in self.bridges:
            parts.append(b.diag())
        parts.append(self.model.summary())
        return "\n".join(parts)

    def close(self):
        for b in self.bridges:
            try:
                b.stop()
            except Exception:
                pass
        self.tmux.kill()
        self.model.stop()
