use super::*;

/// "Not known yet" names the servers of the set its answer waits on (starting, or late), not
/// those left out of it (down, or silent past `late_after`), whose part is missing anyway.
#[test]
fn not_known_names_only_the_servers_waited_for() {
    let down = |server: &str, why| Down {
        server: server.into(),
        why,
    };
    let answer = not_known(
        "file:///w/a.py",
        &[
            down("pyright-langserver --stdio", DownReason::Starting),
            down(
                "pylsp",
                DownReason::NotRunning("not running (exited)".into()),
            ),
            down("ruff server", DownReason::Late),
            down("mypy", DownReason::LeftOut(Duration::from_secs(60))),
        ],
    );
    assert!(answer.is_error, "{answer:?}");
    let text = serde_json::to_string(&answer).unwrap();
    assert!(
        text.contains(
            "; waiting for pyright-langserver --stdio: still starting; ruff server: no answer in time"
        ),
        "{text}"
    );
    assert!(!text.contains("pylsp") && !text.contains("mypy"), "{text}");
    // None waited for, one not running (crashed, to be started again): that is what is said,
    // not a server late.
    let answer = not_known(
        "file:///w/a.py",
        &[down(
            "pylsp",
            DownReason::NotRunning("not running (exited)".into()),
        )],
    );
    let text = serde_json::to_string(&answer).unwrap();
    assert!(answer.is_error, "{text}");
    assert!(
        text.contains(
            "not known: its language server is not running (pylsp: not running (exited)); the bridge starts it again"
        ),
        "{text}"
    );
    assert!(!text.contains("in time"), "{text}");
    // One of a set exited and started again, the others answered: the same.
    let answer = not_known(
        "file:///w/a.py",
        &[down(
            "pyright-langserver --stdio",
            DownReason::Restarting("not running (exited)".into()),
        )],
    );
    let text = serde_json::to_string(&answer).unwrap();
    assert!(
        text.contains(
            "not known: its language server is not running (pyright-langserver --stdio: not running (exited)); the bridge starts it again"
        ),
        "{text}"
    );
    // Stopped with the bridge: said so, not "the bridge starts it again".
    let answer = not_known(
        "file:///w/a.py",
        &[down("pyright-langserver --stdio", DownReason::Stopping)],
    );
    let text = serde_json::to_string(&answer).unwrap();
    assert!(answer.is_error, "{text}");
    assert!(
        text.contains("not known: the bridge is stopping, its language servers with it"),
        "{text}"
    );
    assert!(!text.contains("again"), "{text}");
    // Beside one starting: waited for, both named.
    let answer = not_known(
        "file:///w/a.py",
        &[
            down("ruff server", DownReason::Starting),
            down(
                "pyright-langserver --stdio",
                DownReason::Restarting("not running (exited)".into()),
            ),
        ],
    );
    let text = serde_json::to_string(&answer).unwrap();
    assert!(
        text.contains("; waiting for ruff server: still starting; pyright-langserver --stdio: not running (exited), started again shortly"),
        "{text}"
    );
}

/// What a client named goes into notes cut: a 10 MiB URI is not kept or printed whole.
#[test]
fn notes_are_cut_at_a_character_boundary() {
    assert_eq!(cut("short"), "short");
    let long = "é".repeat(1_000_000);
    let c = cut(&long);
    assert!(c.len() <= 303 && c.ends_with("..."), "{}", c.len());
    assert!(c.starts_with("éé"));
}

/// An answer past MAX_ANSWER_BYTES keeps errors first, in file order, and drops what does
/// not fit (40,000 diagnostics of 2,000 characters made a 160 MB answer, past the client
/// connection's 64 MiB limit: the client was dropped).
#[test]
fn answers_are_cut_to_their_limit_errors_first() {
    let diag = |severity: &str, n: usize| Diagnostic {
        message: format!("{n:06}{}", "m".repeat(2000)),
        severity: severity.into(),
        range: claude_ide_bridge::Range::new(
            claude_ide_bridge::Position::new(0, 0),
            claude_ide_bridge::Position::new(0, 1),
        ),
        source: None,
        code: None,
    };
    let files: Vec<FileDiagnostics> = (0..200)
        .map(|f| FileDiagnostics {
            uri: format!("file:///w/{f:03}.py"),
            diagnostics: (0..200)
                .map(|n| {
                    diag(
                        if n % 2 == 0 {
                            Diagnostic::WARNING
                        } else {
                            Diagnostic::ERROR
                        },
                        n,
                    )
                })
                .collect(),
        })
        .collect();
    let (kept, left_out) = within_answer(files);
    let count: usize = kept.iter().map(|f| f.diagnostics.len()).sum();
    assert_eq!(count + left_out, 40_000);
    assert!(count > 900, "{count} kept");
    assert!(serde_json::to_vec(&kept).unwrap().len() <= MAX_ANSWER_BYTES);
    assert!(kept
        .iter()
        .flat_map(|f| &f.diagnostics)
        .all(|d| d.severity == Diagnostic::ERROR));
    assert_eq!(kept[0].uri, "file:///w/000.py");
    assert_eq!(kept[0].diagnostics.len(), 100, "a file's errors, in order");
    assert!(kept[0].diagnostics[0].message.starts_with("000001"));
    // Within the limit: unchanged.
    let small = vec![FileDiagnostics {
        uri: "file:///w/a.py".into(),
        diagnostics: vec![diag(Diagnostic::HINT, 1)],
    }];
    assert_eq!(within_answer(small.clone()), (small, 0));
}

/// An error on the first character of line 0.
fn error_on_line_0(message: &str) -> Diagnostic {
    Diagnostic {
        message: message.into(),
        severity: Diagnostic::ERROR.into(),
        range: claude_ide_bridge::Range::new(
            claude_ide_bridge::Position::new(0, 0),
            claude_ide_bridge::Position::new(0, 1),
        ),
        source: None,
        code: None,
    }
}

#[test]
fn the_check_before_a_write_is_answered_from_memory() {
    let (a, t0) = (Path::new("/w/a.py"), Instant::now());
    let err = error_on_line_0("old error");
    let mut m = Memory::default();
    // Nothing accepted: ask the server.
    assert_eq!(m.before_write(a, 1, t0, Some(0)), None);
    m.answered(a, 1, std::slice::from_ref(&err), 0, 0);
    // Accepted text 2 while the disk holds 1: the last answer for 1.
    m.changed(a, Some(2), t0);
    assert_eq!(
        m.before_write(a, 1, t0, Some(0)),
        Some(Some(vec![err.clone()]))
    );
    // Another text on disk, never answered: not known (never an empty list in its place).
    assert_eq!(m.before_write(a, 3, t0, Some(0)), Some(None));
    // Written: the server is asked again, and the pending text is forgotten.
    assert_eq!(m.before_write(a, 2, t0, Some(0)), None);
    assert_eq!(m.before_write(a, 1, t0, Some(0)), None);
    // Never written: forgotten after a while.
    m.changed(a, Some(5), t0);
    assert_eq!(
        m.before_write(a, 1, t0 + PENDING + Duration::from_secs(1), Some(0)),
        None
    );
    // writeFile (written already) never pends; memory stays bounded.
    m.changed(a, Some(6), t0);
    m.changed(a, None, t0);
    assert_eq!(m.before_write(a, 1, t0, Some(0)), None);
    for i in 0..100 {
        let p = PathBuf::from(format!("/w/{i}.py"));
        m.changed(&p, Some(i), t0);
        m.answered(&p, i, &[], 0, 0);
    }
    assert!(m.recent.len() <= RECENT && m.pending.len() <= RECENT && m.answers.len() <= RECENT);
}

/// An answer remembered for a file's text is forgotten once its language's servers checked
/// documents again because a file they may include changed (a header under clangd): it belongs
/// to the header's old text too. One asked before such a check again and answered after is not
/// kept. The count is its language's ([`Lsp::rechecks_for`]): a header changed under clangd
/// leaves a Python file's answer standing.
#[test]
fn answers_are_forgotten_once_documents_were_checked_again() {
    let (a, t0) = (Path::new("/w/main.c"), Instant::now());
    let err = error_on_line_0("implicit declaration");
    let mut m = Memory::default();
    m.answered(a, 1, std::slice::from_ref(&err), 0, 0);
    m.changed(a, Some(2), t0);
    assert_eq!(
        m.before_write(a, 1, t0, Some(0)),
        Some(Some(vec![err.clone()]))
    );
    // A header changed: the answer is no longer known (never the old one in its place).
    assert_eq!(m.before_write(a, 1, t0, Some(1)), Some(None));
    // The client's own check takes it, as what the server said of this text before.
    assert_eq!(
        m.before_write(a, 1, t0, None),
        Some(Some(vec![err.clone()]))
    );
    // Asked before that check again, answered after it: not kept, and the one before it is
    // forgotten (the client's check would take an answer from two header changes ago).
    m.answered(a, 1, std::slice::from_ref(&err), 0, 1);
    assert_eq!(m.before_write(a, 1, t0, Some(1)), Some(None));
    assert_eq!(m.before_write(a, 1, t0, None), Some(None));
    m.answered(a, 1, &[], 1, 1);
    assert_eq!(m.before_write(a, 1, t0, Some(1)), Some(Some(Vec::new())));
}

/// A text written with CRLF line ends or a byte-order mark is the same text to the memory (the
/// client's Write tool keeps a file's); any other difference is not.
#[test]
fn line_ends_and_a_byte_order_mark_are_one_text() {
    let lf = text_hash("a\nb\n");
    assert_eq!(text_hash("a\r\nb\r\n"), lf);
    assert_eq!(text_hash("\u{feff}a\r\nb\n"), lf);
    for other in ["a\nb", "a\n\nb\n", "a\rb\n", "a\nb\n\u{feff}", "ab\n", ""] {
        assert_ne!(text_hash(other), lf, "{other:?}");
    }
}

#[test]
fn files_asked_about_are_read_again_by_the_next_check() {
    let (a, b, t0) = (Path::new("/w/a.py"), Path::new("/w/b.py"), Instant::now());
    let mut m = Memory::default();
    // A baseline asked: the file is among those `getDiagnostics {}` reads again, the most
    // recent last.
    m.asked(a);
    m.asked(b);
    m.asked(a);
    assert_eq!(m.recent, [b.to_path_buf(), a.to_path_buf()]);
    // Asking about a file whose accepted text is not written yet keeps it pending.
    m.changed(b, Some(2), t0);
    m.asked(b);
    assert_eq!(m.before_write(b, 1, t0, Some(0)), Some(None));
    for i in 0..100 {
        m.asked(&PathBuf::from(format!("/w/{i}.py")));
    }
    assert!(m.recent.len() <= RECENT && m.pending.is_empty());
}

/// The checks of the files opened at connect (`--lsp-warm connect`) take places of their own:
/// while [`WARM_MAX`] of them hold theirs (their server never answers), every one of the
/// [`REFRESHES`] `openDiff` checks still starts, so an accept finds its baseline under way
/// whatever `WARM_MAX` is. Sharing one budget, the second `openDiff` here found none. Once
/// the servers are stopped, every thread ends and gives its place back.
#[cfg(unix)]
#[test]
fn warm_opens_leave_the_open_diff_checks_their_places() {
    // A server that never answers: each check holds its place until its wait ends.
    let fake = Fake::with("sleep 600", Duration::from_secs(60));
    let (s, ws_dir) = (fake.servers.clone(), fake.ws.clone());
    let file = |name: &str| {
        let path = ws_dir.join(name);
        std::fs::write(&path, "x = 1\n").unwrap();
        path.to_str().unwrap().to_owned()
    };

    for i in 0..WARM_MAX {
        assert!(s.check_on_disk(&file(&format!("warm{i}.py")), OnDisk::Warm));
    }
    let diffs: Vec<String> = (0..REFRESHES)
        .map(|i| file(&format!("diff{i}.py")))
        .collect();
    for (i, d) in diffs.iter().enumerate() {
        assert!(
            s.check_on_disk(d, OnDisk::Diff),
            "openDiff {i} found no place while {WARM_MAX} warm opens held theirs"
        );
    }
    // Both bounded.
    assert!(!s.check_on_disk(&file("diff_more.py"), OnDisk::Diff));
    assert!(!s.check_on_disk(&file("warm_more.py"), OnDisk::Warm));
    // The checks are under way (an accept of these files waits for them).
    {
        let checks = s.checks();
        for d in &diffs {
            assert_eq!(checks.get(d), Some(&1), "{d}");
        }
    }

    drop(fake);
    let until = Instant::now() + Duration::from_secs(30);
    while s.refreshing.running.load(Ordering::Acquire) > 0
        || s.warm_opening.running.load(Ordering::Acquire) > 0
        || !s.checks().is_empty()
    {
        assert!(
            Instant::now() < until,
            "the checks did not end once stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Language servers whose `python` server is the lsp crate's scripted one (`fake_lsp.py`:
/// one error per line holding `error`), on the workspace `ws`; stopped when dropped (a failed
/// assertion too: no child is left).
#[cfg(unix)]
struct Fake {
    servers: Arc<LanguageServers>,
    ws: PathBuf,
    _dir: tempfile::TempDir,
}

#[cfg(unix)]
impl Fake {
    fn new() -> Fake {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lsp/tests/fake_lsp.py");
        Fake::with(
            &format!("python3 '{}' good", script.display()),
            Duration::from_secs(30),
        )
    }

    /// With `python` run as `command`, and `wait` for its start and each answer.
    fn with(command: &str, wait: Duration) -> Fake {
        use claude_ide_bridge_lsp::{parse_override, LspConfig, ServerTable};
        let dir = tempfile::tempdir().unwrap();
        let ws_dir = dir.path().join("ws");
        std::fs::create_dir(&ws_dir).unwrap();
        let mut servers = ServerTable::builtin();
        servers.set(parse_override(&format!("python={command}")).unwrap());
        let lsp = Lsp::new(
            LspConfig {
                servers,
                workspace_folders: vec![ws_dir.clone()],
                diagnostics_wait: wait,
                start_wait: wait,
                ..LspConfig::default()
            },
            |_| {},
        );
        let log = Log::open(&dir.path().join("lsp.log")).unwrap();
        let ws = Workspace::new(
            vec![ws_dir.to_str().unwrap().to_owned()],
            claude_ide_bridge_files::Limits::default(),
        );
        Fake {
            servers: Arc::new(LanguageServers::new(lsp, log, ws).warm(Warm::Connect)),
            ws: ws_dir,
            _dir: dir,
        }
    }
}

#[cfg(unix)]
impl Drop for Fake {
    fn drop(&mut self) {
        self.servers.lsp.shutdown(Duration::from_secs(2));
    }
}

/// The check of the text on disk at an `openDiff` is skipped only for accepted contents still
/// on their way (accepted within [`PENDING`], not yet on disk). An entry left by an earlier
/// accept whose client never asked again (older than [`PENDING`], for another text) stopped
/// every later check of the file: its baseline was never known, so the client skipped its
/// check after the write again, and the entry stayed.
#[cfg(unix)]
#[test]
fn only_contents_on_their_way_skip_the_check_of_the_text_on_disk() {
    let fake = Fake::new();
    let (s, ws_dir) = (&fake.servers, &fake.ws);
    let on_disk = "error\n";
    let file = |name: &str| {
        let path = ws_dir.join(name);
        std::fs::write(&path, on_disk).unwrap();
        path.to_str().unwrap().to_owned()
    };
    // Checks `name`'s text on disk with `pending` accepted contents of it (their hash, and
    // how long ago they were accepted): whether an answer for the text on disk is remembered.
    let checked = |name: &str, pending: (u64, Duration)| {
        let named = file(name);
        let path = PathBuf::from(s.ws.read_text(&named).unwrap().path);
        let at = Instant::now().checked_sub(pending.1).unwrap();
        s.memory().pending.insert(path.clone(), (pending.0, at));
        assert!(s.check_on_disk(&named, OnDisk::Diff));
        let until = Instant::now() + Duration::from_secs(60);
        while s.checks().contains_key(&named) {
            assert!(Instant::now() < until, "the check of {name} did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
        let hash = text_hash(on_disk);
        let m = s.memory();
        m.answers
            .iter()
            .any(|(p, h, d, _)| *p == path && *h == hash && d.len() == 1)
    };
    let other = text_hash("accepted\n");
    let long_ago = PENDING + Duration::from_secs(1);
    assert!(
        checked("stale.py", (other, long_ago)),
        "an entry older than the pending window stopped the check"
    );
    assert!(
        checked("written.py", (text_hash(on_disk), Duration::ZERO)),
        "accepted contents already on disk stopped the check"
    );
    // Accepted contents on their way: the server keeps them (the case the skip is for).
    assert!(!checked("on_its_way.py", (other, Duration::ZERO)));
}

/// Notes about files a client named, past their bound, leave the notes about servers their
/// own room: a server given up on after a client asked about hundreds of files outside the
/// workspace is still said (it was not: one set held both).
#[cfg(unix)]
#[test]
fn notes_about_files_leave_room_for_notes_about_servers() {
    let fake = Fake::new();
    for n in 0..MAX_NOTES + 40 {
        let answer = fake
            .servers
            .file(&format!("file:///elsewhere/{n}.py"), Asker::Model);
        assert!(!answer.is_error, "{answer:?}");
    }
    fake.servers.note_once(
        "failed python gave up".to_owned(),
        "language servers: python: exited; gave up after 3 restarts",
    );
    let log = std::fs::read_to_string(fake._dir.path().join("lsp.log")).unwrap();
    let about_files = log.matches("not asked about file:///elsewhere/").count();
    assert_eq!(about_files, MAX_NOTES);
    assert_eq!(log.matches(LAST_NOTE).count(), 1);
    assert!(
        log.contains("python: exited; gave up after 3 restarts"),
        "{log}"
    );
}

/// `getDiagnostics {uri}` with nothing pending: the client's own check (a `_meta` naming no
/// tool use, as its baseline before an edit made without a diff) is answered within its
/// 500 ms, "not known yet" when the server has not answered; the model's question, or one
/// that does not say whose it is, waits for the server. Before, the client's waited for the language's start wait (here 30 s), which
/// the client counts as a timeout: three in a row and it asks for no more baselines.
#[cfg(unix)]
#[test]
fn the_clients_own_check_is_answered_within_its_bound() {
    // A server that never answers.
    let fake = Fake::with("sleep 600", Duration::from_secs(30));
    let path = fake.ws.join("a.py");
    std::fs::write(&path, "x = 1\n").unwrap();
    let uri = file_uri(path.to_str().unwrap());
    let started = Instant::now();
    let answer = fake.servers.file(&uri, Asker::Client);
    assert!(answer.is_error, "{answer:?}");
    assert!(
        serde_json::to_string(&answer)
            .unwrap()
            .contains("not known yet"),
        "{answer:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // Its check of every file after an edit, too (the file asked about is among those it
    // asks the server about again): within the client's 2 s, not the server's start wait.
    let started = Instant::now();
    let all = fake.servers.all(
        &BTreeMap::new(),
        &HashSet::new(),
        Asker::Client,
        &Spellings::default(),
    );
    assert!(!all.is_error, "{all:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A question that does not say whose it is (no `_meta`: another client) is still waiting
    // for the server once the client's was answered, as the model's does.
    let (tx, rx) = std::sync::mpsc::channel();
    let servers = fake.servers.clone();
    let model = std::thread::spawn(move || tx.send(servers.file(&uri, Asker::Unknown)));
    assert!(rx.recv_timeout(Duration::from_secs(2)).is_err());
    drop(fake);
    let _ = model.join();
}

/// `getDiagnostics {uri}` is held to the answer's bound as `getDiagnostics {}` is: 200
/// diagnostics of 2,000 control characters answered 2.4 MB.
#[cfg(unix)]
#[test]
fn one_files_answer_is_within_the_answers_bound() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lsp/tests/fake_lsp.py");
    let fake = Fake::with(
        &format!("python3 '{}' long-messages", script.display()),
        Duration::from_secs(30),
    );
    let path = fake.ws.join("long.py");
    std::fs::write(&path, "error\n".repeat(200)).unwrap();
    let uri = file_uri(path.to_str().unwrap());
    let answer = fake.servers.file(&uri, Asker::Model);
    assert!(!answer.is_error, "{answer:?}");
    let text = match &answer.content[0] {
        claude_ide_bridge::Content::Text(text) => text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(text.len() <= MAX_ANSWER_BYTES, "{} bytes", text.len());
    let files: Vec<FileDiagnostics> = serde_json::from_str(&text).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].uri, uri);
    assert!(
        (100..200).contains(&files[0].diagnostics.len()),
        "{}",
        files[0].diagnostics.len()
    );
}

/// An accepted diff's contents are told saved to a server that checks the disk on save once
/// the client has written them, with no `getDiagnostics` after, and written as its Write
/// tool keeps a file's CRLF line ends: the server then gets the text as written. Before, the
/// `didSave` waited for a later `getDiagnostics` that read the file holding the very same
/// text (and a CRLF file never did).
#[cfg(unix)]
#[test]
fn an_accepted_diff_is_told_saved_once_the_client_writes_it() {
    let state = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lsp/tests/fake_lsp.py");
    let fake = Fake::with(
        &format!(
            "python3 '{}' save-text '{}'",
            script.display(),
            state.path().display()
        ),
        Duration::from_secs(30),
    );
    let saved = || std::fs::read_to_string(state.path().join("saved")).unwrap_or_default();
    let accepted = "fine\nerror\n";
    for (name, before, written) in [
        ("lf.py", "fine\n", accepted.to_owned()),
        ("crlf.py", "fine\r\n", accepted.replace('\n', "\r\n")),
    ] {
        let path = fake.ws.join(name);
        std::fs::write(&path, before).unwrap();
        let named = path.to_str().unwrap();
        let real = PathBuf::from(fake.servers.ws.read_text(named).unwrap().path);
        // Its baseline: the server has the file open.
        assert!(
            serde_json::to_string(&fake.servers.file(&file_uri(named), Asker::Model))
                .unwrap()
                .contains("[]")
        );
        fake.servers.accepting(named, &real, accepted);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !saved().lines().any(|l| l == written.len().to_string()),
            "{name} told saved before it was written: {}",
            saved()
        );
        std::fs::write(&path, &written).unwrap();
        let until = Instant::now() + PENDING;
        while !saved().lines().any(|l| l == written.len().to_string()) {
            assert!(
                Instant::now() < until,
                "{name} never told saved: {}",
                saved()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Written before the wait saw it, with a later accept's contents pending by then: those
    // stay pending (the later accept waits for its own write), and the server keeps them.
    let path = fake.ws.join("later.py");
    std::fs::write(&path, "fine\n").unwrap();
    let named = path.to_str().unwrap();
    let real = PathBuf::from(fake.servers.ws.read_text(named).unwrap().path);
    fake.servers.file(&file_uri(named), Asker::Model);
    fake.servers.accepting(named, &real, accepted);
    let later = text_hash("fine\nlater error\n");
    let pending = || fake.servers.memory().pending.get(&real).map(|p| p.0);
    fake.servers
        .memory()
        .pending
        .insert(real.clone(), (later, Instant::now()));
    std::fs::write(&path, accepted).unwrap();
    std::thread::sleep(AWAIT_WRITE_POLL * 5);
    assert_eq!(pending(), Some(later));
}

/// `getDiagnostics {}` leaves a file the editor reports (`--stdio`) to the editor, however
/// its URI is spelled: here with a space where the server's URI has `%20`. Compared as
/// exact strings, the answer held the file twice, the server's diagnostics beside the
/// editor's.
#[cfg(unix)]
#[test]
fn the_editors_file_is_the_editors_however_its_uri_is_spelled() {
    let fake = Fake::new();
    let path = fake.ws.join("a b.py");
    std::fs::write(&path, "error\n").unwrap();
    let named = path.to_str().unwrap();
    let server_uri = file_uri(named);
    let asked = fake.servers.file(&server_uri, Asker::Model);
    assert!(
        serde_json::to_string(&asked)
            .unwrap()
            .contains("bad line 0"),
        "{asked:?}"
    );
    let editor_uri = format!("file://{named}");
    assert_ne!(editor_uri, server_uri);
    assert!(same_uri(&editor_uri, &server_uri));
    let mine = error_on_line_0("the editor's");
    // `getDiagnostics {}` with the editor reporting `uri` (by `resolved` keys too).
    let all = |uri: &str, resolved: HashSet<String>| -> Vec<FileDiagnostics> {
        let editor = BTreeMap::from([(uri.to_owned(), vec![mine.clone()])]);
        let all = (fake.servers).all(&editor, &resolved, Asker::Model, &Spellings::default());
        let claude_ide_bridge::Content::Text(json) = &all.content[0] else {
            panic!("{all:?}");
        };
        serde_json::from_str(json).unwrap()
    };
    assert_eq!(
        all(&editor_uri, HashSet::new()),
        [FileDiagnostics {
            uri: editor_uri,
            diagnostics: vec![mine.clone()]
        }]
    );

    // The editor names the file through a link to its folder (Vim's folder a link, claude's
    // working directory resolved): the same file, by the key its report was kept with.
    let linked = fake.ws.join("linked");
    std::os::unix::fs::symlink(&fake.ws, &linked).unwrap();
    let through = file_uri(linked.join("a b.py").to_str().unwrap());
    assert!(!same_uri(&through, &server_uri));
    let key = resolved_key(&fake.servers.ws, &through);
    assert!(key.is_some());
    assert_eq!(key, resolved_key(&fake.servers.ws, &server_uri));
    assert_eq!(
        all(&through, HashSet::from([key.unwrap()])),
        [FileDiagnostics {
            uri: through.clone(),
            diagnostics: vec![mine.clone()]
        }],
        "the server's under the other name left out"
    );
}

#[test]
fn uris_and_paths() {
    assert!(same_uri("file:///w/a.py", "/w/a.py"));
    assert!(same_uri("file:///w/a%20b.py", "file:///w/a b.py"));
    assert!(!same_uri("file:///w/a.py", "file:///w/b.py"));
    for spelling in [
        "file:///w/./a.py",
        "file:///w//a.py",
        "/w/x/../a.py",
        "file:///w/a.py",
    ] {
        assert_eq!(
            editor_path(spelling).as_deref(),
            Some("/w/a.py"),
            "{spelling}"
        );
        assert!(same_uri(spelling, "/w/a.py"), "{spelling}");
    }
    assert_eq!(editor_path("/w/../../a.py"), None);
    #[cfg(unix)]
    assert_eq!(
        named_path("file:///w/a%20b.py").as_deref(),
        Some("/w/a b.py")
    );
    #[cfg(windows)]
    assert_eq!(
        named_path(r"file://C:\w\a.py").as_deref(),
        Some(r"C:\w\a.py")
    );
    #[cfg(windows)]
    assert_eq!(named_path("file:///c/w/a.py"), None);
    // A `claude` in WSL names drive C's file by its own path of it; on Linux that is a path.
    let in_wsl = named_path("file:///mnt/c/w/a b.py");
    #[cfg(windows)]
    assert_eq!(in_wsl.as_deref(), Some(r"C:\w\a b.py"));
    #[cfg(unix)]
    assert_eq!(in_wsl.as_deref(), Some("/mnt/c/w/a b.py"));
    // VS Code's spelling of a Windows file and claude's are one file.
    #[cfg(windows)]
    assert!(same_uri("file:///c%3A/w/A.py", r"C:\w\a.py"));
    #[cfg(unix)]
    assert!(!same_uri("file:///w/A.py", "/w/a.py"));
    assert!(named_path("file://").is_none());
    // The scheme in any case (RFC 3986), with or without an authority (RFC 8089); a `file:`
    // URI without a path names no file, and is not taken as a relative path either.
    #[cfg(unix)]
    assert_eq!(named_path("FILE:///w/a.py").as_deref(), Some("/w/a.py"));
    #[cfg(unix)]
    assert_eq!(named_path("File:/w/a.py").as_deref(), Some("/w/a.py"));
    assert!(named_path("FILE:a.py").is_none());
    assert_eq!(named_path("/w/a.py").as_deref(), Some("/w/a.py"));
    #[cfg(windows)]
    assert_eq!(named_path(r"C:\w\a.py").as_deref(), Some(r"C:\w\a.py"));
    assert_eq!(named_path("a.py").as_deref(), Some("a.py"));
    assert!(named_path("untitled:Untitled-1").is_none());
    assert!(named_path("_claude_fs_right:/w/a.py").is_none());
    // A share's path stays one (Windows Vim on a WSL project's file), its `..` within it; on
    // Unix a leading `//` is `/`.
    #[cfg(windows)]
    for (given, normal) in [
        (
            r"\\wsl.localhost\Ubuntu\home\a.rs",
            Some(r"\\wsl.localhost\Ubuntu\home\a.rs"),
        ),
        (r"\\srv\share\x\..\a.rs", Some(r"\\srv\share\a.rs")),
        ("//srv/share/./a.rs", Some(r"\\srv\share\a.rs")),
        (r"\\srv\share\..\..\x", None),
    ] {
        let native = editor_path(given).map(|p| crate::sys::native_path(&p));
        assert_eq!(native.as_deref(), normal, "{given}");
    }
    #[cfg(unix)]
    assert_eq!(editor_path("//w/a.py").as_deref(), Some("/w/a.py"));
}

/// A file of no known language is answered `[]`, said once per extension with the `--lsp` that
/// would add one; a file without an extension is said without one (it advised
/// `--lsp (none)=COMMAND`, which no language can be named).
#[cfg(unix)]
#[test]
fn a_file_of_no_known_language_is_said_with_advice_that_works() {
    let fake = Fake::new();
    for name in ["Makefile", "x.zzz", "y.zzz"] {
        std::fs::write(fake.ws.join(name), "x\n").unwrap();
        let uri = claude_ide_bridge::file_uri(fake.ws.join(name).to_str().unwrap());
        let answer = fake.servers.file(&uri, Asker::Model);
        assert!(!answer.is_error, "{answer:?}");
    }
    let log = std::fs::read_to_string(fake._dir.path().join("lsp.log")).unwrap();
    assert!(!log.contains("(none)"), "{log}");
    assert!(
        log.contains("no language known for files without an extension (such as "),
        "{log}"
    );
    let zzz = "no language known for files with extension zzz: getDiagnostics answers [] for \
               them (add one with --lsp zzz=COMMAND)";
    assert_eq!(log.matches(zzz).count(), 1, "{log}");
}
