//! macOS and the other Unixes: no `O_PATH`, so directories on the way are opened for reading
//! (see the module above for what that changes: a search-only directory cannot be walked
//! through, and a path through it is refused).

/// The portable flags.
pub(crate) const DIR_FLAGS: rustix::fs::OFlags = super::PORTABLE_DIR_FLAGS;
