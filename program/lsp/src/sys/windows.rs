//! Windows: a server's tree is a Job Object of its own; writes to its input block.
//!
//! Each server is put, right after it is started, into a job created for it with "kill on job
//! close" (the `win32job` crate: the Win32 calls behind a safe API, so this crate has no
//! `unsafe`). The processes it starts later (the `node` under npm's `.cmd` shim) are in the job
//! too, and closing the job's one handle, which this module holds, ends them all: that is the
//! stop, and Windows closes the handle itself when the bridge exits, however it ends (killed
//! from the task manager included), so no server outlives it. What the job does not hold: a
//! process the server started in the moment between its start and its assignment (std has no
//! suspended start); npm's shims start `node` long after that.
//!
//! A server that stops reading holds the writer in its write until the request that is waiting
//! passes its deadline: the caller then finds it hung and kills its tree, which ends the write.
//! Run under Wine by `program/cli/tests/shims.rs`: a server behind npm's `.cmd` shim, its
//! tree (`cmd.exe`, the server, the process it started) ended at the bridge's stop and when the
//! bridge is killed.

use std::collections::HashMap;
use std::os::windows::io::AsRawHandle;
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use win32job::{ExtendedLimitInfo, Job};

/// Each running server's job, by the server's process id.
static JOBS: Mutex<Option<HashMap<u32, Job>>> = Mutex::new(None);

fn jobs() -> MutexGuard<'static, Option<HashMap<u32, Job>>> {
    JOBS.lock().unwrap_or_else(|e| e.into_inner())
}

/// `CREATE_NEW_PROCESS_GROUP`: a Ctrl-C in the bridge's console does not reach the server.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
/// `CREATE_NO_WINDOW`: a console server gets no window of its own.
const CREATE_NO_WINDOW: u32 = 0x0800_0000;

/// Starts the command in a process group of its own, without a console window.
pub(crate) fn own_tree(cmd: &mut Command) {
    cmd.creation_flags(CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW);
}

/// Puts the server just started into a job of its own, created with "kill on job close".
pub(crate) fn adopt(child: &Child) -> std::io::Result<()> {
    let mut limits = ExtendedLimitInfo::new();
    limits.limit_kill_on_job_close();
    let job = Job::create_with_limit_info(&limits)?;
    job.assign_process(child.as_raw_handle() as isize)?;
    jobs()
        .get_or_insert_with(HashMap::new)
        .insert(child.id(), job);
    Ok(())
}

/// Ends the server `pid` and every process it started: its job's handle is closed.
pub(crate) fn kill_tree(pid: u32) {
    let job = jobs().as_mut().and_then(|j| j.remove(&pid));
    drop(job);
}

/// Nothing to do: an exited process leaves no zombie, and its id is not reused while a handle
/// to it is open.
pub(crate) fn reap_id(_pid: u32) {}

/// A server process watched for its exit ([`watch_exit`]), reaped by [`ExitWatch::reap`].
pub(crate) struct ExitWatch {
    /// The process, while the watch's thread has not taken it (it could not be started).
    child: Arc<Mutex<Option<Child>>>,
    thread: Option<std::thread::JoinHandle<(Child, std::io::Result<ExitStatus>)>>,
}

/// Calls `on_exit` once the process has exited, from a thread of its own that waits on its
/// handle. The `Child`, and with it the handle, is kept until [`ExitWatch::reap`] (by the
/// thread, or here when it could not be started): the id stays the server's, and its job's key
/// in [`kill_tree`], until then. The error says why the thread could not be started.
pub(crate) fn watch_exit(
    child: Child,
    on_exit: impl FnOnce() + Send + 'static,
) -> (ExitWatch, std::io::Result<()>) {
    let name = format!("lsp-exit-{}", child.id());
    let child = Arc::new(Mutex::new(Some(child)));
    let held = Arc::clone(&child);
    let wait = move || {
        let mut child = held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("kept");
        let status = child.wait();
        on_exit();
        (child, status)
    };
    let thread = std::thread::Builder::new()
        .name(name)
        .stack_size(super::EXIT_WATCH_STACK)
        .spawn(wait);
    match thread {
        Ok(t) => (
            ExitWatch {
                child,
                thread: Some(t),
            },
            Ok(()),
        ),
        Err(e) => (
            ExitWatch {
                child,
                thread: None,
            },
            Err(e),
        ),
    }
}

impl ExitWatch {
    /// The process's status, once its tree was killed ([`kill_tree`]): the watch's thread ends
    /// with it.
    pub(crate) fn reap(mut self) -> std::io::Result<ExitStatus> {
        if let Some(t) = self.thread.take() {
            return match t.join() {
                Ok((_child, status)) => status,
                Err(_) => Err(std::io::Error::other("its exit watch failed")),
            };
        }
        let kept = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        match kept {
            Some(mut child) => child.wait(),
            None => Err(std::io::Error::other("its exit was not watched")),
        }
    }
}

/// A program file is any regular file found under a `PATHEXT` name.
pub(crate) fn is_executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file()
}

/// Whether two files are one: std gives no file index on stable Rust, so this cannot tell and
/// says no (a rustup proxy is then taken as a program, as on Unix when rustup's home is unknown).
pub(crate) fn same_file(_a: &std::fs::Metadata, _b: &std::fs::Metadata) -> bool {
    false
}

/// What a file a server has is: followed through a link in its place, since the files crate
/// names a file reached through a link in the workspace by the link's path here (and checked
/// that it stays inside).
pub(crate) fn file_metadata(path: &str) -> std::io::Result<std::fs::Metadata> {
    std::fs::metadata(path)
}

/// Opens `path` to read (a path names no pipe that could hold the open up here).
pub(crate) fn open_to_read(path: &str) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// The path `found` names with its links resolved, or `found` when that cannot be known, in the
/// form programs take: `canonicalize` gives a verbatim path (`\\?\C:\npm\tsc.cmd`,
/// `\\?\UNC\server\share\...`), which a server told a file by it (typescript-language-server's
/// `tsserver.path`) would hand to Node as is; a drive's or a share's is written without the prefix.
pub(crate) fn real_path(found: &Path) -> PathBuf {
    let Ok(real) = std::fs::canonicalize(found) else {
        return found.to_path_buf();
    };
    match real.to_str() {
        Some(text) => PathBuf::from(claude_ide_bridge::without_verbatim_prefix(text).as_ref()),
        None => real,
    }
}

/// A server's command (`--lsp LANG=COMMAND`) split into words as Windows programs split their
/// command line (the C runtime's rules), so that `C:\tools\pylsp.exe` is one word as typed:
/// spaces and tabs separate words, double quotes group (`"C:\Program Files\x.exe"`), a
/// backslash is itself except before a double quote (2n backslashes and a quote are n
/// backslashes and a quote that opens or closes a group; 2n+1 are n and a literal quote), and
/// `""` inside a group is a quote; single quotes are plain characters. `None` for a group left
/// open.
pub(crate) fn split_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut grouped = false;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' if !grouped => {
                words.extend(word.take());
            }
            '\\' => {
                let mut n = 1;
                while chars.next_if_eq(&'\\').is_some() {
                    n += 1;
                }
                let w = word.get_or_insert_with(String::new);
                if chars.peek() == Some(&'"') {
                    w.extend(std::iter::repeat_n('\\', n / 2));
                    if n % 2 == 1 {
                        chars.next();
                        w.push('"');
                    }
                } else {
                    w.extend(std::iter::repeat_n('\\', n));
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                if grouped && chars.next_if_eq(&'"').is_some() {
                    w.push('"');
                } else {
                    grouped = !grouped;
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    (!grouped).then_some(words)
}

/// `PATHEXT`, or Windows' default when it is not set.
pub(crate) fn exe_extensions() -> Option<String> {
    Some(std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".to_owned()))
}

/// Anonymous pipes stay blocking here (see the module docs): nothing to set.
pub(crate) fn set_nonblocking(_input: &ChildStdin) -> bool {
    true
}

/// Never reached with blocking pipes; waits out the watch if it ever is.
pub(crate) fn wait_writable(_input: &ChildStdin, timeout: Duration) -> std::io::Result<()> {
    std::thread::sleep(timeout);
    Ok(())
}

/// The path of a file a server names by its `file:` URI, as documents are keyed: the Windows
/// path it names (the engine's
/// [`uri_to_windows_path`](claude_ide_bridge::uri_to_windows_path): `file:///c%3A/x/a.py`, as
/// pyright writes it, `file:///C:/x/a.py` and `file://C:\x\a.py` are all `C:\x\a.py`; a UNC URI
/// gives `\\server\share\...`). A URI that writes no drive (`file:///c/x/a.py`) names no Windows
/// file: it keeps the engine's wire form, `/c/x/a.py`, as a document given by that path is
/// keyed, apart from every drive path (the files crate refuses it). `None` when it names no
/// local file.
pub(crate) fn path_of_uri(uri: &str) -> Option<String> {
    claude_ide_bridge::uri_to_windows_path(uri).or_else(|| claude_ide_bridge::uri_to_path(uri))
}

/// A path as watched globs are matched against it (`/` between its parts): `C:\ws\a.py` is
/// matched as `C:/ws/a.py`.
pub(crate) fn glob_form(path: &str) -> std::borrow::Cow<'_, str> {
    if path.contains('\\') {
        std::borrow::Cow::Owned(path.replace('\\', "/"))
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

/// Whether watched globs ignore case: Windows' file names do.
pub(crate) const GLOBS_IGNORE_CASE: bool = true;

/// How to install clangd here: it comes with LLVM's Windows installer.
pub(crate) const CLANGD_INSTALL: &str = "winget install LLVM.LLVM (clangd comes with LLVM)";

/// The file a server's diagnostics are for: [`path_of_uri`], with a drive path's `.` and empty
/// parts taken out and its `..` resolved (`C:\w\.\a.py` and `C:\w\\a.py` are `C:\w\a.py`:
/// kept apart, they were answered apart), and a path with no drive (`/w/./a.py`, the engine's
/// form) normalised as on Unix. A share's as it is; `None` for a URI that is no file's, or a
/// `..` above the root.
pub(crate) fn published_path(uri: &str) -> Option<String> {
    let path = path_of_uri(uri)?;
    let b = path.as_bytes();
    if b.first() == Some(&b'/') && b.get(1) != Some(&b'/') {
        return claude_ide_bridge::normalize(&path);
    }
    if !(b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\') {
        return Some(path);
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path[3..].split('\\') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(format!("{}{}", &path[..3], parts.join("\\")))
}

/// The key of a document given by its path: the form [`path_of_uri`] gives for the URI the
/// document is sent with (`c:/x/a.py` is keyed `C:\x\a.py`), so that the server's diagnostics
/// for it find it; any other path (relative, or without a drive) as it is.
pub(crate) fn key_of(path: &str) -> String {
    if !std::path::Path::new(path).is_absolute() {
        return path.to_owned();
    }
    path_of_uri(&claude_ide_bridge::file_uri(path)).unwrap_or_else(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command splits as Windows programs split their command line: paths keep their
    /// backslashes, double quotes group, `\"` is a quote; an open group is refused.
    #[test]
    fn commands_split_as_windows_splits_command_lines() {
        for (command, want) in [
            (r"C:\tools\pylsp.exe -v", &[r"C:\tools\pylsp.exe", "-v"][..]),
            (
                r#""C:\Program Files\ruff\ruff.exe"  server"#,
                &[r"C:\Program Files\ruff\ruff.exe", "server"],
            ),
            (
                r#"srv --name "a \"b\"" 'x y'"#,
                &["srv", "--name", r#"a "b""#, "'x", "y'"],
            ),
            (r#"srv a\\"b c" d"#, &["srv", r"a\b c", "d"]),
            (
                r#"srv a\\\"b \\server\share"#,
                &["srv", r#"a\"b"#, r"\\server\share"],
            ),
            (
                r#"srv "" "say ""hi""" x"y"z"#,
                &["srv", "", r#"say "hi""#, "xyz"],
            ),
            ("srv\targ  trailing\\", &["srv", "arg", "trailing\\"]),
            ("   ", &[]),
        ] {
            assert_eq!(split_words(command).unwrap(), want, "{command}");
        }
        assert_eq!(split_words(r#"srv "open"#), None);
        assert_eq!(split_words(r#"srv \"closed\" "open"#), None);
    }

    /// The child side of [`commands_split_as_windows_programs_read_their_command_line`]: its
    /// arguments as Rust's std read them from its command line, printed as JSON.
    #[test]
    #[ignore = "started by commands_split_as_windows_programs_read_their_command_line"]
    fn print_arguments() {
        let args: Vec<String> = std::env::args().collect();
        println!("ARGS {}", serde_json::to_string(&args).unwrap());
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(48))]
        /// What `split_words` makes of a command is what a Windows program given that command
        /// line reads as its arguments (this test program started with it, std reading them as
        /// the C runtime does), for words of letters, spaces, tabs, backslashes and both
        /// quotes; a group left open, which programs close at the end, `split_words` refuses.
        #[test]
        fn commands_split_as_windows_programs_read_their_command_line(
            command in "[a \t\\\\\"']{0,14}"
        ) {
            let Some(words) = split_words(&command) else {
                return Ok(());
            };
            let mut child = Command::new(std::env::current_exe().unwrap());
            child
                .args([
                    "sys::os::tests::print_arguments",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                    "MARK",
                ])
                .raw_arg(&command);
            // A start the system refuses says nothing of the split: Wine's process creation
            // now and then fails one with "Internal error" (1359). Start it again, a few
            // times at most; only its arguments are under test.
            let mut tries = 0;
            let out = loop {
                match child.output() {
                    Ok(out) => break out,
                    Err(e) if tries < 3 => {
                        eprintln!("the test program did not start ({e}); starting it again");
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    Err(e) => panic!("the test program did not start, {} times: {e}", tries + 1),
                }
            };
            let text = String::from_utf8_lossy(&out.stdout);
            // libtest writes the test's name, then (with --nocapture) what it prints.
            let line = text
                .split_once("ARGS ")
                .and_then(|(_, rest)| rest.lines().next())
                .unwrap_or_else(|| panic!("no ARGS in {text}"));
            let args: Vec<String> = serde_json::from_str(line).unwrap();
            let after = args.iter().position(|a| a == "MARK").unwrap() + 1;
            proptest::prop_assert_eq!(&args[after..], &words[..], "{:?}", command);
        }
    }

    /// A program's real path is written as a drive's path, not a verbatim one, and names the
    /// same file; a path that names nothing is kept as given.
    #[test]
    fn a_real_path_has_no_verbatim_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tsc.cmd");
        std::fs::write(&file, "").unwrap();
        let real = real_path(&file);
        let text = real.to_str().unwrap();
        assert!(!text.starts_with(r"\\?\"), "{text}");
        assert_eq!(text.as_bytes().get(1), Some(&b':'), "{text}");
        assert!(real.is_file());
        assert_eq!(real.file_name(), file.file_name());
        let gone = dir.path().join("gone").join("tsc.cmd");
        assert_eq!(real_path(&gone), gone);
    }

    /// A drive path's `.`, empty parts and `..` are taken out of a published URI's path.
    #[test]
    fn published_paths_are_written_one_way() {
        for (uri, path) in [
            ("file:///c:/w/./a.py", Some(r"C:\w\a.py")),
            ("file:///C:/w//a.py", Some(r"C:\w\a.py")),
            ("file:///c:/w/x/../a.py", Some(r"C:\w\a.py")),
            ("file:///c:/", Some(r"C:\")),
            ("file:///c:/..", None),
            ("file:///w/./a.py", Some("/w/a.py")),
            ("file:///w/../..", None),
        ] {
            assert_eq!(published_path(uri).as_deref(), path, "{uri}");
        }
    }

    /// A watched glob is matched against a Windows path as against `C:/ws/sub/a.py`, ignoring
    /// case as Windows names do.
    #[test]
    fn watched_globs_match_windows_paths() {
        let now = std::time::SystemTime::now();
        let watched = crate::Watched::of_globs(&["**/*.py", "C:/ws/cfg/*.toml"], now).unwrap();
        for path in [r"C:\ws\sub\a.py", r"c:\WS\Sub\A.PY", r"C:\ws\cfg\Ruff.TOML"] {
            assert!(watched.matches(std::path::Path::new(path)), "{path}");
        }
        for path in [r"C:\ws\sub\a.pyc", r"C:\ws\cfg\deep\ruff.toml"] {
            assert!(!watched.matches(std::path::Path::new(path)), "{path}");
        }
    }

    #[test]
    fn uris_map_to_the_keys_of_their_documents() {
        for uri in [
            "file:///c:/Users/me/a%20b.py",
            "file:///c%3A/Users/me/a%20b.py",
            "file:///C:/Users/me/a%20b.py",
        ] {
            assert_eq!(
                path_of_uri(uri).as_deref(),
                Some(r"C:\Users\me\a b.py"),
                "{uri}"
            );
        }
        assert_eq!(path_of_uri("file:///d:").as_deref(), Some(r"D:\"));
        assert_eq!(
            path_of_uri("file://srv/share/a.py").as_deref(),
            Some(r"\\srv\share\a.py")
        );
        assert_eq!(
            path_of_uri("file:///home/me/a.py").as_deref(),
            Some("/home/me/a.py")
        );
        assert_eq!(path_of_uri("file:///c/a.py").as_deref(), Some("/c/a.py"));
        assert_eq!(path_of_uri(r"file://C:\a.py").as_deref(), Some(r"C:\a.py"));
        assert_eq!(path_of_uri("file:/c:/a.py").as_deref(), Some(r"C:\a.py"));
        assert_eq!(
            path_of_uri("file://localhost/c:/a.py").as_deref(),
            Some(r"C:\a.py")
        );
        assert_eq!(path_of_uri("file://C:/a.py").as_deref(), Some(r"C:\a.py"));
        assert_eq!(
            path_of_uri(r"file://c:\x\a%20b.py").as_deref(),
            Some(r"C:\x\a b.py")
        );
        assert_eq!(path_of_uri("file:///C/a.py").as_deref(), Some("/C/a.py"));
        assert_eq!(path_of_uri("file:///C:/%FF"), None);
        assert_eq!(path_of_uri("untitled:Untitled-1"), None);
        for path in [
            r"C:\Users\me\a b.py",
            r"c:\Users\me\a b.py",
            "C:/Users/me/a b.py",
        ] {
            assert_eq!(key_of(path), r"C:\Users\me\a b.py", "{path}");
        }
        assert_eq!(key_of(r"\\srv\share\a.py"), r"\\srv\share\a.py");
        assert_eq!(key_of("a.py"), "a.py");
        assert_eq!(key_of("/w/a.py"), "/w/a.py");
    }

    /// The three crates read a file URI the same way (the engine's `uri_to_windows_path`): the
    /// Windows `claude`'s `file://C:\x` is drive C's file everywhere, and `file:///c/x`, which
    /// writes no drive, is none of drive C's files anywhere: here its diagnostics are kept under
    /// `/c/x/...`, apart from the document `C:\x\...` (the files crate refuses it, and the
    /// program's `getDiagnostics` answers `[]` for it).
    #[test]
    fn a_uri_without_a_drive_is_not_drive_cs_file() {
        use crate::state::{Effect, State};
        use crate::LspLimits;
        let key = key_of(r"C:\x\a.py");
        assert_eq!(path_of_uri(r"file://C:\x\a.py").as_deref(), Some(&*key));
        assert_ne!(path_of_uri("file:///c/x/a.py").as_deref(), Some(&*key));

        let mut s = State::new(LspLimits::default(), vec![]);
        s.begin(1, None);
        let init = s.take_outbox();
        assert_eq!(init.len(), 1);
        let answer =
            br#"{"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"textDocumentSync": 1}}}"#;
        s.handle(answer).unwrap();
        assert!(s.is_running());
        s.sync(&key, "python", "x = 1\n");
        let publish = |uri: &str| {
            let uri = serde_json::to_string(uri).unwrap();
            format!(
                r#"{{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": {{"uri": {uri}, "diagnostics": [{{"range": {{"start": {{"line": 0, "character": 0}}, "end": {{"line": 0, "character": 1}}}}, "message": "m"}}]}}}}"#
            )
        };
        let told = s.handle(publish("file:///c/x/a.py").as_bytes()).unwrap();
        assert!(s.known(&key).is_empty(), "{told:?}");
        assert_eq!(s.known("/c/x/a.py").len(), 1);
        let told = s.handle(publish(r"file://C:\x\a.py").as_bytes()).unwrap();
        assert_eq!(s.known(&key).len(), 1);
        assert!(
            matches!(&told[..], [Effect::Changed(c)] if c.diagnostics.len() == 1),
            "{told:?}"
        );
    }
}
