#!/usr/bin/env python3
"""Memory and another client's wait while clients flood the bridge with large reads.

The abuse audit's clients (2026-12-06): CLIENTS connections each ask for a 9 MiB file
(`readFile`) every 20 ms for SECS seconds and never read (a 4 KiB receive buffer), while one more
connection reads a 3-byte file every 200 ms and waits for each answer. For each binary given, in
turn, in one run (so that they see the same machine): the bridge's peak resident memory (VmHWM),
its resident memory at rest before and 2 s after, and the small reads' wait (median and longest).
Each bridge is `serve --no-lsp` on a workspace of its own, started and stopped by this script.

With `--flood list`, the CLIENTS connections instead send `tools/list` requests (which the
engine answers itself, 60 bytes in, kilobytes out) as fast as the bridge reads them, and never
read the answers.

Usage: benches/flood/large_reads.py BIN [BIN ...] [--clients 8] [--secs 20] [--runtime threads]
       [--flood read|list]
Linux (/proc). Results: BENCHMARKS.md, "Flood of large reads".
"""
import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time


def frame(payload: bytes) -> bytes:
    """A masked text frame, as a client sends."""
    mask = b"\x01\x02\x03\x04"
    n = len(payload)
    head = b"\x81" + (bytes([0x80 | n]) if n < 126 else b"\xfe" + struct.pack(">H", n))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def request(n: int, method: str, params: dict) -> bytes:
    return frame(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode())


def read_frame(s: socket.socket, buf: bytes):
    """The next frame's payload and what is left after it."""
    while True:
        if len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126 and len(buf) >= 4:
                n, off = struct.unpack(">H", buf[2:4])[0], 4
            elif n == 127 and len(buf) >= 10:
                n, off = struct.unpack(">Q", buf[2:10])[0], 10
            if off > 2 or n < 126:
                if len(buf) >= off + n:
                    return buf[off:off + n], buf[off + n:]
        chunk = s.recv(1 << 16)
        if not chunk:
            raise EOFError("the bridge closed the connection")
        buf += chunk


class Bridge:
    def __init__(self, binary: str, runtime: str):
        self.dir = tempfile.TemporaryDirectory(prefix="large-reads-")
        ws, home = os.path.join(self.dir.name, "ws"), os.path.join(self.dir.name, "home")
        os.makedirs(ws)
        os.makedirs(home)
        with open(os.path.join(ws, "big.txt"), "w") as f:
            f.write("0123456789abcdef\n" * (9 * 1024 * 1024 // 17))
        with open(os.path.join(ws, "small.txt"), "w") as f:
            f.write("hi\n")
        env = dict(os.environ, HOME=home, CLAUDE_CONFIG_DIR=os.path.join(home, ".claude"), NO_COLOR="1")
        env.pop("XDG_STATE_HOME", None)
        self.proc = subprocess.Popen(
            [os.path.abspath(binary), "serve", "--runtime", runtime, "--no-lsp", ws],
            cwd=ws, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        lock = None
        while lock is None:
            line = self.proc.stderr.readline()
            if not line:
                sys.exit(f"{binary}: the bridge ended before it wrote its lock file")
            if "lock file: " in line:
                lock = line.split("lock file: ", 1)[1].strip()
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        with open(lock) as f:
            self.token = json.load(f)["authToken"]
        self.port = int(os.path.basename(lock).split(".")[0])

    def connect(self, rcvbuf=None):
        """An initialized MCP connection, and what came after the upgrade's head."""
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", self.port))
        s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: Upgrade\r\n"
                   "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   f"X-Claude-Code-Ide-Authorization: {self.token}\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
        head, buf = buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            sys.exit(f"upgrade refused: {head[:80]!r}")
        s.sendall(request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "large-reads", "version": "1"}}))
        s.sendall(frame(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()))
        return s, buf

    def memory_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.dir.cleanup()


def run(binary: str, clients: int, secs: float, runtime: str, flood: str) -> dict:
    bridge = Bridge(binary, runtime)
    rest_kb = bridge.memory_kb()[0]
    stop = time.time() + secs
    waits = []

    dropped = []

    def flooder():
        try:
            s, _ = bridge.connect(rcvbuf=4096)
            n = 0
            if flood == "list":
                # Sent until the bridge stops taking them (its reading paused, and the socket
                # buffers full), then held open, unread, until the end.
                s.settimeout(1)
                while time.time() < stop:
                    chunk = b"".join(request(n + i, "tools/list", {}) for i in range(1, 101))
                    n += 100
                    try:
                        s.sendall(chunk)
                    except TimeoutError:
                        break
                time.sleep(max(0, stop - time.time()))
                return
            while time.time() < stop:
                n += 1
                s.sendall(request(n, "readFile", {"path": "big.txt"}))
                time.sleep(0.02)
        except OSError:
            dropped.append(1)  # dropped: its output queue was full

    def reader():
        s, buf = bridge.connect()
        s.settimeout(60)
        n = 0
        while time.time() < stop:
            n += 1
            start = time.time()
            s.sendall(request(n, "readFile", {"path": "small.txt"}))
            while True:
                msg, buf = read_frame(s, buf)
                answer = json.loads(msg)
                if answer.get("id") == n:
                    assert "result" in answer, answer
                    break
            waits.append((time.time() - start) * 1000)
            time.sleep(0.2)

    threads = [threading.Thread(target=flooder) for _ in range(clients)]
    threads.append(threading.Thread(target=reader))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(2)
    after_kb, peak_kb = bridge.memory_kb()
    bridge.stop()
    return {"binary": binary, "runtime": runtime, "clients": clients, "rest_kb": rest_kb,
            "flood": flood, "dropped": len(dropped),
            "peak_kb": peak_kb, "after_kb": after_kb, "small_reads": len(waits),
            "wait_ms_median": round(statistics.median(waits), 1), "wait_ms_max": round(max(waits), 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--secs", type=float, default=20)
    parser.add_argument("--runtime", default="threads", choices=["threads", "smol"])
    parser.add_argument("--flood", default="read", choices=["read", "list"])
    args = parser.parse_args()
    for binary in args.binaries:
        print(json.dumps(run(binary, args.clients, args.secs, args.runtime, args.flood)), flush=True)


if __name__ == "__main__":
    main()
