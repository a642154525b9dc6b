//! # claude-ide-bridge-runtime
//!
//! What the `claude-ide-bridge` runtimes (smol tasks, std threads) share, written once: each of
//! them only runs its accept, read, write and timer loops, and this crate does the rest.
//!
//! - [`RunningServer`]: a running server's state (the engine, its connections, the events waiting
//!   for the host), created by [`RunningServer::start`], which binds the listener and writes the
//!   lock file, and what happens after every call into the engine: draining it, writing new output
//!   to a socket at once from the calling thread when the socket takes it (through the [`Wire`]
//!   trait a runtime implements for its connections) or waking the connection's writer, and handing
//!   events to the host's handler one at a time.
//! - [`Handle`]: how hosts answer calls, push notifications and change settings, from any thread
//!   or task: one type for both runtimes.
//! - [`Options`] and [`LockFileMode`]: what a server is started with; [`ListenError`]: a start
//!   refused by the port, [`LockFileError`]: one refused by the lock file.
//! - [`generate_token`]: a fresh [`AuthToken`] from the OS CSPRNG.
//! - [`lock`]: the lock-file directory (created 0700, refused when it is a symlink, not ours, or
//!   writable by others; on Windows private by the profile's access list), atomic writes of
//!   `<port>.lock` (0600, never through a symlink), the
//!   [`LockGuard`](lock::LockGuard) that rewrites and removes it, and removal of this host's stale
//!   lock files.
//! - [`signals`]: a process-wide registry of live lock files removed on SIGINT/SIGTERM (Ctrl-C,
//!   Ctrl-Break and closing the console on Windows) before the process ends.
//! - [`terminal`]: what was typed on the terminal and not read yet, dropped before a question;
//!   the terminal's settings (a console's modes on Windows) saved and put back around a program.
//! - [`process`]: a child process waited for until it ends, left unreaped so that its id is
//!   still its own to a signal meanwhile.
//!
//! - [`Logger`]: debug logging of connection events, never of the token. [`Clock`]: the engine's
//!   `now`, which tests can move forward.
//!
//! What differs between operating systems lives in one private module per platform
//! (`src/sys/unix.rs`, `src/sys/windows.rs`) behind one interface.
//!
//! ```no_run
//! use claude_ide_bridge::LockFile;
//! use claude_ide_bridge_runtime::{generate_token, lock};
//!
//! let token = generate_token();
//! let dir = lock::default_lock_dir()?;
//! lock::ensure_lock_dir(&dir)?;
//! lock::remove_stale_locks(&dir, "MyEditor")?;
//! let folders = vec!["/home/me/project".into()];
//! let content = LockFile::new(std::process::id(), folders, "MyEditor", false, token);
//! let guard = lock::LockGuard::create(&dir, 41234, &content, true)?;
//! println!("lock file at {}", guard.path().display());
//! drop(guard); // removes the file
//! # Ok::<(), std::io::Error>(())
//! ```

// Unsafe code only in `sys/windows.rs`, for Win32 calls std does not wrap, and in `sys/unix.rs`
// for glibc's `mallopt` and `malloc_trim` (`memory`) and `sigaction` (which signals the process
// started ignoring).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod clock;
mod core;
mod delivery;
pub mod lock;
mod log;
pub mod memory;
mod options;
pub mod process;
mod shared;
pub mod signals;
mod sys;
pub mod terminal;

pub use crate::clock::Clock;
pub use crate::delivery::{Wire, BACKLOG_POLL, MAX_BURST, MAX_HELD_BYTES, MAX_HOST_BACKLOG};
pub use crate::log::Logger;
pub use crate::options::{lock_folders, posix_folders, LockFileMode, Options};
pub use crate::shared::{
    send_now, shut_down, stop_listening, AfterInput, Events, Handle, Handler, Next, RunningServer,
    READ_CHUNK, STOP_GRACE, WRITE_CHUNK,
};

pub(crate) use crate::core::Core;
pub use crate::core::{ListenError, LockFileError};

/// The names each runtime crate re-exports (`pub use claude_ide_bridge_runtime::api::*`), so that
/// a host needs only its runtime's crate: what it starts a server with, what it receives, how it
/// answers, and the types those take and give.
///
/// ```
/// use claude_ide_bridge_runtime::api::{ClientPaths, ConnectionId, DisconnectReason, Handle};
/// use claude_ide_bridge_runtime::api::Rejection;
///
/// /// A client in WSL names a Windows host's files by their mounts (`/mnt/c/...`).
/// fn client_in_wsl(handle: &Handle, conn: ConnectionId) {
///     handle.set_client_paths(conn, ClientPaths::WslMounts);
/// }
///
/// /// A client refused for its token: one that read an old lock file.
/// fn wrong_token(reason: &DisconnectReason) -> bool {
///     matches!(reason, DisconnectReason::Refused(Rejection::Unauthorized))
/// }
/// ```
pub mod api {
    pub use crate::{
        generate_token, lock_folders, posix_folders, Clock, Handle, ListenError, LockFileError,
        LockFileMode, Logger, Options, MAX_HOST_BACKLOG,
    };
    pub use claude_ide_bridge::RpcError;
    pub use claude_ide_bridge::{
        ApiError, Asker, AuthToken, CallId, CancelReason, ConnectionId, DisconnectReason, Event,
        Limits, LockFile, PathError, Rejection, Target,
    };
    // What a call asks (tool calls and their arguments, compatibility requests) and what the host
    // answers with.
    pub use claude_ide_bridge::{
        CheckDocumentDirtyArgs, CloseTabArgs, CompatRequest, ExecuteCodeArgs, GetDiagnosticsArgs,
        OpenDiffArgs, OpenFileArgs, OpenFilesArgs, ReformatFileArgs, SaveDocumentArgs, ToolCall,
        ToolCallError, ToolName, ToolSet,
    };
    pub use claude_ide_bridge::{
        Content, CurrentSelection, Diagnostic, DocumentDirty, EditorTab, FileDiagnostics,
        OpenEditors, OpenFileResult, OpenedFiles, Position, Range, SaveDocumentResult, Selection,
        SelectionUnavailable, ToolResult, WorkspaceFolder, WorkspaceFolders,
    };
    // What the host pushes.
    pub use claude_ide_bridge::{
        AtMentioned, DiagnosticsChanged, LogEvent, Notification, SelectionChanged,
    };
    // Paths and `file://` URIs as the wire writes them, and as a client names files
    // (`Handle::set_client_paths`).
    pub use claude_ide_bridge::{
        file_uri, is_within, resolve_in_workspace, to_posix, uri_to_path, uri_to_windows_path,
        ClientPaths,
    };
    // The JSON a compatibility request is answered with (`Handle::respond_compat`) and an editor
    // tab carries (`EditorTab::extra`): the same version as these types', without a dependency
    // of the host's own.
    pub use serde_json::{json, Map, Value};
}

use claude_ide_bridge::AuthToken;

/// A fresh token: 32 bytes from the operating system's CSPRNG, base64url without padding.
///
/// ```
/// let a = claude_ide_bridge_runtime::generate_token();
/// let b = claude_ide_bridge_runtime::generate_token();
/// assert_eq!(a.as_str().len(), 43);
/// assert_ne!(a, b);
/// ```
pub fn generate_token() -> AuthToken {
    AuthToken::generate(&mut rand_core::OsRng)
}
