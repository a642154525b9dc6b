//! Removal of lock files on SIGINT/SIGTERM.
//!
//! A process-wide registry holds the paths of live lock files. The first registration installs a
//! handler (a `signal-hook` thread) for SIGINT and SIGTERM that removes every registered file and
//! then lets the signal's default action happen (the process ends as if no handler had been
//! installed). Hosts that handle these signals themselves opt out
//! (`Options::signal_cleanup = false`) and stop the server from their own handler. A signal the
//! process was started ignoring (`nohup`, a background job of a script) stays ignored: no handler
//! is installed for it ([`ignored`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use signal_hook::low_level::emulate_default_handler;

static REGISTRY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
static IGNORED: OnceLock<u64> = OnceLock::new();

/// Whether `signal` was ignored when this was first asked, which a host asks before installing
/// any handler: a process started with a signal ignored (`nohup` ignores SIGHUP; a shell ignores
/// SIGINT for its background jobs) expects to stay deaf to it. Read from `SigIgn` in
/// `/proc/self/status` (Linux); false where that cannot be read.
///
/// ```
/// use claude_ide_bridge_runtime::signals::ignored;
/// // Asked again, the first answer stands, whatever handlers were installed since.
/// assert_eq!(ignored(1), ignored(1));
/// ```
pub fn ignored(signal: i32) -> bool {
    let mask = *IGNORED.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("SigIgn:"))?;
                u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).ok()
            })
            .unwrap_or(0)
    });
    (1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0
}

fn install() -> io::Result<()> {
    let result = INSTALLED.get_or_init(|| {
        let wanted: Vec<i32> = [SIGINT, SIGTERM]
            .into_iter()
            .filter(|s| !ignored(*s))
            .collect();
        let mut signals = Signals::new(wanted).map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("claude-ide-bridge-signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    remove_all();
                    let _ = emulate_default_handler(signal);
                    std::process::exit(128 + signal);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(())
    });
    result.clone().map_err(io::Error::other)
}

/// Adds a lock file to remove on SIGINT/SIGTERM (installing the handler on first use).
pub fn register(path: &Path) -> io::Result<()> {
    install()?;
    lock_registry().push(path.to_path_buf());
    Ok(())
}

/// Forgets a lock file (it was removed normally).
pub fn unregister(path: &Path) {
    lock_registry().retain(|p| p != path);
}

/// Removes every registered lock file now (what the handler does before the default action).
pub fn remove_all() {
    for path in lock_registry().drain(..) {
        let _ = std::fs::remove_file(path);
    }
}

fn lock_registry() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}
