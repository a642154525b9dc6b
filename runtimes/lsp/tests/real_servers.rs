//! Against real language servers: pyright (npm), clangd (Debian), ruff (PyPI). `scripts/test-all.d/lsp.sh`
//! installs them on a fresh machine; a missing server fails these tests rather than skipping them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::{FileDiagnostics, Lsp, LspConfig, LspLog, ServerState, ServerTable};

struct Fixture {
    lsp: Lsp,
    changes: Arc<Mutex<Vec<FileDiagnostics>>>,
    log: Arc<Mutex<Vec<u8>>>,
    dir: tempfile::TempDir,
}

fn fixture(servers: ServerTable) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let changes = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let config = LspConfig {
        servers,
        workspace_folders: vec![dir.path().to_path_buf()],
        diagnostics_wait: Duration::from_secs(20),
        start_wait: Duration::from_secs(30),
        log: LspLog::Writer(log.clone()),
        ..LspConfig::default()
    };
    let seen = changes.clone();
    let lsp = Lsp::new(config, move |change| seen.lock().unwrap().push(change));
    Fixture {
        lsp,
        changes,
        log,
        dir,
    }
}

fn require(program: &str) {
    assert!(
        claude_ide_bridge_lsp::table::find_program(program).is_some(),
        "{program} is not installed: run scripts/test-all.d/lsp.sh (these tests fail rather than skip)"
    );
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purposes only once reaped: /proc/PID exists until then.
    Path::new(&format!("/proc/{pid}")).exists()
}

fn pids(lsp: &Lsp) -> Vec<u32> {
    lsp.status().iter().filter_map(|s| s.pid).collect()
}

/// The same three steps for every server: a known error on the first call, fixed text clears it, a new
/// error shows; `on_change` saw them; after `shutdown` the process is gone.
fn error_fixed_new_error(
    f: &Fixture,
    file: &Path,
    bad: &str,
    want: &str,
    good: &str,
    bad2: &str,
    want2: &str,
) {
    let deadline = || Instant::now() + Duration::from_secs(20);
    let t0 = Instant::now();
    let first = f.lsp.diagnostics(file, bad, deadline());
    eprintln!(
        "{}: first diagnostics after {:?}",
        file.display(),
        t0.elapsed()
    );
    assert!(
        first
            .iter()
            .any(|d| d.message.contains(want) && d.severity == "Error"),
        "first call: {first:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
    let t1 = Instant::now();
    let fixed = f.lsp.diagnostics(file, good, deadline());
    eprintln!("{}: fixed after {:?}", file.display(), t1.elapsed());
    assert!(
        fixed.iter().all(|d| d.severity != "Error"),
        "after the fix: {fixed:#?}"
    );
    let t2 = Instant::now();
    let second = f.lsp.diagnostics(file, bad2, deadline());
    eprintln!("{}: new error after {:?}", file.display(), t2.elapsed());
    assert!(
        second.iter().any(|d| d.message.contains(want2)),
        "new error: {second:#?}\nlog: {}",
        String::from_utf8_lossy(&f.log.lock().unwrap())
    );
    let uri = claude_ide_bridge::paths::file_uri(file.to_str().unwrap());
    let changes = f.changes.lock().unwrap();
    let mine: Vec<_> = changes.iter().filter(|c| c.uri == uri).collect();
    assert!(
        mine.iter()
            .any(|c| c.diagnostics.iter().any(|d| d.message.contains(want))),
        "{mine:#?}"
    );
    assert!(
        mine.iter()
            .any(|c| c.diagnostics.iter().any(|d| d.message.contains(want2))),
        "{mine:#?}"
    );
    assert!(f.lsp.known().iter().any(|k| k.uri == uri));
}

fn stop_and_check_gone(f: &Fixture) {
    let before = pids(&f.lsp);
    assert!(!before.is_empty());
    assert!(before.iter().all(|&p| alive(p)));
    let t = Instant::now();
    f.lsp.shutdown(Duration::from_secs(5));
    eprintln!("shutdown took {:?}", t.elapsed());
    for pid in before {
        assert!(!alive(pid), "server {pid} is still there after shutdown");
    }
    assert!(f
        .lsp
        .status()
        .iter()
        .all(|s| s.state == ServerState::Stopped || s.state == ServerState::Missing));
}

fn only(language: &str, command: &str) -> ServerTable {
    let mut table = ServerTable::empty();
    table.set(claude_ide_bridge_lsp::parse_override(&format!("{language}={command}")).unwrap());
    let builtin = ServerTable::builtin();
    let mut out = ServerTable::empty();
    for lang in builtin.languages() {
        if lang.id == language {
            let mut lang = lang.clone();
            lang.commands = table.commands(language).to_vec();
            out.push(lang);
        }
    }
    out
}

#[test]
fn pyright_error_fix_new_error_and_shutdown() {
    require("pyright-langserver");
    let f = fixture(only("python", "pyright-langserver --stdio"));
    let file: PathBuf = f.dir.path().join("app.py");
    error_fixed_new_error(
        &f,
        &file,
        "x: int = 'one'\n",
        "is not assignable to declared type",
        "x: int = 1\n",
        "x: int = 1\ny: str = x\n",
        "is not assignable to declared type \"str\"",
    );
    assert!(f
        .lsp
        .diagnostics(&file, "x: int = 1\ny: str = x\n", Instant::now())
        .iter()
        .any(|d| d.source.as_deref() == Some("Pyright")));
    stop_and_check_gone(&f);
}
