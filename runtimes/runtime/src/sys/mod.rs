//! What differs between operating systems, behind one interface (std's `sys` pattern): every
//! platform file defines the same items, and the rest of the crate calls them without `cfg`.
//!
//! - `unix.rs`: Linux, macOS and the other Unixes (what differs between them is chosen there:
//!   the query of the signals the process started ignoring, `/proc` on Linux and `ps` elsewhere;
//!   the lock-file watch, inotify on Linux and kqueue on macOS);
//! - `windows.rs`: Windows.
//!
//! The interface:
//!
//! - `HOME_VAR`: the variable naming the user's home, where `claude` looks for `.claude/ide`;
//!   `RUNNING_IN_WINDOWS`: what the lock file's `runningInWindows` says;
//! - `BINDS_OVER_WILDCARD`: whether a bind to `127.0.0.1` succeeds on a port served on every
//!   address (macOS, the BSDs, Windows), which the start then asks by connecting first;
//! - `create_private_dir(dir)`, `private_dir_problem(&Metadata)`: the lock-file directory,
//!   created private to the user and checked to be so;
//! - `create_private_file(path)`: a new file only the user can read, never through a link;
//!   `links_unsupported(&error)`: a hard link refused by the file system (FAT), so that the lock
//!   file is renamed into place instead; `held_for_a_moment(&error)`: a file another process
//!   holds for a moment (Windows; never on Unix), worth another try;
//! - `owned_by_me(&Metadata)`, `same_file(&Metadata, &Metadata)`: for stale-file cleanup;
//! - `watch_removal(dir, name, restore)` and its `WatchEnd`: `restore` called when the lock file
//!   was removed by another process, the watch ended when its folder was, or when the `WatchEnd`
//!   is dropped (a thread asleep until something happens: inotify on Linux, kqueue on macOS,
//!   `ReadDirectoryChangesW` on Windows; none on the other Unixes);
//! - `pid_alive(pid)`: whether a process exists; `process_started(pid)`: when it started;
//!   `process_start(pid)`: its start as a lock file's `processStart` keeps it (this boot's clock
//!   ticks from Linux's `/proc`, which name one process where a pid may have been reused; none
//!   elsewhere, where `process_started` serves);
//! - `wait_until_ended(pid)`: waits for a child to end, leaving it unreaped;
//! - `lock_folder(&Path)`: a workspace folder as the lock file carries it for this OS's `claude`;
//! - `shutdown_listener(&TcpListener)`: ends a waiting `accept` where the OS allows it;
//!   `send_now(&TcpStream, bytes)`: what a blocking socket takes without waiting (`WouldBlock`
//!   on Windows);
//! - `cancel_blocked(&TcpStream)`: ends the calls another thread is blocked in on a socket that
//!   was just shut down (nothing to do on Unix, where the shutdown does it);
//! - `ignored_signals()`: the mask of signals the process started ignoring;
//! - `on_termination(cleanup)`: runs `cleanup` when the process is told to stop (SIGINT and
//!   SIGTERM; Ctrl-C, Ctrl-Break and closing the console on Windows), then ends it;
//! - `discard_typed()`: drops what was typed on the terminal (standard input) and not read yet;
//! - `TerminalSettings`, `terminal_settings()`, `put_back_terminal(&saved, reset)`: the
//!   terminal's settings (termios; the console's input and output modes), saved and put back;
//! - `limit_malloc_arenas(most)`, `map_large_blocks(bytes)`, `trim_malloc()`: the C
//!   allocator's arenas limited, its blocks of `bytes` or more mapped on their own, its free
//!   pages given back (glibc's, in `unix.rs`; below, the others' with nothing to do).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use self::unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use self::windows::*;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) use self::unix::malloc::*;

/// The C allocators other than glibc's (musl, macOS, the BSDs, the Windows heap) keep no
/// per-thread arenas to limit, and map large blocks and give free pages back by themselves.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod malloc {
    pub(crate) fn limit_malloc_arenas(_most: u32) -> bool {
        false
    }

    pub(crate) fn map_large_blocks(_bytes: usize) -> bool {
        false
    }

    pub(crate) fn trim_malloc() -> bool {
        false
    }
}
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) use self::malloc::*;

#[cfg(test)]
mod tests {
    use super::watch_removal;
    use std::fs;
    use std::path::Path;
    use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    /// Where `watch_removal` has a watch (the other Unixes have none).
    const WATCHED: bool = cfg!(any(target_os = "linux", target_os = "macos", windows));

    /// A watch on `dir/x.lock` whose `restore` says it was called; the channel's sender lives in
    /// `restore`, so the channel closes when the watch's thread has ended (and dropped it).
    fn watched(dir: &Path) -> Option<(super::WatchEnd, Receiver<Instant>)> {
        fs::write(dir.join("x.lock"), "{}").unwrap();
        let (called, calls) = channel();
        let end = watch_removal(dir, "x.lock", move || called.send(Instant::now()).is_ok());
        assert_eq!(end.is_some(), WATCHED);
        Some((end?, calls))
    }

    /// `restore` is called once 200 ms or so after the removal, and not again while nothing
    /// happens; the thread ends when the `WatchEnd` is dropped.
    #[test]
    fn a_removal_is_restored_and_a_dropped_end_ends_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let Some((end, calls)) = watched(dir.path()) else {
            return;
        };
        let removed = Instant::now();
        fs::remove_file(dir.path().join("x.lock")).unwrap();
        let called = calls.recv_timeout(Duration::from_secs(5)).expect("restore");
        assert!(called - removed >= Duration::from_millis(150));
        assert_eq!(
            calls.recv_timeout(Duration::from_millis(500)),
            Err(RecvTimeoutError::Timeout)
        );
        drop(end);
        assert_eq!(
            calls.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected),
            "the thread ended"
        );
    }

    /// The folder removed (its file first, as `rm -rf` does): no `restore`, the thread ends,
    /// and the folder is gone (not held by the watch).
    #[test]
    fn the_folder_removed_ends_the_watch() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("ide");
        fs::create_dir(&dir).unwrap();
        let Some((_end, calls)) = watched(&dir) else {
            return;
        };
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            calls.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert!(!dir.exists());
    }

    /// The folder moved away, then its file removed: no `restore` (in the folder moved, or at
    /// the old path), and the thread ends.
    #[test]
    fn the_folder_moved_ends_the_watch() {
        let top = tempfile::tempdir().unwrap();
        let (dir, moved) = (top.path().join("ide"), top.path().join("moved"));
        fs::create_dir(&dir).unwrap();
        let Some((_end, calls)) = watched(&dir) else {
            return;
        };
        fs::rename(&dir, &moved).unwrap();
        fs::remove_file(moved.join("x.lock")).unwrap();
        assert_eq!(
            calls.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
    }
}
