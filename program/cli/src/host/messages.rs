//! The messages of the stdio line protocol (docs/stdio.md), typed in both directions: [`ToEditor`]
//! is every line the bridge writes, [`FromEditor`] every line it reads. Both are
//! `#[serde(tag = "type")]` enums, so a message's `type` and members are named in one place.
//!
//! A line from the editor is read by [`FromEditor::parse`] in two steps over its text: its `type`
//! first (every other member passed over), then the members that type uses. Nothing is built for
//! the members not used: serde's own reading of a tagged enum would first copy the whole line into
//! a tree of its values (a 48 MB line of `[0,0,...]` took about 800 MB that way).

use std::borrow::Cow;

use claude_ide_bridge::{Diagnostic, Position, ToolCall, ToolName, ToolResult};
use claude_ide_bridge::{ExecuteCodeArgs, OpenDiffArgs, OpenFileArgs, OpenFilesArgs};
use claude_ide_bridge::{ReformatFileArgs, SaveDocumentArgs};
use serde::{Deserialize, Serialize};

use super::tabs::Listed;

// ---- bridge → editor ----

/// A line the bridge writes to the editor.
#[derive(Debug, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ToEditor<'a> {
    /// The first line, once listening.
    Ready {
        port: u16,
        /// Where claude connects: `127.0.0.1`, or the `CLAUDE_CODE_IDE_HOST_OVERRIDE` it needs.
        host: &'a str,
        lock_file: Option<&'a str>,
    },
    /// A client completed the WebSocket upgrade.
    Connected { conn: u64 },
    /// It finished the MCP handshake.
    Initialized {
        conn: u64,
        protocol_version: &'a str,
    },
    /// It is gone.
    Disconnected { conn: u64, reason: &'a str },
    /// A call the editor answers (`respond`, or `diff_decision` for an `openDiff`).
    ToolCall {
        id: u64,
        conn: u64,
        name: &'static str,
        arguments: &'a EditorCall,
    },
    /// The call `id` must no longer be answered.
    Cancelled { id: u64, reason: &'a str },
    /// Claude closed a tab by name.
    TabClosed { tab_name: &'a str },
    /// The answer to a `status` line.
    Status {
        /// `None` before the `ready` line.
        port: Option<u16>,
        host: Option<&'a str>,
        lock_file: Option<&'a str>,
        /// The workspace folders, as the editor names them.
        workspace: Vec<String>,
        clients: Vec<ClientStatus<'a>>,
        pending: Vec<PendingStatus>,
    },
    /// A line from the editor was refused, or a decision could not be given.
    Error { message: &'a str },
}

/// A client in a `status` line.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientStatus<'a> {
    pub conn: u64,
    pub initialized: bool,
    pub protocol_version: Option<&'a str>,
}

/// A forwarded call still waiting, in a `status` line.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingStatus {
    pub id: u64,
    pub name: &'static str,
    /// The proposed change's file (`openDiff`), as the editor names it.
    pub file_path: Option<String>,
}

impl ToEditor<'_> {
    /// The line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("the bridge's lines are JSON");
        line.push(b'\n');
        line
    }
}

/// A call the editor answers, with the arguments it is given: only the tools that have a form
/// in the protocol (docs/stdio.md, "Which tools reach the editor"). A tool without one has no
/// variant here, so it cannot reach the editor ([`EditorCall::of`] gives it back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EditorCall {
    OpenDiff(OpenDiffArgs),
    OpenFile(OpenFileArgs),
    OpenFiles(OpenFilesArgs),
    SaveDocument(SaveDocumentArgs),
    ReformatFile(ReformatFileArgs),
    ExecuteCode(ExecuteCodeArgs),
}

impl EditorCall {
    /// The editor's form of `tool`, or `tool` back when it has none.
    pub fn of(tool: ToolCall) -> Result<EditorCall, ToolCall> {
        Ok(match tool {
            ToolCall::OpenDiff(a) => EditorCall::OpenDiff(a),
            ToolCall::OpenFile(a) => EditorCall::OpenFile(a),
            ToolCall::OpenFiles(a) => EditorCall::OpenFiles(a),
            ToolCall::SaveDocument(a) => EditorCall::SaveDocument(a),
            ToolCall::ReformatFile(a) => EditorCall::ReformatFile(a),
            ToolCall::ExecuteCode(a) => EditorCall::ExecuteCode(a),
            other => return Err(other),
        })
    }

    /// The tool's wire name (`tool_call`'s `name`).
    pub fn name(&self) -> &'static str {
        // Named without a copy of the arguments (an `openDiff` may carry megabytes).
        let tool = match self {
            EditorCall::OpenDiff(_) => ToolName::OpenDiff,
            EditorCall::OpenFile(_) => ToolName::OpenFile,
            EditorCall::OpenFiles(_) => ToolName::OpenFiles,
            EditorCall::SaveDocument(_) => ToolName::SaveDocument,
            EditorCall::ReformatFile(_) => ToolName::ReformatFile,
            EditorCall::ExecuteCode(_) => ToolName::ExecuteCode,
        };
        tool.as_str()
    }

    /// Every file path among the arguments, to be named as the editor names it.
    pub fn paths_mut(&mut self) -> Vec<&mut String> {
        match self {
            EditorCall::OpenDiff(a) => vec![&mut a.old_file_path, &mut a.new_file_path],
            EditorCall::OpenFile(a) => vec![&mut a.file_path],
            EditorCall::OpenFiles(a) => a.file_paths.iter_mut().collect(),
            EditorCall::SaveDocument(a) => vec![&mut a.file_path],
            EditorCall::ReformatFile(a) => vec![&mut a.file_path],
            EditorCall::ExecuteCode(_) => Vec::new(),
        }
    }

    /// The files the editor is asked to open, format or save, each with what it does with it,
    /// to check before the call is forwarded (`Host::check_and_forward`). None for an
    /// `openDiff`, checked as a proposed change is (`Host::on_diff`).
    pub fn files_to_check(&self) -> Vec<(String, super::stdio::FileUse)> {
        use super::stdio::FileUse::{Read, ReadIfThere, Write};
        match self {
            EditorCall::OpenDiff(_) | EditorCall::ExecuteCode(_) => Vec::new(),
            EditorCall::OpenFile(a) => vec![(a.file_path.clone(), Read)],
            EditorCall::OpenFiles(a) => (a.file_paths.iter())
                .map(|p| (p.clone(), ReadIfThere))
                .collect(),
            EditorCall::SaveDocument(a) => vec![(a.file_path.clone(), Write)],
            EditorCall::ReformatFile(a) => vec![(a.file_path.clone(), Read)],
        }
    }

    /// Leaves out the files [`EditorCall::files_to_check`] gave whose `kept` is false (only
    /// `open_files` has any to leave out).
    pub fn keep_files(&mut self, kept: &[bool]) {
        if let EditorCall::OpenFiles(a) = self {
            let mut kept = kept.iter();
            a.file_paths
                .retain(|_| kept.next().copied().unwrap_or(true));
        }
    }

    /// The proposed change, for an `openDiff`.
    pub fn diff(&self) -> Option<&OpenDiffArgs> {
        match self {
            EditorCall::OpenDiff(a) => Some(a),
            _ => None,
        }
    }
}

// ---- editor → bridge ----

/// A line the editor writes, as [`FromEditor::parse`] reads it. (Serialized only by tests, to
/// write lines the way the bridge reads them.)
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromEditor<'a> {
    SelectionChanged(SelectionMsg),
    AtMentioned(MentionMsg),
    Diagnostics(DiagnosticsMsg),
    OpenEditors(#[serde(borrow)] OpenEditorsMsg<'a>),
    Respond(RespondMsg),
    DiffDecision(DecisionMsg),
    Status,
}

/// The `type`s of [`FromEditor`], by the same names.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    SelectionChanged,
    AtMentioned,
    Diagnostics,
    OpenEditors,
    Respond,
    DiffDecision,
    Status,
}

impl Kind {
    /// The types' names, as the editor writes them.
    const NAMES: [&'static str; 7] = [
        "selection_changed",
        "at_mentioned",
        "diagnostics",
        "open_editors",
        "respond",
        "diff_decision",
        "status",
    ];
}

/// A line's `type`, and nothing else of it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
}

impl<'a> FromEditor<'a> {
    /// Reads one line (trimmed, not empty), or says what is wrong with it: the text of the
    /// `error` line that answers it.
    pub fn parse(line: &'a str) -> Result<FromEditor<'a>, String> {
        let envelope: Envelope = match serde_json::from_str(line) {
            // (A struct also reads an array, by position: not a line's shape.)
            Ok(envelope) if line.starts_with('{') => envelope,
            Ok(_) => return Err("expected a JSON object".into()),
            // An object whose `type` is not one string (`{"type":7}`, given twice).
            Err(e) if e.is_data() && line.starts_with('{') => {
                return Err(format!("\"type\" must be one string: {e}"))
            }
            Err(e) if e.is_data() => return Err("expected a JSON object".into()),
            Err(e) => return Err(format!("malformed JSON: {}", lone_surrogate(e.to_string()))),
        };
        let Some(name) = envelope.kind else {
            return Err("missing \"type\"".into());
        };
        // Named once, cut (serde's own error quotes it again, whole), with the types there are.
        let kind = Kind::deserialize(
            serde::de::value::StrDeserializer::<serde::de::value::Error>::new(&name),
        )
        .map_err(|_| {
            format!(
                "unknown message type {:?} (one of: {})",
                super::cut_to(&name, 100),
                Kind::NAMES.join(", ")
            )
        })?;
        // The members the type uses, straight from the text (`type` is passed over with the
        // other members it does not name).
        fn members<'a, T: Deserialize<'a>>(line: &'a str) -> Result<T, serde_json::Error> {
            serde_json::from_str(line)
        }
        let m = match kind {
            Kind::SelectionChanged => members(line).map(FromEditor::SelectionChanged),
            Kind::AtMentioned => members(line).map(FromEditor::AtMentioned),
            Kind::Diagnostics => members(line).map(FromEditor::Diagnostics),
            Kind::OpenEditors => members(line).map(FromEditor::OpenEditors),
            Kind::Respond => members(line).map(FromEditor::Respond),
            Kind::DiffDecision => members(line).map(FromEditor::DiffDecision),
            Kind::Status => Ok(FromEditor::Status),
        };
        // Said in the protocol's words, not Rust's: a position or an id is "a non-negative
        // integer" (as a tool's arguments say it) with its bound, not a `u32` or `u64` (a
        // number too large is refused as well as one below zero).
        m.map_err(|e| {
            let e = e.to_string();
            let e = [("u32", u64::from(u32::MAX)), ("u64", u64::MAX)]
                .iter()
                .fold(e, |e, (rust, most)| {
                    e.replace(
                        &format!("expected {rust}"),
                        &format!("expected a non-negative integer (at most {most})"),
                    )
                });
            format!("{name}: {}", lone_surrogate(e))
        })
    }

    /// The line's `type`, for the errors its handling gives.
    pub fn kind(&self) -> &'static str {
        match self {
            FromEditor::SelectionChanged(_) => "selection_changed",
            FromEditor::AtMentioned(_) => "at_mentioned",
            FromEditor::Diagnostics(_) => "diagnostics",
            FromEditor::OpenEditors(_) => "open_editors",
            FromEditor::Respond(_) => "respond",
            FromEditor::DiffDecision(_) => "diff_decision",
            FromEditor::Status => "status",
        }
    }
}

/// `selection_changed`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionMsg {
    pub file_path: String,
    #[serde(default)]
    pub text: String,
    pub selection: RangeMsg,
}

/// A selection's ends.
#[derive(Debug, Serialize, Deserialize)]
pub struct RangeMsg {
    pub start: Position,
    pub end: Position,
}

/// `at_mentioned`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MentionMsg {
    pub file_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_start: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_end: Option<u32>,
}

/// `diagnostics`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DiagnosticsMsg {
    pub uri: String,
    /// Absent: refused; `null`: the editor no longer reports the file.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub diagnostics: Option<Given>,
}

/// A member that is there, `null` included (which a plain `Option` would take for absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Given>, D::Error> {
    Given::deserialize(d).map(Some)
}

/// The most diagnostics one `diagnostics` line may give for its file.
pub const MAX_DIAGNOSTICS_PER_FILE: usize = 10_000;

/// A `diagnostics` member that is present: `null` or a list, read at most one diagnostic past
/// [`MAX_DIAGNOSTICS_PER_FILE`] (the rest is passed over, never built) and each `code` a string
/// or a number (anything else refused, never built).
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Given(pub Option<Vec<Diagnostic>>);

impl<'de> Deserialize<'de> for Given {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Given, D::Error> {
        struct Items;
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = Given;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of diagnostics, or null")
            }
            fn visit_unit<E>(self) -> Result<Given, E> {
                Ok(Given(None))
            }
            fn visit_none<E>(self) -> Result<Given, E> {
                Ok(Given(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Given, A::Error> {
                let mut items = Vec::new();
                while let Some(d) = seq.next_element::<EditorDiagnostic>()? {
                    if items.len() > MAX_DIAGNOSTICS_PER_FILE {
                        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                        break;
                    }
                    items.push(d.into_diagnostic().map_err(serde::de::Error::custom)?);
                }
                Ok(Given(Some(items)))
            }
        }
        d.deserialize_any(Items)
    }
}

/// A diagnostic as an editor writes it, its `code` kept raw until it is known to be small.
#[derive(Deserialize)]
struct EditorDiagnostic {
    message: String,
    severity: String,
    range: claude_ide_bridge::Range,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    code: Option<Box<serde_json::value::RawValue>>,
}

impl EditorDiagnostic {
    fn into_diagnostic(self) -> Result<Diagnostic, &'static str> {
        use serde_json::Value;
        let code = match self.code {
            None => None,
            Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
                Ok(c @ (Value::String(_) | Value::Number(_))) => Some(c),
                Ok(Value::Null) => None,
                _ => return Err("a diagnostic's code must be a string or a number"),
            },
        };
        Ok(Diagnostic {
            message: self.message,
            severity: self.severity,
            range: self.range,
            source: self.source,
            code,
        })
    }
}

/// `open_editors`: the tabs as their text, read by [`Tabs`](super::tabs::Tabs).
#[derive(Debug, Serialize, Deserialize)]
pub struct OpenEditorsMsg<'a> {
    #[serde(borrow, default)]
    pub tabs: Option<Listed<'a>>,
}

/// `respond`.
#[derive(Debug, Serialize, Deserialize)]
pub struct RespondMsg {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `diff_decision`.
#[derive(Debug, Serialize, Deserialize)]
pub struct DecisionMsg {
    pub id: u64,
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

/// What the editor decided about a proposed change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accept,
    Reject,
}

/// Read by hand to say what is expected whatever came instead (`null` was refused as "expected
/// value", naming neither the member nor its values).
impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Decision;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#""decision" to be "accept" or "reject""#)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Decision, E> {
                match v {
                    "accept" => Ok(Decision::Accept),
                    "reject" => Ok(Decision::Reject),
                    _ => Err(E::invalid_value(
                        serde::de::Unexpected::Str(&super::cut_to(v, 100)),
                        &self,
                    )),
                }
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// serde's error `e`, and when it is about a hex escape (what serde says of a lone surrogate:
/// "unexpected end of hex escape", "lone leading surrogate"), what is wrong with it.
fn lone_surrogate(e: String) -> String {
    if !e.contains("hex escape") {
        return e;
    }
    format!(
        "{e} (a \\uD800-\\uDFFF escape must be one half of a surrogate pair: one alone names no \
         character, and cannot be written to a file)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A decision that is not one says which member it is and what it may be.
    #[test]
    fn a_decision_that_is_none_says_what_it_may_be() {
        for value in ["null", r#""maybe""#, "true", r#"["accept"]"#] {
            let line = format!(r#"{{"type":"diff_decision","id":1,"decision":{value}}}"#);
            let e = FromEditor::parse(&line).err().unwrap();
            assert!(
                e.starts_with("diff_decision: invalid")
                    && e.contains(r#"expected "decision" to be "accept" or "reject""#),
                "{e}"
            );
        }
        let ok = r#"{"type":"diff_decision","id":1,"decision":"reject"}"#;
        assert!(matches!(
            FromEditor::parse(ok),
            Ok(FromEditor::DiffDecision(DecisionMsg {
                decision: Decision::Reject,
                ..
            }))
        ));
    }

    /// Every editor message, written as the protocol types say (serde's tagged form), reads back
    /// as the same message: the names `parse` reads are the ones the enum declares.
    #[test]
    fn every_editor_message_reads_back_as_written() {
        let tabs = r#"{"type":"open_editors","tabs":[{"uri":"file:///ws/a.rs","x":1}]}"#;
        let pos = Position::new(1, 2);
        let msgs = [
            FromEditor::SelectionChanged(SelectionMsg {
                file_path: "/ws/a.rs".into(),
                text: "x".into(),
                selection: RangeMsg {
                    start: pos,
                    end: pos,
                },
            }),
            FromEditor::AtMentioned(MentionMsg {
                file_path: "/ws/a.rs".into(),
                line_start: Some(1),
                line_end: Some(3),
            }),
            FromEditor::Diagnostics(DiagnosticsMsg {
                uri: "file:///ws/a.rs".into(),
                diagnostics: Some(Given(None)),
            }),
            FromEditor::parse(tabs).unwrap(),
            FromEditor::Respond(RespondMsg {
                id: 3,
                result: Some(ToolResult::text("ok")),
                text: None,
                error: None,
            }),
            FromEditor::DiffDecision(DecisionMsg {
                id: 4,
                decision: Decision::Accept,
                contents: Some("new\n".into()),
            }),
            FromEditor::Status,
        ];
        let mut kinds: Vec<&str> = msgs.iter().map(FromEditor::kind).collect();
        for m in msgs {
            let line = serde_json::to_string(&m).unwrap();
            let back = FromEditor::parse(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(back.kind(), m.kind());
            assert_eq!(serde_json::to_string(&back).unwrap(), line);
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["type"], m.kind(), "{line}");
        }
        // The names an unknown type's refusal lists are the types read, all of them.
        let mut names = Kind::NAMES.to_vec();
        names.sort_unstable();
        kinds.sort_unstable();
        assert_eq!(names, kinds);
    }

    #[test]
    fn lines_that_are_not_messages_are_refused_saying_why() {
        for (line, why) in [
            ("not json", "malformed JSON"),
            ("[\"status\"]", "expected a JSON object"),
            ("{}", "missing \"type\""),
            (r#"{"type":"nope"}"#, "unknown message type \"nope\""),
            (
                r#"{"type":7}"#,
                "\"type\" must be one string: invalid type: integer `7`",
            ),
            (
                r#"{"type":"status","type":"status"}"#,
                "\"type\" must be one string: duplicate field `type`",
            ),
            (
                r#"{"type":"nope"}"#,
                "unknown message type \"nope\" (one of: selection_changed, at_mentioned,",
            ),
            (r#"{"type":"respond"}"#, "respond: missing field `id`"),
            (
                r#"{"type":"respond","id":"x","text":"hi"}"#,
                r#"respond: invalid type: string "x", expected a non-negative integer (at most 18446744073709551615)"#,
            ),
            (
                r#"{"type":"selection_changed","text":"","filePath":"/w/a","selection":{"start":{"line":-1,"character":0},"end":{"line":0,"character":0},"isEmpty":true}}"#,
                "selection_changed: invalid value: integer `-1`, expected a non-negative integer (at most 4294967295)",
            ),
            (
                r#"{"type":"selection_changed","text":"","filePath":"/w/a","selection":{"start":{"line":5000000000,"character":0},"end":{"line":0,"character":0},"isEmpty":true}}"#,
                "selection_changed: invalid value: integer `5000000000`, expected a non-negative integer (at most 4294967295)",
            ),
            (
                r#"{"type":"diff_decision","id":1,"decision":"maybe"}"#,
                r#"diff_decision: invalid value: string "maybe", expected "decision" to be"#,
            ),
            // A lone surrogate, as an editor's text with half an emoji would be written.
            (
                r#"{"type":"diff_decision","id":1,"decision":"accept","contents":"a\ud83dz"}"#,
                "one half of a surrogate pair",
            ),
            (
                r#"{"type":"diff_decision","id":1,"decision":"accept","contents":"\ude00"}"#,
                "one half of a surrogate pair",
            ),
        ] {
            let e = FromEditor::parse(line).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
        // An unknown type is told with the ones there are.
        let e = FromEditor::parse(r#"{"type":"nope"}"#).unwrap_err();
        assert!(e.contains("diff_decision"), "{e}");
    }

    fn parse(name: &str, args: serde_json::Value) -> ToolCall {
        let tool = claude_ide_bridge::ToolName::from_name(name).unwrap();
        ToolCall::deserialize_arguments(tool, args).unwrap()
    }

    /// Each tool with an editor form is forwarded under its own name with the arguments claude
    /// gave; a tool without one is given back.
    #[test]
    fn editor_calls_keep_their_names_and_arguments() {
        let calls = [
            ("openFile", json!({"filePath": "/ws/a.rs", "startLine": 3})),
            ("open_files", json!({"file_paths": ["/ws/a.rs"]})),
            ("saveDocument", json!({"filePath": "/ws/a.rs"})),
            ("reformat_file", json!({"file_path": "/ws/a.rs"})),
            ("executeCode", json!({"code": "1"})),
            (
                "openDiff",
                json!({"old_file_path": "/a", "new_file_path": "/a",
                    "new_file_contents": "x", "tab_name": "t"}),
            ),
        ];
        for (name, args) in calls {
            let tool = parse(name, args.clone());
            let form = EditorCall::of(tool).unwrap();
            assert_eq!(form.name(), name);
            let line = ToEditor::ToolCall {
                id: 1,
                conn: 2,
                name: form.name(),
                arguments: &form,
            };
            let v: serde_json::Value = serde_json::from_slice(&line.to_line()).unwrap();
            assert_eq!(v["type"], "tool_call");
            assert_eq!(v["name"], name);
            for (k, given) in args.as_object().unwrap() {
                assert_eq!(&v["arguments"][k], given, "{name}.{k}");
            }
        }
        for name in ["getDiagnostics", "close_tab", "getOpenEditors"] {
            let args = match name {
                "close_tab" => json!({"tab_name": "t"}),
                _ => json!({}),
            };
            let tool = parse(name, args);
            assert!(EditorCall::of(tool).is_err(), "{name} has no editor form");
        }
    }
}
