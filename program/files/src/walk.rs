//! The listing's walk, this crate's own and the same on every OS (`list.rs` says what a listing
//! skips and where it stops): depth first over directory handles, each child opened relative to
//! its parent's handle without following a link (a directory swapped for a link during the walk
//! is not entered), its entries read a batch at a time as the walk goes, so that a huge
//! directory costs no memory (walkdir, under the `ignore` crate's walker, reads the rest of a
//! directory into memory once the walk is more than ten levels below it). What a handle is
//! differs by OS ([`Listing`]): `openat` handles read with `getdents` on Unix
//! (`sys/unix/open.rs`), cap-std's `Dir` on Windows (`sys/windows.rs`).

use std::collections::HashSet;
use std::io;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
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
    /// The bytes of ignore-file text its rules were built from, given back when it is left.
    ignore_bytes: u64,
    /// Its directories read whole in the [`Resume`]'s round (by their path below the folder),
    /// each with whether it is in the round's set (passed over: read whole by an earlier walk).
    /// When this one is read whole too, it stands for them; when the walk stops, those not in the
    /// set are put in it.
    done: Vec<(String, bool)>,
}

/// Where the walks of a workspace that stop short (out of time, out of entries) got to, for a
/// caller that walks again and again (the bridge's looks at the files language servers watch):
/// given to [`Workspace::for_each_file_dated_resuming`], it makes each walk pass over the
/// directories an earlier walk of the same round read whole, so that the walks that follow one
/// cut short go on past where it stopped instead of reading the same first directories each
/// time. A round ends with the walk that reaches every directory it does not pass over; the next
/// walk starts a new one, from the top. Holds at most [`Resume::MAX_DONE`] directories (only the
/// outermost of those read whole).
#[derive(Debug, Default)]
pub struct Resume {
    /// For each folder (by its place in the workspace), the directories read whole in this
    /// round, by their path below it (`""`: the folder itself), none inside another.
    done: Vec<HashSet<String>>,
    /// Whether the last walk passed over some of them.
    passed: bool,
    /// The last walk reached every directory: the next one starts a new round.
    round_over: bool,
}

impl Resume {
    /// The most directories a round keeps (about 100 bytes each).
    pub const MAX_DONE: usize = 16_384;

    /// Whether the last walk reached its end (not stopped by a bound: time, entries, ignore
    /// files; nor by its caller), ending its round: every directory that could be read was read
    /// by it or by an earlier walk of the round.
    pub fn reached_end(&self) -> bool {
        self.round_over
    }

    /// Whether the last walk read every directory it could: it reached its end
    /// ([`Resume::reached_end`]) passing over none.
    pub fn went_through(&self) -> bool {
        self.round_over && !self.passed
    }

    /// The directories of folder `i` read whole in this round.
    fn of(&mut self, i: usize) -> &mut HashSet<String> {
        if self.done.len() <= i {
            self.done.resize_with(i + 1, HashSet::new);
        }
        &mut self.done[i]
    }

    /// Whether directory `rel` of folder `i` was read whole in this round.
    fn read(&self, i: usize, rel: &str) -> bool {
        self.done.get(i).is_some_and(|d| d.contains(rel))
    }

    /// Keeps the directories read whole by a walk of folder `i` that stopped with `stack`
    /// (those not yet kept: a passed one is), as many as there is room for.
    fn keep<L>(&mut self, i: usize, stack: Vec<Frame<L>>) {
        let room = Self::MAX_DONE.saturating_sub(self.done.iter().map(HashSet::len).sum());
        let new = stack
            .into_iter()
            .flat_map(|f| f.done)
            .filter(|(_, kept)| !kept);
        self.of(i).extend(new.map(|(rel, _)| rel).take(room));
    }
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

    /// [`Workspace::walk_files_dated`], passing over the directories `resume` holds (see
    /// [`Resume`]).
    pub(crate) fn walk_files_resuming(
        &self,
        resume: &mut Resume,
        mut found: impl FnMut(&str, &dyn Fn() -> Option<SystemTime>) -> bool,
    ) -> bool {
        if resume.round_over {
            *resume = Resume::default();
        }
        resume.passed = false;
        self.walk_with_resume::<crate::sys::Listed>(Some(resume), |name, _, abs, dir| {
            found(abs, &|| dir.modified(name))
        })
    }

    fn walk_with<L: Listing>(&self, found: impl FnMut(&str, &str, &str, &L) -> bool) -> bool {
        self.walk_with_resume(None, found)
    }

    fn walk_with_resume<L: Listing>(
        &self,
        resume: Option<&mut Resume>,
        mut found: impl FnMut(&str, &str, &str, &L) -> bool,
    ) -> bool {
        let n = self.folders.len();
        let deadline = Instant::now() + self.limits.max_walk_time;
        let mut walk = Walk {
            deadline,
            seen: 0,
            cut: false,
            resume,
            ignore: IgnoreBudget::new(
                2 * self.limits.max_ignore_file_bytes,
                &self.ignore_pool,
                deadline,
            ),
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
        if let Some(resume) = walk.resume {
            resume.round_over = true;
        }
        walk.cut
    }

    /// Walks folder `i` (see [`Workspace::walk_files`]); `Err` when a bound or `found` stopped
    /// the whole walk.
    fn walk_folder<L: Listing>(
        &self,
        i: usize,
        walk: &mut Walk<'_>,
        found: &mut impl FnMut(&str, &str, &str, &L) -> bool,
    ) -> Result<(), Stopped> {
        let (max_entries, max_depth) = (self.limits.max_walk_entries, self.limits.max_depth);
        // What the ignore files of one walk may hold in all (see `matcher`).
        let cap = self.limits.max_ignore_file_bytes;
        let folder = &self.folders[i];
        let nested = self.nested_in(i);
        let root = PathBuf::from(&folder.advertised);
        if let Some(resume) = walk.resume.as_deref_mut() {
            if resume.read(i, "") {
                resume.passed = true;
                walk.cut = true;
                return Ok(());
            }
        }
        let Some(top) = L::top(self, i) else {
            // Not seen at all: the listing is not whole.
            walk.cut = true;
            return Ok(());
        };
        let budget = &mut walk.ignore;
        let exclude = Self::matcher(&root, "", budget, || top.exclude(self, i, cap));
        let ignore = Self::matcher(&root, "", budget, || top.gitignore(cap));
        let (Some((exclude, exclude_bytes)), Some((ignore, ignore_bytes))) = (exclude, ignore)
        else {
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
            ignore_bytes,
            done: Vec::new(),
        }];
        let stopped = loop {
            let Some(frame) = stack.last_mut() else {
                break false;
            };
            let entry = match frame.dir.next_entry() {
                Some(Ok(entry)) => entry,
                // The directory's end, or an error that ends it (what was read stands, the rest
                // was not seen): its rules are dropped.
                end => {
                    walk.cut |= end.is_some();
                    if let Some(left) = stack.pop() {
                        walk.ignore.give(left.ignore_bytes);
                        if let Some(resume) = walk.resume.as_deref_mut() {
                            // Read whole: it stands for its own in the round's set. Cut by an
                            // error: its own stand for themselves, in the one above.
                            match (end, stack.last_mut()) {
                                (Some(_), Some(up)) => up.done.extend(left.done),
                                (Some(_), None) => resume.keep(i, vec![left]),
                                (None, up) => {
                                    let kept = resume.of(i);
                                    for (rel, _) in left.done.iter().filter(|(_, kept)| *kept) {
                                        kept.remove(rel);
                                    }
                                    match up {
                                        Some(up) => up.done.push((left.rel, false)),
                                        None => *kept = HashSet::from([String::new()]),
                                    }
                                }
                            }
                        }
                    }
                    continue;
                }
            };
            // Every entry the walk reads counts, the ones skipped too (ignored trees).
            walk.seen += 1;
            if walk.seen > max_entries || Instant::now() > walk.deadline {
                break true;
            }
            let (name, is_dir) = match &entry {
                Entry::Dir(name) => (name.as_str(), true),
                Entry::File(name) => (name.as_str(), false),
                Entry::Other => continue,
            };
            // A write's temporary file (one a bridge killed while writing left, too): not the
            // user's.
            if L::is_git(name) || (!is_dir && crate::is_temp_name(name)) {
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
            if let Some(resume) = walk.resume.as_deref_mut().filter(|_| is_dir) {
                if resume.read(i, &rel) {
                    resume.passed = true;
                    walk.cut = true;
                    stack[depth - 1].done.push((rel, true));
                    continue;
                }
            }
            if is_dir {
                match stack[depth - 1].dir.child(name) {
                    // Its `.gitignore` is read through the handle its entries are read
                    // from: whatever comes to be at its path meanwhile, the rules are its
                    // own.
                    Ok(dir) => {
                        let budget = &mut walk.ignore;
                        let ignore = Self::matcher(&root, &rel, budget, || dir.gitignore(cap));
                        let Some((ignore, ignore_bytes)) = ignore else {
                            break true;
                        };
                        if Instant::now() > walk.deadline {
                            break true;
                        }
                        if !nested.is_empty() {
                            let depth_below = rel.split('/').count();
                            for (j, below) in inside() {
                                if below.len() == depth_below {
                                    walk.reached[*j] = true;
                                }
                            }
                        }
                        stack.push(Frame {
                            dir,
                            rel,
                            ignore,
                            ignore_bytes,
                            done: Vec::new(),
                        });
                    }
                    Err(NotEntered::Gone) => {}
                    Err(NotEntered::Failed) => walk.cut = true,
                }
                continue;
            }
            let dir = &stack[depth - 1].dir;
            if !found(name, &rel, &L::absolute(&folder.advertised, &rel), dir) {
                break true;
            }
        };
        if stopped {
            // What this walk read whole is kept for the next of the round.
            if let Some(resume) = walk.resume.as_deref_mut() {
                resume.keep(i, stack);
            }
            return Err(Stopped);
        }
        walk.ignore.give(exclude_bytes);
        Ok(())
    }
}

/// The whole walk stopped: by a bound (entries, time, ignore files) or by its caller.
struct Stopped;

/// What the walk of every folder shares: its bounds spent so far, whether it was cut short, and
/// which nested folders the walks of their outer ones reached or left out.
struct Walk<'a> {
    deadline: Instant,
    /// The round this walk goes on with, when it is one of a [`Resume`]'s.
    resume: Option<&'a mut Resume>,
    /// Entries read, the ones skipped too (ignored trees).
    seen: usize,
    cut: bool,
    /// What the ignore files of the whole walk may still hold (see `matcher`).
    ignore: IgnoreBudget<'a>,
    /// Folder `j` was entered as a directory of another one's walk.
    reached: Vec<bool>,
    /// An ignore rule of another one's walk matched folder `j` or a directory holding it.
    left_out: Vec<bool>,
}

/// Ignore-file text a walk may hold rules built from without taking its workspace's
/// [`IgnorePool`]: what ordinary repositories hold in the ignore files of one directory and the
/// directories above it (a language's usual `.gitignore` is 1-4 KB), so that their listings
/// never wait for each other.
pub(crate) const FREE_IGNORE_BYTES: u64 = 16 * 1024;

/// Which walk of a workspace may hold rules built from more ignore-file text than
/// [`FREE_IGNORE_BYTES`] at once: one at a time (every clone of the [`Workspace`] shares it).
/// One walk's rules are bounded by its own budget; this keeps parallel listings of a workspace
/// with crafted ignore files (a client may make them with `writeFile`) from each holding their
/// hundreds of megabytes of matchers at once (16 listings of two 256 KiB files took 2.3 GB). A
/// walk holds it only while the directories it is in hold that much (the rules of a directory it
/// has left are dropped), and the walk that holds it never waits for another, so the walks
/// waiting for it cannot wait for each other.
#[derive(Debug, Default)]
pub(crate) struct IgnorePool {
    /// Whether a walk holds it.
    taken: Mutex<bool>,
    /// Told when the walk that held it gives it back.
    given_back: Condvar,
}

impl IgnorePool {
    fn taken(&self) -> MutexGuard<'_, bool> {
        // Nothing can panic between the lock and the unlock: the flag is right whatever did.
        self.taken.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes it, waiting until `deadline` for the walk that holds it to give it back. `false`
    /// when it did not in time.
    pub(crate) fn take(&self, deadline: Instant) -> bool {
        let mut taken = self.taken();
        while *taken {
            let Some(wait) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            taken = match self.given_back.wait_timeout(taken, wait) {
                Ok((taken, _)) => taken,
                Err(e) => e.into_inner().0,
            };
        }
        *taken = true;
        true
    }

    /// Gives it back, taken with [`IgnorePool::take`].
    pub(crate) fn give_back(&self) {
        *self.taken() = false;
        self.given_back.notify_one();
    }
}

/// What one walk may still build ignore rules from: its own budget, the text of the rules it
/// holds now, and whether it holds its workspace's [`IgnorePool`] (given back once it holds
/// [`FREE_IGNORE_BYTES`] or less again, and when the walk ends).
pub(crate) struct IgnoreBudget<'a> {
    /// Bytes the walk may still read in all.
    pub(crate) left: u64,
    /// Bytes of the rules it holds now (the ignore files of the directories it is in).
    live: u64,
    /// Whether it holds the pool.
    holds: bool,
    pool: &'a IgnorePool,
    /// The walk's deadline, the longest it waits for the pool.
    deadline: Instant,
}

impl<'a> IgnoreBudget<'a> {
    /// A walk's budget of `left` bytes of ignore files, until `deadline`.
    pub(crate) fn new(left: u64, pool: &'a IgnorePool, deadline: Instant) -> Self {
        IgnoreBudget {
            left,
            live: 0,
            holds: false,
            pool,
            deadline,
        }
    }

    /// Takes `n` bytes from the walk's budget, holding the pool while its rules are past
    /// [`FREE_IGNORE_BYTES`]. `false` (and nothing left to the walk) when its budget does not
    /// hold them or the pool was not given back by its deadline.
    pub(crate) fn take(&mut self, n: u64) -> bool {
        let Some(still) = self.left.checked_sub(n) else {
            self.left = 0;
            return false;
        };
        if !self.holds && self.live + n > FREE_IGNORE_BYTES {
            if !self.pool.take(self.deadline) {
                self.left = 0;
                return false;
            }
            self.holds = true;
        }
        self.left = still;
        self.live += n;
        true
    }

    /// The rules of `n` bytes are dropped (the walk left their directory): the pool is given
    /// back once what it holds is within [`FREE_IGNORE_BYTES`] again. The walk's own budget is
    /// not: it bounds the work of building rules.
    pub(crate) fn give(&mut self, n: u64) {
        self.live = self.live.saturating_sub(n);
        if self.holds && self.live <= FREE_IGNORE_BYTES {
            self.holds = false;
            self.pool.give_back();
        }
    }
}

impl Drop for IgnoreBudget<'_> {
    fn drop(&mut self) {
        if self.holds {
            self.pool.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Limits;

    /// A series of walks cut short by their entries goes on where each stopped, through a
    /// nested tree and two folders: each round sees every file, the round's set holds only
    /// the outermost directories read whole (a folder read whole stands for all it holds), the
    /// walk that ends a round passes over what the others read, and the next starts from the top.
    #[test]
    fn walks_cut_short_go_on_where_the_last_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let mut folders = Vec::new();
        for top in ["one", "two"] {
            for d in ["a/x", "a/y", "a/z", "b/x", "b/y", "b/z"] {
                let d = dir.path().join(top).join(d);
                std::fs::create_dir_all(&d).unwrap();
                for f in ["1", "2"] {
                    std::fs::write(d.join(f), "").unwrap();
                }
            }
            folders.push(dir.path().join(top).to_str().unwrap().to_string());
        }
        // 20 entries in each folder (2 directories, 6 below them, 12 files), 7 a walk: the first
        // walk stops in the first directory after reading two of its own whole, the next reads
        // the third, and then the first one whole (which then stands for its own), and stops in
        // the second; and so on.
        let ws = Workspace::new(
            folders.clone(),
            Limits {
                max_walk_entries: 7,
                ..Limits::default()
            },
        );
        let mut resume = Resume::default();
        let walk = |resume: &mut Resume| {
            let mut files = Vec::new();
            let cut = ws.for_each_file_dated_resuming(resume, |path, modified| {
                assert!(modified().is_some(), "{path}");
                files.push(path.to_string());
                true
            });
            (cut, files)
        };
        let mut seen = Vec::new();
        let mut walks = 0;
        while !resume.reached_end() {
            let (cut, files) = walk(&mut resume);
            assert!(cut);
            seen.extend(files);
            walks += 1;
            assert!(walks <= 20, "{seen:?}");
            // Never a directory beside one holding it.
            for done in &resume.done {
                for d in done {
                    let holds = |o: &String| o.is_empty() || d.starts_with(&format!("{o}/"));
                    assert!(!done.iter().any(|o| o != d && holds(o)), "{done:?}");
                }
            }
        }
        assert!(!resume.went_through() && walks > 1);
        // Every file (those of a directory a walk stopped in are read again by the next).
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 24, "{seen:?}");
        // The next round starts from the top: its first walk reads the first files again.
        let (_, files) = walk(&mut resume);
        assert!(!files.is_empty() && !resume.reached_end());
        // Walks that are not cut short go through at once, round after round.
        let whole = Workspace::new(folders, Limits::default());
        let mut resume = Resume::default();
        for _ in 0..2 {
            let mut n = 0;
            let cut = whole.for_each_file_dated_resuming(&mut resume, |_, _| {
                n += 1;
                true
            });
            assert!(!cut && n == 24 && resume.went_through());
        }
    }

    /// Parallel listings of a workspace whose ignore files are large build their rules one at a
    /// time: a walk past the free part waits for the one that holds the pool, and is cut short
    /// when it does not end within the walk's time; walks of small ignore files never wait; every
    /// walk gives the pool back, clones of the workspace share it, and walks that all need it
    /// finish in turn.
    #[test]
    fn walks_running_at_once_build_large_ignore_rules_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let rules: String = (0..5_000).map(|i| format!("pat{i:05}\n")).collect();
        let rules = format!("{rules}skipped.txt\n");
        assert!(rules.len() as u64 > FREE_IGNORE_BYTES);
        for d in ["large", "large/sub"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
            std::fs::write(root.join(d).join(".gitignore"), &rules).unwrap();
            std::fs::write(root.join(d).join("kept.txt"), "").unwrap();
            std::fs::write(root.join(d).join("skipped.txt"), "").unwrap();
        }
        std::fs::create_dir(root.join("small")).unwrap();
        std::fs::write(root.join("small/.gitignore"), "skipped.txt\n").unwrap();
        std::fs::write(root.join("small/kept.txt"), "").unwrap();
        std::fs::write(root.join("small/skipped.txt"), "").unwrap();
        let ws = |folder: &str, walk: Duration| {
            Workspace::new(
                vec![root.join(folder).to_str().unwrap().to_string()],
                Limits {
                    max_walk_time: walk,
                    ..Limits::default()
                },
            )
        };
        let whole = |l: &crate::Listing, files: usize| {
            !l.truncated
                && l.files.len() == files
                && l.files.iter().all(|f| !f.ends_with("skipped.txt"))
        };
        // Whole walks have all the time they need (rules take long to build in a debug build
        // under Wine); the one that must be cut short waits 200 ms.
        let long = ws("large", Duration::from_secs(20));
        let l = long.list(None).unwrap();
        assert!(whole(&l, 4), "{l:?}");
        // Given back.
        assert!(long.ignore_pool.take(Instant::now()));

        // Another walk holds it and does not end in time: cut short. Held by a clone.
        // (1 s: time enough to build the rules here, so the walk is cut for waiting)
        let short = Workspace {
            limits: Limits {
                max_walk_time: Duration::from_secs(1),
                ..Limits::default()
            },
            ..long.clone()
        };
        let l = short.list(None).unwrap();
        assert!(l.truncated, "{l:?}");
        // A walk of small ignore files does not wait for it.
        let small = Workspace {
            folders: ws("small", Duration::ZERO).folders,
            ..long.clone()
        };
        let l = small.list(None).unwrap();
        assert!(whole(&l, 2), "{l:?}");
        long.ignore_pool.give_back();

        // It ends within the walk's time: the walk waits for it, and is whole.
        let pool = long.ignore_pool.clone();
        assert!(pool.take(Instant::now()));
        let giver = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            pool.give_back();
        });
        let started = Instant::now();
        let l = long.list(None).unwrap();
        giver.join().unwrap();
        assert!(whole(&l, 4), "{l:?}");
        assert!(started.elapsed() >= Duration::from_millis(100));

        // A walk holds it only while the directories it is in hold that much: given back as
        // it leaves them, taken again for the next.
        let mut budget = IgnoreBudget::new(1 << 20, &long.ignore_pool, Instant::now());
        assert!(budget.take(FREE_IGNORE_BYTES));
        assert!(
            long.ignore_pool.take(Instant::now()),
            "taken within the free part"
        );
        long.ignore_pool.give_back();
        assert!(budget.take(1));
        assert!(!long.ignore_pool.take(Instant::now()), "not taken past it");
        budget.give(1);
        assert!(long.ignore_pool.take(Instant::now()), "not given back");
        assert!(!budget.take(1), "taken by two");
        long.ignore_pool.give_back();
        drop(budget);

        // Eight at once, each needing it for both of its ignore files: all whole, in turn.
        let walks: Vec<_> = (0..8)
            .map(|_| {
                let ws = long.clone();
                std::thread::spawn(move || ws.list(None).unwrap())
            })
            .collect();
        for w in walks {
            let l = w.join().unwrap();
            assert!(whole(&l, 4), "{l:?}");
        }
    }
}
