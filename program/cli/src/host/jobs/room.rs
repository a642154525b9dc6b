//! Room for the bytes of files read for clients: how many may be held at once, in all, between
//! the read and the moment the answer is in its connection's output queue.
//!
//! A read's bytes are held about three times over while its answer is made (the text, its JSON,
//! the frame), and the jobs run side by side: before this bound, one client asking for a 9 MiB
//! file every 20 ms without reading took the bridge to 322 MiB, eight such clients to about
//! 1.2 GiB (the abuse audit of 2026-12-06), where each connection's output queue is bounded at
//! 64 MiB. Past [`READ_ROOM`] a read waits for room; the reads that hold it make progress on
//! their own (reading, encoding, queueing: no client is waited for), so the wait is short unless
//! the file system itself stalls, and it is bounded ([`Room::take`]).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How many bytes of files may be read and not yet answered at once, for all clients together.
/// A file larger than this (up to the read limit, `--max-read-bytes`) is read when nothing else
/// holds room.
pub const READ_ROOM: u64 = 32 * 1024 * 1024;

/// The largest read that takes no room: what such reads hold together is bounded by the jobs
/// (64 of them, 4 MiB), and they do not wait in line behind large ones (another client's small
/// read waited behind eight clients' 9 MiB reads for up to 1.4 s).
pub const FREE_READ: u64 = 64 * 1024;

/// The room, shared by every job of a host.
#[derive(Debug)]
pub struct Room {
    max: u64,
    state: Mutex<State>,
    freed: Condvar,
}

/// What [`Room`] keeps under its lock.
#[derive(Debug, Default)]
struct State {
    /// The bytes held.
    held: u64,
    /// The reads waiting for room, first come first served: a large read is not passed for
    /// good by smaller ones that keep finding room (a 40 MiB read refused after its wait while
    /// thousands of small ones were served: the review of this change).
    waiting: VecDeque<u64>,
    /// The next read's place in line.
    next: u64,
}

impl State {
    /// Whether `bytes` more fit: within the bound, or alone.
    fn fits(&self, bytes: u64, max: u64) -> bool {
        self.held == 0 || self.held.saturating_add(bytes) <= max
    }
}

/// Bytes of room held, given back when dropped (once the answer is queued, or not given).
#[derive(Debug)]
pub struct Taken {
    room: Arc<Room>,
    bytes: u64,
}

impl Room {
    /// Room for `max` bytes at once.
    pub fn new(max: u64) -> Arc<Room> {
        Arc::new(Room {
            max,
            state: Mutex::default(),
            freed: Condvar::new(),
        })
    }

    /// Takes room for `bytes`, waiting at most `wait` for it, in turn with the reads that came
    /// first: there is room when what is held and `bytes` together are within the bound, or when
    /// nothing is held (a read larger than the whole room goes alone). `None` when the wait ran
    /// out (at once with no wait, when the room is short or others wait).
    pub fn take(self: &Arc<Self>, bytes: u64, wait: Duration) -> Option<Taken> {
        let until = Instant::now() + wait;
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.waiting.is_empty() && st.fits(bytes, self.max) {
            st.held += bytes;
            return Some(self.taken(bytes));
        }
        let ticket = st.next;
        st.next += 1;
        st.waiting.push_back(ticket);
        loop {
            if st.waiting.front() == Some(&ticket) && st.fits(bytes, self.max) {
                st.waiting.pop_front();
                st.held += bytes;
                // The next in line may fit in what is left.
                self.freed.notify_all();
                return Some(self.taken(bytes));
            }
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                st.waiting.retain(|&t| t != ticket);
                self.freed.notify_all();
                return None;
            };
            st = self
                .freed
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn taken(self: &Arc<Self>, bytes: u64) -> Taken {
        Taken {
            room: self.clone(),
            bytes,
        }
    }

    /// The bytes held now.
    pub fn held(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).held
    }

    /// The bound.
    pub fn max(&self) -> u64 {
        self.max
    }
}

impl Taken {
    /// Counts `bytes` held now, when more than taken (a file that grew since its size was
    /// looked at): the others wait for them too. Not waited for: they are read already.
    pub fn grow_to(&mut self, bytes: u64) {
        if bytes > self.bytes {
            let mut st = self.room.state.lock().unwrap_or_else(|p| p.into_inner());
            st.held += bytes - self.bytes;
            self.bytes = bytes;
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let mut st = self.room.state.lock().unwrap_or_else(|p| p.into_inner());
        st.held -= self.bytes;
        drop(st);
        self.room.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;

    #[test]
    fn a_read_past_the_room_waits_until_room_is_given_back() {
        let room = Room::new(10);
        let first = room.take(6, Duration::ZERO).unwrap();
        let second = room.take(4, Duration::ZERO).unwrap();
        assert_eq!(room.held(), 10);
        assert!(room.take(1, Duration::from_millis(20)).is_none(), "full");
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let room = room.clone();
            thread::spawn(move || tx.send(room.take(5, Duration::from_secs(30)).is_some()))
        };
        // Room for 4 is not enough for 5: still waiting.
        drop(second);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        drop(first);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
        waiter.join().unwrap().unwrap();
        assert_eq!(room.held(), 0, "the waiter's room went back as it ended");
    }

    /// Reads wait in the order they came: small reads that would fit do not pass a large one
    /// waiting for the room to empty, and one whose wait runs out leaves the line.
    #[test]
    fn reads_take_room_in_the_order_they_came() {
        let room = Room::new(10);
        let small = room.take(2, Duration::ZERO).unwrap();
        let (tx, rx) = mpsc::channel();
        let large = {
            let (room, tx) = (room.clone(), tx.clone());
            thread::spawn(move || {
                let got = room.take(25, Duration::from_secs(30));
                tx.send("large").unwrap();
                drop(got);
            })
        };
        while room.state.lock().unwrap().waiting.is_empty() {
            thread::yield_now();
        }
        // Room for 1 there is, but the large read came first.
        assert!(room.take(1, Duration::from_millis(50)).is_none());
        assert!(
            room.state.lock().unwrap().waiting.len() == 1,
            "the one given up left"
        );
        let after = {
            let room = room.clone();
            thread::spawn(move || {
                let got = room.take(1, Duration::from_secs(30));
                tx.send("small").unwrap();
                drop(got);
            })
        };
        while room.state.lock().unwrap().waiting.len() < 2 {
            thread::yield_now();
        }
        drop(small);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok("large"));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok("small"));
        large.join().unwrap();
        after.join().unwrap();
        assert_eq!(room.held(), 0);
    }

    /// A file that grew since its size was looked at counts for what was read.
    #[test]
    fn a_read_that_grew_counts_what_it_holds() {
        let room = Room::new(10);
        let mut taken = room.take(4, Duration::ZERO).unwrap();
        taken.grow_to(9);
        assert_eq!(room.held(), 9);
        assert!(room.take(2, Duration::ZERO).is_none());
        taken.grow_to(3);
        assert_eq!(room.held(), 9, "never less than it holds");
        drop(taken);
        assert_eq!(room.held(), 0);
    }

    #[test]
    fn a_read_larger_than_the_room_goes_alone() {
        let room = Room::new(10);
        let big = room.take(25, Duration::ZERO).expect("nothing else held");
        assert!(room.take(1, Duration::from_millis(10)).is_none());
        drop(big);
        let small = room.take(1, Duration::ZERO).unwrap();
        assert!(room.take(25, Duration::from_millis(10)).is_none());
        drop(small);
        assert_eq!(room.held(), 0);
    }
}
