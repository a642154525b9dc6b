//! The terminal a program was started on: what a program that asks its user questions needs of
//! it (`claude-ide-bridge serve --on-diff ask`), and its settings kept across a program it runs there (`$EDITOR`,
//! `run`'s claude) that may be killed in raw mode.

use std::io;

use crate::sys;

/// Drops what was typed on the terminal (standard input) and not read yet, a line not ended too,
/// so that keys typed before a question was shown are not taken as its answer: call it just
/// before reading the answer. `tcflush(TCIFLUSH)` on Unix, `FlushConsoleInputBuffer` on Windows.
/// Standard input that is not a terminal (a pipe, a file) is left alone: what comes through it
/// was meant to be read. An error is the OS's refusal to flush a terminal.
///
/// ```
/// use claude_ide_bridge_runtime::terminal::discard_typed;
/// // Under `cargo test` standard input is not a terminal: nothing to drop.
/// discard_typed().unwrap();
/// ```
pub fn discard_typed() -> io::Result<()> {
    sys::discard_typed()
}

/// The terminal's settings, as [`Settings::save`] found them: the termios of standard input on
/// Unix; on Windows the console's input mode (standard input's) and output mode (standard
/// error's), which are the console's, shared by every program on it, not each program's own.
pub struct Settings(sys::TerminalSettings);

impl Settings {
    /// The settings now; `None` when standard input is not a terminal (a console on Windows).
    ///
    /// ```
    /// use claude_ide_bridge_runtime::terminal::Settings;
    /// // Under `cargo test` standard input is not a terminal: nothing to save.
    /// assert!(Settings::save().is_none());
    /// ```
    pub fn save() -> Option<Settings> {
        sys::terminal_settings().map(Settings)
    }

    /// Puts the settings back (a program killed in raw mode leaves Enter unmapped, no echo and
    /// no Ctrl-C; on Windows a console left in virtual-terminal input sends escape sequences for
    /// the arrow keys), then writes `reset`, when given, to the terminal (standard error, or
    /// standard output when only that is one; on Unix nowhere when neither is): the escape
    /// sequences that undo what such a program set on the terminal itself (its alternate screen,
    /// mouse reports). On Windows they are written with the console's virtual-terminal processing
    /// on for the write alone (a console without it is left as it was, `reset` unwritten).
    ///
    /// On Unix, call it only while the process is in its terminal's foreground: setting the
    /// terminal from the background stops the process (SIGTTOU).
    pub fn restore(&self, reset: Option<&[u8]>) {
        sys::put_back_terminal(&self.0, reset)
    }
}
