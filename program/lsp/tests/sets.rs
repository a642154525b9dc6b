//! Several servers for one language, run together (a type checker beside a linter and formatter),
//! against the scripted server (`fake_lsp.py`): their diagnostics merged, each with its source, in
//! one answer and in what `on_change` is told; formatting through the one that formats; one of
//! them failing or crashing while the others answer, and the failure said; at most
//! [`MAX_SERVERS`] of them; none left running after the stop.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::table::Language;
use claude_ide_bridge_lsp::{
    Checked, DownReason, FileDiagnostics, Lsp, LspConfig, LspError, LspLog, ServerState,
    ServerTable, MAX_SERVERS,
};
use claude_ide_bridge_testsupport::procs;
use common::{script, wait_for, Waits, SLACK};

/// One scripted server: `mode`, its state in `dir`, reporting lines holding `word` with source `word`.
fn server(mode: &str, dir: &Path, word: &str) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    script(mode, dir, &[word])
}

struct Fx {
    lsp: Lsp,
    changes: Arc<Mutex<Vec<FileDiagnostics>>>,
    state: tempfile::TempDir,
    ws: tempfile::TempDir,
}

/// The language `zz` served by a set: `main` (mode, word) first, then `also`, each with its own
/// state directory named after its word.
fn set_of(main: (&str, &str), also: &[(&str, &str)], tweak: impl FnOnce(&mut LspConfig)) -> Fx {
    let waits = Waits {
        diagnostics: Duration::from_secs(5),
        start: Duration::from_secs(10),
        initialize: Duration::from_secs(5),
    };
    let servers = |state: &Path| {
        let dir = |word: &str| state.join(word);
        let mut servers = ServerTable::empty();
        servers.push(Language {
            id: "zz".into(),
            extensions: vec!["zz".into()],
            commands: vec![server(main.0, &dir(main.1), main.1)],
            also: also
                .iter()
                .map(|(mode, word)| server(mode, &dir(word), word))
                .collect(),
        });
        servers
    };
    let started = common::start(servers, LspLog::Discard, waits, tweak);
    Fx {
        lsp: started.lsp,
        changes: started.changes,
        state: started.state,
        ws: started.ws,
    }
}

impl Fx {
    fn file(&self, name: &str) -> PathBuf {
        self.ws.path().join(name)
    }

    /// The pids the server with `word` recorded, once it recorded one.
    fn pids(&self, word: &str) -> Vec<u32> {
        common::starts(&self.state.path().join(word))
            .into_iter()
            .map(|(_, pid)| pid)
            .collect()
    }

    fn formatted(&self, word: &str) -> usize {
        let path = self.state.path().join(word).join("formatted");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// The sources of the last change `on_change` was told of for `name`.
    fn last_told(&self, name: &str) -> Option<Vec<String>> {
        let uri = claude_ide_bridge::file_uri(self.file(name).to_str().unwrap());
        let changes = self.changes.lock().unwrap();
        changes
            .iter()
            .rev()
            .find(|c| c.uri == uri)
            .map(|c| sources(&c.diagnostics))
    }

    /// Stops, and checks that every process any server of the set recorded is gone.
    fn shutdown_leaves_nothing(&self, words: &[&str]) {
        let pids: Vec<u32> = words.iter().flat_map(|w| self.pids(w)).collect();
        assert!(!pids.is_empty());
        let t = Instant::now();
        self.lsp.shutdown(Duration::from_secs(1));
        assert!(
            t.elapsed() <= Duration::from_secs(3) + SLACK,
            "{:?}",
            t.elapsed()
        );
        for pid in pids {
            let gone = Instant::now() + Duration::from_secs(5);
            while procs::seen(pid).is_some_and(procs::alive) && Instant::now() < gone {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(
                !procs::seen(pid).is_some_and(procs::alive),
                "process {pid} survived shutdown"
            );
        }
        assert!(self
            .lsp
            .status()
            .iter()
            .all(|s| s.state == ServerState::Stopped));
    }
}

/// Each diagnostic's source, in order.
fn sources(d: &[claude_ide_bridge_lsp::Diagnostic]) -> Vec<String> {
    d.iter()
        .map(|d| d.source.clone().unwrap_or_default())
        .collect()
}

/// A server that gives its diagnostics no source: they take its program's file name as their
/// source (here `typecheck`, a script running the scripted server), and are told apart from the
/// other server's in the merged list. Before, they had none, and nothing told whose they were.
#[cfg(unix)]
#[test]
fn a_servers_diagnostics_without_a_source_are_named_after_it() {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("typecheck");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\nexec python3 '{}' no-source '' types\n",
            common::SCRIPT
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fx = set_of(("good", "types"), &[("good", "lint")], |config| {
        let also = config.servers.also("zz").to_vec();
        config.servers.push(Language {
            id: "zz".into(),
            extensions: vec!["zz".into()],
            commands: vec![vec![program.to_str().unwrap().to_owned()]],
            also,
        });
    });
    let checked = fx.lsp.check(
        &fx.file("a.zz"),
        "types here\nlint here\n",
        Instant::now() + Duration::from_secs(5),
    );
    assert!(checked.fresh, "{checked:?}");
    let sorted = |mut s: Vec<String>| {
        s.sort();
        s
    };
    assert_eq!(sorted(sources(&checked.diagnostics)), ["lint", "typecheck"]);
    wait_for("the merged change", Duration::from_secs(5), || {
        fx.last_told("a.zz").map(sorted) == Some(vec!["lint".into(), "typecheck".into()])
    });
}

/// Two servers, each finding its own word: one answer holds both findings, each with its
/// source; `on_change` is told the merged list (a client keeping the last list per file would
/// otherwise keep one server's); formatting goes to the last of the set that formats.
#[test]
fn a_sets_diagnostics_are_merged_and_the_last_formatter_formats() {
    let fx = set_of(("good", "types"), &[("good", "lint")], |_| {});
    let text = "types here\nlint here\nboth types lint\nfine\n";
    let t = Instant::now();
    let checked = fx.lsp.check(
        &fx.file("a.zz"),
        text,
        Instant::now() + Duration::from_secs(5),
    );
    assert!(t.elapsed() <= Duration::from_secs(5) + SLACK);
    // Merged in the order of the commands (the same for both here but their word: `lint` first).
    assert_eq!(
        sources(&checked.diagnostics),
        ["lint", "lint", "types", "types"]
    );
    let lines: Vec<u32> = checked
        .diagnostics
        .iter()
        .map(|d| d.range.start.line)
        .collect();
    assert_eq!(lines, [1, 2, 0, 2]);
    assert!(checked.fresh && checked.down.is_empty(), "{checked:?}");
    wait_for("the merged change", Duration::from_secs(5), || {
        fx.last_told("a.zz").is_some_and(|s| s.len() == 4)
    });
    // Fixed for one server only: its part goes, the other's stays, in the answer and the change.
    let checked = fx.lsp.check(
        &fx.file("a.zz"),
        "fine\nlint here\n",
        Instant::now() + Duration::from_secs(5),
    );
    assert_eq!(sources(&checked.diagnostics), ["lint"]);
    wait_for("the change without types", Duration::from_secs(5), || {
        fx.last_told("a.zz") == Some(vec!["lint".into()])
    });
    let known = fx.lsp.known();
    assert_eq!(known.len(), 1);
    assert_eq!(sources(&known[0].diagnostics), ["lint"]);
    // Both format: the one run beside the main server is asked, only it.
    let formatted = fx
        .lsp
        .format(
            &fx.file("a.zz"),
            "x  \ny\n",
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(formatted.as_deref(), Some("x\ny\n"));
    assert_eq!((fx.formatted("lint"), fx.formatted("types")), (1, 0));
    fx.shutdown_leaves_nothing(&["types", "lint"]);
}

/// The server beside the main one does not format: the main one does.
#[test]
fn formatting_goes_to_the_server_of_the_set_that_formats() {
    let fx = set_of(("good", "types"), &[("no-format", "lint")], |_| {});
    let formatted = fx
        .lsp
        .format(
            &fx.file("b.zz"),
            "x  \n",
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(formatted.as_deref(), Some("x\n"));
    assert_eq!((fx.formatted("lint"), fx.formatted("types")), (0, 1));
    fx.shutdown_leaves_nothing(&["types", "lint"]);

    // None of the set formats: no answer, as for a server without formatting.
    let fx = set_of(("no-format", "types"), &[("no-format", "lint")], |_| {});
    let deadline = Instant::now() + Duration::from_secs(5);
    assert_eq!(fx.lsp.format(&fx.file("b.zz"), "x  \n", deadline), Ok(None));
    fx.shutdown_leaves_nothing(&["types", "lint"]);

    // A cold server (3 s to start, past the deadline asked): waited for, then its answer has
    // the diagnostics wait from its start. The deadline, passed while it started, made the
    // first format of a cold typescript-language-server "no answer in time", each time.
    let fx = set_of(("slow-init", "types"), &[], |_| {});
    let deadline = Instant::now() + Duration::from_secs(1);
    let formatted = fx.lsp.format(&fx.file("b.zz"), "x  \n", deadline);
    assert_eq!(formatted, Ok(Some("x\n".to_owned())));
    fx.shutdown_leaves_nothing(&["types"]);
}

/// One server of the set crashes on every file it is given: while it is to be started again, the
/// answer is not known (the other's part in it), so that no baseline lacks its part, which the
/// client would take as new once it is back; once given up on, the other answers, fresh; each
/// answer says whose diagnostics are missing and why; formatting, which only the crashed one
/// might have done, is an error naming it rather than a silent "no formatter".
#[test]
fn one_server_of_a_set_crashing_leaves_the_others_answering_and_is_said() {
    let fx = set_of(
        ("no-format", "types"),
        &[("crash-after-open", "lint")],
        |c| {
            c.limits.max_restarts = 1;
        },
    );
    let text = "types here\nlint here\n";
    let mut answers = Vec::new();
    // Restarted once after its backoff (1 s), then given up: about 1.5 s; 30 questions at most.
    while answers.len() < 30 && !answers.last().is_some_and(|c: &Checked| c.fresh) {
        let t = Instant::now();
        let checked = fx.lsp.check(
            &fx.file("c.zz"),
            text,
            Instant::now() + Duration::from_secs(5),
        );
        assert!(
            t.elapsed() <= Duration::from_secs(5) + SLACK,
            "{:?}",
            t.elapsed()
        );
        assert_eq!(sources(&checked.diagnostics), ["types"], "{checked:?}");
        answers.push(checked);
        std::thread::sleep(Duration::from_millis(300));
    }
    let (last, before) = answers.split_last().unwrap();
    assert!(last.fresh, "never given up: {answers:?}");
    assert!(
        !before.is_empty(),
        "not waited for while restarted: {answers:?}"
    );
    // Said each time: the crashed server by its command, and why.
    for checked in &answers {
        assert_eq!(checked.down.len(), 1, "{checked:?}");
        assert!(
            checked.down[0]
                .server
                .contains("fake_lsp.py crash-after-open"),
            "{checked:?}"
        );
    }
    for checked in before {
        assert!(!checked.fresh, "{answers:?}");
        let why = checked.down[0].to_string();
        assert!(why.ends_with(", started again shortly"), "{why}");
        assert!(checked.down[0].awaited(), "{checked:?}");
    }
    assert!(
        matches!(&last.down[0].why, DownReason::NotRunning(w) if w.contains("not running")),
        "{last:?}"
    );
    // Restarted once, then given up; the other runs on.
    wait_for(
        "the crashing server given up",
        Duration::from_secs(10),
        || {
            fx.lsp.check(
                &fx.file("c.zz"),
                text,
                Instant::now() + Duration::from_secs(5),
            );
            fx.lsp.status().iter().any(|s| {
                s.command
                    .as_ref()
                    .is_some_and(|c| c.contains(&"lint".to_string()))
                    && matches!(s.state, ServerState::Failed(_))
            })
        },
    );
    assert!(fx.lsp.status().iter().any(|s| {
        s.command
            .as_ref()
            .is_some_and(|c| c.contains(&"types".to_string()))
            && s.state == ServerState::Running
    }));
    assert_eq!(fx.pids("lint").len(), 2, "started, then restarted once");
    // The formatter of the set (the one beside) is down: said, not taken for "no formatter".
    let got = fx.lsp.format(
        &fx.file("c.zz"),
        "x  \n",
        Instant::now() + Duration::from_secs(5),
    );
    match got {
        Err(LspError::Exited(why)) => assert!(why.contains("crash-after-open"), "{why}"),
        other => panic!("{other:?}"),
    }
    fx.shutdown_leaves_nothing(&["types", "lint"]);
}

/// One server of the set crashes while it checks a new text: what it published for the old text
/// is left out of the answer for the new one (it was merged in, the answer fresh, while the
/// crash was being said), and the answer says it is down.
#[test]
fn a_server_crashing_on_a_new_text_leaves_its_old_diagnostics_out() {
    let fx = set_of(
        ("no-format", "types"),
        &[("crash-on-change", "lint")],
        |_| {},
    );
    let first = fx.lsp.check(
        &fx.file("d.zz"),
        "types one\nlint one\n",
        Instant::now() + Duration::from_secs(5),
    );
    let mut both = sources(&first.diagnostics);
    both.sort();
    assert_eq!(both, ["lint", "types"], "{first:?}");
    let second = fx.lsp.check(
        &fx.file("d.zz"),
        "types two\nlint two\n",
        Instant::now() + Duration::from_secs(5),
    );
    assert_eq!(sources(&second.diagnostics), ["types"], "{second:?}");
    assert!(
        second
            .diagnostics
            .iter()
            .all(|d| !d.message.contains("one")),
        "{second:?}"
    );
    assert!(
        second
            .down
            .iter()
            .any(|d| d.server.contains("crash-on-change")),
        "{second:?}"
    );
    fx.shutdown_leaves_nothing(&["types", "lint"]);
}

/// A server of the set that never answers (its pulls hang): the answer comes at the deadline with
/// the other's diagnostics, not fresh, naming the one that did not answer.
#[test]
fn a_hung_server_of_a_set_costs_one_deadline_and_is_said() {
    let fx = set_of(("good", "types"), &[("hang-pull", "lint")], |_| {});
    let wait = Duration::from_secs(2);
    // Started first: the deadline below is the diagnostics', not the start's.
    assert!(fx.lsp.start("zz"));
    wait_for("both running", Duration::from_secs(10), || {
        let s = fx.lsp.status();
        s.len() == 2 && s.iter().all(|s| s.state == ServerState::Running)
    });
    let t = Instant::now();
    let checked = fx
        .lsp
        .check(&fx.file("d.zz"), "types\nlint\n", Instant::now() + wait);
    assert!(t.elapsed() <= wait + SLACK, "{:?}", t.elapsed());
    assert_eq!(sources(&checked.diagnostics), ["types"]);
    assert!(!checked.fresh);
    assert_eq!(checked.down.len(), 1, "{checked:?}");
    assert!(checked.down[0].why == DownReason::Late, "{checked:?}");
    fx.shutdown_leaves_nothing(&["types", "lint"]);
}

/// A server of the set still starting once the start wait is over (its `initialize` unanswered)
/// is late, not down: the answer holds the other's diagnostics but is not fresh, so that the
/// program does not take it for the text's (a baseline without pyright's errors, while pyright
/// starts, made the after-edit answer report them all as new).
#[test]
fn a_server_of_a_set_still_starting_leaves_the_answer_not_fresh() {
    let fx = set_of(("good", "types"), &[("hang-init", "lint")], |c| {
        c.start_wait = Duration::from_millis(1500);
        c.limits.initialize_timeout = Duration::from_secs(60);
    });
    let checked = fx.lsp.check(
        &fx.file("d.zz"),
        "types\nlint\n",
        Instant::now() + Duration::from_secs(1),
    );
    assert_eq!(sources(&checked.diagnostics), ["types"]);
    assert!(!checked.fresh, "{checked:?}");
    assert!(
        checked.down.iter().any(|d| d.why == DownReason::Starting),
        "{checked:?}"
    );
    fx.shutdown_leaves_nothing(&["types", "lint"]);
}

/// A server seen starting by a question, then running for longer than `late_after` with no
/// question seeing it so, then killed: its restart is a start of its own, waited for. Before, the
/// slot still counted as starting since the first question, and the next one left the restarted
/// server out at once ("no answer for over 1 s"), answering nothing known.
#[test]
fn a_server_restarted_after_running_is_waited_for_again() {
    let fx = set_of(("good", "types"), &[], |c| {
        c.limits.late_after = Duration::from_secs(1);
        c.limits.restart_backoff = Duration::from_millis(50);
    });
    let f = fx.file("a.zz");
    let ask = |text: &str| {
        fx.lsp
            .check(&f, text, Instant::now() + Duration::from_secs(10))
    };
    let first = ask("types\n");
    assert!(first.fresh && first.down.is_empty(), "{first:?}");
    std::thread::sleep(Duration::from_millis(1500));
    let pid = fx.pids("types")[0];
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let gone = Instant::now() + Duration::from_secs(5);
    while procs::seen(pid).is_some_and(procs::alive) && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = ask("types\ntypes\n");
    assert!(after.fresh && after.down.is_empty(), "{after:?}");
    assert_eq!(after.diagnostics.len(), 2, "{after:?}");
    assert_eq!(fx.pids("types").len(), 2);
    fx.shutdown_leaves_nothing(&["types"]);
}

/// A server of the set without an answer for long (here `late_after` is 1 s): one that answered
/// `initialize` and then hangs, one that never answers `initialize` (across its restarts): past
/// `late_after`, the answer is the others' diagnostics, fresh, naming the late one; before it,
/// not fresh (its part is waited for). Before, every answer was "not known" until the late one
/// was killed as hung (minutes) or given up on after its restarts.
#[test]
fn a_server_of_a_set_late_for_long_is_left_out_and_said() {
    for (mode, tweak) in [
        ("hang-pull", None),
        ("hang-init", Some(Duration::from_millis(700))),
    ] {
        let fx = set_of(("good", "types"), &[(mode, "lint")], |c| {
            c.limits.late_after = Duration::from_secs(1);
            c.diagnostics_wait = Duration::from_millis(300);
            if let Some(init) = tweak {
                // Killed at 700 ms and started again: late across its restarts.
                c.limits.initialize_timeout = init;
                c.limits.restart_backoff = Duration::from_millis(50);
                c.limits.max_restarts = 100;
                c.start_wait = Duration::from_millis(300);
            }
        });
        let text = "types\nlint\n";
        let ask = || {
            fx.lsp.check(
                &fx.file("d.zz"),
                text,
                Instant::now() + Duration::from_millis(300),
            )
        };
        let first = ask();
        assert!(!first.fresh, "{mode}: {first:?}");
        std::thread::sleep(Duration::from_millis(1500));
        let late = ask();
        assert!(late.fresh, "{mode}: {late:?}");
        assert_eq!(sources(&late.diagnostics), ["types"], "{mode}");
        assert!(
            late.down.iter().any(|d| d.server.contains("lint")
                && d.why == DownReason::LeftOut(Duration::from_secs(1))
                && d.to_string().contains("no answer for over 1 s")),
            "{mode}: {late:?}"
        );
        // Known late, it is not waited for again: a question with a long deadline is answered
        // by the others' part (every one waited to its deadline, past claude's 500 ms baseline).
        let asked = Instant::now();
        let again = fx
            .lsp
            .check(&fx.file("d.zz"), text, asked + Duration::from_secs(20));
        assert!(again.fresh, "{mode}: {again:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{mode}: waited {:?} for the late server",
            asked.elapsed()
        );
        fx.shutdown_leaves_nothing(&["types", "lint"]);
    }
}

/// At most MAX_SERVERS run for a language, however many the table names; each is stopped.
#[test]
fn a_set_is_at_most_a_few_servers() {
    let also: Vec<(&str, &str)> = ["b", "c", "d", "e", "f"]
        .iter()
        .map(|w| ("good", *w))
        .collect();
    let fx = set_of(("good", "a"), &also, |_| {});
    assert!(fx.lsp.start("zz"));
    wait_for("the set running", Duration::from_secs(15), || {
        let s = fx.lsp.status();
        s.len() == MAX_SERVERS && s.iter().all(|s| s.state == ServerState::Running)
    });
    let checked = fx.lsp.check(
        &fx.file("e.zz"),
        "a b c d e f\n",
        Instant::now() + Duration::from_secs(5),
    );
    assert_eq!(sources(&checked.diagnostics), ["a", "b", "c", "d"]);
    assert!(fx.pids("e").is_empty() && fx.pids("f").is_empty());
    fx.shutdown_leaves_nothing(&["a", "b", "c", "d"]);
}
