//! What differs between the operating systems the crate runs on, behind one interface.
//!
//! The listing's walk (`walk.rs`) is one for every OS, over a directory handle each OS gives
//! (its `Listing` trait). On Unix the path walk, the reads and writes and the listing's handles
//! are `resolve.rs` and `open.rs` (over `openat` handles); what differs between Unixes is here:
//!
//! - `linux.rs` (Linux, Android): directories on the way are opened as `O_PATH` handles.
//! - `macos.rs` (macOS and the other Unixes): `O_PATH` does not exist there; directories are
//!   opened for reading instead ([`PORTABLE_DIR_FLAGS`]). The walk, and so the confinement, is
//!   the same; the one difference is that a directory the user may search but not read
//!   (mode `--x`) cannot be walked through there, and a path through it is refused with
//!   "permission denied" instead of being served. The tests run the walk with these flags on
//!   Linux too (`resolve.rs`), so the fallback is exercised on every run.
//!
//! On Windows, `windows.rs` is the whole backend: the same `Workspace` methods (`read`,
//! `line_count`, `regular_file`, `writable`, `write`, `at_top`, and the listing's handles) built on cap-std's `Dir`, after the lexical step of `winpath.rs`: paths and names
//! as Windows reads them (drive letters, UNC and `\\?\` roots, case-insensitive names, reserved
//! device names, alternate data streams, trailing dots and spaces). `winpath.rs` is pure string
//! work, compiled and tested on every OS.
//!
//! Both give [`advertised`] (how a folder given on the command line is kept) and [`identity`]
//! (which directory a folder is).

pub(crate) mod winpath;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "linux.rs"]
mod os;
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
#[path = "macos.rs"]
mod os;
#[cfg(windows)]
mod winacl;
#[cfg(windows)]
mod windows;

#[cfg(windows)]
pub(crate) use windows::{advertised, identity, Listed};

/// Whether ignore rules (`.gitignore`, `.git/info/exclude`) match names ignoring case, as git
/// does where `git init` finds the file system ignores case and sets `core.ignoreCase`: NTFS on
/// Windows and APFS or HFS+ on macOS, by default.
pub(crate) const IGNORE_CASE: bool = cfg!(any(windows, target_vendor = "apple"));

/// Whether names and paths follow Windows' rules (`\` between parts, drive letters, names
/// compared ignoring case as NTFS does: `winpath.rs`), as the listing's patterns and folders
/// compare them.
pub(crate) const WINDOWS_NAMES: bool = cfg!(windows);

/// A directory handle as the listing's walk reads it (`walk.rs`'s `Listing`).
#[cfg(unix)]
pub(crate) use crate::open::Listed;

/// How directories are opened while walking a path: never following a link, never waiting.
#[cfg(unix)]
pub(crate) use os::DIR_FLAGS;

/// The longest path taken, in bytes (`PATH_MAX` without its NUL): what the user's own tools can
/// open, and a bound on the directories one write makes.
#[cfg(unix)]
pub(crate) use os::MAX_PATH_BYTES;

/// Makes a written file (or a directory's new entry) durable: `fsync`, or where that stops short
/// of the disk (macOS) what goes further.
#[cfg(unix)]
pub(crate) use os::sync;

/// A replaced file's extended attributes (its ACL among them) given to the file replacing it.
#[cfg(unix)]
pub(crate) mod xattr;

/// Directory handles any Unix can open: for reading, never following a link, never waiting
/// (`O_NONBLOCK`: a FIFO swapped in for the directory fails `O_DIRECTORY` without blocking).
#[cfg(unix)]
pub(crate) const PORTABLE_DIR_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
    .union(rustix::fs::OFlags::DIRECTORY)
    .union(rustix::fs::OFlags::NOFOLLOW)
    .union(rustix::fs::OFlags::CLOEXEC)
    .union(rustix::fs::OFlags::NONBLOCK);

/// A folder as given on the command line, as the workspace keeps it: normalised lexically
/// (`.`, `..`, repeated and trailing `/`).
#[cfg(unix)]
pub(crate) fn advertised(folder: String) -> String {
    claude_ide_bridge::normalize(&folder).unwrap_or(folder)
}

/// Why the folder `folder` (`on_disk`: where the system says it is) cannot be served on this OS;
/// `None` when it can. On Windows a folder on a network share is refused
/// ([`winpath::network_share`]); on Unix every folder can be.
pub(crate) fn refusal(folder: &str, on_disk: &str) -> Option<String> {
    if cfg!(windows) {
        winpath::network_share(folder, on_disk)
    } else {
        None
    }
}

/// Which directory `folder` is now (device and inode), following links.
#[cfg(unix)]
pub(crate) fn identity(folder: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let st = std::fs::metadata(folder).ok()?;
    Some((st.dev(), st.ino()))
}
