//! The tools' answers when no editor answers them: from the workspace on disk (on a job, through
//! the files crate), and from what the stdio editor last reported (selection, open tabs,
//! diagnostics).

use claude_ide_bridge::file_uri;
use claude_ide_bridge::{CallId, ToolCall, ToolResult};
use claude_ide_bridge::{
    CheckDocumentDirtyArgs, CurrentSelection, DocumentDirty, OpenFileArgs, OpenFileResult,
    OpenFilesArgs, OpenedFiles, ReformatFileArgs, SaveDocumentArgs, SaveDocumentResult,
    SelectionUnavailable, WorkspaceFolder, WorkspaceFolders,
};
use claude_ide_bridge_files::{Error, Workspace};
use serde_json::json;

use super::Host;
use crate::ui;

impl Host {
    /// Answers a tool no editor answers: those that look at files on a job (they wait on the
    /// disk), the others at once from what the host knows.
    pub(super) fn answer_headless(&mut self, call: CallId, tool: ToolCall) {
        match DiskTool::try_from(tool) {
            Ok(disk) => {
                let at = OnDisk {
                    ws: self.ws.clone(),
                    ide_name: self.ide_name.clone(),
                    open_files: self.open_files,
                    editor: self.stdio.is_some(),
                    tab_dirty: match &disk {
                        DiskTool::Dirty(a) => self.tabs.of_path(&a.file_path).map(|t| t.is_dirty),
                        _ => None,
                    },
                };
                self.jobs.tool(call, move || at.answer(disk));
            }
            Err(other) => {
                let r = self.answer(call, &other);
                self.respond(call, r);
            }
        }
    }

    fn answer(&self, call: CallId, tool: &ToolCall) -> ToolResult {
        match tool {
            ToolCall::GetWorkspaceFolders => ToolResult::json(&WorkspaceFolders {
                success: true,
                folders: self
                    .ws
                    .folders()
                    .into_iter()
                    .map(|f| WorkspaceFolder {
                        // The last component (`C:\Users\me\app` is `app` on Windows too).
                        name: std::path::Path::new(f)
                            .file_name()
                            .map_or_else(|| f.to_string(), |n| n.to_string_lossy().into_owned()),
                        uri: file_uri(f),
                        path: f.to_string(),
                    })
                    .collect(),
                root_path: self
                    .ws
                    .folders()
                    .first()
                    .map(|f| f.to_string())
                    .unwrap_or_default(),
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
            ToolCall::GetAllOpenedFilePaths => ToolResult::text(self.tabs.paths().join("\n")),
            ToolCall::GetDiagnostics(a) => self.answer_editor_diagnostics(call, a.uri.as_deref()),
            ToolCall::ExecuteCode(_) => ToolResult::error(format!(
                "{} runs headless and has no notebook kernel: cannot execute code",
                self.ide_name
            )),
            // Never asked of a host: the engine answers both itself (`dispatch_tool` in
            // src/mcp.rs, from the diffs it holds). Answered alike here only for the match to
            // be whole.
            ToolCall::CloseTab(_) => ToolResult::tab_closed(),
            ToolCall::CloseAllDiffTabs => ToolResult::closed_diff_tabs(0),
            ToolCall::OpenDiff(a) => ToolResult::diff_rejected(a.tab_name.clone()),
            ToolCall::OpenFile(_)
            | ToolCall::OpenFiles(_)
            | ToolCall::CheckDocumentDirty(_)
            | ToolCall::SaveDocument(_)
            | ToolCall::ReformatFile(_) => ToolResult::error(format!(
                "{} answers {} from the disk, on a job",
                self.ide_name,
                tool.name().as_str()
            )),
            // A tool of a newer engine that this host was not written for: refused, by name.
            other => ToolResult::error(format!(
                "{} does not implement the tool {}",
                self.ide_name,
                other.name().as_str()
            )),
        }
    }
}

/// The tools whose answers look at the workspace on disk.
enum DiskTool {
    OpenFile(OpenFileArgs),
    OpenFiles(OpenFilesArgs),
    Dirty(CheckDocumentDirtyArgs),
    Save(SaveDocumentArgs),
    Reformat(ReformatFileArgs),
}

/// Why `path` cannot be opened for a client, as a tool error says it: not found, or the files
/// crate's reason (whose text names the path).
pub(super) fn cannot_open(path: &str, e: Error) -> String {
    match e {
        Error::NotFound { .. } => format!("File not found: {path}"),
        e => format!("Cannot open the file: {e}"),
    }
}

impl TryFrom<ToolCall> for DiskTool {
    type Error = ToolCall;

    fn try_from(tool: ToolCall) -> Result<DiskTool, ToolCall> {
        Ok(match tool {
            ToolCall::OpenFile(a) => DiskTool::OpenFile(a),
            ToolCall::OpenFiles(a) => DiskTool::OpenFiles(a),
            ToolCall::CheckDocumentDirty(a) => DiskTool::Dirty(a),
            ToolCall::SaveDocument(a) => DiskTool::Save(a),
            ToolCall::ReformatFile(a) => DiskTool::Reformat(a),
            other => return Err(other),
        })
    }
}

/// What a job answering a [`DiskTool`] needs from the host.
struct OnDisk {
    ws: Workspace,
    ide_name: String,
    open_files: bool,
    /// A stdio editor reports the open documents: a file it has no tab for is not open.
    editor: bool,
    /// `checkDocumentDirty`: the editor's tab for the file, if any (and whether it is dirty).
    tab_dirty: Option<Option<bool>>,
}

impl OnDisk {
    fn exists(&self, path: &str) -> bool {
        self.ws.regular_file(path).is_ok()
    }

    fn answer(self, tool: DiskTool) -> ToolResult {
        match tool {
            DiskTool::OpenFile(a) => {
                ui::say(&format!(
                    "claude asked to open {}{}",
                    a.file_path,
                    a.start_line
                        .map(|l| format!(" at line {}", l.saturating_add(1)))
                        .unwrap_or_default()
                ));
                // Resolved as the workspace resolves it: a relative path is taken from the first
                // folder, and the editor does not run there.
                let resolved = match self.ws.regular_file(&a.file_path) {
                    Ok(p) => p,
                    Err(e) => {
                        return ToolResult::error(cannot_open(&a.file_path, e));
                    }
                };
                let line_count = if a.wants_frontmost() {
                    0
                } else {
                    match self.ws.line_count(&a.file_path) {
                        Ok(n) => n,
                        Err(e) => return ToolResult::error(format!("Cannot open the file: {e}")),
                    }
                };
                let opened = open_in_editor(self.open_files, &[resolved]);
                if !a.wants_frontmost() {
                    return ToolResult::json(&OpenFileResult {
                        success: opened,
                        file_path: a.file_path.clone(),
                        language_id: language_id(&a.file_path).to_string(),
                        line_count,
                    });
                }
                if opened {
                    ToolResult::text(format!("Opened file: {}", a.file_path))
                } else if ui::heard() {
                    ToolResult::text(format!(
                        "{} has no editor window; the path was shown to the user in its terminal: {}",
                        self.ide_name, a.file_path
                    ))
                } else {
                    ToolResult::text(format!(
                        "{} has no editor window: {} was not opened",
                        self.ide_name, a.file_path
                    ))
                }
            }
            DiskTool::OpenFiles(a) => {
                ui::say(&format!("claude asked to open {}", a.file_paths.join(", ")));
                let (existing, resolved): (Vec<String>, Vec<String>) = a
                    .file_paths
                    .iter()
                    .filter_map(|p| Some((p.clone(), self.ws.regular_file(p).ok()?)))
                    .unzip();
                let opened = !existing.is_empty() && open_in_editor(self.open_files, &resolved);
                ToolResult::json(&OpenedFiles {
                    opened_files: if opened { existing } else { Vec::new() },
                })
            }
            DiskTool::Dirty(a) => {
                if self.tab_dirty.is_none() && (self.editor || !self.exists(&a.file_path)) {
                    return ToolResult::error(format!("Document not open: {}", a.file_path));
                }
                ToolResult::json(&DocumentDirty {
                    success: true,
                    file_path: a.file_path.clone(),
                    is_dirty: self.tab_dirty.flatten().unwrap_or(false),
                    is_untitled: false,
                })
            }
            DiskTool::Save(a) => {
                if !self.exists(&a.file_path) {
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
            DiskTool::Reformat(a) => no_formatter(&self.ws, &self.ide_name, &a.file_path),
        }
    }
}

/// The answer of `reformat_file` without a formatter for the file: not found (as VS Code's
/// extension says it), refused with why (outside the workspace, not a regular file: "not found"
/// misled for a file that is there), or not reformatted.
pub(super) fn no_formatter(ws: &Workspace, ide_name: &str, file_path: &str) -> ToolResult {
    match ws.regular_file(file_path) {
        Ok(_) => {}
        Err(Error::NotFound { .. }) => return ToolResult::file_not_found(),
        Err(e) => return ToolResult::error(format!("{e}: it was not reformatted")),
    }
    ToolResult::error(format!(
        "{ide_name} runs headless and has no formatter for this file: {file_path} was not reformatted"
    ))
}

/// What `serve --open-files` says at its start when files would not open: no editor named, or
/// one that needs a terminal, which it is started without (it exits at once, and claude was
/// told the file opened).
pub fn open_files_warning(editor: Option<&std::ffi::OsStr>) -> Option<String> {
    let Some(editor) = editor else {
        return Some(
            "warning: --open-files: neither $VISUAL nor $EDITOR is set: files claude opens \
             will not open"
                .into(),
        );
    };
    let editor = editor.to_string_lossy();
    // Its words as a shell reads a plain command (`vim -p`, `/usr/bin/nvim`): the program's name.
    let words: Vec<&str> = editor
        .split_whitespace()
        .map(|w| w.trim_matches(['"', '\'']))
        .collect();
    let program = words.first().map(|p| {
        let name = p
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(p)
            .to_ascii_lowercase();
        name.strip_suffix(".exe").unwrap_or(&name).to_owned()
    })?;
    const IN_A_TERMINAL: &[&str] = &[
        "vi", "vim", "nvim", "view", "nano", "pico", "micro", "hx", "helix", "kak", "joe", "ne",
        "mg", "ed", "jed", "mcedit",
    ];
    let emacs_in_terminal = program == "emacs" && words.contains(&"-nw");
    (IN_A_TERMINAL.contains(&program.as_str()) || emacs_in_terminal).then(|| {
        format!(
            "warning: --open-files: the editor ({editor}) needs a terminal, and files open \
             without one: set VISUAL to a GUI editor (VISUAL='gvim -f', VISUAL=code)"
        )
    })
}

fn open_in_editor(open_files: bool, files: &[String]) -> bool {
    if !open_files {
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

#[cfg(test)]
mod tests {
    use super::open_files_warning;
    use std::ffi::OsStr;

    /// `--open-files` says at its start when no editor is named, or the one named needs a
    /// terminal (started without one, it exits at once); a GUI editor is fine.
    #[test]
    fn an_editor_that_cannot_open_files_without_a_terminal_is_said() {
        let said = |e: Option<&str>| open_files_warning(e.map(OsStr::new));
        assert!(said(None)
            .unwrap()
            .contains("neither $VISUAL nor $EDITOR is set"));
        for terminal in [
            "vim",
            "/usr/bin/nvim -p",
            "'nano'",
            "emacs -nw",
            "hx",
            "VIM.EXE",
        ] {
            let w = said(Some(terminal)).unwrap_or_else(|| panic!("{terminal}: not said"));
            assert!(w.contains("needs a terminal"), "{w}");
        }
        for gui in ["gvim -f", "code --wait", "emacs", "subl -w", "/opt/zed/zed"] {
            assert_eq!(said(Some(gui)), None, "{gui}");
        }
    }
}
