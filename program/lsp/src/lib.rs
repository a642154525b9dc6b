//! A language-server client for claude-ide-bridge: diagnostics (and formatting) from real language servers.
//!
//! [`Lsp`] is a cheap handle (`Clone + Send + Sync`) over the servers of a workspace. It starts nothing
//! until a file of a language is needed; then it starts that language's servers (the set
//! [`ServerTable::resolve`] finds on `PATH`: for Python, pyright for types and `ruff server` for
//! lint and formatting), initializes them with the workspace folders, and keeps them. The crate never
//! reads files: the program passes the text it read (with its own bounds), and [`Lsp::diagnostics`] makes
//! each server of the set have exactly that text before answering with the diagnostics they computed for
//! it, merged (each keeps its `source`).
//!
//! Layout, following the byte path:
//!
//! - [`codec`]: Content-Length framing, pure;
//! - `rpc`: JSON-RPC messages, each typed by lsp-types' `Request` or `Notification` trait, and the
//!   answers to servers' requests, pure;
//! - `messages`: lean views of the messages whose lsp-types types would build what the client
//!   passes over;
//! - `state`: one server's documents, requests and diagnostics, bounded, pure (`state/caps.rs`:
//!   what the server supports and `initialize`; `state/check.rs`: tsserver checks on request;
//!   `state/watched.rs`: its watched-file registrations; `state/dependents.rs`: clangd's open
//!   documents checked again when a header they may include changes);
//! - `merge`: one file's diagnostics from a language's several servers, merged;
//! - `server`: the process and its reader, writer and stderr threads;
//! - `log`: servers' stderr, bounded, to a file or nowhere;
//! - `limits`: [`LspLimits`], what a server may cost;
//! - [`table`]: which server for which file, `doctor`'s plan;
//! - `watch`: the globs a server registers for watched files;
//! - [`text`]: UTF-16 positions, edits;
//! - `sys`: a server's process tree, program files, non-blocking input, by OS;
//! - `fuzzing`: the `lsp` fuzz target's body (feature `fuzzing`);
//! - this file: the servers of a workspace ([`Lsp`]), started on demand, restarts with backoff,
//!   shutdown.
//!
//! ```no_run
//! use claude_ide_bridge_lsp::{Lsp, LspConfig, LspLog};
//! use std::path::Path;
//! use std::time::{Duration, Instant};
//!
//! let config = LspConfig {
//!     workspace_folders: vec!["/home/me/project".into()],
//!     log: LspLog::File("/tmp/claude-ide-bridge-lsp.log".into()),
//!     ..LspConfig::default()
//! };
//! let lsp = Lsp::new(config, |change| eprintln!("{} now has {} diagnostics", change.uri, change.diagnostics.len()));
//! let path = Path::new("/home/me/project/app.py");
//! let text = "x: int = 'one'\n";
//! for d in lsp.diagnostics(path, text, lsp.deadline()) {
//!     println!("{}:{}: {} {}", d.range.start.line + 1, d.range.start.character + 1, d.severity, d.message);
//! }
//! lsp.shutdown(Duration::from_secs(2));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod limits;
mod log;
mod merge;
mod messages;
mod rpc;
mod server;
mod state;
mod sys;
pub mod table;
pub mod text;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use claude_ide_bridge::{Diagnostic, FileDiagnostics};
pub use limits::LspLimits;
pub use log::LspLog;
pub use table::{parse_override, Override, Plan, PlannedLanguage, ServerTable, MAX_SERVERS};
pub use watch::{FileChange, Watched};

use merge::known_of;
use server::{OnChange, RequestError, ServerProcess};
use state::Phase;

/// The diagnostics [`Lsp::check`] answers, and whether they are for the text asked about.
///
/// ```
/// use claude_ide_bridge_lsp::Checked;
/// let late = Checked::stale(Vec::new());
/// assert!(!late.fresh && late.diagnostics.is_empty() && late.down.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The file's diagnostics: those of every server of its set, merged (each with its `source`).
    pub diagnostics: Vec<Diagnostic>,
    /// False when they may be for another text, or no server said: the deadline passed first
    /// for a server that runs, or no server runs for the file (then they are what was known,
    /// often nothing). A server of the set that is not running (could not start, given up on)
    /// does not make them stale: it is named in [`Checked::down`]. One that exited and is
    /// started again does, as a late one does.
    pub fresh: bool,
    /// Not fresh, but what the servers said of this very text before a file it includes changed
    /// (clangd checking it again, `State::held_from_before_recheck`), given to a caller bound by
    /// its client's timeout ([`Lsp::check_by`]) when the new answer did not come within a short
    /// grace: the client is answered as it was before that change, at once, rather than
    /// "not known" for the seconds a large C++ file takes. Not an answer to remember.
    pub from_before: bool,
    /// The servers of the file's set whose diagnostics are missing from the answer, with why
    /// (shown as `ruff server: not running (exited)`, `pylsp: no answer in time`).
    pub down: Vec<Down>,
}

/// A server of a file's set whose diagnostics are missing from an answer ([`Checked::down`]).
///
/// ```
/// use claude_ide_bridge_lsp::{Down, DownReason};
/// let late = Down { server: "pylsp".into(), why: DownReason::Late };
/// assert!(late.awaited());
/// assert_eq!(late.to_string(), "pylsp: no answer in time");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Down {
    /// The server's command as a shell would read it back (`ruff server`; see
    /// [`table::command_line`]).
    pub server: String,
    /// Why its part is missing.
    pub why: DownReason,
}

/// Why a server's diagnostics are missing from an answer ([`Down::why`]).
#[derive(Debug, Clone, PartialEq)]
pub enum DownReason {
    /// It is still starting: its part is not known yet.
    Starting,
    /// It runs, but did not answer for this text before the deadline.
    Late,
    /// It has not answered for longer than [`LspLimits::late_after`] (this long): left out of
    /// its set's answers until it answers.
    LeftOut(Duration),
    /// It does not run: could not be started, or given up on after its restarts (the reason).
    NotRunning(String),
    /// It exited (the reason) and is started again shortly, its restarts not used up: its part
    /// is not known until it answers. Without it, an answer standing for a baseline would lack
    /// what it reports, which the client would take as new once it is back.
    Restarting(String),
    /// Stopped with the others ([`Lsp::shutdown`]): nothing starts it again.
    Stopping,
}

impl Down {
    /// Whether its part is awaited (it starts, runs and is late, or is started again): without
    /// it, what the set answers is not known for the text. A server left out or not running is
    /// not awaited.
    pub fn awaited(&self) -> bool {
        matches!(
            self.why,
            DownReason::Starting | DownReason::Late | DownReason::Restarting(_)
        )
    }
}

impl fmt::Display for Down {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.server, self.why)
    }
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DownReason::Starting => f.write_str("still starting"),
            DownReason::Late => f.write_str("no answer in time"),
            DownReason::LeftOut(after) => write!(
                f,
                "no answer for over {} s (left out until it answers)",
                after.as_secs()
            ),
            DownReason::NotRunning(why) => f.write_str(why),
            DownReason::Restarting(why) => write!(f, "{why}, started again shortly"),
            DownReason::Stopping => f.write_str("stopped: the bridge is stopping"),
        }
    }
}

impl Checked {
    /// What was known, not computed for the text asked about.
    pub fn stale(diagnostics: Vec<Diagnostic>) -> Checked {
        Checked {
            diagnostics,
            fresh: false,
            from_before: false,
            down: Vec::new(),
        }
    }
}

/// What the client runs and how long it waits.
#[derive(Debug, Clone)]
pub struct LspConfig {
    /// Which server serves which language ([`ServerTable::builtin`], with `--lsp` overrides applied).
    pub servers: ServerTable,
    /// The workspace folders, sent in `initialize`; the first is the servers' working directory.
    pub workspace_folders: Vec<PathBuf>,
    /// How long a `getDiagnostics` call waits for fresh diagnostics: [`Lsp::deadline`] is now plus this.
    /// A call that had to wait for its server to start gets this long again once it is initialized.
    pub diagnostics_wait: Duration,
    /// How long a call may wait for its server's start (`initialize` answered), beyond its own deadline.
    pub start_wait: Duration,
    /// Where servers' stderr and log messages go (never the bridge's stderr).
    pub log: LspLog,
    /// Bounds on memory, time and restarts.
    pub limits: LspLimits,
    /// The `tabSize` sent with `textDocument/formatting` (with `insertSpaces: true`).
    pub tab_size: u32,
    /// Also log every message to and from the servers (its first 1,000 bytes), for debugging a server.
    pub trace: bool,
}

impl Default for LspConfig {
    fn default() -> LspConfig {
        LspConfig {
            servers: ServerTable::builtin(),
            workspace_folders: Vec::new(),
            diagnostics_wait: Duration::from_secs(3),
            start_wait: Duration::from_secs(10),
            log: LspLog::Discard,
            limits: LspLimits::default(),
            tab_size: 4,
            trace: false,
        }
    }
}

/// Why [`Lsp::format`] has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspError {
    /// The server did not answer before the deadline (or was still starting).
    Timeout,
    /// The server is gone (crashed, hung, misbehaved, or the client was shut down), with why.
    Exited(String),
    /// The server answered with an error.
    Server {
        /// Its JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The server's answer could not be used (unreadable, or edits that overlap).
    BadAnswer(String),
}

impl fmt::Display for LspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LspError::Timeout => f.write_str("the language server did not answer in time"),
            LspError::Exited(why) => write!(f, "the language server is not running ({why})"),
            LspError::Server { code, message } => {
                write!(f, "the language server refused: {message} ({code})")
            }
            LspError::BadAnswer(why) => {
                write!(f, "the language server's answer is unusable: {why}")
            }
        }
    }
}

impl std::error::Error for LspError {}

/// How one server is doing, for `doctor` and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// The languages it serves (those asked for so far).
    pub languages: Vec<String>,
    /// Its command; `None` when no server of the language was found on `PATH`.
    pub command: Option<Vec<String>>,
    /// Its state.
    pub state: ServerState,
    /// Its process id while it has one.
    pub pid: Option<u32>,
    /// How many times it was started again after a crash.
    pub restarts: u32,
}

/// How long a server must have run before it ends for its next start to begin a fresh series of
/// restarts ([`LspLimits::max_restarts`]).
pub(crate) const FRESH_SERIES_AFTER: Duration = Duration::from_secs(300);

/// The restarts counted against a server once it has ended: `restarts` so far, or none when it
/// ran (from `started` to `ended`) long enough to begin a fresh series ([`FRESH_SERIES_AFTER`]).
pub(crate) fn restarts_counted(restarts: u32, started: Instant, ended: Instant) -> u32 {
    if ended.duration_since(started) > FRESH_SERIES_AFTER {
        0
    } else {
        restarts
    }
}

/// A server process that ended without being asked to ([`Lsp::on_exit`]): it crashed or exited
/// by itself, was found hung and killed, or was stopped for misbehaving. Its diagnostics are
/// already told gone; it is started again at the next need, within [`LspLimits::max_restarts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerExit {
    /// Its command, as started.
    pub command: Vec<String>,
    /// The languages it served (those asked for so far).
    pub languages: Vec<String>,
    /// The process's id.
    pub pid: u32,
    /// Why it ended, as the bridge saw it (`exited`, `hung: ...`).
    pub reason: String,
    /// Its exit status as the OS gives it (`exit status: 3`, `signal: 9 (SIGKILL)`).
    pub status: String,
    /// `Some(how long)` when this end used up its restarts ([`LspLimits::max_restarts`] in a
    /// row): it is not started again for that long ([`LspLimits::given_up_for`]); `None` when it
    /// is started again at the next need.
    pub given_up_for: Option<Duration>,
}

/// The state of a server in [`ServerStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// No command of the language is installed (looked for on `PATH` again at a need once
    /// [`LspLimits::resolve_again`] has passed).
    Missing,
    /// Started; `initialize` not answered yet.
    Starting,
    /// Initialized and serving.
    Running,
    /// Gone (crashed, hung or misbehaved), with why; its diagnostics forgotten (`on_change` is told);
    /// started again on the next need after its backoff.
    Crashed(String),
    /// Down for a while, with why: it could not be started (tried again at a need once
    /// [`LspLimits::start_retry`] has passed), or it crashed again after
    /// [`LspLimits::max_restarts`] restarts (a fresh series of restarts at a need once
    /// [`LspLimits::given_up_for`] has passed).
    Failed(String),
    /// Stopped by [`Lsp::shutdown`].
    Stopped,
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerState::Missing => f.write_str("missing"),
            ServerState::Starting => f.write_str("starting"),
            ServerState::Running => f.write_str("running"),
            ServerState::Crashed(why) => write!(f, "crashed ({why}), restarting on next use"),
            ServerState::Failed(why) => write!(f, "failed ({why})"),
            ServerState::Stopped => f.write_str("stopped"),
        }
    }
}

/// One command's server over its life: the current process, and the crashes so far.
struct Slot {
    command: Vec<String>,
    languages: BTreeSet<String>,
    server: Option<Arc<ServerProcess>>,
    restarts: u32,
    /// The pid whose exit was last counted.
    counted: Option<u32>,
    /// Why it could not be started, and when: tried again once [`LspLimits::start_retry`] has
    /// passed.
    failed: Option<(String, Instant)>,
    stopped: bool,
    /// What its processes may still write to the log, shared by its restarts: a noisy server
    /// that crashes does not get a fresh budget each time, and cannot fill the run's log alone.
    log_budget: Arc<std::sync::atomic::AtomicU64>,
    /// Since when it has been starting, across its restarts (seen starting at a question, and
    /// not running since, neither seen by a question nor ended after running): past
    /// [`LspLimits::late_after`] its set answers without it.
    starting_since: Option<Instant>,
    /// Counted up by its processes each time they check open documents again, across its
    /// restarts ([`Lsp::rechecks_for`]).
    rechecks: Arc<AtomicU64>,
}

struct Servers {
    /// Language id → the commands run together for it (empty: nothing installed).
    by_language: HashMap<String, Resolved>,
    /// By command: the order in which a file's diagnostics from several servers are merged.
    slots: BTreeMap<Vec<String>, Slot>,
}

impl Servers {
    /// Every server process there is now (of every language).
    fn processes(&self) -> Vec<Arc<ServerProcess>> {
        self.slots
            .values()
            .filter_map(|s| s.server.clone())
            .collect()
    }
}

/// A language's set of servers as [`ServerTable::resolve`] found it on `PATH`, and when.
struct Resolved {
    commands: Vec<Vec<String>>,
    at: Instant,
}

/// One server of a language's set, as a call finds it.
struct Member {
    command: Vec<String>,
    /// `None` when it could not be started.
    server: Option<Arc<ServerProcess>>,
    /// Why it cannot run, when it was given up.
    failed: Option<String>,
    /// Its slot's [`Slot::starting_since`].
    starting_since: Option<Instant>,
    /// Whether its server, once exited, is started again at a question after its backoff (its
    /// restarts not used up, not failing to start, not stopped); if not, it is given up.
    restarts_left: bool,
}

impl Member {
    /// What a call says of this server when its answer is missing.
    fn down(&self, why: DownReason) -> Down {
        Down {
            server: table::command_line(&self.command),
            why,
        }
    }
}

struct Inner {
    config: LspConfig,
    on_change: OnChange,
    /// Told of each server that ends unasked ([`Lsp::on_exit`]).
    on_exit: Arc<std::sync::OnceLock<server::OnExit>>,
    log: log::Log,
    servers: Arc<Mutex<Servers>>,
    shut: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(2));
    }
}

/// The language servers of a workspace. Cloning gives another handle to the same servers; they are shut down
/// by [`Lsp::shutdown`] or when the last handle is dropped (an `on_change` that holds a handle keeps them up
/// until `shutdown`).
#[derive(Clone)]
pub struct Lsp {
    inner: Arc<Inner>,
}

impl fmt::Debug for Lsp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lsp")
            .field("status", &self.status())
            .finish()
    }
}

impl Lsp {
    /// A client for `config`; `on_change` is called whenever a file's diagnostics change (those of
    /// every server that has some for it, merged, as [`Lsp::diagnostics`] answers them): from the thread
    /// reading the server's output (published diagnostics), or from the thread calling
    /// [`Lsp::diagnostics`] (pulled ones), usually before that call answers. When two servers change
    /// a file at once, its list may be told again: the last one told is what they hold after both
    /// changes. A file whose diagnostics
    /// the client forgets is told with an empty list, as if its server had published one: when it is
    /// closed in its server to make room for another ([`LspLimits::max_open_files`]; from the thread
    /// handing that one over: [`Lsp::diagnostics`], [`Lsp::sync`], [`Lsp::format`]), when they
    /// are dropped to keep within the bounds on what is held, when a text of it too long to send is
    /// refused (its older text is closed in its server), and when their server is gone
    /// (crashed, found hung and killed, or stopped for misbehaving): once for each file it had
    /// diagnostics for, from the thread that reaps it, after the changes it reported before and
    /// before a server is started in its place. A server stopped by [`Lsp::shutdown`] (or the
    /// last handle dropped) keeps its diagnostics, and nothing is told of them. It holds no lock of
    /// the client and may call it, but should return quickly (hand the change to a channel): while
    /// it runs, that server's output is not read. A panic in it is logged and ignored. Starts nothing.
    pub fn new(
        config: LspConfig,
        on_change: impl Fn(FileDiagnostics) + Send + Sync + 'static,
    ) -> Lsp {
        let log = log::Log::new(config.log.clone());
        let servers = Arc::new(Mutex::new(Servers {
            by_language: HashMap::new(),
            slots: BTreeMap::new(),
        }));
        // A change from one server is told with what the others hold for the file: a client
        // keeping the latest list per file would otherwise keep only the last server's.
        let weak = Arc::downgrade(&servers);
        let latest = merge::Latest::default();
        let merged: OnChange = Arc::new(move |change: FileDiagnostics| {
            let uri = &change.uri;
            if !latest.tell(uri, || merge::merged(&weak, uri), &on_change) {
                on_change(change);
            }
        });
        Lsp {
            inner: Arc::new(Inner {
                config,
                on_change: merged,
                on_exit: Arc::default(),
                log,
                servers,
                shut: AtomicBool::new(false),
            }),
        }
    }

    /// Sets what is told when a server process ends without being asked to ([`ServerExit`]; a
    /// stop by [`Lsp::shutdown`] is not told): from the thread that reaps it, after its
    /// diagnostics are told gone. For saying so to the user: it should return quickly, as
    /// `on_change` should. Set once: a second call changes nothing and returns `false`.
    ///
    /// ```
    /// use claude_ide_bridge_lsp::{Lsp, LspConfig};
    /// let lsp = Lsp::new(LspConfig::default(), |_| {});
    /// assert!(lsp.on_exit(|gone| eprintln!("{} ended: {}", gone.command.join(" "), gone.status)));
    /// assert!(!lsp.on_exit(|_| {}));
    /// ```
    pub fn on_exit(&self, f: impl Fn(&ServerExit) + Send + Sync + 'static) -> bool {
        self.inner.on_exit.set(Arc::new(f)).is_ok()
    }

    /// The configuration.
    pub fn config(&self) -> &LspConfig {
        &self.inner.config
    }

    /// The deadline of a `getDiagnostics` call starting now: now plus [`LspConfig::diagnostics_wait`].
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.inner.config.diagnostics_wait
    }

    /// The language of a file, by its extension (`None`: no server serves it).
    pub fn language_for(&self, path: &Path) -> Option<&str> {
        self.inner.config.servers.language_for(path)
    }

    /// Makes each server of `path`'s set (an absolute path) have `text`, and answers the diagnostics
    /// computed for that text, merged in the order of the servers' commands: pulled where a server offers
    /// pulls, else the ones it publishes for that version. The servers are asked at once, each on its own
    /// thread; past `deadline`, a server's part is what is known (possibly for an older text, possibly
    /// nothing), and a server that is down adds what is known of it (nothing once it crashed) while the
    /// others answer. The first call of a
    /// language starts its servers and may wait up to [`LspConfig::start_wait`] for them, then up to
    /// [`LspConfig::diagnostics_wait`] for the diagnostics. A file of no known language, or whose servers are
    /// missing or down, gets what is known (usually nothing) at once; so does a text longer than half of
    /// [`LspLimits::max_outbox_bytes`], which is not sent (the log says so), without starting or
    /// waiting for a server.
    pub fn diagnostics(&self, path: &Path, text: &str, deadline: Instant) -> Vec<Diagnostic> {
        self.check(path, text, deadline).diagnostics
    }

    /// [`Lsp::diagnostics`], saying whether they are for `text` ([`Checked::fresh`]; a caller
    /// that remembers answers keeps only fresh ones) and which servers of the set did not answer
    /// ([`Checked::down`]).
    pub fn check(&self, path: &Path, text: &str, deadline: Instant) -> Checked {
        self.check_until(path, text, deadline, false)
    }

    /// [`Lsp::check`], never past `deadline`: a server still starting then (the first call of a
    /// language, or one that restarts a server that crashed) makes the answer late
    /// ([`Checked::fresh`] false) at `deadline`, however long [`LspConfig::start_wait`] is. For a
    /// caller bound by its client's own timeout, to which a late answer is worth more than none;
    /// a text the server checks again because a file it includes changed is waited for at most
    /// 150 ms, then answered [`Checked::from_before`].
    pub fn check_by(&self, path: &Path, text: &str, deadline: Instant) -> Checked {
        self.check_until(path, text, deadline, true)
    }

    /// [`Lsp::check`]; with `hard`, [`Lsp::check_by`].
    fn check_until(&self, path: &Path, text: &str, deadline: Instant, hard: bool) -> Checked {
        let text = text::without_bom(text);
        let Some((language, key)) = self.file(path) else {
            return Checked::stale(Vec::new());
        };
        if self.refuse(language, &key, text).is_some() {
            // Final: no server will ever be sent this text (README: "[] at once"; it was "not
            // known yet ... ask again shortly", for good). What is still known of the file is
            // for another text.
            return Checked {
                diagnostics: Vec::new(),
                fresh: true,
                from_before: false,
                down: Vec::new(),
            };
        }
        let mut members = self.inner.servers_for(language);
        if members.is_empty() {
            return Checked::stale(self.known_for(&key));
        }
        members.sort_by(|a, b| a.command.cmp(&b.command));
        // One copy of the text for all of them.
        let text = rpc::SharedText::new(text);
        let ask = |member: &Member| {
            self.inner
                .ask(member, &key, language, &text, deadline, hard)
        };
        let answers: Vec<(Checked, bool)> = if let [one] = members.as_slice() {
            vec![ask(one)]
        } else {
            // Each server on its own thread: the slowest sets the time, not their sum.
            std::thread::scope(|scope| {
                let asking: Vec<_> = members
                    .iter()
                    .map(|m| {
                        std::thread::Builder::new()
                            .name("lsp-ask".into())
                            .spawn_scoped(scope, move || ask(m))
                            .map_err(|_| m)
                    })
                    .collect();
                asking
                    .into_iter()
                    .map(|a| match a {
                        Ok(thread) => thread
                            .join()
                            .unwrap_or_else(|_| (Checked::stale(Vec::new()), false)),
                        // No thread to be had: asked on this one.
                        Err(m) => ask(m),
                    })
                    .collect()
            })
        };
        // From before a header's change when one server's is and each other's is fresh (or not
        // awaited).
        let from_before = answers.iter().any(|(c, awaited)| c.from_before && *awaited)
            && (answers.iter()).all(|(c, awaited)| c.fresh || c.from_before || !awaited);
        let mut merged = Checked {
            diagnostics: Vec::new(),
            fresh: answers.iter().any(|(c, _)| c.fresh),
            from_before: false,
            down: Vec::new(),
        };
        for (checked, awaited) in answers {
            merged.fresh &= checked.fresh || !awaited;
            merged.diagnostics.extend(checked.diagnostics);
            merged.down.extend(checked.down);
        }
        merged.from_before = from_before && !merged.fresh;
        merged
    }

    /// Starts the servers of `language` (a language id such as `python`) that are not running, without
    /// waiting: for a program that would rather start servers when a client connects than on the first
    /// question. False when no server of that language can run.
    pub fn start(&self, language: &str) -> bool {
        let members = self.inner.servers_for(language);
        let mut any = false;
        for member in &members {
            any |= member
                .server
                .as_ref()
                .is_some_and(|s| !matches!(s.phase(), Phase::Exited(_)));
        }
        any
    }

    /// Hands `text` of `path`, which the file now holds (after a `writeFile`, or a format written),
    /// to each server of its set now, without waiting, so that the next [`Lsp::diagnostics`] finds
    /// the servers already at work; those that check on save are told it is saved. Starts the
    /// servers if needed; the text is sent once each is initialized (not at all when it is too long,
    /// see [`LspLimits::max_outbox_bytes`]: then no server is started).
    pub fn sync(&self, path: &Path, text: &str) {
        self.sync_as(path, text, state::Disk::Written);
    }

    /// [`Lsp::sync`] of a text another process is about to write (claude, after an accepted
    /// `openDiff`): a server that checks the file on disk when told it is saved (rust-analyzer's
    /// `cargo check`) would check the old text, so it is told only once a later call with this
    /// text ([`Lsp::diagnostics`], [`Lsp::check`], [`Lsp::sync`]) finds the file holding it.
    pub fn sync_ahead(&self, path: &Path, text: &str) {
        self.sync_as(path, text, state::Disk::Ahead);
    }

    fn sync_as(&self, path: &Path, text: &str, disk: state::Disk) {
        let text = text::without_bom(text);
        let Some((language, key)) = self.file(path) else {
            return;
        };
        if self.refuse(language, &key, text).is_some() {
            return;
        }
        let text = rpc::SharedText::new(text);
        for member in self.inner.servers_for(language) {
            if let Some(server) = member.server {
                server.sync(&key, language, &text, disk);
            }
        }
    }

    /// Every file with diagnostics known, from every server (a file's from several servers merged,
    /// in the order of their commands).
    pub fn known(&self) -> Vec<FileDiagnostics> {
        let processes = self.inner.servers().processes();
        let mut all: BTreeMap<String, Vec<Diagnostic>> = BTreeMap::new();
        for file in processes.iter().flat_map(|s| s.all_known()) {
            all.entry(file.uri).or_default().extend(file.diagnostics);
        }
        all.into_iter()
            .map(|(uri, diagnostics)| FileDiagnostics { uri, diagnostics })
            .collect()
    }

    /// Which of `paths` a running server has open (handed over, not closed since: a server keeps
    /// up to [`LspLimits::max_open_files`]), in their order. Starts no server.
    ///
    /// ```no_run
    /// # fn f(lsp: &claude_ide_bridge_lsp::Lsp) {
    /// let open = lsp.open_of(&[std::path::PathBuf::from("/ws/a.py")]);
    /// # }
    /// ```
    pub fn open_of(&self, paths: &[PathBuf]) -> Vec<PathBuf> {
        let processes = self.inner.servers().processes();
        paths
            .iter()
            .filter(|p| {
                self.file(p)
                    .is_some_and(|(_, key)| processes.iter().any(|s| s.is_open(&key)))
            })
            .cloned()
            .collect()
    }

    /// `path` is no longer a file (deleted, or renamed away): each running server closes it if
    /// it has it open, and the diagnostics held for it are forgotten (`on_change` is told it has
    /// none). A server keeps up to [`LspLimits::max_open_files`] files open, used longest ago
    /// closed first: a deleted file otherwise held its place (clangd keeps a precompiled preamble
    /// of several MB in the temporary folder for each) and was answered in [`Lsp::known`] until
    /// that many others had come. Starts no server.
    pub fn file_gone(&self, path: &Path) {
        let Some((_, key)) = self.file(path) else {
            return;
        };
        // Not under the servers' lock: each tells `on_change`.
        let processes = self.inner.servers().processes();
        for server in processes {
            server.file_gone(&key);
        }
    }

    /// What the running servers watch on disk (the globs of their
    /// `workspace/didChangeWatchedFiles` registrations): the files whose changes
    /// [`Lsp::files_changed`] tells them of. Servers read a file they do not have open from disk,
    /// once, and keep what they read (pyright checks an importer against it) until told it
    /// changed. A server that leaves the documents including a file as they were (clangd:
    /// [`table::leaves_dependents_unchecked`]) watches the files with a header's extension
    /// ([`table::may_be_included`]) this way, without registering them. Starts no server.
    ///
    /// ```no_run
    /// # fn f(lsp: &claude_ide_bridge_lsp::Lsp) {
    /// let watched = lsp.watched();
    /// if watched.matches(std::path::Path::new("/ws/pyproject.toml")) {
    ///     // Look at it on disk before the next question.
    /// }
    /// # }
    /// ```
    pub fn watched(&self) -> Watched {
        let mut watched = Watched::default();
        let processes = self.inner.servers().processes();
        for server in processes {
            let (sets, started) = server.watched();
            watched.add(sets, started);
        }
        watched
    }

    /// Files found changed on disk, each with how: each running server is told of those its
    /// globs watch for that change (`workspace/didChangeWatchedFiles`), without waiting; a
    /// server still starting is told nothing (it reads the disk as it starts). A server that
    /// leaves the documents including a file as they were has its open documents checked again
    /// when a header changed ([`Lsp::rechecks`]). Paths that are not UTF-8 are passed over.
    /// Starts no server.
    ///
    /// ```no_run
    /// # fn f(lsp: &claude_ide_bridge_lsp::Lsp) {
    /// use claude_ide_bridge_lsp::FileChange;
    /// lsp.files_changed(&[("/ws/b.py".into(), FileChange::Changed)]);
    /// # }
    /// ```
    pub fn files_changed(&self, changes: &[(PathBuf, FileChange)]) {
        let keyed: Vec<(String, FileChange)> = changes
            .iter()
            .filter_map(|(p, c)| Some((sys::key_of(p.to_str()?), *c)))
            .collect();
        if keyed.is_empty() {
            return;
        }
        // Not under the servers' lock: each writes to its server.
        let processes = self.inner.servers().processes();
        for server in processes {
            server.files_changed(&keyed);
        }
    }

    /// How many times a server checked its open documents again, or marked them to be, because
    /// a file they may include changed on disk ([`LspLimits::max_rechecks`]; clangd, which
    /// leaves them as they were: [`table::leaves_dependents_unchecked`]). It only grows: a
    /// caller remembering an answer for a file's text takes it as out of date once this moved,
    /// since the file's diagnostics may have changed with another file ([`Lsp::rechecks_for`]:
    /// of the servers of one file's language).
    pub fn rechecks(&self) -> u64 {
        self.rechecks_of(|_| true)
    }

    /// [`Lsp::rechecks`] of the servers of `path`'s language alone: what may change the
    /// diagnostics of that file with another file. A header changed under clangd says nothing
    /// of a Python file's, whose answer remembered for its text stands. 0 for a file of no
    /// language; starts no server.
    ///
    /// ```no_run
    /// # fn f(lsp: &claude_ide_bridge_lsp::Lsp) {
    /// let path = std::path::Path::new("/ws/main.c");
    /// let since = lsp.rechecks_for(path);
    /// // ... ask, remember the answer ...
    /// let still_good = lsp.rechecks_for(path) == since;
    /// # }
    /// ```
    pub fn rechecks_for(&self, path: &Path) -> u64 {
        let Some(language) = self.language_for(path) else {
            return 0;
        };
        self.rechecks_of(|languages| languages.contains(language))
    }

    /// The sum of the recheck counts of the server slots whose languages `serves`.
    fn rechecks_of(&self, serves: impl Fn(&BTreeSet<String>) -> bool) -> u64 {
        let servers = self.inner.servers();
        (servers.slots.values())
            .filter(|s| serves(&s.languages))
            .map(|s| s.rechecks.load(Ordering::Relaxed))
            .sum()
    }

    /// Waits, at most until `deadline`, for the answers of the documents the servers checked
    /// again because a file they may include changed ([`Lsp::rechecks`]): for an answer listing
    /// every file's diagnostics ([`Lsp::known`]) that holds theirs for the new header rather
    /// than the old. Returns at once when none waits. Starts no server.
    pub fn await_rechecks(&self, deadline: Instant) {
        let processes = self.inner.servers().processes();
        for server in processes {
            server.await_rechecks(deadline);
        }
    }

    fn known_for(&self, key: &str) -> Vec<Diagnostic> {
        known_of(&self.inner.servers().processes(), key)
    }

    /// Formats `text` of `path` with `textDocument/formatting` (options: `tabSize` from the
    /// config, `insertSpaces: true`) and returns the formatted text. The server asked is the last of
    /// the file's set whose capabilities include formatting (for Python, `ruff server` rather than
    /// pylsp): the servers are looked at from the last, each waited for while it starts.
    /// `Ok(None)` when it cannot be formatted this way: no language, no server, no server of the set
    /// with formatting, or a text too long to send ([`LspLimits::max_outbox_bytes`]; answered at once,
    /// without starting or waiting for a server). A server of the set that is down or still starting,
    /// when no other formats, is the error (it may be the one that formats).
    pub fn format(
        &self,
        path: &Path,
        text: &str,
        deadline: Instant,
    ) -> Result<Option<String>, LspError> {
        // Formatted without its byte-order mark, as the servers have the file, which it keeps.
        let body = text::without_bom(text);
        let formatted = self.format_body(path, body, deadline)?;
        Ok(formatted.map(|f| match body.len() == text.len() {
            true => f,
            false => format!("\u{feff}{f}"),
        }))
    }

    /// [`Lsp::format`] of a text without a byte-order mark.
    fn format_body(
        &self,
        path: &Path,
        text: &str,
        deadline: Instant,
    ) -> Result<Option<String>, LspError> {
        let Some((language, key)) = self.file(path) else {
            return Ok(None);
        };
        if self.refuse(language, &key, text).is_some() {
            return Ok(None);
        }
        let mut unknown = None;
        for member in self.inner.servers_for(language).iter().rev() {
            let Some(server) = &member.server else {
                let why = member.failed.as_deref().unwrap_or("could not be started");
                unknown.get_or_insert(LspError::Exited(
                    member
                        .down(DownReason::NotRunning(why.to_owned()))
                        .to_string(),
                ));
                continue;
            };
            // After a start, the answer has the diagnostics wait from then (the deadline, passed
            // while it started, made each first format of a cold server "no answer in time").
            let Some(by) = self.inner.await_start(server, deadline, false) else {
                unknown.get_or_insert(match server.phase() {
                    Phase::Exited(why) => {
                        LspError::Exited(member.down(DownReason::NotRunning(why)).to_string())
                    }
                    _ => LspError::Timeout,
                });
                continue;
            };
            if server.can_format() {
                return self.format_with(server, language, &key, text, by);
            }
        }
        unknown.map_or(Ok(None), Err)
    }

    /// [`Lsp::format`] with `server`, which formats.
    fn format_with(
        &self,
        server: &ServerProcess,
        language: &str,
        key: &str,
        text: &str,
        deadline: Instant,
    ) -> Result<Option<String>, LspError> {
        let Some(uri) = rpc::uri(key) else {
            return Ok(None);
        };
        let params = lsp_types::DocumentFormattingParams {
            text_document: lsp_types::TextDocumentIdentifier { uri },
            options: lsp_types::FormattingOptions {
                tab_size: self.inner.config.tab_size,
                insert_spaces: true,
                ..Default::default()
            },
            work_done_progress_params: Default::default(),
        };
        // The text and the request in one go: another sync of the file (an accepted diff) between
        // them would have the edits computed for its text and applied to this one.
        let sync = |state: &mut state::State| state.sync(key, language, text);
        match server.request_after::<lsp_types::request::Formatting>(sync, params, deadline) {
            Ok(edits) => {
                let edits = edits.unwrap_or_default();
                text::apply_edits(text, &edits)
                    .map(Some)
                    .map_err(LspError::BadAnswer)
            }
            // Too long to send (the log says so).
            Err(RequestError::NotSent) => Ok(None),
            Err(RequestError::Timeout) => Err(LspError::Timeout),
            Err(RequestError::Exited(why)) => Err(LspError::Exited(why)),
            Err(RequestError::BadAnswer(why)) => Err(LspError::BadAnswer(why)),
            Err(RequestError::Server(e)) => Err(LspError::Server {
                code: e.code,
                message: e.message,
            }),
        }
    }

    /// The servers asked for so far (and the languages with none installed).
    pub fn status(&self) -> Vec<ServerStatus> {
        let servers = self.inner.servers();
        let mut out: Vec<ServerStatus> = servers
            .by_language
            .iter()
            .filter(|(_, r)| r.commands.is_empty())
            .map(|(language, _)| ServerStatus {
                languages: vec![language.clone()],
                command: None,
                state: ServerState::Missing,
                pid: None,
                restarts: 0,
            })
            .collect();
        for slot in servers.slots.values() {
            let phase = slot.server.as_ref().map(|s| s.phase());
            let state = if slot.stopped {
                ServerState::Stopped
            } else if let Some((why, _)) = &slot.failed {
                ServerState::Failed(why.clone())
            } else {
                match phase {
                    None | Some(Phase::Starting) => ServerState::Starting,
                    Some(Phase::Running) => ServerState::Running,
                    Some(Phase::Exited(why))
                        if slot.restarts >= self.inner.config.limits.max_restarts =>
                    {
                        ServerState::Failed(format!(
                            "{why}; gave up after {} restarts",
                            slot.restarts
                        ))
                    }
                    Some(Phase::Exited(why)) => ServerState::Crashed(why),
                }
            };
            let pid = match &state {
                ServerState::Starting | ServerState::Running => slot.server.as_ref().map(|s| s.pid),
                _ => None,
            };
            out.push(ServerStatus {
                languages: slot.languages.iter().cloned().collect(),
                command: Some(slot.command.clone()),
                state,
                pid,
                restarts: slot.restarts,
            });
        }
        out.sort_by(|a, b| a.languages.cmp(&b.languages));
        out
    }

    /// Stops every server: `shutdown` and `exit`, then a kill once `grace` has passed; returns when they are
    /// gone (at most about `grace` plus the kill). Idempotent; nothing starts afterwards. Their
    /// diagnostics are kept ([`Lsp::known`] still answers them): `on_change` is not told of them.
    pub fn shutdown(&self, grace: Duration) {
        self.inner.shutdown(grace);
    }

    /// Refuses a text too long to send ([`LspLimits::max_outbox_bytes`]) before any server is
    /// started or waited for: the log says so, and the servers of the language that were started
    /// close the file's older text (forgetting what they said about it). `None` when the text may
    /// be sent; else the file's diagnostics still known.
    fn refuse(&self, language: &str, key: &str, text: &str) -> Option<Vec<Diagnostic>> {
        let line = state::too_long(&self.inner.config.limits, key, text)?;
        let started = self.inner.current_servers(language);
        if started.is_empty() {
            self.inner.log.line(&line);
            return Some(self.known_for(key));
        }
        for server in &started {
            // Refused there too, said in that server's log.
            server.sync(
                key,
                language,
                &rpc::SharedText::new(text),
                state::Disk::Written,
            );
        }
        Some(known_of(&started, key))
    }

    /// The language of `path` and the key the servers know it by (its path as a string, in the
    /// form a server's URI for it maps back to: `sys::key_of`).
    fn file<'a>(&'a self, path: &Path) -> Option<(&'a str, String)> {
        let language = self.language_for(path)?;
        let key = sys::key_of(path.to_str()?);
        Some((language, key))
    }
}

impl Inner {
    fn servers(&self) -> MutexGuard<'_, Servers> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `server` to be initialized if it is starting: until `deadline` or the start wait, whichever
    /// is later (with `hard`, until `deadline` only). Returns the deadline for the answer (extended by the
    /// diagnostics wait after a start, unless `hard`), or `None` when the server is not running.
    fn await_start(
        &self,
        server: &ServerProcess,
        deadline: Instant,
        hard: bool,
    ) -> Option<Instant> {
        match server.phase() {
            Phase::Running => Some(deadline),
            Phase::Exited(_) => None,
            Phase::Starting if hard => server.wait_ready(deadline).then_some(deadline),
            Phase::Starting => {
                let ready_by = deadline.max(server.started + self.config.start_wait);
                server
                    .wait_ready(ready_by)
                    .then(|| deadline.max(Instant::now() + self.config.diagnostics_wait))
            }
        }
    }

    /// The servers last started for `language`, whatever their phase, without starting one; none
    /// once the client is shut down.
    fn current_servers(&self, language: &str) -> Vec<Arc<ServerProcess>> {
        if self.shut.load(Ordering::SeqCst) {
            return Vec::new();
        }
        let servers = self.servers();
        let Some(resolved) = servers.by_language.get(language) else {
            return Vec::new();
        };
        resolved
            .commands
            .iter()
            .filter_map(|c| servers.slots.get(c)?.server.clone())
            .collect()
    }

    /// The servers of `language`'s set, in the table's order (see [`ServerTable::resolve`]):
    /// none once the client is shut down or when nothing is installed.
    fn servers_for(&self, language: &str) -> Vec<Member> {
        if self.shut.load(Ordering::SeqCst) {
            return Vec::new();
        }
        let mut servers = self.servers();
        // Again under the lock: a shutdown that began meanwhile has collected the servers to stop
        // (it sets the flag before taking the lock), and would miss one started now.
        if self.shut.load(Ordering::SeqCst) {
            return Vec::new();
        }
        // Looked up on `PATH` at the first need, and again while none is found (at most every
        // `resolve_again`): a server installed while the bridge runs is used.
        let now = Instant::now();
        let stale = servers.by_language.get(language).is_none_or(|r| {
            r.commands.is_empty() && now >= r.at + self.config.limits.resolve_again
        });
        if stale {
            let commands = self.config.servers.resolve(language);
            if !commands.is_empty() && servers.by_language.contains_key(language) {
                self.log.line(&format!(
                    "{language}: found {} on PATH now",
                    commands
                        .iter()
                        .map(|c| table::command_line(c))
                        .collect::<Vec<_>>()
                        .join(" + ")
                ));
            }
            servers
                .by_language
                .insert(language.to_owned(), Resolved { commands, at: now });
        }
        let commands = servers.by_language[language].commands.clone();
        commands
            .into_iter()
            .map(|command| {
                let server = self.server_of(&mut servers, &command, language);
                let (mut failed, mut starting_since, mut restarts_left) = (None, None, false);
                if let Some(slot) = servers.slots.get_mut(&command) {
                    failed = slot.failed.as_ref().map(|(why, _)| why.clone());
                    match server.as_ref().map(|s| (s.phase(), s.started)) {
                        Some((Phase::Running, _)) => slot.starting_since = None,
                        Some((Phase::Starting, started)) => {
                            slot.starting_since.get_or_insert(started);
                        }
                        // Exited (waiting to start again), or not to be started: as it was.
                        _ => {}
                    }
                    starting_since = slot.starting_since;
                    restarts_left = !slot.stopped
                        && slot.failed.is_none()
                        && slot.restarts < self.config.limits.max_restarts;
                }
                Member {
                    command,
                    server,
                    failed,
                    starting_since,
                    restarts_left,
                }
            })
            .collect()
    }

    /// Asks `member` for the diagnostics of `text`: its answer, and whether its part is awaited
    /// (it runs or starts, or is started again; a server that is down is named in
    /// [`Checked::down`], and does not make the others' answer stale). With
    /// `hard`, a start is not waited for past `deadline` ([`Lsp::check_by`]).
    fn ask(
        &self,
        member: &Member,
        key: &str,
        language: &str,
        text: &rpc::SharedText<'_>,
        deadline: Instant,
        hard: bool,
    ) -> (Checked, bool) {
        let Some(server) = &member.server else {
            let why = member.failed.as_deref().unwrap_or("could not be started");
            let mut checked = Checked::stale(Vec::new());
            checked
                .down
                .push(member.down(DownReason::NotRunning(why.to_owned())));
            return (checked, false);
        };
        // Without an answer for long (starting, across its restarts, or owing work with nothing
        // said: hung, or crashing at each start): left out, as a down server is, so that the
        // others' diagnostics are given; named in the answer. (It is killed as hung later, at
        // `hang_timeout`, or given up after its restarts.) Only past `late_after`: a server
        // slower than its set's others is waited for, so that its part is never missing from an
        // answer that may stand for a baseline.
        let late_after = self.config.limits.late_after;
        let late = |since: Option<Instant>| {
            since.is_some_and(|since| Instant::now() >= since + late_after)
        };
        let left_out = || {
            let mut checked = Checked::stale(Vec::new());
            checked
                .down
                .push(member.down(DownReason::LeftOut(late_after)));
            (checked, false)
        };
        if matches!(server.phase(), Phase::Starting) && late(member.starting_since) {
            return left_out();
        }
        // Already silent for long (stopped, deadlocked; work it was given, given up or not, still
        // unanswered): given the text, not waited for. Each question of its language waited for
        // it to the end of its deadline, longer than claude's baseline waits.
        let silent = matches!(server.phase(), Phase::Running) && late(server.owing_since());
        let deadline = if silent { Instant::now() } else { deadline };
        let (mut checked, running) = match self.await_start(server, deadline, hard) {
            Some(deadline) => (
                server.diagnostics(key, language, text, deadline, hard),
                true,
            ),
            // Still starting past the start wait (`deadline`, with `hard`): late, not down (its `initialize` timeout ends
            // it): what the set answers is not known for this text without it.
            None => (
                Checked::stale(server.known(key)),
                matches!(server.phase(), Phase::Starting),
            ),
        };
        // (Asked first: a request given up at the last deadline owes nothing until asked again.)
        if !checked.fresh && matches!(server.phase(), Phase::Running) && late(server.owing_since())
        {
            return left_out();
        }
        let phase = server.phase();
        let awaited = match &phase {
            // What it held is for a text it may not have checked (it exits while checking this
            // one, and its lists are forgotten only once it is reaped). Given up on: left out,
            // as a server that could not start is. To be started again: awaited, as a starting
            // one is (a crashed pyright left out of the baseline had its errors, unchanged,
            // taken as new once it was back).
            Phase::Exited(why) => {
                checked.diagnostics.clear();
                checked.fresh = false;
                checked.from_before = false;
                let why = format!("not running ({why})");
                // (Its restarts were counted before a stop that ended it.)
                let stopping = self.shut.load(Ordering::SeqCst);
                checked.down.push(member.down(match member.restarts_left {
                    _ if stopping => DownReason::Stopping,
                    true => DownReason::Restarting(why),
                    false => DownReason::NotRunning(why),
                }));
                member.restarts_left && !stopping
            }
            Phase::Starting => {
                checked.down.push(member.down(DownReason::Starting));
                running
            }
            Phase::Running => {
                if !checked.fresh {
                    checked.down.push(member.down(DownReason::Late));
                }
                running
            }
        };
        (checked, awaited)
    }

    /// The server of `command` (serving `language`, among others maybe): the running one, or a new one
    /// when none has started yet or the last one crashed and its backoff has passed (a bounded number
    /// of times). `None` when it could not be started.
    fn server_of(
        &self,
        servers: &mut Servers,
        command: &[String],
        language: &str,
    ) -> Option<Arc<ServerProcess>> {
        let command = command.to_vec();
        let limits = &self.config.limits;
        let slot = servers
            .slots
            .entry(command.clone())
            .or_insert_with(|| Slot {
                command: command.clone(),
                languages: BTreeSet::new(),
                server: None,
                restarts: 0,
                counted: None,
                failed: None,
                stopped: false,
                log_budget: Arc::new(limits.max_log_bytes.into()),
                starting_since: None,
                rechecks: Arc::default(),
            });
        slot.languages.insert(language.to_owned());
        if slot.stopped {
            return slot.server.clone();
        }
        let now = Instant::now();
        if let Some((why, at)) = &slot.failed {
            if now < *at + limits.start_retry {
                return slot.server.clone();
            }
            self.log.line(&format!("trying again: {why}"));
            slot.failed = None;
        } else if let Some(server) = &slot.server {
            let Some(exited_at) = server.gone_at() else {
                return Some(server.clone());
            };
            if slot.counted != Some(server.pid) {
                // One that ran ends the slot's time starting: the start in its place is a new
                // one (seen running by no question, it was never cleared).
                if server.ran() {
                    slot.starting_since = None;
                }
                // A server that ran well for a while before crashing starts a fresh series of restarts.
                slot.restarts = restarts_counted(slot.restarts, server.started, exited_at);
                slot.counted = Some(server.pid);
            }
            if slot.restarts >= limits.max_restarts {
                // Given up: down for a while, then a fresh series of restarts.
                if now < exited_at + limits.given_up_for {
                    return Some(server.clone());
                }
                self.log.line(&format!(
                    "starting {} again, {:?} after giving up on it",
                    table::command_line(&command),
                    limits.given_up_for
                ));
                slot.restarts = 0;
            }
            let backoff = limits
                .restart_backoff
                .saturating_mul(1 << slot.restarts.min(16));
            if now < exited_at + backoff {
                return Some(server.clone());
            }
            slot.restarts += 1;
            self.log.line(&format!(
                "restarting {} (restart {} of at most {})",
                table::command_line(&command),
                slot.restarts,
                limits.max_restarts
            ));
        }
        let folders = self
            .config
            .workspace_folders
            .iter()
            .filter_map(|f| workspace_folder(f))
            .collect();
        let launch = server::Launch {
            folders,
            cwd: self.config.workspace_folders.first().map(PathBuf::as_path),
            limits,
            log: self.log.with_budget(slot.log_budget.clone()),
            trace: self.config.trace,
            on_change: self.on_change.clone(),
            rechecks: slot.rechecks.clone(),
            on_exit: self.on_exit.clone(),
            languages: slot.languages.iter().cloned().collect(),
            restarts: slot.restarts,
        };
        match ServerProcess::start(&command, launch) {
            Ok(server) => {
                let server = Arc::new(server);
                slot.server = Some(server.clone());
                Some(server)
            }
            Err(e) => {
                let why = format!("cannot start {}: {e}", table::command_line(&command));
                self.log.line(&why);
                slot.failed = Some((why, Instant::now()));
                slot.server.clone()
            }
        }
    }

    fn shutdown(&self, grace: Duration) {
        // Every server of every set.
        self.shut.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + grace;
        let running: Vec<Arc<ServerProcess>> = {
            let mut servers = self.servers();
            servers
                .slots
                .values_mut()
                .filter(|slot| !slot.stopped)
                .filter_map(|slot| {
                    slot.stopped = true;
                    slot.server.clone()
                })
                .collect()
        };
        std::thread::scope(|scope| {
            for server in &running {
                scope.spawn(move || server.stop(deadline));
            }
        });
    }
}

fn workspace_folder(path: &Path) -> Option<lsp_types::WorkspaceFolder> {
    let text = path.to_str()?;
    let uri = claude_ide_bridge::file_uri(text).parse().ok()?;
    let name = path
        .file_name()
        .map_or_else(|| text.to_owned(), |n| n.to_string_lossy().into_owned());
    Some(lsp_types::WorkspaceFolder { uri, name })
}

#[cfg(test)]
mod tests {
    /// The handle the program shares between its threads.
    #[test]
    fn the_handle_is_clone_send_sync() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<super::Lsp>();
    }
}
