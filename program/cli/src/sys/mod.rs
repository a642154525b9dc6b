//! What differs between the operating systems the program runs on, behind one interface (std's
//! `sys` pattern, as in the runtime crate): every platform file defines the same items, and the
//! rest of the program calls them without `cfg`.
//!
//! - `unix/`: Linux, macOS and the other Unixes (`unix/tie.rs`: commands tied to the bridge);
//! - `windows.rs`: Windows.
//!
//! The interface (each item defined by every platform file; `tests/platform_interfaces.rs`
//! checks this list against them):
//!
//! - `HOME_VAR`: the variable naming the user's home, where `claude` looks for `.claude/ide`;
//!   `case_key(path)`: a path as paths are compared (on Windows, ignoring case as NTFS does);
//! - `v6_any_takes_v4()`: whether a bridge listening on `::` is reached at 127.0.0.1, where
//!   claude connects unless told otherwise (`--host`; Linux's `net.ipv6.bindv6only` read);
//! - `state_dir()`, `NO_STATE_DIR`, `state_folders(folders)`, `read_private(path, max)`,
//!   `private_dir(dir)`, `check_private_dir(dir)`, `open_private_file(path)`: the program's
//!   state folder (or why there is none), the workspace folders that name a state file
//!   (resolved), and the private files in it (`state`: a state file, the lock of a workspace's
//!   starts); `private_dirs(dir)`, `append_private_file(path)`: the language-server log (a
//!   private regular file only), `move_log_aside(path, to)`, `hold_log(&File, path)`: that log
//!   moved aside unless another bridge writes to it now, and this one's mark that it does, with
//!   whether the path still names the file marked (Unix: a
//!   shared `flock` held while it runs, which a probe's exclusive one finds; Windows: the write
//!   handle itself, which an open denying others' writes finds); `append_private(path)`:
//!   the wire log (a FIFO allowed);
//! - `is_mine(&Metadata)`, `lock_dir_finding(dir, &Metadata)`, `remove_hint(path)`,
//!   `new_dir_hint(dir)`: what `list` and `doctor` say about lock files and their folders;
//! - `in_container()`, `wsl_windows_lock_dirs()`, `wsl_path(windows)`, `ancestors()`: whether
//!   this runs in a container, inside WSL where a `claude` run on Windows looks (which a `claude`
//!   run in WSL reads too) and a Windows path as WSL mounts it, and the processes above this one
//!   (an IDE whose terminal this is) (`list`, `doctor`);
//! - `INTERRUPT`, `HANGUP`: the numbers [`HostInput::Signal`](crate::host::HostInput::Signal)
//!   carries for Ctrl-C and for the terminal hanging up, `signal_name(sig)` how each is named
//!   to the user; `listen_for_stop(inputs, stdio)`: the requests to stop (SIGINT, SIGTERM,
//!   SIGHUP, SIGQUIT; Ctrl-C, Ctrl-Break, the console closed, logoff, shutdown) as host inputs;
//!   `stopped()`: the program has stopped (Windows waits for it before ending a process whose
//!   console closes); `end_interrupted()`: the program ended as Ctrl-C ends one, after its stop
//!   (Unix: SIGINT's default action, so that a shell stops the script it ran it in; Windows,
//!   where the shell gets the console's Ctrl-C itself: nothing, status 0);
//! - `program_named(name)`, `findable(command)`: the program `run -- NAME` runs (Windows: `NAME`
//!   looked for under `PATHEXT`'s extensions, npm's `claude.cmd`) and whether it can be started,
//!   said before the bridge starts;
//! - `spawn_tied(command)`, `launch_if_asked()`: `run`'s command started so that it ends with the
//!   program however the program ends (Linux: `PR_SET_PDEATHSIG` through a launcher, the program
//!   started again as its own first step, which `$EDITOR` on a proposal goes through too; macOS:
//!   the program started beside the command as its watcher; Windows: a Job Object with "kill on
//!   job close", let go once the command ends by itself; `unix/tie.rs`);
//! - `init_if_first()`: the program as a container's first process (Linux pid 1): started
//!   again as its only child, while pid 1 reaps the orphans the container's processes leave and
//!   hands on the stop signals (`unix/init.rs`);
//! - `wait_for_command(child)`, `exit_code(status)`, `cannot_execute(e)`,
//!   `ended_abnormally(status)`: `run`'s command, and whether it was killed (a signal; on Windows
//!   a crash's status, or the bridge's kill), so that the terminal's settings are put back after
//!   it (`ui::restore_terminal`);
//! - `ask_to_stop(pid)`, `kill_now(pid)`, `SIGNALS_EDITOR`: `run`'s command and `$EDITOR` at a
//!   stop; `ended_by_interrupt(status)`: whether Ctrl-C ended `$EDITOR`;
//!   `start_editor(editor, files, ends, setup)`: `$EDITOR` started (a script without `#!` is run
//!   by `sh` on Unix, as a shell would);
//! - `wait_until_stdout_unread()`: standard output's reader gone (the `--stdio` editor closed
//!   its reading end), waited for without a wake-up (Linux: `poll` for its error or hang-up;
//!   macOS, whose `poll` reports neither unless asked for an event, and Windows: not watched);
//! - `terminal_is_ours()`: whether this process may use its terminal (not in its background);
//!   `LineReader`: the terminal's answers, one line at a time, as a [`TerminalRead`] (Unix:
//!   waited for so that the bridge sent to the background is not stopped, `unix/line_reader.rs`);
//! - `stamp_metadata(path)`: what tells a file the servers have changed;
//!   `raise_open_files_limit()`: as many descriptors as allowed, for many connections;
//!   `write_past_file_size_limit_fails()`: a write past `ulimit -f` refused, not the end of the
//!   bridge (Unix: SIGXFSZ caught);
//! - `path_of_file_uri(uri)`: the path the files crate takes for a `file:` URI (its path; on
//!   Windows the Windows path it names, `None` when it writes no drive); `native_path(path)`: a
//!   path in the engine's wire form (`/c/ws`) as the OS writes it (`C:\ws` on Windows);
//!   `normalize_wire(path)`: that form with `.`, `..` and repeated `/` resolved (a Windows
//!   share's leading `//` kept);
//! - for tests only: `mode_of(path)`, `make_private(path)`.
//!
//! Process helpers the runtimes share (waiting for a child until it ends without reaping it:
//! `claude_ide_bridge_runtime::process::wait_until_ended`) are the runtime crate's.
//!
//! What was typed on the terminal before a question is dropped by the runtime crate
//! (`claude_ide_bridge_runtime::terminal::discard_typed`), whose own platform modules make the
//! OS calls (Windows' needs `unsafe`, which this crate forbids).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use self::unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use self::windows::*;

/// Whether a workspace folder a state file names (as [`state_folders`] gives it) is gone: the
/// path this OS writes it as ([`native_path`]) names nothing. A drive or mount that is not there
/// today (a removable one, a share offline) is gone too, and its state kept for
/// [`PRUNE_AFTER`](crate::state::PRUNE_AFTER). On Windows the folders are kept lowercased in the
/// wire's form (`/c/users/me/app`, `//host/share/app`): NTFS and FAT take the lowercased name as
/// the folder's, but a folder of a case-sensitive directory (WSL's `fsutil file
/// setCaseSensitiveInfo`) whose name has capitals is not found so: its state file goes after the
/// same month unwritten, and its next start takes a new port and token.
pub fn folder_missing(folder: &str) -> bool {
    let missing = std::fs::symlink_metadata(native_path(folder));
    matches!(missing, Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Whether a command the program starts ends with it, however the program ends (`unix/tie.rs`):
/// `run`'s command and `$EDITOR` on a proposal do; an editor with a window of its own opened on
/// files at the start (`--open-files`) is the user's and stays.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ends {
    /// Ends with the bridge.
    WithBridge,
    /// Outlives it.
    OnItsOwn,
}

/// What [`LineReader::read_line`] gave: the terminal's answer to a question.
#[derive(Debug, PartialEq, Eq)]
pub enum TerminalRead {
    /// A line, its `\n` included (the last one may have none).
    Line(Vec<u8>),
    /// The end of input, or an error reading it: the terminal closed.
    End,
    /// Unix: the terminal is no longer this process's (the bridge was sent to its background);
    /// nothing was read.
    #[cfg_attr(windows, allow(dead_code))]
    Away,
}

/// What `doctor` says about a lock-file folder that exists and is a directory.
#[derive(Debug)]
pub enum Finding {
    /// All is well: the message.
    Ok(String),
    /// Worth knowing, not a problem (Unix: a mode open to reading).
    #[cfg_attr(windows, allow(dead_code))]
    Info(String),
    /// A problem, and its fix (Unix: another owner, a mode open to writing).
    #[cfg_attr(windows, allow(dead_code))]
    Problem(String, String),
}
