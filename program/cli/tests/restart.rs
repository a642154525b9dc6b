//! A bridge restarted for the same workspace comes back on the same port with the same token
//! (issue 32, item 2), kept in a state file under the sandbox's HOME
//! (`~/.local/state/claude-ide-bridge/workspaces/*.json`): the rules of `state::Kept`, through
//! the program.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use common::{client, unshared, Sandbox, Served, WAIT};
use serde_json::Value;

/// The state files in the sandbox (each workspace's `<hash>.json`; its starts' lock file,
/// `<hash>.start`, beside it).
fn state_files(sb: &Sandbox) -> Vec<PathBuf> {
    let dir = sb.home.join(".local/state/claude-ide-bridge/workspaces");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.retain(|f| f.extension().is_some_and(|e| e == "json"));
    files.sort();
    files
}

fn state_file(sb: &Sandbox) -> PathBuf {
    let files = state_files(sb);
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

fn state(sb: &Sandbox) -> Value {
    serde_json::from_str(&fs::read_to_string(state_file(sb)).unwrap()).unwrap()
}

/// Kills the bridge as a crash would (SIGKILL: nothing is cleaned up).
fn crash(mut s: Served) {
    s.child.kill().unwrap();
    s.child.wait().unwrap();
}

/// A client holding the old port and token (what claude retries with) is let in.
fn old_client_gets_in(port: u16, token: &str) {
    let (status, c) = client::connect(port, Some(token));
    assert_eq!(status, 101);
    c.unwrap().init();
}

fn restarted_with_same_port_and_token(runtime: &str) {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &["--runtime", runtime]);
    let (port, token) = (first.port, first.token());
    first.stderr.wait_for("port and auth token: kept in ");
    let kept = state(&sb);
    assert_eq!(kept["port"], port);
    assert_eq!(kept["authToken"], token.as_str());
    assert_eq!(kept["workspaceFolders"][0], sb.ws.to_str().unwrap());
    let file = state_file(&sb);
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        fs::metadata(file.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    crash(first);

    let second = Served::start(&sb, &["--runtime", runtime]);
    assert_eq!(second.port, port);
    assert_eq!(second.token(), token);
    second
        .stderr
        .wait_for("port and auth token: the last start's, kept in ");
    old_client_gets_in(port, &token);
}

/// Killed, and not reaped yet by its parent (a harness, a shell, a container's pid 1 that reaps
/// late): the zombie holds its pid, and its lock file counted as a live bridge's, so the restart
/// moved to a new port and token ("another bridge serves it") and claude's retry of the old one
/// never reconnected. The zombie is no writer: the restart keeps port and token.
#[test]
fn a_bridge_killed_and_not_yet_reaped_leaves_its_port_to_the_restart() {
    let sb = Sandbox::new();
    let mut first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    first.stderr.wait_for("port and auth token: kept in ");
    first.child.kill().unwrap();
    // This test is its parent, and does not reap it until the restart has started.
    let pid = first.child.id();
    // A zombie with all its threads gone (its sockets closed with the last): the case here is
    // a parent that has not reaped it, not a process still ending.
    let give_up = std::time::Instant::now() + WAIT;
    let threads = || fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |t| t.count());
    while common::state_of(pid) != Some('Z') || threads() > 1 {
        assert!(std::time::Instant::now() < give_up, "no zombie");
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = Served::start(&sb, &[]);
    assert_eq!(second.port, port, "{}", second.stderr.text());
    assert_eq!(second.token(), token);
    assert_eq!(common::state_of(pid), Some('Z'), "still unreaped");
    first.child.wait().unwrap();
    old_client_gets_in(port, &token);
}

#[test]
fn a_restarted_bridge_has_the_same_port_and_token_threads() {
    restarted_with_same_port_and_token("threads");
}

#[test]
fn a_restarted_bridge_has_the_same_port_and_token_smol() {
    restarted_with_same_port_and_token("smol");
}

/// Stopped cleanly (SIGTERM) rather than killed, the same.
#[test]
fn a_stopped_bridge_too() {
    let sb = Sandbox::new();
    let mut first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    assert_eq!(first.stop(), 0);
    let second = Served::start(&sb, &[]);
    assert_eq!((second.port, second.token()), (port, token));
}

/// A bridge standing in for this workspace's last one while it stops: stopped (SIGSTOP), its
/// lock file removed (the stop withdraws it first and closes the port seconds later, once its
/// editor, language servers and answers were waited for). Its port and token.
fn stopping_bridge(sb: &Sandbox) -> (Served, u16, String) {
    let first = Served::start(sb, &[]);
    let (port, token) = (first.port, first.token());
    first.stderr.wait_for("port and auth token: kept in ");
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &first.child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    fs::remove_file(&first.lock).unwrap();
    (first, port, token)
}

/// `serve` started in `sb`, its stderr collected.
fn spawn_serve(sb: &Sandbox) -> (std::process::Child, common::Lines) {
    let mut serve = sb.command();
    serve.arg("serve");
    spawn_collected(serve)
}

/// `c` started, its stdin a pipe, its stderr collected.
fn spawn_collected(mut c: std::process::Command) -> (std::process::Child, common::Lines) {
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    (child, stderr)
}

/// This workspace's last bridge still stopping when the next starts (a Vim quit and started
/// again at once): the new one waits for the port and takes it and the token back, and the
/// claude retrying the port gets in. Before, it took a new port.
#[test]
fn a_bridge_still_stopping_is_waited_for() {
    let sb = Sandbox::new();
    let (first, port, token) = stopping_bridge(&sb);
    let pid = first.child.id();
    let (mut second, stderr) = spawn_serve(&sb);
    stderr.wait_for(&format!(
        "port {port}: waiting up to 15 s for this workspace's last bridge (pid {pid}) to stop"
    ));
    crash(first);
    assert_eq!(stderr.port(), port);
    stderr.wait_for("port and auth token: the last start's, kept in ");
    assert_eq!(state(&sb)["authToken"], token.as_str());
    old_client_gets_in(port, &token);
    second.kill().unwrap();
    second.wait().unwrap();
}

/// Told to stop while it waits for the last bridge (Ctrl-C, SIGTERM), a start stops at once,
/// having started nothing: it does not wait the 15 s out, then serve.
/// A start that waits (`child`, its stderr `stderr`), told to stop (SIGTERM): it stops at once
/// (within 5 s), with status 0, having served nothing.
fn stops_at_once_when_told(child: &mut std::process::Child, stderr: &common::Lines) {
    let told = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(told.success());
    let status = common::exit_within(child, std::time::Duration::from_secs(5), &|| stderr.text());
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    stderr.wait_for("SIGTERM: stopping the bridge");
    assert!(!stderr.text().contains("serving "), "{}", stderr.text());
}

#[test]
fn a_start_waiting_for_the_last_bridge_stops_when_told() {
    let sb = Sandbox::new();
    let (first, port, _) = stopping_bridge(&sb);
    let (mut second, stderr) = spawn_serve(&sb);
    stderr.wait_for(&format!("port {port}: waiting up to 15 s"));
    stops_at_once_when_told(&mut second, &stderr);
    crash(first);
}

/// A start waiting for another start of the same workspace (its lock on `<hash>.start` held, here
/// by the test) says so after a second, and told to stop meanwhile (Ctrl-C, SIGTERM, Vim
/// quitting) stops at once, having served nothing. Before, it waited the 20 s out, then
/// started serving (its port bound, its lock file written) before it took the signal.
#[test]
fn a_start_waiting_for_another_start_stops_when_told() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    first.stderr.wait_for("port and auth token: kept in ");
    crash(first);
    let start = state_file(&sb).with_extension("start");
    let held = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&start)
        .unwrap();
    held.lock().unwrap();
    let (mut second, stderr) = spawn_serve(&sb);
    stderr.wait_for("waiting for another start of this workspace's bridge");
    stops_at_once_when_told(&mut second, &stderr);
    // Given back: the next start goes on at once, with the port and token kept.
    drop(held);
    let third = Served::start(&sb, &[]);
    assert_eq!((third.port, third.token()), (port, token));
}

/// Another program holds the kept port: a new port, said so, and kept for the next start, with
/// a new token: that program (another user's, say, which bound the port once the bridge was
/// gone) may have been handed the old one by a claude trying the old port, and would have
/// reached the new port with it. The lock file the killed bridge left for the old port, which
/// names that program's port with this workspace's token, is removed (it was left, and stayed
/// after the new bridge stopped).
#[test]
fn a_taken_port_is_replaced_and_said() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, token, left) = (first.port, first.token(), first.lock.clone());
    crash(first);
    assert!(left.exists());
    let squatter = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let second = Served::start(&sb, &[]);
    assert_ne!(second.port, port);
    second.stderr.wait_for(&format!(
        "port {port}, kept for this workspace, is taken: listening on a new one"
    ));
    second.stderr.wait_for(&format!(
        "the lock file the last bridge left for port {port}"
    ));
    assert!(!left.exists());
    assert_ne!(
        second.token(),
        token,
        "the old token, maybe handed to the squatter"
    );
    assert_eq!(state(&sb)["port"], second.port);
    let (new_port, new_token) = (second.port, second.token());
    crash(second);
    drop(squatter);
    let third = Served::start(&sb, &[]);
    assert_eq!((third.port, third.token()), (new_port, new_token));
}

/// A second start of a workspace looks at the first's port (taken: silent, or serving?): the
/// first said "connection #1 refused: 400 Bad Request, Upgrade header must name websocket", a
/// client's mistake, naming nobody. The look is now an upgrade without the token, whose refusal
/// says who may have asked.
#[test]
fn a_second_start_looks_at_the_first_without_a_bad_request() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &["--no-lsp"]);
    let second = Served::start(&sb, &["--no-lsp"]);
    second.stderr.wait_for("is taken");
    let said = first.stderr.wait_for("refused: 401");
    assert!(said.contains("another start's of this workspace"), "{said}");
    assert!(!first.stderr.text().contains("400 Bad Request"));
    crash(second);
    crash(first);
}

/// A bridge of this workspace whose process a new start cannot see (another pid namespace: a
/// container sharing the network and the lock folder) holds the kept port: the new start took
/// its lock file for one a killed bridge left, removed it, and kept a new port and token over the
/// running bridge's (which then came back on the new port at its next restart, and its claude
/// was lost). Now its port, taking the kept token, says it is alive: the new start keeps nothing.
#[test]
fn a_bridge_in_another_pid_namespace_keeps_its_port() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let kept = state(&sb);
    let mut serve = sb.command();
    serve.arg("serve");
    let Some(elsewhere) = unshared("-rpfm", "mount -t proc proc /proc", &serve) else {
        return;
    };
    let (mut child, stderr) = spawn_collected(elsewhere);
    let port = stderr.port();
    stderr.wait_for("whose process is not seen from here");
    assert_ne!(port, first.port);
    assert!(
        !stderr.text().contains("it was killed"),
        "{}",
        stderr.text()
    );
    assert_eq!(state(&sb), kept);
    assert!(first.lock.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    // The namespace's bridge ends with what the test spawned (it served on, orphaned, for the
    // rest of the machine's life).
    let give_up = std::time::Instant::now() + WAIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            std::time::Instant::now() < give_up,
            "the bridge in the other namespace still serves on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    crash(first);
}

/// Another program's WebSocket server on the kept port that answers every upgrade (a dev
/// server, Python `websockets`): it is not a bridge of this workspace (it takes a wrong token
/// too), so this start keeps its new port and token, and removes the lock file the killed bridge
/// left. Taken for one, every start kept nothing and tried the taken port again.
#[test]
fn a_server_taking_every_upgrade_on_the_kept_port_is_not_this_workspaces() {
    use std::io::{Read, Write};
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, lock) = (first.port, first.lock.clone());
    crash(first);
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let server = std::thread::spawn(move || {
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        while !stop.load(std::sync::atomic::Ordering::Relaxed)
            && std::time::Instant::now() < give_up
        {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut head = [0u8; 4096];
                    let _ = s.read(&mut head);
                    let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    let second = Served::start(&sb, &[]);
    second.stderr.wait_for("port and auth token: kept in ");
    assert_ne!(second.port, port);
    let said = second.stderr.text();
    assert!(!said.contains("whose process is not seen"), "{said}");
    assert!(said.contains("(it was killed) removed"), "{said}");
    assert!(!lock.exists());
    assert_eq!(state(&sb)["port"], second.port);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().unwrap();
    crash(second);
}

/// The kept port refused for a reason other than its being taken (here "permission denied":
/// port 80 in a user namespace, where even root may not bind it; on Windows, a range Hyper-V
/// reserved after a reboot): a new port, said so, kept for the next start with the same token.
/// Before, every start failed until the state file was deleted.
#[test]
fn a_kept_port_refused_otherwise_is_replaced_too() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let token = first.token();
    crash(first);
    let file = state_file(&sb);
    let mut kept = state(&sb);
    kept["port"] = 80.into();
    fs::write(&file, serde_json::to_vec(&kept).unwrap()).unwrap();
    let mut serve = sb.command();
    serve.arg("serve");
    let Some(in_userns) = unshared("-r", "", &serve) else {
        return;
    };
    let (mut child, stderr) = spawn_collected(in_userns);
    let port = stderr.port();
    stderr.wait_for("port 80, kept for this workspace, cannot be listened on (");
    stderr.wait_for("port and auth token: kept in ");
    assert_ne!(port, 80);
    let now = state(&sb);
    assert_eq!(now["port"], port);
    assert_eq!(now["authToken"], token.as_str());
    old_client_gets_in(port, &token);
    child.kill().unwrap();
    child.wait().unwrap();
    // Given with --port, the same port is an error that names it, not the lock-file directory.
    let mut serve = sb.command();
    serve.args(["serve", "--port", "80"]);
    let out = unshared("-r", "", &serve)
        .unwrap()
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start the server: cannot listen on 127.0.0.1:80: ")
            && err.contains("(choose another --port, or 0)"),
        "{err}"
    );
}

/// `serve` with `args`, which fails to start (status 1): what it said.
fn serve_fails<S: AsRef<std::ffi::OsStr>>(
    sb: &Sandbox,
    args: impl IntoIterator<Item = S>,
) -> String {
    let out = sb
        .command()
        .arg("serve")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

/// `--host` given an address this machine does not have: the error says so, and neither blames
/// the port nor the lock file (it said "choose another --port").
#[test]
fn a_host_address_not_of_this_machine_is_said() {
    let sb = Sandbox::new();
    // TEST-NET-1 (RFC 5737): on no machine's interfaces.
    let err = serve_fails(&sb, ["--no-lsp", "--host", "192.0.2.1"]);
    assert!(
        err.contains(
            "(192.0.2.1 is not an address of this machine: give one of its own with --host)"
        ),
        "{err}"
    );
    assert!(
        !err.contains("--port") && !err.contains("lock file"),
        "{err}"
    );
}

/// A start refused by the lock-file directory (writable by others) is not the kept port's fault:
/// the port and token stay kept, and the error points at the directory, not at the port.
#[test]
fn a_lock_directory_refused_keeps_the_port() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    crash(first);
    fs::set_permissions(sb.lock_dir(), fs::Permissions::from_mode(0o777)).unwrap();
    let err = serve_fails(&sb, std::iter::empty::<&str>());
    assert!(!err.contains("cannot be listened on"), "{err}");
    // The folder named once (the refusal names it), with the way to learn more.
    let dir = sb.lock_dir().display().to_string();
    assert_eq!(err.matches(&dir).count(), 1, "{err}");
    assert!(
        err.contains(&format!("refusing lock-file directory {dir}: "))
            && err.ends_with("(`claude-ide-bridge doctor` explains)\n"),
        "{err}"
    );
    let now = state(&sb);
    assert_eq!(now["port"], port);
    assert_eq!(now["authToken"], token.as_str());
    // A folder given with --lock-dir, which `doctor` does not look at: named, not sent there.
    let err = serve_fails(&sb, ["--lock-dir".as_ref(), sb.lock_dir().as_os_str()]);
    assert_eq!(err.matches(&dir).count(), 1, "{err}");
    assert!(err.ends_with("(--lock-dir names the folder)\n"), "{err}");
}

/// `--port` wins over the kept port (and is kept in its place); the token stays.
#[test]
fn an_explicit_port_wins() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    crash(first);
    // A free port other than the kept one (freed by the crash, the system may hand it out
    // again): of two bound at once, one is not it.
    let free = [(); 2].map(|()| TcpListener::bind("127.0.0.1:0").unwrap());
    let wanted = (free.iter())
        .map(|l| l.local_addr().unwrap().port())
        .find(|&p| p != port)
        .unwrap();
    drop(free);
    let wanted_arg = wanted.to_string();
    let second = Served::start(&sb, &["--port", &wanted_arg]);
    assert_eq!(second.port, wanted);
    assert_eq!(second.token(), token);
    crash(second);
    let third = Served::start(&sb, &[]);
    assert_eq!(third.port, wanted);
}

/// A second bridge started with `--port` while the first serves: it takes a new token and keeps
/// nothing, and the first, killed and started again, comes back on its own port with its token
/// (it found its port in the state file taken by "another bridge", moved, and its claude was
/// refused).
#[test]
fn a_start_with_port_beside_a_running_bridge_leaves_it_its_state() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    first.stderr.wait_for("port and auth token: kept in ");
    let second = Served::start(&sb, &["--port", "0"]);
    assert_ne!(second.token(), token);
    let said = second.stderr.wait_for("this workspace's bridge (pid ");
    assert!(
        said.contains(&format!("serves it on port {port}")),
        "{said}"
    );
    assert_eq!(second.stderr.count("reconnects with /ide"), 0);
    assert_eq!(state(&sb)["port"], port);
    crash(first);
    let again = Served::start(&sb, &[]);
    assert_eq!(again.port, port);
    assert_eq!(again.token(), token);
    old_client_gets_in(port, &token);
    drop(second);
}

/// This workspace's bridge stopped (SIGSTOP: a `serve` suspended with Ctrl-Z) with its lock
/// file in place: the next start, plain or with `--port`, says it holds the port and does not
/// answer there, not that it serves (a claude that picks it waits 30 s for nothing). (Of a
/// bridge that answers it says it serves: `a_start_with_port_beside_a_running_bridge_leaves_it_its_state`.)
#[test]
fn a_start_beside_a_stopped_bridge_says_it_does_not_answer() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, pid) = (first.port, first.child.id());
    first.stderr.wait_for("port and auth token: kept in ");
    let signal = |sig: &str| {
        let done = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap();
        assert!(done.success());
    };
    signal("-STOP");
    let second = Served::start(&sb, &[]);
    assert_ne!(second.port, port);
    second.stderr.wait_for(&format!(
        "port {port}, kept for this workspace, is taken: another bridge (pid {pid}) holds it \
         but does not answer there (stopped"
    ));
    let third = Served::start(&sb, &["--port", "0"]);
    third.stderr.wait_for(&format!(
        "this workspace's bridge (pid {pid}) holds port {port} but does not answer there"
    ));
    assert_eq!(third.stderr.count("serves it"), 0);
    signal("-CONT");
    drop((second, third));
    crash(first);
}

/// An explicit port that is taken is still an error (not moved silently).
#[test]
fn an_explicit_port_taken_fails() {
    let sb = Sandbox::new();
    let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port().to_string();
    let out = sb
        .command()
        .args(["serve", "--port", &port])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the port is taken"), "{err}");
}

/// `--new-token` rotates the token and keeps the port; the old token is refused, the new one kept.
#[test]
fn new_token_rotates_it() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let (port, token) = (first.port, first.token());
    crash(first);
    let second = Served::start(&sb, &["--new-token"]);
    second
        .stderr
        .wait_for("auth token: a new one (--new-token)");
    assert_eq!(second.port, port);
    let rotated = second.token();
    assert_ne!(rotated, token);
    assert_eq!(client::connect(port, Some(&token)).0, 401);
    assert_eq!(state(&sb)["authToken"], rotated.as_str());
    crash(second);
    let third = Served::start(&sb, &[]);
    assert_eq!((third.port, third.token()), (port, rotated));
}

/// Two bridges for one workspace at once: the second gets a port, a token and a lock file of its
/// own, and leaves the state file to the first.
#[test]
fn two_at_once_share_nothing() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let before = fs::read(state_file(&sb)).unwrap();
    let second = Served::start(&sb, &[]);
    assert_ne!(second.port, first.port);
    assert_ne!(second.token(), first.token());
    assert_ne!(second.lock, first.lock);
    assert!(first.lock.exists() && second.lock.exists());
    second.stderr.wait_for(&format!(
        "port {}, kept for this workspace, is taken: another bridge (pid {}) serves it",
        first.port,
        first.child.id()
    ));
    // What a claude started there does with two lock files of its folder.
    second.stderr.wait_for(&format!(
        "serves {} too: a claude started in {} connects to neither by itself",
        sb.ws.display(),
        sb.ws.display()
    ));
    assert_eq!(fs::read(state_file(&sb)).unwrap(), before);
    old_client_gets_in(first.port, &first.token());
    old_client_gets_in(second.port, &second.token());
}

/// A bridge for the same workspace bound to another address (`--host 127.0.0.2`) could bind the
/// first's kept port: it wrote its lock file over the first's, with the first's token, and its
/// stop removed the lock file of the bridge still running. Now the port counts as taken (a live
/// process's lock file names it): the second gets a port, token and lock file of its own, and its
/// stop leaves the first's.
#[test]
fn a_second_bridge_on_another_address_takes_nothing_of_the_first() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let first_lock = fs::read(&first.lock).unwrap();
    let mut second = Served::start(&sb, &["--host", "127.0.0.2"]);
    assert_ne!(second.port, first.port);
    assert_ne!(second.lock, first.lock);
    assert_ne!(second.token(), first.token());
    second.stderr.wait_for(&format!(
        "port {}, kept for this workspace, is taken: another bridge (pid {}) serves it",
        first.port,
        first.child.id()
    ));
    assert_eq!(second.stop(), 0);
    assert_eq!(fs::read(&first.lock).unwrap(), first_lock);
    old_client_gets_in(first.port, &first.token());
}

/// Two bridges for one workspace started at the very same moment, bound to two addresses (the
/// default and `--host 127.0.0.2`) and both given the kept port, whose last bridge was killed
/// (its lock file left): both could bind it, and each wrote `<port>.lock` over the other's
/// (one bridge then unreachable: its lock file gone; 3 rounds in 10 before). Now the lock file
/// is written only where no live bridge's is: each round, two ports, each with its own lock file.
#[test]
fn two_started_at_once_on_two_addresses_share_nothing() {
    let sb = Sandbox::new();
    crash(Served::start(&sb, &[]));
    for round in 0..4 {
        let mut started = Vec::new();
        for host in [None, Some("127.0.0.2")] {
            let mut serve = sb.command();
            serve
                .arg("serve")
                .args(host.map(|h| ["--host", h]).iter().flatten());
            started.push(spawn_collected(serve));
        }
        let ports: Vec<u16> = started.iter().map(|(_, err)| err.port()).collect();
        for (_, err) in &started {
            err.wait_for("lock file: ");
        }
        assert_ne!(ports[0], ports[1], "round {round}: {}", started[1].1.text());
        for ((child, err), port) in started.iter().zip(&ports) {
            let lock = sb.lock_dir().join(format!("{port}.lock"));
            let text = fs::read_to_string(&lock).unwrap_or_default();
            let lock: Value = serde_json::from_str(&text).unwrap_or_default();
            assert_eq!(lock["pid"], child.id(), "round {round}: {}", err.text());
        }
        for (mut child, _) in started {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

/// Two bridges for one workspace started at the same moment, `args` given to each: both up
/// (their start told to the end), their stderr and port each.
fn two_at_the_same_moment(
    sb: &Sandbox,
    args: [&[&str]; 2],
) -> [(std::process::Child, common::Lines, u16); 2] {
    args.map(|args| {
        let mut serve = sb.command();
        serve.arg("serve").args(args);
        spawn_collected(serve)
    })
    .map(|(child, err)| {
        err.wait_for("diffs: ");
        let port = err.port();
        (child, err, port)
    })
}

/// The auth token of the bridge on `port`, from its lock file.
fn token_on(sb: &Sandbox, port: u16) -> String {
    let text = fs::read_to_string(sb.lock_dir().join(format!("{port}.lock"))).unwrap();
    let lock: Value = serde_json::from_str(&text).unwrap();
    lock["authToken"].as_str().unwrap().to_owned()
}

/// Two bridges for one workspace started at the very same moment, the kept port taken by
/// another program: one keeps its new port and token, and the other (which waited for the
/// first's start, then found its port served by this workspace's bridge) keeps nothing. Before,
/// both read the same state file, each took a port and token of its own, and both said "kept":
/// the file held the one that saved last, and the other's claude needed `/ide` after its next
/// restart. A start with `--port` beside one without: never the same token (it looked for the
/// other's lock file before that was written, and served with its token).
#[test]
fn two_started_at_once_take_their_turns_with_the_state() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let mut kept_port = first.port;
    crash(first);
    for round in 0..3 {
        let squatter = TcpListener::bind(("127.0.0.1", kept_port)).unwrap();
        let both = two_at_the_same_moment(&sb, [&[], &[]]);
        let kept: Vec<&(std::process::Child, common::Lines, u16)> = (both.iter())
            .filter(|(_, err, _)| err.count("for the next start") == 1)
            .collect();
        let texts = || {
            both.iter()
                .map(|(_, e, _)| e.text())
                .collect::<Vec<_>>()
                .join("\n--\n")
        };
        assert_eq!(kept.len(), 1, "round {round}: {}", texts());
        let (keeper, _, port) = kept[0];
        let other = both.iter().find(|(c, _, _)| c.id() != keeper.id()).unwrap();
        other.1.wait_for(&format!(
            "is taken: another bridge (pid {}) serves it",
            keeper.id()
        ));
        assert_eq!(state(&sb)["port"], *port, "round {round}: {}", texts());
        assert_ne!(token_on(&sb, both[0].2), token_on(&sb, both[1].2));
        kept_port = *port;
        for (mut child, _, _) in both {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        drop(squatter);
    }
    for round in 0..3 {
        let both = two_at_the_same_moment(&sb, [&[], &["--port", "0"]]);
        let texts = || {
            both.iter()
                .map(|(_, e, _)| e.text())
                .collect::<Vec<_>>()
                .join("\n--\n")
        };
        assert_ne!(
            token_on(&sb, both[0].2),
            token_on(&sb, both[1].2),
            "round {round}: {}",
            texts()
        );
        let keeper = (both.iter())
            .find(|(_, err, _)| err.count("kept in ") == 1)
            .unwrap_or_else(|| panic!("round {round}: {}", texts()));
        assert_eq!(state(&sb)["port"], keeper.2, "round {round}: {}", texts());
        assert_eq!(state(&sb)["authToken"], token_on(&sb, keeper.2));
        for (mut child, _, _) in both {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

/// Each workspace has its own file.
#[test]
fn workspaces_are_kept_apart() {
    let sb = Sandbox::new();
    let other = sb.root().join("other");
    fs::create_dir(&other).unwrap();
    let a = Served::start(&sb, &[]);
    let b = Served::start(&sb, &["--workspace", other.to_str().unwrap()]);
    assert_eq!(state_files(&sb).len(), 2);
    assert!(!b.stderr.text().contains("is taken"), "{}", b.stderr.text());
    assert_ne!(a.token(), b.token());
}

/// The folder named through a symbolic link is the folder: one state file, so a restart under
/// the other name keeps port and token, and two at once share nothing (the second said the
/// first's port was free to keep, and a claude in the folder saw two bridges for it).
#[test]
fn a_folder_through_a_link_is_the_same_workspace() {
    let sb = Sandbox::new();
    let link = sb.root().join("link");
    std::os::unix::fs::symlink(&sb.ws, &link).unwrap();
    let mut first = Served::start(&sb, &["--workspace", link.to_str().unwrap()]);
    let (port, token) = (first.port, first.token());
    first.stderr.wait_for("port and auth token: kept in ");
    let second = Served::start(&sb, &[]);
    assert_ne!(second.port, port);
    second.stderr.wait_for("another bridge");
    drop(second);
    assert_eq!(first.stop(), 0);
    let again = Served::start(&sb, &[]);
    assert_eq!((again.port, again.token()), (port, token));
    assert_eq!(state_files(&sb).len(), 1);
}

/// Two folders whose names differ only in bytes that are not UTF-8 would share a state file
/// (their names in it are the same text): such a folder keeps nothing, and says so. The second
/// took the first's port and token, and a claude retrying the first reached the second folder.
#[test]
fn a_folder_named_in_no_unicode_keeps_nothing() {
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new();
    for byte in [0xff, 0xfe] {
        let odd = sb
            .root()
            .join(std::ffi::OsStr::from_bytes(&[b'n', b'u', byte]));
        fs::create_dir(&odd).unwrap();
        let mut serve = sb.command();
        serve.arg("serve").arg("--workspace").arg(&odd);
        let (mut child, stderr) = spawn_collected(serve);
        stderr.wait_for("lock file: ");
        stderr.wait_for("a name that is not Unicode");
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert!(state_files(&sb).is_empty(), "{:?}", state_files(&sb));
}

/// A state folder open to others is not used: said once, as it is (new port and token each
/// start, nothing kept); the file in it is neither read nor replaced. It was said to be
/// replaced, then that it could not be kept.
#[test]
fn a_state_folder_open_to_others_keeps_nothing_and_says_so() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let token = first.token();
    crash(first);
    let file = state_file(&sb);
    let kept = fs::read(&file).unwrap();
    let folder = file.parent().unwrap();
    fs::set_permissions(folder, fs::Permissions::from_mode(0o777)).unwrap();
    let s = Served::start(&sb, &[]);
    let said = s
        .stderr
        .wait_for("port and auth token: new each start, not kept");
    assert!(said.contains(&folder.display().to_string()), "{said}");
    assert_ne!(s.token(), token);
    s.stderr.wait_for("language servers: ");
    let text = s.stderr.text();
    crash(s);
    assert!(
        !text.contains("replace") && !text.contains("not kept for the next start"),
        "{text}"
    );
    assert_eq!(fs::read(&file).unwrap(), kept);
    // `doctor` counts it a problem.
    let o = sb.command().args(["doctor", "--no-lsp"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "problem: the state folder {} is not used",
            folder.display()
        )),
        "{out}"
    );
}

/// A state folder that takes no file (here on a read-only mount; the same for one this user may
/// not write) keeps nothing: `serve` says which file and what to do (it said only "Read-only
/// file system"), and `doctor` counts it a problem (it said nothing while the bridge's own
/// folder in it was not made yet).
#[test]
fn a_state_folder_that_takes_no_file_is_said_with_its_path() {
    let sb = Sandbox::new();
    let state = sb.home.join(".local/state");
    fs::create_dir_all(&state).unwrap();
    let read_only = format!(
        "mount --bind '{0}' '{0}' && mount -o remount,bind,ro '{0}'",
        state.display()
    );
    let mut serve = sb.command();
    serve.args(["serve", "--no-lsp"]).arg(&sb.ws);
    let Some(serve) = unshared("-rm", &read_only, &serve) else {
        return;
    };
    let (mut child, stderr) = spawn_collected(serve);
    let said = stderr.wait_for("port and auth token: not kept for the next start (");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        said.contains(&format!("{}/claude-ide-bridge/", state.display()))
            && said.contains("make that folder yours and writable"),
        "{said}"
    );
    let mut doctor = sb.command();
    doctor.args(["doctor", "--no-lsp"]).arg(&sb.ws);
    let o = unshared("-rm", &read_only, &doctor)
        .unwrap()
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "problem: this workspace's state {} takes no file",
            state.display()
        )),
        "{out}"
    );
}

/// A state file a start would refuse (its token readable by others) is a problem to `doctor`,
/// said with its path (it said nothing: the next restart moved, and its claude needed /ide);
/// the folder's own problem is said once, as such (above).
#[test]
fn doctor_says_a_state_file_the_next_start_would_refuse() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    crash(first);
    let file = state_file(&sb);
    let doctor = || {
        let o = sb
            .command()
            .args(["doctor", "--no-lsp"])
            .arg(&sb.ws)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    assert!(
        !doctor().1.contains("this workspace's state"),
        "{}",
        doctor().1
    );
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let (code, out) = doctor();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "problem: this workspace's state {} is not used (its mode 644",
            file.display()
        )),
        "{out}"
    );
}

/// A state file that cannot be used is said, not trusted, and replaced by a good one.
#[test]
fn bad_state_files_are_replaced() {
    let sb = Sandbox::new();
    let first = Served::start(&sb, &[]);
    let token = first.token();
    crash(first);
    let file = state_file(&sb);
    let good = fs::read_to_string(&file).unwrap();
    let elsewhere = sb.root().join("elsewhere.json");
    type Spoil = Box<dyn Fn(&PathBuf)>;
    let cases: Vec<(&str, Spoil)> = vec![
        (
            "not a state file",
            Box::new(|f| fs::write(f, "{\"port\": ").unwrap()),
        ),
        (
            "more than 65536",
            Box::new(|f| fs::write(f, " ".repeat(70_000)).unwrap()),
        ),
        (
            "lets group or others at it",
            Box::new(|f| fs::set_permissions(f, fs::Permissions::from_mode(0o644)).unwrap()),
        ),
        (
            "symbolic link",
            Box::new(move |f| {
                fs::rename(f, &elsewhere).unwrap();
                std::os::unix::fs::symlink(&elsewhere, f).unwrap();
            }),
        ),
        // (It was trusted: the port taken, each start waited 15 s for a "last bridge" of pid 0.)
        (
            "pid 0",
            Box::new(|f| {
                let mut v: Value = serde_json::from_slice(&fs::read(f).unwrap()).unwrap();
                v["pid"] = 0.into();
                fs::write(f, v.to_string()).unwrap();
            }),
        ),
        // (It was said to be replaced, and every start then failed to save.)
        (
            "not a regular file",
            Box::new(|f| {
                fs::remove_file(f).unwrap();
                fs::create_dir(f).unwrap();
            }),
        ),
    ];
    for (why, spoil) in cases {
        fs::write(&file, &good).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        spoil(&file);
        let s = Served::start(&sb, &[]);
        s.stderr
            .wait_for(&format!("state file {} not used (", file.display()));
        s.stderr.wait_for(why);
        // Not trusted: a new token (the port may come back by chance, the token cannot).
        assert_ne!(s.token(), token, "{why}");
        // Replaced by a good file, private, not a link.
        let meta = fs::symlink_metadata(&file).unwrap();
        assert!(meta.is_file(), "{why}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{why}");
        assert_eq!(state(&sb)["authToken"], s.token().as_str(), "{why}");
        assert_eq!(state(&sb)["port"], s.port, "{why}");
        crash(s);
    }
    // The link's target was left alone.
    assert_eq!(
        fs::read_to_string(sb.root().join("elsewhere.json")).unwrap(),
        good
    );
}
