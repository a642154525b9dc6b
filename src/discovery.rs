//! Discovery (docs/protocol.md, "Discovery" and "Auth token"): the authentication token, the lock file's content,
//! and where lock files live.
//!
//! Only the pure parts are here. Writing the file (atomically, mode 0600, in a 0700 directory, never through a
//! symbolic link), removing it on exit, and reading the environment belong to the runtime, which passes the
//! values in.

use std::fmt;
use std::path::PathBuf;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand_core::{CryptoRng, RngCore};
use serde::{Deserialize, Serialize};

/// The secret the client presents in `X-Claude-Code-Ide-Authorization`.
///
/// `Debug` shows `AuthToken(<redacted>)`; there is deliberately no `Display`. Equality and [`AuthToken::matches`]
/// take time that depends only on the lengths, never on where the bytes differ.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AuthToken(String);

/// Compares in time independent of the content (only the lengths show).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.is_empty() {
        return b.is_empty();
    }
    let mut diff = a.len() ^ b.len();
    for (i, &byte) in b.iter().enumerate() {
        diff |= usize::from(byte ^ a[i % a.len()]);
    }
    std::hint::black_box(diff) == 0
}

impl AuthToken {
    /// Number of random bytes in a generated token (256 bits).
    pub const RANDOM_BYTES: usize = 32;

    /// Generates a fresh token: 32 bytes from `rng`, written as base64url without padding (43 characters).
    ///
    /// Pass the operating system's CSPRNG: `rand_core::OsRng` of `rand_core` 0.6 with its `getrandom`
    /// feature (the version whose `CryptoRng` and `RngCore` this takes; later versions moved
    /// `OsRng` out), or take `claude_ide_bridge_runtime::generate_token()`. Use a new token per
    /// server start.
    ///
    /// ```
    /// use claude_ide_bridge::AuthToken;
    /// let token = AuthToken::generate(&mut rand_core::OsRng);
    /// assert_eq!(token.as_str().len(), 43);
    /// assert!(token.matches(token.as_str()));
    /// assert_eq!(format!("{token:?}"), "AuthToken(<redacted>)");
    /// ```
    pub fn generate<R: RngCore + CryptoRng>(rng: &mut R) -> AuthToken {
        let mut bytes = [0u8; Self::RANDOM_BYTES];
        rng.fill_bytes(&mut bytes);
        AuthToken(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Wraps an existing token (for example one read back from a lock file).
    pub fn from_string(token: impl Into<String>) -> AuthToken {
        AuthToken(token.into())
    }

    /// The token text, for writing the lock file or the client's header. Never log it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` (the header value) equals the token, in constant time. An empty token matches nothing.
    ///
    /// ```
    /// use claude_ide_bridge::AuthToken;
    /// let token = AuthToken::from_string("s3cret");
    /// assert!(token.matches("s3cret"));
    /// assert!(!token.matches("s3cre"));
    /// assert!(!AuthToken::from_string("").matches(""));
    /// ```
    pub fn matches(&self, candidate: &str) -> bool {
        !self.0.is_empty() && ct_eq(self.0.as_bytes(), candidate.as_bytes())
    }
}

impl PartialEq for AuthToken {
    fn eq(&self, other: &Self) -> bool {
        ct_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl Eq for AuthToken {}

impl fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

/// The content of a lock file, `<port>.lock`.
///
/// Serialises with the wire keys `pid`, `workspaceFolders`, `ideName`, `transport`, `runningInWindows`,
/// `authToken`, and `processStart` when it has one. `Debug` redacts the token.
///
/// The file holds the token: a host writing it itself makes it private to the user (mode 0600, in
/// a folder of mode 0700 that the user owns; on Windows, the user's profile), as the runtimes'
/// lock files are, and writes it whole (a temporary file renamed over it), since `claude` may read
/// it at any moment. Anyone who can read it can drive the editor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockFile {
    /// The host's process id (the client deletes lock files whose pid is dead).
    pub pid: u32,
    /// Absolute workspace folder paths; the client auto-connects when its working directory is inside one.
    pub workspace_folders: Vec<String>,
    /// The name the client shows for this IDE.
    pub ide_name: String,
    /// Always `"ws"` in a file this crate writes. Empty when a file has none (the real client
    /// then takes the IDE for an SSE one, which it no longer reaches).
    #[serde(default)]
    pub transport: String,
    /// Whether the host runs on Windows. `false` when a file has none, as the real client reads
    /// it (claudecode.nvim writes none).
    #[serde(default)]
    pub running_in_windows: bool,
    /// The token the client must present. Empty when a file has none (the real client reads such
    /// a file, and connects without a token; an empty token matches nothing here).
    #[serde(default = "no_token")]
    pub auth_token: AuthToken,
    /// When the host's process started, in its operating system's own terms (this project's
    /// member; the client ignores it): with `pid`, it names one process, so that a file whose pid
    /// was handed out again (after a reboot or a container's restart) is told from a live host's.
    /// Opaque: compared as text with what the same system says of the pid now. The runtime writes
    /// it where the system keeps such a start (Linux: `<boot id>/<start in clock ticks after
    /// boot>`); `None` elsewhere, and in other hosts' files. [`LockFile::new`] leaves it `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_start: Option<String>,
}

/// The token of a lock file that names none.
fn no_token() -> AuthToken {
    AuthToken(String::new())
}

impl LockFile {
    /// A lock file with transport `"ws"`.
    pub fn new(
        pid: u32,
        workspace_folders: Vec<String>,
        ide_name: impl Into<String>,
        running_in_windows: bool,
        auth_token: AuthToken,
    ) -> LockFile {
        LockFile {
            pid,
            workspace_folders,
            ide_name: ide_name.into(),
            transport: "ws".to_owned(),
            running_in_windows,
            auth_token,
            process_start: None,
        }
    }

    /// The JSON to write into the file.
    ///
    /// ```
    /// use claude_ide_bridge::{AuthToken, LockFile};
    /// let lock = LockFile::new(42, vec!["/home/me/ws".into()], "MyEditor", false, AuthToken::from_string("t"));
    /// let json = lock.to_json();
    /// assert_eq!(
    ///     json,
    ///     r#"{"pid":42,"workspaceFolders":["/home/me/ws"],"ideName":"MyEditor","transport":"ws","runningInWindows":false,"authToken":"t"}"#
    /// );
    /// assert_eq!(LockFile::parse(&json).unwrap(), lock);
    /// ```
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a lock file holds only strings, numbers and booleans")
    }

    /// Parses a lock file's content. Unknown keys are ignored; a missing `transport` or
    /// `runningInWindows` is read as the real client reads it (empty, `false`).
    ///
    /// ```
    /// use claude_ide_bridge::LockFile;
    /// // As claudecode.nvim writes it.
    /// let l = LockFile::parse(
    ///     r#"{"pid":7,"workspaceFolders":["/w"],"ideName":"Neovim","transport":"ws","authToken":"t"}"#,
    /// )
    /// .unwrap();
    /// assert!(!l.running_in_windows);
    /// assert!(LockFile::parse(r#"{"pid":7}"#).is_err());
    /// ```
    pub fn parse(json: &str) -> Result<LockFile, serde_json::Error> {
        serde_json::from_str(json)
    }
}

/// The directories holding lock files, in the order the real client scans them.
///
/// `claude_config_dir` is `$CLAUDE_CONFIG_DIR` and `home` is the home directory, both as read by the runtime.
/// Gives `$CLAUDE_CONFIG_DIR/ide` when set and not empty, then `$HOME/.claude/ide`, without duplicates.
/// A host writes its lock file into the first one.
///
/// ```
/// use std::path::PathBuf;
/// use claude_ide_bridge::lock_dirs;
/// assert_eq!(
///     lock_dirs(Some("/cfg"), Some("/home/me")),
///     vec![PathBuf::from("/cfg/ide"), PathBuf::from("/home/me/.claude/ide")]
/// );
/// assert_eq!(lock_dirs(Some(""), Some("/home/me")), vec![PathBuf::from("/home/me/.claude/ide")]);
/// ```
pub fn lock_dirs(claude_config_dir: Option<&str>, home: Option<&str>) -> Vec<PathBuf> {
    let mut dirs = Vec::with_capacity(2);
    if let Some(dir) = claude_config_dir.filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir).join("ide"));
    }
    if let Some(home) = home.filter(|h| !h.is_empty()) {
        let dir = PathBuf::from(home).join(".claude").join("ide");
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The lock file's name for a port: `<port>.lock`.
///
/// ```
/// use claude_ide_bridge::{lock_file_name, port_from_lock_name};
/// assert_eq!(lock_file_name(41234), "41234.lock");
/// assert_eq!(port_from_lock_name("41234.lock"), Some(41234));
/// ```
pub fn lock_file_name(port: u16) -> String {
    format!("{port}.lock")
}

/// The port named by a lock file's name, `None` unless it is exactly `<port>.lock` with a port from 1 to 65535
/// written in plain decimal (no sign, no leading zero).
pub fn port_from_lock_name(name: &str) -> Option<u16> {
    let digits = name.strip_suffix(".lock")?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A deterministic generator for tests (SplitMix64). Not cryptographic; marked so only to drive `generate`.
    struct TestRng(u64);

    impl RngCore for TestRng {
        fn next_u32(&mut self) -> u32 {
            (self.next_u64() >> 32) as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            for chunk in dest.chunks_mut(8) {
                let v = self.next_u64().to_le_bytes();
                chunk.copy_from_slice(&v[..chunk.len()]);
            }
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    impl CryptoRng for TestRng {}

    #[test]
    fn token_length_charset_uniqueness() {
        let mut rng = TestRng(7);
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let t = AuthToken::generate(&mut rng);
            assert_eq!(t.as_str().len(), 43);
            assert!(t
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            assert_eq!(URL_SAFE_NO_PAD.decode(t.as_str()).unwrap().len(), 32);
            assert!(seen.insert(t.as_str().to_owned()));
        }
        let a = AuthToken::generate(&mut TestRng(1));
        let b = AuthToken::generate(&mut TestRng(1));
        assert_eq!(a, b, "same seed, same token");
        // Tokens from the OS generator are tested in runtimes/runtime, which owns that source.
    }

    #[test]
    fn token_matching() {
        let t = AuthToken::from_string("abcdef");
        assert!(t.matches("abcdef"));
        assert!(!t.matches("abcdeg"));
        assert!(!t.matches("abcdefabcdef"));
        assert!(!t.matches("abc"));
        assert!(!t.matches(""));
        assert!(!AuthToken::from_string("").matches(""));
        assert_eq!(AuthToken::from_string(""), AuthToken::from_string(""));
        assert_ne!(AuthToken::from_string("a"), AuthToken::from_string(""));
        assert_ne!(AuthToken::from_string("ab"), AuthToken::from_string("abab"));
    }

    #[test]
    fn debug_redacts() {
        let t = AuthToken::from_string("TOPSECRET");
        assert_eq!(format!("{t:?}"), "AuthToken(<redacted>)");
        assert_eq!(format!("{t:#?}"), "AuthToken(<redacted>)");
        let lock = LockFile::new(1, vec!["/w".into()], "Ed", false, t);
        let dbg = format!("{lock:?} {lock:#?}");
        assert!(!dbg.contains("TOPSECRET"));
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn lock_file_json() {
        let lock = LockFile::new(
            4242,
            vec!["/home/me/a".into(), "/home/me/b c".into()],
            "Helix \"dev\"",
            true,
            AuthToken::from_string("tok-_1"),
        );
        let json = lock.to_json();
        assert_eq!(
            json,
            r#"{"pid":4242,"workspaceFolders":["/home/me/a","/home/me/b c"],"ideName":"Helix \"dev\"","transport":"ws","runningInWindows":true,"authToken":"tok-_1"}"#
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 6);
        assert_eq!(LockFile::parse(&json).unwrap(), lock);
        let extra = r#"{"pid":1,"workspaceFolders":[],"ideName":"x","transport":"ws","runningInWindows":false,"authToken":"t","extra":1}"#;
        assert_eq!(LockFile::parse(extra).unwrap().pid, 1);
        // No token (the real client reads such a file): an empty one, which matches nothing.
        let tokenless = r#"{"pid":1,"workspaceFolders":["/w"],"ideName":"x","transport":"ws"}"#;
        let read = LockFile::parse(tokenless).unwrap();
        assert_eq!(read.auth_token.as_str(), "");
        assert!(!read.auth_token.matches(""));
        assert!(LockFile::parse(r#"{"pid":1}"#).is_err());
        assert!(LockFile::parse("not json").is_err());
    }

    #[test]
    fn dirs() {
        assert_eq!(
            lock_dirs(Some("/cfg"), Some("/h")),
            vec![PathBuf::from("/cfg/ide"), PathBuf::from("/h/.claude/ide")]
        );
        assert_eq!(
            lock_dirs(Some("/h/.claude"), Some("/h")),
            vec![PathBuf::from("/h/.claude/ide")]
        );
        assert_eq!(
            lock_dirs(None, Some("/h")),
            vec![PathBuf::from("/h/.claude/ide")]
        );
        assert_eq!(
            lock_dirs(Some("/cfg"), None),
            vec![PathBuf::from("/cfg/ide")]
        );
        assert_eq!(lock_dirs(Some(""), Some("")), Vec::<PathBuf>::new());
        assert_eq!(lock_dirs(None, None), Vec::<PathBuf>::new());
    }

    #[test]
    fn lock_names() {
        assert_eq!(lock_file_name(1), "1.lock");
        assert_eq!(lock_file_name(65535), "65535.lock");
        assert_eq!(port_from_lock_name("65535.lock"), Some(65535));
        assert_eq!(port_from_lock_name("1.lock"), Some(1));
        for bad in [
            "0.lock",
            "065.lock",
            "65536.lock",
            "+5.lock",
            "-5.lock",
            ".lock",
            "5.lock.tmp",
            "5",
            "a.lock",
            "5 .lock",
        ] {
            assert_eq!(port_from_lock_name(bad), None, "{bad}");
        }
    }
}
