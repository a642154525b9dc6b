//! Unix (Linux, macOS and the others): modes and owners, `kill(pid, 0)`, signals through
//! `signal-hook`.

use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use claude_ide_bridge::ClientPaths;
use rustix::fs::OFlags;
use rustix::process::{getuid, test_kill_process, Pid};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use signal_hook::low_level::emulate_default_handler;

pub(crate) const HOME_VAR: &str = "HOME";

/// What a lock file's `runningInWindows` says of this process: not Windows.
pub(crate) const RUNNING_IN_WINDOWS: bool = false;

/// Whether a listener may be bound to a specific address on a port another socket already serves
/// on every address: on macOS and the BSDs (`SO_REUSEADDR`, which std sets on listeners), not on
/// Linux, which refuses the bind.
pub(crate) const BINDS_OVER_WILDCARD: bool = !cfg!(any(target_os = "linux", target_os = "android"));

/// When a lock-file watch writes its file again: [`REWRITE_SETTLE`](super::REWRITE_SETTLE) after
/// the removal, then
/// [`retry_wait`](super::retry_wait) after each write that failed. The time is a deadline: what
/// else wakes the watch meanwhile (other files of the folder, the watch's own tries) does not
/// move it, and a removal seen while writes fail is the watch's own doing or another's in a
/// folder it cannot write: the next try keeps its time.
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[derive(Debug, Default)]
struct Rewrite {
    /// When the file is to be written (`None`: nothing to write).
    at: Option<std::time::Instant>,
    /// The writes that failed in a row.
    failures: u32,
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
impl Rewrite {
    /// The file was seen removed.
    fn removed(&mut self) {
        if self.failures == 0 {
            self.at = Some(std::time::Instant::now() + super::REWRITE_SETTLE);
        }
    }

    /// How long the watch may sleep: until the write (zero: due), or for good (`None`).
    fn wait(&self) -> Option<std::time::Duration> {
        self.at
            .map(|at| at.saturating_duration_since(std::time::Instant::now()))
    }

    /// Calls `restore` when the write is due; `false` when the watch is to end.
    fn write_if_due(&mut self, restore: &mut impl FnMut() -> super::Restored) -> bool {
        if self.wait() != Some(std::time::Duration::ZERO) {
            return true;
        }
        match restore() {
            super::Restored::Done => *self = Rewrite::default(),
            super::Restored::Failed => {
                self.failures += 1;
                self.at = Some(std::time::Instant::now() + super::retry_wait(self.failures));
            }
            super::Restored::End => return false,
        }
        true
    }
}

/// Ends a [`watch_removal`] or a [`watch_quiet`] when dropped: its thread sees the pipe's other
/// end close.
#[cfg_attr(not(any(target_os = "linux", target_os = "macos")), allow(dead_code))]
pub(crate) struct WatchEnd(#[allow(dead_code)] std::os::fd::OwnedFd);

/// Runs a watch's loop on a thread of its own.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn spawn_watch(watch: impl FnOnce() + Send + 'static, end: WatchEnd) -> Option<WatchEnd> {
    std::thread::Builder::new()
        .name("lock-watch".into())
        .spawn(watch)
        .ok()?;
    Some(end)
}

/// What ended a folder watch's sleep, when not a change or its time.
#[cfg(any(target_os = "linux", target_os = "macos"))]
enum Stop {
    /// The [`WatchEnd`] was dropped, or the watch failed.
    End,
    /// The folder itself was removed or moved.
    Gone,
}

/// [`watch_removal`]'s loop, over a folder watch's `removed` (sleeps for at most the time it is
/// given, `None`: for good; whether the lock file was seen removed meanwhile, or what stopped
/// it): writes the file as [`Rewrite`] says, and calls `gone` when the folder goes.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn until_ended(
    first: bool,
    mut restore: impl FnMut() -> super::Restored,
    gone: impl FnOnce(),
    mut removed: impl FnMut(Option<std::time::Duration>) -> Result<bool, Stop>,
) {
    let mut rewrite = Rewrite::default();
    if first {
        rewrite.at = Some(std::time::Instant::now());
    }
    loop {
        if !rewrite.write_if_due(&mut restore) {
            return;
        }
        match removed(rewrite.wait()) {
            Ok(true) => rewrite.removed(),
            Ok(false) => {}
            Err(Stop::End) => return,
            Err(Stop::Gone) => return gone(),
        }
    }
}

/// [`watch_quiet`]'s loop, over a folder watch's `changed` (sleeps for at most the time it is
/// given, `None`: for good; whether an entry changed meanwhile, or what stopped it): calls `done`
/// once `settle`'s quiet came, or the folder went.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn until_quiet(
    mut settle: super::Settle,
    done: impl FnOnce(super::Quiet),
    mut changed: impl FnMut(Option<std::time::Duration>) -> Result<bool, Stop>,
) {
    loop {
        if settle.wait() == Some(std::time::Duration::ZERO) {
            return done(super::Quiet::Settled);
        }
        match changed(settle.wait()) {
            Ok(true) => settle.changed(),
            Ok(false) => {}
            Err(Stop::End) => return,
            Err(Stop::Gone) => return done(super::Quiet::Gone),
        }
    }
}

/// An inotify watch of one folder and the pipe its [`WatchEnd`] closes, for a thread that sleeps
/// in `poll` on both.
#[cfg(target_os = "linux")]
struct Inotify {
    fd: std::os::fd::OwnedFd,
    ended: std::os::fd::OwnedFd,
    buf: Vec<std::mem::MaybeUninit<u8>>,
}

#[cfg(target_os = "linux")]
impl Inotify {
    /// `dir` watched for `flags` (nothing but a folder taken), and whether it was removed or
    /// moved.
    fn new(dir: &Path, flags: rustix::fs::inotify::WatchFlags) -> Option<(Inotify, WatchEnd)> {
        use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        let always = WatchFlags::DELETE_SELF | WatchFlags::MOVE_SELF | WatchFlags::ONLYDIR;
        inotify::add_watch(&fd, dir, flags | always).ok()?;
        let (ended, end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
        let buf = vec![std::mem::MaybeUninit::uninit(); 4096];
        Some((Inotify { fd, ended, buf }, WatchEnd(end)))
    }

    /// Sleeps until names in the folder change (each name passed to `seen`; `Ok(true)`), `wait`
    /// has passed (`None`: for good; `Ok(false)`), the folder goes or the watch ends.
    fn wait(
        &mut self,
        wait: Option<std::time::Duration>,
        mut seen: impl FnMut(&[u8]),
    ) -> Result<bool, Stop> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        use rustix::fs::inotify::{self, ReadFlags};
        let timespec = |d: std::time::Duration| Timespec {
            tv_sec: d.as_secs().try_into().unwrap_or(i64::MAX),
            tv_nsec: d.subsec_nanos().into(),
        };
        let mut fds = [
            PollFd::new(&self.fd, PollFlags::IN),
            PollFd::new(&self.ended, PollFlags::IN),
        ];
        let ready = match poll(&mut fds, wait.map(timespec).as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => return Ok(false),
            Err(_) => return Err(Stop::End),
        };
        if !fds[1].revents().is_empty() {
            return Err(Stop::End);
        }
        if ready == 0 {
            return Ok(false);
        }
        let (mut gone, mut changed) = (false, false);
        let mut events = inotify::Reader::new(&self.fd, &mut self.buf);
        while let Ok(e) = events.next() {
            let folder_gone = ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED;
            gone |= e.events().intersects(folder_gone);
            if let Some(name) = e.file_name() {
                changed = true;
                seen(name.to_bytes());
            }
        }
        if gone {
            return Err(Stop::Gone);
        }
        Ok(changed)
    }
}

/// Watches `dir` for the removal of its file `name` (inotify, on a thread of its own that sleeps
/// until then: no wake-up while nothing happens), and calls `restore` 200 ms after (a removal of
/// the folder under way is seen by then), at once with `first`, and again after
/// [`retry_wait`](super::retry_wait) while it fails; `restore` returns
/// [`End`](super::Restored::End) to end the watch. When `dir` itself is removed or moved, the
/// watch calls `gone` and ends; it also ends when the [`WatchEnd`] is dropped. `None` when it
/// could not be set up.
#[cfg(target_os = "linux")]
pub(crate) fn watch_removal(
    dir: &Path,
    name: &str,
    first: bool,
    restore: impl FnMut() -> super::Restored + Send + 'static,
    gone: impl FnOnce() + Send + 'static,
) -> Option<WatchEnd> {
    use rustix::fs::inotify::WatchFlags;
    // A link at the lock file's folder is not followed (the folder is refused as one).
    let removals = WatchFlags::DELETE | WatchFlags::MOVED_FROM | WatchFlags::DONT_FOLLOW;
    let (mut inotify, end) = Inotify::new(dir, removals)?;
    let name = name.as_bytes().to_vec();
    let removed = move |wait| {
        let mut removed = false;
        inotify.wait(wait, |n| removed |= n == name)?;
        Ok(removed)
    };
    spawn_watch(move || until_ended(first, restore, gone, removed), end)
}

/// Watches `dir` until its entries have not changed (added, removed, renamed) for the while
/// `settle` says, then calls `done(Settled)`; `done(Gone)` when `dir` itself is removed or moved
/// first (inotify, on a thread of its own asleep between changes). Ends without calling `done`
/// when the [`WatchEnd`] is dropped. `None` when it could not be set up.
#[cfg(target_os = "linux")]
pub(crate) fn watch_quiet(
    dir: &Path,
    settle: super::Settle,
    done: impl FnOnce(super::Quiet) + Send + 'static,
) -> Option<WatchEnd> {
    use rustix::fs::inotify::WatchFlags;
    let names =
        WatchFlags::CREATE | WatchFlags::DELETE | WatchFlags::MOVED_FROM | WatchFlags::MOVED_TO;
    let (mut inotify, end) = Inotify::new(dir, names)?;
    let changed = move |wait| inotify.wait(wait, |_| {});
    spawn_watch(move || until_quiet(settle, done, changed), end)
}

/// A kqueue watch of one folder (a vnode filter, whose `NOTE_WRITE` says an entry changed) and the
/// read end of the pipe its [`WatchEnd`] closes, in the same queue.
#[cfg(target_os = "macos")]
struct Kqueue {
    watcher: kqueue::Watcher,
    /// The folder and the pipe's read end, open as long as the watcher.
    _fds: (std::os::fd::OwnedFd, std::os::fd::OwnedFd),
}

#[cfg(target_os = "macos")]
impl Kqueue {
    /// `dir` watched (a link at `dir` followed with `follow` only, and nothing but a folder
    /// taken).
    fn new(dir: &Path, follow: bool) -> Option<(Kqueue, WatchEnd)> {
        use kqueue::{EventFilter, FilterFlag, Watcher};
        use rustix::fs::Mode;
        use std::os::fd::AsRawFd;
        // `O_EVTONLY` (macOS' <sys/fcntl.h>; rustix has no name for it): opened for its events
        // only, the folder's handle does not keep its volume from being unmounted or ejected, as
        // a read-only one would.
        const EVENTS_ONLY: OFlags = OFlags::from_bits_retain(0x0000_8000);
        let mut flags = EVENTS_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let folder = rustix::fs::open(dir, flags, Mode::empty()).ok()?;
        // No `pipe2` on macOS: close-on-exec set after.
        let (ended, end) = rustix::pipe::pipe().ok()?;
        for fd in [&ended, &end] {
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC).ok()?;
        }
        let mut watcher = Watcher::new().ok()?;
        let changes = FilterFlag::NOTE_WRITE
            | FilterFlag::NOTE_DELETE
            | FilterFlag::NOTE_RENAME
            | FilterFlag::NOTE_REVOKE;
        watcher
            .add_fd(folder.as_raw_fd(), EventFilter::EVFILT_VNODE, changes)
            .ok()?;
        watcher
            .add_fd(
                ended.as_raw_fd(),
                EventFilter::EVFILT_READ,
                FilterFlag::empty(),
            )
            .ok()?;
        watcher.watch().ok()?;
        let watch = Kqueue {
            watcher,
            _fds: (folder, ended),
        };
        Some((watch, WatchEnd(end)))
    }

    /// Sleeps until an entry of the folder changes (`Ok(true)`), `wait` has passed (`None`: for
    /// good; `Ok(false)`), the folder goes (`NOTE_DELETE`, `NOTE_RENAME`, `NOTE_REVOKE`) or the
    /// watch ends (the pipe's write end closed, or the queue failed).
    fn wait(&mut self, wait: Option<std::time::Duration>) -> Result<bool, Stop> {
        use kqueue::{EventData, Vnode};
        let event = match wait {
            Some(wait) => self.watcher.poll(Some(wait)),
            None => self.watcher.poll_forever(None),
        };
        let Some(event) = event else {
            return Ok(false);
        };
        match event.data {
            EventData::Vnode(Vnode::Delete | Vnode::Rename | Vnode::Revoke) => Err(Stop::Gone),
            EventData::Vnode(_) => Ok(true),
            EventData::Error(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            _ => Err(Stop::End),
        }
    }
}

/// Watches `dir` for the removal of its file `name` (kqueue: a vnode filter on the folder, whose
/// `NOTE_WRITE` says an entry changed, and the file is looked at; on a thread of its own that
/// sleeps in `kevent` until then: no wake-up while nothing happens), and calls `restore` 200 ms
/// after (a removal of the folder under way is seen by then), at once with `first`, and again
/// after [`retry_wait`](super::retry_wait) while it fails; `restore` returns
/// [`End`](super::Restored::End) to end the watch. When `dir` itself is removed or moved, the
/// watch calls `gone` and ends; it also ends when the [`WatchEnd`] is dropped (its pipe's read
/// end, in the same queue, sees the other close). `None` when it could not be set up.
#[cfg(target_os = "macos")]
pub(crate) fn watch_removal(
    dir: &Path,
    name: &str,
    first: bool,
    restore: impl FnMut() -> super::Restored + Send + 'static,
    gone: impl FnOnce() + Send + 'static,
) -> Option<WatchEnd> {
    let (mut kqueue, end) = Kqueue::new(dir, false)?;
    let path = dir.join(name);
    let removed = move |wait| {
        let changed = kqueue.wait(wait)?;
        let lost = || std::fs::symlink_metadata(&path);
        Ok(changed && lost().is_err_and(|e| e.kind() == io::ErrorKind::NotFound))
    };
    spawn_watch(move || until_ended(first, restore, gone, removed), end)
}

/// Watches `dir` until its entries have not changed (added, removed, renamed: the folder's
/// `NOTE_WRITE`) for the while `settle` says, then calls `done(Settled)`; `done(Gone)` when
/// `dir` itself is removed or moved first (kqueue, on a thread of its own asleep between
/// changes). Ends without calling `done` when the [`WatchEnd`] is dropped. `None` when it could
/// not be set up.
#[cfg(target_os = "macos")]
pub(crate) fn watch_quiet(
    dir: &Path,
    settle: super::Settle,
    done: impl FnOnce(super::Quiet) + Send + 'static,
) -> Option<WatchEnd> {
    let (mut kqueue, end) = Kqueue::new(dir, true)?;
    spawn_watch(
        move || until_quiet(settle, done, move |wait| kqueue.wait(wait)),
        end,
    )
}

/// No watch here (the other Unixes): a lock file removed by another process stays removed.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn watch_removal(
    _dir: &Path,
    _name: &str,
    _first: bool,
    _restore: impl FnMut() -> super::Restored + Send + 'static,
    _gone: impl FnOnce() + Send + 'static,
) -> Option<WatchEnd> {
    None
}

/// No watch here (the other Unixes).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn watch_quiet(
    _dir: &Path,
    _settle: super::Settle,
    _done: impl FnOnce(super::Quiet) + Send + 'static,
) -> Option<WatchEnd> {
    None
}

/// Creates `dir` (parents included) with mode 0700.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Why a directory is not private to this user: owned by another, or writable by group or
/// others; `None` when it is.
pub(crate) fn private_dir_problem(meta: &Metadata) -> Option<&'static str> {
    if !owned_by_me(meta) {
        return Some("it is owned by another user");
    }
    if meta.mode() & 0o022 != 0 {
        return Some("it is writable by group or others");
    }
    None
}

/// Creates a new file, mode 0600, failing if anything (a symlink included) is at `path`.
pub(crate) fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags((OFlags::NOFOLLOW | OFlags::CLOEXEC).bits() as i32)
        .open(path)
}

/// Opens `path` to read without waiting on it: a FIFO or a device planted where a file was
/// expected opens at once (`O_NONBLOCK`, which a regular file's reads ignore), for the caller to
/// refuse as not a regular file.
pub(crate) fn open_to_read(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(path)
}

pub(crate) fn owned_by_me(meta: &Metadata) -> bool {
    meta.uid() == getuid().as_raw()
}

/// The same file (device and inode).
pub(crate) fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.ino() == b.ino() && a.dev() == b.dev()
}

/// Whether linking a file to a new name failed because the file system has no hard links (FAT's
/// `EPERM`, another's `ENOTSUP`), so that the file may be renamed into place instead; not for a
/// failure another try or a rename would meet too.
pub(crate) fn links_unsupported(e: &io::Error) -> bool {
    use rustix::io::Errno;
    e.kind() == io::ErrorKind::Unsupported
        || e.raw_os_error().is_some_and(|code| {
            [Errno::PERM, Errno::NOTSUP, Errno::OPNOTSUPP, Errno::NOSYS]
                .iter()
                .any(|no| no.raw_os_error() == code)
        })
}

/// Whether a file operation failed for a moment only (another process holding the file): never
/// on Unix, where nothing holds a name.
pub(crate) fn held_for_a_moment(_: &io::Error) -> bool {
    false
}

/// `kill(pid, 0)`: alive unless it says there is no such process (a process of another user
/// answers "not permitted", and is alive). Pids that cannot name a process (0, or too large)
/// count as alive, so their files are kept.
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return true;
    };
    match test_kill_process(p) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// How a client whose `ide_connected` names `pid` names files: as the host does (a Unix host's
/// clients are on the same kind of system; one elsewhere is the path map's business).
pub(crate) fn client_paths(_pid: u32) -> ClientPaths {
    ClientPaths::AsGiven
}

/// `waitid(WEXITED | WNOWAIT)` until child `pid` has ended, past its stops (macOS reports a
/// stopped child with `WEXITED`'s bit, and again at once while it stays stopped).
pub(crate) fn wait_until_ended(pid: u32) {
    use rustix::process::{waitid, WaitId, WaitIdOptions};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
    loop {
        match waitid(WaitId::Pid(pid), options) {
            Err(rustix::io::Errno::INTR) => {}
            Ok(Some(status)) if !(status.exited() || status.killed() || status.dumped()) => {
                std::thread::sleep(crate::process::STOPPED_LOOK_AGAIN);
            }
            _ => return,
        }
    }
}

/// When process `pid` started, as this host's wall clock told it then: not known on Linux, which
/// keeps a process's start only as a time after boot. Turned into a wall-clock time with the
/// clock since boot, it moves with every step of the wall clock (a virtual machine resumed after
/// the laptop slept, WSL's among them, steps it by hours while its boot clock stood still), and
/// a live bridge would then pass for one started after its own lock file. Linux tells its
/// processes apart by [`process_start`] instead.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn process_started(_pid: u32) -> Option<std::time::SystemTime> {
    None
}

/// Process `pid`'s start, as a lock file's `processStart` keeps it: on Linux the boot id and the
/// start in clock ticks after boot (`/proc/PID/stat`), which name one process of this boot (a
/// container's restart starts its processes at other ticks), and which no step of the wall clock
/// moves. `None` where `/proc` does not tell (and on the other Unixes, where
/// [`process_started`]'s wall-clock start serves instead).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn process_start(pid: u32) -> Option<String> {
    let boot = read_proc("/proc/sys/kernel/random/boot_id")?;
    let stat = read_proc(format!("/proc/{pid}/stat"))?;
    let boot = boot.trim();
    let ticks = start_ticks(&stat)?;
    (!boot.is_empty()).then(|| format!("{boot}/{ticks}"))
}

/// Whether process `pid` has ended and waits for its parent to reap it (a zombie), from
/// `/proc/PID/stat`: its main thread's state `Z` (or `X` on its way out), and no other thread
/// left, or every other one ending too (a whole process killed has SIGKILL pending for each of
/// its threads, then each exiting, until each is gone, which a thread blocked in the kernel, an
/// `fsync`, delays). A process whose main thread ended while its others run shows `Z` as well:
/// it runs.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn ended_unreaped(pid: u32) -> bool {
    let Some(stat) = read_proc(format!("/proc/{pid}/stat")) else {
        return false;
    };
    match stat_ended(&stat) {
        Some(true) => true,
        Some(false) => false,
        // Its main thread ended, others are left.
        None => std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
            (tasks.map_while(Result::ok).take(4096))
                .filter(|t| t.file_name().to_str() != Some(pid.to_string().as_str()))
                .all(|t| {
                    let stat = read_proc(t.path().join("stat"));
                    let status = read_proc(t.path().join("status"));
                    stat.zip(status)
                        .is_none_or(|(st, s)| thread_ending(&st, &s))
                })
        }),
    }
}

/// A file of `/proc`, its first 4 KiB.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_proc(path: impl AsRef<Path>) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    let file = std::fs::File::open(path).ok()?;
    file.take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

/// What a `/proc/PID/stat` line says of the process's end: `Some(true)` ended (its state `Z` or
/// `X`, one thread: the 20th field, the 18th after the command's name), `Some(false)` not,
/// `None` when its main thread has ended and other threads are left.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn stat_ended(stat: &str) -> Option<bool> {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Some(false);
    };
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next().and_then(|s| s.chars().next());
    let threads = fields.nth(16).and_then(|n| n.parse::<u64>().ok());
    match (state, threads) {
        (Some('Z' | 'X' | 'x'), Some(0 | 1)) => Some(true),
        (Some('Z' | 'X' | 'x'), Some(_)) => None,
        _ => Some(false),
    }
}

/// Whether a thread's `/proc/PID/task/TID/stat` and `status` say it is ending: its state `Z` or
/// `X`, exiting (`PF_EXITING` in its flags, the 9th field: it took the SIGKILL and runs its
/// exit), or SIGKILL pending for it (`SigPnd`, bit 9).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn thread_ending(stat: &str, status: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    let mut fields = (stat.rsplit_once(')').map(|(_, rest)| rest))
        .unwrap_or("")
        .split_ascii_whitespace();
    let ended = fields
        .next()
        .is_some_and(|s| s.starts_with(['Z', 'X', 'x']));
    let flags = fields.nth(5).and_then(|f| f.parse::<u64>().ok());
    let exiting = flags.is_some_and(|f| f & PF_EXITING != 0);
    let killed = (status.lines())
        .find_map(|l| l.strip_prefix("SigPnd:").map(str::trim))
        .and_then(|m| u64::from_str_radix(m, 16).ok())
        .is_some_and(|m| m & (1 << 8) != 0);
    ended || exiting || killed
}

/// Whether process `pid` has ended and waits for its parent to reap it: `ps -o stat=` begins
/// with `Z` (the same keyword and letter in macOS's, the BSDs' and procps' `ps`).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn ended_unreaped(pid: u32) -> bool {
    ps_field(pid, "stat=").is_some_and(|s| s.trim_start().starts_with('Z'))
}

/// The start of `/proc/PID/stat`'s process in clock ticks after boot: its 22nd field, the 20th
/// after the command's name (in parentheses, and which may hold spaces and parentheses itself).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn start_ticks(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn process_start(_pid: u32) -> Option<String> {
    None
}

/// When process `pid` started, to the second, from `ps -o etime=` (how long it has run:
/// `[[dd-]hh:]mm:ss`, the same keyword in macOS's and the BSDs' `ps` and in procps, so Linux
/// tests this path too). `None` when `ps` cannot be run or names no such process.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn process_started(pid: u32) -> Option<std::time::SystemTime> {
    ps_started(pid)
}

#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
pub(crate) fn ps_started(pid: u32) -> Option<std::time::SystemTime> {
    let ran = elapsed_seconds(&ps_field(pid, "etime=")?)?;
    // A start before 1970 is no start: procps prints such an `etime` for a process younger
    // than the second its boot time is rounded to.
    std::time::SystemTime::now()
        .checked_sub(std::time::Duration::from_secs(ran))
        .filter(|t| *t >= std::time::UNIX_EPOCH)
}

/// What `ps -o KEYWORD -p PID` prints for process `pid`; `None` when `ps` cannot be run or names
/// no such process.
#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
fn ps_field(pid: u32, keyword: &str) -> Option<String> {
    let out = std::process::Command::new("ps")
        .args(["-o", keyword, "-p", &pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

/// `[[dd-]hh:]mm:ss` in seconds.
#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
pub(crate) fn elapsed_seconds(text: &str) -> Option<u64> {
    let text = text.trim();
    let (days, clock) = match text.split_once('-') {
        Some((d, rest)) => (d.parse::<u64>().ok()?, rest),
        None => (0, text),
    };
    let parts: Vec<u64> = clock
        .split(':')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    let (h, m, s) = match parts[..] {
        [m, s] => (0, m, s),
        [h, m, s] => (h, m, s),
        _ => return None,
    };
    Some(((days * 24 + h) * 60 + m) * 60 + s)
}

/// The POSIX form the engine compares paths in, which `claude` on Unix reads as is.
pub(crate) fn lock_folder(abs: &Path) -> String {
    claude_ide_bridge::to_posix(&abs.to_string_lossy())
}

/// The signals this process ignores (bit `n - 1` for signal `n`): each signal's disposition as
/// `sigaction` tells it, asked without changing it. One way on every Unix, so that Linux tests
/// what macOS runs (macOS's `ps` has no `sigignore` keyword: the query it was read with before
/// failed there, and every signal was taken as not ignored).
#[allow(unsafe_code)]
pub(crate) fn ignored_signals() -> u64 {
    let mut mask = 0;
    for signal in 1..=64 {
        // SAFETY: `sigaction` with a null new action only writes the current one into `old`, a
        // `sigaction` struct of the platform's layout (libc's), zeroed, which is a valid value
        // of it (integers, a function address as an integer, a signal set); nothing is
        // installed, so no handler can run because of this call. A signal number the system
        // does not have is refused (`EINVAL`) and left out.
        let ignored = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
        };
        if ignored {
            mask |= 1 << (signal - 1);
        }
    }
    mask
}

/// Runs `cleanup` on SIGINT or SIGTERM (those not ignored: `ignored(signal)` says), on a
/// `signal-hook` thread, then lets the signal's default action happen.
pub(crate) fn on_termination(cleanup: fn(), ignored: fn(i32) -> bool) -> io::Result<()> {
    let wanted: Vec<i32> = [SIGINT, SIGTERM]
        .into_iter()
        .filter(|s| !ignored(*s))
        .collect();
    let mut signals = Signals::new(wanted)?;
    std::thread::Builder::new()
        .name("claude-ide-bridge-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                cleanup();
                let _ = emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        })?;
    Ok(())
}

/// Shuts a listener down for reading, which on Linux ends an `accept` waiting on it; `false`
/// elsewhere (not known to work there).
pub(crate) fn shutdown_listener(listener: &std::net::TcpListener) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return rustix::net::shutdown(listener, rustix::net::Shutdown::Read).is_ok();
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    return {
        let _ = listener;
        false
    };
}

/// Nothing: on Unix a shutdown ends the `recv` or `send` another thread is blocked in.
pub(crate) fn cancel_blocked(_: &std::net::TcpStream) {}

/// Sends what the socket takes now (`MSG_DONTWAIT`, and no SIGPIPE where a flag says so: Linux;
/// the other Unixes' std sockets set `SO_NOSIGPIPE`), leaving the socket in blocking mode for the
/// threads that read and write it.
pub(crate) fn send_now(stream: &std::net::TcpStream, buf: &[u8]) -> io::Result<usize> {
    use rustix::net::{send, SendFlags};
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = SendFlags::DONTWAIT;
    Ok(send(stream, buf, flags)?)
}

/// `tcflush(TCIFLUSH)` on standard input when it is a terminal.
pub(crate) fn discard_typed() -> io::Result<()> {
    let stdin = std::io::stdin();
    if !rustix::termios::isatty(&stdin) {
        return Ok(());
    }
    rustix::termios::tcflush(&stdin, rustix::termios::QueueSelector::IFlush)?;
    Ok(())
}

/// The termios of standard input ([`crate::terminal::Settings`]).
pub(crate) struct TerminalSettings(rustix::termios::Termios);

/// `tcgetattr` on standard input; `None` when it is not a terminal.
pub(crate) fn terminal_settings() -> Option<TerminalSettings> {
    rustix::termios::tcgetattr(std::io::stdin())
        .ok()
        .map(TerminalSettings)
}

/// `tcsetattr(TCSANOW)` on standard input, then `reset` written to standard error, or standard
/// output when only that is the terminal (`2>log`: the sequences would go to the log, the
/// terminal left on the alternate screen), or neither when neither is.
pub(crate) fn put_back_terminal(saved: &TerminalSettings, reset: Option<&[u8]>) {
    use std::io::Write;
    let stdin = std::io::stdin();
    let _ = rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &saved.0);
    let Some(reset) = reset else {
        return;
    };
    if rustix::termios::isatty(std::io::stderr()) {
        let _ = std::io::stderr().write_all(reset);
    } else if rustix::termios::isatty(std::io::stdout()) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(reset).and_then(|()| out.flush());
    }
}

/// glibc's allocator settings and trim (`<malloc.h>`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) mod malloc {
    use std::ffi::c_int;

    const M_ARENA_MAX: c_int = -8;
    const M_MMAP_THRESHOLD: c_int = -3;

    unsafe extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
        fn malloc_trim(pad: usize) -> c_int;
    }

    fn set(param: c_int, value: usize) -> bool {
        let Ok(value) = c_int::try_from(value) else {
            return false;
        };
        // SAFETY: `mallopt` takes two integers and touches no memory of ours; glibc changes the
        // setting under its main arena's lock, so it may be called from any thread at any time.
        unsafe { mallopt(param, value) == 1 }
    }

    /// At most `most` malloc arenas (`mallopt(M_ARENA_MAX, most)`); whether it took.
    pub(crate) fn limit_malloc_arenas(most: u32) -> bool {
        usize::try_from(most).is_ok_and(|most| set(M_ARENA_MAX, most))
    }

    /// Blocks of `bytes` or more mapped on their own (`mallopt(M_MMAP_THRESHOLD, bytes)`, which
    /// also ends glibc's raising of the threshold to the largest block freed); whether it took.
    pub(crate) fn map_large_blocks(bytes: usize) -> bool {
        set(M_MMAP_THRESHOLD, bytes)
    }

    /// The free pages of every arena given back (`malloc_trim(0)`); whether any were.
    pub(crate) fn trim_malloc() -> bool {
        // SAFETY: `malloc_trim` takes a size and works on the allocator's own lists under each
        // arena's lock, so it may be called from any thread at any time.
        unsafe { malloc_trim(0) == 1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// A child that has ended and is not reaped yet exists (`pid_alive`), but has ended: as
    /// `/proc` says it on Linux and as `ps` says it elsewhere (run here too), and a lock file or
    /// state file it wrote is no live writer's (`process_is_writer`); reaped, it is gone.
    #[test]
    fn an_ended_unreaped_child_is_no_writer() {
        let mut child = Command::new("sh").args(["-c", "exit 0"]).spawn().unwrap();
        let pid = child.id();
        let start = process_start(pid);
        wait_until_ended(pid);
        assert!(pid_alive(pid), "a zombie holds its pid");
        assert!(ended_unreaped(pid));
        assert!(ps_field(pid, "stat=").is_some_and(|s| s.trim_start().starts_with('Z')));
        assert!(!crate::lock::process_is_writer(pid, start.as_deref(), None));
        child.wait().unwrap();
        assert!(!ended_unreaped(pid));
        // A live process has not ended.
        assert!(!ended_unreaped(std::process::id()));
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // The fields after the name: state, then 16 others, then the count of threads.
            let stat = |state: &str, threads: u32| {
                format!("12 (a) b) {state} 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 {threads} 0 99")
            };
            assert_eq!(
                stat_ended(&stat("Z", 1)),
                Some(true),
                "the name's own parenthesis"
            );
            assert_eq!(
                stat_ended(&stat("Z", 2)),
                None,
                "its main thread ended, others left"
            );
            assert_eq!(stat_ended(&stat("S", 1)), Some(false));
            assert_eq!(stat_ended(&stat("S", 4)), Some(false));
            assert_eq!(
                stat_ended("12 (a) Z 1 2"),
                Some(false),
                "cut short: not taken for ended"
            );
            assert_eq!(stat_ended("garbage"), Some(false));
            // The threads left: ending when killed (SIGKILL pending), exiting or ended.
            let status = |pending: &str| {
                format!("Name:\tx\nTgid:\t12\nSigQ:\t0/1\nSigPnd:\t{pending}\nShdPnd:\t0000000000000000\n")
            };
            let task = |state: &str, flags: u64| {
                format!("13 (a b) {state} 1 2 3 4 5 {flags} 7 8 9 10 11 12 13 14 15 16 2 0 99")
            };
            let none = status("0000000000000000");
            assert!(thread_ending(&task("D", 0x40), &status("0000000000000100")));
            assert!(thread_ending(&task("R", 0x40_0044), &none), "exiting");
            assert!(thread_ending(&task("Z", 0x40), &none));
            assert!(!thread_ending(&task("S", 0x40_0040), &none));
            assert!(!thread_ending(
                &task("R", 0x40),
                &status("0000000000004000")
            ));
            assert_eq!(
                start_ticks(&stat("Z", 1)),
                Some(99),
                "the same field counting"
            );
        }
    }

    /// A link refused because the file system has none falls back to a rename; one refused for
    /// another reason does not (a rename would replace what is there).
    #[test]
    fn only_a_file_system_without_links_falls_back_to_a_rename() {
        use rustix::io::Errno;
        let e = |no: Errno| io::Error::from_raw_os_error(no.raw_os_error());
        for no in [Errno::PERM, Errno::NOTSUP, Errno::NOSYS] {
            assert!(links_unsupported(&e(no)), "{no:?}");
        }
        for no in [
            Errno::ACCESS,
            Errno::EXIST,
            Errno::NOSPC,
            Errno::ROFS,
            Errno::IO,
        ] {
            assert!(!links_unsupported(&e(no)), "{no:?}");
            assert!(!held_for_a_moment(&e(no)), "{no:?}");
        }
    }

    /// The start is the 22nd field, after a name that may hold spaces and parentheses.
    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn a_start_is_read_after_any_name() {
        let fields = |name: &str| {
            format!("77 ({name}) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 5000 300")
        };
        assert_eq!(start_ticks(&fields("sh")), Some(123456));
        assert_eq!(start_ticks(&fields("a) (b c) 9 9")), Some(123456));
        assert_eq!(start_ticks("77 (sh) S 1"), None);
        assert_eq!(start_ticks("no name"), None);
        let me = process_start(std::process::id()).unwrap();
        assert_eq!(process_start(std::process::id()), Some(me));
        assert_eq!(process_start(u32::MAX), None);
    }

    /// A child started with SIGINT and SIGQUIT ignored (`trap ''` survives `exec`).
    fn deaf_child() -> std::process::Child {
        Command::new("sh")
            .args(["-c", "trap '' INT QUIT; exec sleep 30"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// What [`ignored_signals`] finds in a process started with SIGINT and SIGQUIT ignored
    /// (`trap ''` survives `exec`): this test's program run again by `sh`, with one test, this
    /// one, told by the environment to print its mask.
    #[test]
    fn the_signals_a_process_started_ignoring_are_found() {
        const PRINT: &str = "CLAUDE_IDE_BRIDGE_TEST_PRINT_IGNORED";
        if std::env::var_os(PRINT).is_some() {
            println!("ignored={:x}", ignored_signals());
            return;
        }
        use signal_hook::consts::{SIGQUIT, SIGUSR1};
        let bit = |signal: i32| 1u64 << (signal - 1);
        let (int, quit, usr1, term) = (bit(SIGINT), bit(SIGQUIT), bit(SIGUSR1), bit(SIGTERM));
        let run = |trap: &str| {
            let out = Command::new("sh")
                .args([
                    "-c",
                    &format!("{trap} exec \"$0\" \"$@\""),
                    &std::env::current_exe().unwrap().to_string_lossy(),
                    "--exact",
                    "sys::unix::tests::the_signals_a_process_started_ignoring_are_found",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(PRINT, "1")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // (Printed on the line the harness names the test on.)
            let hex = (text.split("ignored=").nth(1))
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("no mask printed: {text}"));
            u64::from_str_radix(hex, 16).unwrap()
        };
        let deaf = run("trap '' INT QUIT USR1;");
        assert_eq!(
            deaf & (int | quit | usr1 | term),
            int | quit | usr1,
            "mask {deaf:#x}"
        );
        // (SIGINT and SIGQUIT may be ignored here already: a shell without job control starts
        // its background jobs so, and a test run may be one.)
        let hearing = run("");
        assert_eq!(hearing & (usr1 | term), 0, "mask {hearing:#x}");
        // As Linux's own count has it, for the standard signals (glibc keeps 32 and 33 for
        // itself: its `sigaction` refuses them).
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("SigIgn:")).unwrap();
            let here = u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap();
            let standard = (1 << 31) - 1;
            assert_eq!(ignored_signals() & standard, here & standard);
        }
    }

    /// The start of a process, as `ps` tells it (macOS and the other Unixes; Linux runs the same
    /// query here): within a few seconds of when the test started it, and nothing for a reaped
    /// one.
    #[test]
    fn a_process_start_is_read() {
        let before = std::time::SystemTime::now();
        let mut child = deaf_child();
        let near = |t: std::time::SystemTime| {
            let off = t.duration_since(before).unwrap_or_else(|e| e.duration());
            off < Duration::from_secs(3)
        };
        // `ps` tells a start to the second, and procps none that makes sense within a process's
        // first second (see `ps_started`).
        std::thread::sleep(Duration::from_millis(1200));
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let started = process_started(child.id()).expect("a start");
            assert!(near(started), "{started:?} against {before:?}");
        }
        let by_ps = ps_started(child.id()).expect("ps answers");
        assert!(near(by_ps), "{by_ps:?} against {before:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(process_started(child.id()), None);
        assert_eq!(ps_started(child.id()), None);
    }

    #[test]
    fn etime_fields_are_read() {
        assert_eq!(elapsed_seconds(" 05:07\n"), Some(307));
        assert_eq!(elapsed_seconds("01:00:00"), Some(3600));
        assert_eq!(
            elapsed_seconds("2-03:04:05"),
            Some(((2 * 24 + 3) * 60 + 4) * 60 + 5)
        );
        assert_eq!(elapsed_seconds("x"), None);
        assert_eq!(elapsed_seconds("1:2:3:4"), None);
    }
}
