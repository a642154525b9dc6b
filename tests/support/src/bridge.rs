//! The program (`claude-ide-bridge serve`) as a child process, for the benchmarks and tests that
//! drive the real binary: started, its port read from what it prints, its token from its lock file.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A running `serve`: the child, its port and its auth token.
pub struct Serving {
    pub child: Child,
    pub port: u16,
    pub token: String,
}

/// Starts `serve` as `cmd` says (its arguments must include `--lock-dir lock_dir`), with no input,
/// its output dropped and its stderr read until the `export CLAUDE_CODE_SSE_PORT=N` line; the rest
/// of its stderr is read and dropped by a thread of its own, so the child never blocks on it. Then
/// the token is read from `lock_dir/N.lock`. `Err` says what went wrong.
pub fn serve(cmd: &mut Command, lock_dir: &Path) -> Result<Serving, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", cmd.get_program().to_string_lossy()))?;
    let mut err = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let mut line = String::new();
    let port = loop {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            return Err("the bridge exited before printing its port".into());
        }
        let port = line
            .trim()
            .strip_prefix("export CLAUDE_CODE_SSE_PORT=")
            .and_then(|rest| rest.split(' ').next());
        if let Some(port) = port.and_then(|p| p.parse::<u16>().ok()) {
            break port;
        }
    };
    thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let token = token(lock_dir, port)?;
    Ok(Serving { child, port, token })
}

/// The auth token of the bridge listening on `port`, from its lock file in `lock_dir`.
pub fn token(lock_dir: &Path, port: u16) -> Result<String, String> {
    let lock = lock_dir.join(format!("{port}.lock"));
    let text = std::fs::read_to_string(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    let lock: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", lock.display()))?;
    let token = lock["authToken"]
        .as_str()
        .ok_or("the lock file has no authToken")?;
    Ok(token.to_string())
}

/// Stops a bridge as a user's terminal would: asks it to stop (SIGTERM on Unix; Windows has no
/// signal to ask with, so it is killed) and waits up to `grace` for it to exit, then kills it.
/// Returns at once if it has already exited.
pub fn stop(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    crate::platform::ask_to_stop(child);
    let give_up = Instant::now() + grace;
    while Instant::now() < give_up {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
