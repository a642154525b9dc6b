//! Where the program keeps its state, and private files there, on Unix (Linux, macOS, the BSDs).
//! The rest of the program goes through [`state_dir`], [`read_private`] and [`private_dir`] only.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use rustix::process::getuid;

use super::Refused;

/// The program's state directory: `$XDG_STATE_HOME/claude-ide-bridge` when that is an absolute
/// path, else `~/.local/state/claude-ide-bridge` (macOS included: a command-line program's state,
/// found where its users look on Linux); `None` without a home.
pub fn state_dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(state.join("claude-ide-bridge"))
}

/// Reads `path` whole if it is a regular file of this user's that group and others cannot use,
/// of at most `max` bytes. Opened without following a symbolic link and without waiting (a FIFO
/// put there does not block). `Ok(None)` when it does not exist.
pub fn read_private(path: &Path, max: u64) -> Result<Option<Vec<u8>>, Refused> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(Refused::Symlink)
        }
        Err(e) => return Err(Refused::Unreadable(e)),
    };
    let meta = file.metadata().map_err(Refused::Unreadable)?;
    if !meta.is_file() {
        return Err(Refused::NotAFile);
    }
    if meta.uid() != getuid().as_raw() {
        return Err(Refused::NotOurs);
    }
    if meta.mode() & 0o077 != 0 {
        return Err(Refused::OpenToOthers(meta.mode() & 0o7777));
    }
    if meta.len() > max {
        return Err(Refused::TooBig(meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(Refused::Unreadable)?;
    if bytes.len() as u64 > max {
        return Err(Refused::TooBig(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Creates `dir` (and its parents) with mode 0700 when missing, then checks it and its parent:
/// real directories (not symbolic links) of this user's that nobody else can write; `dir` itself
/// closed to group and others. Refusals are `PermissionDenied` errors saying why.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    if let Some(parent) = dir.parent() {
        check_dir(parent, 0o022)?;
    }
    check_dir(dir, 0o077)
}

fn check_dir(dir: &Path, forbidden: u32) -> io::Result<()> {
    let refuse = |why: String| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing state folder {}: {why}", dir.display()),
        )
    };
    let meta = fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Err(refuse("it is not a directory".into()));
    }
    if meta.uid() != getuid().as_raw() {
        return Err(refuse("it is owned by another user".into()));
    }
    if meta.mode() & forbidden != 0 {
        return Err(refuse(format!(
            "its mode {:o} lets group or others at it (chmod go-rwx {})",
            meta.mode() & 0o7777,
            dir.display()
        )));
    }
    Ok(())
}
