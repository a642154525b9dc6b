"""Issue 15: the Vim plugin (editors/vim) with the real `claude` inside `:ClaudeCode`: it connects, a Visual selection
is claude's context, `:'<,'>ClaudeCodeSend` is an at-mention in its input, a scripted edit is accepted with `:w`.

Vim runs in the sandbox's tmux with the plugin as a package (`~/.vim/pack/claude/start`) and starts the bridge and
claude itself; the test only types into Vim. Assertions poll the bridge's wire log (`--wire-log`, passed through
`g:claude_ide_bridge_args`), the screen, the scripted model's request log and the file on disk.
"""

import json
import re
import shlex
import time

from harness import BRIDGE_BIN, CLAUDE_BIN, ROOT, WireLog, press_until, text_of, turn_text, wait_until


class VimInTmux:
    """Vim in a window of the sandbox's tmux; keys go to whatever has the focus (Vim, or claude in its terminal)."""

    def __init__(self, sb, file):
        self.sb = sb
        self.window = "vim"
        self.wire = WireLog(sb.root / "wire.jsonl", diag=self.diag)
        self.evals = 0
        pack = sb.home / ".vim" / "pack" / "claude" / "start"
        pack.mkdir(parents=True)
        (pack / "claude-ide-bridge").symlink_to(ROOT / "editors" / "vim")
        debug = sb.root / "claude-debug.log"
        claude = [CLAUDE_BIN, "--debug-file", str(debug)]
        (sb.home / ".vimrc").write_text("\n".join([
            "set nocompatible hidden shortmess+=I",
            f"let g:claude_ide_bridge_cmd = {json.dumps(BRIDGE_BIN)}",
            f"let g:claude_ide_bridge_args = ['--wire-log', {json.dumps(str(self.wire.wire_path))}]",
            f"let g:claude_ide_bridge_terminal_cmd = {json.dumps(claude)}",
            f"let g:claude_ide_bridge_log = {json.dumps(str(sb.root / 'lines.log'))}",
            "let g:claude_ide_bridge_split_width_percentage = 0.6",
        ]) + "\n")
        script = sb.root / "vim.sh"
        script.write_text("#!/bin/sh\n" + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sb.env.items())
                          + f"exec vim -i NONE {shlex.quote(str(file))}\n")
        script.chmod(0o755)
        sb.tmux.new_window(self.window, str(script), sb.ws)

    def screen(self):
        return self.sb.tmux.capture(self.window, history=False)

    def keys(self, *keys):
        self.sb.tmux.keys(self.window, *keys)

    def text(self, text):
        self.sb.tmux.text(self.window, text)

    def ex(self, cmd):
        """An Ex command, from Normal mode or from claude's terminal (CTRL-W : works in both)."""
        self.keys("C-w", ":")
        self.text(cmd)
        self.keys("Enter")

    def eval(self, expr):
        self.evals += 1
        out = self.sb.root / f"eval.{self.evals}"
        self.ex(f"call writefile([json_encode({expr})], '{out}')")
        return wait_until(lambda: [json.loads(out.read_text())] if out.read_text().strip() else None, 10,
                          f"Vim to evaluate {expr}", diag=self.diag)[0]

    def diag(self):
        try:
            lines = (self.sb.root / "lines.log").read_text(errors="replace").splitlines()[-20:]
        except FileNotFoundError:
            lines = []
        return ("--- vim screen:\n" + self.screen() + "\n--- plugin lines (tail):\n" + "\n".join(line[:300] for line in lines)
                + "\n" + self.sb.diag())


def vim_with_claude_code(sb, src):
    """Vim started on `src`, then `:ClaudeCode`: claude connects by itself (its terminal has
    CLAUDE_CODE_SSE_PORT) and shows its prompt."""
    vim = VimInTmux(sb, src)
    wait_until(lambda: "calc.py" in vim.screen(), 15, "Vim to start", diag=vim.diag)
    vim.ex("ClaudeCode")
    vim.wire.wait_request("ide_connected")
    vim.wire.wait_response(vim.wire.wait_request("tools/list")["id"])
    wait_until(lambda: re.search(r"\? for shortcuts|manual mode on", vim.screen()), 30, "claude's prompt",
               diag=vim.diag)
    return vim


def test_vim_claude_code_selection_and_accepted_edit(sb):
    src = sb.ws / "calc.py"
    src.write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    expected = src.read_text().replace("return a - b", "return a - b  # difference")
    sb.model.set_script([
        {"text": "Noted the selection."},
        {"tool_use": {"name": "Edit", "input": {"file_path": str(src), "old_string": "return a - b",
                                                "new_string": "return a - b  # difference"}}},
        {"text": "Edited it."},
    ])
    vim = vim_with_claude_code(sb, src)

    # Select lines 5-6 in the file's window, go back to claude: the selection stays its context.
    vim.keys("C-w", "p")
    wait_until(lambda: vim.eval("&buftype") == "", 10, "the file's window", diag=vim.diag)
    vim.keys("Escape", "5", "G", "V", "j")
    vim.wire.wait_sent("selection_changed", pred=lambda m: m["params"]["selection"]["start"]["line"] == 4
                       and m["params"]["selection"]["end"]["line"] == 5)
    vim.keys("C-w", "p")
    # claude drops a selection that arrives in its first moments; Vim re-sends it after the handshake, and a
    # cursor move re-sends it too: wait for claude's indicator.
    wait_until(lambda: "2 lines selected" in vim.screen(), 20, "claude to show the selection", diag=vim.diag)
    vim.text("What does the selection do?")
    time.sleep(0.3)
    vim.keys("Enter")
    texts = turn_text(sb.model.wait_turn(0, "the first model turn", diag=vim.diag))
    assert re.search(r"The user selected the lines 5 to 6 from " + re.escape(str(src)), texts), texts
    assert "return a - b" in texts
    wait_until(lambda: "Noted the selection." in vim.screen(), 20, "the model's answer", diag=vim.diag)

    # :'<,'>ClaudeCodeSend puts an at-mention of the lines in claude's input box.
    vim.keys("C-w", "p")
    wait_until(lambda: vim.eval("&buftype") == "", 10, "the file's window", diag=vim.diag)
    vim.keys("Escape", "1", "G", "V", "j", ":")
    vim.text("ClaudeCodeSend")
    vim.keys("Enter")
    vim.wire.wait_sent("at_mentioned")
    wait_until(lambda: "@calc.py#L1-2" in vim.screen(), 15, "the at-mention in claude's input", diag=vim.diag)
    vim.keys("C-w", "p")
    wait_until(lambda: vim.eval("&buftype") == "terminal", 10, "claude's window", diag=vim.diag)

    # The scripted edit opens as a Vim diff; :w in the proposal accepts it, claude writes the file.
    vim.text("Comment the subtraction")
    time.sleep(0.3)
    vim.keys("Enter")
    call = vim.wire.wait_tool_call("openDiff")
    turn = [r for r in sb.model.turns() if r["reply_index"] == 1][0]
    assert "@calc.py#L1-2" in turn_text(turn), "the at-mention went with the prompt"
    wait_until(lambda: vim.eval("bufwinid(bufnr('proposed by claude'))") != -1, 15, "the diff in Vim",
               diag=vim.diag)
    assert vim.eval("&buftype") == "terminal", "the diff took the focus from claude's terminal"
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))")
    vim.ex("w")
    resp = vim.wire.wait_response(call["id"])
    assert text_of(resp["result"]) == ["FILE_SAVED", expected], resp
    wait_until(lambda: src.read_text() == expected, 20, "claude to write the file", diag=vim.diag)
    # The buffer shows what claude wrote, and the model heard the edit went through.
    wait_until(lambda: vim.eval("getbufline(bufnr('calc.py'), 6)") == ["    return a - b  # difference"], 15,
               "the buffer to show the new text", diag=vim.diag)
    sb.model.wait_turn(2, "the turn after the edit", diag=vim.diag)


def test_vim_edit_answered_in_claudes_prompt_closes_the_vim_diff(sb):
    """The user answers claude's own `Do you want to make this edit ...?` (in its terminal in Vim) while Vim shows
    the diff: claude writes the file and closes the IDE's tab, and Vim's diff goes away with it; the file's buffer
    shows what claude wrote."""
    src = sb.ws / "calc.py"
    src.write_text("def sub(a, b):\n    return a - b\n")
    expected = "def sub(a, b):\n    return a - b  # difference\n"
    sb.model.set_script([
        {"tool_use": {"name": "Edit", "input": {"file_path": str(src), "old_string": "return a - b",
                                                "new_string": "return a - b  # difference"}}},
        {"text": "Edited it."},
    ])
    vim = vim_with_claude_code(sb, src)
    assert vim.eval("&buftype") == "terminal", "claude's window has the focus"
    vim.text("Comment the subtraction")
    time.sleep(0.3)
    vim.keys("Enter")
    call = vim.wire.wait_tool_call("openDiff")
    wait_until(lambda: vim.eval("bufwinid(bufnr('proposed by claude'))") != -1, 15, "the diff in Vim",
               diag=vim.diag)
    asked = r"Do you want to make this edit to calc\.py\?"
    wait_until(lambda: re.search(asked, vim.screen()), 30, "claude's own prompt", diag=vim.diag)
    assert vim.eval("&buftype") == "terminal", "the diff took the focus from claude's terminal"
    # "1. Yes" in claude's prompt (pressed again while the prompt is still up: a key pressed while it is being
    # drawn is lost).
    close = press_until(lambda: vim.keys("Enter"), lambda: vim.wire.wait_tool_call("close_tab", timeout=10),
                        lambda: re.search(asked, vim.screen()))
    assert close["params"]["arguments"]["tab_name"] == call["params"]["arguments"]["tab_name"], close
    wait_until(lambda: src.read_text() == expected, 20, "claude to write the file", diag=vim.diag)
    wait_until(lambda: vim.eval("bufwinid(bufnr('proposed by claude'))") == -1, 15, "Vim's diff to close",
               diag=vim.diag)
    wait_until(lambda: vim.eval("getbufline(bufnr('calc.py'), 2)") == ["    return a - b  # difference"], 15,
               "the buffer to show the new text", diag=vim.diag)
    assert vim.eval("getwinvar(bufwinid(bufnr('calc.py')), '&diff')") == 0, "diff mode left on in the file's window"
    sb.model.wait_turn(1, "the turn after the edit", diag=vim.diag)
