//! `serve --stdio --path-map EDITOR=HERE`: the editor names the workspace one way, the bridge (and
//! claude) another, and every path of the line protocol is translated between the two, through
//! the real program. docs/stdio.md, "Path mapping".

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::{json, Value};

/// The `error` lines so far.
fn errors(s: &Served) -> Vec<String> {
    (s.stdout.all().iter())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "error")
        .map(|v| v["message"].as_str().unwrap().to_string())
        .collect()
}

/// Sends `line`, which the bridge must refuse with an `error` line containing each of `says`.
fn refused(s: &mut Served, line: Value, says: &[&str]) {
    let before = errors(s).len();
    s.send_line(&line.to_string());
    let e = next_msg(s, "error", before)["message"]
        .as_str()
        .unwrap()
        .to_string();
    for want in says {
        assert!(e.contains(want), "{line}: {e} (wanted {want:?})");
    }
}

fn lossy(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A Windows editor (`C:\Users\me\app`) and the bridge on the workspace: selections, mentions,
/// diagnostics and tabs from the editor reach claude under the bridge's paths, whatever form the
/// editor wrote them in; the calls claude makes reach the editor under its own; a path under no
/// mapping, `..` leaving the folder included, is refused with an `error` line naming it (and a
/// call claude makes about one is refused with a tool error, never sent).
#[test]
fn a_windows_editor_and_the_bridge_name_the_same_files() {
    let sb = Sandbox::new();
    let ws = lossy(&sb.ws);
    fs::create_dir_all(sb.ws.join("a b")).unwrap();
    fs::write(sb.ws.join("a b/é.rs"), "old\n").unwrap();
    fs::write(sb.root().join("secret.txt"), "no\n").unwrap();
    let map = format!(r"C:\Users\me\app={ws}");
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp", "--path-map", &map]);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let here = format!("{ws}/a b/é.rs");
    let here_uri = claude_ide_bridge::file_uri(&here);
    let range = json!({"start":{"line":0,"character":0},"end":{"line":0,"character":3}});

    // Editor → bridge: a path in any of the editor's forms becomes the bridge's.
    s.send_line(
        &json!({"type":"selection_changed","filePath":r"c:\Users\me\app\src\..\a b\é.rs",
            "text":"old","selection":range})
        .to_string(),
    );
    let n = c
        .recv_until(WAIT, |v| v["method"] == "selection_changed")
        .unwrap();
    assert_eq!(n["params"]["filePath"], json!(here));
    assert_eq!(n["params"]["fileUrl"], json!(here_uri));
    assert_eq!(
        json_of(&call(&mut c, "getCurrentSelection", json!({})))["filePath"],
        json!(here)
    );
    s.send_line(
        &json!({"type":"at_mentioned","filePath":"file:///c%3A/Users/me/app/a%20b/%C3%A9.rs",
            "lineStart":0,"lineEnd":0})
        .to_string(),
    );
    let n = c
        .recv_until(WAIT, |v| v["method"] == "at_mentioned")
        .unwrap();
    assert_eq!(n["params"]["filePath"], json!(here));
    s.send_line(
        &json!({"type":"diagnostics","uri":"file:///C:/Users/me/app/a%20b/%C3%A9.rs",
            "diagnostics":[{"message":"boom","severity":"Error","range":range}]})
        .to_string(),
    );
    let n = c
        .recv_until(WAIT, |v| v["method"] == "diagnostics_changed")
        .unwrap();
    assert_eq!(n["params"]["uri"], json!(here_uri));
    let v = json_of(&call(&mut c, "getDiagnostics", json!({"uri": here_uri})));
    assert_eq!(v[0]["diagnostics"][0]["message"], "boom", "{v}");

    // Tabs: a file under the mapping is renamed (its `fileName` too, as the Vim plugin and VS
    // Code send it), one outside is left out and named, as is one
    // whose URI names no path (not UTF-8 once decoded: it was passed on as the editor wrote it),
    // and a tab that is not a file is kept as it is.
    let before = errors(&s).len();
    s.send_line(
        &json!({"type":"open_editors","tabs":[
            {"uri":"file:///C:/Users/me/app/a%20b/%C3%A9.rs","isDirty":true,"label":"é.rs",
             "fileName":"C:\\Users\\me\\app\\a b\\é.rs"},
            {"uri":"file:///D:/elsewhere/x.rs"},
            {"uri":"file:///C:/Users/me/other/%FF.rs"},
            {"uri":"untitled:Untitled-1"},
            // A path in the URI's place is a file too: mapped, or left out.
            {"uri":"C:\\Users\\me\\app\\a b\\é.rs","isDirty":false},
            {"uri":"D:\\private\\taxes.xlsx"},
            // Not a file, but its `fileName` is a path of the editor's: mapped, or dropped.
            {"uri":"untitled:Untitled-2","fileName":"C:\\Users\\me\\Desktop\\draft.txt"},
            {"uri":"untitled:Untitled-3","fileName":"C:\\Users\\me\\app\\draft.txt"}]})
        .to_string(),
    );
    let e = next_msg(&s, "error", before)["message"].clone();
    assert!(
        e.as_str().unwrap().contains("3 tab(s) left out")
            && e.as_str().unwrap().contains("file:///D:/elsewhere/x.rs"),
        "{e}"
    );
    let tabs = json_of(&call(&mut c, "getOpenEditors", json!({})))["tabs"].clone();
    assert_eq!(
        tabs,
        json!([{"uri": here_uri, "isDirty": true, "label": "é.rs", "fileName": here},
            {"uri": "untitled:Untitled-1"},
            {"uri": here, "isDirty": false},
            {"uri": "untitled:Untitled-2"},
            {"uri": "untitled:Untitled-3", "fileName": format!("{ws}/draft.txt")}])
    );
    assert_eq!(
        json_of(&call(
            &mut c,
            "checkDocumentDirty",
            json!({"filePath": here})
        ))["isDirty"],
        true
    );

    // Refused, naming the path: outside every mapping, `..` climbing out of the folder, relative.
    let sel = |p: &str| json!({"type":"selection_changed","filePath":p,"selection":range});
    refused(
        &mut s,
        sel(r"C:\Users\me\other\x.rs"),
        &[
            "selection_changed",
            r#""C:\\Users\\me\\other\\x.rs""#,
            "outside",
        ],
    );
    refused(
        &mut s,
        sel(r"C:\Users\me\app\..\secret.txt"),
        &["outside", "secret.txt"],
    );
    refused(&mut s, sel(r"C:\..\..\x"), &["climbs above the root"]);
    refused(&mut s, sel("a b/é.rs"), &["not an absolute path"]);
    refused(
        &mut s,
        json!({"type":"diagnostics","uri":"file://server/share/x.rs","diagnostics":[]}),
        &["diagnostics: uri", "file://server/share/x.rs"],
    );
    // None of them reached claude: its selection is still the first.
    assert_eq!(
        json_of(&call(&mut c, "getLatestSelection", json!({})))["filePath"],
        json!(here)
    );

    // Bridge → editor: claude's paths reach the editor under its names, a relative one taken
    // from the workspace.
    let id = c.call_tool("openFile", json!({"filePath": here, "startLine": 1}));
    let tc = next_msg(&s, "tool_call", 0);
    assert_eq!(tc["arguments"]["filePath"], r"C:\Users\me\app\a b\é.rs");
    s.send_line(&json!({"type":"respond","id":tc["id"],"text":"opened"}).to_string());
    assert_eq!(texts(&c.response(id)), ["opened"]);
    let id = c.call_tool("open_files", json!({"file_paths": [here, "a b/é.rs"]}));
    let tc = next_msg(&s, "tool_call", 1);
    assert_eq!(
        tc["arguments"]["file_paths"],
        json!([r"C:\Users\me\app\a b\é.rs", r"C:\Users\me\app\a b\é.rs"])
    );
    s.send_line(&json!({"type":"respond","id":tc["id"],"text":"ok"}).to_string());
    c.response(id);
    // A file:// URI by its path; an empty path and `~` (the workspace folder itself, a folder
    // named `~` there) are refused.
    let uri = format!("file://{}", here.replace(' ', "%20").replace('é', "%C3%A9"));
    let id = c.call_tool("openFile", json!({"filePath": uri}));
    let tc = next_msg(&s, "tool_call", 2);
    assert_eq!(tc["arguments"]["filePath"], r"C:\Users\me\app\a b\é.rs");
    s.send_line(&json!({"type":"respond","id":tc["id"],"text":"opened"}).to_string());
    c.response(id);
    for path in ["", "~/a b/é.rs"] {
        let r = call(&mut c, "saveDocument", json!({"filePath": path}));
        assert!(is_error(&r), "{r}");
        let says = format!("{} is not an absolute path", json!(path));
        assert!(texts(&r)[0].contains(&says), "{r}");
    }
    let outside = lossy(&sb.root().join("secret.txt"));
    let r = call(&mut c, "openFile", json!({"filePath": outside}));
    assert!(is_error(&r), "{r}");
    assert!(texts(&r)[0].contains(&outside), "{r}");
    let r = call(&mut c, "saveDocument", json!({"filePath": "/etc/hostname"}));
    assert!(
        is_error(&r) && texts(&r)[0].contains("/etc/hostname"),
        "{r}"
    );

    // openDiff: the editor sees its names; the decision is about the bridge's file.
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&sb.ws.join("a b/é.rs"), "new\n", "T"),
    );
    let tc = next_msg(&s, "tool_call", 3);
    assert_eq!(tc["name"], "openDiff");
    assert_eq!(
        tc["arguments"]["new_file_path"],
        r"C:\Users\me\app\a b\é.rs"
    );
    assert_eq!(
        tc["arguments"]["old_file_path"],
        r"C:\Users\me\app\a b\é.rs"
    );
    s.send_line(r#"{"type":"status"}"#);
    let st = next_msg(&s, "status", 0);
    assert_eq!(st["workspace"], json!([r"C:\Users\me\app"]));
    assert_eq!(st["pending"][0]["filePath"], r"C:\Users\me\app\a b\é.rs");
    s.send_line(
        &json!({"type":"diff_decision","id":tc["id"],"decision":"accept","contents":"edited\n"})
            .to_string(),
    );
    assert_eq!(texts(&c.response(id)), ["FILE_SAVED", "edited\n"]);
    // Nothing else was sent to the editor: the refused calls never reached it.
    assert_eq!(
        (s.stdout.all().iter())
            .filter(|l| l.contains("\"tool_call\""))
            .count(),
        4
    );
}

/// A POSIX editor at another path, and the bridge serving the workspace through a second name (a
/// symbolic link, with spaces): the paths the bridge checked come with links resolved, and both
/// names of its folder map to the editor's.
#[test]
fn an_editor_at_another_path_of_the_same_folder() {
    let sb = Sandbox::new();
    let link = sb.root().join("link to ws");
    std::os::unix::fs::symlink(&sb.ws, &link).unwrap();
    fs::write(sb.ws.join("a.rs"), "old\n").unwrap();
    let map = format!("/Users/me/wörk={}", lossy(&link));
    let args = ["--stdio", "--no-lsp", "--path-map", &map];
    let mut s = Served::start(&sb, &[&args[..], &["--workspace", &lossy(&link)]].concat());
    let mut c = s.client();
    next_msg(&s, "initialized", 0);

    // The editor's name becomes the name given for the bridge's folder.
    let range = json!({"start":{"line":0,"character":0},"end":{"line":0,"character":0}});
    s.send_line(
        &json!({"type":"selection_changed","filePath":"/Users/me/wörk/./a.rs","selection":range})
            .to_string(),
    );
    let n = c
        .recv_until(WAIT, |v| v["method"] == "selection_changed")
        .unwrap();
    assert_eq!(n["params"]["filePath"], json!(lossy(&link.join("a.rs"))));

    // openDiff's paths are checked with links resolved (the workspace's real folder): still
    // the editor's folder.
    let id = c.call_tool("openDiff", open_diff_args(&link.join("a.rs"), "x\n", "T"));
    let tc = next_msg(&s, "tool_call", 0);
    assert_eq!(tc["arguments"]["new_file_path"], "/Users/me/wörk/a.rs");
    s.send_line(&json!({"type":"diff_decision","id":tc["id"],"decision":"reject"}).to_string());
    assert_eq!(texts(&c.response(id))[0], "DIFF_REJECTED");
    s.send_line(r#"{"type":"status"}"#);
    assert_eq!(
        next_msg(&s, "status", 0)["workspace"],
        json!(["/Users/me/wörk"])
    );
    // The editor's folder is not the bridge's: its own name for a file is under no mapping.
    refused(
        &mut s,
        json!({"type":"at_mentioned","filePath": lossy(&sb.ws.join("a.rs"))}),
        &["outside"],
    );
}

/// A workspace served through a link (`app-link` -> `data/app`) with a mapping of the real
/// folder's parent only: an `openDiff` reaches the editor by the real path, and the editor's paths
/// reach claude under the workspace's name. Before, every `openDiff` was refused as outside every
/// mapping (the paths the bridge checks come under the workspace's name).
#[test]
fn a_workspace_named_through_a_link_is_mapped_by_its_real_folder() {
    let sb = Sandbox::new();
    let real = sb.root().join("data").join("app");
    fs::create_dir_all(&real).unwrap();
    fs::write(real.join("a.rs"), "old\n").unwrap();
    let link = sb.root().join("app-link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let map = format!("/Users/me/data={}", lossy(&sb.root().join("data")));
    let ws = lossy(&link);
    let args = [
        "--stdio",
        "--no-lsp",
        "--path-map",
        &map,
        "--workspace",
        &ws,
    ];
    let mut s = Served::start(&sb, &args);
    let mut c = s.client();
    next_msg(&s, "initialized", 0);
    let id = c.call_tool("openDiff", open_diff_args(&link.join("a.rs"), "x\n", "T"));
    let tc = next_msg(&s, "tool_call", 0);
    assert_eq!(tc["arguments"]["new_file_path"], "/Users/me/data/app/a.rs");
    s.send_line(&json!({"type":"diff_decision","id":tc["id"],"decision":"reject"}).to_string());
    assert_eq!(texts(&c.response(id))[0], "DIFF_REJECTED");
    let range = json!({"start":{"line":0,"character":0},"end":{"line":0,"character":0}});
    s.send_line(
        &json!({"type":"selection_changed","filePath":"/Users/me/data/app/a.rs","selection":range})
            .to_string(),
    );
    let n = c
        .recv_until(WAIT, |v| v["method"] == "selection_changed")
        .unwrap();
    assert_eq!(n["params"]["filePath"], json!(lossy(&link.join("a.rs"))));
}

/// A mapping whose bridge folder neither holds the workspace nor lies in it is refused at start
/// (exit 2), as is a malformed one, and `--path-map` without `--stdio`.
#[test]
fn a_mapping_outside_the_workspace_is_refused_at_start() {
    let sb = Sandbox::new();
    fs::write(sb.ws.join("file.txt"), "").unwrap();
    let elsewhere = sb.root().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    for (args, says) in [
        (
            vec![
                "--stdio".to_string(),
                "--path-map".into(),
                format!("/e={}", lossy(&elsewhere)),
            ],
            "neither holds a workspace folder nor lies in one",
        ),
        (
            vec!["--stdio".into(), "--path-map".into(), "wsl".into()],
            "--path-map wsl maps /mnt/<drive> only",
        ),
        (
            vec!["--stdio".into(), "--path-map".into(), "nothing".into()],
            "expected EDITOR=HERE",
        ),
        (
            vec!["--stdio".into(), "--path-map".into(), "/e=relative".into()],
            "not an absolute path",
        ),
        (
            vec!["--path-map".into(), format!("/e={}", lossy(&sb.ws))],
            "--stdio",
        ),
        // A folder inside the workspace that is not there, or a file.
        (
            vec![
                "--stdio".into(),
                "--path-map".into(),
                format!("/e={}/typo", lossy(&sb.ws)),
            ],
            "typo: No such file or directory",
        ),
        (
            vec![
                "--stdio".into(),
                "--path-map".into(),
                format!("/e={}/file.txt", lossy(&sb.ws)),
            ],
            "file.txt is not a folder",
        ),
        (
            vec![
                "--stdio".into(),
                "--path-map".into(),
                format!("C:={}", lossy(&sb.ws)),
            ],
            "\"C:\" is not an absolute path",
        ),
    ] {
        let out = sb
            .command()
            .arg("serve")
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // The folder above the workspace holds it: accepted.
    let map = format!("/e={}", lossy(&sb.root()));
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp", "--path-map", &map]);
    s.send_line(r#"{"type":"status"}"#);
    assert_eq!(next_msg(&s, "status", 0)["workspace"], json!(["/e/ws"]));
    drop(s);
    // A folder inside the workspace: accepted too (its files map; the workspace folder itself
    // does not, and `status` names none).
    let inner = sb.ws.join("app");
    fs::create_dir(&inner).unwrap();
    let map = format!(r"C:\src\app={}", lossy(&inner));
    let mut s = Served::start(&sb, &["--stdio", "--no-lsp", "--path-map", &map]);
    s.send_line(r#"{"type":"status"}"#);
    assert_eq!(next_msg(&s, "status", 0)["workspace"], json!([]));
}
