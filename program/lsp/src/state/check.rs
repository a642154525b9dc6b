//! Checks on request of servers whose tsserver computes a file's diagnostics when asked
//! (typescript-language-server, vtsls): [`Check`] and [`State::ask_check`] with its answers.

use std::time::Instant;

use claude_ide_bridge::Diagnostic;
use serde_json::value::RawValue;
use serde_json::Value;

#[cfg(doc)]
use super::Caps;
use super::{Effect, List, State};
use crate::messages::{TsServerKind, TsServerRequest, TsServerResponse, TSSERVER_REQUEST};
use crate::rpc::{self, ResponseError};

/// The tsserver requests that make up a check of a file on request ([`State::ask_check`]), in
/// the order typescript-language-server merges what it publishes for them.
const TSSERVER_PASSES: [&str; 3] = [
    "syntacticDiagnosticsSync",
    "semanticDiagnosticsSync",
    "suggestionDiagnosticsSync",
];
/// Requests of checks on request waiting for answers, at most: a server that stops answering
/// them gets no more (its callers answer what is known).
pub(super) const MAX_ASKED: usize = 3 * 256;

/// Failed checks in a row (an error answer, or vtsls' `null`, to any of a check's passes) after
/// which a server's checks on request are given up for its published diagnostics (a server whose
/// command refuses these requests).
pub(super) const MAX_CHECK_FAILURES: u32 = 3;

/// A check of one file's text asked of a server that checks on request ([`State::ask_check`]).
#[derive(Debug)]
pub(super) struct Check {
    /// The version of the text asked about.
    pub(super) version: i32,
    /// The generation of the last ask, and the parts of its answer come so far, by pass.
    pub(super) asked: u64,
    pub(super) parts: [Option<Vec<Diagnostic>>; 3],
    /// The last generation answered in full, and the last that failed.
    pub(super) answered: u64,
    pub(super) failed: u64,
}

impl Check {
    /// Drops the parts of an answer held so far and says what they held (to take off what
    /// waiting checks hold).
    pub(super) fn release(&mut self) -> Held {
        (self.parts.iter_mut().flat_map(Option::take))
            .fold(Held::default(), |held, part| held + Held::of(&part))
    }
}

/// What diagnostics hold: how many, and their [`weight`](super::weight). Waiting checks hold
/// within the bounds of the diagnostics kept
/// ([`max_total_diagnostics`](crate::LspLimits::max_total_diagnostics) and
/// [`max_total_bytes`](crate::LspLimits::max_total_bytes)).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(super) struct Held {
    pub(super) count: usize,
    pub(super) bytes: usize,
}

impl Held {
    pub(super) fn of(items: &[Diagnostic]) -> Self {
        Held {
            count: items.len(),
            bytes: super::weight(items),
        }
    }
}

impl std::ops::Add for Held {
    type Output = Held;
    fn add(self, other: Held) -> Held {
        Held {
            count: self.count + other.count,
            bytes: self.bytes + other.bytes,
        }
    }
}

impl std::ops::SubAssign for Held {
    fn sub_assign(&mut self, other: Held) {
        self.count -= other.count;
        self.bytes -= other.bytes;
    }
}

impl State {
    /// Whether the server computes a file's diagnostics when asked ([`Caps::tsserver`], and no
    /// pulls, which come first): then an answer is the check's ([`State::ask_check`]), never a
    /// publish's, which says neither for which text nor after which pass. Given up for its
    /// publishes after [`MAX_CHECK_FAILURES`] error answers in a row, or an answer saying it
    /// does not know the command.
    pub fn checks_on_request(&self) -> bool {
        self.caps.tsserver && !self.caps.pull && self.check_failures < MAX_CHECK_FAILURES
    }

    /// Asks the server ([`State::checks_on_request`]) to check `version` of `path`, the text it has
    /// now: typescript-language-server's `typescript.tsserverRequest` of the syntactic, semantic
    /// and suggestion diagnostics of the file, which its tsserver answers after the text's
    /// change, each once that pass has run for it. Answers the generation to wait for
    /// ([`State::check_outcome`]): that of a check of this text still waiting for answers, or of a
    /// new one. `None` when it cannot be asked (another text is open, or too many requests wait).
    /// Not cancelled when its caller gives up: a cancelled check makes tsserver drop the work done
    /// so far, and a cold project's first check could then never end; its answer is kept when it
    /// comes. Cancelled once another text is sent ([`State::drop_check`]).
    pub fn ask_check(&mut self, path: &str, version: i32) -> Option<u64> {
        if !self.checks_on_request() || self.version(path) != Some(version) {
            return None;
        }
        if let Some(c) = self.checks.get(path) {
            if c.version == version && c.asked > c.answered.max(c.failed) {
                return Some(c.asked);
            }
        }
        if self.asked.len() + TSSERVER_PASSES.len() > MAX_ASKED {
            return None;
        }
        let uri = rpc::uri(path)?;
        self.generation += 1;
        let generation = self.generation;
        let check = self.checks.entry(path.to_owned()).or_insert(Check {
            version,
            asked: 0,
            parts: [None, None, None],
            answered: 0,
            failed: 0,
        });
        if check.version != version {
            check.answered = 0;
            check.failed = 0;
        }
        check.version = version;
        check.asked = generation;
        self.checking -= check.release();
        // Silent since the first request it owes, as for [`State::request`]: a server that
        // stopped answering checks is found hung (it was not: the file's text sent long ago).
        if !(self.owes_answers() || self.cancelled_unheard) {
            self.requests_since = Some(Instant::now());
        }
        for (pass, command) in TSSERVER_PASSES.iter().enumerate() {
            let params = lsp_types::ExecuteCommandParams {
                command: TSSERVER_REQUEST.to_owned(),
                // A config object, even empty, makes typescript-language-server tie the request
                // to its cancellation (`$/cancelRequest`, see `State::drop_check`; vtsls does
                // not: tsserver then checks the replaced text to its end first).
                arguments: vec![
                    Value::from(*command),
                    serde_json::json!({ "file": self.caps.tsserver_kind.file_arg(path, uri.as_str()) }),
                    serde_json::json!({}),
                ],
                work_done_progress_params: Default::default(),
            };
            let id = self.next_id;
            self.next_id += 1;
            self.push_out(rpc::request::<TsServerRequest>(id, &params));
            self.asked.insert(id, (path.to_owned(), generation, pass));
        }
        Some(generation)
    }

    /// What became of check `generation` of `version` of `path` ([`State::ask_check`]):
    /// `Some(true)` once it (or a later one of the same text) is answered in full, `Some(false)`
    /// when it failed or will not be answered (the file was closed, or another text synced),
    /// `None` while it waits.
    pub fn check_outcome(&self, path: &str, version: i32, generation: u64) -> Option<bool> {
        let Some(c) = self.checks.get(path).filter(|c| c.version == version) else {
            return Some(false);
        };
        if c.answered >= generation {
            Some(true)
        } else if c.failed >= generation {
            Some(false)
        } else {
            None
        }
    }

    /// Forgets the check of `path`, whose text the server no longer has (closed, or another text
    /// sent), and cancels what it still waits for: nobody can use an answer for that text any
    /// more ([`State::check_outcome`] is over for it), and tsserver, whose next program is built
    /// for the new text anyway, then checks the text it has now sooner (a backlog of edits
    /// would otherwise be checked one after the other in full).
    pub(super) fn drop_check(&mut self, path: &str) {
        if let Some(mut c) = self.checks.remove(path) {
            self.checking -= c.release();
            if c.asked > c.answered.max(c.failed) {
                let mut ids: Vec<i64> = self
                    .asked
                    .iter()
                    .filter(|(_, (p, g, _))| p == path && *g == c.asked)
                    .map(|(id, _)| *id)
                    .collect();
                ids.sort_unstable();
                for id in ids {
                    self.asked.remove(&id);
                    self.send_cancel(id);
                    self.cancelled_unheard = true;
                }
            }
        }
    }

    /// Takes the answer to request `id` when it is a part of a check ([`State::ask_check`]):
    /// false when it is not. Once the check has all its parts they are kept, in pass order, as
    /// the diagnostics of the version asked about, as a pull's answer is, unless the server has
    /// since closed that text or holds a newer text's.
    pub(super) fn take_check_part(
        &mut self,
        id: i64,
        result: &Result<&RawValue, ResponseError>,
        effects: &mut Vec<Effect>,
    ) -> bool {
        let Some((path, generation, pass)) = self.asked.remove(&id) else {
            return false;
        };
        let part = match result {
            Ok(raw) => match rpc::decode_with::<TsServerRequest, _>(raw, |raw| {
                let (max, kind) = (
                    self.limits.max_diagnostics_per_file,
                    self.caps.tsserver_kind,
                );
                TsServerResponse::read(raw, max, kind)
            }) {
                Ok(Some(r))
                    if r.kind.as_deref() == Some("response") && r.success != Some(false) =>
                {
                    effects.extend(r.dropped.line(TSSERVER_REQUEST).map(Effect::Log));
                    r.body.ok_or("a response without a body".to_owned())
                }
                Ok(Some(r)) => Err(format!(
                    "a tsserver answer of type {:?}",
                    r.kind
                        .unwrap_or_default()
                        .chars()
                        .take(40)
                        .collect::<String>()
                )),
                Ok(None) => {
                    // typescript-language-server does not know the command: its publishes are
                    // all there is. vtsls answers `null` whenever the command fails (its log says
                    // why; a tsserver restarting, say): a failure like an error answer.
                    if self.caps.tsserver_kind == TsServerKind::Vtsls {
                        Err("null: the command failed (vtsls' log says why)".to_owned())
                    } else {
                        self.check_failures = MAX_CHECK_FAILURES;
                        Err(
                            "null: the command is unknown; using its published diagnostics"
                                .to_owned(),
                        )
                    }
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(format!("refused: {} ({})", e.message, e.code)),
        };
        let Some(check) = self.checks.get_mut(&path).filter(|c| c.asked == generation) else {
            return true;
        };
        let items = match part {
            Ok(items) => items,
            Err(why) => {
                effects.push(Effect::Log(format!(
                    "{TSSERVER_REQUEST} {} for {path}: {why}",
                    TSSERVER_PASSES[pass]
                )));
                // A check fails once, whichever of its passes failed (and however many).
                if check.failed != generation {
                    self.check_failures = self.check_failures.saturating_add(1);
                    check.failed = generation;
                }
                self.checking -= check.release();
                return true;
            }
        };
        let kind = self.caps.tsserver_kind;
        let items = self.converted(items.into_iter().map(|d| d.into_lsp(kind)).collect());
        let Some(check) = self.checks.get_mut(&path) else {
            return true;
        };
        let part = Held::of(&items);
        let after = self.checking + part;
        if after.count > self.limits.max_total_diagnostics
            || after.bytes > self.limits.max_total_bytes
        {
            effects.push(Effect::Log(format!(
                "{TSSERVER_REQUEST} for {path}: too many diagnostics waiting for the other passes"
            )));
            check.failed = generation;
            self.checking -= check.release();
            return true;
        }
        self.checking = after;
        if let Some(old) = check.parts[pass].replace(items) {
            self.checking -= Held::of(&old);
        }
        if check.parts.iter().any(Option::is_none) {
            return true;
        }
        let version = check.version;
        check.answered = generation;
        let items: Vec<Diagnostic> = check
            .parts
            .iter_mut()
            .flat_map(Option::take)
            .flatten()
            .collect();
        self.checking -= Held::of(&items);
        // The count starts again, unless the checks were given up already: then the late answer
        // of a check asked before is kept, but the publishes held meanwhile stay what is known.
        if self.checks_on_request() {
            self.check_failures = 0;
        }
        if self.of_open_document(&path, version) && !self.holds_newer_than(&path, version) {
            effects.extend(
                self.store_in(&path, Some(version), items, None, List::Main)
                    .map(Effect::Changed),
            );
        }
        true
    }
}
