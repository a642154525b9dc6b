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
/// pops events and runs the handler with the lock released; others only queue (the delivering
/// thread runs what they queued after its current event). When the handler answers a call while
/// more events are queued for the same thread (several requests arrived in one read), the answer
/// is [held](Self::hold) and written with the last one: one system call for a burst instead of
/// one per answer. Answers from other threads are never held.
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
/// let _first = d.queue.pop_front();
/// assert!(d.should_hold()); // another event is queued for this thread
/// d.hold(ConnectionId(1));
/// let _second = d.queue.pop_front();
/// assert!(!d.should_hold()); // the last one: write what is held now
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

    /// Stop delivering (the queue is empty).
    pub fn end(&mut self) {
        self.delivering = None;
    }

    /// True when this thread is delivering and has more events queued: new output for the peer
    /// can wait for the next answers to join it.
    pub fn should_hold(&self) -> bool {
        !self.queue.is_empty()
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
/// or holds it when [`Delivery::should_hold`] (a burst is being answered); wakes the writer for
/// the rest. Then, with `inline` and nothing held back now, writes what earlier calls held.
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
        } else if hold {
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
        d.queue.pop_front();
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
