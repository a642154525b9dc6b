//! Both runtimes behind one face: events handed to a callback, answers through the runtimes'
//! common [`Handle`], and a stop that resolves pending calls and removes the lock file.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use claude_ide_bridge::Event;
use claude_ide_bridge_runtime::{Handle, Options};

/// Takes each event of the server; `false` when nobody wants more (the server stops).
pub type EventSink = Box<dyn FnMut(Event) -> bool + Send>;

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
pub fn start(kind: RuntimeKind, opts: Options, sink: EventSink) -> io::Result<Running> {
    match kind {
        RuntimeKind::Threads => start_threads(opts, sink),
        RuntimeKind::Smol => start_smol(opts, sink),
    }
}

fn start_threads(opts: Options, mut sink: EventSink) -> io::Result<Running> {
    let server = claude_ide_bridge_blocking::IdeServer::start(opts)?;
    let addr = server.local_addr();
    let lock_path = server.lock_path().map(PathBuf::from);
    let handle = server.handle();
    // The events thread waits for the next event, never polls (an idle bridge does not wake):
    // the stop ends that wait.
    let stopper = server.stopper();
    let (done_tx, done_rx) = mpsc::channel();
    thread::Builder::new()
        .name("bridge-events".into())
        .spawn(move || {
            while let Some(e) = server.next_event() {
                if !sink(e) {
                    break;
                }
            }
            server.stop();
            let _ = done_tx.send(());
        })?;
    Ok(Running {
        addr,
        lock_path,
        handle,
        stop: Some(Box::new(move || stopper.stop())),
        stopped: done_rx,
    })
}

type Started = (SocketAddr, Option<PathBuf>, Handle);

fn start_smol(opts: Options, mut sink: EventSink) -> io::Result<Running> {
    let (started_tx, started_rx) = mpsc::channel::<io::Result<Started>>();
    let (stop_tx, stop_rx) = smol::channel::bounded::<()>(1);
    let (done_tx, done_rx) = mpsc::channel();
    thread::Builder::new()
        .name("bridge-smol".into())
        .spawn(move || {
            smol::block_on(async move {
                let server = match claude_ide_bridge_smol::IdeServer::start(opts).await {
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
                loop {
                    let next = smol::future::or(async { server.next_event().await }, async {
                        let _ = stop_rx.recv().await;
                        None
                    })
                    .await;
                    match next {
                        Some(e) => {
                            if !sink(e) {
                                break;
                            }
                        }
                        None => break,
                    }
                }
                server.stop().await;
                let _ = done_tx.send(());
            })
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
