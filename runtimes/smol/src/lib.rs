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
//! Tasks run on smol's global executor (`smol::spawn`), or on an executor of the host's with
//! [`IdeServer::start_on`]: run the host's event loop on that executor and thread and a tool
//! call is read, answered and written in one turn, with no thread hand-off. Answers
//! ([`Handle::respond`]) are written at once from the answering task when the socket takes them;
//! the connection's writer task only handles what a full socket left over, and the answers a host
//! gives while more events wait for its `next_event` (requests that arrived together), which it
//! writes together once the host yields.
//!
//! Events go to [`IdeServer::next_event`], or, with [`IdeServer::start_with_handler`] (global
//! executor) and [`IdeServer::start_with_handler_on`] (the host's), to a closure called from the
//! task that produced them, in order, one at a time, with no lock held: a tool call answered
//! there is read, answered and written in one turn of the connection's task.
//!
//! The blocking runtime (`claude-ide-bridge-blocking`) has the same types and entry points with
//! the same names (`start`, `start_with_handler`); the `_on` variants, which take an executor,
//! are smol's only.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use async_io::{Async, Timer};
use futures_lite::{future, AsyncReadExt, AsyncWriteExt};
use smol::{Executor, Task};

pub use claude_ide_bridge::jsonrpc::RpcError;
pub use claude_ide_bridge::{
    ApiError, AuthToken, CallId, ConnectionId, Event, Limits, Notification, Target, ToolCall,
    ToolResult, ToolSet,
};
pub use claude_ide_bridge_os::{LockFileMode, Logger, Options};

use claude_ide_bridge_os::{
    act_on_ready, deliver, Backlog, Core, Delivery, DeliveryState, Drained, Wire, BACKLOG_POLL,
    MAX_HOST_BACKLOG,
};

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
    /// The writer task holds a copy of the head of the output and is writing it: nobody else
    /// may write until it has advanced.
    writing: bool,
}

impl Wire for Conn {
    /// The socket is non-blocking: a full socket answers `WouldBlock`.
    fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.stream.get_ref().write(buf)
    }
    fn shutdown(&self) {
        let _ = self.stream.get_ref().shutdown(Shutdown::Both);
    }
    fn wake_writer(&self) {
        let _ = self.bell.try_send(());
    }
    fn writing(&self) -> bool {
        self.writing
    }
}

/// Where the tasks run.
enum Spawner {
    Global,
    Executor(Arc<Executor<'static>>),
}

impl Spawner {
    fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) -> Task<()> {
        match self {
            Spawner::Global => smol::spawn(f),
            Spawner::Executor(ex) => ex.spawn(f),
        }
    }
}

struct State {
    core: Core,
    /// Reused by every flush (no allocation per call).
    drained: Drained,
    conns: HashMap<ConnectionId, Conn>,
    /// Where events go; `None` once stopped.
    events: Option<Sink>,
    /// Events waiting for the handler ([`Sink::Handler`]), who runs it, the answers it holds.
    delivery: Delivery,
    tasks: Vec<Task<()>>,
    stopped: bool,
}

impl DeliveryState for State {
    type Wire = Conn;
    fn parts(&mut self) -> (&mut Core, &HashMap<ConnectionId, Conn>, &mut Delivery, bool) {
        (
            &mut self.core,
            &self.conns,
            &mut self.delivery,
            self.stopped,
        )
    }
}

enum Sink {
    /// To [`IdeServer::next_event`].
    Channel(Sender<Event>),
    /// To the handler of [`IdeServer::start_with_handler`], through [`State::delivery`].
    Handler,
}

/// The handler of [`IdeServer::start_with_handler`].
type Handler = Box<dyn FnMut(Event, &Handle) + Send>;

struct Shared {
    state: Mutex<State>,
    handler: Option<Mutex<Handler>>,
    timer_bell: Sender<()>,
    stop_bell: Sender<()>,
    addr: SocketAddr,
    spawner: Spawner,
    /// Events waiting for the host: sent to [`IdeServer::next_event`] and not taken yet, or queued
    /// for the handler and not handed to it yet. Readers look at it before every read, without
    /// the lock.
    backlog: Backlog,
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

    /// Drain the engine and act on it; everything here is non-blocking. Connections with new
    /// output have their writer woken.
    fn flush(&self, st: &mut State) {
        self.flush_with(st, false);
    }

    /// [`Shared::flush`], writing new output from this thread when `inline` (see [`Shared::answer`]).
    ///
    /// An answer the handler gives while more events are queued for it on this thread (a burst of
    /// requests read at once) is held, neither written nor handed to the writer: the next answer
    /// written carries it, one system call for the burst ([`Delivery`]).
    fn flush_with(&self, st: &mut State, inline: bool) {
        let State {
            core,
            drained: out,
            conns,
            events,
            stopped,
            delivery,
            ..
        } = st;
        core.drain(out);
        match events {
            Some(Sink::Channel(tx)) => {
                // Counted before they are sent: the host takes them off as they come.
                self.backlog.add(out.events.len());
                for e in out.events.drain(..) {
                    let _ = tx.try_send(e);
                }
            }
            Some(Sink::Handler) => {
                self.backlog.add(out.events.len());
                delivery.queue.extend(out.events.drain(..));
            }
            None => out.events.clear(),
        }
        act_on_ready(core, &mut out.ready, conns, delivery, inline, *stopped);
        if std::mem::take(&mut out.timer_changed) {
            let _ = self.timer_bell.try_send(());
        }
    }

    /// Runs `f` on the state, flushes, and (outside the lock) hands queued events to the handler.
    fn with<R>(self: &Arc<Self>, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.lock();
        let r = f(&mut st);
        self.flush(&mut st);
        drop(st);
        self.deliver();
        r
    }

    /// Hands queued events to the handler, in order, one at a time, with the lock not held, from
    /// the task or thread calling it. When another one is already doing so (or this one,
    /// re-entered from the handler through a [`Handle`]), that one delivers them after its
    /// current call: [`Delivery::begin`], taken and released under the lock, makes the handler
    /// run in one place at a time even on a multi-threaded executor. Called after every flush,
    /// once the lock is released; does nothing without a handler or with nothing queued.
    ///
    /// A panic in the handler is caught here (the panic hook has reported it): the event is
    /// dropped, the rest are delivered, and the task that ran it (a connection's, the timer,
    /// the acceptor) carries on. Letting it unwind would end that task with the connection
    /// still registered, or stop the timer or the acceptor for good.
    fn deliver(self: &Arc<Self>) {
        let Some(handler) = &self.handler else {
            return;
        };
        // Made for the first event only: most calls find nothing queued.
        let mut handle = None;
        deliver(&self.state, &self.backlog, |event| {
            let handle = handle.get_or_insert_with(|| Handle {
                shared: self.clone(),
            });
            let mut h = handler.lock().unwrap_or_else(|e| e.into_inner());
            panic::catch_unwind(AssertUnwindSafe(|| (*h)(event, &*handle))).map_err(|_| ())
        });
    }

    /// [`Shared::with`] for what answers the peer (input handled, a call answered): the output is
    /// written at once from this thread when the socket takes it and the connection's writer is
    /// idle, and the writer is woken only for what remains. A round trip then costs no wake-up
    /// of the writer. Pushes ([`Handle::notify`]) go through the writer instead, which sends
    /// what accumulated while it woke in one write: fewer system calls for a stream of them.
    ///
    /// With `from_host` (the host's answer to a call), when more events wait for the host's
    /// [`IdeServer::next_event`] (requests that arrived together), the answer is left to the
    /// connection's writer, woken, which runs once the host task yields and writes what
    /// accumulated meanwhile in one system call; the answer given with no event waiting is written
    /// at once, with anything still pending. (A handler's answers are held by [`Delivery`] instead.)
    fn answer<R>(self: &Arc<Self>, from_host: bool, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.lock();
        let r = f(&mut st);
        let queued =
            from_host && matches!(st.events, Some(Sink::Channel(_))) && self.backlog.is_waiting();
        self.flush_with(&mut st, !queued);
        drop(st);
        self.deliver();
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
                writing: false,
            },
        );
        st.tasks.retain(|t| !t.is_finished());
        let me = self.clone();
        st.tasks.push(self.spawner.spawn(async move {
            future::zip(
                me.read_loop(conn, &stream),
                me.write_loop(conn, &stream, wait),
            )
            .await;
        }));
        self.flush(&mut st);
        drop(st);
        self.deliver();
    }

    /// The host is [`MAX_HOST_BACKLOG`] or more events behind (and the server still runs). The
    /// lock is only taken when it is.
    fn host_behind(&self) -> bool {
        self.backlog.is_full() && !self.lock().stopped
    }

    /// Returns once the host is less than [`MAX_HOST_BACKLOG`] events behind: until then this
    /// connection is not read (the peer's bytes wait in the socket, and then in the peer).
    async fn wait_for_host(&self, conn: ConnectionId) {
        if !self.host_behind() {
            return;
        }
        self.lock().core.log(|| {
            format!(
                "connection {}: the host is {MAX_HOST_BACKLOG} events behind; reading paused",
                conn.0
            )
        });
        while self.host_behind() {
            Timer::after(BACKLOG_POLL).await;
        }
    }

    async fn read_loop(self: &Arc<Self>, conn: ConnectionId, stream: &Async<TcpStream>) {
        let mut buf = vec![0u8; READ_CHUNK];
        let mut reader = stream;
        loop {
            self.wait_for_host(conn).await;
            match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => self.answer(false, |st| {
                    let now = st.core.clock.now();
                    st.core.server.handle_input(conn, &buf[..n], now)
                }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.with(|st| self.close_conn(st, conn));
    }

    async fn write_loop(
        self: &Arc<Self>,
        conn: ConnectionId,
        stream: &Async<TcpStream>,
        bell: Receiver<()>,
    ) {
        let mut chunk = Vec::with_capacity(WRITE_CHUNK);
        let mut writer = stream;
        loop {
            let next = {
                let mut st = self.lock();
                let out = st.core.server.transmit(conn);
                if !out.is_empty() && !st.stopped {
                    chunk.clear();
                    chunk.extend_from_slice(&out[..out.len().min(WRITE_CHUNK)]);
                    if let Some(c) = st.conns.get_mut(&conn) {
                        c.writing = true;
                    }
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
                    Ok(n) if n > 0 => self.with(|st| {
                        st.core.server.advance_transmit(conn, n);
                        if let Some(c) = st.conns.get_mut(&conn) {
                            c.writing = false;
                        }
                    }),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => self.with(|st| {
                        if let Some(c) = st.conns.get_mut(&conn) {
                            c.writing = false;
                        }
                    }),
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
        st.delivery.queue.clear();
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
    /// Binds, writes the lock file, and spawns the tasks on smol's global executor (which runs
    /// them on its own thread: a host awaiting [`IdeServer::next_event`] elsewhere is one thread
    /// hand-off away from them; see [`IdeServer::start_on`]). Read events as they come: while
    /// [`MAX_HOST_BACKLOG`] (4096) events wait, the server
    /// stops reading from its connections (so that a peer cannot pile them up in front of a slow
    /// host), and goes on once the host has caught up.
    pub async fn start(opts: Options) -> io::Result<IdeServer> {
        IdeServer::start_with(opts, Spawner::Global, None).await
    }

    /// As [`IdeServer::start`], with the tasks spawned on `executor`. Run the host's event loop on
    /// the same executor and thread (e.g. `smol::block_on(executor.run(host))`) and a tool call is
    /// read, handed to the host, answered and written in one turn of one thread, with no hand-off
    /// (the lowest latency). The executor must be run for the server to make progress. Answers to
    /// requests that arrived together are written together, in one system call, once the host task
    /// has answered those it had waiting and yields.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use claude_ide_bridge_smol::{Event, IdeServer, Options, ToolResult};
    ///
    /// let ex = Arc::new(smol::Executor::new());
    /// smol::block_on(ex.run(async {
    ///     let server = IdeServer::start_on(Options::new(vec!["/home/me/project".into()], "MyEditor"), ex.clone()).await?;
    ///     let handle = server.handle();
    ///     while let Some(event) = server.next_event().await {
    ///         if let Event::ToolCall { call, tool } = event {
    ///             let _ = handle.respond(call, ToolResult::error(format!("{:?} is not supported", tool.name())));
    ///         }
    ///     }
    ///     Ok::<(), std::io::Error>(())
    /// }))?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn start_on(
        opts: Options,
        executor: Arc<Executor<'static>>,
    ) -> io::Result<IdeServer> {
        IdeServer::start_with(opts, Spawner::Executor(executor), None).await
    }

    /// As [`IdeServer::start`], with events handed to `handler` instead of
    /// [`IdeServer::next_event`] (which then returns `None`): in order, one at a time, with no
    /// lock held, from the task that produced them (a connection's, the timer, the acceptor) or
    /// the thread calling a [`Handle`] method, unless the handler is busy elsewhere, which then
    /// delivers them after its current call. One at a time holds on smol's global executor even
    /// when it runs tasks on several threads (`SMOL_THREADS`). A tool call answered from inside
    /// the handler is read, answered and written in one turn of the connection's task, with no
    /// hand-off (the lowest latency). The same concept as the blocking runtime's
    /// `IdeServer::start_with_handler`, with the same name.
    ///
    /// Requests that arrive together (several in one read) are answered together: an answer given
    /// inside the handler while more of those events wait for it is written with the next one, in
    /// one system call, once the handler has had them all (at most 64 events, or 64 KiB of answers
    /// for one connection, at a time; requests that arrive meanwhile are the next burst).
    ///
    /// The handler is a plain closure, not a future: it must return quickly, since it holds up
    /// the executor thread it runs on. Calls that take time (an `openDiff` waiting for the user)
    /// are kept by their [`CallId`] and answered later from any task or thread through a
    /// [`Handle`] (e.g. from a task the handler spawns). Use the `&Handle` it is given rather than
    /// capturing one (that would keep the server alive in a cycle). A panic in the handler is
    /// caught: that event is dropped and later ones are delivered as usual.
    ///
    /// The tasks run on smol's global executor; [`IdeServer::start_with_handler_on`] puts them on
    /// an executor of the host's.
    ///
    /// ```no_run
    /// use claude_ide_bridge_smol::{Event, IdeServer, Options, ToolResult};
    ///
    /// smol::block_on(async {
    ///     let server = IdeServer::start_with_handler(
    ///         Options::new(vec!["/home/me/project".into()], "MyEditor"),
    ///         |event, handle| {
    ///             if let Event::ToolCall { call, tool } = event {
    ///                 let _ = handle.respond(call, ToolResult::error(format!("{:?} is not supported", tool.name())));
    ///             }
    ///         },
    ///     )
    ///     .await?;
    ///     // ... the host's own work; the handler runs meanwhile ...
    ///     server.stop().await;
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn start_with_handler(
        opts: Options,
        handler: impl FnMut(Event, &Handle) + Send + 'static,
    ) -> io::Result<IdeServer> {
        IdeServer::start_with(opts, Spawner::Global, Some(Box::new(handler))).await
    }

    /// [`IdeServer::start_with_handler`] with the tasks, and so the handler, on `executor` (as
    /// [`IdeServer::start_on`]): for a host that runs its own executor (its threads, its
    /// scheduling) and wants the server to add none. Events are still delivered one at a time
    /// when several threads run the executor. The executor must be run for the server to make
    /// progress.
    pub async fn start_with_handler_on(
        opts: Options,
        executor: Arc<Executor<'static>>,
        handler: impl FnMut(Event, &Handle) + Send + 'static,
    ) -> io::Result<IdeServer> {
        IdeServer::start_with(opts, Spawner::Executor(executor), Some(Box::new(handler))).await
    }

    async fn start_with(
        opts: Options,
        spawner: Spawner,
        handler: Option<Handler>,
    ) -> io::Result<IdeServer> {
        let (listener, core) = Core::start(&opts)?;
        let addr = listener.local_addr()?;
        let listener = Async::new(listener)?;
        let lock_path = core.lock_path().map(Path::to_path_buf);
        let (tx, rx) = async_channel::unbounded();
        let sink = match handler {
            None => Sink::Channel(tx),
            // The sender is dropped: `next_event` returns `None` at once.
            Some(_) => Sink::Handler,
        };
        let (timer_bell, timer_wait) = bell();
        let (stop_bell, stop_wait) = bell();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                core,
                drained: Drained::default(),
                conns: HashMap::new(),
                events: Some(sink),
                delivery: Delivery::default(),
                tasks: Vec::new(),
                stopped: false,
            }),
            handler: handler.map(Mutex::new),
            timer_bell,
            stop_bell,
            addr,
            spawner,
            backlog: Backlog::default(),
        });
        let timer = shared.spawner.spawn(shared.clone().timer_loop(timer_wait));
        let acceptor = shared
            .spawner
            .spawn(shared.clone().accept_loop(listener, stop_wait));
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
        self.shared.backlog.taken(self.events.recv().await.ok())
    }

    /// The next event if one is ready.
    pub fn try_next_event(&self) -> Option<Event> {
        self.shared.backlog.taken(self.events.try_recv().ok())
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
        self.shared
            .answer(true, |st| st.core.server.respond(call, result))
    }

    /// Answers a compatibility request (see `Server::respond_compat`).
    pub fn respond_compat(
        &self,
        call: CallId,
        result: Result<serde_json::Value, RpcError>,
    ) -> Result<(), ApiError> {
        self.shared
            .answer(true, |st| st.core.server.respond_compat(call, result))
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
