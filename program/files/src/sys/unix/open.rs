//! Reading and writing regular files at a resolved location, and the directory handles the
//! listing's walk reads (Unix).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Take, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{
    accessat, fchmod, fchown, fcntl_getfl, fcntl_setfl, fstat, openat, renameat, statat, unlinkat,
    Access, AtFlags, Dir, FileType, Gid, Mode, OFlags, Stat, Uid,
};
use rustix::io::Errno;

use super::resolve::{kind_name, Located, Missing};
use crate::walk::{Entry, Listing, NotEntered};
use crate::{count_lines, within, Error, Workspace};

/// How files are opened for reading: never through a link, never waiting (a FIFO without a
/// writer opens at once instead of blocking), never becoming the controlling terminal.
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOCTTY);

fn same_file(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

/// Opens the regular file `name` in the directory `dir` for reading and returns it with its
/// `fstat`. `looked` is what a lookup without following a link found there (`None`: nothing):
/// anything that is not a regular file, by the lookup and again on the opened handle, is
/// refused, and so is a file other than the one looked up. `path` names it in errors.
fn open_regular(
    path: &str,
    dir: BorrowedFd<'_>,
    name: &OsStr,
    looked: Option<&Stat>,
) -> Result<(File, Stat), Error> {
    let looked = looked.ok_or(Error::NotFound { path: path.into() })?;
    let kind = file_type(looked);
    if kind != FileType::RegularFile {
        // Refused before opening: opening a device can have effects of its own.
        return Err(Error::NotRegular {
            path: path.into(),
            kind: kind_name(kind),
        });
    }
    let fd: OwnedFd =
        openat(dir, name, READ_FLAGS, Mode::empty()).map_err(|e| Error::io(path, "opening", e))?;
    let st = fstat(&fd).map_err(|e| Error::io(path, "stat", e))?;
    if file_type(&st) != FileType::RegularFile {
        return Err(Error::NotRegular {
            path: path.into(),
            kind: kind_name(file_type(&st)),
        });
    }
    if !same_file(looked, &st) {
        return Err(Error::io(
            path,
            "opening",
            std::io::Error::other("the file was replaced while it was being opened"),
        ));
    }
    // A regular file ignores O_NONBLOCK; cleared anyway so the handle reads as any other.
    let flags = fcntl_getfl(&fd).map_err(|e| Error::io(path, "fcntl", e))?;
    fcntl_setfl(&fd, flags.difference(OFlags::NONBLOCK))
        .map_err(|e| Error::io(path, "fcntl", e))?;
    Ok((File::from(fd), st))
}

/// The regular file at `at`, opened (see [`open_regular`]).
fn open_located(path: &str, at: &Located) -> Result<(File, Stat), Error> {
    open_regular(path, at.dir.as_fd(), at.name(), at.stat.as_ref())
}

/// An opened regular file (and its `fstat`) to read at most `cap` bytes of: the size from
/// `fstat` is checked first, and the reader stops one byte past the cap in case the file grew
/// (the caller checks what it read with [`within`]). Also returns the size `fstat` gave.
fn capped(path: &str, (file, st): (File, Stat), cap: u64) -> Result<(Take<File>, u64), Error> {
    let size = st.st_size.max(0) as u64;
    within(path, size, cap)?;
    Ok((file.take(cap.saturating_add(1)), size))
}

/// Reads at most `cap` bytes of an opened regular file (see [`capped`]).
fn read_capped(path: &str, opened: (File, Stat), cap: u64) -> Result<Vec<u8>, Error> {
    let (mut reader, size) = capped(path, opened, cap)?;
    let mut buf = Vec::with_capacity(size as usize + 1);
    let got = reader
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, "reading", e))?;
    within(path, got as u64, cap)?;
    Ok(buf)
}

/// Reads the small regular file `name` in the directory `dir` (a `.gitignore`, through the
/// handle the listing reads the directory by), at most `cap` bytes, the way every file is read
/// (see [`open_regular`]): `None` when it is missing, a link, not a regular file, or bigger
/// than `cap`.
pub(crate) fn read_small_in(dir: BorrowedFd<'_>, name: &str, cap: u64) -> Option<Vec<u8>> {
    let looked = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    let opened = open_regular("", dir, OsStr::new(name), Some(&looked)).ok()?;
    read_capped("", opened, cap).ok()
}

impl Workspace {
    /// Reads a regular file inside the workspace, at most
    /// [`Limits::max_read_bytes`](crate::Limits::max_read_bytes) bytes. Returns the path it was found at (links resolved) and the bytes.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Error, Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("big"), vec![b'x'; 2048]).unwrap();
    /// let ws = Workspace::new(
    ///     vec![dir.path().to_str().unwrap().into()],
    ///     Limits { max_read_bytes: 1024, ..Limits::default() },
    /// );
    /// assert!(matches!(ws.read("big"), Err(Error::TooLarge { size: 2048, .. })));
    /// ```
    pub fn read(&self, path: &str) -> Result<(String, Vec<u8>), Error> {
        let at = self.locate(path, Missing::Fail)?;
        let shown = self.display(path, &at)?;
        let bytes = read_capped(path, open_located(path, &at)?, self.limits.max_read_bytes)?;
        Ok((shown, bytes))
    }

    /// Reads a small file at components below a folder (for `.git/info/exclude`), resolved as
    /// any path is (a link is followed while it stays inside the workspace), `None` when it is
    /// missing, not a regular file, outside, or bigger than `cap`.
    pub(crate) fn read_small(
        &self,
        folder: usize,
        comps: Vec<OsString>,
        cap: u64,
    ) -> Option<Vec<u8>> {
        let at = self.walk("", folder, comps, Missing::Fail).ok()?;
        read_capped("", open_located("", &at).ok()?, cap).ok()
    }

    /// Counts the lines of a regular text file inside the workspace (as `str::lines` would), for
    /// `openFile`. The file is read in small pieces, never more than the read limit in all.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree").unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// assert_eq!(ws.line_count("a.txt").unwrap(), 3);
    /// ```
    pub fn line_count(&self, path: &str) -> Result<u64, Error> {
        let at = self.locate(path, Missing::Fail)?;
        let cap = self.limits.max_read_bytes;
        let (reader, _) = capped(path, open_located(path, &at)?, cap)?;
        count_lines(path, reader, cap)
    }

    /// Whether `path` is a regular file inside the workspace; its path with links resolved.
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
        let at = self.locate(path, Missing::Fail)?;
        match at.file_type() {
            Some(FileType::RegularFile) => self.display(path, &at),
            Some(t) => Err(Error::NotRegular {
                path: path.into(),
                kind: kind_name(t),
            }),
            None => Err(Error::NotFound { path: path.into() }),
        }
    }

    /// Whether a write to `path` would be allowed now: inside the workspace (missing directories
    /// on the way would be created inside it) and not naming anything but a regular file. For
    /// `openDiff`, which accepts a change the client then writes itself. Returns the path with
    /// links resolved.
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// let dir = tempfile::tempdir().unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// assert!(ws.writable("new/dir/file.rs").unwrap().ends_with("/new/dir/file.rs"));
    /// assert!(ws.writable(".").is_err());
    /// assert!(ws.writable("/tmp/elsewhere.rs").is_err() || dir.path().starts_with("/tmp/elsewhere.rs"));
    /// ```
    pub fn writable(&self, path: &str) -> Result<String, Error> {
        let at = self.locate(path, Missing::Stop)?;
        match at.file_type() {
            None | Some(FileType::RegularFile) => self.display(path, &at),
            Some(t) => Err(Error::NotRegular {
                path: path.into(),
                kind: kind_name(t),
            }),
        }
    }

    /// Writes `contents` to `path` atomically: a temporary file beside it, created relative to
    /// the checked directory handle, written and `fsync`ed, then renamed over the target. An
    /// existing file keeps its mode (less setuid and setgid), owner, group and extended
    /// attributes (its ACL among them: refused when that cannot be kept); a new one gets 0666
    /// less the umask. Missing directories on the way are created. Returns the path written
    /// (links resolved).
    ///
    /// ```
    /// # use claude_ide_bridge_files::{Limits, Workspace};
    /// use std::os::unix::fs::PermissionsExt;
    /// let dir = tempfile::tempdir().unwrap();
    /// let script = dir.path().join("run.sh");
    /// std::fs::write(&script, "old").unwrap();
    /// std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    /// let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
    /// ws.write("run.sh", b"#!/bin/sh\n").unwrap();
    /// assert_eq!(std::fs::read(&script).unwrap(), b"#!/bin/sh\n");
    /// assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777, 0o750);
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
        let at = self.locate(path, Missing::Create)?;
        let written = self.write_at(path, &at, contents, expected);
        // Nothing of a write that failed stays: not the directories made for it either.
        if written.is_err() {
            at.unmake();
        }
        written
    }

    /// [`Workspace::write`] to `at`, located (its missing directories made).
    fn write_at(
        &self,
        path: &str,
        at: &Located,
        contents: &[u8],
        expected: Option<&[u8]>,
    ) -> Result<String, Error> {
        // Named before anything is written: a name no answer can hold is refused first.
        let shown = self.display(path, at)?;
        let mode = match at.file_type() {
            None => None,
            // Its permissions and sticky bit; not setuid and setgid, which a write to the file
            // in place clears (the kernel does, for anyone but root): new contents do not
            // inherit the right to run as the file's owner.
            Some(FileType::RegularFile) => at.stat.as_ref().map(|s| s.st_mode & 0o1777),
            Some(t) => {
                return Err(Error::NotRegular {
                    path: path.into(),
                    kind: kind_name(t),
                })
            }
        };
        // Replacing a file is a write to it: one the user may not write (read-only, say) is
        // refused, as an editor would refuse it, although the directory would take the rename.
        if mode.is_some() {
            accessat(&at.dir, at.name(), Access::WRITE_OK, AtFlags::EACCESS)
                .map_err(|e| Error::io(path, "checking that the file may be written", e))?;
        }
        // (Only a regular file, with a mode, has a `stat` here: anything else was refused.)
        let owner = at.stat.as_ref().map(|s| (s.st_uid, s.st_gid));
        // Until it has the target's mode, the new text is readable by its owner only: the target
        // may be a file others must not read. A new file has no mode to keep: 0666 less the umask.
        let (tmp_name, tmp) = create_temp(
            at,
            path,
            Mode::from_raw_mode(if mode.is_some() { 0o600 } else { 0o666 }),
        )?;
        let written = (|| {
            let mut file = File::from(tmp);
            file.write_all(contents)
                .map_err(|e| Error::io(path, "writing", e))?;
            // The new file keeps the old one's owner and group (a file of another user, or of a
            // shared group, written by root or a group member): when that cannot be, nothing
            // is replaced.
            if let Some((uid, gid)) = owner {
                let st = fstat(&file).map_err(|e| Error::io(path, "stat", e))?;
                if (st.st_uid, st.st_gid) != (uid, gid) {
                    fchown(&file, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                        .map_err(|e| Error::io(path, "keeping the file's owner and group", e))?;
                }
            }
            if let Some(mode) = mode {
                fchmod(&file, Mode::from_raw_mode(mode))
                    .map_err(|e| Error::io(path, "chmod", e))?;
                // And its extended attributes (its ACL: who else may read and write it), from
                // the file there now, when it can be read.
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                if let Ok(old) = openat(&at.dir, at.name(), flags, Mode::empty()) {
                    if fstat(&old).is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_file()) {
                        crate::sys::xattr::copy(old.as_fd(), file.as_fd())
                            .map_err(|(what, e)| Error::io(path, what, e))?;
                    }
                }
            }
            crate::sys::sync(file.as_fd()).map_err(|e| Error::io(path, "fsync", e))?;
            match expected {
                Some(expected) => replace_if_holds(at, &tmp_name, expected, path),
                None => renameat(&at.dir, &tmp_name, &at.dir, at.name())
                    .map_err(|e| Error::io(path, "renaming into place", e)),
            }
        })();
        if let Err(e) = written {
            let _ = unlinkat(&at.dir, &tmp_name, AtFlags::empty());
            return Err(e);
        }
        // The rename is durable once the directory is synced; a directory that cannot be opened
        // for that (no read permission) still has the file in place.
        if let Ok(d) = openat(
            &at.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            let _ = crate::sys::sync(d.as_fd());
            remove_left_temps(d);
        }
        Ok(shown)
    }
}

/// Removes from the directory `dir` (opened for reading) the temporary files writes killed there
/// left ([`left_temp`]), looking at its first [`LEFT_TEMP_LOOK`] entries.
///
/// [`left_temp`]: crate::left_temp
/// [`LEFT_TEMP_LOOK`]: crate::LEFT_TEMP_LOOK
fn remove_left_temps(dir: OwnedFd) {
    let Ok(mut entries) = Dir::read_from(&dir) else {
        return;
    };
    for _ in 0..crate::LEFT_TEMP_LOOK {
        let Some(Ok(entry)) = entries.read() else {
            return;
        };
        let Ok(name) = std::str::from_utf8(entry.file_name().to_bytes()) else {
            continue;
        };
        if !crate::is_temp_name(name) {
            continue;
        }
        if crate::left_temp(name, modified_regular(dir.as_fd(), name)) {
            let _ = unlinkat(&dir, name, AtFlags::empty());
        }
    }
}

/// When `name` of `dir` was last written, if it is a regular file (a link not followed): what the
/// listing's walk dates files by, and what tells a write's temporary file left behind.
fn modified_regular(dir: BorrowedFd<'_>, name: &str) -> Option<std::time::SystemTime> {
    let st = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    // Before 1970 (a negative time) counts as 1970: only the order of the times matters.
    let secs = u64::try_from(st.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(st.st_mtime_nsec)
        .unwrap_or(0)
        .min(999_999_999);
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// Puts the temporary file `tmp` in the place of `at` when what is there holds `expected` (not
/// saved by the user, nor deleted, while the new text was being made and written); else
/// [`Error::Changed`], and `tmp` is still the new text. Where the two can be swapped in one step
/// ([`exchange`]), they are, and what was taken out is looked at then: a save that came before
/// the swap is put back (swapped again), one that comes after it is made over the new text. Else
/// the file is looked at just before the rename.
///
/// [`exchange`]: crate::sys::exchange
fn replace_if_holds(at: &Located, tmp: &OsStr, expected: &[u8], path: &str) -> Result<(), Error> {
    let holds = |name: &OsStr| {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let now = openat(&at.dir, name, flags, Mode::empty()).ok();
        let regular =
            now.filter(|f| fstat(f).is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_file()));
        regular.is_some_and(|f| crate::holds(File::from(f), expected))
    };
    let changed = || Error::Changed { path: path.into() };
    match crate::sys::exchange(at.dir.as_fd(), tmp, at.name()) {
        // `tmp` names what the file was at that instant.
        Ok(()) if holds(tmp) => {
            let _ = unlinkat(&at.dir, tmp, AtFlags::empty());
            Ok(())
        }
        Ok(()) => match crate::sys::exchange(at.dir.as_fd(), tmp, at.name()) {
            Ok(()) => Err(changed()),
            Err(e) => Err(Error::io(path, "putting the file saved meanwhile back", e)),
        },
        // Nothing is there any more: deleted meanwhile.
        Err(Errno::NOENT) => Err(changed()),
        // Not on this system or file system: looked at just before.
        Err(e) if [Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP, Errno::NOTSUP].contains(&e) => {
            if !holds(at.name()) {
                return Err(changed());
            }
            renameat(&at.dir, tmp, &at.dir, at.name())
                .map_err(|e| Error::io(path, "renaming into place", e))
        }
        Err(e) => Err(Error::io(path, "renaming into place", e)),
    }
}

/// Creates a fresh temporary file beside the target, relative to the directory handle, with
/// `mode` (less the umask): `O_EXCL | O_NOFOLLOW`, so it is never an existing file or a planted
/// link.
fn create_temp(at: &Located, path: &str, mode: Mode) -> Result<(OsString, OwnedFd), Error> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut last = None;
    for _ in 0..16 {
        let name = OsString::from(crate::temp_name());
        match openat(&at.dir, &name, flags, mode) {
            Ok(fd) => return Ok((name, fd)),
            Err(rustix::io::Errno::EXIST) => last = Some(rustix::io::Errno::EXIST),
            Err(e) => return Err(Error::io(path, "creating a temporary file", e)),
        }
    }
    Err(Error::io(
        path,
        "creating a temporary file",
        last.unwrap_or(rustix::io::Errno::EXIST),
    ))
}

/// A directory the listing's walk reads on Unix (see `walk.rs`): an `openat` handle, read a
/// batch of entries at a time.
pub(crate) struct Listed(Dir);

/// How the walk opens a directory (relative to its parent's handle): readable, never through a
/// link, never waiting, on every Unix.
const LIST_FLAGS: OFlags = crate::sys::PORTABLE_DIR_FLAGS;

impl Listing for Listed {
    fn top(ws: &Workspace, i: usize) -> Option<Listed> {
        let folder = ws.open_folder(i, "").ok()?;
        let top = openat(&folder, ".", LIST_FLAGS, Mode::empty()).ok()?;
        Dir::new(top).ok().map(Listed)
    }

    fn exclude(&self, ws: &Workspace, i: usize, cap: u64) -> Option<Vec<u8>> {
        let comps = [".git", "info", "exclude"].map(OsString::from).to_vec();
        ws.read_small(i, comps, cap)
    }

    fn gitignore(&self, cap: u64) -> Option<Vec<u8>> {
        read_small_in(self.0.fd().ok()?, ".gitignore", cap)
    }

    fn next_entry(&mut self) -> Option<std::io::Result<Entry>> {
        loop {
            let entry = match self.0.read()? {
                Ok(entry) => entry,
                Err(e) => return Some(Err(e.into())),
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(name) else {
                return Some(Ok(Entry::Other));
            };
            let kind = match entry.file_type() {
                FileType::Unknown => self.0.fd().ok().and_then(|dir| {
                    let st = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
                    Some(FileType::from_raw_mode(st.st_mode))
                }),
                kind => Some(kind),
            };
            return Some(Ok(match kind {
                Some(FileType::Directory) => Entry::Dir(name.to_string()),
                Some(FileType::RegularFile) => Entry::File(name.to_string()),
                _ => Entry::Other,
            }));
        }
    }

    fn child(&self, name: &str) -> Result<Listed, NotEntered> {
        let opened = self
            .0
            .fd()
            .and_then(|dir| openat(dir, name, LIST_FLAGS, Mode::empty()))
            .and_then(Dir::new);
        match opened {
            Ok(dir) => Ok(Listed(dir)),
            // Gone, or swapped for a link since it was read.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => Err(NotEntered::Gone),
            Err(_) => Err(NotEntered::Failed),
        }
    }

    fn modified(&self, name: &str) -> Option<std::time::SystemTime> {
        modified_regular(self.0.fd().ok()?, name)
    }

    fn is_git(name: &str) -> bool {
        name == ".git"
    }

    fn absolute(folder: &str, rel: &str) -> String {
        format!("{}/{rel}", folder.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    /// The temporary file of a write over a file others must not read is never readable by
    /// them, not even before it gets the target's mode.
    #[test]
    fn the_temporary_file_is_created_with_the_mode_asked() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(vec![dir.path().to_str().unwrap().into()], Limits::default());
        let at = ws.locate("secret.txt", Missing::Create).unwrap();
        for mode in [0o600, 0o666] {
            let asked = Mode::from_raw_mode(mode);
            let (name, fd) = create_temp(&at, "secret.txt", asked).unwrap();
            let got = Mode::from_raw_mode(fstat(&fd).unwrap().st_mode & 0o777);
            // The umask only takes bits away.
            assert!((got & !asked).is_empty(), "{mode:o}: {got:?}");
            if mode == 0o600 {
                assert_eq!(got, asked);
            }
            unlinkat(&at.dir, &name, AtFlags::empty()).unwrap();
        }
    }
}
