//! The Vim plugin (editors/vim) in the real Vim, in tmux, loaded as a package from a temporary
//! HOME, against the test WebSocket client playing claude: the lock file, selection tracking,
//! `:ClaudeCodeSend`, open editors, `saveDocument`, diffs (`:w` with the user's edits, `:q`,
//! `close_tab`, `closeAllDiffTabs`, a disconnect, a dirty buffer, a new file, the tab layout),
//! `openFile`, the terminal launcher, ALE's diagnostics (Debian's vim-ale), vim-lsp's (a stand-in of its
//! state: vim-lsp is in no registry), the bridge gone with its lock file when Vim quits, and what
//! Vim users run into (swap files, files changed on disk, CRLF, a workspace named like a pattern,
//! a call withdrawn while the user types a command, saves asked again after a conflict, a save
//! after the user kept a file Vim found changed, what claude writes after a diff, a diff window
//! that shows another buffer, two diffs pending at once), and what users type at diffs and
//! commands (`:e!`, `ZZ`, `:x`, `:xa` and `:qa!` with diffs pending, `:xa` with claude running in
//! the terminal, `:saveas` in a proposal, `:ClaudeCodeStop | ClaudeCodeStart`, a bridge killed
//! under a running claude, names `:ClaudeCodeAdd` takes as they are, 'selection' exclusive, calls
//! arriving in Visual, operator-pending and the command-line window, a Vim whose 'encoding' is
//! not utf-8).

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::vim::*;
use common::*;
use serde_json::{json, Value};

#[test]
fn vim_plugin_with_a_scripted_claude() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    let b = sb.ws.join("b.txt");
    fs::write(&a, "one\ntwo three\nfour\n").unwrap();
    fs::write(&b, "bee\n").unwrap();
    let mut vim = Vim::start(&sb, &a, "");
    let a_s = a.to_string_lossy().to_string();
    let b_s = b.to_string_lossy().to_string();

    // :ClaudeCodeStart: the lock file appears, for Vim and this workspace.
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let lockv: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(lockv["ideName"], "Vim");
    assert_eq!(lockv["workspaceFolders"], json!([sb.ws.to_string_lossy()]));
    let mut c = connect(&lock);

    // The cursor: an empty selection at its 0-based position.
    vim.keys(&["Escape", "j", "w"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["selection"]["start"] == json!({"line": 1, "character": 4})
    });
    assert_eq!(sel["filePath"], json!(a_s));
    assert_eq!(sel["text"], "");
    assert_eq!(sel["selection"], range(1, 4, 1, 4));
    // A characterwise selection: "three", the end exclusive.
    vim.keys(&["v", "e"]);
    let sel = notification(&mut c, "selection_changed", |p| p["text"] != "");
    assert_eq!(sel["text"], "three");
    assert_eq!(sel["selection"], range(1, 4, 1, 9));
    assert_eq!(sel["filePath"], json!(a_s));
    // Linewise, then :'<,'>ClaudeCodeSend.
    vim.keys(&["Escape", "g", "g", "V", "j"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["text"].as_str().is_some_and(|t| t.contains('\n'))
    });
    assert_eq!(sel["text"], "one\ntwo three");
    assert_eq!(sel["selection"], range(0, 0, 1, 9));
    vim.text(":ClaudeCodeSend");
    vim.keys(&["Enter"]);
    let m = notification(&mut c, "at_mentioned", |_| true);
    assert_eq!(m["filePath"], json!(a_s));
    assert_eq!(
        (m["lineStart"].clone(), m["lineEnd"].clone()),
        (json!(0), json!(1))
    );
    // :ClaudeCodeAdd with a 1-based range.
    vim.ex("ClaudeCodeAdd b.txt 1 1");
    let m = notification(&mut c, "at_mentioned", |p| p["filePath"] == json!(b_s));
    assert_eq!(
        (m["lineStart"].clone(), m["lineEnd"].clone()),
        (json!(0), json!(0))
    );
    // None of this printed anything.
    let messages = vim.eval("execute('messages')");
    assert!(
        !messages.as_str().unwrap().contains("claude-ide-bridge"),
        "{messages}"
    );
    // getCurrentSelection is what Vim reported last.
    let cur = json_of(&call(&mut c, "getCurrentSelection", json!({})));
    assert_eq!(cur["filePath"], json!(a_s));

    // Open editors: both buffers, b.txt active and dirty; saveDocument writes it.
    vim.ex("edit b.txt");
    vim.keys(&["i", "x", "Escape"]);
    let editors = call_until(&mut c, "getOpenEditors", json!({}), |v| {
        v["tabs"].as_array().is_some_and(|t| {
            t.len() == 2
                && t.iter()
                    .any(|t| t["label"] == "b.txt" && t["isDirty"] == true)
        })
    });
    let tabs = editors["tabs"].as_array().unwrap();
    let tab_a = tabs.iter().find(|t| t["label"] == "a.txt").unwrap();
    let tab_b = tabs.iter().find(|t| t["label"] == "b.txt").unwrap();
    assert_eq!(tab_a["uri"], json!(format!("file://{a_s}")));
    assert_eq!(
        (&tab_a["isActive"], &tab_a["isDirty"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(tab_b["isActive"], true);
    assert_eq!(tab_b["languageId"], "plaintext");
    assert_eq!(tab_b["lineCount"], 1);
    let dirty = json_of(&call(
        &mut c,
        "checkDocumentDirty",
        json!({"filePath": b_s}),
    ));
    assert_eq!(dirty["isDirty"], true);
    let saved = json_of(&call(&mut c, "saveDocument", json!({"filePath": b_s})));
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(fs::read_to_string(&b).unwrap(), "xbee\n");
    let dirty = json_of(&call(
        &mut c,
        "checkDocumentDirty",
        json!({"filePath": b_s}),
    ));
    assert_eq!(dirty["isDirty"], false);

    // openDiff: shown beside the file, the focus stays where it was; the user edits the
    // proposal and :w accepts the edited text.
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&a, "one\nTWO\nthree\n", "tab one"),
    );
    let before = vim.eval("win_getid()");
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    assert_eq!(proposal_count(&mut vim), 1);
    assert_eq!(vim.eval("win_getid()"), before, "the focus moved");
    assert_eq!(
        vim.eval("getwinvar(bufwinnr(bufnr('a.txt')), '&diff')"),
        1,
        "a.txt is not in diff mode"
    );
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("%s/three/THREE/");
    vim.ex("w");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer");
    assert_eq!(texts(&r), ["FILE_SAVED", "one\nTWO\nTHREE\n"]);
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude'}))",
        |v| v == 0,
    );
    assert_eq!(vim.eval("&diff"), 0);
    // claude writes the file itself: the buffer shows it.
    fs::write(&a, "one\nTWO\nTHREE\n").unwrap();
    vim.wait_eval("getbufline(bufnr('a.txt'), 1, '$')", |v| {
        v == &json!(["one", "TWO", "THREE"])
    });

    // :q in the proposal rejects.
    let id = c.call_tool("openDiff", open_diff_args(&a, "nope\n", "tab two"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("q");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["DIFF_REJECTED", "tab two"]);
    assert_eq!(fs::read_to_string(&a).unwrap(), "one\nTWO\nTHREE\n");

    // close_tab from claude closes the windows; the user's edit of the proposal, not sent, is
    // kept in a buffer of its own, said so (it was wiped, with no undo).
    let id = c.call_tool("openDiff", open_diff_args(&a, "closed\n", "tab three"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("s/closed/my own words/");
    let close = c.call_tool("close_tab", json!({"tab_name": "tab three"}));
    let got = responses(&mut c, &[id, close]);
    assert_eq!(texts(&got[&close]), ["TAB_CLOSED"]);
    assert_eq!(texts(&got[&id])[0], "DIFF_REJECTED");
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude'}))",
        |v| v == 0,
    );
    assert_eq!(kept_edit_lines(&mut vim), json!(["my own words"]));
    assert_eq!(vim.eval(&format!("buflisted({KEPT_EDIT})")), 1);
    assert!(
        vim.eval("execute('messages')")
            .as_str()
            .unwrap()
            .contains("claude withdrew its change to"),
        "{}",
        vim.eval("execute('messages')")
    );
    vim.ex(&format!("execute 'bwipeout! ' .. {KEPT_EDIT}"));

    // closeAllDiffTabs too.
    let id = c.call_tool("openDiff", open_diff_args(&a, "all\n", "tab all"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let all = c.call_tool("closeAllDiffTabs", json!({}));
    let got = responses(&mut c, &[id, all]);
    assert_eq!(texts(&got[&id])[0], "DIFF_REJECTED");
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude'}))",
        |v| v == 0,
    );

    // A buffer with unsaved changes is not diffed.
    vim.ex("buffer a.txt");
    vim.keys(&["O", "mine", "Escape"]);
    // Out of Insert mode first (which holds the call: under load past the client's 5 s).
    vim.wait_eval("&modified", |v| v == 1);
    let r = call(
        &mut c,
        "openDiff",
        open_diff_args(&a, "theirs\n", "tab four"),
    );
    assert!(is_error(&r), "{r}");
    assert!(texts(&r)[0].contains("unsaved changes"), "{r}");
    assert_eq!(proposal_count(&mut vim), 0);
    vim.ex("edit!");
    // The same through a symbolic link (CLAUDE.md -> AGENTS.md): the bridge names the real
    // file, the buffer has the link's name, and it is the same buffer.
    fs::write(sb.ws.join("real.txt"), "real\n").unwrap();
    std::os::unix::fs::symlink("real.txt", sb.ws.join("link.txt")).unwrap();
    vim.ex("edit link.txt");
    vim.keys(&["O", "mine", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    let r = call(
        &mut c,
        "openDiff",
        open_diff_args(&sb.ws.join("link.txt"), "theirs\n", "tab linked"),
    );
    assert!(is_error(&r), "{r}");
    assert!(texts(&r)[0].contains("unsaved changes"), "{r}");
    assert_eq!(proposal_count(&mut vim), 0);
    vim.ex("edit!");
    vim.ex("buffer a.txt");

    // A new file: against an empty buffer; :ClaudeCodeDiffAccept accepts it as proposed.
    let new = sb.ws.join("new.txt");
    let id = c.call_tool("openDiff", open_diff_args(&new, "fresh\n", "tab five"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.wait_eval("getbufline(bufnr('(new file'), 1, '$')", |v| {
        v == &json!([""])
    });
    vim.ex("ClaudeCodeDiffAccept");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "fresh\n"]);
    assert!(!new.exists(), "Vim must leave the writing to claude");
    vim.wait_eval("bufnr('(new file')", |v| v == -1);
    // Accepted unedited, it is claude's text byte for byte: a NUL character too, which Vim's
    // copy of the proposal (json_decode) loses.
    let id = c.call_tool("openDiff", open_diff_args(&new, "a\u{0}b\n", "tab nul"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("ClaudeCodeDiffAccept");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "a\u{0}b\n"]);
    vim.wait_eval("bufnr('(new file')", |v| v == -1);

    // openFile selects startText..endText.
    let r = call(
        &mut c,
        "openFile",
        json!({"filePath": b_s, "startText": "bee", "endText": "bee"}),
    );
    assert_eq!(texts(&r), [format!("Opened file: {b_s}")]);
    assert_eq!(vim.eval("expand('%:t')"), "b.txt");
    assert_eq!(
        vim.eval("[line(\"'<\"), col(\"'<\"), line(\"'>\"), col(\"'>\")]"),
        json!([1, 2, 1, 4])
    );
    // By lines (0-based).
    let r = call(
        &mut c,
        "openFile",
        json!({"filePath": a_s, "startLine": 1, "endLine": 2}),
    );
    assert_eq!(texts(&r), [format!("Opened file: {a_s}")]);
    assert_eq!(
        vim.eval("[expand('%:t'), line(\"'<\"), line(\"'>\")]"),
        json!(["a.txt", 2, 3])
    );
    // In the background: the answer describes the file; the window still shows a.txt.
    let before = vim.eval("[win_getid(), expand('%:t')]");
    let v = json_of(&call(
        &mut c,
        "openFile",
        json!({"filePath": b_s, "makeFrontmost": false}),
    ));
    assert_eq!(
        (&v["success"], &v["lineCount"], &v["filePath"]),
        (&json!(true), &json!(1), &json!(b_s))
    );
    assert_eq!(vim.eval("[win_getid(), expand('%:t')]"), before);
    assert_eq!(vim.eval("bufloaded('b.txt')"), 1);
    // open_files opens what exists.
    let missing = sb.ws.join("missing.txt").to_string_lossy().to_string();
    let v = json_of(&call(
        &mut c,
        "open_files",
        json!({"file_paths": [a_s, missing]}),
    ));
    assert_eq!(v["opened_files"], json!([a_s]));

    // UTF-16 code units, not bytes or characters: a selection after multibyte text. Before "w":
    // 10 bytes, 6 code points, 5 characters as Vim counts them (e with its composing accent is
    // one), 7 UTF-16 units (the emoji is two).
    let u = sb.ws.join("u.txt");
    fs::write(&u, "\u{1f600} e\u{301}t w\u{f6}rld\n").unwrap();
    vim.ex("edit u.txt");
    vim.ex("call cursor(1, stridx(getline(1), 'w') + 1)");
    vim.keys(&["v", "e"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["filePath"] == json!(u.to_string_lossy()) && p["text"] != ""
    });
    assert_eq!(sel["text"], "w\u{f6}rld");
    assert_eq!(sel["selection"], range(0, 7, 0, 12));
    vim.keys(&["Escape"]);
    // Linewise: the end is the line's length in UTF-16 units.
    vim.keys(&["V"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["filePath"] == json!(u.to_string_lossy())
            && p["selection"]["start"]["character"] == 0
            && p["text"] != ""
    });
    assert_eq!(sel["selection"], range(0, 0, 0, 12));
    vim.keys(&["Escape"]);

    // :ClaudeCodeStatus tells the port, the lock file and the client.
    vim.ex("ClaudeCodeStatus");
    let give_up = Instant::now() + WAIT;
    while !vim.screen().contains("connected clients: 1") {
        assert!(Instant::now() < give_up, "status: {}", vim.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(vim.screen().contains(&lock.to_string_lossy().to_string()));
    // ... as the bridge answered it (a `status` line).
    let log = fs::read_to_string(&vim.log).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("<- ") && l.contains(r#""type":"status""#)),
        "{log}"
    );

    // :ClaudeCodeStop with a diff open: claude is told the editor did not answer (a tool error,
    // so that it asks in its own prompt, not a rejection), its windows closed, the lock file gone.
    let id = c.call_tool("openDiff", open_diff_args(&a, "stop\n", "tab stop"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("ClaudeCodeStop");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert!(is_error(&r), "{r}");
    assert!(texts(&r)[0].contains("the editor did not answer"), "{r}");
    assert!(c.closed_within(WAIT), "the bridge kept the connection");
    gone(&lock);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    // Started again: a new lock file; Vim quits: the bridge stops and removes it.
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let mut c = connect(&lock);
    vim.ex("qa!");
    assert!(c.closed_within(WAIT), "the bridge kept the connection");
    gone(&lock);
}

/// The file changes on disk while its diff is open, and the user accepts an edit of the
/// proposal: claude applies its change to the file as it is now, and fails when it no longer
/// holds the text it replaced ("String not found in file"). The user's edit, whose proposal was
/// wiped as it was sent, is kept in a buffer of its own, and said.
#[test]
fn vim_keeps_an_edited_accept_of_a_file_changed_meanwhile() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\ntwo\n").unwrap();
    let mut vim = Vim::start(&sb, &a, "");
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let mut c = connect(&lock);
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&a, "one\nCLAUDE\n", "tab changed"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    fs::write(&a, "one\nsomeone else\n").unwrap();
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("$put ='my words'");
    vim.ex("w");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer");
    assert_eq!(texts(&r), ["FILE_SAVED", "one\nCLAUDE\nmy words\n"]);
    assert_eq!(
        kept_edit_lines(&mut vim),
        json!(["one", "CLAUDE", "my words"])
    );
    let m = vim.eval("execute('messages')");
    assert!(
        m.as_str()
            .unwrap()
            .contains("changed on disk since claude proposed"),
        "{m}"
    );
}

#[test]
fn vim_claude_code_opens_the_terminal() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    // The terminal runs a stand-in for claude that shows what it was given.
    let fake = fake_claude(
        &sb,
        "echo \"PORT=$CLAUDE_CODE_SSE_PORT IDE=$ENABLE_IDE_INTEGRATION/$CLAUDE_CODE_AUTO_CONNECT_IDE \
         HOST=[${CLAUDE_CODE_IDE_HOST_OVERRIDE-unset}] ARGS=$*\"",
    );
    // An override in Vim's environment, meant for another IDE, is emptied (claude takes an empty
    // one as none): the bridge listens on claude's own 127.0.0.1.
    let mut vim = Vim::start(
        &sb,
        &a,
        &format!(
            "let g:claude_ide_bridge_terminal_cmd = '{}'\nlet g:claude_ide_bridge_split_side = 'left'\n\
             let g:claude_ide_bridge_diff_layout = 'tab'\nlet $CLAUDE_CODE_IDE_HOST_OVERRIDE = '192.0.2.9'",
            fake.display()
        ),
    );
    vim.ex("ClaudeCode --resume");
    let lock = wait_lock(&sb);
    let port = lock.file_stem().unwrap().to_string_lossy().to_string();
    let give_up = Instant::now() + WAIT;
    while !vim
        .screen()
        .contains(&format!("PORT={port} IDE=true/true HOST=[] ARGS=--resume"))
    {
        assert!(Instant::now() < give_up, "screen:\n{}", vim.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
    // On the left, focused, then hidden by a second :ClaudeCode, shown again by a third.
    vim.keys(&["C-w", "N"]);
    assert_eq!(vim.eval("[&buftype, winnr()]"), json!(["terminal", 1]));
    vim.ex("ClaudeCode");
    vim.wait_eval("winnr('$')", |v| v == 1);
    assert_eq!(vim.eval("&buftype"), "");
    vim.ex("ClaudeCode");
    vim.in_terminal = true;
    vim.wait_eval("[winnr('$'), &buftype]", |v| v == &json!([2, "terminal"]));
    // A diff (layout 'tab') opens while the focus is in claude's terminal: the focus stays there.
    let mut c = connect(&lock);
    let id = c.call_tool("openDiff", open_diff_args(&a, "two\n", "tab"));
    vim.wait_eval("tabpagenr('$')", |v| v == 2);
    assert_eq!(vim.eval("[tabpagenr(), &buftype]"), json!([1, "terminal"]));
    vim.term_ex("ClaudeCodeDiffDeny");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["DIFF_REJECTED", "tab"]);
    vim.wait_eval("tabpagenr('$')", |v| v == 1);
    // claude goes away while a diff is open: it closes.
    c.call_tool("openDiff", open_diff_args(&a, "three\n", "tab again"));
    vim.wait_eval("tabpagenr('$')", |v| v == 2);
    drop(c);
    vim.wait_eval("tabpagenr('$')", |v| v == 1);
    // :ClaudeCodeFocus in claude's window hides it; elsewhere it shows it and goes there.
    vim.term_ex("ClaudeCodeFocus");
    vim.in_terminal = false;
    vim.wait_eval("[winnr('$'), &buftype]", |v| v == &json!([1, ""]));
    vim.ex("ClaudeCodeFocus");
    vim.in_terminal = true;
    vim.wait_eval("[winnr('$'), &buftype]", |v| v == &json!([2, "terminal"]));
    vim.term_ex("wincmd p");
    vim.in_terminal = false;
    vim.wait_eval("&buftype", |v| v == "");
    vim.ex("ClaudeCodeFocus");
    vim.in_terminal = true;
    vim.wait_eval("[winnr('$'), &buftype]", |v| v == &json!([2, "terminal"]));
    // Vim quits with the terminal running: everything stops.
    vim.keys(&["C-w", "N"]);
    vim.ex("qa!");
    gone(&lock);
}

/// The bridge started with `--host ::1` (`g:claude_ide_bridge_args`), where claude does not
/// look by itself: the claude `:ClaudeCode` starts is told where it listens
/// (`CLAUDE_CODE_IDE_HOST_OVERRIDE`, from the `ready` line), and connects there.
#[test]
fn vim_claude_code_tells_claude_where_the_bridge_listens() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let fake = fake_claude(&sb, SAYS_HOST);
    let mut vim = Vim::start(
        &sb,
        &a,
        &format!(
            "let g:claude_ide_bridge_terminal_cmd = '{}'\nlet g:claude_ide_bridge_args = ['--host', '::1']",
            fake.display()
        ),
    );
    vim.ex("ClaudeCode");
    told_the_host(&mut vim, &wait_lock(&sb), "");
}

/// The diagnostic of the first file in a `getDiagnostics` answer whose `field` is `value`.
fn diagnostic_with(found: &Value, field: &str, value: &str) -> Value {
    found[0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d[field] == value)
        .unwrap_or_else(|| panic!("no diagnostic with {field} {value:?}: {found}"))
        .clone()
}

/// Where Debian's `vim-ale` package puts ALE (scripts/test-all.sh installs it).
const ALE: &str = "/usr/share/vim-ale";

#[test]
fn vim_reports_ale_diagnostics() {
    if tools_missing() {
        return;
    }
    if !Path::new(ALE).join("plugin/ale.vim").exists() {
        claude_ide_bridge_testsupport::skip::tool_missing(
            "ALE is not installed (apt-get install vim-ale; scripts/test-all.sh does)",
        );
        return;
    }
    let sb = Sandbox::new();
    let script = sb.ws.join("s.sh");
    // Line 2 carries an emoji before the "x" a second linter points at (byte column 8).
    fs::write(
        &script,
        "#!/bin/sh\n# \u{1f600} x\nif true; then\n  echo hi\n",
    )
    .unwrap();
    let uri = format!("file://{}", script.display());
    // A linter of our own through ALE's Unix format handler: it reports "x" while line 2 ends
    // with it.
    let marks = "call ale#linter#Define('sh', {'name': 'marks', 'executable': 'sh', \
        'command': 'grep -q \"x$\" %t && echo \"s.sh:2:8: x marks the spot\"', \
        'callback': 'ale#handlers#unix#HandleAsError'})";
    // And one whose items carry a code, one of them for another file (as a compiler's errors
    // in a header): only this file's reach claude, the code as it was given.
    let other = "function! OtherFile(buffer, lines) abort\n  if getbufline(a:buffer, 2)[0] !~# 'x$' | return [] | endif\n  \
        return [{'lnum': 3, 'col': 1, 'text': 'mine, with a code', 'code': 'W42', 'type': 'W'}, \
        {'lnum': 1, 'col': 1, 'text': 'in another file', 'filename': '/elsewhere/other.sh'}]\nendfunction\n\
        call ale#linter#Define('sh', {'name': 'other', 'executable': 'sh', 'command': 'true', 'callback': 'OtherFile'})";
    let vim = Vim::start(
        &sb,
        &script,
        &format!("filetype plugin on\nset runtimepath+={ALE}\n{marks}\n{other}\nlet g:ale_linters = {{'sh': ['shell', 'marks', 'other']}}\nlet g:ale_lint_delay = 0"),
    );
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let mut c = connect(&lock);
    // ALE's shell linter (sh -n) finds the missing `fi`; claude gets it from Vim.
    let found = call_until(&mut c, "getDiagnostics", json!({"uri": uri}), |v| {
        v[0]["diagnostics"].as_array().is_some_and(|d| d.len() >= 3)
    });
    assert_eq!(
        found[0]["diagnostics"].as_array().unwrap().len(),
        3,
        "{found}"
    );
    assert!(!found.to_string().contains("in another file"), "{found}");
    let d = diagnostic_with(&found, "source", "other");
    assert_eq!(
        (&d["code"], &d["severity"]),
        (&json!("W42"), &json!("Warning")),
        "{d}"
    );
    assert_eq!(found[0]["uri"], json!(uri));
    let from = |source: &str| diagnostic_with(&found, "source", source);
    let d = from("shell");
    assert_eq!(d["severity"], "Error");
    assert!(
        d["message"].as_str().unwrap().to_lowercase().contains("fi"),
        "{d}"
    );
    // ALE's byte column 8 is UTF-16 unit 5 ("# " and the emoji's two units before it).
    let d = from("marks");
    assert_eq!(d["message"], "x marks the spot");
    assert_eq!(d["range"], range_of(1, 5, 1, 6));
    // Fixed and saved: ALE finds nothing, and claude hears that too.
    vim.ex("2delete");
    vim.ex("$put ='fi'");
    vim.ex("w");
    let n = c
        .recv_until(WAIT, |v| {
            v["method"] == "diagnostics_changed" && v["params"]["diagnostics"] == json!([])
        })
        .expect("diagnostics_changed with the cleared list");
    assert_eq!(n["params"]["uri"], json!(uri));
    let now = json_of(&call(&mut c, "getDiagnostics", json!({"uri": uri})));
    assert_eq!(now, json!([]));
    // Broken again, then the buffer wiped: Vim withdraws what ALE said of it (`null`), so its
    // last word does not stand for the file for good.
    vim.ex("$delete");
    vim.ex("w");
    call_until(&mut c, "getDiagnostics", json!({"uri": uri}), |v| {
        v.to_string().contains("\"shell\"")
    });
    vim.ex("enew | bwipeout! s.sh");
    let give_up = Instant::now() + WAIT;
    while !fs::read_to_string(&vim.log).is_ok_and(|l| l.contains(r#""diagnostics":null"#)) {
        assert!(Instant::now() < give_up, "{}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }
    call_until(&mut c, "getDiagnostics", json!({"uri": uri}), |v| {
        v == &json!([])
    });
    vim.ex("qa!");
}

/// A stand-in for vim-lsp's diagnostics state: vim-lsp is in no package registry the tests can
/// install from. What the plugin reads is vim-lsp's own (its
/// `autoload/lsp/internal/diagnostics/state.vim`): the state grouped by URI and then by server,
/// each entry the server's `textDocument/publishDiagnostics` message as received, read through
/// `lsp#internal#diagnostics#state#_get_all_diagnostics_grouped_by_uri_and_server()`, with
/// `User lsp_diagnostics_updated` after every change. Publishing replaces one server's entry for a
/// URI, and a server's exit removes its entries from every URI and leaves the URIs, as vim-lsp
/// does.
const VIM_LSP_STATE: &str = "\
let s:state = {}
function! lsp#internal#diagnostics#state#_get_all_diagnostics_grouped_by_uri_and_server() abort
  return s:state
endfunction
function! lsp#internal#diagnostics#state#test_publish(server, uri, diagnostics) abort
  if !has_key(s:state, a:uri)
    let s:state[a:uri] = {}
  endif
  let s:state[a:uri][a:server] = {'method': 'textDocument/publishDiagnostics',
    \\ 'params': {'uri': a:uri, 'diagnostics': a:diagnostics}}
  doautocmd <nomodeline> User lsp_diagnostics_updated
endfunction
function! lsp#internal#diagnostics#state#test_exit(server) abort
  for l:servers in values(s:state)
    if has_key(l:servers, a:server)
      call remove(l:servers, a:server)
    endif
  endfor
  doautocmd <nomodeline> User lsp_diagnostics_updated
endfunction
";

#[test]
fn vim_reports_vim_lsp_diagnostics() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let file = sb.ws.join("m.py");
    fs::write(&file, "x = 1\n# \u{1f600} y\n").unwrap();
    let uri = format!("file://{}", file.display());
    let state = sb
        .home
        .join(".vim/autoload/lsp/internal/diagnostics/state.vim");
    fs::create_dir_all(state.parent().unwrap()).unwrap();
    fs::write(&state, VIM_LSP_STATE).unwrap();
    // vim-lsp sets g:lsp_loaded when it loads. The bridge runs no language server of its own:
    // a getDiagnostics before Vim's first report would otherwise wait for pyright's cold start
    // (past the test client's 5 s on a loaded machine), and only Vim's reports are under test.
    let vim = Vim::start(
        &sb,
        &file,
        "let g:lsp_loaded = 1\nlet g:claude_ide_bridge_args = ['--no-lsp']",
    );
    let publish = |server: &str, diagnostics: Value| {
        vim.ex(&format!(
            "call lsp#internal#diagnostics#state#test_publish('{server}', '{uri}', json_decode('{diagnostics}'))"
        ));
    };
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let mut c = connect(&lock);
    // Positions travel as the servers sent them: UTF-16 units, as vim-lsp asks for by default
    // (the emoji is two units: "y" is at 5).
    publish(
        "pyright",
        json!([
            {"range": range_of(1, 5, 1, 6), "message": "\"y\" is not defined", "severity": 1,
             "code": "reportUndefinedVariable", "source": "Pyright"},
            {"range": range_of(0, 0, 0, 1), "message": "x is unused", "severity": 4, "source": "Pyright"},
        ]),
    );
    // No severity (an error, as LSP says), a number for a code, no source (the server's name).
    publish(
        "ruff",
        json!([{"range": range_of(0, 4, 0, 5), "message": "one is magic", "code": 501}]),
    );
    let found = call_until(&mut c, "getDiagnostics", json!({"uri": uri}), |v| {
        v[0]["diagnostics"].as_array().is_some_and(|d| d.len() == 3)
    });
    assert_eq!(found[0]["uri"], json!(uri));
    let by_message = |found: &Value, message: &str| diagnostic_with(found, "message", message);
    let d = by_message(&found, "\"y\" is not defined");
    assert_eq!(d["severity"], "Error");
    assert_eq!(d["source"], "Pyright");
    assert_eq!(d["code"], "reportUndefinedVariable");
    assert_eq!(d["range"], range_of(1, 5, 1, 6));
    let d = by_message(&found, "x is unused");
    assert_eq!(d["severity"], "Hint");
    assert_eq!(d["range"], range_of(0, 0, 0, 1));
    let d = by_message(&found, "one is magic");
    assert_eq!(d["severity"], "Error");
    assert_eq!(d["source"], "ruff");
    assert_eq!(d["code"], "501");
    // pyright exits: its diagnostics go, ruff's stay.
    vim.ex("call lsp#internal#diagnostics#state#test_exit('pyright')");
    let left = call_until(&mut c, "getDiagnostics", json!({"uri": uri}), |v| {
        v[0]["diagnostics"].as_array().is_some_and(|d| d.len() == 1)
    });
    assert_eq!(by_message(&left, "one is magic")["source"], "ruff");
    // ruff publishes an empty list: claude hears the file is clean.
    publish("ruff", json!([]));
    let n = c
        .recv_until(WAIT, |v| {
            v["method"] == "diagnostics_changed" && v["params"]["diagnostics"] == json!([])
        })
        .expect("diagnostics_changed with the cleared list");
    assert_eq!(n["params"]["uri"], json!(uri));
    assert_eq!(
        json_of(&call(&mut c, "getDiagnostics", json!({"uri": uri}))),
        json!([])
    );
    vim.ex("qa!");
}

#[test]
fn vim_reports_a_bridge_that_cannot_start_once_per_command() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let mut vim = Vim::start(&sb, &a, "let g:claude_ide_bridge_args = ['--no-such-flag']");
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("the bridge exited")
    });
    let m = m.as_str().unwrap();
    assert!(m.contains("before it was ready"), "{m}");
    assert!(m.contains("--no-such-flag"), "the bridge's own reason: {m}");
    // A usage error (status 2): the plugin's settings are what to look at, not `doctor`.
    assert!(m.contains("see g:claude_ide_bridge_args"), "{m}");
    assert!(!m.contains("claude-ide-bridge doctor"), "{m}");
    assert_eq!(m.matches("the bridge exited").count(), 1, "{m}");
    assert!(fs::read_dir(sb.lock_dir()).map_or(true, |mut d| d.next().is_none()));
    // :help finds the documentation of the package, down to each command.
    vim.ex("helptags ALL");
    for topic in [
        "claude-ide-bridge-install",
        ":ClaudeCodeAdd",
        "g:claude_ide_bridge_diff_layout",
    ] {
        vim.ex(&format!("help {topic}"));
        let tag = format!("*{topic}*");
        vim.wait_eval("getline('.')", |v| {
            v.as_str().is_some_and(|l| l.contains(&tag))
        });
        assert!(vim
            .eval("expand('%:p')")
            .as_str()
            .unwrap()
            .ends_with("claude-ide-bridge/doc/claude-ide-bridge.txt"));
        vim.ex("close");
    }
    // A program that is not there: said with where to look, once for each command typed.
    vim.ex("let g:claude_ide_bridge_cmd = '/nonexistent/claude-ide-bridge'");
    vim.ex("ClaudeCodeStart");
    vim.ex("ClaudeCode");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().matches("was not found").count() == 2
    });
    let m = m.as_str().unwrap();
    assert!(m.contains(":help claude-ide-bridge-install"), "{m}");
    // A command that finds nothing to do says so every time it is typed.
    vim.ex("ClaudeCodeDiffAccept");
    vim.ex("ClaudeCodeDiffAccept");
    vim.wait_eval("execute('messages')", |v| {
        v.as_str()
            .unwrap()
            .matches("no change from claude is pending")
            .count()
            == 2
    });
    vim.ex("qa!");
}

/// What Vim users run into that a scripted session does not: a workspace whose name Vim's
/// `expand()` would read as a pattern, a connection refused before it was reported, a file
/// another Vim edits (a swap file), a save when the file changed on disk, CRLF files, a window
/// that showed another buffer before the diff, and a call claude withdraws while Vim is on the
/// command line. None of them may put a raw Vim error, a question or a false report in front of
/// the user.
#[test]
fn vim_handles_what_vim_users_run_into() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    // `[id]` as Next.js names folders: expand() would make it `i`, which exists beside it.
    let ws = sb.ws.join("[id]");
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(sb.ws.join("i")).unwrap();
    let other = ws.join("other.txt");
    let a = ws.join("a.txt");
    let b = ws.join("b.txt");
    let c_txt = ws.join("c.txt");
    let dos = ws.join("dos.txt");
    fs::write(&other, "other\n").unwrap();
    fs::write(&a, "one\ntwo\n").unwrap();
    fs::write(&b, "bee\n").unwrap();
    fs::write(&c_txt, "sea\n").unwrap();
    fs::write(&dos, "one\r\ntwo\r\nthree\r\n").unwrap();
    let mut vim = Vim::start(&sb, &other, "");
    vim.ex(&format!("call chdir('{}')", ws.display()));
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let lockv: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(lockv["workspaceFolders"], json!([ws.to_string_lossy()]));
    let mut c = connect(&lock);

    // A connection with a wrong token: refused, and reported to Vim only as gone.
    let port: u16 = lock.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    assert_eq!(client::connect(port, Some("wrong")).0, 401);
    let give_up = Instant::now() + WAIT;
    while !fs::read_to_string(&vim.log).is_ok_and(|l| l.contains("refused_401")) {
        assert!(Instant::now() < give_up, "{}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }

    // a.txt is open in another Vim: the diff still opens, its file side read-only, and the
    // user is told why. The edit window showed other.txt before.
    vim.tmux(&[
        "new-window",
        "-d",
        "-c",
        &ws.to_string_lossy(),
        "vim -i NONE -u NONE -N a.txt",
    ]);
    let swap = ws.join(".a.txt.swp");
    let give_up = Instant::now() + WAIT;
    while !swap.exists() {
        assert!(Instant::now() < give_up, "the other Vim wrote no swap file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = c.call_tool("openDiff", open_diff_args(&a, "one\nTWO\n", "swap"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    assert_eq!(vim.eval("getbufvar(bufnr('a.txt'), '&readonly')"), 1);
    vim.ex("ClaudeCodeDiffDeny");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["DIFF_REJECTED", "swap"]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    // The window went back to other.txt with diff mode off for a.txt: shown again, it is a
    // plain window.
    assert_eq!(vim.eval("expand('%:t')"), "other.txt");
    vim.ex("buffer a.txt");
    assert_eq!(
        vim.eval("[&diff, &scrollbind, &cursorbind, &foldmethod]"),
        json!([0, 0, 0, "manual"])
    );
    vim.ex("buffer other.txt");

    // saveDocument when the file changed on disk while Vim holds unsaved changes: not saved,
    // no question, the disk's version kept, and the user told.
    vim.ex("edit b.txt");
    vim.keys(&["i", "x", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    fs::write(&b, "theirs\n").unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&b)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let saved = json_of(&call(
        &mut c,
        "saveDocument",
        json!({"filePath": b.to_string_lossy()}),
    ));
    assert_eq!(saved["saved"], false, "{saved}");
    assert!(
        saved["message"]
            .as_str()
            .unwrap()
            .contains("changed on disk"),
        "{saved}"
    );
    assert_eq!(fs::read_to_string(&b).unwrap(), "theirs\n");
    assert_eq!(vim.eval("[mode(), &modified]"), json!(["n", 1]));
    vim.ex("edit!");

    // A CRLF file: the proposal is read with the same line breaks (only the changed line
    // differs) and accepted with them.
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&dos, "one\r\nTWO\r\nthree\r\n", "dos"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let shown = vim.eval(
        "[win_execute(bufwinid(bufnr('proposed by claude')), \
         'let g:seen = [getline(1, \"$\"), &fileformat, diff_hlID(1, 1), diff_hlID(2, 1)]'), g:seen][1]",
    );
    assert_eq!(shown[0], json!(["one", "TWO", "three"]), "{shown}");
    assert_eq!(shown[1], "dos", "{shown}");
    assert_eq!(shown[2], 0, "an unchanged line is marked: {shown}");
    assert_ne!(shown[3], 0, "the changed line is not marked: {shown}");
    vim.ex("ClaudeCodeDiffAccept");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "one\r\nTWO\r\nthree\r\n"]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);

    // A diff arriving while the user types a command waits; withdrawn meanwhile, it never opens.
    vim.keys(&["Escape"]);
    vim.text(":echo 'typing");
    vim.wait_eval_in_cmdline();
    let id = c.call_tool("openDiff", open_diff_args(&c_txt, "SEA\n", "typed"));
    let logged = |what: &str| {
        let give_up = Instant::now() + WAIT;
        while !fs::read_to_string(&vim.log).is_ok_and(|l| l.contains(what)) {
            assert!(
                Instant::now() < give_up,
                "{what} not logged; {}",
                vim.diag()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // the tool_call line (its members in any order)
    logged(r#""tab_name":"typed""#);
    let close = c.call_tool("close_tab", json!({"tab_name": "typed"}));
    let got = responses(&mut c, &[id, close]);
    assert_eq!(texts(&got[&id])[0], "DIFF_REJECTED");
    logged(r#""type":"cancelled""#);
    vim.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(vim.eval("bufnr('proposed by claude')"), -1);
    assert_eq!(vim.eval("bufloaded('c.txt')"), 0);

    // A file whose name has a composing accent (é as e and U+0301): its URI in the open
    // editors is the bridge's spelling, every code point encoded.
    let nfd = ws.join("cafe\u{301}.txt");
    fs::write(&nfd, "x\n").unwrap();
    vim.ex("edit cafe\u{301}.txt");
    let want = claude_ide_bridge::file_uri(&nfd.to_string_lossy());
    assert!(want.ends_with("cafe%CC%81.txt"), "{want}");
    call_until(&mut c, "getOpenEditors", json!({}), |v| {
        v["tabs"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["uri"] == json!(want)))
    });

    // A block selection (CTRL-V) by the screen columns Vim shows: the second é of one line and
    // the b under it, whatever bytes come before them.
    fs::write(ws.join("blk.txt"), "\u{e9}\u{e9}\u{e9}\nabc\n").unwrap();
    vim.ex("edit blk.txt");
    vim.ex("call cursor(1, 3)");
    vim.keys(&["C-v", "j"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["text"].as_str().is_some_and(|t| t.contains('\n'))
    });
    assert_eq!(sel["text"], "\u{e9}\nb", "{sel}");
    assert_eq!(sel["selection"], range(0, 1, 1, 2));
    vim.keys(&["Escape"]);
    // A tab before one corner: the x shown at screen column 9 on both lines.
    fs::write(ws.join("tab.txt"), "\tx\n12345678x\n").unwrap();
    vim.ex("edit tab.txt");
    vim.ex("call cursor(1, 2)");
    vim.keys(&["C-v", "j"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["filePath"]
            .as_str()
            .is_some_and(|f| f.ends_with("tab.txt"))
            && p["text"].as_str().is_some_and(|t| t.contains('\n'))
    });
    assert_eq!(sel["text"], "x\nx", "{sel}");
    assert_eq!(sel["selection"], range(0, 1, 1, 9));
    vim.keys(&["Escape"]);
    // A selection ending on a letter with a composing accent (e + U+0301) keeps the accent.
    fs::write(ws.join("nfd.txt"), "cafe\u{301} x\n").unwrap();
    vim.ex("edit nfd.txt");
    vim.ex("call cursor(1, 1)");
    vim.keys(&["v", "e"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["filePath"]
            .as_str()
            .is_some_and(|f| f.ends_with("nfd.txt"))
            && p["text"].as_str().is_some_and(|t| t.starts_with("caf"))
    });
    assert_eq!(sel["text"], "cafe\u{301}", "{sel}");
    // Five UTF-16 units: the accent is one of its own (the line looked ASCII to the plugin, and
    // its bytes were counted: 6).
    assert_eq!(sel["selection"], range(0, 0, 0, 5), "{sel}");
    vim.keys(&["Escape"]);
    // `$` in a block selection takes each line to its own end, the first one past the column
    // the cursor ends in.
    fs::write(ws.join("ends.txt"), "abcdef\nab\nabcd\n").unwrap();
    vim.ex("edit ends.txt");
    vim.ex("call cursor(1, 2)");
    vim.keys(&["C-v", "j", "j"]);
    vim.text("$");
    let sel = notification(&mut c, "selection_changed", |p| {
        p["filePath"]
            .as_str()
            .is_some_and(|f| f.ends_with("ends.txt"))
            && p["text"]
                .as_str()
                .is_some_and(|t| t.matches('\n').count() == 2)
    });
    assert_eq!(sel["text"], "bcdef\nb\nbcd", "{sel}");
    assert_eq!(sel["selection"], range(0, 1, 2, 4));
    vim.keys(&["Escape"]);

    // A diff arriving while the user types in Insert mode waits until they leave it: what they
    // type stays in their file (it went into the file of the diff, which a later :w wrote over
    // claude's change), and the diff opens then.
    fs::write(ws.join("typing.txt"), "").unwrap();
    vim.ex("edit typing.txt");
    vim.text("AONE");
    let give_up = Instant::now() + WAIT;
    while !vim.screen().contains("-- INSERT --") {
        assert!(
            Instant::now() < give_up,
            "not in Insert mode; {}",
            vim.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let id = c.call_tool("openDiff", open_diff_args(&c_txt, "SEA\n", "inserting"));
    let give_up = Instant::now() + WAIT;
    while !fs::read_to_string(&vim.log).is_ok_and(|l| l.contains(r#""tab_name":"inserting""#)) {
        assert!(Instant::now() < give_up, "no tool_call; {}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    vim.text(" TWO");
    vim.keys(&["Escape"]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v != -1);
    assert_eq!(
        vim.eval("getbufline('typing.txt', 1, '$')"),
        json!(["ONE TWO"])
    );
    assert_eq!(vim.eval("getbufvar('c.txt', '&modified')"), 0);

    // :w with a file name in the proposal writes a copy there and decides nothing; :w alone
    // accepts (the copy was not written, and claude was told the change was saved).
    let copy = sb.root().join("copy.txt");
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex(&format!("w {}", copy.display()));
    let give_up = Instant::now() + WAIT;
    while fs::read_to_string(&copy).ok().as_deref() != Some("SEA\n") {
        assert!(Instant::now() < give_up, "no copy written; {}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        c.recv_until(Duration::from_millis(300), |v| v["id"] == json!(id))
            .is_none(),
        "a copy decided the diff"
    );
    assert_ne!(vim.eval("bufnr('proposed by claude')"), -1);
    vim.ex("w");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r)[0], "FILE_SAVED");
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);

    // A buffer named as a URL (netrw's `http://...`) is no file: moving and selecting in it
    // sends nothing, so the bridge refuses nothing.
    vim.ex("enew");
    // (no swap file: Vim would keep it in /var/tmp, where a test killed midway leaves it)
    vim.ex("setlocal noswapfile");
    vim.ex("file foo://bar/baz.txt");
    vim.ex("call setline(1, ['a', 'b'])");
    vim.keys(&["j", "V"]);
    vim.keys(&["Escape"]);
    vim.ex("call cursor(1, 1)");
    // past the selection's debounce (100 ms) and the open editors' (50 ms)
    std::thread::sleep(Duration::from_millis(600));
    let sent = fs::read_to_string(&vim.log).unwrap_or_default();
    assert!(
        !sent
            .lines()
            .any(|l| l.contains(" -> ") && l.contains("foo:")),
        "a URL's buffer was sent as a file; {}",
        vim.diag()
    );

    // The plugin sourced again (`:source $MYVIMRC` with a `packadd` in it): its commands still
    // work. The status waits for the bridge's answer, so a refusal of the lines before it has
    // arrived by then.
    let answers = || {
        fs::read_to_string(&vim.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" <- ") && l.contains(r#""type":"status""#))
            .count()
    };
    let before = answers();
    vim.ex("runtime plugin/claude_ide_bridge.vim");
    vim.ex("ClaudeCodeStatus");
    let give_up = Instant::now() + WAIT;
    while answers() == before {
        assert!(
            Instant::now() < give_up,
            "no status answered; {}",
            vim.diag()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Through all of it: no raw Vim error, no false report of a plugin failure, and the
    // messages that were due.
    let m = vim.eval("execute('messages')");
    let m = m.as_str().unwrap();
    for bad in [
        "E716",
        "E325",
        "E121",
        "Error detected",
        "please report",
        "refused a line",
    ] {
        assert!(!m.contains(bad), "{bad} in {m}");
    }
    assert!(m.contains("opened read-only"), "{m}");
    assert!(
        m.contains("changed on disk while Vim has unsaved changes"),
        "{m}"
    );
    vim.ex("qa!");
    gone(&lock);
}

/// `:ClaudeCode` when claude cannot run says why: a command that is not there, a claude that
/// exits with an error (its window stays, with what it said), while one that ends well closes
/// its window; and two `:ClaudeCode` before the bridge is ready start one claude.
#[test]
fn vim_claude_code_says_why_claude_did_not_start() {
    if tools_missing() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let script = |name: &str, body: &str| {
        let p = sb.root().join(name);
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    };
    let failing = script("failing-claude", "echo 'Invalid API key'; exit 1");
    let quick = script("quick-claude", "exit 0");
    let slow = script("slow-claude", "exec sleep 60");
    let mut vim = Vim::start(
        &sb,
        &a,
        "let g:claude_ide_bridge_terminal_cmd = '/nonexistent/claude'",
    );
    vim.ex("ClaudeCode");
    vim.wait_eval("execute('messages')", |v| {
        v.as_str()
            .unwrap()
            .contains("/nonexistent/claude was not found")
    });
    assert_eq!(vim.eval("winnr('$')"), 1);

    vim.ex(&format!(
        "let g:claude_ide_bridge_terminal_cmd = '{failing}'"
    ));
    vim.ex("ClaudeCode");
    // From here the focus may be in claude's window: Ex commands go through CTRL-W :.
    vim.in_terminal = true;
    vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("claude exited with status 1")
    });
    assert!(vim.screen().contains("Invalid API key"), "{}", vim.screen());
    vim.term_ex("only!");
    vim.term_ex("for b in term_list() | execute 'bwipeout!' b | endfor");

    vim.term_ex(&format!("let g:claude_ide_bridge_terminal_cmd = '{quick}'"));
    vim.term_ex("ClaudeCode");
    vim.wait_eval("len(term_list())", |v| v == 0);
    vim.wait_eval("winnr('$')", |v| v == 1);

    // Twice before the bridge is ready: one claude.
    vim.term_ex("ClaudeCodeStop");
    vim.wait_eval("execute('ClaudeCodeStatus')", |v| {
        v.as_str().unwrap().contains("bridge: not running")
    });
    vim.term_ex(&format!("let g:claude_ide_bridge_terminal_cmd = '{slow}'"));
    vim.term_ex("ClaudeCode | ClaudeCode");
    vim.wait_eval("len(term_list())", |v| v == 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(vim.eval("len(term_list())"), 1);
    vim.term_ex("qa!");
}

/// Vim, its bridge and a connected claude, on a workspace with `files` (name, contents); the
/// file first named is the one Vim edits.
fn vim_with_claude(sb: &Sandbox, files: &[(&str, &str)], vimrc_extra: &str) -> (Vim, Client) {
    for (name, text) in files {
        fs::write(sb.ws.join(name), text).unwrap();
    }
    let vim = Vim::start(sb, &sb.ws.join(files[0].0), vimrc_extra);
    vim.ex("ClaudeCodeStart");
    let c = connect(&wait_lock(sb));
    (vim, c)
}

/// Sets the time a file was last written (what Vim compares to tell whether it changed).
fn set_mtime(path: &Path, when: std::time::SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

/// A save claude asks for when the file changed on disk while Vim holds unsaved changes is
/// refused each time it is asked, and none of them asks the user anything (the second one met
/// Vim's "The file has been changed since reading it!!! Do you really want to write to it"
/// before: the first one's :checktime had taken the file's new time as seen, `:update` had not).
/// Once the user chose (`:e!`), saves work again.
#[test]
fn vim_repeated_saves_after_a_conflict_ask_nothing() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("b.txt", "bee\n")], "");
    let b = sb.ws.join("b.txt");
    let b_s = b.to_string_lossy().to_string();
    vim.keys(&["i", "x", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    fs::write(&b, "theirs\n").unwrap();
    set_mtime(&b, std::time::SystemTime::now() + Duration::from_secs(5));
    for attempt in 1..=3 {
        let saved = json_of(&call(&mut c, "saveDocument", json!({"filePath": b_s})));
        refused_as_changed_on_disk(&saved, attempt);
        assert_eq!(fs::read_to_string(&b).unwrap(), "theirs\n");
        assert_eq!(vim.eval("[mode(), &modified]"), json!(["n", 1]));
    }
    assert!(!vim.screen().contains("really want"), "{}", vim.diag());
    // The user takes the file's version and edits it: saved again.
    vim.ex("edit!");
    vim.keys(&["A", "!", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    let saved = json_of(&call(&mut c, "saveDocument", json!({"filePath": b_s})));
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(fs::read_to_string(&b).unwrap(), "theirs!\n");
    let m = vim.eval("execute('messages')");
    assert_eq!(
        m.as_str().unwrap().matches("changed on disk while").count(),
        1,
        "{m}"
    );
    // Vim's own check finds the change (here :checktime; also on focus, or after a shell
    // command) and the user keeps the buffer: the same.
    vim.keys(&["A", "?", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    fs::write(&b, "again\n").unwrap();
    set_mtime(&b, std::time::SystemTime::now() + Duration::from_secs(10));
    vim.ex("checktime");
    answer_file_changed(&mut vim, "o");
    vim.wait_eval("[mode(), &modified]", |v| v == &json!(["n", 1]));
    let saved = json_of(&call(&mut c, "saveDocument", json!({"filePath": b_s})));
    assert_eq!(saved["saved"], false, "{saved}");
    assert_eq!(fs::read_to_string(&b).unwrap(), "again\n");
    assert_eq!(vim.eval("[mode(), &modified]"), json!(["n", 1]));
    vim.ex("qa!");
}

/// Answers Vim's question about a file changed on disk (W11, W12: "(O)K, (L)oad File") with
/// `key`, once asked. Vim drops what was typed ahead of its question: a key that came as the
/// question was being drawn is lost (on a loaded machine, also 100 ms after it showed), so the
/// key is sent again while the question stays on the screen for long after it.
fn answer_file_changed(vim: &mut Vim, key: &str) {
    let asked = |vim: &Vim| vim.screen().contains("(L)oad File");
    let give_up = Instant::now() + WAIT;
    while !asked(vim) {
        assert!(Instant::now() < give_up, "no question; {}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    loop {
        vim.keys(&[key]);
        let taken_by = Instant::now() + Duration::from_secs(3);
        while asked(vim) && Instant::now() < taken_by {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !asked(vim) {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "the answer was not taken; {}",
            vim.diag()
        );
    }
}

/// A `saveDocument` answer refusing the save because the file changed on disk.
fn refused_as_changed_on_disk(saved: &Value, attempt: u32) {
    assert_eq!(saved["saved"], false, "attempt {attempt}: {saved}");
    assert_eq!(saved["success"], false, "attempt {attempt}: {saved}");
    let message = saved["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("changed on disk"),
        "attempt {attempt}: {saved}"
    );
}

/// saveDocument for `path`, failing as soon as Vim asks anything meanwhile (its "Do you really
/// want to write to it" holds Vim, and the answer, until someone types y or n).
fn save_asking_nothing(vim: &Vim, c: &mut Client, path: &Path) -> Value {
    let id = c.call_tool("saveDocument", json!({"filePath": path.to_string_lossy()}));
    let give_up = Instant::now() + WAIT;
    loop {
        if let Some(r) = c.recv_until(Duration::from_millis(100), |v| v["id"] == json!(id)) {
            return json_of(&r);
        }
        assert!(
            !vim.screen().contains("really want"),
            "Vim asked; {}",
            vim.diag()
        );
        assert!(
            Instant::now() < give_up,
            "no answer to saveDocument; {}",
            vim.diag()
        );
    }
}

/// Vim's own check (here :checktime; also on focus, or after a shell command) finds the file
/// changed while the buffer has no unsaved changes: W11, and the user keeps Vim's text (OK). Vim
/// then takes the file's new time as seen while a write still compares with the time it was read
/// at, so once the user edits the buffer, a save claude asks for is a conflict: refused, the
/// user's edit and the file kept, and nothing asked (Vim asked "Do you really want to write to
/// it" before: the plugin kept only what it found of buffers with unsaved changes). Answered
/// Load, or when only the file's time or its mode changed, saves work.
#[test]
fn vim_a_save_after_keeping_a_changed_file_asks_nothing() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("b.txt", "bee\n")], "");
    let b = sb.ws.join("b.txt");
    let later = |s: u64| std::time::SystemTime::now() + Duration::from_secs(s);
    // The file becomes `text` on disk (`secs` later), Vim asks W11, the user answers `key`, then
    // edits the buffer, whose first line was `line`.
    let answer_then_edit = |vim: &mut Vim, text: &str, secs: u64, key: &str, line: &str| {
        fs::write(&b, text).unwrap();
        set_mtime(&b, later(secs));
        vim.ex("checktime");
        answer_file_changed(vim, key);
        vim.wait_eval("[mode(), &modified, getline(1)]", |v| {
            v == &json!(["n", 0, line])
        });
        vim.keys(&["A", "!", "Escape"]);
        vim.wait_eval("&modified", |v| v == 1);
    };

    answer_then_edit(&mut vim, "theirs\n", 5, "o", "bee");
    for attempt in 1..=2 {
        let saved = save_asking_nothing(&vim, &mut c, &b);
        refused_as_changed_on_disk(&saved, attempt);
        assert_eq!(fs::read_to_string(&b).unwrap(), "theirs\n");
        assert_eq!(
            vim.eval("[mode(), &modified, getline(1)]"),
            json!(["n", 1, "bee!"])
        );
    }

    // The user takes the file's version; it changes again and the user loads it (L): saved.
    vim.ex("edit!");
    vim.wait_eval("[&modified, getline(1)]", |v| v == &json!([0, "theirs"]));
    answer_then_edit(&mut vim, "again\n", 10, "l", "again");
    let saved = save_asking_nothing(&vim, &mut c, &b);
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(fs::read_to_string(&b).unwrap(), "again!\n");

    // Only its time changes: Vim says nothing, and takes the new time as the file's.
    set_mtime(&b, later(15));
    vim.ex("checktime");
    assert_eq!(vim.eval("[mode(), &modified]"), json!(["n", 0]));
    vim.keys(&["A", "?", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    let saved = save_asking_nothing(&vim, &mut c, &b);
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(fs::read_to_string(&b).unwrap(), "again!?\n");

    // Only its mode changes (`chmod`): Vim asks W16 and the user answers OK. A write would not
    // ask (the file's time is the one read), so the save goes through.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&b, fs::Permissions::from_mode(0o755)).unwrap();
    vim.ex("checktime");
    let give_up = Instant::now() + WAIT;
    while !vim.screen().contains("W16") {
        assert!(Instant::now() < give_up, "no W16 question; {}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }
    vim.keys(&["o"]);
    vim.wait_eval("[mode(), &modified]", |v| v == &json!(["n", 0]));
    vim.keys(&["A", "#", "Escape"]);
    vim.wait_eval("&modified", |v| v == 1);
    let saved = save_asking_nothing(&vim, &mut c, &b);
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(fs::read_to_string(&b).unwrap(), "again!?#\n");
    let m = vim.eval("execute('messages')");
    assert_eq!(
        m.as_str().unwrap().matches("changed on disk while").count(),
        1,
        "{m}"
    );
    vim.ex("qa!");
}

/// Replaces a file's contents at once (as an editor's atomic save) and gives it `mtime`: with the
/// same size and time as before, what Vim's timestamp check sees of a write within the same tick
/// of the file system's clock as its read (or the same second, on file systems that keep no more).
fn write_unseen(path: &Path, text: &str, mtime: std::time::SystemTime) {
    let tmp = path.with_extension("claude-tmp");
    fs::write(&tmp, text).unwrap();
    set_mtime(&tmp, mtime);
    fs::rename(&tmp, path).unwrap();
}

/// The file claude writes after a diff is answered (in its terminal: the diff is closed by
/// `close_tab`; in Vim: `:w`) shows in its buffer even when the file's time and size do not tell
/// that it changed (`:checktime` found nothing before: the buffer kept the old text), whether the
/// buffer is shown or hidden; a buffer with unsaved changes is not reloaded, and the user is told.
#[test]
fn vim_shows_what_claude_wrote_after_a_diff() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) =
        vim_with_claude(&sb, &[("a.txt", "one\n"), ("other.txt", "other\n")], "");
    let a = sb.ws.join("a.txt");
    let mtime = || {
        fs::metadata(sb.ws.join("a.txt"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let lines = "getbufline(bufnr('a.txt'), 1, '$')";

    // Accepted in claude's terminal: claude closes the diff, then writes the file.
    let id = c.call_tool("openDiff", open_diff_args(&a, "ONE\n", "terminal"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let close = c.call_tool("close_tab", json!({"tab_name": "terminal"}));
    responses(&mut c, &[id, close]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    write_unseen(&a, "ONE\n", mtime());
    vim.wait_eval(lines, |v| v == &json!(["ONE"]));
    assert_eq!(vim.eval("[&modified, expand('%:t')]"), json!([0, "a.txt"]));
    // What Vim had is one undo away.
    vim.ex("undo");
    assert_eq!(vim.eval(lines), json!(["one"]));
    vim.ex("redo");

    // Accepted with :w while the window showed another file: the file's buffer is hidden once the
    // diff closes, and shows what claude wrote when it is shown again.
    vim.ex("edit other.txt");
    let id = c.call_tool("openDiff", open_diff_args(&a, "two\n", "hidden"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("ClaudeCodeDiffAccept");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "two\n"]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    assert_eq!(vim.eval("expand('%:t')"), "other.txt");
    write_unseen(&a, "two\n", mtime());
    // (time for Vim to notice the write while the buffer is hidden)
    std::thread::sleep(Duration::from_millis(500));
    vim.ex("buffer a.txt");
    vim.wait_eval(lines, |v| v == &json!(["two"]));
    assert_eq!(vim.eval("&modified"), 0);

    // Unsaved changes in the file's buffer when claude writes: kept, and the user is told.
    let id = c.call_tool("openDiff", open_diff_args(&a, "six\n", "mine"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call setbufline(bufnr('a.txt'), 1, 'mine')");
    vim.wait_eval("getbufvar(bufnr('a.txt'), '&modified')", |v| v == 1);
    let close = c.call_tool("close_tab", json!({"tab_name": "mine"}));
    responses(&mut c, &[id, close]);
    write_unseen(&a, "six\n", mtime());
    vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("not reloaded")
    });
    assert_eq!(vim.eval(lines), json!(["mine"]));
    assert_eq!(
        vim.eval("[mode(), getbufvar(bufnr('a.txt'), '&modified')]"),
        json!(["n", 1])
    );
    assert_eq!(fs::read_to_string(&a).unwrap(), "six\n");
    vim.ex("qa!");
}

/// Whether any window, in any tab page, is in diff mode.
const ANY_DIFF: &str =
    "len(filter(getwininfo(), {_, w -> gettabwinvar(w.tabnr, w.winnr, '&diff')}))";

/// Closing a diff turns diff mode off where it put it, whatever the windows show by then. The user
/// showed another file in the file's window during the diff: the window kept the file's options of
/// the diff, and brought them back (diff, scrollbind, folds) when it showed the file again.
#[test]
fn vim_diff_mode_ends_where_the_diff_put_it() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(
        &sb,
        &[("a.txt", "one\n"), ("b.txt", "bee\n"), ("c.txt", "sea\n")],
        "",
    );
    let a = sb.ws.join("a.txt");

    // The user shows another buffer in the proposal's window: rejected, no diff mode left.
    let id = c.call_tool("openDiff", open_diff_args(&a, "ONE\n", "proposal"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("edit b.txt");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r)[0], "DIFF_REJECTED");
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    vim.wait_eval(ANY_DIFF, |v| v == 0);
    vim.ex("only");
    vim.wait_eval("winnr('$')", |v| v == 1);

    // ... in the file's window: the same, and the file shown there again is a plain window.
    let id = c.call_tool("openDiff", open_diff_args(&a, "ONE\n", "file"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('a.txt')))");
    vim.ex("edit c.txt");
    vim.ex("ClaudeCodeDiffDeny");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r)[0], "DIFF_REJECTED");
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    vim.wait_eval(ANY_DIFF, |v| v == 0);
    vim.ex("buffer a.txt");
    assert_eq!(
        vim.eval("[&diff, &scrollbind, &cursorbind, &foldmethod]"),
        json!([0, 0, 0, "manual"])
    );
    vim.ex("qa!");
}

/// The window id of the proposal of diff `id` (in any tab page), or -1.
fn proposal_win(id: u64) -> String {
    format!(
        "get(win_findbuf(get(map(filter(getbufinfo(), \
         {{_, b -> b.name =~ 'proposed by claude #{id})$'}}), {{_, b -> b.bufnr}}), 0, -1)), 0, -1)"
    )
}

/// What the tab page of a proposal shows: the file names of its windows, and whether each is
/// in diff mode.
fn diff_tab(vim: &mut Vim, id: u64) -> Value {
    vim.eval(&format!(
        "getwininfo()->filter({{_, w -> w.tabnr == win_id2tabwin({})[0]}})\
         ->map({{_, w -> [fnamemodify(bufname(w.bufnr), ':t'), gettabwinvar(w.tabnr, w.winnr, '&diff')]}})",
        proposal_win(id)
    ))
}

/// claude proposes `a_text` for `a`, then "B" for `b`: the ids of the two calls, once both
/// proposals are shown (the second in a tab page of its own).
fn two_diffs(vim: &mut Vim, c: &mut Client, a: &Path, a_text: &str, b: &Path) -> (u64, u64) {
    let first = c.call_tool("openDiff", open_diff_args(a, a_text, "first"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let second = c.call_tool("openDiff", open_diff_args(b, "B\n", "second"));
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude' && !empty(b.windows)}))",
        |v| v == 2,
    );
    (first, second)
}

/// Two diffs pending at once each have a tab page of their own (diff mode compares every window
/// of a tab page: the second one took the first one's window before), and answering one leaves
/// the other as it was.
#[test]
fn vim_two_pending_diffs_each_their_own() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\n"), ("b.txt", "bee\n")], "");
    let a = sb.ws.join("a.txt");
    let b = sb.ws.join("b.txt");
    for round in 0..2u64 {
        let (first, second) = two_diffs(&mut vim, &mut c, &a, "A\n", &b);
        // the bridge's ids: it counts the calls it forwarded
        let (p1, p2) = (2 * round + 1, 2 * round + 2);
        assert_eq!(vim.eval("tabpagenr('$')"), 2, "{}", vim.diag());
        assert_eq!(vim.eval("tabpagenr()"), 1, "the focus moved");
        let m = vim.eval("execute('messages')");
        assert!(m.as_str().unwrap().contains("b.txt (tab page 2)"), "{m}");
        let tab1 = diff_tab(&mut vim, p1);
        let tab2 = diff_tab(&mut vim, p2);
        assert_eq!(
            tab1,
            json!([
                ["a.txt", 1],
                [format!("a.txt (proposed by claude #{p1})"), 1]
            ])
        );
        assert_eq!(
            tab2,
            json!([
                ["b.txt", 1],
                [format!("b.txt (proposed by claude #{p2})"), 1]
            ])
        );
        if round == 0 {
            // The second is withdrawn: the first stays, and is accepted.
            let close = c.call_tool("close_tab", json!({"tab_name": "second"}));
            let got = responses(&mut c, &[second, close]);
            assert_eq!(texts(&got[&second])[0], "DIFF_REJECTED");
            vim.wait_eval("tabpagenr('$')", |v| v == 1);
            assert_eq!(diff_tab(&mut vim, p1), tab1);
            vim.ex(&format!("call win_gotoid({})", proposal_win(p1)));
            vim.ex("w");
            let r = c.recv_until(WAIT, |v| v["id"] == json!(first)).unwrap();
            assert_eq!(texts(&r), ["FILE_SAVED", "A\n"]);
        } else {
            // The first is accepted: the second stays, and is rejected.
            vim.ex(&format!("call win_gotoid({})", proposal_win(p1)));
            vim.ex("w");
            let r = c.recv_until(WAIT, |v| v["id"] == json!(first)).unwrap();
            assert_eq!(texts(&r), ["FILE_SAVED", "A\n"]);
            vim.wait_eval(&proposal_win(p1), |v| v == -1);
            assert_eq!(diff_tab(&mut vim, p2), tab2);
            vim.ex(&format!("call win_gotoid({})", proposal_win(p2)));
            vim.ex("q");
            let r = c.recv_until(WAIT, |v| v["id"] == json!(second)).unwrap();
            assert_eq!(texts(&r), ["DIFF_REJECTED", "second"]);
        }
        vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
        vim.wait_eval("tabpagenr('$')", |v| v == 1);
        vim.wait_eval(ANY_DIFF, |v| v == 0);
        vim.ex("only");
        vim.ex("buffer a.txt");
        vim.wait_eval("[winnr('$'), expand('%:t')]", |v| v == &json!([1, "a.txt"]));
    }
    vim.ex("qa!");
}

/// The plugin's path functions, in Vim without a terminal: a file's URI is the one the bridge
/// gives it (the engine's `file_uri`), Windows paths included (a Windows Vim names files
/// `C:\...` and `\\server\share\...`; scripts/wine/vim-windows.py runs the plugin there); a
/// folder keeps no trailing separator but at a root; a path is below a folder only across a
/// separator. Every function of the plugin compiles (Vim 9.2 refused one that Vim 9.0 took).
#[test]
fn vim_plugin_paths_are_the_bridges() {
    let sb = Sandbox::new();
    let paths = [
        r"C:\Users\me\a b.rs",
        r"d:/work/ü.txt",
        r"\\host\share\dir\x%y.rs",
        "/home/me/a b#c.rs",
        "/tmp/é\u{301}",
    ];
    // A copy whose scripts each end in `defcompile`: loading one compiles all its functions.
    let plugin = sb.root().join("plugin");
    copy_dir(Path::new(PLUGIN), &plugin);
    let autoload = plugin.join("autoload");
    let mut scripts = vec![autoload.join("claude_ide_bridge.vim")];
    for e in fs::read_dir(autoload.join("claude_ide_bridge")).unwrap() {
        scripts.push(e.unwrap().path());
    }
    for f in &scripts {
        let text = fs::read_to_string(f).unwrap();
        fs::write(f, text + "\ndefcompile\n").unwrap();
    }
    let names = scripts
        .iter()
        .map(|f| format!("'{}'", f.strip_prefix(&plugin).unwrap().display()))
        .collect::<Vec<_>>()
        .join(", ");
    let out = sb.root().join("out.json");
    let list = paths
        .iter()
        .map(|p| format!("'{}'", p.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(", ");
    run_vim_script(
        &sb,
        &plugin,
        &format!(
            "let r = {{}}\n\
             let r.uris = map([{list}], {{_, p -> claude_ide_bridge#context#Uri(p)}})\n\
             let r.folders = map(['/', '/tmp/', '/tmp//'], {{_, p -> claude_ide_bridge#FullFolder(p)}})\n\
             let r.below = [claude_ide_bridge#Below('/a/b/c', '/a/b'), claude_ide_bridge#Below('/a/bc', '/a/b'), claude_ide_bridge#Below('/a/b', '/a/b'), claude_ide_bridge#Below('/x', '/')]\n\
             let r.errors = ''\n\
             for s in [{names}]\n\
             \x20 let r.errors ..= execute('runtime ' .. s)\n\
             endfor\n\
             call writefile([json_encode(r)], '{out}')",
            out = out.display()
        ),
    );
    let got: Value = serde_json::from_str(&fs::read_to_string(&out).unwrap()).unwrap();
    let want: Vec<String> = paths
        .iter()
        .map(|p| claude_ide_bridge::file_uri(p))
        .collect();
    assert_eq!(got["uris"], json!(want));
    assert_eq!(got["folders"], json!(["/", "/tmp", "/tmp"]));
    assert_eq!(got["below"], json!([true, false, true, true]));
    assert_eq!(got["errors"], json!(""), "every function compiles");
}

/// The bridge does not start in a Vim whose 'encoding' is not utf-8 (Vim started with LANG unset
/// has latin1): claude's text would turn into `?` there, and an accepted proposal be written so.
/// Vim says what to set instead.
#[test]
fn vim_refuses_to_start_without_utf8() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let mut vim = Vim::start(&sb, &a, "set encoding=latin1");
    assert_eq!(vim.eval("&encoding"), "latin1");
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("set encoding=utf-8")
    });
    assert!(m.as_str().unwrap().contains("latin1"), "{m}");
    assert!(vim
        .eval("execute('ClaudeCodeStatus')")
        .as_str()
        .unwrap()
        .contains("bridge: not running"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(fs::read_dir(sb.lock_dir()).map_or(true, |mut d| d.next().is_none()));
    vim.ex("qa!");
}

/// The pid of the running bridge, from :ClaudeCodeStatus.
fn bridge_pid(vim: &mut Vim) -> u32 {
    let s = vim.wait_eval("execute('ClaudeCodeStatus')", |v| {
        v.as_str().unwrap().contains("bridge: running, pid ")
    });
    let s = s.as_str().unwrap();
    let at = s.find("bridge: running, pid ").unwrap() + "bridge: running, pid ".len();
    s[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

/// What Vim users type at diffs and commands: `:ClaudeCodeStop | ClaudeCodeStart` restarts, `:e!`
/// in a proposal brings claude's text back (still pending), `ZZ` and `:x` accept like `:wq`, a
/// proposal of one line break is accepted as it is, names `:ClaudeCodeAdd` takes as they are
/// (`a[1].txt`, `b{1,2}.txt`, `#notes.md`) and `%`, selections with 'selection' exclusive,
/// `openFile`'s text found with its case under 'ignorecase', a buffer whose name is not UTF-8
/// not reported, and a bridge killed reported without an unrelated log line.
#[test]
fn vim_diffs_and_commands_as_users_type_them() {
    if tools_missing() {
        return;
    }
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new();
    let files = [
        ("a.txt", "one\ntwo\n"),
        ("a[1].txt", "bracket\n"),
        ("a1.txt", "not this one\n"),
        ("b{1,2}.txt", "braces\n"),
        ("#notes.md", "notes\n"),
        ("case.txt", "Foo bar\nfoo baz\n"),
        ("sel.txt", "a\u{e9}\u{1f600}bc\nxyz\n"),
        ("~x.txt", "tilde\n"),
        ("~", "home?\n"),
    ];
    for (name, text) in files {
        fs::write(sb.ws.join(name), text).unwrap();
    }
    let a = sb.ws.join("a.txt");
    let mut vim = Vim::start(&sb, &a, "");
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let first = bridge_pid(&mut vim);

    // :ClaudeCodeStop | ClaudeCodeStart: the old bridge ends, a new one runs.
    vim.ex("ClaudeCodeStop | ClaudeCodeStart");
    let give_up = Instant::now() + WAIT;
    loop {
        let s = vim.eval("execute('ClaudeCodeStatus')");
        let s = s.as_str().unwrap();
        if s.contains("bridge: running, pid ") && !s.contains(&format!("pid {first},")) {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "no new bridge: {s}; {}",
            vim.diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let s = vim.eval("execute('ClaudeCodeStatus')");
    assert!(s.as_str().unwrap().contains("bridge: running"), "{s}");
    let messages = vim.eval("execute('messages')");
    assert!(
        !has_vim_error(messages.as_str().unwrap(), "E488"),
        "{messages}"
    );
    let lock = {
        let give_up = Instant::now() + WAIT;
        while !lock.exists() {
            assert!(Instant::now() < give_up, "no lock file after the restart");
            std::thread::sleep(Duration::from_millis(20));
        }
        wait_lock(&sb)
    };
    let mut c = connect(&lock);
    let proposal = "call win_gotoid(bufwinid(bufnr('proposed by claude')))";
    let proposal_gone = "bufnr('proposed by claude')";

    // :e! in the proposal after an edit: claude's text again, unchanged, still pending; :w then
    // accepts it.
    let id = c.call_tool("openDiff", open_diff_args(&a, "one\nTWO\n", "reread"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex(proposal);
    vim.ex("%s/one/mine/");
    vim.wait_eval("&modified", |v| v == 1);
    vim.ex("edit!");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        vim.eval("[bufname() =~ 'proposed by claude', getline(1, '$'), &modified, &diff]"),
        json!([1, ["one", "TWO"], 0, 1])
    );
    assert!(
        c.recv_until(Duration::from_millis(300), |v| v["id"] == json!(id))
            .is_none(),
        "answered after :e!"
    );
    vim.ex("w");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "one\nTWO\n"]);
    vim.wait_eval(proposal_gone, |v| v == -1);

    // ZZ on the proposal as claude sent it accepts, like :wq.
    let id = c.call_tool("openDiff", open_diff_args(&a, "one\nZZ\n", "zz"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex(proposal);
    vim.keys(&["Z", "Z"]);
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "one\nZZ\n"]);
    vim.wait_eval(proposal_gone, |v| v == -1);

    // :x too; and a proposal that is one line break is accepted as one.
    let id = c.call_tool("openDiff", open_diff_args(&a, "\n", "x"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex(proposal);
    vim.ex("x");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "\n"]);
    vim.wait_eval(proposal_gone, |v| v == -1);
    // (Vim is still there, back in a.txt)
    assert_eq!(vim.eval("expand('%:t')"), "a.txt");

    // :q still rejects.
    let id = c.call_tool("openDiff", open_diff_args(&a, "nope\n", "q"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex(proposal);
    vim.ex("q");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["DIFF_REJECTED", "q"]);
    vim.wait_eval(proposal_gone, |v| v == -1);

    // Files named `~x.txt` and `~` (Vim names their buffers so, relative): an edited proposal
    // written with :w is accepted, not written to a name of its own (or beside the home
    // folder), and a selection names the file.
    for name in ["~x.txt", "~"] {
        let path = sb.ws.join(name);
        // (Edited first: its buffer named relative to the current folder, as the user opened it.)
        vim.ex(&format!("edit \\{name}"));
        vim.ex("call cursor(1, 2)");
        let sel = notification(&mut c, "selection_changed", |p| {
            p["selection"]["start"]["character"] == 1
        });
        assert_eq!(sel["filePath"], json!(path.to_string_lossy()), "{sel}");
        let id = c.call_tool("openDiff", open_diff_args(&path, "proposed\n", name));
        vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
        vim.ex(proposal);
        vim.ex("%s/proposed/edited/");
        vim.ex("w");
        let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
        assert_eq!(texts(&r), ["FILE_SAVED", "edited\n"], "{name}");
        vim.wait_eval(proposal_gone, |v| v == -1);
        vim.ex("edit a.txt");
    }
    let strays: Vec<_> = (fs::read_dir(&sb.ws).unwrap())
        .chain(fs::read_dir(sb.root()).unwrap())
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("proposed by claude"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");

    // :ClaudeCodeAdd takes names as they are, and `%` as Vim's command line does.
    for name in ["a[1].txt", "b{1,2}.txt", "#notes.md"] {
        vim.ex(&format!("ClaudeCodeAdd {name}"));
        let m = notification(&mut c, "at_mentioned", |_| true);
        assert_eq!(
            m["filePath"],
            json!(sb.ws.join(name).to_string_lossy()),
            "{name}"
        );
    }
    vim.ex("ClaudeCodeAdd % 2");
    let m = notification(&mut c, "at_mentioned", |_| true);
    assert_eq!(m["filePath"], json!(a.to_string_lossy()));
    assert_eq!(m["lineStart"], 1);

    // openFile finds startText with its case, also with 'ignorecase'.
    vim.ex("set ignorecase");
    let case = sb.ws.join("case.txt");
    let r = call(
        &mut c,
        "openFile",
        json!({"filePath": case.to_string_lossy(), "startText": "foo", "endText": "baz"}),
    );
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        vim.eval("[expand('%:t'), line(\"'<\"), col(\"'<\"), line(\"'>\"), col(\"'>\")]"),
        json!(["case.txt", 2, 1, 2, 7])
    );
    vim.ex("set noignorecase");

    // 'selection' exclusive: the character at the end is not selected.
    vim.ex("set selection=exclusive");
    vim.ex("edit sel.txt");
    vim.ex("call cursor(1, 1)");
    vim.keys(&["v", "l", "l"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["filePath"]
            .as_str()
            .is_some_and(|f| f.ends_with("sel.txt"))
            && p["text"] != ""
    });
    assert_eq!(sel["text"], "a\u{e9}", "{sel}");
    assert_eq!(sel["selection"], range(0, 0, 0, 2), "{sel}");
    vim.keys(&["Escape"]);
    // a block: the right column is the cursor's, not selected
    vim.ex("call cursor(1, 1)");
    vim.keys(&["C-v", "j", "l"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["text"].as_str().is_some_and(|t| t.contains('\n'))
    });
    assert_eq!(sel["text"], "a\nx", "{sel}");
    assert_eq!(sel["selection"], range(0, 0, 1, 1), "{sel}");
    vim.keys(&["Escape"]);
    vim.ex("set selection=inclusive");

    // A buffer whose name is not UTF-8: not reported, neither as the selection nor as an open
    // editor (its name would reach claude as another file's).
    let latin1 = sb.ws.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt"));
    fs::write(&latin1, "latin\n").unwrap();
    vim.ex(r#"execute "edit caf\xe9.txt""#);
    vim.wait_eval("getline(1)", |v| v == "latin");
    vim.keys(&["l"]);
    std::thread::sleep(Duration::from_millis(500));
    vim.ex("edit a.txt");
    vim.keys(&["j"]);
    notification(&mut c, "selection_changed", |p| {
        p["filePath"] == json!(a.to_string_lossy()) && p["selection"]["start"]["line"] == 1
    });
    let editors = json_of(&call(&mut c, "getOpenEditors", json!({})));
    let log = String::from_utf8_lossy(&fs::read(&vim.log).unwrap()).into_owned();
    let sent: Vec<&str> = log.lines().filter(|l| l.contains(" -> ")).collect();
    assert!(
        !sent.iter().any(|l| l.contains("/caf")),
        "the Latin-1 name was sent: {sent:?}"
    );
    assert!(!editors.to_string().contains("/caf"), "{editors}");

    // The bridge killed: the message gives its status, not a log line that has nothing to do
    // with it.
    let pid = bridge_pid(&mut vim);
    assert!(
        log.lines().any(|l| l.contains(" stderr ")),
        "the bridge logged nothing to stderr: the check below would prove nothing"
    );
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("exited with status")
    });
    let m = m.as_str().unwrap();
    let line = m
        .lines()
        .find(|l| l.contains("exited with status"))
        .unwrap();
    let after = &line[line.find("exited with status ").unwrap() + "exited with status ".len()..];
    let after = after.trim_start_matches(|c: char| c == '-' || c.is_ascii_digit());
    assert!(after.starts_with(" (see :ClaudeCodeStatus"), "{line}");
    vim.ex("qa!");
}

/// `:xa` (`:xall`, `:wqa`, `:wqall`, with or without `!`) keeps every pending proposal, as `:x`
/// keeps one: each is accepted (one the user edited with its edits), not only the one in the
/// current window, and the answers reach claude although Vim and its bridge end right after (the
/// SIGTERM Vim sends its jobs as it exits could stop the bridge before it read them). Vim writes
/// only the edited proposal, and Vim 9.0 triggers no QuitPre or ExitPre for these commands: the
/// others were left undecided before. `:qa!` still decides nothing.
#[test]
fn vim_write_all_and_quit_accepts_every_pending_diff() {
    if tools_missing() {
        return;
    }
    // (the command; typed in the first proposal rather than in the file's window; accepted)
    for (cmd, in_proposal, accepted) in [
        ("xa", false, true),
        ("wqall!", true, true),
        ("qa!", false, false),
    ] {
        let sb = Sandbox::new();
        let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\n"), ("b.txt", "bee\n")], "");
        let lock = wait_lock(&sb);
        let a = sb.ws.join("a.txt");
        let b = sb.ws.join("b.txt");
        // The first with a NUL, which Vim's copy loses: accepted unedited, claude's own bytes
        // (as Vim exits, every changedtick is -1: it was taken for edited, and Vim's copy sent).
        let (first, second) = two_diffs(&mut vim, &mut c, &a, "A\u{0}\n", &b);
        assert_eq!(vim.eval("tabpagenr('$')"), 2, "{}", vim.diag());
        // The second one, in the other tab page, edited there.
        vim.ex(&format!("call win_gotoid({})", proposal_win(2)));
        vim.ex("%s/B/edited/");
        vim.wait_eval("&modified", |v| v == 1);
        vim.ex("tabfirst");
        if in_proposal {
            vim.ex(&format!("call win_gotoid({})", proposal_win(1)));
        }
        assert_eq!(
            vim.eval("[tabpagenr(), bufname() =~ 'proposed by claude', expand('%:t')]"),
            json!([
                1,
                in_proposal as u8,
                if in_proposal {
                    "a.txt (proposed by claude #1)"
                } else {
                    "a.txt"
                }
            ]),
            "{cmd}"
        );
        vim.ex(cmd);
        let got = responses(&mut c, &[first, second]);
        if accepted {
            assert_eq!(texts(&got[&first]), ["FILE_SAVED", "A\u{0}\n"], "{cmd}");
            assert_eq!(texts(&got[&second]), ["FILE_SAVED", "edited\n"], "{cmd}");
        } else {
            // Quitting Vim decides nothing: claude is told so, and asks in its own prompt.
            for id in [first, second] {
                assert!(is_error(&got[&id]), "{cmd}: {}", got[&id]);
                assert!(
                    texts(&got[&id])[0].contains("the editor did not answer"),
                    "{cmd}: {}",
                    got[&id]
                );
            }
        }
        // Vim quit, and its bridge with it.
        gone(&lock);
        // claude writes the file itself: Vim wrote neither.
        assert_eq!(fs::read_to_string(&a).unwrap(), "one\n");
        assert_eq!(fs::read_to_string(&b).unwrap(), "bee\n");
    }
    // An `:xa` Vim refused (a changed buffer without a name) is not what quits it later (a
    // mapping that runs `:qa!` without the command line): the history's last line still says
    // `xa` then, and every pending proposal was accepted.
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\n")], "");
    let lock = wait_lock(&sb);
    let a = sb.ws.join("a.txt");
    let id = c.call_tool("openDiff", open_diff_args(&a, "A\n", "first"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("nnoremap Q <Cmd>qa!<CR>");
    vim.ex("new | call setline(1, 'unnamed')");
    vim.ex("xa");
    // (Not asked through an Ex command, which would be the history's last line.)
    std::thread::sleep(std::time::Duration::from_millis(500));
    vim.keys(&["Escape", "Q"]);
    let got = responses(&mut c, &[id]);
    assert!(
        texts(&got[&id])[0].contains("the editor did not answer"),
        "{}",
        got[&id]
    );
    gone(&lock);
}

/// What Vim reports is kept within the bridge's limits (docs/stdio.md, "Limits"), which refuses
/// a larger line and keeps what it had: before, a selection of a 5 MiB file left claude with the
/// previous one (and an error at every cursor move), and more than 1,000 listed buffers
/// (`vim $(git ls-files)`) left `getOpenEditors` with an old list.
#[test]
fn vim_selection_and_buffers_past_the_bridges_limits() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let big = sb.ws.join("big.txt");
    // 5.5 MiB of two-byte characters, so that the cut falls inside one unless it is careful.
    let line = "é".repeat(63) + "\n";
    fs::write(&big, line.repeat(5_500_000 / line.len())).unwrap();
    let mut files = Vec::new();
    for i in 0..1_005 {
        let f = sb.ws.join(format!("f{i}.txt"));
        fs::write(&f, "x\n").unwrap();
        files.push(f);
    }
    let mut vim = Vim::start(&sb, &big, "");
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let mut c = connect(&lock);
    vim.keys(&["Escape", "g", "g", "V", "G"]);
    let sel = notification(&mut c, "selection_changed", |p| {
        p["text"].as_str().is_some_and(|t| t.len() > 1_000_000)
    });
    let text = sel["text"].as_str().unwrap();
    assert!(text.len() <= 4 * 1024 * 1024, "{}", text.len());
    assert!(text.len() > 4 * 1024 * 1024 - 4, "{}", text.len());
    assert!(line.repeat(10).starts_with(&text[..1001]));
    let cur = json_of(&call(&mut c, "getCurrentSelection", json!({})));
    assert_eq!(cur["text"].as_str().map(str::len), Some(text.len()));
    assert!(vim
        .eval("execute('messages')")
        .as_str()
        .unwrap()
        .contains("cut to its first 4 MiB"));
    vim.keys(&["Escape"]);
    for f in &files {
        vim.ex(&format!("badd {}", f.display()));
    }
    vim.ex("edit f1004.txt");
    // (the lists sent while the buffers were added are shorter)
    let editors = call_until(&mut c, "getOpenEditors", json!({}), |v| {
        v["tabs"].as_array().is_some_and(|t| {
            t.iter()
                .any(|t| t["label"] == "f1004.txt" && t["isActive"] == true)
        })
    });
    assert_eq!(editors["tabs"].as_array().unwrap().len(), 1_000);
    assert!(!vim
        .eval("execute('messages')")
        .as_str()
        .unwrap()
        .contains("refused"));
}

/// Waits until the screen shows `needle`.
fn wait_screen(vim: &Vim, needle: &str) {
    let give_up = Instant::now() + WAIT;
    while !vim.screen().contains(needle) {
        assert!(Instant::now() < give_up, "no {needle:?}; {}", vim.diag());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines of the buffer of `path`.
fn lines_of(vim: &mut Vim, path: &Path) -> Value {
    vim.eval(&format!("getbufline(bufnr('{}'), 1, '$')", path.display()))
}

/// A call arriving while the user selects (Visual), has typed an operator (`d` waiting for its
/// motion) or is in the command-line window waits for them: before, the keys typed next went to
/// the file the diff opened, and `q:` failed the call (E11). A diff of a file claude's own tools
/// rewrote while its buffer was hidden shows the file as it is now, without Vim's W11 question;
/// `:saveas` in a proposal writes a copy and decides nothing; a folder Vim lists (netrw's `:e .`)
/// is not an open editor.
#[test]
fn vim_waits_for_the_users_keys_and_shows_files_as_they_are() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(
        &sb,
        &[
            ("a.txt", "1\n2\n3\n4\n5\n"),
            ("b.txt", "bee\n"),
            ("c.txt", "sea\n"),
        ],
        "",
    );
    let (a, b, cee) = (
        sb.ws.join("a.txt"),
        sb.ws.join("b.txt"),
        sb.ws.join("c.txt"),
    );
    let quiet = Duration::from_millis(500);
    let deny = |vim: &mut Vim, c: &mut Client, id: u64| {
        vim.ex("ClaudeCodeDiffDeny");
        let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
        assert_eq!(texts(&r)[0], "DIFF_REJECTED", "{r}");
        vim.wait_eval("[bufname() =~ 'a.txt$', winnr('$')]", |v| {
            v == &json!([1, 1])
        });
    };

    // Visual: the selection stays, the key typed next acts on it, then the diff opens.
    vim.keys(&["V", "j"]);
    wait_screen(&vim, "-- VISUAL LINE --");
    let id = c.call_tool("openDiff", open_diff_args(&b, "B\n", "visual"));
    std::thread::sleep(quiet);
    assert!(vim.screen().contains("-- VISUAL LINE --"), "{}", vim.diag());
    vim.keys(&["d"]);
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    assert_eq!(lines_of(&mut vim, &a), json!(["3", "4", "5"]));
    assert_eq!(lines_of(&mut vim, &b), json!(["bee"]));
    deny(&mut vim, &mut c, id);

    // An operator waiting for its motion.
    vim.keys(&["Escape", "g", "g", "d"]);
    let id = c.call_tool("openDiff", open_diff_args(&b, "B\n", "operator"));
    std::thread::sleep(quiet);
    vim.keys(&["j"]);
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    assert_eq!(lines_of(&mut vim, &a), json!(["5"]));
    assert_eq!(lines_of(&mut vim, &b), json!(["bee"]));
    deny(&mut vim, &mut c, id);

    // The command-line window: the call waits until it is closed.
    vim.keys(&["Escape", "q", ":"]);
    wait_screen(&vim, "[Command Line]");
    let id = c.call_tool("openDiff", open_diff_args(&b, "B\n", "cmdwin"));
    std::thread::sleep(quiet);
    assert!(
        c.recv_until(Duration::from_millis(100), |v| v["id"] == json!(id))
            .is_none(),
        "answered in the command-line window"
    );
    vim.ex("q");
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    deny(&mut vim, &mut c, id);

    // A hidden buffer whose file was rewritten (by claude's Bash, a formatter) since Vim read it.
    vim.ex("e c.txt");
    vim.ex("e #");
    vim.wait_eval("[bufname() =~ 'a.txt$', bufloaded(bufnr('c.txt'))]", |v| {
        v == &json!([1, 1])
    });
    write_unseen(
        &cee,
        "sea, rewritten\n",
        std::time::SystemTime::now() + Duration::from_secs(5),
    );
    let id = c.call_tool("openDiff", open_diff_args(&cee, "C\n", "rewritten"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    assert!(!vim.screen().contains("W11"), "{}", vim.diag());
    assert_eq!(lines_of(&mut vim, &cee), json!(["sea, rewritten"]));
    deny(&mut vim, &mut c, id);

    // :saveas in the proposal: a copy, the proposal still pending.
    let id = c.call_tool("openDiff", open_diff_args(&b, "B\n", "saveas"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.wait_eval("bufname()", |v| {
        v.as_str().unwrap().contains("proposed by claude")
    });
    vim.ex("saveas copy.txt");
    vim.wait_eval("filereadable('copy.txt')", |v| v == 1);
    assert_eq!(fs::read_to_string(sb.ws.join("copy.txt")).unwrap(), "B\n");
    assert!(
        c.recv_until(quiet, |v| v["id"] == json!(id)).is_none(),
        ":saveas decided"
    );
    // The proposal kept its name (its old name is no buffer of its own, reported as a file), and
    // `:w` accepts it.
    vim.wait_eval("bufname()", |v| {
        v.as_str().unwrap().ends_with("(proposed by claude #5)")
    });
    assert_eq!(
        vim.eval("len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude'}))"),
        1
    );
    vim.ex("w");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", "B\n"]);
    vim.wait_eval("[bufname() =~ 'a.txt$', winnr('$')]", |v| {
        v == &json!([1, 1])
    });

    // netrw's listing of a folder, which stays listed once left.
    fs::create_dir(sb.ws.join("sub")).unwrap();
    vim.ex("e sub/");
    vim.wait_eval("&filetype", |v| v == "netrw");
    vim.ex("e c.txt");
    let tabs = call_until(&mut c, "getOpenEditors", json!({}), |v| {
        (v["tabs"].as_array().unwrap().iter())
            .any(|t| t["label"] == "c.txt" && t["isActive"] == true)
    });
    let uris: Vec<&str> = (tabs["tabs"].as_array().unwrap().iter())
        .map(|t| t["uri"].as_str().unwrap())
        .collect();
    assert!(uris.iter().all(|u| !u.ends_with('/')), "{uris:?}");
    vim.ex("qa!");
}

/// With claude running in Vim's terminal: `:xa` quits (Vim refuses it while a terminal's job
/// runs, E948), stopping claude first, once no change of claude's is pending; with some, claude
/// (which writes what is accepted) keeps running, the edited proposal Vim wrote is accepted, and
/// the user is told to decide the rest; an `:xa` Vim would refuse anyway (a changed buffer
/// without a name) leaves claude running. A bridge that ended under a running claude is started
/// again by `:ClaudeCode`, on its port, where claude's retry finds it; `saveDocument` of a hidden
/// buffer while only claude's window is shown leaves no window behind.
#[test]
fn vim_write_all_and_quit_with_claude_running() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    let b = sb.ws.join("b.txt");
    fs::write(&a, "one\n").unwrap();
    fs::write(&b, "bee\n").unwrap();
    let pid_file = sb.root().join("claude.pid");
    let fake = fake_claude(
        &sb,
        &format!("echo $$ > '{}'\necho claude here", pid_file.display()),
    );
    let mut vim = Vim::start(
        &sb,
        &a,
        &format!(
            "let g:claude_ide_bridge_terminal_cmd = '{}'",
            fake.display()
        ),
    );
    vim.ex("ClaudeCode");
    let lock = wait_lock(&sb);
    wait_screen(&vim, "claude here");
    let claude: u32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    vim.term_ex("wincmd p");
    vim.wait_eval("&buftype", |v| v == "");
    let running_terminals = "len(filter(term_list(), {_, b -> term_getstatus(b) =~ 'running'}))";

    // The bridge killed: :ClaudeCode (which hides claude's window here) starts it again.
    let old = bridge_pid(&mut vim);
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &old.to_string()])
        .status();
    vim.wait_eval("execute('ClaudeCodeStatus')", |v| {
        v.as_str().unwrap().contains("bridge: not running")
    });
    vim.ex("ClaudeCode");
    let new = bridge_pid(&mut vim);
    assert_ne!(new, old);
    let give_up = Instant::now() + WAIT;
    while !fs::read_to_string(&lock).is_ok_and(|t| t.contains(&format!("\"pid\":{new}"))) {
        assert!(Instant::now() < give_up, "no lock file of the new bridge");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(vim.eval(running_terminals), 1);
    let mut c = connect(&lock);

    // saveDocument of a hidden buffer with changes while only claude's window is shown: saved,
    // and no window is left behind (an empty one was), the focus where it was.
    vim.ex("call setline(1, 'one, edited')");
    vim.ex("ClaudeCode");
    vim.in_terminal = true;
    vim.wait_eval("[winnr('$'), &buftype]", |v| v == &json!([2, "terminal"]));
    vim.term_ex("wincmd p | hide");
    vim.wait_eval("[winnr('$'), &buftype]", |v| v == &json!([1, "terminal"]));
    let saved = json_of(&call(
        &mut c,
        "saveDocument",
        json!({"filePath": a.to_string_lossy()}),
    ));
    assert_eq!(saved["saved"], true, "{saved}");
    assert_eq!(fs::read_to_string(&a).unwrap(), "one, edited\n");
    assert_eq!(vim.eval("[winnr('$'), &buftype]"), json!([1, "terminal"]));
    vim.term_ex("split a.txt");
    vim.in_terminal = false;
    vim.wait_eval("&buftype", |v| v == "");

    // Refused anyway: claude kept.
    vim.ex("new | call setline(1, 'unnamed')");
    vim.ex("xa");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(vim.eval(running_terminals), 1, "{}", vim.diag());
    assert!(running(claude));
    vim.ex("bwipeout!");

    let (first, second) = two_diffs(&mut vim, &mut c, &a, "x\u{0}y\n", &b);
    vim.ex("call win_gotoid(win_findbuf(bufnr('b.txt (proposed by claude'))[0])");
    vim.ex("%s/B/edited/");
    vim.wait_eval("&modified", |v| v == 1);
    vim.ex("tabfirst");
    // Changes pending: claude writes what is accepted, so it is not stopped. Vim refuses (E948)
    // after writing the edited proposal, which is accepted; the other stays, and the user is
    // told what to do.
    vim.ex("xa");
    let got = responses(&mut c, &[second]);
    assert_eq!(texts(&got[&second]), ["FILE_SAVED", "edited\n"]);
    vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("still pending")
    });
    assert!(running(claude));
    assert_eq!(vim.eval(running_terminals), 1);
    // Decided (exactly as claude sent it, a NUL included), then `:xa` stops claude and quits.
    vim.ex("ClaudeCodeDiffAccept");
    let got = responses(&mut c, &[first]);
    assert_eq!(texts(&got[&first]), ["FILE_SAVED", "x\u{0}y\n"]);
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude'}))",
        |v| v == 0,
    );
    vim.ex("xa");
    gone(&lock);
    let give_up = Instant::now() + WAIT;
    while running(claude) {
        assert!(Instant::now() < give_up, "claude left running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the buffers that keep the user's edits (KeepEdit) hold, oldest first.
fn kept_edits(vim: &mut Vim) -> Value {
    vim.eval(
        "map(filter(getbufinfo(), {_, b -> b.name =~ 'your edit of'}), {_, b -> getbufline(b.bufnr, 1, '$')})",
    )
}

/// Opens a diff of `path` and puts the cursor in its proposal.
fn diff_in_proposal(vim: &mut Vim, c: &mut Client, path: &Path, text: &str, tab: &str) -> u64 {
    let id = c.call_tool("openDiff", open_diff_args(path, text, tab));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.wait_eval("bufname()", |v| {
        v.as_str().unwrap().contains("proposed by claude")
    });
    id
}

/// A diff claude withdraws, or whose bridge dies, while the user types in its proposal (Insert
/// mode, the command line, an operator waiting for its motion) closes once they are done: before,
/// its window went at once, and the keys typed next landed in their own file (the text typed,
/// `:%s`, `dd`). What they typed meanwhile is kept with their edit.
#[test]
fn vim_closes_a_withdrawn_diff_once_the_user_is_done_typing() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\ntwo\nthree\n")], "");
    let a = sb.ws.join("a.txt");
    let mine = json!(["one", "two", "three"]);
    let proposals = "len(filter(getbufinfo(), {_, b -> b.name =~ 'proposed by claude'}))";

    // Insert mode: close_tab as the user types.
    let id = diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\nthree\n", "insert");
    vim.keys(&["G", "o"]);
    vim.text("before");
    wait_screen(&vim, "-- INSERT --");
    let close = c.call_tool("close_tab", json!({"tab_name": "insert"}));
    let got = responses(&mut c, &[id, close]);
    assert_eq!(texts(&got[&id])[0], "DIFF_REJECTED");
    std::thread::sleep(Duration::from_millis(300));
    vim.text(" after");
    vim.keys(&["Escape"]);
    vim.wait_eval(proposals, |v| v == 0);
    assert_eq!(lines_of(&mut vim, &a), mine);
    assert_eq!(
        kept_edits(&mut vim),
        json!([["one", "TWO", "three", "before after"]])
    );
    vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("your edit is kept in")
    });

    // The command line: `:%s` typed in the proposal, closeAllDiffTabs, then Enter.
    diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\nthree\n", "cmdline");
    vim.text(":%s/one/ONE/");
    wait_screen(&vim, ":%s/one/ONE/");
    let r = call(&mut c, "closeAllDiffTabs", json!({}));
    assert_eq!(texts(&r), ["CLOSED_1_DIFF_TABS"]);
    std::thread::sleep(Duration::from_millis(300));
    vim.keys(&["Enter"]);
    vim.wait_eval(proposals, |v| v == 0);
    assert_eq!(lines_of(&mut vim, &a), mine);
    assert_eq!(kept_edits(&mut vim)[1], json!(["ONE", "TWO", "three"]));

    // An operator waiting for its motion (`d`), and the bridge killed: the second `d` deletes a
    // line of the proposal, not of the file.
    diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\nthree\n", "operator");
    let pid = bridge_pid(&mut vim);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.keys(&["g", "g", "d"]);
    std::thread::sleep(Duration::from_millis(200));
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    vim.keys(&["d"]);
    vim.wait_eval(proposals, |v| v == 0);
    assert_eq!(lines_of(&mut vim, &a), mine);
    assert_eq!(vim.eval("getbufvar(bufnr('a.txt'), '&modified')"), 0);
    assert_eq!(kept_edits(&mut vim)[2], json!(["TWO", "three"]));
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("the bridge exited")
    });
    assert!(
        m.as_str()
            .unwrap()
            .contains("Your edits of the proposals are kept in"),
        "{m}"
    );
    vim.ex("qa!");
}

/// An accept the bridge refuses once Vim sent it (here the file became a link leading out of the
/// workspace after the diff opened: `diff_decision: id N: not accepted; ...`, an error line that
/// comes after the proposal is gone) keeps the user's edit in a buffer of its own, named to them:
/// before, it was lost with the proposal.
#[test]
fn vim_keeps_an_edit_whose_accept_the_bridge_refused() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\ntwo\n")], "");
    let a = sb.ws.join("a.txt");
    let outside = sb.root().join("outside.txt");
    fs::write(&outside, "outside\n").unwrap();
    let id = diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\n", "refused");
    vim.ex("1s/one/my careful edit/");
    fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink(&outside, &a).unwrap();
    vim.ex("w");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(r["result"]["isError"], true, "{r}");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("your edit is kept in")
    });
    assert!(m.as_str().unwrap().contains("not accepted"), "{m}");
    assert_eq!(kept_edits(&mut vim), json!([["my careful edit", "TWO"]]));
    assert_eq!(fs::read_to_string(&outside).unwrap(), "outside\n");
    vim.ex("qa!");
}

/// `openFile` at the largest line numbers (2^63-1) goes to the last line: before, adding one to
/// it overflowed (E475), and the call failed.
#[test]
fn vim_opens_a_file_at_a_line_past_its_end() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\n"), ("b.txt", "1\n2\n3\n")], "");
    let b = sb.ws.join("b.txt");
    let r = call(
        &mut c,
        "openFile",
        json!({"filePath": b.to_string_lossy(), "startLine": i64::MAX, "endLine": i64::MAX}),
    );
    assert_eq!(r["result"]["isError"], json!(null), "{r}");
    assert!(texts(&r)[0].starts_with("Opened file"), "{r}");
    assert_eq!(
        vim.eval("[bufname() =~ 'b.txt$', line('.')]"),
        json!([1, 3])
    );
    let m = vim.eval("execute('messages')");
    assert!(!has_vim_error(m.as_str().unwrap(), "E475"), "{m}");
    vim.ex("qa!");
}

/// `saveDocument` of a proposal's name decides nothing: before, it wrote the proposal, whose
/// write accepts it.
#[test]
fn vim_saves_no_buffer_of_a_diff_for_claude() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\n")], "");
    let a = sb.ws.join("a.txt");
    let id = diff_in_proposal(&mut vim, &mut c, &a, "ONE\n", "save");
    vim.ex("s/ONE/edited/");
    vim.wait_eval("&modified", |v| v == 1);
    let name = vim.eval("fnamemodify(bufname(), ':p')");
    let saved = json_of(&call(
        &mut c,
        "saveDocument",
        json!({"filePath": name.as_str().unwrap()}),
    ));
    assert_eq!(
        (&saved["success"], &saved["saved"]),
        (&json!(false), &json!(false)),
        "{saved}"
    );
    assert!(
        c.recv_until(Duration::from_millis(500), |v| v["id"] == json!(id))
            .is_none(),
        "saveDocument decided the diff"
    );
    assert_eq!(
        vim.eval("[bufname() =~ 'proposed by claude', &modified]"),
        json!([1, 1])
    );
    assert_eq!(fs::read_to_string(&a).unwrap(), "one\n");
    vim.ex("ClaudeCodeDiffDeny");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r)[0], "DIFF_REJECTED");
    vim.ex("qa!");
}

/// The left side of a new file's diff takes no text: typed there, it went nowhere (it is no
/// file, and goes with the diff).
#[test]
fn vim_new_files_empty_side_takes_no_text() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\n")], "");
    let new = sb.ws.join("new.txt");
    let id = c.call_tool("openDiff", open_diff_args(&new, "new\n", "new"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    assert_eq!(
        vim.eval("getbufvar(bufnr('(new file #'), '&modifiable')"),
        0
    );
    vim.ex("ClaudeCodeDiffDeny");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r)[0], "DIFF_REJECTED");
    vim.ex("qa!");
}

/// Lines from the bridge's side that Vim cannot read (a bridge of another version, a link that
/// damaged them: members missing or of another type, not JSON) are each reported as such, cut
/// short, never with a stack of Vim's errors and a prompt; and a burst of the bridge's `error`
/// lines shows one a second and then how many were not shown, not a `-- More --` prompt that
/// took the user's keys. Here a stand-in bridge writes them.
#[test]
fn vim_reads_bad_lines_from_the_bridge_calmly() {
    use std::os::unix::fs::PermissionsExt;
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let bad = [
        r#"{"type":"ready"}"#,
        r#"{"type":"ready","port":"41234"}"#,
        r#"{"type":"ready","port":41234,"host":"127.0.0.1","lockFile":null}"#,
        r#"{"type":"cancelled","id":1}"#,
        r#"{"type":"connected"}"#,
        r#"{"type":"disconnected"}"#,
        r#"{"type":"initialized","conn":1}"#,
        r#"{"type":"tool_call","id":"7","conn":1,"name":"openFile","arguments":{}}"#,
        r#"{"type":"tool_call","id":8,"conn":1}"#,
        r#"{"type":"error"}"#,
        r#"{"type":5}"#,
        r#"{"type":"status","clients":[1]}"#,
        "[1,2]",
        "not json",
    ];
    let mut script = String::from("#!/bin/sh\n");
    for l in bad {
        script += &format!("echo '{l}'\n");
    }
    script += "i=0; while [ $i -lt 300 ]; do echo \"{\\\"type\\\":\\\"error\\\",\\\"message\\\":\\\"refusal $i\\\"}\"; i=$((i+1)); done\n\
               exec cat >/dev/null\n";
    let fake = sb.root().join("fake-bridge");
    fs::write(&fake, script).unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let mut vim = Vim::start(
        &sb,
        &a,
        &format!("let g:claude_ide_bridge_cmd = '{}'", fake.display()),
    );
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("not shown")
    });
    let m = m.as_str().unwrap();
    assert!(m.contains("the bridge sent a line Vim cannot read"), "{m}");
    assert!(m.contains(r#"{"type":"ready"}"#), "{m}");
    assert!(
        !m.contains("Error detected") && !has_vim_error(m, "E716"),
        "{m}"
    );
    assert!(m.matches("refusal").count() <= 1, "{m}");
    let screen = vim.screen();
    assert!(
        !screen.contains("-- More --") && !screen.contains("Press ENTER"),
        "{screen}"
    );
    // The good `ready` line among them was read.
    assert_eq!(
        vim.eval("claude_ide_bridge#Port()"),
        41234,
        "{}",
        vim.diag()
    );
    vim.ex("qa!");
}

/// The bridge's output is split into lines by the plugin (it reads it as it comes, 'raw'): a line
/// past 64 MiB is not kept (one endless line grew Vim's memory without limit) but dropped until
/// its end, said once, and the lines after it are read; a line ends without the CR of a CRLF, as
/// Vim's 'nl' mode took it; a last line without its newline is read as the output ends.
#[test]
fn vim_drops_a_line_past_64_mib_from_the_bridge() {
    use std::os::unix::fs::PermissionsExt;
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let fake = sb.root().join("fake-bridge");
    fs::write(
        &fake,
        "#!/usr/bin/env python3\n\
         import sys\n\
         out = sys.stdout.buffer\n\
         out.write(b'{\"type\":\"ready\",\"port\":41234,\"host\":\"127.0.0.1\",\"lockFile\":null}\\n')\n\
         out.write(b'{\"type\":\"error\",\"message\":\"long')\n\
         for _ in range(65):\n    out.write(b'x' * (1 << 20))\n\
         out.write(b'\"}\\n{\"type\":\"error\",\"message\":\"after\"}\\r\\n')\n\
         out.write(b'{\"type\":\"error\",\"message\":\"last\"}')\n\
         out.flush()\n",
    )
    .unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let mut vim = Vim::start(
        &sb,
        &a,
        &format!("let g:claude_ide_bridge_cmd = '{}'", fake.display()),
    );
    vim.ex("ClaudeCodeStart");
    let give_up = Instant::now() + WAIT;
    let log = loop {
        let log = fs::read_to_string(&vim.log).unwrap_or_default();
        if log.contains("exited with status 0") || log.contains("refused a line: last") {
            break log;
        }
        assert!(Instant::now() < give_up, "{}", vim.diag());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        log.matches("!! the bridge sent a line longer than 64 MiB: Vim dropped it")
            .count(),
        1,
        "{}",
        vim.diag()
    );
    assert!(
        !log.contains(r#""message":"long"#),
        "the long line was read: {}",
        vim.diag()
    );
    assert!(
        log.contains("<- {\"type\":\"error\",\"message\":\"after\"}\n"),
        "{}",
        vim.diag()
    );
    assert!(log.contains("refused a line: after"), "{}", vim.diag());
    assert!(log.contains("refused a line: last"), "{}", vim.diag());
    let m = vim.eval("execute('messages')");
    assert!(m.as_str().unwrap().contains("longer than 64 MiB"), "{m}");
    vim.ex("qa!");
}

/// NUL bytes, which Vim's json_decode() drops: a proposal holding some shows them (as Vim shows a
/// NUL, a NL in the line's text), and edited elsewhere it is accepted with them byte for byte;
/// a `\u0000` that is a backslash's text is left as it is. A proposal Vim cannot read them in
/// exactly (its text holds the noncharacter they are read as) is shown read-only, and accepted
/// as claude sent it.
#[test]
fn vim_keeps_nul_bytes_of_a_proposal() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "x\0y\nplain\n")], "");
    let a = sb.ws.join("a.txt");
    let proposal = "A\0B\0\0\nplain\n\\u0000 \\\\\0\nz\0\n";
    let id = diff_in_proposal(&mut vim, &mut c, &a, proposal, "nul");
    assert_eq!(
        vim.eval("getline(1, '$')"),
        json!(["A\nB\n\n", "plain", "\\u0000 \\\\\n", "z\n"])
    );
    assert_eq!(lines_of(&mut vim, &a), json!(["x\ny", "plain"]));
    vim.ex("2s/plain/PLAIN/");
    vim.ex("w");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(
        texts(&r),
        ["FILE_SAVED", "A\0B\0\0\nPLAIN\n\\u0000 \\\\\0\nz\0\n"]
    );

    // With the noncharacter U+FDD0 in it too: read-only, accepted as claude sent it.
    let odd = "a\0b\u{fdd0}\n";
    let id = diff_in_proposal(&mut vim, &mut c, &a, odd, "odd");
    assert_eq!(vim.eval("&modifiable"), 0);
    vim.ex("w");
    let r = c.recv_until(WAIT, |v| v["id"] == json!(id)).unwrap();
    assert_eq!(texts(&r), ["FILE_SAVED", odd]);
    vim.ex("qa!");
}

/// The answer to call `id` within `within`, if any.
fn answer_within(c: &mut Client, id: u64, within: Duration) -> Option<Value> {
    c.recv_until(within, |v| v["id"] == json!(id))
}

/// Writes Vim makes by itself do not accept an edited proposal: `:q` with 'autowriteall' (the
/// help says `:q` rejects: it refuses, E37, as without the option), `:wa`, and 'autowrite'
/// before `:!` typed in another window. Each accepted the half-done edit before (claude wrote
/// it). `:w` typed in the proposal still accepts, with the edit.
#[test]
fn vim_writes_vim_makes_by_itself_decide_nothing() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let extra = "set autowriteall";
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\ntwo\n")], extra);
    let a = sb.ws.join("a.txt");
    let id = diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\n", "auto");
    vim.ex("%s/TWO/half-done edit/");
    vim.wait_eval("&modified", |v| v == 1);
    let quiet = Duration::from_millis(1500);
    vim.ex("q");
    assert_eq!(answer_within(&mut c, id, quiet), None, ":q decided");
    vim.ex("wincmd p");
    vim.ex("wa");
    assert_eq!(answer_within(&mut c, id, quiet), None, ":wa decided");
    vim.ex("set noautowriteall autowrite");
    vim.ex("silent !true");
    assert_eq!(answer_within(&mut c, id, quiet), None, ":!true decided");
    let m = vim.eval("execute('messages')");
    assert!(
        m.as_str().unwrap().contains("is not accepted by :wa"),
        "{m}"
    );
    assert_eq!(proposal_count(&mut vim), 1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("w");
    let r = answer_within(&mut c, id, WAIT).expect("the accept");
    assert_eq!(texts(&r), ["FILE_SAVED", "one\nhalf-done edit\n"]);
    vim.ex("qa!");
}

/// `:hide` in an edited proposal wipes it ('bufhidden' wipe): the diff is rejected, and the
/// edit kept in a buffer of its own, as for a diff closed without it (it was lost, unsaid). A
/// diff that arrives while a terminal in a popup window has the focus (fzf.vim's and floaterm's
/// layouts) waits for it to close, as for Insert mode: it failed at once (E863), and claude was
/// told the editor could not show it.
#[test]
fn vim_hide_keeps_the_edit_and_a_popup_terminal_holds_a_diff() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\ntwo\n")], "");
    let a = sb.ws.join("a.txt");
    let id = diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\n", "hide");
    vim.ex("%s/TWO/mine/");
    vim.ex("hide");
    let r = answer_within(&mut c, id, WAIT).expect("an answer");
    assert_eq!(texts(&r)[0], "DIFF_REJECTED");
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'your edit of'}))",
        |v| v == 1,
    );
    assert_eq!(kept_edits(&mut vim), json!([["one", "mine"]]));
    vim.ex("call popup_create(term_start(['sh', '-c', 'sleep 2'], \
         {'hidden': 1, 'term_finish': 'close'}), {'minwidth': 40, 'minheight': 5})");
    // (Nothing is evaluated while the popup has the keys.)
    std::thread::sleep(Duration::from_millis(500));
    let id = c.call_tool("openDiff", open_diff_args(&a, "one\nTWO\n", "popup"));
    assert_eq!(answer_within(&mut c, id, Duration::from_secs(1)), None);
    // The popup goes (its command ends): the diff opens.
    std::thread::sleep(Duration::from_millis(2000));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("qa!");
}

/// Line endings: with 'fileformats' without dos (CRs shown), a CRLF file and claude's CRLF
/// proposal differ only where the text does (every line showed as changed); a CRLF file's endings
/// made LF are said (no line shows them). openFile's selection is marked, not left in Visual
/// mode (where the keys typed next for claude acted on it, and the next diff waited, unseen,
/// for an Escape): `gv` selects it.
#[test]
fn vim_line_endings_in_a_diff_and_a_selection_claude_shows() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let files = [
        ("a.txt", "one\r\ntwo\r\nthree\r\n"),
        ("b.txt", "bee\nsea\n"),
    ];
    let (mut vim, mut c) = vim_with_claude(&sb, &files, "set fileformats=unix");
    let (a, b) = (sb.ws.join("a.txt"), sb.ws.join("b.txt"));
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&a, "one\r\nTWO\r\nthree\r\n", "crlf"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let highlight = |vim: &mut Vim, line: u32| {
        vim.eval(&format!(
            "win_execute(bufwinid(bufnr('a.txt')), 'let g:h = diff_hlID({line}, 1)') == '' ? g:h : -1"
        ))
    };
    assert_eq!(highlight(&mut vim, 1), 0, "line 1 shows as changed");
    assert_ne!(highlight(&mut vim, 2), 0, "line 2 shows as the same");
    vim.ex("ClaudeCodeDiffAccept");
    let r = answer_within(&mut c, id, WAIT).expect("the accept");
    assert_eq!(texts(&r), ["FILE_SAVED", "one\r\nTWO\r\nthree\r\n"]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    vim.ex("set fileformats=unix,dos");
    vim.ex("bwipeout! a.txt");
    let id = c.call_tool("openDiff", open_diff_args(&a, "one\nTWO\nthree\n", "lf"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let m = vim.eval("execute('messages')");
    assert!(
        m.as_str()
            .unwrap()
            .contains("(its line breaks are LF, the file's CRLF)"),
        "{m}"
    );
    vim.ex("ClaudeCodeDiffDeny");
    answer_within(&mut c, id, WAIT).expect("the reject");
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    // 'fileformat' set in the proposal (a change of no line) is what is accepted.
    let id = diff_in_proposal(&mut vim, &mut c, &b, "bee\nSEA\n", "ff");
    vim.ex("set fileformat=dos");
    vim.ex("w");
    let r = answer_within(&mut c, id, WAIT).expect("the accept");
    assert_eq!(texts(&r), ["FILE_SAVED", "bee\r\nSEA\r\n"]);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);

    let open = json!({"filePath": b.to_string_lossy(), "startText": "bee", "endText": "sea"});
    let r = call(&mut c, "openFile", open);
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        vim.eval("[mode(), line('.'), line(\"'<\"), col(\"'<\"), line(\"'>\"), col(\"'>\")]"),
        json!(["n", 1, 1, 1, 2, 3])
    );
    let id = c.call_tool("openDiff", open_diff_args(&a, "one\r\nTHREE\r\n", "after"));
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("ClaudeCodeDiffDeny");
    answer_within(&mut c, id, WAIT).expect("the reject");
    vim.ex("qa!");
}

/// An accept given while the bridge is stopping (`:ClaudeCodeStop`, a link still closing) cannot
/// be sent: the user's edit is kept in a buffer of its own, and Vim says so (the proposal was
/// wiped as if it had been sent, the edit with it).
#[test]
fn vim_an_accept_while_the_bridge_stops_keeps_the_edit() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\ntwo\n")], "");
    let a = sb.ws.join("a.txt");
    let id = diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\n", "stop");
    vim.ex("%s/TWO/my edit/");
    vim.ex("ClaudeCodeStop | ClaudeCodeDiffAccept");
    let r = answer_within(&mut c, id, WAIT).expect("an answer");
    assert!(texts(&r)[0].contains("did not answer"), "{r}");
    vim.wait_eval(
        "len(filter(getbufinfo(), {_, b -> b.name =~ 'your edit of'}))",
        |v| v == 1,
    );
    assert_eq!(kept_edits(&mut vim), json!([["one", "my edit"]]));
    let m = vim.eval("execute('messages')");
    assert!(m.as_str().unwrap().contains("bridge is stopping"), "{m}");
    vim.ex("qa!");
}

/// Writes the user types are accepts while Vim writes nothing by itself ('autowrite' and
/// 'autowriteall' off): `:%w` (a range) and a user command (`:W`, `command W w`), which were
/// refused as 'autowrite's. And an edited LF proposal goes back LF where 'fileformats' puts dos
/// first (Windows' default), as the proposal's buffer reads it: it went back CRLF.
#[test]
fn vim_writes_the_user_types_accept_with_the_proposals_line_breaks() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let extra = "set fileformats=dos,unix\ncommand! W w";
    let (mut vim, mut c) = vim_with_claude(&sb, &[("a.txt", "one\ntwo\n")], extra);
    let a = sb.ws.join("a.txt");
    for (n, write) in ["%w", "W"].into_iter().enumerate() {
        let id = diff_in_proposal(&mut vim, &mut c, &a, "one\nTWO\n", &format!("t{n}"));
        vim.ex("%s/TWO/mine/");
        vim.ex(write);
        let r = answer_within(&mut c, id, WAIT).expect("the accept");
        assert_eq!(texts(&r), ["FILE_SAVED", "one\nmine\n"], "{write}");
        vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    }
    vim.ex("qa!");
}
