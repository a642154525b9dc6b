//! What differs between the operating systems the crate runs on, behind one interface.
//!
//! The listing's walk (`walk.rs`) is one for every OS, over a directory handle each OS gives
//! (its `Listing` trait). On Unix (`unix/`) the path walk, the reads and writes and the
//! listing's handles are `unix/resolve.rs` and `unix/open.rs` (over `openat` handles), a
//! replaced file's extended attributes `unix/xattr.rs`; what differs between Unixes:
//!
//! - `unix/linux.rs` (Linux, Android): directories on the way are opened as `O_PATH` handles.
//! - `unix/macos.rs` (macOS and the other Unixes): `O_PATH` does not exist there; directories
//!   are opened for reading instead (`PORTABLE_DIR_FLAGS`). The walk, and so the confinement,
//!   is the same; the one difference is that a directory the user may search but not read
//!   (mode `--x`) cannot be walked through there, and a path through it is refused with
//!   "permission denied" instead of being served. The tests run the walk with these flags on
//!   Linux too (`unix/resolve.rs`), so the fallback is exercised on every run.
//!
//! On Windows, `windows.rs` is the whole backend: the same `Workspace` methods (`open`,
//! `line_count`, `regular_file`, `writable`, `write`, `at_top`, and the listing's handles) built on cap-std's `Dir`, after the lexical step of `winpath.rs`: paths and names
//! as Windows reads them (drive letters, UNC and `\\?\` roots, case-insensitive names, reserved
//! device names, alternate data streams, trailing dots and spaces). `winpath.rs` is pure string
//! work, compiled and tested on every OS.
//!
//! `io_hint` adds what the user can do to an operation's error on this OS (macOS's privacy
//! protection of folders).
//!
//! Both give `advertised` (how a folder given on the command line is kept), `identity` (which
//! directory a folder is), `process_running` (whether the writer of a temporary file may still
//! use it: on Unix, whether its pid runs; Windows swaps no names and says no), `Listed` (a directory handle as the listing's walk reads it) and
//! `DirFlags`, `DIR_FLAGS` (how a workspace opens the directories on a path's way: `O_PATH` or
//! the portable flags on Unix; nothing to choose on Windows).

pub(crate) mod winpath;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod winacl;
#[cfg(windows)]
mod windows;

#[cfg(windows)]
pub(crate) use windows::{advertised, identity, process_running, DirFlags, Listed, DIR_FLAGS};

/// Whether ignore rules (`.gitignore`, `.git/info/exclude`) match names ignoring case, as git
/// does where `git init` finds the file system ignores case and sets `core.ignoreCase`: NTFS on
/// Windows and APFS or HFS+ on macOS, by default.
pub(crate) const IGNORE_CASE: bool = cfg!(any(windows, target_vendor = "apple"));

/// Whether names and paths follow Windows' rules (`\` between parts, drive letters, names
/// compared ignoring case as NTFS does: `winpath.rs`), as the listing's patterns and folders
/// compare them.
pub(crate) const WINDOWS_NAMES: bool = cfg!(windows);

/// What to add to a file operation's error `err` (the operation `op`, as `Error::Io` names
/// it) so that the user can act on it, on this OS:
/// on macOS, an `EPERM` ("Operation not permitted") is the privacy protection of folders such
/// as Desktop, Documents, Downloads, iCloud Drive and external volumes, lifted in System
/// Settings for the app that started the bridge ([`privacy_hint`]); nothing elsewhere.
pub(crate) fn io_hint(op: &str, err: &std::io::Error) -> Option<&'static str> {
    // Only where the protection stops: finding, opening, reading, listing (an owner kept, a mode
    // set, a locked file renamed over fail with EPERM for reasons of their own).
    let finding = ["open", "read", "look", "stat", "list"]
        .iter()
        .any(|w| op.starts_with(w));
    privacy_hint(err, cfg!(target_vendor = "apple")).filter(|_| finding)
}

/// [`io_hint`] for macOS (`apple`) or not, testable on every OS.
fn privacy_hint(err: &std::io::Error, apple: bool) -> Option<&'static str> {
    const EPERM: i32 = 1;
    (apple && cfg!(unix) && err.raw_os_error() == Some(EPERM)).then_some(
        "macOS privacy protection: allow the app that started the bridge (the terminal, or the \
         editor) in System Settings > Privacy & Security > Files and Folders, or Full Disk \
         Access, then start the bridge again",
    )
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

#[cfg(test)]
mod tests {
    /// The hint is for `EPERM` on macOS only: a permission refused by the file's mode
    /// (`EACCES`) is the user's to change, and Linux's `EPERM` is not privacy protection.
    #[test]
    fn operation_not_permitted_on_macos_names_the_privacy_settings() {
        use std::io::Error;
        let eperm = Error::from_raw_os_error(1);
        let hint = super::privacy_hint(&eperm, true);
        assert_eq!(hint.is_some(), cfg!(unix));
        if let Some(hint) = hint {
            assert!(hint.contains("Privacy & Security"), "{hint}");
        }
        assert_eq!(super::privacy_hint(&eperm, false), None);
        assert_eq!(
            super::privacy_hint(&Error::from_raw_os_error(13), true),
            None
        );
        let other = Error::other("Operation not permitted");
        assert_eq!(super::privacy_hint(&other, true), None);
    }
}
