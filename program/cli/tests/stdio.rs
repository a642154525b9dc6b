//! `serve --stdio`: the JSON-lines protocol end to end, without an editor.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// How long a bridge is given to stop (then it is killed and the test fails).
const STOP_WAIT: Duration = Duration::from_secs(20);

/// A relative `--lock-dir` is given to the editor as an absolute path (it was handed on as
/// typed, which an editor in another working directory resolved to another file).
#[cfg(unix)]
#[test]
fn a_relative_lock_dir_is_told_absolute() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let locks = sb.root().join("locks");
    fs::create_dir(&locks).unwrap();
    fs::set_permissions(&locks, fs::Permissions::from_mode(0o700)).unwrap();
    // The bridge runs in the workspace (`Sandbox::command`).
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp", "--lock-dir", "../locks"]);
    let ready = serde_json::from_str::<Value>(&s.stdout.wait_for("\"ready\"")).unwrap();
    let told = std::path::PathBuf::from(ready["lockFile"].as_str().unwrap());
    assert!(told.is_absolute(), "{told:?}");
    assert_eq!(
        fs::canonicalize(&told).unwrap(),
        locks.join(format!("{}.lock", s.port))
    );
    assert!(
        s.lock.is_absolute(),
        "the terminal's line too: {:?}",
        s.lock
    );
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

#[test]
fn stdio_round_trips() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
        let mut s = Served::start(&sb, &["--stdio", "--runtime", rt]);
        let ready = serde_json::from_str::<Value>(&s.stdout.wait_for("\"ready\"")).unwrap();
        assert_eq!(
            s.stdout.all()[0],
            s.stdout.wait_for("\"ready\""),
            "ready comes first"
        );
        assert_eq!(ready["port"], s.port);
        assert_eq!(ready["host"], "127.0.0.1");
        assert_eq!(ready["lockFile"], json!(s.lock.to_string_lossy()));
        let mut c = s.client();
        assert_eq!(next_msg(&s, "connected", 0)["conn"], 1);
        assert_eq!(
            next_msg(&s, "initialized", 0)["protocolVersion"],
            "2025-06-18"
        );

        let file = sb.ws.join("a.rs").to_string_lossy().to_string();
        let uri = format!("file://{file}");
        // Malformed lines never stop the bridge.
        s.send_line("this is not json");
        s.send_line("[1,2]");
        s.send_line(r#"{"type":"no_such_type"}"#);
        s.send_line(r#"{"type":"respond","id":999,"text":"x"}"#);
        assert!(next_msg(&s, "error", 3)["message"]
            .as_str()
            .unwrap()
            .contains("999"));

        s.send_line(
            &json!({"type":"selection_changed","filePath":file,"text":"old",
            "selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":3}}})
            .to_string(),
        );
        let n = c
            .recv_until(WAIT, |v| v["method"] == "selection_changed")
            .unwrap();
        assert_eq!(n["params"]["fileUrl"], json!(uri));
        assert_eq!(n["params"]["selection"]["isEmpty"], false);
        let v = json_of(&call(&mut c, "getCurrentSelection", json!({})));
        assert_eq!(v["success"], true);
        assert_eq!(v["text"], "old");
        assert_eq!(
            json_of(&call(&mut c, "getLatestSelection", json!({})))["filePath"],
            json!(file)
        );

        s.send_line(
            &json!({"type":"at_mentioned","filePath":file,"lineStart":1,"lineEnd":2}).to_string(),
        );
        let n = c
            .recv_until(WAIT, |v| v["method"] == "at_mentioned")
            .unwrap();
        assert_eq!(n["params"]["lineStart"], 1);

        s.send_line(&json!({"type":"diagnostics","uri":uri,"diagnostics":[{"message":"boom","severity":"Error",
            "range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}},"source":"rustc"}]}).to_string());
        let n = c
            .recv_until(WAIT, |v| v["method"] == "diagnostics_changed")
            .unwrap();
        assert_eq!(n["params"]["diagnostics"][0]["message"], "boom");
        let v = json_of(&call(&mut c, "getDiagnostics", json!({"uri": uri})));
        assert_eq!(v[0]["diagnostics"][0]["source"], "rustc");
        assert_eq!(
            json_of(&call(
                &mut c,
                "getDiagnostics",
                json!({"uri": "file:///elsewhere.rs"})
            )),
            json!([])
        );

        s.send_line(&json!({"type":"open_editors","tabs":[{"uri":uri,"isActive":true,"isDirty":true,"label":"a.rs","languageId":"rust","lineCount":1}]}).to_string());
        s.send_line(r#"{"type":"open_editors","tabs":"nope"}"#);
        next_msg(&s, "error", 4);
        assert_eq!(
            json_of(&call(&mut c, "getOpenEditors", json!({})))["tabs"][0]["label"],
            "a.rs"
        );
        assert_eq!(
            texts(&call(&mut c, "get_all_opened_file_paths", json!({})))[0],
            file
        );
        assert_eq!(
            json_of(&call(
                &mut c,
                "checkDocumentDirty",
                json!({"filePath": file})
            ))["isDirty"],
            true
        );

        // Tools the bridge can't answer go to the editor.
        let id = c.call_tool("openFile", json!({"filePath": file, "startLine": 3}));
        let tc = next_msg(&s, "tool_call", 0);
        assert_eq!(tc["name"], "openFile");
        assert_eq!(tc["arguments"]["startLine"], 3);
        assert_eq!(tc["conn"], 1);
        s.send_line(&json!({"type":"respond","id":tc["id"],"text":"opened"}).to_string());
        assert_eq!(texts(&c.response(id)), ["opened"]);
        let id = c.call_tool("executeCode", json!({"code": "1"}));
        let tc = next_msg(&s, "tool_call", 1);
        s.send_line(&json!({"type":"respond","id":tc["id"],"error":"no kernel"}).to_string());
        let r = c.response(id);
        assert!(is_error(&r) && texts(&r) == ["no kernel"]);
        let id = c.call_tool("saveDocument", json!({"filePath": file}));
        let tc = next_msg(&s, "tool_call", 2);
        s.send_line(&json!({"type":"respond","id":tc["id"],"result":{"content":[{"type":"text","text":"{\"success\":true}"}]}}).to_string());
        assert_eq!(json_of(&c.response(id))["success"], true);

        // openDiff: accept with edited contents (written by the client, not the bridge), reject,
        // and a cancel.
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&sb.ws.join("a.rs"), "proposed\n", "T1"),
        );
        let tc = next_msg(&s, "tool_call", 3);
        assert_eq!(tc["name"], "openDiff");
        assert_eq!(tc["arguments"]["new_file_contents"], "proposed\n");
        s.send_line(&json!({"type":"diff_decision","id":tc["id"],"decision":"accept","contents":"edited\n"}).to_string());
        assert_eq!(texts(&c.response(id)), ["FILE_SAVED", "edited\n"]);
        assert_eq!(fs::read_to_string(sb.ws.join("a.rs")).unwrap(), "old\n");
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&sb.ws.join("a.rs"), "p2\n", "T2"),
        );
        let tc = next_msg(&s, "tool_call", 4);
        s.send_line(&json!({"type":"diff_decision","id":tc["id"],"decision":"reject"}).to_string());
        assert_eq!(texts(&c.response(id)), ["DIFF_REJECTED", "T2"]);
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&sb.ws.join("a.rs"), "p3\n", "T3"),
        );
        let tc = next_msg(&s, "tool_call", 5);
        let close = c.call_tool("close_tab", json!({"tab_name": "T3"}));
        let got = responses(&mut c, &[id, close]);
        assert_eq!(texts(&got[&id]), ["DIFF_REJECTED", "T3"]);
        let cancelled = next_msg(&s, "cancelled", 0);
        assert_eq!(cancelled["id"], tc["id"]);
        assert_eq!(cancelled["reason"], "tab_closed");
        assert_eq!(next_msg(&s, "tab_closed", 0)["tabName"], "T3");
        s.send_line(&json!({"type":"diff_decision","id":tc["id"],"decision":"accept"}).to_string());
        next_msg(&s, "error", 5);
        assert_eq!(fs::read_to_string(sb.ws.join("a.rs")).unwrap(), "old\n");
        // Outside the workspace: refused without asking the editor.
        let r = call(
            &mut c,
            "openDiff",
            open_diff_args(&sb.root().join("x.txt"), "x", "T4"),
        );
        assert!(is_error(&r));
        assert!(!sb.root().join("x.txt").exists());
        // An old file outside the workspace is refused too (the editor would open it), and so
        // is a relative path (claude would write it from its own working directory, which the
        // check does not know), without asking the editor.
        let mut args = open_diff_args(&sb.ws.join("a.rs"), "x", "T5");
        args["old_file_path"] = json!(sb.root().join("secret.txt"));
        let r = call(&mut c, "openDiff", args);
        assert!(is_error(&r), "{r}");
        let mut args = open_diff_args(&sb.ws.join("a.rs"), "p6\n", "T6");
        args["new_file_path"] = json!("a.rs");
        args["old_file_path"] = json!("a.rs");
        let r = call(&mut c, "openDiff", args);
        assert!(
            is_error(&r) && texts(&r)[0].contains("not an absolute path"),
            "{r}"
        );
        s.send_line(r#"{"type":"status"}"#);
        assert_eq!(next_msg(&s, "status", 0)["pending"], json!([]));
        assert!(!s.stdout.text().contains("\"T6\""));

        drop(c);
        next_msg(&s, "disconnected", 0);
        // stdin closing ends the bridge and removes the lock file.
        drop(s.stdin.take());
        assert_eq!(s.wait_exit(), 0);
        assert!(!s.lock.exists());
        assert!(!s.stderr.text().is_empty(), "logs go to stderr");
    }
}

#[test]
fn stdio_with_explicit_policy_does_not_ask_the_editor() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--on-diff", "accept"]);
    let mut c = s.client();
    let r = call(
        &mut c,
        "openDiff",
        open_diff_args(&sb.ws.join("n.txt"), "n\n", "T"),
    );
    assert_eq!(texts(&r)[0], "FILE_SAVED");
    assert!(!s.stdout.text().contains("tool_call"));
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A bridge listening where claude does not look by itself (`--host ::1`) tells the editor the
/// host to give claude in `CLAUDE_CODE_IDE_HOST_OVERRIDE`, in `ready` and in `status`; a client
/// connecting there is served.
#[test]
fn stdio_ready_tells_the_host_claude_needs() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--host", "::1"]);
    let ready: Value = serde_json::from_str(&s.stdout.wait_for("\"ready\"")).unwrap();
    assert_eq!(
        (&ready["port"], &ready["host"]),
        (&json!(s.port), &json!("[::1]"))
    );
    s.send_line(r#"{"type":"status"}"#);
    assert_eq!(next_msg(&s, "status", 0)["host"], "[::1]");
    let (status, c) = client::connect_to("[::1]", s.port, Some(&s.token())).unwrap();
    assert_eq!(status, 101);
    c.unwrap().init();
    assert_eq!(next_msg(&s, "initialized", 0)["conn"], 1);
}

#[test]
fn stdio_status_tells_port_lock_clients_and_pending_calls() {
    let sb = Sandbox::new();
    let file = sb.ws.join("a.rs");
    fs::write(&file, "old\n").unwrap();
    let mut s = Served::start(&sb, &["--stdio"]);
    // (After a byte-order mark, as a Windows pipe may start with: not refused as no JSON.)
    s.send_line("\u{feff}{\"type\":\"status\"}");
    let st = next_msg(&s, "status", 0);
    assert_eq!(st["port"], s.port);
    assert_eq!(st["host"], "127.0.0.1");
    assert_eq!(st["lockFile"], json!(s.lock.to_string_lossy()));
    let ws = fs::canonicalize(&sb.ws).unwrap();
    assert_eq!(st["workspace"], json!([ws.to_string_lossy()]));
    assert_eq!((&st["clients"], &st["pending"]), (&json!([]), &json!([])));

    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let id = c.call_tool("openDiff", open_diff_args(&file, "new\n", "tab"));
    let forwarded = next_msg(&s, "tool_call", 0);
    s.send_line(r#"{"type":"status"}"#);
    let st = next_msg(&s, "status", 1);
    assert_eq!(
        st["clients"],
        json!([{"conn": 1, "initialized": true, "protocolVersion": "2025-06-18"}])
    );
    assert_eq!(
        st["pending"],
        json!([{"id": forwarded["id"], "name": "openDiff", "filePath": file.to_string_lossy()}])
    );

    // Answered and disconnected: neither is listed any more.
    s.send_line(
        &json!({"type": "diff_decision", "id": forwarded["id"], "decision": "reject"}).to_string(),
    );
    assert_eq!(texts(&c.response(id))[0], "DIFF_REJECTED");
    drop(c);
    next_msg(&s, "disconnected", 0);
    s.send_line(r#"{"type":"status"}"#);
    let st = next_msg(&s, "status", 2);
    assert_eq!((&st["clients"], &st["pending"]), (&json!([]), &json!([])));
}

/// What the editor sends past a limit is refused with an error line naming it, and what was kept
/// before stays.
#[test]
fn stdio_refuses_diagnostics_past_the_per_file_limit() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio"]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let uri = format!("file://{}", sb.ws.join("a.rs").to_string_lossy());
    let d = json!({"message":"boom","severity":"Error",
        "range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}});
    s.send_line(&json!({"type":"diagnostics","uri":uri,"diagnostics":[d.clone()]}).to_string());
    s.send_line(&json!({"type":"diagnostics","uri":uri,"diagnostics":vec![d; 10_001]}).to_string());
    let e = next_msg(&s, "error", 0);
    assert!(e["message"].as_str().unwrap().contains("10000"), "{e}");
    let v = json_of(&call(&mut c, "getDiagnostics", json!({"uri": uri})));
    assert_eq!(v[0]["diagnostics"].as_array().unwrap().len(), 1);
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

#[test]
fn stdio_refuses_more_tabs_than_the_limit() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio"]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let tab = |i: usize| json!({"uri": format!("file:///ws/{i}.rs")});
    s.send_line(&json!({"type":"open_editors","tabs":[tab(0)]}).to_string());
    let many: Vec<Value> = (0..1_001).map(tab).collect();
    s.send_line(&json!({"type":"open_editors","tabs":many}).to_string());
    let e = next_msg(&s, "error", 0);
    assert!(e["message"].as_str().unwrap().contains("1000"), "{e}");
    let tabs = json_of(&call(&mut c, "getOpenEditors", json!({})))["tabs"].clone();
    assert_eq!(tabs, json!([tab(0)]), "the previous tabs are kept");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A selection's text is bounded so that its answer always fits what the engine sends: the
/// largest, of the characters JSON escapes most, reaches claude whole, both as the notification and
/// as `getCurrentSelection`'s answer, and a larger one is refused while the last one stays.
#[test]
fn a_selection_up_to_the_limit_reaches_claude_and_a_larger_one_is_refused() {
    const LIMIT: usize = 4 * 1024 * 1024;
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let file = sb.ws.join("a.rs").to_string_lossy().to_string();
    let select = |text: &str| {
        json!({"type":"selection_changed","filePath":file,"text":text,
            "selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}})
        .to_string()
    };
    let largest = "\u{1}".repeat(LIMIT);
    s.send_line(&select(&largest));
    let n = c
        .recv_until(WAIT, |v| v["method"] == "selection_changed")
        .unwrap();
    assert_eq!(n["params"]["text"].as_str().map(str::len), Some(LIMIT));
    let v = largest_selection(&mut c);
    assert_eq!(v["text"].as_str(), Some(largest.as_str()), "answered whole");

    s.send_line(&select(&"x".repeat(LIMIT + 1)));
    let e = next_msg(&s, "error", 0);
    assert!(
        e["message"].as_str().unwrap().contains(&LIMIT.to_string()),
        "{e}"
    );
    let v = largest_selection(&mut c);
    assert_eq!(
        v["text"].as_str().map(str::len),
        Some(LIMIT),
        "the last one stays"
    );
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A `filePath` or `uri` longer than any system's path is refused with an error line naming the
/// limit (one was kept, as a selection or queued at-mentions, and sent to every `claude` that
/// connected, which it cost its connection), and so is one holding NUL; what was kept stays.
#[test]
fn a_path_longer_than_any_systems_is_refused() {
    const LIMIT: usize = 64 * 1024;
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    let long = format!("{}/{}", sb.ws.to_string_lossy(), "d".repeat(LIMIT));
    let d = json!({"message":"boom","severity":"Error",
        "range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}});
    let file = sb.ws.join("a.rs").to_string_lossy().to_string();
    let select = |path: &str| {
        json!({"type":"selection_changed","filePath":path,"text":"x",
            "selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}})
        .to_string()
    };
    s.send_line(&select(&file));
    for (i, line) in [
        select(&long),
        json!({"type":"at_mentioned","filePath":long}).to_string(),
        json!({"type":"diagnostics","uri":long,"diagnostics":[d]}).to_string(),
    ]
    .into_iter()
    .enumerate()
    {
        s.send_line(&line);
        let e = next_msg(&s, "error", i);
        assert!(
            e["message"].as_str().unwrap().contains(&LIMIT.to_string()),
            "{e}"
        );
    }
    s.send_line(&select(&format!("{file}\u{0}x")));
    let e = next_msg(&s, "error", 3);
    assert!(e["message"].as_str().unwrap().contains("NUL"), "{e}");
    // A claude connecting is sent the selection kept, once it is ready for it.
    let mut c = s.client();
    c.send_json(&json!({"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": 1}}));
    for list in ["tools/list", "prompts/list", "resources/list"] {
        c.request(list, json!({}));
    }
    let n = c
        .recv_until(WAIT, |v| v["method"] == "selection_changed")
        .expect("the kept selection");
    assert_eq!(n["params"]["filePath"], json!(file));
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// `getCurrentSelection`'s answer, for a selection of the largest size: about 28 MB of JSON (each
/// `\u0001` escaped once in the tool's JSON text and once more in the message), which this test's
/// debug-built client and bridge take seconds to write and read on a loaded machine. `call`'s
/// 5 s was once too short in CI (the answer to the second of two such calls); this is a bound on
/// liveness, not a timing.
fn largest_selection(c: &mut Client) -> Value {
    let id = c.call_tool("getCurrentSelection", json!({}));
    let answer = c
        .recv_until(Duration::from_secs(120), |v| v["id"] == json!(id))
        .expect("getCurrentSelection answered");
    json_of(&answer)
}

/// Lines the bridge cannot use are refused with an error line saying why, and what it kept stays:
/// a severity not in the protocol, diagnostics past the byte budget, an at-mention without an
/// absolute path or with lines the wrong way round, a line that is not UTF-8. A file reported
/// under two spellings of its URI is one file, answered under the URI asked; `null` stops
/// reporting it.
#[test]
fn stdio_refuses_what_it_cannot_use_and_keeps_one_entry_per_file() {
    use std::io::Write;
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio"]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let dir = sb.ws.join("c++");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.rs").to_string_lossy().to_string();
    let plain = format!("file://{path}");
    let encoded = plain.replace("c++", "c%2B%2B");
    let d = |message: &str, severity: &str| {
        json!({"message": message, "severity": severity,
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}})
    };
    let mut errors = 0;
    let mut refused = |s: &mut Served, line: &str, why: &str| {
        s.send_line(line);
        let e = next_msg(s, "error", errors);
        errors += 1;
        assert!(
            e["message"].as_str().unwrap().contains(why),
            "{line:.200}: {e}"
        );
    };

    // Reported with `+` as it is, asked with it encoded: the same file, under the URI asked.
    s.send_line(
        &json!({"type":"diagnostics","uri":plain,"diagnostics":[d("kept", "Error")]}).to_string(),
    );
    call_until_json(&mut c, |v| v.to_string().contains("kept"));
    let v = json_of(&call(&mut c, "getDiagnostics", json!({"uri": encoded})));
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        (&v[0]["uri"], &v[0]["diagnostics"][0]["message"]),
        (&json!(encoded), &json!("kept"))
    );
    // Reported again under the other spelling: still one entry.
    s.send_line(
        &json!({"type":"diagnostics","uri":encoded,"diagnostics":[d("again", "Warning")]})
            .to_string(),
    );
    let all = call_until_json(&mut c, |v| v.to_string().contains("again"));
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");

    refused(
        &mut s,
        &json!({"type":"diagnostics","uri":plain,"diagnostics":[d("x", "error")]}).to_string(),
        "severity \"error\" is not one of Error, Warning, Information, Hint",
    );
    let huge = "y".repeat(25 * 1024 * 1024);
    refused(
        &mut s,
        &json!({"type":"diagnostics","uri":plain,"diagnostics":[d(&huge, "Error")]}).to_string(),
        "bytes of diagnostics are kept over all files",
    );
    // A URI of a file on another host is none of this machine's: it was read as `/host/...`.
    refused(
        &mut s,
        &json!({"type":"diagnostics","uri":"file://host/a.rs","diagnostics":[d("x", "Error")]})
            .to_string(),
        "uri must be a file:// URI or an absolute path",
    );
    refused(
        &mut s,
        r#"{"type":"at_mentioned","filePath":"src/a.rs"}"#,
        "filePath must be absolute",
    );
    refused(
        &mut s,
        &json!({"type":"at_mentioned","filePath":path,"lineStart":9,"lineEnd":3}).to_string(),
        "lineStart 9 is after lineEnd 3",
    );
    refused(
        &mut s,
        &json!({"type":"at_mentioned","filePath":path,"lineStart":9}).to_string(),
        "give both lineStart and lineEnd",
    );
    let stdin = s.stdin.as_mut().unwrap();
    stdin
        .write_all(b"{\"type\":\"at_mentioned\",\"filePath\":\"/ws/\xff.rs\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    let e = next_msg(&s, "error", errors);
    assert!(e["message"].as_str().unwrap().contains("not UTF-8"), "{e}");
    // A selection in a buffer whose bytes are not all UTF-8 (Vim passes them through): its text
    // reaches claude with U+FFFD where they were, not refused.
    let text: &[u8] = b"caf\xe9 \xed\xa0\x80!";
    let mut line = br#"{"type":"selection_changed","filePath":""#.to_vec();
    line.extend_from_slice(path.as_bytes());
    line.extend_from_slice(br#"","text":""#);
    line.extend_from_slice(text);
    line.extend_from_slice(
        br#"","selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":6}}}"#,
    );
    line.push(b'\n');
    let stdin = s.stdin.as_mut().unwrap();
    stdin.write_all(&line).unwrap();
    stdin.flush().unwrap();
    // The editor's lines are handled in turn: once `status` is answered, the selection is kept
    // (the client's call comes on another link, which may be read first).
    s.send_line(r#"{"type":"status"}"#);
    next_msg(&s, "status", 0);
    let v = json_of(&call(&mut c, "getCurrentSelection", json!({})));
    assert_eq!(v["text"], *String::from_utf8_lossy(text), "{v}");
    // But one whose path is not UTF-8 names no file: refused, the selection kept.
    let errors = errors + 1;
    let stdin = s.stdin.as_mut().unwrap();
    stdin
        .write_all(
            b"{\"type\":\"selection_changed\",\"filePath\":\"/ws/caf\xe9.rs\",\"text\":\"x\"}\n",
        )
        .unwrap();
    stdin.flush().unwrap();
    let e = next_msg(&s, "error", errors);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("filePath is not UTF-8"),
        "{e}"
    );
    let v = json_of(&call(&mut c, "getCurrentSelection", json!({})));
    assert_eq!(v["filePath"], *path, "{v}");
    // What was kept before the refusals is still there.
    let v = json_of(&call(&mut c, "getDiagnostics", json!({"uri": plain})));
    assert_eq!(v[0]["diagnostics"][0]["message"], "again", "{v}");

    // checkDocumentDirty answers from the editor's tabs: a file on disk it has no tab for is
    // not open in it.
    fs::write(&path, "fn main() {}\n").unwrap();
    let r = call(&mut c, "checkDocumentDirty", json!({"filePath": path}));
    assert!(is_error(&r), "{r}");
    assert_eq!(texts(&r), [format!("Document not open: {path}")]);
    s.send_line(
        &json!({"type":"open_editors","tabs":[{"uri": plain, "isDirty": true}]}).to_string(),
    );
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        let r = call(&mut c, "checkDocumentDirty", json!({"filePath": path}));
        if !is_error(&r) {
            assert_eq!(json_of(&r)["isDirty"], true, "{r}");
            break;
        }
        assert!(std::time::Instant::now() < give_up, "{r}");
        std::thread::sleep(Duration::from_millis(20));
    }

    // null: the editor stops reporting the file.
    s.send_line(&json!({"type":"diagnostics","uri":plain,"diagnostics":null}).to_string());
    call_until_json(&mut c, |v| v == &json!([]));
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// `getDiagnostics {}` until its answer satisfies `ok` (the editor's lines are handled in turn
/// with the client's calls).
fn call_until_json(c: &mut Client, ok: impl Fn(&Value) -> bool) -> Value {
    let give_up = std::time::Instant::now() + WAIT;
    loop {
        let v = json_of(&call(c, "getDiagnostics", json!({})));
        if ok(&v) {
            return v;
        }
        assert!(std::time::Instant::now() < give_up, "stayed {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An editor that stops reading stdout but keeps writing lines the bridge refuses (not UTF-8):
/// each refusal is an `error` line waiting to be written, so the bridge reads at most two lines
/// ahead of them and the editor waits on its writes, instead of the bridge queueing without end.
#[test]
fn refused_lines_count_towards_the_lines_read_ahead() {
    use std::io::Write;
    use std::process::Stdio;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let sb = Sandbox::new();
    let mut child = stdio_child(&sb, Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    let _stdout_not_read = child.stdout.take().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    std::thread::spawn(move || {
        let chunk = b"\x80\n".repeat(4096);
        for _ in 0..256 {
            if stdin.write_all(&chunk).is_err() {
                return;
            }
            counter.fetch_add(chunk.len(), Ordering::Relaxed);
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    let n = written.load(Ordering::Relaxed);
    let _ = child.kill();
    let _ = child.wait();
    // Two pipes' worth (the editor's and the bridge's, 64 KiB each here), not the 2 MiB written.
    assert!(
        n < 512 * 1024,
        "{n} bytes taken from an editor that does not read"
    );
}

/// The editor accepts a diff and goes away at once (`:wqa` in Vim: the write accepts, then stdin
/// closes, and Vim sends its jobs SIGTERM as it exits): claude gets the accepted contents, not the
/// error the stop gives what is still pending. With 300 lines before the decision the signal
/// reaches the host first: the lines written before it are handled before the stop, whether stdin
/// then closes or stays open.
#[test]
fn a_diff_accepted_as_the_editor_quits_is_saved() {
    let rounds = RUNTIMES
        .iter()
        .map(|rt| (*rt, None))
        .chain([("threads", Some(true)), ("smol", Some(false))]);
    for (rt, closes) in rounds {
        let sb = Sandbox::new();
        fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
        let mut s = Served::start(&sb, &["--stdio", "--runtime", rt, "--no-lsp"]);
        s.stdout.wait_for("\"ready\"");
        let mut c = s.client();
        next_msg(&s, "initialized", 0);
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&sb.ws.join("a.rs"), "proposed\n", "T"),
        );
        let tc = next_msg(&s, "tool_call", 0);
        let decision = json!({"type":"diff_decision","id":tc["id"],"decision":"accept"});
        match closes {
            None => {
                s.send_line(&decision.to_string());
                drop(s.stdin.take());
            }
            Some(closes) => {
                // Lines the bridge reads one at a time (two at most waiting for the host), so
                // the signal reaches the host well before the decision at their end.
                let lines = "{\"type\":\"status\"}\n".repeat(300) + &decision.to_string();
                s.send_line(&lines);
                if closes {
                    drop(s.stdin.take());
                }
                // Twice, as Vim does (its job's process group, then the job).
                s.signal("TERM");
                s.signal("TERM");
            }
        }
        let r = c
            .recv_until(Duration::from_secs(10), |v| v["id"] == json!(id))
            .unwrap_or_else(|| {
                panic!(
                    "{rt}, closes {closes:?}: no answer: {}\n{}",
                    s.stderr.text(),
                    s.stdout.text()
                )
            });
        assert_eq!(
            texts(&r),
            ["FILE_SAVED", "proposed\n"],
            "{rt}, closes {closes:?}: {r}"
        );
        assert_eq!(s.wait_exit(), 0);
    }
}

/// The bridge stopping (stdin closed, or a signal) tells the editor: the calls it was asked
/// are `cancelled` and the clients `disconnected`, both `server_stopped`, as docs/stdio.md says.
#[test]
fn a_stopping_bridge_tells_the_editor_what_ends() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    s.stdout.wait_for("\"ready\"");
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    c.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.rs"), "proposed\n", "T"),
    );
    let tc = next_msg(&s, "tool_call", 0);
    s.signal("TERM");
    assert_eq!(s.wait_exit(), 0);
    let cancelled = next_msg(&s, "cancelled", 0);
    assert_eq!(
        (cancelled["id"].clone(), cancelled["reason"].clone()),
        (tc["id"].clone(), json!("server_stopped"))
    );
    let gone = next_msg(&s, "disconnected", 0);
    assert_eq!(
        (gone["conn"].clone(), gone["reason"].clone()),
        (json!(1), json!("server_stopped"))
    );
}

/// The editor's link drops (stdin ends) with a diff pending: claude gets a tool error for it,
/// not `DIFF_REJECTED`, since nobody decided (the real client then keeps its own accept prompt,
/// docs/e2e.md); the file is untouched and the bridge exits 0.
#[test]
fn a_dropped_link_answers_a_pending_diff_with_an_error_not_a_rejection() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp", "--ide-name", "Ed"]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.rs"), "proposed\n", "T"),
    );
    next_msg(&s, "tool_call", 0);
    drop(s.stdin.take());
    let r = c.response(id);
    assert!(is_error(&r), "{r}");
    assert_eq!(
        texts(&r),
        [
            "Ed: the editor did not answer: its link to the bridge ended before the user decided \
          (nothing was accepted or written)"
        ]
    );
    assert_eq!(s.wait_exit(), 0);
    assert_eq!(fs::read_to_string(sb.ws.join("a.rs")).unwrap(), "old\n");
}

/// An editor that stops reading stdout while the bridge has much to tell it (10,000 `status`
/// answers, about 2 MiB: more than the pipe and the bridge's own queue hold) does not make the
/// bridge deaf: SIGTERM still stops it, and the lines nobody reads are given up after a grace
/// period. (The host wrote to stdout itself and stayed blocked in that write for good.)
#[test]
fn a_bridge_whose_editor_does_not_read_still_stops_on_a_signal() {
    use std::io::Write;
    use std::process::Stdio;
    let sb = Sandbox::new();
    let mut child = stdio_child(&sb, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let _stdout_not_read = child.stdout.take().unwrap();
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        let lines = "{\"type\":\"status\"}\n".repeat(10_000);
        let _ = stdin.write_all(lines.as_bytes());
        // Kept open: the bridge must stop for the signal, not for stdin's end.
        std::thread::sleep(Duration::from_secs(60));
    });
    stderr.wait_for("diffs: the editor decides");
    std::thread::sleep(Duration::from_secs(2));
    let status = term_and_wait(&mut child);
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
}

/// `--editor-timeout`: a link gone silent (stdin still open, nothing on it: a laptop asleep, a
/// network gone, which the pipe does not tell for hours) stops the bridge as stdin's end would.
/// An editor that keeps sending lines more often than the limit keeps it running, past the
/// limit; then, silent with a diff pending, claude gets the tool error for it (not
/// `DIFF_REJECTED`), the file is untouched, the lock file is gone, and the bridge says why.
#[test]
fn a_silent_editor_link_stops_the_bridge_after_editor_timeout() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
    let args = [
        "--stdio",
        "--no-lsp",
        "--ide-name",
        "Ed",
        "--editor-timeout",
        "2",
    ];
    let mut s = Served::start(&sb, &args);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    // 4 s of `status` lines every 400 ms: twice the limit, and the bridge stays.
    for n in 0..10 {
        s.send_line(r#"{"type":"status"}"#);
        next_msg(&s, "status", n);
        std::thread::sleep(Duration::from_millis(400));
    }
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "stopped while the editor spoke: {}",
        s.stderr.text()
    );
    assert!(
        !s.stderr.text().contains("nothing came"),
        "{}",
        s.stderr.text()
    );
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.rs"), "proposed\n", "T"),
    );
    next_msg(&s, "tool_call", 0);
    // Nothing more from the editor; its end of stdin stays open.
    let r = c.response(id);
    assert!(is_error(&r), "{r}");
    assert!(
        texts(&r)[0].contains("Ed: the editor did not answer"),
        "{r}"
    );
    assert_eq!(s.wait_exit(), 0);
    assert!(
        s.stderr
            .text()
            .contains("nothing came from the editor for 2 s (--editor-timeout)"),
        "{}",
        s.stderr.text()
    );
    assert!(!s.lock.exists(), "the lock file stayed");
    assert_eq!(fs::read_to_string(sb.ws.join("a.rs")).unwrap(), "old\n");
    assert!(s.stdin.is_some(), "stdin was kept open throughout");
}

/// `--editor-timeout` with an editor that stopped reading: it wrote `status` lines without
/// reading the answers until the bridge, its stdout full, stopped taking its lines, then went
/// silent (the link died so). Neither way moves, and the bridge stops once the limit passed
/// since the last byte either way. Before, the time the reader waited for room did not count,
/// and the bridge stayed for as long as the transport kept the pipes open (hours for ssh).
#[test]
fn an_editor_link_that_died_unread_stops_the_bridge_after_editor_timeout() {
    use std::io::Write;
    use std::process::Stdio;
    let sb = Sandbox::new();
    let mut child = sb
        .command()
        .args(["serve", "--stdio", "--no-lsp", "--editor-timeout", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    // Held, never read.
    let _stdout = child.stdout.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written until the bridge stops taking them (a write blocks): then the writer is stuck,
    // as a dead link's would be, until the bridge is gone (its end closes: the write fails).
    let writer = std::thread::spawn(move || {
        let mut lines = 0u64;
        while lines < 1_000_000 && stdin.write_all(b"{\"type\":\"status\"}\n").is_ok() {
            lines += 1;
        }
        lines
    });
    let status = common::exit_within(&mut child, Duration::from_secs(60), &|| stderr.text());
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    assert!(
        stderr
            .text()
            .contains("nothing came from the editor for 2 s (--editor-timeout)"),
        "{}",
        stderr.text()
    );
    let lines = writer.join().unwrap();
    assert!(lines < 1_000_000, "the bridge kept reading: {lines} lines");
}

/// `--editor-timeout` is for `--stdio` only, and takes 1 s to a day.
#[test]
fn editor_timeout_is_refused_without_stdio_or_out_of_range() {
    let sb = Sandbox::new();
    for args in [
        &["serve", "--editor-timeout", "5"][..],
        &["serve", "--stdio", "--editor-timeout", "0"],
        &["serve", "--stdio", "--editor-timeout", "86401"],
    ] {
        let out = sb.command().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--editor-timeout") || err.contains("--stdio"),
            "{args:?}: {err}"
        );
    }
}

/// An editor that stops reading stdout and then closes stdin: the bridge, held up by a full
/// stdout, still takes stdin's end and stops (it waited for room for good: only a signal told
/// the writer to give up). And an `openDiff` that arrives while it stops (its last lines wait,
/// at most 2 s, for the editor to read them) is answered with the tool error, as those the editor
/// had: nobody decided it, and `DIFF_REJECTED` would end claude's turn as the user's no.
#[test]
fn stdin_closing_stops_a_bridge_whose_editor_no_longer_reads_and_rejects_no_diff() {
    use std::process::Stdio;
    let sb = Sandbox::new();
    fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
    let mut child = stdio_child(&sb, Stdio::piped());
    let stdin = child.stdin.take().unwrap();
    let _stdout_not_read = child.stdout.take().unwrap();
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    let port = stderr.port();
    let lock = stderr.wait_for("lock file: ");
    let lock = lock.split_once("lock file: ").unwrap().1.trim().to_owned();
    let lock: Value = serde_json::from_str(&fs::read_to_string(lock).unwrap()).unwrap();
    let (status, c) = client::connect(port, lock["authToken"].as_str());
    assert_eq!(status, 101);
    let mut c = c.unwrap();
    c.init();
    // Two `tool_call` lines of 1.5 MB each: the first fills the pipe, the second waits for room.
    let big = "x".repeat(1_500_000);
    let path = sb.ws.join("a.rs");
    let ids: Vec<u64> = ["T1", "T2"]
        .iter()
        .map(|tab| c.call_tool("openDiff", open_diff_args(&path, &big, tab)))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    stderr.wait_for("stdin closed: stopping");
    let late = c.call_tool("openDiff", open_diff_args(&path, "late\n", "T3"));
    let got = responses(&mut c, &[ids[0], ids[1], late]);
    for id in [ids[0], ids[1], late] {
        let r = &got[&id];
        assert!(is_error(r), "{r}");
        assert!(texts(r)[0].contains("the editor did not answer"), "{r}");
    }
    let status = exit_within(&mut child, STOP_WAIT, &|| {
        format!("at stdin's end: {}", stderr.text())
    });
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
}

/// An editor that closes its end of stdout but not stdin (`serve --stdio | head -1`, an editor
/// gone without closing its pipes' other end): the bridge stops when the reader goes, as at
/// stdin's end, and the lock file goes. It went on with its lock file advertised, forwarding
/// calls nobody could answer; then it stopped only at the first line it could not write (the
/// `connected` of the first claude to connect, which found a bridge that stopped under it).
#[test]
fn a_closed_stdout_stops_the_bridge() {
    use std::io::BufRead;
    use std::process::Stdio;
    let sb = Sandbox::new();
    let mut child = stdio_child(&sb, Stdio::piped());
    let _stdin_kept_open = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    let lock = stderr.wait_for("lock file: ");
    let lock = lock.split_once("lock file: ").unwrap().1.trim().to_owned();
    assert!(std::path::Path::new(&lock).exists());
    // The first line (`ready`) read, then the reader's end closed; no client comes.
    let mut first = String::new();
    let mut reader = std::io::BufReader::new(stdout);
    reader.read_line(&mut first).unwrap();
    assert!(first.contains("\"ready\""), "{first}");
    drop(reader);
    let status = exit_within(&mut child, STOP_WAIT, &|| stderr.text());
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    assert!(
        stderr
            .text()
            .contains("stdout has no reader any more (the editor closed its end): stopping"),
        "{}",
        stderr.text()
    );
    assert!(!std::path::Path::new(&lock).exists());
}

/// stdin that cannot be read (a non-blocking pipe with nothing in it answers `EAGAIN`) is taken
/// as its end, and the log says why: the bridge stopped at once without a word.
#[test]
fn stdin_that_cannot_be_read_is_said() {
    use std::os::fd::OwnedFd;
    use std::process::Stdio;
    let sb = Sandbox::new();
    let (r, w) = std::io::pipe().unwrap();
    let r = OwnedFd::from(r);
    rustix::fs::fcntl_setfl(&r, rustix::fs::OFlags::NONBLOCK).unwrap();
    let mut child = sb
        .command()
        .args(["serve", "--stdio", "--no-lsp"])
        .stdin(Stdio::from(r))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    let said = stderr.wait_for("stdin could not be read");
    assert!(said.contains("taken as its end"), "{said}");
    let status = exit_within(&mut child, STOP_WAIT, &|| {
        format!("at stdin's error: {}", stderr.text())
    });
    assert_eq!(status.code(), Some(0), "{}", stderr.text());
    drop(w);
}

/// A panic of the thread that reads the editor's lines (made on purpose by a debug build's test
/// switch, at its first line) stops the bridge, status 101, its lock file removed. It went on
/// running, deaf to its editor, its lock file still offering it to claude.
#[test]
fn a_panic_of_the_stdio_reader_stops_the_bridge() {
    use std::io::Write;
    use std::process::Stdio;
    if !cfg!(debug_assertions) {
        claude_ide_bridge_testsupport::skip::skip("the panic switch is in debug builds only");
        return;
    }
    let sb = Sandbox::new();
    let mut child = sb
        .command()
        .args(["serve", "--stdio", "--no-lsp"])
        .env("CLAUDE_IDE_BRIDGE_TEST_PANIC", "stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = common::Lines::collect(child.stdout.take().unwrap());
    let stderr = common::Lines::collect(child.stderr.take().unwrap());
    stdout.wait_for("\"ready\"");
    // Kept open to the end: the stop is not stdin's.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"type\":\"status\"}\n").unwrap();
    stdin.flush().unwrap();
    let status = exit_within(&mut child, STOP_WAIT, &|| {
        format!("at its reader's panic: {}", stderr.text())
    });
    assert_eq!(status.code(), Some(101), "{}", stderr.text());
    let said = stderr.text();
    assert!(said.contains("CLAUDE_IDE_BRIDGE_TEST_PANIC"), "{said}");
    assert!(
        said.contains("internal error: the stdio thread panicked"),
        "{said}"
    );
    assert!(fs::read_dir(sb.lock_dir()).map_or(true, |mut d| d.next().is_none()));
    drop(stdin);
}

/// An editor that never reads the bridge's stderr (a pipe nobody drains: Node's `spawn` without a
/// listener) does not freeze it: past what the pipe holds, log lines are queued, then dropped,
/// while the editor's lines are still answered and a signal still stops it. (The host wrote its
/// log lines itself and stayed in that write for good after 64 KiB.)
#[test]
fn a_bridge_whose_stderr_is_not_read_keeps_answering() {
    use std::io::Write;
    use std::process::Stdio;
    let sb = Sandbox::new();
    let mut child = stdio_child(&sb, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = common::Lines::collect(child.stdout.take().unwrap());
    let _stderr_not_read = child.stderr.take().unwrap();
    stdout.wait_for("\"ready\"");
    // 3,000 refused lines: an `error` line on stdout and a log line on stderr each (200 KB).
    stdin
        .write_all("not json\n".repeat(3000).as_bytes())
        .unwrap();
    stdin.write_all(b"{\"type\":\"status\"}\n").unwrap();
    stdin.flush().unwrap();
    stdout.wait_for("\"status\"");
    assert!(stdout.count("\"error\"") >= 3000);
    assert_eq!(term_and_wait(&mut child).code(), Some(0));
}

/// With debug lines on (`CLAUDE_IDE_BRIDGE_LOG=debug`), the runtime's lines go the program's way
/// to stderr: one nobody reads does not freeze the bridge, and a closed one does not end it. The
/// runtimes wrote them themselves: past what the pipe holds their threads stayed in that write
/// (calls unanswered, no stop but SIGKILL), and a closed stderr panicked the thread writing (the
/// threads runtime's reader, which ended the bridge; smol's executor, which left it deaf).
#[test]
fn debug_lines_to_a_stderr_not_read_or_closed_hold_up_nothing() {
    use std::io::Write;
    use std::process::Stdio;
    for rt in RUNTIMES {
        for closed in [false, true] {
            let sb = Sandbox::new();
            let mut child = sb
                .command()
                .args(["serve", "--stdio", "--no-lsp", "--runtime", rt])
                .env("CLAUDE_IDE_BRIDGE_LOG", "debug")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let stdout = common::Lines::collect(child.stdout.take().unwrap());
            let stderr = child.stderr.take().unwrap();
            // Killed if the test fails: a frozen bridge stops for SIGKILL alone.
            let mut child = KilledOnDrop(child);
            let ready: Value = serde_json::from_str(&stdout.wait_for("\"ready\"")).unwrap();
            if closed {
                drop(stderr);
            } else {
                std::mem::forget(stderr); // open, never read
            }
            let lock = ready["lockFile"].as_str().unwrap();
            let lock: Value = serde_json::from_str(&fs::read_to_string(lock).unwrap()).unwrap();
            let port = ready["port"].as_u64().unwrap() as u16;
            let (code, c) = client::connect(port, lock["authToken"].as_str());
            assert_eq!(code, 101, "{rt}, stderr closed: {closed}");
            let mut c = c.unwrap();
            c.init();
            // A debug line or more each: more than a pipe holds.
            for n in 0..1500 {
                let r = call(&mut c, "getWorkspaceFolders", json!({}));
                assert!(
                    !is_error(&r),
                    "{rt}, stderr closed: {closed}, call {n}: {r}"
                );
            }
            stdin.write_all(b"{\"type\":\"status\"}\n").unwrap();
            stdin.flush().unwrap();
            stdout.wait_for("\"status\"");
            let status = term_and_wait(&mut child.0);
            assert_eq!(status.code(), Some(0), "{rt}, stderr closed: {closed}");
        }
    }
}

/// A child process killed when dropped (a test that failed), if it still runs.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A line is read for what the bridge uses, not built whole: a 48 MB `open_editors` line of
/// `[0,0,...]` (24 million tabs) and one of an unknown type cost about their own size, where each
/// was read into a `serde_json::Value` first (about 800 MB). The peak is the process's own
/// (`VmHWM`).
#[test]
fn a_huge_line_costs_about_its_own_size() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    s.stdout.wait_for("\"ready\"");
    let zeros = "0,".repeat(24_000_000);
    let line = format!("{{\"type\":\"open_editors\",\"tabs\":[{zeros}0]}}");
    // What is measured is memory, not time: a debug build on a loaded machine takes seconds to
    // read 48 MB, so the refusals get a bound well past the usual one.
    let slow = Duration::from_secs(90);
    s.send_line(&line);
    s.stdout.wait_for_within("more than the limit", slow);
    s.send_line(&format!("{{\"type\":\"no_such_type\",\"x\":[{zeros}0]}}"));
    s.stdout.wait_for_within("unknown message type", slow);
    let status = fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(
        peak_kb * 1024 < 3 * line.len() as u64,
        "peak {peak_kb} kB for a {} byte line",
        line.len()
    );
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// `serve --stdio --no-lsp` with stdin and stdout piped, and stderr as given.
fn stdio_child(sb: &Sandbox, stderr: std::process::Stdio) -> std::process::Child {
    use std::process::Stdio;
    sb.command()
        .args(["serve", "--stdio", "--no-lsp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Sends SIGTERM and waits (at most 20 s, then kills it and fails) for the exit.
fn term_and_wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    assert!(
        !claude_ide_bridge_runtime::signals::ignored(15),
        "SIGTERM is ignored in the tests' process: the bridge would inherit that"
    );
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    exit_within(child, STOP_WAIT, &|| "on SIGTERM".into())
}

/// A line must be a JSON object: an array is refused even when it would read by position as one
/// (`["status"]`), as is any other value.
#[test]
fn a_line_that_is_not_an_object_is_refused() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    s.stdout.wait_for("\"ready\"");
    for line in [r#"["status"]"#, "5", r#""status""#] {
        s.send_line(line);
    }
    s.send_line(r#"{"type":"status"}"#);
    next_msg(&s, "status", 0);
    for n in 0..3 {
        let e = next_msg(&s, "error", n);
        assert_eq!(e["message"], "expected a JSON object", "{e}");
    }
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A refusal quotes what the editor sent at most in part: an unknown `type` of 100 KB, or a
/// `decision` of 100 KB, comes back in an `error` line of about 1 KiB (the first came back twice,
/// whole: 200 KB; one of 60 MB, 120 MB), and the unknown type's line still lists the types.
#[test]
fn a_refusal_quotes_at_most_a_part_of_the_line() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    s.stdout.wait_for("\"ready\"");
    let long = "y".repeat(100_000);
    s.send_line(&json!({"type": long}).to_string());
    s.send_line(&json!({"type": "diff_decision", "id": 1, "decision": long}).to_string());
    s.send_line(r#"{"type":"status"}"#);
    next_msg(&s, "status", 0);
    let texts: Vec<String> = (0..2)
        .map(|n| {
            next_msg(&s, "error", n)["message"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for text in &texts {
        assert!(text.len() <= 1100, "{} bytes", text.len());
    }
    assert!(
        texts[0].starts_with("unknown message type \"yyy"),
        "{}",
        texts[0]
    );
    assert!(
        texts[0].contains("(one of: selection_changed, "),
        "{}",
        texts[0]
    );
    assert!(texts[1].starts_with("diff_decision: "), "{}", texts[1]);
    // The value cut, then what was expected.
    assert!(texts[1].contains("yyy...\", expected"), "{}", texts[1]);
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// An `openDiff` is decided with `diff_decision`, which checks the path again: `respond` can
/// only answer it with an error (the editor could not show it), and anything else is refused
/// with an `error` line, the call still waiting.
#[test]
fn respond_does_not_decide_an_open_diff() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio"]);
    let mut c = s.client();
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a.rs"), "new\n", "T"),
    );
    let tc = next_msg(&s, "tool_call", 0);
    for line in [
        json!({"type": "respond", "id": tc["id"], "text": "FILE_SAVED"}),
        json!({"type": "respond", "id": tc["id"], "result": {"content": [{"type": "text", "text": "FILE_SAVED"}]}}),
    ] {
        s.send_line(&line.to_string());
    }
    let refused = next_msg(&s, "error", 1);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("decide it with diff_decision"),
        "{refused}"
    );
    assert!(c
        .recv_until(Duration::from_millis(300), |v| v["id"] == json!(id))
        .is_none());
    s.send_line(
        &json!({"type": "respond", "id": tc["id"], "error": "cannot show diffs"}).to_string(),
    );
    let r = c.response(id);
    assert!(is_error(&r) && texts(&r) == ["cannot show diffs"], "{r}");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// Without `--path-map` the editor is given the bridge's own absolute paths, as docs/stdio.md
/// says: claude's relative path taken from the workspace folder and a `file://` URI by its
/// path, and an empty path, one starting with `~` or one with `..` refused with a tool error
/// (before, each went to the editor as it came, and Vim took it from its own current folder).
/// The editor's own paths: a selection's `.` and `..` resolved before claude is told; a
/// Windows drive's URI (a Windows editor without `--path-map`) refused rather than kept under
/// a made-up `/c/...` path.
#[test]
fn paths_reach_the_editor_absolute_and_claude_resolved_without_a_path_map() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp"]);
    let mut c = s.client();
    let ws = sb.ws.to_string_lossy().to_string();
    // (Files that are there: the editor is asked to open no other.)
    fs::create_dir(sb.ws.join("src")).unwrap();
    for f in ["src/a.rs", "b c.rs", "a.rs"] {
        fs::write(sb.ws.join(f), "x\n").unwrap();
    }
    let mut forwarded = 0;
    for (given, shown) in [
        ("src/a.rs".to_owned(), format!("{ws}/src/a.rs")),
        (format!("file://{ws}/b%20c.rs"), format!("{ws}/b c.rs")),
        (format!("{ws}/a.rs"), format!("{ws}/a.rs")),
    ] {
        let id = c.call_tool("openFile", json!({"filePath": given}));
        let tc = next_msg(&s, "tool_call", forwarded);
        forwarded += 1;
        assert_eq!(tc["arguments"]["filePath"], json!(shown), "{given}");
        s.send_line(&json!({"type":"respond","id":tc["id"],"text":"opened"}).to_string());
        assert_eq!(texts(&c.response(id)), ["opened"]);
    }
    for given in ["", "~/a.rs", &format!("{ws}/src/../a.rs")] {
        let id = c.call_tool("openFile", json!({"filePath": given}));
        let r = c.response(id);
        assert!(is_error(&r), "{given}: {r}");
        assert!(texts(&r)[0].contains("cannot be shown this"), "{r}");
    }
    // (None of those reached the editor.)
    let id = c.call_tool("saveDocument", json!({"filePath": format!("{ws}/a.rs")}));
    let tc = next_msg(&s, "tool_call", forwarded);
    assert_eq!(tc["name"], "saveDocument");
    s.send_line(&json!({"type":"respond","id":tc["id"],"text":"saved"}).to_string());
    assert_eq!(texts(&c.response(id)), ["saved"]);

    s.send_line(
        &json!({"type":"selection_changed","filePath":format!("{ws}/src/./../a.rs"),"text":"x",
            "selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}})
        .to_string(),
    );
    let n = c
        .recv_until(WAIT, |v| v["method"] == "selection_changed")
        .unwrap();
    assert_eq!(n["params"]["filePath"], json!(format!("{ws}/a.rs")));
    let d = json!({"message":"boom","severity":"Error",
        "range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}});
    s.send_line(
        &json!({"type":"diagnostics","uri":"file:///C:/Users/me/app/a.rs","diagnostics":[d]})
            .to_string(),
    );
    let e = next_msg(&s, "error", 0);
    assert!(e["message"].as_str().unwrap().contains("uri"), "{e}");
    let all = json_of(&call(&mut c, "getDiagnostics", json!({})));
    assert_eq!(all, json!([]), "nothing kept under /c/...");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// The files of a call for the editor are checked before it is asked, as the bridge checks its
/// own reads: a FIFO (Vim opening one froze, waiting for a writer), a link out of the workspace,
/// a file outside it, a missing one and one over `--max-read-bytes` (an editor loads it whole)
/// are refused with why, and the editor sees none of them. A regular file, a `file://` URI of
/// one, and a new file to save reach it.
#[test]
fn the_editor_is_handed_only_files_the_bridge_would_read() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp", "--max-read-bytes", "1000"]);
    let mut c = s.client();
    let fifo = sb.ws.join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    fs::write(sb.root().join("outside.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(sb.root().join("outside.txt"), sb.ws.join("out.txt")).unwrap();
    fs::write(sb.ws.join("big.txt"), "x".repeat(2000)).unwrap();
    fs::write(sb.ws.join("a.txt"), "a\n").unwrap();
    let refused = [
        ("openFile", json!({"filePath": fifo}), "FIFO"),
        (
            "openFile",
            json!({"filePath": sb.ws.join("out.txt")}),
            "outside",
        ),
        (
            "reformat_file",
            json!({"file_path": sb.root().join("outside.txt")}),
            "outside",
        ),
        (
            "openFile",
            json!({"filePath": sb.ws.join("none.txt")}),
            "File not found",
        ),
        (
            "openFile",
            json!({"filePath": sb.ws.join("big.txt")}),
            "2000 bytes",
        ),
        ("saveDocument", json!({"filePath": fifo}), "FIFO"),
    ];
    for (tool, args, said) in refused {
        let r = call(&mut c, tool, args.clone());
        assert!(is_error(&r), "{tool} {args}: {r}");
        assert!(texts(&r).join(" ").contains(said), "{tool} {args}: {r}");
    }
    let forwarded = |s: &Served| {
        (s.stdout.all().iter())
            .filter(|l| l.contains(r#""type":"tool_call""#))
            .count()
    };
    assert_eq!(forwarded(&s), 0, "{}", s.stdout.text());
    let uri = claude_ide_bridge::file_uri(sb.ws.join("a.txt").to_str().unwrap());
    let a = sb.ws.join("a.txt");
    for (n, (tool, args)) in [
        ("openFile", json!({"filePath": uri})),
        ("saveDocument", json!({"filePath": sb.ws.join("new.txt")})),
        // Of several, those that may not be opened are left out (the editor opens what is
        // there, as `serve` alone does).
        (
            "open_files",
            json!({"file_paths": [a, sb.ws.join("out.txt"), fifo, sb.ws.join("none"), "~/a.txt", ""]}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = c.call_tool(tool, args);
        let tc = next_msg(&s, "tool_call", n);
        assert_eq!(tc["name"], tool);
        if tool == "open_files" {
            assert_eq!(tc["arguments"]["file_paths"], json!([a]), "{tc}");
        }
        s.send_line(&json!({"type": "respond", "id": tc["id"], "text": "done"}).to_string());
        assert_eq!(texts(&c.response(id)), ["done"]);
    }
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A change proposed through a link to a folder (`ws/alias -> ws/d`) is shown to the editor at
/// its resolved path (`ws/d/f.txt`), and claude writes its own (`ws/alias/f.txt`): the link
/// pointed elsewhere while the editor decided, an accept is refused (a tool error for claude,
/// an `error` line for the editor), whether it now leads out of the workspace or to another file
/// of it. Before, the accept checked the path shown, which had not moved: claude was told
/// `FILE_SAVED` and wrote outside the workspace, or a file nobody had been shown.
#[test]
fn an_accept_checks_the_path_claude_writes_not_only_the_one_shown() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio"]);
    let mut c = s.client();
    for d in ["d", "e"] {
        fs::create_dir(sb.ws.join(d)).unwrap();
        fs::write(sb.ws.join(d).join("f.txt"), format!("{d}\n")).unwrap();
    }
    let outside = sb.root().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("f.txt"), "secret\n").unwrap();
    let alias = sb.ws.join("alias");
    let point = |to: &std::path::Path| {
        let _ = fs::remove_file(&alias);
        std::os::unix::fs::symlink(to, &alias).unwrap();
    };
    for (n, (to, said)) in [(outside.clone(), "outside"), (sb.ws.join("e"), "not to ")]
        .into_iter()
        .enumerate()
    {
        point(&sb.ws.join("d"));
        let claudes = alias.join("f.txt");
        let id = c.call_tool(
            "openDiff",
            open_diff_args(&claudes, "new\n", &format!("T{n}")),
        );
        let tc = next_msg(&s, "tool_call", n);
        let shown = tc["arguments"]["new_file_path"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(shown.ends_with("/d/f.txt"), "{tc}");
        point(&to);
        s.send_line(
            &json!({"type": "diff_decision", "id": tc["id"], "decision": "accept"}).to_string(),
        );
        let r = c.response(id);
        assert!(is_error(&r), "{r}");
        assert!(texts(&r).join(" ").contains(said), "{r}");
        let told = next_msg(&s, "error", n);
        assert!(
            told["message"].as_str().unwrap().contains("not accepted"),
            "{told}"
        );
    }
    // A plain file swapped, while the editor decides, for a link to another file of the
    // workspace: refused as well. It was accepted (only a path that held a link when shown was
    // looked at again), and claude wrote through the link, over that other file.
    let plain = sb.ws.join("plain.txt");
    fs::write(&plain, "plain\n").unwrap();
    let id = c.call_tool("openDiff", open_diff_args(&plain, "new\n", "T5"));
    let tc = next_msg(&s, "tool_call", 2);
    fs::remove_file(&plain).unwrap();
    std::os::unix::fs::symlink(sb.ws.join("e/f.txt"), &plain).unwrap();
    s.send_line(
        &json!({"type": "diff_decision", "id": tc["id"], "decision": "accept"}).to_string(),
    );
    let r = c.response(id);
    assert!(is_error(&r), "{r}");
    assert!(texts(&r).join(" ").contains("e/f.txt, not to "), "{r}");
    let told = next_msg(&s, "error", 2);
    assert!(
        told["message"].as_str().unwrap().contains("not accepted"),
        "{told}"
    );
    // Left as it was: the link to the file shown is accepted.
    point(&sb.ws.join("d"));
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&alias.join("f.txt"), "new\n", "T9"),
    );
    let tc = next_msg(&s, "tool_call", 3);
    s.send_line(
        &json!({"type": "diff_decision", "id": tc["id"], "decision": "accept"}).to_string(),
    );
    let r = c.response(id);
    assert!(!is_error(&r) && texts(&r)[0] == "FILE_SAVED", "{r}");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A `diff_decision` that could not be given is told to the editor with an `error` line: an
/// accepted change whose file became a link out of the workspace meanwhile (claude is told it
/// was refused), and decisions that reached the bridge before claude's cancellation of the
/// calls but were handled after it.
#[test]
fn a_decision_refused_or_too_late_is_told_to_the_editor() {
    let sb = Sandbox::new();
    let wire = HeldWireLog::new(&sb);
    let log = wire.path.to_str().unwrap().to_string();
    let mut s = Served::start(&sb, &["--stdio", "--wire-log", &log]);
    let mut c = s.client();
    let file = sb.ws.join("a.rs");
    fs::write(&file, "old\n").unwrap();
    let id = c.call_tool("openDiff", open_diff_args(&file, "new\n", "T1"));
    let tc = next_msg(&s, "tool_call", 0);
    fs::remove_file(&file).unwrap();
    fs::write(sb.root().join("outside.rs"), "secret\n").unwrap();
    std::os::unix::fs::symlink(sb.root().join("outside.rs"), &file).unwrap();
    s.send_line(
        &json!({"type": "diff_decision", "id": tc["id"], "decision": "accept"}).to_string(),
    );
    assert!(is_error(&c.response(id)));
    let told = next_msg(&s, "error", 0);
    assert!(
        told["message"].as_str().unwrap().contains("not accepted"),
        "{told}"
    );

    // Decided by the editor, then cancelled by claude: the host handles the decisions after
    // the engine took the cancellations.
    fs::remove_file(&file).unwrap();
    let ids: Vec<u64> = ["T2", "T3"]
        .iter()
        .map(|tab| c.call_tool("openDiff", open_diff_args(&file, "new\n", tab)))
        .collect();
    let forwarded = [next_msg(&s, "tool_call", 1), next_msg(&s, "tool_call", 2)];
    wire.hold(&mut c);
    for (tc, decision) in forwarded.iter().zip(["accept", "reject"]) {
        s.send_line(
            &json!({"type": "diff_decision", "id": tc["id"], "decision": decision}).to_string(),
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    for id in &ids {
        c.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
    }
    std::thread::sleep(Duration::from_millis(300));
    wire.release();
    for n in [1, 2] {
        let late = next_msg(&s, "error", n);
        assert!(
            late["message"]
                .as_str()
                .unwrap()
                .contains("diff_decision: id ")
                && late["message"].as_str().unwrap().contains("came too late"),
            "{late}"
        );
    }
    assert!(!file.exists(), "nothing was written");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// An accept whose `FILE_SAVED` (the whole new text) does not fit in what claude's connection
/// has left to queue is answered with an error by the engine: the editor is told its decision
/// was not given (it was told nothing, and took the change as saved while claude was told an
/// error). Ten changes of 9 MiB, accepted while claude reads nothing: past the 64 MiB limit of a
/// connection's output (and what the socket's buffers took) the last are refused, each said to
/// the editor.
#[test]
fn an_accept_that_does_not_fit_claudes_connection_is_told_to_the_editor() {
    let sb = Sandbox::new();
    let mut s = Served::start(&sb, &["--stdio"]);
    let mut c = s.client();
    let file = sb.ws.join("big.txt");
    fs::write(&file, "old\n").unwrap();
    let text = "x".repeat(9 << 20);
    let ids: Vec<u64> = (0..10)
        .map(|n| c.call_tool("openDiff", open_diff_args(&file, &text, &format!("T{n}"))))
        .collect();
    // Each shown to the editor (counted without parsing 90 MiB of lines each time).
    let shown = |s: &Served| -> Vec<u64> {
        let lines = s.stdout.0.lock().unwrap();
        (lines.iter())
            .filter(|l| l.starts_with(r#"{"type":"tool_call""#))
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    };
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while shown(&s).len() < ids.len() {
        assert!(std::time::Instant::now() < give_up, "not all shown");
        std::thread::sleep(Duration::from_millis(100));
    }
    for id in shown(&s) {
        s.send_line(&json!({"type": "diff_decision", "id": id, "decision": "accept"}).to_string());
    }
    // All answered before claude reads any: the last are replaced (the editor is told so
    // at once), and every accept is said.
    let told = |s: &Served| {
        let lines = s.stdout.0.lock().unwrap();
        (lines.iter())
            .filter(|l| l.starts_with(r#"{"type":"error""#) && l.contains("did not fit"))
            .count()
    };
    let accepted = |s: &Served| s.stderr.text().matches("diff accepted").count();
    while told(&s) == 0 || accepted(&s) < ids.len() {
        assert!(std::time::Instant::now() < give_up, "{}", s.stderr.text());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let answers = responses(&mut c, &ids);
    let refused: Vec<u64> = (ids.iter())
        .filter(|id| answers[id].get("error").is_some())
        .copied()
        .collect();
    assert!(
        !refused.is_empty() && refused.len() < ids.len(),
        "{refused:?}"
    );
    // One `error` line for each ("diff_decision: id N: not accepted; claude was told: an error:
    // the answer did not fit ...").
    assert_eq!(told(&s), refused.len());
    let lines = s.stdout.0.lock().unwrap().clone();
    let said = (lines.iter()).filter(|l| l.contains("did not fit"));
    assert!(
        said.clone().all(|l| l.contains("not accepted")),
        "{:?}",
        said.collect::<Vec<_>>()
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "old\n");
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// `--editor-timeout` across a pause of the bridge (stopped, a container paused) while the editor
/// kept the link alive: its lines wait in the pipe, unread, and the late wake-up is not silence.
/// The bridge stopped itself at the wake when its silence watch woke before its reader (4 of 6
/// runs on a loaded machine in the freeze audit). A real silence still stops it.
#[test]
fn a_pause_of_the_bridge_is_not_the_editors_silence() {
    use rustix::process::{kill_process, Pid, Signal};
    let sb = Sandbox::new();
    let args = ["--stdio", "--no-lsp", "--editor-timeout", "2"];
    let mut s = Served::start(&sb, &args);
    let _c = s.client();
    next_msg(&s, "initialized", 0);
    let pid = Pid::from_raw(s.child.id() as i32).unwrap();
    kill_process(pid, Signal::STOP).unwrap();
    // 4 s stopped, twice the limit, with the editor's lines waiting.
    for _ in 0..10 {
        s.send_line(r#"{"type":"status"}"#);
        std::thread::sleep(Duration::from_millis(400));
    }
    kill_process(pid, Signal::CONT).unwrap();
    for _ in 0..5 {
        s.send_line(r#"{"type":"status"}"#);
        std::thread::sleep(Duration::from_millis(400));
    }
    assert!(
        s.child.try_wait().unwrap().is_none() && !s.stderr.text().contains("nothing came"),
        "stopped at the wake: {}",
        s.stderr.text()
    );
    // Silent now: stopped after the limit.
    assert_eq!(s.wait_exit(), 0);
    assert!(s
        .stderr
        .text()
        .contains("nothing came from the editor for 2 s"));
}
