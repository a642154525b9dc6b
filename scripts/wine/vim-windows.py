#!/usr/bin/env python3
"""The Vim plugin under a real Windows Vim, with the Windows bridge, both under Wine.

Not part of `.ci/run`: no Windows build of Vim is on a package registry. Given one (a console
`vim.exe` and its `runtime` folder), this drives what the plugin does on Windows end to end:

  VIM_EXE=/path/to/vim.exe VIM_RUNTIME=/path/to/runtime \
  BRIDGE_EXE=target/x86_64-pc-windows-gnu/debug/claude-ide-bridge.exe \
  WINEPREFIX=$PWD/target/wine-prefix python3 scripts/wine/vim-windows.py

Vim runs in a terminal of its own (tmux), with the plugin, starts the bridge (`serve --stdio`)
with `job_start`, and obeys the Ex commands this script leaves in a file. The script is claude:
it reads the lock file the bridge wrote, connects over WebSocket and calls the tools. Checked:
the lock file's Windows fields (`runningInWindows`, the folder without a trailing `\`);
`openFile` opens the file in Vim by its Windows path; `:ClaudeCodeSend` mentions it by its
Windows path; Vim's URI of the file is the bridge's (`file:///z:/...`); an `openDiff` is shown
beside the file and `:ClaudeCodeDiffAccept` answers FILE_SAVED with the proposal; `:ClaudeCodeOpen`
runs claude (a `.cmd` stand-in) in a ConPTY terminal window, in the workspace, with the port;
`:ClaudeCodeStop` ends the bridge and its lock file goes. Exit status 0 when every check passed.
"""

import asyncio
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import websockets

# What Vim and the bridge are given of this script's environment.
PASSED = ("WINEPREFIX", "WINEDEBUG", "VIMRUNTIME", "CLAUDE_CONFIG_DIR", "WINEDLLOVERRIDES")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def win(path):
    """A Linux path as Windows programs under Wine name it (drive Z: is /)."""
    return "Z:" + os.path.abspath(path).replace("/", "\\")


def vim_string(s):
    return "'" + s.replace("'", "''") + "'"


class Vim:
    """Vim in Ex mode, obeying the commands left in `cmd` and answering in `out`."""

    def __init__(self, tmp, ws, env):
        self.cmd = os.path.join(tmp, "cmd")
        self.out = os.path.join(tmp, "out")
        self.n = 0
        script = os.path.join(tmp, "drive.vim")
        plugin = os.path.join(tmp, "plugin")
        shutil.copytree(os.path.join(ROOT, "editors", "vim"), plugin)
        with open(script, "w") as f:
            f.write(
                f"""set nocompatible hidden
let &runtimepath = {vim_string(win(plugin))} .. ',' .. &runtimepath
let g:claude_ide_bridge_cmd = {vim_string(win(os.environ['BRIDGE_EXE']))}
let g:claude_ide_bridge_log = {vim_string(win(os.path.join(tmp, 'lines.log')))}
runtime plugin/claude_ide_bridge.vim
cd {win(ws)}
function! Poll(timer) abort
  if !filereadable({vim_string(win(self.cmd))})
    return
  endif
  let cmds = readfile({vim_string(win(self.cmd))})
  call delete({vim_string(win(self.cmd))})
  for c in cmds
    if c ==# 'quit'
      qa!
    endif
    try
      let r = execute(c)
    catch
      let r = 'E: ' .. v:exception
    endtry
    call writefile([json_encode(r)], {vim_string(win(self.out))}, 'a')
  endfor
endfunction
call timer_start(100, 'Poll', {{'repeat': -1}})
"""
            )
        # In a terminal of its own (tmux), in Normal mode: the plugin holds tool calls while
        # Vim is on its command line, which Ex mode (-es) never leaves.
        self.sock = os.path.join(tmp, "tmux.sock")
        command = " ".join(shlex.quote(w) for w in [
            "env", *[f"{k}={v}" for k, v in env.items() if k in PASSED],
            "wine", os.environ["VIM_EXE"], "-N", "-u", "NONE", "-i", "NONE", "-S", win(script)])
        subprocess.run(["tmux", "-S", self.sock, "new-session", "-d", "-x", "160", "-y", "45",
                        "-c", ws, command], check=True)

    def run(self, command, timeout=20):
        """Runs an Ex command in Vim; its output."""
        self.n += 1
        with open(self.cmd + ".tmp", "w") as f:
            f.write(command + "\n")
        os.rename(self.cmd + ".tmp", self.cmd)
        end = time.time() + timeout
        while time.time() < end:
            if os.path.exists(self.out):
                with open(self.out) as f:
                    lines = f.read().splitlines()
                if len(lines) >= self.n:
                    return json.loads(lines[self.n - 1])
            time.sleep(0.05)
        raise AssertionError(f"Vim did not run {command!r} in {timeout} s")

    def screen(self):
        got = subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p"],
                             capture_output=True, text=True)
        return got.stdout

    def stop(self):
        with open(self.cmd, "w") as f:
            f.write("quit\n")
        end = time.time() + 20
        while time.time() < end and subprocess.run(
                ["tmux", "-S", self.sock, "has-session"], capture_output=True).returncode == 0:
            time.sleep(0.2)
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


async def call(ws, id_, name, args):
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                              "params": {"name": name, "arguments": args}}))


async def first(ws, wanted, seen, what, timeout=30):
    """The first message `wanted` takes, from those kept in `seen` or those to come; the others
    met on the way are kept in `seen`."""
    for i, m in enumerate(seen):
        if wanted(m):
            return seen.pop(i)
    end = time.time() + timeout
    while True:
        left = end - time.time()
        assert left > 0, f"no {what}"
        msg = json.loads(await asyncio.wait_for(ws.recv(), left))
        if wanted(msg):
            return msg
        seen.append(msg)


async def answer(ws, id_, seen):
    return await first(ws, lambda m: m.get("id") == id_, seen, f"answer to {id_}")


async def notification(ws, method, seen):
    return await first(ws, lambda m: m.get("method") == method, seen, method)


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        raise AssertionError(what)


async def scenario(vim, tmp, ws_dir, config):
    a = os.path.join(ws_dir, "a.txt")
    vim.run("ClaudeCodeStart")
    end = time.time() + 60
    locks = []
    while not locks and time.time() < end:
        locks = glob.glob(os.path.join(config, "ide", "*.lock"))
        time.sleep(0.1)
    check(bool(locks), "the bridge started by Vim wrote its lock file under CLAUDE_CONFIG_DIR\\ide")
    with open(locks[0]) as f:
        lock = json.load(f)
    port = int(os.path.basename(locks[0]).split(".")[0])
    check(lock.get("runningInWindows") is True, f"runningInWindows: {lock.get('runningInWindows')!r}")
    check(lock.get("workspaceFolders") == [win(ws_dir)], f"workspaceFolders: {lock.get('workspaceFolders')!r}")
    check(lock.get("ideName") == "Vim", f"ideName: {lock.get('ideName')!r}")
    headers = {"x-claude-code-ide-authorization": lock["authToken"]}
    async with websockets.connect(f"ws://127.0.0.1:{port}", additional_headers=headers,
                                  subprotocols=["mcp"]) as ws:
        seen = []
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "2.1.0"}}}))
        init = await answer(ws, 0, seen)
        check("result" in init, "initialize answered")
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

        await call(ws, 1, "openFile", {"filePath": win(a), "preview": False, "makeFrontmost": True})
        r = await answer(ws, 1, seen)
        check("result" in r and not r["result"].get("isError"), f"openFile answered: {r}")
        name = vim.run("echo expand('%:p')").strip()
        check(name.lower() == win(a).lower(), f"Vim opened {win(a)}: {name!r}")

        vim.run("ClaudeCodeSend")
        m = await notification(ws, "at_mentioned", seen)
        check(m["params"].get("filePath") == win(a), f"at_mentioned names the Windows path: {m['params']}")

        # The URI Vim gives the file (open_editors, diagnostics) is the one the bridge gives it.
        uri = vim.run("echo claude_ide_bridge#context#Uri(expand('%:p'))").strip()
        check(uri == "file:///z:" + os.path.abspath(a), f"Vim's URI of the file: {uri!r}")

        await call(ws, 2, "openDiff", {"old_file_path": win(a), "new_file_path": win(a),
                                       "new_file_contents": "one\nTWO\n", "tab_name": "a.txt (edit)"})
        # The proposal is shown in Vim (a buffer of its own beside the file's).
        end = time.time() + 30
        shown = ""
        while time.time() < end:
            shown = vim.run("echo len(tabpagebuflist())")
            if shown.strip() == "2":
                break
            time.sleep(0.3)
        check(shown.strip() == "2", f"the proposal is shown beside the file: {shown!r} buffers")
        out = vim.run("ClaudeCodeDiffAccept")
        r = await answer(ws, 2, seen)
        texts = [c.get("text") for c in r.get("result", {}).get("content", [])]
        check(texts[:1] == ["FILE_SAVED"] and "one\nTWO\n" in texts, f"openDiff accepted in Vim: {texts}")
        check("E1" not in out and "Error" not in out, f"no error in Vim: {out!r}")
    # `:ClaudeCodeOpen` runs claude (here a .cmd stand-in that writes down what it was given)
    # in a terminal window (ConPTY), in the workspace, told the bridge's port. What it prints
    # is not checked: Wine 8's ConPTY starts the program but shows none of its output.
    fake = os.path.join(tmp, "claude.cmd")
    seen_file = os.path.join(tmp, "claude-saw.txt")
    with open(fake, "w") as f:
        f.write("@echo off\r\n"
                f"echo PORT=%CLAUDE_CODE_SSE_PORT% IDE=%ENABLE_IDE_INTEGRATION% CWD=%CD%> {win(seen_file)}\r\n"
                "ping -n 30 127.0.0.1 >nul\r\n")
    vim.run(f"let g:claude_ide_bridge_terminal_cmd = [{vim_string(win(fake))}]")
    out = vim.run("ClaudeCodeOpen")
    end = time.time() + 30
    while not os.path.exists(seen_file) and time.time() < end:
        time.sleep(0.2)
    time.sleep(0.5)
    saw = open(seen_file).read().strip() if os.path.exists(seen_file) else ""
    check(saw == f"PORT={port} IDE=true CWD={win(ws_dir)}",
          f":ClaudeCodeOpen runs claude with the port, in the workspace: {saw!r} {out!r}")
    jobs = vim.run("echo map(term_list(), {_, b -> job_info(term_getjob(b)).tty_type})").strip()
    check(jobs == "['conpty']", f"in a terminal window: {jobs}")
    vim.run("ClaudeCodeStop")
    end = time.time() + 20
    while glob.glob(os.path.join(config, "ide", "*.lock")) and time.time() < end:
        time.sleep(0.1)
    check(not glob.glob(os.path.join(config, "ide", "*.lock")), ":ClaudeCodeStop ended the bridge and its lock file went")


def main():
    for v in ("VIM_EXE", "VIM_RUNTIME", "BRIDGE_EXE"):
        if not os.environ.get(v):
            print(f"skipped: {v} is not set (see this script's docstring)")
            return 0
    tmp = tempfile.mkdtemp(prefix="vim-windows-")
    ws_dir = os.path.join(tmp, "ws")
    config = os.path.join(tmp, "config")
    os.makedirs(ws_dir)
    os.makedirs(config)
    with open(os.path.join(ws_dir, "a.txt"), "w") as f:
        f.write("one\ntwo\n")
    # Windows 10 as Wine tells it: Vim's terminal window uses ConPTY only from there on.
    subprocess.run(["wine", "winecfg", "-v", "win10"], env=dict(os.environ, WINEDEBUG="-all"),
                   check=True, timeout=120)
    env = dict(os.environ, WINEDEBUG="-all", VIMRUNTIME=win(os.environ["VIM_RUNTIME"]),
               CLAUDE_CONFIG_DIR=win(config))
    vim = Vim(tmp, ws_dir, env)
    try:
        asyncio.run(scenario(vim, tmp, ws_dir, config))
    except AssertionError as e:
        print(f"FAILED: {e}")
        log = os.path.join(tmp, "lines.log")
        if os.path.exists(log):
            print(open(log).read()[-4000:])
        return 1
    finally:
        vim.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
