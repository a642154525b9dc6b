//! `serve` (and `run`, which serves and starts claude): the bridge's start, its host loop over
//! the terminal, the stdio editor and signals, and its stop.

use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::{Lsp, LspConfig, LspLog, ServerTable};
use claude_ide_bridge_runtime::{LockFileMode, Options};

use crate::host::sink::HostSink;
use crate::host::{read_line_capped, Line, StdioOut, MAX_LOSSY_LINE, MAX_STDIO_LINE};
use crate::host::{watch_silence, Stamped};
use crate::host::{
    Bounded, Decider, DiffPolicy, Flow, Host, HostConfig, HostInput, LanguageServers, StopOnPanic,
    WireLog, MAX_QUEUED_EVENTS, MAX_QUEUED_LINES,
};
use crate::pathmap::PathMap;
use crate::{
    failure, failure_with, folder_forms, not_a_folder, usage, CommonOpts, FAILURE, STDOUT_GRACE,
};
use crate::{host, lsp, panic, runtime, state, sys, ui};

/// How long the host's inputs stop before the memory freed by the work they brought is given back
/// to the system (`memory::give_back`): a bridge left running keeps its idle size after a day's
/// use (BENCHMARKS.md, "A day's use").
const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);
/// How long language servers get to exit after `shutdown`/`exit` before they are killed.
const LSP_GRACE: Duration = Duration::from_secs(2);
/// How long `$EDITOR`, still open at a stop, gets to end after SIGTERM, and after SIGKILL.
const EDITOR_GRACE: Duration = Duration::from_secs(2);
/// How long the exit waits for the answers of jobs still running (an accepted diff's check).
const JOBS_GRACE: Duration = Duration::from_secs(2);

/// `run`'s exit code when its command is not found, as a shell's.
const NOT_FOUND: u8 = 127;
/// `run`'s exit code when its command is found but cannot be run, as a shell's.
const CANNOT_RUN: u8 = 126;

fn decider(common: &CommonOpts, stdio: bool, run: bool) -> Result<Decider, String> {
    match (common.on_diff, stdio, run) {
        (Some(DiffPolicy::Ask), true, _) => {
            Err("--on-diff ask needs the terminal; with --stdio the editor decides".into())
        }
        (Some(DiffPolicy::Ask), _, true) => Err(
            "--on-diff ask needs the terminal, which claude uses in `run`; \
             decide in claude's own prompt (the default) or use accept/reject"
                .into(),
        ),
        (Some(DiffPolicy::Ask), false, false)
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) =>
        {
            Err(
                "--on-diff ask needs stdin and stderr on a terminal; off one, leave it out to \
                 decide in claude's own prompt (the default there), or use accept/reject"
                    .into(),
            )
        }
        (Some(p), _, _) => Ok(Decider::Policy(p)),
        (None, true, _) => Ok(Decider::Editor),
        (None, _, true) => Ok(Decider::Policy(DiffPolicy::Defer)),
        (None, false, false) => {
            if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
                Ok(Decider::Policy(DiffPolicy::Ask))
            } else {
                Ok(Decider::Policy(DiffPolicy::Defer))
            }
        }
    }
}

fn policy_name(d: Decider) -> &'static str {
    match d {
        Decider::Editor => "the editor decides (tool_call / diff_decision)",
        Decider::Policy(DiffPolicy::Ask) => "ask on this terminal",
        Decider::Policy(DiffPolicy::Accept) => "accept (FILE_SAVED; claude writes the file)",
        Decider::Policy(DiffPolicy::Reject) => "reject",
        Decider::Policy(DiffPolicy::Defer) => "defer (decide in claude's own prompt)",
    }
}

/// The `--path-map` values as one map. The bridge's folder of each `EDITOR=HERE` must hold a
/// workspace folder or lie inside one (else every path it maps is one claude cannot use), and is
/// also matched with its links resolved, as the bridge's own paths come.
fn path_mapping(specs: &[String], folders: &[String]) -> Result<PathMap, String> {
    let mut map = PathMap::default();
    for spec in specs {
        map.add(spec)?;
    }
    let real = |p: &str| {
        std::fs::canonicalize(p)
            .ok()
            .map(|r| r.to_string_lossy().into_owned())
    };
    let mut workspace: Vec<String> = folders.to_vec();
    workspace.extend(folders.iter().filter_map(|f| real(f)));
    // A folder named through a link: also known by its real path, which a HERE may hold alone.
    for f in folders {
        if let Some(r) = real(f).filter(|r| r != f) {
            map.also_workspace(f, &r);
        }
    }
    let overlaps = |h: &str| {
        workspace
            .iter()
            .any(|f| claude_ide_bridge::is_within(h, f) || claude_ide_bridge::is_within(f, h))
    };
    for here in map.here_folders() {
        // A typo in a folder inside the workspace would map nothing, unseen.
        match std::fs::metadata(&here) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("--path-map: {here} is not a folder")),
            Err(e) => return Err(format!("--path-map: {here}: {e}")),
        }
        let here_real = real(&here);
        if let Some(r) = &here_real {
            map.also_here(&here, r);
        }
        if !overlaps(&here) && !here_real.as_deref().is_some_and(overlaps) {
            return Err(format!(
                "--path-map: {here} neither holds a workspace folder nor lies in one ({}): the \
                 paths it maps would be outside the workspace",
                folders.join(", ")
            ));
        }
    }
    // `wsl` alone maps /mnt/<drive>: a workspace of the distribution's own files is named by
    // a Windows editor as \\wsl.localhost\<distribution>\..., which it does not map. (A
    // mapping given as EDITOR=HERE was checked above: a HERE inside a workspace folder maps
    // none of the folders themselves, and is accepted.)
    if !map.is_empty()
        && map.here_folders().is_empty()
        && workspace.iter().all(|f| map.to_editor(f).is_err())
    {
        return Err(format!(
            "--path-map: no mapping names a workspace folder ({}) for the editor: --path-map wsl \
             maps /mnt/<drive> only; for the distribution's own files, map the folder as Windows \
             names it (\\\\wsl.localhost\\<distribution>\\...=/home/...)",
            folders.join(", ")
        ));
    }
    Ok(map)
}

/// A thread that reads one terminal line each time it is asked to.
fn spawn_terminal_reader(tx: Sender<HostInput>) -> std::io::Result<Sender<()>> {
    let (want_tx, want_rx) = mpsc::channel::<()>();
    thread::Builder::new()
        .name("terminal".into())
        .spawn(move || {
            let _stop = StopOnPanic::new(&tx, "terminal");
            let mut lines = sys::LineReader::new();
            // What was typed before the question is dropped by its asker, before the question
            // is shown (`host::ask`): a key typed once it shows is kept.
            while want_rx.recv().is_ok() {
                let (input, end) = match lines.read_line() {
                    // Decoded leniently: one byte of another encoding is not the end of input.
                    sys::TerminalRead::Line(line) => {
                        let line = String::from_utf8_lossy(&line).into_owned();
                        (HostInput::TerminalLine(Some(line), Instant::now()), false)
                    }
                    sys::TerminalRead::End => (HostInput::TerminalLine(None, Instant::now()), true),
                    sys::TerminalRead::Away => (HostInput::TerminalAway, false),
                };
                if tx.send(input).is_err() || end {
                    break;
                }
            }
        })?;
    Ok(want_tx)
}

/// The stdio editor's lines, read on a thread of their own. At stdin's end the editor's writer is
/// told first that the bridge is stopping (as a signal does): a host waiting for room on stdout,
/// for an editor that no longer reads, goes on to take the end and stop. With `editor_timeout`,
/// the same once nothing came from the editor for that long ([`watch_silence`]).
fn spawn_stdio_reader(
    tx: Sender<HostInput>,
    out: StdioOut,
    editor_timeout: Option<Duration>,
) -> std::io::Result<()> {
    let heard = out.heard();
    if let Some(limit) = editor_timeout {
        let (tx, out) = (tx.clone(), out.clone());
        watch_silence(Arc::clone(&heard), limit, move || {
            out.stopping();
            let _ = tx.send(HostInput::EditorSilent(limit));
        })?;
    }
    thread::Builder::new().name("stdio".into()).spawn(move || {
        let _stop = StopOnPanic::new(&tx, "stdio");
        let stdin = std::io::stdin();
        let mut buf = Vec::new();
        let queue = Bounded::new(MAX_QUEUED_LINES);
        loop {
            // Room first: no line is read while the host has its fill of them (nor is the
            // editor's silence counted meanwhile).
            let place = heard.not_reading(|| queue.enter());
            let mut stdin = Stamped::new(stdin.lock(), &heard);
            let read = read_line_capped(&mut stdin, &mut buf, MAX_STDIO_LINE);
            if matches!(read, Ok(Line::Read)) {
                panic::test_panic("stdio");
            }
            let input = match read {
                Ok(Line::Eof) => break,
                // Taken as its end, but said: an editor handing over a non-blocking pipe
                // (`EAGAIN`) would otherwise see the bridge stop for no reason it is told.
                Err(e) => {
                    ui::say(&format!("stdin could not be read ({e}): taken as its end"));
                    break;
                }
                Ok(Line::Read) => match String::from_utf8(std::mem::take(&mut buf)) {
                    Ok(line) => HostInput::StdioLine(line, place),
                    Err(e) => HostInput::StdioLineNotUtf8(
                        e.utf8_error().valid_up_to(),
                        if e.as_bytes().len() <= MAX_LOSSY_LINE {
                            String::from_utf8_lossy(e.as_bytes()).into_owned()
                        } else {
                            String::new()
                        },
                        place,
                    ),
                },
                Ok(Line::TooLong(n)) => HostInput::StdioLineTooLong(n, place),
            };
            if tx.send(input).is_err() {
                return;
            }
        }
        out.stopping();
        let _ = tx.send(HostInput::StdinClosed);
    })?;
    Ok(())
}

/// What `no_proxy` and `NO_PROXY` are set to for the command `run` starts: the entries of both
/// (tools differ in which one they read, and curl and Python prefer the lowercase one, so setting
/// each from itself alone hid the other's exclusions), then the loopback names, each once.
fn no_proxy_value(lower: Option<OsString>, upper: Option<OsString>) -> OsString {
    let given: Vec<String> = [lower, upper]
        .iter()
        .flatten()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let all = given.iter().flat_map(|v| v.split(','));
    let mut entries: Vec<&str> = Vec::new();
    for entry in all.chain(["127.0.0.1", "localhost", "::1"]).map(str::trim) {
        if !entry.is_empty() && !entries.contains(&entry) {
            entries.push(entry);
        }
    }
    OsString::from(entries.join(","))
}

/// How long, at most, the editor's lines written before a signal are waited for under `--stdio`
/// ([`drain_stdio`]), and how long a quiet stdin that stays open ends the wait sooner.
const STDIO_DRAIN: Duration = Duration::from_secs(1);
const STDIO_QUIET: Duration = Duration::from_millis(250);

/// After a signal that stops a `--stdio` bridge: the editor's lines written before it are handled
/// first. An editor that quits sends its last lines (a decision: Vim's `:wq`, `:xa`), closes
/// the bridge's stdin and signals it (Vim's `stoponexit`, Neovim's `jobstop`) all at once, and
/// the signal may reach the host before the reader has handed over those lines: claude was then
/// told that nobody decided. Handled until stdin's end, which comes after the last line; when
/// stdin stays open (the bridge signalled alone, or a process the editor started holding its
/// pipe), until no line came for [`STDIO_QUIET`], at most [`STDIO_DRAIN`]. More signals do not
/// end it (Vim signals its job's process group, then the job: two SIGTERMs at once). The exit
/// status a panic asked for meanwhile ([`HostInput::Panicked`]), if any.
fn drain_stdio(rx: &mpsc::Receiver<HostInput>, shared: &Mutex<Host>) -> Option<i32> {
    let until = Instant::now() + STDIO_DRAIN;
    let mut status = None;
    loop {
        let wait = until
            .saturating_duration_since(Instant::now())
            .min(STDIO_QUIET);
        match rx.recv_timeout(wait) {
            Ok(HostInput::StdinClosed | HostInput::EditorSilent(_)) | Err(_) => return status,
            Ok(HostInput::Signal(_)) => {}
            Ok(input) => {
                let panicked = matches!(input, HostInput::Panicked(_));
                // The stop is under way: only a panic's status is kept of what the input says.
                let flow = lock_host(shared).handle(input);
                if let (true, Flow::Exit(code)) = (panicked, flow) {
                    status = Some(code);
                }
            }
        }
    }
}

/// What `serve` says when it listens outside loopback (`--host`): who can reach it then.
fn exposed(ip: IpAddr) -> Option<String> {
    if ip.is_loopback() {
        return None;
    }
    let from = if ip.is_unspecified() {
        "every network this machine is on"
    } else {
        "every machine that can route to that address"
    };
    Some(format!(
        "warning: listening on {ip}: reachable from {from}; the token is the only guard, and the \
         traffic is not encrypted (SECURITY.md)"
    ))
}

/// The host claude connects to unless `CLAUDE_CODE_IDE_HOST_OVERRIDE` names another: it writes
/// `ws://HOST:PORT` with the lock file's port, and lock files carry no address.
const CLAUDE_HOST: &str = "127.0.0.1";

/// What `CLAUDE_CODE_IDE_HOST_OVERRIDE` must say for a claude on this machine to reach a bridge
/// listening on `ip`: `None` when claude's own [`CLAUDE_HOST`] reaches it (`127.0.0.1`,
/// `0.0.0.0`, and `::` where it takes IPv4 too), else the address as claude puts it in its URL
/// (an IPv6 one in brackets; `::` as `[::1]`).
fn claude_host(ip: IpAddr) -> Option<String> {
    match ip.to_canonical() {
        IpAddr::V4(v4) if v4 == Ipv4Addr::LOCALHOST || v4.is_unspecified() => None,
        IpAddr::V4(v4) => Some(v4.to_string()),
        IpAddr::V6(v6) if v6.is_unspecified() => {
            (!sys::v6_any_takes_v4()).then(|| format!("[{}]", Ipv6Addr::LOCALHOST))
        }
        IpAddr::V6(v6) => Some(format!("[{v6}]")),
    }
}

/// What `serve` says when claude would not find it at [`CLAUDE_HOST`] by itself (`--host ::1`,
/// `--host 127.0.0.2`): the override a claude started by hand needs, `host` as [`claude_host`]
/// gives it.
fn elsewhere(ip: IpAddr, host: &str) -> String {
    format!(
        "warning: listening on {ip}: claude connects to {CLAUDE_HOST} unless \
         CLAUDE_CODE_IDE_HOST_OVERRIDE names another host; start it with \
         CLAUDE_CODE_IDE_HOST_OVERRIDE='{host}' (`run` and the Vim plugin set it)"
    )
}

fn lock_host(host: &Mutex<Host>) -> MutexGuard<'_, Host> {
    host.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a server's start failed on its port (taken, reserved, privileged), not on the
/// lock-file directory.
fn refused_by_the_port(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<claude_ide_bridge_runtime::ListenError>())
}

/// What a command found and then refused with "not found" lacks (`run`'s command, here and in
/// the Linux launcher, `sys::unix::tie`).
pub(crate) const NEEDS_MISSING: &str =
    " (the file is there: the interpreter its first line names, or the loader it needs, is missing)";

/// `run`'s command could not be started: why, and the exit status a shell gives then (127 not
/// found, 126 found but not runnable). `found`: it was found before (its start failed).
fn cannot_run(program: &OsStr, e: &std::io::Error, found: bool) -> ExitCode {
    // A name is looked for on PATH; a path (`./claude`, `/opt/x/claude`) is taken as it is.
    let a_path = Path::new(program).components().count() > 1;
    let (hint, code) = match e.kind() {
        std::io::ErrorKind::NotFound if found => (NEEDS_MISSING, NOT_FOUND),
        std::io::ErrorKind::NotFound if a_path => ("", NOT_FOUND),
        std::io::ErrorKind::NotFound => (
            " (is it installed and on PATH? give its full path after --)",
            NOT_FOUND,
        ),
        _ if a_path && Path::new(program).is_dir() => (" (it is a directory)", CANNOT_RUN),
        _ if sys::cannot_execute(e) => ("", CANNOT_RUN),
        _ => ("", FAILURE),
    };
    failure_with(
        code,
        &format!("cannot run {}: {e}{hint}", program.to_string_lossy()),
    )
}

/// `serve` and `run`: the request checked, the server started, the language servers and `run`'s
/// command with it, the host's loop until a stop, and the ordered stop. Each part returns the
/// exit status that ends the bridge early, when it must.
pub(super) fn serve(
    common: CommonOpts,
    stdio: bool,
    path_map: &[String],
    editor_timeout: Option<Duration>,
    run: Option<Vec<OsString>>,
) -> ExitCode {
    let start = Instant::now();
    sys::raise_open_files_limit();
    let asked = match Asked::check(&common, stdio, path_map, run.as_deref(), start) {
        Ok(asked) => asked,
        Err(code) => return code,
    };
    let (tx, rx) = mpsc::channel::<HostInput>();
    let stdio = match start_outputs(stdio, &tx) {
        Ok(stdio) => stdio,
        Err(code) => return code,
    };
    // The host, once made: until then every event is queued.
    let shared_host: Arc<OnceLock<Mutex<Host>>> = Arc::default();
    let sink = || {
        HostSink::new(
            shared_host.clone(),
            tx.clone(),
            MAX_QUEUED_EVENTS,
            StopOnPanic::new(&tx, "runtime"),
        )
    };
    // Told to stop while it waits for another start of the workspace (Ctrl-C, SIGTERM: the only
    // inputs before the server starts), it stops: nothing was started yet.
    let mut held = Vec::new();
    let mut stopped = None;
    let told_to_stop = || match rx.try_recv() {
        Ok(HostInput::Signal(sig)) => {
            stopped = Some(sig);
            true
        }
        Ok(other) => {
            held.push(other);
            false
        }
        Err(_) => false,
    };
    let kept = state::Kept::load(
        &asked.native,
        &asked.posix,
        common.port,
        common.new_token,
        told_to_stop,
    );
    // Anything else (a thread's panic) for the host, in its order.
    for input in held {
        let _ = tx.send(input);
    }
    let (Some(mut kept), None) = (kept, stopped) else {
        return stopped.map_or(ExitCode::SUCCESS, stopped_before_serving);
    };
    let running = match listen(&common, &asked, &mut kept, &sink, &tx, &rx) {
        Ok(running) => running,
        Err(code) => return code,
    };
    // Declared again after `running`, so dropped before it (a panic unwinding included): the
    // events still queued hold places the runtime may be waiting for while it stops.
    let rx = rx;
    let port = running.addr.port();
    // Kept before the port is printed: whoever reads it may stop the bridge at once.
    let lock_dir = running.lock_path.as_deref().and_then(Path::parent);
    let kept_lines = kept.started(port, lock_dir);
    // Where claude is told to connect, when its own 127.0.0.1 does not reach the bridge: said,
    // handed to the editor and to `run`'s command.
    let claude = claude_host(running.addr.ip());
    announce(&common, &asked, &running, claude.as_deref(), kept_lines);
    let workspace = asked.workspace;
    // Said at once (Windows: a folder on a network share), not first at claude's first file.
    for (_, why) in workspace.refused_folders() {
        ui::say_bold(why);
    }
    let lsp = language_servers(
        &common,
        asked.table,
        asked.lsp_log,
        &asked.native,
        &workspace,
        &tx,
    );

    let want_line = if asked.decider == Decider::Policy(DiffPolicy::Ask) {
        match spawn_terminal_reader(tx.clone()) {
            Ok(w) => Some(w),
            Err(e) => return failure(&format!("cannot read the terminal: {e}")),
        }
    } else {
        None
    };
    let mut host = Host::new(
        running.handle(),
        HostConfig {
            workspace,
            ide_name: common.ide_name.clone(),
            decider: asked.decider,
            open_files: common.open_files,
            wire: asked.wire,
            stdio: stdio.clone(),
            want_line,
            inputs: tx.clone(),
            lsp,
            paths: asked.paths,
        },
    );
    if let Some(out) = &stdio {
        let at = claude.as_deref().unwrap_or(CLAUDE_HOST).to_string();
        host.ready(port, at, running.lock_path.as_deref());
        if let Err(e) = spawn_stdio_reader(tx.clone(), out.clone(), editor_timeout) {
            running.stop(Duration::from_secs(5));
            return failure(&format!("cannot read stdin: {e}"));
        }
    }
    if let Some(cmd) = run {
        if let Err(failed) = start_command(&cmd, port, claude.as_deref(), &mut host, &tx) {
            // Stopped first (the lock file gone), then said: the error is the last line.
            running.stop(Duration::from_secs(5));
            ui::set_quiet(false);
            return failed.report(&cmd[0]);
        }
    }
    drop(tx);

    // From here on the runtime may answer calls from memory itself (`HostSink`).
    let shared = shared_host.get_or_init(|| Mutex::new(host));
    host::sink::on_the_hosts_thread();
    let code = host_loop(shared, &rx, stdio.is_some());
    stop(lock_host(shared), running, rx, stdio.as_ref(), code)
}

/// What `serve` was asked for, checked before anything starts: the decider of diffs, the
/// workspace folders in both forms, the path map, the wire log and the language servers' table
/// and log, opened.
struct Asked {
    /// Whether an editor speaks JSON lines on stdio (`--stdio`).
    stdio: bool,
    decider: Decider,
    /// Warnings for folders that cannot be listed (served anyway: the permission may come back).
    unreadable: Vec<String>,
    native: Vec<PathBuf>,
    posix: Vec<String>,
    native_text: Vec<String>,
    /// The folders served, as the file tools see them.
    workspace: claude_ide_bridge_files::Workspace,
    paths: PathMap,
    wire: Option<WireLog>,
    table: Option<ServerTable>,
    lsp_log: Option<lsp::Log>,
}

impl Asked {
    /// The request checked; the exit status (a usage error, a failure) when it cannot be served.
    fn check(
        common: &CommonOpts,
        stdio: bool,
        path_map: &[String],
        run: Option<&[OsString]>,
        start: Instant,
    ) -> Result<Asked, ExitCode> {
        let decider = decider(common, stdio, run.is_some()).map_err(|e| usage(&e))?;
        // A command that is nowhere to be found is said before the bridge starts (and says it
        // has started, in lines the error would follow).
        if let Some(program) = run.map(|cmd| &cmd[0]) {
            sys::findable(program).map_err(|e| cannot_run(program, &e, false))?;
        }
        let mut folders = common.workspace.clone();
        if folders.is_empty() {
            let here = std::env::current_dir()
                .map_err(|e| failure(&format!("cannot read the current directory: {e}")))?;
            folders.push(here);
        }
        for f in &folders {
            if !f.is_dir() {
                return Err(usage(&format!(
                    "workspace folder {} {}: give an existing directory (--workspace DIR)",
                    f.display(),
                    not_a_folder(f)
                )));
            }
        }
        let (native, posix) = folder_forms(&folders)
            .map_err(|e| failure(&format!("cannot make the workspace folders absolute: {e}")))?;
        let native_text: Vec<String> = native
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let workspace = claude_ide_bridge_files::Workspace::new(
            native_text.clone(),
            claude_ide_bridge_files::Limits {
                max_read_bytes: common.max_read_bytes,
                ..claude_ide_bridge_files::Limits::default()
            },
        );
        // Served anyway (the permission may come back), but said: every file tool would fail.
        // (Why as the workspace says it: on macOS, where to lift the privacy protection.)
        let unreadable: Vec<String> = (workspace.unreadable_folders().into_iter())
            .map(|why| {
                format!(
                    "warning: workspace folder {why}: neither claude nor the bridge can see the \
                     files in it"
                )
            })
            .collect();
        let paths = path_mapping(path_map, &posix).map_err(|e| usage(&e))?;
        let table = common.lsp.servers.table().map_err(|e| usage(&e))?;
        // A folder the user named is made when missing, not the folders above it: a mistyped
        // path would leave a tree of them (the default ones are made whole).
        let named = [
            ("--lock-dir", common.lock_dir.as_deref()),
            (
                "--lsp-log",
                common.lsp.lsp_log.as_deref().and_then(Path::parent),
            ),
            (
                "--wire-log",
                common.wire_log.as_deref().and_then(Path::parent),
            ),
        ];
        for (flag, folder) in named {
            if let Some(missing) = folder
                .and_then(Path::parent)
                .filter(|p| !p.as_os_str().is_empty() && !p.is_dir())
            {
                return Err(usage(&format!(
                    "{flag}: the folder {} does not exist (create it first)",
                    missing.display()
                )));
            }
        }
        let wire =
            match &common.wire_log {
                Some(p) => Some(WireLog::open(p, start).map_err(|e| {
                    failure(&format!("cannot open the wire log {}: {e}", p.display()))
                })?),
                None => None,
            };
        let lsp_log = match &table {
            None => None,
            Some(_) => {
                let path = common
                    .lsp
                    .lsp_log
                    .clone()
                    .unwrap_or_else(lsp::default_log_path);
                Some(lsp::Log::open(&path).map_err(|e| {
                    failure(&format!(
                        "cannot open the language-server log {}: {e} (choose another with --lsp-log FILE, or --no-lsp)",
                        path.display()
                    ))
                })?)
            }
        };
        Ok(Asked {
            stdio,
            decider,
            unreadable,
            native,
            posix,
            native_text,
            workspace,
            paths,
            wire,
            table,
            lsp_log,
        })
    }
}

/// The threads that write the bridge's output and hear its signals: the stdio editor's stdout
/// writer (with `--stdio`), stderr's and the signal handlers'.
fn start_outputs(stdio: bool, tx: &Sender<HostInput>) -> Result<Option<StdioOut>, ExitCode> {
    let stdio = stdio
        .then(|| StdioOut::start(tx.clone()))
        .transpose()
        .map_err(|e| failure(&format!("cannot start the stdout writer: {e}")))?;
    // The editor may not read stderr at all: the log lines must never hold up the host. A
    // terminal may not take them either (Ctrl-S): they may hold it up, but never its stop.
    let full = match stdio {
        Some(_) => ui::Full::Drop,
        None => ui::Full::WaitUntilStop,
    };
    ui::detach_stderr(full)
        .map_err(|e| failure(&format!("cannot start the stderr writer: {e}")))?;
    sys::listen_for_stop(tx.clone(), stdio.clone())
        .map_err(|e| failure(&format!("cannot install the signal handlers: {e}")))?;
    Ok(stdio)
}

/// The server started on the port and with the token kept for this workspace
/// ([`state::Kept`]): waiting for this workspace's last bridge while it stops, on a new port
/// when the kept one is taken or refused. A stop asked for meanwhile ends `serve` (success).
fn listen(
    common: &CommonOpts,
    asked: &Asked,
    kept: &mut state::Kept,
    sink: &dyn Fn() -> HostSink,
    tx: &Sender<HostInput>,
    rx: &Receiver<HostInput>,
) -> Result<runtime::Running, ExitCode> {
    let mut opts = Options::new(asked.native.clone(), &common.ide_name);
    opts.bind = common.host;
    opts.allowed_hosts = common.allow_host.clone();
    opts.port = kept.port();
    opts.auth_token = Some(kept.token());
    opts.compat_methods = true;
    opts.signal_cleanup = false;
    opts.trace_messages = asked.wire.is_some();
    // The runtime's debug lines (`CLAUDE_IDE_BRIDGE_LOG=debug`) go the program's way to stderr,
    // through its queue (`ui::detach_stderr`: dropped past its bound for a `--stdio` editor,
    // held until a stop on a terminal that takes no output, as the program's own lines): the
    // runtime wrote them itself, so an editor that does not read stderr froze the bridge, and a
    // closed one panicked the thread writing.
    if claude_ide_bridge_runtime::Logger::from_env().is_some() {
        opts.logger = Some(claude_ide_bridge_runtime::Logger::new(|line| {
            ui::err(format_args!("[claude-ide-bridge] {}\n", ui::visible(line)))
        }));
    }
    // A stop is nobody's decision: claude's own prompt keeps the changes still pending (the
    // runtime's default says so; an editor's link that ends is said as such).
    if asked.stdio {
        opts.diff_error_at_stop = Some(host::undecided_by_the_editor(&common.ide_name));
    }
    // Absolute: the lock file's path goes to the editor (`ready`, `status`), whose working
    // directory is not the bridge's.
    if let Some(d) = &common.lock_dir {
        opts.lock_file = LockFileMode::Dir(std::path::absolute(d).unwrap_or_else(|_| d.clone()));
    }
    let lock_dir = match &opts.lock_file {
        LockFileMode::Dir(d) => Some(d.clone()),
        _ => claude_ide_bridge_runtime::lock::default_lock_dir().ok(),
    };
    let lock_folders = claude_ide_bridge_runtime::lock_folders(&asked.native).unwrap_or_default();
    kept.beside_a_live_bridge(lock_dir.as_deref(), &lock_folders, &common.ide_name);
    opts.auth_token = Some(kept.token());
    let mut started = runtime::start(common.runtime, opts.clone(), sink());
    // This workspace's last bridge still stopping holds the kept port for some seconds after
    // its lock file went: waited for, so that the port and token stay and the claude retrying
    // that port gets back in.
    let taken = |s: &std::io::Result<_>| matches!(s, Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && refused_by_the_port(e));
    if taken(&started) {
        if let Some(pid) = kept.stopping_bridge(lock_dir.as_deref()) {
            ui::say(&format!(
                "port {}: waiting up to {} s for this workspace's last bridge (pid {pid}) to stop",
                kept.port(),
                state::STOPPING_WAIT.as_secs()
            ));
            let give_up = Instant::now() + state::STOPPING_WAIT;
            let mut last_try = false;
            let mut held = Vec::new();
            while taken(&started) && !last_try && Instant::now() < give_up {
                // Once it is gone (or the port is another live bridge's now): one more try.
                last_try = kept.stopping_bridge(lock_dir.as_deref()) != Some(pid);
                // Told to stop meanwhile (Ctrl-C, SIGTERM: the only inputs before the server
                // starts), it stops: nothing was started yet.
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(HostInput::Signal(sig)) => return Err(stopped_before_serving(sig)),
                    Ok(other) => held.push(other),
                    Err(_) => {}
                }
                started = runtime::start(common.runtime, opts.clone(), sink());
            }
            // Anything else (a thread's panic) for the host, in its order.
            for input in held {
                let _ = tx.send(input);
            }
        }
    }
    let started = match started {
        // The kept port may also be refused for another reason (on Windows, a range Hyper-V
        // reserved after a reboot answers "access denied"): go on with a new port then too, or
        // every start would fail until the state file is deleted. An error that is not the
        // port's (the lock-file directory's) is not the kept port's fault.
        Err(e) if kept.may_move() && refused_by_the_port(&e) => {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                kept.port_taken(lock_dir.as_deref(), &lock_folders, &common.ide_name);
            } else {
                kept.port_refused(&e);
            }
            opts.port = kept.port();
            opts.auth_token = Some(kept.token());
            runtime::start(common.runtime, opts, sink())
        }
        started => started,
    };
    started.map_err(|e| {
        failure(&format!(
            "cannot start the server: {e}{}",
            start_hint(&e, common)
        ))
    })
}

/// Told to stop (signal `sig`) before the server started: said, and nothing to stop.
fn stopped_before_serving(sig: i32) -> ExitCode {
    ui::say(&host::stopping_on(sig));
    ui::flush_stderr(STDOUT_GRACE);
    sys::stopped();
    ExitCode::SUCCESS
}

/// What to do about a start that failed with `e`: another port when the port was refused, an
/// address of this machine when `--host`'s is not one, the lock-file folder's name when the lock
/// file could not be written (`doctor` looks at the default folder only); nothing for the
/// other failures (a workspace folder that cannot be named), whose message says it all.
fn start_hint(e: &std::io::Error, common: &CommonOpts) -> String {
    use claude_ide_bridge_runtime::{ListenError, LockFileError};
    use std::io::ErrorKind;
    let inner = e.get_ref();
    if let Some(refused) = inner.and_then(|i| i.downcast_ref::<ListenError>()) {
        return match e.kind() {
            ErrorKind::AddrInUse => " (the port is taken: choose another --port or 0)".into(),
            ErrorKind::AddrNotAvailable => format!(
                " ({} is not an address of this machine: give one of its own with --host)",
                refused.addr().ip()
            ),
            _ => " (choose another --port, or 0)".into(),
        };
    }
    let Some(lock) = inner.and_then(|i| i.downcast_ref::<LockFileError>()) else {
        return String::new();
    };
    // The error names the folder when there is one.
    let place = match lock.dir() {
        Some(_) => "",
        None => "writing the lock file: ",
    };
    match &common.lock_dir {
        Some(_) => format!(" ({place}--lock-dir names the folder)"),
        None => format!(" ({place}`claude-ide-bridge doctor` explains)"),
    }
}

/// The lines `serve` says once it listens: where, the warnings, the lock file, the environment
/// a claude needs (with `claude`, the override [`claude_host`] gives), the kept port's and
/// token's lines and who decides diffs.
fn announce(
    common: &CommonOpts,
    asked: &Asked,
    running: &runtime::Running,
    claude: Option<&str>,
    kept: Vec<String>,
) {
    let port = running.addr.port();
    ui::say(&format!(
        "serving {} on {}",
        asked.native_text.join(", "),
        running.addr
    ));
    let ip = running.addr.ip();
    if let Some(warning) = exposed(ip) {
        ui::say_bold(&warning);
    }
    if let Some(host) = claude {
        ui::say_bold(&elsewhere(ip, host));
    }
    for warning in &asked.unreadable {
        ui::say_bold(warning);
    }
    if common.open_files {
        if let Some(warning) = host::open_files_warning(ui::editor_command().as_deref()) {
            ui::say_bold(&warning);
        }
    }
    match &running.lock_path {
        Some(p) => ui::say(&format!("lock file: {}", p.display())),
        None => ui::say("lock file: none"),
    }
    // `--lock-dir` somewhere claude does not look: a claude started with the port below (`run`'s
    // too) finds no lock file there and never connects.
    if let Some(dir) = (running.lock_path.as_deref())
        .and_then(Path::parent)
        .filter(|_| common.lock_dir.is_some())
        .filter(|d| !crate::inspect::claude_reads(d))
    {
        ui::say_bold(&format!(
            "warning: --lock-dir {}: claude does not read lock files there (it reads \
             $CLAUDE_CONFIG_DIR/ide, else ~/.claude/ide), and connects to no bridge whose file \
             is only there",
            dir.display()
        ));
    }
    // Another IDE's (or bridge's) lock file for this folder: claude started here picks neither.
    if let Some(dir) = running.lock_path.as_deref().and_then(Path::parent) {
        for warning in crate::inspect::others_serving(dir, port) {
            ui::say_bold(&warning);
        }
    }
    // Both: a claude started with them connects by itself, wherever it runs (docs/protocol.md,
    // "Discovery", which lock the client picks); the port alone leaves a plain claude waiting
    // for `/ide`.
    // The override quoted: `[::1]` is a pattern to a shell.
    let override_host = claude
        .map(|h| format!(" CLAUDE_CODE_IDE_HOST_OVERRIDE='{h}'"))
        .unwrap_or_default();
    ui::say(&format!(
        "export CLAUDE_CODE_SSE_PORT={port} ENABLE_IDE_INTEGRATION=true{override_host}"
    ));
    for line in kept {
        ui::say(&line);
    }
    ui::say(&format!("diffs: {}", policy_name(asked.decider)));
}

/// The language servers (none with `--no-lsp`), said as `doctor` shows them; their changes of
/// diagnostics come to the host as inputs.
fn language_servers(
    common: &CommonOpts,
    table: Option<ServerTable>,
    log: Option<lsp::Log>,
    native: &[PathBuf],
    workspace: &claude_ide_bridge_files::Workspace,
    tx: &Sender<HostInput>,
) -> Option<Arc<LanguageServers>> {
    let (Some(servers), Some(log)) = (table, log) else {
        ui::say("language servers: off (--no-lsp)");
        return None;
    };
    if log.is_on() {
        ui::say(&format!(
            "language servers: log in {}",
            log.path().display()
        ));
    }
    ui::say(&match common.lsp.lsp_warm {
        lsp::Warm::Connect => format!("language servers: those of the workspace's languages (at most {}) start when claude connects, a file's at its diff (--lsp-warm connect)", lsp::WARM_MAX),
        lsp::Warm::Diff => "language servers: a file's start at its diff, or when it is asked about (--lsp-warm diff)".into(),
        lsp::Warm::None => "language servers: a file's start when it is asked about or a diff of it accepted (--lsp-warm none)".into(),
    });
    for note in common.lsp.servers.new_languages() {
        ui::say_bold(&format!("language servers: {note}"));
    }
    // The sets the overrides make, as `doctor` shows them.
    for language in common.lsp.servers.languages(&servers) {
        let set = servers.resolve(&language);
        let mut line = format!("language servers: {language}: {}", lsp::describe_set(&set));
        // A server given that is not found, while others of the language run: said, not left
        // out silently (`--lsp python=pylsp --lsp python="ruff server"` without pylsp).
        // Nor named as found on `PATH` when given as a path (`--lsp go=/opt/gopls`).
        let missing = servers.missing(&language, &set);
        let names: Vec<String> = (missing.iter())
            .map(|m| match m.wrong_path {
                true => m.install.clone(),
                false => format!("{} not found", m.program),
            })
            .collect();
        match (set.is_empty(), names.is_empty()) {
            (_, true) => {}
            (true, false) => line = format!("language servers: {language}: {}", names.join("; ")),
            (false, false) => line.push_str(&format!("; {}", names.join("; "))),
        }
        ui::say(&line);
    }
    let config = LspConfig {
        servers,
        workspace_folders: native.to_vec(),
        diagnostics_wait: common.lsp.diagnostics_wait,
        start_wait: common.lsp.lsp_start_wait,
        log: LspLog::Writer(Arc::new(std::sync::Mutex::new(log.clone()))),
        ..LspConfig::default()
    };
    let changes = Arc::new(lsp::Changes::default());
    let (wake, paced) = (tx.clone(), changes.clone());
    let pacer = move || {
        paced.pace(lsp::CHANGES_GAP, || {
            wake.send(HostInput::Diagnostics(paced.clone())).is_ok()
        })
    };
    if let Err(e) = (std::thread::Builder::new().name("lsp-changes".into()))
        .stack_size(64 * 1024)
        .spawn(pacer)
    {
        ui::say(&format!("language servers: not started ({e})"));
        return None;
    }
    let lsp = Lsp::new(config, move |change| changes.add(change));
    // A server that ends unasked (a crash, killed, found hung): said, with where to read why.
    let read = (log.is_on()).then(|| format!("; its log: {}", log.path().display()));
    lsp.on_exit(move |gone| ui::say_bold(&lsp::server_ended(gone, read.as_deref())));
    Some(Arc::new(
        LanguageServers::new(lsp, log, workspace.clone()).warm(common.lsp.lsp_warm),
    ))
}

/// `run`'s command, started with the environment that connects it to this bridge, tied to the
/// bridge, and waited for on a thread of its own (its exit is a host input). The terminal is
/// claude's from here on: the bridge goes quiet on it.
fn start_command(
    cmd: &[OsString],
    port: u16,
    claude: Option<&str>,
    host: &mut Host,
    tx: &Sender<HostInput>,
) -> Result<(), CommandFailed> {
    let no_proxy = no_proxy_value(std::env::var_os("no_proxy"), std::env::var_os("NO_PROXY"));
    let mut c = Command::new(sys::program_named(&cmd[0]));
    // Where this bridge listens, or nothing when claude's own 127.0.0.1 reaches it: an override
    // in the user's environment (meant for another IDE) would send this claude elsewhere, and
    // setting one without need changes which lock files claude in WSL takes for stale.
    match claude {
        Some(h) => c.env("CLAUDE_CODE_IDE_HOST_OVERRIDE", h),
        None => c.env_remove("CLAUDE_CODE_IDE_HOST_OVERRIDE"),
    };
    c.args(&cmd[1..])
        .env("CLAUDE_CODE_SSE_PORT", port.to_string())
        .env("ENABLE_IDE_INTEGRATION", "true")
        // Set to no in the user's environment, claude connects to no IDE by itself, this
        // one included: `run` is asked to connect it.
        .env("CLAUDE_CODE_AUTO_CONNECT_IDE", "true")
        .env("no_proxy", &no_proxy)
        .env("NO_PROXY", &no_proxy);
    // claude owns the terminal from here on: the bridge's lines are on it first (written by
    // stderr's thread, they would land in claude's screen).
    ui::flush_stderr(STDOUT_GRACE);
    ui::set_quiet(true);
    // The terminal's settings, put back when the command is ended by a signal (the bridge
    // kills it when told twice to stop, or after a panic): claude killed in raw mode left
    // the shell's prompt without echo, its cursor hidden.
    let terminal = ui::save_terminal();
    // Started from this thread, which lives as long as the program: tied to it, the command
    // ends with the bridge even when the bridge is killed.
    let mut child = sys::spawn_tied(c).map_err(CommandFailed::NotRun)?;
    host.set_child(child.id());
    let tx = tx.clone();
    let waiter = thread::Builder::new().name(host::COMMAND_THREAD.into());
    waiter
        .spawn(move || {
            let _stop = StopOnPanic::new(&tx, host::COMMAND_THREAD);
            let status = sys::wait_for_command(&mut child);
            if status.as_ref().is_ok_and(sys::ended_abnormally) {
                ui::restore_terminal(terminal, true);
            }
            panic::command_ended();
            let _ = tx.send(HostInput::ChildExited(status));
        })
        .map(drop)
        .map_err(CommandFailed::NotWaitedFor)
}

/// Why `run`'s command did not start ([`start_command`]), said once the server is stopped.
enum CommandFailed {
    /// It could not be run.
    NotRun(std::io::Error),
    /// It runs, but no thread could wait for it (it ends with the bridge: it is tied to it).
    NotWaitedFor(std::io::Error),
}

impl CommandFailed {
    /// Says why, and gives the exit status (a shell's for a command not run).
    fn report(&self, program: &OsStr) -> ExitCode {
        match self {
            CommandFailed::NotRun(e) => cannot_run(program, e, true),
            CommandFailed::NotWaitedFor(e) => failure(&format!("cannot wait for the command: {e}")),
        }
    }
}

/// The host's loop: its inputs handled one at a time until one asks for the exit, whose status
/// it returns (1 when every sender is gone). After a stopping signal, a `--stdio` editor's last
/// lines are handled first ([`drain_stdio`]).
fn host_loop(shared: &Mutex<Host>, rx: &Receiver<HostInput>, stdio: bool) -> i32 {
    // Once quiet after a burst of work, the allocator gives back what the work freed: one wake-up
    // a burst, none while idle.
    let mut worked = false;
    loop {
        let input = if worked {
            match rx.recv_timeout(GIVE_BACK_AFTER) {
                Err(RecvTimeoutError::Timeout) => {
                    claude_ide_bridge_runtime::memory::give_back();
                    worked = false;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return 1,
                Ok(input) => input,
            }
        } else {
            match rx.recv() {
                Ok(input) => input,
                Err(_) => return 1,
            }
        };
        worked = true;
        let signal = matches!(input, HostInput::Signal(_));
        if signal {
            panic::test_panic("main");
        }
        // The host's lock is let go of before the drain takes it again.
        let flow = lock_host(shared).handle(input);
        if let Flow::Exit(code) = flow {
            if signal && stdio {
                return drain_stdio(rx, shared).unwrap_or(code);
            }
            return code;
        }
    }
}

/// The ordered stop, with the host's lock held to the end (the runtime answers nothing itself
/// any more: its events are queued, and go with the queue): the lock file first, `$EDITOR`, the
/// language servers, the jobs still running, the goodbye, the server last. `code` is the exit
/// status.
fn stop(
    mut host: MutexGuard<'_, Host>,
    running: runtime::Running,
    rx: Receiver<HostInput>,
    stdio: Option<&StdioOut>,
    code: i32,
) -> ExitCode {
    // No new client finds a bridge that is stopping: its lock file goes before anything is
    // waited for (a console closed on Windows leaves the stop 5 s).
    running.handle().withdraw_lock_file();
    // `$EDITOR` still open on a change goes first, and gives the terminal back.
    host.end_edit(&rx, EDITOR_GRACE);
    // From here on nothing waits for the stdio editor to read (it may have stopped for good).
    if let Some(out) = stdio {
        out.stopping();
    }
    // The language servers go before the jobs are settled: a check waiting for them ends when
    // they do, so that an accepted diff waiting for its text's check (as long as a server's
    // start wait) is answered, not taken by the stop below for one nobody decided. (Their
    // changes go to the host's inputs, a channel that never blocks.)
    host.stop_language_servers(LSP_GRACE);
    // Answers on their way (an accepted diff) are given before the stop answers what is still
    // pending as rejected.
    host.settle_jobs(JOBS_GRACE);
    host.say_goodbye();
    if let Some(out) = stdio {
        out.flush(STDOUT_GRACE);
    }
    // The inputs not handled go, and the places they held with them: a runtime waiting for one
    // takes its stop.
    drop(rx);
    ui::set_quiet(false);
    running.stop(Duration::from_secs(5));
    ui::say("stopped");
    ui::flush_stderr(STDOUT_GRACE);
    sys::stopped();
    // Stopped by Ctrl-C: ended as Ctrl-C ends a program, so that the shell running `serve` in a
    // script or a loop stops it too (a status of 0 tells bash the program took Ctrl-C for itself).
    if host.ends_interrupted() {
        sys::end_interrupted();
    }
    ExitCode::from(code.clamp(0, 255) as u8)
}

#[cfg(test)]
mod tests {
    use super::{claude_host, exposed};
    use crate::sys;

    /// Listening outside loopback is said, with who can reach the port; loopback is not.
    #[test]
    fn listening_outside_loopback_is_said() {
        for quiet in ["127.0.0.1", "127.0.0.2", "::1"] {
            assert_eq!(exposed(quiet.parse().unwrap()), None, "{quiet}");
        }
        let all = exposed("0.0.0.0".parse().unwrap()).unwrap();
        assert!(all.contains("every network this machine is on"), "{all}");
        let one = exposed("172.17.0.1".parse().unwrap()).unwrap();
        assert!(
            one.starts_with(
                "warning: listening on 172.17.0.1: reachable from every machine that can route"
            ),
            "{one}"
        );
        assert!(exposed("::".parse().unwrap()).is_some());
    }

    /// The host claude must be told for each address the bridge may listen on: none where its
    /// own 127.0.0.1 arrives, else the address as it goes in claude's `ws://HOST:PORT`.
    #[test]
    fn claude_is_told_where_the_bridge_listens() {
        let host = |ip: &str| claude_host(ip.parse().unwrap());
        for reached in ["127.0.0.1", "0.0.0.0", "::ffff:127.0.0.1"] {
            assert_eq!(host(reached), None, "{reached}");
        }
        assert_eq!(host("127.0.0.2").as_deref(), Some("127.0.0.2"));
        assert_eq!(host("172.17.0.1").as_deref(), Some("172.17.0.1"));
        assert_eq!(host("::ffff:127.0.0.2").as_deref(), Some("127.0.0.2"));
        assert_eq!(host("::1").as_deref(), Some("[::1]"));
        assert_eq!(host("fd00::5").as_deref(), Some("[fd00::5]"));
        // `::` takes IPv4 too on Linux (unless `net.ipv6.bindv6only` is 1) and macOS; Windows'
        // needs to be told IPv6's loopback.
        let any = (!sys::v6_any_takes_v4()).then(|| "[::1]".to_string());
        assert_eq!(host("::"), any);
    }
}
