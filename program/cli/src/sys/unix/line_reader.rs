//! The terminal's answers, read so that a bridge sent to the background of its terminal (Ctrl-Z,
//! then `bg`) is not stopped by its own wait for a line.
//!
//! A read of the terminal from the background stops the whole process (SIGTTIN), and a read
//! under way when the job is stopped is made again when it continues: every call of claude's
//! then waited until `fg`. So the line is waited for with `poll`, which the terminal lets a
//! background process make, looking every second whether the terminal is still this process's,
//! and read only once it has a line and is.

use std::io;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

use super::terminal_is_ours;
use crate::sys::TerminalRead;

/// The most bytes kept for one line: a longer one is given as it is (no answer is that long).
const MAX_LINE: usize = 64 * 1024;

/// Standard input's lines, one at a time ([`LineReader::read_line`]).
#[derive(Default)]
pub struct LineReader {
    /// Bytes read and not yet given: the start of the next line, or more lines.
    pending: Vec<u8>,
}

impl LineReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next line (with its `\n`), the end of input (or an error reading it), or, when
    /// standard input is a terminal, [`TerminalRead::Away`] as soon as it is not this process's
    /// (within a second): its background. The read waits in `poll`, never in a read a stop would
    /// make again.
    pub fn read_line(&mut self) -> TerminalRead {
        let stdin = io::stdin();
        let terminal = rustix::termios::isatty(&stdin);
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                return TerminalRead::Line(self.pending.drain(..=end).collect());
            }
            if self.pending.len() >= MAX_LINE {
                return TerminalRead::Line(std::mem::take(&mut self.pending));
            }
            // A terminal is looked at every second; other input is waited for.
            let second = Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            };
            let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
            match poll(&mut fds, terminal.then_some(&second)) {
                Ok(_) | Err(Errno::INTR) if terminal && !terminal_is_ours() => {
                    return TerminalRead::Away
                }
                Ok(0) | Err(Errno::INTR) => continue,
                Ok(_) => {}
                Err(_) => return TerminalRead::End,
            }
            let mut buf = [0u8; 4096];
            match rustix::io::read(&stdin, &mut buf) {
                Ok(0) if self.pending.is_empty() => return TerminalRead::End,
                Ok(0) => return TerminalRead::Line(std::mem::take(&mut self.pending)),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(Errno::INTR | Errno::AGAIN) => continue,
                Err(_) => return TerminalRead::End,
            }
        }
    }
}
