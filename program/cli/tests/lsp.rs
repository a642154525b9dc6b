//! `getDiagnostics` from real language servers (issue 14): pyright (npm `pyright`) and ruff's server
//! (PyPI `ruff`), which scripts/test-all.sh installs, behind `serve` and `run`.
//!
//! Every wait is bounded; pyright's cold start takes about a second on a quiet machine, so the
//! bounds here are generous (`SLOW`), and no test asserts a time.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;
use claude_ide_bridge_testsupport::procs;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// The bound of one wait for a language server.
const SLOW: Duration = Duration::from_secs(60);

const CLEAN: &str =
    "def total(xs: list[int]) -> int:\n    return sum(xs)\n\n\ncount: int = total([1, 2])\n";
const TYPE_ERROR: &str =
    "def total(xs: list[int]) -> int:\n    return sum(xs)\n\n\ncount: int = \"two\"\n";
const OTHER_ERROR: &str =
    "def total(xs: list[int]) -> int:\n    return sum(xs)\n\n\ncount: str = total([1, 2])\n";

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A client that keeps the notifications it receives while it waits for answers.
struct Session {
    c: Client,
    notes: Vec<Value>,
}

impl Session {
    fn new(s: &Served) -> Session {
        Session {
            c: s.client(),
            notes: Vec::new(),
        }
    }

    fn call(&mut self, name: &str, args: Value) -> Value {
        let id = self.c.call_tool(name, args);
        let give_up = Instant::now() + SLOW;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            let v = self
                .c
                .recv_json(left)
                .unwrap_or_else(|| panic!("no answer to {name} (id {id})"));
            if v["id"] == json!(id) {
                return v;
            }
            if v.get("method").is_some() {
                self.notes.push(v);
            }
        }
    }

    /// `getDiagnostics` with these arguments: the parsed list.
    fn diagnostics(&mut self, args: Value) -> Vec<Value> {
        let r = self.call("getDiagnostics", args);
        assert!(!is_error(&r), "{r}");
        match json_of(&r) {
            Value::Array(a) => a,
            other => panic!("not a list: {other}"),
        }
    }

    /// The first notification (kept or still to come) for which `pred` holds.
    fn wait_note(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.notes.iter().find(|v| pred(v)) {
            return v.clone();
        }
        let give_up = Instant::now() + SLOW;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            let v = self
                .c
                .recv_json(left)
                .unwrap_or_else(|| panic!("no {what}; kept: {:?}", self.notes));
            if v.get("method").is_some() {
                self.notes.push(v.clone());
                if pred(&v) {
                    return v;
                }
            }
        }
    }
}

/// Every message of the diagnostics of `path` in a getDiagnostics answer.
fn messages(answer: &[Value], path: &Path) -> Vec<String> {
    answer
        .iter()
        .filter(|e| e["uri"] == json!(uri(path)))
        .flat_map(|e| e["diagnostics"].as_array().cloned().unwrap_or_default())
        .map(|d| d["message"].as_str().unwrap_or("").to_string())
        .collect()
}

fn mentions(msgs: &[String], needle: &str) -> bool {
    msgs.iter().any(|m| m.contains(needle))
}

/// Asks about `path` until the messages of its diagnostics are `done` (at most [`SLOW`], every
/// 200 ms), panicking with `what` and the last ones.
fn ask_until(c: &mut Session, path: &Path, what: &str, done: impl Fn(&[String]) -> bool) {
    let give_up = Instant::now() + SLOW;
    loop {
        let r = c.call("getDiagnostics", json!({"uri": uri(path)}));
        // A server slower than the question's wait (a loaded machine, a cold clangd on heavy
        // C++ with the default 1.5 s) is answered "not known yet": asked again, as claude would.
        let slow = is_error(&r) && r.to_string().contains("not known yet");
        if !slow {
            let msgs = match json_of(&r) {
                Value::Array(a) if !is_error(&r) => messages(&a, path),
                _ => panic!("{what}: {r}"),
            };
            if done(&msgs) {
                return;
            }
            assert!(Instant::now() < give_up, "{what}: {msgs:?}");
        }
        assert!(Instant::now() < give_up, "{what}: {r}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

const LITERAL_TWO: &str = "\"Literal['two']\" is not assignable to declared type \"int\"";
const INT_TO_STR: &str = "\"int\" is not assignable to declared type \"str\"";

fn serve(sb: &Sandbox, rt: &str, extra: &[&str]) -> Served {
    let log = sb.root().join("lsp.log");
    // The machine may be busy (tests run in parallel): waits long enough for a cold pyright. An
    // answer comes as soon as it is fresh, so a long wait costs nothing when all goes well.
    let mut args = vec![
        "--runtime",
        rt,
        "--lsp-log",
        log.to_str().unwrap(),
        "--diagnostics-wait",
        "30s",
    ];
    args.extend_from_slice(extra);
    Served::start(sb, &args)
}

#[test]
fn pyright_diagnostics_follow_the_file_on_disk() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let notes_txt = sb.ws.join("notes.txt");
    fs::write(&notes_txt, "not code\n").unwrap();
    let mut s = serve(&sb, "threads", &[]);
    let log = sb.root().join("lsp.log");
    s.stderr
        .wait_for(&format!("language servers: log in {}", log.display()));
    // Nothing asked yet: no server runs.
    assert!(procs::descendants(s.child.id()).is_empty());
    let mut c = Session::new(&s);

    // The first call (the server started when the client connected, `--lsp-warm connect`): the
    // answer already holds the error, in the bridge's shape.
    let answer = c.diagnostics(json!({"uri": uri(&app)}));
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0]["uri"], json!(uri(&app)));
    let d = &answer[0]["diagnostics"][0];
    assert!(d["message"].as_str().unwrap().contains(LITERAL_TWO), "{d}");
    assert_eq!(d["severity"], "Error", "{d}");
    assert_eq!(d["source"], "Pyright", "{d}");
    assert_eq!(d["code"], "reportAssignmentType", "{d}");
    assert_eq!(
        d["range"]["start"],
        json!({"line": 4, "character": 13}),
        "{d}"
    );
    let servers = procs::descendants(s.child.id());
    assert!(
        servers
            .iter()
            .any(|p| procs::cmdline(p.pid).contains("pyright")),
        "no pyright below the bridge: {:?}",
        servers
            .iter()
            .map(|p| procs::cmdline(p.pid))
            .collect::<Vec<_>>()
    );

    // Fixed on disk: cleared on the next call.
    fs::write(&app, CLEAN).unwrap();
    let answer = c.diagnostics(json!({"uri": uri(&app)}));
    assert!(messages(&answer, &app).is_empty(), "{answer:?}");

    // A new error on disk: shown on the next call, asked by plain path this time.
    fs::write(&app, OTHER_ERROR).unwrap();
    let answer = c.diagnostics(json!({"uri": app.to_str().unwrap()}));
    assert!(mentions(&messages(&answer, &app), INT_TO_STR), "{answer:?}");

    // Without a uri: every file with known diagnostics.
    let all = c.diagnostics(json!({}));
    assert!(mentions(&messages(&all, &app), INT_TO_STR), "{all:?}");

    // diagnostics_changed was pushed for each change.
    c.wait_note("diagnostics_changed with the new error", |v| {
        v["method"] == "diagnostics_changed"
            && v["params"]["uri"] == json!(uri(&app))
            && v["params"]["diagnostics"]
                .to_string()
                .contains("is not assignable to declared type")
            && v["params"]["diagnostics"].to_string().contains("str")
    });

    // A file of no known language, or outside the workspace (never handed to a server): [] at once.
    assert_eq!(
        c.diagnostics(json!({"uri": uri(&notes_txt)})),
        Vec::<Value>::new()
    );
    let outside = sb.root().join("outside.py");
    fs::write(&outside, TYPE_ERROR).unwrap();
    assert_eq!(
        c.diagnostics(json!({"uri": uri(&outside)})),
        Vec::<Value>::new()
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_file_the_client_writes_itself_is_read_again_by_the_check_after() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, CLEAN).unwrap();
    // No --on-diff and no terminal: diffs are decided in claude's own prompt, so the bridge
    // never sees the accepted text; the client asks its baseline, writes the file, then checks.
    let mut s = serve(&sb, "threads", &[]);
    let mut c = Session::new(&s);
    assert!(messages(&c.diagnostics(json!({"uri": uri(&app)})), &app).is_empty());
    fs::write(&app, TYPE_ERROR).unwrap();
    let all = c.diagnostics(json!({}));
    assert!(mentions(&messages(&all, &app), LITERAL_TWO), "{all:?}");
    // Fixed by the client the same way: the check after finds it clean.
    fs::write(&app, CLEAN).unwrap();
    let all = c.diagnostics(json!({}));
    assert!(messages(&all, &app).is_empty(), "{all:?}");
    assert_eq!(s.stop(), 0);
}

#[test]
fn accepted_diff_and_write_file_are_synced_at_once() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, CLEAN).unwrap();
    let mut s = serve(&sb, "smol", &["--on-diff", "accept"]);
    let mut c = Session::new(&s);
    assert!(messages(&c.diagnostics(json!({"uri": uri(&app)})), &app).is_empty());

    // Accepted: FILE_SAVED, the client writes the file afterwards. Before it does, the server already
    // has the new contents: their diagnostics are pushed.
    let r = c.call("openDiff", open_diff_args(&app, TYPE_ERROR, "t1"));
    assert_eq!(texts(&r), ["FILE_SAVED", TYPE_ERROR]);
    assert_eq!(
        fs::read_to_string(&app).unwrap(),
        CLEAN,
        "the bridge must not write the file"
    );
    c.wait_note("diagnostics_changed for the accepted contents", |v| {
        v["method"] == "diagnostics_changed"
            && v["params"]["uri"] == json!(uri(&app))
            && v["params"]["diagnostics"]
                .to_string()
                .contains("Literal['two']")
    });
    // The client writes the file, then asks without a uri (its after-edit check): the error is there.
    fs::write(&app, TYPE_ERROR).unwrap();
    let all = c.diagnostics(json!({}));
    assert!(mentions(&messages(&all, &app), LITERAL_TWO), "{all:?}");

    // writeFile (a compatibility method): written atomically, and synced.
    let other = sb.ws.join("other.py");
    let r = c.c.request(
        "writeFile",
        json!({"path": other.to_str().unwrap(), "content": OTHER_ERROR}),
    );
    assert_eq!(r["result"]["success"], true, "{r}");
    c.wait_note("diagnostics_changed for the written file", |v| {
        v["method"] == "diagnostics_changed"
            && v["params"]["uri"] == json!(uri(&other))
            && v["params"]["diagnostics"]
                .to_string()
                .contains("\\\"str\\\"")
    });
    assert_eq!(s.stop(), 0);
}

/// `serve` with a FIFO or a symbolic link where its language-server log goes by default (the
/// state folder): the log is refused, the bridge starts without it and says why once, and what
/// was there is left as it was. It waited at start for a reader of the FIFO for ever, printing
/// nothing, and appended to whatever the link named. Each run is bounded: the bridge is killed
/// if its port does not come.
#[test]
fn a_log_that_is_a_fifo_or_a_link_is_refused_and_the_bridge_runs_without_it() {
    use std::os::unix::fs::PermissionsExt;
    for kind in ["fifo", "symlink"] {
        let sb = Sandbox::new();
        let state = sb.root().join("state");
        let dir = state.join("claude-ide-bridge");
        fs::create_dir_all(&dir).unwrap();
        for d in [&state, &dir] {
            fs::set_permissions(d, fs::Permissions::from_mode(0o700)).unwrap();
        }
        let log = dir.join("lsp.log");
        let target = sb.root().join("target");
        fs::write(&target, "mine\n").unwrap();
        if kind == "fifo" {
            let made = std::process::Command::new("mkfifo")
                .args(["-m", "600"])
                .arg(&log)
                .status();
            assert!(made.unwrap().success());
        } else {
            std::os::unix::fs::symlink(&target, &log).unwrap();
        }
        let mut cmd = sb.command();
        cmd.env("XDG_STATE_HOME", &state)
            .args(["serve", "--runtime", "threads"])
            .args(["--lsp", "python=/nonexistent/bin/some-lsp"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        /// Kills the bridge when the test fails before it stopped.
        struct Bridge(Child);
        impl Drop for Bridge {
            fn drop(&mut self) {
                if self.0.try_wait().ok().flatten().is_none() {
                    let _ = self.0.kill();
                    let _ = self.0.wait();
                }
            }
        }
        let mut bridge = Bridge(cmd.spawn().unwrap());
        let stderr = Lines::collect(bridge.0.stderr.take().unwrap());
        stderr.wait_for("export CLAUDE_CODE_SSE_PORT=");
        stderr.wait_for("lock file: ");
        let why = stderr.wait_for("language servers: no log");
        let expected = if kind == "fifo" {
            "not a regular file"
        } else {
            "symbolic link"
        };
        assert!(why.contains(expected), "{kind}: {why}");
        let stopped = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(bridge.0.id().to_string())
            .status()
            .unwrap();
        assert!(stopped.success());
        let status = exit_within(&mut bridge.0, WAIT, &|| {
            format!("{kind}: {}", stderr.text())
        });
        assert_eq!(status.code(), Some(0), "{kind}: {}", stderr.text());
        assert_eq!(stderr.count("no log"), 1, "{kind}: {}", stderr.text());
        let meta = fs::symlink_metadata(&log).unwrap();
        if kind == "fifo" {
            use std::os::unix::fs::FileTypeExt;
            assert!(meta.file_type().is_fifo(), "{kind}");
        } else {
            assert!(meta.file_type().is_symlink(), "{kind}");
        }
        assert_eq!(fs::read_to_string(&target).unwrap(), "mine\n", "{kind}");
    }
}

#[test]
fn no_lsp_starts_nothing_and_answers_empty() {
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let mut s = serve(&sb, "threads", &["--no-lsp"]);
    let mut c = Session::new(&s);
    assert_eq!(
        c.diagnostics(json!({"uri": uri(&app)})),
        Vec::<Value>::new()
    );
    assert_eq!(c.diagnostics(json!({})), Vec::<Value>::new());
    assert!(procs::descendants(s.child.id()).is_empty());
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_missing_server_answers_empty_and_the_log_says_why_once() {
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let mut s = serve(
        &sb,
        "threads",
        &["--lsp", "python=/nonexistent/bin/some-lsp --stdio"],
    );
    let mut c = Session::new(&s);
    for _ in 0..3 {
        assert_eq!(
            c.diagnostics(json!({"uri": uri(&app)})),
            Vec::<Value>::new()
        );
    }
    assert_eq!(s.stop(), 0);
    let log = fs::read_to_string(sb.root().join("lsp.log")).unwrap();
    assert_eq!(log.matches("/nonexistent/bin/some-lsp").count(), 1, "{log}");
}

/// A script `body` at `name` beside the workspace, and the `--lsp` value that makes it Python's
/// server.
fn python_server(sb: &Sandbox, name: &str, body: &str) -> (PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.root().join(name);
    fs::write(&path, body).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    let server = format!("python={}", path.display());
    (path, server)
}

/// A language whose servers all failed (here the one found cannot be started: its interpreter
/// is missing) answers `getDiagnostics {uri}` with a tool error saying why, not `[]`: that
/// would pass for a file without problems (until the server is tried again).
#[test]
fn a_language_whose_servers_failed_answers_an_error_saying_why() {
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let (_, server) = python_server(&sb, "broken-lsp", "#!/nonexistent/interpreter\n");
    let mut s = serve(&sb, "threads", &["--lsp", &server, "--lsp-warm", "none"]);
    let mut c = Session::new(&s);
    for _ in 0..2 {
        let r = c.call("getDiagnostics", json!({"uri": uri(&app)}));
        assert!(is_error(&r), "{r}");
        let text = texts(&r).join("");
        assert!(
            text.contains("no python language server is running") && text.contains("cannot start"),
            "{text}"
        );
    }
    assert_eq!(c.diagnostics(json!({})), Vec::<Value>::new());
    assert_eq!(s.stop(), 0);
}

/// The workspace folder removed and made again while the bridge serves it (`rm -rf proj && git
/// clone ... proj`): a file's diagnostics are a tool error saying to restart the bridge. They were
/// `[]`, a success, for every file until the bridge restarted: claude took each file for clean.
#[test]
fn a_workspace_folder_made_again_is_no_file_without_problems() {
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let mut s = serve(
        &sb,
        "threads",
        &[
            "--lsp",
            "python=/nonexistent/bin/some-lsp",
            "--lsp-warm",
            "none",
        ],
    );
    let mut c = Session::new(&s);
    c.call("getDiagnostics", json!({"uri": uri(&app)}));
    fs::rename(&sb.ws, sb.root().join("ws.old")).unwrap();
    fs::create_dir(&sb.ws).unwrap();
    fs::write(&app, TYPE_ERROR).unwrap();
    let r = c.call("getDiagnostics", json!({"uri": uri(&app)}));
    assert!(is_error(&r), "{r}");
    let text = texts(&r).join("");
    assert!(
        text.contains(
            "is no longer the directory it was when the bridge started (restart the bridge"
        ),
        "{text}"
    );
    // Nor is the answer for every file a success (it was `[]`).
    let r = c.call("getDiagnostics", json!({}));
    assert!(is_error(&r), "{r}");
    assert!(
        texts(&r)
            .join("")
            .contains("the workspace's diagnostics are not known"),
        "{r}"
    );
    drop(c);
    assert_eq!(s.stop(), 0);
}

/// A server that ends unasked (here: it exits at once, status 7) is said on the terminal, with
/// its status and where its log is: before, nothing was said, and diagnostics of its language
/// stopped coming without a word. Its last end before it is given up says so (each said it
/// would start again). A stop the bridge asks for is not said.
#[test]
fn a_server_that_ends_unasked_is_said_with_its_status() {
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let (dying, server) = python_server(&sb, "dying-lsp", "#!/bin/sh\nexit 7\n");
    let mut s = serve(&sb, "threads", &["--lsp", &server, "--lsp-warm", "none"]);
    let mut c = Session::new(&s);
    let r = c.call("getDiagnostics", json!({"uri": uri(&app)}));
    assert!(is_error(&r), "{r}");
    let line = s.stderr.wait_for(") ended (");
    let log = sb.root().join("lsp.log");
    assert!(
        line.contains(&format!(
            "language servers: {} (python, pid ",
            dying.display()
        )) && line.contains("exit status: 7): started again when next needed")
            && line.ends_with(&format!("; its log: {}", log.display())),
        "{line}"
    );
    // Asked again as its restarts come due (200 ms, 400 ms, 800 ms): the fourth end is the
    // last of the series.
    let given_up = "it ended too often in a row: not started again for 10 minutes";
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while !s.stderr.text().contains(given_up) {
        assert!(std::time::Instant::now() < give_up, "{}", s.stderr.text());
        std::thread::sleep(Duration::from_millis(300));
        c.call("getDiagnostics", json!({"uri": uri(&app)}));
    }
    let text = s.stderr.text();
    assert_eq!(
        text.matches("started again when next needed").count(),
        3,
        "{text}"
    );
    assert_eq!(text.matches(given_up).count(), 1, "{text}");
    drop(c);
    assert_eq!(s.stop(), 0);
}

/// clangd lists a function's unused variables when the function ends, so an error in a later
/// function comes after all of them. With more diagnostics than the bridge keeps for a file
/// (200), the error is kept and warnings are left out (before, the first 200 were kept: the
/// error was lost behind the warnings).
#[test]
fn an_error_after_hundreds_of_warnings_is_kept() {
    require("clangd", "apt-get install clangd");
    let sb = Sandbox::new();
    fs::write(sb.ws.join("compile_flags.txt"), "-std=c11\n-Wall\n").unwrap();
    let mut text = String::from("void noisy(void) {\n");
    for i in 0..300 {
        text.push_str(&format!("    int unused_{i};\n"));
    }
    text.push_str("}\n\nint broken(void) {\n    return not_declared;\n}\n");
    let file = sb.ws.join("noisy.c");
    fs::write(&file, text).unwrap();
    let mut s = serve(&sb, "threads", &["--lsp", "c=clangd"]);
    let mut c = Session::new(&s);
    let answer = c.diagnostics(json!({"uri": uri(&file)}));
    let msgs = messages(&answer, &file);
    assert_eq!(msgs.len(), 200, "{msgs:?}");
    assert!(mentions(&msgs, "not_declared"), "{msgs:?}");
    let warnings = msgs
        .iter()
        .filter(|m| m.contains("Unused variable"))
        .count();
    assert_eq!(warnings, 199, "{msgs:?}");
    assert_eq!(s.stop(), 0);
}

impl Session {
    /// A tool call as the client makes its own (`_meta` naming no tool use: the bridge answers
    /// within the client's bounds), and how long its answer took.
    fn client_call(&mut self, name: &str, args: Value) -> (Value, Duration) {
        let asked = Instant::now();
        let id = self.c.send_request(
            "tools/call",
            json!({"name": name, "arguments": args, "_meta": {}}),
        );
        loop {
            let left = (asked + SLOW).saturating_duration_since(Instant::now());
            let v = (self.c.recv_json(left)).unwrap_or_else(|| panic!("no answer to {name}"));
            if v["id"] == json!(id) {
                return (v, asked.elapsed());
            }
            if v.get("method").is_some() {
                self.notes.push(v);
            }
        }
    }

    /// `getDiagnostics` asked by the client itself: the parsed list, and how long it took.
    fn client_diagnostics(&mut self, args: Value) -> (Vec<Value>, Duration) {
        let (r, took) = self.client_call("getDiagnostics", args);
        assert!(!is_error(&r), "{r}");
        match json_of(&r) {
            Value::Array(a) => (a, took),
            other => panic!("not a list: {other}"),
        }
    }

    /// The client's edit of `path` to `contents` through an accepted `openDiff`, as the real
    /// client makes it: the diff, its baseline `getDiagnostics {uri}` (within 500 ms), the
    /// write, then its check `getDiagnostics {}` (within 2 s): that check's answer.
    fn edit(&mut self, path: &Path, contents: &str, tab: &str) -> Vec<Value> {
        let r = self.call("openDiff", open_diff_args(path, contents, tab));
        assert_eq!(texts(&r)[0], "FILE_SAVED", "{r}");
        let (baseline, took) = self.client_call("getDiagnostics", json!({"uri": uri(path)}));
        assert!(
            took < Duration::from_millis(500),
            "the baseline took {took:?}: {baseline}"
        );
        fs::write(path, contents).unwrap();
        let (all, took) = self.client_diagnostics(json!({}));
        assert!(
            took < Duration::from_secs(2),
            "the check took {took:?}: {all:?}"
        );
        all
    }
}

/// A C workspace for clangd: `x.h` declaring `other` (dated an hour back: a header written in
/// the clock's last tick before clangd's start may be newer than what it read, and would have its
/// open files checked again once more), and `main.c` including it and calling the undeclared
/// `helper` (an error, not a warning).
fn header_and_source(sb: &Sandbox) -> (PathBuf, PathBuf) {
    fs::write(
        sb.ws.join("compile_flags.txt"),
        "-std=c11\n-Werror=implicit-function-declaration\n",
    )
    .unwrap();
    let header = sb.ws.join("x.h");
    let main = sb.ws.join("main.c");
    fs::write(&header, "int other(void);\n").unwrap();
    date_back(&header);
    fs::write(
        &main,
        "#include \"x.h\"\n\nint main(void) { return helper(); }\n",
    )
    .unwrap();
    (header, main)
}

/// clangd's error for `main.c`'s call of `helper` while `x.h` does not declare it, and the one
/// while it declares it returning nothing ([`header_and_source`]).
const UNDECLARED: &str = "Implicit declaration of function 'helper'";
const VOID: &str = "Returning 'void' from a function with incompatible result type 'int'";

/// A bridge serving [`header_and_source`]'s workspace with clangd (and `extra` arguments), and a
/// client that asked about `main.c` and was told [`UNDECLARED`].
fn header_session(extra: &[&str]) -> (Sandbox, PathBuf, PathBuf, Served, Session) {
    require("clangd", "apt-get install clangd");
    let sb = Sandbox::new();
    let (header, main) = header_and_source(&sb);
    let s = serve(&sb, "threads", &[&["--lsp", "c=clangd"], extra].concat());
    let mut c = Session::new(&s);
    let msgs = messages(&c.diagnostics(json!({"uri": uri(&main)})), &main);
    assert!(mentions(&msgs, UNDECLARED), "{msgs:?}");
    (sb, header, main, s, c)
}

/// clangd has built `path` `n` times, as its log (copied into the bridge's) says each build:
/// the n-th is awaited, then none other may come.
fn built(sb: &Sandbox, path: &Path, n: usize) {
    let log = sb.root().join("lsp.log");
    let needle = format!("building file {}", path.display());
    let builds = || {
        let text = fs::read_to_string(&log).unwrap_or_default();
        text.lines().filter(|l| l.contains(&needle)).count()
    };
    let give_up = Instant::now() + SLOW;
    while builds() < n && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(builds(), n, "{}", fs::read_to_string(&log).unwrap());
}

/// Dates `path` an hour back.
fn date_back(path: &Path) {
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(long_ago).unwrap();
}

/// clangd checks a file again only when its own text changes, and watches no files: a header
/// claude edits (an accepted `openDiff`, then the write) left the source including it with the
/// diagnostics of the header's old text, answered as current. The bridge checks the server's
/// other open files again once the header's new text is on disk, and their diagnostics count
/// only once clangd answered for that: the client's check after the edit (`getDiagnostics {}`,
/// within its 2 s) and the question about the source no longer hold the error the header's fix
/// removed, and hold the one a later change of the header brings. Before, both still held the
/// old error, and the new one was never told.
#[test]
fn a_header_edited_through_the_bridge_is_seen_by_the_source_including_it() {
    let (_sb, header, main, mut s, mut c) = header_session(&["--on-diff", "accept"]);

    // The header declares it now: gone from the client's check after the edit, and from the
    // answer about the source.
    let all = c.edit(&header, "int other(void);\nint helper(void);\n", "t1");
    assert!(!mentions(&messages(&all, &main), UNDECLARED), "{all:?}");
    let (answer, took) = c.client_diagnostics(json!({"uri": uri(&main)}));
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(messages(&answer, &main), Vec::<String>::new());

    // Declared returning nothing: the source's new error is in the check after the edit, and
    // in the answer about the source.
    let all = c.edit(&header, "int other(void);\nvoid helper(void);\n", "t2");
    let msgs = messages(&all, &main);
    assert!(mentions(&msgs, VOID), "{all:?}");
    assert!(!mentions(&msgs, UNDECLARED), "{all:?}");
    let msgs = messages(&c.diagnostics(json!({"uri": uri(&main)})), &main);
    assert!(mentions(&msgs, VOID), "{msgs:?}");
    assert_eq!(s.stop(), 0);
}

/// clangd watches no files: a header changed on disk by another program (the user's editor,
/// `git checkout`, claude's own tools when no diff is shown), which the bridge never handed
/// over, left the source including it answered for the header's old text, for as long as the
/// source's own text did not change; and a question about the header opened it in clangd
/// without the source being checked again. The look at the disk before each question finds
/// the header changed and has the source checked again: its answer holds what the header's
/// new text gives, whether the header is asked about first or not at all. clangd builds the
/// source once per write (its log says each build): not again for the same write found once
/// more by the next question's look (it was written in the clock's last tick), nor at its
/// start for a header written long before it (one written in the clock's last tick before
/// its start may be newer than what it read: its open files are checked again then).
#[test]
fn a_header_changed_on_disk_is_seen_by_the_source_including_it() {
    let (sb, header, main, mut s, mut c) = header_session(&[]);
    let built = |n: usize| built(&sb, &main, n);
    built(1);

    // Declared by another program's write: gone from the answer about the source, asked
    // twice.
    fs::write(&header, "int other(void);\nint helper(void);\n").unwrap();
    for _ in 0..2 {
        let msgs = messages(&c.diagnostics(json!({"uri": uri(&main)})), &main);
        assert_eq!(msgs, Vec::<String>::new());
    }
    built(2);

    // Declared returning nothing, the header asked about first: the source's new error.
    fs::write(&header, "int other(void);\nvoid helper(void);\n").unwrap();
    let msgs = messages(&c.diagnostics(json!({"uri": uri(&header)})), &header);
    assert_eq!(msgs, Vec::<String>::new());
    let msgs = messages(&c.diagnostics(json!({"uri": uri(&main)})), &main);
    assert!(mentions(&msgs, VOID), "{msgs:?}");
    assert!(!mentions(&msgs, UNDECLARED), "{msgs:?}");
    built(3);
    assert_eq!(s.stop(), 0);
}

/// A header changed by another program (no question follows), then edited by claude through an
/// accepted diff: the client's check before the write is answered what clangd said of the
/// header's text before (the look at that question found the change, and had the source checked
/// again for it); before, the header's old text went back to clangd over the accepted one (a
/// third version of the header built, and the source built again for it). The source's answer
/// holds what the written header gives.
#[test]
fn a_header_changed_then_edited_through_a_diff_keeps_the_accepted_text() {
    let (sb, header, main, mut s, mut c) = header_session(&["--on-diff", "accept"]);
    built(&sb, &main, 1);
    // Another program declares it; no question follows.
    fs::write(&header, "int other(void);\nint helper(void);\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // claude's edit through a diff: returning nothing.
    let all = c.edit(&header, "int other(void);\nvoid helper(void);\n", "t1");
    assert!(mentions(&messages(&all, &main), VOID), "{all:?}");
    let msgs = messages(&c.diagnostics(json!({"uri": uri(&main)})), &main);
    assert!(
        mentions(&msgs, VOID) && !mentions(&msgs, UNDECLARED),
        "{msgs:?}"
    );
    // The header's versions clangd built: the text it was opened with at the diff and the
    // accepted one (clangd may build only the later), never a third.
    let log = fs::read_to_string(sb.root().join("lsp.log")).unwrap();
    let needle = format!("building file {} version ", header.display());
    let versions: std::collections::BTreeSet<&str> = (log.lines())
        .filter_map(|l| l.split_once(&needle))
        .filter_map(|(_, rest)| rest.split(' ').next())
        .collect();
    assert!(
        !versions.is_empty() && versions.len() <= 2,
        "{versions:?}\n{log}"
    );
    assert_eq!(s.stop(), 0);
}

/// A header fixed while clangd takes seconds to check large C++ sources again (each includes the
/// standard library, its headers rebuilt): the client's own question about one of them is
/// answered at once (what clangd said of its text before, or its new answer), never "not known",
/// which left the client without a baseline for seconds after every header write; and the
/// model's question is never answered the error the fix removed as current: it is given clangd's
/// new answer, or told it is not known yet (the reviews of the change).
#[test]
fn sources_slow_to_check_again_answer_the_client_at_once_and_the_model_truly() {
    require("clangd", "apt-get install clangd");
    let sb = Sandbox::new();
    fs::write(sb.ws.join("compile_flags.txt"), "-std=c++17\n-xc++\n").unwrap();
    const HEAVY: &str =
        "#include <iostream>\n#include <vector>\n#include <map>\n#include <regex>\n\
                         #include <algorithm>\n#include <functional>\n#include <memory>\n";
    const UNDECLARED: &str = "helper";
    let header = sb.ws.join("x.h");
    fs::write(&header, "int other();\n").unwrap();
    let sources: Vec<PathBuf> = (0..4)
        .map(|i| {
            let p = sb.ws.join(format!("s{i}.cpp"));
            let text = format!("{HEAVY}#include \"x.h\"\nint f{i}() {{ return helper(); }}\n");
            fs::write(&p, text).unwrap();
            p
        })
        .collect();
    // Written long before clangd starts: a header written in the clock's last tick before its
    // start may be newer than what it read, and would have the sources checked again once more
    // (a heavy C++ source checked twice at once is slower than this test's first questions
    // wait).
    for p in sources.iter().chain([&header]) {
        date_back(p);
    }
    let log = sb.root().join("lsp.log");
    // The model's questions wait as long as by default (1.5 s), not the tests' 30 s.
    let args = ["--runtime", "threads", "--lsp-log", log.to_str().unwrap()];
    let mut s = Served::start(
        &sb,
        &[
            &args[..],
            &[
                "--lsp",
                "cpp=clangd",
                "--lsp",
                "h=clangd",
                "--on-diff",
                "accept",
            ],
        ]
        .concat(),
    );
    let mut c = Session::new(&s);
    for p in &sources {
        ask_until(&mut c, p, "the undeclared helper", |m| {
            mentions(m, UNDECLARED)
        });
    }
    // claude's edit of the header, written; the client's question about the header hands its new
    // text over (and has the sources checked again), and those about the sources come at once.
    let fixed = "int other();\nint helper();\n";
    let r = c.call("openDiff", open_diff_args(&header, fixed, "t1"));
    assert_eq!(texts(&r)[0], "FILE_SAVED", "{r}");
    fs::write(&header, fixed).unwrap();
    let (r, _) = c.client_call("getDiagnostics", json!({"uri": uri(&header)}));
    assert!(!is_error(&r), "{r}");
    for (i, p) in sources.iter().enumerate() {
        let (r, took) = c.client_call("getDiagnostics", json!({"uri": uri(p)}));
        eprintln!("the client's question about s{i}.cpp: {took:?}");
        assert!(!is_error(&r), "not known to the client: {r}");
        let id = c.c.send_request(
            "tools/call",
            json!({"name": "getDiagnostics", "arguments": {"uri": uri(p)},
                   "_meta": {"claudecode/toolUseId": format!("toolu_{i}")}}),
        );
        let r = loop {
            let v = c.c.recv_json(SLOW).expect("an answer");
            if v["id"] == json!(id) {
                break v;
            }
        };
        assert!(
            is_error(&r) || !r.to_string().contains(UNDECLARED),
            "the model was told the error the fix removed: {r}"
        );
    }
    assert_eq!(s.stop(), 0);
}

#[test]
fn reformat_file_through_a_server_that_formats() {
    require("ruff", "pip install ruff");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, "x=[1,2 ,3]\n").unwrap();
    fs::set_permissions(&app, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let mut s = serve(&sb, "threads", &["--lsp", "python=ruff server"]);
    let mut c = Session::new(&s);
    let r = c.call("reformat_file", json!({"file_path": app.to_str().unwrap()}));
    assert_eq!(texts(&r), ["OK"], "{r}");
    assert_eq!(fs::read_to_string(&app).unwrap(), "x = [1, 2, 3]\n");
    let mode = fs::metadata(&app).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o640
    );
    assert_eq!(s.stop(), 0);

    // pyright alone does not format: the refusal stays, the file is untouched.
    if have("pyright-langserver") {
        fs::write(&app, "x=[1,2 ,3]\n").unwrap();
        let mut s = serve(
            &sb,
            "threads",
            &["--lsp", "python=pyright-langserver --stdio"],
        );
        let mut c = Session::new(&s);
        let r = c.call("reformat_file", json!({"file_path": app.to_str().unwrap()}));
        assert!(
            is_error(&r) && texts(&r)[0].contains("not reformatted"),
            "{r}"
        );
        assert_eq!(fs::read_to_string(&app).unwrap(), "x=[1,2 ,3]\n");
        assert_eq!(s.stop(), 0);
    }
}

/// The built-in Python set, pyright and ruff together (issue 32): one answer holds pyright's type
/// error and ruff's unused import, each with its source; `reformat_file` goes through ruff, the
/// one of the set that formats; both servers are gone after the stop.
#[test]
fn pyright_and_ruff_run_together_for_python() {
    require("pyright-langserver", "npm install -g pyright");
    require("ruff", "pip install ruff");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    let text = format!("import os\n\n\n{TYPE_ERROR}");
    fs::write(&app, &text).unwrap();
    let mut s = serve(&sb, "threads", &[]);
    let mut c = Session::new(&s);
    let answer = c.diagnostics(json!({"uri": uri(&app)}));
    assert_eq!(answer.len(), 1, "{answer:?}");
    let d = answer[0]["diagnostics"].as_array().unwrap();
    let from = |source: &str, word: &str| {
        d.iter()
            .any(|d| d["source"] == source && d.to_string().contains(word))
    };
    assert!(
        from("Pyright", "is not assignable to declared type"),
        "{answer:?}"
    );
    assert!(from("Ruff", "F401"), "{answer:?}");
    let servers = procs::descendants(s.child.id());
    let lines: Vec<String> = servers.iter().map(|p| procs::cmdline(p.pid)).collect();
    assert!(lines.iter().any(|l| l.contains("pyright")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("ruff")), "{lines:?}");

    fs::write(&app, "import os\nx=[1,\n  2]\n").unwrap();
    let r = c.call("reformat_file", json!({"file_path": app.to_str().unwrap()}));
    assert_eq!(texts(&r), ["OK"], "{r}");
    assert_eq!(
        fs::read_to_string(&app).unwrap(),
        "import os\n\nx = [1, 2]\n"
    );
    assert_eq!(s.stop(), 0);
    assert_all_gone(&servers, "after the stop");
}

#[test]
fn stdio_editor_diagnostics_take_precedence_for_their_file() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let a = sb.ws.join("a.py");
    let b = sb.ws.join("b.py");
    fs::write(&a, TYPE_ERROR).unwrap();
    fs::write(&b, TYPE_ERROR).unwrap();
    let mut s = serve(&sb, "threads", &["--stdio"]);
    let mut c = Session::new(&s);
    // One round trip: the bridge has taken the client's `initialized` before the editor speaks.
    c.call("getWorkspaceFolders", json!({}));
    s.send_line(
        &json!({"type": "diagnostics", "uri": uri(&a), "diagnostics": [{"message": "from the editor",
            "severity": "Warning", "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}]})
        .to_string(),
    );
    c.wait_note("the editor's diagnostics", |v| {
        v["method"] == "diagnostics_changed"
            && v["params"]["diagnostics"]
                .to_string()
                .contains("from the editor")
    });
    assert_eq!(
        messages(&c.diagnostics(json!({"uri": uri(&a)})), &a),
        ["from the editor"]
    );
    assert!(mentions(
        &messages(&c.diagnostics(json!({"uri": uri(&b)})), &b),
        LITERAL_TWO
    ));
    let all = c.diagnostics(json!({}));
    assert_eq!(messages(&all, &a), ["from the editor"], "{all:?}");
    assert!(mentions(&messages(&all, &b), LITERAL_TWO), "{all:?}");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

// ---- every way the bridge stops leaves no server behind ----

/// Asks about a Python file until a language server runs below `pid`; returns those processes.
fn start_a_server(port_token: (u16, String), app: &Path, pid: u32) -> (Client, Vec<procs::Proc>) {
    let (status, c) = client::connect(port_token.0, Some(&port_token.1));
    assert_eq!(status, 101);
    let mut c = c.unwrap();
    c.init();
    let id = c.call_tool("getDiagnostics", json!({"uri": uri(app)}));
    c.recv_until(SLOW, |v| v["id"] == json!(id))
        .expect("an answer");
    let servers = procs::descendants(pid);
    assert!(
        servers
            .iter()
            .any(|p| procs::cmdline(p.pid).contains("pyright")),
        "no pyright below the bridge"
    );
    (c, servers)
}

fn assert_all_gone(servers: &[procs::Proc], how: &str) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while servers.iter().any(|&p| procs::alive(p)) && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<String> = servers
        .iter()
        .filter(|&&p| procs::alive(p))
        .map(|p| procs::cmdline(p.pid))
        .collect();
    assert!(left.is_empty(), "after {how}, still running: {left:?}");
}

#[test]
fn servers_are_stopped_on_every_signal_and_when_stdin_closes() {
    require("pyright-langserver", "npm install -g pyright");
    for (how, rt) in [
        ("TERM", "threads"),
        ("INT", "smol"),
        ("HUP", "threads"),
        ("stdin", "smol"),
    ] {
        let sb = Sandbox::new();
        let app = sb.ws.join("app.py");
        fs::write(&app, TYPE_ERROR).unwrap();
        let stdio: &[&str] = if how == "stdin" { &["--stdio"] } else { &[] };
        let mut s = serve(&sb, rt, stdio);
        let (_c, servers) = start_a_server((s.port, s.token()), &app, s.child.id());
        if how == "stdin" {
            drop(s.stdin.take());
        } else {
            s.signal(how);
        }
        let stderr = s.stderr.clone();
        let status = exit_within(&mut s.child, WAIT, &|| stderr.text());
        // Ctrl-C's stop ends by SIGINT (so that a shell running it stops too), the others with 0.
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        let expected = match how {
            "INT" => (None, Some(2)),
            _ => (Some(0), None),
        };
        assert_eq!(
            (status.code(), signal),
            expected,
            "{how}: {}",
            stderr.text()
        );
        assert_all_gone(&servers, how);
    }
}

#[test]
fn servers_are_stopped_when_the_command_of_run_exits() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let log = sb.root().join("lsp.log");
    // The command waits for a line on its stdin, then exits 3.
    let mut child: Child = sb
        .command()
        .args([
            "run",
            "--lsp-log",
            log.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "read line; exit 3",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = Lines::collect(child.stderr.take().unwrap());
    let port = err.port();
    let lock: PathBuf = sb.lock_dir().join(format!("{port}.lock"));
    let token: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    let (_c, servers) = start_a_server(
        (port, token["authToken"].as_str().unwrap().to_string()),
        &app,
        child.id(),
    );
    child.stdin.as_mut().unwrap().write_all(b"done\n").unwrap();
    let status = exit_within(&mut child, WAIT, &|| err.text());
    assert_eq!(status.code(), Some(3));
    assert_all_gone(&servers, "run's command exited");
    // Nothing of the servers reached the terminal claude uses: their stderr went to the log.
    assert!(!err.text().contains("pyright"), "{}", err.text());
    assert!(log.exists());
}

#[test]
fn doctor_lists_the_servers_of_the_workspace() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.py"), "").unwrap();
    fs::write(sb.ws.join("b.go"), "").unwrap();
    // The walk listFiles makes: what .gitignore excludes is not counted (the old walk of its
    // own, with a fixed skip list, counted generated/c.py), nor what a link leads to.
    fs::write(sb.ws.join(".gitignore"), "generated/\n").unwrap();
    fs::create_dir(sb.ws.join("generated")).unwrap();
    fs::write(sb.ws.join("generated/c.py"), "").unwrap();
    fs::write(sb.ws.join("generated/d.go"), "").unwrap();
    std::os::unix::fs::symlink(sb.ws.join("a.py"), sb.ws.join("link.py")).unwrap();
    let o = sb
        .command()
        .args(["doctor", "--lsp", "go=/nonexistent/gopls"])
        .arg(&sb.ws)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("language servers"), "{out}");
    assert!(out.contains("missing: go (1 file)"), "{out}");
    assert!(out.contains("/nonexistent/gopls"), "{out}");
    if have("pyright-langserver") && have("ruff") {
        assert!(
            out.contains("found: python (1 file): pyright-langserver --stdio + ruff server"),
            "{out}"
        );
        // Found, not tried: said so, with where their starts are told.
        assert!(out.contains("servers found are not started here"), "{out}");
        // At connect (the default `--lsp-warm`), the file opened in python's servers: its one file.
        assert!(
            out.contains(&format!(
                "and would open {} in python's",
                sb.ws.join("a.py").display()
            )),
            "{out}"
        );
    }
    // --lsp again for a language: a set of its own, shown as such; past 4, refused.
    let o = sb
        .command()
        .args([
            "doctor",
            "--lsp",
            "py=/bin/cat",
            "--lsp",
            "python=/bin/cat -u",
        ])
        .arg(&sb.ws)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("found: python (1 file): /bin/cat + /bin/cat -u"),
        "{out}"
    );
    // A path that is no program, alone or beside one that runs: said as such (it was "install
    // /etc/passwd: ..." and "also runs /etc/passwd when installed: ...").
    let o = sb
        .command()
        .args(["doctor", "--lsp", "go=/etc/passwd"])
        .args(["--lsp", "python=/bin/cat", "--lsp", "python=/etc/passwd"])
        .arg(&sb.ws)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("  /etc/passwd is not executable: name a server program")
            && out.contains("  not run beside it: /etc/passwd is not executable")
            && !out.contains("install /etc/passwd")
            && !out.contains("also runs /etc/passwd"),
        "{out}"
    );
    // The first given not found, the one beside it found: runs alone, and the first is said
    // to be missing (it was left out silently: "ok: python: /bin/cat" and nothing more), by
    // `doctor` and by `serve` as it starts.
    let missing_first = [
        "--lsp",
        "python=surely-not-installed-pylsp",
        "--lsp",
        "python=/bin/cat",
    ];
    let o = sb
        .command()
        .arg("doctor")
        .args(missing_first)
        .arg(&sb.ws)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "found: python (1 file): /bin/cat\n  and surely-not-installed-pylsp first, when installed"
        ),
        "{out}"
    );
    let served = Served::start(&sb, &missing_first);
    let said = served.stderr.wait_for("language servers: python:");
    assert!(
        said.contains("language servers: python: /bin/cat; surely-not-installed-pylsp not found"),
        "{said}"
    );
    drop(served);
    let mut many = vec!["doctor".to_string()];
    for i in 0..5 {
        many.extend(["--lsp".into(), format!("python=/bin/cat -{i}")]);
    }
    let o = sb.command().args(&many).arg(&sb.ws).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("at most 4 language servers run together"),
        "{out}"
    );
    let o = sb
        .command()
        .args(["doctor", "--no-lsp"])
        .arg(&sb.ws)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("--no-lsp"));
}

/// The client's sequence on the first edit of a file the bridge was never asked about, which
/// already has an error: `openDiff` (accepted at once), the baseline `getDiagnostics {uri}`
/// before the write, the write, then `getDiagnostics {}`. The baseline is never an empty list
/// the bridge did not get from a server for that text (the client would forward the old error
/// as new): it holds the old error, or is an error ("not known yet", no baseline). The check
/// after the write holds the new error, and nothing the baseline had counts as new.
#[test]
fn the_first_edits_baseline_is_never_an_invented_empty_list() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let edited = format!("{TYPE_ERROR}label: str = total([1, 2])\n");
    let mut s = serve(&sb, "threads", &["--on-diff", "accept"]);
    let mut c = Session::new(&s);
    let r = c.call("openDiff", open_diff_args(&app, &edited, "t1"));
    assert_eq!(texts(&r)[0], "FILE_SAVED");
    let baseline = c.call("getDiagnostics", json!({"uri": uri(&app)}));
    let before = if is_error(&baseline) {
        assert!(texts(&baseline)[0].contains("not known yet"), "{baseline}");
        None
    } else {
        let list = match json_of(&baseline) {
            Value::Array(a) => a,
            other => panic!("not a list: {other}"),
        };
        let msgs = messages(&list, &app);
        assert!(
            mentions(&msgs, LITERAL_TWO),
            "the baseline of a file with an error: {baseline}"
        );
        Some(msgs)
    };
    fs::write(&app, &edited).unwrap();
    let all = c.diagnostics(json!({}));
    let after = messages(&all, &app);
    assert!(mentions(&after, INT_TO_STR), "{all:?}");
    if let Some(before) = before {
        let new: Vec<&String> = after.iter().filter(|m| !before.contains(m)).collect();
        assert!(
            new.iter().all(|m| !m.contains(LITERAL_TWO)),
            "the old error reported as new: {new:?}"
        );
    }
    assert_eq!(s.stop(), 0);
}

/// The first edit of a file, accepted while its language server is still starting (issue 32:
/// a cold pyright in a real workspace takes seconds, longer than a user reading the diff, and
/// `--on-diff accept` answers at once): the accept waits for the check of the text on disk that
/// the `openDiff` started, so the client's baseline right after it holds the file's old error,
/// and the check after the write holds the new one beside it. Before, the accepted contents went
/// to the server at once, the check of the old text ended unanswered and the baseline was "not
/// known yet": the client compared nothing, and the edit's new error never reached the model.
#[test]
fn an_edit_accepted_while_its_server_starts_gets_its_baseline() {
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    fs::write(&app, TYPE_ERROR).unwrap();
    let lsp = slow_pyright(&sb);
    let edited = format!("{TYPE_ERROR}label: str = total([1, 2])\n");
    for rt in RUNTIMES {
        fs::write(&app, TYPE_ERROR).unwrap();
        let mut s = serve(&sb, rt, &["--on-diff", "accept", "--lsp", &lsp]);
        let mut c = Session::new(&s);
        let r = c.call("openDiff", open_diff_args(&app, &edited, "t1"));
        assert_eq!(texts(&r)[0], "FILE_SAVED", "{rt}");
        // The baseline, asked before the client writes the file: the old text's error, not an
        // error ("not known yet").
        let baseline = messages(&c.diagnostics(json!({"uri": uri(&app)})), &app);
        assert!(mentions(&baseline, LITERAL_TWO), "{rt}: {baseline:?}");
        assert!(!mentions(&baseline, INT_TO_STR), "{rt}: {baseline:?}");
        fs::write(&app, &edited).unwrap();
        let after = messages(&c.diagnostics(json!({})), &app);
        assert!(mentions(&after, INT_TO_STR), "{rt}: {after:?}");
        assert!(mentions(&after, LITERAL_TWO), "{rt}: {after:?}");
        assert_eq!(s.stop(), 0, "{rt}");
    }
}

/// pyright, a second slower to start (the accept always comes before its first answer), as the
/// `--lsp` value for Python.
fn slow_pyright(sb: &Sandbox) -> String {
    require("pyright-langserver", "npm install -g pyright");
    let slow = sb.root().join("slow-pyright");
    fs::write(
        &slow,
        "#!/bin/sh\nsleep 1\nexec pyright-langserver --stdio\n",
    )
    .unwrap();
    let mut perms = fs::metadata(&slow).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(&slow, perms).unwrap();
    format!("python={}", slow.display())
}

/// The same with a stdio editor deciding, claude naming the file by a symbolic link in the
/// workspace: the editor is handed, and its decision names, the path as resolved, not claude's,
/// and the accept waits for the check started under that name too, so the baseline holds the old
/// text's diagnostics. Here each check takes the server 500 ms, longer than a baseline may wait,
/// and a change cancels the check under way (as pyright).
/// Before, the accept looked for a check under the resolved name only, found none, handed the
/// server the accepted contents at once, and the baseline was "not known yet".
#[test]
fn an_edit_accepted_by_the_editor_through_a_link_gets_its_baseline() {
    let sb = Sandbox::new();
    let (real, server) = fake_file_and_server(&sb, "latest-only");
    let link = sb.ws.join("link.fake");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // Nothing checked at connect: the openDiff's check is the only one of the text on disk.
    let args = ["--stdio", "--lsp", &server, "--lsp-warm", "diff"];
    let mut s = serve(&sb, "threads", &args);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let id = c.call_tool("openDiff", open_diff_args(&link, "fine\n", "t"));
    let tc = next_msg(&s, "tool_call", 0);
    assert_eq!(
        tc["arguments"]["old_file_path"],
        json!(real.to_string_lossy())
    );
    s.send_line(&json!({"type":"diff_decision","id":tc["id"],"decision":"accept"}).to_string());
    let r = c
        .recv_until(SLOW, |v| v["id"] == json!(id))
        .expect("the accept is answered");
    assert_eq!(texts(&r)[0], "FILE_SAVED");
    let baseline = call(&mut c, "getDiagnostics", json!({"uri": uri(&link)}));
    assert!(!is_error(&baseline), "{baseline}");
    assert!(baseline.to_string().contains("bad line 0"), "{baseline}");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// The stdio editor reports a file through a link to its folder (Vim's folder a link, claude's
/// working directory resolved): its report takes precedence over the server's for that file
/// under either name, in `getDiagnostics {uri}` as in `{}`, and the server's own for it is not
/// pushed. Before, `{uri}` under the other name answered the server's and `{}` the editor's:
/// the real client, comparing the two, forwarded the editor's as new.
#[test]
fn the_editors_report_through_a_link_takes_precedence_under_either_name() {
    let sb = Sandbox::new();
    let (real, server) = fake_file_and_server(&sb, "latest-only");
    let linked = sb.root().join("linked");
    std::os::unix::fs::symlink(&sb.ws, &linked).unwrap();
    let through = linked.join("a.fake");
    // Served as the editor names its folder (the link), as Vim starts it.
    let ws = linked.to_str().unwrap();
    let mut s = serve(
        &sb,
        "threads",
        &["--stdio", "--lsp", &server, "--workspace", ws],
    );
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let d = json!({"message":"from the editor","severity":"Error",
        "range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}});
    s.send_line(
        &json!({"type":"diagnostics","uri":format!("file://{}", through.display()),"diagnostics":[d]})
            .to_string(),
    );
    // (Its `diagnostics_changed` reached claude: the report is kept.)
    c.recv_until(SLOW, |v| v["method"] == "diagnostics_changed")
        .expect("the editor's report pushed");
    let asked = format!("file://{}", real.display());
    let one = call(&mut c, "getDiagnostics", json!({"uri": asked}));
    assert!(one.to_string().contains("from the editor"), "{one}");
    assert!(!one.to_string().contains("bad line 0"), "{one}");
    let all = call(&mut c, "getDiagnostics", json!({}));
    assert!(all.to_string().contains("from the editor"), "{all}");
    assert!(!all.to_string().contains("bad line 0"), "{all}");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A file asked about through a link (a linked file, a file in a linked folder): `{}` names it
/// as the client asked, not by the file the link leads to (the servers' name for it), so that
/// the real client, which matches the edited file by the URI it asked with, sees its new errors.
#[test]
fn a_file_asked_about_through_a_link_is_named_as_asked_in_the_answer_for_all() {
    let sb = Sandbox::new();
    let (real, server) = fake_file_and_server(&sb, "latest-only");
    let link = sb.ws.join("link.fake");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    fs::create_dir_all(sb.ws.join("pkg")).unwrap();
    fs::write(sb.ws.join("pkg/m.fake"), "error\n").unwrap();
    std::os::unix::fs::symlink(sb.ws.join("pkg"), sb.ws.join("pkglink")).unwrap();
    let in_linked = sb.ws.join("pkglink/m.fake");
    let s = Served::start(&sb, &["--lsp", &server]);
    let mut c = Session::new(&s);
    // As the real client asks: `file://` and the path as it is.
    let asked = |p: &Path| format!("file://{}", p.display());
    for p in [&link, &in_linked] {
        let answer = c.diagnostics(json!({"uri": asked(p)}));
        assert_eq!(answer.len(), 1, "{answer:?}");
    }
    let mut all = listed(&mut c);
    all.sort();
    let mut want = vec![asked(&link), asked(&in_linked)];
    want.sort();
    assert_eq!(all, want);
}

/// The lsp crate's scripted server (`fake_lsp.py`) as the `--lsp` value of the language `fake`,
/// in `mode`; and a file of that language in the workspace, holding an error.
fn fake_file_and_server(sb: &Sandbox, mode: &str) -> (PathBuf, String) {
    let f = sb.ws.join("a.fake");
    fs::write(&f, "error\n").unwrap();
    (f, fake_server(mode, None))
}

/// The lsp crate's scripted server as the `--lsp` value of the language `fake`, in `mode`,
/// keeping its records (each didClose's URI in `closed`, ...) in `state` when given.
fn fake_server(mode: &str, state: Option<&Path>) -> String {
    let state = state.map_or_else(String::new, |s| format!(" '{}'", s.display()));
    format!("fake=python3 '{}' {mode}{state}", fake_script().display())
}

/// A folder of the sandbox for the scripted server's records, and the URIs it was told to
/// close so far (read from it).
fn fake_records(sb: &Sandbox) -> (PathBuf, impl Fn() -> String) {
    let state = sb.root().join("fake-state");
    fs::create_dir_all(&state).unwrap();
    let closed = state.join("closed");
    (state, move || {
        fs::read_to_string(&closed).unwrap_or_default()
    })
}

/// `n` files of the scripted server's language (`f00.fake`...), each holding an error, served
/// with `server` (its `--lsp` value), each asked about once, so that the server has them open.
fn fake_files_asked_about(sb: &Sandbox, n: usize, server: &str) -> (Served, Session, Vec<PathBuf>) {
    let files: Vec<PathBuf> = (0..n)
        .map(|i| sb.ws.join(format!("f{i:02}.fake")))
        .collect();
    for f in &files {
        fs::write(f, "error\n").unwrap();
    }
    let s = Served::start(sb, &["--lsp", server]);
    let mut c = Session::new(&s);
    for f in &files {
        assert_eq!(c.diagnostics(json!({"uri": uri(f)})).len(), 1);
    }
    (s, c, files)
}

/// The files `getDiagnostics {}` lists, by URI.
fn listed(c: &mut Session) -> Vec<String> {
    c.diagnostics(json!({}))
        .iter()
        .map(|f| f["uri"].as_str().unwrap().to_owned())
        .collect()
}

/// A file deleted after its diagnostics were asked for: `getDiagnostics {}` no longer lists it
/// (its errors were answered for as long as the server kept it open: up to 200 files later), and
/// the server is told to close it (clangd keeps a precompiled preamble of several MB in the
/// temporary folder for each open file); also once 20 other files were asked about since (the
/// bridge reads again only the 16 it was asked about last). Asked about by name, the same.
#[test]
fn a_deleted_file_is_let_go_of() {
    let sb = Sandbox::new();
    let (state, closed) = fake_records(&sb);
    let server = fake_server("good", Some(&state));
    let (mut s, mut c, files) = fake_files_asked_about(&sb, 22, &server);
    let mut left: Vec<String> = files.iter().map(|f| uri(f)).collect();
    assert_eq!(listed(&mut c), left);
    // Deleted, one asked about long ago and one lately: the answer without a uri leaves them
    // out, and the server closes them.
    for gone in [&files[0], &files[21]] {
        fs::remove_file(gone).unwrap();
        left.retain(|u| *u != uri(gone));
        assert_eq!(listed(&mut c), left);
        wait_until("closed in the server", || closed().contains(&uri(gone)));
    }
    // Renamed away and asked about by name: [] and closed too.
    fs::rename(&files[1], sb.ws.join("c.txt")).unwrap();
    assert_eq!(
        c.diagnostics(json!({"uri": uri(&files[1])})),
        Vec::<Value>::new()
    );
    wait_until("renamed closed in the server", || {
        closed().contains(&uri(&files[1]))
    });
    left.retain(|u| *u != uri(&files[1]));
    assert_eq!(listed(&mut c), left);
    assert_eq!(s.stop(), 0);
}

/// Files the server has open that changed on disk since the bridge read them (the user's editor,
/// `git checkout`, a formatter; here rewritten behind the bridge's back) are handed to it again
/// before a question is answered: `getDiagnostics {}` lists what they hold now, not what the
/// server last had (it listed a fixed file's old error for good once 16 others were asked about
/// since; a file grown unreadable as text kept its old errors too). A file the server never had
/// changes nothing.
#[test]
fn files_changed_on_disk_are_handed_to_the_server_again() {
    let sb = Sandbox::new();
    let server = fake_server("good", None);
    let (mut s, mut c, files) = fake_files_asked_about(&sb, 20, &server);
    let mut left: Vec<String> = files.iter().map(|f| uri(f)).collect();
    assert_eq!(listed(&mut c), left);
    // Fixed (asked about long ago, and lately), and made no text.
    fs::write(&files[0], "fine\n").unwrap();
    fs::write(&files[19], "fine\n").unwrap();
    fs::write(&files[1], b"\xff error\n").unwrap();
    left.retain(|u| {
        ![&files[0], &files[1], &files[19]]
            .iter()
            .any(|f| *u == uri(f))
    });
    assert_eq!(listed(&mut c), left);
    // An error brought back in a file asked about long ago: found by the next question, here
    // one about another file.
    fs::write(&files[0], "error\nerror\n").unwrap();
    assert_eq!(c.diagnostics(json!({"uri": uri(&files[5])})).len(), 1);
    let all = c.diagnostics(json!({}));
    assert_eq!(messages(&all, &files[0]).len(), 2, "{all:?}");
    assert_eq!(s.stop(), 0);
}

/// A module changed on disk while pyright has it open (the user's editor, a branch switched):
/// a file importing it, never asked about before, is checked against its new text (it was
/// checked against the old one, which the server kept: no error, and the answer passed for
/// the file's own).
#[test]
fn an_import_changed_on_disk_is_seen_by_its_importers() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let b = sb.ws.join("b.py");
    let a = sb.ws.join("a.py");
    fs::write(&b, "def foo() -> int:\n    return 1\n").unwrap();
    fs::write(&a, "from b import foo\n\nx: int = foo()\n").unwrap();
    let mut s = serve(
        &sb,
        "threads",
        &["--lsp", "python=pyright-langserver --stdio"],
    );
    let mut c = Session::new(&s);
    assert_eq!(
        messages(&c.diagnostics(json!({"uri": uri(&b)})), &b),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(&c.diagnostics(json!({"uri": uri(&a)})), &a),
        Vec::<String>::new()
    );
    fs::write(&b, "def bar() -> int:\n    return 1\n").unwrap();
    ask_until(&mut c, &a, "b changed", |m| {
        mentions(m, "\"foo\" is unknown import symbol")
    });
    assert_eq!(s.stop(), 0);
}

/// Modules pyright never had open (claude's own tools, `git checkout`, another editor), created,
/// changed and deleted on disk: pyright read them from disk once, and is told of each change as
/// an editor tells it (`workspace/didChangeWatchedFiles`, for the globs it registered), so the
/// file importing them is checked against what they now hold (it kept what it read for good: a
/// missing module stayed missing, a changed one unchanged, a deleted one there).
#[test]
fn modules_never_opened_changed_on_disk_are_seen_by_their_importers() {
    require("pyright-langserver", "npm install -g pyright");
    let sb = Sandbox::new();
    let a = sb.ws.join("a.py");
    let b = sb.ws.join("b.py");
    let c_py = sb.ws.join("c.py");
    fs::write(&b, "def foo() -> int:\n    return 1\n").unwrap();
    fs::write(
        &a,
        "from b import foo\nfrom c import baz\n\nx: int = foo() + baz()\n",
    )
    .unwrap();
    let mut s = serve(
        &sb,
        "threads",
        &[
            "--lsp",
            "python=pyright-langserver --stdio",
            "--lsp-warm",
            "none",
        ],
    );
    let mut c = Session::new(&s);
    ask_until(&mut c, &a, "c missing", |m| {
        mentions(m, "\"c\" could not be resolved")
    });
    // Created before the next question.
    fs::write(&c_py, "def baz() -> int:\n    return 2\n").unwrap();
    ask_until(&mut c, &a, "c created", |m| m.is_empty());
    fs::write(&b, "def bar() -> int:\n    return 1\n").unwrap();
    ask_until(&mut c, &a, "b changed", |m| {
        mentions(m, "\"foo\" is unknown import symbol")
    });
    fs::remove_file(&b).unwrap();
    ask_until(&mut c, &a, "b deleted", |m| {
        mentions(m, "\"b\" could not be resolved")
    });
    assert_eq!(s.stop(), 0);
}

/// ruff's rules come from `pyproject.toml`, which it reads once and watches: the file changed on
/// disk, it is told, and the next answer follows the new rules.
#[test]
fn ruff_follows_a_pyproject_changed_on_disk() {
    require("ruff", "pip install ruff");
    let sb = Sandbox::new();
    let app = sb.ws.join("app.py");
    let config = sb.ws.join("pyproject.toml");
    fs::write(&app, "import os\n").unwrap();
    fs::write(&config, "[tool.ruff.lint]\nselect = [\"E\"]\n").unwrap();
    let mut s = serve(
        &sb,
        "threads",
        &["--lsp", "python=ruff server", "--lsp-warm", "none"],
    );
    let mut c = Session::new(&s);
    assert_eq!(
        messages(&c.diagnostics(json!({"uri": uri(&app)})), &app),
        Vec::<String>::new()
    );
    fs::write(&config, "[tool.ruff.lint]\nselect = [\"F\"]\n").unwrap();
    ask_until(&mut c, &app, "pyproject.toml changed", |m| {
        mentions(m, "imported but unused")
    });
    assert_eq!(s.stop(), 0);
}

/// A new file claude creates through an accepted `openDiff` is not taken as gone before claude
/// writes it: its baseline (asked before the write) and a `getDiagnostics {}` leave the accepted
/// contents in the server (it was closed, and the after-edit check had to open it again and wait
/// for a whole new check, past the client's bound with a slow server); once written, its
/// diagnostics are listed.
#[test]
fn a_new_files_accepted_contents_stay_in_the_server_until_written() {
    let sb = Sandbox::new();
    let (state, closed) = fake_records(&sb);
    let server = fake_server("good", Some(&state));
    let mut s = Served::start(&sb, &["--lsp", &server, "--on-diff", "accept"]);
    let mut c = Session::new(&s);
    let new = sb.ws.join("new.fake");
    let r = c.call("openDiff", open_diff_args(&new, "error\n", "t1"));
    assert_eq!(texts(&r)[0], "FILE_SAVED", "{r}");
    c.wait_note("diagnostics_changed for the accepted contents", |v| {
        v["method"] == "diagnostics_changed"
            && v["params"]["uri"] == json!(uri(&new))
            && v["params"]["diagnostics"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
    });
    // The client's baseline and a check of every file, before it writes the file.
    c.diagnostics(json!({"uri": uri(&new)}));
    c.diagnostics(json!({}));
    fs::write(&new, "error\n").unwrap();
    let all = c.diagnostics(json!({}));
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["uri"], json!(uri(&new)));
    let closed = closed();
    assert!(
        !closed.contains(&uri(&new)),
        "closed before it was written: {closed}"
    );
    assert_eq!(s.stop(), 0);
}

/// `getDiagnostics {}` names no file that does not exist, also when its bound was spent waiting
/// for a server (which publishes only for a file that is not there): the file's existence was
/// looked at within the bound only, and a ghost was listed past it.
#[test]
fn the_answer_for_all_files_names_none_that_does_not_exist_even_past_its_bound() {
    let sb = Sandbox::new();
    let (f, server) = fake_file_and_server(&sb, "ghost");
    let mut s = Served::start(&sb, &["--lsp", &server, "--on-diff", "reject"]);
    let mut c = Session::new(&s);
    // The document is asked about (and waited for, in vain: "not known yet"); the ghost's
    // errors come meanwhile.
    let r = c.call("getDiagnostics", json!({"uri": uri(&f)}));
    assert!(is_error(&r), "{r}");
    let ghost = sb.ws.join("ghost.fake");
    assert!(!ghost.exists());
    for round in 0..2 {
        let all = c.diagnostics(json!({}));
        assert!(
            all.iter().all(|d| d["uri"] != json!(uri(&ghost))),
            "round {round}: {all:?}"
        );
    }
    assert_eq!(s.stop(), 0);
}

/// Waits, at most 10 s, until `done`.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < give_up, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The lsp crate's scripted server.
fn fake_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lsp/tests/fake_lsp.py")
}

/// A diff accepted while its text's check still waits for the server (here one that never
/// answers its pulls, with a start wait of 60 s) and then the bridge told to stop: claude is
/// answered `FILE_SAVED`, as decided. Before, the stop gave jobs 2 s and only then stopped the
/// servers, so the accept, still waiting, was answered by the stop as a change nobody decided
/// ("nothing was accepted or written"), and the user's decision was lost.
#[test]
fn a_diff_accepted_while_its_check_waits_is_answered_at_a_stop() {
    let sb = Sandbox::new();
    let (f, server) = fake_file_and_server(&sb, "hang-pull");
    for rt in RUNTIMES {
        let mut s = Served::start(
            &sb,
            &[
                "--runtime",
                rt,
                "--on-diff",
                "accept",
                "--lsp",
                &server,
                "--lsp-warm",
                "diff",
                "--lsp-start-wait",
                "60s",
                "--diagnostics-wait",
                "60s",
            ],
        );
        let mut c = s.client();
        let id = c.call_tool("openDiff", open_diff_args(&f, "fine\n", "t"));
        // The accept is waiting for the server's check by now.
        std::thread::sleep(Duration::from_millis(1500));
        s.signal("TERM");
        let r = c.response(id);
        assert_eq!(texts(&r), ["FILE_SAVED", "fine\n"], "{rt}: {r}");
        assert_eq!(s.wait_exit(), 0, "{rt}");
    }
}

/// A `getDiagnostics` may wait as long as the user lets it (`--diagnostics-wait`,
/// `--lsp-start-wait`), past the 20 s a job is given for the file system: it is answered by the
/// servers' rule (here "not known yet": the server never answers its pulls), not cut at 20 s by
/// the job's bound with "the file system did not answer" (seen with waits of 30 s under load).
#[test]
fn a_diagnostics_wait_past_the_jobs_bound_is_kept() {
    let sb = Sandbox::new();
    let (f, server) = fake_file_and_server(&sb, "hang-pull");
    let log = sb.root().join("lsp.log");
    let mut s = Served::start(
        &sb,
        &[
            "--lsp",
            &server,
            "--lsp-log",
            log.to_str().unwrap(),
            "--diagnostics-wait",
            "21s",
        ],
    );
    let mut c = Session::new(&s);
    let r = c.call("getDiagnostics", json!({"uri": uri(&f)}));
    assert!(is_error(&r), "{r}");
    let text = &texts(&r)[0];
    assert!(text.contains("not known yet"), "{text}");
    // Naming the server waited for.
    assert!(
        text.contains("; waiting for ")
            && text.contains("hang-pull")
            && text.ends_with("no answer in time"),
        "{text}"
    );
    assert_eq!(s.stop(), 0);
}

/// An answer whose client left before it was ready is said as such on the terminal, naming the
/// client (it said "(answer dropped: the call is no longer pending)", which read as a fault, 20
/// times in a day's log, with no word of whose).
#[test]
fn an_answer_for_a_client_gone_names_it() {
    let sb = Sandbox::new();
    let (f, server) = fake_file_and_server(&sb, "hang-pull");
    let mut s = Served::start(&sb, &["--lsp", &server, "--diagnostics-wait", "1s"]);
    let mut c = s.client();
    c.call_tool("getDiagnostics", json!({"uri": uri(&f)}));
    drop(c);
    s.stderr.wait_for(
        "(#1: answer dropped: the call is no longer pending: the client left or cancelled it)",
    );
    assert_eq!(s.stop(), 0);
}

/// `--lsp-warm connect`, the default (issue 32, item 3): when claude connects, each language's
/// servers start and its most recently modified file is opened in them, its text on disk checked,
/// with no call naming it: the project is loaded before the first `openDiff`, and
/// `getDiagnostics {}` (what an editor with that file open answers) lists its error. The older
/// file is not opened. With `--lsp-warm diff` or `none`, connecting opens nothing: the same wait
/// lists nothing.
#[test]
fn warm_connect_opens_the_most_recently_modified_file() {
    require("pyright-langserver", "npm install -g pyright");
    let setup = || {
        let sb = Sandbox::new();
        let recent = sb.ws.join("recent.py");
        let older = sb.ws.join("older.py");
        fs::write(&recent, TYPE_ERROR).unwrap();
        fs::write(&older, OTHER_ERROR).unwrap();
        let f = fs::File::options().write(true).open(&older).unwrap();
        f.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
        (sb, recent, older)
    };

    let (sb, recent, older) = setup();
    let log = sb.root().join("lsp.log");
    // No `--lsp-warm`: the default.
    let s = serve(&sb, "threads", &[]);
    let started = Instant::now();
    let mut c = Session::new(&s);
    let answer = loop {
        let answer = c.diagnostics(json!({}));
        if mentions(&messages(&answer, &recent), LITERAL_TWO) {
            break answer;
        }
        assert!(
            started.elapsed() < SLOW,
            "recent.py was not opened at connect: {answer:?}; log: {}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        thread::sleep(Duration::from_millis(250));
    };
    let took = started.elapsed();
    assert!(messages(&answer, &older).is_empty(), "{answer:?}");
    let logged = fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(&format!(
            "--lsp-warm connect: python: server started, opening {}",
            recent.display()
        )),
        "{logged}"
    );
    drop(c);
    drop(s);

    // The same wait (and more) with the other modes: nothing is opened, no server starts.
    for mode in ["diff", "none"] {
        let (sb, recent, _) = setup();
        let s = serve(&sb, "threads", &["--lsp-warm", mode]);
        let mut c = Session::new(&s);
        thread::sleep((took * 2).max(Duration::from_secs(3)));
        assert!(
            procs::descendants(s.child.id()).is_empty(),
            "--lsp-warm {mode} started a server at connect"
        );
        let answer = c.diagnostics(json!({}));
        assert!(messages(&answer, &recent).is_empty(), "{mode}: {answer:?}");
        let logged = fs::read_to_string(sb.root().join("lsp.log")).unwrap_or_default();
        assert!(!logged.contains("opening"), "{mode}: {logged}");
    }
}

/// A server's diagnostics for a file outside the workspace (it may look at any file: a library's,
/// `/etc/passwd`) reach claude neither as `diagnostics_changed` nor in `getDiagnostics {}`, as
/// `getDiagnostics {uri}` already answered `[]` for such a file; they did both. Nor do those for
/// a link in the workspace to a file outside it, which a server reads as that file (a message
/// may quote it): they were passed on, the link's path being inside.
#[test]
fn a_servers_diagnostics_for_files_outside_the_workspace_are_not_passed_on() {
    let sb = Sandbox::new();
    // The lsp crate's scripted server, publishing for `/outside-the-workspace/lib.py` and for
    // `link-out.py` too.
    let script = fake_script();
    let outside = Path::new("/outside-the-workspace/lib.py");
    let app = sb.ws.join("app.py");
    fs::write(&app, "x = 1\nerror here\n").unwrap();
    let secret = sb.root().join("secret.py");
    fs::write(&secret, "token = 'not yours'\n").unwrap();
    let link = sb.ws.join("link-out.py");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let server = format!("python=python3 {} outside", script.display());
    let mut s = serve(&sb, "threads", &["--lsp", &server]);
    let mut c = Session::new(&s);
    let answer = c.diagnostics(json!({"uri": uri(&app)}));
    assert_eq!(messages(&answer, &app), ["bad line 1"], "{answer:?}");
    c.wait_note("the inside file's change", |v| {
        v["params"]["uri"] == json!(uri(&app))
    });
    let all = c.diagnostics(json!({}));
    assert_eq!(messages(&all, &app), ["bad line 1"], "{all:?}");
    for far in [outside, &link] {
        assert!(all.iter().all(|e| e["uri"] != json!(uri(far))), "{all:?}");
        assert!(
            c.notes
                .iter()
                .all(|v| v["params"]["uri"] != json!(uri(far))),
            "{:?}",
            c.notes
        );
    }
    assert_eq!(s.stop(), 0);
}
