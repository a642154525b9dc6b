//! `listFiles` and `getWorkspaceInfo`: bounded walks over the workspace folders.
//!
//! The walk is the `ignore` crate's (`WalkBuilder`), with its own filters off: it would open the
//! ignore files it finds with a plain `File::open`, which blocks on a FIFO named `.gitignore`
//! and reads a huge one whole. Instead the filter below reads each `.gitignore` through this
//! crate (regular files only, inside the workspace, at most
//! [`Limits::max_ignore_file_bytes`](crate::Limits::max_ignore_file_bytes)) and matches with
//! `ignore`'s own gitignore matcher, so the semantics are git's. Links are never followed, `.git` is skipped, and the walk stops at the first of its
//! bounds: entries looked at, depth, time, results. Each file found is checked on its
//! directory's handle (that directory resolved the crate's way, once per directory) before it is
//! answered, so a directory swapped for a link during the walk does not lead the listing outside;
//! names that are not UTF-8 are left out (JSON cannot name them).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use globset::{GlobBuilder, GlobMatcher};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{Match, WalkBuilder};

use std::os::fd::OwnedFd;

use rustix::fs::{statat, AtFlags, FileType};

use crate::resolve::Missing;
use crate::{Error, Workspace};

/// The files a listing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Absolute paths (each folder as advertised, then the path below it), sorted.
    pub files: Vec<String>,
    /// Whether a bound stopped the walk before it saw everything.
    pub truncated: bool,
}

/// What `getWorkspaceInfo` answers about the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceInfo {
    /// The first folder's last component.
    pub name: String,
    /// The first folder, as advertised.
    pub path: String,
    /// The regular files a listing without a pattern would see, within the same bounds.
    pub file_count: u64,
    /// Whether a bound stopped the count.
    pub file_count_truncated: bool,
    /// What kind of workspace the first folder is, from the files at its top: see
    /// [`Workspace::info`].
    pub kind: &'static str,
}

/// The markers of [`WorkspaceInfo::kind`], first match wins.
const KINDS: &[(&str, &str)] = &[
    (".obsidian", "obsidian-vault"),
    ("Cargo.toml", "rust"),
    ("package.json", "node"),
    ("pyproject.toml", "python"),
    ("setup.py", "python"),
    ("go.mod", "go"),
    ("pom.xml", "java"),
    ("build.gradle", "java"),
    ("CMakeLists.txt", "cmake"),
    (".git", "git"),
];

/// A `listFiles` pattern: against the file name when it has no `/`, else against the path below
/// the folder (or the absolute path, when it starts with `/`). `*` stays within a component,
/// `**` crosses them.
struct Pattern {
    matcher: GlobMatcher,
    on: On,
}

enum On {
    Name,
    Relative,
    Absolute,
}

impl Pattern {
    fn new(pattern: &str, max_len: usize) -> Result<Pattern, Error> {
        let bad = |why: String| Error::BadPattern {
            pattern: pattern.chars().take(80).collect(),
            why,
        };
        if pattern.len() > max_len {
            return Err(bad(format!("longer than {max_len} bytes")));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| bad(e.kind().to_string()))?;
        let on = if pattern.starts_with('/') {
            On::Absolute
        } else if pattern.contains('/') {
            On::Relative
        } else {
            On::Name
        };
        Ok(Pattern {
            matcher: glob.compile_matcher(),
            on,
        })
    }

    fn matches(&self, name: &str, rel: &str, abs: &str) -> bool {
        self.matcher.is_match(match self.on {
            On::Name => name,
            On::Relative => rel,
            On::Absolute => abs,
        })
    }
}

/// The gitignore matchers of the directories seen so far (by path below the folder).
struct Ignores {
    ws: Workspace,
    folder: usize,
    root: PathBuf,
    exclude: Gitignore,
    by_dir: Mutex<HashMap<PathBuf, Arc<Gitignore>>>,
}

impl Ignores {
    fn matcher(&self, rel_dir: &Path, file: &[&str]) -> Gitignore {
        let mut comps: Vec<OsString> = rel_dir.iter().map(OsString::from).collect();
        comps.extend(file.iter().map(OsString::from));
        let dir = self.root.join(rel_dir);
        let mut b = GitignoreBuilder::new(&dir);
        if let Some(bytes) =
            self.ws
                .read_small(self.folder, comps, self.ws.limits.max_ignore_file_bytes)
        {
            for line in String::from_utf8_lossy(&bytes).lines() {
                // A line that is not a valid glob is ignored, as git does.
                let _ = b.add_line(None, line);
            }
        }
        b.build().unwrap_or_else(|_| Gitignore::empty())
    }

    fn of_dir(&self, rel_dir: &Path) -> Arc<Gitignore> {
        let mut map = self.by_dir.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = map.get(rel_dir) {
            return m.clone();
        }
        let m = Arc::new(self.matcher(rel_dir, &[".gitignore"]));
        map.insert(rel_dir.to_path_buf(), m.clone());
        m
    }

    /// Whether git would ignore `rel`: the deepest `.gitignore` with an opinion decides, then
    /// `.git/info/exclude`.
    fn ignored(&self, rel: &Path, is_dir: bool) -> bool {
        let full = self.root.join(rel);
        let mut dir = rel.parent();
        while let Some(d) = dir {
            match self.of_dir(d).matched(&full, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
            dir = d.parent();
        }
        self.exclude.matched(&full, is_dir).is_ignore()
    }
}

impl Workspace {
    /// The handle of directory `rel` below folder `folder`, when it is reached from the folder's
    /// handle without following a link.
    fn real_dir(&self, folder: usize, rel: &Path) -> Option<OwnedFd> {
        let mut comps: Vec<OsString> = rel.iter().map(OsString::from).collect();
        comps.push(OsString::from("."));
        let at = self.walk("", folder, comps.clone(), Missing::Fail).ok()?;
        (at.folder == folder && at.comps == comps && at.file_type() == Some(FileType::Directory))
            .then_some(at.dir)
    }

    /// Walks every folder, calling `found(folder, path below it, absolute path)` for each
    /// regular file not skipped, until it returns `false` or a bound stops the walk. Returns
    /// whether the walk was cut short.
    fn walk_files(&self, mut found: impl FnMut(&str, &str, &str) -> bool) -> bool {
        let deadline = Instant::now() + self.limits.max_walk_time;
        // Every entry the walk reads counts, the ones the filter skips too (ignored trees).
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let max_entries = self.limits.max_walk_entries;
        let over = move |n: usize| n > max_entries || Instant::now() > deadline;
        let mut cut = false;
        let mut verified: Option<(PathBuf, OwnedFd)> = None;
        for (i, folder) in self.folders.iter().enumerate() {
            let root = PathBuf::from(&folder.advertised);
            let mut ignores = Ignores {
                ws: self.clone(),
                folder: i,
                root: root.clone(),
                exclude: Gitignore::empty(),
                by_dir: Mutex::new(HashMap::new()),
            };
            ignores.exclude = ignores.matcher(Path::new(""), &[".git", "info", "exclude"]);
            let ignores = Arc::new(ignores);
            let filter = ignores.clone();
            let filter_root = root.clone();
            let filter_seen = seen.clone();
            let walker = WalkBuilder::new(&root)
                .standard_filters(false)
                .follow_links(false)
                .max_depth(Some(self.limits.max_depth))
                .filter_entry(move |e| {
                    // Past a bound the entry is let through, so that the loop below sees it and
                    // stops the walk as cut short: a skipped entry is passed over silently, and
                    // the walk would read on (and end looking complete).
                    let n = filter_seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if e.depth() == 0 || over(n) {
                        return true;
                    }
                    if e.file_name() == ".git" {
                        return false;
                    }
                    let Ok(rel) = e.path().strip_prefix(&filter_root) else {
                        return false;
                    };
                    let is_dir = e.file_type().is_some_and(|t| t.is_dir());
                    !filter.ignored(rel, is_dir)
                })
                .build();
            for entry in walker {
                if over(seen.load(std::sync::atomic::Ordering::Relaxed)) {
                    return true;
                }
                let Ok(e) = entry else { continue };
                let Some(ft) = e.file_type() else { continue };
                if ft.is_dir() && e.depth() == self.limits.max_depth && e.depth() > 0 {
                    // Not descended into: there may be more below.
                    cut = true;
                }
                if !ft.is_file() {
                    continue;
                }
                // A name that is not UTF-8 cannot be named in JSON: it is left out.
                let Some(rel) = e.path().strip_prefix(&root).ok().and_then(|r| r.to_str()) else {
                    continue;
                };
                let Some(name) = e.file_name().to_str() else {
                    continue;
                };
                let abs = format!("{}/{rel}", folder.advertised.trim_end_matches('/'));
                // The walk goes by path: a directory swapped for a link after its parent was
                // read would be listed through the link. Each file's directory is resolved
                // again the crate's way (kept while the walk stays in it), and the file is kept
                // only if that directory is reached without a link and holds it as a regular
                // file now.
                let parent = Path::new(rel).parent().unwrap_or(Path::new(""));
                if verified.as_ref().is_none_or(|(p, _)| p != parent) {
                    verified = self
                        .real_dir(i, parent)
                        .map(|fd| (parent.to_path_buf(), fd));
                }
                let regular = verified.as_ref().is_some_and(|(_, dir)| {
                    statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                        FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                    })
                });
                if !regular {
                    continue;
                }
                if !found(name, rel, &abs) {
                    return true;
                }
            }
        }
        cut
    }

    /// The regular files of the workspace whose name (or path, when the pattern has a `/`)
    /// matches the glob `pattern` (every file without one), skipping what an editor skips:
    /// `.git`, and what `.gitignore` files and `.git/info/exclude` exclude. Links are not
    /// followed nor listed. Bounded by [`Limits`](crate::Limits): at most `max_list_entries`
    /// results, `max_walk_entries` entries looked at, `max_depth` levels and `max_walk_time`.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// for f in ["src/a.rs", "src/b.txt", "target/debug/x.rs", ".gitignore"] {
    ///     let p = dir.path().join(f);
    ///     std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    ///     std::fs::write(p, if f == ".gitignore" { "target/\n" } else { "" }).unwrap();
    /// }
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// let listing = ws.list(Some("*.rs")).unwrap();
    /// assert_eq!(listing.files.len(), 1);
    /// assert!(listing.files[0].ends_with("/src/a.rs"));
    /// assert!(!listing.truncated);
    /// assert!(ws.list(Some("[")).is_err());
    /// ```
    pub fn list(&self, pattern: Option<&str>) -> Result<Listing, Error> {
        let pattern = pattern
            .filter(|p| !p.is_empty())
            .map(|p| Pattern::new(p, self.limits.max_pattern_len))
            .transpose()?;
        let max = self.limits.max_list_entries;
        let mut files = Vec::new();
        let mut full = false;
        let cut = self.walk_files(|name, rel, abs| {
            if pattern.as_ref().is_none_or(|p| p.matches(name, rel, abs)) {
                if files.len() == max {
                    full = true;
                    return false;
                }
                files.push(abs.to_string());
            }
            true
        });
        files.sort();
        Ok(Listing {
            files,
            truncated: cut || full,
        })
    }

    /// What `getWorkspaceInfo` answers: the first folder's name and path, how many files a
    /// listing sees (within the same bounds), and the kind of workspace, from the first of these
    /// at the folder's top: `.obsidian` (`"obsidian-vault"`), `Cargo.toml` (`"rust"`),
    /// `package.json` (`"node"`), `pyproject.toml` or `setup.py` (`"python"`), `go.mod`
    /// (`"go"`), `pom.xml` or `build.gradle` (`"java"`), `CMakeLists.txt` (`"cmake"`), `.git`
    /// (`"git"`); otherwise `"folder"`.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("Cargo.toml"), "").unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// let info = ws.info();
    /// assert_eq!((info.kind, info.file_count), ("rust", 1));
    /// ```
    pub fn info(&self) -> WorkspaceInfo {
        let path = self.folders.first().map(|f| f.advertised.clone());
        let path = path.unwrap_or_default();
        let name = path.rsplit('/').find(|s| !s.is_empty()).unwrap_or("/");
        let mut file_count = 0u64;
        let truncated = self.walk_files(|_, _, _| {
            file_count += 1;
            true
        });
        let kind = KINDS
            .iter()
            .find(|(marker, _)| {
                !self.folders.is_empty()
                    && self
                        .walk(
                            "",
                            0,
                            vec![OsString::from(marker)],
                            crate::resolve::Missing::Fail,
                        )
                        .is_ok_and(|at| at.stat.is_some())
            })
            .map_or("folder", |(_, kind)| kind);
        WorkspaceInfo {
            name: name.to_string(),
            path: path.clone(),
            file_count,
            file_count_truncated: truncated,
            kind,
        }
    }
}
