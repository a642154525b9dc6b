//! The process's signals, as a runtime and a host meet them: lock files removed when the process
//! is told to stop (below); whether a signal was inherited as ignored ([`ignored`], which a host
//! asks before it handles one); on Windows, the console's events for a host that stops itself
//! (`on_console_event`).
//!
//! A process-wide registry holds the paths of live lock files. The first registration installs a
//! handler that removes every registered file and then ends the process as the signal would
//! have: on Unix a `signal-hook` thread for SIGINT and SIGTERM, which then lets the signal's
//! default action happen; on Windows a console control handler for Ctrl-C, Ctrl-Break, the
//! console closing, logoff and shutdown, which then exits with `STATUS_CONTROL_C_EXIT`. Nothing
//! is registered unless a host sets `Options::signal_cleanup = true` (off by default: a host
//! handles its own signals and stops the server from its handler). A signal the process was started ignoring (`nohup`, a background job
//! of a script) stays ignored: no handler is installed for it ([`ignored`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::sys;

static REGISTRY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
static IGNORED: OnceLock<u64> = OnceLock::new();

/// Whether `signal` was ignored when this was first asked, which a host asks before installing
/// any handler: a process started with a signal ignored (`nohup` ignores SIGHUP; a shell ignores
/// SIGINT for its background jobs) expects to stay deaf to it. Read from each signal's
/// disposition (`sigaction`, asked without changing it) on every Unix; always false on Windows,
/// which has no such mask.
///
/// ```
/// use claude_ide_bridge_runtime::signals::ignored;
/// // Under `nohup`, SIGHUP (1) is ignored: a bridge started so keeps serving when its terminal
/// // closes, and installs no handler for it.
/// let keep_serving_on_hangup = ignored(1);
/// // Asked again, the first answer stands, whatever handlers were installed since.
/// assert_eq!(ignored(1), keep_serving_on_hangup);
/// // Not a signal: never ignored.
/// assert!(!ignored(0) && !ignored(65));
/// ```
pub fn ignored(signal: i32) -> bool {
    let mask = *IGNORED.get_or_init(sys::ignored_signals);
    (1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0
}

fn install() -> io::Result<()> {
    let result = INSTALLED
        .get_or_init(|| sys::on_termination(remove_all, ignored).map_err(|e| e.to_string()));
    result.clone().map_err(io::Error::other)
}

/// Adds a lock file to remove when the process is told to stop (installing the handler on first
/// use).
pub fn register(path: &Path) -> io::Result<()> {
    install()?;
    lock_registry().push(path.to_path_buf());
    Ok(())
}

/// Forgets a lock file (it was removed normally).
pub fn unregister(path: &Path) {
    lock_registry().retain(|p| p != path);
}

/// Removes every registered lock file now (what the handler does before the default action):
/// each that this process wrote (its pid in it). A path is registered before its file is
/// written, so that there is no moment when the file is there and not removed at a stop; a
/// stop in that moment found another live process's file there (a server on that port bound to
/// another address, which made this one's start fail), and removed it.
pub fn remove_all() {
    for path in lock_registry().drain(..) {
        if crate::lock::written_by_this_process(&path) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A console's control event on Windows: what [`on_console_event`] passes to its handler.
#[cfg(windows)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleEvent {
    /// Ctrl-C.
    CtrlC,
    /// Ctrl-Break.
    CtrlBreak,
    /// The console was closed.
    Close,
    /// The user logs off.
    Logoff,
    /// The system shuts down.
    Shutdown,
}

/// Windows only, for hosts that stop themselves (`Options::signal_cleanup = false`): calls
/// `handler` on each console control event, on the thread Windows makes for it. After Ctrl-C and
/// Ctrl-Break the process goes on; after the other three Windows ends it as soon as `handler`
/// returns (and within 5 s of a closed console in any case), so there `handler` should return
/// only once the host has stopped. Registered once; later calls add nothing.
///
/// ```no_run
/// # #[cfg(windows)] {
/// use claude_ide_bridge_runtime::signals::{on_console_event, ConsoleEvent};
/// fn heard(event: ConsoleEvent) {
///     eprintln!("{event:?}: stopping");
/// }
/// on_console_event(heard).unwrap();
/// # }
/// ```
#[cfg(windows)]
pub fn on_console_event(handler: fn(ConsoleEvent)) -> io::Result<()> {
    sys::on_console_event(handler)
}

fn lock_registry() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}
