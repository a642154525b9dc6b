//! Linux, macOS and the other Unixes: a server's tree is its process group.

use std::process::{Child, Command};

use rustix::process::{kill_process_group, waitpid, Pid, Signal, WaitOptions};

/// Makes the command start in a process group of its own, which is the tree [`kill_tree`]
/// kills (and which a Ctrl-C in the bridge's terminal does not reach).
pub(crate) fn own_tree(cmd: &mut Command) {
    std::os::unix::process::CommandExt::process_group(cmd, 0);
}

/// Nothing to do once started: the group was made by [`own_tree`].
pub(crate) fn adopt(_child: &Child) -> std::io::Result<()> {
    Ok(())
}

/// A process id as rustix takes it (`None` for 0 and ids past `i32`, which name no one process).
fn pid_of(pid: u32) -> Option<Pid> {
    i32::try_from(pid).ok().and_then(Pid::from_raw)
}

/// SIGKILL to the process group led by `pid`.
pub(crate) fn kill_tree(pid: u32) {
    if let Some(group) = pid_of(pid) {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

/// Reaps the child `pid` when its `Child` is gone (dropped with a thread that never started).
pub(crate) fn reap_id(pid: u32) {
    if let Some(p) = pid_of(pid) {
        let _ = waitpid(Some(p), WaitOptions::empty());
    }
}

/// A server process watched for its exit ([`watch_exit`]), reaped by [`ExitWatch::reap`].
pub(crate) struct ExitWatch {
    child: Child,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Calls `on_exit` once the process has exited, from a thread of its own that sleeps until then
/// (`waitid` with `WNOWAIT`): the process is left unreaped, so that its group can be killed
/// before its id may be reused. The error says why the thread could not be started (no exit is
/// then seen this way; the watch still reaps).
pub(crate) fn watch_exit(
    child: Child,
    on_exit: impl FnOnce() + Send + 'static,
) -> (ExitWatch, std::io::Result<()>) {
    let pid = child.id();
    let wait = move || {
        claude_ide_bridge_runtime::process::wait_until_ended(pid);
        on_exit();
    };
    let thread = std::thread::Builder::new()
        .name(format!("lsp-exit-{}", child.id()))
        .stack_size(super::EXIT_WATCH_STACK)
        .spawn(wait);
    let (thread, started) = match thread {
        Ok(t) => (Some(t), Ok(())),
        Err(e) => (None, Err(e)),
    };
    (ExitWatch { child, thread }, started)
}

impl ExitWatch {
    /// Reaps the process, once its tree was killed ([`kill_tree`]): the watch's thread ends with
    /// it.
    pub(crate) fn reap(mut self) -> std::io::Result<std::process::ExitStatus> {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.child.wait()
    }
}

/// Whether the file with this metadata may be run: a regular file with an execute bit.
pub(crate) fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

/// Whether two metadata are of one file (device and inode).
pub(crate) fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// What a file a server has is, for the check of its text on disk: the file at `path` itself, a
/// symbolic link put in its place not followed (the path is resolved inside the workspace: a
/// link there now may lead out).
pub(crate) fn file_metadata(path: &str) -> std::io::Result<std::fs::Metadata> {
    std::fs::symlink_metadata(path)
}

/// Opens `path` to read without waiting on it: a FIFO put in a file's place opens at once (and
/// then is no regular file to the caller) instead of waiting for a writer; a symbolic link put
/// in its place is not followed (the file is a server's, resolved inside the workspace: a link
/// there now may lead out of it).
pub(crate) fn open_to_read(path: &str) -> std::io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOFOLLOW).bits() as i32)
        .open(path)
}

/// The path `found` names with its links resolved (npm's link on `PATH` leads into its package),
/// or `found` when that cannot be known.
pub(crate) fn real_path(found: &std::path::Path) -> std::path::PathBuf {
    std::fs::canonicalize(found).unwrap_or_else(|_| found.to_path_buf())
}

/// A server's command (`--lsp LANG=COMMAND`) split into words as a POSIX shell splits them
/// (the `shell-words` crate): single quotes keep everything, double quotes keep spaces and take
/// `\"`, `\\`, `\$` and `` \` `` as escapes, a backslash outside quotes keeps the character after
/// it; nothing is expanded. `None` for an unclosed quote.
pub(crate) fn split_words(command: &str) -> Option<Vec<String>> {
    shell_words::split(command).ok()
}

/// The extensions a program found on `PATH` may have (Windows' `PATHEXT`): none here, the
/// name is the file's.
pub(crate) fn exe_extensions() -> Option<String> {
    None
}

/// Makes the server's input non-blocking, so that a server that stops reading does not hold
/// the writer from its checks; false when that cannot be done.
pub(crate) fn set_nonblocking(input: &std::process::ChildStdin) -> bool {
    rustix::io::ioctl_fionbio(input, true).is_ok()
}

/// Waits until the server's input takes bytes again, or `timeout` passed.
pub(crate) fn wait_writable(
    input: &std::process::ChildStdin,
    timeout: std::time::Duration,
) -> std::io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let watch = Timespec {
        tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX as _),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    let mut fds = [PollFd::new(input, PollFlags::OUT)];
    match poll(&mut fds, Some(&watch)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The path of a file a server names by its `file:` URI, as documents are keyed: the URI's
/// path; `None` when it names no local file.
pub(crate) fn path_of_uri(uri: &str) -> Option<String> {
    claude_ide_bridge::uri_to_path(uri)
}

/// The file a server's diagnostics are for: [`path_of_uri`], written the one way the bridge
/// names it (`/w/./a.rs` and `/w//a.rs` are `/w/a.rs`: kept apart, they were answered apart, and
/// never replaced by the server's next publish under the plain name). `None` for a URI that is
/// no file's, or climbs above the root.
pub(crate) fn published_path(uri: &str) -> Option<String> {
    claude_ide_bridge::normalize(&path_of_uri(uri)?)
}

/// A path as watched globs are matched against it (`/` between its parts): as it is.
pub(crate) fn glob_form(path: &str) -> std::borrow::Cow<'_, str> {
    std::borrow::Cow::Borrowed(path)
}

/// Whether watched globs ignore case: as the file system does by default (macOS's does).
pub(crate) const GLOBS_IGNORE_CASE: bool = cfg!(target_os = "macos");

/// How to install clangd here: Apple's comes with the Command Line Tools (`/usr/bin/clangd`
/// runs it once they are installed), Homebrew's with LLVM; elsewhere the system's packages.
pub(crate) const CLANGD_INSTALL: &str = if cfg!(target_os = "macos") {
    "xcode-select --install (Apple's clangd), or brew install llvm"
} else {
    "apt install clangd (or your system's package manager)"
};

/// The key of a document given by its path: the path itself.
pub(crate) fn key_of(path: &str) -> String {
    path.to_owned()
}
