//! From a path on the wire to a directory handle and a name inside a workspace folder, one
//! component at a time, never letting the kernel follow a symbolic link.
//!
//! The lexical step ([`Workspace::lexical`]) picks the folder and splits the path into plain
//! components (no `.`, no `..`, no empty ones). The walk ([`Workspace::walk`]) then opens each
//! directory with `openat(dir, name, O_DIRECTORY | O_NOFOLLOW)` relative to the previous one,
//! starting from the folder's own handle. A symbolic link met on the way is read with
//! `readlinkat` and its target's components take its place, after the components walked so far
//! (a relative target) or from the root (an absolute one); the walk starts again from the
//! folder's handle (for an absolute target, from the folder it names, or it is refused). A `..`
//! in a target is the parent of the directory the walk has reached, as the kernel takes it,
//! not a lexical step over the name before it (`inner/..` where `inner` is a link to
//! `/elsewhere/a` is `/elsewhere`): it drops the last component walked, which is never a link,
//! and above a folder's top it goes on from the folder's real path, the walk going on only when
//! that is inside a folder. Because every `openat` names one plain component relative to a
//! handle reached the same way, nothing outside the folders is ever opened, whatever the links
//! say and whenever they change, and the place a path leads to is the one every other program
//! reaches by it.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{mkdirat, openat, readlinkat, statat, AtFlags, FileType, Mode, OFlags, Stat, CWD};
use rustix::io::Errno;

use crate::{Error, Workspace};

/// Where a path led.
pub(crate) struct Located {
    /// The folder it is in.
    pub folder: usize,
    /// Its components below the folder, symbolic links resolved (with `Missing::Stop`, the
    /// missing ones below the first directory that is not there too).
    pub comps: Vec<OsString>,
    /// The directory holding the last component (the folder itself when `comps` is empty; with
    /// `Missing::Stop`, the deepest directory that exists).
    pub dir: OwnedFd,
    /// What is there, not following a link (`None`: nothing yet).
    pub stat: Option<Stat>,
    /// The directories this walk created on the way (`Missing::Create`), each as its parent's
    /// handle and its name, in the order made: what [`Located::unmake`] removes when what they
    /// were made for fails.
    pub made: Vec<(OwnedFd, OsString)>,
}

impl Located {
    /// Removes the directories the walk made ([`Located::made`]), the deepest first, each only if
    /// it is still empty (another process may have put something in it meanwhile): a write that
    /// failed leaves the tree as it found it.
    pub fn unmake(&self) {
        unmake(&self.made);
    }

    /// The last component (`"."` for the folder itself).
    pub fn name(&self) -> &OsStr {
        self.comps
            .last()
            .map(OsString::as_os_str)
            .unwrap_or(OsStr::new("."))
    }

    /// What kind of file is there.
    pub fn file_type(&self) -> Option<FileType> {
        self.stat
            .as_ref()
            .map(|s| FileType::from_raw_mode(s.st_mode))
    }
}

/// What to do about missing directories on the way.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// A missing directory is an error ([`Error::NotFound`]).
    Fail,
    /// Missing directories are created (mode 0777 less the umask).
    Create,
    /// Stop at the first missing directory and report it as the location (nothing exists there;
    /// whatever is created below it is created inside the folder).
    Stop,
}

/// A link's target as components to walk: `.` and empty ones left out, `..` kept (the walk
/// takes it as the kernel does).
fn target_parts(target: &[u8]) -> impl Iterator<Item = OsString> + '_ {
    (target.split(|b| *b == b'/'))
        .filter(|part| !matches!(*part, b"" | b"."))
        .map(|part| OsString::from_vec(part.to_vec()))
}

/// Splits a normalised absolute or relative byte path into components, resolving `.` and `..`
/// against `base`; `None` when `..` climbs above `base`'s start.
fn join_lexically(base: &[OsString], target: &[u8]) -> Option<Vec<OsString>> {
    let mut out: Vec<OsString> = base.to_vec();
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                out.pop()?;
            }
            name => out.push(OsString::from_vec(name.to_vec())),
        }
    }
    Some(out)
}

/// The components of `path` below `folder` when `path` is inside it (both absolute, split
/// into plain components).
fn strip_folder<'a>(path: &'a [OsString], folder: &str) -> Option<&'a [OsString]> {
    let folder = join_lexically(&[], folder.as_bytes())?;
    path.starts_with(&folder).then(|| &path[folder.len()..])
}

pub(crate) fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "not a regular file",
    }
}

impl Workspace {
    /// Picks the folder a wire path is in and its plain components below it, lexically: a
    /// relative path is resolved against the first folder, an absolute one must be inside a
    /// folder (as advertised or as it is on disk), and `..` may not climb out.
    pub(crate) fn lexical(&self, path: &str) -> Result<(usize, Vec<OsString>), Error> {
        use claude_ide_bridge::{normalize, resolve_in_workspace};
        if path.contains('\0') {
            return Err(Error::outside(path, "the path contains NUL"));
        }
        // Every use is a file's (read, write, check): `a.txt/` names a directory, as the system
        // reads it, not the file `a.txt` (a write of `new/` made a file `new`).
        if crate::ends_as_directory(path, &['/']) {
            return Err(Error::NotRegular {
                path: path.into(),
                kind: "a directory (the path ends with /, /. or /..)",
            });
        }
        let first = self
            .folders
            .first()
            .ok_or_else(|| Error::outside(path, "there is no workspace folder"))?;
        let absolute = if path.starts_with('/') {
            normalize(path).ok_or_else(|| Error::outside(path, "`..` climbs above /"))?
        } else {
            resolve_in_workspace(path, std::slice::from_ref(&first.advertised))
                .map_err(|e| Error::outside(path, e.to_string()))?
        };
        if absolute.len() > crate::sys::MAX_PATH_BYTES {
            return Err(Error::outside(
                path,
                format!(
                    "the path is longer than this system allows ({} bytes)",
                    crate::sys::MAX_PATH_BYTES
                ),
            ));
        }
        let comps = join_lexically(&[], absolute.as_bytes())
            .ok_or_else(|| Error::outside(path, "`..` climbs above /"))?;
        let (folder, rest) = self
            .deepest_folder(&comps)
            .ok_or_else(|| Error::outside(path, "not inside a workspace folder"))?;
        Ok((folder, rest.to_vec()))
    }

    /// The deepest folder containing the absolute path `comps` (folders may nest), by its
    /// advertised or its canonical path, and the components below it.
    fn deepest_folder<'c>(&self, comps: &'c [OsString]) -> Option<(usize, &'c [OsString])> {
        let mut best: Option<(usize, &[OsString])> = None;
        for (i, f) in self.folders.iter().enumerate() {
            for root in [&f.advertised, &f.canonical] {
                if let Some(rest) = strip_folder(comps, root) {
                    if best.is_none_or(|(_, b)| rest.len() < b.len()) {
                        best = Some((i, rest));
                    }
                }
            }
        }
        best
    }

    /// The folder's directory handle. The folder's own path is trusted configuration: a link in
    /// it is followed. But it must still name the directory it named when the workspace was made
    /// (checked on the handle itself, so no swap can come between the check and the use): a
    /// folder nested in another can be replaced, by anything that writes in the outer one, with a
    /// link to anywhere.
    pub(crate) fn open_folder(&self, folder: usize, path: &str) -> Result<OwnedFd, Error> {
        let flags = self.dir_flags.difference(OFlags::NOFOLLOW);
        let f = &self.folders[folder];
        let dir = openat(CWD, f.advertised.as_str(), flags, Mode::empty())
            .map_err(|e| Error::folder(path, "opening the workspace folder", e))?;
        let st = rustix::fs::fstat(&dir).map_err(|e| Error::io(path, "stat", e))?;
        let now = (st.st_dev as u64, st.st_ino as u64);
        f.still_itself(path, now)?;
        Ok(dir)
    }

    /// Whether something is at `name` at the first folder's top (a link followed while it stays
    /// inside the workspace), for [`Workspace::info`].
    pub(crate) fn at_top(&self, name: &str) -> bool {
        self.walk("", 0, vec![OsString::from(name)], Missing::Fail)
            .is_ok_and(|at| at.stat.is_some())
    }

    /// Resolves a wire path to its location (see the module docs).
    pub(crate) fn locate(&self, path: &str, missing: Missing) -> Result<Located, Error> {
        let (folder, comps) = self.lexical(path)?;
        self.walk(path, folder, comps, missing)
    }

    /// Walks `comps` from `folder`'s handle. A walk that fails removes the directories it made
    /// (`Missing::Create`); one that succeeds lists them in [`Located::made`].
    pub(crate) fn walk(
        &self,
        path: &str,
        folder: usize,
        comps: Vec<OsString>,
        missing: Missing,
    ) -> Result<Located, Error> {
        let mut made = Vec::new();
        match self.walk_making(path, folder, comps, missing, &mut made) {
            Ok(at) => Ok(Located { made, ..at }),
            Err(e) => {
                unmake(&made);
                Err(e)
            }
        }
    }

    /// [`Workspace::walk`], the directories it makes added to `made`.
    fn walk_making(
        &self,
        path: &str,
        mut folder: usize,
        comps: Vec<OsString>,
        missing: Missing,
        made: &mut Vec<(OwnedFd, OsString)>,
    ) -> Result<Located, Error> {
        let mut links = 0usize;
        let mut created = 0usize;
        let mut todo: Vec<OsString> = comps;
        'restart: loop {
            let mut dir = self.open_folder(folder, path)?;
            let mut done: Vec<OsString> = Vec::with_capacity(todo.len());
            let mut i = 0;
            while i < todo.len() {
                let name = todo[i].clone();
                if name == ".." {
                    // From a link's target: the parent of the directory reached, which `done`
                    // names without a link. Above the folder's top, from its real path.
                    if done.pop().is_some() {
                        done.extend(todo.drain(i + 1..));
                        todo = done;
                    } else {
                        let mut base = self.canonical_parts(folder);
                        base.pop();
                        (folder, todo) = self.enter(path, base, todo.drain(i + 1..), || {
                            let top = &self.folders[folder].advertised;
                            format!("a symbolic link's `..` leads above {top}")
                        })?;
                    }
                    continue 'restart;
                }
                let last = i + 1 == todo.len();
                let stat = match statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => st,
                    // A link's target climbing out of a directory that is not there: nothing
                    // is there for the kernel either (and nothing is made on the way).
                    Err(Errno::NOENT) if todo[i + 1..].iter().any(|c| c == "..") => {
                        return Err(Error::NotFound { path: path.into() });
                    }
                    // The last name may be missing (it is what a caller creates); with
                    // `Missing::Stop` so may any other, and the walk ends there.
                    Err(Errno::NOENT) if last || missing == Missing::Stop => {
                        // The whole path, the missing directories below this one included: it is
                        // what will be there once they are created.
                        done.extend(todo.drain(i..));
                        return Ok(Located {
                            folder,
                            comps: done,
                            dir,
                            stat: None,
                            made: Vec::new(),
                        });
                    }
                    Err(Errno::NOENT) if missing == Missing::Create => {
                        // Each component is created at most once (twice if raced); a name that
                        // keeps vanishing is an error, not a loop.
                        created += 1;
                        if created > 2 * todo.len() {
                            return Err(Error::io(path, "creating a directory", Errno::AGAIN));
                        }
                        match mkdirat(&dir, name.as_os_str(), Mode::from_raw_mode(0o777)) {
                            Ok(()) => {
                                // Kept to be removed if the write fails (a handle of the parent
                                // that cannot be had leaves it there).
                                if let Ok(parent) = rustix::io::dup(&dir) {
                                    made.push((parent, name.clone()));
                                }
                                continue;
                            }
                            Err(Errno::EXIST) => continue,
                            Err(e) => return Err(Error::io(path, "creating a directory", e)),
                        }
                    }
                    Err(e) => return Err(Error::io(path, "looking up a component", e)),
                };
                match FileType::from_raw_mode(stat.st_mode) {
                    FileType::Symlink => {
                        links += 1;
                        if links > self.limits.max_symlinks {
                            return Err(Error::SymlinkLoop { path: path.into() });
                        }
                        let target = readlinkat(&dir, name.as_os_str(), Vec::new())
                            .map_err(|e| Error::io(path, "reading a symbolic link", e))?;
                        let target = target.as_bytes();
                        let (next_folder, mut next) = self.follow(path, folder, &done, target)?;
                        next.extend(todo.drain(i + 1..));
                        // The path checked lexically, its links followed: a chain of links can
                        // lead far deeper, and a write would create every directory on the way.
                        let root = &self.folders[next_folder].advertised;
                        let long = next.iter().map(|c| 1 + c.len()).sum::<usize>() + root.len();
                        if long > crate::sys::MAX_PATH_BYTES {
                            return Err(Error::io(
                                path,
                                "following a symbolic link",
                                Errno::NAMETOOLONG,
                            ));
                        }
                        folder = next_folder;
                        todo = next;
                        continue 'restart;
                    }
                    _ if last => {
                        done.push(name);
                        return Ok(Located {
                            folder,
                            comps: done,
                            dir,
                            stat: Some(stat),
                            made: Vec::new(),
                        });
                    }
                    FileType::Directory => {
                        dir = openat(&dir, name.as_os_str(), self.dir_flags, Mode::empty())
                            .map_err(|e| Error::io(path, "opening a directory", e))?;
                        done.push(name);
                        i += 1;
                    }
                    _ => {
                        done.push(name);
                        let on_the_way = done.iter().map(|c| c.to_string_lossy());
                        return Err(Error::NotADirectory {
                            path: path.into(),
                            on_the_way: on_the_way.collect::<Vec<_>>().join("/"),
                        });
                    }
                }
            }
            // No components: the folder itself.
            let stat = rustix::fs::fstat(&dir).map_err(|e| Error::io(path, "stat", e))?;
            return Ok(Located {
                folder,
                comps: done,
                dir,
                stat: Some(stat),
                made: Vec::new(),
            });
        }
    }

    /// The components of `folder`'s real path (no link in it).
    fn canonical_parts(&self, folder: usize) -> Vec<OsString> {
        join_lexically(&[], self.folders[folder].canonical.as_bytes()).unwrap_or_default()
    }

    /// The folder a walk goes on in from the absolute path `base` (no link in it) and then
    /// `rest` (a link's target's components; `..` kept), and the components to walk from its top;
    /// a refusal (`shown` says what led there) when that is outside every folder. The leading
    /// `..`s climb `base` (at the root, the root); the names after them, up to the next `..`,
    /// say which folder (those above its top are its own path, trusted, and those below it are
    /// walked).
    fn enter(
        &self,
        path: &str,
        mut base: Vec<OsString>,
        rest: impl IntoIterator<Item = OsString>,
        shown: impl Fn() -> String,
    ) -> Result<(usize, Vec<OsString>), Error> {
        let mut rest = rest.into_iter().peekable();
        while rest.next_if(|c| c == "..").is_some() {
            base.pop();
        }
        while let Some(c) = rest.next_if(|c| c != "..") {
            base.push(c);
        }
        let (folder, below) =
            (self.deepest_folder(&base)).ok_or_else(|| Error::outside(path, shown()))?;
        let mut todo = below.to_vec();
        todo.extend(rest);
        Ok((folder, todo))
    }

    /// Where a link found in `folder` under `done` and pointing at `target` leads: a folder and
    /// the components to walk from its top (`..` kept), or a refusal when an absolute target is
    /// outside every folder (a relative one is checked as it is walked).
    fn follow(
        &self,
        path: &str,
        folder: usize,
        done: &[OsString],
        target: &[u8],
    ) -> Result<(usize, Vec<OsString>), Error> {
        let shown = || {
            let mut link = self.folders[folder].advertised.clone();
            for c in done {
                link.push('/');
                link.push_str(&c.to_string_lossy());
            }
            format!(
                "a symbolic link under {link} points to {}",
                String::from_utf8_lossy(target)
            )
        };
        if target.is_empty() {
            return Err(Error::NotFound { path: path.into() });
        }
        if target.starts_with(b"/") {
            self.enter(path, Vec::new(), target_parts(target), shown)
        } else {
            let mut next = done.to_vec();
            next.extend(target_parts(target));
            Ok((folder, next))
        }
    }

    /// The path a location is known by: the folder as advertised, then the components (links
    /// resolved). Refused when a component is not UTF-8 (reached through a link: the client's
    /// own paths are JSON strings): its lossy form would name another file, which a later write
    /// would create.
    pub(crate) fn display(&self, path: &str, at: &Located) -> Result<String, Error> {
        let mut s = self.folders[at.folder].advertised.clone();
        for c in &at.comps {
            if !s.ends_with('/') {
                s.push('/');
            }
            let c = c
                .to_str()
                .ok_or_else(|| Error::NameNotUtf8 { path: path.into() })?;
            s.push_str(c);
        }
        Ok(s)
    }
}

/// Removes the directories in `made` (parent handle, name), the last made first, each only if
/// it is empty.
fn unmake(made: &[(OwnedFd, OsString)]) {
    for (parent, name) in made.iter().rev() {
        let _ = rustix::fs::unlinkat(parent, name.as_os_str(), AtFlags::REMOVEDIR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    #[test]
    fn lexical_join() {
        assert_eq!(
            join_lexically(&comps(&["a", "b"]), b"../c/./d"),
            Some(comps(&["a", "c", "d"]))
        );
        assert_eq!(join_lexically(&comps(&["a"]), b"../../x"), None);
        assert_eq!(join_lexically(&[], b"/x//y/"), Some(comps(&["x", "y"])));
        assert_eq!(
            strip_folder(&comps(&["ws", "a"]), "/ws"),
            Some(&comps(&["a"])[..])
        );
        assert_eq!(strip_folder(&comps(&["wsx", "a"]), "/ws"), None);
    }

    /// The walk with the directory handles macOS opens (no `O_PATH`), run here on Linux too:
    /// it serves and refuses exactly what the Linux walk does, and a directory that may be
    /// searched but not read is refused by it with "permission denied", never served around.
    #[test]
    fn the_portable_directory_handles_confine_the_same() {
        use crate::sys::{DIR_FLAGS, PORTABLE_DIR_FLAGS};
        use std::os::unix::fs::{symlink, PermissionsExt};
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("ws");
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(root.join("src/deep/a.txt"), "a\n").unwrap();
        std::fs::write(outer.path().join("secret"), "secret\n").unwrap();
        symlink("../../secret", root.join("src/out")).unwrap();
        symlink("deep", root.join("src/in")).unwrap();
        symlink(outer.path(), root.join("up")).unwrap();
        std::fs::create_dir(root.join("locked")).unwrap();
        std::fs::write(root.join("locked/b.txt"), "b\n").unwrap();
        std::fs::set_permissions(root.join("locked"), PermissionsExt::from_mode(0o311)).unwrap();
        let mut seen = Vec::new();
        for flags in [DIR_FLAGS, PORTABLE_DIR_FLAGS] {
            let mut ws = Workspace::new(
                vec![root.to_str().unwrap().into()],
                crate::Limits::default(),
            );
            ws.dir_flags = flags;
            assert_eq!(ws.read_text("src/in/a.txt").unwrap().content, "a\n");
            for bad in ["src/out", "up/secret", "../secret", "src/../../secret"] {
                assert!(
                    matches!(ws.read_text(bad), Err(Error::Outside { .. })),
                    "{flags:?} {bad}"
                );
                assert!(ws.write(bad, b"x").is_err(), "{flags:?} {bad}");
            }
            ws.write("src/in/new/c.txt", b"c").unwrap();
            assert_eq!(
                std::fs::read(root.join("src/deep/new/c.txt")).unwrap(),
                b"c"
            );
            seen.push(ws.read_text("locked/b.txt").map(|t| t.content));
        }
        assert_eq!(
            std::fs::read(outer.path().join("secret")).unwrap(),
            b"secret\n"
        );
        // Root reads any directory; anyone else gets the difference the module docs describe.
        if rustix::process::geteuid().is_root() {
            assert!(seen.iter().all(|r| matches!(r.as_deref(), Ok("b\n"))));
        } else {
            assert!(
                matches!(seen[0].as_deref(), Ok("b\n")),
                "O_PATH walks through --x"
            );
            let Err(e) = &seen[1] else {
                panic!("the portable walk read through a directory it may not read")
            };
            assert!(e.to_string().contains("ermission denied"), "{e}");
        }
        std::fs::set_permissions(root.join("locked"), PermissionsExt::from_mode(0o755)).unwrap();
    }
}
