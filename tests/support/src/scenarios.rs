//! Scenarios run over real loopback sockets against each runtime. Each runtime's test file
//! implements [`Rt`] and calls every scenario.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use claude_ide_bridge::LogEvent;
use claude_ide_bridge::{
    ApiError, AtMentioned, AuthToken, CallId, CancelReason, ClientPaths, ConnectionId,
    DisconnectReason, Event, Limits, Notification, Position, Selection, SelectionChanged, Target,
    ToolCall, ToolResult,
};
use claude_ide_bridge_runtime::{Handle, LockFileMode, Options};
use serde_json::{json, Value};

use crate::client::{close_code, connect, push_text_frame, texts, upgrade_request, Client};
use crate::platform::{assert_mode, set_mode};
use claude_ide_bridge::ws::OpCode;

pub const TOKEN: &str = "scenario-token-0123456789abcdefghijklmnopq";
const WAIT: Duration = Duration::from_secs(5);

/// What the scenarios need from a runtime: starting, events and stopping differ (blocking or
/// awaited); everything else goes through the [`Handle`] both runtimes hand out.
pub trait Rt {
    type S;
    fn start(opts: Options) -> std::io::Result<Self::S>;
    fn port(s: &Self::S) -> u16;
    fn lock_path(s: &Self::S) -> Option<PathBuf>;
    fn handle(s: &Self::S) -> Handle;
    fn event(s: &Self::S, timeout: Duration) -> Option<Event>;
    fn stop(s: Self::S);
}

/// `#[test]` functions running each named scenario with runtime `$rt`.
#[macro_export]
macro_rules! scenario_tests {
    ($rt:ty; $($(#[$attr:meta])* $name:ident),* $(,)?) => {
        $($(#[$attr])* #[test] fn $name() { $crate::scenarios::$name::<$rt>(); })*
    };
}

/// The scenarios every runtime runs with its plain server (`tests/sockets.rs`): one list, so
/// that both runtimes run the same ones.
#[macro_export]
macro_rules! socket_scenarios {
    ($rt:ty) => {
        $crate::scenario_tests!($rt;
            a_logger_may_call_the_server,
            handshake_token,
            mcp_lifecycle,
            tools_changed_at_run_time,
            deferred_open_diff,
            cancel_and_disconnect,
            notify_one_and_all,
            a_client_in_wsl_is_sent_wsl_paths,
            eleventh_refused,
            slow_reader,
            slow_caller,
            dead_peer,
            lock_file,
            // Where there is a watch: inotify, kqueue, ReadDirectoryChangesW (none on the other
            // Unixes, docs/platforms.md).
            #[cfg(any(target_os = "linux", target_os = "macos", windows))]
            lock_file_removed_is_written_again,
            #[cfg(any(target_os = "linux", target_os = "macos", windows))]
            lock_folder_removed_is_made_again,
            lock_file_withdrawn,
            lock_dir_refused,
            stale_locks,
            // A child the signal and stale-lock scenarios start (`--ignored`), not a test.
            #[ignore = "the child of a scenario"]
            sigterm_child,
            // Not on Windows: the Python peer is a Linux program, which a Windows process
            // (under Wine in CI) cannot start.
            #[cfg(unix)]
            python_websockets_peer,
            vanish_mid_frame,
            vanish_mid_open_diff,
            large_text_over_many_reads,
            slowloris,
            clock_jump,
            // Not on Windows: no mode bits (privacy by access lists, SECURITY.md).
            #[cfg(unix)]
            lock_dir_wrong_permissions,
            a_host_behind_pauses_reading,
            host_loop_answers_a_burst,
            a_flooding_peer_starves_nobody,
            a_client_that_does_not_read_is_not_read,
            a_batch_held_past_the_mark_leaves_its_cancel_read,
            a_large_message_written_before_a_large_answer_is_read,
        );
    };
}

/// The scenarios every runtime runs with its events going to a handler (`tests/handler.rs`).
#[macro_export]
macro_rules! handler_scenarios {
    ($rt:ty) => {
        $crate::scenario_tests!($rt;
            handshake_token,
            mcp_lifecycle,
            tools_changed_at_run_time,
            deferred_open_diff,
            cancel_and_disconnect,
            notify_one_and_all,
            a_client_in_wsl_is_sent_wsl_paths,
            eleventh_refused,
            slow_reader,
            slow_caller,
            dead_peer,
            vanish_mid_frame,
            vanish_mid_open_diff,
            slowloris,
            clock_jump,
            handler_answers_a_burst,
            a_panicking_handler_stalls_nothing,
            a_stopped_server_is_freed,
            a_stopped_server_drops_its_handler_while_a_handle_lives,
            a_dropped_server_says_goodbye,
            a_flooding_peer_starves_nobody,
            a_client_that_does_not_read_is_not_read,
        );
    };
}

pub fn opts(dir: &Path) -> Options {
    let mut o = Options::new(vec![dir.to_path_buf()], "ScenarioIDE");
    o.lock_file = LockFileMode::Dir(dir.join("ide"));
    o.auth_token = Some(AuthToken::from_string(TOKEN));
    o.signal_cleanup = false;
    o
}

/// The next event matching `pred`, skipping others.
pub fn wait_event<R: Rt>(s: &R::S, pred: impl Fn(&Event) -> bool) -> Event {
    wait_event_within::<R>(s, WAIT, pred)
}

/// [`wait_event`] with a bound of its own.
fn wait_event_within<R: Rt>(s: &R::S, bound: Duration, pred: impl Fn(&Event) -> bool) -> Event {
    let give_up = Instant::now() + bound;
    loop {
        let left = give_up
            .checked_duration_since(Instant::now())
            .expect("timed out waiting for an event");
        match R::event(s, left) {
            Some(e) if pred(&e) => return e,
            Some(_) => {}
            None => panic!("timed out waiting for an event"),
        }
    }
}

fn connected<R: Rt>(s: &R::S) -> ConnectionId {
    match wait_event::<R>(s, |e| matches!(e, Event::Connected { .. })) {
        Event::Connected { conn, .. } => conn,
        _ => unreachable!(),
    }
}

/// Connects, initializes, waits for the Initialized event.
fn client<R: Rt>(s: &R::S) -> (Client, ConnectionId) {
    let (status, c) = connect(R::port(s), Some(TOKEN));
    assert_eq!(status, 101);
    let mut c = c.unwrap();
    c.init();
    let conn = match wait_event::<R>(s, |e| matches!(e, Event::Initialized { .. })) {
        Event::Initialized { conn, .. } => conn,
        _ => unreachable!(),
    };
    (c, conn)
}

fn tool_call<R: Rt>(s: &R::S) -> (CallId, ToolCall) {
    tool_call_within::<R>(s, WAIT)
}

fn tool_call_within<R: Rt>(s: &R::S, bound: Duration) -> (CallId, ToolCall) {
    match wait_event_within::<R>(s, bound, |e| matches!(e, Event::ToolCall { .. })) {
        Event::ToolCall { call, tool } => (call, tool),
        _ => unreachable!(),
    }
}

fn diff_args(tab: &str) -> Value {
    json!({"old_file_path": "/w/a.rs", "new_file_path": "/w/a.rs",
           "new_file_contents": "fn main() {}\n", "tab_name": tab})
}

pub fn handshake_token<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    assert_eq!(connect(R::port(&s), None).0, 401);
    assert_eq!(connect(R::port(&s), Some("wrong")).0, 401);
    let (status, c) = connect(R::port(&s), Some(TOKEN));
    assert_eq!(status, 101);
    assert!(c.is_some());
    connected::<R>(&s);
    R::stop(s);
}

pub fn mcp_lifecycle<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (status, c) = connect(R::port(&s), Some(TOKEN));
    assert_eq!(status, 101);
    let mut c = c.unwrap();
    let init = c.init();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(init["result"]["serverInfo"]["name"].is_string());
    wait_event::<R>(&s, |e| matches!(e, Event::Initialized { .. }));
    let list = c.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "openDiff"));
    let ping = c.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    R::stop(s);
}

pub fn deferred_open_diff<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut c, _) = client::<R>(&s);
    let diff_id = c.call_tool("openDiff", diff_args("tab-1"));
    let (diff_call, tool) = tool_call::<R>(&s);
    assert!(matches!(tool, ToolCall::OpenDiff(_)));
    let wf_id = c.call_tool("getWorkspaceFolders", json!({}));
    let (wf_call, tool) = tool_call::<R>(&s);
    assert!(matches!(tool, ToolCall::GetWorkspaceFolders));
    let h = R::handle(&s);
    std::thread::spawn(move || {
        h.respond(wf_call, ToolResult::text("folders")).unwrap();
    })
    .join()
    .unwrap();
    let wf = c.response(wf_id);
    assert_eq!(texts(&wf), ["folders"]);
    let h = R::handle(&s);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        h.respond(diff_call, ToolResult::file_saved("fn main() {}\n"))
            .unwrap();
    });
    let diff = c.response(diff_id);
    assert_eq!(texts(&diff), ["FILE_SAVED", "fn main() {}\n"]);
    assert_eq!(
        R::handle(&s).respond(diff_call, ToolResult::ok()),
        Err(ApiError::NotPending)
    );
    R::stop(s);
}

pub fn cancel_and_disconnect<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut c, conn) = client::<R>(&s);
    let id = c.call_tool("openDiff", diff_args("tab-1"));
    let (call, _) = tool_call::<R>(&s);
    c.send_json(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": id, "reason": "user"}}),
    );
    let e = wait_event::<R>(&s, |e| matches!(e, Event::CallCancelled { .. }));
    assert_eq!(
        e,
        Event::CallCancelled {
            call,
            reason: CancelReason::Cancelled
        }
    );
    c.call_tool("openDiff", diff_args("tab-2"));
    let (call2, _) = tool_call::<R>(&s);
    drop(c);
    let e = wait_event::<R>(&s, |e| matches!(e, Event::CallCancelled { .. }));
    assert_eq!(
        e,
        Event::CallCancelled {
            call: call2,
            reason: CancelReason::Disconnected
        }
    );
    let e = wait_event::<R>(&s, |e| matches!(e, Event::Disconnected { .. }));
    assert!(matches!(e, Event::Disconnected { conn: c2, .. } if c2 == conn));
    assert!(R::handle(&s).connections().is_empty());
    R::stop(s);
}

fn selection() -> Notification {
    Notification::LogEvent(LogEvent {
        event_name: "ping".into(),
        event_data: json!({"x": 1}),
    })
}

pub fn notify_one_and_all<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut a, conn_a) = client::<R>(&s);
    let (mut b, _) = client::<R>(&s);
    let h = R::handle(&s);
    assert_eq!(h.notify(Target::All, &selection()), 2);
    for c in [&mut a, &mut b] {
        let n = c.recv_until(WAIT, |v| v["method"] == "log_event").unwrap();
        assert_eq!(n["params"]["eventName"], "ping");
    }
    let one = Notification::LogEvent(LogEvent {
        event_name: "one".into(),
        event_data: json!(null),
    });
    assert_eq!(h.notify(Target::Connection(conn_a), &one), 1);
    let n = a.recv_until(WAIT, |v| v["method"] == "log_event").unwrap();
    assert_eq!(n["params"]["eventName"], "one");
    // b gets nothing but the answer to its own ping.
    let id = b.send_request("ping", json!({}));
    let next = b.recv_json(WAIT).unwrap();
    assert_eq!(next["id"], json!(id));
    R::stop(s);
}

/// A pid that was alive and is not: this test binary listing its tests, waited for.
fn ended_pid() -> u32 {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--list", "--format=terse"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A client says its pid (`ide_connected`): one that is a process here is sent paths as the
/// host gives them; on Windows one whose pid is no process here is a `claude` in WSL, sent
/// `/mnt/<drive>/` paths (elsewhere the host may say so, `Handle::set_client_paths`). In one
/// broadcast each client gets its own. An at-mention queued before the client in WSL came is
/// named so too: it waits for the client to be ready, after `ide_connected`, whose pid decides.
pub fn a_client_in_wsl_is_sent_wsl_paths<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let h = R::handle(&s);
    let said_pid = |pid: u32| {
        let (mut c, conn) = client::<R>(&s);
        c.send_json(&json!({"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": pid}}));
        wait_event::<R>(
            &s,
            |e| matches!(e, Event::IdeConnected { conn: c, .. } if *c == conn),
        );
        (c, conn)
    };
    let queued = Notification::AtMentioned(AtMentioned {
        file_path: r"C:\Users\me\calc.py".into(),
        line_start: Some(0),
        line_end: Some(1),
    });
    assert_eq!(h.notify(Target::All, &queued), 0);
    let (mut wsl, wsl_conn) = said_pid(ended_pid());
    // Written once the client has what `claude` asks for next (it drops one that comes before).
    for list in ["tools/list", "prompts/list", "resources/list"] {
        wsl.request(list, json!({}));
    }
    let mention = wsl.recv_until(WAIT, |v| v["method"] == "at_mentioned");
    let by_pid_path = match cfg!(windows) {
        true => "/mnt/c/Users/me/calc.py",
        false => r"C:\Users\me\calc.py",
    };
    assert_eq!(mention.unwrap()["params"]["filePath"], by_pid_path);
    let (mut here, here_conn) = said_pid(std::process::id());
    assert_eq!(h.client_paths(here_conn), Some(ClientPaths::AsGiven));
    let by_pid = match cfg!(windows) {
        true => ClientPaths::WslMounts,
        false => ClientPaths::AsGiven,
    };
    assert_eq!(h.client_paths(wsl_conn), Some(by_pid));
    assert!(h.set_client_paths(wsl_conn, ClientPaths::WslMounts));

    let path = r"C:\Users\me\my app\a.rs";
    let moved = Notification::SelectionChanged(SelectionChanged {
        text: "fn a() {}".into(),
        file_path: path.into(),
        file_url: claude_ide_bridge::file_uri(path),
        selection: Selection::new(Position::new(0, 0), Position::new(0, 9)),
    });
    assert_eq!(h.notify(Target::All, &moved), 2);
    let got = |c: &mut Client| {
        let n = c.recv_until(WAIT, |v| v["method"] == "selection_changed");
        let p = &n.unwrap()["params"];
        (
            p["filePath"].as_str().unwrap().to_owned(),
            p["fileUrl"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        got(&mut here),
        (
            path.to_owned(),
            "file:///c:/Users/me/my%20app/a.rs".to_owned()
        )
    );
    assert_eq!(
        got(&mut wsl),
        (
            "/mnt/c/Users/me/my app/a.rs".to_owned(),
            "file:///mnt/c/Users/me/my%20app/a.rs".to_owned()
        )
    );

    wsl.close(1000);
    wait_event::<R>(
        &s,
        |e| matches!(e, Event::Disconnected { conn, .. } if *conn == wsl_conn),
    );
    assert_eq!(h.client_paths(wsl_conn), None);
    assert!(!h.set_client_paths(wsl_conn, ClientPaths::AsGiven));
    R::stop(s);
}

pub fn eleventh_refused<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let mut clients = Vec::new();
    for _ in 0..10 {
        let (status, c) = connect(R::port(&s), Some(TOKEN));
        assert_eq!(status, 101);
        clients.push(c.unwrap());
        connected::<R>(&s);
    }
    assert_eq!(connect(R::port(&s), Some(TOKEN)).0, 503);
    assert_eq!(R::handle(&s).connections().len(), 10);
    drop(clients.pop());
    wait_event::<R>(&s, |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::TransportClosed,
                ..
            }
        )
    });
    assert_eq!(connect(R::port(&s), Some(TOKEN)).0, 101);
    R::stop(s);
}

pub fn slow_reader<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits = Limits {
        max_outbound: 256 * 1024,
        ..Limits::default()
    };
    let s = R::start(o).unwrap();
    let (_stalled, conn_a) = client::<R>(&s);
    let (mut b, _) = client::<R>(&s);
    let h = R::handle(&s);
    let big = Notification::LogEvent(LogEvent {
        event_name: "big".into(),
        event_data: json!("x".repeat(64 * 1024)),
    });
    // News for a client that stops reading stops once half its outbound limit waits for it: it
    // misses that news and keeps its connection (it was dropped, `OutboundFull`, for news alone),
    // and the other client is served all along.
    let give_up = Instant::now() + Duration::from_secs(20);
    let mut refused = false;
    while Instant::now() < give_up && !refused {
        refused = h.notify(Target::Connection(conn_a), &big) == 0;
        while let Some(e) = R::event(&s, Duration::from_millis(1)) {
            assert!(
                !matches!(e, Event::Disconnected { .. }),
                "dropped for news: {e:?}"
            );
        }
    }
    assert!(
        refused,
        "news kept being queued for a client that does not read"
    );
    let pong = b.request("ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    assert_eq!(h.connections().len(), 2);
    R::stop(s);
}

/// A client that sends calls and stops reading: answering them (written at once from the
/// answering thread when the socket takes it) never blocks the host, and others are served.
/// Once its unread answers are past `pause_input_above` (1 MiB: sixteen of them at least), the
/// rest of its calls wait in its socket (how many were read before depends on the timing of its
/// writes: all of them, often, on Linux; some, under Wine); once it reads, they come, and every
/// answer reaches it.
pub fn slow_caller<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut a, _) = client::<R>(&s);
    let (mut b, _) = client::<R>(&s);
    let h = R::handle(&s);
    let big = "x".repeat(64 * 1024);
    for _ in 0..256 {
        a.call_tool("getDiagnostics", json!({}));
    }
    let answer = |call| {
        let t = Instant::now();
        let _ = h.respond(call, ToolResult::text(big.clone()));
        assert!(t.elapsed() < Duration::from_secs(2), "respond blocked");
    };
    let mut answered = 0;
    loop {
        let give_up = Instant::now() + Duration::from_secs(1);
        let call = loop {
            let left = give_up.saturating_duration_since(Instant::now());
            match R::event(&s, left) {
                Some(Event::ToolCall { call, .. }) => break Some(call),
                Some(_) => {}
                None => break None,
            }
        };
        let Some(call) = call else { break };
        answer(call);
        answered += 1;
    }
    assert!(answered >= 16, "{answered} calls read before the pause");
    let pong = b.request("ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        while got < 256 {
            match a.recv_json(WAIT) {
                Some(v) if v["result"]["content"].is_array() => got += 1,
                Some(_) => {}
                None => break,
            }
        }
        got
    });
    while answered < 256 {
        let (call, _) = tool_call::<R>(&s);
        answer(call);
        answered += 1;
    }
    assert_eq!(reader.join().unwrap(), 256);
    R::stop(s);
}

pub fn dead_peer<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits = Limits {
        ping_interval: Duration::from_millis(150),
        ..Limits::default()
    };
    let s = R::start(o).unwrap();
    let (_silent, conn) = client::<R>(&s);
    let started = Instant::now();
    let e = wait_event::<R>(&s, |e| matches!(e, Event::Disconnected { .. }));
    assert_eq!(
        e,
        Event::Disconnected {
            conn,
            reason: DisconnectReason::PingTimeout
        }
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    R::stop(s);
}

pub fn lock_file<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let path = R::lock_path(&s).unwrap();
    assert_eq!(
        path,
        dir.path().join("ide").join(format!("{}.lock", R::port(&s)))
    );
    assert_mode(&dir.path().join("ide"), 0o700);
    assert_mode(&path, 0o600);
    let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys.sort();
    let mut expected = vec![
        "authToken",
        "ideName",
        "pid",
        "runningInWindows",
        "transport",
        "workspaceFolders",
    ];
    // Linux: the process's start too, which tells this process from a later one with its pid.
    if cfg!(target_os = "linux") {
        expected.insert(3, "processStart");
    }
    assert_eq!(keys, expected);
    // The token the host gave, as the handle tells it (to keep for the next start).
    assert_eq!(v["authToken"], R::handle(&s).auth_token().as_str());
    assert_eq!(R::handle(&s).auth_token().as_str(), TOKEN);
    assert_eq!(v["authToken"], TOKEN);
    assert_eq!(v["pid"], std::process::id());
    assert_eq!(v["ideName"], "ScenarioIDE");
    assert_eq!(v["transport"], "ws");
    // The folders as this OS's claude compares them: the path itself (`/tmp/...` on Unix,
    // `C:\...` on Windows), and whether the bridge runs on Windows.
    assert_eq!(v["workspaceFolders"], json!([dir.path().to_str().unwrap()]));
    assert_eq!(v["runningInWindows"], cfg!(windows));
    if cfg!(target_os = "linux") {
        let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let start = v["processStart"].as_str().unwrap();
        assert!(start.starts_with(&format!("{}/", boot.trim())), "{start}");
    }
    // Rewritten atomically when the folders change.
    let (x, y) = (dir.path().join("x"), dir.path().join("y"));
    R::handle(&s)
        .set_workspace_folders(vec![x.clone(), y.clone()])
        .unwrap();
    let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        v["workspaceFolders"],
        json!([x.to_str().unwrap(), y.to_str().unwrap()])
    );
    assert_mode(&path, 0o600);
    let leftovers: Vec<_> = fs::read_dir(dir.path().join("ide")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary files left");
    R::stop(s);
    assert!(!path.exists(), "removed on stop");

    let s = R::start(opts(dir.path())).unwrap();
    let path = R::lock_path(&s).unwrap();
    assert!(path.exists());
    drop(s);
    assert!(!path.exists(), "removed on drop");

    // A fresh token per start when none is given.
    let mut o = opts(dir.path());
    o.auth_token = None;
    let s = R::start(o).unwrap();
    let v: Value =
        serde_json::from_str(&fs::read_to_string(R::lock_path(&s).unwrap()).unwrap()).unwrap();
    let token = v["authToken"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 43);
    assert_eq!(connect(R::port(&s), Some(TOKEN)).0, 401);
    assert_eq!(connect(R::port(&s), Some(&token)).0, 101);
    // Told to the host, which keeps it for its next start; its handle's `Debug` names the port
    // (and not the token).
    assert_eq!(R::handle(&s).auth_token().as_str(), token);
    let shown = format!("{:?}", R::handle(&s));
    assert!(
        shown.contains(&R::port(&s).to_string()) && !shown.contains(&token),
        "{shown}"
    );
    R::stop(s);
}

/// A lock file removed by another process (a `claude` in a container sharing the folder takes
/// every lock file whose pid it cannot see for stale) is written again: the bridge ran on, never
/// found again. At the stop the file is removed for good. (Its folder removed:
/// [`lock_folder_removed_is_made_again`].)
pub fn lock_file_removed_is_written_again<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let path = R::lock_path(&s).unwrap();
    let written = fs::read_to_string(&path).unwrap();
    let back = |what: &str| {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !path.exists() {
            assert!(Instant::now() < give_up, "not written again after {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(fs::read_to_string(&path).unwrap(), written, "{what}");
        assert_mode(&path, 0o600);
        assert_mode(&dir.path().join("ide"), 0o700);
    };
    fs::remove_file(&path).unwrap();
    back("the file removed");
    fs::remove_file(&path).unwrap();
    back("the file removed again");
    // Still the bridge claude finds: its token is served.
    assert_eq!(connect(R::port(&s), Some(TOKEN)).0, 101);
    R::stop(s);
    let s = R::start(opts(dir.path())).unwrap();
    let path = R::lock_path(&s).unwrap();
    R::stop(s);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!path.exists(), "removed at the stop, and not written again");
}

/// The lock file's folder removed (`rm -rf ~/.claude/ide`, a common clean-up of stale lock
/// files) is made again, with the file, once the config folder holding it has been quiet for 2 s
/// (not while it changes: an `rm -rf` of the config folder under way would fail on a folder made
/// again). The config folder removed too is not made again, but once it is back (`claude` makes
/// it at its start), so is the lock file's folder. After the stop, nothing is made again.
pub fn lock_folder_removed_is_made_again<R: Rt>() {
    let top = tempfile::tempdir().unwrap();
    let config = top.path().join("config");
    let ide = config.join("ide");
    let mut o = opts(top.path());
    o.lock_file = LockFileMode::Dir(ide.clone());
    let s = R::start(o.clone()).unwrap();
    let path = R::lock_path(&s).unwrap();
    let written = fs::read_to_string(&path).unwrap();
    let back = |what: &str, since: Instant| {
        let give_up = Instant::now() + Duration::from_secs(20);
        while !path.exists() {
            assert!(Instant::now() < give_up, "not made again after {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            since.elapsed() >= Duration::from_millis(1900),
            "{what}: made again at once"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), written, "{what}");
        assert_mode(&path, 0o600);
        assert_mode(&ide, 0o700);
    };
    fs::remove_dir_all(&ide).unwrap();
    back("the folder removed", Instant::now());
    assert_eq!(connect(R::port(&s), Some(TOKEN)).0, 101);

    // The config folder changing for 3 s (an `rm -rf` of it under way): not made meanwhile.
    fs::remove_dir_all(&ide).unwrap();
    let busy_until = Instant::now() + Duration::from_secs(3);
    let mut i = 0;
    while Instant::now() < busy_until {
        let other = config.join(format!("other-{i}"));
        fs::create_dir(&other).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(250));
        assert!(!ide.exists(), "made again while the config folder changed");
    }
    back("the folder removed in a busy config folder", Instant::now());

    // The config folder removed: not made again, until the config folder is back.
    fs::remove_dir_all(&config).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(!config.exists(), "the config folder made again");
    fs::create_dir(&config).unwrap();
    back("the config folder made again", Instant::now());
    assert_eq!(connect(R::port(&s), Some(TOKEN)).0, 101);

    // Stopped while waiting to make it again: nothing made.
    fs::remove_dir_all(&ide).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    R::stop(s);
    std::thread::sleep(Duration::from_secs(3));
    assert!(!ide.exists(), "made again after the stop");
}

/// A lock file withdrawn ([`Handle::withdraw_lock_file`], the start of a host's stop) is gone at
/// once and stays gone, even where a watch writes back a file another process removed, while
/// the client connected is still answered; the stop after it has nothing more to remove.
pub fn lock_file_withdrawn<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let path = R::lock_path(&s).unwrap();
    let (_, c) = connect(R::port(&s), Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    R::handle(&s).withdraw_lock_file();
    assert!(!path.exists(), "removed at once");
    R::handle(&s).withdraw_lock_file();
    // Longer than the watch's 200 ms before it writes a removed file again.
    std::thread::sleep(Duration::from_millis(600));
    assert!(!path.exists(), "written again after it was withdrawn");
    let tools = c.request("tools/list", json!({}));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    R::handle(&s)
        .set_workspace_folders(vec![dir.path().to_path_buf()])
        .unwrap();
    assert!(!path.exists(), "written again by a change of folders");
    R::stop(s);
    assert!(!path.exists());
}

pub fn lock_dir_refused<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    set_mode(&real, 0o700);
    crate::platform::symlink_dir(&real, &dir.path().join("ide")).unwrap();
    let err = R::start(opts(dir.path()))
        .err()
        .expect("a symlinked lock dir is refused");
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("symbolic link"), "{err}");
    // World-writable: refused too (Unix: Windows has no mode bits).
    if cfg!(unix) {
        let mut o = opts(dir.path());
        o.lock_file = LockFileMode::Dir(real.clone());
        set_mode(&real, 0o777);
        let err = R::start(o)
            .err()
            .expect("a world-writable lock dir is refused");
        assert!(err.to_string().contains("writable"), "{err}");
    }
}

pub fn stale_locks<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let ide = dir.path().join("ide");
    fs::create_dir(&ide).unwrap();
    set_mode(&ide, 0o700);
    // A pid that was alive and is not. A live one that is not ours: the same binary as the
    // child that waits to be killed.
    let dead = ended_pid();
    let elsewhere = tempfile::tempdir().unwrap();
    let mut live = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "sigterm_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RT_SIGTERM_CHILD", "1")
        .env("CLAUDE_CONFIG_DIR", elsewhere.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = |pid: u32, name: &str| {
        json!({"pid": pid, "workspaceFolders": ["/w"], "ideName": name, "transport": "ws",
               "runningInWindows": false, "authToken": "t"})
        .to_string()
    };
    fs::write(ide.join("1.lock"), lock(dead, "ScenarioIDE")).unwrap();
    fs::write(ide.join("2.lock"), lock(live.id(), "ScenarioIDE")).unwrap();
    fs::write(ide.join("3.lock"), lock(dead, "OtherIDE")).unwrap();
    // A pid that looks dead from here with its port answering: another pid namespace's bridge
    // (a container sharing the folder), kept (it was removed, and that bridge never found).
    let answering = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let answering_lock = ide.join(format!("{}.lock", answering.local_addr().unwrap().port()));
    fs::write(&answering_lock, lock(dead, "ScenarioIDE")).unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut o = opts(dir.path());
    let seen = lines.clone();
    o.logger = Some(claude_ide_bridge_runtime::Logger::new(move |line| {
        seen.lock().unwrap().push(line.to_owned());
    }));
    let s = R::start(o).unwrap();
    // Its own lock file first, then the stale ones: a bridge started at the same moment for the
    // same workspace finds this one's file at once, not after every stale file's port was tried.
    let lines = lines.lock().unwrap().clone();
    let at = |what: &str| lines.iter().position(|l| l.starts_with(what));
    let (written, removed) = (at("Lock file written"), at("Removed stale lock file"));
    assert!(
        written.is_some() && removed.is_some() && written < removed,
        "{lines:?}"
    );
    assert!(answering_lock.exists(), "a lock whose port answers kept");
    assert!(
        !ide.join("1.lock").exists(),
        "stale lock of a dead pid removed"
    );
    assert!(ide.join("2.lock").exists(), "a live process's lock kept");
    assert!(ide.join("3.lock").exists(), "another IDE's lock kept");
    R::stop(s);
    live.kill().unwrap();
    live.wait().unwrap();
}

/// The child half of the SIGTERM test: runs when `RT_SIGTERM_CHILD` is set, starts a server with
/// signal cleanup in `$CLAUDE_CONFIG_DIR/ide` and waits to be killed.
pub fn sigterm_child<R: Rt>() {
    if std::env::var_os("RT_SIGTERM_CHILD").is_none() {
        return;
    }
    let mut o = Options::new(vec!["/w".into()], "SignalIDE");
    o.lock_file = LockFileMode::Auto;
    o.signal_cleanup = true;
    let s = R::start(o).unwrap();
    println!("READY {}", R::lock_path(&s).unwrap().display());
    std::thread::sleep(Duration::from_secs(30));
    R::stop(s);
}

/// The parent half: `test_name` is the test calling [`sigterm_child`]. Unix only (signals).
#[cfg(unix)]
pub fn sigterm_removes_lock(test_name: &str) {
    signal_removes_lock(test_name, "-TERM");
}

/// The parent half for any signal (`-TERM`, `-INT`). Unix only (signals).
#[cfg(unix)]
pub fn signal_removes_lock(test_name: &str, signal: &str) {
    // Started with SIGINT ignored (a background job of a shell without job control), the child
    // is too, and keeps it ignored by design (`signals::ignored`): nothing to see here.
    if signal == "-INT" && claude_ide_bridge_runtime::signals::ignored(2) {
        crate::skip::skip("SIGINT is ignored in this process (a background job of a script)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test_name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RT_SIGTERM_CHILD", "1")
        .env("CLAUDE_CONFIG_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ide = dir.path().join("ide");
    let give_up = Instant::now() + Duration::from_secs(20);
    let lock = loop {
        let found = fs::read_dir(&ide).ok().and_then(|mut d| {
            d.find_map(|e| {
                let p = e.ok()?.path();
                p.extension().is_some_and(|x| x == "lock").then_some(p)
            })
        });
        if let Some(p) = found {
            break p;
        }
        assert!(Instant::now() < give_up, "the child wrote no lock file");
        std::thread::sleep(Duration::from_millis(20));
    };
    crate::platform::signal(child.id(), signal);
    let give_up = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < give_up, "the child did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!exit.success());
    assert!(!lock.exists(), "lock file removed on {signal}");
}

/// A WebSocket implementation written by someone else (Python `websockets`) as the client.
pub fn python_websockets_peer<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/ws_peer.py");
    let child = std::process::Command::new("python3")
        .args([script, &R::port(&s).to_string(), TOKEN])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is needed for this test (scripts/test-all.sh installs websockets)");
    let h = R::handle(&s);
    // The diff waits for the host while the folders call is answered at once. Python and its
    // `websockets` take seconds to start on a loaded machine (5 s were once not enough).
    let (diff, tool) = tool_call_within::<R>(&s, Duration::from_secs(60));
    assert!(matches!(tool, ToolCall::OpenDiff(ref a) if a.new_file_contents.len() == 12 * 1000));
    let (folders, tool) = tool_call::<R>(&s);
    assert_eq!(tool, ToolCall::GetWorkspaceFolders);
    h.respond(folders, ToolResult::text("folders")).unwrap();
    h.respond(diff, ToolResult::file_saved("accepted")).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the Python peer failed");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["wrong_token"], 401);
    assert_eq!(seen["subprotocol"], "mcp");
    assert_eq!(seen["initialize"], "2025-06-18");
    assert_eq!(seen["tools"], 15);
    assert_eq!(seen["order"], json!([4, 3]));
    assert_eq!(seen["diff"], json!(["FILE_SAVED", "accepted"]));
    assert_eq!(seen["pong"], true);
    assert_eq!(seen["close_code"], 1000);
    R::stop(s);
}

/// A peer that sends half a frame and vanishes affects only itself.
pub fn vanish_mid_frame<R: Rt>() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut good, _) = client::<R>(&s);
    let (mut bad, bad_conn) = client::<R>(&s);
    // A masked text frame declaring 100 bytes, of which 10 arrive.
    let mut partial = vec![0x81, 0x80 | 100, 1, 2, 3, 4];
    partial.extend_from_slice(&[b'x' ^ 1; 10]);
    bad.stream.write_all(&partial).unwrap();
    drop(bad);
    let e = wait_event::<R>(&s, |e| matches!(e, Event::Disconnected { .. }));
    assert!(matches!(e, Event::Disconnected { conn, .. } if conn == bad_conn));
    assert_eq!(good.request("ping", json!({}))["result"], json!({}));
    R::stop(s);
}

/// A 3 MiB `openDiff` of text with multi-byte characters, written in 1,000-byte pieces so that the
/// server reads it in many parts (the text is unmasked, validated and stored as each read arrives):
/// the host gets the contents exactly. Then a peer whose 1 MiB frame holds one byte that is not UTF-8,
/// deep inside: closed with 1007, the other client unharmed.
pub fn large_text_over_many_reads<R: Rt>() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut c, _) = client::<R>(&s);
    let contents = "fn é() { \"€ 😀\" } // ünïcödé\n".repeat(3 << 20 >> 5);
    let mut args = diff_args("big");
    args["new_file_contents"] = json!(contents);
    let (frame, ids) = c.encode_tool_calls(&[("openDiff", args)]);
    for piece in frame.chunks(1000) {
        c.stream.write_all(piece).unwrap();
    }
    let (call, tool) = tool_call::<R>(&s);
    let ToolCall::OpenDiff(got) = tool else {
        panic!("not an openDiff: {tool:?}")
    };
    assert!(got.new_file_contents == contents, "contents differ");
    R::handle(&s)
        .respond(call, ToolResult::file_saved("ok"))
        .unwrap();
    assert_eq!(texts(&c.response(ids[0])), ["FILE_SAVED", "ok"]);

    let (mut bad, _) = client::<R>(&s);
    bad.stream.set_write_timeout(Some(WAIT)).unwrap();
    let mut payload = "é".repeat(1 << 19).into_bytes();
    payload[700_001] = 0xFF;
    let mut frame = Vec::new();
    push_text_frame(&mut frame, &payload);
    for piece in frame.chunks(1000) {
        if bad.stream.write_all(piece).is_err() {
            break; // closed before everything was written: that is the point
        }
    }
    let (op, close) = bad.recv_frame(WAIT).expect("a Close");
    assert_eq!((op, close_code(&close)), (8, Some(1007)));
    assert_eq!(c.request("ping", json!({}))["result"], json!({}));
    R::stop(s);
}

/// A peer that vanishes while its `openDiff` waits for the user: the call is cancelled, and a
/// late answer from the host is refused without harm.
pub fn vanish_mid_open_diff<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut c, _) = client::<R>(&s);
    c.call_tool("openDiff", diff_args("pending"));
    let (call, _) = tool_call::<R>(&s);
    drop(c);
    let e = wait_event::<R>(&s, |e| matches!(e, Event::CallCancelled { .. }));
    assert_eq!(
        e,
        Event::CallCancelled {
            call,
            reason: CancelReason::Disconnected
        }
    );
    let h = R::handle(&s);
    assert_eq!(
        h.respond(call, ToolResult::file_saved("late")),
        Err(ApiError::NotPending)
    );
    let (mut next, _) = client::<R>(&s);
    assert_eq!(next.request("ping", json!({}))["result"], json!({}));
    R::stop(s);
}

/// Slowloris: an upgrade trickling in one byte at a time is dropped at the handshake deadline
/// while another client is served normally.
pub fn slowloris<R: Rt>() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.handshake_timeout = Duration::from_millis(800);
    let s = R::start(o).unwrap();
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", R::port(&s))).unwrap();
    let started = Instant::now();
    let trickle = std::thread::spawn(move || {
        let head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for b in head {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 64];
        // The server closes without a response once the deadline passes.
        matches!(slow.read(&mut buf), Ok(0) | Err(_))
    });
    let (mut good, _) = client::<R>(&s);
    assert_eq!(good.request("ping", json!({}))["result"], json!({}));
    let e = wait_event::<R>(&s, |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::HandshakeTimeout,
                ..
            }
        )
    });
    assert!(matches!(e, Event::Disconnected { .. }));
    assert!(trickle.join().unwrap(), "the slow socket was closed");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(good.request("ping", json!({}))["result"], json!({}));
    R::stop(s);
}

/// A peer that keeps its socket readable with messages that give no event and no output (unknown
/// notifications, written faster than they are read) harms nobody: another client still connects
/// and is answered. On smol, the
/// flooding connection's task never met a read that found nothing, so it never let the executor's
/// thread go: the acceptor, the timer and the other connections stood still.
pub fn a_flooding_peer_starves_nobody<R: Rt>() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (flooder, _) = client::<R>(&s);
    let mut chunk = Vec::new();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/nothing"}).to_string();
    for _ in 0..2000 {
        push_text_frame(&mut chunk, note.as_bytes());
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (stop, chunk) = (stop.clone(), chunk.clone());
        let mut stream = flooder.stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(20);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < until {
                if stream.write_all(&chunk).is_err() {
                    break;
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let (mut other, _) = client::<R>(&s);
    assert_eq!(other.request("ping", json!({}))["result"], json!({}));
    let answered = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flood.join().unwrap();
    assert!(answered < WAIT, "answered after {answered:?}");
    drop(flooder);
    R::stop(s);
}

/// A client that sends requests the engine answers itself (`tools/list`) and never reads the
/// answers: the runtime stops reading it once its output is past `pause_input_above`, so that
/// its writes stall, where the server used to read on until the output passed `max_outbound`
/// and dropped it. It is neither dropped nor left behind: once it reads, every request it sent
/// is answered, in order, and it is read again. The others are served meanwhile.
pub fn a_client_that_does_not_read_is_not_read<R: Rt>() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.pause_input_above = 64 * 1024;
    o.limits.max_outbound = 2 << 20;
    // No Ping meanwhile: its Pong, written by the client's reads, would share the socket with
    // the writes cut short below.
    o.limits.ping_interval = Duration::from_secs(600);
    let s = R::start(o).unwrap();
    let (mut quiet, _) = client::<R>(&s);
    // 4 KiB requests (padded: the socket buffers then hold a few thousand of them, not a hundred
    // thousand), each answered with the list of tools (5 KiB).
    let pad = "x".repeat(4096);
    let request = |id: u64, method: &str| {
        let mut frame = Vec::new();
        let text = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"pad": pad}});
        push_text_frame(&mut frame, text.to_string().as_bytes());
        frame
    };
    let mut stream = quiet.stream.try_clone().unwrap();
    stream
        .set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    // A server that reads on queues what the socket buffers do not take (a few MiB), and is
    // dropped once that passes `max_outbound`.
    const FIRST: u64 = 1000;
    let (mut sent, mut cut) = (0u64, None);
    'send: while sent < 50_000 {
        let frame = request(FIRST + sent, "tools/list");
        let mut at = 0;
        while at < frame.len() {
            match stream.write(&frame[at..]) {
                Ok(n) if n > 0 => at += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    cut = Some(frame[at..].to_vec());
                    break 'send;
                }
                other => {
                    let gone = wait_event::<R>(&s, |e| matches!(e, Event::Disconnected { .. }));
                    panic!("dropped after {sent} requests: {other:?}, {gone:?}");
                }
            }
        }
        sent += 1;
    }
    let rest = cut.unwrap_or_else(|| panic!("{sent} requests read, none left waiting"));
    // Another client is served meanwhile.
    let (mut other, _) = client::<R>(&s);
    assert_eq!(other.request("ping", json!({}))["result"], json!({}));
    // It reads: every request it sent is answered, in order, the one the stall cut too once it
    // is finished, and it is read again.
    let mut answered = 0;
    while answered <= sent {
        if answered == sent {
            stream.set_write_timeout(None).unwrap();
            stream.write_all(&rest).unwrap();
            stream.write_all(&request(1, "ping")).unwrap();
        }
        let v = (quiet.recv_json(WAIT))
            .unwrap_or_else(|| panic!("{answered} of {sent} answered: {}", quiet.why()));
        assert_eq!(v["id"], json!(FIRST + answered), "{v}");
        assert!(v["result"]["tools"].is_array(), "{v}");
        answered += 1;
    }
    let v = quiet.recv_json(WAIT).expect("the ping's answer");
    assert_eq!(
        (v["id"].clone(), v["result"].clone()),
        (json!(1), json!({}))
    );
    drop((quiet, other, stream));
    R::stop(s);
}

/// A batch (protocol 2025-03-26) whose answers given so far are past `pause_input_above` while
/// one of its calls still waits for the host: the client's next messages are read, its cancel of
/// the waiting call among them, which finishes the batch (the review of a426de1: its reader
/// paused with nothing left to write, which no write would wake).
pub fn a_batch_held_past_the_mark_leaves_its_cancel_read<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.pause_input_above = 64 * 1024;
    let s = R::start(o).unwrap();
    let (status, c) = connect(R::port(&s), Some(TOKEN));
    assert_eq!(status, 101);
    let mut c = c.unwrap();
    let r = c.request(
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {},
               "clientInfo": {"name": "test-client", "version": "1"}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-03-26");
    c.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    wait_event::<R>(&s, |e| matches!(e, Event::Initialized { .. }));
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "getOpenEditors", "arguments": {}}})
    };
    c.send_json(&json!([call(100), call(101)]));
    let (first, _) = tool_call::<R>(&s);
    let (_second, _) = tool_call::<R>(&s);
    R::handle(&s)
        .respond(first, ToolResult::text("x".repeat(256 * 1024)))
        .unwrap();
    let r = c.request("ping", json!({}));
    assert_eq!(r["result"], json!({}));
    c.send_json(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 101, "reason": "user pressed Esc"}}),
    );
    let answer = c.recv_until(WAIT, |v| v.is_array());
    assert!(answer.is_some(), "the batch is never answered: {}", c.why());
    drop(c);
    R::stop(s);
}

/// A client of one thread (it writes, then reads) asks for something large, then writes its
/// next message, large too (an `openDiff` of a large file), before it reads: the server reads
/// the message to its end although the answer waits unread past `pause_input_above` (the review
/// of b7e3cbd: its write blocked, the reader paused, and it was dropped as silent).
pub fn a_large_message_written_before_a_large_answer_is_read<R: Rt>() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.ping_interval = Duration::from_secs(3);
    let s = R::start(o).unwrap();
    let (mut c, _) = client::<R>(&s);
    c.call_tool("getDiagnostics", json!({}));
    let (call, _) = tool_call::<R>(&s);
    R::handle(&s)
        .respond(call, ToolResult::text("x".repeat(8 << 20)))
        .unwrap();
    let pad = "y".repeat(9 << 20);
    let text = json!({"jsonrpc": "2.0", "id": 77, "method": "ping", "params": {"pad": pad}});
    let mut frame = Vec::new();
    push_text_frame(&mut frame, text.to_string().as_bytes());
    let mut w = c.stream.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    w.write_all(&frame).expect("the large message taken");
    let big = c.recv_json(WAIT).expect("the large answer");
    assert!(big["result"]["content"].is_array());
    let pong = c.recv_json(WAIT).expect("the ping's answer");
    assert_eq!(pong["id"], json!(77));
    drop((c, w));
    R::stop(s);
}

/// Sleep/resume: the engine's clock leaps an hour ahead (a laptop lid) while the peer is healthy;
/// the connection survives, probed by a ping, instead of being dropped as dead.
pub fn clock_jump<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.ping_interval = Duration::from_millis(400);
    let clock = o.clock.clone();
    let s = R::start(o).unwrap();
    let (mut c, conn) = client::<R>(&s);
    clock.jump(Duration::from_secs(3600));
    // Keep reading (answering pings) for several intervals.
    let until = Instant::now() + Duration::from_millis(2000);
    let mut pings = 0;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match c.recv_frame(left) {
            Some((9, payload)) => {
                pings += 1;
                c.send_frame(OpCode::Pong, &payload);
            }
            Some(_) => {}
            None => break,
        }
    }
    assert!(pings >= 2, "the server kept probing ({pings} pings)");
    assert!(
        R::handle(&s).connections().contains(&conn),
        "still connected"
    );
    assert_eq!(c.request("ping", json!({}))["result"], json!({}));
    R::stop(s);
}

/// A lock directory that other users can write to is refused (they could swap lock files).
pub fn lock_dir_wrong_permissions<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let ide = dir.path().join("ide");
    fs::create_dir(&ide).unwrap();
    set_mode(&ide, 0o777);
    let mut o = opts(dir.path());
    o.lock_file = LockFileMode::Dir(ide.clone());
    let err = R::start(o)
        .err()
        .expect("a world-writable lock directory is refused");
    assert!(
        err.to_string().contains("writable") || err.to_string().contains("permission"),
        "{err}"
    );
    assert_eq!(fs::read_dir(&ide).unwrap().count(), 0);
}

/// The host changes the offered tools while a client is connected: the client is told
/// `notifications/tools/list_changed`, `tools/list` shows the new set, and a withdrawn tool is
/// refused with -32602.
pub fn tools_changed_at_run_time<R: Rt>() {
    use claude_ide_bridge::{ToolName, ToolSet};
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let (mut c, _) = client::<R>(&s);
    R::handle(&s).set_tools(ToolSet::none().with(ToolName::OpenDiff));
    let n = c
        .recv_until(WAIT, |v| v["method"] == "notifications/tools/list_changed")
        .expect("list_changed");
    assert!(n.get("id").is_none());
    let list = c.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // The tools that close diffs come with openDiff.
    assert_eq!(names, ["openDiff", "close_tab", "closeAllDiffTabs"]);
    let id = c.call_tool("getDiagnostics", json!({}));
    assert_eq!(c.response(id)["error"]["code"], -32602);
    R::stop(s);
}

/// What [`HandlerRt::start_with`] shows every event to.
pub type Inspect = Box<dyn FnMut(&Event) -> Option<ToolResult> + Send>;

/// A host that does not read its events: once `MAX_HOST_BACKLOG` of them wait, the server stops
/// reading from the connection (its answers stop coming), and it goes on where it stopped once the
/// host has read them. `close_tab` is answered by the engine at once and gives the host an event.
/// Meanwhile no new socket is accepted: one that connects waits in the listen queue, past the
/// handshake timeout, and is upgraded once the host has caught up (each accepted one held a
/// thread or task and a descriptor, read nothing, and was dropped at its timeout: a peer
/// connecting over and over piled them up).
pub fn a_host_behind_pauses_reading<R: Rt>() {
    use claude_ide_bridge_runtime::MAX_HOST_BACKLOG;
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.handshake_timeout = Duration::from_secs(1);
    let s = R::start(o).unwrap();
    let (_, c) = connect(R::port(&s), Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    wait_event::<R>(&s, |e| matches!(e, Event::Initialized { .. }));
    let total = MAX_HOST_BACKLOG + 600;
    let names: Vec<String> = (0..total).map(|i| format!("t{i}")).collect();
    let calls: Vec<(&str, Value)> = names
        .iter()
        .map(|t| ("close_tab", json!({ "tab_name": t })))
        .collect();
    let (bytes, ids) = c.encode_tool_calls(&calls);
    // Written from another thread: the server stops reading part way.
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&bytes).unwrap());
    let mut answered = 0;
    while let Some(v) = c.recv_json(Duration::from_millis(700)) {
        assert_eq!(v["id"], json!(ids[answered]), "{v}");
        answered += 1;
    }
    // Paused: everything up to the backlog (and the rest of the read that reached it), not more.
    assert!(
        (MAX_HOST_BACKLOG..total).contains(&answered),
        "{answered} answered before the host read any event"
    );
    // A client connecting now waits, past the handshake timeout, neither answered nor dropped.
    let mut late = std::net::TcpStream::connect(("127.0.0.1", R::port(&s))).unwrap();
    late.write_all(upgrade_request(R::port(&s), Some(TOKEN)).as_bytes())
        .unwrap();
    late.set_read_timeout(Some(Duration::from_millis(2500)))
        .unwrap();
    let mut head = [0u8; 12];
    match late.read(&mut head) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("a socket connecting while the host is behind: {other:?}"),
    }
    // The host reads its events: the server reads again and answers the rest.
    let mut events = 0;
    let give_up = Instant::now() + Duration::from_secs(20);
    while events < total && Instant::now() < give_up {
        if let Some(Event::TabClosed { .. }) = R::event(&s, Duration::from_millis(50)) {
            events += 1;
        }
    }
    assert_eq!(events, total);
    while answered < total {
        let v = c.recv_json(WAIT).expect("the answers after the pause");
        assert_eq!(v["id"], json!(ids[answered]), "{v}");
        answered += 1;
    }
    writer.join().unwrap();
    late.set_read_timeout(Some(WAIT)).unwrap();
    late.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 101");
    R::stop(s);
}

/// A burst of calls read at once and answered by a host loop (`next_event`, then `respond`) while
/// the rest of the burst still waits for it: the runtimes leave those answers to the connection's
/// writer, to write them together. Every answer arrives, in order; one given while more events
/// wait arrives while the host is still busy (the writer does not wait for the host's next
/// answer); a call kept for later is answered later.
pub fn host_loop_answers_a_burst<R: Rt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start(opts(dir.path())).unwrap();
    let h = R::handle(&s);
    let (mut c, _) = client::<R>(&s);
    for round in 0..3 {
        let uris: Vec<String> = (0..8).map(|i| format!("file:///r{round}/{i}")).collect();
        let calls: Vec<(&str, Value)> = uris
            .iter()
            .map(|u| ("getDiagnostics", json!({ "uri": u })))
            .collect();
        let ids = c.call_tools_at_once(&calls);
        // The first answer, given while the rest of the burst waits for the host, which then takes
        // its time before the next event: the answer arrives meanwhile.
        let (first, _) = tool_call::<R>(&s);
        h.respond(first, ToolResult::text(uris[0].clone())).unwrap();
        let v = c
            .recv_json(WAIT)
            .expect("the first answer, host still busy");
        assert_eq!(v["id"], json!(ids[0]), "{v}");
        assert_eq!(texts(&v), [uris[0].as_str()]);
        // The rest at once, but the last one, kept for later in rounds 0 and 1.
        let mut kept = None;
        for (i, uri) in uris.iter().enumerate().skip(1) {
            let (call, tool) = tool_call::<R>(&s);
            assert!(
                matches!(&tool, ToolCall::GetDiagnostics(a) if a.uri.as_deref() == Some(uri.as_str())),
                "{tool:?}"
            );
            if i == 7 && round < 2 {
                kept = Some(call);
            } else {
                h.respond(call, ToolResult::text(uri.clone())).unwrap();
            }
        }
        let answered = if kept.is_some() { 7 } else { 8 };
        for (id, uri) in ids.iter().zip(&uris).take(answered).skip(1) {
            let v = c.recv_json(WAIT).expect("an answer of the burst");
            assert_eq!(v["id"], json!(id), "{v}");
            assert_eq!(texts(&v), [uri.as_str()]);
        }
        if let Some(call) = kept {
            assert!(c.recv_json(Duration::from_millis(100)).is_none());
            h.respond(call, ToolResult::text("later")).unwrap();
            let v = c.recv_json(WAIT).expect("the later answer");
            assert_eq!(v["id"], json!(ids[7]));
            assert_eq!(texts(&v), ["later"]);
        }
    }
    R::stop(s);
}

/// Runtimes whose events can go to a handler (`IdeServer::start_with_handler`).
pub trait HandlerRt: Rt {
    /// Starts with a handler that shows every event to `inspect` (on the thread or task that
    /// produced it): a tool call it returns a result for is answered there, through the handler's
    /// `&Handle`; every other event is forwarded to [`Rt::event`]. A panic in `inspect` loses
    /// the event.
    fn start_with(opts: Options, inspect: Inspect) -> std::io::Result<Self::S>;
}

/// A burst of calls read at once and answered by the handler is written in order (the runtimes
/// hold such answers to write them together), also when the burst ends with a call the handler
/// keeps for later, answered from another thread.
pub fn handler_answers_a_burst<R: HandlerRt>() {
    use claude_ide_bridge::GetDiagnosticsArgs;
    let dir = tempfile::tempdir().unwrap();
    let s = R::start_with(
        opts(dir.path()),
        Box::new(|e| match e {
            Event::ToolCall {
                tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri: Some(u) }),
                ..
            } if u.starts_with("file:///now/big/") => Some(ToolResult::text(u.repeat(400))),
            Event::ToolCall {
                tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri: Some(u) }),
                ..
            } if u.starts_with("file:///now/") => Some(ToolResult::text(u.clone())),
            _ => None,
        }),
    )
    .unwrap();
    let h = R::handle(&s);
    let (_, c) = connect(R::port(&s), Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    wait_event::<R>(&s, |e| matches!(e, Event::Initialized { .. }));
    let text = |v: &Value| {
        v["result"]["content"][0]["text"]
            .as_str()
            .map(str::to_owned)
    };
    for round in 0..3 {
        let now: Vec<String> = (0..7).map(|i| format!("file:///now/{round}/{i}")).collect();
        let mut calls: Vec<(&str, Value)> = now
            .iter()
            .map(|u| ("getDiagnostics", json!({ "uri": u })))
            .collect();
        // Rounds 0 and 1 end the burst with a call kept for later; round 2 is all answered at once.
        if round < 2 {
            calls.push(("getDiagnostics", json!({"uri": "file:///later"})));
        }
        let ids = c.call_tools_at_once(&calls);
        for (id, uri) in ids.iter().zip(&now) {
            let v = c.recv_json(WAIT).expect("an answer of the burst");
            assert_eq!(v["id"], json!(id), "{v}");
            assert_eq!(text(&v).as_deref(), Some(uri.as_str()));
        }
        if round < 2 {
            let call = match wait_event::<R>(&s, |e| matches!(e, Event::ToolCall { .. })) {
                Event::ToolCall { call, .. } => call,
                _ => unreachable!(),
            };
            assert!(c.recv_json(Duration::from_millis(100)).is_none());
            h.respond(call, ToolResult::text("later")).unwrap();
            let v = c.recv_json(WAIT).expect("the later answer");
            assert_eq!(v["id"], json!(ids[7]));
            assert_eq!(text(&v).as_deref(), Some("later"));
        }
    }
    // A burst longer than the runtimes hold at once (64 events), with answers of about 8 KiB each
    // (more than the 64 KiB held for one connection): all of them, in order.
    let big: Vec<String> = (0..80).map(|i| format!("file:///now/big/{i:02}")).collect();
    let calls: Vec<(&str, Value)> = big
        .iter()
        .map(|u| ("getDiagnostics", json!({ "uri": u })))
        .collect();
    let ids = c.call_tools_at_once(&calls);
    for (id, uri) in ids.iter().zip(&big) {
        let v = c.recv_json(WAIT).expect("an answer of the long burst");
        assert_eq!(v["id"], json!(id), "{v}");
        assert_eq!(text(&v), Some(uri.repeat(400)));
    }
    R::stop(s);
}

/// A reader that began delivering (its own call) while another peer keeps sending calls does not
/// deliver that peer's calls for as long as they come: it hands them over after a while and goes
/// back to its own socket, whose requests are answered. Before, it delivered the flood until it
/// stopped, and its own peer went unread (dropped as silent after 60 s). For runtimes whose
/// readers run at the same time (the blocking one: on smol's one executor thread a handler that
/// takes its time holds up every task anyway).
pub fn a_flood_of_calls_does_not_keep_another_reader_delivering<R: HandlerRt>() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(AtomicBool::new(false));
    let open = gate.clone();
    let s = R::start_with(
        opts(dir.path()),
        Box::new(move |e| {
            let Event::ToolCall {
                tool: ToolCall::GetDiagnostics(args),
                ..
            } = e
            else {
                return None;
            };
            match args.uri.as_deref() {
                Some("file:///gate") => {
                    let until = Instant::now() + Duration::from_secs(10);
                    while !open.load(Relaxed) && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Some(ToolResult::text("gate"))
                }
                _ => {
                    std::thread::sleep(Duration::from_millis(2));
                    Some(ToolResult::text("slow"))
                }
            }
        }),
    )
    .unwrap();
    let (mut b, _) = client::<R>(&s);
    let (a, _) = client::<R>(&s);
    // B's reader delivers B's call, held in the handler until A's calls wait behind it.
    let gate_id = b.call_tool("getDiagnostics", json!({"uri": "file:///gate"}));
    std::thread::sleep(Duration::from_millis(200));
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        let mut a = a;
        std::thread::spawn(move || {
            let calls = vec![("getDiagnostics", json!({"uri": "file:///slow"})); 100];
            let until = Instant::now() + Duration::from_secs(20);
            while !stop.load(Relaxed) && Instant::now() < until {
                let (out, _) = a.encode_tool_calls(&calls);
                if std::io::Write::write_all(&mut a.stream, &out).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    gate.store(true, Relaxed);
    let started = Instant::now();
    let gated = b.response(gate_id);
    assert_eq!(texts(&gated), ["gate"]);
    let pong = b.request("ping", json!({}));
    let answered = started.elapsed();
    stop.store(true, Relaxed);
    flood.join().unwrap();
    assert_eq!(pong["result"], json!({}));
    assert!(answered < WAIT, "B's ping answered after {answered:?}");
    // A's last calls (at most the 256 pending) answered before the stop cancels them.
    std::thread::sleep(Duration::from_millis(1500));
    R::stop(s);
}

/// Once stopped, a server whose handler answered calls is freed, handler included: the handle
/// the runtime keeps for its handler between deliveries (it points back at the server) is dropped
/// when the server stops.
pub fn a_stopped_server_is_freed<R: HandlerRt>() {
    let dir = tempfile::tempdir().unwrap();
    let (s, watch, mut c) = serving_with_a_token::<R>(dir.path());
    for _ in 0..3 {
        let id = c.call_tool("getDiagnostics", json!({}));
        assert_eq!(c.response(id)["result"]["content"][0]["text"], "[]");
    }
    drop(c);
    R::stop(s);
    assert!(
        freed(&watch),
        "the server (and its handler) outlived its stop"
    );
}

/// A server whose handler holds a token (answering tool calls with `[]`), a watch on the token,
/// and an initialized client.
fn serving_with_a_token<R: HandlerRt>(dir: &Path) -> (R::S, std::sync::Weak<()>, Client) {
    let token = std::sync::Arc::new(());
    let watch = std::sync::Arc::downgrade(&token);
    let s = R::start_with(
        opts(dir),
        Box::new(move |e| {
            let _kept = &token;
            matches!(e, Event::ToolCall { .. }).then(|| ToolResult::text("[]"))
        }),
    )
    .unwrap();
    let (_, c) = connect(R::port(&s), Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    (s, watch, c)
}

/// Whether the watched token is dropped within 5 s.
fn freed(watch: &std::sync::Weak<()>) -> bool {
    (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        watch.upgrade().is_none()
    })
}

/// The host's logger is called without the server's lock held: a logger that looks at the
/// server through a `Handle` (or blocks on a stderr nobody reads) holds nothing up. It was called
/// under the lock, and this deadlocked on the first connection's log line.
pub fn a_logger_may_call_the_server<R: Rt>() {
    use std::sync::{Arc, Mutex, OnceLock};
    let dir = tempfile::tempdir().unwrap();
    let handle: Arc<OnceLock<Handle>> = Arc::new(OnceLock::new());
    let seen = Arc::new(Mutex::new(Vec::<(String, usize)>::new()));
    let mut o = opts(dir.path());
    let (h, lines) = (handle.clone(), seen.clone());
    o.logger = Some(claude_ide_bridge_runtime::Logger::new(move |line| {
        let live = h.get().map_or(0, |h| h.connections().len());
        lines.lock().unwrap().push((line.to_owned(), live));
    }));
    let s = R::start(o).unwrap();
    let _ = handle.set(R::handle(&s));
    let (_, c) = connect(R::port(&s), Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    let id = c.call_tool("getWorkspaceFolders", json!({}));
    let call = wait_event::<R>(&s, |e| matches!(e, Event::ToolCall { .. }));
    if let Event::ToolCall { call, .. } = call {
        R::handle(&s).respond(call, ToolResult::text("[]")).unwrap();
    }
    c.response(id);
    let lines = seen.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|(l, live)| l.contains("connected") && *live == 1),
        "{lines:?}"
    );
    R::stop(s);
}

/// A stopped server drops its handler, and what the handler holds, though the host keeps a
/// `Handle` (to answer diffs later, say): a handler that forwards events to a channel must let
/// the host's receiving loop end, as `next_event` ends.
pub fn a_stopped_server_drops_its_handler_while_a_handle_lives<R: HandlerRt>() {
    let dir = tempfile::tempdir().unwrap();
    let (s, watch, mut c) = serving_with_a_token::<R>(dir.path());
    let kept = R::handle(&s);
    let id = c.call_tool("getDiagnostics", json!({}));
    assert_eq!(c.response(id)["result"]["content"][0]["text"], "[]");
    R::stop(s);
    assert!(
        freed(&watch),
        "the handler outlived the stop while a Handle lived"
    );
    // The handle still answers, as a stopped server's handle does.
    assert_eq!(kept.connections().len(), 0);
}

/// A server dropped without `stop` still says goodbye: the pending `openDiff` is answered
/// `DIFF_REJECTED` and the client gets its Close (1001), as `stop` does, on both runtimes.
pub fn a_dropped_server_says_goodbye<R: HandlerRt>() {
    let dir = tempfile::tempdir().unwrap();
    let s = R::start_with(opts(dir.path()), Box::new(|_| None)).unwrap();
    let (mut c, id) = a_diff_waiting(R::port(&s), dir.path());
    wait_event::<R>(&s, |e| matches!(e, Event::ToolCall { .. }));
    drop(s);
    answered_rejected(&mut c, id);
    let mut close = None;
    let give_up = Instant::now() + WAIT;
    while let Some(left) = give_up.checked_duration_since(Instant::now()) {
        match c.recv_frame(left) {
            Some((8, payload)) => {
                close = Some(payload);
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    let close = close.expect("a Close frame before the socket closed");
    assert_eq!(close_code(&close), Some(1001), "{close:?}");
}

/// A handler that panics loses that event only: the acceptor, the connection's reader and the
/// timer carry on, and later events are delivered (both runtimes promise this). A call it
/// panicked on is answered as failed (a tool error; -32603 for a compatibility request): it was
/// left pending, its client waiting for it until its own timeout.
pub fn a_panicking_handler_stalls_nothing<R: HandlerRt>() {
    use claude_ide_bridge::{CompatRequest, GetDiagnosticsArgs};
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.compat_methods = true;
    // Long enough that the panics' own reports (with RUST_BACKTRACE=1, symbolizing a backtrace on
    // the thread that delivers the event can take hundreds of ms on a loaded machine) do not hold
    // the connection's reader past two intervals before the test gets to its calls.
    o.limits = Limits {
        ping_interval: Duration::from_millis(1000),
        ..Limits::default()
    };
    let mut first_connected = true;
    let mut first_timeout = true;
    let s = R::start_with(
        o,
        Box::new(move |e| match e {
            Event::Connected { .. } if std::mem::take(&mut first_connected) => {
                panic!("test panic on the first connection")
            }
            Event::ToolCall {
                tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri: Some(u) }),
                ..
            } if u == "file:///panic" => panic!("test panic on a call"),
            Event::CompatRequest {
                request: CompatRequest::WorkspaceSelection,
                ..
            } => panic!("test panic on a compatibility request"),
            Event::Disconnected {
                reason: DisconnectReason::PingTimeout,
                ..
            } if std::mem::take(&mut first_timeout) => panic!("test panic on a timeout"),
            _ => None,
        }),
    )
    .unwrap();
    let h = R::handle(&s);

    // The task or thread that announced the first connection survives its panic.
    let (_, a) = connect(R::port(&s), Some(TOKEN));
    let mut a = a.unwrap();
    a.init();
    wait_event::<R>(&s, |e| matches!(e, Event::Initialized { .. }));

    // The connection survives the panic on a call, which is answered as failed; the next call is
    // delivered and answered.
    let panicked = a.call_tool("getDiagnostics", json!({"uri": "file:///panic"}));
    let id = a.call_tool("getDiagnostics", json!({"uri": "file:///fine"}));
    let failed = a.response(panicked);
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert_eq!(
        failed["result"]["content"][0]["text"],
        "the IDE failed while handling this call"
    );
    let call = match wait_event::<R>(&s, |e| matches!(e, Event::ToolCall { .. })) {
        Event::ToolCall {
            call,
            tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri }),
        } => {
            assert_eq!(uri.as_deref(), Some("file:///fine"));
            call
        }
        e => panic!("{e:?}"),
    };
    h.respond(call, ToolResult::text("ok")).unwrap();
    assert_eq!(a.response(id)["result"]["content"][0]["text"], "ok");
    let failed = a.request("workspace/selection", json!({}));
    assert_eq!(failed["error"]["code"], -32603, "{failed}");

    // A second connection is accepted and announced.
    let (_, b) = connect(R::port(&s), Some(TOKEN));
    let _b = b.unwrap();
    wait_event::<R>(&s, |e| matches!(e, Event::Connected { .. }));

    // Neither client answers pings: both time out, from the timer. The first timeout's event
    // panics; the second is delivered.
    wait_event::<R>(&s, |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::PingTimeout,
                ..
            }
        )
    });
    assert!(h.connections().is_empty());
    R::stop(s);
}

/// A handler that never returns while the server stops (it waits for something only the stopping
/// thread or task would do): the stop still returns, the lock file gone, leaving that handler to
/// end on its own. `start` starts a server with `opts` whose handler calls the given function with
/// each event, and gives its port and lock file; `stop` stops it and returns when the stop does.
pub fn a_handler_that_does_not_return_does_not_hold_the_stop<S: Send + 'static>(
    start: impl FnOnce(Options, Box<dyn FnMut(&Event) + Send>) -> (S, u16, PathBuf),
    stop: impl FnOnce(S) + Send + 'static,
) {
    use std::sync::{mpsc, Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let (release, held) = mpsc::channel::<()>();
    let held = Arc::new(Mutex::new(held));
    let (in_handler, entered) = mpsc::channel();
    let (server, port, lock) = start(
        opts(dir.path()),
        Box::new(move |e| {
            if let Event::ToolCall { .. } = e {
                let _ = in_handler.send(());
                let _ = held.lock().unwrap().recv();
            }
        }),
    );
    let (_, c) = connect(port, Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    c.call_tool("getDiagnostics", json!({}));
    entered.recv_timeout(Duration::from_secs(20)).unwrap();
    let (stopped, stop_returned) = mpsc::channel();
    std::thread::spawn(move || {
        stop(server);
        let _ = stopped.send(());
    });
    let returned = stop_returned.recv_timeout(Duration::from_secs(30));
    let _ = release.send(());
    returned.expect("the stop returned");
    assert!(!lock.exists());
}

/// A handler kept waiting (the host waits for room in its own queue: a `--stdio` editor that
/// does not read) while its client answers every Ping: the client is not dropped as silent,
/// although the thread that would read its Pongs is the one delivering (its Pongs wait unread).
/// It was dropped as `ping_timeout` after two intervals. `start` and `stop` as in
/// [`a_handler_that_does_not_return_does_not_hold_the_stop`].
pub fn a_handler_kept_waiting_does_not_cost_its_client_the_connection<S: Send + 'static>(
    start: impl FnOnce(Options, Box<dyn FnMut(&Event) + Send>) -> (S, u16, PathBuf),
    stop: impl FnOnce(S) + Send + 'static,
) {
    use std::sync::mpsc;
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.limits.ping_interval = Duration::from_millis(1000);
    let (in_handler, entered) = mpsc::channel();
    let (server, port, _lock) = start(
        o,
        Box::new(move |e| {
            if let Event::ToolCall { .. } = e {
                let _ = in_handler.send(());
                std::thread::sleep(Duration::from_millis(4500));
            }
        }),
    );
    let (_, c) = connect(port, Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    c.call_tool("getDiagnostics", json!({}));
    entered.recv_timeout(Duration::from_secs(20)).unwrap();
    // Past two intervals of the handler's wait, answering every Ping.
    let until = Instant::now() + Duration::from_millis(5000);
    let mut closed = false;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match c.recv_frame(left) {
            Some((9, payload)) => c.send_frame(OpCode::Pong, &payload),
            Some((8, _)) => {
                closed = true;
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    assert!(!closed, "dropped while its handler was kept waiting");
    assert_eq!(c.request("ping", json!({}))["result"], json!({}));
    stop(server);
}

/// A host that stops the server while holding a lock its handler takes (the editor's state, the
/// server kept in it): the stop returns, the pending diff answered `DIFF_REJECTED` and the lock
/// file gone (from the stop's start, not its end), and the handler still gets the call's cancellation, from another thread once the
/// host lets go. The stopping thread delivered it itself before, and the handler waited on the
/// lock its own thread held: the stop never returned, and the lock file stayed. `start` and
/// `stop` as in [`a_handler_that_does_not_return_does_not_hold_the_stop`].
pub fn a_stop_under_the_handlers_lock_returns<S: Send + 'static>(
    start: impl FnOnce(Options, Box<dyn FnMut(&Event) + Send>) -> (S, u16, PathBuf),
    stop: impl FnOnce(S) + Send + 'static,
) {
    use std::sync::{mpsc, Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    // The editor's state: what the handler saw, and on which thread.
    let editor = Arc::new(Mutex::new(Vec::<(String, std::thread::ThreadId)>::new()));
    let seen = Arc::clone(&editor);
    let (server, port, lock) = start(
        opts(dir.path()),
        Box::new(move |e| {
            let what = match e {
                Event::ToolCall { .. } => "call".to_owned(),
                Event::CallCancelled { reason, .. } => format!("cancelled {reason:?}"),
                _ => return,
            };
            seen.lock()
                .unwrap()
                .push((what, std::thread::current().id()));
        }),
    );
    let (mut c, id) = a_diff_waiting(port, dir.path());
    let give_up = Instant::now() + WAIT;
    while editor.lock().unwrap().is_empty() {
        assert!(Instant::now() < give_up, "the handler never saw the call");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (stopped, stop_returned) = mpsc::channel();
    let (stopping, stop_began) = mpsc::channel();
    let held = Arc::clone(&editor);
    let stopper = std::thread::spawn(move || {
        let guard = held.lock().unwrap();
        let _ = stopping.send(Instant::now());
        stop(server);
        let _ = stopped.send(());
        drop(guard);
        std::thread::current().id()
    });
    // The lock file goes first, not after the wait for the clients' Close (this client sends
    // none: the stop waits its whole grace): no claude finds a server that is stopping.
    let began = stop_began.recv_timeout(WAIT).expect("the stop began");
    let give_up = Instant::now() + Duration::from_secs(30);
    while lock.exists() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    let gone_after = began.elapsed();
    assert!(
        gone_after < claude_ide_bridge_runtime::STOP_GRACE,
        "the lock file was there through the stop's grace ({gone_after:?})"
    );
    let returned = stop_returned.recv_timeout(Duration::from_secs(30));
    returned.expect("the stop returned while its thread held the handler's lock");
    let stopping_thread = stopper.join().unwrap();
    assert!(!lock.exists(), "the lock file is gone");
    answered_rejected(&mut c, id);
    // The cancellation reaches the handler once the host let go, on another thread.
    let give_up = Instant::now() + WAIT;
    loop {
        let seen = editor.lock().unwrap().clone();
        if let Some((_, thread)) = seen.iter().find(|(w, _)| w.contains("ServerStopped")) {
            assert_ne!(*thread, stopping_thread, "delivered by the stopping thread");
            break;
        }
        assert!(
            Instant::now() < give_up,
            "no cancellation delivered: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every call a stop cancels reaches the handler (`CancelReason::ServerStopped`), a slow one too,
/// however the server is stopped: an editor closes the diffs' tabs that claude was told were
/// rejected. The events queued when the stop closed the sockets were dropped, with the handler:
/// smol's drop left the handler none of them, and a stop whose clients closed at once left one
/// that takes a while (here 100 ms an event) only the first. `start` and `stop` as in
/// [`a_handler_that_does_not_return_does_not_hold_the_stop`].
pub fn every_call_a_stop_cancels_reaches_the_handler<S: Send + 'static>(
    start: impl FnOnce(Options, Box<dyn FnMut(&Event) + Send>) -> (S, u16, PathBuf),
    stop: impl FnOnce(S) + Send + 'static,
) {
    use std::sync::{Arc, Mutex};
    const DIFFS: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let told = Arc::clone(&seen);
    let (server, port, _) = start(
        opts(dir.path()),
        Box::new(move |e| match e {
            Event::ToolCall { .. } => told.lock().unwrap().push("call".into()),
            Event::CallCancelled { reason, .. } => {
                told.lock().unwrap().push(format!("cancelled {reason:?}"));
                // The editor closes the diff's tab.
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => {}
        }),
    );
    let mut waiting: Vec<(Client, u64)> = (0..DIFFS)
        .map(|i| a_diff_waiting_for(port, &dir.path().join(format!("{i}.rs"))))
        .collect();
    let give_up = Instant::now() + WAIT;
    while seen.lock().unwrap().len() < DIFFS {
        assert!(Instant::now() < give_up, "the handler never saw the calls");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopping = std::thread::spawn(move || stop(server));
    // Each client takes its answer and goes, as claude does at a Close: the stop's wait for
    // them ends at once.
    for (c, id) in &mut waiting {
        answered_rejected(c, *id);
    }
    drop(waiting);
    crate::joined(stopping, WAIT, "the stop");
    let give_up = Instant::now() + WAIT;
    loop {
        let seen = seen.lock().unwrap().clone();
        let cancelled = seen.iter().filter(|w| w.contains("ServerStopped")).count();
        if cancelled == DIFFS {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "{cancelled} of {DIFFS} cancellations delivered: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A client of the server on `port`, initialized, with an `openDiff` of `dir/a.rs` it called
/// (left to the host); its id.
fn a_diff_waiting(port: u16, dir: &Path) -> (Client, u64) {
    a_diff_waiting_for(port, &dir.join("a.rs"))
}

/// [`a_diff_waiting`] for `file`, in a tab named after it.
fn a_diff_waiting_for(port: u16, file: &Path) -> (Client, u64) {
    let (_, c) = connect(port, Some(TOKEN));
    let mut c = c.unwrap();
    c.init();
    let id = c.call_tool(
        "openDiff",
        json!({"old_file_path": file, "new_file_path": file,
               "new_file_contents": "x", "tab_name": file.file_name().map(|n| n.to_string_lossy())}),
    );
    (c, id)
}

/// The pending diff `id` of client `c` is answered as a stop answers it by default: a tool
/// error saying nobody decided (not `DIFF_REJECTED`, the user's no).
fn answered_rejected(c: &mut Client, id: u64) {
    let answer = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("the pending diff answered");
    assert_undecided_at_stop(&answer);
}

/// `answer`, to an `openDiff` pending at a stop with the default options: a tool error saying the
/// IDE stopped before the change was decided.
pub fn assert_undecided_at_stop(answer: &Value) {
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.contains("stopped before the change was decided"),
        "{answer}"
    );
}
