//! Proposed changes (`openDiff`): decided by a policy, by the stdio editor, or on the terminal,
//! where they wait in a queue and are shown one at a time (accept, reject, or edit first).

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claude_ide_bridge::OpenDiffArgs;
use claude_ide_bridge::{ApiError, CallId, CancelReason, ToolResult};

use claude_ide_bridge_files::Error;

use super::jobs::{NotGiven, Stalled};
use super::{Decider, DiffPolicy, Host, HostInput};
use crate::ui;

/// The most bytes of an edited proposal read back from `$EDITOR`'s file; a larger file is not
/// accepted and the prompt asks again.
pub const MAX_EDITED_BYTES: u64 = 16 * 1024 * 1024;

/// The most bytes of proposed changes (their contents, paths and tab names) the host holds at
/// once: being checked, waiting in the queue, and shown. A change past it is answered at once
/// with a tool error saying why, and claude asks in its own prompt instead; one alone is always
/// taken (the engine bounds a message to 10 MiB). Without it, a queue of 256 calls per
/// connection held up to 256 proposals of 10 MiB each, and with them the old files' texts
/// (measured: 40 diffs of 5 MB, 395 MB).
pub const MAX_HELD_DIFF_BYTES: usize = 64 * 1024 * 1024;

/// A diff on the terminal, shown or waiting. The file it replaces is read when it is shown, not
/// when it arrives (queued diffs hold only the proposal), on a job: `None` until then.
pub(super) struct Shown {
    call: CallId,
    args: OpenDiffArgs,
    /// The file claude's path led to when its change was checked (links resolved): an accept
    /// is refused when the path leads elsewhere by then.
    real: String,
    old: Option<ui::Old>,
    /// The user's edit of the proposal, kept when it could not be accepted (the editor failed,
    /// or what it left is not usable): the next `e` opens it again.
    draft: Option<Draft>,
}

/// The copy of a proposal an edit left, kept when it could not be accepted.
#[derive(Debug)]
pub struct Draft {
    file: tempfile::NamedTempFile,
    /// The editor wrote it: it is the user's own text, accepted as it is when opened again and
    /// left. Else it is still the proposal as shown, which quitting without writing never accepts.
    written: bool,
    /// The editor was ended by Ctrl-C (which reached the bridge too).
    interrupted: bool,
}

/// What `$EDITOR` left: the edited text, or why it cannot be used; and the copy it is in (kept
/// when the change was withdrawn meanwhile, so that the user's edit is not lost).
pub type EditOutcome = Result<(String, Draft), (String, Draft)>;

/// The workspace check of a proposed change, made on a job and handed back to the host loop:
/// whether the file may be changed (inside the workspace, not a special file).
#[derive(Debug)]
pub struct DiffCheck {
    call: CallId,
    args: OpenDiffArgs,
    verdict: Verdict,
}

/// A proposed change being checked, in the order claude sent it. The checks run on jobs of their
/// own and come back in any order: one back before those sent earlier waits for them here, so
/// that the changes are shown (or decided, or forwarded) in the order claude sent them.
pub(super) struct Checking {
    call: CallId,
    /// What it holds ([`proposal_bytes`]).
    bytes: usize,
    check: Option<Box<DiffCheck>>,
}

/// The bytes a proposed change holds while it waits: its contents, paths and tab name.
fn proposal_bytes(args: &OpenDiffArgs) -> usize {
    args.new_file_contents.len()
        + args.new_file_path.len()
        + args.old_file_path.len()
        + args.tab_name.len()
}

/// The file a proposed change replaces, as the terminal shows it: read only when it may be read
/// (the change's check allowed it); a new file has none, and one that cannot be shown is said to
/// exist.
fn read_old(ws: &claude_ide_bridge_files::Workspace, path: &str) -> ui::Old {
    match super::diagnostics::read(ws, path) {
        Ok(Some(t)) => ui::Old::Text(t.content),
        Ok(None) => ui::Old::Missing,
        Err(e) => ui::Old::Unreadable(e.to_string()),
    }
}

/// The new and the old path of a proposed change as they resolve inside the workspace, or why
/// the change is refused and the path refused (the new or the old one).
type Verdict = Result<(String, String), (String, String)>;

/// Why a change is refused, as the terminal says it: "(outside the workspace)" or the reason.
fn refusal(e: &Error) -> String {
    match e {
        Error::Outside { why, .. } => format!("(outside the workspace: {why})"),
        e => format!("({e})"),
    }
}

/// Why a path of a proposed change is refused before it is checked, where claude would write
/// another file than the one checked: a `..` in it (the check takes `..` by the names, but the
/// system takes a `..` after a symbolic link from the link's target: `ws/link/../x` may be a file
/// outside the workspace that the check took for `ws/x`), or a relative path (claude takes it
/// from its own working directory, which the bridge does not know; the check would take it from
/// the first workspace folder).
fn unchecked(path: &str) -> Option<String> {
    if climbs(path) {
        return Some(
            "(`..` in the path: claude writes it as it is given, and after a symbolic link `..` \
             leads elsewhere than it reads)"
                .to_owned(),
        );
    }
    (!absolute(path)).then(|| {
        "(not an absolute path: claude takes a relative one from its own working directory, \
         which may be another folder than the workspace's)"
            .to_owned()
    })
}

/// Whether `path` has a `..` among its names (as this system splits them).
pub(super) fn climbs(path: &str) -> bool {
    (std::path::Path::new(path).components()).any(|c| c == std::path::Component::ParentDir)
}

/// Whether `path` is absolute as this system reads it (`\x` and `C:\x` are relative names on
/// Unix), or in the wire's form (`/c/x`).
pub(super) fn absolute(path: &str) -> bool {
    std::path::Path::new(path).is_absolute() || path.starts_with('/')
}

impl Host {
    pub(super) fn on_diff(&mut self, call: CallId, args: OpenDiffArgs) {
        let path = args.new_file_path.clone();
        // Its server checks the text still on disk now, for the client's baseline after the
        // diff is accepted (`--lsp-warm`).
        if let Some(servers) = &self.lsp {
            servers.opening(&args.old_file_path);
        }
        if self.decider == Decider::Policy(DiffPolicy::Defer) {
            return self.defer(call, path);
        }
        let bytes = proposal_bytes(&args);
        let held = self.held_diff_bytes();
        if held > 0 && held.saturating_add(bytes) > MAX_HELD_DIFF_BYTES {
            ui::say(&format!(
                "diff not shown (the changes waiting hold {} MiB, at most {} MiB): {path}",
                held >> 20,
                MAX_HELD_DIFF_BYTES >> 20
            ));
            self.respond(
                call,
                ToolResult::error(format!(
                    "{}: too many proposed changes are waiting to be decided ({held} bytes; with \
                     this one's {bytes} they would pass {MAX_HELD_DIFF_BYTES}): this one was not \
                     shown, and nothing was accepted or written",
                    self.ide_name
                )),
            );
            return;
        }
        let ws = self.ws.clone();
        let inputs = self.inputs.clone();
        let old_path = args.old_file_path.clone();
        let work = move || {
            // Both paths: an editor is handed both, and shows the old file too.
            let refused = |p: &String| unchecked(p).map(|why| (why, p.clone()));
            if let Some(refused) = refused(&path).or_else(|| refused(&old_path)) {
                return Err(refused);
            }
            let writable = |p: &String| ws.writable(p).map_err(|e| (refusal(&e), p.clone()));
            let new = writable(&path)?;
            let old = if old_path == path {
                new.clone()
            } else {
                writable(&old_path)?
            };
            Ok((new, old))
        };
        let new_path = args.new_file_path.clone();
        let done = move |r: Result<Verdict, Stalled>| {
            let verdict = r.unwrap_or_else(|why| Err((format!("({why})"), new_path)));
            let check = DiffCheck {
                call,
                args,
                verdict,
            };
            let _ = inputs.send(HostInput::DiffChecked(Box::new(check)));
        };
        match self.jobs.run(call, work, done) {
            Ok(()) => self.checking.push_back(Checking {
                call,
                bytes,
                check: None,
            }),
            Err(busy) => self.respond(call, ToolResult::error(busy.to_string())),
        }
    }

    /// The bytes of the proposed changes held now: being checked, queued and shown.
    fn held_diff_bytes(&self) -> usize {
        let checking = self.checking.iter().map(|c| c.bytes);
        let waiting = self.shown.iter().chain(&self.queue);
        checking
            .chain(waiting.map(|s| proposal_bytes(&s.args)))
            .sum()
    }

    /// A proposed change's check came back: it goes on once those sent before it have.
    pub(super) fn on_diff_checked(&mut self, check: Box<DiffCheck>) {
        let Some(waiting) = self.checking.iter_mut().find(|c| c.call == check.call) else {
            return; // Cancelled while it was being checked.
        };
        waiting.check = Some(check);
        self.release_checked();
    }

    /// A proposed change cancelled while it was checked: those after it go on if they are back.
    pub(super) fn check_cancelled(&mut self, call: CallId) {
        self.checking.retain(|c| c.call != call);
        self.release_checked();
    }

    /// The checks back, in the order claude sent their changes, up to the first still running.
    fn release_checked(&mut self) {
        while self.checking.front().is_some_and(|c| c.check.is_some()) {
            if let Some(check) = self.checking.pop_front().and_then(|c| c.check) {
                self.decide_checked(*check);
            }
        }
    }

    /// A proposed change whose workspace check came back, in its turn: refused, or on to its
    /// decider.
    fn decide_checked(&mut self, check: DiffCheck) {
        let DiffCheck {
            call,
            args,
            verdict,
        } = check;
        let path = args.new_file_path.clone();
        let (new_real, old_real) = match verdict {
            Ok(paths) => paths,
            Err((why, refused)) => {
                ui::say(&format!("diff refused {why}: {refused}"));
                self.respond(
                    call,
                    ToolResult::error(format!(
                        "Refused {refused} {why}: the file was left untouched"
                    )),
                );
                return;
            }
        };
        match self.decider {
            Decider::Policy(DiffPolicy::Accept) => {
                let contents = args.new_file_contents.clone();
                self.accept(call, &args, contents, None, None, new_real);
            }
            Decider::Policy(DiffPolicy::Reject) => _ = self.reject(call, &args),
            Decider::Policy(DiffPolicy::Ask) => {
                self.queue.push_back(Shown {
                    call,
                    args,
                    real: new_real,
                    old: None,
                    draft: None,
                });
                if self.shown.is_none() {
                    self.show_next();
                } else {
                    let n = self.queue.len();
                    ui::note(&format!("diff queued: {path} ({n} waiting)"), n);
                }
            }
            // The terminal closed while it was checked: claude's own prompt decides.
            Decider::Policy(DiffPolicy::Defer) => self.defer(call, path),
            // The paths as checked, absolute: the editor opens what was checked, not a
            // relative path resolved against its own directory.
            Decider::Editor => {
                let mut args = args;
                // Its decision comes back naming these paths, and an accept waits for the
                // check of the text on disk under the name it gives: under a second name of the
                // workspace (a link), that check is started under the resolved one too.
                if let Some(servers) = self.lsp.as_ref().filter(|_| old_real != args.old_file_path)
                {
                    servers.opening(&old_real);
                }
                let claude = std::mem::replace(&mut args.new_file_path, new_real);
                args.old_file_path = old_real;
                let written_as = (claude != args.new_file_path).then_some(claude);
                self.forward(
                    call,
                    super::messages::EditorCall::OpenDiff(args),
                    written_as,
                )
            }
        }
    }

    /// Accepts a diff: answers `FILE_SAVED` with the final contents, which the client then
    /// writes itself (docs/protocol.md, "openDiff"). The bridge does not write the file: the real
    /// client applies its edit to the file as it finds it, and a file already rewritten by the
    /// bridge makes that edit fail ("String not found in file"). The path is checked again at
    /// the moment of the decision, on a job: outside the workspace folders (including through a
    /// symlink) or not a regular file, it is refused with a tool error and nothing is accepted.
    /// A decision of the stdio editor (`decision`, its line's id) that could not be given is
    /// told to it with an `error` line: refused, or too late (the call was cancelled meanwhile).
    /// `args` are as shown; `written_as`, claude's own path when it showed under another name
    /// (links resolved, for the editor): that is the path checked, the one claude writes. It
    /// must still lead to `real`, the file it led to when the change was checked and shown (a
    /// link put on it or pointed elsewhere while the user decided, outside the workspace or to
    /// another file of it, is refused: claude would write through it).
    pub(super) fn accept(
        &mut self,
        call: CallId,
        args: &OpenDiffArgs,
        contents: String,
        decision: Option<u64>,
        written_as: Option<String>,
        real: String,
    ) {
        let path = written_as.unwrap_or_else(|| args.new_file_path.clone());
        let shown = real;
        let old_path = args.old_file_path.clone();
        let ws = self.ws.clone();
        let lsp = self.lsp.clone();
        let editor = decision.and_then(|id| Some((id, self.stdio.clone()?)));
        // (What the terminal is told, what claude is.)
        let checked = move |path: &str| match unchecked(path) {
            Some(why) => Err((why.clone(), why)),
            None => match ws.writable(path) {
                Ok(real) if real != shown => Err((
                    format!("(it now leads to {real}, not to the file shown)"),
                    format!("it now leads to {real}, not to {shown}, the file shown"),
                )),
                written => written.map_err(|e| (refusal(&e), e.to_string())),
            },
        };
        let work = move || match checked(&path) {
            Ok(real) => {
                ui::say(&format!("diff accepted: {path}"));
                // The client asks for its baseline (the text on disk), writes these contents
                // and asks again, each within a bound: its language server checks both first.
                if let Some(servers) = lsp {
                    servers.accepting(&old_path, std::path::Path::new(&real), &contents);
                }
                ToolResult::file_saved(contents)
            }
            Err((said, why)) => {
                ui::say(&format!("diff refused {said}: {path}"));
                ToolResult::error(format!("Refused to accept a change to {path}: {why}"))
            }
        };
        let not_given = move |why| {
            let Some((id, out)) = &editor else { return };
            out.error(&match why {
                NotGiven::Refused(told) => {
                    format!("diff_decision: id {id}: not accepted; claude was told: {told}")
                }
                NotGiven::Dropped(e) => format!("diff_decision: id {id}: it came too late: {e}"),
            });
        };
        // The accept may wait for the file's language servers (`accepting`), on purpose.
        let wait = self
            .lsp
            .as_ref()
            .map_or(std::time::Duration::ZERO, |s| s.accept_wait());
        self.jobs.tool_or_longer(call, wait, work, not_given);
    }

    /// Answers `DIFF_REJECTED`; an error when the call was no longer waiting (said here too).
    pub(super) fn reject(&mut self, call: CallId, args: &OpenDiffArgs) -> Result<(), ApiError> {
        ui::say(&format!("diff rejected: {}", args.new_file_path));
        let answered = self
            .handle
            .respond(call, ToolResult::diff_rejected(args.tab_name.clone()));
        answered.inspect_err(|e| ui::say(&super::not_given(call, e)))
    }

    /// Takes the next change off the queue, and reads the file it replaces on a job: it is
    /// shown when the text is back ([`Host::on_old_read`]).
    fn show_next(&mut self) {
        if self.editing.is_some() {
            return; // `$EDITOR` has the terminal; on_edited shows the next.
        }
        if self.want_line.is_none() {
            return; // The terminal closed: nothing can be answered here.
        }
        // In the background of its terminal (`serve &`), a question would stop the whole bridge
        // (its flush and its read: SIGTTOU, SIGTTIN) and every call would wait: the change is
        // left for claude's own prompt, as the next ones are unless the bridge is brought back.
        while let Some(next) = self.queue.pop_front() {
            if !crate::sys::terminal_is_ours() {
                left_in_background(next);
                continue;
            }
            let (call, inputs, ws) = (next.call, self.inputs.clone(), self.ws.clone());
            let old_path = next.args.old_file_path.clone();
            let done = move |r: Result<ui::Old, Stalled>| {
                let old = r.unwrap_or_else(|why| ui::Old::Unreadable(why.to_string()));
                let _ = inputs.send(HostInput::OldRead(call, old));
            };
            let started = self.jobs.run(call, move || read_old(&ws, &old_path), done);
            self.shown = Some(next);
            // The connection's jobs all taken (slow reads, accepts waiting for a server): the
            // change, checked and announced, is still shown and asked, the old file unread.
            if let Err(busy) = started {
                self.on_old_read(call, ui::Old::Unreadable(busy.to_string()));
            }
            return;
        }
    }

    /// The text of the file the next change replaces is back: the change is shown, and asked.
    pub(super) fn on_old_read(&mut self, call: CallId, old: ui::Old) {
        // Withdrawn (or left to claude) while it was read.
        let Some(next) = self.shown.take_if(|s| s.call == call && s.old.is_none()) else {
            return;
        };
        if !crate::sys::terminal_is_ours() {
            left_in_background(next);
            self.show_next();
            return;
        }
        let path = next.args.new_file_path.clone();
        ui::err(format_args!("\n"));
        ui::say_bold(&format!("claude proposes a change: {path}"));
        ui::show_diff(&path, &old, &next.args.new_file_contents);
        self.shown = Some(Shown {
            old: Some(old),
            ..next
        });
        // On the screen before anything typed counts: the diff is written by stderr's thread,
        // and a terminal paused (Ctrl-S) or slow takes it later (the wait ends at a stop).
        ui::wait_written();
        // A line being typed as the question changes (the change before was withdrawn as it was
        // answered) was meant for that one: what is typed so far is dropped, and a line read
        // before now is not this question's answer (`on_terminal_line`). A new read drops what
        // was typed by itself.
        if self.line_requested {
            ui::discard_typed();
        }
        self.shown_at = Instant::now();
        self.ask();
    }

    fn ask(&mut self) {
        // A stray `a` typed earlier must not accept a change nobody has seen: what was typed is
        // dropped before the question shows, not after (a key typed as soon as it shows is its
        // answer). A line already being read was dropped by `show_next`.
        if !self.line_requested {
            ui::discard_typed();
        }
        ui::prompt(self.queue.len());
        if !self.line_requested {
            if let Some(tx) = &self.want_line {
                if tx.send(()).is_ok() {
                    self.line_requested = true;
                }
            }
        }
    }

    /// The bridge was sent to the background of its terminal while a question waited for its
    /// answer (Ctrl-Z, then `bg`): the change shown and those waiting are left for claude's own
    /// prompt, as in `show_next`, and the next ones are asked if the bridge is brought back.
    pub(super) fn on_terminal_away(&mut self) {
        self.line_requested = false;
        ui::prompt_closed();
        for left in self.shown.take().into_iter().chain(self.queue.drain(..)) {
            left_in_background(left);
        }
    }

    pub(super) fn on_terminal_line(&mut self, line: Option<String>, read_at: Instant) {
        self.line_requested = false;
        // The line ended where the prompt was: what follows starts below it.
        ui::prompt_closed();
        // A line typed since: a Ctrl-C now is the user's own, not the editor's.
        self.editor_ended = None;
        let Some(line) = line else {
            ui::err(format_args!("\n"));
            ui::say("stdin ended (Ctrl-D): diffs are left for claude's own prompt from now on");
            self.decider = Decider::Policy(DiffPolicy::Defer);
            self.want_line = None;
            // Those shown or waiting too: nobody can answer them here any more (they were shown
            // later with a question nobody read).
            for left in self.shown.take().into_iter().chain(self.queue.drain(..)) {
                ui::say(&format!(
                    "left for claude's prompt: {}{}",
                    left.args.new_file_path,
                    edit_not_used(left.draft)
                ));
            }
            return;
        };
        let Some(shown) = self.shown.take() else {
            return;
        };
        // Read before the change was shown; or while the file it replaces is read, before it
        // is: then its question asks for a line of its own once it is shown.
        let unseen = shown.old.is_none();
        if unseen || read_at < self.shown_at {
            ui::say("that answer was typed before this change was shown: it decides nothing");
            self.shown = Some(shown);
            if !unseen {
                self.ask();
            }
            return;
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "a" | "accept" | "y" | "yes" => {
                let contents = shown.args.new_file_contents.clone();
                self.accept(shown.call, &shown.args, contents, None, None, shown.real);
                self.show_next();
            }
            "r" | "reject" | "n" | "no" => {
                let _ = self.reject(shown.call, &shown.args);
                self.show_next();
            }
            "e" | "edit" => {
                let mut shown = shown;
                match self.start_edit(shown.call, &shown.args, shown.draft.take()) {
                    Ok(()) => {
                        self.editing = Some(shown.call);
                        self.shown = Some(shown);
                        // The editor has the terminal: the bridge's lines would land in it.
                        ui::set_quiet(true);
                    }
                    Err(why) => {
                        ui::say(&why);
                        self.shown = Some(shown);
                        self.ask();
                    }
                }
            }
            _ => {
                ui::say("type a, r or e, then Enter");
                self.shown = Some(shown);
                self.ask();
            }
        }
    }

    /// Writes the proposal to a temporary file and runs `$EDITOR` on it on a thread of its own,
    /// which hands the result back as [`HostInput::Edited`]: other calls go on meanwhile.
    /// A `draft` kept from an earlier edit is opened as it is.
    fn start_edit(
        &self,
        call: CallId,
        args: &OpenDiffArgs,
        draft: Option<Draft>,
    ) -> Result<(), String> {
        let editor =
            ui::editor_command().ok_or("set $VISUAL or $EDITOR to edit a proposed change")?;
        let inputs = self.inputs.clone();
        let running = Arc::clone(&self.editor_pid);
        let run = move |tmp: tempfile::NamedTempFile, fresh: bool| {
            std::thread::Builder::new()
                .name("editor".into())
                .spawn(move || {
                    let _stop = super::StopOnPanic::new(&inputs, "editor");
                    let (edited, interrupted) = edit(&editor, &tmp, fresh, &running);
                    let draft = |written| Draft {
                        file: tmp,
                        written,
                        interrupted,
                    };
                    let edited = match edited {
                        Ok(text) => Ok((text, draft(true))),
                        Err((why, written)) => Err((why, draft(written))),
                    };
                    let _ = inputs.send(HostInput::Edited(call, edited));
                })
                .map(drop)
                .map_err(|e| format!("could not start a thread for the editor: {e}"))
        };
        if let Some(draft) = draft {
            return run(draft.file, !draft.written);
        }
        // The file's extension, for the editor's highlighting: letters and digits only (it is
        // the client's text, and becomes part of a name a shell or cmd is given).
        let ext = std::path::Path::new(&args.new_file_path)
            .extension()
            .and_then(|e| e.to_str())
            .filter(|e| e.len() <= 16 && e.bytes().all(|b| b.is_ascii_alphanumeric()))
            .map(|e| format!(".{e}"))
            .unwrap_or_default();
        let mut tmp = tempfile::Builder::new()
            .prefix("claude-proposed-")
            .suffix(&ext)
            .tempfile()
            .map_err(|e| format!("could not create a temporary file: {e}"))?;
        tmp.write_all(args.new_file_contents.as_bytes())
            .and_then(|()| tmp.flush())
            .map_err(|e| format!("could not write the temporary file: {e}"))?;
        run(tmp, true)
    }

    /// `$EDITOR` ended on the shown change: accepted as edited, or the prompt asks again. A
    /// result for a change withdrawn meanwhile is dropped.
    pub(super) fn on_edited(&mut self, call: CallId, edited: EditOutcome) {
        if self.editing != Some(call) {
            return;
        }
        self.editing = None;
        self.editor_ended = match &edited {
            Err((_, draft)) if draft.interrupted => Some(Instant::now()),
            _ => None,
        };
        ui::set_quiet(false);
        match self.shown.take() {
            Some(shown) if shown.call == call => match edited {
                Ok((contents, _draft)) => {
                    self.accept(call, &shown.args, contents, None, None, shown.real);
                    self.show_next();
                }
                Err((why, draft)) => {
                    let mut shown = shown;
                    // Sent to the background while the editor ran: asking would stop the bridge
                    // (the question's flush of the terminal: SIGTTOU). What becomes of the edit
                    // is said with the change left.
                    if !crate::sys::terminal_is_ours() {
                        ui::say(&why);
                        shown.draft = Some(draft);
                        left_in_background(shown);
                        self.show_next();
                        return;
                    }
                    // The editor never wrote it (it did not start, or quit without saving): it is
                    // still the proposal.
                    let whose = match draft.written {
                        true => "your edit",
                        false => "the proposal",
                    };
                    ui::say(&format!(
                        "{why}; {whose} is kept in {}: e opens it again",
                        draft.file.path().display()
                    ));
                    shown.draft = Some(draft);
                    self.shown = Some(shown);
                    self.ask();
                }
            },
            other => {
                // Withdrawn while it was being edited (its lines were held back meanwhile). What
                // the user wrote is theirs: its copy is kept.
                ui::say(&format!(
                    "the change you were editing was withdrawn meanwhile (claude closed it or \
                     decided it): your edit was not used{}",
                    keep(edited)
                ));
                self.shown = other;
                if self.shown.is_none() {
                    self.show_next();
                }
            }
        }
    }

    /// At a stop, `$EDITOR` still open on a change is asked to end (SIGTERM; SIGKILL after
    /// `grace`): a bridge stopped alone (`kill PID`) would leave it on the terminal, fighting the
    /// shell for it. (Signals from the terminal reach the editor by themselves: it is in the
    /// bridge's process group.) What the user wrote is kept, and the terminal says where.
    pub fn end_edit(&mut self, inputs: &Receiver<HostInput>, grace: Duration) {
        // An edit left from an earlier `e` on the change still shown: the user's text, which
        // the stop would otherwise delete after the terminal said where it is.
        if let Some(shown) = self.shown.as_mut() {
            let kept = edit_not_used(shown.draft.take());
            if !kept.is_empty() {
                ui::say(&format!("stopping: {}{kept}", shown.args.new_file_path));
            }
        }
        let Some(call) = self.editing.take() else {
            return;
        };
        let signal = |stop: fn(u32)| {
            if let Some(pid) = *self.editor_pid.lock().unwrap_or_else(|e| e.into_inner()) {
                stop(pid);
            }
        };
        // Where nothing can be sent (Windows: the console's own events reach the editor), only a
        // short wait for one that ends by itself: a console closing gives the whole stop 5 s.
        let signals = crate::sys::SIGNALS_EDITOR;
        if signals {
            signal(crate::sys::ask_to_stop);
        }
        let first = match signals {
            true => grace,
            false => grace.min(Duration::from_millis(500)),
        };
        let mut give_up = Instant::now() + first;
        let mut killed = !signals;
        loop {
            match inputs.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
                Ok(HostInput::Edited(c, edited)) if c == call => {
                    ui::set_quiet(false);
                    ui::say(&format!(
                        "stopping while the change was in the editor: your edit was not used{}",
                        keep(edited)
                    ));
                    return;
                }
                // The stop is under way: nothing else is handled.
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if !killed => {
                    signal(crate::sys::kill_now);
                    killed = true;
                    give_up = Instant::now() + grace;
                }
                Err(_) => return,
            }
        }
    }

    /// Leaves the change to `path` to claude's own prompt, said, and its end said when it comes
    /// ([`Host::withdraw_diff`]).
    fn defer(&mut self, call: CallId, path: String) {
        ui::say(&format!("diff pending (decide in claude): {path}"));
        self.deferred.insert(call, path);
    }

    /// Takes a cancelled call's diff off the terminal, or out of the queue; one left to claude's
    /// prompt is said to be over (not at a stop, which is said itself).
    pub(super) fn withdraw_diff(&mut self, call: CallId, reason: CancelReason) {
        let why = &reason.to_string();
        if let Some(path) = self.deferred.remove(&call) {
            match reason {
                CancelReason::ServerStopped => {}
                // What claude does once the user answered its prompt (or another change took
                // the tab): which answer, the bridge is not told.
                CancelReason::TabClosed | CancelReason::AllDiffTabsClosed => {
                    ui::say(&format!("diff closed by claude: {path}"))
                }
                _ => ui::say(&format!("diff withdrawn ({why}): {path}")),
            }
            return;
        }
        if self.shown.as_ref().is_some_and(|s| s.call == call) {
            let s = self.shown.take().expect("shown");
            // Below its question, which goes with it. (Not into `$EDITOR`'s screen: that one is
            // told when the editor ends.)
            ui::prompt_closed();
            if self.editing.is_none() {
                ui::err(format_args!("\n"));
            }
            ui::say(&format!(
                "diff withdrawn ({why}): {}{}",
                s.args.new_file_path,
                edit_not_used(s.draft)
            ));
            self.show_next();
        } else if let Some(i) = self.queue.iter().position(|s| s.call == call) {
            let s = self.queue.remove(i).expect("queued");
            let n = self.queue.len();
            ui::note(
                &format!("diff withdrawn ({why}): {}", s.args.new_file_path),
                n,
            );
        }
    }
}

/// A change not asked on the terminal, the bridge being in its background: claude's own prompt
/// decides it. An edit kept for it stays where the terminal said.
fn left_in_background(left: Shown) {
    ui::say(&format!(
        "diff pending (decide in claude; this bridge runs in the background of its terminal: \
         `fg` brings the questions back): {}{}",
        left.args.new_file_path,
        edit_not_used(left.draft)
    ));
}

/// Runs `editor` on `tmp` and waits; the edited contents, at most [`MAX_EDITED_BYTES`].
/// A `fresh` copy of the proposal that the editor did not write (quit without saving, or an
/// editor that returns at once, such as `code` without `--wait`) is not taken for an edit:
/// nothing is accepted. A draft the user wrote in an earlier edit is their own text: opened again
/// and left as it is, it is accepted as it is. Why not, and whether the copy is the user's text
/// now (not `fresh`, or written by this edit), when nothing is accepted.
/// Also whether Ctrl-C ended the editor.
fn edit(
    editor: &OsString,
    tmp: &tempfile::NamedTempFile,
    fresh: bool,
    running: &Mutex<Option<u32>>,
) -> (Result<String, (String, bool)>, bool) {
    let modified = || fs::metadata(tmp.path()).and_then(|m| m.modified()).ok();
    let before = modified();
    let status = ui::run_editor(editor, tmp.path(), running);
    let interrupted = status.as_ref().is_ok_and(crate::sys::ended_by_interrupt);
    let written = !fresh || before.is_none() || modified() != before;
    (edited(editor, tmp, written, status), interrupted)
}

/// What [`edit`] found, from the editor's `status` and whether the copy is the user's text now
/// (`written`).
fn edited(
    editor: &OsString,
    tmp: &tempfile::NamedTempFile,
    written: bool,
    status: std::io::Result<std::process::ExitStatus>,
) -> Result<String, (String, bool)> {
    let refused = |why: String| Err((why, written));
    let status = match status {
        Ok(status) => status,
        Err(e) => return refused(format!("could not start {}: {e}", editor.to_string_lossy())),
    };
    if !status.success() {
        return refused(format!(
            "the editor exited with {status}; the change was not accepted"
        ));
    }
    if !written {
        return refused(format!(
            "{} did not write the file (quit without saving, or it does not wait: \
             `code --wait`, `subl -w`); the change was not accepted",
            editor.to_string_lossy()
        ));
    }
    read_capped(tmp.path(), MAX_EDITED_BYTES).or_else(refused)
}

/// Keeps the copy an edit left when the user wrote it (the file is only not removed, no IO):
/// what to add to the message saying the edit was not used.
fn keep(edited: EditOutcome) -> String {
    let draft = match edited {
        Ok((_, draft)) | Err((_, draft)) => draft,
    };
    keep_draft(Some(draft))
}

/// [`keep`] for the draft a change held, if any: one the user wrote is not removed, one still the
/// proposal as shown goes.
fn keep_draft(draft: Option<Draft>) -> String {
    match draft {
        Some(draft) if draft.written => match draft.file.keep() {
            Ok((_, path)) => format!("; it is kept in {}", path.display()),
            Err(e) => format!("; it could not be kept: {e}"),
        },
        _ => String::new(),
    }
}

/// For a change taken away with its draft: "; your edit was not used; it is kept in PATH" when the
/// user wrote one (kept), nothing otherwise.
fn edit_not_used(draft: Option<Draft>) -> String {
    match keep_draft(draft) {
        kept if kept.is_empty() => kept,
        kept => format!("; your edit was not used{kept}"),
    }
}

/// Reads `path` as UTF-8 text of at most `cap` bytes.
fn read_capped(path: &std::path::Path, cap: u64) -> Result<String, String> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(cap + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("could not read the edited file: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!(
            "the edited file is larger than {cap} bytes; the change was not accepted"
        ));
    }
    String::from_utf8(bytes).map_err(|_| "the edited file is not UTF-8 text".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edited_file_is_read_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        fs::write(&p, "12345678").unwrap();
        assert_eq!(read_capped(&p, 8).unwrap(), "12345678");
        let e = read_capped(&p, 7).unwrap_err();
        assert!(e.contains("larger than 7 bytes"), "{e}");
        fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_capped(&p, 8).is_err());
    }
}
