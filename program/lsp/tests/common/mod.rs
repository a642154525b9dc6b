//! What the tests against the scripted server (`fake_lsp.py`) share: the server's command line,
//! a client started on a temporary workspace with short limits, the starts the script records,
//! and a bounded wait. Each test file picks what it uses.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::{FileDiagnostics, Lsp, LspConfig, LspLimits, LspLog, ServerTable};

pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake_lsp.py");
/// Slack on top of a bound, for a loaded machine (bounds are checked, not speed).
pub const SLACK: Duration = Duration::from_millis(1500);

/// The scripted server's command: `mode`, its state in `dir`, then `extra` arguments.
pub fn script(mode: &str, dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut argv = vec![
        "python3".to_string(),
        SCRIPT.to_string(),
        mode.to_string(),
        dir.to_str().unwrap().to_string(),
    ];
    argv.extend(extra.iter().map(|a| a.to_string()));
    argv
}

/// How long a client waits, in the tests' short configuration.
pub struct Waits {
    pub diagnostics: Duration,
    pub start: Duration,
    pub initialize: Duration,
}

/// A client of `servers` on a new temporary workspace, with state for the scripts in a temporary
/// folder of its own, restarts after 200 ms, and what `on_change` is told kept in order.
pub struct Started {
    pub lsp: Lsp,
    pub changes: Arc<Mutex<Vec<FileDiagnostics>>>,
    pub state: tempfile::TempDir,
    pub ws: tempfile::TempDir,
}

/// Starts a client: `servers` is given the state folder to place each script's state in;
/// `tweak` changes the configuration last.
pub fn start(
    servers: impl FnOnce(&Path) -> ServerTable,
    log: LspLog,
    waits: Waits,
    tweak: impl FnOnce(&mut LspConfig),
) -> Started {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut config = LspConfig {
        servers: servers(state.path()),
        workspace_folders: vec![ws.path().to_path_buf()],
        diagnostics_wait: waits.diagnostics,
        start_wait: waits.start,
        log,
        limits: LspLimits {
            restart_backoff: Duration::from_millis(200),
            initialize_timeout: waits.initialize,
            ..LspLimits::default()
        },
        ..LspConfig::default()
    };
    tweak(&mut config);
    let changes = Arc::new(Mutex::new(Vec::new()));
    let seen = changes.clone();
    let lsp = Lsp::new(config, move |c| seen.lock().unwrap().push(c));
    Started {
        lsp,
        changes,
        state,
        ws,
    }
}

impl Started {
    /// A file of the workspace.
    pub fn file(&self, name: &str) -> PathBuf {
        self.ws.path().join(name)
    }
}

/// The starts a script recorded in `dir` (its `starts` file: the time, then the pid), none before
/// it recorded one.
pub fn starts(dir: &Path) -> Vec<(f64, u32)> {
    let text = std::fs::read_to_string(dir.join("starts")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let (t, pid) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), pid.parse().unwrap())
        })
        .collect()
}

/// Waits until `done`, failing the test after `bound`.
pub fn wait_for(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + bound;
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
