//! Child processes the program starts (`$EDITOR`, language servers), waited for as a program
//! that may still signal them wants it.

use crate::sys;

/// Waits until process `pid`, a child of this process, has ended, without reaping it: until the
/// caller reaps it (`Child::wait`), its id stays its own, so a signal sent to it, or to its
/// group, meanwhile cannot reach another process that was given the id. On Unix, returns at once
/// for an id that names no child of this process.
///
/// On Unix this is `waitid(WEXITED | WNOWAIT)`. A stopped child (Ctrl-Z) is waited past:
/// macOS reports one with `WEXITED` too, and again at once while it stays stopped, so it is
/// looked at again every [`STOPPED_LOOK_AGAIN`] until it ends. On Windows the process's handle
/// is waited on; the id stays the child's while its `Child` keeps the handle open.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// let mut editor = std::process::Command::new("vi").arg("notes.txt").spawn()?;
/// claude_ide_bridge_runtime::process::wait_until_ended(editor.id());
/// // Ended and not reaped: a stop sent to `editor.id()` now reaches no other process.
/// let status = editor.wait()?;
/// # Ok(())
/// # }
/// ```
pub fn wait_until_ended(pid: u32) {
    sys::wait_until_ended(pid)
}

/// How often [`wait_until_ended`] looks again at a child that stays stopped (macOS).
pub const STOPPED_LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(250);

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    /// This test program run again, for no test: it ends at once, with status 0.
    fn quick_child() -> std::process::Child {
        Command::new(std::env::current_exe().expect("test program"))
            .args(["--exact", "no such test"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start")
    }

    #[test]
    fn a_child_is_waited_for_and_left_unreaped() {
        let mut child = quick_child();
        super::wait_until_ended(child.id());
        // Ended: its status is there without waiting. Not reaped: the status is still this
        // process's to take (reaped, `try_wait` would fail with "no child processes").
        let status = child.try_wait().expect("not reaped").expect("ended");
        assert!(status.success());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_ended_child_stays_a_zombie_until_reaped() {
        let mut child = quick_child();
        super::wait_until_ended(child.id());
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).expect("kept");
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next());
        assert_eq!(state, Some("Z"), "{stat}");
        child.wait().expect("reaped");
    }

    #[cfg(unix)]
    #[test]
    fn an_id_of_no_child_returns_at_once() {
        // Process 1 (or the system's) is never a child of a test: nothing to wait for. (Waiting
        // for it would never end: the bound only turns a hang into a failure.)
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            super::wait_until_ended(1);
            super::wait_until_ended(0);
            super::wait_until_ended(u32::MAX);
            let _ = done_tx.send(());
        });
        done.recv_timeout(std::time::Duration::from_secs(20))
            .expect("a wait for no child of ours returns");
    }
}
