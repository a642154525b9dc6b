//! The files a server watches on disk (its `workspace/didChangeWatchedFiles` registrations, and
//! its other dynamic registrations), and the changes told to it.

use std::sync::Arc;
use std::time::SystemTime;

use claude_ide_bridge::file_uri;
use lsp_types::notification::{self as note, Notification};
use lsp_types::request::{self as req, Request};

use super::{State, MAX_REGISTRATION_ID};
use crate::rpc::Registration;
use crate::watch::{
    glob_bytes, FileChange, WatchSet, MAX_GLOBS, MAX_GLOB_BYTES_BUILT, MAX_WATCH_REGISTRATIONS,
};

/// The most file changes told in one `workspace/didChangeWatchedFiles`.
const MAX_CHANGES_TOLD: usize = 1000;

impl State {
    /// What the server watches on disk, and when it started: nothing unless it is running.
    pub fn watched(&self) -> (Vec<Arc<WatchSet>>, SystemTime) {
        let sets = if self.is_running() {
            (self.watching.values().chain(&self.headers))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        (sets, self.started)
    }

    /// Files changed on disk (each by its key, as [`State::sync`] names it): those the server
    /// watches for that change are told to it in `workspace/didChangeWatchedFiles` (at most
    /// [`MAX_CHANGES_TOLD`] a message), when it is running. Changes of a file the server has open
    /// are told too, as an editor tells them: the server keeps the text it was given. A server
    /// that leaves the documents including a file as they were has them checked again when a
    /// file they may include changed ([`State::headers_changed`]).
    pub fn files_changed(&mut self, changes: &[(String, FileChange)]) {
        if !self.is_running() {
            return;
        }
        self.headers_changed(changes);
        if self.watching.is_empty() {
            return;
        }
        let mut watched: Vec<lsp_types::FileEvent> = Vec::new();
        for (key, change) in changes {
            let form = crate::sys::glob_form(key);
            for told in change.told(self.started) {
                if !self.watching.values().any(|w| w.watches(&form, *told)) {
                    continue;
                }
                if let Ok(uri) = file_uri(key).parse() {
                    watched.push(lsp_types::FileEvent::new(uri, told.lsp()));
                }
            }
        }
        for told in watched.chunks(MAX_CHANGES_TOLD) {
            let params = lsp_types::DidChangeWatchedFilesParams {
                changes: told.to_vec(),
            };
            self.notify::<note::DidChangeWatchedFiles>(&params);
        }
    }

    /// Dynamic registrations: a method counts as registered while any registration id for it is.
    /// Only the methods this client acts on are kept, under ids of a reasonable length: the
    /// registrations are counted, and a server's strings must not make each one large.
    /// The capabilities are worked out once for all of a message's registrations (once per
    /// registration, 300,000 of them in one message took about 10^9 steps under the lock).
    pub(super) fn register(&mut self, registrations: Vec<Registration>) -> Vec<String> {
        const PULL: &str = req::DocumentDiagnosticRequest::METHOD;
        const FORMATTING: &str = req::Formatting::METHOD;
        const SAVE: &str = note::DidSaveTextDocument::METHOD;
        let (mut why, mut watch_skipped, mut unsaid) = (Vec::new(), 0usize, 0usize);
        for registration in registrations {
            match registration {
                Registration::Added(id, method) => {
                    let used = [PULL, FORMATTING, SAVE].contains(&method.as_str())
                        && id.len() <= MAX_REGISTRATION_ID;
                    if used && self.registered.len() < 1000 {
                        self.registered.insert(id, method);
                    }
                }
                Registration::Watch(id, watchers) => {
                    // While there is room; an id registered again has its globs replaced (not
                    // built again when they are the same). The globs built over the server's
                    // life are bounded: building them is work under this lock that the server
                    // asks for.
                    let room = self.watching.len() < MAX_WATCH_REGISTRATIONS
                        || self.watching.contains_key(&id);
                    if !room || id.len() > MAX_REGISTRATION_ID {
                        watch_skipped += 1;
                        continue;
                    }
                    let watchers = match watchers {
                        Ok(w) => w,
                        Err(e) => {
                            // Counted past the few lines said (a message of many is not kept).
                            if why.len() <= 8 {
                                why.push(e);
                            } else {
                                unsaid += 1;
                            }
                            continue;
                        }
                    };
                    let kept = &watchers[..watchers.len().min(MAX_GLOBS)];
                    if self.watching.get(&id).is_some_and(|s| s.source == kept) {
                        continue;
                    }
                    let bytes = glob_bytes(&watchers);
                    if self.glob_bytes_built + bytes > MAX_GLOB_BYTES_BUILT {
                        watch_skipped += 1;
                        continue;
                    }
                    self.glob_bytes_built += bytes;
                    match WatchSet::new(&watchers, &mut why) {
                        Some(set) => {
                            self.watching.insert(id, Arc::new(set));
                        }
                        None => {
                            self.watching.remove(&id);
                        }
                    }
                }
                Registration::Removed(id, _) => {
                    self.registered.remove(&id);
                    self.watching.remove(&id);
                }
            }
        }
        if watch_skipped > 0 {
            why.push(format!(
                "{watch_skipped} registrations left out (a long id, past {MAX_WATCH_REGISTRATIONS} at once, or past {MAX_GLOB_BYTES_BUILT} bytes of globs in the server's life)"
            ));
        }
        // Said in a few lines, however many registrations the message held.
        let mut lines: Vec<String> = (why.iter().take(8))
            .map(|line| format!("didChangeWatchedFiles: {line}"))
            .collect();
        if why.len() + unsaid > 8 {
            lines.push(format!(
                "didChangeWatchedFiles: {} more lines like these left out",
                why.len() + unsaid - 8
            ));
        }
        let has = |m: &str| self.registered.values().any(|r| r == m);
        self.caps.pull = self.static_caps.pull || has(PULL);
        self.caps.formatting = self.static_caps.formatting || has(FORMATTING);
        if self.static_caps.save.is_none() {
            self.caps.save = has(SAVE).then_some(false);
        }
        lines
    }
}
