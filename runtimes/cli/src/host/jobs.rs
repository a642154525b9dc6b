//! Slow work off the host thread: reading and writing files, listing the workspace.
//!
//! The host thread handles every input in turn, so one slow answer (a read on a hung network
//! mount) would hold up every other client, the stdio editor and the signals. A job runs on its
//! own named thread instead and answers its call through its own clone of the runtime's handle.
//! At most [`MAX_JOBS`] run at once; past that a call is refused at once with a clear error
//! rather than queued without bound. Nothing waits for a job: stopping the bridge stops the server
//! and exits while a stuck job's thread is still blocked, and the process's exit ends it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use claude_ide_bridge::jsonrpc::{RpcError, TOO_MANY_CALLS};
use claude_ide_bridge::{CallId, ToolResult};
use serde_json::Value;

use crate::ui;
use claude_ide_bridge_runtime::Handle;

/// How many jobs may run at once.
pub const MAX_JOBS: usize = 64;

/// The jobs of one host.
pub struct Jobs {
    handle: Handle,
    slots: Slots,
    next: AtomicU64,
}

/// The refusal when every slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy(pub usize);

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "The bridge is busy with {} operations; try again when one has finished",
            self.0
        )
    }
}

impl Jobs {
    /// Jobs answering through clones of `handle`.
    pub fn new(handle: Handle) -> Jobs {
        Jobs {
            handle,
            slots: Slots::new(MAX_JOBS),
            next: AtomicU64::new(1),
        }
    }

    /// Answers tool call `call` with the result of `work`, computed on a job thread.
    #[allow(dead_code)] // The headless tools that read files (getDiagnostics, reformat_file) move here next.
    pub fn tool(&self, call: CallId, work: impl FnOnce() -> ToolResult + Send + 'static) {
        let handle = self.handle.clone();
        let spawned = self.spawn(move || {
            if let Err(e) = handle.respond(call, work()) {
                ui::say(&format!("(answer dropped: {e})"));
            }
        });
        if let Err(busy) = spawned {
            ui::say(&format!("call refused: {busy}"));
            if let Err(e) = self
                .handle
                .respond(call, ToolResult::error(busy.to_string()))
            {
                ui::say(&format!("(answer dropped: {e})"));
            }
        }
    }

    /// Answers compatibility request `call` with the result of `work`, computed on a job thread.
    pub fn compat(
        &self,
        call: CallId,
        work: impl FnOnce() -> Result<Value, RpcError> + Send + 'static,
    ) {
        let handle = self.handle.clone();
        let spawned = self.spawn(move || {
            if let Err(e) = handle.respond_compat(call, work()) {
                ui::say(&format!("(answer dropped: {e})"));
            }
        });
        if let Err(busy) = spawned {
            ui::say(&format!("call refused: {busy}"));
            let refusal = RpcError::new(TOO_MANY_CALLS, busy.to_string());
            if let Err(e) = self.handle.respond_compat(call, Err(refusal)) {
                ui::say(&format!("(answer dropped: {e})"));
            }
        }
    }

    fn spawn(&self, work: impl FnOnce() + Send + 'static) -> Result<(), Busy> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.slots.spawn(format!("job-{n}"), work)
    }
}

/// A count of running jobs with a ceiling.
#[derive(Clone)]
struct Slots {
    running: Arc<AtomicUsize>,
    max: usize,
}

/// One taken slot, given back when dropped (when the job ends, or unwinds, or never started).
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    fn new(max: usize) -> Slots {
        Slots {
            running: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Runs `work` on a new thread named `name` when a slot is free.
    fn spawn(&self, name: String, work: impl FnOnce() + Send + 'static) -> Result<(), Busy> {
        let max = self.max;
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| Busy(max))?;
        let slot = Slot(self.running.clone());
        // If the thread cannot be started the closure, and the slot with it, is dropped here.
        thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _slot = slot;
                work();
            })
            .map(drop)
            .map_err(|e| {
                ui::say(&format!("cannot start a job thread: {e}"));
                Busy(max)
            })
    }

    #[cfg(test)]
    fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    const WAIT: Duration = Duration::from_secs(10);

    fn wait_until(mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + WAIT;
        while !done() {
            assert!(Instant::now() < give_up, "timed out");
            thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_blocked_job_does_not_hold_up_the_others_and_the_one_past_the_limit_is_refused() {
        let slots = Slots::new(3);
        // Two jobs block until released, as reads on a hung mount would.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
        for i in 0..2 {
            let rx = release_rx.clone();
            slots
                .spawn(format!("blocked-{i}"), move || {
                    let _ = rx.lock().unwrap().recv();
                })
                .unwrap();
        }
        // A third job still runs and finishes while they are blocked.
        let (done_tx, done_rx) = mpsc::channel();
        slots
            .spawn("quick".into(), move || {
                done_tx
                    .send(thread::current().name().map(str::to_owned))
                    .unwrap();
            })
            .unwrap();
        assert_eq!(
            done_rx.recv_timeout(WAIT).unwrap().as_deref(),
            Some("quick")
        );
        wait_until(|| slots.running() == 2);

        // Fill the last slot: the next job is refused and never runs.
        let (third_tx, third_rx) = mpsc::channel::<()>();
        slots
            .spawn("third".into(), move || {
                let _ = third_rx.recv();
            })
            .unwrap();
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        assert_eq!(
            slots.spawn("refused".into(), move || ran_tx.send(()).unwrap()),
            Err(Busy(3))
        );
        assert!(ran_rx.recv_timeout(Duration::from_millis(50)).is_err());
        assert_eq!(slots.running(), 3);

        // A finished job gives its slot back.
        drop(third_tx);
        wait_until(|| slots.running() == 2);
        let (ok_tx, ok_rx) = mpsc::channel();
        slots
            .spawn("later".into(), move || ok_tx.send(()).unwrap())
            .unwrap();
        ok_rx.recv_timeout(WAIT).unwrap();
        drop(release_tx);
        wait_until(|| slots.running() == 0);
    }

    #[test]
    fn a_job_that_panics_gives_its_slot_back() {
        let slots = Slots::new(1);
        slots
            .spawn("panics".into(), || panic!("a job failed"))
            .unwrap();
        wait_until(|| slots.running() == 0);
        let (tx, rx) = mpsc::channel();
        slots
            .spawn("next".into(), move || tx.send(()).unwrap())
            .unwrap();
        rx.recv_timeout(WAIT).unwrap();
    }

    #[test]
    fn the_refusal_names_the_limit() {
        assert_eq!(
            Busy(MAX_JOBS).to_string(),
            "The bridge is busy with 64 operations; try again when one has finished"
        );
    }
}
