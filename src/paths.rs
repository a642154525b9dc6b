//! Path and `file://` URI handling (docs/protocol.md, "Paths and URIs"), as pure string functions.
//!
//! Paths crossing the wire are absolute and POSIX-style: a Windows path `C:\Users\me\a.rs` travels as
//! `/c/Users/me/a.rs`, and as the URI `file:///c:/Users/me/a.rs`. Nothing here touches the file system:
//! [`normalize`], [`is_within`] and [`resolve_in_workspace`] are lexical. A host that serves files must still
//! canonicalise the result (resolving symbolic links) and check it again with [`is_within`] against the
//! canonicalised workspace folders before opening anything, because a link inside the workspace may point
//! outside it.
//!
//! Windows paths are recognised by a drive letter (`C:\`, `C:/`, `C:`), a UNC prefix `\\server\share`, or
//! either written verbatim (`\\?\C:\`, `\\?\UNC\server\share`). Any other path is taken as POSIX, where a
//! backslash is an ordinary character. Comparisons are case-sensitive except for the drive letter, which is
//! always written in lower case; hosts on case-insensitive file systems should canonicalise the case of both
//! sides first.

use std::fmt;

/// Splits a Windows drive path into its lower-case drive letter and the rest (which is empty or starts with a
/// separator). A path written verbatim (`\\?\C:\`) is none: its readers take the prefix off first
/// ([`without_verbatim_prefix`]).
fn split_drive(path: &str) -> Option<(char, &str)> {
    let b = path.as_bytes();
    let drive_like = b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b.len() == 2 || b[2] == b'\\' || b[2] == b'/');
    drive_like.then(|| (char::from(b[0].to_ascii_lowercase()), &path[2..]))
}

/// A Windows path without the verbatim prefix `\\?\` that `canonicalize` and other Win32 calls put
/// before an absolute path: `\\?\C:\x` is written `C:\x` and `\\?\UNC\server\share\x` is written
/// `\\server\share\x`, the forms people type and other programs take (Node, for one, does not read a
/// verbatim path as the file it names). Any other path, verbatim paths that name no drive or share
/// (`\\?\Volume{...}\`) included, is returned as it is.
///
/// ```
/// use claude_ide_bridge::without_verbatim_prefix;
/// assert_eq!(without_verbatim_prefix(r"\\?\C:\Users\me"), r"C:\Users\me");
/// assert_eq!(without_verbatim_prefix(r"\\?\UNC\srv\share\a"), r"\\srv\share\a");
/// assert_eq!(without_verbatim_prefix(r"\\?\Volume{1}\a"), r"\\?\Volume{1}\a");
/// assert_eq!(without_verbatim_prefix("/home/me"), "/home/me");
/// ```
pub fn without_verbatim_prefix(path: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if let Some(share) = path.strip_prefix(r"\\?\UNC\") {
        return Cow::Owned(format!(r"\\{share}"));
    }
    match path.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => Cow::Borrowed(rest),
        _ => Cow::Borrowed(path),
    }
}

/// Whether a path is written the Windows way: a drive letter, a verbatim prefix or a UNC prefix.
fn windows_style(path: &str) -> bool {
    split_drive(path).is_some() || path.starts_with(r"\\")
}

/// Converts a native path to the POSIX style used on the wire.
///
/// Windows drive paths become `/<drive>/...` with a lower-case drive letter and forward slashes; UNC paths
/// `\\server\share\x` become `//server/share/x`, and so do both written verbatim (`\\?\C:\x`,
/// `\\?\UNC\server\share\x`: [`without_verbatim_prefix`]). Every other path is returned unchanged (a POSIX
/// path may legitimately contain backslashes).
///
/// ```
/// use claude_ide_bridge::to_posix;
/// assert_eq!(to_posix(r"C:\Users\me\a.rs"), "/c/Users/me/a.rs");
/// assert_eq!(to_posix("D:/work/x"), "/d/work/x");
/// assert_eq!(to_posix(r"\\?\UNC\srv\share\a"), "//srv/share/a");
/// assert_eq!(to_posix("/home/me/a.rs"), "/home/me/a.rs");
/// ```
pub fn to_posix(path: &str) -> String {
    let path = &*without_verbatim_prefix(path);
    if let Some((drive, rest)) = split_drive(path) {
        let mut out = String::with_capacity(path.len() + 1);
        out.push('/');
        out.push(drive);
        out.push_str(&rest.replace('\\', "/"));
        out
    } else if path.starts_with(r"\\") {
        path.replace('\\', "/")
    } else {
        path.to_owned()
    }
}

/// The Windows path of a path in the wire's POSIX style, the inverse of [`to_posix`]: `/c/Users/me/a.rs`
/// is `C:\Users\me\a.rs` (`/c` alone is `C:\`) and `//server/share/a` is `\\server\share\a`. `None` for a
/// path that names no drive or share (`/home/me/a.rs`, `/cd/x`, `//server` without a share), which a host
/// on Windows keeps as it is.
///
/// ```
/// use claude_ide_bridge::{posix_to_windows, to_posix};
/// assert_eq!(posix_to_windows("/c/Users/me/a.rs").as_deref(), Some(r"C:\Users\me\a.rs"));
/// assert_eq!(posix_to_windows("/d").as_deref(), Some(r"D:\"));
/// assert_eq!(posix_to_windows("//srv/share/a").as_deref(), Some(r"\\srv\share\a"));
/// assert_eq!(posix_to_windows(&to_posix(r"E:\x y\z")).as_deref(), Some(r"E:\x y\z"));
/// assert_eq!(posix_to_windows("/home/me/a.rs"), None);
/// assert_eq!(posix_to_windows("/cd/x"), None);
/// ```
pub fn posix_to_windows(path: &str) -> Option<String> {
    if let Some(after) = path.strip_prefix("//") {
        let slash = after.find('/')?;
        return unc_path(&after[..slash], &after[slash..]);
    }
    let b = path.as_bytes();
    let drive = b.len() >= 2 && b[0] == b'/' && b[1].is_ascii_alphabetic();
    (drive && (b.len() == 2 || b[2] == b'/')).then(|| drive_path(char::from(b[1]), &path[2..]))
}

/// How a connected client names files, when it differs from the host's own names: the paths and
/// URIs of the `selection_changed`, `at_mentioned` and `diagnostics_changed` notifications it is
/// sent are written its way ([`Server::set_client_paths`](crate::Server::set_client_paths)), and a
/// host answering its tools names files so with [`ClientPaths::path`] and [`ClientPaths::uri`].
///
/// ```
/// use claude_ide_bridge::ClientPaths;
/// assert_eq!(ClientPaths::default(), ClientPaths::AsGiven);
/// assert_eq!(ClientPaths::WslMounts.path(r"C:\Users\me\a.rs").as_deref(), Some("/mnt/c/Users/me/a.rs"));
/// assert_eq!(ClientPaths::AsGiven.path(r"C:\Users\me\a.rs"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ClientPaths {
    /// As the host gives them: the client runs where the host does.
    #[default]
    AsGiven,
    /// A `claude` running in WSL, the host on Windows: a Windows drive path is sent as the path where
    /// WSL mounts the drive ([`wsl_mount_path`]: `C:\x\a.rs` as `/mnt/c/x/a.rs`), which the client
    /// can read; any other path as it is.
    WslMounts,
}

impl ClientPaths {
    /// The client's name of a host's path, when it is not the path itself.
    pub fn path(self, path: &str) -> Option<String> {
        match self {
            ClientPaths::AsGiven => None,
            ClientPaths::WslMounts => wsl_mount_path(path),
        }
    }

    /// The client's URI of a host's `file:` URI, when it is not the URI itself (for a claude in
    /// WSL, a Windows drive's file: `file:///c:/x/a.rs` as `file:///mnt/c/x/a.rs`).
    ///
    /// ```
    /// use claude_ide_bridge::ClientPaths;
    /// let wsl = ClientPaths::WslMounts;
    /// assert_eq!(wsl.uri("file:///c:/my%20app/a.rs").as_deref(), Some("file:///mnt/c/my%20app/a.rs"));
    /// assert_eq!(wsl.uri("file:///home/me/a.rs"), None);
    /// assert_eq!(ClientPaths::AsGiven.uri("file:///c:/a.rs"), None);
    /// ```
    pub fn uri(self, uri: &str) -> Option<String> {
        match self {
            ClientPaths::AsGiven => None,
            ClientPaths::WslMounts => Some(file_uri(&self.path(&uri_to_windows_path(uri)?)?)),
        }
    }
}

/// Where WSL mounts a Windows drive path by default (its `automount` root, `/mnt`): `C:\Users\me\a.rs`
/// (or `c:/Users/me/a.rs`, or written verbatim) is `/mnt/c/Users/me/a.rs`, the path a program in WSL
/// opens it by. `None` for any other path: a share (`\\server\share\x`) has no such path, and a POSIX
/// path is already one.
///
/// ```
/// use claude_ide_bridge::wsl_mount_path;
/// assert_eq!(wsl_mount_path(r"D:\work\my app\a.rs").as_deref(), Some("/mnt/d/work/my app/a.rs"));
/// assert_eq!(wsl_mount_path(r"\\?\C:\x").as_deref(), Some("/mnt/c/x"));
/// assert_eq!(wsl_mount_path("C:").as_deref(), Some("/mnt/c"));
/// assert_eq!(wsl_mount_path(r"\\srv\share\a.rs"), None);
/// assert_eq!(wsl_mount_path("/home/me/a.rs"), None);
/// ```
pub fn wsl_mount_path(path: &str) -> Option<String> {
    let path = without_verbatim_prefix(path);
    let (drive, rest) = split_drive(&path)?;
    let rest = rest.replace('\\', "/");
    Some(format!("/mnt/{drive}{}", rest.trim_end_matches('/')))
}

/// The Windows path of a path under WSL's drive mounts, the inverse of [`wsl_mount_path`]:
/// `/mnt/c/Users/me/a.rs` is `C:\Users\me\a.rs` and `/mnt/d` is `D:\`, the file a `claude` in
/// WSL names so (its own path of it, which it does not convert in every call). `None` for any
/// other path.
///
/// ```
/// use claude_ide_bridge::path_of_wsl_mount;
/// assert_eq!(path_of_wsl_mount("/mnt/c/Users/me/a.rs").as_deref(), Some(r"C:\Users\me\a.rs"));
/// assert_eq!(path_of_wsl_mount("/mnt/d").as_deref(), Some(r"D:\"));
/// assert_eq!(path_of_wsl_mount("/mnt/cd/x"), None);
/// assert_eq!(path_of_wsl_mount("/home/me/a.rs"), None);
/// ```
pub fn path_of_wsl_mount(path: &str) -> Option<String> {
    // A drive's wire path below the mount root (not a share's: `/mnt//srv/share` is none).
    let below = path.strip_prefix("/mnt").filter(|b| !b.starts_with("//"))?;
    posix_to_windows(below)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `s` percent-encoded: every byte outside RFC 3986 unreserved characters and `/` is escaped.
fn encode_into(out: &mut String, s: &str) {
    for &byte in s.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
}

/// Builds the percent-encoded `file://` URI of a path.
///
/// Everything outside the RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`) and `/` is percent-encoded
/// byte by byte (UTF-8), so a space becomes `%20`, `#` becomes `%23` and `é` becomes `%C3%A9`. Windows drive
/// paths give `file:///c:/...` (lower-case drive, colon kept); UNC paths give `file://server/share/...`, and
/// so do both written verbatim ([`without_verbatim_prefix`]). A relative path is taken as relative to the
/// root (a `/` is prepended): pass absolute paths.
///
/// ```
/// use claude_ide_bridge::file_uri;
/// assert_eq!(file_uri("/home/me/my file#1.rs"), "file:///home/me/my%20file%231.rs");
/// assert_eq!(file_uri(r"C:\Users\me\a.rs"), "file:///c:/Users/me/a.rs");
/// assert_eq!(file_uri(r"\\?\UNC\srv\share\a.rs"), "file://srv/share/a.rs");
/// ```
pub fn file_uri(path: &str) -> String {
    let path = &*without_verbatim_prefix(path);
    let mut out = String::with_capacity(path.len() + 16);
    out.push_str("file://");
    if let Some((drive, rest)) = split_drive(path) {
        out.push('/');
        out.push(drive);
        out.push(':');
        let rest = rest.replace('\\', "/");
        if rest.is_empty() {
            out.push('/');
        } else {
            encode_into(&mut out, &rest);
        }
    } else if let Some(unc) = path.strip_prefix(r"\\") {
        let unc = unc.replace('\\', "/");
        let (host, rest) = unc.split_at(unc.find('/').unwrap_or(unc.len()));
        encode_into(&mut out, host);
        if rest.is_empty() {
            out.push('/');
        } else {
            encode_into(&mut out, rest);
        }
    } else {
        if !path.starts_with('/') {
            out.push('/');
        }
        encode_into(&mut out, path);
    }
    out
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes leniently: a `%` not followed by two hex digits is kept as is. `None` when the result is
/// not UTF-8 or contains NUL.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(hi), Some(lo)) = (hex_value(b[i + 1]), hex_value(b[i + 2])) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    if out.contains(&0) {
        return None;
    }
    String::from_utf8(out).ok()
}

/// Converts a `file://` URI back to a POSIX-style absolute path (the inverse of [`file_uri`]).
///
/// The scheme is matched case-insensitively; the authority must be empty or `localhost`, otherwise the result
/// is a UNC-style `//host/path`. Percent escapes are decoded (a `%` not followed by two hex digits is kept
/// literally, since some clients do not encode). A Windows drive (`/c:/x`, `/C%3A/x`) gives the wire form
/// `/c/x`; so does `file://` followed by a Windows path (`file://C:\x`, the form the Windows `claude` sends),
/// and `file://\\srv\share\x` (its form for a file on a share) gives `//srv/share/x`.
/// `?` and `#` are taken as part of the path, since file URIs in this protocol carry neither a
/// query nor a fragment. Returns `None` for other schemes, a
/// missing path, invalid UTF-8, or NUL.
///
/// The wire form loses whether a drive was written (`file:///c:/x` and `file:///c/x` both give `/c/x`):
/// a Windows program takes the path a URI names from [`uri_to_windows_path`].
///
/// ```
/// use claude_ide_bridge::{file_uri, uri_to_path};
/// assert_eq!(uri_to_path("file:///home/me/my%20file.rs").as_deref(), Some("/home/me/my file.rs"));
/// assert_eq!(uri_to_path("file:///c:/Users/me/a.rs").as_deref(), Some("/c/Users/me/a.rs"));
/// assert_eq!(uri_to_path(r"file://C:\Users\me\a.rs").as_deref(), Some("/c/Users/me/a.rs"));
/// assert_eq!(uri_to_path(&file_uri("/tmp/ü ?#%")).as_deref(), Some("/tmp/ü ?#%"));
/// assert_eq!(uri_to_path("https://example.com/x"), None);
/// ```
pub fn uri_to_path(uri: &str) -> Option<String> {
    let (host, path) = match split_file_uri(uri)? {
        FileUri::Drive(native) => return percent_decode(native).map(|p| to_posix(&p)),
        FileUri::Share(native) => {
            let (host, path) = share_of_native(native)?;
            return Some(format!("//{host}{path}"));
        }
        FileUri::Path { host, path } => (host, path),
    };
    let decoded = percent_decode(path)?;
    if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
        let host = percent_decode(host)?;
        return Some(format!("//{host}{decoded}"));
    }
    if let Some((letter, rest)) = drive_of_uri_path(&decoded) {
        let mut out = String::with_capacity(decoded.len());
        out.push('/');
        out.push(letter.to_ascii_lowercase());
        out.push_str(rest);
        return Some(out);
    }
    Some(decoded)
}

/// Whether `uri` is a `file:` URI: it starts with the scheme `file:`, in any case (`FILE:`,
/// `File:`), with or without the `//` of an authority after it.
///
/// This says nothing about the file it names: [`uri_to_path`] and [`uri_to_windows_path`] answer
/// that, and are `None` both for another scheme and for a `file:` URI that names no file (no path,
/// escapes that decode to no text, or on Windows no drive written). With this predicate a caller
/// tells the two apart, to refuse the second with its own reason rather than take the text as a
/// path or as another scheme's URI. Pure string work, the same on every OS.
///
/// ```
/// use claude_ide_bridge::{is_file_uri, uri_to_windows_path};
/// assert!(is_file_uri("file:///home/me/a.rs"));
/// assert!(is_file_uri("FILE://localhost/c:/x"));
/// assert!(is_file_uri("file:/x"));
/// assert!(!is_file_uri("untitled:Untitled-1"));
/// assert!(!is_file_uri("/home/me/file:x"));
/// // A `file:` URI that names no Windows file, told apart from another scheme's URI.
/// let uri = "file:///c/x";
/// assert!(is_file_uri(uri) && uri_to_windows_path(uri).is_none());
/// ```
pub fn is_file_uri(uri: &str) -> bool {
    uri.as_bytes()
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"file:"))
}

/// A `file:` URI taken apart, before percent-decoding.
enum FileUri<'a> {
    /// `file://` then a Windows drive path, `file://C:\Users\me\a.rs`: what the Windows `claude`
    /// sends (`file://` and the native path), never a host named `C:`. The text after `file://`.
    Drive(&'a str),
    /// `file://` then a Windows share's path, `file://\\srv\share\a.rs`: the Windows `claude`'s
    /// form for a file on a share (`\\wsl.localhost\Debian\...` included). The text after `file://`.
    Share(&'a str),
    /// An authority (empty, `localhost` or a host) and the path after it, from its `/`.
    Path { host: &'a str, path: &'a str },
}

/// Splits a `file:` URI (scheme matched case-insensitively): `None` for another scheme, or no path.
fn split_file_uri(uri: &str) -> Option<FileUri<'_>> {
    if !is_file_uri(uri) {
        return None;
    }
    let rest = &uri[5..];
    if let Some(after) = rest.strip_prefix("//") {
        if after.starts_with(r"\\") {
            return Some(FileUri::Share(after));
        }
        if split_drive(after).is_some() {
            return Some(FileUri::Drive(after));
        }
        let slash = after.find('/')?;
        Some(FileUri::Path {
            host: &after[..slash],
            path: &after[slash..],
        })
    } else if rest.starts_with('/') {
        Some(FileUri::Path {
            host: "",
            path: rest,
        })
    } else {
        None
    }
}

/// The host and the path after it (from its separator, each `\\` a `/`) of a share's path written
/// after `file://` ([`FileUri::Share`]), decoded; `None` for an empty host or nothing after it.
fn share_of_native(native: &str) -> Option<(String, String)> {
    let decoded = percent_decode(native)?;
    let after = decoded.strip_prefix(r"\\")?.replace('\\', "/");
    let slash = after.find('/').filter(|&i| i > 0)?;
    let (host, path) = after.split_at(slash);
    Some((host.to_owned(), path.to_owned()))
}

/// The drive a decoded URI path starts with (`/C:` alone or before a `/`), as written, and the rest.
fn drive_of_uri_path(decoded: &str) -> Option<(char, &str)> {
    let b = decoded.as_bytes();
    let drive = b.len() >= 3
        && b[0] == b'/'
        && b[1].is_ascii_alphabetic()
        && b[2] == b':'
        && (b.len() == 3 || b[3] == b'/');
    drive.then(|| (char::from(b[1]), &decoded[3..]))
}

/// The Windows path a `file:` URI names, or `None` when it names none.
///
/// A drive gives `C:\...`: its letter in upper case, every `/` a `\`, `C:\` for the drive alone. It is
/// taken from the forms [`uri_to_path`] reads as a drive: `file:///C:/x`, `file:///c%3A/x` (as pyright
/// writes it), `file://localhost/c:/x`, `file:/c:/x`, and `file://C:\x` or `file://C:/x` (the Windows
/// `claude`'s own form). A host other than `localhost` gives the UNC path `\\host\share\...`, and so do an
/// empty host before `//host/share` (`file:////host/share/x`) and a share's path after `file://`
/// (`file://\\host\share\x`, the Windows `claude`'s form for a file on a share). Percent escapes are decoded as
/// [`uri_to_path`] decodes them; `?` and `#` are part of the path; `.` and `..` are left for the reader of
/// the path to resolve (or refuse).
///
/// `None` for another scheme, a missing path, escapes decoding to invalid UTF-8 or NUL, a UNC path without
/// a share (`.` and `..` are none) or on the host `?` or `.` (a device or verbatim path, not a share), and a
/// path that writes no drive: `file:///c/x` and `file:///home/me/a.rs` name no Windows file
/// (on Windows `\c\x` would be read against whatever drive is current), even though the wire form of
/// `file:///c:/x` is `/c/x` too. A program that keys documents by path can fall back on [`uri_to_path`]
/// for those, which keeps them apart from every drive path.
///
/// Pure string work, the same on every OS.
///
/// ```
/// use claude_ide_bridge::{uri_to_path, uri_to_windows_path};
/// let windows = |uri| uri_to_windows_path(uri);
/// assert_eq!(windows("file:///C:/x/a.py").as_deref(), Some(r"C:\x\a.py"));
/// assert_eq!(windows("file:///c%3A/x/a%20b.py").as_deref(), Some(r"C:\x\a b.py"));
/// assert_eq!(windows(r"file://C:\x\a.py").as_deref(), Some(r"C:\x\a.py"));
/// assert_eq!(windows("file://server/share/a").as_deref(), Some(r"\\server\share\a"));
/// assert_eq!(windows(r"file://\\server\share\a").as_deref(), Some(r"\\server\share\a"));
/// // The wire form cannot tell these apart; the Windows reading can.
/// assert_eq!(uri_to_path("file:///c/x"), uri_to_path("file:///c:/x"));
/// assert_eq!(windows("file:///c/x"), None);
/// assert_eq!(windows("untitled:Untitled-1"), None);
/// ```
pub fn uri_to_windows_path(uri: &str) -> Option<String> {
    let (host, path) = match split_file_uri(uri)? {
        FileUri::Drive(native) => {
            let decoded = percent_decode(native)?;
            let (letter, rest) = split_drive(&decoded)?;
            return Some(drive_path(letter, rest));
        }
        FileUri::Share(native) => {
            let (host, path) = share_of_native(native)?;
            return unc_path(&host, &path);
        }
        FileUri::Path { host, path } => (host, path),
    };
    let decoded = percent_decode(path)?;
    if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
        return unc_path(&percent_decode(host)?, &decoded);
    }
    if let Some((letter, rest)) = drive_of_uri_path(&decoded) {
        return Some(drive_path(letter, rest));
    }
    let after = decoded.strip_prefix("//")?;
    let slash = after.find('/')?;
    unc_path(&after[..slash], &after[slash..])
}

/// `X:` and the rest, `/` turned to `\` (`X:\` when there is no rest).
fn drive_path(letter: char, rest: &str) -> String {
    let mut out = String::with_capacity(rest.len() + 3);
    out.push(letter.to_ascii_uppercase());
    out.push(':');
    if rest.is_empty() {
        out.push('\\');
    } else {
        out.push_str(&rest.replace('/', "\\"));
    }
    out
}

/// `\\host\share\...` from a host and the path after it (from its `/`); `None` without a share (or
/// with `.` or `..` for one), for a host holding a separator, and for the hosts `?` and `.`, which
/// would make a Windows device or verbatim path (`\\?\C:\x`, `\\.\COM1`), not a share.
fn unc_path(host: &str, path: &str) -> Option<String> {
    let share = path.strip_prefix('/')?.split(['/', '\\']).next()?;
    if host.is_empty()
        || host.contains(['/', '\\'])
        || matches!(host, "?" | ".")
        || matches!(share, "" | "." | "..")
    {
        return None;
    }
    Some(format!(r"\\{host}{}", path.replace('/', "\\")))
}

/// Normalises a path lexically: resolves `.` and `..`, collapses repeated `/`, drops a trailing `/`.
///
/// Windows paths are first converted with [`to_posix`], so the result is always POSIX-style. Returns `None`
/// for an empty path, or when `..` climbs above the root (or, for a relative path, above its start). A relative
/// path that normalises to nothing gives `"."`. Symbolic links are not resolved (see the module docs).
///
/// ```
/// use claude_ide_bridge::normalize;
/// assert_eq!(normalize("/a//b/./c/../d/").as_deref(), Some("/a/b/d"));
/// assert_eq!(normalize("/a/b/../../.."), None);
/// assert_eq!(normalize(r"C:\ws\src\..\lib.rs").as_deref(), Some("/c/ws/lib.rs"));
/// ```
pub fn normalize(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let posix = to_posix(path);
    let absolute = posix.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for segment in posix.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    Some(if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    })
}

/// Whether `path` is `folder` or lies inside it, comparing whole components after [`normalize`].
///
/// Both must be absolute; `/a/bc` is not within `/a/b`. When `folder` is a Windows path, backslashes in
/// `path` count as separators too. Returns `false` when either fails to normalise.
///
/// ```
/// use claude_ide_bridge::is_within;
/// assert!(is_within("/ws/src/main.rs", "/ws"));
/// assert!(is_within("/ws", "/ws/"));
/// assert!(!is_within("/wsx/main.rs", "/ws"));
/// assert!(!is_within("/ws/../etc/passwd", "/ws"));
/// ```
pub fn is_within(path: &str, folder: &str) -> bool {
    let path = if windows_style(folder) {
        std::borrow::Cow::Owned(to_posix(path).replace('\\', "/"))
    } else {
        std::borrow::Cow::Borrowed(path)
    };
    let (Some(path), Some(folder)) = (normalize(&path), normalize(folder)) else {
        return false;
    };
    within_normalized(&path, &folder)
}

/// `name` (a name, or a whole path) as a case-insensitive Windows file system (NTFS's default)
/// compares it: two names are one there when their keys are equal. Its table upper-cases one
/// UTF-16 unit at a time, to one unit: a character whose upper case is longer (`ß` to `SS`, `ﬁ`
/// to `FI`) stays as it is, and so does one outside the Basic Multilingual Plane (a surrogate
/// pair). A pure function, on every OS.
///
/// ```
/// use claude_ide_bridge::windows_case_key;
/// assert_eq!(windows_case_key(r"c:\Users\émilie\a.rs"), windows_case_key(r"C:\USERS\ÉMILIE\A.RS"));
/// assert_ne!(windows_case_key("straße"), windows_case_key("STRASSE"));
/// ```
pub fn windows_case_key(name: &str) -> String {
    name.chars().map(windows_upper).collect()
}

/// One character as [`windows_case_key`] takes it.
fn windows_upper(c: char) -> char {
    if u32::from(c) > 0xFFFF {
        return c;
    }
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

fn within_normalized(path: &str, folder: &str) -> bool {
    if !path.starts_with('/') || !folder.starts_with('/') {
        return false;
    }
    if folder == "/" {
        return true;
    }
    match path.strip_prefix(folder) {
        Some("") => true,
        Some(rest) => rest.starts_with('/'),
        None => false,
    }
}

/// Why a path was refused by [`resolve_in_workspace`]. Every case maps to JSON-RPC `-32602` (invalid params).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty.
    Empty,
    /// The path contains a NUL character.
    InvalidCharacter,
    /// There is no workspace folder to resolve against (or the first one is not absolute).
    NoWorkspace,
    /// `..` climbs out of the root or out of the folder a relative path was resolved against.
    Traversal,
    /// The absolute path is not inside any workspace folder.
    OutsideWorkspace,
}

impl PathError {
    /// The JSON-RPC error code to answer with: always invalid params (`-32602`,
    /// [`RpcError::INVALID_PARAMS`](crate::RpcError::INVALID_PARAMS)).
    pub const fn json_rpc_code(self) -> i32 {
        crate::jsonrpc::INVALID_PARAMS
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathError::Empty => "path is empty",
            PathError::InvalidCharacter => "path contains a NUL character",
            PathError::NoWorkspace => "no workspace folder to resolve the path in",
            PathError::Traversal => "path escapes the workspace through '..'",
            PathError::OutsideWorkspace => "path is outside the workspace folders",
        })
    }
}

impl std::error::Error for PathError {}

impl From<PathError> for crate::jsonrpc::RpcError {
    /// Invalid params (`-32602`): the path a peer sent is not acceptable.
    fn from(e: PathError) -> Self {
        crate::jsonrpc::RpcError::invalid_params(e.to_string())
    }
}

/// Resolves a path from a peer inside the workspace, lexically.
///
/// A relative path is resolved against the first folder and must stay inside it. An absolute path (POSIX or
/// Windows) must, after [`normalize`], be inside some folder. When any folder is a Windows path (drive letter or
/// UNC), backslashes in `path` are separators, so `..\..\x` is refused there as `../../x` is everywhere,
/// and a Windows folder's names match in any case, as Windows compares them ([`windows_case_key`]).
/// Returns the normalised absolute POSIX-style path (in the case `path` gave).
///
/// This cannot see symbolic links: the host must canonicalise the returned path (and the folders) and check
/// again with [`is_within`] before reading or writing, or a link inside the workspace leads out of it.
///
/// ```
/// use claude_ide_bridge::{resolve_in_workspace, PathError};
/// let folders = vec!["/home/me/ws".to_string()];
/// assert_eq!(resolve_in_workspace("src/main.rs", &folders).as_deref(), Ok("/home/me/ws/src/main.rs"));
/// assert_eq!(resolve_in_workspace("/home/me/ws/./a.rs", &folders).as_deref(), Ok("/home/me/ws/a.rs"));
/// assert_eq!(resolve_in_workspace("../secret", &folders), Err(PathError::Traversal));
/// assert_eq!(resolve_in_workspace("/etc/passwd", &folders), Err(PathError::OutsideWorkspace));
/// let windows = vec![r"C:\Users\Me\App".to_string()];
/// assert_eq!(resolve_in_workspace(r"c:\USERS\me\app\a.rs", &windows).as_deref(), Ok("/c/USERS/me/app/a.rs"));
/// assert_eq!(resolve_in_workspace("/home/me/WS/a.rs", &folders), Err(PathError::OutsideWorkspace));
/// ```
pub fn resolve_in_workspace(path: &str, folders: &[String]) -> Result<String, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\0') {
        return Err(PathError::InvalidCharacter);
    }
    let mut posix = to_posix(path);
    if folders.iter().any(|f| windows_style(f)) {
        // On a Windows host a backslash separates components even in a relative path: `..\..\x` climbs.
        posix = posix.replace('\\', "/");
    }
    if posix.starts_with('/') {
        if folders.is_empty() {
            return Err(PathError::NoWorkspace);
        }
        let resolved = normalize(&posix).ok_or(PathError::Traversal)?;
        // A Windows folder's names in any case, as Windows compares them (`C:\Users\Me\App` is
        // `c:\users\me\app`); which file that is, the host's look at the disk says.
        let folded =
            (folders.iter().any(|f| windows_style(f))).then(|| windows_case_key(&resolved));
        let inside = folders.iter().any(|given| {
            let Some(f) = normalize(given) else {
                return false;
            };
            within_normalized(&resolved, &f)
                || (folded.as_ref()).is_some_and(|r| {
                    windows_style(given) && within_normalized(r, &windows_case_key(&f))
                })
        });
        if inside {
            Ok(resolved)
        } else {
            Err(PathError::OutsideWorkspace)
        }
    } else {
        let base = folders
            .first()
            .and_then(|f| normalize(f))
            .filter(|f| f.starts_with('/'))
            .ok_or(PathError::NoWorkspace)?;
        let resolved = normalize(&format!("{base}/{posix}")).ok_or(PathError::Traversal)?;
        if within_normalized(&resolved, &base) {
            Ok(resolved)
        } else {
            Err(PathError::Traversal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn posix_conversion() {
        assert_eq!(to_posix(r"C:\Users\me\a.rs"), "/c/Users/me/a.rs");
        assert_eq!(to_posix(r"c:\"), "/c/");
        assert_eq!(to_posix("C:"), "/c");
        assert_eq!(to_posix(r"\\?\D:\x\y"), "/d/x/y");
        assert_eq!(to_posix(r"\\server\share\x"), "//server/share/x");
        assert_eq!(to_posix(r"\\?\UNC\server\share\x"), "//server/share/x");
        assert_eq!(to_posix("/usr/a\\b"), "/usr/a\\b");
        assert_eq!(to_posix("rel/x"), "rel/x");
        assert_eq!(to_posix("C:rel"), "C:rel");
        assert_eq!(to_posix(""), "");
    }

    #[test]
    fn uri_encoding() {
        assert_eq!(file_uri("/a b/c#d?e%f"), "file:///a%20b/c%23d%3Fe%25f");
        assert_eq!(
            file_uri("/naïve/日本.rs"),
            "file:///na%C3%AFve/%E6%97%A5%E6%9C%AC.rs"
        );
        assert_eq!(file_uri("/A-Z_a.z~0/9"), "file:///A-Z_a.z~0/9");
        assert_eq!(file_uri("/x:y+z@w"), "file:///x%3Ay%2Bz%40w");
        assert_eq!(
            file_uri(r"C:\Users\me\my file.rs"),
            "file:///c:/Users/me/my%20file.rs"
        );
        assert_eq!(file_uri("C:"), "file:///c:/");
        assert_eq!(file_uri(r"\\srv\share\a b"), "file://srv/share/a%20b");
        assert_eq!(file_uri("rel/x"), "file:///rel/x");
    }

    /// The scheme check every reader of `file:` URIs shares: any case, five bytes that may end
    /// inside a character, and nothing about the path after it.
    #[test]
    fn file_scheme() {
        for yes in [
            "file:///x",
            "FILE:///x",
            "File://localhost/c:/x",
            "fIlE://server/share/x",
            "file:/x",
            "file:x",
            "file:",
            "file://",
            r"file://C:\x",
            "file:///c/x",
            "file:///%FF",
        ] {
            assert!(is_file_uri(yes), "{yes}");
        }
        for no in [
            "",
            "file",
            "fil:",
            "filé:///x",
            "fil\u{e9}",
            "fileé",
            "ééé",
            "files:///x",
            "file//x",
            " file:///x",
            "untitled:Untitled-1",
            "_claude_fs_right:/w/a.py",
            "https://example.com/file:///x",
            "/home/me/file:x",
            r"C:\file:x",
        ] {
            assert!(!is_file_uri(no), "{no}");
        }
        // What names no file is still a `file:` URI: the readers refuse it for that reason.
        for names_none in ["file:", "file://", "file:x", "file:///%FF", "file:///a%00"] {
            assert!(is_file_uri(names_none), "{names_none}");
            assert_eq!(uri_to_path(names_none), None, "{names_none}");
            assert_eq!(uri_to_windows_path(names_none), None, "{names_none}");
        }
        assert!(is_file_uri("file:///c/x") && uri_to_windows_path("file:///c/x").is_none());
        assert_eq!(uri_to_path("untitled:Untitled-1"), None);
    }

    #[test]
    fn uri_decoding() {
        assert_eq!(
            uri_to_path("file:///a%20b/c%23d").as_deref(),
            Some("/a b/c#d")
        );
        assert_eq!(uri_to_path("FILE:///x").as_deref(), Some("/x"));
        assert_eq!(uri_to_path("file://localhost/x").as_deref(), Some("/x"));
        assert_eq!(uri_to_path("file:/x/y").as_deref(), Some("/x/y"));
        assert_eq!(
            uri_to_path("file:///C%3A/Users/x").as_deref(),
            Some("/c/Users/x")
        );
        assert_eq!(uri_to_path("file:///D:").as_deref(), Some("/d"));
        // `file://` and a Windows path, as the Windows claude writes its getDiagnostics URI:
        // a drive, not a host `C:` (which gave `//C:/Users/x` before, or nothing with `\`).
        assert_eq!(
            uri_to_path(r"file://C:\Users\me\my file.rs").as_deref(),
            Some("/c/Users/me/my file.rs")
        );
        assert_eq!(
            uri_to_path("file://C:/Users/x").as_deref(),
            Some("/c/Users/x")
        );
        assert_eq!(uri_to_path("file://d:").as_deref(), Some("/d"));
        assert_eq!(uri_to_path(r"file://C:\a%20b").as_deref(), Some("/c/a b"));
        assert_eq!(uri_to_path("file://C:x"), None);
        assert_eq!(
            uri_to_path("file://srv/share/x").as_deref(),
            Some("//srv/share/x")
        );
        // Unencoded input from a lenient client.
        assert_eq!(
            uri_to_path("file:///a b/100%/c").as_deref(),
            Some("/a b/100%/c")
        );
        assert_eq!(uri_to_path("file:///a%2").as_deref(), Some("/a%2"));
        assert_eq!(uri_to_path("file:///a%").as_deref(), Some("/a%"));
        assert_eq!(uri_to_path("file:///%e6%97%a5").as_deref(), Some("/日"));
        assert_eq!(uri_to_path("file:///%FF"), None);
        assert_eq!(uri_to_path("file:///a%00b"), None);
        assert_eq!(uri_to_path("file:relative"), None);
        assert_eq!(uri_to_path("file://host"), None);
        assert_eq!(uri_to_path("http:///x"), None);
        assert_eq!(uri_to_path("fil"), None);
        assert_eq!(uri_to_path("filé:///x"), None);
    }

    #[test]
    fn windows_reading_of_uris() {
        let cases: &[(&str, Option<&str>)] = &[
            // A drive, in every form a client writes one.
            ("file:///C:/x/a.py", Some(r"C:\x\a.py")),
            ("file:///c:/x/a.py", Some(r"C:\x\a.py")),
            ("file:///c%3A/x/a.py", Some(r"C:\x\a.py")),
            ("file:///c%3a/x/a%20b.py", Some(r"C:\x\a b.py")),
            ("FILE:///D:/x", Some(r"D:\x")),
            ("file:/c:/x", Some(r"C:\x")),
            ("file://localhost/c:/x", Some(r"C:\x")),
            ("file://LOCALHOST/c:/x", Some(r"C:\x")),
            (r"file://C:\x\a.py", Some(r"C:\x\a.py")),
            (r"file://c:\x\my%20file.py", Some(r"C:\x\my file.py")),
            ("file://C:/x/a.py", Some(r"C:\x\a.py")),
            ("file:///d:", Some(r"D:\")),
            ("file:///d:/", Some(r"D:\")),
            ("file://d:", Some(r"D:\")),
            ("file:///C:/%E6%97%A5/a%23b?c", Some(r"C:\日\a#b?c")),
            ("file:///C:/a b/100%/c", Some(r"C:\a b\100%\c")),
            ("file:///C:/a%2", Some(r"C:\a%2")),
            // `..` is the reader's to resolve or refuse.
            ("file:///C:/x/../y", Some(r"C:\x\..\y")),
            // A host: a UNC path.
            ("file://server/share/a", Some(r"\\server\share\a")),
            ("file://srv/share/a%20b/c", Some(r"\\srv\share\a b\c")),
            ("file:////srv/share/a", Some(r"\\srv\share\a")),
            ("file://srv/", None),
            ("file://srv//a", None),
            ("file://a%2Fb/share/x", None),
            ("file://a%5Cb/share/x", None),
            ("file://%3F/C:/x", None),
            ("file://?/C:/x", None),
            ("file:////?/C:/x", None),
            ("file:////./COM1/x", None),
            ("file://./pipe/x", None),
            ("file://srv/../x", None),
            ("file://srv/./x", None),
            ("file://srv/.../x", Some(r"\\srv\...\x")),
            ("file://host", None),
            // A share's path after `file://`, as the Windows `claude` writes it.
            (r"file://\\srv\share\a.py", Some(r"\\srv\share\a.py")),
            (
                r"file://\\wsl.localhost\Debian\home\a%20b.py",
                Some(r"\\wsl.localhost\Debian\home\a b.py"),
            ),
            (r"file://\\srv/share/a", Some(r"\\srv\share\a")),
            (r"file://\\srv\share", Some(r"\\srv\share")),
            (r"file://\\srv", None),
            (r"file://\\srv\", None),
            (r"file://\\\share\a", None),
            (r"file://\\?\C:\x", None),
            (r"file://\\?\UNC\srv\share\x", None),
            (r"file://\\.\COM1", None),
            // No drive written: no Windows path.
            ("file:///c/x", None),
            ("file:///C/x/a.py", None),
            ("file:///c", None),
            ("file:///home/me/a.py", None),
            ("file://localhost/c/x", None),
            ("file:///C:x", None),
            ("file://C:x", None),
            (r"file:///C:\x", None),
            ("file:///cd:/x", None),
            // Escapes that decode to no text, or to NUL.
            ("file:///C:/%FF", None),
            ("file:///C:/a%00b", None),
            (r"file://C:\a%FFb", None),
            // Not a file URI.
            ("untitled:Untitled-1", None),
            ("http://server/share/a", None),
            ("https:///C:/x", None),
            ("file:relative", None),
            ("file:C:/x", None),
            ("file:", None),
            ("fil", None),
            ("", None),
        ];
        for (uri, want) in cases {
            assert_eq!(uri_to_windows_path(uri).as_deref(), *want, "{uri}");
        }
        // The wire reading names the same file whenever the Windows reading names one.
        for (uri, want) in cases {
            if let Some(w) = want {
                let wire = uri_to_path(uri).expect(uri).replace('\\', "/");
                assert_eq!(normalize(&wire), normalize(&to_posix(w)), "{uri}");
            }
        }
    }

    #[test]
    fn windows_round_trip() {
        let p = r"C:\Users\me\some dir\ü.rs";
        assert_eq!(uri_to_path(&file_uri(p)), Some(to_posix(p)));
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize("/").as_deref(), Some("/"));
        assert_eq!(normalize("//a///b//").as_deref(), Some("/a/b"));
        assert_eq!(normalize("/a/./b/.").as_deref(), Some("/a/b"));
        assert_eq!(normalize("/a/b/..").as_deref(), Some("/a"));
        assert_eq!(normalize("/a/..").as_deref(), Some("/"));
        assert_eq!(normalize("/..").as_deref(), None);
        assert_eq!(normalize("/a/b/../../..").as_deref(), None);
        assert_eq!(normalize("/a/../../b").as_deref(), None);
        assert_eq!(normalize("a/b/../c").as_deref(), Some("a/c"));
        assert_eq!(normalize("a/..").as_deref(), Some("."));
        assert_eq!(normalize("./").as_deref(), Some("."));
        assert_eq!(normalize("a/../..").as_deref(), None);
        assert_eq!(normalize("/a/...").as_deref(), Some("/a/..."));
        assert_eq!(normalize("/a/..b").as_deref(), Some("/a/..b"));
        assert_eq!(normalize(""), None);
    }

    #[test]
    fn within() {
        assert!(is_within("/a/b", "/a/b"));
        assert!(is_within("/a/b/c", "/a/b"));
        assert!(is_within("/a/b/c", "/a/b/"));
        assert!(!is_within("/a/bc", "/a/b"));
        assert!(!is_within("/a", "/a/b"));
        assert!(is_within("/anything", "/"));
        assert!(!is_within("/a/b/../c", "/a/b"));
        assert!(is_within("/a/b/x/../y", "/a/b"));
        assert!(!is_within("a/b", "a"));
        assert!(!is_within("/a/b", "a"));
        assert!(!is_within("/..", "/"));
        assert!(is_within(r"C:\ws\x", "/c/ws"));
        assert!(is_within("/c/ws/x", r"C:\ws"));
    }

    #[test]
    fn resolve() {
        let ws = vec!["/home/me/ws".to_string(), "/srv/other/".to_string()];
        let ok = |p: &str| resolve_in_workspace(p, &ws);
        assert_eq!(ok("a.rs").as_deref(), Ok("/home/me/ws/a.rs"));
        assert_eq!(ok("./src/../a.rs").as_deref(), Ok("/home/me/ws/a.rs"));
        assert_eq!(ok(".").as_deref(), Ok("/home/me/ws"));
        assert_eq!(ok("/srv/other/x").as_deref(), Ok("/srv/other/x"));
        assert_eq!(ok("/srv/other").as_deref(), Ok("/srv/other"));
        assert_eq!(ok("/home/me/ws/a/../b").as_deref(), Ok("/home/me/ws/b"));
        assert_eq!(ok("~/x").as_deref(), Ok("/home/me/ws/~/x"));
        assert_eq!(ok(".."), Err(PathError::Traversal));
        assert_eq!(ok("../ws2/x"), Err(PathError::Traversal));
        assert_eq!(ok("a/../../ws/x").as_deref(), Ok("/home/me/ws/x"));
        assert_eq!(
            ok("../../../../../../etc/passwd"),
            Err(PathError::Traversal)
        );
        assert_eq!(ok("/home/me/ws/../../../.."), Err(PathError::Traversal));
        assert_eq!(
            ok("/home/me/ws/../secret"),
            Err(PathError::OutsideWorkspace)
        );
        assert_eq!(ok("/home/me/wsx/a"), Err(PathError::OutsideWorkspace));
        assert_eq!(ok("/etc/passwd"), Err(PathError::OutsideWorkspace));
        assert_eq!(ok(""), Err(PathError::Empty));
        assert_eq!(ok("a\0b"), Err(PathError::InvalidCharacter));
        assert_eq!(resolve_in_workspace("a", &[]), Err(PathError::NoWorkspace));
        assert_eq!(resolve_in_workspace("/a", &[]), Err(PathError::NoWorkspace));
        assert_eq!(
            resolve_in_workspace("a", &["rel".to_string()]),
            Err(PathError::NoWorkspace)
        );
        let win = vec![r"C:\ws".to_string()];
        assert_eq!(
            resolve_in_workspace(r"C:\ws\src\a.rs", &win).as_deref(),
            Ok("/c/ws/src/a.rs")
        );
        assert_eq!(
            resolve_in_workspace(r"src\a.rs", &win).as_deref(),
            Ok("/c/ws/src/a.rs")
        );
        assert_eq!(
            resolve_in_workspace(r"..\..\x", &win),
            Err(PathError::Traversal)
        );
        assert_eq!(
            resolve_in_workspace(r"/c/ws/..\..\x", &win),
            Err(PathError::OutsideWorkspace)
        );
        assert!(!is_within(r"/c/ws/..\..\x", r"C:\ws"));
        // On a POSIX host a backslash is an ordinary character.
        assert_eq!(ok(r"..\x").as_deref(), Ok("/home/me/ws/..\\x"));
        assert_eq!(
            resolve_in_workspace(r"D:\ws\a.rs", &win),
            Err(PathError::OutsideWorkspace)
        );
        // A Windows folder in any case, as Windows compares names (a share's too); not a longer
        // name, nor one whose upper case is longer (`ß`); a POSIX folder's case counts.
        let win = vec![
            r"C:\Users\Émilie\Straße".to_string(),
            r"\\srv\Share".to_string(),
        ];
        for inside in [r"c:\USERS\émilie\STRAßE\a.rs", r"\\SRV\share\a.rs"] {
            assert!(resolve_in_workspace(inside, &win).is_ok(), "{inside}");
        }
        for outside in [
            r"C:\Users\Émilie\STRASSE\a.rs",
            r"c:\users\émilie\straßex\a.rs",
        ] {
            let refused = resolve_in_workspace(outside, &win);
            assert_eq!(refused, Err(PathError::OutsideWorkspace), "{outside}");
        }
        assert_eq!(ok("/HOME/me/ws/a"), Err(PathError::OutsideWorkspace));
        let root = vec!["/".to_string()];
        assert_eq!(resolve_in_workspace("/etc", &root).as_deref(), Ok("/etc"));
        assert_eq!(
            resolve_in_workspace("../etc", &root),
            Err(PathError::Traversal)
        );
    }

    #[test]
    fn error_display_and_code() {
        assert_eq!(
            PathError::Traversal.to_string(),
            "path escapes the workspace through '..'"
        );
        assert_eq!(PathError::OutsideWorkspace.json_rpc_code(), -32602);
    }

    fn segment() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                any::<char>().prop_filter("no separator or NUL", |c| *c != '/' && *c != '\0'),
                proptest::sample::select(vec![' ', '#', '?', '%', 'é', '日', '😀', ':', '\\', '+']),
            ],
            1..8,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #[test]
        fn uri_round_trip(segments in proptest::collection::vec(segment(), 0..6)) {
            let path = format!("/{}", segments.join("/"));
            // A first component shaped like a drive (`/c:`) is read back as a Windows drive, by design.
            let b = path.as_bytes();
            prop_assume!(!(b.len() >= 3 && b[1].is_ascii_alphabetic() && b[2] == b':' && (b.len() == 3 || b[3] == b'/')));
            let uri = file_uri(&path);
            prop_assert!(uri.bytes().all(|c| c.is_ascii_graphic()));
            prop_assert_eq!(uri_to_path(&uri), Some(path));
        }

        #[test]
        fn windows_uri_round_trip(letter in proptest::char::range('a', 'z'), upper in any::<bool>(),
                                  segments in proptest::collection::vec(segment(), 0..6)) {
            let segments: Vec<String> = segments.into_iter().map(|s| s.replace('\\', "_")).collect();
            let letter = if upper { letter.to_ascii_uppercase() } else { letter };
            let native = format!("{letter}:\\{}", segments.join("\\"));
            let want = format!("{}:\\{}", letter.to_ascii_uppercase(), segments.join("\\"));
            // Written by the bridge, and as the Windows `claude` writes it (`file://` and the path).
            prop_assert_eq!(uri_to_windows_path(&file_uri(&native)), Some(want.clone()));
            prop_assert_eq!(uri_to_windows_path(&format!("file://{native}").replace('%', "%25")), Some(want.clone()));
            // The wire reading names the same file, and reads back as it.
            prop_assert_eq!(uri_to_path(&file_uri(&native)), Some(to_posix(&want)));
            prop_assert_eq!(posix_to_windows(&to_posix(&native)), Some(want.clone()));
            // So does a share's path.
            let share = format!(r"\\srv\{}", segments.join("\\"));
            let named = !segments.is_empty() && !matches!(segments[0].as_str(), "." | "..");
            prop_assert_eq!(posix_to_windows(&to_posix(&share)), named.then_some(share.clone()));
        }

        #[test]
        fn windows_and_wire_readings_name_one_file(
            start in proptest::sample::select(vec!["file:", "file:/", "file://", "file:///", "file:////", "FILE://"]),
            host in proptest::sample::select(vec!["", "localhost", "srv", "?", "%3F", ".", "C:", "c%3A", "c"]),
            pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "/", "\\", "//", "C:", "c", "%3A", "%3a", "%5C", "%2F", "%3F", "%25", "%", "?", ".", "..",
                "localhost", "srv", "a", " ", "é", "%C3%A9", "%FF", "%00", "#",
            ]), 0..10)) {
            let uri = format!("{start}{host}{}", pieces.concat());
            let wire = uri_to_path(&uri);
            if let Some(windows) = uri_to_windows_path(&uri) {
                prop_assert!(windows.starts_with(r"\\") || windows.as_bytes()[1] == b':', "{}", windows);
                let wire = wire.expect("a URI with a Windows path has a wire path");
                prop_assert_eq!(
                    normalize(&wire.replace('\\', "/")),
                    normalize(&to_posix(&windows).replace('\\', "/")),
                    "{} gave {} against {}", uri, windows, wire
                );
            }
        }

        /// A file on a share, as the bridge writes its URI and as the Windows `claude` does
        /// (`file://` and the path): the Windows reading gives the path back, the wire reading its
        /// POSIX form.
        #[test]
        fn share_uri_round_trip(host in "[a-zA-Z0-9][a-zA-Z0-9.-]{0,15}", share in "[a-zA-Z0-9$_-]{1,8}",
                                segments in proptest::collection::vec(segment(), 0..5)) {
            let segments: Vec<String> = segments.into_iter().map(|s| s.replace(['\\', '/'], "_")).collect();
            let mut native = format!(r"\\{host}\{share}");
            for segment in &segments {
                native.push('\\');
                native.push_str(segment);
            }
            prop_assert_eq!(uri_to_windows_path(&file_uri(&native)), Some(native.clone()));
            let claudes = format!("file://{native}").replace('%', "%25");
            prop_assert_eq!(uri_to_windows_path(&claudes), Some(native.clone()));
            prop_assert_eq!(uri_to_path(&claudes), Some(to_posix(&native)));
        }

        /// A path written verbatim (`\\?\C:\...`, `\\?\UNC\srv\share\...`, as `canonicalize` gives it on
        /// Windows) reads as the path it names: the same wire path and URI, and inside that path's folder.
        #[test]
        fn verbatim_paths_read_as_the_paths_they_name(
            unc in any::<bool>(), segments in proptest::collection::vec(segment(), 1..6)) {
            let segments: Vec<String> = segments.into_iter().map(|s| s.replace('\\', "_")).collect();
            let (plain, verbatim) = if unc {
                let plain = format!(r"\\srv\share\{}", segments.join("\\"));
                let verbatim = format!(r"\\?\UNC{}", &plain[1..]);
                (plain, verbatim)
            } else {
                let plain = format!(r"C:\{}", segments.join("\\"));
                (plain.clone(), format!(r"\\?\{plain}"))
            };
            prop_assert_eq!(&*without_verbatim_prefix(&verbatim), plain.as_str());
            prop_assert_eq!(to_posix(&verbatim), to_posix(&plain));
            prop_assert_eq!(file_uri(&verbatim), file_uri(&plain));
            let folder = &plain[..plain.rfind('\\').unwrap()];
            prop_assert!(is_within(&verbatim, folder), "{} in {}", verbatim, folder);
        }

        /// A drive's file, however Windows writes it, is the file WSL mounts at `/mnt/<drive>`: the
        /// path the wire form gives under `/mnt`, whose URI reads back as that path.
        #[test]
        fn a_drives_file_is_where_wsl_mounts_the_drive(
            letter in proptest::char::range('a', 'z'), upper in any::<bool>(), slash in any::<bool>(),
            verbatim in any::<bool>(), segments in proptest::collection::vec(segment(), 1..6)) {
            let segments: Vec<String> = segments.into_iter().map(|s| s.replace('\\', "_")).collect();
            let drive = if upper { letter.to_ascii_uppercase() } else { letter };
            let sep = if slash && !verbatim { "/" } else { "\\" };
            let path = format!("{}{drive}:{sep}{}", if verbatim { r"\\?\" } else { "" }, segments.join(sep));
            let wsl = wsl_mount_path(&path).unwrap();
            let posix = format!("/mnt{}", to_posix(&path));
            prop_assert_eq!(wsl.as_str(), posix.trim_end_matches('/'));
            let mount = format!("/mnt/{}", letter);
            prop_assert!(wsl.starts_with(&mount), "{} under {}", wsl, mount);
            prop_assert_eq!(uri_to_path(&file_uri(&wsl)), Some(wsl.clone()));
            prop_assert_eq!(wsl_mount_path(&wsl), None);
            // and back: the Windows path of that mount path is mounted there again
            let back = path_of_wsl_mount(&wsl).unwrap();
            prop_assert!(back.starts_with(&format!("{}:", letter.to_ascii_uppercase())), "{}", back);
            prop_assert_eq!(wsl_mount_path(&back), Some(wsl.clone()));
        }

        #[test]
        fn posix_paths_name_no_windows_file(segments in proptest::collection::vec(segment(), 0..6)) {
            let path = format!("/{}", segments.join("/"));
            let b = path.as_bytes();
            prop_assume!(!(b.len() >= 3 && b[1].is_ascii_alphabetic() && b[2] == b':' && (b.len() == 3 || b[3] == b'/')));
            prop_assert_eq!(uri_to_windows_path(&file_uri(&path)), None);
        }

        #[test]
        fn normalize_is_idempotent_and_within(segments in proptest::collection::vec(
            proptest::sample::select(vec!["a", "b", ".", "..", "", "c d"]), 0..10)) {
            let path = format!("/{}", segments.join("/"));
            if let Some(n) = normalize(&path) {
                prop_assert_eq!(normalize(&n), Some(n.clone()));
                prop_assert!(is_within(&n, "/"));
                prop_assert!(!n.split('/').any(|s| s == "." || s == ".."));
            }
            let ws = vec!["/ws".to_string()];
            if let Ok(p) = resolve_in_workspace(&segments.join("/"), &ws) {
                prop_assert!(is_within(&p, "/ws"));
            }
        }
    }
}
