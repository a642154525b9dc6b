//! The Vim plugin used remotely (`g:claude_ide_bridge_remote`, issue 30): the bridge runs on the
//! other side of a real OpenSSH link (Debian's openssh-server, started by the test on a free port of
//! 127.0.0.1 with a throwaway host key and user key, its own sshd_config, as a child), reached by
//! the real `ssh` client, with the workspace at another path there: sshd runs in a mount namespace
//! of its own (`unshare -m`) where the editor's folder is bind-mounted on another path and the
//! editor's own path is an empty folder. Both paths have spaces and non-ASCII letters. claude's
//! side is the test client, connected to the remote bridge with the lock file it writes.
//!
//! Covered: a selection and an at-mention reach claude with the bridge-side path; an openDiff from
//! claude opens on the editor-side file, `:w` answers FILE_SAVED with the user's edit, the file is
//! written; `:ClaudeCode` runs claude there (a stand-in that shows its terminal, folder and port);
//! the transport killed with a diff pending (closed in Vim, the user's edit kept, claude answered,
//! the file unchanged, `:ClaudeCodeStatus` says so, `:ClaudeCodeStart` connects again); a remote
//! without the bridge, one too old for it, and a transport that dies in the middle of a line.

// Unix only: these tests drive the built program with Unix tools (signals, mkfifo, a shell,
// Python, Vim, tmux, real language servers); on Windows the program is type-checked and its
// unit tests are the check (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::vim::*;
use common::*;
use serde_json::{json, Value};

const SSHD: &str = "/usr/sbin/sshd";

/// A real sshd on 127.0.0.1, in a mount namespace where `remote` shows the files of `editor`.
struct Sshd {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Sshd {
    fn start(sb: &Sandbox, editor: &Path, remote: &Path) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: apt-get install openssh-server (scripts/test-all.sh does)"
        );
        let dir = sb.root().join("ssh");
        fs::create_dir_all(&dir).unwrap();
        for key in ["host_key", "user_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
                .arg(dir.join(key))
                .output()
                .expect("ssh-keygen runs (openssh-client)");
            assert!(out.status.success(), "ssh-keygen: {out:?}");
        }
        fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
        // sshd refuses to start without its privilege separation directory (a Debian package
        // makes it at boot, through systemd, which a container does not run).
        fs::create_dir_all("/run/sshd").expect("/run/sshd (sshd runs as root here)");
        let remote_home = sb.root().join("remote home");
        fs::create_dir_all(&remote_home).unwrap();
        let mut last = String::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let config = dir.join("sshd_config");
            // The sessions get the sandbox's lock file folder, and a HOME of their own (no
            // profile of the machine's user adds folders to PATH: a bridge installed there).
            fs::write(
                &config,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                     AuthorizedKeysFile {d}/authorized_keys\nPidFile none\nStrictModes no\n\
                     UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     PermitRootLogin prohibit-password\nLogLevel ERROR\n\
                     SetEnv CLAUDE_CONFIG_DIR=\"{config}\" HOME=\"{home}\"\n",
                    d = dir.display(),
                    config = sb.config.display(),
                    home = remote_home.display(),
                ),
            )
            .unwrap();
            let pubkey = fs::read_to_string(dir.join("host_key.pub")).unwrap();
            let mut words = pubkey.split_whitespace();
            fs::write(
                dir.join("known_hosts"),
                format!(
                    "[127.0.0.1]:{port} {} {}\n",
                    words.next().unwrap(),
                    words.next().unwrap()
                ),
            )
            .unwrap();
            let log = fs::File::create(dir.join("sshd.log")).unwrap();
            // In the new namespace: `remote` shows the editor's files, the editor's path is
            // empty; then sshd, in the foreground (-D), logging to stderr (-e).
            let child = Command::new("unshare")
                .args(["-m", "--propagation", "private", "sh", "-c"])
                .arg(
                    "mount --bind \"$1\" \"$2\" && mount -t tmpfs tmpfs \"$1\" \
                     && exec \"$3\" -D -e -f \"$4\"",
                )
                .arg("sh")
                .args([editor, remote, Path::new(SSHD), &config])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("unshare runs");
            let mut sshd = Sshd {
                child,
                dir: dir.clone(),
                port,
            };
            let give_up = Instant::now() + WAIT;
            loop {
                if let Ok(Some(status)) = sshd.child.try_wait() {
                    last = format!(
                        "sshd exited with {status}: {}",
                        fs::read_to_string(sshd.dir.join("sshd.log")).unwrap_or_default()
                    );
                    break;
                }
                let out = sshd.ssh().arg("true").output().unwrap();
                if out.status.success() {
                    return sshd;
                }
                last = String::from_utf8_lossy(&out.stderr).into_owned();
                assert!(
                    Instant::now() < give_up,
                    "ssh to the test's sshd fails: {last}; sshd: {}",
                    fs::read_to_string(sshd.dir.join("sshd.log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            // the port was taken meanwhile: another one
        }
        panic!("sshd could not start: {last}");
    }

    /// The client's words, as a Vim list item each: ssh with this test's keys and nothing else.
    fn transport(&self) -> Vec<String> {
        let d = self.dir.display();
        [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            &format!("{d}/user_key"),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            &format!("UserKnownHostsFile={d}/known_hosts"),
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-p",
            &self.port.to_string(),
            "root@127.0.0.1",
        ]
        .map(String::from)
        .to_vec()
    }

    fn ssh(&self) -> Command {
        let t = self.transport();
        let mut c = Command::new(&t[0]);
        c.args(&t[1..]).stdin(Stdio::null());
        c
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Vim literal of a string (single quotes doubled).
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `:ClaudeCodeStart` with the remote setting's transport `sh -c SCRIPT`, a stand-in for the
/// link and the bridge over there.
fn start_through_sh(vim: &mut Vim, script: &str) {
    vim.ex(&format!(
        "let g:claude_ide_bridge_remote = {{'transport': ['sh', '-c', {}, 'x']}}",
        lit(script)
    ));
    vim.ex("ClaudeCodeStart");
}

/// The remote setting: the transport, the path map `editor` -> `remote` and more `extra` items.
fn remote_setting(sshd: &Sshd, editor: &Path, remote: &Path, extra: &str) -> String {
    let transport: Vec<String> = sshd.transport().iter().map(|w| lit(w)).collect();
    format!(
        "let g:claude_ide_bridge_workspace = {ed}\n\
         let g:claude_ide_bridge_remote = {{'transport': [{t}], 'path_map': {{{ed}: {rem}}}{extra}}}",
        t = transport.join(", "),
        ed = lit(&editor.to_string_lossy()),
        rem = lit(&remote.to_string_lossy()),
    )
}

/// The remote setting's items for this bridge and the stand-in claude `fake` over there.
fn over_there(fake: &Path) -> String {
    format!(
        ", 'bridge': {}, 'claude': {}",
        lit(BIN),
        lit(&fake.to_string_lossy())
    )
}

/// The folders of a test: the editor's (with the files) and the remote side's path of it.
fn folders(sb: &Sandbox) -> (PathBuf, PathBuf) {
    let editor = sb.root().join("editor's wörk space");
    let remote = sb.root().join("remote ẞ ws");
    fs::create_dir_all(&editor).unwrap();
    fs::create_dir_all(&remote).unwrap();
    (editor, remote)
}

/// A test over ssh: the sandbox, the sshd that shows the editor's folder over there (dropped
/// before the sandbox), that folder and its remote path, and its `a.txt` ("one").
fn over_ssh() -> (Sandbox, Sshd, PathBuf, PathBuf, PathBuf) {
    let sb = Sandbox::new();
    let (editor, remote) = folders(&sb);
    let a = editor.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let sshd = Sshd::start(&sb, &editor, &remote);
    (sb, sshd, editor, remote, a)
}

fn messages(vim: &mut Vim) -> String {
    vim.eval("execute('messages')")
        .as_str()
        .unwrap()
        .to_string()
}

fn status(vim: &mut Vim) -> String {
    vim.eval("execute('ClaudeCodeStatus')")
        .as_str()
        .unwrap()
        .to_string()
}

/// Sends `signal` to the ssh client Vim runs as the transport (its pid from :ClaudeCodeStatus).
fn signal_ssh(vim: &mut Vim, signal: &str) {
    let st = status(vim);
    let pid: i32 = st
        .split("pid ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {st}"));
    assert!(st.contains("(the transport)"), "{st}");
    assert!(
        fs::read_to_string(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with("ssh\0")),
        "pid {pid} is not the ssh client"
    );
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {pid}");
}

fn wait_screen(vim: &Vim, needle: &str) {
    let give_up = Instant::now() + WAIT;
    while !vim.screen().contains(needle) {
        assert!(
            Instant::now() < give_up,
            "no {needle:?} on the screen; {}",
            vim.diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn vim_remote_over_ssh() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (editor, remote) = folders(&sb);
    let a = editor.join("a.txt");
    fs::write(&a, "one\ntwo three\nfour\n").unwrap();
    let notes_name = "nötes ü.txt";
    let notes = editor.join(notes_name);
    fs::write(&notes, "alpha\nbeta\n").unwrap();
    // claude on the remote side: a stand-in that shows its terminal, folder, port and arguments.
    let fake = fake_claude(
        &sb,
        "echo \"TTY=$(tty)\"\necho \"PWD=$(pwd)\"\n\
         printf 'PORT=%s IDE=%s/%s HOST=%s ARGS=' \"$CLAUDE_CODE_SSE_PORT\" \"$ENABLE_IDE_INTEGRATION\" \"$CLAUDE_CODE_AUTO_CONNECT_IDE\" \"${CLAUDE_CODE_IDE_HOST_OVERRIDE-unset}\"\n\
         for a in \"$@\"; do printf '[%s]' \"$a\"; done\necho",
    );
    let sshd = Sshd::start(&sb, &editor, &remote);
    // The namespace is real: on the remote side the editor's path is empty, the remote one has
    // the files; here the other way round.
    let out = sshd
        .ssh()
        .arg(format!(
            "ls {} | wc -l; cat {}",
            shell_word(&editor),
            shell_word(&remote.join("a.txt"))
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0\none\ntwo three\nfour\n"
    );
    assert_eq!(fs::read_dir(&remote).unwrap().count(), 0);
    let vimrc = remote_setting(&sshd, &editor, &remote, &over_there(&fake))
        + "\nlet g:claude_ide_bridge_split_width_percentage = 0.6";
    let mut vim = Vim::start(&sb, &a, &vimrc);

    // :ClaudeCodeStart: the bridge starts over there, its lock file names the remote folder.
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let lockv: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(lockv["workspaceFolders"], json!([remote.to_string_lossy()]));
    let mut c = connect(&lock);
    let ra = remote.join("a.txt").to_string_lossy().to_string();

    // A selection and an at-mention arrive with the bridge-side path.
    vim.keys(&["Escape", "j", "w", "v", "e"]);
    let sel = notification(&mut c, "selection_changed", |p| p["text"] == "three");
    assert_eq!(sel["filePath"], json!(ra));
    assert_eq!(sel["selection"], range(1, 4, 1, 9));
    vim.keys(&["Escape"]);
    vim.ex("2,3ClaudeCodeSend");
    let m = notification(&mut c, "at_mentioned", |_| true);
    assert_eq!(m["filePath"], json!(ra));
    assert_eq!((&m["lineStart"], &m["lineEnd"]), (&json!(1), &json!(2)));

    // An openDiff of the remote file opens in Vim on the editor's file; :w sends the user's edit.
    let r_notes = remote.join(notes_name);
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&r_notes, "alpha\nBETA\n", "tab notes"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    let shown =
        vim.eval("map(filter(getbufinfo(), {_, b -> !empty(b.windows)}), {_, b -> b.name})");
    let names: Vec<&str> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(names.contains(&notes.to_str().unwrap()), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(notes.to_str().unwrap()) && n.contains("proposed by claude")),
        "{names:?}"
    );
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("$put ='gamma'");
    vim.ex("w");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer");
    assert_eq!(texts(&r), ["FILE_SAVED", "alpha\nBETA\ngamma\n"]);
    // claude writes the file over there; Vim shows it.
    let out = sshd
        .ssh()
        .arg(format!(
            "printf 'alpha\\nBETA\\ngamma\\n' > {}",
            shell_word(&r_notes)
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(&notes).unwrap(), "alpha\nBETA\ngamma\n");
    vim.wait_eval(
        &format!("getbufline(bufnr({}), 1, '$')", lit(notes_name)),
        |v| v == &json!(["alpha", "BETA", "gamma"]),
    );

    // Vim's answers name files as claude does (the remote path), and so do the open editors.
    let r = call(
        &mut c,
        "openFile",
        json!({"filePath": r_notes, "makeFrontmost": true}),
    );
    assert_eq!(
        texts(&r),
        [format!("Opened file: {}", r_notes.display())],
        "{r}"
    );
    let r = json_of(&call(&mut c, "saveDocument", json!({"filePath": r_notes})));
    assert_eq!(r["filePath"], json!(r_notes), "{r}");
    let editors = json_of(&call(&mut c, "getOpenEditors", json!({})));
    let tabs = editors["tabs"].as_array().unwrap();
    let tab = tabs
        .iter()
        .find(|t| t["label"] == notes_name)
        .unwrap_or_else(|| panic!("{editors}"));
    assert_eq!(tab["fileName"], json!(r_notes), "{editors}");

    // :ClaudeCode runs claude over there, in a terminal, in the remote folder, with the port.
    // (Its arguments as Vim splits a command: double quotes group words.)
    vim.ex(r#"ClaudeCode --resume "be brief" x\y "say \"hi\"" "#);
    let port = lock.file_stem().unwrap().to_string_lossy().to_string();
    wait_screen(
        &vim,
        &format!(
            r#"PORT={port} IDE=true/true HOST=unset ARGS=[--resume][be brief][x\y][say "hi"]"#
        ),
    );
    let screen = vim.screen();
    assert!(screen.contains("TTY=/dev/pts/"), "no terminal: {screen}");
    assert!(
        screen.contains(&format!("PWD={}", remote.display())),
        "{screen}"
    );
    vim.term_ex("wincmd p");
    vim.wait_eval("&buftype", |v| v == "");

    // A file outside the path map: nothing of it is sent (the bridge would refuse each cursor
    // move with an error line), and an at-mention of it is refused in Vim, saying why.
    let outside = sb.root().join("outside.txt");
    fs::write(&outside, "out\nside\n").unwrap();
    vim.ex(&format!("edit {}", outside.display()));
    vim.keys(&["j", "V"]);
    vim.ex("ClaudeCodeSend");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("outside the folders")
    });
    assert!(!m.as_str().unwrap().contains("refused a line"), "{m}");
    let editors = json_of(&call(&mut c, "getOpenEditors", json!({})));
    assert!(!editors.to_string().contains("outside.txt"), "{editors}");
    let log = fs::read_to_string(&vim.log).unwrap();
    assert!(
        !log.lines()
            .any(|l| l.contains(" -> ") && l.contains("outside.txt")),
        "sent: {log}"
    );
    vim.ex("buffer a.txt");

    // The link drops with a diff pending that the user edited: Vim closes it and keeps the edit,
    // claude gets an answer (not FILE_SAVED), the file is unchanged, and Vim says what happened.
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&remote.join("a.txt"), "ONE\n", "tab drop"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("$put ='mine'");
    signal_ssh(&mut vim, "KILL");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer for the diff");
    assert_ne!(
        texts(&r).first().map(String::as_str),
        Some("FILE_SAVED"),
        "{r}"
    );
    assert!(
        c.closed_within(WAIT),
        "the remote bridge kept the connection"
    );
    gone(&lock);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    let kept = vim.wait_eval(
        "map(filter(getbufinfo({'buflisted': 1}), {_, b -> b.name =~ 'your edit'}), {_, b -> getbufline(b.bufnr, 1, '$')})",
        |v| v.as_array().is_some_and(|a| !a.is_empty()),
    );
    assert_eq!(kept, json!([["ONE", "mine"]]));
    assert_eq!(fs::read_to_string(&a).unwrap(), "one\ntwo three\nfour\n");
    let m = messages(&mut vim);
    assert!(m.contains("dropped"), "{m}");
    assert!(!has_vim_error(&m, "E63"), "a raw write error: {m}");
    assert!(m.contains("1 pending diff(s) closed unanswered"), "{m}");
    assert!(m.contains("your edit of claude's proposal #"), "{m}");
    let st = status(&mut vim);
    assert!(st.contains("bridge: not running"), "{st}");
    assert!(st.contains("dropped"), "{st}");

    // :ClaudeCodeStart connects again: a new remote bridge, and the selection reaches claude.
    vim.ex("ClaudeCodeStart");
    let lock2 = wait_lock(&sb);
    let mut c = connect(&lock2);
    vim.ex("buffer a.txt");
    vim.keys(&["g", "g", "V"]);
    let sel = notification(&mut c, "selection_changed", |p| p["text"] == "one");
    assert_eq!(sel["filePath"], json!(ra));
    vim.keys(&["Escape"]);
    // (the edit kept above has no file, and claude's terminal runs: :xa would not quit)
    vim.ex("execute 'bwipeout!' bufnr('your edit')");
    vim.ex("for b in term_list() | execute 'bwipeout!' b | endfor");
    vim.wait_eval("term_list()", |v| v == &json!([]));
    // :xa with an edited diff pending: the accept, with the edit, reaches claude before the
    // transport ends. Vim signalled ssh as it exited, and ssh dropped what it had not forwarded
    // yet: claude got "the editor did not answer" in 2 to 4 quits of 20, the edit lost.
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&r_notes, "alpha\nDELTA\n", "tab xa"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("$put ='mine'");
    vim.ex("xa");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer for the diff");
    assert_eq!(texts(&r), ["FILE_SAVED", "alpha\nDELTA\nmine\n"], "{r}");
    assert!(
        c.closed_within(WAIT),
        "the remote bridge kept the connection"
    );
    gone(&lock2);
}

/// The plugin's path map, looked at without a transport: a root folder (`/`, `C:\`) as a key or as
/// its remote folder joins a path with one separator (`/host/home/me`, not `/hosthome/me`), in the
/// workspace given to the bridge and in its `--path-map`; with `wsl`, only a drive's paths are
/// sent (the bridge refuses any other, and a cursor moving in such a file would be refused at
/// every move).
#[test]
fn vim_remote_path_map_roots_and_wsl() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let mut vim = Vim::start(
        &sb,
        &a,
        "let g:claude_ide_bridge_remote = {'transport': ['docker', 'exec', '-i', 'box'], \
         'path_map': {'/': '/host'}}",
    );
    let workspace = |vim: &mut Vim, folder: &str| {
        vim.eval(&format!("claude_ide_bridge#remote#Workspace(['{folder}'])"))
    };
    let command = |vim: &mut Vim| vim.eval("claude_ide_bridge#remote#BridgeCommand([])");
    assert_eq!(
        workspace(&mut vim, "/home/me/app"),
        json!(["/host/home/me/app"])
    );
    assert_eq!(workspace(&mut vim, "/"), json!(["/host"]));
    assert!(
        command(&mut vim).to_string().contains("\"/=/host\""),
        "{}",
        command(&mut vim)
    );
    vim.ex("let g:claude_ide_bridge_remote.path_map = {'/home/me': '/'}");
    assert_eq!(workspace(&mut vim, "/home/me/app"), json!(["/app"]));
    assert_eq!(workspace(&mut vim, "/home/me"), json!(["/"]));
    assert!(
        command(&mut vim).to_string().contains("\"/home/me=/\""),
        "{}",
        command(&mut vim)
    );
    vim.ex("let g:claude_ide_bridge_remote.path_map = 'wsl'");
    let reaches = |vim: &mut Vim, path: &str| {
        vim.eval(&format!("claude_ide_bridge#remote#Reaches('{path}')"))
    };
    assert_eq!(reaches(&mut vim, r"C:\Users\me\a.rs"), json!(true));
    assert_eq!(reaches(&mut vim, "d:/src/a.rs"), json!(true));
    assert_eq!(
        reaches(&mut vim, r"\\wsl.localhost\Debian\home\a.rs"),
        json!(false)
    );
    assert_eq!(reaches(&mut vim, "/home/me/a.rs"), json!(false));
}

/// Each word the plugin sends through ssh (or wsl.exe) reaches the login shell over there as
/// that one word, whatever it holds, for every shell ssh may hand the line to: sh, dash, bash,
/// zsh, fish. A folder named `a;touch x;echo \` ran `touch x` over fish, which reads `\'` and
/// `\\` inside single quotes as escapes (the word's quote closed late, the next word's text
/// ran); any `\` came out changed there.
#[test]
fn vim_remote_words_reach_every_shell_as_they_are() {
    let sb = Sandbox::new();
    let words = [
        "plain",
        "a b",
        "it's",
        "a\\",
        "a\\'b",
        "\\\\",
        "'",
        "''",
        "",
        "$HOME",
        "`id`",
        "$(id)",
        "a;touch x;echo \\",
        "new\nline",
        "~",
        "~/x",
        "-n",
        "ü ẞ",
        "a\"b",
        "{a,b}",
        "*",
        "!x",
        "%s",
        "a\\nb",
        "\\'",
        "'\\",
    ];
    let input = sb.root().join("words.json");
    fs::write(&input, serde_json::to_string(&words).unwrap()).unwrap();
    let out = sb.root().join("quoted.json");
    run_vim_script(
        &sb,
        Path::new(PLUGIN),
        &format!(
            "let words = json_decode(join(readfile('{input}'), \"\\n\"))\n\
             call writefile([json_encode(map(words, {{_, w -> claude_ide_bridge#remote#ShellWord(w)}}))], '{out}')",
            input = input.display(),
            out = out.display(),
        ),
    );
    let quoted: Vec<String> = serde_json::from_str(&fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(quoted.len(), words.len());
    let here = sb.root().join("shell");
    fs::create_dir(&here).unwrap();
    for shell in ["sh", "dash", "bash", "zsh", "fish"] {
        for (word, q) in words.iter().zip(&quoted) {
            let got = Command::new(shell)
                .arg("-c")
                .arg(format!("printf %s {q}"))
                .current_dir(&here)
                .env("HOME", &sb.home)
                .output()
                .unwrap_or_else(|e| panic!("{shell}: {e} (scripts/test-all.sh installs it)"));
            assert_eq!(
                String::from_utf8_lossy(&got.stdout),
                *word,
                "{shell}: {word:?} sent as {q}: {}",
                String::from_utf8_lossy(&got.stderr)
            );
        }
        assert_eq!(
            fs::read_dir(&here).unwrap().count(),
            0,
            "{shell} ran something"
        );
    }
}

/// A bridge over ssh started by Vim, its keepalive 1 s, and a client connected to it: the
/// sandbox, sshd, the remote folder, the editor's `a.txt`, Vim, the lock file, the client.
fn started_over_ssh_keepalive_1s() -> (Sandbox, Sshd, PathBuf, PathBuf, Vim, PathBuf, Client) {
    let (sb, sshd, editor, remote, a) = over_ssh();
    let extra = format!(", 'bridge': {}, 'keepalive': 1", lit(BIN));
    let vim = Vim::start(&sb, &a, &remote_setting(&sshd, &editor, &remote, &extra));
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let c = connect(&lock);
    (sb, sshd, remote, a, vim, lock, c)
}

/// A link that goes silent (the ssh client stopped with SIGSTOP: its TCP connection stays up,
/// as over a network gone or a laptop asleep, and nothing crosses) with a diff pending. While the
/// link works, Vim's keepalive `status` lines are answered and nothing happens; the bridge over
/// there was told to stop after 20 keepalives without a line (`--editor-timeout`). Once silent,
/// Vim drops the link after four keepalives without an answer (it kills the transport), says why,
/// and the bridge over there, its stdin ended, answers claude for the diff (not `FILE_SAVED`)
/// and removes its lock file.
#[test]
fn vim_remote_drops_a_link_gone_silent() {
    if tools_missing() {
        return;
    }
    let (_sb, _sshd, remote, a, mut vim, lock, mut c) = started_over_ssh_keepalive_1s();
    let lockv: Value = serde_json::from_str(&fs::read_to_string(&lock).unwrap()).unwrap();
    let bridge = lockv["pid"].as_u64().unwrap();
    let cmdline = fs::read(format!("/proc/{bridge}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--editor-timeout\x0020\x00"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    // The link works: the keepalives are answered (3 s, three of them), and nothing is dropped.
    std::thread::sleep(Duration::from_secs(3));
    let log = fs::read_to_string(&vim.log).unwrap();
    let asked = log
        .lines()
        .filter(|l| l.contains(r#"-> {"type":"status"}"#))
        .count();
    let answered = log
        .lines()
        .filter(|l| l.contains(r#"<- {"type":"status""#))
        .count();
    assert!(asked >= 2 && answered >= 2, "{log}");
    assert!(
        !messages(&mut vim).contains("silent"),
        "{}",
        messages(&mut vim)
    );
    assert!(lock.exists(), "the bridge over there stopped");

    let id = c.call_tool(
        "openDiff",
        open_diff_args(&remote.join("a.txt"), "ONE\n", "tab silent"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    signal_ssh(&mut vim, "STOP");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer for the diff");
    assert!(is_error(&r), "{r}");
    assert!(texts(&r)[0].contains("the editor did not answer"), "{r}");
    gone(&lock);
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    let m = messages(&mut vim);
    assert!(
        m.contains("went silent: no answer for 4 s, so Vim dropped it."),
        "{m}"
    );
    assert!(m.contains("1 pending diff(s) closed unanswered"), "{m}");
    assert!(status(&mut vim).contains("went silent"));
    assert_eq!(fs::read_to_string(&a).unwrap(), "one\n");
    // Answered in claude's own prompt a while later: claude writes the file, and the buffer
    // shows it (it kept the old text, which an edit would then have written over claude's).
    std::thread::sleep(Duration::from_secs(2));
    fs::write(&a, "ONE\n").unwrap();
    vim.wait_eval("getbufline(bufnr('a.txt'), 1, '$')", |v| {
        v == &json!(["ONE"])
    });
}

/// An accept of an edited proposal written into a link gone silent is lost with the transport
/// Vim kills: the bridge over there answers claude that Vim did not answer, and claude asks in its
/// own prompt with its own text. The user's edit is kept in a buffer of its own, and said (the
/// proposal was wiped as the accept was sent, and the accept forgotten as the link dropped).
#[test]
fn vim_remote_keeps_an_edited_accept_a_dropped_link_lost() {
    if tools_missing() {
        return;
    }
    let (_sb, _sshd, remote, a, mut vim, lock, mut c) = started_over_ssh_keepalive_1s();
    let id = c.call_tool(
        "openDiff",
        open_diff_args(&remote.join("a.txt"), "ONE\n", "tab lost"),
    );
    vim.wait_eval("bufwinid(bufnr('proposed by claude'))", |v| v != -1);
    signal_ssh(&mut vim, "STOP");
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.ex("s/ONE/my own words/");
    vim.ex("w");
    vim.wait_eval("bufnr('proposed by claude')", |v| v == -1);
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer for the diff");
    assert!(is_error(&r), "{r}");
    assert!(texts(&r)[0].contains("the editor did not answer"), "{r}");
    gone(&lock);
    assert_eq!(kept_edit_lines(&mut vim), json!(["my own words"]));
    assert_eq!(vim.eval(&format!("buflisted({KEPT_EDIT})")), 1);
    let m = messages(&mut vim);
    assert!(m.contains("went silent"), "{m}");
    assert!(m.contains("may not have reached claude"), "{m}");
    assert_eq!(fs::read_to_string(&a).unwrap(), "one\n");
}

/// A transport that hangs before the bridge is ready (a host that does not answer: ssh waits
/// minutes, or for good behind a dead link) is said after a keepalive, and :ClaudeCodeStop ends
/// it (it ignores its input's end): the stop completes, no transport is left running, and a
/// start queued behind it can run.
#[test]
fn vim_remote_stop_ends_a_transport_that_hangs() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let (editor, remote) = folders(&sb);
    let a = editor.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let hang = shell_script(&sb, "hang.sh", "exec sleep 1000 </dev/null");
    let vimrc = format!(
        "let g:claude_ide_bridge_workspace = {ed}\n\
         let g:claude_ide_bridge_remote = {{'transport': [{t}], 'path_map': {{{ed}: {rem}}}, 'keepalive': 1}}",
        t = lit(&hang.to_string_lossy()),
        ed = lit(&editor.to_string_lossy()),
        rem = lit(&remote.to_string_lossy()),
    );
    let mut vim = Vim::start(&sb, &a, &vimrc);
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("still waiting for")
    });
    assert!(
        m.as_str().unwrap().contains(":ClaudeCodeStop gives up"),
        "{m}"
    );
    let st = status(&mut vim);
    assert!(st.contains("bridge: starting (pid "), "{st}");
    let pid: i32 = st
        .split("pid ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {st}"));
    vim.ex("ClaudeCodeStop");
    let give_up = Instant::now() + WAIT;
    while !status(&mut vim).contains("bridge: not running") {
        assert!(
            Instant::now() < give_up,
            "the stop never ended: {}",
            status(&mut vim)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let state = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z "),
        "the transport still runs: {state}"
    );
}

/// Vim started with a transport that runs the shell lines `prelude` (what a login shell over
/// there writes before the command) and then the bridge, once Vim says the bridge is running:
/// the sandbox, Vim, and its messages.
fn ready_through_a_chatty_shell(prelude: &str) -> (Sandbox, Vim, String) {
    let sb = Sandbox::new();
    let (editor, _remote) = folders(&sb);
    let a = editor.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let chatty = shell_script(&sb, "chatty.sh", &format!("{prelude}\nexec \"$@\""));
    let vimrc = format!(
        "let g:claude_ide_bridge_workspace = {ed}\n\
         let g:claude_ide_bridge_remote = {{'transport': [{t}], 'bridge': {b}}}",
        t = lit(&chatty.to_string_lossy()),
        ed = lit(&editor.to_string_lossy()),
        b = lit(BIN),
    );
    let mut vim = Vim::start(&sb, &a, &vimrc);
    vim.ex("ClaudeCodeStart");
    wait_lock(&sb);
    let give_up = Instant::now() + WAIT;
    while !status(&mut vim).contains("bridge: running") {
        assert!(
            Instant::now() < give_up,
            "never ready: {}\n{}",
            status(&mut vim),
            messages(&mut vim)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let m = messages(&mut vim);
    (sb, vim, m)
}

/// A login shell over there that writes to its output before the command runs (a ~/.bashrc that
/// sets the terminal's title: no line break) glues that to the bridge's `ready` line: Vim reads the
/// line from its first `{"` and says what it passed over, and the bridge is ready (it stayed
/// "starting" for good, claude's terminal never opened, the line blamed on another version).
#[test]
fn vim_remote_passes_over_what_the_shell_writes_before_the_bridge() {
    if tools_missing() {
        return;
    }
    let (_sb, _vim, m) = ready_through_a_chatty_shell("printf '\\033]0;devbox\\007'");
    assert!(m.contains("wrote this before the bridge started"), "{m}");
    assert!(m.contains("^[]0;devbox^G"), "{m}");
    assert!(!m.contains("another version"), "{m}");
}

/// Before the bridge is ready, a line that is JSON from its start but not one Vim reads (a bridge
/// of another version) is said as such, not blamed on the shell with nothing quoted; and a
/// title glued to the `ready` line that holds a `{` itself is passed over too (the line was read
/// from that `{`, and the bridge never became ready).
#[test]
fn vim_remote_tells_another_version_from_the_shells_output() {
    if tools_missing() {
        return;
    }
    let (_sb, _vim, m) = ready_through_a_chatty_shell(
        "printf '{\"type\":\"ready\",\"port\":\"x\"}\\n'\nprintf '\\033]0;{devbox}\\007'",
    );
    // (What the shell wrote is said a second later, with the messages held back.)
    assert!(m.contains("another version"), "{m}");
}

/// A transport that carries the bridge's output at `argv[1]` bytes a second (16 KiB at a time,
/// nothing buffered beyond that), as a slow link does; the bridge (the other arguments) reads
/// Vim's lines as they are.
const SLOW_RELAY: &str = r#"import os, subprocess, sys, time
rate = float(sys.argv[1])
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
start, sent = time.monotonic(), 0
while True:
    data = os.read(child.stdout.fileno(), 16384)
    if not data:
        break
    os.write(1, data)
    sent += len(data)
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
sys.exit(child.wait())
"#;

/// A long line crossing a slow link is not silence: a 2 MiB proposal takes about 3 s to reach
/// Vim through a link of 700 kB/s, twelve keepalives of 0.25 s, while the keepalive's answer
/// waits behind it. The link carries bytes all that time: Vim keeps it (it dropped it as gone
/// silent after four keepalives, and the proposal with it, when it saw only whole lines), shows
/// the proposal whole, and the accept reaches claude. Vim kept the bridge hearing from it too
/// (`--editor-timeout` of 5 s, 20 keepalives).
#[test]
fn vim_remote_keeps_a_slow_link_carrying_a_long_line() {
    if tools_missing() {
        return;
    }
    let sb = Sandbox::new();
    let a = sb.ws.join("a.txt");
    fs::write(&a, "one\n").unwrap();
    let relay = sb.root().join("slow-relay.py");
    fs::write(&relay, SLOW_RELAY).unwrap();
    let keepalive = 0.25;
    let vimrc = format!(
        "let g:claude_ide_bridge_workspace = {ws}\n\
         let g:claude_ide_bridge_remote = {{'transport': ['python3', {relay}, '700000'], \
         'bridge': {bin}, 'keepalive': {keepalive}}}",
        ws = lit(&sb.ws.to_string_lossy()),
        relay = lit(&relay.to_string_lossy()),
        bin = lit(BIN),
    );
    let mut vim = Vim::start(&sb, &a, &vimrc);
    vim.ex("ClaudeCodeStart");
    let lock = wait_lock(&sb);
    let mut c = connect(&lock);
    let lines = 2048;
    let contents: String = (0..lines)
        .map(|i| format!("{i:06} {}\n", "w".repeat(1016)))
        .collect();
    let asked = Instant::now();
    let id = c.call_tool("openDiff", open_diff_args(&a, &contents, "tab slow"));
    let give_up = Instant::now() + WAIT;
    while vim.eval("bufwinid(bufnr('proposed by claude'))") == -1 {
        assert!(
            Instant::now() < give_up && !messages(&mut vim).contains("silent"),
            "no proposal: {}; {}",
            messages(&mut vim),
            vim.diag()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = asked.elapsed().as_secs_f64();
    assert!(
        took > 2.0 * 4.0 * keepalive,
        "it crossed in {took:.1} s: not slow enough to test anything"
    );
    let m = messages(&mut vim);
    assert!(!m.contains("silent") && !m.contains("dropped"), "{m}");
    vim.ex("call win_gotoid(bufwinid(bufnr('proposed by claude')))");
    vim.wait_eval("bufname()", |v| {
        v.as_str().unwrap().contains("proposed by claude")
    });
    assert_eq!(vim.eval("line('$')"), json!(lines));
    assert_eq!(
        vim.eval("getline('$')"),
        json!(format!("{:06} {}", lines - 1, "w".repeat(1016)))
    );
    vim.ex("w");
    let r = c
        .recv_until(WAIT, |v| v["id"] == json!(id))
        .expect("an answer for the diff");
    assert_eq!(texts(&r)[0], "FILE_SAVED", "{r}");
    assert!(texts(&r)[1] == contents, "the accept's text differs");
    assert!(
        status(&mut vim).contains("bridge: running"),
        "{}",
        status(&mut vim)
    );
    assert!(lock.exists(), "the bridge stopped");
    vim.ex("qa!");
    gone(&lock);
}

/// The remote bridge started with `--host ::1` (`g:claude_ide_bridge_args`): the claude
/// `:ClaudeCode` runs over there is told where it listens, and connects there.
#[test]
fn vim_remote_tells_claude_where_the_bridge_listens() {
    if tools_missing() {
        return;
    }
    let (sb, sshd, editor, remote, a) = over_ssh();
    let fake = fake_claude(&sb, SAYS_HOST);
    let vimrc = remote_setting(&sshd, &editor, &remote, &over_there(&fake))
        + "\nlet g:claude_ide_bridge_args = ['--host', '::1']";
    let mut vim = Vim::start(&sb, &a, &vimrc);
    vim.ex("ClaudeCode");
    told_the_host(&mut vim, &wait_lock(&sb), " on the remote side");
}

#[test]
fn vim_remote_says_what_is_missing_over_there() {
    if tools_missing() {
        return;
    }
    let (sb, sshd, editor, remote, a) = over_ssh();
    // No claude-ide-bridge on the remote PATH.
    let mut vim = Vim::start(&sb, &a, &remote_setting(&sshd, &editor, &remote, ""));
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("was not found")
    });
    let m = m.as_str().unwrap();
    assert!(
        m.contains("claude-ide-bridge was not found through `ssh "),
        "{m}"
    );
    assert!(
        m.contains("cargo install --locked --path program/cli"),
        "{m}"
    );
    assert!(m.contains(":help claude-ide-bridge-remote"), "{m}");
    assert!(status(&mut vim).contains("was not found"));
    // A leading `~/` of the program is the home folder over there (the words are quoted: no
    // shell there expands it), in what is looked for and in what is said.
    vim.ex("let g:claude_ide_bridge_remote.bridge = '~/no/such/claude-ide-bridge'");
    vim.ex("messages clear");
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("was not found")
    });
    let m = m.as_str().unwrap();
    assert!(
        m.contains("/no/such/claude-ide-bridge was not found through `ssh ") && !m.contains("~/no"),
        "{m}"
    );
    vim.ex("unlet g:claude_ide_bridge_remote.bridge");
    // ... and the help it points to is there.
    vim.ex("helptags ALL");
    vim.ex("help claude-ide-bridge-remote");
    vim.wait_eval("getline('.')", |v| {
        v.as_str()
            .is_some_and(|l| l.contains("*claude-ide-bridge-remote*"))
    });
    vim.ex("close");

    // A bridge too old for remote use: one that does not know --path-map (clap's refusal).
    let old_bridge = shell_script(
        &sb,
        "old-bridge",
        "echo \"error: unexpected argument '--path-map' found\" >&2\nexit 2",
    );
    vim.ex(&format!(
        "let g:claude_ide_bridge_remote.bridge = {}",
        lit(&old_bridge.to_string_lossy())
    ));
    vim.ex("ClaudeCodeStart");
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("too old")
    });
    assert!(
        m.as_str().unwrap().contains("does not know --path-map"),
        "{m}"
    );

    // A setting of the wrong shape is named, with what it must be.
    vim.ex("let g:claude_ide_bridge_remote = {'transport': 'ssh devbox'}");
    vim.ex("ClaudeCodeStart");
    vim.wait_eval("execute('messages')", |v| {
        v.as_str()
            .unwrap()
            .contains("transport must be a command as a list of words")
    });

    // A transport that dies in the middle of a line: no half line is taken for one, Vim says the
    // link ended, and nothing is left pending.
    let script = r#"printf '{"type":"ready","port":1,"lockFile":null}\n{"type":"tool_call","id":1,"na'; sleep 0.3; echo gone >&2; exit 255"#;
    start_through_sh(&mut vim, script);
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("dropped (status 255: gone)")
    });
    let m = m.as_str().unwrap();
    assert!(!has_vim_error(m, "E6"), "a raw Vim error: {m}");
    assert!(
        !m.contains("Vim could not"),
        "a half line taken for a call: {m}"
    );
    let st = status(&mut vim);
    assert!(st.contains("bridge: not running"), "{st}");

    // A transport that stops reading once the bridge is ready: Vim's next lines meet a broken
    // pipe, which is not put before the user as a raw write error; the end is told once known.
    let script = r#"exec 0<&-; printf '{"type":"ready","port":1,"lockFile":null}\n'; sleep 1; echo closed >&2; exit 3"#;
    start_through_sh(&mut vim, script);
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("dropped (status 3: closed)")
    });
    assert!(
        !has_vim_error(m.as_str().unwrap(), "E63"),
        "a raw Vim error: {m}"
    );

    // A transport killed (a signal, the OOM killer): said so, not with the bridge's last
    // ordinary line, which came through the transport's stderr before it.
    let script = r#"printf '{"type":"ready","port":1,"lockFile":null}\n'; echo 'client connected (#1, claude-code/2 (cli))' >&2; sleep 0.5; kill -KILL $$"#;
    start_through_sh(&mut vim, script);
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str()
            .unwrap()
            .contains("dropped (its transport was killed by a signal).")
    });
    let m = m.as_str().unwrap();
    assert!(!m.contains("status -1"), "{m}");
    assert!(m.contains("then, in claude, /ide and Vim"), "{m}");

    // A transport that ends without a word (ssh killed: status 255, nothing said), well after
    // the bridge's last ordinary line: that line is not given as the reason.
    let script = r#"printf '{"type":"ready","port":1,"lockFile":null}\n'; echo 'client connected (#2, claude-code/2 (cli))' >&2; sleep 1.6; exit 255"#;
    start_through_sh(&mut vim, script);
    let m = vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains("dropped (status 255).")
    });
    assert!(
        !m.as_str().unwrap().contains("255: client connected (#2"),
        "{m}"
    );

    // Vim started in a folder under none of the path map's: its path is no name over there.
    vim.ex("let g:claude_ide_bridge_remote = {'transport': ['sh', '-c', 'exit 9', 'x'], 'path_map': {'/no/such/editor/folder': '/there'}}");
    vim.ex("ClaudeCodeStart");
    vim.wait_eval("execute('messages')", |v| {
        v.as_str().unwrap().contains(
            "is under no folder of g:claude_ide_bridge_remote.path_map: :cd into one, or set \
             g:claude_ide_bridge_remote.workspace",
        )
    });
    assert!(status(&mut vim).contains("bridge: not running"));
    vim.ex("qa!");
}

#[test]
fn a_vim_error_is_told_from_a_name_holding_its_code() {
    assert!(has_vim_error("E63: invalid use of \\_", "E6"));
    assert!(has_vim_error(
        "x\nError detected:\nE716: Key not present",
        "E716"
    ));
    assert!(!has_vim_error("/tmp/.tmp3sE6dC/a.txt \"E6\"", "E6"));
    assert!(!has_vim_error("E63 is fine: no colon after it", "E63"));
    assert!(has_vim_error("E716: Key", "E71"));
    assert!(!has_vim_error("E716: Key", "E72"));
}
