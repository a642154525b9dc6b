//! The host logic: what the bridge answers for every event, written once for both runtimes.
//!
//! Everything the host reacts to arrives as a [`HostInput`] on one std channel (runtime events,
//! terminal and stdio lines, signals, the child's exit) and is handled on one thread by
//! [`Host::handle`], which answers through the [`Bridge`] trait.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::mpsc::Sender;
use std::time::Instant;

use claude_ide_bridge::jsonrpc::RpcError;
use claude_ide_bridge::notify::{AtMentioned, DiagnosticsChanged, SelectionChanged};
use claude_ide_bridge::paths::{file_uri, uri_to_path};
use claude_ide_bridge::tools::{
    CurrentSelection, Diagnostic, DocumentDirty, FileDiagnostics, OpenDiffArgs, OpenFileResult,
    OpenedFiles, Position, SaveDocumentResult, Selection, SelectionUnavailable, WorkspaceFolder,
    WorkspaceFolders,
};
use claude_ide_bridge::{
    CallId, CancelReason, CompatRequest, DisconnectReason, Event, Notification, Target, ToolCall,
    ToolResult,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::fsops::{write_atomic, Workspace};
use crate::runtime::Bridge;
use crate::ui;

/// Everything the host loop reacts to.
#[derive(Debug)]
pub enum HostInput {
    /// An event from the runtime.
    Event(Event),
    /// A line typed at the `ask` prompt (`None`: the terminal closed).
    TerminalLine(Option<String>),
    /// A line from the stdio editor.
    StdioLine(String),
    /// The stdio editor closed stdin.
    StdinClosed,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal(i32),
    /// The command of `run` ended.
    ChildExited(io::Result<ExitStatus>),
}

/// What `openDiff` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffPolicy {
    /// Show the diff on the terminal and ask.
    Ask,
    /// Accept as proposed (`FILE_SAVED`; the client writes the file).
    Accept,
    /// Reject.
    Reject,
    /// Leave pending: the user decides in claude's own prompt.
    Defer,
}

/// How diffs are decided, with the stdio editor as a fifth way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// One of the headless policies.
    Policy(DiffPolicy),
    /// The stdio editor (`tool_call` / `diff_decision`).
    Editor,
}

/// What the loop does after an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// Stop the server and exit with this code.
    Exit(i32),
}

/// The JSON-lines wire log of `--wire-log`.
pub struct WireLog {
    file: File,
    start: Instant,
}

impl WireLog {
    /// Appends to `path` (created if missing).
    pub fn open(path: &PathBuf, start: Instant) -> io::Result<WireLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(WireLog { file, start })
    }

    fn line(&mut self, mut v: Value) {
        v["t_ms"] = json!(self.start.elapsed().as_millis() as u64);
        let mut text = v.to_string();
        text.push('\n');
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.flush();
    }
}

/// Lines to the stdio editor (stdout, one JSON object per line, flushed).
pub struct StdioOut;

impl StdioOut {
    /// Writes one message.
    pub fn send(&self, v: &Value) {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    }
}

struct Shown {
    call: CallId,
    args: OpenDiffArgs,
}

/// A call forwarded to the stdio editor.
struct Forwarded {
    call: CallId,
    diff: Option<OpenDiffArgs>,
}

/// The host state.
pub struct Host {
    bridge: Box<dyn Bridge>,
    ws: Workspace,
    ide_name: String,
    decider: Decider,
    open_files: bool,
    wire: Option<WireLog>,
    stdio: Option<StdioOut>,
    running_child: Option<u32>,
    // The `ask` prompt.
    queue: VecDeque<Shown>,
    shown: Option<Shown>,
    want_line: Option<Sender<()>>,
    line_requested: bool,
    // The stdio editor.
    next_id: u64,
    forwarded: HashMap<u64, Forwarded>,
    selection: Option<SelectionChanged>,
    diagnostics: BTreeMap<String, Vec<Diagnostic>>,
    tabs: Vec<Value>,
}

fn reason_str(r: &DisconnectReason) -> String {
    match r {
        DisconnectReason::Refused(s) => format!("refused_{s}"),
        DisconnectReason::HandshakeTimeout => "handshake_timeout".into(),
        DisconnectReason::Evicted => "evicted".into(),
        DisconnectReason::Closed(_) => "closed".into(),
        DisconnectReason::ProtocolError(c) => format!("protocol_error_{c}"),
        DisconnectReason::PingTimeout => "ping_timeout".into(),
        DisconnectReason::OutboundFull => "outbound_full".into(),
        DisconnectReason::TransportClosed => "transport_closed".into(),
        DisconnectReason::ClosedByHost => "closed_by_host".into(),
        DisconnectReason::ServerStopped => "server_stopped".into(),
    }
}

fn cancel_str(r: CancelReason) -> &'static str {
    match r {
        CancelReason::Cancelled => "cancelled",
        CancelReason::TabClosed => "tab_closed",
        CancelReason::AllDiffTabsClosed => "all_diff_tabs_closed",
        CancelReason::Replaced => "replaced",
        CancelReason::Disconnected => "disconnected",
        CancelReason::ServerStopped => "server_stopped",
    }
}

fn tool_arguments(tool: &ToolCall) -> Value {
    let v = match tool {
        ToolCall::OpenDiff(a) => serde_json::to_value(a),
        ToolCall::CloseTab(a) => serde_json::to_value(a),
        ToolCall::OpenFile(a) => serde_json::to_value(a),
        ToolCall::OpenFiles(a) => serde_json::to_value(a),
        ToolCall::GetDiagnostics(a) => serde_json::to_value(a),
        ToolCall::CheckDocumentDirty(a) => serde_json::to_value(a),
        ToolCall::SaveDocument(a) => serde_json::to_value(a),
        ToolCall::ReformatFile(a) => serde_json::to_value(a),
        ToolCall::ExecuteCode(a) => serde_json::to_value(a),
        _ => Ok(json!({})),
    };
    v.unwrap_or_else(|_| json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SelectionMsg {
    file_path: String,
    #[serde(default)]
    text: String,
    selection: RangeMsg,
}

#[derive(Deserialize)]
struct RangeMsg {
    start: Position,
    end: Position,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MentionMsg {
    file_path: String,
    #[serde(default)]
    line_start: Option<u32>,
    #[serde(default)]
    line_end: Option<u32>,
}

#[derive(Deserialize)]
struct DiagnosticsMsg {
    uri: String,
    diagnostics: Vec<Diagnostic>,
}

#[derive(Deserialize)]
struct RespondMsg {
    id: u64,
    #[serde(default)]
    result: Option<ToolResult>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct DecisionMsg {
    id: u64,
    decision: String,
    #[serde(default)]
    contents: Option<String>,
}

/// How the host is set up.
pub struct HostConfig {
    /// The workspace.
    pub workspace: Workspace,
    /// `ideName`.
    pub ide_name: String,
    /// Who decides diffs.
    pub decider: Decider,
    /// `--open-files`.
    pub open_files: bool,
    /// `--wire-log`.
    pub wire: Option<WireLog>,
    /// `--stdio`.
    pub stdio: bool,
    /// Asks the terminal reader for one line (the `ask` prompt).
    pub want_line: Option<Sender<()>>,
}

impl Host {
    /// A host answering through `bridge`.
    pub fn new(bridge: Box<dyn Bridge>, cfg: HostConfig) -> Host {
        Host {
            bridge,
            ws: cfg.workspace,
            ide_name: cfg.ide_name,
            decider: cfg.decider,
            open_files: cfg.open_files,
            wire: cfg.wire,
            stdio: cfg.stdio.then_some(StdioOut),
            running_child: None,
            queue: VecDeque::new(),
            shown: None,
            want_line: cfg.want_line,
            line_requested: false,
            next_id: 1,
            forwarded: HashMap::new(),
            selection: None,
            diagnostics: BTreeMap::new(),
            tabs: Vec::new(),
        }
    }

    /// In `run` mode: the child's pid, told SIGTERM when the bridge gets SIGTERM or SIGHUP.
    pub fn set_child(&mut self, pid: u32) {
        self.running_child = Some(pid);
    }

    /// Sends the first stdio line.
    pub fn ready(&self, port: u16, lock_file: Option<&std::path::Path>) {
        self.to_editor(json!({
            "type": "ready",
            "port": port,
            "lockFile": lock_file.map(|p| p.to_string_lossy().into_owned()),
        }));
    }

    fn to_editor(&self, v: Value) {
        if let Some(out) = &self.stdio {
            out.send(&v);
        }
    }

    fn respond(&self, call: CallId, result: ToolResult) {
        if let Err(e) = self.bridge.respond(call, result) {
            ui::say(&format!("(answer dropped: {e})"));
        }
    }

    /// Handles one input.
    pub fn handle(&mut self, input: HostInput) -> Flow {
        match input {
            HostInput::Event(e) => self.on_event(e),
            HostInput::TerminalLine(line) => self.on_terminal_line(line),
            HostInput::StdioLine(line) => self.on_stdio_line(&line),
            HostInput::StdinClosed => {
                ui::say("stdin closed: stopping");
                return Flow::Exit(0);
            }
            HostInput::Signal(sig) => return self.on_signal(sig),
            HostInput::ChildExited(status) => {
                return Flow::Exit(match status {
                    Ok(s) => exit_code(s),
                    Err(e) => {
                        ui::say(&format!("waiting for the command failed: {e}"));
                        1
                    }
                })
            }
        }
        Flow::Continue
    }

    fn on_signal(&mut self, sig: i32) -> Flow {
        use signal_hook::consts::SIGINT;
        match self.running_child {
            // In `run`, the terminal's Ctrl-C belongs to claude (it got the SIGINT too).
            Some(_) if sig == SIGINT => Flow::Continue,
            Some(pid) => {
                if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
                }
                Flow::Continue
            }
            None => {
                ui::say(&format!("signal {sig}: stopping"));
                Flow::Exit(0)
            }
        }
    }

    fn on_event(&mut self, e: Event) {
        match e {
            Event::Message {
                conn,
                incoming,
                text,
            } => {
                if let Some(w) = &mut self.wire {
                    let msg = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
                    w.line(
                        json!({"conn": conn.0, "dir": if incoming {"in"} else {"out"}, "msg": msg}),
                    );
                }
            }
            Event::Connected {
                conn,
                path,
                user_agent,
            } => {
                ui::say(&format!(
                    "client connected ({conn}, {})",
                    user_agent.as_deref().unwrap_or("no user agent")
                ));
                if let Some(w) = &mut self.wire {
                    w.line(json!({"conn": conn.0, "event": "connected", "path": path, "userAgent": user_agent}));
                }
                self.to_editor(json!({"type": "connected", "conn": conn.0}));
            }
            Event::Initialized {
                conn,
                protocol_version,
                client_name,
                client_version,
            } => {
                if let Some(w) = &mut self.wire {
                    w.line(json!({"conn": conn.0, "event": "initialized", "protocolVersion": protocol_version,
                        "clientName": client_name, "clientVersion": client_version}));
                }
                self.to_editor(json!({"type": "initialized", "conn": conn.0, "protocolVersion": protocol_version}));
            }
            Event::IdeConnected { conn, pid } => {
                if let Some(w) = &mut self.wire {
                    w.line(json!({"conn": conn.0, "event": "ide_connected", "pid": pid}));
                }
            }
            Event::Disconnected { conn, reason } => {
                let r = reason_str(&reason);
                if !matches!(reason, DisconnectReason::Refused(_)) {
                    ui::say(&format!("client disconnected ({conn}, {r})"));
                } else {
                    ui::say(&format!("connection {conn} refused ({r})"));
                }
                if let Some(w) = &mut self.wire {
                    w.line(json!({"conn": conn.0, "event": "disconnected", "reason": r}));
                }
                self.to_editor(json!({"type": "disconnected", "conn": conn.0, "reason": r}));
            }
            Event::TabClosed { conn, tab_name } => {
                if let Some(w) = &mut self.wire {
                    w.line(json!({"conn": conn.0, "event": "tab_closed", "tabName": tab_name}));
                }
                self.to_editor(json!({"type": "tab_closed", "tabName": tab_name}));
            }
            Event::CallCancelled { call, reason } => self.on_cancelled(call, reason),
            Event::ToolCall { call, tool } => self.on_tool(call, tool),
            Event::CompatRequest { call, request } => {
                let result = self.compat(request);
                if let Err(e) = self.bridge.respond_compat(call, result) {
                    ui::say(&format!("(answer dropped: {e})"));
                }
            }
        }
    }

    fn on_cancelled(&mut self, call: CallId, reason: CancelReason) {
        let why = cancel_str(reason);
        if self.shown.as_ref().is_some_and(|s| s.call == call) {
            let s = self.shown.take().expect("shown");
            anstream::eprintln!();
            ui::say(&format!("diff withdrawn ({why}): {}", s.args.new_file_path));
            self.show_next();
        } else if let Some(i) = self.queue.iter().position(|s| s.call == call) {
            let s = self.queue.remove(i).expect("queued");
            ui::say(&format!("diff withdrawn ({why}): {}", s.args.new_file_path));
        }
        let ids: Vec<u64> = self
            .forwarded
            .iter()
            .filter(|(_, f)| f.call == call)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.forwarded.remove(&id);
            self.to_editor(json!({"type": "cancelled", "id": id, "reason": why}));
        }
    }

    fn forward(&mut self, call: CallId, tool: &ToolCall) {
        let id = self.next_id;
        self.next_id += 1;
        let diff = match tool {
            ToolCall::OpenDiff(a) => Some(a.clone()),
            _ => None,
        };
        self.forwarded.insert(id, Forwarded { call, diff });
        self.to_editor(json!({
            "type": "tool_call",
            "id": id,
            "conn": call.conn.0,
            "name": tool.name().as_str(),
            "arguments": tool_arguments(tool),
        }));
    }

    fn on_tool(&mut self, call: CallId, tool: ToolCall) {
        let stdio = self.stdio.is_some();
        match tool {
            ToolCall::OpenDiff(args) => self.on_diff(call, args),
            ToolCall::OpenFile(_)
            | ToolCall::OpenFiles(_)
            | ToolCall::SaveDocument(_)
            | ToolCall::ReformatFile(_)
            | ToolCall::ExecuteCode(_)
                if stdio =>
            {
                self.forward(call, &tool)
            }
            other => {
                let r = self.answer(&other);
                self.respond(call, r);
            }
        }
    }

    fn answer(&self, tool: &ToolCall) -> ToolResult {
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
            ToolCall::GetOpenEditors => ToolResult::json(&json!({ "tabs": self.tabs })),
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
                if !self.ws_file_exists(&a.file_path) && self.tab_of(&a.file_path).is_none() {
                    return ToolResult::error(format!("Document not open: {}", a.file_path));
                }
                let dirty = self
                    .tab_of(&a.file_path)
                    .and_then(|t| t.get("isDirty").and_then(Value::as_bool))
                    .unwrap_or(false);
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
            ToolCall::GetAllOpenedFilePaths => ToolResult::text(
                self.tabs
                    .iter()
                    .filter_map(|t| t.get("uri").and_then(Value::as_str))
                    .filter_map(uri_to_path)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
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

    fn tab_of(&self, path: &str) -> Option<&Value> {
        self.tabs.iter().find(|t| {
            t.get("uri")
                .and_then(Value::as_str)
                .and_then(uri_to_path)
                .is_some_and(|p| p == path)
        })
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

    // ---- openDiff ----

    fn on_diff(&mut self, call: CallId, args: OpenDiffArgs) {
        let path = args.new_file_path.clone();
        if self.decider == Decider::Policy(DiffPolicy::Defer) {
            ui::say(&format!("diff pending (decide in claude): {path}"));
            return;
        }
        if let Err(why) = self.ws.confine(&path) {
            ui::say(&format!("diff refused (outside the workspace): {path}"));
            self.respond(
                call,
                ToolResult::error(format!("Refused: {why}; the file was left untouched")),
            );
            return;
        }
        match self.decider {
            Decider::Policy(DiffPolicy::Accept) => {
                let contents = args.new_file_contents.clone();
                self.accept(call, &args, contents);
            }
            Decider::Policy(DiffPolicy::Reject) => self.reject(call, &args),
            Decider::Policy(DiffPolicy::Ask) => {
                self.queue.push_back(Shown { call, args });
                if self.shown.is_none() {
                    self.show_next();
                } else {
                    ui::say(&format!(
                        "diff queued: {path} ({} waiting)",
                        self.queue.len()
                    ));
                }
            }
            Decider::Policy(DiffPolicy::Defer) => {}
            Decider::Editor => self.forward(call, &ToolCall::OpenDiff(args)),
        }
    }

    /// Accepts a diff: answers `FILE_SAVED` with the final contents, which the client then writes itself
    /// (docs/protocol.md, "openDiff"). The bridge does not write the file: the real client applies its edit to the
    /// file as it finds it, and a file already rewritten by the bridge makes that edit fail ("String not found in
    /// file"). A path outside the workspace folders (including through a symlink) is refused with a tool error
    /// instead, and nothing is accepted.
    fn accept(&mut self, call: CallId, args: &OpenDiffArgs, contents: String) {
        let path = &args.new_file_path;
        match self.ws.confine(path) {
            Ok(_) => {
                ui::say(&format!("diff accepted: {path}"));
                self.respond(call, ToolResult::file_saved(contents));
            }
            Err(why) => {
                ui::say(&format!(
                    "diff refused (outside the workspace): {path}: {why}"
                ));
                self.respond(
                    call,
                    ToolResult::error(format!("Refused to accept a change to {path}: {why}")),
                );
            }
        }
    }

    fn reject(&mut self, call: CallId, args: &OpenDiffArgs) {
        ui::say(&format!("diff rejected: {}", args.new_file_path));
        self.respond(call, ToolResult::diff_rejected(args.tab_name.clone()));
    }

    fn show_next(&mut self) {
        let Some(next) = self.queue.pop_front() else {
            return;
        };
        let path = next.args.new_file_path.clone();
        let old = self
            .ws
            .confine(&next.args.old_file_path)
            .ok()
            .and_then(|p| fs::read_to_string(p).ok());
        anstream::eprintln!();
        ui::say_bold(&format!("claude proposes a change: {path}"));
        ui::show_diff(&path, old.as_deref(), &next.args.new_file_contents);
        self.shown = Some(next);
        self.ask();
    }

    fn ask(&mut self) {
        ui::prompt(self.queue.len());
        if !self.line_requested {
            if let Some(tx) = &self.want_line {
                if tx.send(()).is_ok() {
                    self.line_requested = true;
                }
            }
        }
    }

    fn on_terminal_line(&mut self, line: Option<String>) {
        self.line_requested = false;
        let Some(line) = line else {
            anstream::eprintln!();
            ui::say("the terminal closed: diffs are left for claude's own prompt from now on");
            self.decider = Decider::Policy(DiffPolicy::Defer);
            self.want_line = None;
            return;
        };
        let Some(shown) = self.shown.take() else {
            return;
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "a" | "accept" | "y" | "yes" => {
                let contents = shown.args.new_file_contents.clone();
                self.accept(shown.call, &shown.args, contents);
                self.show_next();
            }
            "r" | "reject" | "n" | "no" => {
                self.reject(shown.call, &shown.args);
                self.show_next();
            }
            "e" | "edit" => match self.edit(&shown.args) {
                Ok(contents) => {
                    self.accept(shown.call, &shown.args, contents);
                    self.show_next();
                }
                Err(why) => {
                    ui::say(&why);
                    self.shown = Some(shown);
                    self.ask();
                }
            },
            _ => {
                ui::say("type a, r or e, then Enter");
                self.shown = Some(shown);
                self.ask();
            }
        }
    }

    fn edit(&self, args: &OpenDiffArgs) -> Result<String, String> {
        let editor =
            ui::editor_command().ok_or("set $VISUAL or $EDITOR to edit a proposed change")?;
        let ext = std::path::Path::new(&args.new_file_path)
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        let mut tmp = tempfile::Builder::new()
            .prefix("claude-proposed-")
            .suffix(&ext)
            .tempfile()
            .map_err(|e| format!("could not create a temporary file: {e}"))?;
        tmp.write_all(args.new_file_contents.as_bytes())
            .and_then(|()| tmp.flush())
            .map_err(|e| format!("could not write the temporary file: {e}"))?;
        let status = ui::run_editor(&editor, tmp.path())
            .map_err(|e| format!("could not start {}: {e}", editor.to_string_lossy()))?;
        if !status.success() {
            return Err(format!(
                "the editor exited with {status}; the change was not accepted"
            ));
        }
        fs::read_to_string(tmp.path()).map_err(|e| format!("could not read the edited file: {e}"))
    }

    // ---- compatibility methods ----

    fn compat(&self, request: CompatRequest) -> Result<Value, RpcError> {
        let refuse = |why: String| RpcError::invalid_params(why);
        match request {
            CompatRequest::FilesRead { path } | CompatRequest::ReadFile { path } => {
                let real = self.ws.resolve_compat(&path).map_err(refuse)?;
                let content = fs::read_to_string(&real)
                    .map_err(|e| RpcError::invalid_params(format!("{path}: {e}")))?;
                Ok(json!({"path": real.to_string_lossy(), "content": content}))
            }
            CompatRequest::WriteFile { path, content } => {
                let real = self.ws.resolve_compat(&path).map_err(refuse)?;
                write_atomic(&real, content.as_bytes())
                    .map_err(|e| RpcError::internal(format!("{path}: {e}")))?;
                ui::say(&format!("file written (writeFile): {}", real.display()));
                Ok(json!({"success": true, "path": real.to_string_lossy()}))
            }
            CompatRequest::ListFiles { pattern } => {
                Ok(json!({"files": self.ws.list_files(pattern.as_deref(), 10_000)}))
            }
            CompatRequest::GetWorkspaceInfo => Ok(json!({
                "name": self.ide_name,
                "folders": self.ws.folders,
                "rootPath": self.ws.folders.first(),
            })),
            CompatRequest::GetOpenFiles => Ok(json!({
                "files": self.tabs.iter()
                    .filter_map(|t| t.get("uri").and_then(Value::as_str))
                    .filter_map(uri_to_path)
                    .collect::<Vec<_>>()
            })),
            CompatRequest::GetCurrentFile => Ok(json!({
                "filePath": self.selection.as_ref().map(|s| s.file_path.clone())
            })),
            CompatRequest::WorkspaceSelection => Ok(match &self.selection {
                Some(s) => json!({
                    "success": true, "text": s.text, "filePath": s.file_path,
                    "fileUrl": s.file_url, "selection": s.selection,
                }),
                None => json!({"success": false, "message": "No selection"}),
            }),
        }
    }

    // ---- the stdio editor ----

    fn editor_error(&self, message: impl Into<String>) {
        let message = message.into();
        ui::say(&format!("stdio: {message}"));
        self.to_editor(json!({"type": "error", "message": message}));
    }

    fn on_stdio_line(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return self.editor_error("expected a JSON object"),
            Err(e) => return self.editor_error(format!("malformed JSON: {e}")),
        };
        let Some(kind) = v.get("type").and_then(Value::as_str).map(str::to_owned) else {
            return self.editor_error("missing \"type\"");
        };
        let r = match kind.as_str() {
            "selection_changed" => self.stdio_selection(v),
            "at_mentioned" => serde_json::from_value::<MentionMsg>(v)
                .map_err(|e| e.to_string())
                .map(|m| {
                    self.bridge.notify(
                        Target::All,
                        &Notification::AtMentioned(AtMentioned {
                            file_path: m.file_path,
                            line_start: m.line_start,
                            line_end: m.line_end,
                        }),
                    );
                }),
            "diagnostics" => self.stdio_diagnostics(v),
            "open_editors" => match v.get("tabs") {
                Some(Value::Array(tabs))
                    if tabs
                        .iter()
                        .all(|t| t.get("uri").and_then(Value::as_str).is_some()) =>
                {
                    self.tabs = tabs.clone();
                    Ok(())
                }
                _ => Err("\"tabs\" must be an array of objects with a \"uri\"".into()),
            },
            "respond" => self.stdio_respond(v),
            "diff_decision" => self.stdio_decision(v),
            other => Err(format!("unknown message type {other:?}")),
        };
        if let Err(e) = r {
            self.editor_error(format!("{kind}: {e}"));
        }
    }

    fn stdio_selection(&mut self, v: Value) -> Result<(), String> {
        let m: SelectionMsg = serde_json::from_value(v).map_err(|e| e.to_string())?;
        if !m.file_path.starts_with('/') {
            return Err("filePath must be absolute".into());
        }
        let s = SelectionChanged {
            text: m.text,
            file_url: file_uri(&m.file_path),
            file_path: m.file_path,
            selection: Selection::new(m.selection.start, m.selection.end),
        };
        self.bridge
            .notify(Target::All, &Notification::SelectionChanged(s.clone()));
        self.selection = Some(s);
        Ok(())
    }

    fn stdio_diagnostics(&mut self, v: Value) -> Result<(), String> {
        let m: DiagnosticsMsg = serde_json::from_value(v).map_err(|e| e.to_string())?;
        let uri = if m.uri.starts_with('/') {
            file_uri(&m.uri)
        } else if uri_to_path(&m.uri).is_some() {
            m.uri
        } else {
            return Err("uri must be a file:// URI or an absolute path".into());
        };
        if m.diagnostics.is_empty() {
            self.diagnostics.remove(&uri);
        } else {
            self.diagnostics.insert(uri.clone(), m.diagnostics.clone());
        }
        self.bridge.notify(
            Target::All,
            &Notification::DiagnosticsChanged(DiagnosticsChanged {
                uri,
                diagnostics: m.diagnostics,
            }),
        );
        Ok(())
    }

    fn stdio_respond(&mut self, v: Value) -> Result<(), String> {
        let m: RespondMsg = serde_json::from_value(v).map_err(|e| e.to_string())?;
        let result = match (m.result, m.text, m.error) {
            (Some(r), None, None) => r,
            (None, Some(t), None) => ToolResult::text(t),
            (None, None, Some(e)) => ToolResult::error(e),
            _ => return Err("give exactly one of \"result\", \"text\", \"error\"".into()),
        };
        let f = self
            .forwarded
            .remove(&m.id)
            .ok_or_else(|| format!("no pending call with id {}", m.id))?;
        self.bridge
            .respond(f.call, result)
            .map_err(|e| format!("id {}: {e}", m.id))
    }

    fn stdio_decision(&mut self, v: Value) -> Result<(), String> {
        let m: DecisionMsg = serde_json::from_value(v).map_err(|e| e.to_string())?;
        if m.decision != "accept" && m.decision != "reject" {
            return Err("decision must be \"accept\" or \"reject\"".into());
        }
        let diff = match self.forwarded.get(&m.id) {
            None => return Err(format!("no pending call with id {}", m.id)),
            Some(Forwarded { diff: None, .. }) => {
                return Err(format!("id {} is not an openDiff", m.id))
            }
            Some(Forwarded { diff: Some(d), .. }) => d.clone(),
        };
        let f = self.forwarded.remove(&m.id).expect("present");
        if m.decision == "accept" {
            let contents = m.contents.unwrap_or_else(|| diff.new_file_contents.clone());
            self.accept(f.call, &diff, contents);
        } else {
            self.reject(f.call, &diff);
        }
        Ok(())
    }
}

fn same_uri(a: &str, b: &str) -> bool {
    a == b || matches!((uri_to_path(a), uri_to_path(b)), (Some(x), Some(y)) if x == y)
}

/// The exit code a shell would report: the status, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
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
