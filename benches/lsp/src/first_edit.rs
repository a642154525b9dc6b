//! The first edit on real projects nobody here wrote (issue 32, item 3): `first-edit` mode.
//!
//! ```text
//! cargo build --release -p claude-ide-bridge-cli -p claude-ide-bridge-bench-lsp
//! target/release/claude-ide-bridge-bench-lsp first-edit [--project django|requests|rxjs]...
//!     [--warm none|diff|connect]... [--reading SECONDS]... [--rounds N] [--gap SECONDS]
//!     [--bridge PATH] [--cache DIR]
//! ```
//!
//! Projects come from the registries into a cache under `target/` (`pip download --no-binary
//! :all:` of django 5.1.4 and requests 2.32.3, `npm pack rxjs@7.8.1`, which ships its TypeScript
//! `src/`), outside every timing; a project that cannot be fetched (offline) is skipped with a
//! message. For each project, `--lsp-warm` mode and reading time, each round starts `serve` on the
//! project's folder and plays the real client (docs/e2e.md, "What the real client does with
//! diagnostics") on a file that already has diagnostics:
//!
//! 1. WebSocket + MCP handshake (`initialize`, `notifications/initialized`, `ide_connected`,
//!    `tools/list`), then `--gap` seconds (the user typing, the model thinking);
//! 2. `openDiff` with the file plus one line holding a new type error naming a fresh tag; the
//!    editor's accept comes at once (`--on-diff accept`, reading time 0) or, for a reading time
//!    above 0, after that many seconds: `serve --stdio`, where this program is also the editor
//!    and answers the `tool_call` with a `diff_decision` accept then;
//! 3. on `FILE_SAVED`: `close_tab` twice, the baseline `getDiagnostics {uri}` given 500 ms while
//!    the disk still holds the old text, then the file written, then `getDiagnostics {}` given
//!    2 s; then `getDiagnostics {}` again every 250 ms until the new error is there (the truth).
//!
//! Recorded per round: the accept's time (the decision to `FILE_SAVED`: the bridge may first wait
//! for the file's servers); the time from the bridge's start to its first fresh answer for the file
//! (the baseline holding the file's real diagnostics, even late, or an answer holding the new
//! error); what the baseline was in time (the old diagnostics, an error, a wrong list, or nothing
//! in 500 ms); whether the after-edit answer within 2 s held the new error; what the client's rule
//! (new = in the after-edit answer and not in the baseline; no baseline, nothing compared) would
//! forward: the new error, and any old diagnostic taken as new. The file's real old diagnostics
//! are taken first from a bridge given all the time it needs (`--lsp-warm none`, long waits).
//!
//! Nothing is asserted: figures are printed, with the load average of the machine at each round.
//! Everything stays on 127.0.0.1; every wait is bounded.

use claude_ide_bridge_testsupport::{bridge, client};

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{die, ms};

/// How long the client gives its baseline, and its check after the write.
const BASELINE_BOUND: Duration = Duration::from_millis(500);
const AFTER_BOUND: Duration = Duration::from_secs(2);
/// The most one round waits for the truth (the new error in an answer), from the bridge's start.
const TRUTH_BOUND: Duration = Duration::from_secs(120);

struct Args {
    projects: Vec<String>,
    warm: Vec<String>,
    reading: Vec<f64>,
    rounds: usize,
    gap: f64,
    bridge: PathBuf,
    cache: PathBuf,
}

fn args(rest: impl Iterator<Item = String>, target: &Path) -> Args {
    let mut a = Args {
        projects: Vec::new(),
        warm: Vec::new(),
        reading: Vec::new(),
        rounds: 3,
        gap: 10.0,
        bridge: target.join("release/claude-ide-bridge"),
        cache: target.join("bench-first-edit"),
    };
    let mut it = rest;
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| die(&format!("{flag} needs a value")))
        };
        let seconds = |v: String| -> f64 {
            v.parse()
                .ok()
                .filter(|s: &f64| (0.0..=600.0).contains(s))
                .unwrap_or_else(|| die("seconds between 0 and 600"))
        };
        match flag.as_str() {
            "--project" => a.projects.push(value()),
            "--warm" => {
                let w = value();
                if !["none", "diff", "connect"].contains(&w.as_str()) {
                    die("--warm none|diff|connect");
                }
                a.warm.push(w)
            }
            "--reading" => a.reading.push(seconds(value())),
            "--rounds" => a.rounds = value().parse().unwrap_or_else(|_| die("a number")),
            "--gap" => a.gap = seconds(value()),
            "--bridge" => a.bridge = PathBuf::from(value()),
            "--cache" => a.cache = PathBuf::from(value()),
            _ => die(&format!("unknown argument {flag}")),
        }
    }
    // Started from the project's folder: a relative path would be looked up there.
    a.bridge = std::fs::canonicalize(&a.bridge).unwrap_or_else(|e| {
        die(&format!(
            "{}: {e} (cargo build --release -p claude-ide-bridge-cli)",
            a.bridge.display()
        ))
    });
    if a.projects.is_empty() {
        a.projects = vec!["django".into(), "requests".into(), "rxjs".into()];
    }
    if a.warm.is_empty() {
        a.warm = vec!["none".into(), "diff".into(), "connect".into()];
    }
    if a.reading.is_empty() {
        a.reading = vec![0.0, 3.0];
    }
    a
}

// ---- the projects ----

struct Project {
    name: &'static str,
    /// The file the registry's client leaves in the cache.
    archive: &'static str,
    /// How to get it into the cache (run there).
    fetch: &'static [&'static str],
    /// The folder the archive unpacks to: the workspace.
    root: &'static str,
    /// The file edited, relative to the workspace.
    file: &'static str,
    /// The line appended to the file: a type error whose message names `{tag}` (an identifier).
    new_error: &'static str,
}

const PROJECTS: [Project; 3] = [
    Project {
        name: "django",
        archive: "django-5.1.4.tar.gz",
        fetch: &[
            "pip",
            "download",
            "django==5.1.4",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            ".",
        ],
        root: "django-5.1.4",
        file: "django/core/paginator.py",
        new_error: "\n\nbench_new_error: int = \"{tag}\"\n",
    },
    Project {
        name: "requests",
        archive: "requests-2.32.3.tar.gz",
        fetch: &[
            "pip",
            "download",
            "requests==2.32.3",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            ".",
        ],
        root: "requests-2.32.3",
        file: "src/requests/sessions.py",
        new_error: "\n\nbench_new_error: int = \"{tag}\"\n",
    },
    Project {
        name: "rxjs",
        archive: "rxjs-7.8.1.tgz",
        fetch: &["npm", "pack", "rxjs@7.8.1", "--silent"],
        root: "package",
        file: "src/internal/Observable.ts",
        new_error: "\nexport const benchNewError: number = (1 as number).{tag};\n",
    },
];

/// The archive in the cache (case as the registry names it: pip keeps `Django-5.1.4.tar.gz`).
fn archive_in(cache: &Path, p: &Project) -> Option<PathBuf> {
    std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.eq_ignore_ascii_case(p.archive))
        })
}

/// Fetches (once) and unpacks (once) `p` into the cache; its workspace folder, or why not.
fn prepare(cache: &Path, p: &Project) -> Result<PathBuf, String> {
    std::fs::create_dir_all(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    if archive_in(cache, p).is_none() {
        println!("fetching {} ({})", p.name, p.fetch.join(" "));
        let out = Command::new("timeout")
            .arg("300")
            .args(p.fetch)
            .current_dir(cache)
            .output()
            .map_err(|e| format!("{}: {e}", p.fetch[0]))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(format!("`{}` failed (offline?): {last}", p.fetch.join(" ")));
        }
    }
    let archive = archive_in(cache, p).ok_or("the registry's client left no archive")?;
    let unpacked = cache.join(p.name);
    // The folder the archive unpacks to, in any case (Django's sdist: `django-5.1.4/`).
    let find_root = || {
        std::fs::read_dir(&unpacked).ok()?.flatten().find_map(|e| {
            let name = e.file_name();
            name.to_str()?
                .eq_ignore_ascii_case(p.root)
                .then(|| e.path())
        })
    };
    if find_root().is_none() {
        std::fs::create_dir_all(&unpacked).map_err(|e| e.to_string())?;
        let ok = Command::new("tar")
            .arg("xzf")
            .arg(&archive)
            .current_dir(&unpacked)
            .status()
            .map_err(|e| format!("tar: {e}"))?;
        if !ok.success() {
            return Err(format!("tar xzf {} failed", archive.display()));
        }
    }
    let root = find_root().ok_or_else(|| format!("{} has no {}", archive.display(), p.root))?;
    let root = std::fs::canonicalize(&root).map_err(|e| e.to_string())?;
    if !root.join(p.file).is_file() {
        return Err(format!("{} has no {}", root.display(), p.file));
    }
    Ok(root)
}

// ---- one bridge ----

struct Bridge {
    child: Child,
    /// The editor's side (`--stdio`): its input, and its output's lines.
    editor: Option<(ChildStdin, mpsc::Receiver<Value>)>,
    port: u16,
    token: String,
}

impl Bridge {
    /// Starts `serve` on `ws` with `extra` arguments; `stdio`: this program is the editor.
    fn start(bin: &Path, ws: &Path, dir: &Path, stdio: bool, extra: &[String]) -> Bridge {
        let lock_dir = dir.join("lock");
        let _ = std::fs::remove_dir_all(&lock_dir);
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--workspace")
            .arg(ws)
            .arg("--lock-dir")
            .arg(&lock_dir)
            .arg("--port")
            .arg("0")
            .args(extra)
            .current_dir(ws)
            // Its kept port and token go here, not into the user's state.
            .env("XDG_STATE_HOME", dir.join("state"))
            .stdin(if stdio { Stdio::piped() } else { Stdio::null() })
            .stdout(if stdio { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::piped());
        if stdio {
            cmd.arg("--stdio");
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            die(&format!(
                "{}: {e} (cargo build --release -p claude-ide-bridge-cli)",
                bin.display()
            ))
        });
        let (ptx, prx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        thread::spawn(move || {
            let mut told = false;
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let port = line.trim().strip_prefix("export CLAUDE_CODE_SSE_PORT=");
                if let Some(port) = port.and_then(|rest| rest.split(' ').next()) {
                    if !told {
                        told = ptx.send(port.parse::<u16>().unwrap_or(0)).is_ok();
                    }
                }
            }
        });
        let editor = stdio.then(|| {
            let (tx, rx) = mpsc::channel();
            let out = child.stdout.take().unwrap();
            thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if let Ok(v) = serde_json::from_str::<Value>(&line) {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                }
            });
            (child.stdin.take().unwrap(), rx)
        });
        let port = prx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| die("the bridge printed no port in 30 s"));
        let token = bridge::token(&lock_dir, port).unwrap_or_default();
        Bridge {
            child,
            editor,
            port,
            token,
        }
    }

    /// The editor's next `tool_call` of `openDiff` (`--stdio`), within `within`: its id.
    fn diff_call(&mut self, within: Duration) -> Option<u64> {
        let (_, rx) = self.editor.as_mut()?;
        let give_up = Instant::now() + within;
        loop {
            let v = rx
                .recv_timeout(give_up.saturating_duration_since(Instant::now()))
                .ok()?;
            if v["type"] == "tool_call" && v["name"] == "openDiff" {
                return v["id"].as_u64();
            }
        }
    }

    fn accept(&mut self, id: u64) {
        if let Some((stdin, _)) = self.editor.as_mut() {
            let line = json!({"type": "diff_decision", "id": id, "decision": "accept"});
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        drop(self.editor.take());
        bridge::stop(&mut self.child, Duration::from_secs(15));
    }
}

// ---- the client ----

/// A client that keeps every answer with the moment it came, so that an answer the real client
/// stopped waiting for is still seen (and timed) when it arrives.
struct Session {
    c: client::Client,
    answers: HashMap<u64, (Value, Instant)>,
}

impl Session {
    fn connect(b: &Bridge) -> Session {
        let (status, c) = client::connect(b.port, Some(&b.token));
        if status != 101 {
            die(&format!("the bridge refused the connection: {status}"));
        }
        let mut s = Session {
            c: c.unwrap(),
            answers: HashMap::new(),
        };
        // As the real client: the handshake, ide_connected, the tools' list.
        let id = s.c.send_request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "claude-code", "version": "2.1.332"}}),
        );
        s.wait(id, Duration::from_secs(10))
            .unwrap_or_else(|| die("no answer to initialize"));
        s.c.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s.c.send_json(&json!({"jsonrpc": "2.0", "method": "ide_connected",
                              "params": {"pid": std::process::id()}}));
        let id = s.c.send_request("tools/list", json!({}));
        s.wait(id, Duration::from_secs(10))
            .unwrap_or_else(|| die("no answer to tools/list"));
        s
    }

    fn call(&mut self, name: &str, args: Value) -> (u64, Instant) {
        let id = self.c.call_tool(name, args);
        (id, Instant::now())
    }

    /// The answer to `id` and when it came, waiting at most `within` (answers to other ids that
    /// come meanwhile are kept; one read past `within`, from a buffer that held several
    /// messages, is not given).
    fn wait(&mut self, id: u64, within: Duration) -> Option<(Value, Instant)> {
        let give_up = Instant::now() + within;
        loop {
            if let Some(a) = self.answers.get(&id) {
                return (a.1 <= give_up).then(|| a.clone());
            }
            let left = give_up.checked_duration_since(Instant::now())?;
            let v = self.c.recv_json(left)?;
            if let Some(got) = v.get("id").and_then(Value::as_u64) {
                if v.get("method").is_none() {
                    self.answers.insert(got, (v, Instant::now()));
                }
            }
        }
    }
}

/// What an answer to `getDiagnostics` says of `uri`: `Err(text)` for a tool error, else the
/// file's diagnostics (`None`: the file is not in the answer).
fn of_file(answer: &Value, uri: &str) -> Result<Option<Vec<Value>>, String> {
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    if answer["result"]["isError"] == json!(true) || answer.get("error").is_some() {
        let why = if text.is_empty() {
            answer["error"].to_string()
        } else {
            text.to_owned()
        };
        return Err(why);
    }
    let list: Value = serde_json::from_str(text).map_err(|_| format!("not JSON: {text}"))?;
    Ok(list.as_array().and_then(|files| {
        files
            .iter()
            .find(|f| f["uri"] == json!(uri))
            .map(|f| f["diagnostics"].as_array().cloned().unwrap_or_default())
    }))
}

// ---- one round ----

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Baseline {
    /// The file's real diagnostics for its old text.
    Old,
    /// A tool error: the client keeps no baseline for the file.
    Error,
    /// A list that is not the file's: empty, or other diagnostics (wrong).
    Wrong,
    /// No answer within 500 ms (the client counts a timeout).
    Late,
}

struct Round {
    /// The decision → `FILE_SAVED` (the bridge may wait for the file's servers first).
    accept: Duration,
    /// The bridge's start → its first fresh answer for the file.
    first_fresh: Option<Duration>,
    baseline: Baseline,
    /// The baseline's answer time.
    baseline_time: Option<Duration>,
    /// The baseline's error or wrong list, when it was one; for one past 500 ms, what it was
    /// and when it came.
    baseline_note: Option<String>,
    /// The answer to `getDiagnostics {}` within 2 s held the new error.
    after_new: bool,
    after_time: Option<Duration>,
    /// The client's rule: the new error forwarded to the model.
    told_new: bool,
    /// The client's rule: old diagnostics taken as new.
    old_as_new: usize,
    /// The bridge's start → the first answer holding the new error.
    truth_at: Option<Duration>,
    /// The longest getDiagnostics answer of the round.
    longest: Duration,
    load: String,
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The file's diagnostics for its old text, from a bridge given all the time it needs.
fn truth(a: &Args, ws: &Path, file: &Path, dir: &Path) -> Result<Vec<Value>, String> {
    let extra: Vec<String> = [
        "--on-diff",
        "reject",
        "--lsp-warm",
        "none",
        "--diagnostics-wait",
        "60s",
        "--lsp-start-wait",
        "120s",
    ]
    .map(String::from)
    .to_vec();
    let b = Bridge::start(&a.bridge, ws, dir, false, &extra);
    let mut s = Session::connect(&b);
    let uri = format!("file://{}", file.display());
    let give_up = Instant::now() + Duration::from_secs(300);
    let mut last = String::new();
    // The same list twice, 5 s apart: a server that publishes may say nothing before its project
    // is loaded.
    let mut seen: Option<Vec<Value>> = None;
    while Instant::now() < give_up {
        let (id, _) = s.call("getDiagnostics", json!({ "uri": uri }));
        let Some((v, _)) = s.wait(id, Duration::from_secs(200)) else {
            break;
        };
        match of_file(&v, &uri) {
            Ok(d) => {
                let d = d.unwrap_or_default();
                if seen.as_ref() == Some(&d) {
                    return Ok(d);
                }
                seen = Some(d);
                thread::sleep(Duration::from_secs(5));
            }
            Err(e) => {
                last = e;
                thread::sleep(Duration::from_millis(500));
            }
        }
    }
    Err(format!("no fresh answer in 300 s: {last}"))
}

#[allow(clippy::too_many_arguments)]
fn round(
    a: &Args,
    ws: &Path,
    file: &Path,
    original: &str,
    p: &Project,
    old: &[Value],
    warm: &str,
    reading: f64,
    n: usize,
    dir: &Path,
) -> Round {
    std::fs::write(file, original).unwrap();
    let uri = format!("file://{}", file.display());
    let tag = format!("first_edit_{warm}_{}_{n}", (reading * 10.0) as u64);
    let edited = format!("{original}{}", p.new_error.replace("{tag}", &tag));
    let load = load_average();
    let stdio = reading > 0.0;
    let mut extra = vec![
        "--lsp-warm".to_string(),
        warm.to_string(),
        "--lsp-log".into(),
        dir.join("lsp.log").to_string_lossy().into_owned(),
    ];
    if !stdio {
        extra.extend(["--on-diff".into(), "accept".into()]);
    }
    let t0 = Instant::now();
    let mut b = Bridge::start(&a.bridge, ws, dir, stdio, &extra);
    let mut s = Session::connect(&b);
    thread::sleep(Duration::from_secs_f64(a.gap));

    // The edit.
    let (diff, diff_sent) = s.call(
        "openDiff",
        json!({"old_file_path": file, "new_file_path": file, "new_file_contents": edited,
               "tab_name": format!("✻ [Claude Code] {} ⧉", p.file)}),
    );
    if stdio {
        let id = b
            .diff_call(Duration::from_secs(30))
            .unwrap_or_else(|| die("the editor got no openDiff in 30 s"));
        thread::sleep(Duration::from_secs_f64(reading));
        b.accept(id);
    }
    let (saved, saved_at) = s
        .wait(diff, Duration::from_secs(60))
        .unwrap_or_else(|| die("no answer to openDiff in 60 s"));
    // The accept's own time: from the decision (the reading time after the openDiff) to FILE_SAVED.
    let accept = saved_at
        .duration_since(diff_sent)
        .saturating_sub(Duration::from_secs_f64(reading));
    if saved["result"]["content"][0]["text"] != "FILE_SAVED" {
        die(&format!("openDiff not accepted: {saved}"));
    }
    for _ in 0..2 {
        let (id, _) = s.call(
            "close_tab",
            json!({"tab_name": format!("✻ [Claude Code] {} ⧉", p.file)}),
        );
        let _ = s.wait(id, Duration::from_secs(5));
    }

    // The baseline, while the disk holds the old text.
    let mut longest = Duration::ZERO;
    let mut first_fresh: Option<Instant> = None;
    let (bid, bsent) = s.call("getDiagnostics", json!({ "uri": uri }));
    let in_time = s.wait(bid, BASELINE_BOUND);
    let (baseline, baseline_list, baseline_note) = match &in_time {
        None => (Baseline::Late, None, None),
        Some((v, _)) => match of_file(v, &uri) {
            Err(e) => (Baseline::Error, None, Some(e)),
            Ok(d) => {
                let d = d.unwrap_or_default();
                if d.as_slice() == old {
                    (Baseline::Old, Some(d), None)
                } else {
                    let note = format!("{} diagnostics where the file has {}", d.len(), old.len());
                    (Baseline::Wrong, Some(d), Some(note))
                }
            }
        },
    };
    let baseline_time = in_time.as_ref().map(|(_, at)| at.duration_since(bsent));

    // The client writes the file, then asks about every file.
    std::fs::write(file, &edited).unwrap();
    let (aid, asent) = s.call("getDiagnostics", json!({}));
    let after = s.wait(aid, AFTER_BOUND);
    let after_time = after.as_ref().map(|(_, at)| at.duration_since(asent));
    let after_list = after
        .as_ref()
        .and_then(|(v, _)| of_file(v, &uri).ok())
        .map(Option::unwrap_or_default);
    let holds_new = |d: &[Value]| d.iter().any(|x| x["message"].to_string().contains(&tag));
    let after_new = after_list.as_deref().is_some_and(holds_new);
    // The client's rule: only with a baseline and an answer in time.
    let (mut told_new, mut old_as_new) = (false, 0);
    if let (Some(before), Some(after)) = (&baseline_list, &after_list) {
        for d in after.iter().filter(|d| !before.contains(d)) {
            if holds_new(std::slice::from_ref(d)) {
                told_new = true;
            } else {
                old_as_new += 1;
            }
        }
    }

    // Until the truth: the new error in an answer.
    let mut truth_at = after_new.then(|| after.as_ref().unwrap().1);
    if after.is_some() {
        longest = longest.max(after_time.unwrap());
    }
    let mut pending_after = after.is_none().then_some((aid, asent));
    while truth_at.is_none() && t0.elapsed() < TRUTH_BOUND {
        // An answer still awaited (the after-edit one, past its 2 s) is taken when it comes.
        let (id, sent) = match pending_after.take() {
            Some(p) => p,
            None => {
                thread::sleep(Duration::from_millis(250));
                s.call("getDiagnostics", json!({}))
            }
        };
        let Some((v, at)) = s.wait(id, TRUTH_BOUND.saturating_sub(t0.elapsed())) else {
            break;
        };
        longest = longest.max(at.duration_since(sent));
        if of_file(&v, &uri)
            .ok()
            .flatten()
            .as_deref()
            .is_some_and(holds_new)
        {
            truth_at = Some(at);
        }
    }
    // The baseline's answer, even past the client's 500 ms: the bridge's first fresh answer
    // when it held the old diagnostics.
    let mut baseline_note = baseline_note;
    if let Some((v, at)) = s.answers.get(&bid).cloned() {
        longest = longest.max(at.duration_since(bsent));
        let said = of_file(&v, &uri);
        if said.as_ref().ok().cloned().flatten().as_deref() == Some(old) {
            first_fresh = Some(at);
        }
        if baseline == Baseline::Late {
            let what = match said {
                Ok(Some(d)) if d.as_slice() == old => "the old diagnostics".to_owned(),
                Ok(d) => format!("{} diagnostics", d.unwrap_or_default().len()),
                Err(e) => format!("error: {e}"),
            };
            let late = at.duration_since(bsent);
            baseline_note = Some(format!("came after {:.0} ms: {what}", ms(late)));
        }
    }
    if let Some(t) = truth_at {
        first_fresh = Some(first_fresh.map_or(t, |f| f.min(t)));
    }
    drop(s);
    drop(b);
    std::fs::write(file, original).unwrap();
    Round {
        accept,
        first_fresh: first_fresh.map(|t| t.duration_since(t0)),
        baseline,
        baseline_time,
        baseline_note,
        after_new,
        after_time,
        told_new,
        old_as_new,
        truth_at: truth_at.map(|t| t.duration_since(t0)),
        longest,
        load,
    }
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "—".into(), |d| format!("{:.1}", d.as_secs_f64()))
}

pub fn main(rest: impl Iterator<Item = String>, target: &Path) {
    let a = args(rest, target);
    let dir = tempfile::tempdir().unwrap();
    println!(
        "first edit on real projects: {} round(s) per configuration, gap {} s after connecting, bridge {}",
        a.rounds,
        a.gap,
        a.bridge.display()
    );
    let mut rows = Vec::new();
    for p in PROJECTS
        .iter()
        .filter(|p| a.projects.iter().any(|n| n == p.name))
    {
        let ws = match prepare(&a.cache, p) {
            Ok(ws) => ws,
            Err(e) => {
                println!("skipped {}: {e}", p.name);
                continue;
            }
        };
        let file = ws.join(p.file);
        let original = std::fs::read_to_string(&file).unwrap();
        let old = match truth(&a, &ws, &file, dir.path()) {
            Ok(d) => d,
            Err(e) => {
                println!("skipped {}: the file's own diagnostics: {e}", p.name);
                continue;
            }
        };
        println!(
            "{}: {} ({} diagnostics before the edit: {})",
            p.name,
            p.file,
            old.len(),
            old.iter()
                .take(2)
                .map(|d| d["message"]
                    .as_str()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or(""))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        for warm in &a.warm {
            for &reading in &a.reading {
                for n in 0..a.rounds {
                    let r = round(
                        &a,
                        &ws,
                        &file,
                        &original,
                        p,
                        &old,
                        warm,
                        reading,
                        n,
                        dir.path(),
                    );
                    println!(
                        "  {} {warm} reading {reading} s #{n}: load {}; accept {:.1} s; first fresh {} s; baseline {:?} ({} ms{}); after 2 s holds new: {} ({} ms); told new: {}; old as new: {}; truth {} s; longest answer {:.1} s",
                        p.name,
                        r.load,
                        r.accept.as_secs_f64(),
                        secs(r.first_fresh),
                        r.baseline,
                        r.baseline_time.map_or_else(|| "—".into(), |t| format!("{:.0}", ms(t))),
                        r.baseline_note.as_deref().map(|n| format!(", {}", n.chars().take(120).collect::<String>())).unwrap_or_default(),
                        r.after_new,
                        r.after_time.map_or_else(|| ">2000".into(), |t| format!("{:.0}", ms(t))),
                        r.told_new,
                        r.old_as_new,
                        secs(r.truth_at),
                        r.longest.as_secs_f64(),
                    );
                    rows.push((p.name, warm.clone(), reading, r));
                }
            }
        }
    }
    println!();
    println!("| project | --lsp-warm | reading | accept → FILE_SAVED (s) | start → first fresh answer (s) | baseline in 500 ms: old / error / wrong / none | after-edit answer in 2 s holds the new error | client forwards the new error | old taken as new | start → truth (s) | longest answer (s) | load average |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut keys: Vec<(&str, String, f64)> = Vec::new();
    for (p, w, r, _) in &rows {
        if !keys.iter().any(|k| k.0 == *p && k.1 == *w && k.2 == *r) {
            keys.push((p, w.clone(), *r));
        }
    }
    for (p, w, reading) in keys {
        let rs: Vec<&Round> = rows
            .iter()
            .filter(|x| x.0 == p && x.1 == w && x.2 == reading)
            .map(|x| &x.3)
            .collect();
        let count = |b: Baseline| rs.iter().filter(|r| r.baseline == b).count();
        let list =
            |f: &dyn Fn(&Round) -> String| rs.iter().map(|r| f(r)).collect::<Vec<_>>().join(", ");
        println!(
            "| {p} | {w} | {reading} s | {} | {} | {} / {} / {} / {} | {} of {} | {} of {} | {} | {} | {} | {} |",
            list(&|r| format!("{:.1}", r.accept.as_secs_f64())),
            list(&|r| secs(r.first_fresh)),
            count(Baseline::Old),
            count(Baseline::Error),
            count(Baseline::Wrong),
            count(Baseline::Late),
            rs.iter().filter(|r| r.after_new).count(),
            rs.len(),
            rs.iter().filter(|r| r.told_new).count(),
            rs.len(),
            rs.iter().map(|r| r.old_as_new).sum::<usize>(),
            list(&|r| secs(r.truth_at)),
            list(&|r| format!("{:.1}", r.longest.as_secs_f64())),
            list(&|r| r.load.split(' ').next().unwrap_or("?").to_owned()),
        );
    }
}
