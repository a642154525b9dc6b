//! What a person sees on the terminal: coloured unified diffs, the prompt, and `$VISUAL`/`$EDITOR`.
//!
//! Everything goes to stderr through `anstream`, which drops the colours when stderr is not a
//! terminal or `NO_COLOR` is set.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};

use anstyle::{AnsiColor, Style};
use similar::{ChangeTag, TextDiff};

const RED: Style = AnsiColor::Red.on_default();
const GREEN: Style = AnsiColor::Green.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();
const BOLD: Style = Style::new().bold();

/// Writes to stderr (colour stripped when not wanted), ignoring failures: a terminal that went
/// away (a hangup, a closed pipe) must not stop the bridge before it has removed its lock file.
pub fn err(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = anstream::stderr().write_fmt(args);
}

/// Prints a line to stderr (colour stripped when not wanted).
pub fn say(line: &str) {
    if !QUIET.load(Ordering::Relaxed) {
        err(format_args!("{line}\n"));
    }
}

/// While `run` has handed the terminal to `claude`, the bridge's own lines would land inside
/// claude's screen: they are held back (the `--wire-log` still records everything).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Hold back (or resume) the lines of [`say`] and [`say_bold`].
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether [`say`]'s lines reach the terminal now (not while `run` has handed it to `claude`).
pub fn heard() -> bool {
    !QUIET.load(Ordering::Relaxed)
}

/// Prints a line in bold.
pub fn say_bold(line: &str) {
    if !QUIET.load(Ordering::Relaxed) {
        err(format_args!("{BOLD}{line}{BOLD:#}\n"));
    }
}

/// The unified diff from `old` (`None`: the file does not exist) to `new`, coloured.
pub fn render_diff(path: &str, old: Option<&str>, new: &str) -> String {
    let mut out = String::new();
    let old_text = old.unwrap_or("");
    let old_name = if old.is_some() {
        format!("a{path}")
    } else {
        "/dev/null".to_string()
    };
    out.push_str(&format!("{BOLD}--- {old_name}\n+++ b{path}{BOLD:#}\n"));
    let diff = TextDiff::from_lines(old_text, new);
    let unified = diff.unified_diff();
    let mut any = false;
    for hunk in unified.iter_hunks() {
        any = true;
        out.push_str(&format!("{CYAN}{}{CYAN:#}\n", hunk.header()));
        for change in hunk.iter_changes() {
            let (sign, style) = match change.tag() {
                ChangeTag::Delete => ('-', RED),
                ChangeTag::Insert => ('+', GREEN),
                ChangeTag::Equal => (' ', Style::new()),
            };
            let text = change.value();
            let text = text.strip_suffix('\n').unwrap_or(text);
            out.push_str(&format!("{style}{sign}{text}{style:#}\n"));
            if change.missing_newline() {
                out.push_str("\\ No newline at end of file\n");
            }
        }
    }
    if !any {
        out.push_str("(no changes)\n");
    }
    out
}

/// Prints a diff to stderr.
pub fn show_diff(path: &str, old: Option<&str>, new: &str) {
    err(format_args!("{}", render_diff(path, old, new)));
}

/// The prompt for the shown diff.
pub fn prompt(queued: usize) {
    let more = if queued > 0 {
        format!(" ({queued} more waiting)")
    } else {
        String::new()
    };
    err(format_args!(
        "{BOLD}[a]ccept / [r]eject / [e]dit{more}? {BOLD:#}"
    ));
}

/// `$VISUAL`, else `$EDITOR` (non-empty).
pub fn editor_command() -> Option<OsString> {
    ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|v| !v.is_empty())
}

/// Runs the editor on `file` in the foreground and waits for it. The command may carry
/// arguments (`EDITOR="code --wait"`), so it is run by `sh`.
pub fn run_editor(editor: &OsString, file: &Path) -> io::Result<ExitStatus> {
    let mut script = OsString::from(editor);
    script.push(" \"$@\"");
    Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg("editor")
        .arg(file)
        .status()
}

/// Starts the editor on `files` without waiting (for `--open-files`).
pub fn spawn_editor(editor: &OsString, files: &[String]) -> io::Result<()> {
    let mut script = OsString::from(editor);
    script.push(" \"$@\"");
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg("editor")
        .args(files)
        .spawn()?;
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_of_a_change_and_a_new_file() {
        let d = render_diff("/w/a.txt", Some("one\ntwo\n"), "one\nthree\n");
        assert!(d.contains("-two"), "{d}");
        assert!(d.contains("+three"), "{d}");
        assert!(d.contains("@@ -1,2 +1,2 @@"), "{d}");
        let d = render_diff("/w/n.txt", None, "hello\n");
        assert!(d.contains("--- /dev/null"), "{d}");
        assert!(d.contains("+hello"), "{d}");
    }
}
