//! The servers under test: both runtimes in the setups their docs recommend (and the slower
//! ones, for comparison), and the reference server on Node `ws`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Instant;

use claude_ide_bridge::{AuthToken, Event, Notification, Position, Selection};
use claude_ide_bridge::{SelectionChanged, Target, ToolResult};
use claude_ide_bridge_blocking::{Handle, LockFileMode, Options};

use crate::client::{GET_DIAGNOSTICS, GET_WORKSPACE_FOLDERS};
use crate::{TIMEOUT, TOKEN};

/// Notifications a host lets run ahead of what the client has received (about 1 MiB), like the
/// Node server's `bufferedAmount` window.
const WINDOW: usize = 4096;

/// A server under test and how to make it push notifications.
pub(crate) struct Server {
    pub(crate) port: u16,
    /// Asks the host to push `n` notifications (`None`: send `bench/push` on the socket, for Node).
    pub(crate) push: Option<mpsc::Sender<usize>>,
    /// Notifications the client has received so far, for the hosts' window.
    pub(crate) received: Arc<AtomicUsize>,
    pub(crate) child: Option<Child>,
    /// No notifications: a floor (tcp-echo, bare-ws), or the program, which pushes them only
    /// when an editor reports a selection.
    pub(crate) echo: bool,
    /// The client's token.
    pub(crate) token: String,
    /// The `tools/call` members of each round trip.
    pub(crate) call: &'static str,
    /// The program's lock and workspace directories, removed with the server.
    pub(crate) dirs: Option<tempfile::TempDir>,
}

impl Server {
    /// A floor (tcp-echo, bare-ws) on `port`, in this process.
    pub(crate) fn floor(port: u16) -> Server {
        Server {
            port,
            push: None,
            received: Arc::new(AtomicUsize::new(0)),
            child: None,
            echo: true,
            token: TOKEN.into(),
            call: GET_DIAGNOSTICS,
            dirs: None,
        }
    }

    pub(crate) fn stop(mut self) {
        if let (Some(c), Some(_)) = (&mut self.child, &self.dirs) {
            // The program stops on SIGTERM, removing its lock file.
            #[cfg(target_os = "linux")]
            if let Some(pid) = rustix::process::Pid::from_raw(c.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            #[cfg(not(target_os = "linux"))]
            let _ = c.kill();
        }
        if let Some(mut c) = self.child.take() {
            // `ws` stops on its own when stdin closes.
            drop(c.stdin.take()); // the script exits when its stdin closes
            let _ = c.wait();
        }
    }
}

/// The options type is the runtime crate's, re-exported by both runtimes.
fn options() -> Options {
    let mut o = Options::new(vec![std::env::temp_dir()], "loopback-bench");
    o.port = 0;
    o.lock_file = LockFileMode::Disabled;
    o.auth_token = Some(AuthToken::from_string(TOKEN.to_string()));
    o.signal_cleanup = false;
    o
}

fn selection() -> Notification {
    Notification::SelectionChanged(SelectionChanged {
        text: "fn main() {}".into(),
        file_path: "/home/me/project/src/main.rs".into(),
        file_url: "file:///home/me/project/src/main.rs".into(),
        selection: Selection::new(Position::new(1, 0), Position::new(1, 12)),
    })
}

/// Push `n` notifications through `notify`, keeping at most [`WINDOW`] ahead of the client.
fn push_windowed(n: usize, received: &AtomicUsize, pusher: &Handle) {
    let note = selection();
    let base = received.load(Ordering::Acquire);
    let start = Instant::now();
    let mut sent = 0;
    while sent < n && start.elapsed() < TIMEOUT {
        if sent - (received.load(Ordering::Acquire) - base).min(sent) < WINDOW {
            pusher.notify(Target::All, &note);
            sent += 1;
        } else {
            thread::yield_now();
        }
    }
}

/// A Rust server on `port` whose pushes go through `pusher` (either runtime's handle): a thread
/// pushes what [`crate::run`] asks for, windowed. It owns `keep` (dropped, i.e. the server stopped, when
/// the bench is done with it).
fn rust_server(port: u16, pusher: Handle, keep: impl Send + 'static) -> Server {
    let received = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<usize>();
    let r = received.clone();
    thread::spawn(move || {
        for n in rx {
            push_windowed(n, &r, &pusher);
        }
        drop(keep);
    });
    Server {
        port,
        push: Some(tx),
        received,
        child: None,
        echo: false,
        token: TOKEN.into(),
        call: GET_DIAGNOSTICS,
        dirs: None,
    }
}

/// The threads host as the runtime recommends for latency: calls answered by a handler on the
/// thread that read them (`start_with_handler`); with `channel`, events read by a host thread
/// of its own (`start` and `next_event`): one thread hand-off per event. Stopped when the
/// [`Server`] is dropped (its push thread drops what keeps the server).
pub(crate) fn start_threads(channel: bool) -> Server {
    if !channel {
        let server =
            claude_ide_bridge_blocking::IdeServer::start_with_handler(options(), |ev, handle| {
                if let Event::ToolCall { call, .. } = ev {
                    let _ = handle.respond(call, ToolResult::text("[]"));
                }
            })
            .expect("start");
        let (port, pusher) = (server.port(), server.handle());
        return rust_server(port, pusher, server);
    }
    let server = claude_ide_bridge_blocking::IdeServer::start(options()).expect("start");
    let port = server.port();
    let handle = server.handle();
    let pusher = server.handle();
    /// Stops the server when dropped: its host thread's `next_event` then ends, and the thread
    /// drops the server.
    struct StopOnDrop(claude_ide_bridge_blocking::Stopper);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let stop = StopOnDrop(server.stopper());
    // The host: answers every tool call at once.
    thread::spawn(move || {
        while let Some(ev) = server.next_event() {
            if let Event::ToolCall { call, .. } = ev {
                let _ = handle.respond(call, ToolResult::text("[]"));
            }
        }
    });
    rust_server(port, pusher, stop)
}

/// The smol host as the runtime recommends for latency: the server's tasks and the host's event
/// loop on one executor, run by one thread (`start_on`); with `global`, the tasks on smol's
/// global executor and the host on its own thread (`start`): one thread hand-off per event.
/// Stopped when the [`Server`] is dropped (the stop channel's sender, what keeps it, with it).
pub(crate) fn start_smol(global: bool) -> Server {
    let (port_tx, port_rx) = mpsc::channel();
    let (stop, stopped) = smol::channel::bounded::<()>(1);
    thread::spawn(move || {
        let ex = Arc::new(smol::Executor::new());
        let on = ex.clone();
        // The host's loop is a task of the executor, as the runtime recommends: woken by an
        // event, it is run in the same turn as the connection's task.
        smol::block_on(ex.run(ex.spawn(async move {
            let server = if global {
                claude_ide_bridge_smol::IdeServer::start(options()).await
            } else {
                claude_ide_bridge_smol::IdeServer::start_on(options(), on).await
            }
            .expect("start");
            port_tx
                .send((server.port(), server.handle()))
                .expect("main waits");
            let handle = server.handle();
            let host = async {
                while let Some(ev) = server.next_event().await {
                    if let Event::ToolCall { call, .. } = ev {
                        let _ = handle.respond(call, ToolResult::text("[]"));
                    }
                }
            };
            // Until the sender is dropped (the channel closes) or the server ends.
            smol::future::or(host, async {
                let _ = stopped.recv().await;
            })
            .await;
            server.stop().await;
        })))
    });
    let (port, pusher) = port_rx.recv().expect("smol server started");
    rust_server(port, pusher, stop)
}

/// The smol host as the threads one: calls answered by a handler from the connection's task
/// (`start_with_handler`), the tasks on smol's global executor; no host loop at all.
pub(crate) fn start_smol_handler() -> Server {
    let server = smol::block_on(claude_ide_bridge_smol::IdeServer::start_with_handler(
        options(),
        |ev, handle| {
            if let Event::ToolCall { call, .. } = ev {
                let _ = handle.respond(call, ToolResult::text("[]"));
            }
        },
    ))
    .expect("start");
    let port = server.port();
    let pusher = server.handle();
    rust_server(port, pusher, server)
}

pub(crate) fn start_node() -> Option<Server> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node");
    if !dir.join("node_modules/ws").exists() {
        return None;
    }
    let mut child = Command::new("node")
        .arg(dir.join("server.js"))
        .arg(TOKEN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    let port = line.trim().parse().ok()?;
    Some(Server {
        port,
        push: None,
        received: Arc::new(AtomicUsize::new(0)),
        child: Some(child),
        echo: false,
        token: TOKEN.into(),
        call: GET_DIAGNOSTICS,
        dirs: None,
    })
}

/// The program itself, `claude-ide-bridge serve --runtime RUNTIME`, as a user starts it (no
/// language servers, diffs rejected, a lock file in a directory of its own), from the directory
/// this bench was built into (`cargo build --release -p claude-ide-bridge-cli`) or `$LOOPBACK_BRIDGE`;
/// `Err` says why not. Its round trips call `getWorkspaceFolders`, answered from memory.
pub(crate) fn start_serve(runtime: &str) -> Result<Server, String> {
    // Another build (a baseline) with `LOOPBACK_BRIDGE=PATH`.
    let bin = match std::env::var_os("LOOPBACK_BRIDGE") {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name(format!("claude-ide-bridge{}", std::env::consts::EXE_SUFFIX)),
    };
    if !bin.exists() {
        return Err(format!(
            "{} missing: cargo build --release -p claude-ide-bridge-cli (the same profile as this bench)",
            bin.display()
        ));
    }
    let dirs = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (locks, workspace) = (dirs.path().join("locks"), dirs.path().join("project"));
    for d in [&locks, &workspace] {
        std::fs::create_dir(d).map_err(|e| e.to_string())?;
    }
    let mut cmd = Command::new(&bin);
    cmd.args([
        "serve",
        "--runtime",
        runtime,
        "--no-lsp",
        "--on-diff",
        "reject",
    ])
    .args(["--port", "0", "--new-token", "--workspace"])
    .arg(&workspace)
    .arg("--lock-dir")
    .arg(&locks)
    // Its kept port and token (state) go to the bench's directory, not the user's.
    .env("XDG_STATE_HOME", dirs.path());
    let serving = claude_ide_bridge_testsupport::bridge::serve(&mut cmd, &locks)?;
    Ok(Server {
        port: serving.port,
        push: None,
        received: Arc::new(AtomicUsize::new(0)),
        child: Some(serving.child),
        echo: true,
        token: serving.token,
        call: GET_WORKSPACE_FOLDERS,
        dirs: Some(dirs),
    })
}
