//! The lock-file removal at a stop (`signals::remove_all`, what the SIGINT/SIGTERM handler does
//! before the signal's default action), in a process of its own: the registry is process-wide.

// Unix only: another live process is a `sleep`.
#![cfg(unix)]

use claude_ide_bridge::{AuthToken, LockFile};
use claude_ide_bridge_runtime::lock::LockGuard;
use claude_ide_bridge_runtime::signals;

fn lock_of(pid: u32) -> LockFile {
    LockFile::new(
        pid,
        vec!["/w".into()],
        "claude-ide-bridge",
        false,
        AuthToken::from_string("t"),
    )
}

/// A start whose lock file could not be written, another live server's being there (bound to
/// the same port on another address), told to stop between the path's registration (ahead of
/// the write) and the write's failure: that server's file stays. Before, a registered path was
/// removed whoever had written it. This process's own file goes.
#[test]
fn a_stop_removes_this_process_lock_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let locks = dir.path().join("ide");
    std::fs::create_dir(&locks).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let theirs = locks.join("40100.lock");
    std::fs::write(&theirs, lock_of(other.id()).to_json()).unwrap();
    let refused = LockGuard::create(&locks, 40100, &lock_of(std::process::id()), true);
    assert_eq!(
        refused.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::AddrInUse)
    );
    // The moment between the path's registration and the write that fails: registered.
    signals::register(&theirs).unwrap();
    let mine = LockGuard::create(&locks, 40101, &lock_of(std::process::id()), true).unwrap();
    let my_path = locks.join("40101.lock");
    assert!(my_path.exists());
    signals::remove_all();
    assert!(theirs.exists(), "another live server's lock file removed");
    assert!(!my_path.exists());
    drop(mine);
    other.kill().unwrap();
    other.wait().unwrap();
}
