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
use std::os::windows::io::{AsRawHandle, AsRawSocket};
use std::path::Path;
use std::sync::OnceLock;

use windows_sys::core::BOOL;
use windows_sys::Win32::Foundation::{CloseHandle, ERROR_INVALID_PARAMETER, HANDLE, STILL_ACTIVE};
use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OPEN_REPARSE_POINT;
use windows_sys::Win32::System::Console::{
    FlushConsoleInputBuffer, GetConsoleMode, SetConsoleCtrlHandler, CTRL_BREAK_EVENT,
    CTRL_CLOSE_EVENT, CTRL_C_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};
use windows_sys::Win32::System::IO::CancelIoEx;

pub(crate) const HOME_VAR: &str = "USERPROFILE";

/// Ends a [`watch_removal`] (none is made here).
pub(crate) struct WatchEnd;

/// No watch here: a lock file removed by another process stays removed.
pub(crate) fn watch_removal(
    _dir: &Path,
    _name: &str,
    _restore: impl FnMut() -> bool + Send + 'static,
) -> Option<WatchEnd> {
    None
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

/// Windows paths as `claude` on Windows compares them (it resolves each folder and compares it
/// with its working directory, drive letter in upper case): `C:\Users\me\project`, without the
/// verbatim prefix `\\?\` that some absolute paths carry.
pub(crate) fn lock_folder(abs: &Path) -> String {
    let text = abs.to_string_lossy();
    if let Some(unc) = text.strip_prefix(r"\\?\UNC\") {
        return format!(r"\\{unc}");
    }
    match text.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => rest.to_string(),
        _ => text.into_owned(),
    }
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
