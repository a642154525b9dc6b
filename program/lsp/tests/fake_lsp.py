"""A scripted language server for the client's fault tests: well-behaved, or misbehaving in one way.

Usage: fake_lsp.py MODE [STATE_DIR [WORD]]

The well-behaved part reports one Error diagnostic per line containing WORD (default "error"; message
"bad line N", source "fake", or WORD when one is given: two of them run together for a language tell
their diagnostics apart),
published with the document's version after every didOpen/didChange, or answered to pulls in the `pull`
modes. It formats by stripping trailing spaces. Each start appends a line to STATE_DIR/starts (time and
pid) when STATE_DIR is given, each didSave the length of its text to STATE_DIR/saved, each formatting
request the document's URI to STATE_DIR/formatted, each didClose the URI to STATE_DIR/closed. Modes name the
fault: see `main` (`save-text` is well-behaved, asking for the text with didSave).
"""

import json
import os
import subprocess
import sys
import threading
import time

MODE = sys.argv[1]
STATE = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
WORD = sys.argv[3] if len(sys.argv) > 3 else "error"
SOURCE = sys.argv[3] if len(sys.argv) > 3 else "fake"
out = sys.stdout.buffer
inp = sys.stdin.buffer


def note(name, text):
    if STATE:
        with open(os.path.join(STATE, name), "a") as f:
            f.write(text + "\n")


SENDING = threading.Lock()


def send(msg, length_delta=0):
    with SENDING:
        send_now(msg, length_delta)


def send_now(msg, length_delta):
    body = json.dumps(msg).encode()
    if MODE == "chatty":
        # A log line on stdout before each message, as some servers and wrapper scripts print.
        out.write(b"chatty: sending a message\n")
    out.write(b"Content-Length: %d\r\n\r\n" % (len(body) + length_delta) + body)
    out.flush()


def read():
    length = None
    while True:
        line = inp.readline()
        if not line:
            sys.exit(0)  # input closed: the client is gone
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(inp.read(length))


def diagnostics(text):
    found = [
        {
            "range": {"start": {"line": i, "character": 0}, "end": {"line": i, "character": len(line)}},
            # "long-messages": messages of 2,000 control characters (6 bytes each in JSON).
            "message": "\x01" * 2000 if MODE == "long-messages" else "bad line %d" % i,
            "severity": 1,
            "source": SOURCE,
            "code": "E%d" % i,
        }
        for i, line in enumerate(text.split("\n"))
        if WORD in line
    ]
    # "no-source": diagnostics without a source, as some servers send them.
    if MODE == "no-source":
        for d in found:
            del d["source"]
    return found


def sleep_forever():
    while True:
        time.sleep(3600)


def main():
    note("starts", "%f %d" % (time.time(), os.getpid()))
    if MODE == "crash-at-start":
        sys.exit(3)
    pull = MODE in ("pull", "hang-pull", "slow-pull")
    docs = {}
    while True:
        msg = read()
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            note("initialize", json.dumps(params))
            if MODE == "hang-init":
                continue
            if MODE == "slow-init":
                time.sleep(3)
            if MODE == "late-init":
                time.sleep(5)
            if MODE == "deaf-init":
                # Requests whose answers fill the pipe to it, and never a read again.
                for i in range(2000):
                    send({"jsonrpc": "2.0", "id": "deaf%d" % i, "method": "workspace/configuration", "params": {"items": [{"section": "s"}] * 20}})
                sleep_forever()
            caps = {"textDocumentSync": {"openClose": True, "change": 1, "save": True}, "documentFormattingProvider": True}
            if MODE == "no-format":
                del caps["documentFormattingProvider"]
            if MODE == "save-text":
                caps["textDocumentSync"]["save"] = {"includeText": True}
            if pull:
                caps["diagnosticProvider"] = {"interFileDependencies": False, "workspaceDiagnostics": False}
            send({"jsonrpc": "2.0", "id": mid, "result": {"capabilities": caps}})
            # Requests real servers send: the client must answer each.
            send({"jsonrpc": "2.0", "id": "cfg", "method": "workspace/configuration", "params": {"items": [{"section": "a"}, {"section": "b"}]}})
            send({"jsonrpc": "2.0", "id": "odd", "method": "fake/unknownRequest", "params": {}})
        elif method == "initialized":
            if MODE == "exit-after-init":
                sys.exit(0)
            if MODE == "no-read":
                sleep_forever()
        elif mid in ("cfg", "odd"):
            note("answers", json.dumps(msg))
        elif method is None and MODE == "big-server-request":
            # The answer to its own request over the limit.
            note("answers", json.dumps(msg))
        elif method in ("textDocument/didOpen", "textDocument/didChange"):
            doc = params["textDocument"]
            text = doc["text"] if method.endswith("didOpen") else params["contentChanges"][-1]["text"]
            docs[doc["uri"]] = text
            if MODE == "crash-after-open":
                os._exit(4)
            if MODE == "crash-on-change" and method.endswith("didChange"):
                # Checking the new text, it crashes: what it published was for the old one.
                time.sleep(0.3)
                os._exit(4)
            if MODE == "burst-exit":
                # Thirty files' diagnostics, then its end: all of it still to be read then.
                folder = doc["uri"].rsplit("/", 1)[0]
                for i in range(30):
                    diag = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "message": "m"}
                    send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "%s/f%d.fake" % (folder, i), "diagnostics": [diag]}})
                os._exit(4)
            if MODE == "orphan-output":
                # Its own child keeps stdin and stdout open: the client sees no end of output.
                child = subprocess.Popen(["sleep", "1000"])
                note("grandchild", str(child.pid))
                os._exit(4)
            if MODE == "garbage":
                # Lines that are not frames, without end.
                while True:
                    out.write(b"hello, this is not a frame\r\n")
                    out.flush()
            if MODE == "huge":
                big = [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "message": "x" * 1000}] * 20000
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": big}})
                sleep_forever()
            if MODE == "flood":
                n = 0
                while True:  # endless publishes for ever more files, until the client stops reading
                    many = [{"range": {"start": {"line": i, "character": 0}, "end": {"line": i, "character": 1}}, "message": "flood %d" % i} for i in range(500)]
                    send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///flood/%d.fake" % n, "diagnostics": many}})
                    n += 1
            if MODE == "short-length":
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": []}}, length_delta=-5)
                sleep_forever()
            if MODE == "long-length":
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": []}}, length_delta=+50)
                sleep_forever()
            if MODE == "stderr-flood-crash":
                for _ in range(500):
                    sys.stderr.write("noise " * 2000 + "\n")
                sys.stderr.flush()
                os._exit(4)
            if MODE == "stderr-flood":
                for _ in range(500):
                    sys.stderr.write("noise " * 2000 + "\n")
                sys.stderr.flush()
            if MODE == "staged":
                # As typescript-language-server: no version, and a first publish that still holds
                # the previous text's diagnostics, the full one a little later.
                before = docs.get("previous:" + doc["uri"], "")
                docs["previous:" + doc["uri"]] = text
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": diagnostics(before)}})
                time.sleep(0.1)
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": diagnostics(text)}})
            elif MODE == "progress":
                # As a server still loading its project: work in progress, an empty list at once
                # (its quick pass), the real diagnostics 1.5 s later, then the work's end.
                send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "load", "value": {"kind": "begin", "title": "Loading"}}})
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": []}})
                time.sleep(1.5)
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": diagnostics(text)}})
                send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "load", "value": {"kind": "end"}}})
            elif MODE == "latest-only":
                # As pyright: a check takes a while (half a second), and a change before its end
                # cancels it: only the latest text's diagnostics are published.
                def publish_later(uri=doc["uri"], version=doc.get("version"), text=text):
                    time.sleep(0.5)
                    if docs.get(uri) is text:
                        send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": uri, "version": version, "diagnostics": diagnostics(text)}})

                threading.Thread(target=publish_later, daemon=True).start()
            elif MODE == "outside":
                # As a server looking at a library's files: a publish for a file outside the
                # workspace too, before the document's own.
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": "file:///outside-the-workspace/lib.py", "diagnostics": diagnostics("error")}})
                # And for `link-out.py` beside the document: in the workspace by its path, a link
                # to a file outside it (which a server reads as that file, and may quote).
                linked = doc["uri"].rsplit("/", 1)[0] + "/link-out.py"
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": linked, "diagnostics": diagnostics("error")}})
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "version": doc["version"], "diagnostics": diagnostics(text)}})
            elif MODE == "ghost":
                # Errors for a file beside the document that does not exist, and never the
                # document's own: a question about the document waits out its bound.
                ghost = doc["uri"].rsplit("/", 1)[0] + "/ghost.fake"
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": ghost, "diagnostics": diagnostics("error")}})
            elif MODE == "late-unversioned":
                # No version, each text's diagnostics 300 ms after it came.
                time.sleep(0.3)
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "diagnostics": diagnostics(text)}})
            elif not pull:
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {"uri": doc["uri"], "version": doc["version"], "diagnostics": diagnostics(text)}})
            if MODE == "crash-after-publish" and "crash" in text:
                os._exit(4)
        elif method == "textDocument/didSave":
            note("saved", "%d" % len(params.get("text", "")))
        elif method == "textDocument/didClose":
            note("closed", params["textDocument"]["uri"])
        elif method == "textDocument/diagnostic":
            if MODE == "hang-pull":
                continue
            text = docs.get(params["textDocument"]["uri"], "")
            if MODE == "slow-pull":
                # The answer for the text asked about, half a second later.
                time.sleep(0.5)
            send({"jsonrpc": "2.0", "id": mid, "result": {"kind": "full", "items": diagnostics(text)}})
        elif method == "textDocument/formatting":
            note("formatted", params["textDocument"]["uri"])
            if MODE == "big-server-request":
                # A request of the server's own (id before method, as vscode-jsonrpc,
                # lsp-server and llvm::json write it), over the message limit, whose id happens to
                # be the client's pending one; then the real answer.
                send({"jsonrpc": "2.0", "id": mid, "method": "workspace/applyEdit", "params": {"edit": {"changes": {}}, "label": "x" * 8000}})
                time.sleep(0.3)
            if MODE == "big-result-first":
                # gopls's jsonrpc2 writes a response's result before its id.
                send({"jsonrpc": "2.0", "result": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "newText": "x" * 8000}], "id": mid})
                continue
            text = docs.get(params["textDocument"]["uri"], "")
            edits = []
            for i, line in enumerate(text.split("\n")):
                stripped = line.rstrip(" ")
                if stripped != line:
                    # Positions in UTF-16 code units, as the protocol says.
                    start = len(stripped.encode("utf-16-le")) // 2
                    end = len(line.encode("utf-16-le")) // 2
                    edits.append({"range": {"start": {"line": i, "character": start}, "end": {"line": i, "character": end}}, "newText": ""})
            send({"jsonrpc": "2.0", "id": mid, "result": edits})
        elif method == "shutdown":
            if MODE == "hang-shutdown":
                # A child of its own too, which must go with it; and deaf to SIGTERM.
                child = subprocess.Popen(["sleep", "1000"])
                note("grandchild", str(child.pid))
                import signal
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                sleep_forever()
            send({"jsonrpc": "2.0", "id": mid, "result": None})
        elif method == "exit":
            sys.exit(0)


main()
