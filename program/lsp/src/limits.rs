//! [`LspLimits`]: what a language server may cost the bridge, with its defaults.

use std::time::Duration;

/// Bounds on what a server may cost the bridge.
///
/// ```
/// use claude_ide_bridge_lsp::LspLimits;
/// let limits = LspLimits { max_diagnostics_per_file: 50, ..LspLimits::default() };
/// assert_eq!(limits.max_restarts, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LspLimits {
    /// The largest message accepted from a server. A larger one, up to 32 times this, is passed
    /// over as it comes (the request it answers gets an error saying so; a notification is
    /// logged), and the server goes on; a still larger one stops that server.
    pub max_message_bytes: usize,
    /// Diagnostics kept per file: when a server reports more, the most severe (errors, then
    /// warnings, information and hints), in the server's order.
    pub max_diagnostics_per_file: usize,
    /// Characters kept of a diagnostic's message.
    pub max_message_chars: usize,
    /// Files whose diagnostics are kept, per server.
    pub max_files: usize,
    /// Diagnostics kept in all, per server.
    pub max_total_diagnostics: usize,
    /// Bytes of diagnostics kept in all, per server, each counted as its strings and a fixed
    /// part (about its size in memory): the counts above allow 20,000 messages of 2,000
    /// characters of four bytes, 160 MB, which a server that publishes such messages filled.
    /// Past it, as past the count, files the server has not open make room first, then the open
    /// file used longest ago, and a file's list keeps its most severe diagnostics that fit. The
    /// parts of a TypeScript server's checks on request waiting for each other are held within
    /// this and the count too (a check past them fails: its callers answer what is known).
    pub max_total_bytes: usize,
    /// Documents kept open in a server; the least recently used is closed beyond it, and the
    /// diagnostics held for it are forgotten (`on_change` is told it has none).
    pub max_open_files: usize,
    /// Open documents of a server checked again at once when a file they may include changes,
    /// for a server that leaves them as they were (clangd: see
    /// [`table::leaves_dependents_unchecked`](crate::table::leaves_dependents_unchecked)): those
    /// used last. Each costs the server a check of its own (clangd reads its headers anew); the
    /// others are checked again when they are next asked about or handed over.
    pub max_rechecks: usize,
    /// The bytes queued for a server and not yet taken by its writer: a message that would bring
    /// the count past this has the server taken as hung (it does not read its input) and stopped.
    /// Counted: each message as framed (header and JSON), except a file's text, shared by the
    /// messages of one sync (`didOpen`, or `didChange` and a `didSave` with the text), which
    /// counts once, at its length in UTF-8 bytes. The bytes written are more: each message that
    /// carries the text carries it escaped as JSON (a control character, one byte, takes six:
    /// `\u0001`), up to about 12 times its count when two do. What it bounds is memory: the queue
    /// holds about this much (a text once, escaped only as it is written, 64 KiB of it at a
    /// time), besides the messages the writer took and is writing (at most as much again). A text
    /// longer than half of this is not sent: the log says so (a server already running closes the
    /// file's older text and forgets its diagnostics), and the call answers at once,
    /// without starting or waiting for a server. Texts synced before a server is initialized are
    /// held apart, within a quarter of this (the newest always kept).
    pub max_outbox_bytes: usize,
    /// Bytes of a server's stderr and log messages written to the log over the run, its restarts
    /// included (the line saying why a process ended is always written). A quarter of the
    /// program's 32 MiB per run at the default, so that a few noisy servers cannot silence the
    /// others and the bridge's own notes.
    pub max_log_bytes: u64,
    /// How long a server may take to answer `initialize` before it is stopped as hung.
    pub initialize_timeout: Duration,
    /// How many times a server that crashed is started again in a row (then it stays down for
    /// [`LspLimits::given_up_for`]).
    pub max_restarts: u32,
    /// The wait before the first restart, doubled for each later one.
    pub restart_backoff: Duration,
    /// How long a server given up on after [`LspLimits::max_restarts`] restarts stays down: the
    /// next need after it starts a fresh series of restarts (its crash may have been a file's, or
    /// a broken install since mended).
    pub given_up_for: Duration,
    /// How long a server that could not be started (its program missing, say during an
    /// upgrade) is not tried again: the next need after it tries again.
    pub start_retry: Duration,
    /// How long a language with no server found on `PATH` is taken to have none: the next need
    /// after it looks on `PATH` again (a server installed while the bridge runs is used).
    pub resolve_again: Duration,
    /// How long a server may leave work outstanding (a request unanswered, or a text it was
    /// given without its diagnostics) while nothing at all comes from its output: past it, the
    /// server is taken as hung (stopped by a signal, deadlocked), killed with the processes it
    /// started, and started again as after a crash (with its backoff and restarts). Five
    /// minutes: a server busy with a large project's first pass may be silent for a minute or
    /// more, and killing it then would never let it finish.
    pub hang_timeout: Duration,
    /// How long a server of a language's set may go without answering (still starting, across
    /// its restarts; or owing work with nothing said) before the set's answers leave its part out
    /// and name it in [`Checked::down`](crate::Checked::down) (a hung pyright would otherwise hide ruff's findings until it is killed as
    /// hung and restarted, minutes). A minute: a server slower than the others (a first pass, a
    /// start on a loaded machine) is waited for, so that its part is not missing from an answer
    /// that stands for the file's diagnostics (a baseline without it makes its findings new).
    pub late_after: Duration,
}

impl Default for LspLimits {
    fn default() -> LspLimits {
        LspLimits {
            max_message_bytes: 8 << 20,
            max_diagnostics_per_file: 200,
            max_message_chars: 2000,
            max_files: 2000,
            max_total_diagnostics: 20_000,
            max_total_bytes: 8 << 20,
            max_open_files: 200,
            max_rechecks: 8,
            max_outbox_bytes: 64 << 20,
            max_log_bytes: 8 << 20,
            initialize_timeout: Duration::from_secs(30),
            max_restarts: 3,
            restart_backoff: Duration::from_secs(1),
            given_up_for: Duration::from_secs(600),
            start_retry: Duration::from_secs(60),
            resolve_again: Duration::from_secs(30),
            hang_timeout: Duration::from_secs(300),
            late_after: Duration::from_secs(60),
        }
    }
}
