//! The Unix-only parts of the tests' helpers: signals to `serve`, a FIFO as its wire log, what
//! Linux's `/proc` says of other processes.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::json;

use super::{Client, Sandbox, Served};

impl Served {
    pub fn signal(&self, sig: &str) {
        // The bridge keeps ignoring a signal it was started with ignored (`nohup`), and inherits
        // that from this process: say so rather than wait for an exit that cannot come.
        let number = match sig {
            "HUP" => 1,
            "INT" => 2,
            "TERM" => 15,
            _ => 0,
        };
        assert!(
            !claude_ide_bridge_runtime::signals::ignored(number),
            "SIG{sig} is ignored in the tests' process (run under nohup, or as a background job \
             of a shell without job control?): the bridge inherits that and keeps ignoring it"
        );
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }

    pub fn stop(&mut self) -> i32 {
        self.signal("TERM");
        self.wait_exit()
    }
}

/// A `--wire-log` that is a pipe the test reads, and can stop reading: once a message larger
/// than the pipe is logged, the bridge's host loop waits in that write, and what reaches it
/// meanwhile (client messages, editor lines, terminal lines) is handled, in the order it came,
/// only once the test reads again. How a test lines up inputs that race in use.
pub struct HeldWireLog {
    pub path: PathBuf,
    held: Arc<std::sync::atomic::AtomicBool>,
    done: Arc<std::sync::atomic::AtomicBool>,
    reader: Option<thread::JoinHandle<()>>,
}

impl HeldWireLog {
    /// A pipe in the sandbox, read from now on.
    pub fn new(sb: &Sandbox) -> HeldWireLog {
        use std::os::unix::fs::OpenOptionsExt;
        use std::sync::atomic::{AtomicBool, Ordering};
        let path = sb.root().join("wire");
        assert!(Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success());
        let mut pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&path)
            .unwrap();
        let (held, done) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let reader = {
            let (held, done) = (held.clone(), done.clone());
            thread::spawn(move || {
                use std::io::Read;
                let mut buf = vec![0u8; 64 * 1024];
                while !done.load(Ordering::SeqCst) {
                    let read = !held.load(Ordering::SeqCst) && pipe.read(&mut buf).unwrap_or(0) > 0;
                    if !read {
                        thread::sleep(Duration::from_millis(5));
                    }
                }
            })
        };
        HeldWireLog {
            path,
            held,
            done,
            reader: Some(reader),
        }
    }

    /// Stops reading, then has `client` send a message larger than the pipe: the host waits.
    pub fn hold(&self, client: &mut Client) {
        self.held.store(true, std::sync::atomic::Ordering::SeqCst);
        thread::sleep(Duration::from_millis(100));
        let pad = "x".repeat(256 * 1024);
        client.send_json(
            &json!({"jsonrpc": "2.0", "method": "notifications/pad", "params": {"pad": pad}}),
        );
        thread::sleep(Duration::from_millis(300));
    }

    /// Reads again: the host goes on.
    pub fn release(&self) {
        self.held.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for HeldWireLog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// `c` run by `unshare FLAGS` (new namespaces: `-r` a user namespace where this user is root,
/// `-n` a network namespace of its own), `prelude` run by a shell in them first (for example
/// setting the namespace's `net.ipv6.bindv6only`), then `c` in its place (the same process: its
/// pid is the one spawned; with `-f`, a pid namespace's, unshare's forked child, killed with
/// it), with `c`'s environment and folder. `None`, said as a skip, where `unshare` cannot make
/// those namespaces.
pub fn unshared(flags: &str, prelude: &str, c: &Command) -> Option<Command> {
    let usable = Command::new("unshare")
        .args([flags, "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !usable {
        claude_ide_bridge_testsupport::skip::skip(&format!(
            "`unshare {flags}` (new namespaces) is not available here"
        ));
        return None;
    }
    let mut u = Command::new("unshare");
    u.arg(flags);
    // With a fork (`-f`, a pid namespace's first process), the forked child is killed when
    // unshare is: a test that kills what it spawned (unshare) left that child, a bridge serving
    // on, for the rest of the machine's life.
    if flags.contains('f') {
        u.arg("--kill-child");
    }
    u.args(["sh", "-c", &format!("{prelude}\nexec \"$0\" \"$@\"")])
        .arg(c.get_program())
        .args(c.get_args());
    super::with_env_of(&mut u, c);
    if let Some(dir) = c.get_current_dir() {
        u.current_dir(dir);
    }
    Some(u)
}

/// The state letter of process `pid` (`/proc/PID/stat`): `T` when stopped, `Z` a zombie not yet
/// reaped; `None` once it is gone (and where there is no `/proc`).
pub fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Whether process `pid` runs: neither gone nor a zombie.
pub fn running(pid: u32) -> bool {
    state_of(pid).is_some_and(|s| s != 'Z')
}

/// The parent of process `pid` (`/proc/PID/stat`).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
}

/// The running watchers of commands the bridge `bridge` tied to itself (Linux, with the test
/// switch): the processes whose arguments are the program's `__watch BRIDGE COMMAND`, for any
/// command or for `command` alone.
pub fn watchers_of(bridge: u32, command: Option<u32>) -> Vec<u32> {
    let wanted = match command {
        Some(command) => format!("\0__watch\0{bridge}\0{command}\0"),
        None => format!("\0__watch\0{bridge}\0"),
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    (entries.flatten())
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let args = std::fs::read(entry.path().join("cmdline")).ok()?;
            (String::from_utf8_lossy(&args).contains(&wanted) && running(pid)).then_some(pid)
        })
        .collect()
}
