//! The shared scenarios over real loopback sockets, through the smol runtime.

use claude_ide_bridge_testsupport::{client, scenarios};

use std::path::PathBuf;
use std::time::Duration;

use async_io::Timer;
use claude_ide_bridge::{Event, ToolResult};
use claude_ide_bridge_smol::{Handle, IdeServer, Options};
use futures_lite::future;
use scenarios::Rt;

struct Smol;

impl Rt for Smol {
    type S = IdeServer;
    fn start(opts: Options) -> std::io::Result<IdeServer> {
        smol::block_on(IdeServer::start(opts))
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
        smol::block_on(future::or(s.next_event(), async {
            Timer::after(timeout).await;
            None
        }))
    }
    fn stop(s: IdeServer) {
        smol::block_on(s.stop())
    }
}

claude_ide_bridge_testsupport::socket_scenarios!(Smol);

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
fn answered_from_a_task_and_stop_with_pending_diff() {
    let dir = tempfile::tempdir().unwrap();
    let s = Smol::start(scenarios::opts(dir.path())).unwrap();
    assert!(s.try_next_event().is_none());
    let (_, c) = client::connect(s.port(), Some(scenarios::TOKEN));
    let mut c = c.unwrap();
    c.init();
    scenarios::wait_event::<Smol>(&s, |e| matches!(e, Event::Initialized { .. }));
    let wf = c.call_tool("getWorkspaceFolders", serde_json::json!({}));
    let id = c.call_tool(
        "openDiff",
        serde_json::json!({"old_file_path": "/w/a", "new_file_path": "/w/a",
                           "new_file_contents": "x", "tab_name": "t"}),
    );
    // Answer getWorkspaceFolders from a spawned task.
    let call = match scenarios::wait_event::<Smol>(&s, |e| matches!(e, Event::ToolCall { .. })) {
        Event::ToolCall { call, .. } => call,
        _ => unreachable!(),
    };
    let h = s.handle();
    smol::block_on(smol::spawn(async move {
        h.respond(call, ToolResult::text("w"))
    }))
    .unwrap();
    assert_eq!(c.response(wf)["result"]["content"][0]["text"], "w");
    scenarios::wait_event::<Smol>(&s, |e| matches!(e, Event::ToolCall { .. }));
    let stopper = std::thread::spawn(move || smol::block_on(s.stop()));
    let resp = c.response(id);
    scenarios::assert_undecided_at_stop(&resp);
    assert!(c.closed_within(Duration::from_secs(3)));
    claude_ide_bridge_testsupport::joined(stopper, Duration::from_secs(20), "the stop");
}
