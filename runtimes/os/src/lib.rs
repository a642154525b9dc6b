//! # claude-ide-bridge-os
//!
//! The operating-system pieces shared by the `claude-ide-bridge` runtimes (smol and blocking
//! threads): everything that is IO but not sockets.
//!
//! - [`generate_token`]: a fresh [`AuthToken`] from the OS CSPRNG.
//! - [`lock`]: the lock-file directory (created 0700, refused when it is a symlink, not ours, or
//!   writable by others), atomic writes of `<port>.lock` (0600, never through a symlink), the
//!   [`LockGuard`](lock::LockGuard) that rewrites and removes it, and removal of this host's stale
//!   lock files.
//! - [`signals`]: a process-wide registry of live lock files removed on SIGINT/SIGTERM before the
//!   default action happens.
//! - [`Logger`]: debug logging of connection events, never of the token.
//! - [`Options`] and [`LockFileMode`]: what both runtimes are started with, and [`Core`], the
//!   drain step both runtimes run after every call into the engine, and [`Delivery`] and
//!   [`deliver`], the bookkeeping and the delivery loop of their event handlers.
//!
//! ```no_run
//! use claude_ide_bridge::discovery::LockFile;
//! use claude_ide_bridge_os::{generate_token, lock};
//!
//! let token = generate_token();
//! let dir = lock::default_lock_dir()?;
//! lock::ensure_lock_dir(&dir)?;
//! lock::remove_stale_locks(&dir, "MyEditor")?;
//! let content = LockFile::new(std::process::id(), vec!["/home/me/project".into()], "MyEditor", false, token);
//! let guard = lock::LockGuard::create(&dir, 41234, &content, true)?;
//! println!("lock file at {}", guard.path().display());
//! drop(guard); // removes the file
//! # Ok::<(), std::io::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
mod core;
mod delivery;
pub mod lock;
mod log;
mod options;
pub mod signals;

pub use crate::clock::Clock;
pub use crate::core::{Core, Drained};
pub use crate::delivery::{
    act_on_ready, deliver, write_held, write_now, Backlog, Delivery, DeliveryState, Wire,
    BACKLOG_POLL, MAX_BURST, MAX_HELD_BYTES, MAX_HOST_BACKLOG,
};
pub use crate::log::Logger;
pub use crate::options::{posix_folders, LockFileMode, Options};

use claude_ide_bridge::AuthToken;

/// A fresh token: 32 bytes from the operating system's CSPRNG, base64url without padding.
///
/// ```
/// let a = claude_ide_bridge_os::generate_token();
/// let b = claude_ide_bridge_os::generate_token();
/// assert_eq!(a.as_str().len(), 43);
/// assert_ne!(a, b);
/// ```
pub fn generate_token() -> AuthToken {
    AuthToken::generate(&mut rand_core::OsRng)
}
