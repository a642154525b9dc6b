//! The rules of the files crate on Windows, on real files (run under Wine from Linux by
//! `scripts/test-all.d/platforms.sh`): drive-letter, `\\?\` and `file:///C:/` forms of one path,
//! case-insensitive names, names Windows reads as something else (reserved device names,
//! alternate data streams, trailing dots and spaces, 8.3 short names), paths past `MAX_PATH`,
//! links and junctions that lead out, atomic replace, checks on the opened handle, listings.
//! The lexical rules alone are unit tests of `src/sys/winpath.rs`, run on every OS.
#![cfg(windows)]

use std::fs;
use std::path::{Path, PathBuf};

use claude_ide_bridge_files::{Error, Limits, Workspace};

/// A workspace folder (`ws`) beside a file that must stay out of reach (`secret`), and the
/// folder's path as Windows gives it (no `\\?\` prefix).
struct Tree {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    Tree {
        _dir: dir,
        ws,
        outside,
    }
}

fn workspace(t: &Tree) -> Workspace {
    Workspace::new(vec![t.ws.to_str().unwrap().into()], Limits::default())
}

fn is_outside<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::Outside { .. }))
}

/// Every file below `dir` (a listing of our own, to see what a refused write left behind).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn one_file_by_every_form_of_its_path() {
    let t = tree();
    let ws = workspace(&t);
    fs::create_dir(t.ws.join("src")).unwrap();
    fs::write(t.ws.join("src").join("Main.rs"), "fn main() {}\n").unwrap();
    let folder = t.ws.to_str().unwrap().to_string();
    assert!(folder.as_bytes()[1] == b':', "{folder}");
    let slashed = folder.replace('\\', "/");
    let uri = format!("file:///{}", slashed.replace(' ', "%20"));
    for path in [
        r"src\Main.rs".to_string(),
        "src/Main.rs".into(),
        r"src\.\x\..\Main.rs".into(),
        format!(r"{folder}\src\Main.rs"),
        format!("{slashed}/src/Main.rs"),
        format!(r"\\?\{folder}\src\Main.rs"),
        // Another case for the drive, the folder and the file: the same file on Windows.
        format!(r"{}\SRC\main.RS", folder.to_lowercase()),
        format!("{uri}/src/Main.rs"),
        // As the Windows `claude` writes a file's URI: `file://` and the path.
        format!(r"file://{folder}\src\Main.rs"),
    ] {
        let text = ws
            .read_text(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(text.content, "fn main() {}\n", "{path}");
        assert!(
            text.path.starts_with(&folder) && text.path.contains('\\'),
            "{path}: {}",
            text.path
        );
        assert_eq!(ws.line_count(&path).unwrap(), 1, "{path}");
        assert!(ws.regular_file(&path).is_ok(), "{path}");
    }
}

/// `file:///c/...` writes no drive: its wire form is the same as `file:///c:/...`'s, but it
/// names no Windows file (the lsp crate keys it apart from `C:\...`), so it is refused even
/// where the file it would name on drive C exists.
#[test]
fn a_uri_without_a_drive_names_no_file() {
    let t = tree();
    let ws = workspace(&t);
    fs::write(t.ws.join("a.txt"), "a\n").unwrap();
    let folder =
        t.ws.to_str()
            .unwrap()
            .replace('\\', "/")
            .replace(' ', "%20");
    let (letter, rest) = (&folder[..1], &folder[2..]);
    let with_drive = format!("file:///{letter}:{rest}/a.txt");
    assert_eq!(ws.read_text(&with_drive).unwrap().content, "a\n");
    for no_drive in [
        format!("file:///{letter}{rest}/a.txt"),
        format!("file:///{}{rest}/a.txt", letter.to_lowercase()),
        format!("file://localhost/{letter}{rest}/a.txt"),
    ] {
        let refused = ws.read_text(&no_drive);
        assert!(
            matches!(&refused, Err(Error::Outside { .. }) if refused.as_ref().unwrap_err().to_string().contains("names no drive")),
            "{no_drive}: {refused:?}"
        );
        assert!(is_outside(ws.write(&no_drive, b"x")), "write {no_drive}");
    }
    assert_eq!(fs::read_to_string(t.ws.join("a.txt")).unwrap(), "a\n");
}

#[test]
fn paths_outside_the_folder_are_refused() {
    let t = tree();
    let ws = workspace(&t);
    let secret = t.outside.join("secret.txt");
    let other_drive = if t.ws.to_str().unwrap().starts_with(['Z', 'z']) {
        r"Y:\x.txt"
    } else {
        r"Z:\x.txt"
    };
    for path in [
        secret.to_str().unwrap().to_string(),
        format!(r"\\?\{}", secret.display()),
        r"..\outside\secret.txt".into(),
        r"src\..\..\outside\secret.txt".into(),
        format!(r"{}\..\outside\secret.txt", t.ws.display()),
        other_drive.into(),
        r"\\server\share\x.txt".into(),
        r"\\.\C:\x.txt".into(),
        r"\x.txt".into(),
        "C:x.txt".into(),
        "file:///etc/passwd".into(),
        String::new(),
    ] {
        assert!(is_outside(ws.read_text(&path)), "read {path}");
        assert!(is_outside(ws.write(&path, b"x")), "write {path}");
        assert!(is_outside(ws.writable(&path)), "writable {path}");
    }
    assert_eq!(fs::read_to_string(&secret).unwrap(), "secret\n");
    assert_eq!(files_below(&t.ws), Vec::<PathBuf>::new());
}

/// `CON`, `NUL`, `COM1` name a device in every directory, `a.txt:s` a stream of `a.txt`, and
/// `a.txt.` / `a.txt ` the file `a.txt`: each is refused, and nothing is read from or written to
/// what Windows would have taken it for.
#[test]
fn names_windows_reads_as_something_else_are_refused() {
    let t = tree();
    let ws = workspace(&t);
    fs::write(t.ws.join("a.txt"), "a\n").unwrap();
    for name in [
        "CON",
        "nul",
        "NUL.txt",
        "COM1",
        "com1.log",
        "LPT1",
        "AUX",
        "PRN",
        "CONIN$",
        "a.txt:stream",
        "a.txt::$DATA",
        "a.txt.",
        "a.txt ",
        "a.txt. .",
        r"dir.\b.txt",
        "a*.txt",
        "a?.txt",
    ] {
        assert!(is_outside(ws.read_text(name)), "read {name}");
        assert!(is_outside(ws.write(name, b"x")), "write {name}");
        assert!(is_outside(ws.writable(name)), "writable {name}");
        let nested = format!(r"sub\{name}");
        assert!(is_outside(ws.write(&nested, b"x")), "write {nested}");
    }
    assert_eq!(fs::read_to_string(t.ws.join("a.txt")).unwrap(), "a\n");
    assert_eq!(files_below(&t.ws), vec![t.ws.join("a.txt")]);
    // Names that only look like those are files like any other.
    for name in ["CONFIG", "console.log", "COM10", "a. b.txt", "..a"] {
        ws.write(name, name.as_bytes()).unwrap();
        assert_eq!(ws.read_text(name).unwrap().content, name);
    }
}

/// A short (8.3) name inside a folder names a file in the same directory, or nothing (Windows
/// may not make short names): never one outside. The folder named by a short name in an
/// absolute path is not the folder, and is refused.
#[test]
fn short_names_stay_inside() {
    let t = tree();
    let ws = workspace(&t);
    fs::create_dir(t.ws.join("a-long-directory-name")).unwrap();
    fs::write(t.ws.join("a-long-directory-name").join("f.txt"), "f\n").unwrap();
    match ws.read_text(r"A-LONG~1\f.txt") {
        Ok(text) => assert_eq!(text.content, "f\n"),
        Err(Error::NotFound { .. }) => {}
        Err(e) => panic!("a short name: {e}"),
    }
    let parent = t.ws.parent().unwrap();
    let short = format!(r"{}\WS~1\a-long-directory-name\f.txt", parent.display());
    assert!(is_outside(ws.read_text(&short)), "{short}");
}

/// The workspace folder named in another case: where names ignore case (NTFS's default) it is
/// the folder; in a case-sensitive directory (what WSL makes on a Windows drive; here Wine's
/// view of a Linux folder holding both `proj` and `PROJ`, which scripts/test-all.d/platforms.sh
/// makes) `PROJ` is another directory, and a path through it is refused: it was resolved from
/// `proj`'s handle, and claude, writing the path as given, wrote into `PROJ`.
#[test]
fn a_folder_in_another_case_is_another_directory_where_case_counts() {
    let t = tree();
    let ws = workspace(&t);
    fs::write(t.ws.join("a.txt"), "in\n").unwrap();
    let parent = t.ws.parent().unwrap().display().to_string();
    for spelled in [format!(r"{parent}\WS\a.txt"), format!(r"{parent}\Ws\A.TXT")] {
        assert_eq!(ws.read_text(&spelled).unwrap().content, "in\n", "{spelled}");
        assert!(ws.writable(&spelled).is_ok(), "{spelled}");
    }
    let Ok(pair) = std::env::var("CLAUDE_IDE_BRIDGE_TEST_CASE_PAIR") else {
        claude_ide_bridge_testsupport::skip::tool_missing(
            "no case-sensitive directory (scripts/test-all.d/platforms.sh makes one)",
        );
        return;
    };
    let ws = Workspace::new(vec![format!(r"{pair}\proj")], Limits::default());
    let inside = format!(r"{pair}\proj\target.txt");
    assert_eq!(ws.read_text(&inside).unwrap().content, "in\n");
    for through in [
        format!(r"{pair}\PROJ\target.txt"),
        format!(r"{pair}\PROJ\new\evil.txt"),
    ] {
        assert!(is_outside(ws.writable(&through)), "{through}");
        assert!(is_outside(ws.read_text(&through)), "{through}");
    }
}

/// A path past `MAX_PATH` (260 UTF-16 units), a dozen directories deep.
fn deep_path(t: &Tree) -> (String, String) {
    let deep: Vec<String> = (0..12)
        .map(|i| format!("directory-{i:02}-{}", "x".repeat(16)))
        .collect();
    let path = format!(r"{}\file.txt", deep.join(r"\"));
    let full = format!(r"{}\{path}", t.ws.display());
    assert!(full.len() > 300, "{}", full.len());
    (path, full)
}

/// Past `MAX_PATH`: each component is opened relative to its directory's handle, so a long path
/// is read like any other.
#[test]
fn paths_past_max_path_are_read() {
    let t = tree();
    let ws = workspace(&t);
    let (path, full) = deep_path(&t);
    let verbatim = PathBuf::from(format!(r"\\?\{full}"));
    fs::create_dir_all(verbatim.parent().unwrap()).unwrap();
    fs::write(&verbatim, "deep\n").unwrap();
    assert_eq!(ws.read_text(&full).unwrap().content, "deep\n");
    assert_eq!(ws.read_text(&path).unwrap().content, "deep\n");
    assert_eq!(ws.line_count(&path).unwrap(), 1);
    assert_eq!(ws.regular_file(&path).unwrap(), full);
}

/// Past `MAX_PATH`, writes (directories made, the file renamed into place) and listings work
/// too. (Not under Wine 8.0, whose `GetFinalPathNameByHandleW` stops at `MAX_PATH`: cap-std
/// names a directory by its handle's path to make a directory in it, rename in it or list it.)
#[test]
fn paths_past_max_path_are_written_and_listed() {
    let t = tree();
    let ws = workspace(&t);
    let (path, full) = deep_path(&t);
    assert_eq!(ws.write(&path, b"deep\n").unwrap(), full);
    assert_eq!(ws.read_text(&full).unwrap().content, "deep\n");
    let listed = ws.list(Some("file.txt")).unwrap();
    assert_eq!(listed.files, vec![full.clone()]);
    assert_eq!(fs::read(format!(r"\\?\{full}")).unwrap(), b"deep\n");
}

#[test]
fn only_regular_files_within_the_limit_are_read() {
    let t = tree();
    fs::create_dir(t.ws.join("dir")).unwrap();
    fs::write(t.ws.join("big.txt"), vec![b'x'; 2048]).unwrap();
    fs::write(t.ws.join("bin"), [0xff, 0xfe, 0x00]).unwrap();
    let ws = Workspace::new(
        vec![t.ws.to_str().unwrap().into()],
        Limits {
            max_read_bytes: 1024,
            ..Limits::default()
        },
    );
    assert!(matches!(
        ws.read_text("dir"),
        Err(Error::NotRegular {
            kind: "a directory",
            ..
        })
    ));
    assert!(matches!(ws.read_text("."), Err(Error::NotRegular { .. })));
    assert!(matches!(
        ws.line_count("dir"),
        Err(Error::NotRegular { .. })
    ));
    assert!(matches!(
        ws.read("big.txt"),
        Err(Error::TooLarge {
            size: 2048,
            limit: 1024,
            ..
        })
    ));
    assert!(matches!(
        ws.line_count("big.txt"),
        Err(Error::TooLarge { .. })
    ));
    // A path through a file is said for what it is, not "no such file".
    let through_a_file = ws.write(r"big.txt\x\y", b"x").unwrap_err();
    assert_eq!(
        through_a_file.to_string(),
        r"big.txt\x\y: big.txt is not a directory"
    );
    // A file as the last directory on the way (it was "creating a directory failed: File
    // already exists. (os error 183)", an internal error).
    let under_a_file = ws.write(r"big.txt\x", b"x").unwrap_err();
    assert_eq!(
        under_a_file.to_string(),
        r"big.txt\x: big.txt is not a directory"
    );
    assert!(matches!(
        ws.read_text(r"big.txt\x"),
        Err(Error::NotADirectory { .. })
    ));
    assert!(matches!(
        ws.read_text(r"missing\x"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(ws.read_text("bin"), Err(Error::NotText { .. })));
    assert!(matches!(
        ws.read_text("missing.txt"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        ws.read_text(r"missing\a.txt"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        ws.write("dir", b"x"),
        Err(Error::NotRegular { .. })
    ));
    assert!(matches!(ws.writable("dir"), Err(Error::NotRegular { .. })));
    // A path ending with `\.` or `\..` names a directory: no file is made of what is left.
    for path in [r"new\.", r"x\y\..", "new/."] {
        assert!(
            matches!(ws.write(path, b"x"), Err(Error::NotRegular { .. })),
            "{path}"
        );
    }
    assert!(!t.ws.join("new").exists() && !t.ws.join("x").exists());
    assert!(ws.write(r"big.txt\x", b"x").is_err());
    assert_eq!(fs::read(t.ws.join("big.txt")).unwrap().len(), 2048);
}

/// A file's access list (its DACL) in SDDL, read by path.
fn access_list(path: &Path) -> String {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Foundation::LocalFree;
    use windows_sys::Win32::Security::Authorization::{
        ConvertSecurityDescriptorToStringSecurityDescriptorW, SDDL_REVISION_1,
    };
    use windows_sys::Win32::Security::{GetFileSecurityW, DACL_SECURITY_INFORMATION};
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    let mut buf = vec![0u8; 64 * 1024];
    let mut needed = 0u32;
    // SAFETY: `wide` is NUL-terminated; `buf` is writable for the length given.
    let ok = unsafe {
        GetFileSecurityW(
            wide.as_ptr(),
            DACL_SECURITY_INFORMATION,
            buf.as_mut_ptr().cast(),
            buf.len() as u32,
            &mut needed,
        )
    };
    assert!(ok != 0, "{}", std::io::Error::last_os_error());
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: `buf` holds the descriptor just read; `text` is allocated by the call, read up to
    // its NUL and freed once.
    unsafe {
        let ok = ConvertSecurityDescriptorToStringSecurityDescriptorW(
            buf.as_mut_ptr().cast(),
            SDDL_REVISION_1,
            DACL_SECURITY_INFORMATION,
            &mut text,
            std::ptr::null_mut(),
        );
        assert!(ok != 0, "{}", std::io::Error::last_os_error());
        let len = (0..).take_while(|&i| *text.add(i) != 0).count();
        let s = String::from_utf16_lossy(std::slice::from_raw_parts(text, len));
        LocalFree(text.cast());
        s
    }
}

/// Gives a file the access list `sddl` (a DACL in SDDL), by path.
fn set_access_list(path: &Path, sddl: &str) {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Foundation::LocalFree;
    use windows_sys::Win32::Security::Authorization::{
        ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
    };
    use windows_sys::Win32::Security::{SetFileSecurityW, DACL_SECURITY_INFORMATION};
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    let text: Vec<u16> = sddl.encode_utf16().chain([0]).collect();
    let mut sd = std::ptr::null_mut();
    // SAFETY: both strings are NUL-terminated; `sd` is allocated by the call and freed once.
    unsafe {
        let ok = ConvertStringSecurityDescriptorToSecurityDescriptorW(
            text.as_ptr(),
            SDDL_REVISION_1,
            &mut sd,
            std::ptr::null_mut(),
        );
        assert!(ok != 0, "{sddl}: {}", std::io::Error::last_os_error());
        let ok = SetFileSecurityW(wide.as_ptr(), DACL_SECURITY_INFORMATION, sd);
        assert!(ok != 0, "{}", std::io::Error::last_os_error());
        LocalFree(sd);
    }
}

/// `sddl` without its entries for everyone (`WD`).
fn without_everyone(sddl: &str) -> String {
    let mut out = String::new();
    for part in sddl.split_inclusive(')') {
        match part.find('(') {
            Some(at) if part.ends_with(";WD)") => out.push_str(&part[..at]),
            _ => out.push_str(part),
        }
    }
    out
}

/// A write keeps the file's access list: a file only its owner (and the system) may read, in a
/// folder that passes on the same, does not become readable by everyone at its next write, as a
/// new file there does (Wine gives a new file its umask's mode, not the folder's list; Windows
/// the folder's list). Under Wine a list is kept as the file's mode, so that is what this shows;
/// a protected list (`D:P`) is given as protected, which Wine cannot show.
#[test]
fn writes_keep_the_access_list() {
    let t = tree();
    let folder = without_everyone(&access_list(&t.ws));
    set_access_list(&t.ws, &folder);
    let f = t.ws.join("private.env");
    fs::write(&f, "old\n").unwrap();
    set_access_list(&f, &without_everyone(&access_list(&f)));
    let before = access_list(&f);
    assert!(!before.contains(";WD)"), "{before}");
    let fresh = t.ws.join("fresh.txt");
    fs::write(&fresh, "").unwrap();
    assert_ne!(access_list(&fresh), before, "a new file gets another list");

    let ws = Workspace::new(vec![t.ws.to_str().unwrap().into()], Limits::default());
    ws.write(f.to_str().unwrap(), b"new\n").unwrap();
    assert_eq!(fs::read_to_string(&f).unwrap(), "new\n");
    assert_eq!(access_list(&f), before);
    // No temporary file left.
    let names: Vec<_> = fs::read_dir(&t.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// A write replaces the file in one step (a temporary file beside it, then a rename over it),
/// creates the missing directories, leaves no temporary file, and refuses a read-only file
/// without touching it.
#[test]
fn writes_replace_atomically() {
    let t = tree();
    let ws = workspace(&t);
    fs::write(t.ws.join("a.txt"), "old\n").unwrap();
    // Written through another case, the file keeps its name (and is shown by it).
    assert_eq!(
        ws.write("A.TXT", b"new\n").unwrap(),
        format!(r"{}\a.txt", t.ws.display())
    );
    assert_eq!(fs::read_to_string(t.ws.join("a.txt")).unwrap(), "new\n");
    ws.write(r"new\dir/b.txt", b"b\n").unwrap();
    assert_eq!(
        fs::read_to_string(t.ws.join(r"new\dir\b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(
        ws.writable(r"new\other\c.txt").unwrap(),
        format!(r"{}\new\other\c.txt", t.ws.display())
    );
    assert!(
        !t.ws.join(r"new\other").exists(),
        "writable creates nothing"
    );
    let ro = t.ws.join("ro.txt");
    fs::write(&ro, "keep\n").unwrap();
    let mut perms = fs::metadata(&ro).unwrap().permissions();
    perms.set_readonly(true);
    fs::set_permissions(&ro, perms.clone()).unwrap();
    let refused = ws.write("ro.txt", b"changed\n").unwrap_err();
    assert!(refused.to_string().contains("read-only"), "{refused}");
    assert_eq!(fs::read_to_string(&ro).unwrap(), "keep\n");
    // Nor is it said to be writable (an openDiff of it was accepted, and claude's write failed).
    let refused = ws.writable("ro.txt").unwrap_err();
    assert!(refused.to_string().contains("read-only"), "{refused}");
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    fs::set_permissions(&ro, perms).unwrap();
    let names: Vec<String> = files_below(&t.ws)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    assert_eq!(names.len(), 3, "{names:?}");
}

/// A symbolic link (file or directory) that leads out of the folder is refused for reads and
/// writes and left out of listings; one that stays inside is followed. Skipped, with a message,
/// where the system does not let this process make symbolic links (Windows without developer
/// mode or the privilege).
#[test]
fn links_leading_out_are_refused() {
    let t = tree();
    let ws = workspace(&t);
    fs::create_dir(t.ws.join("in")).unwrap();
    fs::write(t.ws.join("in").join("a.txt"), "a\n").unwrap();
    let made = std::os::windows::fs::symlink_dir(&t.outside, t.ws.join("out-dir")).and_then(|_| {
        std::os::windows::fs::symlink_file(t.outside.join("secret.txt"), t.ws.join("out.txt"))?;
        std::os::windows::fs::symlink_file(r"..\outside\secret.txt", t.ws.join("up.txt"))?;
        std::os::windows::fs::symlink_dir("in", t.ws.join("in-link"))
    });
    if let Err(e) = made {
        claude_ide_bridge_testsupport::skip::skip(&format!(
            "this process may not make symbolic links ({e})"
        ));
        return;
    }
    // (Wine 8.0 answers success and makes nothing: this test is skipped there, see
    // docs/platforms.md.)
    assert!(
        fs::symlink_metadata(t.ws.join("out-dir")).is_ok_and(|m| m.file_type().is_symlink()),
        "the link was not made"
    );
    for path in [
        r"out-dir\secret.txt",
        "out.txt",
        "up.txt",
        r"out-dir\new.txt",
    ] {
        assert!(is_outside(ws.read_text(path)), "read {path}");
        assert!(ws.write(path, b"x").is_err(), "write {path}");
    }
    assert!(is_outside(ws.writable(r"out-dir\new.txt")));
    assert_eq!(ws.read_text(r"in-link\a.txt").unwrap().content, "a\n");
    assert_eq!(
        fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(files_below(&t.outside), vec![t.outside.join("secret.txt")]);
    let listed = ws.list(None).unwrap();
    assert_eq!(
        listed.files,
        vec![format!(r"{}\in\a.txt", t.ws.display())],
        "links are neither listed nor followed"
    );
}

/// A junction (a mount point: always an absolute target) to a directory outside is refused;
/// made with `mklink /J`.
#[test]
fn junctions_leading_out_are_refused() {
    let t = tree();
    let ws = workspace(&t);
    let made = std::process::Command::new("cmd")
        .args(["/C", "mklink", "/J"])
        .arg(t.ws.join("junction"))
        .arg(&t.outside)
        .output();
    // Any user may make a junction on Windows (Wine 8.0's `cmd` cannot: this test is skipped
    // there, see docs/platforms.md).
    let out = made.unwrap();
    assert!(out.status.success(), "mklink /J: {out:?}");
    assert!(t.ws.join("junction").exists());
    assert!(is_outside(ws.read_text(r"junction\secret.txt")));
    assert!(ws.write(r"junction\new.txt", b"x").is_err());
    assert!(!t.outside.join("new.txt").exists());
    assert!(ws.list(None).unwrap().files.is_empty());
}

#[test]
fn listings_skip_ignored_files_and_name_files_the_windows_way() {
    let t = tree();
    let ws = workspace(&t);
    for f in [
        r"src\a.rs",
        r"src\b.txt",
        r"target\debug\x.rs",
        // Ignored by `build/`: git matches ignore rules ignoring case on Windows
        // (core.ignoreCase).
        r"Build\y.rs",
        ".gitignore",
        r".git\config",
    ] {
        let p = t.ws.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(
            p,
            if f == ".gitignore" {
                "target/\nbuild/\n"
            } else {
                ""
            },
        )
        .unwrap();
    }
    let folder = t.ws.to_str().unwrap();
    let listing = ws.list(None).unwrap();
    assert_eq!(
        listing.files,
        vec![
            format!(r"{folder}\.gitignore"),
            format!(r"{folder}\src\a.rs"),
            format!(r"{folder}\src\b.txt"),
        ]
    );
    assert!(!listing.truncated);
    assert_eq!(
        ws.list(Some("src/*.rs")).unwrap().files,
        vec![format!(r"{folder}\src\a.rs")]
    );
    let info = ws.info();
    assert_eq!((info.file_count, info.kind), (3, "git"));
    assert_eq!(info.name, "ws");
    let small = Workspace::new(
        vec![folder.into()],
        Limits {
            max_walk_entries: 2,
            ..Limits::default()
        },
    );
    assert!(small.list(None).unwrap().truncated);
}

/// A folder given in another form (`/` separators, another case, `\\?\`) is the same folder.
#[test]
fn folders_in_any_form() {
    let t = tree();
    fs::write(t.ws.join("a.txt"), "a\n").unwrap();
    let folder = t.ws.to_str().unwrap();
    for given in [
        folder.replace('\\', "/"),
        folder.to_uppercase(),
        format!(r"\\?\{folder}"),
        format!(r"{folder}\"),
    ] {
        let ws = Workspace::new(vec![given.clone()], Limits::default());
        assert_eq!(ws.read_text("a.txt").unwrap().content, "a\n", "{given}");
        assert_eq!(
            ws.read_text(&format!(r"{folder}\a.txt")).unwrap().content,
            "a\n",
            "{given}"
        );
        assert!(
            is_outside(ws.read_text(r"..\outside\secret.txt")),
            "{given}"
        );
    }
}

/// Every `.tmp` file below `dir` (a write's temporary file left behind), `dir` read by its
/// `\\?\` form so that a path past `MAX_PATH` is read too.
fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    files_below(&PathBuf::from(format!(r"\\?\{}", dir.display())))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect()
}

/// A folder on a network share is refused when the workspace is made, with what to do
/// instead: cap-std names a directory there by a path relative to the current directory
/// (`UNC\server\share\...`), so every write failed (leaving its temporary file) and listings
/// came back empty. Nothing is made in the current directory.
#[test]
fn network_share_folders_are_refused_with_what_to_do() {
    let unc = std::env::current_dir().unwrap().join("UNC");
    let there_before = unc.exists();
    for folder in [
        r"\\server\share\ws",
        r"\\?\UNC\server\share\ws",
        "//server/share/ws",
        r"\\wsl.localhost\Ubuntu\home\me\ws",
    ] {
        let ws = Workspace::new(vec![folder.into()], Limits::default());
        let file = format!(r"{folder}\src\a.txt");
        let answers = [
            ("read", ws.read_text("a.txt").map(drop)),
            ("read absolute", ws.read_text(&file).map(drop)),
            ("write", ws.write(r"src\a.txt", b"x").map(drop)),
            ("writable", ws.writable("a.txt").map(drop)),
            ("check", ws.regular_file("a.txt").map(drop)),
            ("list", ws.list(None).map(drop)),
        ];
        for (what, answer) in answers {
            let e = answer.expect_err(what).to_string();
            assert!(
                e.contains("is on a network share") && e.contains("run the bridge"),
                "{what} in {folder}: {e}"
            );
        }
        assert!(ws.info().file_count_truncated, "{folder}");
    }
    assert_eq!(unc.exists(), there_before);
}

/// A file written by another spelling of its name (another case; its short 8.3 name) keeps the
/// name it has on disk, and the write answers with that name: on NTFS a rename over it by the
/// spelling given renamed it (the long name lost). (Wine keeps the name on disk; the answer
/// echoed the spelling given.)
#[test]
fn writes_by_another_spelling_keep_the_name_on_disk() {
    let t = tree();
    let ws = workspace(&t);
    let folder = t.ws.to_str().unwrap();
    fs::write(t.ws.join("Readme.md"), "old\n").unwrap();
    fs::create_dir(t.ws.join("src")).unwrap();
    fs::write(t.ws.join("src").join("Main.rs"), "old\n").unwrap();
    assert_eq!(
        ws.write("README.MD", b"new\n").unwrap(),
        format!(r"{folder}\Readme.md")
    );
    assert_eq!(
        ws.write(r"src\MAIN.RS", b"new\n").unwrap(),
        format!(r"{folder}\src\Main.rs")
    );
    let long = "a-very-long-file-name.txt";
    fs::write(t.ws.join(long), "old\n").unwrap();
    // Its short name, as Windows (or Wine) made it (`dir /x` shows it before the long name);
    // none where the volume makes none.
    let out = std::process::Command::new("cmd")
        .args(["/C", "dir", "/x"])
        .arg(&t.ws)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let short = listed
        .lines()
        .find_map(|l| {
            let before = l.trim_end().strip_suffix(long)?;
            before.split_whitespace().last().map(str::to_string)
        })
        .unwrap_or_default();
    let mut expected = vec![
        format!(r"{folder}\Readme.md"),
        format!(r"{folder}\{long}"),
        format!(r"{folder}\src\Main.rs"),
    ];
    if !short.contains('~') || ws.read_text(&short).is_err() {
        eprintln!("skipped the short name: none here ({listed})");
    } else {
        assert_eq!(
            ws.write(&short, b"new\n").unwrap(),
            format!(r"{folder}\{long}"),
            "{short}"
        );
    }
    expected.sort();
    assert_eq!(ws.list(None).unwrap().files, expected);
    for f in ["Readme.md", r"src\Main.rs"] {
        assert_eq!(fs::read_to_string(t.ws.join(f)).unwrap(), "new\n", "{f}");
    }
    assert_eq!(temporary_files(&t.ws), Vec::<PathBuf>::new());
}

/// Opens `path` with no sharing at all (as a program that locks the file does), holds it for
/// `ms` milliseconds on another thread, and returns once it is open.
fn hold_open(path: PathBuf, ms: u64) -> std::thread::JoinHandle<()> {
    hold_open_sharing(path, ms, 0)
}

/// [`hold_open`], sharing `share` (`FILE_SHARE_*`) with other programs.
fn hold_open_sharing(path: PathBuf, ms: u64, share: u32) -> std::thread::JoinHandle<()> {
    use std::os::windows::fs::OpenOptionsExt;
    let (opened, is_open) = std::sync::mpsc::channel();
    let held = std::thread::spawn(move || {
        let file = fs::OpenOptions::new()
            .read(true)
            .share_mode(share)
            .open(&path)
            .unwrap();
        opened.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(ms));
        drop(file);
    });
    is_open.recv().unwrap();
    held
}

/// A file another program holds open briefly is replaced once it lets go (the rename is tried
/// again for about half a second); one held longer is left as it was, with a message saying
/// why, and no temporary file: held without any sharing, or sharing everything (delete
/// included), which Windows and Wine refuse to replace all the same, with access denied.
#[test]
fn a_file_held_open_is_waited_for_briefly() {
    let t = tree();
    let ws = workspace(&t);
    let a = t.ws.join("a.txt");
    fs::write(&a, "old\n").unwrap();
    let held = hold_open(a.clone(), 100);
    ws.write("a.txt", b"new\n").unwrap();
    held.join().unwrap();
    assert_eq!(fs::read_to_string(&a).unwrap(), "new\n");

    // FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE.
    for share in [0, 0x1 | 0x2 | 0x4] {
        let held = hold_open_sharing(a.clone(), 2000, share);
        let start = std::time::Instant::now();
        let refused = ws.write("a.txt", b"newer\n").unwrap_err();
        let waited = start.elapsed();
        held.join().unwrap();
        assert!(
            refused.to_string().contains("open in another program"),
            "sharing {share}: {refused}"
        );
        assert!(
            waited >= std::time::Duration::from_millis(400),
            "sharing {share}: {waited:?}"
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "new\n");
        assert_eq!(temporary_files(&t.ws), Vec::<PathBuf>::new());
    }
}

/// A write that fails after its temporary file was made removes that file through a handle of
/// its own, not by a path: past `MAX_PATH` under Wine, cap-std can name no directory by its
/// path, so the rename fails and a removal by path failed too (on Windows the write succeeds).
#[test]
fn a_failed_write_leaves_no_temporary_file() {
    let t = tree();
    let ws = workspace(&t);
    let (path, full) = deep_path(&t);
    let verbatim = PathBuf::from(format!(r"\\?\{full}"));
    fs::create_dir_all(verbatim.parent().unwrap()).unwrap();
    match ws.write(&path, b"deep\n") {
        Ok(shown) => assert_eq!(shown, full),
        Err(e) => eprintln!("the write failed (Wine past MAX_PATH): {e}"),
    }
    assert_eq!(temporary_files(&t.ws), Vec::<PathBuf>::new());
}

/// A replaced file keeps its hidden and system attributes; a new file gets none of them.
#[test]
fn replacing_a_file_keeps_its_attributes() {
    use std::io::Write;
    use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
    const HIDDEN_SYSTEM: u32 = 0x2 | 0x4;
    let t = tree();
    let ws = workspace(&t);
    let hidden = t.ws.join("hidden.txt");
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .attributes(HIDDEN_SYSTEM)
        .open(&hidden)
        .unwrap()
        .write_all(b"old\n")
        .unwrap();
    let attributes = |p: &Path| fs::metadata(p).unwrap().file_attributes();
    assert_eq!(attributes(&hidden) & HIDDEN_SYSTEM, HIDDEN_SYSTEM);
    ws.write("hidden.txt", b"new\n").unwrap();
    assert_eq!(fs::read_to_string(&hidden).unwrap(), "new\n");
    assert_eq!(
        attributes(&hidden) & HIDDEN_SYSTEM,
        HIDDEN_SYSTEM,
        "{:#x}",
        attributes(&hidden)
    );
    ws.write("new.txt", b"new\n").unwrap();
    assert_eq!(attributes(&t.ws.join("new.txt")) & HIDDEN_SYSTEM, 0);
}

/// A folder given inside another one in another case is listed once, as part of the outer one.
#[test]
fn nested_folders_in_another_case_are_listed_once() {
    let t = tree();
    fs::create_dir(t.ws.join("sub")).unwrap();
    fs::write(t.ws.join("sub").join("a.txt"), "a\n").unwrap();
    let folder = t.ws.to_str().unwrap().to_string();
    let sub = format!(r"{}\SUB", folder.to_uppercase());
    for folders in [
        vec![folder.clone(), sub.clone()],
        vec![sub.clone(), folder.clone()],
    ] {
        let ws = Workspace::new(folders.clone(), Limits::default());
        let files = ws.list(None).unwrap().files;
        assert_eq!(files.len(), 1, "{folders:?}: {files:?}");
        assert_eq!(ws.info().file_count, 1, "{folders:?}");
    }
}

/// `listFiles` patterns the Windows way: names compared ignoring case (as the ignore rules are),
/// `\` a separator, a drive or share at the start an absolute pattern.
#[test]
fn list_patterns_the_windows_way() {
    let t = tree();
    let ws = workspace(&t);
    for f in [r"src\a.rs", r"src\b.txt", "top.txt"] {
        let p = t.ws.join(f);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "").unwrap();
    }
    let folder = t.ws.to_str().unwrap();
    let a = vec![format!(r"{folder}\src\a.rs")];
    for pattern in [
        "*.RS".to_string(),
        r"src\*.rs".into(),
        r"SRC\*.rs".into(),
        format!(r"{folder}\src\*.rs"),
        format!(r"{}\SRC\*.rs", folder.to_lowercase()),
        format!(r"{folder}\**\*.rs"),
        format!(r"\\?\{folder}\src\*.rs"),
        format!("{}/src/*.rs", folder.replace('\\', "/")),
    ] {
        assert_eq!(ws.list(Some(&pattern)).unwrap().files, a, "{pattern}");
    }
    assert!(ws.list(Some(r"src\*.md")).unwrap().files.is_empty());
}

/// Names that every path to them is refused for (made through `\\?\`) are not listed: a client
/// could neither read nor write what it was given.
#[test]
fn listings_leave_out_names_windows_reads_otherwise() {
    let t = tree();
    let ws = workspace(&t);
    fs::write(t.ws.join("ok.txt"), "").unwrap();
    for name in ["nul.txt", "aux.c", "trail.", "trail "] {
        let p = format!(r"\\?\{}\{name}", t.ws.display());
        if let Err(e) = fs::write(&p, "") {
            eprintln!("{name} not made here: {e}");
        }
    }
    let folder = t.ws.to_str().unwrap();
    assert_eq!(
        ws.list(None).unwrap().files,
        vec![format!(r"{folder}\ok.txt")]
    );
    assert_eq!(ws.info().file_count, 1);
}

/// The workspace folder itself renamed while the bridge runs: an access says it was the folder,
/// not "no such file".
#[test]
fn a_workspace_folder_gone_is_not_a_missing_file() {
    let t = tree();
    fs::write(t.ws.join("a.txt"), "a\n").unwrap();
    let ws = workspace(&t);
    assert!(ws.read_text("a.txt").is_ok());
    fs::rename(&t.ws, t.ws.with_extension("moved")).unwrap();
    let e = ws.read_text("a.txt").unwrap_err();
    assert!(!matches!(e, Error::NotFound { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("opening the workspace folder failed"),
        "{e}"
    );
}

/// A write that fails leaves no directory it made for the file (a last name longer than a name
/// can be, refused once the folders above it were made); a folder that was there stays.
#[test]
fn a_failed_write_leaves_no_directory_it_made() {
    let t = tree();
    let ws = workspace(&t);
    let long = "n".repeat(300);
    let answer = ws.write(&format!(r"new\sub\{long}"), b"x");
    assert!(answer.is_err(), "{answer:?}");
    assert!(!t.ws.join("new").exists(), "made for a write that failed");
    fs::create_dir(t.ws.join("kept")).unwrap();
    assert!(ws.write(&format!(r"kept\new\{long}"), b"x").is_err());
    assert!(t.ws.join("kept").is_dir());
    assert_eq!(fs::read_dir(t.ws.join("kept")).unwrap().count(), 0);
}

/// Links out of the workspace that the walk does not see as links: Unix symbolic links under
/// Wine, which shows each as the file or directory it leads to (a real Windows link or junction
/// is refused by the walk, above). What the system finally names the file (its deepest part
/// that exists) must be inside the folder too: reads, checks and writes through them are
/// refused, and nothing is written outside; a link that stays inside is followed.
/// `scripts/test-all.d/platforms.sh` makes the links from Linux
/// (`CLAUDE_IDE_BRIDGE_TEST_LINKS_OUT`: `ws\to_file`, `ws\to_dir` lead to `outside\`,
/// `ws\inside` to `ws\a.txt`).
#[test]
fn links_the_walk_does_not_see_are_refused_by_where_they_lead() {
    let Ok(root) = std::env::var("CLAUDE_IDE_BRIDGE_TEST_LINKS_OUT") else {
        claude_ide_bridge_testsupport::skip::tool_missing(
            "no links made from outside (scripts/test-all.d/platforms.sh makes them under Wine)",
        );
        return;
    };
    let ws = Workspace::new(vec![format!(r"{root}\ws")], Limits::default());
    assert_eq!(ws.read_text("inside").unwrap().content, "in\n");
    assert!(ws.writable("inside").is_ok());
    for through in [r"to_file", r"to_dir\secret.txt"] {
        assert!(is_outside(ws.read_text(through)), "{through}");
        assert!(is_outside(ws.regular_file(through)), "{through}");
        assert!(is_outside(ws.writable(through)), "{through}");
        assert!(is_outside(ws.write(through, b"owned\n")), "{through}");
    }
    for new in [r"to_dir\new.txt", r"to_dir\deeper\new.txt"] {
        assert!(is_outside(ws.writable(new)), "{new}");
        assert!(is_outside(ws.write(new, b"owned\n")), "{new}");
    }
    let outside = PathBuf::from(format!(r"{root}\outside"));
    assert_eq!(
        fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(files_below(&outside), [outside.join("secret.txt")]);
}

/// `replace` writes only over the text it was given as read (`reformat_file`'s write): a file
/// saved or deleted since is left as it is, looked at once the new text is on disk, just before
/// the rename; nothing of the write stays. (Windows has no swap of two names in one step: a save
/// in the microseconds between that look and the rename is not seen.)
#[test]
fn a_replace_writes_only_over_the_text_read() {
    let t = tree();
    let ws = workspace(&t);
    let p = t.ws.join("a.py");
    let changed = |r: Result<String, Error>| matches!(r, Err(Error::Changed { .. }));
    fs::write(&p, "x=2\n").unwrap();
    assert!(changed(ws.replace("A.PY", b"x = 1\n", b"x=1\n")));
    assert_eq!(fs::read_to_string(&p).unwrap(), "x=2\n");
    ws.replace("a.py", b"x = 2\n", b"x=2\n").unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "x = 2\n");
    fs::remove_file(&p).unwrap();
    assert!(changed(ws.replace("a.py", b"x = 2\n", b"x = 2\n")));
    assert!(!p.exists(), "a file deleted meanwhile was made again");
    assert!(files_below(&t.ws).is_empty(), "{:?}", files_below(&t.ws));
}

/// The temporary file of a write killed before its rename is no workspace file (listings leave it
/// out), and the next write in its folder removes it once it is an hour old.
#[test]
fn a_temporary_file_a_killed_write_left_is_not_listed_and_goes_at_the_next_write() {
    let t = tree();
    let ws = workspace(&t);
    fs::write(t.ws.join("a.py"), "x = 1\n").unwrap();
    let old = t.ws.join(".claude-ide-bridge.4242.0.0abc1234.tmp");
    let young = t.ws.join(".claude-ide-bridge.4243.1.1abc1234.tmp");
    for p in [&old, &young] {
        fs::write(p, "half of a.py").unwrap();
    }
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3700);
    (fs::File::options().write(true).open(&old).unwrap())
        .set_modified(hour_ago)
        .unwrap();
    let listing = ws.list(None).unwrap();
    assert_eq!(listing.files, [format!(r"{}\a.py", t.ws.display())]);
    ws.write("a.py", b"x = 2\n").unwrap();
    assert!(!old.exists(), "left behind an hour ago");
    assert!(young.exists());
}
