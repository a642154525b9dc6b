//! Notifications from the server to the client (docs/protocol.md, "Notifications"), with their params as serde
//! structs.
//!
//! [`Notification::write_json`] appends the whole JSON-RPC notification, ready to send as one text message.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::paths::{file_uri, ClientPaths};
use crate::tools::{Diagnostic, Selection};

/// Params of `selection_changed`: `{text, filePath, fileUrl, selection: {start, end, isEmpty}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionChanged {
    /// The selected text (empty for a cursor).
    pub text: String,
    /// The file's absolute POSIX-style path.
    pub file_path: String,
    /// The file's `file://` URI (see [`crate::paths::file_uri`]).
    pub file_url: String,
    /// The selected range, 0-based.
    pub selection: Selection,
}

/// Params of `at_mentioned`: `{filePath, lineStart?, lineEnd?}`; lines are 0-based and omitted for a whole file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AtMentioned {
    /// The file's absolute POSIX-style path.
    pub file_path: String,
    /// First line, 0-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_start: Option<u32>,
    /// Last line, 0-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_end: Option<u32>,
}

/// Params of `diagnostics_changed`: `{uri, diagnostics}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiagnosticsChanged {
    /// The file's `file://` URI.
    pub uri: String,
    /// Its diagnostics now.
    pub diagnostics: Vec<Diagnostic>,
}

/// Params of `log_event`: `{eventName, eventData}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEvent {
    /// The event's name.
    pub event_name: String,
    /// Anything about it.
    pub event_data: Value,
}

/// A notification the server sends.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Notification {
    /// `selection_changed`.
    SelectionChanged(SelectionChanged),
    /// `at_mentioned`.
    AtMentioned(AtMentioned),
    /// `diagnostics_changed`.
    DiagnosticsChanged(DiagnosticsChanged),
    /// `log_event`.
    LogEvent(LogEvent),
    /// `notifications/tools/list_changed`, without params: the host's tool set changed.
    ToolsListChanged,
}

impl Notification {
    /// The JSON-RPC method name.
    pub const fn method(&self) -> &'static str {
        match self {
            Notification::SelectionChanged(_) => "selection_changed",
            Notification::AtMentioned(_) => "at_mentioned",
            Notification::DiagnosticsChanged(_) => "diagnostics_changed",
            Notification::LogEvent(_) => "log_event",
            Notification::ToolsListChanged => "notifications/tools/list_changed",
        }
    }

    /// Appends the JSON-RPC notification `{"jsonrpc":"2.0","method":..,"params":..}` (no `params` for
    /// [`Notification::ToolsListChanged`]).
    ///
    /// ```
    /// use claude_ide_bridge::{AtMentioned, Notification};
    /// let mut out = Vec::new();
    /// Notification::AtMentioned(AtMentioned {
    ///     file_path: "/ws/a.rs".into(),
    ///     line_start: Some(3),
    ///     line_end: Some(7),
    /// })
    /// .write_json(&mut out);
    /// assert_eq!(
    ///     out,
    ///     br#"{"jsonrpc":"2.0","method":"at_mentioned","params":{"filePath":"/ws/a.rs","lineStart":3,"lineEnd":7}}"#
    /// );
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"");
        out.extend_from_slice(self.method().as_bytes());
        out.push(b'"');
        match self {
            Notification::SelectionChanged(p) => write_params(out, p),
            Notification::AtMentioned(p) => write_params(out, p),
            Notification::DiagnosticsChanged(p) => write_params(out, p),
            Notification::LogEvent(p) => write_params(out, p),
            Notification::ToolsListChanged => {}
        }
        out.push(b'}');
    }
}

impl Notification {
    /// This notification as a client that names files `paths`' way is sent it, when that differs
    /// (a file's path or URI the client names otherwise); `None` when it is sent as it is.
    pub(crate) fn for_client(&self, paths: ClientPaths) -> Option<Notification> {
        match self {
            Notification::SelectionChanged(p) => {
                let file_path = paths.path(&p.file_path)?;
                Some(Notification::SelectionChanged(SelectionChanged {
                    file_url: file_uri(&file_path),
                    file_path,
                    ..p.clone()
                }))
            }
            Notification::AtMentioned(p) => Some(Notification::AtMentioned(AtMentioned {
                file_path: paths.path(&p.file_path)?,
                ..p.clone()
            })),
            Notification::DiagnosticsChanged(p) => {
                Some(Notification::DiagnosticsChanged(DiagnosticsChanged {
                    uri: paths.uri(&p.uri)?,
                    diagnostics: p.diagnostics.clone(),
                }))
            }
            Notification::LogEvent(_) | Notification::ToolsListChanged => None,
        }
    }
}

/// Writes `,"params":` and the params.
fn write_params<P: Serialize>(out: &mut Vec<u8>, params: &P) {
    out.extend_from_slice(b",\"params\":");
    serde_json::to_writer(out, params)
        .expect("notification params hold only strings, numbers and JSON values");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Position, Range};
    use serde_json::json;

    fn written(n: &Notification) -> String {
        let mut out = b"prefix".to_vec();
        n.write_json(&mut out);
        let s = String::from_utf8(out).unwrap();
        s.strip_prefix("prefix").unwrap().to_owned()
    }

    #[test]
    fn selection_changed() {
        let n = Notification::SelectionChanged(SelectionChanged {
            text: "let x = \"y\";\n".into(),
            file_path: "/ws/my file.rs".into(),
            file_url: crate::paths::file_uri("/ws/my file.rs"),
            selection: Selection::new(Position::new(1, 2), Position::new(3, 0)),
        });
        assert_eq!(n.method(), "selection_changed");
        assert_eq!(
            written(&n),
            r#"{"jsonrpc":"2.0","method":"selection_changed","params":{"text":"let x = \"y\";\n","filePath":"/ws/my file.rs","fileUrl":"file:///ws/my%20file.rs","selection":{"start":{"line":1,"character":2},"end":{"line":3,"character":0},"isEmpty":false}}}"#
        );
        let cursor = Selection::new(Position::new(4, 4), Position::new(4, 4));
        assert!(cursor.is_empty);
    }

    #[test]
    fn at_mentioned() {
        let whole = Notification::AtMentioned(AtMentioned {
            file_path: "/ws/a.rs".into(),
            line_start: None,
            line_end: None,
        });
        assert_eq!(
            written(&whole),
            r#"{"jsonrpc":"2.0","method":"at_mentioned","params":{"filePath":"/ws/a.rs"}}"#
        );
        let lines = Notification::AtMentioned(AtMentioned {
            file_path: "/ws/a.rs".into(),
            line_start: Some(0),
            line_end: Some(9),
        });
        assert_eq!(
            written(&lines),
            r#"{"jsonrpc":"2.0","method":"at_mentioned","params":{"filePath":"/ws/a.rs","lineStart":0,"lineEnd":9}}"#
        );
    }

    #[test]
    fn diagnostics_changed() {
        let n = Notification::DiagnosticsChanged(DiagnosticsChanged {
            uri: "file:///ws/a.rs".into(),
            diagnostics: vec![
                Diagnostic {
                    message: "unused variable".into(),
                    severity: Diagnostic::WARNING.into(),
                    range: Range::new(Position::new(2, 8), Position::new(2, 9)),
                    source: Some("rustc".into()),
                    code: Some(json!("unused_variables")),
                },
                Diagnostic {
                    message: "boom".into(),
                    severity: Diagnostic::ERROR.into(),
                    range: Range::new(Position::new(0, 0), Position::new(0, 1)),
                    source: None,
                    code: None,
                },
            ],
        });
        assert_eq!(
            written(&n),
            r#"{"jsonrpc":"2.0","method":"diagnostics_changed","params":{"uri":"file:///ws/a.rs","diagnostics":[{"message":"unused variable","severity":"Warning","range":{"start":{"line":2,"character":8},"end":{"line":2,"character":9}},"source":"rustc","code":"unused_variables"},{"message":"boom","severity":"Error","range":{"start":{"line":0,"character":0},"end":{"line":0,"character":1}}}]}}"#
        );
        let empty = Notification::DiagnosticsChanged(DiagnosticsChanged {
            uri: "file:///ws/b.rs".into(),
            diagnostics: vec![],
        });
        assert_eq!(
            written(&empty),
            r#"{"jsonrpc":"2.0","method":"diagnostics_changed","params":{"uri":"file:///ws/b.rs","diagnostics":[]}}"#
        );
    }

    #[test]
    fn log_event_and_list_changed() {
        let n = Notification::LogEvent(LogEvent {
            event_name: "diff_accepted".into(),
            event_data: json!({"n": 1}),
        });
        assert_eq!(
            written(&n),
            r#"{"jsonrpc":"2.0","method":"log_event","params":{"eventName":"diff_accepted","eventData":{"n":1}}}"#
        );
        assert_eq!(
            written(&Notification::ToolsListChanged),
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        );
    }

    /// A WSL client is sent a Windows drive's paths where WSL mounts the drive, in every
    /// notification that names a file; other paths, and every other client, as they are.
    #[test]
    fn a_wsl_client_is_sent_the_paths_where_wsl_mounts_the_drive() {
        let wsl = ClientPaths::WslMounts;
        let at = Selection::new(Position::new(1, 0), Position::new(2, 3));
        let selection = |path: &str| {
            Notification::SelectionChanged(SelectionChanged {
                text: "x".into(),
                file_path: path.into(),
                file_url: file_uri(path),
                selection: at,
            })
        };
        let moved = selection(r"C:\Users\me\my app\a.rs");
        assert_eq!(
            moved.for_client(wsl),
            Some(selection("/mnt/c/Users/me/my app/a.rs"))
        );
        let Some(Notification::SelectionChanged(s)) = moved.for_client(wsl) else {
            unreachable!()
        };
        assert_eq!(s.file_url, "file:///mnt/c/Users/me/my%20app/a.rs");
        assert_eq!(moved.for_client(ClientPaths::AsGiven), None);
        assert_eq!(selection("/home/me/a.rs").for_client(wsl), None);
        assert_eq!(selection(r"\\srv\share\a.rs").for_client(wsl), None);

        let mention = |path: &str| {
            Notification::AtMentioned(AtMentioned {
                file_path: path.into(),
                line_start: Some(2),
                line_end: Some(4),
            })
        };
        assert_eq!(
            mention(r"\\?\D:\w\b.py").for_client(wsl),
            Some(mention("/mnt/d/w/b.py"))
        );
        assert_eq!(mention("/home/me/b.py").for_client(wsl), None);

        let published = |uri: &str| {
            Notification::DiagnosticsChanged(DiagnosticsChanged {
                uri: uri.into(),
                diagnostics: vec![],
            })
        };
        assert_eq!(
            published("file:///z:/tmp/a%20b.py").for_client(wsl),
            Some(published("file:///mnt/z/tmp/a%20b.py"))
        );
        assert_eq!(published("file:///tmp/a.py").for_client(wsl), None);
        assert_eq!(Notification::ToolsListChanged.for_client(wsl), None);
    }

    #[test]
    fn params_round_trip() {
        let json = r#"{"text":"","filePath":"/a","fileUrl":"file:///a","selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":0},"isEmpty":true},"unknown":1}"#;
        let p: SelectionChanged = serde_json::from_str(json).unwrap();
        assert!(p.selection.is_empty);
        let m: AtMentioned = serde_json::from_str(r#"{"filePath":"/a","lineStart":null}"#).unwrap();
        assert_eq!(m.line_start, None);
    }
}
