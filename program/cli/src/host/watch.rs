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
//! The first look after servers begin watching has nothing to compare with: it takes a file
//! changed since the first of them started (or within [`RACY`] of that) as changed, as a server
//! may have read it before its change. A file changed within [`RACY`] of a look is told changed
//! again at the next one (a second write in the same tick of the file system's clock keeps its
//! time). A look stops at its deadline or at [`MAX_WATCHED`] files: what it saw is told, and no
//! file it did not reach is taken as deleted.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use claude_ide_bridge_files::Workspace;
use claude_ide_bridge_lsp::{FileChange, Watched};

/// The most files one look keeps the time of (about 150 bytes each).
pub(super) const MAX_WATCHED: usize = 50_000;

/// How close to a look a file's time of change makes it looked at again at the next look, and
/// how long before the first watching server's start a change counts as after it.
pub(super) const RACY: Duration = Duration::from_secs(2);

/// What the last look saw.
#[derive(Default)]
pub(super) struct DiskLook {
    /// Each file a server watches: its time of last change at the last look that saw it
    /// (`None`: too close to that look to tell a later change by: looked at as changed at the
    /// next one), and the number of that look.
    seen: HashMap<PathBuf, (Option<SystemTime>, u64)>,
    /// The number of the last look; 0 before the first since servers began watching.
    looks: u64,
}

/// What a look found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Found {
    /// The files created, changed and deleted since the last look, in the walk's order (the
    /// deleted last).
    pub changes: Vec<(PathBuf, FileChange)>,
    /// Whether the look stopped before it had seen every file (its deadline, a bound of the
    /// walk, [`MAX_WATCHED`]).
    pub cut: bool,
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
        let first = self.looks == 0;
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
            let settled = now.duration_since(time).is_ok_and(|age| age >= RACY);
            let stamp = settled.then_some(time);
            let room = seen.len() < MAX_WATCHED;
            let change = match seen.get_mut(path) {
                Some(entry) => {
                    let before = std::mem::replace(entry, (stamp, this));
                    (before.0 != Some(time)).then_some(FileChange::Changed)
                }
                None if !room => {
                    full = true;
                    return false;
                }
                None => {
                    seen.insert(path.to_path_buf(), (stamp, this));
                    if first {
                        // Changed since the first watching server started: it may have read
                        // the file before.
                        since
                            .is_some_and(|since| time >= since)
                            .then_some(FileChange::Changed)
                    } else {
                        Some(FileChange::Created)
                    }
                }
            };
            if let Some(change) = change {
                found.changes.push((path.to_path_buf(), change));
            }
            true
        });
        found.cut = walk_cut || full;
        // A file not seen by a whole look is gone; by one cut short, not reached perhaps.
        if !found.cut {
            let mut gone: Vec<PathBuf> = Vec::new();
            seen.retain(|path, (_, look)| {
                let kept = *look == this;
                if !kept {
                    gone.push(path.clone());
                }
                kept
            });
            gone.sort();
            (found.changes).extend(gone.into_iter().map(|p| (p, FileChange::Deleted)));
        }
        self.looks = this;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge_files::Limits;
    use std::fs;

    /// Writes `name` in `dir` with its time of last change `age` ago.
    fn write_aged(dir: &Path, name: &str, text: &str, age: Duration) {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        let f = fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
    }

    fn names(found: &Found) -> Vec<(String, FileChange)> {
        (found.changes.iter())
            .map(|(p, c)| (p.file_name().unwrap().to_string_lossy().into_owned(), *c))
            .collect()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn changes_since_the_last_look_are_found_for_the_files_watched() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_aged(d, "old.py", "", 2 * HOUR);
        write_aged(d, "kept.py", "", 2 * HOUR);
        write_aged(d, "gone.py", "", 2 * HOUR);
        write_aged(d, "since.py", "", 10 * 60 * Duration::from_millis(100));
        write_aged(d, "notes.txt", "", Duration::ZERO);
        let ws = Workspace::new(vec![d.to_str().unwrap().into()], Limits::default());
        // The server started half an hour ago: a file changed since may be newer than what it read.
        let watched = Watched::of_globs(&["**/*.py"], SystemTime::now() - HOUR / 2).unwrap();
        let far = Instant::now() + Duration::from_secs(10);
        let mut look = DiskLook::default();
        let found = look.look(&ws, &watched, far);
        assert_eq!(names(&found), [("since.py".into(), FileChange::Changed)]);
        assert!(!found.cut);
        // Nothing changed: nothing found.
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        write_aged(d, "old.py", "x = 1\n", HOUR);
        write_aged(d, "new.py", "", HOUR);
        write_aged(d, "notes.txt", "more", HOUR);
        fs::remove_file(d.join("gone.py")).unwrap();
        let mut found = names(&look.look(&ws, &watched, far));
        found.sort();
        assert_eq!(
            found,
            [
                ("gone.py".into(), FileChange::Deleted),
                ("new.py".into(), FileChange::Created),
                ("old.py".into(), FileChange::Changed),
            ]
        );
        // A file changed just now is looked at as changed once more at the next look (another
        // write in the same tick of the clock would keep its time), then no more.
        write_aged(d, "kept.py", "y = 2\n", Duration::ZERO);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            [("kept.py".into(), FileChange::Changed)]
        );
        write_aged(d, "kept.py", "y = 2\n", HOUR);
        assert_eq!(
            names(&look.look(&ws, &watched, far)),
            [("kept.py".into(), FileChange::Changed)]
        );
        assert_eq!(look.look(&ws, &watched, far), Found::default());
        // Nothing watched: forgotten; watched again, a first look again.
        assert_eq!(look.look(&ws, &Watched::default(), far), Found::default());
        assert!(look.seen.is_empty() && look.looks == 0);
    }

    #[test]
    fn a_look_cut_short_takes_no_file_for_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for i in 0..200 {
            write_aged(d, &format!("m{i}.py"), "", HOUR);
        }
        let ws = Workspace::new(vec![d.to_str().unwrap().into()], Limits::default());
        let watched = Watched::of_globs(&["**"], SystemTime::now()).unwrap();
        let mut look = DiskLook::default();
        assert_eq!(
            look.look(&ws, &watched, Instant::now() + HOUR),
            Found::default()
        );
        assert_eq!(look.seen.len(), 200);
        // Its deadline passed: cut after the first files, none taken as gone.
        let found = look.look(&ws, &watched, Instant::now());
        assert!(found.cut && found.changes.is_empty(), "{found:?}");
        assert_eq!(look.seen.len(), 200);
        fs::remove_file(d.join("m7.py")).unwrap();
        let found = look.look(&ws, &watched, Instant::now() + HOUR);
        assert_eq!(names(&found), [("m7.py".into(), FileChange::Deleted)]);
    }
}
