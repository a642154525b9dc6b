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

    /// A logger writing `[claude-ide-bridge] <line>` to stderr.
    pub fn stderr() -> Logger {
        Logger::new(|line| eprintln!("[claude-ide-bridge] {line}"))
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

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Logger(..)")
    }
}
