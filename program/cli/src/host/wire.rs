//! The wire log of `--wire-log`: every message and connection event, one JSON object a line.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use claude_ide_bridge::Event;
use serde_json::{json, Value};

use super::reason_str;

/// The most a run writes to the wire log: a bridge left running all day with the log on wrote
/// 167 KB a cycle of calls (every `getDiagnostics` answer in full), without end.
const MAX_WIRE_LOG_BYTES: u64 = 256 << 20;

/// The JSON-lines wire log of `--wire-log`.
pub struct WireLog {
    file: File,
    path: PathBuf,
    start: Instant,
    /// Bytes this run may still write; past them one line says so, and nothing more is written.
    left: u64,
}

impl WireLog {
    /// Appends to `path` (created if missing, private to the user: it holds every proposed file's
    /// contents and every file read), at most 256 MiB in this run.
    pub fn open(path: &Path, start: Instant) -> io::Result<WireLog> {
        let file = crate::sys::append_private(path)?;
        Ok(WireLog {
            file,
            path: path.to_path_buf(),
            start,
            left: MAX_WIRE_LOG_BYTES,
        })
    }

    /// Logs `event` (calls and cancellations are not logged: their messages are).
    pub fn event(&mut self, event: &Event) {
        let line = match event {
            Event::Message {
                conn,
                incoming,
                text,
            } => {
                let msg = serde_json::from_str::<Value>(text)
                    .unwrap_or_else(|_| Value::String(text.clone()));
                json!({"conn": conn.0, "dir": if *incoming {"in"} else {"out"}, "msg": msg})
            }
            Event::Connected {
                conn,
                path,
                user_agent,
            } => {
                json!({"conn": conn.0, "event": "connected", "path": path, "userAgent": user_agent})
            }
            Event::Initialized {
                conn,
                protocol_version,
                client_name,
                client_version,
            } => {
                json!({"conn": conn.0, "event": "initialized", "protocolVersion": protocol_version,
                "clientName": client_name, "clientVersion": client_version})
            }
            Event::IdeConnected { conn, pid } => {
                json!({"conn": conn.0, "event": "ide_connected", "pid": pid})
            }
            Event::Disconnected { conn, reason } => {
                json!({"conn": conn.0, "event": "disconnected", "reason": reason_str(reason)})
            }
            Event::TabClosed { conn, tab_name } => {
                json!({"conn": conn.0, "event": "tab_closed", "tabName": tab_name})
            }
            Event::CallCancelled { .. } | Event::ToolCall { .. } | Event::CompatRequest { .. } => {
                return
            }
            // An event of a newer engine: logged in its debug form.
            other => json!({"event": "other", "debug": format!("{other:?}")}),
        };
        self.line(line);
    }

    fn line(&mut self, mut v: Value) {
        if self.left == 0 {
            return;
        }
        let t_ms = self.start.elapsed().as_millis() as u64;
        v["t_ms"] = json!(t_ms);
        let mut text = v.to_string();
        text.push('\n');
        if text.len() as u64 > self.left {
            text = json!({"event": "wire_log_limit", "t_ms": t_ms,
                "note": format!("{MAX_WIRE_LOG_BYTES} bytes written in this run: nothing more is logged")})
            .to_string();
            text.push('\n');
            self.left = 0;
        } else {
            self.left -= text.len() as u64;
        }
        // A write that fails (a full disk) ends the log, said once: the lines after it would
        // be missing without a word, and one written in part would run into the next.
        if let Err(e) = self.file.write_all(text.as_bytes()) {
            self.left = 0;
            crate::ui::warn(&format!(
                "warning: --wire-log {}: writing failed ({e}): nothing more is logged",
                self.path.display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write that fails (here `/dev/full`: "no space left") ends the log: nothing more is
    /// tried (each line was tried, and failed, on its own).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_write_ends_the_log() {
        let mut log = WireLog {
            file: File::options().append(true).open("/dev/full").unwrap(),
            path: "/dev/full".into(),
            start: Instant::now(),
            left: MAX_WIRE_LOG_BYTES,
        };
        log.line(json!({"event": "test"}));
        assert_eq!(log.left, 0);
    }

    #[test]
    fn the_log_stops_at_its_bound_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let mut log = WireLog::open(&path, Instant::now()).unwrap();
        log.left = 1000;
        for i in 0..100 {
            log.line(json!({"event": "test", "i": i}));
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(text.len() <= 1000 + 200, "{}", text.len());
        assert_eq!(lines.last().unwrap()["event"], "wire_log_limit");
        assert_eq!(lines[0]["i"], 0);
        assert_eq!(
            lines.iter().filter(|l| l["event"] == "test").count(),
            lines.len() - 1
        );
    }
}
