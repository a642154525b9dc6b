//! File access for claude-ide-bridge: every file the bridge reads, writes or lists for a client
//! goes through a [`Workspace`], which keeps it inside the workspace folders and bounded.
//!
//! The rules, each enforced at the moment of the access (no check-then-use window):
//!
//! - **Only regular files** are read or written. A directory, FIFO, socket or device is refused
//!   with [`Error::NotRegular`]. Files are opened with `O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`, so
//!   the open itself never waits (a FIFO without a writer opens at once), and the type is checked
//!   with `fstat` on the opened handle before a byte is read.
//! - **Reads are capped** at [`Limits::max_read_bytes`] (the message size limit, 10 MiB, by
//!   default): the size from `fstat` is checked before memory is spent, and the read itself stops
//!   one byte past the cap, so a file growing under us is refused too ([`Error::TooLarge`] names
//!   the file and its size).
//! - **Paths stay inside the workspace folders.** A path is resolved one component at a time
//!   from the folder's directory handle with `openat(dir, name, O_NOFOLLOW)`; a symbolic link is
//!   read with `readlinkat` and followed only while its target stays inside a folder (the walk
//!   starts again from the folder's handle, and a `..` in the target is the parent of the
//!   directory reached, as the kernel takes it, not of the name before it, so that the file
//!   found is the one every other program finds by the path). A link leading out,
//!   a dangling link leading out, a symlinked parent directory leading out, and `..` climbing out
//!   are all refused with [`Error::Outside`].
//! - **Writes are atomic** and keep the file's mode: a temporary file is created with
//!   `O_EXCL | O_NOFOLLOW` relative to the checked directory handle, written, `fsync`ed and
//!   renamed over the target with `renameat` on that same handle; a failed write leaves the old
//!   file as it was.
//! - **Listings are bounded** in entries, depth and time ([`Limits`]), never follow symbolic
//!   links, and skip what an editor skips: `.git` and what `.gitignore` files (and
//!   `.git/info/exclude`) exclude. The walk is this crate's own, over directory handles; each
//!   `.gitignore` is read through its directory's handle with the same rules as any other read,
//!   and one that is a symbolic link counts for nothing, as in git (`.git/info/exclude`, where
//!   git follows a link, is found as any path is).
//!
//! On Windows the same rules hold with Windows' own means (`sys/windows.rs`): paths are parsed
//! the way Windows reads them (drive letters, UNC and `\\?\` roots, `file:///C:/` URIs, names
//! compared case-insensitively) and names Windows would read as something else are refused
//! (reserved device names such as `CON`, alternate data streams, trailing dots and spaces); the
//! rest is resolved by cap-std's `Dir` from the folder's handle, which follows a symbolic link or
//! junction only while it stays inside that folder; the type and size are checked on the opened
//! handle; a write renames a new temporary file over the target, under the name the file has on
//! disk, keeping its hidden and system attributes. A folder on a network share is not supported
//! there yet: it is refused when the workspace is made ([`Workspace::refused_folders`]).
//!
//! A file system that hangs in the kernel (a dead network mount) can still block one call:
//! bounding that is the caller's job, by running each call on its own thread with a deadline.
//!
//! ```
//! use claude_ide_bridge_files::{Error, Limits, Workspace};
//! let dir = tempfile::tempdir().unwrap();
//! let root = dir.path().to_str().unwrap().to_string();
//! let ws = Workspace::new(vec![root.clone()], Limits::default());
//! ws.write("notes/todo.md", b"- ship it\n").unwrap();
//! assert_eq!(ws.read_text("notes/todo.md").unwrap().content, "- ship it\n");
//! assert!(matches!(ws.read_text("/etc/passwd"), Err(Error::Outside { .. })));
//! assert!(matches!(ws.read_text("../x"), Err(Error::Outside { .. })));
//! ```

// No `unsafe` but in `sys/winacl.rs` (Win32 calls no crate makes by handle), which allows it.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod list;
// What differs by OS: on Unix the walk over `openat` handles, the reads and writes at its end and
// the listing's handles (`sys/unix/`); on Windows the same on cap-std (`sys/windows.rs`).
mod sys;
mod walk;

use std::time::Duration;

pub use error::Error;
pub use list::{Listing, WorkspaceInfo};
pub use walk::Resume;

/// Refuses one file name that Windows would read as something other than written, on every OS
/// (the rule the Windows backend applies to every component of a path): `:` (an alternate data
/// stream), the characters Windows does not allow in names (`<>"|?*` and control characters), a
/// trailing dot or space (Windows strips them), and reserved device names with or without an
/// extension (`NUL`, `con.txt`, `COM1`-`COM9`, `LPT0`-`LPT9`, ...). `\` and `/` are separators
/// there, not part of a name: a caller holding one name checks them itself. The error says why.
///
/// ```
/// use claude_ide_bridge_files::check_windows_name;
///
/// assert!(check_windows_name("main.rs").is_ok());
/// assert!(check_windows_name("a:b").is_err());
/// assert!(check_windows_name("a.txt.").is_err());
/// assert!(check_windows_name("nul.txt").is_err());
/// ```
pub fn check_windows_name(name: &str) -> Result<(), String> {
    sys::winpath::check_name(name)
}

/// `path` as Windows compares file names, ignoring case as NTFS does (each character
/// upper-cased to one, `ß` and characters outside the Basic Multilingual Plane kept): two
/// spellings of one Windows path have the same key. A pure function, on every OS.
///
/// ```
/// use claude_ide_bridge_files::windows_case_key;
///
/// assert_eq!(windows_case_key(r"c:\Users\émilie\a.rs"), windows_case_key(r"C:\USERS\ÉMILIE\A.RS"));
/// assert_ne!(windows_case_key("straße"), windows_case_key("STRASSE"));
/// ```
pub fn windows_case_key(path: &str) -> String {
    sys::winpath::case_key(path)
}

/// A file read as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    /// The file's path: the workspace folder as advertised, then the components below it with
    /// symbolic links resolved (a link leading to a name that is not UTF-8 is refused:
    /// [`Error::NameNotUtf8`]). On Windows, the components as
    /// given, joined with `\`.
    pub path: String,
    /// Its contents.
    pub content: String,
}

/// The bounds of every file access.
///
/// ```
/// use claude_ide_bridge_files::Limits;
/// let small = Limits { max_read_bytes: 64 * 1024, ..Limits::default() };
/// assert_eq!(small.max_list_entries, Limits::default().max_list_entries);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest file read, in bytes (the message size limit, 10 MiB, by default).
    pub max_read_bytes: u64,
    /// Most paths a listing answers.
    pub max_list_entries: usize,
    /// Most bytes of paths a listing answers (10,000 paths 64 levels deep can hold 160 MB).
    pub max_list_bytes: usize,
    /// Most directory entries a listing (or a file count) looks at.
    pub max_walk_entries: usize,
    /// How deep a listing goes: files at this depth are listed, directories there are not
    /// entered (the folder itself is depth 0, its entries depth 1).
    pub max_depth: usize,
    /// Longest time a listing (or a file count) walks before answering what it has.
    pub max_walk_time: Duration,
    /// Largest ignore file (`.gitignore`, `.git/info/exclude`) read while listing; a bigger one
    /// is skipped. One walk builds rules from at most twice this in all its ignore files: at one
    /// that does not fit in what is left, or once building their rules has taken the walk past
    /// `max_walk_time`, it stops, cut short. The walks of one workspace hold rules of more than
    /// 16 KiB (those of the directories a walk is in) one at a time (a walk waits, within its
    /// `max_walk_time`, for the one before to leave them).
    /// A workspace's ignore files are the repository's text: crafted patterns take tens of
    /// times their size to build (three files of 1 MiB took 450 MB and 7 s), so the default is
    /// 256 KiB.
    pub max_ignore_file_bytes: u64,
    /// Longest `listFiles` pattern, in bytes.
    pub max_pattern_len: usize,
    /// Most symbolic links followed while resolving one path.
    pub max_symlinks: usize,
    /// How old a write's temporary file must be, by its last write and (on Unix) its last change
    /// of status, to be taken for one a killed write left, which the next write in its folder
    /// removes (never one of a process still running, nor while a replace, of any process, is
    /// swapping in the folder: it holds the folder's lock). A rename changes a file's status,
    /// and nothing sets that time back: a user's file renamed into place a moment ago is young
    /// by it, however old its last write.
    pub left_temp_age: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_read_bytes: 10 * 1024 * 1024,
            max_list_entries: 10_000,
            max_list_bytes: 4 * 1024 * 1024,
            max_walk_entries: 200_000,
            max_depth: 64,
            max_walk_time: Duration::from_secs(5),
            max_ignore_file_bytes: 256 * 1024,
            max_pattern_len: 1024,
            max_symlinks: 40,
            left_temp_age: Duration::from_secs(3600),
        }
    }
}

/// One workspace folder: as advertised in the lock file, and as it was on disk at start
/// (symbolic links in the folder's own path resolved), so that absolute paths naming it either
/// way are recognised.
#[derive(Debug, Clone)]
struct Folder {
    advertised: String,
    canonical: String,
    /// The directory it was when first opened (device and inode; on Windows, volume serial
    /// number and file index): a folder whose path has come
    /// to name another directory since (one nested in another folder, swapped for a link by
    /// whatever writes there) is refused instead of followed.
    identity: std::sync::OnceLock<(u64, u64)>,
    /// Why the folder cannot be served on this OS, decided when the workspace was made (a
    /// network share on Windows: [`Workspace::refused_folders`]); every access to it fails
    /// with this.
    refused: Option<String>,
}

impl Folder {
    /// `Ok` unless the folder was refused when the workspace was made; then the refusal, for
    /// `path`.
    fn usable(&self, path: &str) -> Result<(), Error> {
        match &self.refused {
            None => Ok(()),
            Some(why) => Err(Error::io(
                path,
                "using the workspace folder",
                std::io::Error::new(std::io::ErrorKind::Unsupported, why.clone()),
            )),
        }
    }

    /// `Ok` when the folder is the directory it was when first opened (`now`: its identity as
    /// just opened); otherwise the refusal for `path`.
    fn still_itself(&self, path: &str, now: (u64, u64)) -> Result<(), Error> {
        if *self.identity.get_or_init(|| now) == now {
            return Ok(());
        }
        Err(Error::FolderReplaced {
            path: path.into(),
            folder: self.advertised.clone(),
        })
    }
}

/// Whether `path` names a directory by how it ends, whatever is there: a separator (one of
/// `seps`), or a last name `.` or `..` (`new/.` is `new` once `.` is taken out, and a write made
/// a file of that name). Every use is a file's (read, write, check), so such a path is refused.
pub(crate) fn ends_as_directory(path: &str, seps: &[char]) -> bool {
    let last = path.rsplit(seps).next().unwrap_or("");
    path.ends_with(seps) || last == "." || last == ".."
}

/// Whether `name` is one [`temp_name`] gives: a write's temporary file (one a bridge killed while
/// writing left behind, too), which listings leave out.
pub(crate) fn is_temp_name(name: &str) -> bool {
    temp_pid(name).is_some()
}

/// The process id in a name [`is_temp_name`] accepts: the process whose write made it.
fn temp_pid(name: &str) -> Option<u32> {
    let rest = (name.strip_prefix(".claude-ide-bridge.")).and_then(|n| n.strip_suffix(".tmp"))?;
    let fields: Vec<&str> = rest.split('.').collect();
    match fields.as_slice() {
        [pid, n, nanos]
            if n.parse::<u64>().is_ok()
                && !nanos.is_empty()
                && nanos.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            pid.parse::<u32>().ok()
        }
        _ => None,
    }
}

/// How many entries of its folder a write looks through for temporary files left behind.
pub(crate) const LEFT_TEMP_LOOK: usize = 10_000;

/// Whether a temporary file named `name`, last written or changed (the later of the two) at
/// `changed`, was left behind by a write that was killed: older than `age`
/// ([`Limits::left_temp_age`]: no write takes that long). Never one a write of this process
/// holds now ([`TempName`]), nor, on Unix, one of a process still running (its pid is in the
/// name): a replace swaps the user's file under that name for a moment, and the file keeps its
/// own time of last write, which may be old (the sweep passes over a folder a replace is
/// swapping in, and its time of change is the swap's on most file systems). One of this
/// process's pid that no write of it holds is one an earlier process of that pid left (a
/// container's bridge is often pid 1 every time).
pub(crate) fn left_temp(name: &str, changed: Option<std::time::SystemTime>, age: Duration) -> bool {
    let Some(pid) = temp_pid(name) else {
        return false;
    };
    let old = (changed.and_then(|m| m.elapsed().ok())).is_some_and(|elapsed| elapsed > age);
    let in_use = if pid == std::process::id() {
        TempName::held(name)
    } else {
        sys::process_running(pid)
    };
    old && !in_use
}

/// The temporary names this process's writes hold now ([`TempName`]).
static TEMPS_HELD: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A fresh temporary name ([`temp_name`]) held by a write of this process until dropped (when
/// the write is done with it), so that no sweep of this process takes it for a leftover.
#[derive(Debug)]
pub(crate) struct TempName(String);

impl TempName {
    pub(crate) fn new() -> TempName {
        let name = temp_name();
        let mut held = TEMPS_HELD.lock().unwrap_or_else(|p| p.into_inner());
        held.insert(name.clone());
        TempName(name)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a write of this process holds `name` now.
    fn held(name: &str) -> bool {
        let held = TEMPS_HELD.lock().unwrap_or_else(|p| p.into_inner());
        held.contains(name)
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        let mut held = TEMPS_HELD.lock().unwrap_or_else(|p| p.into_inner());
        held.remove(&self.0);
    }
}

/// A fresh name for the temporary file of an atomic write: hidden, unique in this process (a
/// counter) and not guessable from its pid alone (the clock's nanoseconds). The caller creates it
/// new (never an existing file or a planted link) and tries again on a clash.
fn temp_name() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        ".claude-ide-bridge.{}.{n}.{nanos:08x}.tmp",
        std::process::id()
    )
}

/// The workspace folders and the limits of every access to them.
///
/// Paths given to its methods come from the wire: relative to the first folder, or absolute
/// inside one of the folders. The folder paths themselves are trusted (they come from the
/// command line), including any symbolic link in them.
#[derive(Debug, Clone)]
pub struct Workspace {
    folders: Vec<Folder>,
    limits: Limits,
    /// Which of the walks running at once may hold large ignore rules (one), shared by clones.
    ignore_pool: std::sync::Arc<walk::IgnorePool>,
    /// How directories on the way are opened ([`sys::DIR_FLAGS`]; on Unix the tests also walk
    /// with the portable flags, what macOS uses, on Linux). Read by the Unix backend only (on
    /// Windows it is `()`).
    #[allow(dead_code)]
    dir_flags: sys::DirFlags,
}

impl Workspace {
    /// The workspace of these absolute folders, with these limits.
    ///
    /// ```
    /// use claude_ide_bridge_files::{Limits, Workspace};
    /// let ws = Workspace::new(vec!["/srv/project".into()], Limits::default());
    /// assert_eq!(ws.folders(), vec!["/srv/project"]);
    /// ```
    pub fn new(folders: Vec<String>, limits: Limits) -> Workspace {
        let folders = folders
            .into_iter()
            .map(|f| {
                let advertised = sys::advertised(f);
                // A share named as such is refused without asking the network about it.
                let refused = sys::refusal(&advertised, &advertised);
                let canonical = refused
                    .is_none()
                    .then(|| std::fs::canonicalize(&advertised).ok())
                    .flatten()
                    .and_then(|c| c.to_str().map(str::to_owned))
                    .unwrap_or_else(|| advertised.clone());
                // A drive mapped to a share: where Windows says it is.
                let refused = refused.or_else(|| sys::refusal(&advertised, &canonical));
                let identity = std::sync::OnceLock::new();
                if refused.is_none() {
                    if let Some(id) = sys::identity(&advertised) {
                        let _ = identity.set(id);
                    }
                }
                Folder {
                    advertised,
                    canonical,
                    identity,
                    refused,
                }
            })
            .collect();
        Workspace {
            folders,
            limits,
            ignore_pool: Default::default(),
            dir_flags: sys::DIR_FLAGS,
        }
    }

    /// The folders, as advertised.
    pub fn folders(&self) -> Vec<&str> {
        self.folders.iter().map(|f| f.advertised.as_str()).collect()
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The same folders under other limits (the folders are not looked at again): a walk that
    /// must end sooner than a listing, say.
    ///
    /// ```
    /// use claude_ide_bridge_files::{Limits, Workspace};
    /// use std::time::Duration;
    /// let ws = Workspace::new(vec!["/srv/project".into()], Limits::default());
    /// let quick = ws.with_limits(Limits { max_walk_time: Duration::from_millis(100), ..ws.limits().clone() });
    /// assert_eq!(quick.folders(), ws.folders());
    /// assert_eq!(quick.limits().max_walk_time, Duration::from_millis(100));
    /// ```
    pub fn with_limits(&self, limits: Limits) -> Workspace {
        Workspace {
            limits,
            ..self.clone()
        }
    }

    /// The folders this OS's backend cannot serve, each (as advertised) with why and what to do
    /// instead, decided when the workspace was made: on Windows, a folder on a network share
    /// (`\\server\share\...`, `\\?\UNC\...`, `\\wsl.localhost\...`, a mapped network drive).
    /// Every read, write and check of a path in one fails with that reason, and so does a
    /// listing; a program says it at its start. Empty elsewhere.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let ws = Workspace::new(vec![r"\\server\share\ws".into()], Limits::default());
    /// # #[cfg(windows)] {
    /// let refused = ws.refused_folders();
    /// assert!(refused[0].1.contains("network share"));
    /// assert!(ws.read_text("a.txt").unwrap_err().to_string().contains("network share"));
    /// # }
    /// # #[cfg(unix)]
    /// assert!(ws.refused_folders().is_empty());
    /// ```
    pub fn refused_folders(&self) -> Vec<(&str, &str)> {
        self.folders
            .iter()
            .filter_map(|f| Some((f.advertised.as_str(), f.refused.as_deref()?)))
            .collect()
    }

    /// The folders that are no longer the directories they were when first used (removed and
    /// made again: `rm -rf proj && git clone ... proj`; replaced by a link), each as the refusal
    /// every file in it gets ([`Error::FolderReplaced`]). An answer about all the workspace's
    /// files says so rather than answer for the files of the old directory.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// let proj = dir.path().join("proj");
    /// std::fs::create_dir(&proj).unwrap();
    /// let ws = Workspace::new(vec![proj.to_str().unwrap().into()], Limits::default());
    /// assert!(ws.replaced_folders().is_empty());
    /// std::fs::rename(&proj, dir.path().join("old")).unwrap();
    /// std::fs::create_dir(&proj).unwrap();
    /// assert_eq!(ws.replaced_folders().len(), 1);
    /// ```
    pub fn replaced_folders(&self) -> Vec<Error> {
        (self.folders.iter().enumerate())
            .filter(|(_, f)| f.refused.is_none())
            .filter_map(|(i, f)| match self.open_folder(i, &f.advertised) {
                Err(e @ Error::FolderReplaced { .. }) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The folders whose entries cannot be listed now, each with why (and, where the OS has
    /// one, what to do: on macOS, the privacy settings that keep an app out of Desktop,
    /// Documents or Downloads until allowed). Every read and listing there fails: a program
    /// says it at its start rather than at claude's first file. A folder refused on this OS
    /// ([`Workspace::refused_folders`]) is not looked at.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// let gone = dir.path().join("gone");
    /// let folders = [dir.path(), &gone].map(|p| p.to_str().unwrap().to_owned());
    /// let ws = Workspace::new(folders.to_vec(), Limits::default());
    /// let unreadable = ws.unreadable_folders();
    /// assert_eq!(unreadable.len(), 1);
    /// assert!(unreadable[0].starts_with(gone.to_str().unwrap()), "{}", unreadable[0]);
    /// ```
    pub fn unreadable_folders(&self) -> Vec<String> {
        (self.folders.iter())
            .filter(|f| f.refused.is_none())
            .filter_map(|f| {
                let first = std::fs::read_dir(&f.advertised).and_then(|mut d| d.next().transpose());
                let e = first.err()?;
                let hint =
                    (sys::io_hint("listing", &e)).map_or(String::new(), |h| format!("; {h}"));
                Some(format!("{} cannot be listed ({e}{hint})", f.advertised))
            })
            .collect()
    }

    /// Whether `path` names a place inside a workspace folder, by its text alone: an absolute
    /// path under a folder as advertised or as it is on disk, or a relative one that `..` does
    /// not take out. Nothing is looked at on disk (a link on the way may still lead out: what is
    /// read or written is checked again), so it suits a sorting of names that come in quickly,
    /// such as a language server's diagnostics for files it was never asked about.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let ws = Workspace::new(vec!["/srv/app".into()], Limits::default());
    /// # #[cfg(unix)] {
    /// assert!(ws.contains("/srv/app/src/main.rs"));
    /// assert!(!ws.contains("/etc/passwd"));
    /// assert!(!ws.contains("/srv/app/../other/x"));
    /// # }
    /// ```
    pub fn contains(&self, path: &str) -> bool {
        !matches!(self.lexical(path), Err(Error::Outside { .. }))
    }

    /// Reads a regular UTF-8 text file inside the workspace (see [`Workspace::read`]); this is
    /// what `readFile` answers and what is handed to a language server.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Error, Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.rs"), "fn main() {}\n").unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// let text = ws.read_text("a.rs").unwrap();
    /// assert_eq!(text.content, "fn main() {}\n");
    /// assert!(text.path.ends_with("a.rs"));
    /// assert!(matches!(ws.read_text("."), Err(Error::NotRegular { .. })));
    /// ```
    pub fn read_text(&self, path: &str) -> Result<Text, Error> {
        self.open(path)?.read_text()
    }

    /// Reads a regular file inside the workspace, at most
    /// [`Limits::max_read_bytes`] bytes. Returns the path it was found at (links resolved) and
    /// the bytes.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Error, Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("big"), vec![b'x'; 2048]).unwrap();
    /// let ws = Workspace::new(
    ///     vec![dir.path().to_str().unwrap().into()],
    ///     Limits { max_read_bytes: 1024, ..Limits::default() },
    /// );
    /// assert!(matches!(ws.read("big"), Err(Error::TooLarge { size: 2048, .. })));
    /// ```
    pub fn read(&self, path: &str) -> Result<(String, Vec<u8>), Error> {
        self.open(path)?.read()
    }

    /// [`Workspace::write`] over a file that still holds `expected` (what was read of it): looked
    /// at last, once the new text is on disk, just before it replaces the file; else
    /// [`Error::Changed`] and nothing is written (a save of the user's, or a delete, while the
    /// new text was being made or written is kept). Where the file system swaps two names in one
    /// step (Linux, macOS) the new text and the file are swapped and what came out is looked at,
    /// a save made before the swap put back; elsewhere (Windows) a save in the microseconds
    /// between the look and the rename is not seen.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Error, Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.py"), "x=1\n").unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// let read = ws.read_text("a.py").unwrap().content;
    /// std::fs::write(dir.path().join("a.py"), "x=2\n").unwrap(); // saved meanwhile
    /// let formatted = read.replace("x=1", "x = 1");
    /// assert!(matches!(ws.replace("a.py", formatted.as_bytes(), read.as_bytes()), Err(Error::Changed { .. })));
    /// assert_eq!(std::fs::read_to_string(dir.path().join("a.py")).unwrap(), "x=2\n");
    /// ```
    pub fn replace(&self, path: &str, contents: &[u8], expected: &[u8]) -> Result<String, Error> {
        self.write_over(path, contents, Some(expected))
    }

    /// [`Workspace::write`], over a file that holds `expected` just before it is replaced when
    /// that is given ([`Workspace::replace`]). A directory on the way that goes while the file
    /// is written (made by another write at the same moment, which failed and took back what it
    /// had made) is looked for again, at most [`WRITE_TRIES`] times in all: it is made again.
    pub(crate) fn write_over(
        &self,
        path: &str,
        contents: &[u8],
        expected: Option<&[u8]>,
    ) -> Result<String, Error> {
        let mut tries = 1;
        loop {
            match self.write_once(path, contents, expected) {
                Err(Error::NotFound { .. }) if tries < WRITE_TRIES => tries += 1,
                written => return written,
            }
        }
    }
}

/// How many times a write looks its path up when a directory on the way goes meanwhile
/// ([`Workspace::write_over`]).
const WRITE_TRIES: u32 = 3;

/// Whether `reader` gives exactly `expected`: read in pieces, at most one byte past it.
pub(crate) fn holds(reader: impl std::io::Read, expected: &[u8]) -> bool {
    use std::io::Read;
    let mut reader = reader.take(expected.len() as u64 + 1);
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = 0;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return at == expected.len(),
            Ok(n) => {
                if expected.get(at..at + n) != Some(&buf[..n]) {
                    return false;
                }
                at += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// A regular file inside the workspace, opened and not read yet ([`Workspace::open`]): its size
/// is known before its bytes are taken, so that a host can make room for them first (the
/// program lets only so many bytes of files be read for its clients at once).
#[derive(Debug)]
pub struct Opened {
    /// The path as it was asked for, which errors name.
    asked: String,
    /// The path it was found at, as [`Text::path`].
    path: String,
    file: std::fs::File,
    size: u64,
    cap: u64,
}

impl Opened {
    /// The file's size when it was opened, at most the read limit (a larger file is refused by
    /// [`Workspace::open`]). What [`Opened::read`] takes may differ if the file changes
    /// meanwhile, never by more than the limit.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The path the file was found at (the workspace folder as advertised, then the components
    /// below it with links resolved), as [`Text::path`].
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Reads the file, at most the read limit; returns the path it was found at and the bytes.
    pub fn read(self) -> Result<(String, Vec<u8>), Error> {
        let bytes = read_capped(&self.asked, self.file, self.size, self.cap)?;
        Ok((self.path, bytes))
    }

    /// Reads the file as UTF-8 text ([`Error::NotText`] if it is not).
    pub fn read_text(self) -> Result<Text, Error> {
        let bytes = read_capped(&self.asked, self.file, self.size, self.cap)?;
        let content = String::from_utf8(bytes).map_err(|_| Error::NotText { path: self.asked })?;
        Ok(Text {
            path: self.path,
            content,
        })
    }
}

/// Reads at most `cap` bytes of an opened regular file of `size` bytes (its size when it was
/// opened): the size is checked first, and the reader stops one byte past the cap in case the
/// file grew, so that what was read is checked as well.
pub(crate) fn read_capped(
    path: &str,
    file: impl std::io::Read,
    size: u64,
    cap: u64,
) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    within(path, size, cap)?;
    let mut buf = Vec::with_capacity(size as usize + 1);
    let got = file
        .take(cap.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, "reading", e))?;
    within(path, got as u64, cap)?;
    Ok(buf)
}

/// [`Error::TooLarge`] when `size` bytes of `path` are more than `cap`.
pub(crate) fn within(path: &str, size: u64, cap: u64) -> Result<(), Error> {
    if size > cap {
        return Err(Error::TooLarge {
            path: path.into(),
            size,
            limit: cap,
        });
    }
    Ok(())
}

/// The lines of what `reader` gives (as `str::lines` counts them), read in small pieces, with
/// [`Error::TooLarge`] once more than `cap` bytes came: the reader is expected to give at most
/// one byte past the cap (`take(cap + 1)`).
pub(crate) fn count_lines(
    path: &str,
    mut reader: impl std::io::Read,
    cap: u64,
) -> Result<u64, Error> {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut total, mut newlines, mut last) = (0u64, 0u64, b'\n');
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(path, "reading", e)),
        };
        total += n as u64;
        newlines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    within(path, total, cap)?;
    Ok(newlines + u64::from(last != b'\n'))
}
