//! The path of events and answers shared by both runtimes: the queue of events for a handler,
//! who is running it, the answers held back while it works through a burst, and the step that
//! writes new output from the thread that produced it or wakes the connection's writer.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::io;

use claude_ide_bridge::{ConnectionId, Event};

use crate::Core;

/// Events waiting for a host's handler, delivered in order by one thread at a time, and the
/// connections whose answers wait for that thread to finish a burst.
///
/// A runtime keeps it under its state lock. The thread that [`begin`](Self::begin)s delivering
/// takes events with [`take_next`](Self::take_next) and runs the handler with the lock released; others only
/// queue (the delivering thread runs what they queued after its current event). When the handler
/// answers a call while more events of the same burst wait for it (several requests arrived in
/// one read), the answer is [held](Self::hold) and written with the burst's last one: one system
/// call for a burst instead of one per answer. Answers from other threads are never held.
///
/// A burst is what was queued when its first event was taken, at most [`MAX_BURST`] events: events
/// queued meanwhile (a peer that keeps sending) start a new burst, so held answers wait at most for
/// the handler to go through events that had already arrived.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    /// Events waiting for the handler.
    pub queue: VecDeque<Event>,
    /// The thread running the handler, if any ([`this_thread`]).
    delivering: Option<usize>,
    /// Events of the current burst still queued after the one being delivered.
    burst_left: usize,
    /// Connections with answers held back by [`hold`](Self::hold).
    held: Vec<ConnectionId>,
    /// When the event being delivered was taken ([`Delivery::waiting_since`]).
    taken_at: Option<std::time::Instant>,
}

/// An identity of the calling thread, for as long as it runs: the address of a thread-local.
/// (`thread::current()` costs two atomic operations on a shared count, on every delivery.)
fn this_thread() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| m as *const u8 as usize)
}

impl Delivery {
    /// Start delivering from this thread: false when another thread (or this one, re-entered from
    /// the handler) is already delivering, or when nothing is queued.
    pub fn begin(&mut self) -> bool {
        if self.delivering.is_some() || self.queue.is_empty() {
            return false;
        }
        self.delivering = Some(this_thread());
        true
    }

    /// The next event for the delivering thread. The first event of a burst makes the events
    /// queued behind it (at most [`MAX_BURST`] − 1) the rest of that burst.
    pub fn take_next(&mut self) -> Option<Event> {
        let event = self.queue.pop_front()?;
        self.taken_at = Some(std::time::Instant::now());
        self.burst_left = match self.burst_left {
            0 => self.queue.len().min(MAX_BURST - 1),
            n => n - 1,
        };
        Some(event)
    }

    /// Stop delivering (the queue is empty, or the thread hands the rest over).
    pub fn end(&mut self) {
        self.delivering = None;
        self.burst_left = 0;
        self.taken_at = None;
    }

    /// Since when the handler has had the event it is handed now, while a thread delivers: a
    /// handler kept waiting (its host waits for room) keeps the delivering thread, a connection's
    /// reader, from reading.
    pub fn waiting_since(&self) -> Option<std::time::Instant> {
        self.taken_at.filter(|_| self.delivering.is_some())
    }

    /// True when this thread is delivering and more events of the current burst wait for it: new
    /// output for the peer can wait for their answers to join it.
    pub fn should_hold(&self) -> bool {
        self.burst_left > 0 && self.delivering.is_some() && self.delivering == Some(this_thread())
    }

    /// Remember that `conn` has output held back.
    pub fn hold(&mut self, conn: ConnectionId) {
        if !self.held.contains(&conn) {
            self.held.push(conn);
        }
    }

    /// A connection with held output, to write now (forgotten here); `None` when none is left.
    /// The list keeps its capacity: no allocation per burst.
    pub fn pop_held(&mut self) -> Option<ConnectionId> {
        self.held.pop()
    }

    /// Whether any output is held.
    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }
}

/// Events waiting for the host (queued for its handler, or sent to its `next_event` and not taken
/// yet) past which the runtimes stop reading from their connections until the host catches up:
/// a peer cannot make events pile up without bound in front of a slow host.
pub const MAX_HOST_BACKLOG: usize = 4096;

/// The events waiting for the host (sent to its `next_event` and not taken yet, or queued for its
/// handler and not handed to it yet), counted without a lock so that readers can look before
/// every read.
#[derive(Debug, Default)]
pub(crate) struct Backlog(std::sync::atomic::AtomicUsize);

impl Backlog {
    /// `n` more events wait for the host (count them before handing them over).
    pub fn add(&self, n: usize) {
        self.0.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
    }

    /// Counts `event`, if any, as taken by the host; returns it.
    pub fn taken(&self, event: Option<Event>) -> Option<Event> {
        if event.is_some() {
            self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
        event
    }

    /// Sets the count (handler mode: the queue is counted under the state lock, and a store is
    /// cheaper than a read-modify-write).
    pub fn set(&self, n: usize) {
        self.0.store(n, std::sync::atomic::Ordering::Release);
    }

    /// Some event waits for the host.
    pub fn is_waiting(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// [`MAX_HOST_BACKLOG`] or more events wait.
    pub fn is_full(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) >= MAX_HOST_BACKLOG
    }
}

/// How often a connection's reader looks again whether the host has caught up.
pub const BACKLOG_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// Most events in one burst: the events a handler goes through while the answers it gives are held
/// back, to be written together in one system call.
pub const MAX_BURST: usize = 64;

/// Most events one thread delivers in a row before it hands the rest to the timer's thread or
/// task and goes back to its own work: a connection's reader that began delivering while another
/// peer keeps sending calls would otherwise deliver that peer's calls for as long as they come,
/// and never read its own socket again (its peer dropped as silent, the flooder served).
pub const MAX_DELIVERED: usize = 4 * MAX_BURST;

/// Output held for a burst is written at once, burst or not, when a connection has this many bytes
/// waiting: a burst's answers are written in pieces of about this size, never piled up.
pub const MAX_HELD_BYTES: usize = 64 * 1024;

/// A connection's socket as the shared part writes to it. Each runtime implements it for what it
/// keeps of an accepted connection.
pub trait Wire: Send {
    /// Sends what the socket takes now, never blocking: `Ok(0)` or an error (`WouldBlock`) when it
    /// takes nothing.
    fn try_send(&self, buf: &[u8]) -> io::Result<usize>;
    /// Shuts the socket down both ways and ends the connection's reader and writer, blocked in a
    /// call or waiting for the socket ([`shut_down`](crate::shut_down) where threads block on it).
    fn shutdown(&self);
    /// Wakes the connection's writer (a wake-up while it is not waiting is kept for its next wait).
    fn wake_writer(&self);
    /// Wakes the connection's reader, waiting for the peer to read its output
    /// ([`AfterInput::WaitForOutput`](crate::AfterInput::WaitForOutput)); a wake-up while it is
    /// not waiting is kept for its next wait.
    fn wake_reader(&self);
}

/// A connection: its socket, whether its writer holds a chunk of the output in flight (nobody
/// else may write until the writer has advanced), and whether its reader waits for the peer to
/// read its output ([`AfterInput::WaitForOutput`](crate::AfterInput::WaitForOutput)), to be woken
/// by whoever writes the output back under the engine's mark ([`wake_reader_if_wanted`]).
pub(crate) struct Conn {
    pub(crate) wire: Box<dyn Wire>,
    pub(crate) writing: bool,
    pub(crate) reading_paused: Cell<bool>,
    /// Its reader's first pause was logged.
    pub(crate) pause_logged: Cell<bool>,
}

impl Conn {
    pub(crate) fn new(wire: Box<dyn Wire>) -> Conn {
        Conn {
            wire,
            writing: false,
            reading_paused: Cell::new(false),
            pause_logged: Cell::new(false),
        }
    }
}

/// After some of `conn`'s output was written: its reader, waiting for that, is woken once the
/// engine wants its input again (`Server::wants_input`).
#[inline]
pub(crate) fn wake_reader_if_wanted(core: &Core, conn: ConnectionId, c: &Conn) {
    if c.reading_paused.get() && core.server.wants_input(conn) {
        c.reading_paused.set(false);
        c.wire.wake_reader();
    }
}

/// Writes `conn`'s pending output now, from the calling thread, without blocking. True when
/// everything was written and the writer has nothing to do; false when the socket was full (or
/// failed: the writer meets the error and acts on it) or the connection is to be closed.
#[inline(always)]
pub(crate) fn write_now(core: &mut Core, conn: ConnectionId, c: &Conn) -> bool {
    let done = loop {
        let out = core.server.transmit(conn);
        if out.is_empty() {
            break !core.server.should_close(conn);
        }
        match c.wire.try_send(out) {
            Ok(n) if n > 0 => core.server.advance_transmit(conn, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => break false,
        }
    };
    wake_reader_if_wanted(core, conn, c);
    done
}

/// Acts on the connections a [`Core::drain`] found ready (`ready`, emptied): shuts down those to
/// close; with `inline`, writes new output from this thread ([`write_now`]) when the writer is idle,
/// or holds it when [`Delivery::should_hold`] (a burst is being answered) and less than
/// [`MAX_HELD_BYTES`] wait; wakes the writer for the rest. Then, with `inline` and nothing held
/// back now, writes what earlier calls held.
///
/// Call it after moving the drained events into `delivery.queue`, so that a burst's events count.
pub(crate) fn act_on_ready(
    core: &mut Core,
    ready: &mut Vec<(ConnectionId, bool)>,
    conns: &BTreeMap<ConnectionId, Conn>,
    delivery: &mut Delivery,
    inline: bool,
    stopped: bool,
) {
    let hold = inline && delivery.should_hold();
    for (conn, close) in ready.drain(..) {
        let Some(c) = conns.get(&conn) else { continue };
        if close {
            c.wire.shutdown();
        } else if hold && core.server.transmit(conn).len() < MAX_HELD_BYTES {
            delivery.hold(conn);
            continue;
        } else if inline && !c.writing && !stopped && write_now(core, conn, c) {
            continue;
        }
        c.wire.wake_writer();
    }
    if inline && !hold && delivery.has_held() {
        write_held(core, conns, delivery, stopped);
    }
}

/// Writes the output [`Delivery`] held back, from this thread, or wakes the writers for it.
pub(crate) fn write_held(
    core: &mut Core,
    conns: &BTreeMap<ConnectionId, Conn>,
    delivery: &mut Delivery,
    stopped: bool,
) {
    while let Some(conn) = delivery.pop_held() {
        let Some(c) = conns.get(&conn) else { continue };
        if !c.writing && !stopped && write_now(core, conn, c) {
            continue;
        }
        c.wire.wake_writer();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge::DisconnectReason;

    fn gone(n: u64) -> Event {
        Event::Disconnected {
            conn: ConnectionId(n),
            reason: DisconnectReason::Closed(None),
        }
    }

    #[test]
    fn only_the_delivering_thread_holds() {
        let mut d = Delivery::default();
        d.queue.extend([gone(1), gone(2), gone(3)]);
        assert!(d.begin());
        d.take_next();
        assert!(d.should_hold());
        // Another thread answering meanwhile is never held back.
        let d = std::thread::scope(|s| {
            s.spawn(move || {
                assert!(!d.should_hold());
                d
            })
            .join()
            .unwrap()
        });
        let mut d = d;
        d.end();
        assert!(!d.should_hold());
        // Nothing queued: nothing to deliver.
        d.queue.clear();
        assert!(!d.begin());
    }

    #[test]
    fn a_burst_is_what_was_queued_when_it_began() {
        let mut d = Delivery::default();
        d.queue.extend([gone(1), gone(2), gone(3)]);
        assert!(d.begin());
        d.take_next(); // the burst: this one and the two behind it
        assert!(d.should_hold());
        // A peer that keeps sending: what arrives meanwhile does not lengthen the burst.
        d.queue.extend([gone(4), gone(5)]);
        d.take_next();
        assert!(d.should_hold());
        d.take_next(); // the burst's last event
        assert!(!d.should_hold());
        d.take_next(); // a new burst: 4 and 5
        assert!(d.should_hold());
        d.take_next();
        assert!(!d.should_hold());
        assert!(d.take_next().is_none());
    }

    #[test]
    fn a_burst_is_at_most_max_burst_events() {
        let mut d = Delivery::default();
        d.queue.extend((0..200).map(gone));
        assert!(d.begin());
        let mut held_run = 0;
        let mut runs = Vec::new();
        while d.take_next().is_some() {
            held_run += 1;
            if !d.should_hold() {
                runs.push(held_run);
                held_run = 0;
            }
        }
        assert_eq!(runs, [64, 64, 64, 8]);
    }

    #[test]
    fn held_connections_are_kept_once_each() {
        let mut d = Delivery::default();
        for c in [1, 2, 1, 1, 2] {
            d.hold(ConnectionId(c));
        }
        let mut held = Vec::new();
        while let Some(c) = d.pop_held() {
            held.push(c.0);
        }
        held.sort();
        assert_eq!(held, [1, 2]);
        assert!(!d.has_held());
    }
}
