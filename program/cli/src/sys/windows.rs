//! Windows: state under `%LOCALAPPDATA%`, private by the profile's access list and never through
//! a reparse point; the console's control events (Ctrl-C, Ctrl-Break, the console closed, logoff,
//! shutdown) as the requests to stop; `run`'s command found as cmd finds it (`PATHEXT`: npm's
//! `claude.cmd`), waited for plainly, and ended with the bridge by a Job Object.
//!
//! Privacy: Windows has no mode bits. `%LOCALAPPDATA%` is inside the user's profile, whose access
//! list grants the user, SYSTEM and Administrators only, and what is created in it inherits that
//! list (as the lock-file folder under `%USERPROFILE%` does: runtimes/runtime/src/sys/windows.rs).
//! What is checked here is what can be without reading access lists: no file or folder on the
//! way is a reparse point (a symbolic link or a junction), and a file read is a regular file of
//! bounded size.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use claude_ide_bridge_runtime::signals::ConsoleEvent;
use win32job::{ExtendedLimitInfo, Job};

use super::{Ends, Finding};
use crate::host::{HostInput, StdioOut};
use crate::state::Refused;

/// The variable naming the user's home (where the Windows `claude` looks for `.claude\ide`).
pub const HOME_VAR: &str = "USERPROFILE";

/// Whether a socket listening on `::` takes IPv4 connections too: not on Windows, where
/// `IPV6_V6ONLY` is on unless a program turns it off (std's `bind` does not), so claude's
/// 127.0.0.1 does not reach it.
pub fn v6_any_takes_v4() -> bool {
    false
}

/// A path as paths are compared here: two spellings of one file (`file:///c%3A/w/a.rs` from VS
/// Code, `C:\W\A.rs` from claude, `Émilie` and `émilie`) have one key, as NTFS compares names
/// (the files crate's rule, non-ASCII letters too).
pub fn case_key(path: &str) -> std::borrow::Cow<'_, str> {
    std::borrow::Cow::Owned(claude_ide_bridge_files::windows_case_key(path))
}

/// The workspace folders that name its state file: each resolved (a `subst` drive, a junction,
/// a short name as the folder they name) and in lower case, so that `cd c:\proj` and
/// `cd C:\Proj` are one workspace, on one port (a network share's names come back from Windows
/// in whatever case it cached first, so the case as stored is no key either); in the POSIX form;
/// as served (`posix`) when it cannot be resolved. Two folders of a case-sensitive directory
/// whose names differ in case only share a state file.
pub fn state_folders(native: &[PathBuf], posix: &[String]) -> Vec<String> {
    native
        .iter()
        .zip(posix)
        .map(|(folder, served)| {
            // The lock file's folders resolve it already: the last one listed.
            claude_ide_bridge_runtime::lock_folders(std::slice::from_ref(folder))
                .ok()
                .and_then(|listed| listed.last().cloned())
                .map_or_else(|| served.clone(), |f| claude_ide_bridge::to_posix(&f))
                .to_lowercase()
        })
        .collect()
}

/// `FILE_FLAG_OPEN_REPARSE_POINT`: a reparse point is opened itself, not what it points to.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
/// `FILE_ATTRIBUTE_REPARSE_POINT`: the file is a reparse point (symbolic link, junction, ...).
const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x0000_0400;

fn is_reparse_point(meta: &Metadata) -> bool {
    meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0
}

/// The program's state directory: `%LOCALAPPDATA%\claude-ide-bridge` when that is an absolute
/// path; `None` without it.
pub fn state_dir() -> Option<PathBuf> {
    let local = std::env::var_os("LOCALAPPDATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())?;
    Some(local.join("claude-ide-bridge"))
}

/// Why there is no state directory, as a note says it.
pub const NO_STATE_DIR: &str = "LOCALAPPDATA is not set (to an absolute path)";

/// Reads `path` whole if it is a regular file, not a reparse point, of at most `max` bytes.
/// `Ok(None)` when it does not exist.
pub fn read_private(path: &Path, max: u64) -> Result<Option<Vec<u8>>, Refused> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // A directory does not open as a file (access denied): said as what it is.
        Err(e) => {
            return Err(match fs::symlink_metadata(path) {
                Ok(m) if is_reparse_point(&m) => Refused::Symlink,
                Ok(m) if !m.is_file() => Refused::NotAFile,
                _ => Refused::Unreadable(e),
            })
        }
    };
    let meta = file.metadata().map_err(Refused::Unreadable)?;
    if is_reparse_point(&meta) {
        return Err(Refused::Symlink);
    }
    if !meta.is_file() {
        return Err(Refused::NotAFile);
    }
    crate::state::read_bounded(file, meta.len(), max).map(Some)
}

/// Creates `dir` (and its parents) when missing, then checks it and its parent: real
/// directories, not reparse points. Refusals are `PermissionDenied` errors saying why.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        // The parent checked before `dir` is made in it: a junction there makes nothing where
        // it leads.
        if let Some(parent) = dir.parent() {
            if fs::symlink_metadata(parent).is_err() {
                fs::create_dir_all(parent)?;
            }
            check_dir(parent)?;
        }
        match fs::create_dir(dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    check_private_dir(dir)
}

/// Checks `dir` and its parent as [`private_dir`] does, creating nothing: what is read from a
/// folder that others could write to (or that leads elsewhere) is not trusted either.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent() {
        check_dir(parent)?;
    }
    check_dir(dir)
}

fn check_dir(dir: &Path) -> io::Result<()> {
    let refuse = |why: &str| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing state folder {}: {why}", dir.display()),
        )
    };
    let meta = fs::symlink_metadata(dir)?;
    if is_reparse_point(&meta) {
        return Err(refuse("it is a symbolic link or a junction"));
    }
    if !meta.is_dir() {
        return Err(refuse("it is not a directory"));
    }
    Ok(())
}

/// Creates `dir` and its missing parents (they inherit their parent's access list).
pub fn private_dirs(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)
}

/// Opens `path` to append to, created when missing; a reparse point there is refused, not
/// followed.
pub fn append_private(path: &Path) -> io::Result<File> {
    private(path, OpenOptions::new().append(true))
}

/// `options`, to create `path` when missing, opened without following a reparse point there
/// (refused).
fn private(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options
        .create(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    if is_reparse_point(&file.metadata()?) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is a symbolic link or a junction", path.display()),
        ));
    }
    Ok(file)
}

/// [`append_private`], for a file that must be a regular one (the language-server log): a
/// directory, device or pipe there is refused too. Refusals are `PermissionDenied` errors.
pub fn append_private_file(path: &Path) -> io::Result<File> {
    regular(append_private(path)?)
}

/// Moves the log at `path` to `to` unless another bridge writes to it now: an open that denies
/// others' writes fails while a write handle is open ([`hold_log`]). (Not a lock of the file:
/// Windows' locks are mandatory, and a shared one would refuse the holder's own writes.) The
/// probe is let go before the move, which its own sharing would refuse.
pub fn move_log_aside(path: &Path, to: &Path) {
    const FILE_SHARE_READ: u32 = 1;
    const ERROR_SHARING_VIOLATION: i32 = 32;
    let probe = OpenOptions::new()
        .read(true)
        .share_mode(FILE_SHARE_READ)
        .open(path);
    if matches!(&probe, Err(e) if e.raw_os_error() == Some(ERROR_SHARING_VIOLATION)) {
        return;
    }
    drop(probe);
    // Not moved (gone meanwhile, or open elsewhere): written on where it is.
    let _ = fs::rename(path, to);
}

/// Nothing to do: the bridge's write handle is what [`move_log_aside`] finds. (A start that moves
/// the file in the moment between another's open and its first write is not seen: `true`.)
pub fn hold_log(_file: &File, _path: &Path) -> bool {
    true
}

/// Opens `path` to read and write (nothing truncated), created when missing, as
/// [`append_private_file`] checks it: the file whose lock one start of a workspace's bridge holds
/// ([`crate::state::Store::starting`]).
pub fn open_private_file(path: &Path) -> io::Result<File> {
    regular(private(path, OpenOptions::new().read(true).write(true))?)
}

/// `file`, when it is a regular file; a `PermissionDenied` error else.
fn regular(file: File) -> io::Result<File> {
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "it is not a regular file",
        ));
    }
    Ok(file)
}

/// Files under the user's profile are this user's (see the module's note on privacy).
pub fn is_mine(_: &Metadata) -> bool {
    true
}

/// Nothing to check beyond a real directory (the caller's checks): its access list is the
/// profile's, which `doctor` does not read.
pub fn lock_dir_finding(d: &Path, _: &Metadata) -> Finding {
    Finding::Ok(format!(
        "{} is a directory (private by the access list of your profile, not checked here)",
        d.display()
    ))
}

/// The command that removes a file (said in a fix).
pub fn remove_hint(path: &Path) -> String {
    format!("del \"{}\"", path.display())
}

/// The commands that put a directory in place of what is at `dir` (said in a fix).
pub fn new_dir_hint(dir: &Path) -> String {
    format!(
        "remove it (rmdir \"{0}\" for a link or junction, del \"{0}\" for a file), then mkdir \"{0}\"",
        dir.display()
    )
}

/// The process ids above this one: not looked for here (`doctor` then does not say whether a
/// lock file is the IDE's whose terminal this is).
pub fn ancestors() -> Option<Vec<u32>> {
    None
}

/// Not a Linux container: `/.dockerenv` would name `C:\.dockerenv` here (and a Windows program
/// run by Wine sees the Linux root as drive `Z:`).
pub fn in_container() -> bool {
    false
}

/// Not WSL.
pub fn wsl_windows_lock_dirs() -> Option<Vec<PathBuf>> {
    None
}

/// Not in WSL: nothing to map.
pub fn wsl_path(_windows: &str) -> Option<String> {
    None
}

/// The number `HostInput::Signal` carries for Ctrl-C (the C runtime's SIGINT).
pub const INTERRUPT: i32 = 2;
/// For Ctrl-Break (the C runtime's SIGBREAK).
const BREAK: i32 = 21;
/// For the console closed (as a terminal hanging up: SIGHUP's number).
pub const HANGUP: i32 = 1;
/// For logoff and shutdown (SIGTERM's number).
const TERMINATE: i32 = 15;

/// Where the console handler sends what it hears, and how it learns that the program stopped.
struct Stop {
    inputs: Mutex<Sender<HostInput>>,
    stdio: Option<StdioOut>,
    done: Mutex<bool>,
    cond: Condvar,
}

static STOP: OnceLock<Stop> = OnceLock::new();

/// Windows ends a process this long after its console closed, whatever its handler does: the
/// handler waits for the stop a little less.
const CLOSE_GRACE: Duration = Duration::from_millis(4500);

/// Turns the console's control events into host inputs (through the runtime crate's console
/// handler): Ctrl-C as [`INTERRUPT`], Ctrl-Break, the console closed, logoff and shutdown as
/// the others. Windows ends the process once the handler returns from the last three, so there
/// it waits for [`stopped`] (at most 4.5 s: Windows' own limit is 5): the lock file is removed
/// and the language servers stopped before the end. The stdio editor's writer is told first that
/// the bridge is stopping.
pub fn listen_for_stop(tx: Sender<HostInput>, stdio: Option<StdioOut>) -> io::Result<()> {
    let _ = STOP.set(Stop {
        inputs: Mutex::new(tx),
        stdio,
        done: Mutex::new(false),
        cond: Condvar::new(),
    });
    claude_ide_bridge_runtime::signals::on_console_event(on_console_event)
}

fn on_console_event(event: ConsoleEvent) {
    let Some(stop) = STOP.get() else {
        return;
    };
    if let Some(out) = &stop.stdio {
        out.stopping();
    }
    // A host waiting for room on a console that takes no output goes on to its stop.
    crate::ui::stderr_stopping();
    let (signal, wait) = match event {
        ConsoleEvent::CtrlC => (INTERRUPT, false),
        ConsoleEvent::CtrlBreak => (BREAK, false),
        ConsoleEvent::Close => (HANGUP, true),
        ConsoleEvent::Logoff | ConsoleEvent::Shutdown => (TERMINATE, true),
    };
    let sent = {
        let inputs = stop.inputs.lock().unwrap_or_else(|e| e.into_inner());
        inputs.send(HostInput::Signal(signal)).is_ok()
    };
    if wait && sent {
        let done = stop.done.lock().unwrap_or_else(|e| e.into_inner());
        let _ = stop
            .cond
            .wait_timeout_while(done, CLOSE_GRACE, |done| !*done);
    }
}

/// False at once: an anonymous pipe's end cannot be waited on for its reader leaving; the
/// `--stdio` editor gone is seen at stdin's end or at the next write, as before.
pub fn wait_until_stdout_unread() -> bool {
    false
}

/// How a request to stop (a console event, as its number) is named to the user.
pub fn signal_name(sig: i32) -> String {
    match sig {
        INTERRUPT => "Ctrl-C".into(),
        BREAK => "Ctrl-Break".into(),
        HANGUP => "the console closed".into(),
        TERMINATE => "logoff or shutdown".into(),
        n => format!("signal {n}"),
    }
}

/// Nothing: the program exits 0 after its stop. A console's Ctrl-C reaches every process on it,
/// the shell too (cmd asks whether to end its batch job, PowerShell stops the script), so no
/// status of the bridge's is needed to stop what ran it.
pub fn end_interrupted() {}

/// The program has stopped: a console handler waiting for it returns.
pub fn stopped() {
    if let Some(stop) = STOP.get() {
        *stop.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        stop.cond.notify_all();
    }
}

/// Nothing to send: `run`'s command, and `$EDITOR`, share the bridge's console, and Windows
/// gives them the console's events (Ctrl-C, closed, logoff, shutdown) itself.
pub fn ask_to_stop(_pid: u32) {}

/// Ends `run`'s command at once, with what it started (its Job Object, [`spawn_tied`], closed
/// with "kill on job close"): after a panic of one of the bridge's threads, or the bridge told
/// twice to stop. Nothing was sent on Windows before, and the bridge waited for a command that
/// would never end by itself. `$EDITOR` is never ended this way ([`SIGNALS_EDITOR`]).
pub fn kill_now(_pid: u32) {
    KILLED.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(RUN_JOB.lock().unwrap_or_else(|e| e.into_inner()).take());
}

/// Whether `$EDITOR` is told to stop at a stop: not here (see [`ask_to_stop`]); the stop waits
/// only briefly for one that ends by itself.
pub const SIGNALS_EDITOR: bool = false;

/// The program `run -- NAME ARGS` runs: a name without a folder looked for in each `PATH` folder
/// under each of `PATHEXT`'s extensions, as cmd and PowerShell look for it there, so that npm's
/// `claude.cmd` is what `run -- claude` runs (std looks for `NAME.exe` alone, and refused it as
/// not found). Not looked in first, unlike std (the bridge's own folder) and cmd (the current
/// one). A path, or a name found nowhere, as it is (std's own search and error then). A `.cmd`
/// is run by std through cmd, which refuses arguments cmd cannot be given as they are (a line
/// break).
pub fn program_named(name: &OsStr) -> OsString {
    let bare = Path::new(name).parent() == Some(Path::new(""));
    let found = (name.to_str())
        .filter(|_| bare)
        .and_then(claude_ide_bridge_lsp::table::find_program);
    found.map_or_else(|| name.to_owned(), PathBuf::into_os_string)
}

/// Whether `run`'s command can be found, said before the bridge starts: left to the start here,
/// whose search cannot be told beforehand without repeating it (Windows adds `.exe` to a path
/// without an extension, and looks in the program's folder and the system's).
pub fn findable(_program: &OsStr) -> io::Result<()> {
    Ok(())
}

/// `run`'s command's Job Object while it runs ([`spawn_tied`]): its one handle, closed by
/// Windows when the bridge's process ends however it ends.
static RUN_JOB: Mutex<Option<Job>> = Mutex::new(None);

/// Starts `run`'s command so that it ends with the bridge however the bridge ends (killed from
/// the task manager, a crash: nothing of the bridge runs then to end it, and it stayed on the
/// console fighting the shell for it): it is put, right after its start, into a Job Object
/// created with "kill on job close", whose one handle [`RUN_JOB`] holds. What the command starts
/// is in the job too (the `node` that npm's `claude.cmd` shim runs), unless it asks to break
/// away (`CREATE_BREAKAWAY_FROM_JOB`, allowed: a window of its own meant to outlive it).
/// [`wait_for_command`] lets the job go without ending anything once the command has ended by
/// itself, so that what it left running outlives the bridge as it would outlive the command
/// alone. Not held: a process the command starts in the moment between its start and its
/// assignment (std has no suspended start; a shim starts `node` long after). When the job cannot
/// be made (an old Windows inside a job of its own), the command runs untied.
pub fn spawn_tied(mut command: Command) -> io::Result<Child> {
    let child = command.spawn()?;
    let mut limits = ExtendedLimitInfo::new();
    limits.limit_kill_on_job_close().limit_breakaway_ok();
    let job = Job::create_with_limit_info(&limits).and_then(|job| {
        job.assign_process(child.as_raw_handle() as isize)
            .map(|()| job)
    });
    if let Ok(job) = job {
        *RUN_JOB.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
    }
    Ok(child)
}

/// Waits for `run`'s command to end (Windows has no job control to follow), then lets its job
/// ([`spawn_tied`]) go with "kill on job close" taken off: what the command left running is not
/// ended by the bridge's own end.
pub fn wait_for_command(child: &mut Child) -> io::Result<ExitStatus> {
    let status = child.wait();
    if let Some(job) = RUN_JOB.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let mut limits = ExtendedLimitInfo::new();
        limits.limit_breakaway_ok();
        // Should that fail, what is left ends now, as it would at a killed bridge.
        let _ = job.set_extended_limit_info(&limits);
    }
    status
}

/// What tells that a file the servers have changed on disk (`host::diagnostics`): followed through
/// a link, since the files crate names a file reached through a link by the link's path here.
pub fn stamp_metadata(path: &Path) -> io::Result<Metadata> {
    fs::metadata(path)
}

/// Whether `run`'s command, found, could not be run (a shell's status 126): access denied, or not
/// a program Windows runs here (`ERROR_BAD_EXE_FORMAT`, `ERROR_EXE_MACHINE_TYPE_MISMATCH`).
pub fn cannot_execute(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied || matches!(e.raw_os_error(), Some(193 | 216))
}

/// The command's exit code when it is one a process can exit with here (0 to 255), else 1
/// (Windows' codes are 32 bits: `STATUS_CONTROL_C_EXIT` is 0xC000013A).
pub fn exit_code(status: ExitStatus) -> i32 {
    match status.code() {
        Some(c) if (0..=255).contains(&c) => c,
        _ => 1,
    }
}

/// Whether this process may use its terminal: always on Windows, where a console has no
/// background jobs.
pub fn terminal_is_ours() -> bool {
    true
}

/// Standard input's lines, one at a time: a console has no background, so a plain read.
#[derive(Default)]
pub struct LineReader;

impl LineReader {
    pub fn new() -> Self {
        Self
    }

    /// The next line (with its `\n`), or the end of input (or an error reading it).
    pub fn read_line(&mut self) -> super::TerminalRead {
        use std::io::BufRead;
        // Bytes, decoded by the caller: one byte of another encoding is not the end of input.
        let mut line = Vec::new();
        match std::io::stdin().lock().read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => super::TerminalRead::End,
            Ok(_) => super::TerminalRead::Line(line),
        }
    }
}

/// Nothing to do: Windows has no file-size limit a signal enforces.
pub fn write_past_file_size_limit_fails() {}

/// Nothing to raise: Windows has no per-process soft limit on handles.
pub fn raise_open_files_limit() {}

/// Whether [`kill_now`] ended `run`'s command.
static KILLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `run`'s command was killed: by the bridge ([`kill_now`]), or with an NTSTATUS error
/// for its status (a crash, 0xC0000005; Ctrl-C's 0xC000013A).
pub fn ended_abnormally(status: &ExitStatus) -> bool {
    KILLED.load(std::sync::atomic::Ordering::Relaxed)
        || status.code().is_some_and(|c| c as u32 >= 0xC000_0000)
}

/// Whether a program was ended by Ctrl-C: `STATUS_CONTROL_C_EXIT`.
pub fn ended_by_interrupt(status: &ExitStatus) -> bool {
    status.code() == Some(0xC000_013A_u32 as i32)
}

/// The path the files crate takes for a `file:` URI: the Windows path it names (the engine's
/// [`uri_to_windows_path`](claude_ide_bridge::uri_to_windows_path): `file:///C:/x` and the
/// Windows `claude`'s `file://C:\x` are `C:\x`). `None` when it names no local file, or no
/// Windows file: `file:///c/x` writes no drive (its wire form, `/c/x`, is the same as
/// `file:///c:/x`'s, but it is not drive C's file; the lsp crate keys it apart too).
///
/// One form more, which names no Windows file by the book: a `claude` running in WSL names a
/// Windows file by its path in WSL, where the drives are mounted (`/mnt/c/...`, WSL's default
/// mount root). Connected to a bridge running on Windows, that claude converts the paths of its
/// `openDiff` calls (with WSL's `wslpath -w`) but not the URI of its `getDiagnostics` before an
/// edit (`file:///mnt/c/Users/me/app/a.py`): it is read as the file WSL shows there
/// (`C:\Users\me\app\a.py`), and not as no file, whose `[]` would be taken for the file's
/// diagnostics before the edit (every old one then reported as new after it). A `..` in it is
/// the files crate's to resolve or refuse, as in any path.
pub fn path_of_file_uri(uri: &str) -> Option<String> {
    claude_ide_bridge::uri_to_windows_path(uri).or_else(|| wsl_mounted_drive(uri))
}

/// The Windows path of a local `file:` URI whose path is under WSL's drive mounts
/// (`/mnt/<letter>` and what is below it): `C:\x` for `file:///mnt/c/x`, `D:\` for
/// `file:///mnt/d` (the engine's `path_of_wsl_mount`, the inverse of what a claude in WSL is
/// sent). `None` for any other URI (another scheme's included: `uri_to_path` takes `file:` URIs
/// only).
fn wsl_mounted_drive(uri: &str) -> Option<String> {
    claude_ide_bridge::path_of_wsl_mount(&claude_ide_bridge::uri_to_path(uri)?)
}

/// A path in the engine's wire form with `.`, `..` and repeated `/` resolved
/// (`claude_ide_bridge::normalize`), a share's path (`//server/share/...`, `\\server\share\...`)
/// kept one: `normalize` makes its `//` one `/`, which named no file here (the selection in a
/// file of `\\wsl.localhost\Ubuntu\...` reached claude as `/wsl.localhost/Ubuntu/...`). A `..`
/// that climbs out of the share is none.
pub fn normalize_wire(path: &str) -> Option<String> {
    let share = claude_ide_bridge::to_posix(path).starts_with("//");
    let normal = claude_ide_bridge::normalize(path)?;
    if !share {
        return Some(normal);
    }
    // Its server and its share, at least.
    (normal.split('/').filter(|p| !p.is_empty()).count() >= 2).then(|| format!("/{normal}"))
}

/// A path in the engine's wire form (`/c/ws/a.rs`, as `normalize` gives it; `//host/share/a.rs`)
/// as Windows writes it (`C:\ws\a.rs`, `\\host\share\a.rs`), whose `file_uri` names the drive
/// as the language servers' URIs and claude's do (`file:///c:/ws/a.rs`; the wire form's own,
/// `file:///c/ws/a.rs`, names no file here). Any other path as it is.
pub fn native_path(path: &str) -> String {
    claude_ide_bridge::posix_to_windows(path).unwrap_or_else(|| path.to_owned())
}

/// The command running `%VISUAL%`/`%EDITOR%` on `files`: through `cmd /C`, as the variable may
/// carry arguments (`code --wait`) and name a `.cmd` shim. cmd reads its command line itself, and
/// a Windows file name may hold `&`, `^`, `(` or `)` (a workspace file `x&calc` would run `calc`),
/// so each file goes in double quotes, where cmd takes those as they are; the whole line is
/// quoted again and read with `/S` (cmd drops just those outer quotes, whatever the editor's own
/// quoting), with delayed expansion off (`/V:OFF`: `!` as it is). A name with `%`, which cmd
/// expands even between quotes, or `"` is refused: cmd has no quoting for those.
fn editor_command(editor: &OsStr, files: &[&OsStr]) -> io::Result<Command> {
    let mut line = OsString::from("\"");
    line.push(editor);
    for f in files {
        if f.to_string_lossy().contains(['%', '"']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} has a % or \" in its name, which cmd cannot be given as it is",
                    Path::new(f).display()
                ),
            ));
        }
        line.push(" \"");
        line.push(f);
        line.push("\"");
    }
    line.push("\"");
    let mut c = Command::new("cmd");
    c.args(["/D", "/V:OFF", "/S", "/C"]).raw_arg(line);
    Ok(c)
}

/// Nothing to launch here: see the Unix `launch_if_asked`.
pub fn launch_if_asked() {}

/// Nothing to do: a Windows container's first process is not the parent of processes whose own
/// parent ended (Windows has no such adoption).
pub fn init_if_first() -> Option<std::process::ExitCode> {
    None
}

/// Starts the editor ([`editor_command`]) with `setup` applied (its standard streams). No
/// [`Ends::WithBridge`] here: a Job Object would end what the editor started too (the VS Code
/// window a `code --wait` opened), which outlives the bridge on Unix.
pub fn start_editor(
    editor: &OsStr,
    files: &[&OsStr],
    _ends: Ends,
    setup: impl Fn(&mut Command),
) -> io::Result<Child> {
    let mut c = editor_command(editor, files)?;
    setup(&mut c);
    c.spawn()
}

/// No permission bits on Windows (tests).
#[cfg(test)]
pub fn mode_of(_path: &Path) -> Option<u32> {
    None
}

/// Nothing to do: a file written by a test is as private as its folder (tests).
#[cfg(test)]
pub fn make_private(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::{saved, store};

    /// Two spellings of one path in another case have one key, non-ASCII letters too (a user
    /// folder `Émilie` typed `émilie`), as NTFS compares names; `ß` is not `SS` there.
    #[test]
    fn paths_in_another_case_have_one_key() {
        assert_eq!(
            case_key(r"C:\Users\Émilie\a.rs"),
            case_key(r"c:\users\émilie\A.RS")
        );
        assert_ne!(case_key(r"C:\a\straße"), case_key(r"C:\a\STRASSE"));
    }

    /// A folder typed in another case, or reached through a `subst`-like other name, names the
    /// state file the folder does (one workspace, one port); one that cannot be resolved, its
    /// name as served, in lower case.
    #[test]
    fn a_folder_typed_in_another_case_is_one_workspace() {
        let d = tempfile::tempdir().unwrap();
        let stored = d.path().join("Proj");
        std::fs::create_dir(&stored).unwrap();
        let typed = d.path().join("proj");
        let posix = |p: &Path| claude_ide_bridge::to_posix(&p.to_string_lossy());
        let as_typed = state_folders(std::slice::from_ref(&typed), &[posix(&typed)]);
        let as_stored = state_folders(std::slice::from_ref(&stored), &[posix(&stored)]);
        assert_eq!(as_typed, as_stored);
        assert!(as_typed[0].ends_with("/proj"), "{as_typed:?}");
        let other = d.path().join("Other");
        std::fs::create_dir(&other).unwrap();
        assert_ne!(
            state_folders(std::slice::from_ref(&other), &[posix(&other)]),
            as_stored
        );
        let gone = d.path().join("Gone");
        assert_eq!(
            state_folders(std::slice::from_ref(&gone), &[posix(&gone)]),
            [posix(&gone).to_lowercase()]
        );
    }

    /// Run as a child by the test below: a command that does not end by itself.
    #[test]
    #[ignore = "the child of kill_now_ends_runs_command"]
    fn a_command_that_waits() {
        if std::env::var_os("CLAUDE_IDE_BRIDGE_TEST_WAIT").is_some() {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }

    /// `run`'s command, killed by the bridge (after a panic of one of its threads, or told
    /// twice to stop), ends at once.
    #[test]
    fn kill_now_ends_runs_command() {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args([
            "--exact",
            "sys::windows::tests::a_command_that_waits",
            "--ignored",
        ])
        .env("CLAUDE_IDE_BRIDGE_TEST_WAIT", "1")
        .stdout(std::process::Stdio::null());
        let mut child = spawn_tied(c).unwrap();
        let started = std::time::Instant::now();
        kill_now(child.id());
        let give_up = started + std::time::Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            assert!(
                std::time::Instant::now() < give_up,
                "the command still runs"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The state folder is `%LOCALAPPDATA%\claude-ide-bridge`, and only under an absolute one.
    /// A file name cmd would read as commands (`&`, `^`, parentheses) reaches the editor as one
    /// name, whatever quoting the editor's own command has, and runs nothing; one with `%` is
    /// refused.
    #[test]
    fn editor_files_reach_the_editor_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a&mkdir INJECTED&(x)^.txt");
        fs::write(&f, "kept\r\n").unwrap();
        // `echo` (cmd's own) shows the line cmd ran; the second editor is quoted, as a path with
        // spaces would be.
        let system = std::env::var("SystemRoot").unwrap_or_else(|_| r"C:\windows".into());
        let nested = format!(r#""{system}\system32\cmd.exe" /D /C echo"#);
        for editor in ["echo", nested.as_str()] {
            let out = editor_command(OsStr::new(editor), &[f.as_os_str()])
                .unwrap()
                .current_dir(dir.path())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                text.trim_end(),
                format!("\"{}\"", f.display()),
                "{editor}: {err}"
            );
            assert!(
                !dir.path().join("INJECTED").exists(),
                "{editor}: {text} {err}"
            );
        }
        let refused = editor_command(OsStr::new("echo"), &[OsStr::new("C:\\a%PATH%.txt")]);
        assert!(refused.is_err());
    }

    #[test]
    fn state_dir_is_under_local_app_data() {
        let Some(local) = std::env::var_os("LOCALAPPDATA") else {
            return;
        };
        assert_eq!(
            state_dir().unwrap(),
            PathBuf::from(local).join("claude-ide-bridge")
        );
    }

    /// A file where the state folder should be is refused, not written through.
    #[test]
    fn a_file_in_the_folders_place_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        fs::write(d.path().join("workspaces"), b"x").unwrap();
        assert!(s.save(&saved()).is_err());
        assert_eq!(fs::read(d.path().join("workspaces")).unwrap(), b"x");
    }

    /// The program and the files crate read a file URI the same way (the engine's
    /// `uri_to_windows_path`, which the lsp crate keys documents by too): the Windows
    /// `claude`'s `file://C:\...` names the file, and `file:///c/...`, which writes no drive,
    /// names none, here or in the files crate, though drive C's file exists.
    #[test]
    fn file_uris_are_read_as_the_files_crate_reads_them() {
        use claude_ide_bridge_files::{Limits, Workspace};
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a.py"), "x = 1\n").unwrap();
        let folder = d.path().to_str().unwrap().to_owned();
        assert_eq!(folder.as_bytes()[1], b':', "{folder}");
        let ws = Workspace::new(vec![folder.clone()], Limits::default());
        let file = format!(r"{folder}\a.py");
        for uri in [format!("file://{file}"), claude_ide_bridge::file_uri(&file)] {
            let path = path_of_file_uri(&uri).unwrap();
            let read = ws.read_text(&path).unwrap();
            assert_eq!(read.content, "x = 1\n");
            assert_eq!(ws.read_text(&uri).unwrap().path, read.path, "{uri}");
        }
        let slashed = file.replace('\\', "/");
        let no_drive = format!("file:///{}{}", &slashed[..1], &slashed[2..]);
        assert_eq!(path_of_file_uri(&no_drive), None);
        for (wire, native) in [
            ("/c/ws/a.rs", r"C:\ws\a.rs"),
            ("/d", r"D:\"),
            ("//host/share/a.rs", r"\\host\share\a.rs"),
            ("/ws/a.rs", "/ws/a.rs"),
            (r"C:\ws", r"C:\ws"),
        ] {
            assert_eq!(native_path(wire), native, "{wire}");
        }
        assert_eq!(
            claude_ide_bridge::file_uri(&native_path("/c/ws/a b.rs")),
            "file:///c:/ws/a%20b.rs"
        );
        assert!(ws.read_text(&no_drive).is_err(), "{no_drive}");
    }

    /// A `claude` running in WSL names a Windows file in its `getDiagnostics` URIs by where WSL
    /// mounts the file's drive (`file:///mnt/c/...`, written as it writes them, its characters as
    /// they are, or percent-encoded): the file that path shows in WSL, read as its Windows path is.
    #[test]
    fn a_wsl_claudes_mount_paths_name_the_windows_file() {
        use claude_ide_bridge_files::{Limits, Workspace};
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("my app é")).unwrap();
        fs::write(d.path().join("my app é").join("a.py"), "x = 1\n").unwrap();
        let folder = d.path().to_str().unwrap().to_owned();
        let ws = Workspace::new(vec![folder.clone()], Limits::default());
        let in_wsl = format!(
            "/mnt/{}{}/my app é/a.py",
            folder[..1].to_ascii_lowercase(),
            folder[2..].replace('\\', "/")
        );
        let expected = format!(
            r"{}{}\my app é\a.py",
            folder[..1].to_ascii_uppercase(),
            &folder[1..]
        );
        for uri in [
            format!("file://{in_wsl}"),
            claude_ide_bridge::file_uri(&in_wsl),
        ] {
            let path = path_of_file_uri(&uri);
            assert_eq!(path.as_deref(), Some(expected.as_str()), "{uri}");
            assert_eq!(ws.read_text(&path.unwrap()).unwrap().content, "x = 1\n");
        }
        for (uri, path) in [
            ("file:///mnt/d", Some(r"D:\")),
            ("file:///mnt/d/", Some(r"D:\")),
            ("file://localhost/mnt/e/x%20y", Some(r"E:\x y")),
            // a share's folder named `mnt`, as by the book
            ("file://srv/mnt/c/x", Some(r"\\srv\mnt\c\x")),
            // not a drive's mount
            ("file:///mnt/cd/x", None),
            ("file:///mnt/", None),
            ("file:///mnt", None),
            ("file:///mnt/1/x", None),
            ("file:///home/me/x", None),
            ("untitled:/mnt/c/x", None),
        ] {
            assert_eq!(path_of_file_uri(uri).as_deref(), path, "{uri}");
        }
    }
}
