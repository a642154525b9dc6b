//! Lines written by a thread of their own, through a bounded queue: the stdio editor's stdout and,
//! under `--stdio`, the log on stderr. Whoever reads the other end (an editor, a terminal, a pipe
//! nobody drains) then holds up only that thread, never the host loop, its clients or the
//! signals. What happens once the queue is full is the writer's [`Full`] policy.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// What [`LineWriter::send`] does when the queue holds its most bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Wait for room (unless the bridge is stopping): no line is lost.
    Wait,
    /// Drop the line, and count it in a line once there is room again.
    Drop,
    /// Wait for room as [`Full::Wait`] until the bridge is stopping, then drop as [`Full::Drop`]:
    /// for a terminal that does not take output (Ctrl-S, a pty nobody reads), where the host
    /// may wait while it serves, but a stop must go on, and a signal that did not stop the bridge
    /// (Ctrl-C in `$EDITOR`) must not let the lines queue without bound.
    WaitUntilStop,
}

/// A queue of lines and the thread writing them (cheap to clone: one queue).
#[derive(Clone)]
pub struct LineWriter {
    shared: Arc<(Mutex<Outbox>, Condvar)>,
    most: usize,
    full: Full,
}

#[derive(Default)]
struct Outbox {
    lines: VecDeque<Vec<u8>>,
    /// Bytes queued or being written.
    bytes: usize,
    /// The writer is writing a batch taken off `lines`.
    writing: bool,
    /// Writing failed (the reader closed its end): lines are dropped from then on.
    broken: bool,
    /// The bridge is stopping: nobody waits for room any more.
    stopping: bool,
    /// Lines dropped by [`Full::Drop`] and not said yet.
    dropped: u64,
}

impl LineWriter {
    /// Starts the thread `name`, which hands each batch of queued lines to `write` until it
    /// fails. `most`: the bytes queued before [`Full`] applies (a single larger line still goes
    /// in when the queue is below it).
    pub fn start(
        name: &str,
        most: usize,
        full: Full,
        mut write: impl FnMut(&[Vec<u8>]) -> io::Result<()> + Send + 'static,
    ) -> io::Result<LineWriter> {
        let writer = LineWriter {
            shared: Arc::new((Mutex::new(Outbox::default()), Condvar::new())),
            most,
            full,
        };
        let shared = writer.shared.clone();
        thread::Builder::new()
            .name(name.into())
            .spawn(move || write_batches(&shared, &mut write))?;
        Ok(writer)
    }

    fn lock(&self) -> MutexGuard<'_, Outbox> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `line` (with its end of line), by the [`Full`] policy when the queue is full.
    pub fn send(&self, line: Vec<u8>) {
        let mut o = self.lock();
        if matches!(self.full, Full::Wait | Full::WaitUntilStop) {
            while o.bytes >= self.most && !o.broken && !o.stopping {
                o = self.shared.1.wait(o).unwrap_or_else(|p| p.into_inner());
            }
        }
        if o.broken {
            return;
        }
        let drops = match self.full {
            Full::Drop => true,
            Full::WaitUntilStop => o.stopping,
            Full::Wait => false,
        };
        if o.bytes >= self.most && drops {
            o.dropped += 1;
            return;
        }
        let dropped = std::mem::take(&mut o.dropped);
        if dropped > 0 {
            let said =
                format!("(claude-ide-bridge: {dropped} lines dropped: they were not read)\n");
            o.bytes += said.len();
            o.lines.push_back(said.into_bytes());
        }
        o.bytes += line.len();
        o.lines.push_back(line);
        self.shared.1.notify_all();
    }

    /// The bridge is stopping: a sender waiting for room goes on, and none waits again.
    pub fn stopping(&self) {
        self.lock().stopping = true;
        self.shared.1.notify_all();
    }

    /// Waits until every queued line is written, writing failed, or the bridge is stopping
    /// ([`LineWriter::stopping`]): what a question needs on the screen before its answer counts.
    pub fn written_or_stopping(&self) {
        let mut o = self.lock();
        while (!o.lines.is_empty() || o.writing) && !o.broken && !o.stopping {
            o = self.shared.1.wait(o).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits, at most `grace`, until every queued line is written (or writing failed).
    pub fn flush(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut o = self.lock();
        while (!o.lines.is_empty() || o.writing) && !o.broken {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            o = self
                .shared
                .1
                .wait_timeout(o, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The writer thread: takes what is queued, a batch at a time, until `write` fails.
fn write_batches(
    shared: &(Mutex<Outbox>, Condvar),
    write: &mut dyn FnMut(&[Vec<u8>]) -> io::Result<()>,
) {
    let (m, cv) = shared;
    let lock = || m.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let batch: Vec<Vec<u8>> = {
            let mut o = lock();
            while o.lines.is_empty() {
                o = cv.wait(o).unwrap_or_else(|p| p.into_inner());
            }
            o.writing = true;
            o.lines.drain(..).collect()
        };
        let n: usize = batch.iter().map(Vec::len).sum();
        let written = write(&batch);
        let mut o = lock();
        o.writing = false;
        o.bytes -= n;
        if written.is_err() {
            o.broken = true;
            o.lines.clear();
            o.bytes = 0;
        }
        cv.notify_all();
        if o.broken {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A writer whose batches are held until the test lets each one through.
    fn gated(
        most: usize,
        full: Full,
    ) -> (LineWriter, mpsc::SyncSender<()>, mpsc::Receiver<Vec<u8>>) {
        let (gate, wait) = mpsc::sync_channel::<()>(0);
        let (out, written) = mpsc::channel();
        let w = LineWriter::start("test-lines", most, full, move |batch| {
            let _ = wait.recv();
            batch.iter().for_each(|l| _ = out.send(l.clone()));
            Ok(())
        })
        .unwrap();
        (w, gate, written)
    }

    /// Past its most bytes (those being written count), a dropping writer drops lines and says
    /// how many with the next one that fits; nothing waits.
    #[test]
    fn a_full_dropping_writer_counts_what_it_dropped() {
        let (w, gate, written) = gated(8, Full::Drop);
        w.send(b"one\n".to_vec());
        // The writer has taken "one" and waits at the gate.
        let give_up = Instant::now() + Duration::from_secs(5);
        while !w.lock().writing {
            assert!(Instant::now() < give_up);
            thread::yield_now();
        }
        for line in ["two\n", "three\n", "four\n"] {
            w.send(line.as_bytes().to_vec());
        }
        gate.send(()).unwrap();
        gate.send(()).unwrap();
        w.flush(Duration::from_secs(5));
        w.send(b"five\n".to_vec());
        gate.send(()).unwrap();
        let got: Vec<String> = (0..4)
            .map(|_| written.recv_timeout(Duration::from_secs(5)).unwrap())
            .map(|l| String::from_utf8(l).unwrap())
            .collect();
        assert_eq!(got[..2], ["one\n", "two\n"]);
        assert!(got[2].contains("2 lines dropped"), "{got:?}");
        assert_eq!(got[3], "five\n");
    }

    /// A writer of `full` whose queue is full holds a second sender until the bridge is
    /// stopping (checked here); the writer, its gate and what it wrote are given back.
    fn held_until_stopping(
        full: Full,
    ) -> (LineWriter, mpsc::SyncSender<()>, mpsc::Receiver<Vec<u8>>) {
        let (w, gate, written) = gated(4, full);
        w.send(b"one\n".to_vec());
        let (started_tx, started) = mpsc::channel();
        let sender = {
            let w = w.clone();
            thread::spawn(move || {
                let _ = started_tx.send(());
                w.send(b"two\n".to_vec())
            })
        };
        // The sender runs; a moment later it still waits for room, "two" not queued.
        started.recv_timeout(Duration::from_secs(5)).unwrap();
        thread::sleep(Duration::from_millis(100));
        assert!(!sender.is_finished(), "did not wait for room");
        assert!(
            !w.lock().lines.iter().any(|l| l == b"two\n"),
            "queued without room"
        );
        w.stopping();
        claude_ide_bridge_testsupport::joined(sender, Duration::from_secs(5), "the sender");
        (w, gate, written)
    }

    /// A waiting writer makes its sender wait for room, until the bridge is stopping.
    #[test]
    fn a_full_waiting_writer_holds_its_sender_until_stopping() {
        let (w, gate, written) = held_until_stopping(Full::Wait);
        // Stopping, a send waits no more, and a waiting writer drops nothing: all are written.
        w.send(b"three\n".to_vec());
        drop(gate);
        w.flush(Duration::from_secs(5));
        let got: Vec<String> = (0..3)
            .map(|_| written.recv_timeout(Duration::from_secs(5)).unwrap())
            .map(|l| String::from_utf8(l).unwrap())
            .collect();
        assert_eq!(got, ["one\n", "two\n", "three\n"]);
    }

    /// Waiting until stopping, then dropping: the sender goes on at the stop, and what does not
    /// fit after it is dropped (and counted) rather than queued without bound.
    #[test]
    fn a_writer_waiting_until_the_stop_drops_after_it() {
        let (w, gate, written) = held_until_stopping(Full::WaitUntilStop);
        for _ in 0..100 {
            w.send(b"more\n".to_vec());
        }
        assert!(w.lock().bytes <= 4, "{} bytes queued", w.lock().bytes);
        drop(gate);
        w.flush(Duration::from_secs(5));
        w.send(b"last\n".to_vec());
        let got: Vec<String> = (0..3)
            .map(|_| written.recv_timeout(Duration::from_secs(5)).unwrap())
            .map(|l| String::from_utf8(l).unwrap())
            .collect();
        assert_eq!(got[0], "one\n");
        assert!(got[1].contains("101 lines dropped"), "{got:?}");
        assert_eq!(got[2], "last\n");
    }
}
