//! The shared scenarios through the smol runtime with events handed to a handler
//! (`IdeServer::start_with_handler`) that forwards them to the test; a handler that answers calls
//! itself on the executor thread (`start_with_handler_on`); one at a time and in order on an
//! executor run by several threads; and panics in the handler contained.

use claude_ide_bridge_testsupport::{client, scenarios};

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use claude_ide_bridge::GetDiagnosticsArgs;
use claude_ide_bridge::{ConnectionId, Event, Notification, Target, ToolCall, ToolResult};
use claude_ide_bridge_smol::{Handle, IdeServer, Options};
use scenarios::Rt;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

struct Forwarded {
    server: IdeServer,
    events: mpsc::Receiver<Event>,
}

struct WithHandler;

impl Rt for WithHandler {
    type S = Forwarded;
    fn start(opts: Options) -> std::io::Result<Forwarded> {
        let (tx, events) = mpsc::channel();
        let server = smol::block_on(IdeServer::start_with_handler(opts, move |e, _| {
            let _ = tx.send(e);
        }))?;
        assert!(server.try_next_event().is_none());
        assert!(smol::block_on(server.next_event()).is_none());
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
        smol::block_on(s.server.stop())
    }
}

claude_ide_bridge_testsupport::handler_scenarios!(WithHandler);

/// An executor run by `threads` threads named `name-N`, until the returned sender is dropped.
fn executor(
    threads: usize,
    name: &str,
) -> (
    Arc<smol::Executor<'static>>,
    smol::channel::Sender<()>,
    Vec<thread::JoinHandle<()>>,
) {
    let ex = Arc::new(smol::Executor::new());
    let (stop, stopped) = smol::channel::bounded::<()>(1);
    let runners = (0..threads)
        .map(|i| {
            let ex = ex.clone();
            let stopped = stopped.clone();
            thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    let _ = smol::block_on(ex.run(stopped.recv()));
                })
                .unwrap()
        })
        .collect();
    (ex, stop, runners)
}

/// The handler answers every call itself and, re-entering the server through the handle it is
/// given, sends a notification first: both arrive, in order, and the answer was made on the
/// thread running the host's executor (the connection's task).
#[test]
fn handler_answers_in_the_connection_task() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, stop, runners) = executor(1, "host-executor");
    let server = smol::block_on(IdeServer::start_with_handler_on(
        scenarios::opts(dir.path()),
        ex,
        |e, handle| {
            if let Event::ToolCall { call, .. } = e {
                let n = handle.notify(Target::All, &Notification::LogEvent(log_event()));
                assert_eq!(n, 1);
                handle
                    .respond(
                        call,
                        ToolResult::text(format!("answered on {:?}", thread::current().name())),
                    )
                    .unwrap();
            }
        },
    ))
    .unwrap();
    let (_, c) = client::connect(server.port(), Some(scenarios::TOKEN));
    let mut c = c.unwrap();
    c.init();
    for _ in 0..100 {
        let id = c.call_tool("getDiagnostics", json!({}));
        let note = c.recv_json(WAIT).unwrap();
        assert_eq!(note["method"], "log_event");
        let resp = c.response(id);
        let text = resp["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("host-executor-0"), "{text}");
    }
    smol::block_on(server.stop());
    drop(stop);
    for r in runners {
        r.join().unwrap();
    }
}

/// Several clients pipelining calls at a server whose tasks run on an executor with four
/// threads: the handler never runs twice at once, and each connection's events arrive in the
/// order its client sent them (Connected, Initialized, the calls by number, Disconnected).
#[test]
fn one_at_a_time_and_in_order_on_a_multi_threaded_executor() {
    const CLIENTS: usize = 6;
    const CALLS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let (ex, stop, runners) = executor(4, "parallel");
    let busy = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<HashMap<ConnectionId, Vec<String>>>> = Arc::default();
    let threads: Arc<Mutex<HashSet<String>>> = Arc::default();
    let (done_tx, done) = mpsc::channel();
    let server = {
        let (busy, overlaps, seen, threads) = (
            busy.clone(),
            overlaps.clone(),
            seen.clone(),
            threads.clone(),
        );
        smol::block_on(IdeServer::start_with_handler_on(
            scenarios::opts(dir.path()),
            ex,
            move |e, handle| {
                if busy.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                threads
                    .lock()
                    .unwrap()
                    .insert(thread::current().name().unwrap_or("?").to_string());
                // Widen the window in which a second delivery would overlap.
                thread::yield_now();
                let (conn, label) = match &e {
                    Event::Connected { conn, .. } => (*conn, "connected".to_string()),
                    Event::Initialized { conn, .. } => (*conn, "initialized".to_string()),
                    Event::ToolCall {
                        call,
                        tool: ToolCall::GetDiagnostics(GetDiagnosticsArgs { uri }),
                    } => (call.conn, uri.clone().unwrap_or_default()),
                    Event::Disconnected { conn, .. } => {
                        let _ = done_tx.send(());
                        (*conn, "disconnected".to_string())
                    }
                    _ => {
                        busy.store(false, Ordering::SeqCst);
                        return;
                    }
                };
                seen.lock().unwrap().entry(conn).or_default().push(label);
                if let Event::ToolCall { call, .. } = e {
                    handle.respond(call, ToolResult::text("[]")).unwrap();
                }
                busy.store(false, Ordering::SeqCst);
            },
        ))
        .unwrap()
    };
    let port = server.port();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            thread::spawn(move || {
                let (_, c) = client::connect(port, Some(scenarios::TOKEN));
                let mut c = c.unwrap();
                c.init();
                let ids: Vec<u64> = (0..CALLS)
                    .map(|i| {
                        c.call_tool("getDiagnostics", json!({"uri": format!("file:///w/{i}")}))
                    })
                    .collect();
                for id in ids {
                    assert_eq!(c.response(id)["result"]["content"][0]["text"], "[]");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    for _ in 0..CLIENTS {
        done.recv_timeout(WAIT).expect("every client disconnected");
    }
    smol::block_on(server.stop());
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "the handler ran twice at once"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), CLIENTS);
    let mut want = vec!["connected".to_string(), "initialized".to_string()];
    want.extend((0..CALLS).map(|i| format!("file:///w/{i}")));
    want.push("disconnected".to_string());
    for labels in seen.values() {
        assert_eq!(labels, &want);
    }
    // The premise: the handler was called from several threads. Otherwise "never twice at
    // once" held trivially, which the suite's summary says.
    let ran_on = threads.lock().unwrap().len();
    if ran_on < 2 {
        claude_ide_bridge_testsupport::skip::skip(
            "smol handler: the one-at-a-time check proved nothing: every call ran on one executor thread",
        );
    }
    drop(stop);
    for r in runners {
        r.join().unwrap();
    }
}

impl scenarios::HandlerRt for WithHandler {
    fn start_with(opts: Options, mut inspect: scenarios::Inspect) -> std::io::Result<Forwarded> {
        let (tx, events) = mpsc::channel();
        let server = smol::block_on(IdeServer::start_with_handler(opts, move |e, h| {
            match (inspect(&e), e) {
                (Some(result), Event::ToolCall { call, .. }) => {
                    h.respond(call, result).expect("answer from the handler");
                }
                (_, e) => {
                    let _ = tx.send(e);
                }
            }
        }))?;
        Ok(Forwarded { server, events })
    }
}

/// A notification the engine sends as it is told (an at-mention may wait for the client to be
/// ready for it).
fn log_event() -> claude_ide_bridge::LogEvent {
    claude_ide_bridge::LogEvent {
        event_name: "handler".into(),
        event_data: serde_json::json!({"calls": 1}),
    }
}

/// A handler that never returns while the server stops: the stop is bounded (the scenario).
/// Before, the stop awaited its task without a bound and hung.
#[test]
fn a_handler_that_does_not_return_does_not_hold_the_stop() {
    on_an_executor_of_its_own("held", |ex| {
        scenarios::a_handler_that_does_not_return_does_not_hold_the_stop(started_on(ex), stopped)
    });
}

#[test]
fn a_handler_kept_waiting_does_not_cost_its_client_the_connection() {
    on_an_executor_of_its_own("waiting", |ex| {
        scenarios::a_handler_kept_waiting_does_not_cost_its_client_the_connection(
            started_on(ex),
            stopped,
        )
    });
}

#[test]
fn a_stop_under_the_handlers_lock_returns() {
    on_an_executor_of_its_own("locked", |ex| {
        scenarios::a_stop_under_the_handlers_lock_returns(started_on(ex), stopped)
    });
}

#[test]
fn every_call_a_stop_cancels_reaches_the_handler() {
    on_an_executor_of_its_own("cancelled", |ex| {
        scenarios::every_call_a_stop_cancels_reaches_the_handler(started_on(ex), stopped)
    });
}

/// The same with the server dropped, not stopped: its tasks, left to end on their own, deliver
/// them.
#[test]
fn every_call_a_drop_cancels_reaches_the_handler() {
    on_an_executor_of_its_own("dropped", |ex| {
        scenarios::every_call_a_stop_cancels_reaches_the_handler(started_on(ex), drop)
    });
}

/// Runs `scenario` with an executor of its own (two threads named after `name`): a handler that
/// holds one of its threads for seconds (the scenarios that stop a server themselves) would hold
/// up the other tests of this binary on smol's global one.
fn on_an_executor_of_its_own(name: &str, scenario: impl FnOnce(Arc<smol::Executor<'static>>)) {
    let (ex, stop_executor, runners) = executor(2, name);
    scenario(ex);
    drop(stop_executor);
    for r in runners {
        r.join().unwrap();
    }
}

/// The handler those scenarios give: called with each event.
type ScenarioHandler = Box<dyn FnMut(&Event) + Send>;

/// What those scenarios start: a server on `ex` whose handler calls theirs with each event; its
/// port and lock file.
fn started_on(
    ex: Arc<smol::Executor<'static>>,
) -> impl FnOnce(Options, ScenarioHandler) -> (IdeServer, u16, PathBuf) {
    move |opts, mut handler| {
        let server = smol::block_on(IdeServer::start_with_handler_on(opts, ex, move |e, _| {
            handler(&e)
        }))
        .unwrap();
        let (port, lock) = (server.port(), server.lock_path().unwrap().to_path_buf());
        (server, port, lock)
    }
}

/// How those scenarios stop it.
fn stopped(server: IdeServer) {
    smol::block_on(server.stop())
}
