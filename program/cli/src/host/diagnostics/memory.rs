//! What the bridge remembers about the files it changed, read or answered for ([`Memory`]), and
//! the [`Stamp`] that tells a file on disk changed without reading it.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Instant;

use claude_ide_bridge::Diagnostic;
use claude_ide_bridge_files::{Error, Text, Workspace};

#[cfg(doc)]
use super::LanguageServers;
use super::{read, PENDING, RECENT};
#[cfg(doc)]
use claude_ide_bridge_lsp::Lsp;

/// [`read`], with the [`Stamp`] of the file taken before (a change during the read is then
/// one more, not one missed). A file written within its file system's clock tick of the read
/// has no stamp (it is read again at the next question: the watch's rule, [`racy`]): a file
/// system whose times count in seconds (FAT, some network mounts) gives a second write of the
/// same length in that second the same stamp.
///
/// [`racy`]: crate::host::watch::racy
pub(super) fn read_stamped(
    ws: &Workspace,
    path: &str,
) -> (Result<Option<Text>, Error>, Option<Stamp>) {
    let now = std::time::SystemTime::now();
    let stamp = ws
        .regular_file(path)
        .ok()
        .and_then(|p| stamp_of(Path::new(&p)))
        .filter(|(_, at)| at.is_some_and(|t| !crate::host::watch::racy(t, now)));
    (read(ws, path), stamp)
}

/// What the bridge remembers about the files it changed or answered for, to answer the real
/// client's check before an edit. An accepted `openDiff` is answered `FILE_SAVED`, then the
/// client asks `getDiagnostics {uri}` (within 500 ms) and only then writes the file: that
/// question is about the text still on disk, while the server already has the accepted text.
/// It is answered from the last answer for that text, or `[]` (as an editor that never had the
/// file open answers), without taking the accepted text back from the server.
#[derive(Default)]
pub(super) struct Memory {
    /// Changed through the bridge or asked about, most recent last (at most [`RECENT`]).
    pub(super) recent: VecDeque<PathBuf>,
    /// Accepted contents not yet on disk: their hash, and when they were accepted.
    pub(super) pending: HashMap<PathBuf, (u64, Instant)>,
    /// The last answer for a file, with the hash of the text it is about (at most [`RECENT`]),
    /// and the count of documents its language's servers had checked again when it was asked
    /// ([`Lsp::rechecks_for`]): once that moved, the file's diagnostics may have changed with
    /// another file (a header), and the answer no longer counts for its text.
    pub(super) answers: VecDeque<(PathBuf, u64, Vec<Diagnostic>, u64)>,
    /// Files read from disk for the servers, with the [`Stamp`] of the file their text was read
    /// at (`None`: the servers were not given that text, or were given another; read it again),
    /// for [`LanguageServers::refresh_open`] (at most [`MAX_TRACKED`]; those the servers no
    /// longer have open are dropped there).
    pub(super) on_disk: HashMap<PathBuf, Option<Stamp>>,
}

/// Files [`Memory::on_disk`] keeps at most: the servers keep up to 200 each open.
const MAX_TRACKED: usize = 2048;

/// What tells that a file on disk changed without reading it: its length and time.
pub(super) type Stamp = (u64, Option<std::time::SystemTime>);

/// The [`Stamp`] of `path` (on Unix a link itself, not followed: one put in the file's place is
/// a change; `crate::sys::stamp_metadata`).
pub(super) fn stamp_of(path: &Path) -> Option<Stamp> {
    let m = crate::sys::stamp_metadata(path).ok()?;
    Some((m.len(), m.modified().ok()))
}

impl Memory {
    /// The servers were given `path`'s text read at `stamp` (`None`: another text).
    pub(super) fn on_disk(&mut self, path: &Path, stamp: Option<Stamp>) {
        if !self.on_disk.contains_key(path) && self.on_disk.len() >= MAX_TRACKED {
            let any = self.on_disk.keys().next().cloned();
            any.map(|k| self.on_disk.remove(&k));
        }
        self.on_disk.insert(path.to_path_buf(), stamp);
    }

    pub(super) fn changed(&mut self, path: &Path, accepted: Option<u64>, now: Instant) {
        self.asked(path);
        match accepted {
            Some(hash) => self.pending.insert(path.to_path_buf(), (hash, now)),
            None => self.pending.remove(path),
        };
    }

    /// `path` was asked about (its baseline, before the client writes it) or changed: the next
    /// `getDiagnostics` without `uri` reads it again.
    pub(super) fn asked(&mut self, path: &Path) {
        self.recent.retain(|p| p != path);
        self.recent.push_back(path.to_path_buf());
        while self.recent.len() > RECENT {
            if let Some(old) = self.recent.pop_front() {
                self.pending.remove(&old);
            }
        }
    }

    /// Whether accepted contents other than the text `hash` wait to be written to `path`: those
    /// written already, or accepted longer than [`PENDING`] ago, are forgotten.
    pub(super) fn awaits_write(&mut self, path: &Path, hash: u64, now: Instant) -> bool {
        let Some(&(pending, at)) = self.pending.get(path) else {
            return false;
        };
        if pending == hash || now.duration_since(at) > PENDING {
            self.pending.remove(path);
            return false;
        }
        true
    }

    /// The answer for `path` holding text `hash` while accepted contents are not yet on disk
    /// (`None`: no such contents, ask the server; `Some(None)`: they are pending and no answer
    /// for `hash` is known: never an empty list in its place). `rechecks` is the count of its
    /// language's servers now ([`Lsp::rechecks_for`]): an answer from before it moved is not
    /// known; with `None`, it is (what the server said of this text before a header it
    /// includes changed: for the client's own check, as [`Checked::from_before`]).
    ///
    /// [`Checked::from_before`]: claude_ide_bridge_lsp::Checked::from_before
    pub(super) fn before_write(
        &mut self,
        path: &Path,
        hash: u64,
        now: Instant,
        rechecks: Option<u64>,
    ) -> Option<Option<Vec<Diagnostic>>> {
        if !self.awaits_write(path, hash, now) {
            return None;
        }
        let known = (self.answers.iter())
            .find(|(p, h, _, r)| p == path && *h == hash && rechecks.is_none_or(|n| *r == n))
            .map(|(_, _, d, _)| d.clone());
        Some(known)
    }

    /// `path` was found not to exist: `false` while accepted contents for it wait to be written
    /// (a file claude is about to create: its servers have them, and its baseline is asked before
    /// the write); otherwise it is forgotten here, and the caller has its servers let go of it.
    pub(super) fn gone(&mut self, path: &Path, now: Instant) -> bool {
        if self
            .pending
            .get(path)
            .is_some_and(|&(_, at)| now.duration_since(at) <= PENDING)
        {
            return false;
        }
        self.recent.retain(|p| p != path);
        self.pending.remove(path);
        self.answers.retain(|(p, ..)| p != path);
        self.on_disk.remove(path);
        true
    }

    /// Remembers `diagnostics` as the answer for `path` holding text `hash`, asked when the
    /// count of documents its language's servers had checked again was `since`
    /// ([`Lsp::rechecks_for`]), answered when it was `now`: not when it moved meanwhile (the
    /// answer may be for a header's old text), and then the file's answer remembered before is
    /// forgotten too (older still: the client's check would take it, [`Memory::before_write`]).
    pub(super) fn answered(
        &mut self,
        path: &Path,
        hash: u64,
        diagnostics: &[Diagnostic],
        since: u64,
        now: u64,
    ) {
        if since != now {
            self.answers.retain(|(p, ..)| p != path);
            return;
        }
        self.answers.retain(|(p, ..)| p != path);
        self.answers
            .push_back((path.to_path_buf(), hash, diagnostics.to_vec(), now));
        while self.answers.len() > RECENT {
            self.answers.pop_front();
        }
    }
}
