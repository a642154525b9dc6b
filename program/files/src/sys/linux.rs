//! Linux and Android: directories on the way are `O_PATH` handles (no read permission needed,
//! nothing read through them but names).

use rustix::fs::OFlags;

/// `O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC`.
pub(crate) const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
