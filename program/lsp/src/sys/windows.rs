//! Windows: a server's tree is what `taskkill /T` finds under it; writes to its input block.
//!
//! What this is not yet: a Job Object (which would also take the tree when the bridge itself
//! is killed, and needs `unsafe` Win32 calls this crate forbids); until then a server outlives
//! a bridge killed from outside, as on Unix it does until it sees its input closed. And a
//! server that stops reading holds the writer in its write until the request that is waiting
//! passes its deadline: the caller then finds it hung and kills its tree, which ends the write.
//! Type-checked and clippy-clean for `x86_64-pc-windows-msvc`; not yet run (the crate's tests
//! start Python servers, which the Wine harness does not have).

use std::os::windows::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// `CREATE_NEW_PROCESS_GROUP`: a Ctrl-C in the bridge's console does not reach the server.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
/// `CREATE_NO_WINDOW`: a console server gets no window of its own.
const CREATE_NO_WINDOW: u32 = 0x0800_0000;

/// Starts the command in a process group of its own, without a console window.
pub(crate) fn own_tree(cmd: &mut Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW);
}

/// Ends the process `pid` and every process it started (`taskkill /PID pid /T /F`).
pub(crate) fn kill_tree(pid: u32) {
    let _ = Command::new("taskkill")
        .args(["/PID", &pid.to_string(), "/T", "/F"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .creation_flags(CREATE_NO_WINDOW)
        .status();
}

/// Nothing to do: an exited process leaves no zombie, and its id is not reused while a handle
/// to it is open.
pub(crate) fn reap_id(_pid: u32) {}

/// Whether the process has exited (its handle, kept open by `child`, keeps the id from reuse).
pub(crate) fn has_exited(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(Some(_)))
}

/// A program file is any regular file found under a `PATHEXT` name.
pub(crate) fn is_executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file()
}

/// Whether two files are one: std gives no file index on stable Rust, so this cannot tell and
/// says no (a rustup proxy is then taken as a program, as on Unix when rustup's home is unknown).
pub(crate) fn same_file(_a: &std::fs::Metadata, _b: &std::fs::Metadata) -> bool {
    false
}

/// `PATHEXT`, or Windows' default when it is not set.
pub(crate) fn exe_extensions() -> Option<String> {
    Some(std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".to_owned()))
}

/// Anonymous pipes stay blocking here (see the module docs): nothing to set.
pub(crate) fn set_nonblocking(_input: &ChildStdin) -> bool {
    true
}

/// Never reached with blocking pipes; waits out the watch if it ever is.
pub(crate) fn wait_writable(_input: &ChildStdin, timeout: Duration) -> std::io::Result<()> {
    std::thread::sleep(timeout);
    Ok(())
}
