//! Windows: a server's tree is a Job Object of its own; writes to its input block.
//!
//! Each server is put, right after it is started, into a job created for it with "kill on job
//! close" (the `win32job` crate: the Win32 calls behind a safe API, so this crate has no
//! `unsafe`). The processes it starts later (the `node` under npm's `.cmd` shim) are in the job
//! too, and closing the job's one handle, which this module holds, ends them all: that is the
//! stop, and Windows closes the handle itself when the bridge exits, however it ends (killed
//! from the task manager included), so no server outlives it. What the job does not hold: a
//! process the server started in the moment between its start and its assignment (std has no
//! suspended start); npm's shims start `node` long after that.
//!
//! A server that stops reading holds the writer in its write until the request that is waiting
//! passes its deadline: the caller then finds it hung and kills its tree, which ends the write.
//! Type-checked and clippy-clean for `x86_64-pc-windows-msvc`; not yet run (the crate's tests
//! start Python servers, which the Wine harness does not have).

use std::collections::HashMap;
use std::os::windows::io::AsRawHandle;
use std::os::windows::process::CommandExt;
use std::process::{Child, ChildStdin, Command};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use win32job::{ExtendedLimitInfo, Job};

/// Each running server's job, by the server's process id.
static JOBS: Mutex<Option<HashMap<u32, Job>>> = Mutex::new(None);

fn jobs() -> MutexGuard<'static, Option<HashMap<u32, Job>>> {
    JOBS.lock().unwrap_or_else(|e| e.into_inner())
}

/// `CREATE_NEW_PROCESS_GROUP`: a Ctrl-C in the bridge's console does not reach the server.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
/// `CREATE_NO_WINDOW`: a console server gets no window of its own.
const CREATE_NO_WINDOW: u32 = 0x0800_0000;

/// Starts the command in a process group of its own, without a console window.
pub(crate) fn own_tree(cmd: &mut Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW);
}

/// Puts the server just started into a job of its own, created with "kill on job close".
pub(crate) fn adopt(child: &Child) -> std::io::Result<()> {
    let mut limits = ExtendedLimitInfo::new();
    limits.limit_kill_on_job_close();
    let job = Job::create_with_limit_info(&limits)?;
    job.assign_process(child.as_raw_handle() as isize)?;
    jobs()
        .get_or_insert_with(HashMap::new)
        .insert(child.id(), job);
    Ok(())
}

/// Ends the server `pid` and every process it started: its job's handle is closed.
pub(crate) fn kill_tree(pid: u32) {
    let job = jobs().as_mut().and_then(|j| j.remove(&pid));
    drop(job);
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
