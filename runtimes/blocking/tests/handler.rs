//! The shared scenarios through the blocking runtime with events handed to a handler
//! (`IdeServer::start_with_handler`) that forwards them to the test, and a handler that answers
//! calls itself, on the reader thread.

#[path = "../../testsupport/client.rs"]
mod client;
#[path = "../../testsupport/scenarios.rs"]
mod scenarios;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use claude_ide_bridge::{ApiError, CallId, ConnectionId, Event, Notification, Target, ToolResult};
use claude_ide_bridge_blocking::{Handle, IdeServer, Options};
use scenarios::Rt;

struct Forwarded {
    server: IdeServer,
    events: mpsc::Receiver<Event>,
}

struct WithHandler;

impl Rt for WithHandler {
    type S = Forwarded;
    type H = Handle;
    fn start(opts: Options) -> std::io::Result<Forwarded> {
        let (tx, events) = mpsc::channel();
        let server = IdeServer::start_with_handler(opts, move |e, _| {
            let _ = tx.send(e);
        })?;
        assert!(server.try_next_event().is_none());
        Ok(Forwarded { server, events })
    }
    fn port(s: &Forwarded) -> u16 {
        s.server.port()
    }
    fn lock_path(s: &Forwarded) -> Option<PathBuf> {
        s.server.lock_path().map(|p| p.to_path_buf())
    }
    fn handle(s: &Forwarded) -> Handle {
        s.server.handle()
    }
    fn event(s: &Forwarded, timeout: Duration) -> Option<Event> {
        s.events.recv_timeout(timeout).ok()
    }
    fn stop(s: Forwarded) {
        s.server.stop()
    }
    fn respond(h: &Handle, call: CallId, r: ToolResult) -> Result<(), ApiError> {
        h.respond(call, r)
    }
    fn notify(h: &Handle, t: Target, n: &Notification) -> usize {
        h.notify(t, n)
    }
    fn connections(h: &Handle) -> Vec<ConnectionId> {
        h.connections()
    }
    fn set_folders(h: &Handle, f: Vec<PathBuf>) -> std::io::Result<()> {
        h.set_workspace_folders(f)
    }
    fn set_tools(h: &Handle, t: claude_ide_bridge::ToolSet) {
        h.set_tools(t)
    }
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(#[test] fn $name() { scenarios::$name::<WithHandler>(); })*
    };
}

scenarios!(
    handshake_token,
    mcp_lifecycle,
    tools_changed_at_run_time,
    deferred_open_diff,
    cancel_and_disconnect,
    notify_one_and_all,
    eleventh_refused,
    slow_reader,
    slow_caller,
    dead_peer,
    vanish_mid_frame,
    vanish_mid_open_diff,
    slowloris,
    clock_jump,
);

/// The handler answers every call itself and, re-entering the server through the handle it is
/// given, sends a notification first: both arrive, in order.
#[test]
fn handler_answers_on_the_reader_thread() {
    let dir = tempfile::tempdir().unwrap();
    let server = IdeServer::start_with_handler(scenarios::opts(dir.path()), |e, handle| {
        if let Event::ToolCall { call, .. } = e {
            let n = handle.notify(Target::All, &Notification::AtMentioned(at_mention()));
            assert_eq!(n, 1);
            handle
                .respond(
                    call,
                    ToolResult::text(format!("answered on {:?}", std::thread::current().name())),
                )
                .unwrap();
        }
    })
    .unwrap();
    let (_, c) = client::connect(server.port(), Some(scenarios::TOKEN));
    let mut c = c.unwrap();
    c.init();
    for _ in 0..100 {
        let id = c.call_tool("getDiagnostics", serde_json::json!({}));
        let note = c.recv_json(Duration::from_secs(5)).unwrap();
        assert_eq!(note["method"], "at_mentioned");
        let resp = c.response(id);
        let text = resp["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("ide-bridge-read-"), "{text}");
    }
    server.stop();
}

fn at_mention() -> claude_ide_bridge::notify::AtMentioned {
    claude_ide_bridge::notify::AtMentioned {
        file_path: "/w/a.rs".into(),
        line_start: None,
        line_end: None,
    }
}

/// A handler that panics loses that event only: the acceptor, the connection's reader and the
/// timer threads carry on (the same contract as the smol runtime).
#[test]
fn a_panicking_handler_stalls_nothing() {
    use claude_ide_bridge::tools::GetDiagnosticsArgs;
    use claude_ide_bridge::{DisconnectReason, Limits, ToolCall};
    use serde_json::json;

    const WAIT: Duration = Duration::from_secs(5);
    let dir = tempfile::tempdir().unwrap();
    let mut o = scenarios::opts(dir.path());
    o.limits = Limits {
        ping_interval: Duration::from_millis(150),
        ..Limits::default()
    };
    let (tx, events) = mpsc::channel();
    let mut first_connected = true;
    let mut first_timeout = true;
    let server = IdeServer::start_with_handler(o, move |e, _| match &e {
        Event::Connected { .. } if std::mem::take(&mut first_connected) => {
            panic!("test panic on the first connection")
        }
        Event::ToolCall {
            tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri: Some(u) }),
            ..
        } if u == "file:///panic" => panic!("test panic on a call"),
        Event::Disconnected {
            reason: DisconnectReason::PingTimeout,
            ..
        } if std::mem::take(&mut first_timeout) => panic!("test panic on a timeout"),
        _ => {
            let _ = tx.send(e);
        }
    })
    .unwrap();
    let next = |pred: &dyn Fn(&Event) -> bool| loop {
        let e = events.recv_timeout(WAIT).expect("an event");
        if pred(&e) {
            return e;
        }
    };
    let handle = server.handle();

    // The acceptor survives the panic on the first Connected.
    let (_, a) = client::connect(server.port(), Some(scenarios::TOKEN));
    let mut a = a.unwrap();
    a.init();
    next(&|e| matches!(e, Event::Initialized { .. }));

    // The reader thread survives the panic on a call: the next call is delivered and answered.
    a.call_tool("getDiagnostics", json!({"uri": "file:///panic"}));
    let id = a.call_tool("getDiagnostics", json!({"uri": "file:///fine"}));
    let call = match next(&|e| matches!(e, Event::ToolCall { .. })) {
        Event::ToolCall {
            call,
            tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri }),
        } => {
            assert_eq!(uri.as_deref(), Some("file:///fine"));
            call
        }
        e => panic!("{e:?}"),
    };
    handle.respond(call, ToolResult::text("ok")).unwrap();
    assert_eq!(a.response(id)["result"]["content"][0]["text"], "ok");

    // A second connection is accepted and announced.
    let (_, b) = client::connect(server.port(), Some(scenarios::TOKEN));
    let _b = b.unwrap();
    next(&|e| matches!(e, Event::Connected { .. }));

    // Neither client answers pings: both time out, from the timer thread. The first timeout's
    // event panics; the second is delivered.
    let e = next(&|e| matches!(e, Event::Disconnected { .. }));
    assert!(matches!(
        e,
        Event::Disconnected {
            reason: DisconnectReason::PingTimeout,
            ..
        }
    ));
    assert!(handle.connections().is_empty());
    server.stop();
}
