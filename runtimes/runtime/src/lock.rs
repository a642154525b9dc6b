//! The lock file: its directory, atomic writes, the guard that removes it, stale-file cleanup.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use claude_ide_bridge::{lock_dirs, lock_file_name, port_from_lock_name, LockFile};

use crate::{signals, sys};

pub(crate) mod watch;

/// The user's home as the client's `os.homedir()` finds it: `$HOME` on Unix, `%USERPROFILE%` on
/// Windows, when set (set but empty: none); when not set, the home the system has for the user
/// (the password database's on Unix). Only an absolute one: a relative home would put the
/// bridge's files wherever it was started.
///
/// ```
/// if let Some(home) = claude_ide_bridge_runtime::lock::user_home() {
///     assert!(home.is_absolute());
/// }
/// ```
pub fn user_home() -> Option<PathBuf> {
    let home = match std::env::var_os(sys::HOME_VAR) {
        Some(h) => (!h.is_empty()).then(|| PathBuf::from(h)),
        None => std::env::home_dir(),
    };
    home.filter(|h| h.is_absolute())
}

/// The directory the real client scans first: `$CLAUDE_CONFIG_DIR/ide` when set, else
/// `.claude/ide` in the user's home ([`user_home`]: `$HOME` on Unix, `%USERPROFILE%` on Windows,
/// where the Windows `claude` looks, and without it the system's home for the user).
pub fn default_lock_dir() -> io::Result<PathBuf> {
    let config = std::env::var("CLAUDE_CONFIG_DIR").ok();
    let home = user_home().and_then(|h| h.into_os_string().into_string().ok());
    lock_dirs(config.as_deref(), home.as_deref())
        .into_iter()
        .next()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no lock-file directory", no_lock_dir_reason()),
            )
        })
}

/// Why [`default_lock_dir`] finds no directory, as a sentence to show: `CLAUDE_CONFIG_DIR` is not
/// set, and the home is set but empty, set to a relative path (which it names), or not set with
/// none for the user in the system either.
///
/// ```
/// use claude_ide_bridge_runtime::lock::no_lock_dir_reason;
/// assert!(no_lock_dir_reason().starts_with("CLAUDE_CONFIG_DIR is not set and "));
/// ```
pub fn no_lock_dir_reason() -> String {
    // A home set but unusable is not the system's lack of one.
    let home = match std::env::var_os(sys::HOME_VAR) {
        Some(h) if h.is_empty() => format!("{} is set but empty", sys::HOME_VAR),
        Some(h) => format!(
            "{} is {:?}, not an absolute path",
            sys::HOME_VAR,
            h.to_string_lossy()
        ),
        None => format!(
            "{} is not set and the system has no home for this user",
            sys::HOME_VAR
        ),
    };
    format!("CLAUDE_CONFIG_DIR is not set and {home}")
}

/// Creates `dir` private to the user if missing (parents included; mode 0700 on Unix), then
/// checks it: a real directory (not a symlink), and on Unix owned by this user and not writable
/// by group or others (on Windows it inherits the access list of the folder it is made in:
/// SECURITY.md). Refusals are `PermissionDenied` errors naming the reason.
pub fn ensure_lock_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            sys::create_private_dir(dir)?;
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    check_lock_dir(dir)
}

fn refuse(dir: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("refusing lock-file directory {}: {why}", dir.display()),
    )
}

fn check_lock_dir(dir: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(refuse(dir, "it is a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(refuse(dir, "it is not a directory"));
    }
    match sys::private_dir_problem(&meta) {
        Some(why) => Err(refuse(dir, why)),
        None => Ok(()),
    }
}

/// Writes `dir/name` atomically: a temporary file in `dir` created exclusively, without following
/// symlinks, private to the user (mode 0600 on Unix); written, then renamed over `name` (a rename replaces a symlink at `name`
/// rather than writing through it). Readers see the old file or the new one whole. Not synced to
/// disk: a lock file only matters while its process runs, and a rewrite happens under the
/// running server's lock (`Handle::set_workspace_folders`), which an `fsync` on a slow disk
/// would hold for seconds.
pub fn write_atomic(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    write_atomic_as(dir, name, contents, false)
}

/// [`write_atomic`], the new contents synced to disk before the rename: after a power loss the
/// name holds the old contents or the new, not an empty file. For a file that outlives the
/// process (a host's kept port and token), written outside any lock others wait on.
///
/// ```
/// use claude_ide_bridge_runtime::lock::write_atomic_durable;
/// let dir = tempfile::tempdir().unwrap();
/// write_atomic_durable(dir.path(), "state.json", b"{}").unwrap();
/// assert_eq!(std::fs::read(dir.path().join("state.json")).unwrap(), b"{}");
/// ```
pub fn write_atomic_durable(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    write_atomic_as(dir, name, contents, true)
}

/// [`write_atomic`], synced first when `durable`.
fn write_atomic_as(dir: &Path, name: &str, contents: &[u8], durable: bool) -> io::Result<()> {
    let tmp = write_temp(dir, name, contents, durable)?;
    let written = again_while_held(|| fs::rename(&tmp, dir.join(name)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// A temporary file in `dir` for `name`, created as [`write_atomic`] says, holding `contents`.
fn write_temp(dir: &Path, name: &str, contents: &[u8], durable: bool) -> io::Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    // Random as well: a run killed between the create and the rename leaves its file, and a
    // later run with the same pid (pid 1 in every container) and sequence would collide on that
    // name for good.
    let salt = rand_core::RngCore::next_u32(&mut rand_core::OsRng);
    let tmp = dir.join(format!(
        ".{name}.{}.{seq}.{salt:08x}.tmp",
        std::process::id()
    ));
    let mut file = sys::create_private_file(&tmp)?;
    // Closed before the rename, which Windows refuses for an open file.
    let written = file
        .write_all(contents)
        .and_then(|()| if durable { file.sync_all() } else { Ok(()) });
    drop(file);
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// `op`, tried again for up to half a second while it fails for a moment only (Windows: a virus
/// scanner or an indexer has the file just written open, [`sys::held_for_a_moment`]).
fn again_while_held(mut op: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_millis(500);
    loop {
        match op() {
            Err(e) if sys::held_for_a_moment(&e) && std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            done => return done,
        }
    }
}

/// Writes the lock file `dir/name` (as [`write_atomic`]) where no live process's lock file is:
/// the new file is linked to its name, which fails when one is there; a stale one there (its
/// writer gone, or this process's own) is set aside and removed, and the link tried again. Two
/// processes writing the same name at once (two bridges given one port, each bound to another
/// address) cannot both have it: the one that finds the other's refuses the port. Without hard
/// links (FAT, some network file systems: [`sys::links_unsupported`]) the file is renamed over
/// the name, as before, unless a live process's file is there (looked at just before: the rename
/// would replace it); any other failure of the link is the write's (a rename then would
/// replace whatever is there, a live process's file too).
fn write_lock_new(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    write_lock_new_with(dir, name, contents, |from, to| fs::hard_link(from, to))
}

/// [`write_lock_new`], linking with `link` (the tests' file system without hard links).
fn write_lock_new_with(
    dir: &Path,
    name: &str,
    contents: &[u8],
    link: impl Fn(&Path, &Path) -> io::Result<()>,
) -> io::Result<()> {
    let path = dir.join(name);
    let tmp = write_temp(dir, name, contents, false)?;
    let held_by = |lock: LockFile| {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "pid {}, which runs, wrote its lock file {}",
                lock.pid,
                path.display()
            ),
        )
    };
    let written = (|| {
        for _ in 0..8 {
            match again_while_held(|| link(&tmp, &path)) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) if sys::links_unsupported(&e) => {
                    let there = fs::symlink_metadata(&path).ok();
                    if let Some(lock) = there.and_then(|meta| live_lock(&path, &meta)) {
                        return Err(held_by(lock));
                    }
                    return again_while_held(|| fs::rename(&tmp, &path));
                }
                Err(e) => return Err(e),
            }
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if meta.is_dir() {
                return Err(io::Error::other(format!(
                    "{} is a directory",
                    path.display()
                )));
            }
            if let Some(lock) = live_lock(&path, &meta) {
                return Err(held_by(lock));
            }
            // Set aside, then removed: unless what was set aside is no longer the file found
            // stale (another process's, linked meanwhile), which goes back.
            let salt = rand_core::RngCore::next_u32(&mut rand_core::OsRng);
            let aside = dir.join(format!(".{name}.{}.{salt:08x}.stale", std::process::id()));
            match fs::rename(&path, &aside) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
            let moved = fs::symlink_metadata(&aside);
            if !moved.is_ok_and(|m| sys::same_file(&meta, &m)) {
                let _ = fs::hard_link(&aside, &path);
            }
            let _ = fs::remove_file(&aside);
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} kept being written by others", path.display()),
        ))
    })();
    let _ = fs::remove_file(&tmp);
    written
}

/// Whether a process with this pid exists (a process of another user counts as alive). Pids
/// that cannot name a process (0, or too large) count as alive, so their files are kept. Unix
/// asks `kill(pid, 0)`; Windows opens the process and reads whether it has exited.
///
/// ```
/// use claude_ide_bridge_runtime::lock::pid_alive;
/// assert!(pid_alive(std::process::id()));
/// assert!(pid_alive(0));
/// ```
pub fn pid_alive(pid: u32) -> bool {
    sys::pid_alive(pid)
}

/// Whether the process that wrote a lock file whose last change was at `written` may still run:
/// its pid is alive ([`pid_alive`]) and names a process started before then. A pid handed out
/// again (after a reboot, or a container's restart, which count pids from 1 again) names a
/// process started after the file was written, which is not its writer. Where the start cannot
/// be read, the pid alone decides: on Linux always (`sys::process_started` says why; a lock file
/// tells its writer there by its start instead: [`lock_writer_alive`]). The start is read from
/// `ps` on macOS and the other Unixes and `GetProcessTimes` on Windows.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use claude_ide_bridge_runtime::lock::writer_alive;
/// let me = std::process::id();
/// assert!(writer_alive(me, SystemTime::now()));
/// let long_ago = SystemTime::now() - Duration::from_secs(365 * 24 * 3600);
/// assert_eq!(writer_alive(me, long_ago), cfg!(target_os = "linux"));
/// ```
pub fn writer_alive(pid: u32, written: SystemTime) -> bool {
    // `ps` gives a start to the second: about a second either way.
    const SLACK: Duration = Duration::from_secs(2);
    if !pid_alive(pid) {
        return false;
    }
    match (sys::process_started(pid), written.checked_add(SLACK)) {
        (Some(started), Some(latest)) => started <= latest,
        _ => true,
    }
}

/// Whether the process that wrote `lock` may still run. A file with a `processStart`
/// ([`LockFile::process_start`], which the runtime writes on Linux) names one process: the pid's
/// start now must be the same (a pid handed out again has another). Without one, or where the
/// start cannot be read now, [`writer_alive`] decides with when the file was last `written`, or
/// the pid alone ([`pid_alive`]) when that is not known.
///
/// ```
/// use claude_ide_bridge::{AuthToken, LockFile};
/// use claude_ide_bridge_runtime::lock::lock_writer_alive;
/// let mut lock = LockFile::new(std::process::id(), vec![], "MyEditor", false, AuthToken::from_string("t"));
/// assert!(lock_writer_alive(&lock, None));
/// lock.process_start = Some("another boot/1".into());
/// // Another process's start: not this one's file, where the system tells starts apart.
/// assert_eq!(lock_writer_alive(&lock, None), !cfg!(target_os = "linux"));
/// ```
pub fn lock_writer_alive(lock: &LockFile, written: Option<SystemTime>) -> bool {
    process_is_writer(lock.pid, lock.process_start.as_deref(), written)
}

/// Whether process `pid` may be the one that wrote a file at `written` and named its own start
/// `start` there (as [`process_start`] gave it): the rule of [`lock_writer_alive`], for any
/// file a process keeps its pid in (the program's state file too).
///
/// ```
/// use claude_ide_bridge_runtime::lock::{process_is_writer, process_start};
/// let me = std::process::id();
/// assert!(process_is_writer(me, process_start(me).as_deref(), None));
/// assert_eq!(process_is_writer(me, Some("another boot/1"), None), !cfg!(target_os = "linux"));
/// ```
pub fn process_is_writer(pid: u32, start: Option<&str>, written: Option<SystemTime>) -> bool {
    // A dead pid writes nothing, whatever `/proc` says (one mounted for another pid namespace
    // may still show a process of that pid); nor does one that has ended and waits to be reaped
    // (a bridge killed whose parent reaps late: its lock file took the port from its restart).
    if !pid_alive(pid) || sys::ended_unreaped(pid) {
        return false;
    }
    if let (Some(theirs), Some(now)) = (start, sys::process_start(pid)) {
        return theirs == now;
    }
    match written {
        Some(written) => writer_alive(pid, written),
        None => true,
    }
}

/// Process `pid`'s start as a lock file's `processStart` names it ([`LockFile::process_start`]):
/// on Linux `<boot id>/<start in clock ticks after boot>`; `None` on the other systems (which
/// compare starts with a file's time instead: [`writer_alive`]) and when it cannot be read.
///
/// ```
/// use claude_ide_bridge_runtime::lock::process_start;
/// let me = std::process::id();
/// assert_eq!(process_start(me).is_some(), cfg!(target_os = "linux"));
/// assert_eq!(process_start(me), process_start(me));
/// ```
pub fn process_start(pid: u32) -> Option<String> {
    sys::process_start(pid)
}

/// [`lock_writer_alive`] for the lock file `meta` describes.
fn file_writer_alive(lock: &LockFile, meta: &fs::Metadata) -> bool {
    lock_writer_alive(lock, meta.modified().ok())
}

/// The text written for `content`: with this process's start ([`LockFile::process_start`]) when
/// it names this process without one, and the system keeps such a start.
fn text_of(content: &LockFile) -> String {
    if content.pid == std::process::id() && content.process_start.is_none() {
        if let Some(start) = sys::process_start(content.pid) {
            let mut stamped = content.clone();
            stamped.process_start = Some(start);
            return stamped.to_json();
        }
    }
    content.to_json()
}

/// Removes this host's stale lock files from `dir`: files named `<port>.lock`, owned by us, with
/// this `ide_name`, a writer that is gone ([`lock_writer_alive`]: its pid not alive, or handed
/// out again since) and a port nothing answers on (a pid of another pid namespace looks dead from
/// here). A live bridge's file is never touched, and one that cannot be removed (read-only on
/// Windows, or its folder's) is left, the others still removed. And the temporary files a bridge
/// killed while writing its lock file left (`.<port>.lock.<pid>.*.tmp`, `.stale`: a copy of
/// a lock file, its token in it), ours, whose process is gone or that are older than an hour (no
/// write takes that long; a pid handed out again). Returns the removed paths; an error only when
/// `dir` cannot be listed.
pub fn remove_stale_locks(dir: &Path, ide_name: &str) -> io::Result<Vec<PathBuf>> {
    remove_stale_locks_with(dir, ide_name, |path| fs::remove_file(path))
}

/// [`remove_stale_locks`], removing each file with `remove`.
fn remove_stale_locks_with(
    dir: &Path,
    ide_name: &str,
    remove: impl Fn(&Path) -> io::Result<()>,
) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for entry in fs::read_dir(dir)? {
        // Ended at an error: a listing that failed may not end by itself.
        let Ok(entry) = entry else { break };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(pid) = writer_of_temp(name) {
            let path = entry.path();
            let ours = fs::symlink_metadata(&path)
                .is_ok_and(|m| m.is_file() && sys::owned_by_me(&m) && left_behind(pid, &m));
            if ours && remove(&path).is_ok() {
                removed.push(path);
            }
            continue;
        }
        let Some(port) = port_from_lock_name(name) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() || !sys::owned_by_me(&meta) {
            continue;
        }
        let Some(lock) = read_lock(&path) else {
            continue;
        };
        // Our own pid on a file this process did not write: a previous run's, in a container
        // where every run is pid 1 (it would never pass for dead, and stay for good).
        let stale = if lock.pid == std::process::id() {
            !written_here(&path)
        } else {
            !file_writer_alive(&lock, &meta)
        };
        // A pid that looks dead may be another pid namespace's (a bridge in a container sharing
        // this folder, or this one's host): its port still answers, and its file stays.
        if lock.ide_name == ide_name && stale && !port_answers(port) {
            // Still the file that was read: a bridge started meanwhile on the same port renames
            // its live file into place, and that one stays.
            if !still_the_file(&path, &meta) {
                continue;
            }
            // Else claude, or another bridge, removed it first, or it cannot be: left as it is.
            if remove(&path).is_ok() {
                removed.push(path);
            }
        }
    }
    Ok(removed)
}

/// Whether `path` still names the file whose metadata (`symlink_metadata`) was `read`: a file
/// renamed or linked into its place since (another bridge's live lock file) is another one. For a
/// removal decided on what was read: the window left between this check and the removal is the
/// removal's system call.
///
/// ```
/// use claude_ide_bridge_runtime::lock::still_the_file;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("7.lock");
/// std::fs::write(&path, "old").unwrap();
/// let read = std::fs::symlink_metadata(&path).unwrap();
/// assert!(still_the_file(&path, &read));
/// std::fs::write(dir.path().join("new"), "new").unwrap();
/// std::fs::rename(dir.path().join("new"), &path).unwrap();
/// assert!(!still_the_file(&path, &read));
/// ```
pub fn still_the_file(path: &Path, read: &fs::Metadata) -> bool {
    fs::symlink_metadata(path).is_ok_and(|now| sys::same_file(&now, read))
}

/// The pid in the name of a lock file's temporary file ([`write_temp`]'s
/// `.<port>.lock.<pid>.<seq>.<salt>.tmp`) or of one set aside to be removed ([`write_lock_new`]'s
/// `.<port>.lock.<pid>.<salt>.stale`); `None` for any other name.
fn writer_of_temp(name: &str) -> Option<u32> {
    let name = name.strip_prefix('.')?;
    let (rest, parts) = match name.strip_suffix(".tmp") {
        Some(rest) => (rest, 3),
        None => (name.strip_suffix(".stale")?, 2),
    };
    let mut fields = rest.rsplitn(parts + 1, '.');
    let fields: Vec<&str> = fields.by_ref().collect();
    let (lock_name, pid) = (fields.get(parts)?, fields.get(parts - 1)?);
    port_from_lock_name(lock_name)?;
    pid.parse().ok()
}

/// Whether a temporary file of pid `pid`'s ([`writer_of_temp`]) was left behind: its process is
/// gone, or (a pid handed out again, this process's own in a container where every run is pid
/// 1) it is older than an hour.
fn left_behind(pid: u32, meta: &fs::Metadata) -> bool {
    let old = (meta.modified().ok())
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age > Duration::from_secs(3600));
    old || (pid != std::process::id() && !pid_alive(pid))
}

/// Whether something accepts connections on `port` of this host's loopback addresses.
fn port_answers(port: u16) -> bool {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
    [Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()]
        .into_iter()
        .any(|ip| answers(SocketAddr::new(ip, port)))
}

/// Whether something accepts a connection at `addr` within 200 ms (a refused connection is slow
/// on Windows: it is retried for about 2 s).
pub(crate) fn answers(addr: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// The most bytes of a lock file read: one of ours is a few hundred; a larger one is not a lock
/// file to trust.
pub const MAX_LOCK_FILE_BYTES: u64 = 64 * 1024;

/// The text of the lock file at `path`, at most [`MAX_LOCK_FILE_BYTES`] of it; an error for what
/// is not a regular file (a FIFO planted there is refused at once, not waited on for a writer).
///
/// ```
/// use claude_ide_bridge_runtime::lock::{read_lock_text, MAX_LOCK_FILE_BYTES};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("1234.lock");
/// std::fs::write(&path, "x".repeat(100_000)).unwrap();
/// assert_eq!(read_lock_text(&path).unwrap().len() as u64, MAX_LOCK_FILE_BYTES);
/// ```
pub fn read_lock_text(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    let file = sys::open_to_read(path)?;
    // A FIFO or a device in its place would make the read wait, or never end.
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    file.take(MAX_LOCK_FILE_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// The lock file at `path`, read ([`read_lock_text`]) and parsed.
fn read_lock(path: &Path) -> Option<LockFile> {
    LockFile::parse(&read_lock_text(path).ok()?).ok()
}

/// Whether the lock file at `path` (a regular file, not followed through a link) names this
/// process as its writer.
pub(crate) fn written_by_this_process(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
        && read_lock(path).is_some_and(|lock| lock.pid == std::process::id())
}

/// The pid of a live process, not this one, whose lock file for `port` is in `dir` (its writer:
/// [`lock_writer_alive`]): that port is served, on another address (a bridge bound to `127.0.0.2` or
/// `::1` gets the same port as one on `127.0.0.1`), and its lock file is not ours to write over
/// or remove.
pub fn port_held(dir: &Path, port: u16) -> Option<u32> {
    lock_held(dir, port).map(|lock| lock.pid)
}

/// As [`port_held`], the lock file itself: whose it is (its token, its folders, its IDE's name).
pub fn lock_held(dir: &Path, port: u16) -> Option<LockFile> {
    let path = dir.join(lock_file_name(port));
    let meta = fs::symlink_metadata(&path).ok()?;
    live_lock(&path, &meta)
}

/// The lock file at `path` (`meta`: its own, not a link's target) when another process that
/// still runs wrote it. One of another user's is none (only root can put one in this user's
/// private folder, and [`remove_stale_locks`] passes over it too): it is not trusted to hold a
/// port, which would send this workspace's bridge to a new port and token at every start.
fn live_lock(path: &Path, meta: &fs::Metadata) -> Option<LockFile> {
    if !meta.is_file() || !sys::owned_by_me(meta) {
        return None;
    }
    let lock = read_lock(path)?;
    (lock.pid != std::process::id() && file_writer_alive(&lock, meta)).then_some(lock)
}

/// The lock files this process has written and not removed (by [`LockGuard`]), whatever their
/// signal cleanup: [`remove_stale_locks`] takes a file with this process's pid for stale only when
/// it is not one of them.
static WRITTEN: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn written_here(path: &Path) -> bool {
    let written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    written.iter().any(|p| p == path)
}

/// A written lock file: rewritten with [`LockGuard::update`], removed by [`LockGuard::remove`]
/// or on drop.
#[derive(Debug)]
pub struct LockGuard {
    dir: PathBuf,
    name: String,
    path: PathBuf,
    registered: bool,
    removed: bool,
    /// The file as written: another process's file renamed over it since is not touched.
    written: Option<fs::Metadata>,
}

impl LockGuard {
    /// Checks `dir` (see [`ensure_lock_dir`]) and writes `<port>.lock` there, unless a live
    /// process's lock file is there (another server of that port, bound to another address):
    /// then `AddrInUse`, and its file is left (a stale one is replaced). With
    /// `signal_cleanup`, the path is registered for removal when the process is told to stop
    /// (SIGINT/SIGTERM; Ctrl-C, Ctrl-Break, console closed on Windows: [`signals::register`]),
    /// which removes it when the file there names this process (`content`'s pid is this
    /// process's, as the runtimes write it: [`signals::remove_all`]).
    pub fn create(
        dir: &Path,
        port: u16,
        content: &LockFile,
        signal_cleanup: bool,
    ) -> io::Result<LockGuard> {
        ensure_lock_dir(dir)?;
        let name = lock_file_name(port);
        let path = dir.join(&name);
        if signal_cleanup {
            signals::register(&path)?;
        }
        // Before it exists, like the signal registration: never a moment as somebody's stale file.
        WRITTEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path.clone());
        let mut guard = LockGuard {
            dir: dir.to_path_buf(),
            name,
            path,
            registered: signal_cleanup,
            removed: false,
            written: None,
        };
        write_lock_new(&guard.dir, &guard.name, text_of(content).as_bytes())?;
        guard.written = fs::symlink_metadata(&guard.path).ok();
        Ok(guard)
    }

    /// Whether the file at the path is still the one this guard wrote.
    fn still_ours(&self) -> bool {
        match (&self.written, fs::symlink_metadata(&self.path)) {
            (Some(written), Ok(now)) => sys::same_file(written, &now),
            _ => false,
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rewrites the file atomically with new content (for example new workspace folders). A
    /// file another process removed (a claude taking it for stale) is written anew, as
    /// [`LockGuard::restore`] writes it; one another process's file replaced is left to it (an
    /// error).
    pub fn update(&mut self, content: &LockFile) -> io::Result<()> {
        if self.removed {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the lock file was removed",
            ));
        }
        check_lock_dir(&self.dir)?;
        if self.restore(content)? {
            return Ok(());
        }
        if !self.still_ours() {
            return Err(io::Error::other(format!(
                "{} was replaced by another process's lock file: left to it",
                self.path.display()
            )));
        }
        write_atomic(&self.dir, &self.name, text_of(content).as_bytes())?;
        self.written = fs::symlink_metadata(&self.path).ok();
        Ok(())
    }

    /// Writes the file again when it is gone: removed by another process, such as a `claude`
    /// that takes every lock file whose pid it cannot see for stale (one in a container sharing
    /// this folder). Returns whether it wrote. The directory must still be there, and is checked
    /// as [`ensure_lock_dir`] checks it: one removed is not made again here (a running server's
    /// watch makes it again once the folder holding it has been quiet for a while, so that an
    /// `rm -rf` of that folder under way does not fail on it: docs/protocol.md). A file
    /// there (this one, or another process's renamed over it) is left as it is, and so is a
    /// removed guard.
    ///
    /// ```
    /// use claude_ide_bridge::{AuthToken, LockFile};
    /// use claude_ide_bridge_runtime::lock::LockGuard;
    ///
    /// let dir = std::env::temp_dir().join(format!("lock-restore-doc-{}", std::process::id()));
    /// let token = AuthToken::from_string("t".repeat(43));
    /// let content = LockFile::new(std::process::id(), vec!["/w".into()], "MyEditor", false, token);
    /// let mut guard = LockGuard::create(&dir, 41235, &content, false)?;
    /// assert!(!guard.restore(&content)?);
    /// std::fs::remove_file(guard.path())?;
    /// assert!(guard.restore(&content)?);
    /// assert!(guard.path().exists());
    /// // Its folder removed: `restore` does not make it again.
    /// std::fs::remove_file(guard.path())?;
    /// std::fs::remove_dir(&dir)?;
    /// assert!(guard.restore(&content).is_err());
    /// assert!(!dir.exists());
    /// guard.remove()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn restore(&mut self, content: &LockFile) -> io::Result<bool> {
        if self.removed {
            return Ok(false);
        }
        match fs::symlink_metadata(&self.path) {
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        check_lock_dir(&self.dir)?;
        write_lock_new(&self.dir, &self.name, text_of(content).as_bytes())?;
        self.written = fs::symlink_metadata(&self.path).ok();
        Ok(true)
    }

    /// The directory the file is in.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file's name in its directory.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Removes the file (once; later calls do nothing).
    pub fn remove(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        if self.registered {
            signals::unregister(&self.path);
        }
        // Another process's file renamed over ours since (a bridge on the same port and
        // another address) is its own, and stays.
        let removed = if !self.still_ours() {
            Ok(())
        } else {
            match fs::remove_file(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        };
        let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = written.iter().position(|p| *p == self.path) {
            written.swap_remove(i);
        }
        removed
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO where a lock file was expected (planted by whoever could write the folder) is
    /// refused at once: opening it to read waited for a writer that never came, and the start
    /// or `doctor` that looked hung.
    #[cfg(unix)]
    #[test]
    fn a_fifo_in_place_of_a_lock_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("5.lock");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        let looked = dir.path().to_owned();
        std::thread::spawn(move || {
            let read = read_lock_text(&looked.join("5.lock")).map_err(|e| e.kind());
            let _ = tx.send((read, port_held(&looked, 5)));
        });
        let (read, held) = rx.recv_timeout(Duration::from_secs(10)).expect("it waited");
        assert_eq!(read, Err(io::ErrorKind::InvalidData));
        assert_eq!(held, None);
    }

    /// A lock file renamed over ours by another process (a bridge on the same port and another
    /// address) is its own: our update refuses to write over it, and our removal leaves it (it
    /// removed it, and claude lost the bridge still running).
    #[test]
    fn a_lock_file_replaced_by_another_process_is_left_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let token = || claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let ours = LockFile::new(std::process::id(), vec!["/w".into()], "Vim", false, token());
        let mut guard = LockGuard::create(dir.path(), 3, &ours, false).unwrap();
        guard.update(&ours).unwrap();
        let theirs = LockFile::new(1, vec!["/x".into()], "Vim", false, token());
        write_atomic(dir.path(), "3.lock", theirs.to_json().as_bytes()).unwrap();
        assert!(guard.update(&ours).is_err());
        guard.remove().unwrap();
        let left = fs::read_to_string(dir.path().join("3.lock")).unwrap();
        assert_eq!(LockFile::parse(&left).unwrap().pid, 1);
    }

    /// An update while the file is gone (another process removed it, a claude taking it for
    /// stale, and the watch has not written it again yet) writes it anew with the new content:
    /// it was refused as "replaced by another process's lock file", the folders changed all the
    /// same.
    #[test]
    fn an_update_after_another_process_removed_the_file_writes_it_anew() {
        let dir = tempfile::tempdir().unwrap();
        let token = || claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let me = std::process::id();
        let ours = LockFile::new(me, vec!["/w".into()], "Vim", false, token());
        let mut guard = LockGuard::create(dir.path(), 4, &ours, false).unwrap();
        fs::remove_file(dir.path().join("4.lock")).unwrap();
        let moved = LockFile::new(me, vec!["/w2".into()], "Vim", false, token());
        guard.update(&moved).unwrap();
        let now = fs::read_to_string(dir.path().join("4.lock")).unwrap();
        assert_eq!(LockFile::parse(&now).unwrap().workspace_folders, ["/w2"]);
        // Ours again: the next update rewrites it, and the removal takes it.
        guard.update(&ours).unwrap();
        guard.remove().unwrap();
        assert!(!dir.path().join("4.lock").exists());
    }

    /// A child of this test binary that waits ([`a_child_that_waits`]) until it is killed, to name
    /// in a lock file, and a port nothing answers on.
    fn waiting_child_and_port() -> (std::process::Child, u16) {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lock::tests::a_child_that_waits",
                "--ignored",
                "--nocapture",
            ])
            .env("CLAUDE_IDE_BRIDGE_TEST_WAIT", "1")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        (child, port)
    }

    /// Run as a child by the tests below: a process to name in a lock file, until it is killed.
    #[test]
    #[ignore = "the child of the tests below"]
    fn a_child_that_waits() {
        if std::env::var_os("CLAUDE_IDE_BRIDGE_TEST_WAIT").is_some() {
            std::thread::sleep(Duration::from_secs(60));
        }
    }

    /// A lock file is written only where no live process's is: one of a running process
    /// (another server of the port, bound to another address, that wrote it past the start's
    /// check) refuses the write, `AddrInUse`, and is left as it was; once that process is gone,
    /// its file is stale and replaced. Nothing else is left in the folder.
    #[test]
    fn a_lock_file_is_not_written_over_a_live_processs() {
        let (mut child, port) = waiting_child_and_port();
        let pid = child.id();
        let dir = tempfile::tempdir().unwrap();
        let token = claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let mut theirs = LockFile::new(pid, vec!["/w".into()], "Vim", false, token.clone());
        theirs.process_start = process_start(pid);
        let path = dir.path().join(lock_file_name(port));
        fs::write(&path, theirs.to_json()).unwrap();
        let me = std::process::id();
        let ours = LockFile::new(me, vec!["/w".into()], "Vim", false, token);
        let e = LockGuard::create(dir.path(), port, &ours, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert_eq!(read_lock(&path).unwrap().pid, pid);
        child.kill().unwrap();
        child.wait().unwrap();
        let mut guard = LockGuard::create(dir.path(), port, &ours, false).unwrap();
        assert_eq!(read_lock(&path).unwrap().pid, me);
        let names: Vec<_> = (fs::read_dir(dir.path()).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [lock_file_name(port)]);
        guard.remove().unwrap();
    }

    /// On a file system without hard links (FAT, some network ones: the link fails with `EPERM`),
    /// the lock file is renamed into place, but not over a live process's: that was replaced
    /// (two bridges given one port on two addresses), and the other's claude lost it.
    #[test]
    #[cfg(unix)]
    fn without_hard_links_a_live_processs_lock_file_is_not_renamed_over() {
        let (mut child, port) = waiting_child_and_port();
        let dir = tempfile::tempdir().unwrap();
        let token = claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let mut theirs = LockFile::new(child.id(), vec!["/w".into()], "Vim", false, token.clone());
        theirs.process_start = process_start(child.id());
        let name = lock_file_name(port);
        let path = dir.path().join(&name);
        fs::write(&path, theirs.to_json()).unwrap();
        let no_links = |_: &Path, _: &Path| Err(io::Error::from_raw_os_error(1));
        let ours = LockFile::new(std::process::id(), vec!["/w".into()], "Vim", false, token);
        let write = || write_lock_new_with(dir.path(), &name, ours.to_json().as_bytes(), no_links);
        let e = write().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert_eq!(read_lock(&path).unwrap().pid, child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        write().unwrap();
        assert_eq!(read_lock(&path).unwrap().pid, std::process::id());
    }

    /// Another user's lock file in this user's folder (only root can put one there) does not
    /// hold its port, live pid or not: it is written over.
    #[test]
    #[cfg(unix)]
    fn another_users_lock_file_holds_no_port() {
        let (mut child, port) = waiting_child_and_port();
        let dir = tempfile::tempdir().unwrap();
        let token = claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let mut theirs = LockFile::new(child.id(), vec!["/w".into()], "Vim", false, token.clone());
        theirs.process_start = process_start(child.id());
        let path = dir.path().join(lock_file_name(port));
        fs::write(&path, theirs.to_json()).unwrap();
        assert_eq!(port_held(dir.path(), port), Some(child.id()), "ours: held");
        // `nobody`; only root may give a file away (anyone else: nothing to check here).
        if std::os::unix::fs::chown(&path, Some(65534), Some(65534)).is_err() {
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        }
        assert_eq!(port_held(dir.path(), port), None);
        let ours = LockFile::new(std::process::id(), vec!["/w".into()], "Vim", false, token);
        let mut guard = LockGuard::create(dir.path(), port, &ours, false).unwrap();
        assert_eq!(read_lock(&path).unwrap().pid, std::process::id());
        guard.remove().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A lock file whose pid names a process started after the file was written (the pid was
    /// handed out again: a reboot, a container restarted) is stale, and does not hold its port;
    /// the same pid on a file written after that process started is its own, and does.
    /// (Not on Linux, which tells by the file's `processStart`: the test below.)
    #[test]
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn a_pid_handed_out_again_is_not_the_writer() {
        let (mut child, port) = waiting_child_and_port();
        let pid = child.id();
        let dir = tempfile::tempdir().unwrap();
        let token = claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let lock = LockFile::new(pid, vec!["/w".into()], "Vim", false, token);
        let path = dir.path().join(lock_file_name(port));
        fs::write(&path, lock.to_json()).unwrap();
        assert_eq!(
            port_held(dir.path(), port),
            Some(pid),
            "written after the start"
        );
        assert!(remove_stale_locks(dir.path(), "Vim").unwrap().is_empty());
        let long_ago = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        assert!(pid_alive(pid));
        assert!(!writer_alive(pid, long_ago));
        assert_eq!(
            port_held(dir.path(), port),
            None,
            "written before the start"
        );
        // One that cannot be removed is left, and the others are still removed.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = dir
            .path()
            .join(lock_file_name(free.local_addr().unwrap().port()));
        drop(free);
        fs::copy(&path, &other).unwrap();
        fs::File::options()
            .write(true)
            .open(&other)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let refused = |p: &Path| {
            if p == path {
                Err(io::Error::from(io::ErrorKind::PermissionDenied))
            } else {
                fs::remove_file(p)
            }
        };
        assert_eq!(
            remove_stale_locks_with(dir.path(), "Vim", refused).unwrap(),
            [other]
        );
        assert!(path.exists());
        assert_eq!(remove_stale_locks(dir.path(), "Vim").unwrap(), [path]);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Linux: the file a guard writes names this process's start; one whose pid names a process
    /// with another start (the pid handed out again: a reboot, a container restarted) is stale,
    /// and does not hold its port, whenever it was written; with the process's own start, it
    /// does. A file without a start (another host's) goes by the pid alone.
    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn a_pid_handed_out_again_is_not_the_writer_on_linux() {
        let dir = tempfile::tempdir().unwrap();
        let token = || claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let me = LockFile::new(std::process::id(), vec!["/w".into()], "Vim", false, token());
        let mut guard = LockGuard::create(dir.path(), 5, &me, false).unwrap();
        let written = LockFile::parse(&fs::read_to_string(guard.path()).unwrap()).unwrap();
        let mine = sys::process_start(std::process::id()).expect("/proc tells");
        assert_eq!(written.process_start.as_deref(), Some(&*mine));
        guard.remove().unwrap();

        let (mut child, port) = waiting_child_and_port();
        let pid = child.id();
        let path = dir.path().join(lock_file_name(port));
        // (Perhaps the same as this process's: two starts within a clock tick.)
        let theirs = sys::process_start(pid).expect("/proc tells");
        let mut lock = LockFile::new(pid, vec!["/w".into()], "Vim", false, token());
        let (boot, ticks) = theirs.rsplit_once('/').unwrap();
        let ticks: u64 = ticks.parse().unwrap();
        for (start, held) in [
            (Some(theirs.clone()), true),
            (None, true),
            (Some(format!("{boot}/{}", ticks + 1)), false),
            (Some(format!("another-boot/{ticks}")), false),
        ] {
            lock.process_start = start.clone();
            fs::write(&path, lock.to_json()).unwrap();
            assert_eq!(
                port_held(dir.path(), port),
                held.then_some(pid),
                "{start:?}"
            );
            let removed = remove_stale_locks(dir.path(), "Vim").unwrap();
            assert_eq!(removed.is_empty(), held, "{start:?}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A lock file with this process's pid that this process did not write (a previous run's,
    /// in a container where each run is pid 1) is stale; one it wrote is not.
    #[test]
    fn our_pid_on_a_file_we_did_not_write_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let token = claude_ide_bridge::AuthToken::from_string("t".repeat(43));
        let lock = LockFile::new(std::process::id(), vec!["/w".into()], "Vim", false, token);
        fs::write(dir.path().join("1.lock"), lock.to_json()).unwrap();
        let mut ours = LockGuard::create(dir.path(), 2, &lock, false).unwrap();
        let removed = remove_stale_locks(dir.path(), "Vim").unwrap();
        assert_eq!(removed, [dir.path().join("1.lock")]);
        assert!(ours.path().exists());
        ours.remove().unwrap();
        assert!(!written_here(&dir.path().join("2.lock")));
    }

    /// The temporary files of a bridge killed while it wrote its lock file (a copy of the lock
    /// file, its token in it) are removed with the stale lock files: those of a process gone,
    /// and those older than an hour (a pid handed out again); a live process's new one, and any
    /// other name, stay.
    #[test]
    fn temporary_files_a_killed_writer_left_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new(if cfg!(windows) { "cmd" } else { "true" })
            .args(if cfg!(windows) {
                &["/c", "exit"][..]
            } else {
                &[][..]
            })
            .spawn()
            .unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let me = std::process::id();
        let names = [
            (format!(".5.lock.{dead}.0.0abc1234.tmp"), true),
            (format!(".5.lock.{dead}.0abc1234.stale"), true),
            (format!(".5.lock.{me}.3.0abc1234.tmp"), false),
            (format!(".5.lock.{me}.4.0abc1234.tmp"), true),
            (format!(".x.lock.{dead}.0.0abc1234.tmp"), false),
            (format!("notes.{dead}.0.0abc1234.tmp"), false),
        ];
        for (name, _) in &names {
            fs::write(dir.path().join(name), "{}").unwrap();
        }
        let long_ago = SystemTime::now() - Duration::from_secs(7200);
        fs::File::options()
            .write(true)
            .open(dir.path().join(&names[3].0))
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let mut removed = remove_stale_locks(dir.path(), "Vim").unwrap();
        removed.sort();
        let mut expected: Vec<PathBuf> = (names.iter())
            .filter(|(_, gone)| *gone)
            .map(|(n, _)| dir.path().join(n))
            .collect();
        expected.sort();
        assert_eq!(removed, expected);
        for (name, gone) in &names {
            assert_eq!(dir.path().join(name).exists(), !gone, "{name}");
        }
    }
}
