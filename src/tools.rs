//! Typed MCP tools (docs/protocol.md, "Tools") and the compatibility methods (docs/protocol.md,
//! "Compatibility methods").
//!
//! - [`ToolName`] names the fifteen tools, with their descriptions and JSON Schemas; a [`ToolSet`] is the subset a
//!   host offers, and [`write_tools_list`] writes the `tools/list` result for it.
//! - [`ToolCall::parse`] turns the `name` and `arguments` of a `tools/call` into typed arguments; unknown members
//!   are ignored, as the real client adds some.
//! - [`ToolResult`] is what a tool answers (MCP content), with constructors for the fixed answers of the protocol
//!   (`FILE_SAVED`, `TAB_CLOSED`, `DIFF_REJECTED`, ...); the result structs ([`OpenFileResult`],
//!   [`FileDiagnostics`], [`CurrentSelection`], ...) are serialised into one text item with [`ToolResult::json`].
//! - [`CompatRequest`] parses the direct JSON-RPC methods other editor plugins answer (`readFile`, `files/read`,
//!   ...).

use std::fmt;

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The tools (docs/protocol.md, "Tools").
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

/// A deserializer that only lets a JSON object through: serde's derived structs would also accept
/// a positional array, which is not a valid `arguments` value.
struct OnlyMap<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for OnlyMap<D> {
    type Error = D::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

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

    /// Deserializes the `arguments` object of a call to `tool` straight from a deserializer, in
    /// the same pass that reads the surrounding message (the server's fast path). Like
    /// [`ToolCall::parse`], only a JSON object is accepted and unknown members are ignored; `null`
    /// is not handled here (the caller treats it as `{}` through [`ToolCall::parse`]).
    pub fn deserialize_arguments<'de, D>(tool: ToolName, d: D) -> Result<ToolCall, D::Error>
    where
        D: Deserializer<'de>,
    {
        let d = OnlyMap(d);
        Ok(match tool {
            ToolName::OpenDiff => ToolCall::OpenDiff(Deserialize::deserialize(d)?),
            ToolName::CloseTab => ToolCall::CloseTab(Deserialize::deserialize(d)?),
            ToolName::OpenFile => ToolCall::OpenFile(Deserialize::deserialize(d)?),
            ToolName::OpenFiles => ToolCall::OpenFiles(Deserialize::deserialize(d)?),
            ToolName::GetDiagnostics => ToolCall::GetDiagnostics(Deserialize::deserialize(d)?),
            ToolName::CheckDocumentDirty => {
                ToolCall::CheckDocumentDirty(Deserialize::deserialize(d)?)
            }
            ToolName::SaveDocument => ToolCall::SaveDocument(Deserialize::deserialize(d)?),
            ToolName::ReformatFile => ToolCall::ReformatFile(Deserialize::deserialize(d)?),
            ToolName::ExecuteCode => ToolCall::ExecuteCode(Deserialize::deserialize(d)?),
            ToolName::CloseAllDiffTabs
            | ToolName::GetCurrentSelection
            | ToolName::GetLatestSelection
            | ToolName::GetOpenEditors
            | ToolName::GetWorkspaceFolders
            | ToolName::GetAllOpenedFilePaths => {
                NoArgs::deserialize(d)?;
                match tool {
                    ToolName::CloseAllDiffTabs => ToolCall::CloseAllDiffTabs,
                    ToolName::GetCurrentSelection => ToolCall::GetCurrentSelection,
                    ToolName::GetLatestSelection => ToolCall::GetLatestSelection,
                    ToolName::GetOpenEditors => ToolCall::GetOpenEditors,
                    ToolName::GetWorkspaceFolders => ToolCall::GetWorkspaceFolders,
                    _ => ToolCall::GetAllOpenedFilePaths,
                }
            }
        })
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

/// A compatibility method (docs/protocol.md, "Compatibility methods"), called directly as a JSON-RPC method.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    /// Parses a whole `tools/call` params object the way the server does: `name`, `arguments`, and an ignored
    /// `_meta`.
    fn call(params: &str) -> Result<ToolCall, ToolCallError> {
        #[derive(Deserialize)]
        struct Params<'a> {
            name: &'a str,
            #[serde(borrow, default)]
            arguments: Option<&'a RawValue>,
        }
        let p: Params<'_> = serde_json::from_str(params).unwrap();
        ToolCall::parse(p.name, p.arguments)
    }

    fn result_json(r: &ToolResult) -> String {
        let mut out = b"[".to_vec();
        r.write_json(&mut out);
        String::from_utf8(out[1..].to_vec()).unwrap()
    }

    const META: &str = r#""_meta":{"progressToken":7,"claudecode/toolUseId":"toolu_01ABC"}"#;

    fn expected_required(tool: ToolName) -> &'static [&'static str] {
        match tool {
            ToolName::OpenDiff => &[
                "old_file_path",
                "new_file_path",
                "new_file_contents",
                "tab_name",
            ],
            ToolName::CloseTab => &["tab_name"],
            ToolName::OpenFile => &["filePath"],
            ToolName::OpenFiles => &["file_paths"],
            ToolName::CheckDocumentDirty | ToolName::SaveDocument => &["filePath"],
            ToolName::ReformatFile => &["file_path"],
            ToolName::ExecuteCode => &["code"],
            _ => &[],
        }
    }

    #[test]
    fn names_round_trip() {
        let mut seen = HashSet::new();
        for (i, tool) in ToolName::ALL.into_iter().enumerate() {
            assert_eq!(tool as usize, i, "ALL is in declaration order");
            assert_eq!(ToolName::from_name(tool.as_str()), Some(tool));
            assert_eq!(tool.to_string(), tool.as_str());
            assert!(seen.insert(tool.as_str()));
            assert!(!tool.description().is_empty());
        }
        assert_eq!(ToolName::from_name("OpenDiff"), None);
        assert_eq!(ToolName::from_name(""), None);
        assert_eq!(
            ToolName::from_name("getDiagnostics ").map(ToolName::as_str),
            None
        );
    }

    #[test]
    fn schemas_are_object_schemas_naming_required_fields() {
        for tool in ToolName::ALL {
            let schema = tool.input_schema();
            let obj = schema.as_object().unwrap();
            assert_eq!(obj["$schema"], "http://json-schema.org/draft-07/schema#");
            assert_eq!(obj["type"], "object", "{tool}");
            assert!(!obj.contains_key("additionalProperties"), "{tool}");
            let props = obj["properties"].as_object().unwrap();
            for (name, prop) in props {
                let kind = prop["type"].as_str().unwrap();
                assert!(
                    ["string", "boolean", "integer", "array"].contains(&kind),
                    "{tool}.{name}"
                );
                assert!(prop["description"].is_string(), "{tool}.{name}");
            }
            let required: Vec<&str> = obj
                .get("required")
                .map(|r| {
                    r.as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap())
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(required, expected_required(tool), "{tool}");
            for r in &required {
                assert!(props.contains_key(*r), "{tool} requires unknown {r}");
            }
        }
        let open_file = ToolName::OpenFile.input_schema();
        let keys: HashSet<&str> = open_file["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let want: HashSet<&str> = [
            "filePath",
            "preview",
            "startText",
            "endText",
            "selectToEndOfLine",
            "makeFrontmost",
            "startLine",
            "endLine",
        ]
        .into_iter()
        .collect();
        assert_eq!(keys, want);
        assert_eq!(open_file["properties"]["makeFrontmost"]["default"], true);
        assert_eq!(
            ToolName::OpenFiles.input_schema()["properties"]["file_paths"]["items"]["type"],
            "string"
        );
        assert_eq!(
            ToolName::GetDiagnostics.input_schema()["properties"]["uri"]["type"],
            "string"
        );
    }

    #[test]
    fn tool_set_operations() {
        assert_eq!(ToolSet::default(), ToolSet::none());
        assert!(ToolSet::none().is_empty());
        assert_eq!(ToolSet::all().len(), 15);
        assert_eq!(
            ToolSet::all().iter().collect::<Vec<_>>(),
            ToolName::ALL.to_vec()
        );
        let mut set = ToolSet::none();
        assert!(set.insert(ToolName::ExecuteCode));
        assert!(!set.insert(ToolName::ExecuteCode));
        assert!(set.insert(ToolName::OpenDiff));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![ToolName::OpenDiff, ToolName::ExecuteCode]
        );
        assert!(set.remove(ToolName::OpenDiff));
        assert!(!set.remove(ToolName::OpenDiff));
        assert_eq!(set.len(), 1);
        assert!(!set.contains(ToolName::OpenDiff));
        assert_eq!(
            ToolSet::all()
                .without(ToolName::OpenDiff)
                .with(ToolName::OpenDiff),
            ToolSet::all()
        );
        let collected: ToolSet = [ToolName::CloseTab, ToolName::GetDiagnostics]
            .into_iter()
            .collect();
        assert_eq!(
            collected,
            ToolSet::none()
                .with(ToolName::GetDiagnostics)
                .with(ToolName::CloseTab)
        );
    }

    #[test]
    fn tools_list_json() {
        let mut out = Vec::new();
        write_tools_list(&mut out, ToolSet::none());
        assert_eq!(out, br#"{"tools":[]}"#);

        let mut out = b"xx".to_vec();
        let set = ToolSet::none()
            .with(ToolName::ExecuteCode)
            .with(ToolName::GetDiagnostics);
        write_tools_list(&mut out, set);
        assert!(out.starts_with(br#"xx{"tools":[{"name":"getDiagnostics","description":""#));
        let v: Value = serde_json::from_slice(&out[2..]).unwrap();
        assert_eq!(
            v,
            json!({"tools": [
                {
                    "name": "getDiagnostics",
                    "description": ToolName::GetDiagnostics.description(),
                    "inputSchema": ToolName::GetDiagnostics.input_schema(),
                },
                {
                    "name": "executeCode",
                    "description": ToolName::ExecuteCode.description(),
                    "inputSchema": ToolName::ExecuteCode.input_schema(),
                },
            ]})
        );

        let mut out = Vec::new();
        write_tools_list(&mut out, ToolSet::all());
        let v: Value = serde_json::from_slice(&out).unwrap();
        let names: Vec<&str> = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ToolName::ALL.map(ToolName::as_str).to_vec());
    }

    #[test]
    fn parse_open_diff_as_the_real_client_sends_it() {
        let params = format!(
            r#"{{"name":"openDiff","arguments":{{"old_file_path":"/ws/src/main.rs","new_file_path":"/ws/src/main.rs","new_file_contents":"fn main() {{\n    println!(\"hi\");\n}}\n","tab_name":"✻ [Claude Code] main.rs (4f025d) ⧉","_meta":{{"x":1}}}},{META}}}"#
        );
        let c = call(&params).unwrap();
        assert_eq!(c.name(), ToolName::OpenDiff);
        assert_eq!(
            c,
            ToolCall::OpenDiff(OpenDiffArgs {
                old_file_path: "/ws/src/main.rs".into(),
                new_file_path: "/ws/src/main.rs".into(),
                new_file_contents: "fn main() {\n    println!(\"hi\");\n}\n".into(),
                tab_name: "✻ [Claude Code] main.rs (4f025d) ⧉".into(),
            })
        );
    }

    #[test]
    fn parse_every_tool_with_extra_members() {
        let cases: Vec<(&str, &str, ToolCall)> = vec![
            (
                "close_tab",
                r#"{"tab_name":"t","unknown":[1,2]}"#,
                ToolCall::CloseTab(CloseTabArgs {
                    tab_name: "t".into(),
                }),
            ),
            ("closeAllDiffTabs", "{}", ToolCall::CloseAllDiffTabs),
            (
                "openFile",
                r#"{"filePath":"/ws/a.rs","preview":false,"startText":"fn main","endText":"}","selectToEndOfLine":true,"makeFrontmost":false,"startLine":3,"endLine":9,"other":"x"}"#,
                ToolCall::OpenFile(OpenFileArgs {
                    file_path: "/ws/a.rs".into(),
                    preview: Some(false),
                    start_text: Some("fn main".into()),
                    end_text: Some("}".into()),
                    select_to_end_of_line: Some(true),
                    make_frontmost: Some(false),
                    start_line: Some(3),
                    end_line: Some(9),
                }),
            ),
            (
                "open_files",
                r#"{"file_paths":["/ws/a.rs","/ws/b c.rs"],"z":null}"#,
                ToolCall::OpenFiles(OpenFilesArgs {
                    file_paths: vec!["/ws/a.rs".into(), "/ws/b c.rs".into()],
                }),
            ),
            (
                "getDiagnostics",
                r#"{"uri":"file:///ws/src/main.rs","q":{}}"#,
                ToolCall::GetDiagnostics(GetDiagnosticsArgs {
                    uri: Some("file:///ws/src/main.rs".into()),
                }),
            ),
            (
                "getDiagnostics",
                "{}",
                ToolCall::GetDiagnostics(GetDiagnosticsArgs::default()),
            ),
            (
                "getDiagnostics",
                r#"{"uri":null}"#,
                ToolCall::GetDiagnostics(GetDiagnosticsArgs::default()),
            ),
            (
                "getCurrentSelection",
                r#"{"a":1}"#,
                ToolCall::GetCurrentSelection,
            ),
            ("getLatestSelection", "{}", ToolCall::GetLatestSelection),
            ("getOpenEditors", "{}", ToolCall::GetOpenEditors),
            (
                "getWorkspaceFolders",
                r#"{"x":"y"}"#,
                ToolCall::GetWorkspaceFolders,
            ),
            (
                "checkDocumentDirty",
                r#"{"filePath":"/ws/a.rs","x":1}"#,
                ToolCall::CheckDocumentDirty(CheckDocumentDirtyArgs {
                    file_path: "/ws/a.rs".into(),
                }),
            ),
            (
                "saveDocument",
                r#"{"filePath":"/ws/a.rs","x":1}"#,
                ToolCall::SaveDocument(SaveDocumentArgs {
                    file_path: "/ws/a.rs".into(),
                }),
            ),
            (
                "get_all_opened_file_paths",
                "{}",
                ToolCall::GetAllOpenedFilePaths,
            ),
            (
                "reformat_file",
                r#"{"file_path":"/ws/a.rs","x":1}"#,
                ToolCall::ReformatFile(ReformatFileArgs {
                    file_path: "/ws/a.rs".into(),
                }),
            ),
            (
                "executeCode",
                r#"{"code":"print(1 + 1)","x":1}"#,
                ToolCall::ExecuteCode(ExecuteCodeArgs {
                    code: "print(1 + 1)".into(),
                }),
            ),
        ];
        let mut covered = ToolSet::none();
        for (name, args, want) in cases {
            let params = format!(r#"{{"name":"{name}","arguments":{args},{META},"extra":true}}"#);
            let got = call(&params).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, want, "{name}");
            assert_eq!(got.name().as_str(), name);
            covered.insert(got.name());
        }
        covered.insert(ToolName::OpenDiff);
        assert_eq!(covered, ToolSet::all());
    }

    #[test]
    fn open_file_defaults() {
        let c = ToolCall::parse("openFile", Some(&raw(r#"{"filePath":"/a"}"#))).unwrap();
        let ToolCall::OpenFile(args) = c else {
            panic!()
        };
        assert!(args.wants_frontmost());
        assert_eq!(args.preview, None);
        assert_eq!(
            serde_json::to_string(&args).unwrap(),
            r#"{"filePath":"/a"}"#
        );
    }

    #[test]
    fn absent_or_null_arguments() {
        for tool in ToolName::ALL {
            let none = ToolCall::parse(tool.as_str(), None);
            let null = ToolCall::parse(tool.as_str(), Some(&raw("null")));
            let empty = ToolCall::parse(tool.as_str(), Some(&raw(" {} ")));
            assert_eq!(none, null, "{tool}");
            assert_eq!(none, empty, "{tool}");
            if expected_required(tool).is_empty() {
                assert_eq!(none.unwrap().name(), tool);
            } else {
                let Err(ToolCallError::InvalidArguments(msg)) = none else {
                    panic!("{tool}")
                };
                assert!(msg.contains("missing field"), "{msg}");
            }
        }
    }

    #[test]
    fn missing_required_fields_are_named() {
        let full: Vec<(ToolName, Value)> = vec![
            (
                ToolName::OpenDiff,
                json!({"old_file_path": "/a", "new_file_path": "/a", "new_file_contents": "x", "tab_name": "t"}),
            ),
            (ToolName::CloseTab, json!({"tab_name": "t"})),
            (ToolName::OpenFile, json!({"filePath": "/a"})),
            (ToolName::OpenFiles, json!({"file_paths": []})),
            (ToolName::CheckDocumentDirty, json!({"filePath": "/a"})),
            (ToolName::SaveDocument, json!({"filePath": "/a"})),
            (ToolName::ReformatFile, json!({"file_path": "/a"})),
            (ToolName::ExecuteCode, json!({"code": "1"})),
        ];
        for (tool, args) in full {
            assert!(
                ToolCall::parse(tool.as_str(), Some(&raw(&args.to_string()))).is_ok(),
                "{tool}"
            );
            for field in expected_required(tool) {
                let mut partial = args.clone();
                partial.as_object_mut().unwrap().remove(*field);
                let err =
                    ToolCall::parse(tool.as_str(), Some(&raw(&partial.to_string()))).unwrap_err();
                let ToolCallError::InvalidArguments(msg) = &err else {
                    panic!("{err:?}")
                };
                assert!(msg.contains(&format!("missing field `{field}`")), "{msg}");
                assert!(msg.contains(tool.as_str()), "{msg}");
                assert_eq!(err.json_rpc_code(), -32602);
            }
        }
    }

    #[test]
    fn wrong_types_are_refused() {
        let cases = [
            ("close_tab", r#"{"tab_name":5}"#, "invalid type"),
            (
                "openDiff",
                r#"{"old_file_path":"/a","new_file_path":"/a","new_file_contents":null,"tab_name":"t"}"#,
                "invalid type",
            ),
            (
                "openFile",
                r#"{"filePath":"/a","preview":"yes"}"#,
                "invalid type",
            ),
            (
                "openFile",
                r#"{"filePath":"/a","startLine":-1}"#,
                "invalid value",
            ),
            (
                "openFile",
                r#"{"filePath":"/a","startLine":1.5}"#,
                "invalid type",
            ),
            ("open_files", r#"{"file_paths":"/a"}"#, "invalid type"),
            ("open_files", r#"{"file_paths":["/a",3]}"#, "invalid type"),
            ("getDiagnostics", r#"{"uri":42}"#, "invalid type"),
            (
                "reformat_file",
                r#"{"filePath":"/a"}"#,
                "missing field `file_path`",
            ),
            (
                "checkDocumentDirty",
                r#"{"file_path":"/a"}"#,
                "missing field `filePath`",
            ),
            ("executeCode", r#"{"code":["x"]}"#, "invalid type"),
            (
                "close_tab",
                r#"{"tab_name":"a","tab_name":"b"}"#,
                "duplicate field",
            ),
        ];
        for (name, args, want) in cases {
            match ToolCall::parse(name, Some(&raw(args))) {
                Err(ToolCallError::InvalidArguments(msg)) => {
                    assert!(msg.contains(want), "{name} {args}: {msg}")
                }
                other => panic!("{name} {args}: {other:?}"),
            }
        }
    }

    #[test]
    fn non_object_arguments_are_refused() {
        for tool in [
            ToolName::CloseTab,
            ToolName::GetOpenEditors,
            ToolName::OpenDiff,
        ] {
            for args in ["[]", r#"["t"]"#, r#""t""#, "5", "true"] {
                match ToolCall::parse(tool.as_str(), Some(&raw(args))) {
                    Err(ToolCallError::InvalidArguments(msg)) => {
                        assert!(msg.contains("expected an object"), "{msg}")
                    }
                    other => panic!("{tool} {args}: {other:?}"),
                }
            }
        }
        // A positional array must not sneak in as a struct.
        let positional = r#"["/a","/a","x","t"]"#;
        assert!(ToolCall::parse("openDiff", Some(&raw(positional))).is_err());
    }

    #[test]
    fn unknown_tools() {
        assert_eq!(
            ToolCall::parse("deleteEverything", None),
            Err(ToolCallError::UnknownTool("deleteEverything".into()))
        );
        assert_eq!(
            ToolCall::parse("deleteEverything", Some(&raw("{}")))
                .unwrap_err()
                .to_string(),
            "unknown tool: deleteEverything"
        );
        let long = "x".repeat(1000);
        let shown = ToolCall::parse(&long, None).unwrap_err().to_string();
        assert_eq!(shown, format!("unknown tool: {}...", "x".repeat(64)));
        assert_eq!(
            ToolCallError::UnknownTool("a".into()).json_rpc_code(),
            -32602
        );
        assert!(matches!(
            call(r#"{"name":"getdiagnostics","arguments":{}}"#),
            Err(ToolCallError::UnknownTool(_))
        ));
    }

    #[test]
    fn result_constructors_exact_json() {
        let cases = [
            (
                ToolResult::text("hi"),
                r#"{"content":[{"type":"text","text":"hi"}]}"#,
            ),
            (
                ToolResult::texts(["a", "b"]),
                r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
            ),
            (ToolResult::texts(Vec::<String>::new()), r#"{"content":[]}"#),
            (
                ToolResult::error("disk full"),
                r#"{"content":[{"type":"text","text":"disk full"}],"isError":true}"#,
            ),
            (
                ToolResult::file_saved("line \"1\"\n"),
                r#"{"content":[{"type":"text","text":"FILE_SAVED"},{"type":"text","text":"line \"1\"\n"}]}"#,
            ),
            (
                ToolResult::tab_closed(),
                r#"{"content":[{"type":"text","text":"TAB_CLOSED"}]}"#,
            ),
            (
                ToolResult::diff_rejected("✻ [Claude Code] a.rs ⧉"),
                r#"{"content":[{"type":"text","text":"DIFF_REJECTED"},{"type":"text","text":"✻ [Claude Code] a.rs ⧉"}]}"#,
            ),
            (
                ToolResult::closed_diff_tabs(0),
                r#"{"content":[{"type":"text","text":"CLOSED_0_DIFF_TABS"}]}"#,
            ),
            (
                ToolResult::closed_diff_tabs(3),
                r#"{"content":[{"type":"text","text":"CLOSED_3_DIFF_TABS"}]}"#,
            ),
            (
                ToolResult::ok(),
                r#"{"content":[{"type":"text","text":"OK"}]}"#,
            ),
            (
                ToolResult::file_not_found(),
                r#"{"content":[{"type":"text","text":"File not found"}]}"#,
            ),
            (
                ToolResult::json(&OpenedFiles {
                    opened_files: vec!["/a".into()],
                }),
                r#"{"content":[{"type":"text","text":"{\"opened_files\":[\"/a\"]}"}]}"#,
            ),
            (
                ToolResult::text("out").with_image("iVBORw0KGgo=", "image/png"),
                r#"{"content":[{"type":"text","text":"out"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}"#,
            ),
        ];
        for (result, want) in cases {
            let got = result_json(&result);
            assert_eq!(got, want);
            let back: ToolResult = serde_json::from_str(&got).unwrap();
            assert_eq!(back, result);
        }
        assert!(!ToolResult::ok().is_error);
        assert!(ToolResult::error("x").is_error);
    }

    #[test]
    fn json_result_that_cannot_serialise_is_an_error() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(vec![1u8], 1);
        let r = ToolResult::json(&map);
        assert!(r.is_error);
    }

    #[test]
    fn content_deserialisation_errors() {
        assert!(serde_json::from_str::<Content>(r#"{"type":"audio","data":"x"}"#).is_err());
        assert!(serde_json::from_str::<Content>(r#"{"type":"text"}"#).is_err());
        assert!(serde_json::from_str::<Content>(r#"{"type":"image","data":"x"}"#).is_err());
    }

    #[test]
    fn result_structs_exact_json() {
        let s = |v: &dyn erased::Ser| v.json();
        assert_eq!(
            s(&OpenFileResult {
                success: true,
                file_path: "/ws/a.rs".into(),
                language_id: "rust".into(),
                line_count: 12,
            }),
            r#"{"success":true,"filePath":"/ws/a.rs","languageId":"rust","lineCount":12}"#
        );
        assert_eq!(
            s(&OpenedFiles {
                opened_files: vec!["/a".into(), "/b".into()]
            }),
            r#"{"opened_files":["/a","/b"]}"#
        );
        assert_eq!(
            s(&vec![FileDiagnostics {
                uri: "file:///ws/a.rs".into(),
                diagnostics: vec![Diagnostic {
                    message: "expected `;`".into(),
                    severity: Diagnostic::ERROR.into(),
                    range: Range::new(Position::new(4, 10), Position::new(4, 11)),
                    source: Some("rust-analyzer".into()),
                    code: Some(json!(1003)),
                }],
            }]),
            r#"[{"uri":"file:///ws/a.rs","diagnostics":[{"message":"expected `;`","severity":"Error","range":{"start":{"line":4,"character":10},"end":{"line":4,"character":11}},"source":"rust-analyzer","code":1003}]}]"#
        );
        assert_eq!(
            s(&CurrentSelection {
                success: true,
                text: "x".into(),
                file_path: "/ws/a.rs".into(),
                file_url: "file:///ws/a.rs".into(),
                selection: Selection::new(Position::new(0, 0), Position::new(0, 1)),
            }),
            r#"{"success":true,"text":"x","filePath":"/ws/a.rs","fileUrl":"file:///ws/a.rs","selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":1},"isEmpty":false}}"#
        );
        assert_eq!(
            s(&SelectionUnavailable::new("No active editor found")),
            r#"{"success":false,"message":"No active editor found"}"#
        );
        let mut extra = serde_json::Map::new();
        extra.insert("isPinned".into(), json!(false));
        assert_eq!(
            s(&OpenEditors {
                tabs: vec![EditorTab {
                    uri: "file:///ws/a.rs".into(),
                    is_active: true,
                    is_dirty: false,
                    label: "a.rs".into(),
                    language_id: "rust".into(),
                    line_count: 3,
                    extra,
                }],
            }),
            r#"{"tabs":[{"uri":"file:///ws/a.rs","isActive":true,"isDirty":false,"label":"a.rs","languageId":"rust","lineCount":3,"isPinned":false}]}"#
        );
        assert_eq!(
            s(&WorkspaceFolders {
                success: true,
                folders: vec![WorkspaceFolder {
                    name: "ws".into(),
                    uri: "file:///ws".into(),
                    path: "/ws".into(),
                }],
                root_path: "/ws".into(),
            }),
            r#"{"success":true,"folders":[{"name":"ws","uri":"file:///ws","path":"/ws"}],"rootPath":"/ws"}"#
        );
        assert_eq!(
            s(&DocumentDirty {
                success: true,
                file_path: "/ws/a.rs".into(),
                is_dirty: true,
                is_untitled: false,
            }),
            r#"{"success":true,"filePath":"/ws/a.rs","isDirty":true,"isUntitled":false}"#
        );
        assert_eq!(
            s(&SaveDocumentResult {
                success: true,
                file_path: "/ws/a.rs".into(),
                saved: true,
                message: "Document saved successfully".into(),
            }),
            r#"{"success":true,"filePath":"/ws/a.rs","saved":true,"message":"Document saved successfully"}"#
        );
        let tab: EditorTab = serde_json::from_str(
            r#"{"uri":"u","isActive":false,"isDirty":true,"label":"l","languageId":"x","lineCount":0,"groupIndex":1}"#,
        )
        .unwrap();
        assert_eq!(tab.extra.get("groupIndex"), Some(&json!(1)));
    }

    /// Serialises any result struct through one function in the test above.
    mod erased {
        pub trait Ser {
            fn json(&self) -> String;
        }
        impl<T: serde::Serialize> Ser for T {
            fn json(&self) -> String {
                serde_json::to_string(self).unwrap()
            }
        }
    }

    #[test]
    fn compat_requests() {
        let p = |method: &str, params: Option<&str>| {
            let raw = params.map(raw);
            CompatRequest::parse(method, raw.as_deref())
        };
        assert_eq!(
            p("files/read", Some(r#"{"path":"/vault/a.md"}"#)),
            Some(Ok(CompatRequest::FilesRead {
                path: "/vault/a.md".into()
            }))
        );
        assert_eq!(
            p("workspace/selection", None),
            Some(Ok(CompatRequest::WorkspaceSelection))
        );
        assert_eq!(
            p("readFile", Some(r#"{"path":"rel/a.txt","x":1}"#)),
            Some(Ok(CompatRequest::ReadFile {
                path: "rel/a.txt".into()
            }))
        );
        assert_eq!(
            p("writeFile", Some(r#"{"path":"a.txt","content":"new\n"}"#)),
            Some(Ok(CompatRequest::WriteFile {
                path: "a.txt".into(),
                content: "new\n".into(),
            }))
        );
        assert_eq!(
            p("listFiles", None),
            Some(Ok(CompatRequest::ListFiles { pattern: None }))
        );
        assert_eq!(
            p("listFiles", Some(r#"{"pattern":"*.js"}"#)),
            Some(Ok(CompatRequest::ListFiles {
                pattern: Some("*.js".into())
            }))
        );
        assert_eq!(
            p("getWorkspaceInfo", Some("{}")),
            Some(Ok(CompatRequest::GetWorkspaceInfo))
        );
        assert_eq!(
            p("getOpenFiles", Some("null")),
            Some(Ok(CompatRequest::GetOpenFiles))
        );
        assert_eq!(
            p("getCurrentFile", Some(r#"{"a":1}"#)),
            Some(Ok(CompatRequest::GetCurrentFile))
        );
        for method in CompatRequest::METHODS {
            let params = r#"{"path":"a","content":"b"}"#;
            let req = p(method, Some(params)).unwrap().unwrap();
            assert_eq!(req.method(), method);
        }
        assert_eq!(p("tools/call", None), None);
        assert_eq!(p("readfile", None), None);
        let err = p("readFile", None).unwrap().unwrap_err();
        assert!(err.contains("missing field `path`"), "{err}");
        let err = p("writeFile", Some(r#"{"path":"a"}"#))
            .unwrap()
            .unwrap_err();
        assert!(err.contains("missing field `content`"), "{err}");
        let err = p("readFile", Some(r#"{"path":7}"#)).unwrap().unwrap_err();
        assert!(err.contains("invalid type"), "{err}");
        let err = p("getOpenFiles", Some("[]")).unwrap().unwrap_err();
        assert!(err.contains("expected an object"), "{err}");
        let err = p("readFile", Some(r#"["a"]"#)).unwrap().unwrap_err();
        assert!(err.contains("expected an object"), "{err}");
        assert_eq!(
            CompatRequest::WriteFile {
                path: "x".into(),
                content: String::new()
            }
            .path(),
            Some("x")
        );
        assert_eq!(CompatRequest::GetCurrentFile.path(), None);
    }

    proptest::proptest! {
        #[test]
        fn typed_arguments_round_trip(
            old in ".*", new in ".*", contents in ".*", tab in ".*",
            preview in proptest::option::of(proptest::bool::ANY),
            start_text in proptest::option::of(".*"),
            start_line in proptest::option::of(0u64..1_000_000),
        ) {
            let diff = OpenDiffArgs {
                old_file_path: old,
                new_file_path: new,
                new_file_contents: contents,
                tab_name: tab.clone(),
            };
            let json = serde_json::to_string(&diff).unwrap();
            proptest::prop_assert_eq!(ToolCall::parse("openDiff", Some(&raw(&json))), Ok(ToolCall::OpenDiff(diff)));
            let open = OpenFileArgs {
                file_path: tab,
                preview,
                start_text,
                end_text: None,
                select_to_end_of_line: None,
                make_frontmost: preview,
                start_line,
                end_line: start_line,
            };
            let json = serde_json::to_string(&open).unwrap();
            proptest::prop_assert_eq!(ToolCall::parse("openFile", Some(&raw(&json))), Ok(ToolCall::OpenFile(open)));
        }

        #[test]
        fn parse_never_panics(name in "[a-zA-Z_]{0,30}", value in proptest::prelude::any::<Option<i64>>(), key in "[a-zA-Z_]{1,20}") {
            let args = json!({ key: value }).to_string();
            let _ = ToolCall::parse(&name, Some(&raw(&args)));
            for tool in ToolName::ALL {
                let _ = ToolCall::parse(tool.as_str(), Some(&raw(&args)));
            }
        }
    }
}
