//! macOS and the other Unixes: no `O_PATH`, so directories on the way are opened for reading
//! (see the module above for what that changes: a search-only directory cannot be walked
//! through, and a path through it is refused).

/// The longest path the system's own calls take (`PATH_MAX`, 1024 with its NUL on macOS and the
/// BSDs): a longer one is refused before the walk.
pub(crate) const MAX_PATH_BYTES: usize = 1023;

/// Makes what was written to `fd` durable. On macOS `fsync` leaves the data in the drive's
/// cache, where a power cut loses it: `F_FULLFSYNC` flushes that too, and `fsync` stays for a
/// file system that does not take it (some network ones). Other Unixes: `fsync`.
pub(crate) fn sync(fd: std::os::fd::BorrowedFd<'_>) -> rustix::io::Result<()> {
    #[cfg(target_vendor = "apple")]
    if rustix::fs::fcntl_fullfsync(fd).is_ok() {
        return Ok(());
    }
    rustix::fs::fsync(fd)
}

/// Swaps the entries `a` and `b` of `dir` in one step (macOS: `renameatx_np`'s `RENAME_SWAP`):
/// each names what the other did. Other Unixes cannot (`ENOSYS`), nor can some file systems.
pub(crate) fn exchange(
    dir: std::os::fd::BorrowedFd<'_>,
    a: &std::ffi::OsStr,
    b: &std::ffi::OsStr,
) -> rustix::io::Result<()> {
    #[cfg(target_vendor = "apple")]
    return rustix::fs::renameat_with(dir, a, dir, b, rustix::fs::RenameFlags::EXCHANGE);
    #[cfg(not(target_vendor = "apple"))]
    {
        let _ = (dir, a, b);
        Err(rustix::io::Errno::NOSYS)
    }
}

/// The portable flags.
pub(crate) const DIR_FLAGS: rustix::fs::OFlags = super::PORTABLE_DIR_FLAGS;
