//! Diagnostics from language servers when no editor reports them (`serve`, `run`), and for the
//! files an editor does not report in `--stdio`.
//!
//! `getDiagnostics` with a `uri` reads the file (bounded, inside the workspace) and asks its
//! servers for the diagnostics of exactly that text ([`Lsp::check`], which waits a bounded time
//! and says whether the answer is of that text and which servers were down; [`Lsp::check_by`]
//! for a baseline, bounded by the client's wait); without a `uri` it first refreshes the files claude changed through the bridge or asked
//! about (the client may write a file itself: with the diff decided in its own prompt, or in
//! accept-edits mode), then answers every file with known diagnostics. Before either, the files
//! the servers have open that changed on disk since they were read for them are handed over
//! again ([`LanguageServers::refresh_open`]). Both run as
//! [`jobs`](super::jobs): the host thread never waits for a server. An accepted `openDiff` and
//! `writeFile` hand the new text to the server at once ([`LanguageServers::changed`]), so the
//! client's check after an edit finds the server already at work. `reformat_file` goes through
//! the server's formatting when it has one.
//!
//! What the real client does with these answers (its own checks around every edit, and their
//! time bounds) is in docs/e2e.md, "What the real client does with diagnostics".

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use claude_ide_bridge::{file_uri, uri_to_path, Diagnostic, DiagnosticsChanged, FileDiagnostics};
use claude_ide_bridge::{Asker, CallId, Notification, Target, ToolResult};
use claude_ide_bridge_files::{Error, Text, Workspace};
use claude_ide_bridge_lsp::{Checked, Down, DownReason, Lsp, ServerState};

use super::headless::no_formatter;
#[cfg(doc)]
use super::jobs::JOB_DEADLINE;
use super::watch::{Looks, LOOK_WAIT};
use super::Host;
use crate::lsp::{Log, Warm, WARM_MAX};
use crate::ui;

mod memory;
mod spelling;

use memory::{read_stamped, stamp_of, Memory, Stamp};
pub(crate) use spelling::Spellings;

/// Notes ([`LanguageServers::note_once`]) remembered at most, of each kind ([`Noted`]); the
/// last one of a kind says so.
const MAX_NOTES: usize = 256;
const LAST_NOTE: &str =
    "language servers: more notes like these are not shown (this many were, in this run)";

/// `text` cut to at most 300 bytes, at a character boundary, with `...` when cut.
fn cut(text: &str) -> Cow<'_, str> {
    super::cut_to(text, 300)
}

/// Files changed through the bridge or asked about whose diagnostics a `getDiagnostics` without
/// `uri` brings up to date first (the most recent ones), and answers remembered.
/// The most bytes of diagnostics (as JSON) a `getDiagnostics` answer carries. The answer is that
/// JSON inside a JSON string (a quote costs two bytes there, a control character six), and one
/// past the connection's 64 MiB outbound limit would drop the client: servers may hold 20,000
/// diagnostics of 2,000 characters each, editors 24 MiB. Far more than a model reads.
pub(crate) const MAX_ANSWER_BYTES: usize = 2 << 20;

/// `files` within [`MAX_ANSWER_BYTES`]: errors first, then warnings, information and hints, each
/// in file order; files left with none are dropped. Also returns how many were left out.
pub(crate) fn within_answer(files: Vec<FileDiagnostics>) -> (Vec<FileDiagnostics>, usize) {
    let size = |d: &Diagnostic| serde_json::to_vec(d).map_or(0, |v| v.len() + 1);
    let total: usize = files
        .iter()
        .map(|f| f.uri.len() + 32 + f.diagnostics.iter().map(size).sum::<usize>())
        .sum();
    if total <= MAX_ANSWER_BYTES {
        return (files, 0);
    }
    let mut order: Vec<(u8, usize, usize)> = files
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            f.diagnostics
                .iter()
                .enumerate()
                .map(move |(j, d)| (d.severity_rank(), i, j))
        })
        .collect();
    order.sort_unstable();
    let mut keep = vec![Vec::new(); files.len()];
    let mut used = 0;
    let mut left_out = 0;
    for (_, i, j) in order {
        let d = &files[i].diagnostics[j];
        let cost = size(d)
            + if keep[i].is_empty() {
                files[i].uri.len() + 32
            } else {
                0
            };
        if used + cost > MAX_ANSWER_BYTES {
            left_out += 1;
            continue;
        }
        used += cost;
        keep[i].push(j);
    }
    let files = files
        .into_iter()
        .zip(keep)
        .filter(|(_, k)| !k.is_empty())
        .map(|(mut f, mut k)| {
            k.sort_unstable();
            let all = std::mem::take(&mut f.diagnostics);
            f.diagnostics = k.into_iter().map(|j| all[j].clone()).collect();
            f
        })
        .collect();
    (files, left_out)
}

const RECENT: usize = 16;
/// How long accepted contents count as about to be written by the client.
const PENDING: Duration = Duration::from_secs(10);
/// Threads asking for the diagnostics of files just changed or about to be (an `openDiff`'s
/// file), at most.
const REFRESHES: usize = 4;

/// Background threads of one kind running at once, at most `max`.
struct Budget {
    running: AtomicUsize,
    max: usize,
}

impl Budget {
    const fn new(max: usize) -> Budget {
        Budget {
            running: AtomicUsize::new(0),
            max,
        }
    }

    /// Takes one of the places: `false`, and nothing taken, when all are held.
    fn take(&self) -> bool {
        if self.running.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.running.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Gives back a place [`Budget::take`] gave.
    fn give_back(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a file's text on disk is checked in the background ([`LanguageServers::check_on_disk`]),
/// which says whose [`Budget`] the thread takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnDisk {
    /// An `openDiff`'s file: its baseline, the answer the accept waits for.
    Diff,
    /// A file opened when a client connected (`--lsp-warm connect`).
    Warm,
}

/// The language servers of the workspace, shared by the host and its jobs.
pub struct LanguageServers {
    lsp: Lsp,
    log: Log,
    ws: Workspace,
    /// Files changed through the bridge, and the last answers.
    memory: Mutex<Memory>,
    /// What the log has been told once already.
    noted: Mutex<Noted>,
    /// Threads checking an `openDiff`'s file ([`LanguageServers::opening`]) or refreshing a
    /// changed one ([`LanguageServers::changed`]), at most [`REFRESHES`].
    refreshing: Budget,
    /// Threads waiting for an accepted diff's write ([`LanguageServers::await_write`]), at most
    /// [`REFRESHES`].
    watching: Budget,
    /// Threads checking the files opened when a client connected
    /// ([`LanguageServers::connected`]), at most [`WARM_MAX`]: a budget of their own, so that
    /// however many languages are warmed an `openDiff` finds its place in `refreshing`.
    warm_opening: Budget,
    /// Per language: until when its calls wait for its first answer (`None`: it has answered).
    warming: Mutex<HashMap<String, Option<Instant>>>,
    /// How long a language's first answer may take (`--lsp-start-wait`).
    start_wait: Duration,
    /// When servers start (`--lsp-warm`).
    warm: Warm,
    /// Set once the servers of the workspace's languages were started (`--lsp-warm connect`).
    warmed: std::sync::atomic::AtomicBool,
    /// The checks of a file's text on disk started at its `openDiff` ([`LanguageServers::opening`])
    /// and not done, by the path claude gave; `checked` is told when one ends.
    checking: Mutex<HashMap<String, usize>>,
    checked: Condvar,
    /// The looks at the files the servers watch ([`LanguageServers::tell_disk_changes`]).
    looks: Arc<Looks>,
    /// Held while an answer for all files is made of what the servers hold
    /// ([`LanguageServers::all`]): each copies every server's diagnostics before it is cut to
    /// what an answer carries, and calls at once multiplied that (eight at once took a bridge
    /// whose server held 180 MB to 1 GB).
    listing: Mutex<()>,
}

/// How long a question's look at the files open in the servers may take
/// ([`LanguageServers::refresh_open`]): the files left are looked at by the next one.
const REFRESH_WAIT: Duration = Duration::from_millis(100);

/// How long `getDiagnostics {}` asked by the client itself (after an edit, to find the new
/// diagnostics) may wait for the servers: the client gives it 2 s, and a server still starting
/// (which the model's questions wait for) would make it give up on the whole answer.
const CLIENT_ALL_WAIT: Duration = Duration::from_millis(1800);

/// How long a baseline (`getDiagnostics {uri}` between an accepted diff and its write) may wait
/// for the server: the client gives it 500 ms, and a later answer counts as a timeout (three in a
/// row and it asks for no more baselines).
const BASELINE_WAIT: Duration = Duration::from_millis(400);

/// The answer when a file's diagnostics are not known for its current text in time: a tool error
/// (its text is not JSON), never an empty list the bridge did not get from a server for that
/// text. The real client takes an error as no baseline for that file (it compares nothing, and
/// counts no timeout); an empty baseline would make it forward every diagnostic the file already
/// had to the model as new.
///
/// When no server of the set is starting or late and some are not running (exited, to be
/// started again), that is what is said: "has not answered in time" read as a slow server while
/// it had crashed.
fn not_known(uri: &str, down: &[Down]) -> ToolResult {
    let named = |keep: fn(&Down) -> bool| -> Vec<String> {
        (down.iter().filter(|d| keep(d)))
            .map(|d| cut(&d.to_string()).into_owned())
            .collect()
    };
    // Which of its set (the others answered, or are down).
    let late = named(Down::awaited);
    let running = named(|d| matches!(d.why, DownReason::Starting | DownReason::Late));
    // Why each is not running (without "started again": the message says so).
    let stopped: Vec<String> = (down.iter())
        .filter_map(|d| match &d.why {
            DownReason::NotRunning(why) | DownReason::Restarting(why) => {
                Some(cut(&format!("{}: {why}", d.server)).into_owned())
            }
            _ => None,
        })
        .collect();
    let message = if running.is_empty() && down.iter().any(|d| d.why == DownReason::Stopping) {
        format!(
            "the diagnostics of {} are not known: the bridge is stopping, its language servers with it",
            cut(uri)
        )
    } else if running.is_empty() && !stopped.is_empty() {
        format!(
            "the diagnostics of {} are not known: its language server is not running ({}); the bridge starts it again (ask again shortly)",
            cut(uri),
            stopped.join("; ")
        )
    } else {
        let mut message = format!(
            "the diagnostics of {} are not known yet: its language server has not answered for its current contents in time (ask again shortly)",
            cut(uri)
        );
        if !late.is_empty() {
            message.push_str(&format!("; waiting for {}", late.join("; ")));
        }
        message
    };
    ToolResult::error(message)
}

/// The keys of the notes told once ([`LanguageServers::note_once`]), in two sets of
/// [`MAX_NOTES`] each: those about a file a client named (ever new ones can come, from a client
/// asking about files outside the workspace) cannot use up the room of those about the servers
/// and the languages (a server given up on, none installed), which are then still said.
#[derive(Default)]
struct Noted {
    files: HashSet<String>,
    servers: HashSet<String>,
}

/// Which of [`Noted`]'s sets a note is kept in.
#[derive(Clone, Copy)]
enum About {
    /// A file (or an extension) a client named.
    File,
    /// A server, a language, or the bridge's own work.
    Servers,
}

/// Why a language has no server to ask ([`LanguageServers::unavailable`]).
enum Unavailable {
    /// None of its servers is installed.
    Missing,
    /// Those of its set all failed (not started, or given up on after crashing; some may be
    /// missing): why, of each.
    Failed(String),
}

/// The file a `getDiagnostics` names, as the files crate takes it: a `file://` URI's path (on
/// Windows the Windows path it names; none for `file:///c/x`, which writes no drive), or a path
/// (absolute, `C:\x` included on Windows, or relative to the first workspace folder). `None` for
/// other URI schemes (`untitled:`, a diff's right side).
fn named_path(uri: &str) -> Option<String> {
    if uri.contains("://") || claude_ide_bridge::is_file_uri(uri) {
        crate::sys::path_of_file_uri(uri)
    } else if Path::new(uri).is_absolute() {
        Some(uri.to_owned())
    } else if uri.contains(':') && !uri.starts_with('/') {
        None
    } else {
        Some(uri.to_owned())
    }
}

/// Whether a server's diagnostics for `uri` are for a file inside the workspace: a server may
/// publish for any file it looks at (a library's, `/etc/passwd`), which claude is not told about,
/// as `getDiagnostics {uri}` answers `[]` for a file outside (docs/protocol.md, "getDiagnostics").
/// Inside by its path, and not through a link leading out (a server reads a link as the file it
/// leads to, and a message may quote that file): resolved as the file tools resolve it. `None`
/// outside; else the path `uri` names and what [`Workspace::regular_file`] said (whether the
/// file is still there, and what it is with links resolved: [`resolved_key`]).
fn looked_up(ws: &Workspace, uri: &str) -> Option<(String, Result<String, Error>)> {
    let path = named_path(uri).filter(|p| ws.contains(p))?;
    let found = ws.regular_file(&path);
    // (A folder replaced since: what a server says of its files is of the old directory, or of
    // where a link in its place leads.)
    let out = matches!(
        found,
        Err(Error::Outside { .. } | Error::FolderReplaced { .. })
    );
    (!out).then_some((path, found))
}

/// The file `uri` names inside the workspace with the links on its way resolved, as one key for
/// its every spelling ([`Workspace::regular_file`]'s path, in any case where paths ignore it);
/// `None` outside the workspace, or where no regular file is.
pub(super) fn resolved_key(ws: &Workspace, uri: &str) -> Option<String> {
    key_of_looked_up(looked_up(ws, uri).as_ref())
}

/// [`resolved_key`] of what [`looked_up`] found.
fn key_of_looked_up(found: Option<&(String, Result<String, Error>)>) -> Option<String> {
    let real = found?.1.as_ref().ok()?;
    Some(crate::sys::case_key(real).into_owned())
}

/// Reads a file through the workspace (inside it, a regular file, bounded, UTF-8), for a server
/// or for the terminal's diff: `Ok(None)` when it does not exist (nor can: a name on its way is
/// a file).
pub(super) fn read(ws: &Workspace, path: &str) -> Result<Option<Text>, Error> {
    match ws.read_text(path) {
        Ok(t) => Ok(Some(t)),
        Err(Error::NotFound { .. } | Error::NotADirectory { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// How often [`LanguageServers::await_write`] looks at the file.
const AWAIT_WRITE_POLL: Duration = Duration::from_millis(100);
/// [`LanguageServers::await_write`] reads the file at least once in this many looks.
const AWAIT_WRITE_READ: u32 = 10;

/// A text's hash as the bridge remembers it: of the text as the client reads and writes it, its
/// byte-order mark and CRLF line ends left out (the client's Write tool keeps a file's, which
/// the diff's contents do not carry; the diagnostics are the same), so that accepted contents
/// written as such a file are known as written.
fn text_hash(text: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for part in text.split("\r\n") {
        h.write(part.as_bytes());
        h.write_u8(b'\n');
    }
    h.finish()
}

impl LanguageServers {
    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers `diagnostics`, a fresh answer for `path` holding the text `hash`, asked when
    /// its language's servers had checked `since` documents again ([`Lsp::rechecks_for`], read
    /// again now, before the memory's lock: [`Memory::answered`]).
    fn remember(&self, path: &Path, hash: u64, diagnostics: &[Diagnostic], since: u64) {
        let now = self.lsp.rechecks_for(path);
        self.memory().answered(path, hash, diagnostics, since, now);
    }

    /// Language servers over `lsp`, noting what they cannot do in `log`.
    pub fn new(lsp: Lsp, log: Log, ws: Workspace) -> LanguageServers {
        LanguageServers {
            looks: Looks::new(lsp.clone(), &ws),
            listing: Mutex::new(()),
            log,
            ws,
            memory: Mutex::new(Memory::default()),
            noted: Mutex::new(Noted::default()),
            refreshing: Budget::new(REFRESHES),
            watching: Budget::new(REFRESHES),
            warm_opening: Budget::new(WARM_MAX),
            warming: Mutex::new(HashMap::new()),
            start_wait: lsp.config().start_wait,
            warm: Warm::None,
            warmed: std::sync::atomic::AtomicBool::new(false),
            checking: Mutex::new(HashMap::new()),
            checked: Condvar::new(),
            lsp,
        }
    }

    /// How much longer than the file system's allowance of every job ([`JOB_DEADLINE`]) a job
    /// answering from the servers may take: the longest the servers may be waited for. A language's first
    /// answer waits for its start (`--lsp-start-wait`), then for the diagnostics
    /// (`--diagnostics-wait`); `getDiagnostics {}` may meet a second language's start after a
    /// first file answered within the diagnostics wait. With the job's bound alone (20 s), a
    /// wait the user set longer ended in "the file system did not answer" instead of the
    /// servers' answer.
    pub fn job_extra(&self) -> Duration {
        let wait = self.lsp.config().diagnostics_wait;
        self.start_wait.max(wait) + wait * 2
    }

    /// When servers start (`--lsp-warm`; [`Warm::None`] unless set).
    pub fn warm(mut self, warm: Warm) -> LanguageServers {
        self.warm = warm;
        self
    }

    /// A client connected: with `--lsp-warm connect`, the first time, starts the servers of the
    /// languages with files in the workspace (at most [`crate::lsp::WARM_MAX`], the most files
    /// first), on a thread: the walk is `listFiles`' (bounded), and no call waits for it. Then
    /// each of those languages gets its most recently modified file (the one the user most likely
    /// edits next, found in the same walk) opened in its servers, as at an `openDiff`
    /// ([`LanguageServers::opening`]): its text on disk is synced and checked in the background,
    /// which makes servers that load a project only for an open file (tsserver, pyright) load it
    /// now rather than at the first diff, and remembers the answer for that text. At most one file
    /// per language, read within the workspace's bounds. Those checks run on threads of their own
    /// budget ([`WARM_MAX`]), not the `openDiff`s' ([`REFRESHES`]).
    pub fn connected(self: &Arc<Self>) {
        if self.warm != Warm::Connect || self.warmed.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("lsp-warm".into())
            .spawn(move || {
                let found = crate::lsp::walk_workspace(&me.ws, &me.lsp.config().servers);
                for language in crate::lsp::warm_languages(&found.plan) {
                    let started = me.lsp.start(&language);
                    let file = found.latest.get(&language).filter(|_| started);
                    me.log.note(&format!(
                        "--lsp-warm connect: {language}: {}",
                        match file {
                            Some(f) => format!("server started, opening {}", cut(f)),
                            None if started => "server started".to_owned(),
                            None => "no server can run".to_owned(),
                        }
                    ));
                    if let Some(file) = file {
                        me.check_on_disk(file, OnDisk::Warm);
                    }
                }
            });
    }

    /// An `openDiff` arrived for `file_path` (unless `--lsp-warm none`): its server starts now if
    /// it is not running, and a thread checks the file's text on disk, so that the client's
    /// baseline after the diff is accepted is answered with what that text really has (the
    /// answer is remembered for that text). An accept waits for that check
    /// ([`LanguageServers::accepting`]). At most [`REFRESHES`] such threads at once (with those of
    /// [`LanguageServers::changed`]).
    pub fn opening(self: &Arc<Self>, file_path: &str) {
        self.check_on_disk(file_path, OnDisk::Diff);
    }

    /// The budget the checks of `why` take.
    fn budget(&self, why: OnDisk) -> &Budget {
        match why {
            OnDisk::Diff => &self.refreshing,
            OnDisk::Warm => &self.warm_opening,
        }
    }

    /// Checks `file_path`'s text on disk on a thread of `why`'s budget (unless `--lsp-warm none`,
    /// or no language is known for it), remembering the answer for that text; an accept of the
    /// file waits for it. Whether a check started: `false` when `why`'s budget is all taken.
    fn check_on_disk(self: &Arc<Self>, file_path: &str, why: OnDisk) -> bool {
        if self.warm == Warm::None || self.lsp.language_for(Path::new(file_path)).is_none() {
            return false;
        }
        if !self.budget(why).take() {
            return false;
        }
        // Counted here, on the caller's thread: an accept that comes right after (a policy that
        // accepts at once) finds the check under way, whenever its thread gets to run.
        *self.checks().entry(file_path.to_owned()).or_default() += 1;
        let (me, file_path) = (self.clone(), file_path.to_owned());
        let named = file_path.clone();
        let spawned = std::thread::Builder::new()
            .name(
                match why {
                    OnDisk::Diff => "lsp-diff",
                    OnDisk::Warm => "lsp-warm-file",
                }
                .into(),
            )
            .spawn(move || {
                /// However the check ends (a panic too): its place given back, and its file no
                /// longer counted as under check (every later accept of it would wait its
                /// longest for a check that never ends).
                struct Done<'a>(&'a LanguageServers, OnDisk, &'a str);
                impl Drop for Done<'_> {
                    fn drop(&mut self) {
                        self.0.budget(self.1).give_back();
                        self.0.checked_on_disk(self.2);
                    }
                }
                let _done = Done(&me, why, &file_path);
                let (read, stamp) = read_stamped(&me.ws, &file_path);
                if let Ok(Some(t)) = read {
                    let path = PathBuf::from(&t.path);
                    // Accepted before this check (an accept that waited its longest): the
                    // server has the accepted contents, and handing it the text on disk now
                    // would take them away and lose their diagnostics_changed. Only contents
                    // still on their way count: ones already on disk, or accepted longer than
                    // [`PENDING`] ago (a client that skipped its checks after the write leaves
                    // them), are forgotten and the text on disk is checked; else every later
                    // `openDiff` of the file skipped its check, and the baseline was never known.
                    let hash = text_hash(&t.content);
                    let accepted = me.memory().awaits_write(&path, hash, Instant::now());
                    me.memory().on_disk(&path, stamp.filter(|_| !accepted));
                    if !accepted {
                        let since = me.lsp.rechecks_for(&path);
                        let checked = me.ask(&path, &t.content, None);
                        if checked.fresh {
                            me.remember(&path, hash, &checked.diagnostics, since);
                        }
                    }
                }
            });
        if spawned.is_err() {
            self.budget(why).give_back();
            self.checked_on_disk(&named);
            return false;
        }
        true
    }

    fn checks(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.checking.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The check of `file_path`'s text on disk started at its `openDiff` is over.
    fn checked_on_disk(&self, file_path: &str) {
        let mut checks = self.checks();
        if let Some(n) = checks.get_mut(file_path) {
            *n -= 1;
            if *n == 0 {
                checks.remove(file_path);
            }
        }
        drop(checks);
        self.checked.notify_all();
    }

    /// How long an accepted diff may wait for the file's servers ([`LanguageServers::accepting`]):
    /// the start wait (`--lsp-start-wait`, 10 s by default).
    pub fn accept_wait(&self) -> Duration {
        self.start_wait
    }

    /// The `openDiff` of `file_path` was accepted: the client, once told, asks for its baseline
    /// (the text still on disk) within 500 ms, writes `contents` to `path` (the file as it
    /// resolves in the workspace), and asks again without `uri` within 2 s. So before the answer:
    /// waits until the check of the text on disk started at the `openDiff` is over, hands the
    /// server `contents` ([`LanguageServers::changed`]), and waits for their diagnostics, in all
    /// at most [`LanguageServers::accept_wait`]. A
    /// server's cold start and a big file's check (pyright on requests' `models.py`: 2-15 s, then
    /// 1-4 s for each change, on a busy 2-core machine) outlast a user reading the diff and the
    /// client's bounds: the accepted contents handed over at once would end the check of the old
    /// text unanswered (no baseline: the client compares nothing), and the check after the write
    /// would find the server still at work (the new diagnostics never reach the model). A warm
    /// server costs the time of its check of `contents` only.
    pub fn accepting(self: &Arc<Self>, file_path: &str, path: &Path, contents: &str) {
        let until = Instant::now() + self.accept_wait();
        let mut checks = self.checks();
        while checks.contains_key(file_path) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            checks = match self.checked.wait_timeout(checks, left) {
                Ok((guard, _)) => guard,
                Err(p) => p.into_inner().0,
            };
        }
        drop(checks);
        self.changed(path, contents, true);
        if Instant::now() < until && self.memory().pending.contains_key(path) {
            self.lsp.check(path, contents, until);
            // Pending from now: the client writes the file once answered.
            if let Some(p) = self.memory().pending.get_mut(path) {
                p.1 = Instant::now();
            }
        }
        if self.memory().pending.contains_key(path) {
            self.await_write(path, contents);
        }
    }

    /// A thread watches `path` for accepted `contents` for [`PENDING`]: once the client has
    /// written them (as its Write tool does: a file's CRLF line ends and byte-order mark kept),
    /// the servers get the text on disk as written, and those that check the disk on save are
    /// told so (a server would otherwise wait for a later `getDiagnostics` that reads the file,
    /// which may never come), and the file's later checks ask about it. At most [`REFRESHES`] such
    /// threads; past that, the next `getDiagnostics` that reads the file does it.
    fn await_write(self: &Arc<Self>, path: &Path, contents: &str) {
        let (path, contents) = (path.to_path_buf(), contents.to_owned());
        self.spawn_within(
            |s| &s.watching,
            "lsp-await-write",
            move |me| {
                me.wait_for_write(&path, &contents);
            },
        );
    }

    /// [`LanguageServers::await_write`]'s thread.
    fn wait_for_write(&self, path: &Path, contents: &str) {
        let until = Instant::now() + PENDING;
        let accepted = text_hash(contents);
        let (mut seen, mut polls) = (None, 0u32);
        while Instant::now() < until {
            // Read again when the file changed (its length or time), and each
            // [`AWAIT_WRITE_READ`] polls anyway (a file system's time to the second, a read that
            // failed while the file was being written).
            let now = stamp_of(path);
            polls += 1;
            if now.is_some() && (now != seen || polls % AWAIT_WRITE_READ == 0) {
                seen = now;
                let written = read(&self.ws, &path.to_string_lossy())
                    .ok()
                    .flatten()
                    .filter(|t| text_hash(&t.content) == accepted);
                if let Some(t) = written {
                    if self.forget_written(path, accepted) {
                        self.lsp.sync(path, &t.content);
                        self.memory().on_disk(path, None);
                    }
                    return;
                }
            }
            std::thread::sleep(AWAIT_WRITE_POLL);
        }
    }

    /// The file holds the accepted text `accepted`: its pending entry is forgotten when it is
    /// still that text's (true); a later accept's stays, which waits for its own write (false).
    fn forget_written(&self, path: &Path, accepted: u64) -> bool {
        let mut memory = self.memory();
        let ours = memory
            .pending
            .get(path)
            .is_some_and(|(hash, _)| *hash == accepted);
        if ours {
            memory.changed(path, None, Instant::now());
        }
        ours
    }

    /// Runs `work` on a thread named `name` that holds a place of the budget `budget` picks
    /// until it ends; nothing when every place is taken, or no thread can be started.
    fn spawn_within(
        self: &Arc<Self>,
        budget: fn(&Self) -> &Budget,
        name: &str,
        work: impl FnOnce(&Arc<Self>) + Send + 'static,
    ) {
        if !budget(self).take() {
            return;
        }
        /// Gives the place back however the work ends (a panic too).
        struct Back<'a>(&'a Budget);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                self.0.give_back();
            }
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _back = Back(budget(&me));
                work(&me);
            });
        if spawned.is_err() {
            budget(self).give_back();
        }
    }

    /// The diagnostics of `path` holding `text`, from its server, waiting until `deadline` (default:
    /// one diagnostics wait from now). Until a language's server has answered once, its calls wait
    /// until the end of its start wait instead: a server's first analysis (pyright's takes seconds
    /// on a busy machine) would otherwise outlast every call, each giving up on its question.
    fn ask(&self, path: &Path, text: &str, deadline: Option<Instant>) -> Checked {
        self.ask_within(path, text, deadline, false)
    }

    /// [`LanguageServers::ask`]; with `hard`, `deadline` is kept even before the language's
    /// first answer, and while a server starts ([`Lsp::check_by`]; a baseline, which the client
    /// gives 500 ms).
    fn ask_within(
        &self,
        path: &Path,
        text: &str,
        deadline: Option<Instant>,
        hard: bool,
    ) -> Checked {
        let checked = self.ask_servers(path, text, deadline, hard);
        self.looks.first_if_new();
        checked
    }

    /// [`LanguageServers::ask_within`], the asking.
    fn ask_servers(
        &self,
        path: &Path,
        text: &str,
        deadline: Option<Instant>,
        hard: bool,
    ) -> Checked {
        if hard {
            let deadline = deadline.unwrap_or_else(|| self.lsp.deadline());
            return self.lsp.check_by(path, text, deadline);
        }
        let now = Instant::now();
        let mut deadline = deadline.unwrap_or_else(|| self.lsp.deadline());
        let language = self.lsp.language_for(path).unwrap_or_default().to_owned();
        let warm_by = *self
            .warming
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(language.clone())
            .or_insert(Some(now + self.start_wait));
        if let Some(by) = warm_by {
            deadline = deadline.max(by);
        }
        let d = self.lsp.check(path, text, deadline);
        // A server of the set that is down: the answer holds the others' diagnostics, and the
        // terminal and the log say whose are missing (once for each reason). One running but
        // late makes the answer not known in time: without its part it would pass for a
        // baseline that lacks that server's diagnostics.
        for down in d.down.iter().filter(|d| d.why != DownReason::Starting) {
            let effect = if down.awaited() {
                "the file's diagnostics are not known until it answers"
            } else {
                "its diagnostics are missing from the answers"
            };
            self.note_once(
                format!("down {down}"),
                &format!("language servers: {language}: {down}; {effect}"),
            );
        }
        if warm_by.is_some() && Instant::now() < deadline {
            self.warming
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(language, None);
        }
        d
    }

    /// Writes `line` to the log (and the terminal in `serve`) the first time `key` comes up.
    /// Keys and lines name what a client sent (a URI of up to the message size): both are cut,
    /// and at most [`MAX_NOTES`] are remembered, so that a client asking about ever new files
    /// cannot grow the set or flood the terminal.
    fn note_once(&self, key: String, line: &str) {
        self.note_once_about(About::Servers, key, line);
    }

    /// As [`LanguageServers::note_once`], for a note about a file (or an extension) a client
    /// named, kept apart ([`Noted`]).
    fn note_once_about(&self, about: About, key: String, line: &str) {
        let mut noted = self.noted.lock().unwrap_or_else(|p| p.into_inner());
        let kept = match about {
            About::File => &mut noted.files,
            About::Servers => &mut noted.servers,
        };
        if kept.len() >= MAX_NOTES || !kept.insert(cut(&key).into_owned()) {
            return;
        }
        let last = kept.len() == MAX_NOTES;
        drop(noted);
        for line in [Some(cut(line)), last.then_some(Cow::Borrowed(LAST_NOTE))]
            .into_iter()
            .flatten()
        {
            self.log.note(&line);
            ui::say(&line);
        }
    }

    /// Whether `language` has no server to ask (all of its set missing, or failed: not started,
    /// or given up on after crashing), and why; why is noted once. `None` while one may answer.
    fn unavailable(&self, language: &str) -> Option<Unavailable> {
        let mut down = None;
        let mut failed: Vec<String> = Vec::new();
        for s in self.lsp.status() {
            if !s.languages.iter().any(|l| l == language) {
                continue;
            }
            let gone = matches!(s.state, ServerState::Missing | ServerState::Failed(_));
            down = Some(down.unwrap_or(true) && gone);
            if let ServerState::Failed(why) = &s.state {
                failed.push(why.clone());
            }
            match &s.state {
                ServerState::Missing => {
                    let tried = self.lsp.config().servers.commands(language);
                    let tried: Vec<String> = (tried.iter())
                        .map(|c| claude_ide_bridge_lsp::table::command_line(c))
                        .collect();
                    self.note_once(
                        format!("missing {language}"),
                        &format!(
                            "language servers: none found for {language} (tried: {}); getDiagnostics answers [] for its files (`claude-ide-bridge doctor` says how to install one)",
                            tried.join(", ")
                        ),
                    );
                }
                ServerState::Failed(why) => self.note_once(
                    format!("failed {language} {why}"),
                    &format!("language servers: {language}: {why}"),
                ),
                _ => {}
            }
        }
        match down {
            Some(true) if failed.is_empty() => Some(Unavailable::Missing),
            Some(true) => Some(Unavailable::Failed(failed.join("; "))),
            _ => None,
        }
    }

    /// The answer when `uri`'s language has no server to ask ([`LanguageServers::unavailable`]):
    /// `[]` when none is installed (as for a language without one); a tool error saying why
    /// when they all failed, never an empty list that would pass for a file without problems.
    fn unavailable_answer(&self, uri: &str, language: &str) -> Option<ToolResult> {
        match self.unavailable(language)? {
            Unavailable::Missing => Some(ToolResult::json(&Vec::<FileDiagnostics>::new())),
            Unavailable::Failed(why) => Some(ToolResult::error(format!(
                "the diagnostics of {} are not known: no {language} language server is running ({}); the bridge starts it again later",
                cut(uri),
                cut(&why)
            ))),
        }
    }

    /// The answer to `getDiagnostics {uri}`.
    pub fn file(&self, uri: &str, asker: Asker) -> ToolResult {
        let Some(named) = named_path(uri) else {
            if claude_ide_bridge::is_file_uri(uri) {
                // `file:///c/x` on Windows (no drive written), or escapes that decode to no text.
                self.note_once_about(
                    About::File,
                    format!("no file {uri}"),
                    &format!(
                        "language servers: not asked about {uri}: it names no file on this system"
                    ),
                );
            }
            return ToolResult::json(&Vec::<FileDiagnostics>::new());
        };
        let Some(language) = self.lsp.language_for(Path::new(&named)).map(str::to_owned) else {
            let (key, line) = match Path::new(&named).extension() {
                Some(ext) => {
                    let ext = ext.to_string_lossy();
                    (
                        format!("extension {ext}"),
                        format!("language servers: no language known for files with extension {ext}: getDiagnostics answers [] for them (add one with --lsp {ext}=COMMAND)"),
                    )
                }
                // No `--lsp` for these: a language is named by a word, an extension.
                None => (
                    "no extension".into(),
                    format!("language servers: no language known for files without an extension (such as {named}): getDiagnostics answers [] for them"),
                ),
            };
            self.note_once_about(About::File, key, &line);
            return ToolResult::json(&Vec::<FileDiagnostics>::new());
        };
        // Other files changed on disk first: this one's check must not be against their old text.
        // Each with its own time: a look that takes all of its time leaves the files open in the
        // servers (whose watched changes the servers pass over) their refresh.
        let asked_at = Instant::now();
        self.refresh_open((asked_at + REFRESH_WAIT).min(self.lsp.deadline()));
        self.tell_disk_changes(self.lsp.deadline());
        let (read, stamp) = read_stamped(&self.ws, &named);
        let (path, text) = match read {
            Ok(Some(t)) => (PathBuf::from(t.path), t.content),
            Ok(None) => {
                // Deleted or renamed away: its servers let go of it, under the name they have it
                // by (links on the way resolved, as the text read would have been named).
                let key = self.ws.writable(&named).unwrap_or(named);
                self.let_go_if_gone(Path::new(&key));
                return ToolResult::json(&Vec::<FileDiagnostics>::new());
            }
            Err(e @ Error::Outside { .. }) => {
                // Nothing known about it: no file outside the workspace goes to a server.
                self.note_once_about(
                    About::File,
                    format!("outside {uri}"),
                    &format!("language servers: not asked about {uri}: {e}"),
                );
                return ToolResult::json(&Vec::<FileDiagnostics>::new());
            }
            Err(e) => {
                // Grown past the read limit, no longer text, no longer a regular file: its
                // servers let go of the text they had (its diagnostics were listed by `{}`).
                let key = self.ws.writable(&named).unwrap_or(named);
                self.unreadable(Path::new(&key), &e);
                return ToolResult::error(format!("{uri}: {e}"));
            }
        };
        let hash = text_hash(&text);
        let since = self.lsp.rechecks_for(&path);
        let remembered = {
            let mut memory = self.memory();
            memory.asked(&path);
            // The client's own check (its baseline, the server holding accepted contents not
            // yet written) takes what the server said of this text before a header it includes
            // changed, as `Checked::from_before`: asked again, the old text went back to the
            // server over the accepted one (clangd built the file three times for one edit).
            let count = (asker != Asker::Client).then_some(since);
            let remembered = memory.before_write(&path, hash, Instant::now(), count);
            // Handed over by the ask below unless accepted contents wait to be written.
            memory.on_disk(&path, stamp.filter(|_| remembered.is_none()));
            remembered
        };
        let diagnostics = match remembered {
            Some(Some(d)) => d,
            // The baseline of an accepted diff whose old text was never answered for (the
            // check at its openDiff did not finish): asked now, within the client's bound.
            Some(None) => {
                let deadline = asked_at + BASELINE_WAIT;
                let checked = self.ask_within(&path, &text, Some(deadline), true);
                // (What the server said of this text before a header it includes changed, not
                // answered anew in time, is an answer for the client's own question only, and
                // not one to remember.)
                let from_before = checked.from_before && asker == Asker::Client;
                if !checked.fresh && !from_before {
                    if checked.diagnostics.is_empty() {
                        if let Some(answer) = self.unavailable_answer(uri, &language) {
                            return answer;
                        }
                    }
                    return not_known(uri, &checked.down);
                }
                if checked.fresh {
                    self.remember(&path, hash, &checked.diagnostics, since);
                }
                checked.diagnostics
            }
            // The client's own check (its baseline before an edit made without a diff) within
            // the client's bound, as an accepted diff's; the model's question, and one that does
            // not say whose it is, waits for the server.
            None => {
                let Checked {
                    diagnostics,
                    fresh,
                    from_before,
                    down,
                } = if asker == Asker::Client {
                    let deadline = asked_at + BASELINE_WAIT;
                    self.ask_within(&path, &text, Some(deadline), true)
                } else {
                    self.ask(&path, &text, None)
                };
                if diagnostics.is_empty() {
                    if let Some(answer) = self.unavailable_answer(uri, &language) {
                        return answer;
                    }
                }
                // Only an answer for this very text may stand in for it later (the check before
                // a write), and only such an answer is given: one the deadline cut short may be
                // another text's, or nothing yet. The client's own check is given what the server
                // said of this text before a header it includes changed, when the new answer
                // does not come in time ([`Checked::from_before`]: seconds for a large C++
                // file), not the model's question, which is told it is not known yet.
                if !fresh && !from_before {
                    return not_known(uri, &down);
                }
                if fresh {
                    self.remember(&path, hash, &diagnostics, since);
                }
                diagnostics
            }
        };
        // The client matches the answer to its question by URI: give its own back when it asked
        // with one.
        let uri = if claude_ide_bridge::is_file_uri(uri) {
            uri.to_owned()
        } else {
            file_uri(&path.to_string_lossy())
        };
        // Within the answer's bound, as `getDiagnostics {}` is (four servers' lists of long
        // messages reach 19 MB): the most severe kept. The file stays named when all fit.
        let mut files = self.answer_within(vec![FileDiagnostics {
            uri: uri.clone(),
            diagnostics,
        }]);
        if files.is_empty() {
            files.push(FileDiagnostics {
                uri,
                diagnostics: Vec::new(),
            });
        }
        ToolResult::json(&files)
    }

    /// `files` [`within_answer`], what was left out said in the log once.
    fn answer_within(&self, files: Vec<FileDiagnostics>) -> Vec<FileDiagnostics> {
        let (files, left_out) = within_answer(files);
        if left_out > 0 {
            self.note_once(
                "answer cut".to_owned(),
                &format!(
                    "getDiagnostics: {left_out} diagnostics left out of an answer past \
                     {MAX_ANSWER_BYTES} bytes (errors first; said once)"
                ),
            );
        }
        files
    }

    /// The files open in the servers whose text on disk changed since it was read for them (the
    /// user's own editor, `git checkout`, a formatter, claude's own tools), looked at until
    /// `deadline`: each is handed to its servers again, so that no answer is for a text a file no
    /// longer holds, nor another file checked against it (an import's old names); one gone, or no
    /// longer to be read as text (past the read limit, not UTF-8, not a regular file), is let go
    /// of. A file whose accepted contents wait to be written keeps them. Returns the files handed
    /// over, with their text, for `getDiagnostics {}` to ask about.
    fn refresh_open(&self, deadline: Instant) -> Vec<(PathBuf, String)> {
        let tracked: Vec<(PathBuf, Option<Stamp>)> = (self.memory().on_disk.iter())
            .map(|(p, s)| (p.clone(), *s))
            .collect();
        let paths: Vec<PathBuf> = tracked.iter().map(|(p, _)| p.clone()).collect();
        let open: HashSet<PathBuf> = self.lsp.open_of(&paths).into_iter().collect();
        // (One added since the look above is kept: it was just read for its servers.)
        let looked: HashSet<&PathBuf> = paths.iter().collect();
        (self.memory().on_disk).retain(|p, _| open.contains(p) || !looked.contains(p));
        let mut handed = Vec::new();
        for (path, stamp) in tracked.into_iter().filter(|(p, _)| open.contains(p)) {
            if Instant::now() >= deadline {
                break;
            }
            if stamp.is_some() && stamp_of(&path) == stamp {
                continue;
            }
            let (read, stamp) = read_stamped(&self.ws, &path.to_string_lossy());
            match read {
                // Still the file it was (not a link to another now, which is its own).
                Ok(Some(t)) if Path::new(&t.path) == path => {
                    if self.hand_over(&path, &t.content, stamp) {
                        handed.push((path, t.content));
                    }
                }
                Ok(_) => {
                    self.let_go_if_gone(&path);
                }
                Err(e) => self.unreadable(&path, &e),
            }
        }
        handed
    }

    /// Tells the servers of the files they watch (the globs of their
    /// `workspace/didChangeWatchedFiles` registrations) that were created, changed or deleted
    /// since the last look, looking for at most [`LOOK_WAIT`] and until `deadline`
    /// ([`Looks::before_question`]).
    fn tell_disk_changes(&self, deadline: Instant) {
        if self.looks.before_question(deadline) {
            self.note_once(
                "look cut".to_owned(),
                &format!(
                    "language servers: a look at the files they watch did not see every file (past {} ms or {} files, or a folder that cannot be read or is past the walk's depth): the looks that follow go on where it stopped, and a change past it is told late, or not at all in a folder never read (said once)",
                    LOOK_WAIT.as_millis(),
                    super::watch::MAX_WATCHED
                ),
            );
        }
    }

    /// Hands `text`, read from `path` on disk at `stamp`, to its servers, unless accepted
    /// contents for it wait to be written (the servers keep them, and it is read again at the next
    /// question); whether it was handed over. Under the memory's lock until it is: accepted
    /// contents handed over meanwhile (`changed`) are not then replaced by the old text on disk.
    fn hand_over(&self, path: &Path, text: &str, stamp: Option<Stamp>) -> bool {
        let mut memory = self.memory();
        if memory.awaits_write(path, text_hash(text), Instant::now()) {
            memory.on_disk(path, None);
            return false;
        }
        memory.on_disk(path, stamp);
        self.lsp.sync(path, text);
        true
    }

    /// `path`, open in its servers, could not be read for them (`e`): no longer text within the
    /// read limit, or no longer a file in the workspace, its servers let go of it, as of a file
    /// gone; a failure that may pass (another program holding it, no descriptor left, no
    /// permission for now) leaves it as it is, to be read again at the next question.
    fn unreadable(&self, path: &Path, e: &Error) {
        match e {
            Error::Io { .. } => self.memory().on_disk(path, None),
            _ => {
                self.let_go_if_gone(path);
            }
        }
    }

    /// The answer to `getDiagnostics {}`: the files open in the servers that changed on disk,
    /// and those changed through the bridge or asked about, handed to their servers (all of them
    /// before any is asked about: a file checked before another's new text reached its server
    /// would be checked against the old one) and asked about (within one diagnostics wait in all,
    /// within the client's own bound when it is the one asking; a file whose text the server
    /// already has costs nothing), then every file with known diagnostics. The editor's
    /// (`--stdio`) take precedence for their files. A file the client asked about is named as
    /// it asked ([`Spellings`]).
    pub fn all(
        &self,
        editor: &BTreeMap<String, Vec<Diagnostic>>,
        editor_resolved: &HashSet<String>,
        asker: Asker,
        spelled: &Spellings,
    ) -> ToolResult {
        // What the servers hold is of the directory that was there: not an answer for this one
        // (`[]` would tell claude every file in it is clean).
        if let Some(e) = self.ws.replaced_folders().first() {
            return ToolResult::error(format!("the workspace's diagnostics are not known: {e}"));
        }
        let now = Instant::now();
        let (deadline, hard) = match asker {
            Asker::Client => ((now + CLIENT_ALL_WAIT).min(self.lsp.deadline()), true),
            _ => (self.lsp.deadline(), false),
        };
        let changed = self.refresh_open((now + REFRESH_WAIT).min(deadline));
        self.tell_disk_changes(deadline);
        let recent: Vec<PathBuf> = self.memory().recent.iter().cloned().collect();
        // Told apart as `same_uri` does (as `editor_reported` and `on_lsp_change`): the editor's
        // URI of a file may be spelled otherwise than the server's (escapes, a drive's case).
        let fold = |p: String| crate::sys::case_key(&p).into_owned();
        let editor_paths: HashSet<String> = editor
            .keys()
            .filter_map(|u| editor_path(u))
            .map(fold)
            .collect();
        let in_editor = |uri: &str| {
            editor.contains_key(uri)
                || editor_path(uri).is_some_and(|p| editor_paths.contains(&fold(p)))
        };
        // Handed over first, then asked about, most recent first.
        let mut asking: Vec<(PathBuf, String)> = Vec::new();
        for path in recent.iter().rev() {
            if Instant::now() >= deadline {
                break;
            }
            if in_editor(&file_uri(&path.to_string_lossy())) {
                continue;
            }
            if let Some(at) = changed.iter().position(|(p, _)| p == path) {
                asking.push(changed[at].clone());
                continue;
            }
            let (read, stamp) = read_stamped(&self.ws, &path.to_string_lossy());
            match read {
                Ok(Some(Text { content: text, .. })) => {
                    if self.hand_over(path, &text, stamp) {
                        asking.push((path.clone(), text));
                    }
                }
                Ok(None) => {
                    self.let_go_if_gone(path);
                }
                Err(e) => self.unreadable(path, &e),
            }
        }
        let changed = changed.into_iter().filter(|(p, _)| !recent.contains(p));
        asking.extend(changed.filter(|(p, _)| !in_editor(&file_uri(&p.to_string_lossy()))));
        for (path, text) in &asking {
            if Instant::now() >= deadline {
                break;
            }
            let since = self.lsp.rechecks_for(path);
            let checked = self.ask_within(path, text, Some(deadline), hard);
            if checked.fresh {
                self.remember(path, text_hash(text), &checked.diagnostics, since);
            }
        }
        // The files the servers check again because one they may include changed (clangd,
        // which leaves them as they were: a header handed over above): their answers for the
        // header's new text, rather than what they held for its old one, within the same bound.
        self.lsp.await_rechecks(deadline);
        let _listing = self.listing.lock().unwrap_or_else(|e| e.into_inner());
        let mut files: BTreeMap<String, Vec<Diagnostic>> = self
            .lsp
            .known()
            .into_iter()
            .filter(|f| !in_editor(&f.uri))
            .filter(|f| match looked_up(&self.ws, &f.uri) {
                None => false,
                // The editor's under another name (through a link): its report stands.
                Some(found)
                    if !editor_resolved.is_empty()
                        && key_of_looked_up(Some(&found))
                            .is_some_and(|k| editor_resolved.contains(&k)) =>
                {
                    false
                }
                // A file gone (deleted, renamed away): claude is not told of errors in a file
                // that no longer exists (unless accepted contents for it wait to be written), and
                // its servers let go of it: within the call's bound (past it, at the next call).
                Some((path, Err(Error::NotFound { .. } | Error::NotADirectory { .. }))) => {
                    let path = Path::new(&path);
                    match Instant::now() < deadline {
                        true => !self.let_go_if_gone(path),
                        false => !self.memory().gone(path, Instant::now()),
                    }
                }
                Some(_) => true,
            })
            .map(|f| (f.uri, f.diagnostics))
            .collect();
        files.extend(editor.iter().map(|(u, d)| (u.clone(), d.clone())));
        let files: Vec<FileDiagnostics> = files
            .into_iter()
            .filter(|(_, d)| !d.is_empty())
            .map(|(uri, diagnostics)| FileDiagnostics { uri, diagnostics })
            .collect();
        ToolResult::json(&self.answer_within(spelled.respell(files)))
    }

    /// `path` does not exist: unless accepted contents for it wait to be written
    /// ([`Memory::gone`]), the bridge and its servers let go of it ([`Lsp::file_gone`]);
    /// whether they did.
    fn let_go_if_gone(&self, path: &Path) -> bool {
        let gone = self.memory().gone(path, Instant::now());
        if gone {
            self.lsp.file_gone(path);
        }
        gone
    }

    /// `path` (inside the workspace) now holds `text` (`accepted`: the client is about to write
    /// it, after an accepted `openDiff`): its server gets it now, without waiting, and a thread
    /// asks for its diagnostics (a server that is asked, rather than one that publishes, says
    /// nothing until then), which reach the clients as `diagnostics_changed`. At most
    /// [`REFRESHES`] such threads run at once; past that the next `getDiagnostics` asks instead.
    pub fn changed(self: &Arc<Self>, path: &Path, text: &str, accepted: bool) {
        if self.lsp.language_for(path).is_none()
            || text.len() as u64 > self.ws.limits().max_read_bytes
        {
            return;
        }
        // An accepted diff's contents are written by claude next: servers that check the disk on
        // save are told once it holds them (the next `getDiagnostics` that reads it).
        if accepted {
            self.lsp.sync_ahead(path, text);
        } else {
            self.lsp.sync(path, text);
        }
        let hash = accepted.then(|| text_hash(text));
        let mut memory = self.memory();
        memory.changed(path, hash, Instant::now());
        // (Read again at the next question: written, it is the text on disk.)
        memory.on_disk(path, None);
        drop(memory);
        let (path, text) = (path.to_path_buf(), text.to_owned());
        self.spawn_within(
            |s| &s.refreshing,
            "lsp-refresh",
            move |me| {
                me.ask(&path, &text, None);
            },
        );
    }

    /// `reformat_file` through the file's server: `Some(answer)`, or `None` when it has no
    /// formatting (the caller keeps its refusal).
    pub fn format(self: &Arc<Self>, file_path: &str) -> Option<ToolResult> {
        self.lsp.language_for(Path::new(file_path))?;
        let (path, text) = match read(&self.ws, file_path) {
            Ok(Some(t)) => (t.path, t.content),
            Ok(None) => return Some(ToolResult::file_not_found()),
            Err(e) => {
                return Some(ToolResult::error(format!(
                    "{file_path} was not reformatted: {e}"
                )))
            }
        };
        // As long as a start is waited for: a server that has just started answers its first
        // format once it has loaded the project (typescript-language-server: seconds), and a
        // format is no baseline, which the client bounds.
        let wait = self.start_wait.max(self.lsp.config().diagnostics_wait);
        let formatted = match self
            .lsp
            .format(Path::new(&path), &text, Instant::now() + wait)
        {
            Ok(None) => return None,
            Ok(Some(f)) => f,
            Err(e) => {
                return Some(ToolResult::error(format!(
                    "{file_path} was not reformatted: {e}"
                )))
            }
        };
        if formatted != text {
            // The file may have changed while the server worked, or be saved while the result is
            // written: written only over what was formatted, looked at last.
            match self
                .ws
                .replace(&path, formatted.as_bytes(), text.as_bytes())
            {
                Ok(_) => {}
                Err(Error::Changed { .. }) => {
                    return Some(ToolResult::error(format!(
                        "{file_path} changed while it was being formatted: it was not reformatted"
                    )))
                }
                Err(e) => {
                    return Some(ToolResult::error(format!(
                        "{file_path} was not reformatted: {e}"
                    )))
                }
            }
            self.changed(Path::new(&path), &formatted, false);
            ui::say(&format!("reformatted: {path}"));
        }
        Some(ToolResult::ok())
    }

    /// Stops every server (`shutdown`, `exit`, then a kill after `grace`).
    pub fn shutdown(&self, grace: Duration) {
        self.lsp.shutdown(grace);
    }
}

impl Host {
    /// `getDiagnostics` with language servers: the editor's answer at once for a file it reported
    /// (`--stdio`), else a job.
    pub(super) fn diagnostics_call(&mut self, call: CallId, uri: Option<String>) {
        // The client's own question (the model's tool calls say they are the model's): its
        // spelling names the file in the `{}` that follows the edit.
        if let Some(u) = uri.as_deref().filter(|_| call.asker() != Asker::Model) {
            // With the file it is through links on its way (or will be, written): the servers'
            // name for it, by which `{}` lists it.
            let real = named_path(u).and_then(|p| {
                (self.ws.regular_file(&p))
                    .or_else(|_| self.ws.writable(&p))
                    .ok()
            });
            self.spellings.asked(u, real.as_deref());
        }
        let Some(servers) = self.lsp.clone() else {
            let r = self.answer_editor_diagnostics(call, uri.as_deref());
            return self.respond(call, r);
        };
        match uri {
            Some(u) if self.editor_reported(&u) => {
                let r = self.answer_editor_diagnostics(call, Some(&u));
                self.respond(call, r);
            }
            Some(u) => {
                let within = servers.job_extra();
                self.jobs
                    .tool_longer(call, within, move || servers.file(&u, call.asker()));
            }
            None => {
                let (editor, within) = (self.diagnostics.clone(), servers.job_extra());
                let resolved = self.diagnostics.resolved_keys();
                let spelled = self.spellings_for(call);
                self.jobs.tool_longer(call, within, move || {
                    servers.all(&editor, &resolved, call.asker(), &spelled)
                });
            }
        }
    }

    /// `reformat_file` headless with language servers: through the file's server when it
    /// formats, else the refusal of a bridge without a formatter; on a job.
    pub(super) fn reformat_call(
        &mut self,
        call: CallId,
        servers: Arc<LanguageServers>,
        file_path: String,
    ) {
        let (ws, ide_name) = (self.ws.clone(), self.ide_name.clone());
        self.jobs.tool_longer(call, servers.job_extra(), move || {
            servers
                .format(&file_path)
                .unwrap_or_else(|| no_formatter(&ws, &ide_name, &file_path))
        });
    }

    /// A server's diagnostics for a file changed: `diagnostics_changed` to every client, unless
    /// the editor reports that file (`--stdio`).
    pub(super) fn on_lsp_change(&mut self, change: FileDiagnostics) {
        let found = looked_up(&self.ws, &change.uri);
        if found.is_none() {
            return;
        }
        let resolved = || key_of_looked_up(found.as_ref());
        if self
            .diagnostics
            .reported_as(&change.uri, resolved)
            .is_some()
        {
            return;
        }
        self.handle.notify(
            Target::All,
            &Notification::DiagnosticsChanged(DiagnosticsChanged {
                uri: change.uri,
                diagnostics: change.diagnostics,
            }),
        );
    }

    /// Whether the editor reports the file `uri` names (in any spelling, through any link).
    fn editor_reported(&self, uri: &str) -> bool {
        (self.diagnostics)
            .reported_as(uri, || resolved_key(&self.ws, uri))
            .is_some()
    }

    /// The files' spellings for the client that made `call` ([`Spellings::for_client`]).
    fn spellings_for(&self, call: CallId) -> Spellings {
        let client = self.handle.client_paths(call.conn).unwrap_or_default();
        self.spellings.for_client(client)
    }

    /// What the editor reported: for one file, or every file with diagnostics (a file the client
    /// asked about named as it asked, the others as the client names files: [`Spellings`]).
    pub(super) fn answer_editor_diagnostics(&self, call: CallId, uri: Option<&str>) -> ToolResult {
        let asked =
            uri.map(|want| (self.diagnostics).reported_as(want, || resolved_key(&self.ws, want)));
        let files: Vec<FileDiagnostics> = self
            .diagnostics
            .iter()
            .filter(|(u, d)| !d.is_empty() && asked.is_none_or(|a| a == Some(u.as_str())))
            .map(|(u, d)| FileDiagnostics {
                // The client matches the answer to its question by URI: its own back when it
                // asked with one.
                uri: uri
                    .filter(|want| claude_ide_bridge::is_file_uri(want))
                    .unwrap_or(u)
                    .to_owned(),
                diagnostics: d.clone(),
            })
            .collect();
        ToolResult::json(&within_answer(self.spellings_for(call).respell(files)).0)
    }

    /// Waits, at most `within`, for the answers of the jobs running (see [`Jobs::settle`]).
    ///
    /// [`Jobs::settle`]: super::jobs::Jobs::settle
    pub fn settle_jobs(&self, within: Duration) {
        self.jobs.settle(within);
    }

    /// Stops the language servers, if any ran.
    pub fn stop_language_servers(&self, grace: Duration) {
        if let Some(servers) = &self.lsp {
            servers.shutdown(grace);
        }
    }
}

/// The path an editor means by `uri`: an absolute path, or a `file://` URI's path, with `.`,
/// `..` and repeated `/` resolved (as `--path-map` resolves them): any spelling of a file's
/// path is one key (`/w/./a.rs` and `/w//a.rs` were kept, and answered, apart from `/w/a.rs`).
pub(super) fn editor_path(uri: &str) -> Option<String> {
    let path = if uri.starts_with('/') {
        uri.to_owned()
    } else if std::path::Path::new(uri).is_absolute() {
        // A Windows path (on Windows only), in the wire form its file:// URI has.
        claude_ide_bridge::to_posix(uri)
    } else {
        uri_to_path(uri)?
    };
    crate::sys::normalize_wire(&path)
}

/// Whether two URIs (or paths) name the same file (in any case on Windows).
pub(super) fn same_uri(a: &str, b: &str) -> bool {
    a == b
        || matches!((editor_path(a), editor_path(b)), (Some(x), Some(y))
            if x == y || crate::sys::case_key(&x) == crate::sys::case_key(&y))
}

#[cfg(test)]
mod tests;
