//! Debug lines about connections ([`Logger`]), to stderr with `CLAUDE_IDE_BRIDGE_LOG=debug` or to
//! a host's own callback.
use std::fmt;
use std::sync::Arc;

/// Where debug lines about connections go. Lines never contain the token.
///
/// [`Logger::from_env`] writes to stderr when `CLAUDE_IDE_BRIDGE_LOG=debug`; a host can pass its
/// own callback with [`Logger::new`].
///
/// ```
/// use claude_ide_bridge_runtime::Logger;
/// use std::sync::{Arc, Mutex};
/// let lines = Arc::new(Mutex::new(Vec::new()));
/// let sink = lines.clone();
/// let log = Logger::new(move |line| sink.lock().unwrap().push(line.to_string()));
/// log.log("Client connected");
/// assert_eq!(lines.lock().unwrap().as_slice(), ["Client connected"]);
/// ```
#[derive(Clone)]
pub struct Logger(Arc<dyn Fn(&str) + Send + Sync>);

impl Logger {
    /// A logger calling `f` with each line.
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Logger {
        Logger(Arc::new(f))
    }

    /// A logger writing `[claude-ide-bridge] <line>` to stderr, with control characters and
    /// bidirectional overrides written as escapes (`\u{1b}`): a line may quote what a peer sent
    /// (its user agent, its messages), which must not drive the terminal it is read on.
    ///
    /// A line that cannot be written (stderr closed) is dropped. The line is written by the
    /// thread that logs it, a runtime's: a stderr that is not read (a pipe nobody drains) holds
    /// that thread once the pipe is full. A host whose stderr may go unread passes a logger of
    /// its own ([`Logger::new`]) that queues or drops lines, as the program does.
    pub fn stderr() -> Logger {
        Logger::new(|line| {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "[claude-ide-bridge] {}",
                visible(line)
            );
        })
    }

    /// [`Logger::stderr`] when the environment variable `CLAUDE_IDE_BRIDGE_LOG` is `debug`.
    pub fn from_env() -> Option<Logger> {
        match std::env::var("CLAUDE_IDE_BRIDGE_LOG") {
            Ok(v) if v.eq_ignore_ascii_case("debug") => Some(Logger::stderr()),
            _ => None,
        }
    }

    /// Write one line.
    pub fn log(&self, line: &str) {
        (self.0)(line)
    }
}

/// `line` with what a terminal would act on (control characters, C1 included, and the
/// bidirectional overrides and isolates) written as `\u{..}` escapes; as it is when it has none.
fn visible(line: &str) -> std::borrow::Cow<'_, str> {
    let acts = |c: char| {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !line.chars().any(acts) {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if acts(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Logger(..)")
    }
}

#[cfg(test)]
mod tests {
    /// What a peer sent, quoted in a line, cannot drive the terminal: an escape sequence, a C1
    /// CSI, a bidi override and a line break are written as escapes; plain text is kept.
    #[test]
    fn lines_written_to_stderr_cannot_drive_the_terminal() {
        assert_eq!(
            super::visible("agent claude-cli/2 é"),
            "agent claude-cli/2 é"
        );
        assert_eq!(
            super::visible("ua \u{1b}]0;title\u{7}\u{9b}2J\u{202e}x\ny"),
            "ua \\u{1b}]0;title\\u{7}\\u{9b}2J\\u{202e}x\\u{a}y"
        );
    }
}
