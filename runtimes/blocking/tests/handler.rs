//! The shared scenarios through the blocking runtime with events handed to a handler
//! (`IdeServer::start_with_handler`) that forwards them to the test, and a handler that answers
//! calls itself, on the reader thread.

use claude_ide_bridge_testsupport::{client, scenarios};

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use claude_ide_bridge::{Event, Notification, Target, ToolResult};
use claude_ide_bridge_blocking::{Handle, IdeServer, Options};
use scenarios::Rt;

struct Forwarded {
    server: IdeServer,
    events: mpsc::Receiver<Event>,
}

struct WithHandler;

impl Rt for WithHandler {
    type S = Forwarded;
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
}

claude_ide_bridge_testsupport::handler_scenarios!(WithHandler);

/// The handler answers every call itself and, re-entering the server through the handle it is
/// given, sends a notification first: both arrive, in order.
#[test]
fn handler_answers_on_the_reader_thread() {
    let dir = tempfile::tempdir().unwrap();
    let server = IdeServer::start_with_handler(scenarios::opts(dir.path()), |e, handle| {
        if let Event::ToolCall { call, .. } = e {
            let n = handle.notify(Target::All, &Notification::LogEvent(log_event()));
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
        assert_eq!(note["method"], "log_event");
        let resp = c.response(id);
        let text = resp["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("ide-bridge-read-"), "{text}");
    }
    server.stop();
}

/// The handler stops the server it runs in (a host that quits on a command): the stop completes,
/// the lock file goes, and the threads that could be joined are (one cannot join itself: it
/// panicked there, and the threads after it in the list were left unjoined).
#[test]
fn the_handler_may_stop_its_own_server() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let slot: Arc<Mutex<Option<IdeServer>>> = Arc::new(Mutex::new(None));
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut o = scenarios::opts(dir.path());
    let lines = log.clone();
    o.logger = Some(claude_ide_bridge_blocking::Logger::new(move |l| {
        lines.lock().unwrap().push(l.to_owned())
    }));
    let (done_tx, done) = mpsc::channel();
    let held = slot.clone();
    let server = IdeServer::start_with_handler(o, move |e, _| {
        if let Event::ToolCall { .. } = e {
            if let Some(server) = held.lock().unwrap().take() {
                let began = std::time::Instant::now();
                server.stop();
                let _ = done_tx.send(began.elapsed());
            }
        }
    })
    .unwrap();
    let lock = server.lock_path().unwrap().to_path_buf();
    *slot.lock().unwrap() = Some(server);
    let (_, c) = client::connect(
        slot.lock().unwrap().as_ref().unwrap().port(),
        Some(scenarios::TOKEN),
    );
    let mut c = c.unwrap();
    c.init();
    // Two calls in one write: the stop comes in the middle of a burst, whose answers are held.
    c.call_tools_at_once(&[
        ("getDiagnostics", serde_json::json!({})),
        ("getDiagnostics", serde_json::json!({})),
    ]);
    // The Close 1001 reached the client (it was held for the burst, then dropped by the stop).
    stopped_from_the_handler(&done, &lock, &mut c);
    let log = log.lock().unwrap();
    assert!(!log.iter().any(|l| l.contains("panicked")), "{log:?}");
}

/// The handler stops its server through a [`claude_ide_bridge_blocking::Stopper`] (a host that
/// quits on a command): the stop returns at once instead of waiting out the clients' 2 s on the
/// thread that would read their Close; the client gets its Close 1001, and its answer is read.
#[test]
fn a_stopper_used_in_the_handler_lets_the_close_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let stopper: Arc<Mutex<Option<claude_ide_bridge_blocking::Stopper>>> = Arc::default();
    let (done_tx, done) = mpsc::channel();
    let held = stopper.clone();
    let server = IdeServer::start_with_handler(scenarios::opts(dir.path()), move |e, _| {
        if let Event::ToolCall { .. } = e {
            if let Some(stopper) = held.lock().unwrap().take() {
                let began = std::time::Instant::now();
                stopper.stop();
                let _ = done_tx.send(began.elapsed());
            }
        }
    })
    .unwrap();
    *stopper.lock().unwrap() = Some(server.stopper());
    let lock = server.lock_path().unwrap().to_path_buf();
    let mut c = client::connect(server.port(), Some(scenarios::TOKEN))
        .1
        .unwrap();
    c.init();
    c.call_tools_at_once(&[("getDiagnostics", serde_json::json!({}))]);
    stopped_from_the_handler(&done, &lock, &mut c);
    // The client answers; the server reads it and closes the connection.
    c.close(1001);
    assert!(c.closed_within(Duration::from_secs(10)), "{}", c.why());
    server.stop();
}

/// A stop made in the handler (it sends how long the stop took on `done`) returned without
/// sitting out the clients' 2 s on the thread that reads their Close, the lock file is gone, and
/// the client `c` got its Close 1001.
fn stopped_from_the_handler(done: &mpsc::Receiver<Duration>, lock: &Path, c: &mut client::Client) {
    let took = done
        .recv_timeout(Duration::from_secs(20))
        .expect("the stop from the handler returned");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(!lock.exists());
    let close =
        std::iter::from_fn(|| c.recv_frame(Duration::from_secs(5))).find(|(op, _)| *op == 8);
    assert_eq!(
        close.and_then(|(_, p)| client::close_code(&p)),
        Some(1001),
        "{}",
        c.why()
    );
}

#[test]
fn a_flood_of_calls_does_not_keep_another_reader_delivering() {
    scenarios::a_flood_of_calls_does_not_keep_another_reader_delivering::<WithHandler>();
}

/// A notification the engine sends as it is told (an at-mention may wait for the client to be
/// ready for it).
fn log_event() -> claude_ide_bridge::LogEvent {
    claude_ide_bridge::LogEvent {
        event_name: "handler".into(),
        event_data: serde_json::json!({"calls": 1}),
    }
}

impl scenarios::HandlerRt for WithHandler {
    fn start_with(opts: Options, mut inspect: scenarios::Inspect) -> std::io::Result<Forwarded> {
        let (tx, events) = mpsc::channel();
        let server = IdeServer::start_with_handler(opts, move |e, h| match (inspect(&e), e) {
            (Some(result), Event::ToolCall { call, .. }) => {
                h.respond(call, result).expect("answer from the handler");
            }
            (_, e) => {
                let _ = tx.send(e);
            }
        })?;
        Ok(Forwarded { server, events })
    }
}

/// A handler that never returns while the server stops: the stop is bounded (the scenario).
/// Before, the stop joined its thread without a bound and hung.
#[test]
fn a_handler_that_does_not_return_does_not_hold_the_stop() {
    scenarios::a_handler_that_does_not_return_does_not_hold_the_stop(started, IdeServer::stop);
}

#[test]
fn a_handler_kept_waiting_does_not_cost_its_client_the_connection() {
    scenarios::a_handler_kept_waiting_does_not_cost_its_client_the_connection(
        started,
        IdeServer::stop,
    );
}

#[test]
fn a_stop_under_the_handlers_lock_returns() {
    scenarios::a_stop_under_the_handlers_lock_returns(started, IdeServer::stop);
}

/// What the scenarios that stop a server themselves start: a server whose handler calls theirs
/// with each event; its port and lock file.
fn started(opts: Options, mut handler: Box<dyn FnMut(&Event) + Send>) -> (IdeServer, u16, PathBuf) {
    let server = IdeServer::start_with_handler(opts, move |e, _| handler(&e)).unwrap();
    let (port, lock) = (server.port(), server.lock_path().unwrap().to_path_buf());
    (server, port, lock)
}

#[test]
fn every_call_a_stop_cancels_reaches_the_handler() {
    scenarios::every_call_a_stop_cancels_reaches_the_handler(started, IdeServer::stop);
}

/// The same through a [`claude_ide_bridge_blocking::Stopper`], the server dropped after.
#[test]
fn every_call_a_stopper_cancels_reaches_the_handler() {
    scenarios::every_call_a_stop_cancels_reaches_the_handler(started, |s: IdeServer| {
        s.stopper().stop();
        drop(s);
    });
}
