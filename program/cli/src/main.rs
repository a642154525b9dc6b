//! `claude-ide-bridge`: the IDE side of Claude Code's IDE integration as a command-line program.
//!
//! - `serve`: a headless IDE (diffs shown and decided on the terminal, or by policy), or with
//!   `--stdio` a bridge for editors that speak JSON lines.
//! - `run -- claude ...`: serve, and run claude connected to it.
//! - `list`, `doctor`: what the real client would see, and why it might not see a bridge.
//! - `completions`, `man`: a shell completion script and a man page, from the same definitions.

#![forbid(unsafe_code)]

mod host;
mod inspect;
mod lines;
mod lsp;
mod manual;
mod panic;
mod pathmap;

mod runtime;
mod serve;
mod state;
mod sys;
mod ui;

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueHint};

use claude_ide_bridge_runtime::posix_folders;
use host::DiffPolicy;
use runtime::RuntimeKind;
use serve::serve;

/// Exit code of a runtime failure.
const FAILURE: u8 = 1;
/// Exit code of a usage error (as clap's own).
const USAGE: u8 = 2;
/// How long the last lines to the stdio editor (`cancelled`, `disconnected`) may wait for it to
/// read them.
const STDOUT_GRACE: Duration = Duration::from_secs(2);

#[derive(Parser)]
#[command(
    name = "claude-ide-bridge",
    version,
    about = "The IDE side of Claude Code's IDE integration, without an IDE",
    long_about = "The IDE side of Claude Code's IDE integration, without an IDE.\n\n\
        `claude` finds an IDE through a lock file in ~/.claude/ide (or $CLAUDE_CONFIG_DIR/ide), \
        connects over WebSocket on 127.0.0.1 and asks it to show diffs, open files and report \
        diagnostics. This program is such an IDE for the terminal, a bridge for editors that \
        speak JSON lines (--stdio), and a doctor for when claude does not find your IDE.\n\n\
        Exit codes: 0 ok, 1 runtime failure or doctor findings, 2 usage error; `serve` stopped by \
        Ctrl-C (SIGINT) ends by that signal after its clean stop on Linux and macOS (130 in a \
        shell), as an interrupted program does, so that a script running it stops too; `run` \
        exits with its command's status (128+N when a signal N ended it; 127 when it is not \
        found, 126 when it cannot be run, as a shell)."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the workspace until SIGINT, SIGTERM, SIGHUP or SIGQUIT (or, with --stdio, until
    /// stdin closes or stdout's reader leaves).
    Serve(ServeArgs),
    /// Serve, run a command (claude) connected to it in this terminal, and exit with its status.
    #[command(
        after_help = "Signals (Linux and macOS): Ctrl-C is the command's (claude takes it), \
        also when sent with kill; SIGTERM, SIGHUP or SIGQUIT ask the command to end (SIGTERM) and \
        the bridge stops once it has; the same signal again a second or more later kills it (3 s \
        after the terminal closed, without asking). On Windows the command shares the console and \
        gets its events itself.\n\n\
        Example: claude-ide-bridge run -- claude --model sonnet"
    )]
    Run(RunArgs),
    /// List the lock files claude would read, with their state.
    List,
    /// Explain why claude started in DIR would not see a bridge (exit 1 when a problem is found).
    Doctor(DoctorArgs),
    /// Print a completion script for SHELL (e.g. `source <(claude-ide-bridge completions bash)`).
    Completions {
        #[arg(value_enum)]
        shell: manual::CompletionShell,
    },
    /// Print the man page (e.g. `claude-ide-bridge man > ~/.local/share/man/man1/claude-ide-bridge.1`).
    Man,
}

#[derive(Args, Clone)]
struct CommonOpts {
    /// A workspace folder (repeatable); default: the current directory.
    #[arg(long = "workspace", value_name = "DIR", value_hint = ValueHint::DirPath)]
    workspace: Vec<PathBuf>,
    /// The IDE name claude shows (in `/ide`, and in its prompts: "Opened changes in NAME"); 1 to
    /// 100 characters, no control characters.
    #[arg(long, value_name = "NAME", default_value = "claude-ide-bridge", value_parser = ide_name)]
    ide_name: String,
    /// What to do with proposed changes (openDiff). Default: ask on a terminal, else defer
    /// (serve); defer (run); the editor decides (--stdio).
    #[arg(long, value_enum, value_name = "POLICY")]
    on_diff: Option<DiffPolicy>,
    /// The runtime driving the sockets.
    #[arg(long, value_enum, default_value = "threads")]
    runtime: RuntimeKind,
    /// Open files claude asks to open (openFile, open_files) in $VISUAL/$EDITOR, started in the
    /// background without the terminal (which belongs to claude or the prompt): a GUI editor,
    /// whose windows are the user's and stay open when the bridge stops.
    #[arg(long)]
    open_files: bool,
    /// Append every message and connection event to FILE as JSON lines (FILE and its folder,
    /// when missing, are made private to you: it holds the files claude reads and changes).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    wire_log: Option<PathBuf>,
    /// Write the lock file in DIR instead of $CLAUDE_CONFIG_DIR/ide or ~/.claude/ide.
    #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath)]
    lock_dir: Option<PathBuf>,
    /// The port to listen on (0: any free port). Default: the port this workspace's last bridge
    /// had, kept with its auth token in a state file ($XDG_STATE_HOME/claude-ide-bridge or
    /// ~/.local/state/claude-ide-bridge; %LOCALAPPDATA%\claude-ide-bridge on Windows), so that a
    /// claude still running reconnects by itself; any free port the first time, or when it is taken.
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// Draw a new auth token instead of the one kept for this workspace (a claude connected to the
    /// last bridge then reconnects with /ide).
    #[arg(long)]
    new_token: bool,
    /// The address to listen on. Anything but loopback is an explicit opt-in (the token is
    /// still required). claude looks at 127.0.0.1 unless CLAUDE_CODE_IDE_HOST_OVERRIDE names
    /// another host: for an address it does not reach (::1, 127.0.0.2), `serve` prints the
    /// override and `run` sets it.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    host: IpAddr,
    /// Accept this name in a client's Host header besides loopback ones (repeatable): an explicit
    /// opt-in, e.g. `host.docker.internal` for claude in a container with
    /// CLAUDE_CODE_IDE_HOST_OVERRIDE. The Host check then stays on whatever --host is; the token
    /// is still required (SECURITY.md).
    #[arg(long = "allow-host", value_name = "NAME", value_parser = host_name)]
    allow_host: Vec<String>,
    /// The largest file the bridge reads for a client (readFile, openFile's line count, the
    /// diff shown at the prompt), in bytes; a bigger one is refused with its size. Default: the
    /// message size limit, 10 MiB; at most 32 MiB, half a connection's output queue (a larger
    /// file's answer could never fit in it; one whose text JSON escapes to more than twice its
    /// size, control characters say, is refused as an answer too large all the same).
    #[arg(long, value_name = "BYTES", default_value_t = 10 * 1024 * 1024, value_parser = read_bytes)]
    max_read_bytes: u64,
    #[command(flatten)]
    lsp: lsp::LspOpts,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    common: CommonOpts,
    /// Talk to an editor over stdin/stdout, one JSON object per line (see docs/stdio.md).
    #[arg(long)]
    stdio: bool,
    /// With --stdio, for an editor on another machine (repeatable): EDITOR=HERE names a folder as
    /// the editor names it (`/home/me/app`, `C:\Users\me\app`, a file:// URI) and the same
    /// folder here. Every path between the two is translated by the longest matching folder; a
    /// path under none is refused. `wsl`: Windows drives at `/mnt/<letter>` (docs/stdio.md, "Path
    /// mapping").
    #[arg(long = "path-map", value_name = "EDITOR=HERE", requires = "stdio")]
    path_map: Vec<String>,
    /// With --stdio: stop, as at stdin's end, once nothing came from the editor for SECS seconds
    /// (1 to 86400; `90` or `90s`).
    /// A link gone silent (a laptop asleep, a network gone) ends no pipe until the transport
    /// gives up, which ssh may take hours to; meanwhile claude's diffs would wait for an editor
    /// that cannot answer. The editor keeps the link alive with any line (`{"type":"status"}`)
    /// sent more often than that (docs/stdio.md).
    #[arg(long = "editor-timeout", value_name = "SECS", requires = "stdio",
          value_parser = editor_timeout)]
    editor_timeout: Option<u64>,
    /// Workspace folders, as --workspace names them (`serve ~/src/app` is `serve --workspace
    /// ~/src/app`).
    #[arg(value_name = "DIR", value_hint = ValueHint::DirPath)]
    dirs: Vec<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: CommonOpts,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND", value_hint = ValueHint::CommandWithArguments)]
    command: Vec<OsString>,
}

#[derive(Args)]
struct DoctorArgs {
    /// The directory claude would start in (default: the current directory).
    #[arg(value_hint = ValueHint::DirPath)]
    dir: Option<PathBuf>,
    /// The same directory, named as serve's option names a workspace folder.
    #[arg(long = "workspace", value_name = "DIR", value_hint = ValueHint::DirPath, conflicts_with = "dir")]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    servers: lsp::ServerOpts,
}

/// `serve`'s folders, `--workspace` and positional `DIR`s, in the order typed: the first is the
/// one relative paths are read against and `getWorkspaceInfo` names (the positional ones went
/// after every `--workspace`).
fn in_typed_order(
    typed: Option<&clap::ArgMatches>,
    workspace: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
) -> Vec<PathBuf> {
    let at = |id: &str| -> Vec<usize> {
        (typed.and_then(|m| m.indices_of(id)).into_iter().flatten()).collect()
    };
    let (w, d) = (at("workspace"), at("dirs"));
    if w.len() != workspace.len() || d.len() != dirs.len() {
        // (Each value has its index; without, the folders stay as clap gave them.)
        return workspace.into_iter().chain(dirs).collect();
    }
    let mut all: Vec<(usize, PathBuf)> = w.into_iter().zip(workspace).collect();
    all.extend(d.into_iter().zip(dirs));
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, p)| p).collect()
}

/// `--editor-timeout`'s value: whole seconds, 1 to 86400, with or without an `s` (the other
/// durations' flags take `90s`; a bare number was this one's only form).
fn editor_timeout(s: &str) -> Result<u64, String> {
    let secs = s.trim().strip_suffix('s').unwrap_or(s.trim());
    match secs.parse::<u64>() {
        Ok(n) if (1..=86_400).contains(&n) => Ok(n),
        Ok(_) => Err(format!("{s:?}: must be between 1 and 86400 seconds")),
        Err(_) => Err(format!("{s:?}: give whole seconds, such as 90 or 90s")),
    }
}

fn main() -> ExitCode {
    // First: as a container's first process, the program runs itself again and reaps.
    if let Some(status) = sys::init_if_first() {
        return status;
    }
    // Then: the program may have been started to launch a command tied to a bridge.
    sys::launch_if_asked();
    // Before any thread starts: a bridge left running keeps its idle memory small however many
    // connections came and went (BENCHMARKS.md, "A day's use").
    claude_ide_bridge_runtime::memory::limit_arenas();
    claude_ide_bridge_runtime::memory::map_large_blocks();
    panic::install();
    sys::write_past_file_size_limit_fails();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Cmd::Serve(mut a) => {
            let typed = matches.subcommand_matches("serve");
            a.common.workspace = in_typed_order(typed, a.common.workspace, a.dirs);
            let editor_timeout = a.editor_timeout.map(std::time::Duration::from_secs);
            serve(a.common, a.stdio, &a.path_map, editor_timeout, None)
        }
        Cmd::Run(a) => serve(a.common, false, &[], None, Some(a.command)),
        Cmd::List => ExitCode::from(inspect::list()),
        Cmd::Doctor(a) => ExitCode::from(inspect::doctor(a.dir.or(a.workspace), &a.servers)),
        Cmd::Completions { shell } => print(Ok(manual::completions(Cli::command(), shell))),
        Cmd::Man => print(manual::man_page(Cli::command())),
    }
}

/// Writes generated text (a completion script, the man page) to stdout.
fn print(text: std::io::Result<Vec<u8>>) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match text.and_then(|t| out.write_all(&t).and_then(|()| out.flush())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(&format!("cannot write to stdout: {e}")),
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(USAGE)
}

fn failure(msg: &str) -> ExitCode {
    failure_with(FAILURE, msg)
}

/// [`failure`] with the exit code `code`.
fn failure_with(code: u8, msg: &str) -> ExitCode {
    // After the log lines queued before it (with `--stdio`, stderr is written by a thread of its
    // own, and an editor that does not read it must not hold up the exit).
    ui::err(format_args!("error: {msg}\n"));
    ui::flush_stderr(STDOUT_GRACE);
    ExitCode::from(code)
}

/// A `--ide-name` value: what claude shows the user as the IDE's name, so something to show: not
/// empty (a blank line in `/ide`), at most 100 characters, nothing a terminal obeys rather than
/// shows (control characters, and the bidirectional ones that reorder what follows: what
/// `ui::visible` makes visible).
fn ide_name(s: &str) -> Result<String, String> {
    match s.chars().count() {
        0 => Err("give a name to show in claude's /ide".into()),
        101.. => Err(format!("{s:?} is longer than 100 characters")),
        _ if ui::visible(s) != s => Err(format!(
            "{s:?} has characters a terminal would not show as they are (control or \
             bidirectional ones)"
        )),
        _ if s.trim().is_empty() => {
            Err("give a name to show in claude's /ide, not only spaces".into())
        }
        _ => Ok(s.to_owned()),
    }
}

/// A `--max-read-bytes` value: a number of bytes, at most half the output queue a connection
/// has (`Limits::max_outbound`): a file's contents escaped in JSON are twice their size for a
/// text of quotes or backslashes (more, of control characters: that answer is refused as too
/// large then).
fn read_bytes(s: &str) -> Result<u64, String> {
    let most = claude_ide_bridge::Limits::default().max_outbound as u64 / 2;
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of bytes"))?;
    match n <= most {
        true => Ok(n),
        false => Err(format!(
            "{n} is more than a connection's answer can carry: {most} at most (half its output \
             queue: a file's contents in JSON may take twice their size)"
        )),
    }
}

/// A `--allow-host` value: a DNS name (letters, digits, `-`, `.`), an IPv4 address or a bracketed
/// IPv6 one, without a port.
fn host_name(name: &str) -> Result<String, String> {
    let ipv6 = (name.strip_prefix('[').and_then(|n| n.strip_suffix(']')))
        .is_some_and(|n| n.parse::<std::net::Ipv6Addr>().is_ok());
    let dns = !name.is_empty()
        && name.len() <= 253
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !name.starts_with(['.', '-']);
    match ipv6 || dns {
        true => Ok(name.to_string()),
        false => Err(format!(
            "{name:?} is not a host name (letters, digits, '-', '.'), an IPv4 address or a \
             bracketed IPv6 address; give it without a port"
        )),
    }
}

/// Why `path`, which is no directory, cannot be a folder to serve or start claude in: it is
/// something else, nothing, or out of reach (a folder on the way this user may not enter, a
/// file on the way, a loop of links: the system's reason, which "does not exist" hid)
/// (`serve`, `doctor`).
pub(crate) fn not_a_folder(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(_) => "is not a directory".into(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "does not exist".into(),
        Err(e) => format!("cannot be reached ({e})"),
    }
}

/// The workspace folders given to `serve` in the two forms the bridge uses: as this OS names
/// them (`C:\Users\me\project` on Windows), for what meets the OS (the lock file, which the
/// Windows `claude` compares with its working directory, the files crate, the language
/// servers), and in the POSIX form the engine speaks; each absolute, without a trailing
/// separator (`C:\work\app\` as Vim's `:p` gives it on Windows: `claude` compares the
/// folders with its working directory as text). `doctor` finds a bridge's state file by them.
/// A folder given twice (`/w` and `/w/`, or `.` in `/w`) is served once.
pub(crate) fn folder_forms(folders: &[PathBuf]) -> std::io::Result<(Vec<PathBuf>, Vec<String>)> {
    let folders: Vec<PathBuf> = folders.iter().map(|f| f.components().collect()).collect();
    let posix = posix_folders(&folders)?;
    let native = folders
        .iter()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()));
    let mut forms: (Vec<PathBuf>, Vec<String>) = (Vec::new(), Vec::new());
    for (native, posix) in native.zip(posix) {
        if !forms.1.contains(&posix) {
            forms.0.push(native);
            forms.1.push(posix);
        }
    }
    Ok(forms)
}

#[cfg(test)]
mod tests {
    use super::{editor_timeout, folder_forms, read_bytes};

    /// `serve`'s folders keep the order they were typed in, options and positional ones mixed.
    #[test]
    fn folders_keep_the_order_typed() {
        use clap::{CommandFactory, FromArgMatches};
        let m = super::Cli::command()
            .try_get_matches_from([
                "x",
                "serve",
                "c1",
                "--workspace",
                "ws",
                "c2",
                "--workspace",
                "w2",
            ])
            .unwrap();
        let super::Cmd::Serve(a) = super::Cli::from_arg_matches(&m).unwrap().command else {
            panic!("not serve");
        };
        let folders =
            super::in_typed_order(m.subcommand_matches("serve"), a.common.workspace, a.dirs);
        let want: Vec<std::path::PathBuf> = ["c1", "ws", "c2", "w2"].map(Into::into).to_vec();
        assert_eq!(folders, want);
    }

    /// `--ide-name` takes a name to show.
    #[test]
    fn ide_name_is_something_to_show() {
        assert_eq!(super::ide_name("Vim").as_deref(), Ok("Vim"));
        assert_eq!(super::ide_name("Vim (ssh)").as_deref(), Ok("Vim (ssh)"));
        for bad in ["", "  ", "E\u{1b}[31mvil", "a\nb", "Vim\u{202e}mi"] {
            assert!(super::ide_name(bad).is_err(), "{bad:?}");
        }
        assert!(super::ide_name(&"x".repeat(101)).is_err());
    }

    /// `--max-read-bytes` takes what an answer can carry: half the output queue at most.
    #[test]
    fn max_read_bytes_is_what_an_answer_can_carry() {
        assert_eq!(read_bytes("10"), Ok(10));
        assert_eq!(read_bytes("33554432"), Ok(32 << 20));
        assert!(read_bytes("33554433")
            .unwrap_err()
            .contains("33554432 at most"));
        assert!(read_bytes("1e6").is_err());
    }

    /// `--editor-timeout` takes `90` and `90s` (the other durations' form), within its range.
    #[test]
    fn editor_timeout_takes_seconds_with_or_without_the_unit() {
        assert_eq!(editor_timeout("90"), Ok(90));
        assert_eq!(editor_timeout("90s"), Ok(90));
        assert_eq!(editor_timeout("86400"), Ok(86_400));
        assert!(editor_timeout("0")
            .unwrap_err()
            .contains("between 1 and 86400"));
        assert!(editor_timeout("86401s").is_err());
        assert!(editor_timeout("2m").unwrap_err().contains("whole seconds"));
        assert!(editor_timeout("1.5s").is_err());
        assert!(editor_timeout("s").is_err());
    }

    /// A folder given twice, in other spellings, is served once.
    #[test]
    fn a_folder_given_twice_is_served_once() {
        let d = tempfile::tempdir().unwrap();
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let mut slash = d.path().as_os_str().to_owned();
        slash.push(std::path::MAIN_SEPARATOR_STR);
        let given = [
            d.path().into(),
            slash.into(),
            other.clone(),
            d.path().join("."),
        ];
        let (native, posix) = folder_forms(&given).unwrap();
        assert_eq!(native.len(), 2, "{native:?}");
        assert_eq!(posix.len(), 2, "{posix:?}");
        assert_eq!(native[1], std::path::absolute(&other).unwrap());
    }
}
