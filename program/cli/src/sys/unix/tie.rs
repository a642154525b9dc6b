//! `run`'s command and `$EDITOR` on a proposal, tied to the bridge: they end when it ends, however
//! it ends (SIGKILL, a crash, the OOM killer: nothing of the bridge runs then to end them, and they
//! stayed on the terminal the shell took back, fighting it for it).
//!
//! Both ways go through the program itself, started again with a first argument no user types
//! ([`launch_if_asked`], called first in `main`):
//!
//! - **Launcher** (Linux): the command is started through the program as [`LAUNCHER`], which asks
//!   the kernel for SIGTERM at its parent's end (`PR_SET_PDEATHSIG`) and then becomes the command
//!   (`exec`: same pid, so everything sent to the child reaches the command).
//! - **Watcher** (macOS, which has no parent-death signal): the command is started as it is, and
//!   the program beside it as [`WATCHER`], in a process group of its own (the terminal's Ctrl-C is
//!   not for it). The watcher waits for the exit of either the bridge or the command (kqueue's
//!   `EVFILT_PROC`, `NOTE_EXIT`; no wake-up until then) and sends the command SIGTERM when the
//!   bridge's comes first; it ends with the command. The bridge reaps the command only after the
//!   watcher said its watch is set, so the pid it watches cannot have been given to another
//!   process. On Linux the same watcher runs on pidfds: a debug build's test switch
//!   (`CLAUDE_IDE_BRIDGE_TEST_TIE=watcher`) makes Linux use it, which is how its tests run it.
//!
//! Elsewhere (the other Unixes), and in the unit tests (whose executable is not the program),
//! commands are started untied. The way is decided at the first command tied.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::process::Pid;

/// The first argument that makes the program the launcher of a tied command, never typed by a
/// user: `__tied PARENT PROGRAM ARGS...`.
const LAUNCHER: &str = "__tied";

/// The first argument that makes the program the watcher of a tied command, never typed by a
/// user: `__watch BRIDGE COMMAND` (their pids).
const WATCHER: &str = "__watch";

/// How long the bridge waits for a watcher to say its watch is set before going on untied.
const WATCHER_SET_WAIT: Duration = Duration::from_secs(5);

/// Whether this process is the program (its `main` called [`launch_if_asked`]), whose commands
/// may be tied through it; not in the unit tests, whose executable is not the program.
static IS_PROGRAM: AtomicBool = AtomicBool::new(false);

/// How this process ties its commands ([`chosen_way`]), decided at the first command tied: only
/// `run` and `$EDITOR` pay for the look at `/proc/self/exe` and `PATH`.
static WAY: OnceLock<Way> = OnceLock::new();

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Launcher,
    Watcher,
    Untied,
}

/// The way this process, the program, ties its commands: the launcher on Linux when
/// `/proc/self/exe` is the program ([`runs_as_itself`]), the watcher on macOS, else none.
fn chosen_way() -> Way {
    let forced = cfg!(debug_assertions)
        && std::env::var_os("CLAUDE_IDE_BRIDGE_TEST_TIE").is_some_and(|v| v == "watcher");
    if forced || cfg!(target_os = "macos") {
        Way::Watcher
    } else if cfg!(any(target_os = "linux", target_os = "android")) && runs_as_itself() {
        Way::Launcher
    } else {
        Way::Untied
    }
}

/// The program `run -- NAME ARGS` runs: `NAME`, which `spawn` looks for as `execvp` does, as the
/// shell that ran the bridge would.
pub fn program_named(name: &OsStr) -> OsString {
    name.to_owned()
}

/// Starts `run`'s command tied to the bridge (see [`start`]).
pub fn spawn_tied(command: Command) -> io::Result<Child> {
    start(command, |_| {})
}

/// Starts `command`, with `setup` applied (its standard streams), tied to the bridge as this
/// process ties commands (the module's doc). Through the launcher, `spawn` starts the program,
/// not the command: the command is looked for first (`PATH`, execute permission), so that a
/// missing one is refused as `spawn` would refuse it. The parent-death signal comes when the
/// *thread* that started the launcher ends: the commands tied are started by threads that
/// outlive them (the main thread for `run`'s, the prompt's job, which waits for it, for
/// `$EDITOR`).
pub(super) fn start(command: Command, setup: impl Fn(&mut Command)) -> io::Result<Child> {
    // Refused here rather than given to `sh` by glibc's `execvp` (`machine.rs`).
    let (path, dir) = (path_of(&command), command.get_current_dir());
    if let Ok(found) = find_program(command.get_program(), path.as_deref(), dir) {
        if let Some(why) = super::machine::foreign_program(&found) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
        }
    }
    let way = match IS_PROGRAM.load(Ordering::Relaxed) {
        true => *WAY.get_or_init(chosen_way),
        false => Way::Untied,
    };
    let mut command = match way {
        Way::Launcher => through_launcher(command)?,
        Way::Watcher | Way::Untied => command,
    };
    setup(&mut command);
    let child = command.spawn()?;
    if way == Way::Watcher {
        // Said, not silent: the user thinks it ends with the bridge (once the terminal is the
        // bridge's again: the command has it now).
        if let Err(why) = start_watcher(&child) {
            crate::ui::warn(&format!(
                "{}: not tied to the bridge ({why}): a bridge that is killed leaves it running",
                command.get_program().to_string_lossy()
            ));
        }
    }
    Ok(child)
}

/// Whether `run`'s command (a program started with this process's `PATH`, in its folder) is
/// one [`start`] could start: the error it would give when not (not found, not executable, a
/// program for another machine), said before the bridge starts.
pub fn findable(program: &OsStr) -> io::Result<()> {
    let found = find_program(program, std::env::var_os("PATH").as_deref(), None)?;
    match super::machine::foreign_program(&found) {
        Some(why) => Err(io::Error::new(io::ErrorKind::Unsupported, why)),
        None => Ok(()),
    }
}

/// `command` started through the program as [`LAUNCHER`] (`/proc/self/exe`, the running binary
/// even if an upgrade replaced the file). The launcher carries `command`'s program, arguments,
/// environment and folder; what cannot be read back from a `Command` (its standard streams,
/// `env_clear`, `arg0`) is set on the one returned.
fn through_launcher(command: Command) -> io::Result<Command> {
    let (path, dir) = (path_of(&command), command.get_current_dir());
    find_program(command.get_program(), path.as_deref(), dir)?;
    let mut launcher = Command::new("/proc/self/exe");
    launcher
        .arg(LAUNCHER)
        .arg(std::process::id().to_string())
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(v) => launcher.env(key, v),
            None => launcher.env_remove(key),
        };
    }
    if let Some(dir) = dir {
        launcher.current_dir(dir);
    }
    Ok(launcher)
}

/// Starts the program as the [`WATCHER`] of `child` and waits (at most [`WATCHER_SET_WAIT`]) for
/// it to say its watch is set: a newline on its output. A watcher that cannot be started (the
/// program's file removed or moved since it started: `cargo uninstall`) or does not say so
/// leaves the command untied (and is killed): why, for the caller to say. One that does is
/// reaped, once it ends with the command, by a thread of its own.
fn start_watcher(child: &Child) -> Result<(), String> {
    use std::io::Read;
    let me = std::env::current_exe().map_err(|e| format!("the program's path: {e}"))?;
    let started = Command::new(&me)
        .arg(WATCHER)
        .arg(std::process::id().to_string())
        .arg(child.id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let mut watcher = started.map_err(|e| format!("{} could not start: {e}", me.display()))?;
    let set = watcher.stdout.take().is_some_and(|mut out| {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let give_up = std::time::Instant::now() + WATCHER_SET_WAIT;
        let ready = loop {
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            let left = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            });
            let mut fds = [PollFd::new(&out, PollFlags::IN)];
            // A signal for the bridge (Ctrl-C) is no reason to give the watcher up.
            match poll(&mut fds, Some(&left)) {
                Err(rustix::io::Errno::INTR) => continue,
                polled => break matches!(polled, Ok(1)),
            }
        };
        ready && matches!(out.read(&mut [0]), Ok(1))
    });
    if !set {
        let _ = watcher.kill();
    }
    let reap = move || {
        let _ = watcher.wait();
    };
    let _ = std::thread::Builder::new()
        .name("tie-watcher".into())
        .stack_size(64 * 1024)
        .spawn(reap);
    match set {
        true => Ok(()),
        false => Err(format!(
            "{} did not say its watch was set within {} s",
            me.display(),
            WATCHER_SET_WAIT.as_secs()
        )),
    }
}

/// Called first in `main`: when the program was started as the [`LAUNCHER`] or the [`WATCHER`]
/// of a tied command, does that and never returns; otherwise notes that this process is the
/// program, whose commands may be tied.
pub fn launch_if_asked() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(first) if first == LAUNCHER => launch(args),
        Some(first) if first == WATCHER => watch(args),
        _ => IS_PROGRAM.store(true, Ordering::Relaxed),
    }
}

/// The launcher: `PARENT PROGRAM ARGS...`; becomes the command, or exits with a shell's status
/// for a command that cannot be run (127 not found, 126 otherwise).
fn launch(mut args: impl Iterator<Item = OsString>) -> ! {
    let parent = args.next().and_then(|p| p.to_str()?.parse::<i32>().ok());
    let Some(program) = args.next() else {
        eprintln!("claude-ide-bridge: {LAUNCHER} is the program's own, not a command");
        std::process::exit(2);
    };
    let rest: Vec<OsString> = args.collect();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let asked =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
        // The bridge may have ended before the signal was asked for: then none would come.
        let parent_now = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        if asked.is_ok() && parent_now != parent {
            std::process::exit(128 + rustix::process::Signal::TERM.as_raw());
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = parent;
    let mut e = Command::new(&program).args(&rest).exec();
    if e.raw_os_error() == Some(rustix::io::Errno::NOEXEC.raw_os_error())
        && is_script(&program, std::env::var_os("PATH").as_deref())
    {
        e = super::by_sh(&program, rest.iter().map(OsString::as_os_str)).exec();
    }
    // Not found, though the bridge found the file before it started this: what the file needs
    // to run is missing.
    let hint = match e.kind() {
        io::ErrorKind::NotFound => crate::serve::NEEDS_MISSING,
        _ => "",
    };
    eprintln!("error: cannot run {}: {e}{hint}", program.to_string_lossy());
    std::process::exit(if e.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    });
}

/// The watcher: `BRIDGE COMMAND`. Watches the command's exit first (once watched, its pid cannot
/// be given to another process unseen), then the bridge's, its parent (a pid no longer its
/// parent's is the bridge gone, its pid taken since); says so (a newline on its output); waits
/// for the first exit, and sends the command SIGTERM (and SIGCONT: a stopped command acts on it
/// only once continued) when the bridge ended first, or had already. A watch it cannot set for
/// another reason than the process being gone (no descriptors left, no memory) leaves the
/// command untied: it exits without a word, and the bridge goes on. Exits with 0 once done, 2 on
/// arguments it cannot read.
fn watch(mut args: impl Iterator<Item = OsString>) -> ! {
    use std::io::Write;
    let mut pid = || {
        let raw = args.next()?.to_str()?.parse::<i32>().ok()?;
        Pid::from_raw(raw)
    };
    let (Some(bridge), Some(command)) = (pid(), pid()) else {
        eprintln!("claude-ide-bridge: {WATCHER} is the program's own, not a command");
        std::process::exit(2);
    };
    let Ok(mut exits) = exits::Exits::new() else {
        std::process::exit(0);
    };
    // Gone already (nothing to tie), or not watchable (untied).
    if exits.add(command).is_err() {
        std::process::exit(0);
    }
    let bridge_gone = match exits.add(bridge) {
        Ok(()) => rustix::process::getppid() != Some(bridge),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => true,
        Err(_) => std::process::exit(0),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(b"\n").and_then(|()| out.flush());
    drop(out);
    if !bridge_gone && exits.first_of(bridge, command) != Some(bridge) {
        // The command ended first, or the wait failed: nothing to do.
        std::process::exit(0);
    }
    exits.stop(command);
    std::process::exit(0);
}

/// Where `execvp` would find `program` to run (glibc's search: a name with a `/` as it is,
/// relative to `dir` when the command runs there; else each folder of `path`, `/bin:/usr/bin`
/// without one, an empty entry the current one): the error `spawn` would give when nowhere:
/// `ENOENT`, or `EACCES` when one was found that may not be run (or is not a regular file).
pub(super) fn find_program(
    program: &OsStr,
    path: Option<&OsStr>,
    dir: Option<&Path>,
) -> io::Result<PathBuf> {
    use rustix::fs::{access, Access};
    if program.is_empty() {
        return Err(rustix::io::Errno::NOENT.into());
    }
    let candidates: Vec<PathBuf> = if program.as_encoded_bytes().contains(&b'/') {
        vec![match dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        }]
    } else {
        let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
        std::env::split_paths(path)
            .map(|dir| match dir.as_os_str().is_empty() {
                true => PathBuf::from(program),
                false => dir.join(program),
            })
            .collect()
    };
    let mut refused = rustix::io::Errno::NOENT;
    for candidate in candidates {
        // A folder, a FIFO, a device: `execve` refuses them with EACCES (and a FIFO would block
        // `is_script`'s read).
        match fs::metadata(&candidate) {
            Ok(m) if !m.is_file() => {
                refused = rustix::io::Errno::ACCESS;
                continue;
            }
            _ => {}
        }
        match access(&candidate, Access::EXEC_OK) {
            Ok(()) => return Ok(candidate),
            Err(rustix::io::Errno::ACCESS) => refused = rustix::io::Errno::ACCESS,
            Err(_) => {}
        }
    }
    Err(refused.into())
}

/// The `PATH` `command` runs with: its own when set for it, else the program's.
pub(super) fn path_of(command: &Command) -> Option<OsString> {
    command
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .map(|(_, v)| v.map(OsStr::to_os_string))
        .unwrap_or_else(|| std::env::var_os("PATH"))
}

/// Whether a program the kernel would not run (`ENOEXEC`) is a script for `sh` (`by_sh`): found
/// as `execvp` finds it, with no NUL byte in its first 512 bytes. A binary for another machine is
/// refused as it is ("Exec format error"), as bash refuses it, rather than read by `sh`.
pub(super) fn is_script(program: &OsStr, path: Option<&OsStr>) -> bool {
    use std::io::Read;
    let Ok(found) = find_program(program, path, None) else {
        return false;
    };
    let mut head = Vec::with_capacity(512);
    File::open(found)
        .and_then(|f| f.take(512).read_to_end(&mut head))
        .is_ok_and(|_| !head.contains(&0))
}

/// Whether `/proc/self/exe`, which the launcher is started as, is the program: the file its name
/// (`argv[0]`) names, found as a shell found it. Not when the program was started through the
/// dynamic loader (`ld-linux-x86-64.so.2 ./claude-ide-bridge`: the loader is the executable
/// then), under another name (`exec -a`), or without `/proc`: its commands are then not tied.
fn runs_as_itself() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = fs::metadata("/proc/self/exe") else {
        return false;
    };
    let Some(name) = std::env::args_os().next() else {
        return false;
    };
    find_program(&name, std::env::var_os("PATH").as_deref(), None)
        .and_then(fs::metadata)
        .is_ok_and(|m| m.dev() == me.dev() && m.ino() == me.ino())
}

/// The watcher's wait for process exits: pidfds and `poll` on Linux, kqueue on macOS; the same
/// interface on both.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod exits {
    use std::os::fd::OwnedFd;

    use rustix::event::{poll, PollFd, PollFlags};
    use rustix::process::{pidfd_open, Pid, PidfdFlags};

    /// The processes watched, each by its pidfd (readable once it has exited).
    pub struct Exits(Vec<(Pid, OwnedFd)>);

    impl Exits {
        pub fn new() -> std::io::Result<Exits> {
            Ok(Exits(Vec::new()))
        }

        /// Watches `pid`'s exit; an error when it cannot (`ESRCH`: no such process).
        pub fn add(&mut self, pid: Pid) -> std::io::Result<()> {
            let fd = pidfd_open(pid, PidfdFlags::empty())?;
            self.0.push((pid, fd));
            Ok(())
        }

        /// The pids of those that have exited, waiting for one when `wait` (no time-out); `None`
        /// when `poll` fails.
        fn exited(&self, wait: bool) -> Option<Vec<Pid>> {
            let zero = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let mut fds: Vec<PollFd> = (self.0.iter())
                .map(|(_, fd)| PollFd::new(fd, PollFlags::IN))
                .collect();
            loop {
                match poll(&mut fds, (!wait).then_some(&zero)) {
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => return None,
                    Ok(_) => break,
                }
            }
            let ended = (self.0.iter().zip(&fds))
                .filter(|(_, fd)| !fd.revents().is_empty())
                .map(|((pid, _), _)| *pid);
            Some(ended.collect())
        }

        /// Waits for `a` or `b` to exit: `b` when both have (it is the one to leave alone);
        /// `None` when the wait failed.
        pub fn first_of(&self, a: Pid, b: Pid) -> Option<Pid> {
            let ended = self.exited(true)?;
            [b, a].into_iter().find(|p| ended.contains(p))
        }

        /// Sends `pid` SIGTERM and SIGCONT unless it has exited, through its pidfd (never to
        /// another process that took its pid since).
        pub fn stop(&self, pid: Pid) {
            use rustix::process::{pidfd_send_signal, Signal};
            let ended = self.exited(false).is_none_or(|e| e.contains(&pid));
            let Some((_, fd)) = self.0.iter().find(|(p, _)| *p == pid) else {
                return;
            };
            if !ended {
                let _ = pidfd_send_signal(fd, Signal::TERM);
                let _ = pidfd_send_signal(fd, Signal::CONT);
            }
        }
    }
}

/// See the Linux `exits`: kqueue's `EVFILT_PROC` with `NOTE_EXIT` here (the `kqueue` crate, as
/// the runtime crate's lock-file watch: rustix offers `kevent` only as `unsafe`).
#[cfg(target_os = "macos")]
mod exits {
    use std::cell::RefCell;
    use std::time::Duration;

    use kqueue::{EventData, EventFilter, FilterFlag, Ident, Proc, Watcher};
    use rustix::process::Pid;

    /// The queue, and the pids whose exit it has told.
    pub struct Exits {
        queue: Watcher,
        ended: RefCell<Vec<Pid>>,
    }

    impl Exits {
        pub fn new() -> std::io::Result<Exits> {
            Ok(Exits {
                queue: Watcher::new()?,
                ended: RefCell::new(Vec::new()),
            })
        }

        /// Watches `pid`'s exit; an error when it cannot (`ESRCH`: no such process).
        pub fn add(&mut self, pid: Pid) -> std::io::Result<()> {
            let raw = pid.as_raw_nonzero().get();
            (self.queue).add_pid(raw, EventFilter::EVFILT_PROC, FilterFlag::NOTE_EXIT)?;
            self.queue.watch()
        }

        /// Takes the exits told so far, waiting for an event first when `wait`; `false` when
        /// the queue failed (the crate tells a failed `kevent` as an event of its own; one
        /// interrupted by a signal is tried again).
        fn take(&self, wait: bool) -> bool {
            let mut next = match wait {
                true => self.queue.poll_forever(None),
                false => self.queue.poll(Some(Duration::ZERO)),
            };
            if wait && next.is_none() {
                return false;
            }
            while let Some(event) = next {
                match (event.ident, event.data) {
                    (Ident::Pid(raw), EventData::Proc(Proc::Exit(_))) => {
                        self.ended.borrow_mut().extend(Pid::from_raw(raw));
                    }
                    (_, EventData::Error(e)) if e.kind() != std::io::ErrorKind::Interrupted => {
                        return false;
                    }
                    _ => {}
                }
                next = self.queue.poll(Some(Duration::ZERO));
            }
            true
        }

        /// Waits for `a` or `b` to exit: `b` when both have (it is the one to leave alone);
        /// `None` when the wait failed.
        pub fn first_of(&self, a: Pid, b: Pid) -> Option<Pid> {
            loop {
                if !self.take(true) {
                    return None;
                }
                let ended = self.ended.borrow();
                if let Some(first) = [b, a].into_iter().find(|p| ended.contains(p)) {
                    return Some(first);
                }
            }
        }

        /// Sends `pid` SIGTERM and SIGCONT unless it has exited (or that cannot be told).
        pub fn stop(&self, pid: Pid) {
            use rustix::process::{kill_process, Signal};
            if self.take(false) && !self.ended.borrow().contains(&pid) {
                let _ = kill_process(pid, Signal::TERM);
                let _ = kill_process(pid, Signal::CONT);
            }
        }
    }
}

/// No watcher here (see the module's doc): every process is taken as gone, so none is watched.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
mod exits {
    use rustix::process::Pid;

    pub struct Exits;

    impl Exits {
        pub fn new() -> std::io::Result<Exits> {
            Ok(Exits)
        }

        pub fn add(&mut self, _pid: Pid) -> std::io::Result<()> {
            Err(std::io::ErrorKind::Unsupported.into())
        }

        pub fn first_of(&self, _a: Pid, _b: Pid) -> Option<Pid> {
            None
        }

        pub fn stop(&self, _pid: Pid) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A tied command is looked for as `execvp` would, since `spawn` starts the launcher: a
    /// missing one, or one that may not be run, is refused with the error `spawn` would give.
    #[test]
    fn a_program_is_looked_for_as_execvp_would() {
        let d = tempfile::tempdir().unwrap();
        let (one, two) = (d.path().join("one"), d.path().join("two"));
        fs::create_dir_all(&one).unwrap();
        fs::create_dir_all(two.join("tool")).unwrap();
        let code = |e: io::Result<PathBuf>| e.unwrap_err().raw_os_error();
        let (noent, access) = (
            Some(rustix::io::Errno::NOENT.raw_os_error()),
            Some(rustix::io::Errno::ACCESS.raw_os_error()),
        );
        let path = std::env::join_paths([&one, &two]).unwrap();
        let find = |program: &str| find_program(OsStr::new(program), Some(&path), None);
        // Only a folder of that name: refused as execvp refuses it.
        assert_eq!(code(find("tool")), access);
        assert_eq!(code(find("absent")), noent);
        assert_eq!(code(find("")), noent);
        // A file that may not be run (mode 644: root too is refused without an execute bit).
        let tool = one.join("tool");
        fs::write(&tool, "echo hi\n").unwrap();
        set_mode(&tool, 0o644);
        assert_eq!(code(find("tool")), access);
        set_mode(&tool, 0o755);
        assert_eq!(find("tool").unwrap(), tool);
        // A name with a slash is taken as it is, not looked for on PATH; relative to the folder
        // the command runs in.
        assert_eq!(code(find("./tool")), noent);
        let there = find_program(OsStr::new("./tool"), None, Some(&one));
        assert_eq!(there.unwrap(), one.join("./tool"));
        // No PATH: glibc's default folders.
        find_program(OsStr::new("sh"), None, None).unwrap();
        // A file without `#!` is a script for sh; one with a NUL byte early on is not.
        assert!(is_script(OsStr::new("tool"), Some(&path)));
        fs::write(&tool, b"\x7fELF\x02\x01\x01\0\0\0").unwrap();
        assert!(!is_script(OsStr::new("tool"), Some(&path)));
        assert!(!is_script(OsStr::new("absent"), Some(&path)));
    }
}
