//! The program as a container's first process (`docker run IMAGE claude-ide-bridge run -- claude`,
//! without `--init`): pid 1 of a pid namespace, which the kernel makes the parent of every process
//! whose own parent ended first (a language server's worker once the server is killed, what
//! claude's shell commands leave in the background). Nothing reaped them: each stayed a zombie
//! for as long as the container ran, and a day's use filled the process table.
//!
//! So, as pid 1 ([`init_if_first`], called first in `main`), the program starts itself again with
//! the same arguments as its only child (the bridge, with everything it does), and then only
//! reaps every process that ends under it and hands on the requests to stop the container's
//! runtime sends pid 1 (`docker stop`: SIGTERM), as `tini` and `docker run --init` do. It ends
//! with the bridge, with its exit status (a signal's as 128 + its number): its end ends every
//! process left in the namespace.
//!
//! In a container pid 1 leads its session, on a terminal (`docker run -it`) the terminal's: the
//! bridge gets a process group of its own made the terminal's foreground group, so that Ctrl-C
//! and the terminal's other signals reach the bridge and what it runs once, never pid 1 (which
//! would hand them on a second time). Suspended (claude on Ctrl-Z, which `run` follows), it is
//! continued at once: no shell there takes the terminal back or says `fg`.

use std::process::ExitCode;

/// The signals a container's runtime or a user's `kill 1` sends to stop the program: handed on
/// to the bridge, which stops cleanly on each. (Pid 1 of a namespace gets from inside it only the
/// signals it handles: these are handled so that they reach the bridge at all.) Not SIGUSR1 or
/// SIGUSR2: the bridge has no use for them, and their default action would end it without its
/// stop (its lock file left); pid 1, not handling them, is not sent them.
#[cfg(any(target_os = "linux", target_os = "android"))]
const HANDED_ON: [i32; 4] = {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    [SIGTERM, SIGINT, SIGHUP, SIGQUIT]
};

/// When this process is pid 1 (Linux): runs the program again as its child and reaps until that
/// child ends (the module's doc), then `Some(its exit status)`, for `main` to end with. `None`
/// when this process is not pid 1, or could not start its child (said; the program then runs as
/// pid 1 itself, as before).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn init_if_first() -> Option<ExitCode> {
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    if !rustix::process::getpid().is_init() {
        return None;
    }
    // SIGCHLD inherited as ignored makes the kernel reap every child itself: `wait` then waits
    // for all of them (an orphan left running kept the container up) and ends in ECHILD (the
    // bridge's status lost, 1). A handler puts the usual reaping back (`listen_for_stop`).
    if claude_ide_bridge_runtime::signals::ignored(signal_hook::consts::SIGCHLD) {
        let noted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _ = signal_hook::flag::register(signal_hook::consts::SIGCHLD, noted);
    }
    // Handled before the child starts: a stop asked for in between is not lost. A signal
    // inherited as ignored stays so, for the bridge too (handled here, it would not be).
    let handed_on = HANDED_ON
        .into_iter()
        .filter(|s| !claude_ide_bridge_runtime::signals::ignored(*s));
    let mut signals = match signal_hook::iterator::Signals::new(handed_on) {
        Ok(s) => s,
        Err(e) => return not_init(&format!("its signals could not be handled: {e}")),
    };
    let mut args = std::env::args_os();
    // By its path, so that `ps` names it as the user does (`/proc/self/exe` would be `exe`).
    let me = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    let mut bridge = Command::new(me);
    if let Some(arg0) = args.next() {
        bridge.arg0(arg0);
    }
    bridge.args(args);
    // A container's first process leads its session, the terminal's when it has one (`docker
    // run -it`): the bridge gets a group of its own, made the terminal's foreground group. Pid 1
    // of a namespace made from a shell (`unshare -pf`, maybe run in the background) leads no
    // session: the bridge stays in its group, which the shell put in the foreground or not (a
    // `tcsetpgrp` from the background would be retried for good: pid 1 never stops on SIGTTOU).
    let own_group = leads_its_session();
    if own_group {
        bridge.process_group(0);
    }
    let child = match bridge.spawn() {
        Ok(c) => c,
        Err(e) => {
            signals.handle().close();
            return not_init(&format!("the program could not be started again: {e}"));
        }
    };
    let pid = child.id();
    // The terminal's signals for the bridge's group alone; no terminal (`docker run` without
    // `-t`), nothing to do. (Pid 1, its session's leader, is in the foreground group.)
    if let Some(bridge_group) = rustix::process::Pid::from_raw(pid as i32).filter(|_| own_group) {
        let _ = rustix::termios::tcsetpgrp(std::io::stdin(), bridge_group);
    }
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if let (Some(to), Some(signal)) = (
                rustix::process::Pid::from_raw(pid as i32),
                rustix::process::Signal::from_named_raw(signal),
            ) {
                let _ = rustix::process::kill_process(to, signal);
            }
        }
    });
    // Reaped here, with every orphan, by `wait`: not by `Child::wait`.
    drop(child);
    Some(ExitCode::from(reap_until(pid, own_group)))
}

/// Whether this process leads its session (`/proc/self/stat`'s session is its pid): a session
/// led from outside the pid namespace shows as 0. (Not `getsid`: rustix's `Pid` cannot be 0.)
#[cfg(any(target_os = "linux", target_os = "android"))]
fn leads_its_session() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    let session = (stat.rsplit_once(')').map(|(_, rest)| rest))
        .and_then(|rest| rest.split_ascii_whitespace().nth(3))
        .and_then(|s| s.parse::<u32>().ok());
    session == Some(std::process::id())
}

/// Not pid 1's job elsewhere: macOS's pid 1 is launchd, and the other Unixes run no containers
/// of this kind.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn init_if_first() -> Option<ExitCode> {
    None
}

/// Says why the program runs as pid 1 itself, without reaping: `None`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn not_init(why: &str) -> Option<ExitCode> {
    eprintln!(
        "claude-ide-bridge: warning: running as the first process (pid 1), {why}: the processes \
         left to it are not reaped (`docker run --init` does that)"
    );
    None
}

/// Reaps every child that ends until `bridge` does: its exit status, a signal's that ended it as
/// 128 + its number (as a shell says it).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn reap_until(bridge: u32, own_group: bool) -> u8 {
    use rustix::process::{kill_process_group, wait, Signal, WaitOptions};
    use signal_hook::consts::{SIGTSTP, SIGTTIN, SIGTTOU};
    loop {
        match wait(WaitOptions::UNTRACED) {
            // Stopped by the terminal or by itself (`run` follows claude suspending on Ctrl-Z):
            // no shell here takes the terminal back or continues it, and the container would
            // hang, stopped, for good. Continued at once (a SIGSTOP, someone's choice, is left).
            // In a group of its own only: in pid 1's group, the job of the shell that made the
            // namespace, the whole job stopped, and that shell's `fg` continues it (a group
            // continued from here is continued behind the shell's back, with every process of it
            // outside the namespace).
            Ok(Some((pid, status)))
                if pid.as_raw_nonzero().get() as u32 == bridge && status.stopped() =>
            {
                let suspended = (status.stopping_signal())
                    .is_some_and(|s| [SIGTSTP, SIGTTIN, SIGTTOU].contains(&s));
                if own_group && suspended {
                    let _ = kill_process_group(pid, Signal::CONT);
                }
            }
            Ok(Some((pid, status))) if pid.as_raw_nonzero().get() as u32 == bridge => {
                return match (status.exit_status(), status.terminating_signal()) {
                    (Some(code), _) => code as u8,
                    (None, Some(signal)) => 128u8.wrapping_add(signal as u8),
                    (None, None) => 1,
                };
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // No child left, which the bridge's own end would have shown: nothing to wait for.
            Err(_) => return 1,
        }
    }
}
