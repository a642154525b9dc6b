//! Unix: modes, `std::os::unix::fs::symlink`, `kill`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Asserts that `path`'s permission bits are `mode`.
pub fn assert_mode(path: &Path, mode: u32) {
    let got = fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(got, mode, "mode of {}", path.display());
}

/// Sets `path`'s permission bits.
pub fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A symbolic link at `link` to the directory `target`.
pub fn symlink_dir(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Sends a signal (`-TERM`, `-INT`) to `pid` with `kill`.
pub fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Asks `child` to stop (SIGTERM); it may already have exited, so a failure is not one.
pub fn ask_to_stop(child: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
}
