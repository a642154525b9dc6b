//! `serve` under a storm of calls a client with bugs (or a hostile one holding the token) could
//! make: every tool and compatibility method, with valid arguments and with members replaced,
//! removed or added (paths outside the workspace, through a link leading out of it, relative,
//! climbing, NUL, URIs of other schemes, numbers past every bound), one at a time.
//!
//! What must hold (docs/protocol.md):
//!
//! - every request is answered exactly once, with a result or a JSON-RPC error;
//! - nothing outside the workspace changes, the folder a link inside it leads to included, and
//!   no file is read from there (its text never appears in an answer);
//! - another client, connected all along, is still served;
//! - the bridge stops on SIGTERM with status 0 and nothing panicked.
//!
//! `TOOL_STORM_SEED=N` repeats a run, `TOOL_STORM_CALLS=N` makes it longer.

// Unix only, as the other tests that drive the built program (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use common::storm::*;
use common::*;
use serde_json::{json, Value};

/// What every file outside the workspace holds: if an answer carries it, a read escaped.
const SECRET: &str = "outside-secret-7f3a";

/// A call as a correct client would make it: a tool's `tools/call`, or a compatibility method.
fn template(r: &mut Rng, names: &Names) -> (String, Value) {
    let file = r.pick(&names.files).clone();
    let tool = |name: &str, args: Value| {
        (
            "tools/call".to_string(),
            json!({"name": name, "arguments": args}),
        )
    };
    match r.below(22) {
        0 | 1 => tool(
            "openDiff",
            json!({"old_file_path": file, "new_file_path": file,
                   "new_file_contents": "new\n", "tab_name": format!("t{}", r.below(4))}),
        ),
        2 => tool("close_tab", json!({"tab_name": format!("t{}", r.below(4))})),
        3 => tool("closeAllDiffTabs", json!({})),
        4 | 5 => tool(
            "openFile",
            json!({"filePath": file, "preview": r.chance(50), "startText": "fn", "endText": "}",
                   "selectToEndOfLine": r.chance(50), "makeFrontmost": r.chance(50),
                   "startLine": r.below(5), "endLine": r.below(10)}),
        ),
        6 => tool(
            "open_files",
            json!({"file_paths": [file, r.pick(&names.files)]}),
        ),
        7 => tool("getDiagnostics", json!({"uri": uri_of(&file)})),
        8 => tool("getDiagnostics", json!({})),
        9 => tool("checkDocumentDirty", json!({"filePath": file})),
        10 => tool("saveDocument", json!({"filePath": file})),
        11 => tool("reformat_file", json!({"file_path": file})),
        12 => tool("executeCode", json!({"code": "1 + 1"})),
        13 => {
            let name = *r.pick(&[
                "getCurrentSelection",
                "getLatestSelection",
                "getOpenEditors",
                "getWorkspaceFolders",
                "get_all_opened_file_paths",
                "noSuchTool",
            ]);
            tool(name, json!({}))
        }
        14 | 15 => (
            r.pick(&["readFile", "files/read"]).to_string(),
            json!({"path": file}),
        ),
        16 | 17 => (
            "writeFile".into(),
            json!({"path": file, "content": format!("written {}\n", r.below(1000))}),
        ),
        18 => ("listFiles".into(), json!({"pattern": "**/*.rs"})),
        _ => (
            r.pick(&[
                "getWorkspaceInfo",
                "getOpenFiles",
                "getCurrentFile",
                "workspace/selection",
                "tools/list",
                "ping",
            ])
            .to_string(),
            json!({}),
        ),
    }
}

/// Every file under `dir` with its bytes, links as their targets (not followed).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = fs::symlink_metadata(&p).unwrap();
            let key = p.to_string_lossy().to_string();
            if meta.is_symlink() {
                let to = fs::read_link(&p).unwrap();
                all.insert(key, to.to_string_lossy().as_bytes().to_vec());
            } else if meta.is_dir() {
                all.insert(key, b"/".to_vec());
                todo.push(p);
            } else {
                all.insert(key, fs::read(&p).unwrap());
            }
        }
    }
    all
}

#[test]
fn a_storm_of_odd_calls_is_answered_once_each_and_stays_inside() {
    let seed = from_env("TOOL_STORM_SEED", 0x7001);
    let calls = from_env("TOOL_STORM_CALLS", 1500) as usize;
    let sb = Sandbox::new();
    let outside = sb.root().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.rs"), format!("{SECRET}\n")).unwrap();
    fs::write(sb.root().join("beside.rs"), format!("{SECRET}\n")).unwrap();
    for f in ["a.rs", "b.py", "dir/c.rs"] {
        let p = sb.ws.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "fn main() {}\n").unwrap();
    }
    std::os::unix::fs::symlink(&outside, sb.ws.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.rs"), sb.ws.join("secret.rs")).unwrap();
    let ws = sb.ws.to_string_lossy().to_string();
    let mut odd = odd_strings(&sb);
    odd.extend([
        format!("{ws}/out/secret.rs"),
        format!("{ws}/out/new.rs"),
        format!("{ws}/secret.rs"),
        format!("{ws}/out/../a.rs"),
        format!("{ws}/dir/../../beside.rs"),
        "../beside.rs".into(),
        "out/secret.rs".into(),
        "dir".into(),
        ws.clone(),
    ]);
    let names = Names {
        files: ["a.rs", "b.py", "dir/c.rs", "new.rs", "dir/new/deep.rs"]
            .iter()
            .map(|f| sb.ws.join(f).to_string_lossy().to_string())
            .collect(),
        odd,
    };
    // Everything outside the workspace the calls aim at: the folder the links lead to, the file
    // beside the workspace.
    let outside_now = || {
        let mut all = snapshot(&outside);
        let beside = sb.root().join("beside.rs");
        all.insert("beside".into(), fs::read(beside).unwrap());
        all
    };
    let before = outside_now();

    let mut s = Served::start(&sb, &["--no-lsp", "--on-diff", "reject"]);
    let mut c = s.client();
    let mut other = s.client();
    let mut r = Rng(seed);
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..calls {
        let (method, mut params) = template(&mut r, &names);
        if r.chance(60) {
            for _ in 0..=r.below(3) {
                // A tool's arguments mostly: a changed name is just an unknown tool.
                match params.get_mut("arguments") {
                    Some(args @ Value::Object(_)) if r.chance(90) => {
                        mutate_line(&mut r, args, &names)
                    }
                    _ => mutate_line(&mut r, &mut params, &names),
                }
            }
        }
        let what = format!("seed {seed}, call {i}: {method} {params}");
        let name = match (method.as_str(), params["name"].as_str()) {
            // A tool's name, not an odd string put in its place (the tally's key).
            ("tools/call", Some(tool))
                if tool.len() < 30 && tool.chars().all(|c| c.is_ascii_alphabetic() || c == '_') =>
            {
                tool.to_string()
            }
            ("tools/call", _) => "tools/call, no tool's name".to_string(),
            _ => method.clone(),
        };
        let id = c.send_request(&method, params);
        let answer = c
            .recv_until(WAIT, |v| v["id"].is_u64())
            .unwrap_or_else(|| panic!("{what}: no answer ({})", c.why()));
        assert_eq!(answer["id"], json!(id), "{what}: answered out of turn");
        let kind = match (&answer["result"], &answer["error"]) {
            (Value::Null, Value::Object(e)) => {
                assert!(
                    e["code"].is_i64() && e["message"].is_string(),
                    "{what}: {answer}"
                );
                "error"
            }
            (result, Value::Null) if !result.is_null() => {
                if result["isError"] == json!(true) {
                    "tool error"
                } else {
                    "result"
                }
            }
            _ => panic!("{what}: neither a result nor an error: {answer}"),
        };
        assert!(
            !answer.to_string().contains(SECRET),
            "{what}: a file outside the workspace was read: {answer}"
        );
        *tally.entry(format!("{name}: {kind}")).or_default() += 1;
    }
    // Nothing answered twice: no answer is left over.
    assert!(
        c.recv_until(Duration::from_millis(300), |v| v.get("id").is_some())
            .is_none(),
        "seed {seed}: an answer came twice"
    );
    assert_eq!(
        before,
        outside_now(),
        "seed {seed}: something outside the workspace changed"
    );
    let folders = json_of(&call(&mut other, "getWorkspaceFolders", json!({})));
    assert_eq!(folders["success"], true, "{folders}");
    assert_eq!(s.stop(), 0, "stderr:\n{}", s.stderr.text());
    assert!(
        !s.stderr.text().contains("panicked"),
        "seed {seed}:\n{}",
        s.stderr.text()
    );
    eprintln!("seed {seed}: {tally:?}");
}

/// The storm's first find: `openFile` with the largest `startLine` JSON can carry made the line
/// said on the terminal overflow (a panic in a debug build, line 0 in a release one).
#[test]
fn the_largest_start_line_is_said_as_it_is() {
    let sb = Sandbox::new();
    let file = sb.ws.join("a.rs");
    fs::write(&file, "fn main() {}\n").unwrap();
    let mut s = Served::start(&sb, &["--no-lsp"]);
    let mut c = s.client();
    let answer = call(
        &mut c,
        "openFile",
        json!({"filePath": file, "startLine": u64::MAX, "makeFrontmost": false}),
    );
    assert_eq!(json_of(&answer)["lineCount"], 1, "{answer}");
    s.stderr.wait_for(&format!("at line {}", u64::MAX));
    assert_eq!(s.stop(), 0);
    assert!(!s.stderr.text().contains("panicked"), "{}", s.stderr.text());
}
