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

/// The name the file open as `file` has on disk in its folder, where it may differ from the name
/// it was opened by: on macOS (APFS and HFS+ ignore case, by default, and Unicode normalization,
/// so `Readme.md` opens `README.md`) the system keeps it (`F_GETPATH`); a rename over the file
/// by the name given would give it that spelling. `None` elsewhere (names are looked up as they
/// are written) or when it cannot be told.
pub(crate) fn stored_name(file: std::os::fd::BorrowedFd<'_>) -> Option<std::ffi::OsString> {
    #[cfg(target_vendor = "apple")]
    {
        use std::os::unix::ffi::OsStrExt;
        let path = rustix::fs::getpath(file).ok()?;
        let name = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes())).file_name();
        name.map(std::ffi::OsStr::to_os_string)
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        let _ = file;
        None
    }
}

/// The portable flags.
pub(crate) const DIR_FLAGS: rustix::fs::OFlags = super::PORTABLE_DIR_FLAGS;
