//! What differs between operating systems, behind one interface (std's `sys` pattern): every
//! platform file defines the same items, and the rest of the crate calls them without `cfg`.
//!
//! - `unix.rs`: Linux, macOS and the other Unixes (what differs between them, the query of the
//!   signals the process started ignoring, is chosen there: `/proc` on Linux, `ps` elsewhere);
//! - `windows.rs`: Windows.
//!
//! The interface:
//!
//! - `HOME_VAR`: the variable naming the user's home, where `claude` looks for `.claude/ide`;
//! - `create_private_dir(dir)`, `private_dir_problem(&Metadata)`: the lock-file directory,
//!   created private to the user and checked to be so;
//! - `create_private_file(path)`: a new file only the user can read, never through a link;
//! - `owned_by_me(&Metadata)`, `same_file(&Metadata, &Metadata)`: for stale-file cleanup;
//! - `watch_removal(dir, name, restore)` and its `WatchEnd`: `restore` called when the lock file
//!   was removed by another process, the watch ended when its folder was (inotify on Linux; none
//!   elsewhere yet);
//! - `pid_alive(pid)`: whether a process exists;
//! - `lock_folder(&Path)`: a workspace folder as the lock file carries it for this OS's `claude`;
//! - `shutdown_listener(&TcpListener)`: ends a waiting `accept` where the OS allows it;
//! - `cancel_blocked(&TcpStream)`: ends the calls another thread is blocked in on a socket that
//!   was just shut down (nothing to do on Unix, where the shutdown does it);
//! - `ignored_signals()`: the mask of signals the process started ignoring;
//! - `on_termination(cleanup)`: runs `cleanup` when the process is told to stop (SIGINT and
//!   SIGTERM; Ctrl-C, Ctrl-Break and closing the console on Windows), then ends it;
//! - `discard_typed()`: drops what was typed on the terminal (standard input) and not read yet;
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
