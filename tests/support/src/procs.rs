//! Processes from Linux `/proc`: a process's descendants and their resident memory, and whether a
//! process seen earlier is still there. Used by the program's tests and the diagnostics benchmark.

use std::fs;

/// One process as seen at one moment: its pid and its start time (clock ticks since boot), which
/// tells it apart from a later process given the same pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub start: u64,
}

/// (parent pid, state, start time) of `pid`.
fn stat(pid: u32) -> Option<(u32, char, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // After comm: state is field 3 of the line, ppid 4, starttime 22.
    let state = fields.first()?.chars().next()?;
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, state, start))
}

/// Every process below `root` (children, their children, ...), found by parent pid.
pub fn descendants(root: u32) -> Vec<Proc> {
    let all: Vec<(u32, u32, u64)> = fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter_map(|pid| stat(pid).map(|(ppid, _, start)| (pid, ppid, start)))
                .collect()
        })
        .unwrap_or_default();
    let mut out: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, start) in &all {
            if ppid == parent && !out.iter().any(|p| p.pid == pid) {
                out.push(Proc { pid, start });
                frontier.push(pid);
            }
        }
    }
    out
}

/// `pid` as it is now, if it runs (not a zombie): for a later [`alive`] that a new process given
/// the same pid cannot fool.
pub fn seen(pid: u32) -> Option<Proc> {
    let p = Proc {
        pid,
        start: stat(pid)?.2,
    };
    alive(p).then_some(p)
}

/// Whether `p` still runs (a zombie, or a new process with its pid, does not count).
pub fn alive(p: Proc) -> bool {
    matches!(stat(p.pid), Some((_, state, start)) if start == p.start && state != 'Z' && state != 'X')
}

/// The command line of `pid`, its arguments joined by spaces.
pub fn cmdline(pid: u32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// Resident memory of `pid` in KiB (`VmRSS`), 0 when it is gone.
pub fn rss_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
