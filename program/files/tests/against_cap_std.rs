//! A differential test of [`Workspace::read`] against cap-std's `Dir::open` on the workspace
//! folder (issue 29, item 6), over generated single-folder trees: files, directories, and symbolic
//! links with relative and absolute targets, inside and outside the folder, dangling, in loops,
//! with `..` in them; and request paths made of the same names, `.` and `..`.
//!
//! Both confine a path to one directory and follow the links that stay inside it, so where their
//! rules agree they must agree: both read the file or both refuse, and when both read, the same
//! file (device and inode). Where the rules differ by design, the test states the rule and checks
//! it, instead of skipping:
//!
//! - **Absolute link targets.** cap-std refuses every absolute link (it cannot know where `/` is
//!   from inside the directory); the files crate follows one whose target is inside the folder,
//!   as the path the user's tools would follow. So when the path meets an absolute link, cap-std
//!   must refuse, and the files crate, if it reads, must read the file the kernel's resolution
//!   reaches, and that file must be inside the folder.
//! - **Passing outside on the way.** cap-std refuses a path whose resolution leaves the directory
//!   at any step (`../ws/f`, a link to `../ws/f`, an absolute link to the tree's root and back).
//!   The files crate reads a link's target lexically, so its answer can differ (through an
//!   absolute link that returns inside, say). Same check as above: cap-std refuses; the files
//!   crate reads, if at all, only the file the kernel reaches, inside the folder.
//! - **`..` in the request after a symbolic link, a file or a missing name, and `.` after
//!   one** (`l/..` with `l` a link to a directory, `f/.`, `nope/../f`). The files crate resolves
//!   the request's `..` lexically, as a path string, before it walks (`l/..` is the directory
//!   holding `l`, `nope/../f` is `f`), and leaves out a `.` in a link's target; cap-std
//!   resolves them physically, as the kernel does (`l/..` is the parent of `l`'s target; `f/.`
//!   and `nope/..` fail). The files crate then acts on the file it named itself, inside the
//!   folder; they name different files, so these paths are not compared (they are counted, and
//!   the test requires that most paths are compared). A `..` in a link's target is resolved
//!   physically by both (`l -> k/..` with `k` a link is the parent of `k`'s target), and
//!   compared: a client that writes a path the files crate found inside writes there.
//!
//! The kernel's resolution, which says which rule applies, is this test's own walk with
//! `symlink_metadata` and `read_link`, one component at a time.
// Unix only: compares with cap-std through Unix links and inodes; on Windows cap-std is the backend itself.
#![cfg(unix)]

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use claude_ide_bridge_files::{Limits, Workspace};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Names in the trees and in the paths: few, so that links and requests find things.
const NAMES: &[&str] = &["a", "b", "f", "g", "l", "out", "ws", "nope"];
/// The directories entries are created in: below the folder `ws`, and outside it in `out`.
const DIRS: &[&str] = &["ws", "ws/a", "ws/a/b", "out", "out/a"];

#[derive(Debug, Clone)]
enum Kind {
    File,
    Dir,
    /// A link whose target is relative (names, `.` and `..`).
    Relative(Vec<&'static str>),
    /// A link whose target is absolute: from the folder (`true`) or from the tree's root.
    Absolute(bool, Vec<&'static str>),
}

fn comp() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        12 => proptest::sample::select(NAMES),
        2 => Just(".."),
        1 => Just("."),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::File),
        1 => Just(Kind::Dir),
        3 => proptest::collection::vec(comp(), 1..4).prop_map(Kind::Relative),
        2 => (any::<bool>(), proptest::collection::vec(comp(), 0..3))
            .prop_map(|(inside, c)| Kind::Absolute(inside, c)),
        // To a file that is there: an absolute link the files crate follows.
        1 => proptest::sample::select(vec![vec!["f"], vec!["a", "f"], vec!["a", "b", "f"]])
            .prop_map(|c| Kind::Absolute(true, c)),
    ]
}

/// Entries: (index into [`DIRS`], name, kind). Later entries whose name is taken are left out.
fn tree() -> impl Strategy<Value = Vec<(usize, &'static str, Kind)>> {
    proptest::collection::vec(
        (0..DIRS.len(), proptest::sample::select(NAMES), kind()),
        1..20,
    )
}

fn request() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::collection::vec(comp(), 1..5)
}

/// Makes the tree under a new temporary directory; returns it (kept alive) and its root.
fn build(entries: &[(usize, &'static str, Kind)]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    // The canonical root, so that the kernel walk and absolute targets see no link above it.
    let root = tmp.path().canonicalize().unwrap();
    for d in DIRS {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    // A file in every directory, so that many requests and links find one.
    for d in DIRS {
        fs::write(root.join(d).join("f"), format!("fixed {d}")).unwrap();
    }
    for (i, (dir, name, kind)) in entries.iter().enumerate() {
        let at = root.join(DIRS[*dir]).join(name);
        if fs::symlink_metadata(&at).is_ok() {
            continue;
        }
        match kind {
            Kind::File => fs::write(&at, format!("file {i}")).unwrap(),
            Kind::Dir => fs::create_dir(&at).unwrap(),
            Kind::Relative(c) => symlink(c.join("/"), &at).unwrap(),
            Kind::Absolute(inside, c) => {
                let base = if *inside {
                    root.join("ws")
                } else {
                    root.clone()
                };
                let mut target = base.into_os_string();
                for part in c {
                    target.push("/");
                    target.push(part);
                }
                symlink(target, &at).unwrap()
            }
        }
    }
    (tmp, root)
}

/// What the kernel makes of a path below the folder, and which of the rules above apply.
#[derive(Debug, Default)]
struct Kernel {
    /// The regular file it reaches (`None`: missing, a directory, a loop, `ENOTDIR`).
    file: Option<PathBuf>,
    /// An absolute link was met.
    absolute_link: bool,
    /// The walk left the folder at some step.
    left: bool,
    /// A request's `..` after a link, a file or a missing name, or a `.` after a link: the
    /// files crate's lexical reading and the physical one differ.
    lexical_differs: bool,
}

fn kernel(folder: &Path, request: &[&str]) -> Kernel {
    let mut k = Kernel::default();
    let mut cur = folder.to_path_buf();
    // Each pending component, with whether it comes right after a link or a file, and whether
    // it is the request's (not a link target's).
    let mut todo: VecDeque<(OsString, bool, bool)> = (request.iter())
        .map(|c| (OsString::from(c), false, true))
        .collect();
    // A later `..` of the request, which the files crate takes away lexically.
    let request_up = |todo: &VecDeque<(OsString, bool, bool)>| {
        todo.iter().any(|(c, _, request)| *request && c == "..")
    };
    let mut links = 0;
    while let Some((c, after_link, request)) = todo.pop_front() {
        if after_link && (c == "." || (c == ".." && request)) {
            k.lexical_differs = true;
        }
        if c == "." {
            continue;
        }
        if c == ".." {
            cur.pop();
            k.left |= !cur.starts_with(folder);
            continue;
        }
        let next = cur.join(&c);
        let Ok(meta) = fs::symlink_metadata(&next) else {
            // Missing: a later `..` of the request takes it away lexically (`nope/../f` is `f`).
            k.lexical_differs |= request_up(&todo);
            return k;
        };
        if meta.file_type().is_symlink() {
            links += 1;
            if links > 40 {
                // A loop (ELOOP), unless a later `..` of the request takes the looping name away
                // lexically.
                k.lexical_differs |= request_up(&todo);
                return k;
            }
            let target = fs::read_link(&next).unwrap();
            if let Some(t) = todo.front_mut() {
                t.1 = true;
            }
            let mut parts: Vec<(OsString, bool, bool)> = Vec::new();
            for part in target.components() {
                match part {
                    Component::RootDir => {
                        k.absolute_link = true;
                        cur = PathBuf::from("/");
                        k.left = true;
                    }
                    Component::CurDir => parts.push((".".into(), false, false)),
                    Component::ParentDir => parts.push(("..".into(), false, false)),
                    Component::Normal(n) => parts.push((n.to_owned(), false, false)),
                    Component::Prefix(_) => unreachable!("Unix paths have no prefix"),
                }
            }
            // `Path::components` drops a `.` inside a path, the same as without it physically
            // and lexically (the name before it must be a directory either way), and a trailing
            // `/.` or `/` too, which the kernel reads as "the name before must be a directory"
            // (a link to `f/.`, with `f` a file, fails with ENOTDIR) and the files crate drops,
            // lexically: kept as a `.` of its own, for the walk to see what it follows.
            if target.as_os_str().as_bytes().ends_with(b"/.")
                || target.as_os_str().as_bytes().ends_with(b"/")
            {
                parts.push((".".into(), false, false));
            }
            for p in parts.into_iter().rev() {
                todo.push_front(p);
            }
            continue;
        }
        if meta.is_dir() {
            cur = next;
            k.left |= !cur.starts_with(folder);
            continue;
        }
        // A file (or anything not a directory): the path must end here.
        if let Some(t) = todo.front() {
            if request_up(&todo) || todo.iter().any(|(c, _, _)| c == ".") || t.1 {
                k.lexical_differs = true;
            }
            return k; // ENOTDIR
        }
        if meta.is_file() {
            k.file = Some(next);
        }
        return k;
    }
    k
}

fn id(meta: &fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// How many paths were compared fully, checked by a stated rule, and not compared.
#[derive(Debug, Default)]
struct Tally {
    both_read: usize,
    both_refused: usize,
    by_rule: usize,
    files_crate_followed_by_rule: usize,
    not_compared: usize,
}

fn check(
    entries: &[(usize, &'static str, Kind)],
    requests: &[Vec<&'static str>],
    tally: &mut Tally,
) -> Result<(), TestCaseError> {
    let (_tmp, root) = build(entries);
    let folder = root.join("ws");
    let ws = Workspace::new(
        vec![folder.to_str().unwrap().to_string()],
        Limits::default(),
    );
    let dir = cap_std::fs::Dir::open_ambient_dir(&folder, ambient_authority()).unwrap();
    for request in requests {
        let path = request.join("/");
        let k = kernel(&folder, request);
        if k.lexical_differs {
            tally.not_compared += 1;
            continue;
        }
        let ours = ws.read(&path).ok().map(|(shown, bytes)| {
            let meta = fs::symlink_metadata(&shown).unwrap();
            prop_assert!(meta.is_file(), "{path}: read {shown}, not a regular file");
            prop_assert_eq!(fs::read(&shown).unwrap(), bytes);
            Ok(id(&meta))
        });
        let ours = ours.transpose()?;
        let theirs = dir
            .open(&path)
            .ok()
            .map(|f| f.into_std().metadata().unwrap())
            .filter(|m| m.is_file())
            .map(|m| id(&m));
        if k.absolute_link || k.left {
            // cap-std refuses any absolute link and any step outside; the files crate may
            // follow, but only to the file the kernel reaches, inside the folder.
            prop_assert_eq!(theirs, None, "{}: cap-std read through {:?}", path, k);
            if let Some(ours) = ours {
                let file = k.file.as_ref();
                prop_assert!(
                    file.is_some_and(|f| f.starts_with(&folder)),
                    "{}: the files crate read, the kernel reaches {:?}",
                    path,
                    file
                );
                let kernel_id = id(&fs::metadata(file.unwrap()).unwrap());
                prop_assert_eq!(ours, kernel_id, "{}: not the kernel's file", path);
                tally.files_crate_followed_by_rule += 1;
            }
            tally.by_rule += 1;
            continue;
        }
        prop_assert_eq!(
            ours,
            theirs,
            "{}: the files crate and cap-std disagree (kernel: {:?})",
            path,
            k
        );
        if ours.is_some() {
            tally.both_read += 1;
        } else {
            tally.both_refused += 1;
        }
    }
    Ok(())
}

#[test]
fn reads_what_cap_std_opens_and_refuses_what_it_refuses() {
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::cell::RefCell::new(Tally::default());
    let strategy = (tree(), proptest::collection::vec(request(), 1..24));
    runner
        .run(&strategy, |(entries, requests)| {
            check(&entries, &requests, &mut tally.borrow_mut())
        })
        .unwrap();
    let t = tally.into_inner();
    eprintln!("{t:?}");
    // The comparison must have had something to compare: paths read by both, refused by both,
    // and followed by the files crate alone under the absolute-link and outside rules.
    assert!(t.both_read >= 50, "{t:?}");
    assert!(t.both_refused >= 200, "{t:?}");
    assert!(t.files_crate_followed_by_rule >= 5, "{t:?}");
    let compared = t.both_read + t.both_refused + t.by_rule;
    assert!(t.not_compared * 3 < compared, "{t:?}");
}

/// The rules, each on a tree made by hand: what cap-std and the files crate do on one path of
/// each kind (so that the generated test's exemptions are shown to be real differences).
#[test]
fn the_stated_differences_are_real() {
    let (_tmp, root) = build(&[
        (1, "g", Kind::File),
        (0, "l", Kind::Absolute(true, vec!["a", "g"])),
        (0, "m", Kind::Relative(vec!["..", "ws", "a", "g"])),
        (0, "k", Kind::Relative(vec!["a", "b"])),
        (1, "t", Kind::Relative(vec!["f", "."])),
        (1, "u", Kind::Relative(vec!["b", "."])),
        (0, "n", Kind::Relative(vec!["k", "..", "g"])),
        (0, "x", Kind::Absolute(false, vec!["out", "a"])),
        (0, "esc", Kind::Relative(vec!["x", "..", "f"])),
    ]);
    let folder = root.join("ws");
    let ws = Workspace::new(vec![folder.to_str().unwrap().into()], Limits::default());
    let dir = cap_std::fs::Dir::open_ambient_dir(&folder, ambient_authority()).unwrap();
    // An absolute link to a file inside: the files crate reads it, cap-std refuses.
    assert!(ws.read("l").is_ok());
    assert!(dir.open("l").is_err());
    // A relative link that passes outside and back: cap-std refuses; the files crate reads the
    // file the kernel reaches (a `..` above the folder is taken from its real path, and what it
    // leads to must be inside a folder).
    assert!(dir.open("m").is_err());
    let (shown, _) = ws.read("m").unwrap();
    assert_eq!(Path::new(&shown), folder.join("a/g"));
    // `k/..` with k a link to a/b: lexically the folder itself, physically `a`.
    assert!(ws.read("k/../a/g").is_ok()); // ws/a/g
    assert!(dir.open("k/../a/g").is_err()); // ws/a/a/g: missing
    assert!(ws.read("k/../g").is_err()); // ws/g: missing
    assert!(dir.open("k/../g").is_ok()); // ws/a/g
    assert!(kernel(&folder, &["k", "..", "g"]).lexical_differs);
    // A link to `f/.`, with f a file (a case the generated test found): lexically the file,
    // physically ENOTDIR. A link to a directory with `/.` is that directory for both.
    assert!(ws.read("a/t").is_ok()); // ws/a/f
    assert!(dir.open("a/t").is_err());
    assert!(kernel(&folder, &["a", "t"]).lexical_differs);
    assert!(ws.read("a/u/f").is_ok() && dir.open("a/u/f").is_ok());
    let k = kernel(&folder, &["a", "u", "f"]);
    assert!(
        !k.lexical_differs && k.file == Some(folder.join("a/b/f")),
        "{k:?}"
    );
    // A `..` in a link's target after a link is the parent of that link's target for both, as
    // for the kernel: `n -> k/../g` is `a/g`; `esc -> x/../f`, with x a link to `out/a` outside,
    // is `out/f`, refused (a client writing `esc` where the files crate said "inside" would
    // write outside).
    let (shown, _) = ws.read("n").unwrap();
    assert_eq!(Path::new(&shown), folder.join("a/g"));
    assert!(dir.open("n").is_ok());
    let k = kernel(&folder, &["n"]);
    assert!(
        !k.lexical_differs && k.file == Some(folder.join("a/g")),
        "{k:?}"
    );
    assert!(ws.read("esc").is_err() && ws.writable("esc").is_err());
    assert_eq!(kernel(&folder, &["esc"]).file, Some(root.join("out/f")));
    // The walk sees the other two rules too.
    assert!(kernel(&folder, &["l"]).absolute_link);
    assert!(kernel(&folder, &["m"]).left);
}
