//! The host logic: what the bridge answers for every event, written once for both runtimes.
//!
//! Everything the host reacts to arrives as a [`HostInput`] on one std channel (runtime events,
//! terminal and stdio lines, signals, the child's exit) and is handled on one thread by
//! [`Host::handle`], which answers through the runtime's handle. Slow work goes to
//! [`jobs`] so that thread never waits on a file.
//!
//! - [`headless`]: the tools' answers when no editor answers them;
//! - [`ask`]: what happens to a proposed change (`openDiff`), including the terminal prompt;
//! - [`stdio`]: the JSON-lines protocol with an editor (`serve --stdio`, docs/stdio.md), its
//!   messages typed in [`messages`];
//! - [`compat`]: the compatibility methods (`readFile`, `writeFile`, `listFiles`, ...);
//! - [`diagnostics`]: `getDiagnostics` and `reformat_file` through language servers (what it
//!   remembers of the files it changed or answered for: `diagnostics/memory.rs`);
//! - [`watch`]: looks at the files language servers watch, told as
//!   `workspace/didChangeWatchedFiles`;
//! - [`jobs`]: slow work on bounded job threads;
//! - [`sink`]: the runtime's events to the host, answered at once or queued, bounded;
//! - [`tabs`]: the editor's open tabs; [`wire`]: the `--wire-log`.

mod ask;
mod compat;
mod diagnostics;
mod headless;
pub use headless::open_files_warning;
mod jobs;
mod messages;
pub mod sink;
mod stdio;
mod tabs;
mod watch;
mod wire;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::process::ExitStatus;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge::SelectionChanged;
use claude_ide_bridge::{
    CallId, CancelReason, ClientPaths, DisconnectReason, Event, Rejection, ToolCall, ToolResult,
};

use crate::pathmap::PathMap;
use crate::ui;
use claude_ide_bridge_files::Workspace;
use claude_ide_bridge_runtime::Handle;

use ask::{Checking, DiffCheck, Shown};
pub use diagnostics::LanguageServers;
use jobs::Jobs;
use messages::{EditorCall, ToEditor};
use stdio::Forwarded;
pub use stdio::{read_line_capped, Line, StdioOut, MAX_LOSSY_LINE, MAX_STDIO_LINE};
pub use stdio::{watch_silence, Stamped};
use tabs::Tabs;
pub use wire::WireLog;

/// Everything the host loop reacts to.
#[derive(Debug)]
pub enum HostInput {
    /// An event from the runtime; the runtime hands over the next ones only while few are queued.
    Event(Event, Queued),
    /// A line typed at the `ask` prompt (`None`: the terminal closed), and when it was read.
    TerminalLine(Option<String>, Instant),
    /// The `ask` prompt's terminal is no longer the bridge's (Unix: it was sent to the
    /// background, Ctrl-Z then `bg`): no line was read.
    TerminalAway,
    /// A line from the stdio editor; the reader reads the next ones only while few are queued.
    StdioLine(String, Queued),
    /// The stdio editor sent a line of this many bytes, more than [`MAX_STDIO_LINE`]; it was
    /// dropped unread. Counted among the queued lines like any other: each is answered.
    StdioLineTooLong(usize, Queued),
    /// The stdio editor sent a line that is not UTF-8 (valid up to this byte), here with U+FFFD
    /// for each invalid sequence: refused unless it is a `selection_changed`.
    StdioLineNotUtf8(usize, String, Queued),
    /// The stdio editor closed stdin.
    StdinClosed,
    /// Nothing came from the stdio editor for this long (`--editor-timeout`): its link is taken
    /// as gone, and the bridge stops as at stdin's end.
    EditorSilent(Duration),
    /// Writing to the stdio editor failed, or stdout's reader left (it closed its end): it can
    /// answer nothing forwarded to it, so the bridge stops as at stdin's end. What happened, said
    /// after "stdout".
    StdoutClosed(String),
    /// SIGINT, SIGTERM, SIGHUP or SIGQUIT.
    Signal(i32),
    /// The command of `run` ended.
    ChildExited(io::Result<ExitStatus>),
    /// The workspace check of a proposed change, back from its job.
    DiffChecked(Box<DiffCheck>),
    /// The check of the files of a call for the stdio editor, back from its job: which are
    /// kept, and the call forwarded; or refused with why (`Host::check_and_forward`).
    EditorCallChecked(CallId, Box<EditorCall>, Result<Vec<bool>, String>),
    /// The file the next proposed change on the terminal replaces, read on a job.
    OldRead(CallId, ui::Old),
    /// `$EDITOR` on the shown proposed change ended: the edited contents, or why not.
    Edited(CallId, ask::EditOutcome),
    /// Language servers' diagnostics changed: take them from [`Changes`](crate::lsp::Changes).
    Diagnostics(Arc<crate::lsp::Changes>),
    /// A thread that brings the host its inputs panicked ([`StopOnPanic`]): its name.
    Panicked(&'static str),
}

/// How long `run`'s command gets to end after it was asked to, once a thread of the bridge
/// panicked ([`HostInput::Panicked`]), before it is killed.
const KILL_AFTER_PANIC: std::time::Duration = std::time::Duration::from_secs(3);

/// The name of the thread that waits for `run`'s command.
pub const COMMAND_THREAD: &str = "child";

/// Held by a thread that brings the host its inputs (a terminal or stdio line, `run`'s command's
/// end, an edit, a signal, the runtime's events): if the thread unwinds (a panic, which the
/// default hook has printed), the host is told, and stops (status 101) rather than wait for ever
/// for what that thread would have brought. Panics the runtime and the language servers' readers
/// catch themselves (an event handler's, an `on_change`'s) never reach a holder.
pub struct StopOnPanic {
    inputs: Sender<HostInput>,
    thread: &'static str,
}

impl StopOnPanic {
    /// A guard for the thread called `thread`, telling `inputs`.
    pub fn new(inputs: &Sender<HostInput>, thread: &'static str) -> StopOnPanic {
        StopOnPanic {
            inputs: inputs.clone(),
            thread,
        }
    }
}

impl Drop for StopOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.inputs.send(HostInput::Panicked(self.thread));
        }
    }
}

/// The most lines of the stdio editor read and not yet handled: an editor that writes faster than
/// the host handles (for instance while it does not read the host's own lines, which blocks the
/// host's writes) waits instead of having its lines pile up, each up to [`MAX_STDIO_LINE`].
pub const MAX_QUEUED_LINES: usize = 2;

/// The most events of the runtime handed to the host and not yet handled: past them the runtime
/// keeps its events, and past its own bound ([`MAX_HOST_BACKLOG`]) stops reading from its
/// connections until the host catches up, so that a busy host never holds events without bound.
///
/// [`MAX_HOST_BACKLOG`]: claude_ide_bridge_runtime::MAX_HOST_BACKLOG
pub const MAX_QUEUED_EVENTS: usize = 256;

/// A place in the host's queue ([`HostInput::StdioLine`], [`HostInput::Event`]): given back when
/// dropped.
#[derive(Debug)]
pub struct Queued(Arc<(Mutex<usize>, Condvar)>);

/// Where a producer of the host's inputs waits for room in its share of the queue.
#[derive(Debug, Clone)]
pub struct Bounded {
    places: Arc<(Mutex<usize>, Condvar)>,
    max: usize,
}

impl Bounded {
    /// At most `max` inputs queued at once.
    pub fn new(max: usize) -> Bounded {
        Bounded {
            places: Arc::default(),
            max,
        }
    }

    /// Waits until fewer than `max` inputs are queued, then takes a place.
    pub fn enter(&self) -> Queued {
        let (count, room) = &*self.places;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= self.max {
            n = room.wait(n).unwrap_or_else(|p| p.into_inner());
        }
        *n += 1;
        Queued(self.places.clone())
    }

    /// Takes a place now, past `max` if need be: for the one thread that empties the queue,
    /// which must never wait for a place in it.
    pub fn enter_now(&self) -> Queued {
        let (count, _) = &*self.places;
        *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Queued(self.places.clone())
    }

    /// Takes a place if one is free now, without waiting.
    pub fn try_enter(&self) -> Option<Queued> {
        let (count, _) = &*self.places;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Queued(self.places.clone()))
    }

    /// Whether no input of this producer is queued or being handled (a place is given back only
    /// once its input is handled).
    pub fn is_empty(&self) -> bool {
        let (count, _) = &*self.places;
        *count.lock().unwrap_or_else(|p| p.into_inner()) == 0
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        let (count, room) = &*self.0;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        room.notify_one();
    }
}

/// What `openDiff` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffPolicy {
    /// Show the diff on the terminal and ask (`serve` on a terminal only: not `run`, whose
    /// terminal is claude's, nor `--stdio`).
    Ask,
    /// Accept as proposed (`FILE_SAVED`; the client writes the file).
    Accept,
    /// Reject.
    Reject,
    /// Leave pending: the user decides in claude's own prompt.
    Defer,
}

/// How diffs are decided, with the stdio editor as a fifth way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// One of the headless policies.
    Policy(DiffPolicy),
    /// The stdio editor (`tool_call` / `diff_decision`).
    Editor,
}

/// How long after a first request to stop a second one kills `run`'s command (see
/// `Host::stop_asked_at`).
const AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// How long after the terminal hung up `run`'s command is killed if it is still there: nobody is
/// left to ask a second time (Windows ends the whole process 5 s after its console closed).
const KILL_AFTER_HANGUP: std::time::Duration = std::time::Duration::from_secs(3);

/// What the loop does after an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// Stop the server and exit with this code.
    Exit(i32),
}

/// How the host is set up.
pub struct HostConfig {
    /// The workspace.
    pub workspace: Workspace,
    /// `ideName`.
    pub ide_name: String,
    /// Who decides diffs.
    pub decider: Decider,
    /// `--open-files`.
    pub open_files: bool,
    /// `--wire-log`.
    pub wire: Option<WireLog>,
    /// `--stdio`: the editor's stdout writer.
    pub stdio: Option<StdioOut>,
    /// Asks the terminal reader for one line (the `ask` prompt).
    pub want_line: Option<Sender<()>>,
    /// The host's own input channel, for the results of jobs that change its state.
    pub inputs: Sender<HostInput>,
    /// The language servers (`None`: `--no-lsp`).
    pub lsp: Option<Arc<LanguageServers>>,
    /// `--path-map`: the stdio editor's names of the paths (empty: the bridge's own).
    pub paths: PathMap,
}

/// The host state.
pub struct Host {
    handle: Handle,
    jobs: Jobs,
    inputs: Sender<HostInput>,
    ws: Workspace,
    ide_name: String,
    decider: Decider,
    open_files: bool,
    wire: Option<WireLog>,
    stdio: Option<StdioOut>,
    running_child: Option<u32>,
    /// When the bridge was first told to stop while `run`'s command runs: told again a second
    /// or more after, it kills the command (one that ignores SIGTERM kept the bridge and its
    /// servers up). Sooner is the same request: a terminal closing sends SIGHUP twice (the
    /// shell's, then the kernel's), and the command must get its time to clean up.
    stop_asked_at: Option<Instant>,
    /// Ctrl-C stopped the bridge (not `--stdio`'s): it ends as Ctrl-C ends a program once
    /// stopped ([`Host::ends_interrupted`]).
    interrupted: bool,
    /// A thread that brings inputs panicked ([`StopOnPanic`]): the exit status is 101, once
    /// `run`'s command has ended.
    panicked: bool,
    // Proposed changes being checked on a job, and the `ask` prompt.
    checking: VecDeque<Checking>,
    queue: VecDeque<Shown>,
    shown: Option<Shown>,
    /// The changes left to claude's own prompt (`--on-diff defer`), by call: their end is said
    /// (each comes as a cancellation: claude closing the tab once decided, its link dropping).
    deferred: HashMap<CallId, String>,
    /// When the shown change's question was put: a line read before it is not its answer.
    shown_at: Instant,
    /// The shown change is in `$EDITOR` (on its own thread): nothing else is shown meanwhile.
    editing: Option<CallId>,
    /// When `$EDITOR` last ended: a Ctrl-C that ended it reaches the bridge too, and its signal
    /// may be handled after the editor's end.
    editor_ended: Option<Instant>,
    /// `$EDITOR`'s process while it runs: a stop ends it ([`Host::end_edit`]).
    editor_pid: Arc<Mutex<Option<u32>>>,
    want_line: Option<Sender<()>>,
    line_requested: bool,
    // The stdio editor.
    next_id: u64,
    forwarded: HashMap<u64, Forwarded>,
    selection: Option<SelectionChanged>,
    /// What the editor reported, by URI (an empty list too: the editor says the file is clean).
    diagnostics: stdio::EditorDiagnostics,
    /// How the client wrote the files it asked `getDiagnostics` about.
    spellings: diagnostics::Spellings,
    tabs: Tabs,
    // For the stdio `status` answer: what the `ready` line said, and the connected clients (the
    // protocol version once initialized).
    ready: Option<stdio::Ready>,
    clients: BTreeMap<u64, Option<String>>,
    /// The terminal's lines about sockets that never became clients, held to a few at a time.
    refused_lines: RefusedLines,
    lsp: Option<Arc<LanguageServers>>,
    paths: PathMap,
}

/// How many lines about sockets that never became clients (refused, timed out or evicted in
/// their upgrade) the terminal gets per [`REFUSED_WINDOW`]; the rest are counted.
const REFUSED_LINES: u32 = 5;
/// See [`REFUSED_LINES`].
const REFUSED_WINDOW: Duration = Duration::from_secs(10);

/// Lines about sockets that never became clients, at most [`REFUSED_LINES`] per
/// [`REFUSED_WINDOW`]: a local process without the token connecting over and over said a line
/// each (191,000 in 12 s, measured), filling the terminal and, where stderr does not drain (a
/// pager, Ctrl-S), holding the host in its writes while the real client waited.
struct RefusedLines {
    window: Instant,
    said: u32,
    held: u64,
}

impl RefusedLines {
    fn new(now: Instant) -> RefusedLines {
        RefusedLines {
            window: now,
            said: 0,
            held: 0,
        }
    }

    /// The lines to say at `now` for `line`: none when the window's are said (it is counted),
    /// and first, in a new window, how many were held back in the last.
    fn lines(&mut self, now: Instant, line: String) -> Vec<String> {
        let mut out = Vec::new();
        if now.saturating_duration_since(self.window) >= REFUSED_WINDOW {
            out.extend(self.held());
            (self.window, self.said) = (now, 0);
        }
        if self.said < REFUSED_LINES {
            self.said += 1;
            out.push(line);
        } else {
            self.held += 1;
        }
        out
    }

    /// How many lines were held back since they were last told, if any (then none are).
    fn held(&mut self) -> Option<String> {
        let held = std::mem::take(&mut self.held);
        (held > 0).then(|| {
            let connections = if held == 1 {
                "connection"
            } else {
                "connections"
            };
            format!(
                "({held} more {connections} refused or dropped before their upgrade, not shown)"
            )
        })
    }
}

/// What the terminal is told of an answer to `call` the engine did not take as given (`e`):
/// dropped (the call was no longer waiting: its client left, or cancelled it, which is no fault),
/// or replaced by an error it did not fit. The client is named.
fn not_given(call: CallId, e: &claude_ide_bridge::ApiError) -> String {
    let conn = call.conn;
    match e {
        claude_ide_bridge::ApiError::AnswerTooLarge => format!("({conn}: answer replaced: {e})"),
        claude_ide_bridge::ApiError::NotPending => {
            format!("({conn}: answer dropped: {e}: the client left or cancelled it)")
        }
        e => format!("({conn}: answer dropped: {e})"),
    }
}

/// The tool error a stop answers an `openDiff` the `--stdio` editor did not decide with (its own,
/// and any the engine still holds then: `Options::diff_error_at_stop`, whose default, the
/// runtime's, says the bridge stopped), not `DIFF_REJECTED`: the real client takes an error as
/// "the IDE could not show it" and keeps its own accept prompt, where a `DIFF_REJECTED` would end
/// the turn as if the user had said no (docs/e2e.md, "When the editor's link drops with a diff
/// pending").
pub fn undecided_by_the_editor(ide_name: &str) -> String {
    format!(
        "{ide_name}: the editor did not answer: its link to the bridge ended before the user \
         decided (nothing was accepted or written)"
    )
}

/// What the terminal says when signal `sig` stops the bridge, naming it
/// ([`crate::sys::signal_name`]).
pub fn stopping_on(sig: i32) -> String {
    format!("{}: stopping the bridge", crate::sys::signal_name(sig))
}

/// How a disconnection is named in messages, the wire log and stdio lines: the engine's name
/// (docs/protocol.md, "Disconnect reasons").
fn reason_str(r: &DisconnectReason) -> String {
    r.to_string()
}

impl Host {
    /// A host answering through `handle`.
    pub fn new(handle: Handle, cfg: HostConfig) -> Host {
        let host = Host {
            jobs: Jobs::new(handle.clone()),
            handle,
            inputs: cfg.inputs,
            ws: cfg.workspace,
            ide_name: cfg.ide_name,
            decider: cfg.decider,
            open_files: cfg.open_files,
            wire: cfg.wire,
            stdio: cfg.stdio,
            running_child: None,
            stop_asked_at: None,
            interrupted: false,
            panicked: false,
            checking: VecDeque::new(),
            queue: VecDeque::new(),
            shown: None,
            deferred: HashMap::new(),
            editing: None,
            editor_ended: None,
            editor_pid: Arc::default(),
            want_line: cfg.want_line,
            line_requested: false,
            shown_at: Instant::now(),
            next_id: 1,
            forwarded: HashMap::new(),
            selection: None,
            diagnostics: stdio::EditorDiagnostics::default(),
            spellings: diagnostics::Spellings::default(),
            tabs: Tabs::default(),
            ready: None,
            clients: BTreeMap::new(),
            refused_lines: RefusedLines::new(Instant::now()),
            lsp: cfg.lsp,
            paths: cfg.paths,
        };
        // A panic of the main thread ends the editor too (`crate::panic`).
        crate::panic::editor_pid_in(&host.editor_pid);
        host
    }

    /// In `run` mode: the child's pid, told SIGTERM when the bridge gets SIGTERM, SIGHUP or
    /// SIGQUIT, and killed when told again a second or more later.
    pub fn set_child(&mut self, pid: u32) {
        self.running_child = Some(pid);
        // A panic of the main thread ends it too (`crate::panic`).
        crate::panic::command_started(pid);
    }

    /// Whether Ctrl-C stopped the bridge (not `--stdio`'s, whose editor reads its status): the
    /// program then ends as Ctrl-C ends one, once stopped (`crate::sys::end_interrupted`).
    pub fn ends_interrupted(&self) -> bool {
        self.interrupted
    }

    fn respond(&self, call: CallId, result: ToolResult) {
        if let Err(e) = self.handle.respond(call, result) {
            ui::say(&not_given(call, &e));
        }
    }

    /// Whether `event` is answered from memory at once, waiting on nothing (no file, terminal,
    /// editor or language server): a tool call that the host answers from what it knows, with no
    /// stdio editor to forward it to. Such an event may be handled by [`Host::handle_now`] on the
    /// runtime's thread, when nothing of the runtime's is queued before it; the others go
    /// through the host's queue.
    pub fn answers_at_once(&self, event: &Event) -> bool {
        let Event::ToolCall { tool, .. } = event else {
            return false;
        };
        self.stdio.is_none()
            && matches!(
                tool,
                ToolCall::GetWorkspaceFolders
                    | ToolCall::GetOpenEditors
                    | ToolCall::GetCurrentSelection
                    | ToolCall::GetLatestSelection
                    | ToolCall::GetAllOpenedFilePaths
                    | ToolCall::ExecuteCode(_)
                    | ToolCall::CloseTab(_)
                    | ToolCall::CloseAllDiffTabs
            )
    }

    /// Handles a runtime event taken without a place in the queue (see
    /// [`Host::answers_at_once`]), as [`Host::handle`] does a queued one.
    pub fn handle_now(&mut self, event: Event) {
        self.on_event(event);
    }

    /// Handles one input.
    pub fn handle(&mut self, input: HostInput) -> Flow {
        let flow = self.handle_input(input);
        if let Flow::Exit(_) = flow {
            // The question is not drawn again under the lines of the stop.
            ui::prompt_closed();
            // What the terminal was not shown, said before the bridge stops.
            if let Some(line) = self.refused_lines.held() {
                ui::say(&line);
            }
        }
        flow
    }

    fn handle_input(&mut self, input: HostInput) -> Flow {
        match input {
            HostInput::Event(e, _queued) => self.on_event(e),
            HostInput::TerminalLine(line, read_at) => self.on_terminal_line(line, read_at),
            HostInput::TerminalAway => self.on_terminal_away(),
            // The line's place in the queue is given back once it is handled.
            HostInput::StdioLine(line, _queued) => self.on_stdio_line(&line),
            HostInput::StdioLineTooLong(n, _queued) => self.editor_error(format!(
                "a line of {n} bytes was refused: a line may have at most {MAX_STDIO_LINE} bytes"
            )),
            // A selection in a buffer whose bytes are not all UTF-8 (Vim reads such a file as
            // UTF-8 and its `json_encode` passes the bytes through): claude is given the text
            // with U+FFFD where they were, rather than the user a refusal at every cursor move;
            // but not a path so changed, which names no file.
            HostInput::StdioLineNotUtf8(at, lossy, _queued) => match stdio::lossy_kind(&lossy) {
                stdio::Lossy::Selection => self.on_stdio_line(&lossy),
                stdio::Lossy::SelectionPath => self.editor_error(format!(
                    "selection_changed: refused: its filePath is not UTF-8 (an invalid byte after \
                     {at} valid ones of the line)"
                )),
                stdio::Lossy::Other => self.editor_error(format!(
                    "a line was refused: it is not UTF-8 (an invalid byte after {at} valid ones)"
                )),
            },
            HostInput::StdinClosed => {
                ui::end_prompt();
                ui::say("stdin closed: stopping");
                return Flow::Exit(0);
            }
            HostInput::EditorSilent(limit) => {
                ui::end_prompt();
                ui::say(&format!(
                    "nothing came from the editor for {} s (--editor-timeout): its link is taken \
                     as gone; stopping",
                    limit.as_secs()
                ));
                return Flow::Exit(0);
            }
            HostInput::StdoutClosed(why) => {
                ui::end_prompt();
                ui::say(&format!("stdout {why}: stopping"));
                return Flow::Exit(0);
            }
            HostInput::Signal(sig) => return self.on_signal(sig),
            HostInput::DiffChecked(check) => self.on_diff_checked(check),
            HostInput::EditorCallChecked(call, form, checked) => {
                self.on_editor_call_checked(call, *form, checked)
            }
            HostInput::OldRead(call, old) => self.on_old_read(call, old),
            HostInput::Edited(call, edited) => self.on_edited(call, edited),
            HostInput::Diagnostics(changes) => {
                for change in changes.take() {
                    self.on_lsp_change(change);
                }
            }
            HostInput::Panicked(thread) => {
                ui::end_prompt();
                ui::say(&format!(
                    "internal error: the {thread} thread panicked (above); stopping"
                ));
                self.panicked = true;
                match self.running_child {
                    // `run`'s command is asked to stop, and the bridge stops once it has, as at
                    // a signal; killed after a grace if it is still there, since the thread that
                    // panicked may be the one that would bring the user's second request (the
                    // signals'). Unless the thread was the one waiting for it, whose end would
                    // never come (and whose pid may be another's now).
                    Some(pid) if thread != COMMAND_THREAD => {
                        if self.stop_asked_at.is_none() {
                            self.stop_asked_at = Some(Instant::now());
                            crate::sys::ask_to_stop(pid);
                        }
                        crate::panic::kill_command_after(pid, KILL_AFTER_PANIC);
                    }
                    _ => return Flow::Exit(101),
                }
            }
            HostInput::ChildExited(_) if self.panicked => return Flow::Exit(101),
            HostInput::ChildExited(status) => {
                return Flow::Exit(match status {
                    Ok(s) => exit_code(s),
                    Err(e) => {
                        ui::say(&format!("waiting for the command failed: {e}"));
                        1
                    }
                })
            }
        }
        Flow::Continue
    }

    fn on_signal(&mut self, sig: i32) -> Flow {
        const SIGINT: i32 = crate::sys::INTERRUPT;
        match self.running_child {
            // In `run`, the terminal's Ctrl-C belongs to claude (it got the SIGINT too).
            Some(_) if sig == SIGINT => Flow::Continue,
            // So does it to `$EDITOR` while it has the terminal (it shares the bridge's process
            // group): Ctrl-C ends the editor, whose failure keeps the edit and asks again.
            None if sig == SIGINT && self.editing.is_some() => Flow::Continue,
            // The same Ctrl-C, handled after the editor's end was: the editor's, not a stop.
            None if sig == SIGINT
                && self
                    .editor_ended
                    .is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) =>
            {
                Flow::Continue
            }
            // The bridge stops once the command has: asked to, then, told again (a second or
            // more later), killed; after a hangup, killed after a grace without being told.
            Some(pid) => {
                // Also when a request came before it (a SIGTERM, then the terminal closed).
                if sig == crate::sys::HANGUP {
                    crate::panic::kill_command_after(pid, KILL_AFTER_HANGUP);
                }
                match self.stop_asked_at {
                    None => {
                        self.stop_asked_at = Some(Instant::now());
                        crate::sys::ask_to_stop(pid);
                    }
                    Some(at) if at.elapsed() >= AGAIN_AFTER => crate::sys::kill_now(pid),
                    Some(_) => {}
                }
                Flow::Continue
            }
            None => {
                ui::end_prompt();
                ui::say(&stopping_on(sig));
                self.interrupted = sig == crate::sys::INTERRUPT && self.stdio.is_none();
                Flow::Exit(0)
            }
        }
    }

    fn on_event(&mut self, e: Event) {
        if let Some(w) = &mut self.wire {
            w.event(&e);
        }
        match e {
            Event::Message { .. } => {}
            Event::IdeConnected { conn, pid } => {
                // The runtime has read the pid: on Windows, one that is no process here is a
                // claude in WSL, sent the paths of selections and at-mentions as WSL names them.
                if self.handle.client_paths(conn) == Some(ClientPaths::WslMounts) {
                    ui::say(&format!(
                        "{conn} is a claude in WSL (pid {} is no Windows process): its \
                         selections and at-mentions name files by their /mnt/<drive>/ paths",
                        pid.unwrap_or_default()
                    ));
                }
            }
            Event::Connected {
                conn, user_agent, ..
            } => {
                ui::say(&format!(
                    "client connected ({conn}, {})",
                    user_agent.as_deref().unwrap_or("no user agent")
                ));
                self.clients.insert(conn.0, None);
                self.to_editor(&ToEditor::Connected { conn: conn.0 });
                if let Some(servers) = &self.lsp {
                    servers.connected();
                }
            }
            Event::Initialized {
                conn,
                protocol_version,
                ..
            } => {
                self.clients.insert(conn.0, Some(protocol_version.clone()));
                self.to_editor(&ToEditor::Initialized {
                    conn: conn.0,
                    protocol_version: &protocol_version,
                })
            }
            Event::Disconnected { conn, reason } => {
                let r = reason_str(&reason);
                if self.clients.contains_key(&conn.0) {
                    ui::say(&format!("client disconnected ({conn}, {r})"));
                } else {
                    let line = match reason {
                        DisconnectReason::Refused(rejection) => {
                            // `doctor` looks at the port without the token, and a claude
                            // started before a new token (`--new-token`) still has the old one:
                            // both named, which a refusal cannot tell apart.
                            let doctor = matches!(rejection, Rejection::Unauthorized)
                                .then_some(
                                    " (no token or an old one: `doctor`'s look at the port, or \
                                     another start's of this workspace, or a claude from before a \
                                     new token, which `/ide` reconnects)",
                                )
                                .unwrap_or_default();
                            format!(
                                "connection {conn} refused: {} {}, {}{doctor}",
                                rejection.status(),
                                rejection.reason_phrase(),
                                rejection.detail()
                            )
                        }
                        _ => format!("connection {conn} dropped before its upgrade ({r})"),
                    };
                    for line in self.refused_lines.lines(Instant::now(), line) {
                        ui::say(&line);
                    }
                }
                self.client_gone(conn.0, &r);
            }
            Event::TabClosed { tab_name, .. } => self.to_editor(&ToEditor::TabClosed {
                tab_name: &tab_name,
            }),
            Event::CallCancelled { call, reason } => self.on_cancelled(call, reason),
            Event::ToolCall { call, tool } => self.on_tool(call, tool),
            Event::CompatRequest { call, request } => self.on_compat(call, request),
            // An event of a newer engine this host does not handle: said, not dropped silently.
            other => ui::say(&format!("(event not handled by this host: {other:?})")),
        }
    }

    fn on_cancelled(&mut self, call: CallId, reason: CancelReason) {
        let why = &reason.to_string();
        self.check_cancelled(call);
        self.withdraw_diff(call, reason);
        self.cancel_forwarded(call, why);
    }

    fn on_tool(&mut self, call: CallId, tool: ToolCall) {
        let mut tool = tool;
        file_uris_as_paths(&mut tool);
        match tool {
            ToolCall::OpenDiff(args) => self.on_diff(call, args),
            ToolCall::GetDiagnostics(a) => self.diagnostics_call(call, a.uri),
            ToolCall::ReformatFile(a) if self.stdio.is_none() && self.lsp.is_some() => {
                let servers = self.lsp.clone().expect("checked");
                self.reformat_call(call, servers, a.file_path)
            }
            // With an editor, a tool it has a form for goes to it; the others are answered here.
            other if self.stdio.is_some() => match EditorCall::of(other) {
                Ok(form) => self.check_and_forward(call, form),
                Err(other) => self.answer_headless(call, other),
            },
            other => self.answer_headless(call, other),
        }
    }
}

/// The files of a tool call named by `file://` URIs named by their paths, as the tools take them:
/// a URI was joined to the workspace folder as a relative path ("File not found" for a file
/// that is there). One that names no file here is left as given, for the tool's own refusal.
fn file_uris_as_paths(tool: &mut ToolCall) {
    let paths: Vec<&mut String> = match tool {
        ToolCall::OpenFile(a) => vec![&mut a.file_path],
        ToolCall::OpenFiles(a) => a.file_paths.iter_mut().collect(),
        ToolCall::CheckDocumentDirty(a) => vec![&mut a.file_path],
        ToolCall::SaveDocument(a) => vec![&mut a.file_path],
        ToolCall::ReformatFile(a) => vec![&mut a.file_path],
        _ => Vec::new(),
    };
    for p in paths {
        if claude_ide_bridge::is_file_uri(p) {
            if let Some(path) = crate::sys::path_of_file_uri(p) {
                *p = path;
            }
        }
    }
}

/// The exit code a shell would report: the status, or 128 + the signal (Unix).
pub fn exit_code(status: ExitStatus) -> i32 {
    crate::sys::exit_code(status)
}

/// `text` cut to at most `max` bytes, at a character boundary, with `...` when cut: what the host
/// quotes back of text it did not write (a server's message in a note, an editor's line in an
/// `error` line).
fn cut_to(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(format!("{}...", ui::prefix_within(text, max)))
}

#[cfg(test)]
mod tests {
    use super::{reason_str, Bounded, RefusedLines, REFUSED_LINES, REFUSED_WINDOW};
    use claude_ide_bridge::ws::{ProtocolError, ProtocolErrorKind};
    use claude_ide_bridge::{DisconnectReason, Rejection};
    use std::time::{Duration, Instant};

    /// A flood of sockets refused in their upgrade says a few lines per window, then how many
    /// more there were once a new window begins.
    #[test]
    fn refused_sockets_say_a_few_lines_and_count_the_rest() {
        let t0 = Instant::now();
        let mut quiet = RefusedLines::new(t0);
        let said: Vec<String> = (0..1000)
            .flat_map(|i| quiet.lines(t0 + Duration::from_millis(i), format!("refused {i}")))
            .collect();
        assert_eq!(said.len(), REFUSED_LINES as usize);
        assert_eq!(said[0], "refused 0");
        let later = quiet.lines(t0 + REFUSED_WINDOW + Duration::from_secs(1), "next".into());
        assert_eq!(
            later,
            [
                format!(
                    "({} more connections refused or dropped before their upgrade, not shown)",
                    1000 - REFUSED_LINES
                ),
                "next".to_owned()
            ]
        );
        // A quiet window says nothing about the one before.
        let after = quiet.lines(t0 + 3 * REFUSED_WINDOW, "again".into());
        assert_eq!(after, ["again"]);
        // What is held back when the bridge stops is told then.
        for i in 0..REFUSED_LINES + 3 {
            quiet.lines(t0 + 3 * REFUSED_WINDOW, format!("{i}"));
        }
        assert_eq!(
            quiet.held().as_deref(),
            Some("(4 more connections refused or dropped before their upgrade, not shown)")
        );
        assert_eq!(quiet.held(), None);
        for i in 0..REFUSED_LINES + 1 {
            quiet.lines(t0 + 5 * REFUSED_WINDOW, format!("{i}"));
        }
        assert_eq!(
            quiet.held().as_deref(),
            Some("(1 more connection refused or dropped before their upgrade, not shown)")
        );
    }

    /// The stdio `reason` strings stay what editors already read, now that the engine's reasons
    /// carry the refusal and the protocol error instead of numbers.
    #[test]
    fn disconnect_reasons_keep_their_wire_names() {
        let cases = [
            (
                DisconnectReason::Refused(Rejection::Unauthorized),
                "refused_401",
            ),
            (
                DisconnectReason::Refused(Rejection::Forbidden("Host")),
                "refused_403",
            ),
            (
                DisconnectReason::Refused(Rejection::ServiceUnavailable),
                "refused_503",
            ),
            (
                DisconnectReason::ProtocolError(ProtocolError::from(ProtocolErrorKind::Unmasked)),
                "protocol_error_1002",
            ),
            (
                DisconnectReason::ProtocolError(ProtocolErrorKind::InvalidUtf8.into()),
                "protocol_error_1007",
            ),
            (
                DisconnectReason::ProtocolError(ProtocolErrorKind::MessageTooBig.into()),
                "protocol_error_1009",
            ),
            (DisconnectReason::PingTimeout, "ping_timeout"),
        ];
        for (reason, want) in cases {
            assert_eq!(reason_str(&reason), want);
        }
    }

    #[test]
    fn a_bounded_producer_waits_until_a_place_is_given_back() {
        let room = Bounded::new(2);
        let (a, b) = (room.enter(), room.enter());
        let (tx, rx) = std::sync::mpsc::channel();
        let waiting = room.clone();
        let t = std::thread::spawn(move || {
            let third = waiting.enter();
            tx.send(()).unwrap();
            third
        });
        // Two places taken: the third waits.
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err());
        drop(a);
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .expect("a place given back lets the producer on");
        drop((b, t.join().unwrap()));
        let _again = (room.enter(), room.enter());
    }
}
