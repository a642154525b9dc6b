"""Issue 6: the real `claude` CLI against `claude-ide-bridge`, each scenario on both runtimes.

Every assertion is on the client's screen, the bridge's wire log (`--wire-log`), the bridge's stdio/stderr,
the model endpoint's request log or the workspace on disk, polled with bounded timeouts.
"""

import json
import re
import time
from pathlib import Path

import pytest

from harness import WireLog, CLIENT_VERSION, CLAUDE_BIN, BRIDGE_BIN, text_of, tool_result_text, tool_results, \
    user_texts, wait_until



def file_uri(path):
    from urllib.parse import quote
    return "file://" + quote(str(path))


def assert_handshake(b):
    """initialize (with the client's version), initialized, ide_connected, tools/list on the bridge's wire."""
    init = b.wait_request("initialize")
    info = init["params"].get("clientInfo", {})
    assert info.get("version") == CLIENT_VERSION, info
    resp = b.wait_response(init["id"])
    assert "result" in resp, resp
    assert resp["result"]["serverInfo"]["name"], resp
    assert resp["result"]["serverInfo"]["version"], resp
    assert resp["result"]["protocolVersion"] == init["params"]["protocolVersion"], resp
    b.wait_wire(lambda w: w.get("dir") == "in" and w["msg"].get("method") in
                ("notifications/initialized", "initialized"), what="notifications/initialized")
    connected = b.wait_request("ide_connected")
    assert isinstance(connected["params"]["pid"], int), connected
    tl = b.wait_request("tools/list")
    tools = {t["name"] for t in b.wait_response(tl["id"])["result"]["tools"]}
    assert {"openDiff", "close_tab", "getDiagnostics"} <= tools, tools
    return init


def wait_connected(b):
    """The client has finished the handshake (ide_connected and tools/list answered)."""
    b.wait_request("ide_connected")
    tl = b.wait_request("tools/list")
    b.wait_response(tl["id"])


def edit_script(path, old, new, after="Edited it."):
    return [{"tool_use": {"name": "Edit", "input": {"file_path": str(path), "old_string": old,
                                                    "new_string": new}}},
            {"text": after}]


# --------------------------------------------------------------------------------------------------
# 1. discovery and handshake


def test_handshake_ide_flag(sb, runtime):
    b = sb.bridge(runtime)
    lock = json.loads(Path(b.lock_file).read_text())
    assert lock["ideName"] == b.ide_name and str(sb.ws) in lock["workspaceFolders"], lock
    assert Path(b.lock_file).parent == sb.cfg / "ide"
    c = sb.client(args=["--ide"])
    c.wait_ready()
    assert_handshake(b)
    dialog = c.slash_ide()
    assert re.search(r"✔\s*" + re.escape(b.ide_name), dialog), dialog


def test_handshake_sse_port(sb, runtime):
    # The client runs outside the workspace, so only CLAUDE_CODE_SSE_PORT can make it pick this bridge.
    elsewhere = (sb.root / "elsewhere").resolve()
    elsewhere.mkdir()
    sb.write_client_config([sb.ws, elsewhere])
    b = sb.bridge(runtime)
    c = sb.client(args=[], cwd=elsewhere,
                  env={"CLAUDE_CODE_SSE_PORT": str(b.port), "ENABLE_IDE_INTEGRATION": "true"})
    c.wait_ready()
    assert_handshake(b)
    dialog = c.slash_ide()
    assert re.search(r"✔\s*" + re.escape(b.ide_name), dialog), dialog


# --------------------------------------------------------------------------------------------------
# 2. selection and at-mention through the stdio bridge


def test_selection_and_at_mention(sb, runtime):
    src = sb.ws / "calc.py"
    src.write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    sb.model.set_script([{"text": "Noted the selection."}, {"text": "Noted the mention."}])
    b = sb.bridge(runtime, stdio=True)
    c = sb.client()
    c.wait_ready()
    b.wait_event(lambda e: e.get("type") == "initialized", what="initialized on stdio")
    wait_connected(b)

    b.send({"type": "selection_changed", "filePath": str(src), "text": "def sub(a, b):\n    return a - b",
            "selection": {"start": {"line": 4, "character": 0}, "end": {"line": 5, "character": 16}}})
    b.wait_wire(lambda w: w.get("dir") == "out" and w["msg"].get("method") == "selection_changed",
                what="selection_changed sent to the client")
    c.wait_screen(r"2 lines selected", what="the selection indicator", history=False)
    c.submit("What does the selection do?")
    turn = wait_until(lambda: [r for r in sb.model.turns() if r["reply_index"] == 0], what="the first model turn",
                      diag=sb.diag)[0]
    texts = "\n".join(user_texts(turn["body"]))
    assert re.search(r"The user selected the lines 5 to 6 from " + re.escape(str(src)), texts), texts
    assert "return a - b" in texts
    c.wait_screen(r"Noted the selection\.", what="the model's answer")

    b.send({"type": "at_mentioned", "filePath": str(src), "lineStart": 0, "lineEnd": 1})
    b.wait_wire(lambda w: w.get("dir") == "out" and w["msg"].get("method") == "at_mentioned",
                what="at_mentioned sent to the client")
    c.wait_screen(r"@calc\.py#L1-2", what="the at-mention in the input box", history=False)
    c.submit("and this?")
    turn = wait_until(lambda: [r for r in sb.model.turns() if r["reply_index"] == 1], what="the second model turn",
                      diag=sb.diag)[0]
    last_user = [m for m in turn["body"]["messages"] if m["role"] == "user"][-1]
    texts = "\n".join(user_texts({"messages": [last_user]}))
    assert "@calc.py#L1-2" in texts, texts
    assert "return a + b" in texts, texts  # the client attached the mentioned lines
    c.wait_screen(r"Noted the mention\.", what="the model's answer")


# --------------------------------------------------------------------------------------------------
# 3. an accepted edit


def check_accepted(sb, b, c, path, expected):
    call = b.wait_tool_call("openDiff")
    args = call["params"]["arguments"]
    assert args["old_file_path"] == str(path) and args["new_file_path"] == str(path), args
    resp = b.wait_response(call["id"], timeout=60)
    assert text_of(resp["result"]) == ["FILE_SAVED", expected], resp
    close = b.wait_tool_call("close_tab")
    assert close["params"]["arguments"]["tab_name"] == args["tab_name"], close
    assert text_of(b.wait_response(close["id"])["result"]) == ["TAB_CLOSED"]
    wait_until(lambda: path.read_text() == expected, what="the accepted contents on disk",
               diag=lambda: f"on disk: {path.read_text()!r}\n" + sb.diag())
    c.wait_screen(r"Edited it\.", what="the end of the turn")
    assert re.search(r"Update\(" + re.escape(path.name) + r"\)", c.screen()), c.screen()
    turn = wait_until(lambda: [r for r in sb.model.turns() if r["reply_index"] == 1], what="the model turn after the edit")
    results = [tool_result_text(t) for t in tool_results(turn[0]["body"])]
    assert any("has been updated successfully" in r for r in results), results
    assert f"diff accepted: {path}" in b.stderr() or f"diff accepted: {path}" in b.screen()


def test_edit_accepted(sb, runtime):
    path = sb.ws / "a.txt"
    path.write_text("hello world\n")
    sb.model.set_script(edit_script(path, "hello", "goodbye"))
    b = sb.bridge(runtime, on_diff="accept")
    c = sb.client()
    c.wait_ready()
    wait_connected(b)
    c.submit("Change hello to goodbye in a.txt")
    check_accepted(sb, b, c, path, "goodbye world\n")


def test_edit_ask_answered_with_edit(sb, runtime):
    path = sb.ws / "a.txt"
    path.write_text("hello world\n")
    editor = sb.root / "editor.sh"
    editor.write_text("#!/bin/sh\n# the user's edit: replace what Claude proposed\n"
                      "sed -i 's/goodbye/farewell/' \"$1\"\n")
    editor.chmod(0o755)
    sb.model.set_script(edit_script(path, "hello", "goodbye"))
    b = sb.bridge(runtime, on_diff="ask", tty=True, env={"EDITOR": str(editor), "VISUAL": ""})
    c = sb.client()
    c.wait_ready()
    wait_connected(b)
    c.submit("Change hello to goodbye in a.txt")
    b.wait_tool_call("openDiff")
    wait_until(lambda: "[a]ccept / [r]eject / [e]dit" in b.screen(), what="the bridge's prompt", diag=sb.diag)
    c.wait_screen(r"Opened changes in|" + re.escape(b.ide_name), what="the client waiting on the IDE")
    sb.tmux.text(b.name, "e")
    sb.tmux.keys(b.name, "Enter")
    check_accepted(sb, b, c, path, "farewell world\n")


# --------------------------------------------------------------------------------------------------
# 4. a rejected edit


def test_edit_rejected(sb, runtime):
    path = sb.ws / "a.txt"
    path.write_text("hello world\n")
    sb.model.set_script(edit_script(path, "hello", "goodbye", after="SHOULD NOT BE REACHED"))
    b = sb.bridge(runtime, on_diff="reject")
    c = sb.client()
    c.wait_ready()
    wait_connected(b)
    c.submit("Change hello to goodbye in a.txt")
    call = b.wait_tool_call("openDiff")
    resp = b.wait_response(call["id"])
    assert text_of(resp["result"]) == ["DIFF_REJECTED", call["params"]["arguments"]["tab_name"]], resp
    c.wait_screen(r"User rejected|rejected|Interrupted", what="the client aborting the turn")
    # Back at the prompt, the turn is over: the model was never asked again.
    c.wait_screen(r"manual mode on", what="the input prompt", history=False)
    assert not [r for r in sb.model.turns() if r["reply_index"] == 1], sb.model.summary()
    assert "SHOULD NOT BE REACHED" not in c.screen()
    assert path.read_text() == "hello world\n"
    assert "diff rejected" in b.stderr(), b.stderr()


# --------------------------------------------------------------------------------------------------
# 5. getDiagnostics


def test_get_diagnostics(sb, runtime):
    path = sb.ws / "main.py"
    path.write_text("import os\nprint(undefined_name)\n")
    uri = file_uri(path)
    sb.model.set_script([{"tool_use": {"name": "mcp__ide__getDiagnostics", "input": {"uri": uri}}},
                         {"text": "Read the diagnostics."}])
    b = sb.bridge(runtime, stdio=True)
    c = sb.client()
    c.wait_ready()
    wait_connected(b)
    b.send({"type": "diagnostics", "uri": uri, "diagnostics": [
        {"message": "undefined name 'undefined_name'", "severity": "Error", "source": "pyflakes",
         "range": {"start": {"line": 1, "character": 6}, "end": {"line": 1, "character": 20}}},
        {"message": "'os' imported but unused", "severity": "Warning", "source": "pyflakes",
         "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 9}}}]})
    b.wait_wire(lambda w: w.get("dir") == "out" and w["msg"].get("method") == "diagnostics_changed",
                what="diagnostics_changed sent to the client")
    c.submit("Any problems in main.py?")

    # Manual mode: the client asks before it calls an MCP tool.
    def permission_or_call():
        if b.tool_calls("getDiagnostics"):
            return True
        if re.search(r"Do you want to proceed\?", c.screen(history=False)):
            c.keys("Enter")
            return None
        return None
    wait_until(permission_or_call, what="the getDiagnostics call", interval=0.3, diag=sb.diag)
    call = b.wait_tool_call("getDiagnostics")
    assert call["params"]["arguments"].get("uri") == uri, call
    # A stdio host may be asked for the answer; supply the same diagnostics if so.
    resp = b.wait_response(call["id"])
    body = json.loads(text_of(resp["result"])[0])
    msgs = [d["message"] for entry in body for d in entry["diagnostics"]]
    assert "undefined name 'undefined_name'" in msgs and "'os' imported but unused" in msgs, body
    turn = wait_until(lambda: [r for r in sb.model.turns() if r["reply_index"] == 1],
                      what="the model turn after getDiagnostics", diag=sb.diag)
    results = "\n".join(tool_result_text(t) for t in tool_results(turn[0]["body"]))
    assert "undefined name 'undefined_name'" in results, results
    c.wait_screen(r"Read the diagnostics\.", what="the end of the turn")


# --------------------------------------------------------------------------------------------------
# 7. run -- claude


def test_run_launches_connected_client(sb, runtime):
    wire = sb.root / "run-wire.jsonl"
    c = sb.client(command=[BRIDGE_BIN, "run", "--workspace", str(sb.ws), "--runtime", runtime,
                           "--wire-log", str(wire), "--ide-name", f"e2e-run-{runtime}", "--", CLAUDE_BIN])
    c.wait_ready()

    w = WireLog(wire, diag=sb.diag)
    assert_handshake(w)
    dialog = c.slash_ide()
    assert re.search(r"✔\s*e2e-run-" + runtime, dialog), dialog
