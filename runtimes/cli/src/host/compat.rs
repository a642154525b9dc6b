//! The compatibility methods (`readFile`, `writeFile`, `listFiles`, ...: plain JSON-RPC methods
//! some clients call besides MCP). Those that touch files run as [`jobs`](super::jobs); those
//! that report what the editor told the host are answered at once.

use std::fs;

use claude_ide_bridge::jsonrpc::RpcError;
use claude_ide_bridge::{CallId, CompatRequest};
use serde_json::{json, Value};

use super::Host;
use crate::fsops::{write_atomic, Workspace};
use crate::ui;

/// The most paths `listFiles` returns.
const LIST_LIMIT: usize = 10_000;

impl Host {
    pub(super) fn on_compat(&mut self, call: CallId, request: CompatRequest) {
        let answer = match request {
            CompatRequest::FilesRead { path } | CompatRequest::ReadFile { path } => {
                let ws = self.ws.clone();
                return self.jobs.compat(call, move || read_file(&ws, &path));
            }
            CompatRequest::WriteFile { path, content } => {
                let ws = self.ws.clone();
                return self
                    .jobs
                    .compat(call, move || write_file(&ws, &path, &content));
            }
            CompatRequest::ListFiles { pattern } => {
                let ws = self.ws.clone();
                return self.jobs.compat(call, move || {
                    Ok(json!({"files": ws.list_files(pattern.as_deref(), LIST_LIMIT)}))
                });
            }
            CompatRequest::GetWorkspaceInfo => json!({
                "name": self.ide_name,
                "folders": self.ws.folders,
                "rootPath": self.ws.folders.first(),
            }),
            CompatRequest::GetOpenFiles => json!({ "files": self.tabs.paths() }),
            CompatRequest::GetCurrentFile => json!({
                "filePath": self.selection.as_ref().map(|s| s.file_path.clone())
            }),
            CompatRequest::WorkspaceSelection => match &self.selection {
                Some(s) => json!({
                    "success": true, "text": s.text, "filePath": s.file_path,
                    "fileUrl": s.file_url, "selection": s.selection,
                }),
                None => json!({"success": false, "message": "No selection"}),
            },
        };
        if let Err(e) = self.handle.respond_compat(call, Ok(answer)) {
            ui::say(&format!("(answer dropped: {e})"));
        }
    }
}

fn read_file(ws: &Workspace, path: &str) -> Result<Value, RpcError> {
    let real = ws.resolve_compat(path).map_err(RpcError::invalid_params)?;
    let content =
        fs::read_to_string(&real).map_err(|e| RpcError::invalid_params(format!("{path}: {e}")))?;
    Ok(json!({"path": real.to_string_lossy(), "content": content}))
}

fn write_file(ws: &Workspace, path: &str, content: &str) -> Result<Value, RpcError> {
    let real = ws.resolve_compat(path).map_err(RpcError::invalid_params)?;
    write_atomic(&real, content.as_bytes())
        .map_err(|e| RpcError::internal(format!("{path}: {e}")))?;
    ui::say(&format!("file written (writeFile): {}", real.display()));
    Ok(json!({"success": true, "path": real.to_string_lossy()}))
}
