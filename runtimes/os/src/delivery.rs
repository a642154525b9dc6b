//! The path of events and answers shared by both runtimes: the queue of events for a handler,
//! who is running it, the answers held back while it works through a burst, and the step that
//! writes new output from the thread that produced it or wakes the connection's writer.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::thread::{self, ThreadId};

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
///
/// ```
/// use claude_ide_bridge::{ConnectionId, DisconnectReason, Event};
/// use claude_ide_bridge_os::Delivery;
///
/// let mut d = Delivery::default();
/// let gone = |n| Event::Disconnected { conn: ConnectionId(n), reason: DisconnectReason::Closed(None) };
/// d.queue.push_back(gone(1));
/// d.queue.push_back(gone(2));
/// assert!(d.begin());
/// assert!(!d.begin()); // one delivering thread at a time
/// let _first = d.take_next();
/// assert!(d.should_hold()); // another event of the burst is queued for this thread
/// d.hold(ConnectionId(1));
/// let _second = d.take_next();
/// assert!(!d.should_hold()); // the burst's last one: write what is held now
/// assert_eq!(d.pop_held(), Some(ConnectionId(1)));
/// assert_eq!(d.pop_held(), None);
/// d.end();
/// assert!(!d.should_hold());
/// ```
#[derive(Debug, Default)]
pub struct Delivery {
    /// Events waiting for the handler.
    pub queue: VecDeque<Event>,
    /// The thread running the handler, if any.
    delivering: Option<ThreadId>,
    /// Events of the current burst still queued after the one being delivered.
    burst_left: usize,
    /// Connections with answers held back by [`hold`](Self::hold).
    held: Vec<ConnectionId>,
}

impl Delivery {
    /// Start delivering from this thread: false when another thread (or this one, re-entered from
    /// the handler) is already delivering, or when nothing is queued.
    pub fn begin(&mut self) -> bool {
        if self.delivering.is_some() || self.queue.is_empty() {
            return false;
        }
        self.delivering = Some(thread::current().id());
        true
    }

    /// The next event for the delivering thread. The first event of a burst makes the events
    /// queued behind it (at most [`MAX_BURST`] − 1) the rest of that burst.
    pub fn take_next(&mut self) -> Option<Event> {
        let event = self.queue.pop_front()?;
        self.burst_left = match self.burst_left {
            0 => self.queue.len().min(MAX_BURST - 1),
            n => n - 1,
        };
        Some(event)
    }

    /// Stop delivering (the queue is empty).
    pub fn end(&mut self) {
        self.delivering = None;
        self.burst_left = 0;
    }

    /// True when this thread is delivering and more events of the current burst wait for it: new
    /// output for the peer can wait for their answers to join it.
    pub fn should_hold(&self) -> bool {
        self.burst_left > 0
            && self.delivering.is_some()
            && self.delivering == Some(thread::current().id())
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
pub struct Backlog(std::sync::atomic::AtomicUsize);

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

/// Most events in one burst (see [`Delivery`]).
pub const MAX_BURST: usize = 64;

/// Output held for a burst is written at once, burst or not, when a connection has this many bytes
/// waiting: a burst's answers are written in pieces of about this size, never piled up.
pub const MAX_HELD_BYTES: usize = 64 * 1024;

/// A connection's socket, as the shared output step ([`act_on_ready`], [`write_held`]) sees it.
/// Each runtime implements it for its connection record.
pub trait Wire {
    /// Sends what the socket takes now, never blocking: `Ok(0)` or an error (`WouldBlock`) when it
    /// takes nothing.
    fn try_send(&self, buf: &[u8]) -> io::Result<usize>;
    /// Shuts the socket down both ways (which also unblocks a writer stuck on a full socket).
    fn shutdown(&self);
    /// Wakes the connection's writer.
    fn wake_writer(&self);
    /// The writer holds a chunk of the output in flight: nobody else may write until it has advanced.
    fn writing(&self) -> bool;
}

/// Writes `conn`'s pending output now, from the calling thread, without blocking. True when
/// everything was written and the writer has nothing to do; false when the socket was full (or
/// failed: the writer meets the error and acts on it) or the connection is to be closed.
pub fn write_now(core: &mut Core, conn: ConnectionId, wire: &impl Wire) -> bool {
    loop {
        let out = core.server.transmit(conn);
        if out.is_empty() {
            return !core.server.should_close(conn);
        }
        match wire.try_send(out) {
            Ok(n) if n > 0 => core.server.advance_transmit(conn, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

/// Acts on the connections a [`Core::drain`] found ready (`ready`, emptied): shuts down those to
/// close; with `inline`, writes new output from this thread ([`write_now`]) when the writer is idle,
/// or holds it when [`Delivery::should_hold`] (a burst is being answered) and less than
/// [`MAX_HELD_BYTES`] wait; wakes the writer for the rest. Then, with `inline` and nothing held
/// back now, writes what earlier calls held.
///
/// Call it after moving the drained events into `delivery.queue`, so that a burst's events count.
pub fn act_on_ready<W: Wire>(
    core: &mut Core,
    ready: &mut Vec<(ConnectionId, bool)>,
    conns: &HashMap<ConnectionId, W>,
    delivery: &mut Delivery,
    inline: bool,
    stopped: bool,
) {
    let hold = inline && delivery.should_hold();
    for (conn, close) in ready.drain(..) {
        let Some(c) = conns.get(&conn) else { continue };
        if close {
            c.shutdown();
        } else if hold && core.server.transmit(conn).len() < MAX_HELD_BYTES {
            delivery.hold(conn);
            continue;
        } else if inline && !c.writing() && !stopped && write_now(core, conn, c) {
            continue;
        }
        c.wake_writer();
    }
    if inline && !hold && delivery.has_held() {
        write_held(core, conns, delivery, stopped);
    }
}

/// Writes the output [`Delivery`] held back, from this thread, or wakes the writers for it.
pub fn write_held<W: Wire>(
    core: &mut Core,
    conns: &HashMap<ConnectionId, W>,
    delivery: &mut Delivery,
    stopped: bool,
) {
    while let Some(conn) = delivery.pop_held() {
        let Some(c) = conns.get(&conn) else { continue };
        if !c.writing() && !stopped && write_now(core, conn, c) {
            continue;
        }
        c.wake_writer();
    }
}

/// What [`deliver`] needs of a runtime's state: the parts of it the delivery loop works on.
pub trait DeliveryState {
    /// The runtime's connection record.
    type Wire: Wire;
    /// The engine, the connections, the handler's queue, and whether the server has stopped.
    fn parts(
        &mut self,
    ) -> (
        &mut Core,
        &HashMap<ConnectionId, Self::Wire>,
        &mut Delivery,
        bool,
    );
}

/// The delivery loop both runtimes run after every call into the engine, once their state lock
/// is released: hands the events queued in [`Delivery`] to `run` (which calls the host's handler),
/// in order, one at a time, with `state` unlocked while `run` works, from this thread, unless
/// another thread (or this one, re-entered from the handler) is already delivering, which then
/// runs them after its current call. Each event is counted off `backlog` as it is handed over. An
/// event whose `run` returns `Err` (a panic caught in the handler) is dropped and logged; the rest
/// are delivered. Finally the answers held for the burst are written ([`write_held`]).
///
/// A poisoned lock is used as it is: a panic elsewhere never stops delivery.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use claude_ide_bridge::{AuthToken, Config, ConnectionId, DisconnectReason, Event, Server};
/// use claude_ide_bridge_os::{deliver, Backlog, Core, Delivery, DeliveryState, Wire};
///
/// struct Sock; // a runtime's connection record
/// impl Wire for Sock {
///     fn try_send(&self, buf: &[u8]) -> std::io::Result<usize> { Ok(buf.len()) }
///     fn shutdown(&self) {}
///     fn wake_writer(&self) {}
///     fn writing(&self) -> bool { false }
/// }
/// struct State { core: Core, conns: HashMap<ConnectionId, Sock>, delivery: Delivery }
/// impl DeliveryState for State {
///     type Wire = Sock;
///     fn parts(&mut self) -> (&mut Core, &HashMap<ConnectionId, Sock>, &mut Delivery, bool) {
///         (&mut self.core, &self.conns, &mut self.delivery, false)
///     }
/// }
///
/// let server = Server::new(Config::new(AuthToken::from_string("token".to_string())));
/// let state = Mutex::new(State {
///     core: Core::new(server, None),
///     conns: HashMap::new(),
///     delivery: Delivery::default(),
/// });
/// let backlog = Backlog::default();
/// let gone = |n| Event::Disconnected { conn: ConnectionId(n), reason: DisconnectReason::Closed(None) };
/// state.lock().unwrap().delivery.queue.extend([gone(1), gone(2), gone(3)]);
/// backlog.add(3);
/// let mut seen = Vec::new();
/// deliver(&state, &backlog, |event| {
///     let Event::Disconnected { conn, .. } = event else { unreachable!() };
///     seen.push(conn.0);
///     // As if the handler panicked on the second event: it is dropped, the third still comes.
///     if conn.0 == 2 { Err(()) } else { Ok(()) }
/// });
/// assert_eq!(seen, [1, 2, 3]);
/// assert!(!backlog.is_waiting());
/// ```
pub fn deliver<S: DeliveryState>(
    state: &std::sync::Mutex<S>,
    backlog: &Backlog,
    mut run: impl FnMut(Event) -> Result<(), ()>,
) {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let mut st = lock();
    if !st.parts().2.begin() {
        return;
    }
    while let Some(event) = backlog.taken(st.parts().2.take_next()) {
        drop(st);
        let outcome = run(event);
        st = lock();
        if outcome.is_err() {
            st.parts()
                .0
                .log(|| "the event handler panicked; its event is dropped".to_string());
        }
    }
    let (core, conns, delivery, stopped) = st.parts();
    delivery.end();
    // Answers held for a burst whose last event gave none.
    write_held(core, conns, delivery, stopped);
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
