//! Typed MCP tools (PROTOCOL §7) and the compatibility methods of PROTOCOL §6.
//!
//! - [`ToolName`] names the fifteen tools, with their descriptions and JSON Schemas; a [`ToolSet`] is the subset a
//!   host offers, and [`write_tools_list`] writes the `tools/list` result for it.
//! - [`ToolCall::parse`] turns the `name` and `arguments` of a `tools/call` into typed arguments; unknown members
//!   are ignored, as the real client adds some.
//! - [`ToolResult`] is what a tool answers (MCP content), with constructors for the fixed answers of the protocol
//!   (`FILE_SAVED`, `TAB_CLOSED`, `DIFF_REJECTED`, ...); the result structs ([`OpenFileResult`],
//!   [`FileDiagnostics`], [`CurrentSelection`], ...) are serialised into one text item with [`ToolResult::json`].
//! - [`CompatRequest`] parses the direct JSON-RPC methods of seeds 000 and 002 (`readFile`, `files/read`, ...).

use std::fmt;

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The tools of PROTOCOL §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolName {
    /// `openDiff`: show a proposed change and wait for the user's decision (deferred).
    OpenDiff,
    /// `close_tab`: close a tab by name; resolves a pending diff of that name as rejected.
    CloseTab,
    /// `closeAllDiffTabs`: close the diff tabs this server opened for the client.
    CloseAllDiffTabs,
    /// `openFile`: open a file, optionally selecting text.
    OpenFile,
    /// `open_files`: open several files.
    OpenFiles,
    /// `getDiagnostics`: diagnostics of one file or of all files.
    GetDiagnostics,
    /// `getCurrentSelection`: the selection in the active editor.
    GetCurrentSelection,
    /// `getLatestSelection`: the most recent selection.
    GetLatestSelection,
    /// `getOpenEditors`: the open editor tabs.
    GetOpenEditors,
    /// `getWorkspaceFolders`: the workspace folders.
    GetWorkspaceFolders,
    /// `checkDocumentDirty`: whether a document has unsaved changes.
    CheckDocumentDirty,
    /// `saveDocument`: save a document.
    SaveDocument,
    /// `get_all_opened_file_paths`: the paths of the open files, one per line.
    GetAllOpenedFilePaths,
    /// `reformat_file`: run the formatter on a file.
    ReformatFile,
    /// `executeCode`: run code in the notebook kernel.
    ExecuteCode,
}

impl ToolName {
    /// Every tool, in the order `tools/list` shows them.
    pub const ALL: [ToolName; 15] = [
        ToolName::OpenDiff,
        ToolName::CloseTab,
        ToolName::CloseAllDiffTabs,
        ToolName::OpenFile,
        ToolName::OpenFiles,
        ToolName::GetDiagnostics,
        ToolName::GetCurrentSelection,
        ToolName::GetLatestSelection,
        ToolName::GetOpenEditors,
        ToolName::GetWorkspaceFolders,
        ToolName::CheckDocumentDirty,
        ToolName::SaveDocument,
        ToolName::GetAllOpenedFilePaths,
        ToolName::ReformatFile,
        ToolName::ExecuteCode,
    ];

    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolName::OpenDiff => "openDiff",
            ToolName::CloseTab => "close_tab",
            ToolName::CloseAllDiffTabs => "closeAllDiffTabs",
            ToolName::OpenFile => "openFile",
            ToolName::OpenFiles => "open_files",
            ToolName::GetDiagnostics => "getDiagnostics",
            ToolName::GetCurrentSelection => "getCurrentSelection",
            ToolName::GetLatestSelection => "getLatestSelection",
            ToolName::GetOpenEditors => "getOpenEditors",
            ToolName::GetWorkspaceFolders => "getWorkspaceFolders",
            ToolName::CheckDocumentDirty => "checkDocumentDirty",
            ToolName::SaveDocument => "saveDocument",
            ToolName::GetAllOpenedFilePaths => "get_all_opened_file_paths",
            ToolName::ReformatFile => "reformat_file",
            ToolName::ExecuteCode => "executeCode",
        }
    }

    /// The tool with this wire name (exact, case-sensitive).
    ///
    /// ```
    /// use claude_ide_bridge::tools::ToolName;
    /// assert_eq!(ToolName::from_name("close_tab"), Some(ToolName::CloseTab));
    /// assert_eq!(ToolName::from_name("closeTab"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The description shown in `tools/list`.
    pub const fn description(self) -> &'static str {
        match self {
            ToolName::OpenDiff => {
                "Open a diff of a proposed change to a file in the editor and wait until the user accepts or \
                 rejects it. Answers FILE_SAVED with the final contents, TAB_CLOSED, or DIFF_REJECTED."
            }
            ToolName::CloseTab => "Close an editor tab by its name, such as a diff tab opened with openDiff.",
            ToolName::CloseAllDiffTabs => "Close every diff tab that was opened for Claude Code.",
            ToolName::OpenFile => {
                "Open a file in the editor, optionally selecting the text between startText and endText or \
                 between startLine and endLine."
            }
            ToolName::OpenFiles => "Open several files in the editor.",
            ToolName::GetDiagnostics => {
                "Get language diagnostics (errors, warnings, information, hints) from the IDE: for the file with \
                 the given file:// URI, or for every file that has diagnostics when no URI is given."
            }
            ToolName::GetCurrentSelection => "Get the text selected in the active editor, with its file and range.",
            ToolName::GetLatestSelection => {
                "Get the most recent text selection, even when the editor no longer has focus."
            }
            ToolName::GetOpenEditors => "List the editor tabs that are open.",
            ToolName::GetWorkspaceFolders => "List the folders open in the workspace.",
            ToolName::CheckDocumentDirty => "Check whether a document has unsaved changes.",
            ToolName::SaveDocument => "Save a document that has unsaved changes.",
            ToolName::GetAllOpenedFilePaths => "List the absolute paths of all open files, one per line.",
            ToolName::ReformatFile => "Reformat a file with the IDE's code formatter.",
            ToolName::ExecuteCode => {
                "Execute code in the kernel of the active notebook (for example a Jupyter kernel) and return its \
                 output. Use it for quick computations on the notebook's current state; it changes that state."
            }
        }
    }

    /// The JSON Schema (draft-07) of the tool's arguments: an object schema with `properties` and, when some
    /// are required, `required`. There is no `additionalProperties: false`: unknown members are ignored.
    pub fn input_schema(self) -> Value {
        fn string(description: &str) -> Value {
            json!({"type": "string", "description": description})
        }
        fn boolean(description: &str, default: bool) -> Value {
            json!({"type": "boolean", "description": description, "default": default})
        }
        fn line(description: &str) -> Value {
            json!({"type": "integer", "minimum": 0, "description": description})
        }
        let file_path = || string("Absolute path of the file.");
        let (properties, required): (Value, &[&str]) = match self {
            ToolName::OpenDiff => (
                json!({
                    "old_file_path": string("Absolute path of the file before the change (it may not exist yet)."),
                    "new_file_path": string("Absolute path of the file after the change."),
                    "new_file_contents": string("The proposed contents of the file."),
                    "tab_name": string("Name of the diff tab; identifies the diff in close_tab."),
                }),
                &[
                    "old_file_path",
                    "new_file_path",
                    "new_file_contents",
                    "tab_name",
                ],
            ),
            ToolName::CloseTab => (
                json!({"tab_name": string("Name of the tab to close.")}),
                &["tab_name"],
            ),
            ToolName::OpenFile => (
                json!({
                    "filePath": file_path(),
                    "preview": boolean("Open in a preview tab.", false),
                    "startText": string("Text where the selection starts."),
                    "endText": string("Text where the selection ends."),
                    "selectToEndOfLine": boolean("Extend the selection to the end of the last line.", false),
                    "makeFrontmost": boolean("Bring the editor to the front; when false the answer is a JSON \
                                              summary of the file instead.", true),
                    "startLine": line("Line where the selection starts."),
                    "endLine": line("Line where the selection ends."),
                }),
                &["filePath"],
            ),
            ToolName::OpenFiles => (
                json!({
                    "file_paths": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Absolute paths of the files to open.",
                    }
                }),
                &["file_paths"],
            ),
            ToolName::GetDiagnostics => (
                json!({
                    "uri": string("file:// URI of the file; omit it for the diagnostics of all files."),
                }),
                &[],
            ),
            ToolName::CheckDocumentDirty | ToolName::SaveDocument => {
                (json!({"filePath": file_path()}), &["filePath"])
            }
            ToolName::ReformatFile => (json!({"file_path": file_path()}), &["file_path"]),
            ToolName::ExecuteCode => (json!({"code": string("The code to execute.")}), &["code"]),
            ToolName::CloseAllDiffTabs
            | ToolName::GetCurrentSelection
            | ToolName::GetLatestSelection
            | ToolName::GetOpenEditors
            | ToolName::GetWorkspaceFolders
            | ToolName::GetAllOpenedFilePaths => (json!({}), &[]),
        };
        let mut schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": properties,
        });
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of tools: the ones a host offers. [`ToolSet::default`] is empty.
///
/// ```
/// use claude_ide_bridge::tools::{ToolName, ToolSet};
/// let set = ToolSet::none().with(ToolName::OpenDiff).with(ToolName::CloseTab);
/// assert!(set.contains(ToolName::CloseTab));
/// assert_eq!(set.len(), 2);
/// assert_eq!(ToolSet::all().without(ToolName::ExecuteCode).len(), 14);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ToolSet(u32);

impl ToolSet {
    /// Every tool.
    pub const fn all() -> ToolSet {
        ToolSet((1 << ToolName::ALL.len()) - 1)
    }

    /// No tool.
    pub const fn none() -> ToolSet {
        ToolSet(0)
    }

    /// This set plus `tool`.
    pub const fn with(self, tool: ToolName) -> ToolSet {
        ToolSet(self.0 | tool.bit())
    }

    /// This set minus `tool`.
    pub const fn without(self, tool: ToolName) -> ToolSet {
        ToolSet(self.0 & !tool.bit())
    }

    /// Whether `tool` is in the set.
    pub const fn contains(self, tool: ToolName) -> bool {
        self.0 & tool.bit() != 0
    }

    /// Adds `tool`; returns whether it was absent.
    pub fn insert(&mut self, tool: ToolName) -> bool {
        let absent = !self.contains(tool);
        self.0 |= tool.bit();
        absent
    }

    /// Removes `tool`; returns whether it was present.
    pub fn remove(&mut self, tool: ToolName) -> bool {
        let present = self.contains(tool);
        self.0 &= !tool.bit();
        present
    }

    /// The tools in the set, in [`ToolName::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = ToolName> {
        ToolName::ALL.into_iter().filter(move |t| self.contains(*t))
    }

    /// How many tools are in the set.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<ToolName> for ToolSet {
    fn from_iter<I: IntoIterator<Item = ToolName>>(iter: I) -> ToolSet {
        iter.into_iter().fold(ToolSet::none(), ToolSet::with)
    }
}

/// Appends the JSON of the MCP `tools/list` result for the tools in `set`, in [`ToolName::ALL`] order:
/// `{"tools":[{"name":..,"description":..,"inputSchema":{..}},..]}`.
///
/// ```
/// use claude_ide_bridge::tools::{write_tools_list, ToolName, ToolSet};
/// let mut out = Vec::new();
/// write_tools_list(&mut out, ToolSet::none().with(ToolName::CloseTab));
/// let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
/// assert_eq!(v["tools"][0]["name"], "close_tab");
/// assert_eq!(v["tools"][0]["inputSchema"]["required"][0], "tab_name");
/// ```
pub fn write_tools_list(out: &mut Vec<u8>, set: ToolSet) {
    #[derive(Serialize)]
    struct Entry {
        name: &'static str,
        description: &'static str,
        #[serde(rename = "inputSchema")]
        input_schema: Value,
    }
    out.extend_from_slice(b"{\"tools\":[");
    for (i, tool) in set.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let entry = Entry {
            name: tool.as_str(),
            description: tool.description(),
            input_schema: tool.input_schema(),
        };
        serde_json::to_writer(&mut *out, &entry).expect("a tool entry always serialises");
    }
    out.extend_from_slice(b"]}");
}

/// Arguments of `openDiff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenDiffArgs {
    /// Path of the file before the change (may not exist: a new file).
    pub old_file_path: String,
    /// Path of the file after the change (the real client sends the same path as `old_file_path`).
    pub new_file_path: String,
    /// The proposed contents.
    pub new_file_contents: String,
    /// Name of the diff tab, for example `✻ [Claude Code] main.rs (4f025d) ⧉`.
    pub tab_name: String,
}

/// Arguments of `close_tab`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseTabArgs {
    /// Name of the tab.
    pub tab_name: String,
}

/// Arguments of `openFile` (wire names in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenFileArgs {
    /// Path of the file (`filePath`).
    pub file_path: String,
    /// Open in a preview tab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<bool>,
    /// Text where the selection starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_text: Option<String>,
    /// Text where the selection ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_text: Option<String>,
    /// Extend the selection to the end of its last line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_to_end_of_line: Option<bool>,
    /// Bring the editor to the front (default true); when false the answer is an [`OpenFileResult`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub make_frontmost: Option<bool>,
    /// Line where the selection starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Line where the selection ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
}

impl OpenFileArgs {
    /// `makeFrontmost` with its default applied (true).
    pub fn wants_frontmost(&self) -> bool {
        self.make_frontmost.unwrap_or(true)
    }
}

/// Arguments of `open_files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFilesArgs {
    /// Paths of the files (`file_paths`).
    pub file_paths: Vec<String>,
}

/// Arguments of `getDiagnostics`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GetDiagnosticsArgs {
    /// `file://` URI of one file; `None` asks for every file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// Arguments of `checkDocumentDirty`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckDocumentDirtyArgs {
    /// Path of the document (`filePath`).
    pub file_path: String,
}

/// Arguments of `saveDocument`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaveDocumentArgs {
    /// Path of the document (`filePath`).
    pub file_path: String,
}

/// Arguments of `reformat_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReformatFileArgs {
    /// Path of the file (`file_path`).
    pub file_path: String,
}

/// Arguments of `executeCode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecuteCodeArgs {
    /// The code to run.
    pub code: String,
}

/// Arguments of a tool that takes none: any object is accepted, its members ignored.
#[derive(Deserialize)]
struct NoArgs {}

/// A parsed `tools/call`: the tool and its typed arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    /// `openDiff`.
    OpenDiff(OpenDiffArgs),
    /// `close_tab`.
    CloseTab(CloseTabArgs),
    /// `closeAllDiffTabs`.
    CloseAllDiffTabs,
    /// `openFile`.
    OpenFile(OpenFileArgs),
    /// `open_files`.
    OpenFiles(OpenFilesArgs),
    /// `getDiagnostics`.
    GetDiagnostics(GetDiagnosticsArgs),
    /// `getCurrentSelection`.
    GetCurrentSelection,
    /// `getLatestSelection`.
    GetLatestSelection,
    /// `getOpenEditors`.
    GetOpenEditors,
    /// `getWorkspaceFolders`.
    GetWorkspaceFolders,
    /// `checkDocumentDirty`.
    CheckDocumentDirty(CheckDocumentDirtyArgs),
    /// `saveDocument`.
    SaveDocument(SaveDocumentArgs),
    /// `get_all_opened_file_paths`.
    GetAllOpenedFilePaths,
    /// `reformat_file`.
    ReformatFile(ReformatFileArgs),
    /// `executeCode`.
    ExecuteCode(ExecuteCodeArgs),
}

fn parse_args<T: DeserializeOwned>(tool: ToolName, json: &str) -> Result<T, ToolCallError> {
    serde_json::from_str(json)
        .map_err(|e| ToolCallError::InvalidArguments(format!("invalid arguments for {tool}: {e}")))
}

impl ToolCall {
    /// Parses the `name` and `arguments` of a `tools/call`.
    ///
    /// `arguments` absent or JSON `null` counts as `{}`; otherwise it must be an object. Unknown members are
    /// ignored (the real client adds some); tools without arguments accept any object. Both errors map to
    /// JSON-RPC `-32602`. This does not check whether the host offers the tool: compare [`ToolCall::name`]
    /// with its [`ToolSet`].
    ///
    /// ```
    /// use claude_ide_bridge::tools::{ToolCall, ToolCallError};
    /// use serde_json::value::RawValue;
    /// let args = RawValue::from_string(r#"{"tab_name":"✻ [Claude Code] a.rs ⧉","extra":1}"#.into()).unwrap();
    /// match ToolCall::parse("close_tab", Some(&args)).unwrap() {
    ///     ToolCall::CloseTab(a) => assert_eq!(a.tab_name, "✻ [Claude Code] a.rs ⧉"),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert_eq!(ToolCall::parse("closeAllDiffTabs", None).unwrap(), ToolCall::CloseAllDiffTabs);
    /// assert!(matches!(ToolCall::parse("rm_rf", None), Err(ToolCallError::UnknownTool(_))));
    /// assert!(matches!(ToolCall::parse("close_tab", None), Err(ToolCallError::InvalidArguments(_))));
    /// ```
    pub fn parse(name: &str, arguments: Option<&RawValue>) -> Result<ToolCall, ToolCallError> {
        let tool =
            ToolName::from_name(name).ok_or_else(|| ToolCallError::UnknownTool(name.to_owned()))?;
        let json = match arguments.map(|raw| raw.get().trim()) {
            None | Some("null") => "{}",
            Some(json) => json,
        };
        if !json.starts_with('{') {
            return Err(ToolCallError::InvalidArguments(format!(
                "invalid arguments for {tool}: expected an object"
            )));
        }
        let no_args = |call: ToolCall| parse_args::<NoArgs>(tool, json).map(|_| call);
        match tool {
            ToolName::OpenDiff => parse_args(tool, json).map(ToolCall::OpenDiff),
            ToolName::CloseTab => parse_args(tool, json).map(ToolCall::CloseTab),
            ToolName::CloseAllDiffTabs => no_args(ToolCall::CloseAllDiffTabs),
            ToolName::OpenFile => parse_args(tool, json).map(ToolCall::OpenFile),
            ToolName::OpenFiles => parse_args(tool, json).map(ToolCall::OpenFiles),
            ToolName::GetDiagnostics => parse_args(tool, json).map(ToolCall::GetDiagnostics),
            ToolName::GetCurrentSelection => no_args(ToolCall::GetCurrentSelection),
            ToolName::GetLatestSelection => no_args(ToolCall::GetLatestSelection),
            ToolName::GetOpenEditors => no_args(ToolCall::GetOpenEditors),
            ToolName::GetWorkspaceFolders => no_args(ToolCall::GetWorkspaceFolders),
            ToolName::CheckDocumentDirty => {
                parse_args(tool, json).map(ToolCall::CheckDocumentDirty)
            }
            ToolName::SaveDocument => parse_args(tool, json).map(ToolCall::SaveDocument),
            ToolName::GetAllOpenedFilePaths => no_args(ToolCall::GetAllOpenedFilePaths),
            ToolName::ReformatFile => parse_args(tool, json).map(ToolCall::ReformatFile),
            ToolName::ExecuteCode => parse_args(tool, json).map(ToolCall::ExecuteCode),
        }
    }

    /// Which tool this call is for.
    pub fn name(&self) -> ToolName {
        match self {
            ToolCall::OpenDiff(_) => ToolName::OpenDiff,
            ToolCall::CloseTab(_) => ToolName::CloseTab,
            ToolCall::CloseAllDiffTabs => ToolName::CloseAllDiffTabs,
            ToolCall::OpenFile(_) => ToolName::OpenFile,
            ToolCall::OpenFiles(_) => ToolName::OpenFiles,
            ToolCall::GetDiagnostics(_) => ToolName::GetDiagnostics,
            ToolCall::GetCurrentSelection => ToolName::GetCurrentSelection,
            ToolCall::GetLatestSelection => ToolName::GetLatestSelection,
            ToolCall::GetOpenEditors => ToolName::GetOpenEditors,
            ToolCall::GetWorkspaceFolders => ToolName::GetWorkspaceFolders,
            ToolCall::CheckDocumentDirty(_) => ToolName::CheckDocumentDirty,
            ToolCall::SaveDocument(_) => ToolName::SaveDocument,
            ToolCall::GetAllOpenedFilePaths => ToolName::GetAllOpenedFilePaths,
            ToolCall::ReformatFile(_) => ToolName::ReformatFile,
            ToolCall::ExecuteCode(_) => ToolName::ExecuteCode,
        }
    }
}

/// Why a `tools/call` could not be parsed. Both cases map to JSON-RPC `-32602` (invalid params).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCallError {
    /// No tool has this name (the name as sent).
    UnknownTool(String),
    /// The arguments do not match the tool's schema; the message names the field or type problem.
    InvalidArguments(String),
}

impl ToolCallError {
    /// The JSON-RPC error code to answer with: always `-32602`.
    pub const fn json_rpc_code(&self) -> i64 {
        -32602
    }
}

/// At most this many characters of a peer's tool name are echoed in an error message.
const MAX_ECHOED_NAME: usize = 64;

impl fmt::Display for ToolCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolCallError::UnknownTool(name) => {
                let shown: String = name.chars().take(MAX_ECHOED_NAME).collect();
                let more = if shown.len() < name.len() { "..." } else { "" };
                write!(f, "unknown tool: {shown}{more}")
            }
            ToolCallError::InvalidArguments(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ToolCallError {}

/// One item of MCP tool-result content.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// use claude_ide_bridge::tools::ToolResult;
    /// let mut out = Vec::new();
    /// ToolResult::diff_rejected("t").write_json(&mut out);
    /// assert_eq!(
    ///     out,
    ///     br#"{"content":[{"type":"text","text":"DIFF_REJECTED"},{"type":"text","text":"t"}]}"#
    /// );
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, self).expect("text and image content always serialise");
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
    /// The file's `file://` URI.
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

/// A 0-based line and character.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct Position {
    /// 0-based line.
    pub line: u32,
    /// 0-based character in the line.
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

/// A compatibility method of seeds 000 and 002 (PROTOCOL §6), called directly as a JSON-RPC method.
///
/// The host answers these only when it enables them, and resolves every path with
/// [`crate::paths::resolve_in_workspace`] first (refusing with `-32602` what falls outside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompatRequest {
    /// `files/read {path}`.
    FilesRead {
        /// The path as sent.
        path: String,
    },
    /// `workspace/selection`.
    WorkspaceSelection,
    /// `readFile {path}`.
    ReadFile {
        /// The path as sent (often relative to the workspace).
        path: String,
    },
    /// `writeFile {path, content}`.
    WriteFile {
        /// The path as sent.
        path: String,
        /// The new contents.
        content: String,
    },
    /// `listFiles {pattern?}`.
    ListFiles {
        /// A glob such as `*.js`.
        pattern: Option<String>,
    },
    /// `getWorkspaceInfo`.
    GetWorkspaceInfo,
    /// `getOpenFiles`.
    GetOpenFiles,
    /// `getCurrentFile`.
    GetCurrentFile,
}

impl CompatRequest {
    /// The method names, as on the wire.
    pub const METHODS: [&'static str; 8] = [
        "files/read",
        "workspace/selection",
        "readFile",
        "writeFile",
        "listFiles",
        "getWorkspaceInfo",
        "getOpenFiles",
        "getCurrentFile",
    ];

    /// Parses a JSON-RPC request that may be a compatibility method.
    ///
    /// `None`: `method` is not one of them. `Some(Err(message))`: it is, but the params are invalid (answer
    /// `-32602` with the message). Absent or `null` params count as `{}`; params must otherwise be an object,
    /// and unknown members are ignored.
    ///
    /// ```
    /// use claude_ide_bridge::tools::CompatRequest;
    /// use serde_json::value::RawValue;
    /// let params = RawValue::from_string(r#"{"path":"notes/a.md"}"#.into()).unwrap();
    /// let req = CompatRequest::parse("readFile", Some(&params)).unwrap().unwrap();
    /// assert_eq!(req.path(), Some("notes/a.md"));
    /// assert!(CompatRequest::parse("readFile", None).unwrap().is_err());
    /// assert!(CompatRequest::parse("tools/list", None).is_none());
    /// ```
    pub fn parse(method: &str, params: Option<&RawValue>) -> Option<Result<CompatRequest, String>> {
        #[derive(Deserialize)]
        struct PathParams {
            path: String,
        }
        #[derive(Deserialize)]
        struct WriteParams {
            path: String,
            content: String,
        }
        #[derive(Deserialize)]
        struct ListParams {
            #[serde(default)]
            pattern: Option<String>,
        }
        fn params_of<T: DeserializeOwned>(method: &str, json: &str) -> Result<T, String> {
            if !json.starts_with('{') {
                return Err(format!("invalid params for {method}: expected an object"));
            }
            serde_json::from_str(json).map_err(|e| format!("invalid params for {method}: {e}"))
        }
        let json = match params.map(|raw| raw.get().trim()) {
            None | Some("null") => "{}",
            Some(json) => json,
        };
        let no_params = |req: CompatRequest| params_of::<NoArgs>(method, json).map(|_| req);
        Some(match method {
            "files/read" => params_of::<PathParams>(method, json)
                .map(|p| CompatRequest::FilesRead { path: p.path }),
            "readFile" => params_of::<PathParams>(method, json)
                .map(|p| CompatRequest::ReadFile { path: p.path }),
            "writeFile" => {
                params_of::<WriteParams>(method, json).map(|p| CompatRequest::WriteFile {
                    path: p.path,
                    content: p.content,
                })
            }
            "listFiles" => params_of::<ListParams>(method, json)
                .map(|p| CompatRequest::ListFiles { pattern: p.pattern }),
            "workspace/selection" => no_params(CompatRequest::WorkspaceSelection),
            "getWorkspaceInfo" => no_params(CompatRequest::GetWorkspaceInfo),
            "getOpenFiles" => no_params(CompatRequest::GetOpenFiles),
            "getCurrentFile" => no_params(CompatRequest::GetCurrentFile),
            _ => return None,
        })
    }

    /// The method name on the wire.
    pub const fn method(&self) -> &'static str {
        match self {
            CompatRequest::FilesRead { .. } => "files/read",
            CompatRequest::WorkspaceSelection => "workspace/selection",
            CompatRequest::ReadFile { .. } => "readFile",
            CompatRequest::WriteFile { .. } => "writeFile",
            CompatRequest::ListFiles { .. } => "listFiles",
            CompatRequest::GetWorkspaceInfo => "getWorkspaceInfo",
            CompatRequest::GetOpenFiles => "getOpenFiles",
            CompatRequest::GetCurrentFile => "getCurrentFile",
        }
    }

    /// The file path the request touches, which the host must resolve inside the workspace.
    pub fn path(&self) -> Option<&str> {
        match self {
            CompatRequest::FilesRead { path }
            | CompatRequest::ReadFile { path }
            | CompatRequest::WriteFile { path, .. } => Some(path),
            _ => None,
        }
    }
}
