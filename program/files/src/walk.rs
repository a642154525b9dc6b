//! The listing's walk, the same on every OS (see `list.rs` for what it skips and where it stops):
//! depth first over directory handles, each child opened relative to its parent's handle
//! without following a link. What a handle is differs by OS ([`Listing`]): `openat` handles read
//! with `getdents` on Unix (`open.rs`), cap-std's `Dir` on Windows (`sys/windows.rs`).

use std::io;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use ignore::gitignore::Gitignore;

use crate::Workspace;

/// What the walk found in a directory.
pub(crate) enum Entry {
    /// A directory (not a link to one), by its name.
    Dir(String),
    /// A regular file (not a link to one), by its name.
    File(String),
    /// Anything else, counted and passed over: a link, a device, a name that is not UTF-8
    /// (which JSON cannot name: a directory with all it holds is left out).
    Other,
}

/// Why a child directory was not entered.
pub(crate) enum NotEntered {
    /// Gone since it was read, or swapped for a link: passed over, the listing stays whole.
    Gone,
    /// Not readable, out of handles: the listing is not whole.
    Failed,
}

/// A directory handle being listed, on one OS.
pub(crate) trait Listing: Sized {
    /// The top of folder `i`, opened to be listed; `None` when it cannot be.
    fn top(ws: &Workspace, i: usize) -> Option<Self>;
    /// The folder's `.git/info/exclude`, at most `cap` bytes, found as any path is (git
    /// follows a link there).
    fn exclude(&self, ws: &Workspace, i: usize, cap: u64) -> Option<Vec<u8>>;
    /// This directory's `.gitignore`, at most `cap` bytes, read through this handle and not
    /// when it is a link (as git since 2.32).
    fn gitignore(&self, cap: u64) -> Option<Vec<u8>>;
    /// The next entry (never `.` or `..`), `None` at the end; an error ends the directory.
    fn next_entry(&mut self) -> Option<io::Result<Entry>>;
    /// The child directory `name`, opened relative to this handle without following a link.
    fn child(&self, name: &str) -> Result<Self, NotEntered>;
    /// When the regular file `name` of this directory was last modified, looked up relative to
    /// this handle without following a link (`None`: gone, or no longer a regular file).
    fn modified(&self, name: &str) -> Option<SystemTime>;
    /// Whether `name` is the folder git keeps its own files in (`.git`, in any case on
    /// Windows).
    fn is_git(name: &str) -> bool;
    /// The path a client is given for `rel` (`/`-separated) below the advertised `folder`.
    fn absolute(folder: &str, rel: &str) -> String;
}

/// One directory the walk is in: its handle, its path below the folder, and its `.gitignore`.
/// The walk holds one per level, so at most [`Limits::max_depth`](crate::Limits::max_depth) of
/// them.
struct Frame<L> {
    dir: L,
    rel: String,
    ignore: Gitignore,
}

impl Workspace {
    /// Walks every folder, calling `found(name, path below the folder, absolute path)` for each
    /// regular file not skipped, until it returns `false` or a bound stops the walk. Returns
    /// whether the walk was cut short.
    ///
    /// Each directory is opened relative to its parent's handle without following a link, so a
    /// directory swapped for a link during the walk is not entered, and read a batch of entries
    /// at a time: a huge directory costs time (bounded) but no memory.
    pub(crate) fn walk_files(&self, mut found: impl FnMut(&str, &str, &str) -> bool) -> bool {
        self.walk_with::<crate::sys::Listed>(|name, rel, abs, _| found(name, rel, abs))
    }

    /// [`Workspace::walk_files`], `found` also given a way to ask when the file was last modified
    /// (looked up through the handle of the directory the walk found it in, on demand only).
    pub(crate) fn walk_files_dated(
        &self,
        mut found: impl FnMut(&str, &dyn Fn() -> Option<SystemTime>) -> bool,
    ) -> bool {
        self.walk_with::<crate::sys::Listed>(|name, _, abs, dir| found(abs, &|| dir.modified(name)))
    }

    fn walk_with<L: Listing>(&self, mut found: impl FnMut(&str, &str, &str, &L) -> bool) -> bool {
        let deadline = Instant::now() + self.limits.max_walk_time;
        let (max_entries, max_depth) = (self.limits.max_walk_entries, self.limits.max_depth);
        // Every entry the walk reads counts, the ones skipped too (ignored trees).
        let mut seen = 0usize;
        let mut cut = false;
        // What the ignore files of one walk may hold in all (see `matcher`).
        let cap = self.limits.max_ignore_file_bytes;
        let mut ignore_left = 2 * cap;
        for (i, folder) in self.folders.iter().enumerate() {
            if self.covered(i) {
                continue;
            }
            let root = PathBuf::from(&folder.advertised);
            let Some(top) = L::top(self, i) else {
                // Not seen at all: the listing is not whole.
                cut = true;
                continue;
            };
            let exclude = Self::matcher(&root, "", &mut ignore_left, || top.exclude(self, i, cap));
            let ignore = Self::matcher(&root, "", &mut ignore_left, || top.gitignore(cap));
            let (Some(exclude), Some(ignore)) = (exclude, ignore) else {
                return true;
            };
            // Building the rules counts in the walk's time.
            if Instant::now() > deadline {
                return true;
            }
            let mut stack = vec![Frame {
                dir: top,
                rel: String::new(),
                ignore,
            }];
            while let Some(frame) = stack.last_mut() {
                let entry = match frame.dir.next_entry() {
                    Some(Ok(entry)) => entry,
                    // The directory's end.
                    None => {
                        stack.pop();
                        continue;
                    }
                    // What was read stands, the rest was not seen.
                    Some(Err(_)) => {
                        cut = true;
                        stack.pop();
                        continue;
                    }
                };
                seen += 1;
                if seen > max_entries || Instant::now() > deadline {
                    return true;
                }
                let (name, is_dir) = match &entry {
                    Entry::Dir(name) => (name.as_str(), true),
                    Entry::File(name) => (name.as_str(), false),
                    Entry::Other => continue,
                };
                if L::is_git(name) {
                    continue;
                }
                let depth = stack.len();
                let rel = Self::child_rel(&stack[depth - 1].rel, name);
                let full = root.join(&rel);
                if Self::ignored(
                    stack.iter().rev().map(|f| &f.ignore),
                    &exclude,
                    &full,
                    is_dir,
                ) {
                    continue;
                }
                if is_dir && depth >= max_depth {
                    // Not entered: there may be more below.
                    cut = true;
                    continue;
                }
                if is_dir {
                    match stack[depth - 1].dir.child(name) {
                        // Its `.gitignore` is read through the handle its entries are read
                        // from: whatever comes to be at its path meanwhile, the rules are its
                        // own.
                        Ok(dir) => {
                            let ignore =
                                Self::matcher(&root, &rel, &mut ignore_left, || dir.gitignore(cap));
                            let Some(ignore) = ignore else {
                                return true;
                            };
                            if Instant::now() > deadline {
                                return true;
                            }
                            stack.push(Frame { dir, rel, ignore });
                        }
                        Err(NotEntered::Gone) => {}
                        Err(NotEntered::Failed) => cut = true,
                    }
                    continue;
                }
                let dir = &stack[depth - 1].dir;
                if !found(name, &rel, &L::absolute(&folder.advertised, &rel), dir) {
                    return true;
                }
            }
        }
        cut
    }
}
