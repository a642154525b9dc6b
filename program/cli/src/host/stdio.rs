//! The stdio line protocol of `serve --stdio` (docs/stdio.md): one JSON object a line each way.
//!
//! The messages are typed in [`messages`](super::messages). Editor → bridge: [`Host::on_stdio_line`]
//! reads a line as a [`FromEditor`] and hands it to the handler of its `type` below. A line the
//! bridge cannot use is answered with an `error` line, and so is a `diff_decision` it could not
//! give. Bridge → editor: the [`ToEditor`] lines `ready`, `connected`, `initialized`,
//! `disconnected`, `tab_closed` (sent where those events are handled), and here `tool_call` (a
//! call forwarded to the editor, only a tool with an [`EditorCall`] form), `cancelled`, `status`
//! and `error`.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_ide_bridge::file_uri;
use claude_ide_bridge::{AtMentioned, DiagnosticsChanged, SelectionChanged};
use claude_ide_bridge::{CallId, Diagnostic, Notification, Selection, Target, ToolResult};

use super::messages::OpenEditorsMsg;
use super::messages::{ClientStatus, Decision, DecisionMsg, DiagnosticsMsg, EditorCall};
use super::messages::{FromEditor, MentionMsg, PendingStatus, RespondMsg, SelectionMsg, ToEditor};
use super::Host;
use super::HostInput;
use crate::lines::{Full, LineWriter};
use crate::pathmap::MapError;
use crate::ui;

/// The longest line the bridge takes from the stdio editor, newline included: room for a
/// `diff_decision` or `respond` carrying the largest message the engine sends or takes, JSON
/// escaped. A longer line is skipped to its end, never held whole, and refused with an `error`.
pub const MAX_STDIO_LINE: usize = 64 * 1024 * 1024;

/// What the `ready` line said, kept for `status`.
pub(super) struct Ready {
    port: u16,
    host: String,
    lock_file: Option<String>,
}

/// The longest selected text the bridge takes (4 MiB). The `getCurrentSelection` answer carries
/// it JSON escaped twice (the selection as JSON, in a text item), at most 7 bytes a byte (a control
/// character, `\u0001` then `\\u0001`): 28 MiB, so the answer stays within the engine's default
/// `max_outbound` (64 MiB) and the notification within the half of it a notification may take.
pub const MAX_SELECTION_TEXT: usize = 4 * 1024 * 1024;

/// The longest `filePath` or `uri` the bridge takes from the editor (64 KiB: more than any
/// system's longest path, Windows' 32,767 UTF-16 units written in UTF-8 included). What it keeps
/// of one (the selection, queued at-mentions, a file's diagnostics) is sent to every `claude` that
/// connects, so a longer one is refused with an `error` line rather than kept.
pub const MAX_EDITOR_PATH: usize = 64 * 1024;

/// Refuses a `filePath` or `uri` from the editor longer than [`MAX_EDITOR_PATH`] or holding NUL,
/// which no file's name holds.
fn check_editor_path(what: &str, path: &str) -> Result<(), String> {
    if path.len() > MAX_EDITOR_PATH {
        return Err(format!(
            "{what} is {} bytes, more than the limit of {MAX_EDITOR_PATH}",
            path.len()
        ));
    }
    if path.contains('\0') {
        return Err(format!("{what} contains NUL, which no file's name holds"));
    }
    Ok(())
}

/// What [`read_line_capped`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The input ended before any byte of a new line.
    Eof,
    /// A line (with its newline, unless the input ended first) is in the buffer.
    Read,
    /// A line of this many bytes, more than the cap, was skipped; the buffer is empty.
    TooLong(usize),
}

/// Reads one line into `buf` (cleared first), holding at most `cap` bytes of it: the rest of
/// a longer line is read and dropped up to its newline, so the next call starts on the next
/// line.
pub fn read_line_capped(
    r: &mut impl io::BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut seen = 0usize;
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let (n, end) = match avail.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None if avail.is_empty() && seen == 0 => return Ok(Line::Eof),
            None => (avail.len(), avail.is_empty()),
        };
        seen = seen.saturating_add(n);
        if seen <= cap {
            buf.extend_from_slice(&avail[..n]);
        } else if !buf.is_empty() {
            *buf = Vec::new();
        }
        r.consume(n);
        if end {
            return Ok(if seen > cap {
                Line::TooLong(seen)
            } else {
                Line::Read
            });
        }
    }
}

/// When the stdio editor was last heard from, for `--editor-timeout`: a link gone silent (a
/// laptop asleep, a network gone) ends no pipe until the transport gives up, which ssh may take
/// hours to. Every byte read counts ([`Stamped`]), not only whole lines: a long line crossing a
/// slow link is not silence. Nor is the time the reader does not read (the host has its fill of
/// lines: [`Heard::not_reading`]), unless the bridge's own lines wait for the editor meanwhile
/// and it takes none of them: a link that died while the host waited for room on stdout (the
/// editor had stopped reading, and the reader had its fill of the editor's lines) moves neither
/// way, and is silent from the later of its last byte read and the last byte it took.
#[derive(Debug)]
pub struct Heard {
    start: Instant,
    /// Milliseconds from `start` to the last byte read (or to the end of a time not reading).
    last_ms: AtomicU64,
    /// Set while the reader does not read.
    not_reading: AtomicBool,
    /// While lines are being written to the editor: milliseconds from `start` to the last byte
    /// it took (or to the start of the write); [`NOT_WRITING`] otherwise.
    took_ms: AtomicU64,
}

/// [`Heard::took_ms`] when nothing is being written to the editor.
const NOT_WRITING: u64 = u64::MAX;

impl Default for Heard {
    fn default() -> Heard {
        Heard::new()
    }
}

impl Heard {
    /// Heard from now.
    pub fn new() -> Heard {
        Heard {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            not_reading: AtomicBool::new(false),
            took_ms: AtomicU64::new(NOT_WRITING),
        }
    }

    /// Milliseconds from `start` to now.
    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(NOT_WRITING - 1)
    }

    /// Something came from the editor now; returns the time it stored.
    fn now(&self) -> u64 {
        let ms = self.elapsed_ms();
        self.last_ms.store(ms, Ordering::Relaxed);
        ms
    }

    /// Lines are being written to the editor, which took some of them now (or the write
    /// starts).
    fn took(&self) {
        self.took_ms.store(self.elapsed_ms(), Ordering::Relaxed);
    }

    /// Nothing is being written to the editor any more.
    fn written(&self) {
        self.took_ms.store(NOT_WRITING, Ordering::Relaxed);
    }

    /// Runs `wait` (the reader waiting for room in the host's queue), during which the editor's
    /// silence does not count.
    pub fn not_reading<T>(&self, wait: impl FnOnce() -> T) -> T {
        self.not_reading.store(true, Ordering::Relaxed);
        let out = wait();
        self.now();
        self.not_reading.store(false, Ordering::Relaxed);
        out
    }

    /// How long nothing came (zero while the reader does not read, unless the bridge's lines
    /// wait for the editor meanwhile: then since the last byte either way).
    fn silent_for(&self) -> Duration {
        let mut last = self.last_ms.load(Ordering::Relaxed);
        if self.not_reading.load(Ordering::Relaxed) {
            let took = self.took_ms.load(Ordering::Relaxed);
            if took == NOT_WRITING {
                return Duration::ZERO;
            }
            last = last.max(took);
        }
        self.start
            .elapsed()
            .saturating_sub(Duration::from_millis(last))
    }
}

/// The editor's input, read through with [`Heard::now`] at every byte.
pub struct Stamped<'a, R> {
    inner: R,
    heard: &'a Heard,
}

impl<'a, R: io::BufRead> Stamped<'a, R> {
    /// `inner`, read through.
    pub fn new(inner: R, heard: &'a Heard) -> Stamped<'a, R> {
        Stamped { inner, heard }
    }
}

impl<R: io::BufRead> io::Read for Stamped<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.heard.now();
        }
        Ok(n)
    }
}

impl<R: io::BufRead> io::BufRead for Stamped<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let bytes = self.inner.fill_buf()?;
        if !bytes.is_empty() {
            self.heard.now();
        }
        Ok(bytes)
    }

    fn consume(&mut self, n: usize) {
        self.inner.consume(n);
    }
}

/// How late past its time the silence watch may wake before that is taken for the bridge paused
/// ([`watch_silence`]): the engine's own rule for a WebSocket's timers.
const LATE_WAKE: Duration = Duration::from_secs(1);

/// Calls `silent` once nothing came from the editor for `limit` ([`Heard`]), from a thread of its
/// own that sleeps until the time that would be (one wake-up a `limit` at most, while the editor
/// keeps the link alive).
///
/// A wake-up later than [`LATE_WAKE`] past that time is the bridge paused (a stopped process, a
/// container paused): what the editor sent meanwhile waits in the pipe, unread, and the silence is
/// forgiven, once until the editor is heard again (docs/protocol.md's "Pause", as for a
/// WebSocket). The bridge stopped itself at the wake, with the editor's lines unread.
pub fn watch_silence(
    heard: Arc<Heard>,
    limit: Duration,
    silent: impl FnOnce() + Send + 'static,
) -> io::Result<()> {
    let watch = move || {
        // The editor's last word when a late wake-up was forgiven.
        let mut forgiven: Option<u64> = None;
        loop {
            let quiet = heard.silent_for();
            let last = heard.last_ms.load(Ordering::Relaxed);
            if quiet >= limit {
                return silent();
            }
            let wake = Instant::now() + (limit - quiet);
            std::thread::sleep(limit - quiet);
            let late = Instant::now().saturating_duration_since(wake) > LATE_WAKE;
            if late && heard.silent_for() >= limit && forgiven != Some(last) {
                // The time this wake stored, not one the reader may store just after: a byte
                // heard then is the editor's, and forgives the next late wake again.
                forgiven = Some(heard.now());
            }
        }
    };
    std::thread::Builder::new()
        .name("stdio-silence".into())
        .stack_size(64 * 1024)
        .spawn(watch)?;
    Ok(())
}

/// The most bytes of lines waiting for the stdio editor to read before the host waits for
/// room: what stops an editor that writes without reading from having its answers (`error`,
/// `status` lines) queued without end. A single larger line (a `tool_call` carrying a file)
/// still goes in when the queue is below it.
pub const MAX_UNWRITTEN: usize = 1024 * 1024;

/// The stack of the thread waiting for stdout's reader to leave: one system call and a send.
const WATCH_STACK: usize = 64 * 1024;

/// Lines to the stdio editor: one JSON object a line on stdout, written by a thread of its own
/// (`stdout`), so that an editor that stops reading holds up only that thread. The host waits
/// for room when [`MAX_UNWRITTEN`] bytes are waiting (an editor writing without reading waits on
/// its writes, docs/stdio.md "Limits"), and never once the bridge is stopping
/// ([`StdioOut::stopping`], from the signal thread too): a signal is acted on, and the goodbye
/// lines queued, whether the editor reads or not.
#[derive(Clone)]
pub struct StdioOut(LineWriter, Arc<Heard>);

/// Stdout, telling [`Heard`] of every byte the editor takes, at most [`TAKEN_CHUNK`] bytes a
/// write: a line of megabytes crossing a slow link is seen moving, not as one write that
/// returns when all of it is taken.
struct Taken<'a, W> {
    inner: W,
    heard: &'a Heard,
}

/// The most bytes [`Taken`] hands stdout at once (a pipe's buffer on Linux).
const TAKEN_CHUNK: usize = 64 * 1024;

impl<W: Write> Write for Taken<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(&buf[..buf.len().min(TAKEN_CHUNK)])?;
        if n > 0 {
            self.heard.took();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The longest text of an `error` line, in bytes (cut there, with `...`).
const MAX_ERROR_TEXT: usize = 1024;

impl StdioOut {
    /// Starts the writer thread. A write that fails (the editor closed its end: `head -1`, an
    /// editor gone without closing stdin) is told to the host on `tx`: forwarded calls would
    /// wait for answers that cannot come, with the lock file still advertised.
    pub fn start(tx: Sender<HostInput>) -> io::Result<StdioOut> {
        let heard = Arc::new(Heard::new());
        let taking = Arc::clone(&heard);
        let watch_tx = tx.clone();
        let write = move |batch: &[Vec<u8>]| {
            taking.took();
            let mut out = Taken {
                inner: io::stdout().lock(),
                heard: &taking,
            };
            let written = batch
                .iter()
                .try_for_each(|l| out.write_all(l))
                .and_then(|()| out.flush());
            taking.written();
            if let Err(e) = &written {
                // Once: the writer ends at its first failure.
                let _ = tx.send(HostInput::StdoutClosed(format!(
                    "could not be written ({e})"
                )));
            }
            written
        };
        let lines = LineWriter::start("stdout", MAX_UNWRITTEN, Full::Wait, write)?;
        // The editor closing its reading end is seen when it happens, not at the next line
        // written (which a client's connection made: it found a bridge that then stopped).
        let watch = move || {
            if crate::sys::wait_until_stdout_unread() {
                let gone = "has no reader any more (the editor closed its end)";
                let _ = watch_tx.send(HostInput::StdoutClosed(gone.into()));
            }
        };
        std::thread::Builder::new()
            .name("stdout-watch".into())
            .stack_size(WATCH_STACK)
            .spawn(watch)?;
        Ok(StdioOut(lines, heard))
    }

    /// When the editor was last heard from, and took the bridge's lines ([`Heard`]).
    pub fn heard(&self) -> Arc<Heard> {
        Arc::clone(&self.1)
    }

    /// `error`: what the editor sent could not be used, or not as it asked (said here too). At
    /// most [`MAX_ERROR_TEXT`] bytes of it: a refusal may quote what the editor sent (serde
    /// quotes a bad value whole), and a line of 60 MB is not to come back as an error of 60 MB.
    pub(super) fn error(&self, message: &str) {
        let message = super::cut_to(message, MAX_ERROR_TEXT);
        ui::say(&format!("stdio: {message}"));
        self.send(&ToEditor::Error { message: &message });
    }

    /// Queues one message, first waiting for room unless the bridge is stopping.
    fn send(&self, m: &ToEditor) {
        self.0.send(m.to_line());
    }

    /// The bridge is stopping: a host waiting for room goes on, and none waits again.
    pub fn stopping(&self) {
        self.0.stopping();
    }

    /// Waits, at most `grace`, until every queued line is written (or stdout failed).
    pub fn flush(&self, grace: Duration) {
        self.0.flush(grace);
    }
}

/// A call forwarded to the stdio editor, waiting for its `respond` or `diff_decision`: the
/// tool's arguments as the bridge checked them.
pub(super) struct Forwarded {
    call: CallId,
    tool: EditorCall,
    /// An `openDiff` shown under its path with links resolved: claude's own, which it writes
    /// (what an accept checks: `Host::accept`).
    written_as: Option<String>,
}

// ---- bridge → editor ----

impl Host {
    /// Sends a line to the stdio editor (nothing without `--stdio`).
    pub(super) fn to_editor(&self, m: &ToEditor) {
        if let Some(out) = &self.stdio {
            out.send(m);
        }
    }

    /// Sends the first line, `ready` (and keeps what it said for `status`): the port, the host
    /// claude connects to (`127.0.0.1`, or what `CLAUDE_CODE_IDE_HOST_OVERRIDE` must say) and
    /// the lock file.
    pub fn ready(&mut self, port: u16, host: String, lock_file: Option<&Path>) {
        let ready = Ready {
            port,
            host,
            lock_file: lock_file.map(|p| p.to_string_lossy().into_owned()),
        };
        self.to_editor(&ToEditor::Ready {
            port,
            host: &ready.host,
            lock_file: ready.lock_file.as_deref(),
        });
        self.ready = Some(ready);
    }

    /// `status`: the answer to the editor's `status` line: the port and lock file, the workspace
    /// folders, the connected clients and the forwarded calls still waiting for the editor's
    /// answer.
    fn status(&self) {
        let mut pending: Vec<(&u64, &Forwarded)> = self.forwarded.iter().collect();
        pending.sort_by_key(|(id, _)| **id);
        self.to_editor(&ToEditor::Status {
            port: self.ready.as_ref().map(|r| r.port),
            host: self.ready.as_ref().map(|r| r.host.as_str()),
            lock_file: self.ready.as_ref().and_then(|r| r.lock_file.as_deref()),
            // The folders the editor can name (all of them without `--path-map`).
            workspace: (self.ws.folders().iter())
                .filter_map(|f| self.editor_path(f).ok())
                .collect(),
            clients: self
                .clients
                .iter()
                .map(|(conn, version)| ClientStatus {
                    conn: *conn,
                    initialized: version.is_some(),
                    protocol_version: version.as_deref(),
                })
                .collect(),
            pending: pending
                .iter()
                .map(|(id, f)| PendingStatus {
                    id: **id,
                    name: f.tool.name(),
                    file_path: (f.tool.diff())
                        .and_then(|d| self.editor_path(&d.new_file_path).ok()),
                })
                .collect(),
        });
    }

    /// `error`: the editor's line could not be used.
    pub(super) fn editor_error(&self, message: impl Into<String>) {
        let message = message.into();
        match &self.stdio {
            Some(out) => out.error(&message),
            None => ui::say(&format!("stdio: {message}")),
        }
    }

    /// A call the editor answers, its files checked first on a job as the bridge checks its
    /// own: each inside the workspace and a regular file (an editor opening a FIFO waits in
    /// `open` for a writer: Vim froze), and one it opens or formats no larger than
    /// `--max-read-bytes` (an editor loads it whole: 100 MB took Vim's memory from 8 to 150
    /// MB). Then forwarded ([`Host::forward`]), or refused with why.
    pub(super) fn check_and_forward(&mut self, call: CallId, form: EditorCall) {
        let checks = form.files_to_check();
        if checks.is_empty() {
            return self.forward(call, form, None);
        }
        let ws = self.ws.clone();
        let inputs = self.inputs.clone();
        // Each file kept, or the call refused; one of `open_files` that may not be opened is
        // left out (the editor opens those that are there, as `serve` alone does).
        let work = move || {
            (checks.iter())
                .map(|(path, use_)| match check_editor_file(&ws, path, *use_) {
                    Ok(()) => Ok(true),
                    Err(_) if *use_ == FileUse::ReadIfThere => Ok(false),
                    Err(e) => Err(e),
                })
                .collect::<Result<Vec<bool>, String>>()
        };
        let done = move |r: Result<Result<Vec<bool>, String>, super::jobs::Stalled>| {
            let checked = match r {
                Ok(checked) => checked,
                // Cancelled, or its client gone: nothing to answer.
                Err(super::jobs::Stalled::Gone) => return,
                Err(why) => Err(format!("its files could not be checked ({why})")),
            };
            let _ = inputs.send(HostInput::EditorCallChecked(call, Box::new(form), checked));
        };
        if let Err(busy) = self.jobs.run(call, work, done) {
            self.respond(call, ToolResult::error(busy.to_string()));
        }
    }

    /// [`Host::check_and_forward`]'s check, back: forwarded, or refused, unless the call was
    /// cancelled meanwhile.
    pub(super) fn on_editor_call_checked(
        &mut self,
        call: CallId,
        form: EditorCall,
        checked: Result<Vec<bool>, String>,
    ) {
        if !self.handle.is_pending(call) {
            return;
        }
        match checked {
            Ok(kept) => {
                let mut form = form;
                form.keep_files(&kept);
                self.forward(call, form, None)
            }
            Err(e) => {
                ui::say(&format!("{} not sent to the editor: {e}", form.name()));
                self.respond(call, ToolResult::error(e));
            }
        }
    }

    /// `tool_call`: the editor answers this call, its paths named as the editor names them; a
    /// path the editor has no name for (`--path-map`) is refused with a tool error instead.
    /// `written_as`: an `openDiff`'s path as claude gave it, when it is shown under another
    /// ([`Forwarded`]).
    pub(super) fn forward(&mut self, call: CallId, tool: EditorCall, written_as: Option<String>) {
        // Named as the editor names them for the line, then as the bridge does again (kept for
        // the answer): no copy of the arguments (an `openDiff`'s contents).
        let mut tool = tool;
        let name = tool.name();
        let mut bridges = Vec::new();
        for p in tool.paths_mut() {
            match self.editor_path(p) {
                Ok(named) => bridges.push(std::mem::replace(p, named)),
                Err(e) => {
                    ui::say(&format!("{name} not sent to the editor: {e}"));
                    let e = format!("{}: the editor cannot be shown this: {e}", self.ide_name);
                    return self.respond(call, ToolResult::error(e));
                }
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.to_editor(&ToEditor::ToolCall {
            id,
            conn: call.conn.0,
            name,
            arguments: &tool,
        });
        for (p, bridges) in tool.paths_mut().into_iter().zip(bridges) {
            *p = bridges;
        }
        let forwarded = Forwarded {
            call,
            tool,
            written_as,
        };
        self.forwarded.insert(id, forwarded);
    }

    /// The bridge stops: every forwarded call is `cancelled` and every client `disconnected`,
    /// both with reason `server_stopped`, before the server goes (its own events about them
    /// would come after the host has stopped listening).
    ///
    /// A forwarded `openDiff` is first answered with a tool error, not `DIFF_REJECTED`: the
    /// editor (gone, or its link dropped) decided nothing, and the real client takes an error as
    /// "the IDE could not show it" and keeps its own accept prompt in its terminal, where a
    /// `DIFF_REJECTED` would end the turn as if the user had said no (docs/e2e.md, "When the
    /// editor's link drops with a diff pending").
    pub fn say_goodbye(&mut self) {
        let mut diffs: Vec<(u64, CallId)> = (self.forwarded.iter())
            .filter(|(_, f)| f.tool.diff().is_some())
            .map(|(id, f)| (*id, f.call))
            .collect();
        diffs.sort_unstable_by_key(|(id, _)| *id);
        for (_, call) in diffs {
            let e = super::undecided_by_the_editor(&self.ide_name);
            self.respond(call, ToolResult::error(e));
        }
        self.cancel_where(|_| true, "server_stopped");
        let conns: Vec<u64> = self.clients.keys().copied().collect();
        for conn in conns {
            self.client_gone(conn, "server_stopped");
        }
    }

    /// `disconnected`: a client is gone.
    pub(super) fn client_gone(&mut self, conn: u64, reason: &str) {
        self.clients.remove(&conn);
        self.to_editor(&ToEditor::Disconnected { conn, reason });
    }

    /// `cancelled`: a forwarded call no longer wants an answer.
    pub(super) fn cancel_forwarded(&mut self, call: CallId, why: &str) {
        self.cancel_where(|f| f.call == call, why);
    }

    /// `cancelled` for every forwarded call `which` picks, in the order they were forwarded.
    fn cancel_where(&mut self, which: impl Fn(&Forwarded) -> bool, why: &str) {
        let mut ids: Vec<u64> = self
            .forwarded
            .iter()
            .filter(|(_, f)| which(f))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            self.forwarded.remove(&id);
            self.to_editor(&ToEditor::Cancelled { id, reason: why });
        }
    }
}

// ---- editor → bridge ----

impl Host {
    /// Handles one line from the editor.
    pub(super) fn on_stdio_line(&mut self, line: &str) {
        // A byte-order mark before the first line (a Windows pipe's, PowerShell's) is no JSON.
        let line = line.trim().trim_start_matches('\u{feff}').trim_start();
        if line.is_empty() {
            return;
        }
        let m = match FromEditor::parse(line) {
            Ok(m) => m,
            Err(e) => return self.editor_error(e),
        };
        let kind = m.kind();
        let r = match m {
            FromEditor::SelectionChanged(m) => self.selection_changed(m),
            FromEditor::AtMentioned(m) => self.at_mentioned(m),
            FromEditor::Diagnostics(m) => self.diagnostics(m),
            FromEditor::OpenEditors(m) => self.open_editors(m),
            FromEditor::Respond(m) => self.respond_line(m),
            FromEditor::DiffDecision(m) => self.diff_decision(m),
            FromEditor::Status => {
                self.status();
                Ok(())
            }
        };
        if let Err(e) = r {
            self.editor_error(format!("{kind}: {e}"));
        }
    }

    /// `selection_changed`: sent to every client and kept for `getCurrentSelection`.
    fn selection_changed(&mut self, m: SelectionMsg) -> Result<(), String> {
        if m.text.len() > MAX_SELECTION_TEXT {
            return Err(format!(
                "the text is {} bytes, more than the limit of {MAX_SELECTION_TEXT}",
                m.text.len()
            ));
        }
        let file_path = self.here_path(&m.file_path)?;
        let s = SelectionChanged {
            text: m.text,
            file_url: file_uri(&file_path),
            file_path,
            selection: Selection::new(m.selection.start, m.selection.end),
        };
        self.handle
            .notify(Target::All, &Notification::SelectionChanged(s.clone()));
        self.selection = Some(s);
        Ok(())
    }

    /// `at_mentioned`: sent to every client.
    fn at_mentioned(&mut self, m: MentionMsg) -> Result<(), String> {
        let file_path = self.here_path(&m.file_path)?;
        match (m.line_start, m.line_end) {
            (Some(start), Some(end)) if start > end => {
                return Err(format!("lineStart {start} is after lineEnd {end}"))
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err("give both lineStart and lineEnd, or neither (the whole file)".into())
            }
            _ => {}
        }
        self.handle.notify(
            Target::All,
            &Notification::AtMentioned(AtMentioned {
                file_path,
                line_start: m.line_start,
                line_end: m.line_end,
            }),
        );
        Ok(())
    }
}

// ---- paths (`--path-map`) ----

impl Host {
    /// The bridge's name of a `filePath` from the editor: the path itself without `--path-map`
    /// (it must be absolute: `/…`, or on Windows `C:\…` and `\\server\share\…` too), else
    /// mapped.
    fn here_path(&self, path: &str) -> Result<String, String> {
        check_editor_path("filePath", path)?;
        if self.paths.is_empty() {
            // `.`, `..` and repeated separators resolved, as a mapped path's are: claude is told
            // the file the editor means, not `/ws/../../etc/passwd`.
            return (super::ask::absolute(path)
                .then(|| super::diagnostics::editor_path(path))
                .flatten())
            .map(|p| crate::sys::native_path(&p))
            .ok_or_else(|| "filePath must be absolute".into());
        }
        self.paths
            .to_here(path)
            .map_err(|e| format!("filePath {e}"))
    }

    /// The bridge's path of a `uri` from the editor (a `file://` URI or an absolute path).
    fn here_of_uri(&self, uri: &str) -> Result<String, String> {
        check_editor_path("uri", uri)?;
        if self.paths.is_empty() {
            // The path the URI names here (on Windows one that writes its drive), normalised,
            // in the form the OS writes it: its `file_uri` is the one the servers and claude use.
            let path = match claude_ide_bridge::is_file_uri(uri) {
                true => crate::sys::path_of_file_uri(uri),
                false => Some(uri.to_owned()),
            };
            return (path.and_then(|p| super::diagnostics::editor_path(&p)))
                .map(|p| crate::sys::native_path(&p))
                .ok_or_else(|| {
                    "uri must be a file:// URI or an absolute path of this machine (an editor \
                     on Windows and a bridge on Linux or macOS need --path-map)"
                        .into()
                });
        }
        self.paths.to_here(uri).map_err(|e| format!("uri {e}"))
    }

    /// The editor's name of one of the bridge's paths (a relative one is taken from the first
    /// workspace folder, as the workspace takes it; a `file://` URI by its path). An empty path
    /// and one starting with `~` are refused: joined to the folder they would name the folder
    /// itself, or a folder named `~` where the user meant their home. So is one with `..`
    /// (after a symbolic link it leads elsewhere than the text says). Without `--path-map` the
    /// editor is given the bridge's own absolute path: never one it would take from its own
    /// current folder (Vim's `fnamemodify(p, ':p')`), which may be another folder than the
    /// workspace.
    fn editor_path(&self, path: &str) -> Result<String, MapError> {
        if claude_ide_bridge::is_file_uri(path) {
            let here = crate::sys::path_of_file_uri(path)
                .ok_or_else(|| MapError::BadUri(path.to_string()))?;
            return self.editor_path_of(&here);
        }
        if path.is_empty() || path.starts_with('~') {
            return Err(MapError::NotAbsolute(path.to_string()));
        }
        match (super::ask::absolute(path), self.ws.folders().first()) {
            (false, Some(first)) => self.editor_path_of(&format!("{first}/{path}")),
            _ => self.editor_path_of(path),
        }
    }

    /// [`Host::editor_path`] of an absolute path of the bridge's: mapped, or (without
    /// `--path-map`) as it is, unless it has `..` in it.
    fn editor_path_of(&self, path: &str) -> Result<String, MapError> {
        if !self.paths.is_empty() {
            return self.paths.to_editor(path);
        }
        match super::ask::climbs(path) {
            true => Err(MapError::DotDot(path.to_owned())),
            false => Ok(path.to_owned()),
        }
    }

    /// `open_editors`: replaces the open tabs. With `--path-map`, a tab of a file the bridge has
    /// no name for is left out, and an `error` line names it.
    fn open_editors(&mut self, m: OpenEditorsMsg) -> Result<(), String> {
        let paths = (!self.paths.is_empty()).then_some(&self.paths);
        let left_out = self.tabs.replace_from(m.tabs, paths)?;
        if let Some(first) = left_out.first() {
            let more = match left_out.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            let n = left_out.len();
            self.editor_error(format!("open_editors: {n} tab(s) left out: {first}{more}"));
        }
        Ok(())
    }
}

/// What the editor does with a file of a call it is handed ([`EditorCall::files_to_check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileUse {
    /// Opens or formats it: it must be there, a regular file within the read limit.
    Read,
    /// One of several it opens: as [`FileUse::Read`], but one that is not is left out.
    ReadIfThere,
    /// Saves it: it may be missing (a new file), else a regular file.
    Write,
}

/// Whether the editor may be handed `path` for `use_`, as the bridge would take it itself: a
/// specific refusal if not. A path of neither form (a `file://` URI still, one that named no
/// file here: `Host::on_tool` gave the others as paths) is left to the forward's own refusal.
fn check_editor_file(
    ws: &claude_ide_bridge_files::Workspace,
    path: &str,
    use_: FileUse,
) -> Result<(), String> {
    // A path of neither form: the forward's refusal says why; one of several is left out.
    let unnamed = |why: &str| match use_ {
        FileUse::ReadIfThere => Err(format!("{why}: {path}")),
        _ => Ok(()),
    };
    if claude_ide_bridge::is_file_uri(path) {
        return unnamed("a file: URI that names no file here");
    }
    if path.is_empty() || path.starts_with('~') {
        return unnamed("not an absolute path");
    }
    let checked = match use_ {
        FileUse::Read | FileUse::ReadIfThere => ws.open(path).map(drop),
        FileUse::Write => ws.writable(path).map(drop),
    };
    checked.map_err(|e| super::headless::cannot_open(path, e))
}

/// The most files the stdio editor's diagnostics are kept for; a `diagnostics` line for one more
/// file is refused with an `error` line.
pub const MAX_DIAGNOSTIC_FILES: usize = 10_000;

pub use super::messages::MAX_DIAGNOSTICS_PER_FILE;

/// The most diagnostics kept over all files; a line that would pass it is refused.
pub const MAX_DIAGNOSTICS_TOTAL: usize = 100_000;

/// The most bytes of diagnostics kept over all files, counted as JSON ([`weight`]); a line that
/// would pass it is refused. `getDiagnostics` answers with all of them at once, as JSON inside a
/// JSON string (at most twice as long): this keeps that answer below what a connection may
/// queue (64 MiB).
pub const MAX_DIAGNOSTICS_BYTES: usize = 24 * 1024 * 1024;

/// The longest line that is not UTF-8 still read as a possible `selection_changed` (its text,
/// at most 4 MiB, with U+FFFD for each invalid byte: up to three times as long); a longer one is
/// refused unread.
pub const MAX_LOSSY_LINE: usize = 16 * 1024 * 1024;

/// What a line from the editor whose bytes were not all UTF-8 is, read with U+FFFD in their
/// place.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Lossy {
    /// A `selection_changed` whose invalid bytes were in its text: taken so.
    Selection,
    /// A `selection_changed` with U+FFFD in its `filePath`: a file that does not exist.
    SelectionPath,
    /// Anything else.
    Other,
}

/// What `line`, read with U+FFFD for the bytes that were not UTF-8, is.
pub(super) fn lossy_kind(line: &str) -> Lossy {
    #[derive(serde::Deserialize)]
    struct Typed<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
        #[serde(rename = "filePath", borrow, default)]
        path: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_str::<Typed<'_>>(line) {
        Ok(t) if t.kind == "selection_changed" => {
            match t.path.is_some_and(|p| p.contains('\u{FFFD}')) {
                true => Lossy::SelectionPath,
                false => Lossy::Selection,
            }
        }
        _ => Lossy::Other,
    }
}

/// At least the length of a file's entry as JSON, without its diagnostics: its URI escaped (as a
/// path, a `file://` URI's percent escapes can triple it: counted as they are, the path is what
/// the editor sent) and 32 bytes for the keys.
fn file_weight(uri: &str) -> usize {
    32 + json_len(uri)
}

/// At least the length of a diagnostic as JSON: its strings escaped, and 192 bytes for its keys,
/// severity and range (four numbers up to 4294967295).
fn weight(d: &Diagnostic) -> usize {
    let code = d.code.as_ref().map_or(0, |c| c.to_string().len());
    192 + json_len(&d.message) + d.source.as_deref().map_or(0, json_len) + code
}

/// The length of `s` as a JSON string: quotes, and the escapes of quotes, backslashes and
/// control characters.
fn json_len(s: &str) -> usize {
    let extra: usize = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() + 2 + extra
}

/// The severities a diagnostic may have.
const SEVERITIES: [&str; 4] = [
    Diagnostic::ERROR,
    Diagnostic::WARNING,
    Diagnostic::INFORMATION,
    Diagnostic::HINT,
];

/// The stdio editor's diagnostics by file URI, with the totals the limits above are checked
/// against kept as they change (a line is checked in the time of its own diagnostics, not of
/// every file's). Read as the map it holds.
#[derive(Debug, Default)]
pub(super) struct EditorDiagnostics {
    files: BTreeMap<String, Vec<Diagnostic>>,
    /// The file each URI names inside the workspace, links on its way resolved
    /// (`diagnostics::resolved_key`): the editor and claude may spell one file through two links
    /// (Vim's folder a link, claude's working directory resolved), and the editor's report
    /// takes precedence for it under either name.
    resolved: HashMap<String, String>,
    /// Diagnostics over all files.
    count: usize,
    /// Their [`weight`]s over all files.
    bytes: usize,
}

impl std::ops::Deref for EditorDiagnostics {
    type Target = BTreeMap<String, Vec<Diagnostic>>;

    fn deref(&self) -> &Self::Target {
        &self.files
    }
}

impl EditorDiagnostics {
    /// Stores the editor's diagnostics for `uri`, within the limits above; past one nothing
    /// changes and the limit is named. An empty list removes the file's entry unless
    /// `keep_empty` (with language servers, where the entry says the editor reports the file).
    fn store(
        &mut self,
        uri: &str,
        diagnostics: &[Diagnostic],
        keep_empty: bool,
        resolved: Option<String>,
    ) -> Result<(), String> {
        if diagnostics.is_empty() && !keep_empty {
            self.forget(uri);
            return Ok(());
        }
        if let Some(d) = diagnostics
            .iter()
            .find(|d| !SEVERITIES.contains(&d.severity.as_str()))
        {
            return Err(format!(
                "severity {:?} is not one of {}",
                d.severity,
                SEVERITIES.join(", ")
            ));
        }
        // (Those past the limit were not read: how many there were is not known.)
        if diagnostics.len() > MAX_DIAGNOSTICS_PER_FILE {
            return Err(format!(
                "more than {MAX_DIAGNOSTICS_PER_FILE} diagnostics for one file, the limit"
            ));
        }
        if !self.files.contains_key(uri) && self.files.len() >= MAX_DIAGNOSTIC_FILES {
            let free = if keep_empty {
                "\"diagnostics\": null for a file"
            } else {
                "an empty list for a clean file"
            };
            return Err(format!(
                "diagnostics are kept for at most {MAX_DIAGNOSTIC_FILES} files: send {free} to \
                 free its entry"
            ));
        }
        let (old_count, old_bytes) = self.files.get(uri).map_or((0, 0), |d| totals(uri, d));
        let (count, bytes) = (self.count - old_count, self.bytes - old_bytes);
        if count + diagnostics.len() > MAX_DIAGNOSTICS_TOTAL {
            return Err(format!(
                "at most {MAX_DIAGNOSTICS_TOTAL} diagnostics are kept over all files ({count} \
                 for other files)"
            ));
        }
        let (_, these) = totals(uri, diagnostics);
        if bytes + these > MAX_DIAGNOSTICS_BYTES {
            return Err(format!(
                "at most {MAX_DIAGNOSTICS_BYTES} bytes of diagnostics are kept over all files \
                 ({these} for this file, {bytes} for the others)"
            ));
        }
        self.files.insert(uri.to_string(), diagnostics.to_vec());
        match resolved {
            Some(key) => self.resolved.insert(uri.to_string(), key),
            None => self.resolved.remove(uri),
        };
        (self.count, self.bytes) = (count + diagnostics.len(), bytes + these);
        Ok(())
    }

    /// The editor's URI of the file `uri` names, when it reports it: by its spelling
    /// (`same_uri`), or by the file it is with links resolved (`resolved`: `uri`'s, looked up
    /// only when the spelling matched none).
    pub(super) fn reported_as(
        &self,
        uri: &str,
        resolved: impl FnOnce() -> Option<String>,
    ) -> Option<&str> {
        if self.files.is_empty() {
            return None;
        }
        if let Some(u) = self
            .files
            .keys()
            .find(|u| super::diagnostics::same_uri(u, uri))
        {
            return Some(u);
        }
        let key = resolved()?;
        (self.resolved.iter())
            .find(|(_, k)| **k == key)
            .map(|(u, _)| u.as_str())
    }

    /// The files the editor reports, by [`EditorDiagnostics::resolved`] key.
    pub(super) fn resolved_keys(&self) -> std::collections::HashSet<String> {
        self.resolved.values().cloned().collect()
    }

    /// The editor no longer reports `uri`.
    fn forget(&mut self, uri: &str) {
        self.resolved.remove(uri);
        if let Some(old) = self.files.remove(uri) {
            let (n, b) = totals(uri, &old);
            self.count -= n;
            self.bytes -= b;
        }
    }
}

/// How many diagnostics a file has, and the weight of its entry with them.
fn totals(uri: &str, diagnostics: &[Diagnostic]) -> (usize, usize) {
    let bytes = file_weight(uri) + diagnostics.iter().map(weight).sum::<usize>();
    (diagnostics.len(), bytes)
}

impl Host {
    /// `diagnostics`: one file's diagnostics, kept for `getDiagnostics` and sent to every client.
    fn diagnostics(&mut self, m: DiagnosticsMsg) -> Result<(), String> {
        let Some(given) = m.diagnostics else {
            return Err(
                "missing field `diagnostics` (a list, or null to stop reporting the file)".into(),
            );
        };
        // Kept under one spelling of the file's URI, the one the bridge and the language servers
        // write, whichever the editor used.
        let path = self.here_of_uri(&m.uri)?;
        let uri = file_uri(&path);
        let Some(diagnostics) = given.0 else {
            // The editor no longer reports the file: a language server answers for it again.
            self.diagnostics.forget(&uri);
            return Ok(());
        };
        // With language servers an empty list is kept: the editor's word that the file is clean
        // takes precedence over a server's. Without them an absent file answers the same.
        let keep_empty = self.lsp.is_some();
        let resolved = super::diagnostics::resolved_key(&self.ws, &uri);
        self.diagnostics
            .store(&uri, &diagnostics, keep_empty, resolved)?;
        self.handle.notify(
            Target::All,
            &Notification::DiagnosticsChanged(DiagnosticsChanged { uri, diagnostics }),
        );
        Ok(())
    }
}

impl Host {
    /// `respond`: the answer to a `tool_call`.
    fn respond_line(&mut self, m: RespondMsg) -> Result<(), String> {
        let result = match (m.result, m.text, m.error) {
            (Some(r), None, None) => r,
            (None, Some(t), None) => ToolResult::text(t),
            (None, None, Some(e)) => ToolResult::error(e),
            _ => return Err("give exactly one of \"result\", \"text\", \"error\"".into()),
        };
        let f = self
            .forwarded
            .get(&m.id)
            .ok_or_else(|| format!("no pending call with id {}", m.id))?;
        // A change is decided with `diff_decision`, which checks the path again and tells the
        // language servers; `respond` can only say that the editor could not show it.
        if f.tool.diff().is_some() && !result.is_error {
            return Err(format!(
                "id {} is an openDiff: decide it with diff_decision (respond gives it only an error)",
                m.id
            ));
        }
        let f = self.forwarded.remove(&m.id).expect("present");
        self.handle
            .respond(f.call, result)
            .map_err(|e| format!("id {}: {e}", m.id))
    }

    /// `diff_decision`: the answer to a forwarded `openDiff`.
    fn diff_decision(&mut self, m: DecisionMsg) -> Result<(), String> {
        let diff = match self.forwarded.get(&m.id) {
            None => return Err(format!("no pending call with id {}", m.id)),
            Some(f) => match f.tool.diff() {
                None => return Err(format!("id {} is not an openDiff", m.id)),
                Some(d) => d.clone(),
            },
        };
        let f = self.forwarded.remove(&m.id).expect("present");
        match m.decision {
            Decision::Accept => {
                let contents = m.contents.unwrap_or_else(|| diff.new_file_contents.clone());
                // (Shown under the path it led to when checked.)
                let real = diff.new_file_path.clone();
                self.accept(f.call, &diff, contents, Some(m.id), f.written_as, real);
                Ok(())
            }
            // (Withdrawn meanwhile, its id already taken off here: no `cancelled` line comes.)
            Decision::Reject => self
                .reject(f.call, &diff)
                .map_err(|e| format!("id {}: it came too late: {e}", m.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads every line of `input` with a cap of `cap` bytes.
    fn lines(input: &[u8], cap: usize) -> Vec<(Line, Vec<u8>)> {
        // A small buffer, so that lines span several fills.
        let mut r = io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let line = read_line_capped(&mut r, &mut buf, cap).unwrap();
            if line == Line::Eof {
                return out;
            }
            assert!(buf.len() <= cap, "held {} bytes past the cap", buf.len());
            out.push((line, buf.clone()));
        }
    }

    #[test]
    fn a_line_past_the_cap_is_skipped_to_its_end_and_the_next_one_is_read() {
        let got = lines(b"short\n0123456789abcdef\nnext\nlast", 8);
        assert_eq!(
            got,
            vec![
                (Line::Read, b"short\n".to_vec()),
                (Line::TooLong(17), Vec::new()),
                (Line::Read, b"next\n".to_vec()),
                (Line::Read, b"last".to_vec()),
            ]
        );
        // At the cap exactly (newline included) the line is kept; an unfinished long one at
        // the end of the input is refused too.
        assert_eq!(
            lines(b"1234567\n123456789", 8),
            vec![
                (Line::Read, b"1234567\n".to_vec()),
                (Line::TooLong(9), Vec::new())
            ]
        );
        assert_eq!(lines(b"", 8), vec![]);
        assert_eq!(lines(b"\n\n", 8), vec![(Line::Read, b"\n".to_vec()); 2]);
    }

    fn diag(message: &str) -> Diagnostic {
        serde_json::from_value(serde_json::json!({"message": message, "severity": "Error",
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}))
        .unwrap()
    }

    #[test]
    fn an_empty_list_removes_the_file_unless_language_servers_need_the_editors_word() {
        let mut map = EditorDiagnostics::default();
        map.store("file:///a.rs", &[diag("x")], false, None)
            .unwrap();
        map.store("file:///a.rs", &[], false, None).unwrap();
        assert!(
            map.is_empty(),
            "without language servers a clean file is not kept"
        );
        map.store("file:///a.rs", &[], true, None).unwrap();
        assert_eq!(
            map.get("file:///a.rs"),
            Some(&Vec::new()),
            "with them it is"
        );
    }

    /// A file's URI counts towards the bytes kept (it is in `getDiagnostics`' answer, and held):
    /// files with long URIs are refused at the byte budget, not only at the count of files.
    #[test]
    fn the_uris_count_towards_the_bytes_kept() {
        let mut map = EditorDiagnostics::default();
        let long = "d".repeat(MAX_EDITOR_PATH - 64);
        let mut kept = 0;
        let e = loop {
            match map.store(&format!("/w/{long}{kept}"), &[], true, None) {
                Ok(()) => kept += 1,
                Err(e) => break e,
            }
            assert!(kept <= MAX_DIAGNOSTIC_FILES, "never refused");
        };
        assert!(e.contains(&MAX_DIAGNOSTICS_BYTES.to_string()), "{e}");
        assert_eq!(
            kept,
            MAX_DIAGNOSTICS_BYTES / file_weight(&format!("/w/{long}0"))
        );
        // Freeing one makes room for one.
        map.forget(&format!("/w/{long}0"));
        map.store(&format!("/w/{long}new"), &[], true, None)
            .unwrap();
    }

    #[test]
    fn diagnostics_past_a_limit_are_refused_naming_it_and_nothing_is_dropped() {
        let mut map = EditorDiagnostics::default();
        let one = [diag("x")];
        for i in 0..MAX_DIAGNOSTIC_FILES {
            map.store(&format!("file:///{i}.rs"), &one, true, None)
                .unwrap();
        }
        let e = map.store("file:///new.rs", &one, true, None).unwrap_err();
        assert!(e.contains(&MAX_DIAGNOSTIC_FILES.to_string()), "{e}");
        assert!(!map.contains_key("file:///new.rs"));
        // A file already kept may still be replaced, and a freed entry makes room.
        map.store("file:///0.rs", &[diag("y"), diag("z")], true, None)
            .unwrap();
        map.store("file:///1.rs", &[], false, None).unwrap();
        map.store("file:///new.rs", &one, true, None).unwrap();
        assert_eq!(map.len(), MAX_DIAGNOSTIC_FILES);

        let many = vec![diag("x"); MAX_DIAGNOSTICS_PER_FILE + 1];
        let e = map.store("file:///0.rs", &many, true, None).unwrap_err();
        assert!(e.contains(&MAX_DIAGNOSTICS_PER_FILE.to_string()), "{e}");
        assert_eq!(map["file:///0.rs"].len(), 2, "the previous list is kept");

        // Over all files: the files already kept hold about MAX_DIAGNOSTIC_FILES.
        let full = vec![diag("x"); MAX_DIAGNOSTICS_PER_FILE];
        let mut refused = None;
        // (1.rs was freed above and the map is full of files: start at 2.)
        for i in 2..MAX_DIAGNOSTICS_TOTAL / MAX_DIAGNOSTICS_PER_FILE + 3 {
            if let Err(e) = map.store(&format!("file:///{i}.rs"), &full, true, None) {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("the total limit is reached");
        assert!(e.contains(&MAX_DIAGNOSTICS_TOTAL.to_string()), "{e}");
        let total: usize = map.values().map(Vec::len).sum();
        assert!(total <= MAX_DIAGNOSTICS_TOTAL, "{total}");
        // The totals kept as lines come and go are the totals of what is kept.
        map.forget("file:///0.rs");
        map.store("file:///2.rs", &[diag("shorter")], true, None)
            .unwrap();
        assert_eq!(map.count, map.values().map(Vec::len).sum::<usize>());
        let weights = map.iter().map(|(uri, d)| totals(uri, d).1);
        assert_eq!(map.bytes, weights.sum::<usize>());
    }
}
