//! The Unix backend (Linux, macOS and the other Unixes): the path walk over `openat` handles
//! (`resolve.rs`), the reads and writes at its end and the listing's directory handles
//! (`open.rs`), a replaced file's extended attributes kept (`xattr.rs`), and what differs
//! between Unixes: `linux.rs` (Linux, Android: `O_PATH` handles on the way) and `macos.rs` (macOS
//! and the other Unixes: directories opened for reading, [`PORTABLE_DIR_FLAGS`]).

mod open;
mod resolve;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "linux.rs"]
mod os;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[path = "macos.rs"]
mod os;

/// A directory handle as the listing's walk reads it (`walk.rs`'s `Listing`).
pub(crate) use open::Listed;

/// How directories are opened while walking a path: never following a link, never waiting.
pub(crate) use os::DIR_FLAGS;

/// What a workspace keeps of how it opens directories ([`DIR_FLAGS`], or in the tests
/// [`PORTABLE_DIR_FLAGS`]).
pub(crate) type DirFlags = rustix::fs::OFlags;

/// The longest path taken, in bytes (`PATH_MAX` without its NUL): what the user's own tools can
/// open, and a bound on the directories one write makes.
pub(crate) use os::MAX_PATH_BYTES;

/// Makes a written file (or a directory's new entry) durable: `fsync`, or where that stops short
/// of the disk (macOS) what goes further.
pub(crate) use os::sync;

/// Swaps two entries of a directory in one step, where the system and file system can.
pub(crate) use os::exchange;

/// The name an open file has on disk, where a folder that ignores case may spell it otherwise
/// than the name it was opened by (macOS).
pub(crate) use os::stored_name;

/// A replaced file's extended attributes (its ACL among them) given to the file replacing it.
pub(crate) mod xattr;

/// Directory handles any Unix can open: for reading, never following a link, never waiting
/// (`O_NONBLOCK`: a FIFO swapped in for the directory fails `O_DIRECTORY` without blocking).
pub(crate) const PORTABLE_DIR_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
    .union(rustix::fs::OFlags::DIRECTORY)
    .union(rustix::fs::OFlags::NOFOLLOW)
    .union(rustix::fs::OFlags::CLOEXEC)
    .union(rustix::fs::OFlags::NONBLOCK);

/// Whether a process of id `pid` is running (one of another user's counts: `EPERM`).
pub(crate) fn process_running(pid: u32) -> bool {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    pid.is_some_and(|pid| rustix::process::test_kill_process(pid) != Err(rustix::io::Errno::SRCH))
}

/// A folder as given on the command line, as the workspace keeps it: normalised lexically
/// (`.`, `..`, repeated and trailing `/`).
pub(crate) fn advertised(folder: String) -> String {
    claude_ide_bridge::normalize(&folder).unwrap_or(folder)
}

/// Which directory `folder` is now (device and inode), following links.
pub(crate) fn identity(folder: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let st = std::fs::metadata(folder).ok()?;
    Some((st.dev(), st.ino()))
}
