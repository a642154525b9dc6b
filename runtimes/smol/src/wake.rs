//! The wake-ups between the runtime's tasks and the host: a bell for one waiting task, and the
//! host's queue of events. Both are a lock around a flag or a queue and the wakers to call, and
//! cost no allocation per wait: `async-channel` made an `EventListener` (an allocation, and its
//! list's bookkeeping) for every wait and polled it on every wake-up of the task that waited
//! (BENCHMARKS.md, "Issue 32, item 5 (2026-11-28, second session)").

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use claude_ide_bridge::Event;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps `waker` in `slot` unless it already wakes the same task (no clone per poll).
fn keep(slot: &mut Option<Waker>, waker: &Waker) {
    if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
        *slot = Some(waker.clone());
    }
}

#[derive(Default)]
struct BellState {
    rung: bool,
    closed: bool,
    waker: Option<Waker>,
}

/// The waiting side of a bell: one task waits on it at a time.
#[derive(Default)]
pub(crate) struct Bell(Mutex<BellState>);

/// The ringing side of a bell. Dropping it closes the bell.
pub(crate) struct Ring(Arc<Bell>);

/// A wake-up that is never lost: a ring while nobody waits is kept (one is enough).
pub(crate) fn bell() -> (Ring, Arc<Bell>) {
    let bell = Arc::new(Bell::default());
    (Ring(bell.clone()), bell)
}

impl Bell {
    /// Waits for a ring (`true`, the ring used up) or for the bell to be closed (`false`; a ring
    /// kept from before the close is reported first).
    pub(crate) async fn wait(&self) -> bool {
        poll_fn(|cx| self.poll_wait(cx)).await
    }

    fn poll_wait(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = lock(&self.0);
        if std::mem::take(&mut st.rung) {
            return Poll::Ready(true);
        }
        if st.closed {
            return Poll::Ready(false);
        }
        keep(&mut st.waker, cx.waker());
        Poll::Pending
    }

    fn set(&self, f: impl FnOnce(&mut BellState)) {
        let waker = {
            let mut st = lock(&self.0);
            f(&mut st);
            st.waker.take()
        };
        // Woken with the lock released.
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Ring {
    /// Rings: wakes the waiting task, or keeps the ring for its next wait.
    pub(crate) fn ring(&self) {
        self.0.set(|st| st.rung = true);
    }

    /// Closes the bell: its wait ends with `false` (after a ring kept from before).
    pub(crate) fn close(&self) {
        self.0.set(|st| st.closed = true);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.close();
    }
}

#[derive(Default)]
struct QueueState {
    events: VecDeque<Event>,
    closed: bool,
    /// The tasks waiting in `next_event` (one, nearly always; each is woken at every event).
    waiting: Vec<Waker>,
}

/// The host's events, read by `IdeServer::next_event` from any number of tasks.
#[derive(Default)]
pub(crate) struct EventQueue(Mutex<QueueState>);

/// The sending side of an [`EventQueue`]. Dropping it closes the queue: the events in it are
/// still read, then `next_event` returns `None`.
pub(crate) struct EventSender(Arc<EventQueue>);

/// A queue of events and its sending side.
pub(crate) fn event_queue() -> (EventSender, Arc<EventQueue>) {
    let queue = Arc::new(EventQueue::default());
    (EventSender(queue.clone()), queue)
}

impl EventQueue {
    /// The next event; `None` once the queue is closed and empty.
    pub(crate) async fn next(&self) -> Option<Event> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let mut st = lock(&self.0);
        if let Some(event) = st.events.pop_front() {
            return Poll::Ready(Some(event));
        }
        if st.closed {
            return Poll::Ready(None);
        }
        // A task polling again (in a `select`, say) is kept once; a waker of a wait given up on
        // is dropped at the next event.
        if !st.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            st.waiting.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The next event if one is ready.
    pub(crate) fn try_next(&self) -> Option<Event> {
        lock(&self.0).events.pop_front()
    }

    /// Closes the queue (the host side is gone): later events are dropped.
    pub(crate) fn close(&self) {
        self.wake_all(|st| {
            st.closed = true;
            st.events.clear();
        });
    }

    /// Runs `f` under the lock, then wakes every waiting task with the lock released. Waking
    /// them all (nearly always one) means that no event waits while a task is left waiting,
    /// whichever of them gave up its wait.
    fn wake_all(&self, f: impl FnOnce(&mut QueueState)) {
        let (first, rest) = {
            let mut st = lock(&self.0);
            f(&mut st);
            let first = st.waiting.pop();
            // Rarely more than one: only then a new list (the queue's keeps its capacity).
            let rest = if st.waiting.is_empty() {
                Vec::new()
            } else {
                std::mem::take(&mut st.waiting)
            };
            (first, rest)
        };
        first.into_iter().chain(rest).for_each(Waker::wake);
    }
}

impl EventSender {
    /// Queues an event for the host (dropped when the host side is gone).
    pub(crate) fn send(&self, event: Event) {
        self.0.wake_all(|st| {
            if !st.closed {
                st.events.push_back(event);
            }
        });
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        self.0.wake_all(|st| st.closed = true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge::{ConnectionId, DisconnectReason};
    use futures_lite::future;

    fn gone(n: u64) -> Event {
        Event::Disconnected {
            conn: ConnectionId(n),
            reason: DisconnectReason::Closed(None),
        }
    }

    fn conn(e: Option<Event>) -> Option<u64> {
        match e {
            Some(Event::Disconnected { conn, .. }) => Some(conn.0),
            _ => None,
        }
    }

    #[test]
    fn a_ring_while_nobody_waits_is_kept_once() {
        let (ring, bell) = bell();
        ring.ring();
        ring.ring();
        assert!(future::block_on(bell.wait()));
        // Both rings were one: the next wait is pending until a ring or the close.
        assert!(future::block_on(future::poll_once(bell.wait())).is_none());
        ring.ring();
        drop(ring);
        assert!(
            future::block_on(bell.wait()),
            "the ring before the close first"
        );
        assert!(!future::block_on(bell.wait()));
    }

    #[test]
    fn a_waiting_task_is_woken_by_a_ring_from_another_thread() {
        let (ring, bell) = bell();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            ring.ring();
            ring
        });
        assert!(future::block_on(bell.wait()));
        let ring = t.join().unwrap();
        ring.close();
        assert!(!future::block_on(bell.wait()));
    }

    #[test]
    fn events_come_in_order_then_none_once_the_sender_is_gone() {
        let (tx, q) = event_queue();
        tx.send(gone(1));
        tx.send(gone(2));
        assert_eq!(conn(q.try_next()), Some(1));
        drop(tx);
        assert_eq!(conn(future::block_on(q.next())), Some(2));
        assert!(future::block_on(q.next()).is_none());
    }

    #[test]
    fn every_waiting_task_is_woken_and_a_given_up_wait_loses_no_event() {
        let (tx, q) = event_queue();
        // Two waits registered; the first is given up (dropped) before the event comes.
        let mut first = Box::pin(q.next());
        let mut second = Box::pin(q.next());
        assert!(future::block_on(future::poll_once(&mut first)).is_none());
        assert!(future::block_on(future::poll_once(&mut second)).is_none());
        drop(first);
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(gone(7));
            tx
        });
        assert_eq!(conn(future::block_on(second)), Some(7));
        drop(t.join().unwrap());
        assert!(future::block_on(q.next()).is_none());
    }

    #[test]
    fn a_closed_queue_drops_later_events() {
        let (tx, q) = event_queue();
        tx.send(gone(1));
        q.close();
        tx.send(gone(2));
        assert!(q.try_next().is_none());
        assert!(future::block_on(q.next()).is_none());
    }
}
