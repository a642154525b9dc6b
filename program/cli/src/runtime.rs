//! Both runtimes behind one face: events handed to a callback, answers through the runtimes'
//! common [`Handle`], and a stop that resolves pending calls and removes the lock file.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use claude_ide_bridge::Event;
use claude_ide_bridge_runtime::{Handle, Options};

/// Where the server's events go, called on a thread of the runtime's (for smol, from a task of
/// the executor that also runs the connections, which must not wait there).
pub trait EventSink: Send + 'static {
    /// Takes `event` without waiting, or gives it back when taking it would wait.
    fn try_take(&mut self, event: Event) -> TryTake;
    /// Takes `event`, waiting as long as needed: false when nobody wants more.
    fn take(&mut self, event: Event) -> bool;
}

/// What [`EventSink::try_take`] did.
pub enum TryTake {
    /// Taken; false when nobody wants more events (the server stops).
    Taken(bool),
    /// Not taken: taking it would wait.
    Full(Event),
}

/// Which runtime drives the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    /// `claude-ide-bridge-smol`: async tasks on one thread.
    Smol,
    /// `claude-ide-bridge-blocking`: std threads.
    Threads,
}

/// A started server.
pub struct Running {
    /// The address listened on.
    pub addr: SocketAddr,
    /// The lock file, if written.
    pub lock_path: Option<PathBuf>,
    handle: Handle,
    /// Taken by the first stop; a `Running` dropped without one (a panic unwinding through the
    /// host loop) stops the server then, so that its lock file does not outlive it.
    stop: Option<Box<dyn FnOnce() + Send>>,
    stopped: mpsc::Receiver<()>,
}

impl Running {
    /// A handle on the server.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Stops the server (pending diffs answered `DIFF_REJECTED`, clients closed, lock file
    /// removed) and waits for it, at most `timeout`.
    pub fn stop(mut self, timeout: Duration) {
        self.stop_within(timeout);
    }

    fn stop_within(&mut self, timeout: Duration) {
        if let Some(stop) = self.stop.take() {
            stop();
            let _ = self.stopped.recv_timeout(timeout);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_within(Duration::from_secs(2));
    }
}

/// Starts a server on `kind`; its events are handed to `sink`, on a thread of the runtime's.
///
/// Both runtimes hand each event to the sink on the thread that read it, with no thread hand-off
/// in between: threads through the runtime's handler (the connection's reader thread), smol through
/// a host task on the one-thread executor that also runs the connections (`start_on`). A sink
/// that answers from memory at once (see [`EventSink::try_take`]) makes a call's round trip one
/// turn of one thread.
pub fn start(kind: RuntimeKind, opts: Options, sink: impl EventSink) -> io::Result<Running> {
    match kind {
        RuntimeKind::Threads => start_threads(opts, sink),
        RuntimeKind::Smol => start_smol(opts, sink),
    }
}

fn start_threads(opts: Options, mut sink: impl EventSink) -> io::Result<Running> {
    // Stopped by `Running::stop`, or by the sink when nobody wants more events.
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let no_more = stop_tx.clone();
    // The handler runs on the connection's reader thread (one thread at a time): waiting there
    // for room in the host's queue holds up that reader only, and the runtime stops reading from
    // the others once its own backlog is full, as it does for a slow `next_event`.
    let server = claude_ide_bridge_blocking::IdeServer::start_with_handler(opts, move |e, _| {
        if !sink.take(e) {
            let _ = no_more.send(());
        }
    })?;
    let addr = server.local_addr();
    let lock_path = server.lock_path().map(PathBuf::from);
    let handle = server.handle();
    let (done_tx, done_rx) = mpsc::channel();
    // The server's keeper waits for the stop, never polls (an idle bridge does not wake).
    thread::Builder::new()
        .name("bridge-events".into())
        .spawn(move || {
            let _ = stop_rx.recv();
            server.stop();
            let _ = done_tx.send(());
        })?;
    Ok(Running {
        addr,
        lock_path,
        handle,
        stop: Some(Box::new(move || {
            let _ = stop_tx.send(());
        })),
        stopped: done_rx,
    })
}

type Started = (SocketAddr, Option<PathBuf>, Handle);

fn start_smol(opts: Options, sink: impl EventSink) -> io::Result<Running> {
    let (started_tx, started_rx) = mpsc::channel::<io::Result<Started>>();
    let (stop_tx, stop_rx) = smol::channel::bounded::<()>(1);
    let (done_tx, done_rx) = mpsc::channel();
    thread::Builder::new()
        .name("bridge-smol".into())
        .spawn(move || {
            // The connections' tasks and the host task on one executor run by this thread: an
            // event is read, handed over and (by a sink answering at once) answered and written
            // in one turn, with no wake-up of another thread.
            // (The host task is spawned rather than given to `run`: run directly, every event
            // that wakes it would cost a few more system calls.)
            let ex = Arc::new(smol::Executor::new());
            let on = ex.clone();
            let host = ex.spawn(async move {
                let server = match claude_ide_bridge_smol::IdeServer::start_on(opts, on).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                let _ = started_tx.send(Ok((
                    server.local_addr(),
                    server.lock_path().map(PathBuf::from),
                    server.handle(),
                )));
                let mut sink = Some(sink);
                loop {
                    let next = smol::future::or(async { server.next_event().await }, async {
                        let _ = stop_rx.recv().await;
                        None
                    })
                    .await;
                    let (Some(e), Some(mut s)) = (next, sink.take()) else {
                        break;
                    };
                    let more = match s.try_take(e) {
                        TryTake::Taken(more) => more,
                        // The host's queue is full: the wait for room goes to a thread of its
                        // own, so that the connections' tasks go on meanwhile.
                        TryTake::Full(e) => {
                            let (s2, more) = smol::unblock(move || {
                                let more = s.take(e);
                                (s, more)
                            })
                            .await;
                            s = s2;
                            more
                        }
                    };
                    if !more {
                        break;
                    }
                    sink = Some(s);
                }
                server.stop().await;
                let _ = done_tx.send(());
            });
            smol::block_on(ex.run(host))
        })?;
    let (addr, lock_path, handle) = started_rx
        .recv()
        .map_err(|_| io::Error::other("the smol runtime thread ended before starting"))??;
    Ok(Running {
        addr,
        lock_path,
        handle,
        stop: Some(Box::new(move || {
            let _ = stop_tx.try_send(());
        })),
        stopped: done_rx,
    })
}
