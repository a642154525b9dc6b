//! Windows: no mode bits (privacy by access lists, SECURITY.md), `symlink_dir`.

use std::path::Path;

/// Windows has no permission bits: nothing to check (the lock directory and its files inherit
/// the user profile's access list).
pub fn assert_mode(_path: &Path, _mode: u32) {}

/// Windows has no permission bits: nothing to set.
pub fn set_mode(_path: &Path, _mode: u32) {}

/// A directory symbolic link at `link` to `target`.
pub fn symlink_dir(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(target, link)
}

/// Windows has no signal to ask a console program to stop with: `child` is killed.
pub fn ask_to_stop(child: &mut std::process::Child) {
    let _ = child.kill();
}
