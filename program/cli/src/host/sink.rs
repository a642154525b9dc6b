//! The runtime's events, to the host ([`HostSink`]): answered on the runtime's own thread when
//! the host can answer at once from memory and nothing is queued before them (a call's round trip
//! is then one turn of the thread that read it), queued for the host's loop otherwise, in a queue
//! of bounded room.

use std::cell::Cell;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};

use claude_ide_bridge::Event;

use super::{Bounded, Host, HostInput, StopOnPanic};
use crate::runtime::{EventSink, TryTake};

thread_local! {
    /// Set on the thread that handles the host's inputs, the one that empties their queue.
    static HOST_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as the host's: the one that handles the queued inputs.
pub fn on_the_hosts_thread() {
    HOST_THREAD.set(true);
}

/// The runtime's side of the host (see the module doc).
pub struct HostSink {
    host: Arc<OnceLock<Mutex<Host>>>,
    events: Sender<HostInput>,
    room: Bounded,
    /// Dropped in a panic of the runtime's thread (smol's executor, with the host task holding
    /// the sink): the host stops. The threads runtime catches its handler's panics itself.
    _stop: StopOnPanic,
}

impl HostSink {
    /// A sink to `host` (once made; until then every event is queued) through `events`, with
    /// room for `room` events queued at once.
    pub fn new(
        host: Arc<OnceLock<Mutex<Host>>>,
        events: Sender<HostInput>,
        room: usize,
        stop: StopOnPanic,
    ) -> HostSink {
        HostSink {
            host,
            events,
            room: Bounded::new(room),
            _stop: stop,
        }
    }
}

impl EventSink for HostSink {
    fn try_take(&mut self, event: Event) -> TryTake {
        // Never waits for the host: busy with an input of its own, it gets the event queued.
        // The places of the runtime's events are given back once handled, so an empty room
        // means no earlier event is waiting or being handled: the order of events is kept.
        if let Some(Ok(mut host)) = self.host.get().map(Mutex::try_lock) {
            if self.room.is_empty() && host.answers_at_once(&event) {
                host.handle_now(event);
                return TryTake::Taken(true);
            }
        }
        match self.room.try_enter() {
            Some(place) => TryTake::Taken(self.events.send(HostInput::Event(event, place)).is_ok()),
            None => TryTake::Full(event),
        }
    }

    fn take(&mut self, event: Event) -> bool {
        match self.try_take(event) {
            TryTake::Taken(more) => more,
            TryTake::Full(event) => {
                // The host's own thread gets here when its answer made it the one handing the
                // runtime's queued events over: waiting for a place only it can free would stop
                // the bridge for good (no answer, no signal heard). Queued past the bound
                // instead: one hand-over's worth at most.
                let place = if HOST_THREAD.get() {
                    self.room.enter_now()
                } else {
                    self.room.enter()
                };
                self.events.send(HostInput::Event(event, place)).is_ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn event(n: u64) -> Event {
        Event::IdeConnected {
            conn: claude_ide_bridge::ConnectionId(n),
            pid: None,
        }
    }

    /// With its queue full, the sink waits for a place on a runtime's thread (the runtime reads
    /// no more meanwhile), but never on the host's own thread, which alone frees places: there
    /// the event is queued past the bound. (A burst of calls stopped the bridge for good when
    /// the host's answer made its thread hand the runtime's events over.)
    #[test]
    fn the_hosts_thread_never_waits_for_a_place_in_its_own_queue() {
        let (tx, rx) = mpsc::channel();
        let sink = |tx: &Sender<HostInput>| {
            HostSink::new(Arc::default(), tx.clone(), 1, StopOnPanic::new(tx, "test"))
        };
        let (done_tx, done_rx) = mpsc::channel();
        let (host_tx, mut host_sink) = (tx.clone(), sink(&tx));
        std::thread::spawn(move || {
            on_the_hosts_thread();
            let _keep = host_tx;
            let taken = host_sink.take(event(1)) && host_sink.take(event(2));
            let _ = done_tx.send(taken);
        });
        assert_eq!(
            done_rx.recv_timeout(Duration::from_secs(10)),
            Ok(true),
            "the host's thread waited for a place only it can free"
        );
        assert_eq!(rx.try_iter().count(), 2);
        // Elsewhere, a full queue holds the producer back until a place is freed.
        let (tx, rx) = mpsc::channel();
        let mut other = sink(&tx);
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let taken = other.take(event(1)) && other.take(event(2));
            let _ = done_tx.send(taken);
        });
        let first = rx.recv_timeout(Duration::from_secs(10)).expect("queued");
        assert!(
            done_rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "taken past the bound"
        );
        drop(first);
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)), Ok(true));
    }
}
