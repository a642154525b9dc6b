//! `list` and `doctor`: the lock files the real client reads, and why it might not see a bridge.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use claude_ide_bridge::is_within;
use claude_ide_bridge::{lock_dirs, port_from_lock_name, LockFile};
use claude_ide_bridge_files::{Limits, Workspace};
use claude_ide_bridge_lsp::ServerTable;
use claude_ide_bridge_runtime::lock::{
    lock_writer_alive, pid_alive, read_lock_text, MAX_LOCK_FILE_BYTES,
};

use crate::lsp::ServerOpts;
use crate::sys::{self, Finding};

mod remote;

/// `println!` that ignores a closed stdout (`claude-ide-bridge list | head -1`): the report is
/// for a person, and a reader that stopped reading is not an error.
///
/// Each line as the terminal should print it (`ui::visible`): a lock file's name and folders are
/// any IDE's text, which must not colour, clear or break the report.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", crate::ui::visible(&line));
    }};
}

/// One `<port>.lock` found in a directory.
struct Found {
    path: PathBuf,
    port: u16,
    ours: bool,
    lock: Result<LockFile, String>,
    /// When it was last written, if the system says.
    written: Option<SystemTime>,
    /// Found in a Windows lock folder read from WSL ([`windows_dirs`]).
    from_windows: bool,
}

impl Found {
    /// Its writer may still run: the pid is alive and names the process that wrote the file
    /// ([`lock_writer_alive`]), or, alive but naming another process here, its port answers: a
    /// bridge in another pid namespace sharing this folder and network (a container's pid 1 is
    /// this host's init, started at another time). A Windows bridge's file read from WSL: its
    /// port answers.
    fn live(&self) -> bool {
        match &self.lock {
            Err(_) => false,
            Ok(_) if self.windows_bridge().is_some() => port_accepts(self.port),
            Ok(l) => {
                lock_writer_alive(l, self.written) || (pid_alive(l.pid) && port_accepts(self.port))
            }
        }
    }

    /// A Windows bridge's file read from WSL: its pid names no process here, and a claude in WSL
    /// keeps it while its port answers.
    fn windows_bridge(&self) -> Option<&LockFile> {
        match &self.lock {
            Ok(l) if self.from_windows && l.running_in_windows => Some(l),
            _ => None,
        }
    }

    /// Its workspace folders as a claude here compares them: a Windows bridge's `C:\...` read as
    /// `/mnt/c/...` in WSL.
    fn folders(&self) -> Vec<String> {
        let Ok(l) = &self.lock else {
            return Vec::new();
        };
        match self.windows_bridge() {
            Some(_) => (l.workspace_folders.iter())
                .map(|w| sys::wsl_path(w).unwrap_or_else(|| w.clone()))
                .collect(),
            None => l.workspace_folders.clone(),
        }
    }

    /// Whether claude takes it as an IDE's: a lock file whose pid names a process (`kill(pid,
    /// 0)`), whichever process that is now. It counts such files when it decides whether exactly
    /// one matches its folder, a stale one whose pid was handed out again included.
    fn seen_by_claude(&self) -> bool {
        match self.windows_bridge() {
            Some(_) => port_accepts(self.port),
            None => matches!(&self.lock, Ok(l) if pid_alive(l.pid)),
        }
    }
}

/// In WSL, the Windows lock folders a claude run here reads too (the Windows profile's
/// `.claude/ide`); none elsewhere.
fn windows_dirs() -> Vec<PathBuf> {
    sys::wsl_windows_lock_dirs().unwrap_or_default()
}

/// Where claude reads lock files: as the bridge finds its own
/// (`claude_ide_bridge_runtime::lock::default_lock_dir`), the home the system has for the user
/// when the variable is not set (the client's `os.homedir()` does the same).
fn dirs() -> Vec<PathBuf> {
    let config = std::env::var("CLAUDE_CONFIG_DIR").ok();
    let home = claude_ide_bridge_runtime::lock::user_home()
        .and_then(|h| h.into_os_string().into_string().ok());
    lock_dirs(config.as_deref(), home.as_deref())
}

/// Whether `dir` is a folder a claude reads lock files from here ([`dirs`], and in WSL the
/// Windows ones, [`windows_dirs`]; the same folder under another name too).
pub(crate) fn claude_reads(dir: &Path) -> bool {
    let same = |a: &Path, b: &Path| {
        a == b || fs::canonicalize(a).is_ok_and(|a| fs::canonicalize(b).is_ok_and(|b| a == b))
    };
    // (In WSL, the Windows folders a Windows claude reads too.)
    dirs().iter().chain(&windows_dirs()).any(|d| same(d, dir))
}

/// [`scan`], the files of a Windows lock folder read from WSL (one of `windows`) marked so.
fn scan_as_claude_reads(dir: &Path, windows: &[PathBuf]) -> std::io::Result<Vec<Found>> {
    let mut found = scan(dir)?;
    if windows.iter().any(|w| w == dir) {
        for f in &mut found {
            f.from_windows = true;
        }
    }
    Ok(found)
}

/// The lock files in `dir`; an error when it cannot be listed (as claude cannot).
fn scan(dir: &Path) -> std::io::Result<Vec<Found>> {
    let entries = fs::read_dir(dir)?;
    // Ended at an error: a listing that failed may not end by itself.
    let mut found: Vec<Found> = entries
        .map_while(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let port = port_from_lock_name(&name)?;
            let path = e.path();
            let meta = fs::symlink_metadata(&path).ok()?;
            let lock = if meta.file_type().is_symlink() {
                Err("it is a symbolic link".to_string())
            } else if !meta.is_file() {
                // A FIFO would hold the read (and `list`) for good.
                Err("it is not a regular file".to_string())
            } else if meta.len() > MAX_LOCK_FILE_BYTES {
                Err(format!(
                    "not a lock file: {} bytes, more than {MAX_LOCK_FILE_BYTES}",
                    meta.len()
                ))
            } else {
                read_lock_text(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|t| LockFile::parse(&t).map_err(|e| format!("not a lock file: {e}")))
            };
            Some(Found {
                path,
                port,
                ours: sys::is_mine(&meta),
                lock,
                written: meta.modified().ok(),
                from_windows: false,
            })
        })
        .collect();
    found.sort_by_key(|f| f.port);
    Ok(found)
}

/// What `serve` says of the other lock files in its lock folder `dir` that a claude started in
/// its workspace counts too: an editor open on the same folder (or one inside or around it),
/// another bridge. Claude connects by itself only when exactly one lock file matches its folder,
/// so with one of these beside it, a claude started there connects to neither (doctor's "lock
/// files match"). Its own file (`port`) names the folders; the others' are compared with them.
pub(crate) fn others_serving(dir: &Path, port: u16) -> Vec<String> {
    let Ok(found) = scan(dir) else {
        return Vec::new();
    };
    let Some(own) = (found.iter()).find(|f| f.port == port && f.lock.is_ok()) else {
        return Vec::new();
    };
    let own = own.folders();
    let overlaps = |theirs: &[String]| {
        (own.iter()).find_map(|o| {
            (theirs.iter()).find_map(|t| match (is_within(o, t), is_within(t, o)) {
                (true, _) => Some(o.clone()),
                (false, true) => Some(t.clone()),
                (false, false) => None,
            })
        })
    };
    (found.iter())
        .filter(|f| f.port != port && f.ours && f.seen_by_claude())
        .filter_map(|f| {
            let l = f.lock.as_ref().ok()?;
            let folder = overlaps(&f.folders())?;
            let who = match f.live() {
                true => format!(
                    "{} (pid {}, port {}) serves {folder} too",
                    l.ide_name, l.pid, f.port
                ),
                // Stale, its pid handed to another process: claude still counts it.
                false => format!(
                    "{} is stale ({}, port {}), but its pid {} names a process again, so claude \
                     counts it",
                    f.path.display(),
                    l.ide_name,
                    f.port,
                    l.pid
                ),
            };
            Some(format!(
                "warning: {who}: a claude started in {folder} connects to neither by itself (it \
                 does when exactly one lock file matches its folder): pick one with /ide, or \
                 start claude with this bridge's CLAUDE_CODE_SSE_PORT below"
            ))
        })
        .collect()
}

/// `list`: every lock file in every directory the client scans.
pub fn list() -> u8 {
    let windows = windows_dirs();
    for dir in dirs().into_iter().chain(windows.iter().cloned()) {
        match fs::metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                out!("{} (does not exist)", dir.display());
                continue;
            }
            // (A file in its place, a folder on the way this user may not enter.)
            Err(e) => {
                out!("{} (cannot be reached: {e}; nor can claude)", dir.display());
                continue;
            }
            Ok(_) => {}
        }
        out!("{}", dir.display());
        let found = match scan_as_claude_reads(&dir, &windows) {
            Ok(found) => found,
            Err(e) => {
                out!("  (cannot be listed: {e}; nor can claude list it)");
                continue;
            }
        };
        if found.is_empty() {
            out!("  (no lock files)");
        }
        for f in found {
            match &f.lock {
                Ok(l) => out!(
                    "  {:<5} port {:<5}  {:<20}  pid {:<7}  {}",
                    if f.live() { "live" } else { "stale" },
                    f.port,
                    l.ide_name,
                    l.pid,
                    l.workspace_folders.join(", ")
                ),
                Err(e) => out!("  {:<5} port {:<5}  unreadable: {e}", "?", f.port),
            }
        }
    }
    0
}

struct Report {
    problems: usize,
}

impl Report {
    fn ok(&self, msg: &str) {
        out!("ok: {msg}");
    }
    fn info(&self, msg: &str) {
        out!("info: {msg}");
    }
    fn problem(&mut self, msg: &str, fix: &str) {
        self.problems += 1;
        out!("problem: {msg}");
        out!("  fix: {fix}");
    }
}

fn covers_loopback(no_proxy: &str) -> bool {
    no_proxy.split(',').map(str::trim).any(|e| {
        matches!(
            e,
            "*" | "127.0.0.1" | "127.0.0.0/8" | "127.0.0.1/32" | "127.0.0.0/24"
        )
    })
}

/// The bridge serving `dir` as its one workspace folder, by the port and pid its state file
/// keeps (`crate::state`, under this user's state folder whatever `CLAUDE_CONFIG_DIR` it had),
/// when that process runs and the port answers.
fn served_elsewhere(dir: &Path) -> Option<(u32, u16, Option<PathBuf>)> {
    let (native, posix) = crate::folder_forms(&[dir.to_path_buf()]).ok()?;
    let key = crate::state::key_folders(&native, &posix).ok()?;
    let saved = crate::state::Store::new(&crate::state::state_dir()?, &key)
        .load()
        .ok()??;
    (pid_alive(saved.pid) && port_answers(saved.port).is_ok()).then_some((
        saved.pid,
        saved.port,
        saved.lock_dir,
    ))
}

/// Where a bridge serving elsewhere keeps its lock file, as `doctor` says it ("another folder"
/// when its state file does not say), and what to start claude with to read it: the folder's
/// parent as `CLAUDE_CONFIG_DIR` when the folder is an `ide` one (claude reads
/// `$CLAUDE_CONFIG_DIR/ide`), else the bridge's `--lock-dir`, which claude cannot be told.
fn elsewhere_hint(lock_dir: Option<&Path>) -> (String, String) {
    let Some(dir) = lock_dir else {
        return (
            "another folder (it was started with another CLAUDE_CONFIG_DIR or HOME)".into(),
            "start claude with the CLAUDE_CONFIG_DIR (and HOME) that bridge had, or stop it and \
             start one with these"
                .into(),
        );
    };
    let shown = dir.display();
    // A folder claude reads, without the file: gone while the bridge runs (it writes it again
    // when it can; a folder that could not be made again, say).
    if claude_reads(dir) {
        return (
            format!("{shown}, a folder claude reads, but the file is not there"),
            "stop that bridge and start it again (it writes its lock file at its start)".into(),
        );
    }
    match dir
        .parent()
        .filter(|_| dir.file_name() == Some("ide".as_ref()))
    {
        Some(config) => (
            format!("{shown} (it was started with another CLAUDE_CONFIG_DIR or HOME)"),
            format!(
                "start claude with CLAUDE_CONFIG_DIR={}, or stop that bridge and start one with \
                 these",
                config.display()
            ),
        ),
        None => (
            format!("{shown} (its --lock-dir)"),
            "stop that bridge and start one without --lock-dir (claude reads only \
             $CLAUDE_CONFIG_DIR/ide or ~/.claude/ide)"
                .into(),
        ),
    }
}

/// Whether something accepts connections on `port` (127.0.0.1).
fn port_accepts(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

/// Whether an IDE answers HTTP on `port` (a WebSocket upgrade without a token: a bridge refuses
/// it with 401). A connection alone is no answer: the system accepts it for a process that is
/// stopped (`serve` suspended with Ctrl-Z), which claude then waits 30 s for.
fn port_answers(port: u16) -> Result<u16, String> {
    remote::upgrade_status("127.0.0.1", port)
}

/// Whether the process behind `port` takes a connection on 127.0.0.1 but gives no HTTP answer
/// (within 2 s): stopped, as a `serve` suspended with Ctrl-Z is, or hung. A bridge started
/// beside one says so rather than that it serves.
pub(crate) fn port_silent(port: u16) -> bool {
    use std::io::{Read, Write};
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    // Any answer, a refusal too, or the connection closed: not silent. An upgrade without the
    // token, which the bridge there refuses (401) saying who may have asked, not a request it
    // takes for a client's mistake (400).
    let asked = s.write_all(upgrade_head(&format!("127.0.0.1:{port}"), None).as_bytes());
    let mut first = [0u8; 1];
    asked.is_ok()
        && matches!(s.read(&mut first), Err(e) if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ))
}

/// Whether a bridge on `port` of 127.0.0.1 takes `token`: it refuses another token (401) and
/// answers this one's upgrade (101), as a bridge of this workspace does, its process unseen
/// from here or not (another pid namespace: a container sharing the network and the lock
/// folder). Not any WebSocket server, which may answer every upgrade. The bridge there sees a
/// client that left before `initialize`.
pub(crate) fn takes_token(port: u16, token: &str) -> bool {
    let wrong = claude_ide_bridge_runtime::generate_token();
    upgrade_status_line(port, wrong.as_str()).is_some_and(|l| l.starts_with(b"HTTP/1.1 401"))
        && upgrade_status_line(port, token).is_some_and(|l| l.starts_with(b"HTTP/1.1 101"))
}

/// The first 12 bytes of the answer to an upgrade sent with `token` to `port` of 127.0.0.1
/// (`HTTP/1.1 101`), if any within 2 s; the connection is then closed.
fn upgrade_status_line(port: u16, token: &str) -> Option<[u8; 12]> {
    use std::io::{Read, Write};
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let head = upgrade_head(&format!("127.0.0.1:{port}"), Some(token));
    let mut line = [0u8; 12];
    s.write_all(head.as_bytes()).ok()?;
    s.read_exact(&mut line).ok()?;
    Some(line)
}

/// A WebSocket upgrade of `/` as claude sends one, to `host` (`name:port`, the `Host` header),
/// with `token` when given: the probes of a port (`doctor`'s, a start's) all ask so.
fn upgrade_head(host: &str, token: Option<&str>) -> String {
    let auth = token
        .map(|t| format!("X-Claude-Code-Ide-Authorization: {t}\r\n"))
        .unwrap_or_default();
    format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{auth}\r\n"
    )
}

/// The terminal of an IDE, by what it sets (`TERM_PROGRAM=vscode` in VS Code and its forks,
/// `TERMINAL_EMULATOR=JetBrains-JediTerm`, `FORCE_CODE_TERMINAL`), as `VAR=value`: claude started
/// there connects by itself only to the IDE it runs in (one of its parent processes) or to the
/// port `CLAUDE_CODE_SSE_PORT` names.
fn ide_terminal() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(v) = var("TERM_PROGRAM").filter(|v| v == "vscode") {
        return Some(format!("TERM_PROGRAM={v}"));
    }
    if let Some(v) = var("TERMINAL_EMULATOR").filter(|v| v.starts_with("JetBrains")) {
        return Some(format!("TERMINAL_EMULATOR={v}"));
    }
    var("FORCE_CODE_TERMINAL").map(|v| format!("FORCE_CODE_TERMINAL={v}"))
}

/// `CLAUDE_CODE_AUTO_CONNECT_IDE` set to a value claude reads as no (`false`, `0`, `no`,
/// `off`): it then connects to no IDE by itself, `--ide` and `CLAUDE_CODE_SSE_PORT` alike.
fn auto_connect_off() -> Option<String> {
    let v = std::env::var("CLAUDE_CODE_AUTO_CONNECT_IDE").ok()?;
    let off = ["false", "0", "no", "off"].contains(&v.trim().to_ascii_lowercase().as_str());
    off.then(|| format!("CLAUDE_CODE_AUTO_CONNECT_IDE={v}"))
}

/// The language servers `serve` would use for `workspace`, the folder `dir`: per language present, the servers that would
/// run together (and those that would run beside them once installed), or every server tried and
/// how to install it. Missing servers are not problems (claude
/// still finds the bridge); `getDiagnostics` answers `[]` for those files. The files are found by
/// the walk `listFiles` makes (claude_ide_bridge_files: `.gitignore` honoured, `.git` and links
/// skipped, bounded), so the languages counted are those of the files a client can list.
fn language_servers(table: Option<ServerTable>, workspace: &Workspace, dir: &str) {
    out!("language servers (getDiagnostics in serve and run):");
    let Some(table) = table else {
        out!("info: --no-lsp: no language server would start");
        return;
    };
    let crate::lsp::WorkspaceFiles {
        plan,
        latest,
        files,
    } = crate::lsp::walk_workspace(workspace, &table);
    if plan.languages.is_empty() {
        out!(
            "info: no file of a language with a known server under {}",
            dir
        );
    }
    for lang in &plan.languages {
        let files = format!(
            "{} file{}",
            lang.files,
            if lang.files == 1 { "" } else { "s" }
        );
        match lang.servers.as_slice() {
            [] => {
                out!(
                    "missing: {} ({files}): no server found; getDiagnostics answers [] for them",
                    lang.language
                );
                for m in &lang.missing {
                    match m.wrong_path {
                        true => out!("  {}: name a server program", m.install),
                        false => out!("  install {}: {}", m.program, m.install),
                    }
                }
                out!("  or name one: --lsp {}=COMMAND", lang.language);
            }
            set => {
                // Found, not tried: `serve` starts them (a command that is no language server,
                // `--lsp python=ruff` without `server`, is found all the same).
                out!(
                    "found: {} ({files}): {}",
                    lang.language,
                    crate::lsp::describe_set(set)
                );
                // None of its first choices is found (only those run beside them): one of
                // them would run too.
                let first: Vec<_> = lang.missing.iter().filter(|m| m.first).collect();
                match first.as_slice() {
                    [] => {}
                    [m] if m.wrong_path => out!("  not run: {}", m.install),
                    [m] => out!("  and {} first, when installed: {}", m.program, m.install),
                    all => {
                        out!("  and the first of these found, none is installed:");
                        for m in all {
                            match m.wrong_path {
                                true => out!("    {}", m.install),
                                false => out!("    {}: {}", m.program, m.install),
                            }
                        }
                    }
                }
                for m in lang.missing.iter().filter(|m| !m.first) {
                    match m.wrong_path {
                        true => out!("  not run beside it: {}", m.install),
                        false => out!("  also runs {} when installed: {}", m.program, m.install),
                    }
                }
            }
        }
    }
    if plan.languages.iter().any(|l| !l.servers.is_empty()) {
        out!(
            "info: servers found are not started here: how each start went is in serve's \
             language-server log ({}, or --lsp-log)",
            crate::lsp::default_log_path().display()
        );
    }
    let warm = crate::lsp::warm_languages(&plan);
    if !warm.is_empty() {
        out!(
            "info: these start when claude connects: {} (--lsp-warm connect, the default; with --lsp-warm diff a file's servers start at its first diff or question)",
            warm.join(", ")
        );
        for language in &warm {
            if let Some(file) = latest.get(language) {
                out!("  and would open {file} in {language}'s (its most recently modified file)");
            }
        }
    }
    if let Some(line) = compilation_database_warning(&plan, &files) {
        out!("{line}");
    }
    if plan.truncated {
        let limits = workspace.limits();
        out!(
            "info: the look at the workspace's files stopped before its end, having found {} of a known language (it reads at most {} entries, {} levels deep, for at most {} s, and passes over a folder it cannot read): other languages may be present",
            files.len(),
            limits.max_walk_entries,
            limits.max_depth,
            limits.max_walk_time.as_secs_f32()
        );
    }
}

/// What clangd looks for, for a file, in the file's folder and in each folder above it: a
/// compilation database (`compile_commands.json`, there or in its `build/`) or
/// `compile_flags.txt`.
const COMPILATION_DATABASES: [&str; 3] = [
    "compile_commands.json",
    "build/compile_commands.json",
    "compile_flags.txt",
];

/// A warning for the C and C++ files (of `files`, each with its language, when the plan has a
/// server for them) for which clangd finds no compilation database, looked for as clangd does:
/// it then guesses the flags and reports include errors that are not in the code (`'foo.h' file
/// not found`). Each folder is looked at once.
fn compilation_database_warning(
    plan: &claude_ide_bridge_lsp::Plan,
    files: &[(String, PathBuf)],
) -> Option<String> {
    let served = |language: &str| {
        plan.languages
            .iter()
            .any(|l| l.language == language && !l.servers.is_empty())
    };
    let mut known: std::collections::HashMap<PathBuf, bool> = std::collections::HashMap::new();
    let mut has_database = |file: &Path| {
        let mut unknown = Vec::new();
        let mut found = false;
        for folder in file.ancestors().skip(1) {
            if let Some(&k) = known.get(folder) {
                found = k;
                break;
            }
            unknown.push(folder.to_path_buf());
            if COMPILATION_DATABASES
                .iter()
                .any(|f| folder.join(f).is_file())
            {
                found = true;
                break;
            }
        }
        for folder in unknown {
            known.insert(folder, found);
        }
        found
    };
    let c: Vec<&Path> = files
        .iter()
        .filter(|(language, _)| (language == "c" || language == "cpp") && served(language))
        .map(|(_, f)| f.as_path())
        .collect();
    let without: Vec<&Path> = c.iter().copied().filter(|f| !has_database(f)).collect();
    let first = without.first()?;
    Some(format!(
        "warning: {} of {} C/C++ files have no compile_commands.json or compile_flags.txt in their folder or one above it ({} among them): clangd guesses how they are built and may report include errors that are not in the code (generate one: cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON, or bear -- make; or list the flags, one a line, in compile_flags.txt)",
        without.len(),
        c.len(),
        first.display()
    ))
}

/// `doctor [DIR]`: returns 0 when nothing is wrong, 1 otherwise.
pub fn doctor(dir: Option<PathBuf>, servers: &ServerOpts) -> u8 {
    let mut r = Report { problems: 0 };
    let dir = match dir.map_or_else(std::env::current_dir, Ok) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot read the current directory: {e}");
            return 1;
        }
    };
    let lexical = std::path::absolute(&dir).unwrap_or(dir.clone());
    let lexical = lexical.to_string_lossy().into_owned();
    if !dir.is_dir() {
        out!("checking what `claude` started in {lexical} would see");
        r.problem(
            &format!(
                "{lexical} {} (claude cannot be started there)",
                crate::not_a_folder(&dir)
            ),
            "give the folder claude runs in (doctor FOLDER), or run doctor there",
        );
        out!("1 problem found");
        return 1;
    }
    // Why, as the bridge would say it (on macOS, an "Operation not permitted" is the privacy
    // protection of Documents, Desktop and Downloads: where to allow the app is said too).
    let here = Workspace::new(vec![lexical.clone()], Limits::default());
    if let Some(why) = here.unreadable_folders().first() {
        out!("checking what `claude` started in {lexical} would see");
        r.problem(
            &format!("{why}: neither claude nor the bridge can see the files in it"),
            "give yourself permission to read it (on Unix: chmod u+rx), or use another folder",
        );
        out!("1 problem found");
        return 1;
    }
    // The working directory of a claude started there, written as lock files write folders:
    // `lock_folders` lists a folder as given, then resolved when links make it another (and on
    // Windows without the `\\?\` prefix); the last is the one the OS gives claude.
    let claude_cwd = claude_ide_bridge_runtime::lock_folders(std::slice::from_ref(&dir))
        .ok()
        .and_then(|f| f.into_iter().last())
        .unwrap_or_else(|| lexical.clone());
    out!("checking what `claude` started in {lexical} would see");

    let windows = windows_dirs();
    let dirs = dirs();
    if dirs.is_empty() {
        // An empty one is no home for claude (its `os.homedir()`), not the system's either.
        let why = claude_ide_bridge_runtime::lock::no_lock_dir_reason();
        r.problem(
            &format!("{why}: claude has nowhere to look for lock files"),
            &format!(
                "set {} (and CLAUDE_CONFIG_DIR if you use one)",
                sys::HOME_VAR
            ),
        );
    } else {
        r.info(&format!(
            "claude reads lock files from: {}",
            dirs.iter()
                .chain(&windows)
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }

    let mut all = Vec::new();
    // A lock folder that could not be listed: a bridge found serving the folder may have its lock
    // file there (not "in another folder").
    let mut unlisted = false;
    // A Windows folder read from WSL: its modes are the mount's, not checked (claude reads it
    // as it is); only its lock files are.
    for d in &windows {
        if let Ok(found) = scan_as_claude_reads(d, &windows) {
            all.extend(found);
        }
    }
    for d in &dirs {
        match fs::symlink_metadata(d) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                r.info(&format!(
                    "{} does not exist (no IDE wrote a lock file there)",
                    d.display()
                ));
                continue;
            }
            // A file on the way (CLAUDE_CONFIG_DIR naming a file), a folder this user may not
            // enter (one `sudo -E` made root's): no bridge can write there, nor claude read.
            Err(e) => {
                r.problem(
                    &format!(
                        "{} cannot be reached ({e}): no bridge can write its lock file there, nor \
                         can claude read one",
                        d.display()
                    ),
                    "make each folder on the way one you own and may enter (one made by root: \
                     sudo chown -R $USER on it), or point CLAUDE_CONFIG_DIR at a folder",
                );
                continue;
            }
            Ok(m) if m.file_type().is_symlink() => r.problem(
                &format!(
                    "{} is a symbolic link; the bridge refuses to write lock files through it",
                    d.display()
                ),
                &format!("replace it with a real directory: {}", sys::new_dir_hint(d)),
            ),
            // Said once: not listed as well, with a fix of its own that could not help.
            Ok(m) if !m.is_dir() => {
                r.problem(
                    &format!("{} is not a directory", d.display()),
                    &format!("remove it and create a directory: {}", sys::new_dir_hint(d)),
                );
                continue;
            }
            // What the bridge refuses (runtimes/runtime/src/lock.rs): a directory others may write.
            Ok(m) => match sys::lock_dir_finding(d, &m) {
                Finding::Ok(msg) => r.ok(&msg),
                Finding::Info(msg) => r.info(&msg),
                Finding::Problem(msg, fix) => r.problem(&msg, &fix),
            },
        }
        match scan(d) {
            Ok(found) => all.extend(found),
            Err(e) => {
                unlisted = true;
                r.problem(
                    &format!(
                        "{} cannot be listed ({e}): claude finds no lock file there",
                        d.display()
                    ),
                    &format!("chmod 700 {}", d.display()),
                );
            }
        }
    }

    for f in &all {
        match &f.lock {
            // Another user's, unreadable to this one (a bridge writes it 0600): not this user's
            // to remove, least of all while its port answers.
            Err(e) if !f.ours && port_accepts(f.port) => r.info(&format!(
                "{}: {e}: another user's, and its port {} answers: a running bridge of theirs \
                 (a claude of yours cannot read it either)",
                f.path.display(),
                f.port
            )),
            Err(e) if !f.ours => r.problem(
                &format!(
                    "{}: {e}: another user's, and its port {} does not answer (stale)",
                    f.path.display(),
                    f.port
                ),
                &format!(
                    "ask its owner to remove it, or: sudo {}",
                    sys::remove_hint(&f.path)
                ),
            ),
            Err(e) => r.problem(
                &format!("{}: {e} (corrupt)", f.path.display()),
                &format!("remove it: {}", sys::remove_hint(&f.path)),
            ),
            Ok(l) if !f.ours && f.live() => r.info(&format!(
                "{} belongs to another user: their running bridge ({}, pid {}, port {})",
                f.path.display(),
                l.ide_name,
                l.pid,
                f.port
            )),
            Ok(_) if !f.ours => r.problem(
                &format!(
                    "{} belongs to another user, and its bridge is not running (stale)",
                    f.path.display()
                ),
                &format!(
                    "ask its owner to remove it, or: sudo {}",
                    sys::remove_hint(&f.path)
                ),
            ),
            // A Windows bridge's, read from WSL: by its port alone.
            Ok(l) if f.windows_bridge().is_some() => match f.live() {
                true => r.ok(&format!(
                    "{}: a Windows bridge's, {} on port {}, answering here, folders {}",
                    f.path.display(),
                    l.ide_name,
                    f.port,
                    f.folders().join(", ")
                )),
                false => r.info(&format!(
                    "{}: a Windows bridge's ({}, port {}), whose port does not answer here: a \
                     claude here deletes it (or the bridge stopped; or WSL 2's NAT keeps \
                     Windows' loopback from here)",
                    f.path.display(),
                    l.ide_name,
                    f.port
                )),
            },
            // claude takes a pid it sees for a live IDE's, and lists this one.
            Ok(l) if !f.live() && pid_alive(l.pid) => r.problem(
                &format!(
                    "{} is stale: its pid {} ({}) now names another process, started after the \
                     one that wrote it (a reboot or a restart hands pids out again); claude takes \
                     it for a live IDE's",
                    f.path.display(),
                    l.pid,
                    l.ide_name,
                ),
                &format!(
                    "remove it: {} (a bridge of the same IDE removes it when it starts)",
                    sys::remove_hint(&f.path)
                ),
            ),
            // Harmless: claude skips it, and deletes it.
            Ok(l) if !pid_alive(l.pid) => r.info(&format!(
                "{} is stale: its process {} ({}) is not running; claude deletes such files (or: {})",
                f.path.display(),
                l.pid,
                l.ide_name,
                sys::remove_hint(&f.path)
            )),
            Ok(l) if l.transport != "ws" => r.problem(
                &format!(
                    "{} uses transport {:?}; claude connects only over \"ws\"",
                    f.path.display(),
                    l.transport
                ),
                "update the IDE extension that wrote it",
            ),
            Ok(l) => r.ok(&format!(
                "{}: live, {} on port {}, folders {}",
                f.path.display(),
                l.ide_name,
                f.port,
                l.workspace_folders.join(", ")
            )),
        }
    }

    let sse_port = std::env::var("CLAUDE_CODE_SSE_PORT")
        .ok()
        .and_then(|p| p.trim().parse::<u16>().ok());
    // As claude counts them (a stale file whose pid names another process now included; a live
    // one's pid names a process too).
    let live: Vec<&Found> = (all.iter())
        .filter(|f| f.ours && f.seen_by_claude())
        .collect();
    // CLAUDE_CODE_SSE_PORT naming a live lock file makes the choice: claude connects to that one.
    let chosen = sse_port.filter(|p| live.iter().any(|f| f.port == *p));
    let matching: Vec<&Found> = live
        .iter()
        .copied()
        .filter(|f| {
            if f.lock.is_err() {
                return false;
            }
            if let Some(p) = chosen {
                return f.port == p;
            }
            // As the client compares: its working directory, which the OS gives with links
            // resolved, against the folders as written (a folder named only through a link does
            // not match a claude started in it).
            f.folders().iter().any(|w| is_within(&claude_cwd, w))
        })
        .collect();
    // Naming no live lock file (an old port, `serve`'s `export` line kept): claude 2.1.332 still
    // connects by itself, to the one lock file of its folder (the variable turns that on): the
    // folder's match below decides. Unsetting it would stop a plain `claude` connecting.
    if let Some(p) = sse_port.filter(|p| !live.iter().any(|f| f.port == *p)) {
        r.info(&format!(
            "CLAUDE_CODE_SSE_PORT={p} names no live lock file: claude connects by itself to the \
             one lock file of its folder, if there is one (below); set it to the port \
             `claude-ide-bridge serve` printed to choose that bridge"
        ));
    }
    match matching.len() {
        0 => match served_elsewhere(&dir) {
            // Its lock file may well be in the folder that could not be listed (said above).
            Some(_) if unlisted => {}
            Some((pid, port, lock_dir)) => {
                let (place, fix) = elsewhere_hint(lock_dir.as_deref());
                r.problem(
                    &format!(
                        "no lock file claude reads here has a workspace folder containing \
                         {lexical}, but a bridge serves it (pid {pid}, port {port}): its lock file \
                         is in {place}"
                    ),
                    &fix,
                )
            }
            None => r.problem(
                &format!("no live lock file has a workspace folder containing {lexical}"),
                &format!(
                    "start a bridge for it: claude-ide-bridge serve --workspace {lexical}  (or start claude inside a served folder)"
                ),
            ),
        },
        // The stale file said above, whose pid names a process again: claude tries it.
        1 if !matching[0].live() => r.info(&format!(
            "the one lock file that {} is that stale one ({}): claude started here tries it and \
             finds no IDE until it is removed",
            match chosen {
                Some(_) => "CLAUDE_CODE_SSE_PORT names",
                None => "matches",
            },
            matching[0].path.display()
        )),
        // The port named serves other folders: claude connects there, and each change here is
        // refused as outside its workspace.
        1 if chosen.is_some()
            && !matching[0]
                .folders()
                .iter()
                .any(|w| is_within(&claude_cwd, w)) =>
        {
            r.problem(
                &format!(
                    "CLAUDE_CODE_SSE_PORT={} names the bridge of {} ({}), which does not serve \
                     {lexical}: claude started here connects to it, and it refuses every change \
                     here as outside its workspace",
                    matching[0].port,
                    matching[0].folders().join(", "),
                    matching[0].path.display()
                ),
                "unset CLAUDE_CODE_SSE_PORT, or set it to the port of this folder's bridge",
            )
        }
        1 if chosen.is_some() => r.ok(&format!(
            "exactly one lock file matches ({}): claude, started with CLAUDE_CODE_SSE_PORT as set here, connects to it",
            matching[0].path.display()
        )),
        1 => match ide_terminal() {
            // The lock file of the IDE this terminal is in: claude connects to it.
            Some(_)
                if (matching[0].lock.as_ref().ok())
                    .is_some_and(|l| sys::ancestors().is_some_and(|a| a.contains(&l.pid))) =>
            {
                r.ok(&format!(
                    "exactly one lock file matches ({}), the IDE's whose terminal this is: claude started here connects to it",
                    matching[0].path.display()
                ))
            }
            Some(set) => r.problem(
                &format!(
                    "exactly one lock file matches ({}), but this is an IDE's terminal ({set}): \
                     claude started here connects by itself only to the IDE it runs in, or to \
                     the port CLAUDE_CODE_SSE_PORT names",
                    matching[0].path.display()
                ),
                &format!(
                    "start claude through the bridge (claude-ide-bridge run -- claude), or with \
                     CLAUDE_CODE_SSE_PORT={} claude (or /ide in claude)",
                    matching[0].port
                ),
            ),
            None => r.ok(&format!(
                "exactly one lock file matches ({}): `claude --ide` started here connects to it (in a plain `claude`, type /ide)",
                matching[0].path.display()
            )),
        },
        n => r.problem(
            &format!(
                "{n} lock files match {lexical} (ports {}); claude auto-connects only when exactly one matches",
                matching
                    .iter()
                    .map(|f| f.port.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "stop the extra IDEs, or pick one: export CLAUDE_CODE_SSE_PORT=<port> ENABLE_IDE_INTEGRATION=true",
        ),
    }
    if let Some(set) = auto_connect_off() {
        r.problem(
            &format!("{set}: claude connects to no IDE by itself, not with --ide nor CLAUDE_CODE_SSE_PORT"),
            "unset CLAUDE_CODE_AUTO_CONNECT_IDE (also in the \"env\" of claude's settings.json), or connect with /ide in claude",
        );
    }
    // With an override, claude connects to its host instead (checked by `remote_view`).
    let overridden = remote::env("CLAUDE_CODE_IDE_HOST_OVERRIDE").is_some();
    // (A stale file's port is no IDE's: its fix, removing it, is said above.)
    for f in matching.iter().filter(|f| !overridden && f.live()) {
        let port = f.port;
        match port_answers(port) {
            Ok(status) => r.ok(&format!("port {port} answers on 127.0.0.1 (HTTP {status})")),
            // A bridge started with `--host ::1`: claude does not look there by itself.
            Err(why) if remote::upgrade_status("[::1]", port).is_ok() => r.problem(
                &format!(
                    "port {port} from {} does not answer on 127.0.0.1 ({why}) but on [::1], where \
                     claude does not look by itself",
                    f.path.display()
                ),
                &format!(
                    "start claude with CLAUDE_CODE_IDE_HOST_OVERRIDE='[::1]' \
                     CLAUDE_CODE_SSE_PORT={port}, or the bridge without --host"
                ),
            ),
            Err(why) => r.problem(
                &format!(
                    "port {port} from {} does not answer on 127.0.0.1 ({why})",
                    f.path.display()
                ),
                "the IDE is stopped (a `serve` suspended with Ctrl-Z: `fg` or `bg` it), hung, or listens elsewhere: restart it (its lock file is then rewritten)",
            ),
        }
    }

    let no_proxy = ["no_proxy", "NO_PROXY"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .collect::<Vec<_>>()
        .join(",");
    let proxies: Vec<&str> = [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ]
    .into_iter()
    .filter(|v| std::env::var(v).is_ok_and(|x| !x.trim().is_empty()))
    .collect();
    if !proxies.is_empty() && !covers_loopback(&no_proxy) {
        // Not a problem for the IDE link: claude 2.1.330 reaches the IDE directly with every
        // proxy variable set (tests/e2e, checked by hand with a dead proxy).
        r.info(&format!(
            "{} is set and no_proxy/NO_PROXY does not cover 127.0.0.1: claude reaches the IDE \
             directly all the same, but programs it runs that honour these variables would send \
             loopback requests to the proxy (`claude-ide-bridge run -- claude` adds 127.0.0.1, \
             localhost and ::1 to both)",
            proxies.join(", ")
        ));
    } else if !proxies.is_empty() {
        r.ok("proxy variables are set, and no_proxy covers 127.0.0.1");
    }

    remote::remote_view(&mut r, &matching, &all, &no_proxy, &proxies);

    if let Some((folder, e)) = crate::state::folder_refused() {
        r.problem(
            &format!(
                "the state folder {} is not used ({e}): a bridge takes a new port and token at \
                 each start, and a claude connected to one that restarts needs /ide",
                folder.display()
            ),
            "make it yours and private (on Unix: chmod 700 on it and its parent), or remove it: \
             the next bridge makes it again",
        );
    }

    if let Some((path, why)) = crate::state::workspace_problem(Path::new(&lexical)) {
        r.problem(
            &format!(
                "this workspace's state {} {why}, and a claude connected to a bridge that \
                 restarts needs /ide",
                path.display()
            ),
            "a file: remove it (the next bridge writes it again, 0600 in a 0700 folder); a \
             folder: make it yours and writable",
        );
    }

    for note in servers.new_languages() {
        out!("warning: {note}");
    }
    match servers.table() {
        // (The workspace the folder check above made, not a second one of the same folder.)
        Ok(table) => language_servers(table, &here, &lexical),
        Err(e) => r.problem(
            &format!("language servers: {e}"),
            "name fewer servers for that language with --lsp",
        ),
    }

    if r.problems == 0 {
        out!("all good: `claude --ide` started in {lexical} should connect to the bridge (or /ide in claude)");
        0
    } else {
        out!(
            "{} problem{} found",
            r.problems,
            if r.problems == 1 { "" } else { "s" }
        );
        1
    }
}

#[cfg(test)]
mod tests {

    /// A C/C++ workspace without a compilation database is warned about; one with one (or no C)
    /// is not. `--lsp-warm connect` starts the languages with the most files, at most three.
    #[test]
    fn c_without_a_compilation_database_and_what_warms() {
        use claude_ide_bridge_lsp::{Plan, PlannedLanguage};
        let lang = |id: &str, files: usize, found: bool| PlannedLanguage {
            language: id.into(),
            files,
            servers: if found {
                vec![vec![format!("{id}-server")]]
            } else {
                vec![]
            },
            missing: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let c = Plan {
            languages: vec![lang("c", 3, true), lang("python", 1, true)],
            truncated: false,
        };
        let files: Vec<(String, std::path::PathBuf)> = ["sub/a.c", "top.c", "other/b.c", "x.py"]
            .iter()
            .map(|f| {
                let language = if f.ends_with(".py") { "python" } else { "c" };
                (language.to_owned(), dir.path().join(f))
            })
            .collect();
        for (_, f) in &files {
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "").unwrap();
        }
        let w = super::compilation_database_warning(&c, &files).unwrap();
        assert!(
            w.starts_with("warning: 3 of 3 C/C++ files have no compile_commands.json"),
            "{w}"
        );
        // clangd looks in each file's folder and above: one in sub/ covers sub/a.c only.
        std::fs::write(dir.path().join("sub/compile_commands.json"), "[]").unwrap();
        let w = super::compilation_database_warning(&c, &files).unwrap();
        assert!(w.starts_with("warning: 2 of 3 C/C++ files"), "{w}");
        // One in the build folder of a folder above them all covers every file, the folder
        // served being that one or one below it.
        std::fs::create_dir(dir.path().join("build")).unwrap();
        std::fs::write(dir.path().join("build/compile_commands.json"), "[]").unwrap();
        assert_eq!(super::compilation_database_warning(&c, &files), None);
        let c_files_only: Vec<_> = files
            .iter()
            .filter(|(_, f)| f.ends_with("b.c"))
            .cloned()
            .collect();
        assert_eq!(super::compilation_database_warning(&c, &c_files_only), None);
        // Without clangd, or without C files: nothing to say.
        let no_server = Plan {
            languages: vec![lang("c", 3, false)],
            truncated: false,
        };
        std::fs::remove_file(dir.path().join("build/compile_commands.json")).unwrap();
        assert!(super::compilation_database_warning(&c, &files).is_some());
        assert_eq!(
            super::compilation_database_warning(&no_server, &files),
            None
        );
        let py = Plan {
            languages: vec![lang("python", 3, true)],
            truncated: false,
        };
        assert_eq!(super::compilation_database_warning(&py, &files), None);
        let many = Plan {
            languages: vec![
                lang("c", 2, true),
                lang("go", 50, false),
                lang("python", 9, true),
                lang("rust", 4, true),
                lang("typescript", 30, true),
            ],
            truncated: false,
        };
        assert_eq!(
            crate::lsp::warm_languages(&many),
            ["typescript", "python", "rust"]
        );
    }
    use super::covers_loopback;

    #[test]
    fn no_proxy_loopback() {
        assert!(covers_loopback("example.com, 127.0.0.1"));
        assert!(covers_loopback("*"));
        assert!(!covers_loopback("localhost,example.com"));
        assert!(!covers_loopback(""));
    }
}
