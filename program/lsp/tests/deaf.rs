//! A language server that stops reading its input is found hung and killed on every OS,
//! including where the client's writes to a server block: on Windows its writer then waits in
//! the write for good, so the callers asking the server for something look instead.
//! `scripts/test-all.d/platforms.sh` builds this file for `x86_64-pc-windows-gnu` and runs it
//! under Wine.
//!
//! The server is a stand-in: this test program itself, started with [`DEAF`] as its first
//! argument (the file has its own `main`, `harness = false`). It answers `initialize`, then reads
//! nothing more and says nothing more, as a server stuck in a loop would.

mod common;

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::table::Language;
use claude_ide_bridge_lsp::{LspLog, ServerTable};
use claude_ide_bridge_testsupport::lsp_frames;
use common::{start, Waits};
use serde_json::json;

/// The first argument that makes this program the stand-in server; the second is the file it
/// appends its pid to.
const DEAF: &str = "stand-in-deaf-server";
/// How long the stand-in waits, deaf, at most: a failed run leaves nothing behind for longer.
const DEAF_BOUND: Duration = Duration::from_secs(120);
/// How long the server may be silent while it owes work before it is taken as hung (shortened).
const HANG: Duration = Duration::from_millis(1500);
/// The bound of the test's waits (Wine starts a process in tens of ms; a loaded machine is slow).
const BOUND: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let (Some(DEAF), Some(pids)) = (args.first().map(String::as_str), args.get(1)) {
        return deaf(Path::new(pids));
    }
    let name = "a_server_that_stops_reading_is_found_hung_and_killed";
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !(filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()))) {
        println!("\nrunning 0 tests\n\ntest result: ok\n");
        return;
    }
    println!("\nrunning 1 test");
    let t = Instant::now();
    a_server_that_stops_reading_is_found_hung_and_killed();
    println!("test {name} ... ok ({:.1} s)", t.elapsed().as_secs_f64());
    println!("\ntest result: ok\n");
}

/// A server that answers `initialize` and then reads nothing: the text it is given (1 MiB, more
/// than a pipe holds) fills its input, so the client's writer is stuck writing it. Once it has
/// said nothing for the hang timeout while it owes that text's diagnostics, the next question
/// finds it hung: it is killed, the log says why, and it is started again. Every server started
/// is gone once the client shuts down.
fn a_server_that_stops_reading_is_found_hung_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let me = std::env::current_exe().unwrap();
    let command = vec![
        me.to_string_lossy().into_owned(),
        DEAF.to_owned(),
        pids.to_string_lossy().into_owned(),
    ];
    let log = Arc::new(Mutex::new(Vec::new()));
    let ask = Duration::from_millis(300);
    let waits = Waits {
        diagnostics: ask,
        start: Duration::from_secs(5),
        initialize: Duration::from_secs(10),
    };
    let table = |_: &Path| {
        let mut t = ServerTable::empty();
        t.push(Language {
            id: "deaf".into(),
            extensions: vec!["deaf".into()],
            commands: vec![command],
            also: Vec::new(),
        });
        t
    };
    let started = start(table, LspLog::Writer(log.clone()), waits, |c| {
        c.limits.hang_timeout = HANG;
    });
    let file = started.file("a.deaf");
    let text = "x".repeat(1 << 20);
    let log_text = || String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    let end = Instant::now() + BOUND;
    // Asked again and again, as claude's calls would: each asks the stuck server.
    let first = loop {
        let _ = started.lsp.diagnostics(&file, &text, Instant::now() + ask);
        let started_pids = read_pids(&pids);
        if let Some(&first) = started_pids.first() {
            if !alive(first) {
                break first;
            }
        }
        assert!(
            Instant::now() < end,
            "never found hung: {:?}\n{}",
            started.lsp.status(),
            log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The note is written once the killed server is reaped, after its pid is gone.
    while !log_text().contains("hung: nothing from it") {
        assert!(Instant::now() < end, "no hang noted\n{}", log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Started again, as after a crash.
    while read_pids(&pids).len() < 2 {
        let _ = started.lsp.diagnostics(&file, &text, Instant::now() + ask);
        assert!(Instant::now() < end, "not started again\n{}", log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    started.lsp.shutdown(Duration::from_secs(2));
    let all = read_pids(&pids);
    while all.iter().any(|&p| alive(p)) {
        assert!(
            Instant::now() < end,
            "left running: {all:?} (first {first})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: u32) -> bool {
    claude_ide_bridge_runtime::lock::pid_alive(pid)
}

/// The pids the stand-ins appended, in order of their starts.
fn read_pids(file: &PathBuf) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The stand-in: appends its pid to `pids`, answers `initialize`, then neither reads nor writes.
fn deaf(pids: &Path) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(pids)
        .unwrap();
    writeln!(f, "{}", std::process::id()).unwrap();
    drop(f);
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    while let Some(msg) = lsp_frames::read(&mut input) {
        if msg["method"] == "initialize" {
            let caps = json!({"textDocumentSync": {"openClose": true, "change": 1}});
            let answer = json!({"id": msg["id"], "result": {"capabilities": caps}});
            lsp_frames::write(&mut out, &answer).unwrap();
            break;
        }
    }
    std::thread::sleep(DEAF_BOUND);
}
