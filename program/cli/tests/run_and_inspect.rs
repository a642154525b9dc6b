//! `run` with a stand-in claude, and `list` / `doctor` on each misconfiguration.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{json, Value};

fn script(sb: &Sandbox, name: &str, body: &str) -> std::path::PathBuf {
    let p = sb.root().join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn run_passes_the_environment_and_the_exit_status() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let out = sb.root().join("env.txt");
        let claude = script(
            &sb,
            "claude",
            &format!(
                "env > {0}\nls {1} >> {0}\nexit 7",
                out.display(),
                sb.lock_dir().display()
            ),
        );
        let o = sb
            .command()
            .env("CLAUDE_CODE_AUTO_CONNECT_IDE", "false")
            .env("no_proxy", "example.com")
            .env("NO_PROXY", "internal.corp, example.com,localhost")
            .args(["run", "--runtime", rt, "--"])
            .arg(&claude)
            .arg("--some-flag")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(7), "{err}");
        let env = fs::read_to_string(&out).unwrap();
        let port = err
            .lines()
            .find_map(|l| l.strip_prefix("export CLAUDE_CODE_SSE_PORT="))
            .and_then(|rest| rest.strip_suffix(" ENABLE_IDE_INTEGRATION=true"))
            .unwrap();
        assert!(
            env.contains(&format!("CLAUDE_CODE_SSE_PORT={port}\n")),
            "{env}"
        );
        assert!(env.contains("ENABLE_IDE_INTEGRATION=true\n"));
        assert!(env.contains("CLAUDE_CODE_AUTO_CONNECT_IDE=true\n"), "{env}");
        // Both carry the user's exclusions from either, then loopback, each once: a tool reading
        // only one of them still skips the proxy for the user's hosts.
        for var in ["no_proxy", "NO_PROXY"] {
            assert!(
                env.contains(&format!(
                    "{var}=example.com,internal.corp,localhost,127.0.0.1,::1\n"
                )),
                "{env}"
            );
        }
        assert!(
            env.contains(&format!("{port}.lock")),
            "the lock exists while claude runs"
        );
        assert_eq!(
            fs::read_dir(sb.lock_dir()).unwrap().count(),
            0,
            "lock removed after"
        );
    }
}

#[test]
fn run_reports_a_signal_as_128_plus() {
    let sb = Sandbox::new();
    let claude = script(&sb, "claude", "kill -KILL $$");
    let o = sb
        .command()
        .args(["run", "--"])
        .arg(&claude)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(128 + 9));
    let o = sb
        .command()
        .args(["run", "--", "/no/such/claude"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run /no/such/claude"));
}

/// `run` as a container's first process (pid 1 of a pid namespace of its own: `docker run IMAGE
/// claude-ide-bridge run -- claude`, without `--init`): the processes its command leaves behind,
/// which the kernel hands to pid 1, are reaped, not zombies for as long as the container runs;
/// the command's exit status is the container's; a `kill 1` (`docker stop`) reaches the bridge,
/// which stops, ends its command and removes its lock file.
/// `c` as a container's first process: pid 1 of new user, pid and mount namespaces, leading a
/// session of its own, as a container's runtime starts it (and so in none of this test's process
/// groups: what it and the bridge signal their groups with stays inside). `None` where the
/// namespaces cannot be made (said).
fn as_a_containers_first(c: &Command) -> Option<Command> {
    let mut s = Command::new("setsid");
    s.arg(c.get_program()).args(c.get_args());
    with_env_of(&mut s, c);
    if let Some(dir) = c.get_current_dir() {
        s.current_dir(dir);
    }
    unshared("-rpfm", "mount -t proc proc /proc", &s)
}

#[test]
fn run_as_a_containers_first_process_reaps_what_is_left_to_it() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let out = sb.root().join("procs.txt");
        // Two orphans (their subshells end at once), both ended a second later; then each
        // process's `stat` line.
        let claude = script(
            &sb,
            "claude",
            &format!(
                "(sleep 0.2 &)\n(sleep 0.3 &)\nsleep 1.5\ncat /proc/[0-9]*/stat > {}\nexit 7",
                out.display()
            ),
        );
        let mut c = sb.command();
        c.args(["run", "--runtime", rt, "--"]).arg(&claude);
        let Some(c) = as_a_containers_first(&c) else {
            return;
        };
        let (code, _) = run_bounded(c);
        assert_eq!(code, 7, "{rt}");
        let procs = fs::read_to_string(&out).unwrap();
        // (pid, name, state, parent) of each.
        let procs: Vec<(u32, &str, char, u32)> = (procs.lines())
            .filter_map(|l| {
                let (pid, rest) = l.split_once(" (")?;
                let (name, rest) = rest.rsplit_once(") ")?;
                let mut f = rest.split(' ');
                let state = f.next()?.chars().next()?;
                Some((pid.parse().ok()?, name, state, f.next()?.parse().ok()?))
            })
            .collect();
        assert!(
            procs.contains(&(1, "claude-ide-brid", 'S', 0)),
            "{rt}: {procs:?}"
        );
        let bridge = procs.iter().find(|p| p.3 == 1 && p.1 == "claude-ide-brid");
        assert!(
            bridge.is_some(),
            "{rt}: the bridge is pid 1's child: {procs:?}"
        );
        let zombies: Vec<_> = procs.iter().filter(|p| p.2 == 'Z').collect();
        assert!(zombies.is_empty(), "{rt}: {zombies:?} in {procs:?}");
        assert_eq!(fs::read_dir(sb.lock_dir()).unwrap().count(), 0, "{rt}");

        // Stopped from inside, as a container's runtime stops it: SIGTERM to pid 1. SIGUSR1 and
        // SIGUSR2 before it change nothing (pid 1 handed them on, and their default action ended
        // the bridge without its stop, its lock file left).
        let claude = script(
            &sb,
            "claude",
            "kill -USR1 1\nkill -USR2 1\nsleep 0.5\nkill -TERM 1\nsleep 30\nexit 3",
        );
        let mut c = sb.command();
        c.args(["run", "--runtime", rt, "--"]).arg(&claude);
        let c = as_a_containers_first(&c).unwrap();
        let (code, _) = run_bounded(c);
        assert_eq!(code, 128 + 15, "{rt}: the command ended by the stop");
        assert_eq!(fs::read_dir(sb.lock_dir()).unwrap().count(), 0, "{rt}");
    }
}

/// As a container's first process, `run`'s command suspending itself (claude on Ctrl-Z: `run`
/// then stops the bridge's group with it) is continued: no shell in a container takes the
/// terminal back or says `fg`. Before, the bridge and its command stayed stopped, and pid 1
/// waited for them for good (`docker run -it` frozen until `docker stop` killed it).
#[test]
fn run_as_a_containers_first_process_continues_a_suspended_command() {
    let sb = Sandbox::new();
    let claude = script(&sb, "claude", "kill -TSTP $$\nexit 5");
    let mut c = sb.command();
    c.args(["run", "--no-lsp", "--"]).arg(&claude);
    let Some(c) = as_a_containers_first(&c) else {
        return;
    };
    let (code, _) = run_bounded(c);
    assert_eq!(code, 5);

    // A SIGSTOP, someone's choice, is left to them; pid 1 waits on. Before, it took the stop for
    // the bridge's end and ended (the container with it), saying 1.
    let claude = script(
        &sb,
        "claude",
        "kill -STOP $PPID\nsleep 0.5\nkill -CONT $PPID\nexit 6",
    );
    let mut c = sb.command();
    c.args(["run", "--no-lsp", "--"]).arg(&claude);
    let (code, _) = run_bounded(as_a_containers_first(&c).unwrap());
    assert_eq!(code, 6);
}

/// Pid 1 of a namespace a shell made (`unshare -pf claude-ide-bridge run -- claude`) leads no
/// session: `run`'s command suspending itself stops the shell's whole job, and the shell's `fg`
/// continues it; pid 1 leaves that to the shell. Before, it continued its process group at once,
/// behind the shell's back and with each process of the group outside the namespace (in the
/// tests, the test's own: a bridge another test had stopped ran on, and that test failed).
#[test]
fn run_as_the_first_process_of_a_shells_job_leaves_a_suspend_to_the_shell() {
    let sb = Sandbox::new();
    let claude = script(&sb, "claude", "kill -TSTP $$\nexit 5");
    let mut c = sb.command();
    c.args(["run", "--no-lsp", "--"]).arg(&claude);
    let Some(mut c) = unshared("-rpfm", "mount -t proc proc /proc", &c) else {
        return;
    };
    // The shell's job: a process group of its own, in this test's session.
    let mut child = c
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    let job = Group(child.id());
    let give_up = std::time::Instant::now() + WAIT;
    while state_of(job.0) != Some('T') {
        assert!(
            std::time::Instant::now() < give_up,
            "the job did not stop: {:?}",
            state_of(job.0)
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(state_of(job.0), Some('T'), "the job ran on by itself");
    // `fg`.
    assert!(job.signal("CONT"));
    let status = exit_within(&mut child, WAIT, &|| stderr.text());
    assert_eq!(status.code(), Some(5), "{}", stderr.text());
}

/// As a container's first process started with SIGCHLD ignored (its orphans then reaped by the
/// kernel), the program still ends with the bridge, with its command's status. Before, pid 1's
/// `wait` waited for every process left (here a `sleep 60`: the container stayed up) and then
/// said 1.
#[test]
fn run_as_a_containers_first_process_with_sigchld_ignored_ends_with_the_bridge() {
    let sb = Sandbox::new();
    let mut c = sb.command();
    c.args(["run", "--no-lsp", "--", "sh", "-c", "(sleep 60 &); exit 7"]);
    let mut py = Command::new("python3");
    py.arg("-c")
        .arg(
            "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); \
             os.execv(sys.argv[1], sys.argv[1:])",
        )
        .arg(c.get_program())
        .args(c.get_args())
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
    if let Some(dir) = c.get_current_dir() {
        py.current_dir(dir);
    }
    let Some(u) = as_a_containers_first(&py) else {
        return;
    };
    let (code, _) = run_bounded(u);
    assert_eq!(code, 7);
}

/// A bridge started with SIGCHLD ignored (a parent that ignores it, then runs the bridge: the
/// kernel would reap its children itself) still exits with its command's status. Before, the
/// wait for the command failed (ECHILD) and `run` exited 1.
#[test]
fn run_started_with_sigchld_ignored_exits_with_the_commands_status() {
    let sb = Sandbox::new();
    let bin = sb.command().get_program().to_owned();
    let mut c = sb.command();
    c.args(["run", "--", "sh", "-c", "sleep 0.2; exit 3"]);
    let args: Vec<_> = c.get_args().map(|a| a.to_owned()).collect();
    // (Python, as the shells here do not pass an ignored SIGCHLD on)
    let mut sh = Command::new("python3");
    sh.arg("-c")
        .arg(
            "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); \
             os.execv(sys.argv[1], sys.argv[1:])",
        )
        .arg(bin)
        .args(args)
        .envs(c.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
    if let Some(dir) = c.get_current_dir() {
        sh.current_dir(dir);
    }
    let o = sh.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
}

/// A `claude` built for another machine (an ELF file for a machine no binfmt handler here takes:
/// the VAX's), found on PATH: refused with why, where the kernel's handlers can be read. Before,
/// glibc's `execvp` gave it to `sh`, which failed on its bytes with "Syntax error" and a status
/// of 2.
#[test]
#[cfg(target_os = "linux")]
fn run_refuses_a_program_for_another_machine() {
    // Told only where the kernel's handlers can be read (not in most containers).
    if fs::read_to_string("/proc/sys/fs/binfmt_misc/status").is_err() {
        claude_ide_bridge_testsupport::skip::skip("/proc/sys/fs/binfmt_misc is not mounted here");
        return;
    }
    let sb = Sandbox::new();
    let bin = sb.root().join("bin");
    fs::create_dir(&bin).unwrap();
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend([0; 8]);
    elf.extend(2u16.to_le_bytes());
    elf.extend(75u16.to_le_bytes());
    elf.extend([0; 100]);
    fs::write(bin.join("claude"), &elf).unwrap();
    fs::set_permissions(bin.join("claude"), fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = sb
        .command()
        .env("PATH", path)
        .args(["run", "--", "claude"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(126), "{err}");
    assert!(
        err.contains("cannot run claude: it is a program for another machine (ELF machine 75"),
        "{err}"
    );
    assert!(!err.contains("Syntax error"), "{err}");
    // Said once the server has stopped: the last line.
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("error: cannot run claude: "), "{err}");
}

/// A command that is not there, or that cannot be run: the exit code a shell gives (127, 126),
/// with why, before the bridge says it serves anything; the bridge leaves no lock file. PATH is
/// advised for a name, not for a path (which is not looked for there).
#[test]
fn run_exits_as_a_shell_when_its_command_cannot_run() {
    let sb = Sandbox::new();
    let not_executable = sb.root().join("notes.txt");
    fs::write(&not_executable, "not a program\n").unwrap();
    let missing = sb.root().join("missing");
    for (command, code, says) in [
        (
            std::path::PathBuf::from("claude-ide-bridge-no-such-command"),
            127,
            "is it installed and on PATH",
        ),
        (missing.clone(), 127, "No such file"),
        (not_executable, 126, "cannot run"),
        (sb.root(), 126, "(it is a directory)"),
    ] {
        let o = sb
            .command()
            .args(["run", "--no-lsp", "--"])
            .arg(&command)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(
            !err.contains("serving ") && !err.contains("lock file"),
            "{err}"
        );
        assert_eq!(
            err.contains("PATH"),
            command.components().count() == 1,
            "{err}"
        );
        assert!(fs::read_dir(sb.lock_dir()).map_or(true, |mut d| d.next().is_none()));
    }
}

/// A script whose interpreter is missing: found, then refused by the system with "not found",
/// which is said as what it is (the file is there), with a shell's 127: by the Linux launcher,
/// and by the bridge itself where it starts the command directly (macOS' watcher, run here by a
/// debug build's switch), which says it last, once its server has stopped.
#[cfg(target_os = "linux")]
#[test]
fn run_says_a_missing_interpreter_is_missing() {
    let sb = Sandbox::new();
    let script = sb.root().join("claude");
    fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    for tie in ["launcher", "watcher"] {
        let o = sb
            .command()
            .env("CLAUDE_IDE_BRIDGE_TEST_TIE", tie)
            .args(["run", "--no-lsp", "--"])
            .arg(&script)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(127), "{tie}: {err}");
        let said = format!(
            "error: cannot run {}: No such file or directory (os error 2) (the file is there: the \
             interpreter its first line names, or the loader it needs, is missing)",
            script.display()
        );
        assert!(err.contains(&said), "{tie}: {err}");
        if tie == "watcher" {
            assert_eq!(err.trim_end().lines().last(), Some(said.as_str()), "{err}");
        }
    }
}

/// The `--wire-log` failing while claude has the terminal (a full disk: `/dev/full`): the
/// warning that nothing more is logged is held while claude runs, and said once the terminal is
/// the bridge's again (it was dropped: the log stopped without a word).
#[cfg(target_os = "linux")]
#[test]
fn run_says_a_wire_log_that_failed_after_claude() {
    let sb = Sandbox::new();
    let done = sb.root().join("done");
    let (mut child, stderr, _, _c) = run_connected(
        &sb,
        &["--no-lsp", "--wire-log", "/dev/full"],
        &format!(
            "i=0; while [ ! -e {d} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done",
            d = done.display()
        ),
    );
    let warning = "warning: --wire-log /dev/full: writing failed";
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !stderr.text().contains(warning),
        "said into claude's screen: {}",
        stderr.text()
    );
    fs::write(&done, "").unwrap();
    let status = exit_within(&mut child, WAIT, &|| stderr.text());
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    assert!(stderr.text().contains(warning), "{}", stderr.text());
}

/// claude connects to 127.0.0.1 unless `CLAUDE_CODE_IDE_HOST_OVERRIDE` names another host, and
/// lock files carry no address: `run --host ::1` (or `127.0.0.2`) tells its command where the
/// bridge listens, and a client connecting there, as claude then does, is served; `serve`'s
/// export line carries the override, after a warning. With the default host, an override in
/// the user's environment (meant for another IDE) is not passed on.
#[test]
fn run_tells_claude_where_the_bridge_listens() {
    for (host, told) in [
        (Some("::1"), "[::1]"),
        (Some("127.0.0.2"), "127.0.0.2"),
        (None, "unset"),
    ] {
        let sb = Sandbox::new();
        let probe = sb.root().join("probe");
        let claude = script(
            &sb,
            "claude",
            &format!(
                "echo \"$CLAUDE_CODE_SSE_PORT ${{CLAUDE_CODE_IDE_HOST_OVERRIDE-unset}}\" > {p}.tmp \
                 && mv {p}.tmp {p}\nexec sleep 30",
                p = probe.display()
            ),
        );
        let mut c = sb.command();
        c.arg("run")
            .env("CLAUDE_CODE_IDE_HOST_OVERRIDE", "192.0.2.9")
            .args(host.iter().flat_map(|h| ["--host", h]))
            .arg("--")
            .arg(&claude)
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let stderr = Lines::collect(child.stderr.take().unwrap());
        appeared(&probe, &stderr);
        let seen = fs::read_to_string(&probe).unwrap();
        let (port, given) = seen.trim().split_once(' ').unwrap();
        assert_eq!(given, told, "{host:?}: {}", stderr.text());
        let port: u16 = port.parse().unwrap();
        let lock = sb.lock_dir().join(format!("{port}.lock"));
        let lock: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
        let token = lock["authToken"].as_str().unwrap();
        let at = if told == "unset" { "127.0.0.1" } else { told };
        let (status, c) = client::connect_to(at, port, Some(token))
            .unwrap_or_else(|| panic!("nothing listens on {at}:{port}: {}", stderr.text()));
        assert_eq!(status, 101, "{at}");
        let init = c.unwrap().init();
        assert!(init["result"]["serverInfo"].is_object(), "{init}");
        let export = stderr.wait_for("export CLAUDE_CODE_SSE_PORT=");
        if let Some(h) = host {
            assert!(
                export.ends_with(&format!(
                    "ENABLE_IDE_INTEGRATION=true CLAUDE_CODE_IDE_HOST_OVERRIDE='{told}'"
                )),
                "{export}"
            );
            assert!(
                stderr.text().contains(&format!(
                    "warning: listening on {h}: claude connects to 127.0.0.1 unless"
                )),
                "{}",
                stderr.text()
            );
        } else {
            assert!(export.ends_with("ENABLE_IDE_INTEGRATION=true"), "{export}");
            assert!(!stderr.text().contains("warning"), "{}", stderr.text());
        }
        ends_with_sigterm(child);
    }
}

/// A bridge on `::` is reached at claude's 127.0.0.1 where the system's IPv6 sockets take IPv4
/// too (Linux's default, `net.ipv6.bindv6only` 0), and not where that setting is 1: there `run
/// --host ::` tells its command `[::1]` and warns, and the command reaches the bridge at the host
/// it was told. Each setting in a network namespace of its own (`unshare -rn`), where the
/// stand-in claude tries both hosts.
#[test]
#[cfg(target_os = "linux")]
fn run_on_every_ipv6_address_follows_bindv6only() {
    for (v6only, seen) in [("0", "unset reached -"), ("1", "[::1] refused reached")] {
        let sb = Sandbox::new();
        let probe = sb.root().join("probe");
        let claude = script(
            &sb,
            "claude",
            &format!(
                r#"python3 - "$CLAUDE_CODE_SSE_PORT" "${{CLAUDE_CODE_IDE_HOST_OVERRIDE-unset}}" > {p}.tmp <<'END'
import socket, sys
port, told = int(sys.argv[1]), sys.argv[2]
def reach(host):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "reached"
    except OSError:
        return "refused"
print(told, reach("127.0.0.1"), "-" if told == "unset" else reach(told.strip("[]")))
END
mv {p}.tmp {p}
exec sleep 30"#,
                p = probe.display()
            ),
        );
        let mut c = sb.command();
        c.args(["run", "--host", "::", "--"]).arg(&claude);
        let prelude = format!("echo {v6only} > /proc/sys/net/ipv6/bindv6only && ip link set lo up");
        let Some(mut c) = unshared("-rn", &prelude, &c) else {
            return;
        };
        let mut child = c.stderr(Stdio::piped()).spawn().unwrap();
        let stderr = Lines::collect(child.stderr.take().unwrap());
        appeared(&probe, &stderr);
        let found = fs::read_to_string(&probe).unwrap();
        assert_eq!(found.trim(), seen, "bindv6only {v6only}: {}", stderr.text());
        let warned = stderr
            .text()
            .contains("warning: listening on ::: claude connects to 127.0.0.1 unless");
        assert_eq!(warned, v6only == "1", "{}", stderr.text());
        ends_with_sigterm(child);
    }
}

#[test]
fn run_answers_claude_while_it_runs() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.txt"), "a").unwrap();
    // The stand-in connects as claude would, with the port it was given.
    let (mut child, stderr, port, mut c) = run_connected(&sb, &["--on-diff", "accept"], "sleep 30");
    let r = call(
        &mut c,
        "openDiff",
        open_diff_args(&sb.ws.join("a.txt"), "b", "t"),
    );
    assert_eq!(texts(&r)[0], "FILE_SAVED");
    // SIGTERM to the bridge is passed to claude; the bridge then exits with claude's status.
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{}", stderr.text());
    assert!(!sb.lock_dir().join(format!("{port}.lock")).exists());
}

/// `run` of a command that ignores the signals `traps` names, once it has started; its stderr.
/// The command leaves with the bridge should a test fail (nothing left holding its output).
fn run_stubborn_command(sb: &Sandbox, traps: &str) -> (std::process::Child, Lines) {
    let started = sb.root().join("started");
    let claude = script(
        sb,
        "claude",
        &format!(
            "trap '' {traps}\ntouch {}\nwhile kill -0 $PPID 2>/dev/null; do sleep 0.1; done",
            started.display()
        ),
    );
    let mut child = sb
        .command()
        .args(["run", "--"])
        .arg(&claude)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    appeared(&started, &stderr);
    (child, stderr)
}

/// A command that ignores SIGTERM kept the bridge, its lock file and its servers up for as long
/// as it ran: told to stop again, a second or more later, the bridge kills it, and exits with its
/// status. Told twice at once (a closed terminal's two SIGHUPs), it is only asked to stop.
#[test]
fn run_told_twice_kills_a_command_that_ignores_sigterm() {
    let sb = Sandbox::new();
    let (mut child, stderr) = run_stubborn_command(&sb, "TERM");
    let pid = child.id().to_string();
    let term = || Command::new("kill").arg(&pid).status().unwrap();
    term();
    term();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the command ignores SIGTERM, and the second request came at once: {}",
        stderr.text()
    );
    // Told again, every half second until the command is killed: the second time counts once
    // a second has passed since the bridge handled the first, which a busy machine may do late.
    let status = told_until_it_ends(&mut child, &stderr);
    assert_eq!(status.code(), Some(128 + 9), "{}", stderr.text());
    assert!(fs::read_dir(sb.lock_dir()).unwrap().next().is_none());
}

/// The terminal hung up while a command that ignores SIGTERM runs: nobody is left to tell the
/// bridge a second time, so the command is killed after a grace and the bridge exits with its
/// status, its lock file removed (it stayed up for good). Also when a SIGTERM came just before
/// the hangup (which then counted as the same request).
#[test]
fn run_kills_a_command_that_ignores_sigterm_after_a_hangup() {
    for first in [None, Some("-TERM")] {
        let sb = Sandbox::new();
        let (mut child, stderr) = run_stubborn_command(&sb, "TERM HUP");
        let pid = child.id().to_string();
        let kill = |sig: &str| Command::new("kill").args([sig, &pid]).status().unwrap();
        if let Some(sig) = first {
            kill(sig);
        }
        kill("-HUP");
        let status = exit_within(&mut child, WAIT, &|| stderr.text());
        assert_eq!(status.code(), Some(128 + 9), "{first:?}: {}", stderr.text());
        assert!(fs::read_dir(sb.lock_dir()).unwrap().next().is_none());
    }
}

fn write_lock(dir: &std::path::Path, port: u16, pid: u32, folders: &[&str]) {
    fs::create_dir_all(dir).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    let v = json!({"pid": pid, "workspaceFolders": folders, "ideName": "Fake", "transport": "ws",
        "runningInWindows": false, "authToken": "t"});
    fs::write(dir.join(format!("{port}.lock")), v.to_string()).unwrap();
}

fn doctor(sb: &Sandbox, env: &[(&str, &str)]) -> (i32, String) {
    let mut c = sb.command();
    c.arg("doctor").arg(&sb.ws);
    for (k, v) in env {
        c.env(k, v);
    }
    run_bounded(c)
}

/// A lock file naming this live process but written by another that had its pid: on Linux its
/// `processStart` is another start of that pid, elsewhere it was written a year before this
/// process started. `list` says it is stale, `doctor` that its pid names another process now.
fn reused_pid(home_ide: &std::path::Path, sb: &Sandbox) {
    reused_pid_on(home_ide, sb, 4646);
    // The same file on a port that answers: a bridge of another pid namespace (a container's,
    // sharing this folder and the network), whose pid names another process here. Live.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    reused_pid_on(home_ide, sb, port);
}

fn reused_pid_on(home_ide: &std::path::Path, sb: &Sandbox, port: u16) {
    let path = home_ide.join(format!("{port}.lock"));
    write_lock(home_ide, port, std::process::id(), &["/elsewhere"]);
    written_by_another(&path);
    let o = sb.command().arg("list").output().unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    let (code, out) = doctor(sb, &[]);
    if port == 4646 {
        assert!(list.contains("stale port 4646"), "{list}");
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains("4646.lock is stale: its pid")
                && out.contains("now names another process"),
            "{out}"
        );
    } else {
        assert!(list.contains(&format!("live  port {port}")), "{list}");
        assert!(!out.contains(&format!("{port}.lock is stale")), "{out}");
    }
    fs::remove_file(&path).unwrap();
}

/// The folder's one lock file is stale, its pid handed to another process: said stale with its
/// fix, then said to be what claude tries, not an IDE it "connects to", nor its port a stopped
/// IDE to restart (three accounts of one file).
#[test]
fn doctor_says_a_stale_lock_file_of_the_folder_once() {
    let sb = Sandbox::new();
    let ws = sb.ws.to_string_lossy().into_owned();
    write_lock(&sb.lock_dir(), 4647, std::process::id(), &[&ws]);
    written_by_another(&sb.lock_dir().join("4647.lock"));
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("4647.lock is stale: its pid"), "{out}");
    assert!(
        out.contains("the one lock file that matches is that stale one"),
        "{out}"
    );
    assert!(
        !out.contains("connects to it") && !out.contains("restart it"),
        "{out}"
    );
    // Named by CLAUDE_CODE_SSE_PORT: the same.
    let (code, out) = doctor(&sb, &[("CLAUDE_CODE_SSE_PORT", "4647")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the one lock file that CLAUDE_CODE_SSE_PORT names is that stale one"),
        "{out}"
    );
    assert!(!out.contains("connects to it"), "{out}");
}

/// Makes the lock file at `path`, naming this live process, one another process wrote (the pid
/// handed out again): on Linux its `processStart` is another start of that pid, elsewhere it
/// was written a year before this process started.
fn written_by_another(path: &std::path::Path) {
    if cfg!(target_os = "linux") {
        let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let mut lock: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        lock["processStart"] = json!(format!("{}/1", boot.trim()));
        fs::write(path, lock.to_string()).unwrap();
    } else {
        let year_ago =
            std::time::SystemTime::now() - std::time::Duration::from_secs(365 * 24 * 3600);
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(year_ago)
            .unwrap();
    }
}

/// `c` run to its end, its stdout read: its exit code and that text. A command that does not end
/// within [`WAIT`] is killed and fails the test, rather than holding it.
fn run_bounded(mut c: Command) -> (i32, String) {
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let status = exit_within(&mut child, WAIT, &|| "its output is read after".into());
    (status.code().unwrap(), reader.join().unwrap())
}

fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// A workspace served through a symbolic link: the lock file names the link and the folder it
/// resolves to, since the client compares its working directory (resolved by the OS) with the
/// folders as text; a claude started in the real folder then finds the bridge. `doctor` compares
/// as the client does: a lock file naming only the link does not match the real folder.
#[test]
fn a_workspace_served_through_a_link_is_found_from_its_real_folder() {
    let sb = Sandbox::new();
    let link = sb.root().join("wslink");
    symlink(&sb.ws, &link).unwrap();
    let link_text = link.to_str().unwrap().to_owned();
    let real_text = sb.ws.to_str().unwrap().to_owned();
    let mut s = Served::start(&sb, &["--workspace", &link_text]);
    let lock: Value = serde_json::from_str(&fs::read_to_string(&s.lock).unwrap()).unwrap();
    assert_eq!(lock["workspaceFolders"], json!([link_text, real_text]));
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("exactly one lock file matches"), "{out}");
    // The tool still answers the folder as given.
    let mut c = s.client();
    let folders = call(&mut c, "getWorkspaceFolders", json!({}));
    assert!(folders.to_string().contains(&link_text), "{folders}");
    assert_eq!(s.stop(), 0);

    // Another IDE's lock file naming only the link: not a match for a claude in the real folder.
    write_lock(&sb.lock_dir(), 4545, std::process::id(), &[&link_text]);
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no live lock file has a workspace folder containing"),
        "{out}"
    );
}

/// A lock file's name and folders are any IDE's text: `list` and `doctor` show its control
/// characters rather than send them to the terminal (an escape sequence coloured or cleared the
/// screen, a newline broke the table).
#[test]
fn list_and_doctor_show_a_lock_files_control_characters() {
    let sb = Sandbox::new();
    let ws = sb.ws.to_string_lossy().into_owned();
    let listening = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listening.local_addr().unwrap().port();
    let dir = sb.lock_dir();
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let v = json!({"pid": std::process::id(), "workspaceFolders": [&ws, "/x\u{1b}[2J"],
        "ideName": "E\u{1b}[31mvil\nX", "transport": "ws", "runningInWindows": false,
        "authToken": "t"});
    fs::write(dir.join(format!("{port}.lock")), v.to_string()).unwrap();
    let o = sb.command().arg("list").output().unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    let (_, doctor) = doctor(&sb, &[]);
    for out in [&*list, &doctor] {
        assert!(!out.contains('\u{1b}'), "{out:?}");
        assert!(out.contains("E^[[31mvil^JX"), "{out}");
    }
    assert!(list.contains("/x^[[2J"), "{list}");
    assert_eq!(
        list.lines().filter(|l| l.contains("vil")).count(),
        1,
        "{list}"
    );
}

/// A file where claude's lock folder should be is one problem, with the fix that helps; it was
/// also said not to be listable, with `chmod 700` on the file as a second fix.
#[test]
fn doctor_says_a_file_in_the_lock_folders_place_once() {
    let sb = Sandbox::new();
    fs::create_dir_all(sb.lock_dir().parent().unwrap()).unwrap();
    fs::write(sb.lock_dir(), "").unwrap();
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1, "{out}");
    let ide = sb.lock_dir().display().to_string();
    assert!(
        out.contains(&format!("problem: {ide} is not a directory")),
        "{out}"
    );
    assert!(!out.contains("cannot be listed"), "{out}");
}

#[test]
fn list_and_doctor() {
    let sb = Sandbox::new();
    let ws = sb.ws.to_string_lossy().to_string();
    // Nothing served.
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no live lock file has a workspace folder containing"),
        "{out}"
    );
    assert!(out.contains("fix: "));

    // A live bridge: all good, and `list` shows it.
    let mut s = Served::start(&sb, &[]);
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("exactly one lock file matches"));
    // Named as serve names it, from another folder: the same.
    let mut c = sb.command();
    c.current_dir(sb.root())
        .arg("doctor")
        .arg("--workspace")
        .arg(&sb.ws);
    let (code, out) = run_bounded(c);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("exactly one lock file matches"), "{out}");
    let o = sb.command().arg("list").output().unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(list.contains(&format!("live  port {}", s.port)), "{list}");
    assert!(
        list.contains("claude-ide-bridge") && list.contains(&ws),
        "{list}"
    );

    // In an IDE's terminal, claude connects by itself only to the IDE it runs in, or to the port
    // CLAUDE_CODE_SSE_PORT names; told not to connect, to none.
    let port = s.port.to_string();
    for set in [
        ("TERM_PROGRAM", "vscode"),
        ("TERMINAL_EMULATOR", "JetBrains-JediTerm"),
    ] {
        let (code, out) = doctor(&sb, &[set]);
        assert_eq!(code, 1, "{out}");
        assert!(
            out.contains(&format!("this is an IDE's terminal ({}={})", set.0, set.1))
                && out.contains(&format!("CLAUDE_CODE_SSE_PORT={port} claude")),
            "{out}"
        );
        let (code, out) = doctor(&sb, &[set, ("CLAUDE_CODE_SSE_PORT", port.as_str())]);
        assert_eq!(code, 0, "{out}");
    }
    // The IDE's own lock file, in its terminal (here: a process above doctor's, this test):
    // claude connects to it.
    let own = Sandbox::new();
    let own_ws = own.ws.to_string_lossy().into_owned();
    let listening = TcpListener::bind("127.0.0.1:0").unwrap();
    let own_port = listening.local_addr().unwrap().port();
    write_lock(&own.lock_dir(), own_port, std::process::id(), &[&own_ws]);
    let (_, out) = doctor(&own, &[("TERM_PROGRAM", "vscode")]);
    assert!(
        out.contains("the IDE's whose terminal this is: claude started here connects to it"),
        "{out}"
    );
    let (code, out) = doctor(&sb, &[("CLAUDE_CODE_AUTO_CONNECT_IDE", "false")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("claude connects to no IDE by itself"), "{out}");
    // A bridge stopped (`serve` suspended with Ctrl-Z): its port takes connections, but nothing
    // answers them.
    s.signal("STOP");
    // (Each of its threads stops as it takes the signal: one still running would answer.)
    let stopped = || {
        fs::read_dir(format!("/proc/{}/task", s.child.id()))
            .unwrap()
            .map_while(Result::ok)
            .all(|t| {
                fs::read_to_string(t.path().join("stat")).is_ok_and(|st| {
                    st.rsplit_once(") ")
                        .is_some_and(|(_, r)| r.starts_with('T'))
                })
            })
    };
    let give_up = std::time::Instant::now() + WAIT;
    while !stopped() {
        assert!(
            std::time::Instant::now() < give_up,
            "the bridge did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (code, out) = doctor(&sb, &[]);
    s.signal("CONT");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("port {port} from")) && out.contains("is stopped"),
        "{out}"
    );
    assert_eq!(doctor(&sb, &[]).0, 0);

    // claude told to look in another folder than the bridge wrote its lock file in: the bridge is
    // found by its state file, and said to be there (doctor said none served the folder, and its
    // fix started a second bridge).
    let elsewhere = sb.root().join("other-config");
    fs::create_dir_all(elsewhere.join("ide")).unwrap();
    let (code, out) = doctor(&sb, &[("CLAUDE_CONFIG_DIR", elsewhere.to_str().unwrap())]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "but a bridge serves it (pid {}, port {})",
            s.child.id(),
            s.port
        )),
        "{out}"
    );
    // Where its lock file is, and what claude must be started with to read it (it said
    // "another folder").
    assert!(
        out.contains(&format!(
            "its lock file is in {} (it was started with another CLAUDE_CONFIG_DIR or HOME)",
            sb.lock_dir().display()
        )) && out.contains(&format!(
            "start claude with CLAUDE_CONFIG_DIR={}",
            sb.lock_dir().parent().unwrap().display()
        )),
        "{out}"
    );
    // The folder written with a trailing separator, as a shell's completion gives it: the same.
    let mut c = sb.command();
    c.arg("doctor")
        .arg(format!("{}/", sb.ws.display()))
        .env("CLAUDE_CONFIG_DIR", &elsewhere);
    let (code, out) = run_bounded(c);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("but a bridge serves it (pid"), "{out}");

    // A folder that is not there: said, and nothing else checked.
    let mut c = sb.command();
    c.args(["doctor", "--no-lsp"])
        .arg(sb.root().join("missing"));
    let (code, out) = run_bounded(c);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("missing does not exist"), "{out}");
    assert!(!out.contains("serve --workspace"), "{out}");
    // A file where the folder should be: said so.
    fs::write(sb.root().join("a-file"), "").unwrap();
    let mut c = sb.command();
    c.args(["doctor", "--no-lsp"]).arg(sb.root().join("a-file"));
    let (code, out) = run_bounded(c);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("a-file is not a directory"), "{out}");

    // A proxy that would take loopback requests: said, but not a problem for the IDE link
    // (the real client reaches the IDE directly with every proxy variable set).
    let (code, out) = doctor(&sb, &[("HTTPS_PROXY", "http://proxy:3128")]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("HTTPS_PROXY is set and no_proxy/NO_PROXY does not cover 127.0.0.1: claude reaches the IDE directly"),
        "{out}"
    );
    let (code, _) = doctor(
        &sb,
        &[
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("no_proxy", "localhost,127.0.0.1"),
        ],
    );
    assert_eq!(code, 0);

    // CLAUDE_CODE_SSE_PORT naming nothing: claude connects to the folder's one bridge all the
    // same (doctor_on_a_port_named_in_claude_code_sse_port).
    let (code, out) = doctor(&sb, &[("CLAUDE_CODE_SSE_PORT", "1")]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("info: CLAUDE_CODE_SSE_PORT=1 names no live lock file"),
        "{out}"
    );

    // A second live lock matching the same folder (this test process's pid), whose port does
    // not answer.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    write_lock(&sb.lock_dir(), closed, std::process::id(), &[&ws]);
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("2 lock files match"), "{out}");
    assert!(
        out.contains(&format!("port {closed} from")) && out.contains("does not answer"),
        "{out}"
    );
    // CLAUDE_CODE_SSE_PORT naming one of them makes the choice: all good.
    let (code, out) = doctor(&sb, &[("CLAUDE_CODE_SSE_PORT", port.as_str())]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("exactly one lock file matches"), "{out}");
    fs::remove_file(sb.lock_dir().join(format!("{closed}.lock"))).unwrap();

    // Stale and foreign (corrupt) files in ~/.claude/ide.
    let home_ide = sb.home.join(".claude/ide");
    write_lock(&home_ide, 4242, dead_pid(), &["/elsewhere"]);
    fs::write(home_ide.join("4343.lock"), "garbage").unwrap();
    let o = sb.command().arg("list").output().unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(list.contains("stale port 4242"), "{list}");
    assert!(list.contains("unreadable"), "{list}");
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("4242.lock is stale"), "{out}");
    assert!(out.contains("4343.lock: not a lock file"), "{out}");
    fs::remove_file(home_ide.join("4343.lock")).unwrap();
    // A FIFO and a huge file under a lock file's name: said, never read (a FIFO held `list`
    // and `doctor` for good; a huge file was read whole).
    let fifo = home_ide.join("4444.lock");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let huge = fs::File::create(home_ide.join("4545.lock")).unwrap();
    huge.set_len(1 << 30).unwrap();
    let mut c = sb.command();
    c.arg("list");
    let (_, list) = run_bounded(c);
    assert!(list.contains("not a regular file"), "{list}");
    assert!(list.contains("1073741824 bytes"), "{list}");
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("4444.lock: it is not a regular file"), "{out}");
    fs::remove_file(&fifo).unwrap();
    fs::remove_file(home_ide.join("4545.lock")).unwrap();
    // A stale file alone is no problem: claude skips and deletes it.
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("info: ") && out.contains("4242.lock is stale"),
        "{out}"
    );
    fs::remove_file(home_ide.join("4242.lock")).unwrap();
    // A live pid on a file another process wrote (the pid handed out again after a reboot):
    // stale, and a problem, since claude takes it for a live IDE's.
    reused_pid(&home_ide, &sb);
    // The same beside the live bridge, naming its folder: claude counts it (its pid names a
    // process), so two match and `claude --ide` connects to neither (it said exactly one did).
    write_lock(&home_ide, 4747, std::process::id(), &[&ws]);
    written_by_another(&home_ide.join("4747.lock"));
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("2 lock files match"), "{out}");
    assert!(!out.contains("exactly one lock file matches"), "{out}");
    fs::remove_file(home_ide.join("4747.lock")).unwrap();

    // Lock directory permissions: readable by others (said, no problem: the bridge uses it),
    // writable by the group (a problem: the bridge refuses it), then a symlink.
    fs::set_permissions(&home_ide, fs::Permissions::from_mode(0o755)).unwrap();
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("info: ") && out.contains("has mode 0755"),
        "{out}"
    );
    fs::set_permissions(&home_ide, fs::Permissions::from_mode(0o775)).unwrap();
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1);
    assert!(
        out.contains("has mode 0775") && out.contains("chmod 700"),
        "{out}"
    );
    fs::remove_dir(&home_ide).unwrap();
    let real = sb.root().join("real-ide");
    fs::create_dir(&real).unwrap();
    symlink(&real, &home_ide).unwrap();
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("is a symbolic link"), "{out}");
    fs::remove_file(&home_ide).unwrap();

    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(s.stop(), 0);
    // Doctor for a directory outside every workspace.
    let (code, _) = {
        let o = sb.command().arg("doctor").arg(sb.root()).output().unwrap();
        (o.status.code().unwrap(), ())
    };
    assert_eq!(code, 1);
}

/// `run ARGS -- COMMAND` as a shell runs a job: in a process group of its own (the bridge's pid
/// names it); its stderr collected; the group signalled by name (`"CONT"`) through what is
/// returned, which, dropped, continues and kills whatever of the group is left.
fn run_as_a_job(
    sb: &Sandbox,
    command: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, Lines, Group) {
    use std::os::unix::process::CommandExt;
    let mut child = sb
        .command()
        .envs(env.iter().copied())
        .arg("run")
        .args(args)
        .arg("--")
        .arg(command)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    let group = Group(child.id());
    (child, stderr, group)
}

/// A process group, by its leader's pid: signalled with [`Group::signal`]; continued and killed
/// when dropped, so that nothing of it is left stopped behind a test.
struct Group(u32);

impl Group {
    fn signal(&self, sig: &str) -> bool {
        Command::new("kill")
            .args(["-s", sig, "--", &format!("-{}", self.0)])
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal("CONT");
        self.signal("KILL");
    }
}

/// The command of `run` suspends itself (claude on Ctrl-Z): the bridge stops with it, so that
/// the shell takes the terminal back, and continuing the job (`fg`: SIGCONT to the process
/// group) continues both; the bridge then exits with the command's status.
#[test]
fn run_stops_with_a_command_that_suspends_itself() {
    let sb = Sandbox::new();
    let claude = script(&sb, "claude", "kill -STOP $$\nexit 3");
    let (mut child, stderr, group) = run_as_a_job(&sb, &claude, &[], &[]);
    let pid = child.id();
    let give_up = std::time::Instant::now() + WAIT;
    while state_of(pid) != Some('T') {
        assert!(
            std::time::Instant::now() < give_up,
            "the bridge did not stop with its command: {:?}; {}",
            state_of(pid),
            stderr.text()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // `fg`.
    assert!(group.signal("CONT"));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{}", stderr.text());
    assert!(fs::read_dir(sb.lock_dir()).map_or(true, |mut d| d.next().is_none()));
}

/// The terminal stops the whole job (Ctrl-Z: SIGTSTP to the process group, bridge and command
/// alike), and `fg` continues it (SIGCONT to the group): both run again, every time. Before, the
/// bridge's thread waiting for the command could see it stopped just before the bridge itself
/// stopped, and once continued stopped the group again (`fg` needed twice, 3 times in 10).
#[test]
fn run_runs_on_after_the_terminal_stops_and_continues_the_job() {
    let sb = Sandbox::new();
    let pid_file = sb.root().join("command.pid");
    // One process, no child of its own (a shell looping over `sleep` sits in `vfork` when its
    // child is stopped first: state D, not T); ended with the group, whatever the test did.
    let claude = script(
        &sb,
        "claude",
        &format!("echo $$ > '{}'\nexec sleep 60", pid_file.display()),
    );
    let (mut child, stderr, group) = run_as_a_job(&sb, &claude, &["--no-lsp"], &[]);
    let pid = child.id();
    let command = pid_written(&pid_file, &stderr);
    let wait_for = |want: &dyn Fn(Option<char>) -> bool, what: &str| {
        let give_up = std::time::Instant::now() + WAIT;
        while !(want(state_of(pid)) && want(state_of(command))) {
            assert!(
                std::time::Instant::now() < give_up,
                "{what}: bridge {:?}, command {:?}; {}",
                state_of(pid),
                state_of(command),
                stderr.text()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    for round in 0..10 {
        assert!(group.signal("TSTP"));
        wait_for(&|s| s == Some('T'), "stopped");
        assert!(group.signal("CONT"));
        wait_for(&|s| s.is_some_and(|s| s != 'T'), "running again");
        // Still running a while later: nothing stopped the group once more.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            state_of(pid) != Some('T') && state_of(command) != Some('T'),
            "stopped again after round {round}; {}",
            stderr.text()
        );
    }
    // Ended as a terminal closing would end it: the command goes with the bridge.
    assert!(Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success()));
    let status = child.wait().unwrap();
    assert!(!running(command), "{status:?}; {}", stderr.text());
}

/// A lock-file folder of the user's that the user cannot write (mode 0500): `doctor` says the
/// bridge cannot write there, with the folder's mode (it said "a private directory (0700,
/// yours)", and its fix was to start a bridge, which then failed). Run as an ordinary user
/// (root writes whatever the mode): needs root to become one.
#[test]
fn doctor_says_a_lock_folder_the_user_cannot_write() {
    use std::os::unix::fs::chown;
    if !Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
    {
        claude_ide_bridge_testsupport::skip::skip("needs root, to run doctor as another user");
        return;
    }
    let sb = Sandbox::new();
    let nobody = 65534;
    fs::set_permissions(sb.root(), fs::Permissions::from_mode(0o755)).unwrap();
    for d in [&sb.home, &sb.config] {
        chown(d, Some(nobody), Some(nobody)).unwrap();
    }
    let ide = sb.lock_dir();
    fs::create_dir_all(&ide).unwrap();
    chown(&ide, Some(nobody), Some(nobody)).unwrap();
    // The program as the sandbox runs it, as that user (or another), within 20 s.
    let as_user = |uid: u32, args: &[&str]| {
        let plain = sb.command();
        let mut c = Command::new("timeout");
        c.args(["20", "setpriv"])
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args(["--clear-groups", "--"])
            .arg(plain.get_program())
            .args(args)
            .current_dir(&sb.ws);
        for (k, v) in plain.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    };
    let as_nobody = |args: &[&str]| as_user(nobody, args);
    let doctor = |mode: u32| {
        fs::set_permissions(&ide, fs::Permissions::from_mode(mode)).unwrap();
        run_bounded(as_nobody(&["doctor", "--no-lsp"]))
    };
    let (_, out) = doctor(0o500);
    assert!(
        out.contains(&format!(
            "{} has mode 0500: the bridge cannot write its lock file there",
            ide.display()
        )),
        "{out}"
    );
    // And `serve` there names the folder it could not write.
    let o = as_nobody(&["serve", "--no-lsp"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot write the lock file in {}: ",
            ide.display()
        )),
        "{err}"
    );
    let (_, out) = doctor(0o700);
    assert!(
        out.contains(&format!(
            "{} is a private directory (0700, yours)",
            ide.display()
        )),
        "{out}"
    );
    // A workspace folder the user cannot list: `doctor` says so (it went on as if it could), and
    // `serve` serves it, saying so.
    let locked = sb.root().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
    let (code, out) = run_bounded({
        let mut c = as_nobody(&["doctor", "--no-lsp"]);
        c.arg(&locked);
        c
    });
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{} cannot be listed (", locked.display())),
        "{out}"
    );
    // `serve` as that user, its stderr read; stopped with SIGTERM (`timeout` passes it on).
    let serving = |mut c: Command| {
        let mut serve = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = common::Lines::collect(serve.stderr.take().unwrap());
        (serve, stderr)
    };
    let stop = |mut serve: std::process::Child| {
        Command::new("kill")
            .args(["-TERM", &serve.id().to_string()])
            .status()
            .unwrap();
        serve.wait().unwrap();
    };
    let (serve, stderr) = serving({
        let mut c = as_nobody(&["serve", "--no-lsp", "--workspace"]);
        c.arg(&locked);
        c
    });
    stderr.wait_for(&format!(
        "warning: workspace folder {} cannot be listed (",
        locked.display()
    ));
    stop(serve);
    // A bridge serving the workspace, its folder then writable but not listable (0300): claude
    // finds no lock file there, and `doctor` says so; it called the folder fine, and said the
    // bridge had written its lock file in another folder (another CLAUDE_CONFIG_DIR or HOME).
    let (serve, stderr) = serving(as_nobody(&["serve", "--no-lsp"]));
    stderr.wait_for("lock file: ");
    let (_, out) = doctor(0o300);
    fs::set_permissions(&ide, fs::Permissions::from_mode(0o700)).unwrap();
    stop(serve);
    assert!(
        out.contains(&format!(
            "{} has mode 0300: claude cannot list the lock files there",
            ide.display()
        )),
        "{out}"
    );
    assert!(out.contains("cannot be listed"), "{out}");
    assert!(!out.contains("another CLAUDE_CONFIG_DIR"), "{out}");
    // Its running bridge, seen by others in a folder they may list: theirs, never to be removed
    // (it was "foreign or corrupt", to remove, for a user who cannot read it, and to remove with
    // sudo for root).
    fs::set_permissions(&ide, fs::Permissions::from_mode(0o755)).unwrap();
    let (serve, stderr) = serving(as_nobody(&["serve", "--no-lsp"]));
    stderr.wait_for("lock file: ");
    let (_, by_root) = run_bounded({
        let mut c = sb.command();
        c.args(["doctor", "--no-lsp"]);
        c
    });
    let (_, by_other) = run_bounded(as_user(4242, &["doctor", "--no-lsp"]));
    stop(serve);
    assert!(
        by_root.contains("belongs to another user: their running bridge"),
        "{by_root}"
    );
    assert!(
        by_other.contains("another user's, and its port")
            && by_other.contains("answers: a running bridge of theirs (a claude of yours"),
        "{by_other}"
    );
    for out in [by_root, by_other] {
        assert!(!out.contains(" rm "), "{out}");
    }
}

/// `list` and `doctor` piped into a reader that is gone (`claude-ide-bridge list | head -0`): they
/// end with their own status, not a panic about a broken pipe (exit 101).
#[test]
fn list_and_doctor_with_a_closed_stdout_end_normally() {
    let sb = Sandbox::new();
    // Something to print besides the headers: a stale lock file.
    write_lock(&sb.lock_dir(), 4242, dead_pid(), &["/elsewhere"]);
    for args in [&["list"][..], &["doctor"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = sb.command().args(args).stdout(writer).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let code = o.status.code();
        assert!(matches!(code, Some(0 | 1)), "{args:?}: {code:?} {err}");
    }
}

/// A panic of the bridge's main thread (made on purpose by a debug build's test switch, at the
/// first signal) ends `run`'s command, which its unwinding did not: claude stayed on the
/// terminal, fighting the shell for it. The lock file goes with the unwinding, as before.
#[test]
fn a_panic_of_the_main_thread_ends_runs_command() {
    if !cfg!(debug_assertions) {
        claude_ide_bridge_testsupport::skip::skip("the panic switch is in debug builds only");
        return;
    }
    let sb = Sandbox::new();
    let (mut child, stderr, command) =
        run_a_command_that_stays(&sb, &[("CLAUDE_IDE_BRIDGE_TEST_PANIC", "main")], STAYS);
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(101), "{}", stderr.text());
    wait_until_gone(command, "the bridge's panic", &stderr);
    assert!(
        stderr.text().contains("CLAUDE_IDE_BRIDGE_TEST_PANIC"),
        "{}",
        stderr.text()
    );
    assert!(fs::read_dir(sb.lock_dir()).unwrap().next().is_none());
}

/// The bridge killed (SIGKILL: nothing of it runs to end anything; a crash or the OOM killer
/// alike): `run`'s command ends too. It stayed on the terminal, fighting the shell for it. Both
/// ways of tying it: the launcher (Linux's own: the SIGTERM the kernel sends at its parent's
/// end) and the watcher (macOS' way, made Linux's by a debug build's test switch: a process
/// beside the command that waits for the bridge's exit and sends it SIGTERM, gone with it).
#[cfg(target_os = "linux")]
#[test]
fn a_killed_bridge_ends_runs_command() {
    for way in ["launcher", "watcher"] {
        if way == "watcher" && !cfg!(debug_assertions) {
            claude_ide_bridge_testsupport::skip::skip(
                "the watcher: its switch is in debug builds only",
            );
            continue;
        }
        let sb = Sandbox::new();
        let env = [("CLAUDE_IDE_BRIDGE_TEST_TIE", way)];
        let (mut child, stderr, command) = run_a_command_that_stays(&sb, &env, STAYS);
        // The command is the bridge's own child (the launcher became it), not a grandchild.
        assert_eq!(
            parent_of(command),
            Some(child.id()),
            "{way}: {}",
            stderr.text()
        );
        let watcher = (way == "watcher").then(|| watcher_of(child.id(), command));
        child.kill().unwrap();
        child.wait().unwrap();
        wait_until_gone(command, &format!("the bridge's SIGKILL ({way})"), &stderr);
        if let Some(watcher) = watcher {
            wait_until_gone(watcher, "the command it watched (the watcher)", &stderr);
        }
    }
}

/// The watcher of `run`'s command (the test switch's way of tying it) ends with the command when
/// the command ends by itself, and the bridge exits with the command's status: nothing is left.
#[cfg(target_os = "linux")]
#[test]
fn a_watcher_ends_with_runs_command() {
    if !cfg!(debug_assertions) {
        claude_ide_bridge_testsupport::skip::skip("the watcher's switch is in debug builds only");
        return;
    }
    let sb = Sandbox::new();
    let go = sb.root().join("go");
    let env = [("CLAUDE_IDE_BRIDGE_TEST_TIE", "watcher")];
    let body = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; exit 7",
        go.display()
    );
    let (mut child, stderr, command) = run_a_command_that_stays(&sb, &env, &body);
    let watcher = watcher_of(child.id(), command);
    fs::write(&go, "").unwrap();
    let status = exit_within(&mut child, WAIT, &|| stderr.text());
    assert_eq!(status.code(), Some(7), "{}", stderr.text());
    wait_until_gone(watcher, "the command it watched (the watcher)", &stderr);
}

/// A command the watcher cannot tie (macOS' way, made Linux's by the test switch) is said: the
/// program's file removed since the bridge started (`cargo uninstall`, a build tree moved), the
/// watcher cannot start, and the command ran untied without a word. Said once the terminal is
/// the bridge's again (the command has it meanwhile).
#[cfg(target_os = "linux")]
#[test]
fn a_command_the_watcher_cannot_tie_is_said() {
    if !cfg!(debug_assertions) {
        claude_ide_bridge_testsupport::skip::skip("the watcher's switch is in debug builds only");
        return;
    }
    let sb = Sandbox::new();
    let copy = sb.root().join("claude-ide-bridge");
    fs::copy(common::BIN, &copy).unwrap();
    let (pid_file, go) = (sb.root().join("command.pid"), sb.root().join("go"));
    let body = format!(
        "echo $$ > {}\nwhile [ ! -e {} ]; do sleep 0.05; done",
        pid_file.display(),
        go.display()
    );
    let claude = script(&sb, "claude", &body);
    let mut c = Command::new(&copy);
    with_env_of(&mut c, &sb.command());
    c.env("CLAUDE_IDE_BRIDGE_TEST_TIE", "watcher")
        .args(["run", "--"])
        .arg(&claude)
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // Gone before the bridge listens and starts the command.
    fs::remove_file(&copy).unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    pid_written(&pid_file, &stderr);
    fs::write(&go, "").unwrap();
    let status = exit_within(&mut child, WAIT, &|| stderr.text());
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    let said = stderr.wait_for("not tied to the bridge");
    assert!(said.contains("could not start"), "{said}");
}

/// The watcher tying `command` to `bridge`, waited for (at most [`WAIT`]: it starts just after
/// the command).
#[cfg(target_os = "linux")]
fn watcher_of(bridge: u32, command: u32) -> u32 {
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        if let Some(&pid) = watchers_of(bridge, Some(command)).first() {
            return pid;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no watcher of {command}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A panic of a thread that brings the host its inputs (the signal thread, made to panic at the
/// first signal by a debug build's test switch) in `run`: the command is asked to stop and the
/// bridge waits for its end, as at a signal, then exits with 101. It exited at once, leaving a
/// command that takes its time over SIGTERM on the terminal the shell took back. A command that
/// ignores SIGTERM is killed after a grace: with the signal thread gone, no second request of
/// the user's could come to end it, and the bridge waited for it for ever.
#[test]
fn a_panic_of_an_input_thread_in_run_waits_for_the_command() {
    if !cfg!(debug_assertions) {
        claude_ide_bridge_testsupport::skip::skip("the panic switch is in debug builds only");
        return;
    }
    for ignores_term in [false, true] {
        let sb = Sandbox::new();
        let ended = sb.root().join("ended");
        let on_term = match ignores_term {
            false => format!("sleep 0.5; touch {}; exit 0", ended.display()),
            true => String::new(),
        };
        let (mut child, stderr, command) = run_a_command_that_stays(
            &sb,
            &[("CLAUDE_IDE_BRIDGE_TEST_PANIC", "signals")],
            &format!("trap '{on_term}' TERM\nwhile :; do sleep 0.05; done"),
        );
        Command::new("kill")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        let give_up = std::time::Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > give_up {
                let _ = child.kill();
                // Not left behind holding the test's output open.
                let _ = Command::new("kill")
                    .args(["-KILL", &command.to_string()])
                    .status();
                panic!(
                    "ignores SIGTERM {ignores_term}: the bridge kept waiting: {}",
                    stderr.text()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(
            ended.exists() || ignores_term,
            "the bridge exited before its command: {}",
            stderr.text()
        );
        wait_until_gone(command, "the bridge's panic", &stderr);
        assert_eq!(status.code(), Some(101), "{}", stderr.text());
        // (The bridge's own words are left out while claude has the terminal; the panic's are
        // not.)
        assert!(
            stderr.text().contains("a panic of the signals thread"),
            "{}",
            stderr.text()
        );
        assert!(fs::read_dir(sb.lock_dir()).unwrap().next().is_none());
    }
}

/// `run -- COMMAND` where the command writes its pid, then runs `body` ([`STAYS`]: waits a
/// minute), with the debug build's panic switch at `panic`: the bridge, its stderr, and the
/// command's pid once it runs.
fn run_a_command_that_stays(
    sb: &Sandbox,
    env: &[(&str, &str)],
    body: &str,
) -> (std::process::Child, Lines, u32) {
    let pid_file = sb.root().join("command.pid");
    let claude = script(
        sb,
        "claude",
        &format!("echo $$ > {}\n{body}", pid_file.display()),
    );
    let mut c = sb.command();
    c.args(["run", "--"])
        .arg(&claude)
        .stderr(std::process::Stdio::piped());
    c.envs(env.iter().copied());
    let mut child = c.spawn().unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    let command = pid_written(&pid_file, &stderr);
    (child, stderr, command)
}

/// Waits until `path` exists (a stand-in claude's probe); the bridge's stderr is said if it never
/// does.
fn appeared(path: &std::path::Path, stderr: &Lines) {
    let give_up = std::time::Instant::now() + WAIT;
    while !path.exists() {
        assert!(std::time::Instant::now() < give_up, "{}", stderr.text());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `run`, sent SIGTERM, passes it to its command and ends with the command's status.
fn ends_with_sigterm(mut run: std::process::Child) {
    Command::new("kill")
        .arg(run.id().to_string())
        .status()
        .unwrap();
    assert_eq!(run.wait().unwrap().code(), Some(128 + 15));
}

/// The port a stand-in claude wrote to `probe` (its `CLAUDE_CODE_SSE_PORT`), once it is there,
/// and the token of that port's lock file: what claude connects with.
fn probed(sb: &Sandbox, probe: &std::path::Path, stderr: &Lines) -> (u16, String) {
    appeared(probe, stderr);
    let port: u16 = fs::read_to_string(probe).unwrap().trim().parse().unwrap();
    let lock = sb.lock_dir().join(format!("{port}.lock"));
    let token = serde_json::from_str::<serde_json::Value>(&fs::read_to_string(&lock).unwrap())
        .unwrap()["authToken"]
        .as_str()
        .unwrap()
        .to_string();
    (port, token)
}

/// `run` with `args` of a stand-in claude that writes the port it was given to a probe file and then
/// runs `then` (shell): the bridge, its stderr, its port and a client connected to it as claude
/// would be, initialized.
fn run_connected(
    sb: &Sandbox,
    args: &[&str],
    then: &str,
) -> (std::process::Child, Lines, u16, client::Client) {
    let probe = sb.root().join("probe");
    let claude = script(
        sb,
        "claude",
        &format!(
            "echo $CLAUDE_CODE_SSE_PORT > {p}.tmp && mv {p}.tmp {p}\n{then}",
            p = probe.display()
        ),
    );
    let mut child = sb
        .command()
        .arg("run")
        .args(args)
        .arg("--")
        .arg(&claude)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    let (port, token) = probed(sb, &probe, &stderr);
    let (_, c) = client::connect(port, Some(&token));
    let mut c = c.unwrap();
    c.init();
    (child, stderr, port, c)
}

/// The bridge `child` told to stop (SIGTERM) every half second until it ends (the second time
/// counts once a second has passed since it handled the first, which a busy machine may do
/// late): its status.
fn told_until_it_ends(child: &mut std::process::Child, stderr: &Lines) -> std::process::ExitStatus {
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        Command::new("kill")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > give_up {
            return exit_within(child, std::time::Duration::ZERO, &|| stderr.text());
        }
    }
}

/// The pid a command's script wrote to `pid_file` (`echo $$ > FILE`), once it is there.
fn pid_written(pid_file: &std::path::Path, stderr: &Lines) -> u32 {
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        if let Some(pid) = fs::read_to_string(pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
        {
            return pid;
        }
        assert!(std::time::Instant::now() < give_up, "{}", stderr.text());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What `run`'s command does in [`run_a_command_that_stays`] unless told otherwise.
const STAYS: &str = "exec sleep 60";

/// Waits (at most [`WAIT`]) until process `pid` is gone or a zombie, else fails saying it outlived
/// `what`.
fn wait_until_gone(pid: u32, what: &str, stderr: &Lines) {
    let give_up = std::time::Instant::now() + WAIT;
    while running(pid) {
        assert!(
            std::time::Instant::now() < give_up,
            "the command outlived {what}: {}",
            stderr.text()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `run`'s command a wrapper (a shell running a program without `exec`, as a script that runs
/// `node` may): a stop (SIGTERM to the bridge) ends what it started too, which stayed on the
/// terminal once the wrapper was gone; but not what it started in a session of its own (a
/// daemon, or the window `code --wait` starts, holding the user's other windows).
#[cfg(target_os = "linux")]
#[test]
fn a_stop_ends_what_runs_command_started() {
    let sb = Sandbox::new();
    let started = sb.root().join("started.pid");
    let detached = sb.root().join("detached.pid");
    let body = format!(
        "setsid sh -c 'echo $$ > {1}.tmp && mv {1}.tmp {1}; exec sleep 60' &\n\
         sleep 60 &\necho $! > {0}.tmp && mv {0}.tmp {0}\nwait\necho after",
        started.display(),
        detached.display()
    );
    let (mut child, stderr, command) = run_a_command_that_stays(&sb, &[], &body);
    let pid_in = |file: &std::path::Path| -> u32 {
        let give_up = std::time::Instant::now() + WAIT;
        loop {
            if let Some(pid) = fs::read_to_string(file)
                .ok()
                .and_then(|p| p.trim().parse().ok())
            {
                break pid;
            }
            assert!(std::time::Instant::now() < give_up, "{}", stderr.text());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let (sleep, daemon) = (pid_in(&started), pid_in(&detached));
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    child.wait().unwrap();
    wait_until_gone(command, "the bridge's stop", &stderr);
    wait_until_gone(
        sleep,
        "the bridge's stop (what the command started)",
        &stderr,
    );
    let kept = running(daemon);
    Command::new("kill")
        .arg(daemon.to_string())
        .status()
        .unwrap();
    assert!(kept, "a process in a session of its own was ended");
}

/// `run`'s command a wrapper that ignores SIGTERM and keeps starting programs (a loop that runs
/// one after another): killed when the bridge is told to stop again, it leaves none of them
/// running. The tree was read from `/proc` a moment before it was killed: a program started in
/// that moment, its parent gone, was init's and ran on (at 2 of 5 such stops here).
#[cfg(target_os = "linux")]
#[test]
fn a_kill_leaves_nothing_runs_command_was_starting() {
    let sb = Sandbox::new();
    // An argument no other process has: the programs the loop starts are found by it.
    let marker = format!("61.{}", std::process::id());
    let body = format!("trap '' TERM\nwhile :; do sleep {marker} & kill -9 $!; done");
    let (mut child, stderr, command) = run_a_command_that_stays(&sb, &[], &body);
    // Told again until the command is killed.
    let status = told_until_it_ends(&mut child, &stderr);
    assert_eq!(status.code(), Some(128 + 9), "{}", stderr.text());
    wait_until_gone(command, "the bridge's kill", &stderr);
    let started = format!("sleep\0{marker}\0");
    let left: Vec<u32> = fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p| {
            fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.windows(started.len()).any(|w| w == started.as_bytes()))
        })
        .filter(|&p| running(p))
        .collect();
    for p in &left {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    assert!(left.is_empty(), "left running: {left:?}");
}

/// Told to stop again, the bridge stops `run`'s command (SIGSTOP) before it kills it: the bridge
/// waiting for the command must not take that stop for the command suspending itself, which it
/// follows by stopping its own process group, the bridge with it, in the middle of its stop
/// (made certain by a debug build's pause between the stop and the kill).
#[test]
fn the_stop_before_a_kill_is_not_taken_for_a_suspend() {
    let sb = Sandbox::new();
    let pid_file = sb.root().join("command.pid");
    let claude = script(
        &sb,
        "claude",
        &format!(
            "trap '' TERM\necho $$ > '{}'\nexec sleep 60",
            pid_file.display()
        ),
    );
    let (mut child, stderr, _group) = run_as_a_job(
        &sb,
        &claude,
        &["--no-lsp"],
        &[("CLAUDE_IDE_BRIDGE_TEST_KILL_PAUSE", "1")],
    );
    let pid = child.id();
    let command = pid_written(&pid_file, &stderr);
    let term = || Command::new("kill").arg(pid.to_string()).status().unwrap();
    term();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    term();
    let status = exit_within(&mut child, WAIT, &|| {
        format!("state {:?}; {}", state_of(pid), stderr.text())
    });
    assert_eq!(status.code(), Some(128 + 9), "{}", stderr.text());
    wait_until_gone(command, "the bridge's kill", &stderr);
}

/// A lock file as claudecode.nvim writes it (no `runningInWindows`, which the real client reads
/// as `false`) for a live IDE of this workspace: `list` and `doctor` take it as the client does.
/// They called it corrupt, and `doctor` said to remove it.
#[test]
fn a_lock_file_without_running_in_windows_is_read_as_the_client_reads_it() {
    let sb = Sandbox::new();
    let elsewhere = sb.root().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let s = Served::start(&sb, &["--lock-dir", elsewhere.to_str().unwrap()]);
    let ws = sb.ws.to_string_lossy().to_string();
    let dir = sb.lock_dir();
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let v = json!({"pid": s.child.id(), "workspaceFolders": [ws], "ideName": "Neovim",
        "transport": "ws", "authToken": s.token()});
    fs::write(dir.join(format!("{}.lock", s.port)), v.to_string()).unwrap();
    let (code, out) = doctor(&sb, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("exactly one lock file matches"), "{out}");
    assert!(!out.contains("not a lock file"), "{out}");
    let o = sb.command().arg("list").output().unwrap();
    let list = String::from_utf8_lossy(&o.stdout);
    assert!(list.contains(&format!("live  port {}", s.port)), "{list}");
    assert!(list.contains("Neovim"), "{list}");
}

/// Without `HOME` claude's `os.homedir()` falls back to the user's entry in the password
/// database, and so do `doctor` and the bridge: `doctor` looks for lock files there (it said
/// claude had nowhere to look).
#[test]
fn without_home_the_password_databases_home_is_used() {
    let sb = Sandbox::new();
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    let uid = String::from_utf8(uid.stdout).unwrap().trim().to_owned();
    // This user's entry as the system has it (files, LDAP, systemd-userdb alike).
    let entry = std::process::Command::new("getent")
        .args(["passwd", &uid])
        .output()
        .unwrap();
    let entry = String::from_utf8_lossy(&entry.stdout).into_owned();
    let Some(home) = entry
        .trim()
        .split(':')
        .nth(5)
        .filter(|h| h.starts_with('/'))
    else {
        claude_ide_bridge_testsupport::skip::skip(&format!(
            "uid {uid} has no home in the password database ({entry:?})"
        ));
        return;
    };
    let mut c = sb.command();
    c.arg("doctor").arg(&sb.ws).arg("--no-lsp");
    c.env_remove("HOME").env_remove("CLAUDE_CONFIG_DIR");
    let (_, out) = run_bounded(c);
    let dir = std::path::Path::new(home).join(".claude").join("ide");
    assert!(
        out.contains(&format!("claude reads lock files from: {}", dir.display())),
        "{out}"
    );
    assert!(!out.contains("nowhere to look"), "{out}");
    // Set but empty, as claude's `os.homedir()` takes it: no home (not the password
    // database's).
    let mut c = sb.command();
    c.arg("doctor").arg(&sb.ws).arg("--no-lsp");
    c.env("HOME", "").env_remove("CLAUDE_CONFIG_DIR");
    let (_, out) = run_bounded(c);
    assert!(
        out.contains("HOME is set but empty: claude has nowhere to look"),
        "{out}"
    );
    // (Not an empty list of folders.)
    assert!(!out.contains("claude reads lock files from: \n"), "{out}");
    // Set to a relative path: that is what is said, by `doctor` and by `serve` (which said the
    // system had no home for the user).
    let mut c = sb.command();
    c.arg("doctor").arg(&sb.ws).arg("--no-lsp");
    c.env("HOME", "rel").env_remove("CLAUDE_CONFIG_DIR");
    let (_, out) = run_bounded(c);
    assert!(
        out.contains(r#"HOME is "rel", not an absolute path: claude has nowhere to look"#),
        "{out}"
    );
    let mut c = sb.command();
    c.arg("serve").arg(&sb.ws).arg("--no-lsp");
    c.env("HOME", "rel").env_remove("CLAUDE_CONFIG_DIR");
    let o = c.stdin(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stderr);
    assert!(
        out.contains(r#"CLAUDE_CONFIG_DIR is not set and HOME is "rel", not an absolute path: no lock-file directory"#)
            && !out.contains("no home for this user"),
        "{out}"
    );
}

/// A lock folder that cannot be reached (CLAUDE_CONFIG_DIR naming a file, a typo such as
/// `~/.claude.json`; a folder `sudo -E` made root's): `serve` fails and sends the user to
/// `doctor`, which called the folder missing and told them to run that `serve`; `list` too.
/// Both now say why it cannot be reached.
#[test]
fn doctor_and_list_say_a_lock_folder_they_cannot_reach() {
    let sb = Sandbox::new();
    let file = sb.root().join("claude.json");
    fs::write(&file, "{}").unwrap();
    let mut c = sb.command();
    c.env("CLAUDE_CONFIG_DIR", &file)
        .args(["serve", "--no-lsp"]);
    let out = c.stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("doctor` explains"));
    let ide = file.join("ide");
    for command in ["doctor", "list"] {
        let mut c = sb.command();
        c.env("CLAUDE_CONFIG_DIR", &file).arg(command);
        let (_, out) = run_bounded(c);
        let missing =
            [" does not exist", " (does not exist)"].map(|m| format!("{}{m}", ide.display()));
        assert!(
            !missing.iter().any(|m| out.contains(m)),
            "{command}:\n{out}"
        );
        let ide = ide.display().to_string();
        assert!(
            out.lines()
                .any(|l| l.contains(&ide) && l.contains("cannot be reached")),
            "{command}:\n{out}"
        );
    }
    // A workspace folder behind a file: not "does not exist" either.
    let mut c = sb.command();
    c.args(["serve", "--no-lsp", "--workspace"])
        .arg(file.join("ws"));
    let out = c.stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be reached ("), "{err}");
}

/// `CLAUDE_CODE_IDE_HOST_OVERRIDE` with a port (`host.docker.internal:8080`) or a scheme is no
/// host: it was called "an IPv6 address without brackets", with a fix in brackets that is no
/// host either. A real IPv6 address without brackets still is.
#[test]
fn doctor_tells_a_host_with_a_port_from_an_ipv6_address() {
    let sb = Sandbox::new();
    for (value, said) in [
        ("host.docker.internal:8080", "is not a host"),
        ("http://localhost", "is not a host"),
        ("::1", "is an IPv6 address without brackets"),
    ] {
        let mut c = sb.command();
        c.env("CLAUDE_CODE_IDE_HOST_OVERRIDE", value).arg("doctor");
        let (_, out) = run_bounded(c);
        assert!(
            out.contains(&format!("CLAUDE_CODE_IDE_HOST_OVERRIDE={value} {said}")),
            "{value}:\n{out}"
        );
    }
}

/// claude reaches an IDE on a loopback name directly whatever the proxy variables say (its own
/// rule, read in its code): `CLAUDE_CODE_IDE_HOST_OVERRIDE=127.0.0.1` with a proxy set is no
/// problem. It was called one, and the override was said to make claude connect "to 127.0.0.1,
/// not to 127.0.0.1".
#[test]
fn doctor_takes_a_loopback_override_past_the_proxy() {
    let sb = Sandbox::new();
    let _s = Served::start(&sb, &["--no-lsp"]);
    let (code, out) = doctor(
        &sb,
        &[
            ("CLAUDE_CODE_IDE_HOST_OVERRIDE", "127.0.0.1"),
            ("HTTPS_PROXY", "http://proxy.invalid:3128"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("send its connection to the proxy"), "{out}");
    assert!(
        out.contains(
            "CLAUDE_CODE_IDE_HOST_OVERRIDE=127.0.0.1: the address claude connects to without it"
        ),
        "{out}"
    );
}

/// `CLAUDE_CODE_SSE_PORT` naming no live lock file (an old port from `serve`'s `export` line): the
/// real claude (2.1.332) still connects to the one bridge of its folder, so `doctor` says so; it
/// called it a problem and told the user to unset it, after which a plain `claude` no longer
/// connected. Naming another folder's bridge, which refuses every change here, is a problem (it
/// said "all good").
#[test]
fn doctor_on_a_port_named_in_claude_code_sse_port() {
    let sb = Sandbox::new();
    let mut here = Served::start(&sb, &["--no-lsp"]);
    let other = sb.root().join("other");
    fs::create_dir(&other).unwrap();
    let other_text = other.to_str().unwrap();
    let mut there = Served::start(&sb, &["--no-lsp", "--workspace", other_text]);
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let doctor = |port: u16| {
        let mut c = sb.command();
        c.env("CLAUDE_CODE_SSE_PORT", port.to_string())
            .arg("doctor")
            .arg(&sb.ws);
        run_bounded(c)
    };
    let (code, out) = doctor(free);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "info: CLAUDE_CODE_SSE_PORT={free} names no live lock file"
        )),
        "{out}"
    );
    assert!(!out.contains("unset CLAUDE_CODE_SSE_PORT"), "{out}");
    let (code, out) = doctor(there.port);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("which does not serve"), "{out}");
    let (code, out) = doctor(here.port);
    assert_eq!(code, 0, "{out}");
    for s in [&mut here, &mut there] {
        s.child.kill().unwrap();
        s.child.wait().unwrap();
    }
}

/// `--lock-dir` where claude does not look: `run`'s claude was given the port alone, looked for
/// the lock file in its own folder, and never connected, with no word said. Said now, before the
/// command has the terminal; not for the folder claude reads.
#[test]
fn a_lock_dir_claude_does_not_read_is_said() {
    let sb = Sandbox::new();
    let dir = sb.root().join("locks");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let probe = script(
        &sb,
        "probe",
        "test -f \"${CLAUDE_CONFIG_DIR:-$HOME/.claude}/ide/$CLAUDE_CODE_SSE_PORT.lock\" || exit 9",
    );
    let run = |lock_dir: &std::path::Path| {
        let mut c = sb.command();
        c.args(["run", "--no-lsp", "--lock-dir"])
            .arg(lock_dir)
            .arg("--")
            .arg(&probe);
        c.stdin(Stdio::null()).output().unwrap()
    };
    let out = run(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(
        err.contains(&format!(
            "warning: --lock-dir {}: claude does not read",
            dir.display()
        )),
        "{err}"
    );
    let read = sb.config.join("ide");
    let out = run(&read);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("warning: --lock-dir"), "{err}");
}

/// Another IDE's live lock file for the workspace (an editor open on a folder inside it) is said
/// at the start: a claude started there counts both and connects to neither by itself. Not said
/// for one whose process is gone, nor for one of another folder.
#[test]
fn another_ides_lock_file_for_the_workspace_is_said() {
    let sb = Sandbox::new();
    let sub = sb.ws.join("sub");
    fs::create_dir(&sub).unwrap();
    let dir = sb.lock_dir();
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    // The editor's process, started before its lock file was written (as an editor's is).
    let mut editor = Command::new("sleep").arg("60").spawn().unwrap();
    let write = |port: u16, pid: u32, folder: &std::path::Path| {
        let lock = json!({
            "pid": pid, "workspaceFolders": [folder], "ideName": "Visual Studio Code",
            "transport": "ws", "runningInWindows": false, "authToken": "t".repeat(36),
        });
        let p = dir.join(format!("{port}.lock"));
        fs::write(&p, lock.to_string()).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    };
    let run = || {
        let mut c = sb.command();
        c.args(["run", "--no-lsp", "--", "true"]);
        let out = c.stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    write(45678, editor.id(), &sub);
    let err = run();
    assert!(
        err.contains(&format!(
            "warning: Visual Studio Code (pid {}, port 45678) serves {} too: a claude started in \
             {} connects to neither by itself",
            editor.id(),
            sub.display(),
            sub.display()
        )),
        "{err}"
    );
    // Of another folder: nothing said.
    fs::remove_file(dir.join("45678.lock")).unwrap();
    write(45679, editor.id(), &sb.home);
    let err = run();
    assert!(!err.contains("connects to neither"), "{err}");
    // Its editor gone: claude skips (and deletes) it; nothing said.
    editor.kill().unwrap();
    editor.wait().unwrap();
    write(45680, editor.id(), &sb.ws);
    let err = run();
    assert!(!err.contains("connects to neither"), "{err}");
}
