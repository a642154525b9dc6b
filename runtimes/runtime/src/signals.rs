//! Removal of lock files on SIGINT/SIGTERM.
//!
//! A process-wide registry holds the paths of live lock files. The first registration installs a
//! handler (a `signal-hook` thread) for SIGINT and SIGTERM that removes every registered file and
//! then lets the signal's default action happen (the process ends as if no handler had been
//! installed). Hosts that handle these signals themselves opt out
//! (`Options::signal_cleanup = false`) and stop the server from their own handler.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use signal_hook::low_level::emulate_default_handler;

static REGISTRY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

fn install() -> io::Result<()> {
    let result = INSTALLED.get_or_init(|| {
        let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|e| e.to_string())?;
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
