//! Property tests over generated trees: directories, files, FIFOs, sockets, long and non-UTF-8
//! names, and symbolic links going anywhere (inside, out, dangling, in loops). Whatever the
//! tree and whatever the calls, nothing outside the workspace is read, listed or written, and
//! every call returns (a watchdog fails the case instead of hanging).
//!
//! Every file outside the workspace holds the word SECRET, every file inside holds INSIDE: a
//! read that answers SECRET has read outside. The outside is snapshotted (types, contents,
//! modes, link targets) before the calls and compared after them.
// Unix only: Unix names (bytes), links, FIFOs and sockets; the Windows cases are in tests/windows.rs.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use claude_ide_bridge_files::{Limits, Workspace};
use proptest::prelude::*;

/// A name in a generated tree: short ones collide on purpose, so that links find things.
#[derive(Debug, Clone)]
enum Name {
    Short(&'static str),
    Long,
    NonUtf8,
}

impl Name {
    fn os(&self) -> OsString {
        match self {
            Name::Short(s) => OsString::from(s),
            Name::Long => OsString::from("L".repeat(255)),
            Name::NonUtf8 => OsString::from_vec(b"n\xff\xfe".to_vec()),
        }
    }
}

const SHORT: &[&str] = &["a", "b", "d", "f", "s", "x", "secret", "outside", "ws"];

fn name() -> impl Strategy<Value = Name> {
    prop_oneof![
        8 => proptest::sample::select(SHORT).prop_map(Name::Short),
        1 => Just(Name::Long),
        1 => Just(Name::NonUtf8),
    ]
}

/// Where a path or a link target starts.
#[derive(Debug, Clone, Copy)]
enum Start {
    Relative,
    Workspace,
    Outside,
    Root,
}

/// A path made of pieces, some of them `..` and `.`.
#[derive(Debug, Clone)]
struct PathGen {
    start: Start,
    parts: Vec<Option<Name>>, // None: ".."
    dot: bool,
}

fn path_gen() -> impl Strategy<Value = PathGen> {
    (
        prop_oneof![
            4 => Just(Start::Relative),
            2 => Just(Start::Workspace),
            1 => Just(Start::Outside),
            1 => Just(Start::Root),
        ],
        proptest::collection::vec(
            prop_oneof![4 => name().prop_map(Some), 1 => Just(None)],
            0..5,
        ),
        any::<bool>(),
    )
        .prop_map(|(start, parts, dot)| PathGen { start, parts, dot })
}

impl PathGen {
    fn bytes(&self, t: &Tree) -> Vec<u8> {
        let mut out: Vec<u8> = match self.start {
            Start::Relative => Vec::new(),
            Start::Workspace => t.ws.as_os_str().as_bytes().to_vec(),
            Start::Outside => t.outside.as_os_str().as_bytes().to_vec(),
            Start::Root => t.root.as_os_str().as_bytes().to_vec(),
        };
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 || !out.is_empty() {
                out.push(b'/');
            }
            match p {
                Some(n) => out.extend_from_slice(n.os().as_bytes()),
                None => out.extend_from_slice(b".."),
            }
            if self.dot && i == 0 {
                out.extend_from_slice(b"/.");
            }
        }
        if out.is_empty() {
            out.push(b'.');
        }
        out
    }

    /// As the wire can carry it (lossy for the non-UTF-8 name).
    fn wire(&self, t: &Tree) -> String {
        String::from_utf8_lossy(&self.bytes(t)).into_owned()
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Dir,
    File,
    Fifo,
    Socket,
    Link(PathGen),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => Just(Kind::Dir),
        3 => Just(Kind::File),
        1 => Just(Kind::Fifo),
        1 => Just(Kind::Socket),
        4 => path_gen().prop_map(Kind::Link),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Read(PathGen),
    ReadText(PathGen),
    Write(PathGen),
    Writable(PathGen),
    Regular(PathGen),
    Lines(PathGen),
    List(Option<&'static str>),
    Info,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => path_gen().prop_map(Op::Read),
        1 => path_gen().prop_map(Op::ReadText),
        3 => path_gen().prop_map(Op::Write),
        1 => path_gen().prop_map(Op::Writable),
        1 => path_gen().prop_map(Op::Regular),
        1 => path_gen().prop_map(Op::Lines),
        1 => proptest::sample::select(&[None, Some("*"), Some("**/secret"), Some("s*"), Some("**")][..])
            .prop_map(Op::List),
        1 => Just(Op::Info),
    ]
}

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

impl Tree {
    /// A workspace with the generated entries, beside an outside holding secrets (and links
    /// of its own, back in and further out).
    fn build(entries: &[(usize, Name, Kind)]) -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        let outside = root.join("outside");
        let t = Tree {
            _dir: dir,
            root: root.clone(),
            ws: ws.clone(),
            outside: outside.clone(),
        };
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("f"), "INSIDE\n").unwrap();
        fs::create_dir_all(outside.join("d")).unwrap();
        fs::write(root.join("secret"), "SECRET\n").unwrap();
        fs::write(outside.join("secret"), "SECRET\n").unwrap();
        fs::write(outside.join("f"), "SECRET\n").unwrap();
        fs::write(outside.join("d").join("f"), "SECRET\n").unwrap();
        symlink(&ws, outside.join("ws")).unwrap();
        symlink("../secret", outside.join("a")).unwrap();
        let mut dirs = vec![ws.clone(), ws.join("d")];
        for (parent, name, kind) in entries {
            let at = dirs[parent % dirs.len()].join(name.os());
            if fs::symlink_metadata(&at).is_ok() {
                continue;
            }
            let made = match kind {
                Kind::Dir => fs::create_dir(&at).map(|()| dirs.push(at.clone())),
                Kind::File => fs::write(&at, "INSIDE\n"),
                // mkfifo(1): rustix has no `mknodat` on macOS.
                Kind::Fifo => std::process::Command::new("mkfifo")
                    .arg(&at)
                    .status()
                    .and_then(|s| {
                        s.success()
                            .then_some(())
                            .ok_or(std::io::ErrorKind::Other.into())
                    }),
                Kind::Socket => std::os::unix::net::UnixListener::bind(&at).map(drop),
                Kind::Link(target) => symlink(std::ffi::OsStr::from_bytes(&target.bytes(&t)), &at),
            };
            // A name too long for a socket address, say: the entry is left out.
            let _ = made;
        }
        t
    }

    /// Everything outside the workspace: type, contents, mode, link target, by path.
    fn outside_snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p == self.ws {
                    continue;
                }
                let m = fs::symlink_metadata(&p).unwrap();
                let what = if m.is_dir() {
                    stack.push(p.clone());
                    format!("dir {:o}", m.mode())
                } else if m.file_type().is_symlink() {
                    format!("link {:?}", fs::read_link(&p).unwrap())
                } else if m.is_file() {
                    format!("file {:o} {:?}", m.mode(), fs::read(&p).unwrap())
                } else {
                    format!("special {:o}", m.mode())
                };
                out.insert(p, what);
            }
        }
        out
    }

    /// Whether a path the crate answered is inside the workspace once every link is resolved
    /// by the kernel.
    fn really_inside(&self, answered: &str) -> bool {
        if !answered.starts_with(&format!("{}/", self.ws.display())) {
            return false;
        }
        // The deepest part of it that exists (a path not written yet lies below it).
        let mut p = Path::new(answered);
        loop {
            if let Ok(real) = fs::canonicalize(p) {
                return real.starts_with(&self.ws);
            }
            match p.parent() {
                Some(parent) => p = parent,
                None => return false,
            }
        }
    }
}

/// Whether an answered path names a regular file with its links resolved.
fn names_the_file(path: &str) -> bool {
    let Ok(real) = fs::canonicalize(path) else {
        return false;
    };
    real.to_str() == Some(path) && fs::metadata(&real).is_ok_and(|m| m.is_file())
}

fn run(t: &Tree, ops: &[Op], current: &Mutex<String>) -> Result<(), String> {
    let ws = Workspace::new(
        vec![t.ws.to_str().unwrap().to_string()],
        Limits {
            max_read_bytes: 4096,
            ..Limits::default()
        },
    );
    for op in ops {
        *current.lock().unwrap() = format!("{op:?}");
        match op {
            Op::Read(p) => {
                if let Ok((path, bytes)) = ws.read(&p.wire(t)) {
                    if bytes.windows(6).any(|w| w == b"SECRET") || !t.really_inside(&path) {
                        return Err(format!("{op:?} read {path} outside"));
                    }
                }
            }
            Op::ReadText(p) => {
                if let Ok(text) = ws.read_text(&p.wire(t)) {
                    if text.content.contains("SECRET") || !t.really_inside(&text.path) {
                        return Err(format!("{op:?} read {} outside", text.path));
                    }
                }
            }
            Op::Write(p) => {
                if let Ok(path) = ws.write(&p.wire(t), b"INSIDE written\n") {
                    if !t.really_inside(&path) {
                        return Err(format!("{op:?} wrote {path} outside"));
                    }
                    if !names_the_file(&path) || fs::read(&path).unwrap() != b"INSIDE written\n" {
                        return Err(format!("{op:?}: {path} is not what was written"));
                    }
                }
            }
            Op::Writable(p) => {
                if let Ok(path) = ws.writable(&p.wire(t)) {
                    if !t.really_inside(&path) {
                        return Err(format!("{op:?} allowed {path} outside"));
                    }
                }
            }
            Op::Regular(p) => {
                if let Ok(path) = ws.regular_file(&p.wire(t)) {
                    if !t.really_inside(&path) || !names_the_file(&path) {
                        return Err(format!("{op:?} answered {path}"));
                    }
                }
            }
            Op::Lines(p) => {
                let _ = ws.line_count(&p.wire(t));
            }
            Op::List(pattern) => {
                let listing = ws.list(*pattern).map_err(|e| e.to_string())?;
                for f in &listing.files {
                    let regular = fs::symlink_metadata(f).map(|m| m.is_file());
                    if !t.really_inside(f) || !regular.unwrap_or(false) {
                        return Err(format!("{op:?} listed {f}"));
                    }
                }
            }
            Op::Info => {
                let info = ws.info();
                let all = ws.list(None).unwrap();
                if info.file_count != all.files.len() as u64 {
                    return Err(format!(
                        "fileCount {} vs {}",
                        info.file_count,
                        all.files.len()
                    ));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn nothing_outside_is_ever_read_listed_or_written(
        entries in proptest::collection::vec((0usize..8, name(), kind()), 0..24),
        ops in proptest::collection::vec(op(), 1..24),
    ) {
        let (tx, rx) = mpsc::channel();
        let current = Arc::new(Mutex::new(String::from("building the tree")));
        let now = current.clone();
        thread::spawn(move || {
            let t = Tree::build(&entries);
            let before = t.outside_snapshot();
            let r = run(&t, &ops, &now).and_then(|()| {
                *now.lock().unwrap() = "comparing the outside".into();
                let after = t.outside_snapshot();
                if before == after {
                    Ok(())
                } else {
                    Err(format!("the outside changed:\n{before:#?}\n{after:#?}"))
                }
            });
            let _ = tx.send(r);
        });
        // A watchdog, not a timing claim: a call that blocks fails the case here.
        let r = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(format!("a call did not return: {}", current.lock().unwrap()))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err("the case panicked".into()),
        };
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}
