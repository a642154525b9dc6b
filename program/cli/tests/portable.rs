//! The program end to end on every OS, Windows included: `scripts/test-all.d/platforms.sh` builds
//! this file for `x86_64-pc-windows-gnu` and runs it under Wine, so the Windows program is started
//! for real there (its lock file, sockets, tools, file access and `--stdio`). Nothing here uses a
//! Unix tool; paths are the OS's own (`C:\...` on Windows). The Unix-only scenarios are in
//! `serve.rs`, `stdio.rs` and the rest. How a Windows program is told to stop by its console
//! (Ctrl-C) is in `console.rs`, which needs a console.

mod common;

use std::fs;
use std::process::Stdio;

use common::*;
use serde_json::{json, Value};

/// `serve`: its lock file's fields, the token checked at the upgrade, the MCP handshake and tools
/// answered with the OS's paths, file access kept inside the workspace, and `list` telling a
/// running bridge from one that was killed (its pid's liveness: `OpenProcess` on Windows).
#[test]
fn serve_answers_with_the_os_paths_and_stays_in_the_workspace() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        fs::create_dir_all(sb.ws.join("src")).unwrap();
        fs::write(sb.ws.join("src").join("a.rs"), "fn main() {}\n").unwrap();
        let outside = sb.root().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        let mut s = Served::start(
            &sb,
            &[
                "--runtime",
                rt,
                "--on-diff",
                "accept",
                "--no-lsp",
                "--ide-name",
                "Portable Test",
            ],
        );
        let ws = sb.ws.to_string_lossy().to_string();

        // The lock file: where claude looks, with the fields it reads.
        assert_eq!(s.lock, sb.lock_dir().join(format!("{}.lock", s.port)));
        let lock: Value = serde_json::from_str(&fs::read_to_string(&s.lock).unwrap()).unwrap();
        assert_eq!(lock["pid"], s.child.id(), "{lock}");
        assert_eq!(lock["workspaceFolders"], json!([ws]), "{lock}");
        assert_eq!(lock["ideName"], "Portable Test", "{lock}");
        assert_eq!(lock["transport"], "ws", "{lock}");
        assert_eq!(lock["runningInWindows"], cfg!(windows), "{lock}");
        let token = lock["authToken"].as_str().unwrap();
        assert!(token.len() >= 32, "{lock}");

        // The token is checked before the upgrade.
        assert_eq!(client::connect(s.port, None).0, 401);
        assert_eq!(client::connect(s.port, Some("wrong")).0, 401);
        let (status, c) = client::connect(s.port, Some(token));
        assert_eq!(status, 101);
        let mut c = c.unwrap();
        let init = c.init();
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        let tools = c.request("tools/list", json!({}));
        let names: Vec<&str> = (tools["result"]["tools"].as_array().unwrap().iter())
            .filter_map(|t| t["name"].as_str())
            .collect();
        for t in [
            "openDiff",
            "openFile",
            "getWorkspaceFolders",
            "getDiagnostics",
        ] {
            assert!(names.contains(&t), "{t} missing from {names:?}");
        }

        let v = json_of(&call(&mut c, "getWorkspaceFolders", json!({})));
        assert_eq!(v["success"], true, "{v}");
        assert_eq!(v["folders"][0]["path"], json!(ws), "{v}");
        // The folder's last component (on Windows it was the whole path).
        let name = sb.ws.file_name().unwrap().to_str().unwrap();
        assert_eq!(v["folders"][0]["name"], json!(name), "{v}");
        assert_eq!(v["rootPath"], json!(ws), "{v}");

        // openFile reads the file through the workspace's handle (its line count).
        let file = sb.ws.join("src").join("a.rs");
        let v = json_of(&call(
            &mut c,
            "openFile",
            json!({"filePath": file, "makeFrontmost": false}),
        ));
        assert_eq!(v["lineCount"], 1, "{v}");
        assert!(is_error(&call(
            &mut c,
            "openFile",
            json!({"filePath": sb.ws.join("missing.rs")})
        )));

        // openDiff under `--on-diff accept`: FILE_SAVED with the contents (claude writes them);
        // outside the workspace refused, and nothing written there.
        let r = call(&mut c, "openDiff", open_diff_args(&file, "new\n", "t1"));
        assert_eq!(texts(&r), ["FILE_SAVED", "new\n"], "{r}");
        let bad = outside.join("secret.txt");
        let dotdot = sb.ws.join("..").join("outside").join("planted.txt");
        for (i, p) in [&bad, &dotdot].into_iter().enumerate() {
            let r = call(
                &mut c,
                "openDiff",
                open_diff_args(p, "pwned\n", &format!("b{i}")),
            );
            assert!(is_error(&r), "{} must be refused: {r}", p.display());
        }

        // The compatibility methods: a file read and written (atomically, replacing it) inside,
        // refused outside, the workspace listed.
        let r = c.request("readFile", json!({"path": "src/a.rs"}));
        assert_eq!(r["result"]["content"], "fn main() {}\n", "{r}");
        let r = c.request("writeFile", json!({"path": "src/a.rs", "content": "B\n"}));
        assert_eq!(r["result"]["success"], true, "{r}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "B\n");
        let r = c.request("writeFile", json!({"path": "src/b.rs", "content": "C\n"}));
        assert_eq!(r["result"]["success"], true, "{r}");
        assert_eq!(
            fs::read_to_string(sb.ws.join("src").join("b.rs")).unwrap(),
            "C\n"
        );
        for p in [
            bad.to_string_lossy().to_string(),
            "../outside/secret.txt".into(),
        ] {
            let r = c.request("readFile", json!({"path": p}));
            assert_eq!(r["error"]["code"], -32602, "{p}: {r}");
            let r = c.request("writeFile", json!({"path": p, "content": "pwned"}));
            assert_eq!(r["error"]["code"], -32602, "{p}: {r}");
        }
        assert_eq!(fs::read_to_string(&bad).unwrap(), "secret\n");
        assert!(!outside.join("planted.txt").exists());
        let r = c.request("listFiles", json!({"pattern": "*.rs"}));
        let mut files: Vec<String> = (r["result"]["files"].as_array().unwrap().iter())
            .map(|f| {
                f.as_str()
                    .unwrap_or_else(|| f["path"].as_str().unwrap())
                    .to_string()
            })
            .collect();
        files.sort();
        assert_eq!(files.len(), 2, "{r}");
        assert!(
            files[0].ends_with("a.rs") && files[1].ends_with("b.rs"),
            "{r}"
        );

        // `list` sees it running (its pid alive), then, once it is killed, stale.
        assert_eq!(list_state(&sb, s.port), "live");
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        assert_eq!(list_state(&sb, s.port), "stale");
    }
}

/// `serve --stdio`: the editor's lines (status, a diff it decides) and the stop when its stdin
/// closes, lock file removed.
/// A bridge on `::` is reached at 127.0.0.1 where `::` takes IPv4 too (Linux and macOS by
/// default), so claude needs no override; on Windows it takes IPv6 alone, and the `ready` line
/// names `[::1]`, where a client connecting as claude then does is served.
#[test]
fn stdio_ready_names_the_host_a_bridge_on_every_address_is_reached_at() {
    let sb = Sandbox::new();
    let s = Served::start(&sb, &["--stdio", "--no-lsp", "--host", "::"]);
    let ready = next_msg(&s, "ready", 0);
    let host = if cfg!(windows) { "[::1]" } else { "127.0.0.1" };
    assert_eq!(ready["host"], host, "{ready}");
    let (status, c) = client::connect_to(host, s.port, Some(&s.token())).unwrap();
    assert_eq!(status, 101);
    c.unwrap().init();
}

#[test]
fn stdio_editor_decides_and_its_stdin_closing_stops_the_bridge() {
    for rt in RUNTIMES {
        let sb = Sandbox::new();
        let file = sb.ws.join("a.txt");
        fs::write(&file, "old\n").unwrap();
        let mut s = Served::start(&sb, &["--stdio", "--runtime", rt, "--no-lsp"]);
        let ws = sb.ws.to_string_lossy().to_string();
        let ready = next_msg(&s, "ready", 0);
        assert_eq!(ready["port"], s.port, "{ready}");
        assert_eq!(ready["host"], "127.0.0.1", "{ready}");
        assert_eq!(ready["lockFile"], json!(s.lock), "{ready}");
        s.send_line(r#"{"type":"status"}"#);
        let st = next_msg(&s, "status", 0);
        assert_eq!(st["workspace"], json!([ws]), "{st}");
        assert_eq!(st["clients"], json!([]), "{st}");

        let mut c = s.client();
        next_msg(&s, "initialized", 0);
        // A line that is not JSON is refused with an error line; the bridge goes on.
        s.send_line("not json");
        next_msg(&s, "error", 0);

        // The editor's diagnostics, for a URI as an editor writes it (on Windows the drive
        // upper-cased, `file:///Z:/...`): claude gets them under the URI claude and the language
        // servers write (`file:///z:/...`), which names the drive (the bridge's wire form,
        // `file:///z/...`, names no file on Windows).
        let path = file.to_string_lossy().replace('\\', "/");
        let editors = format!("file:///{}", path.trim_start_matches('/'));
        let diag = json!({"message": "from the editor", "severity": "Error",
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}});
        s.send_line(
            &json!({"type": "diagnostics", "uri": editors, "diagnostics": [diag]}).to_string(),
        );
        let theirs = claude_ide_bridge::file_uri(&file.to_string_lossy());
        let note = c
            .recv_until(WAIT, |v| v["method"] == "diagnostics_changed")
            .unwrap_or_else(|| panic!("no diagnostics_changed: {}", s.stderr.text()));
        assert_eq!(note["params"]["uri"], json!(theirs), "{note}");
        let all = json_of(&call(&mut c, "getDiagnostics", json!({})));
        assert_eq!(all[0]["uri"], json!(theirs), "{all}");
        assert_eq!(
            all[0]["diagnostics"][0]["message"], "from the editor",
            "{all}"
        );

        // The editor is told of a proposed change with the OS's path, and decides it.
        let id = c.call_tool("openDiff", open_diff_args(&file, "new\n", "tab"));
        let tc = next_msg(&s, "tool_call", 0);
        assert_eq!(tc["name"], "openDiff", "{tc}");
        assert_eq!(tc["arguments"]["new_file_path"], json!(file), "{tc}");
        s.send_line(
            &json!({"type": "diff_decision", "id": tc["id"], "decision": "accept",
                            "contents": "edited\n"})
            .to_string(),
        );
        assert_eq!(texts(&c.response(id)), ["FILE_SAVED", "edited\n"]);
        let id = c.call_tool("openDiff", open_diff_args(&file, "other\n", "tab2"));
        let tc = next_msg(&s, "tool_call", 1);
        s.send_line(
            &json!({"type": "diff_decision", "id": tc["id"], "decision": "reject"}).to_string(),
        );
        assert_eq!(texts(&c.response(id))[0], "DIFF_REJECTED");
        // Outside the workspace: refused by the bridge, never forwarded.
        let outside = sb.root().join("elsewhere.txt");
        let r = call(&mut c, "openDiff", open_diff_args(&outside, "x\n", "tab3"));
        assert!(is_error(&r), "{r}");

        // The editor goes away: its stdin closes, the bridge stops and removes its lock file.
        drop(s.stdin.take());
        assert_eq!(s.wait_exit(), 0, "{}", s.stderr.text());
        assert!(!s.lock.exists(), "{}", s.lock.display());
        assert!(c.closed_within(WAIT), "the connection ends with the bridge");
    }
}

/// `list`'s word for the lock file of `port`: `live` or `stale`.
fn list_state(sb: &Sandbox, port: u16) -> String {
    let out = sb
        .command()
        .arg("list")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let needle = format!("port {port} ");
    let line = text.lines().find(|l| l.contains(&needle));
    let line = line.unwrap_or_else(|| panic!("no lock file for port {port} in:\n{text}"));
    line.split_whitespace().next().unwrap().to_string()
}
