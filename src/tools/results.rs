//! What tools answer: [`ToolResult`] (MCP content) with the fixed answers of the protocol, and the
//! result structs that travel as one JSON text item.

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::jsonrpc::write_json_string;

/// One item of MCP tool-result content.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Content {
    /// `{"type":"text","text":..}`
    Text(String),
    /// `{"type":"image","data":<base64>,"mimeType":..}`
    Image {
        /// The image, base64-encoded.
        data: String,
        /// Its MIME type, such as `image/png`.
        mime_type: String,
    },
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Text(text) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
                map.end()
            }
            Content::Image { data, mime_type } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("type", "image")?;
                map.serialize_entry("data", data)?;
                map.serialize_entry("mimeType", mime_type)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(rename = "type")]
            kind: String,
            text: Option<String>,
            data: Option<String>,
            #[serde(rename = "mimeType")]
            mime_type: Option<String>,
        }
        let wire = Wire::deserialize(deserializer)?;
        match wire.kind.as_str() {
            "text" => Ok(Content::Text(
                wire.text.ok_or_else(|| D::Error::missing_field("text"))?,
            )),
            "image" => Ok(Content::Image {
                data: wire.data.ok_or_else(|| D::Error::missing_field("data"))?,
                mime_type: wire
                    .mime_type
                    .ok_or_else(|| D::Error::missing_field("mimeType"))?,
            }),
            other => Err(D::Error::unknown_variant(other, &["text", "image"])),
        }
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// What a tool answers: MCP content, and whether it is an error (a failure inside the tool, not a protocol
/// error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The content items, in order.
    pub content: Vec<Content>,
    /// `isError` on the wire, written only when true.
    #[serde(rename = "isError", default, skip_serializing_if = "is_false")]
    pub is_error: bool,
}

impl ToolResult {
    /// One text item.
    pub fn text(text: impl Into<String>) -> ToolResult {
        ToolResult::texts([text.into()])
    }

    /// One text item per element, in order.
    pub fn texts<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> ToolResult {
        ToolResult {
            content: items.into_iter().map(|s| Content::Text(s.into())).collect(),
            is_error: false,
        }
    }

    /// One text item holding `value` serialised as JSON (how structured results travel). If `value` cannot be
    /// serialised (a map with non-string keys, say), the result is an error result saying so.
    pub fn json<T: Serialize>(value: &T) -> ToolResult {
        match serde_json::to_string(value) {
            Ok(json) => ToolResult::text(json),
            Err(e) => ToolResult::error(format!("could not serialise the result: {e}")),
        }
    }

    /// A failure inside the tool: one text item with the message, and `isError: true`.
    pub fn error(message: impl Into<String>) -> ToolResult {
        ToolResult {
            is_error: true,
            ..ToolResult::text(message)
        }
    }

    /// `openDiff` accepted, possibly after the user edited it: `["FILE_SAVED", <final contents>]`.
    pub fn file_saved(contents: impl Into<String>) -> ToolResult {
        ToolResult::texts(["FILE_SAVED".to_owned(), contents.into()])
    }

    /// `["TAB_CLOSED"]`: the answer of `close_tab`, and of `openDiff` accepted as proposed.
    pub fn tab_closed() -> ToolResult {
        ToolResult::text("TAB_CLOSED")
    }

    /// `openDiff` rejected: `["DIFF_REJECTED", <tab_name>]`.
    pub fn diff_rejected(tab_name: impl Into<String>) -> ToolResult {
        ToolResult::texts(["DIFF_REJECTED".to_owned(), tab_name.into()])
    }

    /// The answer of `closeAllDiffTabs`: `["CLOSED_<n>_DIFF_TABS"]`.
    pub fn closed_diff_tabs(n: usize) -> ToolResult {
        ToolResult::text(format!("CLOSED_{n}_DIFF_TABS"))
    }

    /// `["OK"]`.
    pub fn ok() -> ToolResult {
        ToolResult::text("OK")
    }

    /// `["File not found"]` (the answer of `reformat_file` for a missing file).
    pub fn file_not_found() -> ToolResult {
        ToolResult::text("File not found")
    }

    /// This result with an image item appended (for `executeCode`).
    pub fn with_image(
        mut self,
        data: impl Into<String>,
        mime_type: impl Into<String>,
    ) -> ToolResult {
        self.content.push(Content::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        });
        self
    }

    /// Appends the MCP result JSON, `{"content":[..]}` plus `"isError":true` only when set.
    ///
    /// ```
    /// use claude_ide_bridge::ToolResult;
    /// let mut out = Vec::new();
    /// ToolResult::diff_rejected("t").write_json(&mut out);
    /// assert_eq!(
    ///     out,
    ///     br#"{"content":[{"type":"text","text":"DIFF_REJECTED"},{"type":"text","text":"t"}]}"#
    /// );
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Written by hand, byte for byte what serde_json writes for it (a test compares them): this
        // is on every call's path.
        out.extend_from_slice(b"{\"content\":[");
        for (i, item) in self.content.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                Content::Text(text) => {
                    out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
                    write_json_string(out, text);
                }
                Content::Image { data, mime_type } => {
                    out.extend_from_slice(b"{\"type\":\"image\",\"data\":");
                    write_json_string(out, data);
                    out.extend_from_slice(b",\"mimeType\":");
                    write_json_string(out, mime_type);
                }
            }
            out.push(b'}');
        }
        out.push(b']');
        if self.is_error {
            out.extend_from_slice(b",\"isError\":true");
        }
        out.push(b'}');
    }
}

/// The answer of `openFile` when `makeFrontmost` is false: `{success, filePath, languageId, lineCount}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenFileResult {
    /// Whether the file was opened.
    pub success: bool,
    /// Its path.
    pub file_path: String,
    /// Its language, such as `rust`.
    pub language_id: String,
    /// Its number of lines.
    pub line_count: u64,
}

/// The answer of `open_files`: `{"opened_files": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedFiles {
    /// The paths that were opened.
    pub opened_files: Vec<String>,
}

/// Diagnostics of one file; `getDiagnostics` answers a JSON array of these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileDiagnostics {
    /// The file's `file://` URI: for a file the client asked about ([`GetDiagnosticsArgs::uri`](
    /// crate::GetDiagnosticsArgs::uri)), the very string it asked with, also in the answer to
    /// `getDiagnostics {}`. The real client asks with the path unescaped (`file:///a/my app.py`)
    /// and compares the text: a [`file_uri`](crate::file_uri) (`my%20app.py`) never matches it,
    /// and the edit's new errors never reach the model (docs/protocol.md, "Diagnostics and the
    /// model").
    pub uri: String,
    /// Its diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// What is wrong.
    pub message: String,
    /// One of [`Diagnostic::ERROR`], [`Diagnostic::WARNING`], [`Diagnostic::INFORMATION`], [`Diagnostic::HINT`].
    pub severity: String,
    /// Where (0-based).
    pub range: Range,
    /// Who reported it, such as `rustc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The diagnostic's code, a string or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
}

impl Diagnostic {
    /// Severity `"Error"`.
    pub const ERROR: &'static str = "Error";
    /// Severity `"Warning"`.
    pub const WARNING: &'static str = "Warning";
    /// Severity `"Information"`.
    pub const INFORMATION: &'static str = "Information";
    /// Severity `"Hint"`.
    pub const HINT: &'static str = "Hint";

    /// How severe, to put the worst first when not all can be kept: 0 for an error, 1 for a
    /// warning, 2 for information, 3 for a hint or a severity this crate does not know.
    ///
    /// ```
    /// use claude_ide_bridge::{Diagnostic, Position, Range};
    /// let at = Range::new(Position::new(0, 0), Position::new(0, 1));
    /// let d = |severity: &str| Diagnostic {
    ///     message: "unused".into(),
    ///     severity: severity.into(),
    ///     range: at,
    ///     source: None,
    ///     code: None,
    /// };
    /// let mut found = vec![d(Diagnostic::HINT), d(Diagnostic::ERROR), d(Diagnostic::WARNING)];
    /// found.sort_by_key(Diagnostic::severity_rank);
    /// assert_eq!(found[0].severity, Diagnostic::ERROR);
    /// assert_eq!(d("Fatal").severity_rank(), 3);
    /// ```
    pub fn severity_rank(&self) -> u8 {
        match self.severity.as_str() {
            Diagnostic::ERROR => 0,
            Diagnostic::WARNING => 1,
            Diagnostic::INFORMATION => 2,
            _ => 3,
        }
    }
}

/// A range between two positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Range {
    /// Where it starts.
    pub start: Position,
    /// Where it ends.
    pub end: Position,
}

impl Range {
    /// A range from `start` to `end`.
    pub const fn new(start: Position, end: Position) -> Range {
        Range { start, end }
    }
}

/// A 0-based line and character. The character counts UTF-16 code units, as LSP and VS Code do
/// (docs/protocol.md, "Roles and terms"): a character past U+FFFF counts 2, so `é😀b`'s `b` is at 3.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct Position {
    /// 0-based line.
    pub line: u32,
    /// 0-based character in the line, in UTF-16 code units (not bytes, not `char`s).
    pub character: u32,
}

impl Position {
    /// The position at `line`, `character`.
    pub const fn new(line: u32, character: u32) -> Position {
        Position { line, character }
    }
}

/// A selection: `{start, end, isEmpty}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    /// Where it starts.
    pub start: Position,
    /// Where it ends.
    pub end: Position,
    /// Whether nothing is selected (a cursor).
    pub is_empty: bool,
}

impl Selection {
    /// The selection from `start` to `end`, empty when they are equal.
    pub fn new(start: Position, end: Position) -> Selection {
        Selection {
            start,
            end,
            is_empty: start == end,
        }
    }
}

/// The answer of `getCurrentSelection` and `getLatestSelection`: `{success, text, filePath, fileUrl, selection}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentSelection {
    /// `true`.
    pub success: bool,
    /// The selected text.
    pub text: String,
    /// The file's path.
    pub file_path: String,
    /// The file's `file://` URI.
    pub file_url: String,
    /// The selected range.
    pub selection: Selection,
}

/// The answer when there is no selection to report: `{"success": false, "message": ..}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionUnavailable {
    /// `false`.
    pub success: bool,
    /// Why, such as `No active editor found`.
    pub message: String,
}

impl SelectionUnavailable {
    /// `{"success": false, "message": message}`.
    pub fn new(message: impl Into<String>) -> SelectionUnavailable {
        SelectionUnavailable {
            success: false,
            message: message.into(),
        }
    }
}

/// The answer of `getOpenEditors`: `{"tabs": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenEditors {
    /// The open tabs.
    pub tabs: Vec<EditorTab>,
}

/// One open editor tab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditorTab {
    /// The document's `file://` URI.
    pub uri: String,
    /// Whether it is the active tab.
    pub is_active: bool,
    /// Whether it has unsaved changes.
    pub is_dirty: bool,
    /// The tab's label.
    pub label: String,
    /// The document's language.
    pub language_id: String,
    /// Its number of lines.
    pub line_count: u64,
    /// Further members written as they are (for example `isPinned`, `isPreview`, `groupIndex`). Keys that
    /// repeat the members above would be written twice: do not use them.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// The answer of `getWorkspaceFolders`: `{success, folders, rootPath}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceFolders {
    /// `true`.
    pub success: bool,
    /// The folders.
    pub folders: Vec<WorkspaceFolder>,
    /// The first folder's path.
    pub root_path: String,
}

/// One workspace folder: `{name, uri, path}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceFolder {
    /// Its display name.
    pub name: String,
    /// Its `file://` URI.
    pub uri: String,
    /// Its absolute path.
    pub path: String,
}

/// The answer of `checkDocumentDirty`: `{success, filePath, isDirty, isUntitled}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentDirty {
    /// Whether the document was found.
    pub success: bool,
    /// Its path.
    pub file_path: String,
    /// Whether it has unsaved changes.
    pub is_dirty: bool,
    /// Whether it has never been saved.
    pub is_untitled: bool,
}

/// The answer of `saveDocument`: `{success, filePath, saved, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaveDocumentResult {
    /// Whether the document was found.
    pub success: bool,
    /// Its path.
    pub file_path: String,
    /// Whether it was saved.
    pub saved: bool,
    /// What happened.
    pub message: String,
}
