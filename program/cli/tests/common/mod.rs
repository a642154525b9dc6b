//! Runs the built `claude-ide-bridge` in a sandbox (its own HOME and CLAUDE_CONFIG_DIR) and talks
//! to it with the test WebSocket client.
#![allow(dead_code)]

pub use claude_ide_bridge_testsupport::client;
pub use claude_ide_bridge_testsupport::client::texts;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub use client::Client;
use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_claude-ide-bridge");
pub const WAIT: Duration = Duration::from_secs(10);

/// A sandbox: HOME, CLAUDE_CONFIG_DIR and a workspace folder, all in one temp dir.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub config: PathBuf,
    pub ws: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = plain(std::fs::canonicalize(dir.path()).unwrap());
        let home = root.join("home");
        let config = root.join("config");
        let ws = root.join("ws");
        for d in [&home, &config, &ws] {
            std::fs::create_dir_all(d).unwrap();
        }
        Sandbox {
            dir,
            home,
            config,
            ws,
        }
    }

    pub fn root(&self) -> PathBuf {
        self.home.parent().unwrap().to_path_buf()
    }

    pub fn lock_dir(&self) -> PathBuf {
        self.config.join("ide")
    }

    /// A command for the binary with the sandbox's environment and no proxy variables.
    pub fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        // HOME on Unix; USERPROFILE and LOCALAPPDATA (the state folder) on Windows.
        c.env("HOME", &self.home)
            .env("USERPROFILE", &self.home)
            .env("LOCALAPPDATA", self.home.join("AppData").join("Local"))
            .env("CLAUDE_CONFIG_DIR", &self.config)
            .env("NO_COLOR", "1")
            .env_remove("CLAUDE_CODE_SSE_PORT")
            // What would make `doctor` see an IDE's terminal or a claude told not to connect.
            .env_remove("TERM_PROGRAM")
            .env_remove("TERMINAL_EMULATOR")
            .env_remove("FORCE_CODE_TERMINAL")
            .env_remove("CLAUDE_CODE_AUTO_CONNECT_IDE")
            // The state file (the kept port and token) goes under the sandbox's HOME.
            .env_remove("XDG_STATE_HOME")
            .env_remove("CLAUDE_IDE_BRIDGE_LOG");
        for v in [
            "http_proxy",
            "HTTP_PROXY",
            "https_proxy",
            "HTTPS_PROXY",
            "all_proxy",
            "ALL_PROXY",
            "no_proxy",
            "NO_PROXY",
        ] {
            c.env_remove(v);
        }
        c.current_dir(&self.ws);
        c
    }
}

/// `path` without the verbatim prefix Windows' `canonicalize` gives (`\\?\C:\...` becomes
/// `C:\...`, the form a user, claude and the lock file use); other paths as they are.
pub fn plain(path: PathBuf) -> PathBuf {
    match path.to_str() {
        Some(text) => PathBuf::from(claude_ide_bridge::without_verbatim_prefix(text).as_ref()),
        None => path,
    }
}

/// Lines a child wrote, collected by a thread.
#[derive(Clone, Default)]
pub struct Lines(pub Arc<Mutex<Vec<String>>>);

/// Gives `c` the environment `base` sets and removes (a sandbox's, for another program).
pub fn with_env_of(c: &mut Command, base: &Command) {
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
}

impl Lines {
    pub fn collect(r: impl std::io::Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let l = lines.clone();
        thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                l.0.lock().unwrap().push(line);
            }
        });
        lines
    }

    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub fn text(&self) -> String {
        self.all().join("\n")
    }

    /// Waits for a line containing `needle`; returns it.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_for_within(needle, WAIT)
    }

    /// [`Lines::wait_for`] with a bound of its own, for work whose time grows with its input.
    pub fn wait_for_within(&self, needle: &str, wait: Duration) -> String {
        let give_up = Instant::now() + wait;
        loop {
            if let Some(l) = self.all().into_iter().find(|l| l.contains(needle)) {
                return l;
            }
            assert!(
                Instant::now() < give_up,
                "no line with {needle:?} in:\n{}",
                self.text()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the `export CLAUDE_CODE_SSE_PORT=` line; returns the port.
    pub fn port(&self) -> u16 {
        let line = self.wait_for("export CLAUDE_CODE_SSE_PORT=");
        let rest = line.split("export CLAUDE_CODE_SSE_PORT=").nth(1).unwrap();
        rest.split(' ').next().unwrap().trim().parse().unwrap()
    }

    pub fn count(&self, needle: &str) -> usize {
        self.all().iter().filter(|l| l.contains(needle)).count()
    }
}

/// A running `serve`.
pub struct Served {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: Lines,
    pub stderr: Lines,
    pub port: u16,
    pub lock: PathBuf,
    token_cache: String,
}

impl Served {
    pub fn start(sb: &Sandbox, args: &[&str]) -> Served {
        Served::start_with_env(sb, args, &[])
    }

    pub fn start_with_env(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Served {
        let mut c = sb.command();
        for (k, v) in env {
            c.env(k, v);
        }
        c.arg("serve").args(args);
        Served::start_command(c)
    }

    /// The bridge `c` starts (a `serve`, maybe through a wrapper such as `unshare`), as
    /// [`Served::start`] starts it.
    pub fn start_command(mut c: Command) -> Served {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = Lines::collect(child.stdout.take().unwrap());
        let stderr = Lines::collect(child.stderr.take().unwrap());
        let port = stderr.port();
        let lock_line = stderr.wait_for("lock file: ");
        let lock = PathBuf::from(lock_line.split_once("lock file: ").unwrap().1.trim());
        let mut s = Served {
            child,
            stdin,
            stdout,
            stderr,
            port,
            lock,
            token_cache: String::new(),
        };
        s.token_cache = s.token();
        s
    }

    /// The token, remembered from the lock file at start (the file is gone after stop).
    pub fn token_from_text(&self) -> String {
        self.token_cache.clone()
    }

    pub fn token(&self) -> String {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&self.lock).unwrap()).unwrap();
        v["authToken"].as_str().unwrap().to_string()
    }

    pub fn client(&self) -> Client {
        let (status, c) = client::connect(self.port, Some(&self.token()));
        assert_eq!(status, 101);
        let mut c = c.unwrap();
        c.init();
        c
    }

    pub fn send_line(&mut self, line: &str) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(line.as_bytes()).unwrap();
        s.write_all(b"\n").unwrap();
        s.flush().unwrap();
    }

    /// Waits for the exit (bounded); returns the exit code.
    pub fn wait_exit(&mut self) -> i32 {
        let stderr = self.stderr.clone();
        let status = exit_within(&mut self.child, WAIT, &|| {
            format!("stderr:\n{}", stderr.text())
        });
        status.code().unwrap_or(-1)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits (at most `bound`) for `child` to exit and returns its status; else kills it and fails,
/// saying `context` (what it wrote, its log).
pub fn exit_within(
    child: &mut Child,
    bound: Duration,
    context: &dyn Fn() -> String,
) -> std::process::ExitStatus {
    let give_up = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > give_up {
            // Said before the kill: the context may look at the process (its state).
            let said = context();
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "process {} did not exit within {bound:?}; {said}",
                child.id(),
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

pub fn is_error(resp: &Value) -> bool {
    resp["result"]["isError"] == json!(true)
}

/// The JSON in a tool result's first text item.
pub fn json_of(resp: &Value) -> Value {
    serde_json::from_str(&texts(resp)[0]).unwrap_or_else(|_| panic!("not JSON: {resp}"))
}

/// The stdio bridge's `skip`-th line of type `kind` (0: the first), waiting for it.
pub fn next_msg(s: &Served, kind: &str, skip: usize) -> Value {
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        let msgs: Vec<Value> = s
            .stdout
            .all()
            .iter()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|_| panic!("stdout is only JSON lines: {l}"))
            })
            .filter(|v: &Value| v["type"] == kind)
            .collect();
        if let Some(v) = msgs.get(skip) {
            return v.clone();
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no {kind} #{skip}: {}",
            s.stdout.text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn call(c: &mut Client, name: &str, args: Value) -> Value {
    let id = c.call_tool(name, args);
    c.response(id)
}

pub fn open_diff_args(path: &Path, contents: &str, tab: &str) -> Value {
    let p = path.to_string_lossy();
    json!({"old_file_path": p, "new_file_path": p, "new_file_contents": contents, "tab_name": tab})
}

pub const RUNTIMES: [&str; 2] = ["threads", "smol"];

/// The responses to several requests, whatever their order.
pub fn responses(c: &mut Client, ids: &[u64]) -> std::collections::HashMap<u64, Value> {
    let mut got = std::collections::HashMap::new();
    while got.len() < ids.len() {
        let v = c
            .recv_until(WAIT, |v| v["id"].as_u64().is_some_and(|i| ids.contains(&i)))
            .unwrap_or_else(|| panic!("missing responses ({}); have {got:?}", c.why()));
        got.insert(v["id"].as_u64().unwrap(), v);
    }
    got
}

pub mod storm;

// Unix only: signals, FIFOs, Vim in tmux.
#[cfg(unix)]
mod unix;
#[cfg(unix)]
#[allow(unused_imports)]
pub use self::unix::*;
#[cfg(unix)]
pub mod vim;

/// Whether `program` is a file in one of `PATH`'s folders.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Panics with how to install `program` when it is missing: the tests that call it are about that
/// real program (a language server).
pub fn require(program: &str, install: &str) {
    assert!(
        have(program),
        "{program} is not on PATH: {install} (scripts/test-all.sh does it)"
    );
}
