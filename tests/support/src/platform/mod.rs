//! What the scenarios do differently per operating system, behind one interface (one file per
//! platform, as in the runtime crate's `sys`):
//!
//! - `assert_mode(path, mode)`: the file's permission bits are `mode` (Unix); Windows has none
//!   (its lock files are private by the profile folder's access list), so nothing is checked;
//! - `set_mode(path, mode)`: sets them (Unix); nothing on Windows;
//! - `symlink_dir(target, link)`: a symbolic link to a directory;
//! - `signal(pid, name)`: sends `-TERM` or `-INT` with `kill` (Unix only: Windows has no signals);
//! - `ask_to_stop(child)`: SIGTERM on Unix; on Windows, which has no such signal, a kill.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use self::unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use self::windows::*;
