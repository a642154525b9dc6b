//! Programs started through a shim on `PATH`, as npm installs them, and their whole process
//! trees ended with the bridge, on every OS: `scripts/test-all.d/platforms.sh` builds this file
//! for `x86_64-pc-windows-gnu` and runs it under Wine, where the shims are npm's `.cmd` files
//! (run by `cmd.exe`). Two programs: a language server (`pyright-langserver`), whose tree is its
//! Job Object on Windows and its process group on Unix, and `run`'s command (`claude`), tied to
//! the bridge (a Job Object on Windows, `PR_SET_PDEATHSIG` on Linux, a watcher on macOS).
//!
//! The real programs are Linux programs here, which a Windows process cannot start, so each is
//! a stand-in: this test program itself, started with [`STAND_IN`] (the server) or [`COMMAND`]
//! (`run`'s command) as its first argument (the file has its own `main`, `harness = false`). The
//! server speaks enough of the protocol for `getDiagnostics` (one diagnostic per opened or
//! changed file); both start a process of their own (itself again, with [`SLEEPER`]) as real
//! ones do (npm's shim runs `node`, which runs workers). Each writes its pid to a file, and the
//! bridge's language-server log names the process the bridge started (the shim's `cmd.exe` or
//! `sh`), so the test knows the pids of the tree and checks which outlive the bridge.

mod common;

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_ide_bridge_testsupport::lsp_frames;
use common::*;
use serde_json::{json, Value};

/// The first argument that makes this program the stand-in server; the second is the folder it
/// writes its pid to.
const STAND_IN: &str = "stand-in-server";
/// The first argument that makes this program `run`'s command, which reads its input to its end;
/// the second is the folder it writes its pid to.
const COMMAND: &str = "stand-in-command";
/// What `run`'s stand-in command exits with: not the bridge's own status at its stdin's end (0).
const COMMAND_STATUS: i32 = 7;
/// The first argument that makes this program the server's (or the command's) own child, which
/// sleeps; the second is the folder it writes its pid to.
const SLEEPER: &str = "stand-in-sleeper";
/// How long the sleeper sleeps at most: a failed run leaves nothing behind for longer.
const SLEEP_BOUND: Duration = Duration::from_secs(300);
/// The message of the stand-in's one diagnostic.
const MESSAGE: &str = "stand-in: one finding";
/// The bound of a `getDiagnostics` answer (the bridge's own bound is 30 s, `--diagnostics-wait`).
const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(40);
/// The bound of the waits for processes to start or end (Wine starts a process in tens of ms).
const PROCESS_WAIT: Duration = Duration::from_secs(20);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match (args.first().map(String::as_str), args.get(1)) {
        (Some(STAND_IN), Some(dir)) => return stand_in::serve(Path::new(dir), &args[2..]),
        (Some(COMMAND), Some(dir)) => return stand_in::command(Path::new(dir)),
        (Some(SLEEPER), Some(dir)) => return stand_in::sleep(Path::new(dir)),
        _ => {}
    }
    // The tests, one after the other (each starts a bridge and a server tree of its own); a
    // word given (not an option) picks the tests whose name holds it.
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let tests: [(&str, fn()); 4] = [
        (
            "a_shim_started_server_answers_and_its_tree_ends_with_the_bridge",
            a_shim_started_server_answers_and_its_tree_ends_with_the_bridge,
        ),
        (
            "a_killed_bridge_leaves_no_server_tree_behind",
            a_killed_bridge_leaves_no_server_tree_behind,
        ),
        (
            "a_killed_bridge_ends_runs_command_behind_a_shim",
            a_killed_bridge_ends_runs_command_behind_a_shim,
        ),
        (
            "runs_command_ending_by_itself_leaves_what_it_started_running",
            runs_command_ending_by_itself_leaves_what_it_started_running,
        ),
    ];
    let chosen: Vec<_> = (tests.iter())
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", chosen.len());
    for (name, test) in chosen {
        let t = Instant::now();
        println!("test {name} ...");
        test();
        println!("test {name} ... ok ({:.1} s)", t.elapsed().as_secs_f64());
    }
    println!("\ntest result: ok\n");
}

/// `serve --stdio` with the built-in table: the `.py` file's server is `pyright-langserver`,
/// found on `PATH` as the shim (`pyright-langserver.cmd` on Windows, started through
/// `cmd.exe`; its folder has a space in it, as a user's profile may), which passes the table's
/// `--stdio` on to the stand-in. `getDiagnostics` answers with the stand-in's diagnostic; the
/// editor's stdin closing stops the bridge, and the shim's process, the server and the server's
/// own child are all gone.
fn a_shim_started_server_answers_and_its_tree_ends_with_the_bridge() {
    let sb = Sandbox::new();
    let tree = Tree::install(&sb);
    let app = sb.ws.join("app.py");
    fs::write(&app, "count: int = 'two'\n").unwrap();
    let mut s = tree.serve(&sb, &["--stdio"]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);

    // The URI as the real client writes it (`file://` and the OS's path: `file://C:\...` on
    // Windows), the same file as a URI made from its path, and as the path itself.
    let forms = [
        format!("file://{}", app.display()),
        claude_ide_bridge::file_uri(app.to_str().unwrap()),
        app.display().to_string(),
    ];
    let answer = diagnostics(&mut c, &forms[0], &tree, &s);
    for form in &forms[1..] {
        assert_eq!(diagnostics(&mut c, form, &tree, &s), answer, "{form}");
    }
    // On Windows, the URI with its drive's colon left out (`file:///c/...`) names no file: its
    // wire form is the file's, but no drive is written, so it is answered `[]`, not the file's
    // diagnostics (the files crate and the lsp crate read it so too).
    if let Some(no_drive) = platform::without_drive(&forms[1]) {
        let id = c.call_tool("getDiagnostics", json!({"uri": no_drive}));
        let r = c
            .recv_until(DIAGNOSTICS_WAIT, |v| v["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to getDiagnostics {no_drive}"));
        assert!(!is_error(&r), "{r}");
        assert_eq!(json_of(&r), json!([]), "{no_drive}");
    }
    let pids = tree.pids(&s);
    // The table's argument reached the server through the shim.
    let started = tree.started_line();
    assert!(started.ends_with("--stdio"), "{started}");
    // A change on disk is read again and sent (didChange): still one finding, the text's lines
    // counted anew.
    fs::write(&app, "a = 1\nb = 2\n").unwrap();
    let again = diagnostics(&mut c, &forms[0], &tree, &s);
    assert_ne!(answer, again, "the change reached the server");

    for (what, pid) in pids.named() {
        assert!(alive(pid), "the {what} ({pid}) runs while the bridge does");
    }
    // The editor goes away: the bridge stops its servers and exits.
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0, "{}", s.stderr.text());
    assert!(!s.lock.exists());
    pids.all_gone("after the bridge stopped", &tree.log_text());
}

/// `serve`, its Python server named by path (`--lsp python=PATH --stdio`, written as a user types
/// it: `C:\Users\...\App" "Data\npm\pyright-langserver.cmd` on Windows, its backslashes kept and
/// only the space quoted), killed hard (`TerminateProcess` on Windows, SIGKILL on Unix): nothing
/// in the bridge runs. On Windows the job's handle closes with the bridge's process, and kill-on-close ends
/// the whole tree. On Unix the server sees its input close and exits (as real servers do), and
/// so does the shim; what the server started itself is in no group anyone kills, and outlives
/// it (docs/platforms.md): checked as such, then ended by the test.
fn a_killed_bridge_leaves_no_server_tree_behind() {
    let sb = Sandbox::new();
    let tree = Tree::install(&sb);
    let app = sb.ws.join("app.py");
    fs::write(&app, "x = 1\n").unwrap();
    let shim = platform::shim_path(&tree.bin, "pyright-langserver");
    let named = format!(
        "python={} --stdio",
        shim.to_str().unwrap().replace(' ', "\" \"")
    );
    let mut s = tree.serve(&sb, &["--lsp", &named]);
    let mut c = s.client();
    diagnostics(&mut c, app.to_str().unwrap(), &tree, &s);
    let pids = tree.pids(&s);
    for (what, pid) in pids.named() {
        assert!(alive(pid), "the {what} ({pid}) runs while the bridge does");
    }
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    if cfg!(windows) {
        pids.all_gone("after the bridge was killed", &tree.log_text());
    } else {
        let log = format!("the language-server log:\n{}", tree.log_text());
        wait_gone("the shim", pids.shim, &log);
        wait_gone("the server", pids.server, &log);
        assert!(
            alive(pids.grandchild),
            "the server's own child ({}) outlived a killed bridge on Unix until now; \
             docs/platforms.md says it does",
            pids.grandchild
        );
        end(pids.grandchild);
    }
}

/// `run -- claude` with `claude` found on `PATH` as npm's shim (`claude.cmd` on Windows, which
/// Windows' own search for `claude.exe` does not find), then the bridge killed hard: `run`'s
/// command ends too. On Windows its whole tree does (the command's Job Object, closed with the
/// bridge's process: `cmd.exe`, the command and what it started). On Linux the command (the shim
/// `exec`s it, as npm's `#!/usr/bin/env node` script is the program itself) gets SIGTERM at its
/// parent's end (on macOS from its watcher); what it started itself outlives it, as a language
/// server's child does (docs/platforms.md).
fn a_killed_bridge_ends_runs_command_behind_a_shim() {
    let mut run = Run::start();
    let (command, grandchild) = (run.command, run.grandchild);
    assert!(alive(command) && alive(grandchild));
    run.child.kill().unwrap();
    run.child.wait().unwrap();
    let log = "run's command has no log";
    wait_gone("run's command", command, log);
    if cfg!(windows) {
        wait_gone("what run's command started", grandchild, log);
    } else {
        assert!(
            alive(grandchild),
            "the command's own child ({grandchild}) outlived a killed bridge on Unix until now; \
             docs/platforms.md says it does"
        );
        end(grandchild);
    }
}

/// `run -- claude` (npm's shim, as above) whose command ends by itself (its input closed): the
/// bridge exits with its status, and what the command started and left running outlives both,
/// on Windows too, where the command's Job Object is let go without ending anything.
fn runs_command_ending_by_itself_leaves_what_it_started_running() {
    let mut run = Run::start();
    let (command, grandchild) = (run.command, run.grandchild);
    drop(run.child.stdin.take());
    let stderr = run.stderr.clone();
    let status = exit_within(&mut run.child, PROCESS_WAIT, &|| {
        end(command);
        end(grandchild);
        format!("not with its command; {}", said(&stderr))
    });
    assert_eq!(status.code(), Some(COMMAND_STATUS), "{}", run.said());
    wait_gone("run's command", command, "run's command has no log");
    assert!(
        alive(grandchild),
        "what the command started ({grandchild}) was ended with the bridge"
    );
    end(grandchild);
}

/// `run -- claude` started behind the shim in a sandbox of its own ([`Tree::run`]), once its
/// command and the process the command started have written their pids.
struct Run {
    child: std::process::Child,
    stderr: Lines,
    command: u32,
    grandchild: u32,
    _sb: Sandbox,
}

impl Run {
    fn start() -> Run {
        let sb = Sandbox::new();
        let tree = Tree::install(&sb);
        let (child, stderr) = tree.run(&sb);
        let context = || said(&stderr);
        let command = tree.pid_file("command", &context);
        let grandchild = tree.pid_file("grandchild", &context);
        Run {
            child,
            stderr,
            command,
            grandchild,
            _sb: sb,
        }
    }

    /// What the bridge wrote to stderr, for a failure's message.
    fn said(&self) -> String {
        said(&self.stderr)
    }
}

/// What a bridge wrote to `stderr`, for a failure's message.
fn said(stderr: &Lines) -> String {
    format!("the bridge's stderr:\n{}", stderr.text())
}

/// The shim on a `PATH` folder of its own (with a space in its path), the stand-in beside it,
/// the folder the stand-in's processes write their pids to, and the language-server log.
struct Tree {
    bin: PathBuf,
    pid_dir: PathBuf,
    log: PathBuf,
}

impl Tree {
    fn install(sb: &Sandbox) -> Tree {
        let bin = sb.root().join("App Data").join("npm");
        let pid_dir = sb.root().join("pids");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&pid_dir).unwrap();
        let me = std::env::current_exe().unwrap();
        let exe = bin.join(format!("stand-in{}", std::env::consts::EXE_SUFFIX));
        if fs::hard_link(&me, &exe).is_err() {
            fs::copy(&me, &exe).unwrap();
        }
        platform::write_shim(&bin, "pyright-langserver", &exe, STAND_IN, &pid_dir);
        platform::write_shim(&bin, "claude", &exe, COMMAND, &pid_dir);
        Tree {
            bin,
            pid_dir,
            log: sb.root().join("lsp.log"),
        }
    }

    /// `serve` with these arguments, the built-in table and `PATH` holding only the shim's
    /// folder (and Windows' own): pyright's shim is the one Python server found.
    fn serve(&self, sb: &Sandbox, extra: &[&str]) -> Served {
        let path = platform::search_path(&self.bin);
        let mut args = vec![
            "--runtime",
            "threads",
            "--lsp-log",
            self.log.to_str().unwrap(),
            "--diagnostics-wait",
            "30s",
        ];
        args.extend_from_slice(extra);
        Served::start_with_env(sb, &args, &[("PATH", path.to_str().unwrap())])
    }

    /// `run -- claude`, `PATH` as for [`Tree::serve`], its input a pipe the test holds; and what
    /// it writes to stderr.
    fn run(&self, sb: &Sandbox) -> (std::process::Child, Lines) {
        let mut c = sb.command();
        c.args([
            "run",
            "--runtime",
            "threads",
            "--lsp-warm",
            "none",
            "--",
            "claude",
        ])
        .env("PATH", platform::search_path(&self.bin))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let stderr = Lines::collect(child.stderr.take().unwrap());
        (child, stderr)
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's line of the stand-in's start: `[pyright-langserver[PID]] started with ARGS`,
    /// where PID is the process the bridge started (the shim's).
    fn started_line(&self) -> String {
        let give_up = Instant::now() + PROCESS_WAIT;
        loop {
            let text = self.log_text();
            if let Some(l) = text.lines().find(|l| l.contains("] started with ")) {
                return l.to_owned();
            }
            assert!(Instant::now() < give_up, "no start in the log:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The three pids of the server's tree, once each is written.
    fn pids(&self, s: &Served) -> Pids {
        let line = self.started_line();
        let shim = line
            .strip_prefix("[pyright-langserver[")
            .and_then(|rest| rest.split_once("]]"))
            .and_then(|(pid, _)| pid.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {line:?}"));
        let pids = Pids {
            shim,
            server: self.pid_file("server", &|| self.log_text()),
            grandchild: self.pid_file("grandchild", &|| self.log_text()),
        };
        assert!(pids.shim != pids.server, "the shim is a process of its own");
        assert!(pids.shim != s.child.id() && pids.server != s.child.id());
        pids
    }

    /// The pid written to `name`, once it is; else fails with `context` (what the bridge said).
    fn pid_file(&self, name: &str, context: &dyn Fn() -> String) -> u32 {
        let path = self.pid_dir.join(name);
        let give_up = Instant::now() + PROCESS_WAIT;
        loop {
            if let Some(pid) = fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            assert!(
                Instant::now() < give_up,
                "no pid in {}; {}",
                path.display(),
                context()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

struct Pids {
    /// The process the bridge started: `cmd.exe` running the `.cmd` shim, or `sh`.
    shim: u32,
    server: u32,
    /// The process the server started itself.
    grandchild: u32,
}

impl Pids {
    fn named(&self) -> [(&'static str, u32); 3] {
        [
            ("shim", self.shim),
            ("server", self.server),
            ("server's own child", self.grandchild),
        ]
    }

    /// Waits (bounded) for the three to be gone; else ends those left and says which they were.
    fn all_gone(&self, when: &str, log: &str) {
        let give_up = Instant::now() + PROCESS_WAIT;
        while self.named().iter().any(|(_, pid)| alive(*pid)) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<String> = (self.named().into_iter())
            .filter(|(_, pid)| alive(*pid))
            .map(|(what, pid)| {
                end(pid);
                format!("the {what} ({pid})")
            })
            .collect();
        assert!(
            left.is_empty(),
            "still running {when}: {}; the language-server log:\n{log}",
            left.join(", ")
        );
    }
}

/// Whether the process runs: the runtime crate's liveness check (`kill(pid, 0)` on Unix,
/// `OpenProcess` and its exit code on Windows).
fn alive(pid: u32) -> bool {
    claude_ide_bridge_runtime::lock::pid_alive(pid)
}

fn wait_gone(what: &str, pid: u32, log: &str) {
    let give_up = Instant::now() + PROCESS_WAIT;
    while alive(pid) {
        if Instant::now() > give_up {
            end(pid);
            panic!("{what} ({pid}) is still running; {log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ends a process the test found left over (so that a failure leaves nothing running).
fn end(pid: u32) {
    platform::kill(pid);
}

/// `getDiagnostics` for `app.py`, named by `uri`: the stand-in's one diagnostic, under the URI
/// asked with (the client matches its answer by it) or the file's own; returns the diagnostic's
/// range's end (which counts the text's lines).
fn diagnostics(c: &mut Client, uri: &str, tree: &Tree, s: &Served) -> Value {
    let logs = || {
        format!(
            "the language-server log:\n{}\nthe bridge's stderr:\n{}",
            tree.log_text(),
            s.stderr.text()
        )
    };
    let id = c.call_tool("getDiagnostics", json!({"uri": uri}));
    let r = c
        .recv_until(DIAGNOSTICS_WAIT, |v| v["id"] == json!(id))
        .unwrap_or_else(|| panic!("no answer to getDiagnostics {uri}; {}", logs()));
    assert!(!is_error(&r), "{r}; {}", logs());
    let answer = json_of(&r);
    let answer_and_log = format!("{answer}; {}", logs());
    let entries = answer.as_array().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(entries.len(), 1, "{answer_and_log}");
    let answered = entries[0]["uri"].as_str().unwrap();
    if uri.starts_with("file:") {
        assert_eq!(answered, uri, "{answer}");
    } else {
        assert!(answered.ends_with("/app.py"), "{answer}");
    }
    let ds = entries[0]["diagnostics"].as_array().unwrap();
    assert_eq!(ds.len(), 1, "{answer}");
    assert_eq!(ds[0]["message"], MESSAGE, "{answer}");
    assert_eq!(ds[0]["source"], "stand-in", "{answer}");
    assert_eq!(ds[0]["severity"], "Error", "{answer}");
    ds[0]["range"]["end"].clone()
}

/// The stand-in server and its child.
mod stand_in {
    use super::*;

    /// Speaks the protocol on stdin and stdout until `exit` or the end of its input.
    pub fn serve(dir: &Path, args: &[String]) {
        // The log copies stderr with the bridge's name for the process it started.
        eprintln!("started with {}", args.join(" "));
        write_pid(dir, "server");
        start_sleeper(dir);
        let mut input = BufReader::new(std::io::stdin().lock());
        let mut out = std::io::stdout().lock();
        while let Some(msg) = lsp_frames::read(&mut input) {
            let (method, id) = (msg["method"].as_str().unwrap_or(""), msg.get("id"));
            let params = &msg["params"];
            // Into the bridge's log: what a failure is read with.
            eprintln!("got {method} {}", params["textDocument"]["uri"]);
            match method {
                "initialize" => {
                    let caps = json!({"textDocumentSync": {"openClose": true, "change": 1}});
                    lsp_frames::write(
                        &mut out,
                        &json!({"id": id, "result": {"capabilities": caps}}),
                    )
                    .unwrap();
                }
                "textDocument/didOpen" | "textDocument/didChange" => {
                    let doc = &params["textDocument"];
                    let text = match method {
                        "textDocument/didOpen" => doc["text"].as_str(),
                        _ => params["contentChanges"][0]["text"].as_str(),
                    };
                    let lines = text.unwrap_or("").lines().count();
                    let range = json!({"start": {"line": 0, "character": 0},
                                       "end": {"line": lines, "character": 0}});
                    let d = json!({"range": range, "severity": 1, "source": "stand-in",
                                   "message": MESSAGE});
                    let p = json!({"uri": doc["uri"], "version": doc["version"],
                                   "diagnostics": [d]});
                    lsp_frames::write(
                        &mut out,
                        &json!({"method": "textDocument/publishDiagnostics", "params": p}),
                    )
                    .unwrap();
                }
                "exit" => return,
                // Any other request (`shutdown` included) gets a null result.
                _ if !method.is_empty() && id.is_some() => {
                    lsp_frames::write(&mut out, &json!({"id": id, "result": null})).unwrap();
                }
                _ => {}
            }
        }
    }

    /// `run`'s command: writes its pid, starts a process of its own (left running), reads its
    /// input to its end and exits with [`COMMAND_STATUS`].
    pub fn command(dir: &Path) {
        write_pid(dir, "command");
        start_sleeper(dir);
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(COMMAND_STATUS);
    }

    /// Starts this program as the [`SLEEPER`], left running and never waited for: what ends it
    /// is the test's point (the tree's stop, the job's kill; or nothing, and the test ends it).
    fn start_sleeper(dir: &Path) {
        let me = std::env::current_exe().unwrap();
        #[allow(clippy::zombie_processes)]
        let _child = Command::new(me)
            .arg(SLEEPER)
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    }

    /// Writes its pid, then sleeps (bounded).
    pub fn sleep(dir: &Path) {
        write_pid(dir, "grandchild");
        std::thread::sleep(SLEEP_BOUND);
    }

    fn write_pid(dir: &Path, name: &str) {
        let tmp = dir.join(format!("{name}.tmp"));
        fs::write(&tmp, std::process::id().to_string()).unwrap();
        fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

/// Windows: npm's shim, run by `cmd.exe`.
#[cfg(windows)]
mod platform {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    /// `NAME.cmd` as npm writes it (`"%~dp0\..." %*`), running the stand-in as `role` with the
    /// pid folder.
    pub fn write_shim(bin: &Path, name: &str, exe: &Path, role: &str, pid_dir: &Path) {
        let exe = exe.file_name().unwrap().to_str().unwrap();
        let text = format!(
            "@ECHO off\r\n\"%~dp0\\{exe}\" {role} \"{}\" %*\r\n",
            pid_dir.display()
        );
        std::fs::write(shim_path(bin, name), text).unwrap();
    }

    /// Where [`write_shim`] writes the shim called `name`.
    pub fn shim_path(bin: &Path, name: &str) -> PathBuf {
        bin.join(format!("{name}.cmd"))
    }

    /// The shim's folder, then Windows' own (where `cmd.exe` is).
    pub fn search_path(bin: &Path) -> OsString {
        let system = PathBuf::from(std::env::var_os("SystemRoot").unwrap_or(r"C:\windows".into()));
        std::env::join_paths([bin.to_path_buf(), system.join("system32"), system]).unwrap()
    }

    /// A drive's URI (`file:///c:/...`) without the drive's colon: `file:///c/...`.
    pub fn without_drive(uri: &str) -> Option<String> {
        let rest = uri.strip_prefix("file:///")?;
        (rest.as_bytes().get(1) == Some(&b':'))
            .then(|| format!("file:///{}{}", &rest[..1], &rest[2..]))
    }

    /// `TerminateProcess` through std: a `taskkill` of its own.
    pub fn kill(pid: u32) {
        let _ = std::process::Command::new("taskkill")
            .args(["/F", "/PID", &pid.to_string()])
            .output();
    }
}

/// Unix: a shell-script shim. The server's `sh` stays, running the stand-in as its child, as
/// `cmd.exe` does on Windows; `run`'s command's `exec`s it, as npm's `claude` (a `node` script)
/// is the program itself.
#[cfg(unix)]
mod platform {
    use std::ffi::OsString;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    pub fn write_shim(bin: &Path, name: &str, exe: &Path, role: &str, pid_dir: &Path) {
        let exe = exe.file_name().unwrap().to_str().unwrap();
        let exec = if role == super::COMMAND { "exec " } else { "" };
        let text = format!(
            "#!/bin/sh\n{exec}\"${{0%/*}}/{exe}\" {role} '{}' \"$@\"\n",
            pid_dir.display()
        );
        let shim = shim_path(bin, name);
        std::fs::write(&shim, text).unwrap();
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Where [`write_shim`] writes the shim called `name`.
    pub fn shim_path(bin: &Path, name: &str) -> PathBuf {
        bin.join(name)
    }

    /// Only the shim's folder: no other server of the table (ruff) is found.
    pub fn search_path(bin: &Path) -> OsString {
        bin.as_os_str().to_owned()
    }

    /// No drives: nothing to leave out.
    pub fn without_drive(_uri: &str) -> Option<String> {
        None
    }

    pub fn kill(pid: u32) {
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}
