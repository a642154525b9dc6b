//! Files the language servers watch on disk (`workspace/didChangeWatchedFiles`). A server reads
//! a file it does not have open from disk, once, and keeps what it read until it is told the file
//! changed: pyright checks a file importing a module against the module's old text, ruff keeps a
//! changed `pyproject.toml`'s old rules. An editor tells servers of such changes from a watcher;
//! the bridge, which wakes for nothing while idle, looks instead: before each `getDiagnostics`
//! it walks the workspace (the walk of `listFiles`: bounded, `.gitignore` honoured, no link
//! followed), compares each file a server's globs match with what the last look saw (its time
//! of last change), and tells the servers ([`Lsp::files_changed`]) of the files created,
//! changed and deleted since.
//!
//! A file not seen before is told created when the look before saw every file the same servers'
//! globs match; otherwise (the first look after servers begin watching, or after a server
//! started again or registered other globs, or after a look cut short) it is told created and
//! changed when it changed since the first of those servers started (or within [`RACY`] before),
//! as a server may have read it before, and not at all when it is older. The program takes that
//! first look as soon as a server's answer comes (`LanguageServers::look_if_new`), so that a file
//! deleted or created before the next question is told. A file written within [`RACY`] before a
//! look is told changed once more at the next one (a second write in the same tick of a coarse
//! clock, FAT's 2 s, keeps its time); one dated in the future is compared as any other. A file
//! not seen by a look is told deleted when the walk saw every folder; otherwise (a folder that
//! cannot be read, a bound of the walk) when it is found gone by its path, while time is left.
//! A look stops at its deadline; past [`MAX_WATCHED`] files it keeps walking without keeping
//! new ones.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use claude_ide_bridge_files::Workspace;
use claude_ide_bridge_lsp::{FileChange, Watched};

/// The most files a look keeps the time of (about 150 bytes each).
pub(super) const MAX_WATCHED: usize = 50_000;

/// How close before a look a file's time of change makes it looked at again at the next look,
/// and how long before the first watching server's start a change counts as after it.
pub(super) const RACY: Duration = Duration::from_secs(2);

/// A file as the last look that saw it found it.
struct Seen {
    /// Its time of last change.
    time: SystemTime,
    /// Written within [`RACY`] before that look: told changed once more at the next one.
    recheck: bool,
    /// The number of that look.
    look: u64,
}

/// What the last looks saw.
#[derive(Default)]
pub(super) struct DiskLook {
    /// Each file a server watches, as the last look that saw it found it.
    seen: HashMap<PathBuf, Seen>,
    /// The number of the last look.
    looks: u64,
    /// What was watched at the last look, and whether it saw every file those globs match.
    last: Option<(Watched, bool)>,
}

/// What a look found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Found {
    /// The files created, changed and deleted since the last look, in the walk's order (the
    /// deleted last).
    pub changes: Vec<(PathBuf, FileChange)>,
    /// Whether the look did not see every file (its deadline, a bound of the walk, a folder that
    /// cannot be read, [`MAX_WATCHED`]).
    pub cut: bool,
}

impl DiskLook {
    /// Whether the last look was of what `watched` watches (no need of a first look for it).
    pub(super) fn looked_at(&self, watched: &Watched) -> bool {
        self.last.as_ref().is_some_and(|(w, _)| w == watched)
    }

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
        // A file not seen before is new when the last look saw every file of the same globs.
        let trusted = matches!(&self.last, Some((w, true)) if w == watched);
        let this = self.looks + 1;
        let mut found = Found::default();
        let mut full = false;
        let mut looked_at = 0usize;
        let seen = &mut self.seen;
        let walk_cut = ws.for_each_file_dated(|path, modified| {
            looked_at += 1;
            if looked_at.is_multiple_of(64) && Instant::now() >= deadline {
                return false;
            }
            let path = Path::new(path);
            if !watched.matches(path) {
                return true;
            }
            let Some(time) = modified() else {
                return true;
            };
            let recent = now.duration_since(time).is_ok_and(|age| age < RACY);
            let room = seen.len() < MAX_WATCHED;
            match seen.get_mut(path) {
                Some(e) => {
                    let new_time = e.time != time;
                    if new_time || e.recheck {
                        found
                            .changes
                            .push((path.to_path_buf(), FileChange::Changed));
                    }
                    // Once more for a new time only: not at every look of its first 2 s.
                    *e = Seen {
                        time,
                        recheck: new_time && recent,
                        look: this,
                    };
                }
                None if !room => full = true,
                None => {
                    seen.insert(
                        path.to_path_buf(),
                        Seen {
                            time,
                            recheck: recent,
                            look: this,
                        },
                    );
                    if trusted {
                        found
                            .changes
                            .push((path.to_path_buf(), FileChange::Created));
                    } else if since.is_some_and(|since| time >= since) {
                        // New, or changed since a server read it: either way read again.
                        found
                            .changes
                            .push((path.to_path_buf(), FileChange::Created));
                        found
                            .changes
                            .push((path.to_path_buf(), FileChange::Changed));
                    }
                }
            }
            true
        });
        // Not seen: gone when the walk saw every folder; otherwise when found gone.
        let mut gone: Vec<PathBuf> = Vec::new();
        let unseen = seen.iter().filter(|(_, e)| e.look != this).map(|(p, _)| p);
        for (i, path) in unseen.enumerate() {
            if walk_cut {
                if i.is_multiple_of(64) && Instant::now() >= deadline {
                    break;
                }
                let missing = std::fs::symlink_metadata(path)
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
                if !missing {
                    continue;
                }
            }
            gone.push(path.clone());
        }
        for path in &gone {
            seen.remove(path);
        }
        gone.sort();
        (found.changes).extend(gone.into_iter().map(|p| (p, FileChange::Deleted)));
        found.cut = walk_cut || full;
        self.last = Some((watched.clone(), !found.cut));
        self.looks = this;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge_files::Limits;
    use std::fs;

    /// Writes `name` in `dir` with its time of last change `age` ago (negative: ahead).
    fn write_dated(dir: &Path, name: &str, text: &str, time: SystemTime) {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        let f = fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(time).unwrap();
    }

    fn ago(d: Duration) -> SystemTime {
        SystemTime::now() - d
    }

    fn names(found: &Found) -> Vec<(String, FileChange)> {
        let mut names: Vec<(String, FileChange)> = (found.changes.iter())
            .map(|(p, c)| (p.file_name().unwrap().to_string_lossy().into_owned(), *c))
            .collect();
        names.sort();
        names
    }

    fn named(list: &[(&str, FileChange)]) -> Vec<(String, FileChange)> {
        list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const MINUTE: Duration = Duration::from_secs(60);

    fn workspace(d: &Path, limits: Limits) -> Workspace {
        Workspace::new(vec![d.to_str().unwrap().into()], limits)
    }

    #[test]
    fn changes_since_the_last_look_are_found_for_the_files_watched() {
        use FileChange::{Changed, Created, Deleted};
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["old.py", "kept.py", "gone.py"] {
            write_dated(d, f, "", ago(2 * HOUR));
        }
        write_dated(d, "since.py", "", ago(MINUTE));
        write_dated(d, "notes.txt", "", ago(MINUTE));
        let ws = workspace(d, Limits::default());
        // The server started half an hour ago: a file changed since may be newer than what it
        // read, and is read again.
        let watched = Watched::of_globs(&["**/*.py"], ago(HOUR / 2)).unwrap();
        let far = Instant::now() + Duration::from_secs(10);
        let mut look = DiskLook::default();
        let found = look.look(&ws, &watched, far);
        assert_eq!(
            names(&found),
            named(&[("since.py", Created), ("since.py", Changed)])
        );
        assert!(!found.cut);
        // Nothing changed: nothing found.
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        write_dated(d, "old.py", "x = 1\n", ago(HOUR));
        write_dated(d, "new.py", "", ago(2 * HOUR));
        write_dated(d, "notes.txt", "more", ago(HOUR));
        fs::remove_file(d.join("gone.py")).unwrap();
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[
                ("gone.py", Deleted),
                ("new.py", Created),
                ("old.py", Changed)
            ])
        );
        // Written just now: told changed once more at the next look (another write in the same
        // tick of the clock would keep its time), then no more.
        write_dated(d, "kept.py", "y = 2\n", SystemTime::now());
        for _ in 0..2 {
            assert_eq!(
                names(&look.look(&ws, &watched, far)),
                named(&[("kept.py", Changed)])
            );
        }
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Dated ahead (a tarball's, another machine's clock): told once, like any change.
        write_dated(d, "ahead.py", "", SystemTime::now() + HOUR);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            named(&[("ahead.py", Created)])
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Nothing watched: forgotten.
        assert_eq!(look.look(&ws, &Watched::default(), far), Found::default());
        assert!(look.seen.is_empty() && look.last.is_none());
    }

    /// After a look that did not see every file, or with other globs watched, a file not seen
    /// before is not taken as new unless it changed since the servers started: what was there
    /// all along is not told created (hundreds at once held pyright's next answer for seconds).
    #[test]
    fn files_seen_late_are_not_taken_as_created() {
        use FileChange::{Changed, Created};
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for i in 0..300 {
            write_dated(d, &format!("m{i}.py"), "", ago(HOUR));
        }
        let ws = workspace(d, Limits::default());
        let started = ago(MINUTE);
        let watched = Watched::of_globs(&["**"], started).unwrap();
        let mut look = DiskLook::default();
        // Cut at once by its deadline: then a whole look finds nothing new.
        let found = look.look(&ws, &watched, Instant::now());
        assert!(found.cut && found.changes.is_empty(), "{found:?}");
        let far = Instant::now() + HOUR;
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Another registration (ruff's beside pyright's, a server started again): the same.
        write_dated(d, "pyproject.toml", "", ago(HOUR));
        let more = Watched::of_globs(&["**/pyproject.toml", "**"], started).unwrap();
        assert_eq!(look.look(&ws, &more, far), Found::default());
        // A file created since the start, seen first by such a look: told.
        write_dated(d, "fresh.py", "", SystemTime::now());
        let again = Watched::of_globs(&["**"], started).unwrap();
        assert_eq!(
            names(&look.look(&ws, &again, far)),
            named(&[("fresh.py", Created), ("fresh.py", Changed)])
        );
    }

    /// A walk that does not see every folder (here one past its depth, as one that cannot be
    /// read) still tells a file deleted elsewhere, found gone by its path; the files it did not
    /// reach are not taken as deleted.
    #[test]
    fn a_look_that_misses_a_folder_still_finds_deletions() {
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
        assert_eq!(
            look.look(&workspace(d, Limits::default()), &watched, far),
            Found::default()
        );
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
        let found = look.look(&shallow, &watched, far);
        assert_eq!(names(&found), named(&[("b.py", FileChange::Deleted)]));
        assert!(look.seen.contains_key(&d.join("deep").join("c.py")));
    }
}
