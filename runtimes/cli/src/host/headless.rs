//! The tools' answers when no editor answers them: from the workspace on disk, and from what the
//! stdio editor last reported (selection, open tabs, diagnostics).

use std::fs;

use claude_ide_bridge::paths::{file_uri, uri_to_path};
use claude_ide_bridge::tools::{
    CurrentSelection, DocumentDirty, FileDiagnostics, OpenFileResult, OpenedFiles,
    SaveDocumentResult, SelectionUnavailable, WorkspaceFolder, WorkspaceFolders,
};
use claude_ide_bridge::{ToolCall, ToolResult};
use serde_json::json;

use super::Host;
use crate::ui;

impl Host {
    pub(super) fn answer(&self, tool: &ToolCall) -> ToolResult {
        match tool {
            ToolCall::OpenFile(a) => {
                let exists = self.ws_file_exists(&a.file_path);
                ui::say(&format!(
                    "claude asked to open {}{}",
                    a.file_path,
                    a.start_line
                        .map(|l| format!(" at line {}", l + 1))
                        .unwrap_or_default()
                ));
                if !exists {
                    return ToolResult::error(format!("File not found: {}", a.file_path));
                }
                let opened = self.open_in_editor(std::slice::from_ref(&a.file_path));
                if !a.wants_frontmost() {
                    let text = fs::read_to_string(&a.file_path).unwrap_or_default();
                    return ToolResult::json(&OpenFileResult {
                        success: opened,
                        file_path: a.file_path.clone(),
                        language_id: language_id(&a.file_path).to_string(),
                        line_count: text.lines().count() as u64,
                    });
                }
                if opened {
                    ToolResult::text(format!("Opened file: {}", a.file_path))
                } else {
                    ToolResult::text(format!(
                        "{} has no editor window; the path was shown to the user in its terminal: {}",
                        self.ide_name, a.file_path
                    ))
                }
            }
            ToolCall::OpenFiles(a) => {
                ui::say(&format!("claude asked to open {}", a.file_paths.join(", ")));
                let existing: Vec<String> = a
                    .file_paths
                    .iter()
                    .filter(|p| self.ws_file_exists(p))
                    .cloned()
                    .collect();
                let opened = !existing.is_empty() && self.open_in_editor(&existing);
                ToolResult::json(&OpenedFiles {
                    opened_files: if opened { existing } else { Vec::new() },
                })
            }
            ToolCall::GetWorkspaceFolders => ToolResult::json(&WorkspaceFolders {
                success: true,
                folders: self
                    .ws
                    .folders
                    .iter()
                    .map(|f| WorkspaceFolder {
                        name: f
                            .rsplit('/')
                            .find(|s| !s.is_empty())
                            .unwrap_or(f)
                            .to_string(),
                        uri: file_uri(f),
                        path: f.clone(),
                    })
                    .collect(),
                root_path: self.ws.folders.first().cloned().unwrap_or_default(),
            }),
            ToolCall::GetOpenEditors => ToolResult::json(&json!({ "tabs": self.tabs.all() })),
            ToolCall::GetCurrentSelection | ToolCall::GetLatestSelection => match &self.selection {
                Some(s) => ToolResult::json(&CurrentSelection {
                    success: true,
                    text: s.text.clone(),
                    file_path: s.file_path.clone(),
                    file_url: s.file_url.clone(),
                    selection: s.selection,
                }),
                None => ToolResult::json(&SelectionUnavailable::new(if self.stdio.is_some() {
                    "The editor has not reported a selection yet"
                } else {
                    "No active editor: claude-ide-bridge runs headless"
                })),
            },
            ToolCall::CheckDocumentDirty(a) => {
                let tab = self.tabs.of_path(&a.file_path);
                if !self.ws_file_exists(&a.file_path) && tab.is_none() {
                    return ToolResult::error(format!("Document not open: {}", a.file_path));
                }
                let dirty = tab.and_then(|t| t.is_dirty).unwrap_or(false);
                ToolResult::json(&DocumentDirty {
                    success: true,
                    file_path: a.file_path.clone(),
                    is_dirty: dirty,
                    is_untitled: false,
                })
            }
            ToolCall::SaveDocument(a) => {
                if !self.ws_file_exists(&a.file_path) {
                    return ToolResult::error(format!("Document not open: {}", a.file_path));
                }
                ToolResult::json(&SaveDocumentResult {
                    success: true,
                    file_path: a.file_path.clone(),
                    saved: false,
                    message: format!(
                        "Nothing to save: {} has no unsaved editor buffers, the file on disk is current",
                        self.ide_name
                    ),
                })
            }
            ToolCall::GetAllOpenedFilePaths => ToolResult::text(self.tabs.paths().join("\n")),
            ToolCall::GetDiagnostics(a) => {
                let files: Vec<FileDiagnostics> = self
                    .diagnostics
                    .iter()
                    .filter(|(uri, _)| a.uri.as_deref().is_none_or(|u| same_uri(u, uri)))
                    .map(|(uri, d)| FileDiagnostics {
                        uri: uri.clone(),
                        diagnostics: d.clone(),
                    })
                    .collect();
                ToolResult::json(&files)
            }
            ToolCall::ReformatFile(a) => {
                if !self.ws_file_exists(&a.file_path) {
                    return ToolResult::file_not_found();
                }
                ToolResult::error(format!(
                    "{} runs headless and has no formatter: {} was not reformatted",
                    self.ide_name, a.file_path
                ))
            }
            ToolCall::ExecuteCode(_) => ToolResult::error(format!(
                "{} runs headless and has no notebook kernel: cannot execute code",
                self.ide_name
            )),
            ToolCall::CloseTab(_) => ToolResult::tab_closed(),
            ToolCall::CloseAllDiffTabs => ToolResult::closed_diff_tabs(0),
            ToolCall::OpenDiff(a) => ToolResult::diff_rejected(a.tab_name.clone()),
        }
    }

    fn ws_file_exists(&self, path: &str) -> bool {
        self.ws.confine(path).map(|p| p.is_file()).unwrap_or(false)
    }

    fn open_in_editor(&self, files: &[String]) -> bool {
        if !self.open_files {
            return false;
        }
        let Some(editor) = ui::editor_command() else {
            ui::say("--open-files: set $VISUAL or $EDITOR to open files");
            return false;
        };
        match ui::spawn_editor(&editor, files) {
            Ok(()) => true,
            Err(e) => {
                ui::say(&format!("could not start the editor: {e}"));
                false
            }
        }
    }
}

fn same_uri(a: &str, b: &str) -> bool {
    a == b || matches!((uri_to_path(a), uri_to_path(b)), (Some(x), Some(y)) if x == y)
}

fn language_id(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "rs" => "rust",
        "py" => "python",
        "js" | "mjs" | "cjs" => "javascript",
        "ts" => "typescript",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" => "cpp",
        "md" => "markdown",
        "json" => "json",
        "toml" => "toml",
        "sh" => "shellscript",
        "vim" => "vim",
        _ => "plaintext",
    }
}
