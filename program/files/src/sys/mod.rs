//! What differs between the operating systems the crate runs on, behind one interface: the
//! rest of the crate names [`DIR_FLAGS`] and never tests the OS itself.
//!
//! - `linux.rs` (Linux, Android): directories on the way are opened as `O_PATH` handles.
//! - `macos.rs` (macOS and the other Unixes): `O_PATH` does not exist there; directories are
//!   opened for reading instead ([`PORTABLE_DIR_FLAGS`]). The walk, and so the confinement, is
//!   the same; the one difference is that a directory the user may search but not read
//!   (mode `--x`) cannot be walked through there, and a path through it is refused with
//!   "permission denied" instead of being served. The tests run the walk with these flags on
//!   Linux too (`resolve.rs`), so the fallback is exercised on every run.
//! - `winpath.rs`: paths and names as Windows reads them (drive letters, UNC and `\\?\`
//!   roots, case-insensitive names, reserved device names, alternate data streams, trailing
//!   dots and spaces), the lexical step a Windows backend resolves with. Pure string work,
//!   compiled and tested on every OS; the Windows backend itself (handle-relative walks, opens
//!   and atomic replace) is not written yet, so the crate does not build for Windows.

use rustix::fs::OFlags;

pub(crate) mod winpath;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "linux.rs"]
mod os;
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
#[path = "macos.rs"]
mod os;

/// How directories are opened while walking a path: never following a link, never waiting.
pub(crate) use os::DIR_FLAGS;

/// Directory handles any Unix can open: for reading, never following a link, never waiting
/// (`O_NONBLOCK`: a FIFO swapped in for the directory fails `O_DIRECTORY` without blocking).
#[cfg_attr(any(target_os = "linux", target_os = "android"), allow(dead_code))]
pub(crate) const PORTABLE_DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);
