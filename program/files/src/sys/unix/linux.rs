//! Linux and Android: directories on the way are `O_PATH` handles (no read permission needed,
//! nothing read through them but names).

use rustix::fs::OFlags;

/// The longest path the system's own calls take (`PATH_MAX`, 4096 with its NUL): a longer one is
/// refused before the walk, which would otherwise make a directory for each of its components.
pub(crate) const MAX_PATH_BYTES: usize = 4095;

/// Makes what was written to `fd` durable: `fsync`, which on Linux reaches the disk.
pub(crate) fn sync(fd: std::os::fd::BorrowedFd<'_>) -> rustix::io::Result<()> {
    rustix::fs::fsync(fd)
}

/// Swaps the entries `a` and `b` of `dir` in one step (`renameat2`'s `RENAME_EXCHANGE`): each
/// names what the other did. Fails with `EINVAL` on a file system that cannot.
pub(crate) fn exchange(
    dir: std::os::fd::BorrowedFd<'_>,
    a: &std::ffi::OsStr,
    b: &std::ffi::OsStr,
) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(dir, a, dir, b, rustix::fs::RenameFlags::EXCHANGE)
}

/// The name a file has on disk where it may differ from the one it was opened by: not told on
/// Linux (`None`), whose names are looked up as they are written.
pub(crate) fn stored_name(_file: std::os::fd::BorrowedFd<'_>) -> Option<std::ffi::OsString> {
    None
}

/// `O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC`.
pub(crate) const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
