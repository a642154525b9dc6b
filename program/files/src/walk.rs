//! The listing's walk, the same on every OS (see `list.rs` for what it skips and where it stops):
//! depth first over directory handles, each child opened relative to its parent's handle
//! without following a link. What a handle is differs by OS ([`Listing`]): `openat` handles read
//! with `getdents` on Unix (`open.rs`), cap-std's `Dir` on Windows (`sys/windows.rs`).

use std::io;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use ignore::gitignore::Gitignore;

use crate::list::holds;
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
        let n = self.folders.len();
        let mut walk = Walk {
            deadline: Instant::now() + self.limits.max_walk_time,
            seen: 0,
            cut: false,
            ignore_left: 2 * self.limits.max_ignore_file_bytes,
            reached: vec![false; n],
            left_out: vec![false; n],
        };
        for i in 0..n {
            if self.covered(i) {
                continue;
            }
            if self.walk_folder(i, &mut walk, &mut found).is_err() {
                return true;
            }
        }
        // A folder inside another whose walk left it out (an ignore rule of the outer one matched
        // it, or a directory holding it) is still a folder the user named: walked on its own,
        // with its own ignore files, the outermost first (its walk may reach the others).
        while let Some(j) = (0..n)
            .filter(|&j| walk.left_out[j] && !walk.reached[j])
            .min_by_key(|&j| self.folders[j].advertised.len())
        {
            walk.reached[j] = true;
            if self.walk_folder(j, &mut walk, &mut found).is_err() {
                return true;
            }
        }
        walk.cut
    }

    /// Walks folder `i` (see [`Workspace::walk_files`]); `Err` when a bound or `found` stopped
    /// the whole walk.
    fn walk_folder<L: Listing>(
        &self,
        i: usize,
        walk: &mut Walk,
        found: &mut impl FnMut(&str, &str, &str, &L) -> bool,
    ) -> Result<(), Stopped> {
        let (max_entries, max_depth) = (self.limits.max_walk_entries, self.limits.max_depth);
        // What the ignore files of one walk may hold in all (see `matcher`).
        let cap = self.limits.max_ignore_file_bytes;
        let folder = &self.folders[i];
        let nested = self.nested_in(i);
        let root = PathBuf::from(&folder.advertised);
        let Some(top) = L::top(self, i) else {
            // Not seen at all: the listing is not whole.
            walk.cut = true;
            return Ok(());
        };
        let left = &mut walk.ignore_left;
        let exclude = Self::matcher(&root, "", left, || top.exclude(self, i, cap));
        let ignore = Self::matcher(&root, "", left, || top.gitignore(cap));
        let (Some(exclude), Some(ignore)) = (exclude, ignore) else {
            return Err(Stopped);
        };
        // Building the rules counts in the walk's time.
        if Instant::now() > walk.deadline {
            return Err(Stopped);
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
                    walk.cut = true;
                    stack.pop();
                    continue;
                }
            };
            // Every entry the walk reads counts, the ones skipped too (ignored trees).
            walk.seen += 1;
            if walk.seen > max_entries || Instant::now() > walk.deadline {
                return Err(Stopped);
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
            // The folders inside this one at or below this directory.
            let inside = || {
                let rel: Vec<&str> = rel.split('/').collect();
                nested.iter().filter(move |(_, below)| holds(&rel, below))
            };
            if Self::ignored(
                stack.iter().rev().map(|f| &f.ignore),
                &exclude,
                &full,
                is_dir,
            ) {
                if is_dir && !nested.is_empty() {
                    for (j, _) in inside() {
                        walk.left_out[*j] = true;
                    }
                }
                continue;
            }
            if is_dir && depth >= max_depth {
                // Not entered: there may be more below.
                walk.cut = true;
                continue;
            }
            if is_dir {
                match stack[depth - 1].dir.child(name) {
                    // Its `.gitignore` is read through the handle its entries are read
                    // from: whatever comes to be at its path meanwhile, the rules are its
                    // own.
                    Ok(dir) => {
                        let left = &mut walk.ignore_left;
                        let ignore = Self::matcher(&root, &rel, left, || dir.gitignore(cap));
                        let Some(ignore) = ignore else {
                            return Err(Stopped);
                        };
                        if Instant::now() > walk.deadline {
                            return Err(Stopped);
                        }
                        if !nested.is_empty() {
                            let depth_below = rel.split('/').count();
                            for (j, below) in inside() {
                                if below.len() == depth_below {
                                    walk.reached[*j] = true;
                                }
                            }
                        }
                        stack.push(Frame { dir, rel, ignore });
                    }
                    Err(NotEntered::Gone) => {}
                    Err(NotEntered::Failed) => walk.cut = true,
                }
                continue;
            }
            let dir = &stack[depth - 1].dir;
            if !found(name, &rel, &L::absolute(&folder.advertised, &rel), dir) {
                return Err(Stopped);
            }
        }
        Ok(())
    }
}

/// The whole walk stopped: by a bound (entries, time, ignore files) or by its caller.
struct Stopped;

/// What the walk of every folder shares: its bounds spent so far, whether it was cut short, and
/// which nested folders the walks of their outer ones reached or left out.
struct Walk {
    deadline: Instant,
    /// Entries read, the ones skipped too (ignored trees).
    seen: usize,
    cut: bool,
    /// What the ignore files of the whole walk may still hold (see `matcher`).
    ignore_left: u64,
    /// Folder `j` was entered as a directory of another one's walk.
    reached: Vec<bool>,
    /// An ignore rule of another one's walk matched folder `j` or a directory holding it.
    left_out: Vec<bool>,
}
