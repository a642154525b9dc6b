//! The `ask` prompt on a pseudo-terminal (util-linux `script`): accept, reject, edit, a queue, and
//! a prompt withdrawn by claude's close_tab.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn has_script() -> bool {
    Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A sandbox, when `script` is there to give the bridge a terminal.
fn terminal_sandbox() -> Option<Sandbox> {
    if !has_script() {
        claude_ide_bridge_testsupport::skip::tool_missing(
            "util-linux `script` is not installed (apt-get install -y bsdutils)",
        );
        return None;
    }
    Some(Sandbox::new())
}

#[test]
fn ask_on_a_terminal() {
    if !has_script() {
        claude_ide_bridge_testsupport::skip::tool_missing(
            "util-linux `script` is not installed (apt-get install -y bsdutils)",
        );
        return;
    }
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        fs::write(sb.ws.join("a.txt"), "one\ntwo\n").unwrap();
        let editor = sb.root().join("editor.sh");
        fs::write(
            &editor,
            "#!/bin/sh\nprintf 'edited by editor\\n' > \"$1\"\n",
        )
        .unwrap();
        fs::set_permissions(&editor, fs::Permissions::from_mode(0o755)).unwrap();
        let cmd = format!(
            "exec {BIN} serve --runtime {rt} --workspace {}",
            sb.ws.display()
        );
        let (mut child, mut tty, screen) = on_a_terminal(&sb, &cmd, |c| {
            c.env_remove("NO_COLOR")
                .env("EDITOR", &editor)
                .env_remove("VISUAL");
        });
        let (lock, mut cl) = connect_served(&sb, &screen);
        let file = sb.ws.join("a.txt");
        let mut type_line = |s: &str| {
            tty.write_all(s.as_bytes()).unwrap();
            tty.flush().unwrap();
        };

        // Accept.
        let id = cl.call_tool("openDiff", open_diff_args(&file, "one\nthree\n", "T1"));
        screen.wait_for("[a]ccept / [r]eject / [e]dit");
        assert!(screen.text().contains("+three"), "{}", screen.text());
        assert!(screen.text().contains("\x1b["), "coloured on a TTY");
        type_line("a\n");
        assert_eq!(texts(&cl.response(id)), ["FILE_SAVED", "one\nthree\n"]);
        // The client writes FILE_SAVED contents itself: the file is untouched by the bridge.
        let original = fs::read_to_string(&file).unwrap();
        assert_ne!(original, "one\nthree\n");
        screen.wait_for("diff accepted: ");

        // Reject.
        let id = cl.call_tool("openDiff", open_diff_args(&file, "nope\n", "T2"));
        wait_count(&screen, "[a]ccept / [r]eject / [e]dit", 2);
        type_line("r\n");
        assert_eq!(texts(&cl.response(id)), ["DIFF_REJECTED", "T2"]);
        assert_eq!(fs::read_to_string(&file).unwrap(), original);

        // Edit: $EDITOR rewrites the temporary copy; its contents are saved.
        let id = cl.call_tool("openDiff", open_diff_args(&file, "proposed\n", "T3"));
        wait_count(&screen, "[a]ccept / [r]eject / [e]dit", 3);
        type_line("e\n");
        assert_eq!(
            texts(&cl.response(id)),
            ["FILE_SAVED", "edited by editor\n"]
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), original);

        // Two at once: queued; close_tab of the shown one withdraws its prompt, the next shows.
        let new_file = sb.ws.join("new.txt");
        let id4 = cl.call_tool("openDiff", open_diff_args(&file, "four\n", "T4"));
        wait_count(&screen, "[a]ccept / [r]eject / [e]dit", 4);
        let id5 = cl.call_tool("openDiff", open_diff_args(&new_file, "brand new\n", "T5"));
        screen.wait_for("diff queued: ");
        let close = cl.call_tool("close_tab", json!({"tab_name": "T4"}));
        let got = responses(&mut cl, &[id4, close]);
        assert_eq!(texts(&got[&id4]), ["DIFF_REJECTED", "T4"]);
        screen.wait_for("diff withdrawn (tab_closed)");
        wait_shown(&screen, 5);
        assert!(
            screen.text().contains("--- /dev/null"),
            "a new file shows whole"
        );
        type_line("a\n");
        assert_eq!(texts(&cl.response(id5)), ["FILE_SAVED", "brand new\n"]);
        assert!(!new_file.exists());

        // Ctrl-C on the terminal stops the bridge; the lock goes, and the bridge ends as Ctrl-C
        // ends a program (a shell running it in a script stops there).
        type_line("\x03");
        let status = exit_within(&mut child, WAIT, &|| screen.text());
        assert_eq!(interrupt_of(status), Some(2), "{}", screen.text());
        assert!(!lock.exists());
    }
}

/// While `$EDITOR` is open on a proposed change, the bridge answers other calls; the change is
/// accepted as edited when the editor exits.
#[test]
fn other_calls_are_answered_while_the_editor_is_open() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let file = sb.ws.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let (started, done) = (sb.root().join("started"), sb.root().join("done"));
    // The editor waits (at most 30 s) for the test to say it is done.
    let body = slow_editor(&started, &done, "slowly edited");
    // The editor tied to the bridge by a watcher (macOS' way; a debug build's test switch makes
    // it Linux's too), which must end with the editor while the bridge goes on.
    let tie = [("CLAUDE_IDE_BRIDGE_TEST_TIE", "watcher")];
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, &body, &tie);
    let id = cl.call_tool("openDiff", open_diff_args(&file, "proposed\n", "T"));
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    edit_and_wait(&mut tty, &screen, &started);
    let watchers = || watchers_of(bridge_pid(&sb), None);
    if cfg!(all(target_os = "linux", debug_assertions)) {
        // Started just after the editor, which may have said it started before.
        let give_up = Instant::now() + WAIT;
        while watchers().len() != 1 {
            assert!(Instant::now() < give_up, "no watcher of the editor");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The editor is open: another call is answered all the same.
    let r = call(&mut cl, "getWorkspaceFolders", json!({}));
    assert!(!done.exists());
    assert!(json_of(&r)["folders"].is_array(), "{r}");
    fs::write(&done, "").unwrap();
    assert_eq!(texts(&cl.response(id)), ["FILE_SAVED", "slowly edited\n"]);
    let give_up = Instant::now() + WAIT;
    while !watchers().is_empty() {
        assert!(Instant::now() < give_up, "the watcher outlived the editor");
        std::thread::sleep(Duration::from_millis(20));
    }
    ctrl_c(&mut child, &mut tty, &screen);
}

/// An editor that returns without writing the file (quit without saving, or `code` without
/// `--wait`) accepts nothing: the prompt asks again (before, the unedited proposal was accepted
/// as the user's edit). Nor does it the second time, on the copy kept from the first (before,
/// that copy was taken for the user's own text).
#[test]
fn an_editor_that_writes_nothing_accepts_nothing() {
    let Some((_sb, mut child, mut tty, screen, mut cl, id)) = a_diff_shown("exit 0") else {
        return;
    };
    for n in 1..=2 {
        tty.write_all(b"e\n").unwrap();
        tty.flush().unwrap();
        wait_count(&screen, "did not write the file", n);
        wait_count(&screen, "[a]ccept / [r]eject / [e]dit", n + 1);
        assert!(
            cl.recv_json(Duration::from_millis(300)).is_none(),
            "answered after edit {n}"
        );
    }
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id))[0], "DIFF_REJECTED");
    ctrl_c(&mut child, &mut tty, &screen);
}

/// `NO_COLOR` wins even on a terminal: the same prompt, without a single escape sequence.
#[test]
fn no_color_on_a_terminal() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    fs::write(sb.ws.join("a.txt"), "one\ntwo\n").unwrap();
    let cmd = format!("exec {BIN} serve --workspace {}", sb.ws.display());
    let (mut child, mut tty, screen) = on_a_terminal(&sb, &cmd, |c| {
        c.env("NO_COLOR", "1");
    });
    let (lock, mut cl) = connect_served(&sb, &screen);
    let id = cl.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.txt"), "one\nthree\n", "T1"),
    );
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    assert!(screen.text().contains("+three"), "{}", screen.text());
    assert!(
        !screen.text().contains('\x1b'),
        "no colour with NO_COLOR: {:?}",
        screen.text()
    );
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id)), ["DIFF_REJECTED", "T1"]);
    // Ctrl-C stops the bridge.
    ctrl_c(&mut child, &mut tty, &screen);
    assert!(!lock.exists());
}

/// The signal that ended the program `script` ran (which exits with 128+N for one that signal N
/// ended), if one did.
fn interrupt_of(status: std::process::ExitStatus) -> Option<i32> {
    status.code().filter(|c| *c > 128).map(|c| c - 128)
}

/// Types Ctrl-C on the terminal and waits for the bridge (and `script`) to end.
fn ctrl_c(child: &mut Terminal, tty: &mut std::process::ChildStdin, screen: &Screen) {
    tty.write_all(b"\x03").unwrap();
    tty.flush().unwrap();
    let give_up = Instant::now() + WAIT;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < give_up, "{}", screen.text());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve` on a pseudo-terminal with `$EDITOR` a shell script of `body`, asking about a proposed
/// change to `a.txt` (`one` -> `proposed`): the sandbox, the bridge, its terminal's input, what it
/// shows, the client and the call's id. `None` without a terminal to run it on.
fn a_diff_shown(
    body: &str,
) -> Option<(
    Sandbox,
    Terminal,
    std::process::ChildStdin,
    Screen,
    client::Client,
    u64,
)> {
    let sb = terminal_sandbox()?;
    let file = sb.ws.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let (child, tty, screen, mut cl) = serve_with_editor(&sb, body, &[]);
    let id = cl.call_tool("openDiff", open_diff_args(&file, "proposed\n", "T"));
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    Some((sb, child, tty, screen, cl, id))
}

/// `serve` on a pseudo-terminal with `$EDITOR` a shell script of `body`, and a client connected
/// to it: the bridge, its terminal's input, what it shows, the client.
fn serve_with_editor(
    sb: &Sandbox,
    body: &str,
    env: &[(&str, &str)],
) -> (Terminal, std::process::ChildStdin, Screen, client::Client) {
    let editor = sb.root().join("editor.sh");
    fs::write(&editor, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&editor, fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = format!("exec {BIN} serve --workspace {}", sb.ws.display());
    let (child, tty, screen) = on_a_terminal(sb, &cmd, |c| {
        c.env("EDITOR", &editor)
            .env_remove("VISUAL")
            .envs(env.iter().copied());
    });
    let (_lock, cl) = connect_served(sb, &screen);
    (child, tty, screen, cl)
}

/// Runs `cmd` on a pseudo-terminal (`script`) with the sandbox's environment, `TERM=xterm`, and
/// whatever `env` adds: the child, the terminal's input, and what it shows.
fn on_a_terminal(
    sb: &Sandbox,
    cmd: &str,
    env: impl FnOnce(&mut Command),
) -> (Terminal, std::process::ChildStdin, Screen) {
    let c = sb.command();
    let mut script = Command::new("script");
    script
        .args(["-qefc", cmd, "/dev/null"])
        .envs(
            c.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .env("TERM", "xterm")
        .current_dir(&sb.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    env(&mut script);
    let mut child = script.spawn().unwrap();
    let tty = child.stdin.take().unwrap();
    let screen = Screen::collect(child.stdout.take().unwrap());
    (Terminal(child), tty, screen)
}

/// `script` running the bridge on its terminal, killed when dropped: the terminal then hangs up
/// and the bridge, given SIGHUP, stops. A test that fails half-way leaves nothing running.
struct Terminal(std::process::Child);

impl std::ops::Deref for Terminal {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Terminal {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The pid of the bridge serving `sb`, from its one lock file.
fn bridge_pid(sb: &Sandbox) -> u32 {
    let lock = fs::read_dir(sb.lock_dir())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_str(&fs::read_to_string(lock.path()).unwrap()).unwrap();
    v["pid"].as_u64().unwrap() as u32
}

/// Once the bridge on `screen` says it asks on this terminal: its lock file and an initialized
/// client connected with the token from it.
fn connect_served(sb: &Sandbox, screen: &Screen) -> (std::path::PathBuf, client::Client) {
    screen.wait_for("diffs: ask on this terminal");
    let text = screen.text();
    let port: u16 = text
        .split("export CLAUDE_CODE_SSE_PORT=")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let lock = sb.lock_dir().join(format!("{port}.lock"));
    let token = serde_json::from_str::<Value>(&fs::read_to_string(&lock).unwrap()).unwrap()
        ["authToken"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, cl) = client::connect(port, Some(&token));
    let mut cl = cl.unwrap();
    cl.init();
    (lock, cl)
}

#[derive(Clone, Default)]
struct Screen(Arc<Mutex<String>>);

impl Screen {
    fn collect(mut r: impl Read + Send + 'static) -> Screen {
        let s = Screen::default();
        let s2 = s.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s2.0.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        s
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    fn wait_for(&self, needle: &str) {
        wait_count(self, needle, 1)
    }
}

fn wait_count(screen: &Screen, needle: &str, n: usize) {
    let give_up = Instant::now() + WAIT;
    while screen.text().matches(needle).count() < n {
        assert!(Instant::now() < give_up, "{}", screen.text());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A line typed before a change is shown is not its answer, and an edit the editor fails on is
/// kept: the next `e` opens it again, and what is accepted holds it.
#[test]
fn a_stray_line_decides_nothing_and_a_failed_edit_is_kept() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let file = sb.ws.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    // The first run edits, then fails; the second leaves the file as it finds it.
    let mark = sb.root().join("edited-once");
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(
        &sb,
        &format!(
            "if [ ! -e '{0}' ]; then touch '{0}'; printf 'my edit\\n' >> \"$1\"; exit 1; fi",
            mark.display()
        ),
        &[],
    );
    let mut type_line = |s: &str| {
        tty.write_all(s.as_bytes()).unwrap();
        tty.flush().unwrap();
    };
    // Typed while no change is shown, and left waiting on the terminal.
    type_line("a\n");
    std::thread::sleep(Duration::from_millis(300));
    let id = cl.call_tool("openDiff", open_diff_args(&file, "proposed\n", "T"));
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    assert!(
        cl.recv_until(Duration::from_millis(500), |v| v["id"] == json!(id))
            .is_none(),
        "answered by a line typed before it was shown"
    );
    type_line("e\n");
    screen.wait_for("your edit is kept in");
    wait_count(&screen, "[a]ccept / [r]eject / [e]dit", 2);
    type_line("e\n");
    assert_eq!(
        texts(&cl.response(id)),
        ["FILE_SAVED", "proposed\nmy edit\n"]
    );
    ctrl_c(&mut child, &mut tty, &screen);
}

/// The file of a change asked about is swapped, while the user decides, for a link to another
/// file of the workspace: the accept is refused, and claude told why. It was accepted, and claude
/// wrote through the link, over a file nobody was shown.
#[test]
fn an_accept_is_refused_when_the_file_shown_became_a_link_elsewhere() {
    let Some((sb, mut child, mut tty, screen, mut cl, id)) = a_diff_shown("exit 1") else {
        return;
    };
    let file = sb.ws.join("a.txt");
    let other = sb.ws.join("precious.txt");
    fs::write(&other, "mine\n").unwrap();
    fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&other, &file).unwrap();
    tty.write_all(b"a\n").unwrap();
    tty.flush().unwrap();
    let r = cl.response(id);
    let said = texts(&r).join(" ");
    assert!(
        said.contains("precious.txt, not to ") && said.contains("a.txt, the file shown"),
        "{r}"
    );
    screen.wait_for("diff refused");
    ctrl_c(&mut child, &mut tty, &screen);
}

/// `serve &`: in the background of its terminal (job control), a change is not asked there but
/// left for claude's own prompt, said so, and the bridge goes on answering. Before, the
/// question's flush of the terminal stopped the whole bridge (SIGTTOU: `[1]+ Stopped`), and every
/// call of claude's waited for good.
#[test]
fn a_bridge_in_the_background_of_its_terminal_leaves_changes_to_claude() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    // `set -m`: the shell gives the job a process group of its own, not the terminal's.
    let screen = in_the_background(
        &sb,
        "set -m; {BIN} serve --workspace {WS} & wait",
        |_| {},
        |_, _, _| {},
    );
    assert!(!screen.contains("[a]ccept / [r]eject / [e]dit"), "{screen}");
}

/// Sent to the background while `$EDITOR` ran on a change (Ctrl-Z, then `bg`), which then ends
/// without a usable edit: the change is left for claude's own prompt. Before, putting the
/// terminal back and asking again (its flush) stopped the whole bridge (SIGTTOU), and a stop
/// then hung too.
#[test]
fn an_editor_ending_in_the_background_does_not_stop_the_bridge() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (started, done) = (sb.root().join("editing"), sb.root().join("done"));
    let editor = sb.root().join("editor.sh");
    fs::write(
        &editor,
        format!(
            "#!/bin/sh\ntouch {0}\nwhile [ ! -e {1} ]; do sleep 0.05; done\nexit 1\n",
            started.display(),
            done.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&editor, fs::Permissions::from_mode(0o755)).unwrap();
    let screen = in_the_background(
        &sb,
        "set -m; {BIN} serve --workspace {WS}; bg; wait",
        |c| {
            c.env("EDITOR", &editor).env_remove("VISUAL");
        },
        |tty, screen, pid| {
            screen.wait_for("[a]ccept / [r]eject / [e]dit");
            tty.write_all(b"e\n").unwrap();
            tty.flush().unwrap();
            let give_up = Instant::now() + WAIT;
            while !started.exists() {
                assert!(Instant::now() < give_up, "the editor did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
            tty.write_all(b"\x1a").unwrap();
            tty.flush().unwrap();
            // Stopped, then continued in the background by the shell's `bg` (maybe too fast to
            // see it stopped): running, and no longer the terminal's foreground group.
            let in_background = || {
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let f: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
                f.len() > 5 && f[0] != "T" && f[2] != f[5]
            };
            while !in_background() {
                assert!(Instant::now() < give_up, "not sent to the background");
                std::thread::sleep(Duration::from_millis(20));
            }
            fs::write(&done, "").unwrap();
        },
    );
    // Not offered again here: the change is claude's prompt's now.
    assert!(!screen.contains("e opens it again"), "{screen}");
}

/// Sent to the background while a question waits for its answer (Ctrl-Z, then `bg`): the change
/// shown is left for claude's own prompt, said so, and the bridge goes on answering. Before, the
/// question's read of the terminal, made again as the bridge continued, stopped it once more
/// (SIGTTIN), and every call of claude's waited until `fg`.
#[test]
fn a_bridge_sent_to_the_background_during_a_question_leaves_it_to_claude() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    in_the_background(
        &sb,
        "set -m; {BIN} serve --workspace {WS}; bg; wait",
        |_| {},
        |tty, screen, _| {
            screen.wait_for("[a]ccept / [r]eject / [e]dit");
            // Ctrl-Z: the terminal stops the job, and the shell continues it in the background.
            tty.write_all(b"\x1a").unwrap();
            tty.flush().unwrap();
        },
    );
}

/// A bridge run by `cmd` (`{BIN}`, `{WS}` filled in) on a terminal with what `env` adds, in the
/// background of it by the time `to_background` returns (given the terminal, the screen and the
/// bridge's pid, an `openDiff` waiting): the change is left for claude's own prompt, the bridge
/// answers calls and stops on a signal. Returns what the terminal showed.
fn in_the_background(
    sb: &Sandbox,
    cmd: &str,
    env: impl FnOnce(&mut Command),
    to_background: impl FnOnce(&mut std::process::ChildStdin, &Screen, u32),
) -> String {
    let file = sb.ws.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let cmd = cmd
        .replace("{BIN}", BIN)
        .replace("{WS}", &sb.ws.display().to_string());
    let (_child, mut tty, screen) = on_a_terminal(sb, &cmd, env);
    let (lock, mut cl) = connect_served(sb, &screen);
    // A job the terminal's hang-up does not reach (not its foreground): ended here, whatever
    // the test's outcome.
    let pid = serde_json::from_str::<Value>(&fs::read_to_string(&lock).unwrap()).unwrap()["pid"]
        .as_u64()
        .unwrap() as u32;
    struct Ended(u32);
    impl Drop for Ended {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
    let _ended = Ended(pid);
    let id = cl.call_tool("openDiff", open_diff_args(&file, "two\n", "T"));
    to_background(&mut tty, &screen, pid);
    screen.wait_for("diff pending (decide in claude; this bridge runs in the background");
    // Still answering, the change still pending (claude's prompt decides it).
    let r = call(&mut cl, "getWorkspaceFolders", json!({}));
    assert_eq!(json_of(&r)["success"], true, "{r}");
    assert!(cl
        .recv_until(Duration::from_millis(300), |v| v["id"] == json!(id))
        .is_none());
    let close = cl.call_tool("close_tab", json!({"tab_name": "T"}));
    let answers = responses(&mut cl, &[id, close]);
    assert_eq!(texts(&answers[&id])[0], "DIFF_REJECTED");
    assert_eq!(fs::read_to_string(&file).unwrap(), "one\n");
    // It stops on a signal, as in the foreground.
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let give_up = Instant::now() + WAIT;
    while running(pid) {
        assert!(Instant::now() < give_up, "the bridge did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    screen.text()
}

/// An edit kept after the editor failed, then the change withdrawn (claude closed its tab) before
/// the user opened it again: the edit stays where the terminal said, and the terminal says so
/// again. Before, the copy went with the change, after "your edit is kept in" named it.
#[test]
fn a_kept_edit_outlives_its_change_withdrawn() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let file = sb.ws.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let (mut child, mut tty, screen, mut cl) =
        serve_with_editor(&sb, "printf 'my edit\\n' >> \"$1\"; exit 1", &[]);
    let id = cl.call_tool("openDiff", open_diff_args(&file, "proposed\n", "T"));
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    tty.write_all(b"e\n").unwrap();
    tty.flush().unwrap();
    screen.wait_for("your edit is kept in");
    let close = cl.call_tool("close_tab", json!({"tab_name": "T"}));
    let answers = responses(&mut cl, &[id, close]);
    assert_eq!(texts(&answers[&id])[0], "DIFF_REJECTED");
    screen.wait_for("your edit was not used; it is kept in ");
    let text = screen.text();
    let after = text
        .split("your edit was not used; it is kept in ")
        .nth(1)
        .unwrap();
    let path = after.lines().next().unwrap().trim().to_owned();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "proposed\nmy edit\n",
        "{path}"
    );
    fs::remove_file(&path).unwrap();
    ctrl_c(&mut child, &mut tty, &screen);
}

/// A change withdrawn while `$EDITOR` has it open: once the editor ends, the user is told that
/// the edit was not used (it was dropped without a word, and the next change's question could be
/// taken for this one's).
#[test]
fn a_change_withdrawn_during_its_edit_is_said_so() {
    let Some(mut e) = editing_slowly() else {
        return;
    };
    let close = e.cl.call_tool("close_tab", json!({"tab_name": "T"}));
    let answers = responses(&mut e.cl, &[e.id, close]);
    assert_eq!(texts(&answers[&close]), ["TAB_CLOSED"]);
    assert_eq!(texts(&answers[&e.id])[0], "DIFF_REJECTED");
    fs::write(&e.done, "").unwrap();
    // What the user wrote is kept where the line says (it was deleted with the temporary file).
    e.screen.wait_for("your edit was not used; it is kept in ");
    let text = e.screen.text();
    let after = text.split("it is kept in ").nth(1).unwrap();
    let path = after.lines().next().unwrap().trim().to_owned();
    assert_eq!(fs::read_to_string(&path).unwrap(), "edited\n", "{path}");
    fs::remove_file(&path).unwrap();
    ctrl_c(&mut e.child, &mut e.tty, &e.screen);
}

/// Ctrl-C while `$EDITOR` has the terminal ends the editor, not the bridge (the editor is in the
/// bridge's process group, so both get the SIGINT): the question comes back, and still decides.
#[test]
fn ctrl_c_in_the_editor_ends_the_editor_not_the_bridge() {
    let Some(mut e) = editing_slowly() else {
        return;
    };
    e.tty.write_all(b"\x03").unwrap();
    e.tty.flush().unwrap();
    e.screen.wait_for("the editor exited with");
    wait_count(&e.screen, "[a]ccept / [r]eject / [e]dit", 2);
    assert!(e.child.try_wait().unwrap().is_none(), "{}", e.screen.text());
    e.tty.write_all(b"r\n").unwrap();
    e.tty.flush().unwrap();
    assert_eq!(texts(&e.cl.response(e.id)), ["DIFF_REJECTED", "T"]);
    ctrl_c(&mut e.child, &mut e.tty, &e.screen);
}

/// An editor killed in raw mode (no echo, Enter sending `\r` unmapped, no Ctrl-C) leaves the
/// terminal as it found it: the question comes back and Enter answers it (it waited for a `\n`
/// that never came).
#[test]
fn an_editor_killed_in_raw_mode_leaves_the_terminal_usable() {
    let Some((_sb, mut child, mut tty, screen, mut cl, id)) =
        a_diff_shown("stty raw -echo\nprintf '\\033[?1049h\\033[?25l'\nkill -9 $$")
    else {
        return;
    };
    tty.write_all(b"e\n").unwrap();
    tty.flush().unwrap();
    screen.wait_for("the editor exited with");
    wait_count(&screen, "[a]ccept / [r]eject / [e]dit", 2);
    // And the modes such a program (claude) sets and undoes as it exits: mouse, focus and
    // colour-scheme reports, bracketed paste, line wrapping, the kitty keyboard protocol.
    assert!(
        screen.text().contains(
            "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1004l\
             \x1b[?2031l\x1b[?2004l\x1b[?7h\x1b[<u"
        ),
        "screen, cursor and modes given back"
    );
    // Enter as a terminal sends it.
    tty.write_all(b"r\r").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id)), ["DIFF_REJECTED", "T"]);
    ctrl_c(&mut child, &mut tty, &screen);
}

/// Ctrl-C ending an editor that dies at once: the editor's end and the bridge's SIGINT race, and
/// the SIGINT handled second stopped the bridge (once in about seven rounds). Ten rounds, then
/// the question still decides.
#[test]
fn ctrl_c_ending_the_editor_at_once_never_stops_the_bridge() {
    let Some((_sb, mut child, mut tty, screen, mut cl, id)) = a_diff_shown("exec sleep 30") else {
        return;
    };
    for round in 1..=10 {
        tty.write_all(b"e\n").unwrap();
        tty.flush().unwrap();
        std::thread::sleep(Duration::from_millis(150));
        tty.write_all(b"\x03").unwrap();
        tty.flush().unwrap();
        wait_count(&screen, "the editor exited with", round);
        wait_count(&screen, "[a]ccept / [r]eject / [e]dit", round + 1);
        assert!(
            child.try_wait().unwrap().is_none(),
            "stopped at round {round}: {}",
            screen.text()
        );
    }
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id)), ["DIFF_REJECTED", "T"]);
    ctrl_c(&mut child, &mut tty, &screen);
}

/// Two proposed changes, to `a.txt` (tab `T1`, shown) and `b.txt` (`T2`, queued): their ids.
fn two_diffs(sb: &Sandbox, cl: &mut client::Client, screen: &Screen) -> (u64, u64) {
    let id1 = cl.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.txt"), "one\n", "T1"),
    );
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    let id2 = cl.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("b.txt"), "two\n", "T2"),
    );
    screen.wait_for("diff queued: ");
    (id1, id2)
}

/// Claude closes the shown change's tab and the next change is shown: what was answered for the
/// first one decides nothing for the second, and the second is decided by its own answer.
fn withdrawn_then_next_decided_by_its_own(
    tty: &mut std::process::ChildStdin,
    cl: &mut client::Client,
    screen: &Screen,
    (id1, id2, close): (u64, u64, u64),
    said: &str,
) {
    let got = responses(cl, &[id1, close]);
    assert_eq!(texts(&got[&id1]), ["DIFF_REJECTED", "T1"]);
    screen.wait_for(said);
    assert!(
        cl.recv_until(Duration::from_millis(500), |v| v["id"] == json!(id2))
            .is_none(),
        "answered by a line meant for the withdrawn change: {}",
        screen.text()
    );
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id2)), ["DIFF_REJECTED", "T2"]);
}

/// The terminal closed (Ctrl-D) with one change shown and one queued: both are left for claude's
/// own prompt, and a change withdrawn afterwards does not bring the queued one back with a
/// question nobody can answer.
#[test]
fn a_terminal_closed_leaves_every_waiting_change_to_claude() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    let (id1, id2) = two_diffs(&sb, &mut cl, &screen);
    tty.write_all(b"\x04").unwrap();
    tty.flush().unwrap();
    screen.wait_for("stdin ended (Ctrl-D)");
    screen.wait_for("left for claude's prompt: ");
    let text = screen.text();
    assert!(
        text.contains(&format!(
            "left for claude's prompt: {}",
            sb.ws.join("b.txt").display()
        )),
        "{text}"
    );
    let close = cl.call_tool("close_tab", json!({"tab_name": "T1"}));
    let got = responses(&mut cl, &[id1, close]);
    assert_eq!(texts(&got[&id1]), ["DIFF_REJECTED", "T1"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        screen.text().matches("claude proposes a change: ").count(),
        1,
        "asked again after the terminal closed: {}",
        screen.text()
    );
    assert!(
        cl.recv_until(Duration::from_millis(300), |v| v["id"] == json!(id2))
            .is_none(),
        "the queued change is claude's to decide"
    );
    let close2 = cl.call_tool("close_tab", json!({"tab_name": "T2"}));
    let got = responses(&mut cl, &[id2, close2]);
    assert_eq!(texts(&got[&id2]), ["DIFF_REJECTED", "T2"]);
    ctrl_c(&mut child, &mut tty, &screen);
}

/// An answer being typed as the shown change is withdrawn (claude closed its tab) is dropped
/// with the question: ended after the next change is shown, it does not answer that one.
#[test]
fn an_answer_begun_for_a_withdrawn_change_is_dropped() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    let (id1, id2) = two_diffs(&sb, &mut cl, &screen);
    tty.write_all(b"a").unwrap();
    tty.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let close = cl.call_tool("close_tab", json!({"tab_name": "T1"}));
    wait_shown(&screen, 2);
    tty.write_all(b"\n").unwrap();
    tty.flush().unwrap();
    let ids = (id1, id2, close);
    withdrawn_then_next_decided_by_its_own(&mut tty, &mut cl, &screen, ids, "type a, r or e");
    ctrl_c(&mut child, &mut tty, &screen);
}

/// A line ended for the shown change just as claude withdrew it, but taken by the bridge only
/// after the next change is shown, does not answer that one. The bridge is held meanwhile by
/// its wire log, a pipe the test stops reading.
#[test]
fn an_answer_read_for_a_withdrawn_change_decides_nothing() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let wire = HeldWireLog::new(&sb);
    let cmd = format!(
        "exec {BIN} serve --wire-log {} --workspace {}",
        wire.path.display(),
        sb.ws.display()
    );
    let (mut child, mut tty, screen) = on_a_terminal(&sb, &cmd, |c| {
        c.env("EDITOR", "false").env_remove("VISUAL");
    });
    let (_lock, mut cl) = connect_served(&sb, &screen);
    let (id1, id2) = two_diffs(&sb, &mut cl, &screen);
    wire.hold(&mut cl);
    // Claude closes the tab, then the line is typed and read: both wait for the host.
    let close = cl.call_tool("close_tab", json!({"tab_name": "T1"}));
    std::thread::sleep(Duration::from_millis(300));
    tty.write_all(b"a\n").unwrap();
    tty.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    wire.release();
    let ids = (id1, id2, close);
    let said = "typed before this change was shown";
    withdrawn_then_next_decided_by_its_own(&mut tty, &mut cl, &screen, ids, said);
    ctrl_c(&mut child, &mut tty, &screen);
}

/// A proposed change shown and `e` answered: the editor has it open until `done` is written,
/// then writes `edited` into it.
struct Editing {
    _sandboxes: (Sandbox, Sandbox),
    child: Terminal,
    tty: std::process::ChildStdin,
    screen: Screen,
    cl: client::Client,
    id: u64,
    done: std::path::PathBuf,
}

fn editing_slowly() -> Option<Editing> {
    let sb = terminal_sandbox()?;
    let (started, done) = (sb.root().join("started"), sb.root().join("done"));
    let body = slow_editor(&started, &done, "edited");
    let (sb2, child, mut tty, screen, cl, id) = a_diff_shown(&body)?;
    edit_and_wait(&mut tty, &screen, &started);
    Some(Editing {
        _sandboxes: (sb, sb2),
        child,
        tty,
        screen,
        cl,
        id,
        done,
    })
}

/// An `$EDITOR` script that says it `started` (a file), then waits (at most 30 s) for `done`,
/// then writes `text` into the file it edits.
fn slow_editor(started: &std::path::Path, done: &std::path::Path, text: &str) -> String {
    format!(
        "touch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); \
         done\nprintf '{text}\\n' > \"$1\"",
        started.display(),
        done.display()
    )
}

/// Answers `e` at the prompt and waits until the editor started.
fn edit_and_wait(tty: &mut std::process::ChildStdin, screen: &Screen, started: &std::path::Path) {
    tty.write_all(b"e\n").unwrap();
    tty.flush().unwrap();
    let give_up = Instant::now() + WAIT;
    while !started.exists() {
        assert!(Instant::now() < give_up, "{}", screen.text());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A byte that is not UTF-8 typed at the prompt (a terminal in another encoding) is an answer
/// like any other unknown one: the question is asked again, and the next line still decides.
#[test]
fn a_byte_that_is_not_utf8_is_asked_again() {
    let Some((sb, mut child, mut tty, screen, mut cl, id)) = a_diff_shown("exit 0") else {
        return;
    };
    tty.write_all(b"\xe9t\xe9\n").unwrap();
    tty.flush().unwrap();
    screen.wait_for("type a, r or e, then Enter");
    wait_count(&screen, "[a]ccept / [r]eject / [e]dit", 2);
    assert!(
        cl.recv_until(Duration::from_millis(300), |v| v["id"] == json!(id))
            .is_none(),
        "answered by a line that said nothing"
    );
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id)), ["DIFF_REJECTED", "T"]);
    assert_eq!(fs::read_to_string(sb.ws.join("a.txt")).unwrap(), "one\n");
    ctrl_c(&mut child, &mut tty, &screen);
}

/// The bridge stopped alone (`kill PID`: SIGTERM reaches the bridge, not its process group) while
/// `$EDITOR` has a change open: the editor is ended too, by SIGTERM, or by SIGKILL when it ignores
/// that (it stayed on the terminal, fighting the shell for it), and what the user wrote is kept
/// where the terminal says. The bridge killed (SIGKILL): on Linux the editor ends too, by the
/// SIGTERM the kernel sends at its parent's end.
#[test]
fn a_bridge_stopped_alone_ends_its_editor_and_keeps_the_edit() {
    // The editor's command quoted: run by `sh`, which must `exec` it (dash ended alone).
    let mut rounds = vec![
        (false, false, "TERM", "launcher"),
        (true, false, "TERM", "launcher"),
        (false, true, "TERM", "launcher"),
    ];
    if cfg!(target_os = "linux") {
        rounds.extend([
            (false, false, "KILL", "launcher"),
            (false, true, "KILL", "launcher"),
        ]);
    }
    // The watcher (macOS' way of tying the editor; a debug build's switch makes it Linux's).
    if cfg!(all(target_os = "linux", debug_assertions)) {
        rounds.extend([
            (false, false, "KILL", "watcher"),
            (true, true, "TERM", "watcher"),
        ]);
    }
    for (ignores_term, quoted, signal, tie) in rounds {
        let Some(sb) = terminal_sandbox() else {
            return;
        };
        let pid_file = sb.root().join("editor.pid");
        let trap = if ignores_term { "trap '' TERM\n" } else { "" };
        let body = format!(
            "{trap}printf 'mine\\n' > \"$1\"\necho $$ > '{}'\nwhile :; do sleep 0.1; done",
            pid_file.display()
        );
        let file = sb.ws.join("a.txt");
        fs::write(&file, "one\n").unwrap();
        let editor_sh = sb.root().join("editor.sh");
        fs::write(&editor_sh, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&editor_sh, fs::Permissions::from_mode(0o755)).unwrap();
        // Not the terminal's session leader, as under a shell (the leader's end would hang the
        // terminal up, and that SIGHUP would end the editor): the shell stays 10 s after it.
        let cmd = format!("{BIN} serve --workspace {}; sleep 10", sb.ws.display());
        let editor_var = match quoted {
            true => format!("'{}'", editor_sh.display()),
            false => editor_sh.display().to_string(),
        };
        // The proposal's temporary copy in the sandbox: a killed bridge leaves it.
        let (mut child, mut tty, screen) = on_a_terminal(&sb, &cmd, |c| {
            c.env("EDITOR", &editor_var)
                .env_remove("VISUAL")
                .env("TMPDIR", sb.root())
                .env("CLAUDE_IDE_BRIDGE_TEST_TIE", tie);
        });
        let (lock, mut cl) = connect_served(&sb, &screen);
        cl.call_tool("openDiff", open_diff_args(&file, "proposed\n", "T"));
        screen.wait_for("[a]ccept / [r]eject / [e]dit");
        tty.write_all(b"e\n").unwrap();
        tty.flush().unwrap();
        let give_up = Instant::now() + WAIT;
        let editor = loop {
            if let Some(pid) = fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                break pid;
            }
            assert!(Instant::now() < give_up, "{}", screen.text());
            std::thread::sleep(Duration::from_millis(10));
        };
        let bridge = serde_json::from_str::<Value>(&fs::read_to_string(&lock).unwrap()).unwrap()
            ["pid"]
            .as_u64()
            .unwrap() as u32;
        let killed = Command::new("kill")
            .args([&format!("-{signal}"), &bridge.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        if signal == "TERM" && ignores_term {
            // The lock file goes first: no new client finds a bridge that is stopping, though
            // it still waits 2 s for the editor to end before it kills it.
            let give_up = Instant::now() + WAIT;
            while lock.exists() {
                assert!(Instant::now() < give_up, "{}", screen.text());
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(running(editor), "the lock file outlived the editor's grace");
        }
        let give_up = Instant::now() + WAIT;
        while running(bridge) {
            assert!(Instant::now() < give_up, "{}", screen.text());
            std::thread::sleep(Duration::from_millis(20));
        }
        // The shell still holds the terminal: the editor has no SIGHUP to end it. The SIGTERM
        // comes from the kernel, or from the watcher once scheduled.
        let give_up = Instant::now() + WAIT;
        while running(editor) && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !running(editor),
            "the editor (pid {editor}, ignores SIGTERM: {ignores_term}, {editor_var}, tied by \
             the {tie}) outlived the bridge's SIG{signal}: {}",
            screen.text()
        );
        if signal == "KILL" {
            // Nothing of the bridge ran to say where the edit is: it stays in its temporary file.
            assert_eq!(fs::read_to_string(&file).unwrap(), "one\n");
            let _ = child.kill();
            let _ = child.wait();
            continue;
        }
        let text = screen.text();
        let after = text
            .split("your edit was not used; it is kept in ")
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        let path = after.lines().next().unwrap().trim().to_owned();
        assert_eq!(fs::read_to_string(&path).unwrap(), "mine\n", "{path}");
        fs::remove_file(&path).unwrap();
        // The change was not accepted.
        assert_eq!(fs::read_to_string(&file).unwrap(), "one\n");
        let _ = child.kill();
        let _ = child.wait();
        drop(tty);
    }
}

/// `run`'s command killed by the bridge (told twice to stop, the second time a second after the
/// first) while it had the terminal in raw mode, as claude has: the terminal's settings are put
/// back. Before, the shell's prompt was left without echo or line editing.
#[test]
fn a_command_run_kills_leaves_the_terminal_as_it_was() {
    killed_in_raw_mode("");
}

/// The same with the bridge's standard error sent elsewhere (`2>log`): the terminal reset (the
/// alternate screen left, the cursor shown) still reaches the terminal, through standard output.
/// It went to standard error alone, the terminal left on the alternate screen, its cursor hidden.
#[test]
fn a_command_run_kills_is_reset_on_the_terminal_when_stderr_is_not_it() {
    let Some(screen) = killed_in_raw_mode("2>/dev/null") else {
        return;
    };
    assert!(
        screen.contains("\x1b[?1049l\x1b[?25h"),
        "no reset: {screen:?}"
    );
}

/// `run` on a terminal (its standard error redirected by `redirect`), its command put in raw mode
/// and killed; what the terminal showed, checked to be back in line mode with echo.
fn killed_in_raw_mode(redirect: &str) -> Option<String> {
    let sb = terminal_sandbox()?;
    let cmd = format!(
        "{BIN} run -- sh -c \"stty raw -echo; trap '' TERM; echo raw-now; while :; do sleep 1; done\" \
         {redirect}; stty -a; echo END"
    );
    let (_child, _tty, screen) = on_a_terminal(&sb, &cmd, |_| {});
    screen.wait_for("raw-now");
    let give_up = Instant::now() + WAIT;
    let pid = loop {
        let lock = fs::read_dir(sb.lock_dir())
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| fs::read_to_string(e.ok()?.path()).ok())
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if let Some(pid) = lock.and_then(|l| l["pid"].as_u64()) {
            break pid.to_string();
        }
        assert!(Instant::now() < give_up, "no lock file");
        std::thread::sleep(Duration::from_millis(20));
    };
    let give_up = Instant::now() + WAIT;
    // Told again every second until the command is killed (the second time counts once a
    // second has passed since the bridge handled the first: a busy machine may handle it late).
    while !screen.text().contains("END") {
        assert!(Instant::now() < give_up, "the command was not killed");
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        std::thread::sleep(Duration::from_millis(1000));
    }
    let text = screen.text();
    let settings = &text[text.rfind("speed").unwrap_or(0)..];
    assert!(
        settings.contains(" icanon") && settings.contains(" echo "),
        "{settings}"
    );
    Some(text)
}

/// What the terminal showed, its escape sequences (colours) and carriage returns taken out.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: up to its final byte.
                if chars.next_if_eq(&'[').is_some() {
                    while chars.next().is_some_and(|c| !('@'..='~').contains(&c)) {}
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Waits until the `n`th change is shown and asked about (the question may be drawn again
/// under lines said while it waits: it is counted by the changes shown).
fn wait_shown(screen: &Screen, n: usize) {
    let give_up = Instant::now() + WAIT;
    loop {
        let text = screen.text();
        let asked = text
            .split("claude proposes a change: ")
            .nth(n)
            .is_some_and(|after| after.contains("[a]ccept / [r]eject / [e]dit"));
        if asked {
            return;
        }
        assert!(Instant::now() < give_up, "{text}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Changes sent back to back are shown in the order claude sent them. Each one's workspace check
/// runs on a job of its own, and they came back in any order: a reviewer saw the second shown
/// first in 3 runs of 6.
#[test]
fn changes_are_shown_in_the_order_they_were_sent() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    let files: Vec<_> = (0..8).map(|i| sb.ws.join(format!("f{i}.txt"))).collect();
    let calls: Vec<(&str, Value)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                "openDiff",
                open_diff_args(f, &format!("{i}\n"), &format!("T{i}")),
            )
        })
        .collect();
    let ids = cl.call_tools_at_once(&calls);
    for (n, id) in ids.iter().enumerate() {
        wait_shown(&screen, n + 1);
        tty.write_all(b"r\n").unwrap();
        tty.flush().unwrap();
        assert_eq!(texts(&cl.response(*id))[0], "DIFF_REJECTED");
    }
    let text = plain(&screen.text());
    let shown: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("claude proposes a change: "))
        .collect();
    let sent: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    assert_eq!(shown, sent, "{text}");
    ctrl_c(&mut child, &mut tty, &screen);
}

/// A line said while the question waits (a change queued, one withdrawn) starts on a line of its
/// own, and the question is asked again below it with the new count; before, it was written
/// onto the question's line (`[e]dit? diff queued: ...`). Ctrl-D and Ctrl-C are named as keys.
#[test]
fn lines_said_at_the_question_go_below_it() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (child, tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    let (_id1, id2) = two_diffs(&sb, &mut cl, &screen);
    wait_count(
        &screen,
        "[a]ccept / [r]eject / [e]dit (1 more waiting)? ",
        1,
    );
    let close = cl.call_tool("close_tab", json!({"tab_name": "T2"}));
    let got = responses(&mut cl, &[id2, close]);
    assert_eq!(texts(&got[&id2]), ["DIFF_REJECTED", "T2"]);
    screen.wait_for("diff withdrawn (tab_closed)");
    wait_count(&screen, "[a]ccept / [r]eject / [e]dit? ", 2);
    let text = plain(&screen.text());
    for said in ["diff queued: ", "diff withdrawn (tab_closed): "] {
        let line = text.lines().find(|l| l.contains(said)).unwrap();
        assert!(line.starts_with(said), "{line:?} in {text}");
    }
    // The question again after each line, with what waits.
    let after_queued = text.split("diff queued: ").nth(1).unwrap();
    assert!(
        after_queued.contains("\n[a]ccept / [r]eject / [e]dit (1 more waiting)? "),
        "{text}"
    );
    let after_withdrawn = text.split("diff withdrawn (tab_closed): ").nth(1).unwrap();
    assert!(
        after_withdrawn.contains("\n[a]ccept / [r]eject / [e]dit? "),
        "{text}"
    );
    // An editor that never starts: what is kept is the proposal, not an edit of the user's.
    let missing = sb.root().join("no-such-editor");
    drop((child, tty, screen, cl));
    let sb = terminal_sandbox().unwrap();
    let (mut child, mut tty, screen, mut cl) =
        serve_with_editor(&sb, "exit 0", &[("EDITOR", missing.to_str().unwrap())]);
    let id = cl.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.txt"), "proposed\n", "T"),
    );
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    tty.write_all(b"e\n").unwrap();
    tty.flush().unwrap();
    screen.wait_for("the proposal is kept in ");
    assert!(
        !screen.text().contains("your edit is kept"),
        "{}",
        screen.text()
    );
    // Ctrl-D: stdin ended, said so.
    tty.write_all(b"\x04").unwrap();
    tty.flush().unwrap();
    screen.wait_for("stdin ended (Ctrl-D): diffs are left for claude's own prompt");
    let close = cl.call_tool("close_tab", json!({"tab_name": "T"}));
    let _ = responses(&mut cl, &[id, close]);
    tty.write_all(b"\x03").unwrap();
    tty.flush().unwrap();
    let status = exit_within(&mut child, WAIT, &|| screen.text());
    assert_eq!(interrupt_of(status), Some(2), "{}", screen.text());
    screen.wait_for("Ctrl-C (SIGINT): stopping the bridge");
}

/// The file a change replaces is read when the change is shown, not when it is queued: a queued
/// change held the old file's text too (up to `--max-read-bytes` each), and showed it as it was
/// then, not as the change would now replace it.
#[test]
fn the_old_file_is_read_when_its_change_is_shown() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    fs::write(sb.ws.join("b.txt"), "before\n").unwrap();
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    let (id1, id2) = two_diffs(&sb, &mut cl, &screen);
    fs::write(sb.ws.join("b.txt"), "meanwhile\n").unwrap();
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id1))[0], "DIFF_REJECTED");
    wait_shown(&screen, 2);
    let text = plain(&screen.text());
    let second = text.split("claude proposes a change: ").nth(2).unwrap();
    assert!(second.contains("-meanwhile"), "{text}");
    assert!(!second.contains("-before"), "{text}");
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id2))[0], "DIFF_REJECTED");
    ctrl_c(&mut child, &mut tty, &screen);
}

/// The changes waiting on the terminal hold at most 64 MiB of proposals: past it, a change is
/// answered at once with a tool error saying why (claude then asks in its own prompt), and the
/// queue goes on. Before, 256 changes a connection were held, each with the old file's text.
#[test]
fn changes_past_the_bytes_held_are_refused_at_once() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    // 9 MiB each, under the 10 MiB a message may have: the 8th passes 64 MiB.
    let big = "x".repeat(9 << 20) + "\n";
    let mut ids = Vec::new();
    for i in 0..7 {
        let f = sb.ws.join(format!("big{i}.txt"));
        ids.push(cl.call_tool("openDiff", open_diff_args(&f, &big, &format!("B{i}"))));
        match i {
            0 => screen.wait_for("[a]ccept / [r]eject / [e]dit"),
            _ => wait_count(&screen, "diff queued: ", i),
        }
    }
    let past = cl.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("big7.txt"), &big, "B7"),
    );
    let answer = cl.response(past);
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    let why = texts(&answer)[0].clone();
    assert!(
        why.contains("too many proposed changes are waiting"),
        "{why}"
    );
    screen.wait_for("diff not shown (the changes waiting hold ");
    // The queue goes on: the shown one decided, the next is shown; a small change is queued.
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(ids[0]))[0], "DIFF_REJECTED");
    wait_shown(&screen, 2);
    let small = cl.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("small.txt"), "small\n", "S"),
    );
    wait_count(&screen, "diff queued: ", 7);
    assert!(
        cl.recv_until(Duration::from_millis(300), |v| v["id"] == json!(small))
            .is_none(),
        "the small change was not queued"
    );
    ctrl_c(&mut child, &mut tty, &screen);
}

/// A terminal that takes no output (a pty nobody reads; Ctrl-S does the same): the bridge's
/// lines fill it and the host waits for room, but SIGTERM still stops it, removes its lock file
/// and exits. Before, the host thread was blocked in its write to the terminal and never saw the
/// signal: only SIGKILL ended it, and the lock file stayed.
#[test]
fn sigterm_stops_a_bridge_whose_terminal_takes_no_output() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let cmd = format!("exec {BIN} serve --workspace {}", sb.ws.display());
    let c = sb.command();
    // `script`'s output is never read: once its pipe is full, it reads nothing more from the
    // terminal, whose buffer fills too.
    let mut script = Command::new("script");
    script
        .args(["-qefc", &cmd, "/dev/null"])
        .envs(
            c.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .current_dir(&sb.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Terminal(script.spawn().unwrap());
    let give_up = Instant::now() + WAIT;
    let lock = loop {
        let found = fs::read_dir(sb.lock_dir())
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok);
        if let Some(lock) = found.filter(|l| fs::metadata(l.path()).is_ok_and(|m| m.len() > 0)) {
            break lock.path();
        }
        assert!(Instant::now() < give_up, "no lock file");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(100));
    let port: u16 = lock.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let v: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    let pid = v["pid"].as_u64().unwrap();
    let (_, cl) = client::connect(port, v["authToken"].as_str());
    let mut cl = cl.unwrap();
    cl.init();
    // Changes refused at once, each saying a line of some 4 KB, until one is no longer
    // answered: the host waits on the terminal.
    let long = format!("relative/{}", "y".repeat(4000));
    let mut blocked = false;
    for _ in 0..2000 {
        let id = cl.call_tool(
            "openDiff",
            open_diff_args(std::path::Path::new(&long), "x\n", "T"),
        );
        if cl
            .recv_until(Duration::from_secs(2), |v| v["id"] == json!(id))
            .is_none()
        {
            blocked = true;
            break;
        }
    }
    assert!(blocked, "the terminal took every line");
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let give_up = Instant::now() + 3 * WAIT;
    while lock.exists() {
        assert!(
            Instant::now() < give_up,
            "SIGTERM did not stop a bridge whose terminal takes no output"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its terminal read at last, the bridge has exited.
    let screen = Screen::collect(child.stdout.take().unwrap());
    let status = exit_within(&mut child, 3 * WAIT, &|| screen.text());
    assert!(status.success(), "{}", screen.text());
}

/// Ctrl-C at the question: the stop's lines follow below it; the question is not drawn again
/// under them, with `stopped` written onto it.
#[test]
fn ctrl_c_at_the_question_ends_it() {
    let Some((_sb, mut child, mut tty, screen, _cl, _id)) = a_diff_shown("exit 1") else {
        return;
    };
    ctrl_c(&mut child, &mut tty, &screen);
    let text = plain(&screen.text());
    assert!(
        text.contains("Ctrl-C (SIGINT): stopping the bridge"),
        "{text}"
    );
    assert!(
        !text.contains("[e]dit? stopped") && !text.contains("bridge\n[a]ccept"),
        "the question was drawn again under the stop's lines:\n{text}"
    );
}

/// Output paused (Ctrl-S), the next change shown to a terminal that takes nothing: a line typed
/// then decides nothing, since the change has not reached the screen (it was accepted before: the
/// question counted as asked once its text was queued for stderr's thread).
#[test]
fn an_answer_typed_before_a_change_reached_the_screen_decides_nothing() {
    let Some(sb) = terminal_sandbox() else {
        return;
    };
    let (mut child, mut tty, screen, mut cl) = serve_with_editor(&sb, "exit 1", &[]);
    let a = sb.ws.join("a.txt");
    let b = sb.ws.join("b.txt");
    let id_a = cl.call_tool("openDiff", open_diff_args(&a, "small\n", "TA"));
    screen.wait_for("[a]ccept / [r]eject / [e]dit");
    let big: String = (0..20000)
        .map(|i| format!("line {i} of the big change\n"))
        .collect();
    let id_b = cl.call_tool("openDiff", open_diff_args(&b, &big, "TB"));
    screen.wait_for("diff queued: ");
    // Output paused, then A rejected: B is shown to a terminal that shows nothing.
    tty.write_all(b"\x13").unwrap();
    tty.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id_a))[0], "DIFF_REJECTED");
    std::thread::sleep(Duration::from_millis(500));
    tty.write_all(b"a\n").unwrap();
    tty.flush().unwrap();
    let got = cl.recv_until(Duration::from_secs(3), |v| v["id"] == json!(id_b));
    tty.write_all(b"\x11").unwrap();
    tty.flush().unwrap();
    assert!(
        got.is_none(),
        "B was decided by a line typed before its diff reached the screen: {:?}",
        got.map(|v| texts(&v)[0].clone())
    );
    // Once on the screen, B is asked, and its own answer decides it.
    screen.wait_for(&format!("claude proposes a change: {}", b.display()));
    std::thread::sleep(Duration::from_millis(300));
    tty.write_all(b"r\n").unwrap();
    tty.flush().unwrap();
    assert_eq!(texts(&cl.response(id_b))[0], "DIFF_REJECTED");
    ctrl_c(&mut child, &mut tty, &screen);
}
