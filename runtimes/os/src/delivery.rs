//! The bookkeeping of a runtime's event handler: the queue of events, who is running the
//! handler, and the answers held back while it works through a burst.

use std::collections::VecDeque;
use std::thread::{self, ThreadId};

use claude_ide_bridge::{ConnectionId, Event};

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
/// assert_eq!(d.take_held(), vec![ConnectionId(1)]);
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

    /// The connections with held output, to write now (cleared).
    pub fn take_held(&mut self) -> Vec<ConnectionId> {
        std::mem::take(&mut self.held)
    }

    /// Whether any output is held.
    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }
}
