//! A day's use (`day`): whether a bridge left running keeps its size. The client's sessions come
//! one after another, each as the real client's: connect, `initialize`, `ide_connected`,
//! `tools/list`, then edits (for a file: a baseline `getDiagnostics {uri}` waited 500 ms,
//! `openDiff`, the file written, `getDiagnostics {}` waited 2 s), `openFile`, `getOpenEditors`,
//! `getWorkspaceFolders`, a call of a tool that does not exist, `closeAllDiffTabs`, and the
//! connection ended (every other session without a Close, as a killed client ends it). With
//! `--lsp c` the workspace is C files with a compilation flags file and clangd answers the
//! diagnostics (edits add and remove an error in turn). `--warnings N` adds a file with N
//! warnings whose diagnostics each session asks for: a large message from the server.
//!
//! After every `--every` sessions it prints the bridge's private memory (`RssAnon`), its peak
//! resident size, its threads, its open descriptors, its child processes and their resident
//! memory: a figure that grows with the sessions, not with the workspace, is a leak.
//!
//! ```text
//! cargo build --release -p claude-ide-bridge-cli
//! cargo run --release -p claude-ide-bridge-bench-idle -- day [--sessions 600] [--every 100]
//!     [--edits 4] [--files 24] [--warnings N] [--lsp none|c] [--runtime threads|smol]... [--editor]
//!     [--bin PATH]
//! ```

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use claude_ide_bridge_testsupport::{bridge, client, procs};
use serde_json::{json, Value};

use crate::{die, field, Bridge};

struct Args {
    sessions: usize,
    every: usize,
    edits: usize,
    files: usize,
    warnings: usize,
    lsp: bool,
    editor: bool,
    runtimes: Vec<String>,
    bin: PathBuf,
}

fn args(rest: impl Iterator<Item = String>, bin: PathBuf) -> Args {
    let mut a = Args {
        sessions: 600,
        every: 100,
        edits: 4,
        files: 24,
        warnings: 0,
        lsp: false,
        editor: false,
        runtimes: Vec::new(),
        bin,
    };
    let mut it = rest;
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| die(&format!("{arg} needs a value")))
        };
        let mut number = |what: &str| -> usize {
            value()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or_else(|| die(&format!("{what}: a number above 0")))
        };
        match arg.as_str() {
            "--sessions" => a.sessions = number("--sessions"),
            "--every" => a.every = number("--every"),
            "--edits" => a.edits = number("--edits"),
            "--files" => a.files = number("--files"),
            "--warnings" => a.warnings = number("--warnings"),
            "--lsp" => {
                a.lsp = match value().as_str() {
                    "none" => false,
                    "c" => true,
                    other => die(&format!("--lsp {other}: none or c")),
                }
            }
            "--editor" => a.editor = true,
            "--runtime" => a.runtimes.push(value()),
            "--bin" => a.bin = PathBuf::from(value()),
            "--bench" => {}
            other => die(&format!(
                "unknown argument {other:?} (--sessions N, --every N, --edits N, --files N, \
                 --warnings N, --lsp none|c, --editor, --runtime R, --bin PATH)"
            )),
        }
    }
    if a.warnings > 0 && !a.lsp {
        die("--warnings needs --lsp c");
    }
    if a.runtimes.is_empty() {
        a.runtimes = vec!["threads".into(), "smol".into()];
    }
    a
}

/// The text of file `i` at edit `n`: every other edit has an error clangd reports
/// (an undeclared name), so the diagnostics held come and go.
fn source(i: usize, n: usize) -> String {
    let value = if n % 2 == 1 {
        format!("x + undeclared_{n}")
    } else {
        format!("x + {n}")
    };
    format!("#include \"common.h\"\n\nint f{i}(int x) {{\n    return {value};\n}}\n")
}

/// A file with `n` unused variables, each a warning under `-Wall`: a file whose diagnostics
/// make one large message from the server.
fn big_source(n: usize) -> String {
    let mut text = String::from("void big(void) {\n");
    for i in 0..n {
        text.push_str(&format!("    int unused_{i};\n"));
    }
    text.push_str("}\n");
    text
}

fn workspace(ws: &Path, files: usize, warnings: usize) {
    fs::create_dir_all(ws.join("src")).unwrap();
    let mut flags = String::from("-std=c11\n-Isrc\n");
    if warnings > 0 {
        flags.push_str("-Wall\n");
        fs::write(ws.join("src/big.c"), big_source(warnings)).unwrap();
    }
    fs::write(ws.join("compile_flags.txt"), flags).unwrap();
    fs::write(ws.join("src/common.h"), "#pragma once\nint shared(int);\n").unwrap();
    for i in 0..files {
        fs::write(ws.join(format!("src/f{i}.c")), source(i, 0)).unwrap();
    }
}

/// One client session, as the real client's (see the module's text). `n`: the session's number,
/// which chooses its files and whether it ends with a Close.
fn session(b: &Bridge, ws: &Path, a: &Args, n: usize, stats: &mut Stats) {
    let (status, c) = client::connect(b.port, Some(&b.token));
    if status != 101 {
        die(&format!(
            "session {n}: the bridge refused the connection: {status}"
        ));
    }
    let mut c = c.unwrap();
    // The answer to request `id`, waited for at most `within`.
    let mut answer = |c: &mut client::Client, id: u64, within: Duration| {
        let v = c.recv_until(within, |v| {
            v["id"] == json!(id) && v.get("method").is_none()
        });
        if v.is_none() {
            stats.late += 1;
        }
        v
    };
    let id = c.send_request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "claude-code", "version": "2.1.332"}}),
    );
    answer(&mut c, id, Duration::from_secs(10))
        .unwrap_or_else(|| die(&format!("session {n}: no answer to initialize")));
    c.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c.send_json(&json!({"jsonrpc": "2.0", "method": "ide_connected",
                        "params": {"pid": std::process::id()}}));
    let id = c.send_request("tools/list", json!({}));
    answer(&mut c, id, Duration::from_secs(10));
    if a.warnings > 0 {
        // The model reads the diagnostics of the file that has many.
        let uri = format!("file://{}", ws.join("src/big.c").display());
        let id = c.call_tool("getDiagnostics", json!({"uri": uri}));
        let v = answer(&mut c, id, Duration::from_secs(10));
        let text = v
            .as_ref()
            .and_then(|v| v["result"]["content"][0]["text"].as_str());
        stats.big_answers += usize::from(text.is_some_and(|t| t.contains("Unused variable")));
    }
    for e in 0..a.edits {
        let i = (n * a.edits + e) % a.files;
        let path = ws.join(format!("src/f{i}.c"));
        let uri = format!("file://{}", path.display());
        let p = path.to_string_lossy().into_owned();
        let edit = n * a.edits + e + 1;
        let text = source(i, edit);
        let id = c.call_tool("getDiagnostics", json!({"uri": uri}));
        answer(&mut c, id, Duration::from_millis(500));
        let id = c.call_tool(
            "openDiff",
            json!({"old_file_path": p, "new_file_path": p, "new_file_contents": text,
                   "tab_name": format!("edit {edit}")}),
        );
        answer(&mut c, id, Duration::from_secs(10));
        fs::write(&path, &text).unwrap();
        let id = c.call_tool("getDiagnostics", json!({}));
        if let Some(v) = answer(&mut c, id, Duration::from_secs(2)) {
            if v["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains(&format!("undeclared_{edit}")))
            {
                stats.fresh_errors += 1;
            }
        }
        stats.edits += 1;
        stats.errors_written += edit % 2;
        let id = c.call_tool("openFile", json!({"filePath": p}));
        answer(&mut c, id, Duration::from_secs(10));
    }
    for (name, args) in [
        ("getOpenEditors", json!({})),
        ("getWorkspaceFolders", json!({})),
        ("noSuchTool", json!({})),
        ("closeAllDiffTabs", json!({})),
    ] {
        let id = c.call_tool(name, args);
        answer(&mut c, id, Duration::from_secs(10));
    }
    if n.is_multiple_of(2) {
        c.close(1000);
        c.closed_within(Duration::from_secs(5));
    }
}

/// The editor's side of `serve --stdio`, played by this program: it answers every call the bridge
/// forwards (an `openDiff` accepted, anything else a text), and before each session reports what an
/// editor reports while the user works (selections, open tabs, a file's diagnostics, a mention).
struct Editor {
    stdin: Arc<Mutex<ChildStdin>>,
    calls: Arc<AtomicUsize>,
    errors: Arc<AtomicUsize>,
}

impl Editor {
    /// Starts `cmd` (with `--stdio` and `--lock-dir lock_dir`): the port from its `ready` line,
    /// the token from its lock file.
    fn start(cmd: &mut Command, lock_dir: &Path) -> (Result<bridge::Serving, String>, Editor) {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| die(&format!("{}: {e}", cmd.get_program().to_string_lossy())));
        let stdin = Arc::new(Mutex::new(child.stdin.take().unwrap()));
        let calls = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(AtomicUsize::new(0));
        let (ready, port) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let (answer, counted, refused) = (stdin.clone(), calls.clone(), errors.clone());
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let reply = match v["type"].as_str() {
                    Some("ready") => {
                        let _ = ready.send(v["port"].as_u64().unwrap_or(0) as u16);
                        continue;
                    }
                    Some("error") => {
                        refused.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Some("tool_call") if v["name"] == "openDiff" => {
                        json!({"type": "diff_decision", "id": v["id"], "decision": "accept"})
                    }
                    Some("tool_call") => json!({"type": "respond", "id": v["id"], "text": "ok"}),
                    _ => continue,
                };
                counted.fetch_add(1, Ordering::Relaxed);
                let mut w = answer.lock().unwrap();
                let _ = writeln!(w, "{reply}");
                let _ = w.flush();
            }
        });
        let serving = port
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "the bridge wrote no ready line in 30 s".to_string())
            .and_then(|port| {
                let token = bridge::token(lock_dir, port)?;
                Ok(bridge::Serving { child, port, token })
            });
        let editor = Editor {
            stdin,
            calls,
            errors,
        };
        (serving, editor)
    }

    fn send(&self, v: Value) {
        let mut w = self.stdin.lock().unwrap();
        let _ = writeln!(w, "{v}");
        let _ = w.flush();
    }

    /// What an editor reports while its user works on session `n`'s first file.
    fn report(&self, ws: &Path, a: &Args, n: usize) {
        let i = (n * a.edits) % a.files;
        let path = ws.join(format!("src/f{i}.c"));
        let p = path.to_string_lossy().into_owned();
        let at = |line: u32, ch: u32| json!({"line": line, "character": ch});
        for k in 0..5 {
            self.send(
                json!({"type": "selection_changed", "filePath": p, "text": "return",
                "selection": {"start": at(3, k), "end": at(3, k + 6)}}),
            );
        }
        let tabs: Vec<Value> = (0..a.edits)
            .map(|e| {
                let f = ws.join(format!("src/f{}.c", (n * a.edits + e) % a.files));
                json!({"uri": format!("file://{}", f.display()), "isActive": e == 0,
                       "isDirty": false, "label": format!("f{e}.c"), "languageId": "c"})
            })
            .collect();
        self.send(json!({"type": "open_editors", "tabs": tabs}));
        // The editor's word on a file the sessions do not edit (it would hide the language
        // server's diagnostics of an edited file), given and taken back in turn.
        let other = format!("file://{}", ws.join("src/common.h").display());
        let diagnostics = if n.is_multiple_of(2) {
            json!([{"message": format!("from the editor {n}"), "severity": "Warning",
                    "range": {"start": at(0, 0), "end": at(0, 1)}, "source": "editor"}])
        } else {
            Value::Null
        };
        self.send(json!({"type": "diagnostics", "uri": other, "diagnostics": diagnostics}));
        self.send(json!({"type": "at_mentioned", "filePath": p, "lineStart": 1, "lineEnd": 3}));
        self.send(json!({"type": "status"}));
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.calls.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }
}

#[derive(Default)]
struct Stats {
    edits: usize,
    errors_written: usize,
    fresh_errors: usize,
    late: usize,
    /// Answers for the file with `--warnings` that carried its warnings.
    big_answers: usize,
}

fn sample(pid: u32) -> String {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let fds = fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    let children = procs::descendants(pid);
    let children_kb: u64 = children.iter().map(|p| procs::rss_kib(p.pid)).sum();
    format!(
        "{:>10} {:>10} {:>8} {:>5} {:>9} {:>12}",
        field(&status, "RssAnon"),
        field(&status, "VmHWM"),
        field(&status, "Threads"),
        fds,
        children.len(),
        children_kb
    )
}

pub fn main(rest: impl Iterator<Item = String>, bin: PathBuf) {
    let a = args(rest, bin);
    println!(
        "a day's use: {} sessions of {} edits each over {} files, language server: {}{}",
        a.sessions,
        a.edits,
        a.files,
        if a.lsp { "clangd" } else { "none" },
        if a.warnings > 0 {
            format!(", a file with {} warnings read each session", a.warnings)
        } else {
            String::new()
        }
    );
    println!(
        "{:<8} {:>8} {:>7} {:>10} {:>10} {:>8} {:>5} {:>9} {:>12} {:>8}",
        "runtime",
        "sessions",
        "secs",
        "RssAnon kB",
        "VmHWM kB",
        "threads",
        "fds",
        "children",
        "children kB",
        "fresh"
    );
    for runtime in &a.runtimes {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        workspace(&ws, a.files, a.warnings);
        let lock_dir = dir.path().join("ide");
        let mut cmd = Command::new(&a.bin);
        cmd.args(["serve", "--runtime", runtime])
            .arg("--workspace")
            .arg(&ws)
            .arg("--lock-dir")
            .arg(&lock_dir)
            .current_dir(&ws)
            .env("HOME", dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env_remove("CLAUDE_IDE_BRIDGE_LOG");
        if a.lsp {
            cmd.args(["--lsp", "c=clangd"]);
        } else {
            cmd.arg("--no-lsp");
        }
        let (serving, editor) = if a.editor {
            // The editor decides the diffs.
            cmd.arg("--stdio");
            let (serving, editor) = Editor::start(&mut cmd, &lock_dir);
            (serving, Some(editor))
        } else {
            cmd.args(["--on-diff", "accept"]);
            (bridge::serve(&mut cmd, &lock_dir), None)
        };
        let serving = serving.unwrap_or_else(|e| {
            die(&format!(
                "{e} (cargo build --release -p claude-ide-bridge-cli)"
            ))
        });
        let mut b = Bridge {
            child: serving.child,
            port: serving.port,
            token: serving.token,
            _dir: dir,
        };
        let pid = b.child.id();
        let start = Instant::now();
        let mut stats = Stats::default();
        let row = |done: usize, stats: &Stats| {
            println!(
                "{:<8} {:>8} {:>7.0} {} {:>4}/{:<3}",
                runtime,
                done,
                start.elapsed().as_secs_f64(),
                sample(pid),
                stats.fresh_errors,
                stats.errors_written
            );
        };
        row(0, &stats);
        for n in 0..a.sessions {
            if let Some(e) = &editor {
                e.report(&ws, &a, n);
            }
            session(&b, &ws, &a, n, &mut stats);
            if (n + 1) % a.every == 0 {
                // Idle: the last session's end is seen, and what it left is let go of (the
                // program gives memory back after 1 s without work).
                thread::sleep(Duration::from_secs(2));
                row(n + 1, &stats);
            }
        }
        println!(
            "{runtime}: {} edits, {} with a new error, {} of those in the after-edit answer; \
             {} answers not in their wait",
            stats.edits, stats.errors_written, stats.fresh_errors, stats.late
        );
        if a.warnings > 0 {
            println!(
                "{runtime}: {} of {} sessions had the large file's warnings in their answer",
                stats.big_answers, a.sessions
            );
        }
        let children = procs::descendants(pid);
        b.stop(Duration::from_secs(15));
        let left = children.iter().filter(|p| procs::alive(**p)).count();
        println!(
            "{runtime}: stopped (SIGTERM): {left} of its {} child processes left running",
            children.len()
        );
        if let Some(e) = &editor {
            let (calls, errors) = e.counts();
            println!("{runtime}: the editor answered {calls} calls; the bridge refused {errors} of its lines");
        }
    }
}
