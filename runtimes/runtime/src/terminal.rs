//! The terminal a program was started on: what a program that asks its user questions needs of
//! it (`claude-ide-bridge ask`).

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
