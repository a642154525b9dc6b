//! `listFiles` and `getWorkspaceInfo`: bounded walks over the workspace folders, and what they
//! list and skip. The walk itself, over directory handles, is `walk.rs`'s (a directory swapped
//! for a link during the walk is not entered, so a listing never leads outside).
//!
//! `ignore` is used for its gitignore matcher, so the semantics are git's. Each directory's
//! `.gitignore` is read through the handle the walk lists that directory by, never by its path,
//! so the rules are that directory's whatever is put at its path meanwhile: opened without following a link and without waiting (a FIFO never blocks
//! the walk), checked to be a regular file, and read up to
//! [`Limits::max_ignore_file_bytes`](crate::Limits::max_ignore_file_bytes) (a bigger one is
//! skipped). A `.gitignore` that is a symbolic link counts for nothing, wherever it points, as
//! in git since 2.32. `.git/info/exclude` is not in the working tree, and git follows a link
//! there: it is found from the folder as any path is (a link followed while it stays inside the
//! workspace), within the same limits. The walk follows no link and lists none, `.git` is
//! skipped, and the walk stops at the first of its bounds: entries looked at, depth, time,
//! results. Names that are not UTF-8 are left out (JSON cannot name them).

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::walk::IgnoreBudget;
use crate::{Error, Resume, Workspace};

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
/// `**` crosses them. Names are compared as ignore rules compare them
/// ([`IGNORE_CASE`](crate::sys::IGNORE_CASE): ignoring case on Windows and macOS). On Windows a
/// pattern is also read the Windows way ([`Pattern::windows_form`]): `\` separates as `/` does,
/// and one that starts with a drive (`C:\ws\src\*.rs`) or a share (`\\server\share\...`) is
/// absolute.
struct Pattern {
    matcher: GlobMatcher,
    on: On,
    /// Whether absolute paths are Windows ones (`\` between components, matched as `/`).
    windows: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum On {
    Name,
    Relative,
    Absolute,
}

impl Pattern {
    fn new(pattern: &str, max_len: usize) -> Result<Pattern, Error> {
        Self::with(
            pattern,
            max_len,
            crate::sys::WINDOWS_NAMES,
            crate::sys::IGNORE_CASE,
        )
    }

    /// The pattern as read on Windows (`windows`) or elsewhere, names compared ignoring case or
    /// not (`ignore_case`).
    fn with(
        pattern: &str,
        max_len: usize,
        windows: bool,
        ignore_case: bool,
    ) -> Result<Pattern, Error> {
        let bad = |why: String| Error::BadPattern {
            pattern: pattern.chars().take(80).collect(),
            why,
        };
        if pattern.len() > max_len {
            return Err(bad(format!("longer than {max_len} bytes")));
        }
        let (text, on) = if windows {
            Self::windows_form(pattern)
        } else {
            let on = if pattern.starts_with('/') {
                On::Absolute
            } else if pattern.contains('/') {
                On::Relative
            } else {
                On::Name
            };
            (pattern.to_string(), on)
        };
        let glob = GlobBuilder::new(&text)
            .literal_separator(true)
            .case_insensitive(ignore_case)
            // On Windows `\` is a separator (made `/` above), never an escape.
            .backslash_escape(!windows)
            .build()
            .map_err(|e| bad(e.kind().to_string()))?;
        Ok(Pattern {
            matcher: glob.compile_matcher(),
            on,
            windows,
        })
    }

    /// A pattern read the Windows way, `/` between its components, and what it is matched
    /// against: `\` is a separator, as `/` is; `\\?\C:\` and `\\?\UNC\server\` are written
    /// `C:/` and `//server/`; a drive (`C:/...`) or a share (`//server/share/...`) makes it
    /// absolute, as a leading `/` does elsewhere.
    fn windows_form(pattern: &str) -> (String, On) {
        let mut text = pattern.replace('\\', "/");
        if let Some(rest) = text.strip_prefix("//?/") {
            text = match rest.get(..4) {
                Some(unc) if unc.eq_ignore_ascii_case("UNC/") => format!("//{}", &rest[4..]),
                _ => rest.to_string(),
            };
        }
        let b = text.as_bytes();
        let drive = b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'/';
        let on = if drive || text.starts_with('/') {
            On::Absolute
        } else if text.contains('/') {
            On::Relative
        } else {
            On::Name
        };
        (text, on)
    }

    fn matches(&self, name: &str, rel: &str, abs: &str) -> bool {
        match self.on {
            On::Name => self.matcher.is_match(name),
            On::Relative => self.matcher.is_match(rel),
            On::Absolute if self.windows => self.matcher.is_match(abs.replace('\\', "/")),
            On::Absolute => self.matcher.is_match(abs),
        }
    }
}

/// The components of the folder `inner` below the folder `outer` (`Some(vec![])`: the same
/// folder), by their text alone: as Windows compares paths (`windows`: any root form, `/` or
/// `\`, names ignoring case, [`winpath`](crate::sys::winpath)), or component by component.
fn folder_below(inner: &str, outer: &str, windows: bool) -> Option<Vec<String>> {
    if windows {
        use crate::sys::winpath;
        let (inner, outer) = (winpath::parse(inner).ok()?, winpath::parse(outer).ok()?);
        return inner.below(&outer).map(<[String]>::to_vec);
    }
    let rest = Path::new(inner).strip_prefix(outer).ok()?;
    Some(
        rest.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect(),
    )
}

/// Whether two lists of components name the same place below a folder (names compared ignoring
/// case on Windows).
fn same_below(a: &[String], b: &[String], windows: bool) -> bool {
    if windows {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(a, b)| crate::sys::winpath::same_name(a, b))
    } else {
        a == b
    }
}

/// Where folder `i` of these (each as advertised and as on disk) is below folder `k`, when the
/// walk of `k` reaches it: the same components below both the advertised and the real folders
/// (no link on the way, which that walk would not follow). `Some(vec![])`: the same folder.
fn below_among(folders: &[(&str, &str)], i: usize, k: usize, windows: bool) -> Option<Vec<String>> {
    let ((advertised, canonical), (outer_adv, outer_can)) = (folders[i], folders[k]);
    let below = folder_below(advertised, outer_adv, windows)?;
    folder_below(canonical, outer_can, windows)
        .is_some_and(|real| same_below(&below, &real, windows))
        .then_some(below)
}

/// Whether folder `i` of these is walked as part of another one: see [`Workspace::covered`].
fn covered_among(folders: &[(&str, &str)], i: usize, windows: bool) -> bool {
    (0..folders.len()).any(|k| {
        k != i
            && below_among(folders, i, k, windows).is_some_and(|below| !below.is_empty() || k < i)
    })
}

/// Whether the directory at `rel` (components below a folder) is, or holds, the place `below`.
pub(crate) fn holds(rel: &[&str], below: &[String]) -> bool {
    let windows = crate::sys::WINDOWS_NAMES;
    below.len() >= rel.len()
        && below.iter().zip(rel).all(|(b, r)| {
            if windows {
                crate::sys::winpath::same_name(b, r)
            } else {
                b == r
            }
        })
}

impl Workspace {
    /// The gitignore matcher of an ignore file in `rel_dir` below the folder at `root`, from
    /// the bytes `read` gives (`None`: there is none, and the matcher is empty), with the bytes
    /// its rules were built from (to give back to `budget` when they are dropped). `None` once the
    /// walk's budget for ignore files is spent, when this file does not fit in what is left, or
    /// when its rules would take the walk past the free part of the workspace's pool and the
    /// walk holding it did not give it back in time ([`IgnoreBudget::take`]), before any rule
    /// is built: a compiled matcher takes tens of times its text, and one kept for each
    /// level of a deep tree of large ignore files (one file, hard-linked at every level) would
    /// take gigabytes.
    pub(crate) fn matcher(
        root: &Path,
        rel_dir: &str,
        budget: &mut IgnoreBudget<'_>,
        read: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<(Gitignore, u64)> {
        if budget.left == 0 {
            return None;
        }
        let mut b = GitignoreBuilder::new(root.join(rel_dir));
        // `Err` only when the rules built so far do not compile again: there are none yet.
        let _ = b.case_insensitive(crate::sys::IGNORE_CASE);
        let mut taken = 0;
        if let Some(bytes) = read() {
            taken = bytes.len() as u64;
            if !budget.take(taken) {
                return None;
            }
            for line in String::from_utf8_lossy(&bytes).lines() {
                // A line that is not a valid glob is ignored, as git does.
                let _ = b.add_line(None, line);
            }
        }
        Some((b.build().unwrap_or_else(|_| Gitignore::empty()), taken))
    }

    /// The path of `name`, an entry of the folder at `parent_rel` (`""` for the walked folder
    /// itself), relative to the walked folder, `/` between components on every OS.
    pub(crate) fn child_rel(parent_rel: &str, name: &str) -> String {
        if parent_rel.is_empty() {
            name.to_string()
        } else {
            format!("{parent_rel}/{name}")
        }
    }

    /// Whether the walk leaves out `full`: the deepest `.gitignore` with an opinion decides
    /// (`deepest_first`: the matchers of the folders from the entry's own up to the walked
    /// folder), then `.git/info/exclude`.
    pub(crate) fn ignored<'a>(
        deepest_first: impl Iterator<Item = &'a Gitignore>,
        exclude: &Gitignore,
        full: &Path,
        is_dir: bool,
    ) -> bool {
        match deepest_first
            .map(|g| g.matched(full, is_dir))
            .find(|m| !m.is_none())
        {
            Some(m) => m.is_ignore(),
            None => exclude.matched(full, is_dir).is_ignore(),
        }
    }

    /// The folders strictly inside folder `k` that its walk reaches (no link on the way), each
    /// with its components below `k`: when that walk leaves one out (an ignore rule matches it
    /// or a directory holding it), it is walked on its own.
    pub(crate) fn nested_in(&self, k: usize) -> Vec<(usize, Vec<String>)> {
        let folders: Vec<(&str, &str)> = self
            .folders
            .iter()
            .map(|f| (f.advertised.as_str(), f.canonical.as_str()))
            .collect();
        (0..folders.len())
            .filter(|&j| j != k)
            .filter_map(|j| {
                let below = below_among(&folders, j, k, crate::sys::WINDOWS_NAMES)?;
                (!below.is_empty()).then_some((j, below))
            })
            .collect()
    }

    /// Whether folder `i` is walked as part of another one.
    pub(crate) fn covered(&self, i: usize) -> bool {
        // A folder inside another one (or given twice) is walked as part of that one, with
        // its ignore files: walked again, its files were listed and counted twice.
        // (Only when the way from the outer one to it has no link, which that walk would
        // not follow: the same path below both the advertised and the real folders.) Paths
        // are compared as the OS does: on Windows `C:\ws\Sub` is inside `c:\WS`.
        let folders: Vec<(&str, &str)> = self
            .folders
            .iter()
            .map(|f| (f.advertised.as_str(), f.canonical.as_str()))
            .collect();
        covered_among(&folders, i, crate::sys::WINDOWS_NAMES)
    }

    /// The regular files of the workspace whose name (or path, when the pattern has a `/`)
    /// matches the glob `pattern` (every file without one; names compared as ignore rules
    /// compare them: ignoring case on Windows and macOS; on Windows `\` separates too, and a
    /// pattern that starts with a drive or share, `C:\ws\src\*.rs`, is absolute, as one that
    /// starts with `/` is elsewhere), skipping what an editor skips:
    /// `.git`, and what `.gitignore` files and `.git/info/exclude` exclude (a `.gitignore` that
    /// is a symbolic link counts for nothing, as in git). Links are not followed nor listed. A
    /// folder inside another is listed once, as part of the outer one and with its ignore files;
    /// one that those leave out is still listed, walked on its own with its own ignore files.
    /// Bounded by [`Limits`](crate::Limits): at most `max_list_entries`
    /// results and `max_list_bytes` of them, `max_walk_entries` entries looked at, `max_depth`
    /// levels, `max_walk_time`, and twice `max_ignore_file_bytes` of ignore files. A directory
    /// that cannot be read (permissions, no handle left) marks the listing cut short too. On
    /// Windows names no path can name (`nul.txt`, `trail.`: see
    /// [`check_windows_name`](crate::check_windows_name)) are left out, and a workspace with a
    /// folder refused when it was made ([`Workspace::refused_folders`]) or replaced since it was
    /// first used ([`Workspace::replaced_folders`]) is not listed: the refusal is the answer.
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
        // A folder refused when the workspace was made (a network share on Windows) is not
        // listed: the listing says why instead of coming back without its files.
        if let Some(f) = self.folders.iter().find(|f| f.refused.is_some()) {
            f.usable(&f.advertised)?;
        }
        // Nor one with a folder that is no longer the directory it was (`rm -rf proj && git
        // clone ... proj`): the walk would list the old one (empty once removed) as if it were
        // the workspace.
        if let Some(e) = self.replaced_folders().into_iter().next() {
            return Err(e);
        }
        let (max, max_bytes) = (self.limits.max_list_entries, self.limits.max_list_bytes);
        let mut files = Vec::new();
        let mut bytes = 0usize;
        let mut full = false;
        let cut = self.walk_files(|name, rel, abs| {
            if pattern.as_ref().is_none_or(|p| p.matches(name, rel, abs)) {
                if files.len() == max || bytes + abs.len() > max_bytes {
                    full = true;
                    return false;
                }
                bytes += abs.len();
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

    /// Calls `found` with the absolute path (each folder as advertised, then the path below it) of
    /// every regular file a listing without a pattern sees, in the walk's order, until it returns
    /// `false` or a bound of the walk stops it: the one walk of [`Workspace::list`], with its
    /// skips (`.git`, what `.gitignore` files and `.git/info/exclude` exclude, links) and its
    /// bounds on entries looked at, depth, time and ignore files (not the bounds on what a listing
    /// answers: `found` keeps what it needs). Returns whether the walk was cut short (by a bound,
    /// an unreadable directory, or `found`). `doctor` finds a workspace's languages this way.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// for f in ["a.py", "b.py", "venv/lib/c.py", ".gitignore"] {
    ///     let p = dir.path().join(f);
    ///     std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    ///     std::fs::write(p, if f == ".gitignore" { "venv/\n" } else { "" }).unwrap();
    /// }
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// let mut python = 0;
    /// let cut = ws.for_each_file(|path| {
    ///     python += usize::from(path.ends_with(".py"));
    ///     true
    /// });
    /// assert_eq!((python, cut), (2, false));
    /// ```
    pub fn for_each_file(&self, mut found: impl FnMut(&str) -> bool) -> bool {
        self.walk_files(|_, _, abs| found(abs))
    }

    /// [`Workspace::for_each_file`], where `found` may also ask when each file was last modified:
    /// its second argument looks the file up through the handle of the directory the walk found
    /// it in, without following a link (so it never leads outside the workspace), and only when
    /// called: a walk that asks about a few files costs no more than the listing. `None` when the
    /// file is gone or no longer a regular file. The bridge picks the file to open in a
    /// language's servers at `--lsp-warm connect` this way (the most recently modified).
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// use std::time::{Duration, SystemTime};
    /// let dir = tempfile::tempdir().unwrap();
    /// for f in ["old.py", "new.py"] {
    ///     std::fs::write(dir.path().join(f), "").unwrap();
    /// }
    /// let old = std::fs::File::options().write(true).open(dir.path().join("old.py")).unwrap();
    /// old.set_modified(SystemTime::now() - Duration::from_secs(3600)).unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// let mut latest: Option<(SystemTime, String)> = None;
    /// ws.for_each_file_dated(|path, modified| {
    ///     if let Some(t) = modified() {
    ///         if latest.as_ref().is_none_or(|(l, _)| t > *l) {
    ///             latest = Some((t, path.to_string()));
    ///         }
    ///     }
    ///     true
    /// });
    /// assert!(latest.unwrap().1.ends_with("new.py"));
    /// ```
    pub fn for_each_file_dated(
        &self,
        found: impl FnMut(&str, &dyn Fn() -> Option<std::time::SystemTime>) -> bool,
    ) -> bool {
        self.walk_files_dated(found)
    }

    /// [`Workspace::for_each_file_dated`] as one of a series of walks that go on where the last
    /// stopped: a walk passes over the directories an earlier walk of `resume`'s round read whole
    /// (see [`Resume`]), and answers that it was cut short when it did.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Resume, Workspace};
    /// use std::collections::HashSet;
    /// let dir = tempfile::tempdir().unwrap();
    /// for d in ["a", "b", "c"] {
    ///     std::fs::create_dir(dir.path().join(d)).unwrap();
    ///     for f in ["1.py", "2.py", "3.py"] {
    ///         std::fs::write(dir.path().join(d).join(f), "").unwrap();
    ///     }
    /// }
    /// // Each walk reads at most 6 entries: never all 12 at once.
    /// let limits = Limits { max_walk_entries: 6, ..Limits::default() };
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], limits);
    /// let (mut resume, mut seen) = (Resume::default(), HashSet::new());
    /// for _ in 0..3 {
    ///     ws.for_each_file_dated_resuming(&mut resume, |path, _| seen.insert(path.to_string()) || true);
    /// }
    /// assert_eq!(seen.len(), 9);
    /// ```
    pub fn for_each_file_dated_resuming(
        &self,
        resume: &mut Resume,
        found: impl FnMut(&str, &dyn Fn() -> Option<std::time::SystemTime>) -> bool,
    ) -> bool {
        self.walk_files_resuming(resume, found)
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
        let name = Path::new(&path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("/");
        let mut file_count = 0u64;
        let truncated = self.walk_files(|_, _, _| {
            file_count += 1;
            true
        });
        let kind = KINDS
            .iter()
            .find(|(marker, _)| !self.folders.is_empty() && self.at_top(marker))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, windows: bool, ignore_case: bool, file: [&str; 3]) -> bool {
        Pattern::with(pattern, 1024, windows, ignore_case)
            .unwrap()
            .matches(file[0], file[1], file[2])
    }

    /// `listFiles` patterns read the Windows way on Windows, wherever the rule is tested.
    #[test]
    fn patterns_the_windows_way() {
        let a = ["a.rs", "src/a.rs", r"C:\ws\src\a.rs"];
        for (pattern, on) in [
            ("*.rs", On::Name),
            ("*.RS", On::Name),
            (r"src\*.rs", On::Relative),
            ("src/*.rs", On::Relative),
            (r"SRC\**\*.rs", On::Relative),
            (r"C:\ws\src\*.rs", On::Absolute),
            ("c:/WS/src/*.rs", On::Absolute),
            (r"\\?\C:\ws\**\*.rs", On::Absolute),
            (r"C:\ws\**", On::Absolute),
        ] {
            assert_eq!(Pattern::windows_form(pattern).1, on, "{pattern}");
            assert!(matches(pattern, true, true, a), "{pattern}");
        }
        for pattern in [
            r"C:\ws\*.rs",
            r"D:\ws\src\*.rs",
            r"src\*.txt",
            r"ws\src\*.rs",
        ] {
            assert!(!matches(pattern, true, true, a), "{pattern}");
        }
        let unc = ["a.rs", "src/a.rs", r"\\srv\share\ws\src\a.rs"];
        for pattern in [r"\\srv\share\ws\src\*.rs", r"\\?\UNC\SRV\share\ws\**\*.rs"] {
            assert_eq!(Pattern::windows_form(pattern).1, On::Absolute, "{pattern}");
            assert!(matches(pattern, true, true, unc), "{pattern}");
        }
        // Elsewhere `\` escapes, and names compare as the OS's ignore rules do.
        let unix = ["a.rs", "src/a.rs", "/ws/src/a.rs"];
        assert!(matches(
            r"\*.rs",
            false,
            false,
            ["*.rs", "*.rs", "/ws/*.rs"]
        ));
        assert!(!matches(r"src\*.rs", false, false, unix));
        assert!(!matches("*.RS", false, false, unix));
        assert!(matches("*.RS", false, true, unix));
        assert!(matches("/ws/src/*.rs", false, false, unix));
        // The rule the crate uses here: ignoring case where ignore rules do.
        assert_eq!(
            Pattern::new("*.RS", 1024)
                .unwrap()
                .matches("a.rs", "a.rs", "a.rs"),
            crate::sys::IGNORE_CASE
        );
    }

    /// A folder inside another one is walked once, however its path is spelled: on Windows in
    /// another case or root form too.
    #[test]
    fn nested_folders_are_compared_as_the_os_does() {
        let win = [
            (r"C:\x\ws", r"\\?\C:\x\ws"),
            (r"c:\X\WS\sub", r"\\?\C:\x\ws\sub"),
            (r"C:\x\ws\Sub\", r"\\?\C:\x\ws\sub"),
            (r"C:\x\wsx", r"\\?\C:\x\wsx"),
        ];
        assert!(!covered_among(&win, 0, true));
        assert!(covered_among(&win, 1, true));
        assert!(covered_among(&win, 2, true));
        assert!(!covered_among(&win, 3, true));
        // The same folder twice: the first one is walked.
        let twice = [(r"C:\x\ws", r"\\?\C:\x\ws"), (r"c:\X\WS", r"\\?\C:\x\ws")];
        assert!(!covered_among(&twice, 0, true) && covered_among(&twice, 1, true));
        // Reached through a link (another place on disk): walked on its own.
        let linked = [
            (r"C:\x\ws", r"\\?\C:\x\ws"),
            (r"C:\x\ws\l", r"\\?\D:\elsewhere"),
        ];
        assert!(!covered_among(&linked, 1, true));
        // Unix: component by component, case kept.
        let unix = [
            ("/x/ws", "/x/ws"),
            ("/x/WS/sub", "/x/WS/sub"),
            ("/x/ws/sub/", "/x/ws/sub"),
        ];
        assert!(!covered_among(&unix, 1, false));
        assert!(covered_among(&unix, 2, false));
    }
}
