//! Path mapping for `serve --stdio --path-map EDITOR=HERE` (docs/stdio.md, "Path mapping"): the
//! editor runs on one machine, the bridge (and `claude`) on another, and a folder has a name on
//! each. Every path and `file://` URI of the line protocol goes through a [`PathMap`]: from the
//! editor's names to the bridge's ([`PathMap::to_here`]) and back ([`PathMap::to_editor`]), by
//! the longest matching folder. A path under no mapping is refused, never passed on untranslated.
//!
//! The editor's side may be POSIX (`/home/me/app`) or Windows (`C:\Users\me\app`, `c:/Users/me/app`,
//! `file:///C:/Users/me/app`, `file:///c%3A/Users/me/app`, `\\wsl.localhost\Debian\home\me`,
//! `//wsl.localhost/Debian/home/me`, `file://wsl.localhost/Debian/home/me`, and every `file:` form
//! the engine reads as a drive or a share): its names match in either case, as Windows compares them,
//! `\` and `/` both separate a Windows path, and a path goes back to the editor spelled as its
//! mapping was given (drive letter, separator). The bridge's side is POSIX. `.` and `..` are
//! resolved before a path is matched, so `..` can only leave a mapped folder by naming a path that
//! is then under no mapping (or under another one, which names it as its own); `..` above the
//! root is refused. POSIX names are compared exactly.
//!
//! ```text
//! --path-map 'C:\Users\me\app=/home/me/app'
//!   editor C:\Users\me\app\src\a.rs  <->  bridge /home/me/app/src/a.rs
//! --path-map wsl
//!   editor C:\Users\me\app  <->  bridge /mnt/c/Users/me/app  (every drive, /mnt/<letter>)
//! ```

use std::fmt;

use claude_ide_bridge::is_file_uri;

/// The most bytes of a path quoted in an error (the rest is cut, with `...`).
const QUOTED: usize = 512;

/// Why a path could not be mapped. Each names the path, as it was given (cut past 512 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapError {
    /// Neither an absolute path nor a `file://` URI.
    NotAbsolute(String),
    /// `..` climbs above the root.
    Climbs(String),
    /// A `file://` URI that cannot be decoded.
    BadUri(String),
    /// A UNC path without its server and share, or a device path (`\\?\`, `\\.\`).
    Unc(String),
    /// Under no mapping.
    Outside(String),
    /// A name that cannot be written on the other side (for a Windows editor, a name Windows
    /// reads as something else: `\`, what `claude_ide_bridge_files::check_windows_name`
    /// refuses; a NUL anywhere).
    Unnameable(String),
    /// A path of the bridge's with `..` in it: after a symbolic link, `..` leads elsewhere than
    /// the text says, and the editor would be shown the file the text names.
    DotDot(String),
    /// The editor's path for a path of the bridge's (its second) is another file for the bridge
    /// (its third): a mapping nested in another (`C:\a=/srv/a` and `C:\a\b=/srv/other`) shows
    /// other files there, and the bridge's file has no path in the editor.
    Shadowed(String, String, String),
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::NotAbsolute(p) if p.starts_with('~') => write!(
                f,
                "{} is not an absolute path (`~` is not expanded: write the home folder's path)",
                quote(p)
            ),
            MapError::NotAbsolute(p) => write!(f, "{} is not an absolute path", quote(p)),
            MapError::Climbs(p) => write!(f, "{}: `..` climbs above the root", quote(p)),
            MapError::BadUri(p) => write!(
                f,
                "{} is not a file:// URI naming a file of this machine (its escapes are not \
                 UTF-8, it has no path, or it names another host or, on Linux and macOS, a \
                 Windows drive)",
                quote(p)
            ),
            MapError::Unc(p) => write!(
                f,
                "{}: a UNC path is \\\\server\\share\\... (device paths are not mapped)",
                quote(p)
            ),
            MapError::Outside(p) => write!(f, "{} is outside every --path-map folder", quote(p)),
            MapError::Unnameable(p) => {
                write!(f, "{} cannot be named on the other side", quote(p))
            }
            MapError::DotDot(p) => write!(
                f,
                "{}: `..` in a path is not passed on to the editor (after a symbolic link it \
                 leads elsewhere than the editor would take it to)",
                quote(p)
            ),
            MapError::Shadowed(p, editor, back) => write!(
                f,
                "{} would be {} in the editor, which --path-map takes for {} (a mapping nested in \
                 another): it has no path there",
                quote(p),
                quote(editor),
                quote(back)
            ),
        }
    }
}

impl std::error::Error for MapError {}

/// `p` in quotes, JSON-escaped, cut at a character boundary past [`QUOTED`] bytes.
fn quote(p: &str) -> String {
    if p.len() <= QUOTED {
        return format!("{p:?}");
    }
    format!("{:?}...", crate::ui::prefix_within(p, QUOTED))
}

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    /// `/`.
    Posix,
    /// A Windows drive, its letter in lower case.
    Drive(u8),
    /// A UNC path, `\\server\share\...`: its first two names are the server and the share
    /// (`\\wsl.localhost\Debian\home`, a WSL distribution's files seen from Windows).
    Unc,
}

/// An absolute path, resolved (`.` and `..`), as its root and names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    root: Root,
    names: Vec<String>,
}

impl Parsed {
    /// The names of `self` past `prefix`, when `prefix` is one of its folders (or itself). A
    /// Windows path's names are compared ignoring case, as Windows compares them (an editor may
    /// spell a folder `C:\Users\Me` in one place and `c:\users\me` in another); POSIX names
    /// exactly.
    fn under(&self, prefix: &Parsed) -> Option<&[String]> {
        let same = |a: &String, b: &String| match self.root {
            Root::Posix => a == b,
            // One UTF-16 unit for one, as NTFS compares (`ß` is not `SS`).
            Root::Drive(_) | Root::Unc => {
                a == b
                    || claude_ide_bridge::windows_case_key(a)
                        == claude_ide_bridge::windows_case_key(b)
            }
        };
        // A WSL distribution's share has two servers' names: `wsl$` and `wsl.localhost`.
        let wsl =
            |s: &String| s.eq_ignore_ascii_case("wsl$") || s.eq_ignore_ascii_case("wsl.localhost");
        let starts = self.names.len() >= prefix.names.len()
            && (self.names.iter().zip(&prefix.names).enumerate()).all(|(i, (a, b))| {
                same(a, b) || (i == 0 && self.root == Root::Unc && wsl(a) && wsl(b))
            });
        (self.root == prefix.root && starts).then(|| &self.names[prefix.names.len()..])
    }

    /// Whether `self` and `other` name one folder (Windows names ignoring case).
    fn same(&self, other: &Parsed) -> bool {
        self.names.len() == other.names.len() && self.under(other).is_some()
    }

    /// `self` moved from below `from` to below `to` (the same names past it), when it is below
    /// `from`.
    fn moved(&self, from: &Parsed, to: &Parsed) -> Option<Parsed> {
        let rest = self.under(from)?;
        Some(Parsed {
            root: to.root,
            names: [&to.names[..], rest].concat(),
        })
    }
}

/// How a Windows path is written back to the editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spelling {
    /// The drive letter as given; `None` for a UNC path.
    drive: Option<char>,
    /// `\` or `/` (a UNC path written `//server/share`, as Windows Vim with `shellslash` does,
    /// goes back so).
    sep: char,
}

/// One `EDITOR=HERE` pair.
#[derive(Debug, Clone)]
struct Mapping {
    editor: Parsed,
    /// For a Windows editor folder, how its paths are written.
    spelling: Option<Spelling>,
    /// The bridge's folder, as given and, when it differs, with its links resolved.
    here: Vec<Parsed>,
    /// Given as `EDITOR=HERE` (not one of `wsl`'s drives).
    given: bool,
}

/// The mappings of `--path-map`, in the order given; see the module doc.
///
/// ```text
/// let mut map = PathMap::default();
/// map.add("C:\\Users\\me\\app=/srv/app")?;
/// assert_eq!(map.to_here("file:///c%3A/Users/me/app/a%20b.rs")?, "/srv/app/a b.rs");
/// assert_eq!(map.to_editor("/srv/app/src/x.rs")?, "C:\\Users\\me\\app\\src\\x.rs");
/// ```
#[derive(Debug, Clone, Default)]
pub struct PathMap {
    maps: Vec<Mapping>,
    /// Workspace folders that only their real path puts under a mapping: the name claude (and
    /// the lock file) uses, and that real path ([`PathMap::also_workspace`]).
    folders: Vec<(Parsed, Parsed)>,
}

impl PathMap {
    /// Adds one `--path-map` value: `EDITOR=HERE` (split at the one `=` where both sides are
    /// folders, [`split_spec`]), or `wsl` for every
    /// drive `X:\` at `/mnt/x`. HERE must be absolute; EDITOR an absolute POSIX or Windows path
    /// or a `file://` URI.
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        if spec == "wsl" {
            for letter in b'a'..=b'z' {
                self.maps.push(Mapping {
                    editor: Parsed {
                        root: Root::Drive(letter),
                        names: Vec::new(),
                    },
                    spelling: Some(Spelling {
                        drive: Some(char::from(letter.to_ascii_uppercase())),
                        sep: '\\',
                    }),
                    here: vec![Parsed {
                        root: Root::Posix,
                        names: vec!["mnt".into(), char::from(letter).to_string()],
                    }],
                    given: false,
                });
            }
            return Ok(());
        }
        let (editor, e, h) = split_spec(spec)?;
        let spelling = match e.root {
            Root::Posix => None,
            Root::Unc => Some(Spelling {
                drive: None,
                // `/` for a `file:` URI too (`file://server/share`), as docs/stdio.md says.
                sep: if editor.starts_with("//") || claude_ide_bridge::is_file_uri(editor) {
                    '/'
                } else {
                    '\\'
                },
            }),
            Root::Drive(_) => Some(windows_spelling(editor)),
        };
        if let Some(twice) = self.maps.iter().find(|m| m.given && m.editor.same(&e)) {
            return Err(format!(
                "--path-map {spec:?}: EDITOR: the folder is mapped already (to {})",
                write_posix(&twice.here[0].names)
            ));
        }
        self.maps.push(Mapping {
            editor: e,
            spelling,
            here: vec![h],
            given: true,
        });
        Ok(())
    }

    /// Whether no mapping was given (paths then pass as they are).
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// The bridge's folder of each mapping given as `EDITOR=HERE` (not `wsl`'s), as given.
    pub fn here_folders(&self) -> Vec<String> {
        self.maps
            .iter()
            .filter(|m| m.given)
            .map(|m| write_posix(&m.here[0].names))
            .collect()
    }

    /// Also matches the bridge's folder `given` (of a mapping) under its other name `real` (the
    /// same folder with its links resolved): the bridge's own paths come resolved.
    pub fn also_here(&mut self, given: &str, real: &str) {
        let (Ok(given), Ok(real)) = (parse_here(given), parse_here(real)) else {
            return;
        };
        for m in &mut self.maps {
            if m.here[0] == given && !m.here.contains(&real) {
                m.here.push(real.clone());
            }
        }
    }

    /// Also names the workspace folder `named` (as claude and the lock file name it, through a
    /// symbolic link) by its real path `real`, when only `real` lies under a mapping's HERE: a
    /// path under `named` goes to the editor as the same path under `real` does, and one the
    /// editor names under `real` comes to the bridge under `named`.
    pub fn also_workspace(&mut self, named: &str, real: &str) {
        let (Ok(named), Ok(real)) = (parse_here(named), parse_here(real)) else {
            return;
        };
        if named != real && !self.folders.contains(&(named.clone(), real.clone())) {
            self.folders.push((named, real));
        }
    }

    /// The bridge's path for the editor's `path` (absolute, or a `file://` URI).
    pub fn to_here(&self, path: &str) -> Result<String, MapError> {
        let p = match parse_editor(path) {
            // `//x`, `//./x`: no share, but the POSIX path it also is.
            Err(MapError::Unc(_)) if path.starts_with("//") => parse_posix(path, path)?,
            p => p?,
        };
        // `//server/share/...` is a UNC path written with `/` (Windows takes it so), unless no
        // UNC folder takes it: then the POSIX path it also is.
        let posix;
        let found = match self.editor_folder(&p) {
            None if p.root == Root::Unc && path.starts_with("//") => {
                posix = parse_posix(path, path)?;
                self.editor_folder(&posix)
            }
            found => found,
        };
        let (m, rest) = found.ok_or_else(|| MapError::Outside(path.to_string()))?;
        let mut names = m.here[0].names.clone();
        names.extend_from_slice(rest);
        // Under a workspace folder's real path: named as the workspace names it.
        let here = Parsed {
            root: Root::Posix,
            names,
        };
        Ok(write_posix(&self.workspace_named(here).names))
    }

    /// `x`, under a workspace folder's real path, as the workspace names it (the folder named
    /// through a link, [`PathMap::also_workspace`]); otherwise as it is.
    fn workspace_named(&self, x: Parsed) -> Parsed {
        (self.folders.iter())
            .find_map(|(named, real)| x.moved(real, named))
            .unwrap_or(x)
    }

    /// The mapping of the longest EDITOR folder `p` is under, and its names past it; of two as
    /// long, one given as `EDITOR=HERE` over `wsl`'s drive.
    fn editor_folder<'a>(&'a self, p: &'a Parsed) -> Option<(&'a Mapping, &'a [String])> {
        self.maps
            .iter()
            .filter_map(|m| Some((m, p.under(&m.editor)?)))
            .max_by_key(|(m, _)| (m.editor.names.len(), m.given))
    }

    /// The editor's path for the bridge's absolute `path`: one that names the same file for the
    /// bridge again ([`PathMap::to_here`]), or a refusal. A path with `..` is refused (the
    /// bridge would have to resolve links to know where it leads).
    pub fn to_editor(&self, path: &str) -> Result<String, MapError> {
        if path.split('/').any(|n| n == "..") {
            return Err(MapError::DotDot(path.to_string()));
        }
        let p = parse_here(path)?;
        let editor = match self.to_editor_parsed(&p, path) {
            // Under a workspace folder named through a link: as its real path.
            Err(outside @ MapError::Outside(_)) => {
                match (self.folders.iter()).find_map(|(named, real)| p.moved(named, real)) {
                    Some(real) => self.to_editor_parsed(&real, path),
                    None => Err(outside),
                }
            }
            done => done,
        }?;
        // `path` as `to_here` names what it maps back to: a HERE folder's real path by the folder
        // as given, a workspace folder named through a link by its name.
        let given = (self.maps.iter())
            .flat_map(|m| m.here[1..].iter().map(move |real| (real, &m.here[0])))
            .find_map(|(real, given)| p.moved(real, given));
        let named = self.workspace_named(given.unwrap_or(p));
        let back = self.to_here(&editor);
        match back.as_deref().map(parse_here) {
            Ok(Ok(b)) if b.names == named.names => Ok(editor),
            _ => Err(MapError::Shadowed(
                path.to_string(),
                editor,
                back.unwrap_or_default(),
            )),
        }
    }

    /// [`PathMap::to_editor`] of `p`, parsed from `path` (named in errors).
    fn to_editor_parsed(&self, p: &Parsed, path: &str) -> Result<String, MapError> {
        let (m, rest) = self
            .maps
            .iter()
            .flat_map(|m| m.here.iter().map(move |h| (m, h)))
            .filter_map(|(m, h)| Some((m, h.names.len(), p.under(h)?)))
            .max_by_key(|(m, len, _)| (*len, m.given))
            .map(|(m, _, rest)| (m, rest))
            .ok_or_else(|| MapError::Outside(path.to_string()))?;
        let mut names = m.editor.names.clone();
        names.extend_from_slice(rest);
        if m.editor.root != Root::Posix && !rest.iter().all(|n| windows_nameable(n)) {
            return Err(MapError::Unnameable(path.to_string()));
        }
        match (m.editor.root, m.spelling) {
            (Root::Unc, s) => {
                let sep = s.map_or('\\', |s| s.sep).to_string();
                Ok(format!("{sep}{sep}{}", names.join(&sep)))
            }
            (
                _,
                Some(Spelling {
                    drive: Some(drive),
                    sep,
                }),
            ) => {
                let mut out = format!("{drive}:{sep}");
                out.push_str(&names.join(&sep.to_string()));
                Ok(out)
            }
            _ => Ok(write_posix(&names)),
        }
    }
}

/// Whether `path` is an absolute path or a `file://` URI of either side's forms (what
/// [`PathMap::to_here`] reads as a path, whether or not a mapping takes it).
pub fn is_absolute(path: &str) -> bool {
    !matches!(parse_editor(path), Err(MapError::NotAbsolute(_)))
}

/// Whether Windows reads `name` as one file name, as it is (the files crate's rule, which the
/// Windows backend applies to every component of a path, and no `\`, a separator there). A
/// Linux file `a:b` would name the alternate data stream `b` of the file `a` there.
fn windows_nameable(name: &str) -> bool {
    !name.contains('\\') && claude_ide_bridge_files::check_windows_name(name).is_ok()
}

/// `/` and the names.
fn write_posix(names: &[String]) -> String {
    format!("/{}", names.join("/"))
}

/// How a Windows EDITOR folder was written: its drive letter and first separator (`\` when it
/// has none, `/` for a URI). The drive letter of a URI is read from its decoded path, past its
/// authority (`file://localhost/C:/x`, `file:///c%3A/x`).
fn windows_spelling(given: &str) -> Spelling {
    if is_file_uri(given) {
        // `file:///c%3A/x`, `file://localhost/C:/x`; the drive as the authority, `file://d:/x`
        // or `file://d:\x`, in its place.
        let letter = |p: &str| p.trim_start_matches(['/', '\\']).chars().next();
        let drive = decode_uri(given)
            .and_then(|p| letter(&p))
            .or_else(|| letter(&given[5..]))
            .filter(char::is_ascii_alphabetic)
            .unwrap_or('C');
        return Spelling {
            drive: Some(drive),
            sep: '/',
        };
    }
    let drive = given.chars().next().unwrap_or('C');
    let sep = given[2..]
        .chars()
        .find(|c| *c == '\\' || *c == '/')
        .unwrap_or('\\');
    Spelling {
        drive: Some(drive),
        sep,
    }
}

/// Resolves `.`, `..` and empty names of `names`, or `None` when `..` climbs above the root.
fn resolve<'a>(names: impl Iterator<Item = &'a str>) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        match n {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            n => out.push(n.to_string()),
        }
    }
    Some(out)
}

/// `EDITOR=HERE` split at the one `=` where both sides are folders: a folder's name may hold `=`
/// (`C:\a=b=/srv/a=b` is `C:\a=b` and `/srv/a=b`). With none, the error is the first `=`'s; with
/// several (`/a=/b=/c`), it is refused as ambiguous.
fn split_spec(spec: &str) -> Result<(&str, Parsed, Parsed), String> {
    let mut found = Vec::new();
    let mut first_error = None;
    for (at, _) in spec.match_indices('=') {
        let (editor, here) = (&spec[..at], &spec[at + 1..]);
        let parsed = parse_editor(editor)
            .map_err(|e| format!("--path-map {spec:?}: EDITOR: {e}"))
            .and_then(|e| {
                let h = parse_here(here).map_err(|e| format!("--path-map {spec:?}: HERE: {e}"))?;
                Ok((editor, e, h))
            });
        match parsed {
            Ok(split) => found.push(split),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match found.len() {
        1 => Ok(found.pop().expect("one")),
        0 => Err(first_error.unwrap_or_else(|| {
            format!(
                "--path-map {spec:?}: expected EDITOR=HERE (a folder as the editor names it, then \
                 the same folder here) or `wsl`"
            )
        })),
        _ => Err(format!(
            "--path-map {spec:?}: ambiguous: EDITOR may be {} (name such a folder here through a \
             link without `=`)",
            found
                .iter()
                .map(|(editor, ..)| format!("{editor:?}"))
                .collect::<Vec<_>>()
                .join(" or ")
        )),
    }
}

/// A bridge's path: absolute POSIX.
fn parse_here(path: &str) -> Result<Parsed, MapError> {
    if path.contains('\0') {
        return Err(MapError::Unnameable(path.to_string()));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(MapError::NotAbsolute(path.to_string()));
    };
    let names = resolve(rest.split('/')).ok_or_else(|| MapError::Climbs(path.to_string()))?;
    Ok(Parsed {
        root: Root::Posix,
        names,
    })
}

/// An editor's path: absolute POSIX, absolute Windows (a drive), or a `file://` URI of either.
fn parse_editor(path: &str) -> Result<Parsed, MapError> {
    if path.contains('\0') {
        return Err(MapError::Unnameable(path.to_string()));
    }
    let decoded;
    let (text, from_uri) = if is_file_uri(path) {
        // A drive or a share, in any of the forms the engine reads (`file://C:/x`, the Windows
        // claude's `file://C:\x`, `file:////server/share/x`), as its Windows path; else decoded
        // here (a `%` that escapes nothing kept).
        decoded = match claude_ide_bridge::uri_to_windows_path(path) {
            Some(windows) => windows,
            None => decode_uri(path).ok_or_else(|| MapError::BadUri(path.to_string()))?,
        };
        (decoded.as_str(), true)
    } else {
        (path, false)
    };
    let b = text.as_bytes();
    let climbs = || MapError::Climbs(path.to_string());
    // `C:\...`, `C:/...`; from a URI, `/C:/...` and `/C:` too. (`C:` alone is the current
    // folder of drive C for Windows, relative as `C:a.rs` is.)
    let drive_at = usize::from(from_uri && b.first() == Some(&b'/'));
    let d = &b[drive_at.min(b.len())..];
    if d.len() >= 2
        && d[0].is_ascii_alphabetic()
        && d[1] == b':'
        && ((d.len() == 2 && from_uri) || d.get(2).is_some_and(|s| *s == b'\\' || *s == b'/'))
    {
        let rest = &text[drive_at + 2..];
        let names = resolve(rest.split(['\\', '/'])).ok_or_else(climbs)?;
        return Ok(Parsed {
            root: Root::Drive(d[0].to_ascii_lowercase()),
            names,
        });
    }
    // `\\server\share`, or written with `/` (`//server/share`, not `///`).
    let slashes = text.strip_prefix("//").filter(|r| !r.starts_with('/'));
    if let Some(unc) = text.strip_prefix("\\\\").or(slashes.filter(|_| !from_uri)) {
        let mut parts = unc.split(['\\', '/']);
        let (server, share) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if server.is_empty() || share.is_empty() || server == "?" || server == "." {
            return Err(MapError::Unc(path.to_string()));
        }
        let mut names = vec![server.to_owned(), share.to_owned()];
        names.extend(resolve(parts).ok_or_else(climbs)?);
        return Ok(Parsed {
            root: Root::Unc,
            names,
        });
    }
    parse_posix(text, path)
}

/// `text`, an absolute POSIX path (`path`, named in errors, is what it was read from).
fn parse_posix(text: &str, path: &str) -> Result<Parsed, MapError> {
    match text.strip_prefix('/') {
        Some(rest) => Ok(Parsed {
            root: Root::Posix,
            names: resolve(rest.split('/')).ok_or_else(|| MapError::Climbs(path.to_string()))?,
        }),
        None => Err(MapError::NotAbsolute(path.to_string())),
    }
}

/// The path of a `file://` URI, percent escapes decoded (a `%` not followed by two hex digits is
/// kept, as some editors do not escape): `None` for an invalid UTF-8 result or a NUL. The
/// authority may be empty or `localhost`; another one gives a UNC path
/// (`file://server/share/x` is `\\server\share/x`).
fn decode_uri(uri: &str) -> Option<String> {
    let rest = &uri[5..];
    let (host, path) = match rest.strip_prefix("//") {
        Some(after) => {
            let slash = after.find('/')?;
            let host = &after[..slash];
            match host.is_empty() || host.eq_ignore_ascii_case("localhost") {
                true => ("", &after[slash..]),
                false => (host, &after[slash..]),
            }
        }
        None if rest.starts_with('/') => ("", rest),
        None => return None,
    };
    if !host.is_empty() {
        return Some(format!(
            "\\\\{}{}",
            decode_uri(&format!("file:/{host}"))?.trim_start_matches('/'),
            decode_uri(&format!("file:{path}"))?
        ));
    }
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| char::from(c).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    let s = String::from_utf8(out).ok()?;
    (!s.contains('\0')).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn map(specs: &[&str]) -> PathMap {
        let mut m = PathMap::default();
        for s in specs {
            m.add(s).unwrap();
        }
        m
    }

    #[test]
    fn windows_forms_map_to_one_posix_path_and_back_as_the_mapping_spells_them() {
        let m = map(&[r"C:\Users\me\app=/home/me/app"]);
        for given in [
            r"C:\Users\me\app\src\a.rs",
            r"c:\Users\me\app\src\a.rs",
            "c:/Users/me/app/src/a.rs",
            "C:/Users/me/app\\src/./a.rs",
            "file:///C:/Users/me/app/src/a.rs",
            "file:///c%3A/Users/me/app/src/a.rs",
            "FILE://localhost/c:/Users/me/app/src/a.rs",
            r"C:\Users\me\app\lib\..\src\a.rs",
            // The folder in another case, as Windows compares names: the rest kept as it is.
            r"C:\USERS\Me\App\src\a.rs",
            "file:///c%3A/users/ME/app/src/a.rs",
        ] {
            assert_eq!(
                m.to_here(given).as_deref(),
                Ok("/home/me/app/src/a.rs"),
                "{given}"
            );
        }
        assert_eq!(
            m.to_editor("/home/me/app/src/a.rs").as_deref(),
            Ok(r"C:\Users\me\app\src\a.rs")
        );
        assert_eq!(
            m.to_editor("/home/me/app").as_deref(),
            Ok(r"C:\Users\me\app")
        );
        assert_eq!(
            m.to_here(r"C:\Users\me\app\SRC\a.rs").as_deref(),
            Ok("/home/me/app/SRC/a.rs"),
            "below the folder, names go as the editor wrote them"
        );
        // One letter for one, as NTFS compares: `straße` and `STRASSE` are two folders there,
        // `straße` and `STRAßE` one.
        let m = map(&[r"C:\Users\STRASSE\app=/home/me/app"]);
        assert!(m.to_here(r"C:\Users\straße\app\a.rs").is_err());
        let m = map(&[r"C:\Users\straße\app=/home/me/app"]);
        assert_eq!(
            m.to_here(r"C:\Users\STRAßE\app\a.rs").as_deref(),
            Ok("/home/me/app/a.rs")
        );
        let mut two = map(&[r"C:\Users\STRASSE=/home/me/app"]);
        assert_eq!(two.add(r"C:\Users\straße=/home/me/app2"), Ok(()));
        // As given: a drive letter in lower case and `/`.
        let m = map(&["c:/Users/me/app=/home/me/app"]);
        assert_eq!(
            m.to_editor("/home/me/app/a b/é.rs").as_deref(),
            Ok("c:/Users/me/app/a b/é.rs")
        );
        assert_eq!(
            m.to_here("file:///C:/Users/me/app/a%20b/%C3%A9.rs")
                .as_deref(),
            Ok("/home/me/app/a b/é.rs")
        );
    }

    /// A URI's drive letter is its path's, in the case given, not the first letter of its
    /// authority (`localhost`) or of an escape.
    #[test]
    fn a_uri_editor_folder_is_spelled_back_with_its_own_drive_letter() {
        for (spec, here, want) in [
            (
                "file://localhost/C:/Users/me/app=/srv/app",
                "/srv/app/src/a.rs",
                "C:/Users/me/app/src/a.rs",
            ),
            ("FILE://LOCALHOST/d%3A/x=/srv/x", "/srv/x/b", "d:/x/b"),
            ("file:///c%3A/Users/me=/srv/me", "/srv/me", "c:/Users/me"),
            ("file:///E:/w=/srv/w", "/srv/w/a b", "E:/w/a b"),
            ("file://localhost/%66:/w=/srv/f", "/srv/f/x", "f:/w/x"),
        ] {
            let m = map(&[spec]);
            assert_eq!(m.to_editor(here).as_deref(), Ok(want), "{spec}");
            assert_eq!(m.to_here(want).as_deref(), Ok(here), "{spec}");
        }
    }

    /// A bridge-side name Windows would read as something else (`a:b` is the stream `b` of the
    /// file `a`) or refuse is not sent to a Windows editor; a POSIX editor gets it.
    #[test]
    fn names_windows_cannot_hold_are_not_sent_to_a_windows_editor() {
        let m = map(&[
            r"C:\Users\me\app=/srv/app",
            "file:///D:/w=/srv/w",
            r"\\wsl.localhost\Debian\home\me=/home/me",
            "/ws=/srv/ws",
        ]);
        for name in [
            "a:b",
            "C:",
            ":",
            "a*b",
            "a?b",
            "a\"b",
            "a<b",
            "a>b",
            "a|b",
            "a\\b",
            "a\tb",
            "a\nb",
            "a\u{1}b",
            "a\u{1f}",
            "a.txt.",
            "a ",
            "NUL",
            "con.txt",
            "aux.tar.gz",
            "Com1",
            "lpt9.c",
            "nul .x",
            "com0",
        ] {
            for folder in ["/srv/app", "/srv/w", "/home/me"] {
                let path = format!("{folder}/sub/{name}");
                assert_eq!(
                    m.to_editor(&path),
                    Err(MapError::Unnameable(path.clone())),
                    "{path:?}"
                );
                let e = m.to_editor(&path).unwrap_err().to_string();
                assert!(e.contains("cannot be named on the other side"), "{e}");
            }
            assert_eq!(
                m.to_editor(&format!("/srv/ws/{name}")),
                Ok(format!("/ws/{name}")),
                "{name:?}"
            );
        }
        // What Windows allows in a name still passes.
        for name in [
            ".hidden",
            "a.b",
            "console.log",
            "com10",
            "nulls",
            "a .b",
            "lpt",
        ] {
            assert!(m.to_editor(&format!("/srv/app/{name}")).is_ok(), "{name}");
        }
        assert_eq!(
            m.to_editor("/srv/app/a b#%;,=+[]{}'!@$^&~`é\u{7f}.rs")
                .as_deref(),
            Ok("C:\\Users\\me\\app\\a b#%;,=+[]{}'!@$^&~`é\u{7f}.rs")
        );
    }

    #[test]
    fn wsl_maps_every_drive_under_mnt() {
        let m = map(&["wsl"]);
        assert_eq!(
            m.to_here(r"C:\Users\me\app").as_deref(),
            Ok("/mnt/c/Users/me/app")
        );
        assert_eq!(m.to_here("file:///d:/x").as_deref(), Ok("/mnt/d/x"));
        assert_eq!(m.to_here(r"C:\").as_deref(), Ok("/mnt/c"));
        assert_eq!(m.to_here("file:///C:").as_deref(), Ok("/mnt/c"));
        // The current folder of drive C, for Windows: relative.
        assert_eq!(m.to_here("C:"), Err(MapError::NotAbsolute("C:".into())));
        // A `~` is named: it is not expanded, here or over there.
        assert_eq!(
            MapError::NotAbsolute("~/app".into()).to_string(),
            "\"~/app\" is not an absolute path (`~` is not expanded: write the home folder's path)"
        );
        assert_eq!(
            m.to_editor("/mnt/c/Users/me/app").as_deref(),
            Ok(r"C:\Users\me\app")
        );
        assert_eq!(m.to_editor("/mnt/z").as_deref(), Ok(r"Z:\"));
        assert!(matches!(m.to_editor("/home/me"), Err(MapError::Outside(_))));
        assert!(matches!(m.to_here("/home/me"), Err(MapError::Outside(_))));
        assert!(m.here_folders().is_empty(), "wsl's folders are not checked");
    }

    /// A WSL distribution's files as Windows names them (`\\wsl.localhost\Debian\...`), in any
    /// case (as Windows compares them), with either separator, or as a URI with a host; and back
    /// as the mapping spells them (an editor that looks a file's buffer up by its name finds it).
    #[test]
    fn unc_paths_map_by_server_and_share() {
        let m = map(&[r"\\wsl.localhost\Debian\home\me\app=/home/me/app"]);
        for given in [
            r"\\wsl.localhost\Debian\home\me\app\a b.rs",
            r"\\WSL.LOCALHOST\debian\home\me\app\src\..\a b.rs",
            r"\\wsl.localhost\DEBIAN\Home\ME\App\a b.rs",
            "file://wsl.localhost/Debian/home/me/app/a%20b.rs",
        ] {
            assert_eq!(
                m.to_here(given).as_deref(),
                Ok("/home/me/app/a b.rs"),
                "{given}"
            );
        }
        assert_eq!(
            m.to_editor("/home/me/app/src/x.rs").as_deref(),
            Ok(r"\\wsl.localhost\Debian\home\me\app\src\x.rs")
        );
        assert!(matches!(
            m.to_here(r"\\wsl.localhost\Debian\home\me\..\..\..\x"),
            Err(MapError::Climbs(_))
        ));
        assert!(matches!(
            m.to_here(r"\\other\Debian\home\me\app"),
            Err(MapError::Outside(_))
        ));
        assert!(matches!(
            m.to_editor("/home/me/app/a\\b"),
            Err(MapError::Unnameable(_))
        ));
    }

    /// A WSL distribution's share by either of its servers' names (`\\wsl$\Debian`, the older
    /// one, and `\\wsl.localhost\Debian`) is one share; back to the editor as the mapping names it.
    #[test]
    fn a_wsl_share_by_either_name_is_one() {
        for (spec, other) in [
            (
                r"\\wsl.localhost\Debian\home\me=/home/me",
                r"\\wsl$\Debian\home\me\a.rs",
            ),
            (
                r"\\wsl$\Debian\home\me=/home/me",
                r"\\WSL.LOCALHOST\debian\home\me\a.rs",
            ),
        ] {
            let m = map(&[spec]);
            assert_eq!(m.to_here(other).as_deref(), Ok("/home/me/a.rs"), "{spec}");
            let back = m.to_editor("/home/me/a.rs").unwrap();
            assert!(back.starts_with(&spec[..8]), "{spec}: {back}");
        }
        let m = map(&[r"\\wsl$\Debian\home\me=/home/me"]);
        assert!(matches!(
            m.to_here(r"\\other\Debian\home\me\a.rs"),
            Err(MapError::Outside(_))
        ));
    }

    /// A share written with `/` (`//wsl.localhost/Debian/...`, as Windows Vim with `shellslash`
    /// names it) is the same share, and goes back so; the URI forms of a share and of a drive
    /// the engine reads (`file:////server/share/x`, the Windows claude's `file://C:\x`) map as
    /// that share or drive; a POSIX editor's `//x` (no share mapped) is still its `/x`.
    #[test]
    fn shares_written_with_slashes_and_every_uri_form_map() {
        let m = map(&["//wsl.localhost/Debian/home/me/app=/home/me/app"]);
        for given in [
            "//wsl.localhost/Debian/home/me/app/src/a.rs",
            r"\\wsl.localhost\Debian\home\me\app\src\a.rs",
            "//WSL.localhost/debian/home/me/app/src/a.rs",
            "file:////wsl.localhost/Debian/home/me/app/src/a.rs",
            "file://wsl.localhost/Debian/home/me/app/src/a.rs",
        ] {
            assert_eq!(
                m.to_here(given).as_deref(),
                Ok("/home/me/app/src/a.rs"),
                "{given}"
            );
        }
        assert_eq!(
            m.to_editor("/home/me/app/src/a.rs").as_deref(),
            Ok("//wsl.localhost/Debian/home/me/app/src/a.rs")
        );
        assert!(matches!(
            m.to_editor("/home/me/app/src/a:b.rs"),
            Err(MapError::Unnameable(_))
        ));
        // A share given as a URI goes back with `/` too, as any URI's folder does (it went back
        // with `\`).
        let m = map(&["file://wsl.localhost/Debian/home/me/app=/home/me/app"]);
        assert_eq!(
            m.to_editor("/home/me/app/src/a.rs").as_deref(),
            Ok("//wsl.localhost/Debian/home/me/app/src/a.rs")
        );
        let m = map(&[r"\\wsl.localhost\Debian\home\me\app=/home/me/app"]);
        assert_eq!(
            m.to_here("//wsl.localhost/Debian/home/me/app/a.rs")
                .as_deref(),
            Ok("/home/me/app/a.rs")
        );
        let m = map(&[r"C:\Users\me\app=/home/me/app"]);
        for given in [
            "file://C:/Users/me/app/src/a.rs",
            r"file://C:\Users\me\app\src\a.rs",
        ] {
            assert_eq!(
                m.to_here(given).as_deref(),
                Ok("/home/me/app/src/a.rs"),
                "{given}"
            );
        }
        let m = map(&["file://d:/w=/srv/w"]);
        assert_eq!(m.to_editor("/srv/w/x").as_deref(), Ok("d:/w/x"));
        let m = map(&["/home/me=/srv/me"]);
        assert_eq!(m.to_here("//home/me/a.rs").as_deref(), Ok("/srv/me/a.rs"));
        // No share in it at all (`//x`, `//./x`): the POSIX path, as before.
        let m = map(&["/x=/srv/x"]);
        assert_eq!(m.to_here("//x").as_deref(), Ok("/srv/x"));
        assert_eq!(m.to_here("//./x/a").as_deref(), Ok("/srv/x/a"));
    }

    /// `wsl`'s drive and a folder given as `EDITOR=HERE` that are as long (a whole drive): the
    /// given one wins both ways, whatever the order; the same EDITOR folder twice is refused.
    #[test]
    fn a_given_folder_wins_over_wsls_drive_and_is_given_once() {
        for specs in [[r"D:\=/srv/d", "wsl"], ["wsl", r"D:\=/srv/d"]] {
            let m = map(&specs);
            assert_eq!(
                m.to_here(r"D:\src\a.rs").as_deref(),
                Ok("/srv/d/src/a.rs"),
                "{specs:?}"
            );
            assert_eq!(
                m.to_editor("/srv/d/src/a.rs").as_deref(),
                Ok(r"D:\src\a.rs")
            );
            assert_eq!(m.to_here(r"C:\x").as_deref(), Ok("/mnt/c/x"));
        }
        let mut m = map(&[r"C:\Users\me\app=/a"]);
        let e = m.add("c:/USERS/me/app=/b").unwrap_err();
        assert!(e.contains("mapped already (to /a)"), "{e}");
        let mut m = map(&["/ws=/a"]);
        assert!(m.add("/ws/=/b").is_err());
        m.add("/WS=/b").unwrap();
    }

    /// A workspace folder named through a link (`/home/me/app` -> `/data/app`) whose real path
    /// alone is under a mapping's HERE: its paths go to the editor by the real path, and come
    /// back under the workspace's name.
    #[test]
    fn a_workspace_named_through_a_link_maps_by_its_real_path() {
        let mut m = map(&["/Users/me/data=/data"]);
        m.also_workspace("/home/me/app", "/data/app");
        assert_eq!(
            m.to_editor("/home/me/app/src/a.rs").as_deref(),
            Ok("/Users/me/data/app/src/a.rs")
        );
        assert_eq!(
            m.to_here("/Users/me/data/app/src/a.rs").as_deref(),
            Ok("/home/me/app/src/a.rs")
        );
        assert_eq!(
            m.to_here("/Users/me/data/other/x").as_deref(),
            Ok("/data/other/x")
        );
        assert_eq!(
            m.to_editor("/data/app/b").as_deref(),
            Ok("/Users/me/data/app/b")
        );
        assert!(matches!(
            m.to_editor("/home/me/elsewhere"),
            Err(MapError::Outside(_))
        ));
    }

    #[test]
    fn the_longest_folder_wins_in_both_directions() {
        let m = map(&[
            "wsl",
            r"C:\Users\me\app=/home/me/app",
            "C:/Users/me/app/vendor=/opt/vendor",
        ]);
        assert_eq!(
            m.to_here(r"C:\Users\me\app\a").as_deref(),
            Ok("/home/me/app/a")
        );
        assert_eq!(
            m.to_here(r"C:\Users\me\app\vendor\v").as_deref(),
            Ok("/opt/vendor/v")
        );
        assert_eq!(
            m.to_here(r"C:\Users\me\other").as_deref(),
            Ok("/mnt/c/Users/me/other")
        );
        assert_eq!(
            m.to_editor("/opt/vendor/v").as_deref(),
            Ok("C:/Users/me/app/vendor/v")
        );
        // `C:\Users\me\app\a` is /home/me/app/a for the bridge: /mnt/c/Users/me/app/a has no
        // path in the editor (unless /home/me/app is a link to it: a workspace folder named
        // through a link, below).
        assert!(matches!(
            m.to_editor("/mnt/c/Users/me/app/a"),
            Err(MapError::Shadowed(..))
        ));
        let mut linked = m.clone();
        linked.also_workspace("/home/me/app", "/mnt/c/Users/me/app");
        assert_eq!(
            linked.to_editor("/mnt/c/Users/me/app/a").as_deref(),
            Ok(r"C:\Users\me\app\a")
        );
        // A mapping nested in another on the editor's side only (`vendor` a mount of its own
        // there): the bridge's /srv/a/b/x has no path in the editor; C:\a\b\x is /srv/other/x.
        let m2 = map(&[r"C:\a=/srv/a", r"C:\a\b=/srv/other"]);
        let e = m2.to_editor("/srv/a/b/x").unwrap_err();
        assert!(e.to_string().contains(r#""C:\\a\\b\\x""#), "{e}");
        assert!(e.to_string().contains("\"/srv/other/x\""), "{e}");
        assert_eq!(m2.to_editor("/srv/a/c").as_deref(), Ok(r"C:\a\c"));
        assert_eq!(m2.to_editor("/srv/other/x").as_deref(), Ok(r"C:\a\b\x"));
        // A name that only starts like a folder is not under it.
        let m = map(&["/ws=/srv/ws"]);
        assert!(matches!(m.to_here("/ws2/a"), Err(MapError::Outside(_))));
        assert!(matches!(
            m.to_editor("/srv/ws2/a"),
            Err(MapError::Outside(_))
        ));
    }

    #[test]
    fn what_cannot_be_mapped_is_refused_naming_it() {
        let m = map(&["/ws=/srv/ws", r"D:\proj=/srv/proj"]);
        for (given, want) in [
            ("/ws/../etc/passwd", "outside"),
            ("/ws/../../..", "climbs above the root"),
            (r"D:\proj\..\..\x", "climbs above the root"),
            ("ws/a.rs", "not an absolute path"),
            ("file://server/ws/a.rs", "outside"),
            (r"\\server\share\a", "outside"),
            (r"\\server", "a UNC path is"),
            (r"\\?\C:\x", "device paths"),
            ("/ws/a\0b", "cannot be named"),
            (
                "file:///ws/%FF",
                "is not a file:// URI naming a file of this machine",
            ),
            (r"E:\proj\a", "outside"),
        ] {
            let e = m.to_here(given).unwrap_err().to_string();
            assert!(e.contains(want), "{given}: {e}");
            assert!(e.contains(&format!("{given:?}")), "names the path: {e}");
        }
        assert!(matches!(
            m.to_editor("/srv/proj/a\\b"),
            Err(MapError::Unnameable(_))
        ));
        assert!(matches!(
            m.to_editor("relative"),
            Err(MapError::NotAbsolute(_))
        ));
        // `..` from the bridge's side: after a link it leads elsewhere than its text.
        for dotdot in ["/srv/ws/lnk/../x", "/srv/ws/..", "/srv/../srv/ws/a"] {
            assert!(
                matches!(m.to_editor(dotdot), Err(MapError::DotDot(_))),
                "{dotdot}"
            );
        }
        // Long names are cut in the message.
        let long = format!("/elsewhere/{}", "é".repeat(1000));
        let e = m.to_here(&long).unwrap_err().to_string();
        assert!(e.len() < 700, "{}", e.len());
    }

    #[test]
    fn bad_specs_are_refused_and_links_add_a_name() {
        let mut m = PathMap::default();
        for bad in ["nothing", "rel=/x", "/x=rel", "/x=/../y"] {
            assert!(m.add(bad).is_err(), "{bad}");
        }
        m.add("/ws=/home/me/link").unwrap();
        m.also_here("/home/me/link", "/srv/real");
        assert_eq!(m.to_editor("/srv/real/a").as_deref(), Ok("/ws/a"));
        assert_eq!(m.to_editor("/home/me/link/a").as_deref(), Ok("/ws/a"));
        assert_eq!(m.to_here("/ws/a").as_deref(), Ok("/home/me/link/a"));
        assert_eq!(m.here_folders(), ["/home/me/link"]);
    }

    /// A folder named with `=` is mapped: the value splits at the one `=` where both sides are
    /// folders; one that splits at two is refused naming both readings, and a value that splits
    /// at none says what is wrong at its first `=`.
    #[test]
    fn folders_named_with_equals_signs_are_mapped() {
        let mut m = PathMap::default();
        m.add(r"C:\a=b\app=/srv/x=y/app").unwrap();
        m.add("/Users/me/k=v=/home/me/k=v").unwrap();
        assert_eq!(
            m.to_here(r"C:\a=b\app\s.rs").as_deref(),
            Ok("/srv/x=y/app/s.rs")
        );
        assert_eq!(
            m.to_editor("/srv/x=y/app/s.rs").as_deref(),
            Ok(r"C:\a=b\app\s.rs")
        );
        assert_eq!(
            m.to_editor("/home/me/k=v/a").as_deref(),
            Ok("/Users/me/k=v/a")
        );
        let e = PathMap::default().add("/a=/b=/c").unwrap_err();
        assert!(
            e.contains("ambiguous") && e.contains(r#""/a" or "/a=/b""#),
            "{e}"
        );
        let e = PathMap::default().add("/a=b=c").unwrap_err();
        assert!(
            e.contains(r#"HERE: "b=c""#) && e.contains("not an absolute path"),
            "{e}"
        );
    }

    /// A file or folder name: spaces, non-ASCII letters, dots, `%`, but not `.` or `..` alone,
    /// nor a separator, nor a name a Windows editor cannot be sent (a space or a dot at its end, a
    /// device's name).
    fn name() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 é中%._~-]{1,8}".prop_filter("not . or .., and one Windows holds", |n| {
            n != "." && n != ".." && windows_nameable(n)
        })
    }

    fn names(max: usize) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(name(), 0..max)
    }

    proptest! {
        /// A path under a mapping comes back as the same path, whichever form it was given in.
        #[test]
        fn round_trip(
            folder in names(4), here in names(4), rest in names(5),
            drive in proptest::char::range('a', 'z'), upper: bool, slash: bool, uri: bool,
        ) {
            let d = if upper { drive.to_ascii_uppercase() } else { drive };
            let sep = if slash { "/" } else { "\\" };
            let editor = format!("{d}:{sep}{}", folder.join(sep));
            let here_dir = format!("/{}", here.join("/"));
            let m = map(&[&format!("{editor}={here_dir}")]);
            let mut all = folder.clone();
            all.extend(rest.iter().cloned());
            let given = if uri {
                claude_ide_bridge::file_uri(&format!("{}:\\{}", drive.to_ascii_uppercase(), all.join("\\")))
            } else {
                format!("{}:\\{}", drive, all.join("\\"))
            };
            let h = m.to_here(&given).unwrap();
            let mut want = here.clone();
            want.extend(rest.iter().cloned());
            prop_assert_eq!(&h, &write_posix(&want));
            let back = m.to_editor(&h).unwrap();
            prop_assert_eq!(parse_editor(&back).unwrap(), parse_editor(&given).unwrap());
            prop_assert!(back.starts_with(&format!("{d}:{sep}")), "spelled as given: {}", back);
            // And from the bridge's side.
            prop_assert_eq!(m.to_here(&back).unwrap(), h);
        }

        /// Of the folders a path is under, the one with the most names maps it; a path under none
        /// is refused.
        #[test]
        fn longest_prefix(a in names(3), b in names(3), rest in names(3), other in name()) {
            let outer = format!("/e/{}", a.join("/"));
            let inner = format!("{outer}/in/{}", b.join("/"));
            let m = map(&[&format!("{outer}=/h1"), &format!("{inner}=/h2")]);
            let path = format!("{inner}/{}", rest.join("/"));
            let want = format!("/h2/{}", rest.join("/"));
            prop_assert_eq!(m.to_here(&path).unwrap(), parse_here(&want).map(|p| write_posix(&p.names)).unwrap());
            let beside = format!("{outer}/{other}x");
            prop_assert!(m.to_here(&beside).unwrap().starts_with("/h1/"));
            let outside = format!("/f/{other}");
            prop_assert!(matches!(m.to_here(&outside), Err(MapError::Outside(_))));
            let elsewhere = format!("/h3/{other}");
            prop_assert!(matches!(m.to_editor(&elsewhere), Err(MapError::Outside(_))));
        }

        /// `..` never leaves a mapped folder while staying mapped to it: the path is resolved first,
        /// and what it resolves to is mapped (or refused) as itself.
        #[test]
        fn dot_dot_is_resolved_before_mapping(folder in names(3), ups in 0usize..6, rest in names(3)) {
            let editor = format!("/e/{}", folder.join("/"));
            let m = map(&[&format!("{editor}=/h")]);
            let path = format!("{editor}/{}{}", "../".repeat(ups), rest.join("/"));
            let resolved = parse_editor(&path);
            match m.to_here(&path) {
                Ok(h) => {
                    let r = resolved.unwrap();
                    prop_assert!(r.names.starts_with(&parse_editor(&editor).unwrap().names));
                    prop_assert!(h.starts_with("/h"));
                }
                Err(MapError::Outside(_)) => {
                    let r = resolved.unwrap();
                    prop_assert!(!r.names.starts_with(&parse_editor(&editor).unwrap().names));
                }
                Err(MapError::Climbs(_)) => prop_assert!(resolved.is_err()),
                Err(e) => prop_assert!(false, "{}", e),
            }
        }
    }
}
