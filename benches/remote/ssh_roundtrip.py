#!/usr/bin/env python3
"""What an ssh transport adds to an openDiff accepted in the editor (issue 30), against local --stdio.

Two bridges run side by side, `claude-ide-bridge serve --stdio`: one started here, one started
through the real `ssh` client on a real sshd (Debian's openssh-server, started by this script on a
free port of 127.0.0.1 with throwaway keys, as the Vim plugin's tests do). For each, this script is
both ends: the editor (it reads the bridge's `tool_call` lines and answers each openDiff with a
`diff_decision` accept at once) and claude (a WebSocket client, Python `websockets`, that calls
`openDiff` and waits for FILE_SAVED). The calls alternate between the two bridges, so that both
see the same machine load; the report is the median (and p90) per bridge over the calls, and the
difference of the medians (and the median of the per-call differences, each ssh call against the
local one just before it): what the ssh transport adds to a round trip.

Usage: benches/remote/ssh_roundtrip.py [--bin target/release/claude-ide-bridge] [--calls 50]
Needs root (sshd), openssh-server and python3-websockets. Results: BENCHMARKS.md, "Remote".
"""
import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from websockets.sync.client import connect


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sshd(d: Path, config_dir: Path):
    for key in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    os.makedirs("/run/sshd", exist_ok=True)
    home = d / "home"
    home.mkdir()
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPidFile none\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nLogLevel ERROR\n"
        f'SetEnv CLAUDE_CONFIG_DIR="{config_dir}" HOME="{home}"\n'
    )
    kind, key = (d / "host_key.pub").read_text().split()[:2]
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {kind} {key}\n")
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")])
    ssh = ["ssh", "-F", "/dev/null", "-i", f"{d}/user_key", "-o", "IdentitiesOnly=yes",
           "-o", f"UserKnownHostsFile={d}/known_hosts", "-o", "StrictHostKeyChecking=yes",
           "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-p", str(port), "root@127.0.0.1"]
    for _ in range(100):
        if subprocess.run(ssh + ["true"], stdin=subprocess.DEVNULL).returncode == 0:
            return sshd, ssh
        time.sleep(0.05)
    sshd.kill()
    sys.exit("sshd did not start")


class Bridge:
    """A bridge on --stdio, this script playing its editor (accepts every openDiff at once)."""

    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        ready = json.loads(self.proc.stdout.readline())
        assert ready["type"] == "ready", ready
        self.port = ready["port"]
        token = json.loads(Path(ready["lockFile"]).read_text())["authToken"]
        threading.Thread(target=self.editor, daemon=True).start()
        # entered by hand: the connection lives as long as this object
        self.ws = connect(f"ws://127.0.0.1:{self.port}/", subprotocols=["mcp"],
                          additional_headers={"X-Claude-Code-Ide-Authorization": token},
                          max_size=None).__enter__()
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def editor(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("type") == "tool_call" and msg.get("name") == "openDiff":
                answer = {"type": "diff_decision", "id": msg["id"], "decision": "accept"}
                self.proc.stdin.write((json.dumps(answer) + "\n").encode())
                self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.ws.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                 "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                return msg

    def open_diff(self, path, n):
        t0 = time.perf_counter()
        r = self.request("tools/call", {"name": "openDiff", "arguments": {
            "old_file_path": path, "new_file_path": path,
            "new_file_contents": f"call {n}\n", "tab_name": f"tab {n}"}})
        dt = time.perf_counter() - t0
        assert r["result"]["content"][0]["text"] == "FILE_SAVED", r
        return dt

    def stop(self):
        self.ws.close()
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/claude-ide-bridge")
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    binary = str(Path(args.bin).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ws, config = tmp / "ws", tmp / "config"
        ws.mkdir()
        config.mkdir()
        (tmp / "ssh").mkdir()
        path = str(ws / "a.txt")
        Path(path).write_text("before\n")
        sshd, ssh = start_sshd(tmp / "ssh", config)
        serve = [binary, "serve", "--stdio", "--workspace", str(ws), "--no-lsp"]
        # The local bridge keeps its state (port and token) in the temporary folder too, as the
        # remote one does under its HOME: nothing of the user's is written.
        env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config), HOME=str(tmp),
                   XDG_STATE_HOME=str(tmp / "state"))
        try:
            local = Bridge(serve, env)
            remote = Bridge(ssh + [shlex.join(serve)], env)
            times = {"local": [], "ssh": []}
            for n in range(args.calls + 5):  # the first 5 of each warm up, not counted
                for name, b in (("local", local), ("ssh", remote)):
                    dt = b.open_diff(path, n)
                    if n >= 5:
                        times[name].append(dt)
            local.stop()
            remote.stop()
        finally:
            sshd.kill()
            sshd.wait()
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    for k, v in times.items():
        p90 = sorted(v)[int(len(v) * 0.9) - 1] * 1e3
        print(f"{k:5}: median {med[k]:.3f} ms, p90 {p90:.3f} ms over {len(v)} openDiff round trips")
    print(f"ssh adds {med['ssh'] - med['local']:.3f} ms to the median round trip "
          f"({med['ssh'] / med['local']:.2f}x local --stdio)")
    # each ssh call against the local call just before it: the same moment's machine load
    diffs = sorted((s - loc) * 1e3 for loc, s in zip(times["local"], times["ssh"]))
    n = len(diffs)
    print(f"paired, ssh - local per call: median {statistics.median(diffs):.3f} ms "
          f"(p10 {diffs[max(n // 10 - 1, 0)]:.3f} ... p90 {diffs[max(n * 9 // 10 - 1, 0)]:.3f} ms)")


if __name__ == "__main__":
    main()
