"""Issue 30: claude where the code is, the editor where you are, with a container stand-in.

The test makes a network and mount namespace of its own (`unshare -n -m`, its loopback brought up): the
"container". Inside it, the workspace is at another path (the editor's folder bind-mounted on `inside ws`,
the editor's own path hidden under a tmpfs), and the real `claude` and the scripted model endpoint run there
(the endpoint's 127.0.0.1 is the namespace's). The editor is this test, in the host's namespaces, speaking
the stdio line protocol to a bridge it starts *through the transport* `nsenter -t PID -n -m --`, as the Vim
plugin does with `g:claude_ide_bridge_remote` (`--path-map EDITOR=INSIDE`).

Covered: the bridge listens in the namespace only (the host's loopback is refused, the namespace's answers);
claude there finds it by its lock file; claude's edit reaches the editor as an `openDiff` with the editor's
path, is accepted there, and claude writes the file (seen on the editor's side). Then the link drops with a
second diff pending: claude is answered (an error, not a rejection), keeps its own accept prompt, and the
user's Enter there writes the change.

Needs root (unshare, nsenter, mount); CI runs as root. One runtime (smol): the transport is what is tested.

The same with an SSH host (`test_claude_on_an_ssh_host_edits_through_the_editor`): a real sshd (Debian's
openssh-server, on a free port of 127.0.0.1 with throwaway keys, in a mount namespace where the editor's folder is
seen at another path), the real `ssh` as the editor's transport to the bridge and as the user's session running
`claude --ide` on the host; the link dies with its ssh client killed.

Also here (root only too, both runtimes), a pid namespace of claude's own (`unshare -p -f --mount-proc`, the container that shares `~/.claude`
with the host): claude removes the host bridge's live lock file at its start, the bridge writes it again, and
claude connects all the same (`test_claude_in_another_pid_namespace_removes_the_lock_file_and_still_connects`).
"""

import ctypes
import json
import os
import re
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import BRIDGE_BIN, CLAUDE_BIN, Bridge, press_until, text_of, tool_result_text, tool_results, \
    wait_until
from test_scenarios import edit_script, wait_connected


def in_namespace(pid, cwd):
    """The transport: a command run after it runs in the namespace of `pid`, in folder `cwd` there."""
    return ["nsenter", "-t", str(pid), "-n", "-m", f"--wd={cwd}", "--"]


@pytest.fixture
def namespace(sb):
    """A network and mount namespace with its own `lo` (up), where the editor's folder `sb.ws` is seen at
    `inside` and `sb.ws` itself is an empty tmpfs. Yields (pid of a process in it, inside)."""
    if os.geteuid() != 0:
        pytest.skip("the container stand-in needs root (unshare -n -m, nsenter, mount); CI runs as root")
    inside = (sb.root / "inside ws").resolve()
    inside.mkdir()
    holder = subprocess.Popen(
        ["unshare", "-n", "-m", "--propagation", "private", "sh", "-c",
         'ip link set lo up && mount --bind "$1" "$2" && mount -t tmpfs tmpfs "$1" && echo ready && exec sleep 900',
         "sh", str(sb.ws), str(inside)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.strip() == "ready", f"the namespace did not come up: {line!r} {holder.stderr.read()}"
        yield holder.pid, inside
    finally:
        holder.kill()
        holder.wait(5)


def refused_here(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def edit_then_drop_the_link(sb, b, c, path, path_there, drop):
    """claude, where the code is at `path_there`, edits a file: the openDiff reaches the editor (the test, on the
    bridge's stdio through the transport) with the editor's `path`, is accepted there, and claude writes the
    file (seen on the editor's side). Then `drop()` ends the link (true when the bridge's own end was seen) with a
    second diff pending: the bridge answers claude and stops; claude keeps its own accept prompt, and the user's
    Enter there writes the change."""
    # An edit: the openDiff reaches the editor with the editor's path; accepted there, claude writes the file.
    c.submit("Change hello to goodbye in a.txt")
    call = b.wait_event(lambda e: e.get("type") == "tool_call" and e.get("name") == "openDiff",
                        what="the openDiff on stdio")
    args = call["arguments"]
    assert (args["old_file_path"], args["new_file_path"]) == (str(path), str(path)), args
    assert args["new_file_contents"] == "goodbye world\n", args
    wire = b.wait_tool_call("openDiff")
    assert wire["params"]["arguments"]["new_file_path"] == str(path_there), wire
    b.send({"type": "diff_decision", "id": call["id"], "decision": "accept"})
    resp = b.wait_response(wire["id"])
    assert text_of(resp["result"]) == ["FILE_SAVED", "goodbye world\n"], resp
    wait_until(lambda: path.read_text() == "goodbye world\n", what="claude's write, seen by the editor",
               diag=sb.diag)
    turn = sb.model.wait_turn(1, "the model turn after the edit", diag=sb.diag)
    assert any("has been updated successfully" in tool_result_text(t) for t in tool_results(turn["body"]))
    c.wait_screen(r"Edited it\.", what="the end of the first turn")

    # The link drops with a second diff pending (the editor's end of the transport closes, as when ssh or
    # `docker exec` dies): the bridge answers claude and stops; claude keeps its own accept prompt.
    c.submit("Change world to there in a.txt")
    b.wait_event(lambda e: e.get("type") == "tool_call" and e.get("id") != call["id"],
                 what="the second openDiff on stdio")
    c.wait_screen(r"Do you want to make this edit to a\.txt\?", what="claude's own prompt beside the IDE's diff",
                  history=False)
    assert drop(), b.diag()
    wait_until(lambda: not os.path.exists(b.lock_file), 15, "the bridge's lock file removed as it stops",
               diag=sb.diag)
    wait_until(lambda: [line for line in c.debug_lines("IDE diff view failed") if "the editor did not answer" in line],
               what="claude told the editor did not answer", diag=sb.diag)
    c.wait_screen(r"Do you want to make this edit to a\.txt\?", what="claude's own prompt, still there",
                  history=False)
    assert "Rejected update" not in c.screen(), c.screen()
    assert path.read_text() == "goodbye world\n"
    # "1. Yes", in claude's own prompt. The prompt is drawn again when the IDE's diff fails, and a key
    # pressed during that is lost (seen once in CI): pressed again while the prompt is still up, at most
    # three times; the file changes only through that prompt.
    press_until(lambda: c.keys("Enter"),
                lambda: wait_until(lambda: path.read_text() == "goodbye there\n", 10,
                                   "the change written after the user's yes", diag=sb.diag),
                lambda: re.search(r"Do you want to make this edit to a\.txt\?", c.screen()))
    c.wait_screen(r"Edited again\.", what="the end of the second turn")


def test_claude_in_a_container_stand_in_edits_through_the_editor(sb, namespace):
    pid, inside = namespace
    enter = in_namespace(pid, inside)
    path, path_inside = sb.ws / "a.txt", inside / "a.txt"
    path.write_text("hello world\n")
    # The namespace is real: inside, the editor's path is empty and `inside` has the file; here the reverse.
    seen = subprocess.run([*enter, "sh", "-c", 'ls -A "$1" | wc -l; cat "$2"', "sh", str(sb.ws), str(path_inside)],
                          capture_output=True, text=True, timeout=20)
    assert seen.stdout == "0\nhello world\n", seen
    assert not any(inside.iterdir())

    # The model endpoint runs inside too: claude's 127.0.0.1 is the namespace's.
    sb.model.stop()
    sb.model = type(sb.model)(sb, prefix=enter, name="model-ns")
    sb.env["ANTHROPIC_BASE_URL"] = sb.model.url
    sb.model.set_script(edit_script(path_inside, "hello", "goodbye", after="Edited it.")
                        + edit_script(path_inside, "world", "there", after="Edited again."))
    sb.write_client_config([inside])

    # The editor starts the bridge through the transport, with the workspace's inside path and the map.
    b = sb.bridge("smol", stdio=True, transport=enter, workspace=inside,
                  extra_args=["--path-map", f"{sb.ws}={inside}"])
    assert os.readlink(f"/proc/{b.proc.pid}/ns/net") == os.readlink(f"/proc/{pid}/ns/net")
    assert os.readlink(f"/proc/{b.proc.pid}/ns/net") != os.readlink("/proc/self/ns/net")
    # Its port is the namespace's: refused on the host's loopback, answered inside.
    assert refused_here(b.port), f"port {b.port} answers on the host's loopback"
    probe = subprocess.run(
        [*enter, "python3", "-c", "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5)",
         str(b.port)], capture_output=True, text=True, timeout=20)
    assert probe.returncode == 0, probe

    # claude runs inside, in the workspace's inside path, and finds the bridge by its lock file (--ide).
    c = sb.client(command=[*enter, CLAUDE_BIN, "--ide", "--debug-file", str(sb.root / "claude-debug.log")])
    c.wait_ready()
    b.wait_event(lambda e: e.get("type") == "initialized", what="initialized on stdio")
    wait_connected(b)

    # The editor closes its end of the transport (the bridge, seen exiting with 0).
    edit_then_drop_the_link(sb, b, c, path, path_inside, drop=lambda: b.proc.stdin.close() or b.proc.wait(15) == 0)




# --------------------------------------------------------------------------------------------------
# claude in a pid namespace of its own, sharing the lock folder (a container with ~/.claude mounted in)
#
# The real client (2.1.330, read in its code), at the start of each IDE search (an interactive start with --ide
# or with auto-connect on), first removes each lock file of its lock folders whose pid `kill(pid, 0)` cannot
# reach (the port is asked only on WSL). From a pid namespace of its own, the host's bridge's pid does not
# exist, so its live lock file goes. Then, for 30 s, once a second, it reads the folder and connects when
# exactly one lock file's workspaceFolders contain its working directory (its first read comes right after the
# removal, and usually finds nothing).
#
# The counterfactual (not a test: CI cannot run the old binary): before the runtime's watch (commit d8f4eef), the
# removed file stayed removed; every read of claude's 30 s search found no lock file, and claude never connected.
# So did every later claude, in the container or on the host, since nothing wrote the file until the bridge
# restarted. Run once by hand with the binary of d8f4eef's parent: this test failed at its first wait (the folder
# events only `removed`), and left 35 s, claude had made no connection at all (an empty wire log, no "ide" line
# in its debug log), the lock folder empty. Now the bridge sees the removal (inotify on its folder) and writes
# the same file again about 200 ms later: claude's next read, about a second after its first, finds it.

IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x80, 0x100, 0x200
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, 0o2000000


class FolderWatch:
    """inotify on one folder (Linux, through libc): which names were removed and which were written into place
    (renamed there, or linked: a lock file is linked to its name, which fails when one is there), in order. The kernel queues the events, so a removal undone 200 ms later is not missed between two polls."""

    def __init__(self, folder):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if self.libc.inotify_add_watch(self.fd, os.fsencode(folder), IN_DELETE | IN_MOVED_TO | IN_CREATE) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        self.events = []  # ("removed" | "written", name)

    def poll(self):
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.events
            at = 0
            while at + 16 <= len(buf):
                _, mask, _, size = struct.unpack_from("iIII", buf, at)
                name = buf[at + 16:at + 16 + size].rstrip(b"\0").decode(errors="replace")
                at += 16 + size
                if mask & IN_DELETE:
                    self.events.append(("removed", name))
                if mask & (IN_MOVED_TO | IN_CREATE):
                    self.events.append(("written", name))

    def close(self):
        os.close(self.fd)


@pytest.fixture
def pid_namespace():
    """The command prefix that runs what follows in a new pid namespace (its own /proc), the network and the
    files shared; `--kill-child`: the namespace ends with the pane (tmux's SIGHUP ends unshare)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("pid namespaces, and the bridge's lock-folder watch, are Linux's")
    if os.geteuid() != 0:
        pytest.skip("claude in a pid namespace of its own needs root (unshare -p -f --mount-proc); CI runs as root")
    prefix = ["unshare", "-p", "-f", "--mount-proc", "--kill-child"]
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    try:
        probe = subprocess.run([*prefix, "sh", "-c", "echo $$"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        # Not a lack of the machine's: a slow or stuck start is a failure, not a skip.
        pytest.fail("`unshare -p -f --mount-proc` did not finish in 10 s")
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        pytest.skip(f"`unshare -p -f --mount-proc` is not available here (exit {probe.returncode}: "
                    f"{(probe.stderr or probe.stdout).strip()})")
    return prefix


def test_claude_in_another_pid_namespace_removes_the_lock_file_and_still_connects(pid_namespace, sb, runtime):
    b = sb.bridge(runtime)
    lock = Path(b.lock_file)
    assert lock.parent == sb.cfg / "ide", lock
    written = lock.read_text()
    assert json.loads(written)["pid"] == b.proc.pid, written
    watch = FolderWatch(lock.parent)
    try:
        # claude as pid 1 of a new pid namespace (so the bridge's pid is not there for its kill(pid, 0)), with the
        # sandbox's HOME and CLAUDE_CONFIG_DIR (the same lock folder), on the host's loopback, in the workspace.
        c = sb.client(command=[*pid_namespace, CLAUDE_BIN, "--ide", "--debug-file",
                               str(sb.root / "claude-debug.log")])
        c.wait_ready()

        # claude removed the live bridge's lock file (nothing else removes it while the bridge runs), and the
        # bridge wrote it again, linked into place.
        def removed_then_written():
            events = watch.poll()
            if ("removed", lock.name) not in events:
                return None
            return ("written", lock.name) in events[events.index(("removed", lock.name)):]
        wait_until(removed_then_written, 15, f"claude to remove {lock.name} and the bridge to write it again",
                   diag=lambda: f"folder events: {watch.poll()}\n" + sb.diag())
    finally:
        watch.close()

    # claude connects all the same: the handshake, with its own pid in its namespace, 1.
    connected = b.wait_request("ide_connected")
    assert connected["params"]["pid"] == 1, connected
    wait_connected(b)
    assert b.proc.poll() is None, b.diag()
    # The file written again is the same lock file: the same port (its name), pid, token and folders.
    assert lock.read_text() == written, (lock.read_text(), written)
    assert oct(lock.stat().st_mode & 0o777) == oct(0o600), oct(lock.stat().st_mode)


# --------------------------------------------------------------------------------------------------
# claude on an SSH host: a real sshd (Debian's openssh-server), the real ssh client, the real claude


SSHD = "/usr/sbin/sshd"


class Sshd:
    """sshd on a free port of 127.0.0.1, with a throwaway host key and user key and its own config, in a mount
    namespace of its own where `editor`'s files are seen at `there` and `editor` itself is an empty tmpfs: the
    SSH host, where the code is at another path. Its sessions get the sandbox's lock folder (CLAUDE_CONFIG_DIR)
    and a HOME of their own."""

    def __init__(self, sb, editor, there):
        self.dir = sb.root / "ssh"
        self.dir.mkdir()
        for key in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e", "-f", str(self.dir / key)],
                           check=True, capture_output=True, timeout=30)
        shutil.copy(self.dir / "user_key.pub", self.dir / "authorized_keys")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation folder (systemd makes it at boot)
        home = sb.root / "home on the host"
        home.mkdir()
        last = ""
        for _ in range(5):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
            config = self.dir / "sshd_config"
            config.write_text(
                f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.dir}/host_key\n"
                f"AuthorizedKeysFile {self.dir}/authorized_keys\nPidFile none\nStrictModes no\nUsePAM no\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                f'LogLevel ERROR\nSetEnv CLAUDE_CONFIG_DIR="{sb.cfg}" HOME="{home}"\n')
            kind, key = (self.dir / "host_key.pub").read_text().split()[:2]
            (self.dir / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {kind} {key}\n")
            self.proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 'mount --bind "$1" "$2" && mount -t tmpfs tmpfs "$1" && exec "$3" -D -e -f "$4"',
                 "sh", str(editor), str(there), SSHD, str(config)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(self.dir / "sshd.log", "w"))
            for _ in range(200):
                if self.proc.poll() is not None:
                    last = (self.dir / "sshd.log").read_text()
                    break
                out = subprocess.run([*self.words(), "true"], stdin=subprocess.DEVNULL, capture_output=True,
                                     text=True, timeout=20)
                if out.returncode == 0:
                    return
                last = out.stderr
                time.sleep(0.05)
            self.stop()  # the port was taken meanwhile: another one
        raise AssertionError(f"sshd could not start: {last}")

    def words(self):
        """ssh with this test's keys and nothing else, to the host."""
        d = self.dir
        return ["ssh", "-F", "/dev/null", "-i", f"{d}/user_key", "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={d}/known_hosts", "-o", "StrictHostKeyChecking=yes",
                "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-p", str(self.port), "root@127.0.0.1"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


@pytest.fixture
def ssh_host(sb):
    """An SSH host (`Sshd`) where the editor's folder `sb.ws` is `there`. Yields (sshd, there)."""
    if os.geteuid() != 0:
        pytest.skip("the SSH host's mount namespace needs root (unshare -m, mount); CI runs as root")
    if not os.path.exists(SSHD):
        pytest.fail(f"{SSHD} is missing: apt-get install openssh-server (scripts/test-all.d/e2e.sh does)")
    there = (sb.root / "code on the host é").resolve()
    there.mkdir()
    sshd = Sshd(sb, sb.ws, there)
    try:
        yield sshd, there
    finally:
        sshd.stop()


class SshBridge(Bridge):
    """`claude-ide-bridge serve` on the SSH host, started by the editor through `ssh`, which hands the remote
    shell one line: every word is quoted for it."""

    exe = (shlex.quote(BRIDGE_BIN),)
    host_path = staticmethod(lambda p: shlex.quote(str(p)))


def test_claude_on_an_ssh_host_edits_through_the_editor(sb, ssh_host):
    """The person whose `claude` runs on an SSH host while the editor runs where they are: the editor (the test)
    starts the bridge on the host through `ssh` (`serve --stdio --path-map EDITOR=THERE`), the user runs
    `claude --ide` there in an `ssh -t` session; claude finds the bridge by its lock file, its edit reaches the
    editor with the editor's path, is accepted there and written by claude; then the SSH link of the bridge dies
    (its ssh client killed) with a second diff pending: the bridge, told by sshd, answers claude with an error and
    stops, and claude's own prompt decides the change."""
    sshd, there = ssh_host
    path, path_there = sb.ws / "a.txt", there / "a.txt"
    path.write_text("hello world\n")
    seen = subprocess.run([*sshd.words(), f"ls -A {shlex.quote(str(sb.ws))} | wc -l; cat {shlex.quote(str(path_there))}"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)
    assert seen.stdout == "0\nhello world\n", seen  # on the host, the editor's path is empty and `there` has the file
    sb.model.set_script(edit_script(path_there, "hello", "goodbye", after="Edited it.")
                        + edit_script(path_there, "world", "there", after="Edited again."))
    sb.write_client_config([there])

    b = SshBridge(sb, "smol", stdio=True, transport=sshd.words(), workspace=there,
                  extra_args=["--path-map", shlex.quote(f"{sb.ws}={there}")])
    sb.bridges.append(b)
    # The user's ssh session on the host, claude in it (the model endpoint is the host's 127.0.0.1 too).
    keep = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "LANG", "LC_ALL", "no_proxy", "NO_PROXY", "DISABLE_AUTOUPDATER",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")
    env = " ".join(f"{k}={shlex.quote(sb.env[k])}" for k in keep)
    debug = sb.root / "claude-debug.log"
    remote = (f"cd {shlex.quote(str(there))} && exec env {env} {shlex.quote(CLAUDE_BIN)} --ide "
              f"--debug-file {shlex.quote(str(debug))}")
    c = sb.client(command=[*sshd.words(), "-tt", remote])
    c.wait_ready()
    b.wait_event(lambda e: e.get("type") == "initialized", what="initialized on stdio")
    wait_connected(b)
    # The link dies: its ssh client killed, as when the laptop sleeps or the network goes; sshd sees the
    # connection end and closes the bridge's input.
    edit_then_drop_the_link(sb, b, c, path, path_there, drop=lambda: b.proc.kill() or True)
