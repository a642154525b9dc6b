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
    /// contents and every file read; its folder too, as the `--lsp-log`'s is), at most 256 MiB in
    /// this run.
    pub fn open(path: &Path, start: Instant) -> io::Result<WireLog> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::sys::private_dirs(dir).map_err(|e| crate::lsp::a_file_in_the_way(dir, e))?;
        }
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
        // Full (or failed): nothing more is written, so nothing is read or copied either (a
        // message of megabytes cost the host thread its whole text each time).
        if self.left == 0 {
            return;
        }
        let line = match event {
            Event::Message {
                conn,
                incoming,
                text,
            } => {
                let head = json!({"conn": conn.0, "dir": if *incoming {"in"} else {"out"}});
                return self.message(head, text);
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

    /// Logs a message's `text` in `head` as `msg`: as it was sent, when it is JSON (numbers past
    /// what a float holds and repeated members as they were: read back into a value, an id of
    /// 99999999999999999999 was logged as 1e+20, and a message with two `method`s as one
    /// without the error it was answered with), else as a string.
    fn message(&mut self, head: Value, text: &str) {
        match serde_json::from_str::<&serde_json::value::RawValue>(text) {
            Ok(_) => {
                // Valid JSON holds a line break only between its tokens (never in a string):
                // one line, the same JSON.
                let one_line = text.replace(['\n', '\r'], " ");
                self.line_with(head, Some(&one_line));
            }
            Err(_) => {
                let mut v = head;
                v["msg"] = Value::String(text.to_owned());
                self.line(v);
            }
        }
    }

    fn line(&mut self, v: Value) {
        self.line_with(v, None);
    }

    /// Writes `v` with its time, and `raw` (JSON text of one line) as its `msg` when given.
    fn line_with(&mut self, mut v: Value, raw: Option<&str>) {
        if self.left == 0 {
            return;
        }
        let t_ms = self.start.elapsed().as_millis() as u64;
        v["t_ms"] = json!(t_ms);
        let mut text = v.to_string();
        if let Some(raw) = raw {
            // `v` is an object with members: its closing brace takes the message before it.
            text.pop();
            text.push_str(",\"msg\":");
            text.push_str(raw);
            text.push('}');
        }
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

    /// A message is logged as it was sent: an id past what a float holds, a member given twice,
    /// a message sent over several lines (on one line), a message that is no JSON (a string).
    #[test]
    fn messages_are_logged_as_they_were_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let mut log = WireLog::open(&path, Instant::now()).unwrap();
        let conn = claude_ide_bridge::ConnectionId(7);
        let sent = [
            r#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping"}"#,
            "{\"jsonrpc\": \"2.0\",\r\n \"id\": -0,\n \"method\": \"a\\nb\"}",
            "{not json",
        ];
        for text in sent {
            log.event(&Event::Message {
                conn,
                incoming: true,
                text: text.to_owned(),
            });
        }
        let written = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 4, "{written}");
        for line in &lines {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                (v["conn"].as_u64(), v["dir"].as_str()),
                (Some(7), Some("in"))
            );
        }
        assert!(
            lines[0].contains(r#""msg":{"jsonrpc":"2.0","id":99999999999999999999,"#),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains(r#""method":"ping","method":"ping"}"#),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains(r#""id": -0,  "method": "a\nb"}"#),
            "{}",
            lines[2]
        );
        let v: Value = serde_json::from_str(lines[3]).unwrap();
        assert_eq!(v["msg"], "{not json");
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
