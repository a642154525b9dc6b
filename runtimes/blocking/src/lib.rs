//! # claude-ide-bridge-blocking
//!
//! The `claude-ide-bridge` engine on std threads and `std::net`: an acceptor thread, a reader and
//! a writer thread per connection, one timer thread, and events on a `std::sync::mpsc` channel.
//! The engine sits in an `Arc<Mutex<_>>`; no thread holds the lock while it blocks on a socket, so
//! a peer that stops reading blocks only its own writer. Answers ([`Handle::respond`]) are written
//! at once from the answering thread with a non-blocking send when the socket takes them; the
//! writer thread is woken only for what a full socket left over, and for the answers a host gives
//! while more events wait for its `next_event` (requests that arrived together), which it writes
//! in as few system calls as they accumulate.
//!
//! ```no_run
//! use claude_ide_bridge_blocking::{Event, IdeServer, Options, ToolResult};
//!
//! let server = IdeServer::start(Options::new(vec!["/home/me/project".into()], "MyEditor"))?;
//! println!("port {}, lock file {:?}", server.port(), server.lock_path());
//! let handle = server.handle(); // Clone + Send + Sync: answer from any thread
//! while let Some(event) = server.next_event() {
//!     if let Event::ToolCall { call, tool } = event {
//!         let _ = handle.respond(call, ToolResult::error(format!("{:?} is not supported", tool.name())));
//!     }
//! }
//! server.stop();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The smol runtime (`claude-ide-bridge-smol`) has the same types and entry points with the same
//! names (`start`, `start_with_handler`, awaited there).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

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

/// A wake-up flag a writer thread sleeps on.
#[derive(Default)]
struct Bell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Bell {
    fn ring(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        while !*rung {
            rung = self.cv.wait(rung).unwrap_or_else(|e| e.into_inner());
        }
        *rung = false;
    }
}

struct Conn {
    stream: TcpStream,
    bell: Arc<Bell>,
    /// The writer thread holds a copy of the head of the output and is writing it outside the
    /// lock: nobody else may write until it has advanced.
    writing: bool,
}

impl Wire for Conn {
    /// A send that cannot block (`MSG_DONTWAIT`): the socket itself stays in blocking mode for its
    /// reader and writer threads.
    fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        try_send(&self.stream, buf)
    }
    fn shutdown(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
    fn wake_writer(&self) {
        self.bell.ring();
    }
    fn writing(&self) -> bool {
        self.writing
    }
}

#[cfg(unix)]
fn try_send(stream: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    use rustix::net::{send, SendFlags};
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = SendFlags::DONTWAIT;
    Ok(send(stream, buf, flags)?)
}

#[cfg(not(unix))]
fn try_send(_: &TcpStream, _: &[u8]) -> io::Result<usize> {
    Err(io::ErrorKind::WouldBlock.into())
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
    threads: Vec<JoinHandle<()>>,
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
    Channel(mpsc::Sender<Event>),
    /// To the handler of [`IdeServer::start_with_handler`], through [`State::delivery`].
    Handler,
}

/// The handler of [`IdeServer::start_with_handler`].
type Handler = Box<dyn FnMut(Event, &Handle) + Send>;

struct Shared {
    state: Mutex<State>,
    handler: Option<Mutex<Handler>>,
    timer: Condvar,
    addr: SocketAddr,
    /// Events waiting for the host: sent to [`IdeServer::next_event`] and not taken yet, or queued
    /// for the handler and not handed to it yet. Readers look at it before every read, without
    /// the lock.
    backlog: Backlog,
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
                    let _ = tx.send(e);
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
            self.timer.notify_one();
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

    /// Hands queued events to the handler, in order, one at a time, with the lock not held. When
    /// another thread is already doing so (or this one, re-entered from the handler through a
    /// [`Handle`]), that thread delivers them after its current call. Called after every flush,
    /// once the lock is released; does nothing without a handler.
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
    /// connection's writer thread, woken, which writes what accumulated by the time it runs in one
    /// system call while the host goes on; the answer given with no event waiting is written at
    /// once from this thread, with anything still pending. (A handler's answers are held by
    /// [`Delivery`] instead.)
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

    fn accept_loop(self: &Arc<Self>, listener: TcpListener) {
        for stream in listener.incoming() {
            if self.lock().stopped {
                return;
            }
            match stream {
                Ok(stream) => {
                    if let Err(e) = self.add(stream) {
                        self.lock().core.log(|| format!("accept failed: {e}"));
                    }
                }
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn add(self: &Arc<Self>, stream: TcpStream) -> io::Result<()> {
        let _ = stream.set_nodelay(true);
        let reader = stream.try_clone()?;
        let writer = stream.try_clone()?;
        let bell = Arc::new(Bell::default());
        let mut st = self.lock();
        if st.stopped {
            return Ok(());
        }
        let now = st.core.clock.now();
        let conn = st.core.server.accept(now);
        st.conns.insert(
            conn,
            Conn {
                stream,
                bell: bell.clone(),
                writing: false,
            },
        );
        st.threads.retain(|t| !t.is_finished());
        let me = self.clone();
        let r = thread::Builder::new()
            .name(format!("ide-bridge-read-{}", conn.0))
            .spawn(move || me.read_loop(conn, reader));
        let me = self.clone();
        let w = thread::Builder::new()
            .name(format!("ide-bridge-write-{}", conn.0))
            .spawn(move || me.write_loop(conn, writer, bell));
        match (r, w) {
            (Ok(r), Ok(w)) => st.threads.extend([r, w]),
            (r, w) => {
                st.threads.extend(r.into_iter().chain(w));
                self.close_conn(&mut st, conn);
            }
        }
        self.flush(&mut st);
        drop(st);
        self.deliver();
        Ok(())
    }

    fn close_conn(&self, st: &mut State, conn: ConnectionId) {
        if let Some(c) = st.conns.get(&conn) {
            let _ = c.stream.shutdown(Shutdown::Both);
            c.bell.ring();
        }
        st.core.server.handle_close(conn);
    }

    /// The host is [`MAX_HOST_BACKLOG`] or more events behind (and the server still runs). The
    /// lock is only taken when it is.
    fn host_behind(&self) -> bool {
        self.backlog.is_full() && !self.lock().stopped
    }

    /// Returns once the host is less than [`MAX_HOST_BACKLOG`] events behind: until then this
    /// connection is not read (the peer's bytes wait in the socket, and then in the peer).
    fn wait_for_host(&self, conn: ConnectionId) {
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
            thread::sleep(BACKLOG_POLL);
        }
    }

    fn read_loop(self: &Arc<Self>, conn: ConnectionId, mut stream: TcpStream) {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            self.wait_for_host(conn);
            match stream.read(&mut buf) {
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

    fn write_loop(self: &Arc<Self>, conn: ConnectionId, mut stream: TcpStream, bell: Arc<Bell>) {
        let mut chunk = Vec::with_capacity(WRITE_CHUNK);
        loop {
            {
                let mut st = self.lock();
                let out = st.core.server.transmit(conn);
                if !out.is_empty() && !st.stopped {
                    chunk.clear();
                    chunk.extend_from_slice(&out[..out.len().min(WRITE_CHUNK)]);
                    if let Some(c) = st.conns.get_mut(&conn) {
                        c.writing = true;
                    }
                } else if st.stopped || st.core.server.should_close(conn) {
                    self.close_conn(&mut st, conn);
                    st.conns.remove(&conn);
                    self.flush(&mut st);
                    drop(st);
                    self.deliver();
                    return;
                } else {
                    drop(st);
                    bell.wait();
                    continue;
                }
            }
            // The lock is not held while the socket may block.
            match stream.write(&chunk) {
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
                _ => {
                    let mut st = self.lock();
                    self.close_conn(&mut st, conn);
                    st.conns.remove(&conn);
                    self.flush(&mut st);
                    drop(st);
                    self.deliver();
                    return;
                }
            }
        }
    }

    fn timer_loop(self: &Arc<Self>) {
        let mut st = self.lock();
        loop {
            if st.stopped {
                return;
            }
            let now = st.core.clock.now();
            match st.core.server.poll_timeout() {
                Some(deadline) if deadline <= now => {
                    st.core.server.handle_timeout(now);
                    self.flush(&mut st);
                    drop(st);
                    self.deliver();
                    st = self.lock();
                }
                Some(deadline) => {
                    st = self
                        .timer
                        .wait_timeout(st, deadline - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                None => st = self.timer.wait(st).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }
}

/// A running server: listening, advertised by its lock file, delivering [`Event`]s.
///
/// Dropping it stops it (as [`IdeServer::stop`]) and removes the lock file, also when a panic
/// unwinds through the thread that owns it.
pub struct IdeServer {
    shared: Arc<Shared>,
    events: mpsc::Receiver<Event>,
    acceptor: Option<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
    lock_path: Option<PathBuf>,
}

impl IdeServer {
    /// Binds, writes the lock file, and starts the threads. Events are read with
    /// [`IdeServer::next_event`] on a thread of the host's. Read them as they come: while
    /// [`MAX_HOST_BACKLOG`] (4096) events wait, the server
    /// stops reading from its connections (so that a peer cannot pile them up in front of a slow
    /// host), and goes on once the host has caught up.
    pub fn start(opts: Options) -> io::Result<IdeServer> {
        IdeServer::start_inner(opts, None)
    }

    /// As [`IdeServer::start`], with events handed to `handler` instead of
    /// [`IdeServer::next_event`] (which then returns `None`): in order, one at a time, with no
    /// lock held, on the thread that produced them (a connection's reader, the timer, a thread
    /// calling a [`Handle`] method) unless the handler is busy on another thread, which then
    /// delivers them after its current call. A tool call answered from inside the handler is
    /// read, answered and written by one thread, with no hand-off (the lowest latency).
    ///
    /// Requests that arrive together (several in one read) are answered together: an answer given
    /// inside the handler while more of those events wait for it is written with the next one, in
    /// one system call, once the handler has had them all (at most 64 events, or 64 KiB of answers
    /// for one connection, at a time; requests that arrive meanwhile are the next burst).
    ///
    /// A panic in the handler drops that event (it is logged) and later events are delivered.
    /// The handler must return quickly: it holds up the thread it runs on. Calls that take time
    /// (an `openDiff` waiting for the user) are kept by their [`CallId`] and answered later from
    /// any thread through a [`Handle`]. Use the `&Handle` it is given rather than capturing one
    /// (that would keep the server alive in a cycle).
    ///
    /// ```no_run
    /// use claude_ide_bridge_blocking::{Event, IdeServer, Options, ToolResult};
    ///
    /// let server = IdeServer::start_with_handler(
    ///     Options::new(vec!["/home/me/project".into()], "MyEditor"),
    ///     |event, handle| {
    ///         if let Event::ToolCall { call, tool } = event {
    ///             let _ = handle.respond(call, ToolResult::error(format!("{:?} is not supported", tool.name())));
    ///         }
    ///     },
    /// )?;
    /// # drop(server);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_with_handler(
        opts: Options,
        handler: impl FnMut(Event, &Handle) + Send + 'static,
    ) -> io::Result<IdeServer> {
        IdeServer::start_inner(opts, Some(Box::new(handler)))
    }

    fn start_inner(opts: Options, handler: Option<Handler>) -> io::Result<IdeServer> {
        let (listener, core) = Core::start(&opts)?;
        let addr = listener.local_addr()?;
        let lock_path = core.lock_path().map(Path::to_path_buf);
        let (tx, rx) = mpsc::channel();
        let sink = match handler {
            None => Sink::Channel(tx),
            Some(_) => Sink::Handler,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                core,
                drained: Drained::default(),
                conns: HashMap::new(),
                events: Some(sink),
                delivery: Delivery::default(),
                threads: Vec::new(),
                stopped: false,
            }),
            handler: handler.map(Mutex::new),
            timer: Condvar::new(),
            addr,
            backlog: Backlog::default(),
        });
        let mut server = IdeServer {
            shared: shared.clone(),
            events: rx,
            acceptor: None,
            timer: None,
            lock_path,
        };
        let me = shared.clone();
        server.timer = Some(
            thread::Builder::new()
                .name("ide-bridge-timer".into())
                .spawn(move || me.timer_loop())?,
        );
        let me = shared;
        server.acceptor = Some(
            thread::Builder::new()
                .name("ide-bridge-accept".into())
                .spawn(move || me.accept_loop(listener))?,
        );
        Ok(server)
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

    /// A handle for answering calls and sending notifications from any thread.
    pub fn handle(&self) -> Handle {
        Handle {
            shared: self.shared.clone(),
        }
    }

    /// The next event, waiting for it; `None` once the server has stopped.
    pub fn next_event(&self) -> Option<Event> {
        self.shared.backlog.taken(self.events.recv().ok())
    }

    /// The next event, waiting at most `timeout`.
    pub fn next_event_timeout(&self, timeout: Duration) -> Option<Event> {
        self.shared
            .backlog
            .taken(self.events.recv_timeout(timeout).ok())
    }

    /// The next event if one is ready.
    pub fn try_next_event(&self) -> Option<Event> {
        self.shared.backlog.taken(self.events.try_recv().ok())
    }

    /// Stops: pending diffs are answered `DIFF_REJECTED`, clients are sent Close 1001 and given
    /// up to 2 s to finish, then every socket is closed, the lock file removed and the threads
    /// joined.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        let shared = &self.shared;
        shared.with(|st| {
            let now = st.core.clock.now();
            st.core.server.shutdown(now)
        });
        let give_up = Instant::now() + STOP_GRACE;
        while !shared.lock().core.server.is_idle() && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(5));
        }
        let threads = {
            let mut st = shared.lock();
            st.stopped = true;
            for c in st.conns.values() {
                let _ = c.stream.shutdown(Shutdown::Both);
                c.bell.ring();
            }
            st.events = None;
            st.delivery.queue.clear();
            st.core.remove_lock_file();
            shared.timer.notify_all();
            std::mem::take(&mut st.threads)
        };
        // Wake the acceptor with a connection of our own.
        let mut wake = shared.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(if wake.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            let _ = acceptor.join();
        }
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for IdeServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Answers calls, sends notifications and changes settings from any thread. Every method returns
/// without blocking on a socket.
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
