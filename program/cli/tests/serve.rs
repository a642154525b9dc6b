//! `serve` against a WebSocket client: every tool, every `--on-diff` policy, confinement,
//! compatibility methods, the wire log and SIGTERM, on both runtimes.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

#[test]
fn every_tool_headless() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        fs::write(sb.ws.join("a.rs"), "fn main() {}\n").unwrap();
        // Without language servers (tests/lsp.rs has them): what the bridge answers alone.
        let mut s = Served::start(&sb, &["--runtime", rt, "--on-diff", "defer", "--no-lsp"]);
        let ws = sb.ws.to_string_lossy().to_string();
        let file = format!("{ws}/a.rs");
        let mut c = s.client();
        // A connection without the token is refused, and said so in words.
        let (status, _) = client::connect(s.port, None);
        assert_eq!(status, 401);
        s.stderr.wait_for(
            "refused: 401 Unauthorized, missing or wrong authentication token (no token or an old one: `doctor`'s look at the port",
        );

        let v = json_of(&call(&mut c, "getWorkspaceFolders", json!({})));
        assert_eq!(v["success"], true);
        assert_eq!(v["folders"][0]["path"], json!(ws));
        assert_eq!(v["rootPath"], json!(ws));
        assert_eq!(
            json_of(&call(&mut c, "getOpenEditors", json!({}))),
            json!({"tabs": []})
        );
        for t in ["getCurrentSelection", "getLatestSelection"] {
            let v = json_of(&call(&mut c, t, json!({})));
            assert_eq!(v["success"], false, "{t}");
            assert!(v["message"].is_string());
        }
        let v = json_of(&call(
            &mut c,
            "checkDocumentDirty",
            json!({"filePath": file}),
        ));
        assert_eq!(v["isDirty"], false);
        let r = call(&mut c, "saveDocument", json!({"filePath": file}));
        let v = json_of(&r);
        assert_eq!(v["saved"], false, "never a fake save: {v}");
        assert_eq!(
            texts(&call(&mut c, "get_all_opened_file_paths", json!({})))[0],
            ""
        );
        assert_eq!(
            json_of(&call(&mut c, "getDiagnostics", json!({}))),
            json!([])
        );
        assert_eq!(
            json_of(&call(
                &mut c,
                "getDiagnostics",
                json!({"uri": format!("file://{file}")})
            )),
            json!([])
        );
        assert!(is_error(&call(
            &mut c,
            "reformat_file",
            json!({"file_path": file})
        )));
        assert_eq!(
            texts(&call(
                &mut c,
                "reformat_file",
                json!({"file_path": format!("{ws}/nope.rs")})
            )),
            ["File not found"]
        );
        // A file that is there but may not be touched is refused with why, not "not found";
        // its path said once.
        let elsewhere = sb.root().join("elsewhere.rs");
        fs::write(&elsewhere, "x\n").unwrap();
        let elsewhere = elsewhere.to_string_lossy();
        for (tool, args) in [
            ("reformat_file", json!({"file_path": elsewhere})),
            ("openFile", json!({"filePath": elsewhere})),
        ] {
            let r = call(&mut c, tool, args);
            let text = texts(&r).join("");
            assert!(is_error(&r), "{tool}: {r}");
            assert!(text.contains("outside the workspace"), "{tool}: {text}");
            assert_eq!(text.matches(&*elsewhere).count(), 1, "{tool}: {text}");
        }
        let r = call(&mut c, "executeCode", json!({"code": "1+1"}));
        assert!(is_error(&r) && texts(&r)[0].contains("headless"), "{r}");
        let r = call(&mut c, "openFile", json!({"filePath": file}));
        assert!(
            !is_error(&r) && texts(&r)[0].contains("no editor window"),
            "{r}"
        );
        s.stderr.wait_for(&format!("claude asked to open {file}"));
        // A file named by its `file://` URI is that file (it was joined to the folder as a
        // relative path: "File not found").
        let uri = claude_ide_bridge::file_uri(&file);
        let r = call(
            &mut c,
            "openFile",
            json!({"filePath": uri, "makeFrontmost": false}),
        );
        assert_eq!(json_of(&r)["lineCount"], 1, "{r}");
        let v = json_of(&call(
            &mut c,
            "openFile",
            json!({"filePath": file, "makeFrontmost": false}),
        ));
        assert_eq!(v["success"], false);
        assert_eq!(v["lineCount"], 1);
        assert!(is_error(&call(
            &mut c,
            "openFile",
            json!({"filePath": format!("{ws}/missing")})
        )));
        let v = json_of(&call(&mut c, "open_files", json!({"file_paths": [file]})));
        assert_eq!(v, json!({"opened_files": []}));
        assert_eq!(
            texts(&call(&mut c, "close_tab", json!({"tab_name": "x"}))),
            ["TAB_CLOSED"]
        );
        assert_eq!(
            texts(&call(&mut c, "closeAllDiffTabs", json!({}))),
            ["CLOSED_0_DIFF_TABS"]
        );
        assert_eq!(s.stop(), 0);
        assert!(!s.lock.exists());
    }
}

#[test]
fn open_files_flag_runs_the_editor() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.rs"), "x\n").unwrap();
    let marker = sb.root().join("opened");
    let script = sb.root().join("ed.sh");
    fs::write(
        &script,
        format!("#!/bin/sh\necho \"$@\" > {}\n", marker.display()),
    )
    .unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd_sb = Served::start_with_env(
        &sb,
        &["--open-files", "--on-diff", "defer"],
        &[("EDITOR", script.to_str().unwrap())],
    );
    let mut c = cmd_sb.client();
    let file = sb.ws.join("a.rs").to_string_lossy().to_string();
    let opened = |what: &str| {
        let give_up = std::time::Instant::now() + WAIT;
        loop {
            // The script may still be writing: wait for its whole line.
            if let Some(line) = fs::read_to_string(&marker)
                .ok()
                .filter(|l| l.ends_with('\n'))
            {
                let _ = fs::remove_file(&marker);
                return line.trim_end().to_string();
            }
            assert!(
                std::time::Instant::now() < give_up,
                "the editor did not run for {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let r = call(&mut c, "openFile", json!({"filePath": file}));
    assert_eq!(texts(&r)[0], format!("Opened file: {file}"));
    assert_eq!(opened("an absolute path"), file);
    // A relative path is the workspace's file, wherever the bridge runs: the editor gets it
    // absolute.
    let r = call(&mut c, "openFile", json!({"filePath": "a.rs"}));
    assert_eq!(texts(&r)[0], "Opened file: a.rs");
    assert_eq!(opened("a relative path"), file);
    let r = call(
        &mut c,
        "open_files",
        json!({"file_paths": ["a.rs", "missing.rs"]}),
    );
    assert_eq!(json_of(&r)["opened_files"], json!(["a.rs"]));
    assert_eq!(opened("open_files"), file);
    assert_eq!(cmd_sb.stop(), 0);
}

/// The editor `--open-files` starts is the user's and stays: in a process group of its own, so
/// that what the terminal sends the bridge's (Ctrl-C, Ctrl-Z, its hang-up) does not reach it.
/// Before, Ctrl-C to stop the bridge closed a gedit with unsaved work too.
#[test]
fn the_open_files_editor_is_not_in_the_bridges_process_group() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.rs"), "x\n").unwrap();
    let pid_file = sb.root().join("editor.pid");
    let script = sb.root().join("ed.sh");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {0}.tmp && mv {0}.tmp {0}\necho $$ >> {0}.all\nexec sleep 30\n",
            pid_file.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut s = Served::start_with_env(
        &sb,
        &["--open-files", "--on-diff", "defer"],
        &[("EDITOR", script.to_str().unwrap())],
    );
    let mut c = s.client();
    let r = call(&mut c, "openFile", json!({"filePath": "a.rs"}));
    assert_eq!(texts(&r)[0], "Opened file: a.rs");
    let give_up = std::time::Instant::now() + WAIT;
    let editor: u32 = loop {
        if let Some(pid) = fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the editor did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let pgid = |pid: u32| -> u32 {
        let o = std::process::Command::new("ps")
            .args(["-o", "pgid=", "-p", &pid.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    let bridge = s.child.id();
    assert_ne!(pgid(editor), pgid(bridge));
    assert_eq!(pgid(editor), editor, "a group of its own");
    // Asked again while that editor runs: the file is open, no other editor is started. Other
    // files start editors, up to 8 running at once; then the answer says it was not opened.
    let _ = fs::remove_file(&pid_file);
    let r = call(&mut c, "openFile", json!({"filePath": "a.rs"}));
    assert_eq!(texts(&r)[0], "Opened file: a.rs");
    for i in 1..8 {
        fs::write(sb.ws.join(format!("{i}.rs")), "x\n").unwrap();
        let r = call(&mut c, "openFile", json!({"filePath": format!("{i}.rs")}));
        assert_eq!(texts(&r)[0], format!("Opened file: {i}.rs"));
    }
    fs::write(sb.ws.join("8.rs"), "x\n").unwrap();
    let r = call(&mut c, "openFile", json!({"filePath": "8.rs"}));
    assert!(texts(&r)[0].contains("has no editor window"), "{r}");
    s.stderr.wait_for("editors it started are all still open");
    // Each started writes its pid (at its own pace).
    let all = pid_file.with_extension("pid.all");
    let give_up = std::time::Instant::now() + WAIT;
    let all = loop {
        let all = fs::read_to_string(&all).unwrap_or_default();
        if all.lines().count() >= 8 || std::time::Instant::now() > give_up {
            break all;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let editors: Vec<&str> = all.lines().collect();
    assert_eq!(editors.len(), 8, "{all}");
    assert_eq!(s.stop(), 0);
    // It stays open after the stop, as before.
    assert!(running(editor));
    for pid in editors {
        let _ = std::process::Command::new("kill").arg(pid).status();
    }
}

#[test]
fn accept_answers_file_saved_inside_and_refuses_outside() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let outside = sb.root().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        symlink(&outside, sb.ws.join("escape")).unwrap();
        symlink(outside.join("secret.txt"), sb.ws.join("secret-link.txt")).unwrap();
        fs::write(sb.ws.join("run.sh"), "old\n").unwrap();
        fs::set_permissions(
            sb.ws.join("run.sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o751),
        )
        .unwrap();
        let mut s = Served::start(&sb, &["--runtime", rt, "--on-diff", "accept"]);
        let mut c = s.client();

        let r = call(
            &mut c,
            "openDiff",
            open_diff_args(&sb.ws.join("run.sh"), "new\n", "t1"),
        );
        assert_eq!(texts(&r), ["FILE_SAVED", "new\n"]);
        // The client writes FILE_SAVED contents itself; the bridge leaves the file as it was
        // (writing it first makes the real client's edit fail: "String not found in file").
        assert_eq!(fs::read_to_string(sb.ws.join("run.sh")).unwrap(), "old\n");
        s.stderr.wait_for(&format!(
            "diff accepted: {}",
            sb.ws.join("run.sh").display()
        ));
        let r = call(
            &mut c,
            "openDiff",
            open_diff_args(&sb.ws.join("sub/new.txt"), "fresh\n", "t2"),
        );
        assert_eq!(texts(&r), ["FILE_SAVED", "fresh\n"]);
        assert!(!sb.ws.join("sub/new.txt").exists());

        let ws = sb.ws.to_string_lossy().to_string();
        let bad = [
            outside.join("secret.txt").to_string_lossy().to_string(),
            format!("{ws}/../outside/secret.txt"),
            format!("{ws}/escape/secret.txt"),
            format!("{ws}/escape/planted.txt"),
            format!("{ws}/secret-link.txt"),
        ];
        for (i, p) in bad.iter().enumerate() {
            let args = json!({"old_file_path": p, "new_file_path": p, "new_file_contents": "pwned\n", "tab_name": format!("b{i}")});
            let r = call(&mut c, "openDiff", args);
            assert!(is_error(&r), "{p} must be refused: {r}");
            // claude is told which path was refused.
            assert!(texts(&r)[0].starts_with(&format!("Refused {p} (")), "{r}");
            let why = match p.contains("/../") {
                true => "diff refused (`..` in the path",
                false => "diff refused (outside the workspace",
            };
            let said = |l: &String| l.contains(why) && l.ends_with(&format!(": {p}"));
            let give_up = std::time::Instant::now() + WAIT;
            while !s.stderr.all().iter().any(said) {
                assert!(std::time::Instant::now() < give_up, "{}", s.stderr.text());
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // `..` after a link: the check would take `escape/..` for the workspace itself, while
        // claude, writing the path as given, reaches the link target's parent.
        let p = format!("{ws}/escape/../planted.txt");
        let args = json!({"old_file_path": p, "new_file_path": p, "new_file_contents": "pwned\n", "tab_name": "up"});
        let r = call(&mut c, "openDiff", args);
        assert!(is_error(&r), "{p} must be refused: {r}");
        assert!(texts(&r)[0].contains("`..` in the path"), "{r}");
        // Of the two paths, the one refused is named: here the old one.
        let good = sb.ws.join("run.sh").to_string_lossy().into_owned();
        let args = json!({"old_file_path": bad[0], "new_file_path": good, "new_file_contents": "x\n", "tab_name": "old"});
        let r = call(&mut c, "openDiff", args);
        assert!(
            texts(&r)[0].starts_with(&format!("Refused {} (", bad[0])),
            "{r}"
        );
        // A relative path: claude takes it from its own working directory (a folder of the
        // workspace's, or one below it, where `escape` could lead out), not from the first
        // workspace folder the check would take it from.
        let args = json!({"old_file_path": "escape/planted.txt", "new_file_path": "escape/planted.txt",
            "new_file_contents": "pwned\n", "tab_name": "relative"});
        let r = call(&mut c, "openDiff", args);
        assert!(is_error(&r), "a relative path must be refused: {r}");
        assert!(texts(&r)[0].contains("not an absolute path"), "{r}");
        // (`\escape\...` too: a relative name on Unix, though it reads as rooted on Windows.)
        for relative in ["run.sh", r"\escape/planted.txt"] {
            let args = json!({"old_file_path": relative, "new_file_path": relative,
                "new_file_contents": "pwned\n", "tab_name": "relative too"});
            assert!(is_error(&call(&mut c, "openDiff", args)), "{relative}");
        }
        assert_eq!(
            fs::read_to_string(outside.join("secret.txt")).unwrap(),
            "secret\n"
        );
        assert!(!outside.join("planted.txt").exists());
        assert_eq!(s.stop(), 0);
    }
}

#[test]
fn reject_policy() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        fs::write(sb.ws.join("a.txt"), "old\n").unwrap();
        let mut s = Served::start(&sb, &["--runtime", rt, "--on-diff", "reject"]);
        let mut c = s.client();
        let r = call(
            &mut c,
            "openDiff",
            open_diff_args(&sb.ws.join("a.txt"), "new\n", "tab A"),
        );
        assert_eq!(texts(&r), ["DIFF_REJECTED", "tab A"]);
        assert_eq!(fs::read_to_string(sb.ws.join("a.txt")).unwrap(), "old\n");
        s.stderr.wait_for("diff rejected: ");
        assert_eq!(s.stop(), 0);
    }
}

#[test]
fn defer_policy_close_tab_resolves_and_stop_leaves_the_decision_to_claude() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        fs::write(sb.ws.join("a.txt"), "old\n").unwrap();
        // Without a terminal, defer is the default.
        let mut s = Served::start(&sb, &["--runtime", rt]);
        s.stderr.wait_for("diffs: defer");
        let mut c = s.client();
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&sb.ws.join("a.txt"), "new\n", "tab D"),
        );
        s.stderr.wait_for("diff pending (decide in claude)");
        assert!(
            c.recv_until(Duration::from_millis(300), |v| v["id"] == json!(id))
                .is_none(),
            "deferred"
        );
        let close = c.call_tool("close_tab", json!({"tab_name": "tab D"}));
        let got = responses(&mut c, &[id, close]);
        assert_eq!(texts(&got[&close]), ["TAB_CLOSED"]);
        assert_eq!(texts(&got[&id]), ["DIFF_REJECTED", "tab D"]);
        assert_eq!(fs::read_to_string(sb.ws.join("a.txt")).unwrap(), "old\n");
        // Its end is said too: the terminal kept "pending" for changes long gone.
        let a = sb.ws.join("a.txt");
        s.stderr
            .wait_for(&format!("diff closed by claude: {}", a.display()));
        // A claude that goes away with one pending.
        let mut gone = s.client();
        let b = sb.ws.join("b.txt");
        gone.call_tool("openDiff", open_diff_args(&b, "new\n", "tab B"));
        s.stderr
            .wait_for(&format!("diff pending (decide in claude): {}", b.display()));
        drop(gone);
        s.stderr
            .wait_for(&format!("diff withdrawn (disconnected): {}", b.display()));

        // A diff still pending at SIGTERM is answered with a tool error, not `DIFF_REJECTED`:
        // nobody decided, and the real client keeps its own prompt after an error (where a
        // rejection ends its turn); the lock file goes.
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&sb.ws.join("a.txt"), "new\n", "tab E"),
        );
        s.stderr.wait_for("diff pending (decide in claude): ");
        std::thread::sleep(Duration::from_millis(100));
        s.signal("TERM");
        let r = c.response(id);
        assert!(is_error(&r), "{r}");
        assert_eq!(
            texts(&r),
            ["claude-ide-bridge stopped before the change was decided (nothing was accepted or written)"]
        );
        assert_eq!(s.wait_exit(), 0);
        assert!(!s.lock.exists(), "SIGTERM removes the lock file");
    }
}

/// SIGINT, and SIGQUIT (Ctrl-\\, whose default action ended the bridge at once with its lock file
/// left), stop the bridge as SIGTERM does. After its clean stop, SIGINT ends it as Ctrl-C ends a
/// program (status 0 told bash it took Ctrl-C for itself: a script or loop running `serve` went
/// on); SIGQUIT with status 0. Each says what stopped it by name (it said "signal 3").
#[test]
fn sigint_and_sigquit_stop_cleanly() {
    use std::os::unix::process::ExitStatusExt;
    for (rt, sig) in RUNTIMES.iter().flat_map(|rt| [(rt, "INT"), (rt, "QUIT")]) {
        let sb = Sandbox::new();
        let mut s = Served::start(&sb, &["--runtime", rt]);
        assert!(s.lock.exists());
        s.signal(sig);
        let stderr = s.stderr.clone();
        let status = exit_within(&mut s.child, WAIT, &|| stderr.text());
        assert!(!s.lock.exists(), "{rt} {sig}");
        let text = stderr.text();
        assert!(text.contains("stopped"), "{rt} {sig}: {text}");
        if sig == "INT" {
            assert_eq!(status.signal(), Some(2), "{rt}: {status:?}: {text}");
            assert!(
                text.contains("Ctrl-C (SIGINT): stopping the bridge"),
                "{text}"
            );
        } else {
            assert_eq!(status.code(), Some(0), "{rt}: {text}");
            assert!(text.contains("SIGQUIT: stopping the bridge"), "{text}");
        }
    }
}

#[test]
fn compat_methods_confined() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let outside = sb.root().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        symlink(&outside, sb.ws.join("escape")).unwrap();
        fs::create_dir_all(sb.ws.join("src")).unwrap();
        fs::write(sb.ws.join("src/a.rs"), "A\n").unwrap();
        let mut s = Served::start(&sb, &["--runtime", rt]);
        let mut c = s.client();
        let r = c.request("readFile", json!({"path": "src/a.rs"}));
        assert_eq!(r["result"]["content"], "A\n", "{r}");
        let r = c.request("files/read", json!({"path": sb.ws.join("src/a.rs")}));
        assert_eq!(r["result"]["content"], "A\n", "{r}");
        let r = c.request("writeFile", json!({"path": "src/b.rs", "content": "B\n"}));
        assert_eq!(r["result"]["success"], true, "{r}");
        assert_eq!(fs::read_to_string(sb.ws.join("src/b.rs")).unwrap(), "B\n");
        for p in ["escape/secret.txt", "../outside/secret.txt", "/etc/passwd"] {
            let r = c.request("readFile", json!({"path": p}));
            assert_eq!(r["error"]["code"], -32602, "{p}: {r}");
        }
        let r = c.request(
            "writeFile",
            json!({"path": "escape/secret.txt", "content": "pwned"}),
        );
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(
            fs::read_to_string(outside.join("secret.txt")).unwrap(),
            "secret\n"
        );
        let r = c.request("listFiles", json!({"pattern": "*.rs"}));
        let files: Vec<Value> = r["result"]["files"].as_array().unwrap().clone();
        assert_eq!(files.len(), 2, "{r}");
        let r = c.request("getWorkspaceInfo", json!({}));
        assert_eq!(r["result"]["folders"][0], json!(sb.ws.to_string_lossy()));
        // The shape other IDE integrations answer: the workspace's name, path, file count, type.
        assert_eq!(r["result"]["name"], "ws", "{r}");
        assert_eq!(r["result"]["path"], json!(sb.ws.to_string_lossy()), "{r}");
        assert_eq!(r["result"]["fileCount"], 2, "{r}");
        assert_eq!(r["result"]["type"], "folder", "{r}");
        assert_eq!(
            c.request("getOpenFiles", json!({}))["result"]["files"],
            json!([])
        );
        assert!(c.request("getCurrentFile", json!({}))["result"]["filePath"].is_null());
        assert_eq!(
            c.request("workspace/selection", json!({}))["result"]["success"],
            false
        );
        assert_eq!(s.stop(), 0);
    }
}

#[test]
fn wire_log_lines() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        // Its folder made when missing, as `--lsp-log`'s is (it failed: "No such file").
        let log = sb.root().join("logs").join("wire.jsonl");
        let mut s = Served::start(&sb, &["--runtime", rt, "--wire-log", log.to_str().unwrap()]);
        let mut c = s.client();
        call(&mut c, "getWorkspaceFolders", json!({}));
        let read = || -> Vec<Value> {
            fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        // Flushed per line: readable while the bridge runs.
        let give_up = std::time::Instant::now() + WAIT;
        loop {
            let lines = read();
            if lines
                .iter()
                .any(|l| l["dir"] == "out" && l["msg"]["result"]["content"].is_array())
            {
                break;
            }
            assert!(std::time::Instant::now() < give_up, "{lines:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let lines = read();
        assert!(lines
            .iter()
            .any(|l| l["event"] == "connected" && l["conn"] == 1));
        assert!(lines
            .iter()
            .any(|l| l["dir"] == "in" && l["msg"]["method"] == "initialize"));
        assert!(lines
            .iter()
            .all(|l| l["t_ms"].is_u64() && l["conn"].is_u64()));
        drop(c);
        s.stderr.wait_for("client disconnected");
        assert_eq!(s.stop(), 0);
        assert!(read().iter().any(|l| l["event"] == "disconnected"));
        let text = fs::read_to_string(&log).unwrap();
        let token = s.token_from_text();
        assert!(!text.contains(&token), "the token never reaches the log");
        // It holds what claude proposes and reads: the user's alone, as the language-server log.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&log).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        assert!(!s.stderr.text().contains(&token), "nor stderr");
    }
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    let st = sb
        .command()
        .args(["serve", "--on-diff", "maybe"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    let st = sb
        .command()
        .args(["serve", "--workspace", "/does/not/exist"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&st.stderr).contains("--workspace"));
    // A folder named without --workspace is one too.
    let st = sb
        .command()
        .args(["serve", "/does/not/exist"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(
        err.contains("workspace folder /does/not/exist does not exist"),
        "{err}"
    );
    let st = sb
        .command()
        .args(["serve", "--stdio", "--on-diff", "ask"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    let st = sb.command().args(["run"]).output().unwrap();
    assert_eq!(st.status.code(), Some(2));
    // The folder named for the lock files or the log is made, not missing ones above it (a
    // mistyped path left a tree of folders).
    let missing = sb.root().join("missing");
    for (flag, path) in [
        ("--lock-dir", "ide"),
        ("--lsp-log", "logs/lsp.log"),
        ("--wire-log", "logs/wire.log"),
    ] {
        let path = missing.join(path);
        let err = sb.root().join("err.txt");
        let mut child = sb
            .command()
            .args(["serve", flag])
            .arg(&path)
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let st = common::exit_within(&mut child, Duration::from_secs(20), &|| flag.into());
        assert_eq!(st.code(), Some(2), "{flag}");
        let err = fs::read_to_string(&err).unwrap();
        assert!(err.contains(&format!("{flag}: the folder")), "{err}");
        assert!(!missing.exists(), "{flag} made {}", missing.display());
    }
    for sub in ["serve", "run", "list", "doctor"] {
        let st = sb.command().args([sub, "--help"]).output().unwrap();
        assert_eq!(st.status.code(), Some(0), "{sub} --help");
        let help = String::from_utf8_lossy(&st.stdout);
        assert!(!help.is_empty());
        // The help is the options' doc comments: a rustdoc link in one is printed as it is.
        assert!(
            !help.contains("[`"),
            "{sub} --help shows a doc link: {help}"
        );
    }
}

/// Reading a FIFO nobody writes blocked the thread that answers files forever, until every job
/// was stuck and every later call refused. A FIFO is now refused at once from its type on the
/// opened handle (opened without waiting): many such reads leave every job free (those sent
/// faster than they are refused may be turned away as too many for one connection), other calls
/// are answered, and stopping the bridge works. (The job limit and the deadline of a read the kernel
/// itself blocks, as on a dead network mount, are tested in `host/jobs.rs`.)
#[test]
fn fifo_reads_are_refused_at_once_and_leave_every_job_free() {
    const MAX_JOBS: usize = 64;
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let fifo = sb.ws.join("hung");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        fs::write(sb.ws.join("a.rs"), "A\n").unwrap();
        let mut s = Served::start(&sb, &["--runtime", rt]);
        let mut c = s.client();
        let reads: Vec<u64> = (0..2 * MAX_JOBS)
            .map(|_| c.send_request("readFile", json!({"path": "hung"})))
            .collect();
        let mut refused_as_fifo = 0;
        for (id, r) in responses(&mut c, &reads) {
            let msg = r["error"]["message"].as_str().unwrap();
            if r["error"]["code"] == -32000 {
                // Sent faster than refused: turned away as too many at once for one connection.
                assert!(msg.contains("operations in progress"), "{id}: {msg}");
                continue;
            }
            assert_eq!(r["error"]["code"], -32602, "{id}: {r}");
            assert!(msg.contains("hung is a FIFO"), "{msg}");
            refused_as_fifo += 1;
        }
        assert!(refused_as_fifo >= 16, "{refused_as_fifo}");
        // Every slot is free: a file is read, and calls that need no job are answered.
        let r = c.request("readFile", json!({"path": "a.rs"}));
        assert_eq!(r["result"]["content"], "A\n", "{r}");
        let id = c.call_tool("getWorkspaceFolders", json!({}));
        let r = c.response(id);
        assert_eq!(r["result"]["isError"], Value::Null, "{r}");
        assert_eq!(
            c.request("getCurrentFile", json!({}))["result"]["filePath"],
            Value::Null
        );
        assert_eq!(s.stop(), 0);
        assert!(!s.lock.exists());
    }
}

/// `serve` in a terminal that goes away (the window closed: the terminal hangs up, and writing
/// to it fails): the bridge stops as for any SIGHUP, exit 0, and its lock file goes with it.
#[test]
fn a_terminal_that_hangs_up_stops_serve_and_its_lock_file_goes() {
    let sb = Sandbox::new();
    // A pseudo-terminal for the bridge, closed once the bridge has written its lock file.
    let script = r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out, give_up = b"", time.time() + 20
while b"lock file:" not in out and time.time() < give_up:
    if select.select([fd], [], [], 0.2)[0]:
        try:
            out += os.read(fd, 4096)
        except OSError:
            break
os.close(fd)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, BIN, "serve", "--no-lsp"])
        .env("HOME", &sb.home)
        .env("CLAUDE_CONFIG_DIR", &sb.config)
        .env("NO_COLOR", "1")
        .env_remove("CLAUDE_CODE_SSE_PORT")
        .current_dir(&sb.ws)
        .output()
        .expect("python3 runs (scripts/test-all.sh installs it)");
    let status = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        status.trim(),
        "0",
        "{status}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = fs::read_dir(sb.lock_dir())
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Started with SIGHUP ignored (`nohup`, or `trap '' HUP` in a script), the bridge stays deaf to
/// it: a hangup does not stop it; SIGTERM still does, and its lock file goes.
#[test]
fn a_signal_ignored_at_start_stays_ignored() {
    let sb = Sandbox::new();
    let mut child = std::process::Command::new("sh")
        .args(["-c", "trap '' HUP; exec \"$0\" serve --no-lsp", BIN])
        .env("HOME", &sb.home)
        .env("CLAUDE_CONFIG_DIR", &sb.config)
        .env("NO_COLOR", "1")
        .env_remove("CLAUDE_CODE_SSE_PORT")
        .current_dir(&sb.ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::collect(child.stderr.take().unwrap());
    let line = stderr.wait_for("lock file: ");
    let lock = std::path::PathBuf::from(line.split_once("lock file: ").unwrap().1.trim());
    let pid = child.id().to_string();
    let kill = |sig: &str| {
        assert!(std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    kill("-HUP");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "stopped by SIGHUP: {}",
        stderr.text()
    );
    assert!(lock.exists());
    kill("-TERM");
    let status = exit_within(&mut child, WAIT, &|| stderr.text());
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    assert!(!lock.exists());
}

/// A burst of calls the host answers itself, past the 256 events its queue holds, from three
/// clients at once, with the wire log on (a trace event for each message): every call is
/// answered and a signal still stops the bridge. The host's own answer can make its thread the
/// one that hands the runtime's queued events over; waiting there for a place in its own full
/// queue, which only it empties, it stopped for good (no answer, no stop but SIGKILL).
#[test]
fn a_burst_past_the_hosts_queue_is_answered_and_the_bridge_still_stops() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let log = sb.root().join("wire.log");
        let mut s = Served::start(
            &sb,
            &[
                "--stdio",
                "--runtime",
                rt,
                "--wire-log",
                log.to_str().unwrap(),
            ],
        );
        let mut clients: Vec<_> = (0..8).map(|_| s.client()).collect();
        let calls: Vec<(&str, Value)> = (0..250)
            .map(|_| ("getWorkspaceFolders", json!({})))
            .collect();
        // Three bursts: whether the host's thread hands the events over at a full queue is a
        // race (one run in two or three without the fix).
        for burst in 0..3 {
            let ids: Vec<Vec<u64>> = clients
                .iter_mut()
                .map(|c| c.call_tools_at_once(&calls))
                .collect();
            for (n, (c, ids)) in clients.iter_mut().zip(&ids).enumerate() {
                let mut left: std::collections::HashSet<u64> = ids.iter().copied().collect();
                while !left.is_empty() {
                    let Some(v) = c.recv_json(WAIT) else {
                        panic!(
                            "{rt}: burst {burst}, client {n}: {} of {} calls never answered",
                            left.len(),
                            ids.len()
                        );
                    };
                    left.remove(&v["id"].as_u64().unwrap_or(0));
                }
            }
        }
        s.signal("TERM");
        assert_eq!(s.wait_exit(), 0, "{rt}");
    }
}

/// A change to a file claude may not write (here in a folder on a read-only mount; the same for
/// a read-only file or folder, for any user but root) is refused, with why: it was accepted, and
/// claude's own write failed after the user was told the change was saved. One beside it that
/// may be written is accepted.
#[test]
fn an_accept_of_a_file_that_cannot_be_written_is_refused() {
    let sb = Sandbox::new();
    let ro = sb.ws.join("ro");
    fs::create_dir(&ro).unwrap();
    fs::write(ro.join("a.txt"), "old\n").unwrap();
    fs::write(sb.ws.join("b.txt"), "old\n").unwrap();
    let mut c = sb.command();
    c.args(["serve", "--on-diff", "accept", "--no-lsp"])
        .arg(&sb.ws);
    let read_only = format!(
        "mount --bind '{0}' '{0}' && mount -o remount,bind,ro '{0}'",
        ro.display()
    );
    let Some(c) = unshared("-rm", &read_only, &c) else {
        return;
    };
    let mut s = Served::start_command(c);
    let mut cl = s.client();
    for (name, said) in [
        ("a.txt", "checking that the file may be written"),
        ("new.txt", "checking that a file may be made there"),
    ] {
        let r = call(
            &mut cl,
            "openDiff",
            open_diff_args(&ro.join(name), "new\n", name),
        );
        let text = texts(&r).join(" ");
        assert!(is_error(&r), "{name}: {r}");
        assert!(
            text.contains(said) && text.contains("Read-only file system"),
            "{name}: {text}"
        );
    }
    let r = call(
        &mut cl,
        "openDiff",
        open_diff_args(&sb.ws.join("b.txt"), "new\n", "b"),
    );
    assert_eq!(texts(&r)[0], "FILE_SAVED", "{r}");
    assert_eq!(s.stop(), 0);
}
