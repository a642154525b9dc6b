//! Where servers' stderr and log messages go: a file, a writer, or nowhere; never the bridge's own stderr.
//! Each server process may write a bounded number of bytes; past it, its output is read and dropped.

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

struct Shared(Arc<Mutex<dyn Write + Send>>);

impl Write for Shared {
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

    pub fn for_server(&self, prefix: String, max_bytes: u64) -> Log {
        Log {
            prefix: prefix.into(),
            budget: Arc::new(AtomicU64::new(max_bytes)),
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
                LspLog::Writer(w) => Some(Box::new(Shared(w.clone()))),
            };
            *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = sink;
        });
        if let Some(sink) = self.sink.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = sink.write_all(bytes).and_then(|()| sink.flush());
        }
    }

    /// Writes `[prefix] text` as one line, within the budget (a line that does not fit is cut, once).
    pub fn line(&self, text: &str) {
        let mut out = format!("[{}] ", self.prefix).into_bytes();
        out.extend_from_slice(text.trim_end().as_bytes());
        out.push(b'\n');
        let left = self.budget.load(Ordering::Relaxed);
        if left == 0 {
            return;
        }
        if (out.len() as u64) < left {
            self.budget.fetch_sub(out.len() as u64, Ordering::Relaxed);
            self.write_all(&out);
        } else {
            self.budget.store(0, Ordering::Relaxed);
            self.write_all(
                format!(
                    "[{}] (log limit reached: the rest of its output is dropped)\n",
                    self.prefix
                )
                .as_bytes(),
            );
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
