//! The running server's state both runtimes share, what they do with it after every call into
//! the engine (drain, write or wake, deliver), and the [`Handle`] hosts answer through.
//!
//! A runtime creates it with [`RunningServer::start`] and from then on only runs loops: accepting
//! ([`RunningServer::add`]), reading ([`RunningServer::input`]), writing
//! ([`RunningServer::next_output`], [`RunningServer::written`]), and the timer
//! ([`RunningServer::timer`], [`RunningServer::on_timer`]). Everything that decides something (what
//! to write, when to hold an answer, who runs the handler, when a connection is done) happens here,
//! under one lock that is never held across a blocking call or an `.await`.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use claude_ide_bridge::RpcError;
use claude_ide_bridge::{
    ApiError, CallId, ClientPaths, ConnectionId, Content, EncodedAnswer, Event, Notification,
    Target, ToolResult, ToolSet,
};

use crate::core::{Core, Drained};
use crate::delivery::{act_on_ready, wake_reader_if_wanted, write_held};
use crate::delivery::{Backlog, Conn, Delivery, Wire, MAX_DELIVERED};
use crate::{Options, MAX_HOST_BACKLOG};

/// Largest chunk a writer copies out of the engine per socket write.
pub const WRITE_CHUNK: usize = 64 * 1024;
/// Read buffer per connection.
pub const READ_CHUNK: usize = 16 * 1024;
/// How long a stopping server lets clients finish the close handshake.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// The host's event handler (`IdeServer::start_with_handler`).
pub type Handler = Box<dyn FnMut(Event, &Handle) + Send>;

/// What a connection's reader does after [`RunningServer::input`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterInput {
    /// Reads on.
    Read,
    /// Events wait for the host: a reader on the host's executor lets it run before reading
    /// again (it answers first, and the next request is often in by the next read).
    HostFirst,
    /// The peer does not read what it is sent (its output is past
    /// `Limits::pause_input_above`): the reader reads no more until the peer has read enough,
    /// waiting while [`RunningServer::output_waits`], woken by [`Wire::wake_reader`]. What the
    /// peer sends meanwhile waits in its socket, and then in the peer.
    WaitForOutput,
}

/// Where a server's events go.
pub enum Events {
    /// To the runtime's channel, read by `IdeServer::next_event`: the function sends one.
    Channel(Box<dyn Fn(Event) + Send>),
    /// To a handler, called from the thread or task that produced them.
    Handler(Handler),
}

impl Events {
    /// Events to `handler` when there is one, else to `send`, the sending half of the runtime's
    /// channel (dropped here when unused, so that `next_event` ends at once).
    pub fn new(handler: Option<Handler>, send: impl Fn(Event) + Send + 'static) -> Events {
        match handler {
            Some(h) => Events::Handler(h),
            None => Events::Channel(Box::new(send)),
        }
    }
}

/// Shuts down for reading the listener [`RunningServer::start`] bound, which on Linux ends an
/// `accept` waiting on it. Unlike a connection of the runtime's own it needs no new socket, so it
/// works when the process is out of file handles too; `false` where it is not known to work.
pub fn stop_listening(listener: &TcpListener) -> bool {
    crate::sys::shutdown_listener(listener)
}

/// Sends what a socket in blocking mode takes now, without waiting for room: the bytes sent, or
/// `WouldBlock` (always on Windows, where a blocking socket has no such send: a thread that may
/// block writes there). For a runtime whose reader and writer threads keep the socket blocking.
pub fn send_now(stream: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    crate::sys::send_now(stream, buf)
}

/// Shuts a connection's socket down both ways and ends a read or write that another thread is
/// blocked in on it (the same handle: share the stream, do not `try_clone` it for the reader).
/// On Unix the shutdown does both; Windows' does not end a blocked `recv` or `send`, so the calls
/// pending on this socket handle are cancelled too (`CancelIoEx`): the blocked thread gets an
/// error, and any later call fails at once (the socket is shut down).
pub fn shut_down(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Both);
    crate::sys::cancel_blocked(stream);
}

/// What [`RunningServer::claim`] hands to [`RunningServer::deliver`]: the first event, the handler,
/// and the handle to give it.
struct Claimed {
    event: Event,
    handler: Handler,
    handle: Handle,
}

/// What a connection's writer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Write the chunk [`RunningServer::next_output`] filled, then report it with
    /// [`RunningServer::written`].
    Write,
    /// The connection is done: call [`RunningServer::writer_done`].
    Close,
    /// Nothing to write: wait until woken ([`Wire::wake_writer`]).
    Wait,
}

impl crate::lock::watch::Keeper for RunningServer {
    /// Under the state's lock alone (not `run`, which may hand events to the host on this
    /// thread); stopped, the file was removed at the stop, for good.
    fn restore(&self) -> crate::sys::Restored {
        let mut st = self.lock();
        if st.stopped {
            return crate::sys::Restored::End;
        }
        let written = st.core.restore_lock_file();
        let logs = st.core.take_logs();
        drop(st);
        self.write_logs(logs);
        match written {
            true => crate::sys::Restored::Done,
            false => crate::sys::Restored::Failed,
        }
    }

    fn keep(&self, start: impl FnOnce(&Path, &str) -> Option<crate::sys::WatchEnd>) -> bool {
        let mut st = self.lock();
        let place = st.core.lock_place().filter(|_| !st.stopped);
        let Some((dir, name)) = place else {
            return false;
        };
        st.lock_watch = start(&dir, &name);
        true
    }

    fn log(&self, line: impl FnOnce() -> String) {
        RunningServer::log(self, line)
    }
}

/// The state under the lock.
struct State {
    core: Core,
    /// Reused by every flush (no allocation per call).
    drained: Drained,
    /// The connections by id (a B-tree: no hashing per lookup, and few entries).
    conns: BTreeMap<ConnectionId, Conn>,
    /// The channel of [`Events::Channel`]; `None` with a handler, and once stopped.
    channel: Option<Box<dyn Fn(Event) + Send>>,
    /// Events waiting for the handler, who runs it, the answers it holds.
    delivery: Delivery,
    /// The handler, here when nobody is running it: the thread that delivers takes it out with the
    /// events it claims and puts it back when done (so running it needs no lock of its own).
    handler: Option<Handler>,
    /// The handle given to the handler, kept between deliveries (made once, not per event). It
    /// points back at this server: [`RunningServer::stop_hard`] drops it, which ends that cycle.
    handle: Option<Handle>,
    stopped: bool,
    /// The watch that writes the lock file again when another process removes it (Linux, macOS,
    /// Windows); its end dropped at the stop.
    lock_watch: Option<crate::sys::WatchEnd>,
}

impl State {
    /// `conn` while its reader waits for its peer to read its output ([`AfterInput::WaitForOutput`]):
    /// not once the server stopped, nor once the connection is gone.
    fn paused(&self, conn: ConnectionId) -> Option<&Conn> {
        (self.conns.get(&conn)).filter(|c| !self.stopped && c.reading_paused.get())
    }
}

/// A running server's shared part. Runtimes keep it in an `Arc` and call it from their loops.
pub struct RunningServer {
    state: Mutex<State>,
    /// Whether events go to a handler ([`Events::Handler`]).
    has_handler: bool,
    /// Wakes the runtime's timer loop: the engine's deadline moved, or the server stopped.
    wake_timer: Box<dyn Fn() + Send + Sync>,
    addr: SocketAddr,
    lock_path: Option<PathBuf>,
    /// Events waiting for the host: sent to the channel and not taken yet, or queued for the
    /// handler and not handed to it yet. Readers look at it before every read, without the lock.
    backlog: Backlog,
    /// The logger, called without the lock held (see [`Core::take_logs`]).
    logger: Option<crate::Logger>,
}

impl RunningServer {
    /// What both runtimes do at start: binds the listener (blocking mode; the runtime wraps it as
    /// it needs), takes the token (fresh from the OS CSPRNG unless given), makes the workspace
    /// folders absolute POSIX strings, removes this host's stale lock files, writes `<port>.lock`
    /// as the options say, and makes the shared state. Events go
    /// where `events` says; `wake_timer` is called whenever the engine's next deadline moves and
    /// when the server stops.
    pub fn start(
        opts: &Options,
        events: Events,
        wake_timer: impl Fn() + Send + Sync + 'static,
    ) -> io::Result<(TcpListener, Arc<RunningServer>)> {
        let (listener, mut core) = Core::start(opts)?;
        let logger = core.logger().cloned();
        let started = core.take_logs();
        let addr = listener.local_addr()?;
        let lock_path = core.lock_path().map(Path::to_path_buf);
        let (channel, handler) = match events {
            Events::Channel(send) => (Some(send), None),
            Events::Handler(h) => (None, Some(h)),
        };
        let has_handler = handler.is_some();
        let shared = RunningServer {
            state: Mutex::new(State {
                core,
                drained: Drained::default(),
                conns: BTreeMap::new(),
                channel,
                delivery: Delivery::default(),
                handler,
                handle: None,
                stopped: false,
                lock_watch: None,
            }),
            has_handler,
            wake_timer: Box::new(wake_timer),
            addr,
            lock_path,
            backlog: Backlog::default(),
            logger,
        };
        shared.write_logs(started);
        let shared = Arc::new(shared);
        shared.watch_lock_file();
        Ok((listener, shared))
    }

    /// Starts the watch that keeps the lock file where claude looks (see [`crate::lock::watch`]):
    /// without it, the bridge ran on, never found again.
    fn watch_lock_file(self: &Arc<Self>) {
        crate::lock::watch::start(self);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The address listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where a connection of this process's own reaches the listener (the loopback address of its
    /// family when it listens on all addresses): a runtime connects once to wake a blocked accept.
    pub fn loopback_addr(&self) -> SocketAddr {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        addr
    }

    /// The lock file's path, if one was written.
    pub fn lock_path(&self) -> Option<&Path> {
        self.lock_path.as_deref()
    }

    /// A handle on this server.
    pub fn handle(self: &Arc<Self>) -> Handle {
        Handle {
            shared: self.clone(),
        }
    }

    /// Counts `event`, taken from the channel by the host, off the backlog; returns it.
    pub fn taken(&self, event: Option<Event>) -> Option<Event> {
        self.backlog.taken(event)
    }

    /// Whether the server has stopped (loops end).
    pub fn is_stopped(&self) -> bool {
        self.lock().stopped
    }

    /// Logs a line, when logging is on.
    pub fn log(&self, line: impl FnOnce() -> String) {
        if let Some(l) = &self.logger {
            l.log(&line());
        }
    }

    /// Writes lines the engine's side logged under the lock, now that it is released.
    fn write_logs(&self, lines: Vec<String>) {
        if let Some(l) = &self.logger {
            lines.iter().for_each(|line| l.log(line));
        }
    }

    /// Drain the engine and act on it; everything here is non-blocking. New output is written
    /// from this thread when `inline` and the socket takes it, held when the handler is answering
    /// a burst ([`Delivery`]), and otherwise left to the connection's writer, woken.
    fn flush(&self, st: &mut State, inline: bool) {
        let State {
            core,
            drained: out,
            conns,
            channel,
            stopped,
            delivery,
            ..
        } = st;
        core.drain(out);
        // Counted before they are handed over: the host takes them off as they come.
        if let Some(send) = channel {
            // An answer's flush has no event: no atomic add of nothing.
            if !out.events.is_empty() {
                self.backlog.add(out.events.len());
                out.events.drain(..).for_each(send);
            }
        } else if self.has_handler && !*stopped {
            if !out.events.is_empty() {
                // One at a time: `VecDeque::extend`'s general code is larger than this loop, and
                // it runs on every call (nearly always for one event).
                for event in out.events.drain(..) {
                    delivery.queue.push_back(event);
                }
                // Counted under the lock: a store, not a read-modify-write.
                self.backlog.set(delivery.queue.len());
            }
        } else {
            out.events.clear();
        }
        act_on_ready(core, &mut out.ready, conns, delivery, inline, *stopped);
        if std::mem::take(&mut out.timer_changed) {
            (self.wake_timer)();
        }
    }

    /// The end of every step under the lock: flush (`inline`: see [`act_on_ready`]), claim the
    /// handler's first event, release the lock, deliver.
    fn release(self: &Arc<Self>, mut st: MutexGuard<'_, State>, inline: bool) {
        self.flush(&mut st, inline);
        let first = self.claim(&mut st);
        self.unlock(st);
        self.deliver(first);
    }

    /// Releases the lock, then writes what the engine logged under it. Nothing is logged
    /// without a logger: no take and no call on every step.
    fn unlock(&self, mut st: MutexGuard<'_, State>) {
        let logs = self.logger.is_some().then(|| st.core.take_logs());
        drop(st);
        if let Some(logs) = logs {
            self.write_logs(logs);
        }
    }

    /// Runs `f` on the state, flushes (new output to the connections' writers), and, outside the
    /// lock, hands queued events to the handler.
    fn run<R>(self: &Arc<Self>, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.lock();
        let r = f(&mut st);
        self.release(st, false);
        r
    }

    /// Runs `f` on the engine for a [`Handle`] method that does not answer the peer (pushes,
    /// settings), released as [`RunningServer::release_for_host`] releases (the handler never run
    /// here): output goes through the connection's writer, which sends what accumulated while it
    /// woke in one write.
    fn with<R>(self: &Arc<Self>, f: impl FnOnce(&mut Core) -> R) -> R {
        self.with_locked(self.lock(), f)
    }

    /// [`RunningServer::with`] with the lock taken already (by a caller that first looked at the
    /// state under it).
    fn with_locked<R>(
        self: &Arc<Self>,
        mut st: MutexGuard<'_, State>,
        f: impl FnOnce(&mut Core) -> R,
    ) -> R {
        let r = f(&mut st.core);
        self.release_for_host(st, false);
        r
    }

    /// [`RunningServer::release`] for a host's thread (a [`Handle`] method): the handler is never
    /// run here, where the host may hold a lock its handler takes (its editor's state, around a
    /// push or an answer), which would wait on itself; events that wait for it with nobody
    /// delivering them go to the timer's loop, woken ([`RunningServer::timer`]). A handler that
    /// calls a [`Handle`] method is delivering already, and delivers them after its current call.
    fn release_for_host(self: &Arc<Self>, mut st: MutexGuard<'_, State>, inline: bool) {
        self.flush(&mut st, inline);
        let left = self.has_handler
            && !st.stopped
            && st.handler.is_some()
            && !st.delivery.queue.is_empty();
        self.unlock(st);
        if left {
            (self.wake_timer)();
        }
    }

    /// [`RunningServer::with`] for what answers the peer (input handled, a call answered): the
    /// output is written at once from this thread when the socket takes it and the connection's
    /// writer is idle, and the writer is woken only for what remains. A round trip then costs no
    /// wake-up of the writer.
    ///
    /// With `from_host` (the host's answer to a call), when more events wait for the host's
    /// `next_event` (requests that arrived together), the answer is left to the connection's
    /// writer, woken, which writes what accumulated by the time it runs in one system call while
    /// the host goes on; the answer given with no event waiting is written at once, with anything
    /// still pending. (A handler's answers are held by [`Delivery`] instead.)
    fn answer<R>(self: &Arc<Self>, from_host: bool, f: impl FnOnce(&mut Core) -> R) -> R {
        let mut st = self.lock();
        let r = f(&mut st.core);
        let queued = from_host && st.channel.is_some() && self.backlog.is_waiting();
        self.release_for_host(st, !queued);
        r
    }

    /// Under the lock, after a flush: when there is a handler, events are queued for it and nobody
    /// is delivering them, this thread becomes the one that does ([`Delivery::begin`]) and takes
    /// the first, with the handle to give the handler; [`RunningServer::deliver`] runs them once
    /// the lock is released. Taking the first event under the same lock as the flush saves a lock
    /// per call.
    fn claim(self: &Arc<Self>, st: &mut State) -> Option<Claimed> {
        if !self.has_handler || !st.delivery.begin() {
            return None;
        }
        let Some(handler) = st.handler.take() else {
            // Only after a panic that escaped `catch_unwind` (none can): deliver nothing.
            st.delivery.end();
            return None;
        };
        let Some(event) = st.delivery.take_next() else {
            st.handler = Some(handler);
            st.delivery.end();
            return None;
        };
        self.backlog.set(st.delivery.queue.len());
        // Made once and kept between deliveries (cloning it per event would cost two atomic
        // operations on every call).
        let handle = st.handle.take().unwrap_or_else(|| self.handle());
        Some(Claimed {
            event,
            handler,
            handle,
        })
    }

    /// Hands the events claimed by [`RunningServer::claim`] to the handler, in order, one at a
    /// time, with the lock not held, from the thread or task that claimed them. When another one is
    /// already doing so (or this one, re-entered from the handler through a [`Handle`]), nothing
    /// was claimed, and that one delivers what was queued after its current call:
    /// [`Delivery::begin`], taken and released under the lock, makes the handler run in one place
    /// at a time even when several threads call in.
    ///
    /// A panic in the handler is caught here (the panic hook has reported it): the event is
    /// dropped and logged, the rest are delivered, and the thread or task that ran it (a
    /// connection's, the timer, the acceptor) carries on. Letting it unwind would end that loop
    /// with the connection still registered, or stop the timer or the acceptor for good. A call
    /// it panicked on is answered here ([`answer_failed`]): left pending, its client would wait
    /// for it until its own timeout, and it would hold one of the connection's places for calls
    /// for as long as the connection lives.
    fn deliver(self: &Arc<Self>, claimed: Option<Claimed>) {
        let Some(Claimed {
            mut event,
            mut handler,
            handle,
        }) = claimed
        else {
            return;
        };
        for delivered in 1.. {
            let call = match &event {
                Event::ToolCall { call, .. } => Some((*call, false)),
                Event::CompatRequest { call, .. } => Some((*call, true)),
                _ => None,
            };
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| handler(event, &handle)));
            if outcome.is_err() {
                self.log(|| "the event handler panicked; its event is dropped".to_string());
                if let Some((call, compat)) = call {
                    answer_failed(&handle, call, compat);
                }
            }
            let mut st = self.lock();
            if st.delivery.has_held() && !st.delivery.should_hold() {
                // A burst ended with an event that gave no answer: what its earlier events' gave
                // goes out before the next burst begins.
                let st = &mut *st;
                write_held(&mut st.core, &st.conns, &mut st.delivery, st.stopped);
            }
            let hand_over = delivered >= MAX_DELIVERED && !st.stopped;
            let next = if hand_over {
                None
            } else {
                st.delivery.take_next()
            };
            match next {
                Some(next) => {
                    self.backlog.set(st.delivery.queue.len());
                    event = next;
                }
                None => {
                    let State {
                        core,
                        conns,
                        delivery,
                        stopped,
                        handler: put_back,
                        handle: kept,
                        ..
                    } = &mut *st;
                    delivery.end();
                    // Answers held for a burst whose last event gave none.
                    write_held(core, conns, delivery, *stopped);
                    if *stopped {
                        // Not put back: a stopped server keeps no handler (see `stop_hard`).
                        // Dropped after the lock, with the handle.
                        drop(st);
                        drop(handler);
                        return;
                    }
                    *put_back = Some(handler);
                    *kept = Some(handle);
                    if hand_over {
                        // The rest to the timer's loop, which `timer` sends here at once.
                        (self.wake_timer)();
                    }
                    return;
                }
            }
        }
    }

    // ---- the accept loop ----

    /// A new connection (an accepted socket, `wire`): registered with the engine, then `spawn`
    /// starts its reader and writer (under the lock, so that a stopping server sees them). `None`
    /// when the server has stopped (the socket is dropped).
    pub fn add(
        self: &Arc<Self>,
        wire: Box<dyn Wire>,
        spawn: impl FnOnce(ConnectionId) -> io::Result<()>,
    ) -> Option<ConnectionId> {
        let mut st = self.lock();
        if st.stopped {
            return None;
        }
        let now = st.core.clock.now();
        let conn = st.core.server.accept(now);
        st.conns.insert(conn, Conn::new(wire));
        let failed = spawn(conn).err();
        if failed.is_some() {
            Self::close_conn(&mut st, conn);
            st.conns.remove(&conn);
        }
        self.release(st, false);
        if let Some(e) = failed {
            self.log(|| format!("connection {}: not started: {e}", conn.0));
        }
        Some(conn)
    }

    fn close_conn(st: &mut State, conn: ConnectionId) {
        if let Some(c) = st.conns.get(&conn) {
            // A reader waiting for the peer to read its output reads on, and meets the end.
            c.reading_paused.set(false);
            c.wire.shutdown();
            c.wire.wake_writer();
            c.wire.wake_reader();
        }
        st.core.server.handle_close(conn);
    }

    // ---- a connection's reader ----

    /// The host is [`MAX_HOST_BACKLOG`] or more events behind (and the server still runs). The
    /// lock is only taken when the backlog is full.
    pub fn host_behind(&self) -> bool {
        self.backlog.is_full() && !self.is_stopped()
    }

    /// [`RunningServer::host_behind`], for the paused reader of `conn`: false too once `conn` is
    /// gone (evicted, timed out, closed: its writer ended it), so that the reader meets its
    /// socket's end at once and gives the socket back instead of holding it until the host
    /// catches up. While it waits, the peer's silence does not count (`Server::reading_held`):
    /// its answers to the Pings wait unread, and it was dropped as `ping_timeout`.
    pub fn reader_waits(&self, conn: ConnectionId) -> bool {
        self.backlog.is_full() && {
            let mut st = self.lock();
            let waits = !st.stopped && st.conns.contains_key(&conn);
            if waits {
                let now = st.core.clock.now();
                st.core.server.reading_held(conn, now);
            }
            waits
        }
    }

    /// Events wait for the host's `next_event` (or handler): a reader on the host's executor lets
    /// it run before reading again.
    pub fn host_has_events(&self) -> bool {
        self.backlog.is_waiting()
    }

    /// Whether the reader of `conn` pauses before its next read: when
    /// [`RunningServer::host_behind`] (logged), the reader waits, looking again every
    /// [`BACKLOG_POLL`](crate::BACKLOG_POLL), until it is not, so that a peer cannot pile events up
    /// in front of a slow host (its bytes wait in the socket, and then in the peer).
    pub fn pause_reading(&self, conn: ConnectionId) -> bool {
        let behind = self.host_behind();
        if behind {
            self.log(|| {
                format!(
                    "connection {}: the host is {MAX_HOST_BACKLOG} events behind; reading paused",
                    conn.0
                )
            });
        }
        behind
    }

    /// Bytes read from `conn`, and what its reader does next.
    pub fn input(self: &Arc<Self>, conn: ConnectionId, bytes: &[u8]) -> AfterInput {
        let mut st = self.lock();
        let now = st.core.clock.now();
        let wants = st.core.server.handle_input(conn, bytes, now);
        // Marked before the flush below, whose writes may wake it at once.
        let wait = !wants
            && st.conns.get(&conn).is_some_and(|c| {
                c.reading_paused.set(true);
                true
            });
        self.release(st, true);
        // (The flush may have written it back under: rare, and a lock more only then.)
        if wait && self.still_paused(conn) {
            AfterInput::WaitForOutput
        } else if self.host_has_events() {
            AfterInput::HostFirst
        } else {
            AfterInput::Read
        }
    }

    /// [`RunningServer::output_waits`] after the flush of the read that paused `conn`'s reader,
    /// logged the first time for each connection (a client that reads slowly pauses it at each
    /// read).
    fn still_paused(&self, conn: ConnectionId) -> bool {
        let st = self.lock();
        let c = st.paused(conn);
        let first = c.is_some_and(|c| !c.pause_logged.replace(true));
        let paused = c.is_some();
        drop(st);
        if first {
            self.log(|| {
                format!(
                    "connection {}: its output unread past the mark; reading paused until it \
                     reads (logged once)",
                    conn.0
                )
            });
        }
        paused
    }

    /// After [`AfterInput::WaitForOutput`]: whether `conn`'s reader still waits, for
    /// [`Wire::wake_reader`]. False once the peer has read enough of its output, and once the
    /// connection is closed or gone (the reader meets its socket's end).
    pub fn output_waits(&self, conn: ConnectionId) -> bool {
        self.lock().paused(conn).is_some()
    }

    /// The reader of `conn` met the end of the stream, or an error.
    pub fn read_ended(self: &Arc<Self>, conn: ConnectionId) {
        self.run(|st| Self::close_conn(st, conn))
    }

    // ---- a connection's writer ----

    /// What the writer of `conn` does next. For [`Next::Write`], `chunk` holds the head of the
    /// output (at most [`WRITE_CHUNK`] bytes), and nobody else writes to the connection until the
    /// writer reports it with [`RunningServer::written`].
    pub fn next_output(&self, conn: ConnectionId, chunk: &mut Vec<u8>) -> Next {
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
    }

    /// The writer of `conn` wrote `n` bytes of its chunk (0: interrupted, try again).
    pub fn written(self: &Arc<Self>, conn: ConnectionId, n: usize) {
        self.run(|st| {
            if n > 0 {
                st.core.server.advance_transmit(conn, n);
            }
            if let Some(c) = st.conns.get_mut(&conn) {
                c.writing = false;
                wake_reader_if_wanted(&st.core, conn, c);
            }
        })
    }

    /// The writer of `conn` is done (the connection closed, or its socket failed): the
    /// connection is forgotten.
    pub fn writer_done(self: &Arc<Self>, conn: ConnectionId) {
        self.run(|st| {
            Self::close_conn(st, conn);
            st.conns.remove(&conn);
        })
    }

    // ---- the timer loop ----

    /// How long the timer loop sleeps before calling [`RunningServer::on_timer`] (zero: call it
    /// now; `Some(None)`: until woken); `None` once the server has stopped and the handler has
    /// the events queued before the stop (the loop ends).
    pub fn timer(&self) -> Option<Option<Duration>> {
        let st = self.lock();
        // Events a delivering thread handed over (see `MAX_DELIVERED`), or left by a stop (see
        // `stop_hard`): delivered from here now. (The handler is there only while nobody
        // delivers: the delivering thread holds it.)
        if !st.delivery.queue.is_empty() && st.handler.is_some() {
            return Some(Some(Duration::ZERO));
        }
        if st.stopped {
            return None;
        }
        Some(
            st.core
                .server
                .poll_timeout()
                .map(|d| st.core.clock.until(d)),
        )
    }

    /// The timer loop woke: runs the engine's timers when they are due (none once stopped), and
    /// hands queued events to the handler.
    pub fn on_timer(self: &Arc<Self>) {
        self.run(|st| {
            let now = st.core.clock.now();
            if !st.stopped && st.core.server.poll_timeout().is_some_and(|d| d <= now) {
                // A handler kept waiting past `HANDLER_STUCK` holds the thread that delivers,
                // a connection's reader, which reads nothing meanwhile (which one is not known
                // here): no peer is dropped for a silence that may be the host's.
                let stuck =
                    (st.delivery.waiting_since()).is_some_and(|t| t.elapsed() > HANDLER_STUCK);
                if stuck {
                    let conns: Vec<ConnectionId> = st.conns.keys().copied().collect();
                    for conn in conns {
                        st.core.server.reading_held(conn, now);
                    }
                }
                st.core.server.handle_timeout(now);
            }
        })
    }

    // ---- stopping ----

    /// The first step of stopping: the lock file removed, pending diffs answered as
    /// `Options::diff_error_at_stop` says (a tool error by default; `DIFF_REJECTED` when `None`),
    /// other pending calls an error, and clients sent Close 1001.
    ///
    /// The events this makes (the calls cancelled, `CancelReason::ServerStopped`) are left to the
    /// threads or tasks that deliver events (a connection's reader, the timer loop), never handed
    /// to a handler from the thread stopping the server: a host that stops it while holding a
    /// lock its handler takes (its editor state, say) would wait on itself.
    pub fn begin_stop(self: &Arc<Self>) {
        let mut st = self.lock();
        // The lock file first: no claude finds a server that is stopping (its grace, up to
        // `STOP_GRACE`, is spent waiting for the clients' Close).
        st.lock_watch = None;
        st.core.remove_lock_file();
        let now = st.core.clock.now();
        st.core.server.shutdown(now);
        // Written from this thread where the sockets take it (the Close 1001, the rejected
        // diffs): a runtime that stops hard right after (smol's `Drop`) would otherwise leave
        // them to writers that only wake once the server is marked stopped, and drop them.
        self.flush(&mut st, true);
        // Stopped from the handler in a burst, that output was held for the burst's next
        // answers, which will not come: written now, before a hard stop would drop it.
        let st_ref = &mut *st;
        write_held(
            &mut st_ref.core,
            &st_ref.conns,
            &mut st_ref.delivery,
            st_ref.stopped,
        );
        self.flush(&mut st, false);
        self.unlock(st);
        // The timer loop delivers what the shutdown queued for a handler.
        (self.wake_timer)();
    }

    /// Whether every connection has finished closing (see [`STOP_GRACE`]).
    pub fn is_idle(&self) -> bool {
        self.lock().core.server.is_idle()
    }

    /// The part of stopping that needs no waiting: every socket shut down and its writer woken,
    /// no event made after delivered (the channel's sender dropped: `next_event` ends; a handler
    /// still gets those queued before, from the thread delivering or the timer loop), the lock
    /// file removed, the timer woken to see it. `f` runs under the lock, after the server is
    /// marked stopped (a runtime takes its threads or tasks there: no connection is added after).
    pub fn stop_hard<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut st = self.lock();
        st.stopped = true;
        for c in st.conns.values() {
            c.wire.shutdown();
            c.wire.wake_writer();
        }
        st.channel = None;
        // The handle kept for the handler points back at this server.
        st.handle = None;
        // The handler, and what it holds (a host's channel, say), goes too, as the channel does:
        // a `Handle` kept by the host must not keep it alive. Dropped once the lock is released,
        // since dropping what it captured may call a `Handle`. Not before it has the events
        // queued before now (the calls `begin_stop` cancelled among them; none is queued after,
        // see `flush`): one running now is dropped by its delivering thread when none is left,
        // and one idle with events queued by the timer loop, which delivers them first (see
        // `timer`): never from this thread (see `begin_stop`).
        let handler = if st.delivery.queue.is_empty() {
            st.handler.take()
        } else {
            None
        };
        st.lock_watch = None;
        st.core.remove_lock_file();
        (self.wake_timer)();
        let r = f();
        self.unlock(st);
        drop(handler);
        r
    }
}

/// Answers `call`, left unanswered by a handler that panicked on it, as failed: a tool error, or
/// an internal error (-32603) for a compatibility request. Not pending any more (answered before
/// the panic, cancelled since) is fine.
fn answer_failed(handle: &Handle, call: CallId, compat: bool) {
    const FAILED: &str = "the IDE failed while handling this call";
    let _ = if compat {
        handle.respond_compat(call, Err(RpcError::internal(FAILED)))
    } else {
        handle.respond(call, ToolResult::error(FAILED))
    };
}

/// How long the handler may have an event before the thread delivering it (a connection's
/// reader) counts as kept from reading ([`RunningServer::on_timer`]).
const HANDLER_STUCK: Duration = Duration::from_secs(1);

/// The size of a tool result past which [`Handle::respond`] writes it out as JSON before it
/// takes the server's lock.
const ENCODE_AHEAD: usize = 64 * 1024;

/// Answers calls, sends notifications and changes settings from any thread or task. Every method
/// returns without blocking on a socket: output the socket does not take at once is left to the
/// connection's writer. Both runtimes hand out this same type (`IdeServer::handle`).
///
/// ```
/// use claude_ide_bridge::{
///     file_uri, AtMentioned, Event, Notification, Target, ToolCall, ToolResult, WorkspaceFolder,
///     WorkspaceFolders,
/// };
/// use claude_ide_bridge_runtime::Handle;
///
/// /// A host's answer to each event, from whichever thread has it.
/// fn on_event(handle: &Handle, event: Event) {
///     match event {
///         Event::ToolCall { call, tool: ToolCall::GetWorkspaceFolders } => {
///             let folder = "/home/me/project";
///             let answer = WorkspaceFolders {
///                 success: true,
///                 folders: vec![WorkspaceFolder {
///                     name: "project".into(),
///                     uri: file_uri(folder),
///                     path: folder.into(),
///                 }],
///                 root_path: folder.into(),
///             };
///             // An answer to a call already cancelled is refused (`ApiError::NotPending`):
///             // nothing to do then.
///             let _ = handle.respond(call, ToolResult::json(&answer));
///         }
///         Event::ToolCall { call, .. } => {
///             let _ = handle.respond(call, ToolResult::error("not in this editor"));
///         }
///         // A client ready: the file the user has open, mentioned to it (not to every client:
///         // another claude session would get it again in its input box).
///         Event::Initialized { conn, .. } => {
///             let mention = Notification::AtMentioned(AtMentioned {
///                 file_path: "/home/me/project/src/main.rs".into(),
///                 line_start: Some(9),
///                 line_end: Some(20),
///             });
///             handle.notify(Target::Connection(conn), &mention);
///         }
///         _ => {}
///     }
/// }
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<RunningServer>,
}

/// Its port (for a host's own `Debug`).
impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("port", &self.port())
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// Answers a tool call (see `Server::respond`).
    pub fn respond(&self, call: CallId, result: ToolResult) -> Result<(), ApiError> {
        // A large one is written out as JSON before the lock is taken: the other connections'
        // reads and writes, and the listener, wait for the lock (8 clients reading a 9 MiB file
        // as fast as they could held every other client's `ping` up for seconds). A small one
        // is written where the engine keeps a buffer for it.
        let size: usize = (result.content.iter())
            .map(|c| match c {
                Content::Text(t) => t.len(),
                Content::Image { data, .. } => data.len(),
                _ => 0,
            })
            .sum();
        if size > ENCODE_AHEAD {
            let answer = EncodedAnswer::tool(&result);
            return self
                .shared
                .answer(true, |core| core.server.respond_encoded(call, answer));
        }
        self.shared
            .answer(true, |core| core.server.respond(call, result))
    }

    /// Answers a compatibility request (see `Server::respond_compat`).
    pub fn respond_compat(
        &self,
        call: CallId,
        result: Result<serde_json::Value, RpcError>,
    ) -> Result<(), ApiError> {
        // Written out before the lock is taken (see `Handle::respond`).
        let answer = EncodedAnswer::compat(result);
        self.shared
            .answer(true, |core| core.server.respond_encoded(call, answer))
    }

    /// Sends a notification; returns how many connections it was queued for. Pushes go through
    /// the connections' writers, which send what accumulated while they woke in one write. An
    /// `at_mentioned` that no initialized client can take now is kept for the next one (see
    /// `Limits::max_queued_mentions` and `mention_ttl`) and counts 0 here, as one sent nowhere
    /// does; the last `selection_changed` sent to all is kept too. A client is sent both once it
    /// is ready for them (`Server::notify`), and at-mentions sent to it before wait for that too
    /// (counted, though one is dropped unsaid if that client leaves before it is ready).
    /// The kept selection goes with [`Handle::forget_selection`].
    pub fn notify(&self, target: Target, notification: &Notification) -> usize {
        self.shared.with(|core| {
            let now = core.clock.now();
            core.server.notify(target, notification, now)
        })
    }

    /// Forgets the editor's selection, kept for the clients that get ready later (see
    /// `Server::forget_selection`): after the user turned sharing it off, or selected something
    /// secret.
    pub fn forget_selection(&self) {
        self.shared.with(|core| core.server.forget_selection())
    }

    /// Changes the offered tools (clients are told `tools/list_changed`).
    pub fn set_tools(&self, tools: ToolSet) {
        self.shared.with(|core| {
            let now = core.clock.now();
            core.server.set_tools(tools, now)
        })
    }

    /// Changes the workspace folders; the lock file is rewritten atomically. A `NotConnected`
    /// error once the server has stopped (there is no lock file to rewrite).
    pub fn set_workspace_folders(&self, folders: Vec<PathBuf>) -> io::Result<()> {
        // Told under the lock the stop takes: a stop between the look and the change would
        // have it answer Ok, having written nothing.
        let st = self.shared.lock();
        if st.stopped {
            drop(st);
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the server has stopped",
            ));
        }
        self.shared
            .with_locked(st, |core| core.set_workspace_folders(&folders))
    }

    /// Removes the lock file now, so that no new `claude` finds the server, while the clients
    /// connected go on being served: the first step of a stop that takes time (an editor to end,
    /// language servers to shut down), so that the file does not outlive a process that an OS
    /// ends before its stop is done (Windows, 5 s after its console closed). From then on the
    /// file is neither written again when removed nor rewritten by
    /// [`Handle::set_workspace_folders`]; the stop removes nothing more. Does nothing when there
    /// is no lock file, or it was withdrawn already.
    pub fn withdraw_lock_file(&self) {
        let mut st = self.shared.lock();
        // Dropped under the lock as at the stop: its thread is only told to end.
        st.lock_watch = None;
        st.core.remove_lock_file();
        let logs = st.core.take_logs();
        drop(st);
        self.shared.write_logs(logs);
    }

    /// Closes a connection (WebSocket Close 1000).
    pub fn close(&self, conn: ConnectionId) {
        self.shared.with(|core| {
            let now = core.clock.now();
            let _ = core.server.close(conn, now);
        })
    }

    /// How the client on `conn` names files (`Server::client_paths`): set by the runtime when the
    /// client says its pid (`ide_connected`); on Windows a pid that is no process here is a
    /// `claude` in WSL, sent the paths of a selection or an at-mention as WSL names them. `None`
    /// for no live connection.
    pub fn client_paths(&self, conn: ConnectionId) -> Option<ClientPaths> {
        self.shared.lock().core.server.client_paths(conn)
    }

    /// Names files `paths`' way in what `conn` is sent (`Server::set_client_paths`), for a host
    /// that knows better than the pid does; whether `conn` is live. The at-mentions queued before
    /// the client came, or sent to it since, are written once it is ready for them
    /// (`Server::notify`), named as it was set by then.
    pub fn set_client_paths(&self, conn: ConnectionId, paths: ClientPaths) -> bool {
        self.shared
            .with(|core| core.server.set_client_paths(conn, paths))
    }

    /// Whether `call` still waits for its answer (`Server::is_pending`): a host asks before slow
    /// work for it (a large file read), which a client gone or a call cancelled meanwhile no
    /// longer wants.
    pub fn is_pending(&self, call: CallId) -> bool {
        self.shared.lock().core.server.is_pending(call)
    }

    /// The live (upgraded, not closed) connections.
    pub fn connections(&self) -> Vec<ConnectionId> {
        self.shared.lock().core.server.connections()
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.shared.addr.port()
    }

    /// Whether the server has stopped (its `stop`, a `Stopper`, the drop): after that, a push
    /// reaches no one ([`Handle::notify`] answers 0), every call is answered already
    /// ([`Handle::respond`] says `NotPending`) and [`Handle::set_workspace_folders`] writes no
    /// lock file. A host's thread that holds only a `Handle` (its UI thread) asks this to stop
    /// pushing.
    pub fn is_stopped(&self) -> bool {
        self.shared.is_stopped()
    }

    /// The token clients must send (`Options::auth_token`, or the one drawn at the start). A
    /// host restarted (an upgrade, a crash) is found again by a `claude` already connected only
    /// on the same port with the same token: keep both (in a file only the user may read) and
    /// give them back as `Options::port` and `Options::auth_token` at the next start.
    pub fn auth_token(&self) -> claude_ide_bridge::AuthToken {
        self.shared
            .with(|core| core.server.config().auth_token.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockFileMode;
    use claude_ide_bridge::{ConnectionId, ToolSet};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread::{self, ThreadId};

    /// A host's thread that calls a `Handle` method (its UI thread, holding its editor's state)
    /// is never made to run the event handler, which may take that very state: events waiting for
    /// the handler with nobody delivering them (a delivering thread handed them over after
    /// `MAX_DELIVERED`, or the call itself made them) go to the timer's loop instead.
    #[test]
    fn a_handle_call_never_runs_the_handler_on_the_callers_thread() {
        let dir = std::env::temp_dir();
        let mut opts = Options::new(vec![dir], "Reentry");
        opts.lock_file = LockFileMode::Disabled;
        let ran_on: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
        let seen = ran_on.clone();
        let handler: Handler = Box::new(move |_event, _handle| {
            seen.lock().unwrap().push(thread::current().id());
        });
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        let (_listener, shared) =
            RunningServer::start(&opts, Events::new(Some(handler), |_| {}), move || {
                w.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        // An event waits for the handler and nobody delivers it.
        let tab_closed = Event::TabClosed {
            conn: ConnectionId(1),
            tab_name: "t".into(),
        };
        shared.lock().delivery.queue.push_back(tab_closed);
        let before = woken.load(Ordering::SeqCst);
        let handle = shared.handle();
        handle.set_tools(ToolSet::all());
        handle.notify(
            Target::All,
            &Notification::AtMentioned(claude_ide_bridge::AtMentioned {
                file_path: "/x".into(),
                line_start: None,
                line_end: None,
            }),
        );
        let me = thread::current().id();
        assert!(
            !ran_on.lock().unwrap().contains(&me),
            "the handler ran on the thread calling a Handle method"
        );
        assert!(
            woken.load(Ordering::SeqCst) > before,
            "the timer's loop was not woken"
        );
        // The timer's loop delivers it.
        assert_eq!(shared.timer(), Some(Some(Duration::ZERO)));
        let s = shared.clone();
        let timer = thread::spawn(move || s.on_timer());
        let timer_id = timer.thread().id();
        timer.join().unwrap();
        assert_eq!(*ran_on.lock().unwrap(), vec![timer_id]);
    }
}
