//! One server process and the threads around its [`State`]: a reader (stdout → frames → state), a writer
//! (state's outbox → stdin, a file's text escaped as JSON as it is written, never blocked in a write; it
//! also enforces the `initialize` timeout, also while the server does not read, and reaps the process),
//! an exit watch (asleep until the process exits: an exit the reader cannot see, a process the server
//! started holding its output), and a copier of stderr to the log. Callers wait on the state's condition variable with their own deadline,
//! so a server that hangs never holds a caller past it.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use claude_ide_bridge::{Diagnostic, FileDiagnostics};
use lsp_types::request::Request;
use serde_json::value::RawValue;

use crate::codec::Decoder;
use crate::log::Log;
use crate::messages::{DocumentDiagnostic, PullReport};
use crate::rpc::{ResponseError, SharedText};
use crate::state::{Disk, Effect, LspLimits, Phase, Pulled, State};
use crate::sys;
use crate::Checked;

pub(crate) type OnChange = Arc<dyn Fn(FileDiagnostics) + Send + Sync>;

/// What is told of a server that ends unasked ([`crate::Lsp::on_exit`]).
pub(crate) type OnExit = Arc<dyn Fn(&crate::ServerExit) + Send + Sync>;

/// JSON-RPC's "server cancelled" code: the server asks for the request again.
const SERVER_CANCELLED: i64 = -32802;
/// "content modified": the document changed while the server worked on the request.
const CONTENT_MODIFIED: i64 = -32801;

/// How long a caller bound by its client's timeout waits for the answer for a text the server
/// checks again because a file it includes changed, before it is answered what the server said
/// of the text before ([`ServerProcess::diagnostics`]): a small C file is checked again in
/// tens of milliseconds, a large C++ one in seconds (its headers rebuilt), and the client's
/// baseline waits 500 ms at most, in which the bridge's own answer must fit.
const RECHECK_GRACE: Duration = Duration::from_millis(150);

pub(crate) struct StateMonitor {
    state: Mutex<State>,
    cond: Condvar,
}

impl StateMonitor {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state: keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `done` holds or `deadline` passes; returns the guard and whether `done` held.
    fn wait_until<'a>(
        &'a self,
        mut guard: MutexGuard<'a, State>,
        deadline: Instant,
        mut done: impl FnMut(&mut State) -> bool,
    ) -> (MutexGuard<'a, State>, bool) {
        loop {
            if done(&mut guard) {
                return (guard, true);
            }
            let now = Instant::now();
            if now >= deadline {
                return (guard, false);
            }
            guard = self
                .cond
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Waits, with the server gone or its input closed, until the reader has read its output to
    /// the end (the reader's own end makes it `Exited`), or has waited in a read for
    /// [`EXIT_SETTLE`] (what is left is held open by a process the server started), at most
    /// [`EXIT_SETTLE_MOST`]: what the server wrote before it went (its last answers and
    /// publishes) is read and told first.
    fn wait_for_reader<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let asked = Instant::now();
        let give_up = asked + EXIT_SETTLE_MOST;
        let exited = |s: &mut State| matches!(s.phase, Phase::Exited(_));
        while !exited(&mut state) {
            let now = Instant::now();
            // Read to its end already, or waiting in a read long enough since the exit: held
            // open. A read begun before it (a server quiet for a while, then killed) is not
            // one: its end may not have been read yet (a reader slow to be scheduled).
            let settled = (state.reading_since).map(|since| since.max(asked) + EXIT_SETTLE);
            if now >= give_up || settled.is_some_and(|at| now >= at) {
                break;
            }
            let wake = settled.unwrap_or(now + EXIT_SETTLE).min(give_up);
            state = self.wait_until(state, wake, exited).0;
        }
        state
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum RequestError {
    Timeout,
    Exited(String),
    Server(ResponseError),
    /// The text it is about could not be sent (see [`State::sync`]): it was not asked.
    NotSent,
    /// The answer is not what the request's type says it is, with why.
    BadAnswer(String),
}

/// A started server process.
pub(crate) struct ServerProcess {
    shared: Arc<StateMonitor>,
    on_change: OnChange,
    log: Log,
    pub started: Instant,
    pub pid: u32,
}

/// What a server is started with, besides its command ([`ServerProcess::start`]).
pub(crate) struct Launch<'a> {
    /// The workspace folders it is told of in `initialize`.
    pub folders: Vec<lsp_types::WorkspaceFolder>,
    /// Its working directory (the first workspace folder).
    pub cwd: Option<&'a std::path::Path>,
    pub limits: &'a LspLimits,
    /// Its log (its stderr and the program's lines about it).
    pub log: Log,
    /// Whether every message to and from it is logged too.
    pub trace: bool,
    /// Told each change of its diagnostics.
    pub on_change: OnChange,
    /// Counted up when its open documents are checked again ([`State::rechecks`]).
    pub rechecks: Arc<std::sync::atomic::AtomicU64>,
    /// Told when it ends unasked, once set.
    pub on_exit: Arc<std::sync::OnceLock<OnExit>>,
    /// The languages it serves, for that telling.
    pub languages: Vec<String>,
    /// How many times its command was started again in a row before this start (whether its
    /// end uses up [`LspLimits::max_restarts`]).
    pub restarts: u32,
}

/// When a server that has not answered `initialize` is given up: [`LspLimits::initialize_timeout`]
/// after its start.
#[derive(Clone, Copy)]
struct InitBound {
    deadline: Instant,
    timeout: Duration,
}

impl ServerProcess {
    /// Spawns `command` in its own process group (so that a stop takes its children too, and a Ctrl-C in the
    /// bridge's terminal does not reach it) and sends `initialize`.
    pub fn start(command: &[String], launch: Launch<'_>) -> std::io::Result<ServerProcess> {
        let Launch {
            folders,
            cwd,
            limits,
            log,
            trace,
            on_change,
            rechecks,
            on_exit,
            languages,
            restarts,
        } = launch;
        let (program, args) = command
            .split_first()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        // The file found on PATH, as `doctor` reports it: on Windows that is how npm's
        // `name.cmd` shims run (std starts a `.cmd` through cmd.exe, quoting its arguments).
        let found = crate::table::find_program(program);
        let mut cmd = Command::new(found.as_deref().unwrap_or(std::path::Path::new(program)));
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        sys::own_tree(&mut cmd);
        let mut child = cmd.spawn()?;
        if let Err(e) = sys::adopt(&child) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let name = crate::table::server_name(program);
        let mut state = State::new(limits.clone(), folders);
        state.pid = Some(pid);
        state.name = Some(name.clone());
        state.rechecks = rechecks;
        state.begin(
            std::process::id(),
            crate::table::initialization_options(program, found.as_deref()),
        );
        let shared = Arc::new(StateMonitor {
            state: Mutex::new(state),
            cond: Condvar::new(),
        });
        let log = log.for_server(format!("{name}[{pid}]"));
        let trace = trace.then(|| log.clone());
        let spawn = |what: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(format!("lsp-{what}-{pid}"))
                .spawn(f)
        };
        let started = Instant::now();
        // A thread that cannot be started leaves no server behind: it is killed and reaped, and
        // the threads already started see it gone. The writer, which takes the process, is
        // started last.
        let give_up = |e: std::io::Error, child: Option<Child>| {
            {
                let mut state = shared.lock();
                state.exit(format!("could not start its threads: {e}"));
                state.reaping = true;
            }
            shared.cond.notify_all();
            sys::kill_tree(pid);
            match child {
                Some(mut child) => drop(child.wait()),
                // Dropped with the writer's closure: reaped by its id.
                None => sys::reap_id(pid),
            }
            shared.lock().reaped = true;
            e
        };
        {
            let (shared, log, on_change) = (shared.clone(), log.clone(), on_change.clone());
            let (max, trace) = (limits.max_message_bytes, trace.clone());
            let reader =
                Box::new(move || read_loop(&shared, stdout, max, &log, trace.as_ref(), &on_change));
            if let Err(e) = spawn("reader", reader) {
                return Err(give_up(e, Some(child)));
            }
        }
        {
            let log = log.clone();
            if let Err(e) = spawn("stderr", Box::new(move || log.copy_stream(stderr))) {
                return Err(give_up(e, Some(child)));
            }
        }
        {
            let (shared, log, trace) = (shared.clone(), log.clone(), trace.clone());
            let init = InitBound {
                deadline: started + limits.initialize_timeout,
                timeout: limits.initialize_timeout,
            };
            let ending = Ending {
                on_change: on_change.clone(),
                on_exit,
                command: command.to_vec(),
                languages,
                restarts,
                limits: limits.clone(),
                started,
            };
            let writer = Box::new(move || {
                write_loop(&shared, child, stdin, init, &log, trace.as_ref(), &ending)
            });
            if let Err(e) = spawn("writer", writer) {
                return Err(give_up(e, None));
            }
        }
        Ok(ServerProcess {
            shared,
            on_change,
            log,
            started,
            pid,
        })
    }

    pub fn phase(&self) -> Phase {
        self.shared.lock().phase.clone()
    }

    /// Since when it has not answered work it was given ([`crate::state::State::silent_since`]).
    pub fn owing_since(&self) -> Option<Instant> {
        self.shared.lock().silent_since()
    }

    /// When the server was seen gone, once its process is reaped and its diagnostics told gone
    /// (see `write_loop`): a server started in its place comes after.
    pub fn gone_at(&self) -> Option<Instant> {
        let state = self.shared.lock();
        state.exited_at.filter(|_| state.reaped)
    }

    /// Whether it ran (answered `initialize`), whatever its phase now.
    pub fn ran(&self) -> bool {
        self.shared.lock().ran
    }

    pub fn can_format(&self) -> bool {
        self.shared.lock().caps.formatting
    }

    /// Waits until the server is initialized (true) or gone, or `deadline` passes.
    pub fn wait_ready(&self, deadline: Instant) -> bool {
        let guard = self.shared.lock();
        let (guard, _) = self
            .shared
            .wait_until(guard, deadline, |s| s.phase != Phase::Starting);
        guard.is_running()
    }

    /// Hands `text` of `path` to the server without waiting; false when it will not have it
    /// (see [`State::sync`]).
    pub fn sync(&self, path: &str, language: &str, text: &SharedText<'_>, disk: Disk) -> bool {
        let mut state = self.shared.lock();
        let sent = state.sync_shared(path, language, text, disk);
        // A server that checks on request starts on this text now, not at the next question.
        if let Some(version) = state.version(path).filter(|_| sent) {
            state.ask_check(path, version);
        }
        let owed = disk == Disk::Written && state.owes_save(path, text);
        self.release(state);
        if owed {
            self.written(path, text);
        }
        sent
    }

    /// A sync of a text the file holds found it handed over ahead of its write
    /// ([`State::owes_save`]): the server is told it is saved when the file holds it indeed, read
    /// outside the state's lock (a slow disk holds up no other call), and only when it is a
    /// regular file of the text's length (a FIFO put in its place is not opened).
    fn written(&self, path: &str, text: &SharedText<'_>) {
        if !on_disk(path, text.as_str()) {
            return;
        }
        let mut state = self.shared.lock();
        state.written(path, text);
        self.release(state);
    }

    /// The end of each step that gave the server something to read: a server found hung is
    /// killed ([`kill_if_hung`]), then what the state left to do is done outside its lock
    /// ([`ServerProcess::deliver`]).
    fn release(&self, mut state: MutexGuard<'_, State>) {
        kill_if_hung(&mut state);
        let effects = state.take_effects();
        self.deliver(state, effects);
    }

    /// Does what the state left to do, outside its lock: tells `on_change` of a file whose
    /// diagnostics changed, writes a line to the log. Counted in [`State::telling`] meanwhile:
    /// the server's end waits for it before telling its diagnostics gone.
    fn deliver(&self, mut state: MutexGuard<'_, State>, effects: Vec<Effect>) {
        let changes = effects.iter().any(|e| matches!(e, Effect::Changed(_)));
        state.telling += usize::from(changes);
        drop(state);
        self.shared.cond.notify_all();
        apply(effects, &self.on_change, &self.log);
        if changes {
            let mut state = self.shared.lock();
            state.telling = state.telling.saturating_sub(1);
            drop(state);
            self.shared.cond.notify_all();
        }
    }

    pub fn known(&self, path: &str) -> Vec<Diagnostic> {
        self.shared.lock().known(path)
    }

    /// Waits until every document checked again ([`State::recheck`]) has its answer, the server
    /// is no longer running, or `deadline` passes.
    pub fn await_rechecks(&self, deadline: Instant) {
        let state = self.shared.lock();
        drop(
            self.shared
                .wait_until(state, deadline, |s| !s.is_running() || !s.rechecking()),
        );
    }

    pub fn all_known(&self) -> Vec<FileDiagnostics> {
        self.shared.lock().all_known()
    }

    /// What the server watches on disk: see [`State::watched`].
    pub fn watched(&self) -> (Vec<Arc<crate::watch::WatchSet>>, std::time::SystemTime) {
        self.shared.lock().watched()
    }

    /// Files changed on disk: see [`State::files_changed`].
    pub fn files_changed(&self, changes: &[(String, crate::watch::FileChange)]) {
        let mut state = self.shared.lock();
        state.files_changed(changes);
        self.release(state);
    }

    /// Whether the server has `path` open: see [`State::is_open`].
    pub fn is_open(&self, path: &str) -> bool {
        self.shared.lock().is_open(path)
    }

    /// The file `path` is gone: see [`State::file_gone`].
    pub fn file_gone(&self, path: &str) {
        let mut state = self.shared.lock();
        state.file_gone(path);
        self.release(state);
    }

    /// Sends a request and waits for its answer until `deadline` (then cancels it), with `before`
    /// done on the state in the same hold of its lock (a sync whose text the request is about: no
    /// other sync of the file comes between them); when it answers false, nothing is asked.
    pub fn request_after<R: Request>(
        &self,
        before: impl FnOnce(&mut State) -> bool,
        params: R::Params,
        deadline: Instant,
    ) -> Result<R::Result, RequestError> {
        self.request_read::<R, _>(before, params, deadline, crate::rpc::decode::<R>)
    }

    /// [`ServerProcess::request_after`], its answer read by `read` (outside the state's lock).
    fn request_read<R: Request, T>(
        &self,
        before: impl FnOnce(&mut State) -> bool,
        params: R::Params,
        deadline: Instant,
        read: impl FnOnce(&RawValue) -> Result<T, String>,
    ) -> Result<T, RequestError> {
        let mut state = self.shared.lock();
        if let Phase::Exited(why) = &state.phase {
            return Err(RequestError::Exited(why.clone()));
        }
        let id = before(&mut state).then(|| state.request::<R>(&params));
        self.release(state);
        let Some(id) = id else {
            return Err(RequestError::NotSent);
        };
        let state = self.shared.lock();
        let mut answer = None;
        let (mut state, _) = self.shared.wait_until(state, deadline, |s| {
            answer = s.take_answer(id);
            answer.is_some() || matches!(s.phase, Phase::Exited(_))
        });
        match answer {
            // Read outside the lock: the reader goes on meanwhile.
            Some(Ok(result)) => {
                drop(state);
                read(&result).map_err(RequestError::BadAnswer)
            }
            Some(Err(e)) => Err(RequestError::Server(e)),
            None => {
                state.cancel(id);
                kill_if_hung(&mut state);
                self.shared.cond.notify_all();
                match &state.phase {
                    Phase::Exited(why) => Err(RequestError::Exited(why.clone())),
                    _ => Err(RequestError::Timeout),
                }
            }
        }
    }

    /// Syncs `text` and answers the diagnostics computed for it: pulled when the server offers pulls, else the
    /// ones published for this version; past `deadline`, what is known (not fresh). With `hard` (a caller
    /// bound by its client's timeout), a text the server checks again because a file it includes changed
    /// ([`State::held_from_before_recheck`]) is waited for only [`RECHECK_GRACE`], then answered what the
    /// server said of it before ([`Checked::from_before`]).
    pub fn diagnostics(
        &self,
        path: &str,
        language: &str,
        text: &SharedText<'_>,
        deadline: Instant,
        hard: bool,
    ) -> Checked {
        // The version this text has in the server, taken in the same hold of the lock as the
        // sync: an answer counts only for it (a sync of another text meanwhile, an accepted diff,
        // makes what comes next that text's, not this one's).
        let mine = {
            let mut state = self.shared.lock();
            let sent = state.sync_shared(path, language, text, Disk::Written);
            let mine = state.version(path).filter(|_| sent);
            let owed = state.owes_save(path, text);
            self.release(state);
            if owed {
                self.written(path, text);
            }
            mine
        };
        let Some(mine) = mine else {
            return Checked::stale(self.known(path));
        };
        loop {
            let state = self.shared.lock();
            if !state.is_running() {
                return Checked::stale(state.known(path));
            }
            if state.checks_on_request() {
                match self.check_on_request(state, path, mine, deadline) {
                    Some(checked) => return checked,
                    None => continue, // it does not after all: its publishes are waited for
                }
            }
            if !state.caps.pull {
                let before = hard && state.held_from_before_recheck(path, mine);
                let until = match before {
                    true => deadline.min(Instant::now() + RECHECK_GRACE),
                    false => deadline,
                };
                let (mut state, _) = self.shared.wait_until(state, until, |s| {
                    s.fresh_for(path, mine) || !s.is_running() || s.caps.pull
                });
                if state.caps.pull && state.is_running() && Instant::now() < deadline {
                    continue; // the server registered pulls meanwhile
                }
                // Published without a version: final once no other publish follows for a while,
                // and not while the server reports work in progress (see `State::settles_at`).
                let mut settled = true;
                while state.is_running() && state.fresh_for(path, mine) {
                    let Some(quiet) = state.settles_at(path) else {
                        break;
                    };
                    let now = Instant::now();
                    let busy = state.busy_for(path, now);
                    if !busy && now >= quiet {
                        break;
                    }
                    if now >= deadline {
                        settled = false;
                        break;
                    }
                    let until = if busy { deadline } else { quiet.min(deadline) };
                    let (seq, work) = (state.publish_seq(path), state.progress_len());
                    let (next, _) = self.shared.wait_until(state, until, |s| {
                        s.publish_seq(path) != seq || s.progress_len() != work || !s.is_running()
                    });
                    state = next;
                }
                let fresh = settled && state.is_running() && state.fresh_for(path, mine);
                // Not answered for a check again of the same text within the grace: what the
                // server said of the text before it, for a caller bound by its client's timeout.
                let from_before = !fresh
                    && hard
                    && state.is_running()
                    && state.held_from_before_recheck(path, mine);
                return Checked {
                    fresh,
                    from_before,
                    diagnostics: state.known(path),
                    down: Vec::new(),
                };
            }
            let version = mine;
            if state.version(path) != Some(mine) {
                // Another text of the file was synced meanwhile: not this one's to ask about.
                return Checked::stale(state.known(path));
            }
            let Some(params) = state.pull_params(path) else {
                return Checked::stale(state.known(path));
            };
            let max = state.max_diagnostics_per_file();
            drop(state);
            // Read keeping only what is kept: a report of thousands is not built whole.
            let read = |raw: &RawValue| {
                crate::rpc::decode_with::<DocumentDiagnostic, _>(raw, |r| PullReport::read(r, max))
            };
            // The version is checked again where the request is queued, in the same hold of the
            // lock: a text synced in between (another thread's `sync`) would otherwise go out
            // before the request, and the answer, for that text, be kept as this one's.
            let still_mine = |s: &mut State| s.version(path) == Some(version);
            match self.request_read::<DocumentDiagnostic, _>(still_mine, params, deadline, read) {
                Ok(report) => {
                    let mut state = self.shared.lock();
                    match state.take_pull(path, version, report) {
                        Ok(Pulled::Kept(changed)) => {
                            let known = state.known(path);
                            let mut effects = state.take_effects();
                            effects.extend(changed.map(Effect::Changed));
                            self.deliver(state, effects);
                            return Checked {
                                diagnostics: known,
                                fresh: true,
                                from_before: false,
                                down: Vec::new(),
                            };
                        }
                        // Closed meanwhile (to make room, or refused): the answer is still the
                        // one asked for, what the client holds is not.
                        Ok(Pulled::Passed(Some(mut diagnostics))) => {
                            // With what the server published for the file (`Stored::pushed`)
                            // that the answer does not hold already.
                            let pushed = state.pushed(path, version);
                            let more: Vec<_> = (pushed.into_iter())
                                .filter(|d| !diagnostics.contains(d))
                                .collect();
                            diagnostics.extend(more);
                            return Checked {
                                diagnostics,
                                fresh: true,
                                from_before: false,
                                down: Vec::new(),
                            };
                        }
                        Ok(Pulled::Passed(None)) | Err(_) => {
                            return Checked::stale(state.known(path))
                        }
                    }
                }
                Err(RequestError::Server(e))
                    if e.code == SERVER_CANCELLED || e.code == CONTENT_MODIFIED =>
                {
                    // Asked again after a short pause, within the deadline.
                    let pause = Instant::now() + Duration::from_millis(20);
                    if pause >= deadline {
                        return Checked::stale(self.known(path));
                    }
                    std::thread::sleep(pause - Instant::now());
                }
                Err(_) => return Checked::stale(self.known(path)),
            }
        }
    }

    /// [`ServerProcess::diagnostics`] from a server that checks on request
    /// ([`State::checks_on_request`]): the answer of its check of version `mine` of `path`, asked
    /// now or already on its way, once it has come; past `deadline`, what is known (not fresh),
    /// the check going on (its answer is kept when it comes). `None` when the server turned out
    /// not to check on request (its command refused): then its publishes are what there is.
    fn check_on_request(
        &self,
        mut state: MutexGuard<'_, State>,
        path: &str,
        mine: i32,
        deadline: Instant,
    ) -> Option<Checked> {
        let Some(generation) = state.ask_check(path, mine) else {
            return Some(Checked::stale(state.known(path)));
        };
        self.release(state);
        let state = self.shared.lock();
        let mut outcome = None;
        let (state, _) = self.shared.wait_until(state, deadline, |s| {
            outcome = s.check_outcome(path, mine, generation);
            outcome.is_some() || !s.is_running() || !s.checks_on_request()
        });
        if outcome != Some(true)
            && state.is_running()
            && !state.checks_on_request()
            && Instant::now() < deadline
        {
            return None;
        }
        Some(Checked {
            fresh: outcome == Some(true) && state.is_running() && state.fresh_for(path, mine),
            from_before: false,
            diagnostics: state.known(path),
            down: Vec::new(),
        })
    }

    /// Stops the server: `shutdown` (answer awaited until `deadline`), `exit`, input closed, the process
    /// waited for until `deadline`, then its process group killed. Returns once it is reaped, or shortly after
    /// the kill.
    pub fn stop(&self, deadline: Instant) {
        let id = {
            let mut state = self.shared.lock();
            let id = state.begin_shutdown();
            // The request overflowed the input of a server that stopped reading it: killed now,
            // not after the grace.
            kill_if_hung(&mut state);
            if state.phase == Phase::Starting {
                // Not initialized: there is nothing to shut down politely, and its writer would
                // wait for the answer to `initialize`.
                state.exit("stopped while starting");
                kill_group(&state);
            }
            self.shared.cond.notify_all();
            id
        };
        if let Some(id) = id {
            let state = self.shared.lock();
            let (mut state, _) = self.shared.wait_until(state, deadline, |s| {
                s.take_answer(id).is_some() || matches!(s.phase, Phase::Exited(_))
            });
            state.finish_shutdown();
            kill_if_hung(&mut state);
            self.shared.cond.notify_all();
        }
        let state = self.shared.lock();
        let (mut state, reaped) = self.shared.wait_until(state, deadline, |s| s.reaped);
        if reaped {
            return;
        }
        state.exit("stopped: no exit within the grace period, killed");
        kill_group(&state);
        self.shared.cond.notify_all();
        // SIGKILL is immediate; the writer reaps as soon as it is unblocked.
        let _ = self
            .shared
            .wait_until(state, Instant::now() + Duration::from_secs(2), |s| s.reaped);
    }
}

/// Tells `on_change` of the changes and writes the lines to the log.
fn apply(effects: Vec<Effect>, on_change: &OnChange, log: &Log) {
    for effect in effects {
        match effect {
            Effect::Changed(change) => tell(on_change, change, log),
            Effect::Log(line) => log.line(&line),
        }
    }
}

/// Calls `on_change`; a panic in it is logged rather than allowed to end the thread reading the server.
fn tell(on_change: &OnChange, change: FileDiagnostics, log: &Log) {
    let call = std::panic::AssertUnwindSafe(|| on_change(change));
    if std::panic::catch_unwind(call).is_err() {
        log.line("the on_change callback panicked (ignored)");
    }
}

/// Kills a server its caller found hung ([`State::take_hung`]): nothing else would, since its
/// writer is blocked writing to it and its reader reading from it.
fn kill_if_hung(state: &mut State) {
    if state.take_hung(Instant::now()) {
        kill_group(state);
    }
}

/// SIGKILL to the server's process group, unless the writer has started reaping it (it kills it first).
fn kill_group(state: &State) {
    if state.reaping {
        return;
    }
    if let Some(pid) = state.pid {
        sys::kill_tree(pid);
    }
}

/// How often the writer, waiting for the server to read its input, looks at whether to give up
/// (the server exited, hung, or past its `initialize` deadline): a server can stop reading
/// before it answers `initialize`, and the writer would wait in its write for good. While it has
/// nothing to write, it sleeps until one of those deadlines, or until it is told of work, with
/// none when there is none (an idle bridge makes no wake-up for its servers).
const WATCH: Duration = Duration::from_secs(1);

/// How long the reader must have waited in a read, with the process exited, for its output to
/// be taken as held open by a process the server started: until then what the server wrote
/// before it exited is still being read (its last answers, its last publishes), and the end of
/// its output, which the reader records, usually comes. Long enough for a reader woken late on
/// a loaded machine (100 ms named a process that held the output 2 times in 25 crashes, under
/// load, where there was none).
const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// The longest the exit watch waits for that (a process the server started that keeps writing).
const EXIT_SETTLE_MOST: Duration = Duration::from_secs(5);

/// The writer's checks, under the lock: the server is done (exited, found exited, or past its
/// `initialize` deadline, each recorded), or not.
fn done(state: &mut State, init: InitBound) -> bool {
    if matches!(state.phase, Phase::Exited(_)) {
        return true;
    }
    if state.phase == Phase::Starting && Instant::now() >= init.deadline {
        let timeout = init.timeout;
        state.exit(format!("hung: no answer to initialize within {timeout:?}"));
        return true;
    }
    if state.exit_if_hung(Instant::now()) {
        return true;
    }
    if state.process_ended {
        state.exit(
            "exited (seen by its status, its output still open: held by a process it started?)"
                .to_owned(),
        );
        return true;
    }
    false
}

/// Writes `bytes` to the server's input (non-blocking), looking every [`WATCH`] at whether to give
/// up (`give_up`): `Ok(false)` when it gave up.
fn write_watched(
    input: &mut ChildStdin,
    mut bytes: &[u8],
    mut give_up: impl FnMut() -> bool,
) -> std::io::Result<bool> {
    while !bytes.is_empty() {
        match input.write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                sys::wait_writable(input, WATCH)?;
                if give_up() {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Whom the writer tells of its server's end: `on_change` of the diagnostics gone with it, and
/// [`crate::Lsp::on_exit`] of the end itself when nobody asked for it (with what it says).
struct Ending {
    on_change: OnChange,
    on_exit: Arc<std::sync::OnceLock<OnExit>>,
    command: Vec<String>,
    languages: Vec<String>,
    restarts: u32,
    limits: LspLimits,
    started: Instant,
}

impl Ending {
    /// How long the server is not started again after this end: its restarts used up, unless
    /// it ran long enough for the next start to begin a fresh series (`Inner::server_of`).
    fn given_up_for(&self, ended: Instant) -> Option<Duration> {
        let restarts = crate::restarts_counted(self.restarts, self.started, ended);
        (restarts >= self.limits.max_restarts).then_some(self.limits.given_up_for)
    }
}

fn write_loop(
    shared: &Arc<StateMonitor>,
    child: Child,
    stdin: ChildStdin,
    init: InitBound,
    log: &Log,
    trace: Option<&Log>,
    told: &Ending,
) {
    let pid = child.id();
    // The process's exit, seen by its status: a server can exit while a process it started keeps
    // its output open (the reader then sees no end).
    let on_exit = {
        let shared = Arc::clone(shared);
        move || {
            let mut state = shared.wait_for_reader(shared.lock());
            state.process_ended = true;
            drop(state);
            shared.cond.notify_all();
        }
    };
    let (exit_watch, watching) = sys::watch_exit(child, on_exit);
    // Non-blocking, so that a server that stops reading does not hold the writer from its checks.
    let mut stdin = sys::set_nonblocking(&stdin).then_some(stdin);
    let mut state = shared.lock();
    if let Err(e) = watching {
        state.exit(format!("could not start its threads: {e}"));
    }
    if stdin.is_none() {
        state.exit("could not set up its input".to_owned());
    }
    loop {
        if done(&mut state, init) {
            break;
        }
        if state.outbox.is_empty() {
            if state.close_input {
                stdin = None;
            }
            // The next deadline: `initialize`'s while it starts, the hang's while it owes work;
            // none otherwise (work, an exit and a stop all notify).
            let deadline = if state.phase == Phase::Starting {
                Some(init.deadline)
            } else {
                state.hung_since().map(|since| since + state.hang_timeout())
            };
            state = match deadline {
                Some(at) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    let woken = shared.cond.wait_timeout(state, wait);
                    woken.unwrap_or_else(|p| p.into_inner()).0
                }
                None => shared.cond.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
            continue;
        }
        let frames = state.take_outbox();
        drop(state);
        let mut failed = None;
        if let Some(input) = stdin.as_mut() {
            for frame in frames {
                if let Some(trace) = trace {
                    // Its header and the first 1,000 bytes of its body.
                    trace.line(&format!("-> {}", head(&frame.start(1100))));
                }
                let mut give_up = || {
                    let mut state = shared.lock();
                    done(&mut state, init)
                };
                match frame.write(|piece| write_watched(input, piece, &mut give_up)) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                let _ = input.flush();
            }
        }
        state = shared.lock();
        if let Some(e) = failed {
            // Its input closed: it exited, or is exiting, maybe with its last answers and
            // publishes still to read (an answer to its own request written just after it
            // ended gets here before its exit's watch): those are read first, as at its exit.
            stdin = None;
            state = shared.wait_for_reader(state);
            state.exit(format!("exited: its input is closed ({e})"));
        }
    }
    let reason = match &state.phase {
        Phase::Exited(why) => why.clone(),
        _ => unreachable!("the loop ends on exit"),
    };
    state.reaping = true;
    drop(state);
    drop(stdin);
    // Kill the whole group (a server's own children too) before reaping, so that the id is not reused.
    sys::kill_tree(pid);
    // As std says it: `exit status: 3`, `signal: 9 (SIGKILL)`.
    let status = match exit_watch.reap() {
        Ok(status) => status.to_string(),
        Err(e) => format!("not known ({e})"),
    };
    // Outside the budget: why it ended is what the log is read for.
    log.note(&format!("{reason}; process ended: {status}"));
    // Its diagnostics go with it: each file it had some for is told it has none, after the
    // changes already taken from it (the reader's last ones: it ends at the end of the output,
    // which the kill brings), and before a server is started in its place (`ServerProcess::gone_at`).
    let state = shared.lock();
    let (mut state, _) =
        shared.wait_until(state, Instant::now() + TELLING_WAIT, |s| s.telling == 0);
    let gone = state.gone();
    let asked = state.is_stopping();
    let ended = state.exited_at.unwrap_or_else(Instant::now);
    drop(state);
    apply(gone, &told.on_change, log);
    let mut state = shared.lock();
    state.reaped = true;
    drop(state);
    shared.cond.notify_all();
    if let Some(on_exit) = told.on_exit.get().filter(|_| !asked) {
        let exit = crate::ServerExit {
            command: told.command.clone(),
            languages: told.languages.clone(),
            pid,
            reason,
            status,
            given_up_for: told.given_up_for(ended),
        };
        // As `on_change`'s: logged and ignored.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_exit(&exit))).is_err() {
            log.note("the on_exit callback panicked (ignored)");
        }
    }
}

/// How long a server's end waits for the changes taken from it to be told (`on_change` should
/// return quickly) before telling its diagnostics gone.
const TELLING_WAIT: Duration = Duration::from_secs(2);

/// The start of a frame's body (or of a body), for the trace.
fn head(frame: &[u8]) -> String {
    let body = frame
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(frame, |i| &frame[i + 4..]);
    String::from_utf8_lossy(&body[..body.len().min(1000)]).into_owned()
}

/// Messages over the size limit the decoder passed over ([`Decoder::take_passed_over`]): the
/// request one answers ([`crate::codec::PassedOver::answers`]: a response, not the server's own
/// request) is answered with an error saying so, as if the server had; any other is logged. The
/// server is not stopped: an answer too large to take (a big file's formatting) is its work, not
/// its misbehaviour. Returns whether an answer was made up (waiters to wake).
fn answer_passed_over(
    shared: &StateMonitor,
    decoder: &mut Decoder,
    limit: usize,
    log: &Log,
    on_change: &OnChange,
) -> bool {
    let mut answered = false;
    for passed in decoder.take_passed_over() {
        let too_large = |what: &str| {
            format!(
                "{what} was {} bytes, over the limit of {limit} bytes for a message from a \
                 language server",
                passed.length
            )
        };
        match passed.answers {
            Some(id) => {
                let too_large = too_large("its answer");
                let frame = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": -32603, "message": too_large},
                });
                let effects = shared.lock().handle(frame.to_string().as_bytes());
                log.line(&format!("request {id}: {too_large}: passed over"));
                if let Ok(effects) = effects {
                    apply(effects, on_change, log);
                }
                answered = true;
            }
            None => {
                log.line(&format!(
                    "passed over a message of {} bytes (no answer to a request of the bridge's), \
                     over the limit of {limit} bytes: {:?}",
                    passed.length,
                    String::from_utf8_lossy(&passed.start[..passed.start.len().min(120)])
                ));
                // A request of its own: answered, so that it does not wait for good.
                if let Some(id) = passed.request {
                    shared.lock().refuse_request(id, &too_large("the request"));
                    answered = true;
                }
            }
        }
    }
    answered
}

/// Output that is not a frame (a log line on stdout) was passed over: the log says so.
fn log_skipped(decoder: &mut Decoder, log: &Log) {
    if let Some((n, said)) = decoder.take_skipped() {
        log.line(&format!(
            "skipped {n} bytes of its output that are not a Content-Length frame: {said:?}"
        ));
    }
}

/// The most read from a server's output at a time: each server's reader holds this much for the
/// server's life (a large message takes a few more reads).
const READ_BYTES: usize = 16 * 1024;

fn read_loop(
    shared: &StateMonitor,
    mut stdout: impl Read,
    max_message: usize,
    log: &Log,
    trace: Option<&Log>,
    on_change: &OnChange,
) {
    let mut decoder = Decoder::new(max_message);
    let mut buf = vec![0u8; READ_BYTES];
    let reason = loop {
        // Waiting for output from here (the exit watch's sign that all of it was read).
        shared.lock().reading_since = Some(Instant::now());
        let n = match stdout.read(&mut buf) {
            Ok(0) => break "exited".to_owned(),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("exited: reading its output failed ({e})"),
        };
        shared.lock().heard(Instant::now());
        decoder.push(&buf[..n]);
        let mut fatal = None;
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    // What came before this frame is told now, on its own: a read that carried
                    // two log lines with a frame between them tells two.
                    log_skipped(&mut decoder, log);
                    if let Some(trace) = trace {
                        trace.line(&format!("<- {}", head(&frame)));
                    }
                    let mut state = shared.lock();
                    let effects = state.handle(&frame);
                    kill_if_hung(&mut state);
                    // A reply queued (to the server's own request) goes out now, not after
                    // `on_change`.
                    let reply = !state.outbox.is_empty();
                    drop(state);
                    if reply {
                        shared.cond.notify_all();
                    }
                    match effects {
                        Ok(effects) => {
                            // Changes are told before waiters wake, so that a change is usually announced
                            // before the answer that includes it.
                            apply(effects, on_change, log);
                            shared.cond.notify_all();
                        }
                        Err(e) => {
                            fatal = Some(e);
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    fatal = Some(format!("bad output: {e}"));
                    break;
                }
            }
        }
        if answer_passed_over(shared, &mut decoder, max_message, log, on_change) {
            shared.cond.notify_all();
        }
        log_skipped(&mut decoder, log);
        if let Some(why) = fatal {
            break format!("stopped for misbehaving: {why}");
        }
    };
    let mut state = shared.lock();
    state.exit(reason);
    kill_group(&state);
    // Its changes are all told.
    state.telling = state.telling.saturating_sub(1);
    drop(state);
    shared.cond.notify_all();
}

/// Whether the file at `path` holds `text` now: a regular file of its length, asked before it is
/// opened (no device is opened, no symbolic link followed: one put in the file's place may lead
/// out of the workspace) and of the open file (a FIFO put in its place meanwhile does not hold
/// the open up), read to one byte past it.
fn on_disk(path: &str, text: &str) -> bool {
    let fits = |m: std::fs::Metadata| m.is_file() && m.len() == text.len() as u64;
    if !crate::sys::file_metadata(path).is_ok_and(fits) {
        return false;
    }
    let Ok(file) = crate::sys::open_to_read(path) else {
        return false;
    };
    let fits = file.metadata().is_ok_and(fits);
    let mut held = Vec::with_capacity(if fits { text.len() + 1 } else { 0 });
    fits && file
        .take(text.len() as u64 + 1)
        .read_to_end(&mut held)
        .is_ok()
        && held == text.as_bytes()
}

#[cfg(all(test, unix))]
mod tests {
    use super::on_disk;
    use super::{Phase, State, StateMonitor, EXIT_SETTLE};
    use crate::limits::LspLimits;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// A server quiet for a while (its reader waiting in a read since then) that is killed: the
    /// exit seen by its status first waits for the reader to read the end, rather than taking
    /// the old read for an output held open by a process the server started (a soak run's
    /// clangd, killed from outside on a busy machine: "its output still open: held by a process
    /// it started?").
    #[test]
    fn a_quiet_server_killed_is_no_output_held_open() {
        let mut state = State::new(LspLimits::default(), vec![]);
        state.reading_since = Some(Instant::now() - Duration::from_secs(10));
        let shared = Arc::new(StateMonitor {
            state: Mutex::new(state),
            cond: std::sync::Condvar::new(),
        });
        let reader = Arc::clone(&shared);
        let t = std::thread::spawn(move || {
            // The reader, scheduled late, reads the end.
            std::thread::sleep(EXIT_SETTLE / 5);
            reader.lock().exit("exited");
            reader.cond.notify_all();
        });
        let state = shared.wait_for_reader(shared.lock());
        assert!(matches!(state.phase, Phase::Exited(_)), "{:?}", state.phase);
        drop(state);
        t.join().unwrap();
    }

    /// A file holding the text is found holding it; a symbolic link put in its place, to a file
    /// outside holding the same text, is not read through.
    #[test]
    fn the_text_on_disk_is_read_without_following_a_link() {
        let d = tempfile::tempdir().unwrap();
        let (file, secret) = (d.path().join("a.py"), d.path().join("secret"));
        std::fs::write(&file, "s3cr3t\n").unwrap();
        std::fs::write(&secret, "s3cr3t\n").unwrap();
        let path = file.to_str().unwrap();
        assert!(on_disk(path, "s3cr3t\n"));
        assert!(!on_disk(path, "other!\n"));
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&secret, &file).unwrap();
        assert!(!on_disk(path, "s3cr3t\n"));
    }
}
