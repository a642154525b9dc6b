//! The wire log of `--wire-log`: every message and connection event, one JSON object a line.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use claude_ide_bridge::Event;
use serde_json::{json, Value};

use super::reason_str;

/// The JSON-lines wire log of `--wire-log`.
pub struct WireLog {
    file: File,
    start: Instant,
}

impl WireLog {
    /// Appends to `path` (created if missing, private to the user: it holds every proposed file's
    /// contents and every file read).
    pub fn open(path: &Path, start: Instant) -> io::Result<WireLog> {
        let file = crate::sys::append_private(path)?;
        Ok(WireLog { file, start })
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
        v["t_ms"] = json!(self.start.elapsed().as_millis() as u64);
        let mut text = v.to_string();
        text.push('\n');
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.flush();
    }
}
