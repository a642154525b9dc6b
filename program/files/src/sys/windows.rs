//! The Windows backend: the same `Workspace` methods as the Unix one, built on cap-std's `Dir`.
//!
//! A wire path (or a `file:///C:/...` URI, read by the engine's `uri_to_windows_path`: one
//! that writes no drive, `file:///c/...`, is refused) first goes through the lexical step of
//! [`winpath`](super::winpath): a drive letter or UNC root in any of its forms (`C:\`, `c:/`,
//! `\\?\C:\`, `\\server\share\`, `\\?\UNC\server\share\`), `/` and `\` both separators, `.` and
//! `..` resolved without climbing out, and every name that Windows would read as something else
//! refused (reserved device names, alternate data streams, trailing dots and spaces, wildcard
//! characters). The folder is picked by comparing roots and names case-insensitively.
//!
//! The components below the folder are then resolved by cap-std from the folder's own directory
//! handle: one component at a time, each opened relative to the handle of the one before; a
//! symbolic link or junction (any name-surrogate reparse point) is followed only while it stays
//! inside that folder (a relative target that does not climb out of it), and any other, a
//! junction's absolute target included, is refused as leading outside. Short (8.3) names and
//! case variants are resolved by Windows itself, inside the directory whose handle the walk
//! holds, so they cannot lead out either; paths past `MAX_PATH` work, since no full path is
//! handed to a path-based call that would be cut there.
//!
//! What differs from the Unix backend: a link is followed only within its own folder (a link
//! from one folder into another is refused, where Unix follows it); a write whose last
//! component is a link is refused rather than written through; a path is shown with its
//! components as given, joined with `\` (cap-std does not say where links led), but a written
//! file by the name it has on disk; and a new file gets the folder's inherited access list
//! (there is no mode to keep), a replaced one keeps its own (`winacl.rs`).
//!
//! A folder on a network share (`\\server\share\...`, `\\?\UNC\...`, `\\wsl.localhost\...`, a
//! mapped network drive) is refused when the workspace is made (`winpath::network_share`, and
//! [`Workspace::refused_folders`]): cap-std names a directory by its handle's path to rename in
//! it, remove from it, make a directory in it or list it, and that path loses its `\\?\` there
//! (`UNC\server\share\...`, relative to the current directory).
//!
//! A replace keeps the replaced file's name on disk (a case variant or short name given finds
//! it: `on_disk_name`), its hidden, system and not-content-indexed attributes
//! (`KEPT_ATTRIBUTES`) and its access list (`winacl.rs`); not its alternate data streams or
//! creation time. A target
//! another program holds open is waited for briefly (`rename_over`); one the rename is refused
//! for another reason, with the same "access denied" (the read-only attribute, a directory
//! swapped in, an access list that does not let the user delete it), is refused at once, saying
//! which (`not_held_open`). A failed write's temporary file is removed through a handle of its
//! own (`remove_temp`), never left behind for want of a path.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cap_fs_ext::{DirExt, FollowSymlinks, MetadataExt, OpenOptionsFollowExt};
use cap_std::ambient_authority;
use cap_std::fs::{
    Dir, File, FileType, MetadataExt as _, OpenOptions, OpenOptionsExt as _, ReadDir,
};

use super::winacl::{self, AccessList};
use super::winpath::{self, Root, WinPath};
use crate::walk::{Entry, Listing, NotEntered};
use crate::{count_lines, read_capped, within, Error, Opened, TempName, Workspace};

/// Windows' `ERROR_TOO_MANY_LINKS`, cap-std's error for a chain of links longer than it follows.
const ERROR_TOO_MANY_LINKS: i32 = 1142;

/// `FILE_ATTRIBUTE_HIDDEN`, `_SYSTEM` and `_NOT_CONTENT_INDEXED`: the attributes a replaced file
/// keeps (its new contents also get `FILE_ATTRIBUTE_ARCHIVE`, as any changed file does). Its
/// access list is kept too (`winacl.rs`). Not kept: its alternate data streams and creation
/// time, and the read-only attribute (a read-only file is not replaced).
const KEPT_ATTRIBUTES: u32 = 0x2 | 0x4 | 0x2000;
/// `FILE_ATTRIBUTE_ARCHIVE`.
const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x20;
/// The `DELETE` access right.
const DELETE: u32 = 0x0001_0000;
/// `FILE_FLAG_DELETE_ON_CLOSE`.
const FILE_FLAG_DELETE_ON_CLOSE: u32 = 0x0400_0000;
/// The `GENERIC_WRITE` access right.
const GENERIC_WRITE: u32 = 0x4000_0000;
/// The `FILE_WRITE_DATA` access right.
const FILE_WRITE_DATA: u32 = 0x2;
/// Windows' `ERROR_ACCESS_DENIED`.
const ERROR_ACCESS_DENIED: i32 = 5;
/// `FILE_SHARE_READ`, `FILE_SHARE_WRITE`, `FILE_SHARE_DELETE`.
const FILE_SHARE_READ: u32 = 0x1;
const FILE_SHARE_WRITE: u32 = 0x2;
const FILE_SHARE_DELETE: u32 = 0x4;

/// How a workspace opens the directories on a path's way: nothing to choose here (cap-std
/// opens them), the Unix backend's choice of flags having no Windows counterpart.
pub(crate) type DirFlags = ();

/// The directories' flags of every workspace ([`DirFlags`]).
pub(crate) const DIR_FLAGS: DirFlags = ();

/// A folder as given on the command line, as the workspace keeps it: an absolute Windows path
/// with `\` separators, `.` and `..` resolved (a `\\?\` prefix kept out); anything else as given.
pub(crate) fn advertised(folder: String) -> String {
    match winpath::parse(&folder) {
        Ok(p) if p.root.is_some() => render(&p),
        _ => folder,
    }
}

/// An absolute parsed path, written out.
fn render(p: &WinPath) -> String {
    let mut s = match &p.root {
        Some(Root::Drive(d)) => format!("{d}:"),
        Some(Root::Unc { server, share }) => format!(r"\\{server}\{share}"),
        None => String::new(),
    };
    if p.comps.is_empty() {
        s.push('\\');
    }
    for c in &p.comps {
        s.push('\\');
        s.push_str(c);
    }
    s
}

/// Whether a process of id `pid` is running, as the sweep of left temporary files asks: never
/// said here. Windows swaps no names, so a running write's temporary file never holds a user's
/// file, and no write takes the hour after which one counts as left behind.
pub(crate) fn process_running(_pid: u32) -> bool {
    false
}

/// Which directory `folder` is now (volume serial number and file index, read from its handle).
pub(crate) fn identity(folder: &str) -> Option<(u64, u64)> {
    let dir = Dir::open_ambient_dir(folder, ambient_authority()).ok()?;
    let md = dir.dir_metadata().ok()?;
    Some((md.dev(), md.ino()))
}

/// Whether cap-std refused because a path (a link's target, most often) leads out of its `Dir`.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
        && e.get_ref()
            .is_some_and(|inner| inner.to_string().contains("outside of the filesystem"))
}

/// An error of cap-std on the way to `path`, as this crate names it.
fn failed(path: &str, op: &'static str, e: io::Error) -> Error {
    if is_escape(&e) {
        Error::outside(
            path,
            "a symbolic link or junction on the way leads out of its workspace folder",
        )
    } else if e.raw_os_error() == Some(ERROR_TOO_MANY_LINKS) {
        Error::SymlinkLoop { path: path.into() }
    } else {
        Error::io(path, op, e)
    }
}

/// [`failed`] for an access to `comps` under `dir`, except that a failure because a name on its
/// way is a file (Windows says "not found", "already exists" or "directory name invalid") is
/// said as such.
fn failed_at(dir: &Dir, comps: &[String], path: &str, op: &'static str, e: io::Error) -> Error {
    for k in 1..comps.len() {
        match dir.metadata(rel(&comps[..k])) {
            Ok(md) if md.is_dir() => {}
            Ok(_) => {
                return Error::NotADirectory {
                    path: path.into(),
                    on_the_way: comps[..k].join(r"\"),
                }
            }
            Err(_) => break,
        }
    }
    failed(path, op, e)
}

fn kind_name(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// The relative path of components below a folder (`.` for the folder itself).
fn rel(comps: &[String]) -> PathBuf {
    if comps.is_empty() {
        PathBuf::from(".")
    } else {
        comps.iter().collect()
    }
}

/// Reads the small regular file `name` in `dir` (a `.gitignore`, `.git\info\exclude`), at most
/// `cap` bytes: `None` when it is missing, not a regular file, bigger than `cap`, or (unless
/// `follow`) a link.
fn read_small_in(dir: &Dir, name: &str, cap: u64, follow: bool) -> Option<Vec<u8>> {
    let mut opts = OpenOptions::new();
    opts.read(true).follow(if follow {
        FollowSymlinks::Yes
    } else {
        FollowSymlinks::No
    });
    if !follow && !dir.symlink_metadata(name).ok()?.is_file() {
        return None;
    }
    let file = dir.open_with(name, &opts).ok()?;
    let md = file.metadata().ok()?;
    if !md.is_file() {
        return None;
    }
    read_capped("", file, md.len(), cap).ok()
}

/// A directory the listing's walk reads (see `walk.rs`): a cap-std handle and its entries.
pub(crate) struct Listed {
    dir: Dir,
    entries: ReadDir,
}

impl Listed {
    fn of(dir: Dir) -> io::Result<Listed> {
        let entries = dir.entries()?;
        Ok(Listed { dir, entries })
    }
}

/// Links and junctions are neither followed nor listed; each directory is opened relative to
/// its parent's handle without following a link.
impl Listing for Listed {
    fn top(ws: &Workspace, i: usize) -> Option<Listed> {
        Listed::of(ws.open_folder(i, "").ok()?).ok()
    }

    fn exclude(&self, _: &Workspace, _: usize, cap: u64) -> Option<Vec<u8>> {
        read_small_in(&self.dir, r".git\info\exclude", cap, true)
    }

    fn gitignore(&self, cap: u64) -> Option<Vec<u8>> {
        read_small_in(&self.dir, ".gitignore", cap, false)
    }

    fn next_entry(&mut self) -> Option<io::Result<Entry>> {
        let entry = match self.entries.next()? {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e)),
        };
        let name = entry.file_name();
        let (Some(name), Ok(kind)) = (name.to_str(), entry.file_type()) else {
            return Some(Ok(Entry::Other));
        };
        // A name every path to it is refused for (`nul.txt`, `aux.c`, `trail.`, made through
        // `\\?\`): listed, it could be neither read nor written.
        if winpath::check_name(name).is_err() {
            return Some(Ok(Entry::Other));
        }
        Some(Ok(if kind.is_symlink() {
            Entry::Other
        } else if kind.is_dir() {
            Entry::Dir(name.to_string())
        } else if kind.is_file() {
            Entry::File(name.to_string())
        } else {
            Entry::Other
        }))
    }

    fn child(&self, name: &str) -> Result<Listed, NotEntered> {
        match self.dir.open_dir_nofollow(name).and_then(Listed::of) {
            Ok(listed) => Ok(listed),
            // Gone since it was read: passed over.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(NotEntered::Gone),
            // Swapped for a link, not readable, out of handles: not whole.
            Err(_) => Err(NotEntered::Failed),
        }
    }

    fn modified(&self, name: &str) -> Option<std::time::SystemTime> {
        let md = self.dir.symlink_metadata(name).ok()?;
        if !md.is_file() {
            return None;
        }
        md.modified().ok().map(|t| t.into_std())
    }

    fn is_git(name: &str) -> bool {
        name.eq_ignore_ascii_case(".git")
    }

    fn absolute(folder: &str, rel: &str) -> String {
        format!(
            "{}\\{}",
            folder.trim_end_matches('\\'),
            rel.replace('/', "\\")
        )
    }
}

impl Workspace {
    /// The folder a wire path is in and its plain components below it (see the module docs).
    pub(crate) fn lexical(&self, path: &str) -> Result<(usize, Vec<String>), Error> {
        // (Relative, it would name the first folder itself, as on Unix.)
        if path.is_empty() {
            return Err(Error::outside(path, "path is empty"));
        }
        let given = winpath::from_uri(path).map_err(|why| Error::outside(path, why))?;
        // Every use is a file's: `a.txt\` names a directory, not the file `a.txt`.
        if crate::ends_as_directory(&given, &['/', '\\']) {
            return Err(Error::NotRegular {
                path: path.into(),
                kind: "a directory (the path ends with a separator, `.` or `..`)",
            });
        }
        let parsed = winpath::parse(&given).map_err(|why| Error::outside(path, why))?;
        if self.folders.is_empty() {
            return Err(Error::outside(path, "there is no workspace folder"));
        }
        if parsed.root.is_none() {
            return Ok((0, parsed.comps));
        }
        let mut best: Option<(usize, &[String], WinPath)> = None;
        for (i, f) in self.folders.iter().enumerate() {
            for root in [&f.advertised, &f.canonical] {
                let Ok(folder) = winpath::parse(root) else {
                    continue;
                };
                if let Some(rest) = parsed.below(&folder) {
                    if best.as_ref().is_none_or(|(_, b, _)| rest.len() < b.len()) {
                        best = Some((i, rest, folder));
                    }
                }
            }
        }
        let (i, rest, folder) =
            best.ok_or_else(|| Error::outside(path, "not inside a workspace folder"))?;
        self.same_folder_by_another_case(i, &folder, &parsed.comps[..folder.comps.len()], path)?;
        Ok((i, rest.to_vec()))
    }

    /// `Ok` when `given`, the names of a path's part that matched the workspace folder `folder`
    /// (of `self.folders[i]`) case aside, are its names, or name the same directory (volume and
    /// file index). In a case-sensitive directory (`fsutil file setCaseSensitiveInfo`, what WSL
    /// makes the folders it creates on a Windows drive) `PROJ` and `proj` are two directories:
    /// the rest of the path is resolved from the folder's handle, but claude writes the path as
    /// it gave it, into the other one.
    fn same_folder_by_another_case(
        &self,
        i: usize,
        folder: &WinPath,
        given: &[String],
        path: &str,
    ) -> Result<(), Error> {
        if given == folder.comps.as_slice() {
            return Ok(());
        }
        let spelled = render(&WinPath {
            root: folder.root.clone(),
            comps: given.to_vec(),
        });
        let f = &self.folders[i];
        let ours = f
            .identity
            .get()
            .copied()
            .or_else(|| identity(&f.advertised));
        match (identity(&spelled), ours) {
            (Some(a), Some(b)) if a == b => Ok(()),
            _ => Err(Error::outside(
                path,
                format!(
                    "{spelled} differs from the workspace folder {} in case, and is not the same \
                     directory (a case-sensitive directory)",
                    f.advertised
                ),
            )),
        }
    }

    /// The folder's directory handle, refused when the folder's path has come to name another
    /// directory since the workspace was made (see `unix/resolve.rs` for why).
    pub(crate) fn open_folder(&self, folder: usize, path: &str) -> Result<Dir, Error> {
        let f = &self.folders[folder];
        // A folder on a network share was refused when the workspace was made: cap-std would
        // name its directories by a path relative to the current directory (`winpath`'s
        // `network_share`).
        f.usable(path)?;
        let dir = Dir::open_ambient_dir(&f.advertised, ambient_authority())
            .map_err(|e| Error::folder(path, "opening the workspace folder", e))?;
        let md = dir.dir_metadata().map_err(|e| Error::io(path, "stat", e))?;
        let now = (md.dev(), md.ino());
        f.still_itself(path, now)?;
        Ok(dir)
    }

    /// `Ok` when what `comps` names below folder `i` (its deepest part that exists) is, as the
    /// system finally names it, inside that folder as the system finally names it: links and
    /// junctions resolved by the system itself (`canonicalize`: the final name of a handle it
    /// opens). The walk from the folder's handle refuses links and junctions leading out
    /// already; this asks the system the same, for a link the walk does not see as one (Wine
    /// shows a Unix symbolic link as what it leads to, and a write through one went outside).
    /// A name the system cannot give (a file system that keeps none) leaves the walk's word.
    fn finally_inside(&self, i: usize, comps: &[String], path: &str) -> Result<(), Error> {
        let f = &self.folders[i];
        let Ok(folder) = winpath::parse(&f.canonical) else {
            return Ok(());
        };
        for k in (0..=comps.len()).rev() {
            match std::fs::canonicalize(self.display(i, &comps[..k])) {
                Ok(real) => {
                    let real = real.to_string_lossy();
                    return match winpath::parse(&real) {
                        Ok(p) if p.below(&folder).is_some() => Ok(()),
                        _ => Err(Error::outside(
                            path,
                            format!("it leads to {real}, outside {}", f.advertised),
                        )),
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(_) => return Ok(()),
            }
        }
        Ok(())
    }

    /// The path shown for components below a folder: the folder as advertised, then the
    /// components, joined with `\`.
    fn display(&self, folder: usize, comps: &[String]) -> String {
        let mut s = self.folders[folder].advertised.clone();
        for c in comps {
            if !s.ends_with('\\') {
                s.push('\\');
            }
            s.push_str(c);
        }
        s
    }

    /// Opens the regular file at `path` for reading: the type is checked before the open (no
    /// device is opened) and again on the opened handle, which also gives the size.
    fn open_regular(&self, path: &str) -> Result<(String, File, u64), Error> {
        let (i, comps) = self.lexical(path)?;
        let dir = self.open_folder(i, path)?;
        let at = rel(&comps);
        let looked = dir
            .metadata(&at)
            .map_err(|e| failed_at(&dir, &comps, path, "looking up", e))?;
        if !looked.is_file() {
            return Err(Error::NotRegular {
                path: path.into(),
                kind: kind_name(looked.file_type()),
            });
        }
        let file = dir.open(&at).map_err(|e| failed(path, "opening", e))?;
        self.finally_inside(i, &comps, path)?;
        let md = file.metadata().map_err(|e| Error::io(path, "stat", e))?;
        if !md.is_file() {
            return Err(Error::NotRegular {
                path: path.into(),
                kind: kind_name(md.file_type()),
            });
        }
        Ok((self.display(i, &comps), file, md.len()))
    }

    /// Opens a regular file inside the workspace for reading, without reading it: its size is
    /// known before its bytes are taken ([`Opened`]). A file over
    /// [`Limits::max_read_bytes`](crate::Limits::max_read_bytes) is refused here.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Error, Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.txt"), "four").unwrap();
    /// std::fs::write(dir.path().join("big"), vec![b'x'; 2048]).unwrap();
    /// let ws = Workspace::new(
    ///     vec![dir.path().to_str().unwrap().into()],
    ///     Limits { max_read_bytes: 1024, ..Limits::default() },
    /// );
    /// let opened = ws.open("a.txt").unwrap();
    /// assert_eq!(opened.size(), 4);
    /// assert_eq!(opened.read_text().unwrap().content, "four");
    /// assert!(matches!(ws.open("big"), Err(Error::TooLarge { size: 2048, .. })));
    /// ```
    pub fn open(&self, path: &str) -> Result<Opened, Error> {
        let (shown, file, size) = self.open_regular(path)?;
        let cap = self.limits.max_read_bytes;
        within(path, size, cap)?;
        Ok(Opened {
            asked: path.into(),
            path: shown,
            file: file.into_std(),
            size,
            cap,
        })
    }

    /// Counts the lines of a regular text file inside the workspace (as `str::lines` would), for
    /// `openFile`, reading it in small pieces, never more than the read limit in all.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree").unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// assert_eq!(ws.line_count("a.txt").unwrap(), 3);
    /// ```
    pub fn line_count(&self, path: &str) -> Result<u64, Error> {
        let (_, file, size) = self.open_regular(path)?;
        let cap = self.limits.max_read_bytes;
        within(path, size, cap)?;
        count_lines(path, file.take(cap.saturating_add(1)), cap)
    }

    /// Whether `path` is a regular file inside the workspace; the path it is known by.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.rs"), "").unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// assert!(ws.regular_file("a.rs").is_ok());
    /// assert!(ws.regular_file("b.rs").is_err());
    /// ```
    pub fn regular_file(&self, path: &str) -> Result<String, Error> {
        let (i, comps) = self.lexical(path)?;
        let dir = self.open_folder(i, path)?;
        let md = dir
            .metadata(rel(&comps))
            .map_err(|e| failed_at(&dir, &comps, path, "looking up", e))?;
        if !md.is_file() {
            return Err(Error::NotRegular {
                path: path.into(),
                kind: kind_name(md.file_type()),
            });
        }
        self.finally_inside(i, &comps, path)?;
        Ok(self.display(i, &comps))
    }

    /// Whether a write to `path` would be allowed now: inside the workspace (missing directories
    /// on the way would be created inside it), not naming anything but a regular file, and an
    /// existing one the user may write (not read-only, its access list letting them).
    /// Returns the path it is known by.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// assert!(ws.writable(r"new\dir\file.rs").unwrap().ends_with(r"\new\dir\file.rs"));
    /// assert!(ws.writable(".").is_err());
    /// ```
    pub fn writable(&self, path: &str) -> Result<String, Error> {
        let (i, comps) = self.lexical(path)?;
        let dir = self.open_folder(i, path)?;
        self.finally_inside(i, &comps, path)?;
        // The deepest part of the path that exists must be a directory, or the whole path a
        // regular file (a link at the end is refused, as a write would refuse it).
        for k in (0..=comps.len()).rev() {
            let at = rel(&comps[..k]);
            let md = if k == comps.len() {
                dir.symlink_metadata(&at)
            } else {
                dir.metadata(&at)
            };
            match md {
                // One the user may not write (read-only, or its access list) is refused, as
                // a write of it would be.
                Ok(md) if k == comps.len() && md.is_file() => {
                    let op = "checking that the file may be written";
                    if md.permissions().readonly() {
                        return Err(read_only(path, op));
                    }
                    may_write(&dir, &at).map_err(|e| Error::io(path, op, e))?;
                    return Ok(self.display(i, &comps));
                }
                Ok(md) if k < comps.len() && md.is_dir() => return Ok(self.display(i, &comps)),
                Ok(md) if k == comps.len() => {
                    return Err(Error::NotRegular {
                        path: path.into(),
                        kind: kind_name(md.file_type()),
                    })
                }
                Ok(_) => {
                    return Err(Error::NotADirectory {
                        path: path.into(),
                        on_the_way: comps[..k].join(r"\"),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(failed(path, "looking up", e)),
            }
        }
        Err(Error::NotFound { path: path.into() })
    }

    /// Writes `contents` to `path` atomically: a temporary file is created new in the same
    /// directory (relative to its handle), written and flushed to disk, then renamed over the
    /// target (replacing it); a failed write leaves the old file as it was, and removes its
    /// temporary file. Missing directories on the way are created. A read-only file is refused,
    /// and so is one whose access list does not let the user write or replace it, and a path
    /// whose last component is a link or junction. A file replaced keeps the name it has on
    /// disk (`README.MD` or a short name `A-VERY~1.TXT` given: `Readme.md`,
    /// `a-very-long-file-name.txt` kept), its access list (refused when that cannot be kept)
    /// and its hidden, system and not-content-indexed attributes; one held open by another program is waited for about half a second, then
    /// refused ("open in another program"). Returns the path written, its last component as it
    /// is on disk.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// ws.write(r"src\main.rs", b"fn main() {}\n").unwrap();
    /// assert_eq!(std::fs::read(dir.path().join("src").join("main.rs")).unwrap(), b"fn main() {}\n");
    /// ```
    pub fn write(&self, path: &str, contents: &[u8]) -> Result<String, Error> {
        self.write_over(path, contents, None)
    }

    /// One try of [`Workspace::write`] ([`Workspace::write_over`]).
    pub(crate) fn write_once(
        &self,
        path: &str,
        contents: &[u8],
        expected: Option<&[u8]>,
    ) -> Result<String, Error> {
        let (i, comps) = self.lexical(path)?;
        let dir = self.open_folder(i, path)?;
        self.finally_inside(i, &comps, path)?;
        let Some((name, parents)) = comps.split_last() else {
            return Err(Error::NotRegular {
                path: path.into(),
                kind: "a directory",
            });
        };
        // The directories on the way that are not there yet: made for this write, and removed
        // (when still empty) if it fails.
        let missing = (1..=parents.len())
            .find(|&n| {
                dir.symlink_metadata(rel(&parents[..n]))
                    .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
            })
            .unwrap_or(parents.len() + 1);
        let made: Vec<PathBuf> = (missing..=parents.len())
            .map(|n| rel(&parents[..n]))
            .collect();
        let written = (|| {
            let below;
            let parent = if parents.is_empty() {
                &dir
            } else {
                let at = rel(parents);
                dir.create_dir_all(&at)
                    .map_err(|e| failed_at(&dir, &comps, path, "creating a directory", e))?;
                below = dir
                    .open_dir(&at)
                    .map_err(|e| failed(path, "opening a directory", e))?;
                &below
            };
            // Replacing a file keeps its attributes (those of `KEPT_ATTRIBUTES`) and its name as it
            // is on disk, which `name` may spell in another case or as its short (8.3) name.
            // And its access list, for the new file: the folder's may let others read it.
            let (attributes, on_disk, acl) = match parent.symlink_metadata(name) {
                Ok(md) if md.is_file() => {
                    // Replacing a file is a write to it: a read-only one is refused, as an editor
                    // would refuse it, and so is one whose access list does not let the user write
                    // it (as the Unix backend's `access(W_OK)` check does), although the directory
                    // might take the rename.
                    if md.permissions().readonly() {
                        return Err(read_only(path, "checking that the file may be written"));
                    }
                    may_write(parent, name)
                        .map_err(|e| Error::io(path, "checking that the file may be written", e))?;
                    let kept = md.file_attributes() & KEPT_ATTRIBUTES;
                    let kept = if kept == 0 {
                        0
                    } else {
                        kept | FILE_ATTRIBUTE_ARCHIVE
                    };
                    let acl = access_list(parent, name)
                        .map_err(|e| Error::io(path, "reading the file's access list", e))?;
                    (
                        kept,
                        on_disk_name(parent, name, self.limits.max_walk_entries),
                        acl,
                    )
                }
                Ok(md) => {
                    return Err(Error::NotRegular {
                        path: path.into(),
                        kind: kind_name(md.file_type()),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => (0, name.clone(), None),
                Err(e) => return Err(failed(path, "looking up", e)),
            };
            let (tmp_name, tmp) = create_temp(parent, path, attributes, acl.as_ref())?;
            let written = (|| {
                let mut file = tmp;
                file.write_all(contents)
                    .map_err(|e| Error::io(path, "writing", e))?;
                file.sync_all()
                    .map_err(|e| Error::io(path, "flushing", e))?;
                // Closed before the rename: Windows does not rename a file open without delete
                // sharing.
                drop(file);
                // Last, with the new text on disk: the file is still what was read (not saved by
                // the user, nor deleted, while it was being written).
                if let Some(expected) = expected {
                    let mut opts = OpenOptions::new();
                    opts.read(true)
                        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
                        .follow(FollowSymlinks::No);
                    let now = parent.open_with(&on_disk, &opts).ok();
                    let regular = now.filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
                    if !regular.is_some_and(|f| crate::holds(f, expected)) {
                        return Err(Error::Changed { path: path.into() });
                    }
                }
                rename_over(parent, tmp_name.as_str(), &on_disk, path)
            })();
            if let Err(e) = written {
                remove_temp(parent, tmp_name.as_str());
                return Err(e);
            }
            remove_left_temps(parent, self.limits.left_temp_age);
            let mut shown = comps.clone();
            if let Some(last) = shown.last_mut() {
                *last = on_disk;
            }
            Ok(self.display(i, &shown))
        })();
        if written.is_err() {
            for d in made.iter().rev() {
                let _ = dir.remove_dir(d);
            }
        }
        written
    }

    /// Whether something is at `name` at the first folder's top (a link followed while it stays
    /// inside the folder), for [`Workspace::info`].
    pub(crate) fn at_top(&self, name: &str) -> bool {
        self.open_folder(0, "")
            .is_ok_and(|dir| dir.metadata(name).is_ok())
    }
}

/// Removes from `dir` the temporary files writes killed there left ([`left_temp`], last written
/// more than `age` before), looking at its first [`LEFT_TEMP_LOOK`] entries. (By the time of last
/// write alone: Windows swaps no names, so no user's file is ever under a temporary name.)
///
/// [`left_temp`]: crate::left_temp
/// [`LEFT_TEMP_LOOK`]: crate::LEFT_TEMP_LOOK
fn remove_left_temps(dir: &Dir, age: std::time::Duration) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for entry in entries.take(crate::LEFT_TEMP_LOOK) {
        let Ok(entry) = entry else { return };
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| crate::is_temp_name(n)) else {
            continue;
        };
        let Ok(md) = dir.symlink_metadata(name) else {
            continue;
        };
        if md.is_file() && crate::left_temp(name, md.modified().ok().map(|m| m.into_std()), age) {
            let _ = dir.remove_file(name);
        }
    }
}

/// Whether the user may write the existing file `name` of `dir`, as far as its access list says:
/// it is opened for `FILE_WRITE_DATA` (sharing everything, not following a link, nothing
/// written) and closed. Only a denial (`ERROR_ACCESS_DENIED`) is an error: a program holding
/// the file open without write sharing (a sharing violation) is the rename's to wait for.
fn may_write(dir: &Dir, name: impl AsRef<std::path::Path>) -> io::Result<()> {
    let mut opts = OpenOptions::new();
    opts.access_mode(FILE_WRITE_DATA)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .follow(FollowSymlinks::No);
    match dir.open_with(name, &opts) {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED) => Err(e),
        _ => Ok(()),
    }
}

/// The access list of the file `name` of `dir` (not followed if a link); `None` on a volume
/// without access lists.
fn access_list(dir: &Dir, name: &str) -> io::Result<Option<AccessList>> {
    let mut opts = OpenOptions::new();
    opts.access_mode(winacl::READ_CONTROL)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .follow(FollowSymlinks::No);
    AccessList::of(&dir.open_with(name, &opts)?)
}

/// Creates a fresh temporary file in `dir` (new: never an existing file or a planted link), with
/// these file attributes (`0`: Windows' default for a new file) and, when given, this access
/// list (or none: an error).
fn create_temp(
    dir: &Dir,
    path: &str,
    attributes: u32,
    acl: Option<&AccessList>,
) -> Result<(TempName, File), Error> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    if attributes != 0 {
        opts.attributes(attributes);
    }
    if acl.is_some() {
        // Given the list before anything is written, and with no other handle on it until it
        // is closed (one opened before the list was given would keep its access).
        opts.access_mode(GENERIC_WRITE | winacl::WRITE_DAC)
            .share_mode(0);
    }
    let mut last = None;
    for _ in 0..16 {
        let name = TempName::new();
        match dir.open_with(name.as_str(), &opts) {
            Ok(file) => {
                if let Some(Err(e)) = acl.map(|acl| acl.give(&file)) {
                    drop(file);
                    remove_temp(dir, name.as_str());
                    return Err(Error::io(path, "keeping the file's access list", e));
                }
                return Ok((name, file));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(Error::io(path, "creating a temporary file", e)),
        }
    }
    Err(Error::io(
        path,
        "creating a temporary file",
        last.unwrap_or_else(|| io::ErrorKind::AlreadyExists.into()),
    ))
}

/// Removes the temporary file `name` of `dir` after a failed write, through a handle of its own
/// opened relative to `dir`'s with delete-on-close, so that no path has to name it: cap-std's
/// `remove_file` names it by the directory's path, which fails where that path cannot be had
/// (past `MAX_PATH` under Wine) though the file was created relative to the handle. Removing it
/// by name is the fallback.
fn remove_temp(dir: &Dir, name: &str) {
    let mut opts = OpenOptions::new();
    opts.access_mode(DELETE)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_DELETE_ON_CLOSE)
        .follow(FollowSymlinks::No);
    if let Ok(file) = dir.open_with(name, &opts) {
        drop(file);
    }
    if dir.symlink_metadata(name).is_ok() {
        let _ = dir.remove_file(name);
    }
}

/// Which file `name` in `dir` is (volume serial number and file index, from a handle opened
/// without following a link and without access to its contents); `None` when it cannot be
/// opened.
fn identity_in(dir: &Dir, name: &str) -> Option<(u64, u64)> {
    let mut opts = OpenOptions::new();
    opts.access_mode(0).follow(FollowSymlinks::No);
    let md = dir.open_with(name, &opts).ok()?.metadata().ok()?;
    Some((md.dev(), md.ino()))
}

/// The most files whose identity [`on_disk_name`] compares with the target's.
const MAX_IDENTITY_CHECKS: usize = 4096;

/// The name the existing file `name` of `dir` has in `dir`'s entries: `name` itself when an
/// entry is spelled so; otherwise the entry that is the same file (volume and file index), a
/// case variant (`Readme.md` for `README.MD`) tried first, then the other files (the long name
/// of a short one, `a-very-long-file-name.txt` for `A-VERY~1.TXT`). A rename over the file by
/// another spelling gives it that spelling on NTFS (the long name lost: git sees a file deleted
/// and another added), so the write renames to this name and shows it.
///
/// A name on disk that Windows reads as another (a trailing dot or space, a device name) is never
/// taken. Bounded: at most `max_entries` entries read and [`MAX_IDENTITY_CHECKS`] files opened.
/// When the directory cannot be listed, the bound is reached, or no entry is the file (gone
/// since), the name is `name` as given.
fn on_disk_name(dir: &Dir, name: &str, max_entries: usize) -> String {
    let given = || name.to_string();
    let Ok(entries) = dir.entries() else {
        return given();
    };
    let mut case_variants = Vec::new();
    let mut others = Vec::new();
    for (seen, entry) in entries.enumerate() {
        let Some(entry) = entry.ok().filter(|_| seen < max_entries) else {
            return given();
        };
        let Ok(entry_name) = entry.file_name().into_string() else {
            continue;
        };
        if entry_name == name {
            return entry_name;
        }
        // A name Windows reads as another (`a.txt.`, made through `\\?\`): a rename to it
        // through a path would land on `a.txt`.
        if !entry.file_type().is_ok_and(|t| t.is_file())
            || winpath::check_name(&entry_name).is_err()
        {
            continue;
        }
        if case_variants.len() + others.len() == MAX_IDENTITY_CHECKS {
            return given();
        }
        if winpath::same_name(&entry_name, name) {
            case_variants.push(entry_name);
        } else {
            others.push(entry_name);
        }
    }
    let Some(target) = identity_in(dir, name) else {
        return given();
    };
    case_variants
        .into_iter()
        .chain(others)
        .find(|n| identity_in(dir, n) == Some(target))
        .unwrap_or_else(given)
}

/// Whether Windows' refusal of a rename may be a program holding a file open: the target
/// (NTFS refuses to replace a file open in another program, whatever sharing it allows) or the
/// temporary file (a virus scanner's look at it). `ERROR_SHARING_VIOLATION` (32),
/// `ERROR_LOCK_VIOLATION` (33), and `ERROR_ACCESS_DENIED` (5), which is what a held target
/// gives (on NTFS, and under Wine whatever the holder's sharing) but also a target with the
/// read-only attribute, a directory, or one the user may not delete: [`not_held_open`] tells
/// those apart.
fn maybe_held_open(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(ERROR_ACCESS_DENIED | 32 | 33))
}

/// Why the rename of a write's temporary file over `to` of `dir` (the write of `path`) was
/// refused, when it was not for a program holding a file open ([`maybe_held_open`]), so that
/// waiting would not help: `to` is now a directory (or something else than a regular file), it
/// has the read-only attribute, or its access list does not let the user delete it (opening it
/// for `DELETE` is denied, where a program holding it open without delete sharing makes that a
/// sharing violation, and one holding it with delete sharing lets it be opened). `None`: held
/// open, as far as can be told; so is a target that cannot be looked at (gone since, or deleted
/// while another program still holds it open, which Windows answers as access denied too).
fn not_held_open(dir: &Dir, to: &str, path: &str) -> Option<Error> {
    let md = dir.symlink_metadata(to).ok()?;
    if !md.is_file() {
        return Some(Error::NotRegular {
            path: path.into(),
            kind: kind_name(md.file_type()),
        });
    }
    if md.permissions().readonly() {
        return Some(read_only(path, "replacing the file"));
    }
    let mut opts = OpenOptions::new();
    opts.access_mode(DELETE)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .follow(FollowSymlinks::No);
    match dir.open_with(to, &opts) {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED) => Some(Error::io(
            path,
            "replacing the file",
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "its permissions (its access list) do not let you replace it; the file was \
                     left as it was ({e})"
                ),
            ),
        )),
        _ => None,
    }
}

/// A refusal to replace `path`, a file with the read-only attribute: a write to it, as an
/// editor would refuse it (and as the Unix backend refuses a file the user may not write).
fn read_only(path: &str, op: &'static str) -> Error {
    Error::io(
        path,
        op,
        io::Error::new(io::ErrorKind::PermissionDenied, "the file is read-only"),
    )
}

/// How long a write waits, in all, for a program holding the target open to let it go (an
/// editor's or indexer's brief open, a virus scanner's look at the new file).
const RENAME_RETRY: Duration = Duration::from_millis(500);

/// Renames the file `from` of `dir` over `to` (the write of `path`), trying again while the
/// target is held open ([`maybe_held_open`] and not [`not_held_open`]), for at most about
/// [`RENAME_RETRY`], then refusing with what to do; any other failure is answered at once.
fn rename_over(dir: &Dir, from: &str, to: &str, path: &str) -> Result<(), Error> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        let e = match dir.rename(from, dir, to) {
            Ok(()) => return Ok(()),
            Err(e) if maybe_held_open(&e) => e,
            Err(e) => return Err(failed(path, "renaming into place", e)),
        };
        if let Some(refused) = not_held_open(dir, to, path) {
            return Err(refused);
        }
        if start.elapsed() + pause > RENAME_RETRY {
            return Err(held_open(path, e));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The refusal of a write whose target another program held open for longer than
/// [`RENAME_RETRY`].
fn held_open(path: &str, e: io::Error) -> Error {
    let why = format!(
        "the file is open in another program, which does not let it be replaced (still so after \
         {} ms): close it there, or save again once it lets go; the file was left as it was ({e})",
        RENAME_RETRY.as_millis()
    );
    Error::io(path, "replacing the file", io::Error::new(e.kind(), why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::windows::fs::OpenOptionsExt as _;

    /// A directory with a write's temporary file `new.tmp` in it, and its handle.
    fn dir_with_temp() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("new.tmp"), "new\n").unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority()).unwrap();
        (tmp, dir)
    }

    /// Opens `path` as another program would, sharing `share` (`FILE_SHARE_*`).
    fn held(path: &std::path::Path, share: u32) -> std::fs::File {
        std::fs::OpenOptions::new()
            .read(true)
            .share_mode(share)
            .open(path)
            .unwrap()
    }

    /// A directory in the target's place (swapped in after the write looked): Windows refuses the
    /// rename with access denied, as for a file held open, but waiting would not help. It is
    /// refused at once, saying what it is (it was waited for and called "open in another
    /// program").
    #[test]
    fn a_directory_in_the_targets_place_is_refused_at_once() {
        let (tmp, dir) = dir_with_temp();
        std::fs::create_dir(tmp.path().join("a.txt")).unwrap();
        let refused = rename_over(&dir, "new.tmp", "a.txt", "a.txt").unwrap_err();
        assert!(
            matches!(
                refused,
                Error::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{refused}"
        );
        assert!(tmp.path().join("new.tmp").exists());
    }

    /// A target with the read-only attribute is refused at once as read-only: Windows refuses
    /// the rename over it with access denied, as for a file held open. (Wine, run as root,
    /// replaces a read-only file; held open with delete sharing as well, here, it refuses the
    /// rename with access denied, as Windows does for the read-only file alone.) It was waited
    /// for and called "open in another program".
    #[test]
    fn a_read_only_target_is_refused_at_once() {
        let (tmp, dir) = dir_with_temp();
        let target = tmp.path().join("a.txt");
        std::fs::write(&target, "old\n").unwrap();
        let mut perms = std::fs::metadata(&target).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&target, perms.clone()).unwrap();
        let holder = held(
            &target,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
        );
        let refused = rename_over(&dir, "new.tmp", "a.txt", "a.txt").unwrap_err();
        drop(holder);
        let said = refused.to_string();
        assert!(said.contains("read-only"), "{said}");
        assert!(!said.contains("another program"), "{said}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old\n");
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&target, perms).unwrap();
    }

    /// A target held open, with delete sharing or without (Wine refuses the rename with access
    /// denied either way, as NTFS does), is still waited for, then refused as open in another
    /// program.
    #[test]
    fn a_target_held_open_is_still_waited_for() {
        for share in [0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE] {
            let (tmp, dir) = dir_with_temp();
            let target = tmp.path().join("a.txt");
            std::fs::write(&target, "old\n").unwrap();
            let holder = held(&target, share);
            let start = Instant::now();
            let refused = rename_over(&dir, "new.tmp", "a.txt", "a.txt").unwrap_err();
            let waited = start.elapsed();
            drop(holder);
            assert!(
                refused.to_string().contains("open in another program"),
                "sharing {share}: {refused}"
            );
            assert!(
                waited >= Duration::from_millis(400),
                "sharing {share}: {waited:?}"
            );
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "old\n");
            rename_over(&dir, "new.tmp", "a.txt", "a.txt").unwrap();
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
        }
    }
}
