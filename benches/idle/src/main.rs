//! How much an idle bridge costs (issue 32, item 1): how often its process wakes, counted as the
//! context switches of all its threads (`/proc/PID/task/*/status`, voluntary and nonvoluntary),
//! and its private memory (`RssAnon`), over a window of idle time, for each runtime, with no
//! client and with a connected, initialized client that says nothing (it answers the bridge's
//! keepalive pings, as the real client does). Not a test: figures go to BENCHMARKS.md.
//!
//! ```text
//! cargo build --release -p claude-ide-bridge-cli
//! cargo run --release -p claude-ide-bridge-bench-idle -- [--seconds 30] [--runtime threads|smol]...
//!     [--lsp c] [--bin PATH] [--baseline OLD-BINARY]
//! ```
//!
//! `--lsp c`: the workspace is a C file with a compilation flags file, served with clangd, which
//! the bridge starts when the client connects (`--lsp-warm connect`): the bridge's own threads
//! for a running language server, idle (clangd's own wake-ups are its process's, not counted).
//!
//! `day` as the first argument measures a day's use instead: see `day.rs`.
//!
//! `--baseline` measures an older build in the same run, for the comparison.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::Duration;

use claude_ide_bridge_testsupport::{bridge, client};

mod day;

struct Args {
    seconds: u64,
    lsp: bool,
    runtimes: Vec<String>,
    bins: Vec<(String, PathBuf)>,
}

fn die(msg: &str) -> ! {
    eprintln!("bench-idle: {msg}");
    std::process::exit(2)
}

/// The release build of the program in this workspace's target folder.
fn default_bin() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release/claude-ide-bridge")
}

fn args() -> Args {
    let mut a = Args {
        seconds: 30,
        lsp: false,
        runtimes: Vec::new(),
        bins: Vec::new(),
    };
    let mut bin = default_bin();
    let mut baseline = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| die(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--seconds" => {
                a.seconds = value()
                    .parse()
                    .unwrap_or_else(|_| die("--seconds: a number"))
            }
            "--runtime" => a.runtimes.push(value()),
            "--lsp" => {
                a.lsp = match value().as_str() {
                    "c" => true,
                    "none" => false,
                    other => die(&format!("--lsp {other}: none or c")),
                }
            }
            "--bin" => bin = PathBuf::from(value()),
            "--baseline" => baseline = Some(PathBuf::from(value())),
            // `cargo bench` passes this to every bench target.
            "--bench" => {}
            other => die(&format!(
                "unknown argument {other:?} (--seconds N, --runtime R, --lsp none|c, --bin PATH, \
                 --baseline PATH)"
            )),
        }
    }
    if a.runtimes.is_empty() {
        a.runtimes = vec!["threads".into(), "smol".into()];
    }
    if let Some(b) = baseline {
        a.bins.push(("baseline".into(), b));
    }
    a.bins.push(("this".into(), bin));
    a
}

/// A bridge serving an empty workspace (with `lsp`, a C file and clangd) in a sandbox of its own
/// (HOME, lock and state folders).
struct Bridge {
    child: Child,
    port: u16,
    token: String,
    _dir: tempfile::TempDir,
}

impl Bridge {
    fn start(bin: &Path, runtime: &str, lsp: bool) -> Bridge {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir(&ws).unwrap();
        let servers: &[&str] = if lsp {
            fs::write(ws.join("compile_flags.txt"), "-std=c11\n-Wall\n").unwrap();
            let code = "int f(int x) {\n    int unused;\n    return x + 1;\n}\n";
            fs::write(ws.join("main.c"), code).unwrap();
            &["--lsp", "c=clangd"]
        } else {
            &["--no-lsp"]
        };
        let lock_dir = dir.path().join("ide");
        let serving = bridge::serve(
            Command::new(bin)
                .args(["serve", "--on-diff", "reject", "--runtime", runtime])
                .args(servers)
                .arg("--workspace")
                .arg(&ws)
                .arg("--lock-dir")
                .arg(&lock_dir)
                .env("HOME", dir.path())
                .env("XDG_STATE_HOME", dir.path().join("state"))
                .env_remove("CLAUDE_IDE_BRIDGE_LOG"),
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
            _dir: dir,
        }
    }

    /// A client that connects, initializes, then only answers pings (on a thread of its own, in
    /// this process), until the bridge closes the connection.
    fn silent_client(&self) {
        let (status, c) = client::connect(self.port, Some(&self.token));
        assert_eq!(status, 101, "the bridge refused the connection");
        let mut c = c.unwrap();
        c.init();
        thread::spawn(move || {
            while c.recv_json(Duration::from_secs(3600)).is_some() || c.why().is_empty() {}
        });
    }
}

impl Bridge {
    /// Asks the bridge to stop (SIGTERM) and waits up to `grace` for it, then kills it.
    fn stop(&mut self, grace: Duration) {
        bridge::stop(&mut self.child, grace);
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(15));
    }
}

/// A number field (`Name:  123 kB`) of a `/proc` status text.
fn field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Context switches of every thread of `pid` so far, and its thread count. (The process's own
/// `status` counts only its main thread.)
fn switches(pid: u32) -> (u64, usize) {
    let mut total = 0;
    let mut threads = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        if let Ok(s) = fs::read_to_string(task.path().join("status")) {
            total += field(&s, "voluntary_ctxt_switches") + field(&s, "nonvoluntary_ctxt_switches");
            threads += 1;
        }
    }
    (total, threads)
}

/// Whether a thread of `pid` serves a language server (`lsp-writer-…`, `lsp-reader-…`).
fn serves_a_language_server(pid: u32) -> bool {
    fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| {
            fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("lsp-writer"))
        })
}

/// A thread that exited during the window takes its count with it: the window is measured
/// again, at most twice, when the thread count changed.
fn idle_window(pid: u32, seconds: u64) -> (u64, usize) {
    for _ in 0..3 {
        let (before, n) = switches(pid);
        thread::sleep(Duration::from_secs(seconds));
        let (after, m) = switches(pid);
        if n == m {
            return (after.saturating_sub(before), m);
        }
    }
    die("the bridge's thread count kept changing while idle")
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("day") {
        return day::main(std::env::args().skip(2), default_bin());
    }
    let a = args();
    println!(
        "idle for {} s per case; wake-ups = context switches of all threads (voluntary + nonvoluntary)",
        a.seconds
    );
    println!(
        "{:<9} {:<8} {:<14} {:>8} {:>12} {:>10} {:>12}",
        "binary", "runtime", "client", "threads", "switches", "per min", "RssAnon kB"
    );
    for runtime in &a.runtimes {
        for (name, bin) in &a.bins {
            for with_client in [false, true] {
                let b = Bridge::start(bin, runtime, a.lsp);
                if with_client {
                    b.silent_client();
                }
                // Start-up (threads starting, the first allocations) is over.
                thread::sleep(Duration::from_secs(1));
                let pid = b.child.id();
                if a.lsp && with_client {
                    // The server started at the connection, initialized and checked its file.
                    for _ in 0..100 {
                        if serves_a_language_server(pid) {
                            break;
                        }
                        thread::sleep(Duration::from_millis(100));
                    }
                    if !serves_a_language_server(pid) {
                        die("clangd did not start (is it on PATH?)");
                    }
                    thread::sleep(Duration::from_secs(5));
                }
                let (n, threads) = idle_window(pid, a.seconds);
                let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
                println!(
                    "{:<9} {:<8} {:<14} {:>8} {:>12} {:>10.1} {:>12}",
                    name,
                    runtime,
                    match (with_client, a.lsp) {
                        (false, _) => "none",
                        (true, false) => "silent client",
                        (true, true) => "silent, clangd",
                    },
                    threads,
                    n,
                    n as f64 * 60.0 / a.seconds as f64,
                    field(&status, "RssAnon"),
                );
            }
        }
    }
}
