//! The catalogue: every tool declared once, in one table. From each entry the `tools!` macro below
//! generates the tool's [`ToolName`] variant and wire name, its place in [`ToolName::ALL`] (the
//! order of `tools/list`), its description and JSON Schema, its [`ToolCall`] variant and the parser
//! of its arguments. Adding a tool is one entry here (with its argument struct in `args.rs`), plus
//! whatever the host does for it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};

use super::args::{
    CheckDocumentDirtyArgs, CloseTabArgs, ExecuteCodeArgs, GetDiagnosticsArgs, NoArgs, OnlyMap,
    OpenDiffArgs, OpenFileArgs, OpenFilesArgs, ReformatFileArgs, SaveDocumentArgs, ToolCallError,
};

/// The JSON Schema of a string property.
fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// The JSON Schema of a boolean property with its default.
fn boolean(description: &str, default: bool) -> Value {
    json!({"type": "boolean", "description": description, "default": default})
}

/// The JSON Schema of a line number (0-based).
fn line(description: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "description": description})
}

/// The JSON Schema of an absolute file path.
fn file_path() -> Value {
    string("Absolute path of the file.")
}

/// The object schema (draft-07) of a tool's arguments: `properties` and, when some are required,
/// `required`. There is no `additionalProperties: false`: unknown members are ignored.
fn object_schema(properties: Map<String, Value>, required: &[&str]) -> Value {
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

/// The arguments of one [`ToolCall`] variant, read from `d` (already restricted to a JSON object).
/// A tool without an argument struct accepts any object and ignores its members.
macro_rules! parse_arguments {
    ($d:ident, $variant:ident,) => {{
        NoArgs::deserialize($d)?;
        ToolCall::$variant
    }};
    ($d:ident, $variant:ident, $args:ty) => {
        ToolCall::$variant(<$args>::deserialize($d)?)
    };
}

/// The table of tools. Each entry: the variant's doc, `Variant = "wireName"`, the argument struct
/// in parentheses when the tool takes arguments, then its description, schema properties and
/// required members.
macro_rules! tools {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $wire:literal $(($args:ty))? {
            description: $description:expr,
            properties: { $($key:literal: $schema:expr),* $(,)? },
            required: [$($required:literal),* $(,)?] $(,)?
        }
    )*) => {
        /// The tools (docs/protocol.md, "Tools").
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ToolName {
            $($(#[$doc])* $variant,)*
        }

        /// How many tools there are.
        const COUNT: usize = [$($wire),*].len();

        impl ToolName {
            /// Every tool, in the order `tools/list` shows them.
            pub const ALL: [ToolName; COUNT] = [$(ToolName::$variant),*];

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ToolName::$variant => $wire,)*
                }
            }

            /// The description shown in `tools/list`.
            pub const fn description(self) -> &'static str {
                match self {
                    $(ToolName::$variant => $description,)*
                }
            }

            /// The JSON Schema (draft-07) of the tool's arguments: an object schema with `properties` and,
            /// when some are required, `required`. There is no `additionalProperties: false`: unknown
            /// members are ignored.
            pub fn input_schema(self) -> Value {
                match self {
                    $(ToolName::$variant => {
                        #[allow(unused_mut)]
                        let mut properties = Map::new();
                        $(properties.insert($key.to_owned(), $schema);)*
                        object_schema(properties, &[$($required),*])
                    })*
                }
            }
        }

        /// A parsed `tools/call`: the tool and its typed arguments.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum ToolCall {
            $(#[doc = concat!("`", $wire, "`.")] $variant $(($args))?,)*
        }

        impl ToolCall {
            /// Which tool this call is for.
            pub fn name(&self) -> ToolName {
                match self {
                    $(ToolCall::$variant { .. } => ToolName::$variant,)*
                }
            }

            /// Deserializes the `arguments` object of a call to `tool` straight from a deserializer, with
            /// no intermediate value.
            /// Like [`ToolCall::parse`], only a JSON object is accepted and unknown members are ignored;
            /// `null` is not handled here (the caller treats it as `{}` through [`ToolCall::parse`]).
            pub fn deserialize_arguments<'de, D>(tool: ToolName, d: D) -> Result<ToolCall, D::Error>
            where
                D: Deserializer<'de>,
            {
                ToolCall::deserialize_object_arguments(tool, OnlyMap(d))
            }

            /// [`ToolCall::deserialize_arguments`] from a deserializer that reads structs only from
            /// objects itself (`OnlyMap` around any other, or the scanner of the fast path, which
            /// is then told the fields' names).
            pub(crate) fn deserialize_object_arguments<'de, D>(
                tool: ToolName,
                d: D,
            ) -> Result<ToolCall, D::Error>
            where
                D: Deserializer<'de>,
            {
                Ok(match tool {
                    $(ToolName::$variant => parse_arguments!(d, $variant, $($args)?),)*
                })
            }
        }
    };
}

tools! {
    /// `openDiff`: show a proposed change and wait for the user's decision (deferred).
    OpenDiff = "openDiff" (OpenDiffArgs) {
        description: "Open a diff of a proposed change to a file in the editor and wait until the user accepts or \
                      rejects it. Answers FILE_SAVED with the final contents, TAB_CLOSED, or DIFF_REJECTED.",
        properties: {
            "old_file_path": string("Absolute path of the file before the change (it may not exist yet)."),
            "new_file_path": string("Absolute path of the file after the change."),
            "new_file_contents": string("The proposed contents of the file."),
            "tab_name": string("Name of the diff tab; identifies the diff in close_tab."),
        },
        required: ["old_file_path", "new_file_path", "new_file_contents", "tab_name"],
    }
    /// `close_tab`: close a tab by name; resolves a pending diff of that name as rejected.
    CloseTab = "close_tab" (CloseTabArgs) {
        description: "Close an editor tab by its name, such as a diff tab opened with openDiff.",
        properties: { "tab_name": string("Name of the tab to close.") },
        required: ["tab_name"],
    }
    /// `closeAllDiffTabs`: close the diff tabs this server opened for the client.
    CloseAllDiffTabs = "closeAllDiffTabs" {
        description: "Close every diff tab that was opened for Claude Code.",
        properties: {},
        required: [],
    }
    /// `openFile`: open a file, optionally selecting text.
    OpenFile = "openFile" (OpenFileArgs) {
        description: "Open a file in the editor, optionally selecting the text between startText and endText or \
                      between startLine and endLine.",
        properties: {
            "filePath": file_path(),
            "preview": boolean("Open in a preview tab.", false),
            "startText": string("Text where the selection starts."),
            "endText": string("Text where the selection ends."),
            "selectToEndOfLine": boolean("Extend the selection to the end of the last line.", false),
            "makeFrontmost": boolean("Bring the editor to the front; when false the answer is a JSON \
                                      summary of the file instead.", true),
            "startLine": line("Line where the selection starts."),
            "endLine": line("Line where the selection ends."),
        },
        required: ["filePath"],
    }
    /// `open_files`: open several files.
    OpenFiles = "open_files" (OpenFilesArgs) {
        description: "Open several files in the editor.",
        properties: {
            "file_paths": json!({
                "type": "array",
                "items": {"type": "string"},
                "description": "Absolute paths of the files to open.",
            }),
        },
        required: ["file_paths"],
    }
    /// `getDiagnostics`: diagnostics of one file or of all files.
    GetDiagnostics = "getDiagnostics" (GetDiagnosticsArgs) {
        description: "Get language diagnostics (errors, warnings, information, hints) from the IDE: for the file \
                      with the given file:// URI, or for every file that has diagnostics when no URI is given.",
        properties: {
            "uri": string("file:// URI of the file; omit it for the diagnostics of all files."),
        },
        required: [],
    }
    /// `getCurrentSelection`: the selection in the active editor.
    GetCurrentSelection = "getCurrentSelection" {
        description: "Get the text selected in the active editor, with its file and range.",
        properties: {},
        required: [],
    }
    /// `getLatestSelection`: the most recent selection.
    GetLatestSelection = "getLatestSelection" {
        description: "Get the most recent text selection, even when the editor no longer has focus.",
        properties: {},
        required: [],
    }
    /// `getOpenEditors`: the open editor tabs.
    GetOpenEditors = "getOpenEditors" {
        description: "List the editor tabs that are open.",
        properties: {},
        required: [],
    }
    /// `getWorkspaceFolders`: the workspace folders.
    GetWorkspaceFolders = "getWorkspaceFolders" {
        description: "List the folders open in the workspace.",
        properties: {},
        required: [],
    }
    /// `checkDocumentDirty`: whether a document has unsaved changes.
    CheckDocumentDirty = "checkDocumentDirty" (CheckDocumentDirtyArgs) {
        description: "Check whether a document has unsaved changes.",
        properties: { "filePath": file_path() },
        required: ["filePath"],
    }
    /// `saveDocument`: save a document.
    SaveDocument = "saveDocument" (SaveDocumentArgs) {
        description: "Save a document that has unsaved changes.",
        properties: { "filePath": file_path() },
        required: ["filePath"],
    }
    /// `get_all_opened_file_paths`: the paths of the open files, one per line.
    GetAllOpenedFilePaths = "get_all_opened_file_paths" {
        description: "List the absolute paths of all open files, one per line.",
        properties: {},
        required: [],
    }
    /// `reformat_file`: run the formatter on a file.
    ReformatFile = "reformat_file" (ReformatFileArgs) {
        description: "Reformat a file with the IDE's code formatter.",
        properties: { "file_path": file_path() },
        required: ["file_path"],
    }
    /// `executeCode`: run code in the notebook kernel.
    ExecuteCode = "executeCode" (ExecuteCodeArgs) {
        description: "Execute code in the kernel of the active notebook (for example a Jupyter kernel) and return \
                      its output. Use it for quick computations on the notebook's current state; it changes that \
                      state.",
        properties: { "code": string("The code to execute.") },
        required: ["code"],
    }
}

impl ToolName {
    /// The tool with this wire name (exact, case-sensitive).
    ///
    /// ```
    /// use claude_ide_bridge::ToolName;
    /// assert_eq!(ToolName::from_name("close_tab"), Some(ToolName::CloseTab));
    /// assert_eq!(ToolName::from_name("closeTab"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
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
/// use claude_ide_bridge::{ToolName, ToolSet};
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

    /// This set, with `close_tab` and `closeAllDiffTabs` if it has `openDiff`: claude closes a
    /// diff it had the user decide in its terminal with them, and an `openDiff` never closed would
    /// hold one of the connection's pending calls for good. The engine answers both itself.
    pub(crate) const fn with_diff_closers(self) -> ToolSet {
        if self.contains(ToolName::OpenDiff) {
            self.with(ToolName::CloseTab)
                .with(ToolName::CloseAllDiffTabs)
        } else {
            self
        }
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

    /// The tool of the set with this wire name, or [`ToolCallError::UnknownTool`]: the one check of
    /// the tool a `tools/call` names, whichever way it was decoded (its message shows at most 64
    /// characters of a peer's name).
    pub(crate) fn resolve(self, name: &str) -> Result<ToolName, ToolCallError> {
        ToolName::from_name(name)
            .filter(|tool| self.contains(*tool))
            .ok_or_else(|| ToolCallError::UnknownTool(name.to_owned()))
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
/// use claude_ide_bridge::hooks::write_tools_list;
/// use claude_ide_bridge::{ToolName, ToolSet};
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
