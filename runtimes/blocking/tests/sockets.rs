//! The shared scenarios over real loopback sockets, through the blocking runtime.

use claude_ide_bridge_testsupport::{client, scenarios};

use std::path::PathBuf;
use std::time::Duration;

use claude_ide_bridge::Event;
use claude_ide_bridge_blocking::{Handle, IdeServer, Options};
use scenarios::Rt;

struct Blocking;

impl Rt for Blocking {
    type S = IdeServer;
    fn start(opts: Options) -> std::io::Result<IdeServer> {
        IdeServer::start(opts)
    }
    fn port(s: &IdeServer) -> u16 {
        assert_eq!(s.handle().port(), s.port());
        s.local_addr().port()
    }
    fn lock_path(s: &IdeServer) -> Option<PathBuf> {
        s.lock_path().map(|p| p.to_path_buf())
    }
    fn handle(s: &IdeServer) -> Handle {
        s.handle()
    }
    fn event(s: &IdeServer, timeout: Duration) -> Option<Event> {
        s.next_event_timeout(timeout)
    }
    fn stop(s: IdeServer) {
        s.stop()
    }
}

claude_ide_bridge_testsupport::socket_scenarios!(Blocking);

// Unix signals. Windows' console events (Ctrl-C, Ctrl-Break, close) have no test yet
// (docs/platforms.md).
#[cfg(unix)]
#[test]
fn sigterm_removes_lock() {
    scenarios::sigterm_removes_lock("sigterm_child");
}

#[cfg(unix)]
#[test]
fn sigint_removes_lock() {
    scenarios::signal_removes_lock("sigterm_child", "-INT");
}

#[test]
fn try_next_event_and_stop_with_pending_diff() {
    let dir = tempfile::tempdir().unwrap();
    let s = IdeServer::start(scenarios::opts(dir.path())).unwrap();
    assert!(s.try_next_event().is_none());
    let shown = format!("{s:?} {:?}", s.stopper());
    assert!(shown.contains(&format!("port: {}", s.port())), "{shown}");
    assert!(!shown.contains(scenarios::TOKEN), "{shown}");
    let (_, c) = client::connect(s.port(), Some(scenarios::TOKEN));
    let mut c = c.unwrap();
    c.init();
    scenarios::wait_event::<Blocking>(&s, |e| matches!(e, Event::Initialized { .. }));
    let id = c.call_tool(
        "openDiff",
        serde_json::json!({"old_file_path": "/w/a", "new_file_path": "/w/a",
                           "new_file_contents": "x", "tab_name": "t"}),
    );
    scenarios::wait_event::<Blocking>(&s, |e| matches!(e, Event::ToolCall { .. }));
    let stopper = std::thread::spawn(move || s.stop());
    let resp = c.response(id);
    scenarios::assert_undecided_at_stop(&resp);
    assert!(c.closed_within(Duration::from_secs(3)));
    claude_ide_bridge_testsupport::joined(stopper, Duration::from_secs(20), "the stop");
}

/// A host that waits with a timeout (it has periodic work of its own) tells "nothing yet" from
/// "stopped" by `is_stopped`: after a `Stopper`, `next_event_timeout` and `try_next_event`
/// answer `None` at once, and a loop on `is_stopped` ends instead of spinning.
#[test]
fn is_stopped_ends_a_loop_that_waits_with_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let s = IdeServer::start(scenarios::opts(dir.path())).unwrap();
    assert!(!s.is_stopped());
    assert!(s.next_event_timeout(Duration::from_millis(20)).is_none());
    assert!(!s.is_stopped(), "a timeout is not a stop");
    let stopper = s.stopper();
    // What a host's UI thread holds: it tells the stop too.
    let handle = s.handle();
    assert!(!handle.is_stopped());
    let reader = std::thread::spawn(move || {
        let mut turns = 0u64;
        while !s.is_stopped() {
            let _ = s.next_event_timeout(Duration::from_millis(20));
            turns += 1;
        }
        assert!(s.try_next_event().is_none());
        s.stop();
        turns
    });
    std::thread::sleep(Duration::from_millis(200));
    stopper.stop();
    let turns =
        claude_ide_bridge_testsupport::joined(reader, Duration::from_secs(20), "the host's loop");
    // About one turn per timeout while running (200 ms / 20 ms), none after.
    assert!(turns < 100, "{turns} turns: the loop did not wait");
    assert!(handle.is_stopped());
    let moved = handle.set_workspace_folders(vec![dir.path().to_path_buf()]);
    assert_eq!(
        moved.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::NotConnected),
        "no lock file is rewritten after the stop"
    );
}

/// A `Stopper` stops the server from another thread while one waits in `next_event` (which has
/// no timeout: nothing polls): the wait ends with `None`, the pending diff is rejected, the lock
/// file is gone, and `stop` afterwards joins the threads and gives the port back.
#[test]
fn a_stopper_ends_a_wait_in_next_event() {
    let dir = tempfile::tempdir().unwrap();
    let s = IdeServer::start(scenarios::opts(dir.path())).unwrap();
    let port = s.port();
    let lock = s.lock_path().unwrap().to_path_buf();
    let (_, c) = client::connect(port, Some(scenarios::TOKEN));
    let mut c = c.unwrap();
    c.init();
    let stopper = s.stopper();
    let (seen_tx, seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut calls = 0;
        while let Some(e) = s.next_event() {
            if matches!(e, Event::ToolCall { .. }) {
                calls += 1;
                let _ = seen_tx.send(());
            }
        }
        s.stop();
        calls
    });
    let id = c.call_tool(
        "openDiff",
        serde_json::json!({"old_file_path": "/w/a", "new_file_path": "/w/a",
                           "new_file_contents": "x", "tab_name": "t"}),
    );
    seen.recv_timeout(Duration::from_secs(10)).unwrap();
    stopper.stop();
    assert!(!lock.exists(), "the lock file outlived the stop");
    let resp = c.response(id);
    scenarios::assert_undecided_at_stop(&resp);
    assert!(c.closed_within(Duration::from_secs(3)));
    let calls =
        claude_ide_bridge_testsupport::joined(reader, Duration::from_secs(20), "next_event");
    assert_eq!(calls, 1);
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port was given back");
    // A second stop does nothing.
    stopper.stop();
}

/// A `Stopper` closes the port at once, not when the `IdeServer` is stopped or dropped later: a
/// handle on the listener kept to wake the acceptor held it open, and a client connecting then
/// was taken into its queue and waited for an answer that never came.
#[test]
fn a_stopper_closes_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let s = IdeServer::start(scenarios::opts(dir.path())).unwrap();
    let port = s.port();
    s.stopper().stop();
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let at = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        match std::net::TcpStream::connect_timeout(&at, Duration::from_secs(1)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            other => assert!(
                std::time::Instant::now() < give_up,
                "the port still takes connections after the stop: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    s.stop();
}
