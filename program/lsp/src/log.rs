//! Where servers' stderr and log messages go: a file, a writer, or nowhere; never the bridge's own stderr.
//! Each server (its processes over the run, restarts included) may write a bounded number of bytes; past
//! it, its output is read and dropped, but for the line that says why a process ended.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The log servers write to.
///
/// ```
/// use claude_ide_bridge_lsp::LspLog;
/// use std::sync::{Arc, Mutex};
/// let to_file = LspLog::File("/tmp/claude-ide-bridge-lsp.log".into());
/// let to_memory = LspLog::Writer(Arc::new(Mutex::new(Vec::<u8>::new())));
/// let nowhere = LspLog::Discard;
/// # let _ = (to_file, to_memory, nowhere);
/// ```
#[derive(Clone, Default)]
pub enum LspLog {
    /// Dropped.
    #[default]
    Discard,
    /// Appended to this file (created when the first server starts).
    File(PathBuf),
    /// Written to this writer, one line at a time.
    Writer(Arc<Mutex<dyn Write + Send>>),
}

impl std::fmt::Debug for LspLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LspLog::Discard => f.write_str("Discard"),
            LspLog::File(path) => f.debug_tuple("File").field(path).finish(),
            LspLog::Writer(_) => f.write_str("Writer(..)"),
        }
    }
}

type Sink = Arc<Mutex<Option<Box<dyn Write + Send>>>>;

/// The open log, shared by every server; [`Log::for_server`] gives one server its prefix and budget.
#[derive(Clone)]
pub(crate) struct Log {
    target: Arc<LspLog>,
    sink: Sink,
    opened: Arc<std::sync::Once>,
    prefix: Arc<str>,
    budget: Arc<AtomicU64>,
}

struct LockedWriter(Arc<Mutex<dyn Write + Send>>);

impl Write for LockedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

impl Log {
    pub fn new(target: LspLog) -> Log {
        Log {
            target: Arc::new(target),
            sink: Arc::new(Mutex::new(None)),
            opened: Arc::new(std::sync::Once::new()),
            prefix: "lsp".into(),
            budget: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    /// The log of one server: its lines within `budget` (shared by its processes, its restarts).
    pub fn with_budget(&self, budget: Arc<AtomicU64>) -> Log {
        Log {
            budget,
            ..self.clone()
        }
    }

    /// The log of one server process: lines prefixed with `prefix`, within the server's budget.
    pub fn for_server(&self, prefix: String) -> Log {
        Log {
            prefix: prefix.into(),
            ..self.clone()
        }
    }

    fn write_all(&self, bytes: &[u8]) {
        self.opened.call_once(|| {
            let sink: Option<Box<dyn Write + Send>> = match &*self.target {
                LspLog::Discard => None,
                LspLog::File(path) => OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .ok()
                    .map(|f| Box::new(f) as Box<dyn Write + Send>),
                LspLog::Writer(w) => Some(Box::new(LockedWriter(w.clone()))),
            };
            *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = sink;
        });
        if let Some(sink) = self.sink.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = sink.write_all(bytes).and_then(|()| sink.flush());
        }
    }

    /// Writes `[prefix] text` as one line whatever is left of the budget: for the few lines that
    /// say why a server ended, once per process. At most [`MAX_NOTE_BYTES`] of `text` (a reason
    /// may quote what a server sent: several restarts' notes must not fill the run's log).
    pub fn note(&self, text: &str) {
        let text = cut(text.trim_end(), MAX_NOTE_BYTES);
        self.write_all(format!("[{}] {text}\n", self.prefix).as_bytes());
    }

    /// Writes `[prefix] text` as one line, within the budget (a line that does not fit is cut, once).
    pub fn line(&self, text: &str) {
        let mut out = format!("[{}] ", self.prefix).into_bytes();
        out.extend_from_slice(text.trim_end().as_bytes());
        out.push(b'\n');
        // Taken from the budget in one step: the server's stderr, its reader and its writer log
        // from three threads, and a check then a subtraction could let two lines through where
        // one fits, wrapping the budget round to nearly 2^64.
        let n = out.len() as u64;
        let taken = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                (left > n).then(|| left - n)
            });
        match taken {
            Ok(_) => self.write_all(&out),
            // Nothing left: a line was already cut.
            Err(0) => {}
            Err(_) if self.budget.swap(0, Ordering::Relaxed) == 0 => {}
            Err(_) => self.write_all(
                format!(
                    "[{}] (log limit reached: the rest of its output is dropped)\n",
                    self.prefix
                )
                .as_bytes(),
            ),
        }
    }

    /// Copies a stream (a server's stderr) into the log line by line until it ends; past the budget the
    /// stream is still read, so that the server never blocks on it.
    pub fn copy_stream(&self, mut stream: impl Read) {
        let mut buf = vec![0u8; 16 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let n = match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if self.budget.load(Ordering::Relaxed) == 0 {
                continue;
            }
            pending.extend_from_slice(&buf[..n]);
            while let Some(i) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=i).collect();
                self.line(&String::from_utf8_lossy(&line));
            }
            // A line without an end is written in pieces rather than held without bound.
            if pending.len() > 4096 {
                self.line(&String::from_utf8_lossy(&pending));
                pending.clear();
            }
        }
        if !pending.is_empty() {
            self.line(&String::from_utf8_lossy(&pending));
        }
    }
}

/// The most of a note's text [`Log::note`] writes.
pub const MAX_NOTE_BYTES: usize = 2048;

/// `text`, or its first `max` bytes (at a character boundary) followed by "...".
pub fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match prefix(text, max) {
        whole if whole.len() == text.len() => text.into(),
        part => format!("{part}...").into(),
    }
}

/// At most the first `max` bytes of `text`, ending at a character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note quoting 8 MB a server sent is written cut, at a character boundary.
    #[test]
    fn a_note_is_cut() {
        let memory = Arc::new(Mutex::new(Vec::<u8>::new()));
        let log = Log::new(LspLog::Writer(memory.clone())).for_server("s".into());
        log.note(&format!("initialize refused: {}", "é".repeat(4_000_000)));
        log.note("short");
        let text = String::from_utf8(memory.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{}", text.len());
        assert!(lines[0].len() <= MAX_NOTE_BYTES + 10, "{}", lines[0].len());
        assert!(lines[0].starts_with("[s] initialize refused: éé"));
        assert!(lines[0].ends_with("..."));
        assert_eq!(lines[1], "[s] short");
    }

    /// One server's log lines come from several threads at once: together they stay within its
    /// budget, and the line that says the limit was reached is written once.
    #[test]
    fn lines_from_several_threads_stay_within_the_budget() {
        for round in 0..20 {
            let memory = Arc::new(Mutex::new(Vec::<u8>::new()));
            let log = Log::new(LspLog::Writer(memory.clone()));
            let budget = 20_000 + round * 7;
            let server = log
                .with_budget(Arc::new(budget.into()))
                .for_server("s".into());
            std::thread::scope(|scope| {
                for t in 0..8 {
                    let server = server.clone();
                    scope.spawn(move || {
                        for i in 0..2_000 {
                            server.line(&format!("thread {t} line {i:05}"));
                        }
                    });
                }
            });
            let text = String::from_utf8(memory.lock().unwrap().clone()).unwrap();
            let cut = text.matches("log limit reached").count();
            assert_eq!(cut, 1, "{cut} limit lines in round {round}");
            // The limit line may come before lines whose bytes were taken earlier.
            let lines: usize = text
                .lines()
                .filter(|l| !l.contains("log limit reached"))
                .map(|l| l.len() + 1)
                .sum();
            assert!(
                lines as u64 <= budget,
                "{lines} bytes of lines past a budget of {budget}"
            );
        }
        // Many budgets spent at once, with nothing slowing the threads down between lines: each
        // ends at zero (one taken past what was left would wrap it round to nearly 2^64).
        for round in 0..300u64 {
            let server = Log::new(LspLog::Discard)
                .with_budget(Arc::new((1_000 + round).into()))
                .for_server("s".into());
            std::thread::scope(|scope| {
                for _ in 0..4 {
                    let server = server.clone();
                    scope.spawn(move || {
                        for _ in 0..200 {
                            server.line("twenty bytes a line");
                        }
                    });
                }
            });
            assert_eq!(server.budget.load(Ordering::Relaxed), 0, "round {round}");
        }
    }
}
