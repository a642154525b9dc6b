//! Windows: the lock file under `%USERPROFILE%`, process liveness through `OpenProcess`, a
//! console control handler for Ctrl-C, Ctrl-Break and closing the console, and the console's
//! input flushed before a question.
//!
//! Privacy: Windows has no mode bits. The lock-file directory `%USERPROFILE%\.claude\ide`
//! inherits the user profile's access list, which grants the user, SYSTEM and Administrators
//! only; files created in it inherit that list (what the official extensions rely on too). A
//! `CLAUDE_CONFIG_DIR` elsewhere is as private as the folder the user chose (SECURITY.md).

// The calls below have no safe wrapper in std; each is a plain Win32 call on values this
// module owns.
#![allow(unsafe_code)]

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::{AsRawHandle, AsRawSocket, FromRawHandle, OwnedHandle, RawHandle};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use claude_ide_bridge::ClientPaths;
use windows_sys::core::BOOL;
use windows_sys::Win32::Foundation::{
    CloseHandle, ERROR_INVALID_PARAMETER, ERROR_IO_INCOMPLETE, ERROR_NOTIFY_ENUM_DIR, FILETIME,
    HANDLE, STILL_ACTIVE, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, ReadDirectoryChangesW, BY_HANDLE_FILE_INFORMATION,
    FILE_ACTION_REMOVED, FILE_ACTION_RENAMED_OLD_NAME, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_FLAG_OVERLAPPED, FILE_LIST_DIRECTORY,
    FILE_NOTIFY_CHANGE_DIR_NAME, FILE_NOTIFY_CHANGE_FILE_NAME, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE,
};
use windows_sys::Win32::System::Console::{
    FlushConsoleInputBuffer, GetConsoleMode, SetConsoleCtrlHandler, SetConsoleMode,
    CTRL_BREAK_EVENT, CTRL_CLOSE_EVENT, CTRL_C_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
    ENABLE_PROCESSED_OUTPUT, ENABLE_VIRTUAL_TERMINAL_PROCESSING,
};
use windows_sys::Win32::System::Threading::{
    CreateEventW, GetExitCodeProcess, GetProcessTimes, OpenProcess, ResetEvent, SetEvent,
    WaitForMultipleObjects, WaitForSingleObject, INFINITE, PROCESS_QUERY_LIMITED_INFORMATION,
    PROCESS_SYNCHRONIZE,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};

pub(crate) const HOME_VAR: &str = "USERPROFILE";

/// What a lock file's `runningInWindows` says of this process: Windows.
pub(crate) const RUNNING_IN_WINDOWS: bool = true;

/// Whether a listener may be bound to a specific address on a port another socket already serves
/// on every address: yes, unless that socket was bound with `SO_EXCLUSIVEADDRUSE`.
pub(crate) const BINDS_OVER_WILDCARD: bool = true;

/// Ends a [`watch_removal`] or a [`watch_quiet`] when dropped: sets the event its thread waits on
/// beside its folder's read, and the thread cancels that read, waits for it to be done, closes
/// the folder and ends. Nothing is waited for here (the drop may happen under the lock that
/// `restore` takes).
pub(crate) struct WatchEnd(Arc<OwnedHandle>);

impl Drop for WatchEnd {
    fn drop(&mut self) {
        // SAFETY: the event is open for as long as this `Arc` holds it; setting it touches no
        // memory of ours. (It cannot fail on a valid event handle.)
        unsafe {
            SetEvent(self.0.as_raw_handle() as HANDLE);
        }
    }
}

/// Watches `dir` for the removal of its file `name` (`ReadDirectoryChangesW` on the folder, on a
/// thread of its own that sleeps in `WaitForMultipleObjects` until a name in it changes: no
/// wake-up while nothing happens), and calls `restore` 200 ms after (longer after reads in a row
/// that cannot say what changed: [`settle_ms`]), at once with `first`, and again after
/// [`retry_wait`](super::retry_wait) while it fails; `restore` returns
/// [`End`](super::Restored::End) to end the watch.
/// Meanwhile the folder is let go of: Windows (and Wine) deletes a folder when the last handle
/// to it closes, so a removal of the folder under way completes, and is seen after: when the
/// folder at `dir` is then gone or another (removed, or moved away), or a read of the folder
/// fails as it does on a folder being deleted and the folder is gone, the watch calls `gone`
/// and ends. It also ends when a read fails on a folder still there, and when the [`WatchEnd`]
/// is dropped. A folder moved away with nothing removed from it keeps its watch until its next
/// removal, or the drop. `None` when it could not be set up.
pub(crate) fn watch_removal(
    dir: &Path,
    name: &str,
    first: bool,
    mut restore: impl FnMut() -> super::Restored + Send + 'static,
    gone: impl FnOnce() + Send + 'static,
) -> Option<WatchEnd> {
    let name = name.to_string();
    let run = move |mut watch: DirWatch, folder: &Folder| {
        // Reads in a row that could not say what changed, and when the last one came: one a
        // minute or more after the last starts the count again.
        let (mut unknown, mut last_unknown) = (0, None::<std::time::Instant>);
        let mut removed = first;
        loop {
            if !removed {
                match watch.next(folder.ended, &name, INFINITE) {
                    Some(Seen::Other | Seen::Nothing) => continue,
                    Some(Seen::Removed) => unknown = 0,
                    Some(Seen::Unknown) => {
                        let recent = last_unknown.is_some_and(|t| t.elapsed() < STREAK_FORGOTTEN);
                        unknown = if recent { unknown + 1 } else { 1 };
                        last_unknown = Some(std::time::Instant::now());
                    }
                    None => {
                        drop(watch);
                        if folder.look() == Look::Gone {
                            gone();
                        }
                        return;
                    }
                }
            }
            // The file removed: `settle_ms` waited for (nothing at first), then the file
            // written, and tried again after `retry_wait` while it cannot be. Each wait lets go
            // of the folder (see above).
            let mut wait = if removed { 0 } else { settle_ms(unknown) };
            let mut failures = 0;
            removed = false;
            loop {
                drop(watch);
                // Still the folder at its path, watched again before the file is written (a
                // removal from now on is seen; one before, `restore` finds).
                watch = match folder.watch_again(wait) {
                    Ok(watch) => watch,
                    Err(Look::Gone) => return gone(),
                    Err(_) => return,
                };
                match restore() {
                    super::Restored::Done => break,
                    super::Restored::End => return,
                    super::Restored::Failed => failures += 1,
                }
                wait = super::retry_wait(failures).as_millis() as u32;
            }
        }
    };
    spawn_watch(dir, FILE_NOTIFY_CHANGE_FILE_NAME, run)
}

/// Watches `dir` until its entries have not changed (files and folders added, removed,
/// renamed) for the while `settle` says, then calls `done(Settled)`; `done(Gone)` when `dir`
/// itself was removed (the folder at the path is gone or another, looked at once the read
/// failed or the while passed, and the folder let go of: Windows deletes a folder only when its
/// last handle closes). `ReadDirectoryChangesW`, on a thread of its own asleep between changes.
/// Ends without calling `done` when the [`WatchEnd`] is dropped, or a read fails on a folder
/// still there. `None` when it could not be set up.
pub(crate) fn watch_quiet(
    dir: &Path,
    mut settle: super::Settle,
    done: impl FnOnce(super::Quiet) + Send + 'static,
) -> Option<WatchEnd> {
    let run = move |mut watch: DirWatch, folder: &Folder| loop {
        let wait = match settle.wait() {
            // Let go of, then looked at: a folder removed while watched is deleted only now
            // (Wine's reads go on as if it were there).
            Some(wait) if wait.is_zero() => {
                drop(watch);
                return match folder.look() {
                    Look::There => done(super::Quiet::Settled),
                    Look::Gone => done(super::Quiet::Gone),
                    Look::Ended => {}
                };
            }
            // Below `INFINITE`, rounded up: not woken a moment early, to sleep again.
            Some(wait) => wait
                .as_micros()
                .div_ceil(1000)
                .min(u128::from(INFINITE - 1)) as u32,
            None => INFINITE,
        };
        match watch.next(folder.ended, "", wait) {
            Some(Seen::Nothing) => {}
            Some(_) => settle.changed(),
            None => {
                drop(watch);
                if folder.look() == Look::Gone {
                    done(super::Quiet::Gone);
                }
                return;
            }
        }
    };
    let names = FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME;
    spawn_watch(dir, names, run)
}

/// What a watch finds when it looks at its folder, let go of ([`Folder::look`]).
#[derive(Debug, PartialEq)]
enum Look {
    /// The watch was ended (its `WatchEnd` dropped).
    Ended,
    /// The folder at the path is gone, or another.
    Gone,
    /// The folder watched is still there.
    There,
}

/// A watch's folder, as the watch's thread sees it.
struct Folder<'a> {
    dir: &'a Path,
    /// Its volume and file index.
    id: (u32, u32, u32),
    /// The changes read.
    filter: u32,
    /// Set when the watch is to end.
    ended: &'a OwnedHandle,
}

impl Folder<'_> {
    /// Whether the watch was ended, or the folder at the path is the one watched.
    fn look(&self) -> Look {
        self.look_after(0).err().unwrap_or(Look::There)
    }

    /// After `wait_ms` (or at once when the watch is ended meanwhile), the folder at the path,
    /// if it is the one watched; or what was found instead.
    fn look_after(&self, wait_ms: u32) -> Result<File, Look> {
        // SAFETY: the event is open for as long as the watch's thread holds its `Arc`.
        let woke = unsafe { WaitForSingleObject(self.ended.as_raw_handle() as HANDLE, wait_ms) };
        if woke != WAIT_TIMEOUT {
            return Err(Look::Ended);
        }
        match open_folder(self.dir) {
            Ok(folder) if file_id(&folder) == Some(self.id) => Ok(folder),
            _ => Err(Look::Gone),
        }
    }

    /// After `wait_ms`, the folder watched again if it is still the one at the path; what was
    /// found instead (a read that could not start ends the watch: [`Look::Ended`]).
    fn watch_again(&self, wait_ms: u32) -> Result<DirWatch, Look> {
        let folder = self.look_after(wait_ms)?;
        DirWatch::start(folder, self.filter).map_err(|_| Look::Ended)
    }
}

/// Runs a watch of the folder at `dir`, reading the changes `filter` names, on a thread of its
/// own, where its reads are made (a thread's pending reads are cancelled when it ends); the
/// first read is started there and waited for here (a change right after the return is seen),
/// then `run` is given it. `None` when it could not be set up.
fn spawn_watch(
    dir: &Path,
    filter: u32,
    run: impl FnOnce(DirWatch, &Folder) + Send + 'static,
) -> Option<WatchEnd> {
    let opened = open_folder(dir).ok()?;
    let id = file_id(&opened)?;
    let ended = Arc::new(new_event()?);
    let end = WatchEnd(Arc::clone(&ended));
    let dir = dir.to_path_buf();
    let (started, start) = std::sync::mpsc::sync_channel(1);
    let thread = move || {
        let watch = DirWatch::start(opened, filter);
        let _ = started.send(watch.is_ok());
        let Ok(watch) = watch else {
            return;
        };
        let folder = Folder {
            dir: &dir,
            id,
            filter,
            ended: &ended,
        };
        run(watch, &folder)
    };
    std::thread::Builder::new()
        .name("lock-watch".into())
        .spawn(thread)
        .ok()?;
    start.recv().unwrap_or(false).then_some(end)
}

/// What one read of a folder's changes says about the watched file.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Removed or renamed away.
    Removed,
    /// Not named: other files changed.
    Other,
    /// Cannot be told: more changed than the read's buffer holds, or the file system does not
    /// say (`ERROR_NOTIFY_ENUM_DIR`). Taken as a removal: the file is looked at and written again
    /// if it is gone.
    Unknown,
    /// Nothing changed within the wait.
    Nothing,
}

/// How long after the last read that could not say what changed the next one counts as the
/// first of a new series ([`settle_ms`]).
const STREAK_FORGOTTEN: std::time::Duration = std::time::Duration::from_secs(60);

/// How long the watch waits (milliseconds) before it looks at the file, after `unknown` reads in a
/// row that could not say what changed: [`REWRITE_SETTLE`](super::REWRITE_SETTLE) (200 ms),
/// doubled from the second such read on, at most 30 s. A file system that answers every read so (some network shares) would otherwise wake the
/// watch five times a second for as long as the bridge runs.
fn settle_ms(unknown: u32) -> u32 {
    const SETTLE: u32 = super::REWRITE_SETTLE.as_millis() as u32;
    const LONGEST: u32 = 30_000;
    let doublings = unknown.saturating_sub(1).min(8);
    (SETTLE << doublings).min(LONGEST)
}

/// `dir` opened to read its changes (overlapped), sharing everything: others may still write,
/// rename and delete in it, and delete it.
fn open_folder(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .access_mode(FILE_LIST_DIRECTORY)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OVERLAPPED)
        .open(dir)
}

/// A folder and its pending `ReadDirectoryChangesW`, whose buffer and `OVERLAPPED` stay in place
/// (boxed) until the read is done: the drop cancels a pending read and waits for it.
struct DirWatch {
    folder: File,
    /// Set when the read is done (the `OVERLAPPED`'s event).
    done: OwnedHandle,
    overlapped: Box<OVERLAPPED>,
    /// `FILE_NOTIFY_INFORMATION` records, 4-byte aligned as Windows wants them.
    buf: Box<[u32; 1024]>,
    pending: bool,
    /// The changes read (`FILE_NOTIFY_CHANGE_*`).
    filter: u32,
}

impl DirWatch {
    /// `folder` watched for the changes `filter` names: its first read started.
    fn start(folder: File, filter: u32) -> io::Result<DirWatch> {
        let mut watch = DirWatch {
            folder,
            filter,
            done: new_event().ok_or_else(io::Error::last_os_error)?,
            overlapped: Box::default(),
            buf: Box::new([0; 1024]),
            pending: false,
        };
        watch.read()?;
        Ok(watch)
    }

    /// Sleeps until names in the folder change, then says whether `name` was removed (or
    /// renamed away), or cannot be told (more changed than the buffer holds), and reads on;
    /// [`Seen::Nothing`] after `wait_ms` (`INFINITE`: never). `None` when `ended` is set, or a
    /// read or the wait failed.
    fn next(&mut self, ended: &OwnedHandle, name: &str, wait_ms: u32) -> Option<Seen> {
        let waits = [
            ended.as_raw_handle() as HANDLE,
            self.done.as_raw_handle() as HANDLE,
        ];
        // SAFETY: both handles are events held open for the length of the wait (`ended` by
        // the caller, `done` by `self`).
        let woke = unsafe { WaitForMultipleObjects(2, waits.as_ptr(), 0, wait_ms) };
        if woke == WAIT_TIMEOUT {
            return Some(Seen::Nothing);
        }
        if woke != WAIT_OBJECT_0 + 1 {
            return None;
        }
        // The records are read before the next read may write the buffer again.
        let bytes = self.result(false).ok()?;
        let seen = match bytes {
            0 => Seen::Unknown,
            _ if removes(&self.records(bytes), name) => Seen::Removed,
            _ => Seen::Other,
        };
        self.read().ok()?;
        Some(seen)
    }

    /// Starts a read of the folder's name changes (files added, removed, renamed).
    fn read(&mut self) -> io::Result<()> {
        if self.pending {
            return Err(io::ErrorKind::ResourceBusy.into());
        }
        *self.overlapped = OVERLAPPED {
            hEvent: self.done.as_raw_handle() as HANDLE,
            ..OVERLAPPED::default()
        };
        // Not set until this read is done (the last one's completion set it; the wait for the
        // next change must not see that).
        // SAFETY: the event is open for as long as `self` holds it.
        unsafe {
            ResetEvent(self.done.as_raw_handle() as HANDLE);
        }
        // SAFETY: the folder handle was opened with FILE_LIST_DIRECTORY and for overlapped
        // reads; the buffer (4-byte aligned, its size given in bytes), the OVERLAPPED and its
        // event are owned by `self`, boxed where Windows writes, and neither moved nor freed
        // while the read is pending (no second read starts before `result` says it is done, and
        // the drop waits for a pending one).
        let ok = unsafe {
            ReadDirectoryChangesW(
                self.folder.as_raw_handle() as HANDLE,
                self.buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&*self.buf) as u32,
                0,
                self.filter,
                std::ptr::null_mut(),
                &mut *self.overlapped,
                None,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        self.pending = true;
        Ok(())
    }

    /// The first `bytes` of the buffer, which a read that is done wrote.
    fn records(&self, bytes: u32) -> Vec<u8> {
        self.buf
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(bytes as usize)
            .collect()
    }

    /// The pending read's result, once its event is set (or, `wait`, waiting for it): the bytes
    /// written to the buffer (0 when more changed than it holds), or why it failed.
    fn result(&mut self, wait: bool) -> io::Result<u32> {
        let mut bytes = 0;
        // SAFETY: the OVERLAPPED is the one a read was started with on this handle, still in
        // place; `bytes` is a valid u32 to write to.
        let ok = unsafe {
            GetOverlappedResult(
                self.folder.as_raw_handle() as HANDLE,
                &*self.overlapped,
                &mut bytes,
                i32::from(wait),
            )
        };
        let result = if ok != 0 {
            Ok(bytes)
        } else {
            Err(io::Error::last_os_error())
        };
        let code = result.as_ref().err().and_then(io::Error::raw_os_error);
        if code != Some(ERROR_IO_INCOMPLETE as i32) {
            self.pending = false;
        }
        if code == Some(ERROR_NOTIFY_ENUM_DIR as i32) {
            return Ok(0);
        }
        result
    }
}

/// Whether change records (`FILE_NOTIFY_INFORMATION`, as `ReadDirectoryChangesW` writes them)
/// say the file `name` was removed or renamed away: the name compared as Windows does (ASCII
/// letters in any case), or a short 8.3 name (`12345~1.LOC`), which Windows may report instead
/// and which then may be it (writing the file again is a no-op if it is there). Nothing else is
/// looked at: opening the file here on each change would fail a rename over it meanwhile
/// (under Wine, any open file refuses to be replaced).
fn removes(records: &[u8], name: &str) -> bool {
    let word = |at: usize| {
        let bytes = records.get(at..at + 4)?;
        Some(u32::from_le_bytes(bytes.try_into().ok()?) as usize)
    };
    let mut at = 0;
    loop {
        let (Some(next), Some(action), Some(len)) = (word(at), word(at + 4), word(at + 8)) else {
            return false;
        };
        let Some(utf16) = records.get(at + 12..at + 12 + len) else {
            return false;
        };
        let units: Vec<u16> = utf16
            .chunks_exact(2)
            .map(|u| u16::from_le_bytes([u[0], u[1]]))
            .collect();
        let gone = String::from_utf16_lossy(&units);
        let away = action == FILE_ACTION_REMOVED as usize
            || action == FILE_ACTION_RENAMED_OLD_NAME as usize;
        if away && (gone.eq_ignore_ascii_case(name) || gone.contains('~')) {
            return true;
        }
        if next == 0 {
            return false;
        }
        at += next;
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        if !self.pending {
            return;
        }
        // SAFETY: the handle is open (closed only after this drop) and the OVERLAPPED is the
        // pending read's; cancelling a read that just finished fails harmlessly.
        unsafe {
            CancelIoEx(self.folder.as_raw_handle() as HANDLE, &*self.overlapped);
        }
        // Waited for (done or cancelled): the buffer and OVERLAPPED are freed only after. Should
        // the wait fail with the read still pending, they are left allocated rather than freed
        // under it.
        let _ = self.result(true);
        if self.pending {
            std::mem::forget(std::mem::take(&mut self.overlapped));
            std::mem::forget(std::mem::replace(&mut self.buf, Box::new([0; 1024])));
        }
    }
}

/// A new manual-reset event, not set.
fn new_event() -> Option<OwnedHandle> {
    // SAFETY: CreateEventW takes plain values (no attributes, no name) and returns a new handle,
    // owned from here on, or null.
    unsafe {
        let event = CreateEventW(std::ptr::null(), 1, 0, std::ptr::null());
        (!event.is_null()).then(|| OwnedHandle::from_raw_handle(event as RawHandle))
    }
}

/// The volume and file index of an open file: what names it on its volume.
fn file_id(file: &File) -> Option<(u32, u32, u32)> {
    let mut info = BY_HANDLE_FILE_INFORMATION::default();
    // SAFETY: the handle is open (borrowed from `file`), and `info` is a valid struct to fill.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle() as HANDLE, &mut info) } == 0 {
        return None;
    }
    Some((
        info.dwVolumeSerialNumber,
        info.nFileIndexHigh,
        info.nFileIndexLow,
    ))
}

/// Creates `dir` (parents included); it inherits its parent's access list.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)
}

/// Nothing to check beyond what the caller checks (a real directory, not a link): see the
/// module's note on privacy.
pub(crate) fn private_dir_problem(_: &Metadata) -> Option<&'static str> {
    None
}

/// Creates a new file, failing if anything is at `path` (std's `create_new` refuses an existing
/// link too), opening a reparse point itself rather than what it points to.
pub(crate) fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
}

/// Opens `path` to read (a named pipe has no name in a folder on Windows: nothing waits here).
pub(crate) fn open_to_read(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// Files in the lock directory are this user's (the directory is private, see above).
pub(crate) fn owned_by_me(_: &Metadata) -> bool {
    true
}

/// The same file: std gives no file index on stable, so its creation time (100 ns ticks), last
/// write time and size, which a file renamed into place meanwhile does not share.
pub(crate) fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.creation_time() == b.creation_time()
        && a.last_write_time() == b.last_write_time()
        && a.file_size() == b.file_size()
}

/// Whether linking a file to a new name failed because the volume has no hard links (FAT's
/// `ERROR_INVALID_FUNCTION`, a share's `ERROR_NOT_SUPPORTED`), so that the file may be renamed
/// into place instead; not for a failure another try or a rename would meet too.
pub(crate) fn links_unsupported(e: &io::Error) -> bool {
    const ERROR_INVALID_FUNCTION: i32 = 1;
    const ERROR_NOT_SUPPORTED: i32 = 50;
    e.kind() == io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(ERROR_INVALID_FUNCTION | ERROR_NOT_SUPPORTED)
        )
}

/// Whether a file operation failed for a moment only: another process (a virus scanner, an
/// indexer) has the file just written open, and Windows refuses a link or a rename meanwhile
/// (`ERROR_ACCESS_DENIED`, `ERROR_SHARING_VIOLATION`, `ERROR_LOCK_VIOLATION`).
pub(crate) fn held_for_a_moment(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(5 | 32 | 33))
}

/// Alive unless Windows says there is no such process or that it has exited: `OpenProcess`
/// failing with "invalid parameter", or its exit code being set. Access denied (a process of
/// another user, or a protected one) and pid 0 count as alive.
pub(crate) fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    // SAFETY: OpenProcess takes plain values and returns a handle or null.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        return io::Error::last_os_error().raw_os_error() != Some(ERROR_INVALID_PARAMETER as i32);
    }
    let mut code = 0u32;
    // SAFETY: `handle` is a process handle opened above with the right to query it, and `code`
    // is a valid u32 to write to; the handle is closed once, here.
    unsafe {
        let got = GetExitCodeProcess(handle, &mut code);
        CloseHandle(handle);
        got == 0 || code == STILL_ACTIVE as u32
    }
}

/// Never: an ended process is told by its exit code ([`pid_alive`]), reaped or not.
pub(crate) fn ended_unreaped(_pid: u32) -> bool {
    false
}

/// How a client whose `ide_connected` names `pid` names files: a pid that is no process here is a
/// `claude` in WSL (its pid is Linux's, of another machine's processes), which reads a drive's file
/// where WSL mounts it; any other is a Windows client (a pid that happens to name an unrelated
/// process keeps the paths as they are, what the client had before).
pub(crate) fn client_paths(pid: u32) -> ClientPaths {
    match pid_alive(pid) {
        true => ClientPaths::AsGiven,
        false => ClientPaths::WslMounts,
    }
}

/// Waits on process `pid`'s handle until it has ended (a process's id is not reused while a
/// handle to it is open: the caller's `Child` holds one).
pub(crate) fn wait_until_ended(pid: u32) {
    // SAFETY: OpenProcess takes plain values and returns a handle or null.
    let handle = unsafe { OpenProcess(PROCESS_SYNCHRONIZE, 0, pid) };
    if handle.is_null() {
        return;
    }
    // SAFETY: `handle` is a process handle opened above with the right to wait on it; it is
    // closed once, here.
    unsafe {
        WaitForSingleObject(handle, INFINITE);
        CloseHandle(handle);
    }
}

/// Process `pid`'s start as a lock file's `processStart` keeps it: not written on Windows, where
/// [`process_started`]'s creation time serves.
pub(crate) fn process_start(_pid: u32) -> Option<String> {
    None
}

/// When process `pid` was created (`GetProcessTimes`), as this host's clock tells it. `None` when
/// it cannot be opened (no such process, or access denied) or asked.
pub(crate) fn process_started(pid: u32) -> Option<std::time::SystemTime> {
    if pid == 0 {
        return None;
    }
    // SAFETY: OpenProcess takes plain values and returns a handle or null.
    let handle = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if handle.is_null() {
        return None;
    }
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: `handle` is a process handle opened above with the right to query it; the four
    // FILETIMEs are valid to write to; the handle is closed once, here.
    let got = unsafe {
        let got = GetProcessTimes(handle, &mut created, &mut exited, &mut kernel, &mut user);
        CloseHandle(handle);
        got
    };
    if got == 0 {
        return None;
    }
    filetime_to_system(created)
}

/// A FILETIME (100 ns ticks since 1601-01-01, UTC) as a `SystemTime`.
fn filetime_to_system(t: FILETIME) -> Option<std::time::SystemTime> {
    const UNIX_EPOCH_TICKS: u64 = 116_444_736_000_000_000;
    let ticks = (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    let since_epoch = ticks.checked_sub(UNIX_EPOCH_TICKS)?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_nanos(
        since_epoch.checked_mul(100)?,
    ))
}

/// Windows paths as `claude` on Windows compares them (it resolves each folder and compares it
/// with its working directory, drive letter in upper case): `C:\Users\me\project`, without the
/// verbatim prefix `\\?\` that some absolute paths carry.
pub(crate) fn lock_folder(abs: &Path) -> String {
    claude_ide_bridge::without_verbatim_prefix(&abs.to_string_lossy()).into_owned()
}

/// Windows has no signal mask: nothing is ignored. (A console process started without Ctrl-C,
/// as `CREATE_NEW_PROCESS_GROUP` makes it, keeps that: a handler does not turn it back on.)
pub(crate) fn ignored_signals() -> u64 {
    0
}

static CLEANUP: OnceLock<fn()> = OnceLock::new();

/// What Windows ends a process with on Ctrl-C when no handler stops it.
const STATUS_CONTROL_C_EXIT: i32 = 0xC000_013A_u32 as i32;

unsafe extern "system" fn console_handler(_ctrl_type: u32) -> BOOL {
    // Ctrl-C, Ctrl-Break, the console closed, logoff, shutdown: Windows ends the process once a
    // handler returns (for a closed console, within 5 s in any case), so the cleanup happens
    // here, on the thread Windows made for the handler, before the exit.
    if let Some(cleanup) = CLEANUP.get() {
        cleanup();
    }
    std::process::exit(STATUS_CONTROL_C_EXIT)
}

/// Runs `cleanup` on Ctrl-C, Ctrl-Break, the console closing, logoff or shutdown, then ends the
/// process as Ctrl-C does. `ignored` is not asked: see [`ignored_signals`].
pub(crate) fn on_termination(cleanup: fn(), _ignored: fn(i32) -> bool) -> io::Result<()> {
    let _ = CLEANUP.set(cleanup);
    // SAFETY: registers a function with the signature Windows calls; it stays valid for the
    // life of the process (a plain fn item).
    if unsafe { SetConsoleCtrlHandler(Some(console_handler), 1) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

static HOST_HANDLER: OnceLock<fn(crate::signals::ConsoleEvent)> = OnceLock::new();

unsafe extern "system" fn host_console_handler(ctrl_type: u32) -> BOOL {
    use crate::signals::ConsoleEvent;
    let event = match ctrl_type {
        CTRL_C_EVENT => ConsoleEvent::CtrlC,
        CTRL_BREAK_EVENT => ConsoleEvent::CtrlBreak,
        CTRL_CLOSE_EVENT => ConsoleEvent::Close,
        CTRL_LOGOFF_EVENT => ConsoleEvent::Logoff,
        CTRL_SHUTDOWN_EVENT => ConsoleEvent::Shutdown,
        // Not one of ours: the next handler (Windows' default at the end) takes it.
        _ => return 0,
    };
    match HOST_HANDLER.get() {
        Some(handler) => {
            handler(event);
            1
        }
        None => 0,
    }
}

/// Calls `handler` on each console control event (see `signals::on_console_event`).
pub(crate) fn on_console_event(handler: fn(crate::signals::ConsoleEvent)) -> io::Result<()> {
    if HOST_HANDLER.set(handler).is_err() {
        return Ok(());
    }
    // SAFETY: registers a function with the signature Windows calls; it stays valid for the
    // life of the process (a plain fn item).
    if unsafe { SetConsoleCtrlHandler(Some(host_console_handler), 1) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// No send that cannot block on a blocking Windows socket (its mode is the socket's, not the
/// call's): `WouldBlock`, and the connection's writer thread sends it instead.
pub(crate) fn send_now(_: &std::net::TcpStream, _: &[u8]) -> io::Result<usize> {
    Err(io::ErrorKind::WouldBlock.into())
}

/// Not known to end a waiting `accept` on Windows: `false`, and the caller wakes it otherwise.
pub(crate) fn shutdown_listener(_: &std::net::TcpListener) -> bool {
    false
}

/// Cancels every call pending on `stream`'s handle, from any thread: Windows' `shutdown` does
/// not end a `recv` (or a `send` on a full socket) that a thread is blocked in, which then
/// returns `ERROR_OPERATION_ABORTED`; calls made after the shutdown fail at once. Only this
/// handle's calls: a duplicate made by `try_clone` has calls of its own, which this does not reach.
pub(crate) fn cancel_blocked(stream: &std::net::TcpStream) {
    // SAFETY: the socket is a handle owned by `stream`, open for the length of this call (it is
    // borrowed); a null OVERLAPPED asks for every pending call on it. Failure (nothing pending)
    // is what it says and is ignored.
    unsafe {
        CancelIoEx(stream.as_raw_socket() as HANDLE, std::ptr::null());
    }
}

/// `FlushConsoleInputBuffer` on standard input when it is a console (`GetConsoleMode` answers for
/// it): the keys typed and not read yet, a line being edited too, are dropped. A pipe, a file, or
/// no standard input at all is left alone.
pub(crate) fn discard_typed() -> io::Result<()> {
    let stdin = std::io::stdin();
    let handle = stdin.as_raw_handle() as HANDLE;
    let mut mode = 0;
    // SAFETY: `handle` is the process's standard input handle, owned by std for the life of the
    // process (null when there is none, which GetConsoleMode refuses); `mode` is a valid u32 to
    // write to.
    if handle.is_null() || unsafe { GetConsoleMode(handle, &mut mode) } == 0 {
        return Ok(());
    }
    // SAFETY: `handle` is a console input handle (GetConsoleMode accepted it just above).
    if unsafe { FlushConsoleInputBuffer(handle) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The console's input mode (of standard input) and output mode (of standard error), each when
/// that handle is a console's ([`crate::terminal::Settings`]).
pub(crate) struct TerminalSettings {
    input: u32,
    output: Option<u32>,
}

/// `GetConsoleMode` of `handle`, when it is a console's.
fn console_mode(handle: HANDLE) -> Option<u32> {
    let mut mode = 0;
    // SAFETY: `handle` is one of the process's standard handles, owned by std for the life of
    // the process (null when there is none, which GetConsoleMode refuses); `mode` is a valid u32
    // to write to.
    (!handle.is_null() && unsafe { GetConsoleMode(handle, &mut mode) } != 0).then_some(mode)
}

/// `SetConsoleMode` of `handle`; whether the console took it.
fn set_console_mode(handle: HANDLE, mode: u32) -> bool {
    // SAFETY: `handle` is a console handle (GetConsoleMode accepted it) of the process's standard
    // handles, owned by std for the life of the process.
    unsafe { SetConsoleMode(handle, mode) != 0 }
}

fn stdin_handle() -> HANDLE {
    std::io::stdin().as_raw_handle() as HANDLE
}

fn stderr_handle() -> HANDLE {
    std::io::stderr().as_raw_handle() as HANDLE
}

/// The console's modes; `None` when standard input is not a console.
pub(crate) fn terminal_settings() -> Option<TerminalSettings> {
    Some(TerminalSettings {
        input: console_mode(stdin_handle())?,
        output: console_mode(stderr_handle()),
    })
}

/// The console's modes set back; then `reset` written to standard error with virtual-terminal
/// processing on for the write alone, when the console takes that mode.
pub(crate) fn put_back_terminal(saved: &TerminalSettings, reset: Option<&[u8]>) {
    use std::io::Write;
    let (input, output) = (stdin_handle(), stderr_handle());
    if console_mode(input).is_some() {
        set_console_mode(input, saved.input);
    }
    let Some(mode) = saved.output.filter(|_| console_mode(output).is_some()) else {
        return;
    };
    set_console_mode(output, mode);
    let Some(reset) = reset else {
        return;
    };
    let processing = mode | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING;
    if set_console_mode(output, processing) {
        let _ = std::io::stderr().write_all(reset);
        set_console_mode(output, mode);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use windows_sys::Win32::Storage::FileSystem::{
        FILE_ACTION_ADDED, FILE_ACTION_RENAMED_NEW_NAME,
    };

    /// A link refused because the volume has none falls back to a rename; a file held open by
    /// another process for a moment is tried again; anything else is the write's failure.
    #[test]
    fn link_failures_are_told_apart() {
        let e = io::Error::from_raw_os_error;
        assert!(links_unsupported(&e(1)) && links_unsupported(&e(50)));
        assert!(held_for_a_moment(&e(5)) && held_for_a_moment(&e(32)) && held_for_a_moment(&e(33)));
        for code in [5, 32, 33, 80, 112, 183] {
            assert!(!links_unsupported(&e(code)), "{code}");
        }
        for code in [1, 50, 80, 112, 183] {
            assert!(!held_for_a_moment(&e(code)), "{code}");
        }
    }

    /// `FILE_NOTIFY_INFORMATION` records as Windows writes them, each 4-byte aligned.
    fn records(changes: &[(u32, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (action, name)) in changes.iter().enumerate() {
            let name: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
            let size = (12 + name.len()).next_multiple_of(4);
            let next = if i + 1 == changes.len() { 0 } else { size };
            for word in [next, *action as usize, name.len()] {
                out.extend_from_slice(&(word as u32).to_le_bytes());
            }
            out.extend_from_slice(&name);
            out.resize(out.len() + size - 12 - name.len(), 0);
        }
        out
    }

    #[test]
    fn removals_of_the_file_are_read_from_the_records() {
        let name = "12345.lock";
        let after_others = records(&[
            (FILE_ACTION_ADDED, ".12345.lock.1.0.tmp"),
            (FILE_ACTION_REMOVED, "12345.LOCK"),
        ]);
        assert!(removes(&after_others, name));
        assert!(removes(
            &records(&[(FILE_ACTION_RENAMED_OLD_NAME, name)]),
            name
        ));
        assert!(removes(
            &records(&[(FILE_ACTION_REMOVED, "12345~1.LOC")]),
            name
        ));
        // Another file removed, ours renamed into place or added: not a removal.
        let others = records(&[
            (FILE_ACTION_REMOVED, "23456.lock"),
            (FILE_ACTION_RENAMED_NEW_NAME, name),
            (FILE_ACTION_ADDED, name),
        ]);
        assert!(!removes(&others, name));
        // Cut short: what is there is read, nothing past the end.
        assert!(!removes(&after_others[..after_others.len() - 4], name));
        assert!(!removes(&[], name));
    }

    /// A read that could not say what changed is looked at after 200 ms, as a removal; when such
    /// reads come one after another (a share that answers every read so), the waits double up
    /// to 30 s instead of waking the watch five times a second.
    #[test]
    fn reads_that_cannot_tell_in_a_row_are_waited_for_longer() {
        assert_eq!(settle_ms(0), 200);
        assert_eq!(settle_ms(1), 200);
        assert_eq!(settle_ms(2), 400);
        assert_eq!(settle_ms(3), 800);
        assert_eq!(settle_ms(8), 25_600);
        assert_eq!(settle_ms(9), 30_000);
        assert_eq!(settle_ms(u32::MAX), 30_000);
        // Wake-ups in the first minute of such reads: 8, not 300.
        let mut spent = 0;
        let wakes = (1..).take_while(|&n| {
            spent += settle_ms(n);
            spent <= 60_000
        });
        assert_eq!(wakes.count(), 8);
    }
}
