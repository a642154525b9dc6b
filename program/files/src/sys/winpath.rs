//! Paths as Windows reads them, parsed without asking Windows: the lexical step of resolution
//! for the Windows backend (issue 31). Pure string work, so it is compiled and tested on every
//! OS; only Windows resolves with it.
//!
//! A wire path is split into a root (a drive letter, or a UNC share) and plain components:
//! `/` and `\` both separate, `.` and `..` are resolved lexically (`..` may not climb above the
//! root), and the verbatim (`\\?\C:\`, `\\?\UNC\server\share\`) and plain forms of one root are
//! the same root. Drive letters and names compare case-insensitively, as NTFS does by default.
//!
//! Each component is then checked for what Windows would read another way than written, and
//! refused:
//!
//! - reserved device names (`CON`, `PRN`, `AUX`, `NUL`, `COM0`-`COM9`, `LPT0`-`LPT9`, the
//!   superscript-digit forms, `CONIN$`, `CONOUT$`), with or without an extension: they name a
//!   device in every directory;
//! - `:` (an alternate data stream, `a.txt:stream`, or a drive in the middle of a path);
//! - trailing dots and spaces, which Windows strips (`a.txt.` names `a.txt`);
//! - the characters Windows refuses in names (`<>"|?*`, control characters), which are also
//!   wildcards to some of its calls.
//!
//! Short (8.3) names such as `PROGRA~1` are not refused: inside a folder they name a file in the
//! same directory, reached by the same handle-relative walk, so they cannot lead out; a folder
//! named by its short name in an absolute path does not match the folder's long name, and the
//! path is refused as outside. Paths longer than Windows' own limit (32,767 UTF-16 units) are
//! refused, and so are paths of more than 512 components; below that `MAX_PATH` (260) does not
//! apply, since each component is opened relative to its directory's handle.
#![cfg_attr(not(windows), allow(dead_code))]

/// The longest path Windows can name, in UTF-16 units.
pub(crate) const MAX_WIDE_PATH: usize = 32_767;

/// The most components a path may have. cap-std resolves each from the folder's handle one at a
/// time, so work on a path grows with the square of its depth: 16,000 one-letter components
/// (within `MAX_WIDE_PATH`) took some 10^8 opens to create. A Unix path holds at most 2,048 (its
/// 4,095 bytes); no tree a user keeps is near 512 deep.
pub(crate) const MAX_COMPONENTS: usize = 512;

/// Where an absolute Windows path starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Root {
    /// A drive, its letter in upper case.
    Drive(char),
    /// A share: `\\server\share`, both as written (compared case-insensitively).
    Unc {
        /// The server.
        server: String,
        /// The share.
        share: String,
    },
}

impl Root {
    /// Whether two roots are the same, case aside.
    pub(crate) fn same(&self, other: &Root) -> bool {
        match (self, other) {
            (Root::Drive(a), Root::Drive(b)) => a == b,
            (
                Root::Unc { server, share },
                Root::Unc {
                    server: s2,
                    share: sh2,
                },
            ) => same_name(server, s2) && same_name(share, sh2),
            _ => false,
        }
    }
}

/// A wire path, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WinPath {
    /// Its root; `None` for a relative path (resolved against the first workspace folder).
    pub root: Option<Root>,
    /// Its plain components, `.` and `..` resolved.
    pub comps: Vec<String>,
}

impl WinPath {
    /// Whether this absolute path is `folder` or below it (case aside); the components below.
    pub(crate) fn below<'a>(&'a self, folder: &WinPath) -> Option<&'a [String]> {
        let (Some(r), Some(f)) = (&self.root, &folder.root) else {
            return None;
        };
        if !r.same(f) || self.comps.len() < folder.comps.len() {
            return None;
        }
        let (head, rest) = self.comps.split_at(folder.comps.len());
        head.iter()
            .zip(&folder.comps)
            .all(|(a, b)| same_name(a, b))
            .then_some(rest)
    }
}

/// Whether two names are the same for a case-insensitive file system (NTFS's default). Its table
/// upper-cases one UTF-16 unit at a time, to one unit: a character whose upper case is longer
/// (`ß` to `SS`, `ﬁ` to `FI`) stays as it is, so `straße` and `STRASSE` are two names there, as
/// here; so does one outside the Basic Multilingual Plane (two units, a surrogate pair).
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    // (Names of other lengths differ without building their keys: a directory's entries are
    // compared so, one by one.)
    a == b || (a.chars().count() == b.chars().count() && case_key(a) == case_key(b))
}

/// `name` as [`same_name`] compares it: two names are the same there when their keys are equal
/// (the engine's [`windows_case_key`](claude_ide_bridge::windows_case_key)).
pub(crate) fn case_key(name: &str) -> String {
    claude_ide_bridge::windows_case_key(name)
}

/// Why a path is refused, in words.
pub(crate) type Why = String;

/// A `file:` URI as the Windows path it names (the engine's
/// [`uri_to_windows_path`](claude_ide_bridge::uri_to_windows_path): `file:///C:/x`,
/// `file:///c%3A/x` and `file://C:\x` are `C:\x`, `file://server/share/x` is
/// `\\server\share\x`); any other path as it is. A URI that writes no drive (`file:///c/x`,
/// `file:///home/me/a.txt`) names no Windows file and is refused, as the lsp crate keys it apart
/// from every drive path. What the URI names is then parsed as any path is.
pub(crate) fn from_uri(path: &str) -> Result<std::borrow::Cow<'_, str>, Why> {
    use std::borrow::Cow;
    if !claude_ide_bridge::is_file_uri(path) {
        return Ok(Cow::Borrowed(path));
    }
    match claude_ide_bridge::uri_to_windows_path(path) {
        Some(windows) => Ok(Cow::Owned(windows)),
        None if claude_ide_bridge::uri_to_path(path).is_some() => {
            Err("the file URI names no drive (a Windows file's is written `file:///C:/...`)".into())
        }
        None => Err("not a file URI that names a local path".into()),
    }
}

/// Parses a wire path (see the module docs).
pub(crate) fn parse(path: &str) -> Result<WinPath, Why> {
    if path.contains('\0') {
        return Err("the path contains NUL".into());
    }
    if path.encode_utf16().count() > MAX_WIDE_PATH {
        return Err(format!(
            "the path is longer than Windows allows ({MAX_WIDE_PATH} UTF-16 units)"
        ));
    }
    let sep = |c: char| c == '/' || c == '\\';
    let (root, rest) = split_root(path, sep)?;
    let mut comps: Vec<String> = Vec::new();
    for part in rest.split(sep) {
        match part {
            "" | "." => {}
            ".." => {
                if comps.pop().is_none() {
                    return Err(if root.is_some() {
                        "`..` climbs above the root".into()
                    } else {
                        "`..` climbs out of the workspace folder".into()
                    });
                }
            }
            name => {
                check_name(name)?;
                comps.push(name.to_owned());
            }
        }
    }
    if comps.len() > MAX_COMPONENTS {
        return Err(format!(
            "the path has more than {MAX_COMPONENTS} components"
        ));
    }
    Ok(WinPath { root, comps })
}

/// The root of `path` and the rest of it.
fn split_root(path: &str, sep: impl Fn(char) -> bool + Copy) -> Result<(Option<Root>, &str), Why> {
    let starts_sep2 = path.chars().take(2).filter(|c| sep(*c)).count() == 2;
    if starts_sep2 {
        let body = &path[2..];
        // `\\?\` (verbatim) and `\\.\` (device) prefixes.
        let mut it = body.splitn(2, sep);
        let first = it.next().unwrap_or("");
        let after = it.next().unwrap_or("");
        match first {
            "." => {
                return Err(
                    "a `\\\\.\\` path names a device, not a file in a workspace folder".into(),
                )
            }
            "?" => {
                let mut it = after.splitn(2, sep);
                let kind = it.next().unwrap_or("");
                let rest = it.next().unwrap_or("");
                if let Some(d) = drive(kind) {
                    return Ok((Some(Root::Drive(d)), rest));
                }
                if kind.eq_ignore_ascii_case("UNC") {
                    return unc(rest, sep);
                }
                return Err(format!(
                    "`{}` names a device or volume, not a path in a workspace folder",
                    &path[..(4 + kind.len()).min(path.len())]
                ));
            }
            _ => return unc(body, sep),
        }
    }
    if let Some(d) = path.get(..2).and_then(drive) {
        let rest = &path[2..];
        if !rest.starts_with(sep) {
            return Err(format!(
                "`{}` is relative to the current directory of drive {d}: (give the full path)",
                &path[..2]
            ));
        }
        return Ok((Some(Root::Drive(d)), rest));
    }
    if path.starts_with(sep) {
        return Err("a path from the root of the current drive (give the drive letter)".into());
    }
    Ok((None, path))
}

/// `\\server\share\rest` (the leading separators already taken).
fn unc(body: &str, sep: impl Fn(char) -> bool + Copy) -> Result<(Option<Root>, &str), Why> {
    let mut it = body.splitn(3, sep);
    let server = it.next().unwrap_or("");
    let share = it.next().unwrap_or("");
    let rest = it.next().unwrap_or("");
    if server.is_empty() || share.is_empty() || server == "." || server == "?" {
        return Err("a UNC path needs a server and a share (\\\\server\\share\\...)".into());
    }
    check_name(server)?;
    check_name(share)?;
    Ok((
        Some(Root::Unc {
            server: server.to_owned(),
            share: share.to_owned(),
        }),
        rest,
    ))
}

/// `C:` (any case) as the drive letter in upper case.
fn drive(s: &str) -> Option<char> {
    let mut c = s.chars();
    match (c.next(), c.next(), c.next()) {
        (Some(l), Some(':'), None) if l.is_ascii_alphabetic() => Some(l.to_ascii_uppercase()),
        _ => None,
    }
}

/// Why a workspace folder on a network share is refused, `None` when it is not on one: `folder`
/// as given (`\\server\share\...`, `\\?\UNC\...`, `\\wsl.localhost\...`, `\\wsl$\...`), or
/// `on_disk`, where Windows says it is (`std::fs::canonicalize`: a mapped network drive, or a
/// link to a share, is `\\?\UNC\server\share\...` there).
///
/// cap-std names a directory by its handle's path to rename in it, remove from it, make a
/// directory in it or list it, and drops the `\\?\` of `\\?\UNC\server\share\...` on the way
/// (cap-primitives' `get_path`), which leaves `UNC\server\share\...`: a path relative to the
/// current directory. On a share every write would fail (leaving its temporary file), every
/// listing would come back empty, and a directory could be made or a file renamed elsewhere.
pub(crate) fn network_share(folder: &str, on_disk: &str) -> Option<String> {
    let (server, share) =
        [folder, on_disk]
            .into_iter()
            .find_map(|p| match parse(p).ok()?.root? {
                Root::Unc { server, share } => Some((server, share)),
                Root::Drive(_) => None,
            })?;
    let wsl = server.eq_ignore_ascii_case("wsl.localhost") || server.eq_ignore_ascii_case("wsl$");
    let what_to_do = if wsl {
        "run the bridge inside WSL, where the files are (the Linux `claude-ide-bridge serve \
         --stdio`, started by the editor or by claude run in WSL)"
    } else {
        "run the bridge where the files are (on the machine that holds the share, or inside WSL \
         with `claude-ide-bridge serve --stdio` for a WSL folder), or open a copy of the folder \
         on a local drive"
    };
    Some(format!(
        "the workspace folder {folder} is on a network share (\\\\{server}\\{share}), which the \
         bridge does not support yet on Windows (it cannot keep its reads, writes and listings \
         inside a folder there): {what_to_do}"
    ))
}

/// Refuses a component Windows would read as something else (see the module docs).
pub(crate) fn check_name(name: &str) -> Result<(), Why> {
    if name.contains(':') {
        return Err(format!(
            "`{name}` names an alternate data stream (or holds a drive): `:` is not allowed in a name"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '<' | '>' | '"' | '|' | '?' | '*') || (*c as u32) < 0x20)
    {
        return Err(format!(
            "`{name}` holds {c:?}, which Windows does not allow in names"
        ));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(format!(
            "`{name}` ends with a dot or a space, which Windows strips: it would name another file"
        ));
    }
    if is_reserved(name) {
        return Err(format!(
            "`{name}` is a reserved device name on Windows (it names a device in every directory)"
        ));
    }
    // (The system's own answer is "no such file", as for a name that is merely missing.)
    let length = name.encode_utf16().count();
    if length > MAX_NAME {
        let start: String = name.chars().take(40).collect();
        return Err(format!(
            "`{start}...` is {length} characters long: Windows takes at most {MAX_NAME} in a name"
        ));
    }
    Ok(())
}

/// The longest name, in UTF-16 units, a Windows file system (NTFS, exFAT, FAT's long names)
/// takes in one component of a path.
const MAX_NAME: usize = 255;

/// Whether `name` is a reserved device name: the part before the first dot, trailing spaces
/// aside, is one of them (`nul.txt`, `COM1 .log`).
fn is_reserved(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or("").trim_end_matches(' ');
    let upper: String = stem.chars().flat_map(char::to_uppercase).collect();
    match upper.as_str() {
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$" => true,
        s => {
            let (Some(head), Some(digit)) = (s.get(..3), s.get(3..)) else {
                return false;
            };
            matches!(head, "COM" | "LPT")
                && matches!(
                    digit,
                    "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"
                )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(root: Root, comps: &[&str]) -> WinPath {
        WinPath {
            root: Some(root),
            comps: comps.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn roots_in_every_form_are_one() {
        let c = |comps: &[&str]| abs(Root::Drive('C'), comps);
        assert_eq!(parse(r"C:\ws\a.txt").unwrap(), c(&["ws", "a.txt"]));
        assert_eq!(parse("c:/ws/a.txt").unwrap(), c(&["ws", "a.txt"]));
        assert_eq!(parse(r"\\?\C:\ws\a.txt").unwrap(), c(&["ws", "a.txt"]));
        assert_eq!(parse(r"C:\ws\.\b\..\a.txt").unwrap(), c(&["ws", "a.txt"]));
        let share = Root::Unc {
            server: "srv".into(),
            share: "proj".into(),
        };
        let unc = parse(r"\\srv\proj\src\a.rs").unwrap();
        assert_eq!(unc, abs(share.clone(), &["src", "a.rs"]));
        assert_eq!(parse(r"\\?\UNC\srv\proj\src\a.rs").unwrap(), unc);
        assert_eq!(
            parse("//SRV/Proj/src/a.rs").unwrap().root,
            Some(Root::Unc {
                server: "SRV".into(),
                share: "Proj".into(),
            })
        );
        assert!(parse("//SRV/Proj/x").unwrap().root.unwrap().same(&share));
        assert_eq!(
            parse(r"src\a.rs").unwrap(),
            WinPath {
                root: None,
                comps: vec!["src".into(), "a.rs".into()],
            }
        );
    }

    #[test]
    fn what_cannot_name_a_workspace_file_is_refused() {
        for bad in [
            r"C:ws\a.txt",      // drive-relative
            r"\ws\a.txt",       // root of the current drive
            r"\\.\C:\ws\a.txt", // device namespace (accepted form is \\?\)
            r"\\.\PhysicalDrive0",
            r"\\?\Volume{0b1c}\x",
            r"\\server", // no share
            r"C:\..\x",  // climbs above the root
            r"..\x",     // climbs out of the folder
            "a\0b",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        let long = format!(r"C:\{}", "a\\".repeat(MAX_WIDE_PATH / 2));
        assert!(parse(&long)
            .unwrap_err()
            .contains("longer than Windows allows"));
        let under = format!(r"C:\{}", "ab\\".repeat(100)); // past MAX_PATH (260), accepted
        assert_eq!(parse(&under).unwrap().comps.len(), 100);
        let deep = "a\\".repeat(MAX_COMPONENTS);
        assert_eq!(parse(&deep).unwrap().comps.len(), MAX_COMPONENTS);
        let deeper = format!("{deep}x");
        assert!(parse(&deeper)
            .unwrap_err()
            .contains("more than 512 components"));
    }

    #[test]
    fn names_windows_reads_otherwise_are_refused() {
        for bad in [
            "CON",
            "con",
            "nul.txt",
            "NUL.tar.gz",
            "Aux",
            "prn",
            "COM1",
            "com9.log",
            "LPT1",
            "lpt¹",
            "COM³.x",
            "CONIN$",
            "conout$",
            "NUL .txt",
            "a.txt:stream",
            "a.txt::$DATA",
            "a.txt.",
            "a.txt ",
            "dir...",
            "a*b",
            "a?b",
            "a|b",
            "a<b",
            "a\"b",
            "a\u{1}b",
            &"x".repeat(256),
            // 128 characters, 256 UTF-16 units.
            &"\u{1F600}".repeat(128),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} was accepted");
            assert!(
                parse(&format!(r"C:\ws\{bad}\x")).is_err(),
                "{bad:?} inside a path"
            );
        }
        for good in [
            "CONFIG",
            "console.log",
            "null",
            "COM10",
            "LPT",
            "COMA",
            "a.txt",
            ".gitignore",
            "PROGRA~1",
            "..a",
            "a. b",
            "résumé.md",
            &"x".repeat(255),
        ] {
            assert!(check_name(good).is_ok(), "{good:?} was refused");
        }
    }

    #[test]
    fn file_uris_name_windows_paths() {
        let c = |comps: &[&str]| abs(Root::Drive('C'), comps);
        for uri in [
            "file:///C:/ws/a%20b.txt",
            "file:///c%3A/ws/a%20b.txt",
            "FILE:///c:/ws/./x/../a%20b.txt",
            "file://localhost/C:/ws/a%20b.txt",
        ] {
            assert_eq!(
                parse(&from_uri(uri).unwrap()).unwrap(),
                c(&["ws", "a b.txt"]),
                "{uri}"
            );
        }
        assert_eq!(
            parse(&from_uri("file://srv/proj/a.rs").unwrap()).unwrap(),
            abs(
                Root::Unc {
                    server: "srv".into(),
                    share: "proj".into()
                },
                &["a.rs"]
            )
        );
        assert_eq!(from_uri(r"C:\ws\a.txt").unwrap(), r"C:\ws\a.txt");
        // As the Windows `claude` writes it: `file://` and the path.
        assert_eq!(
            from_uri(r"file://C:\ws\a%20b.txt").unwrap(),
            r"C:\ws\a b.txt"
        );
        // No drive written: refused, never read as drive C (the lsp crate keys it `/c/ws/a.txt`,
        // apart from `C:\ws\a.txt`).
        for no_drive in [
            "file:///c/ws/a.txt",
            "file:///C/ws/a.txt",
            "file://localhost/c/ws",
        ] {
            assert!(
                from_uri(no_drive).unwrap_err().contains("names no drive"),
                "{no_drive}"
            );
        }
        // What a URI names is refused as the same path would be.
        for bad in [
            "file:///C:/ws/CON",
            "file:///C:/ws/a.txt%3Astream",
            "file:///C:/ws/a.txt.",
            "file:///C:/../x",
            "file:///home/me/a.txt",
        ] {
            let refused = from_uri(bad).and_then(|p| parse(&p));
            assert!(refused.is_err(), "{bad} was accepted: {refused:?}");
        }
        assert!(from_uri("file:").is_err());
    }

    #[test]
    fn folders_on_a_network_share_are_refused_with_what_to_do() {
        for share in [
            r"\\server\share\ws",
            r"\\?\UNC\server\share\ws",
            "//server/share/ws",
            r"\\server\share",
        ] {
            let why = network_share(share, share).unwrap_or_else(|| panic!("{share}"));
            assert!(why.contains("network share (\\\\server\\share)"), "{why}");
            assert!(why.contains("run the bridge where the files are"), "{why}");
        }
        for wsl in [
            r"\\wsl.localhost\Ubuntu\home\me\ws",
            r"\\wsl$\Ubuntu\home\me\ws",
        ] {
            let why = network_share(wsl, wsl).unwrap();
            assert!(
                why.contains("inside WSL") && why.contains("serve --stdio"),
                "{why}"
            );
        }
        // A mapped network drive: the folder as given is a drive, Windows says where it is.
        let why = network_share(r"Z:\ws", r"\\?\UNC\nas\home\ws").unwrap();
        assert!(
            why.contains(r"Z:\ws") && why.contains(r"\\nas\home"),
            "{why}"
        );
        for local in [r"C:\ws", r"\\?\C:\ws", "relative", ""] {
            assert_eq!(network_share(local, r"\\?\C:\ws"), None, "{local}");
        }
    }

    #[test]
    fn folders_match_case_insensitively_by_component() {
        let folder = parse(r"C:\Users\Me\Project").unwrap();
        let inside = parse(r"c:\users\me\PROJECT\src\A.rs").unwrap();
        assert_eq!(inside.below(&folder).unwrap(), ["src", "A.rs"]);
        assert_eq!(
            parse(r"\\?\C:\USERS\me\project")
                .unwrap()
                .below(&folder)
                .unwrap()
                .len(),
            0
        );
        assert!(parse(r"C:\Users\Me\Project2\a")
            .unwrap()
            .below(&folder)
            .is_none());
        assert!(parse(r"C:\Users\Me").unwrap().below(&folder).is_none());
        assert!(parse(r"D:\Users\Me\Project\a")
            .unwrap()
            .below(&folder)
            .is_none());
        // A short name for the folder is another spelling: refused as outside, not served.
        assert!(parse(r"C:\Users\Me\PROJEC~1\a")
            .unwrap()
            .below(&folder)
            .is_none());
        assert!(same_name("ÉTÉ", "été"));
        // Characters whose upper case is longer are left as they are, as NTFS does: a sibling
        // `strasse` is not inside a folder `straße` (it was, and a write there replaced a file
        // of the other folder).
        assert!(!same_name("strasse", "straße") && !same_name("STRASSE", "straße"));
        assert!(!same_name("files", "ﬁles"));
        assert!(same_name("straße", "STRAßE"));
        assert!(!same_name("\u{10428}", "\u{10400}"));
        for (a, b) in [
            ("ÉTÉ", "été"),
            ("straße", "STRAßE"),
            (r"C:\Émilie\A.rs", r"c:\émilie\a.RS"),
        ] {
            assert_eq!(case_key(a), case_key(b), "{a} {b}");
        }
        for (a, b) in [
            ("strasse", "straße"),
            ("files", "ﬁles"),
            ("\u{10428}", "\u{10400}"),
        ] {
            assert_ne!(case_key(a), case_key(b), "{a} {b}");
        }
    }
}
