//! Reading and writing regular files at a resolved location, and the directory handles the
//! listing's walk reads (Unix).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Take, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{
    accessat, fchmod, fchown, fcntl_getfl, fcntl_setfl, flock, fstat, linkat, openat, renameat,
    statat, unlinkat, Access, AtFlags, Dir, FileType, FlockOperation, Gid, Mode, OFlags, Stat, Uid,
};
use rustix::io::Errno;

use super::resolve::{kind_name, Located, Missing};
use crate::walk::{Entry, Listing, NotEntered};
use crate::{count_lines, within, Error, Opened, TempName, Workspace};

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

/// Reads at most `cap` bytes of an opened regular file (see [`crate::read_capped`]).
fn read_capped(path: &str, (file, st): (File, Stat), cap: u64) -> Result<Vec<u8>, Error> {
    crate::read_capped(path, file, st.st_size.max(0) as u64, cap)
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
        let at = self.locate(path, Missing::Fail)?;
        let shown = self.display(path, &at)?;
        let (file, st) = open_located(path, &at)?;
        let (size, cap) = (st.st_size.max(0) as u64, self.limits.max_read_bytes);
        within(path, size, cap)?;
        Ok(Opened {
            asked: path.into(),
            path: shown,
            file,
            size,
            cap,
        })
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
    /// on the way would be created inside it), not naming anything but a regular file, and one
    /// this user may write (an existing file; for a new one, the deepest directory on its way
    /// that exists: a read-only file, folder or mount is refused). For `openDiff`, which accepts
    /// a change the client then writes itself. Returns the path with links resolved.
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
        let (name, op) = match at.file_type() {
            Some(FileType::RegularFile) => (at.name(), "checking that the file may be written"),
            None => (OsStr::new("."), "checking that a file may be made there"),
            Some(t) => {
                return Err(Error::NotRegular {
                    path: path.into(),
                    kind: kind_name(t),
                })
            }
        };
        accessat(&at.dir, name, Access::WRITE_OK, AtFlags::EACCESS)
            .map_err(|e| Error::io(path, op, e))?;
        self.display(path, &at)
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
        // The replaced file's name as it is on disk, where claude may spell it otherwise (macOS).
        let mut stored = None;
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
                    let st = fstat(&old).ok();
                    if st.is_some_and(|st| FileType::from_raw_mode(st.st_mode).is_file()) {
                        crate::sys::xattr::copy(old.as_fd(), file.as_fd())
                            .map_err(|(what, e)| Error::io(path, what, e))?;
                        // Only the name asked for, spelled otherwise (case aside), naming this
                        // file here: the system may give another of its hard links, in this
                        // folder or another, which the rename would replace instead.
                        let same_but_case = |name: &OsStr| {
                            name.to_str().zip(at.name().to_str()).is_some_and(|(a, b)| {
                                a != b && a.to_lowercase() == b.to_lowercase()
                            })
                        };
                        stored = crate::sys::stored_name(old.as_fd()).filter(|name| {
                            let here = stat_at(at.dir.as_fd(), name);
                            same_but_case(name)
                                && here.zip(st).is_some_and(|(here, st)| same_file(&here, &st))
                        });
                    }
                }
            }
            crate::sys::sync(file.as_fd()).map_err(|e| Error::io(path, "fsync", e))?;
            fstat(&file).map_err(|e| Error::io(path, "stat", e))
        })();
        // Until it is renamed or swapped, the temporary file is this write's own.
        let ours = match written {
            Ok(st) => st,
            Err(e) => {
                let _ = unlinkat(&at.dir, tmp_name.as_str(), AtFlags::empty());
                return Err(e);
            }
        };
        match expected {
            // (Which takes care of the temporary name itself: after a swap it may name a save.)
            Some(expected) => {
                let tmp = OsStr::new(tmp_name.as_str());
                let _one_at_a_time = REPLACING.lock().unwrap_or_else(|p| p.into_inner());
                replace_if_holds(at, tmp, (ours, contents), expected, path)?;
            }
            // Renamed over it by its name on disk: by claude's spelling (`Readme.md` for
            // `README.md` on a Mac's volume, which ignores case) the file would take that one.
            None => renameat(
                &at.dir,
                tmp_name.as_str(),
                &at.dir,
                stored.as_deref().unwrap_or(at.name()),
            )
            .map_err(|e| {
                let _ = unlinkat(&at.dir, tmp_name.as_str(), AtFlags::empty());
                Error::io(path, "renaming into place", e)
            })?,
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
            remove_left_temps(d, self.limits.left_temp_age);
        }
        Ok(shown)
    }
}

/// Removes from the directory `dir` (opened for reading) the temporary files writes killed there
/// left ([`left_temp`], older than `age`), looking at its first [`LEFT_TEMP_LOOK`] entries.
///
/// [`left_temp`]: crate::left_temp
/// [`LEFT_TEMP_LOOK`]: crate::LEFT_TEMP_LOOK
fn remove_left_temps(dir: OwnedFd, age: std::time::Duration) {
    // Not while a replace, of any process, is between its swaps here ([`FolderLock`]): the
    // user's file may be under its temporary name, with a pid this process may not see (another
    // pid namespace) and, on some file systems (XFS), its old time of change.
    let _sweeping = match FolderLock::take(dir.as_fd(), FlockOperation::NonBlockingLockExclusive) {
        Err(Errno::WOULDBLOCK) => return,
        held => held,
    };
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
        if crate::left_temp(name, changed_regular(dir.as_fd(), name), age) {
            let _ = unlinkat(&dir, name, AtFlags::empty());
        }
    }
}

/// When `name` of `dir` was last written or had its status changed, the later of the two, if it
/// is a regular file (a link not followed). A rename changes the status of the file it moves
/// (a swap too, but on XFS), and nothing sets that time back, unlike the time of last write
/// (`rsync -a`, `touch -d`).
fn changed_regular(dir: BorrowedFd<'_>, name: &str) -> Option<std::time::SystemTime> {
    let st = regular_at(dir, name)?;
    let written = system_time(st.st_mtime, st.st_mtime_nsec)?;
    Some(written.max(system_time(st.st_ctime, st.st_ctime_nsec)?))
}

/// When `name` of `dir` was last written, if it is a regular file (a link not followed): what the
/// listing's walk dates files by.
fn modified_regular(dir: BorrowedFd<'_>, name: &str) -> Option<std::time::SystemTime> {
    let st = regular_at(dir, name)?;
    system_time(st.st_mtime, st.st_mtime_nsec)
}

/// What `name` of `dir` is (a link not followed), if it is a regular file.
fn regular_at(dir: BorrowedFd<'_>, name: &str) -> Option<Stat> {
    let st = stat_at(dir, OsStr::new(name))?;
    (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then_some(st)
}

/// A time in seconds and nanoseconds since 1970 (as `stat` gives them) as a `SystemTime`; before
/// 1970 (a negative time) counts as 1970: only the order of the times matters.
fn system_time<S, N>(secs: S, nanos: N) -> Option<std::time::SystemTime>
where
    u64: TryFrom<S>,
    u32: TryFrom<N>,
{
    let secs = u64::try_from(secs).unwrap_or(0);
    let nanos = u32::try_from(nanos).unwrap_or(0).min(999_999_999);
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// Whether `a` and `b` are one version of one file: the same device and inode, and the same size
/// and time of last write (a save into a file in place changes its size or that time).
fn same_version(a: &Stat, b: &Stat) -> bool {
    same_file(a, b)
        && a.st_size == b.st_size
        && (a.st_mtime, a.st_mtime_nsec) == (b.st_mtime, b.st_mtime_nsec)
}

/// What `name` of `dir` names now (a link not followed), if anything.
fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> Option<Stat> {
    statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}

/// A lock on a folder (`flock` on a handle of its own), held shared by a replace while it is
/// between its swaps and taken exclusively, without waiting, by a sweep of left temporary files
/// before it looks: a sweep skips the folder while a replace of any process, in any pid namespace
/// (the lock is the directory's), may have the user's file under a temporary name. Where the file
/// system has no such locks, the sweep goes by the files' times alone ([`changed_regular`]).
struct FolderLock {
    /// The handle the lock is on: closing it releases the lock.
    _on: OwnedFd,
}

impl FolderLock {
    /// `op` on a handle of its own to the folder `dir` (itself perhaps a path-only handle, which
    /// takes no lock): the lock, released when dropped.
    fn take(dir: BorrowedFd<'_>, op: FlockOperation) -> rustix::io::Result<FolderLock> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let own = openat(dir, ".", flags, Mode::empty())?;
        flock(&own, op)?;
        Ok(FolderLock { _on: own })
    }
}

/// One [`replace_if_holds`] at a time in this process: two replaces of one file at once each
/// took the other's new text for a save of the user's and put it back, and one removed the
/// user's real save (169 of 300 runs with a 1 MiB file: the third review of the change). The
/// swaps and looks are short; the writes of the new texts before them go on side by side.
static REPLACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How many times [`replace_if_holds`] looks at what a swap back took out before it stops with
/// the last save it saw in place, an earlier one left under the temporary name (a user saving
/// again and again in the microseconds between two swaps).
const SWAPS_BACK: usize = 8;

/// Puts the temporary file `tmp` (`ours`: its version when written, and what was written) in the
/// place of `at` when what is there holds `expected` (not saved by the user, nor deleted, while
/// the new text was being made and written); else [`Error::Changed`], and the file as the user
/// last saved it. Where the two can be swapped in one step ([`exchange`]), they are, and what
/// was taken out is looked at then: a save that came before the swap is put back (swapped
/// again), one that comes after it is made over the new text. Else the file is looked at just
/// before the rename. A file deleted or moved away between two swaps gets the save taken out
/// back under its name, unless a file is there again. `tmp` is gone after, unless swaps kept
/// meeting new saves ([`SWAPS_BACK`]): then the last one seen is in place, and `tmp` names an
/// earlier one (which a sweep removes once its write is done and it is an hour old by its change,
/// as a rename over it would have).
///
/// [`exchange`]: crate::sys::exchange
fn replace_if_holds(
    at: &Located,
    tmp: &OsStr,
    ours: (Stat, &[u8]),
    expected: &[u8],
    path: &str,
) -> Result<(), Error> {
    replace_by_swaps(at, tmp, ours, expected, path, crate::sys::exchange)
}

/// [`replace_if_holds`], swapping two names with `exchange` (the tests' saves come between).
fn replace_by_swaps(
    at: &Located,
    tmp: &OsStr,
    (ours, written): (Stat, &[u8]),
    expected: &[u8],
    path: &str,
    mut exchange: impl FnMut(BorrowedFd<'_>, &OsStr, &OsStr) -> rustix::io::Result<()>,
) -> Result<(), Error> {
    let dir = at.dir.as_fd();
    // Held until the swaps are done (waiting at most for a sweep's look through the folder); a
    // folder that takes no lock is swapped in without.
    let _swapping = FolderLock::take(dir, FlockOperation::LockShared);
    let holds = |name: &OsStr, wanted: &[u8]| {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let now = openat(dir, name, flags, Mode::empty()).ok();
        let regular =
            now.filter(|f| fstat(f).is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_file()));
        regular.is_some_and(|f| crate::holds(File::from(f), wanted))
    };
    let changed = || Error::Changed { path: path.into() };
    let remove_tmp = || {
        let _ = unlinkat(dir, tmp, AtFlags::empty());
    };
    match exchange(dir, tmp, at.name()) {
        Ok(()) => {}
        // Nothing is there any more: deleted meanwhile.
        Err(Errno::NOENT) => {
            remove_tmp();
            return Err(changed());
        }
        // Not on this system or file system: looked at just before.
        Err(e) if [Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP, Errno::NOTSUP].contains(&e) => {
            if !holds(at.name(), expected) {
                remove_tmp();
                return Err(changed());
            }
            return renameat(dir, tmp, dir, at.name()).map_err(|e| {
                remove_tmp();
                Error::io(path, "renaming into place", e)
            });
        }
        Err(e) => {
            remove_tmp();
            return Err(Error::io(path, "renaming into place", e));
        }
    }
    // `tmp` names what the file was at that instant.
    let taken_out = stat_at(dir, tmp);
    if holds(tmp, expected) {
        remove_tmp();
        return Ok(());
    }
    // Saved before the swap: put back. Each swap puts at the name what `tmp` holds and takes out
    // what the name held, which is what the swap before put there unless the user saved again
    // meanwhile (by a rename, or into the file in place: our new text too); that save is newer
    // than the one just put back, and goes back in place by one more swap.
    let (mut placed, mut put_back) = (Some(ours), taken_out);
    for swap in 0.. {
        match exchange(dir, tmp, at.name()) {
            Ok(()) => {}
            // The file was deleted or moved away meanwhile: the save `tmp` holds goes back to
            // the name, unless a file is there again (newer: it stays); where no link can be
            // made, it stays under `tmp`.
            Err(Errno::NOENT) => {
                match linkat(dir, tmp, dir, at.name(), AtFlags::empty()) {
                    Ok(()) | Err(Errno::EXIST) => remove_tmp(),
                    Err(_) => {}
                }
                return Err(changed());
            }
            // Not `Error::io`: a name gone now is not one to look up again and write anew.
            Err(e) => {
                return Err(Error::Io {
                    path: path.into(),
                    op: "putting the file saved meanwhile back",
                    err: e.into(),
                })
            }
        }
        if swap >= SWAPS_BACK {
            // The last save seen is in place; `tmp` keeps the one before it.
            return Err(changed());
        }
        let came_out = stat_at(dir, tmp);
        let untouched = came_out
            .zip(placed)
            .is_some_and(|(out, placed)| same_version(&out, &placed));
        let is_ours = placed.is_some_and(|placed| same_version(&placed, &ours));
        if untouched && (!is_ours || holds(tmp, written)) {
            // Our new text, or a save the one now in place was made over.
            remove_tmp();
            return Err(changed());
        }
        (placed, put_back) = (put_back, came_out);
    }
    Err(changed())
}

/// Creates a fresh temporary file beside the target, relative to the directory handle, with
/// `mode` (less the umask): `O_EXCL | O_NOFOLLOW`, so it is never an existing file or a planted
/// link.
fn create_temp(at: &Located, path: &str, mode: Mode) -> Result<(TempName, OwnedFd), Error> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut last = None;
    for _ in 0..16 {
        let name = TempName::new();
        match openat(&at.dir, name.as_str(), flags, mode) {
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
            unlinkat(&at.dir, name.as_str(), AtFlags::empty()).unwrap();
        }
    }

    /// A replace of `a.py` (saved as `save 0` since it was read as `base`) whose swaps are
    /// preceded by what `between(n)` does before swap `n` (from 1): the answer, then what `a.py`
    /// holds and the temporary names left with what they hold.
    fn replace_with_saves(
        between: impl Fn(&std::path::Path, usize),
    ) -> (Result<(), Error>, Option<String>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.py"), "save 0\n").unwrap();
        let ws = Workspace::new(vec![root.to_str().unwrap().into()], Limits::default());
        let at = ws.locate("a.py", Missing::Fail).unwrap();
        let (tmp, fd) = create_temp(&at, "a.py", Mode::from_raw_mode(0o600)).unwrap();
        let mut file = File::from(fd);
        file.write_all(b"formatted\n").unwrap();
        let ours = fstat(&file).unwrap();
        if crate::sys::exchange(at.dir.as_fd(), OsStr::new("a.py"), OsStr::new("a.py")).is_err() {
            eprintln!("this file system swaps no names");
            return (Ok(()), None, Vec::new());
        }
        let mut swaps = 0;
        let tmp_os = OsStr::new(tmp.as_str());
        let answer = replace_by_swaps(
            &at,
            tmp_os,
            (ours, b"formatted\n"),
            b"base\n",
            "a.py",
            |d, a, b| {
                between(root, swaps);
                swaps += 1;
                crate::sys::exchange(d, a, b)
            },
        );
        let now = std::fs::read_to_string(root.join("a.py")).ok();
        let left = (std::fs::read_dir(root).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| crate::is_temp_name(&p.file_name().unwrap().to_string_lossy()))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        (answer, now, left)
    }

    /// The user's save `n`, by rename.
    fn save(root: &std::path::Path, n: usize) {
        std::fs::write(root.join(".save"), format!("save {n}\n")).unwrap();
        std::fs::rename(root.join(".save"), root.join("a.py")).unwrap();
    }

    /// A save between each two swaps, up to the last the replace makes: the last save is the one
    /// in place (it was left under the temporary name, an earlier one in place, once the swaps
    /// back ran out: the review of this change, by delaying each swap under strace).
    #[test]
    fn saves_between_every_two_swaps_leave_the_last_one_in_place() {
        let (answer, now, left) = replace_with_saves(|root, n| {
            if (1..=SWAPS_BACK).contains(&n) {
                save(root, n);
            }
        });
        if now.is_none() {
            return;
        }
        assert!(matches!(answer, Err(Error::Changed { .. })), "{answer:?}");
        assert_eq!(
            now.as_deref(),
            Some(format!("save {SWAPS_BACK}\n").as_str()),
            "{left:?}"
        );
        assert_eq!(left, [format!("save {}\n", SWAPS_BACK - 1)]);
        // One save, and a quiet swap after: settled, nothing left.
        let (answer, now, left) = replace_with_saves(|root, n| {
            if n == 1 {
                save(root, 1)
            }
        });
        assert!(matches!(answer, Err(Error::Changed { .. })), "{answer:?}");
        assert_eq!((now.as_deref(), left), (Some("save 1\n"), Vec::new()));
    }

    /// A replace holds its folder's lock while it swaps, so that a sweep of another process
    /// (one that cannot see this one's pid) waits for the user's file to be back under its name:
    /// on XFS a swap leaves the files' times of change as they were, and the sweep took the file
    /// for a leftover (the review of 2026-12-06, on an XFS loop file system). Taken only between
    /// the swaps: a sweep after gets it.
    #[test]
    fn a_replace_holds_its_folders_lock_while_it_swaps() {
        let try_sweep_lock = |root: &std::path::Path| {
            let folder = File::open(root).unwrap();
            FolderLock::take(folder.as_fd(), FlockOperation::NonBlockingLockExclusive).map(drop)
        };
        let seen = std::sync::Mutex::new(Vec::new());
        let (_, now, _) = replace_with_saves(|root, n| {
            if n == 1 {
                save(root, 1);
            }
            seen.lock().unwrap().push(try_sweep_lock(root));
        });
        if now.is_none() {
            return;
        }
        let seen = seen.into_inner().unwrap();
        assert!(seen.len() >= 2, "{seen:?}");
        assert!(
            seen.iter().all(|r| *r == Err(Errno::WOULDBLOCK)),
            "{seen:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(try_sweep_lock(dir.path()), Ok(()));
    }

    /// The file deleted (or moved away) between two swaps: the save taken out goes back under
    /// its name, nothing left under a temporary one (it was an I/O error, and the save stayed
    /// hidden under the temporary name: the review of this change). A file made there again
    /// meanwhile stays.
    #[test]
    fn a_file_deleted_between_two_swaps_gets_the_save_back() {
        let (answer, now, left) = replace_with_saves(|root, n| {
            if n == 1 {
                std::fs::remove_file(root.join("a.py")).unwrap();
            }
        });
        if now.is_none() && left.is_empty() && answer.is_ok() {
            return;
        }
        assert!(matches!(answer, Err(Error::Changed { .. })), "{answer:?}");
        assert_eq!((now.as_deref(), left), (Some("save 0\n"), Vec::new()));
        let (answer, now, left) = replace_with_saves(|root, n| {
            if n == 1 {
                std::fs::remove_file(root.join("a.py")).unwrap();
                std::fs::write(root.join("a.py"), "made again\n").unwrap();
            }
        });
        assert!(matches!(answer, Err(Error::Changed { .. })), "{answer:?}");
        assert_eq!((now.as_deref(), left), (Some("made again\n"), Vec::new()));
    }
}
