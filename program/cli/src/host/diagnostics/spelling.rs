//! How the client spells the files it asks about ([`Spellings`]), so that `getDiagnostics {}`
//! names each file as the client will look it up.
//!
//! The real client asks before an edit with `getDiagnostics {uri: "file://" + path}`: the path
//! as it is, not escaped (`file:///home/me/my app/a.py`, `file://C:\Users\me\a.py` from the
//! Windows client). After the edit it asks `getDiagnostics {}` and takes a file of that answer
//! for the edited one only when the text after `file://` is that path (it compares them with no
//! unescaping; on Windows in any case and with either slash). A URI written by the book
//! (`file:///home/me/my%20app/a.py`) never matches a path with a space or a character outside
//! ASCII in it, and the edit's new errors never reached the model there. So a file the client
//! asked about is named in `{}` with the client's own URI, as `getDiagnostics {uri}` is already
//! answered under the URI asked (docs/e2e.md, "What the real client does with diagnostics").
//! A file it did not ask about is named as the client names files ([`Spellings::for_client`]):
//! for a `claude` in WSL asking a bridge on Windows, `file:///mnt/c/...`, which it can read.
//! A file asked about through a link (`link.py -> real.py`, `pkglink/m.py`) is the same file as
//! the one the link leads to, by which name the servers have it and `{}` lists it: that name
//! takes the client's URI too.

use std::collections::VecDeque;

use claude_ide_bridge::{ClientPaths, FileDiagnostics};

use super::editor_path;

/// The files whose spelling is kept at most (the most recent): the client asks about the files
/// it edits, one at a time.
pub(crate) const MAX_SPELLINGS: usize = 256;

/// The `file:` URIs the client asked `getDiagnostics` about, by the file they name (the most
/// recent last), at most [`MAX_SPELLINGS`]; one for each file, the last asked.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spellings {
    /// (the file's key, the key of the file it leads to when links are on its way, the URI as
    /// the client wrote it).
    asked: VecDeque<(String, Option<String>, String)>,
    /// How the client these are for names the files it did not ask about.
    client: ClientPaths,
}

/// What a URI or path names, as one key for all its spellings: its path with escapes decoded
/// and `.`, `..` and repeated `/` resolved, in any case on Windows (as [`super::same_uri`]
/// compares). A `file:` URI's path is the one `getDiagnostics` reads for it
/// ([`crate::sys::path_of_file_uri`]): on Windows the Windows path it names, which is also what
/// a `claude` in WSL names `/mnt/c/...` (its URI is kept for the file the servers name
/// `file:///c:/...`). A path, or a URI naming no file that way, is keyed as before.
fn key(uri: &str) -> Option<String> {
    let named = crate::sys::path_of_file_uri(uri);
    editor_path(named.as_deref().unwrap_or(uri)).map(|p| crate::sys::case_key(&p).into_owned())
}

impl Spellings {
    /// The client asked about `uri`, which is the file `real` (its path with links resolved,
    /// when known): kept when it is a `file:` URI that names a file (a path asked is answered
    /// under `file://` URIs, which the client's `{}` reading needs anyway).
    pub(crate) fn asked(&mut self, uri: &str, real: Option<&str>) {
        if !claude_ide_bridge::is_file_uri(uri) {
            return;
        }
        let Some(named) = key(uri) else { return };
        let real = real.and_then(key).filter(|r| *r != named);
        let key = named;
        self.asked.retain(|(k, ..)| *k != key);
        if self.asked.len() == MAX_SPELLINGS {
            self.asked.pop_front();
        }
        self.asked.push_back((key, real, uri.to_owned()));
    }

    /// How the client wrote the file `uri` names, if it asked about it (by that name, or by a
    /// name leading to it: the last asked).
    pub(crate) fn of(&self, uri: &str) -> Option<&str> {
        if self.asked.is_empty() {
            return None;
        }
        let key = key(uri)?;
        (self.asked.iter().rev())
            .find(|(k, real, _)| *k == key || real.as_ref() == Some(&key))
            .map(|(.., u)| u.as_str())
    }

    /// These spellings, for a client that names the files it did not ask about `client`'s way
    /// (the engine's `ClientPaths`, which the runtime set from the client's pid).
    pub(crate) fn for_client(&self, client: ClientPaths) -> Spellings {
        Spellings {
            asked: self.asked.clone(),
            client,
        }
    }

    /// `files`, each a file the client asked about named with its URI, and the others as the
    /// client names files.
    pub(crate) fn respell(&self, mut files: Vec<FileDiagnostics>) -> Vec<FileDiagnostics> {
        for f in &mut files {
            match self.of(&f.uri) {
                Some(asked) if asked != f.uri => f.uri = asked.to_owned(),
                Some(_) => {}
                None => {
                    if let Some(theirs) = self.client.uri(&f.uri) {
                        f.uri = theirs;
                    }
                }
            }
        }
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use claude_ide_bridge::file_uri;

    fn file(uri: &str) -> FileDiagnostics {
        FileDiagnostics {
            uri: uri.to_owned(),
            diagnostics: Vec::new(),
        }
    }

    /// A file asked about with its path as it is is answered in `{}` under that URI, whichever
    /// way the bridge wrote it; other files as they were.
    #[test]
    fn a_file_asked_about_is_named_as_asked() {
        let mut s = Spellings::default();
        let raw = "file:///ws/my app é/a.py";
        s.asked(raw, None);
        s.asked("/ws/path asked.py", None);
        s.asked("untitled:Untitled-1", None);
        let files = s.respell(vec![
            file(&file_uri("/ws/my app é/a.py")),
            file("file:///ws/./my%20app%20%C3%A9//a.py"),
            file(&file_uri("/ws/other one.py")),
            file(&file_uri("/ws/path asked.py")),
        ]);
        let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                raw,
                raw,
                "file:///ws/other%20one.py",
                "file:///ws/path%20asked.py"
            ]
        );
    }

    /// The Windows client's form, `file://` and the drive's path, is kept for the file the
    /// bridge names `file:///c:/...` (on Windows in any case, as Windows names files), and a
    /// share's `file://\\srv\share\...` for its `file://srv/share/...`.
    #[test]
    fn the_windows_clients_uri_is_kept_for_its_file() {
        let mut s = Spellings::default();
        let raw = r"file://C:\Users\John Smith\app\a.py";
        s.asked(raw, None);
        assert_eq!(s.of("file:///c:/Users/John%20Smith/app/a.py"), Some(raw));
        let other_case = s.of("file:///C:/USERS/john%20smith/App/a.py");
        assert_eq!(other_case, cfg!(windows).then_some(raw));
        // A file on a share: `file://` and the share's path, for the bridge's `file://srv/...`.
        let share = r"file://\\srv\share\my app\b.py";
        s.asked(share, None);
        assert_eq!(s.of("file://srv/share/my%20app/b.py"), Some(share));
    }

    /// A `claude` in WSL names a Windows file by its WSL path (`file:///mnt/c/...`), which a
    /// bridge on Windows reads as that file: its URI is kept for the file the servers name
    /// `file:///c:/...`. Elsewhere `/mnt/c` is a folder like any other.
    #[test]
    fn a_wsl_clients_uri_is_kept_for_its_windows_file() {
        let mut s = Spellings::default();
        let raw = "file:///mnt/c/Users/John Smith/app/a.py";
        s.asked(raw, None);
        let windows = s.of("file:///c:/Users/John%20Smith/app/a.py");
        assert_eq!(windows, cfg!(windows).then_some(raw));
        let unix = s.of("file:///mnt/c/Users/John%20Smith/app/a.py");
        assert_eq!(unix, Some(raw));
    }

    /// For a `claude` in WSL, a file it did not ask about is named by its path there
    /// (`file:///mnt/c/...` for the servers' `file:///c:/...`); one it asked about as it asked;
    /// a file that is no drive's as it is.
    #[test]
    fn a_wsl_client_is_told_of_other_files_by_their_wsl_paths() {
        let mut s = Spellings::default();
        s.asked("file:///mnt/c/app/asked one.py", None);
        let files = vec![
            file("file:///c:/app/other%20one.py"),
            file("file:///tmp/posix.py"),
        ];
        let wsl = s.for_client(ClientPaths::WslMounts).respell(files.clone());
        let uris: Vec<&str> = wsl.iter().map(|f| f.uri.as_str()).collect();
        assert_eq!(
            uris,
            ["file:///mnt/c/app/other%20one.py", "file:///tmp/posix.py"]
        );
        assert_eq!(
            s.respell(files.clone()),
            files,
            "another client: as they were"
        );
        if cfg!(windows) {
            let asked = s
                .for_client(ClientPaths::WslMounts)
                .respell(vec![file("file:///c:/app/asked%20one.py")]);
            assert_eq!(asked[0].uri, "file:///mnt/c/app/asked one.py");
        }
    }

    /// The last spelling asked wins, and only the most recent files are kept.
    #[test]
    fn the_last_spelling_is_kept_for_the_most_recent_files() {
        let mut s = Spellings::default();
        s.asked("file:///ws/a%20b.py", None);
        s.asked("file:///ws/a b.py", None);
        assert_eq!(s.of("file:///ws/a%20b.py"), Some("file:///ws/a b.py"));
        for i in 0..MAX_SPELLINGS {
            s.asked(&format!("file:///ws/{i} .py"), None);
        }
        assert_eq!(s.asked.len(), MAX_SPELLINGS);
        assert_eq!(s.of("file:///ws/a%20b.py"), None);
        assert_eq!(s.of("file:///ws/0%20.py"), Some("file:///ws/0 .py"));
    }

    /// A file asked about through a link is named as asked in `{}`, which lists it by the file
    /// the link leads to (the servers' name for it): the edit's new errors reached the model
    /// under neither name before.
    #[test]
    fn a_file_asked_about_through_a_link_is_named_as_asked() {
        let mut s = Spellings::default();
        s.asked("file:///ws/link.py", Some("/ws/real.py"));
        s.asked("file:///ws/pkglink/m.py", Some("/ws/pkg/m.py"));
        s.asked("file:///ws/plain.py", Some("/ws/plain.py"));
        let files = s.respell(vec![
            file(&file_uri("/ws/real.py")),
            file(&file_uri("/ws/pkg/m.py")),
            file(&file_uri("/ws/plain.py")),
            file(&file_uri("/ws/link.py")),
        ]);
        let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "file:///ws/link.py",
                "file:///ws/pkglink/m.py",
                "file:///ws/plain.py",
                "file:///ws/link.py"
            ]
        );
        // Asked later by the name it is known by: that name is the one kept.
        s.asked("file:///ws/real.py", Some("/ws/real.py"));
        assert_eq!(s.of(&file_uri("/ws/real.py")), Some("file:///ws/real.py"));
    }
}
