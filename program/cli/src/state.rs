//! The port and auth token a workspace's bridge had, kept for its next start (issue 32, item 2).
//!
//! `claude` holds on to the port and token of the lock file it connected to, and retries them for
//! about 17 s after losing the bridge (docs/e2e.md). A bridge restarted for the same workspace
//! folders therefore comes back on the same port with the same token, read from a state file of
//! this user's: the client's own retry reconnects, without `/ide`.
//!
//! One file per set of workspace folders, `<state dir>/workspaces/<hash>.json` (where the state
//! dir is, per platform: [`state_dir`]), mode 0600 in a 0700 folder, written atomically. It holds a
//! secret and comes from the disk, so it is read as any untrusted file: bounded in size, refused
//! unless it is a regular file of this user's that nobody else can read, never followed through a
//! symbolic link, and checked field by field. On Windows the folder is under `%LOCALAPPDATA%`,
//! private by the profile's access list, and a reparse point (link or junction) in the file's or
//! the folder's place is refused (`crate::sys`). A file refused for any reason is reported and
//! replaced by a fresh port and token.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use claude_ide_bridge::AuthToken;
use serde::{Deserialize, Serialize};

pub use crate::sys::state_dir;

/// A state file bigger than this is refused (a few workspace folders fit many times over).
pub const MAX_STATE_BYTES: u64 = 64 * 1024;

/// How long a state file stays unwritten before [`Store::prune_gone`] may remove it: a folder on
/// a drive that is not mounted today keeps its port and token for a month.
pub const PRUNE_AFTER: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The longest lock-file folder a state file names ([`Saved::lock_dir`]) that is looked in.
const MAX_LOCK_DIR_BYTES: usize = 4096;

/// The most state files one [`Store::prune_gone`] looks at.
const PRUNE_LOOKS: usize = 1000;

/// What a bridge keeps for its workspace's next start.
#[derive(Debug, Clone)]
pub struct Saved {
    /// The port it listened on.
    pub port: u16,
    /// Its auth token.
    pub token: AuthToken,
    /// Its process id (a later bridge that finds the port taken by this live process leaves the
    /// file to it).
    pub pid: u32,
    /// Its start, where the system names one ([`lock::process_start`]): with the pid, it tells
    /// the bridge from a later process given its pid.
    ///
    /// [`lock::process_start`]: claude_ide_bridge_runtime::lock::process_start
    pub process_start: Option<String>,
    /// The folder of its lock file, when it had one: a later bridge with another (another
    /// `CLAUDE_CONFIG_DIR`, `--lock-dir`) looks there too for whether it still serves, which it
    /// took for a bridge still stopping, waited 15 s for, and then took its state file from.
    pub lock_dir: Option<PathBuf>,
}

/// How long [`Kept::port_taken`] waits for the lock file of a process that holds the kept port:
/// a bridge started at the same moment writes it once it has bound the port (a few milliseconds;
/// more on a busy machine, or where a virus scanner looks at each new file), and one told apart
/// from another program's server too soon would keep this workspace's token beside it.
const LOCK_FILE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// How long a start waits for the kept port when this workspace's last bridge is still stopping
/// ([`Kept::stopping_bridge`]): the longest such a stop takes (an editor, the language servers,
/// the jobs and stdout waited for, 2 s each, then the runtime's own stop), and within the 17 s
/// claude goes on retrying the old port.
pub const STOPPING_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a start waits for another start of the same workspace to be done with the state
/// file ([`Store::starting`]): longer than [`STOPPING_WAIT`], which that start may spend waiting
/// for the last bridge to stop.
pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// How long a start waits for another start quietly ([`Store::starting`]) before it says so.
const START_WAIT_SAID: std::time::Duration = std::time::Duration::from_secs(1);

/// How old a temporary file left in the state folder is before [`Store::prune_gone`] removes it:
/// a save renames its own within milliseconds; one left is a save killed halfway (it holds a
/// token).
const LEFT_TEMP_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// The file as written (`version` 1).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    version: u32,
    workspace_folders: Vec<String>,
    port: u16,
    auth_token: String,
    pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock_dir: Option<String>,
}

/// Why a state file was not used.
#[derive(Debug)]
pub enum Refused {
    /// It is a symbolic link (never followed).
    Symlink,
    /// It is not a regular file.
    NotAFile,
    /// Another user owns it (Unix: Windows has no owner check, see `crate::sys`).
    #[cfg_attr(windows, allow(dead_code))]
    NotOurs,
    /// Group or others may read or write it (its mode; Unix: Windows has no mode bits).
    #[cfg_attr(windows, allow(dead_code))]
    OpenToOthers(u32),
    /// Larger than [`MAX_STATE_BYTES`] (its size).
    TooBig(u64),
    /// Not the JSON this program writes.
    Garbage(String),
    /// Written for other workspace folders (two sets of folders with one hash).
    OtherWorkspace,
    /// It could not be read.
    Unreadable(io::Error),
    /// Its folder is not one to keep state in (open to others, another user's, a link), or
    /// cannot be looked at: nothing is read from it or written to it.
    Folder(io::Error),
}

/// Reads a state file already opened and checked (`len`: the size its metadata gave): at most
/// `max` bytes, refused as [`Refused::TooBig`] when it is larger, by its metadata or by what it
/// gave (it may have grown since).
pub(crate) fn read_bounded(file: std::fs::File, len: u64, max: u64) -> Result<Vec<u8>, Refused> {
    use std::io::Read;
    if len > max {
        return Err(Refused::TooBig(len));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(Refused::Unreadable)?;
    if bytes.len() as u64 > max {
        return Err(Refused::TooBig(bytes.len() as u64));
    }
    Ok(bytes)
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Symlink => f.write_str("it is a symbolic link"),
            Refused::NotAFile => f.write_str("it is not a regular file"),
            Refused::NotOurs => f.write_str("it is owned by another user"),
            Refused::OpenToOthers(mode) => {
                write!(f, "its mode {mode:o} lets group or others at it")
            }
            Refused::TooBig(n) => write!(f, "it has {n} bytes, more than {MAX_STATE_BYTES}"),
            Refused::Garbage(why) => write!(f, "it is not a state file: {why}"),
            Refused::OtherWorkspace => f.write_str("it is another workspace's"),
            Refused::Unreadable(e) => write!(f, "it cannot be read: {e}"),
            Refused::Folder(e) => write!(f, "its folder is not used: {e}"),
        }
    }
}

/// The folder state files are kept in, when it exists and is not one to keep them in (open to
/// others, another user's, a link; [`Refused::Folder`]), and why: every start then takes a new
/// port and token (`doctor` says so).
pub fn folder_refused() -> Option<(PathBuf, io::Error)> {
    let dir = state_dir()?.join("workspaces");
    match crate::sys::check_private_dir(&dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Some((dir, e)),
        _ => None,
    }
}

/// What keeps the state file of the workspace `folder` (served alone) from serving its next
/// start, for `doctor`: the file, and why. A file a start would refuse (open to others, not
/// this user's, not a state file: replaced by a new port and token then), or a folder it
/// cannot be written in (not kept at all). A folder refused as a whole is
/// [`folder_refused`]'s to say.
pub fn workspace_problem(folder: &Path) -> Option<(PathBuf, String)> {
    let (native, posix) = crate::folder_forms(&[folder.to_path_buf()]).ok()?;
    let key = key_folders(&native, &posix).ok()?;
    let store = Store::new(&state_dir()?, &key);
    match store.load() {
        Err(Refused::Folder(_)) => return None,
        Err(why) => {
            return Some((
                store.path(),
                format!("is not used ({why}): the next start takes a new port and token"),
            ))
        }
        Ok(_) => {}
    }
    // Written by the next start, made where missing: a folder that takes no file (read-only,
    // on a read-only mount), or where it would be made, keeps nothing, which a start says only
    // then. (A folder made and removed at once tells.)
    let probe_in = store.dir.ancestors().find(|a| a.is_dir())?;
    let probe = tempfile::Builder::new()
        .prefix(".claude-ide-bridge-doctor")
        .tempdir_in(probe_in);
    match probe {
        Ok(_) => None,
        Err(e) => Some((
            probe_in.to_path_buf(),
            format!("takes no file ({e}): no port or token is kept for the next start"),
        )),
    }
}

/// The folders that name the state file of the workspace folders `native` (`posix`: the same
/// in the engine's form), as [`crate::sys::state_folders`] gives them; `Err` with the first
/// folder whose name is not Unicode, which has no state file ([`Kept::load`]).
pub fn key_folders<'a>(native: &'a [PathBuf], posix: &[String]) -> Result<Vec<String>, &'a Path> {
    match native.iter().find(|f| f.to_str().is_none()) {
        Some(odd) => Err(odd),
        None => Ok(crate::sys::state_folders(native, posix)),
    }
}

/// One start of a workspace's bridge, between its reading of the state file and its save of what
/// it keeps ([`Kept::started`]), by then with its port bound and its lock file written: another
/// start of the same workspace waits for it ([`Store::starting`]), and then reads this one's
/// port and token and finds its lock file. Two bridges started at the same moment both read the
/// same file otherwise: each took a port and token of its own when the kept port was taken by
/// another program, each wrote them as kept, and the one whose save came first had said "kept"
/// for nothing (its claude reconnected with `/ide` after its next restart); one started with
/// `--port` looked for the other's lock file before it was written and served beside it with the
/// same token. An advisory lock (`flock`, `LockFileEx`) on `<hash>.start` in the state folder,
/// given back when this is dropped (or the process ends, however).
#[derive(Debug)]
pub struct Starting {
    _locked: std::fs::File,
}

/// Why [`Store::starting`] holds no lock: the start goes on without (as before the lock).
#[derive(Debug)]
pub enum Unserialized {
    /// The state folder is not used, or the lock file cannot be made or locked (a file system
    /// without locks): nothing to wait for there.
    NoLock,
    /// Another start of the workspace held it for longer than it was waited for.
    Busy,
    /// This start was told to stop while it waited.
    Stopped,
}

/// The state file of one set of workspace folders.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    name: String,
    folders: Vec<String>,
}

impl Store {
    /// The file for `folders` (absolute POSIX strings, as [`crate::sys::state_folders`] gives
    /// them) under `base` (the program's state directory, [`state_dir`]). The folders are a set,
    /// as lock files are compared: `serve A B` and `serve B A` serve one workspace (the second
    /// took a new port and token).
    pub fn new(base: &Path, folders: &[String]) -> Store {
        let mut folders = folders.to_vec();
        folders.sort();
        folders.dedup();
        Store {
            dir: base.join("workspaces"),
            name: format!("{:016x}.json", key(&folders)),
            folders,
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// The file whose lock serializes the starts of these folders ([`Starting`]).
    fn start_path(&self) -> PathBuf {
        self.dir.join(start_name(&self.name))
    }

    /// Takes the lock of one start of these folders ([`Starting`]), waiting at most `wait` for
    /// another start to give it back; `waiting` is called once when that takes longer than a
    /// second (a start that waits for the last bridge to stop takes up to [`STOPPING_WAIT`]),
    /// and `stop` every 20 ms meanwhile: true (told to stop: Ctrl-C, SIGTERM) ends the wait.
    /// The state folder is made (0700) when missing, as a save would. The file's time is set
    /// when the lock is taken: [`Store::prune_gone`] leaves a recent one to its start.
    pub fn starting(
        &self,
        wait: std::time::Duration,
        waiting: impl FnOnce(),
        mut stop: impl FnMut() -> bool,
    ) -> Result<Starting, Unserialized> {
        use std::fs::TryLockError;
        crate::sys::private_dir(&self.dir).map_err(|_| Unserialized::NoLock)?;
        let file =
            crate::sys::open_private_file(&self.start_path()).map_err(|_| Unserialized::NoLock)?;
        let began = std::time::Instant::now();
        let mut waiting = Some(waiting);
        loop {
            match file.try_lock() {
                Ok(()) => {
                    let _ = file.set_modified(std::time::SystemTime::now());
                    return Ok(Starting { _locked: file });
                }
                Err(TryLockError::Error(_)) => return Err(Unserialized::NoLock),
                Err(TryLockError::WouldBlock) => {}
            }
            let waited = began.elapsed();
            if waited >= wait {
                return Err(Unserialized::Busy);
            }
            if waited >= START_WAIT_SAID {
                if let Some(say) = waiting.take() {
                    say();
                }
            }
            if stop() {
                return Err(Unserialized::Stopped);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// What the last bridge of these folders kept: `Ok(None)` when there is no file (or no folder
    /// for it yet), `Err` when there is one that is not used (it is replaced by the next
    /// [`Store::save`]).
    pub fn load(&self) -> Result<Option<Saved>, Refused> {
        // The folder as a save checks it: a file in a folder others may write to is not read.
        match crate::sys::check_private_dir(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Refused::Folder(e)),
            Ok(()) => {}
        }
        let bytes = match crate::sys::read_private(&self.path(), MAX_STATE_BYTES) {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e),
        };
        let file: File =
            serde_json::from_slice(&bytes).map_err(|e| Refused::Garbage(e.to_string()))?;
        if file.version != 1 {
            return Err(Refused::Garbage(format!("version {}", file.version)));
        }
        if file.port == 0 {
            return Err(Refused::Garbage("port 0".into()));
        }
        // No process has it (a pid the system cannot name counts as alive: the last bridge
        // would be waited for at every start).
        if file.pid == 0 || i32::try_from(file.pid).is_err() {
            return Err(Refused::Garbage(format!("pid {}", file.pid)));
        }
        if !token_is_well_formed(&file.auth_token) {
            return Err(Refused::Garbage("a malformed auth token".into()));
        }
        if file.workspace_folders != self.folders {
            return Err(Refused::OtherWorkspace);
        }
        Ok(Some(Saved {
            port: file.port,
            token: AuthToken::from_string(file.auth_token),
            pid: file.pid,
            // Compared as text only; a long one is no start this program wrote.
            process_start: file.process_start.filter(|s| s.len() <= 128),
            // Only looked in for `<port>.lock`; a path no folder has is none.
            lock_dir: (file.lock_dir)
                .filter(|d| d.len() <= MAX_LOCK_DIR_BYTES && Path::new(d).is_absolute())
                .map(PathBuf::from),
        }))
    }

    /// Removes the state files of workspaces that are gone: not written for
    /// [`PRUNE_AFTER`] and naming folders none of which exists any more (each holds a token;
    /// a bridge served from a temporary folder left one behind for good), with their start's
    /// lock file ([`Starting`]); and the temporary files of saves killed halfway, an hour old
    /// (each holds a token too). At most [`PRUNE_LOOKS`] files are looked at; this workspace's
    /// never; a file that cannot be read as a state file is left as it is (its own workspace's
    /// start replaces it). Returns how many state files went.
    pub fn prune_gone(&self, now: std::time::SystemTime) -> usize {
        if crate::sys::check_private_dir(&self.dir).is_err() {
            return 0;
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let older_than = |path: &Path, after: std::time::Duration| {
            std::fs::symlink_metadata(path).is_ok_and(|m| {
                m.is_file()
                    && m.modified()
                        .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > after))
            })
        };
        let own_start = start_name(&self.name);
        let mut removed = 0;
        for entry in entries.take(PRUNE_LOOKS).flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let path = entry.path();
            if name.starts_with('.') && name.ends_with(".tmp") {
                if older_than(&path, LEFT_TEMP_AFTER) {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            // A start's lock file whose workspace never saved (or was pruned by an older
            // version): as old as a state file to prune.
            if name.ends_with(".start") && name != own_start {
                let state =
                    (name.strip_suffix(".start")).map(|h| self.dir.join(format!("{h}.json")));
                let state = state.unwrap_or_default();
                if std::fs::symlink_metadata(state).is_err() && older_than(&path, PRUNE_AFTER) {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            if name == self.name || !name.ends_with(".json") || !older_than(&path, PRUNE_AFTER) {
                continue;
            }
            let Ok(Some(bytes)) = crate::sys::read_private(&path, MAX_STATE_BYTES) else {
                continue;
            };
            let Ok(file) = serde_json::from_slice::<File>(&bytes) else {
                continue;
            };
            if !file.workspace_folders.is_empty()
                && file
                    .workspace_folders
                    .iter()
                    .all(|f| crate::sys::folder_missing(f))
                && std::fs::remove_file(&path).is_ok()
            {
                let _ = std::fs::remove_file(self.dir.join(start_name(name)));
                removed += 1;
            }
        }
        removed
    }

    /// Writes `saved` (the folder created 0700 if missing, and checked; the file 0600, atomically,
    /// replacing whatever was there, a symbolic link included, without following it).
    pub fn save(&self, saved: &Saved) -> io::Result<()> {
        let file = File {
            version: 1,
            workspace_folders: self.folders.clone(),
            port: saved.port,
            auth_token: saved.token.as_str().to_owned(),
            pid: saved.pid,
            process_start: saved.process_start.clone(),
            lock_dir: (saved.lock_dir.as_ref()).and_then(|d| d.to_str().map(str::to_owned)),
        };
        let json = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
        crate::sys::private_dir(&self.dir)?;
        // An empty directory in its place (which no rename replaces) is taken away first; one
        // holding anything is the user's, and the save fails, saying so.
        let path = self.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir(&path)?;
        }
        // Synced: after a power loss the kept port and token are there, or the file is the last
        // one (an empty file would be replaced, and claude's retry lost).
        claude_ide_bridge_runtime::lock::write_atomic_durable(&self.dir, &self.name, &json)
    }
}

/// Why a bridge of this workspace that holds its port may not answer there: a claude that picks
/// it waits 30 s for nothing ([`crate::inspect::port_silent`]).
const SILENT: &str = "stopped, as a `serve` suspended with Ctrl-Z is: `fg` it; or hung: end it";

/// Removes `<port>.lock` from `dir` when this workspace's last bridge left it there (killed): its
/// token is the kept one and its writer is gone. Kept, it would name a port another program now
/// serves with this workspace's token (which the new bridge keeps), and a claude that keeps lock
/// files whose writer it cannot see (WSL's, for one in another pid namespace) would send that
/// program the token. Whether it was removed.
fn remove_left_lock(dir: &Path, port: u16, token: &AuthToken) -> bool {
    use claude_ide_bridge_runtime::lock::{lock_writer_alive, read_lock_text, still_the_file};
    let path = dir.join(claude_ide_bridge::lock_file_name(port));
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    let lock = (meta.is_file().then(|| read_lock_text(&path).ok()).flatten())
        .and_then(|text| claude_ide_bridge::LockFile::parse(&text).ok());
    match lock {
        Some(lock)
            if lock.auth_token == *token && !lock_writer_alive(&lock, meta.modified().ok()) =>
        {
            // Still the file read: one a bridge now serving the port renamed into place stays.
            still_the_file(&path, &meta) && std::fs::remove_file(&path).is_ok()
        }
        _ => false,
    }
}

/// What one start of the bridge takes from its workspace's state file, and keeps in it.
///
/// The rules: the port given with `--port` wins; else the kept one, else any free one. The token
/// is the kept one unless `--new-token` (or there is none). A kept port found taken is left for a
/// new one: when a bridge serves it (its lock file says so: two bridges for one workspace), with a
/// new token too, and the file stays that bridge's; else (another program took the port) the new
/// port is kept instead. A file that cannot be used is reported and replaced.
pub struct Kept {
    store: Option<Store>,
    loaded: Option<Saved>,
    explicit_port: Option<u16>,
    port: u16,
    token: AuthToken,
    save: bool,
    /// What holds only when the last bridge is gone ("a claude connected to the last bridge
    /// reconnects with /ide"), said first; dropped by [`Kept::beside_a_live_bridge`] when it runs.
    last_gone_notes: Vec<String>,
    notes: Vec<String>,
    /// Held until [`Kept::started`] is done, or this start gives up ([`Store::starting`]).
    _starting: Option<Starting>,
}

impl Kept {
    /// Reads the state file of the workspace folders `native` (as this OS names them; `posix`:
    /// the same in the engine's form) from the program's state directory ([`state_dir`]). A
    /// folder whose name is not Unicode has none: its name in a state file would be another's
    /// too (`/w/a\xff` and `/w/a\xfe` are both `/w/a\u{FFFD}` there).
    ///
    /// Another start of the same workspace is waited for first ([`Store::starting`]), `stop`
    /// asked meanwhile: `None` when it said to stop.
    pub fn load(
        native: &[PathBuf],
        posix: &[String],
        explicit_port: Option<u16>,
        new_token: bool,
        stop: impl FnMut() -> bool,
    ) -> Option<Kept> {
        Some(match key_folders(native, posix) {
            Ok(folders) => {
                let base = state_dir();
                // Another start of this workspace first (see `Starting`).
                let starting = (base.as_deref()).map(|b| {
                    let waiting = || {
                        crate::ui::say(&format!(
                            "waiting for another start of this workspace's bridge to take its \
                             port (at most {} s)",
                            START_WAIT.as_secs()
                        ))
                    };
                    Store::new(b, &folders).starting(START_WAIT, waiting, stop)
                });
                if let Some(Err(Unserialized::Stopped)) = starting {
                    return None;
                }
                let mut kept = Kept::load_from(base.as_deref(), &folders, explicit_port, new_token);
                match starting {
                    Some(Ok(starting)) => kept._starting = Some(starting),
                    Some(Err(Unserialized::Busy)) => kept.notes.push(format!(
                        "another start of this workspace's bridge still had its state file after \
                         {} s: this one went on without waiting longer",
                        START_WAIT.as_secs()
                    )),
                    // (A state folder not used is said by the load.)
                    Some(Err(Unserialized::NoLock | Unserialized::Stopped)) | None => {}
                }
                kept
            }
            Err(odd) => {
                let mut kept = Kept::load_from(None, posix, explicit_port, new_token);
                kept.notes = vec![format!(
                    "port and auth token: new each start (the folder {} has a name that is not \
                     Unicode, which no state file can name apart from others)",
                    odd.display()
                )];
                kept
            }
        })
    }

    /// As [`Kept::load`], from `base` (`None`: nowhere to keep anything).
    pub fn load_from(
        base: Option<&Path>,
        folders: &[String],
        explicit_port: Option<u16>,
        new_token: bool,
    ) -> Kept {
        let mut notes = Vec::new();
        let store = base.map(|b| Store::new(b, folders));
        let loaded = match store.as_ref().map(Store::load) {
            None => {
                notes.push(format!(
                    "port and auth token: new each start (no state folder: {})",
                    crate::sys::NO_STATE_DIR
                ));
                None
            }
            Some(Ok(loaded)) => loaded,
            Some(Err(Refused::Folder(e))) => {
                // Not written either: nothing replaces the file.
                let dir = store.as_ref().map(|s| s.dir.clone()).unwrap_or_default();
                notes.push(format!(
                    "port and auth token: new each start, not kept (the state folder {} is not \
                     used: {e}); a claude connected to the last bridge reconnects with /ide",
                    dir.display()
                ));
                return Kept {
                    save: false,
                    store,
                    loaded: None,
                    explicit_port,
                    port: explicit_port.unwrap_or(0),
                    token: claude_ide_bridge_runtime::generate_token(),
                    last_gone_notes: Vec::new(),
                    notes,
                    _starting: None,
                };
            }
            Some(Err(why)) => {
                let path = store.as_ref().map(Store::path).unwrap_or_default();
                notes.push(format!(
                    "state file {} not used ({why}): a new port and token replace it",
                    path.display()
                ));
                None
            }
        };
        let token = match &loaded {
            Some(s) if !new_token => s.token.clone(),
            _ => claude_ide_bridge_runtime::generate_token(),
        };
        // Only with a state file used: nothing else was said before these.
        let mut last_gone_notes = Vec::new();
        if new_token && loaded.is_some() {
            last_gone_notes.push(
                "auth token: a new one (--new-token); a claude connected to the last bridge \
                 reconnects with /ide"
                    .into(),
            );
        }
        if let (Some(given), Some(s)) = (explicit_port, &loaded) {
            if given != s.port {
                let given = match given {
                    0 => "any free one (--port 0)".to_owned(),
                    n => format!("{n} (--port)"),
                };
                last_gone_notes.push(format!(
                    "port: {given}, not {} as the last start's; a claude connected to the last \
                     bridge reconnects with /ide",
                    s.port
                ));
            }
        }
        let port = explicit_port
            .or(loaded.as_ref().map(|s| s.port))
            .unwrap_or(0);
        Kept {
            save: store.is_some(),
            store,
            loaded,
            explicit_port,
            port,
            token,
            last_gone_notes,
            notes,
            _starting: None,
        }
    }

    /// The lines to show: what was decided, in its order.
    fn said(mut self) -> Vec<String> {
        self.last_gone_notes.append(&mut self.notes);
        self.last_gone_notes
    }

    /// Whether `saved`'s writer, another process than this one, still runs: the same process
    /// where the system tells (its start, and the state file's time: [`process_is_writer`]).
    ///
    /// [`process_is_writer`]: claude_ide_bridge_runtime::lock::process_is_writer
    fn writer_runs(&self, saved: &Saved) -> bool {
        let written = self.store.as_ref().and_then(|s| {
            std::fs::symlink_metadata(s.path())
                .and_then(|m| m.modified())
                .ok()
        });
        saved.pid != std::process::id()
            && claude_ide_bridge_runtime::lock::process_is_writer(
                saved.pid,
                saved.process_start.as_deref(),
                written,
            )
    }

    /// The port to listen on (0: any).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The auth token.
    pub fn token(&self) -> AuthToken {
        self.token.clone()
    }

    /// Whether a refused start should go on with [`Kept::port_taken`] ("address in use") or
    /// [`Kept::port_refused`] (any other error): the port was the kept one, not one given with
    /// `--port`.
    pub fn may_move(&self) -> bool {
        self.explicit_port.is_none() && self.port != 0
    }

    /// The pid of this workspace's last bridge when it looks to be stopping, the kept port still
    /// its own: it saved the state file, still runs (the same process where the system tells:
    /// its start, [`process_is_writer`]), and no live lock file names
    /// the port (a stopping bridge withdraws its lock file first and closes its port last,
    /// seconds later when its editor, language servers and answers are waited for). A bridge
    /// started then waits for the port ([`STOPPING_WAIT`]), keeping port and token, so that a
    /// claude retrying that port gets back in. `None` with `--port`, or when nothing was kept.
    ///
    /// [`process_is_writer`]: claude_ide_bridge_runtime::lock::process_is_writer
    pub fn stopping_bridge(&self, lock_dir: Option<&Path>) -> Option<u32> {
        use claude_ide_bridge_runtime::lock::port_held;
        if !self.may_move() {
            return None;
        }
        let saved = self.loaded.as_ref().filter(|s| s.port == self.port)?;
        let served = (self.lock_dirs(lock_dir).iter()).any(|d| port_held(d, self.port).is_some());
        (self.writer_runs(saved) && !served).then_some(saved.pid)
    }

    /// Where to look for the lock files of this workspace's bridges: `lock_dir` (this start's),
    /// and the one the last bridge had when another ([`Saved::lock_dir`]).
    fn lock_dirs(&self, lock_dir: Option<&Path>) -> Vec<PathBuf> {
        let saved = self.loaded.as_ref().and_then(|s| s.lock_dir.as_deref());
        let mut dirs: Vec<PathBuf> = lock_dir.into_iter().map(Path::to_path_buf).collect();
        if let Some(d) = saved.filter(|d| !dirs.iter().any(|have| have == d)) {
            dirs.push(d.to_path_buf());
        }
        dirs
    }

    /// The live lock file for `port` in this workspace's lock folders ([`Kept::lock_dirs`]),
    /// waited for up to `wait` (a bridge that has bound the port writes its lock file just
    /// after), and whether it is this workspace's bridge's: it carries the kept token or this
    /// start's, or (a bridge of it started with `--new-token`) the same folders, each as given
    /// and resolved, and IDE as this start's lock file will (`lock_folders`, `ide_name`:
    /// [`lock_folders`]); not when it names more folders or another IDE (the editor open on the
    /// same folder).
    ///
    /// [`lock_folders`]: claude_ide_bridge_runtime::lock_folders
    fn live_lock(
        &self,
        lock_dir: Option<&Path>,
        port: u16,
        wait: std::time::Duration,
        lock_folders: &[String],
        ide_name: &str,
    ) -> Option<(claude_ide_bridge::LockFile, bool)> {
        let give_up = std::time::Instant::now() + wait;
        let dirs = self.lock_dirs(lock_dir);
        let lock = loop {
            let held =
                (dirs.iter()).find_map(|d| claude_ide_bridge_runtime::lock::lock_held(d, port));
            if held.is_some() || std::time::Instant::now() >= give_up {
                break held?;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        };
        let ours = lock.auth_token == self.token
            || (self.loaded.as_ref()).is_some_and(|s| s.token == lock.auth_token)
            || (!lock_folders.is_empty()
                && lock.ide_name == ide_name
                && same_folders(&lock.workspace_folders, lock_folders, crate::sys::case_key));
        Some((lock, ours))
    }

    /// With `--port`: when this workspace's bridge still serves the kept port ([`Kept::live_lock`]),
    /// this start takes a new token and keeps nothing. It took that bridge's token and wrote its
    /// own port over that bridge's, so that the running bridge, restarted, found its port
    /// "another bridge's", moved, and its claude was refused.
    pub fn beside_a_live_bridge(
        &mut self,
        lock_dir: Option<&Path>,
        lock_folders: &[String],
        ide_name: &str,
    ) {
        let Some(port) = (self.loaded.as_ref())
            .filter(|_| self.explicit_port.is_some())
            .map(|s| s.port)
        else {
            return;
        };
        let wait = std::time::Duration::ZERO;
        let Some((lock, true)) = self.live_lock(lock_dir, port, wait, lock_folders, ide_name)
        else {
            return;
        };
        let how = match crate::inspect::port_silent(port) {
            true => format!("holds port {port} but does not answer there ({SILENT})"),
            false => format!("serves it on port {port}"),
        };
        self.token = claude_ide_bridge_runtime::generate_token();
        self.save = false;
        // Not "a claude connected to the last bridge reconnects with /ide": that bridge runs.
        self.last_gone_notes.clear();
        self.notes.push(format!(
            "this workspace's bridge (pid {}) {how}: this one (--port) takes a new token and \
             keeps neither",
            lock.pid
        ));
    }

    /// The kept port is taken: go on with any free port and a new token (keeping nothing when
    /// this workspace's bridge serves it).
    ///
    /// Which it is, is told by the lock files ([`Kept::live_lock`]): a live process whose
    /// `<port>.lock` is this workspace's is its bridge (started at the same moment or before, or
    /// bound to another address), and the port, token and state file are its own. Another
    /// program's server (another workspace's bridge, another IDE, or any program, another user's
    /// too, that bound it once the last bridge stopped) took the port, and may have been handed
    /// the token: a claude still trying the old port sends it there. So the token is drawn again
    /// too, and the new port and token kept. The state file's pid alone does not tell: two bridges
    /// started at once both read a dead one (and the second took the first's token and state
    /// file), and a pid reused by another program looks alive for good (and nothing was ever
    /// kept again). A bridge that has bound the port and not yet written its lock file is
    /// waited for, briefly ([`LOCK_FILE_WAIT`]).
    pub fn port_taken(&mut self, lock_dir: Option<&Path>, lock_folders: &[String], ide_name: &str) {
        let taken = self.port;
        self.port = 0;
        match self.live_lock(lock_dir, taken, LOCK_FILE_WAIT, lock_folders, ide_name) {
            Some((lock, false)) => {
                self.token = claude_ide_bridge_runtime::generate_token();
                self.notes.push(format!(
                    "port {taken}, kept for this workspace, is taken by another program's server \
                     (pid {}): listening on a new one, with a new token (a claude still trying \
                     the old port may have handed that program the old one; it reconnects with \
                     /ide)",
                    lock.pid
                ));
            }
            Some((lock, true)) => {
                let pid = lock.pid;
                let how = match crate::inspect::port_silent(taken) {
                    true => format!("holds it but does not answer there ({SILENT})"),
                    false => "serves it".to_string(),
                };
                self.token = claude_ide_bridge_runtime::generate_token();
                self.save = false;
                self.notes.push(format!(
                    "port {taken}, kept for this workspace, is taken: another bridge (pid {pid}) \
                     {how}; this one takes a new port and token and keeps neither"
                ));
            }
            // A bridge with the kept token there whose process this one cannot see (another pid
            // namespace): its lock file looks left by a killed bridge, and was removed, and this
            // start kept a new port over its own.
            None if (self.loaded.as_ref())
                .is_some_and(|s| crate::inspect::takes_token(taken, s.token.as_str())) =>
            {
                self.token = claude_ide_bridge_runtime::generate_token();
                self.save = false;
                self.notes.push(format!(
                    "port {taken}, kept for this workspace, is served by a bridge with this \
                     workspace's token whose process is not seen from here (in another pid \
                     namespace: a container?): this one takes a new port and token and keeps \
                     neither"
                ));
            }
            None => {
                self.notes.push(format!(
                    "port {taken}, kept for this workspace, is taken: listening on a new one, with \
                     a new token (a claude still trying the old port may have handed the program \
                     there the old one; it reconnects with /ide)"
                ));
                self.token = claude_ide_bridge_runtime::generate_token();
                let token = self.loaded.as_ref().map(|s| &s.token);
                if let Some((dir, token)) = lock_dir.zip(token) {
                    if remove_left_lock(dir, taken, token) {
                        self.notes.push(format!(
                            "the lock file the last bridge left for port {taken} (it was killed) \
                             removed: it names that port, now another program's, with this \
                             workspace's token"
                        ));
                    }
                }
            }
        }
    }

    /// Listening on the kept port failed for a reason other than its being taken (`why`): go on
    /// with any free port, keeping the token (no other bridge holds it), and keep the new port.
    pub fn port_refused(&mut self, why: &std::io::Error) {
        let refused = self.port;
        self.port = 0;
        self.notes.push(format!(
            "port {refused}, kept for this workspace, cannot be listened on ({why}): listening on \
             a new one (a claude still trying the old port reconnects with /ide)"
        ));
    }

    /// The server started on `port`: keeps port and token for the next start (when it should);
    /// returns the lines to show.
    pub fn started(mut self, port: u16, lock_dir: Option<&Path>) -> Vec<String> {
        let Some(store) = self.store.clone().filter(|_| self.save) else {
            return self.said();
        };
        // Nothing was kept when this start looked, and now something is: another bridge of this
        // workspace started at the same moment (each took a port of its own) saved first, and
        // keeps its own (both said "kept", and the one whose file was overwritten lost its port
        // at its next start). Not written over while that bridge runs. (Two saves after both
        // looked again are still one over the other: a window of microseconds, not of a start.)
        if self.loaded.is_none() {
            if let Ok(Some(now)) = store.load() {
                if self.writer_runs(&now) {
                    self.notes.push(format!(
                        "port and auth token: not kept: this workspace's bridge started at the \
                         same moment (pid {}, port {}) keeps its own",
                        now.pid, now.port
                    ));
                    return self.said();
                }
            }
        }
        let same = self
            .loaded
            .as_ref()
            .is_some_and(|s| s.port == port && s.token.as_str() == self.token.as_str());
        let saved = Saved {
            port,
            token: self.token.clone(),
            pid: std::process::id(),
            process_start: claude_ide_bridge_runtime::lock::process_start(std::process::id()),
            lock_dir: lock_dir.map(Path::to_path_buf),
        };
        let saved_now = store.save(&saved);
        if saved_now.is_ok() {
            store.prune_gone(std::time::SystemTime::now());
        }
        match saved_now {
            Ok(()) if same => self.notes.push(format!(
                "port and auth token: the last start's, kept in {}",
                store.path().display()
            )),
            Ok(()) => self.notes.push(format!(
                "port and auth token: kept in {} for the next start",
                store.path().display()
            )),
            Err(e) => self.notes.push(format!(
                "port and auth token: not kept for the next start ({}: {e}): a claude connected \
                 to this bridge then needs /ide after a restart; make that folder yours and \
                 writable (`claude-ide-bridge doctor` looks)",
                store.path().display()
            )),
        }
        self.said()
    }
}

/// Whether two lock files' folders are one set (in any order; in any case where paths ignore it:
/// a bridge started from `C:\Proj` and one from `c:\proj` serve one workspace), each folder where
/// it leads: a lock file lists a folder named through a link and where it leads, and one started
/// there lists that alone, as the state file's key does (one workspace: they were "another
/// program's" bridges to each other once their tokens differed).
fn same_folders(a: &[String], b: &[String], key: fn(&str) -> std::borrow::Cow<'_, str>) -> bool {
    let set = |f: &[String]| -> std::collections::BTreeSet<String> {
        (f.iter())
            .map(|f| {
                let resolved = (std::fs::canonicalize(f).ok())
                    .and_then(|p| p.into_os_string().into_string().ok());
                key(resolved.as_deref().unwrap_or(f)).into_owned()
            })
            .collect()
    };
    set(a) == set(b)
}

/// The name of the lock file of the starts ([`Starting`]) whose state file is `name`
/// (`<hash>.json`): `<hash>.start`.
fn start_name(name: &str) -> String {
    format!("{}.start", name.strip_suffix(".json").unwrap_or(name))
}

/// The file name's key: FNV-1a (64 bits) of the folders, each followed by a NUL. Only a name: the
/// file also holds the folders, and one written for others is not used.
fn key(folders: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in folders {
        for b in f.bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A token as `generate_token` writes them: 43 characters of base64url.
fn token_is_well_formed(t: &str) -> bool {
    t.len() == 43
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    pub(crate) fn store(dir: &Path) -> Store {
        Store::new(dir, &["/w/a".into(), "/w/b".into()])
    }

    pub(crate) fn saved() -> Saved {
        Saved {
            port: 40123,
            token: claude_ide_bridge_runtime::generate_token(),
            pid: 7,
            process_start: None,
            lock_dir: None,
        }
    }

    /// A live bridge of this workspace, its lock file in `locks` (a `sleep` stands for it), as
    /// its state file says: the child to kill, and what it kept.
    #[cfg(unix)]
    fn live_bridge(d: &Path, locks: &Path, lock_dir_saved: bool) -> (std::process::Child, Saved) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut kept_by = saved();
        kept_by.pid = child.id();
        kept_by.lock_dir = lock_dir_saved.then(|| locks.to_path_buf());
        store(d).save(&kept_by).unwrap();
        let lock = claude_ide_bridge::LockFile::new(
            child.id(),
            vec!["/w/a".into(), "/w/b".into()],
            "claude-ide-bridge",
            false,
            kept_by.token.clone(),
        );
        fs::create_dir_all(locks).unwrap();
        fs::write(locks.join("40123.lock"), lock.to_json()).unwrap();
        (child, kept_by)
    }

    /// Two bridges started at the same moment, nothing kept yet: the second to save finds the
    /// first's file, and keeps nothing (both said "kept", the file holding one of them).
    #[cfg(unix)]
    #[test]
    fn of_two_first_starts_the_second_to_save_keeps_nothing() {
        let folders = ["/w/a".to_owned(), "/w/b".to_owned()];
        let d = tempfile::tempdir().unwrap();
        let first = Kept::load_from(Some(d.path()), &folders, None, false);
        let second = Kept::load_from(Some(d.path()), &folders, None, false);
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // The first saves as the other process (its pid is another's than this test's).
        let mut theirs = saved();
        theirs.pid = other.id();
        theirs.port = 40300;
        store(d.path()).save(&theirs).unwrap();
        drop(first);
        let notes = second.started(40301, None);
        assert!(
            notes.iter().any(|n| n.contains(&format!(
                "not kept: this workspace's bridge started at the same moment (pid {}, port 40300)",
                other.id()
            ))),
            "{notes:?}"
        );
        assert_eq!(store(d.path()).load().unwrap().unwrap().port, 40300);
        other.kill().unwrap();
        other.wait().unwrap();
        // Its writer gone, the file is replaced as before.
        let third = Kept::load_from(Some(d.path()), &folders, None, false);
        let notes = third.started(40302, None);
        assert!(notes.iter().any(|n| n.contains("kept in")), "{notes:?}");
    }

    /// A second bridge started with `--port` while the workspace's bridge serves: a new token,
    /// nothing kept, and no "reconnects with /ide" (that bridge runs). It took the running
    /// bridge's token and wrote its own port in the state file, and the running one, restarted,
    /// moved to a third port. Found through the running bridge's lock folder when it is not
    /// this start's (another `CLAUDE_CONFIG_DIR`).
    #[cfg(unix)]
    #[test]
    fn a_start_with_port_beside_the_running_bridge_keeps_nothing() {
        let folders = ["/w/a".to_owned(), "/w/b".to_owned()];
        for elsewhere in [false, true] {
            let d = tempfile::tempdir().unwrap();
            let locks = d.path().join("locks");
            let (mut child, kept_by) = live_bridge(d.path(), &locks, true);
            let mine = d.path().join("my-locks");
            let looked_in = if elsewhere { &mine } else { &locks };
            let ide = "claude-ide-bridge";
            let mut second = Kept::load_from(Some(d.path()), &folders, Some(0), false);
            second.beside_a_live_bridge(Some(looked_in), &folders, ide);
            assert_ne!(second.token().as_str(), kept_by.token.as_str());
            assert!(!second.save);
            let notes = second.said();
            assert!(
                // (Served, or not answering: a port of the system's range, which another
                // program may hold while this runs.)
                notes.iter().any(|n| n
                    .contains(&format!("this workspace's bridge (pid {}) ", child.id()))
                    && n.contains("port 40123"))
                    && !notes
                        .iter()
                        .any(|n| n.contains("/ide)") && n.starts_with("port:")),
                "{notes:?}"
            );
            // Without --port, nothing changes here (the kept port is taken: `port_taken`).
            let mut plain = Kept::load_from(Some(d.path()), &folders, None, false);
            plain.beside_a_live_bridge(Some(looked_in), &folders, ide);
            assert_eq!(plain.token().as_str(), kept_by.token.as_str());
            assert!(plain.save);
            // The bridge on that port has another token: this workspace's when its lock file
            // names the same folders and IDE (started with --new-token), not when another IDE's.
            for (its_ide, ours) in [(ide, true), ("Vim", false)] {
                let lock = claude_ide_bridge::LockFile::new(
                    child.id(),
                    vec!["/w/b".into(), "/w/a".into()],
                    its_ide,
                    false,
                    AuthToken::from_string("another-token"),
                );
                fs::write(locks.join("40123.lock"), lock.to_json()).unwrap();
                let mut k = Kept::load_from(Some(d.path()), &folders, Some(0), false);
                k.beside_a_live_bridge(Some(looked_in), &folders, ide);
                let save = k.save;
                assert_eq!(save, !ours, "{its_ide}: {:?}", k.said());
            }
            child.kill().unwrap();
            child.wait().unwrap();
            // Its bridge gone: `--port` takes the kept token and keeps the new port.
            let mut after = Kept::load_from(Some(d.path()), &folders, Some(0), false);
            after.beside_a_live_bridge(Some(looked_in), &folders, ide);
            assert_eq!(after.token().as_str(), kept_by.token.as_str());
            assert!(after.save);
        }
    }

    /// The running bridge's lock file in another folder than this start's (started with another
    /// `CLAUDE_CONFIG_DIR`): it serves, it is not stopping (a start waited 15 s for it, then took
    /// its state file), and its port is a bridge's (`port_taken`: nothing kept).
    #[cfg(unix)]
    #[test]
    fn the_running_bridge_is_seen_through_its_own_lock_folder() {
        let folders = ["/w/a".to_owned(), "/w/b".to_owned()];
        let d = tempfile::tempdir().unwrap();
        let locks = d.path().join("locks");
        let mine = d.path().join("my-locks");
        fs::create_dir(&mine).unwrap();
        let (mut child, _) = live_bridge(d.path(), &locks, true);
        let mut second = Kept::load_from(Some(d.path()), &folders, None, false);
        assert_eq!(second.stopping_bridge(Some(&mine)), None);
        second.port_taken(Some(&mine), &folders, "claude-ide-bridge");
        assert!(!second.save, "{:?}", second.notes);
        assert!(second.notes.iter().any(|n| n.contains("another bridge")));
        // A state file of an older bridge, which names no lock folder: as before.
        let (mut older, _) = live_bridge(d.path(), &locks, false);
        let second = Kept::load_from(Some(d.path()), &folders, None, false);
        assert_eq!(second.stopping_bridge(Some(&mine)), Some(older.id()));
        for c in [&mut child, &mut older] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// A workspace whose folders are all gone, its state unwritten for a month: its file is
    /// removed by the next start of another; one with a folder left, one written lately, and
    /// the starting one's own are kept. The folders are named as a start names them
    /// (`sys::state_folders`: on Windows lowercased, in the wire's form).
    #[test]
    fn the_state_of_a_workspace_gone_for_a_month_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("state");
        let named = |p: &Path| {
            let served = claude_ide_bridge::to_posix(&p.to_string_lossy());
            crate::sys::state_folders(&[p.to_path_buf()], &[served]).remove(0)
        };
        let here = named(d.path());
        let missing = named(&d.path().join("Deleted"));
        let mine = Store::new(&base, std::slice::from_ref(&here));
        let gone = Store::new(&base, std::slice::from_ref(&missing));
        let half = Store::new(&base, &[missing.clone(), here.clone()]);
        for s in [&mine, &gone, &half] {
            s.save(&saved()).unwrap();
            drop(
                s.starting(std::time::Duration::ZERO, || (), || false)
                    .unwrap(),
            );
        }
        let dir = base.join("workspaces");
        // A start's lock file whose workspace never saved; a save's temporary file left.
        let never_saved = dir.join("0000000000000001.start");
        let left_temp = dir.join(".0000000000000001.json.7.0.0badf00d.tmp");
        for f in [&never_saved, &left_temp] {
            std::fs::write(f, "").unwrap();
        }
        // Written just now: kept.
        let now = std::time::SystemTime::now();
        assert_eq!(mine.prune_gone(now), 0);
        assert!(gone.path().exists() && never_saved.exists() && left_temp.exists());
        // A temporary file an hour old goes (a save renames its own within milliseconds).
        mine.prune_gone(now + LEFT_TEMP_AFTER + std::time::Duration::from_secs(1));
        assert!(!left_temp.exists() && never_saved.exists() && gone.path().exists());
        let later = now + PRUNE_AFTER + std::time::Duration::from_secs(3600);
        assert_eq!(mine.prune_gone(later), 1);
        assert!(!gone.path().exists() && !gone.start_path().exists());
        assert!(!never_saved.exists());
        for s in [&half, &mine] {
            assert!(s.path().exists() && s.start_path().exists());
        }
        // Not a state file: left as it is.
        std::fs::write(dir.join("0123456789abcdef.json"), "{").unwrap();
        assert_eq!(mine.prune_gone(later), 0);
    }

    /// A start waits for another start of the same workspace (bounded; said after a second) and
    /// goes on once that one is done; one of another workspace does not wait.
    #[test]
    fn a_start_waits_for_another_of_the_same_workspace() {
        use std::time::{Duration, Instant};
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        let first = s.starting(Duration::ZERO, || (), || false).unwrap();
        let said = std::cell::Cell::new(0);
        let busy = s.starting(
            Duration::from_millis(1200),
            || said.set(said.get() + 1),
            || false,
        );
        assert!(matches!(busy, Err(Unserialized::Busy)), "{busy:?}");
        assert_eq!(said.get(), 1);
        let other = Store::new(d.path(), &["/w/c".into()]);
        drop(other.starting(Duration::ZERO, || (), || false).unwrap());
        let done = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(first);
        });
        let began = Instant::now();
        // Told to stop meanwhile: the wait ends.
        let mut asked = 0;
        let stopped = s.starting(
            Duration::from_secs(30),
            || (),
            || {
                asked += 1;
                asked == 3
            },
        );
        assert!(matches!(stopped, Err(Unserialized::Stopped)), "{stopped:?}");
        let second = s.starting(Duration::from_secs(30), || (), || false);
        assert!(second.is_ok(), "{second:?}");
        assert!(began.elapsed() >= Duration::from_millis(150));
        done.join().unwrap();
    }

    #[test]
    fn saved_is_loaded_back_private() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        assert!(s.load().unwrap().is_none());
        let kept = saved();
        s.save(&kept).unwrap();
        let back = s.load().unwrap().unwrap();
        assert_eq!(back.port, 40123);
        assert_eq!(back.token.as_str(), kept.token.as_str());
        assert_eq!(back.pid, 7);
        // Mode bits where there are some (Unix); Windows has none.
        if let Some(mode) = crate::sys::mode_of(&s.path()) {
            assert_eq!(mode, 0o600);
        }
        if let Some(mode) = crate::sys::mode_of(s.path().parent().unwrap()) {
            assert_eq!(mode, 0o700);
        }
    }

    /// `--port` on another port than the last start's says that a connected claude will not
    /// find it by itself; on the same port it says nothing of it.
    #[test]
    fn another_port_given_is_said() {
        let d = tempfile::tempdir().unwrap();
        let folders = ["/w/a".to_owned(), "/w/b".to_owned()];
        store(d.path()).save(&saved()).unwrap();
        let other = Kept::load_from(Some(d.path()), &folders, Some(40200), false);
        assert_eq!(other.port(), 40200);
        let notes = other.said();
        assert!(
            (notes.iter())
                .any(|n| n.contains("port: 40200 (--port), not 40123") && n.contains("/ide")),
            "{notes:?}"
        );
        let same = Kept::load_from(Some(d.path()), &folders, Some(40123), false);
        assert!(same.said().is_empty());
        // `--port 0` is any free port, not port 0.
        let any = Kept::load_from(Some(d.path()), &folders, Some(0), false).said();
        assert!(
            (any.iter()).any(|n| n.starts_with("port: any free one (--port 0), not 40123")),
            "{any:?}"
        );
    }

    /// A kept port taken by a live process whose lock file names it is a bridge's: a new token,
    /// nothing kept. Taken with no lock file naming it, it is another program's, whatever the
    /// state file's pid (alive here: a pid reused by another program, which kept every later
    /// start from keeping anything): the new port is kept, with the token.
    #[cfg(unix)]
    #[test]
    fn a_taken_port_is_a_bridges_only_when_its_lock_file_says_so() {
        let d = tempfile::tempdir().unwrap();
        let locks = d.path().join("locks");
        fs::create_dir(&locks).unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let s = store(d.path());
        let mut kept_by = saved();
        kept_by.pid = other.id();
        s.save(&kept_by).unwrap();
        let folders = ["/w/a".to_owned(), "/w/b".to_owned()];

        let mut reused = Kept::load_from(Some(d.path()), &folders, None, false);
        reused.port_taken(Some(&locks), &folders, "claude-ide-bridge");
        assert_eq!(reused.port(), 0);
        // Whatever holds the port may have been handed the token: a new one, kept.
        assert_ne!(reused.token().as_str(), kept_by.token.as_str());
        assert!(reused.save);

        let lock = claude_ide_bridge::LockFile::new(
            other.id(),
            folders.to_vec(),
            "claude-ide-bridge",
            false,
            kept_by.token.clone(),
        );
        fs::write(locks.join("40123.lock"), lock.to_json()).unwrap();
        let mut second = Kept::load_from(Some(d.path()), &folders, None, false);
        second.port_taken(Some(&locks), &folders, "claude-ide-bridge");
        assert_ne!(second.token().as_str(), kept_by.token.as_str());
        assert!(!second.save);
        assert!(second.notes.iter().any(|n| n.contains("another bridge")));
        // A bridge started at the same moment writes its lock file once it has bound the port:
        // waited for (here 150 ms late), and told apart from another program's server.
        fs::remove_file(locks.join("40123.lock")).unwrap();
        let late = std::thread::spawn({
            let (path, text) = (locks.join("40123.lock"), lock.to_json());
            move || {
                std::thread::sleep(std::time::Duration::from_millis(150));
                fs::write(path, text).unwrap();
            }
        });
        let mut at_once = Kept::load_from(Some(d.path()), &folders, None, false);
        at_once.port_taken(Some(&locks), &folders, "claude-ide-bridge");
        late.join().unwrap();
        assert!(!at_once.save, "{:?}", at_once.notes);

        // Another program's server on the port (another workspace's bridge, another IDE): its
        // lock file has another token. Port and token are replaced, and the state file keeps
        // the new ones.
        let theirs = claude_ide_bridge::LockFile::new(
            other.id(),
            vec!["/elsewhere".into()],
            "OtherIDE",
            false,
            claude_ide_bridge::AuthToken::from_string("someone-else"),
        );
        fs::write(locks.join("40123.lock"), theirs.to_json()).unwrap();
        let mut third = Kept::load_from(Some(d.path()), &folders, None, false);
        assert_eq!(
            third.stopping_bridge(Some(&locks)),
            None,
            "its lock file is live"
        );
        third.port_taken(Some(&locks), &folders, "claude-ide-bridge");
        assert_eq!(third.port(), 0);
        assert_ne!(third.token().as_str(), kept_by.token.as_str());
        assert!(third.save);
        assert!(third
            .notes
            .iter()
            .any(|n| n.contains("another program's server")));
        // A bridge of this workspace started with --new-token: another token, the same folders.
        let rotated_lock = claude_ide_bridge::LockFile::new(
            other.id(),
            folders.to_vec(),
            "claude-ide-bridge",
            false,
            claude_ide_bridge::AuthToken::from_string("rotated"),
        );
        fs::write(locks.join("40123.lock"), rotated_lock.to_json()).unwrap();
        let mut rotated = Kept::load_from(Some(d.path()), &folders, None, false);
        rotated.port_taken(Some(&locks), &folders, "claude-ide-bridge");
        assert!(!rotated.save);
        assert!(rotated.notes.iter().any(|n| n.contains("another bridge")));
        // The editor open on these folders, or a bridge serving more of them, is not.
        let not_ours = |theirs: Vec<String>, ide: &str| {
            let mut lock = rotated_lock.clone();
            lock.workspace_folders = theirs;
            lock.ide_name = ide.into();
            fs::write(locks.join("40123.lock"), lock.to_json()).unwrap();
            let mut k = Kept::load_from(Some(d.path()), &folders, None, false);
            k.port_taken(Some(&locks), &folders, "claude-ide-bridge");
            assert!(k.save, "{:?}", k.notes);
        };
        not_ours(folders.to_vec(), "Visual Studio Code");
        not_ours(
            vec!["/w/a".into(), "/w/b".into(), "/w/c".into()],
            "claude-ide-bridge",
        );

        // No lock file names the port and the pid that saved the state runs: that bridge is
        // stopping; not with --port.
        fs::remove_file(locks.join("40123.lock")).unwrap();
        let fourth = Kept::load_from(Some(d.path()), &folders, None, false);
        assert_eq!(fourth.stopping_bridge(Some(&locks)), Some(other.id()));
        // The start the file names is not the pid's now (the pid handed out again): not that
        // bridge, where the system names starts (Linux); the right one, the same as without.
        let mut named = kept_by.clone();
        named.process_start = Some("another boot/1".into());
        s.save(&named).unwrap();
        let other_start = Kept::load_from(Some(d.path()), &folders, None, false);
        let expected = (!cfg!(target_os = "linux")).then_some(other.id());
        assert_eq!(other_start.stopping_bridge(Some(&locks)), expected);
        named.process_start = claude_ide_bridge_runtime::lock::process_start(other.id());
        s.save(&named).unwrap();
        let its_start = Kept::load_from(Some(d.path()), &folders, None, false);
        assert_eq!(its_start.stopping_bridge(Some(&locks)), Some(other.id()));
        let explicit = Kept::load_from(Some(d.path()), &folders, Some(40123), false);
        assert_eq!(explicit.stopping_bridge(Some(&locks)), None);
        let _ = other.kill();
        let _ = other.wait();
        let fifth = Kept::load_from(Some(d.path()), &folders, None, false);
        assert_eq!(fifth.stopping_bridge(Some(&locks)), None, "it is gone");
    }

    /// Lock-file folders are one set in any order, and in any case where paths ignore it.
    #[test]
    fn folders_are_compared_as_a_set() {
        let v = |f: &[&str]| f.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        let (ab, ba) = (v(&[r"C:\A", r"C:\B"]), v(&[r"C:\B", r"C:\A"]));
        use std::borrow::Cow;
        fn exact(p: &str) -> Cow<'_, str> {
            Cow::Borrowed(p)
        }
        fn windows(p: &str) -> Cow<'_, str> {
            Cow::Owned(claude_ide_bridge_files::windows_case_key(p))
        }
        assert!(same_folders(&ab, &ba, exact));
        assert!(!same_folders(&ab, &v(&[r"C:\A"]), exact));
        assert!(!same_folders(&ab, &v(&[r"c:\a", r"c:\b"]), exact));
        assert!(same_folders(&ab, &v(&[r"c:\a", r"c:\b"]), windows));
        let accented = v(&[r"C:\Users\Émilie\proj"]);
        assert!(same_folders(
            &accented,
            &v(&[r"c:\users\émilie\PROJ"]),
            windows
        ));
        // A folder named through a link (listed with where it leads) and where it leads.
        #[cfg(unix)]
        {
            let d = tempfile::tempdir().unwrap();
            let (real, link) = (d.path().join("real"), d.path().join("link"));
            std::fs::create_dir(&real).unwrap();
            std::os::unix::fs::symlink(&real, &link).unwrap();
            let text = |p: &std::path::Path| p.to_str().unwrap().to_owned();
            let real = std::fs::canonicalize(&real).unwrap();
            assert!(same_folders(
                &[text(&link), text(&real)],
                &[text(&real)],
                exact
            ));
            let other = d.path().join("other");
            std::fs::create_dir(&other).unwrap();
            assert!(!same_folders(&[text(&link)], &[text(&other)], exact));
        }
    }

    /// A state file in a folder others may write to is not read (the save refused that folder,
    /// and the load used the file in it).
    #[cfg(unix)]
    #[test]
    fn a_file_in_a_folder_open_to_others_is_not_read() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        s.save(&saved()).unwrap();
        let folder = s.path().parent().unwrap().to_path_buf();
        fs::set_permissions(&folder, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(s.load(), Err(Refused::Folder(_))));
        fs::set_permissions(&folder, fs::Permissions::from_mode(0o700)).unwrap();
        assert!(s.load().unwrap().is_some());
    }

    #[test]
    fn folders_key_the_file() {
        let d = tempfile::tempdir().unwrap();
        let a = Store::new(d.path(), &["/w/a".into()]);
        let b = Store::new(d.path(), &["/w/b".into()]);
        let ab = Store::new(d.path(), &["/w/a".into(), "/w/b".into()]);
        assert_ne!(a.path(), b.path());
        assert_ne!(a.path(), ab.path());
        // The folders are a set: in any order, one file, read back.
        let ba = Store::new(d.path(), &["/w/b".into(), "/w/a".into(), "/w/b".into()]);
        assert_eq!(ab.path(), ba.path());
        ab.save(&saved()).unwrap();
        assert!(ba.load().unwrap().is_some());
        a.save(&saved()).unwrap();
        assert!(b.load().unwrap().is_none());
        // Another set of folders' file under this name (a hash collision) is not used.
        fs::copy(a.path(), b.path()).unwrap();
        assert!(matches!(b.load(), Err(Refused::OtherWorkspace)));
    }

    /// Contents that are not a state file, or too many bytes, or a directory in the file's place,
    /// are refused, and the next save replaces them. (What differs by OS, modes, links and FIFOs,
    /// is tested in `crate::sys`.)
    #[test]
    fn bad_files_are_refused_then_replaced() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        s.save(&saved()).unwrap();
        let good = fs::read(s.path()).unwrap();
        let put = |bytes: &[u8]| {
            let _ = fs::remove_file(s.path());
            fs::write(s.path(), bytes).unwrap();
            crate::sys::make_private(&s.path());
        };
        put(b"{not json");
        assert!(matches!(s.load(), Err(Refused::Garbage(_))));
        let json = String::from_utf8(good.clone()).unwrap();
        let token = json.split("\"authToken\": \"").nth(1).unwrap()[..43].to_owned();
        put(json.replace(&token, "short").as_bytes());
        assert!(matches!(s.load(), Err(Refused::Garbage(_))));
        put(json.replace("40123", "0").as_bytes());
        assert!(matches!(s.load(), Err(Refused::Garbage(_))));
        let mut big = good.clone();
        big.resize(MAX_STATE_BYTES as usize + 1, b' ');
        put(&big);
        assert!(matches!(s.load(), Err(Refused::TooBig(_))));
        put(&good);
        assert!(s.load().unwrap().is_some());
        // A directory in its place.
        fs::remove_file(s.path()).unwrap();
        fs::create_dir(s.path()).unwrap();
        assert!(matches!(s.load(), Err(Refused::NotAFile)));
        fs::remove_dir(s.path()).unwrap();
        s.save(&saved()).unwrap();
        assert!(s.load().unwrap().is_some());
    }
}
