//! Files the language servers watch on disk (`workspace/didChangeWatchedFiles`). A server reads a
//! file it does not have open from disk, once, and keeps what it read until it is told the file
//! changed: pyright checks a file importing a module against the module's old text, ruff keeps a
//! changed `pyproject.toml`'s old rules. clangd watches nothing, and leaves the files including a
//! changed header as they were: for it the headers are watched as if it had registered them (its
//! open files are then checked again, `Lsp::files_changed`). An editor tells servers of such
//! changes from a watcher; the bridge, which wakes for nothing while idle, looks instead: before
//! each `getDiagnostics` it walks the workspace (the walk of `listFiles`: bounded, `.gitignore`
//! honoured, no link followed), compares each file a server's globs match with what the last look
//! saw (its time of last change), and tells the servers ([`Lsp::files_changed`]) of the files
//! created, changed and deleted since.
//!
//! A file not seen before is told created when the last whole look's globs matched it (that look
//! saw every file it could: a folder it cannot read, or past the walk's depth, is never seen, and
//! makes no file in it new later). Otherwise (the first look for a server's globs, after a server
//! started again or registered others, after a look that ran out of time or of room) it is told
//! seen ([`FileChange::Seen`], with its time): each server started before that time (less 2 s) may
//! have read another text, and is told it was created and changed; a server started after is told
//! nothing. The program takes that first look as soon as a server answers
//! ([`Looks::first_if_new`]), so that a file deleted or created before the next question is told
//! then. A file no longer matched by the globs is kept, to be compared when it is again (a server
//! started again).
//!
//! A file written just before a look (its time within the file system's clock's tick) is
//! compared again at each look while its time is within the tick, and told changed again when it
//! holds another text than the look before read of it ([`Seen::hash`]; one not read, too large or
//! past the look's budget, is told changed once more at the next look): a second write in the
//! same tick keeps its time. That tick is taken as 2 s
//! ([`RACY`]) for a time in whole milliseconds (FAT, HFS+, a network file system), and
//! [`FINE_RACY`] otherwise. A file not seen by a look is told deleted when it is found gone by
//! its path (first those the look before saw, then those seen longest ago, for at most
//! [`GONE_WAIT`]): a walk that did not see every folder says nothing of the files in the others;
//! one found still there, not reached by [`UNREACHED`] rounds of looks in a row (below), is
//! forgotten. Deletions are told first (a file renamed in another case on a file system that
//! ignores case is then the one created). A look stops at its deadline; past [`MAX_WATCHED`]
//! files it keeps walking without keeping new ones.
//!
//! A workspace too big for one look (past about 30,000 files in 100 ms) is looked at in rounds
//! ([`Resume`]): each look passes over the folders the looks before it in its round read whole,
//! and goes on from there, so that every file is looked at within a few looks (a change in it told
//! then), not only those a walk reads first. A look that passes over folders is not whole: a file
//! not seen before is then told seen, not created. A file written just before a look is looked at
//! again only when a look reaches its folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use claude_ide_bridge_files::{Limits, Resume, Workspace};
use claude_ide_bridge_lsp::{FileChange, Lsp, Watched};

/// How long a look may take (its walk included: the entries it passes over count too).
pub(super) const LOOK_WAIT: Duration = Duration::from_millis(100);

/// The most files a look keeps the time of (about 150 bytes each).
pub(super) const MAX_WATCHED: usize = 50_000;

/// How long before a look a file's time (in whole milliseconds: a coarse clock) makes it looked
/// at again at the next look, and how long before the first watching server's start a change
/// counts as after it.
pub(super) const RACY: Duration = Duration::from_secs(2);

/// [`RACY`] for a time finer than a millisecond (ext4, APFS, NTFS: a clock tick is a few ms).
pub(super) const FINE_RACY: Duration = Duration::from_millis(50);

/// How long a look may take to find out which of the files it did not see are gone.
pub(super) const GONE_WAIT: Duration = Duration::from_millis(20);

/// The looks at one workspace for its servers: before each question
/// ([`Looks::before_question`]), and a first one for new globs on a thread of its own
/// ([`Looks::first_if_new`]). One at a time, each one's changes told before the next looks.
pub(super) struct Looks {
    disk: Mutex<DiskLook>,
    /// The workspace, walked within [`LOOK_WAIT`].
    ws: Workspace,
    lsp: Lsp,
    /// What the last look watched (beside the look's lock: [`Looks::first_if_new`] does not
    /// take that one).
    last: Mutex<Option<Watched>>,
    /// Set while a first look's thread runs.
    first: AtomicBool,
}

impl Looks {
    pub(super) fn new(lsp: Lsp, ws: &Workspace) -> Arc<Looks> {
        Arc::new(Looks {
            disk: Mutex::new(DiskLook::default()),
            ws: ws.with_limits(Limits {
                max_walk_time: LOOK_WAIT,
                max_read_bytes: MAX_HASHED_BYTES.min(ws.limits().max_read_bytes),
                ..ws.limits().clone()
            }),
            lsp,
            last: Mutex::new(None),
            first: AtomicBool::new(false),
        })
    }

    fn disk(&self) -> MutexGuard<'_, DiskLook> {
        self.disk.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before a question: tells the servers of the files they watch that changed since the last
    /// look, looking for at most [`LOOK_WAIT`] and until `deadline`. A look under way (another
    /// question's, a first look) is waited for, its changes told first; it may have walked past
    /// a file changed just before this question, so this one looks all the same, with a time of
    /// its own. Returns whether the look did not see every file.
    pub(super) fn before_question(&self, deadline: Instant) -> bool {
        let mut disk = self.disk();
        // Read under the lock: a registration made while waiting is the one looked for.
        let watched = self.lsp.watched();
        let until = (Instant::now() + LOOK_WAIT).min(deadline);
        self.look_and_tell(&mut disk, &watched, until)
    }

    /// A first look at the files the servers watch, when they watch others than the last look
    /// saw (a server just started and registered its globs, or registered others), on a thread
    /// of its own: taken as soon as a server answers, so that a file created or deleted before
    /// the next question is told then (before a first look there is nothing to compare a file
    /// with), without making that answer wait. At most one such thread at a time.
    pub(super) fn first_if_new(self: &Arc<Self>) {
        let watched = self.lsp.watched();
        // Compared without the look's lock: a question's look is never kept waiting for this.
        if watched.is_empty() || self.looked_at(&watched) {
            return;
        }
        if self.first.swap(true, Ordering::AcqRel) {
            return;
        }
        /// Lets another first look start when this one ends, however it ends.
        struct Done(Arc<Looks>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.first.store(false, Ordering::Release);
            }
        }
        let done = Done(self.clone());
        let _ = std::thread::Builder::new()
            .name("lsp-look".into())
            .spawn(move || {
                let me = &done.0;
                let mut disk = me.disk();
                let watched = me.lsp.watched();
                if !me.looked_at(&watched) {
                    me.look_and_tell(&mut disk, &watched, Instant::now() + LOOK_WAIT);
                }
            });
    }

    /// Whether the last look was of what `watched` watches.
    fn looked_at(&self, watched: &Watched) -> bool {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref() == Some(watched)
    }

    /// One look, its changes told; whether it did not see every file.
    fn look_and_tell(&self, disk: &mut DiskLook, watched: &Watched, deadline: Instant) -> bool {
        let found = disk.look(&self.ws, watched, deadline);
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(watched.clone());
        self.lsp.files_changed(&found.changes);
        found.cut
    }
}

/// A file as the last look that saw it found it.
struct Seen {
    /// Its time of last change.
    time: SystemTime,
    /// Written just before that look (within its file system's clock tick, [`racy`]): compared
    /// again at the next one, a second write in that tick keeping its time.
    recheck: bool,
    /// With `recheck`, the hash of what that look read of it ([`hash_of`]): told changed at the
    /// next look only when it holds another text then (not for the write already told: to
    /// clangd, each telling is a check again of its open files), and compared so at each look
    /// while its time is within the tick. Without (not read: too large, past the look's
    /// budget), told changed once more at the next look.
    hash: Option<u64>,
    /// The number of the last look that saw it (or found it still there).
    look: u64,
    /// How many rounds of looks in a row found it still there without reaching it (ignored now,
    /// in a folder not read): at [`UNREACHED`] it is forgotten, and its room freed.
    unreached: u8,
}

/// How many rounds of looks in a row (a look that went through the workspace, or those of a
/// [`Resume`]'s round) may find a file there without reaching it before it is forgotten.
const UNREACHED: u8 = 3;

/// What the last looks saw.
#[derive(Default)]
pub(super) struct DiskLook {
    /// Each file a server watches (or watched), as the last look that saw it found it.
    seen: HashMap<PathBuf, Seen>,
    /// The number of the last look.
    looks: u64,
    /// What was watched at the last look, and whether it saw every file it could (not stopped by
    /// its time, the walk's bounds or [`MAX_WATCHED`], and passing over no folder).
    last: Option<(Watched, bool)>,
    /// Where the looks cut short got to: the next goes on from there.
    resume: Resume,
}

/// What a look found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Found {
    /// The files deleted, then those created, changed and seen since the last look, in the
    /// walk's order.
    pub changes: Vec<(PathBuf, FileChange)>,
    /// Whether the look did not see every file (its deadline, a bound of the walk, a folder that
    /// cannot be read, [`MAX_WATCHED`]).
    pub cut: bool,
}

/// Whether a file written at `time` may be written again with the same time, seen `now`: within
/// the file system's clock tick ([`RACY`] for a time in whole milliseconds, else [`FINE_RACY`]).
/// What the watch looks at again, and what the diagnostics' memory keeps no stamp for.
pub(super) fn racy(time: SystemTime, now: SystemTime) -> bool {
    let tick = match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(t) if t.subsec_nanos() % 1_000_000 == 0 => RACY,
        _ => FINE_RACY,
    };
    match now.duration_since(time) {
        Ok(age) => age < tick,
        // Written during the look (after `now` was read), or dated ahead: only the first.
        Err(ahead) => ahead.duration() < LOOK_WAIT + tick,
    }
}

/// The most files a look reads to hash ([`Seen::hash`]): those written just before it, usually
/// a few (a build writing thousands at once has the others told once more, as before).
const MAX_HASHES: usize = 64;

/// The largest file a look reads to hash: a larger one written just before a look is told
/// changed once more at the next.
const MAX_HASHED_BYTES: u64 = 1024 * 1024;

/// How many more files this look may read to hash.
struct Hashes(usize);

impl Hashes {
    /// The hash of what `path` holds ([`hash_of`]), while this look may read more and its
    /// `deadline` has not passed; `None` past that.
    fn take(&mut self, ws: &Workspace, path: &Path, deadline: Instant) -> Option<u64> {
        if Instant::now() >= deadline {
            return None;
        }
        self.0 = self.0.checked_sub(1)?;
        hash_of(ws, path)
    }
}

/// The hash of the bytes `path` holds, read through `ws` (inside the workspace, a regular file
/// of at most [`MAX_HASHED_BYTES`]); `None` when it cannot be read so.
fn hash_of(ws: &Workspace, path: &Path) -> Option<u64> {
    use std::hash::Hasher;
    let (_, bytes) = ws.read(path.to_str()?).ok()?;
    let mut h = std::hash::DefaultHasher::new();
    h.write(&bytes);
    Some(h.finish())
}

impl DiskLook {
    /// Looks at the files of `ws` that `watched` matches, until `deadline`, and answers what
    /// changed since the last look. With nothing watched, forgets what it saw.
    pub(super) fn look(&mut self, ws: &Workspace, watched: &Watched, deadline: Instant) -> Found {
        if watched.is_empty() {
            *self = DiskLook::default();
            return Found::default();
        }
        let now = SystemTime::now();
        // Before it, a change is older than every watching server.
        let since = watched.since().map(|s| s.checked_sub(RACY).unwrap_or(s));
        // A file not seen before is new when the last look saw every file and its globs matched
        // this one (not when they are new: a server just started, one registered others).
        let whole_before: Option<Watched> = (self.last.as_ref())
            .filter(|(_, whole)| *whole)
            .map(|(w, _)| w.clone());
        let this = self.looks + 1;
        let mut changes = Vec::new();
        let mut full = false;
        let mut looked_at = 0usize;
        let seen = &mut self.seen;
        let mut hashes = Hashes(MAX_HASHES);
        let walk_cut = ws.for_each_file_dated_resuming(&mut self.resume, |path, modified| {
            looked_at += 1;
            if looked_at.is_multiple_of(64) && Instant::now() >= deadline {
                return false;
            }
            let path = Path::new(path);
            if !watched.matches(path) {
                // Watched before (a server now gone): kept, to be compared when it is again.
                if let Some(e) = seen.get_mut(path) {
                    e.look = this;
                    e.unreached = 0;
                }
                return true;
            }
            let Some(time) = modified() else {
                return true;
            };
            let room = seen.len() < MAX_WATCHED;
            match seen.get_mut(path) {
                Some(e) => {
                    let new_time = e.time != time;
                    let racy_now = racy(time, now);
                    let hash = match new_time || e.recheck {
                        // (For the next look, or to compare with what the last read.)
                        true if racy_now || (!new_time && e.hash.is_some()) => {
                            hashes.take(ws, path, deadline)
                        }
                        _ => None,
                    };
                    let again = !new_time && e.recheck && (hash.is_none() || hash != e.hash);
                    if new_time || again {
                        changes.push((path.to_path_buf(), FileChange::Changed));
                    }
                    // Unread, once more for a new time only: not at every look of its first
                    // seconds.
                    let recheck = racy_now && (new_time || hash.is_some());
                    *e = Seen {
                        time,
                        recheck,
                        hash: hash.filter(|_| recheck),
                        look: this,
                        unreached: 0,
                    };
                }
                None if !room => full = true,
                None => {
                    let recheck = racy(time, now);
                    seen.insert(
                        path.to_path_buf(),
                        Seen {
                            time,
                            recheck,
                            hash: if recheck {
                                hashes.take(ws, path, deadline)
                            } else {
                                None
                            },
                            look: this,
                            unreached: 0,
                        },
                    );
                    if whole_before.as_ref().is_some_and(|w| w.matches(path)) {
                        changes.push((path.to_path_buf(), FileChange::Created));
                    } else if since.is_some_and(|since| time >= since) {
                        changes.push((path.to_path_buf(), FileChange::Seen(time)));
                    }
                }
            }
            true
        });
        let gone = self.gone(this);
        let mut found = Found {
            changes: gone.into_iter().map(|p| (p, FileChange::Deleted)).collect(),
            cut: walk_cut || full,
        };
        found.changes.extend(changes);
        // Not whole when stopped by a bound (time, entries) or passing over folders, but whole
        // when a folder could not be read (or is too deep): a file in it is never seen.
        let whole = !full && self.resume.went_through();
        self.last = Some((watched.clone(), whole));
        self.looks = this;
        found
    }

    /// The files look `this` did not see that are gone (deleted, or no longer reached through
    /// their folders), forgotten; looked up for at most [`GONE_WAIT`], first those the look
    /// before saw (a deletion where the walk looks), then those seen longest ago (the others are
    /// looked up at the next look). One still there (ignored now, in a folder not read, past the
    /// walk's bounds) is kept, and forgotten once [`UNREACHED`] rounds in a row found it so (a
    /// look cut short may not have reached it yet).
    fn gone(&mut self, this: u64) -> Vec<PathBuf> {
        let before = this - 1;
        let mut unseen: Vec<(bool, u64, &PathBuf)> = (self.seen.iter())
            .filter(|(_, e)| e.look != this)
            .map(|(p, e)| (e.look != before, e.look, p))
            .collect();
        unseen.sort_unstable_by_key(|(older, look, _)| (*older, *look));
        let until = Instant::now() + GONE_WAIT;
        let (mut gone, mut there) = (Vec::new(), Vec::new());
        for (i, (_, _, path)) in unseen.into_iter().enumerate() {
            if i.is_multiple_of(16) && Instant::now() >= until {
                break;
            }
            match std::fs::symlink_metadata(path) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    gone.push(path.clone())
                }
                _ => there.push(path.clone()),
            }
        }
        for path in &gone {
            self.seen.remove(path);
        }
        self.give_room_back();
        // Looked up now: the next look starts with the others. Not reached by a round that
        // read every folder it could (not only by a look cut short): one round more unreached.
        let round_over = self.resume.reached_end();
        for path in there {
            let Some(e) = self.seen.get_mut(&path) else {
                continue;
            };
            e.look = this;
            e.unreached += u8::from(round_over);
            if e.unreached >= UNREACHED {
                self.seen.remove(&path);
            }
        }
        self.give_room_back();
        gone.sort();
        gone
    }

    /// A table that held many more files than it holds now (a checkout's or a build's files,
    /// since deleted) gives its room back: a map keeps its capacity when entries are removed,
    /// and 30,000 files once seen held about 5 MB for the rest of the run.
    fn give_room_back(&mut self) {
        let len = self.seen.len();
        if self.seen.capacity() > 4 * len.max(SHRINK_FLOOR) {
            self.seen.shrink_to(2 * len);
        }
    }
}

/// Below this many files the table of [`DiskLook::seen`] keeps its room.
const SHRINK_FLOOR: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge_files::Limits;
    use std::fs;

    /// Writes `name` in `dir` with its time of last change `time`.
    fn write_dated(dir: &Path, name: &str, text: &str, time: SystemTime) {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        let f = fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(time).unwrap();
    }

    /// `d` ago, with a part of a millisecond (a fine clock's time).
    fn ago(d: Duration) -> SystemTime {
        SystemTime::now() - d + Duration::from_nanos(123)
    }

    /// Now in whole seconds, as a coarse clock (FAT, HFS+) keeps it.
    fn coarse_now() -> SystemTime {
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        SystemTime::UNIX_EPOCH + Duration::from_secs(t.as_secs())
    }

    /// The changes found, by file name and kind (a first sight as `seen`), sorted.
    fn names(found: &Found) -> Vec<(String, &'static str)> {
        let mut names: Vec<(String, &'static str)> = (found.changes.iter())
            .map(|(p, c)| {
                let kind = match c {
                    FileChange::Created => "created",
                    FileChange::Changed => "changed",
                    FileChange::Deleted => "deleted",
                    FileChange::Seen(_) => "seen",
                };
                (p.file_name().unwrap().to_string_lossy().into_owned(), kind)
            })
            .collect();
        names.sort();
        names
    }

    fn named(list: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const MINUTE: Duration = Duration::from_secs(60);

    fn workspace(d: &Path, limits: Limits) -> Workspace {
        Workspace::new(vec![d.to_str().unwrap().into()], limits)
    }

    #[test]
    fn changes_since_the_last_look_are_found_for_the_files_watched() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["old.py", "kept.py", "gone.py"] {
            write_dated(d, f, "", ago(2 * HOUR));
        }
        write_dated(d, "since.py", "", ago(MINUTE));
        write_dated(d, "notes.txt", "", ago(MINUTE));
        let ws = workspace(d, Limits::default());
        // The server started half an hour ago: a file changed since may be newer than what it
        // read, and is told seen (with its time, for each server to judge).
        let watched = Watched::of_globs(&["**/*.py"], ago(HOUR / 2)).unwrap();
        let far = Instant::now() + Duration::from_secs(10);
        let mut look = DiskLook::default();
        let found = look.look(&ws, &watched, far);
        assert_eq!(names(&found), named(&[("since.py", "seen")]));
        assert!(!found.cut);
        // Nothing changed: nothing found.
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        write_dated(d, "old.py", "x = 1\n", ago(HOUR));
        write_dated(d, "new.py", "", ago(2 * HOUR));
        write_dated(d, "notes.txt", "more", ago(HOUR));
        fs::remove_file(d.join("gone.py")).unwrap();
        let found = look.look(&ws, &watched, far);
        assert_eq!(
            names(&found),
            named(&[
                ("gone.py", "deleted"),
                ("new.py", "created"),
                ("old.py", "changed")
            ])
        );
        // Deletions first.
        assert_eq!(found.changes[0].1, FileChange::Deleted);
        // Written just now on a coarse clock: told changed, and once more at the next look when
        // it holds another text then (a second write in the same second keeps its time); not for
        // the same text (told twice, clangd checked its open files twice for one write).
        let now = coarse_now();
        write_dated(d, "kept.py", "y = 2\n", now);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("kept.py", "changed")])
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        let soon = now + Duration::from_secs(1);
        write_dated(d, "kept.py", "y = 3\n", soon);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("kept.py", "changed")])
        );
        write_dated(d, "kept.py", "y = 4\n", soon);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("kept.py", "changed")])
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Compared at each look while its time is within the tick: a later write in it too.
        write_dated(d, "kept.py", "y = 5\n", soon);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("kept.py", "changed")])
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // A second ago on a fine clock (one file of a checkout): told once.
        write_dated(d, "kept.py", "y = 3\n", ago(Duration::from_secs(1)));
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("kept.py", "changed")])
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Dated ahead (a tarball's, another machine's clock): told once, like any change.
        write_dated(d, "ahead.py", "", SystemTime::now() + HOUR);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("ahead.py", "created")])
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Nothing watched: forgotten.
        assert_eq!(look.look(&ws, &Watched::default(), far), Found::default());
        assert!(look.seen.is_empty() && look.last.is_none());
    }

    /// Files seen once and deleted since (a checkout's, a build's) give back the room they
    /// took: the table does not keep the capacity of its largest moment for the run. (Unix only:
    /// the table is the same on every OS, and a look at 5,000 files under Wine takes over 30 s.)
    #[cfg(unix)]
    #[test]
    fn the_room_of_deleted_files_is_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("gen")).unwrap();
        for i in 0..5000 {
            fs::write(d.join(format!("gen/h{i}.h")), "").unwrap();
        }
        fs::write(d.join("kept.h"), "").unwrap();
        let ws = workspace(d, Limits::default());
        let watched = Watched::of_globs(&["**/*.h"], ago(HOUR)).unwrap();
        let far = || Instant::now() + Duration::from_secs(30);
        let mut look = DiskLook::default();
        // (A look cut short by its time, on a loaded machine, is taken up by the next.)
        for _ in 0..100 {
            look.look(&ws, &watched, far());
            if look.seen.len() == 5001 {
                break;
            }
        }
        assert_eq!(look.seen.len(), 5001);
        fs::remove_dir_all(d.join("gen")).unwrap();
        for _ in 0..100 {
            look.look(&ws, &watched, far());
            if look.seen.len() == 1 {
                break;
            }
        }
        assert_eq!(look.seen.len(), 1);
        assert!(
            look.seen.capacity() <= 4 * SHRINK_FLOOR,
            "capacity {} for 1 file",
            look.seen.capacity()
        );
    }

    /// After a look that ran out of time, or for globs the last look did not have, a file not
    /// seen before is not taken as new: it is told seen when it changed since the servers
    /// started, and nothing when older (hundreds told created at once held pyright's next
    /// answer for seconds). One the last whole look's globs matched is new, whatever its time (a
    /// file moved in). A file no longer watched is kept, and compared when it is again (a server
    /// started again): not told anew.
    #[test]
    fn files_seen_late_are_not_taken_as_created() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for i in 0..300 {
            write_dated(d, &format!("m{i}.py"), "", ago(HOUR));
        }
        write_dated(d, "pyproject.toml", "", ago(HOUR));
        let ws = workspace(d, Limits::default());
        let started = ago(MINUTE);
        let watched = Watched::of_globs(&["**/*.py"], started).unwrap();
        let mut look = DiskLook::default();
        // Cut at once by its deadline: then a whole look finds nothing new.
        let found = look.look(&ws, &watched, Instant::now());
        assert!(found.cut && found.changes.is_empty(), "{found:?}");
        let far = Instant::now() + HOUR;
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // ruff's globs beside pyright's: its file there all along is not new; a module moved in
        // meanwhile (its old time kept) is.
        write_dated(d, "moved.py", "", ago(2 * HOUR));
        let more = Watched::of_globs(&["**/pyproject.toml", "**/*.py"], started).unwrap();
        assert_eq!(
            names(&look.look(&ws, &more, far)),
            named(&[("moved.py", "created")])
        );
        // pyright gone, ruff alone: its files kept, none told deleted...
        let ruff = Watched::of_globs(&["**/pyproject.toml"], started).unwrap();
        assert_eq!(look.look(&ws, &ruff, far), Found::default());
        assert!(look.seen.len() > 300);
        // ... and pyright back: nothing told anew but what changed meanwhile, and what is new
        // since the start.
        write_dated(d, "m7.py", "x = 1\n", ago(HOUR / 2));
        write_dated(d, "fresh.py", "", SystemTime::now());
        let again = Watched::of_globs(&["**/*.py"], started).unwrap();
        assert_eq!(
            names(&look.look(&ws, &again, far)),
            named(&[("fresh.py", "seen"), ("m7.py", "changed")])
        );
    }

    /// Files still there that a look no longer reaches (ignored now, in a folder it cannot
    /// read) are kept for a few looks, then forgotten, freeing their room, and told nothing.
    #[test]
    fn files_no_longer_reached_are_forgotten_after_a_few_looks() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("gen")).unwrap();
        for i in 0..50 {
            write_dated(&d.join("gen"), &format!("g{i}.py"), "", ago(HOUR));
        }
        write_dated(d, "a.py", "", ago(HOUR));
        let watched = Watched::of_globs(&["**/*.py"], ago(MINUTE)).unwrap();
        let far = Instant::now() + HOUR;
        let mut look = DiskLook::default();
        assert_eq!(
            look.look(&workspace(d, Limits::default()), &watched, far),
            Found::default()
        );
        assert_eq!(look.seen.len(), 51);
        // `gen` ignored from now on, and `a.py` deleted: told deleted; the others, still there,
        // told nothing and forgotten within a few looks each (as many as it takes to look each up
        // that often: a slow file system takes more).
        fs::write(d.join(".gitignore"), "gen/\n").unwrap();
        fs::remove_file(d.join("a.py")).unwrap();
        let ws = workspace(d, Limits::default());
        let (mut told, mut looks) = (Vec::new(), 0);
        while !look.seen.is_empty() {
            told.extend(names(&look.look(&ws, &watched, far)));
            looks += 1;
            assert!(looks < 1000, "{:?}", look.seen.keys());
        }
        assert_eq!(told, named(&[("a.py", "deleted")]));
        assert!(looks >= usize::from(UNREACHED), "{looks}");
    }

    /// In a workspace too big for one look (here each look's walk may read 10 entries of 24,
    /// those of the folders it passes over included), the looks that follow one cut short go on
    /// past where it stopped: every file is seen within a few looks, and a change anywhere is
    /// told, not only in the folders a walk reads first. Files in folders a look passed over are
    /// not taken as deleted.
    #[test]
    fn looks_cut_short_go_on_where_the_last_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut files = Vec::new();
        for i in 0..6 {
            let sub = d.join(format!("d{i}"));
            fs::create_dir(&sub).unwrap();
            for f in ["a.py", "b.py", "c.py"] {
                write_dated(&sub, f, "", ago(2 * HOUR));
                files.push(sub.join(f));
            }
        }
        let ws = workspace(
            d,
            Limits {
                max_walk_entries: 10,
                ..Limits::default()
            },
        );
        let watched = Watched::of_globs(&["**/*.py"], ago(HOUR)).unwrap();
        let far = Instant::now() + HOUR;
        let mut look = DiskLook::default();
        // A few rounds of looks: files in folders a look passes over are not lost either.
        for _ in 0..12 {
            let found = look.look(&ws, &watched, far);
            assert!(found.cut && found.changes.is_empty(), "{found:?}");
        }
        assert_eq!(look.seen.len(), files.len(), "{:?}", look.seen.keys());
        let later = ago(HOUR);
        for f in &files {
            fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(later)
                .unwrap();
        }
        let mut told = Vec::new();
        for _ in 0..6 {
            told.extend(look.look(&ws, &watched, far).changes);
        }
        told.sort();
        let changed: Vec<_> = files
            .iter()
            .map(|f| (f.clone(), FileChange::Changed))
            .collect();
        assert_eq!(told, changed);
    }

    /// A walk that does not see every folder (here one past its depth, as one that cannot be
    /// read) still tells a file deleted elsewhere, found gone by its path, and a file created
    /// where it looks; the files it did not reach are not taken as deleted.
    #[test]
    fn a_look_that_misses_a_folder_still_finds_what_changed_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("deep")).unwrap();
        write_dated(d, "a.py", "", ago(HOUR));
        write_dated(d, "b.py", "", ago(HOUR));
        write_dated(&d.join("deep"), "c.py", "", ago(HOUR));
        let watched = Watched::of_globs(&["**/*.py"], ago(MINUTE)).unwrap();
        let far = Instant::now() + HOUR;
        let mut look = DiskLook::default();
        // The whole tree once, then only its top (the folder `deep` not entered).
        let whole = workspace(d, Limits::default());
        assert_eq!(look.look(&whole, &watched, far), Found::default());
        let shallow = workspace(
            d,
            Limits {
                max_depth: 1,
                ..Limits::default()
            },
        );
        let found = look.look(&shallow, &watched, far);
        assert!(found.cut && found.changes.is_empty(), "{found:?}");
        fs::remove_file(d.join("b.py")).unwrap();
        // Moved in with its old time (`mv`, `cp -p`): created all the same.
        write_dated(d, "moved.py", "", ago(2 * HOUR));
        let found = look.look(&shallow, &watched, far);
        assert_eq!(
            names(&found),
            named(&[("b.py", "deleted"), ("moved.py", "created")])
        );
        assert!(look.seen.contains_key(&d.join("deep").join("c.py")));
    }
}
