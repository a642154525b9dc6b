//! What a panic of the main thread would leave on the terminal: `run`'s command (claude) and an
//! `$EDITOR` open on a proposed change are processes of the bridge's own, which its unwinding
//! does not end (the lock file and the language servers go with it: the lock file's guard, and
//! each server's input closing). They would stay, fighting the shell for the terminal once it
//! takes it back. The hook asks both to stop, as a stop does (SIGTERM; nothing on Windows, where
//! they share the console and get its events), then lets the panic go on.
//!
//! The lines still queued for stderr are written first (within half a second).
//!
//! A panic of another thread leaves the main thread running, which ends them at its stop; one
//! of a thread that brings the host its inputs stops it (`host::StopOnPanic`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// `run`'s command's pid, or 0.
static COMMAND: AtomicU32 = AtomicU32::new(0);
/// Where the host keeps the pid of `$EDITOR` while it runs.
static EDITOR: OnceLock<Arc<Mutex<Option<u32>>>> = OnceLock::new();

/// Installs the hook (once, before any thread starts), after the default one, which prints the
/// panic.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let main = std::thread::current().name() == Some("main");
        if main {
            // The lines queued for stderr's thread first, in their order (the process ends
            // with this thread's unwinding, and what was still queued was lost): what led to
            // the panic is what its reader needs. Not long: the terminal may take no output.
            crate::ui::flush_stderr(std::time::Duration::from_millis(500));
        }
        default(info);
        if main {
            end_terminal_children();
        }
    }));
}

/// `run`'s command, started.
pub fn command_started(pid: u32) {
    COMMAND.store(pid, Ordering::Relaxed);
}

/// `run`'s command, reaped: its pid is no longer its own.
pub fn command_ended() {
    COMMAND.store(0, Ordering::Relaxed);
}

/// Kills `run`'s command `pid` (SIGKILL) after `grace`, on a thread of its own, if it is still the
/// command then (not reaped: [`command_ended`] forgets its pid first). For a bridge whose thread
/// panicked: nothing else may come to end a command that ignores SIGTERM.
pub fn kill_command_after(pid: u32, grace: std::time::Duration) {
    let _ = std::thread::Builder::new()
        .name("command-grace".into())
        .spawn(move || {
            std::thread::sleep(grace);
            if COMMAND.load(Ordering::Relaxed) == pid {
                crate::sys::kill_now(pid);
            }
        });
}

/// Where the pid of `$EDITOR` is kept while it runs.
pub fn editor_pid_in(running: &Arc<Mutex<Option<u32>>>) {
    let _ = EDITOR.set(Arc::clone(running));
}

fn end_terminal_children() {
    // Not waited for: the panicking thread may hold it.
    let editor = EDITOR.get().and_then(|e| match e.try_lock() {
        Ok(pid) => *pid,
        Err(std::sync::TryLockError::Poisoned(p)) => *p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => None,
    });
    let command = Some(COMMAND.load(Ordering::Relaxed)).filter(|&pid| pid != 0);
    for pid in editor.into_iter().chain(command) {
        crate::sys::ask_to_stop(pid);
    }
}

/// A panic on purpose, for the tests of this hook and of
/// [`StopOnPanic`](crate::host::StopOnPanic): only in debug builds, and only when
/// `CLAUDE_IDE_BRIDGE_TEST_PANIC` names the place `at`: `main` (the main thread, at the first
/// signal), `stdio` (the stdio editor's reader, at its first line), `signals` (the Unix signal
/// thread, at the first signal).
pub fn test_panic(at: &str) {
    if cfg!(debug_assertions)
        && std::env::var_os("CLAUDE_IDE_BRIDGE_TEST_PANIC").is_some_and(|v| v == at)
    {
        panic!("CLAUDE_IDE_BRIDGE_TEST_PANIC: a panic of the {at} thread, for its test");
    }
}
