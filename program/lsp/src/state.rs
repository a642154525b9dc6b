//! Everything the client knows about one server, as pure code: the lifecycle phase, the messages waiting to
//! be written, the requests waiting for answers, the documents the server has (version and content hash), the
//! diagnostics it reported (bounded per file and in total). The driver (`server.rs`) feeds it the frames read
//! from the server and writes what it queues.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use claude_ide_bridge::file_uri;

use claude_ide_bridge::{Diagnostic, FileDiagnostics, Position, Range};
use lsp_types::notification::{self as note, Notification};
use lsp_types::request::{self as req, Request};
use lsp_types::{NumberOrString, TextDocumentIdentifier};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::codec;
pub use crate::limits::LspLimits;
use crate::messages::{
    DocumentDiagnostic, Progress, PublishDiagnostics, Published, PullReport, ServerDiagnostic,
};
use crate::rpc::{self, Frame, Incoming, ResponseError, SharedText, SyncText, TEXT_MARK};
use crate::watch::WatchSet;
#[cfg(doc)]
use crate::watch::{MAX_GLOB_BYTES_BUILT, MAX_WATCH_REGISTRATIONS};

mod caps;
mod check;
mod dependents;
mod watched;

use caps::{initialize_json, initialize_params, Caps};
#[cfg(any(test, doc, feature = "fuzzing"))]
use check::MAX_ASKED;
#[cfg(doc)]
use check::MAX_CHECK_FAILURES;
use check::{Check, Held};

/// Longest URI whose diagnostics are kept (a Linux path is at most 4096 bytes, and a URI escapes
/// some of them as three).
const MAX_URI_BYTES: usize = 3 * 4096 + 16;

/// Longest registration id kept.
const MAX_REGISTRATION_ID: usize = 256;
/// Longest `resultId` of a pulled report kept for the next pull.
const MAX_RESULT_ID: usize = 1024;
/// Work in progress (`$/progress` begun, not ended) tracked at most; past it, new work is not
/// tracked (a server's strings must not grow the table).
const MAX_PROGRESS: usize = 64;
/// What a queued frame costs besides its bytes ([`Frame::held`]): its slot in the queue and its
/// own allocation's bookkeeping. Counted against [`LspLimits::max_outbox_bytes`], so that a storm
/// of small answers (60 bytes each, to a server flooding requests and reading none) is bounded by
/// the memory it takes, not by a third of it (152 MB for the 64 MiB bound in the
/// misbehaving-servers audit).
const FRAME_COST: usize = std::mem::size_of::<Frame>() + 32;

/// Work reported in progress longer than this no longer holds answers back: a server that never
/// ends a token (or reports a background index for minutes) does not make every answer late.
pub const PROGRESS_STALE: Duration = Duration::from_secs(30);

/// The most of why a server ended that is kept ([`State::exit`]).
const MAX_REASON_BYTES: usize = 1024;
/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `initialize` sent, no answer yet.
    Starting,
    /// Initialized: documents and requests flow.
    Running,
    /// Gone, with why: crashed, hung, misbehaved or stopped.
    Exited(String),
}

/// A document as the server has it.
#[derive(Debug)]
struct Doc {
    language: String,
    version: i32,
    /// The version it was opened with: a lower one is from before it was last closed.
    opened: i32,
    hash: u64,
    /// The publish counter when this version was sent: a version-less publish after it is for this version.
    synced_seq: u64,
    /// When this version was sent.
    synced_at: Instant,
    last_used: u64,
    /// Handed over ahead of its write ([`Disk::Ahead`]): its `didSave` is owed once the file on
    /// disk holds it ([`State::written`]).
    unsaved: bool,
    /// Set once it was checked again with this text ([`State::recheck`]), until its text changes.
    rechecked: Option<Rechecked>,
    /// A file it may include changed on disk since its last check, and it was not checked again
    /// then (past [`LspLimits::max_rechecks`]): it is at its next sync.
    stale: bool,
    /// Its other open documents were checked again for its present text on disk
    /// ([`State::recheck_others`]): a change of it the program's look at the disk finds later is
    /// that one ([`State::headers_changed`]). Not for a text it was opened with.
    dependents_told: bool,
    /// Where the text the server has ends ([`crate::text::end_of`]), for a server that takes
    /// incremental changes ([`Caps::incremental`]): the range a new text replaces. `None` for
    /// one with a lone CR, where servers count lines otherwise (clangd, rust-analyzer and gopls
    /// end lines at LF only: clangd refused the edit, "Line value is out of range", and dropped
    /// the document): its next text is sent without a range, as before.
    end: Option<lsp_types::Position>,
}

/// A document's checks again with its present text ([`Doc::rechecked`]).
#[derive(Debug, Clone, Copy)]
struct Rechecked {
    /// The count of outbox takes when the last was queued ([`State::takes`]): while that count
    /// has not moved, the message is still queued, and another change needs no second one.
    take: u64,
    /// The version it had when first checked again with this text: an answer for that version
    /// or a later one of the same text is what the server said of this text with its included
    /// files as they were ([`State::held_from_before_recheck`]).
    base: i32,
}

/// Where `text` ends, for a server that takes incremental changes (the range its next change
/// replaces: [`Doc::end`]); `None` otherwise, and for a text with a lone CR (a line's end by the
/// protocol, not by every server).
fn end_if(incremental: bool, text: &str) -> Option<lsp_types::Position> {
    let lone_cr = || {
        let b = text.as_bytes();
        (b.iter().enumerate()).any(|(i, &c)| c == b'\r' && b.get(i + 1) != Some(&b'\n'))
    };
    (incremental && !lone_cr()).then(|| crate::text::end_of(text))
}

/// Whether the text a sync hands over is what the file on disk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disk {
    /// It is (the program read it, or wrote it): servers that check on save are told at once.
    Written,
    /// Not yet: another process writes it next (claude, after an accepted diff). A server that
    /// checks the disk on save (rust-analyzer's `cargo check`) would check the old text: it is
    /// told once a later sync of this text finds it on disk.
    Ahead,
}

/// How long after a publish without a version diagnostics count as final ([`State::settles_at`]).
pub const SETTLE: Duration = Duration::from_millis(200);
/// How long after a text was sent a publish without a version may count as final: its server's
/// full check comes later than its first publish (typescript-language-server waits 300-800 ms
/// before it asks tsserver, whose syntactic pass answers before its semantic one).
pub const SETTLE_AFTER_SYNC: Duration = Duration::from_millis(900);

/// Diagnostics a server reported for one file.
#[derive(Debug)]
struct Stored {
    /// The document version they are for, when known.
    version: Option<i32>,
    /// When they arrived (the publish counter).
    seq: u64,
    /// When they arrived.
    at: Instant,
    items: Vec<Diagnostic>,
    /// What a server that answers pulls also publishes, kept apart from its pull's answer, which
    /// would otherwise replace it and be replaced by it: rust-analyzer answers pulls with its own
    /// analysis and publishes `cargo check`'s findings. Known as one list with `items`, less
    /// those that are in both (ruff, told of a changed configuration file, publishes what its
    /// pulls answer).
    pushed: Vec<Diagnostic>,
    /// The document version `pushed` was published for, when the server said: such a list is
    /// for that text only, and goes once a pull answers for a newer one (a publish ruff made
    /// for a text stayed after the text was edited, as nothing else replaces it).
    pushed_version: Option<i32>,
    /// The pull answer's `resultId`, sent back as `previousResultId`.
    result_id: Option<String>,
}

impl Stored {
    /// What is known of the file: the pull's (or the publishes') diagnostics, then those a
    /// server that answers pulls published.
    fn all(&self) -> Vec<Diagnostic> {
        let mut all = self.items.clone();
        all.extend(
            (self.pushed.iter())
                .filter(|d| !self.items.contains(d))
                .cloned(),
        );
        all
    }

    fn len(&self) -> usize {
        self.items.len() + self.pushed.len()
    }

    /// The [`weight`] of both lists.
    fn bytes(&self) -> usize {
        weight(&self.items) + weight(&self.pushed)
    }
}

/// What diagnostics count towards [`LspLimits::max_total_bytes`]: their strings, and 160 bytes
/// each for the rest (about what one takes in memory besides its strings).
fn weight(items: &[Diagnostic]) -> usize {
    items.iter().map(weight_of).sum()
}

/// The [`weight`] of one diagnostic.
fn weight_of(d: &Diagnostic) -> usize {
    let code = (d.code.as_ref()).map_or(0, |c| c.as_str().map_or(8, str::len));
    160 + d.message.len() + d.severity.len() + d.source.as_ref().map_or(0, String::len) + code
}

/// Which of a file's lists a server's diagnostics go to ([`Stored::pushed`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum List {
    /// A pull's answer, a check's, or the publishes of a server that does not answer pulls.
    Main,
    /// The publishes of a server that answers pulls.
    Pushed,
}

/// What became of a pull's answer ([`State::take_pull`]).
#[derive(Debug)]
pub(crate) enum Pulled {
    /// Kept as the document's diagnostics: the change to report, if any.
    Kept(Option<FileDiagnostics>),
    /// For a text of the document from before it was last closed: not kept (it would bring back
    /// what the closing forgot), but still the answer for the text asked about; `None` for an
    /// "unchanged" report, relative to an answer no longer held.
    Passed(Option<Vec<Diagnostic>>),
}

/// Something the driver does after feeding a frame to the state.
#[derive(Debug)]
pub(crate) enum Effect {
    /// A file's diagnostics changed: tell `on_change`.
    Changed(FileDiagnostics),
    /// A line for the log (the server's `window/logMessage`, or what the client ignored and why).
    Log(String),
}

pub(crate) struct State {
    pub phase: Phase,
    pub caps: Caps,
    /// The capabilities from `initialize`, before registrations.
    static_caps: Caps,
    /// Dynamic registrations: id → method.
    registered: HashMap<String, String>,
    /// The globs of `workspace/didChangeWatchedFiles` registrations, by id (at most
    /// [`MAX_WATCH_REGISTRATIONS`]).
    watching: BTreeMap<String, Arc<WatchSet>>,
    /// The bytes of globs built for `watching` over the server's life (at most
    /// [`MAX_GLOB_BYTES_BUILT`]).
    glob_bytes_built: usize,
    /// For a server that leaves the documents including a file as they were
    /// ([`Caps::stale_dependents`]), the files they may include, by extension, watched by the
    /// program's look at the disk for it ([`State::headers_changed`]): set once it is running.
    headers: Option<Arc<WatchSet>>,
    /// When the server was started (a file changed since may have been read before its change).
    started: SystemTime,
    limits: LspLimits,
    folders: Vec<lsp_types::WorkspaceFolder>,
    next_id: i64,
    init_id: i64,
    pending: HashMap<i64, Option<Result<Box<RawValue>, ResponseError>>>,
    /// Frames to write, in order, and the bytes they hold (a text shared by several, once).
    pub outbox: VecDeque<Frame>,
    outbox_bytes: usize,
    /// Set once stdin is to be closed after the outbox is written (`exit` sent).
    pub close_input: bool,
    docs: HashMap<String, Doc>,
    /// The last document version sent, for any file.
    versions: i32,
    /// How many times the writer took the outbox ([`State::take_outbox`]).
    takes: u64,
    /// Counted up each time open documents are checked again, or marked to be, because a file
    /// they may include changed ([`State::recheck_others`]): shared by a client's servers, so
    /// that a caller remembering answers knows they may be out of date ([`crate::Lsp::rechecks`]).
    pub rechecks: Arc<std::sync::atomic::AtomicU64>,
    diags: HashMap<String, Stored>,
    total: usize,
    /// The [`weight`] of every file's diagnostics held.
    bytes: usize,
    seq: u64,
    clock: u64,
    /// Texts synced before the server was initialized: sent when it is.
    early: VecDeque<(String, String, SyncText, Disk)>,
    /// The process group to kill, until the driver starts reaping it.
    pub pid: Option<u32>,
    /// The server's name ([`crate::table::server_name`]): the `source` of its diagnostics that
    /// have none, so that they are told apart from another server's in a merged list.
    pub name: Option<String>,
    pub reaping: bool,
    /// Set when the process was seen to exit by its status (the writer's exit watch), which the
    /// writer then records: its output may still be held open by a process it started.
    pub process_ended: bool,
    /// Since when the reader has been waiting in a read of the server's output (`None` while it
    /// handles what it read).
    pub reading_since: Option<Instant>,
    /// Set once the process is reaped and its diagnostics told gone ([`State::gone`]).
    pub reaped: bool,
    /// Threads telling `on_change` of changes taken from the state: the reader from its start to
    /// its end, a caller while it tells. The server's end waits for none to be left before it
    /// tells its files' diagnostics gone, so that no change told before comes after.
    pub telling: usize,
    /// Set when the client stops the server ([`State::begin_shutdown`]): its end is no crash, and
    /// its diagnostics are kept.
    stopping: bool,
    /// Set when the server was found hung by a caller queueing for it (its input backed up): its
    /// writer is stuck writing to it, so whoever holds the state kills it ([`State::take_hung`]).
    hung: bool,
    /// When the phase became `Exited`.
    pub exited_at: Option<std::time::Instant>,
    /// Set when the server answered `initialize` (the phase became `Running`), and kept after.
    pub ran: bool,
    /// What calls other than [`State::handle`] leave for the driver to do once it has let go of
    /// the state ([`State::take_effects`]): a file whose diagnostics were forgotten, a log line.
    effects: Vec<Effect>,
    /// Work the server reports in progress (`$/progress` begun and not ended): its token, and
    /// when it began (at most [`MAX_PROGRESS`]).
    progress: HashMap<String, Instant>,
    /// Checks on request: the file, generation and pass of each request waiting for its answer
    /// (at most [`MAX_ASKED`]), and per open file its check.
    asked: HashMap<i64, (String, u64, usize)>,
    checks: HashMap<String, Check>,
    generation: u64,
    /// Diagnostics held in the parts of checks not yet answered in full.
    checking: Held,
    /// Error answers to checks on request in a row ([`MAX_CHECK_FAILURES`]); once there are so
    /// many, the checks are given up for the server's life.
    check_failures: u32,
    /// When something last came from the server's output ([`State::heard`]).
    last_read: Instant,
    /// Since when a request has been unanswered with nothing read ([`State::hung_since`]).
    requests_since: Option<Instant>,
    /// A request given up on while unanswered, with nothing read since: the server still owes
    /// its answer (a cancelled request is answered all the same), so the next request's silence
    /// counts from the older one's.
    cancelled_unheard: bool,
}

impl State {
    pub fn new(limits: LspLimits, folders: Vec<lsp_types::WorkspaceFolder>) -> State {
        State {
            phase: Phase::Starting,
            caps: Caps::default(),
            static_caps: Caps::default(),
            registered: HashMap::new(),
            watching: BTreeMap::new(),
            glob_bytes_built: 0,
            headers: None,
            started: SystemTime::now(),
            limits,
            folders,
            next_id: 1,
            init_id: 0,
            pending: HashMap::new(),
            outbox: VecDeque::new(),
            outbox_bytes: 0,
            close_input: false,
            docs: HashMap::new(),
            versions: 0,
            takes: 0,
            rechecks: Arc::default(),
            diags: HashMap::new(),
            total: 0,
            bytes: 0,
            seq: 0,
            clock: 0,
            early: VecDeque::new(),
            pid: None,
            name: None,
            reaping: false,
            process_ended: false,
            reading_since: None,
            reaped: false,
            telling: 1,
            stopping: false,
            hung: false,
            exited_at: None,
            ran: false,
            effects: Vec::new(),
            progress: HashMap::new(),
            asked: HashMap::new(),
            checks: HashMap::new(),
            generation: 0,
            checking: Held::default(),
            check_failures: 0,
            last_read: Instant::now(),
            requests_since: None,
            cancelled_unheard: false,
        }
    }

    /// Something came from the server's output (a frame or not): it is not hung.
    pub fn heard(&mut self, now: Instant) {
        self.last_read = now;
        self.reading_since = None;
        self.requests_since = self.owes_answers().then_some(now);
        self.cancelled_unheard = false;
    }

    /// Whether a request sent to the server is unanswered: one of [`State::request`], or one of
    /// the checks [`State::ask_check`] asked.
    fn owes_answers(&self) -> bool {
        self.pending.values().any(Option::is_none) || !self.asked.is_empty()
    }

    /// Since when the running server has owed work with nothing read from it: a request
    /// unanswered (counted from the first request it has not answered since it last said
    /// anything, even one given up on since: it is answered all the same), or, from a server
    /// that publishes (not one answering pulls, whose work is its requests), a text sent to it
    /// after the last thing it said. `None` when it owes nothing
    /// (or is not running, or is being stopped): past [`LspLimits::hang_timeout`] it is taken as
    /// hung ([`State::hung`]).
    pub fn hung_since(&self) -> Option<Instant> {
        if !self.is_running() || self.stopping {
            return None;
        }
        let requests = self.requests_since.filter(|_| self.owes_answers());
        let texts = if self.caps.pull {
            None
        } else {
            self.docs
                .values()
                .map(|d| d.synced_at)
                .filter(|at| *at > self.last_read)
                .min()
        };
        requests.into_iter().chain(texts).min()
    }

    /// [`State::hung_since`], also counting the requests given up unanswered (pulls cancelled at
    /// their deadlines, nothing heard since): since when the server has not answered work it was
    /// given. `None` when it owes nothing and gave up nothing unanswered.
    pub fn silent_since(&self) -> Option<Instant> {
        if !self.is_running() || self.stopping {
            return None;
        }
        let given_up = self.requests_since.filter(|_| self.cancelled_unheard);
        self.hung_since().into_iter().chain(given_up).min()
    }

    /// Whether the server is hung at `now` ([`State::hung_since`] at least
    /// [`LspLimits::hang_timeout`] ago).
    pub fn hung(&self, now: Instant) -> bool {
        self.hung_since()
            .is_some_and(|since| now >= since + self.limits.hang_timeout)
    }

    /// Queues `initialize`; `pid` is the bridge's, so that servers exit when it dies; `options`
    /// its `initializationOptions` ([`crate::table::initialization_options`]).
    pub fn begin(&mut self, pid: u32, options: Option<serde_json::Value>) {
        let mut params = initialize_params(pid, &self.folders);
        params.initialization_options = options;
        self.init_id = self.next_id;
        self.next_id += 1;
        let body = rpc::request::<caps::InitializeJson>(self.init_id, &initialize_json(&params));
        self.push_out(body);
    }

    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether it was asked to stop ([`State::begin_shutdown`]).
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    fn has_exited(&self) -> bool {
        matches!(self.phase, Phase::Exited(_))
    }

    /// The server ends, for `reason` (kept to [`MAX_REASON_BYTES`]: it may quote what the server
    /// sent, and is copied to every caller told the server is down).
    pub fn exit(&mut self, reason: impl Into<String>) {
        if !matches!(self.phase, Phase::Exited(_)) {
            let reason = crate::log::cut(&reason.into(), MAX_REASON_BYTES).into_owned();
            self.phase = Phase::Exited(reason);
            self.exited_at = Some(std::time::Instant::now());
            self.early.clear();
            self.pending.clear();
            self.asked.clear();
            self.checks.clear();
            self.checking = Held::default();
        }
    }

    fn push_out(&mut self, body: Vec<u8>) {
        let frame = Frame::Bytes(codec::encode(&body));
        let held = frame.held();
        self.push_frame(frame, held);
    }

    /// Queues a notification of `N` carrying `text` where its params hold [`TEXT_MARK`] (see
    /// [`Frame::text_notification`]); the text counts against the bound when `count_text` (not
    /// again for a second message of the same sync).
    fn push_text<N: Notification>(
        &mut self,
        params: &N::Params,
        text: &SyncText,
        count_text: bool,
    ) {
        let frame = Frame::text_notification::<N>(params, text);
        let held = frame.held() + if count_text { text.len() } else { 0 };
        self.push_frame(frame, held);
    }

    /// Queues `frame`, holding `held` bytes, and what a frame costs besides ([`FRAME_COST`]).
    fn push_frame(&mut self, frame: Frame, held: usize) {
        if matches!(self.phase, Phase::Exited(_)) || self.close_input {
            return;
        }
        let held = held + FRAME_COST;
        if self.outbox_bytes + held > self.limits.max_outbox_bytes {
            self.exit(format!(
                "hung: it does not read its input ({} bytes waiting)",
                self.outbox_bytes
            ));
            // Its room too (a storm of small answers left a queue of a million slots).
            self.outbox = VecDeque::new();
            self.outbox_bytes = 0;
            self.hung = true;
            return;
        }
        self.outbox_bytes += held;
        self.outbox.push_back(frame);
    }

    /// Whether the server was found hung since the last call (its input backed up), or is hung at
    /// `now` ([`State::exit_if_hung`]): then it must be killed now. A caller looks, not only the
    /// writer: on Windows, where writes to a server block, the writer of a server that stopped
    /// reading waits in its write and never looks.
    pub fn take_hung(&mut self, now: Instant) -> bool {
        self.exit_if_hung(now) || std::mem::take(&mut self.hung)
    }

    /// Takes the server as exited, saying why, if it is hung at `now` ([`State::hung`]);
    /// whether it was.
    pub fn exit_if_hung(&mut self, now: Instant) -> bool {
        let hung = self.hung(now);
        if hung {
            self.exit(format!(
                "hung: nothing from it for {:?} while it owed answers (killed)",
                self.limits.hang_timeout
            ));
        }
        hung
    }

    /// Takes every queued frame for writing.
    pub fn take_outbox(&mut self) -> Vec<Frame> {
        self.outbox_bytes = 0;
        self.takes += 1;
        // The queue's room goes with its frames: what a burst grew is not held after it.
        Vec::from(std::mem::take(&mut self.outbox))
    }

    /// What the calls since the last time left for the driver to do (see `effects`).
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Queues a notification of `N`.
    pub fn notify<N: Notification>(&mut self, params: &N::Params) {
        self.push_out(rpc::notification::<N>(params));
    }

    /// Queues a request of `R` and returns its id; its answer is then taken with
    /// [`State::take_answer`] (and read with [`rpc::decode`]).
    pub fn request<R: Request>(&mut self, params: &R::Params) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        // A server that deadlocked while its requests were given up at their deadlines (pulls,
        // each cancelled before the next) is silent since the first of them: not since each.
        if !(self.owes_answers() || self.cancelled_unheard) {
            self.requests_since = Some(Instant::now());
        }
        self.pending.insert(id, None);
        self.push_out(rpc::request::<R>(id, params));
        id
    }

    /// The answer to request `id` once it came; `None` while it has not.
    pub fn take_answer(&mut self, id: i64) -> Option<Result<Box<RawValue>, ResponseError>> {
        if self.pending.get(&id)?.is_some() {
            return self.pending.remove(&id).flatten();
        }
        None
    }

    /// Gives up on request `id`: forgets it and tells the server.
    pub fn cancel(&mut self, id: i64) {
        if let Some(answer) = self.pending.remove(&id) {
            self.cancelled_unheard |= answer.is_none();
            self.send_cancel(id);
        }
    }

    /// Tells the server that request `id` is given up.
    fn send_cancel(&mut self, id: i64) {
        // lsp-types' ids are 32-bit: past 2^31 requests (never, in practice), a string.
        let id = i32::try_from(id).map_or_else(
            |_| NumberOrString::String(id.to_string()),
            NumberOrString::Number,
        );
        self.notify::<note::Cancel>(&lsp_types::CancelParams { id });
    }

    /// Sends `shutdown` (its id, to wait for) unless the server is not running.
    pub fn begin_shutdown(&mut self) -> Option<i64> {
        self.stopping = true;
        self.early.clear();
        match self.phase {
            Phase::Running => Some(self.request::<req::Shutdown>(&())),
            _ => None,
        }
    }

    /// Queues `exit` and the closing of the server's input after it.
    pub fn finish_shutdown(&mut self) {
        self.notify::<note::Exit>(&());
        self.close_input = true;
    }

    /// Makes the server have `text` for `path`: `didOpen` the first time, the full text in `didChange` when it
    /// differs followed by `didSave` when the server asks for it. Before the server is initialized, the
    /// text is kept (the latest per file, a bounded number of files) and sent once it is. False when
    /// the server will not have it: it is gone, or the text is too long to send (then the log says
    /// so, and the file is closed in the server: what it said about an older text is forgotten).
    pub fn sync(&mut self, path: &str, language: &str, text: &str) -> bool {
        self.sync_shared(path, language, &SharedText::new(text), Disk::Written)
    }

    /// [`State::sync`] of a text shared with other servers: the copy each holds until it is
    /// written, and its hash, are made once for all of them. `disk` says whether the file holds
    /// it yet: a text handed over [`Disk::Ahead`] of its write gets its `didSave` once the file
    /// holds it ([`State::owes_save`]).
    pub fn sync_shared(
        &mut self,
        path: &str,
        language: &str,
        shared: &SharedText<'_>,
        disk: Disk,
    ) -> bool {
        let text = shared.as_str();
        if let Some(line) = too_long(&self.limits, path, text) {
            if !self.has_exited() {
                self.early.retain(|(p, ..)| p != path);
                self.close(path);
            }
            self.effects.push(Effect::Log(line));
            return false;
        }
        if self.has_exited() {
            return false;
        }
        if self.phase == Phase::Starting {
            self.early.retain(|(p, ..)| p != path);
            // Bounded in bytes too: they are all sent at once when the server is
            // initialized, and past the outbox's limit that burst would pass for a server
            // that does not read (200 files of 10 MiB were 2 GiB, held, then the server
            // killed as hung). A quarter of the limit; the newest text always.
            let room = self.limits.max_outbox_bytes / 4;
            let mut held = text.len();
            let mut keep = 0;
            for (_, _, t, _) in self.early.iter().rev() {
                if held + t.len() > room || keep + 1 >= self.limits.max_open_files {
                    break;
                }
                held += t.len();
                keep += 1;
            }
            let drop = self.early.len() - keep;
            self.early.drain(..drop);
            self.early.push_back((
                path.to_owned(),
                language.to_owned(),
                shared.sync_text().clone(),
                disk,
            ));
            return true;
        }
        let Some(uri) = rpc::uri(path) else {
            self.effects
                .push(Effect::Log(format!("{path} not sent: no URI names it")));
            return false;
        };
        let hash = shared.hash(text_hash);
        if self.docs.get(path).is_some_and(|d| d.hash != hash) {
            self.drop_check(path);
        }
        self.clock += 1;
        let seq = self.seq;
        let clock = self.clock;
        let change = self.caps.change;
        let incremental = change && self.caps.incremental;
        // One counter for every file, across closes: a file opened again after the least recently
        // used was closed gets versions its earlier life never had, so a late publish for that
        // life cannot pass for the new text's.
        let version = self.versions.saturating_add(1);
        if let Some(doc) = self.docs.get_mut(path) {
            doc.last_used = clock;
            if doc.hash == hash {
                // A file it may include changed since its last check, and it was not checked
                // again then: it is now, before a caller waits for its answer.
                if doc.stale {
                    self.recheck(path);
                }
                // Handed over ahead of its write: its `didSave` waits for the file to hold it
                // (`State::owes_save`, `State::written`).
                return true;
            }
            doc.unsaved = disk == Disk::Ahead;
            doc.rechecked = None;
            doc.stale = false;
            doc.dependents_told = false;
            doc.version = version;
            doc.hash = hash;
            doc.synced_seq = seq;
            doc.synced_at = Instant::now();
            // The whole old text replaced, for a server that takes edits; the same as a change
            // without a range, which one of them (vtsls) gets wrong.
            let range = (doc.end.filter(|_| incremental))
                .map(|end| lsp_types::Range::new(lsp_types::Position::new(0, 0), end));
            doc.end = end_if(incremental, text);
            let language = doc.language.clone();
            self.versions = version;
            // Its escaped length counted once for the messages of this sync (and of the other
            // servers'), the text held once.
            let text = shared.sync_text();
            if change {
                let params = lsp_types::DidChangeTextDocumentParams {
                    text_document: lsp_types::VersionedTextDocumentIdentifier {
                        uri: uri.clone(),
                        version,
                    },
                    content_changes: vec![lsp_types::TextDocumentContentChangeEvent {
                        range,
                        range_length: None,
                        text: TEXT_MARK.to_owned(),
                    }],
                };
                self.push_text::<note::DidChangeTextDocument>(&params, text, true);
            } else {
                self.notify::<note::DidCloseTextDocument>(&lsp_types::DidCloseTextDocumentParams {
                    text_document: TextDocumentIdentifier { uri: uri.clone() },
                });
                self.open(&uri, &language, version, text);
            }
            // The text is what is on disk (the program read it or wrote it): servers that check on
            // save do now. One handed over ahead of its write is told later.
            if disk == Disk::Written {
                self.save(uri, text);
                // The file holds its new text: the documents that may include it are checked
                // again (a server that leaves them as they were). One handed over ahead of its
                // write makes them wait for the write (`State::written`): checked now, they
                // would read its old text on disk.
                self.recheck_others(path);
            }
        } else {
            if self.docs.len() >= self.limits.max_open_files {
                self.close_least_recent();
            }
            self.docs.insert(
                path.to_owned(),
                Doc {
                    language: language.to_owned(),
                    version,
                    opened: version,
                    hash,
                    synced_seq: seq,
                    synced_at: Instant::now(),
                    last_used: clock,
                    unsaved: disk == Disk::Ahead,
                    rechecked: None,
                    stale: false,
                    dependents_told: false,
                    end: end_if(incremental, text),
                },
            );
            self.versions = version;
            // No didSave after didOpen: every server checks an opened file already (clangd would build twice).
            self.open(&uri, language, version, shared.sync_text());
        }
        true
    }

    /// Whether the server has `shared` for `path` as handed over [`Disk::Ahead`] of its write, and
    /// asks for `didSave` (or checks again the documents that may include it): then, once the
    /// file holds it (the caller reads it, outside the lock), [`State::written`] tells the server.
    pub fn owes_save(&self, path: &str, shared: &SharedText<'_>) -> bool {
        // A server that leaves the documents including it as they were is owed the write too:
        // they are checked again once the file holds the text ([`State::recheck_others`]).
        (self.caps.save.is_some() || self.caps.stale_dependents)
            && !self.has_exited()
            && self
                .docs
                .get(path)
                .is_some_and(|d| d.unsaved && d.hash == shared.hash(text_hash))
    }

    /// The file `path` holds `shared` now: the `didSave` [`State::owes_save`] said is owed, when
    /// the server still has that text unsaved.
    pub fn written(&mut self, path: &str, shared: &SharedText<'_>) {
        if !self.owes_save(path, shared) {
            return;
        }
        let Some(uri) = rpc::uri(path) else {
            return;
        };
        if let Some(doc) = self.docs.get_mut(path) {
            doc.unsaved = false;
        }
        self.save(uri, shared.sync_text());
        // (Also when the program's look found a change of it meanwhile and had them checked
        // again for that: it may have been an earlier text, [`State::headers_changed`].)
        self.recheck_others(path);
    }

    /// `didSave` of `uri`, whose text the server now has (`text`), when the server asks for it.
    fn save(&mut self, uri: lsp_types::Uri, text: &SyncText) {
        let include_text = match self.caps.save {
            Some(include_text) => include_text,
            None => return,
        };
        let params = lsp_types::DidSaveTextDocumentParams {
            text_document: TextDocumentIdentifier { uri },
            text: include_text.then(|| TEXT_MARK.to_owned()),
        };
        if include_text {
            self.push_text::<note::DidSaveTextDocument>(&params, text, false);
        } else {
            self.notify::<note::DidSaveTextDocument>(&params);
        }
    }

    fn open(&mut self, uri: &lsp_types::Uri, language: &str, version: i32, text: &SyncText) {
        let params = lsp_types::DidOpenTextDocumentParams {
            text_document: lsp_types::TextDocumentItem {
                uri: uri.clone(),
                language_id: language.to_owned(),
                version,
                text: TEXT_MARK.to_owned(),
            },
        };
        self.push_text::<note::DidOpenTextDocument>(&params, text, true);
    }

    fn close_least_recent(&mut self) {
        let Some(path) = self
            .docs
            .iter()
            .min_by_key(|(_, d)| d.last_used)
            .map(|(p, _)| p.clone())
        else {
            return;
        };
        self.close(&path);
    }

    /// Closes `path` in the server if it has it open, and forgets the diagnostics held for it:
    /// they were for a text the server no longer has, which nobody syncs any more. Servers usually
    /// publish an empty list for a closed file themselves (pyright does), but not all do.
    fn close(&mut self, path: &str) {
        if self.docs.remove(path).is_none() {
            return;
        }
        self.drop_check(path);
        // Opened, so named by a URI.
        if let Some(uri) = rpc::uri(path) {
            self.notify::<note::DidCloseTextDocument>(&lsp_types::DidCloseTextDocumentParams {
                text_document: TextDocumentIdentifier { uri },
            });
        }
        self.forget(path);
    }

    /// The file `path` is gone from the disk (deleted, renamed): closed in the server if it has
    /// it open ([`State::close`]), and the diagnostics held for it forgotten either way (a server
    /// may publish for files it has not been given).
    pub fn file_gone(&mut self, path: &str) {
        self.close(path);
        self.forget(path);
    }

    /// Drops the diagnostics held for `path`; when there were some, `on_change` is told it has
    /// none, as a publish of an empty list would tell it.
    fn forget(&mut self, path: &str) {
        let Some(stored) = self.diags.remove(path) else {
            return;
        };
        self.total -= stored.len();
        self.bytes -= stored.bytes();
        if stored.len() > 0 {
            self.effects.push(Effect::Changed(FileDiagnostics {
                uri: file_uri(path),
                diagnostics: Vec::new(),
            }));
        }
    }

    /// The server is gone (crashed, hung or misbehaving, not stopped by the client): forgets the
    /// diagnostics of every file ([`State::forget`]) and answers what is left to do, among it a
    /// change with an empty list for each file that had some, to be told to `on_change`. Once:
    /// nothing is kept after the server's end (see [`State::store`]). A server stopped by the
    /// client keeps its diagnostics: nothing is told.
    pub fn gone(&mut self) -> Vec<Effect> {
        if self.stopping || !self.has_exited() {
            return Vec::new();
        }
        let paths: Vec<String> = self.diags.keys().cloned().collect();
        for path in paths {
            self.forget(&path);
        }
        self.take_effects()
    }

    /// Whether diagnostics for `version` of `path` are for the document as it is open now: a
    /// version belongs to one document's life (the counter is shared and never goes back), so
    /// one for a file not open, or below the version it was opened with, is for a text the server
    /// was since told to close (a publish sent before the server read the `didClose`).
    fn of_open_document(&self, path: &str, version: i32) -> bool {
        self.docs.get(path).is_some_and(|d| version >= d.opened)
    }

    /// Whether the diagnostics held for `path` are for a text newer than `version`: an answer
    /// for `version` that comes after them is not kept over them.
    fn holds_newer_than(&self, path: &str, version: i32) -> bool {
        (self.diags.get(path).and_then(|s| s.version)).is_some_and(|v| v > version)
    }

    /// The version the server has of `path`, if it has it.
    pub fn version(&self, path: &str) -> Option<i32> {
        self.docs.get(path).map(|d| d.version)
    }

    /// Whether the diagnostics held for `path` are for the text last synced.
    #[cfg(test)]
    pub fn fresh(&self, path: &str) -> bool {
        self.version(path).is_some_and(|v| self.fresh_for(path, v))
    }

    /// Whether the diagnostics held for `path` are the server's answer for the text of `version`
    /// from before a check again of it ([`State::recheck`]: a header it may include changed),
    /// still not answered for its newer version: what a question bound by the client's timeout
    /// is given after a short grace ([`crate::Checked::from_before`]), as the text's diagnostics
    /// with its included files as they were (clangd takes seconds to check a large C++ file
    /// again; "not known" until it answered left the client without a baseline).
    pub fn held_from_before_recheck(&self, path: &str, version: i32) -> bool {
        let (Some(doc), Some(stored)) = (self.docs.get(path), self.diags.get(path)) else {
            return false;
        };
        let Some(r) = doc.rechecked.filter(|_| doc.version == version) else {
            return false;
        };
        stored.version.is_some_and(|v| v >= r.base && v < version)
    }

    /// Whether the diagnostics held for `path` are for `version`, the text a caller synced: a
    /// publish with that version, or one without a version that came after that text was sent
    /// while the server still has it (a later sync makes them another text's).
    pub fn fresh_for(&self, path: &str, version: i32) -> bool {
        let (Some(doc), Some(stored)) = (self.docs.get(path), self.diags.get(path)) else {
            return false;
        };
        match stored.version {
            Some(v) => v == version,
            // A server that checks on request publishes each pass as it ends: only a check's
            // answer is known to be whole.
            None => {
                !self.checks_on_request() && doc.version == version && stored.seq > doc.synced_seq
            }
        }
    }

    /// For diagnostics published without a version: when they count as final (`None`: published
    /// with a version, or nothing held). [`SETTLE`] after the last publish, and after
    /// [`SETTLE_AFTER_SYNC`] from the text's sync, and not while the server reports work in
    /// progress ([`State::busy`]; the caller waits for its end). A server that does not say which
    /// text it checked may publish several times for one text: typescript-language-server
    /// publishes each kind of check as it completes (the syntactic one first, with the previous
    /// text's type errors still in it, or an empty list while its project still loads).
    pub fn settles_at(&self, path: &str) -> Option<Instant> {
        let stored = self.diags.get(path)?;
        let synced = self.docs.get(path).map(|d| d.synced_at);
        stored.version.is_none().then(|| {
            let quiet = stored.at + SETTLE;
            synced.map_or(quiet, |t| quiet.max(t + SETTLE_AFTER_SYNC))
        })
    }

    /// Whether the server reports work in progress (`$/progress` begun, not ended, begun less
    /// than [`PROGRESS_STALE`] ago): a publish without a version is not final meanwhile.
    pub fn busy(&self, now: Instant) -> bool {
        self.progress
            .values()
            .any(|&begun| now.duration_since(begun) < PROGRESS_STALE)
    }

    /// Whether work in progress holds back `path`'s answer ([`State::busy`]): only for
    /// [`PROGRESS_STALE`] after its text was handed over, so that a server that begins new work
    /// every second and ends none does not keep the file's answer back for good (each piece of
    /// work is stale on its own only 30 s after its begin).
    pub fn busy_for(&self, path: &str, now: Instant) -> bool {
        let sent = self.docs.get(path).map(|d| d.synced_at);
        self.busy(now) && sent.is_none_or(|t| now.saturating_duration_since(t) < PROGRESS_STALE)
    }

    /// How many pieces of work are in progress (a change wakes the callers waiting to settle).
    pub fn progress_len(&self) -> usize {
        self.progress.len()
    }

    /// The publish counter of `path`'s diagnostics (0 when none are held).
    pub fn publish_seq(&self, path: &str) -> u64 {
        self.diags.get(path).map_or(0, |s| s.seq)
    }

    /// The diagnostics held for `path` (empty when none).
    pub fn known(&self, path: &str) -> Vec<Diagnostic> {
        self.diags.get(path).map(Stored::all).unwrap_or_default()
    }

    /// What a server that answers pulls published for `path`, counting for the text of
    /// `version` (empty when none, when published for an older text, or for a server that does
    /// not answer pulls, whose publishes are what [`State::known`] holds).
    pub fn pushed(&self, path: &str, version: i32) -> Vec<Diagnostic> {
        self.diags
            .get(path)
            .filter(|s| s.pushed_version.is_none_or(|v| v >= version))
            .map(|s| s.pushed.clone())
            .unwrap_or_default()
    }

    /// Whether `path` is open in the server (handed over, not closed since), or waits to be
    /// while the server starts.
    pub fn is_open(&self, path: &str) -> bool {
        self.docs.contains_key(path) || self.early.iter().any(|(p, ..)| p == path)
    }

    /// Every file with diagnostics held.
    pub fn all_known(&self) -> Vec<FileDiagnostics> {
        self.diags
            .iter()
            .filter(|(_, s)| s.len() > 0)
            .map(|(p, s)| FileDiagnostics {
                uri: file_uri(p),
                diagnostics: s.all(),
            })
            .collect()
    }

    /// The `textDocument/diagnostic` params for `path` (`None`: no URI names it).
    pub fn pull_params(&self, path: &str) -> Option<crate::messages::PullParams> {
        Some(crate::messages::PullParams {
            text_document: TextDocumentIdentifier {
                uri: rpc::uri(path)?,
            },
            identifier: self.caps.pull_identifier.clone(),
            previous_result_id: self.diags.get(path).and_then(|s| s.result_id.clone()),
        })
    }

    /// The most diagnostics kept for a file ([`LspLimits::max_diagnostics_per_file`]): what
    /// reading a server's answer needs to keep.
    pub fn max_diagnostics_per_file(&self) -> usize {
        self.limits.max_diagnostics_per_file
    }

    /// [`LspLimits::hang_timeout`].
    pub fn hang_timeout(&self) -> Duration {
        self.limits.hang_timeout
    }

    /// Takes a pull answer for `path` at `version`. `Err` when it is not a whole report.
    pub fn take_pull(
        &mut self,
        path: &str,
        version: i32,
        report: PullReport,
    ) -> Result<Pulled, String> {
        // Not kept either once the server is gone: its diagnostics were forgotten (`gone`); nor
        // over a newer text's, from an answer that came after it (a server answering its pulls
        // from several threads): it is passed on to the caller who asked about its text.
        let current = self.of_open_document(path, version)
            && !self.has_exited()
            && !self.holds_newer_than(path, version);
        self.effects.extend(
            report
                .dropped
                .line(DocumentDiagnostic::METHOD)
                .map(Effect::Log),
        );
        match report.kind.as_deref() {
            Some("full") if !current => Ok(Pulled::Passed(Some(self.converted(report.items)))),
            Some("full") => Ok(Pulled::Kept(self.store(
                path,
                Some(version),
                report.items,
                report.result_id,
                List::Main,
            ))),
            Some("unchanged") if !current => Ok(Pulled::Passed(None)),
            // Unchanged from nothing: no report was held, so none was named as the previous one
            // (`pull_params`). Taken as the file's answer, it passed for a file without
            // diagnostics.
            Some("unchanged") if (self.diags.get(path)).is_none_or(|s| s.result_id.is_none()) => {
                Err("an \"unchanged\" report for a file it has given no report for".to_owned())
            }
            Some("unchanged") => {
                self.seq += 1;
                if let Some(stored) = self.diags.get_mut(path) {
                    stored.version = Some(version);
                    stored.seq = self.seq;
                }
                let changed = self
                    .drop_older_pushed(path, version)
                    .then(|| FileDiagnostics {
                        uri: file_uri(path),
                        diagnostics: self.known(path),
                    });
                Ok(Pulled::Kept(changed))
            }
            None => Err("a partial diagnostic report".to_owned()),
            Some(kind) => Err(format!(
                "a diagnostic report of kind {:?}",
                kind.chars().take(40).collect::<String>()
            )),
        }
    }

    /// A server's diagnostics as the client keeps them: at most so many a file (the most severe),
    /// messages cut, the server's name as the source of those that give none.
    fn converted(&self, items: Vec<ServerDiagnostic>) -> Vec<Diagnostic> {
        most_severe(
            items,
            self.limits.max_diagnostics_per_file,
            ServerDiagnostic::rank,
        )
        .into_iter()
        .map(|mut d| {
            if d.source.is_none() {
                d.source.clone_from(&self.name);
            }
            convert(d, self.limits.max_message_chars)
        })
        .collect()
    }

    /// Keeps `items` as the diagnostics of `path`, within the bounds; the change, if any, to report.
    /// Those for a version of a document since closed are passed over: they would bring back what
    /// its closing forgot; so are all once the server is gone (read after its end was seen): they
    /// would bring back what [`State::gone`] forgot.
    fn store(
        &mut self,
        path: &str,
        version: Option<i32>,
        items: Vec<ServerDiagnostic>,
        result_id: Option<String>,
        list: List,
    ) -> Option<FileDiagnostics> {
        if self.has_exited() || version.is_some_and(|v| !self.of_open_document(path, v)) {
            return None;
        }
        // A server that checks on request: a publish does not replace a check's answer for the
        // text it has (it may hold one pass for this text and another for an older one).
        if version.is_none() && self.checks_on_request() {
            let held = self.diags.get(path).and_then(|s| s.version);
            if held.is_some() && held == self.version(path) {
                return None;
            }
        }
        let items = self.converted(items);
        self.store_in(path, version, items, result_id, list)
    }

    /// [`State::store`] of diagnostics already converted (at most so many are kept), into
    /// `list`. The publishes of a server that answers pulls
    /// ([`List::Pushed`]) leave the version, counter and `resultId` of its pull's answer as
    /// they are: whether that answer is fresh is the pull's to say.
    fn store_in(
        &mut self,
        path: &str,
        version: Option<i32>,
        items: Vec<Diagnostic>,
        result_id: Option<String>,
        list: List,
    ) -> Option<FileDiagnostics> {
        if self.has_exited() || version.is_some_and(|v| !self.of_open_document(path, v)) {
            return None;
        }
        self.seq += 1;
        let items = most_severe(
            items,
            self.limits.max_diagnostics_per_file,
            Diagnostic::severity_rank,
        );
        let old = (self.diags.get(path)).map_or(&[][..], |s| match list {
            List::Main => &s.items,
            List::Pushed => &s.pushed,
        });
        let (old_len, old_bytes) = (old.len(), weight(old));
        let new_bytes = weight(&items);
        let max_bytes = self.limits.max_total_bytes;
        let is_new = !self.diags.contains_key(path);
        // A file the server was not given, new here, takes no other's place: once the bounds are
        // reached it is not kept. Evicting another (announced empty) for it made a server that
        // publishes the same lists for many files evict and announce them back, round after round.
        if is_new && !self.docs.contains_key(path) {
            // Nothing known of it, and nothing to know: not kept (kept, such lists filled the
            // files' bound for a server that publishes for a whole workspace).
            if items.is_empty() {
                return None;
            }
            // Room is made from files the server was not given that hold no diagnostics (their
            // going announces nothing), and from nothing else.
            while self.diags.len() >= self.limits.max_files {
                let empty = (self.diags.iter())
                    .find(|(p, d)| d.len() == 0 && !self.docs.contains_key(*p))
                    .map(|(p, _)| p.clone());
                match empty {
                    Some(empty) => self.forget(&empty),
                    None => break,
                }
            }
            if self.diags.len() >= self.limits.max_files
                || self.total + items.len() > self.limits.max_total_diagnostics
                || self.bytes + new_bytes > max_bytes
            {
                return None;
            }
        }
        // Room for a new file, and for the new total: files the server has not open go first.
        let over = |s: &Self| {
            s.total - old_len + items.len() > s.limits.max_total_diagnostics
                || s.bytes - old_bytes + new_bytes > max_bytes
        };
        while (is_new && self.diags.len() >= self.limits.max_files) || over(self) {
            let victim = self
                .diags
                .keys()
                .find(|p| p.as_str() != path && !self.docs.contains_key(*p))
                .cloned();
            if let Some(victim) = victim {
                self.forget(&victim);
                continue;
            }
            // Then, for the total, the open file used longest ago: closed in the server, so a
            // question about it opens it again and gets a fresh publish. Cutting this file's list
            // instead (to nothing, once open files filled the total: 200 open files of 200 fill
            // it twice) answered the text with a list the server never sent for it.
            let open = self
                .docs
                .iter()
                .filter(|(p, _)| {
                    p.as_str() != path && self.diags.get(*p).is_some_and(|d| d.len() > 0)
                })
                .min_by_key(|(_, d)| d.last_used)
                .map(|(p, _)| p.clone());
            match open {
                Some(open) if over(self) => self.close(&open),
                _ => break,
            }
        }
        if is_new && self.diags.len() >= self.limits.max_files && !self.docs.contains_key(path) {
            return None;
        }
        let room = self
            .limits
            .max_total_diagnostics
            .saturating_sub(self.total - old_len);
        let items = most_severe(items, room, Diagnostic::severity_rank);
        let items = within_bytes(items, max_bytes.saturating_sub(self.bytes - old_bytes));
        let seq = self.seq;
        let at = Instant::now();
        let stored = self.diags.entry(path.to_owned()).or_insert(Stored {
            version: if list == List::Main { version } else { None },
            seq,
            at,
            items: Vec::new(),
            pushed: Vec::new(),
            pushed_version: None,
            result_id: None,
        });
        let slot = match list {
            List::Main => &mut stored.items,
            List::Pushed => &mut stored.pushed,
        };
        let changed = is_new && !items.is_empty() || *slot != items;
        self.total = self.total - slot.len() + items.len();
        self.bytes = self.bytes - weight(slot) + weight(&items);
        if changed {
            *slot = items;
        }
        match list {
            List::Main => {
                stored.version = version;
                stored.seq = seq;
                stored.at = at;
                // Only an optimisation of the next pull: a long one is not kept.
                stored.result_id = result_id.filter(|r| r.len() <= MAX_RESULT_ID);
            }
            List::Pushed => stored.pushed_version = version,
        }
        let dropped = match version {
            Some(v) if list == List::Main => self.drop_older_pushed(path, v),
            _ => false,
        };
        let stored = &self.diags[path];
        (changed || dropped).then(|| FileDiagnostics {
            uri: file_uri(path),
            diagnostics: stored.all(),
        })
    }

    /// Drops what a server that answers pulls published for `path` for a text older than
    /// `version` (see [`Stored::pushed_version`]), once a pull has answered for `version`.
    /// Whether there was such a list.
    fn drop_older_pushed(&mut self, path: &str, version: i32) -> bool {
        let Some(stored) = self.diags.get_mut(path) else {
            return false;
        };
        if stored.pushed_version.is_none_or(|v| v >= version) {
            return false;
        }
        let old = std::mem::take(&mut stored.pushed);
        stored.pushed_version = None;
        self.total -= old.len();
        self.bytes -= weight(&old);
        !old.is_empty()
    }

    /// Asserts the bounds on what is held (for the fuzz target and tests): per file, in total (counted
    /// exactly), files (those open may exceed it), open documents.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn check_bounds(&self) {
        let sum: usize = self.diags.values().map(Stored::len).sum();
        assert_eq!(self.total, sum, "the running total");
        assert!(sum <= self.limits.max_total_diagnostics);
        let bytes: usize = self.diags.values().map(Stored::bytes).sum();
        assert_eq!(self.bytes, bytes, "the running weight");
        assert!(bytes <= self.limits.max_total_bytes);
        assert!(self.diags.values().all(|d| {
            let most = self.limits.max_diagnostics_per_file;
            d.items.len() <= most && d.pushed.len() <= most
        }));
        assert!(self.diags.len() <= self.limits.max_files + self.docs.len());
        assert!(self.docs.len() <= self.limits.max_open_files);
        assert!(self.early.len() <= self.limits.max_open_files);
        let waiting = (self.checks.values())
            .flat_map(|c| c.parts.iter().flatten())
            .fold(Held::default(), |held, part| held + Held::of(part));
        assert_eq!(self.checking, waiting, "what checks hold waiting");
        assert!(self.checking.count <= self.limits.max_total_diagnostics);
        assert!(self.checking.bytes <= self.limits.max_total_bytes);
        assert!(self.asked.len() <= MAX_ASKED);
        assert!(self.checks.keys().all(|p| self.docs.contains_key(p)));
    }

    /// Feeds one frame read from the server. `Err` means the server is out of order and must stop.
    /// Answers the server's own request `id` with an error saying `why` (one passed over for its
    /// size: it would otherwise wait for an answer for good).
    pub fn refuse_request(&mut self, id: i64, why: &str) {
        self.push_out(rpc::error_response(&id.into(), rpc::INVALID_REQUEST, why));
    }

    pub fn handle(&mut self, body: &[u8]) -> Result<Vec<Effect>, String> {
        let mut effects = Vec::new();
        match rpc::parse(body)? {
            Incoming::Response { id, result }
                if id == self.init_id && self.phase == Phase::Starting =>
            {
                let result = result
                    .map_err(|e| format!("initialize refused: {} ({})", e.message, e.code))?;
                let mut unread = Vec::new();
                self.caps = match Caps::from_initialize(result, &mut unread) {
                    Ok(caps) => caps,
                    Err(why) => {
                        // An answer that is not an object with an object of capabilities: assume
                        // the common case (full-text changes, published diagnostics) rather than
                        // lose the server.
                        effects.push(Effect::Log(format!(
                            "{why}; assuming didChange and publishDiagnostics"
                        )));
                        Caps {
                            change: true,
                            ..Caps::default()
                        }
                    }
                };
                effects.extend(unread.into_iter().map(Effect::Log));
                // By its program's name too: a clangd too old to name itself.
                self.caps.stale_dependents |=
                    (self.name.as_deref()).is_some_and(crate::table::leaves_dependents_unchecked);
                if self.caps.stale_dependents && self.caps.change {
                    self.headers = WatchSet::headers().map(Arc::new);
                }
                self.static_caps = self.caps.clone();
                self.phase = Phase::Running;
                self.ran = true;
                self.notify::<note::Initialized>(&lsp_types::InitializedParams {});
                for (path, language, text, disk) in std::mem::take(&mut self.early) {
                    self.sync_shared(&path, &language, &SharedText::held(&text), disk);
                }
            }
            Incoming::Response { id, result } => {
                if self.take_check_part(id, &result, &mut effects) {
                    // A part of a check, taken.
                } else if let Some(slot) = self.pending.get_mut(&id) {
                    // Read later, outside the state's lock: copied out of the frame.
                    *slot = Some(result.map(RawValue::to_owned));
                }
            }
            Incoming::Request { id, method, params } => {
                let answer = rpc::answer_server_request(&id, &method, params, &self.folders);
                if let Some(message) = &answer.refused {
                    effects.push(Effect::Log(format!("answered {message}")));
                }
                if !answer.registrations.is_empty() {
                    let lines = self.register(answer.registrations);
                    effects.extend(lines.into_iter().map(Effect::Log));
                }
                self.push_out(answer.body);
            }
            Incoming::Invalid { id, why } => {
                self.push_out(rpc::error_response(&id, rpc::INVALID_REQUEST, &why));
                effects.push(Effect::Log(format!("answered {why}")));
            }
            Incoming::Stray(what) => effects.push(Effect::Log(format!("ignored {what}"))),
            Incoming::Notification { method, params } => match method.as_str() {
                PublishDiagnostics::METHOD => {
                    // Read keeping only what is kept: a publish of thousands is not built whole.
                    let read = Published::read(params, self.limits.max_diagnostics_per_file)
                        .map_err(|e| format!("unreadable {}: {e}", PublishDiagnostics::METHOD));
                    match read {
                        // A key no file can have (Linux paths end at 4096 bytes) is not kept:
                        // entries are counted, and each key must stay small.
                        Ok(p) if p.uri.len() > MAX_URI_BYTES => effects.push(Effect::Log(format!(
                            "ignored diagnostics for a URI of {} bytes",
                            p.uri.len()
                        ))),
                        Ok(p) => match crate::sys::published_path(&p.uri) {
                            Some(path) => {
                                effects.extend(
                                    (p.dropped.line(PublishDiagnostics::METHOD))
                                        .map(|line| Effect::Log(format!("{path}: {line}"))),
                                );
                                let list = match self.caps.pull {
                                    true => List::Pushed,
                                    false => List::Main,
                                };
                                effects.extend(
                                    self.store(&path, p.version, p.diagnostics, None, list)
                                        .map(Effect::Changed),
                                )
                            }
                            None => effects
                                .push(Effect::Log(format!("ignored diagnostics for {}", p.uri))),
                        },
                        Err(e) => effects.push(Effect::Log(format!("ignored {e}"))),
                    }
                }
                Progress::METHOD => {
                    if let Ok(p) = rpc::params::<Progress>(params) {
                        self.progress_report(p);
                    }
                }
                note::LogMessage::METHOD => {
                    if let Ok(m) = rpc::params::<note::LogMessage>(params) {
                        effects.push(Effect::Log(m.message));
                    }
                }
                note::ShowMessage::METHOD => {
                    if let Ok(m) = rpc::params::<note::ShowMessage>(params) {
                        effects.push(Effect::Log(m.message));
                    }
                }
                _ => {}
            },
        }
        // Those of the syncs it made (the early texts) and of the files it forgot to make room.
        effects.append(&mut self.effects);
        Ok(effects)
    }

    /// Work begun or ended (`$/progress`); reports in between change nothing.
    fn progress_report(&mut self, p: crate::messages::ProgressParams) {
        let token = match p.token {
            NumberOrString::Number(n) => format!("n{n}"),
            NumberOrString::String(s) if s.len() <= MAX_REGISTRATION_ID => format!("s{s}"),
            NumberOrString::String(_) => return,
        };
        match p.value.kind.as_deref() {
            Some("begin") => {
                if self.progress.len() >= MAX_PROGRESS && !self.progress.contains_key(&token) {
                    // Full: work begun too long ago no longer counts (`busy`), so it makes room;
                    // tokens a server never ended would otherwise keep new work from counting.
                    let now = Instant::now();
                    self.progress
                        .retain(|_, begun| now.duration_since(*begun) < PROGRESS_STALE);
                    if self.progress.len() >= MAX_PROGRESS {
                        return;
                    }
                }
                // A token begun again keeps its first begin: a server that repeats `begin` for
                // the same work (and never ends it) is not busy for longer than PROGRESS_STALE.
                self.progress.entry(token).or_insert_with(Instant::now);
            }
            Some("end") => {
                self.progress.remove(&token);
            }
            _ => {}
        }
    }
}

/// The log line for a text too long to send to a server, `None` when it may be sent. The
/// messages of a sync hold its text once, about its length against the outbox's bound (a text past
/// the whole bound would pass for a server that does not read); past half of it the text is not
/// sent, leaving room for what comes with it.
pub(crate) fn too_long(limits: &LspLimits, path: &str, text: &str) -> Option<String> {
    (text.len() > limits.max_outbox_bytes / 2).then(|| {
        format!(
            "{path} not sent to the server: {} bytes, past half of the {} bytes that may wait for it (max_outbox_bytes)",
            text.len(),
            limits.max_outbox_bytes
        )
    })
}

fn text_hash(text: &str) -> u64 {
    // SipHash with fixed keys: the same text always hashes the same; the length makes a collision between a
    // file's versions even less likely.
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish() ^ (text.len() as u64).rotate_left(32)
}

fn truncate_chars(s: &mut String, max: usize) {
    if let Some((cut, _)) = s.char_indices().nth(max) {
        s.truncate(cut);
        s.push('…');
    }
}

/// At most `max` of `items`: when there are more, the most severe (`rank` 0 first), so that a
/// file's few errors are not lost behind hundreds of warnings; in the order they came.
fn most_severe<T>(items: Vec<T>, max: usize, rank: impl Fn(&T) -> u8) -> Vec<T> {
    if items.len() <= max {
        return items;
    }
    let mut taken = 0;
    keep_most_severe(items, rank, |_| {
        taken += 1;
        taken <= max
    })
}

/// The most severe of `items` whose [`weight`] fits in `max` bytes, in the order they came (as
/// [`most_severe`], by bytes).
fn within_bytes(items: Vec<Diagnostic>, max: usize) -> Vec<Diagnostic> {
    if weight(&items) <= max {
        return items;
    }
    let mut left = max;
    keep_most_severe(items, Diagnostic::severity_rank, |d| {
        let w = weight_of(d);
        let fits = w <= left;
        if fits {
            left -= w;
        }
        fits
    })
}

/// `items` that `take` takes, offered the most severe first (`rank` 0 first, then in order), kept
/// in the order they came.
fn keep_most_severe<T>(
    mut items: Vec<T>,
    rank: impl Fn(&T) -> u8,
    mut take: impl FnMut(&T) -> bool,
) -> Vec<T> {
    let mut order: Vec<(u8, usize)> = items.iter().map(rank).zip(0..).collect();
    order.sort_unstable();
    let mut keep = vec![false; items.len()];
    for (_, i) in order {
        keep[i] = take(&items[i]);
    }
    let mut keep = keep.into_iter();
    items.retain(|_| keep.next().unwrap_or(false));
    items
}

/// An LSP diagnostic in the engine's shape: severity by name (`Error` when the server gives none, as editors
/// do), range as sent (0-based, UTF-16), `source` and `code` kept, the message cut at `max_chars`.
pub(crate) fn convert(d: ServerDiagnostic, max_chars: usize) -> Diagnostic {
    let severity = [
        Diagnostic::ERROR,
        Diagnostic::WARNING,
        Diagnostic::INFORMATION,
        Diagnostic::HINT,
    ][usize::from(d.rank())];
    let mut message = d.message;
    truncate_chars(&mut message, max_chars);
    let mut source = d.source;
    if let Some(s) = &mut source {
        truncate_chars(s, 100);
    }
    let code = d.code.map(|c| match c {
        NumberOrString::Number(n) => Value::from(n),
        NumberOrString::String(mut s) => {
            truncate_chars(&mut s, 100);
            Value::from(s)
        }
    });
    let pos = |p: lsp_types::Position| Position::new(p.line, p.character);
    Diagnostic {
        message,
        severity: severity.to_owned(),
        range: Range::new(pos(d.range.start), pos(d.range.end)),
        source,
        code,
    }
}

#[cfg(test)]
mod tests;
