//! Typed MCP tools (docs/protocol.md, "Tools") and the compatibility methods (docs/protocol.md,
//! "Compatibility methods"), by concern:
//!
//! - the catalogue (`catalogue.rs`): every tool declared once; [`ToolName`] names the tools, with their
//!   descriptions and JSON Schemas; a [`ToolSet`] is the subset a host offers, and [`write_tools_list`] writes the
//!   `tools/list` result for it.
//! - the arguments (`args.rs`): [`ToolCall::parse`] turns the `name` and `arguments` of a `tools/call` into typed
//!   arguments; unknown members are ignored, as the real client adds some.
//! - the results (`results.rs`): [`ToolResult`] is what a tool answers (MCP content), with constructors for the
//!   fixed answers of the protocol (`FILE_SAVED`, `TAB_CLOSED`, `DIFF_REJECTED`, ...); the result structs
//!   ([`OpenFileResult`], [`FileDiagnostics`], [`CurrentSelection`], ...) are serialised into one text item with
//!   [`ToolResult::json`].
//! - the compatibility requests (`compat.rs`): [`CompatRequest`] parses the direct JSON-RPC methods other editor
//!   plugins answer (`readFile`, `files/read`, ...).

mod args;
mod catalogue;
mod compat;
mod results;

#[cfg(test)]
mod tests;

pub(crate) use args::{from_object, parse_call_params, scan_call_params, CallRefused, Called};
pub use args::{
    CheckDocumentDirtyArgs, CloseTabArgs, ExecuteCodeArgs, GetDiagnosticsArgs, OpenDiffArgs,
    OpenFileArgs, OpenFilesArgs, ReformatFileArgs, SaveDocumentArgs, ToolCallError,
};
pub use catalogue::{write_tools_list, ToolCall, ToolName, ToolSet};
pub use compat::CompatRequest;
pub use results::{
    Content, CurrentSelection, Diagnostic, DocumentDirty, EditorTab, FileDiagnostics, OpenEditors,
    OpenFileResult, OpenedFiles, Position, Range, SaveDocumentResult, Selection,
    SelectionUnavailable, ToolResult, WorkspaceFolder, WorkspaceFolders,
};
