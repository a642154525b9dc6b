//! # claude-ide-bridge-smol
//!
//! The `claude-ide-bridge` engine on smol (`async-io`): an accept task, two tasks per connection
//! (its reader and its writer), one timer task re-armed with `async_io::Timer` whenever the engine's
//! deadline moves, and events in a queue read by `next_event` (`wake.rs`). What the tasks share
//! (the engine, delivery, answering, the [`Handle`]) is `claude-ide-bridge-runtime`'s, written
//! once for both runtimes; this crate only runs the loops. The engine's lock is never held across an `.await`.
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
//!             let _ = handle.respond(call, ToolResult::error(format!("{} is not supported", tool.name().as_str())));
//!         }
//!     }
//!     server.stop().await;
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Tasks run on smol's global executor (`smol::spawn`), or on an executor of the host's with
//! [`IdeServer::start_on`]: run the host's event loop as a task of that executor, on that
//! thread, and a tool call is read, answered and written in one turn, with no thread hand-off. Answers
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
//! the same names (`start`, `start_with_handler`) and hands out the same [`Handle`]; the `_on`
//! variants, which take an executor, are smol's only.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::{future, AsyncWriteExt};
use smol::{Executor, Task};

pub use claude_ide_bridge_runtime::api::*;

use claude_ide_bridge_runtime::{
    AfterInput, Events, Handler, Next, RunningServer, Wire, BACKLOG_POLL, READ_CHUNK, STOP_GRACE,
};

mod wake;

use wake::{bell, Bell, EventQueue, Ring};

type Stream = Async<TcpStream>;

/// A connection's socket as the shared part writes to it.
struct Conn {
    stream: Arc<Async<TcpStream>>,
    bell: Ring,
    /// Closed at [`Wire::shutdown`]: ends the reader's wait for the socket to be readable, which
    /// a shutdown of our own side does not end on every OS (on Windows the socket never reports
    /// it, and the task would wait for the peer).
    hangup: Ring,
    /// Wakes the reader waiting for the peer to read its output.
    resume: Ring,
}

impl Wire for Conn {
    /// The socket is non-blocking: a full socket answers `WouldBlock`.
    fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.stream.get_ref().write(buf)
    }
    fn shutdown(&self) {
        let _ = self.stream.get_ref().shutdown(Shutdown::Both);
        self.hangup.close();
    }
    fn wake_writer(&self) {
        self.bell.ring();
    }
    fn wake_reader(&self) {
        self.resume.ring();
    }
}

/// What a connection's reader waits on besides its socket.
struct Wakes {
    /// Closed when the connection is shut down here.
    hung_up: Arc<Bell>,
    /// Rung when the peer has read enough of its output ([`AfterInput::WaitForOutput`]).
    resumed: Arc<Bell>,
}

/// Where the tasks run.
enum Spawner {
    Global,
    Executor(Arc<Executor<'static>>),
}

/// The tasks' side: the shared part, where tasks run, and the tasks to await when stopping.
struct Tasks {
    shared: Arc<RunningServer>,
    spawner: Spawner,
    stop_bell: Ring,
    tasks: Mutex<Vec<Task<()>>>,
}

impl Tasks {
    fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) {
        let task = match &self.spawner {
            Spawner::Global => smol::spawn(f),
            Spawner::Executor(ex) => ex.spawn(f),
        };
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    async fn accept_loop(self: Arc<Self>, listener: Async<TcpListener>, stop: Arc<Bell>) {
        // Never more than one accept before the others run, and none after a stop (`accept` is
        // preferred over the stop bell while connections wait).
        while !self.shared.is_stopped() {
            let accepted = future::or(async { Some(listener.accept().await) }, async {
                stop.wait().await;
                None
            })
            .await;
            // While the host is behind, nothing new is read anyway: the socket just accepted
            // waits here, before its handshake's time starts, and the next ones in the listen
            // queue (the system's, bounded), instead of each holding a task and a descriptor.
            while self.shared.host_behind() {
                Timer::after(BACKLOG_POLL).await;
            }
            match accepted {
                None => return,
                Some(Ok((stream, _))) => self.add(stream),
                Some(Err(_)) => drop(Timer::after(Duration::from_millis(10)).await),
            }
            future::yield_now().await;
        }
    }

    fn add(self: &Arc<Self>, stream: Async<TcpStream>) {
        let _ = stream.get_ref().set_nodelay(true);
        let stream = Arc::new(stream);
        let (ring, wait) = bell();
        let (hangup, hung_up) = bell();
        let (resume, resumed) = bell();
        let wire = Box::new(Conn {
            stream: stream.clone(),
            bell: ring,
            hangup,
            resume,
        });
        self.shared.add(wire, |conn| {
            // The reader and the writer are tasks of their own: the writer, which answers leave
            // without (they are written from the task that gives them), is then not polled at
            // every wake-up of the reader, as it was when both were one task (`zip`).
            let (me, reading) = (self.clone(), stream.clone());
            let wakes = Wakes { hung_up, resumed };
            self.spawn(async move { me.read_loop(conn, &reading, wakes).await });
            let me = self.clone();
            self.spawn(async move { me.write_loop(conn, &stream, wait).await });
            Ok(())
        });
    }

    async fn read_loop(&self, conn: ConnectionId, stream: &Stream, wakes: Wakes) {
        let Wakes { hung_up, resumed } = wakes;
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            if self.shared.pause_reading(conn) {
                while self.shared.reader_waits(conn) {
                    Timer::after(BACKLOG_POLL).await;
                }
            }
            // Read first, and on `WouldBlock` wait with `readable()`, whose readiness is used up
            // when it reports it (`AsyncRead` reads again instead, leaving it stale: one more
            // read that finds nothing per call). Others run first when events wait for the host
            // (it answers, and the next request is often in by the next read: on one CPU the
            // peer, woken by the answer, runs before this task does, and its next request is
            // read with no wait on the reactor, whose five system calls cost more than this
            // task's turn), and after a read that filled the buffer: a peer that keeps the
            // socket full (messages that give no event and no output, written faster than they
            // are read) would otherwise keep this task from ever waiting, and the executor's
            // thread from the timer, the acceptor, the other connections and this one's writer.
            match stream.get_ref().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => match self.shared.input(conn, &buf[..n]) {
                    AfterInput::WaitForOutput => {
                        // Until the peer has read enough, or the connection ends (either bell
                        // closed: the reader reads on and meets the end).
                        while self.shared.output_waits(conn) {
                            let woke = future::or(resumed.wait(), hung_up.wait());
                            if !woke.await {
                                break;
                            }
                        }
                    }
                    AfterInput::HostFirst => future::yield_now().await,
                    AfterInput::Read if n == buf.len() => future::yield_now().await,
                    AfterInput::Read => {}
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Ends when readable, or when the socket was shut down here (`hung_up` is
                    // closed; nothing is ever sent on it).
                    let wait = async { stream.readable().await.is_err() };
                    if future::or(wait, async { !hung_up.wait().await }).await {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.shared.read_ended(conn);
    }

    async fn write_loop(&self, conn: ConnectionId, mut stream: &Stream, bell: Arc<Bell>) {
        let mut chunk = Vec::new();
        loop {
            match self.shared.next_output(conn, &mut chunk) {
                Next::Wait => {
                    if !bell.wait().await {
                        return;
                    }
                }
                Next::Close => break,
                Next::Write => match stream.write(&chunk).await {
                    Ok(n) if n > 0 => self.shared.written(conn, n),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                        self.shared.written(conn, 0)
                    }
                    _ => break,
                },
            }
        }
        self.shared.writer_done(conn);
    }

    async fn timer_loop(self: Arc<Self>, bell: Arc<Bell>) {
        while let Some(wait) = self.shared.timer() {
            let sleep = async {
                match wait {
                    Some(d) => drop(Timer::after(d).await),
                    None => future::pending().await,
                }
            };
            future::or(sleep, async {
                bell.wait().await;
            })
            .await;
            self.shared.on_timer();
        }
    }

    /// The part of stopping that needs no waiting; returns the tasks to await.
    fn stop_hard(&self) -> Left {
        Left(self.shared.stop_hard(|| {
            self.stop_bell.close();
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()))
        }))
    }
}

/// How long a stop awaits the server's tasks once their sockets are closed.
const JOIN_GRACE: Duration = Duration::from_secs(5);

/// The tasks left at a stop, detached when dropped: a `stop` no longer awaited (a host's timeout
/// around it) or a `Drop` leaves them to end on their own instead of cancelling them half way,
/// which would leave a connection's socket and buffers registered until the last `Handle` goes.
struct Left(Vec<Task<()>>);

impl Drop for Left {
    fn drop(&mut self) {
        self.0.drain(..).for_each(Task::detach);
    }
}

/// A running server: listening, advertised by its lock file, delivering [`Event`]s.
///
/// Dropping it stops it without waiting (clients are sent Close 1001, sockets closed, the lock
/// file removed), also when a panic unwinds through the task that owns it; prefer
/// [`IdeServer::stop`], which lets clients finish the close handshake.
pub struct IdeServer {
    tasks: Arc<Tasks>,
    events: Arc<EventQueue>,
}

/// Its port and lock file (for a host's own `Debug`).
impl std::fmt::Debug for IdeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdeServer")
            .field("port", &self.port())
            .field("lock_path", &self.lock_path())
            .finish_non_exhaustive()
    }
}

impl IdeServer {
    /// Binds, writes the lock file, and spawns the tasks on smol's global executor (which runs
    /// them on its own thread: a host awaiting [`IdeServer::next_event`] elsewhere is one thread
    /// hand-off away from them; see [`IdeServer::start_on`]). Read events as they come: while
    /// [`MAX_HOST_BACKLOG`] (4096) events wait, the server stops reading from its connections (so
    /// that a peer cannot pile them up in front of a slow host), and goes on once the host has
    /// caught up.
    pub async fn start(opts: Options) -> io::Result<IdeServer> {
        IdeServer::start_with(opts, Spawner::Global, None).await
    }

    /// As [`IdeServer::start`], with the tasks spawned on `executor`. Run the host's event loop as
    /// a task of the same executor, on the same thread (e.g.
    /// `smol::block_on(executor.run(executor.spawn(host)))`) and a tool call is read, handed to the
    /// host, answered and written in one turn of one thread, with no hand-off and no extra look at
    /// the sockets (the lowest latency; a host passed to `run` or `block_on` directly rather than
    /// spawned costs a few more system calls per call, each time an event wakes it). The executor must be run for the server to make progress. Answers to
    /// requests that arrived together are written together, in one system call, once the host task
    /// has answered those it had waiting and yields.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use claude_ide_bridge_smol::{Event, IdeServer, Options, ToolResult};
    ///
    /// let ex = Arc::new(smol::Executor::new());
    /// let on = ex.clone();
    /// smol::block_on(ex.run(ex.spawn(async move {
    ///     let server = IdeServer::start_on(Options::new(vec!["/home/me/project".into()], "MyEditor"), on).await?;
    ///     let handle = server.handle();
    ///     while let Some(event) = server.next_event().await {
    ///         if let Event::ToolCall { call, tool } = event {
    ///             let _ = handle.respond(call, ToolResult::error(format!("{} is not supported", tool.name().as_str())));
    ///         }
    ///     }
    ///     Ok::<(), std::io::Error>(())
    /// })))?;
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
    /// lock held, from the task that produced them (a connection's, the timer, the acceptor),
    /// unless the handler is busy elsewhere, which then delivers them after its current call;
    /// never from a host's thread or task calling a [`Handle`] method (which may hold a lock the
    /// handler takes: the timer's task delivers what waits then), nor from the stop ([`IdeServer::stop`], the
    /// drop), whose caller may hold a lock the handler takes: the calls a stop cancels reach the
    /// handler from the server's own tasks, once that lock is let go (then after the stop
    /// returned: a stop under such a lock waits up to 5 s for the task blocked on it, and
    /// returns; one without it returns at once). One at a time holds on smol's global executor even
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
    /// [`Handle`] (e.g. from a task the handler spawns). The `&Handle` it is given serves; a
    /// captured one works too (the stop drops the handler, and with it what it holds, once the
    /// server's tasks have handed it the calls the stop cancelled: an executor no longer run
    /// after a drop keeps it). A panic in the handler is caught: that event is dropped (a call
    /// it panicked on answered as failed) and later ones are delivered as usual.
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
    ///                 let _ = handle.respond(call, ToolResult::error(format!("{} is not supported", tool.name().as_str())));
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
        let (tx, rx) = wake::event_queue();
        // With a handler the sender is dropped: `next_event` returns `None` at once.
        let events = Events::new(handler, move |e| tx.send(e));
        let (ring, timer_wait) = bell();
        let wake_timer = move || ring.ring();
        let (listener, shared) = RunningServer::start(&opts, events, wake_timer)?;
        let listener = Async::new(listener)?;
        let (stop_bell, stop_wait) = bell();
        let tasks = Arc::new(Tasks {
            shared,
            spawner,
            stop_bell,
            tasks: Mutex::new(Vec::new()),
        });
        tasks.spawn(tasks.clone().timer_loop(timer_wait));
        tasks.spawn(tasks.clone().accept_loop(listener, stop_wait));
        Ok(IdeServer { tasks, events: rx })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.tasks.shared.addr()
    }

    /// The lock file's path (`None` with [`LockFileMode::Disabled`]).
    pub fn lock_path(&self) -> Option<&Path> {
        self.tasks.shared.lock_path()
    }

    /// A handle for answering calls and sending notifications from any task or thread.
    pub fn handle(&self) -> Handle {
        self.tasks.shared.handle()
    }

    /// The next event; `None` once the server has stopped, and at once, always, when it was
    /// started with a handler ([`IdeServer::start_with_handler`]: the handler has the events;
    /// [`IdeServer::is_stopped`] tells the stop apart). Cancel-safe: a future dropped before it
    /// is ready (raced against a timer or a stop signal) takes no event with it.
    pub async fn next_event(&self) -> Option<Event> {
        self.tasks.shared.taken(self.events.next().await)
    }

    /// The next event if one is ready; `None` when none is, and every time after the server has
    /// stopped ([`IdeServer::is_stopped`] tells which).
    pub fn try_next_event(&self) -> Option<Event> {
        self.tasks.shared.taken(self.events.try_next())
    }

    /// Whether the server has stopped, or is stopping: no event comes any more, and
    /// [`IdeServer::stop`] is left to do. (A signal with `Options::signal_cleanup` removes the
    /// lock file and ends the process: nothing is left to see.)
    pub fn is_stopped(&self) -> bool {
        self.tasks.shared.is_stopped()
    }

    /// Stops: the lock file is removed, pending diffs are answered with the tool error of
    /// [`Options::diff_error_at_stop`] (`DIFF_REJECTED` when `None`), clients are sent Close 1001 and given up to 2 s
    /// to finish, then every socket is closed and the tasks
    /// awaited (for up to 5 s: one held in a handler that does not return is left to end on its
    /// own, and the stop returns).
    pub async fn stop(self) {
        let tasks = self.tasks.clone();
        tasks.shared.begin_stop();
        let give_up = Instant::now() + STOP_GRACE;
        while !tasks.shared.is_idle() && Instant::now() < give_up {
            Timer::after(Duration::from_millis(5)).await;
        }
        // Awaited in place: see `Left`. A task still in a handler that does not return (blocked
        // on something only the stopping task would do) is left to end on its own, with those
        // after it, once JOIN_GRACE has passed.
        let mut left = tasks.stop_hard();
        let give_up = Instant::now() + JOIN_GRACE;
        for task in &mut left.0 {
            let ended = async {
                task.await;
                true
            };
            let late = async {
                Timer::at(give_up).await;
                false
            };
            if !future::or(ended, late).await {
                break;
            }
        }
    }
}

impl Drop for IdeServer {
    fn drop(&mut self) {
        // Nobody reads the events any more.
        self.events.close();
        if !self.tasks.shared.is_stopped() {
            self.tasks.shared.begin_stop();
            drop(self.tasks.stop_hard());
        }
    }
}
