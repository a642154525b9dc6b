//! Why an access was refused or failed.

use std::fmt;
use std::io;

/// Why a file access was refused (the client asked for something it may not have) or failed
/// (the file system said no). Every message names the path as the client gave it.
#[derive(Debug)]
pub enum Error {
    /// The path is not inside a workspace folder, or a symbolic link on the way leads out of it.
    Outside {
        /// The path as given.
        path: String,
        /// Why, in words.
        why: String,
    },
    /// Nothing exists at the path (or a directory on the way is missing).
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A name on the way to the path is something other than a directory (`a.txt/b`).
    NotADirectory {
        /// The path as given.
        path: String,
        /// The part of it that is not a directory, from its workspace folder (`a.txt`).
        on_the_way: String,
    },
    /// The path names something other than a regular file.
    NotRegular {
        /// The path as given.
        path: String,
        /// What it is: `"a directory"`, `"a FIFO"`, `"a socket"`, ...
        kind: &'static str,
    },
    /// Resolving the path followed more symbolic links than allowed (a loop, most likely).
    SymlinkLoop {
        /// The path as given.
        path: String,
    },
    /// The file is bigger than the read limit.
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size in bytes, as far as it was seen.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    NotText {
        /// The path as given.
        path: String,
    },
    /// The path leads, through a symbolic link, to a name that is not UTF-8: an answer (a JSON
    /// string) could only name it lossily, and that name would be another file's.
    NameNotUtf8 {
        /// The path as given.
        path: String,
    },
    /// A `listFiles` pattern that is not a valid glob (or too long).
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why.
        why: String,
    },
    /// The file was not what it was when read, just before it would have been replaced
    /// ([`Workspace::replace`]): saved or deleted meanwhile. Nothing was written.
    ///
    /// [`Workspace::replace`]: crate::Workspace::replace
    Changed {
        /// The path as given.
        path: String,
    },
    /// The path's workspace folder is no longer the directory it was when first used (removed
    /// and made again, replaced by another: `rm -rf proj && git clone ... proj`): nothing in it
    /// is served until the workspace is made again (the bridge restarted).
    FolderReplaced {
        /// The path as given.
        path: String,
        /// The workspace folder, as served.
        folder: String,
    },
    /// The file system refused or failed.
    Io {
        /// The path as given.
        path: String,
        /// What was being done.
        op: &'static str,
        /// The error.
        err: io::Error,
    },
}

impl Error {
    /// Whether the client asked for something it may not have or that cannot be served (answered
    /// as invalid params, JSON-RPC -32602), rather than a failure of the file system (-32603).
    ///
    /// ```
    /// use claude_ide_bridge_files::Error;
    /// assert!(Error::NotFound { path: "a".into() }.is_refusal());
    /// ```
    pub fn is_refusal(&self) -> bool {
        match self {
            // A name the file system cannot hold (longer than 255 bytes): the client's path.
            Error::Io { err, .. } => err.kind() == io::ErrorKind::InvalidFilename,
            Error::FolderReplaced { .. } => false,
            _ => true,
        }
    }

    pub(crate) fn io(path: &str, op: &'static str, err: impl Into<io::Error>) -> Error {
        let err = err.into();
        match err.kind() {
            io::ErrorKind::NotFound => Error::NotFound { path: path.into() },
            _ => Error::Io {
                path: path.into(),
                op,
                err,
            },
        }
    }

    /// An access that failed at its workspace folder itself: never "no such file" (the folder
    /// removed or renamed since the bridge started is not the client's path missing).
    pub(crate) fn folder(path: &str, op: &'static str, err: impl Into<io::Error>) -> Error {
        Error::Io {
            path: path.into(),
            op,
            err: err.into(),
        }
    }

    pub(crate) fn outside(path: &str, why: impl Into<String>) -> Error {
        Error::Outside {
            path: path.into(),
            why: why.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Outside { path, why } => write!(f, "{path}: outside the workspace ({why})"),
            Error::NotFound { path } => write!(f, "{path}: no such file"),
            Error::NotADirectory { path, on_the_way } => {
                write!(f, "{path}: {on_the_way} is not a directory")
            }
            Error::NotRegular { path, kind } => {
                write!(
                    f,
                    "{path} is {kind}: only regular files are read or written"
                )
            }
            Error::SymlinkLoop { path } => {
                write!(f, "{path}: too many symbolic links (a loop?)")
            }
            Error::TooLarge { path, size, limit } => write!(
                f,
                "{path} is {size} bytes, more than the {limit}-byte limit for a file read"
            ),
            Error::NotText { path } => write!(f, "{path} is not UTF-8 text"),
            Error::NameNotUtf8 { path } => write!(
                f,
                "{path} leads through a symbolic link to a name that is not UTF-8, which an answer cannot hold"
            ),
            Error::BadPattern { pattern, why } => write!(f, "pattern {pattern:?}: {why}"),
            Error::Changed { path } => write!(
                f,
                "{path} changed (saved or deleted) while the new text was being written: it was \
                 left as it is"
            ),
            Error::FolderReplaced { path, folder } => write!(
                f,
                "{path}: the workspace folder {folder} is no longer the directory it was when the \
                 bridge started (restart the bridge to serve what is there now)"
            ),
            Error::Io { path, op, err } => {
                write!(f, "{path}: {op} failed: {err}")?;
                match crate::sys::io_hint(op, err) {
                    Some(hint) => write!(f, " ({hint})"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { err, .. } => Some(err),
            _ => None,
        }
    }
}
