//! # claude-ide-bridge-smol
//!
//! The `claude-ide-bridge` engine on smol (`async-io`): an accept task, one task per connection
//! (its reader and writer), one timer task re-armed with `async_io::Timer::at` whenever the
//! engine's deadline moves, and events on an `async-channel`. The engine sits in an
//! `Arc<Mutex<_>>` that is never held across an `.await`.
//!
//! ```no_run
//! use claude_ide_bridge_smol::{Event, IdeServer, Options, ToolResult};
//!
//! smol::block_on(async {
//!     let server = IdeServer::start(Options::new(vec!["/home/me/project".into()], "MyEditor")).await?;
//!     println!("port {}, lock file {:?}", server.port(), server.lock_path());
//!     let handle = server.handle(); // Clone + Send + Sync: answer from any task
//!     while let Some(event) = server.next_event().await {
//!         if let Event::ToolCall { call, tool } = event {
//!             let _ = handle.respond(call, ToolResult::error(format!("{:?} is not supported", tool.name())));
//!         }
//!     }
//!     server.stop().await;
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Tasks run on smol's global executor (`smol::spawn`). The blocking runtime
//! (`claude-ide-bridge-blocking`) has the same types with the same names.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use async_io::{Async, Timer};
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use smol::Task;

pub use claude_ide_bridge::jsonrpc::RpcError;
pub use claude_ide_bridge::{
    ApiError, AuthToken, CallId, ConnectionId, Event, Limits, Notification, Target, ToolCall,
    ToolResult, ToolSet,
};
pub use claude_ide_bridge_os::{LockFileMode, Logger, Options};

use claude_ide_bridge_os::{Core, Drained};

/// Largest chunk a writer copies out of the engine per socket write.
const WRITE_CHUNK: usize = 64 * 1024;
/// Read buffer per connection.
const READ_CHUNK: usize = 16 * 1024;
/// How long [`IdeServer::stop`] lets clients finish the close handshake.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A wake-up that is never lost: a ring while nobody waits is kept (one is enough).
fn bell() -> (Sender<()>, Receiver<()>) {
    async_channel::bounded(1)
}

struct Conn {
    stream: Arc<Async<TcpStream>>,
    bell: Sender<()>,
}

struct State {
    core: Core,
    conns: HashMap<ConnectionId, Conn>,
    events: Option<Sender<Event>>,
    tasks: Vec<Task<()>>,
    stopped: bool,
}

struct Shared {
    state: Mutex<State>,
    timer_bell: Sender<()>,
    stop_bell: Sender<()>,
    addr: SocketAddr,
}

/// What a writer does next, decided under the lock and done after it.
enum Next {
    Write,
    Close,
    Wait,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drain the engine and act on it; everything here is non-blocking.
    fn flush(&self, st: &mut State) {
        let mut out = Drained::default();
        st.core.drain(&mut out);
        for (conn, close) in out.ready {
            if let Some(c) = st.conns.get(&conn) {
                if close {
                    let _ = c.stream.get_ref().shutdown(Shutdown::Both);
                }
                let _ = c.bell.try_send(());
            }
        }
        if let Some(tx) = &st.events {
            for e in out.events {
                let _ = tx.try_send(e);
            }
        }
        if out.timer_changed {
            let _ = self.timer_bell.try_send(());
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.lock();
        let r = f(&mut st);
        self.flush(&mut st);
        r
    }

    fn close_conn(&self, st: &mut State, conn: ConnectionId) {
        if let Some(c) = st.conns.get(&conn) {
            let _ = c.stream.get_ref().shutdown(Shutdown::Both);
            let _ = c.bell.try_send(());
        }
        st.core.server.handle_close(conn);
    }

    async fn accept_loop(
        self: Arc<Self>,
        listener: Async<std::net::TcpListener>,
        stop: Receiver<()>,
    ) {
        loop {
            let accepted = future::or(async { Some(listener.accept().await) }, async {
                let _ = stop.recv().await;
                None
            })
            .await;
            match accepted {
                None => return,
                Some(Ok((stream, _))) => self.add(stream),
                Some(Err(_)) => {
                    Timer::after(Duration::from_millis(10)).await;
                }
            }
        }
    }

    fn add(self: &Arc<Self>, stream: Async<TcpStream>) {
        let _ = stream.get_ref().set_nodelay(true);
        let stream = Arc::new(stream);
        let (ring, wait) = bell();
        let mut st = self.lock();
        if st.stopped {
            return;
        }
        let now = st.core.clock.now();
        let conn = st.core.server.accept(now);
        st.conns.insert(
            conn,
            Conn {
                stream: stream.clone(),
                bell: ring,
            },
        );
        st.tasks.retain(|t| !t.is_finished());
        let me = self.clone();
        st.tasks.push(smol::spawn(async move {
            future::zip(
                me.read_loop(conn, &stream),
                me.write_loop(conn, &stream, wait),
            )
            .await;
        }));
        self.flush(&mut st);
    }

    async fn read_loop(&self, conn: ConnectionId, stream: &Async<TcpStream>) {
        let mut buf = vec![0u8; READ_CHUNK];
        let mut reader = stream;
        loop {
            match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => self.with(|st| {
                    let now = st.core.clock.now();
                    st.core.server.handle_input(conn, &buf[..n], now)
                }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.with(|st| self.close_conn(st, conn));
    }

    async fn write_loop(&self, conn: ConnectionId, stream: &Async<TcpStream>, bell: Receiver<()>) {
        let mut chunk = Vec::with_capacity(WRITE_CHUNK);
        let mut writer = stream;
        loop {
            let next = {
                let st = self.lock();
                let out = st.core.server.transmit(conn);
                if !out.is_empty() && !st.stopped {
                    chunk.clear();
                    chunk.extend_from_slice(&out[..out.len().min(WRITE_CHUNK)]);
                    Next::Write
                } else if st.stopped || st.core.server.should_close(conn) {
                    Next::Close
                } else {
                    Next::Wait
                }
            };
            match next {
                Next::Wait => {
                    if bell.recv().await.is_err() {
                        return;
                    }
                }
                Next::Write => match writer.write(&chunk).await {
                    Ok(n) if n > 0 => self.with(|st| st.core.server.advance_transmit(conn, n)),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    _ => break,
                },
                Next::Close => break,
            }
        }
        self.with(|st| {
            self.close_conn(st, conn);
            st.conns.remove(&conn);
        });
    }

    async fn timer_loop(self: Arc<Self>, bell: Receiver<()>) {
        loop {
            let wait = {
                let st = self.lock();
                if st.stopped {
                    return;
                }
                st.core
                    .server
                    .poll_timeout()
                    .map(|d| st.core.clock.until(d))
            };
            let rung = match wait {
                Some(d) => {
                    future::or(
                        async {
                            Timer::after(d).await;
                            true
                        },
                        async { bell.recv().await.is_ok() },
                    )
                    .await
                }
                None => bell.recv().await.is_ok(),
            };
            if !rung {
                return;
            }
            self.with(|st| {
                let now = st.core.clock.now();
                if st.core.server.poll_timeout().is_some_and(|d| d <= now) {
                    st.core.server.handle_timeout(now);
                }
            });
        }
    }

    /// The part of stopping that needs no waiting: close everything, remove the lock file.
    fn stop_hard(&self) -> Vec<Task<()>> {
        let mut st = self.lock();
        st.stopped = true;
        for c in st.conns.values() {
            let _ = c.stream.get_ref().shutdown(Shutdown::Both);
            let _ = c.bell.try_send(());
        }
        st.events = None;
        st.core.remove_lock_file();
        self.timer_bell.close();
        self.stop_bell.close();
        std::mem::take(&mut st.tasks)
    }
}

/// A running server: listening, advertised by its lock file, delivering [`Event`]s.
///
/// Dropping it stops it without waiting (clients are sent Close 1001, sockets closed, the lock
/// file removed), also when a panic unwinds through the task that owns it; prefer
/// [`IdeServer::stop`], which lets clients finish the close handshake.
pub struct IdeServer {
    shared: Arc<Shared>,
    events: Receiver<Event>,
    lock_path: Option<PathBuf>,
    stopped: bool,
}

impl IdeServer {
    /// Binds, writes the lock file, and spawns the tasks.
    pub async fn start(opts: Options) -> io::Result<IdeServer> {
        let (listener, core) = Core::start(&opts)?;
        let addr = listener.local_addr()?;
        let listener = Async::new(listener)?;
        let lock_path = core.lock_path().map(Path::to_path_buf);
        let (tx, rx) = async_channel::unbounded();
        let (timer_bell, timer_wait) = bell();
        let (stop_bell, stop_wait) = bell();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                core,
                conns: HashMap::new(),
                events: Some(tx),
                tasks: Vec::new(),
                stopped: false,
            }),
            timer_bell,
            stop_bell,
            addr,
        });
        let timer = smol::spawn(shared.clone().timer_loop(timer_wait));
        let acceptor = smol::spawn(shared.clone().accept_loop(listener, stop_wait));
        shared.lock().tasks.extend([timer, acceptor]);
        Ok(IdeServer {
            shared,
            events: rx,
            lock_path,
            stopped: false,
        })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.shared.addr.port()
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The lock file's path (`None` with [`LockFileMode::Disabled`]).
    pub fn lock_path(&self) -> Option<&Path> {
        self.lock_path.as_deref()
    }

    /// A handle for answering calls and sending notifications from any task or thread.
    pub fn handle(&self) -> Handle {
        Handle {
            shared: self.shared.clone(),
        }
    }

    /// The next event; `None` once the server has stopped.
    pub async fn next_event(&self) -> Option<Event> {
        self.events.recv().await.ok()
    }

    /// The next event if one is ready.
    pub fn try_next_event(&self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// Stops: pending diffs are answered `DIFF_REJECTED`, clients are sent Close 1001 and given
    /// up to 2 s to finish, then every socket is closed, the lock file removed and the tasks
    /// awaited.
    pub async fn stop(mut self) {
        self.stopped = true;
        let shared = self.shared.clone();
        shared.with(|st| {
            let now = st.core.clock.now();
            st.core.server.shutdown(now)
        });
        let give_up = Instant::now() + STOP_GRACE;
        while !shared.lock().core.server.is_idle() && Instant::now() < give_up {
            Timer::after(Duration::from_millis(5)).await;
        }
        for task in shared.stop_hard() {
            task.await;
        }
    }
}

impl Drop for IdeServer {
    fn drop(&mut self) {
        if !self.stopped {
            self.shared.with(|st| {
                let now = st.core.clock.now();
                st.core.server.shutdown(now)
            });
            for task in self.shared.stop_hard() {
                task.detach();
            }
        }
    }
}

/// Answers calls, sends notifications and changes settings from any task or thread. Every method
/// returns at once.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    /// Answers a tool call (see `Server::respond`).
    pub fn respond(&self, call: CallId, result: ToolResult) -> Result<(), ApiError> {
        self.shared.with(|st| st.core.server.respond(call, result))
    }

    /// Answers a compatibility request (see `Server::respond_compat`).
    pub fn respond_compat(
        &self,
        call: CallId,
        result: Result<serde_json::Value, RpcError>,
    ) -> Result<(), ApiError> {
        self.shared
            .with(|st| st.core.server.respond_compat(call, result))
    }

    /// Sends a notification; returns how many connections it was queued for.
    pub fn notify(&self, target: Target, notification: &Notification) -> usize {
        self.shared.with(|st| {
            let now = st.core.clock.now();
            st.core.server.notify(target, notification, now)
        })
    }

    /// Changes the offered tools (clients are told `tools/list_changed`).
    pub fn set_tools(&self, tools: ToolSet) {
        self.shared.with(|st| {
            let now = st.core.clock.now();
            st.core.server.set_tools(tools, now)
        })
    }

    /// Changes the workspace folders; the lock file is rewritten atomically.
    pub fn set_workspace_folders(&self, folders: Vec<PathBuf>) -> io::Result<()> {
        self.shared
            .with(|st| st.core.set_workspace_folders(&folders))
    }

    /// Closes a connection (WebSocket Close 1000).
    pub fn close(&self, conn: ConnectionId) {
        self.shared.with(|st| {
            let now = st.core.clock.now();
            let _ = st.core.server.close(conn, now);
        })
    }

    /// The live (upgraded, not closed) connections.
    pub fn connections(&self) -> Vec<ConnectionId> {
        self.shared.lock().core.server.connections()
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.shared.addr.port()
    }
}
