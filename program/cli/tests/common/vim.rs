//! The real Vim with the plugin (editors/vim), in a private tmux server, and what the tests of
//! the plugin share: the lock file it makes the bridge write, a test client connected to it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::*;
use serde_json::Value;

pub const PLUGIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../editors/vim");

/// Vim in a private tmux server, with the plugin in `~/.vim/pack/claude/start`.
pub struct Vim {
    pub socket: PathBuf,
    pub log: PathBuf,
    pub out: PathBuf,
    pub evals: u32,
    /// Evaluate with CTRL-W : (the focus is in a terminal window).
    pub in_terminal: bool,
}

impl Vim {
    pub fn start(sb: &Sandbox, file: &Path, vimrc_extra: &str) -> Vim {
        // A copy, as a user's package would be (and :helptags writes there, not in the repository).
        copy_dir(
            Path::new(PLUGIN),
            &sb.home.join(".vim/pack/claude/start/claude-ide-bridge"),
        );
        // Vim says when it has started (VimEnter): keys typed before can be lost in its startup.
        let ready = sb.root().join("vim-started");
        let _ = fs::remove_file(&ready);
        fs::write(
            sb.home.join(".vimrc"),
            format!(
                "set nocompatible hidden cmdheight=3 shortmess+=I\n\
                 autocmd VimEnter * call writefile([], '{ready}')\n\
                 let g:claude_ide_bridge_cmd = '{BIN}'\n\
                 let g:claude_ide_bridge_log = '{log}'\n{vimrc_extra}\n",
                log = sb.root().join("lines.log").display(),
                ready = ready.display()
            ),
        )
        .unwrap();
        let vim = Vim {
            socket: sb.root().join("tmux.sock"),
            log: sb.root().join("lines.log"),
            out: sb.root().join("eval"),
            evals: 0,
            in_terminal: false,
        };
        let cmd = format!(
            "env HOME={} CLAUDE_CONFIG_DIR={} NO_COLOR=1 vim -i NONE {}",
            shell_word(&sb.home),
            shell_word(&sb.config),
            shell_word(file)
        );
        vim.tmux(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "45",
            "-c",
            &sb.ws.to_string_lossy(),
            &cmd,
        ]);
        let give_up = Instant::now() + WAIT;
        while !ready.exists() {
            assert!(
                Instant::now() < give_up,
                "Vim did not start; {}",
                vim.diag()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        vim
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    pub fn text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "0", "-l", text]);
    }

    /// Types an Ex command (from Normal mode) and Enter.
    pub fn ex(&self, cmd: &str) {
        self.keys(&["Escape"]);
        self.text(&format!(":{cmd}"));
        self.keys(&["Enter"]);
    }

    /// Types an Ex command with CTRL-W :, which works from a terminal window too.
    pub fn term_ex(&self, cmd: &str) {
        self.keys(&["C-w", ":"]);
        self.text(cmd);
        self.keys(&["Enter"]);
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "0"])
    }

    /// What a failure shows: the screen and the plugin's last protocol lines.
    pub fn diag(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        format!(
            "screen:\n{}\nlast lines:\n{}",
            self.screen(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    }

    /// The value of a Vim expression (legacy syntax), through a file Vim writes.
    pub fn eval(&mut self, expr: &str) -> Value {
        self.evals += 1;
        let path = self.out.with_extension(self.evals.to_string());
        let cmd = format!(
            "call writefile([json_encode({expr})], '{}')",
            path.display()
        );
        if self.in_terminal {
            self.term_ex(&cmd);
        } else {
            self.ex(&cmd);
        }
        let give_up = Instant::now() + WAIT;
        loop {
            if let Ok(text) = fs::read_to_string(&path) {
                if let Ok(v) = serde_json::from_str(text.trim()) {
                    return v;
                }
            }
            assert!(
                Instant::now() < give_up,
                "vim did not evaluate {expr}; {}",
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the screen shows Vim on the command line (`:` typed, no Enter yet): an
    /// expression cannot be evaluated there without leaving it.
    pub fn wait_eval_in_cmdline(&self) {
        let give_up = Instant::now() + WAIT;
        while !self
            .screen()
            .lines()
            .any(|l| l.starts_with(":echo 'typing"))
        {
            assert!(
                Instant::now() < give_up,
                "not on the command line; {}",
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `expr` until `ok` holds for its value; returns it.
    pub fn wait_eval(&mut self, expr: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let give_up = Instant::now() + WAIT;
        loop {
            let v = self.eval(expr);
            if ok(&v) {
                return v;
            }
            assert!(
                Instant::now() < give_up,
                "{expr} stayed {v}; {}",
                self.diag()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Vim {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What Vim showed, and the plugin's last lines, when the test failed.
            eprintln!("--- Vim ---\n{}\n---", self.diag());
        }
        self.tmux(&["kill-server"]);
    }
}

/// Whether `messages` (`:messages`) hold a Vim error whose number starts with `code` (`"E6"`
/// for E6, E63, E684: ...), written as Vim writes one: `E<digits>:` after a space, a line's
/// start or punctuation, never inside a word. A temporary folder's random name (`.tmp3sE6dC`)
/// is not an error.
pub fn has_vim_error(messages: &str, code: &str) -> bool {
    messages.match_indices(code).any(|(at, _)| {
        let before = messages[..at].chars().next_back();
        let rest = &messages[at + code.len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && rest[digits..].starts_with(':')
    })
}

/// A path as one word for `sh` (tmux runs the command through it), whatever it holds.
pub fn shell_word(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"))
}

/// Runs Vim without a terminal (`vim -es`) on a script of its own: the plugin at `plugin`
/// loaded, then `body` (lines of Vim script), then `qa!`; it must end well.
pub fn run_vim_script(sb: &Sandbox, plugin: &Path, body: &str) {
    let script = sb.root().join("script.vim");
    fs::write(
        &script,
        format!(
            "set nocompatible\n\
             let &runtimepath = '{}' .. ',' .. &runtimepath\n\
             runtime plugin/claude_ide_bridge.vim\n{body}\nqa!\n",
            plugin.display()
        ),
    )
    .unwrap();
    let status = Command::new("vim")
        .args(["-N", "-u", "NONE", "-i", "NONE", "-es", "-S"])
        .arg(&script)
        .env("HOME", &sb.home)
        .stdin(std::process::Stdio::null())
        .status()
        .expect("vim runs");
    assert!(status.success(), "vim: {status}");
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), target).unwrap();
        }
    }
}

pub fn tools_missing() -> bool {
    for (tool, version) in [("vim", "--version"), ("tmux", "-V")] {
        if Command::new(tool).arg(version).output().is_err() {
            claude_ide_bridge_testsupport::skip::tool_missing(&format!(
                "{tool} is not installed (scripts/test-all.sh installs it)"
            ));
            return true;
        }
    }
    false
}

pub fn wait_lock(sb: &Sandbox) -> PathBuf {
    let give_up = Instant::now() + WAIT;
    loop {
        if let Some(p) = fs::read_dir(sb.lock_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "lock"))
        {
            if fs::read_to_string(&p).is_ok_and(|t| t.contains("authToken")) {
                return p;
            }
        }
        assert!(Instant::now() < give_up, "no lock file appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn connect(lock: &Path) -> Client {
    connect_at(lock, "127.0.0.1")
}

/// [`connect`] to `host`, as claude does with `CLAUDE_CODE_IDE_HOST_OVERRIDE` (`[::1]`).
pub fn connect_at(lock: &Path, host: &str) -> Client {
    let port: u16 = lock.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let v: Value = serde_json::from_str(&fs::read_to_string(lock).unwrap()).unwrap();
    let (status, c) = client::connect_to(host, port, v["authToken"].as_str())
        .unwrap_or_else(|| panic!("nothing listens on {host}:{port}"));
    assert_eq!(status, 101);
    let mut c = c.unwrap();
    c.init();
    c
}

/// A stand-in for claude, for Vim's terminal (`g:claude_ide_bridge_terminal_cmd`, or the remote
/// setting's `claude`): runs `body`, then stays (60 s).
pub fn fake_claude(sb: &Sandbox, body: &str) -> PathBuf {
    shell_script(sb, "fake-claude", &format!("{body}\nexec sleep 60"))
}

/// An executable `sh` script `name` in the sandbox's root that runs `body`.
pub fn shell_script(sb: &Sandbox, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.root().join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The buffer Vim keeps a user's edit of a proposal in, as a Vim expression (its number).
pub const KEPT_EDIT: &str = "bufnr('your edit of claude''s proposal')";

/// The lines of the buffer keeping the user's edit of a proposal, once Vim made it.
pub fn kept_edit_lines(vim: &mut Vim) -> Value {
    vim.wait_eval(KEPT_EDIT, |v| v.as_i64().is_some_and(|n| n > 0));
    vim.eval(&format!("getbufline({KEPT_EDIT}, 1, '$')"))
}

/// The next notification `method` whose params satisfy `ok`.
pub fn notification(c: &mut Client, method: &str, ok: impl Fn(&Value) -> bool) -> Value {
    c.recv_until(WAIT, |v| v["method"] == method && ok(&v["params"]))
        .unwrap_or_else(|| panic!("no matching {method}"))["params"]
        .clone()
}

/// A diagnostic's `range`.
pub fn range_of(l1: u64, c1: u64, l2: u64, c2: u64) -> Value {
    json!({"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}})
}

/// A selection's `range`: a diagnostic's, and whether it is empty.
pub fn range(l1: u64, c1: u64, l2: u64, c2: u64) -> Value {
    let mut r = range_of(l1, c1, l2, c2);
    r["isEmpty"] = json!((l1, c1) == (l2, c2));
    r
}

/// Calls a tool until its JSON answer satisfies `ok` (what Vim reports is debounced).
pub fn call_until(c: &mut Client, name: &str, args: Value, ok: impl Fn(&Value) -> bool) -> Value {
    let give_up = Instant::now() + WAIT;
    loop {
        let v = json_of(&call(c, name, args.clone()));
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < give_up, "{name} stayed {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn proposal_count(vim: &mut Vim) -> u64 {
    vim.eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude' && !empty(b.windows)}))",
    )
    .as_u64()
    .unwrap()
}

pub fn gone(lock: &Path) {
    let give_up = Instant::now() + WAIT;
    while lock.exists() {
        assert!(Instant::now() < give_up, "lock file left behind");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a [`fake_claude`] says for [`told_the_host`].
pub const SAYS_HOST: &str =
    "echo \"PORT=$CLAUDE_CODE_SSE_PORT HOST=$CLAUDE_CODE_IDE_HOST_OVERRIDE\"";

/// After `:ClaudeCode` of a [`fake_claude`] saying [`SAYS_HOST`], with the bridge started with
/// `--host ::1`: claude was told `[::1]`, a client connecting there is served, and
/// `:ClaudeCodeStatus` says the host with the port (and `where_` after it, for a remote
/// bridge). Vim then quits, and the lock file `lock` goes.
pub fn told_the_host(vim: &mut Vim, lock: &Path, where_: &str) {
    let port = lock.file_stem().unwrap().to_string_lossy().to_string();
    let give_up = Instant::now() + WAIT;
    while !vim.screen().contains(&format!("PORT={port} HOST=[::1]")) {
        assert!(Instant::now() < give_up, "screen:\n{}", vim.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
    let _c = connect_at(lock, "[::1]");
    vim.in_terminal = true;
    vim.wait_eval("execute('ClaudeCodeStatus')", |v| {
        let v = v.as_str().unwrap();
        v.contains(&format!("port {port}, host [::1]{where_}"))
            && v.contains("connected clients: 1")
    });
    vim.keys(&["C-w", "N"]);
    vim.ex("qa!");
    gone(lock);
}
