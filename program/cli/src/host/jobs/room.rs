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

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How many bytes of files may be read and not yet answered at once, for all clients together.
/// A file larger than this (up to the read limit, `--max-read-bytes`) is read when nothing else
/// holds room.
pub const READ_ROOM: u64 = 32 * 1024 * 1024;

/// The room, shared by every job of a host.
#[derive(Debug)]
pub struct Room {
    max: u64,
    held: Mutex<u64>,
    freed: Condvar,
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
            held: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Takes room for `bytes`, waiting at most `wait` for it: there is room when what is held
    /// and `bytes` together are within the bound, or when nothing is held (a read larger than
    /// the whole room goes alone). `None` when the wait ran out.
    pub fn take(self: &Arc<Self>, bytes: u64, wait: Duration) -> Option<Taken> {
        let until = Instant::now() + wait;
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held > 0 && held.saturating_add(bytes) > self.max {
            let left = until.checked_duration_since(Instant::now())?;
            held = self
                .freed
                .wait_timeout(held, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *held += bytes;
        Some(Taken {
            room: self.clone(),
            bytes,
        })
    }

    /// The bytes held now.
    pub fn held(&self) -> u64 {
        *self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bound.
    pub fn max(&self) -> u64 {
        self.max
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        let mut held = self.room.held.lock().unwrap_or_else(|p| p.into_inner());
        *held -= self.bytes;
        drop(held);
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
