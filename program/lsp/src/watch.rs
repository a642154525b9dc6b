//! Files on disk the servers watch (`workspace/didChangeWatchedFiles`): the globs a server
//! registers, compiled within bounds ([`WatchSet`]), what all the running servers watch
//! together ([`Watched`], for the program's look at the disk), and the kinds of change
//! ([`FileChange`]). A server is told only of the changes its own globs are for
//! (`State::files_changed`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::messages::{FileWatcher, GlobPattern};

/// The most globs kept of one registration (pyright registers 2, ruff 3).
pub(crate) const MAX_GLOBS: usize = 32;
/// The longest glob kept, in bytes (a relative glob with its folder).
pub(crate) const MAX_GLOB_LEN: usize = 512;
/// The most registrations with globs kept for one server.
pub(crate) const MAX_WATCH_REGISTRATIONS: usize = 16;
/// The bytes of globs built for one server over its life (registrations replaced and withdrawn
/// included; one registered again as it was is not built again): 256 crafted globs of the
/// longest take well under 100 ms to build, and rust-analyzer's, registered again at each
/// reload of its workspace with new folders, take about 100 bytes each.
pub(crate) const MAX_GLOB_BYTES_BUILT: usize = 128 * 1024;

/// How long before a server's start a file's time of change counts as after it
/// ([`FileChange::Seen`]): a coarse clock's tick (FAT, HFS+), and a time taken from another
/// machine's clock (a network file system, a folder shared with a VM or WSL).
pub(crate) const SEEN_SLACK: Duration = Duration::from_secs(2);

/// A file's change on disk, as [`Lsp::files_changed`](crate::Lsp::files_changed) tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileChange {
    /// The file appeared.
    Created,
    /// Its contents changed.
    Changed,
    /// It is gone (deleted, renamed away).
    Deleted,
    /// Seen by the program for the first time (nothing to compare it with: its first look, or
    /// a look that did not see every file), with its time of last change: a server started
    /// before that time (or within 2 s after) may have read another text, and is told it was
    /// created and changed (as new, or changed: read it again either way); one started later
    /// read it as it is, and is told nothing.
    Seen(SystemTime),
}

impl FileChange {
    /// Its bit in a watcher's `kind` (none for [`FileChange::Seen`], which is told as the two
    /// others).
    fn bit(self) -> u8 {
        match self {
            FileChange::Created => 1,
            FileChange::Changed => 2,
            FileChange::Deleted => 4,
            FileChange::Seen(_) => 0,
        }
    }

    /// What a server started at `started` is told of this change.
    pub(crate) fn told(self, started: SystemTime) -> &'static [FileChange] {
        match self {
            FileChange::Created => &[FileChange::Created],
            FileChange::Changed => &[FileChange::Changed],
            FileChange::Deleted => &[FileChange::Deleted],
            // (A time too far ahead to add to is after any start.)
            FileChange::Seen(time) if time.checked_add(SEEN_SLACK).is_none_or(|t| t >= started) => {
                &[FileChange::Created, FileChange::Changed]
            }
            FileChange::Seen(_) => &[],
        }
    }

    /// As the protocol names it.
    pub(crate) fn lsp(self) -> lsp_types::FileChangeType {
        match self {
            FileChange::Created => lsp_types::FileChangeType::CREATED,
            FileChange::Changed | FileChange::Seen(_) => lsp_types::FileChangeType::CHANGED,
            FileChange::Deleted => lsp_types::FileChangeType::DELETED,
        }
    }
}

/// The bytes of the globs of `watchers` that [`WatchSet::new`] would build (the first
/// [`MAX_GLOBS`]; a relative one with its folder's URI).
pub(crate) fn glob_bytes(watchers: &[FileWatcher]) -> usize {
    (watchers.iter().take(MAX_GLOBS))
        .map(|w| match &w.glob {
            GlobPattern::Plain(p) => p.len(),
            GlobPattern::Relative { base, pattern } => base.uri().len() + pattern.len(),
        })
        .sum()
}

/// One registration's globs, compiled: which paths they match, and for which changes.
#[derive(Debug)]
pub(crate) struct WatchSet {
    /// This set's own number, none other's (what the program's look compares [`Watched`] by).
    serial: u64,
    /// The watchers it was built from (a registration again of the same is not built again).
    pub(crate) source: Vec<FileWatcher>,
    set: GlobSet,
    /// Per glob of `set`, the kinds of change it is for (bits of [`FileChange::bit`]).
    kinds: Vec<u8>,
}

impl WatchSet {
    /// The globs of `watchers` (at most [`MAX_GLOBS`], each at most [`MAX_GLOB_LEN`] bytes), as
    /// the protocol reads them: `*` and `?` within a path's part, `**` across parts, `{a,b}`,
    /// `[a-z]` and `[!a]`; a plain glob is matched against the whole path, a relative one against
    /// the path below its folder. One that cannot be used is left out, with a line in `why`;
    /// `None` when none is left.
    pub(crate) fn new(watchers: &[FileWatcher], why: &mut Vec<String>) -> Option<WatchSet> {
        let mut set = GlobSetBuilder::new();
        let mut kinds = Vec::new();
        if watchers.len() > MAX_GLOBS {
            why.push(format!(
                "{} watched globs: only the first {MAX_GLOBS} are kept",
                watchers.len()
            ));
        }
        for w in watchers.iter().take(MAX_GLOBS) {
            // The kinds as bits; none of the three: nothing to tell, nothing to build.
            let kind = w.kind.map_or(7, |k| (k & 7) as u8);
            if kind == 0 {
                continue;
            }
            let glob = match &w.glob {
                GlobPattern::Plain(p) => Some(p.clone()),
                GlobPattern::Relative { base, pattern } => {
                    crate::sys::path_of_uri(base.uri()).map(|base| {
                        let base = crate::sys::glob_form(&base);
                        let base = base.trim_end_matches('/');
                        format!("{}/{pattern}", globset::escape(base))
                    })
                }
            };
            let Some(glob) = glob else {
                why.push("a watched glob's folder names no file on this system: left out".into());
                continue;
            };
            if glob.len() > MAX_GLOB_LEN {
                why.push(format!(
                    "a watched glob of {} bytes (past {MAX_GLOB_LEN}): left out",
                    glob.len()
                ));
                continue;
            }
            let built = GlobBuilder::new(&glob)
                .literal_separator(true)
                .case_insensitive(crate::sys::GLOBS_IGNORE_CASE)
                .build();
            match built {
                Ok(g) => {
                    set.add(g);
                    kinds.push(kind);
                }
                Err(e) => why.push(format!(
                    "watched glob {:?} left out: {e}",
                    crate::log::cut(&glob, 200)
                )),
            }
        }
        if kinds.is_empty() {
            return None;
        }
        match set.build() {
            Ok(set) => {
                static SERIAL: AtomicU64 = AtomicU64::new(0);
                let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
                Some(WatchSet {
                    serial,
                    source: watchers.iter().take(MAX_GLOBS).cloned().collect(),
                    set,
                    kinds,
                })
            }
            Err(e) => {
                why.push(format!("watched globs left out: {e}"));
                None
            }
        }
    }

    /// Every file with the extension of a header ([`crate::table::may_be_included`]; not the
    /// names without one, which a build's programs have too), for every change: what the program
    /// looks at on disk for a server that leaves the documents including them as they were
    /// (`State::headers_changed`).
    pub(crate) fn headers() -> Option<WatchSet> {
        let glob = format!("**/*.{{{}}}", crate::table::HEADERS.join(","));
        let watcher = FileWatcher {
            glob: GlobPattern::Plain(glob),
            kind: None,
        };
        WatchSet::new(&[watcher], &mut Vec::new())
    }

    /// The kinds of change watched for `path` (in [`crate::sys::glob_form`]), as bits.
    fn kinds(&self, path: &str) -> u8 {
        let mut kinds = 0;
        for i in self.set.matches(path) {
            kinds |= self.kinds[i];
        }
        kinds
    }

    /// Whether a change of `change` to `path` (in [`crate::sys::glob_form`]) is watched.
    pub(crate) fn watches(&self, path: &str, change: FileChange) -> bool {
        self.kinds(path) & change.bit() != 0
    }
}

/// What the running servers watch on disk (`workspace/didChangeWatchedFiles`), taken at one
/// moment by [`Lsp::watched`](crate::Lsp::watched): which files the program should look at for
/// changes to tell them of ([`Lsp::files_changed`](crate::Lsp::files_changed)). Two are equal
/// when they hold the same registrations of the same servers (a server started again, or a
/// registration added or withdrawn, makes another).
///
/// ```
/// let none = claude_ide_bridge_lsp::Watched::default();
/// assert!(none.is_empty() && !none.matches(std::path::Path::new("/ws/a.py")));
/// assert_eq!(none.since(), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Watched {
    sets: Vec<Arc<WatchSet>>,
    since: Option<SystemTime>,
}

impl PartialEq for Watched {
    fn eq(&self, other: &Watched) -> bool {
        let serials = |w: &Watched| {
            let mut s: Vec<u64> = w.sets.iter().map(|s| s.serial).collect();
            s.sort_unstable();
            s
        };
        self.since == other.since && serials(self) == serials(other)
    }
}

impl Eq for Watched {}

impl Watched {
    /// Adds a server's globs; `started` is when that server started.
    pub(crate) fn add(&mut self, sets: Vec<Arc<WatchSet>>, started: SystemTime) {
        if sets.is_empty() {
            return;
        }
        self.sets.extend(sets);
        self.since = Some(self.since.map_or(started, |s| s.min(started)));
    }

    /// What a server registering `globs` (each for every kind of change) at `started` would
    /// watch: for tests and tools that look at the disk as the bridge does.
    ///
    /// ```
    /// use claude_ide_bridge_lsp::Watched;
    /// use std::path::Path;
    /// let watched = Watched::of_globs(&["**/*.py", "**/pyproject.toml"], std::time::SystemTime::now()).unwrap();
    /// assert!(watched.matches(Path::new("/ws/pkg/mod.py")));
    /// assert!(!watched.matches(Path::new("/ws/README.md")));
    /// assert!(Watched::of_globs(&["["], std::time::SystemTime::now()).is_err());
    /// ```
    pub fn of_globs(globs: &[&str], started: SystemTime) -> Result<Watched, String> {
        let watchers: Vec<FileWatcher> = (globs.iter())
            .map(|g| FileWatcher {
                glob: GlobPattern::Plain((*g).to_owned()),
                kind: None,
            })
            .collect();
        let mut why = Vec::new();
        let set = WatchSet::new(&watchers, &mut why);
        match (set, why.is_empty()) {
            (Some(set), true) => {
                let mut watched = Watched::default();
                watched.add(vec![Arc::new(set)], started);
                Ok(watched)
            }
            _ => Err(why.join("; ")),
        }
    }

    /// Whether no running server watches any file.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Whether a running server watches `path` for any change.
    pub fn matches(&self, path: &Path) -> bool {
        let Some(path) = path.to_str() else {
            return false;
        };
        let path = crate::sys::glob_form(path);
        self.sets.iter().any(|s| s.kinds(&path) != 0)
    }

    /// When the first of the servers watching files started: a file changed since then may have
    /// been read by one before its change (`None` when none watches).
    pub fn since(&self) -> Option<SystemTime> {
        self.since
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::BaseUri;

    fn watcher(glob: &str, kind: Option<u32>) -> FileWatcher {
        FileWatcher {
            glob: GlobPattern::Plain(glob.into()),
            kind,
        }
    }

    /// The headers watched for clangd: by extension, at any depth; not a source, nor a name
    /// without an extension (a build's programs).
    #[test]
    fn headers_are_watched_by_their_extension() {
        let set = WatchSet::headers().unwrap();
        for path in [
            "/ws/x.h",
            "/ws/a/b/y.hpp",
            "/ws/defs.inc",
            "/ws/t.tcc",
            "/ws/v.h++",
        ] {
            assert!(set.watches(path, FileChange::Changed), "{path}");
            assert!(set.watches(path, FileChange::Deleted), "{path}");
        }
        for path in [
            "/ws/main.c",
            "/ws/app.cpp",
            "/ws/Makefile",
            "/ws/x.hx",
            "/ws/h",
        ] {
            assert!(!set.watches(path, FileChange::Changed), "{path}");
        }
    }

    #[test]
    fn globs_match_as_the_protocol_reads_them() {
        let mut why = Vec::new();
        let set = WatchSet::new(
            &[
                watcher("**/pyrightconfig.json", None),
                watcher("**/*.{py,pyi}", Some(2)),
                watcher("/ws/src/*.c", Some(4)),
                watcher("[", None),
                watcher("**/never", Some(0)),
            ],
            &mut why,
        )
        .unwrap();
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(set.watches("/ws/pyrightconfig.json", FileChange::Created));
        assert!(set.watches("/ws/a/b/pyrightconfig.json", FileChange::Deleted));
        assert!(set.watches("/ws/a/b/m.pyi", FileChange::Changed));
        assert!(!set.watches("/ws/a/b/m.pyi", FileChange::Created));
        assert!(!set.watches("/ws/a/b/m.pyc", FileChange::Changed));
        // `*` stays within a part of the path.
        assert!(set.watches("/ws/src/x.c", FileChange::Deleted));
        assert!(!set.watches("/ws/src/sub/x.c", FileChange::Deleted));
        assert!(!set.watches("/ws/never", FileChange::Changed));
    }

    #[test]
    fn a_relative_glob_is_matched_below_its_folder() {
        let mut why = Vec::new();
        let base = claude_ide_bridge::file_uri("/ws/a [1]");
        let set = WatchSet::new(
            &[FileWatcher {
                glob: GlobPattern::Relative {
                    base: BaseUri::Uri(base),
                    pattern: "**/*.toml".into(),
                },
                kind: None,
            }],
            &mut why,
        )
        .unwrap();
        assert!(why.is_empty(), "{why:?}");
        // The folder's name is taken as written (its `[1]` is no class).
        assert!(set.watches("/ws/a [1]/x/ruff.toml", FileChange::Changed));
        assert!(!set.watches("/ws/a 1/ruff.toml", FileChange::Changed));
        assert!(!set.watches("/ws/b/ruff.toml", FileChange::Changed));
    }

    /// A first sight is told to a server started before the file's time (less 2 s), whatever
    /// the time: one before 1970, or too far ahead to add to, makes no panic.
    #[test]
    fn a_first_sight_is_judged_by_the_servers_start() {
        use FileChange::{Changed, Created, Seen};
        let started = SystemTime::now();
        let hour = Duration::from_secs(3600);
        assert_eq!(Seen(started + hour).told(started), [Created, Changed]);
        assert_eq!(
            Seen(started - Duration::from_secs(1)).told(started),
            [Created, Changed]
        );
        assert!(Seen(started - hour).told(started).is_empty());
        assert!(Seen(SystemTime::UNIX_EPOCH - hour).told(started).is_empty());
        // The latest time this system has, to the second.
        let mut far = SystemTime::UNIX_EPOCH;
        for i in (0..64).rev() {
            if let Some(t) = far.checked_add(Duration::from_secs(1 << i)) {
                far = t;
            }
        }
        assert!(far.checked_add(SEEN_SLACK).is_none());
        assert_eq!(Seen(far).told(started), [Created, Changed]);
        assert_eq!(Changed.told(started), [Changed]);
    }

    #[test]
    fn globs_are_bounded() {
        let mut why = Vec::new();
        let many: Vec<FileWatcher> = (0..MAX_GLOBS + 10)
            .map(|i| watcher(&format!("**/{i}.py"), None))
            .collect();
        let set = WatchSet::new(&many, &mut why).unwrap();
        assert_eq!(set.kinds.len(), MAX_GLOBS);
        assert!(!set.watches(&format!("/ws/{}.py", MAX_GLOBS + 1), FileChange::Changed));
        let long = format!("**/{}", "a".repeat(MAX_GLOB_LEN));
        let mut why = Vec::new();
        assert!(WatchSet::new(&[watcher(&long, None)], &mut why).is_none());
        assert!(why[0].contains("left out"), "{why:?}");
    }
}
