//! The client against a scripted server (`fake_lsp.py`), well-behaved or misbehaving in one way per test:
//! what the client answers, that it answers within its bound, that memory stays bounded, that a crashed
//! server is restarted with backoff a bounded number of times, and that no process is left behind.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge_lsp::table::Language;
use claude_ide_bridge_lsp::{
    DownReason, FileDiagnostics, Lsp, LspConfig, LspError, LspLog, ServerState, ServerTable,
};
use common::{script, wait_for, Waits, SLACK};

struct Fx {
    lsp: Lsp,
    changes: Arc<Mutex<Vec<FileDiagnostics>>>,
    log: Arc<Mutex<Vec<u8>>>,
    state: tempfile::TempDir,
    ws: tempfile::TempDir,
}

fn language(id: &str, mode: &str, state: &Path) -> Language {
    Language {
        id: id.into(),
        extensions: vec![id.into()],
        commands: vec![script(mode, state, &[])],
        also: Vec::new(),
    }
}

/// A workspace with the language `fake` served in `mode`, and `good` served well (to show that one bad
/// server does not harm another).
fn fake(mode: &str, tweak: impl FnOnce(&mut LspConfig)) -> Fx {
    let log = Arc::new(Mutex::new(Vec::new()));
    let waits = Waits {
        diagnostics: Duration::from_secs(3),
        start: Duration::from_secs(5),
        initialize: Duration::from_secs(2),
    };
    let servers = |state: &Path| {
        std::fs::create_dir(state.join("good")).unwrap();
        let mut servers = ServerTable::empty();
        servers.push(language("fake", mode, state));
        servers.push(language("good", "good", &state.join("good")));
        servers
    };
    let started = common::start(servers, LspLog::Writer(log.clone()), waits, tweak);
    Fx {
        lsp: started.lsp,
        changes: started.changes,
        log,
        state: started.state,
        ws: started.ws,
    }
}

impl Fx {
    fn file(&self, name: &str) -> PathBuf {
        self.ws.path().join(name)
    }

    /// Diagnostics with a deadline `wait` from now; also checks the answer came within the bound.
    fn diagnostics(&self, name: &str, text: &str, wait: Duration, bound: Duration) -> Vec<String> {
        let t = Instant::now();
        let got = self.lsp.diagnostics(&self.file(name), text, t + wait);
        assert!(
            t.elapsed() <= bound + SLACK,
            "{name}: answered after {:?}, bound {bound:?}",
            t.elapsed()
        );
        got.into_iter().map(|d| d.message).collect()
    }

    /// How many diagnostics `on_change` was told of for file `name`, each time, in order.
    fn told(&self, name: &str) -> Vec<usize> {
        let uri = claude_ide_bridge::file_uri(self.file(name).to_str().unwrap());
        let changes = self.changes.lock().unwrap();
        changes
            .iter()
            .filter(|c| c.uri == uri)
            .map(|c| c.diagnostics.len())
            .collect()
    }

    fn state_of(&self, language: &str) -> ServerState {
        self.lsp
            .status()
            .into_iter()
            .find(|s| s.languages.iter().any(|l| l == language))
            .map(|s| s.state)
            .unwrap_or(ServerState::Missing)
    }

    fn starts(&self) -> Vec<(f64, u32)> {
        common::starts(self.state.path())
    }

    /// The pid of the server's first start, once the script has recorded it (a Python start
    /// can take a while on a loaded machine).
    fn first_pid(&self) -> u32 {
        wait_for(
            "the server to record its start",
            Duration::from_secs(10),
            || !self.starts().is_empty(),
        );
        self.starts()[0].1
    }

    fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log.lock().unwrap()).into_owned()
    }

    /// The good server still answers fresh diagnostics.
    fn others_keep_working(&self) {
        let wait = Duration::from_secs(5);
        assert_eq!(
            self.diagnostics("ok.good", "fine\nerror here\n", wait, wait),
            ["bad line 1"]
        );
        assert_eq!(
            self.diagnostics("ok.good", "fine\n", wait, wait),
            Vec::<String>::new()
        );
    }

    /// Shuts down and checks that every process started is gone.
    fn shutdown_leaves_nothing(&self) {
        let mut pids: Vec<u32> = self.starts().into_iter().map(|(_, p)| p).collect();
        pids.extend(
            common::starts(&self.state.path().join("good"))
                .into_iter()
                .map(|(_, p)| p),
        );
        let t = Instant::now();
        self.lsp.shutdown(Duration::from_secs(1));
        assert!(
            t.elapsed() <= Duration::from_secs(3) + SLACK,
            "shutdown took {:?}",
            t.elapsed()
        );
        for pid in pids {
            assert!(!alive(pid), "process {pid} survived shutdown");
        }
    }
}

/// Whether a process with this id exists (a zombie counts): the runtime crate's liveness
/// check, `kill(pid, 0)` on Linux and macOS (only ESRCH says it is gone), `OpenProcess` on
/// Windows.
fn alive(pid: u32) -> bool {
    claude_ide_bridge_runtime::lock::pid_alive(pid)
}

#[test]
fn well_behaved_server_answers_fresh_and_gets_answers_to_its_requests() {
    let fx = fake("good", |_| {});
    let wait = Duration::from_secs(5);
    assert_eq!(
        fx.diagnostics("a.fake", "x\nerror\n", wait, wait),
        ["bad line 1"]
    );
    assert_eq!(
        fx.diagnostics("a.fake", "x\n", wait, wait),
        Vec::<String>::new()
    );
    assert_eq!(
        fx.diagnostics("a.fake", "error\nx\nerror", wait, wait),
        ["bad line 0", "bad line 2"]
    );
    // The same text again answers at once from what is known.
    let t = Instant::now();
    assert_eq!(
        fx.lsp
            .diagnostics(&fx.file("a.fake"), "error\nx\nerror", t)
            .len(),
        2
    );
    let uri = claude_ide_bridge::file_uri(fx.file("a.fake").to_str().unwrap());
    let seen = || -> Vec<usize> {
        let changes = fx.changes.lock().unwrap();
        changes
            .iter()
            .filter(|c| c.uri == uri)
            .map(|c| c.diagnostics.len())
            .collect()
    };
    wait_for("three changes", Duration::from_secs(2), || {
        seen().len() >= 3
    });
    assert_eq!(seen(), [1, 0, 2], "on_change once per change");
    assert_eq!(fx.lsp.known().len(), 1);
    let d = &fx.lsp.known()[0].diagnostics[1];
    assert_eq!(
        (d.severity.as_str(), d.source.as_deref(), d.code.clone()),
        ("Error", Some("fake"), Some("E2".into()))
    );
    assert_eq!((d.range.start.line, d.range.end.character), (2, 5));
    // The server's own requests got answers: one null per configuration item, MethodNotFound for the unknown.
    let answers = std::fs::read_to_string(fx.state.path().join("answers")).unwrap();
    let answers: Vec<serde_json::Value> = answers
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cfg = answers.iter().find(|a| a["id"] == "cfg").unwrap();
    assert_eq!(cfg["result"], serde_json::json!([null, null]));
    let odd = answers.iter().find(|a| a["id"] == "odd").unwrap();
    assert_eq!(odd["error"]["code"], -32601);
    // initialize carried the bridge's pid and the workspace folder.
    let init: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(fx.state.path().join("initialize"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_eq!(init["processId"], std::process::id());
    let folder = claude_ide_bridge::file_uri(fx.ws.path().to_str().unwrap());
    assert_eq!(init["workspaceFolders"][0]["uri"], folder.as_str());
    fx.shutdown_leaves_nothing();
    assert_eq!(fx.state_of("fake"), ServerState::Stopped);
    // Nothing starts after shutdown; answers are what is known.
    assert_eq!(
        fx.lsp
            .diagnostics(&fx.file("a.fake"), "error", Instant::now() + wait)
            .len(),
        2
    );
    assert_eq!(fx.starts().len(), 1);
}

/// A file closed in its server to make room for another (`max_open_files`) has its diagnostics
/// forgotten, and `on_change` is told so with an empty list, as when a server publishes one (this
/// server publishes nothing for a closed file; some real ones do the same). They were kept before,
/// for a text nobody synced any more, without a word to `on_change`.
#[test]
fn a_file_closed_to_make_room_is_told_it_has_no_diagnostics() {
    let fx = fake("good", |c| c.limits.max_open_files = 1);
    let wait = Duration::from_secs(5);
    let told = || fx.told("a.fake");
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    wait_for("a.fake's diagnostics", Duration::from_secs(2), || {
        told() == [1]
    });
    // Opening b.fake closes a.fake: told before the call answers.
    assert_eq!(
        fx.diagnostics("b.fake", "fine", wait, wait),
        Vec::<String>::new()
    );
    assert_eq!(told(), [1, 0]);
    assert!(fx.lsp.known().is_empty(), "{:?}", fx.lsp.known());
    // Asked about again, it is opened again and checked anew.
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    wait_for("a.fake's diagnostics again", Duration::from_secs(2), || {
        told() == [1, 0, 1]
    });
    fx.shutdown_leaves_nothing();
}

#[test]
fn pull_diagnostics_and_sync_without_waiting() {
    let fx = fake("pull", |c| c.trace = true);
    let wait = Duration::from_secs(5);
    // sync before the server is up: the text is sent once it is initialized.
    fx.lsp.sync(&fx.file("b.fake"), "error\n");
    assert_eq!(
        fx.diagnostics("b.fake", "error\n", wait, wait),
        ["bad line 0"]
    );
    assert_eq!(
        fx.diagnostics("b.fake", "fine\n", wait, wait),
        Vec::<String>::new()
    );
    fx.lsp.sync(&fx.file("b.fake"), "fine\nerror\n");
    assert_eq!(
        fx.diagnostics("b.fake", "fine\nerror\n", wait, wait),
        ["bad line 1"]
    );
    fx.shutdown_leaves_nothing();
    // The trace shows the pulls and their answers.
    let log = fx.log_text();
    assert!(
        log.contains(r#""method":"textDocument/diagnostic""#),
        "{log}"
    );
    assert!(
        log.contains(r#"<- {"jsonrpc": "2.0", "id": 2, "result": {"kind": "full""#),
        "{log}"
    );
}

#[test]
fn formatting_applies_the_servers_utf16_edits() {
    let fx = fake("good", |_| {});
    let deadline = Instant::now() + Duration::from_secs(5);
    let formatted = fx
        .lsp
        .format(&fx.file("c.fake"), "a😀é  \nb \nc\n", deadline)
        .unwrap();
    assert_eq!(formatted.as_deref(), Some("a😀é\nb\nc\n"));
    // A file of no language cannot be formatted this way.
    assert_eq!(fx.lsp.format(&fx.file("c.txt"), "x ", deadline), Ok(None));
    fx.shutdown_leaves_nothing();
}

/// An answer over the message limit (a big file's formatting: ruff answered an 8.8 MB file with
/// 15 MB) is passed over and its request answered with an error saying so; the server goes on.
/// It was stopped "for misbehaving", every file of its language lost its diagnostics until the
/// restart, and three such requests gave it up for ten minutes.
#[test]
fn an_answer_over_the_message_limit_fails_its_request_and_keeps_the_server() {
    let fx = fake("good", |c| c.limits.max_message_bytes = 4096);
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = "x  \n".repeat(300);
    let e = fx
        .lsp
        .format(&fx.file("big.fake"), &text, deadline)
        .unwrap_err();
    assert!(
        matches!(&e, LspError::Server { message, .. } if message.contains("over the limit of 4096 bytes")),
        "{e}"
    );
    assert_eq!(fx.state_of("fake"), ServerState::Running);
    let wait = Duration::from_secs(5);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    assert_eq!(fx.starts().len(), 1, "not restarted");
    assert!(fx.log_text().contains("passed over"), "{}", fx.log_text());
    fx.shutdown_leaves_nothing();
}

/// Which request a message passed over answers is read from its top-level members as it goes
/// by: a server's own request over the limit, written id first (as vscode-jsonrpc, lsp-server
/// and clangd write), failed the client's request of the same id, whose real answer then came
/// too late; an answer written result first (gopls) was not failed, and waited to its deadline.
#[test]
fn a_message_passed_over_fails_only_the_request_it_answers() {
    let fx = fake("big-server-request", |c| c.limits.max_message_bytes = 4096);
    let deadline = Instant::now() + Duration::from_secs(5);
    let formatted = fx.lsp.format(&fx.file("big.fake"), "x  \n", deadline);
    assert_eq!(formatted, Ok(Some("x\n".to_owned())), "{}", fx.log_text());
    assert!(fx
        .log_text()
        .contains("no answer to a request of the bridge's"));
    // Its own request is answered (an error), not left waiting for good.
    let answers = fx.state.path().join("answers");
    wait_for(
        "the server's request answered",
        Duration::from_secs(5),
        || std::fs::read_to_string(&answers).is_ok_and(|a| a.contains("over the limit of 4096")),
    );
    fx.shutdown_leaves_nothing();

    let fx = fake("big-result-first", |c| c.limits.max_message_bytes = 4096);
    let asked = Instant::now();
    let e = fx.lsp.format(
        &fx.file("big.fake"),
        "x  \n",
        asked + Duration::from_secs(20),
    );
    assert!(
        matches!(&e, Err(LspError::Server { message, .. }) if message.contains("over the limit")),
        "{e:?}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "failed at once, not at the deadline"
    );
    fx.shutdown_leaves_nothing();
}

#[test]
fn start_ahead_of_the_first_question() {
    let fx = fake("good", |_| {});
    assert!(fx.lsp.start("fake"));
    assert!(!fx.lsp.start("cobol"));
    wait_for(
        "the server to be initialized",
        Duration::from_secs(5),
        || fx.state_of("fake") == ServerState::Running,
    );
    // Already running: the first question waits only for its diagnostics.
    let wait = Duration::from_secs(3);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    assert_eq!(fx.starts().len(), 1);
    fx.shutdown_leaves_nothing();
    assert!(!fx.lsp.start("fake"), "nothing starts after shutdown");
}

#[test]
fn missing_server_answers_nothing_at_once() {
    let fx = fake("good", |c| {
        c.servers.push(Language {
            id: "fake".into(),
            extensions: vec!["fake".into()],
            commands: vec![vec!["/nonexistent/surely-no-lsp".into()]],
            also: Vec::new(),
        })
    });
    let wait = Duration::from_secs(3);
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::ZERO)
        .is_empty());
    assert_eq!(fx.state_of("fake"), ServerState::Missing);
    assert_eq!(
        fx.lsp
            .format(&fx.file("a.fake"), "x", Instant::now() + wait),
        Ok(None)
    );
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn crash_at_start_restarts_with_backoff_then_gives_up() {
    let fx = fake("crash-at-start", |_| {});
    let wait = Duration::from_secs(3);
    // Each call answers as soon as the server is seen gone, not after its start wait (5 s).
    let end = Instant::now() + Duration::from_secs(20);
    while !matches!(fx.state_of("fake"), ServerState::Failed(_)) {
        assert!(Instant::now() < end, "never gave up: {:?}", fx.lsp.status());
        assert!(fx
            .diagnostics("a.fake", "error", wait, Duration::from_millis(1500))
            .is_empty());
        std::thread::sleep(Duration::from_millis(30));
    }
    let starts = fx.starts();
    assert_eq!(starts.len(), 4, "one start and three restarts: {starts:?}");
    for (i, pair) in starts.windows(2).enumerate() {
        let gap = pair[1].0 - pair[0].0;
        let backoff = 0.2 * f64::from(1u32 << i);
        assert!(
            gap >= backoff * 0.9,
            "restart {} after {gap:.3}s, backoff {backoff}s",
            i + 1
        );
    }
    let status = fx
        .lsp
        .status()
        .into_iter()
        .find(|s| s.languages == ["fake"])
        .unwrap();
    assert_eq!(status.restarts, 3);
    assert!(
        matches!(&status.state, ServerState::Failed(why) if why.contains("gave up")),
        "{status:?}"
    );
    // Given up: no more starts.
    std::thread::sleep(Duration::from_millis(2000));
    fx.diagnostics("a.fake", "error", wait, Duration::from_millis(500));
    assert_eq!(fx.starts().len(), 4);
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn crash_later_is_noticed_at_once_and_restarted() {
    let fx = fake("crash-after-open", |_| {});
    let wait = Duration::from_secs(3);
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::from_secs(2))
        .is_empty());
    assert!(
        matches!(fx.state_of("fake"), ServerState::Crashed(_)),
        "{:?}",
        fx.lsp.status()
    );
    restarted_once(&fx);
}

/// A server that crashes takes its diagnostics with it, and `on_change` is told so, once per
/// file it had diagnostics for, with an empty list: they vanished from `known` when the server
/// was replaced, without a word, and the program kept telling claude of them. A file whose
/// diagnostics were already empty is not told again, and a server stopped by shutdown keeps its
/// diagnostics without a word either.
#[test]
fn a_crashed_servers_diagnostics_are_told_gone() {
    let fx = fake("crash-after-publish", |_| {});
    let exits = Arc::new(Mutex::new(Vec::new()));
    let seen = exits.clone();
    assert!(fx
        .lsp
        .on_exit(move |gone| seen.lock().unwrap().push(gone.clone())));
    let wait = Duration::from_secs(5);
    let told = |name: &str| fx.told(name);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    assert!(fx.diagnostics("b.fake", "fine", wait, wait).is_empty());
    // Published ([1]), then the server exits: the answer may come before or after the crash.
    fx.diagnostics("c.fake", "error\ncrash", wait, wait);
    wait_for("the crash to be told", Duration::from_secs(5), || {
        told("a.fake") == [1, 0] && told("c.fake") == [1, 0]
    });
    assert!(fx.lsp.known().is_empty(), "{:?}", fx.lsp.known());
    assert!(told("b.fake").is_empty());
    // The end told as well (once reaped: after its diagnostics), with its status.
    wait_for("the exit to be told", Duration::from_secs(5), || {
        !exits.lock().unwrap().is_empty()
    });
    {
        let exits = exits.lock().unwrap();
        assert_eq!(exits.len(), 1, "{exits:?}");
        assert_eq!(exits[0].languages, ["fake"]);
        assert_eq!(exits[0].pid, fx.first_pid());
        assert!(
            exits[0].command.iter().any(|a| a.ends_with("fake_lsp.py")),
            "{exits:?}"
        );
        assert!(exits[0].reason.starts_with("exited"), "{exits:?}");
        // `os._exit(4)`: `exit status: 4` (`exit code: 4` on Windows).
        assert!(exits[0].status.ends_with(": 4"), "{exits:?}");
    }
    // Its replacement, once the backoff (200 ms) has passed, reports anew; told once per crash.
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    assert_eq!(fx.starts().len(), 2, "{:?}", fx.starts());
    // `on_change` is told outside the state's lock, after the answer's waiter is woken.
    wait_for("the new publish to be told", Duration::from_secs(5), || {
        told("a.fake") == [1, 0, 1]
    });
    assert_eq!(told("c.fake"), [1, 0]);
    fx.shutdown_leaves_nothing();
    assert_eq!(told("a.fake"), [1, 0, 1], "told nothing at shutdown");
    assert_eq!(fx.lsp.known().len(), 1, "kept at shutdown");
    assert_eq!(
        exits.lock().unwrap().len(),
        1,
        "a stop asked for is not told"
    );
}

/// Once its backoff (200 ms) passed, the crashed fake server is started again by the next
/// question; the other is unharmed, and shutting down leaves nothing.
fn restarted_once(fx: &Fx) {
    std::thread::sleep(Duration::from_millis(250));
    let wait = Duration::from_secs(3);
    fx.diagnostics("a.fake", "error", wait, Duration::from_secs(2));
    assert_eq!(fx.starts().len(), 2, "restarted once its backoff passed");
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

/// A server that exits while a process it started keeps its output open: the reader sees no end,
/// so the exit is seen by its status instead (a thread of its own waits for it); the server is
/// restarted, and its child goes with its process group. It stayed `Running` before, a zombie
/// every request waited on until its deadline.
#[test]
fn an_exit_is_seen_while_a_child_holds_the_output_open() {
    let fx = fake("orphan-output", |_| {});
    let wait = Duration::from_secs(3);
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::from_secs(2))
        .is_empty());
    let pid = fx.first_pid();
    wait_for("the exit to be seen", Duration::from_secs(5), || {
        matches!(fx.state_of("fake"), ServerState::Crashed(_))
    });
    wait_for(
        "the server and its child to be gone",
        Duration::from_secs(5),
        || {
            let child =
                std::fs::read_to_string(fx.state.path().join("grandchild")).unwrap_or_default();
            !alive(pid) && child.trim().parse().is_ok_and(|c| !alive(c))
        },
    );
    restarted_once(&fx);
}

/// A server that asks for more than its input takes before it answers `initialize`, and never
/// reads: the writer, waiting for it to read, still kills it at the `initialize` deadline. It
/// stayed `Starting` for the whole run before (the deadline was looked at between writes only).
#[test]
fn a_server_deaf_before_initialize_is_killed_at_its_deadline() {
    let fx = fake("deaf-init", |c| c.start_wait = Duration::from_millis(500));
    assert!(fx
        .diagnostics(
            "a.fake",
            "error",
            Duration::from_millis(300),
            Duration::from_secs(1)
        )
        .is_empty());
    // initialize_timeout is 2 s, looked at every second while the writer waits for it to read.
    stopped_for_no_initialize(&fx, Duration::from_secs(6));
}

/// The fake server is killed and reaped within `within` for not answering `initialize`, the
/// other server is unharmed, and shutting down leaves nothing.
fn stopped_for_no_initialize(fx: &Fx, within: Duration) {
    let pid = fx.first_pid();
    wait_for("the server to be stopped", within, || !alive(pid));
    assert!(
        matches!(fx.state_of("fake"), ServerState::Crashed(why) if why.contains("no answer to initialize")),
        "{:?}",
        fx.lsp.status()
    );
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn exit_after_initialize_counts_as_a_crash() {
    let fx = fake("exit-after-init", |_| {});
    let wait = Duration::from_secs(3);
    assert!(fx.diagnostics("a.fake", "error", wait, wait).is_empty());
    wait_for("the exit to be seen", Duration::from_secs(3), || {
        matches!(fx.state_of("fake"), ServerState::Crashed(_))
    });
    wait_for("the exit in the log", Duration::from_secs(3), || {
        fx.log_text()
            .contains("exited; process ended: exit status: ")
    });
    fx.shutdown_leaves_nothing();
}

#[test]
fn hung_initialize_is_bounded_by_the_start_wait_then_killed() {
    let fx = fake("hang-init", |c| c.start_wait = Duration::from_millis(800));
    let wait = Duration::from_millis(300);
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::from_millis(800))
        .is_empty());
    // Still starting, unless a loaded machine let the 2 s initialize timeout pass meanwhile.
    assert!(
        matches!(
            fx.state_of("fake"),
            ServerState::Starting | ServerState::Crashed(_)
        ),
        "{:?}",
        fx.lsp.status()
    );
    // initialize_timeout is 2 s: then the server is killed and reaped.
    stopped_for_no_initialize(&fx, Duration::from_secs(4));
}

/// A pull answered after its file was closed in the server (to make room for another file) is
/// still the answer for the text asked about: it was dropped, and the file's diagnostics the
/// client no longer held ([]) were answered as fresh instead.
#[test]
fn a_pull_answered_after_its_file_was_closed_is_still_its_answer() {
    let fx = fake("slow-pull", |c| c.limits.max_open_files = 1);
    let wait = Duration::from_secs(5);
    std::thread::scope(|s| {
        let asked = s.spawn(|| fx.diagnostics("a.fake", "error\n", wait, wait));
        // While the server takes its time, another file takes the only place.
        std::thread::sleep(Duration::from_millis(200));
        fx.lsp.sync(&fx.file("b.fake"), "fine\n");
        assert_eq!(asked.join().unwrap(), ["bad line 0"]);
    });
    fx.shutdown_leaves_nothing();
}

#[test]
fn hung_pull_answers_what_is_known_at_the_deadline() {
    let fx = fake("hang-pull", |_| {});
    let wait = Duration::from_millis(700);
    // The first call waits for the start, then the deadline; the second only its deadline.
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::from_secs(5))
        .is_empty());
    assert!(fx.diagnostics("a.fake", "error\n", wait, wait).is_empty());
    // ... and says that the answer is not for the text asked about.
    let file = fx.file("a.fake");
    let late = fx.lsp.check(&file, "error\n\n", Instant::now() + wait);
    assert!(!late.fresh && late.diagnostics.is_empty(), "{late:?}");
    let good = fx.lsp.check(
        &fx.file("b.good"),
        "error",
        Instant::now() + Duration::from_secs(5),
    );
    assert!(good.fresh && good.diagnostics.len() == 1, "{good:?}");
    assert_eq!(fx.state_of("fake"), ServerState::Running);
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn hung_shutdown_is_killed_with_its_children_after_the_grace() {
    let fx = fake("hang-shutdown", |_| {});
    let wait = Duration::from_secs(5);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    let t = Instant::now();
    fx.lsp.shutdown(Duration::from_secs(1));
    assert!(
        t.elapsed() <= Duration::from_secs(3) + SLACK,
        "{:?}",
        t.elapsed()
    );
    let pid = fx.first_pid();
    assert!(!alive(pid), "the server survived");
    let grandchild: u32 = std::fs::read_to_string(fx.state.path().join("grandchild"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild is not ours to reap: it is gone once its reaper (init) has collected it.
    wait_for(
        "the server's own child to go",
        Duration::from_secs(3),
        || !alive(grandchild),
    );
}

/// A message of 22 MB, over 32 times the limit (here 512 KiB): not passed over, the server is
/// stopped (a stream announcing that much is not read on).
#[test]
fn a_message_over_what_is_passed_over_stops_the_server() {
    let fx = fake("huge", |c| c.limits.max_message_bytes = 1 << 19);
    let wait = Duration::from_secs(3);
    assert!(fx.diagnostics("a.fake", "error", wait, wait).is_empty());
    wait_for(
        "the server to be stopped",
        Duration::from_secs(3),
        || matches!(fx.state_of("fake"), ServerState::Crashed(why) if why.contains("over the limit")),
    );
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn an_endless_flood_is_held_within_the_bounds() {
    let fx = fake("flood", |c| {
        c.limits.max_files = 50;
        c.limits.max_total_diagnostics = 3000;
        c.limits.max_diagnostics_per_file = 100;
    });
    let wait = Duration::from_millis(500);
    fx.diagnostics("a.fake", "error", wait, Duration::from_secs(5));
    let total = || -> usize { fx.lsp.known().iter().map(|f| f.diagnostics.len()).sum() };
    wait_for("the flood to arrive", Duration::from_secs(10), || {
        total() >= 1000
    });
    let mut peak = (0, 0);
    for _ in 0..20 {
        let known = fx.lsp.known();
        let total: usize = known.iter().map(|f| f.diagnostics.len()).sum();
        assert!(known.iter().all(|f| f.diagnostics.len() <= 100));
        peak = (peak.0.max(known.len()), peak.1.max(total));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(peak.0 <= 50 && peak.1 <= 3000, "{peak:?}");
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn garbage_output_stops_the_server_with_a_clear_reason() {
    for (mode, reason) in [
        ("garbage", "more than 65536 bytes of output that is not a Content-Length frame (it began \"hello, this is not a frame"),
        ("short-length", "not a JSON-RPC message"),
    ] {
        let fx = fake(mode, |_| {});
        let wait = Duration::from_secs(3);
        assert!(fx.diagnostics("a.fake", "error", wait, wait).is_empty());
        wait_for(
            "the server to be stopped",
            Duration::from_secs(3),
            || matches!(fx.state_of("fake"), ServerState::Crashed(why) if why.contains(reason)),
        );
        wait_for("the reason in the log", Duration::from_secs(3), || {
            fx.log_text().contains(reason)
        });
        fx.others_keep_working();
        fx.shutdown_leaves_nothing();
    }
}

/// A server that prints a log line on stdout before each message still serves: the lines are
/// skipped, and the log says so.
#[test]
fn a_log_line_on_stdout_is_skipped_and_logged() {
    let fx = fake("chatty", |_| {});
    let wait = Duration::from_secs(5);
    assert_eq!(
        fx.diagnostics("a.fake", "ok\nerror", wait, wait),
        ["bad line 1"]
    );
    assert_eq!(
        fx.diagnostics("a.fake", "error\nok", wait, wait),
        ["bad line 0"]
    );
    assert_eq!(fx.state_of("fake"), ServerState::Running);
    let log = fx.log_text();
    assert!(
        log.contains(r#"skipped 26 bytes of its output that are not a Content-Length frame: "chatty: sending a message\n""#),
        "{log}"
    );
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

#[test]
fn a_length_too_long_leaves_answers_bounded_by_the_deadline() {
    let fx = fake("long-length", |_| {});
    let wait = Duration::from_millis(700);
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::from_secs(5))
        .is_empty());
    assert!(fx.diagnostics("a.fake", "error\n", wait, wait).is_empty());
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

/// A server that publishes without a version, first with the previous text's diagnostics and
/// then the full ones (as typescript-language-server does per kind of check): the answer is the
/// last publish once they settle, not the first.
#[test]
fn publishes_without_a_version_are_taken_once_they_settle() {
    let fx = fake("staged", |_| {});
    let wait = Duration::from_secs(5);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    assert_eq!(
        fx.diagnostics("a.fake", "ok\nerror", wait, wait),
        ["bad line 1"]
    );
    assert_eq!(
        fx.diagnostics("a.fake", "ok\nok", wait, wait),
        Vec::<String>::new()
    );
    // The same text again: already settled, answered without a new publish.
    assert_eq!(
        fx.diagnostics("a.fake", "ok\nok", wait, Duration::from_millis(100)),
        Vec::<String>::new()
    );
    fx.shutdown_leaves_nothing();
}

#[test]
fn a_server_that_stops_reading_is_stopped_once_its_input_backs_up() {
    let fx = fake("no-read", |c| c.limits.max_outbox_bytes = 1 << 20);
    let wait = Duration::from_millis(300);
    fx.diagnostics("a.fake", "first", wait, Duration::from_secs(5));
    let big = "x".repeat(256 * 1024);
    for i in 0..20 {
        fx.lsp.sync(&fx.file("a.fake"), &format!("{big}{i}"));
    }
    wait_for("the server to be stopped", Duration::from_secs(5), || {
        matches!(fx.state_of("fake"), ServerState::Crashed(_))
    });
    // Killed then and there, not left behind its blocked writer: gone and reaped before any
    // shutdown.
    let (_, hung) = fx.starts()[0];
    wait_for("the hung server to be gone", Duration::from_secs(5), || {
        !alive(hung)
    });
    // Its replacement, once the backoff has passed, answers.
    std::thread::sleep(Duration::from_millis(1100));
    fx.diagnostics("a.fake", "second", wait, Duration::from_secs(5));
    assert_eq!(fx.starts().len(), 2, "{:?}", fx.starts());
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

/// One sync of a large file is not taken for a server that does not read its input: a 10 MiB
/// file of control characters, six bytes each as JSON (`\u0001`), sent in a `didChange` and again
/// in a `didSave` with its text (this server asks for it), was two 60 MiB messages, past the
/// 64 MiB that may wait for a server, and the server was killed as hung as they were queued. The
/// text is now held once and escaped as it is written: the server reads both and answers.
#[test]
fn one_large_sync_is_not_taken_for_a_hung_server() {
    let fx = fake("save-text", |_| {});
    let wait = Duration::from_secs(5);
    assert!(fx.diagnostics("big.fake", "fine", wait, wait).is_empty());
    let big = format!("{}\nerror", "\u{1}".repeat(10 << 20));
    let wait = Duration::from_secs(30);
    assert_eq!(fx.diagnostics("big.fake", &big, wait, wait), ["bad line 1"]);
    assert_eq!(fx.state_of("fake"), ServerState::Running);
    let saved = || std::fs::read_to_string(fx.state.path().join("saved")).unwrap_or_default();
    wait_for("the didSave with the text", Duration::from_secs(10), || {
        saved().lines().any(|l| l == big.len().to_string())
    });
    assert_eq!(fx.starts().len(), 1);
    fx.shutdown_leaves_nothing();
}

/// A text handed over ahead of its write (an accepted diff, which claude writes next) is told
/// saved only once the file holds it. A server that checks the disk on save (rust-analyzer's
/// `cargo check`) checked the old text, and was not told again once the new one was written.
#[test]
fn a_text_handed_over_ahead_is_told_saved_once_written() {
    let fx = fake("save-text", |_| {});
    let wait = Duration::from_secs(5);
    let file = fx.file("a.fake");
    std::fs::write(&file, "fine\n").unwrap();
    assert!(fx.diagnostics("a.fake", "fine\n", wait, wait).is_empty());
    let saved = || std::fs::read_to_string(fx.state.path().join("saved")).unwrap_or_default();
    let accepted = "fine\nerror\n";
    fx.lsp.sync_ahead(&file, accepted);
    // Asked about while the file still holds the old text: answered, not told saved.
    assert_eq!(
        fx.diagnostics("a.fake", accepted, wait, wait),
        ["bad line 1"]
    );
    // A request after them: what was sent before it has been read.
    assert!(fx
        .lsp
        .format(&file, accepted, Instant::now() + wait)
        .is_ok());
    assert_eq!(saved(), "", "told saved before the file held the text");
    // A FIFO in its place is not opened (which would wait for a writer for good).
    #[cfg(unix)]
    {
        std::fs::remove_file(&file).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&file).status();
        assert!(made.unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| tx.send(fx.diagnostics("a.fake", accepted, wait, wait)));
            let answer = rx.recv_timeout(Duration::from_secs(20));
            if answer.is_err() {
                // Lets the held read go, so that the test ends to say so.
                let _ = std::fs::OpenOptions::new().write(true).open(&file);
            }
            assert_eq!(answer.expect("an answer"), ["bad line 1"]);
        });
        std::fs::remove_file(&file).unwrap();
        assert_eq!(saved(), "");
    }
    std::fs::write(&file, accepted).unwrap();
    assert_eq!(
        fx.diagnostics("a.fake", accepted, wait, wait),
        ["bad line 1"]
    );
    wait_for("the didSave once written", wait, || {
        saved().lines().any(|l| l == accepted.len().to_string())
    });
    // Once: asked again, nothing more.
    assert!(fx
        .lsp
        .format(&file, accepted, Instant::now() + wait)
        .is_ok());
    assert_eq!(saved().lines().count(), 1, "{}", saved());
    fx.shutdown_leaves_nothing();
}

/// A text too long to send (past half of `max_outbox_bytes`) is refused at once, as documented:
/// it starts no server and does not wait for one that is starting. It was refused only after its
/// server was started and had answered `initialize` (3 s for this one).
#[test]
fn a_text_too_long_to_send_answers_without_waiting_for_a_start() {
    let fx = fake("slow-init", |c| {
        c.limits.max_outbox_bytes = 1000;
        c.limits.initialize_timeout = Duration::from_secs(20);
    });
    let long = "error\n".repeat(100);
    let file = fx.file("a.fake");
    let later = || Instant::now() + Duration::from_secs(10);
    let t = Instant::now();
    assert!(fx.lsp.diagnostics(&file, &long, later()).is_empty());
    // Final, not late: no server will be sent it (it was answered "not known yet" for good).
    let checked = fx.lsp.check(&file, &long, later());
    assert!(
        checked.fresh && checked.diagnostics.is_empty(),
        "{checked:?}"
    );
    assert_eq!(fx.lsp.format(&file, &long, later()), Ok(None));
    fx.lsp.sync(&file, &long);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(fx.lsp.status().is_empty(), "{:?}", fx.lsp.status());
    // A server starting (it answers initialize 3 s after): not waited for either.
    assert!(fx.lsp.start("fake"));
    let t = Instant::now();
    assert!(fx.lsp.diagnostics(&file, &long, later()).is_empty());
    assert_eq!(fx.lsp.format(&file, &long, later()), Ok(None));
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(fx.state_of("fake"), ServerState::Starting);
    // A text that fits waits for the start and is answered.
    let wait = Duration::from_secs(10);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    let said = fx
        .log_text()
        .matches("a.fake not sent to the server: 600 bytes")
        .count();
    assert_eq!(said, 6, "{}", fx.log_text());
    assert_eq!(fx.starts().len(), 1);
    fx.shutdown_leaves_nothing();
}

/// A call with a deadline it must keep ([`Lsp::check_by`]: the baseline before an edit, which
/// the client gives 500 ms) is answered late, at its deadline, while its server starts: here
/// before the server is even initialized (it answers `initialize` 5 s after its start). It
/// waited for the start like any call (up to the start wait, 20 s here), past the client's
/// bound. Once the server runs, the same call is answered.
#[test]
fn a_hard_deadline_is_kept_while_the_server_starts() {
    let fx = fake("late-init", |c| {
        c.start_wait = Duration::from_secs(20);
        c.limits.initialize_timeout = Duration::from_secs(20);
    });
    let file = fx.file("a.fake");
    let t = Instant::now();
    let checked = fx
        .lsp
        .check_by(&file, "error\n", t + Duration::from_millis(400));
    let took = t.elapsed();
    assert_eq!(
        fx.state_of("fake"),
        ServerState::Starting,
        "answered once the server was initialized, after {took:?}"
    );
    assert!(!checked.fresh, "{checked:?}");
    assert!(
        checked.down.iter().any(|d| d.why == DownReason::Starting),
        "{checked:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    wait_for("the server to start", Duration::from_secs(30), || {
        fx.state_of("fake") == ServerState::Running
    });
    let checked = fx
        .lsp
        .check_by(&file, "error\n", Instant::now() + Duration::from_secs(10));
    assert!(checked.fresh, "{checked:?}");
    let said: Vec<String> = checked.diagnostics.into_iter().map(|d| d.message).collect();
    assert_eq!(said, ["bad line 0"]);
    fx.shutdown_leaves_nothing();
}

#[test]
fn stderr_goes_to_the_log_within_its_budget() {
    let fx = fake("stderr-flood", |c| c.limits.max_log_bytes = 100_000);
    let wait = Duration::from_secs(10);
    assert_eq!(
        fx.diagnostics("a.fake", "error", wait, wait),
        ["bad line 0"]
    );
    fx.shutdown_leaves_nothing();
    let log = fx.log_text();
    assert!(log.contains("noise noise"), "stderr reached the log");
    assert!(log.contains("log limit reached"));
    // The server wrote 6 MB; the log holds its budget plus the other lines.
    assert!(log.len() < 100_000 + 10_000, "{}", log.len());
}

/// A noisy server that crashes gets no fresh log budget with each restart (it could fill the
/// run's log alone, silencing the others and the bridge's notes), and why each of its processes
/// ended is written past the budget.
#[test]
fn a_noisy_server_has_one_log_budget_over_its_restarts() {
    let fx = fake("stderr-flood-crash", |c| c.limits.max_log_bytes = 100_000);
    let wait = Duration::from_secs(3);
    for round in 1..=2 {
        fx.diagnostics("a.fake", "error", wait, wait);
        wait_for("the crash to be seen", Duration::from_secs(5), || {
            matches!(fx.state_of("fake"), ServerState::Crashed(_))
        });
        wait_for("its reason in the log", Duration::from_secs(5), || {
            fx.log_text().matches("process ended: ").count() == round
        });
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(fx.starts().len(), 2);
    fx.shutdown_leaves_nothing();
    let log = fx.log_text();
    let noise: usize = log
        .lines()
        .filter(|l| l.contains("noise"))
        .map(|l| l.len() + 1)
        .sum();
    // Each process wrote 6 MB; the two together had 100,000 bytes.
    assert!(
        noise <= 100_000,
        "{noise} bytes of noise from two processes"
    );
    assert_eq!(log.matches("log limit reached").count(), 1, "{}", log.len());
}

/// The language `fake` alone, served in `mode` with `on_change`: the client, its log, and its
/// state and workspace folders.
fn fake_alone(
    mode: &str,
    on_change: impl Fn(FileDiagnostics) + Send + Sync + 'static,
) -> (
    Lsp,
    Arc<Mutex<Vec<u8>>>,
    tempfile::TempDir,
    tempfile::TempDir,
) {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut servers = ServerTable::empty();
    servers.push(language("fake", mode, state.path()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let config = LspConfig {
        servers,
        workspace_folders: vec![ws.path().to_path_buf()],
        log: LspLog::Writer(log.clone()),
        ..LspConfig::default()
    };
    (Lsp::new(config, on_change), log, state, ws)
}

#[test]
fn a_panicking_on_change_does_not_stop_the_server() {
    let (lsp, log, _state, ws) = fake_alone("good", |_| panic!("a callback bug"));
    let file = ws.path().join("a.fake");
    let deadline = || Instant::now() + Duration::from_secs(5);
    assert_eq!(lsp.diagnostics(&file, "error", deadline()).len(), 1);
    assert_eq!(lsp.diagnostics(&file, "ok", deadline()).len(), 0);
    assert_eq!(lsp.diagnostics(&file, "error\nerror", deadline()).len(), 2);
    lsp.shutdown(Duration::from_secs(1));
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(log.contains("on_change callback panicked"), "{log}");
}

/// A server that exits with much of its output still to be read (its last publishes, told to a
/// slow `on_change`): its exit, seen by its status first, is not taken for an output held open
/// by a process it started. The exit watch waits for the reader to have read everything; it
/// waited a fixed 100 ms, and the server's end was logged as "its output is still held open".
#[test]
fn an_exit_with_output_left_to_read_is_no_output_held_open() {
    let told = Arc::new(Mutex::new(0));
    let count = told.clone();
    let (lsp, log, _state, ws) = fake_alone("burst-exit", move |_| {
        std::thread::sleep(Duration::from_millis(20));
        *count.lock().unwrap() += 1;
    });
    let file = ws.path().join("a.fake");
    let _ = lsp.diagnostics(&file, "x", Instant::now() + Duration::from_secs(3));
    let text = || String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    wait_for("the server's end", Duration::from_secs(10), || {
        text().contains("process ended: ")
    });
    let log = text();
    assert!(!log.contains("held open"), "{log}");
    assert!(*told.lock().unwrap() >= 30, "{log}");
    lsp.shutdown(Duration::from_secs(1));
}

#[test]
fn dropping_the_last_handle_stops_the_servers() {
    let fx = fake("good", |_| {});
    let wait = Duration::from_secs(5);
    assert_eq!(fx.diagnostics("a.fake", "error", wait, wait).len(), 1);
    let pid = fx.first_pid();
    assert!(alive(pid));
    let Fx { lsp, state, ws, .. } = fx;
    let other = lsp.clone();
    drop(lsp);
    assert!(alive(pid), "another handle keeps the servers");
    drop(other);
    assert!(!alive(pid), "the server outlived the last handle");
    drop((state, ws));
}

/// Stopped while it has not answered `initialize`: killed at once, not after the grace (the
/// program's exit waited the whole grace when claude quit during a server's cold start).
#[test]
fn a_server_still_starting_is_stopped_at_once() {
    let fx = fake("hang-init", |c| {
        c.start_wait = Duration::from_millis(300);
        c.limits.initialize_timeout = Duration::from_secs(60);
    });
    let wait = Duration::from_millis(200);
    assert!(fx
        .diagnostics("a.fake", "error", wait, Duration::from_secs(1))
        .is_empty());
    let pid = fx.first_pid();
    assert_eq!(fx.state_of("fake"), ServerState::Starting);
    let t = Instant::now();
    fx.lsp.shutdown(Duration::from_secs(20));
    assert!(
        t.elapsed() <= Duration::from_secs(5) + SLACK,
        "shutdown took {:?}",
        t.elapsed()
    );
    assert!(!alive(pid), "the server survived");
    assert!(
        fx.log_text().contains("stopped while starting"),
        "{}",
        fx.log_text()
    );
}

/// A check waiting for a server still starting when the servers are stopped: its answer says
/// they are stopping, not that the server is "started again shortly" (nothing starts it again).
#[test]
fn a_check_waiting_at_a_stop_is_told_the_servers_are_stopping() {
    let fx = fake("hang-init", |c| {
        c.start_wait = Duration::from_secs(30);
        c.limits.initialize_timeout = Duration::from_secs(60);
    });
    std::thread::scope(|s| {
        let asked = s.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(30);
            fx.lsp.check(&fx.file("a.fake"), "error", deadline)
        });
        let give_up = Instant::now() + Duration::from_secs(10);
        while fx.state_of("fake") != ServerState::Starting {
            assert!(Instant::now() < give_up, "{:?}", fx.lsp.status());
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        fx.lsp.shutdown(Duration::from_secs(5));
        let got = asked.join().unwrap();
        assert!(!got.fresh, "{got:?}");
        let why: Vec<&DownReason> = got.down.iter().map(|d| &d.why).collect();
        assert_eq!(why, [&DownReason::Stopping], "{got:?}");
        assert_eq!(
            got.down[0].to_string(),
            format!("{}: stopped: the bridge is stopping", got.down[0].server)
        );
    });
}

/// A server without versioned publishes that reports work in progress: its first, empty publish
/// is not taken as the answer while the work runs (typescript-language-server loading its project
/// answered `[]` before its 16 real diagnostics, and the `[]` was remembered).
#[test]
fn publishes_are_not_settled_while_work_is_in_progress() {
    let fx = fake("progress", |_| {});
    let wait = Duration::from_secs(6);
    let t = Instant::now();
    let got = fx.lsp.check(&fx.file("a.fake"), "ok\nerror", t + wait);
    assert!(got.fresh, "{got:?}");
    let messages: Vec<String> = got.diagnostics.into_iter().map(|d| d.message).collect();
    assert_eq!(messages, ["bad line 1"]);
    // A deadline that passes while the work runs: what is known, not fresh.
    let got = fx.lsp.check(
        &fx.file("a.fake"),
        "error\nok",
        Instant::now() + Duration::from_millis(700),
    );
    assert!(!got.fresh, "{got:?}");
    fx.shutdown_leaves_nothing();
}

/// An answer belongs to the text it was asked for: a newer text of the file synced while the
/// server works (an accepted diff) makes what the server says next that text's, never the older
/// one's (a baseline was once answered with the edited text's diagnostics).
#[test]
fn an_answer_is_for_the_text_asked_about() {
    let fx = fake("late-unversioned", |_| {});
    let path = fx.file("a.fake");
    // Started and warm.
    fx.diagnostics(
        "a.fake",
        "warm",
        Duration::from_secs(5),
        Duration::from_secs(5),
    );
    let asker = {
        let (lsp, path) = (fx.lsp.clone(), path.clone());
        std::thread::spawn(move || {
            lsp.check(&path, "error\nok", Instant::now() + Duration::from_secs(2))
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    fx.lsp.sync(&path, "ok\nerror");
    let got = asker.join().unwrap();
    let messages: Vec<String> = got.diagnostics.iter().map(|d| d.message.clone()).collect();
    assert!(
        !got.fresh || messages == ["bad line 0"],
        "the newer text's answer passed for the older one's: {got:?}"
    );
    // The newer text itself gets its own answer.
    let now = fx
        .lsp
        .check(&path, "ok\nerror", Instant::now() + Duration::from_secs(3));
    assert!(now.fresh);
    assert_eq!(now.diagnostics[0].message, "bad line 1");
    fx.shutdown_leaves_nothing();
}

/// Servers that come and go while the client runs: installed after the first question, not
/// startable for a while (an upgrade), or given up on after a crash loop. Each is tried again
/// after its own wait ([`LspLimits::resolve_again`], [`LspLimits::start_retry`],
/// [`LspLimits::given_up_for`], shortened here); before, each stayed as it was first found for
/// the client's life, every question about its files answered `[]`.
///
/// The fake language's server is a shell script the test writes (`bin/fake-lsp`), running the
/// scripted server in the mode the file `bin/mode` names at each start.
///
/// [`LspLimits::resolve_again`]: claude_ide_bridge_lsp::LspLimits::resolve_again
/// [`LspLimits::start_retry`]: claude_ide_bridge_lsp::LspLimits::start_retry
/// [`LspLimits::given_up_for`]: claude_ide_bridge_lsp::LspLimits::given_up_for
#[cfg(unix)]
mod coming_and_going {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Bin {
        dir: tempfile::TempDir,
    }

    impl Bin {
        fn new() -> Bin {
            Bin {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn server(&self) -> PathBuf {
            self.dir.path().join("fake-lsp")
        }

        /// Serves the fake language with `bin/fake-lsp` (missing until written).
        fn serve(&self, c: &mut LspConfig) {
            let state = c.servers.commands("fake")[0][3].clone();
            std::fs::write(self.dir.path().join("state"), state).unwrap();
            c.servers.push(Language {
                id: "fake".into(),
                extensions: vec!["fake".into()],
                commands: vec![vec![self.server().to_str().unwrap().to_owned()]],
                also: Vec::new(),
            });
        }

        /// Writes `bin/fake-lsp` (in one step): `text`.
        fn write(&self, text: &str) {
            let tmp = self.dir.path().join("fake-lsp.tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&tmp, self.server()).unwrap();
        }

        /// Installs the server, in `mode`.
        fn install(&self, mode: &str) {
            self.set_mode(mode);
            let dir = self.dir.path().display();
            self.write(&format!(
                "#!/bin/sh\nexec python3 '{}' \"$(cat '{dir}/mode')\" \"$(cat '{dir}/state')\"\n",
                common::SCRIPT
            ));
        }

        fn set_mode(&self, mode: &str) {
            std::fs::write(self.dir.path().join("mode"), mode).unwrap();
        }
    }

    #[test]
    fn a_server_installed_after_the_first_question_is_used() {
        let bin = Bin::new();
        let fx = fake("good", |c| {
            bin.serve(c);
            c.limits.resolve_again = Duration::from_millis(300);
        });
        let wait = Duration::from_secs(5);
        assert!(fx
            .diagnostics("a.fake", "error", wait, Duration::ZERO)
            .is_empty());
        assert_eq!(fx.state_of("fake"), ServerState::Missing);
        bin.install("good");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            fx.diagnostics("a.fake", "error", wait, wait),
            ["bad line 0"]
        );
        assert_eq!(fx.state_of("fake"), ServerState::Running);
        assert!(fx.log_text().contains("found"), "{}", fx.log_text());
        fx.shutdown_leaves_nothing();
    }

    #[test]
    fn a_server_that_could_not_be_started_is_tried_again_after_a_while() {
        let bin = Bin::new();
        let fx = fake("good", |c| {
            bin.serve(c);
            c.limits.start_retry = Duration::from_millis(1500);
        });
        // Found, but it cannot be run: its interpreter is missing (mid-upgrade, say).
        bin.write("#!/nonexistent/interpreter\n");
        let wait = Duration::from_secs(5);
        assert!(fx
            .diagnostics("a.fake", "error", wait, Duration::from_secs(1))
            .is_empty());
        assert!(
            matches!(fx.state_of("fake"), ServerState::Failed(ref why) if why.contains("cannot start")),
            "{:?}",
            fx.lsp.status()
        );
        bin.install("good");
        std::thread::sleep(Duration::from_millis(1600));
        assert_eq!(
            fx.diagnostics("a.fake", "error", wait, wait),
            ["bad line 0"]
        );
        assert_eq!(fx.state_of("fake"), ServerState::Running);
        assert_eq!(fx.starts().len(), 1);
        fx.shutdown_leaves_nothing();
    }

    #[test]
    fn a_server_given_up_on_gets_a_fresh_series_of_restarts_after_a_while() {
        let bin = Bin::new();
        let fx = fake("good", |c| {
            bin.serve(c);
            c.limits.given_up_for = Duration::from_secs(2);
        });
        bin.install("crash-at-start");
        let wait = Duration::from_secs(3);
        let end = Instant::now() + Duration::from_secs(10);
        while !matches!(fx.state_of("fake"), ServerState::Failed(_)) {
            assert!(Instant::now() < end, "never gave up: {:?}", fx.lsp.status());
            fx.diagnostics("a.fake", "error", wait, Duration::from_millis(1500));
            std::thread::sleep(Duration::from_millis(30));
        }
        assert_eq!(fx.starts().len(), 4, "{:?}", fx.starts());
        // Mended; started again once the wait after giving up has passed.
        bin.set_mode("good");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(
            fx.diagnostics("a.fake", "error", wait, Duration::from_secs(5)),
            ["bad line 0"]
        );
        assert_eq!(fx.state_of("fake"), ServerState::Running);
        assert_eq!(fx.starts().len(), 5, "{:?}", fx.starts());
        assert!(
            fx.log_text().contains("after giving up on it"),
            "{}",
            fx.log_text()
        );
        fx.shutdown_leaves_nothing();
    }
}

/// A server that stops answering after `initialize` (here stopped by SIGSTOP once it has
/// answered a question) while it owes work (a text given to it) is found hung once nothing came
/// from it for [`LspLimits::hang_timeout`] (shortened here), killed with its process group, and
/// started again as after a crash. Before, it was never found out: every question waited its
/// bound and answered what was known, for the client's life.
///
/// [`LspLimits::hang_timeout`]: claude_ide_bridge_lsp::LspLimits::hang_timeout
#[cfg(unix)]
#[test]
fn a_server_that_stops_answering_is_found_hung_killed_and_restarted() {
    let (fx, pid) = answered_then_stopped("good");
    asked_until_a_new_server_answers(&fx, pid, Duration::from_secs(3));
    assert_eq!(
        fx.log_text().matches("hung: nothing from it").count(),
        1,
        "{}",
        fx.log_text()
    );
    fx.others_keep_working();
    fx.shutdown_leaves_nothing();
}

/// The same for a server asked by pulls, each given up at its deadline (shorter than the hang
/// timeout) before the next is sent: its silence counts from the first pull it did not answer,
/// so it is found hung, killed and started again. Before, each pull cancelled left it owing
/// nothing, the next one started the count again, and it was never found out.
#[cfg(unix)]
#[test]
fn a_pull_server_that_stops_answering_is_found_hung() {
    let (fx, pid) = answered_then_stopped("pull");
    asked_until_a_new_server_answers(&fx, pid, Duration::from_millis(500));
    fx.shutdown_leaves_nothing();
}

/// A server in `mode`, with a hang timeout of 1.5 s, that answered a first question and was then
/// stopped (SIGSTOP): its pid.
#[cfg(unix)]
fn answered_then_stopped(mode: &str) -> (Fx, u32) {
    let fx = fake(mode, |c| {
        c.limits.hang_timeout = Duration::from_millis(1500)
    });
    let wait = Duration::from_secs(3);
    assert_eq!(
        fx.diagnostics("a.fake", "error\n", wait, wait),
        ["bad line 0"]
    );
    let pid = fx.first_pid();
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    (fx, pid)
}

/// Asks about a new text, each time waiting `wait`, until a server answers for it (the stopped
/// one, `pid`, never will): it was killed and a second one started. Fails after 10 s.
#[cfg(unix)]
fn asked_until_a_new_server_answers(fx: &Fx, pid: u32, wait: Duration) {
    let end = Instant::now() + Duration::from_secs(10);
    while fx.diagnostics("a.fake", "x\nerror\n", wait, wait) != ["bad line 1"] {
        assert!(
            Instant::now() < end,
            "never found hung: {:?}\n{}",
            fx.lsp.status(),
            fx.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(fx.starts().len(), 2, "{:?}", fx.starts());
    assert!(!alive(pid), "the hung server was not killed");
}
