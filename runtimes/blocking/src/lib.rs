//! # claude-ide-bridge-blocking
//!
//! The `claude-ide-bridge` engine on std threads and `std::net`: an acceptor thread, a reader and
//! a writer thread per connection, one timer thread, and events on a `std::sync::mpsc` channel.
//! What the threads share (the engine, delivery, answering, the [`Handle`]) is
//! `claude-ide-bridge-runtime`'s, written once for both runtimes; this crate only runs the loops.
//! No thread holds the lock while it blocks on a socket, so a peer that stops reading blocks
//! only its own writer. Answers ([`Handle::respond`]) are written at once from the answering
//! thread with a non-blocking send when the socket takes them; the writer thread is woken only
//! for what a full socket left over, and for the answers a host gives while more events wait for
//! its `next_event` (requests that arrived together), which it writes in as few system calls as
//! they accumulate.
//!
//! ```no_run
//! use claude_ide_bridge_blocking::{Event, IdeServer, Options, ToolResult};
//!
//! let server = IdeServer::start(Options::new(vec!["/home/me/project".into()], "MyEditor"))?;
//! println!("port {}, lock file {:?}", server.port(), server.lock_path());
//! let handle = server.handle(); // Clone + Send + Sync: answer from any thread
//! while let Some(event) = server.next_event() {
//!     if let Event::ToolCall { call, tool } = event {
//!         let _ = handle.respond(call, ToolResult::error(format!("{} is not supported", tool.name().as_str())));
//!     }
//! }
//! server.stop();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The smol runtime (`claude-ide-bridge-smol`) has the same types and entry points with the same
//! names (`start`, `start_with_handler`, awaited there), and hands out the same [`Handle`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub use claude_ide_bridge_runtime::api::*;

use claude_ide_bridge_runtime::{
    send_now, shut_down, stop_listening, AfterInput, Events, Next, RunningServer, Wire,
};
use claude_ide_bridge_runtime::{BACKLOG_POLL, READ_CHUNK, STOP_GRACE};

/// A wake-up that is never lost: a ring while nobody waits is kept (one is enough).
fn bell() -> (SyncSender<()>, Receiver<()>) {
    mpsc::sync_channel(1)
}

/// A connection's socket as the shared part writes to it. Its reader and writer threads use the
/// same socket (one handle, not a `try_clone`): a shutdown must end their blocked calls, which
/// on Windows means cancelling the calls pending on that handle ([`shut_down`]).
struct Conn {
    stream: Arc<TcpStream>,
    bell: SyncSender<()>,
    /// Wakes the reader waiting for the peer to read its output.
    resume: SyncSender<()>,
}

impl Wire for Conn {
    /// A send that cannot block (`MSG_DONTWAIT`): the socket itself stays in blocking mode for its
    /// reader and writer threads.
    fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        send_now(&self.stream, buf)
    }
    fn shutdown(&self) {
        shut_down(&self.stream);
    }
    fn wake_writer(&self) {
        let _ = self.bell.try_send(());
    }
    fn wake_reader(&self) {
        let _ = self.resume.try_send(());
    }
}

/// The threads' side: the shared part, and the threads to join when stopping.
struct Threads {
    shared: Arc<RunningServer>,
    joins: Mutex<Vec<JoinHandle<()>>>,
    /// The acceptor thread, joined by the stop.
    acceptor: Mutex<Option<JoinHandle<()>>>,
    /// A stop has begun ([`Threads::begin_stop`]): a later one only waits for it to finish.
    stopping: std::sync::atomic::AtomicBool,
    /// A handle on the acceptor's listener, to wake it with at a stop, and then whether that
    /// woke it (the port closes once the acceptor, woken, drops its own listener).
    wake: Mutex<Wake>,
}

/// The acceptor's wake-up at a stop ([`Threads::wake_acceptor`]).
enum Wake {
    /// Not woken yet: a handle on its listener.
    Listening(TcpListener),
    /// Woken (or not, when neither way worked: it is then not waited for).
    Done(bool),
}

impl Threads {
    /// Wakes the acceptor of a stopped server, which then ends: its listener shut down (Linux),
    /// or a connection of our own, waiting in the backlog when this is the acceptor's own thread,
    /// for its next accept. Whether it was woken, by this call or an earlier one.
    fn wake_acceptor(&self) -> bool {
        let mut wake = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        if let Wake::Listening(listener) = &*wake {
            let woken = stop_listening(listener)
                || TcpStream::connect_timeout(&self.shared.loopback_addr(), Duration::from_secs(1))
                    .is_ok();
            *wake = Wake::Done(woken);
        }
        matches!(*wake, Wake::Done(true))
    }

    fn spawn(
        self: &Arc<Self>,
        name: String,
        f: impl FnOnce(&Self) + Send + 'static,
    ) -> io::Result<()> {
        let me = self.clone();
        let t = thread::Builder::new().name(name).spawn(move || f(&me))?;
        let mut joins = self.joins.lock().unwrap_or_else(|e| e.into_inner());
        joins.retain(|t| !t.is_finished());
        joins.push(t);
        Ok(())
    }

    fn accept_loop(self: &Arc<Self>, listener: TcpListener) {
        loop {
            let stream = listener.accept().map(|(s, _)| s);
            // While the host is behind, nothing new is read anyway: the socket just accepted
            // waits here, before its handshake's time starts, and the next ones in the listen
            // queue (the system's, bounded), instead of each holding a thread and a descriptor.
            while self.shared.host_behind() {
                thread::sleep(BACKLOG_POLL);
            }
            if self.shared.is_stopped() {
                return;
            }
            let added = stream.and_then(|s| self.add(s));
            if let Err(e) = added {
                self.shared.log(|| format!("accept failed: {e}"));
                thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn add(self: &Arc<Self>, stream: TcpStream) -> io::Result<()> {
        let _ = stream.set_nodelay(true);
        let stream = Arc::new(stream);
        let (reader, writer) = (stream.clone(), stream.clone());
        let (ring, bell) = bell();
        let (resume, resumed) = self::bell();
        let wire = Box::new(Conn {
            stream,
            bell: ring,
            resume,
        });
        self.shared.add(wire, |conn| {
            self.spawn(format!("ide-bridge-read-{}", conn.0), move |me| {
                me.read_loop(conn, reader, resumed)
            })?;
            self.spawn(format!("ide-bridge-write-{}", conn.0), move |me| {
                me.write_loop(conn, writer, bell)
            })
        });
        Ok(())
    }

    fn read_loop(&self, conn: ConnectionId, stream: Arc<TcpStream>, resumed: Receiver<()>) {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            if self.shared.pause_reading(conn) {
                while self.shared.reader_waits(conn) {
                    thread::sleep(BACKLOG_POLL);
                }
            }
            match (&*stream).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if self.shared.input(conn, &buf[..n]) == AfterInput::WaitForOutput {
                        // Until the peer has read enough, or the connection ends (woken then
                        // too, or its wire dropped: the reader reads on and meets the end).
                        while self.shared.output_waits(conn) && resumed.recv().is_ok() {}
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.shared.read_ended(conn);
    }

    fn write_loop(&self, conn: ConnectionId, stream: Arc<TcpStream>, bell: Receiver<()>) {
        let mut chunk = Vec::new();
        loop {
            match self.shared.next_output(conn, &mut chunk) {
                Next::Wait => {
                    let _ = bell.recv();
                }
                Next::Close => break,
                // The lock is not held while the socket may block.
                Next::Write => match (&*stream).write(&chunk) {
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

    fn timer_loop(&self, bell: Receiver<()>) {
        while let Some(wait) = self.shared.timer() {
            match wait {
                Some(d) if d.is_zero() => self.shared.on_timer(),
                Some(d) => {
                    let _ = bell.recv_timeout(d);
                }
                None => {
                    let _ = bell.recv();
                }
            }
        }
    }
}

/// A running server: listening, advertised by its lock file, delivering [`Event`]s.
///
/// Dropping it stops it (as [`IdeServer::stop`]) and removes the lock file, also when a panic
/// unwinds through the thread that owns it.
pub struct IdeServer {
    threads: Arc<Threads>,
    events: mpsc::Receiver<Event>,
    /// Whether [`IdeServer::stop`] has run (its drop then has nothing left to do).
    stop_ran: bool,
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
    /// Binds, writes the lock file, and starts the threads. Events are read with
    /// [`IdeServer::next_event`] on a thread of the host's. Read them as they come: while
    /// [`MAX_HOST_BACKLOG`] (4096) events wait, the server stops reading from its connections (so
    /// that a peer cannot pile them up in front of a slow host), and goes on once the host has
    /// caught up.
    pub fn start(opts: Options) -> io::Result<IdeServer> {
        let (tx, rx) = mpsc::channel();
        let send = move |e| {
            let _ = tx.send(e);
        };
        IdeServer::start_with(opts, Events::Channel(Box::new(send)), rx)
    }

    /// As [`IdeServer::start`], with events handed to `handler` instead of
    /// [`IdeServer::next_event`] (which then returns `None`): in order, one at a time, with no
    /// lock held, on the server's thread that produced them (a connection's reader, the timer)
    /// unless the handler is busy on another thread, which then delivers them after its current
    /// call; never on a host's thread calling a [`Handle`] method (its UI thread, which may hold
    /// a lock the handler takes: the timer's thread delivers what waits then), nor on the thread
    /// stopping the server ([`IdeServer::stop`], [`Stopper::stop`], the drop), which may hold a lock the handler
    /// takes: the calls a stop cancels reach the handler from the server's own threads, once
    /// that lock is let go (then after the stop returned: a stop under such a lock waits up to
    /// 5 s for the thread blocked on it, and returns; one without it returns at once). A tool
    /// call answered from inside the handler is read, answered and written by one thread, with
    /// no hand-off (the lowest latency).
    ///
    /// Requests that arrive together (several in one read) are answered together: an answer given
    /// inside the handler while more of those events wait for it is written with the next one, in
    /// one system call, once the handler has had them all (at most 64 events, or 64 KiB of answers
    /// for one connection, at a time; requests that arrive meanwhile are the next burst).
    ///
    /// A panic in the handler drops that event (it is logged) and later events are delivered.
    /// The handler must return quickly: it holds up the thread it runs on. Calls that take time
    /// (an `openDiff` waiting for the user) are kept by their [`CallId`] and answered later from
    /// any thread through a [`Handle`]. The `&Handle` it is given serves; a captured one works
    /// too (the stop drops the handler, and with it what it holds, once it has the calls the
    /// stop cancelled). A call it panics on is answered as failed.
    ///
    /// ```no_run
    /// use claude_ide_bridge_blocking::{Event, IdeServer, Options, ToolResult};
    ///
    /// let server = IdeServer::start_with_handler(
    ///     Options::new(vec!["/home/me/project".into()], "MyEditor"),
    ///     |event, handle| {
    ///         if let Event::ToolCall { call, tool } = event {
    ///             let _ = handle.respond(call, ToolResult::error(format!("{} is not supported", tool.name().as_str())));
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
        // The sender is dropped: `next_event` returns `None` at once.
        let rx = mpsc::channel().1;
        IdeServer::start_with(opts, Events::Handler(Box::new(handler)), rx)
    }

    fn start_with(
        opts: Options,
        events: Events,
        rx: mpsc::Receiver<Event>,
    ) -> io::Result<IdeServer> {
        let (ring, timer) = bell();
        let wake_timer = move || {
            let _ = ring.try_send(());
        };
        let (listener, shared) = RunningServer::start(&opts, events, wake_timer)?;
        let threads = Arc::new(Threads {
            shared,
            joins: Mutex::new(Vec::new()),
            acceptor: Mutex::new(None),
            stopping: std::sync::atomic::AtomicBool::new(false),
            wake: Mutex::new(Wake::Done(false)),
        });
        let server = IdeServer {
            threads: threads.clone(),
            events: rx,
            stop_ran: false,
        };
        threads.spawn("ide-bridge-timer".into(), |me| me.timer_loop(timer))?;
        let me = threads.clone();
        *threads.wake.lock().unwrap_or_else(|e| e.into_inner()) =
            Wake::Listening(listener.try_clone()?);
        let acceptor = thread::Builder::new()
            .name("ide-bridge-accept".into())
            .spawn(move || me.accept_loop(listener))?;
        *threads.acceptor.lock().unwrap_or_else(|e| e.into_inner()) = Some(acceptor);
        Ok(server)
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.threads.shared.addr()
    }

    /// The lock file's path (`None` with [`LockFileMode::Disabled`]).
    pub fn lock_path(&self) -> Option<&Path> {
        self.threads.shared.lock_path()
    }

    /// A handle for answering calls and sending notifications from any thread.
    pub fn handle(&self) -> Handle {
        self.threads.shared.handle()
    }

    /// A way to stop the server from another thread while one waits in
    /// [`IdeServer::next_event`], which then returns `None`: a host reading events on a thread of
    /// its own has it wait for them, never poll. [`IdeServer::stop`] (or dropping the server)
    /// still follows, on the thread that owns it, to join the threads.
    ///
    /// ```no_run
    /// use claude_ide_bridge_blocking::{IdeServer, Options};
    ///
    /// let server = IdeServer::start(Options::new(vec!["/home/me/project".into()], "MyEditor"))?;
    /// let stopper = server.stopper();
    /// let reader = std::thread::spawn(move || {
    ///     while let Some(event) = server.next_event() {
    ///         println!("{event:?}");
    ///     }
    ///     server.stop();
    /// });
    /// stopper.stop(); // from anywhere: the reader's next_event returns None
    /// reader.join().unwrap();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stopper(&self) -> Stopper {
        Stopper {
            threads: self.threads.clone(),
        }
    }

    /// The next event, waiting for it; `None` once the server has stopped, and at once, always,
    /// when it was started with a handler ([`IdeServer::start_with_handler`]: the handler has
    /// the events; [`IdeServer::is_stopped`] tells the stop apart).
    pub fn next_event(&self) -> Option<Event> {
        self.threads.shared.taken(self.events.recv().ok())
    }

    /// The next event, waiting at most `timeout`. `None` when none came in time, and also, at
    /// once, every time after the server has stopped: a loop around it checks
    /// [`IdeServer::is_stopped`], or it turns into a busy loop once a [`Stopper`] was used.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use claude_ide_bridge_blocking::{IdeServer, Options};
    ///
    /// let server = IdeServer::start(Options::new(vec!["/home/me/project".into()], "MyEditor"))?;
    /// while !server.is_stopped() {
    ///     match server.next_event_timeout(Duration::from_millis(500)) {
    ///         Some(event) => println!("{event:?}"),
    ///         None => { /* the editor's own periodic work */ }
    ///     }
    /// }
    /// server.stop();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn next_event_timeout(&self, timeout: Duration) -> Option<Event> {
        self.threads
            .shared
            .taken(self.events.recv_timeout(timeout).ok())
    }

    /// The next event if one is ready; `None` when none is, and every time after the server has
    /// stopped ([`IdeServer::is_stopped`] tells which).
    pub fn try_next_event(&self) -> Option<Event> {
        self.threads.shared.taken(self.events.try_recv().ok())
    }

    /// Whether the server has stopped, or is stopping ([`Stopper::stop`]): no event comes any
    /// more, and [`IdeServer::stop`] is left to do. (A signal with [`Options::signal_cleanup`]
    /// removes the lock file and ends the process: nothing is left to see.)
    pub fn is_stopped(&self) -> bool {
        self.threads.shared.is_stopped()
    }

    /// Stops: the lock file is removed, pending diffs are answered with the tool error of
    /// [`Options::diff_error_at_stop`] (`DIFF_REJECTED` when `None`), clients are sent Close 1001 and given up to 2 s
    /// to finish, then every socket is closed and the threads
    /// joined (those that end within 5 s: one held in a handler that does not return is left to
    /// end on its own, and the stop returns).
    ///
    /// Called from the handler, it returns once the lock file is gone and the Close is sent, and
    /// the rest (the clients' Close awaited, the sockets and the port closed, the threads joined)
    /// follows on a thread of its own: the clients' answering Close is read by the very thread
    /// the handler runs on. A host that binds the same port again right after must wait for
    /// [`IdeServer::is_stopped`] from another thread, or stop from outside the handler.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        // Stopped already (by `stop`, then dropped). A start that failed half way (no acceptor)
        // still stops what it started: the timer thread, the lock file. Stopped by a `Stopper`,
        // the threads are still to be woken and joined.
        if std::mem::replace(&mut self.stop_ran, true) {
            return;
        }
        self.threads.begin_stop();
        // Stopped from the handler: the clients' Close is read by the very thread it runs on, so
        // the rest is done on a thread of its own and the handler returns.
        let rest = |me: &Threads| me.finish_stop();
        if !self.threads.is_own_thread()
            || self.threads.spawn("ide-bridge-stop".into(), rest).is_err()
        {
            self.threads.finish_stop();
        }
    }
}

/// How long a stop waits for the server's threads to end once their sockets are closed: a
/// thread still in a handler that does not return (blocked on something only the stopping
/// thread would do) is left to end on its own, and the stop goes on.
const JOIN_GRACE: Duration = Duration::from_secs(5);

/// Joins `t` if it ends by `give_up`, looking every 5 ms (a stop only); else leaves it.
fn join_within(t: JoinHandle<()>, give_up: Instant) {
    while !t.is_finished() && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(5));
    }
    if t.is_finished() {
        let _ = t.join();
    }
}

/// Stops an [`IdeServer`] from any thread (see [`IdeServer::stopper`]).
#[derive(Clone)]
pub struct Stopper {
    threads: Arc<Threads>,
}

impl std::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stopper")
            .field("stopped", &self.threads.shared.is_stopped())
            .finish_non_exhaustive()
    }
}

impl Stopper {
    /// The part of [`IdeServer::stop`] that needs no thread of the server's: the lock file is
    /// removed, pending diffs are answered as [`IdeServer::stop`] says, clients are sent Close
    /// 1001 and given up to 2 s to finish, then every socket is closed, the port too, and
    /// `next_event` ends. Later calls do nothing. Called from the handler, it returns once the
    /// Close is sent and the rest follows on a thread of its own: the client's answering Close is
    /// read by the very thread the handler runs on, which would otherwise sit out the 2 s.
    pub fn stop(&self) {
        if !self.threads.begin_stop() {
            return;
        }
        let rest = |me: &Threads| me.close_all();
        if !self.threads.is_own_thread()
            || self.threads.spawn("ide-bridge-stop".into(), rest).is_err()
        {
            self.threads.close_all();
        }
    }
}

impl Threads {
    /// Begins the stop (the lock file removed, the clients sent Close 1001) unless one has begun
    /// already or the server has stopped: whether this call began it.
    fn begin_stop(&self) -> bool {
        use std::sync::atomic::Ordering;
        if self.shared.is_stopped() || self.stopping.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.shared.begin_stop();
        true
    }

    /// Whether this thread is one of the server's (a handler runs on its connections' readers).
    fn is_own_thread(&self) -> bool {
        let me = thread::current().id();
        let joins = self.joins.lock().unwrap_or_else(|e| e.into_inner());
        joins.iter().any(|t| t.thread().id() == me)
    }

    /// Once a stop has begun, the clients' Close awaited (up to 2 s).
    fn await_close(&self) {
        let give_up = Instant::now() + STOP_GRACE;
        while !self.shared.is_stopped() && !self.shared.is_idle() && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// The rest of [`Stopper::stop`] once the stop has begun: the clients' Close awaited, then
    /// every socket closed and the listener too.
    fn close_all(&self) {
        self.await_close();
        self.shared.stop_hard(|| ());
        // The listener closed now, not when the `IdeServer` goes: until then, clients would
        // still connect, and wait for an answer that never comes.
        self.wake_acceptor();
    }

    /// The rest of [`IdeServer::stop`] once the stop has begun (by it or a [`Stopper`]): the
    /// clients' Close awaited, every socket closed, then the threads joined, the acceptor and a
    /// [`Stopper`]'s own stop thread among them.
    fn finish_stop(&self) {
        self.await_close();
        let acceptor = self
            .acceptor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let joins = self.shared.stop_hard(|| {
            std::mem::take(&mut *self.joins.lock().unwrap_or_else(|e| e.into_inner()))
        });
        // A thread cannot join itself: the server dropped from the handler (or its stop failing
        // to start a thread of its own) runs on one of these threads, which then ends on its own
        // once the handler returns.
        let me = thread::current().id();
        // One wait for them all.
        let give_up = Instant::now() + JOIN_GRACE;
        if self.wake_acceptor() {
            if let Some(acceptor) = acceptor.filter(|a| a.thread().id() != me) {
                join_within(acceptor, give_up);
            }
        }
        for t in joins {
            if t.thread().id() != me {
                join_within(t, give_up);
            }
        }
    }
}

impl Drop for IdeServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}
