//! Language servers in the program, around the lsp crate (`program/lsp`, which runs them and
//! turns what they report into diagnostics; `host/diagnostics.rs` answers `getDiagnostics` with
//! them):
//!
//! - [`LspOpts`], [`ServerOpts`], [`Warm`], [`parse_duration`]: the flags of `serve`, `run` and
//!   `doctor` (`--lsp`, `--no-lsp`, `--lsp-warm`, ...), and [`describe_set`] to show a language's
//!   set of servers;
//! - [`walk_workspace`], [`warm_languages`], [`WARM_MAX`]: the languages a workspace has files in,
//!   and which of them `--lsp-warm connect` starts when `claude` connects;
//! - [`Changes`]: the diagnostics changes the servers' threads hand to the host, the latest per
//!   file (`diagnostics_changed`);
//! - [`Log`], [`default_log_path`]: the log the servers' stderr and the bridge's notes about them
//!   go to.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use clap::Args;
use claude_ide_bridge::FileDiagnostics;
use claude_ide_bridge_lsp::{parse_override, Override, ServerTable};

/// Diagnostics changes waiting for the host, the latest per file. A server's changes arrive on its
/// reader thread and the host takes them on its own: a pacer ([`Changes::pace`]) wakes the host
/// when changes wait, at once after a quiet while and at most every [`CHANGES_GAP`] meanwhile,
/// and the host takes all that came by the time it looks. A server that publishes faster than
/// that costs one entry per file, not one per publish, and the clients get the latest
/// diagnostics of each file at most so often (docs/protocol.md, "Notifications"): a server
/// republishing one file as fast as it could made 206,000 `diagnostics_changed` in 20 s, and
/// every tool answer waited seconds behind them.
#[derive(Debug, Default)]
pub struct Changes {
    waiting: Mutex<Waiting>,
    came: Condvar,
}

/// What [`Changes`] holds under its lock.
#[derive(Debug, Default)]
struct Waiting {
    /// The latest change of each file not yet taken.
    files: BTreeMap<String, FileDiagnostics>,
    /// The host was woken for them and has not taken them yet: it is not woken again until it
    /// has (a host kept waiting, by a `--stdio` editor that does not read, was sent a wake-up
    /// every [`CHANGES_GAP`] for as long, each one kept in its channel: 5 MB an hour).
    woken: bool,
}

/// The shortest time between two hand-overs of diagnostics changes to the host ([`Changes`]).
pub const CHANGES_GAP: Duration = Duration::from_millis(100);

impl Changes {
    /// A change, the latest of its file.
    pub fn add(&self, change: FileDiagnostics) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.files.insert(change.uri.clone(), change);
        self.came.notify_one();
    }

    /// Calls `wake` whenever changes wait and the host has taken those it was last woken for, at
    /// most once every `gap`, until it returns `false` (the host is gone): the pacer's loop, on a
    /// thread of its own.
    pub fn pace(&self, gap: Duration, wake: impl Fn() -> bool) {
        loop {
            let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            let mut waiting = (self.came)
                .wait_while(waiting, |w| w.files.is_empty() || w.woken)
                .unwrap_or_else(|e| e.into_inner());
            waiting.woken = true;
            drop(waiting);
            if !wake() {
                return;
            }
            std::thread::sleep(gap);
        }
    }

    /// Every change waiting, in file order (the pacer wakes the host again when more come).
    pub fn take(&self) -> Vec<FileDiagnostics> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.woken = false;
        std::mem::take(&mut waiting.files).into_values().collect()
    }
}

/// Which servers (`serve`, `run`, `doctor`).
#[derive(Args, Clone, Debug, Default)]
pub struct ServerOpts {
    /// A language server for a language: LANG=COMMAND, such as python="pylsp -v" (repeatable;
    /// replaces the built-in servers of that language, or adds a language whose file extension is
    /// LANG; given again for the same language, runs that server too, beside the first, at most 4
    /// per language: python=pylsp --lsp python="ruff server"). COMMAND is split into words as a
    /// shell splits them (quotes, backslash escapes; on Windows as a command line is, backslashes
    /// kept), without expanding anything. `doctor` lists what would run.
    #[arg(long = "lsp", value_name = "LANG=COMMAND", value_parser = parse_override)]
    pub lsp: Vec<Override>,
    /// No language server: `serve` and `run` start none (getDiagnostics answers only what an
    /// editor reports); `doctor` checks none.
    #[arg(long, conflicts_with = "lsp")]
    pub no_lsp: bool,
}

impl ServerOpts {
    /// The server table: the built-in one with the overrides applied, or `None` with `--no-lsp`.
    /// The first override of a language replaces its servers, the next ones of that language run
    /// beside it; refused past [`claude_ide_bridge_lsp::MAX_SERVERS`] for one language.
    pub fn table(&self) -> Result<Option<ServerTable>, String> {
        if self.no_lsp {
            return Ok(None);
        }
        let mut table = ServerTable::builtin();
        let mut named: Vec<String> = Vec::new();
        for ov in &self.lsp {
            // `py` and `python` name the same language.
            let language = table.named(&ov.language).unwrap_or(&ov.language).to_owned();
            if named.contains(&language) {
                table.add(ov.clone()).map_err(|e| format!("--lsp {e}"))?;
            } else {
                table.set(ov.clone());
                named.push(language);
            }
        }
        Ok(Some(table))
    }

    /// A note for each `--lsp` name that is no language of the built-in table, by its name or an
    /// extension of it: such a name adds a language of files ending in `.NAME`, which a
    /// misspelt one (`pyhton`, `Python`) does without a word, the language meant keeping its
    /// servers.
    pub fn new_languages(&self) -> Vec<String> {
        let table = ServerTable::builtin();
        let mut out: Vec<String> = Vec::new();
        for ov in &self.lsp {
            let name = &ov.language;
            if table.named(name).is_some()
                || out.iter().any(|n| n.starts_with(&format!("--lsp {name}:")))
            {
                continue;
            }
            let meant = match table.named(&name.to_ascii_lowercase()) {
                Some(id) => format!("did you mean {id}?"),
                None => format!(
                    "known: {}",
                    table
                        .languages()
                        .iter()
                        .map(|l| l.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            out.push(format!(
                "--lsp {name}: no language the bridge knows by that name ({meant}): taken as a new one, for files ending in .{name}"
            ));
        }
        out
    }

    /// The languages `--lsp` names, as ids of `table`, each once, in the order given.
    pub fn languages(&self, table: &ServerTable) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for ov in &self.lsp {
            let id = table.named(&ov.language).unwrap_or(&ov.language).to_owned();
            if !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }
}

/// A language's set of servers in one line: `pyright-langserver --stdio + ruff server`, or that
/// none is found.
pub fn describe_set(set: &[Vec<String>]) -> String {
    if set.is_empty() {
        return "no server found on PATH".to_owned();
    }
    set.iter()
        .map(|c| claude_ide_bridge_lsp::table::command_line(c))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// What `serve` says of a language server that ended unasked ([`claude_ide_bridge_lsp::Lsp::on_exit`]:
/// it crashed or exited, or the bridge killed it as hung or stopped it for misbehaving, which its
/// reason says): which, why, its status, and whether it starts again (`read`: where its log is,
/// said after).
pub fn server_ended(gone: &claude_ide_bridge_lsp::ServerExit, read: Option<&str>) -> String {
    let next = match gone.given_up_for {
        None => "started again when next needed".to_owned(),
        Some(d) if d.as_secs() >= 120 && d.as_secs() % 60 == 0 => format!(
            "it ended too often in a row: not started again for {} minutes",
            d.as_secs() / 60
        ),
        Some(d) => format!("it ended too often in a row: not started again for {:?}", d),
    };
    format!(
        "language servers: {} ({}, pid {}) ended ({}; {}): {next}{}",
        claude_ide_bridge_lsp::table::command_line(&gone.command),
        gone.languages.join(", "),
        gone.pid,
        gone.reason,
        gone.status,
        read.unwrap_or_default()
    )
}

/// How the bridge uses its language servers (`serve`, `run`).
#[derive(Args, Clone, Debug)]
pub struct LspOpts {
    #[command(flatten)]
    pub servers: ServerOpts,
    /// How long getDiagnostics waits for a language server's answer about a file's current
    /// contents (such as 800ms or 2s; 100ms at least); past it, a file's diagnostics are
    /// answered as not known yet (a tool error), never with a list that may be another text's.
    #[arg(long, value_name = "DURATION", default_value = "1500ms", value_parser = parse_answer_wait)]
    pub diagnostics_wait: Duration,
    /// How long the first getDiagnostics of a language also waits for its server to start, and
    /// an accepted openDiff's answer at most as long for its file's check.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub lsp_start_wait: Duration,
    /// When language servers start: `connect` (when a client connects, those of the languages
    /// with files in the workspace, not counting installed packages such as node_modules, at
    /// most 3, the most files first, each with its language's
    /// most recently modified file opened and checked, so that the servers load the project
    /// before the first diff; and a file's at its openDiff), `diff` (a file's when an openDiff
    /// arrives for it, which also checks its text on disk then, for claude's baseline), `none`
    /// (only when a file is asked about, or its accepted diff checked). In every mode, a file
    /// asked about (getDiagnostics, reformat_file) or whose diff is accepted starts its
    /// servers; --no-lsp starts none.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t)]
    pub lsp_warm: Warm,
    /// Append the language servers' stderr and the bridge's notes about them to FILE (default:
    /// $XDG_STATE_HOME/claude-ide-bridge/lsp.log, or ~/.local/state/claude-ide-bridge/lsp.log;
    /// %LOCALAPPDATA%\claude-ide-bridge\lsp.log on Windows). At most 32 MiB a run; a log over
    /// 8 MiB at a start is moved aside to FILE.old (the one before it replaced), unless another
    /// bridge writes to it then.
    #[arg(long, value_name = "FILE")]
    pub lsp_log: Option<PathBuf>,
}

/// When language servers start (`--lsp-warm`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Warm {
    // What clap prints for each value (`--help`, the man page): no doc links in them. The
    // variant marked `#[default]` is `--lsp-warm`'s default (`default_value_t`).
    /// When a client connects (the servers of the workspace's languages, at most 3, each with its
    /// most recently modified file opened) and at an openDiff.
    #[default]
    Connect,
    /// At an openDiff for a file (its server starts and checks the file's text on disk), or when
    /// the file is asked about.
    Diff,
    /// Only when a file is asked about, or a diff of it is accepted (its check, for claude's
    /// comparison).
    None,
}

/// The most servers `--lsp-warm connect` starts when a client connects.
pub const WARM_MAX: usize = 3;

/// The languages `--lsp-warm connect` would start servers for, from a plan of the workspace:
/// those with a server found and files, the most files first, at most [`WARM_MAX`].
pub fn warm_languages(plan: &claude_ide_bridge_lsp::Plan) -> Vec<String> {
    let mut langs: Vec<&claude_ide_bridge_lsp::PlannedLanguage> = plan
        .languages
        .iter()
        .filter(|l| !l.servers.is_empty() && l.files > 0)
        .collect();
    langs.sort_by(|a, b| b.files.cmp(&a.files).then(a.language.cmp(&b.language)));
    langs
        .into_iter()
        .take(WARM_MAX)
        .map(|l| l.language.clone())
        .collect()
}

/// What the walk over a workspace found for its language servers ([`walk_workspace`]).
pub struct WorkspaceFiles {
    /// The plan: the languages with files, their servers (`truncated` set when a bound of the
    /// walk stopped it).
    pub plan: claude_ide_bridge_lsp::Plan,
    /// Per language, its most recently modified file (the one the user most likely edits next):
    /// the file `--lsp-warm connect` opens in that language's servers.
    pub latest: BTreeMap<String, String>,
    /// The files found, each with its language (`doctor` looks for the C files' compilation
    /// databases).
    pub files: Vec<(String, PathBuf)>,
}

/// Folders that hold installed packages, not the project's own code, left out of
/// [`walk_workspace`] where no `.gitignore` does it: a package manager fills them (a fresh `npm
/// install` makes their files the newest of their language, and can outnumber the project's),
/// editors leave them out of search, and a server given one of their files to open spends the
/// warm-up on a bundle nobody edits.
pub const DEPENDENCY_FOLDERS: [&str; 3] = ["node_modules", "bower_components", "site-packages"];

/// Whether `path` (a file the walk of `folders` found) is below one of [`DEPENDENCY_FOLDERS`]
/// inside its folder (a workspace that is itself inside one still counts its files).
fn in_dependencies(folders: &[&str], path: &Path) -> bool {
    folders
        .iter()
        .filter_map(|f| path.strip_prefix(f).ok())
        .min_by_key(|below| below.as_os_str().len())
        .is_some_and(|below| {
            below
                .parent()
                .into_iter()
                .flat_map(Path::components)
                .any(|c| DEPENDENCY_FOLDERS.iter().any(|d| c.as_os_str() == *d))
        })
}

/// The files of `ws` in a language of `table`, by the walk `listFiles` makes (bounded; `.gitignore`
/// honoured; no link followed) less those in [`DEPENDENCY_FOLDERS`], and per language the most
/// recently modified one: each such file is looked up once, through the handle of the directory
/// the walk found it in. Ties go to the file the walk met first.
pub fn walk_workspace(
    ws: &claude_ide_bridge_files::Workspace,
    table: &ServerTable,
) -> WorkspaceFiles {
    let mut files = Vec::new();
    let mut latest: BTreeMap<String, (std::time::SystemTime, String)> = BTreeMap::new();
    let folders = ws.folders();
    let truncated = ws.for_each_file_dated(|path, modified| {
        let language = table.language_for(Path::new(path));
        if let Some(language) = language.filter(|_| !in_dependencies(&folders, Path::new(path))) {
            files.push((language.to_owned(), PathBuf::from(path)));
            if let Some(t) = modified() {
                match latest.get_mut(language) {
                    Some(l) if l.0 >= t => {}
                    Some(l) => *l = (t, path.to_owned()),
                    None => {
                        latest.insert(language.to_owned(), (t, path.to_owned()));
                    }
                }
            }
        }
        true
    });
    let mut plan = table.plan(files.iter().map(|(_, f)| f.as_path()));
    plan.truncated = truncated;
    WorkspaceFiles {
        plan,
        latest: latest.into_iter().map(|(l, (_, p))| (l, p)).collect(),
        files,
    }
}

/// Reads a duration: a number followed by `ms` or `s` (`1500ms`, `2s`, `0.5s`), or `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if t == "0" {
        ("0", 1.0)
    } else if t.ends_with(|c: char| c.is_alphabetic()) {
        return Err(format!(
            "{s:?}: the unit must be ms or s, such as 800ms or 2s"
        ));
    } else {
        return Err(format!("{s:?}: give a unit, such as 800ms or 2s"));
    };
    let v: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: not a duration such as 800ms or 2s"))?;
    if !(0.0..=3600.0).contains(&(v * scale)) {
        return Err(format!("{s:?}: must be between 0 and 3600s"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// The shortest `--diagnostics-wait`: no language server answers sooner, and with less every
/// question after a language's first would be answered "not known yet", asked again or not.
const SHORTEST_ANSWER_WAIT: Duration = Duration::from_millis(100);

/// Reads `--diagnostics-wait`: a duration ([`parse_duration`]) of [`SHORTEST_ANSWER_WAIT`] at
/// least.
fn parse_answer_wait(s: &str) -> Result<Duration, String> {
    let wait = parse_duration(s)?;
    if wait < SHORTEST_ANSWER_WAIT {
        return Err(format!(
            "{s:?}: must be at least 100ms: a language server's answer takes longer, and every \
             getDiagnostics would be answered as not known yet"
        ));
    }
    Ok(wait)
}

/// Where the log goes when `--lsp-log` is not given.
pub fn default_log_path() -> PathBuf {
    crate::state::state_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("claude-ide-bridge"))
        .join("lsp.log")
}

/// A log that keeps at most this many bytes from one run (past it, one line says so).
const LOG_RUN_LIMIT: u64 = 32 << 20;
/// A log file found bigger than this at start is moved to `<name>.old` first.
const LOG_ROTATE_AT: u64 = 8 << 20;

/// The language-server log: appended to, private (0600), bounded per run, shared by the servers'
/// stderr and the bridge's own notes. Off when its file is refused or cannot be opened: the
/// bridge runs without it (what would go to it is dropped), and says why once.
#[derive(Clone)]
pub struct Log {
    path: PathBuf,
    inner: Arc<Mutex<LogFile>>,
}

struct LogFile {
    file: Option<File>,
    written: u64,
    full: bool,
}

impl Log {
    /// Opens (creates) `path`; a log above 8 MiB is moved aside to `<path>.old` first. Only a
    /// regular file of this user's that others cannot write to is written to, never through a
    /// symbolic link, and the program's state folder, when the log is in it (the default), is
    /// checked as the state file's is ([`crate::sys::check_private_dir`]). A log that is refused
    /// or cannot be opened does not stop the bridge: the log is off (what would go to it is
    /// dropped), and the terminal is told why, once, here.
    pub fn open(path: &Path) -> io::Result<Log> {
        let file = match open_file(path) {
            Ok(file) => Some(file),
            Err(e) => {
                crate::ui::say_bold(&format!(
                    "language servers: no log: {}: {e}; their stderr and the bridge's notes about them are dropped (choose another file with --lsp-log FILE)",
                    path.display()
                ));
                None
            }
        };
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Log {
            path,
            inner: Arc::new(Mutex::new(LogFile {
                file,
                written: 0,
                full: false,
            })),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the log is written (not off: see [`Log::open`]).
    pub fn is_on(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .file
            .is_some()
    }

    /// Appends one note of the bridge's own, prefixed with its pid.
    pub fn note(&self, line: &str) {
        let mut w = self.clone();
        let _ = writeln!(w, "claude-ide-bridge[{}]: {line}", std::process::id());
    }
}

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let LogFile {
            file: Some(file),
            written,
            full,
        } = &mut *g
        else {
            // Off: dropped.
            return Ok(buf.len());
        };
        if *full {
            return Ok(buf.len());
        }
        if *written + buf.len() as u64 > LOG_RUN_LIMIT {
            *full = true;
            let _ = file.write_all(
                b"\n(claude-ide-bridge: this run wrote 32 MiB to the log; the rest is dropped)\n",
            );
            return Ok(buf.len());
        }
        *written += buf.len() as u64;
        file.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match &mut g.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

/// Opens the log's file for [`Log::open`]: its folder created (0700) if missing, and checked when
/// it is the program's state folder; the file itself refused unless it is a private regular file
/// ([`crate::sys::append_private_file`]); one above 8 MiB moved aside first, when no other bridge
/// writes to it ([`crate::sys::move_log_aside`]; each bridge marks the file it writes to for as long
/// as it runs, [`crate::sys::hold_log`]): a start that moved it aside while another bridge wrote
/// there left that one writing to `lsp.log.old`, which the next move replaced (its crash and hang
/// reasons lost).
fn open_file(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if crate::state::state_dir().is_some_and(|state| state == dir) {
            crate::sys::private_dir(dir)?;
        } else {
            crate::sys::private_dirs(dir).map_err(|e| a_file_in_the_way(dir, e))?;
        }
    }
    // Not through a symbolic link: the link would be moved, and what it names left as it is.
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() > LOG_ROTATE_AT) {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        crate::sys::move_log_aside(path, Path::new(&old));
    }
    // Opened again when a start moved it aside while this one waited to mark it.
    let mut file = crate::sys::append_private_file(path)?;
    for _ in 0..3 {
        if crate::sys::hold_log(&file, path) {
            break;
        }
        file = crate::sys::append_private_file(path)?;
    }
    Ok(file)
}

/// A folder of `dir` that could not be made because a file has its name (the system says only
/// "File exists", or "Not a directory" deeper down): which one, said as what it is.
pub(crate) fn a_file_in_the_way(dir: &Path, e: io::Error) -> io::Error {
    if !matches!(
        e.kind(),
        io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory
    ) {
        return e;
    }
    match dir
        .ancestors()
        .find(|a| fs::symlink_metadata(a).is_ok_and(|m| !m.is_dir()))
    {
        Some(file) => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is a file, not a folder", file.display()),
        ),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log whose folder would be made where a file is: the file is named ("File exists" said
    /// nothing of which).
    #[test]
    fn a_file_where_the_logs_folder_goes_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes");
        fs::write(&file, "").unwrap();
        for log in [file.join("x.log"), file.join("sub").join("x.log")] {
            let e = open_file(&log).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{} is a file, not a folder", file.display())
            );
        }
    }

    /// Installed packages are not the project's files: a fresh install's newest JavaScript file
    /// in `node_modules` is neither counted nor opened at connect, nor a virtual environment's
    /// Python (no `.gitignore` says so in either); a workspace that is itself inside
    /// `node_modules` still has its own files.
    #[test]
    fn the_walk_leaves_installed_packages_out() {
        use std::time::SystemTime;
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str, age: u64| {
            let p = root.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "").unwrap();
            let f = File::options().write(true).open(&p).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(age))
                .unwrap();
        };
        write("ws/src/app.ts", 3600);
        write("ws/src/old.ts", 7200);
        write("ws/tools/build.js", 3600);
        write("ws/node_modules/pkg/lib/cli.mjs", 0);
        write("ws/node_modules/pkg/index.d.ts", 0);
        write("ws/node_modules/.bin/tool.js", 0);
        write("ws/bower_components/jquery/jquery.js", 0);
        write("ws/.venv/lib/python3.12/site-packages/six.py", 0);
        write("deps/node_modules/own/index.ts", 0);
        let table = ServerTable::builtin();
        let walk = |folder: &str| {
            let ws = claude_ide_bridge_files::Workspace::new(
                vec![root.path().join(folder).to_string_lossy().into_owned()],
                claude_ide_bridge_files::Limits::default(),
            );
            walk_workspace(&ws, &table)
        };
        let found = walk("ws");
        let mut files: Vec<String> = found
            .files
            .iter()
            .map(|(l, p)| {
                // Written with `/` on every OS (Windows' paths have `\`).
                let below = p.strip_prefix(root.path()).unwrap();
                format!("{l} {}", below.to_string_lossy().replace('\\', "/"))
            })
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "javascript ws/tools/build.js",
                "typescript ws/src/app.ts",
                "typescript ws/src/old.ts"
            ]
        );
        let latest = |l: &str| {
            Path::new(&found.latest[l])
                .strip_prefix(root.path())
                .unwrap()
                .to_owned()
        };
        assert_eq!(latest("typescript"), Path::new("ws/src/app.ts"));
        assert_eq!(latest("javascript"), Path::new("ws/tools/build.js"));
        assert!(!found.latest.contains_key("python"), "{:?}", found.latest);
        let inside = walk("deps/node_modules/own");
        assert_eq!(inside.files.len(), 1, "{:?}", inside.files);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_answer_wait("0")
            .unwrap_err()
            .contains("at least 100ms"));
        assert!(parse_answer_wait("99ms").is_err());
        assert_eq!(parse_answer_wait("0.1s"), Ok(Duration::from_millis(100)));
        assert!(parse_duration("2h")
            .unwrap_err()
            .contains("the unit must be ms or s"));
        assert!(parse_duration("1min")
            .unwrap_err()
            .contains("the unit must be ms or s"));
        assert!(parse_duration("5").unwrap_err().contains("give a unit"));
        assert!(parse_duration("9999s").is_err());
    }

    #[test]
    fn log_is_private_bounded_and_rotated() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state/lsp.log");
        let log = Log::open(&p).unwrap();
        log.note("hello");
        let text = fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("hello") && text.starts_with("claude-ide-bridge["),
            "{text}"
        );
        // Mode bits where there are some (Unix); Windows has none.
        if let Some(mode) = crate::sys::mode_of(&p) {
            assert_eq!(mode, 0o600);
        }
        let mut w = log.clone();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..40 {
            w.write_all(&chunk).unwrap();
        }
        let len = fs::metadata(&p).unwrap().len();
        assert!(len <= LOG_RUN_LIMIT + 200, "{len}");
        assert!(fs::read_to_string(&p)
            .unwrap()
            .ends_with("the rest is dropped)\n"));
        // Another bridge's start while this one still writes there: not moved aside (this one
        // would go on writing to the `.old` the next move replaces).
        let beside = Log::open(&p).unwrap();
        assert!(!d.path().join("state/lsp.log.old").exists());
        assert!(fs::metadata(&p).unwrap().len() > LOG_ROTATE_AT);
        drop((log, w, beside));
        // Bigger than 8 MiB at the next start: moved aside, a fresh log begins.
        let log = Log::open(&p).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), 0);
        assert!(d.path().join("state/lsp.log.old").exists());
        drop(log);
    }

    /// A start that moves the log aside while another bridge's start waits to mark it: that one
    /// opens the new file at the path (it wrote to `lsp.log.old`, which the next move replaced).
    #[cfg(unix)]
    #[test]
    fn a_log_moved_while_a_start_waits_is_opened_again() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lsp.log");
        fs::write(&p, "old\n").unwrap();
        // The moving start's probe, holding the file until it is moved.
        let mover = File::open(&p).unwrap();
        mover.lock().unwrap();
        let opening = {
            let p = p.clone();
            std::thread::spawn(move || open_file(&p))
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        fs::rename(&p, d.path().join("lsp.log.old")).unwrap();
        drop(mover);
        let mut file = opening.join().unwrap().unwrap();
        file.write_all(b"new\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(
            fs::read_to_string(d.path().join("lsp.log.old")).unwrap(),
            "old\n"
        );
    }

    /// A log file that is refused (here a symbolic link, not followed) leaves the log off: it
    /// opens, what is written to it is dropped, and the file the link names is left as it was.
    #[cfg(unix)]
    #[test]
    fn a_refused_log_is_off_and_touches_nothing() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        fs::write(&target, "mine\n").unwrap();
        let p = d.path().join("lsp.log");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        let log = Log::open(&p).unwrap();
        assert!(log.inner.lock().unwrap().file.is_none());
        log.note("hello");
        let mut w = log.clone();
        w.write_all(b"more").unwrap();
        w.flush().unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "mine\n");
        assert!(fs::symlink_metadata(&p).unwrap().is_symlink());
    }
}

#[cfg(test)]
mod changes_tests {
    use super::{Changes, CHANGES_GAP};
    use claude_ide_bridge::{Diagnostic, FileDiagnostics, Position, Range};
    use std::sync::Arc;
    use std::time::Duration;

    /// A change of `uri` whose one diagnostic says `n`.
    fn change(uri: &str, n: usize) -> FileDiagnostics {
        FileDiagnostics {
            uri: uri.into(),
            diagnostics: vec![Diagnostic {
                message: format!("problem {n}"),
                severity: Diagnostic::ERROR.into(),
                range: Range::new(Position::new(0, 0), Position::new(0, 1)),
                source: None,
                code: None,
            }],
        }
    }

    /// A file's diagnostics changing thousands of times a second wake the host at most every
    /// [`CHANGES_GAP`], the first change at once, and the host is handed the latest of each file.
    #[test]
    fn changes_wake_the_host_at_most_every_gap() {
        let changes = Arc::new(Changes::default());
        let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pacer = {
            let (changes, wakes, stop) = (changes.clone(), wakes.clone(), stop.clone());
            std::thread::spawn(move || {
                changes.pace(CHANGES_GAP, || {
                    // A host that takes what waits as soon as it is woken.
                    wakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = changes.take();
                    !stop.load(std::sync::atomic::Ordering::SeqCst)
                })
            })
        };
        let change = |n: usize| FileDiagnostics {
            uri: format!("file:///w/{}.py", n % 2),
            diagnostics: Vec::new(),
        };
        changes.add(change(0));
        let first = std::time::Instant::now();
        while wakes.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            assert!(first.elapsed() < Duration::from_secs(5), "no wake-up");
            std::thread::yield_now();
        }
        assert!(
            first.elapsed() < Duration::from_millis(90),
            "the first at once"
        );
        let start = std::time::Instant::now();
        let mut n = 0;
        while start.elapsed() < Duration::from_millis(500) {
            changes.add(change(n));
            n += 1;
        }
        let woken = wakes.load(std::sync::atomic::Ordering::SeqCst);
        // (500 ms / 100 ms, and the first one, and one started as the loop began.)
        assert!(woken <= 7 && n > 1000, "{woken} wake-ups for {n} changes");
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        changes.add(change(0));
        pacer.join().unwrap();
    }

    /// A host that does not take what it was woken for (kept waiting by a `--stdio` editor that
    /// does not read) is not woken again until it has: it was woken every gap, each wake-up
    /// kept in its channel for as long as it waited.
    #[test]
    fn a_host_that_has_not_taken_the_changes_is_not_woken_again() {
        let changes = Arc::new(Changes::default());
        let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let gap = Duration::from_millis(10);
        let _pacer = {
            let (changes, wakes) = (changes.clone(), wakes.clone());
            std::thread::spawn(move || {
                changes.pace(gap, || {
                    wakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    true
                })
            })
        };
        let woken = |n: usize| {
            let start = std::time::Instant::now();
            while wakes.load(std::sync::atomic::Ordering::SeqCst) < n {
                assert!(start.elapsed() < Duration::from_secs(10), "no wake-up {n}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        changes.add(change("file:///a.py", 0));
        woken(1);
        for n in 1..30 {
            changes.add(change("file:///b.py", n));
            std::thread::sleep(gap);
        }
        assert_eq!(wakes.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(changes.take().len(), 2, "the latest of each file");
        changes.add(change("file:///a.py", 1));
        woken(2);
    }

    /// A flood of changes before the host looks: one entry per file, the latest.
    #[test]
    fn a_flood_is_the_latest_change_per_file() {
        let changes = Changes::default();
        for i in 0..10_000 {
            let uri = ["file:///a.py", "file:///b.py", "file:///c.py"][i % 3];
            changes.add(change(uri, i));
        }
        let taken = changes.take();
        let got: Vec<(&str, &str)> = taken
            .iter()
            .map(|c| (c.uri.as_str(), c.diagnostics[0].message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("file:///a.py", "problem 9999"),
                ("file:///b.py", "problem 9997"),
                ("file:///c.py", "problem 9998")
            ]
        );
        assert!(changes.take().is_empty());
    }
}

#[cfg(test)]
mod server_opts_tests {
    use super::ServerOpts;

    /// A `--lsp` name that no language has (misspelt, or in capitals) is said, once, with the
    /// language meant when only its case differs; a language's name or extension is not.
    #[test]
    fn a_name_no_language_has_is_said() {
        let opts = |specs: &[&str]| ServerOpts {
            lsp: specs
                .iter()
                .map(|s| claude_ide_bridge_lsp::parse_override(s).unwrap())
                .collect(),
            no_lsp: false,
        };
        assert!(opts(&["python=pylsp", "py=pylsp", "ts=x", "cpp=clangd"])
            .new_languages()
            .is_empty());
        let notes = opts(&["Python=pylsp", "pyhton=pylsp", "pyhton=other"]).new_languages();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("--lsp Python: ") && notes[0].contains("did you mean python?")
        );
        assert!(notes[1].starts_with("--lsp pyhton: ") && notes[1].contains("known: python,"));
        assert!(
            notes[1].ends_with("files ending in .pyhton"),
            "{}",
            notes[1]
        );
    }
}
