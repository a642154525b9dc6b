//! Documents checked again when a file they may include changes, for a server that leaves them
//! as they were ([`Caps::stale_dependents`]: clangd).
//!
//! clangd checks a document again when its own text changes, reading again the headers changed
//! on disk since its last check (its preamble is checked against their length and time), and
//! watches no files. Told of a save (`didSave`) it checks its open documents again too, but
//! under the versions they had: its new answer for a source cannot be told from the one it gave
//! for the header's old text, which the bridge held and answered as current (an error the
//! header's fix removed stayed in the client's check after the edit, and one it brought was not
//! told). Such a document is given a new version of the same text ([`State::recheck`]), and its
//! diagnostics count again only once the server has answered for that version.
//!
//! A header the server does not have open, changed on disk (claude's own tools, the user's
//! editor, `git checkout`, a build), is seen by the program's look at the disk before each
//! question (inside the workspace, where `.gitignore` does not leave it out): the server's
//! headers are watched for it as a server's own globs are ([`State::headers_changed`]).

use std::sync::atomic::Ordering;

use lsp_types::notification::Notification;

#[cfg(doc)]
use super::caps::Caps;
#[cfg(doc)]
use super::LspLimits;
use super::{Rechecked, State};
use crate::rpc;
use crate::watch::FileChange;

/// `textDocument/didChange` with no change and clangd's `forceRebuild`: a new version of the
/// same text, checked anew. Without `forceRebuild`, clangd answers nothing for a version whose
/// text and included files are as they were (its "inputs are the same" shortcut), and a caller
/// waiting for that version's answer would wait in vain.
pub(super) enum Recheck {}

/// [`Recheck`]'s params: `contentChanges` empty (the text is the server's), `forceRebuild` set.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RecheckParams {
    text_document: lsp_types::VersionedTextDocumentIdentifier,
    content_changes: [(); 0],
    force_rebuild: bool,
}

impl Notification for Recheck {
    type Params = RecheckParams;
    const METHOD: &'static str = "textDocument/didChange";
}

impl State {
    /// `changed`, a document of this server, now holds its new text on disk: when the server
    /// leaves the documents that may include it as they were ([`Caps::stale_dependents`]) and
    /// it is a file that may be included ([`crate::table::may_be_included`]), its other open
    /// documents are checked again: the [`LspLimits::max_rechecks`] used last at once
    /// ([`State::recheck`]), the others marked to be at their next sync (when they are asked
    /// about, or handed over). A document whose check again is still queued is not sent
    /// another: a burst of changes costs one message per document until the writer takes them.
    pub(crate) fn recheck_others(&mut self, changed: &str) {
        if !self.caps.stale_dependents
            || !self.caps.change
            || !self.is_running()
            || !crate::table::may_be_included(changed)
        {
            return;
        }
        if let Some(doc) = self.docs.get_mut(changed) {
            doc.dependents_told = true;
        }
        let mut others: Vec<(u64, String)> = (self.docs.iter())
            .filter(|(p, _)| p.as_str() != changed)
            .map(|(p, d)| (d.last_used, p.clone()))
            .collect();
        if others.is_empty() {
            return;
        }
        // The most recently used first.
        others.sort_unstable_by(|a, b| b.cmp(a));
        let at_once = self.limits.max_rechecks;
        let mut moved = false;
        for (i, (_, path)) in others.into_iter().enumerate() {
            if i < at_once {
                moved |= self.recheck_unless_queued(&path);
            } else if let Some(doc) = self.docs.get_mut(&path) {
                moved |= !doc.stale;
                doc.stale = true;
            }
        }
        // (Not when every one was already waiting for a check again: nothing new to forget.)
        if moved {
            self.rechecks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Files changed on disk (as [`State::files_changed`] is told them): when one of them may be
    /// included (by its extension: [`crate::watch::WatchSet::headers`]) and changed since the
    /// server may have read it, the server's open documents are checked again
    /// ([`State::recheck_others`]), once for all of them (those changed among them too: one may
    /// include another). Not for one open in the server whose others were checked again for its
    /// text on disk already (claude's edit once written: the change the look finds is that one;
    /// and when another program changes it, the program hands it over again, which checks them
    /// then); one opened with the text it has on disk (a question about it, the bridge's own
    /// write) is. One whose accepted text waits to be written is, and again once that is
    /// written ([`State::written`]): what the look found may be an earlier text. Nothing for a
    /// server that checks them itself.
    pub(crate) fn headers_changed(&mut self, changes: &[(String, FileChange)]) {
        let Some(headers) = &self.headers else {
            return;
        };
        let changed: Vec<&String> = (changes.iter())
            .filter(|(key, change)| {
                !self.docs.get(key).is_some_and(|d| d.dependents_told)
                    && !change.told(self.started).is_empty()
                    && headers.watches(&crate::sys::glob_form(key), FileChange::Changed)
            })
            .map(|(key, _)| key)
            .collect();
        // One the server does not have open leaves none out.
        let Some(&first) = (changed.iter())
            .find(|k| !self.docs.contains_key(k.as_str()))
            .or(changed.first())
        else {
            return;
        };
        let (first, several) = (first.clone(), changed.len() > 1);
        self.recheck_others(&first);
        if let Some(doc) = self.docs.get_mut(&first) {
            doc.dependents_told &= !doc.unsaved;
            if several {
                self.recheck_unless_queued(&first);
            }
        }
    }

    /// Checks `path`, open in the server, again: a new version of the same text ([`Recheck`]).
    /// Its diagnostics held are then for an older version: not fresh until the server answers
    /// for this one ([`State::fresh_for`]). False when it is not open, or the server not running.
    pub(crate) fn recheck(&mut self, path: &str) -> bool {
        if !self.is_running() {
            return false;
        }
        let Some(uri) = rpc::uri(path) else {
            return false;
        };
        let (seq, takes) = (self.seq, self.takes);
        let version = self.versions.saturating_add(1);
        let Some(doc) = self.docs.get_mut(path) else {
            return false;
        };
        let base = doc.rechecked.map_or(doc.version, |r| r.base);
        doc.rechecked = Some(Rechecked { take: takes, base });
        doc.version = version;
        doc.synced_seq = seq;
        doc.synced_at = std::time::Instant::now();
        doc.stale = false;
        self.versions = version;
        self.notify::<Recheck>(&RecheckParams {
            text_document: lsp_types::VersionedTextDocumentIdentifier { uri, version },
            content_changes: [],
            force_rebuild: true,
        });
        true
    }

    /// [`State::recheck`], unless a check again of `path` is still queued (the writer has not
    /// taken it yet: it will be sent with the text the server has then, so another would only
    /// cost the server one more build). True when one was sent.
    fn recheck_unless_queued(&mut self, path: &str) -> bool {
        let queued = self.docs.get(path).and_then(|d| d.rechecked);
        queued.is_none_or(|r| r.take != self.takes) && self.recheck(path)
    }

    /// Whether a document checked again ([`State::recheck`]) has no answer for its version yet.
    pub(crate) fn rechecking(&self) -> bool {
        (self.docs.iter()).any(|(p, d)| d.rechecked.is_some() && !self.fresh_for(p, d.version))
    }
}
