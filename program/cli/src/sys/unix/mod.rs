//! Linux, macOS and the other Unixes: state under `$XDG_STATE_HOME` (or `~/.local/state`), private
//! by mode bits and owner, signals through `signal-hook`, `run`'s command under job control.

use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::Sender;

use rustix::fs::OFlags;
use rustix::process::getuid;

use super::{Ends, Finding};

mod init;
mod line_reader;
mod machine;
mod tie;
pub use self::init::init_if_first;
pub use self::line_reader::LineReader;
pub use self::tie::{findable, launch_if_asked, program_named, spawn_tied};
use crate::host::{HostInput, StdioOut};
use crate::state::Refused;

/// The variable naming the user's home.
pub const HOME_VAR: &str = "HOME";

/// Whether a socket listening on `::` takes IPv4 connections too, so that claude's 127.0.0.1
/// reaches it. std's `bind` keeps the system's default: on Linux `net.ipv6.bindv6only` (0,
/// taking IPv4, unless the machine or its network namespace sets it to 1), on macOS taking IPv4
/// (`net.inet6.ip6.v6only` 0), on the other Unixes not (FreeBSD's and NetBSD's `v6only` 1,
/// OpenBSD's always).
pub fn v6_any_takes_v4() -> bool {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        use std::io::Read;
        // One digit and a newline; a kernel without IPv6 has no file, and no `::` to bind.
        let mut setting = [0u8; 8];
        let read =
            File::open("/proc/sys/net/ipv6/bindv6only").and_then(|mut f| f.read(&mut setting));
        return !matches!(read, Ok(n) if setting[..n].trim_ascii() == b"1");
    }
    cfg!(target_os = "macos")
}

/// A path as paths are compared here: as it is (two spellings differing in case are two files
/// on Linux; macOS' volumes may be either, and are not taken as ignoring it).
pub fn case_key(path: &str) -> std::borrow::Cow<'_, str> {
    std::borrow::Cow::Borrowed(path)
}

/// The workspace folders that name its state file: each resolved (a folder reached through a
/// symbolic link is the folder it names, so that a bridge started through the link and one
/// started in the folder are one workspace, on one port), a name's case being part of it; as
/// served (`posix`) when it cannot be resolved.
pub fn state_folders(native: &[PathBuf], posix: &[String]) -> Vec<String> {
    native
        .iter()
        .zip(posix)
        .map(|(folder, served)| {
            std::fs::canonicalize(folder)
                .ok()
                .and_then(|r| r.into_os_string().into_string().ok())
                .unwrap_or_else(|| served.clone())
        })
        .collect()
}

/// Why there is no state directory, as a note says it.
pub const NO_STATE_DIR: &str =
    "neither XDG_STATE_HOME nor HOME is set (to an absolute path), and the system has no home for this user";

/// The program's state directory: `$XDG_STATE_HOME/claude-ide-bridge` when that is an absolute
/// path, else `~/.local/state/claude-ide-bridge` (macOS included: a command-line program's state,
/// found where its users look on Linux; the home is `$HOME`, or when it is not set the password
/// database's: `claude_ide_bridge_runtime::lock::user_home`); `None` without a home.
pub fn state_dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| claude_ide_bridge_runtime::lock::user_home().map(|h| h.join(".local/state")))?;
    Some(state.join("claude-ide-bridge"))
}

/// Reads `path` whole if it is a regular file of this user's that group and others cannot use,
/// of at most `max` bytes. Opened without following a symbolic link and without waiting (a FIFO
/// put there does not block). `Ok(None)` when it does not exist.
pub fn read_private(path: &Path, max: u64) -> Result<Option<Vec<u8>>, Refused> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(Refused::Symlink)
        }
        Err(e) => return Err(Refused::Unreadable(e)),
    };
    let meta = file.metadata().map_err(Refused::Unreadable)?;
    if !meta.is_file() {
        return Err(Refused::NotAFile);
    }
    if meta.uid() != getuid().as_raw() {
        return Err(Refused::NotOurs);
    }
    if meta.mode() & 0o077 != 0 {
        return Err(Refused::OpenToOthers(meta.mode() & 0o7777));
    }
    crate::state::read_bounded(file, meta.len(), max).map(Some)
}

/// Creates `dir` (and its parents) with mode 0700 when missing, then checks it and its parent:
/// real directories (not symbolic links) of this user's that nobody else can write; `dir` itself
/// closed to group and others. Refusals are `PermissionDenied` errors saying why.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        // The parent checked before `dir` is made in it: a link planted there (by another user,
        // in a shared `XDG_STATE_HOME`) makes nothing where it leads.
        if let Some(parent) = dir.parent() {
            if fs::symlink_metadata(parent).is_err() {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(parent)?;
            }
            check_dir(parent, 0o022)?;
        }
        match DirBuilder::new().mode(0o700).create(dir) {
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
        check_dir(parent, 0o022)?;
    }
    check_dir(dir, 0o077)
}

fn check_dir(dir: &Path, forbidden: u32) -> io::Result<()> {
    let refuse = |why: String| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing state folder {}: {why}", dir.display()),
        )
    };
    let meta = fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Err(refuse("it is not a directory".into()));
    }
    if meta.uid() != getuid().as_raw() {
        return Err(refuse("it is owned by another user".into()));
    }
    if meta.mode() & forbidden != 0 {
        return Err(refuse(format!(
            "its mode {:o} lets group or others at it (chmod go-rwx {})",
            meta.mode() & 0o7777,
            dir.display()
        )));
    }
    Ok(())
}

/// Creates `dir` and its missing parents, mode 0700.
pub fn private_dirs(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Opens `path` to append to, created with mode 0600 when missing.
pub fn append_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Opens `path` to append to, created with mode 0600 when missing, if it is a regular file of
/// this user's that group and others cannot write to: the language-server log, in the folder of
/// the state file, which refuses the same. Opened without following a symbolic link and without
/// waiting (a FIFO put there neither blocks the open nor, once refused, the writes). Refusals are
/// `PermissionDenied` errors saying why (of the file: the caller names it). ([`append_private`] is the wire log's, which may be a
/// FIFO read by the user.)
pub fn append_private_file(path: &Path) -> io::Result<File> {
    private_file(path, OpenOptions::new().append(true))
}

/// Moves the log at `path` to `to` unless another bridge writes to it now: it holds a shared
/// lock on it ([`hold_log`]), which an exclusive one taken without waiting runs into; that one is
/// held until the file is moved, so that no bridge starts writing to it meanwhile. A file system
/// without locks (some network ones) says nobody does. (Not moved, the file grows on until a
/// start finds it unused.)
pub fn move_log_aside(path: &Path, to: &Path) {
    let probe = OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(path);
    let held = probe.as_ref().map(|f| f.try_lock());
    if !matches!(held, Ok(Err(std::fs::TryLockError::WouldBlock))) {
        // Not moved (gone meanwhile, or a folder that refuses it): written on where it is.
        let _ = fs::rename(path, to);
    }
    drop(probe);
}

/// Marks the log `file`, opened at `path`, as written to by this bridge for as long as it is open
/// ([`move_log_aside`]): a shared lock, waited for (at most a second) only while a start moves the
/// file aside; a lock held otherwise (a user's `flock`) leaves the file unmarked. Whether `path`
/// still names `file` once marked (a start that moved it meanwhile: open it again).
pub fn hold_log(file: &File, path: &Path) -> bool {
    for _ in 0..100 {
        match file.try_lock_shared() {
            Err(std::fs::TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => break,
        }
    }
    let same = |a: &Metadata, b: &Metadata| a.dev() == b.dev() && a.ino() == b.ino();
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => same(&a, &b),
        // Moved, and the mover's own not made yet.
        (Ok(_), Err(e)) => e.kind() != io::ErrorKind::NotFound,
        _ => true,
    }
}

/// Opens `path` to read and write (nothing truncated), created with mode 0600 when missing, as
/// [`append_private_file`] checks it: the file whose lock one start of a workspace's bridge holds
/// ([`crate::state::Store::starting`]).
pub fn open_private_file(path: &Path) -> io::Result<File> {
    private_file(path, OpenOptions::new().read(true).write(true))
}

/// [`append_private_file`] and [`open_private_file`]: `options` opened as they say.
fn private_file(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let refuse = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
    let opened = options
        .create(true)
        .mode(0o600)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(refuse("it is a symbolic link".into()))
        }
        // A FIFO that nobody reads (`O_NONBLOCK` opens one for writing only with a reader).
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
            return Err(refuse("it is not a regular file".into()))
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    if !is_mine(&meta) {
        return Err(refuse("it is owned by another user".into()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "its mode {:o} lets group or others write to it (chmod go-w {})",
            meta.mode() & 0o7777,
            path.display()
        )));
    }
    // Writes wait again, as to any file.
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags.difference(OFlags::NONBLOCK))?;
    Ok(file)
}

/// Whether this user owns the file.
pub fn is_mine(meta: &Metadata) -> bool {
    meta.uid() == getuid().as_raw()
}

/// What the bridge requires of a lock-file folder (runtimes/runtime/src/lock.rs): this user's, not
/// writable by others; readable by others is worth a word.
pub fn lock_dir_finding(d: &Path, m: &Metadata) -> Finding {
    let mode = m.mode() & 0o7777;
    // (This user's access: the mode's owner bits, or none needed by root.)
    let writable = rustix::fs::access(
        d,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .is_ok();
    // And read: claude finds an IDE by listing the folder.
    let listable = rustix::fs::access(d, rustix::fs::Access::READ_OK).is_ok();
    let d = d.display();
    if !is_mine(m) {
        Finding::Problem(
            format!("{d} is owned by another user (uid {})", m.uid()),
            format!("make it yours: sudo chown \"$(id -u)\" {d}"),
        )
    } else if mode & 0o022 != 0 {
        Finding::Problem(
            format!(
                "{d} has mode {mode:04o}: other users can plant lock files there (the bridge \
                 refuses it)"
            ),
            format!("chmod 700 {d}"),
        )
    } else if !writable {
        Finding::Problem(
            format!("{d} has mode {mode:04o}: the bridge cannot write its lock file there"),
            format!("chmod 700 {d}"),
        )
    } else if !listable {
        Finding::Problem(
            format!(
                "{d} has mode {mode:04o}: claude cannot list the lock files there (it finds an \
                 IDE by listing them)"
            ),
            format!("chmod 700 {d}"),
        )
    } else if mode & 0o044 != 0 {
        // (The read bit lists a folder; the search bit alone opens a name already known.)
        Finding::Info(format!(
            "{d} has mode {mode:04o}: other users can list the lock files (their contents, with \
             the token, are yours only: 0600); chmod 700 {d} hides the ports too"
        ))
    } else {
        Finding::Ok(format!("{d} is a private directory ({mode:04o}, yours)"))
    }
}

/// The command that removes a file (said in a fix).
pub fn remove_hint(path: &Path) -> String {
    format!("rm {}", path.display())
}

/// The commands that put a private directory in place of what is at `dir` (said in a fix).
pub fn new_dir_hint(dir: &Path) -> String {
    format!("rm {0} && mkdir -m 700 {0}", dir.display())
}

/// The process ids above this one, its parent first (at most 64): from `/proc` where there is
/// one, else from `ps` (macOS); `None` when neither tells.
pub fn ancestors() -> Option<Vec<u32>> {
    fn parent(pid: u32) -> Option<u32> {
        if let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) {
            return stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok();
        }
        let out = std::process::Command::new("ps")
            .args(["-o", "ppid=", "-p", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    }
    let mut list = Vec::new();
    let mut pid = std::process::id();
    while list.len() < 64 {
        match parent(pid)? {
            0 => break,
            p => {
                list.push(p);
                if p == 1 {
                    break;
                }
                pid = p;
            }
        }
    }
    Some(list)
}

/// Whether this runs in a container (Docker's `/.dockerenv`, Podman's `/run/.containerenv`).
pub fn in_container() -> bool {
    Path::new("/.dockerenv").exists() || Path::new("/run/.containerenv").exists()
}

/// Inside WSL: the lock-file folders a `claude` run on Windows (not in WSL) reads, as this
/// distribution sees them (`%USERPROFILE%\.claude\ide` under `/mnt/<drive>`): the profile
/// `USERPROFILE` names when WSLENV passes it, else each `/mnt/c/Users/*` with a `.claude`
/// folder. `None` outside WSL.
pub fn wsl_windows_lock_dirs() -> Option<Vec<PathBuf>> {
    std::env::var_os("WSL_DISTRO_NAME").filter(|v| !v.is_empty())?;
    // Windows' own form, or already this side's (`WSLENV=USERPROFILE/p` hands it over so).
    let from_env = std::env::var("USERPROFILE").ok().and_then(|p| {
        if p.starts_with('/') {
            return Some(PathBuf::from(p));
        }
        wsl_path(&p).map(PathBuf::from)
    });
    let profiles: Vec<PathBuf> = match from_env {
        Some(p) => vec![p],
        None => fs::read_dir("/mnt/c/Users")
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.join(".claude").is_dir())
                    .collect()
            })
            .unwrap_or_default(),
    };
    Some(
        profiles
            .into_iter()
            .map(|p| p.join(".claude").join("ide"))
            .collect(),
    )
}

/// A Windows path with a drive (`C:\\x\\y`, `c:/x`) as WSL mounts it (`/mnt/c/x/y`): the engine's
/// `wsl_mount_path`, the same mapping a `claude` in WSL is sent paths by. `None` for any other form.
pub fn wsl_path(windows: &str) -> Option<String> {
    claude_ide_bridge::wsl_mount_path(windows)
}

/// The number of SIGINT, which `HostInput::Signal` carries for an interrupt (Ctrl-C).
pub const INTERRUPT: i32 = signal_hook::consts::SIGINT;
/// The number of SIGHUP, which `HostInput::Signal` carries for the terminal hanging up.
pub const HANGUP: i32 = signal_hook::consts::SIGHUP;

/// A thread turning SIGINT, SIGTERM, SIGHUP and SIGQUIT into host inputs; the stdio editor's writer is
/// told first that the bridge is stopping, so a host waiting for an editor that does not read
/// goes on to take the signal. Under `nohup` (SIGHUP ignored) or as a script's background job
/// (SIGINT ignored), the bridge stays as deaf to those as it was started.
pub fn listen_for_stop(tx: Sender<HostInput>, stdio: Option<StdioOut>) -> io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    // SIGQUIT too (Ctrl-\): its default action ended the bridge at once, its lock file left and
    // `run`'s claude on the terminal.
    let wanted = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
        .into_iter()
        .filter(|s| !claude_ide_bridge_runtime::signals::ignored(*s));
    let mut signals = signal_hook::iterator::Signals::new(wanted)?;
    // SIGCHLD inherited as ignored (from a parent that ignores it and then runs the bridge)
    // makes the kernel reap every child itself: waiting for `run`'s command, `$EDITOR` or a
    // language server then fails (ECHILD), and `run` exited 1 instead of its command's status.
    // A handler of the bridge's own (which the programs it starts do not inherit) puts the
    // usual reaping back.
    if claude_ide_bridge_runtime::signals::ignored(signal_hook::consts::SIGCHLD) {
        let noted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _ = signal_hook::flag::register(signal_hook::consts::SIGCHLD, noted);
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let _stop = crate::host::StopOnPanic::new(&tx, "signals");
            for sig in signals.forever() {
                crate::panic::test_panic("signals");
                if let Some(out) = &stdio {
                    out.stopping();
                }
                // A host waiting for room on a terminal that takes no output goes on to its stop.
                crate::ui::stderr_stopping();
                if tx.send(HostInput::Signal(sig)).is_err() {
                    break;
                }
            }
        })?;
    Ok(())
}

/// Nothing waits for the stop here: a signal's default action is not taken once handled.
pub fn stopped() {}

/// How a request to stop (signal `sig`) is named to the user: Ctrl-C by its key, since the user
/// pressed it, the others by their names (a number meant nothing to a user who did not send it:
/// systemd, `timeout`, a closed terminal).
pub fn signal_name(sig: i32) -> String {
    use signal_hook::consts::{SIGHUP, SIGQUIT, SIGTERM};
    match sig {
        INTERRUPT => "Ctrl-C (SIGINT)".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        SIGQUIT => "SIGQUIT".into(),
        n => format!("signal {n}"),
    }
}

/// Ends the program as Ctrl-C does, once its stop is done: SIGINT's default action, so that the
/// shell sees it interrupted and stops the script or loop it ran it in (bash goes on after a
/// program that took Ctrl-C and exited 0, taking it for one that uses Ctrl-C itself). Never
/// returns when the signal is raised; one that could not be aborts the program (signal-hook's
/// fallback), and one this platform's table lacks returns (the stop's status then stands).
pub fn end_interrupted() {
    let _ = signal_hook::low_level::emulate_default_handler(INTERRUPT);
}

/// A process id as rustix takes it (`None` for 0 and ids past `i32`, which name no one process).
fn pid_of(pid: u32) -> Option<rustix::process::Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
}

/// Tells `run`'s command, or `$EDITOR` at a stop, to stop: SIGTERM, and SIGCONT (a command
/// stopped, suspended, takes its SIGTERM only once it runs again); on Linux the processes it
/// started too ([`with_descendants`]).
pub fn ask_to_stop(pid: u32) {
    for p in with_descendants(pid) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        let _ = rustix::process::kill_process(p, rustix::process::Signal::CONT);
    }
}

/// `pid` and, on Linux, the processes below it in its session as `/proc` shows them at this
/// moment (each one's parent and session read from its `stat`), parents first: a command that is
/// a wrapper (`sh -c 'a; b'`, a script that runs `node` without `exec`) ends at a stop with what
/// it started, which was left running on the terminal once the wrapper was gone. A process that
/// left the session (`setsid`: a daemon, the window `code --wait` starts when VS Code was not
/// running, which holds the user's other windows) is not the command's to end, nor what it
/// started; nor is one that left the tree before (its parent gone: it is init's). Elsewhere (no
/// `/proc`, or one of another pid namespace, where its numbers name other processes), `pid`
/// alone.
fn with_descendants(pid: u32) -> Vec<rustix::process::Pid> {
    let Some(top) = pid_of(pid) else {
        return Vec::new();
    };
    let mut tree = vec![top];
    if !cfg!(target_os = "linux") {
        return tree;
    }
    // `pid (comm) state ppid pgrp session ...`.
    let stat = |p: &str| -> Option<(i32, i32, i32)> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let pid = stat.split_whitespace().next()?.parse().ok()?;
        let mut rest = after_name(&stat)?;
        let parent = rest.nth(1)?.parse().ok()?;
        let session = rest.nth(1)?.parse().ok()?;
        Some((pid, parent, session))
    };
    let ours =
        stat("self").is_some_and(|(me, _, _)| i64::from(me) == i64::from(std::process::id()));
    let (Some((_, _, session)), true) = (stat(&pid.to_string()), ours) else {
        return tree;
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return tree;
    };
    // (pid, parent) of every process of the command's session listed (one that ended
    // meanwhile is not).
    let members: Vec<(i32, i32)> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|name| stat(&name))
        .filter(|&(_, _, s)| s == session)
        .map(|(p, parent, _)| (p, parent))
        .collect();
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i].as_raw_nonzero().get();
        for &(p, _) in members.iter().filter(|(_, pp)| *pp == parent) {
            match rustix::process::Pid::from_raw(p) {
                Some(child) if !tree.contains(&child) => tree.push(child),
                _ => {}
            }
        }
        i += 1;
    }
    tree
}

/// How long [`wait_for_command`] lets a stop of the command settle before it follows it.
const STOP_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// Waits for `run`'s command to end. When it stops itself (claude suspending on Ctrl-Z), the
/// bridge stops with it: the shell sees its foreground job stopped and takes the terminal back,
/// and `fg` continues both (it continues the whole process group).
pub fn wait_for_command(child: &mut Child) -> io::Result<ExitStatus> {
    use rustix::process::{kill_current_process_group, waitpid, Signal, WaitOptions};
    use std::os::unix::process::ExitStatusExt;
    let Some(pid) = pid_of(child.id()) else {
        return child.wait();
    };
    loop {
        match waitpid(Some(pid), WaitOptions::UNTRACED) {
            Ok(Some((_, status))) if status.stopped() => {
                // Stopped with the whole group (the terminal's Ctrl-Z), the bridge stops too, a
                // moment later: this thread, frozen meanwhile, goes on after `fg`, when the
                // command was continued already, and must not stop everything again. So the
                // command is followed only when, a moment later, it is still stopped.
                std::thread::sleep(STOP_SETTLE);
                match waitpid(Some(pid), WaitOptions::NOHANG | WaitOptions::CONTINUED) {
                    Ok(Some((_, s))) if s.continued() => {}
                    Ok(Some((_, s))) => return Ok(ExitStatus::from_raw(s.as_raw())),
                    // Stopped by [`kill_now`] on its way to SIGKILL: not a suspend, and
                    // followed it would stop the bridge in the middle of its stop.
                    _ if KILLING.load(std::sync::atomic::Ordering::SeqCst) => {}
                    // SIGTSTP, not SIGSTOP: a group no shell would continue ignores it.
                    _ => _ = kill_current_process_group(Signal::TSTP),
                }
            }
            Ok(Some((_, status))) => return Ok(ExitStatus::from_raw(status.as_raw())),
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// What tells that a file the servers have changed on disk (`host::diagnostics`): the file at
/// `path` itself, a link put in its place being a change.
pub fn stamp_metadata(path: &Path) -> io::Result<Metadata> {
    fs::symlink_metadata(path)
}

/// Whether `run`'s command, found, could not be run (a shell's status 126): not executable,
/// being written, not a program this system runs (`ENOEXEC`, or another machine's: `tie.rs`).
pub fn cannot_execute(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied
            | io::ErrorKind::ExecutableFileBusy
            | io::ErrorKind::Unsupported
    ) || e.raw_os_error() == Some(rustix::io::Errno::NOEXEC.raw_os_error())
}

/// The exit code a shell would report: the status, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Whether this process may use its terminal: standard input is a terminal whose foreground
/// process group is this process's. In the background of it (`serve &`), flushing or reading it
/// stops the whole process (SIGTTOU, SIGTTIN), so nothing is asked there.
pub fn terminal_is_ours() -> bool {
    let stdin = std::io::stdin();
    rustix::termios::isatty(&stdin)
        && rustix::termios::tcgetpgrp(&stdin).is_ok_and(|fg| fg == rustix::process::getpgrp())
}

/// Waits until standard output has no reader any more (a pipe whose read end every process
/// closed: `POLLERR`; a socket its peer closed, a terminal hung up: `POLLHUP`), without a wake-up
/// before: true then; false when that cannot be watched (a file, `/dev/null`: never, and this
/// waits for good; an error: at once). The `--stdio` editor closing only its reading end
/// otherwise went unseen until the bridge next wrote a line, its lock file still advertised.
pub fn wait_until_stdout_unread() -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    // macOS's poll reports no hang-up or error unless an event is asked for (Apple's bug
    // 37537852), and asking for POLLOUT wakes at once: not watched there (seen at the next line
    // written, as on Windows).
    if cfg!(target_os = "macos") {
        return false;
    }
    let stdout = std::io::stdout();
    loop {
        // No event asked for: the errors and hang-ups are always reported.
        let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
        match poll(&mut fds, None) {
            Ok(_) => {
                let seen = fds[0].revents();
                if seen.contains(PollFlags::NVAL) {
                    return false;
                }
                if seen.intersects(PollFlags::ERR | PollFlags::HUP) {
                    return true;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// A write past the file-size limit (`ulimit -f`) fails with `EFBIG`, refused and its temporary
/// file removed as on a full disk, rather than ending the bridge (SIGXFSZ's default action) with
/// every client's connection, a temporary file and its lock file left behind. A handler, not
/// `SIG_IGN`: the programs the bridge starts get the default action back (an ignored signal
/// would stay ignored in them).
pub fn write_past_file_size_limit_fails() {
    let unused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, unused);
}

/// Raises the soft limit on open files to the hard one, at most [`OPEN_FILES_CEILING`]: each
/// listing holds a directory handle per level (up to 64), 64 of them may run at once, and every
/// connection, language server and file read takes more; the usual soft limit of 1,024 would run
/// out first. A limit that cannot be raised stays as it was (listings cut short by it say so).
pub fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    if let Some(current) = raised_soft_limit(limit.current, limit.maximum, OPEN_FILES_CEILING) {
        let raised = rustix::process::Rlimit {
            current: Some(current),
            maximum: limit.maximum,
        };
        let _ = setrlimit(Resource::Nofile, raised);
    }
}

/// The most the soft limit on open files is raised to: macOS refuses a soft limit past
/// `OPEN_MAX` (10,240, `<sys/syslimits.h>`; its `setrlimit(2)`: "use rlim_cur = min(OPEN_MAX,
/// rlim_max)"), and its usual hard limit is unlimited. Elsewhere 65,536, far more than the bridge
/// holds at once: the limit is inherited by every program the bridge starts (claude, `$EDITOR`,
/// the language servers), and a program that closes every descriptor up to its limit, or whose
/// `select` takes none past 1,024, met the hard limit there (524,288 to a million on Linux).
#[cfg(target_vendor = "apple")]
const OPEN_FILES_CEILING: Option<u64> = Some(10_240);
#[cfg(not(target_vendor = "apple"))]
const OPEN_FILES_CEILING: Option<u64> = Some(65_536);

/// The soft limit to set, from the soft and hard limits (`None`: unlimited) and the OS's
/// ceiling: the hard limit, or the ceiling when lower (or when the hard limit is unlimited);
/// `None` when the soft limit is already there or past it.
fn raised_soft_limit(
    current: Option<u64>,
    maximum: Option<u64>,
    ceiling: Option<u64>,
) -> Option<u64> {
    let want = match (maximum, ceiling) {
        (Some(max), Some(ceiling)) => max.min(ceiling),
        (Some(max), None) => max,
        (None, Some(ceiling)) => ceiling,
        (None, None) => return None,
    };
    current.filter(|&c| c < want).map(|_| want)
}

/// The path a `file:` URI names, as the files crate takes it; `None` when it names no local
/// file: one of another host (`file://host/a`, which the engine writes `//host/a`: taken as
/// `/host/a` once normalised), or of a Windows drive (`file:///C:/a`, which the engine writes
/// `/c/a`: a file of no folder here, from a Windows editor whose folders need `--path-map`).
pub fn path_of_file_uri(uri: &str) -> Option<String> {
    let drive = claude_ide_bridge::uri_to_windows_path(uri)
        .is_some_and(|w| w.as_bytes().get(1) == Some(&b':'));
    claude_ide_bridge::uri_to_path(uri).filter(|p| !drive && !p.starts_with("//"))
}

/// A path in the engine's wire form with `.`, `..` and repeated `/` resolved
/// (`claude_ide_bridge::normalize`): a leading `//` is one `/` here, as the system reads it.
pub fn normalize_wire(path: &str) -> Option<String> {
    claude_ide_bridge::normalize(path)
}

/// A path in the engine's wire form as this OS writes it: the same.
pub fn native_path(path: &str) -> String {
    path.to_owned()
}

/// The command running `$VISUAL`/`$EDITOR` on `files`. The variable may carry arguments
/// (`EDITOR="code --wait"`): words with nothing a shell would read differently (no quotes,
/// `$`, `~`, `=`, `;`, globs, ...) are run as they are, split at spaces; anything else is run by
/// `sh`, the files passed as `"$@"`: as they are, never read by the shell, and through `exec`
/// when it is one command (`vim -c "set nu"`, `emacsclient -t -a ''`). Either way the editor is
/// the process the bridge started, so [`ask_to_stop`] reaches it (a `sh` that does not `exec` its
/// command, as dash does not, would end alone and leave the editor on the terminal). A command
/// list (`;`, `&&`, a pipe) or one starting with an assignment (`TERM=xterm vim`) keeps its shell.
fn editor_command(editor: &OsStr, files: &[&OsStr]) -> io::Result<Command> {
    const SHELL_READS: &[u8] = b"|&;<>()$`\\\"'*?[]{}#~=%!\n";
    let bytes = editor.as_encoded_bytes();
    if !bytes.iter().any(|b| SHELL_READS.contains(b)) {
        if let Some(words) = editor.to_str().map(|e| e.split_ascii_whitespace()) {
            let mut words = words;
            if let Some(program) = words.next() {
                let mut c = Command::new(program);
                c.args(words).args(files);
                return Ok(c);
            }
        }
    }
    let first_word = bytes.split(u8::is_ascii_whitespace).find(|w| !w.is_empty());
    let one_command = !bytes.iter().any(|b| b"|&;<>()`\n".contains(b))
        && first_word.is_some_and(|w| !w.contains(&b'='));
    let mut script = OsString::from(if one_command { "exec " } else { "" });
    script.push(editor);
    script.push(" \"$@\"");
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(script).arg("editor").args(files);
    Ok(c)
}

/// Starts the editor ([`editor_command`]) with `setup` applied (its standard streams). A program
/// the kernel will not run (`ENOEXEC`: a script without a `#!` line) is run by `sh`, as a shell,
/// `execvp` and git do: through `exec "$0" "$@"`, so that `sh` finds a bare name on `PATH` (as
/// a script file to read, it would look in the current directory) and runs it as a script.
/// With [`Ends::WithBridge`] it is tied to the bridge (`tie`).
pub fn start_editor(
    editor: &OsStr,
    files: &[&OsStr],
    ends: Ends,
    setup: impl Fn(&mut Command),
) -> io::Result<Child> {
    let c = editor_command(editor, files)?;
    let (program, args, path) = (
        c.get_program().to_owned(),
        c.get_args().map(OsStr::to_owned).collect::<Vec<_>>(),
        tie::path_of(&c),
    );
    let start = |mut c: Command| match ends {
        Ends::WithBridge => tie::start(c, &setup),
        Ends::OnItsOwn => {
            setup(&mut c);
            // A process group of its own: what the terminal sends the bridge's group (Ctrl-C,
            // Ctrl-Z, the hang-up as it closes) or the shell its job is not the editor's, which
            // stays open with the user's unsaved work.
            std::os::unix::process::CommandExt::process_group(&mut c, 0);
            c.spawn()
        }
    };
    match start(c) {
        Err(e)
            if e.raw_os_error() == Some(rustix::io::Errno::NOEXEC.raw_os_error())
                && tie::is_script(&program, path.as_deref()) =>
        {
            start(by_sh(&program, args.iter().map(OsString::as_os_str)))
        }
        started => started,
    }
}

/// `program` with `args` run by `sh` as a shell runs a file the kernel will not (`ENOEXEC`):
/// `exec "$0" "$@"`, which finds a bare name on `PATH`.
fn by_sh<'a>(program: &OsStr, args: impl IntoIterator<Item = &'a OsStr>) -> Command {
    let mut sh = Command::new("/bin/sh");
    sh.args(["-c", "exec \"$0\" \"$@\""])
        .arg(program)
        .args(args);
    sh
}

/// Whether `$EDITOR` is told to stop at a stop ([`ask_to_stop`], then [`kill_now`]).
pub const SIGNALS_EDITOR: bool = true;

/// Ends process `pid` at once (SIGKILL), on Linux with the processes it started
/// ([`with_descendants`]): what [`ask_to_stop`] did not end (`$EDITOR` after a grace, `run`'s
/// command when the bridge is told to stop again).
///
/// The tree is stopped (SIGSTOP) before it is killed, and looked at again until a look finds
/// nothing new: a process that started another between the look at `/proc` and its SIGKILL
/// left that one running, init's once its parent was gone, where no later look finds it (a
/// wrapper in a loop that starts programs left one behind at 2 of 5 stops). Stopped, a
/// process starts nothing more, and what it started before is below it at the next look.
pub fn kill_now(pid: u32) {
    use rustix::process::{kill_process, Signal};
    KILLING.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut stopped: Vec<rustix::process::Pid> = Vec::new();
    for _ in 0..KILL_LOOKS {
        let new: Vec<_> = with_descendants(pid)
            .into_iter()
            .filter(|p| !stopped.contains(p))
            .collect();
        if new.is_empty() {
            break;
        }
        for &p in &new {
            let _ = kill_process(p, Signal::STOP);
        }
        until_stopped(&new);
        stopped.extend(new);
    }
    // A debug build's pause between the stop and the kill, for the test that a stop of the
    // bridge's own is not taken for a suspend (`run_and_inspect.rs`).
    if cfg!(debug_assertions) && std::env::var_os("CLAUDE_IDE_BRIDGE_TEST_KILL_PAUSE").is_some() {
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    for &p in &stopped {
        let _ = kill_process(p, Signal::KILL);
    }
}

/// Waits, [`STOP_WAIT`] at most, until each of `procs` has stopped (or is gone): a SIGSTOP is
/// taken only on the way back from the kernel, and one sent in the middle of a `fork` lets it
/// finish; its child is in `/proc` once the parent has stopped, not as soon as the signal was
/// sent (the next look could miss it: a wrapper in a loop that starts programs left one running,
/// once in CI and twice in 24 runs of three at once here). Linux only, where the tree is looked
/// at again.
fn until_stopped(procs: &[rustix::process::Pid]) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let give_up = std::time::Instant::now() + STOP_WAIT;
    for p in procs {
        while !stopped_or_gone(*p) && std::time::Instant::now() < give_up {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// How long [`until_stopped`] waits for a tree to stop: a process in an uninterruptible wait
/// (`D`: a disk, a network file system) stops only once it is out of it.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether `/proc` shows process `p` stopped (`T`, `t`), a zombie or gone.
fn stopped_or_gone(p: rustix::process::Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", p.as_raw_nonzero())) else {
        return true;
    };
    let state = after_name(&stat).and_then(|mut fields| fields.next());
    matches!(state, Some("T" | "t" | "Z" | "X" | "x") | None)
}

/// The fields of a `/proc/PID/stat` text after the process's name (`state ppid pgrp session
/// ...`): the name, in parentheses, may hold spaces and parentheses itself.
fn after_name(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    let (_, fields) = stat.rsplit_once(')')?;
    Some(fields.split_whitespace())
}

/// Set by [`kill_now`] before it stops anything: the stops [`wait_for_command`] then sees are
/// its own, not the command suspending itself, and are not followed (the bridge would stop with
/// them, suspended by its own stop).
static KILLING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The most looks [`kill_now`] takes at the tree it stops: each finds what was started before its
/// parent was stopped, so the looks end once a look finds nothing new, after as many as the tree
/// has levels of such processes.
const KILL_LOOKS: usize = 16;

/// Whether `run`'s command was killed: ended by a signal (a status without an exit code).
pub fn ended_abnormally(status: &ExitStatus) -> bool {
    status.code().is_none()
}

/// Whether a program run by `sh` was ended by Ctrl-C: SIGINT, or the shell's 130 for it.
pub fn ended_by_interrupt(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(INTERRUPT) || status.code() == Some(128 + INTERRUPT)
}

/// The permission bits of `path` (tests).
#[cfg(test)]
pub fn mode_of(path: &Path) -> Option<u32> {
    Some(fs::metadata(path).ok()?.mode() & 0o777)
}

/// Makes a file written by a test as private as the program's own (0600).
#[cfg(test)]
pub fn make_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::{saved, store};
    use std::os::unix::fs::PermissionsExt;

    /// A Windows path with a drive as WSL mounts it; any other form is none.
    #[test]
    fn windows_paths_are_read_as_wsl_mounts_them() {
        for (windows, wsl) in [
            (r"C:\Users\me\proj", Some("/mnt/c/Users/me/proj")),
            ("d:/x/y/", Some("/mnt/d/x/y")),
            (r"C:\", Some("/mnt/c")),
            ("C:", Some("/mnt/c")),
            (r"\\server\share\x", None),
            ("/home/me", None),
            ("CC:/x", None),
            ("1:/x", None),
            ("C:x", None),
        ] {
            assert_eq!(wsl_path(windows).as_deref(), wsl, "{windows}");
        }
    }

    /// Others can list a lock folder they may read, not one they may only search (0711): that
    /// was said to be listable.
    #[test]
    fn a_lock_folder_others_may_only_search_is_not_listable_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let said = |mode: u32| {
            fs::set_permissions(dir.path(), fs::Permissions::from_mode(mode)).unwrap();
            lock_dir_finding(dir.path(), &fs::metadata(dir.path()).unwrap())
        };
        for mode in [0o711, 0o701, 0o710, 0o700] {
            assert!(
                matches!(said(mode), Finding::Ok(_)),
                "{mode:o}: {:?}",
                said(mode)
            );
        }
        for mode in [0o755, 0o740, 0o704] {
            match said(mode) {
                Finding::Info(text) => assert!(text.contains("can list"), "{text}"),
                other => panic!("{mode:o}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_editor_of_plain_words_is_run_directly_anything_else_by_sh() {
        let argv = |editor: &str| {
            let c = editor_command(OsStr::new(editor), &[OsStr::new("/t/a b.txt")]).unwrap();
            let mut v = vec![c.get_program().to_string_lossy().into_owned()];
            v.extend(c.get_args().map(|a| a.to_string_lossy().into_owned()));
            v
        };
        assert_eq!(argv("vim"), ["vim", "/t/a b.txt"]);
        assert_eq!(argv(" code\t--wait "), ["code", "--wait", "/t/a b.txt"]);
        for (shell, exec) in [
            ("FOO=1 vim", false),
            ("'my editor'", true),
            ("~/bin/ed", true),
            ("vim $X", true),
            ("vim -c \"set nu\"", true),
            ("emacsclient -t -a ''", true),
            ("a;b", false),
            ("a && b", false),
            ("ed\\x", true),
        ] {
            let v = argv(shell);
            assert_eq!(v[..2], ["/bin/sh", "-c"], "{shell}");
            let exec = if exec { "exec " } else { "" };
            assert_eq!(v[2], format!("{exec}{shell} \"$@\""));
            assert_eq!(v[3..], ["editor", "/t/a b.txt"]);
        }
    }

    /// A script without a `#!` line as `$EDITOR` (the kernel refuses it, `ENOEXEC`) is run by
    /// `sh`, as a shell runs it, with its arguments and the streams `setup` gave; run directly,
    /// as a plain word is, it failed to start.
    #[test]
    fn an_editor_script_without_a_shebang_is_run_by_sh() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("ed");
        fs::write(&script, "printf '%s|' \"$@\" >> \"$2\"\necho said\n").unwrap();
        set_mode(&script, 0o755);
        let file = d.path().join("a b.txt");
        fs::write(&file, "").unwrap();
        let editor = format!("{} -x", script.display());
        let out = start_editor(
            OsStr::new(&editor),
            &[file.as_os_str()],
            Ends::OnItsOwn,
            |c| {
                c.stdout(std::process::Stdio::piped());
            },
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"said\n");
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            format!("-x|{}|", file.display())
        );
        // A bare name is found on PATH, not in the current directory, where a file of that
        // name would have been read as the script.
        let bin = d.path().join("bin");
        fs::create_dir(&bin).unwrap();
        fs::rename(&script, bin.join("ed")).unwrap();
        fs::write(d.path().join("ed"), "echo ran the current directory's\n").unwrap();
        fs::write(&file, "").unwrap();
        let out = start_editor(
            OsStr::new("ed -y"),
            &[file.as_os_str()],
            Ends::OnItsOwn,
            |c| {
                c.env("PATH", &bin)
                    .current_dir(d.path())
                    .stdout(std::process::Stdio::piped());
            },
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
        assert_eq!(out.stdout, b"said\n");
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            format!("-y|{}|", file.display())
        );
        let script = bin.join("ed");
        // Not something else run in its place: a file that is not executable stays refused.
        set_mode(&script, 0o644);
        let refused = start_editor(
            OsStr::new(&editor),
            &[file.as_os_str()],
            Ends::OnItsOwn,
            |_| {},
        );
        assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    }

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// What the state file is refused for on Unix: group or others may use it, it is a symbolic
    /// link (never followed, and replaced itself by a save), another user's, or a FIFO (read
    /// without waiting).
    #[test]
    fn state_files_refused_by_mode_link_owner_and_type() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        s.save(&saved()).unwrap();
        let good = fs::read(s.path()).unwrap();
        let put = |bytes: &[u8], mode: u32| {
            let _ = fs::remove_file(s.path());
            fs::write(s.path(), bytes).unwrap();
            set_mode(&s.path(), mode);
        };
        put(&good, 0o644);
        assert!(matches!(s.load(), Err(Refused::OpenToOthers(0o644))));
        // A symbolic link to a good file is not followed.
        let elsewhere = d.path().join("elsewhere.json");
        fs::write(&elsewhere, &good).unwrap();
        set_mode(&elsewhere, 0o600);
        fs::remove_file(s.path()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, s.path()).unwrap();
        assert!(matches!(s.load(), Err(Refused::Symlink)));
        // Saving replaces the link itself, not the file it points to.
        s.save(&saved()).unwrap();
        assert!(!fs::symlink_metadata(s.path()).unwrap().is_symlink());
        assert_eq!(fs::read(&elsewhere).unwrap(), good);
        assert!(s.load().unwrap().is_some());
        // Another user's file (the tests can make one only as root).
        if getuid().is_root() {
            put(&good, 0o600);
            let other = rustix::process::Uid::from_raw(65534);
            rustix::fs::chown(s.path(), Some(other), None).unwrap();
            assert!(matches!(s.load(), Err(Refused::NotOurs)));
        }
        // A FIFO in its place. mkfifo(1): rustix has no `mknodat` on macOS.
        fs::remove_file(s.path()).unwrap();
        let made = Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(s.path())
            .status();
        assert!(made.unwrap().success(), "mkfifo {}", s.path().display());
        assert!(matches!(s.load(), Err(Refused::NotAFile)));
    }

    /// The soft limit on open files goes up to the hard one, or to the OS's ceiling (macOS:
    /// `OPEN_MAX`) when that is lower or the hard limit is unlimited (`None`), which is macOS's
    /// usual 256 and unlimited: `Some(256) < None` is false, and it was never raised there.
    #[test]
    fn the_open_files_limit_is_raised_to_what_the_os_takes() {
        let mac = Some(10_240);
        assert_eq!(raised_soft_limit(Some(256), None, mac), Some(10_240));
        assert_eq!(raised_soft_limit(Some(256), Some(4_096), mac), Some(4_096));
        assert_eq!(
            raised_soft_limit(Some(1_024), Some(524_288), mac),
            Some(10_240)
        );
        assert_eq!(raised_soft_limit(Some(10_240), None, mac), None);
        assert_eq!(
            raised_soft_limit(Some(1_024), Some(524_288), None),
            Some(524_288)
        );
        assert_eq!(raised_soft_limit(Some(524_288), Some(524_288), None), None);
        assert_eq!(raised_soft_limit(None, None, None), None);
        assert_eq!(raised_soft_limit(None, Some(8), mac), None);
        // Elsewhere, at most 65,536: what the programs the bridge starts inherit.
        let elsewhere = Some(65_536);
        assert_eq!(
            raised_soft_limit(Some(1_024), Some(1_048_576), elsewhere),
            Some(65_536)
        );
        assert_eq!(
            raised_soft_limit(Some(1_024), Some(4_096), elsewhere),
            Some(4_096)
        );
        // And for real, here: the soft limit is then as high as it may be.
        raise_open_files_limit();
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(
            raised_soft_limit(now.current, now.maximum, OPEN_FILES_CEILING),
            None,
            "{now:?}"
        );
    }

    /// The language-server log's file: created 0600, appended to with writes that wait again,
    /// and refused unless a regular file of this user's closed to others' writes: a symbolic
    /// link (not followed), a FIFO (never waited on, with a reader or without) or a file others
    /// may write to.
    #[test]
    fn the_log_file_is_refused_unless_a_private_regular_file() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lsp.log");
        let mut f = append_private_file(&p).unwrap();
        assert_eq!(mode_of(&p), Some(0o600));
        let flags = rustix::fs::fcntl_getfl(&f).unwrap();
        assert!(!flags.contains(OFlags::NONBLOCK) && flags.contains(OFlags::APPEND));
        f.write_all(b"one\n").unwrap();
        drop(f);
        append_private_file(&p)
            .unwrap()
            .write_all(b"two\n")
            .unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "one\ntwo\n");
        let refused = |path: &Path, why: &str| {
            // On a thread: an open that waits (a FIFO) fails the test instead of hanging it.
            let (tx, rx) = std::sync::mpsc::channel();
            let path = path.to_path_buf();
            std::thread::spawn(move || tx.send(append_private_file(&path).map(drop)));
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(5))
                .expect("the open waited");
            let e = got.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            assert!(e.to_string().contains(why), "{e}");
        };
        set_mode(&p, 0o622);
        refused(&p, "lets group or others write");
        set_mode(&p, 0o644);
        append_private_file(&p).unwrap();
        // A symbolic link to a private file is not followed, nor is the file touched.
        let link = d.path().join("link.log");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        refused(&link, "symbolic link");
        assert_eq!(fs::read_to_string(&p).unwrap(), "one\ntwo\n");
        // A FIFO: refused without a reader, and with one.
        let fifo = d.path().join("fifo.log");
        let made = Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(&fifo)
            .status();
        assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
        refused(&fifo, "not a regular file");
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(OFlags::NONBLOCK.bits() as i32)
            .open(&fifo)
            .unwrap();
        refused(&fifo, "not a regular file");
        drop(reader);
        // Another user's file (the tests can make one only as root).
        if getuid().is_root() {
            let theirs = d.path().join("theirs.log");
            fs::write(&theirs, "").unwrap();
            set_mode(&theirs, 0o600);
            let other = rustix::process::Uid::from_raw(65534);
            rustix::fs::chown(&theirs, Some(other), None).unwrap();
            refused(&theirs, "another user");
        }
    }

    /// The state folder's parent a symbolic link (planted by another user in a shared
    /// `XDG_STATE_HOME`): refused, and nothing is made where it leads.
    #[test]
    fn a_linked_parent_is_refused_before_anything_is_made_in_it() {
        let d = tempfile::tempdir().unwrap();
        let elsewhere = d.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        let base = d.path().join("claude-ide-bridge");
        std::os::unix::fs::symlink(&elsewhere, &base).unwrap();
        let e = private_dir(&base.join("workspaces")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        // Made whole where nothing was.
        let fresh = d.path().join("fresh/claude-ide-bridge/workspaces");
        private_dir(&fresh).unwrap();
        assert_eq!(fs::metadata(&fresh).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_folder_open_to_others_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        fs::create_dir(d.path().join("workspaces")).unwrap();
        set_mode(&d.path().join("workspaces"), 0o777);
        let e = s.save(&saved()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(!s.path().exists());
    }
}
