//! Diagnostics benchmark (issue 14): how long after a file is written on disk does a `getDiagnostics`
//! answer reflect it, against the language server's own latency for that version, in the same run.
//!
//! ```text
//! cargo build --release -p claude-ide-bridge-cli
//! cargo run --release -p claude-ide-bridge-bench-lsp -- [--iterations N] [--cli-iterations N]
//!     [--runtime threads|smol] [--bridge PATH] [--baseline PATH]
//! ```
//!
//! Three ways of getting pyright's diagnostics for one Python file, interleaved, each measured from
//! the moment new contents (with a type error naming a fresh literal) are on disk until an answer
//! naming that literal arrives:
//!
//! - **server**: this program speaks LSP to its own `pyright-langserver --stdio` processes and times
//!   `didChange` (full text, version n) to the diagnostics of version n: answered to a pull
//!   (`textDocument/diagnostic`, the way the bridge's client asks, and so the floor), and published
//!   (`publishDiagnostics`, the way a client that declares no pulls is told).
//! - **bridge**: `claude-ide-bridge serve` with its language servers on; this program is a WebSocket
//!   client calling `getDiagnostics {uri}` (the bridge reads the file, syncs it, waits for pyright).
//! - **cli**: `pyright --outputjson FILE` per call, what a bridge running the linter's command line
//!   per call does.
//!
//! It also reports resident memory (Linux `/proc`): the bridge idle with no file asked (its servers
//! not started) against the same bridge with `--no-lsp` and, with `--baseline PATH`, another build
//! (the program before language servers); then the bridge and its servers once a file was asked.
//!
//! Nothing is asserted: figures are printed. Everything stays on 127.0.0.1; every wait is bounded.

mod first_edit;

use claude_ide_bridge_testsupport::{bridge, client, lsp_frames, procs};

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

struct Args {
    iterations: usize,
    cli_iterations: usize,
    runtime: String,
    bridge: PathBuf,
    baseline: Option<PathBuf>,
}

/// The workspace's `target/` folder.
fn target() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

fn args() -> Args {
    let target = target();
    let mut a = Args {
        iterations: 30,
        cli_iterations: 10,
        runtime: "threads".into(),
        bridge: target.join("release/claude-ide-bridge"),
        baseline: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| die(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--iterations" => a.iterations = value().parse().unwrap_or_else(|_| die("a number")),
            "--cli-iterations" => {
                a.cli_iterations = value().parse().unwrap_or_else(|_| die("a number"))
            }
            "--runtime" => a.runtime = value(),
            "--bridge" => a.bridge = PathBuf::from(value()),
            "--baseline" => a.baseline = Some(PathBuf::from(value())),
            _ => die(&format!("unknown argument {flag}")),
        }
    }
    a
}

fn die(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(2)
}

/// Python source whose only error names `tag`.
fn source(tag: &str) -> String {
    format!(
        "def total(xs: list[int]) -> int:\n    return sum(xs)\n\n\ncount: int = \"{tag}\"\nother: int = total([1, 2])\n"
    )
}

// ---- a minimal LSP client for the floor ----

struct Lsp {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
    next_id: u64,
    pull: bool,
}

impl Lsp {
    /// Starts pyright on `root`. `pull`: the client declares pull diagnostics (as the bridge's does),
    /// and pyright then answers `textDocument/diagnostic` instead of publishing.
    fn start(root: &Path, pull: bool) -> Lsp {
        let mut child = Command::new("pyright-langserver")
            .arg("--stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| die(&format!("pyright-langserver: {e} (npm install -g pyright)")));
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            while let Some(v) = lsp_frames::read(&mut out) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut lsp = Lsp {
            child,
            stdin,
            rx,
            next_id: 1,
            pull,
        };
        let uri = format!("file://{}", root.display());
        let mut text_caps = json!({"publishDiagnostics": {"versionSupport": true}});
        if pull {
            text_caps["diagnostic"] = json!({"dynamicRegistration": true});
        }
        let id = lsp.request(
            "initialize",
            json!({"processId": std::process::id(), "rootUri": uri,
                   "workspaceFolders": [{"uri": uri, "name": "bench"}],
                   "capabilities": {"textDocument": text_caps,
                                    "workspace": {"configuration": true, "workspaceFolders": true,
                                                  "diagnostics": {"refreshSupport": true}}}}),
        );
        lsp.wait(|v| v.get("method").is_none() && v["id"] == json!(id));
        lsp.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        if pull {
            lsp.wait(|v| {
                v["method"] == "client/registerCapability"
                    && v.to_string().contains("textDocument/diagnostic")
            });
        }
        lsp
    }

    /// Hands `text` to the server as version `version` (opened at 1) and waits for its
    /// diagnostics of that version: the publication, or the answer to a pull.
    fn diagnostics(&mut self, uri: &str, version: i64, text: &str) -> Value {
        if version == 1 {
            self.send(
                json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}}),
            );
        } else {
            self.send(
                json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"text": text}]}}),
            );
        }
        if self.pull {
            let id = self.request(
                "textDocument/diagnostic",
                json!({"textDocument": {"uri": uri}}),
            );
            return self.wait(|v| v.get("method").is_none() && v["id"] == json!(id));
        }
        self.wait(|v| {
            v["method"] == "textDocument/publishDiagnostics"
                && v["params"]["uri"] == uri
                && v["params"]["version"] == json!(version)
        })
    }

    fn send(&mut self, v: Value) {
        lsp_frames::write(&mut self.stdin, &v).unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The next message matching `pred` (a server's request included), answering the server's
    /// requests on the way.
    fn wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let give_up = Instant::now() + WAIT;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            let v = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| die("pyright-langserver did not answer in 60 s"));
            if v.get("method").is_some() && v.get("id").is_some() {
                let result = match v["method"].as_str() {
                    Some("workspace/configuration") => {
                        let n = v["params"]["items"].as_array().map_or(0, Vec::len);
                        Value::Array(vec![Value::Null; n])
                    }
                    _ => Value::Null,
                };
                self.send(json!({"jsonrpc": "2.0", "id": v["id"], "result": result}));
            }
            if pred(&v) {
                return v;
            }
        }
    }
}

impl Drop for Lsp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- the bridge ----

struct Bridge {
    child: Child,
    port: u16,
    token: String,
}

impl Bridge {
    /// A bridge serving `ws`, its lock file in `dir`'s folder `name` (one per bridge), its state
    /// (port and token) in `dir` too: nothing of the user's is read or written.
    fn start(
        bin: &Path,
        ws: &Path,
        dir: &Path,
        name: &str,
        runtime: &str,
        extra: &[&str],
    ) -> Bridge {
        let lock_dir = dir.join(name);
        let serving = bridge::serve(
            Command::new(bin)
                .env("HOME", dir)
                .env("XDG_STATE_HOME", dir.join("state"))
                .args([
                    "serve",
                    "--on-diff",
                    "reject",
                    "--runtime",
                    runtime,
                    "--workspace",
                ])
                .arg(ws)
                .arg("--lock-dir")
                .arg(&lock_dir)
                .args(extra),
            &lock_dir,
        )
        .unwrap_or_else(|e| {
            die(&format!(
                "{e} (cargo build --release -p claude-ide-bridge-cli)"
            ))
        });
        Bridge {
            child: serving.child,
            port: serving.port,
            token: serving.token,
        }
    }

    fn client(&self) -> client::Client {
        let (status, c) = client::connect(self.port, Some(&self.token));
        assert_eq!(status, 101, "the bridge refused the connection");
        let mut c = c.unwrap();
        c.init();
        c
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        bridge::stop(&mut self.child, Duration::from_secs(10));
    }
}

fn get_diagnostics(c: &mut client::Client, uri: &str) -> Value {
    let id = c.call_tool("getDiagnostics", json!({ "uri": uri }));
    let resp = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .unwrap_or_else(|| die("no getDiagnostics answer in 60 s"));
    let text = resp["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("[]");
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn idle_rss(bin: &Path, ws: &Path, dir: &Path, name: &str, runtime: &str, extra: &[&str]) -> u64 {
    let b = Bridge::start(bin, ws, dir, name, runtime, extra);
    let _c = b.client();
    thread::sleep(Duration::from_millis(300));
    procs::rss_kib(b.pid())
}

// ---- figures ----

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn mentions(v: &Value, tag: &str) -> bool {
    v.to_string().contains(tag)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("first-edit") {
        return first_edit::main(std::env::args().skip(2), &target());
    }
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = ws.join("bench.py");
    let uri = format!("file://{}", file.display());
    std::fs::write(&file, source("start")).unwrap();
    println!(
        "diagnostics benchmark: pyright, {} iterations ({} of the command line), runtime {}",
        a.iterations, a.cli_iterations, a.runtime
    );

    // Memory first, before anything is warm.
    // The bridge's own memory with its servers on, none started yet (`--lsp-warm none`: the
    // default would start pyright at the client's connect), against `--no-lsp`. The baseline,
    // perhaps older than `--lsp-warm`, starts none at connect either.
    let idle_lsp = idle_rss(
        &a.bridge,
        &ws,
        dir.path(),
        "lock-idle",
        &a.runtime,
        &["--lsp-warm", "none"],
    );
    let idle_off = idle_rss(
        &a.bridge,
        &ws,
        dir.path(),
        "lock-no-lsp",
        &a.runtime,
        &["--no-lsp"],
    );
    let idle_base = a
        .baseline
        .as_ref()
        .map(|b| idle_rss(b, &ws, dir.path(), "lock-baseline", &a.runtime, &[]));

    // The floors: our own pyright, once publishing and once answering pulls (the bridge's client
    // declares pulls, so pyright answers it that way).
    let mut push = Lsp::start(&ws, false);
    let mut pull = Lsp::start(&ws, true);
    push.diagnostics(&uri, 1, &source("start"));
    pull.diagnostics(&uri, 1, &source("start"));
    let mut version = 1;

    // The bridge, warmed up with one call (its pyright starts on it).
    let log = dir.path().join("lsp.log");
    let log_arg = log.to_string_lossy().into_owned();
    let bridge = Bridge::start(
        &a.bridge,
        &ws,
        dir.path(),
        "lock-main",
        &a.runtime,
        &["--lsp-log", &log_arg],
    );
    let mut c = bridge.client();
    let cold = Instant::now();
    let first = get_diagnostics(&mut c, &uri);
    let cold = cold.elapsed();
    if !mentions(&first, "start") {
        eprintln!("note: the first answer (cold start) did not name the error yet: {first}");
    }

    let (mut t_push, mut t_pull, mut t_bridge, mut t_cli) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut stale = 0usize;
    for i in 0..a.iterations {
        version += 1;
        for (name, server, times) in [
            ("push", &mut push, &mut t_push),
            ("pull", &mut pull, &mut t_pull),
        ] {
            let tag = format!("{name}{i}");
            let text = source(&tag);
            std::fs::write(&file, &text).unwrap();
            let t = Instant::now();
            let got = server.diagnostics(&uri, version, &text);
            times.push(ms(t.elapsed()));
            assert!(mentions(&got, &tag), "pyright's answer misses {tag}: {got}");
        }

        let tag = format!("bridge{i}");
        std::fs::write(&file, source(&tag)).unwrap();
        let t = Instant::now();
        let mut calls = 0;
        loop {
            calls += 1;
            let got = get_diagnostics(&mut c, &uri);
            if mentions(&got, &tag) {
                break;
            }
            assert!(calls < 100, "the bridge never reflected {tag}: {got}");
        }
        if calls > 1 {
            stale += 1;
        }
        t_bridge.push(ms(t.elapsed()));

        if i < a.cli_iterations {
            let tag = format!("cli{i}");
            std::fs::write(&file, source(&tag)).unwrap();
            let t = Instant::now();
            let out = Command::new("pyright")
                .arg("--outputjson")
                .arg(&file)
                .current_dir(&ws)
                .output()
                .unwrap_or_else(|e| die(&format!("pyright: {e}")));
            t_cli.push(ms(t.elapsed()));
            assert!(
                String::from_utf8_lossy(&out.stdout).contains(&tag),
                "pyright --outputjson misses {tag}"
            );
        }
    }

    // Memory once a file was asked: the bridge, and its servers (its descendants).
    let bridge_busy = procs::rss_kib(bridge.pid());
    let servers = procs::descendants(bridge.pid());
    let servers_rss: u64 = servers.iter().map(|p| procs::rss_kib(p.pid)).sum();
    drop(c);
    drop(bridge);
    drop((push, pull));

    // Paired: each iteration's bridge time less the pull floor of the same iteration (both
    // before any sorting below).
    let mut paired: Vec<f64> = t_bridge.iter().zip(&t_pull).map(|(b, p)| b - p).collect();
    let floor = median(&mut t_pull);
    let b_med = median(&mut t_bridge);
    println!();
    println!("| way | median | p90 | ratio to the pull floor |");
    println!("| --- | --- | --- | --- |");
    let row = |name: &str, v: &mut Vec<f64>| {
        if v.is_empty() {
            return;
        }
        let m = median(v);
        println!(
            "| {name} | {m:.1} ms | {:.1} ms | {:.2}× |",
            pct(v, 0.9),
            m / floor
        );
    };
    row(
        "server, pull: didChange + textDocument/diagnostic answered (floor)",
        &mut t_pull,
    );
    row(
        "server, push: didChange → publishDiagnostics of that version",
        &mut t_push,
    );
    row(
        "bridge: getDiagnostics {uri} after the write",
        &mut t_bridge,
    );
    row(
        "cli: pyright --outputjson per call (the Node bridge's way)",
        &mut t_cli,
    );
    println!();
    println!(
        "bridge overhead (median bridge − median pull floor): {:.1} ms; answers that needed a second call: {stale} of {}",
        b_med - floor,
        a.iterations
    );
    println!(
        "paired, iteration by iteration (bridge − pull floor): median {:.1} ms, p10 {:.1} ms, p90 {:.1} ms",
        median(&mut paired),
        pct(&mut paired, 0.1),
        pct(&mut paired, 0.9)
    );
    if !t_cli.is_empty() {
        println!("command line / bridge: {:.1}×", median(&mut t_cli) / b_med);
    }
    println!(
        "first call (pyright's cold start inside the bridge): {:.0} ms",
        ms(cold)
    );
    println!();
    println!("resident memory (VmRSS):");
    println!("  bridge idle, language servers on, no file asked: {idle_lsp} KiB");
    println!(
        "  bridge idle, --no-lsp: {idle_off} KiB (ratio {:.2})",
        idle_lsp as f64 / idle_off.max(1) as f64
    );
    if let Some(base) = idle_base {
        println!(
            "  baseline build, idle: {base} KiB (ratio {:.2})",
            idle_lsp as f64 / base.max(1) as f64
        );
    }
    println!("  bridge after the calls: {bridge_busy} KiB");
    println!(
        "  its language servers ({} processes): {servers_rss} KiB",
        servers.len()
    );
}
