//! Slow work off the host thread: reading and writing files, listing the workspace.
//!
//! The host thread handles every input in turn, so one slow answer (a read on a hung network
//! mount) would hold up every other client, the stdio editor and the signals. A job runs on its
//! own named thread instead and answers its call through its own clone of the runtime's handle.
//! At most [`MAX_JOBS`] run at once; past that a call is refused at once with a clear error
//! rather than queued without bound.
//!
//! Every job has a deadline ([`JOB_DEADLINE`]): the work runs on one thread and a second one
//! waits for it at most that long, then answers the call with a time-out error. Where the kernel
//! itself blocks (a read on a dead network mount) the work's thread stays blocked and keeps its
//! slot until the kernel lets go, so stuck jobs are bounded in number by [`MAX_JOBS`]. Nothing
//! waits for a job: stopping the bridge stops the server and exits while a stuck job's thread is
//! still blocked, and the process's exit ends it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use claude_ide_bridge::RpcError;
use claude_ide_bridge::{ApiError, CallId, Content, ToolResult};
use serde_json::Value;

use crate::ui;
use claude_ide_bridge_runtime::Handle;

mod room;
pub use room::{Room, Taken, FREE_READ, READ_ROOM};

/// How many jobs may run at once.
pub const MAX_JOBS: usize = 64;

/// How many of them one connection's calls may hold, so that a client flooding the bridge with
/// slow requests cannot take every job from the others.
pub const MAX_JOBS_PER_CONNECTION: usize = 16;

/// The last jobs of all, kept for connections holding fewer than [`FEW_JOBS`]: four connections
/// keeping 16 calls each waiting on a hung language server took all 64, and every other client's
/// `readFile` was refused for as long (103 of 104 in the abuse audit).
pub const RESERVED_JOBS: usize = 16;

/// How many jobs a connection may hold and still take one of the [`RESERVED_JOBS`].
pub const FEW_JOBS: usize = 4;

/// The very last jobs, of the [`RESERVED_JOBS`], kept for connections holding none: one for each
/// connection the engine admits (`Limits::max_connections`, 10), so that a client whose calls
/// hold no job always gets one run. (Seven busy connections, three holding 16 and four holding
/// 3, took all 64, and a new client's `readFile` was refused.)
pub const KEPT_FOR_IDLE: usize = 10;

/// How long a job may take before its call is answered with a time-out error. Longer than any
/// bound of the files crate (a listing stops itself after 5 s), so only a file system that does
/// not answer reaches it.
pub const JOB_DEADLINE: Duration = Duration::from_secs(20);

/// The jobs of one host.
pub struct Jobs {
    handle: Handle,
    slots: Slots,
    next: AtomicU64,
    deadline: Duration,
    /// Jobs started and not yet through their `done` (their answer given).
    in_flight: Arc<AtomicUsize>,
    /// Room for the bytes of files read for clients ([`READ_ROOM`]).
    room: Arc<Room>,
}

/// One job counted in [`Jobs::in_flight`] until dropped (after its `done`, or with it unrun).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The refusal when every slot is taken (or every slot one connection may hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// Every job of the bridge is taken.
    All(usize),
    /// The connection holds as many as it may.
    Connection(usize),
    /// The jobs left (this many) are kept for connections holding fewer than [`FEW_JOBS`] (the
    /// last [`KEPT_FOR_IDLE`] for those holding none), and this one holds more.
    Kept(usize),
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Busy::All(n) => write!(
                f,
                "The bridge is busy with {n} operations; try again when one has finished"
            ),
            Busy::Connection(n) => write!(
                f,
                "This connection has {n} operations in progress; try again when one has finished"
            ),
            Busy::Kept(n) if *n <= KEPT_FOR_IDLE => write!(
                f,
                "The bridge's last {n} operations are kept for connections with none in \
                 progress; try again when one of this connection's has finished"
            ),
            Busy::Kept(n) => write!(
                f,
                "The bridge's last {n} operations are kept for connections with fewer than \
                 {FEW_JOBS} in progress; try again when one of this connection's has finished"
            ),
        }
    }
}

/// Why a job gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stalled {
    /// It had not finished at its deadline (it may still finish later).
    TimedOut(Duration),
    /// It ended without a result (it panicked, or its thread could not start).
    Failed,
    /// Not run: nobody waited for its answer any more when it would have started.
    Gone,
}

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stalled::TimedOut(d) => write!(
                f,
                "the file system did not answer within {} s (the operation may still complete)",
                d.as_secs()
            ),
            Stalled::Failed => f.write_str("the operation failed without an answer"),
            Stalled::Gone => f.write_str("the call was no longer waiting"),
        }
    }
}

impl Jobs {
    /// Jobs answering through clones of `handle`, each bounded by [`JOB_DEADLINE`].
    pub fn new(handle: Handle) -> Jobs {
        Jobs::with_deadline(handle, JOB_DEADLINE)
    }

    /// Jobs with another deadline.
    pub fn with_deadline(handle: Handle, deadline: Duration) -> Jobs {
        Jobs {
            handle,
            slots: Slots::new(MAX_JOBS, MAX_JOBS_PER_CONNECTION).with_reserves(),
            next: AtomicU64::new(1),
            deadline,
            in_flight: Arc::default(),
            room: Room::new(READ_ROOM),
        }
    }

    /// The room for the bytes of files read for clients, which a read takes before it reads
    /// and holds until its answer is queued ([`Jobs::compat_holding`]).
    pub fn room(&self) -> Arc<Room> {
        self.room.clone()
    }

    /// Waits, at most `within`, for the jobs started to give their answers: at exit, an
    /// accepted diff whose check is still running is answered `FILE_SAVED` before the stop
    /// answers whatever is still pending (`Host::say_goodbye`).
    pub fn settle(&self, within: Duration) {
        let give_up = std::time::Instant::now() + within;
        while self.in_flight.load(Ordering::Acquire) > 0 && std::time::Instant::now() < give_up {
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Answers tool call `call` with the result of `work`, computed on a job thread.
    pub fn tool(&self, call: CallId, work: impl FnOnce() -> ToolResult + Send + 'static) {
        self.tool_or(call, work, |_| {});
    }

    /// [`Jobs::tool`] for work that also waits up to `extra` on purpose (a language server's
    /// start and answer, bounded by the waits the user set): its deadline is the jobs' own plus
    /// `extra`.
    pub fn tool_longer(
        &self,
        call: CallId,
        extra: Duration,
        work: impl FnOnce() -> ToolResult + Send + 'static,
    ) {
        self.tool_or_longer(call, extra, work, |_| {});
    }

    /// [`Jobs::tool`], telling `not_given` when the call's answer is not `work`'s success: a
    /// tool error (`work`'s own, a busy refusal, or no answer in time), or no answer at all.
    pub fn tool_or(
        &self,
        call: CallId,
        work: impl FnOnce() -> ToolResult + Send + 'static,
        not_given: impl Fn(NotGiven) + Send + Sync + 'static,
    ) {
        self.tool_or_longer(call, Duration::ZERO, work, not_given);
    }

    /// [`Jobs::tool_or`] for work that also waits up to `extra` on purpose (an accepted diff
    /// waiting for the file's language servers): its deadline is the jobs' own plus `extra`.
    pub fn tool_or_longer(
        &self,
        call: CallId,
        extra: Duration,
        work: impl FnOnce() -> ToolResult + Send + 'static,
        not_given: impl Fn(NotGiven) + Send + Sync + 'static,
    ) {
        let not_given = Arc::new(not_given);
        let answer = move |handle: &Handle, result: ToolResult, not_given: &dyn Fn(NotGiven)| {
            let error = result.is_error.then(|| match result.content.first() {
                Some(Content::Text(text)) => text.clone(),
                _ => "a tool error".to_owned(),
            });
            match (handle.respond(call, result), error) {
                // Claude was told an error in its place: the decision was not given.
                (Err(e @ ApiError::AnswerTooLarge), _) => {
                    ui::say(&super::not_given(call, &e));
                    let told = "an error: the answer did not fit in its connection's output queue";
                    not_given(NotGiven::Refused(told.to_owned()));
                }
                (Err(e), _) => {
                    ui::say(&super::not_given(call, &e));
                    not_given(NotGiven::Dropped(e));
                }
                (Ok(()), Some(why)) => not_given(NotGiven::Refused(why)),
                (Ok(()), None) => {}
            }
        };
        let (handle, later) = (self.handle.clone(), not_given.clone());
        let done = move |r: Result<ToolResult, Stalled>| {
            let result = r.unwrap_or_else(|why| ToolResult::error(format!("No answer: {why}")));
            answer(&handle, result, &*later);
        };
        if let Err(busy) = self.run_longer(call, extra, work, done) {
            ui::say(&format!("call refused: {busy}"));
            answer(
                &self.handle,
                ToolResult::error(busy.to_string()),
                &*not_given,
            );
        }
    }

    /// Answers compatibility request `call` with the result of `work`, computed on a job thread.
    pub fn compat(
        &self,
        call: CallId,
        work: impl FnOnce() -> Result<Value, RpcError> + Send + 'static,
    ) {
        self.compat_holding(call, move || (work(), ()));
    }

    /// [`Jobs::compat`] for work that gives, with its result, something to hold until the
    /// answer is in the connection's output queue (or not given): the [`Taken`] room of a read,
    /// whose bytes are held, in the answer's JSON and frame, until then.
    pub fn compat_holding<H: Send + 'static>(
        &self,
        call: CallId,
        work: impl FnOnce() -> (Result<Value, RpcError>, H) + Send + 'static,
    ) {
        let handle = self.handle.clone();
        let done = move |r: Result<(Result<Value, RpcError>, H), Stalled>| {
            let (result, held) = match r {
                Ok((result, held)) => (result, Some(held)),
                Err(why) => (Err(RpcError::internal(why.to_string())), None),
            };
            if let Err(e) = handle.respond_compat(call, result) {
                ui::say(&super::not_given(call, &e));
            }
            drop(held);
        };
        if let Err(busy) = self.run(call, work, done) {
            ui::say(&format!("call refused: {busy}"));
            let refusal = RpcError::new(RpcError::TOO_MANY_CALLS, busy.to_string());
            if let Err(e) = self.handle.respond_compat(call, Err(refusal)) {
                ui::say(&super::not_given(call, &e));
            }
        }
    }

    /// Runs `work` for `call` on a job thread and hands its result (or why there is none by the
    /// deadline) to `done`, on another thread that waits at most the deadline.
    pub fn run<T: Send + 'static>(
        &self,
        call: CallId,
        work: impl FnOnce() -> T + Send + 'static,
        done: impl FnOnce(Result<T, Stalled>) + Send + 'static,
    ) -> Result<(), Busy> {
        self.run_longer(call, Duration::ZERO, work, done)
    }

    /// [`Jobs::run`] with a deadline longer by `extra`.
    fn run_longer<T: Send + 'static>(
        &self,
        call: CallId,
        extra: Duration,
        work: impl FnOnce() -> T + Send + 'static,
        done: impl FnOnce(Result<T, Stalled>) + Send + 'static,
    ) -> Result<(), Busy> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let flight = InFlight::enter(&self.in_flight);
        // Not done for a call nobody waits for any more (cancelled, or its client gone while the
        // job waited for its thread): a client that asked for many large files and left had its
        // reads done for half a minute after, holding up everyone else.
        let handle = self.handle.clone();
        let work = move || handle.is_pending(call).then(work);
        let done = move |r: Result<Option<T>, Stalled>| {
            done(r.and_then(|answer| answer.ok_or(Stalled::Gone)));
            drop(flight);
        };
        self.slots.run(
            format!("job-{n}"),
            call.conn.0,
            self.deadline.saturating_add(extra),
            work,
            done,
        )
    }
}

/// Why a call's answer was not what its work gave ([`Jobs::tool_or`]).
#[derive(Debug)]
pub enum NotGiven {
    /// The client was told this tool error instead.
    Refused(String),
    /// The client was told nothing: the call was no longer waiting.
    Dropped(ApiError),
}

/// A count of running jobs with a ceiling, overall and per connection.
#[derive(Clone)]
struct Slots {
    counts: Arc<Mutex<Counts>>,
    max: usize,
    max_per_owner: usize,
    /// The last jobs kept for connections holding fewer than [`FEW_JOBS`], and of them the
    /// last for connections holding none ([`Slots::with_reserves`]; none by default).
    reserved: usize,
    kept_for_idle: usize,
}

/// The jobs running, in all and per owner (a connection), under one lock.
#[derive(Default)]
struct Counts {
    running: usize,
    per_owner: HashMap<u64, usize>,
}

/// One taken slot, given back when dropped (when the job ends, or unwinds, or never started).
struct Slot {
    counts: Arc<Mutex<Counts>>,
    owner: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.running -= 1;
        if let Some(n) = counts.per_owner.get_mut(&self.owner) {
            *n -= 1;
            if *n == 0 {
                counts.per_owner.remove(&self.owner);
            }
        }
    }
}

impl Slots {
    fn new(max: usize, max_per_owner: usize) -> Slots {
        Slots {
            counts: Arc::default(),
            max,
            max_per_owner,
            reserved: 0,
            kept_for_idle: 0,
        }
    }

    /// The bridge's: [`RESERVED_JOBS`] kept for connections holding few, [`KEPT_FOR_IDLE`] of
    /// them for those holding none.
    fn with_reserves(self) -> Slots {
        Slots {
            reserved: RESERVED_JOBS,
            kept_for_idle: KEPT_FOR_IDLE,
            ..self
        }
    }

    /// Takes a slot for `owner` (a connection) when one is free.
    fn take(&self, owner: u64) -> Result<Slot, Busy> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let held = counts.per_owner.get(&owner).copied().unwrap_or(0);
        if held >= self.max_per_owner {
            return Err(Busy::Connection(self.max_per_owner));
        }
        if counts.running >= self.max {
            return Err(Busy::All(self.max));
        }
        // The last few are for those holding few, the very last for those holding none: the
        // others are busy enough.
        let free = self.max - counts.running;
        if (free <= self.reserved && held >= FEW_JOBS) || (free <= self.kept_for_idle && held > 0) {
            return Err(Busy::Kept(free));
        }
        counts.running += 1;
        counts.per_owner.insert(owner, held + 1);
        Ok(Slot {
            counts: self.counts.clone(),
            owner,
        })
    }

    /// Runs `work` on a thread named `name`-work holding a slot, and `done` with its result
    /// on a thread named `name` that waits for it at most `deadline`.
    fn run<T: Send + 'static>(
        &self,
        name: String,
        owner: u64,
        deadline: Duration,
        work: impl FnOnce() -> T + Send + 'static,
        done: impl FnOnce(Result<T, Stalled>) + Send + 'static,
    ) -> Result<(), Busy> {
        let slot = self.take(owner)?;
        let max = self.max;
        let work_name = format!("{name}-work");
        thread::Builder::new()
            .name(name)
            .spawn(move || {
                let (tx, rx) = mpsc::sync_channel(1);
                // The work's thread holds the slot: a thread the kernel keeps blocked keeps it.
                // If it cannot start, the closure and the slot are dropped here.
                let started = thread::Builder::new().name(work_name).spawn(move || {
                    let _slot = slot;
                    let _ = tx.send(work());
                });
                if let Err(e) = started {
                    ui::say(&format!("cannot start a job thread: {e}"));
                }
                done(match rx.recv_timeout(deadline) {
                    Ok(v) => Ok(v),
                    Err(mpsc::RecvTimeoutError::Timeout) => Err(Stalled::TimedOut(deadline)),
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(Stalled::Failed),
                })
            })
            .map(drop)
            .map_err(|e| {
                ui::say(&format!("cannot start a job thread: {e}"));
                Busy::All(max)
            })
    }

    /// Runs `work` on a new thread named `name` when a slot is free.
    #[cfg(test)]
    fn spawn(&self, name: String, work: impl FnOnce() + Send + 'static) -> Result<(), Busy> {
        let slot = self.take(0)?;
        thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _slot = slot;
                work();
            })
            .map(drop)
            .map_err(|_| Busy::All(self.max))
    }

    #[cfg(test)]
    fn running(&self) -> usize {
        self.counts.lock().unwrap().running
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
        let slots = Slots::new(3, 10);
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
            Err(Busy::All(3))
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
        let slots = Slots::new(1, 1);
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
    fn a_job_past_its_deadline_is_answered_and_keeps_its_slot_until_it_ends() {
        let slots = Slots::new(2, 2);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        let start = Instant::now();
        let deadline = Duration::from_millis(200);
        slots
            .run(
                "stuck".into(),
                1,
                deadline,
                move || release_rx.recv().map(|()| 7),
                move |r| done_tx.send(r).unwrap(),
            )
            .unwrap();
        // Answered at the deadline, while the work is still blocked.
        assert_eq!(
            done_rx.recv_timeout(WAIT).unwrap(),
            Err(Stalled::TimedOut(deadline))
        );
        assert!(start.elapsed() >= deadline);
        assert_eq!(slots.running(), 1);
        // A quick job still gets its result.
        let (quick_tx, quick_rx) = mpsc::channel();
        slots
            .run(
                "quick".into(),
                1,
                WAIT,
                || 5,
                move |r| quick_tx.send(r).unwrap(),
            )
            .unwrap();
        assert_eq!(quick_rx.recv_timeout(WAIT).unwrap(), Ok(5));
        // The stuck one lets go: its slot comes back.
        release_tx.send(()).unwrap();
        wait_until(|| slots.running() == 0);
        // A job that panics is reported as failed, not left unanswered.
        let (failed_tx, failed_rx) = mpsc::channel();
        slots
            .run(
                "panics".into(),
                1,
                WAIT,
                || -> u8 { panic!("a job failed") },
                move |r| failed_tx.send(r).unwrap(),
            )
            .unwrap();
        assert_eq!(failed_rx.recv_timeout(WAIT).unwrap(), Err(Stalled::Failed));
    }

    /// Connections holding many jobs (calls waiting on a hung language server) leave the last
    /// [`RESERVED_JOBS`] to those holding few: a fifth client still gets its `readFile` run.
    #[test]
    fn the_last_jobs_are_kept_for_connections_holding_few() {
        let slots = Slots::new(MAX_JOBS, MAX_JOBS_PER_CONNECTION).with_reserves();
        let mut held = Vec::new();
        for owner in 1..=4 {
            while let Ok(slot) = slots.take(owner) {
                held.push(slot);
            }
        }
        assert_eq!(held.len(), MAX_JOBS - RESERVED_JOBS + FEW_JOBS);
        // Said as kept for others, with how many are left (it said "busy with 52").
        let left = MAX_JOBS - held.len();
        assert_eq!(slots.take(4).err(), Some(Busy::Kept(left)));
        assert!(Busy::Kept(left).to_string().starts_with(&format!(
            "The bridge's last {left} operations are kept for connections with fewer than 4"
        )));
        // A fifth holding few takes them down to the last KEPT_FOR_IDLE, which are for
        // connections holding none, one each.
        while let Ok(slot) = slots.take(5) {
            held.push(slot);
        }
        assert_eq!(MAX_JOBS - held.len(), KEPT_FOR_IDLE);
        for owner in 6..6 + KEPT_FOR_IDLE as u64 {
            held.push(slots.take(owner).unwrap());
            assert!(slots.take(owner).is_err(), "{owner} holds one");
        }
        assert_eq!(held.len(), MAX_JOBS);
        assert!(slots.take(1).is_err());
    }

    /// However the busy connections share the jobs, each connection holding none still gets one,
    /// up to as many connections as the engine admits: seven busy ones (three holding 16, four
    /// holding 3) took all 64 and a new client's `readFile` was refused.
    #[test]
    fn a_connection_holding_none_always_gets_a_job() {
        assert!(KEPT_FOR_IDLE >= claude_ide_bridge::Limits::default().max_connections);
        for busy in 1..claude_ide_bridge::Limits::default().max_connections as u64 {
            let slots = Slots::new(MAX_JOBS, MAX_JOBS_PER_CONNECTION).with_reserves();
            let mut held = Vec::new();
            // The busy ones take all they may, one after the other.
            for owner in 1..=busy {
                while let Ok(slot) = slots.take(owner) {
                    held.push(slot);
                }
            }
            // Every other connection admitted gets one.
            for owner in busy + 1..=10 {
                match slots.take(owner) {
                    Ok(slot) => held.push(slot),
                    Err(e) => panic!("{busy} busy: connection {owner} refused: {e}"),
                }
            }
        }
        assert!(Busy::Kept(3)
            .to_string()
            .contains("kept for connections with none in progress"));
    }

    #[test]
    fn one_connection_cannot_take_every_job() {
        let slots = Slots::new(4, 2);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(slots.take(1).unwrap());
        }
        assert_eq!(slots.take(1).err(), Some(Busy::Connection(2)));
        // Another connection still gets its jobs, up to the overall limit.
        let rx = release_rx.clone();
        slots
            .spawn("other".into(), move || {
                let _ = rx.lock().unwrap().recv();
            })
            .unwrap();
        held.push(slots.take(2).unwrap());
        assert_eq!(slots.take(3).err(), Some(Busy::All(4)));
        // A finished job gives its connection's slot back.
        held.remove(0);
        assert!(slots.take(1).is_ok());
        drop(held);
        drop(release_tx);
        wait_until(|| slots.running() == 0);
    }

    #[test]
    fn the_refusal_names_the_limit() {
        assert_eq!(
            Busy::All(MAX_JOBS).to_string(),
            "The bridge is busy with 64 operations; try again when one has finished"
        );
        assert_eq!(
            Busy::Connection(MAX_JOBS_PER_CONNECTION).to_string(),
            "This connection has 16 operations in progress; try again when one has finished"
        );
    }
}
