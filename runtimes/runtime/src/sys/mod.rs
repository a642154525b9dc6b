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
//!   holds for a moment (Windows; never on Unix), worth another try; `open_to_read(path)`: a
//!   file opened to read without waiting on what is not one (a FIFO planted in its place);
//! - `owned_by_me(&Metadata)`, `same_file(&Metadata, &Metadata)`: for stale-file cleanup;
//! - `watch_removal(dir, name, first, restore, gone)` and its `WatchEnd`: `restore` called when
//!   the lock file was removed by another process (and at once with `first`; again after
//!   [`retry_wait`] while it answers [`Restored::Failed`]), `gone` when its folder was removed
//!   or moved, which ends the watch, as the `WatchEnd` dropped does (a thread asleep until
//!   something happens: inotify on Linux, kqueue on macOS, `ReadDirectoryChangesW` on Windows;
//!   none on the other Unixes);
//! - `watch_quiet(dir, settle, done)`: `done` called once no entry of the folder has been added,
//!   removed or renamed for a while ([`Settle`]), or when the folder itself goes ([`Quiet`]);
//!   the same threads and calls, none on the other Unixes;
//! - `pid_alive(pid)`: whether a process exists; `ended_unreaped(pid)`: whether it has ended and
//!   only waits for its parent to reap it (a Unix zombie, which `pid_alive` counts: it holds its
//!   pid, and writes nothing any more; never on Windows, where `pid_alive` tells an ended
//!   process by its exit code); `process_started(pid)`: when it started;
//!   `process_start(pid)`: its start as a lock file's `processStart` keeps it (this boot's clock
//!   ticks from Linux's `/proc`, which name one process where a pid may have been reused; none
//!   elsewhere, where `process_started` serves);
//! - `client_paths(pid)`: how a client whose `ide_connected` names `pid` names files (on
//!   Windows, a pid that is no process here is a `claude` in WSL: `ClientPaths::WslMounts`);
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

/// What a lock-file watch's `restore` answers (`watch_removal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Restored {
    /// Written again, or nothing to write: the watch waits for the next removal.
    Done,
    /// The file could not be written (a full disk, no descriptor left, the folder's permission
    /// taken away): `restore` is called again after [`retry_wait`], until it can (the lock file
    /// stayed away for good, and claude never found the bridge again).
    Failed,
    /// The watch ends (the server stopped).
    End,
}

/// How a folder's watch (`watch_quiet`) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quiet {
    /// Nothing in the folder changed for the [`Settle`]'s while.
    Settled,
    /// The folder itself was removed or moved away.
    Gone,
}

/// When a folder counts as quiet (`watch_quiet`): `quiet` after the last change of its entries,
/// and at the latest `longest` after the first (a folder that never rests is not waited for
/// forever). The first change is the start itself ([`Settle::from_now`]), or the first one seen
/// ([`Settle::after_a_change`], which sleeps for good until then).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settle {
    quiet: std::time::Duration,
    longest: std::time::Duration,
    /// The first change and the last; `None` before the first.
    changes: Option<(std::time::Instant, std::time::Instant)>,
}

impl Settle {
    /// Counted from now.
    pub(crate) fn from_now(quiet: std::time::Duration, longest: std::time::Duration) -> Settle {
        let mut settle = Settle::after_a_change(quiet, longest);
        settle.changed();
        settle
    }

    /// Counted from the first change seen.
    pub(crate) fn after_a_change(
        quiet: std::time::Duration,
        longest: std::time::Duration,
    ) -> Settle {
        Settle {
            quiet,
            longest,
            changes: None,
        }
    }

    /// An entry of the folder changed.
    pub(crate) fn changed(&mut self) {
        let now = std::time::Instant::now();
        let first = self.changes.map_or(now, |(first, _)| first);
        self.changes = Some((first, now));
    }

    /// How long the watch may sleep before the folder counts as quiet (zero: it does now), or
    /// `None` for good (no change yet).
    pub(crate) fn wait(&self) -> Option<std::time::Duration> {
        let (first, last) = self.changes?;
        let at = (last + self.quiet).min(first + self.longest);
        Some(at.saturating_duration_since(std::time::Instant::now()))
    }
}

/// How long after its lock file's removal a watch writes it again (docs/protocol.md,
/// "Discovery", its "Written again"; then [`retry_wait`] while it fails): a removal of the folder
/// under way is seen by then.
/// Each platform's watch waits so.
pub(crate) const REWRITE_SETTLE: std::time::Duration = std::time::Duration::from_millis(200);

/// How long a watch waits before it calls `restore` again after `failures` failures in a row:
/// 1 s, doubled each time, at most 30 s.
pub(crate) fn retry_wait(failures: u32) -> std::time::Duration {
    let doublings = failures.saturating_sub(1).min(5);
    std::time::Duration::from_secs(1 << doublings).min(std::time::Duration::from_secs(30))
}

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
    use super::{retry_wait, watch_quiet, watch_removal, Quiet, Restored, Settle};
    use std::fs;
    use std::path::Path;
    use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    /// A client whose pid is a process here names files as the host does; on Windows one whose
    /// pid names no process is a `claude` in WSL (a Linux pid), sent `/mnt/<drive>/` paths; on
    /// the Unixes no pid changes them.
    #[test]
    fn a_pid_that_is_no_process_here_is_a_claude_in_wsl_on_windows() {
        use claude_ide_bridge::ClientPaths;
        assert_eq!(
            super::client_paths(std::process::id()),
            ClientPaths::AsGiven
        );
        // A pid free now: a child's that has ended and been waited for.
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        child.wait().unwrap();
        drop(child);
        let elsewhere = match super::RUNNING_IN_WINDOWS {
            true => ClientPaths::WslMounts,
            false => ClientPaths::AsGiven,
        };
        assert_eq!(super::client_paths(pid), elsewhere);
    }

    /// Where `watch_removal` has a watch (the other Unixes have none).
    const WATCHED: bool = cfg!(any(target_os = "linux", target_os = "macos", windows));

    /// A watch on `dir/x.lock` whose `restore` says it was called; the channel's sender lives in
    /// `restore`, so the channel closes when the watch's thread has ended (and dropped it). The
    /// second channel says when `gone` was called.
    fn watched(dir: &Path) -> Option<(super::WatchEnd, Receiver<Instant>, Receiver<()>)> {
        fs::write(dir.join("x.lock"), "{}").unwrap();
        let (called, calls) = channel();
        let restore = move || match called.send(Instant::now()) {
            Ok(()) => Restored::Done,
            Err(_) => Restored::End,
        };
        let (lost, gone) = channel();
        let end = watch_removal(dir, "x.lock", false, restore, move || {
            lost.send(()).unwrap()
        });
        assert_eq!(end.is_some(), WATCHED);
        Some((end?, calls, gone))
    }

    /// A watch on `dir/x.lock` whose `restore` says when it was called and fails `failures` times
    /// before it writes, the file then removed; `None` where there is no watch.
    fn removed_while_writes_fail(
        dir: &Path,
        mut failures: u32,
    ) -> Option<(super::WatchEnd, Receiver<Instant>)> {
        fs::write(dir.join("x.lock"), "{}").unwrap();
        let (called, calls) = channel();
        let restore = move || {
            let _ = called.send(Instant::now());
            if failures > 0 {
                failures -= 1;
                Restored::Failed
            } else {
                Restored::Done
            }
        };
        let end = watch_removal(dir, "x.lock", false, restore, || {});
        assert_eq!(end.is_some(), WATCHED);
        let end = end?;
        fs::remove_file(dir.join("x.lock")).unwrap();
        Some((end, calls))
    }

    /// `restore` is called once 200 ms or so after the removal, and not again while nothing
    /// happens; the thread ends when the `WatchEnd` is dropped.
    #[test]
    fn a_removal_is_restored_and_a_dropped_end_ends_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let Some((end, calls, _)) = watched(dir.path()) else {
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

    /// A `restore` that could not write is called again, later each time ([`retry_wait`]: 1 s,
    /// then 2 s), until it can; then nothing more while nothing happens. (The lock file stayed
    /// away for good after one failed write: claude never found the bridge again.)
    #[test]
    fn a_failed_write_is_tried_again_later() {
        let dir = tempfile::tempdir().unwrap();
        let Some((_end, calls)) = removed_while_writes_fail(dir.path(), 2) else {
            return;
        };
        let wait = Duration::from_secs(10);
        let first = calls.recv_timeout(wait).expect("restore");
        let second = calls.recv_timeout(wait).expect("tried again");
        let third = calls.recv_timeout(wait).expect("tried again");
        assert!(second - first >= retry_wait(1) - Duration::from_millis(50));
        assert!(third - second >= retry_wait(2) - Duration::from_millis(50));
        assert_eq!(
            calls.recv_timeout(Duration::from_millis(500)),
            Err(RecvTimeoutError::Timeout),
            "written: not tried again"
        );
        assert_eq!(
            (retry_wait(1), retry_wait(2), retry_wait(30)),
            (
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(30)
            )
        );
    }

    /// While writes fail, what else happens in the folder (other files written and removed, the
    /// file itself made and removed by another) does not move the next try: it comes
    /// [`retry_wait`] after the failed one. (On Linux each event started the wait again, so a
    /// busy folder put the try off for as long as it stayed busy; a removal of the file made it
    /// 200 ms, and on macOS the watch's own tries did.)
    #[test]
    fn the_folders_changes_do_not_move_a_retry() {
        let dir = tempfile::tempdir().unwrap();
        let Some((_end, calls)) = removed_while_writes_fail(dir.path(), 1) else {
            return;
        };
        let first = calls
            .recv_timeout(Duration::from_secs(10))
            .expect("restore");
        // Changes every 50 ms for three times the wait, bounded.
        let busy_until = first + 3 * retry_wait(1);
        let mut second = None;
        let mut i = 0u32;
        while Instant::now() < busy_until && second.is_none() {
            let other = dir.path().join(format!("other-{}", i % 4));
            fs::write(&other, "x").unwrap();
            fs::remove_file(&other).unwrap();
            if i.is_multiple_of(2) {
                let again = dir.path().join("x.lock");
                fs::write(&again, "{}").unwrap();
                fs::remove_file(&again).unwrap();
            }
            i += 1;
            second = calls.recv_timeout(Duration::from_millis(50)).ok();
        }
        let second = second.expect("tried again while the folder changed");
        let after = second - first;
        assert!(
            after >= retry_wait(1) - Duration::from_millis(50) && after < 2 * retry_wait(1),
            "tried again {after:?} after the failure"
        );
    }

    /// The folder removed while writes fail: it is gone within a moment, not kept until the next
    /// try a second later (on Windows the watch holds no handle to it while it waits to try
    /// again; it holds one while `restore` runs, so a removal right as the failure is reported
    /// completes as `restore` returns), and the watch ends.
    #[test]
    fn the_folder_removed_while_writes_fail_ends_the_watch() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("ide");
        fs::create_dir(&dir).unwrap();
        let Some((_end, calls)) = removed_while_writes_fail(&dir, u32::MAX) else {
            return;
        };
        calls
            .recv_timeout(Duration::from_secs(10))
            .expect("restore");
        fs::remove_dir_all(&dir).unwrap();
        let removed = Instant::now();
        while dir.exists() && removed.elapsed() < retry_wait(1) / 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!dir.exists(), "the folder is gone before the next try");
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            match calls.recv_timeout(Duration::from_millis(100)) {
                Err(RecvTimeoutError::Disconnected) => break,
                _ => assert!(Instant::now() < give_up, "the watch did not end"),
            }
        }
    }

    /// The folder removed (its file first, as `rm -rf` does): no `restore`, `gone` called, the
    /// thread ends, and the folder is gone (not held by the watch).
    #[test]
    fn the_folder_removed_ends_the_watch() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("ide");
        fs::create_dir(&dir).unwrap();
        let Some((_end, calls, gone)) = watched(&dir) else {
            return;
        };
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            calls.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert_eq!(gone.try_recv(), Ok(()), "gone called");
        assert!(!dir.exists());
    }

    /// The folder moved away, then its file removed: no `restore` (in the folder moved, or at
    /// the old path), `gone` called, and the thread ends.
    #[test]
    fn the_folder_moved_ends_the_watch() {
        let top = tempfile::tempdir().unwrap();
        let (dir, moved) = (top.path().join("ide"), top.path().join("moved"));
        fs::create_dir(&dir).unwrap();
        let Some((_end, calls, gone)) = watched(&dir) else {
            return;
        };
        fs::rename(&dir, &moved).unwrap();
        fs::remove_file(moved.join("x.lock")).unwrap();
        assert_eq!(
            calls.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert_eq!(gone.try_recv(), Ok(()), "gone called");
    }

    /// A watch dropped calls neither `restore` nor `gone`.
    #[test]
    fn a_dropped_watch_calls_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let Some((end, calls, gone)) = watched(dir.path()) else {
            return;
        };
        drop(end);
        assert_eq!(
            calls.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert_eq!(
            gone.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected)
        );
    }

    /// With `first`, `restore` is called at once, and tried again while it fails, the file there
    /// or not (the watch of a folder made again, whose file is not written yet).
    #[test]
    fn first_writes_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (called, calls) = channel();
        let mut failures = 1;
        let restore = move || {
            let _ = called.send(Instant::now());
            if failures > 0 {
                failures -= 1;
                return Restored::Failed;
            }
            Restored::Done
        };
        let started = Instant::now();
        let end = watch_removal(dir.path(), "x.lock", true, restore, || {});
        assert_eq!(end.is_some(), WATCHED);
        let Some(_end) = end else {
            return;
        };
        // Nothing was removed: only `first` calls it (at once; the bound leaves room for a
        // loaded machine).
        let first = calls.recv_timeout(Duration::from_secs(5)).expect("at once");
        assert!(
            first - started < Duration::from_secs(1),
            "{:?}",
            first - started
        );
        let again = calls.recv_timeout(Duration::from_secs(5)).expect("again");
        assert!(again - first >= retry_wait(1) - Duration::from_millis(50));
        assert_eq!(
            calls.recv_timeout(Duration::from_millis(500)),
            Err(RecvTimeoutError::Timeout)
        );
    }

    /// A watch of `dir`'s quiet; the channel says how it ended and when.
    fn quiet_watch(
        dir: &Path,
        settle: Settle,
    ) -> Option<(super::WatchEnd, Receiver<(Quiet, Instant)>)> {
        let (said, done) = channel();
        let end = watch_quiet(dir, settle, move |q| {
            said.send((q, Instant::now())).unwrap()
        });
        assert_eq!(end.is_some(), WATCHED);
        Some((end?, done))
    }

    /// Changes every 100 ms (a file and a folder made and removed, a file renamed) for 600 ms:
    /// settled `quiet` after the last one, not before; a file written in place (no name
    /// changed) is no change.
    #[test]
    fn a_folder_is_quiet_a_while_after_its_last_change() {
        let dir = tempfile::tempdir().unwrap();
        let quiet = Duration::from_millis(400);
        let Some((_end, done)) =
            quiet_watch(dir.path(), Settle::from_now(quiet, Duration::from_secs(20)))
        else {
            return;
        };
        fs::write(dir.path().join("kept"), "x").unwrap();
        let mut last = Instant::now();
        for i in 0..6 {
            std::thread::sleep(Duration::from_millis(100));
            let (file, folder) = (dir.path().join("f"), dir.path().join("d"));
            match i % 3 {
                0 => fs::write(&file, "x").unwrap(),
                1 => fs::rename(&file, dir.path().join("g")).unwrap(),
                _ => {
                    fs::create_dir(&folder).unwrap();
                    fs::remove_dir(&folder).unwrap();
                    fs::remove_file(dir.path().join("g")).unwrap();
                }
            }
            last = Instant::now();
            assert!(done.try_recv().is_err(), "settled while it changed");
        }
        // Written in place, not renamed: no name changed.
        fs::write(dir.path().join("kept"), "y").unwrap();
        let (how, at) = done.recv_timeout(Duration::from_secs(10)).expect("settled");
        assert_eq!(how, Quiet::Settled);
        assert!(
            at - last >= quiet - Duration::from_millis(50),
            "{:?}",
            at - last
        );
    }

    /// A folder that never rests is settled `longest` after the first change.
    #[test]
    fn a_busy_folder_is_not_waited_for_longer_than_longest() {
        let dir = tempfile::tempdir().unwrap();
        let longest = Duration::from_millis(800);
        let settle = Settle::from_now(Duration::from_millis(300), longest);
        let started = Instant::now();
        let Some((_end, done)) = quiet_watch(dir.path(), settle) else {
            return;
        };
        let give_up = started + Duration::from_secs(10);
        let settled = loop {
            let file = dir.path().join("f");
            fs::write(&file, "x").unwrap();
            fs::remove_file(&file).unwrap();
            if let Ok(said) = done.recv_timeout(Duration::from_millis(50)) {
                break said;
            }
            assert!(Instant::now() < give_up, "never settled");
        };
        assert_eq!(settled.0, Quiet::Settled);
        let after = settled.1 - started;
        assert!(
            after >= longest - Duration::from_millis(50) && after < 3 * longest,
            "{after:?}"
        );
    }

    /// Counted from the first change: asleep until then, however long; then settled after the
    /// quiet. A folder made in it is a change.
    #[test]
    fn after_a_change_waits_for_one() {
        let dir = tempfile::tempdir().unwrap();
        let quiet = Duration::from_millis(200);
        let settle = Settle::after_a_change(quiet, Duration::from_secs(20));
        let Some((_end, done)) = quiet_watch(dir.path(), settle) else {
            return;
        };
        assert!(
            done.recv_timeout(Duration::from_millis(800)).is_err(),
            "settled with no change"
        );
        let changed = Instant::now();
        fs::create_dir(dir.path().join(".claude")).unwrap();
        let (how, at) = done.recv_timeout(Duration::from_secs(10)).expect("settled");
        assert_eq!(how, Quiet::Settled);
        assert!(at - changed >= quiet - Duration::from_millis(50));
    }

    /// The folder removed while waiting: `Gone`, and the folder is gone (not held by the watch).
    /// A watch dropped calls nothing.
    #[test]
    fn a_quiet_watch_ends_when_its_folder_goes_or_it_is_dropped() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join(".claude");
        fs::create_dir(&dir).unwrap();
        let settle = || Settle::after_a_change(Duration::from_millis(200), Duration::from_secs(20));
        let Some((_end, done)) = quiet_watch(&dir, settle()) else {
            return;
        };
        fs::write(dir.join("f"), "x").unwrap();
        fs::remove_dir_all(&dir).unwrap();
        let (how, _) = done.recv_timeout(Duration::from_secs(10)).expect("ended");
        assert_eq!(how, Quiet::Gone);
        assert!(!dir.exists());
        let (end, done) = quiet_watch(top.path(), settle()).unwrap();
        drop(end);
        fs::write(top.path().join("f"), "x").unwrap();
        assert_eq!(
            done.recv_timeout(Duration::from_secs(5)),
            Err(RecvTimeoutError::Disconnected),
            "ended, nothing said"
        );
    }
}
