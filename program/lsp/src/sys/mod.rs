//! What differs between the operating systems the client runs on, behind one interface (std's
//! `sys` pattern, as in the other crates): `unix.rs` and `windows.rs` define the same items, and
//! the rest of the crate (`server.rs`, `state.rs`, `table.rs`, `merge.rs`, `watch.rs`,
//! `lib.rs`) calls them without testing the OS itself.
//!
//! The interface:
//!
//! - `own_tree(command)` before a server's start, `adopt(child)` after it, `kill_tree(pid)`: a
//!   server started so that its whole tree can be stopped, and that tree killed;
//! - `watch_exit(child, on_exit)` and its `ExitWatch`: an exit seen without a wake-up until it happens (a
//!   thread asleep in the wait, the process left unreaped until its tree is killed);
//!   `reap_id(pid)`: a child reaped whose `Child` is gone;
//! - `set_nonblocking(input)`, `wait_writable(input, timeout)`: a server's input written without
//!   a server that stops reading holding the writer;
//! - `is_executable(&Metadata)`, `exe_extensions()`: what a program file is (an execute bit on
//!   Unix; on Windows a name with one of `PATHEXT`'s extensions, so that npm's
//!   `pyright-langserver.cmd` is found and its extensionless shell-script twin is not);
//! - `path_of_uri(uri)`, `key_of(path)`, `published_path(uri)`: how a file's path and the
//!   `file:` URI a server names it by map to each other (on Windows the engine's `/c/x` form of
//!   a URI's path is no Windows path), and a published URI's path written the one way (`.` and
//!   empty parts out);
//! - `file_metadata(path)`, `open_to_read(path)`, `same_file(&Metadata, &Metadata)`: what a
//!   server's file on disk is when its text is checked (a link put in its place followed on
//!   Windows only, where the files crate names a file by the link it was reached through);
//! - `glob_form(path)`, `GLOBS_IGNORE_CASE`: a path as a server's watched globs are matched
//!   against it, and whether they ignore case (as the file system does by default);
//! - `real_path(found)`: a found program's path with its links resolved (npm's link into its
//!   package), written as programs take it (no `\\?\` on Windows);
//! - `split_words(command)`: a `--lsp` command split into words as the system's command lines
//!   are (a POSIX shell's words on Unix; Windows' command-line rules, backslashes kept);
//! - `CLANGD_INSTALL`: how clangd is installed on this system (`doctor`'s hint).
//!
//! On Linux and macOS alike (`unix.rs`) the tree is the server's own process group: the server
//! is started as a group leader, and a stop sends SIGKILL to the group, which takes the
//! processes it started too (a `node` under a shell script, say). When the bridge itself is
//! killed with SIGKILL nothing runs to do that; each server then sees its input closed and, as
//! the protocol has it, exits on its own (all the servers the bridge knows do). No
//! parent-death signal is asked for: Linux's `PR_SET_PDEATHSIG` reaches only the direct child,
//! not its group, and macOS has none, so both behave the same.
//!
//! On Windows (`windows.rs`) the tree is a Job Object per server, created with "kill on job
//! close": a stop closes it, and Windows closes it too when the bridge exits however it ends.

#[cfg(unix)]
#[path = "unix.rs"]
mod os;
#[cfg(windows)]
#[path = "windows.rs"]
mod os;

pub(crate) use os::{
    adopt, exe_extensions, file_metadata, glob_form, is_executable, key_of, kill_tree,
    open_to_read, own_tree, path_of_uri, published_path, real_path, reap_id, same_file,
    set_nonblocking, split_words, wait_writable, watch_exit, CLANGD_INSTALL, GLOBS_IGNORE_CASE,
};

/// The stack of a server's exit watch (`watch_exit`): it makes one system call and a callback.
const EXIT_WATCH_STACK: usize = 64 * 1024;
